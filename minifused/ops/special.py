"""Special pointwise functions (``erfc``, ``exp2``, ``logit``, ``sinc``, ``xlogy``, ``logaddexp``, ``fmax``,
``copysign``, ``ldexp`` ...), NaN-ignoring reductions (``nansum``, ``nanmean``), ``clamp_min`` / ``clamp_max``,
and the in-place forms PyTorch has that minifused lacked (``exp_``, ``abs_``, ``pow_``, ``clip_``, ``xlogy_`` ...).
PyTorch's other spellings (``multiply``, ``divide``, ``greater`` ...), the in-place comparisons and the tensor
queries are ``aliases.py``'s family.

Dtypes follow PyTorch: integer input gives the default dtype where ``torch.<op>`` does; float16 / bfloat16 compute in
float32 and round once. An in-place form keeps the tensor's dtype (a float result in an integer tensor is an
error); it is recorded for autograd (``Function.apply_``) wherever a ``Function`` computes the op, and otherwise
written into the tensor through ``written_into`` (refused on a tensor that requires grad).
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import backend
from ..autograd import Function
from ..kernels.special_math import erfc64
from ..tensor import Tensor
from ._common import (binary_operands, cast, float_operands, normalize_axis, promote_operands, scalar_result_dtype,
                      shape_of, unbroadcast, unbroadcast_graph)
from .aliases import _not_bool
from .elementwise import (Abs, Clamp, Exp, Log, Neg, Pow, Sigmoid, Sqrt, Tanh, _bool_clamp, _const, _mixed_bounds,
                          _zero_where, _zeros_graph, clamp, div, mul, pow, relu_, sigmoid, where)
from .inplace_arith import _inplace_operand
from .logic import _values, isnan, logical_not, written_into
from .pointwise import _check, _float_op, _inplace, _Unary, _unary
from ..backend import InputTypeError

_SQRT_PI = math.sqrt(math.pi)
_HALF = (np.dtype(np.float16), backend.bfloat16)


def _xp(x):
    return backend.array_module(x)


def _f32(fn):
    """``fn(xp, *arrays)`` with float16 / bfloat16 arrays widened to float32 (the callers round back once)."""
    def wide(xp, *arrays):
        return fn(xp, *[a.astype(np.float32) if getattr(a, "dtype", None) in _HALF else a for a in arrays])
    return wide


def _erfc(xp, x):
    if xp is np:  # NumPy has no erfc: computed in float64 (1 - erf would lose the tail)
        return erfc64(x.astype(np.float64)).astype(x.dtype)
    import cupyx.scipy.special

    return cupyx.scipy.special.erfc(x)


def _wide_graph(t):
    """A graph tensor of float16 / bfloat16 in float32, as the array gradients compute (the walk casts the result
    back); anything else as it is."""
    return cast(t, np.float32) if isinstance(t, Tensor) and t.dtype in _HALF else t


def _sinc_grad(xp, g, x):
    # in float64: the difference cancels, in float32 to a few units in the fifth digit
    w = x.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = (xp.cos(math.pi * w) - xp.sinc(w)) / w
    return g * backend.where(x == 0, 0, d).astype(x.dtype)  # 0 at x == 0, as PyTorch (sinc is flat there)


# ---------------------------------------------------------------- unary Functions (pointwise's _Unary protocol)
Erfc = _unary("Erfc", _f32(_erfc), _f32(lambda xp, g, x: -g * (2 / _SQRT_PI) * xp.exp(-x * x)), "x")
Exp2 = _unary("Exp2", _f32(lambda xp, x: xp.exp2(x)), _f32(lambda xp, g, y: g * y * math.log(2)), "y")
Sinc = _unary("Sinc", _f32(lambda xp, x: xp.sinc(x)), _f32(_sinc_grad), "x")
Deg2rad = _unary("Deg2rad", _f32(lambda xp, x: x * (math.pi / 180)), lambda xp, g: g * (math.pi / 180))
Rad2deg = _unary("Rad2deg", _f32(lambda xp, x: x * (180 / math.pi)), lambda xp, g: g * (180 / math.pi))


class Logit(_Unary):
    """log(z / (1 - z)), z = x clamped to [eps, 1 - eps] when eps is given, as PyTorch's: the bounds in x's dtype
    (1 - 1e-6 is 1 in float16: the log's inf there), x below eps to eps, else above 1 - eps to 1 - eps (for an eps
    past 0.5 too), NaN kept. Gradient as PyTorch's: 0 outside [eps, 1 - eps] with eps; NaN outside [0, 1] without."""

    saves = ("x",)

    @staticmethod
    @_f32
    def f(xp, x, bounds=None):
        z = x if bounds is None else backend.where(x < bounds[0], bounds[0], backend.where(x > bounds[1], bounds[1], x))
        with np.errstate(divide="ignore", invalid="ignore"):
            return xp.log(z / (1 - z))

    @classmethod
    def forward(cls, ctx, x, eps=None, out=None):
        lo = None if eps is None else x.dtype.type(eps)
        ctx.bounds = None if eps is None else (float(lo), float(x.dtype.type(1 - lo)))
        return super().forward(ctx, x, ctx.bounds, out=out)

    @classmethod
    def backward(cls, ctx, g):
        (x,) = ctx.saved_tensors
        lo, hi = ctx.bounds or (0.0, 1.0)
        nan_outside = ctx.bounds is None

        def grad(xp, g, x):
            with np.errstate(divide="ignore", invalid="ignore"):
                return backend.where((x < lo) | (x > hi), math.nan if nan_outside else 0.0, g / (x * (1 - x)))
        return (_f32(grad)(_xp(g), g, x).astype(g.dtype, copy=False), None)

    @classmethod
    def backward_graph(cls, ctx, g):
        (x,) = ctx.saved_tensors
        lo, hi = ctx.bounds or (0.0, 1.0)
        outside = (x < lo) | (x > hi)
        # (the formula at 0.5 where the result is cut: no division by 0 in the branch not selected, nor in its gradient)
        z = where(_const(outside), 0.5, _wide_graph(ctx.graph_input(0, x)))
        return where(_const(outside), math.nan if ctx.bounds is None else 0.0, _wide_graph(g) / (z * (1 - z))), None


erfc = _float_op(Erfc, "erfc")
exp2 = _float_op(Exp2, "exp2")
sinc = _float_op(Sinc, "sinc")
deg2rad = _float_op(Deg2rad, "deg2rad")
rad2deg = _float_op(Rad2deg, "rad2deg")


def _sinc_graph_grad(xp, g, x):
    """_sinc_grad with the ops. At x == 0 it is the derivative's first Taylor term, -pi**2 / 3 * x: 0 as there, and
    its own derivative right (PyTorch's is NaN there); the quotient runs at 1 instead, so that its gradient, which
    where cuts, divides no 0 by 0."""
    at_zero = _const(x._data == 0)
    w = where(at_zero, 1.0, x)
    return g * where(at_zero, x * (-math.pi ** 2 / 3), (xp.cos(math.pi * w) - sinc(w)) / w)


Sinc.graph_grad = staticmethod(_sinc_graph_grad)


def _eps(name, eps):
    if eps is not None and (isinstance(eps, bool) or not isinstance(eps, numbers.Real)):
        raise InputTypeError(f"{name}(): argument 'eps' must be a float or None, not {type(eps).__name__}")
    return None if eps is None else float(eps)


def logit(input, eps=None):  # noqa: A002 - PyTorch's names
    """log(x / (1 - x)); with ``eps``, x is first clamped to [eps, 1 - eps]. Integers give the default dtype (float32
    unless set)."""
    _check("logit", input)
    eps = _eps("logit", eps)
    return Logit.apply(input if backend.is_floating(input.dtype) else cast(input, backend.get_default_dtype()), eps)


def signbit(input):  # noqa: A002 - PyTorch's name
    """Whether the sign bit is set (True for -0.0); bool, no gradient."""
    _check("signbit", input)
    if not backend.is_floating(input.dtype):  # (CuPy's signbit takes floats only)
        return _values(lambda xp, x: xp.asarray(x < 0), input)
    return _values(lambda xp, x: xp.asarray(xp.signbit(x.astype(np.float32) if x.dtype in _HALF else x)), input)


# ---------------------------------------------------------------- binary Functions
class _Binary(Function):
    """y = f(a, b) elementwise (broadcast; one side may be a Python scalar, as a 0-d array of the other's
    dtype); ``grad(xp, g, a, b, y)`` gives both gradients before unbroadcasting. float16 / bfloat16 compute in
    float32. ``out`` (the in-place form, ``out is a``): a copy of ``a`` is saved, as it is overwritten. ``y`` is
    saved (and reaches the gradients) only where ``uses_output`` says so, as PyTorch saves it: the others' results
    may be changed in place before the backward."""
    uses_output = False

    @classmethod
    def forward(cls, ctx, a, b, out=None):
        t = a if hasattr(a, "shape") else b
        xp, dtype = _xp(t), t.dtype
        wide = [v if hasattr(v, "shape") else xp.asarray(v, dtype) for v in (a, b)]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            y = _f32(cls.f)(xp, *wide).astype(dtype, copy=False)
        if ctx.recording:
            ctx.shapes = (shape_of(a), shape_of(b))
            ctx.save_for_backward(backend.copy(wide[0]) if out is a else wide[0], wide[1],
                                  y if cls.uses_output else None)
        return y

    @classmethod
    def backward(cls, ctx, g):
        a, b, y = ctx.saved_tensors
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            grads = _f32(cls.grad)(_xp(g), g, a, b, y)
        return tuple(unbroadcast(d.astype(g.dtype, copy=False), s) if n else None
                     for d, s, n in zip(grads, ctx.shapes, ctx.needs_input_grad))

    @classmethod
    def backward_graph(cls, ctx, g):
        """``graph_grad(g, a, b, arrays)`` gives both gradients as graph tensors of the graph tensors ``a`` and
        ``b`` (16-bit floats in float32); ``arrays``: the saved (a, b, y), for masks (constants)."""
        a, b, y = ctx.saved_tensors
        at, bt = (_wide_graph(ctx.graph_input(i, v)) for i, v in enumerate((a, b)))
        arrays = [v.astype(np.float32) if v is not None and v.dtype in _HALF else v for v in (a, b, y)]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            grads = cls.graph_grad(_wide_graph(g), at, bt, arrays)
        return tuple(unbroadcast_graph(d, s) if n else None
                     for d, s, n in zip(grads, ctx.shapes, ctx.needs_input_grad))


class Xlogy(_Binary):
    @staticmethod
    def f(xp, a, b):
        # 0 where a == 0 (even where b == 0), unless b is NaN
        return backend.where((a == 0) & ~xp.isnan(b), 0, a * xp.log(b))

    @staticmethod
    def grad(xp, g, a, b, y):
        # PyTorch's: xlogy(g, b) for a, but 0 where a == 0 and b <= 0 (log b is -inf or NaN there)
        return backend.where((a == 0) & (b <= 0), 0, Xlogy.f(xp, g, b)), g * a / b

    @staticmethod
    def graph_grad(g, a, b, arrays):
        cut = (arrays[0] == 0) & (arrays[1] <= 0)  # (b at 1 there: no log of 0 in the branch cut, nor its gradient)
        return _zero_where(cut, Xlogy.apply(g, where(_const(cut), 1.0, b))), g * a / b


class LogAddExp(_Binary):
    base = math.e

    @classmethod
    def f(cls, xp, a, b):  # NumPy's and CuPy's: no overflow, -inf with -inf gives -inf
        return xp.logaddexp(a, b) if cls.base == math.e else xp.logaddexp2(a, b)

    @classmethod
    def grad(cls, xp, g, a, b, y):  # PyTorch's form: an overflow gives 0; an infinite input its whole share
        exp = xp.exp if cls.base == math.e else xp.exp2
        return g / (1 + exp(b - a)), g / (1 + exp(a - b))

    @classmethod
    def graph_grad(cls, g, a, b, arrays):
        # the same shares as sigmoids (of the difference times ln 2 for base 2), whose gradients do not overflow
        d = a - b if cls.base == math.e else (a - b) * math.log(2)
        return g * sigmoid(d), g * sigmoid(-d)


class LogAddExp2(LogAddExp):
    base = 2.0


class Copysign(_Binary):
    uses_output = True

    @staticmethod
    def f(xp, a, b):
        return xp.copysign(a, b)

    @staticmethod
    def grad(xp, g, a, b, y):  # PyTorch's: y / a (0 where a == 0) for a; zero for b
        return g * backend.where(a == 0, 0, y / a), xp.zeros_like(g * b)

    @staticmethod
    def graph_grad(g, a, b, arrays):
        a, _, y = arrays  # (y / a: a sign, piecewise constant)
        return g * _const(backend.where(a == 0, 0, y / a).astype(g.dtype, copy=False)), _zeros_graph(g, g.shape)


class Fmax(_Binary):
    @classmethod
    def takes_input(cls, xp, a, b):
        """Where input is the result, as PyTorch's: ties too (0.0 and -0.0 give input's zero), and where other is
        NaN (NaN only where both are)."""
        return ((a >= b) if cls is Fmax else (a <= b)) | xp.isnan(b)

    @classmethod
    def f(cls, xp, a, b):
        return backend.where(cls.takes_input(xp, a, b), a, b)

    @classmethod
    def grad(cls, xp, g, a, b, y):
        # PyTorch's: the whole gradient to input where it is the result, else to other (no split, unlike maximum's)
        to_a = cls.takes_input(xp, a, b)
        zero = g.dtype.type(0)
        return backend.where(to_a, g, zero), backend.where(to_a, zero, g)

    @classmethod
    def graph_grad(cls, g, a, b, arrays):
        a, b, _ = arrays
        to_a = _const(cls.takes_input(_xp(b), a, b))
        return where(to_a, g, 0), where(to_a, 0, g)


class Fmin(Fmax):
    pass


def _tensors(name, **operands):
    for arg, v in operands.items():
        if not isinstance(v, Tensor):
            raise InputTypeError(f"{name}(): argument '{arg}' must be Tensor, not {type(v).__name__}")


def _float_binary(fn, name, scalars=True, integers=True):
    """``fn`` on broadcast, promoted operands; integer results become the default dtype (float32 unless set;
    ``integers=False``: refused, as PyTorch's logaddexp does); ``scalars``: a Python number is allowed on either
    side."""
    def op(input, other):  # noqa: A002 - PyTorch's names
        if scalars:
            if not isinstance(input, Tensor) and not isinstance(other, Tensor):
                raise InputTypeError(f"{name}(): expected a Tensor operand, got {type(input).__name__} and "
                                     f"{type(other).__name__}")
        else:
            _tensors(name, input=input, other=other)
        a, b = binary_operands(name, input, other)
        t = a if isinstance(a, Tensor) else b
        if not backend.is_floating(t.dtype):
            if not integers:
                raise NotImplementedError(f"{name}: not implemented for {np.dtype(t.dtype).name} tensors (expected "
                                          f"floating-point tensors)")
            a, b = float_operands(name, input, other)  # (each operand's own values: a -4 beside uint8 stays -4)
        return fn.apply(a, b)

    op.__name__ = name
    return op


xlogy = _float_binary(Xlogy, "xlogy")
xlogy.__doc__ = "``input * log(other)``, 0 where input == 0 (unless other is NaN); integers give the default dtype."
logaddexp = _float_binary(LogAddExp, "logaddexp", scalars=False, integers=False)
logaddexp.__doc__ = "``log(exp(input) + exp(other))`` without overflow; floating-point tensors only."
logaddexp2 = _float_binary(LogAddExp2, "logaddexp2", scalars=False, integers=False)
logaddexp2.__doc__ = "``log2(2**input + 2**other)`` without overflow; floating-point tensors only."


def copysign(input, other):  # noqa: A002 - PyTorch's names
    """``|input|`` with ``other``'s sign (``other`` a tensor or a number); integers give the default dtype."""
    _check("copysign", input)
    return _float_binary(Copysign, "copysign")(input, other)


def _selection(fn, name):
    def op(input, other):  # noqa: A002 - PyTorch's names
        _tensors(name, input=input, other=other)
        return fn.apply(*binary_operands(name, input, other))

    op.__name__ = name
    return op


fmax = _selection(Fmax, "fmax")
fmax.__doc__ = ("The elementwise maximum, ignoring NaN (NaN only where both are). Gradient as PyTorch's: to input "
               "where it is the result (ties and a NaN other too), else to other.")
fmin = _selection(Fmin, "fmin")
fmin.__doc__ = ("The elementwise minimum, ignoring NaN (NaN only where both are). Gradient as PyTorch's: to input "
               "where it is the result (ties and a NaN other too), else to other.")


def heaviside(input, values):  # noqa: A002 - PyTorch's names
    """0 where input < 0 (and where it is NaN), ``values`` where input == 0, 1 where input > 0; both tensors of
    one dtype, as in PyTorch. No gradient."""
    _tensors("heaviside", input=input, values=values)
    if input.dtype != values.dtype:
        raise RuntimeError(f"heaviside: input and values must have the same dtype, got {input.dtype} and "
                           f"{values.dtype}")
    a, b = binary_operands("heaviside", input, values)

    def step(xp, x, v):
        wide = [u.astype(np.float32) if u.dtype in _HALF else u for u in (x, v)]
        return xp.asarray(backend.where(wide[0] == 0, wide[1], wide[0] > 0)).astype(x.dtype)
    return _values(step, a, b)


def float_power(input, exponent):  # noqa: A002 - PyTorch's names
    """``input ** exponent`` computed in float64 (the result is float64), either side a tensor or a number."""
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        raise InputTypeError(f"float_power(): expected a Tensor operand, got {type(input).__name__} and "
                             f"{type(exponent).__name__}")
    a, b = (cast(v, backend.float64) if isinstance(v, Tensor) else v for v in (input, exponent))
    return pow(a if isinstance(a, Tensor) else float(a), b if isinstance(b, Tensor) else float(b))


def ldexp(input, other):  # noqa: A002 - PyTorch's names
    """``input * 2 ** other``, promoted as PyTorch's (a 0-d float64 ``other`` keeps a float32 ``input``'s dtype);
    integer operands give the default dtype (float32 unless set)."""
    _tensors("ldexp", input=input, other=other)
    dtype = promote_operands(input.dtype, input.ndim == 0, other.dtype, other.ndim == 0)
    dtype = dtype if backend.is_floating(dtype) else backend.get_default_dtype()
    return mul(cast(input, dtype), pow(2.0, cast(other, dtype)))


class _NanZeroed(Function):
    """``x`` with NaN as 0; its gradient ``g * (x is not NaN)``, a product as PyTorch's nansum backward, so that an
    infinite ``g`` (nanmean of an all-NaN row divides by a count of 0) gives NaN there, not 0."""

    @staticmethod
    def forward(ctx, x):
        ctx.keep = ~backend.array_module(x).isnan(x)
        return backend.where(ctx.keep, x, x.dtype.type(0))

    @staticmethod
    def backward(ctx, g):
        with np.errstate(invalid="ignore"):
            return g * ctx.keep.astype(g.dtype)

    @staticmethod
    def backward_graph(ctx, g):
        return g * _const(ctx.keep.astype(g.dtype))


def nansum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002 - PyTorch's names
    """``sum`` with NaN counted as 0 (their gradient is 0, times the incoming one)."""
    _check("nansum", input)
    normalize_axis("nansum", dim, input.ndim)  # (a bad dim named as nansum's)
    if backend.is_floating(input.dtype):
        input = _NanZeroed.apply(input)
        dtype = input.dtype if dtype is None else dtype  # (one op in PyTorch: not sum's autocast rule)
    return input.sum(dim=dim, keepdim=keepdim, dtype=dtype)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002 - PyTorch's names
    """The mean of the values that are not NaN (NaN where all are, its gradient NaN too, as PyTorch's); floating-point
    tensors only, and a floating-point ``dtype``."""
    _check("nanmean", input)
    if not backend.is_floating(input.dtype):
        raise RuntimeError(f"nanmean(): expected input to have floating point dtype but got "
                           f"{np.dtype(input.dtype).name}")
    if dtype is not None and not backend.is_floating(backend.as_dtype(dtype)):
        raise RuntimeError(f"nanmean(): could not infer output dtype: dtype must be floating point, got "
                           f"{np.dtype(backend.as_dtype(dtype)).name}")
    normalize_axis("nanmean", dim, input.ndim)
    count = logical_not(isnan(input)).sum(dim=dim, keepdim=keepdim)
    with np.errstate(invalid="ignore"):  # 0 / 0 where every value is NaN: NaN, as PyTorch's
        return div(nansum(input, dim, keepdim, dtype=dtype), count)


def _clamp_one(name, side, input, bound):  # noqa: A002 - PyTorch's names
    _check(name, input)
    if isinstance(bound, Tensor):
        # clamp's gradients, as PyTorch's: the input's where it is kept (ties too), the bound's where it replaced it;
        # the bound may broadcast the input to a larger shape, as in maximum (clamp broadcasts them)
        return clamp(input, **{side: bound})
    if not isinstance(bound, numbers.Real):  # (a Python bool is a number: True is 1, as PyTorch takes it)
        raise InputTypeError(f"{name}(): argument '{side}' must be a Tensor or a number, not {type(bound).__name__}")
    # an integer tensor with a float bound gives float32, as PyTorch's (clamp keeps the input's dtype); a bool one
    # with an int bound int64, so only a bool bound leaves it bool, which is not implemented
    input = cast(input, scalar_result_dtype(input.dtype, bound))
    _bool_clamp(name, input.dtype, **{"lo" if side == "min" else "hi": bound})
    return clamp(input, **{side: bound})


def clamp_min(input, min):  # noqa: A002 - PyTorch's names
    """``clamp(input, min=min)``; a tensor bound broadcasts (as in ``maximum``) and gets its gradient where it
    replaced the input (a tie's goes to the input)."""
    return _clamp_one("clamp_min", "min", input, min)


def clamp_max(input, max):  # noqa: A002 - PyTorch's names
    """``clamp(input, max=max)``; a tensor bound broadcasts (as in ``minimum``) and gets its gradient where it
    replaced the input (a tie's goes to the input)."""
    return _clamp_one("clamp_max", "max", input, max)


# ---------------------------------------------------------------- in-place forms
def _into(fn, keeps_input):
    """``fn`` as ``Function.apply_`` calls it (``out=``); ``keeps_input``: its backward reads the input, which
    the result overwrites, so a copy is saved instead."""
    def forward(ctx, x, *args, out=None):
        return fn.forward(ctx, backend.copy(x) if keeps_input and ctx.recording else x, *args)
    return type(fn.__name__, (fn,), {"forward": staticmethod(forward)})


def _signed_(name, fn):
    def op(self):
        _check(name, self)
        _not_bool(name, self)
        return fn.apply_(name, self)

    op.__name__ = name
    return op


def _clamp_into(name, self, lo, hi):
    _check(name, self)
    if lo is None and hi is None:
        raise RuntimeError(f"{name}: at least one of min and max must be given")
    lo, hi = _mixed_bounds(name, lo, hi)
    _bool_clamp(name, self.dtype, lo, hi)
    lo, hi = (_inplace_operand(name, self, b) if b is not None else None for b in (lo, hi))
    return _ClampInto.apply_(name, self, lo, hi)


def clamp_min_(self, min):  # noqa: A002 - PyTorch's names
    return _clamp_into("clamp_min_", self, min, None)


def clamp_max_(self, max):  # noqa: A002 - PyTorch's names
    return _clamp_into("clamp_max_", self, None, max)


def clamp_(self, min=None, max=None):  # noqa: A002 - PyTorch's names
    """``clamp`` written into self, recorded as ``clamp`` (``clip_`` too)."""
    return _clamp_into("clamp_", self, min, max)


def clip_(self, min=None, max=None):  # noqa: A002 - PyTorch's names
    return _clamp_into("clip_", self, min, max)


def pow_(self, exponent):
    """``self ** exponent`` written into self, recorded as ``pow``. An integer tensor refuses a negative number
    as the exponent, as PyTorch's; an integer tensor of exponents may hold negative ones (``pow``'s integer
    results: 1 for a base of 1, +-1 for -1, 0 for others)."""
    _check("pow_", self)
    if not backend.is_floating(self.dtype) and isinstance(exponent, numbers.Real) and exponent < 0:
        # (checked before the operand check wraps a number into the dtype)
        raise RuntimeError("pow_: integers to negative integer powers are not allowed")
    if self.dtype == backend.bool_ and isinstance(exponent, Tensor):
        raise NotImplementedError("pow_: not implemented for bool tensors (cast them with .long() or .float())")
    exponent = _inplace_operand("pow_", self, exponent)
    return _PowInto.apply_("pow_", self, exponent)


def _binary_(name, fn):
    """``fn(self, other)`` written into a floating-point self, recorded (xlogy_, copysign_)."""
    def op(self, other):
        _check(name, self)
        if not backend.is_floating(self.dtype):
            raise RuntimeError(f"{name}: result type float32 can't be cast to the desired output type "
                               f"{np.dtype(self.dtype).name}")
        return fn.apply_(name, self, _inplace_operand(name, self, other))

    op.__name__ = name
    return op


_ClampInto = _into(Clamp, True)
_PowInto = _into(Pow, True)
_AbsInto, _NegInto = _into(Abs, True), _into(Neg, False)
_INPLACE = {
    "relu_": relu_, "abs_": _signed_("abs_", _AbsInto), "absolute_": _signed_("absolute_", _AbsInto),
    "neg_": _signed_("neg_", _NegInto), "negative_": _signed_("negative_", _NegInto), "pow_": pow_,
    "clamp_min_": clamp_min_, "clamp_max_": clamp_max_, "clamp_": clamp_, "clip_": clip_,
    "exp2_": _inplace(Exp2, "exp2_"), "erfc_": _inplace(Erfc, "erfc_"), "sinc_": _inplace(Sinc, "sinc_"),
    "deg2rad_": _inplace(Deg2rad, "deg2rad_"), "rad2deg_": _inplace(Rad2deg, "rad2deg_"),
    "logit_": lambda self, eps=None: _inplace(Logit, "logit_")(self, _eps("logit_", eps)),
    "xlogy_": _binary_("xlogy_", Xlogy), "copysign_": _binary_("copysign_", Copysign),
    "ldexp_": written_into("ldexp_", ldexp), "float_power_": written_into("float_power_", float_power),
    "__ipow__": pow_,
    "heaviside_": written_into("heaviside_", heaviside),
}
_INPLACE.update({name + "_": _inplace(fn, name + "_") for name, fn in (
    ("exp", _into(Exp, False)), ("log", _into(Log, True)), ("sqrt", _into(Sqrt, False)),
    ("tanh", _into(Tanh, False)), ("sigmoid", _into(Sigmoid, False)))})


__all__ = ["erfc", "exp2", "logit", "sinc", "deg2rad", "rad2deg", "heaviside", "fmax", "fmin", "xlogy", "logaddexp",
           "logaddexp2", "float_power", "signbit", "copysign", "ldexp", "nansum", "nanmean", "clamp_min", "clamp_max"]
METHODS = {name: globals()[name] for name in __all__}
METHODS.update(_INPLACE)
