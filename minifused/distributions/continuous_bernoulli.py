"""``ContinuousBernoulli``: the law on [0, 1] of density C(p) p^x (1 - p)^(1 - x) (Loaiza-Ganem and Cunningham,
2019), the normalized Bernoulli likelihood that VAEs on [0, 1] data use. Near p = 1/2 its normalizer, mean and
variance are 0 / 0 forms: within ``lims`` they are Taylor expansions around 1/2, as PyTorch's. Draws invert the
cdf at a uniform draw, so ``rsample`` is differentiable in the parameter."""
from __future__ import annotations

import math

from .. import functional as F
from .. import ops
from ..autograd import no_grad
from . import constraints
from .distribution import Distribution
from .utils import _is_number, _uniform, broadcast_all, clamp_probs, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["ContinuousBernoulli"]


class ContinuousBernoulli(Distribution):
    """The continuous Bernoulli of ``probs`` in (0, 1) (clamped to [eps, 1 - eps]) or real ``logits`` (their
    sigmoid), not both; ``probs`` is no probability here, nor ``logits`` log-odds, despite the names."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        given = probs if probs is not None else logits
        (param,) = broadcast_all(given)
        if probs is not None:
            # PyTorch checks the probabilities before clamping only when validate_args is given (True or False)
            if validate_args is not None and not bool(self.arg_constraints["probs"].check(param).all()):
                raise ValueError("The parameter probs has invalid values")
            self.probs = param = clamp_probs(param)
        else:
            self.logits = param
        self._param = param
        self._lims = lims
        super().__init__(() if _is_number(given) else tuple(param.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ContinuousBernoulli, _instance)
        new._lims = self._lims
        batch_shape = tuple(batch_shape)
        for name in ("probs", "logits"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(batch_shape))
                new._param = getattr(new, name)
        return self._expanded_from(new, batch_shape)

    def _outside_unstable_region(self):
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        """The probabilities, those within ``lims`` replaced by lims[0] (so the exact forms stay finite there)."""
        return ops.where(self._outside_unstable_region(), self.probs, self._lims[0] * ops.ones_like(self.probs))

    def _cont_bern_log_norm(self):
        """log C(p): log |log(1 - p) - log p| - log |1 - 2p|, its Taylor expansion near 1/2."""
        cut_probs = self._cut_probs()
        below_half = ops.where(cut_probs <= 0.5, cut_probs, ops.zeros_like(cut_probs))
        above_half = ops.where(cut_probs >= 0.5, cut_probs, ops.ones_like(cut_probs))
        log_norm = ops.log(ops.abs(ops.log1p(-cut_probs) - ops.log(cut_probs))) - ops.where(
            cut_probs <= 0.5, ops.log1p(-2.0 * below_half), ops.log(2.0 * above_half - 1.0))
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return ops.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        cut_probs = self._cut_probs()
        mus = cut_probs / (2.0 * cut_probs - 1.0) + 1.0 / (ops.log1p(-cut_probs) - ops.log(cut_probs))
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return ops.where(self._outside_unstable_region(), mus, taylor)

    @property
    def stddev(self):
        return self.variance.sqrt()

    @property
    def variance(self):
        cut_probs = self._cut_probs()
        exact = cut_probs * (cut_probs - 1.0) / (1.0 - 2.0 * cut_probs).pow(2) + 1.0 / (
            ops.log1p(-cut_probs) - ops.log(cut_probs)).pow(2)
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return ops.where(self._outside_unstable_region(), exact, taylor)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    @property
    def param_shape(self):
        return tuple(self._param.shape)

    def sample(self, sample_shape=()):
        u = _uniform(self._extended_shape(sample_shape), self.probs)
        with no_grad():
            return self.icdf(u)

    def rsample(self, sample_shape=()):
        u = _uniform(self._extended_shape(sample_shape), self.probs)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none") + self._cont_bern_log_norm()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        cut_probs = self._cut_probs()
        cdfs = (cut_probs.pow(value) * (1.0 - cut_probs).pow(1.0 - value) + cut_probs - 1.0) / (2.0 * cut_probs - 1.0)
        unbounded_cdfs = ops.where(self._outside_unstable_region(), cdfs, value)
        return ops.where(value <= 0.0, ops.zeros_like(value),
                         ops.where(value >= 1.0, ops.ones_like(value), unbounded_cdfs))

    def icdf(self, value):
        cut_probs = self._cut_probs()
        exact = (ops.log1p(-cut_probs + value * (2.0 * cut_probs - 1.0)) - ops.log1p(-cut_probs)) / (
            ops.log(cut_probs) - ops.log1p(-cut_probs))
        return ops.where(self._outside_unstable_region(), exact, value)

    def entropy(self):
        log_probs0, log_probs1 = ops.log1p(-self.probs), ops.log(self.probs)
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        """The log normalizer as a function of the natural parameter (the logits), Taylor near 0."""
        out_unst_reg = (x <= self._lims[0] - 0.5) | (x > self._lims[1] - 0.5)
        cut_nat_params = ops.where(out_unst_reg, x, (self._lims[0] - 0.5) * ops.ones_like(x))
        log_norm = ops.log(ops.abs(ops.expm1(cut_nat_params))) - ops.log(ops.abs(cut_nat_params))
        taylor = 0.5 * x + x.pow(2) / 24.0 - x.pow(4) / 2880.0
        return ops.where(out_unst_reg, log_norm, taylor)
