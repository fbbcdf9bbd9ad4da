"""``torch.distributions.utils``: parameters broadcast together (numbers become tensors), probabilities and logits
converted either way, the lazily computed parameter, and the helpers the distributions share (draws from
minifused's global generator, sums over the rightmost dimensions)."""
from __future__ import annotations

import functools
import numbers

import numpy as np

from .. import backend
from .. import functional as F
from .. import ops
from ..autograd import enable_grad
from ..tensor import Tensor

__all__ = ["broadcast_all", "logits_to_probs", "clamp_probs", "probs_to_logits", "lazy_property", "euler_constant"]

euler_constant = 0.57721566490153286060  # Euler-Mascheroni


def _is_number(v):
    return isinstance(v, numbers.Number) and not isinstance(v, bool) or isinstance(v, np.generic)


def broadcast_all(*values):
    """``values`` (tensors and numbers) broadcast to one shape; the numbers become tensors of the first tensor's
    dtype and device (the default dtype when all are numbers), as PyTorch's ``broadcast_all``."""
    if not all(isinstance(v, Tensor) or _is_number(v) for v in values):
        raise ValueError("Input arguments must all be instances of Number, torch.Tensor or objects implementing "
                         "__torch_function__.")
    like = next((v for v in values if isinstance(v, Tensor)), None)
    dtype = like.dtype if like is not None else backend.get_default_dtype()
    device = like.device if like is not None else None
    tensors = [v if isinstance(v, Tensor) else ops.tensor(float(v), dtype=dtype, device=device) for v in values]
    return tuple(ops.broadcast_tensors(*tensors))


def logits_to_probs(logits, is_binary=False):
    """Probabilities from logits: the sigmoid of log-odds (``is_binary``) or the softmax over the last dim."""
    return ops.sigmoid(logits) if is_binary else F.softmax(logits, dim=-1)


def clamp_probs(probs):
    """``probs`` clamped to [eps, 1 - eps], eps the dtype's machine epsilon (so their logits are finite)."""
    eps = _tiny_eps(probs.dtype)[1]
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    """Logits from probabilities (clamped first): log-odds (``is_binary``) or log-probabilities."""
    p = clamp_probs(probs)
    return ops.log(p) - ops.log1p(-p) if is_binary else ops.log(p)


class lazy_property:  # noqa: N801 - PyTorch's name
    """A parameter computed from another on first use (``probs`` from ``logits`` ...), with gradients recorded,
    then stored on the instance. Read on the class, it is a ``property`` too, so documentation tools see it and
    ``Distribution.__init__`` can tell it apart (it skips validating parameters not yet computed)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        functools.update_wrapper(self, wrapped)

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        with enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


def _sum_rightmost(value, dim):
    """``value`` summed over its ``dim`` rightmost dimensions."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:value.ndim - dim]) + (-1,)).sum(-1)


def _standard_normal(shape, like):
    """Standard normal draws of ``shape`` in ``like``'s dtype and device, from minifused's generator."""
    return ops.randn(tuple(shape), dtype=like.dtype, device=like.device)


def _uniform(shape, like, low=0.0, high=1.0):
    """Uniform draws on [low, high) of ``shape`` in ``like``'s dtype and device, from minifused's generator."""
    u = ops.rand(tuple(shape), dtype=like.dtype, device=like.device)
    return u if (low, high) == (0.0, 1.0) else u * (high - low) + low


def _finfo(dtype):
    """The limits of a floating dtype, bfloat16 too (as ``minifused.finfo``)."""
    import ml_dtypes

    return ml_dtypes.finfo(dtype)


def _draw(kind, shape, like, *params):
    """``kind`` ('poisson', 'binomial') draws of ``shape`` in ``like``'s dtype and device from the global generator
    of that device (NumPy's / CuPy's own samplers: no op makes them), the parameters tensors broadcast to ``shape``.
    Not differentiable."""
    dev = like.device
    gen = backend.generator(dev)
    arrays = [backend.array_module(p._data).broadcast_to(p._data, shape) for p in params]
    with backend.on_device(dev):
        if kind == "poisson":
            out = gen.poisson(arrays[0], size=shape)
        elif kind == "binomial":
            out = gen.binomial(arrays[0].astype(np.int64), arrays[1].astype(np.float64), size=shape)
        else:
            raise NotImplementedError(f"distributions: no sampler for {kind!r}")
    return Tensor._from_array(out.astype(like.dtype))


def _tiny_eps(dtype):
    """(smallest normal, machine epsilon) of a floating dtype."""
    info = _finfo(dtype)
    return float(info.tiny), float(info.eps)
