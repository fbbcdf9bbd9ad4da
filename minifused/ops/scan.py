"""Scans along one dim: cumsum and cumprod (integer and bool inputs accumulate in int64, as in PyTorch)."""
from __future__ import annotations

import numpy as np

from .. import backend
from ..autograd import Function
from ..tensor import Tensor
from .reduce import _int64_if_integral, dim_index


def _flip_cumsum(a, axis):
    """Sums from the end of ``axis`` back (the gradient of cumsum)."""
    xp = backend.array_module(a)
    return xp.flip(xp.cumsum(xp.flip(a, axis), axis=axis, dtype=a.dtype), axis)


class CumSum(Function):
    @staticmethod
    def forward(ctx, x, axis):
        ctx.axis = axis
        return backend.array_module(x).cumsum(x, axis=axis, dtype=x.dtype)

    @staticmethod
    def backward(ctx, g):
        return _flip_cumsum(g, ctx.axis), None


class CumProd(Function):
    """Where the input has no zero before position i, d out_k / d x_i = out_k / x_i; at the first zero of a
    row the products run over the other elements (the cumulative product with that zero taken as 1);
    after it every gradient is 0."""

    @staticmethod
    def forward(ctx, x, axis):
        out = backend.array_module(x).cumprod(x, axis=axis, dtype=x.dtype)
        ctx.save_for_backward(x, out)
        ctx.axis = axis
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        axis = ctx.axis
        xp = backend.array_module(g)
        zeros_seen = xp.cumsum(x == 0, axis=axis, dtype=np.int64)
        before = zeros_seen == 0
        first = (x == 0) & (zeros_seen == 1)
        one, zero = x.dtype.type(1), x.dtype.type(0)
        grad = xp.where(before, _flip_cumsum(g * out, axis) / xp.where(before, x, one), zero)
        at_zero = _flip_cumsum(g * xp.cumprod(xp.where(first, one, x), axis=axis, dtype=x.dtype), axis)
        grad = xp.where(first, at_zero, grad)
        return grad.astype(g.dtype, copy=False), None


def _scan(fn, op, x, dim, dtype):
    x = _int64_if_integral(x, dtype)
    axis = dim_index(op, dim, x.ndim)
    if x.ndim == 0:
        return fn.apply(x.reshape(1), 0).reshape(())
    return fn.apply(x, axis)


def cumsum(x: Tensor, dim, dtype=None):
    """Running sums along ``dim``; integer and bool inputs give int64."""
    return _scan(CumSum, "cumsum", x, dim, dtype)


def cumprod(x: Tensor, dim, dtype=None):
    """Running products along ``dim``; integer and bool inputs give int64. Zeros in the input are fine."""
    return _scan(CumProd, "cumprod", x, dim, dtype)
