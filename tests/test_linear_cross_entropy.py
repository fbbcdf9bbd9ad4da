"""``F.linear_cross_entropy``, ``nn.LinearCrossEntropyLoss`` and ``nn.LinearCrossEntropyOptions``, as PyTorch's: loss
values and the gradients of input, weight and bias against a float64 NumPy reference (class indices, ignore_index,
class weights, label smoothing, probability targets, K-dimensional out_features, every reduction), the module's
parameter names, shapes, initialization and repr, the options' checks, and the errors for bad input."""
import warnings

import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
from minifused import nn

from tolerances import cpu

TOL = 1e-10  # float64 throughout


def reference(x, w, b, target, weight=None, reduction="mean", ignore_index=-100, s=0.0, gout=None):
    """(loss, d input, d linear_weight, d linear_bias) of cross_entropy(linear(x, w, b), target) in float64.

    Each position's loss is -sum_c a_c log_softmax(z)_c, with a = (1 - s) w_t onehot(t) + s / C w (0 where t is
    ignored) for class indices and a = w ((1 - s) t + s / C) for probabilities; its logit gradient is
    softmax(z) sum_c a_c - a. 'mean' divides by the summed w_t of the kept targets (indices) or by the number of
    positions (probabilities)."""
    unbatched = x.ndim == 1
    c, out = w.shape[0], w.shape[1:-1]
    xb = x[None] if unbatched else x
    tb = target[None] if unbatched else target
    w2 = w.reshape(-1, w.shape[-1])
    z = (xb @ w2.T + (0.0 if b is None else b.reshape(-1))).reshape((xb.shape[0], c) + out)
    cw = np.ones(c) if weight is None else weight
    cwb = cw.reshape((1, c) + (1,) * len(out))
    zm = z - z.max(1, keepdims=True)
    logp = zm - np.log(np.exp(zm).sum(1, keepdims=True))
    if tb.dtype.kind == "f":
        a = cwb * (tb * (1 - s) + s / c)
        denom = a.size / c
    else:
        keep = tb != ignore_index
        tk = np.where(keep, tb, 0)
        onehot = np.arange(c).reshape((1, c) + (1,) * len(out)) == tk[:, None]
        a = ((1 - s) * onehot * cwb + s / c * cwb) * keep[:, None]
        denom = (cw[tk] * keep).sum()
    loss = -(a * logp).sum(1)
    if reduction == "none":
        g, result = (gout[None] if unbatched else gout), (loss[0] if unbatched else loss)
    else:
        g = np.full(loss.shape, 1.0 if reduction == "sum" else 1.0 / denom)
        result = loss.sum() * g.flat[0]
    grad_z = (np.exp(logp) * a.sum(1, keepdims=True) - a) * g[:, None]
    g2 = grad_z.reshape(xb.shape[0], -1)
    dx = g2 @ w2
    return (result, dx[0] if unbatched else dx, (g2.T @ xb).reshape(w.shape),
            None if b is None else g2.sum(0).reshape(b.shape))


def run(x, w, b, target, gout=None, **kw):
    """minifused's loss and the gradients (input, linear_weight, linear_bias), through the functional."""
    xt, wt = cpu(x, requires_grad=True), cpu(w, requires_grad=True)
    bt = None if b is None else cpu(b, requires_grad=True)
    weight = kw.pop("weight", None)
    out = F.linear_cross_entropy(xt, wt, cpu(target), linear_bias=bt, weight=None if weight is None else cpu(weight),
                                 **kw)
    (out * (1.0 if gout is None else cpu(gout))).sum().backward()
    return out.detach().numpy(), xt.grad.numpy(), wt.grad.numpy(), None if b is None else bt.grad.numpy()


def check(x, w, b, target, gout=None, **kw):
    """minifused against the reference; ``gout`` is the upstream gradient of a 'none' reduction."""
    gout = gout if kw.get("reduction") == "none" else None
    got = run(x, w, b, target, gout, **dict(kw))
    ref_kw = dict(kw)
    ref_kw["s"] = ref_kw.pop("label_smoothing", 0.0)
    want = reference(x, w, b, target, gout=gout, **ref_kw)
    for name, g, r in zip(("loss", "d input", "d linear_weight", "d linear_bias"), got, want):
        if r is None:
            assert g is None
            continue
        assert np.shape(g) == np.shape(r), name
        np.testing.assert_allclose(g, r, rtol=TOL, atol=TOL, err_msg=name)


@pytest.fixture
def data():
    rng = np.random.default_rng(7)
    return rng, rng.standard_normal((4, 3)), 0.7 * rng.standard_normal((5, 3)), rng.standard_normal(5)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("bias", [False, True])
def test_class_indices(data, reduction, bias):
    rng, x, w, b = data
    check(x, w, b if bias else None, np.array([0, 4, 2, 2]), rng.standard_normal(4), reduction=reduction)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_ignore_index_and_class_weights(data, reduction):
    rng, x, w, b = data
    cw = np.array([0.5, 2.0, 1.0, 3.0, 0.25])
    check(x, w, b, np.array([1, 3, 1, 0]), rng.standard_normal(4), weight=cw, ignore_index=1, reduction=reduction)


def test_ignore_index_none_is_minus_100_for_class_indices(data):
    rng, x, w, b = data
    target = np.array([2, -100, 4, -100])
    got = run(x, w, b, target)  # ignore_index=None: -100
    want = reference(x, w, b, target, ignore_index=-100)
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, rtol=TOL, atol=TOL)
    np.testing.assert_allclose(got[1][[1, 3]], 0.0)  # ignored rows get no gradient


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_label_smoothing_with_class_weights(data, reduction):
    rng, x, w, b = data
    check(x, w, b, np.array([0, 4, 2, 3]), rng.standard_normal(4), weight=np.array([1.0, 2.0, 0.5, 1.5, 3.0]),
          label_smoothing=0.3, ignore_index=2, reduction=reduction)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_probability_targets(data, reduction):
    rng, x, w, b = data
    p = rng.random((4, 5))
    p /= p.sum(1, keepdims=True)
    check(x, w, b, p, rng.standard_normal(4), weight=np.array([1.0, 2.0, 0.5, 1.5, 3.0]), label_smoothing=0.2,
          reduction=reduction)


@pytest.mark.parametrize("probabilities", [False, True])
def test_unbatched_input(data, probabilities):
    rng, x, w, b = data
    target = rng.dirichlet(np.ones(5)) if probabilities else np.array(3)
    check(x[0], w, b, target, np.array(1.7), reduction="none")
    check(x[0], w, b, target, label_smoothing=0.1)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_k_dimensional_class_indices(reduction):
    rng = np.random.default_rng(3)
    x, w, b = rng.standard_normal((3, 4)), 0.5 * rng.standard_normal((5, 2, 3, 4)), rng.standard_normal((5, 2, 3))
    target = rng.integers(0, 5, (3, 2, 3))
    target[0, 1, 2] = 4
    check(x, w, b, target, rng.standard_normal((3, 2, 3)), weight=np.array([1.0, 2.0, 0.5, 1.5, 3.0]),
          ignore_index=4, label_smoothing=0.1, reduction=reduction)


def test_k_dimensional_probabilities():
    rng = np.random.default_rng(4)
    x, w, b = rng.standard_normal((3, 4)), 0.5 * rng.standard_normal((5, 2, 4)), rng.standard_normal((5, 2))
    p = rng.random((3, 5, 2))
    p /= p.sum(1, keepdims=True)
    check(x, w, b, p, rng.standard_normal((3, 2)), reduction="none")
    check(x, w, b, p, weight=np.array([1.0, 2.0, 0.5, 1.5, 3.0]), label_smoothing=0.2)


def _bad(**over):
    rng = np.random.default_rng(0)
    args = {"input": cpu(rng.standard_normal((3, 4))), "linear_weight": cpu(rng.standard_normal((5, 4))),
            "target": cpu(np.array([0, 1, 2]))}
    args.update(over)
    return lambda **kw: F.linear_cross_entropy(args.pop("input"), args.pop("linear_weight"), args.pop("target"),
                                               **args, **kw)


@pytest.mark.parametrize("over, error, match", [
    ({"input": cpu(1.0)}, RuntimeError, "expected input with dimensionality 1 or 2, got 0"),
    ({"input": cpu(np.ones((2, 3, 4)))}, RuntimeError, "expected input with dimensionality 1 or 2, got 3"),
    ({"linear_weight": cpu(np.ones(4))}, RuntimeError, "linear_weight with dimensionality at least 2, got 1"),
    ({"linear_weight": cpu(np.ones((5, 3)))}, RuntimeError, r"last dimensions \(in_features\), got 4 and 3"),
    ({"linear_bias": cpu(np.ones(4))}, RuntimeError, r"expected linear_bias shape \(5,\), got \(4,\)"),
    ({"linear_weight": cpu(np.ones((5, 2, 4))), "linear_bias": cpu(np.ones(5))}, RuntimeError,
     r"linear_bias shape \(5, 2\), got \(5,\)"),
    ({"input": cpu(np.ones(4)), "linear_weight": cpu(np.ones((5, 2, 4))), "target": cpu(np.array(1))}, RuntimeError,
     r"requires batched input, \(N, 4\), got unbatched input with shape \(4,\)"),
    ({"target": cpu(np.full((3, 5), 0.2)), "ignore_index": -100}, RuntimeError,
     "ignore_index cannot be specified when target contains probabilities"),
    ({"input": np.ones((3, 4))}, TypeError, "expected a tensor for input, got ndarray"),
    ({"linear_bias": [1.0] * 5}, TypeError, "linear_bias must be a tensor or None"),
    ({"options": {}}, TypeError, "options must be a LinearCrossEntropyOptions or None, got dict"),
    ({"target": cpu(np.array([0, 1, 5]))}, IndexError, "out of bounds"),
    ({"weight": cpu(np.ones(4))}, RuntimeError, r"weight must have shape \[5\]"),
    ({"reduction": "bad"}, ValueError, "reduction"),
    ({"label_smoothing": 1.5}, RuntimeError, "label_smoothing"),
])
def test_bad_input(over, error, match):
    call = _bad(**over)
    with pytest.raises(error, match=match):
        call()


def test_options_fields_and_checks():
    o = nn.LinearCrossEntropyOptions()
    assert (o.allow_retain_graph, o.batch_chunk_size, o.chunking_method, o.acc_policy, o.acc_dtype) == (
        False, None, "auto", "auto", None)
    assert repr(o) == ("LinearCrossEntropyOptions(allow_retain_graph=False, batch_chunk_size=None, "
                       "chunking_method='auto', acc_policy='auto', acc_dtype=None)")
    assert o == nn.LinearCrossEntropyOptions() and hash(o) == hash(nn.LinearCrossEntropyOptions())
    with pytest.raises(AttributeError):  # frozen
        o.acc_policy = "compact"
    for ok in ({"chunking_method": None}, {"chunking_method": "aspect_ratio:3"}, {"batch_chunk_size": 8},
               {"acc_policy": "balanced", "acc_dtype": mf.float32}):
        nn.LinearCrossEntropyOptions(**ok)
    for bad, match in (({"acc_policy": "x"}, "invalid acc_policy: 'x'"),
                       ({"chunking_method": "aspect_ratio:0"}, "invalid chunking_method"),
                       ({"chunking_method": "aspect"}, "invalid chunking_method"),
                       ({"batch_chunk_size": 0}, "batch_chunk_size must be positive int or None, got 0"),
                       ({"batch_chunk_size": 2.0}, "batch_chunk_size must be positive int or None"),
                       ({"acc_dtype": mf.int32}, "acc_dtype must be one of")):
        with pytest.raises(ValueError, match=match):
            nn.LinearCrossEntropyOptions(**bad)
    # resolved against a call: (N=3, in=4, C=5) cuts 'aspect_ratio' chunks of next_pow2(ceil(3 / ceil(5 / 4))) = 2
    adj = nn.LinearCrossEntropyOptions(chunking_method="aspect_ratio")._adjust(3, 4, 5, mf.float32)
    assert (adj.batch_chunk_size, adj.acc_policy, adj.acc_dtype) == (2, "compact", mf.float32)


def test_options_give_the_unchunked_loss_and_pytorchs_checks(data):
    rng, x, w, b = data
    target = np.array([0, 4, 2, 2])
    want = reference(x, w, b, target)
    got = run(x, w, b, target, options=nn.LinearCrossEntropyOptions(batch_chunk_size=2))
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, rtol=TOL, atol=TOL)
    # chunk sizes that disagree: 'aspect_ratio' gives next_pow2(ceil(4 / ceil(5 / 3))) = 2 rows where 1 is asked
    with pytest.raises(ValueError, match=r"give different chunk sizes \(1 vs 2\)"):
        run(x, w, b, target, options=nn.LinearCrossEntropyOptions(batch_chunk_size=1, chunking_method="aspect_ratio"))
    with pytest.warns(UserWarning, match="``options`` ignored; chunked path needs"):  # no chunking with smoothing
        got = run(x, w, b, target, options=nn.LinearCrossEntropyOptions(), label_smoothing=0.1)
    np.testing.assert_allclose(got[0], reference(x, w, b, target, s=0.1)[0], rtol=TOL)


def test_module_parameters_state_dict_and_repr():
    m = nn.LinearCrossEntropyLoss(5, 10, out_features=(4, 3), bias=True, weight=cpu(np.ones(10)), device="cpu")
    assert [(k, tuple(v.shape)) for k, v in m.state_dict().items()] == [
        ("weight", (10,)), ("linear.weight", (120, 5)), ("linear.bias", (120,))]
    assert [k for k, _ in m.named_parameters()] == ["linear.weight", "linear.bias"]
    assert repr(m) == (
        "LinearCrossEntropyLoss(\n  in_features=5, num_classes=10, out_features=(4, 3), bias=True, reduction=mean, "
        "ignore_index=None, label_smoothing=0.0, options=None\n"
        "  (linear): Linear(in_features=5, out_features=120, bias=True)\n)")
    plain = nn.LinearCrossEntropyLoss(5, 10, device="cpu")
    assert list(plain.state_dict()) == ["linear.weight"] and plain.linear.bias is None
    # PyTorch's Linear init: U(-1/sqrt(in), 1/sqrt(in)) for the weight and the bias
    big = nn.LinearCrossEntropyLoss(16, 500, bias=True, device="cpu")
    for p in (big.linear.weight.numpy(), big.linear.bias.numpy()):
        assert np.abs(p).max() <= 0.25 and np.abs(p).max() > 0.2 and abs(p.mean()) < 0.02
    from minifused.nn.modules.linear_cross_entropy_options import LinearCrossEntropyOptions
    from minifused.nn.modules.loss import LinearCrossEntropyLoss
    assert LinearCrossEntropyOptions is nn.LinearCrossEntropyOptions and LinearCrossEntropyLoss is type(m)


@pytest.mark.parametrize("probabilities", [False, True])
def test_module_forward_from_a_state_dict(probabilities):
    rng = np.random.default_rng(5)
    w, b, cw = 0.5 * rng.standard_normal((5, 2, 3)), rng.standard_normal((5, 2)), np.array([1.0, 2, 0.5, 1.5, 3])
    m = nn.LinearCrossEntropyLoss(3, 5, out_features=(2,), bias=True, weight=cpu(cw), ignore_index=None,
                                  label_smoothing=0.2, reduction="sum", device="cpu", dtype=mf.float64)
    m.load_state_dict({"weight": cw, "linear.weight": w.reshape(10, 3), "linear.bias": b.reshape(10)})
    x = rng.standard_normal((4, 3))
    target = rng.dirichlet(np.ones(5), (4, 2)).transpose(0, 2, 1) if probabilities else rng.integers(0, 5, (4, 2))
    xt = cpu(x, requires_grad=True)
    out = m(xt, cpu(target))
    out.backward()
    loss, dx, dw, db = reference(x, w, b, target, weight=cw, reduction="sum", s=0.2)
    np.testing.assert_allclose(out.item(), loss, rtol=TOL)
    np.testing.assert_allclose(xt.grad.numpy(), dx, rtol=TOL, atol=TOL)
    np.testing.assert_allclose(m.linear.weight.grad.numpy(), dw.reshape(10, 3), rtol=TOL, atol=TOL)
    np.testing.assert_allclose(m.linear.bias.grad.numpy(), db.reshape(10), rtol=TOL, atol=TOL)


def test_module_bad_arguments():
    with pytest.raises(RuntimeError, match=r"expected weight shape to be \(5,\), got \(4,\)"):
        nn.LinearCrossEntropyLoss(4, 5, weight=cpu(np.ones(4)))
    for s in (-0.1, 1.5):
        with pytest.raises(RuntimeError, match=r"expected label_smoothing to be in range \[0, 1\]"):
            nn.LinearCrossEntropyLoss(4, 5, label_smoothing=s)
    m = nn.LinearCrossEntropyLoss(4, 5, options=nn.LinearCrossEntropyOptions(), device="cpu")
    assert "options=LinearCrossEntropyOptions(allow_retain_graph=False" in repr(m)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # chunkable arguments: no warning
        m(cpu(np.ones((2, 4)), dtype=mf.float32), cpu(np.array([1, 3])))
