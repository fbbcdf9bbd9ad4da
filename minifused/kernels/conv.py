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
``backend.tf32_conv.allow_tf32`` is set (read at call time), else on FFMA. The forward settles its path and
launch constants once per call signature, config and TF32 setting (:func:`_forward_launcher`); a call then
only allocates and launches. Inputs are assumed valid and C-contiguous.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import backend
from . import NULL, grid_1d, sm_count
from .conv_plan import (DEFAULT_CONFIG, GPU_DTYPES, GRID_Z, THREADS, ConvConfig, ConvMode, Epilogue,
                        direct_filter_gradient, direct_plan, fits_int32, gemm_plan, geometry, ints, is_direct,
                        nchw_plan, out_size, pack_tile, padded_channels, uses_nchw_forward, util_kernel)
from .conv_tma import launch_tma, tma_plan, tma_wgrad_plan
from .conv_ref import (conv2d_backward_data_ref, conv2d_backward_filter_ref, conv2d_backward_ref, conv2d_forward_ref,
                       pack_mask, unpack_mask)

__all__ = ["ConvConfig", "DEFAULT_CONFIG", "conv2d_forward", "conv2d_backward", "conv2d_backward_data",
           "conv2d_backward_filter", "conv2d_forward_ref", "conv2d_backward_ref", "conv2d_backward_data_ref",
           "conv2d_backward_filter_ref", "pack_mask", "unpack_mask", "out_size"]


def _on_gpu(a):
    return backend.is_cuda_array(a) and a.dtype in GPU_DTYPES


def _ptr(a, offset_elems=0):
    """``a`` itself at offset 0 (CuPy passes an array's pointer fastest), else the offset address."""
    return a if offset_elems == 0 else np.uint64(a.data.ptr + offset_elems * a.itemsize)


def _addr(a):
    """The device address of an array or of :func:`_ptr`'s offset pointer."""
    return int(a) if isinstance(a, np.integer) else a.data.ptr


def _blocks(total):
    """The grid of a grid-stride kernel of ``THREADS``-thread blocks over ``total`` elements."""
    return (min(grid_1d(total, THREADS), 65535 * 8),)


def _flags(relu, bias, mask=False):
    """The epilogue's ``flags`` argument as an int32 (made when a launch is planned, not per call)."""
    return ints(int((Epilogue.RELU if relu else 0) | (Epilogue.BIAS if bias else 0)
                    | (Epilogue.MASK if mask else 0)))[0]


class PackedInput:
    """x as the GEMM forward packed it, (N, H, W, C padded) (channels rounded to TF32 where ``tf32``), kept in
    place of x for the filter gradient, which then skips packing x again."""

    __slots__ = ("array", "shape", "tf32")

    def __init__(self, array, shape, tf32):
        self.array, self.shape, self.tf32 = array, tuple(shape), bool(tf32)


# ---------------------------------------------------------------- repacks (conv_util.cu)
def _pack_nhwc(a, c_off, c, cp_, mask=None, mask_words=0):
    """Channels [c_off, c_off+c) of NCHW ``a`` as (N, H, W, cp_), zero-padded (times ``mask``)."""
    import cupy

    n, ctot, h, w = a.shape
    hw = h * w
    out = cupy.ndarray((n, h, w, cp_), a.dtype)
    tile = pack_tile(a.dtype)
    grid = (-(-hw // tile), -(-cp_ // tile), min(n, GRID_Z))
    util_kernel(a.dtype, "pack_nhwc").kernel(grid, (32, 8, 1), (
        _ptr(a, c_off * hw), out, _ptr(mask, c_off * mask_words) if mask is not None else a,
        *ints(c, ctot, hw, cp_, mask_words if mask is not None else 0, n)))
    return out


def _pack_weight(w, kpad):
    """(C/groups, R, S, kpad) from one group's KCRS ``w``: out[c, r, s, k] = w[k, c, r, s], zeros past K."""
    import cupy

    kg, cg, r, s = w.shape
    j = cg * r * s
    out = cupy.ndarray((cg, r, s, kpad), w.dtype)
    util_kernel(w.dtype, "transpose_pad").kernel(((j + 31) // 32, (kpad + 31) // 32), (32, 8, 1), (
        w, out, *ints(kg, j, kpad)))
    return out


# ---------------------------------------------------------------- forward
@functools.cache
def _forward_launcher(dtype, x_shape, w_shape, stride, padding, dilation, groups, dev_id, config, tf32):
    """The GPU forward of one call signature, ``config`` and TF32 setting as ``run(x, w, bias, relu, want_mask)
    -> (y, mask)``, which only allocates and launches (None where the kernels' int32 indexing does not reach):
    the path and every launch's constants are settled here, once (choosing them per call cost host time
    comparable to the launches')."""
    import cupy

    if not fits_int32(x_shape, w_shape, stride, padding, dilation, groups, dtype):
        return None  # the reference runs it
    if is_direct(w_shape, groups, config):
        return _direct_forward_launcher(dtype, x_shape, w_shape, stride, padding, dilation)
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

        def run(x, w, bias, relu, want_mask, keep_x=False):
            y = cupy.ndarray(y_shape, dtype)
            mask = cupy.ndarray((k, words), np.uint32) if (relu and want_mask) else None
            fn(grid, block, (x, w, y if bias is None else bias, y, y if mask is None else mask, prm,
                             flags[relu][bias is not None][mask is not None]), smem)
            return (y, mask, None) if keep_x else (y, mask)
        return run
    kg = k // groups
    ((kern, grid, block, smem, prm, pack),) = gemm_plan(ConvMode.FORWARD, dtype, x_shape, w_shape, stride, padding,
                                                        dilation, groups, dev_id, config, tf32)
    pack_grid, pack_ints, xn_elems, total = pack
    pack_fn, fn = util_kernel(dtype, "pack_forward").kernel, kern.kernel
    tf32 = bool(pack_ints[-1])  # whether the pack rounds x to TF32 (a kept x is only reused likewise)

    def run(x, w, bias, relu, want_mask, keep_x=False):
        y = cupy.ndarray(y_shape, dtype)
        mask = cupy.ndarray((k, words), np.uint32) if (relu and want_mask) else None
        flag = flags[relu][bias is not None][mask is not None]
        kept = None
        for g in range(groups):
            # both packed operands in one allocation and one launch (measured no slower on the device than two
            # of each, and one launch less of host time before the GEMM's); a packed x kept for the filter
            # gradient has an allocation of its own, so that the weights' pack does not outlive the call
            if keep_x and groups == 1:
                xn, wk = cupy.ndarray(xn_elems, dtype), cupy.ndarray(total - xn_elems, dtype)
                kept = PackedInput(xn, x_shape, tf32)
            else:
                xn = cupy.ndarray(total, dtype)
                wk = _ptr(xn, xn_elems)
            pack_fn(pack_grid, (32, 8, 1), (_ptr(x, g * cg * h * wd), xn, _ptr(w, g * kg * cg * r * s), wk, *pack_ints))
            if tma is not None and mask is None:  # one group (tma_plan's rule)
                launch_tma(tma, xn.data.ptr, _addr(wk), y.data.ptr, 0 if bias is None else bias.data.ptr, flag)
            else:
                fn(grid, block, (xn, wk, _ptr(bias, g * kg) if bias is not None else y, _ptr(y, g * kg * p * q),
                                 _ptr(mask, g * kg * words) if mask is not None else y, prm, flag), smem)
            del xn, wk
        return (y, mask, kept) if keep_x else (y, mask)
    return run


def _direct_forward_launcher(dtype, x_shape, w_shape, stride, padding, dilation):
    """``run`` of :func:`_forward_launcher` on conv_direct.cu's forward (one launch from NCHW)."""
    import cupy

    fwd, _, _, p, q, geo = direct_plan(dtype, x_shape, w_shape, stride, padding, dilation)
    n, k = x_shape[0], w_shape[0]
    m = n * p * q
    words = (m + 31) // 32
    grid, (words32,) = (grid_1d(m, THREADS),), ints(words)
    flags = [[_flags(relu, has_bias) for has_bias in (0, 1)] for relu in (0, 1)]  # [relu][has_bias]

    def run(x, w, bias, relu, want_mask, keep_x=False):
        y = cupy.empty((n, k, p, q), dtype)
        mask = cupy.empty((k, words), np.uint32) if (relu and want_mask) else None
        fwd(grid, (THREADS,), (x, w, bias if bias is not None else y, y, mask if mask is not None else NULL,
                               flags[relu][bias is not None], words32, geo))
        return (y, mask, None) if keep_x else (y, mask)
    return run


# ---------------------------------------------------------------- backward
def _direct_backward_filter_cuda(dy, x, w_shape, stride, padding, dilation, mask, dw, db):
    """dW into ``dw`` and, if given, db into ``db`` on conv_direct.cu: per-block partials, then a fixed-order
    sum."""
    import cupy

    _, wgrad, reduce, p, q, geo = direct_plan(dy.dtype, x.shape, w_shape, stride, padding, dilation)
    k, crs = w_shape[0], w_shape[1] * w_shape[2] * w_shape[3]
    m = x.shape[0] * p * q
    chunks = (m + 63) // 64  # conv_direct.cu's CHUNK
    blocks = max(1, min(chunks, 4 * sm_count(dy.device.id)))
    pairs = k * (crs + 1)
    part = cupy.ndarray((blocks, pairs), np.float32)
    wgrad((blocks,), (THREADS,), (x, dy, mask if mask is not None else NULL, part, *ints((m + 31) // 32), geo))
    reduce((grid_1d(pairs, 128),), (128,), (part, dw, db if db is not None else NULL, *ints(blocks, k, crs)))


def _backward_data_group_cuda(dz, w, x_shape, g, groups, stride, padding, dilation, dx, config, tf32):
    """One group's dX from the packed (N, P, Q, Kp) dz, written into ``dx``."""
    n, c, h, wd, k, cg, r, s, p, q = geometry(x_shape, w.shape, stride, padding, dilation)
    kg = k // groups
    kpad = dz.shape[3]
    wc = _pack_weight(w[g * kg:(g + 1) * kg] if groups > 1 else w, kpad)  # (Cg, R, S, Kp)
    tma = tma_plan(ConvMode.BACKWARD_DATA, dz.dtype, x_shape, w.shape, stride, padding, dilation, groups,
                   dz.device.id, config)
    if tma is not None:  # one group
        launch_tma(tma, dz.data.ptr, wc.data.ptr, dx.data.ptr, 0, np.int32(0))
        return
    out = _ptr(dx, g * cg * h * wd)
    for kern, grid, block, smem, prm, _ in gemm_plan(ConvMode.BACKWARD_DATA, dz.dtype, x_shape, w.shape, stride,
                                                     padding, dilation, groups, dz.device.id, config, tf32):
        kern(grid, block, (dz, wc, _ptr(dz), out, _ptr(dz), prm, *ints(0)), shared_mem=smem)


def _backward_filter_group_cuda(dz, x, w_shape, g, groups, stride, padding, dilation, dw, config, tf32):
    """One group's dW from the packed dz and the input (an array, or the forward's :class:`PackedInput`),
    written into ``dw`` (deterministic split-K)."""
    import cupy

    x_shape = x.shape
    n, c, h, wd, k, cg, r, s, p, q = geometry(x_shape, w_shape, stride, padding, dilation)
    kg = k // groups
    cpad = padded_channels(cg, dz.dtype)
    xn = x.array if isinstance(x, PackedInput) else _pack_nhwc(x, g * cg, cg, cpad)
    tma = tma_wgrad_plan(dz.dtype, x_shape, w_shape, stride, padding, dilation, groups, dz.device.id, config)
    if tma is not None:  # one group
        splits = tma.splits
        ws = cupy.ndarray((splits, kg, r * s * cpad), np.float32)
        launch_tma(tma, dz.data.ptr, xn.data.ptr, ws.data.ptr, 0, np.int32(0))
    else:
        ((kern, grid, block, smem, prm, splits),) = gemm_plan(ConvMode.BACKWARD_FILTER, dz.dtype, x_shape, w_shape,
                                                              stride, padding, dilation, groups, dz.device.id, config,
                                                              tf32)
        ws = cupy.ndarray((splits, kg, r * s * cpad), np.float32)
        kern(grid, block, (dz, xn, _ptr(dz), ws, _ptr(dz), prm, *ints(0)), shared_mem=smem)
    util_kernel(dz.dtype, "wgrad_reduce").kernel(_blocks(kg * cg * r * s), (THREADS,), (
        ws, _ptr(dw, g * kg * cg * r * s), *ints(splits, kg, cg, r * s, cpad)))


def _column_sums(dz, kg, kpad, out, offset):
    """``out[offset:offset+kg]`` = column sums of the packed (rows, kpad) ``dz``: the bias gradient,
    in two deterministic passes (CuPy's ``sum(axis=0)`` over the strided slice runs one thread per column)."""
    import cupy

    rows = dz.size // kpad
    per_block = 512
    blocks = grid_1d(rows, per_block)
    part = cupy.ndarray((blocks, kg), np.float32)
    util_kernel(dz.dtype, "colsum_partial")((blocks,), (THREADS,), (
        dz, part, np.int64(rows), *ints(kg, kpad, per_block)))
    util_kernel(dz.dtype, "colsum_reduce")((grid_1d(kg, 128),), (128,), (
        part, _ptr(out, offset), *ints(blocks, kg)))


def _conv2d_backward_cuda(dy, x, x_shape, w, w_shape, stride, padding, dilation, groups, mask, need_dx, need_dw,
                          need_db, config, tf32):
    import cupy

    n, c, h, wd, k, cg, r, s, p, q = geometry(x_shape, w_shape, stride, padding, dilation)
    kg = k // groups
    kpad = padded_channels(kg, dy.dtype)
    words = (n * p * q + 31) // 32
    dx = None
    dw = cupy.ndarray(w_shape, dy.dtype) if need_dw else None
    db = cupy.ndarray((k,), dy.dtype) if need_db else None
    if need_dw and direct_filter_gradient(w_shape, groups, dy.dtype, tf32, config):  # dW and db in one pass over dy
        _direct_backward_filter_cuda(dy, x, w_shape, stride, padding, dilation, mask, dw, db)
        need_dw = need_db = False
        if not need_dx:
            return dx, dw, db
    for g in range(groups):
        dz = _pack_nhwc(dy, g * kg, kg, kpad, mask, words)
        if need_db:
            _column_sums(dz, kg, kpad, db, g * kg)
        # dW first: its packed copy of x is gone before dX is allocated (a lower peak in training)
        if need_dw:
            _backward_filter_group_cuda(dz, x, w_shape, g, groups, stride, padding, dilation, dw, config, tf32)
        if need_dx:
            if dx is None:
                dx = cupy.ndarray(x_shape, dy.dtype)
            _backward_data_group_cuda(dz, w, x_shape, g, groups, stride, padding, dilation, dx, config, tf32)
        del dz
    return dx, dw, db


# ---------------------------------------------------------------- public primitives
def conv2d_forward(x, w, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, activation=None,
                   want_mask=False, keep_packed_x=False, *, config=DEFAULT_CONFIG):
    """``act(conv2d(x, w) + bias)`` and, for activation 'relu' with ``want_mask``, its bit-packed mask; with
    ``keep_packed_x`` also x as the forward packed it (a :class:`PackedInput`, for :func:`conv2d_backward` in
    place of x), or None where this path packs nothing (NumPy, the direct and NCHW forwards, groups > 1)."""
    stride, padding, dilation = tuple(stride), tuple(padding), tuple(dilation)
    out = None
    if x.shape[0] == 0:  # an empty batch: an empty output (and mask), as PyTorch gives
        xp = backend.array_module(x)
        p, q = (out_size(x.shape[2 + i], w.shape[2 + i], stride[i], padding[i], dilation[i]) for i in (0, 1))
        mask = xp.empty((w.shape[0], 0), np.uint32) if activation == "relu" and want_mask else None
        out = xp.empty((0, w.shape[0], p, q), x.dtype), mask
    elif _on_gpu(x):
        run = _forward_launcher(x.dtype, x.shape, w.shape, stride, padding, dilation, groups, x.device.id, config,
                                backend.tf32_conv.allow_tf32)
        if run is not None:
            return run(x, w, bias, activation == "relu", want_mask, keep_packed_x)
    if out is None:
        out = conv2d_forward_ref(x, w, bias, stride, padding, dilation, groups, activation, want_mask)
    return (*out, None) if keep_packed_x else out


def conv2d_backward(dy, x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, mask=None,
                    need_dx=True, need_dw=True, need_db=False, *, config=DEFAULT_CONFIG):
    """(dx, dw, db) of the convolution for output gradient ``dy`` (masked by the ReLU ``mask`` if given). ``x``
    is the input, or the :class:`PackedInput` its forward kept (whose values the filter gradient takes as
    they are: TF32-rounded where the forward ran TF32)."""
    stride, padding, dilation = tuple(stride), tuple(padding), tuple(dilation)
    if dy.shape[0] == 0:  # an empty batch contributes nothing: zero weight and bias gradients
        xp = backend.array_module(dy)
        return (xp.empty(x.shape, dy.dtype) if need_dx else None, xp.zeros(w.shape, dy.dtype) if need_dw else None,
                xp.zeros((w.shape[0],), dy.dtype) if need_db else None)
    if _on_gpu(dy) and fits_int32(x.shape, w.shape, stride, padding, dilation, groups, dy.dtype):
        return _conv2d_backward_cuda(dy, x, x.shape, w, w.shape, stride, padding, dilation, groups, mask, need_dx,
                                     need_dw, need_db, config, backend.tf32_conv.allow_tf32)
    return conv2d_backward_ref(dy, x, w, stride, padding, dilation, groups, mask, need_dx, need_dw, need_db)


def conv2d_backward_data(dy, w, x_shape, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, *,
                         config=DEFAULT_CONFIG):
    """dX alone (benchmarks and users of the data gradient only)."""
    stride, padding, dilation, x_shape = tuple(stride), tuple(padding), tuple(dilation), tuple(x_shape)
    if _on_gpu(dy) and fits_int32(x_shape, w.shape, stride, padding, dilation, groups, dy.dtype):
        return _conv2d_backward_cuda(dy, None, x_shape, w, w.shape, stride, padding, dilation, groups, None, True,
                                     False, False, config, backend.tf32_conv.allow_tf32)[0]
    return conv2d_backward_data_ref(dy, w, x_shape, stride, padding, dilation, groups)


def conv2d_backward_filter(dy, x, w_shape, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, *,
                           config=DEFAULT_CONFIG):
    """dW alone (benchmarks and users of the filter gradient only)."""
    stride, padding, dilation, w_shape = tuple(stride), tuple(padding), tuple(dilation), tuple(w_shape)
    if _on_gpu(dy) and fits_int32(x.shape, w_shape, stride, padding, dilation, groups, dy.dtype):
        return _conv2d_backward_cuda(dy, x, x.shape, None, w_shape, stride, padding, dilation, groups, None, False,
                                     True, False, config, backend.tf32_conv.allow_tf32)[1]
    return conv2d_backward_filter_ref(dy, x, w_shape, stride, padding, dilation, groups)
