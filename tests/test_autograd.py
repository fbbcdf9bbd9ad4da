"""The tape: accumulation, retain_graph, grad mode, hooks, version counters, errors that
leave every .grad untouched, and custom Functions."""
import gc
import math

import numpy as np
import pytest

import minifused as mf
from minifused import nn, optim
from minifused.autograd import Function, Handoff


def leaf(values, device="cpu"):
    return mf.tensor(np.asarray(values, np.float64), device=device, requires_grad=True)


def test_shared_subexpression_accumulates(device):
    x = leaf([1.0, 2.0, 3.0], device)
    y = x * x          # used twice below
    z = (y + y * 3).sum()
    z.backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), 8 * np.array([1.0, 2.0, 3.0]))


def test_grad_accumulates_across_backward_calls(device):
    x = leaf([1.0, -2.0], device)
    (x * 3).sum().backward()
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), [3 + 2, 3 - 4])


def test_leaf_grads_do_not_alias():
    a, b = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    (a + b).sum().backward()  # Add hands the same gradient array to both inputs
    a.grad.mul_(10)
    np.testing.assert_allclose(b.grad.numpy(), [1.0, 1.0])


def test_zero_dim_leaf_gets_its_gradient(device):
    # a 0-d op's NumPy backward returns a scalar (np.generic), which becomes the leaf's .grad as it is
    x = mf.tensor(0.5, device=device, requires_grad=True)
    mf.special.i0(x).backward()
    h = 1e-6
    want = (np.i0(0.5 + h) - np.i0(0.5 - h)) / (2 * h)
    np.testing.assert_allclose(float(x.grad.cpu().numpy()), want, rtol=1e-4)
    assert x.grad.shape == ()


@pytest.mark.parametrize("op", [lambda x: x * x, lambda x: x.exp(), lambda x: mf.special.i0(x)])
def test_zero_dim_leaf_grad_takes_in_place_ops(device, op):
    # the leaf's .grad is an array of its own: zero_, zero_grad(set_to_none=False), clip_grad_norm_ and a second
    # backward's accumulation all write it (a NumPy scalar there would ignore every in-place write)
    x = nn.Parameter(mf.tensor(0.5, device=device))
    op(x).backward()
    g1 = float(x.grad.cpu().numpy())
    op(x).backward()
    np.testing.assert_allclose(float(x.grad.cpu().numpy()), 2 * g1, rtol=1e-6)
    nn.utils.clip_grad_norm_([x], abs(g1) / 2)
    np.testing.assert_allclose(abs(float(x.grad.cpu().numpy())), abs(g1) / 2, rtol=1e-4)
    optim.SGD([x], lr=0.1).zero_grad(set_to_none=False)
    assert float(x.grad.cpu().numpy()) == 0.0
    op(x).backward()
    np.testing.assert_allclose(float(x.grad.cpu().numpy()), g1, rtol=1e-6)
    x.grad.zero_()
    assert float(x.grad.cpu().numpy()) == 0.0


def test_backward_with_gradient_argument():
    x = leaf([[1.0, 2.0], [3.0, 4.0]])
    y = x * 2
    g = mf.tensor([[1.0, 0.0], [0.5, 2.0]], dtype=mf.float64)
    y.backward(g)
    np.testing.assert_allclose(x.grad.numpy(), 2 * g.numpy())


def test_second_backward_raises_unless_retained():
    x = leaf([1.0, 2.0])
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first)
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first)


def test_saved_arrays_are_freed_after_backward():
    x = leaf([1.0, 2.0])
    y = x.exp()
    ctx = y._ctx
    assert ctx.saved
    y.sum().backward()
    assert ctx.saved == () and ctx.freed


def test_grad_mode_decorators_hold_inside_generators():
    """As PyTorch's: a decorated generator function runs each of its steps in the decorator's mode, and the
    caller's mode holds between them."""
    w = mf.tensor(np.ones(2), requires_grad=True)

    @mf.no_grad()
    def outputs(n):
        for _ in range(n):
            yield w * 2, mf.is_grad_enabled()

    @mf.inference_mode
    def inferred(n):
        for _ in range(n):
            yield w * 2

    gen = outputs(2)
    y, mode = next(gen)
    assert not y.requires_grad and not mode and mf.is_grad_enabled()
    assert [(y.requires_grad, m) for y, m in gen] == [(False, False)]
    assert [y.requires_grad for y in inferred(2)] == [False, False]
    with mf.no_grad():
        assert [y.requires_grad for y in mf.enable_grad()(lambda: (yield w * 2))()] == [True]


def test_no_grad_records_nothing_and_enable_grad_reenables():
    x = leaf([1.0])
    with mf.no_grad():
        y = x * 2
        with mf.enable_grad():
            z = x * 3
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad and z.grad_fn is not None
    assert mf.is_grad_enabled()

    @mf.no_grad()
    def f(t):
        return t * 2

    assert not f(x).requires_grad


def test_detach_and_requires_grad_():
    x = leaf([1.0, 2.0])
    d = (x * 2).detach()
    assert not d.requires_grad and d.is_leaf
    d.requires_grad_()
    (d * x).sum().backward()
    np.testing.assert_allclose(d.grad.numpy(), [1.0, 2.0])
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])


def test_hooks_on_leaf_and_intermediate():
    x = leaf([1.0, 2.0])
    seen = []
    x.register_hook(lambda g: seen.append(g.numpy().copy()))
    y = x * 3
    handle = y.register_hook(lambda g: g * 10)  # replaces the gradient flowing into y
    (y * y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * 10 * 2 * 3 * np.array([1.0, 2.0]))
    np.testing.assert_allclose(seen[0], x.grad.numpy())
    handle.remove()
    x.grad = None
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])


@pytest.mark.parametrize("dtype", [mf.float32, mf.bfloat16])
@pytest.mark.parametrize("watch", [None, "hook", "retain_grad", "third_reader"])
def test_relu_output_read_twice_adds_its_two_gradients_in_its_own_pass(monkeypatch, dtype, watch):
    """A ReLU whose output two ops read (a residual block's output) gets the two gradients apart and adds them in
    its mask pass (Relu.backward_sum), with the gradient of the summed one; with a hook or a retained grad on the
    output, or a third gradient, the engine adds them first and the ReLU runs its plain backward."""
    from minifused.ops import elementwise as OE

    rng = np.random.default_rng(0)
    xv, a, b, c = (rng.standard_normal((6, 7)).astype(dtype) for _ in range(4))
    sums = []
    plain = OE.Relu.backward_sum
    monkeypatch.setattr(OE.Relu, "backward_sum", staticmethod(lambda ctx, *g: sums.append(len(g)) or plain(ctx, *g)))
    x = mf.tensor(xv, requires_grad=True)
    h = x * 1.0
    y = mf.relu(h)
    if watch == "hook":
        y.register_hook(lambda g: g)
    elif watch == "retain_grad":
        y.retain_grad()
    loss = (y * mf.tensor(a)).sum() + (y * mf.tensor(b)).sum()
    if watch == "third_reader":
        loss = loss + (y * mf.tensor(c)).sum()
    loss.backward()
    def add(p, q):  # rounded once
        return (p.astype(np.float64) + q.astype(np.float64)).astype(dtype)

    # (the gradients arrive from the last reader first)
    g = add(add(c, b), a) if watch == "third_reader" else add(b, a)
    np.testing.assert_array_equal(x.grad.numpy(), np.where(xv > 0, g, np.zeros((), dtype)))
    if watch == "retain_grad":
        np.testing.assert_array_equal(y.grad.numpy(), g)
    assert sums == ([2] if watch is None else [])


def test_retain_grad():
    x = leaf([1.0, 2.0])
    y = x * 2
    y.retain_grad()
    (y * y).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), 2 * y.detach().numpy())



@pytest.mark.parametrize("walk", ["backward", "grad"])
def test_a_retained_grad_accumulates_out_of_place(walk):
    # PyTorch's retain_grad sets grad + new as a new tensor: a .grad the caller holds keeps its values (a 0-d one too)
    x = leaf([1.0, 2.0])
    h = x * 2
    s = h.sum() * 1
    h.retain_grad()
    s.retain_grad()
    y = (h * h).sum() + s * 3
    for i in range(2):
        if walk == "backward":
            y.backward(retain_graph=True)
        else:
            mf.autograd.grad(y, [h, s], retain_graph=True)
        if i == 0:
            held, held_s = h.grad, s.grad
    np.testing.assert_allclose(held.numpy(), [7.0, 11.0], rtol=1e-12)
    np.testing.assert_allclose(h.grad.numpy(), [14.0, 22.0], rtol=1e-12)
    assert float(held_s) == 3.0 and float(s.grad) == 6.0


@pytest.mark.parametrize("write", ["whole", "through_a_view", "twice"])
def test_retained_grad_follows_the_tensor_through_in_place_ops(write):
    """PyTorch's rule: after an in-place op, a retained grad is the gradient of the tensor's new value (it held the
    old value's), and the tensor still retains it."""
    x = leaf([1.0, 2.0, 3.0])
    y = x * 2
    y.retain_grad()
    new = {"whole": lambda: y.mul_(3), "through_a_view": lambda: y[:2].mul_(3),
           "twice": lambda: y.add_(1).mul_(2)}[write]
    new()
    value = y.detach().numpy().copy()
    (y * y).sum().backward()
    assert y.retains_grad
    np.testing.assert_allclose(y.grad.numpy(), 2 * value)


def test_inplace_change_of_saved_tensor_is_detected():
    w = leaf([1.0, 2.0])
    x = mf.tensor([3.0, 4.0], dtype=mf.float64)
    y = (x * w).sum()  # Mul saved x
    x.add_(1.0)
    with pytest.raises(RuntimeError, match="Mul.*in-place|in-place.*Mul"):
        y.backward()
    assert w.grad is None


def test_inplace_change_of_any_saved_tensor_is_detected():
    # Mul saves both operands: a change to the second is caught as one to the first is (above)
    w = leaf([1.0, 2.0])
    x = mf.tensor([3.0, 4.0], dtype=mf.float64)
    y = (w * x).sum()
    x.mul_(2.0)
    with pytest.raises(RuntimeError, match="saved it at version 0 and it is now at version 1"):
        y.backward()
    assert w.grad is None


def test_a_recorded_op_keeps_few_objects_for_the_cyclic_garbage_collector():
    # Every object a node keeps alive is tracked by Python's cyclic collector; each full collection scans all
    # of them, and the nodes alive across a forward make those collections come sooner (the tape's _out_meta).
    # A chain of matmul, relu and add nodes (their intermediate tensors gone) keeps about 4 objects a node: the
    # node, its inputs' tuple, an edge and the saved versions.
    x = leaf(np.ones((4, 4)))
    w = leaf(np.ones((4, 4)) / 8)
    z = x * 1.0
    gc.collect()
    before = len(gc.get_objects())
    for _ in range(100):
        z = mf.nn.functional.relu(z @ w) + z
    gc.collect()
    assert (len(gc.get_objects()) - before) / 300 < 4.5
    # the nodes' edges compare by identity (not as the tensors they refer to) and reach a live tensor's attributes
    a = z @ w
    b = a[:2] * 2
    edges = (a[:2] + b)._ctx.inputs
    assert edges[0] == edges[0] and edges[0] != edges[1] and len({edges[0], edges[1]}) == 2
    assert edges[1].shape == (2, 4)
    del b
    with pytest.raises(AttributeError, match="no longer alive"):
        edges[1].shape
    z.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((4, 4), 1.5 ** 100))  # each step: g + g @ w.T = 1.5 g


def test_inplace_through_a_view_is_detected():
    w = leaf([1.0, 2.0, 3.0, 4.0])
    x = mf.tensor([1.0, 2.0, 3.0, 4.0], dtype=mf.float64)
    y = (x.exp() * w).sum()  # Exp saved its output
    v = x.reshape(2, 2)
    v[0, 0] = 5.0  # writes to x's memory but not to the saved exp output
    y.backward()   # exp's output was not modified: fine
    out = mf.tensor([1.0, 2.0], dtype=mf.float64)
    z = (out.view(2) * w[:2]).sum()
    out_view = out.view(1, 2)
    out_view[0, 1] = 9.0
    with pytest.raises(RuntimeError, match="in-place"):
        z.backward()


def test_inplace_on_leaf_requiring_grad_is_refused():
    w = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="in-place"):
        w.add_(1)
    with pytest.raises(RuntimeError, match="requires grad"):
        w[0] = 3.0
    with mf.no_grad():
        w.mul_(2)
        w[0] = 7.0
    np.testing.assert_allclose(w.detach().numpy(), [7.0, 4.0])


def test_nonscalar_backward_needs_gradient():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="scalar"):
        (x * 2).backward()
    assert x.grad is None


def test_backward_on_tensor_without_grad():
    with pytest.raises(RuntimeError, match="does not require grad"):
        mf.tensor([1.0]).sum().backward()


def test_requires_grad_on_integer_tensor_is_type_error():
    with pytest.raises(TypeError, match="floating"):
        mf.tensor([1, 2], requires_grad=True)
    with pytest.raises(TypeError, match="floating"):
        mf.tensor([1, 2]).requires_grad_()


def test_error_in_backward_leaves_grads_untouched():
    class Broken(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom")

    a, b = leaf([1.0]), leaf([2.0])
    (a * b).sum().backward()
    before = (a.grad.numpy().copy(), b.grad.numpy().copy())
    y = (a * 3 + Broken.apply(b)).sum()
    with pytest.raises(ValueError, match="boom"):
        y.backward()
    np.testing.assert_array_equal(a.grad.numpy(), before[0])
    np.testing.assert_array_equal(b.grad.numpy(), before[1])
    assert y._ctx.saved == () or not y._ctx.freed  # the tape was not freed either


def test_custom_function_with_aux_and_needs_input_grad():
    calls = {}

    class ScaledSquare(Function):
        @staticmethod
        def forward(ctx, x, s, scale):
            ctx.save_for_backward(x, s)
            ctx.scale = scale  # aux data
            calls["needs"] = ctx.needs_input_grad
            return scale * x * x * s

        @staticmethod
        def backward(ctx, g):
            x, s = ctx.saved_tensors
            gx = g * 2 * ctx.scale * x * s if ctx.needs_input_grad[0] else None
            gs = g * ctx.scale * x * x if ctx.needs_input_grad[1] else None
            return gx, gs, None

    x = leaf([1.0, 2.0])
    s = mf.tensor([3.0, 4.0], dtype=mf.float64)
    ScaledSquare.apply(x, s, 0.5).sum().backward()
    assert calls["needs"] == (True, False, False)
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 8.0])
    assert mf.testing.gradcheck(lambda a, b: ScaledSquare.apply(a, b, 0.5),
                                (leaf([1.0, -2.0]), leaf([0.5, 3.0])))


def test_gradcheck_fails_a_nan_gradient():
    """A backward giving NaN (or inf) is a mismatch: NaN compares false, so a '>' test let it pass."""

    class NanGrad(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * np.nan

    with pytest.raises(AssertionError, match="gradcheck"):
        mf.testing.gradcheck(lambda a: NanGrad.apply(a), (leaf([1.0, 2.0]),))


class _Payload(Handoff):
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class _Producer(Function):
    """Doubles; its backward takes either a gradient array or a consumer's _Payload. (An op on arrays, as
    minifused's own: the handoff protocol is the ops' protocol.)"""
    on_arrays = True
    received = []

    @staticmethod
    def forward(ctx, x):
        ctx.aux = "producer's aux"
        return x * 2

    @staticmethod
    def backward(ctx, g):
        _Producer.received.append(type(g).__name__)
        return (g.value if isinstance(g, _Payload) else g) * 2


class _Consumer(Function):
    """Identity; hands its producer a _Payload (the gradient times 10) when the engine allows it."""
    on_arrays = True
    producers = []

    @staticmethod
    def forward(ctx, x):
        return x.copy()

    @staticmethod
    def backward(ctx, g):
        p = ctx.sole_producer(0)
        _Consumer.producers.append(None if p is None else p.aux)
        return g if p is None or p.fn is not _Producer else _Payload(g * 10)


def _handoff_case(kind):
    x = leaf([1.0, 2.0])
    h = _Producer.apply(x)
    if kind == "hooked":
        h.register_hook(lambda g: None)
    if kind == "retained":
        h.retain_grad()
    y = _Consumer.apply(h)
    loss = (y + h).sum() if kind == "second_consumer" else y.sum()
    _Producer.received.clear()
    _Consumer.producers.clear()
    loss.backward(retain_graph=kind == "retained")
    return x.grad.numpy(), _Producer.received, _Consumer.producers


def test_sole_producer_hands_a_payload_to_the_producer_untouched():
    grad, received, producers = _handoff_case("sole")
    assert producers == ["producer's aux"] and received == ["_Payload"]
    np.testing.assert_array_equal(grad, [20.0, 20.0])  # (1 * 10) * 2: the payload reached it as it was


@pytest.mark.parametrize("kind", ["second_consumer", "hooked", "retained"])
def test_no_sole_producer_when_the_output_is_shared_or_watched(kind):
    grad, received, producers = _handoff_case(kind)
    assert producers == [None] and received == ["ndarray"]
    np.testing.assert_array_equal(grad, [4.0, 4.0] if kind == "second_consumer" else [2.0, 2.0])


def test_no_sole_producer_for_a_leaf_or_a_multi_use_in_one_op():
    x = leaf([1.0])
    _Consumer.producers.clear()
    _Consumer.apply(x).sum().backward()
    h = _Producer.apply(leaf([1.0]))
    (_Consumer.apply(h) * _Consumer.apply(h)).sum().backward()
    assert _Consumer.producers == [None, None, None]


def test_a_handoff_never_meets_another_gradient():
    class Rogue(Function):  # hands a payload without asking the engine
        on_arrays = True

        @staticmethod
        def forward(ctx, x):
            return x.copy()

        @staticmethod
        def backward(ctx, g):
            return _Payload(g)

    h = _Producer.apply(leaf([1.0]))
    with pytest.raises(RuntimeError, match="Handoff met another gradient"):
        (Rogue.apply(h) + h).sum().backward()


@pytest.mark.parametrize("writer,name", [
    (lambda p: optim.SGD([p], lr=0.1).step(), "SGD.step"),
    (lambda p: optim.Adam([p]).step(), "Adam.step"),
    (lambda p: optim.AdamW([p]).step(), "AdamW.step"),
    (lambda p: p.__setitem__(0, 5.0), "setitem"),
    (lambda p: p.copy_(mf.ones(2, device="cpu")), "copy_"),
    (lambda p: p.mul_(2.0), "mul_"),
])
def test_in_place_error_names_the_writer(writer, name):
    p = mf.nn.Parameter(mf.tensor([1.0, 2.0], device="cpu"))
    loss = (p * p).sum()
    p.grad = mf.zeros(2, device="cpu")
    v = p._version
    with mf.no_grad():
        writer(p)
    assert p._version == v + 1
    with pytest.raises(RuntimeError, match=rf"last by {name}\)"):
        loss.backward()


def test_load_state_dict_bumps_the_version():
    lin = mf.nn.Linear(2, 2, device="cpu")
    loss = lin(mf.ones(1, 2, device="cpu", requires_grad=True)).sum()  # (the weight is saved for x's gradient)
    lin.load_state_dict({k: v.detach() * 2 for k, v in lin.state_dict().items()})
    with pytest.raises(RuntimeError, match=r"last by load_state_dict\)"):
        loss.backward()


def test_deep_chain_does_not_recurse():
    x = leaf([1.0])
    y = x
    for _ in range(5000):
        y = y * 1.0
    y.sum().backward()
    assert x.grad.item() == 1.0


def test_detect_anomaly_names_the_op(device):
    x = leaf([1.0, 0.0], device)
    with mf.detect_anomaly(), np.errstate(divide="ignore", invalid="ignore"):
        (x - 1).log()  # non-finite forward outputs pass: PyTorch checks backward gradients for NaN only
        y = x.sqrt() * 0  # sqrt's gradient at 0: 0 / 0
        with pytest.raises(RuntimeError, match="Sqrt backward gradient"):
            y.sum().backward()
        assert x.grad is None
        x.sqrt().sum().backward()  # an infinite gradient is no NaN
    assert x.grad.cpu().tolist() == [0.5, math.inf]
    with np.errstate(invalid="ignore"):
        (x.sqrt() * 0).sum().backward()  # outside the context nothing is checked


def test_debug_mode_still_computes(device):
    mf.set_debug(True)
    try:
        x = leaf([1.0, 2.0], device)
        (x * x).sum().backward()
        np.testing.assert_allclose(x.grad.cpu().numpy(), [2.0, 4.0])
    finally:
        mf.set_debug(False)


def test_tape_does_not_outlive_backward():
    import gc
    import weakref

    x = leaf([1.0, 2.0])
    y = (x.exp() * x).sum()
    node = weakref.ref(y._ctx)
    inner = weakref.ref(y._ctx.inputs[0]._ctx)
    y.backward()
    del y
    gc.collect()
    assert node() is None and inner() is None


def test_the_tape_keeps_no_intermediate_alive(device):
    """An activation that no backward reads (the inputs of an add) goes when the user's code drops it, as in
    PyTorch; its hooks still run and the gradients are unchanged; a retained grad on a tensor that is gone is
    simply not kept."""
    import gc
    import weakref

    x = leaf([1.0, -2.0, 3.0], device)
    seen = []
    b = x * 3.0  # Mul by a scalar saves nothing of b's
    c = x * 2.0
    c.retain_grad()
    b.register_hook(lambda g: seen.append(g.cpu().numpy()))
    d = b + c  # Add saves neither input
    refs = weakref.ref(b), weakref.ref(c)
    del b, c
    gc.collect()
    assert refs[0]() is None and refs[1]() is None
    (d * d).sum().backward()
    want = 2 * 5 * np.array([1.0, -2.0, 3.0])  # d = 5x, so d(d^2)/dd = 10x
    np.testing.assert_allclose(seen[0], want)
    np.testing.assert_allclose(x.grad.cpu().numpy(), 5 * want)


def test_seed_gradient_is_a_new_array_each_time(device):
    """backward()'s implicit gradient of one (on the GPU a copy of a cached device one): a leaf's
    .grad changed in place must not change the seed of a later backward."""
    a = mf.tensor(3.0, dtype=mf.float16, device=device, requires_grad=True)
    a.backward()
    a.grad._data += 5
    b = mf.tensor([[2.0]], dtype=mf.float16, device=device, requires_grad=True)
    b.backward()
    (b * 3).sum().backward()
    assert float(a.grad.item()) == 6.0
    assert float(b.grad.item()) == 4.0
    assert b.grad.shape == (1, 1)


def test_consumers_recorded_before_an_in_place_op_keep_the_old_node():
    """As PyTorch: an op that read a tensor before an in-place op on it gets its gradient routed to the
    node the tensor had then (here a sum before relu_: its gradient is all ones, not masked by the ReLU)."""
    import minifused.functional as F

    leaf = mf.tensor(np.array([-1.0, 2.0, -3.0]), requires_grad=True)
    h = leaf * 1.0
    before = h.sum()
    F.relu_(h)
    (before + h.sum()).backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), [1.0, 2.0, 1.0])


def test_checkpoint_recomputes_with_the_same_values_gradients_and_dropout_masks():
    """utils.checkpoint: the same outputs, parameter gradients and input gradients as the plain call (dropout
    draws the same mask in the recomputation), for several tensor inputs, a non-tensor argument, a tuple of
    outputs and keyword arguments; the function's intermediate results are not kept (its nodes are not on
    the tape: one node stands for it); checkpoint_sequential equals the Sequential."""
    from minifused.utils.checkpoint import checkpoint, checkpoint_sequential

    mf.manual_seed(0)
    block = nn.Sequential(nn.Linear(4, 8, dtype=mf.float64), nn.ReLU(), nn.Dropout(0.5),
                          nn.Linear(8, 3, dtype=mf.float64))

    def fn(x, y, scale, *, shift):
        h = block(x) * scale + shift
        return h, (h * y.sum()).tanh()

    def run(checkpointed):
        block.zero_grad()
        x = mf.tensor(np.linspace(-1, 1, 20).reshape(5, 4), requires_grad=True)
        y = mf.tensor(np.array([0.5, -0.25]), requires_grad=True)
        mf.manual_seed(1)
        a, b = checkpoint(fn, x, y, 2.0, shift=0.5, use_reentrant=False) if checkpointed else fn(x, y, 2.0, shift=0.5)
        if checkpointed:
            assert a._ctx is b._ctx and type(a._ctx.fn).__name__ != "LinearFn"
        mf.manual_seed(5)  # a draw between forward and backward must not change the recomputed mask
        ((a * a).sum() + b.sum()).backward()
        return [a.detach().numpy(), b.detach().numpy(), x.grad.numpy(), y.grad.numpy()] + [
            p.grad.numpy() for p in block.parameters()]

    for got, want in zip(run(True), run(False)):
        np.testing.assert_array_equal(got, want)
    seq = nn.Sequential(*[nn.Linear(3, 3, dtype=mf.float64) for _ in range(5)])
    x = mf.tensor(np.ones((2, 3)), requires_grad=True)
    out = checkpoint_sequential(seq, 2, x, use_reentrant=False)
    np.testing.assert_allclose(out.detach().numpy(), seq(x).detach().numpy(), rtol=1e-15)
    out.sum().backward()
    assert x.grad is not None and all(p.grad is not None for p in seq.parameters())
    assert checkpoint(lambda t: 3, x, use_reentrant=False) == 3  # a result without tensors: as it is (PyTorch's)
    # results as PyTorch's checkpoint returns them: tuples, lists, dicts, with other values passed through
    x.grad = None
    got = checkpoint(lambda t: {"a": t * 2, "b": [t * t, 5, None]}, x, use_reentrant=False)
    assert got["b"][1:] == [5, None] and type(got["b"]) is list
    (got["a"].sum() + got["b"][0].sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 + 2 * x.detach().numpy(), rtol=1e-15)


# ---------------------------------------------------------------- torch.autograd.backward's signature
def _net():
    """(w, b, h, y1, y2): h = x @ w.T + b, y1 = sum(h * h), y2 = mean(relu(h)), in float64."""
    rng = np.random.default_rng(11)
    w = mf.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    b = mf.tensor(rng.standard_normal(3), requires_grad=True)
    h = mf.tensor(rng.standard_normal((5, 4))) @ w.T + b
    return w, b, h, (h * h).sum(), h.relu().mean()


def _grads_one_by_one(*weights):
    """w.grad and b.grad of sum_i weights[i] * y_i, from one backward per root (retain_graph)."""
    w, b, h, y1, y2 = _net()
    for y, k in zip((y1, y2), weights):
        (y * k).backward(retain_graph=True)
    return w.grad.numpy(), b.grad.numpy()


def test_backward_of_several_tensors_is_one_walk_summing_their_gradients():
    """``autograd.backward([y1, y2], [g1, g2])`` as PyTorch's: one walk from both roots (their shared nodes run
    once, so no retain_graph is needed), the leaves' gradients the weighted sum."""
    for grads, weights in ((None, (1.0, 1.0)), ([mf.tensor(2.0), mf.tensor(-3.0)], (2.0, -3.0))):
        w, b, h, y1, y2 = _net()
        mf.autograd.backward([y1, y2], grads)
        want_w, want_b = _grads_one_by_one(*weights)
        np.testing.assert_allclose(w.grad.numpy(), want_w, rtol=1e-12)
        np.testing.assert_allclose(b.grad.numpy(), want_b, rtol=1e-12)


def test_backward_roots_may_lie_on_each_others_paths():
    """A root that another root's walk passes through (h, under y1) gets the sum of its seed and what flows in."""
    w, b, h, y1, _ = _net()
    seed = np.full((5, 3), 0.5)
    mf.autograd.backward([y1, h], [None, mf.tensor(seed)])
    np.testing.assert_allclose(b.grad.numpy(), (2 * h.detach().numpy() + seed).sum(0), rtol=1e-12)


def test_backward_inputs_fill_only_those_tensors():
    """``inputs``: only those tensors' ``.grad`` is accumulated; a non-leaf among them gets its ``.grad`` and
    retains it from then on, as in PyTorch."""
    w, b, h, y1, _ = _net()
    want_w, want_b = _grads_one_by_one(1.0, 0.0)
    y1.backward(inputs=[w])
    assert b.grad is None
    np.testing.assert_allclose(w.grad.numpy(), want_w, rtol=1e-12)
    w, b, h, y1, _ = _net()
    y1.backward(inputs=(h, b))
    assert w.grad is None and h.retains_grad
    np.testing.assert_allclose(h.grad.numpy(), 2 * h.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), want_b, rtol=1e-12)


@pytest.mark.parametrize("call,exc,words", [
    (lambda w, y: mf.autograd.backward([y], [None, None]), RuntimeError, "backward: got 1 tensors and 2 gradients"),
    (lambda w, y: mf.autograd.backward([y, y], [None]), RuntimeError, "backward: got 2 tensors and 1 gradients"),
    (lambda w, y: mf.autograd.grad([y, y], w, [None]), RuntimeError, "grad: got 2 tensors and 1 grad_outputs"),
    (lambda w, y: mf.autograd.backward([y, 3.0]), TypeError, "backward: expected tensors to differentiate, got float"),
    (lambda w, y: y.backward(inputs=[mf.ones(2)]), RuntimeError, "one of the inputs does not require grad"),
    (lambda w, y: y.backward(inputs=[]), RuntimeError, "inputs, when given, must not be empty"),
    (lambda w, y: y.backward(inputs=[w.numpy()]), TypeError, "inputs must be tensors, got ndarray"),
])
def test_backward_bad_arguments_change_nothing(call, exc, words):
    w, b, h, y1, _ = _net()
    with pytest.raises(exc, match=words):
        call(w, y1)
    assert w.grad is None and b.grad is None
    y1.backward()  # the graph was not consumed
    assert w.grad is not None


# ---------------------------------------------------------------- user code's arrays, aliased in-place operands
def test_in_place_arithmetic_with_an_operand_aliasing_its_target(device):
    """``y *= y`` and ``y.mul_(y.detach())``: the op overwrites its own operand; the backward uses its old value
    (PyTorch refuses these backwards; a wrong gradient is never the answer)."""
    a = np.array([0.5, -1.0, 2.0])
    for op, want in ((lambda y: y.__imul__(y), 2 * (a + 1)), (lambda y: y.mul_(y.detach()), a + 1),
                     (lambda y: y.add_(y), np.full(3, 2.0))):
        x = leaf(a, device)
        y = x * 1 + 1
        op(y)
        y.sum().backward()
        np.testing.assert_allclose(x.grad.cpu().numpy(), want)
    y = leaf(a, device) * 1 + 1
    with pytest.raises(RuntimeError, match="single memory location"):  # (an operand overlapping y in part)
        y.div_(y.detach()[2])


def test_gradients_user_code_saw_stay_as_they_were(device):
    """A gradient a hook kept, one a custom backward returned (here: its saved input) or a module's backward
    hook returned never becomes a leaf's own .grad: the next backward's accumulation leaves it alone."""
    x = leaf([1.0, 2.0], device)
    seen, seen_mid = [], []
    x.register_hook(lambda g: seen.append(g))
    for _ in range(2):
        h = x * 2
        mid = h + 0
        mid.register_hook(lambda g: seen_mid.append(g))
        mid.sum().backward()
    np.testing.assert_allclose(seen[0].cpu().numpy(), [2.0, 2.0])
    np.testing.assert_allclose(seen_mid[0].cpu().numpy(), [1.0, 1.0])
    np.testing.assert_allclose(x.grad.cpu().numpy(), [4.0, 4.0])

    class PassSaved(Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            (b,) = ctx.saved_tensors
            return b, None

    a, b = leaf([1.0, 1.0], device), mf.tensor([3.0, 4.0], device=device, dtype=mf.float64)
    for _ in range(2):
        PassSaved.apply(a, b).sum().backward()
    np.testing.assert_allclose(b.cpu().numpy(), [3.0, 4.0])
    np.testing.assert_allclose(a.grad.cpu().numpy(), [6.0, 8.0])

    m = nn.Linear(2, 1).to(device)
    const = mf.ones(3, 2, device=device)
    m.register_full_backward_hook(lambda mod, gin, gout: (const,))
    inp = mf.randn(3, 2, device=device, requires_grad=True)
    for _ in range(2):
        m(inp).sum().backward()
    np.testing.assert_allclose(const.cpu().numpy(), 1.0)
    np.testing.assert_allclose(inp.grad.cpu().numpy(), 2.0)


def test_backward_hook_changing_a_gradient_size_is_refused(device):
    m = nn.Linear(4, 1).to(device)
    m.register_full_backward_hook(lambda mod, gin, gout: (mf.ones(1, 4, device=device),))
    with pytest.raises(RuntimeError, match="changed the size"):
        m(mf.randn(2, 4, device=device, requires_grad=True)).sum().backward()


def test_grad_of_several_outputs_walks_once(device):
    """autograd.grad([y1, y2], x): one walk, so a (non-linear) hook sees the whole gradient once, as PyTorch's."""
    x = leaf([1.0, 1.0], device)
    calls = []
    h = x * 1
    h.register_hook(lambda g: calls.append(g.cpu().numpy().copy()) or g.clamp(max=1))
    (gx,) = mf.autograd.grad([(h * 2).sum(), (h * 3).sum()], x)
    assert len(calls) == 1
    np.testing.assert_allclose(calls[0], [5.0, 5.0])
    np.testing.assert_allclose(gx.cpu().numpy(), [1.0, 1.0])


def test_custom_function_integer_outputs_and_unmaterialized_grads(device):
    class SortBoth(Function):
        @staticmethod
        def forward(ctx, a):
            ctx.set_materialize_grads(False)
            values, order = a.sort()
            ctx.save_for_backward(order)
            return values, order, a * 3

        @staticmethod
        def backward(ctx, g_values, g_order, g_three):
            got.append((g_values is None, g_three is None))
            (order,) = ctx.saved_tensors
            out = mf.zeros_like(g_values)
            out[order] = g_values
            return out

    got = []
    a = leaf([3.0, 1.0, 2.0], device)
    values, order, _ = SortBoth.apply(a)
    assert not order.requires_grad and order.grad_fn is None and values.requires_grad
    values.sum().backward()
    assert got == [(False, True)]
    np.testing.assert_allclose(a.grad.cpu().numpy(), 1.0)


def test_in_place_change_of_an_operand_the_backward_does_not_need(device):
    """``h * 3`` and ``h @ w`` with a frozen ``w`` keep no copy of ``h`` (PyTorch's): changing h in place
    afterwards is fine; where ``h`` is needed (``w`` requires grad) the backward refuses."""
    x = leaf(np.ones((2, 3)), device)
    h = x * 1
    y = (h * 3).sum() + (h @ mf.ones(3, 2, device=device, dtype=mf.float64)).sum() + (h / 4).sum()
    h.add_(1)
    y.backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), 3 + 2 + 0.25)
    h = x * 1
    w = leaf(np.ones((3, 2)), device)
    z = h @ w
    h.add_(1)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        z.sum().backward()


def test_accumulating_into_an_expanded_grad_raises_and_once_differentiable_path():
    """A .grad set to an expanded view is refused when backward accumulates into it, with PyTorch's overlap error
    (adding into its one memory location three times gave [4, 4, 4], not [2, 3, 4]), and the user's tensor is left
    as it was; torch.autograd.function.once_differentiable is the one in autograd.higher."""
    from minifused.autograd.function import once_differentiable
    from minifused.autograd.higher import once_differentiable as higher_once

    assert once_differentiable is higher_once
    x = mf.ones(3, requires_grad=True)
    x.grad = mf.ones(1).expand(3)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor refers to a single memory"):
        (x * mf.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0]
    x.grad = mf.ones(3)
    (x * mf.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert x.grad.tolist() == [2.0, 3.0, 4.0]


def test_reading_grad_of_a_non_leaf_warns_as_pytorch():
    """PyTorch warns when .grad of a non-leaf that does not retain it is read (it stays None); a leaf's, and a
    non-leaf's after retain_grad(), are read silently."""
    import warnings

    x = mf.ones(2, requires_grad=True)
    y = x * 2
    with pytest.warns(UserWarning, match="The .grad attribute of a Tensor that is not a leaf Tensor is being accessed"):
        assert y.grad is None
    z = x * 3
    z.retain_grad()
    z.sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert z.grad.tolist() == [1.0, 1.0] and x.grad.tolist() == [3.0, 3.0]
