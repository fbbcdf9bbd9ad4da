"""Higher-order gradients (``create_graph=True``): the walk that records itself, its hooks, retained grads, leaf
accumulation and errors, custom Functions, ``gradgradcheck`` and ``autograd.functional``'s second-order products,
against hand-derived float64 formulas and central differences."""
import numpy as np
import pytest

import minifused as mf
from minifused import autograd
from minifused.autograd import Function

F = autograd.functional


def leaf(values):
    return mf.tensor(np.asarray(values, dtype=np.float64), requires_grad=True)


def values(t):
    return t.detach().numpy()


X = [0.3, -0.7, 1.2]


def test_second_and_third_derivatives_match_the_formulas():
    x = leaf(X)
    xv = np.array(X)
    t, e = np.tanh(xv), np.exp(xv)
    (g,) = autograd.grad((mf.tanh(x) * x.exp()).sum(), x, create_graph=True)
    assert g.requires_grad and g.grad_fn is not None
    np.testing.assert_allclose(values(g), (1 - t * t) * e + t * e, rtol=1e-12)
    (h,) = autograd.grad(g.sum(), x, create_graph=True)
    np.testing.assert_allclose(values(h), -2 * t * (1 - t * t) * e + 2 * (1 - t * t) * e + t * e, rtol=1e-12)
    (third,) = autograd.grad((x * x * x * x).sum(), x, create_graph=True)
    for _ in range(2):
        (third,) = autograd.grad(third.sum(), x, create_graph=True)
    np.testing.assert_allclose(values(third), 24 * xv, rtol=1e-12)


def test_backward_with_create_graph_leaves_a_grad_that_differentiates():
    x = leaf(X)
    xv = np.array(X)
    (x * x * x).sum().backward(create_graph=True)
    assert x.grad.grad_fn is not None
    np.testing.assert_allclose(values(x.grad), 3 * xv ** 2, rtol=1e-12)
    first = x.grad
    (x * x * x).sum().backward(create_graph=True)  # accumulates out of place: a new tensor with a graph
    assert x.grad is not first and x.grad.grad_fn is not None
    np.testing.assert_allclose(values(x.grad), 6 * xv ** 2, rtol=1e-12)
    np.testing.assert_allclose(values(first), 3 * xv ** 2, rtol=1e-12)
    x.grad.sum().backward()  # d/dx of 6x^2 summed, added into .grad
    np.testing.assert_allclose(values(x.grad), 6 * xv ** 2 + 12 * xv, rtol=1e-12)


def test_backward_with_create_graph_and_inputs_gives_only_those_grads():
    x, w = leaf(X), leaf([2.0, 0.5, -1.0])
    (w * x * x).sum().backward(create_graph=True, inputs=[x])
    assert w.grad is None
    np.testing.assert_allclose(values(x.grad), 2 * np.array([2.0, 0.5, -1.0]) * np.array(X), rtol=1e-12)
    (gw,) = autograd.grad(x.grad.sum(), w)  # d/dw of 2 w x
    np.testing.assert_allclose(gw.numpy(), 2 * np.array(X), rtol=1e-12)


def test_gradient_penalty_weight_gradient_matches_finite_differences():
    """A WGAN-GP style penalty on a tiny tanh network: the gradient of (|d critic / d x| - 1)^2 with respect to the
    weights, against central differences of the penalty itself."""
    rng = np.random.default_rng(0)
    xv, w1v, w2v = rng.standard_normal((4, 3)), rng.standard_normal((3, 5)), rng.standard_normal((5, 1))

    def penalty(w1, w2, create_graph=True):
        x = mf.tensor(xv, requires_grad=True)
        critic = (mf.tanh(x @ w1) @ w2).sum()
        (g,) = autograd.grad(critic, x, create_graph=create_graph)
        return (((g * g).sum(1) + 1e-12).log().mul(0.5).exp().sub(1) ** 2).mean()

    w1, w2 = mf.tensor(w1v, requires_grad=True), mf.tensor(w2v, requires_grad=True)
    penalty(w1, w2).backward()
    eps = 1e-6
    for w, wv, other in ((w1, w1v, w2v), (w2, w2v, w1v)):
        numeric = np.zeros_like(wv)
        for i in np.ndindex(wv.shape):
            vals = []
            for step in (eps, -eps):
                moved = wv.copy()
                moved[i] += step
                args = (moved, other) if w is w1 else (other, moved)
                vals.append(penalty(*(mf.tensor(a) for a in args), create_graph=False).item())
            numeric[i] = (vals[0] - vals[1]) / (2 * eps)
        np.testing.assert_allclose(w.grad.numpy(), numeric, rtol=1e-6, atol=1e-8)


def test_hooks_and_retained_grads_see_gradient_tensors():
    x = leaf(X)
    h = x * x
    h.retain_grad()
    seen = []
    h.register_hook(lambda g: seen.append(g) or g * 2)
    (g,) = autograd.grad((h * h).sum(), x, create_graph=True)
    assert len(seen) == 1 and isinstance(seen[0], mf.Tensor)
    xv = np.array(X)
    np.testing.assert_allclose(values(g), 2 * (2 * xv ** 2) * 2 * xv, rtol=1e-12)  # the hook doubled dL/dh
    (gg,) = autograd.grad(g.sum(), x)  # the hook fires again where the second walk passes h (as PyTorch's)
    assert len(seen) == 2
    np.testing.assert_allclose(gg.numpy(), 40 * xv ** 2, rtol=1e-12)


def test_grad_with_respect_to_a_non_leaf_and_a_grad_output_that_requires_grad():
    x = leaf(X)
    h = x.exp()
    v = leaf([1.0, 2.0, 3.0])
    (gh,) = autograd.grad((h * h).sum(), h, create_graph=True)  # 2h
    np.testing.assert_allclose(values(gh), 2 * np.exp(X), rtol=1e-12)
    (gx,) = autograd.grad(gh.sum(), x)
    np.testing.assert_allclose(gx.numpy(), 2 * np.exp(X), rtol=1e-12)
    (g,) = autograd.grad(x.exp(), x, grad_outputs=v, create_graph=True)  # v e^x: differentiates in v too
    (gv,) = autograd.grad(g.sum(), v)
    np.testing.assert_allclose(gv.numpy(), np.exp(X), rtol=1e-12)


class _ArrayOp(Function):
    """An op on arrays with a backward but no backward_graph."""
    on_arrays = True

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        return 2 * g * ctx.saved_tensors[0]


def test_an_op_without_backward_graph_raises_and_changes_nothing():
    x = leaf(X)
    y = _ArrayOp.apply(x).sum()
    with pytest.raises(NotImplementedError, match="_ArrayOp: differentiating its gradient"):
        y.backward(create_graph=True)
    assert x.grad is None
    y.backward()  # the first-order gradient still works
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.array(X))


class _Cube(Function):
    """A user's custom Function on tensors: its backward, written with tensor ops, differentiates again."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x


def test_custom_function_backward_is_recorded_under_create_graph():
    x = leaf(X)
    (g,) = autograd.grad(_Cube.apply(x).sum(), x, create_graph=True)
    (h,) = autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), 6 * np.array(X), rtol=1e-12)


def test_a_freed_graph_cannot_be_differentiated_again():
    x = leaf(X)
    (g,) = autograd.grad(x.exp().sum(), x, create_graph=True, retain_graph=False)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        autograd.grad(g.sum(), x)


def test_gradgradcheck_passes_and_catches_a_wrong_second_derivative():
    rng = np.random.default_rng(1)
    a = mf.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    b = mf.tensor(rng.standard_normal(4), requires_grad=True)
    assert autograd.gradgradcheck(lambda a, b: (mf.tanh(a * b) / (b.exp() + 1) - a.sigmoid()).sum(1), (a, b))

    class WrongSecond(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2 * x.detach()  # right values, but a gradient whose own derivative misses x

    assert autograd.gradcheck(WrongSecond.apply, (a,))
    assert not autograd.gradgradcheck(WrongSecond.apply, (a,), raise_exception=False)


def test_functional_second_order_products():
    xv, vv = np.array(X), np.array([0.5, -1.0, 2.0])
    x, v = leaf(X), mf.tensor(vv)
    f = lambda a: (a.exp() * a).sum()  # noqa: E731 - d2/da2 = (a + 2) e^a on the diagonal
    diag = (xv + 2) * np.exp(xv)
    np.testing.assert_allclose(F.hessian(f, x).numpy(), np.diag(diag), rtol=1e-12)
    for fn in (F.hvp, F.vhp):
        value, product = fn(f, x, v)
        np.testing.assert_allclose(value.item(), (np.exp(xv) * xv).sum(), rtol=1e-12)
        np.testing.assert_allclose(product.numpy(), diag * vv, rtol=1e-12)
    two = F.hessian(lambda a, b: (a * a * b).sum(), (x, v))
    np.testing.assert_allclose(two[0][1].numpy(), np.diag(2 * xv), rtol=1e-12)
    np.testing.assert_allclose(two[1][1].numpy(), np.zeros((3, 3)))
    _, jv = F.jvp(lambda a: a.exp() * 2, x, v, create_graph=True)
    np.testing.assert_allclose(values(jv), 2 * np.exp(xv) * vv, rtol=1e-12)
    (gx,) = autograd.grad(jv.sum(), x)  # the product has a graph of its own
    np.testing.assert_allclose(gx.numpy(), 2 * np.exp(xv) * vv, rtol=1e-12)
    with pytest.raises(RuntimeError, match="should contain a single element"):
        F.hessian(lambda a: a * 2, x)


def test_func_transforms_nest():
    from minifused import func

    xv = np.array(X)
    f = lambda a: (a.exp() * a).sum()  # noqa: E731
    x = mf.tensor(xv)
    np.testing.assert_allclose(func.grad(lambda a: func.grad(f)(a).sum())(x).numpy(), (xv + 2) * np.exp(xv),
                               rtol=1e-12)
    np.testing.assert_allclose(func.hessian(f)(x).numpy(), np.diag((xv + 2) * np.exp(xv)), rtol=1e-12)
    # a MAML-style inner step on a parameter that requires grad: the outer gradient has the second-order term
    w = leaf(X)
    inner = func.grad(lambda p: (p * p * p).sum())(w)  # 3 w^2, differentiable in w
    adapted = w - 0.1 * inner
    (adapted * adapted).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * (xv - 0.3 * xv ** 2) * (1 - 0.6 * xv), rtol=1e-12)


def test_in_place_writes_through_views_and_running_sums_differentiate_twice():
    rng = np.random.default_rng(2)
    x = mf.tensor(rng.standard_normal((3, 4)), requires_grad=True)

    def written(x):
        y = x * 1.5 + 0.2
        y.t().mul_(y.t() * 0 + 2)  # through a transposed view
        y[1].mul_(x[0])
        y.view(-1)[2:7].mul_(x.view(-1)[:5].sin())  # through a reshaped, sliced view
        return y * x

    assert autograd.gradgradcheck(written, (x,))
    assert autograd.gradgradcheck(lambda x: (x.cumsum(1) ** 2).cumsum(0), (x,))


def test_a_zero_dimensional_output_as_its_gradient_formula_uses_it():
    v = leaf(0.4)
    (g,) = autograd.grad(v.exp() * v, v, create_graph=True)
    (h,) = autograd.grad(g, v)
    np.testing.assert_allclose(h.item(), (0.4 + 2) * np.exp(0.4), rtol=1e-12)


def test_module_backward_hooks_fills_and_checkpoints_differentiate_twice():
    from minifused.utils.checkpoint import checkpoint

    rng = np.random.default_rng(3)
    lin = mf.nn.Linear(3, 4).double()
    seen = []
    lin.register_full_backward_hook(lambda m, gin, gout: seen.append(gout[0].requires_grad))
    x = mf.tensor(rng.standard_normal((2, 3)), requires_grad=True)

    def plain(x):
        return (mf.tanh(lin(x)) * x.sum(1, keepdim=True)).sum()

    def checkpointed(x):
        return checkpoint(lambda a: mf.tanh(lin(a)) * a.sum(1, keepdim=True), x, use_reentrant=False).sum()

    firsts = [autograd.grad(f(x), x, create_graph=True)[0] for f in (plain, checkpointed)]
    assert seen and all(seen)  # the hook saw gradient tensors with a graph
    seconds = [autograd.grad((g * g).sum(), [x, lin.weight]) for g in firsts]
    for a, b in zip(*seconds):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)
    assert autograd.gradgradcheck(plain, (x,))

    v = leaf(0.5)

    def filled(x):
        y = x * x
        y[1:].fill_(v * v)  # a recorded fill: x's old values get no gradient, v the written ones'
        return (y * x).sum()

    xv = np.array(X)
    y0 = leaf(X)
    (g,) = autograd.grad(filled(y0), y0, create_graph=True)
    np.testing.assert_allclose(values(g), [3 * xv[0] ** 2, 0.25, 0.25], rtol=1e-12)
    np.testing.assert_allclose(autograd.grad(g.sum(), v)[0].item(), 2.0, rtol=1e-12)


def test_the_graph_walk_computes_only_the_gradients_asked_for():
    seen = []

    class Scale(Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return x * w

        @staticmethod
        def backward(ctx, g):
            seen.append(tuple(ctx.needs_input_grad))
            x, w = ctx.saved_tensors
            return g * w, (g * x).sum() if ctx.needs_input_grad[1] else None

    x, w = leaf(X), leaf(2.0)
    (g,) = autograd.grad(Scale.apply(x * x, w).sum(), x, create_graph=True)
    assert seen == [(True, False)]  # w requires grad, but its gradient leads nowhere asked for
    np.testing.assert_allclose(values(g), 4 * np.array(X), rtol=1e-12)
    (gw,) = autograd.grad(g.sum(), w)  # the gradient still differentiates in w
    np.testing.assert_allclose(gw.item(), 2 * np.sum(X), rtol=1e-12)
    assert Scale.apply(x, w).requires_grad and seen[-1] == (True, False)


@pytest.mark.parametrize("fn", [mf.relu, mf.abs, lambda t: mf.nn.functional.leaky_relu(t, 0.1),
                                mf.nn.functional.hardtanh, lambda t: mf.relu(t.clone()).relu_()])
def test_piecewise_linear_gradients_differentiate_to_zeros(fn):
    """As PyTorch's: the gradient of relu, abs, leaky_relu or hardtanh reaches x in the graph, and its own
    gradient is zeros (not an error that nothing requires grad)."""
    x = leaf([0.5, -1.0, 2.0])
    (g,) = autograd.grad(fn(x).sum(), x, create_graph=True)
    assert g.requires_grad
    np.testing.assert_array_equal(autograd.grad(g.sum(), x)[0].numpy(), np.zeros(3))


def test_func_jvp_and_jacfwd_by_reverse_mode_twice():
    from minifused import func

    xv, tv = np.array(X), np.array([1.0, -2.0, 0.5])
    x, t = mf.tensor(xv), mf.tensor(tv)
    value, product = func.jvp(lambda a: a.exp() * a, (x,), (t,))
    np.testing.assert_allclose(value.numpy(), np.exp(xv) * xv, rtol=1e-12)
    np.testing.assert_allclose(product.numpy(), (xv + 1) * np.exp(xv) * tv, rtol=1e-12)
    _, (p1, p2) = func.jvp(lambda a, b: ((a * b).sum(), a * 2), (x, t), (t, x * 0))
    np.testing.assert_allclose(p1.item(), (tv * tv).sum(), rtol=1e-12)
    np.testing.assert_allclose(p2.numpy(), 2 * tv, rtol=1e-12)
    _, hvp = func.jvp(func.grad(lambda a: (a * a * a).sum()), (x,), (t,))  # forward-over-reverse
    np.testing.assert_allclose(hvp.numpy(), 6 * xv * tv, rtol=1e-12)
    np.testing.assert_allclose(func.jacfwd(lambda a: a.sin())(x).numpy(), np.diag(np.cos(xv)), rtol=1e-12)
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
        func.jvp(lambda a: a, x, (t,))
    with pytest.raises(RuntimeError, match="tangent must be a tensor of its primal's size"):
        func.jvp(lambda a: a, (x,), (mf.ones(2),))
