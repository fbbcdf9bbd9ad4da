"""Second (and third) derivatives of the pointwise ops under create_graph=True: gradgradcheck in float64 against
finite differences, and a few second derivatives against their closed forms."""
import math
import zlib

import numpy as np
import pytest

import minifused as mf
from minifused import autograd
from minifused.autograd import gradgradcheck

F = mf.nn.functional


def _rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _t(rng, shape, lo=-2.0, hi=2.0, grad=True):
    return mf.tensor(rng.uniform(lo, hi, shape), requires_grad=grad)


def _off_kink(rng, shape):
    """Magnitudes with random signs, away from the kinks of the KINKED ops (0, their bounds)."""
    magnitudes = rng.choice([0.25, 0.5, 0.6, 0.8, 1.6, 1.9], shape)
    return mf.tensor(magnitudes * rng.choice([-1.0, 1.0], shape), requires_grad=True)


SHAPES = [(), (3,), (2, 3)]

# name: (function, low, high); the input is drawn in [low, high], where the op is smooth
UNARY = {
    "sqrt": (lambda x: x.sqrt(), 0.3, 2.0),
    "sin": (lambda x: x.sin(), -2.0, 2.0),
    "cos": (lambda x: x.cos(), -2.0, 2.0),
    "tan": (lambda x: x.tan(), -1.0, 1.0),
    "asin": (lambda x: x.asin(), -0.8, 0.8),
    "acos": (lambda x: x.acos(), -0.8, 0.8),
    "atan": (lambda x: x.atan(), -2.0, 2.0),
    "sinh": (lambda x: x.sinh(), -2.0, 2.0),
    "cosh": (lambda x: x.cosh(), -2.0, 2.0),
    "log2": (lambda x: x.log2(), 0.3, 2.0),
    "log10": (lambda x: x.log10(), 0.3, 2.0),
    "log1p": (lambda x: x.log1p(), -0.5, 2.0),
    "expm1": (lambda x: x.expm1(), -2.0, 2.0),
    "rsqrt": (lambda x: x.rsqrt(), 0.3, 2.0),
    "reciprocal": (lambda x: x.reciprocal(), 0.3, 2.0),
    "square": (lambda x: x.square(), -2.0, 2.0),
    "erf": (lambda x: x.erf(), -2.0, 2.0),
    "erfinv": (lambda x: x.erfinv(), -0.8, 0.8),
    "frac": (lambda x: x.frac() * x, 1.1, 1.9),
    "floor": (lambda x: x.floor() * x * x, 1.1, 1.9),
    "round": (lambda x: x.round(decimals=1) * x * x, 0.11, 0.14),
    "sign": (lambda x: x.sign() * x * x, 0.2, 2.0),
    "gelu": (lambda x: F.gelu(x), -3.0, 3.0),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), -3.0, 3.0),
    "pow_number": (lambda x: x ** 2.5, 0.3, 2.0),
    "pow_int": (lambda x: x ** 3, -2.0, 2.0),
    "pow_negative": (lambda x: x ** -1.5, 0.3, 2.0),
    "rpow": (lambda x: 2.0 ** x, -2.0, 2.0),
    "scalars": (lambda x: (2.0 - x) * (x / 3) * (2 / x) * (x * 2.0) + 1.0 - x, 0.3, 2.0),
    "add_alpha": (lambda x: mf.add(x * x, x.sin(), alpha=2.5) - mf.sub(x, x * x * x, alpha=-0.5), -2.0, 2.0),
    "acosh": (lambda x: x.acosh(), 1.3, 3.0),
    "asinh": (lambda x: x.asinh(), -2.0, 2.0),
    "atanh": (lambda x: x.atanh(), -0.8, 0.8),
    "lgamma": (lambda x: x.lgamma(), 0.5, 3.0),
    "digamma": (lambda x: x.digamma(), 0.5, 3.0),
    "polygamma": (lambda x: mf.polygamma(2, x), 0.5, 3.0),
    "mvlgamma": (lambda x: mf.mvlgamma(x, 3), 1.3, 3.0),
    "i0": (lambda x: x.i0(), -2.0, 2.0),
    "i0e": (lambda x: mf.special.i0e(x), 0.2, 2.0),
    "i1": (lambda x: mf.special.i1(x), 0.2, 2.0),
    "i1e": (lambda x: mf.special.i1e(x), 0.2, 2.0),
    "erfcx": (lambda x: mf.special.erfcx(x), -2.0, 2.0),
    "log_ndtr": (lambda x: mf.special.log_ndtr(x), -2.0, 2.0),
    "ndtri": (lambda x: mf.special.ndtri(x), 0.1, 0.9),
    "entr": (lambda x: mf.special.entr(x), 0.2, 2.0),
}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name, shape):
    fn, lo, hi = UNARY[name]
    rng = _rng(name, shape)
    assert gradgradcheck(fn, (_t(rng, shape, lo, hi),))


# ops with a kink at 0 (or at their bounds): inputs kept away from it
KINKED = {
    "abs": lambda x: (x * x).abs() * x + x.abs(),
    "relu": lambda x: F.relu(x) * x,
    "relu_": lambda x: (x * 1.5).relu_() * x,
    "clamp": lambda x: x.clamp(-1.1, 1.1) * x,
    "clamp_min": lambda x: mf.clamp(x, min=0.1) ** 2,
    "clamp_max": lambda x: mf.clamp(x, max=-0.1) ** 2,
    "clamp_": lambda x: (x * x).clamp_(0.1, 1.3) * x,
    "maximum_0d": lambda x: mf.maximum(x, x.new_tensor(0.1)) * x,
    "minimum_0d": lambda x: mf.minimum(x * x, x.new_tensor(1.1)) * x,
}


@pytest.mark.parametrize("shape", [(3,), (2, 3)])
@pytest.mark.parametrize("name", list(KINKED))
def test_kinked(name, shape):
    assert gradgradcheck(KINKED[name], (_off_kink(_rng(name, shape), shape),))


def _pair(rng, shapes, lo=-2.0, hi=2.0, lo2=None, hi2=None):
    return _t(rng, shapes[0], lo, hi), _t(rng, shapes[1], lo if lo2 is None else lo2, hi if hi2 is None else hi2)


BROADCASTS = [((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 3))]


def _min_max(op):
    return lambda a, b: op(a, b) * a * b


BINARY = {
    "pow": (lambda a, b: a ** b, (0.3, 2.0, -2.0, 2.0)),
    "atan2": (mf.atan2, (-2.0, 2.0, 0.3, 2.0)),
    "hypot": (mf.hypot, (-2.0, 2.0, 0.3, 2.0)),
    "maximum": (_min_max(mf.maximum), (-2.0, 2.0, -2.0, 2.0)),
    "minimum": (_min_max(mf.minimum), (-2.0, 2.0, -2.0, 2.0)),
    "where": (lambda a, b: mf.where(a > 0, a * a * b, b * b * b), (-2.0, 2.0, -2.0, 2.0)),
    "remainder": (lambda a, b: mf.remainder(a * a, b) * b, (0.5, 1.5, 0.6, 0.9)),
    "fmod": (lambda a, b: mf.fmod(a * a, b) * b, (-1.5, 1.5, 0.6, 0.9)),
    "floor_divide": (lambda a, b: mf.floor_divide(a, b) * a * b, (0.5, 1.5, 0.6, 0.9)),
    "trunc_divide": (lambda a, b: mf.div(a, b, rounding_mode="trunc") * a * b, (0.5, 1.5, 0.6, 0.9)),
    "add_alpha": (lambda a, b: mf.add(a * a, b * a, alpha=1.5) * b, (-2.0, 2.0, -2.0, 2.0)),
    "sub_alpha": (lambda a, b: mf.sub(a * b, b * b, alpha=-0.5) * a, (-2.0, 2.0, -2.0, 2.0)),
    "mul_div": (lambda a, b: a * b / (b * b + 1) - b / a, (0.3, 2.0, -2.0, 2.0)),
}


@pytest.mark.parametrize("shapes", BROADCASTS)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary(name, shapes):
    fn, (lo, hi, lo2, hi2) = BINARY[name]
    rng = _rng(name, shapes)
    assert gradgradcheck(fn, _pair(rng, shapes, lo, hi, lo2, hi2))


@pytest.mark.parametrize("shapes", [((2, 3), (3,)), ((2, 3), (2, 3))])
def test_clamp_tensor_bounds(shapes):
    rng = _rng(shapes)
    x = _t(rng, (2, 3), -3.0, 3.0)
    lo, hi = _t(rng, shapes[1], -2.0, -0.5), _t(rng, shapes[1], 0.5, 2.0)
    assert gradgradcheck(lambda x, lo, hi: mf.clamp(x, lo, hi) ** 2 * hi, (x, lo, hi))


def test_igamma_zeta():
    rng = np.random.default_rng(3)
    a = mf.tensor(rng.uniform(1.0, 3.0, (2, 3)))
    x = _t(rng, (3,), 0.5, 3.0)
    assert gradgradcheck(lambda x: mf.igamma(a, x), (x,))
    assert gradgradcheck(lambda x: mf.igammac(a, x), (x,))
    assert gradgradcheck(lambda q: mf.special.zeta(a + 1.5, q), (x,))
    assert gradgradcheck(lambda q: mf.special.zeta(3.0, q), (x,))


# ---------------------------------------------------------------- in-place forms (Function.apply_)
def _iadd(x, y):
    z = x * x
    z += y * x
    z -= 2.0
    z *= y
    z /= 3.0
    return z


def _self_product(x, y):
    z = x * y
    z *= z  # (the operand is the overwritten tensor itself)
    z /= x * x + 1
    return z


def _copy(x, y):
    z = x * x
    z.copy_(y * y)
    return z * x


INPLACE = {
    "mul_": lambda x, y: (x * 1.0).mul_(y) * x,
    "mul_number": lambda x, y: (x * y).mul_(2.5) * x,
    "div_": lambda x, y: (x * x).div_(y * y + 1) * y,
    "div_number": lambda x, y: (x * y).div_(3.0) * x,
    "add_": lambda x, y: (x * x).add_(y * x, alpha=2.5) * y,
    "sub_": lambda x, y: (x * y).sub_(y * y, alpha=0.5).sub_(1.5) * x,
    "operators": _iadd,
    "self_product": _self_product,
    "copy_": _copy,
    "sin_": lambda x, y: (x * y).sin_() * x,
    "tan_": lambda x, y: (x * 0.3).tan_() * y,
    "lgamma_": lambda x, y: (x * x + 1).lgamma_() * y,
    "polygamma_": lambda x, y: (x * x + 1).polygamma_(1) * y,
    "atan2_": lambda x, y: (x * 1.0).atan2_(y * y + 1) * x,
    "pow_": lambda x, y: (x * x + 1).pow_(y) * x,
    "gelu_": lambda x, y: F.gelu_(x * y) * x,
    "gelu_tanh_": lambda x, y: F.gelu_(x * y, approximate="tanh") * x,
}


@pytest.mark.parametrize("shapes", [((3,), (3,)), ((2, 3), (3,))])
@pytest.mark.parametrize("name", list(INPLACE))
def test_inplace(name, shapes):
    rng = _rng(name, shapes)
    assert gradgradcheck(INPLACE[name], _pair(rng, shapes, -1.5, 1.5))


# ---------------------------------------------------------------- against closed forms
def _second(f, x):
    """d/dx of sum(f'(x)): f's second derivative, elementwise, for an elementwise f."""
    (g,) = autograd.grad(f(x).sum(), x, create_graph=True)
    (h,) = autograd.grad(g.sum(), x)
    return g.detach().numpy(), h.numpy()


def _phi(x):
    return np.exp(-x * x / 2) / math.sqrt(2 * math.pi)


CLOSED = {  # f, f', f''
    "pow": (lambda x: x ** 2.5, lambda x: 2.5 * x ** 1.5, lambda x: 3.75 * x ** 0.5),
    "sqrt": (lambda x: x.sqrt(), lambda x: 0.5 / np.sqrt(x), lambda x: -0.25 * x ** -1.5),
    "reciprocal": (lambda x: x.reciprocal(), lambda x: -1 / x ** 2, lambda x: 2 / x ** 3),
    "erf": (lambda x: x.erf(), lambda x: 2 / math.sqrt(math.pi) * np.exp(-x * x),
            lambda x: -4 * x / math.sqrt(math.pi) * np.exp(-x * x)),
    "gelu": (lambda x: F.gelu(x), lambda x: 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2))) + x * _phi(x),
             lambda x: _phi(x) * (2 - x * x)),
    "atan": (lambda x: x.atan(), lambda x: 1 / (1 + x * x), lambda x: -2 * x / (1 + x * x) ** 2),
}


@pytest.mark.parametrize("name", list(CLOSED))
def test_closed_form(name):
    f, d1, d2 = CLOSED[name]
    x = np.random.default_rng(5).uniform(0.3, 2.0, (4,))
    g, h = _second(f, mf.tensor(x, requires_grad=True))
    np.testing.assert_allclose(g, d1(x), rtol=1e-12)
    np.testing.assert_allclose(h, d2(x), rtol=1e-10)


def test_pow_at_zero_as_pytorch():
    x = mf.tensor(np.array([0.0, 1.5, -2.0]), requires_grad=True)
    (g,) = autograd.grad((x ** 2).sum(), x, create_graph=True)
    (h,) = autograd.grad(g.sum(), x)
    np.testing.assert_array_equal(h.numpy(), [2.0, 2.0, 2.0])
    (g,) = autograd.grad((x ** 0).sum(), x, create_graph=True)  # a constant zero gradient, as PyTorch's
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.0, 0.0])
    assert not g.requires_grad
    y = mf.tensor(np.array([0.0, 2.0]), requires_grad=True)
    (g,) = autograd.grad((0.0 ** y).sum(), y, create_graph=True)  # d/db is 0 where a == 0 and b >= 0
    (h,) = autograd.grad(g.sum(), y)
    np.testing.assert_array_equal(g.detach().numpy(), [0.0, 0.0])
    assert np.isnan(h.numpy()).all()  # (PyTorch's too: the masked-out 0 * log(0) reaches the second derivative)


def test_hypot_atan2_closed_form():
    rng = np.random.default_rng(11)
    a, b = rng.uniform(0.5, 2.0, (2, 3)), rng.uniform(0.5, 2.0, (2, 3))
    ta, tb = mf.tensor(a, requires_grad=True), mf.tensor(b, requires_grad=True)
    (ga,) = autograd.grad(mf.hypot(ta, tb).sum(), ta, create_graph=True)
    haa, hab = autograd.grad(ga.sum(), (ta, tb))
    r = np.hypot(a, b)
    np.testing.assert_allclose(haa.numpy(), b * b / r ** 3, rtol=1e-12)
    np.testing.assert_allclose(hab.numpy(), -a * b / r ** 3, rtol=1e-12)
    (ga,) = autograd.grad(mf.atan2(ta, tb).sum(), ta, create_graph=True)
    haa, hab = autograd.grad(ga.sum(), (ta, tb))
    np.testing.assert_allclose(haa.numpy(), -2 * a * b / (a * a + b * b) ** 2, rtol=1e-12)
    np.testing.assert_allclose(hab.numpy(), (a * a - b * b) / (a * a + b * b) ** 2, rtol=1e-12)


def test_mul_into_cross_term():
    """(x * 1).mul_(y): d2/dx dy of sum(v * x * y) is v, reached through the stand-in for x's old value."""
    rng = np.random.default_rng(2)
    x, y = _t(rng, (3,)), _t(rng, (3,))
    v = rng.standard_normal(3)
    (gx,) = autograd.grad(((x * 1.0).mul_(y) * mf.tensor(v)).sum(), x, create_graph=True)
    (hy,) = autograd.grad(gx.sum(), y)
    np.testing.assert_allclose(hy.numpy(), v, rtol=1e-12)


def test_third_derivative():
    x0 = np.random.default_rng(4).uniform(0.3, 2.0, (4,))
    x = mf.tensor(x0, requires_grad=True)
    out = (x ** 3.5).sum() + x.sin().sum() + x.lgamma().sum()
    (g,) = autograd.grad(out, x, create_graph=True)
    (h,) = autograd.grad(g.sum(), x, create_graph=True)
    (t,) = autograd.grad(h.sum(), x)
    h3 = mf.polygamma(2, mf.tensor(x0)).numpy()  # lgamma''' (polygamma's own kernel)
    np.testing.assert_allclose(t.numpy(), 3.5 * 2.5 * 1.5 * x0 ** 0.5 - np.cos(x0) + h3, rtol=1e-9)


@pytest.mark.parametrize("dtype", [mf.float16, mf.bfloat16])
def test_alpha_in_half_precision(dtype):
    """add / sub with alpha of 16-bit tensors (computed in float32, as PyTorch's), out of place and in place."""
    x = mf.tensor(np.array([0.5, -1.0, 2.0]), dtype=dtype, requires_grad=True)
    y = mf.tensor(np.array([1.5, 0.25, -0.5]), dtype=dtype, requires_grad=True)
    for out in (mf.add(x * y, y * y, alpha=2.5), (x * y).add_(y * y, alpha=2.5), (x * y).sub_(y * y, alpha=-2.5)):
        (gy,) = autograd.grad(out.sum(), y, create_graph=True)  # x + 5 y
        hx, hy = autograd.grad(gy.sum(), (x, y))
        assert gy.dtype == hx.dtype == hy.dtype == dtype
        np.testing.assert_array_equal(gy.float().detach().numpy(), (x + 5 * y).float().detach().numpy())
        np.testing.assert_array_equal(hx.float().numpy(), [1.0, 1.0, 1.0])
        np.testing.assert_array_equal(hy.float().numpy(), [5.0, 5.0, 5.0])
