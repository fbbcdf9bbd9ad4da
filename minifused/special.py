"""``minifused.special``: PyTorch's ``torch.special`` names for the functions minifused has (``expit`` is
``sigmoid``; the gamma and Bessel families it lacks are absent), plus ``ndtr`` and ``xlog1py`` composed of them
(their gradients are the composition's)."""
from __future__ import annotations

import math

from . import functional as _F
from . import ops as _ops

expit = _ops.sigmoid
logit = _ops.logit
erf, erfc, erfinv = _ops.erf, _ops.erfc, _ops.erfinv
exp2, expm1, log1p = _ops.exp2, _ops.expm1, _ops.log1p
logsumexp = _ops.logsumexp
sinc = _ops.sinc
xlogy = _ops.xlogy
round = _ops.round  # noqa: A001 - PyTorch's name
softmax, log_softmax = _F.softmax, _F.log_softmax


def ndtr(input):  # noqa: A002 - PyTorch's name
    """The standard normal distribution's CDF, ``(1 + erf(x / sqrt(2))) / 2``."""
    return (1 + _ops.erf(input * (1 / math.sqrt(2)))) * 0.5


def xlog1py(input, other):  # noqa: A002
    """``x * log1p(y)``, 0 where x is 0 and log1p(y) is infinite (unless y is NaN), as ``torch.special.xlog1py``;
    the gradients are the product's: ``log1p(y)`` for x (at 0 too) and ``x / (1 + y)`` for y."""
    if not isinstance(input, _ops.Tensor):
        input = _ops.full_like(other, input)
    if not isinstance(other, _ops.Tensor):
        other = _ops.full_like(input, other)
    log = _ops.log1p(other)
    special = (input == 0) & ~_ops.isfinite(log) & ~_ops.isnan(other)
    return input * _ops.where(special, _ops.zeros_like(log), log)


__all__ = ["expit", "logit", "erf", "erfc", "erfinv", "exp2", "expm1", "log1p", "logsumexp", "sinc", "xlogy", "round",
           "softmax", "log_softmax", "ndtr", "xlog1py"]
