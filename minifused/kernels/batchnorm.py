"""BatchNorm over a C-contiguous (N, C, ...) array, or a channels-last (N, C, H, W) one: per-channel statistics
over N and the S trailing positions, fused with the affine and ReLU.

``batch_norm_forward(x, weight, bias, running_mean, running_var, training, factor, eps, relu, count, keep_factors)
-> (y, mean, rstd, factors)``: in training the batch's mean and biased variance normalize, and the running
statistics (when given) move by ``factor`` towards the mean and the *unbiased* variance, in place (PyTorch's
rule), and ``count`` (an int64 scalar array, the module's ``num_batches_tracked``), when given, goes up by
one in the same kernel; otherwise the running statistics normalize. ``mean``/``rstd`` (fp32, fp64 for fp64
input, one per channel) are what the backward needs, and with ``relu`` the ReLU's ``factors``: a (2, C) array
(mean's dtype) of each channel's scale (rstd * weight) and shift (bias), y = relu((x - mean) * scale + shift). No mask:
the backward recomputes where the ReLU passed from x, the mean and the factors, as the forward decided (the kernels'
expression, one rounding; the references': :func:`relu_passes`), so that a BatchNorm+ReLU keeps nothing beside the x
its backward needs anyway. ``keep_factors`` (without ``relu``): the factors come back too, y without the ReLU (for a
separate ReLU that may hand its backward to this BatchNorm's: ops.batchnorm). y comes back in x's layout.

``batch_norm_backward(dy, x, weight, mean, rstd, factors, batch_stats, need_dx, need_dw, wdtype) -> (dx, dw, db)``:
with ``batch_stats`` (training) dx carries the terms of the mean and variance; otherwise they were constants.
dy is in x's layout, and so is dx. dw and db come in ``wdtype``, the parameters' dtype (weight and bias share
one; a bias without a weight has one too, which need not be x's), by default weight's, else x's.

An empty x (no element) has no statistics: y is empty, the running statistics stay, ``count`` still goes up
(PyTorch's rules); the gradients are empty and zeros.

The CUDA path: a partial-sums pass (a grid of (blocks per channel, channel); every block sums a fixed
slice of its channel, shifted by the channel's first element so the squares do not cancel) writes one row
of partials per block; a per-channel pass combines the rows in a fixed order in float64 (deterministic, no
atomics) into mean/rstd and the running statistics, or into dw/db and the dx coefficients; an elementwise
pass writes y or dx. A channel small enough for the shared memory of one block, or of a
thread-block cluster of up to :data:`MAX_CLUSTER` blocks on sm_90+ (:data:`SLICE_BYTES` each), takes one
launch instead: each block caches its slice of the channel (the backward's of dy and x), the cluster reduces
the slices over distributed shared memory, and each block writes its slice (the inputs are read once, not
twice; see :func:`_per_channel` for where the backward takes a cluster). NumPy arrays and float64 CuPy
arrays take the reference (written for either array module). Inputs are assumed valid and C-contiguous or
channels-last (the functional layer checks).

A channels-last x (``kernels.is_channels_last``) is read as its memory, (M, C) rows with M = N*H*W, by the
kernels compiled with ``MF_NHWC=1``: ``bn_partial_nhwc`` (a block sums a slice of the rows over a tile of the
channels, see :func:`_split_nhwc`), ``bn_fold_forward_nhwc`` / ``bn_fold_backward_nhwc`` (add the slices' sums in a
fixed order, in parallel, and finalize each channel as the finalize kernels do), and the elementwise passes with
vectors along the channels (:func:`_grid_nhwc`). No cached-channel launch (a channel is strided there): where a tile of
the channels over all M rows fits the shared memory of a cluster (:func:`_per_tile`), ``bn_tile_forward`` /
``bn_tile_backward`` take one launch instead, as the cached-channel kernels do NCHW. The references take the same
(M, C, 1) view, so their flat order is the memory's.
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from .. import backend
from . import (ARG, F32, SM_SHARED_BYTES, Prepared, acc_dtype, address as _addr, aligned_bytes, c_contiguous, ctype,
               empty_channels_last, get_kernel, has_pdl, is_channels_last, l2_bytes, sm_count)

# ---------------------------------------------------------------- references


def _affine(xf, mean, factors):
    """(x - mean) * scale + shift of an (N, C, S) ``xf`` in the statistics' dtype, as the kernels compute it: a float32
    difference, then the product and the sum with one rounding (the kernels' fmaf), here in float64 (the product of
    two floats is exact there, and the sum's sign, which the ReLU reads, is the exact sum's); float64 statistics
    (float64 input) in float64."""
    scale, shift = (a[None, :, None] for a in factors)
    d = xf - mean[None, :, None]
    return (d.astype(np.float64) * scale + shift).astype(xf.dtype) if xf.dtype != np.float64 else d * scale + shift


def relu_passes(x, mean, factors):
    """Where a BatchNorm's fused ReLU passed its input (an element's affine above zero, or NaN, which keeps its
    gradient as in PyTorch), from an (N, C, S) ``x`` (or the channels-last (M, C, 1) view) and its statistics: the
    kernels' decision, recomputed as the backward recomputes it (either array module)."""
    return ~(_affine(x.astype(mean.dtype), mean, factors) <= 0)


# an inf or NaN in x gives NaN statistics for its channel, as on the GPU and in PyTorch: no NumPy warning about it
@np.errstate(invalid="ignore", over="ignore")
def batch_norm_forward_ref(x, weight, bias, running_mean, running_var, training, factor, eps, relu=False,
                           count=None, keep_factors=False):
    xp = backend.array_module(x)
    acc = acc_dtype(x.dtype).type
    xf = x.astype(acc)
    m = x.shape[0] * x.shape[2]
    if training:
        # an empty batch: zeros stand in for its statistics (no element reads them). Summed in float64, as
        # PyTorch's CPU kernel sums a float32 input in double: a float32 sum over (N, S) strays by a few ulps of
        # the mean, which a large mean over a small spread magnifies in every output
        mean = xf.mean(axis=(0, 2), dtype=np.float64).astype(acc) if m else xp.zeros(x.shape[1], acc)
        var = ((xf - mean[None, :, None]) ** 2).mean(axis=(0, 2), dtype=np.float64).astype(acc) if m else mean
        if running_mean is not None and m:
            unbiased = var * (m / (m - 1)) if m > 1 else var
            running_mean[...] = ((1 - factor) * running_mean.astype(np.float64)
                                 + factor * mean.astype(np.float64)).astype(running_mean.dtype)
            running_var[...] = ((1 - factor) * running_var.astype(np.float64)
                                + factor * unbiased.astype(np.float64)).astype(running_var.dtype)
        if count is not None:
            count += 1
    else:
        mean, var = running_mean.astype(acc), running_var.astype(acc)
    rstd = (1 / xp.sqrt(var + acc(eps))).astype(acc)
    mean = mean.astype(acc)
    factors = xp.stack([rstd if weight is None else rstd * weight.astype(acc),
                        xp.zeros_like(rstd) if bias is None else bias.astype(acc)])
    y = _affine(xf, mean, factors)
    if relu:
        y = backend.where(y <= 0, acc(0), y)  # (NaN kept, as relu_passes keeps its gradient)
    return y.astype(x.dtype), mean, rstd, factors if relu or keep_factors else None


def _grad_dtype(wdtype, weight, x):
    """dw's and db's dtype: ``wdtype`` when given, else weight's, else x's (see the module's doc)."""
    return wdtype if wdtype is not None else (x if weight is None else weight).dtype


@np.errstate(invalid="ignore", over="ignore")
def batch_norm_backward_ref(dy, x, weight, mean, rstd, factors, batch_stats, need_dx=True, need_dw=True,
                            wdtype=None):
    acc = acc_dtype(x.dtype).type
    g = dy.astype(acc)
    if factors is not None:
        g = backend.where(relu_passes(x, mean, factors), g, acc(0))
    xhat = (x.astype(acc) - mean[None, :, None]) * rstd[None, :, None]
    # summed in float64, as the forward's statistics (channels-last, the (M, C, 1) view's rows add one by one)
    sum_g = g.sum(axis=(0, 2), dtype=np.float64).astype(acc)
    sum_gx = (g * xhat).sum(axis=(0, 2), dtype=np.float64).astype(acc)
    dx = dw = db = None
    if need_dx:
        scale = rstd if weight is None else rstd * weight.astype(acc)
        d = g
        if batch_stats and g.size:  # (an empty batch's dx is empty, with no statistics' terms to divide by M = 0)
            m = x.shape[0] * x.shape[2]
            d = g - (sum_g / m)[None, :, None] - xhat * (sum_gx / m)[None, :, None]
        dx = (d * scale[None, :, None]).astype(x.dtype)
    if need_dw:
        wdtype = _grad_dtype(wdtype, weight, x)
        dw = None if weight is None else sum_gx.astype(wdtype)
        db = sum_g.astype(wdtype)
    return dx, dw, db


# ---------------------------------------------------------------- CUDA
_THREADS = 256
_FACTORS_ONLY = 2  # the one-launch forwards' flag (batchnorm.cu): the ReLU's factors written, not applied


#: Shared memory per block of the cached-channel kernels (bn_channel_forward caches x in it, bn_channel_backward
#: dy and x): three blocks fit an SM.
SLICE_BYTES = 64 * 1024
#: Blocks per channel at most: past the portable cluster size of 8, the 16 that sm_90 takes (the kernels are
#: marked as allowing it).
MAX_CLUSTER = 16


class ChannelPlan(NamedTuple):
    """The cached-channel kernels' launch: ``cluster`` blocks per channel (a thread-block cluster when more
    than one), ``threads`` per block, ``chunk`` vectors of the channel per block (a multiple of 32), the dynamic
    shared memory per block, and ``min_blocks``: the
    1024-thread blocks per SM the kernel's registers must allow (2 caps them at 32 a thread)."""
    cluster: int
    threads: int
    chunk: int
    slice_bytes: int
    min_blocks: int = 1


@functools.cache
def _kernels(dtype, wdtype, vec, wide, cluster=1, nhwc=False, min_blocks=1):
    opts = (f"-DMF_T={ctype(dtype)}", f"-DMF_W={ctype(wdtype)}", f"-DMF_VEC={vec}", f"-DMF_WIDE={int(wide)}",
            f"-DMF_CLUSTER={cluster}", f"-DMF_CHANNEL_BLOCKS={min_blocks}") + (("-DMF_NHWC=1",) if nhwc else ())
    names = ("bn_finalize_forward", "bn_apply", "bn_finalize_backward", "bn_backward_dx")
    cached = ("bn_tile_forward", "bn_tile_backward") if nhwc else ("bn_channel_forward", "bn_channel_backward")
    names += (("bn_partial_nhwc", "bn_fold_forward_nhwc", "bn_fold_backward_nhwc") if nhwc else ("bn_partial",))
    kernels = {name: get_kernel("batchnorm.cu", name, opts) for name in names + cached}
    for name in cached:
        kernels[name].max_dynamic_shared_size_bytes = TILE_SLICE_BYTES if nhwc else SLICE_BYTES
        if cluster > 8:  # past the portable cluster size (sm_90 takes 16)
            from cupy_backends.cuda.api.driver import funcSetAttribute
            funcSetAttribute(kernels[name].kernel.ptr, _NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
    return kernels


_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14  # CUfunction_attribute


def _chunk(vectors, blocks):
    return (-(-vectors // blocks) + 31) // 32 * 32 if vectors > 0 else 32


def _per_channel(shape, itemsize, vec, clusters, sms, tensors=1, l2=0):
    """The :class:`ChannelPlan` of the cached-channel kernels for an (N, C, S) input of ``itemsize``-byte
    elements with ``vec`` elements per vector, caching ``tensors`` arrays (the forward x, the backward dy and
    x) in :data:`SLICE_BYTES` per block at most, or None when a channel does not fit or the passes pay more.
    ``clusters`` (a device that has them): a channel too large for one block is split over the fewest blocks
    of a cluster that hold it, 512 threads each. The backward takes a cluster only where dy and x overflow the
    L2 (``l2`` bytes; 0 for eager launches, see :func:`_launches`): where they fit it, the passes' second reads
    come from the L2, and they measured faster than the cluster's slices (loaded, reduced, then written: a
    block's loads and stores do not overlap).
    The forward: a channel on one or two blocks takes 1024 threads per block where C is at most twice the SMs
    (its kernel fits two such blocks an SM), else 512 (four blocks an SM, a second wave avoided); larger
    clusters take 512 (measured faster); registers capped at 32 a thread where shared memory fits 2048 threads
    an SM. The backward: see the comment below. A fixed function of the shape and device (so sums are
    reproducible)."""
    n, c, s = shape
    vectors = n * s // vec
    vbytes = vec * itemsize * tensors
    top = MAX_CLUSTER if clusters else 1
    k = 1
    while k < top and _chunk(vectors, k) * vbytes > SLICE_BYTES:
        k *= 2
    chunk = _chunk(vectors, k)
    if chunk * vbytes > SLICE_BYTES or (k > 1 and tensors > 1 and n * c * s * itemsize * tensors <= l2):
        return None
    if tensors == 1:
        threads = int(min(1024 if k <= 2 and c <= 2 * sms else 512, chunk))
        # registers capped at 32 a thread where shared memory lets 2048 threads in (uncapped it takes a few more)
        full = (SM_SHARED_BYTES // (chunk * vbytes + 1024)) * threads >= 2048
        return ChannelPlan(k, threads, chunk, chunk * vbytes, 2 if full else 1)
    # The backward's block takes over 32 registers a thread uncapped: one block of 1024 threads an SM, two of
    # 512. Its channels spread over twice the blocks while they leave half the SMs idle; 1024 threads while
    # the grid fits one block an SM and each thread loads two vectors or more; past one wave of two blocks
    # an SM, the registers capped at 32 (three blocks of 512 an SM, by shared memory; measured faster
    # there, slower where the capped build's third block per SM spreads a single wave unevenly; bench/bn_sweep.py
    # times the alternatives)
    while k < top and 2 * c * k <= sms and vectors >= 2 * k * 1024:  # (each block keeps 1024 vectors or more)
        k *= 2
    chunk = _chunk(vectors, k)
    threads = 1024 if c * k <= sms and chunk >= 2048 else 512
    return ChannelPlan(k, int(min(threads, chunk)), chunk, chunk * vbytes, 2 if c * k > 2 * sms else 1)


#: Shared memory per block of the cached-tile kernels (channels-last): two blocks fit an SM, as their launch bounds
#: do (the 64 registers a thread that their sums of VEC channels take without spilling)
TILE_SLICE_BYTES = 88 * 1024
_TILE_THREADS = 512


class TilePlan(NamedTuple):
    """The cached-tile kernels' launch (channels-last): ``tiles`` tiles of ``cols`` vectors of a row (16 bytes each),
    ``cluster`` blocks per tile (a thread-block cluster when more than one), ``threads`` per block, ``chunk`` rows
    per block (the last block fewer) and the dynamic shared memory per block."""
    tiles: int
    cols: int
    cluster: int
    threads: int
    chunk: int
    slice_bytes: int


def _per_tile(m, c, itemsize, vec, clusters, sms, tensors=1):
    """The :class:`TilePlan` of the cached-tile kernels for a channels-last input of ``m`` rows of ``c`` channels,
    caching ``tensors`` arrays (the forward x, the backward dy and x) in :data:`TILE_SLICE_BYTES` per block, or None
    where no tile fits. A tile is 4 or 8 whole 16-byte vectors of a row (64 or 128 bytes: tiles of 32, one sector a
    row, measured slower than the passes at ResNet-18's 8x8 maps of a batch of 256 and 512). The fewest blocks per
    tile first (``clusters``: a device that has them; the fewer a cluster's blocks, the cheaper its barrier), then the
    widest tile. Each tile's blocks double while the grid leaves half the SMs idle and each block keeps two rows of
    vectors per thread (bench/bn_sweep.py --layout cl times the alternatives). A fixed function of the shape and
    device (so sums are reproducible)."""
    if vec * itemsize != 16 or m == 0:
        return None
    cv, top = c // vec, MAX_CLUSTER if clusters else 1
    fits = []
    for cols in (8, 4):
        if cv % cols:
            continue
        row, k = cols * 16 * tensors, 1
        while k < top and -(-m // k) * row > TILE_SLICE_BYTES:
            k *= 2
        if -(-m // k) * row <= TILE_SLICE_BYTES:
            fits.append((k, -cols))
    if not fits:
        return None
    k, cols = min(fits)
    cols, tiles = -cols, cv // -cols
    while k < top and 2 * tiles * k <= sms and -(-m // (2 * k)) * cols >= 2 * _TILE_THREADS:
        k *= 2
    chunk = -(-m // k)
    threads = min(_TILE_THREADS, max(64, -(-chunk * cols // 32) * 32))
    return TilePlan(tiles, cols, k, threads, chunk, chunk * cols * 16 * tensors)


def _split(n, c, s, sms):
    """Blocks per channel: enough blocks for about four waves over the SMs, each with at least a few
    thousand elements (fewer for small inputs), a fixed function of the shape (so sums are reproducible)."""
    per_channel = n * s
    want = max(1, 4 * sms // max(c, 1))
    return int(max(1, min(want, per_channel // 4096, 1024)))


#: Bytes of a row that a tile of ``bn_partial_nhwc`` spans: a 128-byte line
_TILE_BYTES = 128
#: Rows that a slice of ``bn_partial_nhwc`` sums at least: its partials (two floats a channel) then weigh a
#: thirty-second of the slice's bytes or less, so that writing and folding them stays small beside the pass
_MIN_ROWS = 128


def _split_nhwc(m, c, vec, itemsize, sms):
    """(slices of the rows, channel tiles, vector columns per tile) of ``bn_partial_nhwc`` over a channels-last
    input of ``m`` rows of ``c`` channels of ``itemsize`` bytes, ``vec`` per vector: a tile spans
    :data:`_TILE_BYTES` of a row (fewer where the row is shorter), so that the tiles, not the slices, spread a
    wide row over the GPU and a slice keeps :data:`_MIN_ROWS` rows (fewer for small inputs). The kernel's launch
    bounds fit four blocks on an SM, so slices x tiles of about four blocks per SM fill the GPU in one round of
    equal blocks. A fixed function of the shape and device (so sums are reproducible)."""
    cv = c // vec
    cols = max(1, min(cv, _TILE_BYTES // (vec * itemsize), _THREADS))
    tiles = -(-cv // cols)
    slices = min(4 * sms // tiles, m // _MIN_ROWS, 1024)
    return int(max(1, slices)), int(tiles), int(cols)


def _grid(total, sms):
    """Blocks of the elementwise passes: one vector per thread up to 32 blocks per SM (then grid-stride)."""
    return int(max(1, min(-(-total // _THREADS), 32 * sms)))


def _grid_nhwc(total, d, sms, per_trip=1):
    """Blocks of the channels-last elementwise passes over ``total`` vectors, ``d`` per row, ``per_trip`` vectors
    a grid's stride apart per thread and trip: up to four blocks per SM; past that grid-stride, with the stride a
    multiple of ``d`` (the blocks a multiple of d / gcd(d, threads)), so that each thread stays on its channels and
    loads their factors once (per-vector loads of VEC channels' factors cost more than the vector's own traffic;
    more blocks, fewer trips per thread to share those loads). With two vectors a trip the stride is such a multiple
    even where one trip covers the input (the two share their channels)."""
    need, step = -(-total // (per_trip * _THREADS)), d // math.gcd(d, _THREADS)
    blocks = min(need, 4 * sms)
    if blocks < need:
        blocks = max(step, blocks // step * step)
    elif per_trip > 1:
        blocks = -(-blocks // step) * step
    return int(max(1, blocks))


class _Launches(NamedTuple):
    """A call's launches, prepared once per signature (the shape, dtypes, vector width, mode and device):
    settling them per call cost host time comparable to the launch's (eager training steps are bound by host
    time). Arrays are passed by address (0 for an absent one)."""
    channel: Prepared | None  # the one-launch path (a cached channel, channels-last a cached tile), or None: passes
    partial: Prepared | None  # the passes: per-block partial sums (x, dy, factors, mean, partials)
    finalize: Prepared | None  # the per-channel statistics (forward) or coefficients (backward) from them
    apply: Prepared | None  # y (forward) or dx (backward), elementwise
    split: int  # blocks per channel (row slices channels-last) of the partial-sums pass
    #: channels-last training: the slices' sums folded and finalized in one launch, the forward's (raw, x,
    #: running mean, running var, count, mean, rstd, eps, factor, update), the backward's as its finalize
    fold: Prepared | None = None


@functools.cache
def _launches(shape, dtype, wdtype, vec, backward, training, dev, nhwc=False, eager=False):
    """``shape`` (N, C, S); channels-last (``nhwc``) it is (N*H*W, C, 1), which the finalize kernels then read
    right (their shift x[c * S] is x[n=0, h=0, w=0, c] and N*S the count). ``eager``: launched outside a graph
    capture, where the backward takes the cached-channel launch wherever a channel fits it, even where dy and x
    fit the L2 (where a graph's backward takes the passes, faster on the device): one launch instead of three,
    whose host time an eager step, bound by it at the sizes that fit the L2, pays."""
    n, c, s = shape
    sms = sm_count(dev)
    wide = n * c * s >= 2 ** 32
    tile = None
    if nhwc:
        channel = None
        if training or backward:
            tile = _per_tile(n, c, dtype.itemsize, vec, has_pdl(dev), sms, 2 if backward else 1)
    elif backward:
        channel = _per_channel(shape, dtype.itemsize, vec, has_pdl(dev), sms, 2, 0 if eager else l2_bytes(dev))
    else:
        channel = _per_channel(shape, dtype.itemsize, vec, has_pdl(dev), sms) if training else None
    k = _kernels(dtype, wdtype, vec, wide, channel.cluster if channel else tile.cluster if tile else 1, nhwc,
                 channel.min_blocks if channel else 1)
    n_, c_, s_, total = np.int64(n), np.int64(c), np.int64(s), np.int64(n * c * s)
    split, tiles, cols = _split_nhwc(n, c, vec, dtype.itemsize, sms) if nhwc else (_split(n, c, s, sms), c, 0)
    # (channels-last the elementwise passes take two vectors a trip: see bn_apply and bn_backward_dx)
    blocks = (_grid_nhwc(n * c // vec, c // vec, sms, 2) if nhwc else _grid(n * c * s // vec, sms),)

    def prepared(name, grid, block, params, smem=0):
        return Prepared(k[name], grid, block, params, smem, pdl=True)

    if channel:  # one launch
        if backward:  # (dy, x, factors, mean, rstd, w, dx, dw, db), batch statistics
            one = prepared("bn_channel_backward", (c * channel.cluster,), (channel.threads,),
                           (ARG,) * 9 + (n_, c_, s_, np.int64(channel.chunk), ARG), channel.slice_bytes)
        else:  # (x, running mean, running var, count, w, b, y, factors, mean, rstd), eps, factor, update
            one = prepared("bn_channel_forward", (c * channel.cluster,), (channel.threads,),
                           (ARG,) * 10 + (n_, c_, s_, np.int64(channel.chunk), F32, F32, ARG), channel.slice_bytes)
        return _Launches(one, None, None, None, split)
    if tile:  # one launch, as the cached-channel kernels' (the same arguments): rows, channels, tile, rows per block
        grid, block, geometry = (tile.tiles * tile.cluster,), (tile.threads,), (n_, c_, np.int32(tile.cols),
                                                                                 np.int32(tile.chunk))
        one = (prepared("bn_tile_backward", grid, block, (ARG,) * 9 + geometry + (ARG,), tile.slice_bytes)
               if backward else
               prepared("bn_tile_forward", grid, block, (ARG,) * 10 + geometry + (F32, F32, ARG), tile.slice_bytes))
        return _Launches(one, None, None, None, 0)
    fold = None
    if nhwc:  # (x, dy, factors, mean, raw partials), rows, channels, slices, vector columns per tile
        partial = prepared("bn_partial_nhwc", (split, tiles), (_THREADS,),
                           (ARG,) * 5 + (n_, c_, np.int32(split), np.int32(cols)))
        folds = (-(-2 * c // 32),), (1024,)
        fold = (prepared("bn_fold_backward_nhwc", *folds, (ARG,) * 6 + (n_, c_, np.int32(split), ARG)) if backward
                else prepared("bn_fold_forward_nhwc", *folds, (ARG,) * 10 + (n_, c_, np.int32(split), F32, F32, ARG)))
    else:  # (x, dy, factors, mean, partials), N, C, S, rows
        partial = prepared("bn_partial", (split, tiles), (_THREADS,), (ARG,) * 5 + (n_, c_, s_, np.int32(split)))
    warps = (-(-c // 32),)  # (a thread per channel)
    if backward:  # (partials, w, rstd, dw, db, coefficients), batch statistics; then (dy, x, factors, mean, coef, dx)
        finalize = (fold if nhwc else
                    prepared("bn_finalize_backward", warps, (32,), (ARG,) * 6 + (n_, c_, s_, np.int32(split), ARG)))
        apply = prepared("bn_backward_dx", blocks, (_THREADS,), (ARG,) * 6 + (total, c_, s_))
    else:  # (partials, x, running mean, running var, count, w, b, mean, rstd, factors), blocks, eps, factor,
        # update, training; then (x, mean, rstd, w, b, y, factors)
        finalize = prepared("bn_finalize_forward", warps, (32,), (ARG,) * 10 + (n_, c_, s_, ARG, F32, F32, ARG, ARG))
        apply = prepared("bn_apply", blocks, (_THREADS,), (ARG,) * 7 + (total, c_, s_))
    return _Launches(None, partial, finalize, apply, split, fold)


@functools.cache
def _plan(shape, nhwc, dtype, wdtype, aligned, backward, training, dev, eager=False):
    """(the :class:`_Launches`, C) of a call on an array of ``shape``, channels-last (``nhwc``)
    or C-contiguous, whose operands all start 16-byte ``aligned`` (or not): the kernels' (N, C, S) (channels-last
    the memory's (N*H*W, C, 1)), the elements per 16-byte vector (1 where a row of S elements, or of C channels-last,
    is not whole vectors, or an operand is unaligned) and :func:`_launches`, settled once per signature (every call
    of an eager step asks)."""
    n, c, size = shape[0], shape[1], math.prod(shape)
    geometry, run = ((size // c, c, 1), c) if nhwc else ((n, c, size // (n * c)), size // (n * c))
    vec = 16 // dtype.itemsize
    vec = vec if aligned and run % vec == 0 else 1
    return _launches(geometry, dtype, wdtype, vec, backward, training, dev, nhwc, eager), c


def _batch_norm_forward_cuda(x, weight, bias, running_mean, running_var, training, factor, eps, relu, count,
                             keep_factors):
    import cupy

    first = weight if weight is not None else bias if bias is not None else running_mean  # (they share a dtype)
    wdtype = x.dtype if first is None else first.dtype
    xa, nhwc = x.data.ptr, is_channels_last(x)
    plan, c = _plan(x.shape, nhwc, x.dtype, wdtype, xa % 16 == 0, False, training, x.data.device_id)
    # outputs by cupy.ndarray (less host time than cupy.empty); the kernels write every element
    y = empty_channels_last(x.shape, x.dtype) if nhwc else cupy.ndarray(x.shape, x.dtype)
    # one allocation for mean, rstd and the ReLU's factors (each costs host time), each part aligned
    part_bytes = aligned_bytes(4 * c)
    with_factors = relu or keep_factors
    stats = cupy.cuda.alloc(part_bytes * (4 if with_factors else 2))
    mean = cupy.ndarray((c,), np.float32, stats)
    rstd = cupy.ndarray((c,), np.float32, stats + part_bytes)
    factors = cupy.ndarray((2, c), np.float32, stats + 2 * part_bytes) if with_factors else None
    update = running_mean is not None
    ya, ma, ra = y.data.ptr, mean.data.ptr, rstd.data.ptr
    wa = 0 if weight is None else weight.data.ptr
    ba = 0 if bias is None else bias.data.ptr
    fa = _addr(factors)
    rm, rv, cnt = (running_mean.data.ptr, running_var.data.ptr, _addr(count)) if update else (0, 0, 0)
    if plan.channel:  # one launch: statistics, running statistics, the factors and y
        plan.channel(xa, rm, rv, cnt, wa, ba, ya, fa, ma, ra, eps, factor,
                     int(update) | (0 if relu or not keep_factors else _FACTORS_ONLY))
        return y, mean, rstd, factors
    if training:
        part = cupy.cuda.alloc(c * plan.split * 2 * 4)  # the partial sums: (C, rows, 2), channels-last (rows, C, 2)
        plan.partial(xa, 0, 0, 0, part.ptr)
        if plan.fold:
            plan.fold(part.ptr, xa, rm, rv, cnt, wa, ba, ma, ra, fa, eps, factor, int(update))
        else:
            plan.finalize(part.ptr, xa, rm, rv, cnt, wa, ba, ma, ra, fa, plan.split, eps, factor, int(update), 1)
    else:
        plan.finalize(0, xa, running_mean.data.ptr, running_var.data.ptr, 0, wa, ba, ma, ra, fa, 0, eps, 0.0, 0, 0)
    plan.apply(xa, ma, ra, wa, ba, ya, fa if relu else 0)  # (the finalize wrote kept factors: no ReLU here)
    return y, mean, rstd, factors


def _batch_norm_backward_cuda(dy, x, weight, mean, rstd, factors, batch_stats, need_dx, need_dw, wdtype):
    import cupy

    wdtype = _grad_dtype(wdtype, weight, x)
    dya, xa, nhwc = dy.data.ptr, x.data.ptr, is_channels_last(x)
    plan, c = _plan(x.shape, nhwc, x.dtype, wdtype, (xa | dya) % 16 == 0, True, True, x.data.device_id,
                    not backend.is_capturing())
    dx = (empty_channels_last(x.shape, x.dtype) if nhwc else cupy.ndarray(x.shape, x.dtype)) if need_dx else None
    dw = cupy.ndarray((c,), wdtype) if need_dw and weight is not None else None
    db = cupy.ndarray((c,), wdtype) if need_dw else None
    fa, ma, ra = _addr(factors), mean.data.ptr, rstd.data.ptr
    wa = 0 if weight is None else weight.data.ptr
    dxa, dwa, dba = _addr(dx), _addr(dw), _addr(db)
    if plan.channel:  # one launch: the sums, dw, db and dx
        plan.channel(dya, xa, fa, ma, ra, wa, dxa, dwa, dba, int(batch_stats))
        return dx, dw, db
    part_bytes = aligned_bytes(c * plan.split * 2 * 4)
    tmp = cupy.cuda.alloc(part_bytes + c * 3 * 4)  # the partial sums (as the forward's), then (C, 3) coefficients
    part, coef = tmp.ptr, tmp.ptr + part_bytes
    plan.partial(xa, dya, fa, ma, part)
    plan.finalize(part, wa, ra, dwa, dba, coef, int(batch_stats))  # (channels-last: the fold, finalizing)
    if need_dx:
        plan.apply(dya, xa, fa, ma, coef, dxa)
    return dx, dw, db


def _on_kernels(x):
    return backend.is_cuda_array(x) and x.dtype != np.float64


def _as3(a, nhwc):
    """(N, C, ...) as (N, C, S), or a channels-last (N, C, H, W) as the (N*H*W, C, 1) view of its memory (the
    references' views: their flat order is the memory's)."""
    if nhwc:
        n, c, h, w = a.shape
        return a.transpose(0, 2, 3, 1).reshape(n * h * w, c, 1)
    return a.reshape(a.shape[0], a.shape[1], math.prod(a.shape[2:]))  # (-1 is ambiguous for an empty batch)


def _from3(a, shape, nhwc):
    """A reference's C-contiguous (N, C, S) or (N*H*W, C, 1) result as ``shape``, in the input's layout."""
    if nhwc:
        n, c, h, w = shape
        return a.reshape(n, h, w, c).transpose(0, 3, 1, 2)
    return a.reshape(shape)


def batch_norm_forward(x, weight, bias, running_mean, running_var, training, factor, eps, relu=False, count=None,
                       keep_factors=False):
    if not _on_kernels(x) or x.size == 0:
        nhwc = is_channels_last(x)
        y, mean, rstd, factors = batch_norm_forward_ref(_as3(x, nhwc), weight, bias, running_mean, running_var,
                                                        training, factor, eps, relu, count, keep_factors)
        return _from3(y, x.shape, nhwc), mean, rstd, factors
    weight, bias = _dense_vector(weight), _dense_vector(bias)
    if running_mean is not None and not (c_contiguous(running_mean) and c_contiguous(running_var)):
        # strided running statistics (a view): the kernels read and write dense vectors, so they update dense
        # copies, written back
        rm, rv = _dense_vector(running_mean), _dense_vector(running_var)
        out = _batch_norm_forward_cuda(x, weight, bias, rm, rv, training, factor, eps, relu, count, keep_factors)
        if training:
            running_mean[...], running_var[...] = rm, rv
        return out
    return _batch_norm_forward_cuda(x, weight, bias, running_mean, running_var, training, factor, eps, relu, count,
                                    keep_factors)


def _dense_vector(a):
    """``a`` (a channel vector, or None) where its elements are dense, else a contiguous copy: the kernels read
    the vectors as dense (a strided view's elements are not)."""
    return a if a is None or c_contiguous(a) else backend.array_module(a).ascontiguousarray(a)


def batch_norm_backward(dy, x, weight, mean, rstd, factors, batch_stats, need_dx=True, need_dw=True, wdtype=None):
    if not _on_kernels(x) or x.size == 0:
        nhwc = is_channels_last(x)
        dx, dw, db = batch_norm_backward_ref(_as3(dy, nhwc), _as3(x, nhwc), weight, mean, rstd, factors,
                                             batch_stats, need_dx, need_dw, wdtype)
        return None if dx is None else _from3(dx, x.shape, nhwc), dw, db
    return _batch_norm_backward_cuda(dy, x, _dense_vector(weight), mean, rstd, factors, batch_stats, need_dx,
                                     need_dw, wdtype)
