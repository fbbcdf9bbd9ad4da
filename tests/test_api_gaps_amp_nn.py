"""PyTorch names that minifused lacked: torch.amp's custom_fwd / custom_bwd / is_autocast_available, and
torch.nn.utils' clip_grad_norm, BatchNorm fusion, convert_conv2d_weight_memory_format, skip_init and
stateless.functional_call (with torch.func.functional_call)."""
import numpy as np
import pytest

import minifused as mf
from minifused import amp, autograd, nn


# ---------------------------------------------------------------- amp
def test_is_autocast_available():
    assert amp.is_autocast_available("cpu") and amp.is_autocast_available("cuda")
    assert amp.is_autocast_available("mps") is False
    with pytest.raises(RuntimeError, match="device type at start of device string: foo"):
        amp.is_autocast_available("foo")
    with pytest.raises(TypeError, match="must be str"):
        amp.is_autocast_available(None)


def _function(**fwd_kwargs):
    seen = {}

    class Scale(autograd.Function):
        @staticmethod
        @amp.custom_fwd(device_type="cpu", **fwd_kwargs)
        def forward(ctx, x, w):
            seen["fwd"] = (x.dtype, w.dtype, amp.is_autocast_enabled("cpu"))
            ctx.save_for_backward(x, w)
            return x * w

        @staticmethod
        @amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            seen["bwd"] = amp.is_autocast_enabled("cpu"), amp.get_autocast_dtype("cpu")
            return g * w, g * x

    return Scale, seen


def test_custom_fwd_bwd_carry_the_autocast_state():
    Scale, seen = _function()
    x = mf.tensor(np.array([1.0, 2.0], np.float32), device="cpu", requires_grad=True)
    w = mf.tensor(np.array([3.0, -1.0], np.float32), device="cpu", requires_grad=True)
    with mf.autocast("cpu", dtype=mf.float16):
        y = Scale.apply(x, w)
    assert seen["fwd"] == (np.float32, np.float32, True)  # no cast_inputs: inputs as they came
    y.sum().backward()  # outside the region, the backward runs under the forward's autocast state
    assert seen["bwd"] == (True, np.dtype(mf.float16))
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, -1.0])
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 2.0])
    Scale.apply(x, w).sum().backward()
    assert seen["fwd"][2] is False and seen["bwd"][0] is False


def test_custom_fwd_cast_inputs():
    Scale, seen = _function(cast_inputs=mf.float32)
    x = mf.tensor(np.array([1.5, 2.0]), device="cpu").to(mf.bfloat16).requires_grad_()
    w = mf.tensor(np.array([3.0, 0.5]), device="cpu", dtype=mf.float64, requires_grad=True)
    with mf.autocast("cpu"):
        y = Scale.apply(x, w)
    # bfloat16 cast up to float32; float64 is never cast; the forward ran with autocast off
    assert seen["fwd"] == (np.float32, np.float64, False)
    assert y.dtype == np.float64
    y.sum().backward()
    assert seen["bwd"][0] is False
    assert x.grad.dtype == mf.bfloat16  # the engine gives each input a gradient of its own dtype
    np.testing.assert_array_equal(x.grad.float().numpy(), [3.0, 0.5])
    np.testing.assert_array_equal(w.grad.numpy(), [1.5, 2.0])
    Scale.apply(x.detach(), w.detach())  # outside a region nothing is cast
    assert seen["fwd"] == (mf.bfloat16, np.float64, False)


def test_custom_fwd_bad_arguments():
    with pytest.raises(ValueError, match="expected `device_type` of type `str`"):
        amp.custom_fwd(lambda ctx: None, device_type=0)
    with pytest.raises(ValueError, match="device_type must be 'cuda' or 'cpu'"):
        amp.custom_bwd(device_type="xla")
    with pytest.raises(TypeError):
        amp.custom_fwd(lambda ctx: None)  # device_type is required, as PyTorch's

    class Plain(autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        @amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            return g * 2

    x = mf.ones(2, device="cpu", requires_grad=True)
    with pytest.raises(RuntimeError, match="custom_bwd: the backward's forward was not decorated"):
        Plain.apply(x).sum().backward()


# ---------------------------------------------------------------- nn.utils
def test_clip_grad_norm_deprecated_alias():
    p = nn.Parameter(mf.zeros(2, device="cpu"))
    p.grad = mf.tensor(np.array([3.0, 4.0], np.float32), device="cpu")
    with pytest.warns(FutureWarning, match="clip_grad_norm` is now deprecated in favor of"):
        total = nn.utils.clip_grad_norm([p], 1.0)
    assert float(total) == pytest.approx(5.0)
    np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8], rtol=1e-5)


def _bn_eval(n, seed):
    rng = np.random.default_rng(seed)
    bn = nn.BatchNorm1d(n, device="cpu")
    bn.running_mean._data[...] = rng.standard_normal(n)
    bn.running_var._data[...] = rng.uniform(0.5, 2.0, n)
    bn.weight._data[...] = rng.standard_normal(n)
    bn.bias._data[...] = rng.standard_normal(n)
    return bn.eval()


def test_fuse_linear_bn_matches_numpy():
    rng = np.random.default_rng(0)
    lin = nn.Linear(4, 3, device="cpu").eval()
    bn = _bn_eval(3, 1)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    w, b = lin.weight.numpy(), lin.bias.numpy()
    s = bn.weight.numpy() / np.sqrt(bn.running_var.numpy() + bn.eps)
    ref = (x @ w.T + b - bn.running_mean.numpy()) * s + bn.bias.numpy()
    fused = nn.utils.fuse_linear_bn_eval(lin, bn)
    assert isinstance(fused, nn.Linear) and fused is not lin and not fused.training
    np.testing.assert_allclose(fused(mf.tensor(x, device="cpu")).numpy(), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(bn(lin(mf.tensor(x, device="cpu"))).numpy(), ref, rtol=1e-5, atol=1e-5)
    fw, fb = nn.utils.fuse_linear_bn_weights(lin.weight, None, bn.running_mean, bn.running_var, bn.eps,
                                             bn.weight, bn.bias)
    assert isinstance(fw, nn.Parameter) and isinstance(fb, nn.Parameter) and fw.requires_grad
    np.testing.assert_allclose(fw.numpy(), w * s[:, None], rtol=1e-6)
    np.testing.assert_allclose(fb.numpy(), -bn.running_mean.numpy() * s + bn.bias.numpy(), rtol=1e-5, atol=1e-6)
    one = _bn_eval(1, 2)  # one feature: broadcast over every output
    s1 = one.weight.numpy() / np.sqrt(one.running_var.numpy() + one.eps)
    lin_nb = nn.Linear(4, 3, bias=False, device="cpu").eval()
    ref1 = (x @ lin_nb.weight.numpy().T - one.running_mean.numpy()) * s1 + one.bias.numpy()
    np.testing.assert_allclose(nn.utils.fuse_linear_bn_eval(lin_nb, one)(mf.tensor(x, device="cpu")).numpy(), ref1,
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="evaluation mode"):
        nn.utils.fuse_linear_bn_eval(nn.Linear(4, 3, device="cpu"), bn)
    with pytest.raises(ValueError, match="linear.out_features == bn.num_features"):
        nn.utils.fuse_linear_bn_eval(lin, _bn_eval(2, 3))
    with pytest.raises(TypeError, match="expected a Linear and a BatchNorm"):
        nn.utils.fuse_linear_bn_eval(bn, lin)


def test_fuse_conv_bn_exposed():
    from minifused.nn import fusion

    assert nn.utils.fuse_conv_bn_eval is fusion.fuse_conv_bn_eval
    assert nn.utils.fuse_conv_bn_weights is fusion.fuse_conv_bn_weights
    conv = nn.Conv2d(2, 3, 3, device="cpu").eval()
    bn = nn.BatchNorm2d(3, device="cpu")
    bn.running_mean._data[...] = [0.5, -1.0, 2.0]
    bn.running_var._data[...] = [1.5, 0.5, 2.0]
    bn.eval()
    x = mf.randn(1, 2, 5, 5, device="cpu")
    np.testing.assert_allclose(nn.utils.fuse_conv_bn_eval(conv, bn)(x).numpy(), bn(conv(x)).numpy(), rtol=1e-4,
                               atol=1e-5)


def test_convert_conv2d_weight_memory_format():
    model = nn.Sequential(nn.Conv2d(2, 4, 3, device="cpu"), nn.ReLU(), nn.Linear(4, 2, device="cpu"))
    before = model[0].weight.numpy().copy()
    out = nn.utils.convert_conv2d_weight_memory_format(model, mf.channels_last)
    assert out is model
    w = model[0].weight
    assert w.is_contiguous(memory_format=mf.channels_last) and not w.is_contiguous()
    np.testing.assert_array_equal(w.numpy(), before)  # same values, another layout
    assert model[2].weight.is_contiguous()
    nn.utils.convert_conv2d_weight_memory_format(model, mf.contiguous_format)
    assert model[0].weight.is_contiguous()
    with pytest.raises(ValueError, match="convert_conv2d_weight_memory_format: memory_format must be one of"):
        nn.utils.convert_conv2d_weight_memory_format(model, mf.preserve_format)


def test_skip_init():
    state = mf.get_rng_state()
    lin = nn.utils.skip_init(nn.Linear, 3, 2, device="cpu")
    assert isinstance(lin, nn.Linear) and lin.weight.shape == (2, 3) and lin.weight.requires_grad
    np.testing.assert_array_equal(lin.weight.numpy(), np.zeros((2, 3)))
    after = mf.get_rng_state()
    assert after["cpu"] == state["cpu"]  # no random number was drawn
    bn = nn.utils.skip_init(nn.BatchNorm1d, 4, device="cpu")
    assert bn.running_var.shape == (4,)

    class NoDevice(nn.Module):
        def __init__(self, n):
            super().__init__()

    with pytest.raises(RuntimeError, match="Module must support a 'device' arg to skip initialization"):
        nn.utils.skip_init(NoDevice, 3)
    with pytest.raises(RuntimeError, match="Expected a Module"):
        nn.utils.skip_init(int)


def test_functional_call_substitutes_and_restores():
    from minifused.func import functional_call as func_call
    from minifused.nn.utils.stateless import functional_call

    lin = nn.Linear(2, 2, device="cpu")
    own_w, own_b = lin.weight, lin.bias
    x = mf.tensor(np.array([[1.0, 2.0]], np.float32), device="cpu")
    w = mf.tensor(np.array([[1.0, 0.0], [2.0, -1.0]], np.float32), device="cpu", requires_grad=True)
    out = functional_call(lin, {"weight": w}, x)
    np.testing.assert_allclose(out.numpy(), np.array([[1.0, 0.0]]) + own_b.numpy()[None], rtol=1e-6)
    assert lin.weight is own_w and lin.bias is own_b
    out.sum().backward()  # the gradient goes to the given tensor
    np.testing.assert_allclose(w.grad.numpy(), [[1.0, 2.0], [1.0, 2.0]])
    assert own_w.grad is None
    zeros = {"weight": mf.zeros(2, 2, device="cpu"), "bias": mf.ones(2, device="cpu")}
    np.testing.assert_array_equal(func_call(lin, zeros, (x,)).numpy(), [[1.0, 1.0]])
    np.testing.assert_array_equal(func_call(lin, [{"weight": zeros["weight"]}, {"bias": zeros["bias"]}], x).numpy(),
                                  [[1.0, 1.0]])
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        func_call(lin, [zeros, {"bias": zeros["bias"]}], x)

    class Boom(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2, device="cpu")
            self.register_buffer("scale", mf.ones(1, device="cpu"))

        def forward(self, x, fail=False):
            if fail:
                raise KeyError("boom")
            return self.lin(x) * self.scale

    m = Boom()
    own_scale = m.scale
    with pytest.raises(KeyError):
        functional_call(m, {"lin.weight": w, "scale": mf.zeros(1, device="cpu")}, x, {"fail": True})
    assert m.lin.weight is not w and m.scale is own_scale  # restored even after an error
    np.testing.assert_array_equal(functional_call(m, {"scale": mf.zeros(1, device="cpu")}, x).numpy(), [[0, 0]])
    with pytest.raises(RuntimeError, match=r"Unexpected key\(s\): 'foo'"):
        functional_call(m, {"foo": w}, x, strict=True)
    functional_call(m, {"foo": w}, x)  # non-strict: an unknown name is set for the call and removed
    assert not hasattr(m, "foo")

    tied = nn.Sequential(nn.Linear(2, 2, bias=False, device="cpu"), nn.Linear(2, 2, bias=False, device="cpu"))
    tied[1].weight = tied[0].weight
    eye = mf.tensor(np.eye(2, dtype=np.float32), device="cpu")
    np.testing.assert_array_equal(functional_call(tied, {"0.weight": eye}, x).numpy(), x.numpy())
    assert tied[1].weight is tied[0].weight
    untied = functional_call(tied, {"0.weight": eye}, x, tie_weights=False).numpy()
    np.testing.assert_allclose(untied, x.numpy() @ tied[0].weight.numpy().T, rtol=1e-6)
    with pytest.raises(ValueError, match="which are tied"):
        functional_call(tied, {"0.weight": eye, "1.weight": mf.zeros(2, 2, device="cpu")}, x)
    with pytest.raises(TypeError, match="expected str keys and tensor values"):
        functional_call(lin, {"weight": 3}, x)
