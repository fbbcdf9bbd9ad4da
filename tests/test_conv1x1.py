"""1x1 convolutions as batched GEMMs (kernels/conv1x1.py): where the GPU convolution takes them; on the GPU
the forward (the GEMM, the gather and GEMM, the one GEMM over all images, and the strided SGEMM) and data
gradient against a float64 reference at strides 1-3 (odd sizes, pixels past the last stride step), poisoned
outputs, and conv.py's calls through the path."""
import numpy as np
import pytest

from conftest import rel_norm_error as _rel
from minifused import backend
from minifused.kernels import conv as K
from minifused.kernels import conv1x1 as C1
from minifused.kernels.conv import DEFAULT_CONFIG, ConvConfig


def test_applies_where_it_should():
    """fp32 without TF32, one group, 1x1 at padding 0, 32 channels or more each way unless the config forces it
    (or turns it off), and each image's x and y pixels a whole number of 256 bytes."""
    f32 = backend.float32
    ok = (f32, (8, 64, 56, 56), (128, 64, 1, 1), (2, 2), (0, 0), (1, 1), 1, False, DEFAULT_CONFIG)
    assert C1.applies(*ok)
    for i, value in [(0, backend.float16), (1, (8, 16, 56, 56)), (2, (16, 64, 1, 1)), (2, (128, 64, 3, 3)),
                     (4, (1, 1)), (6, 2), (7, True), (8, ConvConfig(conv1x1=False)), (1, (8, 36, 5, 5))]:
        assert not C1.applies(*ok[:i], value, *ok[i + 1:]), (i, value)
    small = (f32, (8, 4, 16, 16), (8, 4, 1, 1), (1, 1), (0, 0), (1, 1), 1, False)
    assert not C1.applies(*small, DEFAULT_CONFIG) and C1.applies(*small, ConvConfig(conv1x1=True))


@pytest.mark.gpu
@pytest.mark.parametrize("n, c, h, wd, k, stride", [(2, 32, 16, 16, 48, 1), (3, 64, 15, 17, 32, 2),
                                                     (2, 40, 16, 16, 64, 2), (2, 32, 13, 11, 64, 3),
                                                     (1, 8, 8, 8, 16, 2), (2, 96, 16, 16, 64, 2),
                                                     (3, 64, 5, 5, 64, 2), (2, 64, 7, 7, 128, 1),
                                                     (2, 64, 12, 12, 64, 2), (1, 128, 20, 20, 64, 2),
                                                     (4, 64, 7, 7, 64, 1), (4, 64, 5, 5, 64, 2), (4, 64, 1, 1, 64, 1)])
def test_gpu_conv1x1_matches_reference(poisoned_pool, n, c, h, wd, k, stride):
    """Forward (with and without bias) and data gradient against float64; conv.py takes the path bit-for-bit
    (forced where the channels are few), its backward's dW and db from the launcher, all against the
    references. Images of fewer than 64 output pixels take the one-GEMM forward (of 9, 16, 20, 36 and 49
    pixels, and of 1: the output's runs moved four pixels at a time where they are whole 16-byte vectors, else
    32 runs to a block, within one channel's row of the GEMM's output or across two); the stride-2 gather of
    16-byte loads and,
    rows of a width not a multiple of 4 (12 -> 6, 20 -> 10), of single ones."""
    import cupy

    rng = np.random.default_rng(n + c + h + stride)
    x = cupy.asarray(rng.standard_normal((n, c, h, wd)), np.float32)
    w = cupy.asarray(rng.standard_normal((k, c, 1, 1)), np.float32)
    b = cupy.asarray(rng.standard_normal(k), np.float32)
    geo = ((stride, stride), (0, 0), (1, 1), 1)
    config = ConvConfig(conv1x1=True)
    assert C1.applies(x.dtype, x.shape, w.shape, *geo, False, config)
    ref, _ = K.conv2d_forward_ref(x.astype(cupy.float64), w.astype(cupy.float64), b.astype(cupy.float64), *geo,
                                  None, False)
    for bias, want in ((b, ref), (None, ref - b.astype(cupy.float64)[None, :, None, None])):
        y = C1.forward(x, w, bias, *geo[:2])
        assert y.shape == want.shape and _rel(y, want) < 1e-6
    y, _ = K.conv2d_forward(x, w, b, *geo, config=config)
    assert np.array_equal(y.get(), C1.forward(x, w, b, *geo[:2]).get())
    dy = cupy.asarray(rng.standard_normal(ref.shape), np.float32)
    want_dx = K.conv2d_backward_data_ref(dy.astype(cupy.float64), w.astype(cupy.float64), x.shape, *geo)
    dx = C1.backward_data(dy, w, x.shape, *geo[:2])
    assert dx.shape == want_dx.shape and _rel(dx, want_dx) < 1e-6
    assert np.array_equal(K.conv2d_backward_data(dy, w, x.shape, *geo, config=config).get(), dx.get())
    want_dw = K.conv2d_backward_filter_ref(dy.astype(cupy.float64), x.astype(cupy.float64), w.shape, *geo)
    for need_db in (False, True):
        dx2, dw, db = K.conv2d_backward(dy, x, w, *geo, need_db=need_db, config=config)
        assert np.array_equal(dx2.get(), dx.get()) and _rel(dw, want_dw) < 1e-5
        assert (db is None) == (not need_db)
        if need_db:
            assert _rel(db, dy.astype(cupy.float64).sum(axis=(0, 2, 3))) < 1e-6


@pytest.mark.gpu
@pytest.mark.parametrize("c", [32, 96])
def test_gpu_conv1x1_reads_an_unaligned_view(poisoned_pool, c):
    """x 4 bytes past a 16-byte boundary (a view into a larger buffer): the stride-2 forward matches float64,
    by the strided SGEMM (32 channels) and by the gather (96), which leaves its 16-byte loads for it."""
    import cupy

    rng = np.random.default_rng(5)
    n, h, wd, k = 2, 16, 16, 64
    buf = cupy.asarray(rng.standard_normal(n * c * h * wd + 1), np.float32)
    x = buf[1:].reshape(n, c, h, wd)
    assert x.data.ptr % 16 == 4 and x.flags.c_contiguous
    w = cupy.asarray(rng.standard_normal((k, c, 1, 1)), np.float32)
    geo = ((2, 2), (0, 0), (1, 1), 1)
    ref, _ = K.conv2d_forward_ref(x.astype(cupy.float64), w.astype(cupy.float64), None, *geo, None, False)
    y = C1.forward(x, w, None, *geo[:2])
    assert y.shape == ref.shape and _rel(y, ref) < 1e-6


@pytest.mark.gpu
@pytest.mark.parametrize("n, c, h, wd, k, stride", [(3, 24, 9, 13, 40, 2), (2, 72, 30, 30, 136, 2),
                                                     (1, 8, 5, 5, 3, 3), (2, 16, 8, 8, 8, 1), (5, 33, 4, 6, 130, 2)])
def test_gpu_strided_forward_odd_sizes(poisoned_pool, n, c, h, wd, k, stride):
    """conv1x1.cu's strided_forward where the tiles are partial: channels not a multiple of its 8, output
    channels past one or two 128-row tiles, pixels per image not a multiple of 4 (its one-at-a-time stores),
    tiles across images; with and without bias, against float64."""
    import cupy

    rng = np.random.default_rng(n * c + k)
    x = cupy.asarray(rng.standard_normal((n, c, h, wd)), np.float32)
    w = cupy.asarray(rng.standard_normal((k, c, 1, 1)), np.float32)
    b = cupy.asarray(rng.standard_normal(k), np.float32)
    geo = ((stride, stride), (0, 0), (1, 1), 1)
    ref, _ = K.conv2d_forward_ref(x.astype(cupy.float64), w.astype(cupy.float64), None, *geo, None, False)
    for bias, want in ((None, ref), (b, ref + b.astype(cupy.float64)[None, :, None, None])):
        y = C1._strided_forward(x, w, bias, geo[0])
        assert y.shape == want.shape and _rel(y, want) < 1e-6
