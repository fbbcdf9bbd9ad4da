"""``Distribution``: the base of every distribution, as ``torch.distributions.Distribution``.

A distribution has a ``batch_shape`` (independent, not identically distributed copies: the parameters'
broadcast shape) and an ``event_shape`` (one draw: () for a scalar law, (k,) for a vector one); a sample of
``sample_shape`` has shape ``sample_shape + batch_shape + event_shape`` and ``log_prob`` reduces the event
dimensions. With ``validate_args`` (on by default, as under PyTorch without ``python -O``) the constructor checks
each parameter against ``arg_constraints`` and ``log_prob`` / ``cdf`` check values against ``support``, raising
PyTorch's ValueErrors.
"""
from __future__ import annotations

import math
import warnings

from .. import ops
from ..autograd import no_grad
from ..tensor import Tensor
from . import constraints
from .utils import lazy_property

__all__ = ["Distribution"]


class Distribution:
    """The abstract base class of probability distributions."""

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value):
        """Whether new distributions validate their arguments (default True, False under ``python -O``)."""
        if value not in (True, False):
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape, self._event_shape = tuple(batch_shape), tuple(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if not self._validate_args:
            return
        try:
            arg_constraints = self.arg_constraints
        except NotImplementedError:
            arg_constraints = {}
            warnings.warn(f"{type(self)} does not define `arg_constraints`. Please set `arg_constraints = {{}}` or "
                          f"initialize the distribution with `validate_args=False` to turn off validation.",
                          stacklevel=2)
        for param, constraint in arg_constraints.items():
            if constraints.is_dependent(constraint):
                continue
            if param not in self.__dict__ and isinstance(getattr(type(self), param, None), lazy_property):
                continue  # a parameter derived from the given one (probs from logits ...)
            value = getattr(self, param)
            if not bool(constraint.check(value).all()):
                raise ValueError(f"Expected parameter {param} ({type(value).__name__} of shape {tuple(value.shape)}) "
                                 f"of distribution {self!r} to satisfy the constraint {constraint!r}, but found "
                                 f"invalid values:\n{value}")

    def expand(self, batch_shape, _instance=None):
        """A new distribution with the parameters expanded to ``batch_shape`` (views, no new memory)."""
        raise NotImplementedError

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    @property
    def arg_constraints(self):
        """{parameter name: the constraint it must satisfy}."""
        raise NotImplementedError

    @property
    def support(self):
        """The constraint the values of the distribution satisfy."""
        raise NotImplementedError

    @property
    def mean(self):
        raise NotImplementedError

    @property
    def mode(self):
        raise NotImplementedError(f"{type(self)} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=()):
        """A draw of shape ``sample_shape + batch_shape + event_shape``, outside the autograd graph."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        """A reparameterized draw: differentiable with respect to the parameters."""
        raise NotImplementedError

    def sample_n(self, n):
        warnings.warn("`sample_n(n)` will be deprecated. Use `sample((n,))` instead.", FutureWarning, stacklevel=2)
        return self.sample((n,))

    def log_prob(self, value):
        """The log of the density / mass function at ``value``, over ``value``'s batch."""
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def icdf(self, value):
        raise NotImplementedError

    def enumerate_support(self, expand=True):
        """The values of a discrete distribution along dim 0, shape (cardinality,) + batch_shape + event_shape
        (the batch dimensions size 1 with ``expand=False``)."""
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def perplexity(self):
        return ops.exp(self.entropy())

    def _extended_shape(self, sample_shape=()):
        return tuple(sample_shape) + self._batch_shape + self._event_shape

    def _validate_sample(self, value):
        """ValueError unless ``value`` is a tensor whose right-most dims are the event shape, broadcastable with
        the batch shape, and within the support."""
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        shape = tuple(value.shape)
        if shape[len(shape) - len(self._event_shape):] != self._event_shape:
            raise ValueError(f"The right-most size of value must match event_shape: {shape} vs {self._event_shape}.")
        expected = self._batch_shape + self._event_shape
        if any(i != 1 and j != 1 and i != j for i, j in zip(reversed(shape), reversed(expected))):
            raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {shape} vs {expected}.")
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(f"{type(self)} does not define `support` to enable sample validation. Please initialize "
                          f"the distribution with `validate_args=False` to turn off validation.", stacklevel=2)
            return
        if not bool(support.check(value).all()):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape {shape}) to be within the "
                             f"support ({support!r}) of the distribution {self!r}, but found invalid values:\n"
                             f"{value}")

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(f"Subclass {type(self).__name__} of {cls.__name__} that defines a custom "
                                      f"__init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def _expanded_from(self, new, batch_shape, event_shape=None):
        """``new`` (parameters already expanded) initialized with ``batch_shape``, unvalidated, this one's
        validation flag kept: the end of every ``expand``."""
        Distribution.__init__(new, batch_shape, self._event_shape if event_shape is None else event_shape,
                              validate_args=False)
        new._validate_args = self._validate_args
        return new

    def __repr__(self):
        names = [k for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else tuple(self.__dict__[p].shape)}"
                         for p in names)
        return f"{type(self).__name__}({args})"


def _nan_full(d, like, fill=math.nan):
    """A tensor of ``fill`` in ``d``'s batch + event shape and ``like``'s dtype and device (undefined moments)."""
    return ops.full(d._extended_shape(), fill, dtype=like.dtype, device=like.device)
