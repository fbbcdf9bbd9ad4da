"""Row gather: ``gather_rows(src, idx) -> src[idx]`` along the first axis, and ``row_gatherer(src)``, the same
with ``src`` planned once (a DataLoader's batches).

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


def row_gatherer(src):
    """``gather(idx) -> src[idx]`` with everything about ``src`` settled once (its kernel, its row's pieces),
    so that each call only allocates and launches: a DataLoader's batches of one epoch."""
    if not backend.is_cuda_array(src) or not src.flags.c_contiguous or src.ndim == 0 or src.shape[0] == 0:
        return lambda idx: gather_rows_ref(src, idx)
    import cupy

    row_bytes = src.nbytes // src.shape[0]
    unit = math.gcd(16, row_bytes, src.data.ptr % 16 or 16)
    units, fn, tail, dtype = np.int64(row_bytes // unit), _kernel(unit).kernel, src.shape[1:], src.dtype

    def gather(idx):
        if idx.dtype != np.int64 or not idx.flags.c_contiguous:
            idx = cupy.ascontiguousarray(idx, dtype=np.int64)
        out = cupy.ndarray((idx.shape[0], *tail), dtype)
        total = idx.shape[0] * int(units)
        if total:
            fn((min(grid_1d(total, _THREADS), 65535),), (_THREADS,), (src, idx, out, units, np.int64(total)))
        return out
    return gather


def gather_rows(src, idx):
    """``src[idx]`` for a 1-D integer ``idx``: rows of ``src`` along its first axis."""
    return row_gatherer(src)(idx)
