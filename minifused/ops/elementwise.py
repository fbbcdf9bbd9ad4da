"""Elementwise ops: arithmetic with broadcasting, unary math, activations, casts."""
from __future__ import annotations

import functools
import math
import numbers
import warnings

import numpy as np

from .. import backend
from ..autograd import Function, Handoff
from ..kernels import elementwise as K
from ..kernels import copy_in_layout, is_channels_last
from ..tensor import Tensor
from ._common import (autocast_float32_on_cuda, bfloat16_rounded, binary_operands, broadcast_shape, cast, check_alpha,
                      check_tensors, opmath_operands, promote, promote_operands, scalar_result_dtype, shape_of,
                      unbroadcast, unbroadcast_graph, wrapped)
from .logic import nonzero
from .shape import contiguous_format, preserve_format, result_format
from ..backend import InputError, InputTypeError


def _xp(x):
    return backend.array_module(x)


# ---------------------------------------------------------------- casts and copies
class ToDevice(Function):
    @staticmethod
    def forward(ctx, x, device):
        ctx.in_device = str(backend.device_of(x))
        return backend.to_device(x, device)

    @staticmethod
    def backward(ctx, g):
        return backend.to_device(g, backend.Device(ctx.in_device))

    @staticmethod
    def backward_graph(ctx, g):
        return g.to(ctx.in_device)


def to_device(x: Tensor, device) -> Tensor:
    device = backend.device(device)
    return x if x.device == device else ToDevice.apply(x, device)


class Clone(Function):
    @staticmethod
    def forward(ctx, x, channels_last=False):
        return copy_in_layout(x, channels_last)

    @staticmethod
    def backward(ctx, g):
        return g

    backward_graph = backward


def clone(input: Tensor, *, memory_format=preserve_format) -> Tensor:
    """A copy of ``input``, laid out as ``memory_format`` says (by default as the input: channels-last stays so)."""
    return Clone.apply(input, result_format("clone", input, memory_format) is not contiguous_format)


# ---------------------------------------------------------------- arithmetic
class Add(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = (shape_of(a), shape_of(b))
        return K.add(a, b)  # a + b; a residual add of two 16-bit arrays in one vectorized kernel

    @staticmethod
    def backward(ctx, g):
        na, nb = ctx.needs_input_grad
        return (unbroadcast(g, ctx.shapes[0]) if na else None,
                unbroadcast(g, ctx.shapes[1]) if nb else None)

    @staticmethod
    def backward_graph(ctx, g):
        na, nb = ctx.needs_input_grad
        return (unbroadcast_graph(g, ctx.shapes[0]) if na else None,
                unbroadcast_graph(g, ctx.shapes[1]) if nb else None)


class Sub(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = (shape_of(a), shape_of(b))
        return a - b

    @staticmethod
    def backward(ctx, g):
        na, nb = ctx.needs_input_grad
        return (unbroadcast(g, ctx.shapes[0]) if na else None,
                unbroadcast(-g, ctx.shapes[1]) if nb else None)

    @staticmethod
    def backward_graph(ctx, g):
        na, nb = ctx.needs_input_grad
        return (unbroadcast_graph(g, ctx.shapes[0]) if na else None,
                unbroadcast_graph(-g, ctx.shapes[1]) if nb else None)


class Mul(Function):
    """Saves only what the wanted gradients use (as PyTorch's: ``h * w`` with a frozen ``w`` keeps no ``h``, which
    may then change in place)."""

    @staticmethod
    def forward(ctx, a, b):
        na, nb = ctx.needs_input_grad
        ctx.shapes = (shape_of(a), shape_of(b))
        ctx.save_for_backward(b if na else None, a if nb else None)
        return a * b

    @staticmethod
    def backward(ctx, g):
        b, a = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        return (unbroadcast(g * b, ctx.shapes[0]) if na else None,
                unbroadcast(g * a, ctx.shapes[1]) if nb else None)

    @staticmethod
    def backward_graph(ctx, g):
        b, a = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        return (unbroadcast_graph(g * ctx.graph_input(1, b), ctx.shapes[0]) if na else None,
                unbroadcast_graph(g * ctx.graph_input(0, a), ctx.shapes[1]) if nb else None)


class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.a_shape = shape_of(a)
        ctx.save_for_backward(a if ctx.needs_input_grad[1] else None, b)
        return a / b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        ga = unbroadcast(g / b, ctx.a_shape) if na else None
        gb = unbroadcast(-g * ((a / b) / b), b.shape) if nb else None  # (b * b would overflow or underflow first)
        return ga, gb

    @staticmethod
    def backward_graph(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        bt = ctx.graph_input(1, b)
        ga = unbroadcast_graph(g / bt, ctx.a_shape) if na else None
        gb = unbroadcast_graph(-g * ((ctx.graph_input(0, a) / bt) / bt), b.shape) if nb else None
        return ga, gb


def _power(a, b):
    """``a ** b``; a float32 NumPy result as PyTorch's cpu pow rounds it: a tensor to the number 3 or -2 as
    ``x * x * x`` and ``1 / (x * x)`` (its special cases, as 2 and -1 are NumPy's too), other powers through
    float64, rounded once (PyTorch's are correctly rounded there, NumPy's float32 power loops an ulp off: 0.9 ** 4
    0.65610 against 0.6560999). (A tensor exponent's PyTorch vectorizes, an ulp off in a few percent of elements.)
    The number 0.5 or -0.5 to a float32, float64 or bfloat16 tensor is its sqrt or 1 / sqrt, as PyTorch's cpu pow
    takes them (``-0.0 ** 0.5`` is -0.0, ``-inf ** 0.5`` NaN); float16's and a tensor exponent's are pow's (0.0,
    inf): :func:`_pow_ufunc`, not NumPy's ``**``."""
    if not (isinstance(a, np.ndarray) or isinstance(b, np.ndarray)):
        return a ** b
    with np.errstate(all="ignore"):  # (as float32's: overflow to inf, NaN for a negative base)
        if (isinstance(a, np.ndarray) and isinstance(b, numbers.Real) and b in (0.5, -0.5)
                and a.dtype in (np.float32, np.float64, backend.bfloat16)):
            root = np.sqrt(a.astype(np.float32) if a.dtype == backend.bfloat16 else a)
            return (root if b == 0.5 else 1 / root).astype(a.dtype, copy=False)
        if np.result_type(a, b) == np.float32:
            if isinstance(a, np.ndarray) and isinstance(b, numbers.Real) and b in (3, -2):
                return a * a * a if b == 3 else np.float32(1) / (a * a)
            return _pow_ufunc(np.asarray(a, np.float64), np.asarray(b, np.float64)).astype(np.float32)
        return _pow_ufunc(a, b)


def _pow_ufunc(a, b):
    """NumPy's power as C's pow: NumPy takes a one-element exponent 0.5 as sqrt (``**`` and its ufunc alike), which
    gives -0.0 and NaN for -0.0 and -inf where pow gives 0.0 and inf."""
    out = np.power(a, b)
    if np.size(b) == 1 and np.all(b == 0.5):
        # (+ 0: -0.0 becomes 0.0; the cast: NumPy takes bfloat16 and a Python number to float32)
        out = np.where(np.isneginf(a), np.inf, out + 0).astype(out.dtype, copy=False)
    return out


class Pow(Function):
    @staticmethod
    def forward(ctx, a, b):
        integer = getattr(b, "dtype", None) is not None and b.dtype.kind == "i"
        out = Pow._integer_power(a, b) if integer else _power(a, b)
        # the result only for the exponent's gradient, as PyTorch's: x.pow(2) may be changed in place before backward
        ctx.save_for_backward(a, b, out if ctx.needs_input_grad[1] else None)
        return out

    @staticmethod
    def _integer_power(a, b):
        """``a ** b`` for integer exponents of which some may be negative, as PyTorch's integer pow (NumPy
        refuses them): 1 for a base of 1, +-1 for -1 (by the exponent's parity), 0 for any other base."""
        xp = backend.array_module(b)
        neg = b < 0
        out = xp.asarray(a) ** backend.where(neg, 0, b).astype(b.dtype)
        ones = xp.asarray(a) * 0 + 1
        unit = backend.where(a == 1, ones, backend.where(a == -1, backend.where(b % 2 == 0, ones, -ones), ones * 0))
        # a Python int base takes the exponent tensor's dtype, as PyTorch's (asarray made it an int64 array)
        return backend.where(neg, unit, out).astype(out.dtype if hasattr(a, "dtype") else b.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        a, b, out = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        xp = _xp(g)
        ga = gb = None
        # PyTorch's conventions where the chain rule meets 0 * inf: d/da is 0 where b == 0 (also at
        # a == 0), d/db is 0 where a == 0 and b >= 0; a negative base gives NaN for d/db (log a)
        with np.errstate(divide="ignore", invalid="ignore"):
            if na:
                ga = unbroadcast(g * backend.where(xp.asarray(b) == 0, 0, b * _power(a, b - 1)), a.shape)
            if nb:
                a_ = xp.asarray(a)
                gb = unbroadcast(g * backend.where((a_ == 0) & (xp.asarray(b) >= 0), 0, out * xp.log(a_)), b.shape)
        return ga, gb

    @staticmethod
    def backward_graph(ctx, g):
        a, b, out = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        xp = g._xp
        at, bt = ctx.graph_input(0, a), ctx.graph_input(1, b)
        ga = gb = None
        with np.errstate(divide="ignore", invalid="ignore"):  # (the conventions of backward, masks as constants)
            if na and not isinstance(bt, Tensor) and bt == 0:  # (x ** 0: a constant, as PyTorch's)
                ga = _zeros_graph(g, a.shape)
            elif na:
                ga = unbroadcast_graph(g * _zero_where(xp.asarray(b) == 0, bt * at ** (bt - 1)), a.shape)
            if nb:
                a_ = xp.asarray(a)
                log_a = log(at) if isinstance(at, Tensor) else float(np.log(np.float64(a)))  # (a number's: -inf at 0)
                gb = unbroadcast_graph(g * _zero_where((a_ == 0) & (xp.asarray(b) >= 0), ctx.graph_output(out) * log_a),
                                       b.shape)
        return ga, gb


def _const(array):
    """An array (a mask, a sign, a rounded quotient: piecewise constant) as a tensor of no graph, for a
    ``backward_graph``."""
    return Tensor._from_array(backend.array_module(array).asarray(array), False)


def _zeros_graph(like, shape):
    """Zeros of ``shape`` in ``like``'s dtype and device as a tensor of no graph (a flat op's gradient)."""
    return Tensor._from_array(like._xp.zeros(shape, like.dtype), False)


def _zero_where(mask, t):
    """``t`` with 0 selected where the array ``mask`` holds (not multiplied: an inf or NaN there stays out)."""
    return where(_const(mask), 0, t)


def _in_tensor_dtype(out, a, b):
    """``out`` of a float tensor and a Python scalar in the tensor's dtype, as PyTorch gives: NumPy's rules
    compute bfloat16 (an ml_dtypes type) with a Python float in float32; cast back, rounding once."""
    t = a if isinstance(a, Tensor) else b
    if isinstance(a, Tensor) and isinstance(b, Tensor) or out.dtype == t.dtype or not backend.is_floating(t.dtype):
        return out
    return cast(out, t.dtype)


def _additive(fn, name):
    """``add`` / ``sub`` without ``alpha``: a Python number beside a bfloat16 tensor is rounded to bfloat16 first, as
    PyTorch's (and as NumPy takes one beside float16); a bool operand of ``sub`` is refused, as PyTorch's. A
    floating tensor and a Python number: one op, :class:`AddNumber`."""
    def op(a, b):
        if fn is Sub and _any_bool(a, b):
            _refuse_bool_sub(a, b)
        fused = _float_and_number(a, b)
        if fused is not None:
            # (negated as a float: x - 0 adds -0.0, so that -0.0 - 0 stays -0.0 as in PyTorch)
            return AddNumber.apply(fused[0], _number_in(fused[0].dtype, fused[1] if fn is Add else -float(fused[1])),
                                   False)
        fused = _float_and_number(b, a)
        if fused is not None:
            return AddNumber.apply(fused[0], _number_in(fused[0].dtype, fused[1]), fn is Sub)
        a, b = binary_operands(name, a, b)
        if not (isinstance(a, Tensor) and isinstance(b, Tensor)):
            dtype = (a if isinstance(a, Tensor) else b).dtype
            a, b = bfloat16_rounded(dtype, a), bfloat16_rounded(dtype, b)
        return _in_tensor_dtype(fn.apply(a, b), a, b)

    op.__name__ = name
    return op


def _is_bool(v):
    return type(v) is bool or isinstance(v, Tensor) and v._data.dtype == backend.bool_


def _any_bool(a, b):
    return (type(a) is bool or type(b) is bool or isinstance(a, Tensor) and a._data.dtype == backend.bool_ or
            isinstance(b, Tensor) and b._data.dtype == backend.bool_)


def _refuse_bool_sub(a, b):
    """PyTorch refuses a bool tensor (or Python bool) on either side of a subtraction."""
    bools = (_is_bool(a), _is_bool(b))
    if bools[0] and bools[1]:
        raise RuntimeError("sub: Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` "
                           "or `logical_xor()` operator instead.")
    if bools[0] or bools[1]:
        raise RuntimeError("sub: Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
                           "trying to invert a mask, use the `~` or `logical_not()` operator instead.")


class AddScaled(Function):
    """``a + alpha * b`` of two float16 / bfloat16 arrays as PyTorch computes it: in float32, alpha rounded to their
    dtype, the sum rounded once; b's gradient ``g * alpha`` in float32 too, rounded once."""

    @staticmethod
    def forward(ctx, a, b, alpha):
        ctx.shapes, ctx.alpha = (a.shape, b.shape), alpha
        return (a.astype(np.float32) + float(a.dtype.type(alpha)) * b.astype(np.float32)).astype(a.dtype)

    @staticmethod
    def backward(ctx, g):
        na, nb, _ = ctx.needs_input_grad
        return (unbroadcast(g, ctx.shapes[0]) if na else None,
                unbroadcast((g.astype(np.float32) * ctx.alpha).astype(g.dtype), ctx.shapes[1]) if nb else None, None)

    @staticmethod
    def backward_graph(ctx, g):
        na, nb, _ = ctx.needs_input_grad
        return (unbroadcast_graph(g, ctx.shapes[0]) if na else None,
                unbroadcast_graph(cast(cast(g, np.float32) * ctx.alpha, g.dtype), ctx.shapes[1]) if nb else None,
                None)


def _scaled(name, plain, plain_add):
    """``a op alpha * b``, PyTorch's ``add`` / ``sub`` with their ``alpha``; ``sub`` as PyTorch's,
    ``a + (-alpha) * b``, and a number ``b`` beside a floating tensor first rounded to its dtype as a float (so that
    zeros keep their signs as there: ``sub(-0.0, 2, alpha=0)`` is 0.0, ``add(-0.0, 0, alpha=-1)`` -0.0). (PyTorch's
    cpu kernels fuse the multiply-add: an ulp apart at times.)"""
    def op(input, other, *, alpha=1):
        if alpha is None or (type(alpha) is int and alpha == 1):  # every '+' and '-' (the checks below cost more)
            return plain(input, other)
        if name == "sub":
            _refuse_bool_sub(input, other)
        input, other = binary_operands(name, input, other)
        dtype = (input if isinstance(input, Tensor) else other).dtype
        alpha = check_alpha(name, dtype, alpha)
        if alpha == 1:
            return plain(input, other)
        if dtype == backend.bool_:  # alpha in the bool result's dtype, as PyTorch's: a + bool(alpha) * b
            alpha = bool(alpha)
        if name == "sub":
            alpha = -alpha
        if dtype in (backend.float16, backend.bfloat16) and isinstance(input, Tensor) and isinstance(other, Tensor):
            return AddScaled.apply(input, other, alpha)
        if not isinstance(other, Tensor) and backend.is_floating(dtype):
            other = _number_in(dtype, other)  # (1e5 beside float16 is inf there)
        return plain_add(input, mul(other, alpha) if isinstance(other, Tensor)
                         else (other and alpha) if dtype == backend.bool_ else other * alpha)

    op.__name__ = name
    return op


class ScaleByNumber(Function):
    """A float32, float16 or bfloat16 tensor times (``divide``: divided by) a Python number, computed in float32 and
    rounded once as PyTorch's opmath does, in one op and one launch each way (composed, a 16-bit tensor's records a
    cast to float32, the product and a cast back; a float32 one's, CuPy's ufunc, costs more host time). Its gradient
    is the same scaling of the incoming one."""

    @staticmethod
    def forward(ctx, x, s, divide):
        ctx.args = (s, divide)
        return K.scale(x, s, divide)

    @staticmethod
    def backward(ctx, g):
        return K.scale(g, *ctx.args), None, None

    @staticmethod
    def backward_graph(ctx, g):
        s, divide = ctx.args
        return ScaleByNumber.apply(g, s, divide), None, None


class AddNumber(Function):
    """A float32, float16 or bfloat16 tensor plus a Python number (``negate``: the number minus the tensor), the
    number already in the tensor's dtype (:func:`_number_in`), the sum computed in float32 and rounded once, in one op
    and one launch (composed, a bfloat16 tensor's records the sum in float32 and a cast back). Its gradient is the
    incoming one (``negate``: negated)."""

    @staticmethod
    def forward(ctx, x, s, negate):
        ctx.negate = negate
        return K.shift(x, s, negate)

    @staticmethod
    def backward(ctx, g):
        return (K.scale(g, -1.0, False) if ctx.negate else g), None, None

    @staticmethod
    def backward_graph(ctx, g):
        return (ScaleByNumber.apply(g, -1.0, False) if ctx.negate else g), None, None


def _number_in(dtype, s):
    """The number ``s`` rounded to ``dtype`` (float32, float16 or bfloat16), as PyTorch takes a number beside a
    tensor of that dtype in ``+`` and ``-`` (NumPy likewise beside float32 and float16)."""
    with np.errstate(over="ignore"):  # (a number beyond float16's range is inf there)
        return float(dtype.type(s))


_SCALED = (backend.float32, backend.float16, backend.bfloat16)


def _float_and_number(a, b):
    """(tensor, number) where ``a`` is a float32 / float16 / bfloat16 tensor and ``b`` a Python float or an int that
    float32 holds exactly (not a bool), else None: :class:`ScaleByNumber`'s operands."""
    if (isinstance(a, Tensor) and a._data.dtype in _SCALED
            and (type(b) is float or type(b) is int and -(1 << 24) <= b <= 1 << 24)):
        return a, b
    return None


def mul(input, other):
    """``input * other``; a float16 / bfloat16 tensor times a number computed in float32 and rounded once, as
    PyTorch's (see ``opmath_operands``; one op, :class:`ScaleByNumber`, for a floating tensor and a Python number)."""
    fused = _float_and_number(input, other) or _float_and_number(other, input)
    if fused is not None:
        return ScaleByNumber.apply(*fused, False)
    input, other, dtype = opmath_operands("mul", input, other)
    out = Mul.apply(input, other)
    return _in_tensor_dtype(out, input, other) if dtype is None else cast(out, dtype)


_add = _additive(Add, "add")
add = _scaled("add", _add, _add)
sub = _scaled("sub", _additive(Sub, "sub"), _add)


def _pow(a, b):
    a, b = binary_operands("pow", a, b)
    return _in_tensor_dtype(Pow.apply(a, b), a, b)


_HALF_FLOATS = (backend.float16, backend.bfloat16)


def pow(input, exponent):  # noqa: A001 - PyTorch's name
    """``input ** exponent``; an integer tensor refuses a negative integer exponent and one outside its dtype's
    range, as PyTorch's (the exponent is not wrapped into the dtype as other ops' numbers are), a float16 / bfloat16
    tensor one past its dtype's largest finite value (not infinity). A bool result is
    PyTorch's: a bool tensor to a Python bool power is a bool tensor (``x ** True`` is x, ``x ** False`` all True);
    other bool powers (of two bool tensors, a Python bool to a bool tensor's) are not implemented."""
    if _is_bool(exponent) and _is_bool(input):
        if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):  # (binary_operands' error for others)
            raise InputTypeError("pow(): expected a Tensor operand, got bool and bool")
        if not isinstance(input, Tensor) or not isinstance(exponent, bool):
            raise NotImplementedError("pow: not implemented for bool tensors (cast them with .long() or .float())")
        return clone(input) if exponent else Tensor._from_array(input._xp.ones(input.shape, backend.bool_))
    if (isinstance(input, Tensor) and isinstance(exponent, numbers.Integral) and not isinstance(exponent, bool)
            and input.dtype.kind in "iub"):
        if exponent < 0:
            raise RuntimeError("pow: Integers to negative integer powers are not allowed.")
        if input.dtype.kind != "b" and wrapped(input.dtype, exponent) != exponent:
            raise RuntimeError(f"pow: value {exponent} cannot be converted to type {input.dtype} without overflow")
    if (isinstance(input, Tensor) and input.dtype in _HALF_FLOATS and isinstance(exponent, numbers.Real)
            and backend.scalar_overflows(exponent, input.dtype, _HALF_FLOATS)):  # (PyTorch's check of the exponent)
        raise RuntimeError(f"pow: value {exponent} cannot be converted to type {input.dtype} without overflow")
    input, exponent = autocast_float32_on_cuda(input, exponent)  # (on PyTorch's cuda autocast float32 list)
    return _pow(input, exponent)


def div(input, other):
    """True division: integer operands give the default dtype (float32 unless set), as in PyTorch (the package's
    ``div`` adds its ``rounding_mode``); integer tensors and numbers are cast straight to it (``int8 / 300`` is
    0.01), and a float16 / bfloat16 tensor divided by a number is computed in float32 and rounded once (see
    ``opmath_operands``). A Python number divided by a tensor is the tensor's reciprocal times the number, as
    PyTorch's ``__rtruediv__`` computes it (so that ``2 / x`` rounds as there)."""
    if isinstance(other, Tensor) and not isinstance(input, Tensor) and isinstance(input, numbers.Number):
        (other,) = autocast_float32_on_cuda(other)  # (a reciprocal: on PyTorch's cuda autocast float32 list)
        return mul(_true_div(1.0, other), input)  # (1.0 / b: the reciprocal, rounded once)
    return _true_div(input, other)


def _true_div(a, b):
    fused = _float_and_number(a, b)
    if fused is not None:
        return ScaleByNumber.apply(*fused, True)
    a, b, dtype = opmath_operands("div", a, b, floating=True)
    out = Div.apply(a, b)
    return _in_tensor_dtype(out, a, b) if dtype is None else cast(out, dtype)


# ---------------------------------------------------------------- unary math
class Neg(Function):
    @staticmethod
    def forward(ctx, x):
        return -x

    @staticmethod
    def backward(ctx, g):
        return -g

    backward_graph = backward


class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        out = _xp(x).exp(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g * out

    @staticmethod
    def backward_graph(ctx, g):
        return g * ctx.graph_output(ctx.saved_tensors[0])


class Log(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _xp(x).log(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g / x

    @staticmethod
    def backward_graph(ctx, g):
        return g / ctx.graph_input(0, ctx.saved_tensors[0])


class Sqrt(Function):
    @staticmethod
    def forward(ctx, x):
        out = _xp(x).sqrt(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g / (2 * out)

    @staticmethod
    def backward_graph(ctx, g):
        return g / (2 * ctx.graph_output(ctx.saved_tensors[0]))


class Abs(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _xp(x).abs(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * sign_of(_xp(x), x)

    @staticmethod
    def backward_graph(ctx, g):
        (x,) = ctx.saved_tensors
        return zero_linked(g * _const(sign_of(_xp(x), x)), ctx, 0, x)


def sign_of(xp, x):
    """-1, 0 or 1 as ``x``'s sign, 0 at NaN as PyTorch's ``sign`` (NumPy's and CuPy's give NaN there): also abs's
    gradient, 0 at a NaN input as PyTorch's."""
    s = xp.sign(x)
    if not backend.is_floating(s.dtype):
        return s
    return backend.where(s != s, s.dtype.type(0), s)


def _wide(a):
    """``a`` in float32 when a 16-bit float: tanh and sigmoid compute there and round once, as PyTorch's."""
    return a.astype(np.float32) if a.dtype in (backend.float16, backend.bfloat16) else a


class Tanh(Function):
    """Keeps the output; float32 and 16-bit CUDA arrays take one fused pass each way (K.activation_forward)."""

    @staticmethod
    def forward(ctx, x):
        if K.fuses_activation(x):
            out = K.activation_forward("tanh", x)
        else:
            out = _xp(x).tanh(_wide(x)).astype(x.dtype, copy=False)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        return _tanh_grad(g, ctx.saved_tensors[0])

    @staticmethod
    def backward_graph(ctx, g):
        return TanhGrad.apply(g, ctx.graph_output(ctx.saved_tensors[0]))


def _tanh_grad(g, out):
    """``g * (1 - out²)``, in one fused pass where the kernels take the arrays."""
    if K.fuses_activation(g, out):
        return K.activation_backward("tanh", g, out)
    out = _wide(out)
    return (_wide(g) * (1 - out * out)).astype(g.dtype, copy=False)


class TanhGrad(Function):
    """tanh's gradient ``g * (1 - y²)`` as one op of the graph (what a ``create_graph`` backward records, as
    PyTorch's ``tanh_backward``: a PINN's derivatives are chains of it): one fused pass forward; d/dg is the same
    op, d/dy is ``-2 g y``."""

    @staticmethod
    def forward(ctx, g, y):
        ctx.save_for_backward(g if ctx.needs_input_grad[1] else None, y)
        return _tanh_grad(g, y)

    @staticmethod
    def backward(ctx, gg):
        g, y = ctx.saved_tensors
        need_g, need_y = ctx.needs_input_grad
        return (_tanh_grad(gg, y) if need_g else None,
                (-2 * _wide(gg) * _wide(g) * _wide(y)).astype(gg.dtype, copy=False) if need_y else None)

    @staticmethod
    def backward_graph(ctx, gg):
        g, y = ctx.saved_tensors
        need_g, need_y = ctx.needs_input_grad
        yt = ctx.graph_input(1, y)
        return (TanhGrad.apply(gg, yt) if need_g else None, -2 * gg * ctx.graph_input(0, g) * yt if need_y else None)


class Sigmoid(Function):
    """As :class:`Tanh`."""

    @staticmethod
    def forward(ctx, x):
        if K.fuses_activation(x):
            out = K.activation_forward("sigmoid", x)
            ctx.save_for_backward(out)
            return out
        xp, xw = _xp(x), _wide(x)
        # exp of a non-positive number only, so no overflow for large |x|
        e = xp.exp(-xp.abs(xw))
        out = backend.where(xw >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        if K.fuses_activation(g, out):
            return K.activation_backward("sigmoid", g, out)
        if out.dtype == g.dtype == np.float16 and not backend.is_cuda_array(out):
            # PyTorch's CPU kernel computes float16 (not bfloat16) in float16, rounding each step
            return g * (np.float16(1) - out) * out
        out = _wide(out)
        return (_wide(g) * (1 - out) * out).astype(g.dtype, copy=False)

    @staticmethod
    def backward_graph(ctx, g):
        y = ctx.graph_output(ctx.saved_tensors[0])
        return g * (1 - y) * y


class ReluGrad(Handoff):
    """The gradient at a ReLU's output, which its backward hands to the op that produced its input instead of
    applying its mask: an op whose context holds ``relu_factors`` (BatchNorm's, ``ops.batchnorm``) applies the
    ReLU's decisions in its own backward pass, as it does for the ReLU fused into it, and the ReLU's pass over
    the gradient is saved."""

    __slots__ = ("g",)

    def __init__(self, g):
        self.g = g


class Relu(Function):
    """Keeps a bit-packed mask of ``x > 0`` or NaN (1 bit per element, not the output), taken before the
    result is written, so the in-place form (``out`` is ``x``) has the same backward. When the engine names the op
    that produced x this ReLU's sole producer and that op can apply the ReLU's backward itself (see
    :class:`ReluGrad`), the backward hands it the gradient instead."""

    @staticmethod
    def forward(ctx, x, out=None):
        if not ctx.recording:
            return K.relu_forward(x, out=out)
        y, ctx.mask = K.relu_mask(x, out=out)
        ctx.channels_last = is_channels_last(x)  # the mask's order: x's memory
        return y

    @staticmethod
    def backward(ctx, g):
        p = ctx.sole_producer(0)
        if p is not None and p.__dict__.get("relu_factors") is not None:
            return ReluGrad(g)
        return K.mask_apply(g, ctx.mask, channels_last=ctx.channels_last)

    @staticmethod
    def takes_sum(ctx, a, b):
        """Whether :meth:`backward_sum` adds ``a`` and ``b`` in its own pass (the engine then keeps the two
        gradients of the output apart for it: see ``autograd.walk``)."""
        return K.mask_add_fuses(a, b, ctx.channels_last)

    @staticmethod
    def backward_sum(ctx, a, b):
        """The backward of the gradient ``a + b``, the sum in the mask's pass (a residual block's output ReLU,
        whose output the next block's body and shortcut both read)."""
        return K.mask_add_apply(a, b, ctx.mask, channels_last=ctx.channels_last)

    @staticmethod
    def backward_graph(ctx, g):
        shape, dtype = ctx.out_meta[0]
        passes = K.mask_apply(g._xp.ones(shape, dtype), ctx.mask, channels_last=ctx.channels_last) != 0
        return zero_linked(where(_const(passes), g, 0), ctx, 0, passes)


class _ZeroLink(Function):
    """``g`` as it is, tied to ``x`` with a zero gradient. A piecewise-linear op's gradient (relu's) depends on its
    input only through a constant mask, yet PyTorch's reaches the input in the graph: differentiating it again
    gives zeros, not an error that nothing requires grad. Only x's shape is read (it need not be g's)."""

    is_view = True

    @staticmethod
    def forward(ctx, g, x):
        ctx.shape = x.shape
        return g

    @staticmethod
    def backward(ctx, gg):
        return gg, _xp(gg).zeros(ctx.shape, gg.dtype)

    @staticmethod
    def backward_graph(ctx, gg):
        return gg, Tensor._from_array(gg._xp.zeros(ctx.shape, gg.dtype))


def zero_linked(g, ctx, i, like):
    """``g`` tied to input ``i`` of ``ctx`` where that input wants a gradient (see :class:`_ZeroLink`); ``like``:
    an array of the input's shape, whatever its values."""
    return g if ctx.inputs[i] is None else _ZeroLink.apply(g, ctx.graph_input(i, like))


def zero_tied(g, *tensors):
    """``g`` tied (see :class:`_ZeroLink`) to each of ``tensors`` (graph tensors, or None) that requires grad: a
    fused op's ReLU mask on its inputs, as a separate relu's gradient is tied to its input, made from them."""
    for t in tensors:
        if t is not None and t.requires_grad:
            g = _ZeroLink.apply(g, t)
    return g


class Gelu(Function):
    """Saves ``x``; the in-place form (``out`` is ``x``), when recorded, saves a copy of ``x``
    made before it is overwritten (so it saves memory only where nothing is recorded)."""

    @staticmethod
    def forward(ctx, x, approximate, out=None):
        ctx.save_for_backward(backend.copy(x) if out is x and ctx.recording else x)
        ctx.approximate = approximate
        return K.gelu_forward(x, approximate, out=out)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return K.gelu_backward(g, x, ctx.approximate), None

    @staticmethod
    def backward_graph(ctx, g):
        x = ctx.graph_input(0, ctx.saved_tensors[0])
        if x.dtype in (backend.float16, backend.bfloat16):  # (in float32, as the kernels compute it)
            x = cast(x, np.float32)
        if ctx.approximate == "tanh":
            k, c = math.sqrt(2 / math.pi), 0.044715
            t = tanh(k * (x + c * x * x * x))
            return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * (k * (1 + 3 * c * x * x))), None
        cdf = 0.5 * (1 + (x * math.sqrt(0.5)).erf())  # (the method: pointwise, erf's module, imports this one)
        return g * (cdf + x * exp(-0.5 * x * x) * (1 / math.sqrt(2 * math.pi))), None


class Clamp(Function):
    """x clipped to [lo, hi] (numbers, arrays or None), in x's dtype (the caller promotes); where lo > hi the result
    is hi. Gradients as PyTorch's: x's where lo <= x <= hi (bounds included; none at a NaN x), a tensor bound's where
    it replaced x: lo's only where lo < hi, hi's also wherever hi < lo (the result is hi there)."""

    @staticmethod
    def forward(ctx, x, lo, hi):
        ctx.save_for_backward(x)
        ctx.bounds = (lo, hi)
        if backend.is_floating(x.dtype):  # a missing bound as -inf / +inf (CuPy's clip refuses None for bfloat16)
            lo, hi = -np.inf if lo is None else lo, np.inf if hi is None else hi
        return _xp(x).clip(x, lo, hi).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        lo, hi = ctx.bounds
        keep = (x >= lo) if hi is None else (x <= hi) if lo is None else (x >= lo) & (x <= hi)
        _, need_lo, need_hi = ctx.needs_input_grad
        zero = g.dtype.type(0)  # (selected, not multiplied: an inf or NaN gradient stays out where it is cut, as
        d_lo = d_hi = None      # PyTorch's: clamp(min=0).sqrt() has a zero gradient at 0)
        if need_lo:
            below = (x < lo) if hi is None else (x < lo) & (lo < hi)
            d_lo = unbroadcast(backend.where(below, g, zero), lo.shape).astype(lo.dtype, copy=False)
        if need_hi:
            above = (x > hi) if lo is None else (x > hi) | (hi < lo)
            d_hi = unbroadcast(backend.where(above, g, zero), hi.shape).astype(hi.dtype, copy=False)
        return backend.where(keep, g, zero), d_lo, d_hi

    @staticmethod
    def backward_graph(ctx, g):
        (x,) = ctx.saved_tensors
        lo, hi = ctx.bounds
        _, need_lo, need_hi = ctx.needs_input_grad
        keep = (x >= lo) if hi is None else (x <= hi) if lo is None else (x >= lo) & (x <= hi)
        d_lo = d_hi = None
        if need_lo:
            below = (x < lo) if hi is None else (x < lo) & (lo < hi)
            d_lo = unbroadcast_graph(where(_const(below), g, 0), lo.shape)
        if need_hi:
            above = (x > hi) if lo is None else (x > hi) | (hi < lo)
            d_hi = unbroadcast_graph(where(_const(above), g, 0), hi.shape)
        return where(_const(keep), g, 0), d_lo, d_hi


def _float_unary(fn, name, cuda_float32=False):
    def op(input, *args):
        if cuda_float32:  # (on PyTorch's cuda autocast float32 list)
            (input,) = autocast_float32_on_cuda(input)
        if not backend.is_floating(input.dtype):
            input = cast(input, backend.get_default_dtype())
        return fn.apply(input, *args)

    op.__name__ = name
    return op


def neg(input):
    if input.dtype == backend.bool_:
        raise RuntimeError("neg: Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
                           "invert a mask, use the `~` or `logical_not()` operator instead.")
    return Neg.apply(input)


exp = _float_unary(Exp, "exp", cuda_float32=True)
log = _float_unary(Log, "log", cuda_float32=True)
sqrt = _float_unary(Sqrt, "sqrt")
def abs(input):  # noqa: A001 - PyTorch's name
    if input.dtype == backend.bool_:
        raise NotImplementedError("abs: not implemented for bool tensors (cast them with .long() or .float())")
    return Abs.apply(input)


tanh = _float_unary(Tanh, "tanh")
sigmoid = _float_unary(Sigmoid, "sigmoid")
def _no_bool_relu(x):
    if x._data.dtype == backend.bool_:  # (PyTorch refuses it rather than return the input)
        raise InputTypeError("relu: Boolean inputs not supported for relu")


def relu(input):
    _no_bool_relu(input)
    return Relu.apply(input)


def relu_(x):
    """ReLU written into ``x`` (returned; see ``Function.apply_``)."""
    _no_bool_relu(x)
    return Relu.apply_("relu_", x)


def gelu_(x, approximate="none"):
    """GELU written into ``x`` (floating ``x`` only; returned, see ``Function.apply_``)."""
    if approximate not in ("none", "tanh"):
        _bad_approximate("gelu_", approximate)
    return Gelu.apply_("gelu_", x, approximate)


def _bad_approximate(op, approximate):
    """PyTorch's TypeError for an approximate that is no string, its RuntimeError for another string."""
    error = InputError if isinstance(approximate, str) else InputTypeError
    raise error(f"{op}: approximate must be 'none' or 'tanh', got {approximate!r}")


def gelu(input, *, approximate="none"):  # (keyword-only, as PyTorch's)
    if approximate not in ("none", "tanh"):
        _bad_approximate("gelu", approximate)
    if not backend.is_floating(input.dtype):  # (PyTorch's kernel has no integer form: no silent cast)
        raise backend.DtypeNotImplementedError(f"gelu: expected a floating-point input (float32, float16, bfloat16 "
                                               f"or float64), got dtype {input.dtype}")
    return Gelu.apply(input, approximate)


def _tensors_dtype(tensors):
    """The dtype PyTorch's op on several tensors gives: the dimensioned ones promoted together, the 0-d ones
    together, the 0-d ones' counting only where of a higher kind (:func:`promote_operands`, taken group by group
    rather than pair by pair, which would let a 0-d tensor's dtype count beside a dimensioned one)."""
    groups = [[t.dtype for t in tensors if t.ndim], [t.dtype for t in tensors if not t.ndim]]
    dims, zeros = (None if not g else functools.reduce(promote, g) for g in groups)
    if dims is None or zeros is None:
        return zeros if dims is None else dims
    return promote_operands(dims, False, zeros, True)


def _bool_clamp(op, dtype, lo=None, hi=None):
    """PyTorch clamps in bool only with one tensor bound (its clamp_min / clamp_max of two tensors): a number
    bound, or both bounds, are not implemented for bool."""
    if dtype == backend.bool_ and (any(b is not None and not isinstance(b, Tensor) for b in (lo, hi))
                                   or lo is not None and hi is not None):
        raise NotImplementedError(f"{op}: not implemented for bool with a number bound or with both bounds (give one "
                                  f"bound as a bool tensor, or cast the input with .long() or .float())")


def _mixed_bounds(op, lo, hi):
    """The bounds as PyTorch's clamp takes them, both numbers or both tensors: a number beside a tensor is a
    TypeError, save a 0-d tensor that needs no gradient, which PyTorch reads as a number (so its dtype takes no part
    in the promotion: an int64 input with a 0-d float64 bound gives float32), and so it is read here."""
    if lo is None or hi is None or isinstance(lo, Tensor) == isinstance(hi, Tensor):
        return lo, hi
    side, b = ("min", lo) if isinstance(lo, Tensor) else ("max", hi)
    if b.ndim == 0 and not b.requires_grad:
        return (b.item(), hi) if side == "min" else (lo, b.item())
    other = "max" if side == "min" else "min"
    grad = " that requires grad" if b.ndim == 0 else ""
    raise InputTypeError(f"{op}: expected min and max both numbers or both tensors, got {side} a tensor of shape "
                         f"{tuple(b.shape)}{grad} and {other} a number (only a 0-d tensor without grad may stand "
                         f"for a number)")


def clamp(input, min=None, max=None):  # noqa: A002 - PyTorch's names
    """x clipped to [min, max]. Tensor bounds broadcast with x, as PyTorch's: the result may be larger than x (x
    expanded to it, so x's gradient sums over the copies), its dtype the three promoted as in a binary op."""
    if min is None and max is None:
        raise InputError("clamp: at least one of min and max must be given")
    shape = tuple(input.shape)
    for name, bound in (("min", min), ("max", max)):
        if isinstance(bound, Tensor):
            if bound.device != input.device:
                raise RuntimeError(f"clamp: {name} is on {bound.device} but the input is on {input.device}")
            shape = tuple(broadcast_shape("clamp", shape, bound.shape))
        elif bound is not None and not isinstance(bound, numbers.Real):
            raise InputTypeError(f"clamp: {name} must be a number, a tensor or None, got {type(bound).__name__}")
    min, max = _mixed_bounds("clamp", min, max)
    # the result's dtype as PyTorch's: the input's and the tensor bounds' promoted together, then by the number
    # bounds (an integer input with a float bound is float32); every operand in it
    dtype = _tensors_dtype([input] + [b for b in (min, max) if isinstance(b, Tensor)])
    for bound in (min, max):
        if bound is not None and not isinstance(bound, Tensor):
            dtype = scalar_result_dtype(dtype, bound)
    _bool_clamp("clamp", dtype, min, max)
    if dtype != input.dtype:
        input = cast(input, dtype)
    if shape != tuple(input.shape):
        input = input.expand(shape)
    min, max = (cast(b, dtype) if isinstance(b, Tensor) and b.dtype != dtype else b for b in (min, max))
    if dtype.kind in "iu":  # a number bound as PyTorch writes it into the dtype: wrapped into an unsigned one,
        # PyTorch's error beyond the range (NumPy raised its own)
        min, max = (backend.fit_number("clamp", b, dtype) if isinstance(b, numbers.Real) else b for b in (min, max))
    for bound in (min, max):  # (PyTorch's check of a number bound in float16 / bfloat16: 1e5 is no float16)
        if isinstance(bound, numbers.Real) and backend.scalar_overflows(bound, dtype, _HALF_FLOATS):
            raise RuntimeError(f"clamp: value {bound} cannot be converted to type {dtype} without overflow")
    return Clamp.apply(input, min, max)


# ---------------------------------------------------------------- binary selections
class Maximum(Function):
    @classmethod
    def forward(cls, ctx, a, b):
        ctx.save_for_backward(a, b)
        return _xp(a).maximum(a, b) if cls is Maximum else _xp(a).minimum(a, b)

    @classmethod
    def backward(cls, ctx, g):
        a, b = ctx.saved_tensors
        zero = g.dtype.type(0)
        # PyTorch's: ties split the gradient evenly; the side that lost gets none; where either is NaN (no order)
        # both get the whole gradient
        share = backend.where(a == b, g / 2, g).astype(g.dtype, copy=False)
        a_lost, b_lost = (a < b, a > b) if cls is Maximum else (a > b, a < b)
        na, nb = ctx.needs_input_grad
        return (unbroadcast(backend.where(a_lost, zero, share), a.shape) if na else None,
                unbroadcast(backend.where(b_lost, zero, share), b.shape) if nb else None)

    @classmethod
    def backward_graph(cls, ctx, g):
        a, b = ctx.saved_tensors
        share = where(_const(a == b), g / 2, g)
        a_lost, b_lost = (a < b, a > b) if cls is Maximum else (a > b, a < b)
        na, nb = ctx.needs_input_grad
        return (unbroadcast_graph(_zero_where(a_lost, share), a.shape) if na else None,
                unbroadcast_graph(_zero_where(b_lost, share), b.shape) if nb else None)


class Minimum(Maximum):
    pass


def maximum(input, other):
    check_tensors("maximum", other=other)  # (PyTorch's takes no Python number: clamp_min does)
    input, other = binary_operands("maximum", input, other)
    return Maximum.apply(input, other)


def minimum(input, other):
    check_tensors("minimum", other=other)
    input, other = binary_operands("minimum", input, other)
    return Minimum.apply(input, other)


class Where(Function):
    @staticmethod
    def forward(ctx, cond, a, b):
        ctx.save_for_backward(cond)
        ctx.shapes = (shape_of(a), shape_of(b))
        return backend.where(cond, a, b)

    @staticmethod
    def backward(ctx, g):
        (cond,) = ctx.saved_tensors
        _, na, nb = ctx.needs_input_grad
        zero = g.dtype.type(0)
        return (None,
                unbroadcast(backend.where(cond, g, zero), ctx.shapes[0]) if na else None,
                unbroadcast(backend.where(cond, zero, g), ctx.shapes[1]) if nb else None)

    @staticmethod
    def backward_graph(ctx, g):
        cond = _const(ctx.saved_tensors[0])
        _, na, nb = ctx.needs_input_grad
        return (None,
                unbroadcast_graph(where(cond, g, 0), ctx.shapes[0]) if na else None,
                unbroadcast_graph(where(cond, 0, g), ctx.shapes[1]) if nb else None)


def _scalar_where_dtype(a, b):
    """The dtype of ``where(c, a, b)`` with two Python scalars: bool, int64 or float32, as in PyTorch."""
    if isinstance(a, bool) and isinstance(b, bool):
        return backend.bool_
    if all(isinstance(v, numbers.Integral) for v in (a, b)):
        return backend.int64
    return backend.float32


def where(condition, input=None, other=None):  # noqa: A002 - PyTorch's names
    """``input`` where ``condition`` holds, else ``other`` (broadcast together; either may be a Python
    scalar, which takes the tensor's dtype as in PyTorch's promotion). ``where(condition)`` alone is
    ``nonzero(condition, as_tuple=True)``."""
    if not isinstance(condition, Tensor):
        raise InputTypeError(f"where: condition must be a bool Tensor, got {type(condition).__name__}")
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    if input is None or other is None:
        raise InputTypeError("where: expected both input and other, or neither (where(condition) lists the indices)")
    if condition.dtype == np.uint8:  # PyTorch still takes it (deprecated, and warned)
        warnings.warn("where received a uint8 condition tensor. This behavior is deprecated and will be removed in a "
                      "future version of PyTorch. Use a boolean condition instead.", UserWarning, stacklevel=2)
        condition = condition != 0
    if condition.dtype != backend.bool_:
        raise InputTypeError(f"where: expected condition to be a bool tensor, got dtype {condition.dtype} (compare it, "
                             f"e.g. x > 0, or cast it with .bool())")
    for v in (input, other):
        if not isinstance(v, (Tensor, numbers.Number)) or isinstance(v, complex):
            raise InputTypeError(f"where: input and other must be Tensors or real Python scalars, got "
                                 f"{type(v).__name__}")
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        dtype = _scalar_where_dtype(input, other)
        return Where.apply(condition, dtype.type(input), dtype.type(other))
    a, b = binary_operands("where", input, other)
    for t in (a, b):
        if isinstance(t, Tensor):
            if t.device != condition.device:
                raise RuntimeError(
                    f"where: expected all tensors on the same device, got {condition.device} and {t.device}")
            broadcast_shape("where", condition.shape, t.shape)
    # a scalar branch in the tensor's dtype, so the result keeps it on NumPy and CuPy alike
    dtype = (a if isinstance(a, Tensor) else b).dtype
    a = a if isinstance(a, Tensor) else dtype.type(a)
    b = b if isinstance(b, Tensor) else dtype.type(b)
    return Where.apply(condition, a, b)


# ---------------------------------------------------------------- comparisons (no gradient)
def _compare(ufunc_name, name):
    """An ordering (``lt`` ... ``ge``) refuses a NumPy array as PyTorch's (``x < array`` is a TypeError there;
    ``x == array`` compares)."""
    ordering = name not in ("eq", "ne")

    def op(input, other):
        if ordering and (isinstance(input, np.ndarray) or isinstance(other, np.ndarray)):
            raise InputTypeError(f"{name}(): expected a tensor or a number, got numpy.ndarray (make it a tensor "
                                 f"first: minifused.from_numpy(...))")
        input, other = binary_operands(name, input, other)
        like = input if isinstance(input, Tensor) else other
        xa = input._data if isinstance(input, Tensor) else bfloat16_rounded(like.dtype, input)
        xb = other._data if isinstance(other, Tensor) else bfloat16_rounded(like.dtype, other)
        return Tensor._from_array(like._xp.asarray(getattr(like._xp, ufunc_name)(xa, xb)))

    op.__name__ = name
    return op


eq = _compare("equal", "eq")
ne = _compare("not_equal", "ne")
lt = _compare("less", "lt")
le = _compare("less_equal", "le")
gt = _compare("greater", "gt")
ge = _compare("greater_equal", "ge")


__all__ = [n for n in dir() if not n.startswith("_") and n not in ("np", "annotations")]
