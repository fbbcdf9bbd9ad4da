"""The linear algebra PyTorch spells at its top level and as Tensor methods, over ``minifused.linalg``: ``det``,
``logdet``, ``slogdet``, ``inverse``, ``pinverse``, ``matrix_power``, ``matrix_exp``, ``cholesky``, ``cholesky_solve``,
``cholesky_inverse``, ``qr``, ``svd``, ``chain_matmul``, ``lu``, ``lu_solve``, ``lu_unpack`` and ``orgqr``, with their
older signatures: ``svd`` returns V (not Vh) and takes ``some``, ``qr`` takes ``some``, ``pinverse`` ``rcond``,
``lu_solve`` takes B first.

``torch.qr`` and ``torch.cholesky`` were deprecated in PyTorch 1.9 for their ``linalg`` forms, and PyTorch 2.14
raises for them; here they still work, warning as PyTorch did while it kept them. ``torch.lu`` and ``torch.lu_solve``
are deprecated too, and warn as PyTorch 2.13's do."""
from __future__ import annotations

import math
import os
import sys
import warnings
from collections import namedtuple

from ..tensor import Tensor
from . import linalg
from ._common import autocast_float32
from .elementwise import where
from .linalg_common import check_matrix
from .linalg_funcs import chain_matmul
from .linalg_lu import lu_unpack
from .linalg_solve import cholesky_inverse, cholesky_solve

# PyTorch's torch.return_types of the top-level spellings
SlogdetResult = namedtuple("slogdet", ["sign", "logabsdet"])
QRResult = namedtuple("qr", ["Q", "R"])
SVDResult = namedtuple("svd", ["U", "S", "V"])
LUWithInfoResult = namedtuple("_lu_with_info", ["LU", "pivots", "info"])


def det(input):  # noqa: A002 - PyTorch's name
    """``torch.det``: :func:`minifused.linalg.det`."""
    return linalg.det(input)


def slogdet(input):  # noqa: A002 - PyTorch's name
    """``torch.slogdet``: (sign, logabsdet) of the determinant, as :func:`minifused.linalg.slogdet`."""
    return SlogdetResult(*linalg.slogdet(input))


def logdet(input):  # noqa: A002 - PyTorch's name
    """``torch.logdet``: log det(A); NaN where the determinant is negative, -inf where it is 0."""
    sign, logabsdet = linalg.slogdet(input)
    nan = Tensor._from_array(input._xp.asarray(math.nan, input.dtype))
    return where(sign < 0, nan, logabsdet)


def inverse(input):  # noqa: A002 - PyTorch's name
    """``torch.inverse``: :func:`minifused.linalg.inv`."""
    return linalg.inv(input)


def pinverse(input, rcond=1e-15):  # noqa: A002 - PyTorch's name
    """``torch.pinverse``: :func:`minifused.linalg.pinv` with singular values at or below ``rcond`` times the largest
    dropped. Under autocast on cpu in float32 (PyTorch's cpu float32 list has pinverse, not linalg.pinv)."""
    (input,) = autocast_float32(input, devices=("cpu",))
    return linalg.pinv(input, rtol=rcond)


def matrix_power(input, n):  # noqa: A002 - PyTorch's name
    """``torch.matrix_power``: :func:`minifused.linalg.matrix_power`."""
    return linalg.matrix_power(input, n)


def matrix_exp(input):  # noqa: A002 - PyTorch's name
    """``torch.matrix_exp``: :func:`minifused.linalg.matrix_exp`."""
    return linalg.matrix_exp(input)


def cholesky(input, upper=False):  # noqa: A002 - PyTorch's name
    """``torch.cholesky`` (deprecated for :func:`minifused.linalg.cholesky`, which it is, with PyTorch's warning)."""
    warnings.warn("torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed in a future "
                  "PyTorch release. L = torch.cholesky(A) should be replaced with L = torch.linalg.cholesky(A), and "
                  "U = torch.cholesky(A, upper=True) with U = torch.linalg.cholesky(A).mH", UserWarning, stacklevel=2)
    return linalg.cholesky(input, upper=upper)


def qr(input, some=True):  # noqa: A002 - PyTorch's name
    """``torch.qr`` (deprecated for :func:`minifused.linalg.qr`, with PyTorch's warning): (Q, R), reduced with
    ``some``, complete without."""
    warnings.warn("torch.qr is deprecated in favor of torch.linalg.qr and will be removed in a future PyTorch "
                  "release. The boolean parameter 'some' has been replaced with a string parameter 'mode'. "
                  "Q, R = torch.qr(A, some) should be replaced with Q, R = torch.linalg.qr(A, 'reduced' if some else "
                  "'complete')", UserWarning, stacklevel=2)
    return QRResult(*linalg.qr(input, "reduced" if some else "complete"))


def svd(input, some=True, compute_uv=True):  # noqa: A002 - PyTorch's name
    """``torch.svd``: (U, S, V) with A = U diag(S) V^T (V, not linalg.svd's Vh); ``some``: the reduced
    factorization. Without ``compute_uv``, U and V are zeros of the full shapes and S alone is computed. Under
    autocast on cpu in float32, as linalg.svd."""
    (input,) = autocast_float32(input, devices=("cpu",))
    if not compute_uv:
        check_matrix("svd", input, square=False)
        m, n = input.shape[-2:]
        zeros = input._xp.zeros
        return SVDResult(Tensor._from_array(zeros(input.shape[:-2] + (m, m), input.dtype)), linalg.svdvals(input),
                         Tensor._from_array(zeros(input.shape[:-2] + (n, n), input.dtype)))
    U, S, Vh = linalg.svd(input, full_matrices=not some)
    return SVDResult(U, S, Vh.mT)


def _warn_deprecated(message):
    """A deprecation UserWarning attributed to the first caller outside minifused (a top-level function may be
    reached through a wrapper, a Tensor method is not)."""
    root, frame, level = os.path.dirname(os.path.dirname(__file__)) + os.sep, sys._getframe(0), 1
    while frame is not None and frame.f_code.co_filename.startswith(root):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, UserWarning, stacklevel=level)


def _warn_lu():
    _warn_deprecated("torch.lu is deprecated in favor of torch.linalg.lu_factor / torch.linalg.lu_factor_ex and will "
                     "be removed in a future PyTorch release.\nLU, pivots = torch.lu(A, compute_pivots)\nshould be "
                     "replaced with\nLU, pivots = torch.linalg.lu_factor(A, compute_pivots)\nand\nLU, pivots, info = "
                     "torch.lu(A, compute_pivots, get_infos=True)\nshould be replaced with\nLU, pivots, info = "
                     "torch.linalg.lu_factor_ex(A, compute_pivots)")


def lu(A, pivot=True, get_infos=False):
    """``torch.lu`` (deprecated for :func:`minifused.linalg.lu_factor` / ``lu_factor_ex``, with PyTorch's warning):
    (LU, pivots), or with ``get_infos`` the named (LU, pivots, info); a singular A is not refused either way, as
    PyTorch's. Under autocast on cpu in float32 (PyTorch's cpu float32 list)."""
    _warn_lu()
    (A,) = autocast_float32(A, devices=("cpu",))
    LU, pivots, info = linalg.lu_factor_ex(A, pivot=pivot)
    return LUWithInfoResult(LU, pivots, info) if get_infos else (LU, pivots)


def _tensor_lu(self, pivot=True, get_infos=False):
    """``Tensor.lu``: :func:`lu` as plain tuples, as PyTorch's method gives."""
    _warn_lu()
    (self,) = autocast_float32(self, devices=("cpu",))
    LU, pivots, info = linalg.lu_factor_ex(self, pivot=pivot)
    return (LU, pivots, info) if get_infos else (LU, pivots)


def lu_solve(input, LU_data, LU_pivots):  # noqa: A002,N803 - PyTorch's names
    """``torch.lu_solve`` (deprecated for :func:`minifused.linalg.lu_solve`, which takes its arguments in the other
    order; with PyTorch's warning): X with A X = ``input`` for A's (LU, pivots). Under autocast on cpu in float32
    (PyTorch's cpu float32 list)."""
    _warn_deprecated("torch.lu_solve is deprecated in favor of torch.linalg.lu_solveand will be removed in a future "
                     "PyTorch release.\nNote that torch.linalg.lu_solve has its arguments reversed.\nX = "
                     "torch.lu_solve(B, LU, pivots)\nshould be replaced with\nX = torch.linalg.lu_solve(LU, pivots, B)")
    input, LU_data = autocast_float32(input, LU_data, devices=("cpu",))
    return linalg.lu_solve(LU_data, LU_pivots, input)


def orgqr(input, input2):  # noqa: A002 - PyTorch's names
    """``torch.orgqr``: :func:`minifused.linalg.householder_product` (``input2`` is tau)."""
    return linalg.householder_product(input, input2)


__all__ = ["det", "logdet", "slogdet", "inverse", "pinverse", "matrix_power", "matrix_exp", "cholesky",
           "cholesky_solve", "cholesky_inverse", "qr", "svd", "chain_matmul", "lu", "lu_solve", "lu_unpack", "orgqr"]
# Tensor methods: PyTorch has no Tensor.chain_matmul or Tensor.lu_unpack; Tensor.lu gives plain tuples
METHODS = {name: globals()[name] for name in __all__ if name not in ("chain_matmul", "lu_unpack")}
METHODS["lu"] = _tensor_lu
