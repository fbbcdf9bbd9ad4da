"""PyTorch's randomized low-rank decompositions, ``torch.svd_lowrank`` and ``torch.pca_lowrank`` (Halko, Martinsson
and Tropp 2009, Algorithms 4.4 and 5.1), as PyTorch writes them over differentiable ops: a Gaussian test matrix from
the default generator, ``niter`` subspace iterations orthonormalised by QR, then the SVD of the small projected
matrix. A wide matrix is decomposed through its transpose."""
from __future__ import annotations

import numbers

from .. import backend
from ..tensor import Tensor
from . import linalg
from .creation import randn
from ..backend import InputError, InputTypeError

__all__ = ["svd_lowrank", "pca_lowrank"]
METHODS = {}


def _approximate_basis(A, q, niter, M):
    """Q with q orthonormal columns such that Q Q^H (A - M) approximates A - M."""
    R = randn(A.shape[-1], q, dtype=A.dtype, device=A.device)

    def times(Y, adjoint=False):
        X = (A.mH if adjoint else A) @ Y
        return X if M is None else X - (M.mH if adjoint else M) @ Y

    Q = linalg.qr(times(R)).Q
    for _ in range(niter):
        Q = linalg.qr(times(Q, adjoint=True)).Q
        Q = linalg.qr(times(Q)).Q
    return Q


def _check(op, A, q, niter):
    if not isinstance(A, Tensor):
        raise InputTypeError(f"{op}(): argument 'A' must be a Tensor, not {type(A).__name__}")
    if A.ndim < 2:
        raise InputError(f"{op}: expected a matrix or a batch of matrices, got a tensor of shape {tuple(A.shape)}")
    if not backend.is_floating(A.dtype):
        raise InputTypeError(f"{op}: expected a floating-point input, got dtype {A.dtype}")
    for name, v in (("q", q), ("niter", niter)):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool):
            raise InputTypeError(f"{op}(): argument '{name}' must be an int, got {type(v).__name__}")


def _svd_lowrank(A, q, niter, M):
    m, n = A.shape[-2:]
    if M is not None:
        M = M.broadcast_to(A.shape)
    if m < n:  # the algorithm assumes a tall matrix
        A, M = A.mH, (None if M is None else M.mH)
    Q = _approximate_basis(A, q, niter, M)
    B = Q.mH @ A
    if M is not None:
        B = B - Q.mH @ M
    U, S, Vh = linalg.svd(B, full_matrices=False)
    U, V = Q @ U, Vh.mH
    return (V, S, U) if m < n else (U, S, V)


def svd_lowrank(A, q=6, niter=2, M=None):  # noqa: N803 - PyTorch's names
    """U (..., m, q), S (..., q), V (..., n, q) with A - M ~ U diag(S) V^H, for a matrix of rank about q (``M``: an
    optional mean broadcast to A's shape). Randomized: repeatable under ``manual_seed``."""
    q = 6 if q is None else q
    niter = 2 if niter is None else niter
    _check("svd_lowrank", A, q, niter)
    if M is not None and not isinstance(M, Tensor):
        raise InputTypeError(f"svd_lowrank(): argument 'M' must be a Tensor or None, not {type(M).__name__}")
    return _svd_lowrank(A, q, niter, M)


def pca_lowrank(A, q=None, center=True, niter=2):  # noqa: N803 - PyTorch's names
    """:func:`svd_lowrank` of A less its column means (``center``): U, S, V, with V's columns the principal
    directions; ``q`` defaults to min(6, m, n)."""
    _check("pca_lowrank", A, 0 if q is None else q, niter)
    m, n = A.shape[-2:]
    if q is None:
        q = min(6, m, n)
    elif not 0 <= q <= min(m, n):
        raise InputError(f"pca_lowrank: q(={q}) must be non-negative integer and not greater than min(m, n)="
                         f"{min(m, n)}")
    if niter < 0:
        raise InputError(f"pca_lowrank: niter(={niter}) must be non-negative integer")
    return _svd_lowrank(A - A.mean(dim=(-2,), keepdim=True) if center else A, q, niter, None)
