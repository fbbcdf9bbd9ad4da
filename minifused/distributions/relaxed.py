"""The relaxed (Concrete / Gumbel-softmax) laws: continuous stand-ins for a Bernoulli or a one-hot categorical
whose draws are reparameterized, sharper as ``temperature`` goes to 0. ``LogitRelaxedBernoulli`` draws the logit
of a relaxed Bernoulli (``RelaxedBernoulli``: its sigmoid); ``ExpRelaxedCategorical`` draws the log of a point of
the simplex (``RelaxedOneHotCategorical``: its exp). The noise is logistic / Gumbel from minifused's
generator."""
from __future__ import annotations

import math

from . import constraints
from .discrete import Categorical, _Binary, _OverCategorical
from .transformed import TransformedDistribution
from .transforms import ExpTransform, SigmoidTransform
from .utils import _is_number, _uniform, broadcast_all, clamp_probs

__all__ = ["LogitRelaxedBernoulli", "RelaxedBernoulli", "ExpRelaxedCategorical", "RelaxedOneHotCategorical"]


class _Relaxed(TransformedDistribution):
    """A relaxed law: a transform of its ``base_dist``, whose ``temperature``, ``logits`` and ``probs`` it has."""

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs


class LogitRelaxedBernoulli(_Binary):
    """The logit of a :class:`RelaxedBernoulli` draw: (logit(p) + logistic noise) / ``temperature``, with
    ``probs`` or ``logits`` (not both) the log-odds of 1."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self.temperature = temperature
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        given = probs if probs is not None else logits
        (param,) = broadcast_all(given)
        setattr(self, "probs" if probs is not None else "logits", param)
        self._param = param
        super().__init__(() if _is_number(given) else tuple(param.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogitRelaxedBernoulli, _instance)
        batch_shape = tuple(batch_shape)
        new.temperature = self.temperature
        self._expand_params(new, batch_shape)
        return self._expanded_from(new, batch_shape)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        probs = clamp_probs(self.probs.expand(shape))
        uniforms = clamp_probs(_uniform(shape, probs))
        return (uniforms.log() - (-uniforms).log1p() + probs.log() - (-probs).log1p()) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value.mul(self.temperature)
        return self.temperature.log() + diff - 2 * diff.exp().log1p()


class RelaxedBernoulli(_Relaxed):
    """A relaxed Bernoulli on (0, 1) of ``temperature`` and ``probs`` or ``logits``: the sigmoid of a
    :class:`LogitRelaxedBernoulli` draw."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        super().__init__(LogitRelaxedBernoulli(temperature, probs, logits), SigmoidTransform(),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(RelaxedBernoulli, _instance)
        return super().expand(batch_shape, _instance=new)


class ExpRelaxedCategorical(_OverCategorical):
    """The log of a :class:`RelaxedOneHotCategorical` draw: log_softmax((logits + Gumbel noise) / temperature),
    with ``probs`` or ``logits`` (not both) over the last dim (event shape (K,))."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector  # (the values lie on a submanifold of it)
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        self.temperature = temperature
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ExpRelaxedCategorical, _instance)
        new.temperature = self.temperature
        new._categorical = self._categorical.expand(batch_shape)
        return self._expanded_from(new, tuple(batch_shape))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        uniforms = clamp_probs(_uniform(shape, self.logits))
        gumbels = -((-(uniforms.log())).log())
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(dim=-1, keepdim=True)

    def log_prob(self, value):
        k = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_scale = math.lgamma(k) - self.temperature.log().mul(-(k - 1))  # log (K-1)! + (K-1) log temperature
        score = logits - value.mul(self.temperature)
        return (score - score.logsumexp(dim=-1, keepdim=True)).sum(-1) + log_scale


class RelaxedOneHotCategorical(_Relaxed):
    """A relaxed one-hot categorical on the simplex of ``temperature`` and ``probs`` or ``logits``: the exp of an
    :class:`ExpRelaxedCategorical` draw (the Gumbel-softmax)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        super().__init__(ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args),
                         ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(RelaxedOneHotCategorical, _instance)
        return super().expand(batch_shape, _instance=new)

