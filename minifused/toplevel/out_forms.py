"""PyTorch's ``out=`` on the top-level arithmetic, elementwise math, products and joins (``torch.add(a, b, out=c)``,
``torch.matmul(a, b, out=c)``, ``torch.cat(ts, out=c)``): the result written into ``out`` and ``out`` returned,
with PyTorch's rules. ``out`` is resized to the result's shape (with PyTorch's warning when it had elements) and
takes the result in its own dtype where the result casts to it (not a float into an integer tensor); out= is
refused where autograd would have to record it (an argument requires grad in grad mode). Only the top-level
functions take it: the Tensor operators stay the plain ops."""
from __future__ import annotations

import functools

from .. import ops
from ..ops._common import write_out

# the elementwise math with out=: _MATH's out takes the result where it casts to out's dtype, _SAME_DTYPE's only in
# the result's own dtype, as PyTorch's (float_power's: float64; signbit's and isposinf's: bool)
_MATH = ["pow", "remainder", "fmod", "floor_divide", "maximum", "minimum", "fmax", "fmin", "atan2", "arctan2", "hypot",
         "copysign", "xlogy", "logaddexp", "logaddexp2", "lerp", "square", "exp", "exp2", "expm1", "log", "log2",
         "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
         "tanh", "asinh", "acosh", "atanh", "sigmoid", "logit", "erf", "erfc", "erfinv"]
_SAME_DTYPE = ["abs", "absolute", "neg", "negative", "sign", "sgn", "floor", "ceil", "trunc", "round", "frac",
               "clamp", "nan_to_num", "heaviside", "float_power", "signbit", "isposinf", "isneginf"]
__all__ = ["add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "matmul", "mm", "bmm",
           "cat", "stack"] + _MATH + _SAME_DTYPE


def _with_out(fn, same_dtype=False):
    @functools.wraps(fn)
    def op(*args, out=None, **kwargs):
        result = fn(*args, **kwargs)
        if out is None:
            return result
        if same_dtype and getattr(out, "dtype", result.dtype) != result.dtype:
            raise RuntimeError(f"{fn.__name__}(): Found dtype {out.dtype} but expected {result.dtype} (out= takes "
                               f"the result's dtype only)")
        return write_out(fn.__name__, result, out)
    return op


(add, sub, subtract, mul, multiply, div, divide, true_divide, matmul, mm, bmm, cat, stack) = (
    _with_out(getattr(ops, name)) for name in __all__[:13])
globals().update({name: _with_out(getattr(ops, name)) for name in _MATH})
globals().update({name: _with_out(getattr(ops, name), same_dtype=True) for name in _SAME_DTYPE})
