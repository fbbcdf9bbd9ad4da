"""PyTorch's ``out=`` on the top-level arithmetic, products and joins (``torch.add(a, b, out=c)``,
``torch.matmul(a, b, out=c)``, ``torch.cat(ts, out=c)``): the result written into ``out`` and ``out`` returned,
with PyTorch's rules. ``out`` is resized to the result's shape (with PyTorch's warning when it had elements) and
takes the result in its own dtype where the result casts to it (not a float into an integer tensor); out= is
refused where autograd would have to record it (an argument requires grad in grad mode). Only the top-level
functions take it: the Tensor operators stay the plain ops."""
from __future__ import annotations

import functools

from .. import ops
from ..ops._common import write_out

__all__ = ["add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "matmul", "mm", "bmm",
           "cat", "stack"]


def _with_out(fn):
    @functools.wraps(fn)
    def op(*args, out=None, **kwargs):
        result = fn(*args, **kwargs)
        return result if out is None else write_out(fn.__name__, result, out)
    return op


(add, sub, subtract, mul, multiply, div, divide, true_divide, matmul, mm, bmm, cat, stack) = (
    _with_out(getattr(ops, name)) for name in __all__)
