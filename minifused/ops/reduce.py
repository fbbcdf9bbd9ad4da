"""Reductions over axes: sum, mean, prod, max/min (and the amax/amin forms), var, std, argmax/argmin,
logsumexp, any/all, count_nonzero, the vector norms (the scans: ops/scan.py).

PyTorch's conventions throughout: ``dim`` an int, a tuple or None (every dim); a 0-d tensor takes dim 0
and -1 (reducing nothing); integer and bool inputs sum and multiply in int64."""
from __future__ import annotations

import builtins
import math
import numbers
import warnings
from collections import namedtuple

import numpy as np

from .. import backend
from ..autograd import Function
from ..tensor import Tensor
from ._common import (autocast_float32, autocast_float32_on_cuda, cast, check_bools, dense, dense_results,
                      dim_index, leading_sum, normalize_axis, trailing_broadcast, trailing_sum)
from .elementwise import where, zero_linked
from .shape import Reshape, cat
from ..backend import InputError, InputTypeError


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


def _axes(op, dim, x, keepdim):
    """(x, axes, keepdim) with ``dim`` as a tuple of axes (None: every axis); an empty tuple means every
    dim, as in PyTorch's sum and mean. A 0-d tensor with a dim (0 or -1) becomes one element of 1-d reduced
    over axis 0: the array modules need no empty axis tuple."""
    check_bools(op, keepdim=keepdim)
    axes = normalize_axis(op, dim, x.ndim)
    if axes is None:
        return x, None, keepdim
    if len(set(axes)) != len(axes):
        raise RuntimeError(f"{op}: dim {dim} names a dimension more than once")
    if x.ndim == 0:
        return Reshape.apply(x, (1,)), (0,), False
    return x, axes or None, keepdim


_HALF = (backend.float16, backend.bfloat16)


def _acc_dtype(a):
    """float32 for a 16-bit float array on the host, None otherwise: NumPy adds bfloat16 (and float16 along any
    but a contiguous last axis) in the array's own precision, so 1000 bfloat16 ones sum to 256; PyTorch adds them
    in float32 and rounds the result once. The GPU's reductions are left as they are."""
    return np.float32 if a.dtype in _HALF and not backend.is_cuda_array(a) else None


def _wide_sum(a, axes, keepdims):
    """``a.sum``, 16-bit floats on the host added in float32 (:func:`_acc_dtype`), in ``a``'s dtype."""
    acc = _acc_dtype(a)
    if acc is None:
        return a.sum(axis=axes, keepdims=keepdims)
    return a.sum(axis=axes, keepdims=keepdims, dtype=acc).astype(a.dtype)


def _alias(op, dim, axis):
    """``dim``, or ``axis``, PyTorch's NumPy-style alias of it (not both)."""
    if axis is None:
        return dim
    if dim is not None:
        raise InputTypeError(f"{op}(): got both dim and its alias axis")
    return axis


_NO_DIM = object()  # a dim not given (PyTorch's sum / mean take keepdim only with a dim, logsumexp needs one)


def _dim_given(op, dim, axis, keepdim=False, needed=False):
    """``dim`` (or its alias ``axis``), None for every dimension where neither is given; but as PyTorch's,
    keepdim=True without a dim, or no dim where the op needs one, is a TypeError."""
    if dim is _NO_DIM:
        if axis is None and needed:
            raise InputTypeError(f"{op}: expected a dim (an int or a tuple of ints), got none")
        if axis is None and keepdim:
            raise InputTypeError(f"{op}: expected a dim with keepdim=True (dim=None reduces every dimension), got "
                                 f"keepdim without a dim")
        dim = None
    return _alias(op, dim, axis)


def _int64_if_integral(x, dtype):
    """``x`` cast to ``dtype`` if given, else integer and bool inputs to int64 (PyTorch's sum, prod, cumsum)."""
    if dtype is not None:
        return cast(x, dtype)
    return x if backend.is_floating(x.dtype) or x.dtype.kind == "c" else cast(x, backend.int64)


def _count(shape, axes):
    return int(np.prod([shape[a] for a in axes] if axes is not None else shape, dtype=np.int64))


def _trailing(ndim, axes):
    """How many trailing axes ``axes`` are, where they are those of an ``ndim``-d array but not all of its axes; else
    0."""
    if axes is None or not 0 < len(axes) < ndim or sorted(axes) != list(range(ndim - len(axes), ndim)):
        return 0
    return len(axes)


def _kernel_sum(x, axes, keepdim, scale=1.0):
    """``x``'s sum over ``axes`` times ``scale`` on the column-sum kernels where the axes lead and those take x
    (:func:`._common.leading_sum`), or on the row-sum kernel where they trail (:func:`._common.trailing_sum`), else
    None."""
    if axes is None or len(axes) == x.ndim:
        return None
    if sorted(axes) == list(range(len(axes))):
        out = leading_sum(x, len(axes), scale)
        return out.reshape((1,) * len(axes) + out.shape) if out is not None and keepdim else out
    trail = _trailing(x.ndim, axes)
    out = trailing_sum(x, trail, scale) if trail else None
    return out.reshape(out.shape + (1,) * trail) if out is not None and keepdim else out


@dense_results
class Sum(Function):
    @staticmethod
    def forward(ctx, x, axes, keepdim):
        ctx.meta = (x.shape, axes, keepdim)
        out = _kernel_sum(x, axes, keepdim)
        return _wide_sum(x, axes, keepdim) if out is None else out

    @staticmethod
    def backward(ctx, g):
        shape, axes, keepdim = ctx.meta
        trail = _trailing(len(shape), axes)
        out = trailing_broadcast(g, shape, trail) if trail else None
        if out is not None:
            return out
        xp = backend.array_module(g)
        return dense(xp.broadcast_to(_expand(g, shape, axes, keepdim), shape))

    @staticmethod
    def backward_graph(ctx, g):
        shape, axes, keepdim = ctx.meta
        return _expand(g, shape, axes, keepdim).expand(shape)


@dense_results
class Mean(Function):
    @staticmethod
    def forward(ctx, x, axes, keepdim):
        ctx.meta = (x.shape, axes, keepdim)
        if x.size == 0 and _count(x.shape, axes) == 0:  # the mean of nothing: NaN, silently as PyTorch's
            return backend.array_module(x).full(x.sum(axis=axes, keepdims=keepdim).shape, np.nan, x.dtype)
        out = _kernel_sum(x, axes, keepdim, 1.0 / builtins.max(_count(x.shape, axes), 1))
        if out is not None:
            return out
        acc = _acc_dtype(x)
        return x.mean(axis=axes, keepdims=keepdim, dtype=acc).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        shape, axes, keepdim = ctx.meta
        scale = 1.0 / builtins.max(_count(shape, axes), 1)
        trail = _trailing(len(shape), axes)
        out = trailing_broadcast(g, shape, trail, scale) if trail else None
        if out is not None:
            return out
        xp = backend.array_module(g)
        return dense(xp.broadcast_to(_expand(g, shape, axes, keepdim) * scale, shape))

    @staticmethod
    def backward_graph(ctx, g):
        shape, axes, keepdim = ctx.meta
        return (_expand(g, shape, axes, keepdim) * (1.0 / builtins.max(_count(shape, axes), 1))).expand(shape)


@dense_results
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

    @staticmethod
    def backward_graph(ctx, g):
        x, out = ctx.saved_tensors
        axes, keepdim = ctx.meta
        hit = x == _expand(out, x.shape, axes, keepdim)
        count = hit.sum(axis=axes, keepdims=True)
        return _constant(hit, g.dtype) * (_expand(g, x.shape, axes, keepdim) / _constant(count, g.dtype))


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
        onehot, axis, keepdim = ExtremeAlong._picked(ctx)
        gk = g if keepdim else backend.array_module(g).expand_dims(g, axis)
        return backend.where(onehot, gk, g.dtype.type(0)), None, None, None

    @staticmethod
    def backward_graph(ctx, g):
        onehot, axis, keepdim = ExtremeAlong._picked(ctx)
        return where(Tensor._from_array(onehot), g if keepdim else g.unsqueeze(axis), 0), None, None, None

    @staticmethod
    def _picked(ctx):
        """Where along the axis each picked element was (a bool array of x's shape), the axis and keepdim."""
        (indices,) = ctx.saved_tensors
        shape, axis, keepdim = ctx.meta
        xp = backend.array_module(indices)
        positions = xp.arange(shape[axis]).reshape([-1 if i == axis else 1 for i in range(len(shape))])
        return positions == xp.expand_dims(indices, axis), axis, keepdim


class Evenly(Function):
    """A full reduction's value ``out`` (max, min, median of every element), its gradient shared evenly among the
    elements equal to it, NaN counting as equal to NaN: PyTorch's rule for these (amax and amin compare with
    == alone, so a NaN result gives NaN gradients there)."""

    @staticmethod
    def forward(ctx, x, out):
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        hit = Evenly._hits(*ctx.saved_tensors)
        with np.errstate(divide="ignore", invalid="ignore"):  # (an empty input: an empty gradient)
            return (hit * (g / hit.sum())).astype(g.dtype, copy=False), None

    @staticmethod
    def backward_graph(ctx, g):
        hit = Evenly._hits(*ctx.saved_tensors)
        return _constant(hit, g.dtype) * (g / _constant(hit.sum(), g.dtype)), None

    @staticmethod
    def _hits(x, out):
        hit = x == out
        if backend.is_floating(x.dtype):
            xp = backend.array_module(x)
            hit |= xp.isnan(x) & xp.isnan(out)
        return hit


@dense_results
class Var(Function):
    @staticmethod
    def forward(ctx, x, axes, correction, keepdim):
        return Var.wide(ctx, x, axes, correction, keepdim).astype(x.dtype, copy=False)

    @staticmethod
    def wide(ctx, x, axes, correction, keepdim):
        """The variance in float32 for 16-bit inputs, on either device, as PyTorch's: their divisor past 65504
        elements, and the square of a deviation past 256 in float16, would be inf."""
        xp = backend.array_module(x)
        wide = np.float32 if x.dtype in _HALF else x.dtype
        x = x.astype(wide, copy=False)
        # (an empty input's mean is NaN without NumPy's "Mean of empty slice" warning)
        mean = x.mean(axis=axes, keepdims=True) if x.size else x.sum(axis=axes, keepdims=True) * x.dtype.type(np.nan)
        centered = x - mean
        dof = _count(x.shape, axes) - correction
        ctx.save_for_backward(centered)
        # the forward divides by max(dof, 0), but PyTorch's backward by dof itself: with correction past the count,
        # var(x, correction=5) of 4 values is inf and its gradient 2 * (x - mean) / -1 (std's 0)
        ctx.meta = (axes, keepdim, dof)
        with np.errstate(divide="ignore", invalid="ignore"):
            squares = (centered * centered).sum(axis=axes, keepdims=keepdim)
            return squares.astype(wide, copy=False) / xp.asarray(builtins.max(dof, 0), wide)

    @staticmethod
    def backward(ctx, g):
        (centered,) = ctx.saved_tensors
        axes, keepdim, denom = ctx.meta
        with np.errstate(divide="ignore", invalid="ignore"):  # (the scale taken in centered's precision first)
            if axes is None and denom <= 0:
                grad = Var._no_dof(centered) * g
            else:
                grad = centered * (2.0 / denom if denom else np.inf) * _expand(g, centered.shape, axes, keepdim)
        return grad.astype(g.dtype, copy=False)

    @staticmethod
    def _no_dof(centered):
        """PyTorch's gradient of a variance over every element with no degrees of freedom left (correction at or
        past the count): inf, NaN where an element is the mean (inf * 0), whatever the deviation's sign."""
        return backend.where(centered == 0, centered.dtype.type(np.nan), centered.dtype.type(np.inf))

    @staticmethod
    def backward_graph(ctx, g):
        (centered,) = ctx.saved_tensors
        axes, keepdim, denom = ctx.meta
        # x as a graph tensor: its values enter only through x - mean(x), which centering again leaves as it is,
        # so the saved deviations stand in for them (x itself is not kept)
        if axes is None and denom <= 0:
            return cast(_constant(Var._no_dof(centered), centered.dtype) * g, g.dtype)
        x = cast(ctx.graph_input(0, centered), centered.dtype)
        grad = (x - x.mean(axes, keepdim=True)) * (2.0 / denom if denom else math.inf)
        return cast(grad * _expand(g, centered.shape, axes, keepdim), g.dtype)


@dense_results
class Std(Var):
    """The square root of :class:`Var`, with PyTorch's gradient where it is 0: zero (the chain rule
    would give 0 * inf = NaN there, e.g. for a row of equal values)."""

    @staticmethod
    def forward(ctx, x, axes, correction, keepdim):
        xp = backend.array_module(x)
        out = xp.sqrt(Var.wide(ctx, x, axes, correction, keepdim)).astype(x.dtype, copy=False)
        ctx.std = out
        return out

    @staticmethod
    def backward(ctx, g):
        std = ctx.std
        with np.errstate(divide="ignore", invalid="ignore"):
            g_var = backend.where(std == 0, g.dtype.type(0), g / (2 * std))
        return Var.backward(ctx, g_var.astype(g.dtype, copy=False))

    @staticmethod
    def backward_graph(ctx, g):
        value = backend.array_module(ctx.std).asarray(ctx.std)  # (a full reduction's is a NumPy scalar)
        zero = value == 0
        std = ctx.graph_output(value) + _constant(zero, value.dtype)  # (1 where it is 0: no division by 0)
        return Var.backward_graph(ctx, g / (2 * std) * _constant(~zero, g.dtype))


MaxMin = namedtuple("MaxMin", ["values", "indices"])  # what max, min and median along a dim return


def _constant(a, dtype):
    """Array ``a`` (a mask, a count) as a constant tensor of ``dtype``, for a backward_graph."""
    return Tensor._from_array(backend.array_module(a).asarray(a).astype(dtype, copy=False))


def _float_input(x):
    return x if backend.is_floating(x.dtype) else cast(x, backend.float32)


def sum(input: Tensor, dim=_NO_DIM, keepdim=False, dtype=None, *, axis=None):  # noqa: A001 - PyTorch's name
    dim = _dim_given("sum", dim, axis, keepdim)
    if dtype is None:  # (on PyTorch's cuda autocast float32 list where no dtype is given)
        (input,) = autocast_float32_on_cuda(input)
    input = _int64_if_integral(input, dtype)
    out = Sum.apply(*_axes("sum", dim, input, keepdim))
    # NumPy sums narrow integers (and bool) in a wider type: an asked-for dtype is the result's, as PyTorch's
    return out if out.dtype == input.dtype or backend.is_floating(input.dtype) else cast(out, input.dtype)



def sum_to_size(x, *size, **kw):
    """``x`` summed down to ``size``, a shape that broadcasts to x's (the leading dimensions it lacks, and
    those where it has 1, summed), as ``Tensor.sum_to_size``; the shape as ints, one tuple or ``size=``."""
    if kw:
        if set(kw) != {"size"} or size:
            raise InputTypeError(f"sum_to_size: expected the size as ints, a tuple or size=, got {sorted(kw)}")
        size = (kw["size"],)
    size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else tuple(size)
    try:
        expandable = len(size) <= x.ndim and np.broadcast_shapes(size, x.shape) == tuple(x.shape)
    except (ValueError, TypeError):
        expandable = False
    if not expandable:
        raise RuntimeError(f"sum_to_size: size {list(size)} is not expandable to size {list(x.shape)}")
    lead = x.ndim - len(size)
    dims = list(range(lead)) + [lead + i for i, n in enumerate(size) if n == 1 and x.shape[lead + i] != 1]
    return Reshape.apply(sum(x, dims, keepdim=True), size) if dims else x


def mean(input: Tensor, dim=_NO_DIM, keepdim=False, dtype=None, *, axis=None):
    dim = _dim_given("mean", dim, axis, keepdim)
    if dtype is not None:
        input = cast(input, dtype)
    if not backend.is_floating(input.dtype):
        raise InputTypeError(f"mean: could not infer output dtype; input dtype must be floating point, got "
                             f"{input.dtype} (pass dtype= or cast the input)")
    return Mean.apply(*_axes("mean", dim, input, keepdim))


class EmptyDimError(InputError, IndexError):
    """A reduction without an identity over an empty dim: PyTorch's IndexError ("Expected reduction dim 0 to have
    non-zero size"), and the ValueError / RuntimeError of minifused's other bad input."""


def _check_nonempty(op, x, axes):
    """A max/min-like reduction needs an element along every reduced axis (an empty input reduced along a
    non-empty axis gives an empty result, as PyTorch's)."""
    if (x._data.size == 0 if axes is None else builtins.any(x.shape[a] == 0 for a in axes)):
        raise EmptyDimError(f"{op}: cannot reduce over an empty dimension of a tensor of shape {tuple(x.shape)}")


def _extreme(op, input, dim, keepdim, largest):
    input, axes, keepdim = _axes(op, dim, input, keepdim)
    _check_nonempty(op, input, axes)
    return Extreme.apply(input, axes, keepdim, largest)


def amax(input, dim=None, keepdim=False):
    return _extreme("amax", input, dim, keepdim, True)


def amin(input, dim=None, keepdim=False):
    return _extreme("amin", input, dim, keepdim, False)


def _extreme_along(op, x, dim, keepdim, largest):
    check_bools(op, keepdim=keepdim)
    axis = dim_index(op, dim, x.ndim)
    xp = x._xp
    if x.ndim == 0:  # the element itself, at index 0
        return MaxMin(Reshape.apply(x, ()), Tensor._from_array(xp.zeros((), np.int64)))
    _check_nonempty(op, x, (axis,))
    return _pick_along(x, axis, keepdim, (xp.argmax if largest else xp.argmin)(x._data, axis=axis))


def _extreme_all(op, x, largest):
    """The largest (smallest) element, its gradient shared among the elements equal to it (:class:`Evenly`)."""
    _check_nonempty(op, x, None)
    return Evenly.apply(x, x._xp.asarray(x._data.max() if largest else x._data.min()))


def max(input, dim=None, keepdim=False, *, other=None):  # noqa: A001 - PyTorch's name
    """``max(x)`` is the largest element; ``max(x, dim)`` is ``(values, indices)``; ``max(x, other)`` (or
    ``other=``) the elementwise maximum."""
    if other is not None or isinstance(dim, Tensor):
        from .elementwise import maximum

        return maximum(input, dim if other is None else other)
    return _extreme_all("max", input, True) if dim is None else _extreme_along("max", input, dim, keepdim, True)


def min(input, dim=None, keepdim=False, *, other=None):  # noqa: A001 - PyTorch's name
    if other is not None or isinstance(dim, Tensor):
        from .elementwise import minimum

        return minimum(input, dim if other is None else other)
    return _extreme_all("min", input, False) if dim is None else _extreme_along("min", input, dim, keepdim, False)


def refuse_bool(op, x, exc=NotImplementedError):
    """PyTorch has no bool kernel for some selections: argmax / argmin raise a RuntimeError, median / nanmedian /
    kthvalue a NotImplementedError (mode, max, min and sort take bool)."""
    if isinstance(x, Tensor) and x.dtype == backend.bool_:
        raise exc(f"{op}: expected a tensor of a numeric dtype, got a bool tensor (cast it with .long() or .float())")


def median(input, dim=None, keepdim=False):
    """``median(x)`` is the lower median of every element (NaN for no element), its gradient shared among the
    elements equal to it; ``median(x, dim)`` is ``(values, indices)`` along ``dim``, the gradient going to the
    element picked, as in PyTorch."""
    refuse_bool("median", input)
    check_bools("median", keepdim=keepdim)
    if dim is None:
        xp = input._xp
        if input.numel() == 0 and backend.is_floating(input.dtype):
            return Evenly.apply(input, xp.full((), np.nan, input.dtype))
        _check_nonempty("median", input, None)
        flat = input._data.reshape(-1)
        return Evenly.apply(input, xp.take(flat, _median_index(flat, 0)).reshape(()))
    axis = dim_index("median", dim, input.ndim)
    if input.ndim == 0:
        return MaxMin(Reshape.apply(input, ()), Tensor._from_array(input._xp.zeros((), np.int64)))
    _check_nonempty("median", input, (axis,))
    return _pick_along(input, axis, keepdim, _median_index(input._data, axis))


def _median_index(a, axis):
    """Where the lower median of ``a`` along ``axis`` is; in a row with NaN, its first NaN (PyTorch's median)."""
    xp = backend.array_module(a)
    at = xp.take(_stable_argsort(a, axis), (a.shape[axis] - 1) // 2, axis=axis)
    if not backend.is_floating(a.dtype):
        return at
    nan = xp.isnan(a)
    return backend.where(nan.any(axis=axis), nan.argmax(axis=axis), at)


def _stable_argsort(a, axis):
    """Ties in their order (CuPy's sort is always stable and takes no other ``kind``)."""
    if a.dtype == backend.bfloat16:  # (exact) NumPy's sort of it misplaces NaN, CuPy's has no bfloat16
        a = a.astype(np.float32)
    if not isinstance(a, np.ndarray):
        return a.argsort(axis=axis)
    return np.argsort(a, axis=axis, kind="stable")


def _pick_along(x, axis, keepdim, indices):
    values = ExtremeAlong.apply(x, axis, keepdim, indices)
    idx = x._xp.expand_dims(indices, axis) if keepdim else indices
    return MaxMin(values, Tensor._from_array(idx.astype(np.int64, copy=False)))


def _spread(fn, op, x, dim, unbiased, keepdim, correction):
    """var / std: PyTorch's ``unbiased`` or ``correction`` (default 1) resolved, then ``fn`` applied."""
    if unbiased is not None and correction is not None:
        raise InputError(f"{op}: give unbiased or correction, not both")
    if unbiased is not None:
        check_bools(op, unbiased=unbiased)
    if correction is None:
        correction = 1 if unbiased in (None, True) else 0
    if not backend.is_floating(x.dtype):
        raise InputTypeError(f"{op}: only floating point inputs have a variance (as PyTorch's), got {x.dtype}; "
                             f"cast the input (.float())")
    x, axes, keepdim = _axes(op, dim, x, keepdim)
    # (PyTorch's count is the input's numel over the result's: 0 for any empty input)
    if (_count(x.shape, axes) if x._data.size else 0) - correction <= 0:
        warnings.warn(f"{op}(): degrees of freedom is <= 0. Correction should be strictly less than the reduction "
                      f"factor (input numel divided by output numel).", UserWarning, stacklevel=3)
    return fn.apply(x, axes, correction, keepdim)


def _unbiased_first(dim, unbiased):
    """PyTorch's ``var(input, unbiased)`` form: a bool where ``dim`` goes is ``unbiased`` over all elements."""
    return (None, dim) if isinstance(dim, bool) and unbiased is None else (dim, unbiased)


def var(input, dim=None, unbiased=None, keepdim=False, correction=None, *, axis=None):
    return _spread(Var, "var", input, *_unbiased_first(_alias("var", dim, axis), unbiased), keepdim, correction)


def std(input, dim=None, unbiased=None, keepdim=False, correction=None, *, axis=None):
    return _spread(Std, "std", input, *_unbiased_first(_alias("std", dim, axis), unbiased), keepdim, correction)


def _welford_mean(input, dim, keepdim):
    """The mean of ``var_mean`` / ``std_mean``: PyTorch's CPU kernel takes it by Welford's update, m += (x - m) / k,
    so an infinity with any element after it (in the reduced elements' order) gives inf - inf = NaN where ``mean``
    gives +-inf. That NaN is added to the mean (the gradient stays mean's)."""
    out = mean(input, dim, keepdim)
    x = input._data
    if not backend.is_floating(x.dtype) or backend.is_cuda_array(x) or x.size == 0 or not np.isinf(x).any():
        return out
    axes = tuple(range(x.ndim)) if dim is None or (isinstance(dim, (tuple, list)) and not dim) else \
        normalize_axis("var_mean", dim, x.ndim)
    if x.ndim == 0:
        return out
    moved = np.moveaxis(x, axes, tuple(range(x.ndim - len(axes), x.ndim)))
    flat = moved.reshape(moved.shape[:x.ndim - len(axes)] + (-1,))
    followed = np.isinf(flat[..., :-1]).any(axis=-1)  # (an infinity before the last element)
    if keepdim:
        followed = np.expand_dims(followed, tuple(sorted(axes)))
    return out + Tensor._from_array(np.where(followed, np.nan, 0).astype(out.dtype))


def var_mean(input, dim=None, unbiased=None, keepdim=False, correction=None):
    """``(var, mean)`` over ``dim``, as ``torch.var_mean``."""
    dim, unbiased = _unbiased_first(dim, unbiased)
    return var(input, dim, unbiased, keepdim, correction), _welford_mean(input, dim, keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim=False, correction=None):
    """``(std, mean)`` over ``dim``, as ``torch.std_mean``."""
    dim, unbiased = _unbiased_first(dim, unbiased)
    return std(input, dim, unbiased, keepdim, correction), _welford_mean(input, dim, keepdim)


_MinMax = namedtuple("aminmax", ["min", "max"])


def aminmax(input, *, dim=None, keepdim=False):
    """``(min, max)`` over ``dim`` (all elements when None), as ``torch.aminmax``."""
    return _MinMax(_extreme("aminmax", input, dim, keepdim, False), _extreme("aminmax", input, dim, keepdim, True))


def _arg(op, x, dim, keepdim, largest):
    refuse_bool(op, x, RuntimeError)
    check_bools(op, keepdim=keepdim)
    xp = x._xp
    fn = xp.argmax if largest else xp.argmin
    if dim is None:
        _check_nonempty(op, x, None)
        out = fn(x._data.reshape(-1))
        if keepdim:
            out = out.reshape((1,) * x.ndim)
    elif x.ndim == 0:
        dim_index(op, dim, 0)
        out = xp.zeros((), np.int64)
    else:
        axis = dim_index(op, dim, x.ndim)
        _check_nonempty(op, x, (axis,))
        out = fn(x._data, axis=axis)
        if keepdim:
            out = xp.expand_dims(out, axis)
    return Tensor._from_array(xp.asarray(out).astype(np.int64, copy=False))


def argmax(input, dim=None, keepdim=False, *, axis=None):
    return _arg("argmax", input, _alias("argmax", dim, axis), keepdim, True)


def argmin(input, dim=None, keepdim=False, *, axis=None):
    return _arg("argmin", input, _alias("argmin", dim, axis), keepdim, False)


# ---------------------------------------------------------------- prod, logsumexp, the vector norms
def _prod_of_others(x, axes):
    """For each element, the product of the others over ``axes``: exclusive products from both sides,
    so zeros in the input need no division (the gradient of prod)."""
    xp = backend.array_module(x)
    axes = tuple(range(x.ndim)) if axes is None else axes
    if not axes or x.size == 0:  # (no element: nothing to multiply, and no -1 to reshape with)
        return xp.ones_like(x)
    if x.dtype in (backend.float16, backend.bfloat16):  # products in float32, rounded once (CuPy has no bf16 scan)
        return _prod_of_others(x.astype(np.float32), axes).astype(x.dtype)
    dest = tuple(range(x.ndim - len(axes), x.ndim))
    moved = xp.moveaxis(x, axes, dest)
    flat = moved.reshape(moved.shape[:x.ndim - len(axes)] + (-1,))
    ones = xp.ones_like(flat[..., :1])
    left = xp.cumprod(xp.concatenate([ones, flat[..., :-1]], -1), -1)
    right = xp.flip(xp.cumprod(xp.flip(xp.concatenate([flat[..., 1:], ones], -1), -1), -1), -1)
    return xp.moveaxis((left * right).reshape(moved.shape), dest, axes)


def _prod_of_others_graph(x, axes):
    """:func:`_prod_of_others` of a tensor, recorded (Prod's backward_graph): the products of the elements before
    and after each one along the flattened ``axes``, scanned by doubling (log2(n) products of shifted copies), so
    zeros need no division and every order of derivative follows."""
    axes = tuple(range(x.ndim)) if axes is None else axes
    if not axes or x.numel() == 0:
        return Tensor._from_array(x._xp.ones(x.shape, x.dtype))
    dims = [d for d in range(x.ndim) if d not in axes] + list(axes)
    moved = x.permute(dims)
    lead = tuple(moved.shape[:x.ndim - len(axes)])
    flat = moved.reshape(lead + (-1,))
    n, last = flat.shape[-1], len(lead)

    def ones(k):
        return Tensor._from_array(x._xp.ones(lead + (k,), x.dtype))

    before, after = cat([ones(1), flat[..., :-1]], last), cat([flat[..., 1:], ones(1)], last)
    step = 1
    while step < n:
        before = before * cat([ones(step), before[..., :-step]], last)
        after = after * cat([after[..., step:], ones(step)], last)
        step *= 2
    return (before * after).reshape(moved.shape).permute(np.argsort(dims).tolist())


@dense_results
class Prod(Function):
    """The gradient as PyTorch's prod_backward: ``out / x`` where the input holds no zero (so a NaN or inf anywhere in
    a product makes its whole slice's gradient NaN), else the products of the other elements; a full product with
    more than one zero has a zero gradient; a 0-d input passes the gradient as it is."""

    @staticmethod
    def forward(ctx, x, axes, keepdim):
        out = backend.array_module(x).asarray(x.prod(axis=axes, keepdims=keepdim, dtype=x.dtype))
        ctx.save_for_backward(x, out)
        ctx.meta = (axes, keepdim)
        return out

    @staticmethod
    def _rule(x, axes):
        """Which of PyTorch's formulas applies: "divide", "zero" or "others"."""
        if x.ndim == 0 or x.size == 0:
            return "others"
        zeros = int((x == 0).sum())
        return "divide" if zeros == 0 else "zero" if zeros > 1 and axes is None else "others"

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        axes, keepdim = ctx.meta
        ge, rule = _expand(g, x.shape, axes, keepdim), Prod._rule(x, axes)
        if rule == "zero":
            return backend.array_module(g).zeros(x.shape, g.dtype)
        if rule == "divide":
            with np.errstate(divide="ignore", invalid="ignore"):
                return (ge * (_expand(out, x.shape, axes, keepdim) / x)).astype(g.dtype, copy=False)
        return (ge * _prod_of_others(x, axes)).astype(g.dtype, copy=False)

    @staticmethod
    def backward_graph(ctx, g):
        x, out = ctx.saved_tensors
        axes, keepdim = ctx.meta
        ge, rule = _expand(g, x.shape, axes, keepdim), Prod._rule(x, axes)
        if rule == "zero":  # (tied to x, as PyTorch's, so that it can be differentiated again)
            return zero_linked(ge * _constant(backend.array_module(x).zeros(x.shape), g.dtype), ctx, 0, x)
        if rule == "divide":
            return ge * (_expand(ctx.graph_output(out), x.shape, axes, keepdim) / ctx.graph_input(0, x))
        return ge * _prod_of_others_graph(ctx.graph_input(0, x), axes)


@dense_results
class LogSumExp(Function):
    @staticmethod
    def forward(ctx, x, axes, keepdim):
        xp = backend.array_module(x)
        x0 = x
        narrow = _acc_dtype(x) is not None
        if narrow:  # (16-bit inputs summed in float32 on the host, see _acc_dtype)
            x = x.astype(np.float32)

        def step(a):  # PyTorch rounds each step of its x - max, exp, sum, log to a 16-bit input's dtype
            return a.astype(x0.dtype).astype(np.float32) if narrow else a

        if x.size:
            # shift by the finite maximum: no overflow, and rows of -inf stay -inf instead of NaN
            m = x.max(axis=axes, keepdims=True)
            m = backend.where(xp.isfinite(m), m, x.dtype.type(0))
        else:
            m = xp.zeros(x.sum(axis=axes, keepdims=True).shape, x.dtype)
        with np.errstate(divide="ignore"):
            out = step(xp.log(step(step(xp.exp(step(x - m))).sum(axis=axes, keepdims=True)))) + m
        y = out if keepdim else (out.reshape(()) if axes is None else out.squeeze(axes))
        y = y.astype(x0.dtype, copy=False)
        ctx.save_for_backward(x0, y)  # the array returned: an in-place change of the output is then caught
        ctx.meta = (axes, keepdim, out.shape)
        return y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        axes, keepdim, kept_shape = ctx.meta
        xp = backend.array_module(g)
        return (_expand(g, x.shape, axes, keepdim) * xp.exp(x - y.reshape(kept_shape))).astype(g.dtype, copy=False)

    @staticmethod
    def backward_graph(ctx, g):
        x, y = ctx.saved_tensors
        axes, keepdim, kept_shape = ctx.meta
        shifted = ctx.graph_input(0, x) - ctx.graph_output(y).reshape(kept_shape)
        return _expand(g, x.shape, axes, keepdim) * shifted.exp()


@dense_results
class VectorNorm(Function):
    """``sum(|x|^ord) ^ (1/ord)`` over axes, with max/min |x| for ord = +-inf and the count of nonzeros for
    ord = 0 (which has no gradient). Where the norm is 0 the gradient is 0 (PyTorch's subgradient), and ties of the inf norms
    share it evenly, as amax does."""

    @staticmethod
    def forward(ctx, x, order, axes, keepdim):
        xp = backend.array_module(x)
        wide = x.astype(np.float32) if x.dtype.itemsize < 4 else x  # half precision sums in float32
        a = xp.abs(wide)
        if order == math.inf:
            out = a.max(axis=axes, keepdims=keepdim)
        elif order == -math.inf:
            out = a.min(axis=axes, keepdims=keepdim)
        elif order == 0:
            out = (a != 0).sum(axis=axes, keepdims=keepdim)
        elif order == 1:
            out = a.sum(axis=axes, keepdims=keepdim)
        elif order == 2:
            out = xp.sqrt((wide * wide).sum(axis=axes, keepdims=keepdim))
        else:
            out = (a ** order).sum(axis=axes, keepdims=keepdim) ** (1.0 / order)
        out = xp.asarray(out).astype(x.dtype, copy=False)
        ctx.save_for_backward(x, out)
        ctx.meta = (order, axes, keepdim)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        order, axes, keepdim = ctx.meta
        xp = backend.array_module(g)
        ge, norm = _expand(g, x.shape, axes, keepdim), _expand(out, x.shape, axes, keepdim)
        zero = x.dtype.type(0)
        if order == 0:  # a count: no gradient at all, as in PyTorch (its input's .grad stays None)
            return None
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if order in (math.inf, -math.inf):
                hit = xp.abs(x) == norm  # (none where the norm is NaN: a zero gradient, as PyTorch's)
                grad = backend.where(hit, xp.sign(x) * ge / hit.sum(axis=axes, keepdims=True), zero)
            elif order == 1:  # (sign(NaN) is 0 in PyTorch: no NaN gradient from a NaN element)
                grad = backend.where(xp.isnan(x), zero, xp.sign(x)) * ge
            elif order == 2:
                grad = backend.where(norm == 0, zero, x / norm) * ge
            else:
                wide = np.float32 if x.dtype.itemsize < 4 else x.dtype  # a 16-bit |x| / norm can be subnormal
                scaled = (xp.sign(x) * (xp.abs(x.astype(wide)) / norm.astype(wide)) ** (order - 1)).astype(x.dtype)
                grad = backend.where((norm == 0) | (x == 0), zero, scaled) * ge
                # at x = 0 PyTorch's formula is 0 times its scale, g * norm^(1 - p) (p < 1) or g / norm^(p - 1)
                # (0 where the norm is): NaN where that is not finite (a NaN or, for p < 1, an infinite norm)
                scale = ge * norm ** (1 - order) if order < 1 else \
                    backend.where(norm == 0, zero, ge / norm ** (order - 1))
                grad = backend.where(x == 0, zero * scale, grad)
        return grad.astype(g.dtype, copy=False)

    @staticmethod
    def backward_graph(ctx, g):
        x, out = ctx.saved_tensors
        order, axes, keepdim = ctx.meta
        if order == 0:
            return None
        xp = backend.array_module(x)
        ge, norm = _expand(g, x.shape, axes, keepdim), _expand(out, x.shape, axes, keepdim)
        sign = _constant(xp.sign(x), g.dtype)
        if order in (math.inf, -math.inf):  # the elements at the norm, a constant selection
            hit = xp.abs(x) == norm
            return _constant(hit, g.dtype) * sign * (ge / _constant(hit.sum(axis=axes, keepdims=True), g.dtype))
        if order == 1:  # (tied to x, as abs's gradient; sign(NaN) is 0, as PyTorch's)
            sign = _constant(backend.where(xp.isnan(x), 0, xp.sign(x)), g.dtype)
            return zero_linked(sign * ge, ctx, 0, x)
        # where the norm is 0 (x is 0 there) it divides 1 instead: the gradient is 0, as the array backward's
        zero = norm == 0
        norm_t = _expand(ctx.graph_output(out), x.shape, axes, keepdim) + _constant(zero, out.dtype)
        xt = ctx.graph_input(0, x)
        if order == 2:
            return xt / norm_t * ge
        off = zero | (x == 0)  # (|x| / norm) ** (order - 1) taken at 1 there, then zeroed
        ratio = xt * sign / norm_t + _constant(off, x.dtype)
        return sign * ratio ** (order - 1) * _constant(~off, g.dtype) * ge


def prod(input: Tensor, dim=None, keepdim=False, dtype=None):
    """The product over ``dim`` (one dim as in PyTorch; a tuple is accepted too) or every element. In float32
    under autocast on cpu (PyTorch's cpu float32 list), and on cuda where no dtype is given."""
    (input,) = autocast_float32(input, devices=("cpu",))
    if dtype is None:
        (input,) = autocast_float32_on_cuda(input)
    input = _int64_if_integral(input, dtype)
    x, axes, keepdim = _axes("prod", dim, input, keepdim)
    if input.ndim == 0:  # (kept 0-d: PyTorch passes its gradient as it is, a NaN one included)
        x, axes, keepdim = input, None, False
    return Prod.apply(x, axes, keepdim)


def logsumexp(input: Tensor, dim=_NO_DIM, keepdim=False, *, axis=None):
    """``log(sum(exp(x)))`` over ``dim``, shifted by the maximum so it neither overflows nor underflows;
    integer inputs give float32. A dim is needed, as PyTorch's (dim=None reduces every dimension here)."""
    dim = _dim_given("logsumexp", dim, axis, needed=True)
    (input,) = autocast_float32_on_cuda(input)  # (on PyTorch's cuda autocast float32 list)
    input = _float_input(input)
    return LogSumExp.apply(*_axes("logsumexp", dim, input, keepdim))


def vector_norm(input: Tensor, ord=2, dim=None, keepdim=False, dtype=None):  # noqa: A002 - PyTorch's name
    """``torch.linalg.vector_norm``: ord any number, inf or -inf, over ``dim`` (int, tuple or None); in float32
    under autocast on cuda where no dtype is given."""
    if dtype is not None:
        want = backend.as_dtype(dtype)
        if not backend.is_floating(input.dtype) or not backend.is_floating(want):
            raise InputTypeError(f"vector_norm: expected a floating point input and dtype, got input dtype "
                                 f"{input.dtype} and dtype={want}")
        if want != input.dtype and want.itemsize <= input.dtype.itemsize:  # (float16 <-> bfloat16 narrow either way)
            raise InputTypeError(f"vector_norm: the input's dtype {input.dtype} should convert to dtype={want} without "
                                 f"narrowing, as PyTorch's")
        input = cast(input, dtype)
    else:
        (input,) = autocast_float32_on_cuda(input)
    if not backend.is_floating(input.dtype):
        raise InputTypeError(f"vector_norm: expected a floating point input, got {input.dtype}")
    if not isinstance(ord, numbers.Real):  # (a bool is 0 or 1, as in PyTorch)
        raise InputTypeError(f"vector_norm: ord must be a number, got {ord!r}")
    input, axes, keepdim = _axes("vector_norm", dim, input, keepdim)
    if ord < 0 or math.isinf(ord):  # (max, min and the negative powers have no identity: an empty dim is refused)
        _check_nonempty("vector_norm", input, axes)
    return VectorNorm.apply(input, float(ord), axes, keepdim)


# ---------------------------------------------------------------- any, all, count_nonzero (not differentiable)
def _truth(op, x, dim, keepdim):
    xp = x._xp
    fn = xp.any if op == "any" else xp.all
    if isinstance(dim, (tuple, list)) and not dim:  # an empty dim list reduces nothing in PyTorch's any/all (its
        out = x._data.astype(bool)  # sum and mean reduce everything): each element's truth
    else:
        x, axes, keepdim = _axes(op, dim, x, keepdim)
        out = xp.asarray(fn(x._data.astype(bool), axis=axes, keepdims=keepdim))
    out = dense(out)  # (C-contiguous, as PyTorch's reductions: see dense_results)
    return Tensor._from_array(out.astype(np.uint8) if x.dtype == np.uint8 else out)  # (uint8 stays, as PyTorch's)


def any(input: Tensor, dim=None, keepdim=False):  # noqa: A001 - PyTorch's name
    """Whether any element (over ``dim``) is nonzero: a bool tensor (uint8 for uint8 inputs)."""
    return _truth("any", input, dim, keepdim)


def all(input: Tensor, dim=None, keepdim=False):  # noqa: A001 - PyTorch's name
    """Whether every element (over ``dim``) is nonzero: a bool tensor (uint8 for uint8 inputs)."""
    return _truth("all", input, dim, keepdim)


def count_nonzero(input: Tensor, dim=None):
    """The number of nonzero elements over ``dim``, as int64."""
    input, axes, _ = _axes("count_nonzero", dim, input, False)
    out = (input._data != 0).sum(axis=axes)
    return Tensor._from_array(dense(input._xp.asarray(out).astype(np.int64, copy=False)))

