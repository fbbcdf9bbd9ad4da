"""minifused/ops/special_math.py, ops/numeric.py and kernels/special_math.py beyond their registry entries
(tests/opinfo.py, SPECIAL_MATH_OPS): the special functions' known values, identities and recorded values
(from mpmath at 40 digits), their special points as PyTorch 2.14 gives them, gradients there, dtypes, the in-place
forms, the integer and bit-level ops, and the errors. The GPU tests compare the CuPy path with PyTorch's."""
import math

import numpy as np
import pytest

import minifused as mf
import minifused.special as ms
from minifused.kernels import special_math as K
from minifused.testing import gradcheck

nan, inf = math.nan, math.inf
EULER = 0.5772156649015329


def f64(values, requires_grad=False):
    return mf.tensor(np.array(values, np.float64), requires_grad=requires_grad)


def close(got, want, rtol=1e-13, atol=0.0):
    got = got.detach().numpy() if isinstance(got, mf.Tensor) else got
    np.testing.assert_allclose(got, np.array(want, np.float64), rtol=rtol, atol=atol, equal_nan=True)


def grads(fn, *values):
    """fn's value and the gradients of its sum (float64 arrays)."""
    xs = [f64(v, requires_grad=True) for v in values]
    y = fn(*xs)
    y.backward(mf.ones_like(y))
    return [y.detach().numpy()] + [x.grad.numpy() for x in xs]


# ---------------------------------------------------------------- the gamma family
def test_lgamma_known_values_identities_and_poles():
    n = np.arange(1.0, 25.0)
    close(mf.lgamma(f64(n)), [math.log(math.factorial(int(k) - 1)) for k in n])
    close(mf.lgamma(f64([0.5, 1e5, 1e10])), [0.5 * math.log(math.pi), math.lgamma(1e5), math.lgamma(1e10)])
    # near the zeros at 1 and 2 (the Taylor branch) and at tiny x, to full relative accuracy
    close(mf.lgamma(f64([1 + 1e-6, 2.000001, 1e-8])), [-5.772148423874147e-07, 4.2278465762452923e-07,
                                                      18.42068073818021], rtol=1e-12)
    # the reflection formula below 1/2
    x = np.random.default_rng(0).uniform(-30, 0.5, 200)
    x = x[np.abs(x - np.round(x)) > 1e-3]
    left = mf.lgamma(f64(x)).numpy() + mf.lgamma(f64(1 - x)).numpy()
    np.testing.assert_allclose(left, np.log(np.pi / np.abs(np.sin(np.pi * x))), rtol=1e-12, atol=1e-12)
    close(mf.lgamma(f64([-2.5])), [-0.056243716497674054], rtol=1e-12)
    # PyTorch's special points: +inf at the poles and at +-inf
    close(mf.lgamma(f64([0.0, -0.0, -1.0, -2.0, inf, -inf, nan])), [inf, inf, inf, inf, inf, inf, nan])


def test_digamma_identities_and_special_points():
    close(mf.digamma(f64([1.0, 0.5, 2.0])), [-EULER, -EULER - 2 * math.log(2), 1 - EULER], rtol=1e-14)
    x = np.random.default_rng(1).uniform(-8, 8, 300)
    x = x[np.abs(x - np.round(x)) > 1e-2]
    psi = mf.digamma(f64(x)).numpy()
    np.testing.assert_allclose(mf.digamma(f64(x + 1)).numpy(), psi + 1 / x, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(mf.digamma(f64(1 - x)).numpy() - psi, np.pi / np.tan(np.pi * x), rtol=1e-10, atol=1e-10)
    close(mf.digamma(f64([-2.5, 1e-8])), [1.103156640645243, -100000000.57721564])
    # PyTorch's: -inf at +0, +inf at -0, NaN at the negative integers and at -inf
    close(mf.digamma(f64([0.0, -0.0, -1.0, -3.0, inf, -inf, nan])), [-inf, inf, nan, nan, inf, nan, nan])


def test_polygamma_values_recurrence_and_zeta():
    close(mf.polygamma(1, f64([1.0, 0.5])), [math.pi ** 2 / 6, math.pi ** 2 / 2], rtol=1e-14)
    close(mf.polygamma(3, f64([1.0, -1.5])), [math.pi ** 4 / 15, 194.59427621918763], rtol=1e-13)
    close(mf.polygamma(0, f64([3.0])), mf.digamma(f64([3.0])).numpy())
    x = np.random.default_rng(2).uniform(0.2, 20, 50)
    for n in (1, 2, 4, 7):
        step = (-1) ** n * math.factorial(n) / x ** (n + 1)
        np.testing.assert_allclose(mf.polygamma(n, f64(x + 1)).numpy(), mf.polygamma(n, f64(x)).numpy() + step,
                                   rtol=1e-12)
    # the Hurwitz zeta: zeta(s, 1) is Riemann's; zeta(s, q) - zeta(s, q + 1) = q**-s
    close(ms.zeta(f64([2.0, 4.0, 3.5]), f64([1.0, 1.0, 0.25])),
          [math.pi ** 2 / 6, math.pi ** 4 / 90, 128.54695896428436])
    s, q = np.random.default_rng(3).uniform(1.1, 6, 40), np.random.default_rng(4).uniform(0.1, 30, 40)
    np.testing.assert_allclose(ms.zeta(f64(s), f64(q)).numpy() - ms.zeta(f64(s), f64(q + 1)).numpy(), q ** -s,
                               rtol=1e-10)
    close(ms.zeta(f64([2.0]), f64([-2.5])), [9.539246644989124], rtol=1e-13)  # polygamma(1, -2.5)
    # PyTorch's special points: a pole at s == 1 and at q in {0, -1, ..., -inf} (for a fractional s too); NaN for
    # s < 1 and for another q < 0 with a fractional s
    at_s = f64([1.0, 2.0, 0.5, 2.0, 2.5, 2.0, 2.5, 2.5, 0.5])
    at_q = f64([1.0, 0.0, 1.0, -3.0, -1.5, nan, -3.0, -inf, -3.0])
    close(ms.zeta(at_s, at_q), [inf, inf, nan, inf, nan, nan, inf, inf, nan])
    close(ms.zeta(2.0, f64([1.0])), [math.pi ** 2 / 6], rtol=1e-14)  # a number on either side
    assert ms.zeta(mf.tensor([2, 3]), mf.tensor([1, 2])).dtype == mf.float32


def test_mvlgamma_is_a_sum_of_lgammas():
    x = np.array([1.7, 2.5, 6.25])
    close(mf.mvlgamma(f64(x), 1), [math.lgamma(v) for v in x])
    close(mf.mvlgamma(f64(x), 3), [math.lgamma(v) + math.lgamma(v - 0.5) + math.lgamma(v - 1) + 1.5 * math.log(math.pi)
                                   for v in x], rtol=1e-12)
    assert mf.mvlgamma(mf.tensor([2, 3]), 2).dtype == mf.float32
    _, grad = grads(lambda t: mf.mvlgamma(t, 2), x)
    close(grad, mf.digamma(f64(x)).numpy() + mf.digamma(f64(x - 0.5)).numpy())


def test_incomplete_gamma_identities_and_edges():
    x = np.random.default_rng(5).uniform(0.01, 40, 60)
    close(mf.igamma(f64(np.ones(60)), f64(x)), -np.expm1(-x), rtol=1e-12)
    close(mf.igamma(f64(np.full(60, 0.5)), f64(x)), [math.erf(math.sqrt(v)) for v in x], rtol=1e-12)
    poisson = np.exp(-x) * (1 + x + x ** 2 / 2)  # Q(3, x)
    close(mf.igammac(f64(np.full(60, 3.0)), f64(x)), poisson, rtol=1e-12)
    a = np.random.default_rng(6).uniform(0.01, 50, 60)
    close(mf.igamma(f64(a), f64(x)) + mf.igammac(f64(a), f64(x)), np.ones(60), rtol=1e-14)
    close(ms.gammainc(f64([100.0, 1e-3]), f64([90.0, 1e-4])), [0.15822098918643016, 0.9914031196674433], rtol=1e-11)
    close(ms.gammaincc(f64([3.5, 0.5]), f64([10.0, 30.0])), [0.005569683072945571, 9.485737571073848e-15], rtol=1e-12)
    # PyTorch's edges
    a = [0.0, 1.0, 0.0, -1.0, 2.0, inf, 1.0, nan]
    x = [1.0, 0.0, 0.0, 1.0, inf, 1.0, -1.0, 1.0]
    close(mf.igamma(f64(a), f64(x)), [1, 0, nan, nan, 1, 0, nan, nan])
    close(mf.igammac(f64(a), f64(x)), [0, 1, nan, nan, 0, 1, nan, nan])


# ---------------------------------------------------------------- Bessel and error functions, entr
def test_bessel_values_and_scaling():
    close(mf.i0(f64([0.0, 1.0, 10.0, 700.0])), [1.0, 1.2660658777520084, 2815.7166284662544, 1.5295933476718737e+302],
          rtol=1e-14)
    close(ms.i1(f64([0.0, 1.0, -10.0])), [0.0, 0.565159103992485, -2670.9883037012546], rtol=1e-14)
    close(ms.i0e(f64([50.0, 1e6, -50.0])), [0.05656162664745419, 0.00039894233026924577, 0.05656162664745419],
          rtol=1e-14)
    close(ms.i1e(f64([50.0, -25.0])), [0.0559931238928954, -0.07857611331929278], rtol=1e-14)
    x = np.linspace(-30, 30, 61)
    close(ms.i0e(f64(x)), np.exp(-np.abs(x)) * mf.i0(f64(x)).numpy())
    close(ms.i1e(f64(x)), np.exp(-np.abs(x)) * ms.i1(f64(x)).numpy())
    # PyTorch's special points: I0 and I1 overflow to inf and give NaN at +-inf; the scaled ones go to 0
    close(mf.i0(f64([800.0, inf, -inf, nan])), [inf, nan, nan, nan])
    close(ms.i1(f64([-800.0, inf])), [-inf, nan])
    close(ms.i0e(f64([inf, -inf])), [0.0, 0.0])
    close(ms.i1e(f64([inf, -inf])), [0.0, -0.0])


def test_error_function_family():
    close(ms.erfcx(f64([0.0, 1.3, 5.0, 30.0, -3.0])),
          [1.0, 0.3576426690860903, 0.11070463773306863, 0.01879588886141675, 16205.988853999586], rtol=1e-14)
    x = np.linspace(-5, 8, 53)
    close(ms.erfcx(f64(x)), np.exp(x * x) * np.array([math.erfc(v) for v in x]), rtol=1e-12)
    close(ms.erfcx(f64([1e10, -30.0, inf, -inf, nan])), [1 / (1e10 * math.sqrt(math.pi)), inf, 0.0, inf, nan])
    close(ms.log_ndtr(f64([-40.0, -5.0, 10.0, 0.0])),
          [-804.6084420137538, -15.064998393988725, -7.619853024160525e-24, -math.log(2)], rtol=1e-13)
    x = np.linspace(-30, 5, 71)
    close(ms.log_ndtr(f64(x)), [math.log(0.5 * math.erfc(-v / math.sqrt(2))) if v < 0 else
                                math.log1p(-0.5 * math.erfc(v / math.sqrt(2))) for v in x], rtol=1e-12)
    close(ms.log_ndtr(f64([inf, -inf, nan])), [0.0, -inf, nan])
    close(ms.ndtri(f64([1e-300, 0.975, 1e-10, 0.5])), [-37.0470962993612, 1.9599639845400538, -6.361340902404057, 0.0],
          rtol=1e-13)
    x = np.linspace(-35, -0.5, 70)
    close(ms.ndtri(ms.log_ndtr(f64(x)).exp()), x, rtol=1e-12)  # the round trip through the left tail
    close(ms.ndtri(f64([0.0, 1.0, -0.1, 1.5, nan])), [-inf, inf, nan, nan, nan])
    close(ms.entr(f64([0.0, 1.0, math.e, 0.5, -1.0, inf, nan])), [0, 0, -math.e, 0.5 * math.log(2), -inf, -inf, nan])



def test_erf_erfc_match_math_on_a_grid_and_at_special_points():
    # erf64 / erfc64 (mf.erf, mf.erfc, the exact GELU on the CPU) against math.erf / math.erfc element by element:
    # a dense grid over [-30, 30], the switch points' neighbourhoods, and erfc's right tail down to its underflow
    x = np.concatenate([np.linspace(-30, 30, 200001), np.linspace(0.46, 0.48, 2001), np.linspace(3.99, 4.01, 2001),
                        np.linspace(4, 27.3, 20001), -np.geomspace(1e-300, 0.5, 601), np.geomspace(1e-300, 0.5, 601)])
    want_erf, want_erfc = np.array([math.erf(v) for v in x]), np.array([math.erfc(v) for v in x])
    got_erf, got_erfc = K.erf64(x), K.erfc64(x)
    nonzero = want_erf != 0
    assert np.max(np.abs(got_erf - want_erf)[nonzero] / np.abs(want_erf[nonzero])) <= 8e-16
    normal = want_erfc >= np.finfo(np.float64).tiny
    assert np.max(np.abs(got_erfc - want_erfc)[normal] / want_erfc[normal]) <= 1.5e-15
    assert np.max(np.abs(got_erfc - want_erfc)[~normal]) <= 2e-323  # subnormal or 0: a few steps of 5e-324
    special = np.array([0.0, -0.0, inf, -inf, nan, 5e-324, -5e-324, 1e-310, 1e300, -1e300, 26.5, 27.3, -30.0])
    for fn, ref in ((K.erf64, math.erf), (K.erfc64, math.erfc), (lambda v: mf.erf(f64(v)).numpy(), math.erf),
                    (lambda v: mf.erfc(f64(v)).numpy(), math.erfc)):
        got, want = fn(special), np.array([ref(v) for v in special])
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0]))  # erf(-0.0) = -0.0
    grid = np.linspace(-3, 3, 12).reshape(3, 4)  # any shape, 0-d included
    assert K.erf64(grid).shape == (3, 4) and K.erfc64(np.array(0.5)).shape == ()
    np.testing.assert_allclose(K.erf64(grid), np.vectorize(math.erf)(grid), rtol=1e-15)

def test_special_function_gradients_at_special_points():
    """PyTorch's values: i1'(0) = i1e'(0) = 1/2, i0e'(0) = 0, entr'(0) = inf, ndtri'(1/2) = sqrt(2 pi), log_ndtr's
    gradient finite far into the left tail."""
    close(grads(ms.i1, [0.0])[1], [0.5])
    i0e1, i1e1 = 1.2660658777520084 / math.e, 0.565159103992485 / math.e
    close(grads(ms.i1e, [0.0, 1.0])[1], [0.5, i0e1 - 2 * i1e1])
    close(grads(ms.i0e, [0.0, 1.0, -1.0])[1], [0.0, i1e1 - i0e1, i0e1 - i1e1])
    close(grads(ms.entr, [0.0, 1.0, -1.0])[1], [inf, -1.0, nan])
    close(grads(ms.ndtri, [0.5])[1], [math.sqrt(2 * math.pi)])
    close(grads(ms.log_ndtr, [-40.0])[1], [math.exp(804.6084420137538 - 800) / math.sqrt(2 * math.pi)], rtol=1e-12)
    close(grads(ms.erfcx, [0.0])[1], [-2 / math.sqrt(math.pi)])
    close(grads(mf.atanh, [1.0, 0.5])[1], [inf, 4 / 3])
    close(grads(mf.acosh, [1.0, 0.5, 2.0])[1], [inf, nan, 1 / math.sqrt(3)])


@pytest.mark.parametrize("fn", [mf.lgamma, mf.digamma, lambda t: mf.polygamma(2, t), lambda t: mf.mvlgamma(t, 3),
                                mf.i0, ms.i0e, ms.i1, ms.i1e, ms.erfcx, ms.log_ndtr, ms.entr, mf.asinh,
                                lambda t: ms.ndtri(t / 3), lambda t: mf.acosh(t + 1), lambda t: mf.atanh(t / 3)],
                         ids=["lgamma", "digamma", "polygamma2", "mvlgamma3", "i0", "i0e", "i1", "i1e", "erfcx",
                              "log_ndtr", "entr", "asinh", "ndtri", "acosh", "atanh"])
def test_gradients_by_central_differences(fn):
    x = f64(np.random.default_rng(7).uniform(1.1, 2.9, 7), requires_grad=True)
    assert gradcheck(fn, (x,))


def test_only_the_differentiable_sides_have_gradients():
    """igamma / igammac / zeta: the gradient with respect to the second argument; the first raises as PyTorch's."""
    a = f64([0.5, 2.0, 3.0])
    x = f64([1.5, 0.5, 4.0], requires_grad=True)
    assert gradcheck(lambda t: mf.igamma(a, t), (x,)) and gradcheck(lambda t: mf.igammac(a, t), (x,))
    assert gradcheck(lambda t: ms.zeta(a + 2, t), (x,))
    for fn, match in ((mf.igamma, "'igamma: input'"), (mf.igammac, "'igammac: input'"), (ms.zeta, "'zeta'")):
        with pytest.raises(NotImplementedError, match=f"the derivative for {match}"):
            fn(f64([2.0, 3.0], requires_grad=True), f64([1.0, 2.0])).sum().backward()


# ---------------------------------------------------------------- dtypes
UNARY = {"acosh": mf.acosh, "asinh": mf.asinh, "atanh": mf.atanh, "lgamma": mf.lgamma, "digamma": mf.digamma,
         "i0": mf.i0, "i0e": ms.i0e, "i1": ms.i1, "i1e": ms.i1e, "erfcx": ms.erfcx, "log_ndtr": ms.log_ndtr,
         "ndtri": ms.ndtri, "entr": ms.entr, "polygamma": lambda t: mf.polygamma(1, t),
         "mvlgamma": lambda t: mf.mvlgamma(t, 2)}


@pytest.mark.parametrize("name", list(UNARY))
def test_dtypes(name):
    fn = UNARY[name]
    values = np.array([0.25, 0.5, 0.75]) if name in ("atanh", "ndtri") else np.array([1.25, 2.5, 4.0])
    assert fn(mf.tensor(np.array([1, 2, 3]))).dtype == mf.float32  # integers give float32
    want = fn(f64(values)).numpy()
    for dtype, tol in ((mf.float32, 1e-6), (mf.float16, 1e-3), (mf.bfloat16, 8e-3)):
        out = fn(mf.tensor(values, dtype=dtype))
        assert out.dtype == dtype
        # (the inputs are exact in every dtype: one rounding of the float64 value)
        np.testing.assert_allclose(out.numpy().astype(np.float64), want, rtol=tol)


def test_arc_spellings_are_the_inverse_functions():
    x, y = f64([0.25, -0.5]), f64([1.5, 2.5])
    for arc, plain in (("arccos", "acos"), ("arcsin", "asin"), ("arctan", "atan"), ("arcsinh", "asinh"),
                       ("arctanh", "atanh")):
        np.testing.assert_array_equal(getattr(mf, arc)(x).numpy(), getattr(mf, plain)(x).numpy())
        np.testing.assert_array_equal(getattr(x, arc)().numpy(), getattr(x, plain)().numpy())
    np.testing.assert_array_equal(mf.arccosh(y).numpy(), np.arccosh([1.5, 2.5]))
    np.testing.assert_array_equal(mf.arctan2(x, y).numpy(), mf.atan2(x, y).numpy())
    assert ms.gammaln is mf.lgamma and ms.psi is ms.digamma is mf.digamma and ms.i0 is mf.i0
    assert ms.polygamma is mf.polygamma and ms.multigammaln is mf.mvlgamma


# ---------------------------------------------------------------- in-place forms
def test_inplace_special_functions_are_recorded():
    for name, args in (("lgamma_", ()), ("digamma_", ()), ("i0_", ()), ("polygamma_", (2,)), ("mvlgamma_", (2,)),
                       ("acosh_", ()), ("asinh_", ()), ("atanh_", ()), ("arcsinh_", ())):
        values = [0.25, 0.5] if name == "atanh_" else [1.5, 2.5]
        plain = getattr(mf.Tensor, name[:-1])
        leaf = f64(values, requires_grad=True)
        want, want_grad = grads(lambda t: plain(t, *args), values)
        x = leaf * 1.0
        assert getattr(x, name)(*args) is x
        x.sum().backward()
        close(x, want), close(leaf.grad, want_grad)
    with pytest.raises(RuntimeError, match="lgamma_: result type float32 can't be cast to the desired output type"):
        mf.tensor([1, 2]).lgamma_()
    with pytest.raises(RuntimeError, match="mvlgamma_: result type float32 can't be cast"):
        mf.tensor([1, 2]).mvlgamma_(1)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        f64([1.0], requires_grad=True).digamma_()


def test_inplace_binary_forms():
    x = f64([1.0, -2.0])
    assert x.atan2_(f64([1.0, 1.0])) is x and x._version == 1
    close(x, np.arctan2([1.0, -2.0], 1.0))
    y = mf.tensor([1.0, 2.0])  # a float64 operand into a float32 tensor: cast, as PyTorch's
    y.arctan2_(f64([2.0, 2.0]))
    assert y.dtype == mf.float32 and np.allclose(y.numpy(), np.arctan2([1.0, 2.0], 2.0))
    with pytest.raises(TypeError, match="'other' must be Tensor"):
        f64([1.0]).atan2_(1.0)
    with pytest.raises(RuntimeError, match="result type float32 can't be cast to the desired output type int64"):
        mf.tensor([1, 2]).atan2_(mf.tensor([1, 2]))
    with pytest.raises(RuntimeError, match=r"output with shape \[2\] doesn't match the broadcast shape \[3, 2\]"):
        f64([1.0, 2.0]).atan2_(f64(np.ones((3, 2))))
    a = f64([0.5, 2.0], requires_grad=True)
    b = f64([1.5, 3.0], requires_grad=True)
    x = a * 1.0
    x.igamma_(b)
    close(x, mf.igamma(f64([0.5, 2.0]), f64([1.5, 3.0])).numpy())
    with pytest.raises(NotImplementedError, match="the derivative for 'igamma: input'"):
        x.sum().backward()
    h = f64([3.0, 5.0], requires_grad=True)
    z = h * 1.0
    z.hypot_(f64([4.0, 12.0]))
    z.sum().backward()
    close(z, [5.0, 13.0]), close(h.grad, [3 / 5, 5 / 13])


def test_cumsum_cumprod_inplace():
    x = f64([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    y = x * 1.0
    assert y.cumprod_(1) is y and y._version == 1
    y.sum().backward()
    close(y, [[1, 2, 6], [4, 20, 120]]), close(x.grad, [[9, 4, 2], [36, 28, 20]])
    i = mf.tensor(np.array([1, 2, 3], np.int32))
    assert i.cumsum_(0) is i and i.dtype == mf.int32 and i.tolist() == [1, 3, 6]  # the dtype kept (cumsum: int64)
    assert mf.tensor([1, 2]).cumsum_(0, dtype=mf.int64).tolist() == [1, 3]
    with pytest.raises(RuntimeError, match="bad in-place call"):
        mf.tensor([1, 2]).cumsum_(0, dtype=mf.float32)
    with pytest.raises(NotImplementedError, match="cumsum_: not implemented for bool"):
        mf.tensor([True, False]).cumsum_(0)


def test_renorm_values_gradient_and_inplace():
    a = np.array([[3.0, 4.0], [0.3, 0.4]])
    close(mf.renorm(f64(a), 2, 0, 1.0), [[0.6 / (1 + 2e-8), 0.8 / (1 + 2e-8)], [0.3, 0.4]])
    factor = np.array([2 / (3 + 1e-7), 2 / (4 + 1e-7)])  # the columns' inf-norms are 3 and 4
    close(mf.renorm(f64(a), math.inf, 1, 2.0), a * factor)
    # PyTorch's gradient (recorded from torch): through the norm of the rows it scales
    w = f64([[1.0, 2.0], [3.0, 4.0]])
    _, grad = grads(lambda t: mf.renorm(t, 2, 0, 1.0) * w, a)
    close(grad, [[-0.064, 0.048], [3.0, 4.0]], rtol=1e-6)
    x = f64(a, requires_grad=True)
    y = x * 1.0
    assert y.renorm_(2, 0, 1.0) is y
    (y * w).sum().backward()
    close(x.grad, grad)
    h = mf.renorm(mf.ones(2, 3, dtype=mf.float16), 2, 0, 1.0)
    assert h.dtype == mf.float16 and np.allclose(h.numpy(), 1 / math.sqrt(3), rtol=1e-3)


# ---------------------------------------------------------------- logcumsumexp
def test_logcumsumexp_is_stable_and_matches_accumulate():
    close(mf.logcumsumexp(f64([-1000.0, 0.0, 1000.0]), 0), [-1000.0, 0.0, 1000.0])
    a = np.random.default_rng(8).standard_normal((4, 37)) * 50
    close(mf.logcumsumexp(f64(a), -1), np.logaddexp.accumulate(a, axis=-1), rtol=1e-12)
    close(mf.tensor(a).logcumsumexp(0), np.logaddexp.accumulate(a.astype(np.float32), axis=0), rtol=1e-5)
    close(mf.logcumsumexp(f64([-inf, 0.0, -inf, inf, 1.0, nan, 2.0]), 0), [-inf, 0, 0, inf, inf, nan, nan])
    close(mf.logcumsumexp(f64(2.0), 0), 2.0)
    h = mf.logcumsumexp(mf.tensor([1.0, 2.0, 3.0], dtype=mf.bfloat16), 0)
    assert h.dtype == mf.bfloat16 and np.allclose(h.numpy().astype(float), np.logaddexp.accumulate([1.0, 2, 3]),
                                                  rtol=1e-2)


def test_logcumsumexp_gradient():
    x = f64(np.random.default_rng(9).standard_normal((3, 6)) * 30, requires_grad=True)
    assert gradcheck(lambda t: mf.logcumsumexp(t, 1), (x,))
    # at -inf, PyTorch's formula gives NaN (exp(-inf + inf)); elsewhere the softmax weights
    close(grads(lambda t: mf.logcumsumexp(t, 0), [-inf, 0.0, -inf, 3.0])[1],
          [nan, 2 + 1 / (1 + math.exp(3)), 0.0, 1 / (1 + math.exp(-3))], rtol=1e-12)


# ---------------------------------------------------------------- integers and bits
def test_gcd_lcm():
    a, b = mf.tensor([-4, 0, 6, -9, 12]), mf.tensor([6, 0, -4, 0, 18])
    assert mf.gcd(a, b).tolist() == [2, 0, 2, 9, 6] and mf.lcm(a, b).tolist() == [12, 0, 12, 0, 36]
    assert mf.lcm(mf.tensor(np.array([200], np.uint8)), mf.tensor(np.array([3], np.uint8))).tolist() == [88]  # wraps
    x = mf.tensor(np.array([4, 6, 9], np.int32))
    assert x.gcd_(mf.tensor([6, 4, 3])) is x and x.dtype == mf.int32 and x.tolist() == [2, 2, 3]
    assert mf.tensor([4, 6]).lcm_(mf.tensor([6, 4])).tolist() == [12, 12]
    with pytest.raises(NotImplementedError, match="gcd: not implemented for float32 tensors"):
        mf.gcd(mf.tensor([4.0]), mf.tensor([6.0]))
    with pytest.raises(NotImplementedError, match="lcm: not implemented for bool tensors"):
        mf.lcm(mf.tensor([True]), mf.tensor([True]))
    with pytest.raises(TypeError, match=r"gcd\(\): argument 'other' must be Tensor, not int"):
        mf.gcd(mf.tensor([4]), 2)


def test_shifts_follow_pytorch():
    a = mf.tensor([1, -1, 5, 1, 3])
    assert mf.bitwise_left_shift(a, mf.tensor([3, 2, 64, -1, 63])).tolist() == [8, -4, 0, 0, -2 ** 63]
    assert mf.bitwise_right_shift(mf.tensor([16, -16, 5, -5, 7, -7]),
                                  mf.tensor([2, 2, 64, 64, -1, -1])).tolist() == [4, -4, 0, -1, 0, -1]
    i8 = mf.tensor(np.array([1, 64], np.int8))
    assert (i8 << mf.tensor(np.array([7, 1], np.int8))).tolist() == [-128, -128]
    u8 = mf.tensor(np.array([1, 200, 255], np.uint8))
    assert (u8 << 8).tolist() == [0, 0, 0] and (u8 >> 300).tolist() == [0, 0, 0] and (u8 >> 1).dtype == mf.uint8
    assert (2 << mf.tensor([1, 2, 3])).tolist() == [4, 8, 16] and (64 >> mf.tensor([1, 2])).tolist() == [32, 16]
    assert mf.bitwise_left_shift(2, mf.tensor([1, 2])).tolist() == [4, 8]
    assert (mf.tensor(np.array([1], np.int32)) << 2).dtype == mf.int32
    x = mf.tensor([1, 2, 3])
    x <<= 2
    assert x.tolist() == [4, 8, 12]
    x >>= mf.tensor([1, 2, 3])
    assert x.tolist() == [2, 2, 1]
    assert x.bitwise_left_shift_(1) is x and x.tolist() == [4, 4, 2]
    assert x.bitwise_right_shift_(mf.tensor([2, 1, 1])).tolist() == [1, 2, 1]
    b = mf.tensor([-3, 2, 5])  # a bool number shifts by 0 or 1 (PyTorch 2.13's results)
    assert (b << True).tolist() == [-6, 4, 10] and mf.bitwise_left_shift(True, b).tolist() == [0, 4, 32]
    assert (u8 << True).tolist() == [2, 144, 254] and (u8 << True).dtype == mf.uint8
    assert b.bitwise_right_shift_(True).tolist() == [-2, 1, 2]
    flags = mf.tensor([True, False, True])  # a bool tensor beside an int number or tensor: promoted to int64
    assert (flags << 2).tolist() == [4, 0, 4] and (2 >> flags).tolist() == [1, 2, 1] and (flags << 2).dtype == mf.int64
    assert mf.gcd(flags, mf.tensor([-3, 2, 5])).tolist() == [1, 2, 1]
    assert mf.lcm(mf.tensor([-3, 2, 5]), flags).tolist() == [3, 0, 5]
    with pytest.raises(NotImplementedError, match="bitwise_left_shift: not implemented for bool tensors"):
        flags << True
    with pytest.raises(RuntimeError, match="bitwise_left_shift_: result type int64 can't be cast to the desired"):
        flags.bitwise_left_shift_(2)
    with pytest.raises(NotImplementedError, match="bitwise_left_shift: not implemented for float32"):
        mf.tensor([1.0]) << 1
    with pytest.raises(NotImplementedError, match="bitwise_right_shift: not implemented for bool"):
        mf.tensor([True]) >> mf.tensor([True])


def test_logical_and_bitwise_inplace_keep_the_dtype():
    x = mf.tensor([0.0, 1.0, 2.0])
    assert x.logical_and_(mf.tensor([1.0, 1.0, 0.0])) is x and x.tolist() == [0.0, 1.0, 0.0]
    assert mf.tensor([0, 2, 0]).logical_or_(mf.tensor([0, 0, 3])).tolist() == [0, 1, 1]
    assert mf.tensor([True, False]).logical_xor_(mf.tensor([True, True])).tolist() == [False, True]
    assert mf.tensor([0.0, 2.0]).logical_not_().tolist() == [1.0, 0.0]
    assert mf.tensor([1, 2, 3]).bitwise_not_().tolist() == [-2, -3, -4]
    assert mf.tensor([True, False]).bitwise_not_().tolist() == [False, True]
    with pytest.raises(RuntimeError, match=r"output with shape \(2,\) doesn't match the broadcast shape"):
        mf.tensor([0.0, 2.0]).logical_and_(mf.ones(2, 2))


# ---------------------------------------------------------------- the float representation
def test_frexp():
    m, e = mf.frexp(f64([0.0, -3.0, 8.0, inf, nan, 1e-310, -0.0]))
    close(m, [0.0, -0.75, 0.5, inf, nan, np.frexp(1e-310)[0], -0.0])
    assert e.dtype == mf.int32 and e.tolist() == [0, 2, 4, 0, 0, np.frexp(1e-310)[1], 0]
    assert np.signbit(m.numpy()[-1])
    for dtype in (mf.float16, mf.bfloat16):
        m, e = mf.tensor([3.0, 1e-6, 96.0], dtype=dtype).frexp()
        assert m.dtype == dtype and np.array_equal(m.numpy().astype(float) * 2.0 ** e.numpy(),
                                                   mf.tensor([3.0, 1e-6, 96.0], dtype=dtype).numpy().astype(float))
    close(grads(lambda t: mf.frexp(t).mantissa, [3.0, 8.0, -0.1])[1], [0.25, 0.0625, 8.0])  # 2**-exponent
    with pytest.raises(RuntimeError, match="frexp: only floating-point dtypes are supported, got int64"):
        mf.frexp(mf.tensor([1]))


def test_nextafter_every_float_dtype():
    a = f64([1.0, 0.0, -1.0, 2.0])
    close(mf.nextafter(a, f64([2.0, -1.0, 0.0, 2.0])), np.nextafter(a.numpy(), [2.0, -1.0, 0.0, 2.0]), rtol=0)
    for dtype, np_dtype in ((mf.float16, np.float16), (mf.float32, np.float32)):
        x, y = [0.0, -0.0, 1.0, -1.0, inf, 65504.0, 2.0, nan], [-1.0, 1.0, 2.0, 0.0, 0.0, inf, nan, 1.0]
        got = mf.nextafter(mf.tensor(x, dtype=dtype), mf.tensor(y, dtype=dtype)).numpy()
        with np.errstate(over="ignore"):
            want = np.nextafter(np.array(x, np_dtype), np.array(y, np_dtype))
        np.testing.assert_array_equal(got, want)
    b = mf.nextafter(mf.tensor([1.0, 0.0, -1.0, inf], dtype=mf.bfloat16),
                     mf.tensor([2.0, 1.0, 0.0, 0.0], dtype=mf.bfloat16)).numpy().astype(np.float64)
    np.testing.assert_array_equal(b, [1.0078125, 2.0 ** -133, -0.99609375, 3.3895313892515355e+38])
    # PyTorch 2.14's gradient: 1 for input, 0 for other
    _, ga, gb = grads(mf.nextafter, [1.0, 2.0], [0.0, 3.0])
    close(ga, [1.0, 1.0]), close(gb, [0.0, 0.0])
    x = mf.tensor([1.0])
    assert x.nextafter_(mf.tensor([2.0])) is x and x.item() == np.nextafter(np.float32(1), np.float32(2))
    with pytest.raises(NotImplementedError, match="nextafter: not implemented for int64 tensors"):
        mf.nextafter(mf.tensor([1]), mf.tensor([2]))


def test_isreal():
    assert mf.isreal(mf.tensor([1.0, nan])).tolist() == [True, True] and mf.tensor([1, 2]).isreal().dtype == mf.bool


# ---------------------------------------------------------------- errors
def test_errors():
    with pytest.raises(RuntimeError, match=r"polygamma\(n, x\) does not support negative n"):
        mf.polygamma(-1, f64([1.0]))
    with pytest.raises(TypeError, match=r"polygamma\(\): argument 'n' must be int, not float"):
        mf.polygamma(1.0, f64([1.0]))
    with pytest.raises(RuntimeError, match="mvlgamma: p has to be greater than or equal to 1"):
        mf.mvlgamma(f64([1.0]), 0)
    with pytest.raises(TypeError, match=r"lgamma\(\): argument '\w+' must be a Tensor, not list"):
        mf.lgamma([1.0])
    with pytest.raises(TypeError, match=r"i0e\(\): argument 'input' must be Tensor, not float"):
        ms.i0e(1.0)
    with pytest.raises(NotImplementedError, match="igamma: not implemented for int64 tensors"):
        mf.igamma(mf.tensor([1]), mf.tensor([2]))
    with pytest.raises(TypeError, match=r"igamma_\(\): argument 'other' must be Tensor, not float"):
        f64([1.0]).igamma_(2.0)
    with pytest.raises(NotImplementedError, match="logcumsumexp: not implemented for bool tensors"):
        mf.logcumsumexp(mf.tensor([True]), 0)
    with pytest.raises(RuntimeError, match="renorm: expected a floating-point input, got int64"):
        mf.renorm(mf.tensor([[1, 2]]), 2, 0, 1.0)
    with pytest.raises(IndexError, match="renorm: dim 2 is out of range"):
        mf.renorm(f64([[1.0, 2.0]]), 2, 2, 1.0)


# ---------------------------------------------------------------- the kernels on big arrays
def test_kernels_on_big_arrays():
    """Whole arrays at once (no per-element Python: 200000 values in a fraction of a second), with the values of
    the per-element references."""
    x = np.random.default_rng(10).uniform(-20, 50, 200_000)
    lg = K.lgamma(x)
    sample = slice(None, None, 997)
    np.testing.assert_allclose(lg[sample], [math.lgamma(v) for v in x[sample]], rtol=1e-12, atol=1e-12)
    p = np.random.default_rng(11).uniform(0, 1, 200_000)
    np.testing.assert_allclose(K.log_ndtr(K.ndtri(p))[sample], np.log(p[sample]), rtol=1e-12)


# ---------------------------------------------------------------- GPU: the CuPy path against PyTorch's
@pytest.mark.gpu
@pytest.mark.parametrize("name", list(UNARY))
def test_gpu_unary_matches_pytorch(torch, name):
    special = {"i0e", "i1", "i1e", "erfcx", "log_ndtr", "ndtri", "entr"}
    theirs = {"polygamma": lambda t: torch.polygamma(1, t), "mvlgamma": lambda t: torch.mvlgamma(t, 2)}.get(
        name, getattr(torch.special if name in special else torch, name))
    rng = np.random.default_rng(12)
    values = rng.uniform(0.05, 0.95, 1000) if name in ("atanh", "ndtri") else rng.uniform(1.05, 30, 1000)
    x = mf.tensor(values.astype(np.float32), device="cuda", requires_grad=True)
    t = torch.tensor(values.astype(np.float32), device="cuda", requires_grad=True)
    y, ty = UNARY[name](x), theirs(t)
    np.testing.assert_allclose(y.detach().cpu().numpy(), ty.detach().cpu().numpy(), rtol=2e-5, atol=1e-6)
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), t.grad.cpu().numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.gpu
def test_gpu_binary_and_scans_match_pytorch(torch):
    rng = np.random.default_rng(13)
    a, b = (rng.uniform(0.1, 20, 500).astype(np.float32) for _ in range(2))
    for ours, theirs in ((mf.igamma, torch.igamma), (mf.igammac, torch.igammac),
                         (lambda u, v: ms.zeta(u + 1, v), lambda u, v: torch.special.zeta(u + 1, v)),
                         (mf.nextafter, torch.nextafter), (lambda u, v: mf.logcumsumexp(u * v, 0),
                                                           lambda u, v: torch.logcumsumexp(u * v, 0))):
        got = ours(mf.tensor(a, device="cuda"), mf.tensor(b, device="cuda")).cpu().numpy()
        want = theirs(torch.tensor(a, device="cuda"), torch.tensor(b, device="cuda")).cpu().numpy()
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)
    i = rng.integers(-100, 100, 300)
    s = rng.integers(-3, 70, 300)
    for ours, theirs in ((mf.gcd, torch.gcd), (mf.lcm, torch.lcm), (mf.bitwise_left_shift, torch.bitwise_left_shift),
                         (mf.bitwise_right_shift, torch.bitwise_right_shift)):
        got = ours(mf.tensor(i, device="cuda"), mf.tensor(s, device="cuda")).cpu().numpy()
        want = theirs(torch.tensor(i, device="cuda"), torch.tensor(s, device="cuda")).cpu().numpy()
        np.testing.assert_array_equal(got, want)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gpu_bessel_special_points_match_pytorch(torch, dtype):
    """+-inf, NaN, 0 and the overflow range through CuPy's I0 / I1 (and the scaled forms' own code) as PyTorch's."""
    values = np.array([-math.inf, math.inf, math.nan, 0.0, -0.0, 1e3, -1e3, 50.0], dtype)
    for ours, theirs in ((mf.i0, torch.i0), (ms.i0e, torch.special.i0e), (ms.i1, torch.special.i1),
                         (ms.i1e, torch.special.i1e)):
        got = ours(mf.tensor(values, device="cuda")).cpu().numpy()
        want = theirs(torch.tensor(values, device="cuda")).cpu().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, equal_nan=True, err_msg=ours.__name__)
