"""Higher-order gradients where random programs of MLP/CNN ops, compared with PyTorch's double backward, found
minifused apart: the fused convolution + BatchNorm under a walk that frees the graph, the losses' ignored rows and
the fused ReLU masks against an inf or NaN upstream gradient, and the gradients PyTorch's graph ties to a
piecewise-linear op's input (fused ReLU epilogues, max pooling, the 1-norm), whose derivative is zero rather than an
error that nothing requires grad. Values against central differences, hand-derived formulas or the unfused ops."""
import numpy as np
import pytest

import minifused as mf
from minifused import autograd

F = mf.nn.functional


def tensor(a, requires_grad=False):
    return mf.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


def conv_bn(seed, relu=False, train=True):
    mf.manual_seed(seed)
    layers = [mf.nn.Conv2d(2, 3, 2, bias=False), mf.nn.BatchNorm2d(3)] + ([mf.nn.ReLU()] if relu else [])
    model = mf.nn.Sequential(*layers).double().train(train)
    with mf.no_grad():  # batch-norm affine parameters away from 1 and 0
        model[1].weight.copy_(tensor([1.3, 0.7, -0.9]))
        model[1].bias.copy_(tensor([0.2, -0.4, 0.1]))
    return model


def unfused(model, x):
    """The fused Sequential's function, with the convolution and BatchNorm as separate ops."""
    conv, bn = model[0], model[1]
    y = F.conv2d(x, conv.weight)
    y = F.batch_norm(y, None, None, bn.weight, bn.bias, training=True)
    return y.relu() if len(model) > 2 else y


X4 = np.random.default_rng(0).standard_normal((2, 2, 4, 4))


def penalty(model, xv, create_graph=True):
    """A gradient penalty: the loss plus the squared gradient of the loss with respect to the input."""
    x = tensor(xv, True)
    y = model(x)
    loss = (y * y.sin()).sum()
    (gx,) = autograd.grad(loss, x, create_graph=create_graph)
    return loss + (gx * gx).sum(), y


def test_fused_conv_batch_norm_gradient_penalty_backward_matches_central_differences():
    model = conv_bn(0)
    total, y = penalty(model, X4)
    assert y.grad_fn.name() == "ConvBatchNormFnBackward"  # the fused op
    total.backward()  # frees the graph as it walks: the convolution's node and the fused one apart
    w = model[0].weight
    analytic, wv = w.grad.numpy().copy(), w.detach().numpy().copy()
    numeric, eps = np.zeros_like(wv), 1e-6
    for i in np.ndindex(wv.shape):
        values = []
        for step in (eps, -eps):
            moved = wv.copy()
            moved[i] += step
            with mf.no_grad():
                w.copy_(tensor(moved))
            values.append(penalty(model, X4, create_graph=False)[0].item())
        numeric[i] = (values[0] - values[1]) / (2 * eps)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("relu", [False, True])
def test_fused_conv_batch_norm_third_derivative_matches_the_unfused_ops(relu):
    model = conv_bn(1, relu)
    u = np.random.default_rng(1).standard_normal(X4.shape)
    results = []
    for fn in (model, lambda x: unfused(model, x)):
        x = tensor(X4, True)
        y = fn(x)
        (g,) = autograd.grad((y * y.tanh()).sum(), x, create_graph=True)
        (h,) = autograd.grad((g * tensor(u)).sum(), x, create_graph=True)
        (third,) = autograd.grad((h * h).sum(), x)  # without retain_graph: frees each node it passes
        results.append([g.detach().numpy(), h.detach().numpy(), third.numpy()])
    assert model(tensor(X4, True)).grad_fn.name() == "ConvBatchNormFnBackward"
    for fused, plain in zip(*results):
        np.testing.assert_allclose(fused, plain, rtol=1e-9, atol=1e-9)


LOGITS = np.random.default_rng(2).standard_normal((3, 4))
TARGETS = np.array([1, 0, 2])  # the row of target 0 is ignored (ignore_index=0)
LOSSES = {
    "cross_entropy": lambda x, r: F.cross_entropy(x, mf.tensor(TARGETS), ignore_index=0, reduction=r),
    "cross_entropy smoothed": lambda x, r: F.cross_entropy(x, mf.tensor(TARGETS), ignore_index=0, reduction=r,
                                                           label_smoothing=0.1),
    "nll_loss": lambda x, r: F.nll_loss(x, mf.tensor(TARGETS), ignore_index=0, reduction=r),
}


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_a_nan_upstream_gradient_leaves_what_the_loss_cuts_zero(name, reduction):
    """backward's gradient selects: the ignored row (and NLL's columns other than the target) get 0, not NaN * 0."""
    loss = LOSSES[name]
    x = tensor(LOGITS, True)
    y = loss(x, reduction)
    nan = mf.full(tuple(y.shape), float("nan"), dtype=mf.float64)
    (plain,) = autograd.grad(y, x, nan)
    (graph,) = autograd.grad(loss(x, reduction), x, nan, create_graph=True)
    np.testing.assert_array_equal(np.isnan(graph.detach().numpy()), np.isnan(plain.numpy()))
    assert not graph.detach().numpy()[1].any()  # the ignored row
    if name == "nll_loss":  # NaN at the kept rows' targets alone
        at_targets = np.eye(4, dtype=bool)[TARGETS] & (TARGETS != 0)[:, None]
        np.testing.assert_array_equal(np.isnan(graph.detach().numpy()), at_targets)


def test_all_targets_ignored_gives_zero_gradients_of_every_order():
    """A mean over no target is NaN (as PyTorch's), and silu's gradient there too; the logits' gradient and its
    own gradient are 0 all the same, as PyTorch's double backward gives."""
    x = tensor(LOGITS, True)
    y = F.silu(F.cross_entropy(x, mf.zeros(3, dtype=mf.int64), ignore_index=0))
    assert np.isnan(y.item())
    (g,) = autograd.grad(y, x, create_graph=True)
    np.testing.assert_array_equal(g.detach().numpy(), np.zeros((3, 4)))
    (h,) = autograd.grad((g * tensor(LOGITS)).sum(), x)
    np.testing.assert_array_equal(h.numpy(), np.zeros((3, 4)))


def _relu_layers(kind, seed=3):
    mf.manual_seed(seed)
    if kind == "linear":
        x = np.random.default_rng(seed).standard_normal((5, 3))
        return mf.nn.Sequential(mf.nn.Linear(3, 4), mf.nn.ReLU()).double(), x
    layers = [mf.nn.Conv2d(2, 3, 2)] + ([mf.nn.BatchNorm2d(3)] if kind.startswith("conv_bn") else []) + [mf.nn.ReLU()]
    model = mf.nn.Sequential(*layers).double().train(kind != "conv_bn eval")
    if kind == "conv_bn eval":
        model[1].running_mean.copy_(tensor([0.1, -0.2, 0.3]))
        model[1].running_var.copy_(tensor([0.5, 1.5, 2.0]))
    return model, X4


def _separately(model, x):
    """The Sequential's layers called one by one (no fusion)."""
    for layer in model:
        x = layer(x)
    return x


@pytest.mark.parametrize("kind", ["linear", "conv", "conv_bn train", "conv_bn eval"])
def test_fused_relu_gradients_differentiate_as_the_separate_relus(kind):
    """A ReLU fused into the layer before it: its gradients require grad as the separate relu's do (tied to the
    inputs), the second derivative of the sum of the bias's gradient is zeros (not None, not an error), and the
    values of both orders equal the separate ops'."""
    model, xv = _relu_layers(kind)
    v = np.random.default_rng(4).standard_normal(tuple(_separately(model, tensor(xv)).shape))
    results = []
    for fn in (model, lambda x: _separately(model, x)):
        x = tensor(xv, True)
        leaves = [x] + list(model.parameters())
        gs = autograd.grad(fn(x), leaves, tensor(v), create_graph=True)
        assert all(g.requires_grad for g in gs)
        hs = autograd.grad(sum((g * g).sum() for g in gs), leaves, allow_unused=True)
        assert all(h is not None for h in hs)
        results.append([g.detach().numpy() for g in gs] + [h.numpy() for h in hs])
    for fused, plain in zip(*results):
        np.testing.assert_allclose(fused, plain, rtol=1e-10, atol=1e-12)
    (gb,) = autograd.grad(model(tensor(xv, True)), model[0].bias, tensor(v), create_graph=True)
    (second,) = autograd.grad(gb.sum(), model[0].bias)  # the bias's gradient is constant in the bias
    np.testing.assert_array_equal(second.numpy(), np.zeros(gb.shape))


@pytest.mark.parametrize("kind", ["linear", "conv", "conv_bn train"])
def test_fused_relu_mask_selects_a_nan_upstream_gradient_under_create_graph(kind):
    """Where the fused ReLU cuts, a NaN upstream gradient is cut too (as the separate relu's, and the
    convolution's and Linear's own backward): NaN * 0 would leak it into every gradient below."""
    model, xv = _relu_layers(kind)
    out = model(tensor(xv)).numpy()
    v = np.ones(out.shape)
    v[tuple(np.argwhere(out <= 0)[0])] = np.nan  # at an element the ReLU cuts
    grads = []
    for fn in (model, lambda x: _separately(model, x)):
        x = tensor(xv, True)
        (g,) = autograd.grad(fn(x), x, tensor(v), create_graph=True)
        grads.append(g.detach().numpy())
    assert not np.isnan(grads[0]).any()
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-10, atol=1e-12)


PIECEWISE_LINEAR = {
    "max_pool2d": lambda x: F.max_pool2d(x, 2),
    "max_pool2d stride 1": lambda x: F.max_pool2d(x, 3, 1, 1),
    "adaptive_max_pool2d": lambda x: F.adaptive_max_pool2d(x, (3, 2)),
    "norm p=1": lambda x: x.norm(p=1, dim=(2, 3)),
    "vector_norm ord=1": lambda x: mf.linalg.vector_norm(x, 1),
}


@pytest.mark.parametrize("name", sorted(PIECEWISE_LINEAR))
def test_piecewise_linear_gradient_is_tied_to_the_input(name):
    """Like relu's and abs's: the first gradient depends on x only through a constant selection or sign, yet it
    requires grad (PyTorch's reaches x), so differentiating it again gives zeros rather than raising."""
    fn = PIECEWISE_LINEAR[name]
    x = tensor(X4, True)
    y = fn(x)
    v = tensor(np.random.default_rng(5).standard_normal(tuple(y.shape)))
    (g,) = autograd.grad(y, x, v, create_graph=True)
    assert g.requires_grad
    (h,) = autograd.grad((g * g).sum(), x)
    np.testing.assert_array_equal(h.numpy(), np.zeros(X4.shape))
    (plain,) = autograd.grad(fn(x), x, v)
    np.testing.assert_array_equal(g.detach().numpy(), plain.numpy())
    assert autograd.gradgradcheck(lambda a: fn(a) * fn(a), (x,))


def _written(kind):
    def write(x):
        y = x * 1.0
        if kind == "mask":
            y[y.detach() > 0.3] = 0.25
        elif kind == "index":
            y[mf.tensor([0, 2])] = 0.25
        else:
            y[:, 1:3] = x[:, :2] * 2
        return y
    return write


SELECTING = {
    "setitem mask": _written("mask"),
    "setitem index": _written("index"),
    "setitem slice": _written("slice"),
    "masked_fill": lambda x: x.masked_fill(x.detach() > 0, 0.5),
    "index_fill": lambda x: x.index_fill(1, mf.tensor([0, 2]), 0.5),
    "masked_scatter": lambda x: x.masked_scatter(x.detach() > 0, x * 2),
    "tril": lambda x: x.tril(),
    "triu": lambda x: mf.triu(x, 1),
    "max dim": lambda x: x.max(1).values,
    "min dim keepdim": lambda x: x.min(0, keepdim=True).values,
    "median dim": lambda x: x.median(1).values,
    "index_copy": lambda x: x.index_copy(0, mf.tensor([1]), x[:1] * 2),
    "index_put": lambda x: x.index_put((mf.tensor([0, 2]),), x[1] * 2),
    "select_scatter": lambda x: mf.select_scatter(x, x[0] * 2, 0, 1),
}


@pytest.mark.parametrize("name", sorted(SELECTING))
def test_a_nan_upstream_gradient_is_cut_where_the_op_cuts_it_under_create_graph(name):
    """These ops' backward writes 0 (or selects) where no gradient goes; the recorded gradient does the same, so a
    NaN or inf upstream there stays out, as backward's and PyTorch's (NaN * 0 would let it in)."""
    fn = SELECTING[name]
    x = tensor(LOGITS, True)
    v = np.ones(tuple(fn(x).shape))
    v.reshape(-1)[::2] = np.nan
    (plain,) = autograd.grad(fn(x), x, tensor(v))
    (graph,) = autograd.grad(fn(x), x, tensor(v), create_graph=True)
    assert np.isnan(plain.numpy()).sum() < plain.numpy().size  # some NaN was cut
    np.testing.assert_array_equal(graph.detach().numpy(), plain.numpy())
    assert autograd.gradgradcheck(lambda a: fn(a) * fn(a), (x,))
