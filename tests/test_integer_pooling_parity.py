"""PyTorch's pooling of integer inputs on the cpu: max pooling (1-D with ``return_indices`` only, 2-D, 3-D) of
every integer dtype but bool, exact in the input's dtype, and average pooling of int64, whose window sums are
divided as C divides integers (truncating toward zero); the adaptive poolings take no integers. And the adaptive
3-D poolings of an unbatched (C, D, H, W) input with C = 0. Expected values come from NumPy brute force: each
window's elements inside the input, the first maximum in row-major order, sums of Python ints."""
import re
import types

import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
from minifused import backend
from tolerances import cpu

INTEGERS = [np.int8, np.uint8, np.int16, np.int32, np.int64]


# ---------------------------------------------------------------- references
def _out_size(n, k, s, p, d, ceil_mode):
    """The number of windows along one dimension (a ceil_mode window must start inside the input or left pad)."""
    span = n + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _windows(shape, kernel, stride, padding, dilation, ceil_mode):
    """(output position, the input coordinates of its taps inside the input, per dimension) of each window."""
    outs = [_out_size(*a, ceil_mode) for a in zip(shape, kernel, stride, padding, dilation)]
    for pos in np.ndindex(*outs):
        yield pos, [[o * s - p + t * d for t in range(k) if 0 <= o * s - p + t * d < n]
                    for o, n, k, s, p, d in zip(pos, shape, kernel, stride, padding, dilation)], outs


def max_pool_ref(x, kernel, stride, padding, dilation=None, ceil_mode=False):
    """(values, flat int64 indices) of a max pooling of (N, C, *spatial) ``x``: each window's first maximum."""
    spatial = x.shape[2:]
    dilation = dilation or (1,) * len(spatial)
    values, indices = {}, {}
    for pos, taps, outs in _windows(spatial, kernel, stride, padding, dilation, ceil_mode):
        window = x[(slice(None), slice(None)) + np.ix_(*taps)].reshape(x.shape[:2] + (-1,))
        first = window.argmax(-1)
        coords = np.unravel_index(first, [len(t) for t in taps])
        values[pos] = window.max(-1)
        indices[pos] = np.ravel_multi_index([np.asarray(t)[c] for t, c in zip(taps, coords)], spatial)
    shape = x.shape[:2] + tuple(outs)
    v, i = np.empty(shape, x.dtype), np.empty(shape, np.int64)
    for pos in values:
        v[(Ellipsis,) + pos], i[(Ellipsis,) + pos] = values[pos], indices[pos]
    return v, i


def _trunc_div(a, b):
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def avg_pool_int_ref(x, kernel, stride, padding, ceil_mode=False, count_include_pad=True, divisor_override=None):
    """An int64 average pooling: Python-int window sums over the divisor, truncated toward zero."""
    spatial = x.shape[2:]
    ones = (1,) * len(spatial)
    result = {}
    for pos, taps, outs in _windows(spatial, kernel, stride, padding, ones, ceil_mode):
        if divisor_override is not None:
            div = divisor_override
        elif count_include_pad:  # the window clipped to the padded input
            div = int(np.prod([min(o * s - p + k, n + p) - (o * s - p)
                               for o, n, k, s, p in zip(pos, spatial, kernel, stride, padding)]))
        else:
            div = int(np.prod([len(t) for t in taps]))
        window = x[(slice(None), slice(None)) + np.ix_(*taps)].reshape(x.shape[:2] + (-1,))
        result[pos] = [[_trunc_div(sum(int(v) for v in row), div) for row in plane] for plane in window]
    y = np.empty(x.shape[:2] + tuple(outs), np.int64)
    for pos, vals in result.items():
        y[(Ellipsis,) + pos] = vals
    return y


def _ints(rng, shape, dtype, low_ties=False):
    """Random values over the dtype's whole range; ``low_ties``: only its three least values (windows of the
    least value tie with the padding, which must never be picked)."""
    info = np.iinfo(dtype)
    if low_ties:
        return rng.integers(int(info.min), int(info.min) + 3, size=shape, endpoint=False).astype(dtype)
    return rng.integers(int(info.min), int(info.max), size=shape, endpoint=True).astype(dtype)


# ---------------------------------------------------------------- max pooling
@pytest.mark.parametrize("dtype", INTEGERS)
@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil_mode,low_ties", [
    ((3, 3), (2, 2), (1, 1), (1, 1), False, False),
    ((3, 2), (2, 1), (1, 1), (2, 1), True, True),
    ((2, 2), (2, 2), (1, 0), (1, 1), True, False),
])
def test_max_pool2d_of_integers_matches_the_first_maximum(dtype, kernel, stride, padding, dilation, ceil_mode,
                                                          low_ties):
    x = _ints(np.random.default_rng(1), (2, 2, 6, 7), dtype, low_ties)
    y, idx = F.max_pool2d(cpu(x), kernel, stride, padding, dilation, ceil_mode, return_indices=True)
    ref_y, ref_idx = max_pool_ref(x, kernel, stride, padding, dilation, ceil_mode)
    assert y.dtype == np.dtype(dtype) and idx.dtype == backend.int64
    np.testing.assert_array_equal(y.numpy(), ref_y)  # exact: no float accumulator rounds a wide integer
    np.testing.assert_array_equal(idx.numpy(), ref_idx)
    np.testing.assert_array_equal(F.max_pool2d(cpu(x[0]), kernel, stride, padding, dilation, ceil_mode).numpy(),
                                  ref_y[0])  # unbatched, no indices


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_max_pool1d_of_integers_with_indices(dtype):
    x = _ints(np.random.default_rng(2), (2, 3, 9), dtype)
    y, idx = F.max_pool1d(cpu(x), 3, 2, 1, 1, True, return_indices=True)
    ref_y, ref_idx = max_pool_ref(x, (3,), (2,), (1,), (1,), True)
    np.testing.assert_array_equal(y.numpy(), ref_y)
    np.testing.assert_array_equal(idx.numpy(), ref_idx)


def test_max_pool1d_of_integers_without_indices_is_refused():
    """PyTorch's max_pool1d without indices is implemented for floating-point inputs alone."""
    with pytest.raises(TypeError, match=r"max_pool1d: .*return_indices=True only\), got int64"):
        F.max_pool1d(cpu(np.arange(6).reshape(1, 1, 6)), 2)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int64])
@pytest.mark.parametrize("low_ties", [False, True])
def test_max_pool3d_of_integers_matches_the_first_maximum(dtype, low_ties):
    x = _ints(np.random.default_rng(3), (1, 2, 5, 4, 5), dtype, low_ties)
    kernel, stride, padding = (3, 2, 3), (2, 2, 2), (1, 0, 1)
    y, idx = F.max_pool3d(cpu(x), kernel, stride, padding, 1, True, return_indices=True)
    ref_y, ref_idx = max_pool_ref(x, kernel, stride, padding, None, True)
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(y.numpy(), ref_y)
    np.testing.assert_array_equal(idx.numpy(), ref_idx)


@pytest.mark.parametrize("pool", [lambda x: F.max_pool2d(x, 2), lambda x: F.max_pool3d(x[None], 1),
                                  lambda x: F.max_pool1d(x[0], 2, return_indices=True)])
def test_max_pooling_of_bool_is_refused(pool):
    with pytest.raises(TypeError, match=r"max_pool\dd: expected a floating-point or integer \(not bool\) input"):
        pool(cpu(np.ones((1, 1, 2, 2), bool)))


# ---------------------------------------------------------------- average pooling
def test_avg_pool_of_int64_truncates_toward_zero():
    assert F.avg_pool1d(cpu(np.array([[[-3, -4]]])), 2).tolist() == [[[-3]]]  # -3.5 -> -3
    assert F.avg_pool2d(cpu(np.array([[[[5, 6]]]])), (1, 2), divisor_override=4).tolist() == [[[[2]]]]
    assert F.avg_pool2d(cpu(np.array([[[[-7, 2]]]])), (1, 2), divisor_override=-2).tolist() == [[[[2]]]]
    assert F.avg_pool3d(cpu(np.array([[[[[-7, 2]]]]])), (1, 1, 2)).tolist() == [[[[[-2]]]]]


@pytest.mark.parametrize("kernel,stride,padding,ceil_mode,count_include_pad,divisor_override", [
    ((3, 3), (2, 2), (1, 1), False, True, None),
    ((3, 2), (2, 2), (1, 1), True, True, None),
    ((3, 3), (2, 1), (1, 0), True, False, None),
    ((2, 3), (1, 2), (0, 1), False, False, -3),
])
def test_avg_pool2d_of_int64_matches_truncated_window_means(kernel, stride, padding, ceil_mode, count_include_pad,
                                                            divisor_override):
    # values near 2**60: the sums are exact only in int64
    x = np.random.default_rng(4).integers(-2 ** 60, 2 ** 60, (2, 2, 6, 7))
    y = F.avg_pool2d(cpu(x), kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    assert y.dtype == backend.int64
    np.testing.assert_array_equal(y.numpy(), avg_pool_int_ref(x, kernel, stride, padding, ceil_mode,
                                                              count_include_pad, divisor_override))


def test_avg_pool1d_of_int64_matches_truncated_window_means():
    x = np.random.default_rng(5).integers(-50, 50, (2, 3, 10))
    y = F.avg_pool1d(cpu(x), 3, 2, 1, True, False)
    np.testing.assert_array_equal(y.numpy(), avg_pool_int_ref(x, (3,), (2,), (1,), True, False))


@pytest.mark.parametrize("ceil_mode,count_include_pad,divisor_override", [
    (False, True, None), (True, True, None), (True, False, None), (False, True, 5)])
def test_avg_pool3d_of_int64_matches_truncated_window_means(ceil_mode, count_include_pad, divisor_override):
    x = np.random.default_rng(6).integers(-1000, 1000, (1, 2, 5, 4, 5))
    kernel, stride, padding = (3, 2, 3), (2, 2, 2), (1, 1, 1)
    y = F.avg_pool3d(cpu(x), kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    assert y.dtype == backend.int64
    np.testing.assert_array_equal(y.numpy(), avg_pool_int_ref(x, kernel, stride, padding, ceil_mode,
                                                              count_include_pad, divisor_override))


@pytest.mark.parametrize("pool,name", [(lambda x: F.avg_pool2d(x, 2), "avg_pool2d"),
                                       (lambda x: F.avg_pool1d(x[0], 2), "avg_pool1d"),
                                       (lambda x: F.avg_pool3d(x[None], 1), "avg_pool3d")])
@pytest.mark.parametrize("dtype", [np.int32, np.uint8, bool])
def test_avg_pooling_of_integers_other_than_int64_is_refused(pool, name, dtype):
    with pytest.raises(TypeError, match=f"{name}: expected a floating-point or int64 input, got"):
        pool(cpu(np.ones((1, 1, 2, 2), dtype)))


def test_integer_pooling_is_refused_off_the_cpu():
    """PyTorch's cuda pooling kernels take floating-point inputs only (a stand-in input on cuda)."""
    from minifused.functional.conv import _check_integer_pool

    fake = types.SimpleNamespace(device=mf.device("cuda"), dtype=backend.int64)
    for maximum in (True, False):
        with pytest.raises(TypeError, match="max_pool2d: expected a floating-point input on cuda"):
            _check_integer_pool("max_pool2d", fake, maximum)


@pytest.mark.gpu
def test_integer_pooling_on_cuda_is_refused():
    x = mf.tensor(np.ones((1, 1, 4, 4, 4), np.int64), device="cuda")
    for pool in (lambda: F.max_pool2d(x[0], 2), lambda: F.avg_pool2d(x[0], 2), lambda: F.max_pool3d(x, 2),
                 lambda: F.avg_pool3d(x, 2), lambda: F.max_pool1d(x[0, 0], 2, return_indices=True)):
        with pytest.raises(TypeError, match="expected a floating-point input on cuda"):
            pool()


# ---------------------------------------------------------------- compositions and adaptive pooling
def _blocks(x, k):
    """(N, C, *out, k**dims): the elements of each window of a pooling with kernel = stride = ``k`` (that tiles)."""
    n, c, *sizes = x.shape
    split = [v for size in sizes for v in (size // k, k)]
    dims = len(sizes)
    order = [0, 1] + [2 + 2 * i for i in range(dims)] + [3 + 2 * i for i in range(dims)]
    return x.reshape(n, c, *split).transpose(order).reshape(n, c, *(size // k for size in sizes), -1)


def test_lp_pool_of_int64_with_an_int_norm_type():
    """``x.pow(2)`` stays int64, whose average pooling is implemented (the window's mean of x^2 truncated, then
    times the window's size, as PyTorch's composition); the result is float."""
    x = np.arange(-8, 24).reshape(1, 1, 2, 4, 4)
    got3 = F.lp_pool3d(cpu(x), 2, 2)
    np.testing.assert_allclose(got3.numpy(), np.sqrt((_blocks(x, 2) ** 2).sum(-1) // 8 * 8.0), rtol=1e-6)
    got2 = F.lp_pool2d(cpu(x[0]), 2, 2)
    np.testing.assert_allclose(got2.numpy(), np.sqrt((_blocks(x[0], 2) ** 2).sum(-1) // 4 * 4.0), rtol=1e-6)
    inf = F.lp_pool3d(cpu(x), float("inf"), 2)  # the max pooling of |x|, in int64
    assert inf.dtype == backend.int64
    np.testing.assert_array_equal(inf.numpy(), np.abs(_blocks(x, 2)).max(-1))


@pytest.mark.parametrize("pool", [F.adaptive_avg_pool3d, F.adaptive_max_pool3d])
def test_adaptive_pool3d_refuses_integers(pool):
    with pytest.raises(TypeError, match=r"adaptive_(avg|max)_pool3d: not implemented for dtype int64"):
        pool(cpu(np.ones((1, 1, 2, 2, 2), np.int64)), 1)


@pytest.mark.parametrize("pool", [F.adaptive_avg_pool3d, F.adaptive_max_pool3d])
def test_adaptive_pool3d_of_an_unbatched_input_with_no_channels(pool):
    x = mf.ones(0, 2, 3, 4, device="cpu", requires_grad=True)
    y = pool(x, (1, 2, 2))
    assert tuple(y.shape) == (0, 1, 2, 2)
    y.sum().backward()
    assert tuple(x.grad.shape) == (0, 2, 3, 4)
    if pool is F.adaptive_max_pool3d:
        v, i = pool(x, (1, 2, 2), return_indices=True)
        assert tuple(v.shape) == tuple(i.shape) == (0, 1, 2, 2) and i.dtype == backend.int64


@pytest.mark.parametrize("pool", [F.adaptive_avg_pool3d, F.adaptive_max_pool3d])
@pytest.mark.parametrize("shape", [(1, 0, 2, 3, 4), (1, 2, 0, 3, 4), (2, 0, 3, 4), (2, 3, 4, 0)])
def test_adaptive_pool3d_still_refuses_other_empty_dimensions(pool, shape):
    """Every dimension but the first must be nonzero: a batch's channels, an unbatched input's depth."""
    with pytest.raises(RuntimeError, match=rf"{pool.__name__}: Expected input to have non-zero size for non-batch "
                                           rf"dimensions, but got shape {re.escape(str(shape))}"):
        pool(mf.ones(*shape, device="cpu"), (1, 2, 2))
