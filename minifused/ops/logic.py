"""Tests of values and logic: ``isnan``/``isinf``/``isfinite`` and kin, ``nan_to_num``, ``isclose``,
``allclose``, ``equal``, ``logical_*``, ``bitwise_*`` with the operators ``& | ^ ~`` and ``nonzero``
(``count_nonzero`` is a reduction: ``reduce.py``).

Their results are bool or integer tensors (or Python values), which carry no gradient: they are
computed under ``no_grad`` through one ``Function`` that applies an array function, so ops read
arrays only inside a ``forward``. ``nan_to_num`` is the one differentiable op here.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import backend
from ..autograd import Function, is_grad_enabled, no_grad
from ..autograd.tape import refuse_partial_overlap
from ..tensor import Tensor
from ._common import binary_operands, broadcast_shape, can_cast, check_bools, normalize_axis, number_arg
from ..backend import DtypeNotImplementedError, InputTypeError


def _xp(x):
    return backend.array_module(x)


class _Apply(Function):
    """``fn(xp, *arrays)``: a result that has no gradient (bool or integer values)."""

    @staticmethod
    def forward(ctx, fn, *arrays):
        xp = _xp(next(a for a in arrays if hasattr(a, "shape")))
        return fn(xp, *arrays)


def _values(fn, *args):
    with no_grad():
        return _Apply.apply(fn, *args)


def _tensor_arg(name, x, arg="input"):
    if not isinstance(x, Tensor):
        raise InputTypeError(f"{name}(): argument '{arg}' must be Tensor, not {type(x).__name__}")


def _both_tensors(name, a, b):
    _tensor_arg(name, a)
    _tensor_arg(name, b, "other")
    if a.device != b.device:
        raise RuntimeError(f"{name}: expected all tensors on the same device, got {a.device} and {b.device}")
    if a.shape != b.shape:
        broadcast_shape(name, a.shape, b.shape)


# ---------------------------------------------------------------- tests of values
def _test(name, ufunc):
    def op(input):  # noqa: A002 - PyTorch's name
        _tensor_arg(name, input)
        return _values(lambda xp, x: xp.asarray(getattr(xp, ufunc)(x)), input)

    op.__name__ = name
    return op


isnan = _test("isnan", "isnan")
isinf = _test("isinf", "isinf")
isfinite = _test("isfinite", "isfinite")
isposinf = _test("isposinf", "isposinf")
isneginf = _test("isneginf", "isneginf")


def _finfo(dtype):
    if dtype == backend.bfloat16:
        import ml_dtypes

        return ml_dtypes.finfo(dtype)
    return np.finfo(dtype)


class NanToNum(Function):
    @staticmethod
    def forward(ctx, x, nan, posinf, neginf, out=None):
        xp = _xp(x)
        if ctx.recording:
            ctx.save_for_backward(xp.isfinite(x))
        info = _finfo(x.dtype)
        posinf = info.max if posinf is None else posinf
        neginf = info.min if neginf is None else neginf
        # bfloat16 through float32 (exact both ways): CuPy implements few functions for bfloat16
        wide = x.astype(np.float32) if x.dtype == backend.bfloat16 else x
        t = wide.dtype.type
        y = backend.where(xp.isnan(wide), t(nan), wide)
        y = backend.where(xp.isposinf(wide), t(posinf), y)
        return backend.where(xp.isneginf(wide), t(neginf), y).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (finite,) = ctx.saved_tensors
        return g * finite, None, None, None

    @staticmethod
    def backward_graph(ctx, g):
        (finite,) = ctx.saved_tensors  # (a constant: where the input is finite)
        return g * Tensor._from_array(_xp(finite).asarray(finite, g.dtype), False), None, None, None


def _replacements(nan, posinf, neginf):
    """nan_to_num's numbers as PyTorch's parser takes them (a bool 0 or 1, a 0-d tensor its number)."""
    named = {"nan": nan, "posinf": posinf, "neginf": neginf}
    for arg, v in named.items():
        named[arg] = v = number_arg("nan_to_num", arg, v)
        if v is not None and not isinstance(v, numbers.Real):
            raise InputTypeError(f"nan_to_num(): argument '{arg}' must be a float, not {type(v).__name__}")
    return named["nan"], named["posinf"], named["neginf"]


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):  # noqa: A002 - PyTorch's names
    """NaN -> ``nan``, +inf -> ``posinf`` (default: the dtype's largest), -inf -> ``neginf`` (its
    lowest). Integer tensors come back as a copy, as in PyTorch. Gradient: 1 where ``input`` is finite."""
    _tensor_arg("nan_to_num", input)
    nan, posinf, neginf = _replacements(nan, posinf, neginf)
    if not backend.is_floating(input.dtype):
        return _values(lambda xp, x: backend.copy(x), input)
    return NanToNum.apply(input, float(nan), posinf, neginf)


def nan_to_num_(input, nan=0.0, posinf=None, neginf=None):  # noqa: A002 - PyTorch's names
    _tensor_arg("nan_to_num_", input)
    if not backend.is_floating(input.dtype):
        input._check_inplace("nan_to_num_")
        return input._bump("nan_to_num_")
    nan, posinf, neginf = _replacements(nan, posinf, neginf)
    return NanToNum.apply_("nan_to_num_", input, float(nan), posinf, neginf)


def _tolerances(name, rtol, atol):
    """``rtol`` and ``atol`` as PyTorch's parser takes them: numbers (a bool 0 or 1, a 0-d tensor its number)."""
    rtol, atol = number_arg(name, "rtol", rtol), number_arg(name, "atol", atol)
    for arg, v in (("rtol", rtol), ("atol", atol)):
        if not isinstance(v, numbers.Real):
            raise InputTypeError(f"{name}(): argument '{arg}' must be a float, not {type(v).__name__}")
        if not v >= 0:
            raise RuntimeError(f"{name}: {arg} must be greater than or equal to zero, got {v}")
    return rtol, atol


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False, *, _name="isclose"):  # noqa: A002
    """|input - other| <= atol + rtol * |other| elementwise (equal infinities are close; NaNs only
    with ``equal_nan``). Both tensors must have one dtype, as in PyTorch."""
    _both_tensors(_name, input, other)
    check_bools(_name, equal_nan=equal_nan)
    if input.dtype != other.dtype:
        raise RuntimeError(f"{_name}: input and other must have the same dtype, got {input.dtype} and {other.dtype}")
    rtol, atol = _tolerances(_name, rtol, atol)
    equal_nan = bool(equal_nan)

    def close(xp, a, b):
        if a.dtype == np.bool_:
            return xp.asarray(a == b)
        return xp.asarray(xp.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))

    return _values(close, input, other)


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:  # noqa: A002 - PyTorch's names
    """Whether every element of ``input`` is close to ``other``'s (:func:`isclose`): a Python bool."""
    close = isclose(input, other, rtol, atol, equal_nan, _name="allclose")
    return bool(_values(lambda xp, c: xp.asarray(c.all()), close).item())


def equal(input, other) -> bool:  # noqa: A002 - PyTorch's names
    """Whether both tensors have the same shape and the same values (NaN is never equal): a Python bool."""
    _tensor_arg("equal", input)
    _tensor_arg("equal", other, "other")
    if input.device != other.device:
        raise RuntimeError(f"equal: expected all tensors on the same device, got {input.device} and {other.device}")
    if input.shape != other.shape:
        return False
    return bool(_values(lambda xp, a, b: xp.asarray(xp.array_equal(a, b)), input, other).item())


# ---------------------------------------------------------------- logic
def _logical(name, ufunc):
    def op(input, other):  # noqa: A002 - PyTorch's names
        _both_tensors(name, input, other)
        return _values(lambda xp, a, b: xp.asarray(getattr(xp, ufunc)(a, b)), input, other)

    op.__name__ = name
    return op


logical_and = _logical("logical_and", "logical_and")
logical_or = _logical("logical_or", "logical_or")
logical_xor = _logical("logical_xor", "logical_xor")


def logical_not(input):  # noqa: A002 - PyTorch's name
    _tensor_arg("logical_not", input)
    return _values(lambda xp, x: xp.asarray(xp.logical_not(x)), input)


def _integral(name, t):
    if isinstance(t, Tensor) and backend.is_floating(t.dtype):
        raise DtypeNotImplementedError(f"{name}: only integer and bool tensors are supported, got {t.dtype}")
    if isinstance(t, numbers.Real) and not isinstance(t, numbers.Integral):  # (PyTorch's: a floating result)
        raise DtypeNotImplementedError(f"{name}: not implemented for a float operand, got {t!r} (only integer and "
                                       f"bool operands are supported)")
    if not isinstance(t, (Tensor, numbers.Integral)):
        raise InputTypeError(f"{name}: only integer and bool operands are supported, got {type(t).__name__} {t!r}")


def _bitwise(name, ufunc):
    def op(input, other):  # noqa: A002 - PyTorch's names
        if not isinstance(input, Tensor) and not isinstance(other, Tensor):
            raise InputTypeError(f"{name}(): expected a Tensor operand, got {type(input).__name__} and "
                                 f"{type(other).__name__}")
        for t in (input, other):
            _integral(name, t)
        a, b = binary_operands(name, input, other)
        return _values(lambda xp, x, y: xp.asarray(getattr(xp, ufunc)(x, y)), a, b)

    op.__name__ = name
    return op


bitwise_and = _bitwise("bitwise_and", "bitwise_and")
bitwise_or = _bitwise("bitwise_or", "bitwise_or")
bitwise_xor = _bitwise("bitwise_xor", "bitwise_xor")


def bitwise_not(input):  # noqa: A002 - PyTorch's name
    _tensor_arg("bitwise_not", input)
    _integral("bitwise_not", input)
    return _values(lambda xp, x: xp.asarray(xp.invert(x)), input)


def written_into(name, fn):
    """``a &= b`` and the like: ``fn(a, b, ...)`` written into ``a`` (its dtype and shape kept, as PyTorch's
    in-place ops do: a result of a wider dtype of a's kind is cast into it, rounded once, as
    ``float32.addcmul_(float64, float64)``; one of a higher kind, a float into an integer tensor, is refused;
    ``float_power_``, as PyTorch's, takes only its float64 result's own dtype). Where the result is in the graph
    (grad mode, a floating ``a``, ``a`` or an operand requiring grad), ``fn`` runs on a clone of ``a`` (its
    backward may keep the operand, which the write overwrites) and the write is ``copy_``'s recorded one: the
    gradient reaches ``a``'s old value through the clone, as PyTorch's in-place forms give it; a leaf that requires
    grad is refused there."""
    exact = name == "float_power_"

    def op(self, *args, **kwargs):
        for v in (*args, *kwargs.values()):
            if isinstance(v, Tensor):
                refuse_partial_overlap(name, self, v)
        recorded = (backend.is_floating(self.dtype) and is_grad_enabled()
                    and any(isinstance(v, Tensor) and v.requires_grad for v in (self, *args, *kwargs.values())))
        if recorded and self.requires_grad and self.is_leaf:
            self._check_inplace(name)  # (refused, named as the op)
        out = fn(self.clone() if recorded else self, *args, **kwargs)
        if out.dtype != self.dtype and (exact or not can_cast(out.dtype, self.dtype)):
            raise RuntimeError(f"{name}: result type {out.dtype} can't be cast to the desired output type "
                               f"{self.dtype}")
        if out.shape != self.shape:
            raise RuntimeError(f"{name}: output with shape {self.shape} doesn't match the broadcast shape "
                               f"{out.shape}")
        if recorded:
            return self.copy_(out)
        self._check_inplace(name)
        self.copy_(out)
        return self

    op.__name__ = name
    return op


# ---------------------------------------------------------------- where the nonzero values are
def nonzero(input, *, as_tuple=False):  # noqa: A002 - PyTorch's name
    """The indices of the nonzero elements: an (n, ndim) int64 tensor, or (``as_tuple``) one 1-D int64
    tensor per dimension (a 0-d input counts as 1-D there, as in PyTorch)."""
    _tensor_arg("nonzero", input)
    check_bools("nonzero", as_tuple=as_tuple)
    if as_tuple:
        def per_dim(xp, x):
            return tuple(i.astype(np.int64) for i in xp.nonzero(x.reshape(-1) if x.ndim == 0 else x))
        return _values(per_dim, input)

    def rows(xp, x):
        if x.ndim == 0:
            return xp.zeros((int(bool(x)), 0), np.int64)
        return xp.stack(xp.nonzero(x), axis=1).astype(np.int64) if x.size else xp.zeros((0, x.ndim), np.int64)
    return _values(rows, input)


def argwhere(input):  # noqa: A002 - PyTorch's name
    """:func:`nonzero`'s (n, ndim) int64 indices, as ``torch.argwhere``."""
    return nonzero(input)


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each of ``elements`` occurs in ``test_elements`` (either may be a number, not both): a bool tensor
    of ``elements``' shape, negated with ``invert``, as ``torch.isin``."""
    op = "isin"
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise InputTypeError(f"{op}: expected at least one of elements and test_elements to be a Tensor, got "
                             f"{type(elements).__name__} and {type(test_elements).__name__}")
    for name, v in (("elements", elements), ("test_elements", test_elements)):
        if not isinstance(v, Tensor) and (isinstance(v, bool) or not isinstance(v, numbers.Number)):
            raise InputTypeError(f"{op}: {name} must be a Tensor or a number, got {type(v).__name__}")
    like = elements if isinstance(elements, Tensor) else test_elements
    if isinstance(elements, Tensor) and isinstance(test_elements, Tensor) and \
            not backend.same_device(elements._data, test_elements._data):
        raise RuntimeError(f"{op}: expected elements and test_elements on one device, got {elements.device} and "
                           f"{test_elements.device}")
    xp = like._xp
    a = elements._data if isinstance(elements, Tensor) else xp.asarray(elements)
    b = test_elements._data if isinstance(test_elements, Tensor) else xp.asarray(test_elements)
    return Tensor._from_array(xp.asarray(xp.isin(a, b.reshape(-1), invert=bool(invert))))


__all__ = ["argwhere",
           "isnan", "isinf", "isfinite", "isposinf", "isneginf", "nan_to_num", "isclose", "allclose", "equal",
           "logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor",
           "bitwise_not", "nonzero", "isin"]


def _swapped(fn):
    return lambda self, other: fn(other, self)


METHODS = {name: globals()[name] for name in __all__ if name not in ("allclose", "equal", "isin")}
METHODS.update({
    "allclose": allclose, "equal": equal, "nan_to_num_": nan_to_num_,
    "__and__": bitwise_and, "__rand__": _swapped(bitwise_and), "__or__": bitwise_or, "__ror__": _swapped(bitwise_or),
    "__xor__": bitwise_xor, "__rxor__": _swapped(bitwise_xor), "__invert__": bitwise_not,
    "__iand__": written_into("__iand__", bitwise_and), "__ior__": written_into("__ior__", bitwise_or),
    "__ixor__": written_into("__ixor__", bitwise_xor),
    "bitwise_and_": written_into("bitwise_and_", bitwise_and), "bitwise_or_": written_into("bitwise_or_", bitwise_or),
    "bitwise_xor_": written_into("bitwise_xor_", bitwise_xor),
})
