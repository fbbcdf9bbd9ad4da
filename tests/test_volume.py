"""The volumetric (3-D) layers: initialisation, reprs and state_dict keys as PyTorch's, each module against its
functional form and float64 NumPy references, the padding modes, a tiny 3-D CNN that trains, and (GPU) cuda
against the cpu. The functions' values, gradients and errors: their entries in tests/opinfo.py (VOLUME_OPS)."""
import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
import minifused.nn as nn
from opinfo import _pool3d_ref, conv3d_ref, conv_transpose3d_ref

NP_PAD = {"zeros": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def params64(module):
    """The module in float64 (its parameters' values kept), and its parameters as NumPy arrays."""
    module = module.double()
    return module, {k: v.detach().numpy() for k, v in module.state_dict().items()}


# ---------------------------------------------------------------- initialisation, repr, state_dict
@pytest.mark.parametrize("make,fan_in", [(lambda: nn.Conv3d(6, 8, (3, 2, 4)), 6 * 24),
                                         (lambda: nn.Conv3d(6, 9, 3, groups=3), 2 * 27),
                                         (lambda: nn.ConvTranspose3d(6, 8, (2, 3, 3)), 8 * 18),
                                         (lambda: nn.ConvTranspose3d(6, 8, 3, groups=2), 4 * 27)])
def test_conv_init_is_pytorchs_kaiming_uniform(make, fan_in):
    """weight and bias U(-1/√fan_in, 1/√fan_in) (kaiming_uniform(a=√5)), fan_in = weight.shape[1]·kD·kH·kW."""
    mf.manual_seed(0)
    m = make()
    bound = 1 / np.sqrt(fan_in)
    w, b = m.weight.numpy(), m.bias.numpy()
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert abs(w.std() - bound / np.sqrt(3)) < 0.1 * bound  # a uniform's spread, not a normal's or a constant
    assert np.abs(w).max() > 0.9 * bound


def test_shapes_state_dict_and_defaults():
    c = nn.Conv3d(4, 6, (3, 1, 2), groups=2)
    assert c.weight.shape == (6, 2, 3, 1, 2) and c.bias.shape == (6,) and c.weight.dtype == mf.float32
    assert list(c.state_dict()) == ["weight", "bias"]
    t = nn.ConvTranspose3d(4, 6, 3, groups=2, bias=False)
    assert t.weight.shape == (4, 3, 3, 3, 3) and t.bias is None and list(t.state_dict()) == ["weight"]
    assert (c.stride, c.padding, c.dilation, c.kernel_size) == ((1, 1, 1), (0, 0, 0), (1, 1, 1), (3, 1, 2))
    assert nn.MaxPool3d(2).stride == 2 and nn.AvgPool3d(3, 1).stride == 1
    assert nn.MaxUnpool3d(2).stride == (2, 2, 2)


# the reprs PyTorch 2.14 prints for the same constructions (checked by hand)
REPRS = [
    (lambda: nn.Conv3d(2, 4, 3), "Conv3d(2, 4, kernel_size=(3, 3, 3), stride=(1, 1, 1))"),
    (lambda: nn.Conv3d(2, 4, (3, 1, 2), stride=2, padding=1, dilation=(1, 2, 1), groups=2, bias=False,
                       padding_mode="reflect"),
     "Conv3d(2, 4, kernel_size=(3, 1, 2), stride=(2, 2, 2), padding=(1, 1, 1), dilation=(1, 2, 1), groups=2, "
     "bias=False, padding_mode=reflect)"),
    (lambda: nn.Conv3d(2, 4, 3, padding="same"), "Conv3d(2, 4, kernel_size=(3, 3, 3), stride=(1, 1, 1), padding=same)"),
    (lambda: nn.ConvTranspose3d(2, 4, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=2, bias=False),
     "ConvTranspose3d(2, 4, kernel_size=(3, 3, 3), stride=(2, 2, 2), padding=(1, 1, 1), dilation=(2, 2, 2), "
     "output_padding=(1, 1, 1), groups=2, bias=False)"),
    (lambda: nn.MaxPool3d(3, 2, 1, 2, True, True),
     "MaxPool3d(kernel_size=3, stride=2, padding=1, dilation=2, ceil_mode=True)"),
    (lambda: nn.AvgPool3d(2), "AvgPool3d(kernel_size=2, stride=2, padding=0)"),
    (lambda: nn.AdaptiveAvgPool3d((2, None, 3)), "AdaptiveAvgPool3d(output_size=(2, None, 3))"),
    (lambda: nn.AdaptiveMaxPool3d(2, True), "AdaptiveMaxPool3d(output_size=2)"),
    (lambda: nn.LPPool3d(2, (2, 3, 2), 1, True),
     "LPPool3d(norm_type=2, kernel_size=(2, 3, 2), stride=1, ceil_mode=True)"),
    (lambda: nn.MaxUnpool3d(3, 2, 1), "MaxUnpool3d(kernel_size=(3, 3, 3), stride=(2, 2, 2), padding=(1, 1, 1))"),
    (lambda: nn.ZeroPad3d((1, 2, 3, 4, 5, 6)), "ZeroPad3d((1, 2, 3, 4, 5, 6))"),
    (lambda: nn.ConstantPad3d(2, 3.5), "ConstantPad3d(padding=(2, 2, 2, 2, 2, 2), value=3.5)"),
    (lambda: nn.ReflectionPad3d(1), "ReflectionPad3d((1, 1, 1, 1, 1, 1))"),
    (lambda: nn.ReplicationPad3d((1, 0, 1, 0, 1, 0)), "ReplicationPad3d((1, 0, 1, 0, 1, 0))"),
    (lambda: nn.CircularPad3d(1), "CircularPad3d((1, 1, 1, 1, 1, 1))"),
]


@pytest.mark.parametrize("make,want", REPRS, ids=[w.split("(")[0] + str(i) for i, (_, w) in enumerate(REPRS)])
def test_repr_is_pytorchs(make, want):
    assert repr(make()) == want


@pytest.mark.parametrize("make,exc,match", [
    (lambda: nn.Conv3d(3, 4, 3, groups=2), ValueError, "Conv3d: in_channels must be divisible by groups"),
    (lambda: nn.Conv3d(3, 4, 3, stride=2, padding="same"), ValueError,
     "Conv3d: padding='same' is not supported for strided convolutions"),
    (lambda: nn.Conv3d(3, 4, 3, padding="full"), ValueError, "Conv3d: Invalid padding string 'full'"),
    (lambda: nn.Conv3d(3, 4, 3, padding_mode="foo"), ValueError, "Conv3d: padding_mode must be one of"),
    (lambda: nn.Conv3d(3, 4, (3, 3)), ValueError, "Conv3d: kernel_size must be an int or a tuple of three ints"),
    (lambda: nn.ConvTranspose3d(3, 4, 3, padding_mode="reflect"), ValueError,
     'ConvTranspose3d: Only "zeros" padding mode is supported'),
    (lambda: nn.ConvTranspose3d(2, 4, 3, stride=2)(mf.randn(1, 2, 3, 3, 3), output_size=(9, 7, 7)), ValueError,
     r"ConvTranspose3d: requested an output size of \[9, 7, 7\], but valid sizes range from \[7, 7, 7\] to "
     r"\[8, 8, 8\]"),
    (lambda: nn.ReflectionPad3d(3)(mf.randn(1, 1, 3, 3, 3)), ValueError, "pad: reflect padding"),
])
def test_module_errors(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


# ---------------------------------------------------------------- values against NumPy
@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("kw", [dict(kernel_size=3, padding=1), dict(kernel_size=(2, 3, 2), padding="same",
                                                                     dilation=(1, 1, 3)),
                                dict(kernel_size=(3, 1, 2), stride=2, padding=(1, 0, 1), groups=2)])
def test_conv3d_padding_modes_against_numpy(mode, kw):
    m, p = params64(nn.Conv3d(4, 6, padding_mode=mode, **kw))
    x = rand(2, 4, 5, 6, 7)
    pad = kw["padding"]
    if pad == "same":
        pads = [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for d, k in zip(m.dilation, m.kernel_size)]
    else:
        pads = [(q, q) for q in m.padding]
    want = conv3d_ref(np.pad(x, ((0, 0), (0, 0), *pads), mode=NP_PAD[mode]), p["weight"], p["bias"], m.stride, 0,
                      m.dilation, m.groups)
    got = m(mf.tensor(x)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    unbatched = m(mf.tensor(x[1])).detach().numpy()
    np.testing.assert_allclose(unbatched, want[1], rtol=1e-10, atol=1e-12)


def test_conv_transpose3d_module_and_output_size():
    m, p = params64(nn.ConvTranspose3d(2, 4, 3, stride=2, padding=1))
    x = rand(1, 2, 3, 4, 2)
    for size, op in [(None, 0), ((6, 8, 4), (1, 1, 1)), ((1, 4, 5, 7, 4), (0, 0, 1)), ((5, 8, 3), (0, 1, 0))]:
        want = conv_transpose3d_ref(x, p["weight"], p["bias"], 2, 1, op)
        got = m(mf.tensor(x), output_size=size).detach().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_modules_equal_their_functions():
    x = mf.tensor(rand(2, 3, 6, 5, 7))
    pairs = [(nn.MaxPool3d(3, 2, 1, ceil_mode=True), lambda t: F.max_pool3d(t, 3, 2, 1, ceil_mode=True)),
             (nn.AvgPool3d(3, 2, 1, True, False), lambda t: F.avg_pool3d(t, 3, 2, 1, True, False)),
             (nn.AvgPool3d(2, divisor_override=5), lambda t: F.avg_pool3d(t, 2, divisor_override=5)),
             (nn.AdaptiveAvgPool3d((2, 3, None)), lambda t: F.adaptive_avg_pool3d(t, (2, 3, None))),
             (nn.AdaptiveMaxPool3d(2), lambda t: F.adaptive_max_pool3d(t, 2)),
             (nn.LPPool3d(2, 2), lambda t: F.lp_pool3d(t, 2, 2))]
    for module, fn in pairs:
        np.testing.assert_array_equal(module(x).numpy(), fn(x).numpy(), err_msg=repr(module))
    c = nn.Conv3d(3, 4, 2, stride=(1, 2, 1), padding=1, dilation=(2, 1, 1), bias=False).double()
    np.testing.assert_array_equal(c(x).detach().numpy(),
                                  F.conv3d(x, c.weight, None, (1, 2, 1), 1, (2, 1, 1)).detach().numpy())


def test_pool_modules_against_numpy_and_unpool_roundtrip():
    x = rand(2, 3, 6, 4, 6)
    y, idx = nn.MaxPool3d(2, return_indices=True)(mf.tensor(x))
    np.testing.assert_array_equal(y.numpy(), _pool3d_ref("max")(x, 2))
    np.testing.assert_array_equal(idx.numpy(), _pool3d_ref("index")(x, 2))
    np.testing.assert_allclose(nn.AvgPool3d(3, 1, 1)(mf.tensor(x)).numpy(), _pool3d_ref("avg")(x, 3, 1, 1),
                               rtol=1e-12)
    back = nn.MaxUnpool3d(2)(y, idx).numpy()
    keep = x == np.repeat(np.repeat(np.repeat(_pool3d_ref("max")(x, 2), 2, 2), 2, 3), 2, 4)
    np.testing.assert_array_equal(back, np.where(keep, x, 0))


def test_max_pool3d_ties_pick_the_first_maximum_and_route_the_gradient_there():
    """Equal values: PyTorch's scan (depth, then height, then width) keeps the first; the gradient goes to it
    alone (checked against torch by hand: indices [[0, 1, 2], [4, 5, 6], [8, 9, 10]] for the first depth)."""
    x = mf.ones(1, 1, 3, 4, 4, requires_grad=True)
    y, idx = F.max_pool3d(x, 2, stride=1, return_indices=True)
    np.testing.assert_array_equal(idx.numpy()[0, 0, 0], [[0, 1, 2], [4, 5, 6], [8, 9, 10]])
    y.sum().backward()
    want = np.zeros((3, 4, 4))
    np.add.at(want.reshape(-1), idx.numpy().reshape(-1), 1.0)
    np.testing.assert_array_equal(x.grad.numpy()[0, 0], want)


@pytest.mark.parametrize("name,mode", [("ZeroPad3d", "constant"), ("ReflectionPad3d", "reflect"),
                                       ("ReplicationPad3d", "edge"), ("CircularPad3d", "wrap")])
def test_padding_modules_against_numpy(name, mode):
    x = rand(2, 3, 4, 5, 3)
    padding = (2, 1, 0, 3, 1, 2)  # (left, right, top, bottom, front, back)
    pads = ((0, 0), (0, 0), (1, 2), (0, 3), (2, 1))
    got = getattr(nn, name)(padding)(mf.tensor(x)).numpy()
    np.testing.assert_array_equal(got, np.pad(x, pads, mode=mode))
    np.testing.assert_array_equal(getattr(nn, name)(padding)(mf.tensor(x[0])).numpy(),
                                  np.pad(x[0], pads[1:], mode=mode))
    np.testing.assert_array_equal(nn.ConstantPad3d(1, -2.0)(mf.tensor(x)).numpy(),
                                  np.pad(x, ((0, 0),) * 2 + ((1, 1),) * 3, constant_values=-2.0))


# ---------------------------------------------------------------- a tiny 3-D CNN
def _tiny_cnn():
    return nn.Sequential(nn.Conv3d(2, 4, 3, padding=1), nn.ReLU(), nn.MaxPool3d(2),
                         nn.Conv3d(4, 4, 2, padding_mode="replicate", padding=1), nn.ReLU(),
                         nn.AvgPool3d(2, ceil_mode=True), nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(4, 3))


def test_tiny_3d_cnn_trains_on_the_cpu():
    mf.manual_seed(0)
    model = _tiny_cnn()
    x = mf.tensor(rand(4, 2, 6, 6, 6).astype(np.float32))
    target = mf.tensor(np.array([0, 1, 2, 1]))
    opt = mf.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), target)
        loss.backward()
        assert all(p.grad is not None and np.isfinite(p.grad.numpy()).all() for p in model.parameters())
        opt.step()
        losses.append(float(loss.item()))
    assert losses[2] < losses[1] < losses[0], losses


# ---------------------------------------------------------------- cuda against the cpu
@pytest.mark.gpu
@pytest.mark.parametrize("make", [lambda: nn.Conv3d(3, 4, (3, 2, 3), stride=(1, 2, 1), padding=1, groups=1),
                                  lambda: nn.Conv3d(4, 4, 2, groups=2, padding="same", padding_mode="circular"),
                                  lambda: nn.ConvTranspose3d(3, 4, 3, stride=2, padding=1, output_padding=1),
                                  lambda: nn.MaxPool3d(3, 2, 1, ceil_mode=True),
                                  lambda: nn.AvgPool3d(3, 2, 1, count_include_pad=False),
                                  lambda: nn.AdaptiveMaxPool3d((2, 3, 2))])
def test_cuda_matches_cpu(make):
    mf.manual_seed(0)
    cpu = make().to("cpu")  # (the GPU machine's default device is cuda)
    channels = 4 if isinstance(cpu, nn.Conv3d) and cpu.groups == 2 else 3
    x_np = rand(2, channels, 5, 6, 7).astype(np.float32)
    results = []
    for device in ("cpu", "cuda"):
        m = cpu.to(device) if device == "cuda" else cpu
        x = mf.tensor(x_np, device=device, requires_grad=True)
        y = m(x)
        y.backward(mf.tensor(rand(*y.shape, seed=1).astype(np.float32), device=device))
        results.append([y.detach().cpu().numpy(), x.grad.cpu().numpy()]
                       + [p.grad.cpu().numpy() for p in m.parameters()])
        for p in m.parameters():
            p.grad = None
    for a, b in zip(*results, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4)
