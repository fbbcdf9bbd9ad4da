"""The discrete distributions: ``Bernoulli``, ``Categorical``, ``OneHotCategorical``, ``Poisson``, ``Binomial``,
``Geometric``, ``Multinomial`` and ``NegativeBinomial``. Those given ``probs`` or ``logits`` keep the one given
and compute the other on first use (a ``lazy_property``, recorded for autograd), so log_prob and entropy are
differentiable in whichever parameter came. Draws come from minifused's generator (``bernoulli``,
``multinomial``, ``rand``, the gamma sampler, and the generator's own Poisson and binomial samplers), so
``manual_seed`` repeats them; they carry no gradient."""
from __future__ import annotations

import math

from .. import backend
from .. import functional as F
from .. import ops
from ..autograd import no_grad
from . import constraints
from .continuous import Gamma
from .distribution import Distribution, _nan_full
from .utils import (_draw, _finfo, _is_number, _tiny_eps, _uniform, broadcast_all, lazy_property, logits_to_probs,
                    probs_to_logits)

__all__ = ["Bernoulli", "Categorical", "OneHotCategorical", "Poisson", "Binomial", "Geometric", "Multinomial",
           "NegativeBinomial"]


def _one_of(probs, logits):
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")


class _Binary(Distribution):
    """A law of one success probability, given as ``probs`` or as ``logits`` (log-odds)."""

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return tuple(self._param.shape)

    def _expand_params(self, new, batch_shape):
        for name in ("probs", "logits"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(batch_shape))
                new._param = getattr(new, name)


class Bernoulli(_Binary):
    """1 with probability ``probs`` (or ``sigmoid(logits)``), else 0."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        given = probs if probs is not None else logits
        (param,) = broadcast_all(given)
        setattr(self, "probs" if probs is not None else "logits", param)
        self._param = param
        super().__init__(() if _is_number(given) else tuple(param.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Bernoulli, _instance)
        self._expand_params(new, tuple(batch_shape))
        return self._expanded_from(new, tuple(batch_shape))

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs)
        return ops.where(self.probs == 0.5, ops.full_like(mode, math.nan), mode)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        with no_grad():
            return ops.bernoulli(self.probs.expand(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self):
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand=True):
        values = ops.arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + self._batch_shape) if expand else values


class Categorical(Distribution):
    """One of ``K`` categories (0 .. K-1), with the probabilities ``probs`` (normalized over the last dim) or
    the unnormalized log-probabilities ``logits``; the last dim of the parameter indexes the categories."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        if probs is not None:
            if probs.ndim < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.ndim < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        super().__init__(tuple(self._param.shape[:-1]), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Categorical, _instance)
        batch_shape = tuple(batch_shape)
        for name in ("probs", "logits"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(batch_shape + (self._num_events,)))
                new._param = getattr(new, name)
        new._num_events = self._num_events
        return self._expanded_from(new, batch_shape)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def param_shape(self):
        return tuple(self._param.shape)

    @property
    def mean(self):
        return _nan_full(self, self.probs)

    @property
    def mode(self):
        return self.probs.argmax(dim=-1)

    @property
    def variance(self):
        return _nan_full(self, self.probs)

    def sample(self, sample_shape=()):
        sample_shape = tuple(sample_shape)
        n = math.prod(sample_shape)
        probs = self.probs.detach().reshape(-1, self._num_events)
        if n == 0 or probs.shape[0] == 0:
            return ops.zeros(self._extended_shape(sample_shape), dtype=backend.int64, device=probs.device)
        return ops.multinomial(probs, n, True).T.reshape(self._extended_shape(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, log_pmf = ops.broadcast_tensors(value.long().unsqueeze(-1), self.logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self):
        min_real = float(_finfo(self.logits.dtype).min)
        return -(self.logits.clamp(min=min_real) * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = ops.arange(self._num_events, dtype=backend.int64, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + self._batch_shape) if expand else values


class _OverCategorical(Distribution):
    """A law over the K classes of a :class:`Categorical` it keeps as ``_categorical``: its ``probs``,
    ``logits`` and ``param_shape`` are that Categorical's."""

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def param_shape(self):
        return self._categorical.param_shape


class OneHotCategorical(_OverCategorical):
    """A :class:`Categorical` whose draws are one-hot vectors of length K (event shape (K,))."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(OneHotCategorical, _instance)
        new._categorical = self._categorical.expand(batch_shape)
        return self._expanded_from(new, tuple(batch_shape))

    @property
    def _param(self):
        return self._categorical._param

    @property
    def mean(self):
        return self._categorical.probs

    @property
    def mode(self):
        probs = self._categorical.probs
        return F.one_hot(probs.argmax(dim=-1), num_classes=probs.shape[-1]).to(probs)

    @property
    def variance(self):
        return self._categorical.probs * (1 - self._categorical.probs)

    def sample(self, sample_shape=()):
        indices = self._categorical.sample(sample_shape)
        return F.one_hot(indices, self._categorical._num_events).to(self._categorical.probs.detach())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.max(-1)[1])

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        n = self._event_shape[0]
        values = ops.eye(n, dtype=self._param.dtype, device=self._param.device)
        values = values.view((n,) + (1,) * len(self._batch_shape) + (n,))
        return values.expand((n,) + self._batch_shape + (n,)) if expand else values


class Poisson(Distribution):
    """The Poisson distribution of rate (mean) ``rate``."""

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(() if _is_number(rate) else tuple(self.rate.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Poisson, _instance)
        new.rate = self.rate.expand(tuple(batch_shape))
        return self._expanded_from(new, tuple(batch_shape))

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=()):
        with no_grad():
            return _draw("poisson", self._extended_shape(sample_shape), self.rate, self.rate)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return ops.xlogy(value, rate) - rate - ops.lgamma(value + 1)


def _clamp_by_zero(x):
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(_Binary):
    """The number of successes in ``total_count`` independent trials of success probability ``probs`` (or
    ``sigmoid(logits)``)."""

    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval,
                       "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        total_count, param = broadcast_all(total_count, probs if probs is not None else logits)
        self.total_count = total_count.type_as(param)
        setattr(self, "probs" if probs is not None else "logits", param)
        self._param = param
        super().__init__(tuple(param.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Binomial, _instance)
        new.total_count = self.total_count.expand(tuple(batch_shape))
        self._expand_params(new, tuple(batch_shape))
        return self._expanded_from(new, tuple(batch_shape))

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        with no_grad():
            return _draw("binomial", self._extended_shape(sample_shape), self._param, self.total_count, self.probs)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n, logits = self.total_count, self.logits
        normalize = n * _clamp_by_zero(logits) + n * ops.log1p(ops.exp(-ops.abs(logits))) - ops.lgamma(n + 1)
        return value * logits - ops.lgamma(value + 1) - ops.lgamma(n - value + 1) - normalize

    def _homogeneous_count(self, what):
        count = int(self.total_count.max())
        if not int(self.total_count.min()) == count:
            raise NotImplementedError(f"Inhomogeneous total count not supported by `{what}`.")
        return count

    def entropy(self):
        self._homogeneous_count("entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(ops.exp(log_prob) * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        count = self._homogeneous_count("enumerate_support")
        values = ops.arange(1 + count, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + self._batch_shape) if expand else values


class Geometric(_Binary):
    """The number of failures before the first success in trials of success probability ``probs`` (or
    ``sigmoid(logits)``): support 0, 1, 2, ..."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        given = probs if probs is not None else logits
        (param,) = broadcast_all(given)
        setattr(self, "probs" if probs is not None else "logits", param)
        self._param = param
        super().__init__(() if _is_number(given) else tuple(param.shape), validate_args=validate_args)
        if self._validate_args and probs is not None and not bool((self.probs > 0).all()):
            raise ValueError(f"Expected parameter probs ({type(param).__name__} of shape {tuple(param.shape)}) of "
                             f"distribution {self!r} to be positive but found invalid values:\n"
                             f"{param.detach()[~(param.detach() > 0)]}")

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Geometric, _instance)
        self._expand_params(new, tuple(batch_shape))
        return self._expanded_from(new, tuple(batch_shape))

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return ops.zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=()):
        with no_grad():
            tiny = _tiny_eps(self.probs.dtype)[0]
            u = _uniform(self._extended_shape(sample_shape), self.probs).clamp(min=tiny)  # log(0) never drawn
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        certain_zero = (probs == 1) & (value == 0)  # 0 * log(0) is 0 there: the first trial succeeds surely
        probs = ops.where(certain_zero, ops.zeros_like(probs), probs)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none") / self.probs


class Multinomial(_OverCategorical):
    """The counts of ``total_count`` draws (an int, one for the whole batch) of a :class:`Categorical` of
    ``probs`` or ``logits`` (normalized over the last dim, the K categories: the event shape (K,)). log_prob
    takes the count from the value, so any ``total_count`` does for it."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Multinomial, _instance)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        new._binomial = Binomial(total_count=self.total_count, probs=new.probs, validate_args=False)
        return self._expanded_from(new, tuple(batch_shape))

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        sample_shape = tuple(sample_shape)
        with no_grad():
            draws = self._categorical.sample((self.total_count,) + sample_shape)  # one category per trial
            draws = draws.permute(tuple(range(1, draws.ndim)) + (0,))  # the trials last
            counts = ops.zeros(self._extended_shape(sample_shape), dtype=draws.dtype, device=draws.device)
            counts.scatter_add_(-1, draws, ops.ones_like(draws))
            return counts.type_as(self.probs)

    def entropy(self):
        n = self.total_count
        term1 = n * self._categorical.entropy() - math.lgamma(n + 1)
        support = self._binomial.enumerate_support(expand=False)[1:]  # the counts 1 .. n of each category
        binomial_probs = ops.exp(self._binomial.log_prob(support))
        return term1 + (binomial_probs * ops.lgamma(support + 1)).sum([0, -1])

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_factorial_n = ops.lgamma(value.sum(-1) + 1)
        log_factorial_xs = ops.lgamma(value + 1).sum(-1)
        logits = ops.where((value == 0) & (logits == -math.inf), 0.0, logits)  # 0 * log(0) is 0
        return log_factorial_n - log_factorial_xs + (logits * value).sum(-1)


class NegativeBinomial(_Binary):
    """The number of successes before ``total_count`` failures (a real count will do) in trials of success
    probability ``probs`` (or ``sigmoid(logits)``). A draw is Poisson of a Gamma(total_count, e^-logits) rate."""

    arg_constraints = {"total_count": constraints.greater_than_eq(0),
                       "probs": constraints.half_open_interval(0.0, 1.0), "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        total_count, param = broadcast_all(total_count, probs if probs is not None else logits)
        self.total_count = total_count.type_as(param)
        setattr(self, "probs" if probs is not None else "logits", param)
        self._param = param
        super().__init__(tuple(param.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(NegativeBinomial, _instance)
        batch_shape = tuple(batch_shape)
        new.total_count = self.total_count.expand(batch_shape)
        self._expand_params(new, batch_shape)
        return self._expanded_from(new, batch_shape)

    @property
    def mean(self):
        return self.total_count * ops.exp(self.logits)

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / ops.sigmoid(-self.logits)

    @lazy_property
    def _gamma(self):
        return Gamma(concentration=self.total_count, rate=ops.exp(-self.logits), validate_args=False)

    def sample(self, sample_shape=()):
        with no_grad():
            rate = self._gamma.sample(sample_shape)
            return _draw("poisson", tuple(rate.shape), rate, rate)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_unnormalized = self.total_count * F.logsigmoid(-self.logits) + value * F.logsigmoid(self.logits)
        log_normalization = -ops.lgamma(self.total_count + value) + ops.lgamma(1.0 + value) + ops.lgamma(
            self.total_count)
        # no trials and no successes: the mass 1 (the lgamma terms would give inf - inf)
        log_normalization = log_normalization.masked_fill(self.total_count + value == 0.0, 0.0)
        return log_unnormalized - log_normalization
