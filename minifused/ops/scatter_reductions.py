"""``scatter_reduce``: ``src``'s entries reduced into a copy of ``input`` at ``index`` along ``dim`` ('sum',
'prod', 'mean', 'amax', 'amin'), with or without ``input``'s own values (``include_self``), as PyTorch's. The
gradients are PyTorch's: 'sum' and 'mean' pass it back (divided by each position's count for 'mean'), 'amax' and
'amin' share it evenly among the values equal to the result, 'prod' gives each value the product of the others at its
position (found without dividing by a zero)."""
from __future__ import annotations

import numpy as np

from .. import backend
from ..autograd import Function
from ..backend import InputError, InputTypeError
from ..tensor import Tensor
from .elementwise import _const, _zero_where, where
from .index import _grid, _into_0d, _scatter_args
from .indexing import EmbedItem, GatherItem, GetItem, accumulate, add_at
from .shape import reshape

__all__ = ["scatter_reduce"]

_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _xp(a):
    return backend.array_module(a)


def _identity(reduce, dtype):
    """The value a reduction starts from where ``include_self`` leaves ``input``'s own out."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if backend.is_floating(dtype):
        return -np.inf if reduce == "amax" else np.inf
    if dtype == backend.bool_:
        return reduce == "amin"
    info = np.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def _reduce_at(out, grid, part, reduce):
    """``out[grid] = reduce(out[grid], part)`` with repeated positions reduced in turn: NumPy's ``ufunc.at``,
    CuPy's ``scatter_max`` / ``scatter_min`` (types under 4 bytes widened); 'prod' on the host, which CuPy has no
    scatter for."""
    xp = _xp(out)
    if xp is np:
        {"amax": np.maximum, "amin": np.minimum, "prod": np.multiply}[reduce].at(out, grid, part)
        return
    if reduce == "prod":
        host = backend.to_device(out, backend.CPU)
        np.multiply.at(host, tuple(backend.to_device(g, backend.CPU) for g in grid),
                       backend.to_device(part, backend.CPU))
        out[...] = backend.to_device(host, backend.device_of(out))
        return
    import cupyx

    scatter = cupyx.scatter_max if reduce == "amax" else cupyx.scatter_min
    if out.dtype.itemsize < 4:  # (CuPy's atomics take 4- and 8-byte types: 16-bit floats in float32, the rest int32)
        wide = np.float32 if backend.is_floating(out.dtype) else np.int32
        widened = out.astype(wide)
        scatter(widened, grid, part.astype(wide))
        out[...] = widened.astype(out.dtype)
    else:
        scatter(out, grid, part)


class ScatterReduce(Function):
    @staticmethod
    def forward(ctx, x, src, index, axis, reduce, include_self, out=None):
        xp = _xp(x)
        grad = any(ctx.needs_input_grad[:2])
        before = backend.copy(x) if grad and reduce in ("amax", "amin", "prod") else None
        out = backend.copy(x) if out is None else out
        grid = _grid(index, axis)
        part = src[tuple(slice(0, n) for n in index.shape)]
        hit = xp.zeros(out.shape, bool)
        hit[grid] = True
        if not include_self:
            out[hit] = _identity(reduce, out.dtype)
        count = None
        if reduce in ("sum", "mean"):
            add_at(out, grid, part, half_at_once=True)
        else:
            _reduce_at(out, grid, part, reduce)
        if reduce == "mean":  # each position's count of values: its own (if included) and those scattered there
            count = accumulate(out.shape, np.float32, grid, xp.ones(index.shape, np.float32)) + include_self
            count[~hit] = 1
            if backend.is_floating(out.dtype):
                out /= count.astype(out.dtype)
            else:
                out[...] = xp.floor_divide(out, count.astype(out.dtype))
        ctx.meta = (index, axis, reduce, include_self, src.shape, hit, count, before, part if before is not None
                    else None, backend.copy(out) if before is not None else None)
        if reduce == "prod" and ctx.recording:
            ctx.src = src  # (for backward_graph: src as a tensor of the graph)
        return out

    @staticmethod
    def backward(ctx, g):
        index, axis, reduce, include_self, src_shape, hit, count, before, part, result = ctx.meta
        xp = _xp(g)
        grid = _grid(index, axis)
        slices = tuple(slice(0, n) for n in index.shape)
        if reduce == "prod":
            own, picked = _prod_grads(g, before, part, result, grid, hit, include_self)
        elif reduce in ("sum", "mean"):
            share = g if count is None else g / count.astype(g.dtype)
            own = share if include_self else backend.where(hit, 0, share).astype(g.dtype)
            picked = share[grid]
        else:  # amax / amin: shared evenly among the values equal to the result
            # (input's own value counts among them even where include_self left it out, as in PyTorch, which then
            # gives it no share there)
            own_is = before == result
            src_is = part == result[grid]
            ties = own_is.astype(g.dtype) + accumulate(g.shape, g.dtype, grid, src_is.astype(g.dtype)).astype(
                g.dtype, copy=False)
            share = g / xp.maximum(ties, 1)
            own = backend.where(own_is if include_self else own_is & ~hit, share, 0).astype(g.dtype)
            picked = backend.where(src_is, share[grid], 0).astype(g.dtype)
        gsrc = None
        if ctx.needs_input_grad[1]:
            gsrc = xp.zeros(src_shape, g.dtype)
            gsrc[slices] = picked
        return own if ctx.needs_input_grad[0] else None, gsrc, None, None, None, None

    @staticmethod
    def backward_graph(ctx, g):
        """backward's gradients with the ops: 'prod' through :func:`_prod_graph_grads`, the others linear in g
        with constant factors (counts, ties, where each value went)."""
        index, axis, reduce, include_self, src_shape, hit, count, before, part, result = ctx.meta
        xp = g._xp
        grid = _grid(index, axis)
        slices = tuple(slice(0, n) for n in index.shape)
        if reduce == "prod":
            own, picked = _prod_graph_grads(ctx, g, grid, slices)
        elif reduce in ("sum", "mean"):
            share = g if count is None else g / _const(count.astype(g.dtype))
            own = share if include_self else _zero_where(hit, share)
            picked = GatherItem.apply(share, grid)
        else:  # amax / amin
            own_is = before == result
            src_is = part == result[grid]
            ties = own_is.astype(g.dtype) + accumulate(g.shape, g.dtype, grid, src_is.astype(g.dtype)).astype(
                g.dtype, copy=False)
            share = g / _const(xp.maximum(ties, 1))
            own = _zero_where(~(own_is if include_self else own_is & ~hit), share)
            picked = _zero_where(~src_is, GatherItem.apply(share, grid))
        gsrc = None
        if ctx.needs_input_grad[1]:
            gsrc = picked if tuple(src_shape) == tuple(index.shape) else EmbedItem.apply(picked, src_shape, slices,
                                                                                           False)
        return own if ctx.needs_input_grad[0] else None, gsrc, None, None, None, None


def _prod_into(base, grid, part, hit, include_self):
    """A copy of ``base`` with ``part`` multiplied in at ``grid`` (``base``'s own values left out where
    ``include_self`` is False): the forward product, over other operands."""
    out = backend.copy(base)
    if not include_self:
        out[hit] = 1
    _reduce_at(out, grid, part, "prod")
    return out


def _prod_grads(g, x, part, result, grid, hit, include_self):
    """(input's, src's reached entries') gradients of a 'prod' scatter, as PyTorch's: each value gets the product
    of the others at its position. Dividing the result by the value would divide by zero where it is 0, so input's
    zeros count as 1 in a second product (which is then that of the others), and so does a zero of src that is the
    only one of src at its position; where src has two or more zeros at a position, each one's gradient is 0."""
    one = g.dtype.type(1)
    self_zero = x == 0
    masked_self = backend.where(self_zero, one, x).astype(g.dtype, copy=False)
    own = g * _prod_into(masked_self, grid, part, hit, include_self) / masked_self
    if not include_self:
        own = backend.where(hit, g.dtype.type(0), own).astype(g.dtype, copy=False)
    src_zero = part == 0
    zeros_there = accumulate(g.shape, np.int32, grid, src_zero.astype(np.int32))[grid]
    single = src_zero & (zeros_there == 1)
    others = _prod_into(x, grid, backend.where(single, one, part).astype(g.dtype, copy=False), hit, include_self)
    divided = (g * result)[grid] / backend.where(src_zero, one, part).astype(g.dtype, copy=False)
    picked = backend.where(single, (g * others)[grid], divided).astype(g.dtype, copy=False)
    return own.astype(g.dtype, copy=False), picked


def _prod_graph_grads(ctx, g, grid, slices):
    """:func:`_prod_grads` with the ops, each gradient a function of input and src that divides by none of their
    zeros (so exact there too): input's is g times the product of src's values at its position; a nonzero value of
    src gets ``g * result / value``; a zero of src the product of the others, which is ``others`` (the product with
    src's zeros taken as 1) where it is the only zero at its position, that times the other zero where there are
    two, and 0 (to the second order) where there are more."""
    index, axis, reduce, include_self, src_shape, hit, count, before, part, result = ctx.meta
    xp = g._xp
    x, src = ctx.graph_input(0, before), ctx.graph_input(1, ctx.src)
    s = src if tuple(src_shape) == tuple(index.shape) else GetItem.apply(src, slices)
    if include_self:
        ones = Tensor._from_array(xp.ones(g.shape, g.dtype), False)
        own = g * ScatterReduce.apply(ones, s, index, axis, "prod", True)
    else:
        own = _zero_where(hit, g)
    src_zero = part == 0
    zeros_there = accumulate(g.shape, np.int32, grid, src_zero.astype(np.int32))[grid]
    nonzero = _const(~src_zero)
    divided = GatherItem.apply(g * ctx.graph_output(result), grid) / where(nonzero, s, 1.0)
    others = ScatterReduce.apply(x, where(nonzero, s, 1.0), index, axis, "prod", include_self)
    zero_sum = ScatterReduce.apply(Tensor._from_array(xp.zeros(g.shape, g.dtype), False), _zero_where(~src_zero, s),
                                   index, axis, "sum", True)  # (the other zero, where there are two: their sum - s)
    other_zero = where(_const(zeros_there == 2), GatherItem.apply(zero_sum, grid) - s, 1.0)
    at_zero = _zero_where(zeros_there > 2, GatherItem.apply(g * others, grid) * other_zero)
    return own, where(nonzero, divided, at_zero)


def _args(op, input, dim, index, src, reduce):
    if not isinstance(src, Tensor):
        raise InputTypeError(f"{op}: src must be a Tensor, got {type(src).__name__}")
    if reduce not in _REDUCTIONS:
        raise InputError(f"{op}: reduce argument must be either sum, prod, mean, amax or amin, got {reduce!r}")
    return _scatter_args(op, input, dim, index, src, None, None)


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):  # noqa: A002 - PyTorch's names
    """A copy of ``input`` with each of ``src``'s entries (those ``index`` reaches) reduced into the position
    ``index`` names along ``dim``, as ``torch.scatter_reduce``."""
    axis, idx, src = _args("scatter_reduce", input, dim, index, src, reduce)
    if input.ndim == 0:
        return reshape(ScatterReduce.apply(reshape(input, 1), reshape(src, -1), idx.reshape(-1), 0, reduce,
                                           bool(include_self)), ())
    return ScatterReduce.apply(input, src, idx, axis, reduce, bool(include_self))


def scatter_reduce_(input, dim, index, src, reduce, *, include_self=True):  # noqa: A002
    """:func:`scatter_reduce` written into ``input``."""
    if isinstance(input, Tensor) and input.ndim == 0:
        return _into_0d(input, scatter_reduce(input, dim, index, src, reduce, include_self=include_self))
    axis, idx, src = _args("scatter_reduce_", input, dim, index, src, reduce)
    return ScatterReduce.apply_("scatter_reduce_", input, src, idx, axis, reduce, bool(include_self))


METHODS = {"scatter_reduce": lambda self, *a, **kw: scatter_reduce(self, *a, **kw),
           "scatter_reduce_": lambda self, *a, **kw: scatter_reduce_(self, *a, **kw)}
