"""``minifused.special``: PyTorch's ``torch.special`` names for the functions minifused has (``expit`` is
``sigmoid``, ``gammaln`` is ``lgamma``, ``psi`` is ``digamma``, ``multigammaln`` is ``mvlgamma``, ``gammainc`` /
``gammaincc`` are ``igamma`` / ``igammac``; the gamma, Bessel and error-function families are ops/special_math.py's,
the orthogonal polynomials, airy and the Bessel functions J, Y, K are absent), plus ``ndtr`` and ``xlog1py``
composed of them (their gradients are the composition's)."""
from __future__ import annotations

import math

from . import backend
from . import functional as _F
from . import ops as _ops
from .ops import special_math as _special_math
from .ops._common import autocast_off as _autocast_off

expit = _ops.sigmoid
logit = _ops.logit
erf, erfc, erfinv = _ops.erf, _ops.erfc, _ops.erfinv
exp2, expm1, log1p = _ops.exp2, _ops.expm1, _ops.log1p
logsumexp = _ops.logsumexp
sinc = _ops.sinc
xlogy = _ops.xlogy
round = _ops.round  # noqa: A001 - PyTorch's name
softmax, log_softmax = _F.softmax, _F.log_softmax
gammaln = _ops.lgamma
digamma = psi = _ops.digamma
polygamma = _ops.polygamma
multigammaln = _ops.mvlgamma
gammainc, gammaincc = _special_math.gammainc, _special_math.gammaincc
zeta = _special_math.zeta
i0, i0e, i1, i1e = _ops.i0, _special_math.i0e, _special_math.i1, _special_math.i1e
erfcx, log_ndtr, ndtri, entr = _special_math.erfcx, _special_math.log_ndtr, _special_math.ndtri, _special_math.entr


def ndtr(input):  # noqa: A002 - PyTorch's name
    """The standard normal distribution's CDF, ``(1 + erf(x / sqrt(2))) / 2``."""
    return (1 + _ops.erf(input * (1 / math.sqrt(2)))) * 0.5


def xlog1py(input, other):  # noqa: A002
    """``x * log1p(y)``, 0 where x is 0 and log1p(y) is infinite (unless y is NaN), as ``torch.special.xlog1py``;
    the gradients are the product's: ``log1p(y)`` for x (at 0 too) and ``x / (1 + y)`` for y."""
    if not isinstance(input, _ops.Tensor) and not isinstance(other, _ops.Tensor):
        raise backend.InputTypeError(f"xlog1py(): expected a Tensor operand, got {type(input).__name__} and "
                                     f"{type(other).__name__}")
    # PyTorch's promotion (a 0-d float64 other beside float32 keeps float32), integer and bool operands computed in
    # the default float dtype: a number is never truncated or wrapped into an integer tensor's dtype
    dtype = _ops.result_type(input, other)
    if not backend.is_floating(dtype):
        dtype = backend.get_default_dtype()
    like = input if isinstance(input, _ops.Tensor) else other
    input, other = (v.to(dtype) if isinstance(v, _ops.Tensor) else _ops.full_like(like, v, dtype=dtype)
                    for v in (input, other))
    with _autocast_off():  # (one op in PyTorch: not log1p's autocast rule)
        log = _ops.log1p(other)
    special = (input == 0) & ~_ops.isfinite(log) & ~_ops.isnan(other)
    return input * _ops.where(special, _ops.zeros_like(log), log)


__all__ = ["expit", "logit", "erf", "erfc", "erfinv", "exp2", "expm1", "log1p", "logsumexp", "sinc", "xlogy", "round",
           "softmax", "log_softmax", "ndtr", "xlog1py", "gammaln", "digamma", "psi", "polygamma", "multigammaln",
           "gammainc", "gammaincc", "zeta", "i0", "i0e", "i1", "i1e", "erfcx", "log_ndtr", "ndtri", "entr"]
