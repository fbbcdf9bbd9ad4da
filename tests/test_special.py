"""minifused/ops/special.py and ops/aliases.py beyond their registry entries (tests/opinfo.py, SPECIAL_OPS): values
and gradients at the special points (zeros, ties, NaN, infinities) as PyTorch 2.14 gives them (recorded from
torch on the CPU), dtypes, PyTorch's other spellings against the ops they name, the in-place comparisons'
dtype rule, and the tensor queries (nelement, nbytes, get_device, is_signed, result_type ...)."""
import math

import numpy as np
import pytest

import minifused as mf
from minifused import backend

nan, inf = math.nan, math.inf
LN2, LN3 = math.log(2), math.log(3)


def f64(values, requires_grad=True):
    return mf.tensor(np.array(values, np.float64), requires_grad=requires_grad)


def value_and_grads(fn, *inputs):
    """fn's value and the gradients of sum(fn(...)) with respect to each input (float64 NumPy arrays)."""
    xs = [f64(v) for v in inputs]
    y = fn(*xs)
    y.backward(mf.ones_like(y))
    return [y.detach().numpy()] + [x.grad.numpy() for x in xs]


def assert_same(got, want):
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, np.array(w, np.float64), rtol=1e-7, atol=1e-12, equal_nan=True)


# ---------------------------------------------------------------- special points, as PyTorch gives them
def test_xlogy_at_zero_and_nan():
    got = value_and_grads(mf.xlogy, [0.0, 0.0, 1.0, 2.0, 0.0], [0.0, 2.0, 0.0, 3.0, -1.0])
    assert_same(got, [[0, 0, -inf, 2 * LN3, 0], [0, LN2, -inf, LN3, 0], [nan, 0, inf, 2 / 3, 0]])
    out = mf.xlogy(mf.tensor([0.0, 0.0, 1.0]), mf.tensor([nan, 0.0, nan])).numpy()
    np.testing.assert_array_equal(out, [nan, 0.0, nan])  # 0 * log(NaN) is NaN, 0 * log(0) is 0
    np.testing.assert_allclose(mf.tensor([0.0, 3.0]).xlogy(2).numpy(), [0.0, 3 * LN2])


def test_sinc_logit_and_copysign_gradients():
    assert_same(value_and_grads(mf.sinc, [0.0, 0.5, 1.0]), [[1, 2 / math.pi, 0], [0, -4 / math.pi, -1]])
    assert_same(value_and_grads(lambda x: mf.logit(x, eps=0.1), [0.05, 0.1, 0.5, 0.9, 0.95]),
                [[-2.1972245773362196, -2.1972245773362196, 0, 2.1972245773362196, 2.1972245773362196],
                 [0, 100 / 9, 4, 100 / 9, 0]])
    assert_same(value_and_grads(mf.logit, [-0.5, 0.0, 0.5, 1.0, 1.5]),
                [[nan, -inf, 0, inf, nan], [nan, inf, 4, inf, nan]])
    got = value_and_grads(mf.copysign, [0.0, -0.0, 2.0, -2.0], [-1.0, 1.0, -0.0, 0.0])
    assert_same(got, [[-0.0, 0.0, -2, 2], [0, 0, -1, -1], [0, 0, 0, 0]])
    assert np.signbit(got[0][0]) and not np.signbit(got[0][1])


def test_logit_eps_bounds_as_pytorchs():
    # the bounds in the input's dtype: 1 - 1e-6 is 1 in float16, so x >= 1 gives inf; 1e-6 itself is a float16
    x = [0.0, 0.3, 1.0, 2.0, nan]
    got = mf.logit(mf.tensor(x, dtype=mf.float16), 1e-6).float().numpy()
    lo = float(np.float16(1e-6))
    np.testing.assert_allclose(got[:2], [math.log(lo / (1 - lo)), math.log(0.3 / 0.7)], rtol=2e-3)
    np.testing.assert_array_equal(got[2:], [inf, inf, nan])
    # eps past 0.5: below eps to eps, else above 1 - eps to 1 - eps (not a clamp's min(max(x, lo), hi))
    got = mf.logit(f64(x, requires_grad=False), 0.6).numpy()
    np.testing.assert_allclose(got, [math.log(1.5), math.log(1.5), -math.log(1.5), -math.log(1.5), nan], rtol=1e-15)


def test_erfinv_float64_to_its_tails():
    # checked through libm's erf / erfc: 1 - y is exact in float64 for y >= 0.5, and erfc(x) must give it back
    tails = np.array([1 - 1e-15, 1 - 1e-12, 0.9999, 0.99, 0.5])
    x = mf.erfinv(mf.tensor(np.concatenate([tails, -tails]))).numpy()
    for t, v in zip(tails, x[:5]):
        assert math.erfc(v) == pytest.approx(1 - t, rel=1e-13)
    np.testing.assert_array_equal(x[5:], -x[:5])
    central = np.array([0.3, -0.1, 1e-5, 0.4999])
    for t, v in zip(central, mf.erfinv(mf.tensor(central)).numpy()):
        assert math.erf(v) == pytest.approx(t, rel=1e-15)


def test_fmax_fmin_ties_and_nan():
    a, b = [1.0, 2.0, nan, 3.0, nan, 5.0], [1.0, 3.0, 1.0, nan, nan, 4.0]
    # PyTorch's: the whole gradient to the side the result came from (a tie: input's; a NaN side: the other's)
    assert_same(value_and_grads(mf.fmax, a, b),
                [[1, 3, 1, 3, nan, 5], [1, 0, 0, 1, 1, 1], [0, 1, 1, 0, 0, 0]])
    assert_same(value_and_grads(mf.fmin, a, b),
                [[1, 2, 1, 3, nan, 4], [1, 1, 0, 1, 1, 0], [0, 0, 1, 0, 0, 1]])
    assert mf.fmax(mf.tensor([1, 5]), mf.tensor([3, 2])).tolist() == [3, 5]  # integers stay integers
    for dtype in (mf.float32, mf.float64, mf.float16):  # a tie of zeros gives input's zero, as PyTorch's
        z, nz = mf.tensor([0.0, -0.0], dtype=dtype), mf.tensor([-0.0, 0.0], dtype=dtype)
        for op in (mf.fmax, mf.fmin):
            assert np.signbit(op(z, nz).numpy()).tolist() == [False, True]


def test_logaddexp_extremes():
    got = value_and_grads(mf.logaddexp, [1.0, -inf, 1000.0, inf], [2.0, -inf, 1000.0, 1.0])
    s = 1 / (1 + math.e)
    assert_same(got, [[1 + math.log1p(math.e), -inf, 1000 + LN2, inf], [s, nan, 0.5, 1], [1 - s, nan, 0.5, 0]])
    got = value_and_grads(mf.logaddexp2, [1.0, 3.0, 2000.0], [2.0, 3.0, 2000.0])
    assert_same(got, [[2 + math.log2(1.5), 4, 2001], [1 / 3, 0.5, 0.5], [2 / 3, 0.5, 0.5]])
    assert mf.logaddexp(mf.tensor([1.0], dtype=mf.float16), mf.tensor([2.0])).dtype == mf.float32


def test_heaviside_signbit_nan_reductions():
    out = mf.heaviside(mf.tensor([nan, -0.0, 0.0, -1.0, 2.0]), mf.tensor([0.5]))
    np.testing.assert_array_equal(out.numpy(), [0.0, 0.5, 0.5, 0.0, 1.0])  # NaN gives 0, as PyTorch's
    assert mf.heaviside(mf.tensor([1, 0, -3]), mf.tensor([7])).tolist() == [1, 7, 0]
    assert mf.signbit(mf.tensor([-0.0, 0.0, -1.0, nan])).tolist() == [True, False, True, False]
    assert mf.signbit(mf.tensor([1, -2])).tolist() == [False, True]
    assert mf.signbit(mf.tensor([True])).tolist() == [False]
    assert_same(value_and_grads(mf.nansum, [1.0, nan, 2.0]), [3.0, [1, 0, 1]])
    assert_same(value_and_grads(mf.nanmean, [1.0, nan, 2.0]), [1.5, [0.5, 0, 0.5]])
    rows = mf.tensor([[1.0, nan], [2.0, 3.0], [nan, nan]])
    np.testing.assert_array_equal(mf.nanmean(rows, dim=1, keepdim=True).numpy(), [[1.0], [2.5], [nan]])
    assert mf.nansum(mf.tensor([1, 2], dtype=mf.int32)).dtype == mf.int64  # sum's integer rule
    assert mf.nansum(mf.tensor([1.0, nan]), dtype=mf.float64).dtype == mf.float64


def test_float_power_ldexp_clamp_min():
    x = mf.tensor([0.0, 2.0], requires_grad=True)  # float32 in, float64 out, float32 gradient
    y = mf.float_power(x, mf.tensor([0.0, 3.0]))
    assert y.dtype == mf.float64
    y.sum().backward()
    assert x.grad.dtype == mf.float32 and x.grad.tolist() == [0.0, 12.0]
    assert mf.float_power(mf.tensor([1, 2, 3]), 2).tolist() == [1.0, 4.0, 9.0]
    assert_same(value_and_grads(mf.float_power, [0.0, 2.0], [0.0, 3.0]), [[1, 8], [0, 12], [0, 8 * LN2]])
    assert mf.ldexp(mf.tensor([1.0], dtype=mf.float16), mf.tensor([2])).dtype == mf.float16
    assert mf.ldexp(mf.tensor([1, 2]), mf.tensor([1, 2])).tolist() == [2.0, 8.0]
    assert_same(value_and_grads(mf.ldexp, [1.0, 2.0], [1.0, 3.0]), [[2, 16], [2, 8], [2 * LN2, 16 * LN2]])
    assert_same(value_and_grads(mf.clamp_min, [0.5, 0.7, 0.0], [0.5, 0.5, 0.5]),
                [[0.5, 0.7, 0.5], [1, 1, 0], [0, 0, 1]])  # a tie's gradient goes to the input, as PyTorch's
    out = mf.clamp_min(mf.tensor([1, -1]), 0.5)  # an integer tensor with a float bound: float32
    assert out.dtype == mf.float32 and out.tolist() == [1.0, 0.5]
    assert mf.tensor([1.0, 2.0]).clamp_max(max=1.5).tolist() == [1.0, 1.5]


@pytest.mark.parametrize("name", ["erfc", "exp2", "sinc", "deg2rad", "rad2deg", "logit"])
def test_unary_dtypes(name):
    """Integer and bool input give float32; float16 / bfloat16 keep their dtype (computed in float32)."""
    fn = getattr(mf, name)
    assert fn(mf.tensor([1, 2])).dtype == mf.float32 and fn(mf.tensor([True])).dtype == mf.float32
    a = np.array([0.25, 0.5, 0.75], np.float32)
    want = fn(mf.tensor(a)).numpy()
    for dtype, tol in ((mf.float16, 2e-3), (mf.bfloat16, 1.6e-2)):
        out = fn(mf.tensor(a, dtype=dtype))
        assert out.dtype == dtype
        np.testing.assert_allclose(out.float().numpy(), want, rtol=tol, atol=tol)


# ---------------------------------------------------------------- PyTorch's other spellings
ALIASES = [("absolute", "abs", 1), ("negative", "neg", 1), ("multiply", "mul", 2), ("true_divide", "div", 2),
           ("divide", "div", 2), ("subtract", "sub", 2)]


@pytest.mark.parametrize("alias,op,arity", ALIASES, ids=[a for a, _, _ in ALIASES])
def test_aliases_give_the_ops_values_and_gradients(alias, op, arity):
    rng = np.random.default_rng(3)
    arrays = [rng.uniform(0.5, 2.0, (3, 4)) * rng.choice([-1, 1], (3, 4)) for _ in range(arity)]
    results = []
    for fn in (getattr(mf, alias), getattr(mf, op), lambda *a: getattr(a[0], alias)(*a[1:])):
        xs = [f64(a) for a in arrays]
        y = fn(*xs)
        (y * y).sum().backward()
        results.append([y.detach().numpy()] + [x.grad.numpy() for x in xs])
    for other in results[1:]:
        for got, want in zip(results[0], other):
            np.testing.assert_array_equal(got, want)


def test_comparison_aliases_and_rounding_modes():
    a, b = mf.tensor([1.0, 2.0, 3.0]), mf.tensor([2.0, 2.0, 2.0])
    for alias, op in (("greater", "gt"), ("greater_equal", "ge"), ("less", "lt"), ("less_equal", "le"),
                      ("not_equal", "ne")):
        want = getattr(mf, op)(a, b).tolist()
        assert getattr(mf, alias)(a, b).tolist() == want == getattr(a, alias)(b).tolist()
    n, d = np.array([-7, 7, -8, 6, 0]), np.array([2, -2, 3, -4, 5])
    for mode, ref in (("trunc", lambda p, q: np.trunc(p / q)), ("floor", np.floor_divide)):
        out = mf.divide(mf.tensor(n), mf.tensor(d), rounding_mode=mode)
        assert out.dtype == mf.int64 and out.tolist() == ref(n, d).astype(np.int64).tolist()
        np.testing.assert_array_equal(mf.tensor(n * 1.5).divide(2.0, rounding_mode=mode).numpy(), ref(n * 1.5, 2.0))
    x = mf.tensor([-7.0, 7.0], requires_grad=True)
    mf.divide(x, 2, rounding_mode="trunc").sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]  # PyTorch: no gradient through a rounded quotient
    assert mf.subtract(mf.tensor([5, 6]), mf.tensor([1, 2]), alpha=2).tolist() == [3, 2]
    t = mf.tensor([-7, 7])
    assert t.divide_(2, rounding_mode="floor") is t and t.tolist() == [-4, 3]
    with pytest.raises(RuntimeError, match="divide_: result type float32 can't be cast"):
        mf.tensor([1, 2]).divide_(2)


# ---------------------------------------------------------------- in place
@pytest.mark.parametrize("dtype", [mf.float32, mf.float64, mf.float16, mf.bfloat16, mf.int64, mf.int32, mf.uint8,
                                   mf.bool])
def test_inplace_comparisons_keep_the_dtype(dtype):
    data = np.array([0, 1, 2, 1])
    ref = {"eq_": np.equal, "ne_": np.not_equal, "lt_": np.less, "le_": np.less_equal, "gt_": np.greater,
           "ge_": np.greater_equal, "greater_": np.greater, "greater_equal_": np.greater_equal, "less_": np.less,
           "less_equal_": np.less_equal, "not_equal_": np.not_equal}
    for name, np_fn in ref.items():
        x = mf.tensor(data, dtype=dtype)
        arr, v = x._data, x._version
        assert getattr(x, name)(1) is x and x._data is arr and x._version == v + 1
        assert x.dtype == dtype
        want = np_fn(data.astype(np.dtype(dtype)), 1)
        np.testing.assert_array_equal(x.numpy().astype(np.float64), want.astype(np.float64), err_msg=name)
    x = mf.tensor([0.5, 1.5], dtype=dtype) if backend.is_floating(dtype) else mf.tensor([0, 3], dtype=dtype)
    x.lt_(mf.tensor([1.0, 1.0]))  # another dtype: compared as promoted, written as x's
    assert x.dtype == dtype and x.numpy().astype(np.float64).tolist() == [1.0, 0.0]


def test_inplace_comparison_is_recorded_with_a_zero_gradient():
    leaf = f64([1.0, 2.0, 3.0])
    y = leaf * 2.0
    y.ge_(4.0)
    assert y.tolist() == [0.0, 1.0, 1.0] and y.grad_fn is not None
    (y * 3.0).sum().backward()
    assert leaf.grad.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("name", ["log", "sqrt", "exp", "tanh", "sigmoid", "erfc", "exp2", "sinc", "deg2rad",
                                  "rad2deg", "logit", "abs", "absolute", "neg", "negative"])
def test_recorded_inplace_on_positive_inputs(name):
    """The in-place form of a non-leaf: the out-of-place form's value and gradient, x itself returned."""
    a = np.linspace(0.1, 0.9, 7)
    leaf, ref_leaf = f64(a), f64(a)
    x = leaf * 1.0
    assert getattr(x, name + "_")() is x
    (x * x).sum().backward()
    ref = getattr(ref_leaf * 1.0, name)()
    (ref * ref).sum().backward()
    np.testing.assert_allclose(x.detach().numpy(), ref.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(leaf.grad.numpy(), ref_leaf.grad.numpy(), rtol=1e-12)


def test_inplace_dtype_rules():
    i = mf.tensor([-2, 3])
    assert i.clone().abs_().tolist() == [2, 3] and i.clone().neg_().tolist() == [2, -3]
    assert i.clone().relu_().tolist() == [0, 3] and i.clone().pow_(2).tolist() == [4, 9]
    assert i.clone().clamp_min_(0).tolist() == [0, 3] and i.clone().clip_(-1, 1).tolist() == [-1, 1]
    for name, args in (("exp_", ()), ("sqrt_", ()), ("erfc_", ()), ("xlogy_", (2.0,)), ("copysign_", (-1,)),
                       ("pow_", (0.5,)), ("clamp_max_", (0.5,)), ("ldexp_", (mf.tensor([1, 1]),))):
        with pytest.raises(RuntimeError, match=f"{name}: result type float32 can't be cast to the desired output "
                                               "type int64"):
            getattr(i.clone(), name)(*args)
    x = mf.tensor([2.0, 3.0], dtype=mf.float64)
    assert x.float_power_(2) is x and x.tolist() == [4.0, 9.0]
    x = mf.tensor([1.0, -2.0])
    assert x.ldexp_(mf.tensor([2, 1])) is x and x.tolist() == [4.0, -4.0]
    assert x.heaviside_(mf.tensor([0.5])) is x and x.tolist() == [1.0, 0.0]
    assert mf.tensor([1.0, 0.5]).multiply_(2).subtract_(1.0, alpha=2).true_divide_(4).tolist() == [0.0, -0.25]


def test_inplace_binary_forms_record_gradients():
    """xlogy_ / copysign_ / pow_ / clamp_min_ on a non-leaf: the out-of-place gradients, both operands'."""
    forms = (("xlogy_", mf.xlogy), ("copysign_", mf.copysign), ("pow_", mf.pow), ("clamp_min_", mf.clamp_min))
    for name, plain in forms:
        a, b = np.array([0.5, 1.5 if name == "pow_" else -1.5, 2.0]), np.array([1.5, 0.5, 0.7])
        leaf, other = f64(a), f64(b)
        x = leaf * 1.0
        getattr(x, name)(other if name != "clamp_min_" else 0.6)
        (x * x).sum().backward()
        ref_leaf, ref_other = f64(a), f64(b)
        y = plain(ref_leaf * 1.0, ref_other if name != "clamp_min_" else 0.6)
        (y * y).sum().backward()
        np.testing.assert_allclose(x.detach().numpy(), y.detach().numpy(), rtol=1e-12, equal_nan=True, err_msg=name)
        np.testing.assert_allclose(leaf.grad.numpy(), ref_leaf.grad.numpy(), rtol=1e-12, equal_nan=True, err_msg=name)
        if name != "clamp_min_":
            np.testing.assert_allclose(other.grad.numpy(), ref_other.grad.numpy(), rtol=1e-12, equal_nan=True)


# ---------------------------------------------------------------- sizes, dtypes and devices
def test_tensor_queries():
    x = mf.zeros(2, 3, dtype=mf.float16)
    assert x.nelement() == 6 and x.ndimension() == 2 and x.itemsize == 2 and x.nbytes == 12
    assert x.is_cpu and x.get_device() == -1 and not x.is_complex() and not mf.is_complex(x)
    assert x.is_same_size(mf.ones(2, 3)) and not x.is_same_size(mf.ones(3, 2))
    assert mf.zeros((), dtype=mf.float64).nbytes == 8 and mf.zeros(0).nbytes == 0
    signed = {mf.uint8: False, mf.int8: True, mf.int16: True, mf.int64: True, mf.bool: False, mf.float16: True,
              mf.bfloat16: True, mf.float32: True}
    assert {d: mf.zeros(1, dtype=d).is_signed() for d in signed} == signed
    assert mf.tensor([[2.0]]).is_nonzero() and not mf.tensor(0).is_nonzero()
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with no values is ambiguous"):
        mf.tensor([]).is_nonzero()
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value is ambiguous"):
        mf.tensor([1, 2]).is_nonzero()
    with pytest.raises(TypeError, match=r"is_same_size\(\): argument 'other' must be Tensor, not tuple"):
        x.is_same_size((2, 3))
    v = mf.tensor([1.9, -2.0, 100.0])
    for method, dtype, want in (("byte", mf.uint8, [1, 254, 100]), ("char", mf.int8, [1, -2, 100]),
                                ("short", mf.int16, [1, -2, 100])):
        out = getattr(v if method != "byte" else mf.tensor([1.9, 254.0, 100.0]), method)()
        assert out.dtype == dtype and out.tolist() == want


def test_result_type_promote_types_can_cast():
    i, f, b = mf.tensor([1, 2]), mf.tensor([1.0]), mf.tensor([True])
    cases = [((i, 1.0), mf.float32), ((1, 2.0), mf.float32), ((2, i), mf.int64), ((b, 1), mf.int64),
             ((i, f), mf.float32), ((1, 2), mf.int64), ((True, False), mf.bool), ((b, True), mf.bool),
             ((f.half(), 2.0), mf.float16), ((f.half(), f.bfloat16()), mf.float32), ((i, 1.5), mf.float32)]
    for args, want in cases:
        assert mf.result_type(*args) == want, args
        if isinstance(args[0], mf.Tensor) and isinstance(args[1], mf.Tensor):
            assert (args[0] + args[1]).dtype == want  # what the ops give
    assert [mf.promote_types(*p) for p in ((mf.uint8, mf.int8), (mf.float16, mf.bfloat16), (mf.bool, mf.int8),
                                           (mf.int32, mf.float16), ("int64", "float64"))] == [
        mf.int16, mf.float32, mf.int8, mf.float16, mf.float64]
    assert [mf.can_cast(*p) for p in ((mf.float64, mf.float32), (mf.float32, mf.int32), (mf.int32, mf.bool),
                                      (mf.bool, mf.int32), (mf.int64, mf.uint8), (mf.float16, mf.bfloat16))] == [
        True, False, False, True, True, True]


def test_clamp_dtype_and_tensor_bound_gradients_as_pytorchs():
    """clamp's result dtype is PyTorch's promotion of the input with its bounds (an integer input with a float
    bound is float32: its values are not truncated); tensor bounds get the gradient where they replaced the
    input (x within the bounds, bounds included, keeps it)."""
    assert mf.tensor([1, -9, 3]).clamp(min=0.5).tolist() == [1.0, 0.5, 3.0]
    assert mf.tensor([1, -9, 3]).clamp(min=0.5).dtype == mf.float32
    assert mf.tensor([True, False]).clamp(0, 1).dtype == mf.int64
    assert mf.tensor([1, 2], dtype=mf.int32).clamp(max=mf.tensor(1)).dtype == mf.int32
    x = mf.tensor([0.2, -1.0, 3.0, 0.7], requires_grad=True)
    lo = mf.tensor([0.0, 0.0, 0.0, 0.5], requires_grad=True)
    hi = mf.tensor(2.0, requires_grad=True)
    y = mf.clamp(x, min=lo, max=hi)
    (y * mf.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    assert y.tolist() == pytest.approx([0.2, 0.0, 2.0, 0.7])
    assert x.grad.tolist() == [1.0, 0.0, 0.0, 4.0]
    assert lo.grad.tolist() == [0.0, 2.0, 0.0, 0.0] and hi.grad.shape == () and float(hi.grad) == 3.0


def test_clamp_number_bound_past_a_16_bit_range_raises():
    for dtype, bound in ((mf.float16, 1e5), (mf.float16, -2 ** 31), (mf.bfloat16, 1e39)):
        x = mf.tensor([1.0, -3.0], dtype=dtype)
        with pytest.raises(RuntimeError, match="cannot be converted to type"):
            mf.clamp(x, max=bound)
        with pytest.raises(RuntimeError, match="cannot be converted to type"):
            x.clamp_min(bound)
    x = mf.tensor([1.0, -3.0], dtype=mf.float16)
    assert mf.clamp(x, -inf, 65504.0).tolist() == [1.0, -3.0]
    assert mf.clamp(mf.tensor([1.0, -3.0]), max=1e20).tolist() == [1.0, -3.0]  # (float32's is 1e20's range)


def test_div_rounding_mode_and_add_sub_alpha_as_pytorchs():
    """div / Tensor.div take PyTorch's rounding_mode (integers stay integers there); add / sub take alpha
    (a + alpha * b), gradients included."""
    a, b, f = mf.tensor([7, -7]), mf.tensor([2, 2]), mf.tensor([7.0, -7.0])
    assert mf.div(a, b, rounding_mode="floor").tolist() == [3, -4]
    assert a.div(b, rounding_mode="trunc").tolist() == [3, -3] and a.div(b, rounding_mode="trunc").dtype == mf.int64
    assert mf.div(f, 2, rounding_mode="trunc").tolist() == [3.0, -3.0] and (a / b).dtype == mf.float32
    assert mf.add(a, b, alpha=2).tolist() == [11, -3] and a.sub(b, alpha=3).tolist() == [1, -13]
    assert mf.add(f, 1, alpha=0.5).tolist() == [7.5, -6.5]
    x, y = mf.tensor([1.0, 2.0], requires_grad=True), mf.tensor([3.0, 4.0], requires_grad=True)
    mf.sub(x, y, alpha=2).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0] and y.grad.tolist() == [-2.0, -2.0]
    with pytest.raises(RuntimeError, match="expected rounding_mode to be one of None, 'trunc', or 'floor'"):
        mf.div(a, b, rounding_mode="round")
    with pytest.raises(TypeError, match="add: alpha must be a number, got str"):
        mf.add(a, b, alpha="2")


def test_zero_dim_tensors_promote_as_pytorchs():
    """PyTorch's rule: a 0-d tensor beside a dimensioned one decides the dtype only where its kind (bool,
    integer, float) is higher; two tensors of one kind of dimension promote as usual. In-place arithmetic
    and the gradients follow (each operand's gradient in its own dtype)."""
    f32, i32, bf16 = mf.ones(2), mf.ones(2, dtype=mf.int32), mf.ones(2, dtype=mf.bfloat16)
    f64_0, i64_0, f32_0 = mf.tensor(2.0, dtype=mf.float64), mf.tensor(3), mf.tensor(0.5)
    cases = [((f32, f64_0), mf.float32), ((f64_0, f32), mf.float32), ((i32, i64_0), mf.int32),
             ((i32, f32_0), mf.float32), ((i32, f64_0), mf.float64), ((mf.tensor([True]), i64_0), mf.int64),
             ((bf16, f32_0), mf.bfloat16), ((f32_0, f64_0), mf.float64), ((mf.ones(1, dtype=mf.float64), f32),
                                                                           mf.float64)]
    for (a, b), want in cases:
        assert mf.result_type(a, b) == want and (a * b).dtype == want and (a + b).dtype == want, (a, b)
    x = mf.ones(2)
    x += f64_0
    assert x.dtype == mf.float32 and x.tolist() == [3.0, 3.0]
    w = mf.tensor([1.0, 2.0], requires_grad=True)
    s = mf.tensor(3.0, dtype=mf.float64, requires_grad=True)
    y = w * s
    assert y.dtype == mf.float32
    y.sum().backward()
    assert w.grad.dtype == mf.float32 and w.grad.tolist() == [3.0, 3.0]
    assert s.grad.dtype == mf.float64 and float(s.grad) == 3.0


# ---------------------------------------------------------------- CUDA against the NumPy path, every dtype
GPU_CASES = {
    "erfc": lambda a, b: a.erfc(), "exp2": lambda a, b: a.exp2(), "sinc": lambda a, b: a.sinc(),
    "deg2rad": lambda a, b: a.deg2rad(), "logit": lambda a, b: (a * 0.2 + 0.5).logit(eps=0.05),
    "xlogy": lambda a, b: a.xlogy(b.abs() + 0.5), "logaddexp": mf.logaddexp, "logaddexp2": mf.logaddexp2,
    "fmax": mf.fmax, "fmin": mf.fmin, "copysign": mf.copysign, "ldexp": lambda a, b: a.ldexp(b.round()),
    "float_power": lambda a, b: mf.float_power(a.abs() + 0.5, b), "nansum": lambda a, b: a.nansum(1),
    "nanmean": lambda a, b: mf.nanmean(a, 0), "clamp_min": lambda a, b: a.clamp_min(0.1),
    "clamp_max_tensor": lambda a, b: a.clamp_max(b), "heaviside": lambda a, b: mf.heaviside(a.round(), b),
    "signbit": lambda a, b: mf.signbit(a.round()), "divide_trunc": lambda a, b: a.divide(b, rounding_mode="trunc"),
}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [mf.float32, mf.float16, mf.bfloat16], ids=str)
@pytest.mark.parametrize("name", list(GPU_CASES))
def test_cuda_matches_cpu(name, dtype):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((5, 7)).astype(np.float32) for _ in range(2)]
    results = {}
    for device in ("cpu", "cuda"):
        xs = [mf.tensor(a, dtype=dtype, device=device, requires_grad=True) for a in arrays]
        y = GPU_CASES[name](*xs)
        if y.requires_grad:
            y.float().sum().backward()
        results[device] = [y.detach().float().cpu().numpy()] + [
            x.grad.float().cpu().numpy() for x in xs if x.grad is not None]
    tol = {mf.float32: 1e-5, mf.float16: 2e-3, mf.bfloat16: 1.6e-2}[dtype]
    assert len(results["cpu"]) == len(results["cuda"])
    for got, want in zip(results["cuda"], results["cpu"]):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [mf.float16, mf.bfloat16, mf.int64], ids=str)
def test_cuda_inplace_forms(dtype):
    for name, args in (("abs_", ()), ("neg_", ()), ("clamp_min_", (1,)), ("clamp_max_", (1,)), ("clip_", (-1, 1)),
                       ("eq_", (1,)), ("lt_", (0.5,)), ("pow_", (2,)), ("relu_", ())):
        a = np.array([[-2, 0, 1], [3, 1, -1]])
        want = getattr(mf.tensor(a, dtype=dtype, device="cpu"), name)(*args)
        x = mf.tensor(a, dtype=dtype, device="cuda")
        assert getattr(x, name)(*args) is x and x.dtype == dtype
        np.testing.assert_array_equal(x.cpu().numpy().astype(np.float64), want.numpy().astype(np.float64), name)


def test_clamp_inplace_is_recorded_as_clamp():
    """Tensor.clamp_ (as clip_) on a tensor inside the graph: written in place, its version bumped, and the
    gradient that of clamp (1 inside the bounds, 0 outside); a leaf that requires grad is refused."""
    x = mf.tensor([-1.0, 0.2, 0.5, 3.0], requires_grad=True)
    y = x * 2
    version = y._version
    assert y.clamp_(0.0, 1.0) is y and y._version == version + 1
    np.testing.assert_allclose(y.detach().numpy(), [0.0, 0.4, 1.0, 1.0])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 2.0, 2.0, 0.0])
    with pytest.raises(RuntimeError, match="clamp_: a leaf Variable that requires grad"):
        x.clamp_(0, 1)
    assert mf.tensor([1, 5, -3]).clamp_(0, 2).tolist() == [1, 2, 0]
