"""Gamma(alpha, 1) draws with a reparameterization gradient, for ``Beta.rsample``.

The draw comes from the global generator's gamma sampler (NumPy's / CuPy's ``standard_gamma``). Its gradient is
the implicit one: x = F^-1(u; alpha) for the regularized incomplete gamma F = P(alpha, .), so
dx/dalpha = -(dP/dalpha) / p(x; alpha). Both factors carry the same prefactor x^alpha e^-x, which cancels:
below x = alpha + 1 the series P = x^alpha e^-x / Gamma(alpha + 1) * S gives dx/dalpha =
-(x / alpha) (S (log x - digamma(alpha + 1)) + dS/dalpha); above it the continued fraction
Q = 1 - P = x^alpha e^-x / Gamma(alpha) * C gives dx/dalpha = x (C (log x - digamma(alpha)) + dC/dalpha). S, C and
their derivatives in alpha are summed exactly (the derivative carried through each term), in float64, until every
element has converged.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from .. import backend
from ..autograd import Function
from ..kernels.special_math import digamma
from ..tensor import Tensor

_TOL = 1e-15
_MAX_TERMS = 20000  # the series needs about 6 sqrt(alpha) terms near x = alpha: enough past alpha = 1e6
_CHECK_EVERY = 8  # converged? asked every few terms: one host synchronization each time


def _converged(xp, large):
    """Whether no element still has a ``large`` term (NaN counts as converged: it would never get small)."""
    return not bool(xp.any(large))


def _series(xp, a, x):
    """(S, dS/da) of S = sum_n x^n / ((a+1)...(a+n))."""
    term, s, ds, r = xp.ones_like(x), xp.ones_like(x), xp.zeros_like(x), xp.zeros_like(x)
    for n in range(1, _MAX_TERMS):
        r = r + 1 / (a + n)
        term = term * x / (a + n)
        s, ds = s + term, ds - term * r
        if n % _CHECK_EVERY == 0 and _converged(xp, term > _TOL * s):
            break
    return s, ds


def _continued_fraction(xp, a, x):
    """(C, dC/da) of Legendre's continued fraction C = 1 / (x + 1 - a - 1 (1 - a) / (x + 3 - a - ...)), by
    the modified Lentz method with each quantity's derivative in a carried along."""
    tiny = 1e-300
    b = x + 1 - a
    f = backend.where(b == 0, tiny, b)
    df = -xp.ones_like(x)
    c, dc, d, dd = f, df, xp.zeros_like(x), xp.zeros_like(x)
    for i in range(1, _MAX_TERMS):
        an, dan = -i * (i - a), float(i)
        b = b + 2
        d_new, dd_new = b + an * d, -1 + dan * d + an * dd
        d_new = backend.where(d_new == 0, tiny, d_new)
        c_new = b + an / c
        dc_new = -1 + dan / c - an * dc / (c * c)
        c_new = backend.where(c_new == 0, tiny, c_new)
        d, dd = 1 / d_new, -dd_new / (d_new * d_new)
        c, dc = c_new, dc_new
        delta, ddelta = c * d, dc * d + c * dd
        f, df = f * delta, df * delta + f * ddelta
        if i % _CHECK_EVERY == 0 and _converged(xp, xp.abs(delta - 1) > _TOL):
            break
    return 1 / f, -df / (f * f)


def standard_gamma_grad(a, x):
    """dx/da for Gamma(a, 1) draws ``x`` (raw float64 arrays): the implicit reparameterization gradient."""
    xp = backend.array_module(a)
    low = x < a + 1
    with np.errstate(divide="ignore", invalid="ignore"):
        log_x = xp.log(x)
        s, ds = _series(xp, a, backend.where(low, x, 0.0))
        from_series = -(x / a) * (s * (log_x - digamma(a + 1)) + ds)
        c, dc = _continued_fraction(xp, a, backend.where(low, a + 2, x))
        from_fraction = x * (c * (log_x - digamma(a)) + dc)
    grad = backend.where(low, from_series, from_fraction)
    return backend.where(x > 0, grad, 0.0)  # a draw that underflowed to 0 stays there


class StandardGamma(Function):
    """Gamma(concentration, 1) draws, one per element of ``concentration``, from the global generator;
    differentiable in the concentration by the implicit gradient."""

    @staticmethod
    def forward(ctx, concentration):
        xp = backend.array_module(concentration)
        dev = backend.device_of(concentration)
        alpha = concentration.astype(np.float64)
        with backend.on_device(dev):
            x = backend.generator(dev).standard_gamma(alpha, size=alpha.shape)
        # at small concentrations a draw may round to 0 in the output dtype: the smallest normal number instead
        # (PyTorch's clamp), so that Beta's and Dirichlet's ratios of draws are never 0 / 0
        x = xp.maximum(xp.asarray(x, dtype=np.float64), float(ml_dtypes.finfo(concentration.dtype).tiny))
        ctx.save_for_backward(alpha, x)
        return x.astype(concentration.dtype)

    @staticmethod
    def backward(ctx, g):
        alpha, x = ctx.saved_tensors
        return (g * standard_gamma_grad(alpha, x)).astype(g.dtype)


def standard_gamma(concentration):
    """Gamma(concentration, 1) draws (a tensor of concentration's shape), reparameterized."""
    if not isinstance(concentration, Tensor):
        raise TypeError(f"standard_gamma: expected a Tensor, got {type(concentration).__name__}")
    return StandardGamma.apply(concentration)
