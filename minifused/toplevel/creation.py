"""PyTorch's remaining top-level creation and shape helpers: ``scalar_tensor``, ``empty_strided``, ``frombuffer``,
the deprecated ``range`` (end included), ``broadcast_shapes``, and the trapezoid rule (``trapezoid`` / ``trapz``,
``cumulative_trapezoid``) composed from differentiable ops."""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from .. import backend, ops
from ..tensor import Tensor
from ..ops.creation import integer_bounds
from ..backend import InputError, InputTypeError

__all__ = ["scalar_tensor", "empty_strided", "frombuffer", "range", "broadcast_shapes", "trapezoid", "trapz",
           "cumulative_trapezoid"]


def scalar_tensor(s, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """A 0-d tensor holding the number ``s``, of the default floating dtype unless ``dtype`` says otherwise (an
    int or a bool gives a float too, as PyTorch's)."""
    if isinstance(s, Tensor) and s.ndim == 0:
        s = s.item()
    if not isinstance(s, numbers.Number):
        raise InputTypeError(f"scalar_tensor(): argument 's' must be a number, not {type(s).__name__}")
    return ops.tensor(s, dtype=backend.get_default_dtype() if dtype is None else dtype, device=device,
                      requires_grad=requires_grad)


def _ints(op, name, values):
    values = tuple(values) if isinstance(values, (tuple, list)) else (values,)
    if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in values):
        raise InputTypeError(f"{op}(): argument '{name}' must be a tuple of ints, got {values!r}")
    return tuple(int(v) for v in values)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """A tensor of ``size`` whose elements lie ``stride`` elements apart along each dimension, over a fresh
    buffer just large enough (zeroed here, where PyTorch leaves it uninitialized)."""
    size, stride = _ints("empty_strided", "size", size), _ints("empty_strided", "stride", stride)
    if len(size) != len(stride):
        raise InputError(f"empty_strided: mismatch in length of strides and shape: {len(size)} sizes, "
                         f"{len(stride)} strides")
    if any(n < 0 for n in size) or any(s < 0 for s in stride):
        raise InputError(f"empty_strided: sizes and strides must be non-negative, got {size} and {stride}")
    dtype = backend.get_default_dtype() if dtype is None else backend.as_dtype(dtype)
    dev = backend.device(device)
    xp = backend.xp(dev)
    extent = 0 if 0 in size else 1 + sum((n - 1) * s for n, s in zip(size, stride))
    with backend.on_device(dev):
        buf = xp.zeros(extent, dtype)
        array = xp.lib.stride_tricks.as_strided(buf, size, tuple(s * dtype.itemsize for s in stride))
    return Tensor._from_array(array).requires_grad_(requires_grad)


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A cpu tensor over the memory of an object with the buffer protocol (``bytearray``, ``array.array``,
    ``memoryview`` ...), shared as PyTorch's: writes to one show in the other. A read-only buffer (``bytes``)
    gives a read-only tensor."""
    array = np.frombuffer(buffer, dtype=backend.as_dtype(dtype), count=count, offset=offset)
    return Tensor._from_array(array).requires_grad_(requires_grad)


def range(start, end, step=1, *, dtype=None, layout=None, device=None, requires_grad=False):  # noqa: A001
    """Deprecated in PyTorch (it warns, as there): ``start, start + step, ...`` up to and including ``end``, of
    the default floating dtype unless ``dtype`` says otherwise. Use :func:`minifused.arange`."""
    warnings.warn("minifused.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use minifused.arange, which produces values "
                  "in [start, end).", UserWarning, stacklevel=2)
    for name, v in (("start", start), ("end", end), ("step", step)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise InputTypeError(f"range(): argument '{name}' must be a number, not {type(v).__name__}")
    start, end, step = integer_bounds(dtype, start, end, step)
    if step == 0:
        raise InputError("range: step must be nonzero")
    if (end - start) / step < 0:
        raise InputError(f"range: upper bound and lower bound inconsistent with step sign (start={start}, "
                         f"end={end}, step={step})")
    n = math.floor((end - start) / step) + 1
    values = np.arange(n, dtype=np.float64) * step + start
    return ops.tensor(values, dtype=backend.get_default_dtype() if dtype is None else dtype, device=device,
                      requires_grad=requires_grad)


def broadcast_shapes(*shapes):
    """The shape that tensors of ``shapes`` broadcast to (each shape a sequence of ints, or one int), without
    making them, as ``torch.broadcast_shapes``."""
    out = []
    for i, shape in enumerate(shapes):
        shape = _ints("broadcast_shapes", "shapes", shape)
        if any(n < 0 for n in shape):
            raise InputError(f"broadcast_shapes: Attempting to broadcast a dimension with negative length! "
                             f"(shape {shape})")
        out = [1] * (len(shape) - len(out)) + out
        for k, n in enumerate(shape, start=len(out) - len(shape)):
            if n != out[k] and n != 1 and out[k] != 1:
                raise InputError(f"broadcast_shapes: Attempting to broadcast a dimension of length {n} at "
                                 f"{k - len(out)}! Mismatching argument at index {i} had {shape}; but expected "
                                 f"shape should be broadcastable to {out}")
            if out[k] == 1:
                out[k] = n
    return tuple(out)


# ---------------------------------------------------------------- the trapezoid rule
def _spacings(op, y, x, dx, dim):
    """(y as floating, the spacing between neighbours along ``dim``: a number or a tensor broadcasting over y's
    n - 1 intervals, the normalized dim)."""
    if not isinstance(y, Tensor):
        raise InputTypeError(f"{op}(): argument 'y' must be a Tensor, not {type(y).__name__}")
    if x is not None and dx is not None:
        raise InputTypeError(f"{op}(): takes either x (the sample points) or dx (their spacing), not both")
    if y.ndim == 0:
        raise InputError(f"{op}: y must have at least one dimension (the samples), got a 0-d tensor")
    if not -y.ndim <= dim < y.ndim:
        raise IndexError(f"{op}: dimension {dim} out of range for a tensor of {y.ndim} dimensions")
    if not backend.is_floating(y.dtype):
        y = ops.cast(y, backend.get_default_dtype())
    dim %= y.ndim
    if x is None:
        step = 1 if dx is None else dx
        if isinstance(step, bool) or not isinstance(step, numbers.Real):
            raise InputTypeError(f"{op}(): argument 'dx' must be a number, not {type(step).__name__}")
        return y, step, dim
    if not isinstance(x, Tensor):
        raise InputTypeError(f"{op}(): argument 'x' must be a Tensor, not {type(x).__name__}")
    n = y.shape[dim]
    if x.ndim == 1:
        if x.shape[0] != n:
            raise InputError(f"{op}: There must be one `x` value for each sample point (y has {n} along dim {dim}, "
                             f"x has {x.shape[0]})")
        return y, ops.reshape(ops.diff(x), (-1,) + (1,) * (y.ndim - dim - 1)), dim
    return y, ops.diff(x, dim=dim - y.ndim), dim


def _intervals(y, step, dim):
    """Each interval's area ``(y[i] + y[i+1]) / 2 * step_i`` along ``dim`` (n - 1 of them)."""
    n = y.shape[dim]
    return (ops.narrow(y, dim, 1, n - 1) + ops.narrow(y, dim, 0, n - 1)) * step / 2


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The integral of ``y`` along ``dim`` by the trapezoid rule, the samples ``x`` apart (a 1-D ``x`` of one
    point per sample, or an ``x`` broadcasting with ``y``) or evenly ``dx`` apart (1 by default)."""
    y, step, dim = _spacings("trapezoid", y, x, dx, dim)
    if y.shape[dim] == 0:
        return ops.sum(y, dim)
    return ops.sum(_intervals(y, step, dim), dim)


def trapz(y, x=None, *, dx=None, dim=-1):
    """:func:`trapezoid` (NumPy's older name)."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running :func:`trapezoid` integral along ``dim``: one value per interval (one fewer than samples)."""
    y, step, dim = _spacings("cumulative_trapezoid", y, x, dx, dim)
    if y.shape[dim] == 0:
        return ops.clone(y)
    return ops.cumsum(_intervals(y, step, dim), dim)
