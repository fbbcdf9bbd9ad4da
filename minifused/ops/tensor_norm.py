"""``torch.norm`` / ``Tensor.norm``: the vector norms of the reductions and, for p='nuc', the matrix norm of
``linalg`` (which builds on the reductions: so this sits above both)."""
from __future__ import annotations

import numbers

from ..tensor import Tensor
from ._common import number_arg
from .linalg import matrix_norm
from .reduce import vector_norm
from ..backend import InputError, InputTypeError

__all__ = ["norm"]


def norm(input: Tensor, p="fro", dim=None, keepdim=False, dtype=None):
    """``torch.norm``: 'fro' (the 2-norm of the elements over ``dim``, at most 2 dims of it, as PyTorch's), 'nuc'
    (the nuclear norm of the matrices over the two dims ``dim``, the last two by default: ``linalg.matrix_norm``),
    or any number, inf or -inf."""
    if isinstance(p, str):
        if p == "nuc":
            dims = tuple(range(input.ndim)) if dim is None else (dim,) if isinstance(dim, numbers.Integral) else dim
            if len(dims) != 2:
                raise InputError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(map(str, dims))}")
            return matrix_norm(input, "nuc", dims, keepdim, dtype=dtype)
        if p != "fro":
            raise RuntimeError(f"norm: p must be 'fro', 'nuc' or a number, got {p!r}")
        if isinstance(dim, (tuple, list)) and len(dim) > 2:  # PyTorch's: a matrix norm then, of 2 dims only
            raise InputError(f"norm: expected at most 2 dims for p='fro', got dim {tuple(dim)} (as PyTorch's: "
                             f"linalg.matrix_norm: dim must be a 2-tuple; p=2 takes any dims)")
        p = 2
    elif p is None:
        p = 2
    p = number_arg("norm", "p", p)
    if not isinstance(p, numbers.Real):  # (a bool is 0 or 1, as in PyTorch)
        raise InputTypeError(f"norm: p must be 'fro' or a number, got {p!r}")
    return vector_norm(input, p, dim, keepdim, dtype)
