"""minifused.distributions, the laws built on the first ones (HalfNormal, HalfCauchy, Chi2, StudentT, Pareto,
Weibull, Kumaraswamy, InverseGamma, Multinomial, NegativeBinomial, MixtureSameFamily, RelaxedBernoulli,
RelaxedOneHotCategorical, ContinuousBernoulli), the vector and functor transforms, biject_to / transform_to and
the KL pairs between laws: values against float64 NumPy closed forms (or quadrature, or exact sums), draws
against their moments and quantiles (fixed seeds, large n, 6-sigma bounds), gradients against finite
differences, and PyTorch's validation errors."""
import math

import numpy as np
import pytest

import minifused as mf
from minifused import distributions as D
from minifused.autograd import gradcheck
from minifused.distributions import constraints
from minifused.distributions.constraint_registry import ConstraintRegistry

EULER = 0.5772156649015329
_lgamma = np.vectorize(math.lgamma, otypes=[np.float64])
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _digamma(x, h=1e-5):  # central difference of math.lgamma: error ~1e-10
    return (_lgamma(x + h) - _lgamma(x - h)) / (2 * h)


def _lbeta(a, b):
    return _lgamma(a) + _lgamma(b) - _lgamma(a + b)


def T(a, **kw):
    return mf.tensor(np.asarray(a, dtype=np.float64), dtype=mf.float64, **kw)


def npy(t):
    return np.asarray(t.detach().numpy(), dtype=np.float64)


def close(t, ref, tol=1e-10):
    np.testing.assert_allclose(npy(t), np.asarray(ref, dtype=np.float64), rtol=tol, atol=tol)


def _simpson(y, t):
    h = t[1] - t[0]
    return h / 3 * (y[0] + y[-1] + 4 * y[1:-1:2].sum(0) + 2 * y[2:-1:2].sum(0))


# maps of an integration variable t onto a support, with dx/dt: the integrands then decay smoothly at both ends
_REAL = (lambda t: t, lambda t: np.ones_like(t), (-60.0, 60.0))
_POSITIVE = (np.exp, np.exp, (-90.0, 8.0))
_UNIT = (lambda t: 1 / (1 + np.exp(-t)), lambda t: np.exp(-t) / (1 + np.exp(-t)) ** 2, (-90.0, 90.0))


def _pareto_space(xm):
    return (lambda t: xm * np.exp(t), lambda t: xm * np.exp(t), (0.0, 40.0))


def _integrate(f, space, n=400_001):
    """int f(x) dx over ``space``'s support, by Simpson's rule in its variable t."""
    x_of_t, dxdt, (lo, hi) = space
    t = np.linspace(lo, hi, n)
    x = x_of_t(t)
    with np.errstate(all="ignore"):
        y = f(x) * dxdt(t)
    return _simpson(np.where(np.isfinite(y), y, 0.0), t)


# ---------------------------------------------------------------- float64 NumPy densities
def _normal_lp(x, m, s):
    return -0.5 * ((x - m) / s) ** 2 - np.log(s) - 0.5 * math.log(2 * math.pi)


def _laplace_lp(x, m, s):
    return -np.log(2 * s) - np.abs(x - m) / s


def _gumbel_lp(x, m, s):
    z = (x - m) / s
    return -np.log(s) - z - np.exp(-z)


def _exponential_lp(x, r):
    return np.log(r) - r * x


def _gamma_lp(x, a, r):
    return a * np.log(r) + (a - 1) * np.log(x) - r * x - _lgamma(a)


def _beta_lp(x, a, b):
    return (a - 1) * np.log(x) + (b - 1) * np.log1p(-x) - _lbeta(a, b)


def _pareto_lp(x, xm, alpha):
    return np.where(x >= xm, np.log(alpha) + alpha * np.log(xm) - (alpha + 1) * np.log(x), -np.inf)


def _cb_log_norm(lam):
    return np.log(2 * np.arctanh(1 - 2 * lam) / (1 - 2 * lam))


def _cb_lp(x, lam):
    return _cb_log_norm(lam) + x * np.log(lam) + (1 - x) * np.log1p(-lam)


def _student_lp(x, df, loc, scale):
    y = (x - loc) / scale
    return (_lgamma((df + 1) / 2) - _lgamma(df / 2) - 0.5 * np.log(df * math.pi) - np.log(scale)
            - (df + 1) / 2 * np.log1p(y * y / df))


def _log_binom(n, k):
    return _lgamma(n + 1) - _lgamma(k + 1) - _lgamma(n - k + 1)


# ---------------------------------------------------------------- values against closed forms
S3, X3 = np.array([0.5, 1.0, 2.0]), np.array([0.3, 1.2, 2.5])
A3, B3 = np.array([0.7, 1.5, 3.0]), np.array([0.6, 2.5, 4.0])
DF = np.array([0.8, 1.5, 7.0])
LOC3 = np.array([0.1, -1.0, 2.0])
U3 = np.array([0.2, 0.5, 0.9])
LAM3, V3 = np.array([0.2, 0.35, 0.9]), np.array([0.1, 0.5, 0.7])


def _weibull_refs(lam, k, x):
    z = x / lam
    return {"log_prob": np.log(k / lam) + (k - 1) * np.log(z) - z ** k, "cdf": -np.expm1(-z ** k),
            "mean": lam * np.exp(_lgamma(1 + 1 / k)),
            "variance": lam ** 2 * (np.exp(_lgamma(1 + 2 / k)) - np.exp(2 * _lgamma(1 + 1 / k))),
            "entropy": EULER * (1 - 1 / k) + np.log(lam / k) + 1,
            "mode": lam * np.where(k > 1, (np.maximum(k - 1, 0) / k) ** (1 / k), np.nan)}


def _kumaraswamy_refs(a, b, x):
    def moment(n):
        return b * np.exp(_lbeta(1 + n / a, b))
    return {"log_prob": np.log(a * b) + (a - 1) * np.log(x) + (b - 1) * np.log1p(-x ** a),
            "cdf": 1 - (1 - x ** a) ** b, "mean": moment(1), "variance": moment(2) - moment(1) ** 2,
            "entropy": (1 - 1 / b) + (1 - 1 / a) * (_digamma(b + 1) + EULER) - np.log(a * b),
            "mode": np.full(np.shape(a), np.nan)}  # (PyTorch's expression: NaN for every concentration, kept)


def _student_refs(df, loc, scale, x):
    return {"log_prob": _student_lp(x, df, loc, scale), "mode": loc,
            "mean": np.where(df > 1, loc, np.nan),
            "variance": np.where(df > 2, scale ** 2 * df / np.where(df > 2, df - 2, 1), np.where(df > 1, np.inf,
                                                                                                   np.nan)),
            "entropy": np.log(scale) + (df + 1) / 2 * (_digamma((df + 1) / 2) - _digamma(df / 2))
            + np.log(np.sqrt(df)) + _lbeta(df / 2, 0.5)}


# name: (distribution, value, {attribute: float64 reference}); log_prob and cdf are evaluated at the value
CLOSED_FORMS = {
    "HalfNormal": (lambda: D.HalfNormal(T(S3)), X3, {
        "log_prob": math.log(2) + _normal_lp(X3, 0, S3), "cdf": _erf(X3 / (S3 * math.sqrt(2))),
        "mean": S3 * math.sqrt(2 / math.pi), "variance": S3 ** 2 * (1 - 2 / math.pi), "mode": np.zeros(3),
        "entropy": 0.5 * np.log(math.pi * math.e * S3 ** 2 / 2)}),
    "HalfCauchy": (lambda: D.HalfCauchy(T(S3)), X3, {
        "log_prob": np.log(2 / (math.pi * S3)) - np.log1p((X3 / S3) ** 2), "cdf": 2 / math.pi * np.arctan(X3 / S3),
        "mean": np.full(3, np.inf), "variance": np.full(3, np.inf), "mode": np.zeros(3),
        "entropy": np.log(2 * math.pi * S3)}),
    "Chi2": (lambda: D.Chi2(T(A3 * 2)), X3, {
        "log_prob": (A3 - 1) * np.log(X3) - X3 / 2 - A3 * math.log(2) - _lgamma(A3), "mean": A3 * 2,
        "variance": A3 * 4, "mode": np.maximum(A3 * 2 - 2, 0),
        "entropy": A3 + math.log(2) + _lgamma(A3) + (1 - A3) * _digamma(A3)}),
    "StudentT": (lambda: D.StudentT(T(DF), T(LOC3), T(S3)), X3, _student_refs(DF, LOC3, S3, X3)),
    "StudentT_numbers": (lambda: D.StudentT(T(4.0)), X3, _student_refs(4.0, 0.0, 1.0, X3)),
    "Pareto": (lambda: D.Pareto(T(S3), T(A3 * 1.5)), X3 + 2, {
        "log_prob": _pareto_lp(X3 + 2, S3, A3 * 1.5), "cdf": 1 - (S3 / (X3 + 2)) ** (A3 * 1.5),
        "mean": np.where(A3 * 1.5 > 1, A3 * 1.5 * S3 / (A3 * 1.5 - 1), np.inf), "mode": S3,
        "variance": np.where(A3 * 1.5 > 2, S3 ** 2 * A3 * 1.5 / ((A3 * 1.5 - 1) ** 2 * (A3 * 1.5 - 2)), np.inf),
        "entropy": np.log(S3 / (A3 * 1.5)) + 1 + 1 / (A3 * 1.5)}),
    "Weibull": (lambda: D.Weibull(T(S3), T(A3)), X3, _weibull_refs(S3, A3, X3)),
    "Kumaraswamy": (lambda: D.Kumaraswamy(T(A3), T(B3)), U3, _kumaraswamy_refs(A3, B3, U3)),
    "InverseGamma": (lambda: D.InverseGamma(T(A3), T(B3)), X3, {
        "log_prob": A3 * np.log(B3) - _lgamma(A3) - (A3 + 1) * np.log(X3) - B3 / X3, "mode": B3 / (A3 + 1),
        "mean": np.where(A3 > 1, B3 / (A3 - 1), np.inf),
        "variance": np.where(A3 > 2, B3 ** 2 / ((A3 - 1) ** 2 * (A3 - 2)), np.inf),
        "entropy": A3 + np.log(B3) + _lgamma(A3) - (1 + A3) * _digamma(A3)}),
    "NegativeBinomial": (lambda: D.NegativeBinomial(T(A3), probs=T(U3)), np.array([0.0, 2.0, 5.0]), {
        "log_prob": _lgamma(np.array([0, 2, 5]) + A3) - _lgamma(np.array([1, 3, 6])) - _lgamma(A3)
        + np.array([0, 2, 5]) * np.log(U3) + A3 * np.log1p(-U3),
        "mean": A3 * U3 / (1 - U3), "variance": A3 * U3 / (1 - U3) ** 2,
        "mode": np.maximum(np.floor((A3 - 1) * U3 / (1 - U3)), 0)}),
    "ContinuousBernoulli": (lambda: D.ContinuousBernoulli(T(LAM3)), V3, {
        "log_prob": _cb_lp(V3, LAM3), "cdf": (LAM3 ** V3 * (1 - LAM3) ** (1 - V3) + LAM3 - 1) / (2 * LAM3 - 1)}),
}


@pytest.mark.parametrize("name", list(CLOSED_FORMS))
def test_values_match_closed_forms(name):
    make, value, refs = CLOSED_FORMS[name]
    d = make()
    for attr, ref in refs.items():
        got = getattr(d, attr)(T(value)) if attr in ("log_prob", "cdf") else getattr(d, attr)
        got = got() if attr == "entropy" else got
        close(got, ref, 1e-7)  # (the reference digamma: a finite difference)
        shape = np.broadcast_shapes(d.batch_shape, value.shape) if attr in ("log_prob", "cdf") else d.batch_shape
        assert got.dtype == mf.float64 and tuple(got.shape) == shape, (attr, got.dtype, got.shape)
    if "cdf" in refs:
        close(d.icdf(d.cdf(T(value))), value, 1e-9)
    if "variance" in refs:
        close(d.stddev, np.sqrt(refs["variance"]), 1e-7)


def test_continuous_bernoulli_against_quadrature():
    """Mean, variance and entropy against integrals of the density, the normalizer against 1, also within the
    Taylor region around 1/2 and when given logits."""
    lam = np.array([0.05, 0.3, 0.4995, 0.5, 0.8])
    for d in (D.ContinuousBernoulli(T(lam)), D.ContinuousBernoulli(logits=T(np.log(lam) - np.log1p(-lam)))):
        x = np.linspace(0.0, 1.0, 20_001)
        lp = npy(d.log_prob(T(np.repeat(x[:, None], 5, 1))))  # (20001, 5): each value against the batch
        np.testing.assert_allclose(_simpson(np.exp(lp), x), 1.0, rtol=1e-9)
        with np.errstate(invalid="ignore"):  # (0 / 0 at lambda = 1/2, where the density is 1)
            dens = np.where(np.abs(lam[:, None] - 0.5) < 1e-9, 1.0, np.exp(_cb_lp(x, lam[:, None])))
        mean = _simpson((x * dens).T, x)
        close(d.mean, mean, 1e-9)
        close(d.variance, _simpson(((x - mean[:, None]) ** 2 * dens).T, x), 1e-9)
        close(d.entropy(), -_simpson((dens * np.log(dens)).T, x), 1e-9)
        u = T(np.array([0.1, 0.3, 0.5, 0.7, 0.95]))
        close(d.cdf(d.icdf(u)), npy(u), 1e-9)
    assert D.ContinuousBernoulli(T([0.2])).support is constraints.unit_interval
    assert D.ContinuousBernoulli(0.3).batch_shape == ()


def test_multinomial_values():
    p = np.array([[0.2, 0.3, 0.5], [0.1, 0.6, 0.3]])
    for d in (D.Multinomial(5, probs=T(p * 3)), D.Multinomial(5, logits=T(np.log(p) - 1.0))):
        assert (d.batch_shape, d.event_shape) == ((2,), (3,))
        x = np.array([[1.0, 2.0, 2.0], [0.0, 5.0, 0.0]])
        ref = _lgamma(6) - _lgamma(x + 1).sum(-1) + (x * np.log(p)).sum(-1)
        close(d.log_prob(T(x)), ref)
        close(d.mean, 5 * p)
        close(d.variance, 5 * p * (1 - p))
        counts = np.array([(i, j, 5 - i - j) for i in range(6) for j in range(6 - i)], dtype=np.float64)
        lps = _lgamma(6) - _lgamma(counts + 1).sum(-1)[:, None] + (counts[:, None, :] * np.log(p)).sum(-1)
        close(d.entropy(), -(np.exp(lps) * lps).sum(0), 1e-12)  # every count vector summed
    # log_prob takes the count from the value, and a zero probability with zero count adds nothing
    d = D.Multinomial(probs=T([0.0, 0.4, 0.6]), validate_args=False)  # (the support: at most total_count=1)
    close(d.log_prob(T([0.0, 2.0, 1.0])), math.log(3) + 2 * math.log(0.4) + math.log(0.6))
    with pytest.raises(NotImplementedError, match="inhomogeneous total_count is not supported"):
        D.Multinomial(T([3.0]), probs=T([0.5, 0.5]))
    with pytest.raises(ValueError, match="Multinomial"):
        D.Multinomial(3, probs=T([0.5, 0.5])).log_prob(T([2.0, 2.0]))  # more than 3 counts


def test_mixture_same_family_values():
    w = np.array([[0.2, 0.8], [0.5, 0.5]])
    mu, sd = np.array([[0.0, 1.0], [2.0, -1.0]]), np.array([[1.0, 2.0], [0.5, 0.3]])
    d = D.MixtureSameFamily(D.Categorical(probs=T(w)), D.Normal(T(mu), T(sd)))
    assert (d.batch_shape, d.event_shape) == ((2,), ()) and not d.has_rsample
    x = np.array([[0.3, -0.2], [1.5, 2.5], [-1.0, 0.0]])
    dens = (w * np.exp(_normal_lp(x[..., None], mu, sd))).sum(-1)
    close(d.log_prob(T(x)), np.log(dens))
    mean = (w * mu).sum(-1)
    close(d.mean, mean)
    close(d.variance, (w * (sd ** 2 + mu ** 2)).sum(-1) - mean ** 2)
    close(d.cdf(T(x)), (w * 0.5 * (1 + _erf((x[..., None] - mu) / (sd * math.sqrt(2))))).sum(-1))
    # vector components, one set of weights for the batch: log_prob sums over the event
    v = D.MixtureSameFamily(D.Categorical(probs=T([0.3, 0.7])), D.Independent(D.Normal(T(mu), T(sd)), 1))
    assert (v.batch_shape, v.event_shape) == ((), (2,))
    y = np.array([[0.3, -0.2], [1.0, 1.0]])
    comp = _normal_lp(y[:, None, :], mu, sd).sum(-1)
    close(v.log_prob(T(y)), np.log((np.array([0.3, 0.7]) * np.exp(comp)).sum(-1)))
    close(v.mean, 0.3 * mu[0] + 0.7 * mu[1])
    assert repr(v.support) == "MixtureSameFamilyConstraint(IndependentConstraint(Real(), 1))"
    with pytest.raises(ValueError, match="needs to be an  instance of torch.distributions.Categorical"):
        D.MixtureSameFamily(D.Normal(0.0, 1.0), D.Normal(T([0.0, 1.0]), T([1.0, 1.0])))
    with pytest.raises(ValueError, match=r"`mixture_distribution component` \(3\) does not equal"):
        D.MixtureSameFamily(D.Categorical(T([0.3, 0.3, 0.4])), D.Normal(T([0.0, 1.0]), T([1.0, 1.0])))
    with pytest.raises(ValueError, match="is not compatible with `component_distribution.batch_shape`"):
        D.MixtureSameFamily(D.Categorical(T([[0.5, 0.5]] * 3)), D.Normal(T([[0.0, 1.0]] * 2), T([[1.0, 1.0]] * 2)))
    with pytest.raises(ValueError, match="support"):
        D.MixtureSameFamily(D.Categorical(T([0.5, 0.5])), D.HalfNormal(T([1.0, 2.0]))).log_prob(T(-1.0))


def test_relaxed_laws_values():
    tau, p = 0.7, np.array([0.2, 0.5, 0.9])
    y = np.array([0.1, 0.5, 0.7])
    alpha = p / (1 - p)  # Maddison et al.'s binary Concrete density
    ref = (math.log(tau) + np.log(alpha) - (tau + 1) * (np.log(y) + np.log1p(-y))
           - 2 * np.log(alpha * y ** -tau + (1 - y) ** -tau))
    for d in (D.RelaxedBernoulli(T(tau), probs=T(p)), D.RelaxedBernoulli(T(tau), logits=T(np.log(alpha)))):
        close(d.log_prob(T(y)), ref)
        close(d.temperature, tau)
        close(d.probs, p)
        assert d.has_rsample and d.support is constraints.unit_interval and d.batch_shape == (3,)
    pi = np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
    ys = np.array([[0.1, 0.2, 0.7], [0.3, 0.3, 0.4]])
    k = 3  # the Concrete density on the simplex: (k-1)! tau^(k-1) prod(pi y^(-tau-1)) / sum(pi y^-tau)^k
    ref = (math.lgamma(k) + (k - 1) * math.log(tau) + (np.log(pi) - (tau + 1) * np.log(ys)).sum(-1)
           - k * np.log((pi * ys ** -tau).sum(-1)))
    for d in (D.RelaxedOneHotCategorical(T(tau), probs=T(pi * 2)), D.RelaxedOneHotCategorical(T(tau),
                                                                                               logits=T(np.log(pi)))):
        assert (d.batch_shape, d.event_shape) == ((2,), (3,)) and d.support is constraints.simplex
        close(d.log_prob(T(ys)), ref)
        close(d.probs, pi)


def test_special_values_and_shapes():
    # a negative value is impossible for the half laws (no validation: -inf rather than an error)
    assert D.HalfNormal(T(1.0), validate_args=False).log_prob(T(-1.0)).item() == -math.inf
    assert D.HalfCauchy(T(1.0), validate_args=False).log_prob(T(-1.0)).item() == -math.inf
    # a draw shape, the number parameters, the batch of broadcast parameters
    for d, batch in ((D.HalfNormal(2.0), ()), (D.HalfCauchy(T([1.0, 2.0])), (2,)), (D.Chi2(3.0), ()),
                     (D.StudentT(T([3.0]), T([[0.0], [1.0]])), (2, 1)), (D.Pareto(1.0, T([2.0, 3.0])), (2,)),
                     (D.Weibull(T([1.0, 2.0]), 0.5), (2,)), (D.Kumaraswamy(2.0, 3.0), ()),
                     (D.InverseGamma(T([2.0]), 3.0), (1,)), (D.NegativeBinomial(3.0, T([0.2, 0.4])), (2,)),
                     (D.NegativeBinomial(3.0, 0.2), ()), (D.ContinuousBernoulli(logits=T([0.3, -1.0])), (2,)),
                     (D.RelaxedBernoulli(T(0.5), 0.3), ()), (D.Multinomial(4, T([0.3, 0.7])), ())):
        assert d.batch_shape == batch, (type(d).__name__, d.batch_shape)
        assert tuple(d.sample((4, 2)).shape) == (4, 2) + batch + d.event_shape, type(d).__name__
        e = d.expand((3,) + batch)
        assert e.batch_shape == (3,) + batch and tuple(e.sample().shape) == (3,) + batch + d.event_shape
        assert type(e) is type(d) and e._validate_args == d._validate_args
    assert D.Chi2(T([2.0, 3.0])).expand((2, 2)).df.tolist() == [[2.0, 3.0]] * 2
    assert D.StudentT(T([2.0, 3.0])).expand((2, 2)).mean.shape == (2, 2)
    assert D.Multinomial(4, T([0.3, 0.7])).expand((2,)).entropy().shape == (2,)
    assert D.Multinomial(4, T([0.3, 0.7])).sample((5,)).sum(-1).tolist() == [4.0] * 5
    assert D.Multinomial(0, T([0.3, 0.7])).sample((2,)).tolist() == [[0.0, 0.0]] * 2
    assert D.Multinomial(4, T([0.3, 0.7])).sample().dtype == mf.float64
    assert D.NegativeBinomial(T([0.0]), T([0.5])).log_prob(T([0.0])).item() == 0.0  # no trials: 0 surely
    assert isinstance(D.Chi2(2.0), D.Gamma) and D.Chi2(T([4.0])).concentration.item() == 2.0
    assert D.Pareto(T([2.0]), T([3.0])).support.lower_bound.tolist() == [2.0]
    assert D.Pareto(2.0, 3.0).has_rsample and D.Weibull(2.0, 3.0).has_rsample


def test_validation_errors_are_pytorchs():
    with pytest.raises(ValueError, match=r"Expected parameter scale \(Tensor of shape \(2,\)\) of distribution "
                                         r"HalfNormal\(\) to satisfy the constraint GreaterThan\(lower_bound=0.0\)"):
        D.HalfNormal(T([1.0, -1.0]))
    with pytest.raises(ValueError, match=r"Expected parameter df .* of distribution Chi2"):
        D.Chi2(T([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"Expected parameter scale .* StudentT\(df: \(2,\), loc: \(2,\), "
                                         r"scale: \(2,\)\) to satisfy the constraint GreaterThan"):
        D.StudentT(T([1.0, 1.0]), T([0.0, 1.0]), T([-1.0, 1.0]))
    with pytest.raises(ValueError, match=r"Expected parameter rate .* of distribution Exponential"):
        D.Pareto(T([1.0, 1.0]), T([-1.0, 1.0]))  # (the base law checks first, as PyTorch's)
    with pytest.raises(ValueError, match=r"the support \(GreaterThanEq\(lower_bound=.*\)\) of the distribution "
                                         r"Pareto"):
        D.Pareto(T([1.0, 1.0]), T([1.0, 1.0])).log_prob(T([0.5, 2.0]))
    with pytest.raises(ValueError, match=r"Expected parameter concentration0 .* of distribution Kumaraswamy"):
        D.Kumaraswamy(T([1.0, 1.0]), T([-1.0, 1.0]))
    with pytest.raises(ValueError, match=r"Expected parameter rate .* of distribution Gamma"):
        D.InverseGamma(T([1.0, 1.0]), T([-1.0, 1.0]))
    with pytest.raises(ValueError, match=r"constraint HalfOpenInterval\(lower_bound=0.0, upper_bound=1.0\)"):
        D.NegativeBinomial(T([1.0, 1.0]), T([1.0, 0.5]))
    with pytest.raises(ValueError, match=r"constraint GreaterThanEq\(lower_bound=0\)"):
        D.NegativeBinomial(T([-1.0, 1.0]), T([0.5, 0.5]))
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified, but not both."):
        D.NegativeBinomial(T([1.0]))
    with pytest.raises(ValueError, match=r"IntegerGreaterThan\(lower_bound=0\)"):
        D.NegativeBinomial(T([1.0]), T([0.5])).log_prob(T([0.5]))
    with pytest.raises(ValueError, match="The parameter probs has invalid values"):
        D.ContinuousBernoulli(T([1.5]), validate_args=True)
    # without validate_args the probabilities are clamped before the check, as PyTorch's: no error
    assert D.ContinuousBernoulli(T([1.5])).probs.item() == 1 - np.finfo(np.float64).eps
    with pytest.raises(ValueError, match="constraint Simplex"):
        D.RelaxedOneHotCategorical(T(0.5), T([0.5, -0.5]))
    with pytest.raises(ValueError, match=r"constraint Interval\(lower_bound=0.0, upper_bound=1.0\)"):
        D.RelaxedBernoulli(T(0.5), T([1.5]))


# ---------------------------------------------------------------- draws: moments, quantiles, seeds
N = 200_000


def _within(estimate, truth, sigma, what):
    assert abs(estimate - truth) <= 6 * sigma + 1e-12, f"{what}: {estimate} vs {truth} (6 sigma = {6 * sigma})"


def _check_moments(x, mean, var, what):
    n = x.shape[0]
    _within(x.mean(), mean, math.sqrt(var / n), f"{what} mean")
    m4 = ((x - x.mean()) ** 4).mean()
    _within(x.var(), var, math.sqrt(max(m4 - x.var() ** 2, 0) / n), f"{what} variance")


MOMENTS = {  # float64 scalar parameters, moments up to the fourth finite (so the variance's error is known)
    "HalfNormal": lambda: D.HalfNormal(T(1.5)), "Chi2": lambda: D.Chi2(T(3.0)), "Chi2_small": lambda: D.Chi2(T(0.6)),
    "StudentT": lambda: D.StudentT(T(9.0), T(1.0), T(2.0)), "Pareto": lambda: D.Pareto(T(2.0), T(9.0)),
    "Weibull": lambda: D.Weibull(T(2.0), T(0.8)), "Kumaraswamy": lambda: D.Kumaraswamy(T(0.6), T(2.5)),
    "InverseGamma": lambda: D.InverseGamma(T(9.0), T(2.0)),
    "NegativeBinomial": lambda: D.NegativeBinomial(T(2.5), probs=T(0.4)),
    "NegativeBinomial_logits": lambda: D.NegativeBinomial(T(7.0), logits=T(-1.0)),
    "ContinuousBernoulli": lambda: D.ContinuousBernoulli(T(0.2)),
    "ContinuousBernoulli_half": lambda: D.ContinuousBernoulli(T(0.5)),
    "Mixture": lambda: D.MixtureSameFamily(D.Categorical(T([0.3, 0.7])), D.Normal(T([-1.0, 2.0]), T([0.5, 1.0]))),
}


@pytest.mark.parametrize("name", list(MOMENTS))
def test_sample_moments(name):
    d = MOMENTS[name]()
    mf.manual_seed(1)
    x = npy(d.sample((N,)))
    assert x.shape == (N,)
    _check_moments(x, float(d.mean), float(d.variance), name)
    assert bool(d.support.check(T(x)).all())
    if d.support.is_discrete:  # frequencies against the masses
        for k in range(3):
            pk = math.exp(float(d.log_prob(T(float(k)))))
            _within((x == k).mean(), pk, math.sqrt(pk * (1 - pk) / N), f"P(X = {k})")
    elif name not in ("StudentT", "InverseGamma", "Chi2", "Chi2_small", "Mixture"):  # those with cdf
        for v in np.quantile(x, [0.1, 0.5, 0.9]):  # the cdf at the empirical quantiles
            q = float(d.cdf(T(v)))
            _within(q, (x <= v).mean(), math.sqrt(q * (1 - q) / N), "cdf")


def test_heavy_tailed_draws_quantiles():
    """No finite moments: the fraction of draws below each quantile (Binomial(N, q) / N) instead."""
    checks = {"HalfCauchy": (D.HalfCauchy(T(2.0)), lambda q: 2.0 * math.tan(math.pi * q / 2)),
              "StudentT_1": (D.StudentT(T(1.0), T(0.5), T(2.0)), lambda q: 0.5 + 2.0 * math.tan(math.pi * (q - 0.5))),
              "Pareto": (D.Pareto(T(2.0), T(0.8)), lambda q: 2.0 * (1 - q) ** (-1 / 0.8))}
    for name, (d, quantile) in checks.items():
        mf.manual_seed(2)
        x = npy(d.sample((N,)))
        for q in (0.1, 0.5, 0.9):
            _within((x <= quantile(q)).mean(), q, math.sqrt(q * (1 - q) / N), f"{name} quantile {q}")


def test_relaxed_draws():
    # Y = sigmoid((L + logit p) / tau) for L logistic: P(Y <= y) = sigmoid(tau logit(y) - logit(p))
    d = D.RelaxedBernoulli(T(0.6), probs=T(0.3))
    mf.manual_seed(3)
    x = npy(d.sample((N,)))
    assert ((x > 0) & (x < 1)).all()
    for y in (0.1, 0.5, 0.9):
        q = 1 / (1 + math.exp(-(0.6 * math.log(y / (1 - y)) - math.log(0.3 / 0.7))))
        _within((x <= y).mean(), q, math.sqrt(q * (1 - q) / N), "relaxed Bernoulli cdf")
    # the Gumbel-max trick: the largest coordinate of a relaxed one-hot draw is categorical(probs)
    pi = np.array([0.2, 0.3, 0.5])
    mf.manual_seed(4)
    z = npy(D.RelaxedOneHotCategorical(T(0.5), probs=T(pi)).sample((N,)))
    np.testing.assert_allclose(z.sum(-1), 1.0, rtol=1e-12)
    freq = np.bincount(z.argmax(-1), minlength=3) / N
    for f, p in zip(freq, pi):
        _within(f, p, math.sqrt(p * (1 - p) / N), "relaxed one-hot argmax")


def test_multinomial_draws():
    p = np.array([0.2, 0.3, 0.5])
    mf.manual_seed(5)
    x = npy(D.Multinomial(6, probs=T(p)).sample((N // 4,)))
    n = x.shape[0]
    assert (x.sum(-1) == 6).all()
    for i in range(3):
        _check_moments(x[:, i], 6 * p[i], 6 * p[i] * (1 - p[i]), f"count {i}")
    c01 = ((x[:, 0] - x[:, 0].mean()) * (x[:, 1] - x[:, 1].mean())).mean()
    _within(c01, -6 * p[0] * p[1], math.sqrt(np.var((x[:, 0] - 6 * p[0]) * (x[:, 1] - 6 * p[1])) / n), "covariance")


def test_draws_repeat_under_a_seed_and_rsample_carries_gradients():
    s = T([1.5, 2.0], requires_grad=True)
    for make in (lambda: D.HalfNormal(s), lambda: D.StudentT(T([3.0, 4.0]), 0.0, s), lambda: D.Pareto(s, 3.0),
                 lambda: D.Weibull(s, 1.5), lambda: D.Kumaraswamy(s, 2.0), lambda: D.InverseGamma(2.0, s),
                 lambda: D.ContinuousBernoulli(logits=s), lambda: D.RelaxedBernoulli(T(0.5), logits=s),
                 lambda: D.RelaxedOneHotCategorical(T(0.5), logits=s)):
        d = make()
        assert d.has_rsample and d.rsample().requires_grad and not d.sample().requires_grad
        mf.manual_seed(11)
        a = make().sample((5,))
        mf.manual_seed(11)
        np.testing.assert_array_equal(a.numpy(), make().sample((5,)).numpy())
    for make in (lambda: D.NegativeBinomial(3.0, T([0.3])), lambda: D.Multinomial(3, T([0.3, 0.7])),
                 lambda: D.MixtureSameFamily(D.Categorical(T([0.3, 0.7])), D.Normal(T([0.0, 1.0]), 1.0))):
        mf.manual_seed(12)
        a = make().sample((5,))
        mf.manual_seed(12)
        np.testing.assert_array_equal(a.numpy(), make().sample((5,)).numpy())
        assert not make().has_rsample


# ---------------------------------------------------------------- gradients
def P(*shape, low=None, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape)
    return T(np.abs(a) + low if low is not None else a, requires_grad=True)


def _seeded(fn):
    def run(*args):
        mf.manual_seed(7)  # the same noise at every evaluation: rsample is then a smooth map of the parameters
        return fn(*args)
    return run


VX, VP, VU = T(X3), T(X3 + 2), T(U3)


def _all(d, value, *attrs):
    """log_prob at ``value`` and the other ``attrs`` of ``d``, flattened into one vector."""
    outs = [d.log_prob(value)] + [getattr(d, a)() if a == "entropy" else getattr(d, a) for a in attrs]
    return mf.cat([o.reshape(-1) for o in outs])


GRADIENTS = {
    "HalfNormal": (lambda s: _all(D.HalfNormal(s), VX, "entropy", "mean", "variance") + D.HalfNormal(s).cdf(VX).sum(),
                   (P(3, low=0.5),)),
    "HalfCauchy": (lambda s: _all(D.HalfCauchy(s), VX, "entropy") + D.HalfCauchy(s).cdf(VX).sum(), (P(3, low=0.5),)),
    "Chi2": (lambda k: _all(D.Chi2(k), VX, "entropy", "mean"), (P(3, low=0.5),)),
    "StudentT": (lambda df, m, s: _all(D.StudentT(df, m, s), VX, "entropy", "variance", "mean"),
                 (P(3, low=2.5), P(3), P(3, low=0.5))),
    "Pareto": (lambda s, a: _all(D.Pareto(s, a), VP, "entropy", "mean", "variance"), (P(3, low=0.2), P(3, low=2.5))),
    "Weibull": (lambda s, k: _all(D.Weibull(s, k), VX, "entropy", "mean", "variance", "mode"),
                (P(3, low=0.5), P(3, low=1.2))),
    "Kumaraswamy": (lambda a, b: _all(D.Kumaraswamy(a, b), VU, "entropy", "mean", "variance"),
                    (P(3, low=1.2), P(3, low=1.2, seed=1))),
    "InverseGamma": (lambda a, b: _all(D.InverseGamma(a, b), VX, "entropy", "mean", "variance"),
                     (P(3, low=2.5), P(3, low=0.5))),
    "NegativeBinomial": (lambda r, z: _all(D.NegativeBinomial(r, logits=z), T([0.0, 2.0, 5.0]), "mean", "variance"),
                         (P(3, low=0.5), P(3))),
    "Multinomial": (lambda z: _all(D.Multinomial(4, logits=z), T([[1.0, 3.0, 0.0], [2.0, 1.0, 1.0]]), "entropy",
                                   "variance"), (P(2, 3),)),
    "ContinuousBernoulli": (lambda z: _all(D.ContinuousBernoulli(logits=z), T([0.1, 0.5, 0.7]), "entropy", "mean",
                                           "variance") + D.ContinuousBernoulli(logits=z).cdf(T([0.1, 0.5, 0.7])).sum(),
                            (T([-2.0, 0.7, 3.0], requires_grad=True),)),
    "RelaxedBernoulli": (lambda t, z: D.RelaxedBernoulli(t, logits=z).log_prob(VU), (P(1, low=0.3), P(3))),
    "RelaxedOneHotCategorical": (lambda t, z: D.RelaxedOneHotCategorical(t, logits=z).log_prob(
        T([[0.1, 0.2, 0.7], [0.3, 0.3, 0.4]])), (P(1, low=0.3), P(2, 3))),
    "MixtureSameFamily": (lambda w, m, s: _all(D.MixtureSameFamily(D.Categorical(logits=w), D.Normal(m, s)),
                                               T([[0.3], [-0.5]]), "mean", "variance"),
                          (P(2), P(2), P(2, low=0.5))),
    "rsample_StudentT": (_seeded(lambda m, s: D.StudentT(T([3.0, 6.0, 9.0]), m, s).rsample((2,))),
                         (P(3), P(3, low=0.5))),
    "rsample_HalfNormal": (_seeded(lambda s: D.HalfNormal(s).rsample((2,))), (P(3, low=0.5),)),
    "rsample_Pareto": (_seeded(lambda s, a: D.Pareto(s, a).rsample((2,))), (P(3, low=0.5), P(3, low=1.0))),
    "rsample_Weibull": (_seeded(lambda s, k: D.Weibull(s, k).rsample((2,))), (P(3, low=0.5), P(3, low=1.0))),
    "rsample_Kumaraswamy": (_seeded(lambda a, b: D.Kumaraswamy(a, b).rsample((2,))), (P(3, low=0.5), P(3, low=1.0))),
    "rsample_InverseGamma_rate": (_seeded(lambda b: D.InverseGamma(T([0.5, 2.0, 5.0]), b).rsample((2,))),
                                  (P(3, low=0.5),)),
    "rsample_ContinuousBernoulli": (_seeded(lambda z: D.ContinuousBernoulli(logits=z).rsample((2,))),
                                    (T([-2.0, 0.7, 3.0], requires_grad=True),)),
    "rsample_RelaxedBernoulli": (_seeded(lambda t, z: D.RelaxedBernoulli(t, logits=z).rsample((2,))),
                                 (P(1, low=0.3), P(3))),
    "rsample_RelaxedOneHotCategorical": (_seeded(lambda t, z: D.RelaxedOneHotCategorical(t, logits=z).rsample((2,))),
                                         (P(1, low=0.3), P(2, 3))),
    "kl_Pareto": (lambda a, b: D.kl_divergence(D.Pareto(T(1.0), a), D.Pareto(T(0.5), b)),
                  (P(3, low=0.5), P(3, low=0.5, seed=1))),
    "kl_HalfNormal": (lambda a, b: D.kl_divergence(D.HalfNormal(a), D.HalfNormal(b)),
                      (P(3, low=0.5), P(3, low=0.5, seed=1))),
    "kl_ContinuousBernoulli": (lambda a, b: D.kl_divergence(D.ContinuousBernoulli(logits=a),
                                                            D.ContinuousBernoulli(logits=b)), (P(3), P(3, seed=1))),
    "kl_Gamma_Normal": (lambda a, b, m: D.kl_divergence(D.Gamma(a, b), D.Normal(m, b)),
                        (P(3, low=0.5), P(3, low=0.5, seed=1), P(3))),
    "kl_Binomial": (lambda a, b: D.kl_divergence(D.Binomial(5, logits=a), D.Binomial(5, logits=b)),
                    (P(3), P(3, seed=1))),
}


@pytest.mark.parametrize("name", list(GRADIENTS))
def test_gradients_match_finite_differences(name):
    fn, args = GRADIENTS[name]
    assert gradcheck(fn, args, atol=1e-6, rtol=1e-5)


def test_where_masked_moments_have_finite_gradients():
    """The undefined / infinite branches of StudentT's variance and mean carry zero gradients, never NaN."""
    df = T([0.5, 1.5, 2.0, 4.0], requires_grad=True)
    scale = T([1.0, 1.0, 1.0, 2.0], requires_grad=True)
    d = D.StudentT(df, 0.0, scale)
    close(d.variance, [np.nan, np.inf, np.inf, 8.0])
    d.variance[3].backward()
    close(df.grad, [0.0, 0.0, 0.0, -4 * 2 / 4])  # d/ddf s^2 df / (df - 2) = -2 s^2 / (df - 2)^2
    close(scale.grad, [0.0, 0.0, 0.0, 2 * 2 * 4 / 2])


# ---------------------------------------------------------------- KL divergences
def _kl_quad(lp, lq, space):
    return _integrate(lambda x: np.exp(lp(x)) * (lp(x) - lq(x)), space)


def _shifted(space, lo, scale=1.0):
    """``space`` moved to start at ``lo`` (scaled): for laws on [lo, inf) or a scaled real line."""
    x_of_t, dxdt, rng = space
    return (lambda t: lo + scale * x_of_t(t), lambda t: scale * dxdt(t), rng)


def _uniform_space(lo, hi):
    return (lambda t: lo + (hi - lo) * t, lambda t: np.full_like(t, hi - lo), (0.0, 1.0))


def _uniform_lp(lo, hi):
    return lambda x: np.where((x >= lo) & (x <= hi), -np.log(hi - lo), -np.inf)


KL_PAIRS = {  # name: (p, q, log p, log q, the space p lives on)
    "HalfNormal_HalfNormal": (D.HalfNormal(T(1.5)), D.HalfNormal(T(0.7)),
                              lambda x: math.log(2) + _normal_lp(x, 0, 1.5),
                              lambda x: math.log(2) + _normal_lp(x, 0, 0.7), _POSITIVE),
    "Pareto_Pareto": (D.Pareto(T(2.0), T(3.0)), D.Pareto(T(1.5), T(1.2)), lambda x: _pareto_lp(x, 2.0, 3.0),
                      lambda x: _pareto_lp(x, 1.5, 1.2), _pareto_space(2.0)),
    "Pareto_Exponential": (D.Pareto(T(2.0), T(3.0)), D.Exponential(T(0.7)), lambda x: _pareto_lp(x, 2.0, 3.0),
                           lambda x: _exponential_lp(x, 0.7), _pareto_space(2.0)),
    "Pareto_Gamma": (D.Pareto(T(2.0), T(3.0)), D.Gamma(T(2.5), T(0.7)), lambda x: _pareto_lp(x, 2.0, 3.0),
                     lambda x: _gamma_lp(x, 2.5, 0.7), _pareto_space(2.0)),
    "Pareto_Normal": (D.Pareto(T(2.0), T(4.0)), D.Normal(T(1.0), T(3.0)), lambda x: _pareto_lp(x, 2.0, 4.0),
                      lambda x: _normal_lp(x, 1.0, 3.0), _pareto_space(2.0)),
    "ContinuousBernoulli_ContinuousBernoulli": (D.ContinuousBernoulli(T(0.2)), D.ContinuousBernoulli(T(0.7)),
                                                lambda x: _cb_lp(x, 0.2), lambda x: _cb_lp(x, 0.7), _UNIT),
    "ContinuousBernoulli_Exponential": (D.ContinuousBernoulli(T(0.2)), D.Exponential(T(1.7)), lambda x: _cb_lp(x, 0.2),
                                        lambda x: _exponential_lp(x, 1.7), _UNIT),
    "ContinuousBernoulli_Normal": (D.ContinuousBernoulli(T(0.8)), D.Normal(T(0.3), T(0.6)), lambda x: _cb_lp(x, 0.8),
                                   lambda x: _normal_lp(x, 0.3, 0.6), _UNIT),
    "Beta_ContinuousBernoulli": (D.Beta(T(0.6), T(2.0)), D.ContinuousBernoulli(T(0.3)),
                                 lambda x: _beta_lp(x, 0.6, 2.0), lambda x: _cb_lp(x, 0.3), _UNIT),
    "Uniform_ContinuousBernoulli": (D.Uniform(T(0.2), T(0.7)), D.ContinuousBernoulli(T(0.3)), _uniform_lp(0.2, 0.7),
                                    lambda x: _cb_lp(x, 0.3), _uniform_space(0.2, 0.7)),
    "Uniform_Pareto": (D.Uniform(T(2.5), T(4.0)), D.Pareto(T(2.0), T(1.5)), _uniform_lp(2.5, 4.0),
                       lambda x: _pareto_lp(x, 2.0, 1.5), _uniform_space(2.5, 4.0)),
    "Beta_Exponential": (D.Beta(T(0.6), T(2.0)), D.Exponential(T(1.7)), lambda x: _beta_lp(x, 0.6, 2.0),
                         lambda x: _exponential_lp(x, 1.7), _UNIT),
    "Beta_Gamma": (D.Beta(T(0.6), T(2.0)), D.Gamma(T(1.5), T(2.0)), lambda x: _beta_lp(x, 0.6, 2.0),
                   lambda x: _gamma_lp(x, 1.5, 2.0), _UNIT),
    "Beta_Normal": (D.Beta(T(2.6), T(2.0)), D.Normal(T(0.3), T(0.6)), lambda x: _beta_lp(x, 2.6, 2.0),
                    lambda x: _normal_lp(x, 0.3, 0.6), _UNIT),
    "Beta_Uniform": (D.Beta(T(2.6), T(2.0)), D.Uniform(T(-0.5), T(1.5)), lambda x: _beta_lp(x, 2.6, 2.0),
                     _uniform_lp(-0.5, 1.5), _UNIT),
    "Exponential_Gamma": (D.Exponential(T(1.3)), D.Gamma(T(2.5), T(0.7)), lambda x: _exponential_lp(x, 1.3),
                          lambda x: _gamma_lp(x, 2.5, 0.7), _POSITIVE),
    "Exponential_Gumbel": (D.Exponential(T(1.3)), D.Gumbel(T(0.5), T(2.0)), lambda x: _exponential_lp(x, 1.3),
                           lambda x: _gumbel_lp(x, 0.5, 2.0), _POSITIVE),
    "Exponential_Normal": (D.Exponential(T(1.3)), D.Normal(T(0.5), T(2.0)), lambda x: _exponential_lp(x, 1.3),
                           lambda x: _normal_lp(x, 0.5, 2.0), _POSITIVE),
    "Gamma_Exponential": (D.Gamma(T(0.6), T(1.5)), D.Exponential(T(0.8)), lambda x: _gamma_lp(x, 0.6, 1.5),
                          lambda x: _exponential_lp(x, 0.8), _POSITIVE),
    "Gamma_Gumbel": (D.Gamma(T(2.6), T(1.5)), D.Gumbel(T(0.5), T(2.0)), lambda x: _gamma_lp(x, 2.6, 1.5),
                     lambda x: _gumbel_lp(x, 0.5, 2.0), _POSITIVE),
    "Gamma_Normal": (D.Gamma(T(2.6), T(1.5)), D.Normal(T(0.5), T(2.0)), lambda x: _gamma_lp(x, 2.6, 1.5),
                     lambda x: _normal_lp(x, 0.5, 2.0), _POSITIVE),
    "Chi2_Normal": (D.Chi2(T(3.0)), D.Normal(T(0.5), T(2.0)), lambda x: _gamma_lp(x, 1.5, 0.5),
                    lambda x: _normal_lp(x, 0.5, 2.0), _POSITIVE),
    "Gumbel_Normal": (D.Gumbel(T(0.5), T(2.0)), D.Normal(T(-1.0), T(3.0)), lambda x: _gumbel_lp(x, 0.5, 2.0),
                      lambda x: _normal_lp(x, -1.0, 3.0), _shifted(_REAL, 0.5, 2.0)),
    "Laplace_Normal": (D.Laplace(T(0.5), T(2.0)), D.Normal(T(-1.0), T(3.0)), lambda x: _laplace_lp(x, 0.5, 2.0),
                       lambda x: _normal_lp(x, -1.0, 3.0), _shifted(_REAL, 0.5, 2.0)),
    "Normal_Gumbel": (D.Normal(T(0.5), T(2.0)), D.Gumbel(T(-1.0), T(3.0)), lambda x: _normal_lp(x, 0.5, 2.0),
                      lambda x: _gumbel_lp(x, -1.0, 3.0), _shifted(_REAL, 0.5, 2.0)),
    "Normal_Laplace": (D.Normal(T(0.5), T(2.0)), D.Laplace(T(-1.0), T(3.0)), lambda x: _normal_lp(x, 0.5, 2.0),
                       lambda x: _laplace_lp(x, -1.0, 3.0), _shifted(_REAL, 0.5, 2.0)),
    "Uniform_Beta": (D.Uniform(T(0.2), T(0.7)), D.Beta(T(0.6), T(2.0)), _uniform_lp(0.2, 0.7),
                     lambda x: _beta_lp(x, 0.6, 2.0), _uniform_space(0.2, 0.7)),
    "Uniform_Exponential": (D.Uniform(T(0.2), T(1.7)), D.Exponential(T(0.6)), _uniform_lp(0.2, 1.7),
                            lambda x: _exponential_lp(x, 0.6), _uniform_space(0.2, 1.7)),
    "Uniform_Gamma": (D.Uniform(T(0.2), T(1.7)), D.Gamma(T(0.6), T(2.0)), _uniform_lp(0.2, 1.7),
                      lambda x: _gamma_lp(x, 0.6, 2.0), _uniform_space(0.2, 1.7)),
    "Uniform_Gumbel": (D.Uniform(T(-0.2), T(1.7)), D.Gumbel(T(0.6), T(2.0)), _uniform_lp(-0.2, 1.7),
                       lambda x: _gumbel_lp(x, 0.6, 2.0), _uniform_space(-0.2, 1.7)),
    "Uniform_Normal": (D.Uniform(T(-0.2), T(1.7)), D.Normal(T(0.6), T(2.0)), _uniform_lp(-0.2, 1.7),
                       lambda x: _normal_lp(x, 0.6, 2.0), _uniform_space(-0.2, 1.7)),
}


@pytest.mark.parametrize("name", list(KL_PAIRS))
def test_kl_against_quadrature(name):
    p, q, lp, lq, space = KL_PAIRS[name]
    got = D.kl_divergence(p, q)
    assert got.dtype == mf.float64 and got.shape == ()
    close(got, _kl_quad(lp, lq, space), 1e-8)


def test_kl_discrete_pairs_against_exact_sums():
    n, a, b = np.array([5.0, 5.0]), np.array([0.2, 0.6]), np.array([0.3, 0.5])
    k = np.arange(6.0)[:, None]
    lp = _log_binom(n, k) + k * np.log(a) + (n - k) * np.log1p(-a)
    lq = _log_binom(n, k) + k * np.log(b) + (n - k) * np.log1p(-b)
    close(D.kl_divergence(D.Binomial(T(n), T(a)), D.Binomial(T(n), T(b))), (np.exp(lp) * (lp - lq)).sum(0))
    close(D.kl_divergence(D.Binomial(T([6.0, 5.0]), T(a)), D.Binomial(T(n), T(b)))[0], math.inf)
    with pytest.raises(NotImplementedError, match="q.total_count > p.total_count is not implemented"):
        D.kl_divergence(D.Binomial(T(n), T(a)), D.Binomial(T([6.0, 5.0]), T(b)))
    p, rate = np.array([0.2, 0.0]), np.array([0.7, 2.0])  # Bernoulli against Poisson: the two masses of p
    lq0, lq1 = -rate, np.log(rate) - rate
    ref = np.where(p < 1, (1 - p) * (np.log1p(-p) - lq0), 0) + np.where(p > 0, p * (np.log(np.where(p > 0, p, 1))
                                                                                    - lq1), 0)
    close(D.kl_divergence(D.Bernoulli(T(p)), D.Poisson(T(rate))), ref)


def test_kl_infinite_pairs_and_dispatch():
    """Where p has mass outside q's support the divergence is infinite, over the batch."""
    two = T([1.0, 2.0])
    infinite = [(D.Normal(two, 1.0), D.Pareto(two, 2.0)), (D.Gamma(two, 1.0), D.Uniform(0.0, two)),
                (D.Exponential(two), D.Beta(two, 1.0)), (D.Laplace(two, 1.0), D.Gamma(two, 1.0)),
                (D.Gumbel(two, 1.0), D.ContinuousBernoulli(T([0.3, 0.4]))), (D.Pareto(two, 2.0), D.Uniform(0.0, two)),
                (D.Poisson(two), D.Binomial(3, T([0.3, 0.4]))), (D.Poisson(two), D.Bernoulli(T([0.3, 0.4]))),
                (D.ContinuousBernoulli(T([0.3, 0.4])), D.Pareto(two, 2.0)), (D.Beta(two, 1.0), D.Pareto(two, 2.0))]
    for p, q in infinite:
        close(D.kl_divergence(p, q), [math.inf, math.inf])
    # a Pareto law starting below the other's minimum
    close(D.kl_divergence(D.Pareto(T([1.0, 2.0]), two), D.Pareto(T([1.5, 1.0]), two))[0], math.inf)
    # the heavy tails: no finite divergence for alpha <= 1 (exponential, gamma) or alpha <= 2 (normal)
    close(D.kl_divergence(D.Pareto(T(1.0), T([0.9, 3.0])), D.Exponential(T(1.0)))[0], math.inf)
    close(D.kl_divergence(D.Pareto(T(1.0), T([1.0, 3.0])), D.Gamma(T(1.0), T(1.0)))[0], math.inf)
    close(D.kl_divergence(D.Pareto(T(1.0), T([2.0, 3.0])), D.Normal(T(1.0), T(1.0)))[0], math.inf)
    # laws built as transformed ones dispatch to (TransformedDistribution, TransformedDistribution) when their
    # transforms agree, to the Chi2's parent pair, and find no closed form otherwise
    close(D.kl_divergence(D.InverseGamma(T(2.0), T(3.0)), D.InverseGamma(T(1.5), T(0.5))),
          npy(D.kl_divergence(D.Gamma(T(2.0), T(3.0)), D.Gamma(T(1.5), T(0.5)))))
    close(D.kl_divergence(D.Chi2(T(3.0)), D.Chi2(T(5.0))), npy(D.kl_divergence(D.Gamma(T(1.5), T(0.5)),
                                                                               D.Gamma(T(2.5), T(0.5)))))
    with pytest.raises(NotImplementedError):
        D.kl_divergence(D.Weibull(T(1.0), T(2.0)), D.Weibull(T(1.0), T(3.0)))  # different transforms
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(D.StudentT(T(3.0)), D.Normal(0.0, 1.0))


# ---------------------------------------------------------------- transforms
XV = np.random.default_rng(0).standard_normal((2, 3, 4))


def _num_log_det(f, x, h=1e-6):
    """log |det J| of f (R^k -> R^k) at each row of x, by central differences."""
    out = []
    for row in x.reshape(-1, x.shape[-1]):
        jac = np.stack([(f(row + h * e) - f(row - h * e)) / (2 * h) for e in np.eye(len(row))], -1)
        out.append(np.linalg.slogdet(jac)[1])
    return np.array(out).reshape(x.shape[:-1])


def test_elementwise_transforms():
    xp = np.abs(XV) + 0.1
    e = np.array([0.5, 2.0, -1.5, 3.0])
    t = D.PowerTransform(T(e))
    y = t(T(xp))
    close(y, xp ** e)
    close(t.inv(y), xp, 1e-12)
    close(t.log_abs_det_jacobian(T(xp), y), np.log(np.abs(e * xp ** (e - 1))), 1e-12)
    close(t.sign, np.sign(e))
    assert t.domain is constraints.positive and t.codomain is constraints.positive and t.bijective
    assert D.PowerTransform(T(2.0)) == D.PowerTransform(2.0) and D.PowerTransform(2.0) != D.PowerTransform(3.0)
    assert t.forward_shape((5, 1, 4)) == (5, 1, 4) and D.PowerTransform(T([1.0, 2.0])).forward_shape((3, 1)) == (3, 2)
    a = D.AbsTransform()
    close(a(T(XV)), np.abs(XV))
    close(a.inv(T(xp)), xp)
    assert not a.bijective and a == D.AbsTransform() and a.codomain is constraints.positive
    with pytest.raises(NotImplementedError):
        a.log_abs_det_jacobian(T(XV), T(xp))


def test_simplex_transforms():
    x = XV.reshape(-1, 4)
    s = D.SoftmaxTransform()
    ex = np.exp(x - x.max(-1, keepdims=True))
    close(s(T(x)), ex / ex.sum(-1, keepdims=True))
    close(s.inv(s(T(x))), np.log(ex / ex.sum(-1, keepdims=True)), 1e-12)
    assert not s.bijective and s.domain.event_dim == 1 and s.codomain is constraints.simplex
    sb = D.StickBreakingTransform()
    y = sb(T(x))
    # the stick-breaking construction: z_k = sigmoid(x_k - log(K - k)), y_k = z_k prod_{j<k} (1 - z_j)
    z = 1 / (1 + np.exp(-(x - np.log(4 - np.arange(4)))))
    left = np.concatenate([np.ones((len(x), 1)), np.cumprod(1 - z, -1)], -1)
    close(y, np.concatenate([z, np.ones((len(x), 1))], -1) * left, 1e-12)
    assert tuple(y.shape) == (6, 5) and bool(constraints.simplex.check(y).all())
    close(sb.inv(y), x, 1e-9)
    close(sb(T(np.zeros(4))), np.full(5, 0.2), 1e-12)  # 0 is the center of the simplex

    def first_k(v):
        zz = 1 / (1 + np.exp(-(v - np.log(4 - np.arange(4)))))
        return zz * np.concatenate([[1.0], np.cumprod(1 - zz)[:-1]])
    close(sb.log_abs_det_jacobian(T(x), y), _num_log_det(first_k, x), 1e-7)
    assert sb.forward_shape((2, 4)) == (2, 5) and sb.inverse_shape((2, 5)) == (2, 4) and sb.bijective
    with pytest.raises(ValueError, match="Too few dimensions on input"):
        sb.forward_shape(())


def test_matrix_transforms():
    x = XV[..., :3]
    low = D.LowerCholeskyTransform()(T(x))
    ref = np.tril(x, -1) + np.exp(x) * np.eye(3)
    close(low, ref, 1e-12)
    close(D.LowerCholeskyTransform().inv(low), np.tril(x), 1e-12)  # (the upper triangle is lost)
    pd = D.PositiveDefiniteTransform()(T(x))
    close(pd, ref @ np.swapaxes(ref, -1, -2), 1e-12)
    assert bool(constraints.positive_definite.check(pd).all())
    close(D.PositiveDefiniteTransform().inv(pd), np.tril(x), 1e-9)


def test_functor_transforms():
    x = T(XV)
    r = D.ReshapeTransform((3, 4), (2, 6))
    y = r(x)
    close(y, XV.reshape(2, 2, 6))
    close(r.inv(y), XV)
    close(r.log_abs_det_jacobian(x, y), np.zeros(2))
    assert r.forward_shape((5, 3, 4)) == (5, 2, 6) and r.inverse_shape((2, 6)) == (3, 4)
    assert r.domain.event_dim == 2 and r.codomain.event_dim == 2
    with pytest.raises(ValueError, match="in_shape, out_shape have different numbers of elements"):
        D.ReshapeTransform((2, 3), (4,))
    with pytest.raises(ValueError, match=r"Shape mismatch: expected \(2, 2\) but got \(2, 3\)"):
        D.ReshapeTransform((2, 3), (6,)).forward_shape((4, 2, 2))
    i = D.IndependentTransform(D.ExpTransform(), 2)
    close(i(x), np.exp(XV))
    close(i.log_abs_det_jacobian(x, i(x)), XV.sum((-1, -2)))
    assert i.domain.event_dim == 2 and i.codomain.event_dim == 2 and i.bijective and i.sign == 1
    assert repr(i) == "IndependentTransform(ExpTransform(), 2)"
    with pytest.raises(ValueError, match="Too few dimensions on input"):
        i(T([1.0]))
    # cat: exp on 1 column, identity on 2, sigmoid on 1; the log-determinants side by side
    c = D.CatTransform([D.ExpTransform(), D.identity_transform, D.SigmoidTransform()], dim=-1, lengths=[1, 2, 1])
    y = c(x)
    sig = 1 / (1 + np.exp(-XV[..., 3:]))
    close(y, np.concatenate([np.exp(XV[..., :1]), XV[..., 1:3], sig], -1))
    close(c.inv(y), XV, 1e-12)
    close(c.log_abs_det_jacobian(x, y), np.concatenate([XV[..., :1], np.zeros((2, 3, 2)), np.log(sig * (1 - sig))],
                                                       -1))
    # parts with an event dim: joined along a batch dim, the determinants stay side by side; along the event
    # dim, they add up
    sb = D.StickBreakingTransform()
    cv = D.CatTransform([sb, sb], dim=0, lengths=[1, 1])
    close(cv.log_abs_det_jacobian(x, cv(x)), np.concatenate([npy(sb.log_abs_det_jacobian(x[:1], sb(x[:1]))),
                                                             npy(sb.log_abs_det_jacobian(x[1:], sb(x[1:])))]), 1e-12)
    ce = D.CatTransform([D.IndependentTransform(D.ExpTransform(), 1), D.IndependentTransform(D.SigmoidTransform(), 1)],
                        dim=-1, lengths=[3, 1])
    close(ce.log_abs_det_jacobian(x, ce(x)), XV[..., :3].sum(-1) + np.log(sig * (1 - sig))[..., 0], 1e-12)
    with pytest.raises(AssertionError, match=r"x.size\(-1\) = 4 must equal length 3"):
        D.CatTransform([D.ExpTransform()], dim=-1, lengths=[3])(x)
    with pytest.raises(AssertionError, match="dim 3 out of range for tensor with 3 dimensions"):
        D.CatTransform([D.ExpTransform()], dim=3)(x)
    s = D.StackTransform([D.ExpTransform(), D.SigmoidTransform(), D.AffineTransform(0.5, 3.0)], dim=1)
    y = s(x)
    close(y, np.stack([np.exp(XV[:, 0]), 1 / (1 + np.exp(-XV[:, 1])), 0.5 + 3 * XV[:, 2]], 1))
    close(s.inv(y), XV, 1e-12)
    sig = 1 / (1 + np.exp(-XV[:, 1]))
    close(s.log_abs_det_jacobian(x, y), np.stack([XV[:, 0], np.log(sig * (1 - sig)), np.full((2, 4), math.log(3))],
                                                 1), 1e-12)
    assert s.bijective and repr(s.codomain).startswith("Stack")
    with pytest.raises(AssertionError, match=r"x.size\(0\) = 2 must equal len\(transforms\) 3"):
        D.StackTransform([D.ExpTransform()] * 3)(x)
    with pytest.raises(AssertionError, match="All elements of tseq must be Transform instances"):
        D.StackTransform([3])
    cdf = D.CumulativeDistributionTransform(D.Normal(T(0.3), T(2.0)))
    close(cdf(x), 0.5 * (1 + _erf((XV - 0.3) / (2 * math.sqrt(2)))))
    close(cdf.inv(cdf(x)), XV, 1e-9)
    close(cdf.log_abs_det_jacobian(x, cdf(x)), _normal_lp(XV, 0.3, 2.0))
    # caching: the inverse of the last output is the input itself
    for t in (D.PowerTransform(2.0), i, c, s, r):
        cached = t.with_cache()
        inp = T(np.abs(XV) + 0.1)
        assert cached.inv(cached(inp)) is inp and cached._cache_size == 1


def test_transformed_distribution_with_vector_transforms():
    """A logistic-normal law on the simplex: Normal pushed through the stick-breaking map, log_prob by the
    change of variables with the vector log-determinant."""
    d = D.TransformedDistribution(D.Normal(T(np.zeros(3)), T(np.ones(3))), D.StickBreakingTransform())
    assert (d.batch_shape, d.event_shape) == ((), (4,))
    y = T([0.1, 0.2, 0.3, 0.4])
    x = D.StickBreakingTransform().inv(y)
    ref = _normal_lp(npy(x), 0, 1).sum() - float(D.StickBreakingTransform().log_abs_det_jacobian(x, y))
    close(d.log_prob(y), ref, 1e-12)
    mf.manual_seed(0)
    assert bool(constraints.simplex.check(d.sample((10,))).all())
    r = D.TransformedDistribution(D.Normal(T(np.zeros(6)), 1.0), D.ReshapeTransform((6,), (2, 3)))
    assert (r.batch_shape, r.event_shape) == ((), (2, 3))
    close(r.log_prob(T(XV[0, :2, :3])), _normal_lp(XV[0, :2, :3], 0, 1).sum())


# ---------------------------------------------------------------- biject_to / transform_to
def test_constraint_registries():
    x = T(XV)
    cases = [(constraints.real, "ComposeTransform"), (constraints.positive, "ComposeTransform"),
             (constraints.greater_than(T(1.5)), "ComposeTransform"), (constraints.less_than(2.0), "ComposeTransform"),
             (constraints.unit_interval, "SigmoidTransform"), (constraints.interval(-1.0, 3.0), "ComposeTransform"),
             (constraints.half_open_interval(0.0, 2.0), "ComposeTransform"),
             (constraints.independent(constraints.positive, 1), "IndependentTransform"),
             (constraints.real_vector, "IndependentTransform"),
             (constraints.cat([constraints.real, constraints.positive, constraints.unit_interval], -1, [1, 2, 1]),
              "CatTransform"),
             (constraints.stack([constraints.real, constraints.positive, constraints.unit_interval,
                                 constraints.interval(-2.0, 2.0)], -1), "StackTransform")]
    for c, kind in cases:
        for registry in (D.biject_to, D.transform_to):
            t = registry(c)
            assert type(t).__name__ == kind, (c, type(t).__name__)
            y = t(x)
            assert bool(c.check(y).all()), c
            close(t.inv(y), XV, 1e-8)
    close(D.biject_to(constraints.greater_than(1.5))(x), 1.5 + np.exp(XV))
    close(D.biject_to(constraints.less_than(2.0))(x), 2.0 - np.exp(XV))
    close(D.biject_to(constraints.interval(-1.0, 3.0))(x), -1 + 4 / (1 + np.exp(-XV)))
    assert D.biject_to(constraints.real) is D.identity_transform
    assert isinstance(D.biject_to(constraints.simplex), D.StickBreakingTransform)
    assert isinstance(D.transform_to(constraints.simplex), D.SoftmaxTransform)
    assert isinstance(D.transform_to(constraints.lower_cholesky), D.LowerCholeskyTransform)
    assert isinstance(D.transform_to(constraints.positive_definite), D.PositiveDefiniteTransform)
    assert isinstance(D.transform_to(constraints.positive_semidefinite), D.PositiveDefiniteTransform)
    for c in (constraints.boolean, constraints.lower_cholesky, constraints.nonnegative_integer):
        with pytest.raises(NotImplementedError, match=f"Cannot transform {type(c).__name__} constraints"):
            D.biject_to(c)
    # a parameter optimized in unconstrained space: Normal's scale through transform_to
    u = T([-1.0, 0.0, 2.0])
    close(D.transform_to(D.Normal.arg_constraints["scale"])(u), np.exp([-1.0, 0.0, 2.0]))
    mine = ConstraintRegistry()

    @mine.register(constraints.positive)
    def _softplus(constraint):
        return D.SoftplusTransform()

    assert isinstance(mine(constraints.greater_than(0.0)), D.SoftplusTransform)  # (registered by type)
    with pytest.raises(TypeError, match="Expected constraint to be either a Constraint subclass or instance"):
        mine.register(int, _softplus)


def test_pytorch_module_paths_of_the_new_laws():
    """``from torch.distributions.<module> import <Law>`` spellings resolve to the same classes."""
    import importlib

    for sub, name in (("half_normal", "HalfNormal"), ("studentT", "StudentT"), ("chi2", "Chi2"),
                      ("multinomial", "Multinomial"), ("mixture_same_family", "MixtureSameFamily"),
                      ("relaxed_bernoulli", "LogitRelaxedBernoulli"), ("relaxed_categorical", "ExpRelaxedCategorical"),
                      ("constraint_registry", "biject_to")):
        module = importlib.import_module(f"minifused.distributions.{sub}")
        assert getattr(module, name) is getattr(importlib.import_module("minifused.distributions.relaxed")
                                                if name.startswith(("Logit", "Exp")) else D, name)
