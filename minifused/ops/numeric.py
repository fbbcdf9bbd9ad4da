"""PyTorch's remaining numeric ops: ``logcumsumexp`` (a stable log-space scan, with its gradient), ``renorm``,
integer arithmetic (``gcd``, ``lcm``, ``bitwise_left_shift`` / ``bitwise_right_shift`` with ``<<`` and ``>>``),
the float representation (``frexp``, ``nextafter``, ``isreal``), and in-place forms the other families lack:
``cumsum_`` / ``cumprod_`` / ``hypot_`` / ``renorm_`` (recorded for autograd), ``logical_*_`` and
``bitwise_not_`` (values: written into the tensor in its dtype, as PyTorch's).
"""
from __future__ import annotations

import numbers
from collections import namedtuple

import numpy as np

from .. import backend
from ..autograd import Function
from ..tensor import Tensor
from ._common import (autocast_float32_on_cuda, binary_operands, cast, dense_results, number_arg, unbroadcast,
                      unbroadcast_graph)
from .elementwise import _const, _zeros_graph, abs as _abs, exp, log, where
from .logic import _values, bitwise_not, logical_and, logical_not, logical_or, logical_xor, written_into
from .pointwise import _check, hypot
from .reduce import dim_index, vector_norm
from .scan import cumprod, cumsum
from .special_math import recorded_into
from ..backend import DtypeNotImplementedError, InputTypeError

_HALF = (np.dtype(np.float16), backend.bfloat16)


def _xp(x):
    return backend.array_module(x)


def _dtype_name(dtype):
    return np.dtype(dtype).name


# ---------------------------------------------------------------- logcumsumexp
def _log_scan(x, axis):
    """log(cumsum(exp(x))) along ``axis`` without overflow: a doubling scan of logaddexp over shifted copies
    (log2(n) whole-array steps, on NumPy and CuPy alike)."""
    xp = _xp(x)
    y = backend.copy(x)
    n = x.shape[axis]
    step = 1
    while step < n:
        later = (slice(None),) * axis + (slice(step, None),)
        earlier = (slice(None),) * axis + (slice(None, n - step),)
        y[later] = xp.logaddexp(y[later], y[earlier])  # both read before the write (a new array)
        step *= 2
    return y


@dense_results
class LogCumSumExp(Function):
    """Gradient as PyTorch's (TensorFlow's): the positive and negative parts of g summed in log space,
    exp(x + reverse_logcumsumexp(log|g| - y)) each, so no exp(-y) overflows."""

    @staticmethod
    def forward(ctx, x, axis):
        wide = x.astype(np.float32) if x.dtype in _HALF else x
        y = _log_scan(wide, axis)
        if ctx.recording:
            ctx.axis = axis
            ctx.save_for_backward(x, y)
        return y.astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        xp, axis = _xp(g), ctx.axis
        wide = g.astype(y.dtype, copy=False)
        x = x.astype(y.dtype, copy=False)
        lowest = np.finfo(y.dtype).min  # PyTorch's stand-in for log(0): finite

        def part(mask):
            log_g = backend.where(mask, xp.log(xp.abs(backend.where(mask, wide, 1))), lowest)
            return xp.exp(xp.flip(_log_scan(xp.flip(log_g - y, axis), axis), axis) + x)
        return (part(wide > 0) - part(wide < 0)).astype(g.dtype, copy=False), None

    @staticmethod
    def backward_graph(ctx, g):
        x, y = ctx.saved_tensors
        axis = ctx.axis
        wide = cast(g, y.dtype)
        x, y = cast(ctx.graph_input(0, x), y.dtype), ctx.graph_output(y)
        lowest = float(np.finfo(y.dtype).min)

        def part(mask):  # backward's, with the ops (the signs of g: constants)
            mask = _const(mask)
            log_g = where(mask, log(_abs(where(mask, wide, 1.0))), lowest)
            return exp(LogCumSumExp.apply((log_g - y).flip(axis), axis).flip(axis) + x)
        return part(wide._data > 0) - part(wide._data < 0), None


def logcumsumexp(input, dim):  # noqa: A002 - PyTorch's names
    """log(cumsum(exp(input), dim)), computed without overflow; floating-point tensors (16-bit ones in float32)."""
    _check("logcumsumexp", input)
    if not backend.is_floating(input.dtype):
        raise NotImplementedError(f"logcumsumexp: not implemented for {_dtype_name(input.dtype)} tensors (expected "
                                  f"floating-point tensors)")
    axis = dim_index("logcumsumexp", dim, input.ndim)
    if input.ndim == 0:
        return LogCumSumExp.apply(input.reshape(1), 0).reshape(())
    return LogCumSumExp.apply(input, axis)


def _scan_(name, scan):
    def op(self, dim, dtype=None):
        _check(name, self)
        if dtype is not None and backend.as_dtype(dtype) != self.dtype:
            raise RuntimeError(f"{name}: bad in-place call: the tensor's dtype {_dtype_name(self.dtype)} and the "
                               f"result's {_dtype_name(backend.as_dtype(dtype))} should match")
        if self.dtype == backend.bool_:
            raise NotImplementedError(f"{name}: not implemented for bool tensors")
        return recorded_into(name, lambda s: scan(s, dim, dtype=s.dtype))(self)

    op.__name__ = name
    return op


# ---------------------------------------------------------------- renorm
def renorm(input, p, dim, maxnorm):  # noqa: A002 - PyTorch's names
    """Each slice ``input.select(dim, i)`` whose p-norm exceeds ``maxnorm`` scaled to norm ``maxnorm`` (by
    ``maxnorm / (norm + 1e-7)``, as PyTorch's); gradient through the norm too. 16-bit tensors in float32."""
    _check("renorm", input)
    p, maxnorm = number_arg("renorm", "p", p), number_arg("renorm", "maxnorm", maxnorm)
    for arg, v in (("p", p), ("maxnorm", maxnorm)):
        if not isinstance(v, numbers.Real):  # (a bool is 0 or 1, as in PyTorch)
            raise InputTypeError(f"renorm(): argument '{arg}' must be a number, not {type(v).__name__}")
    if not p > 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if input.ndim < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} dimensions")
    if not backend.is_floating(input.dtype):
        raise RuntimeError(f"renorm: expected a floating-point input, got {_dtype_name(input.dtype)}")
    axis = dim_index("renorm", dim, input.ndim)
    (input,) = autocast_float32_on_cuda(input)  # (on PyTorch's cuda autocast float32 list)
    wide = cast(input, backend.float32) if input.dtype in _HALF else input
    norm = vector_norm(wide, float(p), tuple(d for d in range(input.ndim) if d != axis), keepdim=True)
    factor = where(norm > maxnorm, float(maxnorm) / (norm + 1e-7), 1.0)
    return cast(wide * factor, input.dtype)


# ---------------------------------------------------------------- integers: gcd, lcm, shifts
def _integer_operands(name, input, other, scalars):
    """Broadcast, promoted integer operands (a number allowed on either side where ``scalars``); floating and bool
    tensors refused, as PyTorch's (not implemented for them)."""
    if scalars:
        if not isinstance(input, Tensor) and not isinstance(other, Tensor):
            raise InputTypeError(f"{name}(): expected a Tensor operand, got {type(input).__name__} and "
                                 f"{type(other).__name__}")
    else:
        for arg, v in (("input", input), ("other", other)):
            if not isinstance(v, Tensor):
                raise InputTypeError(f"{name}(): argument '{arg}' must be Tensor, not {type(v).__name__}")
    for v in (input, other):
        if isinstance(v, Tensor) and backend.is_floating(v.dtype):
            raise NotImplementedError(f"{name}: not implemented for {_dtype_name(v.dtype)} tensors (expected integer "
                                      f"tensors)")
        if isinstance(v, numbers.Real) and not isinstance(v, numbers.Integral):  # (PyTorch's: floating, unimplemented)
            raise DtypeNotImplementedError(f"{name}: not implemented for a float operand, got {v!r} (expected "
                                           f"integer operands)")
        if not isinstance(v, (Tensor, numbers.Integral)):  # (a bool number is an integer, 0 or 1, as in PyTorch)
            raise InputTypeError(f"{name}: expected integer operands, got {type(v).__name__} {v!r}")
    a, b = binary_operands(name, input, other)
    if (a if isinstance(a, Tensor) else b).dtype == backend.bool_:  # (a bool tensor beside an integer is promoted)
        raise NotImplementedError(f"{name}: not implemented for bool tensors (expected integer tensors)")
    return a, b


def _integer_op(name, fn, scalars):
    def op(input, other):  # noqa: A002 - PyTorch's names
        a, b = _integer_operands(name, input, other, scalars)
        dtype = (a if isinstance(a, Tensor) else b).dtype
        bits = 8 * np.dtype(dtype).itemsize
        if not isinstance(b, Tensor) and not 0 <= b < bits:
            b = bits  # a shift amount out of range, as every other one (it may not fit the dtype itself)

        def apply(xp, *arrays):
            x, y = (v if hasattr(v, "shape") else xp.asarray(v, dtype) for v in arrays)
            return xp.asarray(fn(xp, x, y)).astype(dtype, copy=False)
        return _values(apply, a, b)

    op.__name__ = name
    return op


def _shift(xp, a, b, left):
    # PyTorch's: a shift by a negative amount or by the width or more gives 0 (right: the sign, -1 or 0)
    bits = 8 * a.dtype.itemsize
    ok = (b >= 0) & (b < bits)
    amount = backend.where(ok, b, 0).astype(a.dtype, copy=False)
    if left:
        return backend.where(ok, xp.left_shift(a, amount), 0)
    return backend.where(ok, xp.right_shift(a, amount), backend.where(a < 0, -1, 0))


gcd = _integer_op("gcd", lambda xp, a, b: xp.gcd(a, b), scalars=False)
gcd.__doc__ = "The greatest common divisor, elementwise (nonnegative; gcd(0, 0) = 0); integer tensors."
lcm = _integer_op("lcm", lambda xp, a, b: xp.lcm(a, b), scalars=False)
lcm.__doc__ = "The least common multiple, elementwise (nonnegative; 0 where either is 0); integer tensors."
bitwise_left_shift = _integer_op("bitwise_left_shift", lambda xp, a, b: _shift(xp, a, b, True), scalars=True)
bitwise_left_shift.__doc__ = ("``input << other`` in input's integer dtype (wrapping); a shift by a negative amount or "
                              "by the width or more gives 0, as PyTorch's.")
bitwise_right_shift = _integer_op("bitwise_right_shift", lambda xp, a, b: _shift(xp, a, b, False), scalars=True)
bitwise_right_shift.__doc__ = ("``input >> other`` (arithmetic: the sign fills in); a shift by a negative amount or "
                               "by the width or more gives -1 for negative input, else 0, as PyTorch's.")


# ---------------------------------------------------------------- the float representation
Frexp = namedtuple("frexp", ["mantissa", "exponent"])


class FrexpMantissa(Function):
    """frexp's mantissa, x / 2**exponent; its gradient g / 2**exponent (the exponent is piecewise constant)."""

    @staticmethod
    def forward(ctx, x, exponent):
        ctx.exponent = exponent
        wide = x.astype(np.float32) if x.dtype in _HALF else x
        return _xp(x).frexp(wide)[0].astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        wide = g.astype(np.float32) if g.dtype in _HALF else g
        return (wide / _xp(g).exp2(ctx.exponent.astype(wide.dtype))).astype(g.dtype, copy=False), None

    @staticmethod
    def backward_graph(ctx, g):
        wide = cast(g, np.float32) if g.dtype in _HALF else g
        return wide / _const(g._xp.exp2(ctx.exponent.astype(wide.dtype))), None


def frexp(input):  # noqa: A002 - PyTorch's name
    """``(mantissa, exponent)`` with input = mantissa * 2**exponent, |mantissa| in [0.5, 1) (0, inf and NaN kept,
    exponent 0), the exponent int32; floating-point tensors. The mantissa's gradient is 2**-exponent."""
    _check("frexp", input)
    if not backend.is_floating(input.dtype):
        raise RuntimeError(f"frexp: only floating-point dtypes are supported, got {_dtype_name(input.dtype)}")

    def exponent_of(xp, x):
        return xp.frexp(x.astype(np.float32) if x.dtype in _HALF else x)[1].astype(np.int32, copy=False)
    exponent = _values(exponent_of, input)
    return Frexp(FrexpMantissa.apply(input, exponent._data), exponent)


def _nextafter(xp, a, b):
    """The next float after a towards b; 16-bit floats through their bit patterns (one step of the integer)."""
    if a.dtype not in _HALF:
        return xp.nextafter(a, b)
    wa, wb = a.astype(np.float32), b.astype(np.float32)
    bits = a.view(np.uint16).astype(np.int32)
    step = backend.where(wb > wa, 1, -1) * backend.where(wa < 0, -1, 1)
    out = backend.where(wa == 0, backend.where(wb > 0, 1, 0x8001), bits + step)  # from +-0: the smallest subnormal
    out = out.astype(np.uint16).view(a.dtype)
    out = backend.where((wa == wb) | xp.isnan(wb), b, out)
    return backend.where(xp.isnan(wa), a, out)


class NextAfter(Function):
    """Gradient as PyTorch 2.14's: 1 for input, 0 for other."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = (a.shape, b.shape)
        return _nextafter(_xp(a), a, b)

    @staticmethod
    def backward(ctx, g):
        na, nb = ctx.needs_input_grad
        return (unbroadcast(g, ctx.shapes[0]) if na else None,
                unbroadcast(_xp(g).zeros_like(g), ctx.shapes[1]) if nb else None)

    @staticmethod
    def backward_graph(ctx, g):
        na, nb = ctx.needs_input_grad
        return (unbroadcast_graph(g, ctx.shapes[0]) if na else None,
                _zeros_graph(g, ctx.shapes[1]) if nb else None)


def _nextafter_operands(name, input, other):
    for arg, v in (("input", input), ("other", other)):
        if not isinstance(v, Tensor):
            raise InputTypeError(f"{name}(): argument '{arg}' must be Tensor, not {type(v).__name__}")
    a, b = binary_operands(name, input, other)
    if not backend.is_floating(a.dtype):
        raise NotImplementedError(f"{name}: not implemented for {_dtype_name(a.dtype)} tensors (expected "
                                  f"floating-point tensors)")
    return a, b


def nextafter(input, other):  # noqa: A002 - PyTorch's names
    """The next representable value after input towards other, elementwise (other itself where they are equal);
    floating-point tensors."""
    return NextAfter.apply(*_nextafter_operands("nextafter", input, other))


def isreal(input):  # noqa: A002 - PyTorch's name
    """Whether each element is real: True everywhere (minifused has no complex dtypes)."""
    _check("isreal", input)
    return _values(lambda xp, x: xp.ones(x.shape, bool), input)


# ---------------------------------------------------------------- in-place forms
def _written_as(name, fn):
    """``fn(self, ...)`` (bool or integer values) written into self in self's dtype, as PyTorch's logical and
    bitwise in-place ops (``logical_and_`` on a float tensor writes 0.0 / 1.0)."""
    return written_into(name, lambda self, *args: cast(fn(self, *args), self.dtype))


def _swapped(fn):
    return lambda self, other: fn(other, self)


__all__ = ["logcumsumexp", "renorm", "gcd", "lcm", "bitwise_left_shift", "bitwise_right_shift", "frexp", "nextafter",
           "isreal"]
METHODS = {name: globals()[name] for name in __all__}
METHODS.update({
    "cumsum_": _scan_("cumsum_", cumsum), "cumprod_": _scan_("cumprod_", cumprod),
    "renorm_": recorded_into("renorm_", renorm), "hypot_": recorded_into("hypot_", hypot),
    "nextafter_": recorded_into("nextafter_", nextafter),
    # (integer results: an int64 one of a bool tensor and a number is refused in it, as PyTorch's)
    "gcd_": written_into("gcd_", gcd), "lcm_": written_into("lcm_", lcm),
    "bitwise_left_shift_": written_into("bitwise_left_shift_", bitwise_left_shift),
    "bitwise_right_shift_": written_into("bitwise_right_shift_", bitwise_right_shift),
    "__lshift__": bitwise_left_shift, "__rlshift__": _swapped(bitwise_left_shift),
    "__rshift__": bitwise_right_shift, "__rrshift__": _swapped(bitwise_right_shift),
    "__ilshift__": written_into("__ilshift__", bitwise_left_shift),
    "__irshift__": written_into("__irshift__", bitwise_right_shift),
    "logical_and_": _written_as("logical_and_", logical_and), "logical_or_": _written_as("logical_or_", logical_or),
    "logical_xor_": _written_as("logical_xor_", logical_xor), "logical_not_": _written_as("logical_not_", logical_not),
    "bitwise_not_": written_into("bitwise_not_", bitwise_not),
})
