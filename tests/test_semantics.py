"""PyTorch semantics: Tensor.data, set_grad_enabled as a call, view on strides it cannot express,
format specs, load_state_dict from foreign arrays with casts."""
import numpy as np
import pytest

import minifused as mf
from minifused import backend, nn


@pytest.fixture(autouse=True)
def _cpu_by_default(monkeypatch):
    """Tests without an explicit device run the NumPy path, also on a GPU machine."""
    monkeypatch.setattr(backend, "default_device", lambda: backend.CPU)


# ---------------------------------------------------------------- Tensor.data
def test_data_is_a_tensor_sharing_memory_off_the_tape():
    p = nn.Parameter(mf.tensor([1.0, 2.0, 3.0]))
    d = p.data
    assert isinstance(d, mf.Tensor) and not isinstance(d, nn.Parameter)
    assert not d.requires_grad and d.grad_fn is None and d.is_leaf
    d.add_(1)  # no no_grad needed: .data is off the tape
    np.testing.assert_array_equal(p.numpy(), [2, 3, 4])
    assert p.requires_grad
    p.data.mul_(2)
    p.data.copy_(p.data - 1)
    np.testing.assert_array_equal(p.numpy(), [3, 5, 7])
    p.data.zero_()
    np.testing.assert_array_equal(p.numpy(), [0, 0, 0])


def test_data_of_a_non_leaf_and_in_place_changes_unseen_by_autograd():
    # As in PyTorch, a change through .data is not recorded: backward uses the new values silently.
    x = mf.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    v = x._version
    x.data.mul_(10)
    assert x._version == v
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [20.0, 40.0])
    assert y.data.grad_fn is None and y.grad_fn is not None


def test_data_assignment_swaps_the_values():
    p = nn.Parameter(mf.zeros(3))
    other = mf.tensor([1.0, 2.0, 3.0])
    p.data = other
    assert isinstance(p, nn.Parameter) and p.requires_grad
    np.testing.assert_array_equal(p.numpy(), [1, 2, 3])
    other.add_(1)  # the storage is shared, as in PyTorch
    np.testing.assert_array_equal(p.numpy(), [2, 3, 4])
    p.data = mf.ones(2, 2, dtype=mf.float64)  # shape and dtype go with the storage
    assert p.shape == (2, 2) and p.dtype == mf.float64
    with pytest.raises(TypeError, match="Tensor.data: expected a Tensor, got ndarray"):
        p.data = np.zeros(3)


def test_manual_sgd_through_data_matches_the_optimizer():
    mf.manual_seed(0)
    a = nn.Linear(3, 2)
    b = nn.Linear(3, 2)
    b.load_state_dict(a.state_dict())
    opt = mf.optim.SGD(b.parameters(), lr=0.1)
    x = mf.randn(4, 3)
    for model in (a, b):
        model(x).pow(2).sum().backward()
    for p in a.parameters():
        p.data -= 0.1 * p.grad
    opt.step()
    for pa, pb in zip(a.parameters(), b.parameters()):
        np.testing.assert_allclose(pa.numpy(), pb.numpy(), rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- set_grad_enabled
def test_set_grad_enabled_as_a_call_a_context_and_a_decorator():
    x = mf.ones(2, requires_grad=True)
    try:
        mf.set_grad_enabled(False)
        assert not mf.is_grad_enabled() and (x * 2).grad_fn is None
        mf.set_grad_enabled(True)
        assert mf.is_grad_enabled() and (x * 2).grad_fn is not None
        with mf.set_grad_enabled(False):
            assert not mf.is_grad_enabled()
        assert mf.is_grad_enabled()
        with mf.no_grad():
            with mf.set_grad_enabled(True):
                assert mf.is_grad_enabled()
            assert not mf.is_grad_enabled()

        @mf.set_grad_enabled(False)
        def f():
            return mf.is_grad_enabled()

        assert mf.is_grad_enabled()  # decorating does not change the mode
        assert f() is False and mf.is_grad_enabled()
    finally:
        mf.set_grad_enabled(True)


# ---------------------------------------------------------------- view
def test_view_shares_memory_and_refuses_strides_it_cannot_express():
    x = mf.arange(12.0).reshape(3, 4)
    v = x.view(2, 6)
    with mf.no_grad():
        v[0, 0] = 100.0
    assert float(x[0, 0]) == 100.0
    assert x.view(-1).shape == (12,)
    assert x.T.view(4, 3, 1).shape == (4, 3, 1)  # adding a unit dim is expressible
    assert x[:, :2].view(3, 1, 2).shape == (3, 1, 2)
    msg = r"view size is not compatible with input tensor's size and stride .*Use \.reshape\(\.\.\.\) instead"
    with pytest.raises(RuntimeError, match=msg):
        x.T.view(12)
    with pytest.raises(RuntimeError, match=msg):
        x[:, :2].view(6)
    np.testing.assert_array_equal(x.T.reshape(12).numpy(), x.numpy().T.reshape(12))
    with pytest.raises(RuntimeError, match=r"view: shape \[5\] is invalid for input of size 12"):
        x.view(5)
    with pytest.raises(TypeError, match="view: sizes must be ints"):
        x.view(2.0, 6)


def test_view_gradient():
    x = mf.arange(6.0, requires_grad=True)
    (x.view(2, 3) * mf.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1, 2, 3, 1, 2, 3])


def test_repeat_and_tile_of_a_transposed_tensor_are_contiguous_copies():
    x = mf.arange(6.0).reshape(2, 3).T
    for y in (x.repeat(1, 1), x.tile((1,)), x.repeat(2, 1)):
        assert y.is_contiguous()
        np.testing.assert_array_equal(y.view(-1).numpy(), np.tile(x.numpy(), (y.shape[0] // 3, 1)).reshape(-1))
    assert mf.tensor(2.0).repeat(()).shape == () and mf.tensor(2.0).tile(()).shape == ()


# ---------------------------------------------------------------- format
def test_format_specs():
    assert f"{mf.tensor(3.14159):.2f}" == "3.14"
    assert f"{mf.tensor([2.5])[0]:.1f}" == "2.5" and f"{mf.tensor([[7]])[0, 0]:>3d}" == "  7"
    assert f"{mf.tensor(1.5)}" == "1.5"  # a 0-d tensor formats as its value, as in PyTorch
    assert format(mf.tensor([1.0, 2.0])) == str(mf.tensor([1.0, 2.0]))
    loss = mf.tensor([1.0, 3.0]).mean()
    assert f"loss {loss:.3f}" == "loss 2.000"
    # PyTorch's rule: a format spec only on a 0-d tensor, a one-element 1-D one (top-k accuracy's) refused too
    for t in (mf.tensor([1.0, 2.0]), mf.tensor([2.5]), mf.tensor([[7]])):
        with pytest.raises(TypeError, match=r"unsupported format string passed to Tensor.__format__ \(format spec"):
            f"{t:.2f}"


# ---------------------------------------------------------------- load_state_dict
def _model():
    mf.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def test_load_state_dict_from_numpy_casts_to_the_parameters_dtype():
    model = _model()
    rng = np.random.default_rng(0)
    sd = {k: rng.standard_normal(v.shape) for k, v in model.state_dict().items()}  # float64 arrays
    model.load_state_dict(sd)
    for k, v in model.state_dict().items():
        assert v.dtype == mf.float32
        np.testing.assert_array_equal(v.numpy(), sd[k].astype(np.float32))
    half = {k: (v * 0.5).astype(backend.bfloat16) for k, v in sd.items()}
    model.load_state_dict(half)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), half[k].astype(np.float32))
    model.load_state_dict({k: mf.tensor(v, dtype=mf.float64) for k, v in sd.items()})  # Tensors too
    np.testing.assert_array_equal(model.state_dict()["0.weight"].numpy(), sd["0.weight"].astype(np.float32))


class _ArrayInterfaceOnly:
    """An object that offers its values through __array_interface__ alone."""

    def __init__(self, a):
        self._a = np.ascontiguousarray(a)
        self.__array_interface__ = self._a.__array_interface__
        self.shape, self.dtype = self._a.shape, self._a.dtype


def test_load_state_dict_from_array_interface_objects():
    model = _model()
    sd = {k: _ArrayInterfaceOnly(np.full(v.shape, 0.25)) for k, v in model.state_dict().items()}
    model.load_state_dict(sd)
    assert all(np.all(v.numpy() == 0.25) for v in model.state_dict().values())


def test_load_state_dict_checks_every_shape_before_copying():
    model = _model()
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    sd = {k: np.ones(v.shape) for k, v in model.state_dict().items()}
    sd["2.bias"] = np.ones(3)  # the last key is wrong
    with pytest.raises(RuntimeError, match=r"size mismatch for 2\.bias: copying a param with shape \(3,\) from "
                                           r"checkpoint, the shape in current model is \(2,\)"):
        model.load_state_dict(sd)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])
    sd["2.bias"] = "not an array"
    with pytest.raises(RuntimeError, match="2.bias: a str in the state dict"):
        model.load_state_dict(sd)
    sd["2.bias"] = np.array(["a", "b"])
    with pytest.raises(RuntimeError, match="2.bias: dtype <U1 in the state dict cannot be copied"):
        model.load_state_dict(sd)


@pytest.mark.gpu
def test_load_state_dict_from_cupy_and_torch_onto_either_device(torch):
    import cupy

    for device in ("cpu", "cuda"):
        model = _model().to(device)
        ref = {k: np.random.default_rng(1).standard_normal(v.shape) for k, v in model.state_dict().items()}
        model.load_state_dict({k: cupy.asarray(v) for k, v in ref.items()})  # float64 cupy -> float32
        for k, v in model.state_dict().items():
            assert v.device.type == device and v.dtype == mf.float32
            np.testing.assert_array_equal(v.cpu().numpy(), ref[k].astype(np.float32))
        for tdev in ("cpu", "cuda"):
            for tdtype in (torch.float32, torch.float64, torch.bfloat16):
                sd = {k: torch.tensor(v, device=tdev).to(tdtype) for k, v in ref.items()}
                model.load_state_dict(sd)
                for k, v in model.state_dict().items():
                    want = sd[k].float().cpu().numpy()
                    np.testing.assert_array_equal(v.cpu().numpy(), want)


def test_state_dict_keep_vars_and_destination():
    model = _model()
    kept = model.state_dict(keep_vars=True)
    assert kept["0.weight"] is model[0].weight and kept["0.weight"].requires_grad
    plain = model.state_dict()
    assert not plain["0.weight"].requires_grad and not isinstance(plain["0.weight"], nn.Parameter)
    dest = {"extra": 1}
    assert model.state_dict(destination=dest, prefix="m.") is dest
    assert sorted(dest) == ["extra", "m.0.bias", "m.0.weight", "m.2.bias", "m.2.weight"]


# ---------------------------------------------------------------- ReLU of NaN
# PyTorch's relu keeps a NaN (relu(nan) is nan) and passes its gradient (its backward cuts only where the
# value is <= 0); every ReLU this package runs itself does the same: the elementwise forms, and the ReLU
# fused into Conv2d's epilogue and into BatchNorm's. (cuBLASLt's Linear epilogue maps NaN to 0.)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("form", ["F.relu", "nn.ReLU", "relu_ on a copy"])
def test_relu_keeps_nan_and_its_gradient(device, dtype, form):
    values = np.array([np.nan, -1.0, 0.0, 2.0, np.nan, -3.0, 5.0] * 5, np.float32)  # past one 16-byte chunk
    x = mf.tensor(values, device=device, dtype=dtype, requires_grad=True)
    if form == "F.relu":
        y = nn.functional.relu(x)
    elif form == "nn.ReLU":
        y = nn.ReLU()(x)
    else:
        y = nn.functional.relu_(x * 1)
    g = np.arange(1, values.size + 1, dtype=np.float32)
    y.backward(mf.tensor(g, device=device, dtype=dtype))
    out = y.detach().float().cpu().numpy()
    nan = np.isnan(values)
    np.testing.assert_array_equal(np.isnan(out), nan)
    np.testing.assert_array_equal(out[~nan], np.maximum(values[~nan], 0))
    np.testing.assert_array_equal(x.grad.float().cpu().numpy(), np.where(nan | (values > 0), g, 0))


def _nan_bias_channel(m, channel):
    with mf.no_grad():
        m.bias[channel] = float("nan")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("norm", [False, True])
@pytest.mark.parametrize("channels", [1, 8, 64])  # the direct kernels, the implicit GEMM, the TMA kernels
@pytest.mark.parametrize("grad", [True, False])
def test_fused_conv_relu_keeps_nan_and_its_gradient(device, dtype, norm, channels, grad):
    """Sequential runs Conv2d + ReLU (and Conv2d + BatchNorm2d + ReLU) as fused ops, the ReLU in the conv's or
    the norm's kernel. A NaN bias makes one channel NaN: the ReLU keeps it, and the gradient of that bias is the
    sum of the upstream gradient over the channel, as in PyTorch (it would be 0 if the ReLU cut the NaN)."""
    mf.manual_seed(0)
    conv = nn.Conv2d(channels, 64, 3, padding=1)
    layers = [conv, nn.BatchNorm2d(64), nn.ReLU()] if norm else [conv, nn.ReLU()]
    model = nn.Sequential(*layers).to(device=device, dtype=dtype)
    biased = layers[1] if norm else conv
    _nan_bias_channel(biased, 5)
    x = mf.randn(4, channels, 6, 6, device=device, dtype=dtype)
    if not grad:
        with mf.no_grad():
            out = model.eval()(x).float().cpu().numpy()
        assert np.isnan(out[:, 5]).all() and not np.isnan(np.delete(out, 5, axis=1)).any()
        return
    y = model(x)
    g = mf.rand(*y.shape, device=device, dtype=dtype)
    y.backward(g)
    out = y.detach().float().cpu().numpy()
    assert np.isnan(out[:, 5]).all() and not np.isnan(np.delete(out, 5, axis=1)).any()
    want = g.float().cpu().numpy()[:, 5].astype(np.float64).sum()
    got = float(biased.bias.grad.float().cpu().numpy()[5])
    np.testing.assert_allclose(got, want, rtol=2e-2 if dtype == "bfloat16" else 1e-5)
    assert not np.isnan(conv.weight.grad.float().cpu().numpy()).any()
