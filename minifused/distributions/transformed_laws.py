"""The laws PyTorch builds by pushing a simpler one through transforms, as it builds them (so log_prob, cdf and
the draws are the transformed base's): ``HalfNormal`` and ``HalfCauchy`` (|X|), ``Pareto`` (scale e^E for E
exponential), ``Weibull`` (scale E^(1/k)), ``Kumaraswamy`` ((1 - U^(1/b))^(1/a) for U uniform) and
``InverseGamma`` (1 / G). Moments and entropies are closed forms in tensor ops, differentiable in the
parameters."""
from __future__ import annotations

import math

from .. import ops
from . import constraints
from .continuous import Cauchy, Exponential, Gamma, Normal, Uniform
from .transformed import TransformedDistribution
from .transforms import AbsTransform, AffineTransform, ExpTransform, PowerTransform
from .utils import broadcast_all, euler_constant

__all__ = ["HalfNormal", "HalfCauchy", "Pareto", "Weibull", "Kumaraswamy", "InverseGamma"]


class _Half(TransformedDistribution):
    """|X| for X centered at 0 of scale ``scale`` (the base law): twice the base density on [0, inf)."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args=None):
        super().__init__(self._base(0, scale, validate_args=False), AbsTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        law = next(c for c in type(self).__mro__ if _Half in c.__bases__)  # HalfNormal or HalfCauchy
        return super().expand(batch_shape, _instance=self._get_checked_instance(law, _instance))

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mode(self):
        return ops.zeros_like(self.scale)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return ops.where(value >= 0, log_prob, -math.inf)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)


class HalfNormal(_Half):
    """|X| for X ~ Normal(0, ``scale``)."""

    _base = Normal

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def variance(self):
        return self.scale.pow(2) * (1 - 2 / math.pi)


class HalfCauchy(_Half):
    """|X| for X ~ Cauchy(0, ``scale``): infinite mean and variance."""

    _base = Cauchy

    @property
    def mean(self):
        return ops.full(self._extended_shape(), math.inf, dtype=self.scale.dtype, device=self.scale.device)

    @property
    def variance(self):
        return self.base_dist.variance

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = ops.as_tensor(value, dtype=self.scale.dtype, device=self.scale.device)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return ops.where(value >= 0, log_prob, -math.inf)


class Pareto(TransformedDistribution):
    """The Pareto (type I) distribution of ``scale`` (the minimum) and shape ``alpha``: scale * e^E for E
    exponential of rate alpha."""

    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}

    def __init__(self, scale, alpha, validate_args=None):
        self.scale, self.alpha = broadcast_all(scale, alpha)
        super().__init__(Exponential(self.alpha, validate_args=validate_args),
                         [ExpTransform(), AffineTransform(loc=0, scale=self.scale)], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Pareto, _instance)
        new.scale, new.alpha = self.scale.expand(tuple(batch_shape)), self.alpha.expand(tuple(batch_shape))
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        a = self.alpha.clamp(min=1)  # infinite for alpha <= 1
        return a * self.scale / (a - 1)

    @property
    def mode(self):
        return self.scale

    @property
    def variance(self):
        a = self.alpha.clamp(min=2)  # infinite for alpha <= 2
        return self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2))

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.greater_than_eq(self.scale)

    def entropy(self):
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())


class Weibull(TransformedDistribution):
    """The two-parameter Weibull distribution of ``scale`` (lambda) and ``concentration`` (k): scale * E^(1/k)
    for E a unit exponential."""

    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive

    def __init__(self, scale, concentration, validate_args=None):
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        super().__init__(Exponential(ops.ones_like(self.scale), validate_args=validate_args), self._transforms(),
                         validate_args=validate_args)

    def _transforms(self):
        return [PowerTransform(exponent=self.concentration_reciprocal), AffineTransform(loc=0, scale=self.scale)]

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Weibull, _instance)
        batch_shape = tuple(batch_shape)
        new.scale, new.concentration = self.scale.expand(batch_shape), self.concentration.expand(batch_shape)
        new.concentration_reciprocal = new.concentration.reciprocal()
        TransformedDistribution.__init__(new, self.base_dist.expand(batch_shape), new._transforms(),
                                         validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.scale * ops.exp(ops.lgamma(1 + self.concentration_reciprocal))

    @property
    def mode(self):
        k = self.concentration
        return self.scale * ((k - 1) / k) ** k.reciprocal()  # NaN for k < 1, as PyTorch's

    @property
    def variance(self):
        k_inv = self.concentration_reciprocal
        return self.scale.pow(2) * (ops.exp(ops.lgamma(1 + 2 * k_inv)) - ops.exp(2 * ops.lgamma(1 + k_inv)))

    def entropy(self):
        k_inv = self.concentration_reciprocal
        return euler_constant * (1 - k_inv) + ops.log(self.scale * k_inv) + 1


def _kumaraswamy_moment(a, b, n):
    """E[X^n] = b B(1 + n / a, b), by lgamma."""
    arg1 = 1 + n / a
    return b * ops.exp(ops.lgamma(arg1) + ops.lgamma(b) - ops.lgamma(arg1 + b))


class Kumaraswamy(TransformedDistribution):
    """The Kumaraswamy distribution on [0, 1] of concentrations ``concentration1`` (a) and ``concentration0`` (b):
    density a b x^(a-1) (1 - x^a)^(b-1); a draw is (1 - U^(1/b))^(1/a) for U uniform."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base = Uniform(ops.full_like(self.concentration0, 0), ops.full_like(self.concentration0, 1),
                       validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration0.reciprocal()), AffineTransform(loc=1.0, scale=-1.0),
                      PowerTransform(exponent=self.concentration1.reciprocal())]
        super().__init__(base, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(tuple(batch_shape))
        new.concentration0 = self.concentration0.expand(tuple(batch_shape))
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return _kumaraswamy_moment(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        # PyTorch's expression, kept as it is: log1p(-b) is NaN for b > 1 and the rest is masked, so the mode is
        # NaN for every concentration (the true mode is ((a - 1) / (a b - 1))^(1/a) for a, b >= 1)
        a, b = self.concentration1, self.concentration0
        log_mode = b.reciprocal() * (-b).log1p() - (-b * a).log1p()
        return ops.where((b < 1) | (a < 1), math.nan, log_mode).exp()

    @property
    def variance(self):
        return _kumaraswamy_moment(self.concentration1, self.concentration0, 2) - self.mean.pow(2)

    def entropy(self):
        t1, t0 = 1 - self.concentration1.reciprocal(), 1 - self.concentration0.reciprocal()
        h0 = ops.digamma(self.concentration0 + 1) + euler_constant
        return t0 + t1 * h0 - ops.log(self.concentration1) - ops.log(self.concentration0)


class InverseGamma(TransformedDistribution):
    """1 / G for G ~ Gamma(``concentration``, ``rate``): density rate^a / Gamma(a) x^(-a-1) e^(-rate / x)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        base = Gamma(concentration, rate, validate_args=validate_args)
        super().__init__(base, PowerTransform(-base.rate.new_ones(())), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(InverseGamma, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def concentration(self):
        return self.base_dist.concentration

    @property
    def rate(self):
        return self.base_dist.rate

    @property
    def mean(self):
        return ops.where(self.concentration > 1, self.rate / (self.concentration - 1), math.inf)

    @property
    def mode(self):
        return self.rate / (self.concentration + 1)

    @property
    def variance(self):
        a = self.concentration
        return ops.where(a > 2, self.rate.square() / ((a - 1).square() * (a - 2)), math.inf)

    def entropy(self):
        a = self.concentration
        return a + self.rate.log() + ops.lgamma(a) - (1 + a) * ops.digamma(a)
