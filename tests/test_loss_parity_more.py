"""Loss functions against NumPy float64 references of PyTorch's definitions, on the edge cases its
kernels settle: target shapes, ties, zero vectors, empty inputs."""
import numpy as np
import pytest

import minifused as mf
import minifused.functional as F


def _multi_margin64(x, y, margin=1.0):
    """PyTorch's multi_margin_loss (p=1) per sample: sum over j != y of max(0, margin - x[y] + x[j]) / C."""
    x = np.atleast_2d(x)
    z = np.maximum(0, margin - x[np.arange(len(y)), y][:, None] + x)
    z[np.arange(len(y)), y] = 0
    return z.sum(1) / x.shape[1]


# ---------------------------------------------------------------- multi_margin_loss
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multi_margin_target_of_n_elements(reduction):
    """The target may be 0-d or (N,) whatever the input's dimensions (N elements); 'none' has its shape."""
    x = np.array([[0.3, -1.2, 0.8, 0.1]])
    ref = _multi_margin64(x, np.array([2]))
    for inp, tgt in ((x, np.array(2)), (x[0], np.array([2])), (x, np.array([2])), (x[0], np.array(2))):
        out = F.multi_margin_loss(mf.tensor(inp), mf.tensor(tgt), reduction=reduction)
        want = {"none": ref.reshape(tgt.shape), "mean": ref.mean(), "sum": ref.sum()}[reduction]
        assert out.shape == want.shape
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-12)
    # a 0-d input is one class: nothing to compare the target with
    assert F.multi_margin_loss(mf.tensor(0.5), mf.tensor(0), reduction=reduction).item() == 0.0


def test_multi_margin_bad_shapes():
    x = mf.tensor(np.zeros((2, 3)))
    with pytest.raises(Exception, match="multi_margin_loss"):
        F.multi_margin_loss(x, mf.tensor(np.array([[0, 1]])))  # a 2-D target
    with pytest.raises(Exception, match="multi_margin_loss"):
        F.multi_margin_loss(x, mf.tensor(np.array([0, 1, 2])))  # three targets for two samples
    with pytest.raises(Exception, match="multi_margin_loss: weight must be one-dimensional"):
        F.multi_margin_loss(x, mf.tensor(np.array([0, 1])), weight=mf.tensor(np.ones((1, 3))))


# ---------------------------------------------------------------- triplet losses
@pytest.mark.parametrize("fn", ["triplet_margin_loss", "triplet_margin_with_distance_loss"])
def test_triplet_swap_tie_shares_gradient(fn):
    """positive == anchor makes d(a, n) == d(p, n): PyTorch's min gives each half the gradient."""
    rng = np.random.default_rng(0)
    a, n = rng.standard_normal((2, 3, 4))
    ta, tp, tn = (mf.tensor(v.copy(), requires_grad=True) for v in (a, a, n))
    getattr(F, fn)(ta, tp, tn, margin=10.0, swap=True, reduction="sum").backward()
    eps = 1e-6  # pairwise_distance's
    u = (a - n + eps) / np.linalg.norm(a - n + eps, axis=1, keepdims=True)  # d(a, n)'s gradient in a
    d = 1 / np.sqrt(a.shape[1])  # d(a, p)'s in a, all of a - p being eps
    np.testing.assert_allclose(ta.grad.numpy(), d - 0.5 * u, rtol=1e-9)
    np.testing.assert_allclose(tp.grad.numpy(), -d - 0.5 * u, rtol=1e-9)
    np.testing.assert_allclose(tn.grad.numpy(), u, rtol=1e-9)


# ---------------------------------------------------------------- cosine_embedding_loss
def test_cosine_embedding_zero_vector_gradient():
    """PyTorch's EPSILON on the squared magnitudes is the float32 1e-12; it sets a zero vector's gradient."""
    x2 = np.array([[0.5, -1.0, 2.0]])
    t1 = mf.tensor(np.zeros((1, 3)), requires_grad=True)
    F.cosine_embedding_loss(t1, mf.tensor(x2), mf.tensor(np.array([1.0]))).backward()
    eps = float(np.float32(1e-12))
    np.testing.assert_allclose(t1.grad.numpy(), -x2 / np.sqrt(eps * ((x2 * x2).sum() + eps)), rtol=1e-12)


# ---------------------------------------------------------------- binary_cross_entropy
def test_binary_cross_entropy_clamped_gradient():
    """At x = 0 or 1 the gradient (x - t) / max(x (1 - x), EPSILON) takes PyTorch's float32 1e-12."""
    x, t = np.array([0.0, 1.0, 0.5]), np.array([0.3, 0.6, 0.2])
    tx = mf.tensor(x, requires_grad=True)
    F.binary_cross_entropy(tx, mf.tensor(t), reduction="sum").backward()
    eps = float(np.float32(1e-12))
    np.testing.assert_allclose(tx.grad.numpy(), (x - t) / np.maximum(x * (1 - x), eps), rtol=1e-12)


# ---------------------------------------------------------------- multilabel_soft_margin_loss
def test_multilabel_soft_margin_target_broadcasts():
    """Composed as PyTorch's: a target of one row broadcasts over the samples (no warning); a 0-d input raises."""
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((3, 4)), (rng.random(4) > 0.5) * 1.0
    ls = lambda v: -np.logaddexp(0, -v)  # log sigmoid
    ref = (-(y * ls(x) + (1 - y) * ls(-x))).sum(1) / 4
    out = F.multilabel_soft_margin_loss(mf.tensor(x), mf.tensor(y), reduction="none")
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12)
    with pytest.raises(IndexError, match="multilabel_soft_margin_loss"):
        F.multilabel_soft_margin_loss(mf.tensor(0.3), mf.tensor(1.0))


# ---------------------------------------------------------------- result dtypes
def test_compared_targets_keep_the_input_dtype():
    """hinge_embedding_loss and cosine_embedding_loss only compare the target with 1 and -1: a float64 target
    leaves a float32 loss, as PyTorch's."""
    x = np.array([[0.5, -0.2], [0.1, 0.3]], np.float32)
    y = np.array([[1.0, -1.0], [-1.0, 1.0]])
    out = F.hinge_embedding_loss(mf.tensor(x), mf.tensor(y), reduction="none")
    assert out.dtype == mf.float32
    np.testing.assert_array_equal(out.numpy(), np.where(y == 1, x, np.maximum(0, np.float32(1) - x)))
    out = F.cosine_embedding_loss(mf.tensor(x), mf.tensor(x[::-1].copy()), mf.tensor(np.array([1.0, -1.0])))
    assert out.dtype == mf.float32


def test_integer_input_with_a_floating_target():
    """PyTorch's mse / l1 / smooth_l1 / poisson_nll / gaussian_nll promote an integer input with a floating
    target (e.g. the arguments swapped); huber_loss and the rest refuse it."""
    x, y = np.array([[1, 3], [0, 2]]), np.array([[0.5, 2.0], [1.5, 2.0]], np.float32)
    d = x - y.astype(np.float64)
    want = {"mse_loss": (d * d).mean(), "l1_loss": np.abs(d).mean(),
            "smooth_l1_loss": np.where(np.abs(d) < 1, 0.5 * d * d, np.abs(d) - 0.5).mean(),
            "poisson_nll_loss": (np.exp(x) - y * x).mean()}
    for fn, ref in want.items():
        out = getattr(F, fn)(mf.tensor(x), mf.tensor(y))
        assert out.dtype == mf.float32, fn
        np.testing.assert_allclose(out.item(), ref, rtol=1e-6, err_msg=fn)
    out = F.gaussian_nll_loss(mf.tensor(x), mf.tensor(y), mf.tensor(np.ones((2, 2), np.float32)))
    np.testing.assert_allclose(out.item(), 0.5 * (d * d).mean(), rtol=1e-6)
    for fn in ("huber_loss", "binary_cross_entropy_with_logits", "soft_margin_loss"):
        with pytest.raises(TypeError, match=fn):
            getattr(F, fn)(mf.tensor(x), mf.tensor(y))


def test_output_dtype_of_mixed_operands():
    """huber_loss writes into the input's dtype; binary_cross_entropy_with_logits into the target's (PyTorch's
    ``(1 - target).mul_(input)``); both compute in the promoted dtype."""
    x = np.array([0.3, -2.5, 1.0])
    y = np.array([0.1, 0.5, 3.0])
    out = F.huber_loss(mf.tensor(x.astype(np.float32)), mf.tensor(y), reduction="none")
    assert out.dtype == mf.float32
    d = np.abs(x.astype(np.float32).astype(np.float64) - y)
    np.testing.assert_array_equal(out.numpy(), np.where(d < 1, 0.5 * d * d, d - 0.5).astype(np.float32))
    out = F.binary_cross_entropy_with_logits(mf.tensor(x), mf.tensor(y.astype(np.float32) / 3), reduction="none")
    assert out.dtype == mf.float32
    t = (y.astype(np.float32) / 3).astype(np.float64)
    np.testing.assert_allclose(out.numpy(), (1 - t) * x + np.logaddexp(0, -x), rtol=1e-6)


# ---------------------------------------------------------------- cross_entropy / nll_loss without classes
@pytest.mark.parametrize("shape", [(0, 0), (0, 0, 3)])
def test_class_losses_of_no_classes(shape):
    """No samples and no classes: PyTorch's 'none' is empty, 'mean' NaN (0 / 0), 'sum' 0 (NaN with label
    smoothing, its 0 sum scaled by label_smoothing / C); the gradient is empty."""
    target = mf.tensor(np.zeros((0,) + shape[2:], np.int64))
    for fn, kw in ((F.cross_entropy, {}), (F.nll_loss, {}), (F.cross_entropy, {"label_smoothing": 0.2})):
        x = mf.tensor(np.zeros(shape), requires_grad=True)
        assert fn(x, target, reduction="none", **kw).shape == target.shape
        assert np.isnan(fn(x, target, **kw).item())
        out = fn(x, target, reduction="sum", **kw)
        assert np.isnan(out.item()) if kw else out.item() == 0.0
        out.backward()
        assert x.grad.shape == shape
    out = F.cross_entropy(mf.tensor(np.zeros(shape)), mf.tensor(np.zeros(shape)), label_smoothing=0.2, reduction="sum")
    assert out.item() == 0.0  # (probabilities: an empty sum)


def test_margin_losses_name_themselves_in_shape_errors():
    one = lambda *s: mf.tensor(np.ones(s))
    with pytest.raises(ValueError, match=r"margin_ranking_loss: shapes \(5,\) and \(3,\)"):
        F.margin_ranking_loss(one(5), one(3), one(5))
    with pytest.raises(ValueError, match=r"triplet_margin_loss: shapes \(4, 5\) and \(3, 5\)"):
        F.triplet_margin_loss(one(4, 5), one(4, 5), one(3, 5))
    assert F.triplet_margin_loss(one(4, 5), one(1, 5), one(4, 5)).item() == 1.0  # (rows broadcast, as PyTorch's)
    with pytest.raises(ValueError, match=r"multi_margin_loss: inconsistent weight size, expected 5"):
        F.multi_margin_loss(one(4, 5), mf.tensor(np.zeros(4, np.int64)), weight=one(3))


# ---------------------------------------------------------------- hinge kinks
def test_multi_margin_losses_take_no_gradient_at_the_kink():
    """PyTorch's multi_margin / multilabel_margin kernels sum the terms z > 0: one at z = 0 has no gradient
    (the composed hinge losses clamp, whose gradient at the kink is 1: those stay as they are)."""
    x = mf.tensor(np.array([[1.0, 1.0, 0.0]]), requires_grad=True)
    F.multi_margin_loss(x, mf.tensor(np.array([0]))).backward()  # z = (1, 1, 0): only class 1 counts
    np.testing.assert_array_equal(x.grad.numpy(), [[-1 / 3, 1 / 3, 0]])
    x = mf.tensor(np.array([1.0, 1.0, 0.0]), requires_grad=True)
    F.multilabel_margin_loss(x, mf.tensor(np.array([0, -1, 0]))).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [-1 / 3, 1 / 3, 0])


# ---------------------------------------------------------------- the deprecated reduction='elementwise_mean'
def test_elementwise_mean_is_mean_with_a_warning():
    """PyTorch's reduction enum maps 'elementwise_mean' to 'mean' (warned) for its kernel losses; the losses it
    composes in Python (multilabel_soft_margin, poisson_nll, gaussian_nll) refuse it. A module keeps the name."""
    rng = np.random.default_rng(2)
    x, y = mf.tensor(rng.standard_normal((3, 4))), mf.tensor(rng.random((3, 4)))
    c = mf.tensor(np.array([0, 3, 1]))
    lp = mf.tensor(np.log(np.full((5, 2, 3), 1 / 3)))
    ctc = (lp, mf.tensor(np.ones((2, 2), np.int64)), (5, 5), (2, 1))
    for fn, args in ((F.mse_loss, (x, y)), (F.huber_loss, (x, y)), (F.cross_entropy, (x, c)), (F.ctc_loss, ctc),
                     (F.binary_cross_entropy_with_logits, (x, y)), (F.multi_margin_loss, (x, c))):
        with pytest.warns(UserWarning, match="reduction='elementwise_mean' is deprecated"):
            out = fn(*args, reduction="elementwise_mean")
        assert out.item() == fn(*args).item()
    m = mf.nn.MSELoss(reduction="elementwise_mean")
    assert m.reduction == "elementwise_mean"
    with pytest.warns(UserWarning, match="elementwise_mean"):
        assert m(x, y).item() == F.mse_loss(x, y).item()
    for fn in (F.multilabel_soft_margin_loss, F.poisson_nll_loss):
        with pytest.raises(ValueError, match=fn.__name__):
            fn(x, y, reduction="elementwise_mean")
    with pytest.raises(ValueError, match="PoissonNLLLoss|poisson_nll_loss"):
        mf.nn.PoissonNLLLoss(reduction="elementwise_mean")(x, y)


def test_kl_div_warns_of_mean_asked_by_name_only():
    import warnings

    x, y = mf.tensor(np.zeros((2, 3))), mf.tensor(np.full((2, 3), 0.5))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        F.kl_div(x, y, size_average=True)
    assert [str(m.message)[:12] for m in w] == ["size_average"]


def test_nll_loss_graph_gradient_requires_grad():
    """PyTorch's nll_loss gradient is recorded as a function of the input (its own gradient 0), so a penalty on it
    can be differentiated: the input's gradient is then zeros, not an error."""
    x = mf.tensor(np.array([[0.5, -np.inf], [1.0, 2.0]]), requires_grad=True)
    (g,) = mf.autograd.grad(F.nll_loss(x, mf.tensor(np.array([0, 1]))), [x], create_graph=True)
    np.testing.assert_array_equal(g.detach().numpy(), [[-0.5, 0], [0, -0.5]])
    assert g.requires_grad
    (g * g).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 2)))


def test_multi_margin_weight_is_not_differentiable():
    w = mf.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(ValueError, match="multi_margin_loss: not differentiable with respect to argument 'weight'"):
        F.multi_margin_loss(mf.tensor(np.zeros((2, 3))), mf.tensor(np.array([0, 1])), weight=w)
    with mf.no_grad():  # (as PyTorch's: only a recorded call refuses it)
        F.multi_margin_loss(mf.tensor(np.zeros((2, 3))), mf.tensor(np.array([0, 1])), weight=w)


def test_margin_loss_modules_default_margins_in_their_signatures():
    import inspect

    for name, default in (("MarginRankingLoss", 0.0), ("HingeEmbeddingLoss", 1.0), ("CosineEmbeddingLoss", 0.0),
                          ("TripletMarginLoss", 1.0)):
        cls = getattr(mf.nn, name)
        assert inspect.signature(cls.__init__).parameters["margin"].default == default
        assert cls().margin == default
    with pytest.raises(TypeError, match="margin"):  # None is kept, and refused by the loss, as PyTorch's
        mf.nn.HingeEmbeddingLoss(margin=None)(mf.tensor(np.ones(3)), mf.tensor(np.ones(3)))


def test_pointwise_loss_weight_promotes():
    """mse / l1 / huber with ``weight`` are PyTorch compositions: loss * weight promotes (a float64 weight on a
    float32 loss gives float64)."""
    x, y = mf.tensor(np.array([0.5, -1.5], np.float32)), mf.tensor(np.array([0.0, 0.0], np.float32))
    w = np.array([0.1, 0.3])
    for fn, ref in ((F.mse_loss, np.array([0.25, 2.25])), (F.l1_loss, np.array([0.5, 1.5])),
                    (F.huber_loss, np.array([0.125, 1.0]))):
        out = fn(x, y, weight=mf.tensor(w), reduction="none")
        assert out.dtype == mf.float64
        np.testing.assert_allclose(out.numpy(), ref * w, rtol=1e-15)


def test_multilabel_soft_margin_weight_promotes():
    x, y = mf.tensor(np.array([[0.0, 0.0]], np.float32)), mf.tensor(np.array([[1.0, 0.0]], np.float32))
    out = F.multilabel_soft_margin_loss(x, y, weight=mf.tensor(np.array([1.0, 3.0])), reduction="none")
    assert out.dtype == mf.float64
    np.testing.assert_allclose(out.numpy(), [np.log(2) * 4 / 2], rtol=1e-7)


def test_margin_ranking_loss_of_integer_inputs_is_a_float_loss_as_in_pytorch():
    """PyTorch's float margin promotes integer inputs: a float32 loss (the default), or the target's float dtype."""
    i1, i2 = mf.tensor([1, 2, 3]), mf.tensor([3, 1, 3])
    for target, dtype in ((mf.tensor([1, -1, 1]), mf.float32), (mf.tensor([1.0, -1.0, 1.0], dtype=mf.float64),
                                                                 mf.float64)):
        out = F.margin_ranking_loss(i1, i2, target, margin=0.5, reduction="none")
        assert out.dtype == dtype and out.tolist() == [2.5, 1.5, 0.5]  # max(0, -y (x1 - x2) + 0.5)
        assert F.margin_ranking_loss(i1, i2, target, margin=0.5).item() == 1.5
