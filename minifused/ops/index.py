"""Gathering and scattering along dimensions: gather, scatter(_add), index_select, index_add and
take_along_dim (PyTorch's signatures and errors; ops/masking.py has the masked and fill forms).

Index tensors are checked against the sizes they index: on the cpu at once, on the GPU without a
host sync (out-of-range entries are clipped and the error raised at the next sync point, as
``backend.defer_check`` describes)."""
from __future__ import annotations

import numbers
import warnings

import numpy as np

from .. import backend
from ..autograd import Function
from ..tensor import Tensor
from ._common import autocast_promote, broadcast_shape, cast, dim_index, unbroadcast, unbroadcast_graph
from .indexing import EmbedItem, GatherItem, accumulate, add_at, fill_number, setitem
from .creation import arange
from .elementwise import where
from .shape import expand, flatten, reshape
from ..backend import InputError, InputTypeError
from ..kernels.gather import checked_index, gather_rows

__all__ = ["gather", "scatter", "scatter_add", "index_select", "index_add", "take_along_dim", "repeat_interleave",
           "meshgrid", "index_put", "index_copy"]


def _xp(a):
    return backend.array_module(a)


# ---------------------------------------------------------------- checks
def _tensor(op, name, t):
    if not isinstance(t, Tensor):
        raise InputTypeError(f"{op}: expected {name} to be a Tensor, got {type(t).__name__}")
    return t


def _same_device(op, x, other, name):
    if other.device != x.device:
        raise RuntimeError(f"{op}: expected {name} on {x.device} like the input, got {other.device}")


def _in_bounds(op, index, n, dim, exc, negative=True):
    """``index`` (raw, integer) with negative entries made positive, checked to lie in [-n, n) (``negative``;
    else in [0, n), as PyTorch's gather, scatter and index_select / add / copy): on the cpu an ``exc`` at once; on
    the GPU the entries are clipped and the error deferred (no sync: ``kernels.gather.checked_index``)."""
    xp = _xp(index)
    if index.size == 0:
        return index.astype(np.int64, copy=False)
    if xp is np:
        bad = (index < (-n if negative else 0)) | (index >= n)
        if bad.any():
            raise exc(f"{op}: index {int(index[bad].ravel()[0])} is out of bounds for dimension {dim} with size {n}")
        return backend.where(index < 0, index + n, index).astype(np.int64, copy=False)
    return checked_index(index, n, negative,
                         lambda v, _: exc(f"{op}: index {v} is out of bounds for dimension {dim} with size {n}"))


def _dim_index(op, x, dim, index, name="index"):
    """(axis, int64 index array) of gather / scatter: index has input's number of dimensions."""
    _tensor(op, name, index)
    _same_device(op, x, index, name)
    if index.dtype not in (np.int64, np.int32):
        raise RuntimeError(f"{op}: expected dtype int64 or int32 for {name}, got {index.dtype}")
    axis = dim_index(op, dim, x.ndim)
    if max(index.ndim, 1) != max(x.ndim, 1):  # a 0-d tensor counts as 1-d, as in PyTorch
        raise RuntimeError(f"{op}: {name} must have the same number of dimensions as the input "
                           f"({x.ndim}), got {index.ndim}")
    return axis


def _fits(op, index, axis, shapes):
    """PyTorch's rule: the index is no larger than each of ``shapes`` ((what, shape) pairs) in every
    dimension, except the input along ``axis``."""
    for what, shape, skip in shapes:
        if any(i != skip and n > m for i, (n, m) in enumerate(zip(index.shape, shape))):
            raise RuntimeError(f"{op}: index of shape {tuple(index.shape)} must be no larger than {what} of shape "
                               f"{tuple(shape)} in every dimension" + (f" but {skip}" if skip is not None else ""))


def _vector_index(op, x, dim, index, negative=False):
    """(axis, int64 1-d index array) of index_select / index_add / index_copy (entries in [0, n)) and
    index_fill (``negative``: in [-n, n), as PyTorch's)."""
    _tensor(op, "index", index)
    _same_device(op, x, index, "index")
    if op.startswith(("index_copy", "index_fill")):  # (PyTorch's take int64 only; index_select / add int32 too)
        if index.dtype != np.int64:
            exc = IndexError if op.startswith("index_fill") else RuntimeError  # (PyTorch's classes)
            raise exc(f"{op}: expected dtype int64 for index, got {index.dtype}")
    elif index.dtype not in (np.int64, np.int32):
        raise RuntimeError(f"{op}: expected dtype int32 or int64 for index, got {index.dtype}")
    if index.ndim > 1:
        # (PyTorch's index_select / index_add raise an IndexError, index_fill a RuntimeError: this error is both)
        raise backend.IndexInputError(f"{op}: index must be a vector (0-d or 1-d), got shape {tuple(index.shape)}")
    axis = dim_index(op, dim, x.ndim)
    n = x.shape[axis] if x.ndim else 1
    # (PyTorch's index_add raises a RuntimeError, the others an IndexError: this error is both)
    return axis, _in_bounds(op, index._data.reshape(-1), n, axis, backend.IndexInputError, negative)


def _grid(index, axis):
    """The full advanced index that picks ``index``'s entries along ``axis`` at every other position."""
    xp = _xp(index)
    return tuple(index if d == axis else xp.arange(n).reshape([-1 if i == d else 1 for i in range(index.ndim)])
                 for d, n in enumerate(index.shape))


def _along(axis, index, ndim):
    return (slice(None),) * axis + (index,) + (slice(None),) * (ndim - axis - 1)


def _value(op, x, value):
    """A fill value as a Python scalar or a 0-d tensor on ``x``'s device."""
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"{op}: only supports a 0-dimensional value tensor, got one of shape "
                               f"{tuple(value.shape)}")
        if value.device != x.device:
            value = Tensor._from_array(backend.to_device(value._data, x.device))
        # the gradient comes back in the value's own dtype
        return cast(value, x.dtype) if backend.is_floating(x.dtype) else value.detach()
    if isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, numbers.Number):
        raise InputTypeError(f"{op}: value must be a number or a 0-d tensor, got {type(value).__name__}")
    return value


def _as_dtype(value, dtype, xp):
    return value.astype(dtype, copy=False) if hasattr(value, "dtype") else xp.asarray(value, dtype)


# ---------------------------------------------------------------- gather, scatter
class Gather(Function):
    """``out[i][j] = x[i][index[i][j]]`` (along axis 1); the gradient adds back where it was read."""

    @staticmethod
    def forward(ctx, x, index, axis):
        ctx.meta = (x.shape, x.dtype, index, axis)
        return _xp(x).ascontiguousarray(x[_grid(index, axis)])  # (fancy indexing follows a transposed index's order)

    @staticmethod
    def backward(ctx, g):
        shape, dtype, index, axis = ctx.meta
        return accumulate(shape, dtype, _grid(index, axis), g), None, None

    @staticmethod
    def backward_graph(ctx, g):
        shape, _, index, axis = ctx.meta
        return EmbedItem.apply(g, shape, _grid(index, axis), True), None, None


class Scatter(Function):
    """``out[i][index[i][j]] = src[i][j]`` (or ``+=`` with reduce='add', ``*=`` with 'multiply'); ``src``
    may be a Python scalar. The gradient of ``src`` reads the written positions; the input's is zero
    there without a reduction."""

    @staticmethod
    def forward(ctx, x, src, index, axis, reduce, out=None):
        xp = _xp(x)
        out = backend.copy(x) if out is None else out
        grid = _grid(index, axis)
        part = src[tuple(slice(0, n) for n in index.shape)] if hasattr(src, "shape") else src
        part = xp.broadcast_to(_as_dtype(part, x.dtype, xp), index.shape)
        if reduce is None:
            out[grid] = part
        elif reduce == "add":
            add_at(out, grid, part, half_at_once=True)
        else:
            at = getattr(xp.multiply, "at", None)
            if at is None:
                raise NotImplementedError("scatter: reduce='multiply' is not available on this device")
            at(out, grid, part)
        ctx.meta = (index, axis, reduce, np.shape(src))
        return out

    @staticmethod
    def backward(ctx, g):
        index, axis, reduce, src_shape = ctx.meta
        grid = _grid(index, axis)
        gx = gsrc = None
        if ctx.needs_input_grad[0]:
            gx = g
            if reduce is None:
                gx = backend.copy(g)
                gx[grid] = 0
        if ctx.needs_input_grad[1]:
            gsrc = _xp(g).zeros(src_shape, g.dtype)
            gsrc[tuple(slice(0, n) for n in index.shape)] = g[grid]
        return gx, gsrc, None, None, None

    @staticmethod
    def backward_graph(ctx, g):
        index, axis, reduce, src_shape = ctx.meta
        grid = _grid(index, axis)
        gx = gsrc = None
        if ctx.needs_input_grad[0]:
            gx = g
            if reduce is None:
                kept = g._xp.ones(g.shape, bool)  # (a constant: the positions written got none of x's gradient)
                kept[grid] = False
                gx = where(Tensor._from_array(kept), g, 0)  # selected, as backward's: an inf or NaN is cut too
        if ctx.needs_input_grad[1]:
            gsrc = GatherItem.apply(g, grid)
            if tuple(src_shape) != tuple(index.shape):
                gsrc = EmbedItem.apply(gsrc, src_shape, tuple(slice(0, n) for n in index.shape), False)
        return gx, gsrc, None, None, None


class IndexPutAdd(Function):
    """``out[index] += value`` with repeated positions adding up (``index_put_(..., accumulate=True)``): the
    gradient passes to ``x`` whole and to ``value`` from the positions it was added to."""

    @staticmethod
    def forward(ctx, x, value, index, out=None):
        xp = _xp(x)
        out = backend.copy(x) if out is None else out
        added = xp.broadcast_to(value, _put_shape(out.shape, index))
        add_at(out, index, added)
        ctx.meta = (index, np.shape(value))
        return out

    @staticmethod
    def backward(ctx, g):
        index, value_shape = ctx.meta
        gv = unbroadcast(g[index], value_shape).reshape(value_shape) if ctx.needs_input_grad[1] else None
        return g, gv, None

    @staticmethod
    def backward_graph(ctx, g):
        index, value_shape = ctx.meta
        gv = None
        if ctx.needs_input_grad[1]:
            gv = unbroadcast_graph(GatherItem.apply(g, index), value_shape).reshape(value_shape)
        return g, gv, None


def _put_index(op, input, indices):
    """``indices`` (a tuple of int64 or bool tensors, one per leading dimension) as an advanced index of arrays,
    bool masks as their positions, every position checked against its dimension."""
    if not isinstance(indices, (tuple, list)) or not all(isinstance(i, Tensor) for i in indices):
        raise InputTypeError(f"{op}: indices must be a tuple of tensors, got {type(indices).__name__}")
    arrays, dim = [], 0
    for i in indices:
        _same_device(op, input, i, "indices")
        if i.dtype == np.uint8:  # a mask, as in PyTorch (deprecated there, and warned)
            warnings.warn("indexing with dtype uint8 is now deprecated, please use a dtype bool instead.",
                          UserWarning, stacklevel=3)
        if i.dtype in (backend.bool_, np.uint8):
            if i.shape != input.shape[dim:dim + i.ndim]:
                raise IndexError(f"{op}: the shape of the mask {tuple(i.shape)} does not match the shape "
                                 f"{tuple(input.shape[dim:dim + i.ndim])} of the indexed tensor at dimension {dim}")
            arrays.extend(i._xp.nonzero(i._data))
            dim += i.ndim
            continue
        if i.dtype not in (np.int64, np.int32):  # PyTorch refuses int8, int16 and the wider unsigned types
            raise IndexError(f"{op}: tensors used as indices must be long, int, byte or bool tensors, got {i.dtype}")
        if dim >= input.ndim:
            raise IndexError(f"{op}: too many indices for a tensor of dimension {input.ndim}")
        arrays.append(_in_bounds(op, i._data, input.shape[dim], dim, IndexError))
        dim += 1
    if dim > input.ndim:
        raise IndexError(f"{op}: too many indices for a tensor of dimension {input.ndim}")
    return tuple(arrays)


def _put_shape(shape, index):
    """The shape ``x[index]`` has for ``index`` (:func:`_put_index`'s arrays over the leading dimensions), without
    gathering it: the arrays' broadcast shape, then the dimensions they leave."""
    return tuple(np.broadcast_shapes(*(a.shape for a in index))) + tuple(shape[len(index):])


def _fills_a_mask(input, indices, values):  # noqa: A002
    """Whether PyTorch runs this index_put_ as ``masked_fill_(mask, values.item())``: one bool (or uint8) mask on
    the input's device and a one-element value on the cpu. A fill takes a value of any dtype."""
    return (isinstance(indices, (tuple, list)) and len(indices) == 1 and isinstance(indices[0], Tensor)
            and indices[0].dtype in (backend.bool_, np.uint8) and indices[0].device == input.device
            and values.numel() == 1 and values.device.type == "cpu")


def index_put_(input, indices, values, accumulate=False):  # noqa: A002 - PyTorch's names
    """``input[indices] = values`` in place, or ``+=`` with repeated positions adding up (``accumulate``), as
    ``Tensor.index_put_``: ``indices`` a tuple of int64 or bool tensors, ``values`` a tensor of ``input``'s
    dtype broadcast to the positions."""
    op = "index_put_"
    _tensor(op, "input", input)
    _tensor(op, "values", values)
    if values.dtype != input.dtype and not (not accumulate and _fills_a_mask(input, indices, values)):
        raise RuntimeError(f"{op}: index put requires the source and destination dtypes match, got {input.dtype} "
                           f"for the destination and {values.dtype} for the source")
    index = _put_index(op, input, indices)
    if not accumulate:
        return setitem(input, tuple(indices), values)
    _same_device(op, input, values, "values")
    target = _put_shape(input.shape, index)
    try:
        fits = np.broadcast_shapes(values.shape, target) == target
    except ValueError:
        fits = False
    if not fits:
        raise RuntimeError(f"{op}: shape mismatch: value tensor of shape {tuple(values.shape)} cannot be broadcast "
                           f"to indexing result of shape {target}")
    return IndexPutAdd.apply_(op, input, values, index)


def index_put(input, indices, values, accumulate=False):  # noqa: A002
    """:func:`index_put_` on a copy of ``input``."""
    _tensor("index_put", "input", input)
    return index_put_(input.clone(), indices, values, accumulate)


def gather(input, dim, index, *, sparse_grad=False):  # noqa: A002 - PyTorch's names
    return _gather("gather", input, dim, index)


def _gather(op, input, dim, index):  # noqa: A002
    """gather, its errors naming ``op`` (take_along_dim's too)."""
    _tensor(op, "input", input)
    axis = _dim_index(op, input, dim, index)
    if input.ndim == 0 or index.ndim == 0:
        return reshape(_gather(op, reshape(input, -1), 0, reshape(index, -1)), index.shape)
    _fits(op, index, axis, [("the input", input.shape, axis)])
    idx = _in_bounds(op, index._data, input.shape[axis], axis, RuntimeError, negative=False)
    return Gather.apply(input, idx, axis)


def _scatter_args(op, input, dim, index, src, value, reduce):
    _tensor(op, "input", input)
    if src is None and value is None:
        raise InputTypeError(f"{op}: expected src (a tensor) or value (a number)")
    src = value if src is None else src
    axis = _dim_index(op, input, dim, index)
    if reduce not in (None, "add", "multiply"):
        raise RuntimeError(f"{op}: reduce must be None, 'add' or 'multiply', got {reduce!r}")
    if isinstance(src, Tensor):
        _same_device(op, input, src, "src")
        if src.dtype != input.dtype:
            raise RuntimeError(f"{op}: expected src of the input's dtype {input.dtype}, got {src.dtype}")
        if max(src.ndim, 1) != max(index.ndim, 1):  # a 0-d tensor counts as 1-d, as in PyTorch
            raise RuntimeError(f"{op}: src must have the same number of dimensions as index ({index.ndim}), "
                               f"got {src.ndim}")
    else:
        src = _value(op, input, fill_number(op, src, input.dtype))
    # PyTorch's size rule, 0-d tensors taken as of shape (1,): scatter(tensor(3.), 0, tensor([0, 0]), 4.) is fine
    shapes = [("the input", tuple(input.shape) or (1,), axis)]
    if isinstance(src, Tensor):
        shapes.append(("src", tuple(src.shape) or (1,), None))
    _fits(op, index.reshape(-1) if index.ndim == 0 else index, axis, shapes)
    n = input.shape[axis] if input.ndim else 1
    idx = _in_bounds(op, index._data.reshape(-1) if index.ndim == 0 else index._data, n, axis, RuntimeError,
                     negative=False)
    if isinstance(src, Tensor) and src.ndim < idx.ndim:
        src = reshape(src, -1)
    if reduce == "multiply" and (input.requires_grad or getattr(src, "requires_grad", False)):
        raise RuntimeError(f"{op}: the gradient of reduce='multiply' is not implemented")
    return axis, idx, src


def _into_0d(input, result):
    """A 0-d input's in-place form, as PyTorch's: the out-of-place result copied in (recorded as copy_)."""
    return input.copy_(result)


def scatter(input, dim, index, src=None, value=None, reduce=None):  # noqa: A002
    """``scatter(input, dim, index, src)`` or ``(..., value)``: a copy of input with src's entries written
    at ``index`` along ``dim`` (duplicate targets keep one of their values, as in PyTorch)."""
    return _scatter("scatter", input, dim, index, src, value, reduce)


def _scatter(op, input, dim, index, src, value, reduce):  # noqa: A002
    axis, idx, src = _scatter_args(op, input, dim, index, src, value, reduce)
    if input.ndim == 0:  # as a 1-d input of one entry, which every index entry names
        src = reshape(src, -1) if isinstance(src, Tensor) else src
        return reshape(Scatter.apply(reshape(input, 1), src, idx.reshape(-1), 0, reduce), ())
    return Scatter.apply(input, src, idx, axis, reduce)


def scatter_(input, dim, index, src=None, value=None, reduce=None):  # noqa: A002
    if isinstance(input, Tensor) and input.ndim == 0:
        return _into_0d(input, _scatter("scatter_", input, dim, index, src, value, reduce))
    axis, idx, src = _scatter_args("scatter_", input, dim, index, src, value, reduce)
    return Scatter.apply_("scatter_", input, src, idx, axis, reduce)


def scatter_add(input, dim, index, src):  # noqa: A002
    _tensor("scatter_add", "src", src)
    return _scatter("scatter_add", input, dim, index, src, None, "add")


def scatter_add_(input, dim, index, src):  # noqa: A002
    _tensor("scatter_add_", "src", src)
    if isinstance(input, Tensor) and input.ndim == 0:
        return _into_0d(input, _scatter("scatter_add_", input, dim, index, src, None, "add"))
    axis, idx, src = _scatter_args("scatter_add_", input, dim, index, src, None, "add")
    return Scatter.apply_("scatter_add_", input, src, idx, axis, "add")


def take_along_dim(input, indices, dim=None):  # noqa: A002
    """Gather after broadcasting input and indices in every dimension but ``dim`` (flattened: None)."""
    _tensor("take_along_dim", "input", input)
    _tensor("take_along_dim", "indices", indices)
    if indices.dtype != np.int64:  # (PyTorch's gather takes int32 too, take_along_dim does not)
        raise RuntimeError(f"take_along_dim: expected int64 indices, got {indices.dtype}")
    if dim is None:
        return _gather("take_along_dim", flatten(input), 0, flatten(indices))
    if indices.ndim != input.ndim:
        raise RuntimeError(f"take_along_dim: input and indices must have the same number of dimensions, got "
                           f"{input.ndim} and {indices.ndim}")
    axis = dim_index("take_along_dim", dim, input.ndim)
    shape = list(broadcast_shape("take_along_dim", [1 if i == axis else n for i, n in enumerate(input.shape)],
                                 [1 if i == axis else n for i, n in enumerate(indices.shape)]))
    if input.ndim == 0:
        return _gather("take_along_dim", input, 0, indices)
    x = expand(input, *[input.shape[axis] if i == axis else n for i, n in enumerate(shape)])
    idx = expand(indices, *[indices.shape[axis] if i == axis else n for i, n in enumerate(shape)])
    return _gather("take_along_dim", x, axis, idx)


# ---------------------------------------------------------------- index_select, index_add
class IndexSelect(Function):
    @staticmethod
    def forward(ctx, x, index, axis):
        ctx.meta = (x.shape, x.dtype, index, axis)
        if axis == 0 and x.ndim:
            return gather_rows(x, index)
        return _xp(x).take(x, index, axis=axis)

    @staticmethod
    def backward(ctx, g):
        shape, dtype, index, axis = ctx.meta  # (PyTorch's index_add_: 16-bit floats round at each add on the CPU)
        return add_at(_xp(g).zeros(shape, dtype), _along(axis, index, len(shape)), g), None, None

    @staticmethod
    def backward_graph(ctx, g):
        shape, _, index, axis = ctx.meta
        return EmbedItem.apply(g, shape, _along(axis, index, len(shape)), True), None, None


class IndexAdd(Function):
    """``out[..., index[i], ...] += alpha * source[..., i, ...]`` along ``axis``."""

    @staticmethod
    def forward(ctx, x, source, index, axis, alpha, out=None):
        out = backend.copy(x) if out is None else out
        src = source if alpha == 1 else source * alpha
        add_at(out, _along(axis, index, out.ndim), src)
        ctx.meta = (index, axis, alpha)
        return out

    @staticmethod
    def backward(ctx, g):
        index, axis, alpha = ctx.meta
        gsrc = None
        if ctx.needs_input_grad[1]:
            gsrc = _xp(g).take(g, index, axis=axis)
            gsrc = gsrc if alpha == 1 else gsrc * g.dtype.type(alpha)
        return g, gsrc, None, None, None

    @staticmethod
    def backward_graph(ctx, g):
        index, axis, alpha = ctx.meta
        gsrc = None
        if ctx.needs_input_grad[1]:
            gsrc = IndexSelect.apply(g, index, axis)
            gsrc = gsrc if alpha == 1 else gsrc * alpha
        return g, gsrc, None, None, None


def index_select(input, dim, index):  # noqa: A002
    """``input``'s slices ``index`` along ``dim``. A 0-d input takes exactly one index and stays 0-d, as
    PyTorch's (whose result there has the input's shape, not the index's)."""
    _tensor("index_select", "input", input)
    axis, idx = _vector_index("index_select", input, dim, index)
    if input.ndim == 0:
        if idx.shape[0] != 1:
            raise RuntimeError(f"index_select: a 0-d input takes exactly 1 index, got {idx.shape[0]}")
        return reshape(IndexSelect.apply(reshape(input, 1), idx, 0), ())
    return IndexSelect.apply(input, idx, axis)


def _index_add_args(op, input, dim, index, source):
    _tensor(op, "input", input)
    _tensor(op, "source", source)
    if op.startswith("index_add") and source.dtype != input.dtype:  # (index_copy_ names its own dtype error)
        raise RuntimeError(f"{op}: self ({input.dtype}) and source ({source.dtype}) must have the same dtype")
    axis, idx = _vector_index(op, input, dim, index)
    _same_device(op, input, source, "source")
    want = tuple(input.shape[:axis]) + (idx.shape[0],) + tuple(input.shape[axis + 1:]) if input.ndim else idx.shape
    if tuple(source.shape) != want and not (source.ndim == 0 and want == (1,)):
        # (PyTorch's index_copy_ raises an IndexError where the number of indices differs from source's length)
        count = source.ndim == input.ndim and source.ndim and source.shape[axis] != idx.shape[0]
        raise (backend.IndexInputError if count else RuntimeError)(
            f"{op}: source must have shape {want} (the input's with index's length along dim {axis}), "
            f"got {tuple(source.shape)}")
    return axis, idx, reshape(source, want) if source.ndim == 0 else source


def _alpha(input, alpha):
    """``alpha`` as PyTorch applies it: cast to the input's dtype first, so an integer input takes a float alpha
    truncated toward zero (0.5 adds nothing, -1.5 subtracts once; into an unsigned dtype it wraps, -1 to 255)
    and a bool input any nonzero alpha as True."""
    kind = np.dtype(input.dtype).kind
    if kind in "iu":
        return np.array(int(alpha)).astype(input.dtype).item()
    return bool(alpha) if kind == "b" else alpha


def index_add(input, dim, index, source, *, alpha=1):  # noqa: A002
    """``input`` with ``alpha * source``'s slices added at ``index`` along ``dim`` (``source`` of the input's
    dtype, as PyTorch's)."""
    axis, idx, source = _index_add_args("index_add", input, dim, index, source)
    alpha = _alpha(input, alpha)
    if input.ndim == 0:
        return reshape(IndexAdd.apply(reshape(input, 1), source, idx, 0, alpha), ())
    return IndexAdd.apply(input, source, idx, axis, alpha)


def index_add_(input, dim, index, source, *, alpha=1):  # noqa: A002
    if isinstance(input, Tensor) and input.ndim == 0:
        return _into_0d(input, index_add(input, dim, index, source, alpha=alpha))
    axis, idx, source = _index_add_args("index_add_", input, dim, index, source)
    alpha = _alpha(input, alpha)
    return IndexAdd.apply_("index_add_", input, source, idx, axis, alpha)


def index_copy_(input, dim, index, source):  # noqa: A002 - PyTorch's names
    """``input``'s slices ``index`` along ``dim`` overwritten by ``source``'s, in place (recorded, as setitem)."""
    op = "index_copy_"
    axis, idx, source = _index_add_args(op, input, dim, index, source)
    if source.dtype != input.dtype:
        raise RuntimeError(f"{op}: self and source expected to have the same dtype, but got {input.dtype} and "
                           f"{source.dtype}")
    if input.ndim == 0:  # every index is 0 (checked): the last source entry, none for an empty index
        return _into_0d(input, reshape(source, -1)[-1] if idx.size else input.clone())
    return setitem(input, (slice(None),) * axis + (Tensor._from_array(idx),), source)


def index_copy(input, dim, index, source):  # noqa: A002
    """:func:`index_copy_` on a copy of ``input``. Under autocast on cpu float32 and lower-precision operands
    widen to float32 (PyTorch's cpu promote list; the in-place form is not on it)."""
    _tensor("index_copy", "input", input)
    input, source = autocast_promote(input, source, devices=("cpu",))
    return index_copy_(input.clone(), dim, index, source)


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):  # noqa: A002
    """Each element (``dim`` None: of the flattened input) or slice along ``dim`` repeated ``repeats`` times (an
    int, or a 1-D int64 or int32 tensor of one count each), as ``torch.repeat_interleave``; with ``repeats`` left
    out, ``input`` is the counts and the result the indices they repeat (in the counts' dtype, as PyTorch's).
    A 0-d input takes no ``dim``, as PyTorch's. Differentiable as an index_select."""
    op = "repeat_interleave"
    if repeats is None:  # torch.repeat_interleave(counts)
        counts = input
        _tensor(op, "repeats", counts)
        positions = arange(counts.shape[0] if counts.ndim else 1, device=counts.device,
                           dtype=counts.dtype if counts.dtype == backend.int32 else backend.int64)
        return repeat_interleave(positions, counts, 0, output_size=output_size)
    _tensor(op, "input", input)
    if dim is not None and input.ndim == 0:  # (PyTorch's IndexError for any dim, 0 and -1 too)
        raise IndexError(f"{op}: expected a tensor of at least 1 dimension for dim={dim}, got a 0-d tensor (leave "
                         f"dim out to repeat its element)")
    x = reshape(input, -1) if dim is None else input
    axis = 0 if dim is None else dim_index(op, dim, x.ndim)
    n = x.shape[axis] if x.ndim else 1
    if isinstance(repeats, Tensor):
        if repeats.dtype not in (backend.int64, backend.int32) or repeats.ndim > 1:
            raise RuntimeError(f"{op}: repeats must be an int or a 0-d / 1-d int64 or int32 tensor, got "
                               f"{repeats.dtype} {tuple(repeats.shape)}")
        counts = backend.to_device(repeats._data, backend.CPU).reshape(-1)
    elif isinstance(repeats, numbers.Integral) and not isinstance(repeats, bool):
        counts = np.array([int(repeats)])
    else:
        raise InputTypeError(f"{op}: repeats must be an int or a tensor, got {type(repeats).__name__}")
    if counts.size == 1:
        counts = np.repeat(counts, n)
    if counts.size != n:
        raise RuntimeError(f"{op}: repeats must have the same size as input along dim ({n}), got {counts.size}")
    if (counts < 0).any():
        raise RuntimeError(f"{op}: repeats can not be negative")
    if output_size is not None and int(output_size) != int(counts.sum()):
        raise RuntimeError(f"{op}: output_size {output_size} is not the sum of the repeats ({int(counts.sum())})")
    idx = Tensor._from_array(backend.to_device(np.repeat(np.arange(n), counts).astype(np.int64), x.device))
    return index_select(x if x.ndim else reshape(x, 1), axis, idx)


def meshgrid(*tensors, indexing=None):
    """Coordinate grids from 1-D (or 0-d) tensors, as ``torch.meshgrid``: with ``indexing='ij'`` (the default,
    with PyTorch's warning when not given) the i-th grid varies along dimension i; with 'xy' the first two
    dimensions are swapped (Cartesian). Views, differentiable."""
    op = "meshgrid"
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        import warnings

        warnings.warn("meshgrid: in an upcoming release, it will be required to pass the indexing argument "
                      "(defaulting to 'ij', as before)", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise InputError(f"{op}: indexing must be one of 'xy' or 'ij', got {indexing!r}")
    for i, t in enumerate(tensors):
        _tensor(op, f"tensors[{i}]", t)
        if t.ndim > 1:
            raise RuntimeError(f"{op}: expected 0D or 1D tensor in the tensor list but got {t.ndim}D")
    sizes = [t.numel() for t in tensors]
    if indexing == "xy" and len(sizes) >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    grids = []
    for i, t in enumerate(tensors):
        place = i if indexing == "ij" or len(tensors) < 2 or i > 1 else 1 - i
        shape = [1] * len(tensors)
        shape[place] = t.numel()
        grids.append(expand(reshape(t, *shape), *sizes))
    return tuple(grids)


def _method(fn):
    return lambda self, *args, **kwargs: fn(self, *args, **kwargs)


METHODS = {name: _method(fn) for name, fn in {
    "gather": gather, "scatter": scatter, "scatter_": scatter_, "scatter_add": scatter_add,
    "scatter_add_": scatter_add_, "take_along_dim": take_along_dim, "index_select": index_select,
    "index_add": index_add, "index_add_": index_add_, "repeat_interleave": repeat_interleave,
    "index_put": index_put, "index_put_": index_put_, "index_copy": index_copy, "index_copy_": index_copy_}.items()}
