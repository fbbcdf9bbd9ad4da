"""The ops: one ``Function`` per op family, and the one place where ``Tensor`` gets
its operators and methods (the tensor layer sits above the ops and cannot
import them)."""
from __future__ import annotations

import builtins
import functools
import inspect
import numbers

import numpy as np

from .. import backend
from ..tensor import Tensor
from . import (activation, aliases, arrange, creation, diagonals, elementwise, index, linalg, logic, masking, matmul,
               movement, pointwise, products, reduce, resample, scan, scatter_reductions, shape, sorting,
               special, statistics)
from . import linalg_toplevel
from . import lowrank, numeric, quantize, special_math
from . import tensor_extras, views_inplace
from . import scalars_first
from .activation import *  # noqa: F401,F403
from .aliases import *  # noqa: F401,F403
from .arrange import *  # noqa: F401,F403
from .creation import *  # noqa: F401,F403
from .diagonals import *  # noqa: F401,F403
from .index import *  # noqa: F401,F403
from .linalg_toplevel import *  # noqa: F401,F403
from .logic import *  # noqa: F401,F403
from .masking import *  # noqa: F401,F403
from .pointwise import *  # noqa: F401,F403
from .products import *  # noqa: F401,F403
from .resample import *  # noqa: F401,F403
from .scatter_reductions import *  # noqa: F401,F403
from .statistics import *  # noqa: F401,F403
from .sorting import *  # noqa: F401,F403
from .special import *  # noqa: F401,F403
from .special_math import *  # noqa: F401,F403
from .numeric import *  # noqa: F401,F403
from .quantize import *  # noqa: F401,F403
from .lowrank import *  # noqa: F401,F403
from .tensor_extras import *  # noqa: F401,F403
from .views_inplace import *  # noqa: F401,F403
from .elementwise import (abs, add, cast, clamp, clone, eq, exp, ge, gelu, gt, le, log, lt,  # noqa: A004
                          maximum, minimum, mul, ne, neg, pow, relu, sigmoid, sqrt, sub, tanh, to_device, where)
from .elementwise import div as _true_div
from .inplace_arith import add_, copy_, div_, mul_, sub_
from .matmul import addmm, bmm, dot, einsum, matmul, mm, outer, t
from .movement import (chunk, diag, diff, expand_as, flip, movedim, narrow, narrow_copy, repeat, reshape_as, roll,
                       split, swapaxes, tile, tril, tril_, triu, triu_, type_as, unbind, unfold, view_as)
from .reduce import (all, amax, amin, aminmax, any, argmax, argmin, count_nonzero, logsumexp, max,  # noqa: A004
                     mean, median, min, prod, std, std_mean, sum, sum_to_size, var, var_mean)
from .tensor_norm import norm
from .scan import cummax, cummin, cumprod, cumsum
from .shape import (cat, channels_last, contiguous, contiguous_format, expand, flatten, getitem, is_contiguous,
                    memory_format, permute, preserve_format, reshape, setitem, squeeze, stack, transpose, unsqueeze,
                    view)
from ..backend import InputError, InputTypeError


def div(input, other, *, rounding_mode=None):  # noqa: A002 - PyTorch's names
    """PyTorch's ``div``: true division (integer operands give float32), or with ``rounding_mode`` ('trunc',
    'floor') :func:`divide`'s rounded quotient."""
    if rounding_mode is None:
        return _true_div(input, other)
    return aliases.divide(input, other, rounding_mode=rounding_mode)


def _split_method(self, split_size, dim=0):
    """``Tensor.split(split_size, dim=0)``: :func:`split` (whose second parameter is ``split_size_or_sections``)
    under the method's name for it, as PyTorch's."""
    return split(self, split_size, dim)


def _swapped(fn):
    return lambda self, other: fn(other, self)


def _to(self, *args, **kwargs):
    """``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(other_tensor)``; keywords too, and
    ``memory_format`` (``preserve_format`` by default). ``non_blocking`` (after them, or by keyword) is accepted
    as PyTorch's (copies are ordered on the current stream either way); ``copy=True`` returns a new tensor even
    where nothing changes."""
    device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
    fmt = shape.check_memory_format("to", kwargs.pop("memory_format", preserve_format))
    flags = [kwargs.pop("non_blocking", False), kwargs.pop("copy", False)]
    if kwargs:
        raise InputTypeError(f"to(): unexpected arguments {sorted(kwargs)}")
    bools = [a for a in args if isinstance(a, bool)]
    if len(bools) > 2 or [a for a in args[len(args) - len(bools):] if not isinstance(a, bool)]:
        raise InputTypeError(f"to(): non_blocking and copy come after the device, dtype or tensor, got {args!r}")
    flags[:len(bools)] = bools
    for name, flag in zip(("non_blocking", "copy"), flags):
        if not isinstance(flag, bool):
            raise InputTypeError(f"to(): {name} must be a bool, got {flag!r}")
    for a in args[:len(args) - len(bools)]:
        if isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, (backend.Device, int)) or (isinstance(a, str) and a.split(":")[0] in ("cpu", "cuda")):
            device = a
        elif isinstance(a, str) and a.lower() not in backend.DTYPE_NAMES:
            raise InputError(f"to(): unknown device {a!r}; expected 'cpu', 'cuda' or 'cuda:N' (or a dtype name: "
                             f"{', '.join(sorted(backend.DTYPE_NAMES))})")
        else:
            dtype = a
    out = self
    if device is not None:
        out = to_device(out, device)
    if dtype is not None:
        out = cast(out, dtype)
    if fmt is not preserve_format:
        out = contiguous(out, fmt)
    return clone(out) if flags[1] and out is self else out


_TYPE_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
               "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


_TYPE_DTYPES = {kind: backend.as_dtype(name) for name, kind in _TYPE_NAMES.items()}


def _type(self, dtype=None, non_blocking=False):
    """``Tensor.type()``: the tensor's type name (``'minifused.FloatTensor'``, ``'minifused.cuda.HalfTensor'``
    ...); ``Tensor.type(dtype)``: the tensor cast to it, as PyTorch's; given a legacy tensor type
    (``minifused.LongTensor``) or a type name (``'torch.cuda.HalfTensor'``), also moved to its device."""
    if isinstance(dtype, str) and dtype.endswith("Tensor"):
        prefix, _, kind = dtype.rpartition(".")
        if prefix not in ("torch", "minifused", "torch.cuda", "minifused.cuda") or kind[:-6] not in _TYPE_DTYPES:
            raise InputError(f"type(): invalid type {dtype!r}; expected a dtype or a tensor type name such as "
                             f"'minifused.FloatTensor' or 'minifused.cuda.HalfTensor'")
        return _to(self, "cuda" if prefix.endswith("cuda") else "cpu", _TYPE_DTYPES[kind[:-6]])
    if isinstance(dtype, type) and hasattr(dtype, "is_cuda") and hasattr(dtype, "dtype"):  # a legacy tensor type
        return _to(self, "cuda" if dtype.is_cuda else "cpu", dtype.dtype)
    if dtype is not None:
        return cast(self, dtype)
    name = np.dtype(self.dtype).name
    return f"minifused.{'cuda.' if self.is_cuda else ''}{_TYPE_NAMES.get(name, name.capitalize())}Tensor"


def _matrix_transpose(self, name):
    """``Tensor.H`` (a matrix), ``.mT`` / ``.mH`` (matrices or batches of them): the last two dims swapped."""
    if self.ndim < 2 or (name == "H" and self.ndim != 2):
        what = "matrices (2-D tensors)" if name == "H" else "matrices or batches of matrices"
        raise InputError(f"tensor.{name} is only supported on {what}. Got {self.ndim}-D tensor.")
    return transpose(self, -2, -1)


def _pin_memory(self):
    """The tensor itself on the cpu (a loader's ``pin_memory=True`` path; host-to-device copies need no pinned
    staging here); a cuda tensor cannot be pinned, as in PyTorch."""
    if self.device.type != "cpu":
        raise RuntimeError(f"pin_memory: cannot pin a tensor on {self.device}: only cpu tensors can be pinned")
    return self


def _comparison(fn):
    """``fn`` as an operator: None, strings and Python containers are not comparable with a tensor (PyTorch's
    ``t == None`` is False, ``t < None`` a TypeError)."""
    def operator(self, other):
        if other is None or isinstance(other, (str, list, tuple, dict, set)):
            return NotImplemented
        return fn(self, other)

    operator.__name__ = fn.__name__
    return operator


#: Operands no tensor operator takes: Python's sequences (and None, dicts, sets). PyTorch's operators return
#: NotImplemented for them, so Python falls back to the other side: ``[0] * t`` and ``t * (1, 2)`` repeat the
#: sequence ``int(t)`` times (through ``Tensor.__index__``: a one-element integer tensor), ``t + [1]`` is a TypeError.
_NOT_OPERANDS = (list, tuple, str, bytes, bytearray, range, dict, set, frozenset, type(None))


def _operator(fn):
    """``fn`` as a binary operator (``+``, ``*``, ``&`` ..., and their reflected forms): NotImplemented for an operand
    in :data:`_NOT_OPERANDS`, as PyTorch's."""
    def operator(self, other):
        if isinstance(other, _NOT_OPERANDS):
            return NotImplemented
        return fn(self, other)

    operator.__name__ = getattr(fn, "__name__", "operator")
    return operator


_BINARY_OPERATORS = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor", "lshift",
                     "rshift")


def _iter(self):
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    return (self[i] for i in builtins.range(self.shape[0]))


def _contains(self, element):
    """``element in self``: whether any entry equals it, as PyTorch's."""
    if not isinstance(element, (Tensor, numbers.Number)):
        raise RuntimeError(f"Tensor.__contains__ only supports Tensor or scalar, but you passed in a "
                           f"{type(element).__name__}")
    return bool((self == element).any().item())


_METHODS = {
    # arithmetic and comparison operators
    "__add__": add, "__radd__": _swapped(add), "__sub__": sub, "__rsub__": _swapped(sub),
    "__mul__": mul, "__rmul__": _swapped(mul), "__truediv__": div, "__rtruediv__": _swapped(div),
    "__pow__": pow, "__rpow__": _swapped(pow), "__matmul__": matmul, "__rmatmul__": _swapped(matmul),
    "__neg__": neg, "__abs__": abs, "__pos__": lambda self: self,
    "__eq__": _comparison(eq), "__ne__": _comparison(ne), "__lt__": _comparison(lt), "__le__": _comparison(le),
    "__gt__": _comparison(gt), "__ge__": _comparison(ge),
    "__getitem__": getitem, "__setitem__": setitem, "__iter__": _iter, "__contains__": _contains,
    # methods
    "add": add, "sub": sub, "mul": mul, "div": div, "pow": pow, "matmul": matmul, "neg": neg,
    "add_": add_, "sub_": sub_, "mul_": mul_, "div_": div_, "copy_": copy_,
    "__iadd__": add_, "__isub__": sub_, "__imul__": mul_, "__itruediv__": div_,
    "exp": exp, "log": log, "sqrt": sqrt, "abs": abs, "tanh": tanh, "sigmoid": sigmoid, "relu": relu,
    "clamp": clamp, "clip": clamp, "maximum": maximum, "minimum": minimum,
    "eq": eq, "ne": ne, "lt": lt, "le": le, "gt": gt, "ge": ge,
    "sum_to_size": sum_to_size,
    "sum": sum, "mean": mean, "max": max, "min": min, "amax": amax, "amin": amin, "var": var, "std": std,
    "aminmax": aminmax, "diff": diff, "unfold": unfold,
    "argmax": argmax, "argmin": argmin, "prod": prod, "logsumexp": logsumexp, "any": any, "all": all,
    "norm": norm, "count_nonzero": count_nonzero, "median": median, "cumsum": cumsum, "cumprod": cumprod, "cummax": cummax,
    "cummin": cummin,
    "mm": mm, "bmm": bmm, "dot": dot, "outer": outer, "addmm": addmm, "t": t,
    "split": _split_method, "chunk": chunk, "unbind": unbind, "narrow": narrow, "repeat": repeat, "tile": tile,
    "expand_as": expand_as, "view_as": view_as, "reshape_as": reshape_as, "tril": tril, "triu": triu,
    "tril_": tril_, "triu_": triu_, "narrow_copy": narrow_copy,
    "flip": flip, "roll": roll, "diag": diag, "movedim": movedim, "moveaxis": movedim,
    "swapaxes": swapaxes, "swapdims": arrange.swapdims,
    "reshape": reshape, "view": view, "flatten": flatten, "permute": permute, "transpose": transpose,
    "unsqueeze": unsqueeze, "squeeze": squeeze, "expand": expand, "contiguous": contiguous,
    "is_contiguous": is_contiguous, "clone": clone,
    "to": _to, "cpu": lambda self: to_device(self, "cpu"),
    "cuda": lambda self, device=None, non_blocking=False: to_device(self, "cuda" if device is None else device),
    "pin_memory": _pin_memory, "is_pinned": lambda self: False, "type": _type,
    "bernoulli": lambda self, p=None, *, generator=None: creation.bernoulli(self, p, generator=generator),
    "bernoulli_": creation.bernoulli_,
    "float": lambda self: cast(self, backend.float32), "double": lambda self: cast(self, backend.float64),
    "half": lambda self: cast(self, backend.float16), "bfloat16": lambda self: cast(self, backend.bfloat16),
    "long": lambda self: cast(self, backend.int64), "int": lambda self: cast(self, backend.int32),
    "bool": lambda self: cast(self, backend.bool_),
    "type_as": type_as,
    "T": property(shape.T),
    "mT": property(lambda self: _matrix_transpose(self, "mT")),
    # real tensors: the conjugate transposes are the transposes, conjugation and negation bits never set
    "H": property(lambda self: _matrix_transpose(self, "H")),
    "mH": property(lambda self: _matrix_transpose(self, "mH")),
    "resolve_conj": lambda self: self, "resolve_neg": lambda self: self, "is_inference": lambda self: False,
}
# the families in their own modules declare theirs
_FAMILIES = (pointwise, logic, index, masking, sorting, activation, resample, products, diagonals, arrange, special,
             aliases, scatter_reductions, statistics, linalg_toplevel, special_math, numeric, quantize, tensor_extras,
             views_inplace, lowrank)
for _family in _FAMILIES:
    _METHODS.update(_family.METHODS)
for _op in _BINARY_OPERATORS:
    for _name in (f"__{_op}__", f"__r{_op}__"):
        _METHODS[_name] = _operator(_METHODS[_name])
for _base in scalars_first.SIGNATURES:  # also PyTorch's deprecated forms, scalars first: x.addmm_(1, -2, a, b)
    for _name in (_base, _base + "_"):
        _METHODS[_name] = scalars_first.accepting_scalars_first(_name, _METHODS[_name])
for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)

__all__ = creation.__all__ + [n for _family in _FAMILIES for n in _family.__all__] + ["abs", "add", "cast", "clamp", "clone", "div", "eq", "exp", "ge", "gelu", "gt", "le",
                     "log", "lt", "maximum", "minimum", "mul", "ne", "neg", "pow", "relu", "sigmoid", "sqrt",
                     "sub", "tanh", "where", "matmul", "amax", "amin", "argmax", "argmin", "max", "mean",
                     "min", "std", "sum", "var", "cat", "flatten", "permute", "reshape", "squeeze", "stack",
                     "transpose", "unsqueeze",
                     "all", "any", "count_nonzero", "cummax", "cummin", "cumprod", "cumsum", "logsumexp", "median", "norm", "prod",
                     "linalg",
                     "addmm", "bmm", "dot", "einsum", "mm", "outer", "t",
                     "chunk", "diag", "flip", "movedim", "narrow", "roll", "aminmax", "var_mean", "std_mean",
                     "diff",
                     "split", "swapaxes", "tile", "tril", "triu", "unbind"]


# ---- the public functions check their tensor argument first, so a list or None gets PyTorch's TypeError
# naming the function, not an AttributeError from inside (Tensor methods and operators skip the check:
# their self is a tensor)
_SCALAR_FIRST_OK = {"add", "sub", "mul", "div", "pow", "remainder", "floor_divide", "atan2", "is_tensor",
                    "multiply", "divide", "subtract", "true_divide",
                    "xlogy", "float_power", "bucketize",
                    "bitwise_and", "bitwise_or", "bitwise_xor", "logical_and", "logical_or", "logical_xor",
                    "bitwise_left_shift", "bitwise_right_shift"}


def _tensor_checked(name, fn):
    param = next(iter(inspect.signature(fn).parameters))

    @functools.wraps(fn)
    def public(*args, **kwargs):
        given = args[0] if args else kwargs.get(param, Tensor)
        if not isinstance(given, Tensor) and given is not Tensor:
            raise InputTypeError(f"{name}(): argument '{param}' must be a Tensor, not {type(given).__name__}")
        return fn(*args, **kwargs)
    return public


for _name in __all__:
    _fn = globals().get(_name)
    if (inspect.isfunction(_fn) and _name not in _SCALAR_FIRST_OK
            and next(iter(inspect.signature(_fn).parameters), None) in ("x", "input", "a", "tensor", "self")):
        globals()[_name] = _tensor_checked(_name, _fn)
