"""Diagonals, with PyTorch's names and semantics: ``diagonal`` (a writable view, as PyTorch's:
``x.diagonal().fill_(1)`` writes into x), its inverse ``diag_embed``, ``diagflat``, ``trace`` and ``block_diag``
(dtypes promote)."""
from __future__ import annotations

import functools

from .. import backend
from ..autograd import Function
from ..tensor import Tensor
from ._common import autocast_float32, cast, promote
from .creation import zeros
from .products import _int, _tensors
from .reduce import dim_index
from .reduce import sum as _sum
from .indexing import setitem
from .shape import cat, reshape
from ..backend import InputTypeError

_xp = backend.array_module


def _diagonal_view(xp, a, offset, axis1, axis2):
    """a's ``offset``-th diagonal over (axis1, axis2) as a writable view of it (NumPy's ``diagonal`` is
    read-only): the other axes in order, then the diagonal."""
    start = [slice(None)] * a.ndim
    start[axis1], start[axis2] = slice(max(-offset, 0), None), slice(max(offset, 0), None)
    b = a[tuple(start)]  # a view that begins at the diagonal's first element
    others = [i for i in range(a.ndim) if i not in (axis1, axis2)]
    length = min(b.shape[axis1], b.shape[axis2])
    shape = tuple(b.shape[i] for i in others) + (length,)
    strides = tuple(b.strides[i] for i in others) + (b.strides[axis1] + b.strides[axis2],)
    return xp.lib.stride_tricks.as_strided(b, shape, strides)


class Diagonal(Function):
    """A view of a diagonal (``Tensor.diagonal``); the gradient goes back onto that diagonal of zeros."""

    is_view = True

    @staticmethod
    def forward(ctx, x, offset, axis1, axis2):
        ctx.meta = (x.shape, offset, axis1, axis2)
        return _diagonal_view(_xp(x), x, offset, axis1, axis2)

    @staticmethod
    def backward(ctx, g):
        shape, offset, axis1, axis2 = ctx.meta
        xp = _xp(g)
        out = xp.zeros(shape, g.dtype)
        _diagonal_view(xp, out, offset, axis1, axis2)[...] = g
        return out, None, None, None

    @staticmethod
    def backward_graph(ctx, g):
        shape, offset, axis1, axis2 = ctx.meta
        return DiagEmbed.apply(g, offset, axis1, axis2, shape=shape), None, None, None


class DiagEmbed(Function):
    """x's last dim onto a diagonal of zeros (``diag_embed``), the inverse of :class:`Diagonal`; the zeros of the
    square (over axis1, axis2) that fits the diagonal, or of ``shape`` (Diagonal's gradient: any input's)."""

    @staticmethod
    def forward(ctx, x, offset, axis1, axis2, shape=None):
        xp = _xp(x)
        ctx.meta = (offset, axis1, axis2)
        if shape is None:
            n = x.shape[-1] + abs(offset) if x.ndim else 1
            lead = iter(x.shape[:-1])
            shape = tuple(n if i in (axis1, axis2) else next(lead) for i in range(x.ndim + 1))
        out = xp.zeros(shape, x.dtype)
        _diagonal_view(xp, out, offset, axis1, axis2)[...] = x
        return out

    @staticmethod
    def backward(ctx, g):
        return backend.copy(_diagonal_view(_xp(g), g, *ctx.meta)), None, None, None

    @staticmethod
    def backward_graph(ctx, g):
        return Diagonal.apply(g, *ctx.meta), None, None, None


def _diagonal_dims(op, ndim, offset, dim1, dim2):
    offset = _int(op, "offset", offset)
    d1, d2 = dim_index(op, _int(op, "dim1", dim1), ndim), dim_index(op, _int(op, "dim2", dim2), ndim)
    if d1 == d2:
        raise RuntimeError(f"{op}: diagonal dimensions cannot be identical, got {dim1} and {dim2}")
    return offset, d1, d2


def diagonal(input, offset=0, dim1=0, dim2=1):  # noqa: A002 - PyTorch's name
    """The ``offset``-th diagonal (above the main one for offset > 0) over dims (dim1, dim2), appended as the
    last dim; a view, as in PyTorch (writes through it reach input). Out of range offsets give it size 0."""
    return Diagonal.apply(input, *_diagonal_dims("diagonal", input.ndim, offset, dim1, dim2))


def diag_embed(input, offset=0, dim1=-2, dim2=-1):  # noqa: A002 - PyTorch's name
    """A tensor whose diagonals over (dim1, dim2) (dims of the result, one more than input's) are input's last
    dim, zeros elsewhere: ``diagonal(diag_embed(x, o, d1, d2), o, d1, d2) == x``."""
    return DiagEmbed.apply(input, *_diagonal_dims("diag_embed", input.ndim + 1, offset, dim1, dim2))


def diagflat(input, offset=0):  # noqa: A002 - PyTorch's name
    """The flattened input on the ``offset``-th diagonal of a square matrix (0-d: a 1x1 one)."""
    offset = _int("diagflat", "offset", offset)
    return DiagEmbed.apply(reshape(input, input.numel()), offset, 0, 1)


def trace(input):  # noqa: A002 - PyTorch's name
    """The sum of a matrix's main diagonal (integer matrices sum to int64)."""
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got a tensor of {input.ndim} dimensions")
    if input.dtype == backend.bool_:
        raise NotImplementedError("trace: not implemented for bool tensors")
    (input,) = autocast_float32(input, devices=("cpu",))  # on PyTorch's cpu float32 list
    return _sum(Diagonal.apply(input, 0, 0, 1))


def block_diag(*tensors):
    """The tensors (each 0-, 1- or 2-D: a 1-D one is a row) along the diagonal of a zero matrix; dtypes
    promote. No tensors: a (1, 0) one, as PyTorch gives."""
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise InputTypeError(f"block_diag(): expected Tensor as element {i}, got {type(t).__name__}")
        if t.ndim > 2:
            raise RuntimeError(f"block_diag: input tensors must have 2 or fewer dimensions, input {i} has "
                               f"{t.ndim} dimensions")
    if not tensors:
        return zeros(1, 0)
    _tensors("block_diag", **{f"tensor{i}": t for i, t in enumerate(tensors)})
    dtype = functools.reduce(promote, [t.dtype for t in tensors])
    blocks = [cast(t, dtype) if t.ndim == 2 else reshape(cast(t, dtype), 1, t.numel()) for t in tensors]
    width, left, rows = sum(b.shape[1] for b in blocks), 0, []
    for b in blocks:  # each block's rows, padded with zeros left and right
        pads = [zeros(b.shape[0], w, dtype=dtype, device=b.device) for w in (left, width - left - b.shape[1])]
        rows.append(cat([pads[0], b, pads[1]], 1))
        left += b.shape[1]
    return cat(rows, 0)


def fill_diagonal_(input, fill_value, wrap=False):  # noqa: A002 - PyTorch's names
    """The main diagonal (of a matrix, or of a tensor whose dimensions are all equal) set to ``fill_value`` in
    place (recorded, as setitem); ``wrap``: a tall matrix's diagonal starts again every ``columns + 1`` rows."""
    op = "fill_diagonal_"
    if input.ndim < 2:
        raise RuntimeError(f"{op}: dimensions must be larger than 1, got a {input.ndim}-d tensor")
    if input.ndim > 2 and len(set(input.shape)) != 1:
        raise RuntimeError(f"{op}: all dimensions of input must be of equal length, got {list(input.shape)}")
    xp = input._xp
    if input.ndim == 2:
        rows, cols = input.shape
        flat = xp.arange(0, rows * cols if wrap else min(rows, cols) * cols, cols + 1, dtype=xp.int64)
        index = (flat // max(cols, 1), flat % max(cols, 1))
    else:
        index = (xp.arange(input.shape[0], dtype=xp.int64),) * input.ndim
    return setitem(input, tuple(Tensor._from_array(i) for i in index), fill_value, op=op)


__all__ = ["diagonal", "diag_embed", "diagflat", "trace", "block_diag"]
METHODS = {name: globals()[name] for name in __all__ if name != "block_diag"}
METHODS["fill_diagonal_"] = fill_diagonal_
