"""The cpu device computes as the GPU does: float32 (and float16 / bfloat16) math accumulates in float32 through
BLAS, float64 in float64; convolution is im2col plus GEMMs; max pooling picks the GPU kernel's index."""
import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
import minifused.nn as nn
from minifused.kernels import conv_ref, linear, pool
from opinfo import conv2d_ref, linear_ref


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def test_float32_linear_is_one_float32_gemm(rng):
    """Bit for bit the float32 BLAS product: no float64 detour (a float64 product rounded to float32
    differs in some elements at k = 784)."""
    x, w = rng.standard_normal((64, 784), np.float32), rng.standard_normal((100, 784), np.float32)
    y, _ = linear.linear_forward(x, w)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, x @ w.T)
    assert not np.array_equal(y, (x.astype(np.float64) @ w.T.astype(np.float64)).astype(np.float32))


def test_float64_linear_stays_float64(rng):
    x, w = rng.standard_normal((5, 7)), rng.standard_normal((3, 7))
    y, _ = linear.linear_forward(x, w, None, "relu", aux=True)
    np.testing.assert_array_equal(y, np.maximum(x @ w.T, 0))


@pytest.mark.parametrize("dtype", [np.float32, mf.bfloat16, np.float16])
def test_low_precision_linear_accumulates_in_float32(rng, dtype):
    x, w = rng.standard_normal((8, 33)).astype(dtype), rng.standard_normal((5, 33)).astype(dtype)
    y, _ = linear.linear_forward(x, w)
    want = (x.astype(np.float32) @ w.astype(np.float32).T).astype(dtype)
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(y.astype(np.float32), want.astype(np.float32))


@pytest.mark.parametrize("dtype", [np.float32, mf.bfloat16, np.float64])
def test_linear_relu_backward_drops_what_the_relu_cut(rng, dtype):
    """The fused ReLU's backward on the cpu: dy where z > 0, exactly +0 elsewhere even where dy is NaN or inf
    (a select, not a product); the mask holds y > 0 in the GPU's bit layout."""
    x, w = rng.standard_normal((9, 13)).astype(dtype), rng.standard_normal((21, 13)).astype(dtype)
    y, aux = linear.linear_forward_ref(x, w, None, "relu", aux=True)
    assert aux.shape == (9, linear.relu_aux_cols(21))
    cut = y.astype(np.float64) <= 0
    np.testing.assert_array_equal(np.unpackbits(aux, axis=1, count=21, bitorder="little").astype(bool), ~cut)
    dy = rng.standard_normal(y.shape).astype(dtype)
    dy[cut] = np.where(rng.random(cut.sum()) < 0.5, np.nan, np.inf).astype(dtype)
    g = linear.activation_backward_ref(dy, aux, "relu")
    assert g.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(g.astype(np.float64), np.where(cut, 0.0, dy.astype(np.float64)))
    # the backward-data GEMM, then the mask of the ReLU before this layer (over dx's 13 columns)
    y0, aux0 = linear.linear_forward_ref(x, rng.standard_normal((13, 13)).astype(dtype), None, "relu", aux=True)
    dy = rng.standard_normal((9, 21)).astype(dtype)
    dx, db = linear.linear_backward_data_ref(dy, w, "relu", aux0)
    want = np.where(y0.astype(np.float64) > 0, dy.astype(np.float64) @ w.astype(np.float64), 0.0)
    tol = 1e-12 if dtype == np.float64 else 5e-2 if dtype == mf.bfloat16 else 1e-5
    np.testing.assert_allclose(dx.astype(np.float64), want, rtol=tol, atol=tol)
    np.testing.assert_allclose(db.astype(np.float64), want.sum(axis=0), rtol=tol, atol=10 * tol)


@pytest.mark.parametrize("stride,padding,dilation,groups", [
    ((1, 1), (0, 0), (1, 1), 1), ((2, 1), (1, 2), (1, 1), 1), ((1, 1), (2, 2), (2, 1), 1), ((2, 2), (1, 1), (1, 1), 2),
    ((1, 3), (0, 1), (2, 2), 3)])
def test_conv_forward_and_backward_against_float64(rng, stride, padding, dilation, groups):
    """The BLAS path (float64 here, so exact up to rounding) against the registry's direct float64 reference;
    the gradients against the adjoint identities <dy, conv(x, w)> = <dx, x> = <dw, w>."""
    x = rng.standard_normal((3, 6, 11, 9))
    w = rng.standard_normal((6, 6 // groups, 3, 2))
    b = rng.standard_normal(6)
    y, _ = conv_ref.conv2d_forward_ref(x, w, b, stride, padding, dilation, groups)
    np.testing.assert_allclose(y, conv2d_ref(x, w, b, stride, padding, dilation, groups), rtol=1e-12, atol=1e-12)
    dy = rng.standard_normal(y.shape)
    dx, dw, db = conv_ref.conv2d_backward_ref(dy, x, w, stride, padding, dilation, groups, need_db=True)
    y0 = y - b[None, :, None, None]
    np.testing.assert_allclose(np.sum(dx * x), np.sum(dy * y0), rtol=1e-10)
    np.testing.assert_allclose(np.sum(dw * w), np.sum(dy * y0), rtol=1e-10)
    np.testing.assert_allclose(db, dy.sum(axis=(0, 2, 3)), rtol=1e-12)
    # each gradient element, against central differences of the bilinear form
    eps = 1e-6
    for arr, grad in ((x, dx), (w, dw)):
        for idx in [tuple(rng.integers(0, s) for s in arr.shape) for _ in range(4)]:
            old = arr[idx]
            arr[idx] = old + eps
            up = np.sum(dy * conv2d_ref(x, w, None, stride, padding, dilation, groups))
            arr[idx] = old - eps
            down = np.sum(dy * conv2d_ref(x, w, None, stride, padding, dilation, groups))
            arr[idx] = old
            np.testing.assert_allclose(grad[idx], (up - down) / (2 * eps), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("stride,padding,dilation,groups", [((1, 1), (1, 1), (1, 1), 1), ((2, 1), (0, 2), (2, 1), 2)])
def test_conv_in_slices_of_images_equals_all_at_once(rng, monkeypatch, stride, padding, dilation, groups):
    """The lowered columns made a few images at a time (here one: COLUMN_BYTES = 1) give what all at once does:
    the forward and the data gradient exactly (the same products per image), the filter gradient up to the
    order of its sum over the images."""
    x = rng.standard_normal((5, 4, 9, 8)).astype(np.float32)
    w = rng.standard_normal((6, 4 // groups, 3, 2)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)

    def run():
        y, mask = conv_ref.conv2d_forward_ref(x, w, b, stride, padding, dilation, groups, "relu", want_mask=True)
        dy = np.random.default_rng(1).standard_normal(y.shape).astype(np.float32)
        return (y, mask) + conv_ref.conv2d_backward_ref(dy, x, w, stride, padding, dilation, groups, mask,
                                                         need_db=True)
    whole = run()
    monkeypatch.setattr(conv_ref, "COLUMN_BYTES", 1)
    sliced = run()
    for i, (a, b_) in enumerate(zip(whole, sliced)):
        if i == 3:  # dw
            np.testing.assert_allclose(b_, a, rtol=1e-5, atol=1e-5)
        else:
            np.testing.assert_array_equal(b_, a)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("stride,padding,dilation,groups", [((1, 1), (1, 1), (1, 1), 1), ((2, 1), (0, 2), (2, 1), 2)])
def test_conv_backward_through_the_relu_mask(rng, dtype, stride, padding, dilation, groups):
    """The fused ReLU's backward: the gradient where the mask has a bit, exactly zero elsewhere, even where it
    is NaN or infinite (a select, not a product), then the plain backward; the data and filter references alone
    agree with it."""
    x = rng.standard_normal((3, 4, 9, 8)).astype(dtype)
    w = rng.standard_normal((6, 4 // groups, 3, 2)).astype(dtype)
    y, mask = conv_ref.conv2d_forward_ref(x, w, None, stride, padding, dilation, groups, "relu", want_mask=True)
    dy = rng.standard_normal(y.shape).astype(dtype)
    cut = y <= 0
    assert cut.any() and (~cut).any()
    dy[cut] = np.where(rng.random(cut.sum()) < 0.5, np.nan, np.inf).astype(dtype)
    dx, dw, db = conv_ref.conv2d_backward_ref(dy, x, w, stride, padding, dilation, groups, mask, need_db=True)
    d = np.where(cut, 0.0, dy.astype(np.float64))
    rx, rw, rb = conv_ref.conv2d_backward_ref(d, x.astype(np.float64), w.astype(np.float64), stride, padding,
                                              dilation, groups, need_db=True)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    for got, want in ((dx, rx), (dw, rw), (db, rb)):
        assert got.dtype == dtype and got.flags.c_contiguous and np.isfinite(got).all()
        np.testing.assert_allclose(got, want, **tol)
    clean = np.where(cut, 0, dy).astype(dtype)
    np.testing.assert_allclose(
        conv_ref.conv2d_backward_data_ref(clean, w, x.shape, stride, padding, dilation, groups), rx, **tol)
    np.testing.assert_allclose(conv_ref.conv2d_backward_filter_ref(clean, x, w.shape, stride, padding, dilation,
                                                                   groups), rw, **tol)


@pytest.mark.parametrize("n,k", [(1, 4), (3, 1)])
def test_conv_backward_through_the_mask_leaves_dy_alone(rng, n, k):
    """At N = 1 or K = 1 the channel-major view of dy is contiguous already: the masked gradient is a copy."""
    x = rng.standard_normal((n, 3, 6, 6)).astype(np.float32)
    w = rng.standard_normal((k, 3, 3, 3)).astype(np.float32)
    y, mask = conv_ref.conv2d_forward_ref(x, w, None, (1, 1), (1, 1), (1, 1), 1, "relu", want_mask=True)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    before = dy.copy()
    dx, dw, _ = conv_ref.conv2d_backward_ref(dy, x, w, (1, 1), (1, 1), mask=mask)
    np.testing.assert_array_equal(dy, before)
    rx, rw, _ = conv_ref.conv2d_backward_ref(np.where(y > 0, dy, 0), x, w, (1, 1), (1, 1))
    np.testing.assert_allclose(dx, rx, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(dw, rw, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape", [(2, 3, 7, 5), (1, 70, 3, 3), (4, 1, 1, 1)])
def test_conv_relu_mask_round_trips(rng, shape):
    positive = rng.standard_normal(shape) > 0
    mask = conv_ref.pack_mask(positive)
    assert mask.dtype == np.uint32 and mask.shape == (shape[1], -(-shape[0] * shape[2] * shape[3] // 32))
    np.testing.assert_array_equal(conv_ref.unpack_mask(mask, shape), positive)
    # bit m % 32 of word m // 32, m = n*P*Q + p*Q + q
    n, k, p, q = shape
    i = (n - 1) * p * q + (p - 1) * q + (q - 1)
    assert bool((mask[k - 1, i // 32] >> np.uint32(i % 32)) & np.uint32(1)) == bool(positive[n - 1, k - 1, p - 1, q - 1])


def test_max_pool_index_is_the_first_maximum_or_the_last_nan():
    """As the CUDA kernel (``v > best || isnan(v)``) and PyTorch: ties go to the first position, NaNs to the last."""
    x = np.array([[[[1.0, 3.0], [3.0, 0.0]], [[np.nan, 1.0], [np.nan, 2.0]]]], np.float32)
    x = x.reshape(1, 2, 2, 2)
    y, idx = pool.max_pool2d_forward_ref(x, (2, 2), (2, 2), (0, 0))
    assert y[0, 0, 0, 0] == 3.0 and idx[0, 0, 0, 0] == 1
    assert np.isnan(y[0, 1, 0, 0]) and idx[0, 1, 0, 0] == 2


@pytest.mark.parametrize("kernel,stride,padding,ceil_mode", [
    ((2, 2), (2, 2), (0, 0), False), ((3, 3), (1, 2), (1, 1), False), ((3, 2), (2, 3), (1, 1), True),
    ((1, 3), (1, 1), (0, 1), True)])
def test_max_pool_matches_the_kernels_scan(rng, kernel, stride, padding, ceil_mode):
    """Values and indices against a plain scan of each window in row-major order with the CUDA kernel's rule
    (``v > best || isnan(v) || no pick yet``, over the taps inside the input: a window of -inf picks its first
    real pixel, as PyTorch's), on inputs full of ties, NaNs and infinities."""
    x = rng.integers(-2, 3, (2, 3, 7, 8)).astype(np.float32)
    x[rng.random(x.shape) < 0.08] = np.nan
    x[rng.random(x.shape) < 0.08] = -np.inf
    y, idx = pool.max_pool2d_forward_ref(x, kernel, stride, padding, ceil_mode)
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    for n, c, p, q in np.ndindex(*y.shape):
        best, arg = -np.inf, None
        for pos in range(kh * kw):
            r, col = p * sh - ph + pos // kw, q * sw - pw + pos % kw
            if not (0 <= r < x.shape[2] and 0 <= col < x.shape[3]):
                continue
            v = x[n, c, r, col]
            if arg is None or v > best or np.isnan(v):
                best, arg = v, pos
        assert idx[n, c, p, q] == arg and (y[n, c, p, q] == best or (np.isnan(best) and np.isnan(y[n, c, p, q])))
    assert not pool.max_pool2d_forward_ref(x, kernel, stride, padding, ceil_mode, want_indices=False)[1]


def test_max_pool_backward_accumulates_overlapping_windows(rng):
    x = rng.standard_normal((2, 3, 7, 6))
    y, idx = pool.max_pool2d_forward_ref(x, (3, 3), (1, 2), (1, 1))
    dy = rng.standard_normal(y.shape)
    dx = pool.max_pool2d_backward_ref(dy, idx, x.shape, (3, 3), (1, 2), (1, 1))
    flat = pool.indices_to_flat(idx, x.shape, (3, 3), (1, 2), (1, 1))
    want = np.zeros((6, 42))
    np.add.at(want, (np.repeat(np.arange(6), flat.shape[2] * flat.shape[3]), flat.reshape(-1)), dy.reshape(-1))
    np.testing.assert_allclose(dx, want.reshape(x.shape), rtol=1e-14)


def test_cnn_step_on_cpu_matches_float64(rng):
    """One Conv2d-ReLU-MaxPool-Linear step in float32 on the cpu against the same step in float64."""
    def run(dtype):
        mf.manual_seed(0)
        conv, fc = nn.Conv2d(2, 4, 3, activation="relu"), nn.Linear(4 * 3 * 3, 5)
        conv.to(dtype=dtype), fc.to(dtype=dtype)
        x = mf.tensor(np.random.default_rng(1).standard_normal((3, 2, 8, 8)), dtype=dtype)
        loss = F.cross_entropy(fc(F.max_pool2d(conv(x), 2).flatten(1)), mf.tensor([0, 4, 2]))
        loss.backward()
        return loss.item(), conv.weight.grad.numpy().astype(np.float64)
    (l32, g32), (l64, g64) = run(mf.float32), run(mf.float64)
    assert abs(l32 - l64) < 1e-5
    np.testing.assert_allclose(g32, g64, rtol=1e-4, atol=1e-5)


def test_max_pool_backward_keeps_a_nan_gradient_at_its_position():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    _, idx = pool.max_pool2d_forward_ref(x, (2, 2), (2, 2), (0, 0))
    dy = np.array([[[[np.nan, 1.0], [2.0, 3.0]]]], np.float32)
    dx = pool.max_pool2d_backward_ref(dy, idx, x.shape, (2, 2), (2, 2), (0, 0))
    assert np.isnan(dx[0, 0, 1, 1]) and np.isnan(dx).sum() == 1 and dx[0, 0, 3, 3] == 3.0


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning:test_cpu_path")  # the reference's inf * 0
@pytest.mark.parametrize("dtype", [np.float32, np.float16, mf.bfloat16, np.float64])
@pytest.mark.parametrize("scale", [1.0, 2.5, 0.0])
def test_mask_apply_and_dropout_on_cpu_select_and_keep_the_layout(rng, dtype, scale):
    """The host's masked paths (the ReLU / dropout backward's mask_apply, the dropout forward) equal a float64
    select of the scaled values rounded once to the dtype, NaN and inf where the bit is set and +0 where it is
    not; a channels-last input gives a channels-last result (its values as the C-contiguous one's); 0-d and
    empty inputs and a NumPy scalar work."""
    from minifused.kernels import dropout as D
    from minifused.kernels import elementwise as EW
    from minifused.kernels import to_channels_last

    x = rng.standard_normal((2, 3, 4, 5)).astype(dtype)
    x.flat[[0, 7, 19, 33]] = [np.nan, np.inf, -np.inf, -0.0]
    keep = rng.random(x.shape) < 0.5
    keep.flat[[0, 7, 19, 33]] = [True, False, True, True]
    mask = EW.pack_mask_ref(keep)
    s = np.float64 if dtype == np.float64 else np.float32
    want = np.where(keep, (x.astype(np.float64) * s(scale)).astype(s).astype(dtype), 0).astype(dtype)
    for a in (x, to_channels_last(x)):
        got = EW.mask_apply(a, mask, scale)
        assert got.dtype == dtype and got.strides == a.strides
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))
        assert not np.signbit(got[~keep].astype(np.float64)).any()
    assert EW.mask_apply(x[:0], EW.pack_mask_ref(keep[:0]), scale).shape == (0, 3, 4, 5)
    three = np.asarray(3, dtype)
    zero_d = EW.mask_apply(three, EW.pack_mask_ref(np.asarray(True)), scale)
    assert zero_d.shape == () and float(zero_d) == float(np.asarray(s(3) * s(scale)).astype(dtype))
    scalar = EW.mask_apply(three[()], EW.pack_mask_ref(np.asarray(True)), scale)  # a NumPy scalar gradient
    assert isinstance(scalar, np.ndarray) and scalar.shape == () and float(scalar) == float(zero_d)
    for p in (0.0, 0.3, 1.0):
        y, m = D.dropout_forward_ref(x, 11, p)
        kept = EW.unpack_mask_ref(m, x.shape)
        scaled = (x.astype(np.float64) * D._scale(x.dtype, p)).astype(s).astype(dtype)
        np.testing.assert_array_equal(y.astype(np.float64), np.where(kept, scaled, 0).astype(dtype).astype(np.float64))
        yc, mc = D.dropout_forward_ref(to_channels_last(x), 11, p)
        assert yc.strides == to_channels_last(x).strides
        np.testing.assert_array_equal(yc.astype(np.float64), y.astype(np.float64))
    y0, _ = D.dropout_forward_ref(np.asarray(2, dtype), 5, 0.5)
    assert y0.shape == () and float(y0) in (0.0, 4.0)


@pytest.mark.filterwarnings("error")
def test_floating_point_edge_values_are_silent_as_pytorchs():
    """log(0) = -inf, 0 / 0 = NaN, sqrt(-1) = NaN, an overflow to inf, forward and backward: PyTorch computes them
    without a word; NumPy's RuntimeWarnings are silenced for an op on host arrays (CuPy's kernels never warn)."""
    x = mf.tensor([0.0, 1.0], requires_grad=True)
    y = mf.log(x)
    y.sum().backward()
    assert y.tolist()[0] == -np.inf and x.grad.tolist() == [np.inf, 1.0]
    assert np.isnan((mf.zeros(1) / mf.zeros(1)).item()) and (1 / mf.zeros(1)).item() == np.inf
    assert np.isnan(mf.sqrt(-mf.ones(1)).item()) and np.isnan((mf.tensor([-1.0]) ** 0.5).item())
    assert mf.exp(mf.tensor([1000.0])).item() == np.inf
    assert (mf.tensor([60000.0], dtype=mf.float16) * 2).item() == np.inf
    assert mf.zeros(2).log_().tolist() == [-np.inf, -np.inf] and mf.log1p(-mf.ones(1)).item() == -np.inf
