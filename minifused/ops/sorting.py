"""Sorting and selection: sort, argsort, msort, topk, kthvalue. The values are a gather of the input at
the indices found, so their gradient flows back to the selected positions (ops/index.py's Gather)."""
from __future__ import annotations

import numbers
from collections import namedtuple

import numpy as np

from .. import backend
from ..tensor import Tensor
from ._common import normalize_axis
from .index import Gather
from .shape import reshape

__all__ = ["sort", "argsort", "msort", "topk", "kthvalue", "unique", "bincount"]

# PyTorch's torch.return_types: tuples with .values and .indices
SortResult = namedtuple("sort", ["values", "indices"])
TopkResult = namedtuple("topk", ["values", "indices"])
KthvalueResult = namedtuple("kthvalue", ["values", "indices"])


def _order(a, axis, descending):
    """Indices that sort ``a`` along ``axis``, stably (equal values keep their order, also when
    descending); NaN counts as the largest value, as in PyTorch."""
    xp = backend.array_module(a)
    kind = {"kind": "stable"} if xp is np else {}  # CuPy's sort is always stable
    if not descending:
        return xp.argsort(a, axis=axis, **kind)
    # a stable ascending sort of the reversed row, read backwards: descending, ties in their first order
    n = a.shape[axis]
    rev = xp.flip(xp.argsort(xp.flip(a, axis), axis=axis, **kind), axis)
    return (n - 1) - rev


def _axis(op, x, dim):
    (axis,) = normalize_axis(op, dim, x.ndim)
    return axis


def _check(op, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor input, got {type(x).__name__}")


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
    values, indices = _sorted("sort", input, dim, descending)
    return SortResult(values, indices)


def argsort(input, dim=-1, descending=False, stable=False):  # noqa: A002
    _check("argsort", input)
    if input.ndim == 0:
        _axis("argsort", input, dim)
        return Tensor._from_array(input._xp.zeros((), np.int64))
    axis = _axis("argsort", input, dim)
    return Tensor._from_array(_order(input._data, axis, descending).astype(np.int64, copy=False))


def msort(input):  # noqa: A002
    return sort(input, 0).values


def _k(op, k, n, low=0):
    if not isinstance(k, numbers.Integral) or isinstance(k, bool):
        raise TypeError(f"{op}: k must be an int, got {type(k).__name__}")
    if not low <= k <= n:
        raise RuntimeError(f"{op}: k must be in [{low}, {n}], got {k}")
    return int(k)


def topk(input, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    """The ``k`` largest (smallest: ``largest=False``) entries along ``dim`` and their indices, in
    order (``sorted=False`` gives them in order too)."""
    _check("topk", input)
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
    axis = _axis("kthvalue", input, dim)
    n = input.shape[axis] if input.ndim else 1
    k = _k("kthvalue", k, n, low=1)
    if input.ndim == 0:
        values, indices = _sorted("kthvalue", input, dim, False)
        return KthvalueResult(values, indices)
    idx = _order(input._data, axis, False)
    idx = idx[(slice(None),) * axis + (slice(k - 1, k),)].astype(np.int64)
    values = Gather.apply(input, idx, axis)
    if not keepdim:
        values = reshape(values, tuple(s for i, s in enumerate(values.shape) if i != axis))
        idx = idx.squeeze(axis)
    return KthvalueResult(values, Tensor._from_array(idx))


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """The distinct values of ``input`` (flattened), ascending, as ``torch.unique``; with ``return_inverse``
    each element's index among them (``input``'s shape), with ``return_counts`` how often each occurs. Not
    differentiable, as in PyTorch."""
    _check("unique", input)
    if dim is not None:
        raise NotImplementedError("unique: dim= (unique slices) is not supported; unique over all elements only")
    xp = input._xp
    values, inverse, counts = xp.unique(input._data.reshape(-1), return_inverse=True, return_counts=True)
    out = [Tensor._from_array(values)]
    if return_inverse:
        out.append(Tensor._from_array(inverse.reshape(input.shape).astype(np.int64)))
    if return_counts:
        out.append(Tensor._from_array(counts.astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


def bincount(input, weights=None, minlength=0):  # noqa: A002
    """How often each value 0, 1, ... occurs in a 1-D non-negative integer tensor (the sums of ``weights``
    instead, when given: float32 for float32 weights, else float64, as PyTorch's), at least ``minlength``
    long, as ``torch.bincount``. Not differentiable."""
    op = "bincount"
    _check(op, input)
    if input.ndim != 1 or input.dtype.kind not in "iu" or input.dtype == backend.bool_ or \
            (input.numel() and int(input.min().item()) < 0):
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


def _method(fn):
    return lambda self, *args, **kwargs: fn(self, *args, **kwargs)


METHODS = {name: _method(fn) for name, fn in {
    "sort": sort, "argsort": argsort, "msort": msort, "topk": topk, "kthvalue": kthvalue, "unique": unique,
    "bincount": bincount}.items()}
