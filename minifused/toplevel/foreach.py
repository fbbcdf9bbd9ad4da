"""PyTorch's ``torch._foreach_*`` spellings (an op over each tensor of a list: EMA updates and hand-written
optimizer steps call them): loops over the tensors' own methods, in place where the name ends in ``_``. The
second operand is a number or tensor for every tensor, or a list of one each."""
from __future__ import annotations

from ..ops.reduce import vector_norm
from ..tensor import Tensor


def _each(op, tensors, other):
    tensors = list(tensors)
    if not all(isinstance(t, Tensor) for t in tensors):
        raise TypeError(f"{op}: expected a list of tensors")
    if isinstance(other, (list, tuple)):
        if len(other) != len(tensors):
            raise RuntimeError(f"{op}: expected {len(tensors)} operands, one for each tensor, got {len(other)}")
        return tensors, list(other)
    return tensors, [other] * len(tensors)


def _binary(name, method):
    def inplace(self, other, **kwargs):
        tensors, others = _each(f"_foreach_{name}_", self, other)
        for t, o in zip(tensors, others):
            getattr(t, f"{method}_")(o, **kwargs)

    def outofplace(self, other, **kwargs):
        tensors, others = _each(f"_foreach_{name}", self, other)
        return [getattr(t, method)(o, **kwargs) for t, o in zip(tensors, others)]

    inplace.__name__, outofplace.__name__ = f"_foreach_{name}_", f"_foreach_{name}"
    return inplace, outofplace


_foreach_add_, _foreach_add = _binary("add", "add")
_foreach_sub_, _foreach_sub = _binary("sub", "sub")
_foreach_mul_, _foreach_mul = _binary("mul", "mul")
_foreach_div_, _foreach_div = _binary("div", "div")
_foreach_copy_ = _binary("copy", "copy")[0]


def _foreach_lerp_(self, tensors1, weight):
    tensors, ends = _each("_foreach_lerp_", self, list(tensors1))
    _, weights = _each("_foreach_lerp_", tensors, weight)
    for t, e, w in zip(tensors, ends, weights):
        t.lerp_(e, w)


def _foreach_lerp(self, tensors1, weight):
    tensors, ends = _each("_foreach_lerp", self, list(tensors1))
    _, weights = _each("_foreach_lerp", tensors, weight)
    return [t.lerp(e, w) for t, e, w in zip(tensors, ends, weights)]


def _pointwise(name):
    def inplace(self, tensor1, tensor2, value=1):
        tensors, firsts = _each(f"_foreach_{name}_", self, list(tensor1))
        _, seconds = _each(f"_foreach_{name}_", tensors, list(tensor2))
        _, values = _each(f"_foreach_{name}_", tensors, value)
        for t, a, b, v in zip(tensors, firsts, seconds, values):
            getattr(t, f"{name}_")(a, b, value=v)

    inplace.__name__ = f"_foreach_{name}_"
    return inplace


_foreach_addcmul_ = _pointwise("addcmul")
_foreach_addcdiv_ = _pointwise("addcdiv")


def _foreach_zero_(self):
    for t in _each("_foreach_zero_", self, None)[0]:
        t.zero_()


def _foreach_sqrt(self):
    return [t.sqrt() for t in _each("_foreach_sqrt", self, None)[0]]


def _foreach_sqrt_(self):
    for t in _each("_foreach_sqrt_", self, None)[0]:
        t.sqrt_()


def _foreach_neg(self):
    return [t.neg() for t in _each("_foreach_neg", self, None)[0]]


def _foreach_norm(self, ord=2, dtype=None):  # noqa: A002 - PyTorch's names
    """The ``ord``-norm of each tensor (a 0-d tensor each)."""
    return [vector_norm(t, ord, dtype=dtype) for t in _each("_foreach_norm", self, None)[0]]


__all__ = ["_foreach_add", "_foreach_add_", "_foreach_addcdiv_", "_foreach_addcmul_", "_foreach_copy_",
           "_foreach_div", "_foreach_div_", "_foreach_lerp", "_foreach_lerp_", "_foreach_mul", "_foreach_mul_",
           "_foreach_neg", "_foreach_norm", "_foreach_sqrt", "_foreach_sqrt_", "_foreach_sub", "_foreach_sub_",
           "_foreach_zero_"]
