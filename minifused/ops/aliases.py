"""PyTorch's other spellings of existing ops (``absolute``, ``multiply``, ``divide``, ``subtract``,
``true_divide``, ``negative``, ``greater`` ...), the comparisons written in place (``eq_`` ... ``not_equal_``:
the result in the tensor's own dtype, as PyTorch's), and the tensor queries (``nelement``, ``itemsize``,
``nbytes``, ``is_cpu``, ``get_device``, ``is_signed``, ``is_nonzero`` ...) with ``result_type``,
``promote_types`` and ``can_cast``.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import backend
from ..autograd import Function
from ..tensor import Tensor
from ._common import (binary_operands, cast, check_alpha, check_integer_divisor, promote, scalar_result_dtype,
                      tensors_result_dtype)
from .elementwise import abs, div, eq, ge, gt, le, lt, mul, ne, neg, sub  # noqa: A004
from .matmul import outer
from .inplace_arith import AddInto, DivInto, MulInto, _inplace_operand, div_
from .logic import _values, written_into
from .pointwise import _check, floor_divide, trunc_divide
from ..backend import DtypeNotImplementedError, InputTypeError


def _xp(x):
    return backend.array_module(x)


# ---------------------------------------------------------------- PyTorch's other spellings of existing ops
def _not_bool(name, *operands):
    if all(isinstance(v, Tensor) and v.dtype == backend.bool_ for v in operands):
        raise NotImplementedError(f"{name}: not supported for bool tensors (use ~ / logical_not, or ^ / "
                                  f"logical_xor)")


def negative(input):  # noqa: A002 - PyTorch's name
    """``neg``."""
    _check("negative", input)
    _not_bool("negative", input)
    return neg(input)


def subtract(input, other, *, alpha=1):  # noqa: A002 - PyTorch's names
    """``input - alpha * other`` (``sub``; either side may be a number)."""
    _not_bool("subtract", input, other)
    return sub(input, other, alpha=alpha)


def _rounding(name, rounding_mode):
    if rounding_mode not in (None, "trunc", "floor"):
        raise RuntimeError(f"{name}: expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                           f"{rounding_mode!r}")


def _int_trunc_div(xp, a, b):
    q = a // b
    return xp.asarray(q + ((q < 0) & (q * b != a))).astype(q.dtype, copy=False)


def divide(input, other, *, rounding_mode=None):  # noqa: A002 - PyTorch's names
    """``div``; ``rounding_mode='trunc'`` rounds the quotient toward zero, ``'floor'`` down (integers stay
    integers there; the gradient is zero, as PyTorch's, also where the divisor is 0)."""
    _rounding("divide", rounding_mode)
    if rounding_mode is None:
        return div(input, other)
    a, b = binary_operands("divide", input, other)
    if backend.is_floating((a if isinstance(a, Tensor) else b).dtype):
        return trunc_divide(a, b) if rounding_mode == "trunc" else floor_divide(a, b)
    if rounding_mode == "floor":
        return floor_divide(a, b)  # (bool refused there)
    if (a if isinstance(a, Tensor) else b).dtype == backend.bool_:  # (PyTorch's NotImplementedError: no bool kernel)
        raise DtypeNotImplementedError("divide: rounding_mode='trunc' is not implemented for bool tensors (cast them "
                                       "with .long() or .float())")
    check_integer_divisor("divide", a, b)
    return _values(_int_trunc_div, a, b)


# ---------------------------------------------------------------- comparisons and arithmetic in place
class _Overwrite(Function):
    """``x`` overwritten with values computed before (a comparison's result in x's dtype): zero gradient."""

    @staticmethod
    def forward(ctx, x, values, out=None):
        return values.astype(x.dtype)

    @staticmethod
    def backward(ctx, g):
        return _xp(g).zeros_like(g), None

    @staticmethod
    def backward_graph(ctx, g):
        return Tensor._from_array(g._xp.zeros_like(g._data)), None


def _compare_(name, fn):
    def op(self, other):
        out = fn(self, other)
        if out.shape != self.shape:
            raise RuntimeError(f"{name}: output with shape {list(self.shape)} doesn't match the broadcast shape "
                               f"{list(out.shape)}")
        return _Overwrite.apply_(name, self, out)

    op.__name__ = name
    return op


def multiply_(self, other):
    """``mul_`` (recorded)."""
    _check("multiply_", self)
    return MulInto.apply_("multiply_", self, _inplace_operand("multiply_", self, other))


def subtract_(self, other, *, alpha=1):
    """``sub_`` (recorded)."""
    _check("subtract_", self)
    _not_bool("subtract_", self, other)
    alpha = check_alpha("subtract_", self.dtype, alpha)
    return AddInto.apply_("subtract_", self, _inplace_operand("subtract_", self, other), -alpha)


def _divide_into(name):
    """``div_`` / ``divide_`` (recorded); with a rounding mode, written into self (integers allowed there)."""
    def op(self, other, *, rounding_mode=None):
        _check(name, self)
        _rounding(name, rounding_mode)
        if rounding_mode is None:  # (the operand check's true-division rule goes by the name's "div")
            return DivInto.apply_(name, self, _inplace_operand(name, self, other))
        return written_into(name, divide)(self, other, rounding_mode=rounding_mode)

    op.__name__ = name
    return op


divide_ = _divide_into("divide_")


_COMPARISONS = {"eq": eq, "ne": ne, "lt": lt, "le": le, "gt": gt, "ge": ge, "greater": gt, "greater_equal": ge,
                "less": lt, "less_equal": le, "not_equal": ne}
_INPLACE = {name + "_": _compare_(name + "_", fn) for name, fn in _COMPARISONS.items()}
_INPLACE.update({"multiply_": multiply_, "divide_": divide_, "div_": _divide_into("div_"), "subtract_": subtract_,
                 "true_divide_": div_})


# ---------------------------------------------------------------- sizes, dtypes and devices
def _is_nonzero(self):
    """The one element's truth (RuntimeError for 0 or several elements, as PyTorch's)."""
    if self.numel() != 1:
        what = "no values" if self.numel() == 0 else "more than one value"
        raise RuntimeError(f"is_nonzero: Boolean value of Tensor with {what} is ambiguous")
    return bool(self.item())


def _is_same_size(self, other):
    if not isinstance(other, Tensor):
        raise InputTypeError(f"is_same_size(): argument 'other' must be Tensor, not {type(other).__name__}")
    return self.shape == other.shape


def is_complex(input):  # noqa: A002 - PyTorch's name
    """Whether the tensor's dtype is complex (never, in minifused)."""
    return np.dtype(input.dtype).kind == "c"


def _operand_dtype(name, v):
    if isinstance(v, Tensor):
        return v.dtype
    if isinstance(v, (bool, numbers.Integral, numbers.Real)) and not isinstance(v, complex):
        return None
    raise InputTypeError(f"{name}(): expected a Tensor or a real number, got {type(v).__name__}")


def result_type(tensor1, tensor2):
    """The dtype minifused's binary ops give for these operands (tensors or Python numbers), PyTorch's rule:
    for two tensors ``promote_types``, except that a 0-d tensor beside a dimensioned one counts only where it
    is of a higher kind; the tensor's dtype unless a number is of a higher kind."""
    return backend.public_dtype(_result_type(tensor1, tensor2))


def _result_type(tensor1, tensor2):
    d1, d2 = _operand_dtype("result_type", tensor1), _operand_dtype("result_type", tensor2)
    if d1 is not None and d2 is not None:
        return tensors_result_dtype(tensor1, tensor2)
    if d1 is not None or d2 is not None:
        return scalar_result_dtype(d1 if d1 is not None else d2, tensor2 if d1 is not None else tensor1)
    if all(isinstance(v, bool) for v in (tensor1, tensor2)):
        return backend.bool_
    if all(isinstance(v, numbers.Integral) for v in (tensor1, tensor2)):
        return backend.int64
    return backend.get_default_dtype()


def promote_types(type1, type2):
    """The smallest dtype both promote to (PyTorch's rule: float beats integer; float16 with bfloat16 gives
    float32)."""
    return backend.public_dtype(promote(backend.as_dtype(type1), backend.as_dtype(type2)))


def can_cast(from_, to):
    """Whether PyTorch's casting rule allows ``from_`` -> ``to`` in its ops: not float to integer, not
    anything but bool to bool."""
    src, dst = backend.as_dtype(from_), backend.as_dtype(to)
    if backend.is_floating(src) and not backend.is_floating(dst):
        return False
    return not (dst == backend.bool_ and src != backend.bool_)


_INFO = {
    "nelement": lambda self: self.numel(), "ndimension": lambda self: self.dim(),
    "itemsize": property(lambda self: self.element_size()),
    "nbytes": property(lambda self: self.numel() * self.element_size()),
    "is_cpu": property(lambda self: self.device.type == "cpu"),
    "get_device": lambda self: -1 if self.device.type == "cpu" else self.device.index,
    "is_signed": lambda self: self.dtype not in (np.dtype(np.uint8), backend.bool_),
    "is_complex": is_complex, "is_same_size": _is_same_size, "is_nonzero": _is_nonzero,
    "byte": lambda self: cast(self, backend.uint8), "char": lambda self: cast(self, backend.int8),
    "short": lambda self: cast(self, backend.int16),
}

def rsub(input, other, alpha=1):  # noqa: A002 - PyTorch's names
    """``other - alpha * input``, as ``torch.rsub`` (``input`` a tensor, ``other`` a tensor or a number)."""
    return sub(other, input, alpha=alpha)


def positive(input):  # noqa: A002 - PyTorch's name
    """``input`` itself, as ``torch.positive`` (``+x``); refused for a bool tensor, as PyTorch's."""
    if input.dtype == backend.bool_:
        raise InputTypeError("positive: the `+` operator, on a bool tensor is not supported")
    return input


absolute = abs
ger = outer
multiply = mul
true_divide = div
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne

__all__ = ["absolute", "ger",
           "multiply", "divide", "subtract", "true_divide", "negative", "greater", "greater_equal", "less",
           "less_equal", "not_equal", "is_complex", "result_type", "promote_types", "can_cast", "rsub", "positive"]
METHODS = {name: globals()[name] for name in __all__ if name not in ("result_type", "promote_types", "can_cast",
                                                                     "rsub")}
METHODS.update(_INPLACE)
METHODS.update(_INFO)
