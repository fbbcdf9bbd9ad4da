"""Scans along one dim: cumsum and cumprod (integer and bool inputs accumulate in int64, as in PyTorch),
cummax and cummin."""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import backend
from ..autograd import Function
from ..backend import InputTypeError
from ..tensor import Tensor
from ._common import autocast_float32_on_cuda, cast, dense_results
from .index import _grid
from .indexing import EmbedItem, GetItem, accumulate
from .reduce import _alias, _int64_if_integral, dim_index
from .shape import Cat


def _running_sum(a, axis):
    """``cumsum`` in ``a``'s dtype, added in :func:`_scan_dtype` and each sum rounded once, as PyTorch's; 16-bit
    floats so on either device (NumPy's running sum in float16 stops growing at 2048 for ones; CuPy's scan kernel
    does not compile for bfloat16)."""
    xp = backend.array_module(a)
    acc = _scan_dtype(a)
    if acc is None:
        return xp.cumsum(a, axis=axis, dtype=a.dtype)
    return xp.cumsum(a, axis=axis, dtype=acc).astype(a.dtype)


def _scan_dtype(a):
    """The dtype PyTorch's scans accumulate ``a`` in where it is wider than a's: float32 for 16-bit floats, and
    float64 for float32 on the host (its CPU kernels' accumulator type; its CUDA ones keep float32), else None."""
    if a.dtype in (backend.float16, backend.bfloat16):
        return np.float32
    return np.float64 if a.dtype == np.float32 and not backend.is_cuda_array(a) else None


def _running_product(a, axis):
    """``cumprod`` in ``a``'s dtype, multiplied in :func:`_scan_dtype` and rounded once (as :func:`_running_sum`
    adds)."""
    xp = backend.array_module(a)
    acc = _scan_dtype(a)
    if acc is None:
        return xp.cumprod(a, axis=axis, dtype=a.dtype)
    return xp.cumprod(a, axis=axis, dtype=acc).astype(a.dtype)


def _flip_cumsum(a, axis):
    """Sums from the end of ``axis`` back (the gradient of cumsum)."""
    xp = backend.array_module(a)
    return xp.flip(_running_sum(xp.flip(a, axis), axis), axis)


@dense_results
class CumSum(Function):
    @staticmethod
    def forward(ctx, x, axis):
        ctx.axis = axis
        return _running_sum(x, axis)

    @staticmethod
    def backward(ctx, g):
        return _flip_cumsum(g, ctx.axis), None

    @staticmethod
    def backward_graph(ctx, g):
        return CumSum.apply(g.flip(ctx.axis), ctx.axis).flip(ctx.axis), None


@dense_results
class CumProd(Function):
    """Where the input has no zero before position i, d out_k / d x_i = out_k / x_i; at the first zero of a
    row the products run over the other elements (the cumulative product with that zero taken as 1);
    after it every gradient is 0. Computed as PyTorch's cumprod_backward, so that infinities give the same NaNs:
    without any zero in the input ``reversed_cumsum(g * out) / x``; else the sums before a row's first zero
    taken over those positions alone, and the first zero's ``out[z - 1] * sum_k g_k * prod(x[z + 1:k + 1])``
    over k up to the second zero (a product run to the row's end)."""

    @staticmethod
    def forward(ctx, x, axis):
        out = _running_product(x, axis)
        ctx.save_for_backward(x, out)
        ctx.axis = axis
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        axis = ctx.axis
        xp = backend.array_module(g)
        if x.shape[axis] <= 1:  # (one element: the gradient as it is, as PyTorch's)
            return g, None
        w = g * out
        is_zero = x == 0
        with np.errstate(divide="ignore", invalid="ignore"):
            if not is_zero.any():
                return (_flip_cumsum(w, axis) / x).astype(g.dtype, copy=False), None
            zeros_seen = xp.cumsum(is_zero, axis=axis, dtype=np.int64)
            zero, one = x.dtype.type(0), x.dtype.type(1)
            before = zeros_seen == 0
            grad = backend.where(before, _flip_cumsum(backend.where(before, w, zero), axis) / x, zero)
            first = is_zero & (zeros_seen == 1)
            between = (zeros_seen == 1) & ~first
            total = (_running_product(backend.where(between, x, one), axis) *
                     backend.where(zeros_seen == 1, g, zero)).sum(axis=axis, keepdims=True)
            # out just before the first zero (1 where it leads the row)
            at = (slice(None),) * axis
            shifted = xp.concatenate([xp.ones_like(out[at + (slice(0, 1),)]), out[at + (slice(0, -1),)]], axis=axis)
            z = xp.expand_dims(xp.argmax(first, axis=axis), axis)  # (where the first zero is)
            grad = backend.where(first, total * xp.take_along_axis(shifted, z, axis=axis), grad)
        return grad.astype(g.dtype, copy=False), None

    @staticmethod
    def backward_graph(ctx, g):
        """The gradient ``prod(x[:i]) * t[i]`` with ``t[i] = g[i] + x[i + 1] * t[i + 1]`` (the sum over k >= i of
        ``g[k] * prod(x[i + 1:k + 1])``), which divides by no x: the same function at zeros as elsewhere, so that its
        derivatives are exact there too. t by a doubling scan of that recurrence (log2(n) whole-tensor steps, no host
        sync): after each step ``t[i] = total[i] + coef[i] * t[i + step]``, t being 0 past the end."""
        x, out = ctx.saved_tensors
        axis, n = ctx.axis, x.shape[ctx.axis]
        half = (backend.float16, backend.bfloat16)  # (in float32, as the forward multiplies)
        g, x, out = (cast(t, np.float32) if t.dtype in half else t
                     for t in (g, ctx.graph_input(0, x), ctx.graph_output(out)))
        total, coef, step = g, _shifted(x, 1, axis, 0.0), 1
        while step < n:
            total = total + coef * _shifted(total, step, axis, 0.0)
            if 2 * step < n:
                coef = coef * _shifted(coef, step, axis, 0.0)
            step *= 2
        return _shifted(out, -1, axis, 1.0) * total, None


def _shifted(t, step, axis, fill):
    """``t`` moved back by ``step`` along ``axis`` (element i is t's i + step; a negative step moves it on),
    ``fill`` where that is past an end; recorded."""
    n = t.shape[axis]
    k = min(abs(step), n)
    pad = Tensor._from_array(t._xp.full(t.shape[:axis] + (k,) + t.shape[axis + 1:], fill, t.dtype), False)
    kept = GetItem.apply(t, (slice(None),) * axis + (slice(k, None) if step > 0 else slice(0, n - k),))
    return Cat.apply(*([kept, pad] if step > 0 else [pad, kept]), axis=axis)


def _scan(fn, op, x, dim, dtype):
    if dtype is None and fn in (CumSum, CumProd):  # (on PyTorch's cuda autocast float32 list without a dtype)
        (x,) = autocast_float32_on_cuda(x)
    x = _int64_if_integral(x, dtype)
    axis = dim_index(op, dim, x.ndim)
    if x.ndim == 0:
        return fn.apply(x.reshape(1), 0).reshape(())
    return fn.apply(x, axis)


def cumsum(input: Tensor, dim=None, dtype=None, *, axis=None):
    """Running sums along ``dim`` (or its alias ``axis``); integer and bool inputs give int64."""
    dim = _alias("cumsum", dim, axis)
    if dim is None:
        raise InputTypeError("cumsum(): missing the required argument 'dim'")
    return _scan(CumSum, "cumsum", input, dim, dtype)


def cumprod(input: Tensor, dim, dtype=None):
    """Running products along ``dim``; integer and bool inputs give int64. Zeros in the input are fine."""
    return _scan(CumProd, "cumprod", input, dim, dtype)



def _running_extreme(x, axis, largest):
    """(running max or min along ``axis``, the index where each was reached): a doubling scan of shifted
    comparisons (log2(n) whole-array steps, on NumPy and CuPy alike). On ties the later index wins, and NaN
    beats any number (the running value stays NaN from the first NaN on, indexed by the latest NaN), as in
    PyTorch."""
    xp = backend.array_module(x)
    n = x.shape[axis]
    shape = [1] * x.ndim
    shape[axis] = n
    values = backend.copy(x)
    indices = backend.copy(xp.broadcast_to(xp.arange(n).reshape(shape), x.shape))
    nan_aware = backend.is_floating(x.dtype)
    step = 1
    while step < n:
        later = tuple(slice(step, None) if d == axis else slice(None) for d in range(x.ndim))
        earlier = tuple(slice(None, n - step) if d == axis else slice(None) for d in range(x.ndim))
        prev_v, prev_i = backend.copy(values[earlier]), backend.copy(indices[earlier])  # the slices overlap the writes
        cur = values[later]
        better = prev_v > cur if largest else prev_v < cur
        if nan_aware:
            better |= xp.isnan(prev_v) & ~xp.isnan(cur)
        values[later] = backend.where(better, prev_v, values[later])
        indices[later] = backend.where(better, prev_i, indices[later])
        step *= 2
    return values, indices


@dense_results
class CumExtreme(Function):
    """cummax / cummin values; each output's gradient goes to the element it came from."""

    @staticmethod
    def forward(ctx, x, axis, indices):
        ctx.meta = (x.shape, axis)
        ctx.save_for_backward(indices)
        return backend.array_module(x).take_along_axis(x, indices, axis)

    @staticmethod
    def backward(ctx, g):
        (indices,) = ctx.saved_tensors
        shape, axis = ctx.meta
        xp = backend.array_module(g)
        n = shape[axis]
        if g.size == 0:  # (no element: no -1 to reshape with)
            return xp.zeros(shape, g.dtype), None, None
        rows_index = xp.moveaxis(indices, axis, -1).reshape(-1, n)
        rows = xp.arange(rows_index.shape[0]).reshape(-1, 1)
        grad = accumulate(rows_index.shape, g.dtype, (rows, rows_index), xp.moveaxis(g, axis, -1).reshape(-1, n))
        moved_shape = tuple(s for d, s in enumerate(shape) if d != axis) + (n,)
        return xp.moveaxis(grad.reshape(moved_shape), -1, axis), None, None

    @staticmethod
    def backward_graph(ctx, g):
        (indices,) = ctx.saved_tensors
        shape, axis = ctx.meta
        return EmbedItem.apply(g, shape, _grid(indices, axis), True), None, None


CumMax = namedtuple("CumMax", ["values", "indices"])


def _cum_extreme(op, x, dim, largest):
    axis = dim_index(op, dim, x.ndim)
    if x.ndim == 0:
        out = _cum_extreme(op, x.reshape(1), 0, largest)
        return CumMax(out.values.reshape(()), out.indices.reshape(()))
    _, indices = _running_extreme(x._data, axis, largest)
    return CumMax(CumExtreme.apply(x, axis, indices), Tensor._from_array(indices.astype(np.int64, copy=False)))


def cummax(input: Tensor, dim):
    """``(values, indices)``: the running maximum along ``dim`` and where each was reached."""
    return _cum_extreme("cummax", input, dim, True)


def cummin(input: Tensor, dim):
    """``(values, indices)``: the running minimum along ``dim`` and where each was reached."""
    return _cum_extreme("cummin", input, dim, False)
