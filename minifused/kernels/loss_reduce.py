"""The 'sum' / 'mean' reduction of per-row losses (``loss_reduce.cu``), and its NumPy reference.

``loss_reduce(loss_rows, row_weights, mean, dtype) -> (loss, denominator or None)``: ``loss_rows``
and ``row_weights`` float32 (M,); the loss is a 0-d array in ``dtype``; with ``mean`` it is
``sum(loss_rows) / sum(row_weights)`` and the denominator, a float32 (1,) array, is returned for
backward. All on the device, in one launch: nothing syncs with the host.
"""
from __future__ import annotations

import numpy as np

from .. import backend
from . import NULL, ctype, get_kernel

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
    out = cupy.empty((), dtype)
    denom = cupy.empty((1,), np.float32) if mean else None
    kern = get_kernel("loss_reduce.cu", "loss_reduce", (f"-DOUT_T={ctype(dtype)}",))
    kern((1,), (1024,), (loss_rows, row_weights if mean else loss_rows, out,
                         denom if mean else NULL, np.int64(loss_rows.size), np.int32(bool(mean))))
    return out, denom
