"""Row gather: ``gather_rows(src, idx) -> src[idx]`` along the first axis (a DataLoader's batches).

CuPy arrays go to gather.cu, one launch that moves each row in the widest pieces (16, 8, 4, 2 or 1 bytes)
its size and the two base addresses allow, which costs the host less than ``cupy.take``; NumPy arrays and
non-contiguous sources to ``take`` (the reference). ``idx`` is assumed in range.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .. import backend
from . import get_kernel, grid_1d

_THREADS = 256


def gather_rows_ref(src, idx):
    return backend.array_module(src).take(src, idx, axis=0)


@functools.cache
def _kernel(unit_bytes):
    return get_kernel("gather.cu", "gather_rows", (f"-DUNIT_BYTES={unit_bytes}",))


def gather_rows(src, idx):
    """``src[idx]`` for a 1-D integer ``idx``: rows of ``src`` along its first axis."""
    if not backend.is_cuda_array(src) or not src.flags.c_contiguous or src.ndim == 0:
        return gather_rows_ref(src, idx)
    import cupy

    if idx.dtype != np.int64 or not idx.flags.c_contiguous:
        idx = cupy.ascontiguousarray(idx, dtype=np.int64)
    out = cupy.ndarray((idx.shape[0], *src.shape[1:]), src.dtype)
    row_bytes = src.nbytes // src.shape[0] if src.shape[0] else 0
    if out.size == 0:
        return out
    unit = math.gcd(16, row_bytes, src.data.ptr % 16 or 16)
    units = row_bytes // unit
    total = idx.shape[0] * units
    _kernel(unit).kernel((min(grid_1d(total, _THREADS), 65535),), (_THREADS,),
                  (src, idx, out, np.int64(units), np.int64(total)))
    return out
