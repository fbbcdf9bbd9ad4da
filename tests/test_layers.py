"""Spatial layers as Modules (Upsample, adaptive pooling, padding, Embedding, Dropout1d/2d, Unflatten,
Identity), Module hooks and ``apply``, and ``nn.utils``; on the GPU, interpolate, adaptive pooling,
padding and embedding gradients against PyTorch. The functional ops' values, gradients and bad inputs
are in the registry (tests/opinfo.py, ``LAYER_OPS``)."""
import math

import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
from minifused import nn
from opinfo import adaptive_avg_pool_ref, interpolate_ref, pad_ref


def cpu(a, **kw):
    return mf.tensor(np.asarray(a), device="cpu", **kw)


def rnd(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# ---------------------------------------------------------------- interpolate and adaptive pooling by hand
def test_interpolate_known_values():
    x = cpu([[[0.0, 1.0, 2.0]]])
    assert F.interpolate(x, scale_factor=2).tolist() == [[[0.0, 0.0, 1.0, 1.0, 2.0, 2.0]]]
    np.testing.assert_allclose(F.interpolate(x, size=5, mode="linear", align_corners=True).numpy(),
                               [[[0.0, 0.5, 1.0, 1.5, 2.0]]])
    # align_corners=False, x2: source (j + 0.5) / 2 - 0.5, clamped at 0
    np.testing.assert_allclose(F.interpolate(x, scale_factor=2, mode="linear").numpy(),
                               [[[0.0, 0.25, 0.75, 1.25, 1.75, 2.0]]])
    # nearest, 3 -> 2: floor(j * 1.5) = 0, 1; nearest-exact: floor((j + 0.5) * 1.5) = 0, 2
    assert F.interpolate(x, size=2).tolist() == [[[0.0, 1.0]]]
    assert F.interpolate(x, size=2, mode="nearest-exact").tolist() == [[[0.0, 2.0]]]


def test_interpolate_scale_factor_is_used_unless_recomputed():
    """With scale_factor=1.7 PyTorch's kernels use 1/1.7 as the source step, not in/out (5/8)."""
    x = cpu(np.arange(5.0).reshape(1, 1, 5))
    given = F.interpolate(x, scale_factor=1.7, mode="linear").numpy()
    recomputed = F.interpolate(x, scale_factor=1.7, mode="linear", recompute_scale_factor=True).numpy()
    sized = F.interpolate(x, size=8, mode="linear").numpy()
    np.testing.assert_array_equal(recomputed, sized)
    assert not np.allclose(given, sized)
    np.testing.assert_allclose(given, interpolate_ref(x.numpy(), scale_factor=1.7, mode="linear"), rtol=1e-6)


def test_interpolate_linear_copies_where_no_size_changes():
    """PyTorch's linear kernels (CPU and CUDA) copy the input where every output size equals the input's,
    whatever the given scale_factor (1.2 on 3 or 4 positions rounds down to the same size); the gradient
    passes through as it is."""
    for shape, mode in (((1, 2, 4), "linear"), ((2, 1, 3, 3), "bilinear")):
        x = cpu(np.random.default_rng(2).standard_normal(shape), requires_grad=True)
        y = F.interpolate(x, scale_factor=1.2, mode=mode)
        np.testing.assert_array_equal(y.numpy(), x.numpy())
        g = np.random.default_rng(3).standard_normal(shape)
        (y * cpu(g)).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), g)
    # one size changing: that axis resamples with 1/scale as the step (the other one: the next test)
    x = cpu(np.arange(9.0).reshape(1, 1, 3, 3))
    assert F.interpolate(x, scale_factor=(1.2, 1.5), mode="bilinear").shape == (1, 1, 3, 4)


@pytest.mark.parametrize("mode,scale,same", [("bilinear", (1.2, 1.5), (1.0, 1.5)), ("nearest", (1.2, 2.1), (1.0, 2.0)),
                                             ("linear", 1.2, 1.0), ("nearest", 1.2, 1.2)])
def test_interpolate_cpu_ignores_the_scale_along_an_axis_that_keeps_its_size(mode, scale, same):
    """PyTorch's cpu kernels copy along an axis whose size does not change (1.2 on 3 or 4 positions rounds down
    to the same size) whatever the scale, in the linear modes and in 2-D nearest; 2-D nearest also takes a
    doubled size (2.1 on 4 gives 8) as an exact 2x. Its 1-D nearest forward keeps the scale (1/1.2 steps)."""
    shape = (1, 2, 3, 4) if isinstance(scale, tuple) else (1, 2, 4)
    x = cpu(rnd(*shape), requires_grad=True)
    y = F.interpolate(x, scale_factor=scale, mode=mode)
    np.testing.assert_allclose(y.detach().numpy(), interpolate_ref(x.detach().numpy(), scale_factor=same, mode=mode),
                               rtol=1e-12, atol=1e-12)
    g = rnd(*y.shape, seed=1)
    (y * cpu(g)).sum().backward()
    x2 = cpu(x.detach().numpy(), requires_grad=True)
    (F.interpolate(x2, scale_factor=same, mode=mode) * cpu(g)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-12, atol=1e-12)


def _antialias_ref(n, m, step, mode):
    """Antialiased resampling as PIL and PyTorch define it, one axis, float64: output i centred at step * (i + 0.5)
    weighs every input j by the filter (triangle, cubic with a = -0.5, or Lanczos-3) at (j + 0.5 - centre), the
    filter stretched by the step when it shrinks; the weights normalized."""
    def f(d):
        d = abs(d)
        if mode == "bilinear":
            return max(1 - d, 0.0)
        if mode == "lanczos":
            return 1.0 if d == 0 else (3 * math.sin(math.pi * d) * math.sin(math.pi * d / 3) / (math.pi * d) ** 2
                                       if d < 3 else 0.0)
        if d < 1:
            return 1.5 * d ** 3 - 2.5 * d ** 2 + 1
        return -0.5 * d ** 3 + 2.5 * d ** 2 - 4 * d + 2 if d < 2 else 0.0
    w = np.array([[f((j + 0.5 - step * (i + 0.5)) / max(step, 1.0)) for j in range(n)] for i in range(m)])
    return w / w.sum(1, keepdims=True)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "lanczos"])
def test_interpolate_antialias(mode):
    """antialias=True low-pass filters as it shrinks (PyTorch's, for torchvision-style resizing): 4 -> 2 with
    the triangle weighs [0, 1, 2, 3] by [3, 3, 1, 0] / 7 and [0, 1, 3, 3] / 7; against the float64 reference on
    both axes (one shrinking, one growing at a given scale), with the gradient its transpose. PyTorch's 'lanczos'
    mode is this with the Lanczos-3 filter, and needs antialias=True."""
    x = cpu(np.arange(4.0).reshape(1, 1, 1, 4))
    if mode == "bilinear":
        np.testing.assert_allclose(F.interpolate(x, size=(1, 2), mode=mode, antialias=True).numpy().ravel(),
                                   [5 / 7, 16 / 7], rtol=1e-14)
    a = rnd(2, 3, 11, 5)
    xt = cpu(a, requires_grad=True)
    y = F.interpolate(xt, scale_factor=(0.3, 1.5), mode=mode, antialias=True)
    assert y.shape == (2, 3, 3, 7)
    wh, ww = _antialias_ref(11, 3, 1 / 0.3, mode), _antialias_ref(5, 7, 1 / 1.5, mode)
    np.testing.assert_allclose(y.detach().numpy(), wh @ a @ ww.T, rtol=1e-12, atol=1e-12)
    g = rnd(*y.shape, seed=1)
    y.backward(cpu(g))
    np.testing.assert_allclose(xt.grad.numpy(), wh.T @ g @ ww, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="antialias=True is restricted to the bilinear, bicubic and lanczos modes"):
        F.interpolate(x, size=2, mode="nearest", antialias=True)
    with pytest.raises(ValueError, match="mode 'lanczos' needs antialias=True"):
        F.interpolate(x, size=2, mode="lanczos")


def test_interpolate_bicubic_at_the_given_scale_on_the_cpu():
    """Where no size changes, PyTorch's bicubic interpolates at the given scale on the CPU (its CUDA kernel copies:
    the GPU test checks that); the gradient is the forward's own adjoint (PyTorch's CPU backward there copies the
    gradient, which a finite difference of its forward contradicts)."""
    x = cpu(np.random.default_rng(4).standard_normal((1, 2, 5, 5)), requires_grad=True)
    y = F.interpolate(x, scale_factor=1.1, mode="bicubic")
    assert y.shape == x.shape and not np.allclose(y.detach().numpy(), x.detach().numpy())
    np.testing.assert_allclose(y.detach().numpy(), interpolate_ref(x.detach().numpy(), scale_factor=1.1,
                                                                   mode="bicubic"), rtol=1e-6, atol=1e-7)
    g = np.random.default_rng(5).standard_normal(y.shape)
    (y * cpu(g)).sum().backward()
    eps, d = 1e-6, np.random.default_rng(6).standard_normal(x.shape)
    moved = F.interpolate(cpu(x.detach().numpy() + eps * d), scale_factor=1.1, mode="bicubic").numpy()
    np.testing.assert_allclose(((moved - y.detach().numpy()) / eps * g).sum(), (x.grad.numpy() * d).sum(),
                               rtol=1e-5)


def test_adaptive_bins_7_to_3():
    x = cpu(np.arange(7.0).reshape(1, 1, 7))
    # bins [0, 3), [2, 5), [4, 7)
    np.testing.assert_allclose(F.adaptive_avg_pool1d(x, 3).numpy(), [[[1.0, 3.0, 5.0]]])
    y, idx = F.adaptive_max_pool1d(x, 3, return_indices=True)
    assert y.tolist() == [[[2.0, 4.0, 6.0]]] and idx.tolist() == [[[2, 4, 6]]]


def test_adaptive_max_indices_and_gradient():
    x_np = np.random.default_rng(0).permutation(70).reshape(1, 1, 7, 10).astype(np.float64)
    x = cpu(x_np, requires_grad=True)
    y, idx = F.adaptive_max_pool2d(x, (3, 4), return_indices=True)
    assert idx.dtype == mf.int64 and idx.shape == (1, 1, 3, 4)
    np.testing.assert_array_equal(x_np.reshape(-1)[idx.numpy().reshape(-1)], y.detach().numpy().reshape(-1))
    np.testing.assert_array_equal(y.detach().numpy(), adaptive_avg_pool_ref(x_np, (3, 4), np.max))
    y.sum().backward()
    want = np.zeros(70)
    np.add.at(want, idx.numpy().reshape(-1), 1.0)  # overlapping bins may pick one element twice
    np.testing.assert_array_equal(x.grad.numpy().reshape(-1), want)


def test_global_average_pool_is_a_mean():
    x = cpu(rnd(2, 3, 5, 7), requires_grad=True)
    y = nn.AdaptiveAvgPool2d((1, 1))(x)
    np.testing.assert_allclose(y.detach().numpy(), x.detach().numpy().mean(axis=(2, 3), keepdims=True))
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((2, 3, 5, 7), 1 / 35))
    assert nn.AdaptiveAvgPool2d(1)(cpu(rnd(3, 4, 4))).shape == (3, 1, 1)  # unbatched


def test_adaptive_pool_modules_attributes_as_pytorch():
    # only the max poolings have return_indices (code tells the two kinds apart by it, as PyTorch's layers allow)
    for cls in (nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d):
        m = cls((2, None) if cls is not nn.AdaptiveAvgPool1d else 2)
        assert not hasattr(m, "return_indices") and m.output_size == ((2, None) if cls is not nn.AdaptiveAvgPool1d
                                                                      else 2)
    for cls in (nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d, nn.AdaptiveMaxPool3d):
        assert cls(2).return_indices is False and cls(2, True).return_indices is True
        assert repr(cls(3, return_indices=True)) == f"{cls.__name__}(output_size=3)"


def test_adaptive_pool_sizes_may_be_integer_tensors():
    # as PyTorch takes them (sizes computed as tensors): one-element integer tensors, alone or in the tuple
    x = rnd(2, 3, 7, 9)
    want = adaptive_avg_pool_ref(x, (2, 4))
    np.testing.assert_allclose(F.adaptive_avg_pool2d(cpu(x), (mf.tensor(2), mf.tensor(4))).numpy(), want)
    np.testing.assert_array_equal(F.adaptive_max_pool2d(cpu(x), (mf.tensor(2), 4)).numpy(),
                                  adaptive_avg_pool_ref(x, (2, 4), np.max))
    np.testing.assert_allclose(F.adaptive_avg_pool1d(cpu(x[0]), mf.tensor(4)).numpy(),
                               adaptive_avg_pool_ref(x[0], (4,)))
    assert F.adaptive_max_pool3d(cpu(x[:, :, None]), (1, mf.tensor(3), None)).shape == (2, 3, 1, 3, 9)
    with pytest.raises(TypeError, match="adaptive_avg_pool1d: output_size must be ints"):
        F.adaptive_avg_pool1d(cpu(x[0]), mf.tensor(2.0))


def test_adaptive_pool_to_zero_size_is_empty():
    x = cpu(rnd(2, 3, 4, 4), requires_grad=True)
    y = F.adaptive_avg_pool2d(x, (0, 2))
    assert y.shape == (2, 3, 0, 2)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), 0)


def test_adaptive_pool_half_precision():
    x = rnd(2, 3, 7, 10)
    for dtype in (mf.float16, mf.bfloat16):
        y = F.adaptive_avg_pool2d(cpu(x).to(dtype), (3, 4))
        assert y.dtype == dtype
        np.testing.assert_allclose(y.float().numpy(), adaptive_avg_pool_ref(x, (3, 4)), atol=3e-2)


# ---------------------------------------------------------------- resampling and padding modules
def test_upsample_modules():
    x = cpu(rnd(1, 2, 3, 4))
    np.testing.assert_array_equal(nn.Upsample(scale_factor=2)(x).numpy(), F.interpolate(x, scale_factor=2.0).numpy())
    np.testing.assert_array_equal(nn.UpsamplingNearest2d(size=(5, 7))(x).numpy(), F.interpolate(x, size=(5, 7)).numpy())
    np.testing.assert_array_equal(nn.UpsamplingBilinear2d(scale_factor=2)(x).numpy(),
                                  F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True).numpy())
    up = nn.Upsample(size=(6, 5), mode="bilinear", align_corners=False)
    np.testing.assert_allclose(up(x).numpy(), interpolate_ref(x.numpy(), size=(6, 5), mode="bilinear"), rtol=1e-6)
    assert "mode='bilinear'" in repr(up)


@pytest.mark.parametrize("module,mode,pad", [
    (lambda: nn.ZeroPad2d((1, 2, 0, 3)), "constant", (1, 2, 0, 3)),
    (lambda: nn.ConstantPad1d(2, 0.5), "constant", (2, 2)),
    (lambda: nn.ReflectionPad2d(2), "reflect", (2, 2, 2, 2)),
    (lambda: nn.ReflectionPad1d((3, 1)), "reflect", (3, 1)),
    (lambda: nn.ReplicationPad2d((0, 4, 1, 1)), "replicate", (0, 4, 1, 1)),
    (lambda: nn.CircularPad2d(1), "circular", (1, 1, 1, 1)),
    (lambda: nn.CircularPad1d((2, 0)), "circular", (2, 0))])
def test_padding_modules(module, mode, pad):
    x = rnd(2, 3, 4, 5) if len(pad) == 4 else rnd(2, 3, 5)
    m = module()
    value = getattr(m, "value", None) if mode == "constant" else None
    np.testing.assert_allclose(m(cpu(x)).numpy(), pad_ref(x, pad, mode, value))


def test_padding_module_reprs_as_pytorch():
    """ZeroPad shows its padding alone, ConstantPad "padding=..., value=..." with the value as given; a value
    that is no number is a clear error."""
    assert repr(nn.ZeroPad2d((1, 2, 0, 1))) == "ZeroPad2d((1, 2, 0, 1))"
    assert repr(nn.ZeroPad1d(2)) == "ZeroPad1d((2, 2))"
    assert repr(nn.ConstantPad2d(1, 0.5)) == "ConstantPad2d(padding=(1, 1, 1, 1), value=0.5)"
    assert repr(nn.ConstantPad1d((1, 2), 3)) == "ConstantPad1d(padding=(1, 2), value=3)"
    assert repr(nn.ReflectionPad2d(2)) == "ReflectionPad2d((2, 2, 2, 2))"
    assert nn.ConstantPad1d(1, 3)(cpu(np.zeros((1, 2)))).tolist() == [[3.0, 0.0, 0.0, 3.0]]
    with pytest.raises(TypeError, match="ConstantPad1d: value must be a number, got str"):
        nn.ConstantPad1d(1, "a")


def test_pad_gradient_folds_back():
    """Each input element's gradient counts how often the padded output used it."""
    x = cpu(np.zeros((1, 1, 4)), requires_grad=True)
    F.pad(x, (2, 3), mode="reflect").sum().backward()
    assert x.grad.tolist() == [[[2.0, 3.0, 3.0, 1.0]]]  # reflect of 0 1 2 3: 2 1 | 0 1 2 3 | 2 1 0
    x.grad = None
    F.pad(x, (2, 3), mode="replicate").sum().backward()
    assert x.grad.tolist() == [[[3.0, 1.0, 1.0, 4.0]]]
    x.grad = None
    F.pad(x, (2, 3), mode="circular").sum().backward()
    assert x.grad.tolist() == [[[2.0, 2.0, 3.0, 2.0]]]  # 2 3 | 0 1 2 3 | 0 1 2
    x.grad = None
    F.pad(x, (-1, 2)).sum().backward()
    assert x.grad.tolist() == [[[0.0, 1.0, 1.0, 1.0]]]


def test_pad_amounts_may_be_integer_tensors_of_one_element():
    """A pad computed from tensors (``max_len - lengths[i]``) is taken as its int, as PyTorch's; a float or a
    many-element tensor is refused."""
    x = np.arange(12.0).reshape(1, 3, 4)
    lengths = mf.tensor([4, 6])
    got = F.pad(cpu(x), (1, lengths.max() - 4), mode="reflect")
    np.testing.assert_array_equal(got.numpy(), pad_ref(x, (1, 2), mode="reflect"))
    np.testing.assert_array_equal(F.pad(cpu(x), (mf.tensor([2]), 0)).numpy(), pad_ref(x, (2, 0)))
    for bad in (mf.tensor(1.0), mf.tensor([1, 2])):
        with pytest.raises(TypeError, match=r"pad: pad must be a tuple of ints, got \(tensor"):
            F.pad(cpu(x), (bad, 1))


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("shape,pad", [((1, 0, 4, 4), (1, 1, 1, 1)), ((1, 0, 4, 4), (0, 0, 0, 0)), ((0, 4), (1, 1)),
                                       ((2, 0, 4), (1, 1, 1, 1)), ((2, 3, 4, 0), (0, 0, 1, 1))])
def test_reflect_and_replicate_refuse_an_empty_dimension_but_the_batch(mode, shape, pad):
    """PyTorch's reflect and replicate pads take an empty batch only: an empty channel (a Conv2d(0, C,
    padding_mode='reflect')'s input) or an empty dimension of an unbatched input raises its RuntimeError, even with
    pads of 0."""
    with pytest.raises(RuntimeError, match=f"mode '{mode}' expects .* non-zero dimensions, got shape"):
        F.pad(cpu(np.zeros(shape)), pad, mode=mode)
    assert tuple(F.pad(cpu(np.zeros((0, 2, 4, 4))), (1, 1, 2, 2), mode=mode).shape) == (0, 2, 8, 6)
    assert tuple(F.pad(cpu(np.zeros((0, 3, 4))), (1, 2), mode=mode).shape) == (0, 3, 7)
    with pytest.raises(RuntimeError, match="non-zero dimensions"):
        nn.Conv2d(0, 2, 3, padding=1, padding_mode=mode)(mf.zeros(1, 0, 4, 4))


# ---------------------------------------------------------------- embedding
def test_embedding_init_padding_and_repr():
    mf.manual_seed(0)
    emb = nn.Embedding(2000, 50, padding_idx=-1)
    w = emb.weight.detach().numpy()
    assert emb.padding_idx == 1999 and np.all(w[1999] == 0)
    assert abs(w[:1999].mean()) < 0.01 and abs(w[:1999].std() - 1) < 0.01  # N(0, 1), as PyTorch
    assert repr(emb) == "Embedding(2000, 50, padding_idx=1999)"


def test_embedding_gradient_with_repeated_indices_and_padding():
    w_np = rnd(6, 3)
    idx = np.array([[1, 4, 1], [2, 1, 0]])
    emb = nn.Embedding.from_pretrained(cpu(w_np), freeze=False, padding_idx=2)
    out = emb(cpu(idx))
    np.testing.assert_array_equal(out.detach().numpy(), w_np[idx])
    g = rnd(2, 3, 3, seed=1)
    out.backward(cpu(g))
    want = np.zeros((6, 3))
    np.add.at(want, idx.reshape(-1), g.reshape(-1, 3))
    want[2] = 0  # the padding row gets no gradient
    np.testing.assert_allclose(emb.weight.grad.numpy(), want)


def test_embedding_scale_grad_by_freq():
    w = cpu(rnd(5, 2), requires_grad=True)
    idx = np.array([3, 3, 3, 0, 1, 1])
    F.embedding(cpu(idx), w, scale_grad_by_freq=True).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [[1, 1], [1, 1], [0, 0], [1, 1], [0, 0]])


def test_embedding_from_pretrained_freezes_and_shares():
    w = cpu(rnd(4, 3))
    emb = nn.Embedding.from_pretrained(w)
    assert not emb.weight.requires_grad and emb.weight._data is w._data
    assert nn.Embedding.from_pretrained(w, freeze=False).weight.requires_grad
    with pytest.raises(ValueError, match="2-D"):
        nn.Embedding.from_pretrained(cpu(rnd(4)))


def test_embedding_max_norm_renormalizes_looked_up_rows():
    w_np = np.array([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]])
    w = cpu(w_np.copy())
    out = F.embedding(cpu([0, 1]), w, max_norm=1.0)
    np.testing.assert_allclose(w.numpy()[0], [0.6, 0.8], rtol=1e-6)  # norm 5 -> 1
    np.testing.assert_array_equal(w.numpy()[1:], w_np[1:])  # small or not looked up: unchanged
    np.testing.assert_allclose(out.numpy(), w.numpy()[[0, 1]])


def test_embedding_int32_indices_and_dtypes():
    for dtype in (mf.float16, mf.bfloat16, mf.float64):
        w = cpu(rnd(5, 4)).to(dtype)
        out = F.embedding(cpu(np.array([[4, 0]], np.int32)), w)
        assert out.dtype == dtype and out.shape == (1, 2, 4)


# ---------------------------------------------------------------- channel dropout
def test_dropout2d_zeroes_whole_channels_and_scales():
    mf.manual_seed(3)
    x = cpu(np.ones((8, 16, 3, 5)), requires_grad=True)
    y = nn.Dropout2d(0.25)(x)
    v = y.detach().numpy()
    per_channel = v.reshape(8, 16, -1)
    assert np.all(per_channel == per_channel[..., :1])  # constant over each channel
    assert set(np.unique(v)) <= {0.0, 1 / 0.75}
    assert 0.1 < (v[:, :, 0, 0] == 0).mean() < 0.4
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), v)  # the gradient uses the forward's mask


def test_dropout2d_eval_p1_inplace_and_seed():
    x = cpu(rnd(2, 3, 4, 4))
    m = nn.Dropout2d(0.5).eval()
    assert m(x) is x
    assert np.all(F.dropout2d(x, 1.0).numpy() == 0)
    mf.manual_seed(7)
    a = F.dropout2d(x, 0.5).numpy()
    mf.manual_seed(7)
    b = x.clone()
    assert F.dropout2d(b, 0.5, inplace=True) is b
    np.testing.assert_array_equal(b.numpy(), a)


def test_dropout2d_3d_input_is_channelwise_1d_with_a_warning():
    x = cpu(np.ones((4, 6, 9)))
    with pytest.warns(UserWarning, match="3D input"):
        y = F.dropout2d(x, 0.5).numpy()
    assert np.all(y == y[..., :1])


def test_dropout1d_batched_and_unbatched():
    mf.manual_seed(1)
    y = nn.Dropout1d(0.5)(cpu(np.ones((10, 7)))).numpy()  # unbatched (C, L): one factor per channel
    assert np.all(y == y[:, :1]) and 0 < (y[:, 0] == 0).sum() < 10
    y = F.dropout1d(cpu(np.ones((3, 10, 7))), 0.5).numpy()
    assert np.all(y == y[..., :1])
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout2d(1.5)


def test_alpha_dropout_keeps_mean_and_variance():
    mf.manual_seed(0)
    x_np = rnd(400, 500)
    x = cpu(x_np, requires_grad=True)
    y = nn.AlphaDropout(0.2)(x)
    v = y.detach().numpy()
    assert abs(v.mean()) < 0.01 and abs(v.std() - 1) < 0.01
    alpha = 1.7580993408473766
    a = 1 / math.sqrt((alpha ** 2 * 0.2 + 1) * 0.8)
    y.sum().backward()
    g = x.grad.numpy()
    assert set(np.unique(g)) == {0.0, a}
    dropped = g == 0
    assert 0.18 < dropped.mean() < 0.22
    np.testing.assert_allclose(v[dropped], -alpha * a + alpha * a * 0.2, rtol=1e-12)
    np.testing.assert_allclose(v[~dropped], a * x_np[~dropped] + alpha * a * 0.2, rtol=1e-12)
    assert nn.AlphaDropout(0.2).eval()(x) is x and F.alpha_dropout(x, 0.5) is x  # training=False by default


def test_feature_alpha_dropout_drops_channels():
    mf.manual_seed(0)
    y = F.feature_alpha_dropout(cpu(np.zeros((6, 10, 4, 4))), 0.5, training=True).numpy()
    assert np.all(y == y[..., :1, :1]) and len(np.unique(y)) == 2


# ---------------------------------------------------------------- Identity, Unflatten
def test_identity_takes_any_arguments():
    x = cpu(rnd(3))
    assert nn.Identity(54, unused_argument1=0.1, unused_argument2=False)(x) is x


def test_unflatten():
    x = cpu(rnd(2, 12, 3))
    assert nn.Unflatten(1, (3, 4))(x).shape == (2, 3, 4, 3)
    assert nn.Unflatten(-2, (2, -1, 3))(x).shape == (2, 2, 2, 3, 3)
    np.testing.assert_array_equal(nn.Unflatten(1, (3, 4))(x).numpy(), x.numpy().reshape(2, 3, 4, 3))
    with pytest.raises(ValueError, match="multiply up"):
        nn.Unflatten(1, (5, 2))(x)
    with pytest.raises(TypeError, match="tuple of ints"):
        nn.Unflatten(1, 12)
    assert nn.Flatten()(x).shape == (2, 36)


def test_flatten_of_a_scalar_checks_its_dims_as_one_dimension():
    # PyTorch wraps a 0-d tensor's dims as one dimension's, [-1, 0]: flatten(x, 1) (nn.Flatten's default, a
    # ResNet head's call) is an IndexError for a scalar rather than a silent (1,) tensor
    s = cpu(np.array(3.0))
    for start, end in ((0, -1), (-1, 0), (0, 0)):
        np.testing.assert_array_equal(mf.flatten(s, start, end).numpy(), [3.0])
    for call in (lambda: mf.flatten(s, 1), lambda: s.flatten(0, 1), lambda: nn.Flatten()(s),
                 lambda: mf.flatten(s, -2)):
        with pytest.raises(IndexError, match="flatten"):
            call()


# ---------------------------------------------------------------- hooks
class Affine(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(cpu(np.array(2.0)))

    def forward(self, x, shift=0.0):
        return x * self.scale + shift


def test_forward_hook_sees_args_and_output_and_can_replace_it():
    m, seen = Affine(), []
    h = m.register_forward_hook(lambda mod, args, out: seen.append((mod, args, out)))
    x = cpu([1.0, 2.0])
    y = m(x)
    assert seen[0][0] is m and seen[0][1][0] is x and seen[0][2] is y
    h.remove()
    h2 = m.register_forward_hook(lambda mod, args, out: out + 100)
    assert m(x).tolist() == [102.0, 104.0]
    h2.remove()
    h2.remove()  # twice is harmless
    assert m(x).tolist() == [2.0, 4.0] and len(seen) == 1
    assert m.__dict__.get("_call_hooks") is None  # back on the fast path


def test_forward_pre_hook_replaces_args():
    m = Affine()
    x = cpu([1.0])
    with m.register_forward_pre_hook(lambda mod, args: args[0] * 10):  # one value: wrapped in a tuple
        assert m(x).tolist() == [20.0]
    assert m(x).tolist() == [2.0]
    h = m.register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] + 1,), {"shift": 5.0}), with_kwargs=True)
    assert m(x).tolist() == [9.0]
    h.remove()
    h = m.register_forward_pre_hook(lambda mod, args, kwargs: 3, with_kwargs=True)
    with pytest.raises(RuntimeError, match=r"\(new_args, new_kwargs\)"):
        m(x)


def test_hooks_run_in_order_with_prepend_and_kwargs():
    m, order = Affine(), []
    m.register_forward_hook(lambda *a: order.append("a"))
    m.register_forward_hook(lambda *a: order.append("b"))
    m.register_forward_hook(lambda *a: order.append("first"), prepend=True)
    m.register_forward_pre_hook(lambda *a: order.append("pre"))
    m.register_forward_hook(lambda mod, args, kwargs, out: order.append(("kw", kwargs)), with_kwargs=True)
    m(cpu([1.0]), shift=1.0)
    assert order == ["pre", "first", "a", "b", ("kw", {"shift": 1.0})]


def test_always_call_forward_hook_runs_when_forward_raises():
    m, seen = Affine(), []
    m.register_forward_hook(lambda mod, args, out: seen.append(out), always_call=True)
    with pytest.raises(TypeError):
        m(cpu([1.0]), bad_keyword=1)
    assert seen == [None]


@pytest.mark.parametrize("grad", [True, False])
def test_hooks_inside_sequential_fire_despite_fusion(grad):
    """Linear + ReLU fuse in a Sequential (and ReLU runs in place under no_grad): a hook on either
    module makes the container call both as they are, so every hook fires and sees the real values."""
    mf.manual_seed(0)
    seq = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2), nn.ReLU())
    x = cpu(rnd(5, 4)).float()
    want = seq(x).detach().numpy()
    kept = {}

    def keep(name, value):
        kept.setdefault(name, value)  # (returns None: the output stays)

    seq[0].register_forward_hook(lambda m, a, out: keep("linear", out.detach().numpy().copy()))
    seq[0].register_forward_hook(lambda m, a, out: keep("linear_tensor", out))
    seq[3].register_forward_hook(lambda m, a, out: keep("relu", True))
    with mf.set_grad_enabled(grad):
        y = seq(x)
    np.testing.assert_allclose(y.detach().numpy(), want, rtol=1e-6)
    assert kept["relu"]
    # the following ReLU did not overwrite the Linear output the hook kept
    np.testing.assert_array_equal(kept["linear_tensor"].detach().numpy(), kept["linear"])
    assert (kept["linear"] < 0).any()
    seq[2].register_forward_hook(lambda m, a, out: out * 0)  # replacement inside a fused pair
    assert np.all(seq(x).detach().numpy() == 0)


def test_full_backward_hook_sees_and_replaces_gradients():
    m = Affine()
    x = cpu([1.0, 3.0], requires_grad=True)
    seen = []

    def hook(mod, grad_input, grad_output):
        seen.append((grad_input[0].numpy().copy(), grad_output[0].numpy().copy()))
        return (grad_input[0] * 10,)

    h = m.register_full_backward_hook(hook)
    (m(x) * cpu([1.0, 2.0])).sum().backward()
    np.testing.assert_allclose(seen[0][1], [1.0, 2.0])  # d loss / d output
    np.testing.assert_allclose(seen[0][0], [2.0, 4.0])  # d loss / d x before the hook
    np.testing.assert_allclose(x.grad.numpy(), [20.0, 40.0])
    assert m.scale.grad.item() == pytest.approx(7.0)  # the parameter's gradient is not the hook's
    h.remove()
    x.grad = None
    m(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_full_backward_hook_with_inputs_that_need_no_grad():
    m, seen = Affine(), []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append((gi, go[0].numpy().copy())))
    m(cpu([1.0, 2.0])).sum().backward()
    assert seen[0][0] == (None,) and seen[0][1].tolist() == [1.0, 1.0]


def test_full_backward_hook_gives_zeros_for_a_tensor_input_that_needs_no_grad_beside_one_that_does():
    """PyTorch's grad_input: a tensor input that needs no gradient, beside one that does, gets zeros of its shape
    and dtype (None is for the arguments that are no tensor, or when no input needs a gradient)."""
    class Pick(nn.Module):
        def forward(self, a, idx, scale):
            return a[idx] * scale

    m, seen = Pick(), []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append(gi))
    a = cpu([2.0, 3.0], requires_grad=True)
    m(a, mf.tensor([1, 1]), 2.0).sum().backward()
    grad_a, grad_idx, grad_scale = seen[0]
    assert grad_a.tolist() == [0.0, 4.0] and grad_scale is None
    assert grad_idx.dtype == mf.int64 and grad_idx.tolist() == [0, 0]
    np.testing.assert_array_equal(a.grad.numpy(), [0.0, 4.0])


@pytest.mark.parametrize("create_graph", [False, True])
def test_full_backward_hooks_see_none_for_an_unused_output(create_graph):
    """PyTorch's grad_output holds None (not zeros) for an output the loss does not use, in the backward pre-hooks
    and the full backward hooks alike; a pre-hook may replace it with a gradient, which then flows."""
    class Three(nn.Module):
        def forward(self, x, y):
            return x * y, x + y, x - y

    def listed(gs):
        return [None if g is None else g.tolist() for g in gs]

    m, seen = Three(), []
    m.register_full_backward_pre_hook(lambda mod, go: seen.append(("pre", listed(go))))
    m.register_full_backward_hook(lambda mod, gi, go: seen.append(("bw", listed(gi), listed(go))))
    x, y = cpu([2.0], requires_grad=True), cpu([3.0], requires_grad=True)
    prod, _, diff = m(x, y)
    gx, gy = mf.autograd.grad((prod + 3 * diff).sum(), (x, y), create_graph=create_graph)
    assert seen == [("pre", [[1.0], None, [3.0]]), ("bw", [[6.0], [-1.0]], [[1.0], None, [3.0]])]  # PyTorch's
    assert gx.tolist() == [6.0] and gy.tolist() == [-1.0]
    m = Three()
    m.register_full_backward_pre_hook(lambda mod, go: tuple(cpu([1.0]) if g is None else g for g in go))
    prod, _, _ = m(x, y)
    prod.sum().backward()
    assert x.grad.tolist() == [5.0] and y.grad.tolist() == [2.0]  # y + 1 + 1, x + 1 - 1


def test_apply_visits_children_first_and_returns_self():
    seq = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU(), nn.Linear(2, 1)))
    order = []
    assert seq.apply(lambda m: order.append(type(m).__name__)) is seq
    assert order == ["Linear", "ReLU", "Linear", "Sequential", "Sequential"]

    def zero(m):
        if isinstance(m, nn.Linear):
            nn.init.zeros_(m.weight)

    seq.apply(zero)
    assert all(np.all(p.detach().numpy() == 0) for n, p in seq.named_parameters() if n.endswith("weight"))


# ---------------------------------------------------------------- nn.utils
def test_parameters_to_vector_and_back():
    model = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
    vec = nn.utils.parameters_to_vector(model.parameters())
    assert vec.shape == (11,)
    np.testing.assert_array_equal(vec.detach().numpy(),
                                  np.concatenate([p.detach().numpy().ravel() for p in model.parameters()]))
    (vec * cpu(np.arange(11.0)).float()).sum().backward()  # differentiable, as PyTorch's
    np.testing.assert_array_equal(model[0].weight.grad.numpy().ravel(), np.arange(6.0))
    new = cpu(np.arange(11.0)).float()
    nn.utils.vector_to_parameters(new, model.parameters())
    np.testing.assert_array_equal(model[1].bias.detach().numpy(), [10.0])
    np.testing.assert_array_equal(model[0].weight.detach().numpy(), np.arange(6.0).reshape(2, 3))
    with pytest.raises(TypeError, match="expected a tensor vec"):
        nn.utils.vector_to_parameters(np.zeros(11), model.parameters())
    with pytest.raises(ValueError, match="vec has 10 elements but the parameters hold 11"):
        nn.utils.vector_to_parameters(mf.zeros(10), model.parameters())


@pytest.mark.parametrize("norm_type", [2.0, 1, 3.5, math.inf, -math.inf, 0])
def test_clip_grad_norm_matches_torch_formula(norm_type):
    grads = [rnd(3, 4, seed=1), rnd(5, seed=2)]
    params = []
    for g in grads:
        p = nn.Parameter(mf.zeros(*g.shape, dtype=mf.float64, device="cpu"))
        p.grad = cpu(g.copy())
        params.append(p)
    norms = [np.linalg.norm(g.ravel(), ord=norm_type) for g in grads]
    total = np.linalg.norm(np.array(norms), ord=norm_type)
    got = nn.utils.clip_grad_norm_(iter(params), 0.5, norm_type=norm_type, foreach=True)
    assert isinstance(got, mf.Tensor) and got.shape == () and got.dtype == mf.float64
    assert float(got) == pytest.approx(total, rel=1e-12)
    coef = min(0.5 / (total + 1e-6), 1.0)
    for p, g in zip(params, grads):
        np.testing.assert_allclose(p.grad.numpy(), g * coef, rtol=1e-12)


def test_clip_grad_norm_edge_cases():
    assert float(nn.utils.clip_grad_norm_([], 1.0)) == 0.0
    p = nn.Parameter(mf.zeros(3, dtype=mf.float16, device="cpu"))
    p.grad = cpu(np.array([3.0, 4.0, 0.0])).half()
    total = nn.utils.clip_grad_norm_(p, 1.0)
    assert total.dtype == mf.float16 and float(total) == pytest.approx(5.0)
    np.testing.assert_allclose(p.grad.float().numpy(), [0.6, 0.8, 0.0], rtol=2e-3)
    q = nn.Parameter(mf.zeros(1, device="cpu"))
    q.grad = cpu(np.array([np.inf], np.float32))
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_([q], 1.0, error_if_nonfinite=True)
    nn.utils.clip_grad_value_([q], 2.0, foreach=False)
    assert q.grad.tolist() == [2.0]


@pytest.mark.filterwarnings("error")  # (a float16 norm past 65504 overflows without a NumPy warning)
def test_total_norm_rounds_each_tensors_norm_to_its_dtype():
    """PyTorch's total norm is the norm of the per-tensor norms, each in its tensor's dtype: float16 ones are
    rounded (or overflow to inf) before the outer norm."""
    a, b = np.array([5.0, 8.0], np.float16), np.array([6.0, 1.0, 4.0], np.float16)
    rounded = [np.float16(np.linalg.norm(g.astype(np.float64))) for g in (a, b)]  # 9.44, 7.28
    expected = np.float16(np.hypot(*np.array(rounded, np.float64)))
    assert expected != np.float16(np.linalg.norm(np.r_[a, b].astype(np.float64)))  # (the case tells them apart)
    got = nn.utils.get_total_norm([cpu(a), cpu(b)])
    assert got.dtype == mf.float16 and got.item() == float(expected)
    big = nn.Parameter(mf.zeros(100, dtype=mf.float16, device="cpu"))
    big.grad = mf.full((100,), 1e4, dtype=mf.float16, device="cpu")  # norm 1e5: inf in float16
    small = nn.Parameter(mf.zeros(2, device="cpu"))
    small.grad = mf.ones(2, device="cpu")
    total = nn.utils.clip_grad_norm_([big, small], 1.0)
    assert total.dtype == mf.float32 and float(total) == np.inf


@pytest.mark.filterwarnings("error")  # PyTorch is silent in these cases; no NumPy warning may leak
def test_nan_results_are_silent():
    """An inf gradient clipped (coefficient 0: inf * 0 = NaN) and the mean of nothing (an empty batch's
    mse_loss / l1_loss) give NaN without a NumPy RuntimeWarning, as PyTorch."""
    q = nn.Parameter(mf.zeros(2, device="cpu"))
    q.grad = cpu(np.array([np.inf, 1.0], np.float32))
    assert float(nn.utils.clip_grad_norm_([q], 1.0)) == np.inf
    assert np.isnan(q.grad.numpy()[0]) and q.grad.numpy()[1] == 0.0
    x = cpu(np.zeros((0, 3), np.float32), requires_grad=True)
    for loss in (F.mse_loss, F.l1_loss):
        y = loss(x, cpu(np.zeros((0, 3), np.float32)))
        assert y.dtype == np.float32 and np.isnan(y.item())
    y.backward()
    assert x.grad.shape == (0, 3)
    assert np.isnan(cpu(np.zeros((2, 0))).mean(1).numpy()).all() and cpu(np.zeros((0, 3))).mean(1).shape == (0,)


# ---------------------------------------------------------------- GPU: against PyTorch
def _rel(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def _both(torch, fn, tfn, x_np, dtype=np.float32, tol=2e-5):
    """Forward and input gradient of ``fn`` (ours, cuda) and ``tfn`` (PyTorch, cuda) on ``x_np``."""
    x = mf.tensor(x_np.astype(dtype), device="cuda", requires_grad=True)
    tx = torch.tensor(x_np.astype(dtype), device="cuda", requires_grad=True)
    y, ty = fn(x), tfn(tx)
    assert tuple(y.shape) == tuple(ty.shape)
    assert _rel(y.float().cpu().numpy(), ty.detach().float().cpu().numpy()) < tol
    g = np.random.default_rng(1).standard_normal(tuple(y.shape)).astype(dtype)
    y.backward(mf.tensor(g, device="cuda"))
    ty.backward(torch.tensor(g, device="cuda"))
    assert _rel(x.grad.float().cpu().numpy(), tx.grad.float().cpu().numpy()) < tol


INTERP_CASES = [
    ("nearest", dict(scale_factor=2)), ("nearest", dict(size=(7, 5))), ("nearest", dict(scale_factor=1.7)),
    ("nearest", dict(scale_factor=(0.6, 2.3))), ("nearest-exact", dict(size=(9, 4))),
    ("nearest-exact", dict(scale_factor=1.3)),
    ("bilinear", dict(size=(9, 13))), ("bilinear", dict(scale_factor=1.5)), ("bilinear", dict(scale_factor=(0.7, 2.2))),
    ("bilinear", dict(size=(3, 4))), ("bilinear", dict(scale_factor=(2.3, 0.6), recompute_scale_factor=True)),
    ("bilinear", dict(size=(1, 5))), ("area", dict(size=(3, 4))),
    ("bicubic", dict(size=(9, 13))), ("bicubic", dict(scale_factor=1.5)), ("bicubic", dict(scale_factor=(0.7, 2.2))),
    ("bicubic", dict(size=(3, 4))), ("bicubic", dict(size=(1, 5))),
    ("bicubic", dict(scale_factor=1.1)),  # 7 x 6 -> 7 x 6: PyTorch's CUDA kernel copies (its CPU one interpolates)
]


@pytest.mark.gpu
@pytest.mark.parametrize("align", [None, True, False])
@pytest.mark.parametrize("mode,kw", INTERP_CASES, ids=[f"{m}-{i}" for i, (m, _) in enumerate(INTERP_CASES)])
def test_interpolate_2d_matches_pytorch(torch, mode, kw, align):
    if align is not None and mode not in ("bilinear", "bicubic"):
        pytest.skip("align_corners applies to the linear modes only")
    x = np.random.default_rng(0).standard_normal((2, 3, 7, 6))
    _both(torch, lambda t: F.interpolate(t, mode=mode, align_corners=align, **kw),
          lambda t: torch.nn.functional.interpolate(t, mode=mode, align_corners=align, **kw), x)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("mode,kw", [("nearest", dict(scale_factor=2)), ("nearest", dict(size=(5, 17))),
                                     ("nearest", dict(scale_factor=(0.6, 2.3))),
                                     ("nearest-exact", dict(scale_factor=1.3)), ("nearest", dict(size=(1, 1)))])
def test_interpolate_nearest_2d_runs_one_kernel_each_way(torch, monkeypatch, poisoned_pool, dtype, mode, kw):
    """A 4-D nearest (or nearest-exact) resampling runs resample.cu's gather forward and window-sum backward, one
    launch each: PyTorch's values (the forward bit for bit; the backward's float32 window sums rounded once), over
    thousands of planes (the grid-stride loop), upsampling, downsampling (inputs no output reads get 0) and mixed."""
    from minifused.kernels import resample as KR

    calls = []
    for name in ("nearest_forward", "nearest_backward"):
        real = getattr(KR, name)
        monkeypatch.setattr(KR, name, lambda *a, _real=real, _name=name: (calls.append(_name), _real(*a))[1])
    x_np = np.random.default_rng(3).standard_normal((16, 300, 9, 7)).astype(dtype)
    x = mf.tensor(x_np, device="cuda", requires_grad=True)
    tx = torch.tensor(x_np, device="cuda", requires_grad=True)
    y, ty = F.interpolate(x, mode=mode, **kw), torch.nn.functional.interpolate(tx, mode=mode, **kw)
    assert np.array_equal(y.detach().cpu().numpy(), ty.detach().cpu().numpy())
    g = np.random.default_rng(4).standard_normal(tuple(y.shape)).astype(dtype)
    y.backward(mf.tensor(g, device="cuda"))
    ty.backward(torch.tensor(g, device="cuda"))
    assert _rel(x.grad.float().cpu().numpy(), tx.grad.float().cpu().numpy()) < (1e-6 if dtype == np.float32 else 1e-3)
    assert calls == ["nearest_forward", "nearest_backward"]


@pytest.mark.gpu
@pytest.mark.parametrize("mode,kw", [("nearest", dict(scale_factor=2.5)), ("nearest", dict(size=4)),
                                     ("nearest-exact", dict(size=11)), ("linear", dict(size=13)),
                                     ("linear", dict(scale_factor=0.6)), ("area", dict(size=3))])
@pytest.mark.parametrize("align", [None, True])
def test_interpolate_1d_matches_pytorch(torch, mode, kw, align):
    if align and mode != "linear":
        pytest.skip("align_corners applies to the linear modes only")
    x = np.random.default_rng(0).standard_normal((2, 3, 7))
    _both(torch, lambda t: F.interpolate(t, mode=mode, align_corners=align, **kw),
          lambda t: torch.nn.functional.interpolate(t, mode=mode, align_corners=align, **kw), x)


@pytest.mark.gpu
@pytest.mark.parametrize("mode,kw", [("trilinear", dict(size=(5, 2, 7))), ("trilinear", dict(scale_factor=1.5)),
                                     ("trilinear", dict(scale_factor=(2.0, 0.5, 1.3))),
                                     ("nearest", dict(size=(5, 2, 7))), ("nearest-exact", dict(scale_factor=1.5))])
@pytest.mark.parametrize("align", [None, True])
def test_interpolate_3d_matches_pytorch(torch, mode, kw, align):
    if align and mode != "trilinear":
        pytest.skip("align_corners applies to the linear modes only")
    x = np.random.default_rng(0).standard_normal((2, 3, 3, 4, 5))
    _both(torch, lambda t: F.interpolate(t, mode=mode, align_corners=align, **kw),
          lambda t: torch.nn.functional.interpolate(t, mode=mode, align_corners=align, **kw), x)


@pytest.mark.gpu
def test_interpolate_half_matches_pytorch(torch):
    x = np.random.default_rng(0).standard_normal((2, 3, 9, 7))
    for mode in ("bilinear", "bicubic"):
        _both(torch, lambda t: F.interpolate(t, scale_factor=1.5, mode=mode),
              lambda t: torch.nn.functional.interpolate(t, scale_factor=1.5, mode=mode), x, np.float16, 2e-3)


ADAPTIVE_CASES = [((7, 10), (3, 4)), ((10, 9), (4, 5)), ((7, 7), (3, 3)), ((5, 6), (1, 1)), ((8, 12), (4, 3)),
                  ((3, 4), (5, 7)), ((9, 11), (None, 4))]


@pytest.mark.gpu
@pytest.mark.parametrize("hw,out", ADAPTIVE_CASES)
def test_adaptive_pools_match_pytorch(torch, hw, out):
    rng = np.random.default_rng(0)
    x = (rng.permutation(2 * 3 * hw[0] * hw[1]).reshape((2, 3) + hw) / 7.0).astype(np.float32)  # no ties
    _both(torch, lambda t: F.adaptive_avg_pool2d(t, out),
          lambda t: torch.nn.functional.adaptive_avg_pool2d(t, out), x)
    _both(torch, lambda t: F.adaptive_max_pool2d(t, out),
          lambda t: torch.nn.functional.adaptive_max_pool2d(t, out), x)
    _, idx = F.adaptive_max_pool2d(mf.tensor(x, device="cuda"), out, return_indices=True)
    _, tidx = torch.nn.functional.adaptive_max_pool2d(torch.tensor(x, device="cuda"), out, return_indices=True)
    np.testing.assert_array_equal(idx.cpu().numpy(), tidx.cpu().numpy())


@pytest.mark.gpu
def test_adaptive_pool_modules_unbatched_and_1d_match_pytorch(torch):
    x = np.random.default_rng(0).standard_normal((3, 10, 7))
    _both(torch, nn.AdaptiveAvgPool2d((4, 3)), torch.nn.AdaptiveAvgPool2d((4, 3)), x)
    _both(torch, nn.AdaptiveMaxPool2d(3), torch.nn.AdaptiveMaxPool2d(3), x)
    _both(torch, nn.AdaptiveAvgPool1d(4), torch.nn.AdaptiveAvgPool1d(4), x)
    _both(torch, nn.AdaptiveMaxPool1d(3), torch.nn.AdaptiveMaxPool1d(3), x)
    _both(torch, nn.AdaptiveAvgPool2d(1), torch.nn.AdaptiveAvgPool2d(1), x, np.float16, 2e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("mode,pad", [("constant", (1, 2, -1, 3)), ("reflect", (3, 1, 2, 4)),
                                      ("replicate", (0, 5, 2, 1)), ("circular", (2, 3, 1, 5)),
                                      ("reflect", (2, 1)), ("circular", (-1, 2))])
def test_pad_matches_pytorch(torch, mode, pad):
    x = np.random.default_rng(0).standard_normal((2, 3, 5, 6) if len(pad) == 4 else (2, 3, 6))
    _both(torch, lambda t: F.pad(t, pad, mode), lambda t: torch.nn.functional.pad(t, pad, mode), x)


@pytest.mark.gpu
@pytest.mark.parametrize("kw", [dict(), dict(padding_idx=3), dict(scale_grad_by_freq=True),
                                dict(padding_idx=0, scale_grad_by_freq=True)])
def test_embedding_gradients_with_repeated_indices_match_pytorch(torch, kw):
    rng = np.random.default_rng(0)
    w_np = rng.standard_normal((11, 6)).astype(np.float32)
    idx = rng.integers(0, 11, (5, 9))
    idx[0, :4] = 3  # many repeats
    w = mf.tensor(w_np, device="cuda", requires_grad=True)
    tw = torch.tensor(w_np, device="cuda", requires_grad=True)
    y = F.embedding(mf.tensor(idx, device="cuda"), w, **kw)
    ty = torch.nn.functional.embedding(torch.tensor(idx, device="cuda"), tw, **kw)
    np.testing.assert_array_equal(y.detach().cpu().numpy(), ty.detach().cpu().numpy())
    g = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    y.backward(mf.tensor(g, device="cuda"))
    ty.backward(torch.tensor(g, device="cuda"))
    assert _rel(w.grad.cpu().numpy(), tw.grad.cpu().numpy()) < 1e-6


@pytest.mark.gpu
def test_embedding_module_matches_pytorch(torch):
    theirs = torch.nn.Embedding(20, 7, padding_idx=5).cuda()
    ours = nn.Embedding(20, 7, padding_idx=5, device="cuda")
    ours.load_state_dict({k: v.detach().cpu().numpy() for k, v in theirs.state_dict().items()})
    idx = np.random.default_rng(0).integers(0, 20, (4, 13))
    y, ty = ours(mf.tensor(idx, device="cuda")), theirs(torch.tensor(idx, device="cuda"))
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    assert _rel(ours.weight.grad.cpu().numpy(), theirs.weight.grad.cpu().numpy()) < 1e-6


@pytest.mark.gpu
def test_embedding_index_out_of_range_on_cuda_raises_at_sync():
    w = mf.randn(5, 3, device="cuda")
    y = F.embedding(mf.tensor([0, 9], device="cuda"), w)
    with pytest.raises(IndexError, match="out of range"):
        y.sum().item()
    assert F.embedding(mf.tensor([4], device="cuda"), w).sum().item() == pytest.approx(float(w[4].sum().item()))


@pytest.mark.gpu
def test_dropout2d_cuda_drops_the_channels_cpu_drops():
    x = np.ones((6, 16, 3, 3), np.float32)
    mf.manual_seed(11)
    on_cpu = F.dropout2d(mf.tensor(x, device="cpu"), 0.4).numpy()
    mf.manual_seed(11)
    xc = mf.tensor(x, device="cuda", requires_grad=True)
    y = F.dropout2d(xc, 0.4)
    np.testing.assert_array_equal(y.detach().cpu().numpy(), on_cpu)
    y.sum().backward()
    np.testing.assert_array_equal(xc.grad.cpu().numpy(), on_cpu)


# ---------------------------------------------------------------- Conv1d, PReLU, PixelShuffle, ParameterList
def _conv1d_ref(x, w, b, stride, padding, dilation, groups):
    n, c, length = x.shape
    k, cg, taps = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding)))
    out_len = (length + 2 * padding - dilation * (taps - 1) - 1) // stride + 1
    out = np.zeros((n, k, out_len))
    for o in range(k):
        g = o // (k // groups)
        for t in range(out_len):
            window = xp[:, g * cg:(g + 1) * cg, t * stride:t * stride + dilation * (taps - 1) + 1:dilation]
            out[:, o, t] = (window * w[o]).sum((1, 2)) + b[o]
    return out


def test_conv1d_against_a_direct_loop():
    """F.conv1d / nn.Conv1d (on the 2-D kernels over a height of one) against a direct float64 loop: stride,
    padding, dilation, groups; 'same' with an even kernel; padding modes; unbatched input; gradients by finite
    differences; PyTorch's initialisation bound."""
    from minifused.testing import gradcheck

    rng = np.random.default_rng(5)
    x, w, b = rng.standard_normal((2, 4, 11)), rng.standard_normal((6, 2, 3)), rng.standard_normal(6)
    for stride, padding, dilation in [(1, 0, 1), (2, 1, 1), (1, 2, 2), (3, 0, 1)]:
        got = F.conv1d(mf.tensor(x), mf.tensor(w), mf.tensor(b), stride, padding, dilation, 2).numpy()
        np.testing.assert_allclose(got, _conv1d_ref(x, w, b, stride, padding, dilation, 2), rtol=1e-12, atol=1e-12)
    assert gradcheck(lambda a, ww, bb: F.conv1d(a, ww, bb, 2, 1, 1, 2),
                     [mf.tensor(x, requires_grad=True), mf.tensor(w, requires_grad=True),
                      mf.tensor(b, requires_grad=True)])
    m = nn.Conv1d(4, 6, 4, padding="same", dtype=mf.float64)
    want = _conv1d_ref(np.pad(x, ((0, 0), (0, 0), (1, 2))), m.weight.numpy(), m.bias.numpy(), 1, 0, 1, 1)
    np.testing.assert_allclose(m(mf.tensor(x)).numpy(), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(m(mf.tensor(x[0])).numpy(), want[0], rtol=1e-12, atol=1e-12)
    r = nn.Conv1d(4, 6, 3, padding=1, padding_mode="circular", dtype=mf.float64)
    want = _conv1d_ref(np.pad(x, ((0, 0), (0, 0), (1, 1)), mode="wrap"), r.weight.numpy(), r.bias.numpy(), 1, 0, 1, 1)
    np.testing.assert_allclose(r(mf.tensor(x)).numpy(), want, rtol=1e-12, atol=1e-12)
    assert r.weight.shape == (6, 4, 3) and np.abs(r.weight.numpy()).max() <= 1 / math.sqrt(12)
    with pytest.raises(ValueError, match="conv1d: expected a 3-D input"):
        F.conv1d(mf.randn(2, 4, 5, 5), mf.randn(6, 4, 3))


def test_prelu_and_pixel_shuffle():
    """PReLU (one slope or one per channel, learned) against NumPy with gradients; pixel_shuffle moves
    channel c r^2 + i r + j to pixel offset (i, j), as PyTorch's, and pixel_unshuffle undoes it."""
    from minifused.testing import gradcheck

    rng = np.random.default_rng(6)
    x, w = rng.standard_normal((2, 3, 4, 5)), rng.random(3)
    np.testing.assert_array_equal(F.prelu(mf.tensor(x), mf.tensor(w)).numpy(),
                                  np.where(x > 0, x, w.reshape(1, -1, 1, 1) * x))
    assert gradcheck(F.prelu, [mf.tensor(x, requires_grad=True), mf.tensor(w, requires_grad=True)])
    m = nn.PReLU()
    assert m.weight.tolist() == [0.25] and m(mf.tensor([-2.0, 3.0])).tolist() == [-0.5, 3.0]
    with pytest.raises(ValueError, match=r"weight must hold 1 value or one per channel \(3\)"):
        F.prelu(mf.tensor(x), mf.ones(2, dtype=mf.float64))
    r = 2
    p = rng.standard_normal((2, 3 * r * r, 3, 4))
    s = nn.PixelShuffle(r)(mf.tensor(p)).numpy()
    assert s.shape == (2, 3, 6, 8)
    for c in range(3):
        for i in range(r):
            for j in range(r):
                np.testing.assert_array_equal(s[:, c, i::r, j::r], p[:, c * r * r + i * r + j])
    np.testing.assert_array_equal(nn.PixelUnshuffle(r)(mf.tensor(s)).numpy(), p)
    assert F.pixel_shuffle(mf.tensor(p[0]), r).shape == (3, 6, 8)
    with pytest.raises(ValueError, match="divisible by upscale_factor squared"):
        F.pixel_shuffle(mf.randn(1, 5, 2, 2), 2)


def test_parameter_list_and_dict_register_their_parameters():
    """ParameterList / ParameterDict: parameters (tensors become Parameters) under their indices or keys, in the
    module's parameters, state dict and optimizer, as PyTorch's."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.scales = nn.ParameterList([nn.Parameter(mf.ones(2)), mf.zeros(3)])
            self.table = nn.ParameterDict({"a": mf.ones(1)})

    m = Model()
    m.scales.append(mf.ones(4))
    m.table["b"] = mf.zeros(2)
    assert [n for n, _ in m.named_parameters()] == ["scales.0", "scales.1", "scales.2", "table.a", "table.b"]
    assert list(m.state_dict()) == ["scales.0", "scales.1", "scales.2", "table.a", "table.b"]
    assert isinstance(m.scales[1], nn.Parameter) and m.scales[-1].shape == (4,) and len(m.scales[:2]) == 2
    assert "b" in m.table and list(m.table.keys()) == ["a", "b"] and len(m.table) == 2
    with pytest.raises(IndexError, match="out of range"):
        m.scales[5]
