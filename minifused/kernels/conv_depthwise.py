"""Depthwise convolutions (``groups`` = input channels, each with its own filters) on ``conv_depthwise.cu``: one
launch forward (bias, ReLU and its mask included), one for the input gradient, two for the filter and bias
gradients (per-split partial sums, then their fixed-order sum). :mod:`.conv` routes here the C-contiguous fp32 /
fp16 / bf16 calls whose filters have at most :data:`TAPS_MAX` taps; its grouped GEMM path would run one pack and
one GEMM per channel. The launchers' ``run`` functions have :mod:`.conv`'s launcher signatures."""
from __future__ import annotations

import functools

import numpy as np

from . import NULL, ctype, get_kernel, grid_1d, sm_count
from .conv_plan import GPU_DTYPES, geometry

TAPS_MAX = 64  # R*S at most (the filter gradient keeps R*S + 1 sums per thread in registers)
THREADS = 256  # conv_depthwise.cu's blocks (its warp sums assume 8 warps)
_INT32 = 2 ** 31


def applies(dtype, x_shape, w_shape, groups):
    """Whether a convolution is depthwise and fits these kernels."""
    n, c, h, wd = x_shape
    k, cg, r, s = w_shape
    return (groups > 1 and groups == c and cg == 1 and k % c == 0 and r * s <= TAPS_MAX and k < 65536
            and np.dtype(dtype) in GPU_DTYPES and n * max(c, k) * h * wd < _INT32)


@functools.cache
def _plan(dtype, x_shape, w_shape, stride, padding, dilation):
    """(the four kernels, P, Q, the geometry as a device int32 array in conv_depthwise.cu's order)."""
    import cupy

    n, c, h, wd, k, _, r, s, p, q = geometry(x_shape, w_shape, stride, padding, dilation)
    if n * k * p * q >= _INT32:
        return None
    opts = (f"-DCONV_T={ctype(dtype)}", f"-DG_R={r}", f"-DG_S={s}")
    kernels = tuple(get_kernel("conv_depthwise.cu", name, opts) for name in ("dw_fwd", "dw_dgrad", "dw_wgrad",
                                                                               "dw_reduce"))
    geo = cupy.asarray(np.array([n, c, h, wd, k, k // c, p, q, *stride, *padding, *dilation], np.int32))
    return kernels, p, q, geo


def _flags(relu, bias):
    return np.int32((1 if relu else 0) | (2 if bias else 0))


@functools.cache
def forward_launcher(dtype, x_shape, w_shape, stride, padding, dilation):
    """``run(x, w, bias, relu, want_mask, keep_x=False, packed=None) -> (y, mask)`` (and a None kept input with
    ``keep_x``), or None where the output's indices would not fit."""
    import cupy

    plan = _plan(dtype, x_shape, w_shape, stride, padding, dilation)
    if plan is None:
        return None
    (fwd, _, _, _), p, q, geo = plan
    n, k = x_shape[0], w_shape[0]
    m = n * p * q
    words = (m + 31) // 32
    grid = (grid_1d(m, THREADS), k)

    def run(x, w, bias, relu, want_mask, keep_x=False, packed=None):
        y = cupy.ndarray((n, k, p, q), dtype)
        mask = cupy.ndarray((k, words), np.uint32) if (relu and want_mask) else None
        fwd(grid, (THREADS,), (x, w, y if bias is None else bias, y, NULL if mask is None else mask,
                               _flags(relu, bias is not None), np.int32(words), geo))
        return (y, mask, None) if keep_x else (y, mask)
    return run


def _splits(k, m, dev):
    """Splits of each channel's ``m`` output pixels for the filter gradient: enough blocks for two per SM, each
    split at least 2048 pixels."""
    return max(1, min(-(-2 * sm_count(dev) // k), -(-m // 2048)))


@functools.cache
def backward_launcher(dtype, x_shape, w_shape, stride, padding, dilation, dev):
    """``run(dy, x, w, mask, need_dx, need_dw, need_db) -> (dx, dw, db)``, or None as :func:`forward_launcher`."""
    import cupy

    plan = _plan(dtype, x_shape, w_shape, stride, padding, dilation)
    if plan is None:
        return None
    (_, dgrad, wgrad, reduce), p, q, geo = plan
    n, c, h, wd = x_shape
    k, _, r, s = w_shape
    m = n * p * q
    words = np.int32((m + 31) // 32)
    splits = _splits(k, m, dev)
    per = np.int32(-(-m // splits))
    pairs = k * (r * s + 1)

    def run(dy, x, w, mask, need_dx, need_dw, need_db, w_channels_last=False):
        dx = dw = db = None
        ma = NULL if mask is None else mask
        if need_dw or need_db:
            dw = cupy.ndarray(w_shape, dtype) if need_dw else None
            db = cupy.ndarray((k,), dtype) if need_db else None
            part = cupy.ndarray((splits, pairs), np.float32)
            wgrad((splits, k), (THREADS,), (x, dy, ma, part, words, per, geo))
            reduce((grid_1d(pairs, 128),), (128,), (part, NULL if dw is None else dw, NULL if db is None else db,
                                                   np.int32(splits), np.int32(k)))
        if need_dx:
            dx = cupy.ndarray(x_shape, dtype)
            dgrad((grid_1d(n * h * wd, THREADS), c), (THREADS,), (dy, w, ma, dx, words, geo))
        return dx, dw, db
    return run
