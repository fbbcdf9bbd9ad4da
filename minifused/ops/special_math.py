"""Special functions with their gradients: the inverse hyperbolic functions (``acosh``, ``asinh``, ``atanh``) and
PyTorch's ``arc*`` spellings of the inverse trigonometric ones, the gamma family (``lgamma``, ``digamma``,
``polygamma``, ``mvlgamma``, ``igamma`` / ``igammac``), ``i0``, and, for ``minifused.special``, ``i0e``, ``i1``,
``i1e``, ``erfcx``, ``log_ndtr``, ``ndtri``, ``entr`` and the Hurwitz ``zeta``. The values come from
``kernels/special_math.py``.

Dtypes follow PyTorch: integer input gives the default dtype (float32 unless set); float16 / bfloat16 compute in
float32 (on the cpu in float64) and round once. Gradients are PyTorch's formulas (``lgamma' = digamma``,
``i1'(0) = 1/2`` ...); where PyTorch has none (``igamma`` / ``igammac`` with respect to ``input``, ``zeta`` with
respect to ``input``) the backward raises NotImplementedError, as PyTorch's does. In-place forms (``x.lgamma_()``,
``x.atan2_(y)`` ...) are recorded (``acosh_`` / ``asinh_`` / ``atanh_`` too, whose backward PyTorch leaves
unimplemented).
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import backend
from ..kernels import special_math as kernels
from ..tensor import Tensor
from ._common import _category, autocast_float32_on_cuda, cast, unbroadcast_graph
from .elementwise import clone, exp, log, where
from .inplace_arith import CopyInto
from .pointwise import Acos, Asin, Atan, _check, _float_op, _inplace, _Unary, _unary, _wide, acos, asin, atan, atan2
from .special import _f32, _Binary, _binary_, _float_binary
from ..backend import InputTypeError

_SQRT_PI = math.sqrt(math.pi)
_SQRT_2PI = math.sqrt(2 * math.pi)


def _xp(x):
    return backend.array_module(x)


def _values(fn):
    """A kernel function as a _Unary ``f`` (the kernels keep 16-bit dtypes and compute wider themselves)."""
    return lambda xp, x: fn(x)


# ---------------------------------------------------------------- unary Functions (pointwise's _Unary protocol)
Acosh = _unary("Acosh", _f32(lambda xp, x: xp.arccosh(x)), _f32(lambda xp, g, x: g / xp.sqrt(x * x - 1)), "x")
Asinh = _unary("Asinh", _f32(lambda xp, x: xp.arcsinh(x)), _f32(lambda xp, g, x: g / xp.sqrt(x * x + 1)), "x")
Atanh = _unary("Atanh", _f32(lambda xp, x: xp.arctanh(x)), _f32(lambda xp, g, x: g / (1 - x * x)), "x")
Lgamma = _unary("Lgamma", _values(kernels.lgamma), _f32(lambda xp, g, x: g * kernels.digamma(x)), "x")
Digamma = _unary("Digamma", _values(kernels.digamma), _f32(lambda xp, g, x: g * kernels.polygamma(1, x)), "x")
I0 = _unary("I0", _values(kernels.i0), _f32(lambda xp, g, x: g * kernels.i1(x)), "x")
I0e = _unary("I0e", _values(kernels.i0e), _f32(lambda xp, g, x, y: g * (kernels.i1e(x) - xp.sign(x) * y)), ("x", "y"))
# at 0 the limits, 1/2, as PyTorch's
I1 = _unary("I1", _values(kernels.i1),
            _f32(lambda xp, g, x, y: g * backend.where(x == 0, 0.5, kernels.i0(x) - y / x)), ("x", "y"))
I1e = _unary("I1e", _values(kernels.i1e),
             _f32(lambda xp, g, x, y: g * backend.where(x == 0, 0.5, kernels.i0e(x) - y * (xp.sign(x) + 1 / x))),
             ("x", "y"))
Erfcx = _unary("Erfcx", _values(kernels.erfcx), _f32(lambda xp, g, x, y: g * (2 * x * y - 2 / _SQRT_PI)), ("x", "y"))
# PyTorch's form: exp(-x**2/2) / (sqrt(2 pi) ndtr(x)) with ndtr as exp(log_ndtr), finite far into the left tail
LogNdtr = _unary("LogNdtr", _values(kernels.log_ndtr),
                 _f32(lambda xp, g, x, y: g * xp.exp(-(y + x * x / 2)) / _SQRT_2PI), ("x", "y"))
Ndtri = _unary("Ndtri", _values(kernels.ndtri), _f32(lambda xp, g, y: g * _SQRT_2PI * xp.exp(y * y / 2)), "y")
Entr = _unary("Entr", _values(kernels.entr), _f32(lambda xp, g, x: -g * (xp.log(x) + 1)), "x")
# the gradients that call kernels, written with the ops (see _Unary's graph_grad)
Lgamma.graph_grad = staticmethod(lambda xp, g, x: g * digamma(x))
Digamma.graph_grad = staticmethod(lambda xp, g, x: g * polygamma(1, x))
I0.graph_grad = staticmethod(lambda xp, g, x: g * i1(x))
I0e.graph_grad = staticmethod(lambda xp, g, x, y: g * (i1e(x) - xp.sign(x) * y))
I1.graph_grad = staticmethod(lambda xp, g, x, y: g * where(x == 0, 0.5, i0(x) - y / x))
I1e.graph_grad = staticmethod(lambda xp, g, x, y: g * where(x == 0, 0.5, i0e(x) - y * (xp.sign(x) + 1 / x)))


class _Parametrized(_Unary):
    """y = f(x, param) (polygamma's order n, mvlgamma's p); ``grad(xp, g, x, param)``."""

    saves = ("x",)

    @classmethod
    def forward(cls, ctx, x, param, out=None):
        ctx.param = param
        return super().forward(ctx, x, param, out=out)

    @classmethod
    def backward(cls, ctx, g):
        (x,) = ctx.saved_tensors
        grad = _f32(lambda xp, g, x: cls.grad(xp, g, x, ctx.param))
        return _wide(grad, g.dtype, g, x), None

    @classmethod
    def backward_graph(cls, ctx, g):
        return cls.graph_gradient(g, ctx.graph_input(0, ctx.saved_tensors[0]), ctx.param), None


class Polygamma(_Parametrized):
    @staticmethod
    def f(xp, x, n):
        return kernels.polygamma(n, x)

    @staticmethod
    def grad(xp, g, x, n):
        return g * kernels.polygamma(n + 1, x)

    @staticmethod
    def graph_grad(xp, g, x, n):
        return g * polygamma(n + 1, x)


class Mvlgamma(_Parametrized):
    """log of the multivariate gamma function: sum_j<p lgamma(x - j/2) + p (p - 1) / 4 log(pi)."""

    @staticmethod
    def f(xp, x, p):
        wide = x.astype(np.float32) if x.dtype in (np.float16, backend.bfloat16) else x
        out = sum(kernels.lgamma(wide - j / 2) for j in range(p))
        return out + p * (p - 1) / 4 * math.log(math.pi)

    @staticmethod
    def grad(xp, g, x, p):
        return g * sum(kernels.digamma(x - j / 2) for j in range(p))

    @staticmethod
    def graph_grad(xp, g, x, p):
        return g * sum(digamma(x - j / 2) for j in range(p))


# ---------------------------------------------------------------- public unary ops
acosh = _float_op(Acosh, "acosh")
asinh = _float_op(Asinh, "asinh")
atanh = _float_op(Atanh, "atanh")
lgamma = _float_op(Lgamma, "lgamma")
digamma = _float_op(Digamma, "digamma")
i0 = _float_op(I0, "i0")
i0e = _float_op(I0e, "i0e")
i1 = _float_op(I1, "i1")
i1e = _float_op(I1e, "i1e")
erfcx = _float_op(Erfcx, "erfcx")
log_ndtr = _float_op(LogNdtr, "log_ndtr")
ndtri = _float_op(Ndtri, "ndtri")
entr = _float_op(Entr, "entr")
for _fn, _doc in ((acosh, "The inverse hyperbolic cosine (NaN below 1)."), (asinh, "The inverse hyperbolic sine."),
                  (atanh, "The inverse hyperbolic tangent (+-inf at +-1, NaN beyond)."),
                  (lgamma, "log|Gamma(x)| (+inf at the poles); gradient digamma."),
                  (digamma, "d lgamma / dx; gradient polygamma(1, x)."),
                  (i0, "The modified Bessel function of the first kind, order 0; gradient i1."),
                  (i0e, "e**-|x| i0(x); gradient i1e(x) - sign(x) i0e(x)."),
                  (i1, "The modified Bessel function of the first kind, order 1; gradient i0(x) - i1(x) / x."),
                  (i1e, "e**-|x| i1(x)."), (erfcx, "exp(x**2) erfc(x); gradient 2x erfcx(x) - 2/sqrt(pi)."),
                  (log_ndtr, "log of the standard normal CDF, accurate in both tails."),
                  (ndtri, "The inverse of the standard normal CDF (the argument in [0, 1])."),
                  (entr, "-x log(x) elementwise (0 at 0, -inf below 0).")):
    _fn.__doc__ = _doc + " Integer input gives the default dtype."
arccos, arcsin, arctan, arccosh, arcsinh, arctanh, arctan2 = acos, asin, atan, acosh, asinh, atanh, atan2


def _order(name, value, arg, least):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise InputTypeError(f"{name}(): argument '{arg}' must be int, not {type(value).__name__}")
    if value < least:
        raise RuntimeError(f"{name}: {arg} has to be greater than or equal to {least}, got {value}"
                           if arg == "p" else f"{name}(n, x) does not support negative n, got {value}")
    return int(value)


def _floating(x):
    """Integer input in the default dtype (float32 unless set), as PyTorch's."""
    return x if backend.is_floating(x.dtype) else cast(x, backend.get_default_dtype())


def polygamma(n, input):  # noqa: A002 - PyTorch's names
    """The n-th derivative of digamma (n >= 0); gradient polygamma(n + 1, x). Integer input gives the default
    dtype."""
    n = _order("polygamma", n, "n", 0)
    _check("polygamma", input)
    return Polygamma.apply(_floating(input), n)


def mvlgamma(input, p):  # noqa: A002 - PyTorch's names
    """The log of the multivariate gamma function of dimension p >= 1: sum_j<p lgamma(x - j/2) + p (p-1)/4 log(pi)
    (PyTorch 2.14 no longer checks x > (p-1)/2: the poles give inf). Integer input gives the default dtype."""
    _check("mvlgamma", input)
    (input,) = autocast_float32_on_cuda(input)  # (PyTorch's sums its lgammas: float32 under cuda autocast)
    return Mvlgamma.apply(_floating(input), _order("mvlgamma", p, "p", 1))


# ---------------------------------------------------------------- binary Functions (special's _Binary protocol)
class Igamma(_Binary):
    """The regularized lower incomplete gamma P(a, x); its gradient in x only, as PyTorch's."""

    name, upper = "igamma", False

    @classmethod
    def f(cls, xp, a, x):
        return (kernels.gammaincc if cls.upper else kernels.gammainc)(a, x)

    @classmethod
    def grad(cls, xp, g, a, x, y):
        d = g * xp.exp(kernels.gamma_pdf_log(a, x))
        return None, -d if cls.upper else d

    @classmethod
    def backward(cls, ctx, g):
        if ctx.needs_input_grad[0]:
            raise NotImplementedError(f"the derivative for '{cls.name}: input' is not implemented.")
        return super().backward(ctx, g)

    @classmethod
    def backward_graph(cls, ctx, g):
        if ctx.needs_input_grad[0]:
            raise NotImplementedError(f"the derivative for '{cls.name}: input' is not implemented.")
        a, x, _ = ctx.saved_tensors
        a, x = ctx.graph_input(0, a), ctx.graph_input(1, x)
        d = g * exp((a - 1) * log(x) - x - lgamma(a))  # (kernels.gamma_pdf_log's density)
        return None, unbroadcast_graph(-d if cls.upper else d, ctx.shapes[1])


class Igammac(Igamma):
    name, upper = "igammac", True


class Zeta(_Binary):
    """The Hurwitz zeta function zeta(x, q); its gradient in q only (-x zeta(x + 1, q)), as PyTorch's."""

    @staticmethod
    def f(xp, x, q):
        return kernels.zeta(x, q)

    @staticmethod
    def grad(xp, g, x, q, y):
        return None, -g * x * kernels.zeta(x + 1, q)

    @classmethod
    def backward(cls, ctx, g):
        if ctx.needs_input_grad[0]:
            raise NotImplementedError("the derivative for 'zeta' is not implemented.")
        return super().backward(ctx, g)

    @classmethod
    def backward_graph(cls, ctx, g):
        if ctx.needs_input_grad[0]:
            raise NotImplementedError("the derivative for 'zeta' is not implemented.")
        x, q, _ = ctx.saved_tensors
        x = ctx.graph_input(0, x)
        return None, unbroadcast_graph(-g * x * zeta(x + 1, ctx.graph_input(1, q)), ctx.shapes[1])


igamma = _float_binary(Igamma, "igamma", scalars=False, integers=False)
igamma.__doc__ = ("The regularized lower incomplete gamma function P(input, other); floating-point tensors. "
                  "Gradient with respect to other only (PyTorch has none for input).")
igammac = _float_binary(Igammac, "igammac", scalars=False, integers=False)
igammac.__doc__ = "The regularized upper incomplete gamma function Q(input, other) = 1 - P(input, other)."
gammainc = _float_binary(Igamma, "gammainc", scalars=False, integers=False)
gammainc.__doc__ = igamma.__doc__
gammaincc = _float_binary(Igammac, "gammaincc", scalars=False, integers=False)
gammaincc.__doc__ = igammac.__doc__
zeta = _float_binary(Zeta, "zeta")
zeta.__doc__ = ("The Hurwitz zeta function sum_k>=0 (other + k)**-input; either side may be a number, integers give "
                "the default dtype. Gradient with respect to other only (PyTorch has none for input).")


# ---------------------------------------------------------------- in-place forms
def recorded_into(name, fn):
    """``fn(self, ...)`` written into self, recorded (as ``copy_`` records it): computed from a clone of self, so
    no array its backward saved is the one overwritten. The result must keep self's kind (no float into an integer
    tensor; a narrower float is fine, as PyTorch's in-place ops) and its shape."""
    def op(self, *args, **kwargs):
        _check(name, self)
        out = fn(clone(self), *args, **kwargs)
        if _category(out.dtype) > _category(self.dtype):
            raise RuntimeError(f"{name}: result type {np.dtype(out.dtype).name} can't be cast to the desired output "
                               f"type {np.dtype(self.dtype).name}")
        if out.shape != self.shape:
            raise RuntimeError(f"{name}: output with shape {list(self.shape)} doesn't match the broadcast shape "
                               f"{list(out.shape)}")
        return CopyInto.apply_(name, self, out)

    op.__name__ = name
    return op


def _parametrized_(name, fn, arg, least):
    def op(self, param):
        _check(name, self)
        param = _order(name, param, arg, least)
        if not backend.is_floating(self.dtype):
            raise RuntimeError(f"{name}: result type float32 can't be cast to the desired output type "
                               f"{np.dtype(self.dtype).name}")
        return fn.apply_(name, self, param)

    op.__name__ = name
    return op


def _tensor_binary_(name, fn):
    """special.py's recorded in-place binary form (``fn(self, other)`` into a floating-point self), with
    ``other`` required to be a tensor, as PyTorch's."""
    written = _binary_(name, fn)

    def op(self, other):
        _check(name, self)
        if not isinstance(other, Tensor):
            raise InputTypeError(f"{name}(): argument 'other' must be Tensor, not {type(other).__name__}")
        return written(self, other)

    op.__name__ = name
    return op


_INPLACE = {name + "_": _inplace(fn, name + "_") for name, fn in (
    ("acosh", Acosh), ("asinh", Asinh), ("atanh", Atanh), ("arccos", Acos), ("arcsin", Asin), ("arctan", Atan),
    ("arccosh", Acosh), ("arcsinh", Asinh), ("arctanh", Atanh), ("lgamma", Lgamma), ("digamma", Digamma),
    ("i0", I0))}
_INPLACE.update({
    "atan2_": recorded_into("atan2_", atan2), "arctan2_": recorded_into("arctan2_", atan2),
    "polygamma_": _parametrized_("polygamma_", Polygamma, "n", 0),
    "mvlgamma_": _parametrized_("mvlgamma_", Mvlgamma, "p", 1),
    "igamma_": _tensor_binary_("igamma_", Igamma), "igammac_": _tensor_binary_("igammac_", Igammac),
})

__all__ = ["acosh", "asinh", "atanh", "arccos", "arcsin", "arctan", "arccosh", "arcsinh", "arctanh", "arctan2",
           "lgamma", "digamma", "polygamma", "mvlgamma", "i0", "igamma", "igammac"]
METHODS = {name: globals()[name] for name in __all__ if name != "polygamma"}
METHODS["polygamma"] = lambda self, n: polygamma(n, self)
METHODS.update(_INPLACE)
