"""More of the autograd API as PyTorch's: the grad-mode guards (what ``with ... as`` binds, ``clone``, argument
checks), anomaly mode's warning and error words, ``backward(create_graph=True)``'s warning, autograd.functional's
strict checks and strategies, custom Functions' ``mark_dirty`` and ``once_differentiable``, and checkpoint's
use_reentrant variants, keyword arguments and RNG state. References are float64 NumPy values, finite differences
or the documented PyTorch rule written beside each test."""
import warnings

import numpy as np
import pytest

import minifused as mf
from minifused import autograd
from minifused.autograd import functional as AF
from minifused.utils.checkpoint import checkpoint, checkpoint_sequential


def leaf(values, dtype=np.float64):
    return mf.tensor(np.asarray(values, dtype), requires_grad=True)


# ---------------------------------------------------------------- 1. grad-mode guards
@pytest.mark.parametrize("guard", [mf.no_grad, mf.enable_grad, lambda: mf.set_grad_enabled(False),
                                   mf.inference_mode, lambda: mf.inference_mode(False)])
def test_grad_mode_guards_bind_none_and_restore(guard):
    # PyTorch's guards return None from __enter__ (``with torch.no_grad() as g``: g is None)
    with guard() as bound:
        assert bound is None
    assert mf.is_grad_enabled()


def test_set_grad_enabled_refuses_non_bools():
    # PyTorch: set_grad_enabled(0) / ("yes") is a TypeError, not a truth value
    for bad in (0, 1, "yes", None):
        with pytest.raises(TypeError, match="set_grad_enabled.*must be bool, not"):
            mf.set_grad_enabled(bad)
    assert mf.is_grad_enabled()


def test_grad_mode_guards_clone():
    # PyTorch's clone(): a fresh guard of the same kind and mode, usable once more
    g = mf.no_grad().clone()
    assert type(g) is mf.no_grad
    with g:
        assert not mf.is_grad_enabled()
    im = mf.inference_mode(False).clone()
    with mf.no_grad(), im:
        assert mf.is_grad_enabled()
    assert mf.is_grad_enabled()



def test_grad_mode_turned_on_inside_inference_mode_records_nothing():
    # PyTorch: inference mode outranks enable_grad / set_grad_enabled(True) (is_grad_enabled says True, but no op
    # records); inference_mode(False) inside it records again
    x = leaf([1.0, 2.0])

    @mf.enable_grad()
    def f():
        return mf.is_grad_enabled(), (x * 2).requires_grad

    with mf.inference_mode():
        with mf.set_grad_enabled(True):
            assert mf.is_grad_enabled() and not (x * 2).requires_grad
            with mf.no_grad():
                assert not mf.is_grad_enabled()
            with mf.inference_mode(False):
                assert mf.is_grad_enabled() and (x * 2).requires_grad
            assert not (x * 2).requires_grad
        assert f() == (True, False) and not mf.is_grad_enabled()
    assert mf.is_grad_enabled() and (x * 2).requires_grad


def test_decorating_a_class_warns_and_constructs_it_in_the_mode():
    # PyTorch: a FutureWarning; the class becomes a function that constructs it inside the guard
    with pytest.warns(FutureWarning, match="Decorating classes is deprecated"):
        @mf.no_grad()
        class Probe:
            def __init__(self):
                self.grad_enabled = mf.is_grad_enabled()

    assert Probe().grad_enabled is False and mf.is_grad_enabled()
    with pytest.raises(TypeError, match="inference_mode\\(\\): mode must be a bool"):
        mf.inference_mode("yes")

# ---------------------------------------------------------------- 2. anomaly mode
def test_detect_anomaly_warns_it_is_slow_and_names_the_backward_in_pytorchs_words():
    # PyTorch warns on making detect_anomaly; its NaN error reads "Function 'XBackward' returned nan values in its
    # 0th output"; set_detect_anomaly does not warn
    x = leaf([-1.0, 4.0])
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        guard = autograd.detect_anomaly()
    with guard as bound, np.errstate(invalid="ignore"):
        assert bound is None
        with pytest.raises(RuntimeError, match="Function 'SqrtBackward' returned nan values in its 0th output"):
            x.sqrt().sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with autograd.set_detect_anomaly(True) as bound:
            assert bound is None and autograd.is_anomaly_enabled()
    assert not autograd.is_anomaly_enabled()



def test_detect_anomaly_checks_the_create_graph_walk_too():
    # PyTorch checks every backward's outputs for NaN, create_graph or not: sqrt's gradient at -1 is NaN
    x = leaf([-1.0, 4.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with autograd.detect_anomaly(), np.errstate(invalid="ignore"):
            with pytest.raises(RuntimeError, match="Function 'SqrtBackward' returned nan values"):
                autograd.grad(x.sqrt().sum(), x, create_graph=True)
            with pytest.raises(RuntimeError, match="Function 'SqrtBackward' returned nan values"):
                x.sqrt().sum().backward(create_graph=True)
    assert x.grad is None

# ---------------------------------------------------------------- 3. autograd.functional
def test_hvp_and_vhp_of_a_function_linear_in_one_input_give_zeros_there():
    # f(a, b) = sum(a^3) + sum(2 b): H = diag(6 a) for a, 0 for b (b's gradient 2 does not depend on the inputs; PyTorch
    # gives zeros there unless strict)
    a, b = np.array([[1.0, 2.0], [3.0, -1.0]]), np.array([[0.5, 1.0], [2.0, 3.0]])
    v = (mf.tensor(np.ones((2, 2))), mf.tensor(np.full((2, 2), 2.0)))
    def f(x, y):
        return (x ** 3).sum() + (y * 2).sum()
    for fn in (AF.vhp, AF.hvp):
        out, (ha, hb) = fn(f, (mf.tensor(a), mf.tensor(b)), v)
        np.testing.assert_allclose(out.item(), (a ** 3).sum() + 2 * b.sum())
        np.testing.assert_allclose(ha.numpy(), 6 * a)
        np.testing.assert_array_equal(hb.numpy(), np.zeros((2, 2)))
        with pytest.raises(RuntimeError, match="jacobian of the user-provided function with respect to input 1 is "
                                               "independent of the input"):
            fn(f, (mf.tensor(a), mf.tensor(b)), v, strict=True)
    _, h = AF.hvp(lambda x: (x * 3).sum(), mf.tensor(a), v[0])  # a linear function: H = 0
    np.testing.assert_array_equal(h.numpy(), np.zeros((2, 2)))


def test_jvp_strict_checks_inputs_across_all_outputs():
    # PyTorch's strict jvp refuses an input that no output depends on; (2a, 3b) uses each input in one output
    a = mf.tensor(np.array([1.0, -2.0]))
    b = mf.tensor(np.array([0.5, 4.0]))
    u = (mf.tensor(np.array([1.0, 2.0])), mf.tensor(np.array([-1.0, 3.0])))
    (oa, ob), (ja, jb) = AF.jvp(lambda x, y: (x * 2, y * 3), (a, b), u, strict=True)
    np.testing.assert_allclose(ja.numpy(), [2.0, 4.0])
    np.testing.assert_allclose(jb.numpy(), [-3.0, 9.0])
    with pytest.raises(RuntimeError, match="independent of input 1"):
        AF.jvp(lambda x, y: x * 2, (a, b), u, strict=True)


def test_functional_takes_tuples_not_lists():
    # PyTorch's autograd.functional: inputs, outputs and v are a Tensor or a tuple of Tensors (a list is refused)
    x = mf.tensor(np.array([1.0, 2.0]))
    with pytest.raises(TypeError, match="the inputs must be either a Tensor or a tuple of Tensors.*list"):
        AF.jacobian(lambda a, b: a * b, [x, x])
    with pytest.raises(TypeError, match="outputs of the user-provided function must be.*list"):
        AF.jacobian(lambda a: [a * 2], x)
    with pytest.raises(TypeError, match="the v must be"):
        AF.vjp(lambda a: a * 2, x, [x])


def test_jacobian_strategies_as_pytorchs():
    # forward-mode needs vectorize=True and refuses strict / create_graph (PyTorch's); its values are the Jacobian's,
    # in the outputs' dtype: d(2 a^2)/da = diag(4 a)
    a = np.array([1.0, -3.0])
    J = AF.jacobian(lambda x: (2 * x ** 2).float(), mf.tensor(a), vectorize=True, strategy="forward-mode")
    assert J.dtype == mf.float32
    np.testing.assert_allclose(J.numpy(), np.diag(4 * a))
    with pytest.raises(NotImplementedError, match="only implemented for `vectorize=True`"):
        AF.jacobian(lambda x: x, mf.tensor(a), strategy="forward-mode")
    with pytest.raises(RuntimeError, match="`strict=True` and `vectorized=True` are not supported together"):
        AF.jacobian(lambda x: x, mf.tensor(a), strict=True, vectorize=True)
    with pytest.raises(NotImplementedError, match="`create_graph=True` and `strategy=\"forward-mode\"`"):
        AF.jacobian(lambda x: x, mf.tensor(a), create_graph=True, vectorize=True, strategy="forward-mode")
    for bad in (AssertionError, ValueError):  # PyTorch raises an AssertionError
        with pytest.raises(bad, match="expected strategy to be either"):
            AF.jacobian(lambda x: x, mf.tensor(a), strategy="sideways")
    H = AF.hessian(lambda x: (x ** 3).sum(), mf.tensor(a), vectorize=True, outer_jacobian_strategy="forward-mode")
    np.testing.assert_allclose(H.numpy(), np.diag(6 * a))


def test_strict_with_create_graph_refuses_a_constant_jacobian():
    # PyTorch: strict + create_graph, a linear function's Jacobian does not depend on the input
    x = mf.tensor(np.array([1.0, 2.0]))
    for call in (lambda: AF.vjp(lambda a: a * 2, x, mf.ones(2, dtype=mf.float64), strict=True, create_graph=True),
                 lambda: AF.jacobian(lambda a: a * 2, x, strict=True, create_graph=True),
                 lambda: AF.jvp(lambda a: a * 2, x, mf.ones(2, dtype=mf.float64), strict=True, create_graph=True)):
        with pytest.raises(RuntimeError, match="jacobian of the user-provided function is independent of input 0. "
                                               "This is not allowed in strict mode when create_graph=True"):
            call()
    with pytest.raises(RuntimeError, match="should return a single Tensor"):
        AF.vhp(lambda a: ((a ** 3).sum(),), x, x)


# ---------------------------------------------------------------- 4. utils.checkpoint
def test_checkpoint_without_use_reentrant_warns_and_is_reentrant():
    # PyTorch 2.13: a UserWarning asks for use_reentrant, and the reentrant variant runs (its rules below apply)
    x = leaf([1.0, 2.0])
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed explicitly"):
        y = checkpoint(lambda t: t * 3, x)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
    with pytest.warns(UserWarning, match="checkpoint_sequential: the use_reentrant parameter"):
        checkpoint_sequential([mf.nn.Identity()], 1, x)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: k"):
        checkpoint(lambda t, k=1: t * k, x, k=2, use_reentrant=True)
    with pytest.raises(ValueError, match="`context_fn` or `debug` is only supported when use_reentrant=False"):
        checkpoint(lambda t: t, x, use_reentrant=True, debug=True)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: bogus"):
        checkpoint_sequential([mf.nn.Identity()], 1, x, use_reentrant=False, bogus=1)


def test_reentrant_checkpoint_without_an_input_requiring_grad_records_nothing():
    # PyTorch's reentrant checkpoint: "None of the inputs have requires_grad=True. Gradients will be None": the
    # result has no graph, so a layer inside gets no gradient; the non-reentrant one differentiates the layer
    lin = mf.nn.Linear(2, 2, dtype=mf.float64)
    x = mf.tensor(np.array([[1.0, -1.0]]))
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        y = checkpoint(lin, x, use_reentrant=True)
    assert not y.requires_grad and lin.weight.grad is None
    y = checkpoint(lin, x, use_reentrant=False)
    y.sum().backward()
    np.testing.assert_array_equal(lin.weight.grad.numpy(), [[1.0, -1.0], [1.0, -1.0]])


def test_reentrant_checkpoint_outputs_require_grad_as_pytorchs():
    # reentrant: every floating tensor returned (or in the tuple returned) requires grad, a detached one too; ints
    # do not; tensors nested deeper carry no graph. Non-reentrant: each output as the function made it.
    x = leaf([1.0, 2.0])
    a, b, c, nested = checkpoint(lambda t: (t * 2, (t * 3).detach(), t.argmax(), [t * 4]), x, use_reentrant=True)
    assert a.requires_grad and b.requires_grad and not c.requires_grad and not nested[0].requires_grad
    a, b = checkpoint(lambda t: (t * 2, (t * 3).detach()), x, use_reentrant=False)
    assert a.requires_grad and not b.requires_grad
    assert checkpoint(lambda t: "no tensor", x, use_reentrant=False) == "no tensor"


def test_checkpoint_context_fn_wraps_the_run_and_the_recomputation():
    # PyTorch's context_fn() -> (forward context, recompute context), entered around the first run and around the
    # recomputation in the backward
    events = []

    class Ctx:
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            events.append(self.name)

        def __exit__(self, *exc):
            events.append("/" + self.name)

    x = leaf([1.0, 2.0])
    y = checkpoint(lambda t: events.append("run") or t.exp(), x, use_reentrant=False,
                   context_fn=lambda: (Ctx("fwd"), Ctx("re")))
    y.sum().backward()
    assert events == ["fwd", "run", "/fwd", "re", "run", "/re"]
    np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]))
    with pytest.raises(ValueError, match="determinism_check should be one of"):
        checkpoint(lambda t: t, x, use_reentrant=False, determinism_check="sometimes")


def test_checkpoint_without_tensor_arguments_differentiates_what_it_closes_over():
    # PyTorch's non-reentrant checkpoint takes a function of no tensors: d(sum(w^2))/dw = 2w
    w = leaf([1.5, -2.0])
    y = checkpoint(lambda: (w * w).sum(), use_reentrant=False)
    y.backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, -4.0])


def test_checkpoint_dropout_rng_state():
    # preserve_rng_state: the recomputation draws the forward's mask (gradient zero exactly where the output is),
    # and the generator continues after the backward as if no recomputation ran; without it the mask differs
    def run(preserve):
        mf.manual_seed(3)
        x = leaf(np.ones(64))
        y = checkpoint(lambda t: mf.nn.functional.dropout(t, 0.5) * 2, x, use_reentrant=False,
                       preserve_rng_state=preserve)
        before = mf.rand(4).numpy()
        y.sum().backward()
        return y.detach().numpy(), x.grad.numpy(), before, mf.rand(4).numpy()

    y, g, before, after = run(True)
    np.testing.assert_array_equal(g, y)  # dropout(1) * 2 = 4 or 0; its gradient 4 or 0 at the same places
    mf.manual_seed(3)
    mf.nn.functional.dropout(mf.ones(64, dtype=mf.float64), 0.5)
    np.testing.assert_array_equal(before, mf.rand(4).numpy())
    np.testing.assert_array_equal(after, mf.rand(4).numpy())
    y, g, _, _ = run(False)
    assert not np.array_equal(g, y)


# ---------------------------------------------------------------- 5. custom Functions
def _square(backward_decorator=lambda f: f):
    class Square(mf.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        @backward_decorator
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return 2 * a * g

    return Square


def test_once_differentiable_backward_records_nothing_and_refuses_a_second_differentiation():
    # PyTorch's once_differentiable: the backward runs under no_grad (its result has no graph unless a gradient it
    # got requires grad); then differentiating through it raises "trying to differentiate twice ..."
    from minifused.autograd.higher import once_differentiable
    Square = _square(once_differentiable)
    x = leaf([1.0, -2.0])
    (g,) = autograd.grad(Square.apply(x).sum(), x, create_graph=True)
    np.testing.assert_array_equal(g.numpy(), [2.0, -4.0])
    assert not g.requires_grad
    v = leaf([1.0, 1.0])
    (g,) = autograd.grad(Square.apply(x), x, v, create_graph=True)
    assert g.requires_grad
    with pytest.raises(RuntimeError, match="trying to differentiate twice a function that was marked with "
                                           "@once_differentiable"):
        g.sum().backward()
    (g,) = autograd.grad(_square().apply(x).sum(), x, create_graph=True)  # undecorated: twice differentiable
    (h,) = autograd.grad(g.sum(), x)
    np.testing.assert_array_equal(h.numpy(), [2.0, 2.0])


def _double_in_place():
    """A custom Function doubling its first input in place (mark_dirty) and returning it; d/da = 2, d/db = g * b."""
    class DoubleInPlace(mf.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            a.mul_(2)
            ctx.mark_dirty(a)
            ctx.save_for_backward(b)
            return a

        @staticmethod
        def backward(ctx, g):
            (b,) = ctx.saved_tensors
            return g * 2, g * b

    return DoubleInPlace


def test_mark_dirty_returns_the_input_itself_as_the_functions_output():
    # PyTorch: the dirty input is the output (same object), its version bumped by the write and by mark_dirty, no
    # longer a leaf; the gradient flows through the Function's backward (2 per element)
    F = _double_in_place()
    x = leaf([1.0, 2.0])
    h = x * 1
    y = F.apply(h, mf.ones(2, dtype=mf.float64))
    assert y is h and h._version == 2 and not h.is_leaf and h.requires_grad
    np.testing.assert_array_equal(h.detach().numpy(), [2.0, 4.0])
    (y * mf.tensor(np.array([1.0, 10.0]))).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 20.0])
    z, w = mf.zeros(2, dtype=mf.float64), leaf([3.0, 4.0])  # a leaf without grad becomes the output too
    y = F.apply(z, w)
    assert y is z and y.requires_grad and not z.is_leaf
    (y * mf.tensor(np.array([1.0, 10.0]))).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 40.0])


def test_mark_dirty_hooks_stay_with_the_old_value_and_retained_grads_follow():
    # PyTorch: a hook registered before the in-place Function sees the gradient of the old value (2 g); a
    # retained grad is the new value's (g); an earlier op that saved the input then refuses its backward
    F = _double_in_place()
    x = leaf([1.0, 2.0])
    h = x * 1
    h.retain_grad()
    seen = []
    h.register_hook(lambda g: seen.append(g.numpy().tolist()))
    y = F.apply(h, mf.ones(2, dtype=mf.float64))
    (y * mf.tensor(np.array([1.0, 10.0]))).sum().backward()
    np.testing.assert_array_equal(h.grad.numpy(), [1.0, 10.0])
    assert seen == [[2.0, 20.0]] and h.retains_grad
    h = x * 1
    e = h * h
    F.apply(h, mf.ones(2, dtype=mf.float64))
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        e.sum().backward()


def test_mark_dirty_errors_as_pytorchs():
    F = _double_in_place()
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad has been used in an in-place"):
        F.apply(leaf([1.0]), mf.ones(1, dtype=mf.float64))
    with pytest.raises(RuntimeError, match="view of a leaf Variable that requires grad"):
        F.apply(leaf([1.0, 2.0])[:1], mf.ones(1, dtype=mf.float64))

    class NotReturned(mf.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.mark_dirty(a)
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match="marked as dirty during the forward method were not returned"):
        NotReturned.apply(leaf([1.0]) * 1)
    x = leaf([1.0, 2.0])  # under no_grad a leaf may be written (PyTorch's)
    with mf.no_grad():
        F.apply(x, mf.ones(2, dtype=mf.float64))
    np.testing.assert_array_equal(x.detach().numpy(), [2.0, 4.0])


def test_mark_dirty_through_a_view_reaches_its_base():
    # PyTorch records the write on the view's base: b = x * 1; F on b[:1] doubles b[0]; d sum(b) / dx = [2, 1]
    x = leaf([1.0, 2.0])
    b = x * 1
    _double_in_place().apply(b[:1], mf.ones(1, dtype=mf.float64))
    np.testing.assert_array_equal(b.detach().numpy(), [2.0, 2.0])
    b.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 1.0])


# ---------------------------------------------------------------- 6. grad and backward
def test_backward_with_create_graph_warns_once_per_process():
    # PyTorch (TORCH_WARN_ONCE): backward(create_graph=True) warns of the leaf <-> .grad reference cycle, once;
    # autograd.grad(create_graph=True) does not
    from minifused.autograd import walk
    walk._cycle_warned[0] = False
    x = leaf([1.0, 2.0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        autograd.grad((x ** 3).sum(), x, create_graph=True)
        (x ** 3).sum().backward(create_graph=True)
        (x ** 3).sum().backward(create_graph=True)
    assert [str(w.message)[:56] for w in caught] == ["Using backward() with create_graph=True will create a re"]
    np.testing.assert_array_equal(x.grad.detach().numpy(), [6.0, 24.0])  # 3 x^2, twice


def test_grad_is_grads_batched_stacks_one_vjp_per_vector():
    # PyTorch: each grad_output's first dim is a batch; row b is grad with grad_outputs[b]. For y = x^2 and the
    # identity batch: rows of the Jacobian diag(2x)
    x, z = leaf([1.0, 3.0]), leaf([5.0])
    y = x * x
    (J,) = autograd.grad(y, x, mf.eye(2, dtype=mf.float64), retain_graph=True, is_grads_batched=True)
    np.testing.assert_array_equal(J.numpy(), [[2.0, 0.0], [0.0, 6.0]])
    gx, gz = autograd.grad(y, [x, z], mf.eye(2, dtype=mf.float64), retain_graph=True, is_grads_batched=True,
                           allow_unused=True)
    assert gz is None
    _, gz = autograd.grad(y, [x, z], mf.eye(2, dtype=mf.float64), retain_graph=True, is_grads_batched=True,
                          materialize_grads=True)
    np.testing.assert_array_equal(gz.numpy(), np.zeros((2, 1)))  # one zero gradient per vector of the batch
    with pytest.raises(RuntimeError, match="grad_output\\[0\\] has a shape of \\(2,\\) and output\\[0\\] has"):
        autograd.grad(y, x, mf.ones(2, dtype=mf.float64), retain_graph=True, is_grads_batched=True)
    v = mf.tensor(np.array([[1.0, 0.0], [1.0, 1.0]]), requires_grad=True)
    (G,) = autograd.grad(y, x, v, create_graph=True, is_grads_batched=True)  # G[b] = 2 x * v[b]
    (dv,) = autograd.grad(G.sum(), v)
    np.testing.assert_array_equal(dv.numpy(), [[2.0, 6.0], [2.0, 6.0]])


def test_grad_and_post_accumulate_hook_errors_as_pytorchs():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="inputs must be tensors, got int"):  # PyTorch: a RuntimeError
        autograd.grad((x * 2).sum(), [x, 3])
    with pytest.raises(RuntimeError, match="differentiated tensor at index 1"):
        autograd.grad((x * 2).sum(), [x, leaf([1.0])])
    x.register_post_accumulate_grad_hook(lambda t: 3)
    with pytest.raises(TypeError, match="post accumulate grad hooks should return None"):  # PyTorch: a TypeError
        (x * 2).sum().backward()


def test_custom_function_may_define_vjp_instead_of_backward():
    # PyTorch: ``vjp`` is another name of ``backward``; defining both is a RuntimeError
    class Scale(mf.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def vjp(ctx, g):
            return g * 5

    x = leaf([1.0, 2.0])
    Scale.apply(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 5.0])

    class Both(Scale):
        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match="implementing both 'backward' and 'vjp'"):
        Both.apply(x).sum().backward()


def test_materialized_zeros_require_grad_under_create_graph():
    # PyTorch: torch.zeros_like(input, requires_grad=create_graph) for an unused input
    x, z = leaf([1.0, 2.0]), leaf([3.0])
    _, gz = autograd.grad((x * x).sum(), [x, z], create_graph=True, materialize_grads=True)
    assert gz.requires_grad and gz.numpy().tolist() == [0.0]
    _, gz = autograd.grad((x * x).sum(), [x, z], materialize_grads=True)
    assert not gz.requires_grad


def test_custom_function_saving_its_output_differentiates_twice():
    # PyTorch unpacks a saved output with its grad_fn: for Exp saving exp(x), backward g * exp(x) differentiates
    # through the node again, d2/dx2 exp = exp (the saved output had no graph: the second gradient was missing)
    class Exp(mf.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            out = a.exp()
            ctx.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx, g):
            (out,) = ctx.saved_tensors
            return g * out

    x = leaf([0.5, -1.0])
    (g,) = autograd.grad(Exp.apply(x).sum(), x, create_graph=True)
    (h,) = autograd.grad(g.sum(), x, create_graph=True)
    (k,) = autograd.grad(h.sum(), x)
    for d in (g, h, k):
        np.testing.assert_allclose(d.detach().numpy(), np.exp([0.5, -1.0]), rtol=1e-15)


# ---------------------------------------------------------------- 7. gradcheck
def test_gradcheck_checks_the_outputs_that_require_grad():
    # PyTorch: outputs that do not require grad are left out; with none, the numeric Jacobian must be zero
    x = leaf([1.0, 2.0])
    assert autograd.gradcheck(lambda a: (a * 2, a.detach() * 3), (x,))
    assert autograd.gradcheck(lambda a: a.detach() * 0 + 1, (x,))  # constant: numerically zero too
    assert autograd.gradcheck(lambda a: a.detach() * 3, (x,), raise_exception=False) is False
    with pytest.raises(autograd.GradcheckError, match="numerical gradient for function expected to be zero"):
        autograd.gradcheck(lambda a: a.detach() * 3, (x,))
    with pytest.raises(AssertionError, match="at least one of check_forward_ad or check_backward_ad"):
        autograd.gradcheck(lambda a: a, (x,), check_backward_ad=False)
    with pytest.raises(AssertionError, match="at least one of check_forward_ad or check_backward_ad"):
        autograd.gradgradcheck(lambda a: a, (x,), check_rev_over_rev=False)


def test_backward_grad_variables_is_deprecated():
    # PyTorch: FutureWarning for grad_variables; with grad_tensors too, a RuntimeError
    x = leaf([1.0, 2.0])
    with pytest.warns(FutureWarning, match="`grad_variables` is deprecated"):
        autograd.backward([x * 2], grad_variables=[mf.ones(2, dtype=mf.float64)])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])
    with pytest.warns(FutureWarning), pytest.raises(RuntimeError, match="both passed to `backward\\(\\)`"):
        autograd.backward([x * 2], [mf.ones(2)], grad_variables=[mf.ones(2)])


def test_variable_reads_an_int_requires_grad_as_pytorchs():
    # PyTorch's Variable(t, requires_grad=1) requires grad (its argument is an int-like bool); a float is a TypeError
    v = autograd.Variable(mf.ones(2), requires_grad=1)
    assert v.requires_grad and v.is_leaf
    assert not autograd.Variable(mf.ones(2), requires_grad=0).requires_grad
    with pytest.raises(TypeError):
        autograd.Variable(mf.ones(2), requires_grad=1.0)


def test_functional_create_graph_under_no_grad_keeps_the_callers_graph():
    # PyTorch preprocesses the inputs inside enable_grad: vjp(create_graph=True) under no_grad still gives results
    # with graphs reaching x; d/dx sum(v * 3x^2) = 6x
    x = leaf([1.0, -2.0])
    with mf.no_grad():
        out, g = AF.vjp(lambda a: a ** 3, x, mf.ones(2, dtype=mf.float64), create_graph=True)
    assert out.requires_grad and g.requires_grad
    (h,) = autograd.grad(g.sum(), x)
    np.testing.assert_array_equal(h.numpy(), [6.0, -12.0])


def test_a_root_without_grad_is_named_in_pytorchs_words():
    # PyTorch: "element i of tensors does not require grad and does not have a grad_fn", outputs checked first
    x, c = leaf([1.0, 2.0]), mf.ones(2, dtype=mf.float64)
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad and does not have a grad_fn"):
        (c * 2).sum().backward()
    with pytest.raises(RuntimeError, match="element 1 of tensors does not require grad and does not have a grad_fn"):
        autograd.grad([x * 2, c * 2], x, [c, c])
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
        autograd.grad((c * 2).sum(), c)
    with pytest.raises(RuntimeError, match="differentiated Tensors \\(inputs\\) does not require grad"):
        autograd.grad((x * 2).sum(), [x, c])


def test_second_backward_error_in_pytorchs_words():
    # PyTorch: "Trying to backward through the graph a second time (or directly access saved tensors after they have
    # already been freed)"; the freed node is named after it
    x = leaf([1.0, 2.0])
    y = x.exp().sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time \\(or directly access saved tensors after they have already "
                                           "been freed\\): the saved arrays of [A-Za-z]+ were freed"):
        y.backward()


def test_instantiating_a_custom_function_warns_and_calling_it_raises():
    # PyTorch: a DeprecationWarning on instantiation, and calling the instance is the legacy (non-static) API, refused
    Square = _square()
    with pytest.warns(DeprecationWarning, match="should not be instantiated"):
        f = Square()
    with pytest.raises(RuntimeError, match="Legacy autograd function with non-static forward method"):
        f(leaf([1.0]))
