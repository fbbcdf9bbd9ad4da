"""Cross-entropy (fused) and NLL: against float64 formulas with weights, ignore_index,
label smoothing and every reduction; gradients by finite differences; bad input;
on a GPU the kernels against the references and PyTorch, and the device-side label flag."""
import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
import minifused.nn as nn
from minifused import backend
from minifused.kernels import softmax as K
from minifused.testing import gradcheck

from tolerances import DTYPES, TOL, cpu, rel_err  # noqa: E402



def cross_entropy64(x, t, w=None, ignore_index=-100, reduction="mean", eps=0.0):
    """PyTorch's definition, in float64 (x: (M, C), t: (M,))."""
    x = x.astype(np.float64)
    m, c = x.shape
    w = np.ones(c) if w is None else w.astype(np.float64)
    lp = x - x.max(1, keepdims=True)
    lp = lp - np.log(np.exp(lp).sum(1, keepdims=True))
    valid = t != ignore_index
    ts = np.where(valid, t, 0)
    nll = np.where(valid, -w[ts] * lp[np.arange(m), ts], 0)
    smooth = np.where(valid, -(lp * w).sum(1), 0)
    rows = (1 - eps) * nll + eps / c * smooth
    if reduction == "none":
        return rows
    if reduction == "sum":
        return rows.sum()
    return rows.sum() / np.where(valid, w[ts], 0).sum()


# ---------------------------------------------------------------- cpu: values and gradients
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_cross_entropy_values(reduction, weighted, eps, rng):
    m, c = 13, 9
    x = (rng.standard_normal((m, c)) * 3).astype(np.float32)
    t = rng.integers(0, c, m)
    t[[2, 5]] = -100
    w = rng.random(c).astype(np.float32) + 0.5 if weighted else None
    out = F.cross_entropy(cpu(x), cpu(t), None if w is None else cpu(w),
                          reduction=reduction, label_smoothing=eps)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.numpy(), cross_entropy64(x, t, w, -100, reduction, eps), rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("eps", [0.0, 0.2])
def test_cross_entropy_gradcheck(reduction, weighted, eps, rng):
    x = cpu(rng.standard_normal((5, 4)), requires_grad=True)
    t = cpu(np.array([0, 3, -100, 1, 3]))
    w = cpu(rng.random(4) + 0.5) if weighted else None
    assert gradcheck(lambda a: F.cross_entropy(a, t, w, reduction=reduction, label_smoothing=eps), [x])


def test_cross_entropy_shapes(rng):
    x = rng.standard_normal((2, 5, 3, 4))
    t = rng.integers(0, 5, (2, 3, 4))
    rows = np.moveaxis(x, 1, -1).reshape(-1, 5)
    out = F.cross_entropy(cpu(x), cpu(t), reduction="none")
    assert out.shape == (2, 3, 4)
    np.testing.assert_allclose(out.numpy(), cross_entropy64(rows, t.reshape(-1), reduction="none").reshape(2, 3, 4))
    xt = cpu(x, requires_grad=True)
    assert gradcheck(lambda a: F.cross_entropy(a, cpu(t)), [xt])
    one = F.cross_entropy(cpu(x[0, :, 0, 0]), cpu(np.int64(2)))
    np.testing.assert_allclose(one.item(), cross_entropy64(x[0, :, 0, 0][None], np.array([2])), rtol=1e-12)
    assert F.cross_entropy(cpu(x[:, :, 0, 0]), cpu(t[:, 0, 0].astype(np.int32))).shape == ()


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_confident_rows_keep_their_precision(device, eps):
    """float32 logits near 50, one far above the rest: the target's gradient p_t - 1 (-1e-5 .. -1e-3)
    within 8 float32 roundings of 1 (its size before the cancellation), as PyTorch's log_softmax keeps
    it: x - max and log(sum) are never added into one float rounded at the max's magnitude (its half-ulp
    there, 1.9e-6, is 32 of those). The loss (near 0) to 1e-3 of itself."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((64, 9)) * 3 + 40).astype(np.float32)
    t = rng.integers(0, 9, 64)
    x[np.arange(64), t] = 52.9478  # each target logit 9 or more above the rest: p_t - 1 of -1e-4 at most
    xt = mf.tensor(x, device=device, requires_grad=True)
    loss = F.cross_entropy(xt, mf.tensor(t, device=device), reduction="sum", label_smoothing=eps)
    loss.backward()
    x64 = x.astype(np.float64)
    p = np.exp(x64 - x64.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    onehot = np.eye(9)[t]
    grad = (1 - eps) * (p - onehot) + eps / 9 * (9 * p - 1)
    got = backend.to_device(xt.grad._data, backend.CPU).astype(np.float64)
    rows = np.arange(64)
    assert np.abs(got[rows, t] - grad[rows, t]).max() < 8 * 2.0 ** -24
    assert abs(float(loss.item()) / cross_entropy64(x, t, reduction="sum", eps=eps) - 1) < 1e-3


def test_all_ignored_mean_is_nan():
    out = F.cross_entropy(cpu(np.ones((2, 3), np.float32)), cpu(np.array([-100, -100])))
    assert np.isnan(out.item())


@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_all_ignored_mean_has_zero_gradient(loss, rng):
    """As PyTorch's: the mean over no valid row is NaN, but no gradient flows from it (a batch of void labels
    must not turn the weights into NaN)."""
    x = cpu(rng.standard_normal((2, 3, 4, 5)), requires_grad=True)
    t = cpu(np.full((2, 4, 5), -100))
    out = getattr(F, loss)(F.log_softmax(x, dim=1), t)
    out.backward()
    assert np.isnan(out.item())
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 3, 4, 5)))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss(reduction, rng):
    x = rng.standard_normal((6, 5))
    lp = x - np.log(np.exp(x).sum(1, keepdims=True))
    t = np.array([0, 4, 2, -100, 1, 4])
    w = rng.random(5) + 0.5
    out = F.nll_loss(cpu(lp), cpu(t), cpu(w), reduction=reduction)
    np.testing.assert_allclose(out.numpy(), cross_entropy64(x, t, w, reduction=reduction), rtol=1e-12)
    xt = cpu(lp, requires_grad=True)
    assert gradcheck(lambda a: F.nll_loss(a, cpu(t), cpu(w), reduction=reduction), [xt])
    # log_softmax + nll == cross_entropy, and the fused gradient agrees with the composed one
    a = cpu(x, requires_grad=True)
    b = cpu(x, requires_grad=True)
    F.nll_loss(F.log_softmax(a, dim=1), cpu(t)).backward()
    F.cross_entropy(b, cpu(t)).backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-14)


def test_bad_input(rng):
    x = cpu(rng.standard_normal((4, 3)).astype(np.float32))
    with pytest.raises(ValueError, match=r"out of bounds.*\[0, 3\)"):
        F.cross_entropy(x, cpu(np.array([0, 1, 3, 2])))
    with pytest.raises(ValueError, match="out of bounds"):
        F.nll_loss(x, cpu(np.array([0, -1, 1, 2])))
    with pytest.raises(TypeError, match="integer class indices"):
        F.cross_entropy(x, cpu(np.array([0.0, 1.0, 2.0, 1.0])))
    with pytest.raises(ValueError, match="target must have shape"):
        F.cross_entropy(x, cpu(np.array([0, 1, 2])))
    with pytest.raises(ValueError, match="reduction"):
        F.cross_entropy(x, cpu(np.array([0, 1, 2, 0])), reduction="avg")
    with pytest.raises(ValueError, match="weight must have shape"):
        F.cross_entropy(x, cpu(np.array([0, 1, 2, 0])), weight=mf.ones(4, device="cpu"))
    for bad in ("a", None):  # (a bool is a number to PyTorch: True smooths fully)
        with pytest.raises(TypeError, match="label_smoothing must be a float"):
            F.cross_entropy(x, cpu(np.array([0, 1, 2, 0])), label_smoothing=bad)
    # ignore_index is not an error
    F.cross_entropy(x, cpu(np.array([0, 1, 7, 0])), ignore_index=7)


def test_modules(rng):
    x = cpu(rng.standard_normal((4, 3)).astype(np.float32))
    t = cpu(np.array([0, 1, 2, 1]))
    w = cpu(np.array([1.0, 2.0, 0.5], np.float32))
    crit = nn.CrossEntropyLoss(weight=w, label_smoothing=0.1)
    assert "weight" in crit.state_dict()
    np.testing.assert_allclose(crit(x, t).item(), cross_entropy64(x.numpy(), t.numpy(), w.numpy(), eps=0.1), rtol=1e-5)
    lp = F.log_softmax(x, dim=1)
    np.testing.assert_allclose(nn.NLLLoss(reduction="sum")(lp, t).item(),
                               cross_entropy64(x.numpy(), t.numpy(), reduction="sum"), rtol=1e-5)


# ---------------------------------------------------------------- GPU
GPU_SHAPES = [(1, 1), (3, 7), (4097, 10), (257, 1000), (64, 32768), (5, 65536), (6, 1001), (40, 640)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=[f"{m}x{n}" for m, n in GPU_SHAPES])
@pytest.mark.parametrize("cfg", ["plain", "weights+smooth", "none+ignore"])
def test_cross_entropy_kernels_match_reference(cfg, shape, dtype):
    import cupy as cp

    rng = np.random.default_rng(hash((shape, cfg)) % 2**32)
    m, n = shape
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    t = rng.integers(0, n, m)
    if cfg == "none+ignore":
        t[::3] = -100
    w = (rng.random(n) + 0.5).astype(dtype) if cfg == "weights+smooth" else None
    eps = 0.1 if cfg == "weights+smooth" else 0.0
    per_row = cfg == "none+ignore"
    loss, lse, rw = K.cross_entropy_forward_ref(x, t, w, -100, eps)
    gx, gt = cp.asarray(x), cp.asarray(t)
    gw = None if w is None else cp.asarray(w)
    gloss, glse, grw, reduced = K.cross_entropy_forward(gx, gt, gw, -100, eps)
    tol = TOL[np.dtype(dtype)] * 2
    # (a loss is lse - x_t: terms of |x|'s size cancel, and their rounding stays: one class's loss is 0 exactly in
    # float64 but about 1e-8 * |x| in float32)
    assert rel_err(gloss.get(), loss, scale=np.linalg.norm(lse[:, 0])) < 3e-5
    assert rel_err(grw.get(), rw) < 1e-6 and reduced is None
    if not per_row:  # the kernel's own reduction, in x's dtype (the 'mean' denominator in fp32)
        reduction = "sum" if cfg == "plain" else "mean"
        reduced = K.cross_entropy_forward(gx, gt, gw, -100, eps, reduction)[3]
        total = loss.astype(np.float64).sum()
        want = total / rw.astype(np.float64).sum() if reduction == "mean" else total
        assert reduced[0].dtype == dtype and reduced[0].shape == ()
        assert abs(float(reduced[0].get()) - want) <= TOL[np.dtype(dtype)] * max(abs(want), 1.0)
        if reduction == "mean":
            assert abs(float(reduced[1].get()[0]) - rw.astype(np.float64).sum()) <= 1e-5 * rw.sum()
        else:
            assert reduced[1] is None
    gout = rng.standard_normal(m if per_row else 1).astype(dtype)
    denom = None if per_row else rw.sum(keepdims=True).reshape(1)
    dx = K.cross_entropy_backward_ref(x, t, w, lse, gout, per_row, denom, -100, eps)
    gdx = K.cross_entropy_backward(gx, gt, gw, glse, cp.asarray(gout), per_row, None if denom is None else cp.asarray(denom),
                     -100, eps)
    assert rel_err(gdx.get(), dx) < tol * 2
    # NLL on log-probabilities
    lp = K.softmax_forward_ref(x, True)
    nl, nrw = K.nll_forward_ref(lp, t, w, -100)
    gnl, gnrw = K.nll_forward(cp.asarray(lp), gt, gw, -100)
    assert rel_err(gnl.get(), nl) < 1e-5
    nd = K.nll_backward_ref(t, w, gout, per_row, denom, shape, x.dtype, -100)
    gnd = K.nll_backward(gt, gw, cp.asarray(gout), per_row, None if denom is None else cp.asarray(denom), shape,
                    x.dtype, -100)
    assert rel_err(gnd.get(), nd) < tol


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 3, 300, 4097, 70001])  # 70001: more rows than the bounded grid's
def test_cross_entropy_reduction_in_kernel(m):
    """The forward kernel's own 'mean' (its last block adds the blocks' sums): right on every call, so
    each call's ticket starts from zero (calls of other grids between them too), with ignored rows, and NaN
    when every row is ignored, as PyTorch; and inside a captured graph, replayed on new inputs, equal to eager
    bit for bit, captured on a new stream and on one whose ticket exists."""
    import cupy as cp

    rng = np.random.default_rng(m)
    x = cp.asarray(rng.standard_normal((m, 300)).astype(np.float32))
    t = cp.asarray(rng.integers(0, 300, m))
    t[1::5] = -100

    def want(x, t):
        loss, _, rw = K.cross_entropy_forward_ref(x.get(), t.get(), None, -100, 0.0)
        return loss.astype(np.float64).sum() / rw.astype(np.float64).sum()

    half = m // 2 + 1  # another grid between the calls: the stream's ticket is back at zero after each
    for _ in range(3):
        out, denom = K.cross_entropy_forward(x, t, None, -100, 0.0, "mean")[3]
        assert abs(float(out.get()) / want(x, t) - 1) < 1e-5
        assert float(denom.get()[0]) == float((t.get() != -100).sum())
        out = K.cross_entropy_forward(x[:half], t[:half], None, -100, 0.0, "sum")[3][0]
        assert abs(float(out.get()) / (want(x[:half], t[:half]) * float((t[:half] != -100).sum())) - 1) < 1e-5
    out, denom = K.cross_entropy_forward(x, cp.full(m, -100), None, -100, 0.0, "mean")[3]
    assert np.isnan(float(out.get())) and float(denom.get()[0]) == 0.0
    for warm in (False, True):  # a capture on a new stream (its ticket in the graph), then on one that has one
        stream = cp.cuda.Stream(non_blocking=True)
        with stream:
            if warm:
                K.cross_entropy_forward(x, t, None, -100, 0.0, "mean")
            stream.begin_capture()
            got = K.cross_entropy_forward(x, t, None, -100, 0.0, "mean")[3]
            graph = stream.end_capture()
            x[...] = cp.asarray(rng.standard_normal((m, 300)).astype(np.float32))
            for _ in range(2):
                graph.launch(stream)
            stream.synchronize()
        again = K.cross_entropy_forward(x, t, None, -100, 0.0, "mean")[3]
        assert float(got[0].get()) == float(again[0].get()) and float(got[1].get()[0]) == float(again[1].get()[0])
        assert abs(float(again[0].get()) / want(x, t) - 1) < 1e-5


@pytest.mark.gpu
def test_device_label_flag():
    import cupy as cp

    K.check_label_errors()  # clear
    x = mf.randn(4, 5, device="cuda")
    out = F.cross_entropy(x, mf.tensor(cp.asarray(np.array([0, 1, 5, 2]))))  # no sync, no raise here
    with pytest.raises(ValueError, match="out of bounds"):
        K.check_label_errors()
    assert np.isnan(out.item())
    K.check_label_errors()  # the flag was reset


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("cfg", ["plain", "weights+smooth", "none+ignore"])
def test_cross_entropy_against_torch(cfg, dtype):
    torch = pytest.importorskip("torch")
    import cupy as cp

    rng = np.random.default_rng(3)
    m, c = 512, 3000
    x = mf.tensor(cp.asarray((rng.standard_normal((m, c)) * 2).astype(np.float32))).to(dtype).requires_grad_()
    t = rng.integers(0, c, m)
    if cfg == "none+ignore":
        t[::4] = -100
    w = (rng.random(c) + 0.5).astype(np.float32) if cfg == "weights+smooth" else None
    kw = dict(reduction="none" if cfg == "none+ignore" else "mean",
              label_smoothing=0.1 if cfg == "weights+smooth" else 0.0)
    mw = None if w is None else mf.tensor(cp.asarray(w)).to(dtype)
    out = F.cross_entropy(x, mf.tensor(cp.asarray(t)), mw, **kw)
    g = mf.tensor(cp.asarray(rng.standard_normal(out.shape).astype(np.float32))).to(dtype)
    out.backward(g)
    tx = torch.from_dlpack(x._data.astype(np.float32)).double().requires_grad_()
    tw = None if w is None else torch.from_dlpack(mw._data.astype(np.float32)).double()
    tout = torch.nn.functional.cross_entropy(tx, torch.from_dlpack(cp.asarray(t)), tw, **kw)
    tout.backward(torch.from_dlpack(g._data.astype(np.float32)).double())
    tol = TOL[backend.as_dtype(dtype)] * 4
    assert rel_err(np.asarray(out._data.astype(np.float32).get()), tout.detach().cpu().numpy()) < tol
    assert rel_err(x.grad._data.astype(np.float32).get(), tx.grad.cpu().numpy()) < tol


def test_cross_entropy_probability_targets_refuse_ignore_index():
    """PyTorch's rule: a class-probability target has no class index to ignore, so an ignore_index that could name
    a class (>= 0) raises (for the module too) rather than be dropped silently; a negative one names none, and the
    loss is the one without it."""
    x, t = mf.zeros(2, 3), mf.full((2, 3), 1 / 3)
    with pytest.raises(ValueError, match="cross_entropy: ignore_index is not supported for class-probability"):
        F.cross_entropy(x, t, ignore_index=1)
    with pytest.raises(ValueError, match="ignore_index is not supported"):
        nn.CrossEntropyLoss(ignore_index=0)(x, t)
    for ignore_index in (-100, -1, -7):
        np.testing.assert_allclose(float(F.cross_entropy(x, t, ignore_index=ignore_index)), np.log(3), rtol=1e-6)
    # probabilities of the wrong shape: said so, not "expected integer class indices"
    with pytest.raises(ValueError, match=r"class probabilities and must have the input's shape \[2, 3\], got \[2, 2\]"):
        F.cross_entropy(x, mf.full((2, 2), 0.5))


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.15])
def test_cross_entropy_with_class_probability_targets(rng, reduction, label_smoothing):
    """Mixup / cutmix labels: a float target of the input's shape is a distribution over the classes, as in
    PyTorch: -sum_c weight_c * t_c * log_softmax(x)_c per sample, t smoothed by label_smoothing, 'mean' over
    the samples (spatial positions included), against float64 NumPy; gradients for both the logits and the
    target by finite differences; the module form too."""
    x = rng.standard_normal((4, 5, 3))
    t = rng.random((4, 5, 3))
    t /= t.sum(1, keepdims=True)
    w = rng.random(5) + 0.5
    st = t * (1 - label_smoothing) + label_smoothing / 5
    logp = x - np.log(np.exp(x).sum(1, keepdims=True))
    per = -(logp * st * w.reshape(1, -1, 1)).sum(1)
    want = {"none": per, "sum": per.sum(), "mean": per.mean()}[reduction]
    got = F.cross_entropy(mf.tensor(x), mf.tensor(t), weight=mf.tensor(w), reduction=reduction,
                          label_smoothing=label_smoothing)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    assert gradcheck(lambda a, b: F.cross_entropy(a, b, reduction=reduction, label_smoothing=label_smoothing),
                     [mf.tensor(x, requires_grad=True), mf.tensor(t, requires_grad=True)])
    mod = mf.nn.CrossEntropyLoss(weight=mf.tensor(w), reduction=reduction, label_smoothing=label_smoothing)
    np.testing.assert_allclose(mod(mf.tensor(x), mf.tensor(t)).numpy(), want, rtol=1e-12, atol=1e-12)
    two_d = F.cross_entropy(mf.tensor(x[:, :, 0]), mf.tensor(t[:, :, 0]), reduction="sum")
    np.testing.assert_allclose(two_d.item(), -(logp[:, :, 0] * t[:, :, 0]).sum(), rtol=1e-12)


def test_cross_entropy_probability_targets_promote_the_dtypes(rng):
    """PyTorch composes the class-probability loss of log_softmax(input), the (smoothed) target and the weight,
    so their dtypes promote: float32 logits with float64 mixup labels give a float64 loss, of the float32
    log-probabilities times the float64 labels; the logits' gradient stays float32."""
    x = rng.standard_normal((3, 4)).astype(np.float32)
    t = rng.random((3, 4))
    t /= t.sum(1, keepdims=True)
    xt = mf.tensor(x, requires_grad=True)
    got = F.cross_entropy(xt, mf.tensor(t), label_smoothing=0.1)
    assert got.dtype == mf.float64
    logp = F.log_softmax(mf.tensor(x), 1).numpy().astype(np.float64)
    np.testing.assert_allclose(got.item(), -(logp * (t * 0.9 + 0.1 / 4)).sum(1).mean(), rtol=1e-13)
    got.backward()
    assert xt.grad.dtype == mf.float32
    weighted = F.cross_entropy(mf.tensor(x), mf.tensor(t.astype(np.float32)), weight=mf.tensor(np.ones(4)))
    assert weighted.dtype == mf.float64


def test_weighted_mse_l1_means_divide_by_the_weights_sum():
    """PyTorch's weighted mse_loss / l1_loss 'mean' is sum(w * loss) / sum(w) (huber_loss's the plain mean);
    a weight not of the input's size refuses."""
    x = mf.tensor([1.0, 2.0, 3.0], dtype=mf.float64, requires_grad=True)
    y, w = mf.zeros(3, dtype=mf.float64), mf.tensor([1.0, 2.0, 5.0], dtype=mf.float64)
    mse, l1 = F.mse_loss(x, y, weight=w), F.l1_loss(x, y, weight=w)
    huber = F.huber_loss(x, y, weight=w)
    assert mse.item() == (1 + 8 + 45) / 8 and l1.item() == (1 + 4 + 15) / 8
    np.testing.assert_allclose(huber.item(), (0.5 + 2 * 1.5 + 5 * 2.5) / 3, rtol=1e-15)
    (mse + l1).backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.array([1, 2, 3]) * [1, 2, 5] / 8 + np.array([1, 2, 5]) / 8,
                               rtol=1e-15)
    assert F.mse_loss(x, y, weight=w, reduction="sum").item() == 54.0
    for loss in (F.mse_loss, F.l1_loss, F.huber_loss):
        with pytest.raises(ValueError, match="weights and input must have the same size"):
            loss(mf.ones(2, 3), mf.zeros(2, 3), weight=mf.ones(3))


def test_poisson_full_at_zero_targets_and_gaussian_nll_float_variance():
    """poisson_nll_loss(full=True) adds Stirling's term only where target > 1 (at 0 it is NaN: selected, not
    multiplied); gaussian_nll_loss takes a float variance, one for all."""
    x, t = np.array([0.5, 0.2]), np.array([0.0, 3.0])
    got = F.poisson_nll_loss(mf.tensor(x), mf.tensor(t), full=True, reduction="sum").item()
    want = np.sum(np.exp(x) - t * x) + 3 * np.log(3) - 3 + 0.5 * np.log(2 * np.pi * 3)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    a, b = np.array([1.0, 2.0]), np.array([1.5, 1.0])
    got = F.gaussian_nll_loss(mf.tensor(a), mf.tensor(b), 0.5).item()
    np.testing.assert_allclose(got, np.mean(0.5 * (np.log(0.5) + (a - b) ** 2 / 0.5)), rtol=1e-12)


def test_cosine_similarity_gradient_below_eps_is_the_unclamped_norms():
    """PyTorch clamps the norms to eps outside autograd: below eps the value divides by eps while the gradient
    still carries the norm's own derivative (checked against the formula in float64)."""
    a, b, eps = np.array([0.3, 0.1]), np.array([1.0, 2.0]), 0.5
    x = mf.tensor(a[None], requires_grad=True)
    F.cosine_similarity(x, mf.tensor(b[None]), eps=eps).sum().backward()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    # d/da of (a / (na + (eps - na))) . b / nb, with na's gradient a / na carried by the unclamped norm: the value
    # divides by eps, and the derivative of na + const is a / na
    want = b / (eps * nb) - (a @ b) / (eps ** 2 * nb) * (a / na)
    np.testing.assert_allclose(x.grad.numpy()[0], want, rtol=1e-12)


def _mse_reference(x, t, reduction):
    """mse_loss and its gradients for x and t in float64 (NumPy)."""
    d = x.astype(np.float64) - t.astype(np.float64)
    loss = (d * d).mean() if reduction == "mean" else (d * d).sum()
    norm = 2.0 / d.size if reduction == "mean" else 2.0
    return loss, norm * d, -norm * d


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("dtype", DTYPES + [np.float64])
def test_mse_loss_fused_against_float64(reduction, dtype, rng):
    x = rng.standard_normal((6, 11)).astype(np.float32)
    t = rng.standard_normal((6, 11)).astype(np.float32)
    mx, mt = cpu(x).to(dtype).requires_grad_(), cpu(t).to(dtype).requires_grad_()
    out = F.mse_loss(mx, mt, reduction=reduction)
    assert out.grad_fn.name() == "MseLossBackward" and out.dtype == mx.dtype and out.shape == ()
    out.backward(cpu(np.float32(0.75)).to(dtype))
    loss, gx, gt = _mse_reference(mx.detach().double().numpy(), mt.detach().double().numpy(), reduction)
    tol = TOL[backend.as_dtype(dtype)] * 4
    assert rel_err(out.double().item(), loss) < tol
    assert rel_err(mx.grad.double().numpy(), 0.75 * gx) < tol
    assert rel_err(mt.grad.double().numpy(), 0.75 * gt) < tol


def test_mse_loss_fused_double_backward(rng):
    x = cpu(rng.standard_normal(5)).requires_grad_()
    t = cpu(rng.standard_normal(5))
    (g,) = mf.autograd.grad(F.mse_loss(x, t), x, create_graph=True)
    (g * g).sum().backward()  # d/dx sum((2/n (x - t))^2) = 2 (2/n)^2 (x - t)
    ref = 2 * (2 / 5) ** 2 * (x.detach().numpy() - t.numpy())
    assert rel_err(x.grad.numpy(), ref) < 1e-12


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 257, 5000, (1 << 20) + 3])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_mse_loss_kernels_against_torch(n, dtype, reduction):
    """The squared-error kernels (partials of up to 1024 blocks, summed by loss_reduce; the backward's one pass)
    against PyTorch's mse_loss in float64, sizes from one element to several blocks' worth per partial; the
    gradient of the target only where asked."""
    torch = pytest.importorskip("torch")
    import cupy as cp

    rng = np.random.default_rng(n)
    scale = 1.0 if reduction == "mean" else n ** -0.5  # a sum of about 2: within float16's range at every n
    x = mf.tensor(cp.asarray(rng.standard_normal(n).astype(np.float32) * scale)).to(dtype).requires_grad_()
    t = mf.tensor(cp.asarray(rng.standard_normal(n).astype(np.float32) * scale)).to(dtype)
    out = F.mse_loss(x, t, reduction=reduction)
    out.backward(mf.tensor(cp.asarray(np.float32(1.5))).to(dtype))
    tx = torch.from_dlpack(x._data.astype(np.float32)).double().requires_grad_()
    tt = torch.from_dlpack(t._data.astype(np.float32)).double()
    tout = torch.nn.functional.mse_loss(tx, tt, reduction=reduction)
    tout.backward(torch.tensor(1.5, dtype=torch.float64, device=tx.device))
    tol = TOL[backend.as_dtype(dtype)] * 4
    assert out.dtype == x.dtype and t.grad is None
    assert rel_err(float(out.float().item()), tout.item()) < tol
    assert rel_err(x.grad._data.astype(np.float32).get(), tx.grad.cpu().numpy()) < tol
    both = mf.tensor(cp.asarray(rng.standard_normal(n).astype(np.float32) * scale)).to(dtype).requires_grad_()
    F.mse_loss(x.detach(), both, reduction=reduction).backward()
    d = x._data.astype(np.float64).get() - both._data.astype(np.float64).get()
    assert rel_err(both.grad._data.astype(np.float32).get(), -(2.0 / n if reduction == "mean" else 2.0) * d) < tol


@pytest.mark.parametrize("case", ["cross_entropy", "nll_loss", "bce", "bce_logits", "pos_weight"])
def test_loss_weights_that_require_grad_raise_as_in_pytorch(case):
    """PyTorch does not differentiate these losses' class or element weights: one that requires grad raises (while
    grad mode is on) rather than have its gradient silently dropped; under no_grad, or detached, it weighs as ever.
    A class-probability cross_entropy does differentiate its weight, as PyTorch's (and multi_margin_loss here,
    composed of differentiable ops: tests/opinfo.py checks that gradient, where PyTorch refuses one)."""
    x = mf.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    w = mf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    idx, ones = mf.tensor([2]), mf.ones(1, 3)
    call, name = {
        "cross_entropy": (lambda w: F.cross_entropy(x, idx, weight=w), "weight"),
        "nll_loss": (lambda w: F.nll_loss(x, idx, weight=w), "weight"),
        "bce": (lambda w: F.binary_cross_entropy(x.sigmoid(), ones, weight=w), "weight"),
        "bce_logits": (lambda w: F.binary_cross_entropy_with_logits(x, ones, weight=w), "weight"),
        "pos_weight": (lambda w: F.binary_cross_entropy_with_logits(x, ones, pos_weight=w), "pos_weight"),
    }[case]
    with pytest.raises(RuntimeError, match=f"not differentiable with respect to argument '{name}'"):
        call(w)
    want = float(call(w.detach()))
    with mf.no_grad():
        assert float(call(w)) == want
    probs = F.cross_entropy(x, mf.tensor([[0.2, 0.3, 0.5]]), weight=w)
    probs.backward()
    log_p = np.array([1.0, 2.0, 3.0]) - np.log(np.exp([1.0, 2.0, 3.0]).sum())
    np.testing.assert_allclose(w.grad.numpy(), -np.array([0.2, 0.3, 0.5]) * log_p, rtol=1e-6)


@pytest.mark.parametrize("var_shape,ok", [((4, 1, 5, 5), True), ((1, 3, 5, 5), True), ((4, 3, 5, 1), True),
                                          ((4, 3, 5), True), ((4, 3, 5, 5), True), ((4, 3, 1, 1), False),
                                          ((1, 1, 1, 1), False), ((3, 5, 5), False), ((4, 2, 5, 5), False)])
def test_gaussian_nll_loss_var_shapes_as_pytorch(var_shape, ok):
    """PyTorch's rule for var: the input's shape, one fewer trailing dimension, or as many dimensions with exactly
    one of them 1 where the input's is not (shared along it); other shapes raise. Values against float64 NumPy."""
    rng = np.random.default_rng(3)
    x, t = rng.standard_normal((4, 3, 5, 5)), rng.standard_normal((4, 3, 5, 5))
    v = rng.random(var_shape) + 0.1
    if not ok:
        with pytest.raises(ValueError, match="var is of incorrect size"):
            F.gaussian_nll_loss(mf.tensor(x), mf.tensor(t), mf.tensor(v))
        return
    got = float(F.gaussian_nll_loss(mf.tensor(x), mf.tensor(t), mf.tensor(v)))
    vb = v.reshape(*v.shape, 1) if len(var_shape) == 3 else v
    np.testing.assert_allclose(got, np.mean(0.5 * (np.log(vb) + (x - t) ** 2 / vb)), rtol=1e-12)


@pytest.mark.parametrize("loss", [F.cross_entropy, F.nll_loss])
@pytest.mark.parametrize("dtype", [mf.int64, mf.bool])
def test_class_weight_of_an_integer_dtype_raises(loss, dtype):
    """PyTorch refuses an integer or bool class weight ("expected scalar type Float but found Long"); it was cast
    and used. Class-probability targets check the weight the same way."""
    x, t = cpu(np.zeros((4, 3), np.float32)), mf.tensor([0, 1, 2, 1])
    with pytest.raises(TypeError, match=f"{loss.__name__}: weight must be a floating-point tensor, got dtype") as e:
        loss(x, t, weight=mf.ones(3, dtype=dtype))
    assert isinstance(e.value, RuntimeError)
    with pytest.raises(TypeError, match="cross_entropy: weight must be a floating-point tensor"):
        F.cross_entropy(x, cpu(np.full((4, 3), 1 / 3, np.float32)), weight=mf.ones(3, dtype=dtype))


@pytest.mark.parametrize("fn,match", [
    (lambda x: F.cross_entropy(x, mf.tensor([0, 1])), "cross_entropy: expected a float32"),
    (lambda x: F.nll_loss(x, mf.tensor([0, 1])), "nll_loss: expected a float32"),
    (lambda x: F.mse_loss(x, x), "mse_loss: expected a floating-point input")])
def test_integer_input_raises_not_implemented_as_pytorch(fn, match):
    """PyTorch has no integer kernel for these ("... not implemented for 'Long'"): a NotImplementedError, still
    the TypeError (and RuntimeError) this raised before."""
    with pytest.raises(NotImplementedError, match=match) as e:
        fn(mf.ones(2, 3, dtype=mf.int64))
    assert isinstance(e.value, TypeError) and isinstance(e.value, RuntimeError)


def test_multi_margin_label_out_of_range_is_pytorchs_runtime_error():
    with pytest.raises(RuntimeError, match="multi_margin_loss: target out of range for 4 classes") as e:
        F.multi_margin_loss(cpu(np.zeros((3, 4), np.float32)), mf.tensor([0, 1, 4]))
    assert isinstance(e.value, IndexError)


def test_class_weight_of_another_dtype_refused():
    """PyTorch's class-index losses refuse a weight not of the input's dtype ("expected scalar type Float but
    found Double") rather than casting it; the class-probability cross-entropy still promotes (above)."""
    x, t = mf.zeros(2, 3), mf.tensor([0, 1])
    w64 = mf.ones(3, dtype=mf.float64)
    for call in (lambda: F.cross_entropy(x, t, weight=w64), lambda: F.nll_loss(x, t, weight=w64),
                 lambda: F.cross_entropy(x.double(), t, weight=mf.ones(3)),
                 lambda: F.multi_margin_loss(x, t, weight=w64)):
        with pytest.raises(RuntimeError, match="expected weight of the input's dtype"):
            call()
    np.testing.assert_allclose(F.cross_entropy(x.double(), t, weight=w64).item(), np.log(3), rtol=1e-12)


def test_ignore_index_is_an_int_argument_as_in_pytorch(rng):
    """PyTorch's parser takes an int ignore_index (a NumPy int or a 0-d integer tensor too) and refuses a float, a
    bool or a string with a TypeError; a 0-d tensor label_smoothing is its number."""
    x, t = rng.standard_normal((5, 4)), np.array([1, 0, 3, 1, 2])
    want = cross_entropy64(x, t, ignore_index=1)
    for ii in (1, np.int64(1), mf.tensor(1)):
        np.testing.assert_allclose(F.cross_entropy(mf.tensor(x), mf.tensor(t), ignore_index=ii).item(), want,
                                   rtol=1e-12)
        np.testing.assert_allclose(F.nll_loss(mf.tensor(x), mf.tensor(t), ignore_index=ii).item(),
                                   -np.mean([x[i, c] for i, c in enumerate(t) if c != 1]), rtol=1e-12)
    for loss in (F.cross_entropy, F.nll_loss):
        for bad in (1.0, True, "1"):
            with pytest.raises(TypeError, match=f"{loss.__name__}\\(\\): argument 'ignore_index' must be int, not "
                                                f"{type(bad).__name__}"):
                loss(mf.tensor(x), mf.tensor(t), ignore_index=bad)
    smoothing = mf.tensor(0.2, dtype=mf.float64)
    np.testing.assert_allclose(F.cross_entropy(mf.tensor(x), mf.tensor(t), label_smoothing=smoothing).item(),
                               cross_entropy64(x, t, eps=0.2), rtol=1e-12)


def test_l1_loss_of_integer_tensors_is_an_integer_loss_as_in_pytorch():
    a, b = mf.tensor([[1, 5], [2, 3]]), mf.tensor([[0, 1], [4, 3]], dtype=mf.int32)
    none = F.l1_loss(a, b, reduction="none")
    assert none.dtype == mf.int64 and none.tolist() == [[1, 4], [2, 0]]
    total = F.l1_loss(a, b, reduction="sum")
    assert total.dtype == mf.int64 and total.item() == 7
    wrapped = F.l1_loss(a.to(mf.uint8), b.to(mf.uint8), reduction="none")  # (PyTorch's uint8 subtraction wraps)
    assert wrapped.dtype == mf.uint8 and wrapped.tolist() == [[1, 4], [254, 0]]
    with pytest.raises(RuntimeError, match="l1_loss: reduction='mean' has no integer result"):
        F.l1_loss(a, b)
    assert F.l1_loss(a, b, weight=mf.ones(2, 2)).item() == 1.75  # a float weight makes the mean float


@pytest.mark.parametrize("loss", [F.l1_loss, F.multilabel_soft_margin_loss])
def test_bool_target_of_a_loss_made_of_a_subtraction_raises_as_in_pytorch(loss):
    """PyTorch composes these of ``input - target`` / ``1 - target``, which refuse bool ("Subtraction ... with a
    bool tensor is not supported"); a float copy of the mask is the loss of its 0s and 1s."""
    x, mask = mf.tensor([[0.5, -1.0, 2.0]], dtype=mf.float64), mf.tensor([[True, False, True]])
    with pytest.raises(RuntimeError, match=f"{loss.__name__}: expected a numeric target, got dtype bool") as e:
        loss(x, mask)
    assert isinstance(e.value, TypeError)
    want = 2.5 / 3 if loss is F.l1_loss else np.mean(np.log1p(np.exp([-0.5, -1.0, -2.0])))
    np.testing.assert_allclose(loss(x, mask.float()).item(), want, rtol=1e-6)
