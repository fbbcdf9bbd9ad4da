"""PyTorch's ``out=`` on the top-level arithmetic, products and joins (``torch.add(a, b, out=c)``,
``torch.matmul(a, b, out=c)``, ``torch.cat(ts, out=c)``): the result written into ``out`` and ``out`` returned,
with PyTorch's rules. ``out`` is resized to the result's shape (with PyTorch's warning when it had elements) and
takes the result in its own dtype where the result casts to it (not a float into an integer tensor); out= is
refused where autograd would have to record it (an argument requires grad in grad mode). Only the top-level
functions take it: the Tensor operators stay the plain ops."""
from __future__ import annotations

import functools
import warnings

from .. import autograd, ops
from ..ops._common import can_cast
from ..tensor import Tensor
from ..backend import InputTypeError

__all__ = ["add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "matmul", "mm", "bmm",
           "cat", "stack"]


def write_out(op, result, out):
    """``result`` written into ``out`` by PyTorch's out= rules (see the module); ``out``."""
    if not isinstance(out, Tensor):
        raise InputTypeError(f"{op}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if result.requires_grad or (out.requires_grad and autograd.is_grad_enabled()):
        raise RuntimeError(f"{op}(): functions with out=... arguments don't support automatic differentiation, "
                           f"but one of the arguments requires grad.")
    if out.device != result.device:
        raise RuntimeError(f"{op}(): the result is on {result.device}, out on {out.device}")
    if not can_cast(result.dtype, out.dtype):
        raise RuntimeError(f"{op}(): result type {result.dtype} can't be cast to the desired output type "
                           f"{out.dtype}")
    if out.shape != result.shape:
        if out.numel():
            warnings.warn(f"{op}(): an output with one or more elements was resized since it had shape "
                          f"{list(out.shape)}, which does not match the required output shape "
                          f"{list(result.shape)}", UserWarning, stacklevel=3)
        out.resize_(result.shape)
    with autograd.no_grad():
        out.copy_(result)
    return out


def _with_out(fn):
    @functools.wraps(fn)
    def op(*args, out=None, **kwargs):
        result = fn(*args, **kwargs)
        return result if out is None else write_out(fn.__name__, result, out)
    return op


(add, sub, subtract, mul, multiply, div, divide, true_divide, matmul, mm, bmm, cat, stack) = (
    _with_out(getattr(ops, name)) for name in __all__)
