"""Second (and third) derivatives under create_graph=True of the special functions (xlogy, logaddexp, copysign,
fmax, sinc, logit ...), nan_to_num, angle, diagonal_scatter, logcumsumexp, frexp, nextafter, the scans (cumprod,
cummax, cummin) and scatter_reduce: gradgradcheck in float64 against finite differences, a few second derivatives
against their closed forms, and the first gradients taken with a graph equal to those taken without."""
import math
import zlib

import numpy as np
import pytest

import minifused as mf
from minifused import autograd
from minifused.autograd import gradgradcheck


def _rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _t(array):
    return mf.tensor(np.asarray(array, np.float64), requires_grad=True)


def _uniform(rng, shape, lo=-2.0, hi=2.0):
    return _t(rng.uniform(lo, hi, shape))


def _signed(rng, shape, lo=0.3, hi=2.0):
    """Magnitudes in [lo, hi] with random signs: away from 0, where copysign and angle have their kinks."""
    return _t(rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape))


def _same_first_gradients(fn, inputs):
    """The gradients with create_graph=True have the values of the array backward's."""
    out = fn(*inputs)
    g = mf.tensor(_rng("g", tuple(out.shape)).standard_normal(out.shape))
    plain = autograd.grad(fn(*inputs), inputs, g, allow_unused=True)
    graph = autograd.grad(fn(*inputs), inputs, g, create_graph=True, allow_unused=True)
    for p, q in zip(plain, graph):
        assert (p is None) == (q is None)
        if p is not None:
            np.testing.assert_allclose(q.detach().numpy(), p.numpy(), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- special.py's binary functions
BINARY_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 2))]
BINARY = {  # name: (function, draw of a, draw of b)
    "xlogy": (mf.xlogy, _uniform, lambda rng, s: _uniform(rng, s, 0.3, 2.0)),
    "logaddexp": (mf.logaddexp, _uniform, _uniform),
    "logaddexp2": (mf.logaddexp2, _uniform, _uniform),
    "copysign": (lambda a, b: mf.copysign(a, b) * a, _signed, _signed),
    "fmax": (lambda a, b: mf.fmax(a, b) ** 2, _uniform, _uniform),
    "fmin": (lambda a, b: mf.fmin(a, b) ** 2, _uniform, _uniform),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
def test_binary_gradgradcheck(name, shapes):
    fn, draw_a, draw_b = BINARY[name]
    rng = _rng(name, shapes)
    a, b = draw_a(rng, shapes[0]), draw_b(rng, shapes[1])
    assert gradgradcheck(fn, (a, b))
    _same_first_gradients(fn, (a, b))


@pytest.mark.parametrize("variant", ["number_b", "number_a", "xlogy_", "copysign_", "copysign_number"])
def test_binary_variants_gradgradcheck(variant):
    rng = _rng(variant)
    a, b = _uniform(rng, (2, 3), 0.3, 2.0), _uniform(rng, (3,), 0.3, 2.0)
    fn, inputs = {
        "number_b": (lambda a: mf.xlogy(a * a, 1.7), (a,)),
        "number_a": (lambda b: mf.xlogy(1.7, b * b), (b,)),
        "xlogy_": (lambda a, b: (a * 1).xlogy_(b), (a, b)),
        "copysign_": (lambda a, b: (a * a).copysign_(-b) * a, (a, b)),
        "copysign_number": (lambda a: mf.copysign(a, -1.0) * a, (a,)),
    }[variant]
    assert gradgradcheck(fn, inputs)


def test_binary_edges_as_the_array_backward():
    """xlogy where a == 0 and b <= 0, logaddexp of infinities, fmax with a NaN and ties: the gradients' values."""
    a = _t([0.0, 0.0, 1.0, 2.0])
    b = _t([0.0, -1.0, 3.0, 2.0])
    _same_first_gradients(mf.xlogy, (a, b))
    _same_first_gradients(mf.logaddexp, (_t([math.inf, -math.inf, 1.0]), _t([1.0, 2.0, -math.inf])))
    _same_first_gradients(mf.fmax, (_t([1.0, math.nan, 2.0]), _t([math.nan, 1.0, 2.0])))
    _same_first_gradients(mf.copysign, (_t([0.0, -1.5, 2.0]), _t([1.0, 2.0, -0.0])))


def test_logaddexp_second_derivative_closed_form():
    rng = _rng("logaddexp_closed")
    a0, b0 = rng.uniform(-2, 2, 5), rng.uniform(-2, 2, 5)
    a, b = _t(a0), _t(b0)
    ga, gb = autograd.grad(mf.logaddexp(a, b).sum(), (a, b), create_graph=True)
    haa, hab = autograd.grad(ga.sum(), (a, b))
    s = 1 / (1 + np.exp(b0 - a0))
    np.testing.assert_allclose(haa.numpy(), s * (1 - s), rtol=1e-12)
    np.testing.assert_allclose(hab.numpy(), -s * (1 - s), rtol=1e-12)


def test_xlogy_second_derivative_closed_form():
    rng = _rng("xlogy_closed")
    a0, b0 = rng.uniform(-2, 2, 5), rng.uniform(0.3, 2, 5)
    a, b = _t(a0), _t(b0)
    ga, gb = autograd.grad(mf.xlogy(a, b).sum(), (a, b), create_graph=True)
    hba, hbb = autograd.grad(gb.sum(), (a, b))
    np.testing.assert_allclose(hba.numpy(), 1 / b0, rtol=1e-12)
    np.testing.assert_allclose(hbb.numpy(), -a0 / b0 ** 2, rtol=1e-12)


# ---------------------------------------------------------------- unary: special.py's, abs_, nan_to_num, angle, frexp
UNARY = {  # name: (function, low, high)
    "erfc": (mf.erfc, -2.0, 2.0),
    "exp2": (mf.exp2, -2.0, 2.0),
    "sinc": (mf.sinc, -2.0, 2.0),
    "deg2rad": (lambda x: mf.deg2rad(x) * x, -2.0, 2.0),
    "rad2deg": (lambda x: mf.rad2deg(x) * x, -2.0, 2.0),
    "logit": (mf.logit, 0.05, 0.95),
    "logit_eps": (lambda x: mf.logit(x, eps=0.2), 0.25, 0.75),
    "logit_eps_cut": (lambda x: mf.logit(x, eps=0.2) * x, 0.02, 0.15),
    "logit_": (lambda x: (x * 1).logit_(), 0.05, 0.95),
    "sinc_": (lambda x: (x * 1).sinc_(), -2.0, 2.0),
    "abs_": (lambda x: (x * x - 1).abs_() * x, 1.2, 2.0),
    "nan_to_num": (lambda x: mf.nan_to_num(x * x), -2.0, 2.0),
    "nan_to_num_": (lambda x: (x * x).nan_to_num_(), -2.0, 2.0),
    "angle": (lambda x: mf.angle(x) * x, 0.3, 2.0),
    "angle_negative": (lambda x: mf.angle(x) * x, -2.0, -0.3),
    "frexp": (lambda x: mf.frexp(x * x).mantissa * x, 0.3, 2.0),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("shape", [(), (4,), (2, 3)], ids=str)
def test_unary_gradgradcheck(name, shape):
    fn, lo, hi = UNARY[name]
    x = _uniform(_rng(name, shape), shape, lo, hi)
    assert gradgradcheck(fn, (x,))
    _same_first_gradients(fn, (x,))


def test_sinc_at_zero():
    """sinc's derivative is 0 at 0, as the array backward's; its own derivative there is sinc''(0) = -pi**2 / 3."""
    x = _t([0.0, 0.5])
    (g,) = autograd.grad(mf.sinc(x).sum(), x, create_graph=True)
    (h,) = autograd.grad(g.sum(), x)
    assert g.detach().numpy()[0] == 0
    np.testing.assert_allclose(h.numpy(), [-math.pi ** 2 / 3, 16 / math.pi - 2 * math.pi], rtol=1e-12)
    assert gradgradcheck(mf.sinc, (_t([0.0, 0.4, -1.3]),))


def test_logit_outside_as_the_array_backward():
    x = _t([-0.5, 0.0, 0.1, 0.5, 1.0, 1.5])
    _same_first_gradients(mf.logit, (x,))
    _same_first_gradients(lambda x: mf.logit(x, eps=0.2), (x,))


def test_nextafter_gradgradcheck():
    rng = _rng("nextafter")
    a, b = _uniform(rng, (2, 3)), _uniform(rng, (3,))
    assert gradgradcheck(lambda a, b: mf.nextafter(a * a, b) * a + b, (a, b))


# ---------------------------------------------------------------- diagonal_scatter
@pytest.mark.parametrize("shape, offset, dims", [((3, 3), 0, (0, 1)), ((3, 4), 1, (0, 1)), ((4, 3), -2, (1, 0)),
                                                 ((2, 3, 4), 0, (2, 0)), ((2, 3, 4), 1, (-1, -2))], ids=str)
def test_diagonal_scatter_gradgradcheck(shape, offset, dims):
    rng = _rng("diagonal_scatter", shape, offset, dims)
    x = _uniform(rng, shape)
    src_shape = mf.diagonal(x, offset, *dims).shape
    src = _uniform(rng, src_shape)
    fn = lambda x, s: mf.diagonal_scatter(x * x, s * s * x.sum(), offset, *dims)  # noqa: E731
    assert gradgradcheck(fn, (x, src))
    _same_first_gradients(fn, (x, src))


# ---------------------------------------------------------------- logcumsumexp
@pytest.mark.parametrize("shape, dim, scale", [((5,), 0, 1.0), ((3, 4), 1, 1.0), ((3, 4), 0, 1.0), ((2, 3, 2), -2, 1.0),
                                               ((), 0, 1.0), ((3, 4), 1, 40.0)], ids=str)
def test_logcumsumexp_gradgradcheck(shape, dim, scale):
    """Large inputs too (scale): exp of them would overflow."""
    x = _uniform(_rng("logcumsumexp", shape, dim, scale), shape)
    fn = lambda x: mf.logcumsumexp(x * scale, dim)  # noqa: E731
    assert gradgradcheck(fn, (x,), atol=1e-4 * scale)
    _same_first_gradients(fn, (x,))


# ---------------------------------------------------------------- cumprod, cummax, cummin
def _with_zeros(rng, shape, where):
    x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
    for index in where:
        x[index] = 0.0
    return _t(x)


CUMPROD_CASES = {  # name: (shape, dim, zeros)
    "no_zero": ((3, 5), 1, []),
    "one_zero": ((3, 5), 1, [(0, 2)]),
    "zeros": ((3, 5), 1, [(0, 0), (1, 2), (1, 4), (2, 1), (2, 2), (2, 4)]),
    "zeros_dim0": ((4, 3), 0, [(1, 0), (3, 0), (0, 1), (2, 2)]),
    "zero_last": ((2, 4), -1, [(0, 3), (1, 0)]),
    "3d": ((2, 3, 2), 1, [(0, 1, 1)]),
    "length_1": ((3, 1), 1, [(1, 0)]),
    "0d": ((), 0, []),
    "empty": ((2, 0), 1, []),
}


@pytest.mark.parametrize("name", sorted(CUMPROD_CASES))
def test_cumprod_gradgradcheck(name):
    """Exact also where the input has zeros (the gradient there is no quotient)."""
    shape, dim, zeros = CUMPROD_CASES[name]
    x = _with_zeros(_rng("cumprod", name), shape, zeros)
    assert gradgradcheck(lambda x: mf.cumprod(x, dim), (x,))
    _same_first_gradients(lambda x: mf.cumprod(x, dim), (x,))


def test_cumprod_hessian_closed_form():
    """d2 (sum_k g_k prod_{j<=k} x_j) / dx_i dx_l = sum_{k >= max(i, l)} g_k prod_{j<=k, j != i, l} x_j (i != l)."""
    x0 = np.array([0.7, 0.0, -1.3, 0.0, 2.0])
    g0 = _rng("cumprod_closed").standard_normal(5)
    x = _t(x0)
    (g,) = autograd.grad(mf.cumprod(x, 0), x, mf.tensor(g0), create_graph=True)
    rows = [autograd.grad(g[i], x, retain_graph=True)[0].numpy() for i in range(5)]
    want = np.zeros((5, 5))
    for i in range(5):
        for m in range(5):
            if i != m:
                want[i, m] = sum(g0[k] * np.prod([x0[j] for j in range(k + 1) if j not in (i, m)])
                                 for k in range(max(i, m), 5))
    np.testing.assert_allclose(np.stack(rows), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("shape, dim", [((6,), 0), ((3, 4), 1), ((3, 4), 0), ((2, 3, 2), -1), ((), 0)], ids=str)
def test_cum_extreme_gradgradcheck(op, shape, dim):
    x = _uniform(_rng(op, shape, dim), shape)
    fn = lambda x: getattr(mf, op)(x * x, dim).values * x  # noqa: E731
    assert gradgradcheck(fn, (x,))
    _same_first_gradients(fn, (x,))


def test_third_derivative():
    """cumprod's gradient (at zeros too) and logcumsumexp's differentiate a third time."""
    rng = _rng("third")
    for fn, x in ((lambda x: mf.cumprod(x, 1), _with_zeros(rng, (2, 4), [(0, 1), (1, 3)])),
                  (lambda x: mf.logcumsumexp(x, 1), _uniform(rng, (2, 4)))):
        g = mf.tensor(rng.standard_normal((2, 4)))
        assert gradgradcheck(lambda x: autograd.grad(fn(x), x, g, create_graph=True)[0], (x,))


# ---------------------------------------------------------------- scatter_reduce
INDEX = np.array([[0, 1, 0, 0], [0, 2, 1, 0], [0, 2, 1, 1]])


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin", "prod"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("src_cols", [4, 5])
def test_scatter_reduce_gradgradcheck(reduce, include_self, src_cols):
    """src wider than index too (its other entries get no gradient)."""
    rng = _rng("scatter_reduce", reduce, include_self, src_cols)
    x, src = _uniform(rng, (3, 4), 0.5, 1.5), _uniform(rng, (3, src_cols), 0.5, 1.5)
    index = mf.tensor(INDEX)
    fn = lambda x, s: mf.scatter_reduce(x * x, 0, index, s * s, reduce, include_self=include_self)  # noqa: E731
    assert gradgradcheck(fn, (x, src))
    _same_first_gradients(fn, (x, src))


@pytest.mark.parametrize("zeros", [[(0, 0)], [(0, 0), (1, 0)], [(0, 0), (1, 0), (2, 0)], [(1, 1), (2, 1), (0, 3)]],
                         ids=str)
@pytest.mark.parametrize("self_zero", [False, True])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_prod_zeros(zeros, self_zero, include_self):
    """One, two or three of src's zeros at a position (its column 0 gets (0, 0), (1, 0), (2, 0)), input's zero:
    the second derivatives are exact there too (PyTorch refuses two zeros at a position)."""
    rng = _rng("prod_zeros", zeros, self_zero, include_self)
    src = _with_zeros(rng, (3, 4), zeros)
    x = _with_zeros(rng, (3, 4), [(0, 0)] if self_zero else [])
    index = mf.tensor(INDEX)
    fn = lambda x, s: mf.scatter_reduce(x, 0, index, s, "prod", include_self=include_self)  # noqa: E731
    assert gradgradcheck(fn, (x, src))
    _same_first_gradients(fn, (x, src))


def test_scatter_reduce_in_place_and_index_reduce():
    rng = _rng("scatter_reduce_")
    x, src = _uniform(rng, (3, 4), 0.5, 1.5), _uniform(rng, (3, 4), 0.5, 1.5)
    index = mf.tensor(INDEX)
    assert gradgradcheck(lambda x, s: (x * 1).scatter_reduce_(0, index, s, "prod"), (x, src))
    source = _uniform(rng, (3, 2), 0.5, 1.5)
    assert gradgradcheck(lambda x, s: mf.index_reduce(x, 1, mf.tensor(np.array([0, 2])), s, "prod"), (x, source))
