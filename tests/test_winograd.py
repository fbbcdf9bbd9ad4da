"""Winograd convolution (kernels/winograd.py): the decompositions against the direct sums in NumPy; where the
GPU convolution takes it; on the GPU its forward, data and filter gradients against a float64 reference,
poisoned outputs."""
import numpy as np
import pytest

from conftest import rel_norm_error as _rel
from minifused import backend
from minifused.kernels import conv as K
from minifused.kernels import winograd as W
from minifused.kernels.conv import DEFAULT_CONFIG, ConvConfig

# (N, C, H, W, K, padding): odd and even output sizes (a last tile row or column cut), paddings 0-2
SHAPES = [(2, 3, 5, 7, 4, 1), (1, 2, 8, 8, 3, 0), (2, 4, 6, 5, 2, 2), (1, 1, 3, 3, 1, 0), (3, 5, 9, 6, 7, 1),
          (1, 3, 1, 4, 2, 2)]


@pytest.mark.parametrize("n, c, h, wd, k, pad", SHAPES)
def test_decomposition_matches_direct_sum(n, c, h, wd, k, pad):
    """conv_ref's transforms, 36 products and folds (float64) equal the direct convolution and, with the filters
    turned and swapped at padding 2 - pad, its data gradient; wgrad_ref's F(3x3, 4x4) its filter gradient."""
    rng = np.random.default_rng(n * 100 + c * 10 + pad)
    x, w, b = rng.standard_normal((n, c, h, wd)), rng.standard_normal((k, c, 3, 3)), rng.standard_normal(k)
    geo = ((1, 1), (pad, pad), (1, 1), 1)
    want, _ = K.conv2d_forward_ref(x, w, b, *geo, None, False)
    got = W.conv_ref(x, w, b, pad)
    assert got.shape == want.shape and np.abs(got - want).max() < 1e-12 * max(1.0, np.abs(want).max())
    dy = rng.standard_normal(want.shape)
    want_dx = K.conv2d_backward_data_ref(dy, w, x.shape, *geo)
    got_dx = W.conv_ref(dy, w, None, 2 - pad, data_grad=True)
    assert got_dx.shape == want_dx.shape and np.abs(got_dx - want_dx).max() < 1e-12 * max(1.0, np.abs(want_dx).max())
    want_dw = K.conv2d_backward_filter_ref(dy, x, w.shape, *geo)
    got_dw = W.wgrad_ref(dy, x, pad)
    assert got_dw.shape == want_dw.shape and np.abs(got_dw - want_dw).max() < 1e-12 * max(1.0, np.abs(want_dw).max())


def test_applies_where_it_should():
    """fp32 without TF32, one group, 3x3 at stride and dilation 1, padding 0-2 both ways alike, and 32 channels
    or more each way unless the config forces it (or turns it off)."""
    f32, f16 = backend.float32, backend.float16
    ok = (f32, (8, 64, 14, 14), (64, 64, 3, 3), (1, 1), (1, 1), (1, 1), 1, False, DEFAULT_CONFIG)
    assert W.applies(*ok)
    for i, value in [(0, f16), (1, (8, 16, 14, 14)), (2, (16, 64, 3, 3)), (2, (64, 64, 5, 5)), (3, (2, 2)),
                     (4, (1, 0)), (4, (3, 3)), (5, (2, 2)), (6, 2), (7, True),
                     (8, ConvConfig(winograd=False))]:
        assert not W.applies(*ok[:i], value, *ok[i + 1:]), (i, value)
    small = (f32, (8, 3, 14, 14), (2, 3, 3, 3), (1, 1), (0, 0), (1, 1), 1, False)
    assert not W.applies(*small, DEFAULT_CONFIG) and W.applies(*small, ConvConfig(winograd=True))
    # stride 2 at padding 1: the forward only
    s2 = (f32, (8, 64, 14, 14), (128, 64, 3, 3), (2, 2), (1, 1), (1, 1), 1, False, DEFAULT_CONFIG)
    assert W.applies(*s2, forward=True) and not W.applies(*s2)
    for i, value in [(4, (0, 0)), (4, (2, 2)), (3, (2, 1)), (1, (8, 16, 14, 14))]:
        assert not W.applies(*s2[:i], value, *s2[i + 1:], forward=True), (i, value)


@pytest.mark.parametrize("n, c, h, wd, k", [(2, 3, 5, 7, 4), (1, 2, 8, 8, 3), (3, 5, 9, 6, 7), (1, 3, 1, 4, 2),
                                            (2, 2, 17, 10, 3), (1, 2, 2, 2, 2)])
def test_stride2_decomposition_matches_direct_sum(n, c, h, wd, k):
    """conv_s2_ref's four phases, 2x2 filters and F(4x4, 2x2) transforms (float64) equal the direct 3x3 stride-2
    convolution at padding 1, odd and even sizes (a last tile cut short, phases of unequal size)."""
    rng = np.random.default_rng(h * wd + k)
    x, w, b = rng.standard_normal((n, c, h, wd)), rng.standard_normal((k, c, 3, 3)), rng.standard_normal(k)
    want, _ = K.conv2d_forward_ref(x, w, b, (2, 2), (1, 1), (1, 1), 1, None, False)
    got = W.conv_s2_ref(x, w, b)
    assert got.shape == want.shape and np.abs(got - want).max() < 1e-12 * max(1.0, np.abs(want).max())


@pytest.mark.gpu
@pytest.mark.parametrize("forced_runs", [None, 3])
def test_gpu_winograd_matches_reference(poisoned_pool, monkeypatch, forced_runs):
    """Forward (with and without bias), data and filter gradients on the GPU against the float64 reference,
    within fp32 accuracy, on odd sizes and paddings 0-2 and on ResNet-like layers; conv.py takes this path
    (bit-for-bit winograd.forward / backward_data / backward_filter) and the direct kernels agree with it. The
    filter gradient splits its tiles into runs as :func:`winograd.runs` says, or into 3 (a last run cut short)."""
    import cupy

    if forced_runs:
        monkeypatch.setattr(W, "runs", lambda *args: forced_runs)

    rng = np.random.default_rng(7)
    forced = ConvConfig(winograd=True)
    for n, c, h, wd, k, pad in SHAPES + [(4, 64, 14, 14, 64, 1), (2, 33, 9, 7, 40, 1), (2, 32, 8, 8, 48, 2),
                                         (3, 40, 6, 9, 32, 0), (24, 32, 32, 32, 32, 1)]:
        x = cupy.asarray(rng.standard_normal((n, c, h, wd)), np.float32)
        w = cupy.asarray(rng.standard_normal((k, c, 3, 3)), np.float32)
        b = cupy.asarray(rng.standard_normal(k), np.float32)
        geo = ((1, 1), (pad, pad), (1, 1), 1)
        ref, _ = K.conv2d_forward_ref(x.astype(cupy.float64), w.astype(cupy.float64), b.astype(cupy.float64), *geo,
                                      None, False)
        for bias, want in ((b, ref), (None, ref - b.astype(cupy.float64)[None, :, None, None])):
            y = W.forward(x, w, bias, (1, 1), (pad, pad))
            assert y.shape == want.shape and _rel(y, want) < 1e-5, (n, c, h, wd, k, pad, bias is None)
        y, _ = K.conv2d_forward(x, w, b, *geo, config=forced)
        assert np.array_equal(y.get(), W.forward(x, w, b, (1, 1), (pad, pad)).get())
        direct, _ = K.conv2d_forward(x, w, b, *geo, config=ConvConfig(winograd=False))
        assert _rel(direct, ref) < 1e-5 and _rel(y, direct) < 2e-5
        dy = cupy.asarray(rng.standard_normal(ref.shape), np.float32)
        want_dx = K.conv2d_backward_data_ref(dy.astype(cupy.float64), w.astype(cupy.float64), x.shape, *geo)
        dx = W.backward_data(dy, w, x.shape, (1, 1), (pad, pad))
        assert dx.shape == want_dx.shape and _rel(dx, want_dx) < 1e-5, (n, c, h, wd, k, pad)
        dx2 = K.conv2d_backward_data(dy, w, x.shape, *geo, config=forced)
        assert np.array_equal(dx2.get(), dx.get())
        want_dw = K.conv2d_backward_filter_ref(dy.astype(cupy.float64), x.astype(cupy.float64), w.shape, *geo)
        dw = W.backward_filter(dy, x, w.shape, (1, 1), (pad, pad))
        assert dw.shape == want_dw.shape and _rel(dw, want_dw) < 1e-5, (n, c, h, wd, k, pad)
        # all three in one call (db by the launcher's column sums), as training asks
        dx3, dw3, db = K.conv2d_backward(dy, x, w, *geo, need_db=True, config=forced)
        assert np.array_equal(dx3.get(), dx.get()) and np.array_equal(dw3.get(), dw.get())
        assert _rel(db, dy.astype(cupy.float64).sum(axis=(0, 2, 3))) < 1e-5
        direct = K.conv2d_backward(dy, x, w, *geo, config=ConvConfig(winograd=False))
        assert _rel(direct[0], want_dx) < 1e-5 and _rel(direct[1], want_dw) < 1e-5


@pytest.mark.gpu
def test_gpu_winograd_stride2_forward_matches_reference(poisoned_pool):
    """The stride-2 forward (with and without bias) against float64 on odd sizes and ResNet-like layers; conv.py
    takes it bit-for-bit, channels-last x too; its backward stays with the direct kernels."""
    import cupy

    from minifused.kernels import to_channels_last

    rng = np.random.default_rng(11)
    forced = ConvConfig(winograd=True)
    geo = ((2, 2), (1, 1), (1, 1), 1)
    for n, c, h, wd, k in [(2, 3, 5, 7, 4), (3, 5, 9, 6, 7), (1, 3, 1, 4, 2), (4, 64, 14, 14, 128),
                           (2, 32, 17, 10, 48)]:
        x = cupy.asarray(rng.standard_normal((n, c, h, wd)), np.float32)
        w = cupy.asarray(rng.standard_normal((k, c, 3, 3)), np.float32)
        b = cupy.asarray(rng.standard_normal(k), np.float32)
        ref, _ = K.conv2d_forward_ref(x.astype(cupy.float64), w.astype(cupy.float64), b.astype(cupy.float64), *geo,
                                      None, False)
        for bias, want in ((b, ref), (None, ref - b.astype(cupy.float64)[None, :, None, None])):
            y = W.forward(x, w, bias, (2, 2), (1, 1))
            assert y.shape == want.shape and _rel(y, want) < 1e-5, (n, c, h, wd, k, bias is None)
        y, _ = K.conv2d_forward(x, w, b, *geo, config=forced)
        assert np.array_equal(y.get(), W.forward(x, w, b, (2, 2), (1, 1)).get())
        y_cl, _ = K.conv2d_forward(to_channels_last(x), w, b, *geo, config=forced)
        assert np.array_equal(cupy.ascontiguousarray(y_cl).get(), y.get())
        dy = cupy.asarray(rng.standard_normal(ref.shape), np.float32)
        dx, dw, _ = K.conv2d_backward(dy, x, w, *geo, config=forced)
        direct = K.conv2d_backward(dy, x, w, *geo, config=ConvConfig(winograd=False))
        assert np.array_equal(dx.get(), direct[0].get()) and np.array_equal(dw.get(), direct[1].get())
