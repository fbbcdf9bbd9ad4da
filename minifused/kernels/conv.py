"""Conv2d primitives on raw NCHW arrays: forward (bias, ReLU and its bit-mask fused) and backward.

``conv2d_forward(x, w, bias, stride, padding, dilation, groups, activation, want_mask) -> (y, mask)``
``conv2d_backward(dy, x, w, stride, padding, dilation, groups, mask, need_dx, need_dw, need_db)
-> (dx, dw, db)``, and the two halves of the backward on their own for benchmarks:
``conv2d_backward_data(dy, w, x_shape, ...)``, ``conv2d_backward_filter(dy, x, w_shape, ...)``.
Each takes a keyword ``config``, a :class:`ConvConfig` (GPU tuning; the default is production's).

Shapes as PyTorch: x (N, C, H, W), w (K, C/groups, R, S), y (N, K, P, Q). ``stride``,
``padding``, ``dilation`` are (h, w) pairs. ``mask`` is the ReLU mask, bit-packed as :mod:`.conv_ref`
describes; the backward multiplies ``dy`` by it before anything else.

Dispatch on the array module: NumPy arrays (and float64 CuPy arrays) go to the references of
:mod:`.conv_ref`; CuPy float16 / bfloat16 / float32 arrays to the CUDA kernels on the paths that
:mod:`.conv_plan` describes and plans. float32 runs on TF32 tensor cores where
``backend.tf32_conv.allow_tf32`` is set (read at call time), else on FFMA, or for 3x3 filters of at least 32
channels each way (stride 1; the stride-2 forward at padding 1) by Winograd's transforms and cuBLASLt's
strict-fp32 GEMMs (:mod:`.winograd`) and for 1x1 filters by those GEMMs alone or, strided forwards of few
channels, by conv1x1.cu's own SGEMM (:mod:`.conv1x1`; a forward without a fused activation, a backward without
a ReLU mask). The forward settles its path and
launch constants once per call signature, config and TF32 setting (:func:`_forward_launcher`); a call then
only allocates and launches. Inputs are assumed valid and C-contiguous.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import backend
from . import (ARG, Prepared, aligned_bytes, c_contiguous, channels_last_strided, empty_channels_last, grid_1d,
               is_channels_last, sm_count, to_channels_last, to_layout)
from .conv_plan import (DEFAULT_CONFIG, DIRECT_PIX, DIRECT_PIXELS, GPU_DTYPES, GRID_Z, THREADS, ConvConfig, ConvMode,
                        Epilogue, block_diagonal_applies, direct_filter_gradient, direct_plan, fits_int32, gemm_plan,
                        geometry, ints, is_direct, nchw_plan, out_size, pack_tile, padded_channels, uses_nchw_forward,
                        util_kernel)
from . import columns, conv1x1, conv_depthwise, winograd
from .conv_tma import launch_tma, launch_tma_wgrad, tma_plan, tma_wgrad_plan, wgrad_partials
from .conv_ref import (conv2d_backward_data_ref, conv2d_backward_filter_ref, conv2d_backward_ref, conv2d_forward_ref,
                       pack_mask, unpack_mask)

__all__ = ["ConvConfig", "DEFAULT_CONFIG", "conv2d_forward", "conv2d_backward", "conv2d_backward_data",
           "conv2d_backward_filter", "conv2d_forward_ref", "conv2d_backward_ref", "conv2d_backward_data_ref",
           "conv2d_backward_filter_ref", "pack_mask", "unpack_mask", "out_size"]


def _on_gpu(a):
    return backend.is_cuda_array(a) and a.dtype in GPU_DTYPES


def block_diagonal(w, groups):
    """Grouped weights (K, C/groups, R, S) as the dense convolution's (K, C, R, S): group g's filters on its own
    input channels, zeros on the other groups' (either array module; moved as raw bits, any float dtype)."""
    xp = backend.array_module(w)
    k, cg, r, s = w.shape
    bits = np.dtype(f"u{w.dtype.itemsize}")
    dense = xp.zeros((groups, k // groups, groups, cg, r, s), bits)
    xp.copyto(_diagonal(dense), w.view(bits).reshape(groups, k // groups, cg, r, s))
    return dense.view(w.dtype).reshape(k, groups * cg, r, s)


def diagonal_blocks(dw, groups):
    """The gradient (K, C, R, S) of :func:`block_diagonal`'s dense weight as the grouped weights' (K, C/groups, R, S):
    its diagonal blocks."""
    xp = backend.array_module(dw)
    k, c, r, s = dw.shape
    bits = np.dtype(f"u{dw.dtype.itemsize}")
    blocks = xp.ascontiguousarray(_diagonal(dw.view(bits).reshape(groups, k // groups, groups, c // groups, r, s)))
    return blocks.view(dw.dtype).reshape(k, c // groups, r, s)


def _diagonal(dense):
    """The (G, K/G, C/G, R, S) view of a (G, K/G, G, C/G, R, S) array's diagonal blocks ``[g, :, g]``: one strided
    view (a copy through it is one kernel; fancy indexing by ``arange(G)`` costs an eager step several launches and
    more host time)."""
    g, kg, _, cg, r, s = dense.shape
    st = dense.strides
    return backend.array_module(dense).lib.stride_tricks.as_strided(
        dense, (g, kg, cg, r, s), (st[0] + st[2], st[1], st[3], st[4], st[5]))


def _blocks(total):
    """The grid of a grid-stride kernel of ``THREADS``-thread blocks over ``total`` elements."""
    return (min(grid_1d(total, THREADS), 65535 * 8),)


def wgrad_reduce_vec(c, cp):
    """Channels per thread of conv_util.cu's wgrad_reduce: 4 where ``c`` and its padding ``cp`` allow it."""
    return 4 if c % 4 == 0 and cp % 4 == 0 else 1


def _flags(relu, bias, mask=False):
    """The epilogue's ``flags`` argument as an int32 (made when a launch is planned, not per call)."""
    return ints(int((Epilogue.RELU if relu else 0) | (Epilogue.BIAS if bias else 0)
                    | (Epilogue.MASK if mask else 0)))[0]


class PackedInput:
    """x as the GEMM forward packed it, (groups, N, H, W, C / groups padded) (channels rounded to TF32 where
    ``tf32``), kept in place of x for the filter gradient, which then skips packing x again; another forward of the
    same x and groups may take it in place of its own pack (``conv2d_forward``'s ``packed_x``)."""

    __slots__ = ("array", "shape", "tf32", "groups", "__weakref__")

    def __init__(self, array, shape, tf32, groups=1):
        self.array, self.shape, self.tf32, self.groups = array, tuple(shape), bool(tf32), groups


@functools.cache
def pack_nhwc_launch(dtype, n, hw, ctot, cols, cpad, groups=1, dev=None):
    """conv_util.cu's pack of ``groups`` slices of ``cols`` of the ``ctot`` channels of an (N, C, H, W) array of
    ``hw`` pixels per image to (groups, N, H, W, ``cpad``), zero-padded, times a ReLU mask if given; per call the
    addresses of the first packed channel, of the output and of the mask's first word (any address without one),
    and the mask's words per channel (0: no mask). Made on the current device, which ``dev`` names (a key of the
    cache: a launch holds its device's kernel)."""
    tile = pack_tile(dtype)
    grid = (-(-hw // tile), -(-cpad // tile), min(groups * n, GRID_Z))
    return Prepared(util_kernel(dtype, "pack_nhwc"), grid, (32, 8, 1),
                    (ARG, ARG, ARG, *ints(cols, ctot, hw, cpad), ARG, *ints(n, groups)))


def relayout(a, channels_last):
    """``a`` (N, C, H, W) laid out channels-last (``channels_last``) or C-contiguous: ``a`` itself where it already
    is. On the GPU, from the other dense layout, the copy is pack_nhwc's tiled transpose (NCHW as (N, C, HW) to
    (N, HW, C), or the reverse with the roles of C and HW swapped): CuPy's copy of a transposed view reaches a
    fraction of the copy bandwidth, and the channels-last paths that fall back to the C-contiguous kernels pay
    such a copy of their input and of their output."""
    if channels_last_strided(a) if channels_last else c_contiguous(a):
        return a
    dense = channels_last_strided(a) if not channels_last else c_contiguous(a)
    if not (_on_gpu(a) and dense and a.ndim == 4 and a.size):
        return to_layout(a, channels_last)
    import cupy

    n, c, h, w = a.shape
    dev = a.data.device_id
    with cupy.cuda.Device(dev):
        if channels_last:
            out, launch = empty_channels_last(a.shape, a.dtype), pack_nhwc_launch(a.dtype, n, h * w, c, c, c, 1, dev)
        else:
            hw = h * w
            out, launch = cupy.ndarray(a.shape, a.dtype), pack_nhwc_launch(a.dtype, n, c, hw, hw, hw, 1, dev)
        launch(a.data.ptr, out.data.ptr, a.data.ptr, 0)  # (no ReLU mask: its address unread, 0 words)
    return out


def _backward_pack(dtype, n, pq, ktot, k, kpad, j, groups=1):
    """conv_util.cu's pack_backward: dy's pack as :func:`pack_nhwc_launch` (``groups`` slices of ``k`` of the
    ``ktot`` channels, ``pq`` pixels per image, to ``kpad``) and the groups' KCRS weights (K, ``j`` = C*R*S) each
    transposed to (j, ``kpad``), in one launch; per call the addresses of dy, its pack, the mask's first word (any
    address without one), the mask's words per channel (0: no mask), the weight and its pack."""
    tile = pack_tile(dtype)
    gx, gy = -(-pq // tile), -(-kpad // tile)
    weight_tiles = groups * -(-j // 32) * -(-kpad // 32)
    weight_layers = min(-(-weight_tiles // (gx * gy)), 4096)  # about one 32 x 32 tile a block
    zd = min(groups * n, GRID_Z - weight_layers)
    return Prepared(util_kernel(dtype, "pack_backward"), (gx, gy, zd + weight_layers), (32, 8, 1),
                    (ARG,) * 6 + ints(n, k, ktot, pq, kpad, j, zd, groups))


# ---------------------------------------------------------------- forward
def _weight_pack(dtype, pack):
    """The forward's KCRS -> KRSC pack of the weights alone, as ``pack_w(w, wk, w, wk)``: conv_util.cu's
    pack_forward with no image blocks (ZX = 0), from the forward's ``pack`` (gemm_plan's extra)."""
    grid, args, _, _ = pack
    return Prepared(util_kernel(dtype, "pack_forward"), (*grid[:2], grid[2] - args[7]), (32, 8, 1),
                    (ARG,) * 4 + args[:7] + (np.int32(0), *args[8:]))


@functools.cache
def _forward_launcher(dtype, x_shape, w_shape, stride, padding, dilation, groups, dev_id, config, tf32):
    """The GPU forward of one call signature, ``config`` and TF32 setting as ``run(x, w, bias, relu, want_mask)
    -> (y, mask)``, which only allocates and launches (None where the kernels' int32 indexing does not reach):
    the path and every launch's constants are settled here, once (choosing them per call cost host time
    comparable to the launches')."""
    import cupy

    run = conv_depthwise.forward_launcher(dtype, x_shape, w_shape, stride, padding, dilation) \
        if conv_depthwise.applies(dtype, x_shape, w_shape, groups) else None
    if run is not None:
        return run
    if not fits_int32(x_shape, w_shape, stride, padding, dilation, groups, dtype):
        return None  # the reference runs it
    if is_direct(w_shape, groups, config):
        return _direct_forward_launcher(dtype, x_shape, w_shape, stride, padding, dilation, False,
                                        config.direct_pixels or DIRECT_PIX)
    # Launches go to the kernels' CuPy Function objects (cupy.cuda.function.Function), and outputs are made by
    # cupy.ndarray: both cost less host time than the RawKernel wrapper and cupy.empty, and every kernel
    # argument costs host time too (so conv.cu takes few).
    n, c, h, wd, k, cg, r, s, p, q = geometry(x_shape, w_shape, stride, padding, dilation)
    words = (n * p * q + 31) // 32
    flags = [[[_flags(relu, has_bias, mask) for mask in (0, 1)] for has_bias in (0, 1)]
             for relu in (0, 1)]  # [relu][has_bias][mask]
    y_shape = (n, k, p, q)
    # the TMA kernel where it applies, unless the config forces the forward from NCHW
    tma = None if config.nchw_forward else tma_plan(ConvMode.FORWARD, dtype, x_shape, w_shape, stride, padding,
                                                     dilation, groups, dev_id, config)
    if tma is None and uses_nchw_forward(x_shape, w_shape, stride, padding, dilation, groups, dtype, config, dev_id):
        kern, grid, block, smem, prm = nchw_plan(dtype, x_shape, w_shape, stride, padding, dilation, config)
        fn = kern.kernel

        def run(x, w, bias, relu, want_mask, keep_x=False, packed=None):
            y = cupy.ndarray(y_shape, dtype)
            mask = cupy.ndarray((k, words), np.uint32) if (relu and want_mask) else None
            fn(grid, block, (x, w, y if bias is None else bias, y, y if mask is None else mask, prm,
                             flags[relu][bias is not None][mask is not None]), smem)
            return (y, mask, None) if keep_x else (y, mask)
        return run
    ((kern, grid, block, smem, prm, pack),) = gemm_plan(ConvMode.FORWARD, dtype, x_shape, w_shape, stride, padding,
                                                        dilation, groups, dev_id, config, tf32)
    pack_grid, pack_ints, xn_elems, total = pack
    tf32 = bool(pack_ints[-1])  # whether the pack rounds x to TF32 (a kept x is only reused likewise)
    # (x, packed x, w, packed w) and (packed x, packed w, bias, y, mask, flags): addresses per call
    pack_x_w = Prepared(util_kernel(dtype, "pack_forward"), pack_grid, (32, 8, 1), (ARG,) * 4 + pack_ints)
    pack_w = _weight_pack(dtype, pack)  # for an x packed by an earlier forward
    gemm = Prepared(kern, grid, block, (ARG,) * 5 + (prm, ARG), smem)  # every group's (grid z)
    isz = np.dtype(dtype).itemsize

    # a 1x1 KCRS weight whose channels need no padding nor TF32 rounding is its own KRSC pack (one group)
    unpacked = groups == 1 and r * s == 1 and pack_ints[4] == cg and not tf32

    def reusable(packed):  # x as this forward would pack it: same groups, shape, dtype and TF32 rounding
        return (packed.groups == groups and packed.shape == x_shape and packed.tf32 == tf32
                and packed.array.dtype == dtype)

    def run(x, w, bias, relu, want_mask, keep_x=False, packed=None):
        y = cupy.ndarray(y_shape, dtype)
        mask = cupy.ndarray((k, words), np.uint32) if (relu and want_mask) else None
        flag = flags[relu][bias is not None][mask is not None]
        kept = None
        xa, wa, ya = x.data.ptr, w.data.ptr, y.data.ptr
        ba = 0 if bias is None else bias.data.ptr
        reuse = packed is not None and reusable(packed)
        # both packed operands in one allocation and one launch (measured no slower on the device than two of
        # each, and one launch less of host time before the GEMM's); a packed x kept for the filter gradient has
        # an allocation of its own, so that the weights' pack does not outlive the call
        if reuse and unpacked:  # x as an earlier forward packed it, and w its own pack: nothing to pack
            xn, kept, xna, wka = None, packed, packed.array.data.ptr, wa
        elif reuse:  # x as an earlier forward packed it: only the weights to pack
            # (the weights' pack as raw memory: less host time than an array, and only its address is read)
            xn, wk, kept = None, cupy.cuda.alloc((total - xn_elems) * isz), packed
            xna, wka = packed.array.data.ptr, wk.ptr
        elif keep_x:
            xn, wk = cupy.ndarray(xn_elems, dtype), cupy.cuda.alloc((total - xn_elems) * isz)
            kept = PackedInput(xn, x_shape, tf32, groups)
            xna, wka = xn.data.ptr, wk.ptr
        else:
            xn = cupy.cuda.alloc(total * isz)
            xna = xn.ptr
            wka = xna + xn_elems * isz
        if reuse:
            if not unpacked:
                pack_w(wa, wka, wa, wka)
        else:
            pack_x_w(xa, xna, wa, wka)
        if tma is not None and mask is None:  # one group (tma_plan's rule)
            launch_tma(tma, xna, wka, ya, ba, flag)
        else:
            gemm(xna, wka, ba if bias is not None else ya, ya, mask.data.ptr if mask is not None else ya, flag)
        del xn
        return (y, mask, kept) if keep_x else (y, mask)
    return run


@functools.cache
def _channels_last_forward_launcher(dtype, x_shape, w_shape, stride, padding, dilation, groups, dev_id, config, tf32):
    """The GPU forward of a channels-last x into a channels-last y as ``run(x, w, bias, relu, want_mask, keep_x) ->
    (y, mask, kept)``: x's memory is the NHWC operand the C-contiguous path packs, so only the weights are packed.
    The TMA kernel writes y as NHWC (no ReLU mask there); elsewhere the GEMM writes NCHW, then laid out
    channels-last. None where x would need a pack still (channels not a multiple of the padding, groups, TF32
    rounding), the GEMM path does not run (the direct and NCHW forwards, the config) or the kernels' int32
    indexing does not reach."""
    import cupy

    n, c, h, wd, k, _, r, s, p, q = geometry(x_shape, w_shape, stride, padding, dilation)
    if not fits_int32(x_shape, w_shape, stride, padding, dilation, groups, dtype):
        return None
    if is_direct(w_shape, groups, config):  # (a first layer: its x has too few channels for the GEMMs)
        if k % 8:
            return None
        direct = _direct_forward_launcher(dtype, x_shape, w_shape, stride, padding, dilation, True,
                                          config.direct_pixels or DIRECT_PIX)
        # (its weights read as KCRS: a channels-last weight's memory is KRSC)
        return lambda x, w, bias, relu, want_mask, keep_x: direct(x, to_layout(w, False), bias, relu, want_mask,
                                                                   True)
    if groups != 1 or padded_channels(c, dtype) != c or config.nchw_forward:
        return None
    tma = tma_plan(ConvMode.FORWARD, dtype, x_shape, w_shape, stride, padding, dilation, groups, dev_id, config,
                   nhwc_out=True)
    # the C-contiguous path's choice of kernel, as _forward_launcher makes it
    if tma is None and uses_nchw_forward(x_shape, w_shape, stride, padding, dilation, groups, dtype, config, dev_id):
        return None
    ((kern, grid, block, smem, prm, pack),) = gemm_plan(ConvMode.FORWARD, dtype, x_shape, w_shape, stride, padding,
                                                        dilation, groups, dev_id, config, tf32)
    if pack[1][-1]:  # its pack rounds x to TF32
        return None
    gemm = Prepared(kern, grid, block, (ARG,) * 5 + (prm, ARG), smem)
    pack_w = _weight_pack(dtype, pack)  # KCRS -> KRSC
    flags = [[[_flags(relu, has_bias, mask) for mask in (0, 1)] for has_bias in (0, 1)]
             for relu in (0, 1)]  # [relu][has_bias][mask]
    w_bytes, words = k * r * s * c * np.dtype(dtype).itemsize, (n * p * q + 31) // 32
    # a channels-last weight (KRSC memory), or a 1x1 KCRS one, is its own pack (C needs no padding here, nor
    # TF32 rounding)
    unpacked = r * s == 1

    def run(x, w, bias, relu, want_mask, keep_x):
        if unpacked or not c_contiguous(w):  # (the caller passes a weight C-contiguous or channels-last)
            wk = w.data
        else:
            wk = cupy.cuda.alloc(w_bytes)
            pack_w(w.data.ptr, wk.ptr, w.data.ptr, wk.ptr)
        mask = cupy.ndarray((k, words), np.uint32) if (relu and want_mask) else None
        flag = flags[relu][bias is not None][mask is not None]
        ba = 0 if bias is None else bias.data.ptr
        if tma is not None and mask is None:
            y = empty_channels_last((n, k, p, q), dtype)
            launch_tma(tma, x.data.ptr, wk.ptr, y.data.ptr, ba, flag)
        else:
            y = cupy.ndarray((n, k, p, q), dtype)
            gemm(x.data.ptr, wk.ptr, ba or y.data.ptr, y.data.ptr, y.data.ptr if mask is None else mask.data.ptr,
                 flag)
            y = relayout(y, True)
        return y, mask, (PackedInput(x, x_shape, False) if keep_x else None)
    return run


def _direct_forward_launcher(dtype, x_shape, w_shape, stride, padding, dilation, channels_last=False, pix=1):
    """``run`` of :func:`_forward_launcher` on conv_direct.cu's forward (one launch from NCHW; ``channels_last``:
    from a channels-last x into a channels-last y, with the same sums; ``pix`` pixels a thread)."""
    import cupy

    fwd, _, _, p, q, geo = direct_plan(dtype, x_shape, w_shape, stride, padding, dilation, channels_last, pix)
    n, k = x_shape[0], w_shape[0]
    m = n * p * q
    words = (m + 31) // 32
    flags = [[int(_flags(relu, has_bias)) for has_bias in (0, 1)] for relu in (0, 1)]  # [relu][has_bias]
    # (x, w, bias, y, mask, flags) per call (flags an int32 parameter: its cell's low bytes)
    launch = Prepared(fwd, (grid_1d(m, DIRECT_PIXELS),), (DIRECT_PIXELS // pix,), (ARG,) * 6 + (*ints(words), geo))

    def run(x, w, bias, relu, want_mask, keep_x=False, packed=None):
        y = empty_channels_last((n, k, p, q), dtype) if channels_last else cupy.ndarray((n, k, p, q), dtype)
        mask = cupy.ndarray((k, words), np.uint32) if (relu and want_mask) else None
        ya = y.data.ptr
        launch(x.data.ptr, w.data.ptr, ya if bias is None else bias.data.ptr, ya,
               0 if mask is None else mask.data.ptr, flags[relu][bias is not None])
        return (y, mask, None) if keep_x else (y, mask)
    return run


# ---------------------------------------------------------------- backward
def _direct_backward_filter_cuda(dy, x, w_shape, stride, padding, dilation, mask, dw, db):
    """dW into ``dw`` and, if given, db into ``db`` on conv_direct.cu: per-block partials, then a fixed-order
    sum."""
    import cupy

    part_shape, wgrad, reduce = _direct_filter_launches(dy.dtype, x.shape, tuple(w_shape), stride, padding, dilation,
                                                        dy.data.device_id)
    part = cupy.ndarray(part_shape, np.float32)
    wgrad(x.data.ptr, dy.data.ptr, 0 if mask is None else mask.data.ptr, part.data.ptr)
    reduce(part.data.ptr, dw.data.ptr, 0 if db is None else db.data.ptr)


@functools.lru_cache(maxsize=256)
def _direct_filter_launches(dtype, x_shape, w_shape, stride, padding, dilation, dev):
    """(the partials' shape, the prepared launch of conv_direct_wgrad: (x, dy, mask, partials), of
    conv_direct_reduce: (partials, dw, db)) on device ``dev``."""
    _, wgrad, reduce, p, q, geo = direct_plan(dtype, x_shape, w_shape, stride, padding, dilation)
    k, crs = w_shape[0], w_shape[1] * w_shape[2] * w_shape[3]
    m = x_shape[0] * p * q
    chunks = (m + 63) // 64  # conv_direct.cu's CHUNK
    blocks = max(1, min(chunks, 4 * sm_count(dev)))
    pairs = k * (crs + 1)
    return ((blocks, pairs), Prepared(wgrad, (blocks,), (THREADS,), (ARG,) * 4 + (*ints((m + 31) // 32), geo)),
            Prepared(reduce, (grid_1d(pairs, 128),), (128,), (ARG,) * 3 + ints(blocks, k, crs)))


@functools.cache
def _backward_launcher(dtype, x_shape, w_shape, stride, padding, dilation, groups, dev_id, config, tf32, packed_x,
                       channels_last=False, pad_x=False):
    """The GPU backward of one call signature, ``config``, TF32 setting and input form (``packed_x``: the
    forward's :class:`PackedInput`) as ``run(dy, x, w, mask, need_dx, need_dw, need_db) -> (dx, dw, db)``, which
    only allocates and launches: every launch prepared here, once, as the forward's (:func:`_forward_launcher`).

    Every group in each launch: dy (times the ReLU mask) packed to (G, N, P, Q, Kp); the bias gradient as its column
    sums (a launch per group); dW (split-K fp32 partials, then their fixed-order sum), from x packed to
    (G, N, H, W, Cp) unless the forward kept it so; dX from the weights packed to (G, Cg, R, S, Kp).
    ``channels_last``: dy and x are channels-last and read as they are (no packs, no ReLU mask), and dx comes back
    channels-last (written so by the TMA kernel, else laid out so after the GEMMs); None where they would need
    packs still (as :func:`_channels_last_forward_launcher`). ``pad_x`` (channels-last, for the filter gradient
    alone): x's channels may need padding (a first layer's 3-channel image), and x, a small array beside dy
    (which is read as it is), is then copied into zero-padded NHWC rows."""
    import cupy

    depthwise = not channels_last and conv_depthwise.applies(dtype, x_shape, w_shape, groups)  # C-contiguous dy, x
    run = conv_depthwise.backward_launcher(dtype, x_shape, w_shape, stride, padding, dilation, dev_id) \
        if depthwise else None
    if run is not None:
        return run
    n, c, h, wd, k, cg, r, s, p, q = geometry(x_shape, w_shape, stride, padding, dilation)
    kg = k // groups
    kpad, cpad = padded_channels(kg, dtype), padded_channels(cg, dtype)
    words = (n * p * q + 31) // 32
    isz = np.dtype(dtype).itemsize
    direct_dw = direct_filter_gradient(w_shape, groups, dtype, tf32, config)
    cl = channels_last
    if cl and (groups != 1 or kpad != k or (cpad != c and not pad_x) or direct_dw):
        return None
    pad_x = cl and cpad != c  # (dy read as it is, x copied into padded rows)

    pack_dy = None if cl else pack_nhwc_launch(dtype, n, p * q, k, kg, kpad, groups, dev_id)
    pack_dy_w = None if cl else _backward_pack(dtype, n, p * q, k, kg, kpad, cg * r * s, groups)
    pack_x = None if packed_x or cl else pack_nhwc_launch(dtype, n, h * wd, c, cg, cpad, groups, dev_id)
    # the bias gradient: the column sums of the packed dy (its first kg channels of kpad)
    sum_bytes, bias_sums = columns.strided_sums(dtype, n * p * q, kg, kpad, dev_id)
    # dW: conv.cu's GEMM or conv_tma_wgrad writes fp32 split-K partials (dy, x -> partials) and wgrad_reduce sums
    # them into dw (the groups' partials of a split as one GEMM's of all k rows: see conv.cu's prm); conv_tma_wgrad
    # writes a dw of KRSC memory (a channels-last weight's, a 1x1 filter's) itself
    # where it has one split, and its whole tiles where it has some (then wgrad_reduce sums the rest)
    wg_tma = tma_wgrad_plan(dtype, x_shape, w_shape, stride, padding, dilation, groups, dev_id, config)
    dg_tma = tma_plan(ConvMode.BACKWARD_DATA, dtype, x_shape, w_shape, stride, padding, dilation, groups, dev_id,
                      config, nhwc_out=cl)
    # a channels-last weight read as it is, where the TMA kernel takes it so: no pack of the weights before dX
    dg_krsc = tma_plan(ConvMode.BACKWARD_DATA, dtype, x_shape, w_shape, stride, padding, dilation, groups, dev_id,
                       config, nhwc_out=True, b_krsc=True) if cl else None
    dg_krsc = dg_krsc if dg_krsc is not None and dg_krsc.b_krsc else None
    if wg_tma is not None:  # one group
        splits, wg_tiles = wg_tma.splits, wg_tma.wgrad_tiles

        def wgrad(dza, xna, wsa):
            launch_tma_wgrad(wg_tma, dza, xna, 0, ws=wsa)
    else:
        ((kern, grid, block, smem, prm, splits),) = gemm_plan(ConvMode.BACKWARD_FILTER, dtype, x_shape, w_shape,
                                                              stride, padding, dilation, groups, dev_id, config, tf32)
        wg_gemm = Prepared(kern, grid, block, (ARG, ARG, ARG, ARG, ARG, prm, np.int32(0)), smem)
        wg_tiles = (1, 1, 0, 1)  # every tile split

        def wgrad(dza, xna, wsa):
            wg_gemm(dza, xna, dza, wsa, dza)
    part_stride, ws_bytes = wgrad_partials(k, r * s * cpad, wg_tiles, splits)
    unsplit_tma = wg_tma is not None and splits == 1 and wg_tiles[2] == 0
    # unsplit whole tiles written into dW by the kernel where KRSC, and with its fixup the split tiles too
    whole_tiles = wg_tma is not None and (wg_tiles[2] > 0 or wg_tma.fixup > 0) and wg_tiles[3] == 1
    fixup = wg_tma is not None and wg_tma.fixup > 0
    # (dW, and w for dX, KCRS or, with channels-last dy and w, KRSC: the weight's layout)
    # (KRSC: the partials' own order, coalesced both ways; one tap: KCRS is the same memory; more taps: KCRS
    # through a transpose in shared memory, RS floats for each of a block's 32 or 128 channels, where that fits in
    # the default 48 KiB)
    def strided_reduce(krsc, done=0):  # wgrad_reduce: the partials' order, dW KRSC (krsc) or KCRS by strided writes
        rows = k - wg_tiles[2] // wg_tiles[1] * wg_tiles[0] if done else k  # (done: from the first split tile's)
        return Prepared(util_kernel(dtype, "wgrad_reduce"), _blocks(rows * cg * r * s // wgrad_reduce_vec(cg, cpad)),
                        (THREADS,), (ARG, ARG, *ints(splits, k, cg, r * s, cpad, krsc, *wg_tiles, done),
                                     np.int64(part_stride)))

    items = k * cg // 4  # (of 4 channels)
    if (r * s == 1 and wg_tiles[2] == 0 and wgrad_reduce_vec(cg, cpad) == 4 and splits >= 16
            and items < sm_count(dev_id) * THREADS):
        # a small 1x1 filter of many splits: runs of the splits summed by warps (wgrad_reduce_runs), at more
        # reads in flight than one thread per 4 channels has (1x1 only: KCRS is the same memory, so a
        # channels-last weight's dW and a contiguous one's are summed in one order, bit for bit alike)
        wg_reduce_krsc = Prepared(util_kernel(dtype, "wgrad_reduce_runs"), (min(-(-items // 32), 65535 * 8),),
                                  (THREADS,), (ARG, ARG, *ints(splits, k, cg, r * s, cpad)))
    else:
        wg_reduce_krsc = strided_reduce(1)
    wg_reduce_rest = strided_reduce(1, done=1) if whole_tiles and not fixup else None  # the split tiles' alone
    # wgrad_reduce_kcrs's channels a thread: 4 where they fill a block of 128 (fewer would idle its lanes and halve
    # the blocks: c64h32's sum measured slower at 4), and a block's: 32 threads' along a row of the partials
    kcrs_vec = wgrad_reduce_vec(cg, cpad) if cg >= 128 else 1
    width = 32 * kcrs_vec
    if r * s == 1:
        wg_reduce_kcrs = wg_reduce_krsc
    elif width * r * s * 4 <= 48 * 1024:
        wg_reduce_kcrs = Prepared(util_kernel(dtype, "wgrad_reduce_kcrs"), (min(k * -(-cg // width), 65535 * 8),),
                                  (THREADS,), (ARG, ARG, *ints(splits, k, cg, r * s, cpad, *wg_tiles),
                                               np.int64(part_stride), np.int32(kcrs_vec)),
                                  width * r * s * 4)
    else:
        wg_reduce_kcrs = strided_reduce(0)
    # dX: the weights packed, then the GEMM(s) (dy, packed w -> dx)
    j = cg * r * s
    # (a grid for either layout: a channels-last weight's blocks take 32 channels of one tap each)
    pack_w = Prepared(util_kernel(dtype, "transpose_pad"), (r * s * -(-cg // 32), (kpad + 31) // 32), (32, 8, 1),
                      (ARG, ARG, *ints(kg, j, kpad), ARG))
    if dg_tma is not None and dg_tma.nchw_via_nhwc:  # (one group) dX written NHWC, then transposed by pack_nhwc's
        # kernel, (pixels, channels) per image
        to_nchw = pack_nhwc_launch(dtype, n, c, h * wd, h * wd, h * wd, 1, dev_id)

        def dgrad(dza, wca, dxa):
            nhwc = cupy.cuda.alloc(n * h * wd * c * isz)
            launch_tma(dg_tma, dza, wca, nhwc.ptr, 0, np.int32(0))
            to_nchw(nhwc.ptr, dxa, nhwc.ptr, 0)
    elif dg_tma is not None:  # one group
        def dgrad(dza, wca, dxa):
            launch_tma(dg_tma, dza, wca, dxa, 0, np.int32(0))
    else:
        dg_gemms = [Prepared(kern, grid, block, (ARG, ARG, ARG, ARG, ARG, prm, np.int32(0)), smem)
                    for kern, grid, block, smem, prm, _ in gemm_plan(ConvMode.BACKWARD_DATA, dtype, x_shape, w_shape,
                                                                     stride, padding, dilation, groups, dev_id,
                                                                     config, tf32)]

        def dgrad(dza, wca, dxa):
            for launch in dg_gemms:
                launch(dza, wca, dza, dxa, dza)

    dz_group = n * p * q * kpad * isz  # bytes of one group's packed dy
    dz_bytes, part_bytes = 0 if cl else aligned_bytes(groups * dz_group), aligned_bytes(sum_bytes)
    wc_bytes, xn_bytes = aligned_bytes(groups * cg * r * s * kpad * isz), groups * n * h * wd * cpad * isz

    def run(dy, x, w, mask, need_dx, need_dw, need_db, w_channels_last=False):
        dx = None
        krsc = cl and w_channels_last  # (the channels-last launcher: one group, no padded channels)
        own_w = krsc and dg_krsc is not None and need_dx  # dX from the weight as it is
        w_pack_bytes = wc_bytes if need_dx and not own_w else 0
        dw = (empty_channels_last(w_shape, dtype) if krsc else cupy.ndarray(w_shape, dtype)) if need_dw else None
        db = cupy.ndarray((k,), dtype) if need_db else None
        if need_dw and direct_dw:  # dW and db in one pass over dy
            _direct_backward_filter_cuda(dy, x, w_shape, stride, padding, dilation, mask, dw, db)
            need_dw = need_db = False
            if not need_dx:
                return dx, dw, db
        dya = dy.data.ptr
        # the packed dy, the bias gradient's partial sums and the packed weights: one allocation
        tmp = cupy.cuda.alloc(dz_bytes + (part_bytes if need_db else 0) + w_pack_bytes)
        part = tmp.ptr + dz_bytes
        wca = part + (part_bytes if need_db else 0)
        if cl:  # dy is its own packed form
            dza = dya
        else:
            dza = tmp.ptr
            ma, mw = (mask.data.ptr, words) if mask is not None else (dya, 0)
            if need_dx:  # dy's pack and the weights' for dX in one launch
                pack_dy_w(dya, dza, ma, mw, w.data.ptr, wca)
            else:
                pack_dy(dya, dza, ma, mw)
        if need_db:
            for g in range(groups):
                bias_sums(dza + g * dz_group, part, db.data.ptr + g * kg * isz)
        # dW first: its packed copy of x is gone before dX is allocated (a lower peak in training)
        if need_dw:
            if packed_x:
                xna = x.array.data.ptr
            elif cl and not pad_x:
                xna = x.data.ptr
            else:
                xn = cupy.cuda.alloc(xn_bytes)
                xna = xn.ptr
                if pad_x:  # x's NHWC memory into the padded rows (CuPy's strided copy: pack_nhwc's tiles of a
                    # 3-channel transpose would sit nearly empty)
                    padded = cupy.ndarray((n, h, wd, cpad), dtype, xn)
                    padded[..., c:] = 0
                    padded[..., :c] = x.transpose(0, 2, 3, 1)
                    padded = None
                else:
                    pack_x(x.data.ptr, xna, x.data.ptr, 0)
            if unsplit_tma and (krsc or r * s == 1):  # (one group)
                launch_tma_wgrad(wg_tma, dza, xna, dw.data.ptr)
            elif whole_tiles and (krsc or r * s == 1):  # (one group) whole tiles into dw, the rest summed
                ws = cupy.cuda.alloc(ws_bytes)
                launch_tma_wgrad(wg_tma, dza, xna, dw.data.ptr, ws=ws.ptr)
                if wg_reduce_rest is not None:  # (else the kernel's fixup summed them)
                    wg_reduce_rest(ws.ptr, dw.data.ptr)
            else:
                ws = cupy.cuda.alloc(ws_bytes)
                wgrad(dza, xna, ws.ptr)
                (wg_reduce_krsc if krsc else wg_reduce_kcrs)(ws.ptr, dw.data.ptr)
            xn = ws = None
        if need_dx:
            dx = empty_channels_last(x_shape, dtype) if cl and dg_tma else cupy.ndarray(x_shape, dtype)
            if own_w:  # (one group)
                launch_tma(dg_krsc, dza, w.data.ptr, dx.data.ptr, 0, np.int32(0))
            else:
                if cl:  # (else packed with dy above)
                    pack_w(w.data.ptr, wca, r * s if krsc else 0)
                dgrad(dza, wca, dx.data.ptr)
        del tmp
        if cl and dx is not None and not dg_tma:
            dx = relayout(dx, True)
        return dx, dw, db
    return run


# ---------------------------------------------------------------- public primitives
def conv2d_forward(x, w, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, activation=None,
                   want_mask=False, keep_packed_x=False, packed_x=None, *, config=DEFAULT_CONFIG):
    """``act(conv2d(x, w) + bias)`` and, for activation 'relu' with ``want_mask``, its bit-packed mask; with
    ``keep_packed_x`` also x as the forward packed it (a :class:`PackedInput`, for :func:`conv2d_backward` in
    place of x), or None where this path packs nothing (NumPy, the direct and NCHW forwards).
    ``packed_x``: a :class:`PackedInput` an earlier forward kept of this same x (the caller vouches that x has
    not changed since), which a forward that would pack x in that form takes instead (and keeps, if asked).
    A channels-last x gives a channels-last y."""
    stride, padding, dilation = tuple(stride), tuple(padding), tuple(dilation)
    if groups > 1 and _on_gpu(x) and block_diagonal_applies(x.dtype, w.shape, groups, config):
        return conv2d_forward(x, block_diagonal(w, groups), bias, stride, padding, dilation, 1, activation, want_mask,
                              keep_packed_x, packed_x, config=config)
    out = None
    xp = backend.array_module(x)
    if not c_contiguous(w) and not (is_channels_last(w) and is_channels_last(x)):
        w = xp.ascontiguousarray(w)  # a channels-last weight goes as it is to the channels-last forward alone
    if bias is not None and not c_contiguous(bias):
        bias = xp.ascontiguousarray(bias)  # (the kernels read it as a dense vector: a strided view's are not)
    if x.shape[0] == 0:  # an empty batch: an empty output (and mask), as PyTorch gives
        p, q = (out_size(x.shape[2 + i], w.shape[2 + i], stride[i], padding[i], dilation[i]) for i in (0, 1))
        mask = xp.empty((w.shape[0], 0), np.uint32) if activation == "relu" and want_mask else None
        out = xp.empty((0, w.shape[0], p, q), x.dtype), mask
    elif is_channels_last(x):
        run = None
        if _on_gpu(x) and _forward_gemm_path(x, w, stride, padding, dilation, groups, activation, want_mask,
                                             config) is None:  # a GEMM path's x is C-contiguous: the path below
            run = _channels_last_forward_launcher(x.dtype, x.shape, w.shape, stride, padding, dilation, groups,
                                                  x.device.id, config, backend.tf32_conv.allow_tf32)
        if run is not None:
            y, mask, kept = run(x, w, bias, activation == "relu", want_mask, keep_packed_x)
            return (y, mask, kept) if keep_packed_x else (y, mask)
        # the C-contiguous path, its output then laid out as x
        y, *rest = conv2d_forward(relayout(x, False), xp.ascontiguousarray(w), bias, stride, padding,
                                  dilation, groups, activation, want_mask, keep_packed_x, config=config)
        return (relayout(y, True), *rest)
    elif _on_gpu(x):
        path = _forward_gemm_path(x, w, stride, padding, dilation, groups, activation, want_mask, config)
        if path is not None:
            y = path.forward(xp.ascontiguousarray(x), w, None if bias is None else xp.ascontiguousarray(bias),
                             stride, padding)
            return (y, None, None) if keep_packed_x else (y, None)
        run = _forward_launcher(x.dtype, x.shape, w.shape, stride, padding, dilation, groups, x.device.id, config,
                                backend.tf32_conv.allow_tf32)
        if run is not None:
            return run(x, w, bias, activation == "relu", want_mask, keep_packed_x, packed_x)
    if out is None:
        out = conv2d_forward_ref(x, w, bias, stride, padding, dilation, groups, activation, want_mask)
    return (*out, None) if keep_packed_x else out


#: fp32 (no TF32) convolutions that run as GEMMs where they apply: the 3x3 ones by Winograd's transforms (stride 1,
#: and the stride-2 forward), the 1x1 ones directly (a forward without a fused activation, a backward without a
#: ReLU mask)
_GEMM_PATHS = (winograd, conv1x1)


def _gemm_path(dtype, x_shape, w_shape, stride, padding, dilation, groups, tf32, config, forward=False):
    return _first_path(_GEMM_PATHS, dtype, x_shape, w_shape, stride, padding, dilation, groups, tf32, config, forward)


@functools.cache  # (every GPU convolution asks, of a model's few dozen signatures)
def _first_path(paths, dtype, x_shape, w_shape, stride, padding, dilation, groups, tf32, config, forward):
    return next((path for path in paths if path.applies(dtype, x_shape, w_shape, stride, padding, dilation, groups,
                                                        tf32, config, forward)), None)


def _forward_gemm_path(x, w, stride, padding, dilation, groups, activation, want_mask, config):
    if activation is not None or want_mask:
        return None
    return _gemm_path(x.dtype, x.shape, w.shape, stride, padding, dilation, groups, backend.tf32_conv.allow_tf32,
                      config, forward=True)


def _backward(dy, x, w, x_shape, w_shape, stride, padding, dilation, groups, mask, need_dx, need_dw, need_db,
              config, w_channels_last=False):
    """(dx, dw, db) of the GPU launchers where they reach, else of the references; x (or w) may be None where dW
    (or dX) is not needed. A channels-last dy gives a channels-last dx: read as it is where the TMA kernels take
    the call (x then read channels-last too), else through the C-contiguous path."""
    if groups > 1 and _on_gpu(dy) and block_diagonal_applies(dy.dtype, w_shape, groups, config):
        # the dense convolution's, its weight gradient's diagonal blocks then laid out as the weight
        w_cl = w_channels_last or (w is not None and not c_contiguous(w) and is_channels_last(w))
        dx, dw, db = _backward(dy, x, None if w is None else block_diagonal(w, groups), x_shape,
                               (w_shape[0], x_shape[1], *w_shape[2:]), stride, padding, dilation, 1, mask, need_dx,
                               need_dw, need_db, config)
        dw = None if dw is None else diagonal_blocks(dw, groups)
        return dx, to_channels_last(dw) if w_cl and dw is not None else dw, db
    geo = (stride, padding, dilation, groups)
    on_gpu = _on_gpu(dy) and fits_int32(x_shape, w_shape, stride, padding, dilation, groups, dy.dtype)
    packed = isinstance(x, PackedInput)
    tf32 = backend.tf32_conv.allow_tf32
    xp = backend.array_module(dy)
    w_cl = w_channels_last or (w is not None and not c_contiguous(w) and is_channels_last(w))
    gemm_path = None
    if on_gpu and mask is None and not packed:
        gemm_path = _gemm_path(dy.dtype, x_shape, w_shape, *geo, tf32, config)
    if is_channels_last(dy):
        run = None
        if on_gpu and mask is None and gemm_path is None:  # a GEMM path's dy is C-contiguous: the path below
            run = _backward_launcher(dy.dtype, x_shape, w_shape, *geo, dy.data.device_id, config, tf32, packed, True,
                                     not need_dx)
        if run is not None:  # a channels-last weight is read as it is, and gets a channels-last dW
            return run(dy, x if x is None or packed else relayout(x, True), w, None, need_dx, need_dw, need_db,
                       w_cl)
    if w is not None and not c_contiguous(w):
        w = xp.ascontiguousarray(w)
    if w_cl:  # the other paths' dW, then laid out as the weight
        dx, dw, db = _backward(dy, x, w, x_shape, w_shape, *geo, mask, need_dx, need_dw, need_db, config)
        return dx, None if dw is None else to_channels_last(dw), db
    if is_channels_last(dy):
        dx, dw, db = _backward(relayout(dy, False), x if x is None or packed else relayout(x, False), w,
                               x_shape, w_shape, *geo, mask, need_dx, need_dw, need_db, config)
        return None if dx is None else relayout(dx, True), dw, db
    if on_gpu:
        run = _backward_launcher(dy.dtype, x_shape, w_shape, *geo, dy.data.device_id, config, tf32, packed)
        path = gemm_path
        if path is not None:
            dyc = xp.ascontiguousarray(dy)
            dx = path.backward_data(dyc, w, x_shape, stride, padding) if need_dx else None
            dw_by_path = need_dw and path.backward_filter is not None
            dw = path.backward_filter(dyc, xp.ascontiguousarray(x), w_shape, stride, padding) if dw_by_path else None
            if need_db or (need_dw and not dw_by_path):  # the launcher's column sums and (for 1x1) dW
                _, dw_run, db = run(dy, x, w, None, False, need_dw and not dw_by_path, need_db)
                return dx, dw if dw_by_path else dw_run, db
            return dx, dw, None
        return run(dy, x, w, mask, need_dx, need_dw, need_db)
    if mask is None and need_dx and not (need_dw or need_db):  # (these halves read dy unmasked)
        return conv2d_backward_data_ref(dy, w, x_shape, *geo), None, None
    if mask is None and need_dw and not (need_dx or need_db):
        return None, conv2d_backward_filter_ref(dy, x, w_shape, *geo), None
    return conv2d_backward_ref(dy, x, w, *geo, mask, need_dx, need_dw, need_db)


def conv2d_backward(dy, x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, mask=None,
                    need_dx=True, need_dw=True, need_db=False, *, config=DEFAULT_CONFIG):
    """(dx, dw, db) of the convolution for output gradient ``dy`` (masked by the ReLU ``mask`` if given). ``x``
    is the input, or the :class:`PackedInput` its forward kept (whose values the filter gradient takes as
    they are: TF32-rounded where the forward ran TF32). A channels-last dy gives a channels-last dx."""
    stride, padding, dilation = tuple(stride), tuple(padding), tuple(dilation)
    if dy.shape[0] == 0:  # an empty batch contributes nothing: zero weight and bias gradients
        xp = backend.array_module(dy)
        return (xp.empty(x.shape, dy.dtype) if need_dx else None, xp.zeros(w.shape, dy.dtype) if need_dw else None,
                xp.zeros((w.shape[0],), dy.dtype) if need_db else None)
    return _backward(dy, x, w, tuple(x.shape), tuple(w.shape), stride, padding, dilation, groups, mask, need_dx,
                     need_dw, need_db, config)


def conv2d_backward_data(dy, w, x_shape, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, *,
                         config=DEFAULT_CONFIG):
    """dX alone (benchmarks and users of the data gradient only); channels-last for a channels-last dy."""
    return _backward(dy, None, w, tuple(x_shape), tuple(w.shape), tuple(stride), tuple(padding), tuple(dilation),
                     groups, None, True, False, False, config)[0]


def conv2d_backward_filter(dy, x, w_shape, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, *,
                           config=DEFAULT_CONFIG, channels_last_weight=False):
    """dW alone (benchmarks and users of the filter gradient only); ``channels_last_weight``: for a channels-last
    weight, which the channels-last kernels then write channels-last."""
    return _backward(dy, x, None, tuple(x.shape), tuple(w_shape), tuple(stride), tuple(padding), tuple(dilation),
                     groups, None, False, True, False, config, channels_last_weight)[1]
