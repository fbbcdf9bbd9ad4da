"""Reductions over axes: sum, mean, max/min (and the amax/amin forms), var, std, argmax/argmin."""
from __future__ import annotations

import builtins
from collections import namedtuple

import numpy as np

from .. import backend
from ..autograd import Function
from ..tensor import Tensor
from ._common import cast, dense, normalize_axis


def _expand(g, in_shape, axes, keepdim):
    """``g`` reshaped so it broadcasts against the input (the reduced axes put back as 1s)."""
    if not keepdim and axes is not None:
        shape = list(in_shape)
        for ax in axes:
            shape[ax] = 1
        g = g.reshape(shape)
    elif axes is None and not keepdim:
        g = g.reshape((1,) * len(in_shape))
    return g


def _count(shape, axes):
    return int(np.prod([shape[a] for a in axes] if axes is not None else shape, dtype=np.int64))


class Sum(Function):
    @staticmethod
    def forward(ctx, x, axes, keepdim):
        ctx.meta = (x.shape, axes, keepdim)
        return x.sum(axis=axes, keepdims=keepdim)

    @staticmethod
    def backward(ctx, g):
        shape, axes, keepdim = ctx.meta
        xp = backend.array_module(g)
        return dense(xp.broadcast_to(_expand(g, shape, axes, keepdim), shape))


class Mean(Function):
    @staticmethod
    def forward(ctx, x, axes, keepdim):
        ctx.meta = (x.shape, axes, keepdim)
        return x.mean(axis=axes, keepdims=keepdim)

    @staticmethod
    def backward(ctx, g):
        shape, axes, keepdim = ctx.meta
        xp = backend.array_module(g)
        scale = 1.0 / builtins.max(_count(shape, axes), 1)
        return dense(xp.broadcast_to(_expand(g, shape, axes, keepdim) * scale, shape))


class Extreme(Function):
    """amax/amin over axes; the gradient is shared evenly among tied extremes (as in PyTorch)."""

    @staticmethod
    def forward(ctx, x, axes, keepdim, largest):
        out = x.max(axis=axes, keepdims=keepdim) if largest else x.min(axis=axes, keepdims=keepdim)
        ctx.save_for_backward(x, out)
        ctx.meta = (axes, keepdim)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        axes, keepdim = ctx.meta
        hit = x == _expand(out, x.shape, axes, keepdim)
        count = hit.sum(axis=axes, keepdims=True)
        return (hit * (_expand(g, x.shape, axes, keepdim) / count)).astype(g.dtype)


class ExtremeAlong(Function):
    """max/min along one axis; the gradient goes to the index returned (as in PyTorch)."""

    @staticmethod
    def forward(ctx, x, axis, keepdim, indices):
        xp = backend.array_module(x)
        picked = xp.take_along_axis(x, xp.expand_dims(indices, axis), axis)
        ctx.save_for_backward(indices)
        ctx.meta = (x.shape, axis, keepdim)
        return picked if keepdim else picked.squeeze(axis)

    @staticmethod
    def backward(ctx, g):
        (indices,) = ctx.saved_tensors
        shape, axis, keepdim = ctx.meta
        xp = backend.array_module(g)
        positions = xp.arange(shape[axis]).reshape([-1 if i == axis else 1 for i in range(len(shape))])
        onehot = positions == xp.expand_dims(indices, axis)
        gk = g if keepdim else xp.expand_dims(g, axis)
        return xp.where(onehot, gk, g.dtype.type(0)), None, None, None


class Var(Function):
    @staticmethod
    def forward(ctx, x, axes, correction, keepdim):
        mean = x.mean(axis=axes, keepdims=True)
        centered = x - mean
        n = _count(x.shape, axes)
        denom = builtins.max(n - correction, 0)
        ctx.save_for_backward(centered)
        ctx.meta = (axes, keepdim, denom)
        xp = backend.array_module(x)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = (centered * centered).sum(axis=axes, keepdims=keepdim) / xp.asarray(denom, x.dtype)
        return out.astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (centered,) = ctx.saved_tensors
        axes, keepdim, denom = ctx.meta
        with np.errstate(divide="ignore", invalid="ignore"):
            grad = _expand(g, centered.shape, axes, keepdim) * (2.0 / denom if denom else np.inf) * centered
        return grad.astype(g.dtype, copy=False)


class Std(Var):
    """The square root of :class:`Var`, with PyTorch's gradient where it is 0: zero (the chain rule
    would give 0 * inf = NaN there, e.g. for a row of equal values)."""

    @staticmethod
    def forward(ctx, x, axes, correction, keepdim):
        xp = backend.array_module(x)
        out = xp.sqrt(Var.forward(ctx, x, axes, correction, keepdim))
        ctx.std = out
        return out

    @staticmethod
    def backward(ctx, g):
        std = ctx.std
        with np.errstate(divide="ignore", invalid="ignore"):
            g_var = backend.array_module(g).where(std == 0, g.dtype.type(0), g / (2 * std))
        return Var.backward(ctx, g_var.astype(g.dtype, copy=False))


MaxMin = namedtuple("MaxMin", ["values", "indices"])


def _float_input(x):
    return x if backend.is_floating(x.dtype) else cast(x, backend.float32)


def sum(x: Tensor, dim=None, keepdim=False, dtype=None):  # noqa: A001 - PyTorch's name
    if dtype is not None:
        x = cast(x, dtype)
    elif x.dtype == backend.bool_:
        x = cast(x, backend.int64)
    return Sum.apply(x, normalize_axis("sum", dim, x.ndim), keepdim)


def mean(x: Tensor, dim=None, keepdim=False):
    if not backend.is_floating(x.dtype):
        raise TypeError(f"mean: input dtype must be floating point, got {x.dtype}")
    return Mean.apply(x, normalize_axis("mean", dim, x.ndim), keepdim)


def _check_nonempty(op, x, axes):
    if x._data.size == 0 or (axes is not None and any(x.shape[a] == 0 for a in axes)):
        raise ValueError(f"{op}: cannot reduce over an empty dimension of a tensor of shape {tuple(x.shape)}")


def amax(x, dim=None, keepdim=False):
    axes = normalize_axis("amax", dim, x.ndim)
    _check_nonempty("amax", x, axes)
    return Extreme.apply(x, axes, keepdim, True)


def amin(x, dim=None, keepdim=False):
    axes = normalize_axis("amin", dim, x.ndim)
    _check_nonempty("amin", x, axes)
    return Extreme.apply(x, axes, keepdim, False)


def _extreme_along(op, x, dim, keepdim, largest):
    (axis,) = normalize_axis(op, dim, x.ndim)
    _check_nonempty(op, x, (axis,))
    xp = x._xp
    indices = (xp.argmax if largest else xp.argmin)(x._data, axis=axis)
    values = ExtremeAlong.apply(x, axis, keepdim, indices)
    idx = xp.expand_dims(indices, axis) if keepdim else indices
    return MaxMin(values, Tensor._from_array(idx.astype(np.int64, copy=False)))


def max(x, dim=None, keepdim=False):  # noqa: A001 - PyTorch's name
    """``max(x)`` is the largest element; ``max(x, dim)`` is ``(values, indices)``."""
    if isinstance(dim, Tensor):
        from .elementwise import maximum

        return maximum(x, dim)
    return amax(x) if dim is None else _extreme_along("max", x, dim, keepdim, True)


def min(x, dim=None, keepdim=False):  # noqa: A001 - PyTorch's name
    if isinstance(dim, Tensor):
        from .elementwise import minimum

        return minimum(x, dim)
    return amin(x) if dim is None else _extreme_along("min", x, dim, keepdim, False)


def _spread(fn, op, x, dim, unbiased, keepdim, correction):
    """var / std: PyTorch's ``unbiased`` or ``correction`` (default 1) resolved, then ``fn`` applied."""
    if unbiased is not None and correction is not None:
        raise ValueError(f"{op}: give unbiased or correction, not both")
    if correction is None:
        correction = 1 if unbiased in (None, True) else 0
    x = _float_input(x)
    return fn.apply(x, normalize_axis(op, dim, x.ndim), correction, keepdim)


def var(x, dim=None, unbiased=None, keepdim=False, correction=None):
    return _spread(Var, "var", x, dim, unbiased, keepdim, correction)


def std(x, dim=None, unbiased=None, keepdim=False, correction=None):
    return _spread(Std, "std", x, dim, unbiased, keepdim, correction)


def _arg(op, x, dim, keepdim, largest):
    xp = x._xp
    fn = xp.argmax if largest else xp.argmin
    if dim is None:
        out = fn(x._data.reshape(-1))
        if keepdim:
            out = out.reshape((1,) * x.ndim)
    else:
        (axis,) = normalize_axis(op, dim, x.ndim)
        out = fn(x._data, axis=axis)
        if keepdim:
            out = xp.expand_dims(out, axis)
    return Tensor._from_array(xp.asarray(out).astype(np.int64, copy=False))


def argmax(x, dim=None, keepdim=False):
    return _arg("argmax", x, dim, keepdim, True)


def argmin(x, dim=None, keepdim=False):
    return _arg("argmin", x, dim, keepdim, False)
