"""Sorting and selection: sort, argsort, msort, topk, kthvalue, mode, quantile; searching and counting:
searchsorted, bucketize, unique, bincount, histc. Selected values are a gather of the input at the indices
found, so their gradient flows back to the selected positions (ops/index.py's Gather)."""
from __future__ import annotations

import math
import numbers
from collections import namedtuple

import numpy as np

from .. import backend
from ..tensor import Tensor
from ._common import autocast_float32, check_bools, host_int, normalize_axis
from .elementwise import where
from .index import Gather
from .reduce import Evenly, refuse_bool
from .shape import reshape
from ..backend import DtypeNotImplementedError, InputTypeError

__all__ = ["sort", "argsort", "msort", "topk", "kthvalue", "mode", "nanmedian", "quantile", "nanquantile", "unique",
           "bincount", "histc", "searchsorted", "bucketize"]

# PyTorch's torch.return_types: tuples with .values and .indices
SortResult = namedtuple("sort", ["values", "indices"])
TopkResult = namedtuple("topk", ["values", "indices"])
KthvalueResult = namedtuple("kthvalue", ["values", "indices"])
ModeResult = namedtuple("mode", ["values", "indices"])
NanmedianResult = namedtuple("nanmedian", ["values", "indices"])


def _order(a, axis, descending):
    """Indices that sort ``a`` along ``axis``, stably (equal values keep their order, also when
    descending); NaN counts as the largest value, as in PyTorch."""
    xp = backend.array_module(a)
    kind = {"kind": "stable"} if xp is np else {}  # CuPy's sort is always stable
    if a.dtype == backend.bfloat16:  # (exact) NumPy's sort of it misplaces NaN, CuPy's has no bfloat16
        a = a.astype(np.float32)
    if not descending:
        return xp.argsort(a, axis=axis, **kind)
    # a stable ascending sort of the reversed row, read backwards: descending, ties in their first order
    n = a.shape[axis]
    rev = xp.flip(xp.argsort(xp.flip(a, axis), axis=axis, **kind), axis)
    return (n - 1) - rev


def _axis(op, x, dim):
    """One ``dim`` (an int, not a tuple: PyTorch's TypeError) as a non-negative axis."""
    if not isinstance(dim, numbers.Integral) or isinstance(dim, bool):
        raise InputTypeError(f"{op}(): argument 'dim' must be an int, got {dim!r}")
    (axis,) = normalize_axis(op, dim, x.ndim)
    return axis


def _check(op, x):
    if not isinstance(x, Tensor):
        raise InputTypeError(f"{op}: expected a Tensor input, got {type(x).__name__}")


def _sorted(op, x, dim, descending):
    """(values, int64 indices) of ``x`` sorted along ``dim``."""
    _check(op, x)
    if x.ndim == 0:
        _axis(op, x, dim)
        return x.clone(), Tensor._from_array(x._xp.zeros((), np.int64))
    axis = _axis(op, x, dim)
    idx = _order(x._data, axis, descending).astype(np.int64, copy=False)
    return Gather.apply(x, idx, axis), Tensor._from_array(idx)


def sort(input, dim=-1, descending=False, stable=False):  # noqa: A002 - PyTorch's names
    """(values, indices) along ``dim``; always stable here (``stable`` is accepted for PyTorch's signature)."""
    check_bools("sort", descending=descending, stable=False if stable is None else stable)  # (its stable may be None)
    values, indices = _sorted("sort", input, dim, descending)
    return SortResult(values, indices)


def argsort(input, dim=-1, descending=False, stable=False):  # noqa: A002
    _check("argsort", input)
    check_bools("argsort", descending=descending, stable=stable)
    if input.ndim == 0:
        _axis("argsort", input, dim)
        return Tensor._from_array(input._xp.zeros((), np.int64))
    axis = _axis("argsort", input, dim)
    return Tensor._from_array(_order(input._data, axis, descending).astype(np.int64, copy=False))


def msort(input):  # noqa: A002
    return sort(input, 0).values


def _k(op, k, n, low=0):
    k = host_int(k)
    if not isinstance(k, numbers.Integral) or isinstance(k, bool):
        raise InputTypeError(f"{op}: k must be an int, got {type(k).__name__}")
    if not low <= k <= n:
        raise RuntimeError(f"{op}: k must be in [{low}, {n}], got {k}")
    return int(k)


def topk(input, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    """The ``k`` largest (smallest: ``largest=False``) entries along ``dim`` and their indices, in
    order (``sorted=False`` gives them in order too). Bool is refused, as PyTorch's CPU and CUDA kernels do."""
    _check("topk", input)
    check_bools("topk", largest=largest, sorted=sorted)
    refuse_bool("topk", input, RuntimeError)
    axis = _axis("topk", input, dim)
    if input.ndim == 0:  # one entry: k is 1
        _k("topk", k, 1, low=1)
        return TopkResult(*_sorted("topk", input, dim, largest))
    k = _k("topk", k, input.shape[axis])
    idx = _order(input._data, axis, largest)
    idx = idx[(slice(None),) * axis + (slice(0, k),)].astype(np.int64)
    return TopkResult(Gather.apply(input, idx, axis), Tensor._from_array(idx))


def kthvalue(input, k, dim=-1, keepdim=False):  # noqa: A002
    """The ``k``-th smallest entry (1-based) along ``dim`` and its index."""
    _check("kthvalue", input)
    check_bools("kthvalue", keepdim=keepdim)
    refuse_bool("kthvalue", input)
    # (an empty dim: IndexError)
    axis = _nonempty_axis("kthvalue", input, dim) if input.ndim else _axis("kthvalue", input, dim)
    n = input.shape[axis] if input.ndim else 1
    k = _k("kthvalue", k, n, low=1)
    if input.ndim == 0:
        values, indices = _sorted("kthvalue", input, dim, False)
        return KthvalueResult(values, indices)
    idx = _order(input._data, axis, False)
    return _pick(KthvalueResult, input, idx[(slice(None),) * axis + (slice(k - 1, k),)].astype(np.int64), axis,
                 keepdim)


def _nonempty_axis(op, input, dim):
    """The axis of ``dim`` that a selection reads along: an empty one is an IndexError."""
    axis = _axis(op, input, dim)
    if input.shape[axis] == 0:
        raise IndexError(f"{op}(): expected a non-empty dimension {dim}, got shape {tuple(input.shape)}")
    return axis


def _scalar_pick(result, input):
    """``result(values, indices)`` of a selection from a 0-d ``input``: itself, at index 0."""
    return result(input.clone(), Tensor._from_array(input._xp.zeros((), np.int64)))


def _pick(result, input, idx, axis, keepdim):
    """``result(values, indices)``: ``input`` gathered at ``idx`` (int64, of size 1 along ``axis``), the
    gradient going to the picked elements; ``axis`` dropped unless ``keepdim``."""
    values = Gather.apply(input, idx, axis)
    if not keepdim:
        values = reshape(values, tuple(n for i, n in enumerate(values.shape) if i != axis))
        idx = idx.squeeze(axis)
    return result(values, Tensor._from_array(idx))


def mode(input, dim=-1, keepdim=False):  # noqa: A002
    """The most frequent value along ``dim`` (the smallest of those equally frequent) and the index of its last
    occurrence, as ``torch.mode``. A NaN equals nothing, so each counts once. PyTorch's CPU kernel sorts a row with
    ``<``, which NaN leaves unordered: for rows of up to 16 (its insertion sort) that order is followed here; longer
    rows holding NaN sort it last, and for them its unstable sort leaves which of the tied occurrences it names
    unspecified."""
    op = "mode"
    _check(op, input)
    check_bools(op, keepdim=keepdim)
    if input.ndim == 0:
        _axis(op, input, dim)
        return _scalar_pick(ModeResult, input)
    axis = _nonempty_axis(op, input, dim)
    rows = np.moveaxis(backend.to_device(input._data, backend.CPU), axis, -1)
    flat = rows.reshape(-1, rows.shape[-1])
    order = np.argsort(flat, axis=1, kind="stable")  # equal values keep their order: a run ends at the last one
    ranked = np.take_along_axis(flat, order, axis=1)
    pos = np.arange(flat.shape[1])
    runs = np.empty(flat.shape, bool)
    runs[:, 0], runs[:, 1:] = True, ranked[:, 1:] != ranked[:, :-1]
    start = np.maximum.accumulate(np.where(runs, pos, 0), axis=1)
    end = np.argmax(pos - start, axis=1)  # the first run to reach the greatest length: the smallest value's
    picked = order[np.arange(flat.shape[0]), end]
    if backend.is_floating(flat.dtype) and flat.shape[1] <= 16:  # rows with NaN: PyTorch's insertion sort, followed
        for r in np.flatnonzero(np.isnan(flat).any(axis=1)):
            picked[r] = _mode_index_insertion_sorted(flat[r])
    idx = picked.reshape(rows.shape[:-1] + (1,))
    return _pick(ModeResult, input, backend.to_device(np.moveaxis(idx, -1, axis), input.device), axis, keepdim)


def _mode_index_insertion_sorted(row):
    """The index ``torch.mode`` names for a row of at most 16 elements holding NaN: its CPU kernel sorts (value, index)
    pairs with ``<`` on the values (for so few, libstdc++'s insertion sort: a NaN moves nowhere and stops what moves
    past it), then takes the last element of the first longest run of equal values."""
    pairs = []
    for i, v in enumerate(row.tolist()):
        j = len(pairs)
        if pairs and v < pairs[0][0]:
            j = 0
        else:
            while j and v < pairs[j - 1][0]:
                j -= 1
        pairs.insert(j, (v, i))
    best, length, run = 0, 0, 0
    for k, (v, i) in enumerate(pairs):
        run += 1
        if k == len(pairs) - 1 or v != pairs[k + 1][0]:  # (NaN != NaN: each NaN a run of its own)
            if run > length:
                best, length = i, run
            run = 0
    return best


def nanmedian(input, dim=None, keepdim=False):  # noqa: A002
    """The lower median of the values that are not NaN (NaN where there are none): of every element for
    ``dim=None`` (NaN for no element; the gradient shared among the elements equal to it, as PyTorch's), else
    ``(values, indices)`` along ``dim``, the gradient going to the element picked, as ``torch.nanmedian``."""
    op = "nanmedian"
    check_bools(op, keepdim=keepdim)
    _check(op, input)
    refuse_bool(op, input)
    xp = input._xp
    if dim is None:
        if input.numel() == 0:
            if not backend.is_floating(input.dtype):
                raise RuntimeError(f"{op}() input tensor cannot be empty")
            return Evenly.apply(input, xp.full((), np.nan, input.dtype))
        flat = input._data.reshape(-1, 1)
        return Evenly.apply(input, xp.take_along_axis(flat, _nanmedian_index(flat, 0), axis=0).reshape(()))
    if input.ndim == 0:
        _axis(op, input, dim)
        return _scalar_pick(NanmedianResult, input)
    axis = _nonempty_axis(op, input, dim)
    return _pick(NanmedianResult, input, _nanmedian_index(input._data, axis), axis, keepdim)


def _nanmedian_index(a, axis):
    """Where the lower median of the values that are not NaN is along ``axis`` (a row of NaNs: its first), int64
    and of size 1 along ``axis``."""
    xp = backend.array_module(a)
    order = _order(a, axis, False)  # NaN sorts last
    count = (~xp.isnan(a)).sum(axis=axis, keepdims=True)
    pick = xp.ascontiguousarray(xp.maximum((count - 1) // 2, 0))  # (C order: the values and indices are PyTorch's)
    return xp.take_along_axis(order, pick, axis=axis).astype(np.int64)


_QUANTILE_MODES = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(op, input, q, dim, keepdim, interpolation, ignore_nan):
    _check(op, input)
    check_bools(op, keepdim=keepdim)
    input, q = autocast_float32(input, q, devices=("cpu",))  # (both on PyTorch's cpu float32 list)
    if input.dtype not in (backend.float32, backend.float64):
        raise RuntimeError(f"{op}() input tensor must be either float or double dtype, got {input.dtype}")
    if interpolation not in _QUANTILE_MODES:
        raise RuntimeError(f"{op}() interpolation must be one of linear, lower, higher, midpoint or nearest. Got "
                           f"{interpolation!r}")
    if isinstance(q, Tensor):
        if q.ndim > 1:
            raise RuntimeError(f"{op}() q must be a scalar or 1D tensor, got shape {tuple(q.shape)}")
        if q.dtype != input.dtype:
            raise RuntimeError(f"{op}() q tensor must be same dtype as the input tensor, got {q.dtype} and "
                               f"{input.dtype}")
        qs, q_dim = backend.to_device(q._data, backend.CPU).astype(np.float64).reshape(-1), q.ndim == 1
    elif isinstance(q, numbers.Real) and not isinstance(q, bool):
        qs, q_dim = np.array([float(q)]), False
    else:
        raise InputTypeError(f"{op}() q must be a number or a tensor, got {type(q).__name__}")
    if not ((qs >= 0) & (qs <= 1)).all():
        got = f" but got {float(qs[0])}" if not q_dim else ""
        raise RuntimeError(f"{op}() q {'values ' if q_dim else ''}must be in the range [0, 1]{got}")
    if input.numel() == 0:
        raise RuntimeError(f"{op}() input tensor must be non-empty")
    if dim is None:
        x, out_shape = reshape(input, (1, -1)), (1,) * input.ndim if keepdim else ()
        axis = 0
    else:
        axis = _axis(op, input, dim)  # (a 0-d input takes dim 0 or -1)
        shape = tuple(input.shape) or (1,)
        out_shape = tuple(1 if i == axis else n for i, n in enumerate(shape)) if keepdim else \
            tuple(n for i, n in enumerate(shape) if i != axis)
        if input.ndim == 0:  # (a 0-d input's quantile along dim 0 is 0-d, keepdim or not, as PyTorch's)
            out_shape = ()
        x = reshape(input, shape).movedim(axis, -1)
        x = reshape(x, (-1, x.shape[-1]))
    n = x.shape[-1]
    ranked = sort(x, -1).values  # NaN sorts last
    isnan = backend.to_device(x._xp.isnan(x._data), backend.CPU)
    t = input.dtype.type
    # the ranks in the input's dtype, as PyTorch computes them
    count = (n - isnan.sum(axis=1)) if ignore_nan else np.full(x.shape[0], n)
    ranks = qs.astype(t)[None, :] * (count.astype(t)[:, None] - t(1))
    if not ignore_nan:  # a row with a NaN gives NaN: both neighbours its last (NaN) value
        ranks = np.where(isnan.any(axis=1)[:, None], t(n - 1), ranks)
    ranks = np.where(count[:, None] == 0, t(0), ranks)  # (nanquantile of an all-NaN row: its first NaN, as PyTorch's)
    below, above = np.floor(ranks), np.ceil(ranks)
    if interpolation == "nearest":
        below = above = np.round(ranks)  # (half to even, as PyTorch's)
    elif interpolation == "lower":
        above = below
    elif interpolation == "higher":
        below = above
    dev = input.device
    lo = Gather.apply(ranked, backend.to_device(below.astype(np.int64), dev), 1)
    if interpolation in ("lower", "higher", "nearest"):  # a gather alone, as PyTorch's: no inf - inf = NaN
        return _quantile_shape(lo, qs, q_dim, out_shape)
    hi = Gather.apply(ranked, backend.to_device(above.astype(np.int64), dev), 1)
    weight = (ranks - below).astype(t) if interpolation == "linear" else \
        np.full(ranks.shape, 0.5 if interpolation == "midpoint" else 0.0, t)
    w = Tensor._from_array(backend.to_device(weight, dev))
    diff = hi - lo
    out = where(Tensor._from_array(backend.to_device(weight < 0.5, dev)), lo + w * diff, hi - diff * (1 - w))
    return _quantile_shape(out, qs, q_dim, out_shape)


def _quantile_shape(out, qs, q_dim, out_shape):
    """The (rows, q) quantiles as the result's shape: q's dim first where q is a 1-D tensor."""
    return reshape(out.movedim(1, 0), ((len(qs),) if q_dim else ()) + out_shape)


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    """The ``q``-th quantiles (a number, or a 1-D tensor of them: its length leads the result's shape) of
    ``input`` along ``dim`` (all of it for None), as ``torch.quantile``: the sorted values at rank ``q * (n - 1)``,
    interpolated between the two neighbours by ``interpolation`` (linear, lower, higher, midpoint, nearest); a
    NaN in a row gives NaN. Differentiable through the selected values."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    """:func:`quantile` ignoring NaNs (NaN where a row has nothing else), as ``torch.nanquantile``."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


def _check_empty_dims(op, shape, axis):
    """PyTorch's unique / unique_consecutive with ``dim`` on an empty tensor: only the selected dimension may be 0
    (other slices along it would be compared by no element)."""
    if shape[axis] != 0 or list(shape).count(0) > 1:
        raise RuntimeError(f"{op}: " + ("there are 0 sized dimensions, and they aren't selected, so unique cannot be "
                                        "applied" if shape[axis] else "number of zero sized dimensions is more than "
                                        "one, so unique cannot be applied"))


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """The distinct values of ``input`` (flattened), ascending, as ``torch.unique``; with ``return_inverse``
    each element's index among them (``input``'s shape), with ``return_counts`` how often each occurs. Every NaN
    is distinct (NaN != NaN), after the numbers, as PyTorch's. Not differentiable, as in PyTorch. With ``dim``: the
    distinct slices along ``dim``, in lexicographic order of the flattened slices (always sorted, as PyTorch's);
    ``return_inverse`` gives each slice's index among them (one per slice), ``return_counts`` how often each occurs."""
    _check("unique", input)
    check_bools("unique", sorted=sorted, return_inverse=return_inverse, return_counts=return_counts)
    if dim is not None:
        return _unique_dim(input, dim, return_inverse, return_counts)
    xp = input._xp
    flat = input._data.reshape(-1)
    order = _order(flat, 0, False)  # (stable, NaN last)
    ranked = flat[order]
    first = xp.ones(flat.shape, bool)  # where a value differs from the one before it: a new distinct value
    first[1:] = ranked[1:] != ranked[:-1]
    out = [Tensor._from_array(ranked[first])]
    if return_inverse:
        inverse = xp.empty(flat.shape, np.int64)
        inverse[order] = xp.cumsum(first, dtype=np.int64) - 1
        out.append(Tensor._from_array(inverse.reshape(input.shape)))
    if return_counts:
        ends = xp.concatenate([xp.flatnonzero(first), xp.full((1,), flat.size, np.int64)])
        out.append(Tensor._from_array(xp.diff(ends).astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


def _dense_rank(cols):
    """Each column's dense ranks (int64; equal values share one, in ascending order, NaN last and each NaN a rank of
    its own, as NaN != NaN), with the stable order that sorts each column and where a new rank starts there."""
    xp = backend.array_module(cols)
    order = _order(cols, 0, False)
    ranked = xp.take_along_axis(cols, order, 0)
    first = xp.ones(cols.shape, bool)
    first[1:] = ranked[1:] != ranked[:-1]
    rank = xp.empty(cols.shape, np.int64)
    rank[order, xp.arange(cols.shape[1])] = xp.cumsum(first, axis=0, dtype=np.int64) - 1
    return rank, order, first


def _unique_dim(input, dim, return_inverse, return_counts):
    """:func:`unique` of the slices along ``dim``. The slices are flattened to rows; each column is ranked, then
    neighbouring columns' ranks are paired into one key (``left * rows + right``, order-preserving) and ranked again,
    halving the columns until one rank per row remains: the rows' lexicographic rank, with no per-column sort loop.
    A NaN ranks after the numbers and apart from every other value, so a slice holding one is never merged, as in
    PyTorch, whose order of such slices follows from a comparison that is no order (NaN neither below nor above) and
    so from its sort algorithm (CPU and CUDA differ): here NaN sorts last, as in ``sort`` and ``unique`` without
    ``dim``."""
    if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
        raise InputTypeError(f"unique(): argument 'dim' must be int, not {type(dim).__name__}")
    if input.ndim == 0:
        raise IndexError(f"unique: dimension specified as {dim} but tensor has no dimensions")
    axis = _axis("unique", input, dim)
    if np.dtype(input.dtype).kind == "c":
        raise NotImplementedError(f"unique: dim= is not implemented for complex tensors, got {input.dtype}")
    xp, a = input._xp, input._data
    n = a.shape[axis]
    if a.size == 0:
        _check_empty_dims("unique", a.shape, axis)
        out = [Tensor._from_array(xp.empty(a.shape, a.dtype))]
        out += [Tensor._from_array(xp.zeros((0,), np.int64)) for _ in range(return_inverse + return_counts)]
        return out[0] if len(out) == 1 else tuple(out)
    rows = xp.moveaxis(a, axis, 0).reshape(n, -1)
    if rows.dtype in (bool, backend.bfloat16):  # (exact) ranked as 0 and 1, and on float32 keys as sort() does
        rows = rows.astype(np.uint8 if rows.dtype == bool else np.float32)
    rank, order, first = _dense_rank(rows)
    while rank.shape[1] > 1:
        if rank.shape[1] % 2:  # (an odd column out pairs with a constant one)
            rank = xp.concatenate([rank, xp.zeros((n, 1), np.int64)], axis=1)
        rank, order, first = _dense_rank(rank[:, 0::2] * n + rank[:, 1::2])
    order, first = order[:, 0], first[:, 0]
    out = [Tensor._from_array(xp.take(a, order[first], axis=axis))]  # (each first in input's order: the stable sort)
    if return_inverse:
        out.append(Tensor._from_array(rank[:, 0]))
    if return_counts:
        ends = xp.concatenate([xp.flatnonzero(first), xp.full((1,), n, np.int64)])
        out.append(Tensor._from_array(xp.diff(ends).astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


def bincount(input, weights=None, minlength=0):  # noqa: A002
    """How often each value 0, 1, ... occurs in a 1-D non-negative integer tensor (the sums of ``weights``
    instead, when given: float32 for float32 weights, else float64, as PyTorch's), at least ``minlength``
    long, as ``torch.bincount``. Not differentiable."""
    op = "bincount"
    _check(op, input)
    if input.dtype.kind not in "iu":  # (PyTorch: "not implemented for 'Float'"; a NotImplementedError)
        raise DtypeNotImplementedError(f"{op}: bincount only supports 1-d non-negative integral inputs, got "
                                       f"{input.dtype} {tuple(input.shape)}")
    if input.ndim != 1 or (input.numel() and int(input.min().item()) < 0):
        raise RuntimeError(f"{op}: bincount only supports 1-d non-negative integral inputs, got {input.dtype} "
                           f"{tuple(input.shape)}")
    if isinstance(minlength, bool) or not isinstance(minlength, numbers.Integral) or minlength < 0:
        raise RuntimeError(f"{op}: minlength should be >= 0, got {minlength!r}")
    xp = input._xp
    if weights is None:
        return Tensor._from_array(xp.bincount(input._data, minlength=int(minlength)).astype(np.int64))
    _check(op, weights)
    if tuple(weights.shape) != tuple(input.shape):
        raise RuntimeError(f"{op}: weights should be 1-d and have the same length as input, got "
                           f"{tuple(weights.shape)} for {tuple(input.shape)}")
    dtype = np.float32 if weights.dtype == backend.float32 else np.float64
    out = xp.bincount(input._data, weights=weights._data.astype(np.float64), minlength=int(minlength))
    return Tensor._from_array(out.astype(dtype))


def histc(input, bins=100, min=0, max=0):  # noqa: A002
    """A histogram of ``input``'s values in ``bins`` equal bins over [min, max] (its own smallest and largest
    value where min == max, widened by 1 each way if still equal; values outside are left out, a value at max
    counts in the last bin), in the input's dtype, as ``torch.histc``. Not differentiable."""
    op = "histc"
    _check(op, input)
    if not backend.is_floating(input.dtype):  # (PyTorch: "not implemented for 'Long'")
        raise DtypeNotImplementedError(f"{op}: expected a floating-point input, got dtype {input.dtype}")
    bins = host_int(bins)
    if isinstance(bins, bool) or not isinstance(bins, numbers.Integral):
        raise InputTypeError(f"{op}(): argument 'bins' must be int, not {type(bins).__name__}")
    if bins <= 0:
        raise RuntimeError(f"{op}: bins must be > 0, got {bins!r}")
    lo, hi = float(min), float(max)
    if lo > hi:
        raise RuntimeError(f"{op}: max must be larger than min, got min={min} and max={max}")
    xp = input._xp
    x = input._data.reshape(-1)
    if lo == hi and x.size:
        lo, hi = float(x.min()), float(x.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"{op}: range of [{lo}, {hi}] is not finite")
    t = x.dtype.type  # each value's bin worked out in the input's dtype, rounded as PyTorch's
    lo, hi = t(lo), t(hi)
    x = x[(x >= lo) & (x <= hi)]
    pos = xp.clip(((x - lo) * t(bins) / (hi - lo)).astype(np.int64), 0, bins - 1)
    return Tensor._from_array(xp.bincount(pos, minlength=bins)[:bins].astype(input.dtype))


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):  # noqa: A002
    """For each value of ``input`` (a tensor or a number) the index at which it would go into
    ``sorted_sequence`` (1-D, or sorted along its last dimension with the leading ones matching ``input``'s) to
    keep it sorted: the first such index, the last with ``right=True`` or ``side='right'``; int64 (int32 with
    ``out_int32``); ``sorter`` the indices that sort an unsorted sequence, as ``torch.searchsorted``."""
    op = "searchsorted"
    check_bools(op, out_int32=out_int32, right=right)
    _check(op, sorted_sequence)
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"{op}(): side can only be 'left' or 'right' but got {side!r}")
        if right and side == "left":
            raise RuntimeError(f"{op}(): side and right can't be set to opposites, got side of left while right "
                               f"was True")
        right = side == "right"
    seq = sorted_sequence._data
    xp = sorted_sequence._xp
    if sorter is not None:
        _check(op, sorter)
        if tuple(sorter.shape) != tuple(sorted_sequence.shape) or sorter.dtype != backend.int64:
            raise RuntimeError(f"{op}(): sorter must be an int64 tensor of the sorted_sequence's shape "
                               f"{tuple(sorted_sequence.shape)}, got {sorter.dtype} {tuple(sorter.shape)}")
        n = seq.shape[-1] if seq.ndim else 0
        if sorter.numel() and bool(((sorter._data < 0) | (sorter._data >= n)).any()):
            raise RuntimeError(f"{op}(): sorter index out of range: every index must be in [0, {n}), got "
                               f"{int(sorter.min().item())} to {int(sorter.max().item())}")
        seq = xp.take_along_axis(seq, sorter._data, axis=-1)
    if isinstance(input, Tensor):
        values = input._data
    elif isinstance(input, numbers.Real):
        values = xp.asarray(int(input) if isinstance(input, bool) else input)
    else:
        raise InputTypeError(f"{op}(): input must be a Tensor or a number, got {type(input).__name__}")
    if seq.ndim == 0:
        raise RuntimeError(f"{op}(): boundaries tensor should have positive dimension, but got 0 dimension")
    if seq.ndim > 1 and tuple(seq.shape[:-1]) != tuple(values.shape[:-1]):
        raise RuntimeError(f"{op}(): boundaries tensor should be 1 dimension or the first N-1 dimensions of "
                           f"boundaries tensor and input value tensor must match, but we got boundaries tensor "
                           f"{list(seq.shape)} and input value tensor {list(values.shape)}")
    # a NaN in the sequence takes PyTorch's own search (on the GPU any float sequence: no wait for a NaN check)
    nan_free = not backend.is_floating(seq.dtype) or (xp is np and not np.isnan(seq).any())
    if seq.ndim == 1 and nan_free:
        out = xp.searchsorted(seq, values, side="right" if right else "left")
    else:
        out = _binary_search(seq, values, right)
    return Tensor._from_array(xp.asarray(out, dtype=np.int32 if out_int32 else np.int64))


def _binary_search(seq, values, right):
    """PyTorch's binary search of each value in ``seq`` (1-D, or one row per row of ``values``), all values at
    once: a step right wherever ``not seq[mid] >= value`` (``>`` for ``right``). On a sorted sequence without
    NaN that is the array modules' ``searchsorted``; a NaN compares false there, so its result on a sequence
    holding NaN (sort() puts them last) is the search's path: [-1, 0, 2, nan] puts 3 at 4, not 3."""
    xp = backend.array_module(seq)
    n = seq.shape[-1]
    rows = seq.reshape(math.prod(seq.shape[:-1]), n)
    vals = values.reshape(rows.shape[0], values.shape[-1]) if seq.ndim > 1 else values.reshape(1, -1)
    lo, hi = xp.zeros(vals.shape, np.int64), xp.full(vals.shape, n, np.int64)
    for _ in range(n.bit_length()):  # each step at least halves every open range [lo, hi)
        mid = lo + (hi - lo) // 2
        at = xp.take_along_axis(rows, xp.minimum(mid, n - 1), axis=1)
        step_right = ~(at > vals) if right else ~(at >= vals)
        open_ = lo < hi
        lo = backend.where(open_ & step_right, mid + 1, lo)
        hi = backend.where(open_ & ~step_right, mid, hi)
    return lo.reshape(values.shape)


def bucketize(input, boundaries, *, out_int32=False, right=False):  # noqa: A002
    """The bucket of each value of ``input`` among the 1-D ascending ``boundaries``: i with
    ``boundaries[i-1] < x <= boundaries[i]`` (``boundaries[i-1] <= x < boundaries[i]`` with ``right=True``), as
    ``torch.bucketize``."""
    _check("bucketize", boundaries)
    if boundaries.ndim != 1:
        raise RuntimeError(f"bucketize(): boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def _method(fn):
    return lambda self, *args, **kwargs: fn(self, *args, **kwargs)


METHODS = {name: _method(fn) for name, fn in {
    "sort": sort, "argsort": argsort, "msort": msort, "topk": topk, "kthvalue": kthvalue, "unique": unique,
    "bincount": bincount, "mode": mode, "nanmedian": nanmedian, "quantile": quantile, "nanquantile": nanquantile,
    "histc": histc}.items()}
