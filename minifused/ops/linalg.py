"""``minifused.linalg``: PyTorch's ``torch.linalg``. The norms (``vector_norm``, ``matrix_norm``, ``norm``) and
``cond`` live here, composed of the reductions and of ``svdvals`` / ``inv_ex``, so their gradients are theirs; the
factorizations come from ``linalg_decomp.py``, the LU family from ``linalg_lu.py``, the solvers from
``linalg_solve.py``, the matrix functions and products from ``linalg_funcs.py``."""
from __future__ import annotations

import math
import numbers

from .. import backend
from ..tensor import Tensor
from ._common import autocast_float32, autocast_float32_on_cuda, cast, normalize_axis
from .elementwise import abs, mul, where  # noqa: A004
from .linalg_common import LinAlgError, check_matrix, dtype_name
from .linalg_decomp import (cholesky, cholesky_ex, det, eigh, eigvalsh, inv, inv_ex, qr, slogdet, svd, svdvals,
                            tensorinv)
from .linalg_funcs import (cross, diagonal, householder_product, linalg_matmul as matmul, matrix_exp, matrix_power,
                           multi_dot, vander, vecdot)
from .linalg_lu import lu, lu_factor, lu_factor_ex, lu_solve
from .linalg_solve import lstsq, matrix_rank, pinv, solve, solve_ex, solve_triangular, tensorsolve
from .movement import movedim
from .reduce import amax, amin, sum, vector_norm  # noqa: A004
from .shape import unsqueeze
from ..backend import InputError, InputTypeError

__all__ = ["vector_norm", "matrix_norm", "norm", "cond", "LinAlgError", "inv", "inv_ex", "det", "slogdet", "cholesky",
           "cholesky_ex", "qr", "eigh", "eigvalsh", "svd", "svdvals", "solve", "solve_ex", "solve_triangular", "pinv",
           "matrix_rank", "lstsq", "matrix_exp", "matrix_power", "multi_dot", "cross", "vecdot", "diagonal", "matmul",
           "vander", "tensorinv", "tensorsolve", "lu_factor", "lu_factor_ex", "lu", "lu_solve", "householder_product"]


def matrix_norm(input, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):  # noqa: A002 - PyTorch's names
    """``torch.linalg.matrix_norm`` over the two dimensions ``dim``: 'fro', inf, -inf, 1 or -1 (the largest or
    smallest absolute row sum for +-inf, column sum for +-1), 'nuc', 2 or -2 (the sum, largest or smallest of the
    singular values: float32 / float64 only, as PyTorch's)."""
    op = "linalg.matrix_norm"
    if not isinstance(input, Tensor):
        raise InputTypeError(f"{op}: expected a Tensor, got {type(input).__name__}")
    if dtype is not None:
        input = cast(input, dtype)
    else:  # (on PyTorch's cuda autocast float32 list where no dtype is given)
        (input,) = autocast_float32_on_cuda(input)
    if not backend.is_floating(input.dtype):
        raise InputTypeError(f"{op}: expected a floating-point input, got dtype {input.dtype}")
    if input.ndim < 2:
        raise RuntimeError(f"{op}: the input tensor A must have at least 2 dimensions, got shape {tuple(input.shape)}")
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise RuntimeError(f"{op}: dim must be a 2-tuple, got {dim!r}")
    rows, cols = normalize_axis(op, tuple(dim), input.ndim)
    if rows == cols:
        raise RuntimeError(f"{op}: dims must be different, got ({dim[0]}, {dim[1]})")
    if ord == "fro":
        return vector_norm(input, 2, (rows, cols), keepdim)
    if ord in ("nuc", 2, -2):
        return _singular_norm(op, input, ord, rows, cols, keepdim)
    if isinstance(ord, bool) or not isinstance(ord, numbers.Real) or ord not in (1, -1, math.inf, -math.inf):
        raise RuntimeError(f"{op}: ord must be 'fro', 'nuc', inf, -inf, 1, -1, 2 or -2, got {ord!r}")
    summed, kept = (cols, rows) if math.isinf(ord) else (rows, cols)  # +-inf: row sums; +-1: column sums
    sums = sum(abs(input), summed, keepdim=True)
    if input.shape[kept] == 0:  # no row (column) sums: the largest is 0, as PyTorch's, the smallest does not exist
        if ord < 0:
            what = "rows" if kept == rows else "columns"
            raise IndexError(f"{op}: cannot take the {ord} norm of a matrix without {what}, got shape "
                             f"{tuple(input.shape)}")
        out = sum(sums, kept, keepdim=True)
    else:
        out = (amax if ord > 0 else amin)(sums, kept, keepdim=True)
    return out if keepdim else out.squeeze((rows, cols))


def norm(input, ord=None, dim=None, keepdim=False, *, dtype=None):  # noqa: A002 - PyTorch's names
    """``torch.linalg.norm``: the 2-norm of every element for ``ord=None, dim=None``; a vector norm over an int
    ``dim`` (or of a 1-D input), a matrix norm over a 2-tuple ``dim`` (or of a 2-D input) with ``ord``."""
    op = "linalg.norm"
    if not isinstance(input, Tensor):
        raise InputTypeError(f"{op}: expected a Tensor, got {type(input).__name__}")
    if isinstance(dim, numbers.Integral) and not isinstance(dim, bool):
        dim = (int(dim),)
    if dim is None:
        if ord is None:
            return vector_norm(input, 2, None, keepdim, dtype)
        if input.ndim not in (1, 2):
            raise RuntimeError(f"{op}: if dim is not specified but ord is, the input must be 1D or 2D, got "
                               f"{input.ndim}D")
        dim = tuple(range(input.ndim))
    dim = tuple(dim)
    if len(dim) == 1:
        if isinstance(ord, str):
            raise RuntimeError(f"{op}: ord={ord!r} is a matrix norm: it needs two dimensions, got dim={dim}")
        return vector_norm(input, 2 if ord is None else ord, dim, keepdim, dtype)
    if len(dim) == 2:
        return matrix_norm(input, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    raise RuntimeError(f"{op}: dim must be an int, a 1-tuple or a 2-tuple, got {dim!r}")


def _singular_norm(op, A, ord, rows, cols, keepdim):  # noqa: A002 - PyTorch's name
    """The 'nuc', 2 or -2 matrix norm over dims (rows, cols): of the singular values."""
    if A.dtype in (backend.float16, backend.bfloat16):
        raise InputTypeError(f"{op}: Low precision dtypes not supported. Got {dtype_name(A.dtype)}")
    s = svdvals(movedim(A, (rows, cols), (-2, -1)))
    if s.shape[-1] == 0 and ord == -2:
        raise IndexError(f"{op}: cannot take the -2 norm of an empty matrix (it has no singular values), got shape "
                         f"{tuple(A.shape)}")
    # an empty matrix has no singular values: its nuclear and 2-norms are 0, as PyTorch's
    out = sum(s, -1) if ord == "nuc" or s.shape[-1] == 0 else (amax if ord == 2 else amin)(s, -1)
    if keepdim:
        for d in sorted((rows, cols)):
            out = unsqueeze(out, d)
    return out


def cond(input, p=None):
    """``torch.linalg.cond``: the condition number of each matrix in the norm ``p``: None or 2 (the largest over the
    smallest singular value), -2 (its inverse), for any matrix; 'fro', 'nuc', inf, -inf, 1, -1 (norm(A) times
    norm(A^-1)) for square ones, inf where A is singular."""
    op = "linalg.cond"
    (input,) = autocast_float32(input, devices=("cpu",))  # (on PyTorch's cpu float32 list)
    if p not in (None, 2, -2, "fro", "nuc", math.inf, -math.inf, 1, -1) or isinstance(p, bool):
        raise InputError(f"linalg.cond got an invalid norm type: {p}")
    if p in (None, 2, -2):
        check_matrix(op, input, square=False)
        s = svdvals(input)
        big, small = s[..., 0], s[..., -1]
        return big / small if p != -2 else small / big
    check_matrix(f"linalg.cond(ord={p})", input)
    inverse, info = inv_ex(input)
    out = mul(matrix_norm(input, p), matrix_norm(inverse, p))
    return where(info > 0, Tensor._from_array(input._xp.asarray(math.inf, input.dtype)), out)

