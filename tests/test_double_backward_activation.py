"""Higher-order gradients (``create_graph=True``) of the activations, ``normalize``, the elementwise losses and
dropout: gradgradcheck in float64 at random points away from each op's kinks, a few second derivatives against
hand-derived formulas, and a third derivative."""
import warnings

import numpy as np
import pytest

import minifused as mf
from minifused import autograd

F = mf.nn.functional


def leaf(a):
    return mf.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


def away(rng, shape, kinks, lo=-4.0, hi=4.0, gap=0.05):
    """Uniform draws in [lo, hi) at least ``gap`` from each of ``kinks`` (where the op is not smooth)."""
    x = rng.uniform(lo, hi, shape)
    while True:
        near = np.zeros(x.shape, bool)
        for k in kinks:
            near |= np.abs(x - k) < gap
        if not near.any():
            return x
        x[near] = rng.uniform(lo, hi, int(near.sum()))


def seeded(fn, seed=7):
    """``fn`` with the random draws (dropout's mask, rrelu's slopes) the same at every call."""
    def run(*args):
        mf.manual_seed(seed)
        return fn(*args)
    return run


def inplace(fn):
    """``fn`` applied in place to a non-leaf copy of the input (the node's input is then a stand-in)."""
    def run(x):
        y = x * 1.0
        out = fn(y)
        assert out is y
        return y
    return run


# (name, function, kinks)
ACTIVATIONS = [
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.1), [0]),
    ("leaky_relu_", inplace(lambda y: F.leaky_relu_(y, 0.2)), [0]),
    ("hardtanh", lambda x: F.hardtanh(x, -0.5, 0.8), [-0.5, 0.8]),
    ("hardtanh_", inplace(lambda y: F.hardtanh_(y, -1.0, 2.0)), [-1, 2]),
    ("relu6", lambda x: F.relu6(x * 2), [0, 3]),
    ("hardsigmoid", F.hardsigmoid, [-3, 3]),
    ("elu", lambda x: F.elu(x, 0.7), [0]),
    ("elu_", inplace(lambda y: F.elu_(y, 1.5)), [0]),
    ("selu", F.selu, [0]),
    ("celu", lambda x: F.celu(x, 1.3), [0]),
    ("silu", F.silu, []),
    ("mish", F.mish, []),
    ("hardswish", F.hardswish, [-3, 3]),
    ("softplus", F.softplus, []),
    ("softplus_beta_threshold", lambda x: F.softplus(x, beta=2.0, threshold=1.5), [0.75]),
    ("softsign", F.softsign, [0]),
    ("logsigmoid", F.logsigmoid, []),
    ("tanhshrink", F.tanhshrink, []),
    ("rrelu_eval", lambda x: F.rrelu(x, 0.1, 0.3), [0]),
    ("rrelu_train", seeded(lambda x: F.rrelu(x, 0.1, 0.3, training=True)), [0]),
    ("rrelu_train_", seeded(inplace(lambda y: F.rrelu_(y, 0.1, 0.3, training=True))), [0]),
    ("threshold", lambda x: F.threshold(x, 0.2, -1.0), [0.2]),
    ("threshold_", inplace(lambda y: F.threshold_(y, -0.3, 2.0)), [-0.3]),
    ("hardshrink", lambda x: F.hardshrink(x, 0.4), [-0.4, 0.4]),
    ("softshrink", lambda x: F.softshrink(x, 0.4), [-0.4, 0.4]),
]


@pytest.mark.parametrize("shape", [(7,), (2, 3, 4)])
@pytest.mark.parametrize("name,fn,kinks", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_gradgradcheck(name, fn, kinks, shape):
    x = leaf(away(np.random.default_rng(len(name)), shape, kinks))
    # an outer smooth op, so the activation's second derivative and its gradient's own graph both matter
    assert autograd.gradgradcheck(lambda x: fn(x) * x.tanh(), (x,))
    assert autograd.gradgradcheck(fn, (x,))


def _second(fn, xv):
    x = leaf(xv)
    (g,) = autograd.grad(fn(x).sum(), x, create_graph=True)
    (h,) = autograd.grad(g.sum(), x)
    return h.numpy()


def _sig(z):
    return 1 / (1 + np.exp(-z))


def test_second_derivatives_match_the_formulas():
    x = away(np.random.default_rng(1), (9,), [0, 0.75])
    s = _sig(x)
    np.testing.assert_allclose(_second(F.silu, x), s * (1 - s) * (2 + x * (1 - 2 * s)), rtol=1e-10)
    s2 = _sig(2 * x)  # softplus(beta=2): linear (second derivative 0) where 2 x > 1.5
    np.testing.assert_allclose(_second(lambda t: F.softplus(t, beta=2.0, threshold=1.5), x),
                               np.where(2 * x > 1.5, 0, 2 * s2 * (1 - s2)), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(_second(lambda t: F.elu(t, 0.7), x), np.where(x > 0, 0, 0.7 * np.exp(x)), rtol=1e-10)
    np.testing.assert_allclose(_second(F.logsigmoid, x), -s * (1 - s), rtol=1e-10)
    np.testing.assert_allclose(_second(F.softsign, x), -2 * np.sign(x) / (1 + np.abs(x)) ** 3, rtol=1e-10)
    # (leaky_relu's own second derivative is 0: that of x * leaky_relu(x) is 2 leaky_relu'(x))
    np.testing.assert_allclose(_second(lambda t: F.leaky_relu(t, 0.1) * t, x), np.where(x > 0, 2, 0.2), rtol=1e-12)


def test_bce_with_logits_second_derivative_matches_the_formula():
    rng = np.random.default_rng(2)
    xv, tv, wv, pwv = rng.normal(0, 2, (3, 4)), rng.uniform(0, 1, (3, 4)), rng.uniform(0.5, 2, 4), rng.uniform(
        0.5, 3, 4)
    s = _sig(xv)
    expected = wv * (1 + (pwv - 1) * tv) * s * (1 - s)
    got = _second(lambda x: F.binary_cross_entropy_with_logits(x, mf.tensor(tv), mf.tensor(wv), reduction="sum",
                                                                pos_weight=mf.tensor(pwv)), xv)
    np.testing.assert_allclose(got, expected, rtol=1e-10)


@pytest.mark.parametrize("fn,kinks", [(F.silu, []), (F.mish, []), (lambda x: F.elu(x, 0.7), [0]),
                                      (lambda x: F.leaky_relu(x, 0.1), [0]), (seeded(lambda x: F.dropout(x, 0.4)), [])],
                         ids=["silu", "mish", "elu", "leaky_relu", "dropout"])
def test_third_derivative(fn, kinks):
    x = leaf(away(np.random.default_rng(3), (6,), kinks))

    def first(x):
        return autograd.grad((fn(x) * x.tanh()).sum(), x, create_graph=True)[0]

    assert autograd.gradgradcheck(first, (x,))


def test_silu_third_derivative_matches_the_formula():
    xv = np.linspace(-3, 3, 7)
    x = leaf(xv)
    (g,) = autograd.grad(F.silu(x).sum(), x, create_graph=True)
    (h,) = autograd.grad(g.sum(), x, create_graph=True)
    (third,) = autograd.grad(h.sum(), x)
    s = _sig(xv)
    d1, d2 = s * (1 - s), s * (1 - s) * (1 - 2 * s)  # s', s''
    np.testing.assert_allclose(third.numpy(), 3 * d2 + xv * (d2 * (1 - 2 * s) - 2 * d1 * d1), rtol=1e-10)


# ---------------------------------------------------------------- normalize
@pytest.mark.parametrize("p", [2.0, 1.0, float("inf"), 0.0, 3.0, 1.5])
@pytest.mark.parametrize("shape,dim", [((3, 4), 1), ((3, 4), 0), ((2, 3, 4), -1), ((5,), 0)])
def test_normalize_gradgradcheck(p, shape, dim):
    rng = np.random.default_rng(4)
    xv = away(rng, shape, [0], gap=0.2)
    if p == float("inf"):  # no ties for the max
        xv = np.sign(xv) * (np.abs(xv) + np.arange(xv.size).reshape(shape) * 0.05)
    x = leaf(xv)
    assert autograd.gradgradcheck(lambda x: F.normalize(x, p, dim) * x.tanh(), (x,))


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0])
def test_normalize_clamped_and_zero_rows(p):
    """Rows whose norm is under eps (the zero row too) are divided by eps: no second-order term, and no NaN."""
    xv = np.array([[0.3, -0.2, 0.1], [0.0, 0.0, 0.0], [2.0, -1.5, 0.7]])
    x = leaf(xv)
    assert autograd.gradgradcheck(lambda x: F.normalize(x, p, 1, eps=1.0) ** 2, (x,))
    (g,) = autograd.grad((F.normalize(x, p, 1) * x.tanh()).sum(), x, create_graph=True)
    (h,) = autograd.grad(g.sum(), x)
    assert np.isfinite(h.numpy()[[0, 2]]).all() and np.isfinite(g.detach().numpy()[[0, 2]]).all()


# ---------------------------------------------------------------- losses
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weight", [None, (4,), (3, 4)])
def test_binary_cross_entropy_gradgradcheck(reduction, weight):
    rng = np.random.default_rng(5)
    x, t = leaf(rng.uniform(0.05, 0.95, (3, 4))), leaf(rng.uniform(0, 1, (3, 4)))
    w = None if weight is None else mf.tensor(rng.uniform(0.5, 2, weight))
    assert autograd.gradgradcheck(lambda x, t: F.binary_cross_entropy(x, t, w, reduction=reduction), (x, t))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("pos_weight", [False, True])
def test_binary_cross_entropy_with_logits_gradgradcheck(reduction, weighted, pos_weight):
    rng = np.random.default_rng(6)
    x, t = leaf(rng.normal(0, 2, (3, 4))), leaf(rng.uniform(0, 1, (3, 4)))
    w = mf.tensor(rng.uniform(0.5, 2, (3, 4))) if weighted else None
    pw = mf.tensor(rng.uniform(0.5, 3, (4,))) if pos_weight else None
    assert autograd.gradgradcheck(
        lambda x, t: F.binary_cross_entropy_with_logits(x, t, w, reduction=reduction, pos_weight=pw), (x, t))


@pytest.mark.parametrize("t_shape", [(3, 4), (4,)])
@pytest.mark.parametrize("loss", ["smooth_l1_1", "smooth_l1_0.5", "smooth_l1_0", "huber_0.7"])
def test_smooth_l1_and_huber_gradgradcheck(loss, t_shape):
    kind, beta = loss.rsplit("_", 1)
    beta = float(beta)
    rng = np.random.default_rng(7)
    tv = rng.normal(0, 1, t_shape)
    xv = tv + away(rng, (3, 4), [-beta, 0, beta], lo=-2, hi=2)  # d = x - t away from the kinks
    x, t = leaf(xv), leaf(tv)

    def fn(x, t):
        with warnings.catch_warnings():  # (the target broadcast warning)
            warnings.simplefilter("ignore")
            if kind == "huber":
                return F.huber_loss(x, t, reduction="none", delta=beta) * x.tanh()
            return F.smooth_l1_loss(x, t, reduction="none", beta=beta) * x.tanh()

    assert autograd.gradgradcheck(fn, (x, t))


@pytest.mark.parametrize("t_shape", [(3, 4), (4,)])
@pytest.mark.parametrize("log_target", [False, True])
@pytest.mark.parametrize("reduction", ["batchmean", "none"])
def test_kl_div_gradgradcheck(log_target, t_shape, reduction):
    rng = np.random.default_rng(8)
    x = leaf(np.log(rng.uniform(0.1, 1, (3, 4))))
    t = leaf(np.log(rng.uniform(0.1, 1, t_shape)) if log_target else rng.uniform(0.1, 1, t_shape))
    assert autograd.gradgradcheck(
        lambda x, t: F.kl_div(x, t, reduction=reduction, log_target=log_target) * x.exp(), (x, t))


# ---------------------------------------------------------------- dropout
@pytest.mark.parametrize("p", [0.3, 0.7])
@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("shape", [(9,), (2, 3, 4)])
def test_dropout_gradgradcheck(p, in_place, shape):
    x = leaf(np.random.default_rng(9).normal(size=shape))
    drop = inplace(lambda y: F.dropout(y, p, inplace=True)) if in_place else (lambda x: F.dropout(x, p))
    assert autograd.gradgradcheck(seeded(lambda x: drop(x.tanh()) * x), (x,))


def test_dropout_second_derivative_keeps_the_mask():
    xv = np.random.default_rng(10).normal(size=50)
    x = leaf(xv)
    mf.manual_seed(1)
    y = F.dropout(x * x, 0.5)
    kept = y.detach().numpy() != 0
    (g,) = autograd.grad(y.sum(), x, create_graph=True)
    (h,) = autograd.grad(g.sum(), x)
    np.testing.assert_allclose(g.detach().numpy(), np.where(kept, 4 * xv, 0))
    np.testing.assert_allclose(h.numpy(), np.where(kept, 4.0, 0))
