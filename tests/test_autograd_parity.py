"""The tape's API as PyTorch's: custom Functions' saved tensors version-checked (views and closed-over tensors
too), their non-tensor outputs and arguments; grad mode off during the backward walk; anomaly mode checking only
the backward's gradients for NaN; ``autograd.grad``'s signature; the walk pruned to the requested inputs; what
``F.linear`` checks against in-place changes; tensor and post-accumulate hooks' results; the second-order API."""
import importlib
import warnings

import numpy as np
import pytest

import minifused as mf
from minifused import autograd
from tolerances import cpu


def leaf(values):
    return cpu(np.asarray(values, np.float64), requires_grad=True)


def _saving(save, backward):
    """A custom Function computing ``x @ w`` that saves ``save(ctx, x, w)`` and differentiates with ``backward``."""
    class F(mf.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(*save(x, w))
            return x @ w

        @staticmethod
        def backward(ctx, g):
            return backward(g, *ctx.saved_tensors), None

    return F


# ---------------------------------------------------------------- 1. custom Functions' saved tensors
@pytest.mark.parametrize("save", [lambda x, w: (w.t(),), lambda x, w: (w.view(2, 2).t(),),
                                  lambda x, w: (w[:].t(),), lambda x, w: (w.unsqueeze(0)[0].t(),)])
def test_custom_function_saving_a_view_is_version_checked(save):
    w = cpu(np.array([[1.0, 2.0], [3.0, 4.0]]))
    F = _saving(save, lambda g, wt: g @ wt)
    x = leaf([[1.0, 1.0]])
    F.apply(x, w).sum().backward()  # unchanged: dL/dx = 1 @ w.T
    np.testing.assert_allclose(x.grad.numpy(), np.ones((1, 2)) @ w.numpy().T)
    y = F.apply(leaf([[1.0, 1.0]]), w)
    with mf.no_grad():
        w.mul_(10)  # an optimizer step before the backward: the saved view sees it
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()


def test_custom_function_saving_a_closed_over_tensor_is_version_checked():
    """A tensor that is neither input nor output: an intermediate (untouched: its gradient is right) or one the
    forward closes over (changed before the backward: refused)."""
    class Sin(mf.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a.cos())
            return a.sin()

        @staticmethod
        def backward(ctx, g):
            cos, = ctx.saved_tensors
            return g * cos

    values = np.array([0.3, -1.2, 2.0])
    x = leaf(values)
    Sin.apply(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.cos(values), rtol=1e-14)
    w = cpu(np.array([[1.0, 2.0], [3.0, 4.0]]))

    class F(mf.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(w)
            return x @ w

        @staticmethod
        def backward(ctx, g):
            saved, = ctx.saved_tensors
            return g @ saved.t()

    y = F.apply(leaf([[1.0, 1.0]]))
    with mf.no_grad():
        w.mul_(10)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()


def test_custom_function_saving_a_view_of_its_output_sees_a_change_of_the_output():
    class F(mf.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            out = a * a
            ctx.save_for_backward(out.view(2, 2))
            return out

        @staticmethod
        def backward(ctx, g):
            out, = ctx.saved_tensors
            return g * out.reshape(4)

    y = F.apply(leaf([0.5, -1.0, 2.0, 1.5]))
    y.mul_(-3)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        (y * 1).sum().backward()


# ---------------------------------------------------------------- 7. custom Functions' outputs and arguments
def test_custom_function_passes_non_tensor_outputs_through():
    seen = []

    class F(mf.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2, 5, None

        @staticmethod
        def backward(ctx, g, g_int, g_none):
            seen.append((g_int, g_none))
            return g * 2

    x = leaf([1.0, 3.0])
    b, n, none = F.apply(x)
    assert n == 5 and none is None and b.requires_grad
    (b * cpu(np.array([1.0, 10.0]))).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 20.0])
    assert seen == [(None, None)]


def test_custom_function_returning_a_list_or_a_number_returns_it_as_it_is():
    class F(mf.autograd.Function):
        @staticmethod
        def forward(ctx, a, kind):
            return [a * 2, a * 3] if kind == "list" else 7

        @staticmethod
        def backward(ctx, g):
            return g, None

    x = leaf([1.0, 2.0])
    out = F.apply(x, "list")
    assert type(out) is list and not any(t.requires_grad for t in out)
    np.testing.assert_allclose(out[1].numpy(), [3.0, 6.0])
    assert F.apply(x, "number") == 7


def test_custom_function_gradient_for_a_non_tensor_argument_raises():
    class F(mf.autograd.Function):
        @staticmethod
        def forward(ctx, a, k):
            return a * k

        @staticmethod
        def backward(ctx, g):
            return g * 3, g.sum()

    with pytest.raises(RuntimeError, match="different than None at position 2, but the corresponding forward input "
                                           "was not a Variable"):
        F.apply(leaf([1.0, 2.0]), 3.0).sum().backward()


def test_custom_function_save_for_backward_refuses_a_number():
    class F(mf.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a, None, 3.0)
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    with pytest.raises(TypeError, match="save_for_backward can only save variables, but argument 2 is of type float"):
        F.apply(leaf([1.0]))


def test_custom_function_saving_nothing_runs_backward_twice():
    class Scale(mf.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.k = 3.0
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k

    x = leaf([1.0, 2.0])
    y = Scale.apply(x)
    y.backward(cpu(np.ones(2)))
    y.backward(cpu(np.array([1.0, 2.0])))
    np.testing.assert_allclose(x.grad.numpy(), [3.0 + 3.0, 3.0 + 6.0])

    class Saving(Scale):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            ctx.k = 3.0
            return a * 2

        @staticmethod
        def backward(ctx, g):
            a, = ctx.saved_tensors
            return g * a

    y = Saving.apply(leaf([1.0, 2.0]))
    y.backward(cpu(np.ones(2)))
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward(cpu(np.ones(2)))


# ---------------------------------------------------------------- 2. grad mode off in the walk
def test_post_accumulate_hook_may_update_its_parameter_in_place():
    m = mf.nn.Linear(2, 2, device="cpu")
    with mf.no_grad():
        m.weight.fill_(0.5)
        m.bias.fill_(0.1)

    def sgd(p):  # optimizer-in-backward, without no_grad()
        p.add_(p.grad, alpha=-0.1)
        p.grad = None

    for p in m.parameters():
        p.register_post_accumulate_grad_hook(sgd)
    m(cpu(np.ones((1, 2), np.float32))).sum().backward()
    np.testing.assert_allclose(m.weight.detach().numpy(), np.full((2, 2), 0.5 - 0.1), rtol=1e-6)
    np.testing.assert_allclose(m.bias.detach().numpy(), np.zeros(2), atol=1e-7)
    assert m.weight.grad is None and mf.is_grad_enabled()


def test_hooks_and_callbacks_run_with_grad_mode_off():
    w = leaf([2.0, 2.0])
    seen = []

    def tensor_hook(g):
        seen.append(("tensor", mf.is_grad_enabled(), (g * w).requires_grad))
        autograd.queue_callback(lambda: seen.append(("callback", mf.is_grad_enabled())))

    x = leaf([1.0, 2.0])
    x.register_hook(tensor_hook)
    m = mf.nn.Linear(2, 1, device="cpu").double()
    m.register_full_backward_hook(lambda *a: seen.append(("module", mf.is_grad_enabled())))
    m(x * w).sum().backward()
    assert sorted(seen) == [("callback", False), ("module", False), ("tensor", False, False)]
    assert mf.is_grad_enabled()
    np.testing.assert_allclose(x.grad.numpy(), m.weight.detach().numpy()[0] * 2.0)


@pytest.mark.parametrize("create_graph", [False, True])
def test_a_leaf_frozen_after_its_graph_was_recorded_gets_no_grad(create_graph):
    # PyTorch's AccumulateGrad skips a leaf whose requires_grad was turned off; its post-accumulate hook still runs
    x, w = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    ran = []
    x.register_post_accumulate_grad_hook(lambda p: ran.append(p.grad))
    y = (x * x * w).sum()
    x.requires_grad_(False)
    y.backward(create_graph=create_graph)
    assert x.grad is None and ran == [None]
    np.testing.assert_allclose(w.grad.numpy(), [1.0, 4.0], rtol=1e-12)


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("on_leaf", [False, True])
def test_hooks_added_or_removed_by_a_hook_count_from_the_next_backward(on_leaf, create_graph):
    # PyTorch runs the hooks registered when the gradient arrived: the one the first hook removes still runs
    # (x3), the one it adds runs from the next backward on (x5)
    x = leaf([1.0, 2.0])
    t = x if on_leaf else x * 1
    handles, seen = [], []

    def first(g):
        seen.append("first")
        handles[1].remove()
        t.register_hook(lambda g: seen.append("added") or g * 5)

    handles.append(t.register_hook(first))
    handles.append(t.register_hook(lambda g: seen.append("removed") or g * 3))
    y = (t * t).sum()
    (g,) = autograd.grad(y, x, retain_graph=True, create_graph=create_graph)
    assert seen == ["first", "removed"]
    np.testing.assert_allclose(g.detach().numpy(), [6.0, 12.0], rtol=1e-12)
    (g,) = autograd.grad(y, x, create_graph=create_graph)
    assert seen == ["first", "removed", "first", "added"]
    np.testing.assert_allclose(g.detach().numpy(), [10.0, 20.0], rtol=1e-12)


# ---------------------------------------------------------------- 3. anomaly mode
def test_detect_anomaly_lets_infinities_through():
    values = np.array([0.5, -1.0, 2.0])
    x = leaf(values)
    with autograd.detect_anomaly():  # -inf in a mask, an infinite gradient (sqrt at 0): no anomaly
        y = x.masked_fill(cpu(np.array([True, False, False])), float("-inf")).softmax(0)
        y[1].backward()
        z = leaf([0.0, 1.0])
        z.sqrt().sum().backward()
    s = np.exp(values[1:]) / np.exp(values[1:]).sum()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, s[0] * (1 - s[0]), -s[0] * s[1]], rtol=1e-12)
    np.testing.assert_array_equal(z.grad.numpy(), [np.inf, 0.5])


def test_detect_anomaly_raises_on_nan_gradients_unless_check_nan_is_off():
    x = leaf([0.0, 1.0])
    with autograd.detect_anomaly(), np.errstate(invalid="ignore"):
        assert autograd.is_anomaly_enabled() and autograd.is_anomaly_check_nan_enabled()
        with pytest.raises(RuntimeError, match=r"Sqrt backward gradient for input 0 \(shape \(2,\)\) has NaN"):
            (x.sqrt() * 0).sum().backward()
    with autograd.detect_anomaly(check_nan=False), np.errstate(invalid="ignore"):
        assert autograd.is_anomaly_enabled() and not autograd.is_anomaly_check_nan_enabled()
        (x.sqrt() * 0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [np.nan, 0.0])
    assert not autograd.is_anomaly_enabled() and autograd.is_anomaly_check_nan_enabled()
    with autograd.set_detect_anomaly(True, check_nan=False):
        assert autograd.is_anomaly_enabled() and not autograd.is_anomaly_check_nan_enabled()
    assert not autograd.is_anomaly_enabled() and autograd.is_anomaly_check_nan_enabled()


# ---------------------------------------------------------------- 5. autograd.grad's signature
def test_backward_takes_any_iterable_of_tensors_and_of_inputs():
    # PyTorch's autograd.backward: tensors and inputs are a tensor or any iterable of tensors (a generator too)
    x, w = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    autograd.backward(y for y in [(x * w).sum(), (x * x).sum()])
    np.testing.assert_allclose(x.grad.numpy(), [5.0, 8.0], rtol=1e-12)
    (x * w).sum().backward(inputs=(t for t in [w]))
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 4.0], rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), [5.0, 8.0], rtol=1e-12)
    with pytest.raises(TypeError, match="expected tensors to differentiate, got float"):
        autograd.backward(3.0)
    with pytest.raises(TypeError, match="inputs must be tensors, got float"):
        (x * w).sum().backward(inputs=3.0)


def test_grad_takes_pytorchs_arguments():
    x, u = leaf([1.0, 2.0]), leaf([3.0])
    y = (x * x).sum()
    g, = autograd.grad(y, x, None, True, False, True, False, is_grads_batched=False)  # only_inputs is 6th
    np.testing.assert_allclose(g.numpy(), [2.0, 4.0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g, = autograd.grad(y, x, retain_graph=True, only_inputs=False)
    assert any(issubclass(w.category, FutureWarning) and "only_inputs" in str(w.message) for w in caught)
    gx, gu = autograd.grad(y, [x, u], retain_graph=True, materialize_grads=True)
    np.testing.assert_array_equal(gu.numpy(), [0.0])
    with pytest.raises(RuntimeError, match="is_grads_batched"):  # batched: grad_outputs must carry a batch dim
        autograd.grad(y, x, retain_graph=True, is_grads_batched=True)
    with pytest.raises(RuntimeError, match="cannot be empty"):
        autograd.grad(y, [], retain_graph=True)
    with pytest.raises(ValueError, match="allow_unused to be True or not passed when materialize_grads=True"):
        autograd.grad(y, [x, u], retain_graph=True, materialize_grads=True, allow_unused=False)


# ---------------------------------------------------------------- 6. the walk pruned to the inputs asked for
def test_backward_with_inputs_skips_hooks_and_retained_grads_off_their_path():
    x, w = leaf([1.0, 2.0]), leaf([0.5, -1.0])
    h = w * 2
    fired = []
    h.register_hook(lambda g: fired.append(1))
    h.retain_grad()
    (x * h).sum().backward(inputs=[x])
    np.testing.assert_allclose(x.grad.numpy(), [1.0, -2.0])
    assert fired == [] and h.grad is None and w.grad is None


def test_grad_runs_only_the_nodes_leading_to_its_inputs():
    x, w = leaf([1.0, 2.0]), leaf([0.5, -1.0])
    h = w.exp()
    fired = []
    h.register_hook(lambda g: fired.append(1))
    y = (x * h).sum()
    g, = autograd.grad(y, x)
    np.testing.assert_allclose(g.numpy(), np.exp([0.5, -1.0]), rtol=1e-14)
    assert fired == []
    h.sum().backward()  # the exp node did not run, so it was not freed
    np.testing.assert_allclose(w.grad.numpy(), np.exp([0.5, -1.0]), rtol=1e-14)


def test_grad_for_a_non_leaf_stops_there():
    x = leaf([1.0, 2.0])
    u = x * 2
    fired = []
    u.register_hook(lambda g: fired.append("u"))
    h = u.exp()
    h.register_hook(lambda g: fired.append("h"))
    y = (h * 3).sum()
    g, = autograd.grad(y, h, retain_graph=True)
    np.testing.assert_array_equal(g.numpy(), [3.0, 3.0])
    assert fired == ["h"]
    h.add_(1)  # h is now the add's output, which y does not depend on
    assert autograd.grad(y, h, allow_unused=True) == (None,)


def test_grad_fills_the_grad_of_a_retained_non_leaf_input():
    # PyTorch's retain_grad fills .grad in any walk: autograd.grad's own input too (added to what it held), once for
    # an input given twice; an input not retained keeps no .grad
    x = leaf([1.0, 2.0])
    h, u = x * 1, x * 2
    h.retain_grad()
    gh, gh2, gu = autograd.grad((h * h + u).sum(), [h, h, u], retain_graph=True)
    np.testing.assert_allclose(gh.numpy(), [2.0, 4.0], rtol=1e-12)
    np.testing.assert_allclose(h.grad.numpy(), [2.0, 4.0], rtol=1e-12)
    assert h.grad is not gh and not u.retains_grad and u._grad is None
    autograd.grad((h * 3).sum(), h)
    np.testing.assert_allclose(h.grad.numpy(), [5.0, 7.0], rtol=1e-12)
    np.testing.assert_allclose(gh.numpy(), [2.0, 4.0], rtol=1e-12)


@pytest.mark.parametrize("create_graph", [False, True])
def test_grad_for_a_non_leaf_whose_node_was_freed(create_graph):
    # PyTorch: the freed node that made the input is not walked through, so its gradient comes; a walk that needs
    # the freed node still raises
    x = leaf([1.0, 2.0])
    h = x.exp()
    autograd.grad((h * h).sum(), x)  # frees the exp node
    g, = autograd.grad((h ** 3).sum(), h, create_graph=create_graph)
    np.testing.assert_allclose(g.detach().numpy(), 3 * np.exp([2.0, 4.0]), rtol=1e-12)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        autograd.grad((h * 3).sum(), x, create_graph=create_graph)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        (h * 3).sum().backward(inputs=[x])


# ---------------------------------------------------------------- 8. F.linear's version checks
def test_linear_checks_only_the_operands_its_gradients_read():
    x = leaf(np.ones((2, 3)))
    h = x * 1
    out = mf.nn.functional.linear(h, cpu(np.full((2, 3), 0.5)))  # a frozen weight: x is not read by the backward
    h.add_(1)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((2, 3), 1.0))
    lin = mf.nn.Linear(3, 2, device="cpu").double()
    loss = lin(cpu(np.arange(6.0).reshape(2, 3))).sum()  # an input without grad: the weight is not read
    lin.load_state_dict({k: v.detach() * 2 for k, v in lin.state_dict().items()})
    loss.backward()
    np.testing.assert_allclose(lin.weight.grad.numpy(), np.tile(np.arange(6.0).reshape(2, 3).sum(0), (2, 1)))
    np.testing.assert_allclose(lin.bias.grad.numpy(), [2.0, 2.0])
    loss = lin(leaf(np.ones((1, 3)))).sum()  # now the weight is read (dX)
    lin.load_state_dict({k: v.detach() * 2 for k, v in lin.state_dict().items()})
    with pytest.raises(RuntimeError, match=r"last by load_state_dict\)"):
        loss.backward()


# ---------------------------------------------------------------- 9. the second-order API, jvp, module paths
def test_second_order_api_gives_the_analytic_values():
    x = leaf([1.0, 2.0])
    assert autograd.gradgradcheck(lambda a: a.sin(), (x,))
    F = autograd.functional
    np.testing.assert_allclose(F.hessian(lambda a: (a ** 3).sum(), x).numpy(), np.diag([6.0, 12.0]))
    v = leaf([0.5, -1.0])
    for name in ("hvp", "vhp"):
        value, product = getattr(F, name)(lambda a: (a ** 3).sum(), x, v)
        assert value.item() == 9.0
        np.testing.assert_allclose(product.numpy(), [3.0, -12.0])


def test_jvp_matches_the_analytic_product():
    a, b = np.array([0.1, -0.2, 0.3]), np.array([[0.5, 1.0], [2.0, -1.0]])
    va, vb = np.array([1.0, 2.0, 3.0]), np.array([[1.0, 0.0], [0.0, -1.0]])
    out, jv = autograd.functional.jvp(lambda p, q: (p * q.sum()).exp(), (cpu(a), cpu(b)), (cpu(va), cpu(vb)))
    s = b.sum()
    np.testing.assert_allclose(out.numpy(), np.exp(a * s), rtol=1e-14)
    np.testing.assert_allclose(jv.numpy(), np.exp(a * s) * (va * s + a * vb.sum()), rtol=1e-13)
    _, jv = autograd.functional.jvp(lambda p: p.sin(), cpu(np.array([0.3])))
    np.testing.assert_allclose(jv.numpy(), np.cos([0.3]), rtol=1e-14)


def test_grad_mode_and_anomaly_mode_modules():
    grad_mode = importlib.import_module("minifused.autograd.grad_mode")
    assert grad_mode.no_grad is mf.no_grad and autograd.grad_mode.enable_grad is mf.enable_grad
    with autograd.grad_mode.no_grad():
        assert not mf.is_grad_enabled()
    assert autograd.anomaly_mode.detect_anomaly is autograd.detect_anomaly


# ---------------------------------------------------------------- 10. hooks' results, backward's gradient
def test_tensor_hook_must_return_a_tensor_of_the_same_dtype_and_shape():
    cases = [(lambda g: g.to(mf.float32), RuntimeError, r"has changed the type of value \(was float64 got float32\)"),
             (lambda g: g[:1], RuntimeError, r"has changed the size of value \(was \(2,\) got \(1,\)\)"),
             (lambda g: 3.0, TypeError, "returned float"),
             (lambda g: g.numpy(), TypeError, "returned ndarray")]
    for hook, exc, words in cases:
        x = leaf([1.0, 2.0])
        x.register_hook(hook)
        with pytest.raises(exc, match=words):
            (x * 2).sum().backward()
        assert x.grad is None
    x = leaf([1.0, 2.0])
    x.register_hook(lambda g: g * 5)
    (x * 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [10.0, 10.0])


@pytest.mark.parametrize("gradient", [[1.0, 2.0], np.ones(2), 1.0])
def test_backward_gradient_must_be_a_tensor(gradient):
    x = leaf([1.0, 2.0])
    with pytest.raises(TypeError, match="gradients can be either Tensors or None"):
        (x * 2).backward(gradient)
    with pytest.raises(TypeError, match="gradients can be either Tensors or None"):
        autograd.grad([x * 2], [x], [gradient])
    assert x.grad is None


def test_post_accumulate_hook_returning_a_value_raises():
    x = leaf([1.0, 2.0])
    x.register_post_accumulate_grad_hook(lambda p: p.grad * 2)
    with pytest.raises(RuntimeError, match="post accumulate grad hooks should return None"):
        (x * 2).sum().backward()


@pytest.mark.parametrize("grad,want", [
    (lambda g: g * 3, [3.0, 3.0, 3.0]),  # (the input's shape)
    (lambda g: g.unsqueeze(0) * 3, [3.0, 3.0, 3.0]),  # (one the input broadcasts to: summed down to it)
    (lambda g: g.expand(2, 3), [2.0, 2.0, 2.0]),
    (lambda g: g.sum(), None),  # (any other shape: PyTorch's error, not a gradient broadcast into the graph)
    (lambda g: g[:2], None),
])
def test_custom_backward_gradient_shapes_as_pytorch_checks_them(grad, want):
    """A custom backward's gradient must have its input's shape or one that shape broadcasts to (then it is summed
    down); any other raises naming the Function, where it broadcast silently into a wrong gradient before."""
    from conftest import doubling_function

    Scale = doubling_function(grad, "Scale")
    x = mf.tensor([1.0, 2.0, 3.0], dtype=mf.float64, requires_grad=True)
    out = Scale.apply(x.exp()).sum()
    if want is None:
        with pytest.raises(RuntimeError, match=r"ScaleBackward returned an invalid gradient at index 0 - got "
                                               r"\[.*\] but expected shape compatible with \[3\]"):
            out.backward()
        return
    out.backward()
    np.testing.assert_allclose(x.grad.numpy(), np.array(want) * np.exp([1.0, 2.0, 3.0]), rtol=1e-12)
