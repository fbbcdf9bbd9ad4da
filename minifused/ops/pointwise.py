"""Pointwise math: trigonometric, exponential and logarithmic forms, rounding, and the binary
``atan2``, ``floor_divide`` (``//``), ``remainder`` (``%``) and ``fmod``.

One ``Function`` per op; each unary one is a small subclass of :class:`_Unary` that names what its
derivative reads (the input ``x``, the result ``y``, or nothing), so forward saves exactly that. Dtypes
follow PyTorch: transcendental ops turn integer input into float32; rounding, ``sign`` and ``square``
keep integers as they are; in-place forms (``sin_``, ``floor_`` ...) refuse a float result in an
integer tensor.
"""
from __future__ import annotations

import math
import numbers
import types

import numpy as np

from .. import backend
from ..autograd import Function
from ..kernels.special_math import erf64, erfc64
from ..tensor import Tensor
from ._common import (autocast_float32_on_cuda, bfloat16_rounded, binary_operands, broadcast_shape, cast,
                      check_integer_divisor, float_operands, host_int, number_arg, promote_operands, unbroadcast,
                      unbroadcast_graph)
from .creation import is_floating_point, new_empty, new_full, new_ones, new_tensor, new_zeros
from .elementwise import _const, _in_tensor_dtype, _zeros_graph, clone, exp, log, mul, sign_of, sqrt, where
from .logic import written_into
from ..backend import DtypeNotImplementedError, InputTypeError


def _xp(x):
    return backend.array_module(x)


def _erf(xp, x):
    if xp is np:  # NumPy has no erf: computed in float64
        return erf64(x.astype(np.float64)).astype(x.dtype)
    import cupyx.scipy.special

    return cupyx.scipy.special.erf(x)


def _erfinv(xp, y):
    """The inverse error function: on the GPU CuPy's; on the CPU (no SciPy) Giles' single-precision approximation
    refined by Newton steps in float64 (within 3 ulp): on erf(x) = |y| below 0.5, on log(erfc(x)) = log(1 - |y|) above
    (nearly linear in the tail, where the approximation, made for float32's range, is off by up to 3%: at
    1 - 1e-15); +-inf at +-1, NaN beyond."""
    if xp is not np:
        import cupyx.scipy.special

        return cupyx.scipy.special.erfinv(y)
    y64 = y.astype(np.float64)
    a = np.abs(y64)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = -np.log((1 - a) * (1 + a))
        small, big = w - 2.5, np.sqrt(w) - 3.0
        ps = [2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
              -0.00417768164, 0.246640727, 1.50140941]
        pb = [-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
              0.00943887047, 1.00167406, 2.83297682]
        p_small, p_big = np.full_like(a, ps[0]), np.full_like(a, pb[0])
        for cs, cb in zip(ps[1:], pb[1:]):
            p_small, p_big = cs + p_small * small, cb + p_big * big
        x = np.where(w < 5, p_small, p_big) * a
        inside, low = np.isfinite(x), a < 0.5
        for _ in range(4):
            x0 = np.where(inside, x, 0.0)
            d = 2 / _SQRT_PI * np.exp(-x0 * x0)
            step = np.empty_like(x0)
            step[low] = (erf64(x0[low]) - a[low]) / d[low]
            c = erfc64(x0[~low])
            step[~low] = (np.log(c) - np.log1p(-a[~low])) * c / -d[~low]
            x = np.where(inside, x - step, x)
        x = np.where(a == 1, np.inf, x)
        return np.copysign(np.where(a > 1, np.nan, x), y64).astype(y.dtype)


# ---------------------------------------------------------------- unary Functions
class _Unary(Function):
    """y = f(x) elementwise. ``saves`` names what ``grad`` reads ("x" and/or "y"); ``flat``: a zero
    gradient (rounding and sign are flat almost everywhere; PyTorch defines their gradient as 0).

    Under ``create_graph`` the same ``grad`` runs on graph tensors, with :data:`_TENSOR_MATH` (the array module's
    functions it calls, as recorded tensor ops) for ``xp``; ``graph_grad``, where set, replaces it there (a formula
    that calls kernels on arrays: lgamma's digamma ...)."""

    saves = ()
    flat = False
    graph_grad = None

    @staticmethod
    def f(xp, x, *params):
        raise NotImplementedError

    @staticmethod
    def grad(xp, g, *saved):
        raise NotImplementedError

    @classmethod
    def forward(cls, ctx, x, *params, out=None):
        y = _wide(cls.f, x.dtype, x, *params)
        if ctx.recording:
            # the in-place form overwrites x with y: keep a copy of x where the backward reads it
            x_kept = backend.copy(x) if out is x and "x" in cls.saves else x
            ctx.save_for_backward(*[x_kept if s == "x" else y for s in cls.saves])
            ctx.n_params = len(params)
        return y

    @classmethod
    def backward(cls, ctx, g):
        if cls.flat:
            gx = _xp(g).zeros_like(g)
        else:
            gx = _wide(cls.grad, g.dtype, g, *ctx.saved_tensors)
        return (gx,) + (None,) * ctx.n_params

    @classmethod
    def backward_graph(cls, ctx, g):
        if cls.flat:
            return (_zeros_graph(g, g.shape),) + (None,) * ctx.n_params
        saved = [ctx.graph_input(0, s) if name == "x" else ctx.graph_output(s)
                 for name, s in zip(cls.saves, ctx.saved_tensors)]
        return (cls.graph_gradient(g, *saved),) + (None,) * ctx.n_params

    @classmethod
    def graph_gradient(cls, g, *saved):
        """``grad`` (or ``graph_grad``) on graph tensors; 16-bit floats in float32 (the result is cast back to the
        input's dtype by the walk)."""
        half = (backend.float16, backend.bfloat16)
        g, *saved = [cast(t, backend.float32) if isinstance(t, Tensor) and t.dtype in half else t for t in (g, *saved)]
        return (cls.graph_grad or cls.grad)(_TENSOR_MATH, g, *saved)


def _wide(fn, dtype, *arrays):
    """``fn(xp, *arrays)`` in ``dtype``; bfloat16 math runs in float32 (CuPy implements few functions
    for bfloat16), rounded back once."""
    xp = _xp(arrays[0])
    if dtype != backend.bfloat16:
        return fn(xp, *arrays).astype(dtype, copy=False)
    wide = [a.astype(np.float32) if hasattr(a, "dtype") else a for a in arrays]
    return fn(xp, *wide).astype(dtype)


def _unary(name, f, grad=None, saves=()):
    """A :class:`_Unary` subclass; without ``grad``, a flat one."""
    return type(name, (_Unary,), {"f": staticmethod(f), "grad": staticmethod(grad or _Unary.grad),
                                  "saves": saves, "flat": grad is None})


_SQRT_PI = math.sqrt(math.pi)
Sin = _unary("Sin", lambda xp, x: xp.sin(x), lambda xp, g, x: g * xp.cos(x), "x")
Cos = _unary("Cos", lambda xp, x: xp.cos(x), lambda xp, g, x: -g * xp.sin(x), "x")
Tan = _unary("Tan", lambda xp, x: xp.tan(x), lambda xp, g, y: g * (1 + y * y), "y")
Asin = _unary("Asin", lambda xp, x: xp.arcsin(x), lambda xp, g, x: g / xp.sqrt(1 - x * x), "x")
Acos = _unary("Acos", lambda xp, x: xp.arccos(x), lambda xp, g, x: -g / xp.sqrt(1 - x * x), "x")
Atan = _unary("Atan", lambda xp, x: xp.arctan(x), lambda xp, g, x: g / (1 + x * x), "x")
Sinh = _unary("Sinh", lambda xp, x: xp.sinh(x), lambda xp, g, x: g * xp.cosh(x), "x")
Cosh = _unary("Cosh", lambda xp, x: xp.cosh(x), lambda xp, g, x: g * xp.sinh(x), "x")
Log2 = _unary("Log2", lambda xp, x: xp.log2(x), lambda xp, g, x: g / (x * math.log(2)), "x")
Log10 = _unary("Log10", lambda xp, x: xp.log10(x), lambda xp, g, x: g / (x * math.log(10)), "x")
Log1p = _unary("Log1p", lambda xp, x: xp.log1p(x), lambda xp, g, x: g / (1 + x), "x")
Expm1 = _unary("Expm1", lambda xp, x: xp.expm1(x), lambda xp, g, y: g * (y + 1), "y")
Rsqrt = _unary("Rsqrt", lambda xp, x: 1 / xp.sqrt(x), lambda xp, g, y: -0.5 * g * y * y * y, "y")
Square = _unary("Square", lambda xp, x: x * x, lambda xp, g, x: 2 * g * x, "x")
Erf = _unary("Erf", _erf, lambda xp, g, x: g * (2 / _SQRT_PI) * xp.exp(-x * x), "x")
Erfinv = _unary("Erfinv", _erfinv, lambda xp, g, y: g * (_SQRT_PI / 2) * xp.exp(y * y), "y")
Frac = _unary("Frac", lambda xp, x: x - xp.trunc(x), lambda xp, g: g, ())
Floor = _unary("Floor", lambda xp, x: xp.floor(x))
Ceil = _unary("Ceil", lambda xp, x: xp.ceil(x))
Trunc = _unary("Trunc", lambda xp, x: xp.trunc(x))
Sign = _unary("Sign", sign_of)


def _round(xp, x, decimals=0):
    """NumPy's and CuPy's round: half to even, scaled by 10**decimals, as PyTorch's; float16 scaled in float32, as
    PyTorch computes it (``1234.5 * 100`` overflows float16)."""
    if decimals and x.dtype == np.float16:
        return xp.round(x.astype(np.float32), decimals)
    return xp.round(x, decimals)


Round = _unary("Round", _round)


class Reciprocal(_Unary):
    """1 / x. Its gradient is PyTorch's ``-g * (y * y)``, each product rounded in the dtype (bfloat16's in float32,
    rounded after each): y squared first, so that at a tiny x it overflows to infinity as there (``(-g * y) * y``
    would stay finite for a small g)."""

    saves = ("y",)

    @staticmethod
    def f(xp, x):
        return 1 / x

    @classmethod
    def backward(cls, ctx, g):
        y, = ctx.saved_tensors
        square = _wide(lambda xp, y: y * y, y.dtype, y)
        return (_wide(lambda xp, g, square: -g * square, g.dtype, g, square),)

    @staticmethod
    def graph_grad(xp, g, y):
        return -g * (y * y)


# ---------------------------------------------------------------- public unary ops
def _check(name, x):
    if not isinstance(x, Tensor):
        raise InputTypeError(f"{name}(): argument 'input' must be Tensor, not {type(x).__name__}")


def _float_op(fn, name, cuda_float32=False):
    """Integer and bool input becomes the default dtype (float32 unless set), as in ``torch.sin``."""
    def op(input):
        _check(name, input)
        if cuda_float32:  # (on PyTorch's cuda autocast float32 list)
            (input,) = autocast_float32_on_cuda(input)
        if not backend.is_floating(input.dtype):
            input = cast(input, backend.get_default_dtype())
        return fn.apply(input)

    op.__name__ = name
    return op


def _no_bool(name, x):
    """PyTorch's rounding ops have no bool kernel (its NotImplementedError)."""
    if x.dtype == backend.bool_:
        raise DtypeNotImplementedError(f"{name}: not implemented for bool tensors (cast them with .long() or "
                                       f".float())")


def _exact_op(fn, name):
    """Integers stay integers (nothing to round); bool is refused, as PyTorch's."""
    def op(input, *params):
        _check(name, input)
        _no_bool(name, input)
        if not backend.is_floating(input.dtype):
            return clone(input)
        return fn.apply(input, *params)

    op.__name__ = name
    return op


sin = _float_op(Sin, "sin")
cos = _float_op(Cos, "cos")
tan = _float_op(Tan, "tan", cuda_float32=True)
asin = _float_op(Asin, "asin", cuda_float32=True)
acos = _float_op(Acos, "acos", cuda_float32=True)
atan = _float_op(Atan, "atan")
sinh = _float_op(Sinh, "sinh", cuda_float32=True)
cosh = _float_op(Cosh, "cosh", cuda_float32=True)
log2 = _float_op(Log2, "log2", cuda_float32=True)
log10 = _float_op(Log10, "log10", cuda_float32=True)
log1p = _float_op(Log1p, "log1p", cuda_float32=True)
expm1 = _float_op(Expm1, "expm1", cuda_float32=True)
rsqrt = _float_op(Rsqrt, "rsqrt", cuda_float32=True)
reciprocal = _float_op(Reciprocal, "reciprocal", cuda_float32=True)
erf = _float_op(Erf, "erf")
erfinv = _float_op(Erfinv, "erfinv", cuda_float32=True)
floor = _exact_op(Floor, "floor")
ceil = _exact_op(Ceil, "ceil")
trunc = _exact_op(Trunc, "trunc")


def _round_args(name, x, decimals):
    _check(name, x)
    decimals = host_int(decimals)
    if not isinstance(decimals, numbers.Integral) or isinstance(decimals, bool):
        raise InputTypeError(f"{name}(): decimals must be an int, got {type(decimals).__name__}")
    _no_bool(name, x)
    if decimals and not backend.is_floating(x.dtype):
        raise DtypeNotImplementedError(f"{name}: decimals is only supported for floating-point tensors, got "
                                       f"{x.dtype}")
    return int(decimals)


def round(input, decimals=0):  # noqa: A001 - PyTorch's name
    """Half to even; ``decimals`` digits after the point (negative: before it)."""
    decimals = _round_args("round", input, decimals)
    return Round.apply(input, decimals) if backend.is_floating(input.dtype) else clone(input)


def sign(input):
    """-1, 0 or 1 in ``input``'s dtype (bool stays bool; 0 at NaN, as PyTorch's); zero gradient."""
    _check("sign", input)
    if input.dtype == backend.bool_:
        return clone(input)
    return Sign.apply(input)


sgn = sign  # the same for real tensors (PyTorch's sgn differs for complex ones only)

# the array module's functions that the _Unary gradients call, as recorded tensor ops (see _Unary)
_TENSOR_MATH = types.SimpleNamespace(sin=sin, cos=cos, sinh=sinh, cosh=cosh, sqrt=sqrt, exp=exp, log=log, sign=sign)


def frac(input):
    _check("frac", input)
    if not backend.is_floating(input.dtype):
        raise DtypeNotImplementedError(f"frac: only floating-point tensors are supported, got {input.dtype}")
    return Frac.apply(input)


def square(input):
    """x * x; integers stay integers and bool becomes int64, as in PyTorch (whose square is pow(x, 2): on its
    cuda autocast float32 list)."""
    _check("square", input)
    (input,) = autocast_float32_on_cuda(input)
    if input.dtype == backend.bool_:
        input = cast(input, backend.int64)
    if not backend.is_floating(input.dtype):
        return mul(input, input)
    return Square.apply(input)


def _inplace(fn, name, exact=False):
    """``x.<name>()``: the op written into ``x`` (returned), recorded like the out-of-place form.
    ``exact``: integer tensors are allowed (rounding leaves them as they are; sign is computed)."""
    def op(x, *params):
        _check(name, x)
        if not backend.is_floating(x.dtype):
            if fn is Frac:  # (PyTorch's frac has no integer kernel, not a cast error)
                raise DtypeNotImplementedError(f"{name}: only floating-point tensors are supported, got {x.dtype}")
            if not exact:
                raise RuntimeError(f"{name}: result type float32 can't be cast to the desired output type "
                                   f"{x.dtype} (the in-place form keeps the tensor's dtype)")
            if fn is not Sign:
                _no_bool(name, x)
            if fn is not Sign or x.dtype == backend.bool_:
                x._check_inplace(name)
                return x._bump(name)
        return fn.apply_(name, x, *params)

    op.__name__ = name
    return op


_INPLACE = {name: _inplace(fn, name + "_") for name, fn in (
    ("sin", Sin), ("cos", Cos), ("tan", Tan), ("asin", Asin), ("acos", Acos), ("atan", Atan), ("sinh", Sinh),
    ("cosh", Cosh), ("log2", Log2), ("log10", Log10), ("log1p", Log1p), ("expm1", Expm1), ("rsqrt", Rsqrt),
    ("reciprocal", Reciprocal), ("erf", Erf), ("erfinv", Erfinv), ("frac", Frac), ("square", Square))}
_INPLACE.update({name: _inplace(fn, name + "_", exact=True) for name, fn in (
    ("floor", Floor), ("ceil", Ceil), ("trunc", Trunc), ("round", Round), ("sign", Sign), ("sgn", Sign))})


def _square_(x):
    """``x.square_()``: an integer tensor squared in its dtype (``x.mul_(x)``, as PyTorch's); bool refused."""
    if x.dtype.kind in "iu":
        return x.mul_(x)
    return _inplace(Square, "square_")(x)


_INPLACE["square"] = _square_


def _round_(x, decimals=0):
    return _INPLACE["round"](x, _round_args("round_", x, decimals))


# ---------------------------------------------------------------- binary ops
class Atan2(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _xp(a).arctan2(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        xp = _xp(g)
        na, nb = ctx.needs_input_grad
        with np.errstate(divide="ignore"):
            recip = 1 / (a * a + b * b)
        # PyTorch's: a zero gradient where 1 / (a**2 + b**2) is infinite (at the origin, where the angle is undefined)
        recip = backend.where(xp.isinf(recip), recip.dtype.type(0), recip)
        return (unbroadcast((g * b * recip).astype(g.dtype, copy=False), a.shape) if na else None,
                unbroadcast((-g * a * recip).astype(g.dtype, copy=False), b.shape) if nb else None)

    @staticmethod
    def backward_graph(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        at, bt = ctx.graph_input(0, a), ctx.graph_input(1, b)
        with np.errstate(divide="ignore"):
            origin = _xp(a).isinf(1 / (a * a + b * b))
        recip = where(_const(origin), 0, 1 / (at * at + bt * bt))
        return (unbroadcast_graph(g * bt * recip, a.shape) if na else None,
                unbroadcast_graph(-g * at * recip, b.shape) if nb else None)


def atan2(input, other):  # noqa: A002 - PyTorch's names
    """The angle of (other, input) in (-pi, pi]; integer tensors give the default dtype (float32 unless set)."""
    for arg, t in (("input", input), ("other", other)):
        if not isinstance(t, Tensor):
            raise InputTypeError(f"atan2(): argument '{arg}' must be Tensor, not {type(t).__name__}")
    return Atan2.apply(*float_operands("atan2", input, other))


class _Division(Function):
    """a // b (``floor``), a % b (Python's sign: the divisor's), fmod (C's sign: the dividend's) and a / b rounded
    toward zero (``div(rounding_mode='trunc')`` of floating-point operands).

    Gradients as PyTorch defines them: 1 for ``a``; ``-quotient`` (rounded the op's way) for ``b``;
    zero for the two rounded quotients (``flat``: they are flat almost everywhere, also where ``b`` is 0)."""

    flat = False

    @classmethod
    def values(cls, xp, a, b):
        return getattr(xp, cls.ufunc)(a, b)

    @classmethod
    def forward(cls, ctx, a, b):
        xp = _xp(a if hasattr(a, "shape") else b)
        ctx.shapes = (getattr(a, "shape", None), getattr(b, "shape", None))
        if ctx.needs_input_grad[1] and not cls.flat:
            ctx.save_for_backward(a, b)
        with np.errstate(divide="ignore", invalid="ignore"):  # x // 0 and x % 0 give inf / nan as in PyTorch
            return cls.values(xp, a, b)

    @classmethod
    def backward(cls, ctx, g):
        xp = _xp(g)
        na, nb = ctx.needs_input_grad
        ga = gb = None
        if na:
            ga = unbroadcast(xp.zeros_like(g) if cls.flat else g, ctx.shapes[0])
        if nb and cls.flat:
            gb = unbroadcast(xp.zeros_like(g), ctx.shapes[1])
        elif nb:
            a, b = ctx.saved_tensors
            with np.errstate(divide="ignore", invalid="ignore"):
                q = xp.floor(a / b) if cls is Remainder else xp.trunc(a / b)
            gb = unbroadcast((-g * q).astype(g.dtype, copy=False), ctx.shapes[1])
        return ga, gb

    @classmethod
    def backward_graph(cls, ctx, g):
        na, nb = ctx.needs_input_grad
        ga = gb = None
        if na:
            ga = _zeros_graph(g, ctx.shapes[0]) if cls.flat else unbroadcast_graph(g, ctx.shapes[0])
        if nb and cls.flat:
            gb = _zeros_graph(g, ctx.shapes[1])
        elif nb:
            a, b = ctx.saved_tensors
            xp = g._xp
            with np.errstate(divide="ignore", invalid="ignore"):  # (the quotient: piecewise constant)
                q = xp.floor(a / b) if cls is Remainder else xp.trunc(a / b)
            gb = unbroadcast_graph(-g * _const(q), ctx.shapes[1])
        return ga, gb


class FloorDivide(_Division):
    """floor(a / b); float16 and bfloat16 divided in float32 and rounded once, as PyTorch computes them (not left to
    the array library's 16-bit ufunc: ml_dtypes 0.7's bfloat16 floor_divide floors a quotient rounded to bfloat16
    first, so -4.8125 // 0.3 gave -16, not -17)."""

    ufunc = "floor_divide"
    flat = True

    @classmethod
    def values(cls, xp, a, b):
        dtype = (a if hasattr(a, "shape") else b).dtype
        if dtype.itemsize < 4 and backend.is_floating(dtype):
            a, b = (v.astype(np.float32) if hasattr(v, "shape") else v for v in (a, b))
            return xp.asarray(xp.floor_divide(a, b)).astype(dtype, copy=False)
        return xp.floor_divide(a, b)


class TruncDivide(_Division):
    """trunc(a / b) of floating-point operands; float16 and bfloat16 divided and truncated in float32 and rounded
    once (a Python number unrounded), as PyTorch computes them."""

    flat = True

    @classmethod
    def values(cls, xp, a, b):
        dtype = (a if hasattr(a, "shape") else b).dtype
        if dtype.itemsize < 4:
            a, b = (v.astype(np.float32) if hasattr(v, "shape") else v for v in (a, b))
        return xp.asarray(xp.trunc(a / b)).astype(dtype, copy=False)


class Remainder(_Division):
    """a - b * floor(a / b); floating-point operands from C's fmod as PyTorch computes them, so that a zero keeps the
    dividend's sign (``0.0 % -1`` is 0.0 and ``-2.0 % 1`` is -0.0 there; NumPy's remainder gives the divisor's)."""

    ufunc = "remainder"

    @classmethod
    def values(cls, xp, a, b):
        if not backend.is_floating((a if hasattr(a, "shape") else b).dtype):
            return xp.remainder(a, b)
        mod = xp.fmod(a, b)
        return xp.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod)


class Fmod(_Division):
    ufunc = "fmod"


def _division(fn, name):
    """The op on promoted operands: integers refuse a zero divisor on the cpu as PyTorch's; a bfloat16 tensor with a
    Python number gives bfloat16, the number rounded to bfloat16 first for ``%`` and ``fmod`` (not for ``//`` or the
    truncated quotient), as PyTorch computes them."""
    def op(input, other):  # noqa: A002 - PyTorch's names
        a, b = binary_operands(name, input, other)
        dtype = (a if isinstance(a, Tensor) else b).dtype
        if dtype == backend.bool_:  # (PyTorch's NotImplementedError: no bool kernel)
            raise DtypeNotImplementedError(f"{name}: not implemented for bool tensors (cast them with .long() or "
                                           f".float())")
        check_integer_divisor(name, a, b)
        if dtype == backend.bfloat16 and fn in (Remainder, Fmod):
            a, b = bfloat16_rounded(dtype, a), bfloat16_rounded(dtype, b)
        return _in_tensor_dtype(fn.apply(a, b), a, b)

    op.__name__ = name
    return op


floor_divide = _division(FloorDivide, "floor_divide")
trunc_divide = _division(TruncDivide, "divide")  # floating-point operands only (``divide`` routes integers apart)
remainder = _division(Remainder, "remainder")
fmod = _division(Fmod, "fmod")


def _swapped(fn):
    return lambda self, other: fn(other, self)


# ---------------------------------------------------------------- lerp, addcmul, addcdiv
def _floating_operands(name, **tensors):
    for arg, t in tensors.items():
        if not isinstance(t, Tensor):
            raise InputTypeError(f"{name}(): argument '{arg}' must be Tensor, not {type(t).__name__}")
    dtypes = {t.dtype for t in tensors.values()}
    if len(dtypes) != 1 or not backend.is_floating(next(iter(dtypes))):
        # one integer or bool dtype: PyTorch's NotImplementedError (no kernel for it); mixed dtypes: its RuntimeError
        raise (DtypeNotImplementedError if len(dtypes) == 1 else RuntimeError)(
            f"{name}(): expected floating-point tensors of one dtype, got "
            f"{', '.join(f'{k} {v.dtype}' for k, v in tensors.items())}")


def _opmath(dtype):
    """The dtype PyTorch's lerp, addcmul and addcdiv kernels compute a floating dtype in: float32 for float16 and
    bfloat16 (the result rounded back once, and no overflow of an intermediate), the dtype itself otherwise."""
    return backend.float32 if dtype in (backend.float16, backend.bfloat16) else dtype


def _fma(a, b, c):
    """``a * b + c`` as the fused multiply-add of PyTorch's lerp and addcmul kernels rounds it: ``b`` and ``c``
    float32 tensors (``a`` one too, or a number that float32 holds exactly) multiplied exactly and added in float64,
    rounded to float32 once. float64 operands (no wider dtype here) are multiplied and added apart."""
    if b.dtype != backend.float32:
        return a * b + c
    wide = backend.float64
    return cast(cast(a, wide) * cast(b, wide) + cast(c, wide) if isinstance(a, Tensor) else
                a * cast(b, wide) + cast(c, wide), backend.float32)


def lerp(input, end, weight):  # noqa: A002 - PyTorch's names
    """``input + weight * (end - input)`` as ``torch.lerp`` computes it: ``weight * (end - input) + input`` where
    ``|weight| < 0.5``, else ``(weight - 1) * (end - input) + end`` (so a weight of 1 gives ``end`` exactly), in one
    fused multiply-add (:func:`_fma`); float16 and bfloat16 in float32, rounded once (:func:`_opmath`)."""
    if isinstance(weight, Tensor):
        _floating_operands("lerp", input=input, end=end)
        if weight.ndim == 0 and weight.dtype != input.dtype:
            # a 0-d weight takes part in the promotion as PyTorch's: a float64 (or integer) one beside float32
            # tensors gives float32
            dtype = promote_operands(input.dtype, input.ndim == 0 and end.ndim == 0, weight.dtype, True)
            input, end, weight = cast(input, dtype), cast(end, dtype), cast(weight, dtype)
        _floating_operands("lerp", input=input, end=end, weight=weight)
    elif not isinstance(weight, numbers.Real):  # (a bool weight is 0 or 1, as in PyTorch)
        raise InputTypeError(f"lerp(): argument 'weight' must be a number or a Tensor, got {type(weight).__name__}")
    else:
        _floating_operands("lerp", input=input, end=end)
    shape = broadcast_shape("lerp", input.shape, end.shape)  # (checked here: the composition would name its ops)
    if isinstance(weight, Tensor):
        broadcast_shape("lerp", shape, weight.shape)
    dtype = input.dtype
    wide = _opmath(dtype)
    start, stop = cast(input, wide), cast(end, wide)
    diff = stop - start
    if isinstance(weight, Tensor):
        w = cast(weight, wide)
        small = w.abs() < 0.5
        out = _fma(where(small, w, w - 1), diff, where(small, start, stop))
    else:
        w = wide.type(weight)  # (the weight in the computing dtype, as PyTorch's kernel takes it)
        small = abs(w) < 0.5
        out = _fma(float(w if small else w - wide.type(1)), diff, start if small else stop)
    return cast(out, dtype)


class Hypot(Function):
    """``xp.hypot``: no overflow or underflow of the squares (float16 ``hypot(300, 400)`` is 500, not inf), and
    ``hypot(inf, nan)`` is inf. Gradients ``a / out`` and ``b / out``: NaN where both are 0 (or both infinite), as
    PyTorch's."""

    @staticmethod
    def forward(ctx, a, b):
        out = _wide(lambda xp, a, b: xp.hypot(a, b), a.dtype, a, b)
        ctx.save_for_backward(a, b, out)
        return out

    @staticmethod
    def backward(ctx, g):
        a, b, out = ctx.saved_tensors
        grads = []
        for x, needed in zip((a, b), ctx.needs_input_grad):
            if needed:
                with np.errstate(divide="ignore", invalid="ignore"):
                    gx = _wide(lambda xp, g, x, out: g * (x / out), g.dtype, g, x, out)
                grads.append(unbroadcast(gx, x.shape))
            else:
                grads.append(None)
        return tuple(grads)

    @staticmethod
    def backward_graph(ctx, g):
        a, b, out = ctx.saved_tensors
        y = ctx.graph_output(out)
        return tuple(unbroadcast_graph(g * (ctx.graph_input(i, x) / y), x.shape) if needed else None
                     for i, (x, needed) in enumerate(zip((a, b), ctx.needs_input_grad)))


def hypot(input, other):  # noqa: A002 - PyTorch's names
    """``sqrt(input**2 + other**2)``, elementwise (broadcast; the dtypes promoted, the result floating-point)."""
    for arg, t in (("input", input), ("other", other)):
        if not isinstance(t, Tensor):
            raise InputTypeError(f"hypot(): argument '{arg}' must be Tensor, not {type(t).__name__}")
    a, b = binary_operands("hypot", input, other)
    if not backend.is_floating(a.dtype):
        raise NotImplementedError(f"hypot: not implemented for {np.dtype(a.dtype).name} tensors (expected "
                                  f"floating-point tensors)")
    return Hypot.apply(a, b)


def _addc(name, input, tensor1, tensor2, value, divide):  # noqa: A002 - PyTorch's names
    """``input + value * tensor1 * tensor2`` (``/ tensor2`` where ``divide``) as PyTorch's addcmul / addcdiv kernels
    compute it: in the three tensors' promoted dtype (float16 and bfloat16 in float32, rounded once), ``value *
    tensor1`` first; addcmul's multiply-add fused (:func:`_fma`). An integer result takes the value truncated into
    its dtype, as PyTorch casts it (NaN or a value out of range refused); bool tensors are refused, and so is
    addcdiv of integer tensors."""
    for arg, t in (("input", input), ("tensor1", tensor1), ("tensor2", tensor2)):
        if not isinstance(t, Tensor):
            raise InputTypeError(f"{name}(): argument '{arg}' must be Tensor, not {type(t).__name__}")
    value = number_arg(name, "value", value)
    if divide and not backend.is_floating(tensor1.dtype) and not backend.is_floating(tensor2.dtype):
        raise RuntimeError("addcdiv: integer division with addcdiv is no longer supported (tensor1 and tensor2 are "
                           f"{tensor1.dtype} and {tensor2.dtype}); for the historic behavior use (input + value * "
                           "trunc(tensor1 / tensor2)).to(input.dtype), for true division input + value * tensor1 / "
                           "tensor2")
    both_0d = tensor1.ndim == 0 and tensor2.ndim == 0
    dtype = promote_operands(tensor1.dtype, tensor1.ndim == 0, tensor2.dtype, tensor2.ndim == 0)
    dtype = promote_operands(input.dtype, input.ndim == 0, dtype, both_0d)
    if dtype == backend.bool_:
        raise NotImplementedError(f"{name}: not implemented for bool tensors (cast them with .long() or .float())")
    wide = _opmath(dtype) if backend.is_floating(dtype) else dtype
    value = backend.integer_fill(name, value, dtype)  # (truncated into an integer dtype, refused where it does not fit)
    base, t1, t2 = cast(input, wide), cast(tensor1, wide), cast(tensor2, wide)
    scaled = t1 if type(value) in (int, float) and value == 1 else t1 * value
    if divide:
        out = base + scaled / t2
    else:
        out = _fma(scaled, t2, base) if backend.is_floating(wide) else base + scaled * t2
    return cast(out, dtype)


def addcmul(input, tensor1, tensor2, *, value=1):  # noqa: A002 - PyTorch's names
    """``input + value * tensor1 * tensor2`` (see :func:`_addc`)."""
    return _addc("addcmul", input, tensor1, tensor2, value, False)


def addcdiv(input, tensor1, tensor2, *, value=1):  # noqa: A002 - PyTorch's names
    """``input + value * tensor1 / tensor2`` (see :func:`_addc`)."""
    return _addc("addcdiv", input, tensor1, tensor2, value, True)


__all__ = ["sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "atan2", "floor", "ceil", "round", "trunc",
           "frac", "sign", "sgn", "log2", "log10", "log1p", "expm1", "rsqrt", "reciprocal", "square", "erf", "erfinv",
           "floor_divide", "remainder", "fmod", "lerp", "addcmul", "addcdiv", "hypot"]
METHODS = {name: globals()[name] for name in __all__}
METHODS.update({name + "_": fn for name, fn in _INPLACE.items()})
METHODS.update({
    "round_": _round_, "arctan2": atan2,
    "__floordiv__": floor_divide, "__rfloordiv__": _swapped(floor_divide),
    "__mod__": remainder, "__rmod__": _swapped(remainder),
    "__ifloordiv__": written_into("__ifloordiv__", floor_divide), "__imod__": written_into("__imod__", remainder),
    "floor_divide_": written_into("floor_divide_", floor_divide), "remainder_": written_into("remainder_", remainder),
    "fmod_": written_into("fmod_", fmod),
    "lerp_": written_into("lerp_", lerp), "addcmul_": written_into("addcmul_", addcmul),
    "addcdiv_": written_into("addcdiv_", addcdiv),
    "where": lambda self, condition, other: where(condition, self, other),
    "new_zeros": new_zeros, "new_ones": new_ones, "new_full": new_full, "new_empty": new_empty,
    "new_tensor": new_tensor, "is_floating_point": is_floating_point,
})
