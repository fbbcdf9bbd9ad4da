"""Memory formats: the channels-last layout through the Tensor API, Module.to, and the ops that keep it
(convolution, ReLU, the same-shape add); on the GPU the channels-last convolution (read and written as it is by
the TMA kernels, or through the C-contiguous path) against the C-contiguous one."""
import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
import minifused.nn as nn
from minifused import backend
from minifused.kernels import conv as K
from minifused.kernels import elementwise as E
from minifused.kernels import channels_last_strided, is_channels_last, to_channels_last
from minifused.tensor import Tensor


def T(a, requires_grad=False):
    return Tensor._from_array(a, requires_grad)


def test_tensor_memory_format_api(rng):
    x = mf.tensor(rng.standard_normal((2, 3, 4, 5)).astype(np.float32))
    assert x.is_contiguous() and not x.is_contiguous(memory_format=mf.channels_last)
    y = x.to(memory_format=mf.channels_last)
    assert y.is_contiguous(memory_format=mf.channels_last) and not y.is_contiguous()
    assert y._data.strides == (240, 4, 60, 12)
    np.testing.assert_array_equal(y.numpy(), x.numpy())
    assert y.contiguous(memory_format=mf.channels_last) is y
    z = y.contiguous()
    assert z.is_contiguous() and np.array_equal(z.numpy(), x.numpy())
    assert x.to(memory_format=mf.preserve_format) is x
    assert y.to(mf.float64).dtype == mf.float64
    # a (N, 1, H, W) tensor is laid out both ways at once, as in PyTorch
    one = mf.zeros(2, 1, 3, 3)
    assert one.is_contiguous() and one.is_contiguous(memory_format=mf.channels_last)
    assert repr(mf.channels_last) == "minifused.channels_last"


def test_memory_format_bad_input():
    x = mf.zeros(2, 3)
    with pytest.raises(RuntimeError, match="contiguous: channels_last needs a 4-d"):
        x.contiguous(memory_format=mf.channels_last)
    with pytest.raises(ValueError, match="contiguous: memory_format must be one of"):
        mf.zeros(1, 2, 3, 4).contiguous(memory_format=mf.preserve_format)
    with pytest.raises(ValueError, match="to: memory_format must be one of"):
        x.to(memory_format="channels_last")
    with pytest.raises(ValueError, match="Module.to: memory_format must be one of"):
        nn.Conv2d(1, 1, 1).to(memory_format="nhwc")


def test_channels_last_gradient_passes_through(rng):
    x = mf.tensor(rng.standard_normal((2, 3, 4, 5)).astype(np.float32), requires_grad=True)
    y = x.to(memory_format=mf.channels_last)
    (y * mf.tensor(np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5))).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5))


@pytest.mark.parametrize("stride,bias,activation", [(1, True, None), (2, False, "relu"), (1, False, "relu")])
def test_conv2d_channels_last_on_cpu(stride, bias, activation, rng):
    """Same values and gradients as the C-contiguous input; the output channels-last."""
    xa = rng.standard_normal((2, 4, 7, 6))
    wa = rng.standard_normal((5, 4, 3, 3))
    ba = rng.standard_normal(5) if bias else None
    results = []
    for cl in (False, True):
        x = T(to_channels_last(xa) if cl else xa.copy(), True)
        w, b = T(wa.copy(), True), (T(ba.copy(), True) if bias else None)
        y = F.conv2d(x, w, b, stride=stride, padding=1)
        if activation:
            y = F.relu(y)
        assert is_channels_last(y._data) == cl
        (y * T(np.cos(np.arange(y.numel())).reshape(y.shape))).sum().backward()
        results.append([y.numpy(), x.grad.numpy(), w.grad.numpy()] + ([b.grad.numpy()] if bias else []))
    for a, b in zip(*results):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)


def test_module_to_channels_last_brings_conv_inputs_to_it(rng):
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 3, padding=1))
    x = mf.tensor(rng.standard_normal((2, 3, 6, 6)).astype(np.float32))
    before = model(x).numpy()
    assert model.to(memory_format=mf.channels_last) is model
    y = model(x)
    assert y.is_contiguous(memory_format=mf.channels_last) and not y.is_contiguous()
    np.testing.assert_allclose(y.numpy(), before, rtol=1e-6, atol=1e-6)
    # PyTorch's rule: the 4-d parameters (the convolutions' weights) take the format, the others stay as they are
    for p in model.parameters():
        assert p.is_contiguous(memory_format=mf.channels_last) == (p.ndim == 4) and p.is_contiguous() == (p.ndim != 4)
    model.to(memory_format=mf.contiguous_format)
    assert model(x).is_contiguous()
    assert all(p.is_contiguous() for p in model.parameters())


CHANNELS_LAST_KEEPERS = {  # ops whose output (and input gradient) follow a channels-last input, as PyTorch's
    "max_pool2d": lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True),
    "avg_pool2d": lambda x: F.avg_pool2d(x, 2, count_include_pad=False),
    "adaptive_avg_pool2d exact": lambda x: F.adaptive_avg_pool2d(x, (3, 2)),
    "adaptive_avg_pool2d uneven": lambda x: F.adaptive_avg_pool2d(x, (4, 3)),
    "adaptive_max_pool2d": lambda x: F.adaptive_max_pool2d(x, (4, 3)),
    "conv_transpose2d": None,  # (the weight channels-last too, and its gradient with it)
}


@pytest.mark.parametrize("op", CHANNELS_LAST_KEEPERS)
def test_pooling_and_conv_transpose_keep_channels_last(op, device, rng):
    """A channels-last input gives a channels-last output and input gradient with the C-contiguous run's values
    (max pooling's kernels in place, the others on C-contiguous copies); conv_transpose2d's weight gradient takes the weight's layout."""
    x = rng.standard_normal((2, 8, 6, 4)).astype(np.float32)
    w = rng.standard_normal((8, 5, 3, 3)).astype(np.float32)
    fn = CHANNELS_LAST_KEEPERS[op] or (lambda a, b: F.conv_transpose2d(a, b, stride=2, padding=1,
                                                                        output_padding=1))
    runs = []
    for fmt in (mf.contiguous_format, mf.channels_last):
        xt = mf.tensor(x, device=device).to(memory_format=fmt).requires_grad_(True)
        wt = mf.tensor(w, device=device).to(memory_format=fmt).requires_grad_(True)
        y = fn(xt, wt) if op == "conv_transpose2d" else fn(xt)
        g = mf.tensor(np.random.default_rng(5).standard_normal(y.shape).astype(np.float32), device=device)
        (y * g).sum().backward()
        cl = fmt is mf.channels_last
        assert y.is_contiguous(memory_format=mf.channels_last) == cl and y.is_contiguous() != cl
        assert xt.grad.is_contiguous(memory_format=mf.channels_last) == cl and xt.grad.is_contiguous() != cl
        if op == "conv_transpose2d":
            assert wt.grad.is_contiguous(memory_format=mf.channels_last) == cl
        runs.append([t.detach().cpu().numpy() for t in (y, xt.grad) + ((wt.grad,) if op == "conv_transpose2d"
                                                                        else ())])
    for a, b in zip(*runs):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-6)


def test_adaptive_max_pool2d_indices_take_the_output_layout(rng):
    """PyTorch returns a channels-last input's indices channels-last too, as its output; their values are the
    contiguous run's (flat positions h*W + w in each plane)."""
    x = rng.standard_normal((2, 5, 7, 6))
    y0, i0 = F.adaptive_max_pool2d(mf.tensor(x), (3, 4), return_indices=True)
    y, idx = F.adaptive_max_pool2d(mf.tensor(x).to(memory_format=mf.channels_last), (3, 4), return_indices=True)
    assert idx.is_contiguous(memory_format=mf.channels_last) and not idx.is_contiguous()
    assert i0.is_contiguous() and idx.dtype == mf.int64
    np.testing.assert_array_equal(idx.numpy(), i0.numpy())
    np.testing.assert_array_equal(np.take_along_axis(x.reshape(2, 5, -1), idx.numpy().reshape(2, 5, -1), 2),
                                  y.numpy().reshape(2, 5, -1))


@pytest.mark.parametrize("x_cl,w_cl", [(False, True), (True, False)])
def test_conv_transpose2d_output_is_channels_last_where_input_or_weight_is(x_cl, w_cl, device, rng):
    """PyTorch's rule for convolutions: a channels-last weight (a model made channels-last) gives a channels-last
    output even from a contiguous input; each gradient keeps its own tensor's layout. Values as all-contiguous."""
    x = rng.standard_normal((2, 4, 5, 5)).astype(np.float32)
    w = rng.standard_normal((4, 6, 3, 3)).astype(np.float32)
    g = rng.standard_normal((2, 6, 11, 11)).astype(np.float32)
    runs = []
    for xf, wf in ((mf.contiguous_format, mf.contiguous_format),
                   (mf.channels_last if x_cl else mf.contiguous_format, mf.channels_last if w_cl else
                    mf.contiguous_format)):
        xt = mf.tensor(x, device=device).to(memory_format=xf).requires_grad_(True)
        wt = mf.tensor(w, device=device).to(memory_format=wf).requires_grad_(True)
        y = F.conv_transpose2d(xt, wt, stride=2)
        (y * mf.tensor(g, device=device)).sum().backward()
        runs.append([t.detach().cpu().numpy() for t in (y, xt.grad, wt.grad)])
    assert y.is_contiguous(memory_format=mf.channels_last) and not y.is_contiguous()
    assert xt.grad.is_contiguous(memory_format=mf.channels_last) == x_cl and xt.grad.is_contiguous() != x_cl
    assert wt.grad.is_contiguous(memory_format=mf.channels_last) == w_cl and wt.grad.is_contiguous() != w_cl
    for a, b in zip(*runs):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-6)


def test_channels_last_weights_train_as_contiguous_ones(device, rng):
    """A model made channels-last (weights, gradients and optimizer state in that layout, the state made before
    the switch following it) trains as the C-contiguous one: SGD with momentum, Adam and a state dict round
    trip. On the GPU the 64-channel convolution reads its channels-last weight unpacked and the fused
    optimizers walk the channels-last arrays."""
    def build():
        mf.manual_seed(3)
        # (no bias before the BatchNorm: its gradient would be rounding noise, which Adam scales up to lr)
        return nn.Sequential(nn.Conv2d(3, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                             nn.Conv2d(64, 64, 3, stride=2), nn.Flatten(), nn.Linear(64 * 3 * 3, 4)).to(device)

    x = mf.tensor(rng.standard_normal((4, 3, 8, 8)).astype(np.float32), device=device)
    y = mf.tensor(rng.integers(0, 4, 4), device=device)
    tol = dict(rtol=1e-5, atol=1e-6) if device == "cpu" else dict(rtol=1e-4, atol=1e-5)  # GPU: other kernels
    for make in (lambda ps: mf.optim.SGD(ps, lr=0.1, momentum=0.9), lambda ps: mf.optim.Adam(ps, lr=1e-2)):
        ref, cl = build(), build()
        opts = make(ref.parameters()), make(cl.parameters())
        for step in range(4):
            if step == 1:  # after the first step made the state C-contiguous
                cl.to(memory_format=mf.channels_last)
            for model, opt in zip((ref, cl), opts):
                opt.zero_grad()
                F.cross_entropy(model(x), y).backward()
                opt.step()
        for w in (cl[0].weight, cl[3].weight):
            assert w.is_contiguous(memory_format=mf.channels_last) and not w.is_contiguous()
            assert w.grad.is_contiguous(memory_format=mf.channels_last) and not w.grad.is_contiguous()
            for t in opts[1].state[w].values():
                if isinstance(t, mf.Tensor) and t.ndim == 4:
                    assert t.is_contiguous(memory_format=mf.channels_last) and not t.is_contiguous()
        for p, q in zip(ref.parameters(), cl.parameters()):
            np.testing.assert_allclose(q.detach().cpu().numpy(), p.detach().cpu().numpy(), **tol)
        # a state dict saved from the channels-last run loads into it again, keeping the layout
        w = cl[3].weight
        saved = {k: v.detach().cpu().numpy().copy() for k, v in cl.state_dict().items()}
        with mf.no_grad():
            w.mul_(0.0)
        cl.load_state_dict({k: mf.tensor(v) for k, v in saved.items()})
        assert w.is_contiguous(memory_format=mf.channels_last)
        np.testing.assert_array_equal(w.detach().cpu().numpy(), saved["3.weight"])
        opts[1].load_state_dict(opts[1].state_dict())
        for t in opts[1].state[w].values():
            if isinstance(t, mf.Tensor) and t.ndim == 4:
                assert t.is_contiguous(memory_format=mf.channels_last)


# ---------------------------------------------------------------- GPU
SHAPES = [  # (N, C, H, W, K, kernel, stride): TMA-read ones (channels multiples of 64), then through the fallback
    (4, 64, 16, 16, 64, 3, 1),
    (4, 64, 16, 16, 128, 3, 2),
    (3, 128, 8, 8, 64, 1, 2),
    (2, 128, 28, 28, 64, 3, 2),
    (2, 64, 8, 8, 192, 3, 1),
    (2, 128, 4, 4, 128, 3, 1),
    (2, 64, 14, 14, 64, 3, 1),  # tiles not whole rows: the GEMM path, reading x as it is
    (2, 64, 14, 14, 128, 3, 2),
    (2, 3, 16, 16, 64, 3, 1),  # a first layer: the direct forward, channels-last; dW with x padded, dy as it is
    (3, 2, 9, 7, 16, 3, 2),
    (2, 3, 8, 8, 12, 3, 1),  # (12 outputs: not whole 16-byte runs of channels, the C-contiguous direct forward)
    (3, 24, 9, 7, 40, 3, 2),
]


def _cuda(a, dtype):
    import cupy

    return cupy.asarray(a).astype(backend.as_dtype(dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gpu_conv_channels_last_matches_contiguous(shape, dtype, poisoned_pool, rng):
    """Every direction on channels-last operands equals the C-contiguous computation element for element (the same
    kernels on the same packed operands, only the layouts of what is read and written differ), and comes back
    channels-last."""
    n, c, h, w, k, ks, st = shape
    x = _cuda(rng.standard_normal((n, c, h, w)), dtype)
    wt = _cuda(rng.standard_normal((k, c, ks, ks)) / np.sqrt(c * ks * ks), dtype)
    bias = _cuda(rng.standard_normal(k), dtype)
    geo = ((st, st), (ks // 2, ks // 2), (1, 1), 1)
    y, _, kept = K.conv2d_forward(x, wt, bias, *geo, keep_packed_x=True)
    ycl, _, kept_cl = K.conv2d_forward(to_channels_last(x), wt, bias, *geo, keep_packed_x=True)
    assert is_channels_last(ycl) and not bool(np.isnan(ycl.get().astype(np.float32)).any())
    np.testing.assert_array_equal(ycl.get(), y.get())
    dy = _cuda(rng.standard_normal(y.shape), dtype)
    dycl = to_channels_last(dy)
    dx, dw, db = K.conv2d_backward(dy, kept if kept is not None else x, wt, *geo, need_db=True)
    dxc, dwc, dbc = K.conv2d_backward(dycl, kept_cl if kept_cl is not None else to_channels_last(x), wt, *geo,
                                      need_db=True)
    assert is_channels_last(dxc)
    for ours, ref in ((dxc, dx), (dwc, dw), (dbc, db)):
        np.testing.assert_array_equal(ours.get(), ref.get())
    # channels-last weights (a channels-last model's): the forward's own pack, a channels-last dW, the same values
    wcl = to_channels_last(wt)
    ycl2, _, kept_cl = K.conv2d_forward(to_channels_last(x), wcl, bias, *geo, keep_packed_x=True)
    np.testing.assert_array_equal(ycl2.get(), y.get())
    dxc, dwc, dbc = K.conv2d_backward(dycl, kept_cl if kept_cl is not None else to_channels_last(x), wcl, *geo,
                                      need_db=True)
    assert channels_last_strided(dwc) and is_channels_last(dxc)
    for ours, ref in ((dxc, dx), (dwc, dw), (dbc, db)):
        np.testing.assert_array_equal(ours.get(), ref.get())
    dwc = K.conv2d_backward_filter(dycl, to_channels_last(x), wt.shape, *geo, channels_last_weight=True)
    assert channels_last_strided(dwc)
    np.testing.assert_array_equal(dwc.get(), dw.get())
    # and with C-contiguous operands beside them (made contiguous for the NCHW kernels)
    np.testing.assert_array_equal(K.conv2d_forward(x, wcl, bias, *geo)[0].get(), y.get())
    np.testing.assert_array_equal(K.conv2d_backward(dy, x, wcl, *geo)[1].get(), dw.get())
    # the fused ReLU and its mask (the GEMM path writes the mask; its backward goes through the C-contiguous path)
    y, mask = K.conv2d_forward(x, wt, bias, *geo, activation="relu", want_mask=True)
    ycl, mask_cl = K.conv2d_forward(to_channels_last(x), wt, bias, *geo, activation="relu", want_mask=True)
    assert is_channels_last(ycl)
    np.testing.assert_array_equal(ycl.get(), y.get())
    np.testing.assert_array_equal(mask_cl.get(), mask.get())
    dx = K.conv2d_backward(dy, x, wt, *geo, mask=mask, need_dw=False)[0]
    dxc = K.conv2d_backward(dycl, to_channels_last(x), wt, *geo, mask=mask_cl, need_dw=False)[0]
    assert is_channels_last(dxc)
    np.testing.assert_array_equal(dxc.get(), dx.get())
    # the halves on their own, as the benchmarks call them
    dx = K.conv2d_backward_data(dy, wt, x.shape, *geo)
    np.testing.assert_array_equal(K.conv2d_backward_data(dycl, wt, x.shape, *geo).get(), dx.get())
    np.testing.assert_array_equal(K.conv2d_backward_filter(dycl, to_channels_last(x), wt.shape, *geo).get(),
                                  dw.get())


@pytest.mark.gpu
def test_gpu_channels_last_reads_without_packs(rng):
    """On Hopper, a channels-last convolution with channels multiples of 64 and whole-row tiles runs on the TMA
    kernels reading x and dy (and a channels-last weight, for the backward-data) as they are."""
    import cupy

    from minifused.kernels import has_wgmma

    if not has_wgmma(cupy.cuda.Device().id):
        pytest.skip("the TMA kernels need sm_90")
    x = to_channels_last(_cuda(rng.standard_normal((4, 64, 16, 16)), "float16"))
    wt = _cuda(rng.standard_normal((64, 64, 3, 3)) / 24, "float16")
    run = K._channels_last_forward_launcher(x.dtype, x.shape, wt.shape, (1, 1), (1, 1), (1, 1), 1,
                                            x.device.id, K.DEFAULT_CONFIG, False)
    assert run is not None and K.tma_plan(K.ConvMode.FORWARD, x.dtype, x.shape, wt.shape, (1, 1), (1, 1), (1, 1), 1,
                                          x.device.id, K.DEFAULT_CONFIG, nhwc_out=True) is not None
    assert K._backward_launcher(x.dtype, x.shape, wt.shape, (1, 1), (1, 1), (1, 1), 1, x.device.id,
                                K.DEFAULT_CONFIG, False, True, True) is not None
    # the backward-data of 128 channels (not conv_tma_narrow.cu's) reads a channels-last weight as it is, unpacked
    assert K.tma_plan(K.ConvMode.BACKWARD_DATA, x.dtype, (4, 128, 16, 16), (64, 128, 3, 3), (1, 1), (1, 1), (1, 1),
                      1, x.device.id, K.DEFAULT_CONFIG, nhwc_out=True, b_krsc=True).b_krsc


@pytest.mark.gpu
def test_gpu_channels_last_first_layer_reads_without_relayouts(rng):
    """A first layer (3 channels in, the direct forward) channels-last: the forward reads x and writes y in that
    layout, and the filter gradient reads dy as it is (only x, small, is copied into padded channels); dX, which
    a first layer seldom needs, goes through the C-contiguous path."""
    import cupy

    x = to_channels_last(_cuda(rng.standard_normal((4, 3, 16, 16)), "bfloat16"))
    geo = ((1, 1), (1, 1), (1, 1), 1)
    args = (x.dtype, x.shape, (64, 3, 3, 3), *geo, x.device.id, K.DEFAULT_CONFIG, False)
    assert K._channels_last_forward_launcher(*args) is not None
    assert K._backward_launcher(*args, False, True, True) is not None  # (no dX)
    assert K._backward_launcher(*args, False, True, False) is None
    assert K._channels_last_forward_launcher(x.dtype, x.shape, (12, 3, 3, 3), *geo, x.device.id, K.DEFAULT_CONFIG,
                                             False) is None  # (12 channels out: not whole runs of 8)
    calls, relayout = [], K.relayout

    def moves(a, cl):  # (the layout changes only)
        if not (channels_last_strided(a) if cl else a.flags.c_contiguous):
            calls.append((a.shape, cl))
        return relayout(a, cl)

    try:
        K.relayout = moves
        wt = _cuda(rng.standard_normal((64, 3, 3, 3)), "bfloat16")
        y = K.conv2d_forward(x, wt, None, *geo)[0]
        dw = K.conv2d_backward(to_channels_last(cupy.ones_like(y)), x, wt, *geo, need_dx=False)[1]
    finally:
        K.relayout = relayout
    assert is_channels_last(y) and dw.shape == wt.shape
    assert calls == []  # (x copied into padded rows from its own memory)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_gpu_relu_and_add_keep_channels_last(dtype, poisoned_pool, rng):
    a = to_channels_last(_cuda(rng.standard_normal((3, 16, 5, 7)), dtype))
    b = to_channels_last(_cuda(rng.standard_normal((3, 16, 5, 7)), dtype))
    s = E.add(a, b)
    assert is_channels_last(s)
    np.testing.assert_array_equal(s.get(), (a.astype(np.float32) + b.astype(np.float32)).astype(a.dtype).get())
    y, mask = E.relu_mask(a)
    assert is_channels_last(y)
    np.testing.assert_array_equal(y.get(), np.maximum(a.get(), 0))
    g = _cuda(rng.standard_normal(a.shape), dtype)  # C-contiguous: brought to the mask's order
    dx = E.mask_apply(g, mask, channels_last=True)
    assert is_channels_last(dx)
    np.testing.assert_array_equal(dx.get(), np.where(a.get() > 0, g.get(), 0))
    t = T(to_channels_last(_cuda(rng.standard_normal((2, 8, 4, 4)), dtype)), True)
    F.relu(t).sum().backward()
    np.testing.assert_array_equal(t.grad.cpu().numpy(), (t.cpu().numpy() > 0).astype(t.grad.cpu().numpy().dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_gpu_residual_block_channels_last_trains_as_contiguous(dtype, rng):
    """A residual block with BatchNorm, trained a few SGD steps channels-last, follows the C-contiguous run (the
    BatchNorm sums run in another order, so within the dtype's rounding), and its activations stay channels-last."""

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(64, 64, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.conv2 = nn.Conv2d(64, 64, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(64)

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            return F.relu(self.bn2(self.conv2(out)) + x)

    x0 = rng.standard_normal((8, 64, 8, 8)).astype(np.float32)
    losses = {}
    for cl in (False, True):
        mf.manual_seed(7)
        model = Block().to("cuda", dtype=backend.as_dtype(dtype))
        if cl:
            model.to(memory_format=mf.channels_last)
        opt = mf.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        x = mf.tensor(x0, device="cuda", dtype=backend.as_dtype(dtype))
        if cl:
            x = x.to(memory_format=mf.channels_last)
        run = []
        for _ in range(4):
            opt.zero_grad()
            y = model(x)
            assert y.is_contiguous(memory_format=mf.channels_last) == cl
            loss = (y.float() * y.float()).mean()
            loss.backward()
            opt.step()
            run.append(float(loss.item()))
        losses[cl] = run
        w = model.conv1.weight  # the weights, their gradients and momentum took the model's layout
        for t in (w, w.grad, opt.state[w]["momentum_buffer"]):
            assert t.is_contiguous(memory_format=mf.channels_last) == cl and t.is_contiguous() == (not cl)
    tol = 2e-2 if dtype == "bfloat16" else 1e-4
    np.testing.assert_allclose(losses[True], losses[False], rtol=tol)


def test_clone_and_like_creators_preserve_channels_last(rng):
    """PyTorch's memory_format=preserve_format default: clone and the *_like creators of a channels-last tensor
    are channels-last (of a C-contiguous one C-contiguous); an explicit format is followed; values and the
    gradient through clone are unchanged."""
    x = mf.tensor(rng.standard_normal((2, 3, 4, 5)).astype(np.float32), requires_grad=True)
    xc = x.detach().contiguous(memory_format=mf.channels_last)

    def cl(t):
        return t.is_contiguous(memory_format=mf.channels_last) and not t.is_contiguous()

    made = {"clone": xc.clone(), "zeros_like": mf.zeros_like(xc), "ones_like": mf.ones_like(xc),
            "empty_like": mf.empty_like(xc), "full_like": mf.full_like(xc, 2.5), "rand_like": mf.rand_like(xc),
            "randn_like": mf.randn_like(xc), "randint_like": mf.randint_like(xc, 7)}
    for name, t in made.items():
        assert cl(t) and tuple(t.shape) == (2, 3, 4, 5), name
    np.testing.assert_array_equal(made["clone"].numpy(), x.detach().numpy())
    np.testing.assert_array_equal(made["full_like"].numpy(), np.full((2, 3, 4, 5), 2.5, np.float32))
    assert not made["zeros_like"].numpy().any() and (made["ones_like"].numpy() == 1).all()
    assert not cl(mf.zeros_like(x)) and mf.zeros_like(x).is_contiguous()
    assert xc.clone(memory_format=mf.contiguous_format).is_contiguous()
    assert cl(x.clone(memory_format=mf.channels_last)) and cl(mf.zeros_like(x, memory_format=mf.channels_last))
    y = x.clone(memory_format=mf.channels_last)
    (y * y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="clone: channels_last needs a 4-d"):
        mf.zeros(3, 4).clone(memory_format=mf.channels_last)
    with pytest.raises(ValueError, match="zeros_like: memory_format must be one of"):
        mf.zeros_like(x, memory_format="channels_last")


# ---------------------------------------------------------------- channels_last_3d
def _steps(t):
    return tuple(t.stride())


def test_channels_last_3d_layouts_as_pytorch(device, rng):
    """channels_last_3d: a 5-d (N, C, D, H, W) tensor stored as (N, D, H, W, C) (PyTorch's strides), taken by to /
    contiguous / clone / the *_like creators / empty / resize_, kept by preserve_format; a tensor of another rank
    refused with PyTorch's words; is_contiguous asks it of 5-d tensors alone."""
    x = mf.tensor(rng.standard_normal((2, 3, 4, 5, 6)).astype(np.float32), device=device)
    fmt = mf.channels_last_3d
    expected = (360, 1, 90, 18, 3)  # (D*H*W*C, 1, H*W*C, W*C, C)
    y = x.to(memory_format=fmt)
    assert _steps(y) == expected and y.is_contiguous(memory_format=fmt) and not y.is_contiguous()
    assert not x.is_contiguous(memory_format=fmt) and y.contiguous(memory_format=fmt) is y
    np.testing.assert_array_equal(y.cpu().numpy(), x.cpu().numpy())
    assert _steps(y.contiguous()) == (360, 120, 30, 6, 1)
    for t in (y.clone(), mf.empty_like(y), mf.zeros_like(x, memory_format=fmt), x.clone(memory_format=fmt),
              mf.empty(2, 3, 4, 5, 6, memory_format=fmt, device=device)):
        assert _steps(t) == expected
    c = y.clone()
    assert c._data is not y._data and np.array_equal(c.cpu().numpy(), x.cpu().numpy())
    z = mf.zeros(2, 3, 4, 5, 6, device=device)
    z.resize_(2, 3, 4, 5, 6, memory_format=fmt)
    assert _steps(z) == expected
    four = mf.randn(2, 3, 4, 5, device=device)
    assert not four.is_contiguous(memory_format=fmt)
    for bad in (lambda: four.to(memory_format=fmt), lambda: four.contiguous(memory_format=fmt),
                lambda: four.clone(memory_format=fmt), lambda: mf.empty(2, 3, 4, 5, memory_format=fmt),
                lambda: mf.zeros(2, 3, 4, 5).resize_(2, 3, 4, 5, memory_format=fmt)):
        with pytest.raises(RuntimeError, match="required rank 5 tensor to use channels_last_3d format"):
            bad()
    assert repr(fmt) == "minifused.channels_last_3d"


def test_module_to_channels_last_3d_lays_out_5d_weights(device, rng):
    """Module.to(memory_format=channels_last_3d) lays out the 5-d parameters (Conv3d weights) so, as PyTorch's, and
    the convolution on a channels_last_3d input gives the C-contiguous run's values and gradients."""
    xa = rng.standard_normal((2, 3, 5, 6, 7)).astype(np.float32)
    runs = []
    for fmt in (mf.contiguous_format, mf.channels_last_3d):
        mf.manual_seed(0)
        m = nn.Conv3d(3, 4, 3, padding=1).to(device).to(memory_format=fmt)
        assert m.weight.is_contiguous(memory_format=mf.channels_last_3d) == (fmt is mf.channels_last_3d)
        assert m.bias.is_contiguous()
        x = mf.tensor(xa, device=device).to(memory_format=fmt).requires_grad_(True)
        y = m(x)
        (y * mf.tensor(np.cos(np.arange(y.numel())).reshape(y.shape).astype(np.float32), device=device)).sum() \
            .backward()
        runs.append([t.detach().cpu().numpy() for t in (y, x.grad, m.weight.grad, m.bias.grad)])
        assert m.to(memory_format=mf.contiguous_format).weight.is_contiguous()  # (5-d ones back too, as PyTorch's)
    for a, b in zip(*runs):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)


def test_reductions_and_scans_of_channels_last_give_contiguous_results(rng):
    """As PyTorch's reductions and scans, which allocate C-contiguous results: a channels-last tensor's sum over
    W (or any dims), mean, amax, var, std, prod, logsumexp, norm, any / all / count_nonzero, cumsum, cumprod,
    logcumsumexp and nanmedian come back C-contiguous (NumPy's followed the input's memory order, so that
    ``x.sum(3).view(-1)`` failed), with the C-contiguous input's values."""
    xa = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    x = mf.tensor(xa).contiguous(memory_format=mf.channels_last)
    c = mf.tensor(xa)
    cases = [lambda t: t.sum(3), lambda t: t.sum(0), lambda t: t.sum(3, keepdim=True), lambda t: t.mean(2),
             lambda t: t.amax(3), lambda t: t.amin(2, keepdim=True), lambda t: t.var(3), lambda t: t.std(2),
             lambda t: t.prod(3), lambda t: t.logsumexp(3), lambda t: t.norm(dim=3), lambda t: (t > 0).any(3),
             lambda t: (t > 0).all(2), lambda t: mf.count_nonzero(t > 0, dim=3), lambda t: t.cumsum(3),
             lambda t: t.cumprod(2), lambda t: t.logcumsumexp(3), lambda t: t.nanmedian(3)[0],
             lambda t: mf.var_mean(t, 3)[1], lambda t: t.nansum(2)]
    for i, fn in enumerate(cases):
        got, want = fn(x), fn(c)
        assert got.is_contiguous(), i
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6, err_msg=str(i))
    assert x.sum(3).view(-1).shape == (24,)
