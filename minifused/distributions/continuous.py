"""The continuous distributions with closed forms: ``Normal``, ``Uniform``, ``Exponential``, ``Laplace``,
``Cauchy``, ``Beta``, ``Gamma``, ``Chi2``, ``StudentT`` and ``Dirichlet`` (on the simplex: event shape (K,)). Each
draws through minifused's generator (``rand`` / ``randn`` / the gamma sampler, so ``manual_seed`` repeats a draw)
and reparameterizes the draw (``rsample`` is differentiable in the parameters); log_prob, cdf, icdf and entropy are
compositions of tensor ops, so their gradients are the ops'."""
from __future__ import annotations

import math

from .. import ops
from . import constraints
from ._gamma import standard_gamma
from .distribution import Distribution, _nan_full
from .utils import _is_number, _standard_normal, _tiny_eps, _uniform, broadcast_all

__all__ = ["Normal", "Uniform", "Exponential", "Laplace", "Cauchy", "Beta", "Gamma", "Chi2", "StudentT", "Dirichlet"]

_LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))


def _clamp_unrecorded(draw, low, high=None):
    """``draw`` clamped in place outside the autograd graph, as PyTorch clamps its gamma / Dirichlet draws: the
    value stays off the boundary (log_prob finite) while its gradient is the unclamped map's, never zeroed."""
    draw.detach().clamp_(min=low, max=high)
    return draw


class _LocScale(Distribution):
    """A location-scale law: ``loc`` and ``scale`` broadcast together; batch shape () when both are numbers."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        batch_shape = () if _is_number(loc) and _is_number(scale) else tuple(self.loc.shape)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        law = next(c for c in type(self).__mro__ if _LocScale in c.__bases__)  # Normal, Laplace or Cauchy
        new = self._get_checked_instance(law, _instance)
        batch_shape = tuple(batch_shape)
        new.loc, new.scale = self.loc.expand(batch_shape), self.scale.expand(batch_shape)
        return self._expanded_from(new, batch_shape)

    @property
    def mode(self):
        return self.loc

    def rsample(self, sample_shape=()):
        return self.loc + self._standard(self._extended_shape(sample_shape)) * self.scale

    def _checked(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return value


class Normal(_LocScale):
    """The normal (Gaussian) distribution of mean ``loc`` and standard deviation ``scale``."""

    @property
    def mean(self):
        return self.loc

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.scale.pow(2)

    def _standard(self, shape):
        return _standard_normal(shape, self.loc)

    def log_prob(self, value):
        value = self._checked(value)
        return -((value - self.loc) ** 2) / (2 * self.scale ** 2) - ops.log(self.scale) - _LOG_SQRT_2PI

    def cdf(self, value):
        value = self._checked(value)
        return 0.5 * (1 + ops.erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def icdf(self, value):
        return self.loc + self.scale * ops.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + ops.log(self.scale)


class Laplace(_LocScale):
    """The Laplace (double exponential) distribution of location ``loc`` and scale ``scale``."""

    @property
    def mean(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return (2 ** 0.5) * self.scale

    def _standard(self, shape):
        u = _uniform(shape, self.loc, _tiny_eps(self.loc.dtype)[1] - 1, 1.0)  # (-1, 1): log1p(-|u|) finite
        return -u.sign() * ops.log1p(-u.abs())

    def log_prob(self, value):
        value = self._checked(value)
        return -ops.log(2 * self.scale) - ops.abs(value - self.loc) / self.scale

    def cdf(self, value):
        value = self._checked(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * ops.expm1(-(value - self.loc).abs() / self.scale)

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * ops.log1p(-2 * term.abs())

    def entropy(self):
        return 1 + ops.log(2 * self.scale)


class Cauchy(_LocScale):
    """The Cauchy (Lorentz) distribution of location ``loc`` and half width ``scale``: no mean (NaN), infinite
    variance."""

    @property
    def mean(self):
        return _nan_full(self, self.loc)

    @property
    def variance(self):
        return _nan_full(self, self.loc, math.inf)

    def _standard(self, shape):
        return ops.tan(math.pi * (_uniform(shape, self.loc) - 0.5))

    def log_prob(self, value):
        value = self._checked(value)
        return -math.log(math.pi) - self.scale.log() - (((value - self.loc) / self.scale) ** 2).log1p()

    def cdf(self, value):
        value = self._checked(value)
        return ops.atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return ops.tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()


class Uniform(Distribution):
    """The uniform distribution on the half-open interval [low, high)."""

    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        batch_shape = () if _is_number(low) and _is_number(high) else tuple(self.low.shape)
        super().__init__(batch_shape, validate_args=validate_args)

    @property
    def arg_constraints(self):
        return {"low": constraints.less_than(self.high), "high": constraints.greater_than(self.low)}

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.interval(self.low, self.high)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Uniform, _instance)
        batch_shape = tuple(batch_shape)
        new.low, new.high = self.low.expand(batch_shape), self.high.expand(batch_shape)
        return self._expanded_from(new, batch_shape)

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return math.nan * self.high

    @property
    def stddev(self):
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape=()):
        return self.low + _uniform(self._extended_shape(sample_shape), self.low) * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        inside = self.low.le(value).type_as(self.low) * self.high.gt(value).type_as(self.low)
        return ops.log(inside) - ops.log(self.high - self.low)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return ops.log(self.high - self.low)


class Exponential(Distribution):
    """The exponential distribution of rate ``rate`` (mean 1 / rate)."""

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(() if _is_number(rate) else tuple(self.rate.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Exponential, _instance)
        new.rate = self.rate.expand(tuple(batch_shape))
        return self._expanded_from(new, tuple(batch_shape))

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return ops.zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def rsample(self, sample_shape=()):
        return -ops.log1p(-_uniform(self._extended_shape(sample_shape), self.rate)) / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - ops.exp(-self.rate * value)

    def icdf(self, value):
        return -ops.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - ops.log(self.rate)


class Beta(Distribution):
    """The beta distribution on [0, 1] of concentrations ``concentration1`` (alpha, the weight of 1) and
    ``concentration0`` (beta). A draw is G1 / (G1 + G0) for Gamma draws G, reparameterized through the gamma
    sampler's implicit gradient."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        super().__init__(tuple(self.concentration1.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Beta, _instance)
        batch_shape = tuple(batch_shape)
        new.concentration1 = self.concentration1.expand(batch_shape)
        new.concentration0 = self.concentration0.expand(batch_shape)
        return self._expanded_from(new, batch_shape)

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        m1, m0 = (self.concentration1 - 1).clamp(min=0.0), (self.concentration0 - 1).clamp(min=0.0)
        mode = m1 / (m1 + m0)
        both_below_one = (self.concentration1 < 1) & (self.concentration0 < 1)  # PyTorch: the first vertex
        return ops.where(both_below_one, ops.ones_like(mode), mode)

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        g1 = standard_gamma(self.concentration1.expand(shape))
        g0 = standard_gamma(self.concentration0.expand(shape))
        tiny, eps = _tiny_eps(g1.dtype)
        return (g1 / (g1 + g0)).clamp(min=tiny, max=1 - eps)  # never exactly 0 or 1, as PyTorch's draws

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration1, self.concentration0
        return ops.xlogy(a - 1, value) + ops.xlogy(b - 1, 1 - value) + ops.lgamma(a + b) - ops.lgamma(a) - ops.lgamma(b)

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        total = a + b
        return (ops.lgamma(a) + ops.lgamma(b) - ops.lgamma(total) - (2 - total) * ops.digamma(total)
                - (a - 1) * ops.digamma(a) - (b - 1) * ops.digamma(b))


class Gamma(Distribution):
    """The gamma distribution of shape ``concentration`` (alpha) and ``rate`` (beta = 1 / scale). A draw is a
    Gamma(alpha, 1) draw divided by the rate, reparameterized through the gamma sampler's implicit gradient."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(tuple(self.concentration.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Gamma, _instance)
        batch_shape = tuple(batch_shape)
        new.concentration, new.rate = self.concentration.expand(batch_shape), self.rate.expand(batch_shape)
        return self._expanded_from(new, batch_shape)

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        value = standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        return _clamp_unrecorded(value, _tiny_eps(value.dtype)[0])  # a large rate may underflow the draw to 0

    def log_prob(self, value):
        value = ops.as_tensor(value, dtype=self.rate.dtype, device=self.rate.device)  # numbers too, as PyTorch's
        if self._validate_args:
            self._validate_sample(value)
        a, rate = self.concentration, self.rate
        return ops.xlogy(a, rate) + ops.xlogy(a - 1, value) - rate * value - ops.lgamma(a)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ops.igamma(self.concentration, self.rate * value)  # differentiable in value and rate only

    def entropy(self):
        a = self.concentration
        return a - ops.log(self.rate) + ops.lgamma(a) + (1.0 - a) * ops.digamma(a)


class Dirichlet(Distribution):
    """The Dirichlet distribution on the probability simplex of ``concentration``'s last dimension (K, the event
    shape; the dimensions before it are the batch). A draw is K Gamma(alpha_k, 1) draws normalized to sum 1,
    reparameterized through the gamma sampler's implicit gradient."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        shape = tuple(concentration.shape)
        super().__init__(shape[:-1], shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Dirichlet, _instance)
        batch_shape = tuple(batch_shape)
        new.concentration = self.concentration.expand(batch_shape + self._event_shape)
        return self._expanded_from(new, batch_shape)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self):
        excess = (self.concentration - 1).clamp(min=0.0)
        mode = excess / excess.sum(-1, True)
        # all concentrations below 1: the density peaks at every vertex; PyTorch picks the first one
        all_below_one = (self.concentration < 1).all(-1, keepdim=True)
        first_vertex = (ops.arange(mode.shape[-1], device=mode.device) == 0).type_as(mode)
        return ops.where(all_below_one, first_vertex, mode)

    @property
    def variance(self):
        total = self.concentration.sum(-1, True)
        return self.concentration * (total - self.concentration) / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=()):
        gammas = standard_gamma(self.concentration.expand(self._extended_shape(sample_shape)))
        tiny, eps = _tiny_eps(gammas.dtype)
        # PyTorch's bounds: the smallest normal number and the largest float below 1 (1 - eps / 2)
        return _clamp_unrecorded(gammas / gammas.sum(-1, True), tiny, 1 - eps / 2)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        a = self.concentration
        return ops.xlogy(a - 1.0, value).sum(-1) + ops.lgamma(a.sum(-1)) - ops.lgamma(a).sum(-1)

    def entropy(self):
        a = self.concentration
        k, total = a.shape[-1], a.sum(-1)
        return (ops.lgamma(a).sum(-1) - ops.lgamma(total) - (k - total) * ops.digamma(total)
                - ((a - 1.0) * ops.digamma(a)).sum(-1))


class Chi2(Gamma):
    """The chi-squared distribution of ``df`` degrees of freedom: Gamma(df / 2, 1 / 2)."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Chi2, _instance)
        return super().expand(batch_shape, new)

    @property
    def df(self):
        return self.concentration * 2


class StudentT(Distribution):
    """Student's t-distribution of ``df`` degrees of freedom, location ``loc`` and scale ``scale``. A draw is
    loc + scale X / sqrt(Z / df) for X standard normal and Z ~ Chi2(df), reparameterized through both."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(tuple(self.df.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(StudentT, _instance)
        batch_shape = tuple(batch_shape)
        new.df, new.loc, new.scale = (self.df.expand(batch_shape), self.loc.expand(batch_shape),
                                      self.scale.expand(batch_shape))
        new._chi2 = self._chi2.expand(batch_shape)
        return self._expanded_from(new, batch_shape)

    @property
    def mean(self):
        return ops.where(self.df <= 1, math.nan, self.loc)  # undefined for df <= 1

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        df = self.df
        above_two = df > 2
        safe_df = ops.where(above_two, df, 3.0)  # the formula only where it holds: finite gradients elsewhere
        finite = self.scale.pow(2) * safe_df / (safe_df - 2)
        return ops.where(above_two, finite, ops.where(df > 1, math.inf, math.nan))  # infinite, then undefined

    def rsample(self, sample_shape=()):
        x = _standard_normal(self._extended_shape(sample_shape), self.df)
        z = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * (x * ops.rsqrt(z / self.df))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi) + ops.lgamma(0.5 * self.df)
             - ops.lgamma(0.5 * (self.df + 1.0)))
        return -0.5 * (self.df + 1.0) * ops.log1p(y ** 2.0 / self.df) - z

    def entropy(self):
        df = self.df
        lbeta = ops.lgamma(0.5 * df) + math.lgamma(0.5) - ops.lgamma(0.5 * (df + 1))
        return (self.scale.log() + 0.5 * (df + 1) * (ops.digamma(0.5 * (df + 1)) - ops.digamma(0.5 * df))
                + 0.5 * df.log() + lbeta)
