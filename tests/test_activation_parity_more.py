"""Activation values and gradients to PyTorch's CPU rounding rules: the constants its kernels use, the steps its
composite ops round in 16-bit floats, and the dtypes and errors of edge inputs (tests/test_activation_loss.py
holds the broader checks)."""
import numpy as np
import pytest

import minifused as mf
import minifused.functional as F


def _grad(fn, x, g, dtype):
    """The input gradient of ``fn`` at ``x`` (float64 values rounded to ``dtype``) for upstream ``g``."""
    t = mf.tensor(np.asarray(x, np.float32)).to(dtype).requires_grad_()
    y = fn(t)
    y.backward(mf.tensor(np.asarray(g, np.float32)).to(dtype))
    return t.grad


def test_hardsigmoid_grad_uses_float32_one_sixth():
    # PyTorch's backward is grad * (1.0f / 6.0f): in float64 that is 0.1666666716337204, not 1/6
    g = _grad(F.hardsigmoid, [0.0, 1.0, -2.5, 3.0, -3.0], [1.0, -2.0, 3.0, 1.0, 1.0], mf.float64)
    sixth = float(np.float32(1 / 6))
    np.testing.assert_array_equal(g.numpy(), [sixth, -2 * sixth, 3 * sixth, 0.0, 0.0])
    assert g.numpy()[0] == 0.1666666716337204


def _f16(a):
    return np.asarray(a, np.float32).astype(np.float16)


def test_softsign_tanhshrink_round_each_step_in_float16():
    # PyTorch composes them (x / (|x| + 1), x - tanh(x)): in float16 each step rounds to float16
    x = _f16([0.1, -1.8309, 0.5, 3.0, -2.0])
    y = F.softsign(mf.tensor(x)).numpy()
    np.testing.assert_array_equal(y, x / (np.abs(x) + np.float16(1)))
    assert y[0] == np.float16(0.0909423828125)  # rounded once from float32 it would be 0.09088
    t = np.tanh(x.astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(F.tanhshrink(mf.tensor(x)).numpy(), x - t)


def test_softsign_tanhshrink_of_integers_and_infinities():
    x = mf.tensor([-3, 0, 2, 7], dtype=mf.int64)  # composite ops: float results, as PyTorch's
    np.testing.assert_allclose(F.softsign(x).numpy(), [-0.75, 0.0, 2 / 3, 0.875], rtol=1e-7)
    assert F.softsign(x).dtype == mf.float32 and F.tanhshrink(x).dtype == mf.float32
    np.testing.assert_allclose(F.tanhshrink(x).numpy(), np.array([-3, 0, 2, 7]) - np.tanh([-3, 0, 2, 7]), rtol=1e-6)
    g = _grad(F.softsign, [np.inf, -np.inf, 1.0], [1.0, 1.0, 1.0], mf.float64).numpy()
    assert np.isnan(g[:2]).all() and g[2] == 0.25  # inf / inf in the quotient's gradient, as PyTorch's
    with pytest.raises(TypeError, match="softsign"):
        F.softsign(mf.tensor([True, False]))


@pytest.mark.parametrize("dtype", [mf.float16, mf.bfloat16])
def test_logsigmoid_grad_reads_the_rounded_buffer(dtype):
    # PyTorch keeps exp(-|x|) in the input's 16-bit dtype for the backward: sigmoid(-x) from that rounded value
    x = np.array([-1.0, 6.0, 20.0, 1.5, 5.0, -0.1, 0.0], np.float32)
    g = np.array([1.0, -1.0, -1.0, 0.25, 0.5, 2.0, 1.0], np.float32)
    xr = mf.tensor(x).to(dtype).float().numpy()
    b = mf.tensor(np.exp(-np.abs(xr))).to(dtype).float().numpy()
    want = np.where(xr < 0, 1 - b / (1 + b), b / (1 + b)) * mf.tensor(g).to(dtype).float().numpy()
    got = _grad(F.logsigmoid, x, g, dtype)
    np.testing.assert_array_equal(got.float().numpy(), mf.tensor(want).to(dtype).float().numpy())


def test_logsigmoid_grad_at_extremes():
    g = _grad(F.logsigmoid, [np.nan, np.inf, -np.inf, 0.0, 1e5, -1e5], np.ones(6), mf.float64).numpy()
    np.testing.assert_array_equal(g, [np.nan, 0.0, 1.0, 0.5, 0.0, 1.0])


def test_sigmoid_grad_rounds_each_step_in_float16():
    # PyTorch's CPU sigmoid backward computes float16 as (g * (1 - y)) * y in float16 (bfloat16 in float32)
    x = np.array([-1.0, 3.0, -2.0, -0.1, 1.5, -1.5], np.float32)
    g = np.array([1.0, -0.3, 0.7, -0.45, 0.2, 0.3], np.float32)
    y = mf.sigmoid(mf.tensor(x).half()).numpy()
    want = g.astype(np.float16) * (np.float16(1) - y) * y
    np.testing.assert_array_equal(_grad(mf.sigmoid, x, g, mf.float16).numpy(), want)
    wide = (g.astype(np.float16).astype(np.float32) * (1 - y.astype(np.float32)) * y).astype(np.float16)
    assert (want != wide).any()  # (the rounding this pins differs from a float32 computation here)


@pytest.mark.parametrize("dtype", [mf.float16, mf.bfloat16])
def test_glu_of_half_types_rounds_once_and_backward_reads_rounded_gate(dtype):
    # PyTorch's glu kernel: a / (1 + exp(-b)) in float32, rounded once; its backward uses sigmoid(b) rounded first
    x = np.array([[0.5, -1.0], [3.0, 0.1], [-2.2, 2.5], [1.7, -0.1], [7.0, -3.0], [-100.0, 5.2]], np.float32)
    g = np.array([[1.0], [-0.7], [0.3], [2.0], [-1.3], [0.9]], np.float32)
    xr = mf.tensor(x).to(dtype).float().numpy().astype(np.float64)
    gr = mf.tensor(g).to(dtype).float().numpy().astype(np.float64)
    a, b = xr[:, :1], xr[:, 1:]
    y = F.glu(mf.tensor(x).to(dtype))
    np.testing.assert_array_equal(y.float().numpy(), mf.tensor(a / (1 + np.exp(-b))).to(dtype).float().numpy())
    s = mf.tensor(1 / (1 + np.exp(-b))).to(dtype).float().numpy().astype(np.float64)
    want = np.concatenate([s * gr, (1 - s) * s * a * gr], 1)
    got = _grad(F.glu, x, g, dtype)
    np.testing.assert_array_equal(got.float().numpy(), mf.tensor(want).to(dtype).float().numpy())


def test_glu_double_backward_float64():
    x = np.random.default_rng(0).standard_normal((3, 6))
    t = mf.tensor(x).requires_grad_()
    (g,) = mf.autograd.grad(F.glu(t, 1), t, mf.ones(3, 3, dtype=mf.float64), create_graph=True)
    g.sum().backward()
    a, b = x[:, :3], x[:, 3:]
    s = 1 / (1 + np.exp(-b))
    ds = s * (1 - s)  # d/da of (s, ds * a) summed: (0, ds); d/db: (ds, a ds (1 - 2 s))
    np.testing.assert_allclose(t.grad.numpy(), np.concatenate([ds, ds + a * ds * (1 - 2 * s)], 1), rtol=1e-12)


def test_relu_of_bool_and_gelu_of_integers_raise():
    # PyTorch: "Boolean inputs not supported for relu"; gelu has no integer kernel (no silent cast to float)
    for fn in (mf.relu, lambda x: x.relu_(), lambda x: F.relu(x, inplace=True), mf.nn.ReLU()):
        with pytest.raises(RuntimeError, match="Boolean inputs not supported for relu"):
            fn(mf.tensor([True, False]))
    np.testing.assert_array_equal(mf.relu(mf.tensor([-2, 3])).numpy(), [0, 3])  # integers are fine
    for dtype in (mf.int64, mf.uint8, mf.bool_):
        with pytest.raises(TypeError, match="gelu: expected a floating-point input"):
            F.gelu(mf.tensor([1, 0]).to(dtype))


def test_softshrink_lambda_range_is_the_input_dtypes():
    # PyTorch refuses a lambda outside [0, the dtype's largest value]: inf, NaN, and 1e5 for float16
    for x, lambd in ((mf.ones(2), float("inf")), (mf.ones(2), float("nan")), (mf.ones(2), -0.5),
                     (mf.ones(2, dtype=mf.float16), 1e5)):
        with pytest.raises(RuntimeError, match="softshrink: lambda must be greater or equal to 0 and at most"):
            F.softshrink(x, lambd)
    np.testing.assert_array_equal(F.softshrink(mf.ones(2, dtype=mf.float16), 65504.0).numpy(), [0, 0])
    np.testing.assert_array_equal(F.softshrink(mf.tensor([0.5, -0.75, 2.0]), 0.5).numpy(), [0, -0.25, 1.5])


def test_prelu_weight_dtype_and_rank_as_pytorchs():
    x = mf.tensor([[-1.0, 2.0, -3.0]])
    with pytest.raises(RuntimeError, match="prelu: Type promoting not supported"):  # no silent cast of the weight
        F.prelu(x, mf.tensor([0.5], dtype=mf.float64))
    with pytest.raises(RuntimeError, match="prelu: Type promoting not supported"):
        mf.nn.PReLU()(x.double())
    with pytest.raises(ValueError, match="prelu: Expected `weight` to be a scalar or 1D tensor"):
        F.prelu(x, mf.ones(1, 3))
    np.testing.assert_array_equal(F.prelu(x, mf.tensor([0.5, 0.25, 0.125])).numpy(), [[-0.5, 2.0, -0.375]])


def test_prelu_channels_last_per_channel():
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    w = np.array([0.1, 0.2, 0.3], np.float32)
    t = mf.tensor(x).to(memory_format=mf.channels_last)
    y = F.prelu(t, mf.tensor(w))
    np.testing.assert_array_equal(y.numpy(), np.where(x > 0, x, w[:, None, None] * x))
    assert y.is_contiguous(memory_format=mf.channels_last)  # (as PyTorch's output)


def test_hardtanh_module_refuses_equal_bounds():
    # nn.Hardtanh asserts max_val > min_val; F.hardtanh only refuses min_val > max_val
    with pytest.raises(ValueError, match=r"max_val \(1.0\) must be greater than min_val \(1.0\)"):
        mf.nn.Hardtanh(1.0, 1.0)
    np.testing.assert_array_equal(F.hardtanh(mf.tensor([-2.0, 3.0]), 1.0, 1.0).numpy(), [1.0, 1.0])


@pytest.mark.parametrize("fn,alpha,scale,input_scale", [
    (lambda x: F.elu(x, 0.7), 0.7, 1.0, 1.0), (F.selu, 1.6732632423543772, 1.0507009873554805, 1.0),
    (lambda x: F.celu(x, 1.5), 1.5, 1.0, 1 / 1.5)])
def test_elu_family_second_derivative_is_zero_at_zero(fn, alpha, scale, input_scale):
    # PyTorch's elu double backward masks with x < 0: at x = 0 the slope is a constant (the first derivative
    # there is still the exp side's, alpha * scale * input_scale)
    x = np.array([-1.0, 0.0, 0.5])
    t = mf.tensor(x).requires_grad_()
    (g,) = mf.autograd.grad(fn(t), t, mf.ones(3, dtype=mf.float64), create_graph=True)
    coef = alpha * scale * input_scale
    np.testing.assert_allclose(g.detach().numpy(), [coef * np.exp(-input_scale), coef, scale], rtol=1e-12)
    g.sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), [coef * input_scale * np.exp(-input_scale), 0.0, 0.0], rtol=1e-12)


def test_softmin_warns_and_raises_in_its_own_name():
    x = mf.tensor([[1.0, 2.0], [3.0, 5.0]])
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmin"):
        y = F.softmin(x)
    e = np.exp(-np.array([[1.0, 2.0], [3.0, 5.0]]))
    np.testing.assert_allclose(y.numpy(), e / e.sum(1, keepdims=True), rtol=1e-6)  # (dim 1 for 2-D)
    with pytest.raises(IndexError, match="softmin: dim 2 out of range"):
        F.softmin(x, 2)
    with pytest.raises(TypeError, match="softmin: expected a float32"):
        F.softmin(mf.tensor([1, 2]), 0)
    np.testing.assert_allclose(F.softmin(mf.tensor([1, 2]), 0, dtype=mf.float32).numpy(),
                               [1 / (1 + np.exp(-1)), 1 / (1 + np.exp(1))], rtol=1e-6)


@pytest.mark.parametrize("dtype", [mf.float16, mf.bfloat16])
def test_elu_in_place_backward_reads_the_rounded_result(dtype):
    # PyTorch's elu_ backward: g * input_scale * (y + alpha * scale) from the result y (in x's dtype) where y <= 0
    x = np.array([-1.9130435, -0.8695652, -0.5217391, -2.6086957, -1.2173913, 0.5], np.float32)
    g = np.arange(1, 7, dtype=np.float32)
    t = mf.tensor(x).to(dtype).requires_grad_()
    y = t * 1
    F.elu_(y, 0.7)
    y.backward(mf.tensor(g).to(dtype))
    yr = y.detach().float().numpy()
    gr = mf.tensor(g).to(dtype).float().numpy()
    want = np.where(yr <= 0, gr * np.float32(1) * (yr + np.float32(0.7) * np.float32(1)), gr)
    np.testing.assert_array_equal(t.grad.float().numpy(), mf.tensor(want).to(dtype).float().numpy())


def test_elu_in_place_negative_alpha_backward_raises():
    t = mf.tensor([-1.0, 2.0]).requires_grad_()
    y = t * 1
    F.elu_(y, -1.0)  # (the forward is fine, as PyTorch's)
    with pytest.raises(RuntimeError, match="In-place elu backward calculation is triggered with a negative slope"):
        y.sum().backward()
    z = t * 1
    F.elu_(z, 0.0)
    z.sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), [0.0, 1.0])


@pytest.mark.parametrize("inplace", [lambda y: F.leaky_relu_(y, -0.5), lambda y: F.rrelu_(y, -0.5, -0.2),
                                     lambda y: mf.nn.LeakyReLU(-0.5, inplace=True)(y)])
def test_leaky_relu_in_place_negative_slope_backward_raises(inplace):
    t = mf.tensor([-1.0, 2.0]).requires_grad_()
    y = t * 1
    inplace(y)
    np.testing.assert_array_equal(y.detach().numpy()[1], 2.0)
    with pytest.raises(RuntimeError, match="In-place leakyReLu backward calculation is triggered with a negative"):
        y.sum().backward()
    z = t * 1
    F.leaky_relu(z, -0.5).sum().backward()  # out of place it is fine, as in PyTorch
    np.testing.assert_array_equal(t.grad.numpy(), [-0.5, 1.0])


def test_softplus_grad_in_pytorchs_order():
    # PyTorch: g * z / (z + 1), z = exp(beta x) in float32 for float16, rounded once
    x = np.array([-1.1074219, -5.4179688, -6.6914062, 6.0546875, 0.65966797, 25.0, -30.0], np.float32)
    g = np.array([0.7036133, -1.1474609, 2.0019531, -0.11730957, 2.8066406, 0.9, 1.0], np.float32)
    xr = mf.tensor(x).half().float().numpy()
    gr = mf.tensor(g).half().float().numpy()
    z = np.exp(xr)
    want = np.where(xr > 20, gr, gr * z / (z + 1)).astype(np.float16)
    np.testing.assert_array_equal(_grad(F.softplus, x, g, mf.float16).numpy(), want)
    e = np.exp(-np.abs(xr))
    stable = gr * np.where(xr >= 0, 1 / (1 + e), e / (1 + e))  # (a stable sigmoid's rounding differs here)
    assert (want[:5] != stable.astype(np.float16)[:5]).all()
    big = _grad(lambda t: F.softplus(t, 1.0, 1e6), [100.0, 1000.0], [1.0, 1.0], mf.float32).numpy()
    np.testing.assert_array_equal(big, [1.0, 1.0])  # (exp overflows: the limit, where PyTorch gives NaN)


def test_number_arguments_take_0d_tensors():
    # PyTorch's Scalar arguments take a 0-d tensor (not one that requires grad, nor one of more dimensions)
    x = mf.tensor([-1.0, 2.0])
    np.testing.assert_allclose(F.elu(x, mf.tensor(0.5)).numpy(), [0.5 * np.expm1(-1.0), 2.0], rtol=1e-6)
    np.testing.assert_array_equal(F.leaky_relu(x, mf.tensor(0.25)).numpy(), [-0.25, 2.0])
    np.testing.assert_array_equal(F.hardtanh(x, mf.tensor(-0.5), 0.5).numpy(), [-0.5, 0.5])
    np.testing.assert_array_equal(F.threshold(x, mf.tensor(0.0), 3.0).numpy(), [3.0, 2.0])
    for bad in (mf.tensor([0.5]), mf.tensor(0.5).requires_grad_()):
        with pytest.raises(TypeError, match="elu: alpha must be a number, got Tensor"):
            F.elu(x, bad)


def test_number_arguments_take_bools():
    # PyTorch's float parameters take a bool as 0 or 1 (PyTorch 2.13's values)
    x, y = mf.tensor([-1.5, 0.5, 3.0]), mf.tensor([0.25, 2.0, -1.0])
    assert F.leaky_relu(x, True).tolist() == [-1.5, 0.5, 3.0] and F.hardtanh(x, True, 4).tolist() == [1.0, 1.0, 3.0]
    assert F.threshold(x, True, False).tolist() == [0.0, 0.0, 3.0]
    assert F.softshrink(x, True).tolist() == [-0.5, 0.0, 2.0]
    assert F.threshold(mf.tensor([-3, 2, 5]), True, False).tolist() == [0, 2, 5]
    np.testing.assert_allclose(F.elu(x, True).numpy(), [-0.7768698334693909, 0.5, 3.0], rtol=1e-6)
    np.testing.assert_allclose(F.normalize(x, p=True, dim=0).numpy(), [-0.3, 0.1, 0.6], rtol=1e-6)
    assert F.huber_loss(x, y, delta=True).item() == pytest.approx(1.9166666269302368, rel=1e-6)
    assert F.margin_ranking_loss(x, 2 * x, mf.tensor([1.0, -1.0, 1.0]), margin=True).item() == 1.5
    z = mf.tensor([float("nan"), float("inf"), -float("inf"), 1.5])
    assert mf.nan_to_num(z, nan=True, posinf=False, neginf=True).tolist() == [1.0, 0.0, 1.0, 1.5]


def test_prelu_module_takes_a_numpy_int():
    m = mf.nn.PReLU(np.int64(3), init=0.5)
    assert repr(m) == "PReLU(num_parameters=3)" and m.weight.shape == (3,)
    np.testing.assert_array_equal(m(mf.tensor([[-2.0, 1.0, -4.0]])).detach().numpy(), [[-1.0, 1.0, -2.0]])
    for bad in (3.0, True, 0):
        with pytest.raises(ValueError, match="PReLU: num_parameters must be a positive int"):
            mf.nn.PReLU(bad)


def test_logsigmoid_output_is_c_contiguous():
    # PyTorch's log_sigmoid_forward gives a C-contiguous output for a channels-last input (a .view(n, -1) works)
    x = np.random.default_rng(0).standard_normal((2, 4, 3, 6)).astype(np.float32)
    y = F.logsigmoid(mf.tensor(x).to(memory_format=mf.channels_last))
    assert y.is_contiguous()
    np.testing.assert_allclose(y.view(2, -1).numpy(), -np.logaddexp(0, -x).reshape(2, -1), rtol=1e-6)
