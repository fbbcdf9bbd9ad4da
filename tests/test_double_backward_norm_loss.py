"""Second (and third) derivatives of softmax, the losses and the norms: gradgradcheck in float64 on the cpu, and a
few Hessian-vector products against formulas derived by hand."""
from __future__ import annotations

import numpy as np
import pytest

import minifused as mf
import minifused.nn as nn
import minifused.nn.functional as F
from minifused.autograd import gradcheck, gradgradcheck
from minifused.ops.batchnorm import ConvBatchNormFn


def _t(rng, *shape, grad=True):
    return mf.tensor(rng.standard_normal(shape), requires_grad=grad)


def _const(a):
    return mf.tensor(np.asarray(a))


def _hvp(f, x, v, u):
    """d/dx <grad_x <v, f(x)>, u>: the Hessian of <v, f> times u, through create_graph=True."""
    (g,) = mf.autograd.grad(f(x), x, v, create_graph=True)
    (h,) = mf.autograd.grad((g * u).sum(), x)
    return h._data


# ---------------------------------------------------------------- softmax

@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape,dim", [((5,), 0), ((3, 4), -1), ((3, 4), 0), ((2, 3, 4), 1)])
def test_softmax(shape, dim, log):
    rng = np.random.default_rng(0)
    fn = F.log_softmax if log else F.softmax
    assert gradgradcheck(lambda x: fn(x, dim), (_t(rng, *shape),))


def test_softmax_inplace_along_a_dim():
    rng = np.random.default_rng(1)
    assert gradgradcheck(lambda x: F.softmax_(x * 1.0, 0), (_t(rng, 3, 4),))


def test_softmax_hessian_by_hand():
    rng = np.random.default_rng(2)
    x, v, u = rng.standard_normal((3, 5))
    y = np.exp(x - x.max()) / np.exp(x - x.max()).sum()
    a = v - v @ y  # d<v, softmax>/dx = y * a; its Jacobian by hand:
    hess = (np.eye(5) - y[None, :]) * (y * a)[:, None] - np.outer(y, y * a)
    got = _hvp(lambda x: F.softmax(x, 0), mf.tensor(x, requires_grad=True), mf.tensor(v), mf.tensor(u))
    np.testing.assert_allclose(got, hess @ u, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- cross_entropy, nll

_TARGET = np.array([0, 3, -100, 2, 1])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_class_indices(reduction, smoothing, weighted):
    rng = np.random.default_rng(3)
    w = _const(rng.random(4) + 0.5) if weighted else None
    assert gradgradcheck(lambda x: F.cross_entropy(x, _const(_TARGET), weight=w, reduction=reduction,
                                                   label_smoothing=smoothing), (_t(rng, 5, 4),))


@pytest.mark.parametrize("ignore_index", [-100, 1])
def test_cross_entropy_spatial_and_ignore_index(ignore_index):
    rng = np.random.default_rng(4)
    t = _const(rng.integers(0, 3, (2, 2, 2)))
    assert gradgradcheck(lambda x: F.cross_entropy(x, t, ignore_index=ignore_index), (_t(rng, 2, 3, 2, 2),))


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_probabilities(smoothing):
    rng = np.random.default_rng(5)
    p = mf.tensor(rng.random((4, 5)), requires_grad=True)
    assert gradgradcheck(lambda x, p: F.cross_entropy(x, p, label_smoothing=smoothing), (_t(rng, 4, 5), p))


def test_cross_entropy_hessian_by_hand():
    rng = np.random.default_rng(6)
    x, u = rng.standard_normal((2, 4, 3))
    p = np.exp(x) / np.exp(x).sum(1, keepdims=True)
    want = 0.75 * (p * u - p * (p * u).sum(1, keepdims=True))  # v * (diag(p) - p p^T) u per row
    got = _hvp(lambda x: F.cross_entropy(x, _const([0, 2, 1, 1]), reduction="sum"), mf.tensor(x, requires_grad=True),
               mf.tensor(0.75), mf.tensor(u))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


_NO_WEIGHT = {  # 'mean' losses whose targets' weights sum to 0
    "ce_ignored": lambda x: F.cross_entropy(x, _const([-100] * 3)),
    "ce_ignored_smoothing": lambda x: F.cross_entropy(x, _const([-100] * 3), label_smoothing=0.2),
    "ce_zero_weights_smoothing": lambda x: F.cross_entropy(x, _const([0, 1, 1]), weight=_const([0, 0, 1, 1.]),
                                                           label_smoothing=0.2),
    "nll_ignored": lambda x: F.nll_loss(x, _const([-100] * 3)),
    "nll_zero_weights": lambda x: F.nll_loss(x, _const([0, 1, 1]), weight=_const([0, 0, 1, 1.])),
}


@pytest.mark.parametrize("case", sorted(_NO_WEIGHT))
def test_no_weight_as_backward(case):
    """'mean' over targets of no weight divides by 0: the gradient taken with create_graph=True is the array
    backward's, NaN where that one is."""
    x = mf.tensor(np.random.default_rng(7).standard_normal((3, 4)), requires_grad=True)
    (g,) = mf.autograd.grad(_NO_WEIGHT[case](x), x, create_graph=True)
    (first,) = mf.autograd.grad(_NO_WEIGHT[case](x), x)
    np.testing.assert_array_equal(g._data, first._data)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss(reduction, weighted):
    rng = np.random.default_rng(8)
    w = _const(rng.random(4) + 0.5) if weighted else None
    assert gradgradcheck(lambda x: F.nll_loss(F.log_softmax(x, 1), _const(_TARGET), weight=w, reduction=reduction),
                         (_t(rng, 5, 4),))


def test_nll_loss_of_a_square_by_hand():
    """nll is linear in its input: the Hessian of nll(x * x) is -2 w_t / sum(w_t) at the targets."""
    rng = np.random.default_rng(9)
    x, u = rng.standard_normal((2, 3, 4))
    w, t = rng.random(4) + 0.5, np.array([1, 3, 0])
    want = np.zeros((3, 4))
    want[np.arange(3), t] = -2 * w[t] / w[t].sum() * u[np.arange(3), t]
    got = _hvp(lambda x: F.nll_loss(x * x, _const(t), weight=_const(w)), mf.tensor(x, requires_grad=True),
               mf.tensor(1.0), mf.tensor(u))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- the composed losses

_LOSSES = {
    "mse": lambda x, y: F.mse_loss(x, y),
    "mse_none": lambda x, y: F.mse_loss(x, y, reduction="none"),
    "l1": lambda x, y: F.l1_loss(x, y, reduction="sum"),
    "smooth_l1": lambda x, y: F.smooth_l1_loss(x, y, beta=0.5),
    "huber": lambda x, y: F.huber_loss(x, y, delta=0.7),
    "kl_div_log_target": lambda x, y: F.kl_div(x, y, reduction="batchmean", log_target=True),
    "bce_with_logits": lambda x, y: F.binary_cross_entropy_with_logits(x, y.sigmoid(), pos_weight=_const([.5, 2, 1])),
    "soft_margin": lambda x, y: F.soft_margin_loss(x, _const([[1, -1, 1], [-1, -1, 1]])),
    "gaussian_nll": lambda x, y: F.gaussian_nll_loss(x, y, (x * y).exp()),
    "poisson_nll": lambda x, y: F.poisson_nll_loss(x, y.exp()),
    "cosine_embedding": lambda x, y: F.cosine_embedding_loss(x, y, _const([1, -1])),
}


@pytest.mark.parametrize("name", sorted(_LOSSES))
def test_composed_losses(name):
    rng = np.random.default_rng(10)
    x, y = _t(rng, 2, 3), _t(rng, 2, 3)
    if name == "l1":  # away from the kink at x == y
        y = mf.tensor(x.detach()._data + np.sign(rng.standard_normal((2, 3))) * (0.5 + rng.random((2, 3))),
                      requires_grad=True)
    assert gradgradcheck(_LOSSES[name], (x, y))


def test_mse_hessian_by_hand():
    rng = np.random.default_rng(11)
    x, y, u = rng.standard_normal((3, 2, 3))
    got = _hvp(lambda x: F.mse_loss(x, mf.tensor(y)), mf.tensor(x, requires_grad=True), mf.tensor(1.0), mf.tensor(u))
    np.testing.assert_allclose(got, 2 * u / 6, rtol=1e-12)


# ---------------------------------------------------------------- LayerNorm, RMSNorm, GroupNorm, InstanceNorm

@pytest.mark.parametrize("normalized_shape", [(4,), (3, 4)])
@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
def test_layer_norm(normalized_shape, affine):
    rng = np.random.default_rng(12)
    w = _t(rng, *normalized_shape) if affine in ("both", "weight") else None
    b = _t(rng, *normalized_shape) if affine in ("both", "bias") else None
    params = tuple(p for p in (w, b) if p is not None)

    def f(x, *ps):
        return F.layer_norm(x, normalized_shape, w, b)
    assert gradgradcheck(f, (_t(rng, 2, 3, 4), *params))


def test_layer_norm_parameters_only():
    """x a constant: the gradients of the weight and bias, and theirs."""
    rng = np.random.default_rng(13)
    x = _t(rng, 3, 4, grad=False)
    assert gradgradcheck(lambda w, b: F.layer_norm(x, (4,), w, b), (_t(rng, 4), _t(rng, 4)))


@pytest.mark.parametrize("weighted", [False, True])
def test_rms_norm(weighted):
    rng = np.random.default_rng(14)
    w = _t(rng, 4) if weighted else None
    assert gradgradcheck(lambda x, *ps: F.rms_norm(x, (4,), w, eps=1e-6), (_t(rng, 3, 4), *([w] if weighted else [])))


def test_nn_layer_norm_module():
    rng = np.random.default_rng(15)
    m = nn.LayerNorm((3, 4)).double()
    with mf.no_grad():
        m.weight.copy_(mf.tensor(rng.standard_normal((3, 4))))
    assert gradgradcheck(lambda x, w, b: m(x), (_t(rng, 2, 3, 4), m.weight, m.bias))


@pytest.mark.parametrize("shape,groups", [((2, 4, 3), 2), ((2, 4, 2, 2), 4), ((1, 6, 3), 3)])
def test_group_norm(shape, groups):
    rng = np.random.default_rng(16)
    c = shape[1]
    assert gradgradcheck(lambda x, w, b: F.group_norm(x, groups, w, b), (_t(rng, *shape), _t(rng, c), _t(rng, c)))


@pytest.mark.parametrize("affine", [False, True])
def test_instance_norm(affine):
    rng = np.random.default_rng(17)
    ps = (_t(rng, 3), _t(rng, 3)) if affine else ()
    assert gradgradcheck(lambda x, *ps: F.instance_norm(x, None, None, *ps), (_t(rng, 2, 3, 4), *ps))


# ---------------------------------------------------------------- BatchNorm

@pytest.mark.parametrize("shape", [(4, 3), (3, 2, 4), (2, 3, 2, 3)])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("relu", [False, True])
def test_batch_norm(shape, training, relu):
    rng = np.random.default_rng(18)
    c = shape[1]
    rm, rv = _const(rng.standard_normal(c)), _const(rng.random(c) + 0.5)
    x = _t(rng, *shape)
    if relu:  # the values before the ReLU away from 0, its kink
        with mf.no_grad():
            y = F.batch_norm(x, None if training else rm, None if training else rv, training=training)
        x = mf.tensor(x.detach()._data + 0.3 * np.sign(y._data) * (np.abs(y._data) < 0.2), requires_grad=True)
    assert gradgradcheck(lambda x, w, b: F.batch_norm(x, rm.clone(), rv.clone(), w, b, training=training,
                                                      activation="relu" if relu else None),
                         (x, _t(rng, c), _t(rng, c)))


def test_batch_norm_channels_last_relu():
    rng = np.random.default_rng(19)
    x = _t(rng, 2, 3, 3, 2, grad=False).contiguous(memory_format=mf.channels_last)
    x.requires_grad_()
    w, b = _t(rng, 3), _t(rng, 3)
    y = F.batch_norm(x, None, None, w, b, training=True, activation="relu")
    v, u = _t(rng, 2, 3, 3, 2, grad=False), _t(rng, 2, 3, 3, 2, grad=False)
    (g,) = mf.autograd.grad(y, x, v, create_graph=True)
    (h,) = mf.autograd.grad((g * u).sum(), x)
    xc = mf.tensor(x.detach()._data.copy(order="C"), requires_grad=True)
    (gc,) = mf.autograd.grad(F.batch_norm(xc, None, None, w, b, training=True, activation="relu"), xc, v,
                             create_graph=True)
    (hc,) = mf.autograd.grad((gc * u).sum(), xc)
    np.testing.assert_allclose(g._data, gc._data, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h._data, hc._data, rtol=1e-12, atol=1e-12)


def test_batch_norm_eval_by_hand():
    """In evaluation BatchNorm is affine in x: no second derivative in x, and d/dw of <v, dx> is v * rstd."""
    rng = np.random.default_rng(20)
    x, w = _t(rng, 4, 3), _t(rng, 3)
    rv = rng.random(3) + 0.5
    v, u = rng.standard_normal((2, 4, 3))
    y = F.batch_norm(x, _const(np.zeros(3)), _const(rv), w, None, training=False, eps=1e-5)
    (g,) = mf.autograd.grad(y, x, mf.tensor(v), create_graph=True)
    hx, hw = mf.autograd.grad((g * mf.tensor(u)).sum(), (x, w), allow_unused=True)
    assert hx is None or not np.any(hx._data)
    np.testing.assert_allclose(hw._data, (v * u).sum(0) / np.sqrt(rv + 1e-5), rtol=1e-12)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("relu", [False, True])
def test_conv_batch_norm_fused(training, relu):
    """Sequential's Conv2d + BatchNorm2d (+ ReLU), one node of the tape."""
    rng = np.random.default_rng(21)
    mf.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(2, 2, 2), nn.BatchNorm2d(2), *([nn.ReLU()] if relu else [])).double()
    m.train(training)
    with mf.no_grad():
        m[1].running_mean.copy_(_const(rng.standard_normal(2)))
        m[1].weight.copy_(_const(rng.standard_normal(2)))
    x = _t(rng, 2, 2, 3, 3)
    assert m(x).grad_fn.name() == ConvBatchNormFn.__name__ + "Backward"
    params = (m[0].weight, m[0].bias, m[1].weight, m[1].bias)
    assert gradgradcheck(lambda x, *ps: m(x), (x, *params))


# ---------------------------------------------------------------- third order

@pytest.mark.parametrize("op", ["log_softmax", "layer_norm", "cross_entropy"])
def test_third_derivative(op):
    """gradcheck of a Hessian-vector product taken with create_graph=True checks the third derivative."""
    rng = np.random.default_rng(22)
    f = {"log_softmax": lambda x: F.log_softmax(x, 1),
         "layer_norm": lambda x: F.layer_norm(x, (4,)),
         "cross_entropy": lambda x: F.cross_entropy(x, _const([1, 3, 0]), label_smoothing=0.1)}[op]
    x = _t(rng, 3, 4)
    out = f(x)
    v, u = mf.tensor(rng.standard_normal(tuple(out.shape))), mf.tensor(rng.standard_normal((3, 4)))

    def hvp(x):
        with mf.enable_grad():  # (also where gradcheck's differences call it under no_grad)
            (g,) = mf.autograd.grad(f(x), x, v, create_graph=True)
            (h,) = mf.autograd.grad((g * u).sum(), x, create_graph=True)
        return h
    assert gradcheck(hvp, (x,))
