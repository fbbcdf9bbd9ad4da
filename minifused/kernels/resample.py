"""Nearest-neighbour resampling of NCHW arrays on the GPU (``resample.cu``): the forward gathers by PyTorch's
source-index tables, the backward sums each input's window of outputs (a gather: deterministic, no atomics).

``nearest_forward(x, rows, cols, out_hw)`` / ``nearest_backward(g, row_starts, col_starts, in_hw)``: the device
arrays of :func:`nearest_tables` for the rows and the columns. C-contiguous float32, float16 or bfloat16 arrays of
four dimensions (:func:`applies`).
"""
from __future__ import annotations

import functools

import numpy as np

from .. import backend
from . import ARG, Prepared, ctype, get_kernel, grid_1d, sm_count
from .columns import DTYPES


def applies(x):
    """Whether the kernels take ``x``: a C-contiguous 4-D CUDA array of a dtype in :data:`DTYPES`, of fewer than 2^31
    elements in a plane."""
    return (backend.is_cuda_array(x) and x.ndim == 4 and x.dtype.name in DTYPES and x.flags.c_contiguous
            and x.shape[2] * x.shape[3] < 2 ** 31)


def nearest_tables(index, in_size):
    """(index, starts) as int32: the source index of each output (``index``, non-decreasing) and, for each input
    position h, the first output reading it or a later one (``in_size + 1`` entries: input h's outputs are
    ``starts[h]:starts[h + 1]``)."""
    index = np.asarray(index, np.int64)
    starts = np.searchsorted(index, np.arange(in_size + 1), side="left")
    return index.astype(np.int32), starts.astype(np.int32)


@functools.lru_cache(maxsize=256)  # keyed by shape
def _launch(name, dtype, total, h, w, p, q, dev):
    kern = get_kernel("resample.cu", name, (f"-DELEM_T={ctype(dtype)}",))
    return Prepared(kern, (min(grid_1d(total, 256), 32 * sm_count(dev)),), (256,),
                    (ARG, ARG, ARG, ARG, np.int64(total), *(np.int32(v) for v in (h, w, p, q))), pdl=True)


def nearest_forward(x, rows, cols, out_hw):
    """``x`` (N, C, H, W) resampled to (N, C, P, Q) = ``out_hw``: ``rows`` / ``cols`` the device index tables."""
    import cupy

    n, c, h, w = x.shape
    y = cupy.ndarray((n, c, *out_hw), x.dtype)
    if y.size:
        _launch("nearest_forward", x.dtype, y.size, h, w, *out_hw, x.data.device_id)(
            x.data.ptr, y.data.ptr, rows.data.ptr, cols.data.ptr)
    return y


def nearest_backward(g, row_starts, col_starts, in_hw):
    """The gradient of :func:`nearest_forward` for ``g`` (N, C, P, Q): (N, C, H, W) = ``in_hw``, from the window
    starts of the rows and the columns."""
    import cupy

    n, c, p, q = g.shape
    dx = cupy.ndarray((n, c, *in_hw), g.dtype)
    if dx.size:
        _launch("nearest_backward", g.dtype, dx.size, *in_hw, p, q, g.data.device_id)(
            g.data.ptr, dx.data.ptr, row_starts.data.ptr, col_starts.data.ptr)
    return dx
