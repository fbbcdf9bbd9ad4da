"""Row gather along the first axis: ``gather_rows(src, idx) -> src[idx]``, and ``rows_gatherer(srcs)``, which
gathers several arrays by one index with each source planned once (a DataLoader's batches); ``copy_pair``, two
contiguous arrays copied in one launch.

CuPy arrays go to gather.cu, two arrays per launch, each row moved in the widest pieces (16, 8, 4, 2 or 1
bytes) that its size and the base addresses allow: less host time than a ``cupy.take`` per array. NumPy
arrays and non-contiguous sources take ``take`` (the reference). ``idx`` is assumed in range.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .. import backend
from . import ARG, NULL, Prepared, get_kernel, grid_1d, sm_count

_THREADS = 256


def gather_rows_ref(src, idx):
    return backend.array_module(src).take(src, idx, axis=0)


@functools.cache
def _kernel(unit_a, unit_b):
    return get_kernel("gather.cu", "gather_rows", (f"-DUNIT_A={unit_a}", f"-DUNIT_B={unit_b}"))


def _plan(src):
    """(piece bytes, pieces per row) of a source the kernel gathers, or None for the reference."""
    if not backend.is_cuda_array(src) or not src.flags.c_contiguous or src.ndim == 0 or src.shape[0] == 0:
        return None
    row_bytes = src.nbytes // src.shape[0]
    unit = math.gcd(16, row_bytes, src.data.ptr % 16 or 16)
    return unit, row_bytes // unit


def rows_gatherer(srcs):
    """``gather(idx) -> tuple(src[idx] for src in srcs)`` with every source settled once (its kernel, its
    row's pieces), so that each call only allocates and launches, two sources per launch."""
    import cupy

    plans = [_plan(s) for s in srcs]
    kernel_rows = [i for i, p in enumerate(plans) if p is not None]
    launches = []  # (kernel, [(source index, pieces per row), ...]) for pairs of kernel-gathered sources
    for j in range(0, len(kernel_rows), 2):
        pair = kernel_rows[j:j + 2]
        units = [plans[i][0] for i in pair] + [1]
        launches.append((_kernel(units[0], units[1]).kernel, [(i, np.int64(plans[i][1])) for i in pair]))

    def gather(idx):
        if kernel_rows and (idx.dtype != np.int64 or not idx.flags.c_contiguous):
            idx = cupy.ascontiguousarray(idx, dtype=np.int64)
        n = idx.shape[0]
        outs = [gather_rows_ref(s, idx) if p is None else cupy.ndarray((n, *s.shape[1:]), s.dtype)
                for s, p in zip(srcs, plans)]
        for fn, pair in launches:
            args = [idx]
            total = 0
            for i, units in pair:
                args += [srcs[i], outs[i], units, np.int64(n * int(units))]
                total += n * int(units)
            if len(pair) == 1:
                args += [NULL, NULL, np.int64(1), np.int64(0)]
            if total:
                fn((min(grid_1d(total, _THREADS), 65535),), (_THREADS,), tuple(args))
        return tuple(outs)
    return gather


def gather_rows(src, idx):
    """``src[idx]`` for a 1-D integer ``idx``: rows of ``src`` along its first axis."""
    return rows_gatherer([src])(idx)[0]


def _unit(a, b):
    """The widest piece (16 .. 1 bytes) dividing the copy of ``a`` into ``b``: their sizes and addresses."""
    return math.gcd(16, a.nbytes, a.data.ptr % 16 or 16, b.data.ptr % 16 or 16)


@functools.lru_cache(maxsize=None)
def _copy_launch(unit_a, unit_b, grid, dev):
    kern = get_kernel("gather.cu", "copy_pair", (f"-DUNIT_A={unit_a}", f"-DUNIT_B={unit_b}"))
    return Prepared(kern, (grid,), (_THREADS,), (ARG,) * 6)


def copy_pair(dst_a, src_a, dst_b, src_b):
    """``dst_a[...] = src_a`` and ``dst_b[...] = src_b`` in one launch on the current stream: C-contiguous CuPy arrays
    of one device, each destination of its source's size (one launch costs less host time, and a GPU running
    launches back to back less idle time between them, than two copies)."""
    ua, ub = _unit(src_a, dst_a), _unit(src_b, dst_b)
    ta, tb = src_a.nbytes // ua, src_b.nbytes // ub
    dev = src_a.data.device_id
    grid = min(grid_1d(ta + tb, _THREADS), 4 * sm_count(dev))
    _copy_launch(ua, ub, grid, dev)(src_a.data.ptr, dst_a.data.ptr, ta, src_b.data.ptr, dst_b.data.ptr, tb)
