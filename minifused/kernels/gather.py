"""Row gather along the first axis: ``gather_rows(src, idx) -> src[idx]``, and ``rows_gatherer(srcs)``, which
gathers several arrays by one index with each source planned once (a DataLoader's batches); ``copy_pair``, two
contiguous arrays copied in one launch; ``checked_index``, a CUDA index array made safe to gather with in one
launch, its bounds check deferred to the next sync point.

CuPy arrays go to gather.cu, two arrays per launch, each row moved in the widest pieces (16, 8, 4, 2 or 1
bytes) that its size and the base addresses allow: less host time than a ``cupy.take`` per array. NumPy
arrays and non-contiguous sources take ``take`` (the reference). ``idx`` is assumed in range.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .. import backend
from . import ARG, NULL, Prepared, c_contiguous, get_kernel, grid_1d, sm_count

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


@functools.lru_cache(maxsize=256)
def _gather_launch(unit, grid, dev):
    """One source's gather (the kernel's second array absent), prepared once per piece size and grid."""
    return Prepared(_kernel(unit, 1), (grid,), (_THREADS,), (ARG,) * 5 + (NULL, NULL, np.int64(1), np.int64(0)))


def gather_rows(src, idx):
    """``src[idx]`` for a 1-D integer ``idx``: rows of ``src`` along its first axis (one launch of a prepared
    kernel: less host time than ``take``, whose launch converts its arguments every call)."""
    plan = _plan(src)
    if plan is None:
        return gather_rows_ref(src, idx)
    import cupy

    if idx.dtype != np.int64 or not idx.flags.c_contiguous:
        idx = cupy.ascontiguousarray(idx, dtype=np.int64)
    n = idx.shape[0]
    out = cupy.ndarray((n, *src.shape[1:]), src.dtype)
    unit, units = plan
    total = n * units
    if total:
        dev = src.data.device_id
        _gather_launch(unit, min(grid_1d(total, _THREADS), 16 * sm_count(dev)), dev)(
            idx.data.ptr, src.data.ptr, out.data.ptr, units, total)
    return out


def _unit(a, b):
    """The widest piece (16 .. 1 bytes) dividing the copy of ``a`` into ``b``: their sizes and addresses."""
    return math.gcd(16, a.nbytes, a.data.ptr % 16 or 16, b.data.ptr % 16 or 16)


@functools.lru_cache(maxsize=None)
def _copy_launch(unit_a, unit_b, grid, dev):
    kern = get_kernel("gather.cu", "copy_pair", (f"-DUNIT_A={unit_a}", f"-DUNIT_B={unit_b}"))
    return Prepared(kern, (grid,), (_THREADS,), (ARG,) * 6)


def copy_pair(dst_a, src_a, dst_b, src_b):
    """``dst_a[...] = src_a`` and ``dst_b[...] = src_b`` in one launch on the current stream: CuPy arrays of one
    device, each destination laid out as its source in dense memory (copied as bytes; one launch costs less host
    time, and a GPU running launches back to back less idle time between them, than two copies)."""
    ua, ub = _unit(src_a, dst_a), _unit(src_b, dst_b)
    ta, tb = src_a.nbytes // ua, src_b.nbytes // ub
    dev = src_a.data.device_id
    grid = min(grid_1d(ta + tb, _THREADS), 4 * sm_count(dev))
    _copy_launch(ua, ub, grid, dev)(src_a.data.ptr, dst_a.data.ptr, ta, src_b.data.ptr, dst_b.data.ptr, tb)


# ---------------------------------------------------------------- index arrays checked without a sync
#: Waiting checks, one a call of :func:`checked_index`: (where its first bad position lies, its index array, its
#: error). Where: (a device's :class:`_Slots`, the slot's number), or (None, a one-slot array of its own) for a
#: call recorded into a CUDA graph (whose replays write it again).
_pending = []
_slots = {}  # device id -> _Slots
SLOTS = 256  # the checks a device holds before the next one reads them all first (a sync)


class _Slots:
    """One int64 array of the first-bad-position slots of a device's waiting checks, read in one copy."""

    def __init__(self):
        import cupy

        self.array, self.used = cupy.ndarray((SLOTS,), np.int64), 0


@functools.lru_cache(maxsize=256)  # keyed by size
def _index_fix_launch(itemsize, signed, count, dev):
    kern = get_kernel("gather.cu", "index_fix", (f"-DINDEX_BYTES={itemsize}", f"-DINDEX_SIGNED={int(signed)}"))
    return Prepared(kern, (min(grid_1d(count, _THREADS), 32 * sm_count(dev)),), (_THREADS,),
                    (ARG, ARG, np.int64(count), ARG, ARG, ARG))


def checked_index(index, n, negative, error):
    """``index`` (a non-empty CUDA integer array) as an int64 array of its shape with negative entries plus ``n``,
    clipped into [0, n): safe to gather with at once. Whether every entry lay in [-n, n) (``negative``) or [0, n) is
    known at the next sync point (``backend.defer_check``), where ``error(value, position)`` (of the first entry
    outside) is raised."""
    import cupy

    if not c_contiguous(index):
        index = cupy.ascontiguousarray(index)
    dev = index.data.device_id
    if backend.is_capturing():
        where = (None, cupy.ndarray((1,), np.int64))
        first = where[1].data.ptr
    else:
        slots = _slots.get(dev)
        if slots is None:
            slots = _slots[dev] = _Slots()
        if slots.used == SLOTS:
            check_pending()
        where = (slots, slots.used)
        first = slots.array.data.ptr + 8 * slots.used
        slots.used += 1
    cupy.cuda.runtime.memsetAsync(first, 0xFF, 8, cupy.cuda.get_current_stream().ptr)  # all ones: no bad entry
    out = cupy.ndarray(index.shape, np.int64)
    _index_fix_launch(index.itemsize, index.dtype.kind == "i", index.size, dev)(
        index.data.ptr, out.data.ptr, -n if negative else 0, n, first)
    _pending.append((where, index, error))
    backend.defer_check(check_pending)
    return out


def check_pending():
    """Read the waiting checks of :func:`checked_index` (one copy a device) and raise the first failure's error."""
    import cupy

    checks = _pending[:]
    _pending.clear()
    read = {}
    for dev, slots in _slots.items():
        if slots.used:
            with cupy.cuda.Device(dev):
                read[id(slots)] = slots.array[:slots.used].get()
            slots.used = 0
    for (slots, k), index, error in checks:
        pos = int(read[id(slots)][k] if slots is not None else k.get()[0])
        if pos >= 0:
            raise error(int(index.reshape(-1)[pos]), pos)
