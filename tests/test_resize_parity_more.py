"""interpolate / grid_sample corners that PyTorch's kernels treat specially, against NumPy float64 references written
from ATen's CPU kernels (UpSampleKernel.cpp, UpSample.h; each checked against torch 2.x by hand)."""
import numpy as np
import pytest

import minifused as mf
import minifused.functional as F


def _nearest_src(n, m, scale):
    """ATen's nearest_neighbor_compute_source_index: floor(dst * s), s = 1/scale (float32), clamped."""
    s = np.float32(1.0 / scale) if scale else np.float32(n) / np.float32(m)
    return np.minimum(np.floor(np.arange(m, dtype=np.float32) * s).astype(np.int64), n - 1)


def _nearest_backward_src(n, m, scale):
    """ATen's nearest_idx, which its cpu nearest backward uses: a kept size copies, a doubled one halves (the scale
    ignored), else as the forward."""
    return _nearest_src(n, m, None if m in (n, 2 * n) else scale)


@pytest.mark.parametrize("shape,scale", [((1, 2, 3), (1.3,)), ((1, 1, 5), (2.1,)), ((2, 1, 3, 4, 3), (1.3, 2.2, 0.9)),
                                         ((1, 1, 4, 3, 2), (1.1, 2.0, 1.7))])
def test_nearest_1d_3d_backward_ignores_scale_on_kept_or_doubled_sizes(shape, scale):
    rng = np.random.default_rng(0)
    x = mf.tensor(rng.standard_normal(shape), requires_grad=True)
    y = F.interpolate(x, scale_factor=scale, mode="nearest")
    spatial = shape[2:]
    out = [int(np.floor(n * s)) for n, s in zip(spatial, scale)]
    ref = x.detach().numpy()
    for axis, (n, m, s) in enumerate(zip(spatial, out, scale)):  # the forward: the scale as given
        ref = np.take(ref, _nearest_src(n, m, s), axis=axis + 2)
    np.testing.assert_array_equal(y.detach().numpy(), ref)
    g = rng.standard_normal(y.shape)
    y.backward(mf.tensor(g))
    want = g
    for axis in reversed(range(len(spatial))):  # the scatter-add of the backward's own indices
        n, m, s = spatial[axis], out[axis], scale[axis]
        moved = np.moveaxis(want, axis + 2, 0)
        acc = np.zeros((n,) + moved.shape[1:])
        np.add.at(acc, _nearest_backward_src(n, m, s), moved)
        want = np.moveaxis(acc, 0, axis + 2)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape,kw", [((2, 1, 3, 8), dict(scale_factor=0.33)), ((1, 1, 3), dict(size=0)),
                                      ((1, 1, 3, 4, 5), dict(size=(0, 2, 2)))])
def test_area_to_an_empty_size_is_empty(shape, kw):
    # PyTorch's 'area' is adaptive average pooling, which takes an output size of 0; the other modes raise
    y = F.interpolate(mf.zeros(*shape), mode="area", **kw)
    spatial = [int(np.floor(n * kw["scale_factor"])) for n in shape[2:]] if "scale_factor" in kw else kw["size"]
    assert y.shape == shape[:2] + tuple(np.atleast_1d(spatial))
    with pytest.raises(Exception, match="interpolate: input and output sizes must be greater than 0"):
        F.interpolate(mf.zeros(*shape), mode="nearest", **kw)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("point", [(np.nan, 0.3), (np.inf, -0.2), (-np.inf, 0.1), (0.5, np.nan)])
def test_grid_sample_nan_point_gives_the_input_no_gradient(mode, point):
    # PyTorch's cpu kernel: a NaN or infinite point is outside, its taps neither read nor receive gradient (the
    # bilinear output is still NaN there: its masked loads times NaN weights); a finite point beside it is unharmed
    rng = np.random.default_rng(3)
    x = mf.tensor(rng.standard_normal((1, 2, 3, 4)), requires_grad=True)
    grid = mf.tensor(np.array([point, (0.0, 0.0)]).reshape(1, 1, 2, 2))
    y = F.grid_sample(x, grid, mode=mode, padding_mode="zeros", align_corners=False)
    y.sum().backward()
    grad = x.grad.numpy()
    assert np.isfinite(grad).all()
    # the finite point (0, 0) is at pixel (1, 1.5): halfway between (1, 1) and (1, 2), bilinear's weights
    want = {"bilinear": [[0, 0, 0, 0], [0, .5, .5, 0], [0, 0, 0, 0]]}.get(mode)
    if want is not None:
        np.testing.assert_allclose(grad, np.broadcast_to(want, grad.shape))
    assert np.isclose(grad.sum(), 2.0)  # each channel's weights sum to 1, the NaN point's none


@pytest.mark.parametrize("mode,kw", [("nearest", {}), ("nearest-exact", {}), ("bilinear", {}), ("bicubic", {}),
                                     ("bilinear", dict(antialias=True)), ("bicubic", dict(antialias=True))])
@pytest.mark.parametrize("size", [(7, 3), (5, 4), (2, 2)])
def test_upsampling_keeps_channels_last(mode, kw, size):
    # PyTorch's upsampling kernels write a channels-last output for a channels-last input; the values are the same
    rng = np.random.default_rng(4)
    x = mf.tensor(rng.standard_normal((2, 3, 5, 4)))
    want = F.interpolate(x, size=size, mode=mode, **kw).numpy()
    xc = x.contiguous(memory_format=mf.channels_last).requires_grad_()
    y = F.interpolate(xc, size=size, mode=mode, **kw)
    assert y.is_contiguous(memory_format=mf.channels_last) and not y.is_contiguous()
    np.testing.assert_allclose(y.detach().numpy(), want, rtol=1e-12, atol=1e-12)
    y.sum().backward()
    assert xc.grad.is_contiguous(memory_format=mf.channels_last)


@pytest.mark.parametrize("shape,mode", [((1, 0, 4), "linear"), ((1, 0, 4, 4), "nearest"), ((1, 0, 4, 4), "bicubic"),
                                        ((1, 0, 4, 4, 4), "trilinear")])
def test_no_channels_raises_but_an_empty_batch_passes(shape, mode):
    with pytest.raises(ValueError, match=r"interpolate: Non-empty \dD data tensor expected"):
        F.interpolate(mf.zeros(*shape), size=2, mode=mode)
    empty_batch = (0, 1) + shape[2:]
    assert F.interpolate(mf.zeros(*empty_batch), size=2, mode=mode).shape == (0, 1) + (2,) * (len(shape) - 2)


def _bf16_nearest_bilinear_ref(x, grid, bf16):
    """PyTorch's cpu fallback grid sampler in a 16-bit type, align_corners=True, every point well inside: each
    operation rounded to the type (NumPy's ml_dtypes arithmetic does so), the four products added in order."""
    gx, gy = grid[..., 0].astype(bf16), grid[..., 1].astype(bf16)
    h, w = x.shape[2:]
    ix, iy = (gx + 1) / bf16(2) * bf16(w - 1), (gy + 1) / bf16(2) * bf16(h - 1)  # grid_sampler_unnormalize
    n = np.arange(x.shape[0])[:, None, None, None]
    c = np.arange(x.shape[1])[None, :, None, None]

    def at(yy, xx):
        return x[n, c, yy.astype(np.int64)[:, None], xx.astype(np.int64)[:, None]]
    nearest = at(np.rint(iy), np.rint(ix))
    x0, y0 = np.floor(ix), np.floor(iy)
    x1, y1 = x0 + bf16(1), y0 + bf16(1)
    products = [at(y0, x0) * ((x1 - ix) * (y1 - iy))[:, None], at(y0, x1) * ((ix - x0) * (y1 - iy))[:, None],
                at(y1, x0) * ((x1 - ix) * (iy - y0))[:, None], at(y1, x1) * ((ix - x0) * (iy - y0))[:, None]]
    bilinear = ((products[0] + products[1]) + products[2]) + products[3]
    return nearest, bilinear


@pytest.mark.parametrize("dtype", [np.float16, mf.bfloat16])
def test_grid_sample_16_bit_on_the_cpu_rounds_each_operation(dtype):
    # PyTorch's cpu kernel computes a 16-bit grid_sample in that type (its scalar fallback): the rounded pixel
    # coordinate can pick another pixel than float32 arithmetic would (bfloat16: 3.7 off at such points before)
    rng = np.random.default_rng(5)
    bf16 = np.dtype(mf.backend.bfloat16 if dtype is mf.bfloat16 else np.float16).type
    x = rng.standard_normal((2, 3, 9, 13)).astype(bf16)
    grid = rng.uniform(-0.8, 0.8, (2, 6, 40, 2)).astype(bf16)
    near_ref, bil_ref = _bf16_nearest_bilinear_ref(x, grid, bf16)
    xt, gt = mf.tensor(x.astype(np.float32)).to(dtype), mf.tensor(grid.astype(np.float32)).to(dtype)
    near = F.grid_sample(xt, gt, mode="nearest", align_corners=True)
    bil = F.grid_sample(xt, gt, mode="bilinear", align_corners=True)
    np.testing.assert_array_equal(near.float().numpy(), near_ref.astype(np.float32))
    np.testing.assert_array_equal(bil.float().numpy(), bil_ref.astype(np.float32))
    # (float32 arithmetic rounded once would differ here: the bilinear values, and bfloat16's nearest picks)
    once = F.grid_sample(xt.float(), gt.float(), mode="bilinear", align_corners=True).to(dtype).float().numpy()
    assert (once != bil_ref.astype(np.float32)).any()
    if dtype is mf.bfloat16:
        once = F.grid_sample(xt.float(), gt.float(), mode="nearest", align_corners=True).numpy()
        assert (once != near_ref.astype(np.float32)).any()


@pytest.mark.parametrize("dtype", [np.float16, mf.bfloat16])
def test_linear_16_bit_weights_are_stored_in_the_inputs_type(dtype):
    # PyTorch's cpu kernel keeps a 16-bit input's lambdas in its type: lambda1 rounded, lambda0 = 1 - lambda1 in
    # that type; the sum in float32, rounded once (float32 lambdas differed from it in 44 of 120 bfloat16 values)
    t = np.dtype(mf.backend.bfloat16 if dtype is mf.bfloat16 else np.float16).type
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 9)).astype(t)
    n, m = 9, 20
    s = np.float32(1 / 2.3)
    src = np.maximum(s * (np.arange(m, dtype=np.float32) + np.float32(0.5)) - np.float32(0.5), np.float32(0))
    i0 = np.minimum(np.floor(src).astype(np.int64), n - 1)
    i1 = np.minimum(i0 + 1, n - 1)
    lam1 = np.clip(src - i0, 0, 1).astype(t)
    lam0 = t(1) - lam1
    xf = x.astype(np.float32)
    want = (xf[..., i0] * lam0.astype(np.float32) + xf[..., i1] * lam1.astype(np.float32)).astype(t)
    got = F.interpolate(mf.tensor(xf).to(dtype), scale_factor=2.3, mode="linear")
    np.testing.assert_array_equal(got.float().numpy(), want.astype(np.float32))


def _rounded_passes(x, ww, wh):
    """Separable float64 resampling of a uint8 image, the width first, each pass rounded half up and clamped to
    0..255: PIL's (and PyTorch's) fixed-point rule wherever the weights are exact in its int16 scaling."""
    y = np.clip(np.floor(x.astype(np.float64) @ ww.T + 0.5), 0, 255)
    return np.clip(np.floor(np.einsum("oh,nchw->ncow", wh, y) + 0.5), 0, 255)


def _bilinear_x2(n):  # bilinear upsampling by 2, align_corners=False: weights 0.75 / 0.25, the border repeated
    w = np.zeros((2 * n, n))
    for i in range(2 * n):
        src = max((i + 0.5) / 2 - 0.5, 0.0)
        lo = min(int(src), n - 1)
        hi, lam = min(lo + 1, n - 1), src - lo
        w[i, lo] += 1 - lam
        w[i, hi] += lam
    return w


def _aa_half(n):  # antialiased bilinear shrinking by 2: the triangle of half-width 2, taps 1/8, 3/8, 3/8, 1/8
    w = np.zeros((n // 2, n))
    for i in range(n // 2):
        taps = {2 * i - 1: 1, 2 * i: 3, 2 * i + 1: 3, 2 * i + 2: 1}
        taps = {j: v for j, v in taps.items() if 0 <= j < n}
        total = sum(taps.values())
        for j, v in taps.items():
            w[i, j] = v / total
    return w


def test_uint8_bilinear_is_fixed_point_resampling():
    # PyTorch resizes uint8 images (bilinear and bicubic, antialiased or not) in integers, pass by pass
    rng = np.random.default_rng(7)
    x = rng.integers(0, 256, (2, 3, 6, 8)).astype(np.uint8)
    up = F.interpolate(mf.tensor(x), scale_factor=2, mode="bilinear")
    assert up.dtype == mf.uint8
    np.testing.assert_array_equal(up.numpy(), _rounded_passes(x, _bilinear_x2(8), _bilinear_x2(6)))
    down = F.interpolate(mf.tensor(x), scale_factor=0.5, mode="bilinear", antialias=True)
    np.testing.assert_array_equal(down.numpy(), _rounded_passes(x, _aa_half(8), _aa_half(6)))
    cl = F.interpolate(mf.tensor(x).contiguous(memory_format=mf.channels_last), scale_factor=2, mode="bilinear")
    assert cl.is_contiguous(memory_format=mf.channels_last)
    np.testing.assert_array_equal(cl.numpy(), up.numpy())


def test_uint8_bicubic_clamps_each_pass():
    # Keys' overshoot clamped after the width pass, before the height one (values from torch 2.x, which match
    # PIL's); the float result would be -25.3, 280.3, 266.8 at the clamped places
    x = mf.tensor(np.array([[[[0, 255, 0, 255], [255, 255, 0, 0]]]], dtype=np.uint8))
    y = F.interpolate(x, size=(2, 7), mode="bicubic")
    np.testing.assert_array_equal(y.numpy(), [[[[0, 103, 252, 128, 3, 152, 255], [255, 255, 255, 128, 0, 0, 0]]]])


def test_pixel_shuffles_keep_channels_last():
    # PyTorch's pixel_shuffle / pixel_unshuffle write a channels-last output for a channels-last 4-D input
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 3, 4, 6))
    xc = mf.tensor(x).contiguous(memory_format=mf.channels_last)
    down = F.pixel_unshuffle(xc, 2)
    assert down.is_contiguous(memory_format=mf.channels_last) and not down.is_contiguous()
    # channel c * 4 + i * 2 + j of the output holds pixel (2 h + i, 2 w + j) of channel c
    want = x.reshape(2, 3, 2, 2, 3, 2).transpose(0, 1, 3, 5, 2, 4).reshape(2, 12, 2, 3)
    np.testing.assert_array_equal(down.numpy(), want)
    up = F.pixel_shuffle(down, 2)
    assert up.is_contiguous(memory_format=mf.channels_last)
    np.testing.assert_array_equal(up.numpy(), x)


def test_size_takes_integer_scalar_tensors():
    # PyTorch's size is a list of SymInts: 0-d integer tensors pass as their values (a float one does not)
    x = mf.zeros(1, 1, 4, 5)
    assert F.interpolate(x, size=(mf.tensor(3), mf.tensor(7)), mode="bilinear").shape == (1, 1, 3, 7)
    assert F.interpolate(x, size=mf.tensor(3)).shape == (1, 1, 3, 3)
    with pytest.raises(TypeError, match="interpolate: size must be an int or a tuple of ints"):
        F.interpolate(x, size=(mf.tensor(3.0), 4))


def test_float64_source_positions_floor_as_float32():
    # PyTorch's generic cpu kernels compute a float64 input's source positions in float64 and floor them with
    # floorf: a position just below a whole number rounds up to it (7 of 7770 nearest indices differ from
    # float32 arithmetic here, 1 of 20498 linear ones from a float64 floor)
    x = np.arange(1000.0)
    got = F.interpolate(mf.tensor(x.reshape(1, 1, -1)), scale_factor=7.77).numpy().ravel()
    want = np.floor((np.arange(7770) * (1 / 7.77)).astype(np.float32))
    np.testing.assert_array_equal(got, want)
    assert (want != np.floor(np.arange(7770, dtype=np.float32) * np.float32(1 / 7.77))).any()

    n, m = 4099, 20498
    x = np.random.default_rng(9).standard_normal(n)
    src = (n - 1) / (m - 1) * np.arange(m)
    i0 = np.minimum(np.floor(src.astype(np.float32)).astype(np.int64), n - 1)
    lam = np.clip(src - i0, 0, 1)
    want = x[i0] * (1 - lam) + x[np.minimum(i0 + 1, n - 1)] * lam
    assert (i0 != np.floor(src)).any()
    got = F.interpolate(mf.tensor(x.reshape(1, 1, -1)), size=m, mode="linear", align_corners=True).numpy().ravel()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_nearest_2d_kept_size_scale_by_output_size():
    # PyTorch's cpu 2-D nearest forward ignores the scale along a kept size only in its vectorized kernel (an
    # output of H + W <= 128): a large output reads floor(i / 1.0001) there; the backward always ignores it
    small = F.interpolate(mf.tensor(np.arange(3.0).reshape(1, 1, 3, 1)), scale_factor=(1.3, 1.0)).numpy().ravel()
    np.testing.assert_array_equal(small, [0, 1, 2])
    x = mf.tensor(np.arange(1000.0).reshape(1, 1, 1000, 1).repeat(3, 3), requires_grad=True)
    y = F.interpolate(x, scale_factor=(1.0001, 1.0))
    np.testing.assert_array_equal(y.detach().numpy()[0, 0, :, 0], np.floor(np.arange(1000) / 1.0001))
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones((1, 1, 1000, 3)))
