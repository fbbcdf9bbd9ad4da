"""minifused.distributions: log_prob / cdf / entropy / moments / KL against float64 closed forms in NumPy, draws
against their moments and quantiles (fixed seed, large n, 6-sigma bounds), gradients of log_prob, entropy, KL
and rsample against finite differences, PyTorch's validation errors, constraints and transforms; on the GPU,
values and gradients against PyTorch's."""
import math

import numpy as np
import pytest

import minifused as mf
from minifused import distributions as D
from minifused.autograd import gradcheck
from minifused.distributions import constraints
from minifused.distributions._gamma import StandardGamma, standard_gamma_grad

EULER = 0.5772156649015329
_lgamma = np.vectorize(math.lgamma, otypes=[np.float64])
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _digamma(x, h=1e-5):  # central difference of math.lgamma: error ~1e-10
    return (_lgamma(x + h) - _lgamma(x - h)) / (2 * h)


def T(a, **kw):
    return mf.tensor(np.asarray(a, dtype=np.float64), dtype=mf.float64, **kw)


def npy(t):
    return np.asarray(t.detach().numpy(), dtype=np.float64)


def close(t, ref, tol=1e-10):
    np.testing.assert_allclose(npy(t), np.asarray(ref, dtype=np.float64), rtol=tol, atol=tol)


# ---------------------------------------------------------------- values against closed forms
LOC, SCALE, X = np.array([0.0, 1.0, -0.5]), np.array([1.0, 2.0, 0.3]), np.array([0.5, -0.7, 0.1])
POS = np.array([0.4, 2.5, 1.0])
P3 = np.array([0.2, 0.55, 0.9])
K = np.array([0.0, 3.0, 1.0])


def _normal_logpdf(x, mu, s):
    return -((x - mu) ** 2) / (2 * s * s) - np.log(s) - 0.5 * math.log(2 * math.pi)


def _gammainc_scalar(a, x):
    """The regularized lower incomplete gamma P(a, x) by its series x^a e^-x / Gamma(a + 1) sum_n x^n / ((a + 1)
    ... (a + n)) (every term positive: no cancellation), to float64 rounding."""
    term = total = 1.0
    n = 0
    while term > 1e-17 * total:
        n += 1
        term *= x / (a + n)
        total += term
    return math.exp(a * math.log(x) - x - math.lgamma(a + 1)) * total


_gammainc = np.vectorize(_gammainc_scalar, otypes=[np.float64])


def _beta_entropy(a, b):
    lbeta = _lgamma(a) + _lgamma(b) - _lgamma(a + b)
    return lbeta - (a - 1) * _digamma(a) - (b - 1) * _digamma(b) + (a + b - 2) * _digamma(a + b)


# name: (distribution, value, {attribute: float64 reference}); log_prob is evaluated at the value
CLOSED_FORMS = {
    "Normal": (lambda: D.Normal(T(LOC), T(SCALE)), X, {
        "log_prob": _normal_logpdf(X, LOC, SCALE), "entropy": 0.5 * np.log(2 * math.pi * math.e * SCALE ** 2),
        "cdf": 0.5 * (1 + _erf((X - LOC) / (SCALE * math.sqrt(2)))), "mean": LOC, "variance": SCALE ** 2}),
    "Laplace": (lambda: D.Laplace(T(LOC), T(SCALE)), X, {
        "log_prob": -np.log(2 * SCALE) - np.abs(X - LOC) / SCALE, "entropy": 1 + np.log(2 * SCALE),
        "cdf": np.where(X < LOC, 0.5 * np.exp((X - LOC) / SCALE), 1 - 0.5 * np.exp(-(X - LOC) / SCALE)),
        "variance": 2 * SCALE ** 2}),
    "Cauchy": (lambda: D.Cauchy(T(LOC), T(SCALE)), X, {
        "log_prob": -np.log(math.pi * SCALE * (1 + ((X - LOC) / SCALE) ** 2)), "entropy": np.log(4 * math.pi * SCALE),
        "cdf": np.arctan((X - LOC) / SCALE) / math.pi + 0.5}),
    "Exponential": (lambda: D.Exponential(T(SCALE)), POS, {
        "log_prob": np.log(SCALE) - SCALE * POS, "entropy": 1 - np.log(SCALE), "cdf": 1 - np.exp(-SCALE * POS),
        "mean": 1 / SCALE, "variance": SCALE ** -2.0}),
    "Uniform": (lambda: D.Uniform(T(LOC), T(LOC + SCALE)), LOC + 0.25 * SCALE, {
        "log_prob": -np.log(SCALE), "entropy": np.log(SCALE), "cdf": np.full(3, 0.25), "mean": LOC + SCALE / 2,
        "variance": SCALE ** 2 / 12}),
    "Gumbel": (lambda: D.Gumbel(T(LOC), T(SCALE)), X, {
        "log_prob": -np.log(SCALE) - (X - LOC) / SCALE - np.exp(-(X - LOC) / SCALE),
        "entropy": np.log(SCALE) + EULER + 1, "cdf": np.exp(-np.exp(-(X - LOC) / SCALE)),
        "mean": LOC + SCALE * EULER, "variance": (math.pi * SCALE) ** 2 / 6}),
    "LogNormal": (lambda: D.LogNormal(T(LOC), T(SCALE)), POS, {
        "log_prob": _normal_logpdf(np.log(POS), LOC, SCALE) - np.log(POS),
        "entropy": LOC + 0.5 + 0.5 * np.log(2 * math.pi * SCALE ** 2), "mean": np.exp(LOC + SCALE ** 2 / 2),
        "variance": np.expm1(SCALE ** 2) * np.exp(2 * LOC + SCALE ** 2)}),
    "Beta": (lambda: D.Beta(T(POS), T(SCALE)), P3, {
        "log_prob": (POS - 1) * np.log(P3) + (SCALE - 1) * np.log1p(-P3) - _lgamma(POS) - _lgamma(SCALE)
        + _lgamma(POS + SCALE), "entropy": _beta_entropy(POS, SCALE), "mean": POS / (POS + SCALE),
        "variance": POS * SCALE / ((POS + SCALE) ** 2 * (POS + SCALE + 1))}),
    "Gamma": (lambda: D.Gamma(T(POS), T(SCALE)), POS[::-1], {
        "log_prob": POS * np.log(SCALE) + (POS - 1) * np.log(POS[::-1]) - SCALE * POS[::-1] - _lgamma(POS),
        "entropy": POS - np.log(SCALE) + _lgamma(POS) + (1 - POS) * _digamma(POS),
        "cdf": _gammainc(POS, SCALE * POS[::-1]), "mean": POS / SCALE, "variance": POS / SCALE ** 2}),
    "Bernoulli": (lambda: D.Bernoulli(probs=T(P3)), np.array([1.0, 0.0, 1.0]), {
        "log_prob": np.log([0.2, 0.45, 0.9]), "entropy": -(P3 * np.log(P3) + (1 - P3) * np.log1p(-P3)),
        "mean": P3, "variance": P3 * (1 - P3)}),
    "Geometric": (lambda: D.Geometric(probs=T(P3)), K, {
        "log_prob": K * np.log1p(-P3) + np.log(P3), "entropy": -((1 - P3) * np.log1p(-P3) + P3 * np.log(P3)) / P3,
        "mean": 1 / P3 - 1, "variance": (1 - P3) / P3 ** 2}),
    "Poisson": (lambda: D.Poisson(T(POS)), K, {
        "log_prob": K * np.log(POS) - POS - _lgamma(K + 1), "mean": POS, "variance": POS}),
    "Binomial": (lambda: D.Binomial(5, probs=T(P3)), K, {
        "log_prob": _lgamma(6) - _lgamma(K + 1) - _lgamma(6 - K) + K * np.log(P3) + (5 - K) * np.log1p(-P3),
        "entropy": -sum(np.exp(lp) * lp for lp in (_lgamma(6) - _lgamma(k + 1) - _lgamma(6 - k) + k * np.log(P3)
                                                     + (5 - k) * np.log1p(-P3) for k in range(6))),
        "mean": 5 * P3, "variance": 5 * P3 * (1 - P3)}),
}


@pytest.mark.parametrize("name", list(CLOSED_FORMS))
def test_values_match_closed_forms(name):
    make, value, refs = CLOSED_FORMS[name]
    d = make()
    for attr, ref in refs.items():
        got = getattr(d, attr)(T(value)) if attr in ("log_prob", "cdf") else getattr(d, attr)
        got = got() if attr == "entropy" else got
        close(got, ref, 1e-7 if name in ("Beta", "Gamma") else 1e-10)  # (the reference digamma: a finite difference)
        assert got.dtype == mf.float64 and tuple(got.shape) == (3,), (attr, got.dtype, got.shape)
    if "cdf" in refs and name not in ("Gumbel", "Gamma"):  # (no icdf: PyTorch's Gamma has none either)
        close(d.icdf(d.cdf(T(value))), value, 1e-9)


def test_categorical_and_one_hot_values():
    p = np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
    for c in (D.Categorical(probs=T(p * 4)), D.Categorical(logits=T(np.log(p) + 1.5))):
        close(c.probs, p)
        close(c.log_prob(mf.tensor([2, 0])), np.log([0.5, 0.6]))
        close(c.log_prob(mf.tensor([[1], [2]])), np.log([[0.3, 0.3], [0.5, 0.1]]))  # broadcast over the batch
        close(c.entropy(), -(p * np.log(p)).sum(-1))
        assert c.mode.tolist() == [2, 0] and c.batch_shape == (2,) and c.event_shape == ()
    o = D.OneHotCategorical(probs=T(p))
    close(o.log_prob(T([[0, 0, 1], [1, 0, 0]])), np.log([0.5, 0.6]))
    close(o.variance, p * (1 - p))
    assert o.event_shape == (3,) and o.mode.tolist() == [[0, 0, 1], [1, 0, 0]]
    assert tuple(o.enumerate_support().shape) == (3, 2, 3)


def _mvn_ref(loc, cov, x):
    d = loc.shape[-1]
    diff = x - loc
    maha = np.einsum("...i,...i->...", diff, np.linalg.solve(cov, diff[..., None])[..., 0])
    return -0.5 * (d * math.log(2 * math.pi) + np.linalg.slogdet(cov)[1] + maha)


def _spd(seed, n=3, batch=()):
    a = np.random.default_rng(seed).standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + np.eye(n)


@pytest.mark.parametrize("given", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_multivariate_normal_values(given):
    cov = _spd(0, batch=(2,))
    loc = np.random.default_rng(1).standard_normal((2, 3))
    x = np.random.default_rng(2).standard_normal((4, 2, 3))
    mat = {"covariance_matrix": cov, "precision_matrix": np.linalg.inv(cov),
           "scale_tril": np.linalg.cholesky(cov)}[given]
    d = D.MultivariateNormal(T(loc), **{given: T(mat)})
    assert d.batch_shape == (2,) and d.event_shape == (3,)
    close(d.log_prob(T(x)), _mvn_ref(loc, cov, x), 1e-9)
    close(d.entropy(), 0.5 * np.linalg.slogdet(2 * math.pi * math.e * cov)[1], 1e-9)
    close(d.covariance_matrix, cov, 1e-9)
    close(d.precision_matrix, np.linalg.inv(cov), 1e-9)
    close(d.scale_tril, np.linalg.cholesky(cov), 1e-9)
    close(d.variance, np.diagonal(cov, axis1=-2, axis2=-1), 1e-9)
    b = D.MultivariateNormal(T(loc[0]), T(cov[0]))  # one covariance, a batch of means through the value
    close(b.log_prob(T(x)), _mvn_ref(loc[0], cov[0], x), 1e-9)


def test_independent_sums_the_reinterpreted_dims():
    base = D.Normal(T(np.zeros((2, 3))), T(np.full((2, 3), 2.0)))
    d = D.Independent(base, 1)
    assert (d.batch_shape, d.event_shape) == ((2,), (3,))
    x = np.random.default_rng(0).standard_normal((5, 2, 3))
    close(d.log_prob(T(x)), _normal_logpdf(x, 0.0, 2.0).sum(-1))
    close(d.entropy(), np.full(2, 3 * 0.5 * math.log(2 * math.pi * math.e * 4)))


# ---------------------------------------------------------------- KL divergences
def test_kl_divergences_match_closed_forms():
    kl = D.kl_divergence
    m1, s1, m2, s2 = LOC, SCALE, np.array([0.3]), np.array([1.5])
    close(kl(D.Normal(T(m1), T(s1)), D.Normal(T(m2), T(s2))),
          np.log(s2 / s1) + (s1 ** 2 + (m1 - m2) ** 2) / (2 * s2 ** 2) - 0.5)
    p, q = np.array([[0.2, 0.3, 0.5]]), np.array([0.1, 0.6, 0.3])
    close(kl(D.Categorical(probs=T(p)), D.Categorical(logits=T(np.log(q)))), (p * np.log(p / q)).sum(-1))
    close(kl(D.OneHotCategorical(probs=T(p)), D.OneHotCategorical(probs=T(q))), (p * np.log(p / q)).sum(-1))
    a, b = np.array([0.2, 0.7, 0.0]), np.array([0.5, 0.1, 0.3])
    ref = np.where(a > 0, a * np.log(np.where(a > 0, a, 1) / b), 0) + (1 - a) * np.log((1 - a) / (1 - b))
    close(kl(D.Bernoulli(probs=T(a)), D.Bernoulli(probs=T(b))), ref)
    close(kl(D.Uniform(T([0.0, 0.5]), T([1.0, 2.0])), D.Uniform(T([-1.0, 0.0]), T([1.5, 1.5]))),
          [math.log(2.5), math.inf])  # the second is not inside q's support
    close(kl(D.Exponential(T(s1)), D.Exponential(T(s2))), np.log(s1 / s2) + s2 / s1 - 1)
    close(kl(D.Poisson(T(s1)), D.Poisson(T(s2))), s1 * np.log(s1 / s2) - s1 + s2)
    close(kl(D.Beta(T(POS), T(SCALE)), D.Beta(T([1.5]), T([0.7]))),
          _lgamma(1.5) + _lgamma(0.7) - _lgamma(2.2) - (_lgamma(POS) + _lgamma(SCALE) - _lgamma(POS + SCALE))
          + (POS - 1.5) * _digamma(POS) + (SCALE - 0.7) * _digamma(SCALE)
          + (2.2 - POS - SCALE) * _digamma(POS + SCALE), 1e-7)
    cp, cq = _spd(3), _spd(4)
    lp, lq = np.array([0.0, 1.0, -1.0]), np.array([0.5, 0.2, 0.0])
    ref = 0.5 * (np.trace(np.linalg.solve(cq, cp)) + (lq - lp) @ np.linalg.solve(cq, lq - lp) - 3
                 + np.linalg.slogdet(cq)[1] - np.linalg.slogdet(cp)[1])
    close(kl(D.MultivariateNormal(T(lp), T(cp)), D.MultivariateNormal(T(lq), precision_matrix=T(np.linalg.inv(cq)))),
          ref, 1e-9)
    ind = kl(D.Independent(D.Normal(T([m1]), T([s1])), 1), D.Independent(D.Normal(T([[0.3] * 3]), T([[1.5] * 3])), 1))
    close(ind, [(np.log(s2 / s1) + (s1 ** 2 + (m1 - m2) ** 2) / (2 * s2 ** 2) - 0.5).sum()])
    close(kl(D.LogNormal(T(m1), T(s1)), D.LogNormal(T(m2), T(s2))), npy(kl(D.Normal(T(m1), T(s1)),
                                                                             D.Normal(T(m2), T(s2)))))


def test_kl_registry():
    with pytest.raises(NotImplementedError, match="No KL\\(p \\|\\| q\\) is implemented for p type Normal and q type "
                                                  "Poisson"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Poisson(1.0))

    class Shifted(D.Normal):
        pass

    assert float(D.kl_divergence(Shifted(1.0, 1.0), D.Normal(0.0, 1.0))) == pytest.approx(0.5)  # subclass dispatch

    @D.register_kl(Shifted, Shifted)
    def _constant(p, q):
        return mf.tensor(7.0)

    assert float(D.kl_divergence(Shifted(1.0, 1.0), Shifted(0.0, 1.0))) == 7.0
    with pytest.raises(TypeError, match="Distribution subclass"):
        D.register_kl(int, D.Normal)


# ---------------------------------------------------------------- draws: shapes, seeds, moments
def test_shapes_broadcasting_and_expand():
    d = D.Normal(mf.zeros(2, 1), mf.ones(3))
    assert d.batch_shape == (2, 3) and d.sample().shape == (2, 3) and d.sample((4, 5)).shape == (4, 5, 2, 3)
    assert d.sample().dtype == mf.float32 and D.Normal(0.0, 1.0).batch_shape == ()
    e = d.expand((6, 2, 3))
    assert e.batch_shape == (6, 2, 3) and e.rsample((1,)).shape == (1, 6, 2, 3) and e._validate_args
    assert D.Categorical(logits=mf.zeros(4, 3)).sample((2,)).dtype == mf.int64
    assert D.MultivariateNormal(mf.zeros(2, 3), mf.eye(3)).expand((5, 2)).sample((4,)).shape == (4, 5, 2, 3)
    assert D.Bernoulli(0.3).enumerate_support().tolist() == [0.0, 1.0]
    assert D.Binomial(2, mf.tensor([0.3, 0.4])).enumerate_support().shape == (3, 2)


def test_sample_is_detached_rsample_is_not_and_seeds_repeat():
    loc = mf.zeros(3, requires_grad=True)
    d = D.Normal(loc, 1.0)
    assert not d.sample().requires_grad and d.rsample().requires_grad
    assert D.Normal.has_rsample and not D.Bernoulli.has_rsample
    for make in (lambda: D.Normal(loc, 1.0), lambda: D.Categorical(logits=mf.zeros(3)), lambda: D.Poisson(3.0),
                 lambda: D.Binomial(7, mf.tensor(0.3)), lambda: D.Beta(2.0, 3.0), lambda: D.Gumbel(0.0, 1.0),
                 lambda: D.Gamma(0.5, 2.0), lambda: D.Dirichlet(mf.tensor([0.3, 1.0, 4.0]))):
        mf.manual_seed(11)
        a = make().sample((5,))
        mf.manual_seed(11)
        np.testing.assert_array_equal(a.numpy(), make().sample((5,)).numpy())


N = 200_000


def _within(estimate, truth, sigma, what):
    assert abs(estimate - truth) <= 6 * sigma + 1e-12, f"{what}: {estimate} vs {truth} (6 sigma = {6 * sigma})"


MOMENTS = {  # float64 scalar parameters; the Cauchy has no moments, its quantiles are checked
    "Normal": lambda: D.Normal(T(0.5), T(2.0)), "Laplace": lambda: D.Laplace(T(-1.0), T(0.5)),
    "Exponential": lambda: D.Exponential(T(3.0)), "Uniform": lambda: D.Uniform(T(-2.0), T(1.0)),
    "Gumbel": lambda: D.Gumbel(T(1.0), T(2.0)), "LogNormal": lambda: D.LogNormal(T(0.0), T(0.5)),
    "Beta": lambda: D.Beta(T(0.7), T(2.5)), "Bernoulli": lambda: D.Bernoulli(logits=T(-0.4)),
    "Poisson": lambda: D.Poisson(T(4.5)), "Binomial": lambda: D.Binomial(T(12.0), T(0.3)),
    "Geometric": lambda: D.Geometric(T(0.35)), "Cauchy": lambda: D.Cauchy(T(0.5), T(2.0)),
    "Gamma": lambda: D.Gamma(T(0.3), T(2.5)), "Gamma_large": lambda: D.Gamma(T(40.0), T(0.5)),
}


@pytest.mark.parametrize("name", list(MOMENTS))
def test_sample_moments_and_quantiles(name):
    d = MOMENTS[name]()
    mf.manual_seed(1)
    x = npy(d.sample((N,)))
    assert x.shape == (N,)
    if name != "Cauchy":
        mean, var = float(d.mean), float(d.variance)
        _within(x.mean(), mean, math.sqrt(var / N), "mean")
        m4 = ((x - x.mean()) ** 4).mean()
        _within(x.var(), var, math.sqrt(max(m4 - x.var() ** 2, 0) / N), "variance")
    if name in ("Normal", "Laplace", "Exponential", "Uniform", "Gumbel", "LogNormal", "Cauchy"):  # those with icdf
        for q in (0.1, 0.5, 0.9):  # the fraction below each quantile is Binomial(N, q) / N
            _within((x <= float(d.icdf(T(q)))).mean(), q, math.sqrt(q * (1 - q) / N), f"quantile {q}")
    if d.support.is_discrete:
        for k in [k for k in range(3) if bool(d.support.check(T(float(k))))]:  # frequencies against the masses
            pk = math.exp(float(d.log_prob(T(float(k)))))
            _within((x == k).mean(), pk, math.sqrt(pk * (1 - pk) / N), f"P(X = {k})")
    assert bool(d.support.check(T(x)).all())


def test_categorical_and_multivariate_normal_draws():
    probs = np.array([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25]])
    mf.manual_seed(2)
    x = D.Categorical(probs=T(probs)).sample((N,)).numpy()
    for row in range(2):
        freq = np.bincount(x[:, row], minlength=3) / N
        for f, p in zip(freq, probs[row]):
            _within(f, p, math.sqrt(p * (1 - p) / N), "category frequency")
    cov, loc = _spd(5), np.array([1.0, -2.0, 0.5])
    z = npy(D.MultivariateNormal(T(loc), scale_tril=T(np.linalg.cholesky(cov))).sample((N,)))
    sd = np.sqrt(np.diag(cov))
    for i in range(3):
        _within(z[:, i].mean(), loc[i], sd[i] / math.sqrt(N), "mvn mean")
        for j in range(3):  # Var of a product of jointly normal variables: cov_ii cov_jj + cov_ij^2
            _within(np.cov(z[:, i], z[:, j])[0, 1], cov[i, j], math.sqrt((cov[i, i] * cov[j, j] + cov[i, j] ** 2)
                                                                         / N), "mvn covariance")


# ---------------------------------------------------------------- gradients
def P(*shape, low=None, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape)
    return T(np.abs(a) + low if low is not None else a, requires_grad=True)


def _seeded(fn):
    def run(*args):
        mf.manual_seed(7)  # the same noise at every evaluation: rsample is then a smooth map of the parameters
        return fn(*args)
    return run


V = T(X)
VP = T(POS)
I3 = mf.eye(3, dtype=mf.float64)
V3 = T(np.random.default_rng(9).standard_normal((4, 2, 3)))
GRADIENTS = {
    "Normal": (lambda a, b: D.Normal(a, b).log_prob(V) + D.Normal(a, b).entropy() + D.Normal(a, b).cdf(V),
               (P(3), P(3, low=0.5))),
    "Laplace": (lambda a, b: D.Laplace(a, b).log_prob(V) + D.Laplace(a, b).entropy(), (P(3), P(3, low=0.5))),
    "Cauchy": (lambda a, b: D.Cauchy(a, b).log_prob(V) + D.Cauchy(a, b).cdf(V), (P(3), P(3, low=0.5))),
    "Exponential": (lambda r: D.Exponential(r).log_prob(VP) + D.Exponential(r).entropy(), (P(3, low=0.5),)),
    "Gumbel": (lambda a, b: D.Gumbel(a, b).log_prob(V), (P(3), P(3, low=0.5))),
    "LogNormal": (lambda a, b: D.LogNormal(a, b).log_prob(VP), (P(3), P(3, low=0.5))),
    "Beta": (lambda a, b: D.Beta(a, b).log_prob(T(P3)) + D.Beta(a, b).entropy(), (P(3, low=0.5), P(3, low=0.5))),
    "Bernoulli": (lambda z: D.Bernoulli(logits=z).log_prob(T([1.0, 0.0, 1.0])) + D.Bernoulli(probs=z.sigmoid())
                  .entropy(), (P(3),)),
    "Categorical": (lambda z: D.Categorical(logits=z).log_prob(mf.tensor([0, 2])) + D.Categorical(probs=z.exp())
                    .entropy(), (P(2, 3),)),
    "Poisson": (lambda r: D.Poisson(r).log_prob(T(K)), (P(3, low=0.5),)),
    "Binomial": (lambda z: D.Binomial(6, logits=z).log_prob(T(K)) + D.Binomial(6, logits=z).entropy(), (P(3),)),
    "Geometric": (lambda z: D.Geometric(logits=z).log_prob(T(K)) + D.Geometric(logits=z).entropy(), (P(3),)),
    "MultivariateNormal": (lambda m, a: D.MultivariateNormal(m, covariance_matrix=a @ a.T + I3).log_prob(V3)
                           + D.MultivariateNormal(m, precision_matrix=a @ a.T + I3).entropy(), (P(2, 3), P(3, 3))),
    "MultivariateNormal_tril": (lambda m, a: D.MultivariateNormal(m, scale_tril=a.tril(-1) + mf.diag(
        a.diagonal().exp())).log_prob(V3), (P(2, 3), P(3, 3))),
    "TanhNormal": (lambda a, b: D.TransformedDistribution(D.Normal(a, b), [D.TanhTransform()]).log_prob(
        T([0.3, -0.5, 0.9])), (P(3), P(3, low=0.5))),
    "kl_Normal": (lambda a, b, c: D.kl_divergence(D.Normal(a, b), D.Normal(c, 2.0)), (P(3), P(3, low=0.5), P(3))),
    "kl_Categorical": (lambda a, b: D.kl_divergence(D.Categorical(logits=a), D.Categorical(logits=b)),
                       (P(2, 3), P(2, 3, seed=1))),
    "kl_Bernoulli": (lambda a, b: D.kl_divergence(D.Bernoulli(logits=a), D.Bernoulli(logits=b)), (P(3), P(3, seed=1))),
    "kl_Uniform": (lambda a, b: D.kl_divergence(D.Uniform(a, a + 1), D.Uniform(a - 1, a + b + 1)),
                   (P(3), P(3, low=0.5))),
    "kl_MultivariateNormal": (lambda m, a, b: D.kl_divergence(
        D.MultivariateNormal(m, covariance_matrix=a @ a.T + I3), D.MultivariateNormal(m.flip(-1), scale_tril=b.tril(
            -1) + I3)), (P(2, 3), P(3, 3), P(3, 3, seed=1))),
    "kl_Beta": (lambda a, b: D.kl_divergence(D.Beta(a, b), D.Beta(b, a)), (P(3, low=0.5), P(3, low=0.5, seed=1))),
    # (Gamma's cdf with a fixed concentration: it has no gradient in it, as PyTorch's igamma has none)
    "Gamma": (lambda a, b: D.Gamma(a, b).log_prob(VP) + D.Gamma(a, b).entropy() + D.Gamma(T(POS), b).cdf(VP),
              (P(3, low=0.5), P(3, low=0.5, seed=1))),
    "Dirichlet": (lambda a: D.Dirichlet(a).log_prob(T([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]])) + D.Dirichlet(a).entropy(),
                  (P(2, 3, low=0.5),)),
    "kl_Gamma": (lambda a, b, c: D.kl_divergence(D.Gamma(a, b), D.Gamma(c, b.flip(0))),
                 (P(3, low=0.5), P(3, low=0.5, seed=1), P(3, low=0.5, seed=2))),
    "kl_Dirichlet": (lambda a, b: D.kl_divergence(D.Dirichlet(a), D.Dirichlet(b)),
                     (P(2, 3, low=0.5), P(3, low=0.5, seed=1))),
    # reparameterized draws with fixed noise
    "rsample_Normal": (_seeded(lambda a, b: D.Normal(a, b).rsample((2,))), (P(3), P(3, low=0.5))),
    "rsample_Laplace": (_seeded(lambda a, b: D.Laplace(a, b).rsample((2,))), (P(3), P(3, low=0.5))),
    "rsample_Cauchy": (_seeded(lambda a, b: D.Cauchy(a, b).rsample((2,))), (P(3), P(3, low=0.5))),
    "rsample_Exponential": (_seeded(lambda r: D.Exponential(r).rsample((2,))), (P(3, low=0.5),)),
    "rsample_Uniform": (_seeded(lambda a, b: D.Uniform(a, a + b).rsample((2,))), (P(3), P(3, low=0.5))),
    "rsample_Gumbel": (_seeded(lambda a, b: D.Gumbel(a, b).rsample((2,))), (P(3), P(3, low=0.5))),
    # a fixed concentration: the draw is then the fixed Gamma(alpha, 1) draw over the rate, smooth in it
    "rsample_Gamma_rate": (_seeded(lambda r: D.Gamma(T([0.3, 1.0, 6.0]), r).rsample((2,))), (P(3, low=0.5),)),
    "rsample_TanhAffine": (_seeded(lambda a, b: D.TransformedDistribution(D.Normal(a, b), [
        D.TanhTransform(), D.AffineTransform(1.0, 2.0)]).rsample((2,))), (P(3), P(3, low=0.5))),
    "rsample_MultivariateNormal": (_seeded(lambda m, a: D.MultivariateNormal(m, a @ a.T + I3).rsample((2,))),
                                   (P(2, 3), P(3, 3))),
}


@pytest.mark.parametrize("name", list(GRADIENTS))
def test_gradients_match_finite_differences(name):
    fn, args = GRADIENTS[name]
    assert gradcheck(fn, args, atol=1e-6, rtol=1e-5)


def test_beta_rsample_gradient_is_unbiased():
    """Gamma draws are not an inverse-CDF map of fixed noise, so the implicit gradient matches finite
    differences only in expectation: d E[x] / d a = b / (a + b)^2 and -a / (a + b)^2 for Beta(a, b), and
    d E[x] / d alpha = 1 for Gamma(alpha, 1); the mean per-draw gradient over many draws must hit them."""
    n = 100_000
    a, b = T(np.full(n, 2.0), requires_grad=True), T(np.full(n, 0.6), requires_grad=True)
    mf.manual_seed(3)
    D.Beta(a, b).rsample().sum().backward()
    for g, want in ((npy(a.grad), 0.6 / 2.6 ** 2), (npy(b.grad), -2.0 / 2.6 ** 2)):
        _within(g.mean(), want, g.std() / math.sqrt(n), "dE[beta]/dconcentration")
    alpha = T(np.full(n, 0.4), requires_grad=True)
    mf.manual_seed(4)
    StandardGamma.apply(alpha).sum().backward()
    g = npy(alpha.grad)
    _within(g.mean(), 1.0, g.std() / math.sqrt(n), "dE[gamma]/dalpha")


def test_gamma_gradient_against_exact_values():
    # dx/dalpha = -(dP(alpha, x)/dalpha) / p(x; alpha), P the regularized incomplete gamma: 40-digit mpmath values
    cases = [(0.01, 1e-30, 6.85166673319527e-27), (0.3, 0.05, 0.49471098700413128), (1.0, 0.7, 0.97321874099238759),
             (2.5, 6.0, 1.6029866492202412), (8.0, 5.5, 0.84157259715498588), (200.0, 230.0, 1.0724010427863758),
             (0.5, 3.0, 2.9129424164403646)]
    a, x, want = (np.array(c) for c in zip(*cases))
    np.testing.assert_allclose(standard_gamma_grad(a, x), want, rtol=1e-8)


def test_not_positive_definite_without_validation():
    with pytest.raises(RuntimeError, match="not positive-definite"):
        D.MultivariateNormal(mf.zeros(2), mf.tensor([[1.0, 2.0], [2.0, 1.0]]), validate_args=False)


# ---------------------------------------------------------------- validation and constraints
def test_validation_errors_are_pytorchs():
    with pytest.raises(ValueError, match=r"Expected parameter scale \(Tensor of shape \(2,\)\) of distribution "
                                         r"Normal\(loc: \(2,\), scale: \(2,\)\) to satisfy the constraint "
                                         r"GreaterThan\(lower_bound=0.0\), but found invalid values"):
        D.Normal(mf.zeros(2), mf.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="constraint Simplex"):
        D.Categorical(probs=mf.tensor([0.5, -0.5]))
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified, but not both."):
        D.Bernoulli(0.3, 0.2)
    with pytest.raises(ValueError, match="`probs` parameter must be at least one-dimensional."):
        D.Categorical(mf.tensor(0.3))
    with pytest.raises(ValueError, match="Exactly one of covariance_matrix or precision_matrix or scale_tril"):
        D.MultivariateNormal(mf.zeros(2))
    with pytest.raises(ValueError, match="constraint PositiveDefinite"):
        D.MultivariateNormal(mf.zeros(2), mf.tensor([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="constraint LowerCholesky"):
        D.MultivariateNormal(mf.zeros(2), scale_tril=mf.tensor([[1.0, 0.0], [0.5, -1.0]]))
    with pytest.raises(ValueError, match="to be positive but found invalid values"):
        D.Geometric(mf.tensor([0.0, 0.5]))
    with pytest.raises(ValueError, match=r"Expected value argument \(Tensor of shape \(\)\) to be within the support "
                                         r"\(IntegerInterval\(lower_bound=0, upper_bound=2\)\)"):
        D.Categorical(logits=mf.zeros(3)).log_prob(mf.tensor(3))
    with pytest.raises(ValueError, match=r"Value is not broadcastable with batch_shape\+event_shape: \(3,\) vs \(2,\)"):
        D.Normal(mf.zeros(2), 1.0).log_prob(mf.zeros(3))
    with pytest.raises(ValueError, match="The right-most size of value must match event_shape"):
        D.MultivariateNormal(mf.zeros(2), mf.eye(2)).log_prob(mf.zeros(3))
    with pytest.raises(ValueError, match="The value argument to log_prob must be a Tensor"):
        D.Normal(0.0, 1.0).log_prob(0.5)
    with pytest.raises(ValueError, match="Expected reinterpreted_batch_ndims <= len"):
        D.Independent(D.Normal(0.0, 1.0), 1)
    assert D.Normal(mf.zeros(1), mf.tensor([-1.0]), validate_args=False).scale.item() == -1.0
    assert D.Uniform(0.0, 1.0, validate_args=False).log_prob(mf.tensor(2.0)).item() == -math.inf


def test_set_default_validate_args():
    before = D.Distribution._validate_args
    try:
        D.Distribution.set_default_validate_args(False)
        assert D.Poisson(mf.tensor([-1.0])).rate.item() == -1.0
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError, match="constraint GreaterThanEq"):
        D.Poisson(mf.tensor([-1.0]))
    with pytest.raises(ValueError):
        D.Distribution.set_default_validate_args(2)
    D.Distribution.set_default_validate_args(before)


def test_constraints_check():
    x = mf.tensor([-1.0, 0.0, 0.5, 1.0, 3.0, float("nan")])
    checks = {constraints.real: [1, 1, 1, 1, 1, 0], constraints.positive: [0, 0, 1, 1, 1, 0],
              constraints.nonnegative: [0, 1, 1, 1, 1, 0], constraints.unit_interval: [0, 1, 1, 1, 0, 0],
              constraints.boolean: [0, 1, 0, 1, 0, 0], constraints.nonnegative_integer: [0, 1, 0, 1, 1, 0],
              constraints.interval(-1.0, 0.5): [1, 1, 1, 0, 0, 0], constraints.half_open_interval(0.0, 1.0):
              [0, 1, 1, 0, 0, 0], constraints.greater_than(0.5): [0, 0, 0, 1, 1, 0],
              constraints.less_than(0.5): [1, 1, 0, 0, 0, 0], constraints.integer_interval(0, 2): [0, 1, 0, 1, 0, 0]}
    for c, want in checks.items():
        assert c.check(x).tolist() == [bool(w) for w in want], c
    assert constraints.simplex.check(mf.tensor([[0.2, 0.8], [0.5, 0.6]])).tolist() == [True, False]
    assert constraints.one_hot.check(mf.tensor([[0.0, 1.0], [1.0, 1.0]])).tolist() == [True, False]
    assert constraints.real_vector.check(mf.tensor([[0.0, 1.0], [1.0, float("nan")]])).tolist() == [True, False]
    spd = mf.tensor(np.stack([_spd(0, 2), -_spd(1, 2)]))
    assert constraints.positive_definite.check(spd).tolist() == [True, False]
    assert constraints.lower_cholesky.check(mf.tensor([[[1.0, 0.0], [2.0, 1.0]], [[1.0, 1.0], [0.0, 1.0]]])).tolist() \
        == [True, False]
    assert constraints.is_dependent(D.Uniform.support) and not constraints.is_dependent(constraints.real)
    assert repr(constraints.independent(constraints.real, 1)) == "IndependentConstraint(Real(), 1)"
    with pytest.raises(ValueError, match="Cannot determine validity of dependent constraint"):
        constraints.dependent.check(x)


# ---------------------------------------------------------------- transforms
def test_transforms_invert_and_their_jacobians():
    x = T([-1.5, -0.2, 0.3, 2.0])
    for t, dydx in ((D.ExpTransform(), np.exp), (D.SigmoidTransform(), lambda v: np.exp(-v) / (1 + np.exp(-v)) ** 2),
                    (D.TanhTransform(), lambda v: 1 - np.tanh(v) ** 2),
                    (D.AffineTransform(1.0, -3.0), lambda v: np.full_like(v, -3.0)),
                    (D.SoftplusTransform(), lambda v: 1 / (1 + np.exp(-v))),
                    (D.ComposeTransform([D.TanhTransform(), D.AffineTransform(T(0.5), T(2.0))]),
                     lambda v: 2 * (1 - np.tanh(v) ** 2))):
        y = t(x)
        close(t.inv(y), npy(x), 1e-9)
        close(t.log_abs_det_jacobian(x, y), np.log(np.abs(dydx(npy(x)))), 1e-9)
        close(t.inv.log_abs_det_jacobian(y, x), -np.log(np.abs(dydx(npy(x)))), 1e-9)
    cached = D.ExpTransform().with_cache()
    y = cached(x)
    assert cached.inv(y) is x and D.ExpTransform() == D.ExpTransform() and D.ExpTransform().inv.inv == D.ExpTransform()
    assert D.AffineTransform(0.0, -2.0).sign == -1 and D.ComposeTransform([D.AffineTransform(0.0, -2.0)] * 2).sign == 1
    d = D.TransformedDistribution(D.Normal(T([0.0, 1.0]), T([1.0, 0.5])), D.AffineTransform(T([1.0, 2.0]), 3.0))
    close(d.log_prob(T([1.5, 4.0])), _normal_logpdf(np.array([0.5 / 3, 2 / 3]), np.array([0.0, 1.0]),
                                                    np.array([1.0, 0.5])) - math.log(3.0))
    close(d.cdf(d.icdf(T([0.2, 0.7]))), [0.2, 0.7], 1e-9)
    assert d.support.check(T([0.0, 1.0])).all() and d.batch_shape == (2,)


# ---------------------------------------------------------------- the GPU path against PyTorch
@pytest.mark.gpu
def test_cuda_values_and_gradients_against_torch(torch):
    rng = np.random.default_rng(0)
    cov = _spd(6, 3)
    specs = {  # name: (builder over a module, parameters, value)
        "Normal": (lambda m, a, b: m.distributions.Normal(a, b.abs() + 0.5), 2, X),
        "Beta": (lambda m, a, b: m.distributions.Beta(a.abs() + 0.5, b.abs() + 0.5), 2, P3),
        "Categorical": (lambda m, a: m.distributions.Categorical(logits=a), 1, np.array([0, 2, 1])),
        "Bernoulli": (lambda m, a: m.distributions.Bernoulli(logits=a), 1, np.array([1.0, 0.0, 1.0])),
        "Poisson": (lambda m, a: m.distributions.Poisson(a.abs() + 0.5), 1, K),
        "MultivariateNormal": (lambda m, a: m.distributions.MultivariateNormal(
            a, m.tensor(cov, dtype=a.dtype, device=a.device)), 1, rng.standard_normal((4, 3))),
    }
    for name, (build, n_params, value) in specs.items():
        shape = (3, 3) if name == "Categorical" else (3,)
        params = [rng.standard_normal(shape) for _ in range(n_params)]
        results = []
        for m, dev in ((mf, "cuda"), (torch, "cuda")):
            ps = [m.tensor(p, dtype=m.float64, device=dev, requires_grad=True) for p in params]
            d = build(m, *ps)
            v = m.tensor(value, device=dev) if name == "Categorical" else m.tensor(value, dtype=m.float64, device=dev)
            out = d.log_prob(v).sum() + (d.entropy().sum() if name != "Poisson" else 0)
            out = out + m.distributions.kl_divergence(d, build(m, *[p.detach() * 0.7 for p in ps])).sum()
            out.backward()
            results.append([float(out.detach().cpu())] + [p.grad.cpu().numpy() for p in ps])
        np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-9, err_msg=name)
        for g_ours, g_theirs in zip(results[0][1:], results[1][1:]):
            np.testing.assert_allclose(g_ours, g_theirs, rtol=1e-8, atol=1e-10, err_msg=name)
    # draws on the GPU (CuPy's generator): their means within 6 sigma
    cuda = {"device": "cuda", "dtype": mf.float64}
    for d, mean, var in ((D.Poisson(mf.tensor(3.0, **cuda)), 3.0, 3.0),
                         (D.Beta(mf.tensor(2.0, **cuda), mf.tensor(3.0, **cuda)), 0.4, 0.04),
                         (D.Binomial(10, mf.tensor(0.3, **cuda)), 3.0, 2.1),
                         (D.Categorical(logits=mf.zeros(4, **cuda)), 1.5, 1.25),
                         (D.Normal(mf.tensor(1.0, **cuda), 2.0), 1.0, 4.0)):
        x = d.sample((N,))
        assert x.device.type == "cuda" and x.shape == (N,)
        _within(float(x.double().mean()), mean, math.sqrt(var / N), f"{type(d).__name__} draws on the GPU")


def test_beta_draws_at_small_concentrations_are_numbers():
    """Gamma draws that round to 0 become the smallest normal number (PyTorch's clamp), so Beta's ratio of two
    draws is never 0 / 0."""
    import minifused as mf

    mf.manual_seed(0)
    for dtype in (mf.float32, mf.float64):
        a = mf.full((20_000,), 1e-3, dtype=dtype)
        s = mf.distributions.Beta(a, a).sample().numpy()
        assert not np.isnan(s).any() and abs(s.mean() - 0.5) < 0.03


# ---------------------------------------------------------------- Gamma and Dirichlet
ALPHA = np.array([[0.5, 1.5, 3.0], [2.0, 0.7, 1.2]])  # a batch of 2 Dirichlet laws on the 3-simplex
SIMPLEX = np.array([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]])


def _dirichlet_logpdf(x, a):
    return ((a - 1) * np.log(x)).sum(-1) + _lgamma(a.sum(-1)) - _lgamma(a).sum(-1)


def test_dirichlet_values_and_shapes():
    d = D.Dirichlet(T(ALPHA))
    assert (d.batch_shape, d.event_shape) == ((2,), (3,)) and d.support is constraints.simplex and d.has_rsample
    total = ALPHA.sum(-1, keepdims=True)
    close(d.log_prob(T(SIMPLEX)), _dirichlet_logpdf(SIMPLEX, ALPHA))
    close(d.log_prob(T(SIMPLEX[0])), _dirichlet_logpdf(SIMPLEX[0], ALPHA))  # one value broadcast over the batch
    a0 = total[:, 0]
    close(d.entropy(), _lgamma(ALPHA).sum(-1) - _lgamma(a0) + (a0 - 3) * _digamma(a0)
          - ((ALPHA - 1) * _digamma(ALPHA)).sum(-1), 1e-7)
    close(d.mean, ALPHA / total)
    close(d.variance, ALPHA * (total - ALPHA) / (total ** 2 * (total + 1)))
    # the mode: (alpha - 1)_+ normalized; every concentration below 1: PyTorch's first vertex
    close(D.Dirichlet(T([[2.0, 3.0, 0.5], [0.5, 0.7, 0.2]])).mode, [[1 / 3, 2 / 3, 0.0], [1.0, 0.0, 0.0]])
    e = d.expand((4, 2))
    assert (e.batch_shape, e.event_shape) == ((4, 2), (3,)) and e._validate_args
    assert tuple(e.sample((5,)).shape) == (5, 4, 2, 3) and tuple(e.log_prob(T(SIMPLEX)).shape) == (4, 2)
    assert D.Dirichlet(mf.ones(3)).batch_shape == () and D.Dirichlet(mf.ones(3)).sample().dtype == mf.float32


def test_gamma_mode_shapes_and_module_paths():
    g = D.Gamma(T([0.5, 3.0]), T([1.0, 2.0]))
    close(g.mode, [0.0, 1.0])
    assert D.Gamma(2.0, 1.0).batch_shape == () and D.Gamma.support is constraints.nonnegative
    assert D.Gamma(mf.ones(2, 1), mf.ones(3)).batch_shape == (2, 3)
    e = g.expand((4, 2))
    assert e.batch_shape == (4, 2) and tuple(e.rsample((3,)).shape) == (3, 4, 2)
    close(D.Gamma(2.0, 1.0).log_prob(0.5), math.log(0.5) - 0.5, 1e-6)  # a number as the value, as PyTorch's
    with pytest.raises(NotImplementedError, match="the derivative for 'igamma: input' is not implemented"):
        D.Gamma(T([1.0], requires_grad=True), 2.0).cdf(T([0.5])).sum().backward()
    from minifused.distributions.dirichlet import Dirichlet
    from minifused.distributions.gamma import Gamma
    assert Gamma is D.Gamma and Dirichlet is D.Dirichlet


def test_dirichlet_draws_match_moments():
    d = D.Dirichlet(T(ALPHA))
    mf.manual_seed(5)
    x = npy(d.sample((N,)))
    assert x.shape == (N, 2, 3) and bool(d.support.check(T(x)).all())
    mean, var = npy(d.mean), npy(d.variance)
    for b in range(2):
        for k in range(3):
            _within(x[:, b, k].mean(), mean[b, k], math.sqrt(var[b, k] / N), "dirichlet mean")
            m4 = ((x[:, b, k] - mean[b, k]) ** 4).mean()
            _within(x[:, b, k].var(), var[b, k], math.sqrt((m4 - var[b, k] ** 2) / N), "dirichlet variance")
        a0 = ALPHA[b].sum()  # the off-diagonal covariance: -alpha_i alpha_j / (a0^2 (a0 + 1))
        cov01 = -ALPHA[b, 0] * ALPHA[b, 1] / (a0 ** 2 * (a0 + 1))
        prod = (x[:, b, 0] - mean[b, 0]) * (x[:, b, 1] - mean[b, 1])
        _within(prod.mean(), cov01, prod.std() / math.sqrt(N), "dirichlet covariance")


def test_draws_at_extreme_parameters_stay_in_the_support():
    """Gamma draws that underflow over a huge rate, and Dirichlet draws at tiny concentrations, are clamped as
    PyTorch's (to the smallest normal number, and below 1 by one ulp): positive, finite log densities."""
    mf.manual_seed(0)
    for dtype in (mf.float32, mf.float64):
        tiny, eps = float(mf.finfo(dtype).tiny), float(mf.finfo(dtype).eps)
        g = D.Gamma(mf.full((1000,), 1e-3, dtype=dtype), mf.tensor(1e30, dtype=dtype))
        x = g.sample()
        assert float(x.min()) >= tiny and bool(g.log_prob(x).isfinite().all())
        d = D.Dirichlet(mf.full((1000, 3), 1e-3, dtype=dtype))
        s = npy(d.sample())
        assert not np.isnan(s).any() and s.min() >= tiny and s.max() <= 1 - eps / 2
        np.testing.assert_allclose(s.sum(-1), 1.0, atol=2 * eps)
    rate = T([1e300], requires_grad=True)
    D.Gamma(T([1e-3]), rate).rsample().sum().backward()  # the clamp is not recorded: the gradient is -x / rate
    assert np.isfinite(npy(rate.grad)).all()


def test_gamma_and_dirichlet_kl():
    """Closed forms against float64 references, then against Monte-Carlo means of log p - log q over draws of p
    (the log densities in NumPy)."""
    ap, bp, aq, bq = POS, SCALE, np.array([1.5, 0.8, 2.0]), np.array([0.5, 1.0, 3.0])
    p, q = D.Gamma(T(ap), T(bp)), D.Gamma(T(aq), T(bq))
    kl_gamma = D.kl_divergence(p, q)
    ref = ((ap - aq) * _digamma(ap) - _lgamma(ap) + _lgamma(aq) + aq * np.log(bp / bq) + ap * (bq - bp) / bp)
    close(kl_gamma, ref, 1e-7)
    close(D.kl_divergence(p, p), np.zeros(3), 1e-12)

    def gamma_logpdf(x, a, b):
        return a * np.log(b) + (a - 1) * np.log(x) - b * x - _lgamma(a)

    beta = np.array([2.0, 1.0, 0.4])
    dp, dq = D.Dirichlet(T(ALPHA)), D.Dirichlet(T(beta))
    kl_dir = D.kl_divergence(dp, dq)
    a0, b0 = ALPHA.sum(-1), beta.sum()
    ref = (_lgamma(a0) - _lgamma(ALPHA).sum(-1) - _lgamma(b0) + _lgamma(beta).sum()
           + ((ALPHA - beta) * (_digamma(ALPHA) - _digamma(a0)[:, None])).sum(-1))
    close(kl_dir, ref, 1e-7)
    close(D.kl_divergence(dp, dp), np.zeros(2), 1e-12)
    mf.manual_seed(6)
    xg, xd = npy(p.sample((N,))), npy(dp.sample((N,)))
    for got, diff in ((kl_gamma, gamma_logpdf(xg, ap, bp) - gamma_logpdf(xg, aq, bq)),
                      (kl_dir, _dirichlet_logpdf(xd, ALPHA) - _dirichlet_logpdf(xd, beta))):
        for i, want in enumerate(npy(got)):
            _within(diff[:, i].mean(), want, diff[:, i].std() / math.sqrt(N), "KL against Monte Carlo")


def test_gamma_and_dirichlet_rsample_gradients_are_unbiased():
    """The implicit gradient of the gamma draws matches finite differences only in expectation (see the Beta
    test): d E[x] / d alpha = 1 / rate and d E[x] / d rate = -alpha / rate^2 for Gamma(alpha, rate);
    d E[x_0] / d alpha_j = (delta_0j A - alpha_0) / A^2 (A = sum alpha) for Dirichlet(alpha)."""
    n = 100_000
    alpha, rate = T(np.full(n, 0.6), requires_grad=True), T(np.full(n, 2.0), requires_grad=True)
    mf.manual_seed(8)
    D.Gamma(alpha, rate).rsample().sum().backward()
    for g, want in ((npy(alpha.grad), 1 / 2.0), (npy(rate.grad), -0.6 / 4.0)):
        _within(g.mean(), want, g.std() / math.sqrt(n), "dE[gamma]/dparameter")
    a = np.array([0.4, 1.0, 2.5])
    conc = T(np.tile(a, (n, 1)), requires_grad=True)
    mf.manual_seed(9)
    D.Dirichlet(conc).rsample()[:, 0].sum().backward()
    g = npy(conc.grad)
    for j in range(3):
        want = ((j == 0) * a.sum() - a[0]) / a.sum() ** 2
        _within(g[:, j].mean(), want, g[:, j].std() / math.sqrt(n), "dE[dirichlet_0]/dalpha")


def test_gamma_and_dirichlet_validation():
    with pytest.raises(ValueError, match=r"Expected parameter rate \(Tensor of shape \(2,\)\) of distribution Gamma"
                                         r".* to satisfy the constraint GreaterThan\(lower_bound=0.0\)"):
        D.Gamma(mf.ones(2), mf.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="parameter concentration"):
        D.Gamma(mf.tensor([0.0]), 1.0)
    with pytest.raises(ValueError, match=r"to be within the support \(GreaterThanEq\(lower_bound=0.0\)\)"):
        D.Gamma(1.0, 1.0).log_prob(mf.tensor(-1.0))
    with pytest.raises(ValueError, match=r"to be within the support \(GreaterThanEq\(lower_bound=0.0\)\)"):
        D.Gamma(1.0, 1.0).cdf(mf.tensor([-1.0]))
    with pytest.raises(ValueError, match=r"Dirichlet\(concentration: \(2,\)\) to satisfy the constraint "
                                         r"IndependentConstraint\(GreaterThan\(lower_bound=0.0\), 1\)"):
        D.Dirichlet(mf.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="`concentration` parameter must be at least one-dimensional."):
        D.Dirichlet(mf.tensor(1.0))
    with pytest.raises(ValueError, match=r"to be within the support \(Simplex\(\)\)"):
        D.Dirichlet(mf.ones(2, 3)).log_prob(mf.tensor([0.5, 0.6, 0.1]))
    with pytest.raises(ValueError, match="The right-most size of value must match event_shape"):
        D.Dirichlet(mf.ones(3)).log_prob(mf.tensor([0.5, 0.5]))
    assert D.Gamma(mf.tensor([-1.0]), 1.0, validate_args=False).concentration.item() == -1.0
    assert D.Dirichlet(mf.ones(2), validate_args=False).log_prob(mf.tensor([0.7, 0.7])).item() == 0.0
