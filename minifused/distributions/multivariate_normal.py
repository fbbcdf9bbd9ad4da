"""``MultivariateNormal``: the Gaussian over vectors, given its covariance, precision or lower Cholesky factor of
the covariance (``scale_tril``). Everything runs on the Cholesky factor L: a draw is loc + L eps, log_prob solves
L z = x - loc (the Mahalanobis term |z|^2) and reads log det from L's diagonal; ``minifused.linalg``'s
factorization and triangular solve are differentiable, so gradients reach every parameter."""
from __future__ import annotations

import math

import numpy as np

from .. import ops
from . import constraints
from .distribution import Distribution
from .utils import _standard_normal, lazy_property

__all__ = ["MultivariateNormal"]


def _batch_mv(bmat, bvec):
    return ops.matmul(bmat, bvec.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(L, x):
    """|L^-1 x|^2 over the last dim of ``x`` (..., n), L (b..., n, n) with x's trailing batch dims broadcastable
    to b...: the leading (sample) dims of x become right-hand-side columns, so each distinct L is solved once."""
    n = x.shape[-1]
    k = x.ndim - 1 - (L.ndim - 2)  # x's dims beyond L's batch: the sample dims
    outer, batch = tuple(x.shape[:k]), np.broadcast_shapes(tuple(L.shape[:-2]), tuple(x.shape[k:-1]))
    L = L.expand(batch + (n, n))
    x = x.expand(outer + batch + (n,))
    nb = len(batch)
    cols = x.permute(tuple(range(k, k + nb)) + (k + nb,) + tuple(range(k))).reshape(batch + (n, -1))
    m = ops.linalg.solve_triangular(L, cols, upper=False).pow(2).sum(-2).reshape(batch + outer)
    return m.permute(tuple(range(nb, nb + k)) + tuple(range(nb)))


def _precision_to_scale_tril(P):
    """The lower Cholesky factor of P^-1, through the Cholesky factor of P with rows and columns reversed (whose
    flipped transpose is L^-1 for the wanted L)."""
    Lf = ops.linalg.cholesky(ops.flip(P, (-2, -1)))
    L_inv = ops.flip(Lf, (-2, -1)).transpose(-2, -1)
    return ops.linalg.solve_triangular(L_inv, ops.eye(P.shape[-1], dtype=P.dtype, device=P.device), upper=False)


def _half_log_det(L):
    return L.diagonal(dim1=-2, dim2=-1).log().sum(-1)


class MultivariateNormal(Distribution):
    """The normal distribution over vectors of mean ``loc`` (..., n) and covariance given by exactly one of
    ``covariance_matrix``, ``precision_matrix`` or ``scale_tril`` (..., n, n); batch dims broadcast."""

    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = [(n, m) for n, m in (("scale_tril", scale_tril), ("covariance_matrix", covariance_matrix),
                                     ("precision_matrix", precision_matrix)) if m is not None]
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        name, matrix = given[0]
        if matrix.ndim < 2:
            what = "scale_tril matrix" if name == "scale_tril" else name
            raise ValueError(f"{what} must be at least two-dimensional, with optional leading batch dimensions")
        batch_shape = np.broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1]))
        setattr(self, name, matrix.expand(batch_shape + (-1, -1)))
        self.loc = loc.expand(batch_shape + (-1,))
        super().__init__(batch_shape, tuple(self.loc.shape[-1:]), validate_args=validate_args)
        if name == "scale_tril":
            self._unbroadcasted_scale_tril = matrix
        elif name == "covariance_matrix":
            self._unbroadcasted_scale_tril = ops.linalg.cholesky(matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = tuple(batch_shape)
        cov_shape = batch_shape + self._event_shape + self._event_shape
        new.loc = self.loc.expand(batch_shape + self._event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(cov_shape))
        return self._expanded_from(new, batch_shape)

    def _matrix_shape(self):
        return self._batch_shape + self._event_shape + self._event_shape

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return ops.matmul(L, L.transpose(-2, -1)).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        return ops.cholesky_inverse(self._unbroadcasted_scale_tril).expand(self._matrix_shape())

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(self._batch_shape + self._event_shape)

    def rsample(self, sample_shape=()):
        eps = _standard_normal(self._extended_shape(sample_shape), self.loc)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        m = _batch_mahalanobis(self._unbroadcasted_scale_tril, value - self.loc)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + m) - _half_log_det(self._unbroadcasted_scale_tril)

    def entropy(self):
        h = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + _half_log_det(self._unbroadcasted_scale_tril)
        return h if len(self._batch_shape) == 0 else h.expand(self._batch_shape)
