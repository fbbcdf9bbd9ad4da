"""PyTorch parity of activation checkpointing, the norm layers, dropout and the activation classes: the cases where
minifused used to differ (gradients a checkpoint lost or wrote where none was asked for, epsilons, empty inputs,
refused channel counts, in-place flags, the class hierarchy). Expected values are float64 NumPy or by hand."""

import numpy as np
import pytest

import minifused as mf
from minifused import nn
from minifused import functional as F
from minifused.utils.checkpoint import checkpoint

from tolerances import cpu

X = np.array([[1.0, -2.0, 0.5], [0.25, 3.0, -1.0], [2.0, 0.0, 1.5], [-0.5, 1.0, 0.75]])
W = np.array([[0.1, -0.2, 0.3], [0.4, 0.5, -0.6]])
B = np.array([0.1, -0.1])


def _linear():
    lin = nn.Linear(3, 2, dtype=mf.float64, device="cpu")
    with mf.no_grad():
        lin.weight.copy_(cpu(W))
        lin.bias.copy_(cpu(B))
    return lin


# ---------------------------------------------------------------- checkpoint
def test_checkpoint_gives_the_parameters_inside_gradients_when_the_input_needs_none():
    """The first block of a model: its input requires no grad, its parameters (and a tensor it closes over that
    has a history) do. d sum((x * e) @ W.T + b): dW[j] = sum_n x[n] * e, db = N, de = sum_n x[n] * sum_j W[j]."""
    lin = _linear()
    w = cpu(np.array([1.0, 2.0, -1.0]), requires_grad=True)
    e = w * 3.0  # not a leaf: its gradient goes on to w through the outer graph
    out = checkpoint(lambda t: lin(t * e), cpu(X), use_reentrant=False)
    assert out.requires_grad
    np.testing.assert_allclose(out.detach().numpy(), (X * [3.0, 6.0, -3.0]) @ W.T + B, rtol=1e-15)
    out.sum().backward()
    np.testing.assert_allclose(lin.weight.grad.numpy(), np.tile(X.sum(0) * [3.0, 6.0, -3.0], (2, 1)), rtol=1e-15)
    np.testing.assert_allclose(lin.bias.grad.numpy(), [4.0, 4.0], rtol=1e-15)
    np.testing.assert_allclose(w.grad.numpy(), 3.0 * X.sum(0) * W.sum(0), rtol=1e-14)


def test_checkpoint_writes_only_the_gradients_the_backward_asks_for():
    """``backward(inputs=[x])`` leaves the parameters' .grad None, ``autograd.grad`` every .grad; x gets
    d sum(x @ W.T + b) / dx = the column sums of W in each row."""
    lin = _linear()
    x = cpu(X, requires_grad=True)
    checkpoint(lin, x, use_reentrant=False).sum().backward(inputs=[x])
    assert lin.weight.grad is None and lin.bias.grad is None
    np.testing.assert_allclose(x.grad.numpy(), np.tile(W.sum(0), (4, 1)), rtol=1e-15)
    (g,) = mf.autograd.grad(checkpoint(lin, x, use_reentrant=False).sum(), [x])
    np.testing.assert_allclose(g.numpy(), np.tile(W.sum(0), (4, 1)), rtol=1e-15)
    assert lin.weight.grad is None and lin.bias.grad is None


def test_checkpoint_integer_and_detached_outputs_require_no_grad():
    """As PyTorch's: an argmax output and a detached one are leaves that require no grad; the float output
    still carries the gradient (d sum(2t) / dt = 2)."""
    x = cpu([1.0, 3.0, 2.0], requires_grad=True)
    y, i, d = checkpoint(lambda t: (t * 2, t.argmax(), (t * 3).detach()), x, use_reentrant=False)
    assert y.requires_grad and not i.requires_grad and i.is_leaf and not d.requires_grad and d.is_leaf
    assert int(i.item()) == 1 and d.tolist() == [3.0, 9.0, 6.0]
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_checkpoint_recomputes_in_the_autocast_region_of_the_forward():
    """The backward's second run casts as the first one did (bfloat16 inside ``autocast('cpu')``), so the
    gradients are those of the plain call, bit for bit."""
    def grads(checkpointed):
        lin = nn.Linear(3, 2, device="cpu")
        with mf.no_grad():
            lin.weight.copy_(cpu(W.astype(np.float32)))
            lin.bias.copy_(cpu(B.astype(np.float32)))
        x = cpu(X.astype(np.float32) * 1.01, requires_grad=True)
        with mf.autocast("cpu"):
            out = checkpoint(lin, x, use_reentrant=False) if checkpointed else lin(x)
        (out.float() ** 2).sum().backward()
        return x.grad.numpy(), lin.weight.grad.numpy()

    for got, want in zip(grads(True), grads(False)):
        np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- norms
def test_rms_norm_default_eps_is_float32s_for_16_bit_inputs():
    """eps=None: float32's machine epsilon for a float16 / bfloat16 input (PyTorch computes them in float32),
    the input's own for float64: x / sqrt(x**2 + eps) at x = 1e-3."""
    for dtype in (mf.float16, mf.bfloat16):
        x = np.float64(np.asarray(1e-2 if dtype == mf.bfloat16 else 1e-3, dtype=np.dtype(dtype)))
        want = np.asarray(x / np.sqrt(x * x + np.finfo(np.float32).eps)).astype(np.dtype(dtype))
        got = F.rms_norm(cpu(np.full((1, 3), x), dtype=dtype), (3,))
        assert got.dtype == dtype
        np.testing.assert_array_equal(got.numpy(), np.full((1, 3), want))
        got = nn.RMSNorm(3, device="cpu").to(dtype)(cpu(np.full((2, 3), x), dtype=dtype))
        np.testing.assert_array_equal(got.numpy(), np.full((2, 3), want))
    got = F.rms_norm(cpu(np.full((1, 3), 1e-3)), (3,))
    np.testing.assert_allclose(got.numpy(), 1e-3 / np.sqrt(1e-6 + np.finfo(np.float64).eps), rtol=1e-15)


@pytest.mark.parametrize("shape", [(0, 3, 4), (2, 0, 4), (2, 3, 0), (0, 3, 0), (2, 3, 0, 4)])
def test_instance_norm_of_an_empty_input_is_empty(shape):
    """An empty batch, no channels or no positions: an empty result (the weight's gradient zeros, the running
    statistics kept), functional and module alike; one position per instance is still an error."""
    x = cpu(np.ones(shape))
    assert F.instance_norm(x).shape == shape
    c = shape[1]
    cls = nn.InstanceNorm1d if len(shape) == 3 else nn.InstanceNorm2d
    m = cls(c, affine=True, track_running_stats=True, dtype=mf.float64, device="cpu")
    xr = cpu(np.ones(shape), requires_grad=True)
    y = m(xr)
    assert y.shape == shape
    y.sum().backward()
    assert xr.grad.shape == shape and m.weight.grad.tolist() == [0.0] * c
    assert m.running_mean.tolist() == [0.0] * c and m.running_var.tolist() == [1.0] * c
    m.eval()
    assert m(x).shape == shape
    with pytest.raises(ValueError, match="more than 1 spatial element"):
        F.instance_norm(cpu(np.ones(shape[:2] + (1,))))


def test_group_norm_without_affine_takes_any_divisible_channel_count():
    """GroupNorm(2, 4, affine=False) on 6 channels: two groups of 3 channels normalized (biased variance), as
    PyTorch; with affine the channel count must be num_channels."""
    x = np.arange(2 * 6 * 3, dtype=np.float64).reshape(2, 6, 3) ** 1.5
    g = x.reshape(2, 2, -1)
    want = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
    got = nn.GroupNorm(2, 4, affine=False, device="cpu")(cpu(x))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="expected 4 channels"):
        nn.GroupNorm(2, 4, dtype=mf.float64, device="cpu")(cpu(x))


# ---------------------------------------------------------------- dropout
@pytest.mark.parametrize("cls", [nn.AlphaDropout, nn.FeatureAlphaDropout])
def test_alpha_dropout_modules_never_write_into_their_input(cls):
    """PyTorch's AlphaDropout / FeatureAlphaDropout ignore inplace=True: the input keeps its ones."""
    x = cpu(np.ones((4, 5, 3)))
    y = cls(0.5, inplace=True)(x)
    assert np.all(x.numpy() == 1.0) and y is not x and not np.all(y.numpy() == 1.0)


def test_in_place_dropout_of_probability_one_gives_nan_for_inf_and_nan_as_out_of_place():
    """p=1 keeps nothing: x * 0, so inf and NaN give NaN in either form (PyTorch's), finite values 0; the
    gradient through the in-place form is 0."""
    want = [np.nan, np.nan, 0.0]
    np.testing.assert_array_equal(F.dropout(cpu([np.inf, np.nan, 1.0]), 1.0, True).numpy(), want)
    x = cpu([np.inf, np.nan, 1.0])
    assert F.dropout(x, 1.0, True, True) is x
    np.testing.assert_array_equal(x.numpy(), want)
    leaf = cpu([1.0, -2.0, 3.0], requires_grad=True)
    h = leaf * 1.0
    F.dropout(h, 1.0, True, True).sum().backward()
    assert h.tolist() == [0.0, 0.0, 0.0] and leaf.grad.tolist() == [0.0, 0.0, 0.0]


# ---------------------------------------------------------------- activation classes
def test_activation_classes_are_siblings_as_in_pytorch():
    """Softmin is no GLU, CELU no ELU, Hardswish no Hardsigmoid, Softshrink no Hardshrink (PyTorch's classes
    derive from Module each); each still computes its function."""
    pairs = [(nn.Softmin(1), nn.GLU), (nn.CELU(), nn.ELU), (nn.Hardswish(), nn.Hardsigmoid),
             (nn.Softshrink(), nn.Hardshrink)]
    assert not any(isinstance(m, cls) for m, cls in pairs)
    v = np.array([[-2.0, 0.25, 1.5]])
    x = cpu(v)
    e = np.exp(-v)
    np.testing.assert_allclose(nn.Softmin(1)(x).numpy(), e / e.sum(1, keepdims=True), rtol=1e-15)
    np.testing.assert_allclose(nn.CELU(2.0)(x).numpy(), np.where(v > 0, v, 2.0 * np.expm1(v / 2.0)), rtol=1e-15)
    np.testing.assert_allclose(nn.Hardswish()(x).numpy(), v * np.clip(v + 3, 0, 6) / 6, rtol=1e-15)
    np.testing.assert_allclose(nn.Softshrink(0.5)(x).numpy(), [[-1.5, 0.0, 1.0]], rtol=1e-15)
    np.testing.assert_allclose(nn.Hardshrink(0.5)(x).numpy(), [[-2.0, 0.0, 1.5]], rtol=1e-15)
    assert repr(nn.Softmin(dim=1)) == "Softmin(dim=1)" and repr(nn.CELU()) == "CELU(alpha=1.0)"
