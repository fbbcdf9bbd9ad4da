"""The 'sum' / 'mean' reduction of per-row losses (``loss_reduce.cu``), and its NumPy reference.

``loss_reduce(loss_rows, row_weights, mean, dtype) -> (loss, denominator or None)``: ``loss_rows``
and ``row_weights`` float32 (M,); the loss is a 0-d array in ``dtype``; with ``mean`` it is
``sum(loss_rows) / sum(row_weights)`` and the denominator, a float32 (1,) array, is returned for
backward. All on the device, in one launch: nothing syncs with the host.

``squared_error(x, t, mean)``: ``mse_loss``'s 'mean' (or 'sum') of ``(x - t)**2``, a 0-d array in x's dtype, and
``squared_error_backward(x, t, g, mean, need_x, need_t) -> (dx, dt)``: ``norm * (x - t) * g`` (norm ``2 / n`` for
'mean', else 2, as PyTorch's) and its negation. x and t: one shape and one float dtype, C-contiguous on the
GPU for the kernels (two launches forward, one backward; float32 sums); elsewhere NumPy / CuPy expressions.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import backend
from . import ARG, F32, Prepared, ctype, get_kernel, grid_1d, sm_count

_KERNEL_DTYPES = (np.dtype(np.float32), backend.float16, backend.bfloat16)
_PARTIAL_THREADS = 256  # squared_error_partials' block (loss_reduce.cu)

def loss_reduce_ref(loss_rows, row_weights, mean, dtype):
    total = np.asarray(loss_rows, dtype=np.float64).sum()
    if not mean:
        return np.asarray(total).astype(dtype), None
    denom = np.asarray(row_weights, dtype=np.float64).sum()
    with np.errstate(invalid="ignore", divide="ignore"):  # all targets ignored: NaN, as PyTorch
        return np.asarray(total / denom).astype(dtype), np.asarray([denom], dtype=np.float32)


def loss_reduce(loss_rows, row_weights, mean, dtype):
    if not backend.is_cuda_array(loss_rows):
        return loss_reduce_ref(loss_rows, row_weights, mean, dtype)
    import cupy

    dtype = np.dtype(dtype)
    out = cupy.ndarray((), dtype)
    denom = cupy.ndarray((1,), np.float32) if mean else None
    _reduce_launch(dtype, loss_rows.size, bool(mean), loss_rows.data.device_id)(
        loss_rows.data.ptr, (row_weights if mean else loss_rows).data.ptr, out.data.ptr,
        denom.data.ptr if mean else 0)
    return out, denom


@functools.lru_cache(maxsize=256)  # keyed by size
def _reduce_launch(dtype, size, mean, dev):
    """loss_reduce's :class:`Prepared` launch (one block) for ``size`` rows: (rows, row weights, out, denominator)
    per call (CuPy's launch converted its six arguments on every call)."""
    return Prepared(get_kernel("loss_reduce.cu", "loss_reduce", (f"-DOUT_T={ctype(dtype)}",)), (1,), (1024,),
                    (ARG, ARG, ARG, ARG, np.int64(size), np.int32(mean)))


def _on_kernels(x, t):
    return (backend.is_cuda_array(x) and x.dtype in _KERNEL_DTYPES and x.size and x.flags.c_contiguous
            and t.flags.c_contiguous)


@functools.lru_cache(maxsize=256)
def _squared_error_launches(dtype, n, dev):
    """(partials, their count, the loss_reduce that adds them) of one dtype, size and device: partials of
    at most 1024 blocks, at most 8 a multiprocessor (more would only lengthen loss_reduce's one-block sum)."""
    flags = (f"-DOUT_T={ctype(dtype)}",)
    blocks = min(grid_1d(n, _PARTIAL_THREADS * 4), 8 * sm_count(dev), 1024)
    partials = Prepared(get_kernel("loss_reduce.cu", "squared_error_partials", flags), (blocks,),
                        (_PARTIAL_THREADS,), (ARG, ARG, ARG, np.int64(n), F32))
    reduce = Prepared(get_kernel("loss_reduce.cu", "loss_reduce", flags), (1,), (1024,),
                      (ARG, ARG, ARG, ARG, np.int64(blocks), np.int32(0)))
    return partials, blocks, reduce


@functools.lru_cache(maxsize=256)
def _squared_error_backward_launch(dtype, n):
    kern = get_kernel("loss_reduce.cu", "squared_error_backward", (f"-DOUT_T={ctype(dtype)}",))
    return Prepared(kern, (min(grid_1d(n, 256 * 4), 65535),), (256,), (ARG, ARG, ARG, ARG, ARG, np.int64(n), F32))


def squared_error(x, t, mean):
    if not _on_kernels(x, t):
        xp = backend.array_module(x)
        wide = np.float32 if x.dtype in _KERNEL_DTYPES else x.dtype
        d = x.astype(wide) - t.astype(wide)
        total = xp.sum(d * d)
        return xp.asarray(total / d.size if mean else total).astype(x.dtype)
    import cupy

    partials, blocks, reduce = _squared_error_launches(x.dtype, x.size, x.data.device_id)
    part = cupy.ndarray((blocks,), np.float32)
    out = cupy.ndarray((), x.dtype)
    partials(x.data.ptr, t.data.ptr, part.data.ptr, 1.0 / x.size if mean else 1.0)
    reduce(part.data.ptr, part.data.ptr, out.data.ptr, 0)
    return out


def squared_error_backward(x, t, g, mean, need_x, need_t):
    norm = 2.0 / x.size if mean else 2.0
    if not _on_kernels(x, t):
        wide = np.float32 if x.dtype in _KERNEL_DTYPES else x.dtype
        d = norm * (x.astype(wide) - t.astype(wide)) * g.astype(wide)
        return (d.astype(x.dtype) if need_x else None), ((-d).astype(x.dtype) if need_t else None)
    import cupy

    dx = cupy.ndarray(x.shape, x.dtype) if need_x else None
    dt = cupy.ndarray(x.shape, x.dtype) if need_t else None
    _squared_error_backward_launch(x.dtype, x.size)(x.data.ptr, t.data.ptr, g.data.ptr,
                                                    0 if dx is None else dx.data.ptr,
                                                    0 if dt is None else dt.data.ptr, norm)
    return dx, dt
