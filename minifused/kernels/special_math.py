"""Special functions on raw arrays: the gamma family (``lgamma``, ``digamma``, ``polygamma``, the Hurwitz ``zeta``,
the regularized incomplete gammas ``gammainc`` / ``gammaincc``), the modified Bessel functions ``i0``, ``i0e``,
``i1``, ``i1e``, and the error-function family (``erfcx``, ``log_ndtr``, ``ndtri``) with ``entr``.

Each takes a floating array (the binary ones two, broadcast) and returns one of its dtype. On CuPy arrays they are
``cupyx.scipy.special``'s (16-bit arrays through float32), except ``i0e`` / ``i1e``, whose CuPy forms multiply
``exp(-|x|)`` into an ``I0(x)`` that overflows past |x| ~ 700 (~ 90 in float32) and give NaN there: those run the
NumPy code below, which takes either array module. On NumPy arrays (no SciPy here) the values are computed in
float64 from series, recurrences and continued fractions, vectorized over the array, with float64 accuracy
(relative errors of a few 1e-15 away from the functions' zeros; the incomplete gammas' grow with a, to ~1e-12 at
a ~ 500); the special points follow PyTorch's (Cephes') conventions, listed per function. ``erf64`` / ``erfc64``
(float64 arrays only) are the NumPy ``erf`` / ``erfc`` of the ops and of the exact GELU: Cody's rational
approximations, a few ulp.
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from .. import backend

_HALF = (np.dtype(np.float16), backend.bfloat16)
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
_SQRT_PI = math.sqrt(math.pi)
# the Bernoulli numbers B_2 .. B_26
_B2K = [Fraction(1, 6), Fraction(-1, 30), Fraction(1, 42), Fraction(-1, 30), Fraction(5, 66), Fraction(-691, 2730),
        Fraction(7, 6), Fraction(-3617, 510), Fraction(43867, 798), Fraction(-174611, 330), Fraction(854513, 138),
        Fraction(-236364091, 2730), Fraction(8553103, 6)]
_STIRLING = [float(b / ((2 * k + 2) * (2 * k + 1))) for k, b in enumerate(_B2K[:8])]  # B_2k / (2k (2k - 1))
_DIGAMMA_SERIES = [float(b / (2 * k + 2)) for k, b in enumerate(_B2K[:8])]  # B_2k / 2k
_EULER_MACLAURIN = [float(b / math.factorial(2 * k + 2)) for k, b in enumerate(_B2K[:12])]  # B_2k / (2k)!


def _xp(x):
    return backend.array_module(x)


def _quiet(fn):
    """``fn`` with NumPy's floating-point warnings off (poles, overflow to inf and NaN are values here)."""
    @functools.wraps(fn)
    def quiet(*args):
        with np.errstate(all="ignore"):
            return fn(*args)
    return quiet


def _cupyx():
    import cupyx.scipy.special

    return cupyx.scipy.special


def _on_device(fn, *arrays):
    """``cupyx.scipy.special`` ``fn`` on CuPy arrays: 16-bit ones through float32, the result in the inputs'
    dtype (CuPy's ufuncs give float64 for 16-bit and integer input)."""
    dtype = arrays[0].dtype
    wide = [a.astype(np.float32) if a.dtype in _HALF else a for a in arrays]
    return getattr(_cupyx(), fn)(*wide).astype(dtype, copy=False)


def _in_float64(fn, *arrays):
    """``fn`` of the arrays broadcast, flattened and in float64 (the NumPy code indexes by masks: it needs 1-d
    arrays), the result in the last array's shape and dtype."""
    wide = np.broadcast_arrays(*[a.astype(np.float64) for a in arrays])
    return fn(*[w.ravel() for w in wide]).reshape(wide[0].shape).astype(arrays[-1].dtype)


def _sinpi(x):
    """sin(pi x), exact zeros at the integers (x reduced to [-1/2, 1/2] first)."""
    xp = _xp(x)
    n = xp.round(x)
    r = x - n
    return backend.where(xp.fmod(n, 2) == 0, 1.0, -1.0) * xp.sin(math.pi * r)


def _polynomial(coefficients, z):
    """sum_k coefficients[k] z**k (Horner, in place: no temporaries)."""
    out = coefficients[-1] + 0 * z
    for c in reversed(coefficients[:-1]):
        out *= z
        out += c
    return out


# ---------------------------------------------------------------- gamma family (NumPy, float64)
def _shift_up(y, limit, log_product):
    """(y + n, log(y (y+1) ... (y+n-1))) or (y + n, -(1/y + ... + 1/(y+n-1))) for the n that brings y >= limit:
    the recurrences of lgamma (``log_product``) and digamma. y > 0."""
    acc = np.ones_like(y) if log_product else np.zeros_like(y)
    z = y.copy()
    for _ in range(int(math.ceil(limit))):
        low = z < limit
        if log_product:
            acc *= np.where(low, z, 1.0)
        else:
            acc -= np.where(low, 1 / z, 0.0)
        z += low
    return z, (np.log(acc) if log_product else acc)


def _lgamma_positive(y):
    """log Gamma(y) for y >= 1/2: Stirling's series after the recurrence to y >= 10; near the zeros at 1 and 2,
    the Taylor series of log Gamma(1 + e) (the recurrence would subtract numbers near 13 there)."""
    z, log_product = _shift_up(y, 10.0, True)
    inv = 1 / z
    out = (z - 0.5) * np.log(z) - z + _LOG_SQRT_2PI + inv * _polynomial(_STIRLING, inv * inv) - log_product
    near = (np.abs(y - 1) < 0.25) | (np.abs(y - 2) < 0.25)
    if near.any():
        yn = y[near]
        near2 = yn > 1.5
        e = np.where(near2, yn - 2, yn - 1)
        # log Gamma(1 + e) = -log1p(e) + (1 - gamma) e + sum_k>=2 (-1)^k (zeta(k) - 1) e^k / k
        out[near] = e * _polynomial(_LGAMMA_TAYLOR, e) - np.where(near2, 0.0, np.log1p(e))
    return out


def _lgamma64(x):
    neg = x < 0.5
    y = np.where(neg, 1 - x, x)
    out = _lgamma_positive(np.where(np.isfinite(y), y, 2.0))
    # reflection: log|Gamma(x)| = log(pi / |sin(pi x)|) - log Gamma(1 - x); +inf at the poles
    out[neg] = math.log(math.pi) - np.log(np.abs(_sinpi(x[neg]))) - out[neg]
    return np.where(np.isinf(x), np.inf, np.where(np.isnan(x), np.nan, out))


@_quiet
def lgamma(x):
    """log|Gamma(x)|: +inf at 0, the negative integers and +-inf, as PyTorch's."""
    if _xp(x) is not np:
        out = _on_device("gammaln", x)
        return backend.where(x == -np.inf, np.inf, out).astype(x.dtype, copy=False)
    return _in_float64(_lgamma64, x)


def _digamma64(x):
    neg = x < 0
    y = np.where(neg, 1 - x, x)
    y = np.where((y > 0) & np.isfinite(y), y, 1.0)
    z, acc = _shift_up(y, 10.0, False)
    inv2 = 1 / (z * z)
    psi = acc + np.log(z) - 0.5 / z - inv2 * _polynomial(_DIGAMMA_SERIES, inv2)
    # reflection: psi(x) = psi(1 - x) - pi / tan(pi frac(x)) (the fraction keeps tan accurate)
    xn = x[neg]
    psi[neg] -= math.pi / np.tan(math.pi * (xn - np.trunc(xn)))
    psi = np.where(x == 0, np.copysign(np.inf, -x), psi)
    psi = np.where(neg & (x == np.trunc(x)), np.nan, psi)  # the poles (and -inf)
    return np.where(np.isnan(x), np.nan, np.where(x == np.inf, np.inf, psi))


@_quiet
def digamma(x):
    """psi(x) = d log Gamma(x) / dx: -inf at +0, +inf at -0, NaN at the negative integers and -inf."""
    if _xp(x) is not np:
        out = _on_device("digamma", x)
        return backend.where(x == 0, _xp(x).copysign(np.inf, -x), out).astype(x.dtype, copy=False)
    return _in_float64(_digamma64, x)


def _hurwitz64(s, q):
    """zeta(s, q) = sum_k>=0 (q + k)**-s for s > 1: terms summed until q + k >= 10 + s, then the Euler-Maclaurin
    tail (12 Bernoulli terms). A negative q sums through its terms (defined for integer s: the polygammas)."""
    s, q = np.broadcast_arrays(s, q)
    w = q.astype(np.float64).ravel()  # a copy
    flat_s = s.ravel()
    total = np.zeros_like(w)
    limit = 10.0 + np.where(np.isfinite(flat_s), flat_s, 0.0)
    # the elements that need terms are worked on alone (a q far below zero needs many, the others none); below
    # -2**53 every float is an integer (a pole)
    active = np.nonzero((w < limit) & (w > -2.0 ** 53))[0]
    while active.size:
        wa = w[active]
        total[active] += wa ** -flat_s[active]
        w[active] = wa + 1
        active = active[wa + 1 < limit[active]]
    w, total = w.reshape(q.shape), total.reshape(q.shape)
    t = w ** (1 - s)  # (not w**-s: it underflows first)
    tail = t / (s - 1) + 0.5 * t / w
    term = s * t / (w * w)
    for j, c in enumerate(_EULER_MACLAURIN):
        tail += c * term
        term *= (s + 2 * j + 1) * (s + 2 * j + 2) / (w * w)
    out = total + tail
    out = np.where(q == np.inf, 0.0, out)
    out = np.where((q < 0) & (s != np.floor(s)), np.nan, out)  # q**-s undefined
    out = np.where((q <= 0) & (q == np.floor(q)), np.inf, out)  # the poles (-inf among them), before that, as Cephes'
    out = np.where(s == 1, np.inf, np.where(s < 1, np.nan, out))
    return np.where(np.isnan(s) | np.isnan(q), np.nan, out)


@_quiet
def zeta(s, q):
    """The Hurwitz zeta function sum_k>=0 (q + k)**-s: +inf at s == 1 and at q in {0, -1, -2, ...}, NaN for
    s < 1 and for a negative q with a fractional s, as PyTorch's."""
    if _xp(q) is not np:
        return _on_device("zeta", s, q)
    return _in_float64(_hurwitz64, s, q)


@_quiet
def polygamma(n, x):
    """The n-th derivative of digamma (n >= 0 an int): (-1)**(n+1) n! zeta(n + 1, x) for n >= 1."""
    if n == 0:
        return digamma(x)
    if _xp(x) is not np:
        return _on_device("polygamma", _xp(x).asarray(n, x.dtype), x).astype(x.dtype, copy=False)
    sign_factorial = (-1.0) ** (n + 1) * math.factorial(n)
    return _in_float64(lambda x64: sign_factorial * _hurwitz64(np.full_like(x64, n + 1.0), x64), x)


@_quiet
def _lgamma_taylor():
    # (1 - gamma), then (-1)^k (zeta(k) - 1) / k for k = 2 .. 26, zeta(k) - 1 = zeta(k, 2)
    k = np.arange(2.0, 27.0)
    rest = (-1.0) ** k * _hurwitz64(k, np.full_like(k, 2.0)) / k
    return [1 - 0.5772156649015329] + list(rest)


_LGAMMA_TAYLOR = _lgamma_taylor()  # the coefficients of e**1, e**2 ... (log Gamma(1 + e) = e * poly(e) - log1p(e))


# ---------------------------------------------------------------- incomplete gamma
def _until_converged(step, state, limit):
    """Run ``step(i, state) -> (state, converged)`` for i = 1, 2 ... on 1-D arrays, dropping the converged
    elements every 4 steps (the slow ones cost no passes over the rest); the first array of each element's last
    state, in the original order."""
    n = state[0].size
    out = np.empty(n)
    index = np.arange(n)
    converged = np.zeros(n, bool)
    for i in range(1, limit + 1):
        state, now = step(i, state)
        converged |= now
        if i % 4 == 0 or i == limit:
            out[index[converged]] = state[0][converged]
            keep = ~converged
            index, state, converged = index[keep], [v[keep] for v in state], converged[keep]
            if not index.size:
                break
    out[index] = state[0]
    return out


def _gamma_continued(a, x, tiny=1e-300):
    """Legendre's continued fraction of Gamma(a, x) e**x x**-a (Lentz's method), for x > a."""
    shape = x.shape
    a, b = np.broadcast_arrays(a, x + 1 - a)
    a, b = a.ravel().copy(), b.ravel().copy()

    def step(i, state):
        h, a, b, c, d = state
        an = -i * (i - a)
        b = b + 2
        d = an * d + b
        d = 1 / np.where(np.abs(d) < tiny, tiny, d)
        c = b + an / c
        c = np.where(np.abs(c) < tiny, tiny, c)
        delta = d * c
        return [h * delta, a, b, c, d], np.abs(delta - 1) < 1e-16

    return _until_converged(step, [1 / b, a, b, np.full_like(b, 1 / tiny), 1 / b], 5000).reshape(shape)


def _gamma_series(a, x):
    """sum_n>=0 x**n / ((a + 1) ... (a + n)) = Gamma(a + 1) e**x x**-a P(a, x), for x <= a (or x <= 1)."""
    shape = x.shape
    a, x = np.broadcast_arrays(a, x)
    a, x = a.ravel().copy(), x.ravel().copy()

    def step(i, state):
        total, term, a, x = state
        term = term * x / (a + i)
        return [total + term, term, a, x], term <= 1e-17 * total

    return _until_converged(step, [np.ones_like(x), np.ones_like(x), a, x], 100000).reshape(shape)


def _igamma64(a, x, upper):
    a, x = np.broadcast_arrays(a, x)
    ok = (a > 0) & (x > 0) & np.isfinite(a) & np.isfinite(x)
    continued = ok & (x > 1) & (x > a)  # Cephes' choice: the fraction for Q where it converges fast
    series = ok & ~continued
    p, q = np.full(x.shape, np.nan), np.full(x.shape, np.nan)
    ac, xc = a[continued], x[continued]
    q[continued] = np.exp(ac * np.log(xc) - xc - _lgamma64(ac)) * _gamma_continued(ac, xc)
    p[continued] = 1 - q[continued]
    a_s, xs = a[series], x[series]
    p[series] = np.exp(a_s * np.log(xs) - xs - _lgamma64(a_s + 1)) * _gamma_series(a_s, xs)
    q[series] = 1 - p[series]
    out = q if upper else p
    # the edges, as PyTorch's: P(0, x > 0) = 1, P(a > 0, 0) = 0, P(a, inf) = 1, P(inf, x) = 0
    one, zero = (0.0, 1.0) if upper else (1.0, 0.0)
    out = np.where((a == 0) & (x > 0), one, out)
    out = np.where((x == 0) & (a > 0), zero, out)
    out = np.where((x == np.inf) & np.isfinite(a), one, out)
    out = np.where((a == np.inf) & np.isfinite(x), zero, out)
    bad = (a < 0) | (x < 0) | ((a == 0) & (x == 0)) | ((a == np.inf) & (x == np.inf)) | np.isnan(a) | np.isnan(x)
    return np.where(bad, np.nan, out)


@_quiet
def gammainc(a, x):
    """The regularized lower incomplete gamma P(a, x) (PyTorch's ``igamma``): NaN for a < 0 or x < 0 and at
    a == x == 0; 1 at a == 0 < x and at x == inf; 0 at x == 0 < a and at a == inf."""
    if _xp(x) is not np:
        return _on_device("gammainc", a, x)
    return _in_float64(lambda a, x: _igamma64(a, x, False), a, x)


@_quiet
def gammaincc(a, x):
    """The regularized upper incomplete gamma Q(a, x) = 1 - P(a, x) (PyTorch's ``igammac``), same edges."""
    if _xp(x) is not np:
        return _on_device("gammaincc", a, x)
    return _in_float64(lambda a, x: _igamma64(a, x, True), a, x)


@_quiet
def gamma_pdf_log(a, x):
    """log(x**(a-1) e**-x / Gamma(a)): the log of d P(a, x) / dx (both float, broadcast)."""
    xp = _xp(x)
    if xp is np:
        return _in_float64(lambda a, x: (a - 1) * np.log(x) - x - _lgamma64(a), a, x)
    a64, x64 = a.astype(np.float64), x.astype(np.float64)
    return ((a64 - 1) * xp.log(x64) - x64 - _cupyx().gammaln(a64)).astype(x.dtype)


# ---------------------------------------------------------------- modified Bessel functions
_BESSEL_SWITCH = 20.0  # the power series below it; the asymptotic series (error ~ e**-2x) above


def _bessel64(x, order, scaled):
    """I_order(x) (order 0 or 1), times e**-|x| when ``scaled``."""
    xp = _xp(x)
    ax = xp.abs(x)
    small = xp.minimum(ax, _BESSEL_SWITCH)
    quarter = small * small / 4
    term = xp.ones_like(x)
    total = xp.ones_like(x)
    for k in range(1, 42):  # sum_k (x**2/4)**k / (k! (k + order)!)
        term = term * quarter / (k * (k + order))
        total = total + term
    series = total * (small / 2 if order else 1.0)
    big = xp.maximum(ax, _BESSEL_SWITCH)
    inv = 1 / big
    coefficient, asymptotic, power = 1.0, xp.ones_like(x), xp.ones_like(x)
    for k in range(1, 31):  # sum_k prod_j ((2j - 1)**2 - 4 order**2) / (8j) / x**k
        coefficient *= ((2 * k - 1) ** 2 - 4 * order * order) / (8 * k)
        power = power * inv
        asymptotic = asymptotic + coefficient * power
    scaled_big = asymptotic / xp.sqrt(2 * math.pi * big)
    if scaled:
        out = backend.where(ax <= _BESSEL_SWITCH, series * xp.exp(-small), scaled_big)
    else:
        half = xp.exp(big / 2)  # e**x as two factors: finite wherever the product is
        out = backend.where(ax <= _BESSEL_SWITCH, series, half * (half * scaled_big))
    return xp.copysign(out, x) if order else out


def _bessel(name, order, scaled, x):
    xp = _xp(x)
    if xp is not np and not scaled:
        # PyTorch's value at +-inf (Cephes' exp(x) c / sqrt(x)) is NaN, as below; CUDA's cyl_bessel_i0 / i1 need not be
        return backend.where(xp.isinf(x), xp.nan, _on_device(name, x)).astype(x.dtype, copy=False)
    wide = x.astype(np.float64)
    return _bessel64(wide, order, scaled).astype(x.dtype)


@_quiet
def i0(x):
    """The modified Bessel function I0 (inf past |x| ~ 713 in float64; NaN at +-inf, as PyTorch's)."""
    return _bessel("i0", 0, False, x)


@_quiet
def i0e(x):
    """e**-|x| I0(x) (0 at +-inf)."""
    return _bessel("i0e", 0, True, x)


@_quiet
def i1(x):
    """The modified Bessel function I1 (odd; NaN at +-inf, as PyTorch's)."""
    return _bessel("i1", 1, False, x)


@_quiet
def i1e(x):
    """e**-|x| I1(x) (+-0 at +-inf)."""
    return _bessel("i1e", 1, True, x)


# ---------------------------------------------------------------- the error-function family
# erf and erfc: W. J. Cody's rational Chebyshev approximations ("Rational Chebyshev approximations for the error
# function", Math. Comp. 23 (1969) 631-637), relative error a few 1e-17 in exact arithmetic; the coefficients in
# ascending powers. |x| <= 0.46875: erf(x) = x P(x**2) / Q(x**2); 0.46875 < x <= 4: erfc(x) = exp(-x**2) P(x) /
# Q(x); x > 4: erfc(x) = exp(-x**2) / x (1/sqrt(pi) - z P(z) / Q(z)), z = 1 / x**2.
_ERF_SPLIT = 0.46875
_ERF_SMALL = ([3209.37758913846947, 377.485237685302021, 113.864154151050156, 3.16112374387056560,
               0.185777706184603153],
              [2844.23683343917062, 1282.61652607737228, 244.024637934444173, 23.6012909523441209, 1.0])
_ERFC_MIDDLE = ([1230.33935479799725, 2051.07837782607147, 1712.04761263407058, 881.952221241769090,
                 298.635138197400131, 66.1191906371416295, 8.88314979438837594, 0.564188496988670089,
                 2.15311535474403846e-8],
                [1230.33935480374942, 3439.36767414372164, 4362.61909014324716, 3290.79923573345963,
                 1621.38957456669019, 537.181101862009858, 117.693950891312499, 15.7449261107098347, 1.0])
_ERFC_LARGE = ([6.58749161529837803e-4, 0.0160837851487422766, 0.125781726111229246, 0.360344899949804439,
                0.305326634961232344, 0.0163153871373020978],
               [0.00233520497626869185, 0.0605183413124413191, 0.527905102951428412, 1.87295284992346725,
                2.56852019228982242, 1.0])


def _rational(pq, z):
    return _polynomial(pq[0], z) / _polynomial(pq[1], z)


def _times_exp_minus_square(r, x):
    """r exp(-x**2) with x**2 taken exactly as hi + lo (Dekker's product): the rounding of x*x alone would cost a
    relative error of x**2 2**-53 (1e-13 at x = 27). exp(-lo) = 1 - lo (|lo| <= 1e-13); the possibly subnormal
    exp(-hi) is multiplied in last, rounding once."""
    hi = x * x
    c = 134217729.0 * x  # 2**27 + 1: splits x into two halves whose products are exact
    xh = c - (c - x)
    xl = x - xh
    lo = ((xh * xh - hi) + 2 * xh * xl) + xl * xl
    return np.exp(-hi) * (r - r * lo)


def _erfc_tail(x):
    """erfc(x) for x > 0.46875 (NaN stays NaN); 0 past 27.3, where erfc underflows (x clamped to 28 first: the
    splitting above overflows for huge x)."""
    x = np.minimum(x, 28.0)
    out = np.empty_like(x)
    middle = x <= 4
    xm = x[middle]
    out[middle] = _times_exp_minus_square(_rational(_ERFC_MIDDLE, xm), xm)
    xl = x[~middle]
    z = 1 / (xl * xl)
    out[~middle] = _times_exp_minus_square((1 / _SQRT_PI - z * _rational(_ERFC_LARGE, z)) / xl, xl)
    return out


def _by_size(x, small, tail, chunk=1 << 15):
    """``small(x)`` where |x| <= 0.46875, ``tail(x)`` elsewhere (NaN included), flattened, in chunks that stay in
    the cache through the functions' few dozen passes (a pass over a big array is bound by memory)."""
    flat = x.ravel()
    out = np.empty_like(flat)
    for start in range(0, flat.size, chunk):
        part, into = flat[start:start + chunk], out[start:start + chunk]
        near = np.abs(part) <= _ERF_SPLIT
        into[near] = small(part[near])
        into[~near] = tail(part[~near])
    return out.reshape(x.shape)


@_quiet
def erf64(x):
    """erf of a float64 array (float64, any shape), within 6e-16 relative of math.erf (the rounding in the
    rational functions' evaluation: a few ulp); erf(+-0) = +-0, erf(+-inf) = +-1, NaN stays NaN."""
    def tail(y):
        return np.copysign(1 - _erfc_tail(np.abs(y)), y)

    return _by_size(x, lambda y: y * _rational(_ERF_SMALL, y * y), tail)


@_quiet
def erfc64(x):
    """erfc of a float64 array (float64, any shape), computed directly (1 - erf would lose the right tail): within
    1e-15 relative of math.erfc (a few ulp) down to the smallest normal (x ~ 26.5), a subnormal step or two
    beyond; 0 from x ~ 27.3 and at +inf, 2 at -inf, NaN stays NaN."""
    def tail(y):
        out = _erfc_tail(np.abs(y))
        return np.where(y < 0, 2 - out, out)

    return _by_size(x, lambda y: 1 - y * _rational(_ERF_SMALL, y * y), tail)


def _erf_series(x):
    """sum_n>=0 (2x**2)**n / (2n+1)!! (erf(x) = 2x/sqrt(pi) e**-x**2 times it), for x**2 <= 1.5."""
    two_x2 = 2 * x * x
    term, total = np.ones_like(x), np.ones_like(x)
    for n in range(1, 45):
        term *= two_x2 / (2 * n + 1)
        total += term
    return total


def _erfcx_nonneg(x):
    """exp(x**2) erfc(x) for x >= 0 (float64): below x**2 = 1.5, exp(x**2) - (2x/sqrt(pi)) sum (2x**2)**n /
    (2n+1)!!; above, x/sqrt(pi) times Legendre's continued fraction of Gamma(1/2, x**2) (the exponentials
    cancel); past 1e8, 1 / (x sqrt(pi)). NaN stays NaN."""
    out = 1 / (_SQRT_PI * x)
    near = x * x < 1.5
    xs = x[near]
    out[near] = np.exp(xs * xs) - 2 * xs / _SQRT_PI * _erf_series(xs)
    mid = ~near & (x < 1e8)
    xm = x[mid]
    out[mid] = xm / _SQRT_PI * _gamma_continued(np.float64(0.5), xm * xm)
    return out


def _erfcx64(x):
    pos = _erfcx_nonneg(np.abs(x))
    return np.where(x < 0, 2 * np.exp(x * x) - pos, pos)  # erfc(-x) = 2 - erfc(x)


@_quiet
def erfcx(x):
    """The scaled complementary error function exp(x**2) erfc(x) (inf for x below ~ -26.6)."""
    if _xp(x) is not np:
        return _on_device("erfcx", x)
    return _in_float64(_erfcx64, x)


def _log_ndtr64(x):
    # below 0: log(erfcx(-x / sqrt 2) / 2) - x**2 / 2 (no underflow); above: log1p(-erfc(x / sqrt 2) / 2)
    u = np.abs(x) / math.sqrt(2)
    scaled = _erfcx_nonneg(u)
    out = np.where(x < 0, np.log(scaled / 2) - u * u, np.log1p(-scaled * np.exp(-u * u) / 2))
    return np.where(x == -np.inf, -np.inf, out)


@_quiet
def log_ndtr(x):
    """log of the standard normal CDF, accurate far into both tails."""
    if _xp(x) is not np:
        return _on_device("log_ndtr", x)
    return _in_float64(_log_ndtr64, x)


def _ndtri64(p):
    """Newton's method from Abramowitz and Stegun 26.2.23 (error < 4.5e-4), for q = min(p, 1 - p) (exact), the
    sign restored after: in the tails (q < 1/4) on log_ndtr(z) = log(q) (log_ndtr is concave: it converges from
    any start); in the middle on erf(z / sqrt 2) / 2 = q - 1/2 (exact), which keeps z's relative accuracy near
    p = 1/2."""
    inside = (p > 0) & (p < 1)
    q = np.where(inside, np.where(p < 0.5, p, 1 - p), 0.25)
    t = np.sqrt(-2 * np.log(q))
    z = -(t - (2.515517 + 0.802853 * t + 0.010328 * t * t) / (1 + 1.432788 * t + 0.189269 * t * t
                                                                + 0.001308 * t ** 3))
    tail = q < 0.25
    zt, log_q = z[tail], np.log(q[tail])
    for _ in range(4):  # the start's error 4.5e-4 squares each step
        log_cdf = _log_ndtr64(zt)
        zt -= (log_cdf - log_q) / np.exp(-zt * zt / 2 - log_cdf - _LOG_SQRT_2PI)  # over phi(z) / Phi(z)
    zc, excess = z[~tail], q[~tail] - 0.5
    for _ in range(4):
        u = zc / math.sqrt(2)
        zc -= (u / _SQRT_PI * np.exp(-u * u) * _erf_series(u) - excess) / np.exp(-u * u - _LOG_SQRT_2PI)
    z[tail], z[~tail] = zt, zc
    z = np.where(p < 0.5, z, -z)
    z = np.where(p == 0.5, 0.0, z)
    z = np.where(p == 0, -np.inf, np.where(p == 1, np.inf, z))
    return np.where(inside | (p == 0) | (p == 1), z, np.nan)


@_quiet
def ndtri(p):
    """The inverse of the standard normal CDF: -inf at 0, inf at 1, NaN outside [0, 1]."""
    if _xp(p) is not np:
        return _on_device("ndtri", p)
    return _in_float64(_ndtri64, p)


@_quiet
def entr(x):
    """-x log(x) for x > 0, 0 at 0, -inf below 0 (NaN stays NaN)."""
    xp = _xp(x)
    wide = x.astype(np.float32) if x.dtype in _HALF else x
    out = backend.where(wide > 0, -wide * xp.log(backend.where(wide > 0, wide, 1)),
                        backend.where(wide == 0, 0.0, -xp.inf))
    return backend.where(xp.isnan(wide), xp.nan, out).astype(x.dtype)
