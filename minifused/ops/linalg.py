"""``minifused.linalg``: the norms PyTorch keeps under ``torch.linalg`` (``vector_norm``, ``matrix_norm``,
``norm``), composed of the reductions, so their gradients are the reductions'."""
from __future__ import annotations

import math
import numbers

from .. import backend
from ..tensor import Tensor
from ._common import cast, normalize_axis
from .elementwise import abs  # noqa: A004
from .reduce import amax, amin, sum, vector_norm  # noqa: A004
from ..backend import InputTypeError

__all__ = ["vector_norm", "matrix_norm", "norm"]


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):  # noqa: A002 - PyTorch's names
    """``torch.linalg.matrix_norm`` over the two dimensions ``dim``: 'fro', inf, -inf, 1 or -1 (the largest or
    smallest absolute row sum for +-inf, column sum for +-1). 'nuc', 2 and -2 need singular values, which
    minifused does not compute: a clear NotImplementedError."""
    op = "linalg.matrix_norm"
    if not isinstance(A, Tensor):
        raise InputTypeError(f"{op}: expected a Tensor, got {type(A).__name__}")
    if dtype is not None:
        A = cast(A, dtype)
    if not backend.is_floating(A.dtype):
        raise InputTypeError(f"{op}: expected a floating-point input, got dtype {A.dtype}")
    if A.ndim < 2:
        raise RuntimeError(f"{op}: the input tensor A must have at least 2 dimensions, got shape {tuple(A.shape)}")
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise RuntimeError(f"{op}: dim must be a 2-tuple, got {dim!r}")
    rows, cols = normalize_axis(op, tuple(dim), A.ndim)
    if rows == cols:
        raise RuntimeError(f"{op}: dims must be different, got ({dim[0]}, {dim[1]})")
    if ord == "fro":
        return vector_norm(A, 2, (rows, cols), keepdim)
    if ord in ("nuc", 2, -2):
        raise NotImplementedError(f"{op}: ord={ord!r} needs singular values, which are not supported ('fro', inf, "
                                  f"-inf, 1 and -1 are)")
    if isinstance(ord, bool) or not isinstance(ord, numbers.Real) or ord not in (1, -1, math.inf, -math.inf):
        raise RuntimeError(f"{op}: ord must be 'fro', 'nuc', inf, -inf, 1, -1, 2 or -2, got {ord!r}")
    if any(A.shape[d] == 0 for d in (rows, cols)):
        raise IndexError(f"{op}: cannot take the {ord} norm of an empty matrix, got shape {tuple(A.shape)}")
    summed, kept = (cols, rows) if math.isinf(ord) else (rows, cols)  # +-inf: row sums; +-1: column sums
    sums = sum(abs(A), summed, keepdim=True)
    out = (amax if ord > 0 else amin)(sums, kept, keepdim=True)
    return out if keepdim else out.squeeze((rows, cols))


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):  # noqa: A002 - PyTorch's names
    """``torch.linalg.norm``: the 2-norm of every element for ``ord=None, dim=None``; a vector norm over an int
    ``dim`` (or of a 1-D input), a matrix norm over a 2-tuple ``dim`` (or of a 2-D input) with ``ord``."""
    op = "linalg.norm"
    if not isinstance(A, Tensor):
        raise InputTypeError(f"{op}: expected a Tensor, got {type(A).__name__}")
    if isinstance(dim, numbers.Integral) and not isinstance(dim, bool):
        dim = (int(dim),)
    if dim is None:
        if ord is None:
            return vector_norm(A, 2, None, keepdim, dtype)
        if A.ndim not in (1, 2):
            raise RuntimeError(f"{op}: if dim is not specified but ord is, the input must be 1D or 2D, got "
                               f"{A.ndim}D")
        dim = tuple(range(A.ndim))
    dim = tuple(dim)
    if len(dim) == 1:
        if isinstance(ord, str):
            raise RuntimeError(f"{op}: ord={ord!r} is a matrix norm: it needs two dimensions, got dim={dim}")
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype)
    if len(dim) == 2:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    raise RuntimeError(f"{op}: dim must be an int, a 1-tuple or a 2-tuple, got {dim!r}")
