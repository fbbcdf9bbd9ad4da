"""Custom autograd Functions written as PyTorch users write them (forward and backward on tensors, ``ctx``
keeping tensors and attributes), values and gradients against float64 references and finite differences."""
import numpy as np
import pytest

import minifused as mf
from minifused import autograd


class MyReLU(autograd.Function):
    """PyTorch's tutorial example, word for word but for the import."""

    @staticmethod
    def forward(ctx, input):  # noqa: A002 - the tutorial's name
        ctx.save_for_backward(input)
        return input.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors  # noqa: A001
        grad_input = grad_output.clone()
        grad_input[input < 0] = 0
        return grad_input


class Exp(autograd.Function):
    """PyTorch 2's form: forward without ctx, then setup_context saving the output."""

    @staticmethod
    def forward(x):
        return mf.exp(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, g):
        result, = ctx.saved_tensors
        return g * result


class ScaledArgmax(autograd.Function):
    """Two outputs, one marked non-differentiable; a non-tensor argument kept on ctx."""

    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k
        ctx.needs = ctx.needs_input_grad
        idx = x.argmax(-1)
        ctx.mark_non_differentiable(idx)
        return x * k, idx

    @staticmethod
    def backward(ctx, g, g_idx):
        return g * ctx.k, None


def _cpu(a, grad=False):
    return mf.tensor(np.asarray(a, np.float64), device="cpu", requires_grad=grad)


def test_pytorch_tutorial_relu():
    x = _cpu([-1.0, 2.0, -3.0, 4.0], grad=True)
    y = MyReLU.apply(x)
    np.testing.assert_array_equal(y.detach().numpy(), [0.0, 2.0, 0.0, 4.0])
    assert "grad_fn=<MyReLUBackward>" in repr(y)
    (y * _cpu([1.0, 2.0, 3.0, 4.0])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 2.0, 0.0, 4.0])


def test_setup_context_form_and_gradcheck():
    x = _cpu([0.0, 1.0, -0.5], grad=True)
    Exp.apply(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.0, 1.0, -0.5]))
    assert autograd.gradcheck(Exp.apply, (_cpu([0.3, -1.2], grad=True),))
    assert autograd.gradcheck(MyReLU.apply, (_cpu([0.3, -1.2, 2.0], grad=True),))


def test_non_differentiable_output_and_non_tensor_argument():
    x = _cpu([[1.0, 3.0, 2.0]], grad=True)
    scaled, idx = ScaledArgmax.apply(x, 2.5)
    assert scaled.requires_grad and not idx.requires_grad and idx.tolist() == [1]
    (scaled * _cpu([[1.0, 2.0, 3.0]])).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[2.5, 5.0, 7.5]])


def test_needs_input_grad_and_no_recording_without_grad():
    seen = {}

    class Probe(autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            seen["needs"] = ctx.needs_input_grad
            seen["inner_records"] = (a * b).requires_grad  # the forward's own ops are not recorded
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g, None

    a, b = _cpu([1.0], grad=True), _cpu([2.0])
    out = Probe.apply(a, b)
    assert seen == {"needs": (True, False), "inner_records": False} and out.requires_grad
    with mf.no_grad():
        assert not Probe.apply(a, b).requires_grad


def test_wrong_gradient_count_and_second_backward():
    class TooFew(autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g

    x = _cpu([1.0, 2.0], grad=True)
    with pytest.raises(RuntimeError, match=r"function TooFewBackward returned an incorrect number of gradients "
                                           r"\(expected 2, got 1\)"):
        TooFew.apply(x, _cpu([1.0, 1.0])).sum().backward()
    y = MyReLU.apply(x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])  # twice (the failed backward added nothing)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_an_input_modified_after_forward_is_caught():
    x = _cpu([1.0, -2.0], grad=True)
    h = x * 1.0
    y = MyReLU.apply(h)
    h.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation|in-place operation"):
        y.sum().backward()


def test_mark_dirty_on_a_leaf_that_requires_grad_is_refused_as_pytorchs():
    class Dirty(autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad has been used in an in-place"):
        Dirty.apply(_cpu([1.0], grad=True))


def test_once_differentiable_is_importable_where_pytorch_keeps_it():
    from minifused.autograd.function import Function, once_differentiable

    class Double(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            return g * 2

    x = _cpu([1.0, 3.0], grad=True)
    Double.apply(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


@pytest.mark.gpu
def test_custom_function_on_cuda_matches_pytorch(torch):
    a = np.array([-1.5, 0.5, 2.0, -0.25], np.float32)
    x = mf.tensor(a, device="cuda", requires_grad=True)
    (MyReLU.apply(x) * mf.arange(4, dtype=mf.float32, device="cuda")).sum().backward()
    tx = torch.tensor(a, device="cuda", requires_grad=True)
    (torch.relu(tx) * torch.arange(4, dtype=torch.float32, device="cuda")).sum().backward()
    np.testing.assert_array_equal(x.grad.cpu().numpy(), tx.grad.cpu().numpy())
    e = mf.tensor(a, device="cuda", requires_grad=True)
    Exp.apply(e).sum().backward()
    np.testing.assert_allclose(e.grad.cpu().numpy(), np.exp(a), rtol=1e-6)
