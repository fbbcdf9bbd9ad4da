"""Joins along one axis on the GPU: :func:`concatenate` writes cat's output with one copy per input, and
:func:`split` gives cat's gradient back as dense pieces (gather.cu's ``copy_rows``; CuPy's concatenate costs
several times the host time of these launches, and its pieces as views would cost a copy each in the kernels
that take dense operands).

Both work on the memory of dense arrays: C-contiguous ones, or channels-last ones (``is_channels_last``) whose
memory is (N, H, W, C). Joined along an axis, such memory is ``rows`` rows (the product of the axes before it in
memory order), each input's rows contiguous and laid side by side in the output's. Anything else (NumPy arrays,
other strides, mixed layouts or dtypes) goes to the array module's own concatenate / split.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .. import backend
from . import ARG, Prepared, c_contiguous, channels_last_strided, empty_channels_last, get_kernel, is_channels_last

_THREADS = 256
_CHANNELS_LAST_ORDER = (0, 2, 3, 1)  # memory axes of a channels-last array, by logical axis


@functools.lru_cache(maxsize=1024)  # keyed by shape: bounded for workloads of many shapes
def _copy_launch(unit, rows, width, src_pitch, dst_pitch, dev):
    """copy_rows of ``rows`` rows of ``width`` ``unit``-byte units (pitches in units too) on device ``dev``: one
    unit a thread, up to 32 blocks an SM (grid-stride past that); the arguments the two addresses."""
    from . import sm_count

    blocks = max(1, min(-(-rows * width // _THREADS), 32 * sm_count(dev)))
    return Prepared(get_kernel("gather.cu", "copy_rows", (f"-DUNIT_A={unit}",)), (blocks,), (_THREADS,),
                    (ARG, ARG, np.int64(rows), np.int64(width), np.int64(src_pitch), np.int64(dst_pitch)))


def _copy(src, dst, rows, width, src_pitch, dst_pitch, dev):
    """Bytes: ``rows`` rows of ``width`` at address ``src`` (rows ``src_pitch`` apart) into ``dst`` (``dst_pitch``
    apart), in the widest unit that all of them are multiples of."""
    unit = math.gcd(16, src, dst, width, src_pitch, dst_pitch)
    _copy_launch(unit, rows, width // unit, src_pitch // unit, dst_pitch // unit, dev)(src, dst)


def _rows(shape, axis, channels_last):
    """The rows of a dense array of ``shape`` (channels-last or C order) joined along ``axis``: the product of the
    sizes of the axes before it in memory."""
    order = _CHANNELS_LAST_ORDER if channels_last else range(len(shape))
    before = []
    for a in order:
        if a == axis:
            return math.prod(before)
        before.append(shape[a])
    raise ValueError(axis)


def _dense_in(a, channels_last):
    return channels_last_strided(a) if channels_last else c_contiguous(a)


def concatenate(arrays, axis, out):
    """``arrays`` (one dtype, one shape but along ``axis``) joined along ``axis`` into ``out`` (new, C-contiguous or
    channels-last), which is returned."""
    channels_last = is_channels_last(out)
    if not (backend.is_cuda_array(out) and (channels_last or c_contiguous(out))
            and all(backend.is_cuda_array(a) and a.dtype == out.dtype and _dense_in(a, channels_last)
                    for a in arrays)):
        return backend.array_module(out).concatenate(arrays, axis=axis, out=out)
    rows = _rows(out.shape, axis, channels_last)
    if rows == 0 or out.size == 0:
        return out
    pitch, dst, dev = out.nbytes // rows, out.data.ptr, out.data.device_id
    for a in arrays:
        width = a.nbytes // rows
        if width:
            _copy(a.data.ptr, dst, rows, width, width, pitch, dev)
            dst += width
    return out


def split(g, sizes, axis):
    """``g`` cut along ``axis`` into pieces of ``sizes`` (which add up to its size there), each dense in ``g``'s
    layout where ``g`` is dense (a view where it already is: one row), else views of ``g``."""
    channels_last = is_channels_last(g)
    xp = backend.array_module(g)
    rows = _rows(g.shape, axis, channels_last) if g.ndim else 0
    if not (backend.is_cuda_array(g) and (channels_last or c_contiguous(g))) or rows <= 1 or g.size == 0:
        return xp.split(g, np.cumsum(sizes)[:-1].tolist(), axis=axis)
    pitch, src, dev = g.nbytes // rows, g.data.ptr, g.data.device_id
    pieces = []
    for n in sizes:
        shape = g.shape[:axis] + (n,) + g.shape[axis + 1:]
        piece = empty_channels_last(shape, g.dtype) if channels_last else xp.ndarray(shape, g.dtype)
        width = piece.nbytes // rows
        if width:
            _copy(src, piece.data.ptr, rows, width, pitch, width, dev)
            src += width
        pieces.append(piece)
    return pieces
