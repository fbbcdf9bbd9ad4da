"""Tensor indexing on both sides of ``=``, as PyTorch reads an index: integers, slices, None, Ellipsis,
bools, ranges, lists, integer and bool tensors or arrays (bool masks over leading dimensions, index
tensors broadcast together and mixed with slices). Reads are views where the index is basic and copies
where it is advanced; ``x[index] = value`` is an in-place op on the tape (see :class:`SetItem`).
Out-of-range indices raise IndexError naming the dimension, the index and the size."""
from __future__ import annotations

import numbers
import operator
import types
import warnings

import numpy as np

from .. import autograd, backend
from ..autograd import Function
from ..tensor import Tensor
from ._common import cast, unbroadcast, unbroadcast_graph
from ..backend import InputError
from ..kernels.gather import checked_index, gather_rows


def _xp(x):
    return backend.array_module(x)


def accumulate(shape, dtype, index, values):
    """A zero array of ``shape`` with ``values`` added at ``index`` (repeated positions add up): NumPy's
    ``add.at``, CuPy's ``scatter_add``. Half-precision sums run in float32 (rounding each partial sum
    would lose the small terms). CuPy's atomics take 4- and 8-byte types: narrower integers add in
    int32, and int64 as uint64 (two's complement: the same bits)."""
    dtype = np.dtype(dtype)
    if backend.is_floating(dtype):
        acc = np.dtype(np.float32) if dtype.itemsize < 4 else dtype
    elif not backend.is_cuda_array(values) or dtype.itemsize == 4:
        acc = dtype
    else:
        acc = np.dtype(np.uint64) if dtype.itemsize == 8 else np.dtype(np.int32)
    xp = backend.array_module(values)
    out = xp.zeros(shape, acc)
    if acc == np.uint64:
        values = values.astype(dtype, copy=False).view(np.uint64)
    else:
        values = values.astype(acc, copy=False)
    if xp is np:
        np.add.at(out, index, values)
    else:
        import cupyx

        cupyx.scatter_add(out, index, values)
    return out.view(dtype) if acc == np.uint64 else out.astype(dtype, copy=False)


def add_at(out, index, values, half_at_once=False):
    """``out[index] += values`` in place, repeated positions adding up. On the host one entry after the other onto
    ``out``'s own values, each sum rounded to out's dtype, as PyTorch's CPU loops (index_add_, index_put_ with
    accumulate, scatter_add_): adding the entries' sum once rounds differently (1 ulp in float32). With
    ``half_at_once``, 16-bit floats still add their float32 sum once (PyTorch's scatter_add_ and scatter_reduce_
    'sum' there); on the GPU :func:`accumulate`'s sum is added."""
    if _xp(out) is np and not (half_at_once and backend.is_floating(out.dtype) and out.dtype.itemsize < 4):
        np.add.at(out, index, values.astype(out.dtype, copy=False))
    else:
        out += accumulate(out.shape, out.dtype, index, values).astype(out.dtype, copy=False)
    return out


def fill_number(op, value, dtype):
    """A number that ``op`` (setitem, masked_fill, index_fill, scatter) writes into ``dtype``, or PyTorch's error
    where it does not fit: a complex number into a real dtype, a finite float beyond float16's, bfloat16's or
    float32's range (NumPy would write infinity; PyTorch's setitem checks float32's alone, writing infinity into
    the 16-bit floats), then ``backend.integer_fill``'s checks for integer dtypes."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, complex) and not np.issubdtype(np.dtype(dtype), np.complexfloating):
        raise InputError(f"{op}: value cannot be converted to type {dtype} without overflow (got {value!r})")
    if (isinstance(value, numbers.Real) and backend.is_floating(dtype)
            and backend.scalar_overflows(value, dtype, (np.float32,) if op == "setitem" else backend.FLOAT_DTYPES)):
        raise InputError(f"{op}: value cannot be converted to type {dtype} without overflow (got {value!r})")
    return backend.integer_fill(op, value, dtype)


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))


def _component(v, x, op):
    """One index component as ints, slices, None, Ellipsis, True, or an integer / bool array on ``x``'s
    device. 0-d index tensors act as the Python scalars they hold, as in PyTorch."""
    if isinstance(v, Tensor):
        if v.device.type == "cuda" and x.device.type == "cpu":
            raise RuntimeError(f"{op}: a {x.device} tensor indexed with a {v.device} tensor")
        v = v._data
        if v.dtype.kind in "iu" and v.dtype not in (np.int64, np.int32, np.uint8):  # PyTorch refuses int8, int16...
            raise IndexError(f"{op}: tensors used as indices must be long, int, byte or bool tensors, got {v.dtype}")
        if v.dtype == np.uint8:  # a mask, as PyTorch's (deprecated there, and warned)
            warnings.warn("indexing with dtype uint8 is now deprecated, please use a dtype bool instead.",
                          UserWarning, stacklevel=4)
            v = v.astype(np.bool_)
    if isinstance(v, slice):  # bounds may be 0-d tensors: plain ints from here on
        try:
            v = slice(*(None if b is None else operator.index(b) for b in (v.start, v.stop, v.step)))
        except TypeError:
            raise IndexError(f"{op}: slice bounds must be integers or None, got {v}") from None
        if v.step is not None and v.step <= 0:
            raise InputError(f"{op}: slice step must be greater than zero, got {v.step}")
        return v
    if v is None or v is Ellipsis:
        return v
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if _is_int(v):
        return int(v)
    if isinstance(v, (list, tuple, range)):
        arr = np.asarray(v)
        v = arr.astype(np.int64) if arr.size == 0 else arr
    if not (isinstance(v, np.ndarray) or backend.is_cuda_array(v)):
        exc = TypeError if isinstance(v, (str, bytes)) else IndexError  # (PyTorch's classes: it reads text as data)
        raise exc(f"{op}: only integers, slices (`:`), ellipsis (`...`), None and integer or bool "
                  f"tensors are valid indices (got {type(v).__name__})")
    if v.dtype != np.bool_ and not np.issubdtype(v.dtype, np.integer):
        raise IndexError(f"{op}: tensors used as indices must be integer or bool, got {v.dtype}")
    if v.ndim == 0:
        return bool(v) if v.dtype == np.bool_ else int(v)
    # a host array stays there until checked (an error at once), then goes to x's device (_normalize_index)
    return v if isinstance(v, np.ndarray) else backend.to_device(v, x.device)


def _check_array(v, dim, n, op):
    """``v`` bounds-checked against a dimension of size ``n``, negative entries made positive."""
    if v.size == 0:
        return v.astype(np.int64, copy=False)
    if backend.is_cuda_array(v):
        if op == "getitem":  # a read: clipped entries are safe to gather with, the error waits for the next sync
            return checked_index(v, n, True, lambda value, _: IndexError(
                f"{op}: index {value} is out of bounds for dimension {dim} with size {n} (out of range [{-n}, {n}))"))
        backend.refuse_sync(f"{op} with an index tensor (its bounds check)")
    bad = (v < -n) | (v >= n)
    if bool(bad.any()):
        raise IndexError(f"{op}: index {int(v[bad].ravel()[0])} is out of bounds for dimension {dim} with size "
                         f"{n} (out of range [{-n}, {n}))")
    return backend.where(v < 0, v + n, v).astype(np.int64, copy=False)


def _list_as_tuple(index):
    """PyTorch's (and old NumPy's) rule: a short list holding a sequence, slice, None, Ellipsis or tensor
    is a tuple of indices (``x[[[0, 1], [2, 3]]]`` is ``x[[0, 1], [2, 3]]``)."""
    return isinstance(index, list) and len(index) < 32 and any(
        v is None or v is Ellipsis or isinstance(v, (slice, list, tuple, range, Tensor, np.ndarray))
        or backend.is_cuda_array(v) for v in index)


def _bool_stages(x, parts, op):
    """PyTorch's Python (or 0-d tensor) bool in an index: a new axis of size 1, indexed by the index tensor [0]
    (True) or [] (False). So it joins the other index tensors (``x[True, [0, 1]]`` has shape (2, ...), not
    (1, 2, ...)) and the result is a copy, not a view. Two stages: the new axes, then the index on them."""
    spread = []  # the first stage: None for each bool, a full slice for each dimension another part consumes
    for p in parts:
        if isinstance(p, bool) or p is None or p is Ellipsis:
            spread.append(None if isinstance(p, bool) else p)
        else:
            spread.extend([slice(None)] * (p.ndim if hasattr(p, "dtype") and p.dtype == np.bool_ else 1))
    (first,) = _normalize_index(x, tuple(spread), op)  # checks the number of indices against x
    shape = np.broadcast_to(np.empty((), np.int8), x.shape)[first[0]].shape
    view = types.SimpleNamespace(shape=shape, ndim=len(shape), device=x.device)
    rest = tuple((np.zeros(1, np.int64) if p else np.zeros(0, np.int64)) if isinstance(p, bool)
                 else slice(None) if p is None else p for p in parts)
    return [first] + _normalize_index(view, rest, op)


def _one_ellipsis(x, parts, op):
    """PyTorch's rule for several '...': each stands for the dimensions no other component indexes, so the
    first takes them all and the later ones none (``x[..., 0, ...]`` is ``x[..., 0]``) where nothing after the
    second indexes a dimension (a full slice aside); where something does, PyTorch's runs past the last
    dimension and fails."""
    spare = x.ndim - sum(p.ndim if hasattr(p, "ndim") and p.dtype == np.bool_ else 1 for p in parts
                         if p is not None and p is not Ellipsis and not isinstance(p, bool))
    second = [i for i, p in enumerate(parts) if p is Ellipsis][1]
    full = lambda p: isinstance(p, slice) and p.start is None and p.stop is None and p.step is None  # noqa: E731
    if spare > 0 and not all(p is Ellipsis or full(p) for p in parts[second:]):
        raise IndexError(f"{op}: with a second ellipsis ('...'), nothing after it but ':' can index (the first "
                         f"takes all {spare} unindexed dimensions, the second as many more, beyond the last)")
    return parts[:second] + [p for p in parts[second:] if p is not Ellipsis]


def _normalize_index(x, index, op="getitem"):
    """``index`` as a list of stages, each ``(tuple of raw components, advanced)``, applied one after the
    other; bounds checked and bool masks turned into integer arrays. PyTorch applies integers before
    index arrays (``x[0, :, [0, 1]]`` has shape (n, 2), NumPy's (2, n)): such an index takes two stages."""
    if not isinstance(index, tuple):
        index = tuple(index) if _list_as_tuple(index) else (index,)
    parts = [_component(v, x, op) for v in index]
    if sum(p is Ellipsis for p in parts) > 1:
        parts = _one_ellipsis(x, parts, op)
    if any(isinstance(p, bool) for p in parts):
        return _bool_stages(x, parts, op)
    consumed = sum(p.ndim if hasattr(p, "ndim") and p.dtype == np.bool_ else 1 for p in parts
                   if p is not None and p is not Ellipsis and not isinstance(p, bool))
    if consumed > x.ndim:
        if x.ndim == 0:
            raise IndexError(f"{op}: invalid index of a 0-dim tensor; use tensor.item() to read its value")
        raise IndexError(f"{op}: too many indices for a tensor of dimension {x.ndim} ({consumed} given)")
    if consumed == x.ndim:  # a '...' of no dimension between index tensors leaves them adjacent (PyTorch's rule)
        parts = [p for p in parts if p is not Ellipsis]
    dim, out, arrays, ints = 0, [], [], False  # dim: the input dimension the next component indexes
    for p in parts:
        if p is Ellipsis:
            dim += x.ndim - consumed
        elif hasattr(p, "dtype") and p.dtype == np.bool_:
            want = x.shape[dim:dim + p.ndim]
            if p.shape != want:
                raise IndexError(f"{op}: the shape of the mask {tuple(p.shape)} does not match the shape "
                                 f"{tuple(want)} of the indexed tensor at dimension {dim}")
            found = tuple(backend.to_device(f, x.device) for f in p.nonzero())
            out.extend(found)
            arrays.extend(found)
            dim += p.ndim
            continue
        elif hasattr(p, "dtype"):
            p = backend.to_device(_check_array(p, dim, x.shape[dim], op), x.device)
            arrays.append(p)
            dim += 1
        elif _is_int(p):
            n = x.shape[dim]
            if not -n <= p < n:
                raise IndexError(f"{op}: index {p} is out of bounds for dimension {dim} with size {n} "
                                 f"(out of range [{-n}, {n}))")
            ints = True
            dim += 1
        elif isinstance(p, slice):
            dim += 1
        out.append(p)
    if arrays:
        try:
            np.broadcast_shapes(*(a.shape for a in arrays))
        except ValueError:
            raise IndexError(f"{op}: shape mismatch: indexing tensors could not be broadcast together with "
                             f"shapes {', '.join(str(tuple(a.shape)) for a in arrays)}") from None
    # ending in '...', a full integer index gives a 0-d view in NumPy, not a copy
    basic = tuple(out) if any(p is Ellipsis for p in out) else (*out, Ellipsis)
    if not arrays:
        return [(basic, False)]
    if not ints:
        return [(tuple(out), True)]
    first = tuple(p if _is_int(p) or p is Ellipsis else slice(None) for p in out if p is not None)
    return [(first, False), (tuple(p for p in out if not _is_int(p)), True)]


def _select(a, stages):
    for stage, _ in stages:
        a = a[stage]
    return a


class GetItem(Function):
    is_view = True

    @staticmethod
    def write_back(base, ctx, view, op):
        """``y[i].mul_(2)``: the in-place op's result written into ``base`` as ``base[i] = view`` (recorded), so
        that base's history includes it, as Python's ``y[i] *= 2`` does."""
        _write(base, ctx.index, view, "setitem")

    @staticmethod
    def forward(ctx, x, index):
        ctx.meta = (x.shape, x.dtype)
        ctx.index = index
        return x[index]

    @staticmethod
    def backward(ctx, g):
        shape, dtype = ctx.meta
        out = _xp(g).zeros(shape, dtype)
        out[ctx.index] = g
        return out, None

    @staticmethod
    def backward_graph(ctx, g):
        return EmbedItem.apply(g, ctx.meta[0], ctx.index, False), None


class GatherItem(GetItem):
    """Advanced indexing: a copy; repeated indices accumulate their gradients. One index array (on the first
    dim) of a CUDA array is a row gather (one launch of :func:`gather_rows`)."""

    is_view = False

    @staticmethod
    def forward(ctx, x, index):
        ctx.meta = (x.shape, x.dtype)
        ctx.index = index
        rows = index[0] if type(index) is tuple and len(index) == 1 else None
        if backend.is_cuda_array(rows) and rows.dtype.kind in "iu" and x.ndim:
            return gather_rows(x, rows.reshape(-1)).reshape(rows.shape + x.shape[1:])
        return x[index]

    @staticmethod
    def backward(ctx, g):
        shape, dtype = ctx.meta  # (PyTorch's index_put_ with accumulate: 16-bit floats round at each add on the CPU)
        return add_at(_xp(g).zeros(shape, dtype), ctx.index, g), None

    @staticmethod
    def backward_graph(ctx, g):
        return EmbedItem.apply(g, ctx.meta[0], ctx.index, True), None


class EmbedItem(Function):
    """``g`` laid into zeros of ``shape`` at ``index`` (a basic index, or an ``advanced`` one whose repeated
    positions add up): the adjoint of :class:`GetItem` / :class:`GatherItem`, recorded by the backward_graph of the
    ops whose gradient scatters (indexing, gather, index_select ...), so that the gradient differentiates again."""

    @staticmethod
    def forward(ctx, g, shape, index, advanced):
        ctx.meta = (index, advanced)
        if advanced:
            return accumulate(shape, g.dtype, index, g)
        out = _xp(g).zeros(shape, g.dtype)
        out[index] = g
        return out

    @staticmethod
    def backward(ctx, g):
        index, advanced = ctx.meta
        return g[index], None, None, None

    @staticmethod
    def backward_graph(ctx, g):
        index, advanced = ctx.meta
        return (GatherItem if advanced else GetItem).apply(g, index), None, None, None


def _pick(g, stages):
    """``g`` indexed by ``stages`` (:func:`_normalize_index`'s), recorded: the gradient tensor read where it was
    written (setitem's value gets it)."""
    for stage, advanced in stages:
        g = (GatherItem if advanced else GetItem).apply(g, stage)
    return g


def getitem(x, index):
    for stage, advanced in _normalize_index(x, index, "getitem"):
        x = (GatherItem if advanced else GetItem).apply(x, stage)
    return x


class SetItem(Function):
    """``x[index] = value``: the gradient reaches ``x``'s earlier value where it was not overwritten and
    ``value`` from the written positions (summed where it was broadcast or written twice)."""

    writes_overlap = True  # (PyTorch writes into an expanded view: x[0] = 5 sets every element sharing x[0]'s memory)

    @staticmethod
    def forward(ctx, x, value, stages, out):
        target = _select(out, stages[:-1])
        last = stages[-1][0]
        try:
            target[last] = value
        except ValueError:
            raise RuntimeError(f"setitem: shape mismatch: value of shape {tuple(np.shape(value))} cannot be "
                               f"broadcast to the indexed shape {tuple(target[last].shape)}") from None
        ctx.meta = (stages, np.shape(value))
        return out

    @staticmethod
    def backward(ctx, g):
        stages, value_shape = ctx.meta
        gx = gv = None
        if ctx.needs_input_grad[0]:
            gx = backend.copy(g)
            _select(gx, stages[:-1])[stages[-1][0]] = 0
        if ctx.needs_input_grad[1]:
            picked = _select(g, stages)
            # NumPy lets a value carry extra leading 1s beyond the indexed shape's dimensions
            lead = max(len(value_shape) - picked.ndim, 0)
            gv = unbroadcast(picked, tuple(value_shape[lead:])).reshape(value_shape)
        return gx, gv, None

    @staticmethod
    def backward_graph(ctx, g):
        stages, value_shape = ctx.meta
        gx = gv = None
        if ctx.needs_input_grad[0]:
            written = g._xp.zeros(g.shape, bool)  # (a constant: the positions written got none of x's gradient)
            _select(written, stages[:-1])[stages[-1][0]] = True
            gx = g.masked_fill(Tensor._from_array(written), 0)  # selected, as backward's: an inf or NaN is cut too
        if ctx.needs_input_grad[1]:
            picked = _pick(g, stages)
            lead = max(len(value_shape) - picked.ndim, 0)
            gv = unbroadcast_graph(picked, tuple(value_shape[lead:])).reshape(value_shape)
        return gx, gv, None


def _basic(index):
    """Whether ``index`` is basic indexing (ints, slices, Ellipsis, None): what gives a view, not a copy."""
    parts = index if isinstance(index, tuple) else (index,)
    return all(p is None or p is Ellipsis or isinstance(p, slice) or (isinstance(p, int) and not isinstance(p, bool))
               for p in parts)


def _written_back(x, index, value):
    """``x[index] op= v`` ends with ``x[index] = view``, where ``view`` is x[index] itself, already written in
    place and its every in-place op already recorded on x (see :meth:`GetItem.write_back`): nothing is left to
    write or record."""
    taken = getattr(value, "_view", None) if isinstance(value, Tensor) else None
    if type(taken) is not tuple or taken[0] is not x or not _basic(index):
        return False
    return autograd.same_region(value._data, x._data[index])


def setitem(x, index, value, op="setitem"):
    """``x[index] = value`` in place (bumping ``x``'s version), recorded on the tape when ``x`` or
    ``value`` requires grad; refused on a leaf that requires grad, as in PyTorch. ``op``: the in-place op
    written through setitem (``fill_diagonal_``), the name its refusals and the version counter record."""
    if _written_back(x, index, value):
        autograd.refuse_view_of_grad_leaf(op, x)
        return x
    return _write(x, index, value, op)


def _value_array(x, value):
    """A sequence or array ``value`` of numbers as an array of ``x``'s dtype on its device (PyTorch takes only tensors
    and numbers; a nested list or a NumPy array is read as ``tensor(value)`` would); anything else (None, a string)
    is refused, where NumPy would write NaN or fail inside the conversion."""
    if isinstance(value, (list, tuple, np.ndarray)) or backend.is_cuda_array(value):
        try:
            arr = np.asarray(value) if isinstance(value, (list, tuple)) else value
        except ValueError:  # a ragged list
            arr = None
        if arr is not None and arr.dtype.kind in "biufc":
            return backend.to_device(arr, x.device).astype(x.dtype, copy=False)
    raise TypeError(f"setitem: can't assign a {type(value).__name__} to a {x.dtype} tensor (expected a tensor, "
                    f"a number or a sequence of numbers)")


def _casts_into(index, value):
    """Whether PyTorch casts a tensor ``value`` of another dtype written at an advanced ``index``: a lone Python bool
    (a copy there) or one bool mask, the only index array, with a one-element cpu value (its masked_fill path).
    Elsewhere its index_put_ refuses the dtype."""
    parts = index if isinstance(index, tuple) else tuple(index) if _list_as_tuple(index) else (index,)
    if len(parts) == 1 and isinstance(parts[0], (bool, np.bool_)):
        return True
    raw = [p._data if isinstance(p, Tensor) else np.asarray(p) if isinstance(p, (list, tuple, range, bool)) else p
           for p in parts if isinstance(p, (bool, np.bool_, Tensor, np.ndarray, list, tuple, range))
           or backend.is_cuda_array(p)]
    arrays = [a for a in raw if a.ndim or a.dtype == np.bool_]  # (a 0-d integer tensor is an int)
    return (len(arrays) == 1 and arrays[0].dtype == np.bool_ and arrays[0].ndim > 0 and value.numel() == 1
            and value.device.type == "cpu")


def _write(x, index, value, op):
    stages = _normalize_index(x, index, "setitem")
    autograd.refuse_view_of_grad_leaf(op, x)
    if x._rewritten is not None and isinstance(value, Tensor) and _basic(index):
        autograd.settle_view_write(x, value._data, x._data[index])
    if isinstance(value, Tensor):
        if value.device != x.device:
            if value.ndim or value.device.type != "cpu":  # PyTorch takes a cpu 0-d value anywhere
                raise RuntimeError(f"setitem: expected a value on {x.device}, got {value.device}")
            value = Tensor._from_array(backend.to_device(value._data, x.device))
        if value.dtype != x.dtype and stages[-1][1] and not _casts_into(index, value):
            raise RuntimeError(f"setitem: an advanced index writes a value of the tensor's dtype {x.dtype}, got "
                               f"{value.dtype} (PyTorch's index_put_ does not cast: convert it with .to())")
        if not (value.requires_grad and backend.is_floating(x.dtype)):
            value = value._data.astype(x.dtype, copy=False)
        elif value.dtype != x.dtype:
            value = cast(value, x.dtype)
    elif isinstance(value, (numbers.Number, np.generic)):
        value = fill_number("setitem", value, x.dtype)
    else:
        value = _value_array(x, value)
    raw = value._data if isinstance(value, Tensor) else value
    if hasattr(raw, "shape") and _xp(x._data).may_share_memory(x._data, raw):
        raw = backend.copy(raw)  # x[1:] = x[:-1]: read everything before writing
        value = raw if not isinstance(value, Tensor) else value.clone()
    return SetItem.apply_(op, x, value, stages)
