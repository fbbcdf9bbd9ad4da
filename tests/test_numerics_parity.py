"""Numerics at extreme values where PyTorch's results are easy to miss: ``hypot`` without the overflow or underflow
of the squares, the zero gradient of ``div(rounding_mode='trunc')`` (also by 0) and its rounding in 16 bits, the
loss checks and NaNs of ``soft_margin_loss`` and ``cross_entropy`` (target weights summing to 0 with label
smoothing, a negative smoothing) and ``scaled_dot_product_attention`` in float16 with scores past float16's range.
Expected values are computed with NumPy in float64 or by hand from PyTorch's documented formulas."""
import math

import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
from minifused import backend
from tolerances import TOL, cpu, rel_err

inf, nan = math.inf, math.nan


# ---------------------------------------------------------------- hypot
def test_hypot_does_not_overflow_or_underflow():
    """hypot(a, b) is |a| sqrt(1 + (b/a)^2), never the squares: float16 (300, 400) is 500; float32 (1e20, 1e20)
    and (1e-30, 1e-30) are finite and nonzero; an infinite side wins over NaN (C99's hypot)."""
    h16 = mf.hypot(cpu([300.0, 3e4], dtype=mf.float16), cpu([400.0, 4e4], dtype=mf.float16))
    np.testing.assert_array_equal(h16.numpy(), np.array([500.0, 5e4], np.float16))
    a = np.array([1e20, 1e-30, inf, nan, -inf, 3.0], np.float32)
    b = np.array([1e20, 1e-30, nan, -inf, 2.0, -4.0], np.float32)
    got = mf.hypot(cpu(a), cpu(b)).numpy()
    want = np.sqrt(a.astype(np.float64) ** 2 + b.astype(np.float64) ** 2)  # float64 has the range for these
    want[2:5] = inf
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=TOL[np.dtype(np.float32)])
    bf = mf.hypot(cpu([6e4], dtype=mf.bfloat16), cpu([6e4], dtype=mf.bfloat16))  # float16's range exceeded
    assert bf.dtype == mf.bfloat16 and abs(float(bf.float().item()) / (6e4 * math.sqrt(2)) - 1) < TOL[backend.bfloat16]


def test_hypot_gradient():
    """d/da = a / hypot, d/db = b / hypot (broadcast operands summed back), finite where the squares overflow,
    NaN at the origin (0 / 0, as PyTorch's); checked against central differences in float64."""
    a = cpu(np.array([3.0, 1e20, 1e-30, 0.0, -5.0], np.float32), requires_grad=True)
    b = cpu(np.array([4.0, 1e20, 1e-30, 0.0, 12.0], np.float32), requires_grad=True)
    mf.hypot(a, b).sum().backward()
    r = math.sqrt(0.5)
    np.testing.assert_allclose(a.grad.numpy(), [0.6, r, r, nan, -5 / 13], rtol=1e-6)
    np.testing.assert_allclose(b.grad.numpy(), [0.8, r, r, nan, 12 / 13], rtol=1e-6)

    av, bv = np.array([[1.0, -2.0, 0.5]]), np.array([[2.0], [-3.0]])
    x, y = cpu(av, requires_grad=True), cpu(bv, requires_grad=True)
    mf.hypot(x, y).sum().backward()
    h = 1e-6
    fd_a = [(np.hypot(av + h * e, bv).sum() - np.hypot(av - h * e, bv).sum()) / (2 * h)
            for e in np.eye(3).reshape(3, 1, 3)]
    fd_b = [(np.hypot(av, bv + h * e).sum() - np.hypot(av, bv - h * e).sum()) / (2 * h)
            for e in np.eye(2).reshape(2, 2, 1)]
    np.testing.assert_allclose(x.grad.numpy().ravel(), fd_a, rtol=1e-7)
    np.testing.assert_allclose(y.grad.numpy().ravel(), fd_b, rtol=1e-7)


def test_hypot_half_gradient_and_inplace():
    a = cpu([300.0], dtype=mf.float16, requires_grad=True)
    b = cpu([400.0], dtype=mf.float16, requires_grad=True)
    mf.hypot(a, b).sum().backward()
    np.testing.assert_allclose(a.grad.numpy().astype(np.float64), [0.6], rtol=TOL[np.dtype(np.float16)])
    np.testing.assert_allclose(b.grad.numpy().astype(np.float64), [0.8], rtol=TOL[np.dtype(np.float16)])
    x = cpu([3e4, 0.0], dtype=mf.float16)
    x.hypot_(cpu([4e4, 0.0], dtype=mf.float16))
    np.testing.assert_array_equal(x.numpy(), np.array([5e4, 0.0], np.float16))


# ---------------------------------------------------------------- div(rounding_mode='trunc')
def test_divide_trunc_gradient_is_zero_also_by_zero():
    """The truncated quotient is flat: zero gradients for both operands, where the divisor is 0 too (the true
    quotient's gradient 1/b and -a/b^2 would be inf and NaN there)."""
    for mode in ("trunc", "floor"):
        a = cpu([1.0, -1.0, 7.0], requires_grad=True)
        b = cpu([0.0, 2.0, -0.0], requires_grad=True)
        out = mf.div(a, b, rounding_mode=mode)
        out.sum().backward()
        np.testing.assert_array_equal(a.grad.numpy(), np.zeros(3, np.float32))
        np.testing.assert_array_equal(b.grad.numpy(), np.zeros(3, np.float32))
    np.testing.assert_array_equal(mf.div(cpu([1.0, -1.0, 7.0]), cpu([0.0, 2.0, -2.0]), rounding_mode="trunc").numpy(),
                                  [inf, -0.0, -3.0])
    a = cpu([7.0, -7.0], requires_grad=True)
    a.div(0.0, rounding_mode="trunc").sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [0.0, 0.0])


@pytest.mark.parametrize("dtype", [mf.float16, mf.bfloat16])
def test_divide_trunc_half_truncates_before_rounding(dtype):
    """16-bit operands are divided and truncated in float32 and rounded once: 254 / 0.99609375 = 254.996... is
    254, although that quotient rounds to 255 in either 16-bit type. A Python divisor is taken unrounded."""
    a, b = cpu([254.0], dtype=dtype), cpu([0.99609375], dtype=dtype)
    want = np.trunc(np.float32(254.0) / np.float32(0.99609375))
    assert float(mf.div(a, b, rounding_mode="trunc").float().item()) == want == 254.0
    assert float(a.div(0.996, rounding_mode="trunc").float().item()) == np.trunc(254.0 / 0.996) == 255.0
    assert float(mf.div(a, b).float().item()) == 255.0  # (the true quotient, rounded)


# ---------------------------------------------------------------- losses
def test_soft_margin_loss_target_requiring_grad_raises():
    x = cpu([1.0, 2.0], requires_grad=True)
    t = cpu([1.0, -1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="soft_margin_loss: not differentiable with respect to argument 'target'"):
        F.soft_margin_loss(x, t)
    with mf.no_grad():
        got = F.soft_margin_loss(x, t).item()
    assert got == pytest.approx(np.mean(np.log1p(np.exp([-1.0, 2.0]))), rel=1e-6)
    F.soft_margin_loss(x, t.detach()).backward()  # a target without grad is fine
    np.testing.assert_allclose(x.grad.numpy(), [-0.5 / (1 + np.e), 0.5 / (1 + np.exp(-2.0))], rtol=1e-6)


def _log_softmax(x):
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def test_cross_entropy_zero_target_weights_with_smoothing_is_nan():
    """'mean' over targets whose weights sum to 0: PyTorch divides the target term and the smoothing term by that
    sum apart, so the loss is 0/0 + x/0 = NaN, and so is the gradient of every row not ignored (ignored rows: 0).
    'sum' divides by nothing and stays finite."""
    xv = np.array([[1.0, 2.0, 3.0], [0.0, 1.0, 2.0], [5.0, 1.0, 0.0]], np.float32)
    t, w = cpu(np.array([0, 1, 2])), cpu([0.0, 0.0, 1.0])
    x = cpu(xv, requires_grad=True)
    loss = F.cross_entropy(x, t, weight=w, label_smoothing=0.1, ignore_index=2)
    assert math.isnan(loss.item())
    loss.backward()
    g = x.grad.numpy()
    assert np.isnan(g[:2]).all() and (g[2] == 0).all()

    x = cpu(xv, requires_grad=True)
    loss = F.cross_entropy(x, t, weight=w, label_smoothing=0.1, ignore_index=2, reduction="sum")
    lp = _log_softmax(xv.astype(np.float64))
    want = -(0.1 / 3) * (lp[:2] * np.array([0.0, 0.0, 1.0])).sum()  # the target term has weight 0
    assert loss.item() == pytest.approx(want, rel=1e-6)
    loss.backward()
    assert np.isfinite(x.grad.numpy()).all()


def test_cross_entropy_label_smoothing_range():
    """A negative label_smoothing smooths nothing (PyTorch's: it smooths only by a positive amount); above 1 is an
    error."""
    xv = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]], np.float32)
    t, tp = cpu(np.array([1, 2])), cpu([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]])
    lp = _log_softmax(xv.astype(np.float64))
    for ls in (-0.1, -5.0):
        assert F.cross_entropy(cpu(xv), t, label_smoothing=ls).item() == pytest.approx(
            -(lp[0, 1] + lp[1, 2]) / 2, rel=1e-6)
        assert F.cross_entropy(cpu(xv), tp, label_smoothing=ls).item() == pytest.approx(
            -(lp * tp.numpy()).sum() / 2, rel=1e-6)
    with pytest.raises(ValueError, match="label_smoothing"):
        F.cross_entropy(cpu(xv), t, label_smoothing=1.1)


# ---------------------------------------------------------------- scaled_dot_product_attention
def _attention_reference(q, k, v):
    """(output, dq, dk, dv) of sum(softmax(q k^T / sqrt(E)) v) in float64."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    scale = 1 / math.sqrt(q.shape[-1])
    s = q @ np.swapaxes(k, -1, -2) * scale
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dp = np.ones(q.shape[:-1] + (v.shape[-1],)) @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    return p @ v, ds @ k * scale, np.swapaxes(ds, -1, -2) @ q * scale, np.swapaxes(p, -1, -2).sum(-1, keepdims=True) \
        * np.ones(v.shape)


def test_sdpa_float16_scores_beyond_float16_range():
    """Scaled scores past 65504 (float16's largest) give finite outputs and gradients: the scores and the softmax
    are computed in float32, the result in the input's dtype."""
    dtype = mf.float16
    rng = np.random.default_rng(0)
    q = np.array([[[300.0, 400.0, 0.0], [100.0, -200.0, 200.0]]], np.float32)
    cases = [(q, 1.5 * q, q),
             tuple(rng.standard_normal((2, 4, 8)).astype(np.float32) * s for s in (40.0, 40.0, 1.0))]
    for qv, kv, vv in cases:
        ts = [cpu(a, dtype=dtype, requires_grad=True) for a in (qv, kv, vv)]
        out = F.scaled_dot_product_attention(*ts)
        assert out.dtype == dtype
        out.float().sum().backward()
        rounded = [t.detach().float().numpy() for t in ts]  # the reference reads the inputs as rounded
        tol = TOL[np.dtype(dtype)]
        for got, want in zip([out.float().detach().numpy()] + [t.grad.float().numpy() for t in ts],
                             _attention_reference(*rounded)):
            assert np.isfinite(got).all()
            assert rel_err(got, want) < 4 * tol


# ---------------------------------------------------------------- loss gradients for targets, var of ints, inf norms
def _target_grad(fn, xs, ts, **kw):
    t = cpu(np.asarray(ts, np.float64), requires_grad=True)
    fn(cpu(np.asarray(xs, np.float64)), t, reduction="sum", **kw).backward()
    return t.grad.numpy()


def test_loss_target_gradients_at_the_edges():
    """The target gradients from the unclamped formulas, as PyTorch's: BCE's log(1 - x) - log(x) (inf at x = 0,
    -inf at 1, 103.6 at 1e-45 where the clamped log stops at 100), BCE with logits' pos_weight softplus(-x) -
    softplus(x) (inf at x = -inf, not inf - inf), KL divergence's log(t) + 1 - x (NaN at t = 0)."""
    x = np.array([0.0, 1.0, 1e-45, 0.3])
    got = _target_grad(F.binary_cross_entropy, x, [0.5] * 4)
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(got, np.log1p(-x) - np.log(x), rtol=1e-12)
    pw = cpu(np.array([1.0, 2.0, 3.0, 1.0]))
    x = np.array([-inf, 3.0, -2.0, 0.0])
    got = _target_grad(F.binary_cross_entropy_with_logits, x, [0.5, 0.2, 0.5, 1.0], pos_weight=pw)
    softplus = np.logaddexp(0.0, x)
    want = pw.numpy() * np.logaddexp(0.0, -x) - softplus
    want[0] = inf
    np.testing.assert_allclose(got, want, rtol=1e-12)
    got = _target_grad(F.kl_div, [-1.0, -2.0, -0.5], [0.0, 0.3, 0.7])
    assert math.isnan(got[0])
    np.testing.assert_allclose(got[1:], np.log([0.3, 0.7]) + 1 - np.array([-2.0, -0.5]), rtol=1e-12)


@pytest.mark.parametrize("op", ["var", "std", "var_mean", "std_mean"])
def test_var_std_of_integers_refuse(op):
    with pytest.raises(RuntimeError, match="floating point"):
        getattr(mf, op)(cpu(np.array([1, 2, 3])))


def test_inf_norm_gradient_is_zero_where_the_norm_is_nan():
    x = cpu([1.0, nan, 3.0], requires_grad=True)
    mf.linalg.vector_norm(x, inf).backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]
    y = cpu([1.0, -3.0, 3.0], requires_grad=True)  # (ties share the gradient)
    mf.linalg.vector_norm(y, inf).backward()
    assert y.grad.tolist() == [0.0, -0.5, 0.5]


# ---------------------------------------------------------------- division's gradient, integer powers
def test_division_gradient_for_the_divisor_in_float16():
    """-g (a / b) / b, as PyTorch's: b * b first underflows below 2.4e-4 (and overflows past 256) in float16."""
    a = cpu(np.array([1e-4], np.float16))
    b = cpu(np.array([3e-4], np.float16), requires_grad=True)
    (a / b).backward()
    q = np.float16(np.float16(1e-4) / np.float16(3e-4))
    assert b.grad.item() == float(-np.float16(q / np.float16(3e-4)))
    x = cpu(np.array([-12.0, -11.0, -10.0], np.float16), requires_grad=True)
    e = x.exp()
    (e / e.sum())[0].backward()  # a softmax written out in float16 (its gradient was NaN)
    s = np.exp(np.array([-12.0, -11.0, -10.0]))
    s /= s.sum()
    np.testing.assert_allclose(x.grad.numpy().astype(np.float64), s[0] * ((np.arange(3) == 0) - s), atol=2e-3)


def test_integer_powers_with_negative_exponents():
    """PyTorch's integer pow: 1 for a base of 1, +-1 for -1 by the exponent's parity, 0 for other bases."""
    base = cpu(np.array([0, 2, 1, -1, -1, 3]))
    assert (base ** cpu(np.array([-1, -1, -3, -3, -2, 2]))).tolist() == [0, 0, 1, -1, 1, 9]
    assert (2 ** cpu(np.array([-1, 2]))).tolist() == [0, 4]
    small = cpu(np.array([2, 3], np.int8)) ** cpu(np.array([-1, 3], np.int8))
    assert small.dtype == mf.int8 and small.tolist() == [0, 27]


@pytest.mark.parametrize("dtype", [mf.float32, mf.float64, mf.float16, mf.bfloat16])
def test_half_powers_at_negative_zero_and_infinity(dtype):
    """PyTorch's cpu pow takes the number 0.5 or -0.5 to a float32 / float64 / bfloat16 tensor as sqrt and 1 / sqrt
    (-0.0 to -0.0 and -inf, -inf to NaN); float16's and a tensor exponent's are C's pow (0.0 and inf, inf and 0.0)."""
    x = cpu([-0.0, -inf, 4.0], dtype=dtype)
    as_sqrt = dtype != mf.float16
    for got, want in ((x ** 0.5, [-0.0, nan, 2.0] if as_sqrt else [0.0, inf, 2.0]),
                      (x ** -0.5, [-inf, nan, 0.5] if as_sqrt else [inf, 0.0, 0.5]),
                      (x ** cpu(0.5, dtype=dtype), [0.0, inf, 2.0]), (x ** cpu([0.5], dtype=dtype), [0.0, inf, 2.0])):
        assert got.dtype == dtype
        out = got.float().numpy()
        np.testing.assert_array_equal(out, want)
        assert np.signbit(out[0]) == np.signbit(want[0])  # (the sign of the zero's result)
    t = cpu([-0.0, 4.0], dtype=mf.float64, requires_grad=True)  # d/dx x^0.5 = 0.5 x^-0.5: -inf at -0.0
    (t ** 0.5).sum().backward()
    assert t.grad.tolist() == [-inf, 0.25]


def test_16_bit_power_past_the_dtypes_range_raises():
    """PyTorch casts a number exponent into a float16 / bfloat16 tensor's dtype, checked: past its largest finite
    value is an error (float32's and infinity are not checked)."""
    for dtype, exponent in ((mf.float16, 1e5), (mf.float16, -65520.0), (mf.bfloat16, 1e39)):
        with pytest.raises(RuntimeError, match="cannot be converted to type"):
            cpu([1.0, 0.5], dtype=dtype) ** exponent
    assert (cpu([1.0, 0.5], dtype=mf.float16) ** 65504.0).tolist() == [1.0, 0.0]
    assert (cpu([1.0, 0.5], dtype=mf.float16) ** inf).tolist() == [1.0, 0.0]
    assert (cpu([1.0, 0.5]) ** 1e39).tolist() == [1.0, 0.0]
    got = cpu(np.array([1, 2], np.int32)) ** 1e20  # (an integer tensor to a float: a float32 result, unchecked)
    assert got.dtype == mf.float32 and got.tolist() == [1.0, inf]
    assert (cpu(np.array([4], np.uint8)) ** -1.5).tolist() == [0.125]


def test_negative_power_of_a_bool_tensor_raises_runtime_error():
    with pytest.raises(RuntimeError, match="negative integer powers"):
        cpu([True, False]) ** -1


# ---------------------------------------------------------------- normalize in 16 bits, sinc's gradient
@pytest.mark.parametrize("dtype", [mf.float16, mf.bfloat16])
def test_normalize_clamps_in_the_input_dtype(dtype):
    """PyTorch's normalize divides by ``norm.clamp_min(eps)``, a tensor of the input's dtype: eps=1e-12 rounds to 0
    in float16, so a zero row is 0/0 = NaN in value and gradient; bfloat16 holds 1e-12, so there the row is 0 and
    its gradient 1/eps rounded. A nonzero row is x / ||x||, its gradient (I - u u^T) / ||x|| applied to ones."""
    x = np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 2.0]])
    t = cpu(x, dtype=dtype, requires_grad=True)
    y = F.normalize(t, dim=1)
    y.sum().backward()
    got, grad = y.float().numpy().astype(np.float64), t.grad.float().numpy().astype(np.float64)
    u = x[1] / 3.0
    np.testing.assert_allclose(got[1], u, rtol=1e-2)
    np.testing.assert_allclose(grad[1], (1 - u * u.sum()) / 3.0, rtol=2e-2, atol=1e-2)
    if dtype == mf.float16:
        assert np.isnan(got[0]).all() and np.isnan(grad[0]).all()
    else:
        np.testing.assert_array_equal(got[0], 0.0)
        eps = float(np.float32(1e-12).astype(backend.bfloat16))
        np.testing.assert_allclose(grad[0], 1 / eps, rtol=1e-2)


def test_sinc_gradient_float32_is_accurate():
    """sinc'(x) = (pi x cos(pi x) - sin(pi x)) / (pi x^2): the float32 gradient is the float64 value rounded once
    (a difference formed in float32 cancels to about 1e-5 relative)."""
    x = (np.random.default_rng(0).standard_normal(2000) * 2).astype(np.float32)
    t = cpu(x, requires_grad=True)
    mf.sinc(t).sum().backward()
    w = x.astype(np.float64)
    want = (math.pi * w * np.cos(math.pi * w) - np.sin(math.pi * w)) / (math.pi * w * w)
    assert np.abs(t.grad.numpy() - want).max() < 1e-6 * np.abs(want).max()
