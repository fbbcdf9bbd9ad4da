"""Masks and fills: masked_fill, masked_select, masked_scatter, index_fill (PyTorch's signatures and
errors). A mask is a bool tensor broadcast against the input; the in-place forms need it to fit the
input's shape."""
from __future__ import annotations

import numpy as np

from .. import backend
from ..autograd import Function
from ..tensor import Tensor
from ._common import broadcast_shape, unbroadcast, unbroadcast_graph
from .index import _as_dtype, _same_device, _tensor, _value, _vector_index, _xp
from .elementwise import where
from .indexing import EmbedItem, GatherItem, fill_number
from .shape import expand, getitem, reshape

__all__ = ["masked_fill", "masked_select", "masked_scatter", "index_fill"]


class Fill(Function):
    """Writes a value where a boolean mask (broadcast against the input) is set: masked_fill and
    index_fill. The value's gradient (a 0-d tensor's) is the sum of the gradient there."""

    writes_overlap = True  # (PyTorch's masked_fill_ / index_fill_ write an expanded view: one value, no race)

    @staticmethod
    def forward(ctx, x, value, mask, out=None):
        xp = _xp(x)
        v = _as_dtype(value, x.dtype, xp)
        if out is None:
            out = backend.where(mask, v, x)
        else:
            xp.copyto(out, xp.broadcast_to(v, out.shape), where=xp.broadcast_to(mask, out.shape))
        ctx.meta = (x.shape, mask)
        return out

    @staticmethod
    def backward(ctx, g):
        shape, mask = ctx.meta
        zero = g.dtype.type(0)
        gx = unbroadcast(backend.where(mask, zero, g), shape) if ctx.needs_input_grad[0] else None
        gv = backend.where(mask, g, zero).sum().astype(g.dtype) if ctx.needs_input_grad[1] else None
        return gx, gv, None

    @staticmethod
    def backward_graph(ctx, g):
        shape, mask = ctx.meta
        gx = gv = None
        if ctx.needs_input_grad[0]:  # (selected, as backward's: an inf or NaN gradient is cut where it is cut)
            gx = unbroadcast_graph(where(Tensor._from_array(mask), 0, g), shape)
        if ctx.needs_input_grad[1]:
            gv = where(Tensor._from_array(mask), g, 0).sum()
        return gx, gv, None


def _written_value(op, x, value):
    """The value ``op`` writes into ``x``: a Python scalar or a 0-d tensor on x's device; a number that does not fit
    x (or a float beyond a narrow float dtype, a complex number) is refused, as PyTorch's (``fill_number``)."""
    return _value(op, x, fill_number(op, value, x.dtype))


def _mask(op, x, mask, inplace=False):
    _tensor(op, "mask", mask)
    if mask.dtype != np.bool_:
        raise RuntimeError(f"{op}: expected a boolean mask, got dtype {mask.dtype}")
    if mask.device != x.device and not (mask.ndim == 0 and mask.device.type == "cpu"):
        raise RuntimeError(f"{op}: expected mask on {x.device} like the input, got {mask.device}")
    shape = broadcast_shape(op, x.shape, mask.shape)
    if inplace and shape != x.shape:
        raise RuntimeError(f"{op}: mask of shape {tuple(mask.shape)} does not broadcast to the input's "
                           f"shape {tuple(x.shape)}")
    return backend.to_device(mask._data, x.device)


def masked_fill(input, mask, value):  # noqa: A002
    _tensor("masked_fill", "input", input)
    return Fill.apply(input, _written_value("masked_fill", input, value), _mask("masked_fill", input, mask))


def masked_fill_(input, mask, value):  # noqa: A002
    _tensor("masked_fill_", "input", input)
    return Fill.apply_("masked_fill_", input, _written_value("masked_fill_", input, value),
                       _mask("masked_fill_", input, mask, inplace=True))


def masked_select(input, mask):  # noqa: A002
    """The entries of input (broadcast with mask) where mask is set, as a 1-d tensor."""
    _tensor("masked_select", "input", input)
    m = _mask("masked_select", input, mask)
    shape = broadcast_shape("masked_select", input.shape, m.shape)
    x = input if input.shape == shape else expand(input, *shape)
    m = m if m.shape == shape else _xp(m).broadcast_to(m, shape)
    if not shape:  # 0-d: one element or none
        x, m = reshape(x, 1), m.reshape(1)
    return getitem(x, Tensor._from_array(m))


class MaskedScatter(Function):
    """The masked positions take source's first entries in order (row-major)."""

    @staticmethod
    def forward(ctx, x, source, mask, out=None):
        xp = _xp(x)
        out = backend.copy(x) if out is None else out
        full = xp.broadcast_to(mask, out.shape)
        count = int(full.sum())
        if count > source.size:
            raise RuntimeError(f"masked_scatter: source has {source.size} elements, the mask selects {count}")
        out[full] = source.reshape(-1)[:count].astype(out.dtype, copy=False)
        ctx.meta = (x.shape, full, count, source.shape)
        return out

    @staticmethod
    def backward(ctx, g):
        shape, full, count, src_shape = ctx.meta
        xp = _xp(g)
        gx = unbroadcast(backend.where(full, g.dtype.type(0), g), shape) if ctx.needs_input_grad[0] else None
        gsrc = None
        if ctx.needs_input_grad[1]:
            gsrc = xp.zeros(int(np.prod(src_shape, dtype=np.int64)), g.dtype)
            gsrc[:count] = g[full]
            gsrc = gsrc.reshape(src_shape)
        return gx, gsrc, None

    @staticmethod
    def backward_graph(ctx, g):
        shape, full, count, src_shape = ctx.meta
        gx = gsrc = None
        if ctx.needs_input_grad[0]:  # (selected, as backward's)
            gx = unbroadcast_graph(where(Tensor._from_array(full), 0, g), shape)
        if ctx.needs_input_grad[1]:
            picked = GatherItem.apply(g, _xp(full).nonzero(full))
            size = int(np.prod(src_shape, dtype=np.int64))
            gsrc = EmbedItem.apply(picked, (size,), (slice(0, count),), False).reshape(src_shape)
        return gx, gsrc, None


def _masked_scatter_args(op, input, mask, source, inplace=False):
    _tensor(op, "input", input)
    _tensor(op, "source", source)
    _same_device(op, input, source, "source")
    if source.dtype != input.dtype:
        raise RuntimeError(f"{op}: expected source of the input's dtype {input.dtype}, got {source.dtype}")
    m = _mask(op, input, mask, inplace)
    if backend.is_cuda_array(m):
        backend.refuse_sync(f"{op} (counting the mask)")
    return m


def masked_scatter(input, mask, source):  # noqa: A002
    m = _masked_scatter_args("masked_scatter", input, mask, source)
    shape = broadcast_shape("masked_scatter", input.shape, m.shape)
    x = input if input.shape == shape else expand(input, *shape)
    return MaskedScatter.apply(x, source, m)


def masked_scatter_(input, mask, source):  # noqa: A002
    m = _masked_scatter_args("masked_scatter_", input, mask, source, inplace=True)
    return MaskedScatter.apply_("masked_scatter_", input, source, m)


def _index_mask(input, axis, idx):
    mask = input._xp.zeros(input.shape[axis] if input.ndim else 1, np.bool_)
    mask[idx] = True
    return mask.reshape([-1 if i == axis else 1 for i in range(input.ndim)])


def index_fill(input, dim, index, value):  # noqa: A002
    _tensor("index_fill", "input", input)
    axis, idx = _vector_index("index_fill", input, dim, index, negative=True)
    return Fill.apply(input, _written_value("index_fill", input, value), _index_mask(input, axis, idx))


def index_fill_(input, dim, index, value):  # noqa: A002
    _tensor("index_fill_", "input", input)
    axis, idx = _vector_index("index_fill_", input, dim, index, negative=True)
    return Fill.apply_("index_fill_", input, _written_value("index_fill_", input, value), _index_mask(input, axis, idx))


def _method(fn):
    return lambda self, *args, **kwargs: fn(self, *args, **kwargs)


METHODS = {name: _method(fn) for name, fn in {
    "masked_fill": masked_fill, "masked_fill_": masked_fill_, "masked_select": masked_select,
    "masked_scatter": masked_scatter, "masked_scatter_": masked_scatter_, "index_fill": index_fill,
    "index_fill_": index_fill_}.items()}
