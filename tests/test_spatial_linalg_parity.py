"""PyTorch parity of the spatial rearrangements and products: unfold / fold and the adaptive average pools keep an
inf or NaN in the outputs that hold it, the shuffles never alias their input, adaptive max pooling names the last
NaN, zero-size inputs, the pooling layers' stride, and the linalg / product / join edge cases (matrix_power(A, 0)
on the tape, alpha = 0, pinv's broadcast tolerances, empty matrix norms, matmul's dtypes, expand, contiguous
joins, diff). References: float64 NumPy loops, hand-computed values, finite differences."""
import math

import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
import minifused.nn as nn
from tolerances import cpu

inf, nan = math.inf, math.nan


# ---------------------------------------------------------------- references
def im2col_ref(x, k, d, p, s):
    """unfold by loops over blocks and taps (float64)."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])), constant_values=0.0)
    bh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    bw = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    out = np.zeros((n, c, k[0], k[1], bh, bw), x.dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            for a in range(bh):
                for b in range(bw):
                    out[:, :, i, j, a, b] = xp[:, :, a * s[0] + i * d[0], b * s[1] + j * d[1]]
    return out.reshape(n, c * k[0] * k[1], bh * bw)


def col2im_ref(cols, size, k, d, p, s):
    """fold by loops: each column's taps added at their pixels (float64)."""
    n = cols.shape[0]
    c = cols.shape[1] // (k[0] * k[1])
    h, w = size
    bh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    bw = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    cols = cols.reshape(n, c, k[0], k[1], bh, bw)
    out = np.zeros((n, c, h + 2 * p[0], w + 2 * p[1]), cols.dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            for a in range(bh):
                for b in range(bw):
                    out[:, :, a * s[0] + i * d[0], b * s[1] + j * d[1]] += cols[:, :, i, j, a, b]
    return out[:, :, p[0]:p[0] + h, p[1]:p[1] + w]


def bins(n, m):
    return [((i * n) // m, -(-(i + 1) * n // m)) for i in range(m)]


def adaptive_avg_ref(x, out):
    """Each output the plain mean of its bin's elements (float64), over the trailing len(out) dims."""
    y = np.zeros(x.shape[:x.ndim - len(out)] + tuple(out))
    for idx in np.ndindex(*out):
        window = tuple(slice(*bins(x.shape[x.ndim - len(out) + a], m)[i]) for a, (i, m) in enumerate(zip(idx, out)))
        y[(Ellipsis,) + idx] = x[(Ellipsis,) + window].reshape(x.shape[:x.ndim - len(out)] + (-1,)).mean(-1)
    return y


def adaptive_avg_grad_ref(g, shape, out):
    """The adjoint of :func:`adaptive_avg_ref`: each output's gradient over its bin's size, added to the bin."""
    gx = np.zeros(shape)
    lead = len(shape) - len(out)
    for idx in np.ndindex(*out):
        window = tuple(slice(*bins(shape[lead + a], m)[i]) for a, (i, m) in enumerate(zip(idx, out)))
        count = math.prod(sl.stop - sl.start for sl in window)
        gx[(Ellipsis,) + window] += (g[(Ellipsis,) + idx] / count).reshape(shape[:lead] + (1,) * len(out))
    return gx


# ---------------------------------------------------------------- unfold / fold
def test_unfold_of_minus_inf_padding_then_max_is_the_max_pool():
    """The common pattern: pad with -inf, unfold, max over the taps: a 3x3 max filter."""
    x = np.arange(9.0).reshape(1, 1, 3, 3)
    cols = F.unfold(F.pad(cpu(x), (1, 1, 1, 1), value=-inf), 3)
    expected = [[4.0, 5.0, 5.0], [7.0, 8.0, 8.0], [7.0, 8.0, 8.0]]
    assert cols.max(1).values.reshape(3, 3).tolist() == expected


@pytest.mark.parametrize("bad", [inf, -inf, nan])
def test_unfold_and_fold_keep_a_nonfinite_value_in_its_own_outputs(bad):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 2, 5, 6))
    x[1, 0, 2, 3] = bad
    geometry = ((2, 3), (1, 2), (1, 0), (2, 1))  # kernel, dilation, padding, stride
    cols = F.unfold(cpu(x), *geometry)
    ref = im2col_ref(x, *geometry)
    np.testing.assert_array_equal(cols.numpy(), ref)  # (NaNs in the same places, everything else exact)
    img = F.fold(cpu(ref), (5, 6), *geometry)
    np.testing.assert_allclose(img.numpy(), col2im_ref(ref, (5, 6), *geometry), rtol=1e-12, atol=1e-12)
    assert np.isfinite(img.numpy()[0]).all() and np.isfinite(img.numpy()[1, 1]).all()


def test_unfold_and_fold_gradients_are_each_other_exactly():
    rng = np.random.default_rng(1)
    geometry = ((3, 2), (2, 1), (1, 1), (1, 2))
    x = cpu(rng.standard_normal((2, 3, 6, 5)), requires_grad=True)
    cols = F.unfold(x, *geometry)
    g = rng.standard_normal(cols.shape)
    g[0, 1, 3] = inf  # an infinite upstream gradient reaches only the pixel it came from
    cols.backward(cpu(g))
    expected = col2im_ref(g, (6, 5), *geometry)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12, atol=1e-12)
    assert np.isinf(x.grad.numpy()).sum() == 1

    c = cpu(rng.standard_normal(cols.shape), requires_grad=True)
    img = F.fold(c, (6, 5), *geometry)
    gi = rng.standard_normal(img.shape)
    gi[1, 2, 0, 0] = nan
    img.backward(cpu(gi))
    np.testing.assert_array_equal(c.grad.numpy(), im2col_ref(gi, *geometry))


def test_unfold_and_fold_dtypes_and_empty_batches():
    x = np.array([[[[True, False, True], [False, False, True], [True, True, False]]]])
    np.testing.assert_array_equal(F.unfold(cpu(x), 2).numpy(), im2col_ref(x, (2, 2), (1, 1), (0, 0), (1, 1)))
    assert F.fold(F.unfold(cpu(x), 2), 3, 2).dtype == mf.bool  # overlapping bools: or
    with pytest.raises(TypeError, match="unfold: expected a floating-point, complex or bool input"):
        F.unfold(cpu(np.arange(9).reshape(1, 1, 3, 3)), 2)
    e = cpu(np.zeros((0, 3, 5, 5)), requires_grad=True)
    y = F.unfold(e, 2)
    assert y.shape == (0, 12, 16)
    y.sum().backward()
    assert e.grad.shape == (0, 3, 5, 5)
    assert F.fold(cpu(np.zeros((0, 12, 16))), 5, 2).shape == (0, 3, 5, 5)
    with pytest.raises(ValueError, match="unfold: expected a 3-D or 4-D input with possibly 0 batch size"):
        F.unfold(cpu(np.zeros((1, 0, 5, 5))), 2)
    with pytest.raises(ValueError, match="calculated shape of the array of sliding blocks as \\(0, 0\\)"):
        F.unfold(cpu(np.zeros((1, 1, 3, 3))), 4)


# ---------------------------------------------------------------- adaptive average pooling
@pytest.mark.parametrize("bad", [inf, -inf, nan])
def test_adaptive_avg_pool_uneven_bins_keep_a_nonfinite_value_in_its_bins(bad):
    rng = np.random.default_rng(2)
    x1 = np.array([[[1.0, bad, 3, 3, 2, 2, 5, 1, 5]]])
    np.testing.assert_allclose(F.adaptive_avg_pool1d(cpu(x1), 4).numpy(), adaptive_avg_ref(x1, (4,)), rtol=1e-12)
    x2 = rng.standard_normal((2, 3, 7, 5))
    x2[1, 2, 0, 4] = bad
    out = F.adaptive_avg_pool2d(cpu(x2), (3, 4)).numpy()
    np.testing.assert_allclose(out, adaptive_avg_ref(x2, (3, 4)), rtol=1e-12)
    assert np.isfinite(out[0]).all() and np.isfinite(out[1, :2]).all() and (~np.isfinite(out[1, 2])).sum() == 1
    x3 = rng.standard_normal((1, 2, 4, 4, 5))
    x3[0, 0, 0, 0, 0] = bad
    np.testing.assert_allclose(F.adaptive_avg_pool3d(cpu(x3), (3, 3, 3)).numpy(), adaptive_avg_ref(x3, (3, 3, 3)),
                               rtol=1e-12)


def test_adaptive_avg_pool_uneven_bins_gradient():
    rng = np.random.default_rng(3)
    x = cpu(rng.standard_normal((2, 2, 5, 7)), requires_grad=True)
    y = F.adaptive_avg_pool2d(x, (3, 4))
    g = rng.standard_normal(y.shape)
    g[0, 1, 2, 3] = inf  # reaches the one bin's pixels only
    y.backward(cpu(g))
    expected = adaptive_avg_grad_ref(g, (2, 2, 5, 7), (3, 4))
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12, atol=1e-12)
    assert np.isfinite(x.grad.numpy()[1]).all() and np.isfinite(x.grad.numpy()[0, 0]).all()
    # upsampling (more bins than pixels): overlapping bins
    x = cpu(rng.standard_normal((1, 1, 3, 2)), requires_grad=True)
    y = F.adaptive_avg_pool2d(x, (5, 3))
    np.testing.assert_allclose(y.detach().numpy(), adaptive_avg_ref(x.detach().numpy(), (5, 3)), rtol=1e-12)
    g = rng.standard_normal(y.shape)
    y.backward(cpu(g))
    np.testing.assert_allclose(x.grad.numpy(), adaptive_avg_grad_ref(g, (1, 1, 3, 2), (5, 3)), rtol=1e-12)


# ---------------------------------------------------------------- shuffles
@pytest.mark.parametrize("shuffle", [lambda x: F.pixel_shuffle(x, 1), lambda x: F.pixel_unshuffle(x, 2),
                                     lambda x: F.channel_shuffle(x, 1), lambda x: F.channel_shuffle(x, 4)])
def test_shuffles_return_new_memory(shuffle):
    x = cpu(np.ones((1, 4, 2, 2)))
    y = shuffle(x)
    y.add_(1)
    assert x.sum().item() == 16.0
    # and an in-place change of the result leaves the gradient of the input's other uses alone
    w = cpu(np.ones((1, 4, 2, 2)), requires_grad=True)
    h = w * 1
    shuffle(h).mul_(3)
    (h * h).sum().backward()
    assert w.grad.tolist() == np.full((1, 4, 2, 2), 2.0).tolist()


def test_shuffles_of_zero_size_inputs():
    assert F.pixel_shuffle(cpu(np.zeros((2, 4, 0, 3))), 2).shape == (2, 1, 0, 6)
    assert F.pixel_shuffle(cpu(np.zeros((0, 4, 1, 3))), 2).shape == (0, 1, 2, 6)
    assert F.pixel_unshuffle(cpu(np.zeros((2, 1, 0, 4))), 2).shape == (2, 4, 0, 2)
    assert F.pixel_shuffle(cpu(np.zeros((5, 0, 4, 2, 3))), 2).shape == (5, 0, 1, 4, 6)


# ---------------------------------------------------------------- adaptive max pooling with NaN
def test_adaptive_max_pool_names_the_last_nan_of_a_bin():
    v, i = F.adaptive_max_pool1d(cpu(np.array([[[1.0, nan, 3, nan, 5]]])), 1, True)
    assert math.isnan(v.item()) and i.tolist() == [[[3]]]
    assert F.adaptive_max_pool1d(cpu(np.array([[[1.0, nan, 3, nan, 5]]])), 2, True)[1].tolist() == [[[1, 3]]]
    x = np.array([[[[1.0, nan, 3], [nan, 2.0, 9], [nan, 5, nan]]]])
    assert F.adaptive_max_pool2d(cpu(x), 1, True)[1].tolist() == [[[[8]]]]
    x = np.array([[[[1.0, nan, 3], [nan, 2.0, 9], [4, 5, 1]]]])
    assert F.adaptive_max_pool2d(cpu(x), 2, True)[1].tolist() == [[[[3, 1], [3, 5]]]]
    x3 = np.zeros((1, 1, 2, 2, 2))
    x3[0, 0, 0, 1, 1] = x3[0, 0, 1, 0, 0] = nan
    x3[0, 0, 1, 1, 1] = 5
    assert F.adaptive_max_pool3d(cpu(x3), 1, True)[1].tolist() == [[[[[4]]]]]
    # without NaN, the first maximum still wins
    assert F.adaptive_max_pool2d(cpu(np.full((1, 1, 2, 2), 2.0)), 1, True)[1].tolist() == [[[[0]]]]


# ---------------------------------------------------------------- unpooling of empty batches, layers' stride
def test_max_unpool_of_an_empty_batch():
    y, i = F.max_pool2d(cpu(np.zeros((0, 3, 4, 4))), 2, return_indices=True)
    assert F.max_unpool2d(y, i, 2).shape == (0, 3, 4, 4)
    y, i = F.max_pool3d(cpu(np.zeros((0, 3, 4, 4, 4))), 2, return_indices=True)
    assert F.max_unpool3d(y, i, 2).shape == (0, 3, 4, 4, 4)
    with pytest.raises(RuntimeError, match="max_unpool2d: Expected input to have non-zero size"):
        F.max_unpool2d(cpu(np.zeros((1, 0, 2, 2))), cpu(np.zeros((1, 0, 2, 2), np.int64)), 2)


def test_pool_layers_keep_kernel_size_as_their_default_stride():
    assert nn.MaxPool2d(2).stride == 2 and nn.MaxPool1d(3).stride == 3 and nn.AvgPool2d((2, 3)).stride == (2, 3)
    assert nn.MaxPool2d(2, 1).stride == 1
    assert repr(nn.MaxPool2d(2)) == "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"


# ---------------------------------------------------------------- linalg and products
def test_matrix_power_zero_stays_on_the_tape():
    A = cpu(np.array([[inf, 2.0], [3.0, 4.0]]), requires_grad=True)
    P = mf.linalg.matrix_power(A, 0)
    assert P.requires_grad and not P.is_leaf and P.tolist() == [[1.0, 0.0], [0.0, 1.0]]
    P.sum().backward()
    assert A.grad.tolist() == [[0.0, 0.0], [0.0, 0.0]]


def test_alpha_zero_ignores_the_product():
    i, m1, m2 = cpu(np.ones((2, 2))), cpu(np.full((2, 3), inf)), cpu(np.ones((3, 2)))
    assert mf.addmm(i, m1, m2, alpha=0).tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert mf.addmm(i, m1, m2, alpha=0, beta=2).tolist() == [[2.0, 2.0], [2.0, 2.0]]
    assert mf.addmm(cpu(np.full((2, 2), nan)), m1, m2, alpha=0, beta=0).tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert mf.addmv(i[0], m1, m2[:, 0], alpha=0).tolist() == [1.0, 1.0]
    assert mf.addbmm(i, m1[None], m2[None], alpha=0).tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_pinv_gradient_with_tolerances_broadcasting_the_batch():
    rng = np.random.default_rng(4)
    q = np.linalg.qr(rng.standard_normal((2, 3, 3)))[0]
    a0 = q @ (np.array([1.0, 0.1, 2.0])[:, None] * np.linalg.qr(rng.standard_normal((2, 3, 3)))[0])
    # broadcasts the (2,) batch of A to (2, 2); below the smallest singular value 0.1 (the gradient is that of a
    # pinv of constant rank, as PyTorch's: finite differences across a cut-off would see the truncation jump)
    rtol = np.array([[0.02], [0.01]])
    w = rng.standard_normal((2, 2, 3, 3))
    A = cpu(a0, requires_grad=True)
    P = mf.linalg.pinv(A, rtol=cpu(rtol))
    assert P.shape == (2, 2, 3, 3)
    (P * cpu(w)).sum().backward()

    def f(a):
        return sum((w[j, b] * np.linalg.pinv(a[b], rcond=rtol[j, 0])).sum() for j in range(2) for b in range(2))
    num, eps = np.zeros_like(a0), 1e-6
    for idx in np.ndindex(*a0.shape):
        d = np.zeros_like(a0)
        d[idx] = eps
        num[idx] = (f(a0 + d) - f(a0 - d)) / (2 * eps)
    assert A.grad.shape == (2, 3, 3)
    np.testing.assert_allclose(A.grad.numpy(), num, rtol=1e-6, atol=1e-6)


def test_matrix_norm_of_empty_matrices():
    for shape in [(0, 3), (3, 0), (2, 0, 3)]:
        for ord in (2, 1, inf, "nuc", "fro"):
            out = mf.linalg.matrix_norm(cpu(np.zeros(shape)), ord)
            assert out.shape == shape[:-2] and not out.numpy().any()
        with pytest.raises(IndexError):
            mf.linalg.matrix_norm(cpu(np.zeros(shape)), -2)
    assert mf.linalg.matrix_norm(cpu(np.ones((0, 3))), -1).item() == 0.0  # three columns, each summing to 0
    assert mf.linalg.matrix_norm(cpu(np.ones((3, 0))), -inf).item() == 0.0
    with pytest.raises(IndexError, match="without columns"):
        mf.linalg.matrix_norm(cpu(np.ones((3, 0))), -1)
    assert mf.linalg.matrix_norm(cpu(np.zeros((0, 3))), 1, keepdim=True).shape == (1, 1)


def test_matmul_refuses_mixed_and_bool_dtypes():
    f32, f64 = cpu(np.ones((2, 3), np.float32)), cpu(np.ones((3, 2)))
    with pytest.raises(RuntimeError, match="matmul: expected m1 and m2 to have the same dtype"):
        f32 @ f64
    with pytest.raises(RuntimeError, match="same dtype, but got: int64 != float32"):
        mf.matmul(cpu(np.ones((2, 3), np.int64)), cpu(np.ones((3, 2), np.float32)))
    b = cpu(np.ones((2, 2), bool))
    for fn in (lambda: b @ b, lambda: mf.mm(b, b), lambda: mf.dot(b[0], b[0]), lambda: mf.einsum("ij,jk", b, b)):
        with pytest.raises(NotImplementedError):
            fn()
    assert (cpu(np.ones((2, 3), np.int64)) @ cpu(np.ones((3, 2), np.int64))).tolist() == [[3, 3], [3, 3]]


# ---------------------------------------------------------------- shapes
def test_expand_refuses_minus_one_in_a_new_leading_dim():
    for shape, sizes in [((3,), (-1, 3)), ((2, 3), (-1, 2, 3))]:
        with pytest.raises(RuntimeError, match="isn't allowed in a leading, non-existing dimension 0"):
            cpu(np.zeros(shape)).expand(*sizes)
    assert cpu(np.zeros((1, 3))).expand(4, 2, -1).shape == (4, 2, 3)


def test_joins_roll_and_rot90_of_transposed_inputs_are_contiguous():
    a = np.arange(6.0).reshape(2, 3)
    t = cpu(a).t()
    cases = [(mf.cat([t, t]), np.concatenate([a.T, a.T])), (mf.cat([t, t], 1), np.concatenate([a.T, a.T], 1)),
             (mf.stack([t, t]), np.stack([a.T, a.T])), (mf.stack([t, t], 2), np.stack([a.T, a.T], 2)),
             (mf.hstack([t, t]), np.hstack([a.T, a.T])), (mf.vstack([t, t]), np.vstack([a.T, a.T])),
             (mf.dstack([t, t]), np.dstack([a.T, a.T])), (mf.column_stack([t, t]), np.column_stack([a.T, a.T])),
             (t.roll(1, 0), np.roll(a.T, 1, 0)), (t.roll((1, 1), (0, 1)), np.roll(a.T, (1, 1), (0, 1))),
             (t.rot90(), np.rot90(a.T)), (t.rot90(3), np.rot90(a.T, 3))]
    for got, want in cases:
        assert got.is_contiguous()
        assert got.view(-1).tolist() == want.reshape(-1).tolist()
    # channels-last inputs stay channels-last (PyTorch's cat and roll keep a layout every input shares)
    x = cpu(np.arange(120.0).reshape(2, 3, 4, 5)).contiguous(memory_format=mf.channels_last)
    assert mf.cat([x, x], 1).is_contiguous(memory_format=mf.channels_last)
    assert x.roll(1, 1).is_contiguous(memory_format=mf.channels_last)
    assert x.flip(2).is_contiguous(memory_format=mf.channels_last)


def test_diff_past_the_size_of_empty_and_of_bools():
    assert mf.diff(cpu(np.array([1.0, 2.0])), 3).shape == (0,)
    assert mf.diff(cpu(np.ones((3, 2))), 5, dim=0).shape == (0, 2)
    assert mf.diff(cpu(np.zeros((2, 0)))).shape == (2, 0)
    assert mf.diff(cpu(np.array([True, False, False, True]))).tolist() == [True, False, True]
    assert mf.diff(cpu(np.array([True, False, False, True])), 2).tolist() == [True, True]
    assert mf.diff(cpu(np.array([[1, 2, 4], [3, 3, 3]])), 2, dim=1).tolist() == [[1], [0]]


def test_adaptive_average_pooling_takes_no_channel_and_rot90_by_zero_is_c_ordered():
    """PyTorch's adaptive average pooling takes an input of no channel (max pooling refuses one); rot90 by 0 turns
    (copies) a channels-last tensor into C order, as its other rotations."""
    assert F.adaptive_avg_pool2d(cpu(np.zeros((1, 0, 3, 7))), 2).shape == (1, 0, 2, 2)
    assert F.adaptive_avg_pool1d(cpu(np.zeros((1, 0, 7))), 2).shape == (1, 0, 2)
    assert F.adaptive_avg_pool2d(cpu(np.zeros((0, 3, 7))), 2).shape == (0, 2, 2)
    with pytest.raises(RuntimeError, match="non-zero size for non-batch dimensions"):
        F.adaptive_max_pool2d(cpu(np.zeros((1, 0, 3, 7))), 2)
    a = np.arange(120.0).reshape(2, 3, 4, 5)
    x = cpu(a).to(memory_format=mf.channels_last)
    out = mf.rot90(x, 0, (2, 3))
    assert out.is_contiguous()
    np.testing.assert_array_equal(out.numpy(), a)


def test_pad_values_as_pytorch_takes_them():
    """A constant pad value an integer dtype cannot hold refuses (it wrapped: -1 padded uint8 with 255); the
    non-constant modes take value=0, the fill they would not use, as PyTorch's."""
    assert F.pad(mf.ones(3, dtype=mf.uint8), (1, 1), value=255).tolist() == [255, 1, 1, 1, 255]
    with pytest.raises(RuntimeError, match="without overflow"):
        F.pad(mf.ones(3, dtype=mf.uint8), (1, 1), value=256)
    a = np.arange(6.0).reshape(1, 2, 3)
    np.testing.assert_array_equal(F.pad(cpu(a), (1, 1), mode="reflect", value=0.0).numpy(),
                                  np.pad(a, ((0, 0), (0, 0), (1, 1)), mode="reflect"))
