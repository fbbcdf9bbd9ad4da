"""Activation and loss layers (nn/activation.py): PyTorch's attributes and ``repr``, the in-place forms,
the losses' edge cases (mse_loss / l1_loss broadcasting with PyTorch's warning, BCE's clamped logs, the
stable logits form, kl_div's reductions, one_hot's inferred classes, normalize of a zero vector) and, on
the GPU, every loss module's output and input gradient against PyTorch in float32 and bfloat16. The ops'
values, gradients and bad inputs are the registry's (tests/opinfo.py, ACTIVATION_OPS)."""
import warnings

import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
import minifused.nn as nn
from minifused import backend
from minifused.testing import gradcheck
from opinfo import bce_with_logits_ref, randn
from tolerances import TOL, cpu, rel_err


def f64(*shape, seed=0, requires_grad=True):
    return cpu(randn(*shape, seed=seed, dtype=np.float64), requires_grad=requires_grad)


# ---------------------------------------------------------------- modules: repr, attributes, in place
@pytest.mark.parametrize("module,text", [
    (nn.LeakyReLU(), "LeakyReLU(negative_slope=0.01)"),
    (nn.LeakyReLU(0.2, inplace=True), "LeakyReLU(negative_slope=0.2, inplace=True)"),
    (nn.SiLU(), "SiLU()"), (nn.SiLU(inplace=True), "SiLU(inplace=True)"),
    (nn.ELU(), "ELU(alpha=1.0)"), (nn.ELU(0.5, True), "ELU(alpha=0.5, inplace=True)"),
    (nn.CELU(2.0), "CELU(alpha=2.0)"), (nn.SELU(), "SELU()"), (nn.SELU(inplace=True), "SELU(inplace=True)"),
    (nn.Softplus(), "Softplus(beta=1.0, threshold=20.0)"), (nn.Softplus(2, 5), "Softplus(beta=2, threshold=5)"),
    (nn.Hardtanh(), "Hardtanh(min_val=-1.0, max_val=1.0)"),
    (nn.Hardtanh(-2.0, 3.0, True), "Hardtanh(min_val=-2.0, max_val=3.0, inplace=True)"),
    (nn.ReLU6(), "ReLU6()"), (nn.ReLU6(inplace=True), "ReLU6(inplace=True)"),
    (nn.Hardsigmoid(), "Hardsigmoid()"), (nn.Hardswish(inplace=True), "Hardswish()"), (nn.Mish(), "Mish()"),
    (nn.Mish(inplace=True), "Mish(inplace=True)"), (nn.Dropout(1), "Dropout(p=1, inplace=False)"),
    (nn.Dropout2d(0.5), "Dropout2d(p=0.5, inplace=False)"),
    (nn.Softsign(), "Softsign()"), (nn.LogSigmoid(), "LogSigmoid()"), (nn.Tanhshrink(), "Tanhshrink()"),
    (nn.BCELoss(), "BCELoss()"), (nn.BCEWithLogitsLoss(), "BCEWithLogitsLoss()"), (nn.L1Loss(), "L1Loss()"),
    (nn.SmoothL1Loss(), "SmoothL1Loss()"), (nn.HuberLoss(), "HuberLoss()"), (nn.KLDivLoss(), "KLDivLoss()"),
    (nn.MSELoss(), "MSELoss()"), (nn.L1Loss(reduction="sum"), "L1Loss()"),
    (nn.KLDivLoss(reduction="batchmean", log_target=True), "KLDivLoss()"),  # (PyTorch prints no settings)
    (nn.LayerNorm(4), "LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=True)"),
    (nn.LayerNorm(4, bias=False), "LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=False)"),
    (nn.Conv1d(2, 3, 3, padding="valid"), "Conv1d(2, 3, kernel_size=(3,), stride=(1,), padding=valid)"),
    (nn.MaxPool2d(3, dilation=2), "MaxPool2d(kernel_size=3, stride=3, padding=0, dilation=2, ceil_mode=False)"),
    (nn.ModuleList([nn.ReLU(), nn.ReLU(), nn.Tanh(), nn.ReLU()]),
     "ModuleList(\n  (0-1): 2 x ReLU()\n  (2): Tanh()\n  (3): ReLU()\n)"),
    (nn.ModuleList(), "ModuleList()"),
])
def test_repr(module, text):
    assert repr(module) == text


def test_load_state_dict_result_shows_as_pytorchs():
    m = nn.Linear(2, 3)
    assert repr(m.load_state_dict(m.state_dict())) == "<All keys matched successfully>"
    sd = m.state_dict()
    sd["x"] = sd.pop("bias")
    result = m.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["bias"] and result.unexpected_keys == ["x"] and result == (["bias"], ["x"])
    assert repr(result) == "_IncompatibleKeys(missing_keys=['bias'], unexpected_keys=['x'])"


def test_attributes_follow_pytorch():
    m = nn.LeakyReLU(0.3)
    assert (m.negative_slope, m.inplace) == (0.3, False)
    assert (nn.ReLU6().min_val, nn.ReLU6().max_val) == (0.0, 6.0)
    assert isinstance(nn.ReLU6(), nn.Hardtanh)
    s = nn.Softplus(beta=2.0, threshold=10.0)
    assert (s.beta, s.threshold) == (2.0, 10.0)
    assert nn.SmoothL1Loss(beta=0.5).beta == 0.5 and nn.HuberLoss(delta=2.0).delta == 2.0
    assert nn.KLDivLoss(log_target=True).log_target is True


ACTIVATIONS = [
    (lambda: nn.LeakyReLU(0.1), lambda a: F.leaky_relu(a, 0.1)),
    (lambda: nn.SiLU(), F.silu), (lambda: nn.ELU(0.7), lambda a: F.elu(a, 0.7)), (lambda: nn.SELU(), F.selu),
    (lambda: nn.CELU(1.5), lambda a: F.celu(a, 1.5)), (lambda: nn.Hardtanh(-0.5, 0.5), lambda a: F.hardtanh(a, -0.5, 0.5)),
    (lambda: nn.ReLU6(), F.relu6), (lambda: nn.Hardsigmoid(), F.hardsigmoid), (lambda: nn.Hardswish(), F.hardswish),
    (lambda: nn.Mish(), F.mish),
]


@pytest.mark.parametrize("make,fn", ACTIVATIONS)
def test_modules_out_of_place_and_in_place(make, fn):
    a = randn(4, 9, seed=3) * 4
    want = fn(cpu(a)).numpy()
    x = cpu(a.copy())
    y = make()(x)
    assert y is not x and np.array_equal(x.numpy(), a)
    np.testing.assert_array_equal(y.numpy(), want)
    m = make()
    m.inplace = True
    x = cpu(a.copy())
    assert m(x) is x and x._version == 1
    np.testing.assert_array_equal(x.numpy(), want)


def test_modules_without_inplace_match_functional():
    x = f64(3, 5)
    for m, fn in ((nn.Softplus(2.0, 3.0), lambda a: F.softplus(a, 2.0, 3.0)), (nn.Softsign(), F.softsign),
                  (nn.LogSigmoid(), F.logsigmoid), (nn.Tanhshrink(), F.tanhshrink)):
        np.testing.assert_array_equal(m(x).detach().numpy(), fn(x).detach().numpy())


def test_sequential_runs_new_activations_in_place_under_no_grad():
    mf.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.LeakyReLU(0.1), nn.Linear(8, 8), nn.Hardswish(), nn.SiLU())
    x = cpu(randn(5, 6, seed=1))
    want = model(x).detach().numpy()
    with mf.no_grad():
        got = model(x).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_inplace_gradient_of_leaky_relu_uses_the_mask_taken_before_overwriting():
    leaf = f64(4, 6)
    x = leaf * 1.0
    y = F.leaky_relu_(x, 0.2)
    assert y is x and y._ctx.saved[0].dtype == np.bool_  # a bool mask, no copy of the input
    (y * y).sum().backward()
    a = leaf.detach().numpy()
    np.testing.assert_allclose(leaf.grad.numpy(), 2 * np.where(a > 0, a, 0.2 * a) * np.where(a > 0, 1, 0.2))


def test_activations_of_half_types_compute_in_float32():
    a = np.linspace(-6, 6, 101)
    for dtype in (mf.float16, mf.bfloat16):
        x = cpu(a.astype(dtype))
        rounded = a.astype(dtype).astype(np.float64)
        for fn, ref in ((F.silu, lambda v: v / (1 + np.exp(-v))), (F.mish, lambda v: v * np.tanh(np.logaddexp(0, v))),
                        (F.softplus, lambda v: np.logaddexp(0, v))):
            y = fn(x)
            assert y.dtype == dtype
            assert rel_err(y.numpy().astype(np.float64), ref(rounded)) <= TOL[np.dtype(dtype)]


def test_piecewise_activations_at_their_edges_and_at_nan():
    """PyTorch's sides at the kinks (hardswish's gradient at -3 and 3, rrelu's at 0 takes the slope), NaN kept by
    threshold and the shrinks, and a NaN input's gradient passed through as PyTorch passes it."""
    x = cpu(np.array([-3.0, 3.0]), requires_grad=True)
    F.hardswish(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 1.0])
    nan = cpu(np.array([np.nan]))
    for y in (nn.Threshold(0.1, 20.0)(nan), F.hardshrink(nan), F.softshrink(nan)):
        assert np.isnan(y.numpy()).all()
    for fn, slope in ((F.hardtanh, 1.0), (F.relu6, 1.0), (F.hardshrink, 1.0), (F.softshrink, 1.0),
                      (lambda v: F.threshold(v, 0.5, 2.0), 1.0), (F.elu, 1.0), (F.celu, 1.0),
                      (F.selu, 1.0507009873554805)):
        v = cpu(np.array([np.nan, 0.25]), requires_grad=True)
        fn(v).sum().backward()
        np.testing.assert_allclose(v.grad.numpy()[0], slope, rtol=1e-12)
    z = cpu(np.array([0.0, -2.0, 1.0]), requires_grad=True)
    F.rrelu(z, 0.2, 0.2, training=True).sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), [0.2, 0.2, 1.0])


def test_sigmoid_and_tanh_of_half_types_round_once():
    """Computed in float32 and rounded once, as PyTorch's kernels: nearly all values are the correctly rounded
    float64 result (16-bit arithmetic step by step misses about a quarter of them)."""
    a = np.linspace(-8, 8, 2001)
    for dtype in (mf.float16, mf.bfloat16):
        rounded = a.astype(dtype).astype(np.float64)
        for fn, ref in ((mf.sigmoid, lambda v: 1 / (1 + np.exp(-v))), (mf.tanh, np.tanh)):
            x = cpu(a.astype(dtype), requires_grad=True)
            y = fn(x)
            y.backward(mf.ones_like(y))
            assert y.dtype == dtype and x.grad.dtype == dtype
            yr = ref(rounded)
            assert np.mean(y.numpy() != yr.astype(dtype)) < 0.02
            gr = yr.astype(dtype).astype(np.float64)
            g_ref = (gr * (1 - gr) if fn is mf.sigmoid else 1 - gr * gr).astype(dtype)
            if fn is mf.sigmoid and dtype == mf.float16:  # (PyTorch's CPU float16 backward rounds each step)
                yh = y.numpy()
                g_ref = (np.float16(1) - yh) * yh
            assert np.mean(x.grad.numpy() != g_ref) < 0.02


def test_alpha_dropout_in_place_writes_the_out_of_place_result():
    base = f64(64, 8)
    mf.manual_seed(3)
    want = F.alpha_dropout(base * 1.0, 0.3, training=True)
    mf.manual_seed(3)
    x = base * 1.0
    y = F.alpha_dropout(x, 0.3, training=True, inplace=True)
    assert y is x
    np.testing.assert_array_equal(y.detach().numpy(), want.detach().numpy())
    y.sum().backward()
    vals, counts = np.unique(want.detach().numpy(), return_counts=True)
    kept = want.detach().numpy() != vals[np.argmax(counts)]  # the dropped all take one value
    assert np.all(base.grad.numpy()[kept] == base.grad.numpy()[kept][0]) and np.all(base.grad.numpy()[~kept] == 0)
    assert F.feature_alpha_dropout(x, 0.3, training=False, inplace=True) is x


def test_prelu_shapes_as_pytorchs():
    assert nn.PReLU()(cpu(np.array(-2.0, np.float32))).shape == ()
    np.testing.assert_allclose(F.prelu(cpu(np.array([-1.0, 2.0])), cpu(np.array(0.5))).numpy(), [-0.5, 2.0])
    with pytest.raises(ValueError, match="prelu"):  # a 1-D input has one channel
        F.prelu(cpu(np.array([-1.0, 2.0, 3.0])), cpu(np.array([0.1, 0.2, 0.3])))
    m = nn.PReLU(3, init=0.1)
    with mf.no_grad():
        m.weight.fill_(0.7)
    m.reset_parameters()
    np.testing.assert_allclose(m.weight.detach().numpy(), 0.1, rtol=1e-6)


def test_softmax_arguments_as_pytorchs():
    x = cpu(np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 1.0]], np.float32))
    assert F.softmax(x, 1, 3, mf.float64).dtype == mf.float64  # the functional form: (input, dim, _stacklevel, dtype)
    assert mf.softmax(x, 1, mf.float64).dtype == mf.float64 and x.log_softmax(1, mf.float64).dtype == mf.float64
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        y = F.softmax(x)
    np.testing.assert_allclose(y.numpy(), F.softmax(x, 1).numpy())
    with pytest.raises(TypeError, match="dim"):
        F.log_softmax(x, (0, 1))


# ---------------------------------------------------------------- normalize, one_hot
def test_normalize_zero_vector_is_zero_with_finite_gradient():
    x = cpu(np.array([[0.0, 0.0, 0.0], [3.0, 4.0, 0.0]]), requires_grad=True)
    y = F.normalize(x)
    np.testing.assert_allclose(y.detach().numpy(), [[0, 0, 0], [0.6, 0.8, 0]])
    g = np.array([[1.0, 2.0, 3.0], [1.0, 0.0, 0.0]])
    y.backward(cpu(g))
    np.testing.assert_allclose(x.grad.numpy()[0], g[0] / 1e-12)  # below eps the norm is a constant
    assert gradcheck(lambda t: F.normalize(t, p=1.5, dim=0), (f64(3, 4),))


@pytest.mark.parametrize("p", [0.5, 0.3])
def test_normalize_below_p_one_zero_entries_take_no_norm_gradient(p):
    """For p < 1 the norm's derivative |x|^(p-1) is infinite at a zero entry: PyTorch takes that entry's term as 0,
    so its gradient is 1/n times g (no NaN), and an all-zero row's is g / eps. Against the closed form in float64."""
    x = np.array([[0.0, 1.0, 2.0], [0.0, 0.0, 0.0]])
    g = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    t = cpu(x, requires_grad=True)
    F.normalize(t, p=p).backward(cpu(g))
    row = x[0]
    n = (np.abs(row) ** p).sum() ** (1 / p)
    dn = np.sign(row) * (np.where(row != 0, np.abs(row), n) / n) ** (p - 1)  # (0 where the entry is)
    want = g[0] / n - (g[0] * row).sum() / n ** 2 * dn
    np.testing.assert_allclose(t.grad.numpy()[0], want, rtol=1e-12)
    np.testing.assert_allclose(t.grad.numpy()[1], g[1] / 1e-12)


def test_one_hot_shapes_and_inferred_classes():
    i = mf.tensor([[2, 0], [1, 2]])
    out = F.one_hot(i)
    assert out.dtype == mf.int64 and out.shape == (2, 2, 3) and not out.requires_grad
    np.testing.assert_array_equal(out.numpy(), np.eye(3, dtype=np.int64)[i.numpy()])
    assert F.one_hot(mf.tensor(1), 4).tolist() == [0, 1, 0, 0]  # 0-d
    assert F.one_hot(mf.zeros(0, dtype=mf.int64), 5).shape == (0, 5)
    assert F.one_hot(mf.tensor([0, 1]), 0 + 2).shape == (2, 2)


# ---------------------------------------------------------------- losses
def test_mse_and_l1_broadcast_with_pytorchs_warning():
    a, b = f64(3, 4), f64(4, seed=1)
    for fn, ref in ((F.mse_loss, lambda d: d * d), (F.l1_loss, np.abs), (F.smooth_l1_loss, None), (F.huber_loss, None)):
        with pytest.warns(UserWarning, match=r"Using a target size \(\[4\]\) that is different to the input size "
                                             r"\(\[3, 4\]\)\. This will likely lead to incorrect results due to "
                                             r"broadcasting\. Please ensure they have the same size\."):
            out = fn(a, b, reduction="none")
        assert out.shape == (3, 4)
        if ref is not None:
            np.testing.assert_allclose(out.detach().numpy(), ref(a.detach().numpy() - b.detach().numpy()))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same shapes: no warning; kl_div broadcasts silently
        F.mse_loss(a, f64(3, 4, seed=2))
        F.kl_div(a, cpu(np.full(4, 0.25)), reduction="sum")
    with pytest.warns(UserWarning):
        assert gradcheck(lambda x, y: F.mse_loss(x, y), (a, b))
    with pytest.raises(ValueError, match=r"mse_loss: shapes \(3, 4\) and \(5,\) cannot be broadcast"):
        F.mse_loss(a, f64(5))


def test_mse_loss_module_signature_follows_pytorch():
    assert nn.MSELoss(reduction="sum").reduction == "sum"
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        assert nn.MSELoss(True).reduction == "mean"  # PyTorch's legacy rule (tests/test_loss_legacy_reduction.py)


def test_bce_clamps_logs_at_minus_100():
    x = cpu(np.array([0.0, 1.0, 1.0, 0.5]), requires_grad=True)
    t = cpu(np.array([1.0, 0.0, 1.0, 0.5]))
    loss = F.binary_cross_entropy(x, t, reduction="none")
    np.testing.assert_allclose(loss.detach().numpy(), [100, 100, 0, np.log(2)])
    loss.sum().backward()
    assert np.isfinite(x.grad.numpy()).all()
    x = f64(3, 4)
    assert gradcheck(lambda p, q: F.binary_cross_entropy(p.sigmoid(), q.sigmoid(), reduction="sum"), (x, f64(3, 4, seed=1)))


def test_bce_with_logits_is_stable_for_large_logits():
    x = cpu(np.array([-200.0, -50.0, 0.0, 50.0, 200.0]), requires_grad=True)
    t = cpu(np.array([1.0, 1.0, 0.5, 0.0, 0.0]))
    loss = F.binary_cross_entropy_with_logits(x, t, reduction="none")
    np.testing.assert_allclose(loss.detach().numpy(), bce_with_logits_ref(x.detach().numpy(), t.numpy(), reduction="none"))
    np.testing.assert_allclose(loss.detach().numpy()[[0, 4]], [200, 200])
    loss.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [-1, -1, 0, 1, 1], atol=1e-15)
    pw = cpu(np.array([3.0]))
    assert gradcheck(lambda a, b: F.binary_cross_entropy_with_logits(a, b, pos_weight=pw), (f64(4, 1), f64(4, 1, seed=5)))


def test_kl_div_reductions():
    x = f64(4, 5)
    t = cpu(np.random.default_rng(0).dirichlet(np.ones(5), 4))
    pointwise = F.kl_div(x, t, reduction="none").detach().numpy()
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):  # (as PyTorch warns)
        np.testing.assert_allclose(F.kl_div(x, t).item(), pointwise.mean())
    np.testing.assert_allclose(F.kl_div(x, t, reduction="batchmean").item(), pointwise.sum() / 4)
    np.testing.assert_allclose(F.kl_div(x, t.log(), reduction="sum", log_target=True).item(), pointwise.sum())
    zero = cpu(np.array([0.0, 1.0]))
    np.testing.assert_allclose(F.kl_div(cpu(np.array([-1.0, -2.0])), zero, reduction="none").numpy(), [0, 2])


def test_loss_modules_match_functional_and_check_arguments():
    x, y = f64(3, 4), f64(3, 4, seed=1)
    p, q = x.sigmoid(), y.sigmoid()
    w = cpu(np.linspace(0.5, 1.5, 4))
    pairs = [(nn.L1Loss(reduction="sum")(x, y), F.l1_loss(x, y, reduction="sum")),
             (nn.SmoothL1Loss(beta=0.3)(x, y), F.smooth_l1_loss(x, y, beta=0.3)),
             (nn.HuberLoss(delta=0.4, reduction="none")(x, y), F.huber_loss(x, y, reduction="none", delta=0.4)),
             (nn.KLDivLoss(reduction="batchmean")(x, q), F.kl_div(x, q, reduction="batchmean")),
             (nn.BCELoss(weight=w)(p, q), F.binary_cross_entropy(p, q, w)),
             (nn.BCEWithLogitsLoss(w, pos_weight=w * 2)(x, q), F.binary_cross_entropy_with_logits(x, q, w, pos_weight=w * 2))]
    for mine, theirs in pairs:
        np.testing.assert_array_equal(mine.detach().numpy(), theirs.detach().numpy())
    assert set(nn.BCEWithLogitsLoss(w, pos_weight=w).state_dict()) == {"weight", "pos_weight"}
    for make, match in ((lambda: nn.L1Loss(reduction="avg"), "L1Loss: reduction"),
                        (lambda: nn.BCELoss(reduction="batchmean"), "BCELoss: reduction"),
                        (lambda: nn.SmoothL1Loss(beta=-1), "beta must be >= 0"),
                        (lambda: nn.HuberLoss(delta=0), "delta must be > 0"),
                        (lambda: nn.Hardtanh(1.0, -1.0), "min_val cannot be greater")):
        with pytest.raises(ValueError, match=match):
            make()


def test_half_losses_are_reduced_in_float32():
    a = np.full(4096, 0.1)
    for dtype in (mf.float16, mf.bfloat16):
        out = F.l1_loss(cpu(a.astype(dtype)), cpu(np.zeros(4096, dtype)), reduction="sum")
        assert out.dtype == dtype
        assert rel_err(float(out.item()), 4096 * float(np.asarray(0.1, dtype))) <= TOL[np.dtype(dtype)]


# ---------------------------------------------------------------- GPU: every loss module against PyTorch
def _probs(shape, seed):
    return 1 / (1 + np.exp(-randn(*shape, seed=seed, dtype=np.float64)))


LOSSES = {  # module name, its arguments (arrays: tensors), input, target
    "BCELoss": ("BCELoss", {}, lambda: _probs((37, 33), 0), lambda: _probs((37, 33), 1)),
    "BCELoss_weight_sum": ("BCELoss", {"weight": np.linspace(0.5, 2, 33), "reduction": "sum"},
                           lambda: _probs((37, 33), 2), lambda: _probs((37, 33), 3)),
    "BCEWithLogitsLoss": ("BCEWithLogitsLoss", {"pos_weight": np.linspace(0.5, 3, 33)},
                          lambda: 4 * randn(37, 33, seed=4, dtype=np.float64), lambda: _probs((37, 33), 5)),
    "BCEWithLogitsLoss_weight_none": ("BCEWithLogitsLoss", {"weight": np.linspace(0.5, 2, 33), "reduction": "none"},
                                      lambda: randn(7, 33, seed=6, dtype=np.float64), lambda: _probs((7, 33), 7)),
    "L1Loss": ("L1Loss", {}, lambda: randn(37, 33, seed=8, dtype=np.float64),
               lambda: randn(37, 33, seed=9, dtype=np.float64)),
    "SmoothL1Loss": ("SmoothL1Loss", {"beta": 0.5, "reduction": "sum"}, lambda: randn(37, 33, seed=10, dtype=np.float64),
                     lambda: randn(37, 33, seed=11, dtype=np.float64)),
    "HuberLoss": ("HuberLoss", {"delta": 0.7}, lambda: randn(37, 33, seed=12, dtype=np.float64),
                  lambda: randn(37, 33, seed=13, dtype=np.float64)),
    "KLDivLoss": ("KLDivLoss", {"reduction": "batchmean"}, lambda: np.log(_probs((37, 33), 14)),
                  lambda: _probs((37, 33), 15)),
    "KLDivLoss_log_target": ("KLDivLoss", {"reduction": "sum", "log_target": True},
                             lambda: np.log(_probs((37, 33), 16)), lambda: np.log(_probs((37, 33), 17))),
    "MSELoss": ("MSELoss", {"reduction": "none"}, lambda: randn(37, 33, seed=18, dtype=np.float64),
                lambda: randn(37, 33, seed=19, dtype=np.float64)),
}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("case", list(LOSSES))
def test_loss_modules_against_torch(torch, case, dtype):
    """Ours in ``dtype`` on the GPU against PyTorch in float64 on the same (rounded) values: the loss and
    the input gradient."""
    name, kwargs, make_x, make_t = LOSSES[case]
    dt = backend.as_dtype(dtype)

    def ours(a):
        return mf.tensor(a.astype(np.float32), device="cuda").to(dtype)

    def theirs(a):
        return torch.tensor(a.astype(np.float32).astype(dt).astype(np.float64), device="cuda")

    x_np, t_np = make_x(), make_t()
    arrays = {k: v for k, v in kwargs.items() if isinstance(v, np.ndarray)}
    x = ours(x_np).requires_grad_()
    out = getattr(nn, name)(**{**kwargs, **{k: ours(v) for k, v in arrays.items()}})(x, ours(t_np))
    tx = theirs(x_np).requires_grad_()
    tout = getattr(torch.nn, name)(**{**kwargs, **{k: theirs(v) for k, v in arrays.items()}})(tx, theirs(t_np))
    assert out.dtype == dt and out.shape == tuple(tout.shape)
    g = randn(*out.shape, seed=20, dtype=np.float64)
    out.backward(ours(g))
    tout.backward(theirs(g))
    tol = 4 * TOL[dt]
    assert rel_err(out.detach().float().cpu().numpy(), tout.detach().cpu().numpy()) < tol
    assert x.grad.dtype == dt
    assert rel_err(x.grad.float().cpu().numpy(), tx.grad.cpu().numpy()) < tol


def test_pointwise_weights_of_regression_losses():
    x, y = f64(3, 4), f64(3, 4, seed=1)
    w = cpu(np.linspace(0.5, 2.0, 12).reshape(3, 4))  # (PyTorch's weight has the input's size)
    d = x.detach().numpy() - y.detach().numpy()
    for fn, pointwise in ((F.mse_loss, d * d), (F.l1_loss, np.abs(d)),
                          (F.huber_loss, np.where(np.abs(d) < 1, 0.5 * d * d, np.abs(d) - 0.5))):
        np.testing.assert_allclose(fn(x, y, reduction="sum", weight=w).item(), (pointwise * w.numpy()).sum())
        assert gradcheck(lambda a, b: fn(a, b, weight=w), (x, y))
    with pytest.raises(ValueError, match=r"l1_loss: weights and input must have the same size, got \[4\]"):
        F.l1_loss(x, y, weight=cpu(np.ones(4)))


# ---------------------------------------------------------------- fuzzed shapes (the registry's fuzz tables need a Tensor
# method of the op's name, which PyTorch does not give these activations: fuzzed here instead)
FUZZED = ["leaky_relu", "silu", "elu", "selu", "celu", "softplus", "hardtanh", "relu6", "hardsigmoid", "hardswish",
          "mish", "softsign", "logsigmoid", "tanhshrink"]


def test_fuzzed_activations_against_reference():
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import strategies as st

    from opinfo import REGISTRY

    @hypothesis.settings(deadline=None, derandomize=True)
    @hypothesis.given(shape=st.lists(st.integers(1, 4), min_size=0, max_size=4), op=st.sampled_from(FUZZED),
                      seed=st.integers(0, 2**32 - 1))
    def check(shape, op, seed):
        entry = REGISTRY[op]
        a = np.random.default_rng(seed).standard_normal(shape) * 4  # past every kink (±1, ±3, 6)
        x = cpu(a, requires_grad=True)
        y = entry.op(x)
        assert y.shape == np.shape(a)
        np.testing.assert_allclose(y.detach().numpy(), entry.ref(a), rtol=1e-12, atol=1e-12)
        assert gradcheck(entry.op, (x,))

    check()


def test_cut_gradients_stay_zero_under_inf_upstream():
    """Where clamp, hardtanh, relu6, hardsigmoid, threshold or the shrinks cut the gradient, an inf or NaN from
    above stays out (selected, not multiplied by 0): ``x.clamp(min=0).sqrt()`` has gradient 0 at clamped x, as
    PyTorch's."""
    x = cpu(np.array([-1e-3, 4.0]), requires_grad=True)
    x.clamp(min=0).sqrt().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 0.25])
    for fn, cut in ((F.hardtanh, -5.0), (F.relu6, -5.0), (F.hardsigmoid, -5.0), (F.hardshrink, 0.25),
                    (F.softshrink, 0.25), (lambda v: F.threshold(v, 0.5, 2.0), 0.25),
                    (lambda v: v.clamp(-1.0, 1.0), 5.0)):
        v = cpu(np.array([cut, 0.75]), requires_grad=True)
        (fn(v) * float("inf")).sum().backward()
        assert v.grad.numpy()[0] == 0.0 and np.isinf(v.grad.numpy()[1]), fn


# ---------------------------------------------------------------- the fused CUDA activations (one pass each way)
FUSED_ACTIVATIONS = {  # name: (the call, its parameters, whether it has an in-place form)
    "silu": (F.silu, {}, True), "mish": (F.mish, {}, True), "elu": (F.elu, {"alpha": 0.7}, True),
    "selu": (F.selu, {}, True), "celu": (F.celu, {"alpha": 2.0}, True), "hardswish": (F.hardswish, {}, True),
    "softplus": (F.softplus, {"beta": 2.0, "threshold": 3.0}, False),
    "leaky_relu": (F.leaky_relu, {"negative_slope": 0.2}, True),
    "hardtanh": (F.hardtanh, {"min_val": -0.5, "max_val": 2.0}, True), "relu6": (F.relu6, {}, True),
    "hardsigmoid": (F.hardsigmoid, {}, True), "threshold": (F.threshold, {"threshold": 0.25, "value": -1.5}, True),
    "sigmoid": (F.sigmoid, {}, False), "tanh": (F.tanh, {}, False),
}


def _fused_case(name, dtype, seed=0):
    """An odd-sized input in ``dtype`` with the kinks, zeros, ±inf and NaN among normal values, rounded to
    ``dtype`` (as float64), and an upstream gradient."""
    a = np.random.default_rng(seed).standard_normal(1031) * 4
    a[:9] = [0.0, -3.0, 3.0, -0.5, 2.0, 0.25, np.inf, -np.inf, np.nan]
    g = np.random.default_rng(seed + 1).standard_normal(a.size)
    dt = backend.as_dtype(dtype)
    return a.astype(np.float32).astype(dt).astype(np.float64), g.astype(np.float32).astype(dt).astype(np.float64)


def _value_and_grad(fn, kw, a, g, device, dtype, inplace=False):
    dtype = getattr(mf, dtype)
    x = mf.tensor(a, device=device).to(dtype).requires_grad_()
    y = fn(x * 1, inplace=True, **kw) if inplace else fn(x, **kw)
    y.backward(mf.tensor(g, device=device).to(dtype))
    return y.detach().double().cpu().numpy(), x.grad.double().cpu().numpy()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", list(FUSED_ACTIVATIONS))
def test_fused_activations_on_cuda_match_the_float64_path(name, dtype):
    """The CUDA kernels' value and gradient (out of place and in place) against the float64 NumPy path on the
    same rounded values: within the dtype's rounding, NaN and inf in the same places, cut gradients 0."""
    fn, kw, has_inplace = FUSED_ACTIVATIONS[name]
    a, g = _fused_case(name, dtype)
    want_y, want_dx = _value_and_grad(fn, kw, a, g, "cpu", "float64")
    tol = 4 * TOL[backend.as_dtype(dtype)]
    for inplace in (False, True) if has_inplace else (False,):
        y, dx = _value_and_grad(fn, kw, a, g, "cuda", dtype, inplace)
        assert rel_err(y, want_y.astype(np.float32).astype(backend.as_dtype(dtype))) < tol, inplace
        assert rel_err(dx, want_dx) < tol, inplace


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["silu", "leaky_relu", "sigmoid"])
def test_fused_activations_keep_layouts_and_take_strided_inputs(name):
    """A channels-last input gives a channels-last result (and gradient), a transposed one the right values, and
    under no_grad (nothing kept) the same values."""
    fn, kw, _ = FUSED_ACTIVATIONS[name]
    a = randn(2, 3, 5, 7, seed=3, dtype=np.float64)
    g = randn(2, 3, 5, 7, seed=4, dtype=np.float64)
    want_y, want_dx = _value_and_grad(fn, kw, a, g, "cpu", "float64")
    x = mf.tensor(a, device="cuda").float().to(memory_format=mf.channels_last).requires_grad_()
    y = fn(x, **kw)
    assert y.is_contiguous(memory_format=mf.channels_last)
    y.backward(mf.tensor(g, device="cuda").float())
    assert rel_err(y.detach().double().cpu().numpy(), want_y) < 4 * TOL[np.dtype(np.float32)]
    assert rel_err(x.grad.double().cpu().numpy(), want_dx) < 4 * TOL[np.dtype(np.float32)]
    xt = mf.tensor(a.transpose(3, 1, 2, 0).copy(), device="cuda").float().requires_grad_()
    yt = fn(xt.transpose(0, 3), **kw)
    yt.backward(mf.tensor(g, device="cuda").float())
    assert rel_err(yt.detach().double().cpu().numpy(), want_y) < 4 * TOL[np.dtype(np.float32)]
    assert rel_err(xt.grad.transpose(0, 3).double().cpu().numpy(), want_dx) < 4 * TOL[np.dtype(np.float32)]
    with mf.no_grad():
        assert rel_err(fn(x.detach(), **kw).double().cpu().numpy(), want_y) < 4 * TOL[np.dtype(np.float32)]


def test_gelu_argument_errors_are_pytorchs_types():
    # PyTorch 2.13: approximate is keyword-only; a non-string approximate is a TypeError, another string a
    # RuntimeError; an integer input NotImplementedError ("GeluKernelImpl" not implemented for 'Long');
    # nn.Hardtanh with bounds out of order an AssertionError ("max_val (-1) must be greater than min_val (1)")
    x = mf.tensor([-1.0, 2.0])
    with pytest.raises(TypeError):
        F.gelu(x, "tanh")
    with pytest.raises(TypeError, match="approximate"):
        F.gelu(x, approximate=None)
    with pytest.raises(RuntimeError, match="approximate"):
        F.gelu(x, approximate="bad")
    with pytest.raises(NotImplementedError, match="gelu"):
        F.gelu(mf.tensor([1, 2]))
    with pytest.raises(AssertionError, match=r"max_val \(-1\) must be greater than min_val \(1\)"):
        nn.Hardtanh(1, -1)
    np.testing.assert_allclose(F.gelu(x, approximate="tanh").numpy(), [-0.15880800939172324, 1.954597694087775],
                               rtol=1e-6)
