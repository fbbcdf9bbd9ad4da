"""Max and average pooling: references vs direct loops, gradcheck, validation, modules; GPU kernels vs
the references on random configurations in every dtype, with poisoned outputs; PyTorch parity."""
import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
import minifused.nn as nn
from minifused import backend
from minifused.kernels import pool as K
from minifused.tensor import Tensor
from minifused.testing import gradcheck


def T(a, requires_grad=False, device="cpu"):
    if not backend.is_cuda_array(a):
        a = np.asarray(a)
    return Tensor._from_array(backend.to_device(a, backend.Device(device)), requires_grad)


def direct_pool(x, k, s, p, ceil_mode, kind, include_pad=True, divisor=0):
    n, c, h, w = x.shape
    ph_, pw_ = K.out_size(h, k[0], s[0], p[0], ceil_mode), K.out_size(w, k[1], s[1], p[1], ceil_mode)
    y = np.zeros((n, c, ph_, pw_))
    for i in range(ph_):
        for j in range(pw_):
            h0, w0 = i * s[0] - p[0], j * s[1] - p[1]
            h1, w1 = min(h0 + k[0], h + p[0]), min(w0 + k[1], w + p[1])
            cnt = (h1 - h0) * (w1 - w0)
            hs, ws, he, we = max(h0, 0), max(w0, 0), min(h1, h), min(w1, w)
            win = x[:, :, hs:he, ws:we]
            if kind == "max":
                y[:, :, i, j] = win.max(axis=(2, 3))
            else:
                y[:, :, i, j] = win.sum(axis=(2, 3)) / (divisor or (cnt if include_pad else (he - hs) * (we - ws)))
    return y


CASES = [  # shape, kernel, stride, padding, ceil_mode
    ((2, 3, 8, 8), (2, 2), (2, 2), (0, 0), False),
    ((1, 2, 7, 9), (3, 3), (2, 2), (1, 1), False),
    ((2, 1, 7, 7), (3, 2), (2, 1), (1, 0), True),
    ((1, 3, 5, 6), (2, 2), (1, 1), (1, 1), False),
    ((1, 2, 10, 9), (3, 3), (3, 3), (0, 1), True),
    # ceil_mode's one window larger than the padded input, overhanging it on the far side (PyTorch takes these)
    ((2, 3, 2, 3), (5, 5), (2, 2), (1, 1), True),
    ((1, 2, 2, 3), (4, 5), (3, 3), (1, 2), True),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("kind", ["max", "avg", "avg_nopad", "avg_divisor"])
def test_reference_matches_loops(case, kind, rng):
    shape, k, s, p, cm = case
    x = rng.standard_normal(shape)
    if kind == "max":
        y, idx = K.max_pool2d_forward_ref(x, k, s, p, cm)
        assert idx.dtype == np.uint8 and idx.shape == y.shape
        flat = K.indices_to_flat(idx, shape, k, s, p)
        assert flat.dtype == np.int64
        x_flat = x.reshape(shape[0], shape[1], -1)
        picked = np.take_along_axis(x_flat, flat.reshape(shape[0], shape[1], -1), -1)
        np.testing.assert_array_equal(picked.reshape(y.shape), y)
    else:
        y = K.avg_pool2d_forward_ref(x, k, s, p, cm, kind == "avg", -3 if kind == "avg_divisor" else 0)
    np.testing.assert_allclose(y, direct_pool(x, k, s, p, cm, kind[:3], kind == "avg",
                                              -3 if kind == "avg_divisor" else 0), rtol=1e-12)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("kind", ["max", "avg", "avg_nopad", "avg_divisor"])
def test_gradcheck(case, kind, rng):
    shape, k, s, p, cm = case
    x = T(rng.standard_normal(shape), True)
    if kind == "max":
        fn = lambda a: F.max_pool2d(a, k, s, p, ceil_mode=cm)  # noqa: E731
    else:
        divisor = 5 if kind == "avg_divisor" else None
        fn = lambda a: F.avg_pool2d(a, k, s, p, ceil_mode=cm, count_include_pad=kind == "avg",  # noqa: E731
                                    divisor_override=divisor)
    assert gradcheck(fn, [x])


def direct_argmax(x, k, s, p, ceil_mode):
    """PyTorch's flat indices h*W + w of each window's maximum (first one on ties), by loops."""
    n, c, h, w = x.shape
    P, Q = K.out_size(h, k[0], s[0], p[0], ceil_mode), K.out_size(w, k[1], s[1], p[1], ceil_mode)
    out = np.zeros((n, c, P, Q), np.int64)
    for a in range(n):
        for b in range(c):
            for i in range(P):
                for j in range(Q):
                    best = None
                    for hh in range(i * s[0] - p[0], i * s[0] - p[0] + k[0]):
                        for ww in range(j * s[1] - p[1], j * s[1] - p[1] + k[1]):
                            if 0 <= hh < h and 0 <= ww < w and (best is None or x[a, b, hh, ww] > x[a, b].flat[best]):
                                best = hh * w + ww
                    out[a, b, i, j] = best
    return out


@pytest.mark.parametrize("case", CASES + [((1, 2, 20, 19), (17, 16), (3, 2), (8, 8), True)])
def test_window_indices_smallest_type_and_flat(case, rng):
    """Indices are window positions in the smallest type (uint8 up to 256 positions, int16 above);
    indices_to_flat gives PyTorch's flat int64 indices; the backward puts dy at that position."""
    shape, k, s, p, cm = case
    x = rng.standard_normal(shape)
    y, idx = K.max_pool2d_forward_ref(x, k, s, p, cm)
    assert idx.dtype == (np.uint8 if k[0] * k[1] <= 256 else np.int16)
    assert int(idx.max()) < k[0] * k[1]
    flat = K.indices_to_flat(idx, shape, k, s, p)
    np.testing.assert_array_equal(flat, direct_argmax(x, k, s, p, cm))
    dy = rng.standard_normal(y.shape)
    dx = K.max_pool2d_backward_ref(dy, idx, shape, k, s, p)
    want = np.zeros((shape[0] * shape[1], shape[2] * shape[3]))
    for r, (f, g) in enumerate(zip(flat.reshape(want.shape[0], -1), dy.reshape(want.shape[0], -1))):
        np.add.at(want[r], f, g)
    np.testing.assert_allclose(dx, want.reshape(shape), rtol=1e-12)
    assert K.index_dtype((200, 200)) == np.int32


def test_defaults_and_modules(rng):
    x = T(rng.standard_normal((2, 3, 8, 8)).astype(np.float32))
    assert F.max_pool2d(x, 2).shape == (2, 3, 4, 4)
    assert nn.MaxPool2d(3, stride=2, padding=1)(x).shape == (2, 3, 4, 4)
    assert nn.AvgPool2d(2)(x).shape == (2, 3, 4, 4)
    y = F.avg_pool2d(x, 3, 1, 1)  # count_include_pad=True: corner divides by 9
    np.testing.assert_allclose(y._data[0, 0, 0, 0], x._data[0, 0, :2, :2].sum() / 9, rtol=1e-6)
    for dt in (backend.float16, backend.bfloat16):
        assert F.max_pool2d(T(x._data.astype(dt)), 2).dtype == dt


@pytest.mark.parametrize("fn", [F.max_pool2d, F.avg_pool2d])
def test_bad_input(fn):
    x = T(np.ones((1, 2, 6, 6), np.float32))
    with pytest.raises(ValueError, match="4-D"):
        fn(T(np.ones((6, 6), np.float32)), 2)
    with pytest.raises(ValueError, match="half the kernel"):
        fn(x, 2, padding=2)
    with pytest.raises(ValueError, match="stride"):
        fn(x, 2, stride=0)
    with pytest.raises(ValueError, match="larger than the padded input"):
        fn(x, 8)
    with pytest.raises(ValueError, match="larger than the padded input"):  # no window starts inside it
        fn(T(np.ones((1, 1, 2, 2), np.float32)), 5, 2, 0, ceil_mode=True)


def test_1d_ceil_mode_window_overhanging_padded_input():
    """As PyTorch: with ceil_mode, one window larger than the padded input still pools (its overhang counts as
    padding); L = 2, kernel 5, stride 2, padding 1: one window over both values, its divisor 4 with padding."""
    x = np.array([[[1.5, -2.0]]])
    assert F.max_pool1d(T(x), 5, 2, 1, ceil_mode=True)._data.tolist() == [[[1.5]]]
    np.testing.assert_allclose(F.avg_pool1d(T(x), 5, 2, 1, ceil_mode=True)._data, [[[-0.5 / 4]]])
    np.testing.assert_allclose(F.avg_pool1d(T(x), 5, 2, 1, ceil_mode=True, count_include_pad=False)._data,
                               [[[-0.5 / 2]]])
    with pytest.raises(ValueError, match="max_pool1d: kernel 5 is larger than the padded input 4"):
        F.max_pool1d(T(x), 5, 2, 1)


@pytest.mark.parametrize("bad,error", [(0, RuntimeError), (2.0, TypeError), (True, TypeError), ("2", TypeError)])
def test_bad_divisor_override(bad, error):  # (PyTorch's types: a non-int is a TypeError, zero a RuntimeError)
    with pytest.raises(error, match=r"avg_pool2d: divisor_override must be a nonzero int or None, got"):
        nn.AvgPool2d(2, divisor_override=bad)(mf.randn(1, 2, 4, 4))


# ---------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_gpu_matches_reference(dtype, poisoned_pool):
    dt = backend.as_dtype(dtype)
    rng = np.random.default_rng(4)
    for _ in range(30):
        k = (int(rng.integers(1, 5)), int(rng.integers(1, 5)))
        s = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        p = (int(rng.integers(0, k[0] // 2 + 1)), int(rng.integers(0, k[1] // 2 + 1)))
        shape = (int(rng.integers(1, 4)), int(rng.integers(1, 6)), int(rng.integers(k[0], 20)),
                 int(rng.integers(k[1], 20)))
        cm = bool(rng.random() < 0.3)
        _check_gpu_pooling(shape, k, s, p, cm, dt, rng)


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES)
def test_gpu_cases_match_reference(case, poisoned_pool):
    shape, k, s, p, cm = case
    for dtype in ("float32", "bfloat16"):
        _check_gpu_pooling(shape, k, s, p, cm, backend.as_dtype(dtype), np.random.default_rng(7))


def _check_gpu_pooling(shape, k, s, p, cm, dt, rng):
    """The GPU kernels of max and average pooling (every divisor rule), forward and backward, against the
    references, on distinct values (the argmax unambiguous in every dtype); max pooling channels-last too."""
    import cupy

    from minifused.kernels import c_contiguous, channels_last_strided, to_channels_last

    x = (rng.permutation(int(np.prod(shape))).reshape(shape) % 200 - 100).astype(np.float32) / 8
    x = x.astype(dt)
    xg = cupy.asarray(x)
    y, idx = K.max_pool2d_forward(xg, k, s, p, cm)
    yr, idxr = K.max_pool2d_forward_ref(x, k, s, p, cm)
    np.testing.assert_array_equal(cupy.asnumpy(y).astype(np.float64), yr.astype(np.float64))
    assert idx.dtype == idxr.dtype == np.uint8
    np.testing.assert_array_equal(cupy.asnumpy(idx), idxr)
    np.testing.assert_array_equal(cupy.asnumpy(K.indices_to_flat(idx, shape, k, s, p)),
                                  K.indices_to_flat(idxr, shape, k, s, p))
    dy = rng.standard_normal(y.shape).astype(dt)
    dx = K.max_pool2d_backward(cupy.asarray(dy), idx, shape, k, s, p)
    dxr = K.max_pool2d_backward_ref(dy, idxr, shape, k, s, p)
    tol = 1e-2 if dt.itemsize == 2 else 1e-6
    np.testing.assert_allclose(cupy.asnumpy(dx).astype(np.float64), dxr.astype(np.float64), rtol=tol, atol=tol)
    # channels-last in place: the same values, positions and gradient bits, in that layout (from a dy in either)
    x_cl = to_channels_last(xg)
    cl = not c_contiguous(x_cl)  # (one channel, or a 1x1 plane: both layouts at once, taken as C-contiguous)
    in_layout = channels_last_strided if cl else c_contiguous
    y_cl, idx_cl = K.max_pool2d_forward(x_cl, k, s, p, cm)
    assert in_layout(y_cl) and in_layout(idx_cl)
    bits = lambda a: np.ascontiguousarray(cupy.asnumpy(a)).view(np.uint8)  # noqa: E731
    np.testing.assert_array_equal(bits(y_cl), bits(y))
    np.testing.assert_array_equal(cupy.asnumpy(idx_cl), cupy.asnumpy(idx))
    for dy_in in (cupy.asarray(dy), to_channels_last(cupy.asarray(dy))):
        dx_cl = K.max_pool2d_backward(dy_in, idx_cl, shape, k, s, p, channels_last=cl)
        assert in_layout(dx_cl)
        np.testing.assert_array_equal(bits(dx_cl), bits(dx))
    for cip, divisor in ((True, 0), (False, 0), (False, 3), (True, -2)):
        ya = K.avg_pool2d_forward(xg, k, s, p, cm, cip, divisor)
        yar = K.avg_pool2d_forward_ref(x, k, s, p, cm, cip, divisor)
        np.testing.assert_allclose(cupy.asnumpy(ya).astype(np.float64), yar.astype(np.float64), rtol=tol,
                                   atol=tol)
        dxa = K.avg_pool2d_backward(cupy.asarray(dy), shape, k, s, p, cip, divisor)
        dxar = K.avg_pool2d_backward_ref(dy, shape, k, s, p, cip, divisor)
        np.testing.assert_allclose(cupy.asnumpy(dxa).astype(np.float64), dxar.astype(np.float64), rtol=tol,
                                   atol=tol)


@pytest.mark.parametrize("case", CASES)
def test_return_indices(case, rng):
    """``return_indices=True`` gives PyTorch's int64 flat indices (each window's first maximum), without a
    gradient, whether or not the output needs one; the output and its gradient are unchanged."""
    shape, k, s, p, cm = case
    x = rng.standard_normal(shape)
    expected = direct_argmax(x, k, s, p, cm)
    for requires_grad in (True, False):
        xt = T(x, requires_grad)
        y, idx = F.max_pool2d(xt, k, s, p, ceil_mode=cm, return_indices=True)
        assert idx.dtype == np.int64 and idx.shape == y.shape and not idx.requires_grad
        np.testing.assert_array_equal(idx._data, expected)
        np.testing.assert_array_equal(y._data, direct_pool(x, k, s, p, cm, "max"))
        if requires_grad:
            dy = rng.standard_normal(y.shape)
            (y * T(dy)).sum().backward()
            dx = np.zeros((shape[0] * shape[1], shape[2] * shape[3]))
            np.add.at(dx, (np.repeat(np.arange(shape[0] * shape[1]), y.shape[2] * y.shape[3]), expected.ravel()),
                      dy.ravel())
            np.testing.assert_allclose(xt.grad._data, dx.reshape(shape))
    with mf.no_grad():
        _, idx = nn.MaxPool2d(k, s, p, return_indices=True, ceil_mode=cm)(T(x, True))
    np.testing.assert_array_equal(idx._data, expected)


DILATED = [  # shape, kernel, stride, padding, dilation, ceil_mode
    ((2, 3, 9, 8), (3, 2), (2, 1), (1, 1), (2, 3), False),
    ((1, 2, 10, 11), (3, 3), (2, 2), (1, 0), (2, 2), True),
    ((1, 1, 7, 12), (2, 4), (1, 3), (1, 2), (3, 1), True),
    ((2, 2, 6, 6), (2, 2), (2, 2), (0, 0), (2, 2), False),  # kernel == stride, but the windows do not tile
]


def direct_dilated_max(x, k, s, p, d, ceil_mode):
    """Each window's maximum and the flat index ``h*W + w`` of its first one (taps d apart, row-major), by loops."""
    n, c, h, w = x.shape
    P, Q = K.out_size(h, k[0], s[0], p[0], ceil_mode, d[0]), K.out_size(w, k[1], s[1], p[1], ceil_mode, d[1])
    y, arg = np.full((n, c, P, Q), -np.inf), np.zeros((n, c, P, Q), np.int64)
    for b in range(n):
        for ch in range(c):
            for i in range(P):
                for j in range(Q):
                    for ti in range(k[0]):
                        for tj in range(k[1]):
                            hh, ww = i * s[0] - p[0] + ti * d[0], j * s[1] - p[1] + tj * d[1]
                            if 0 <= hh < h and 0 <= ww < w and x[b, ch, hh, ww] > y[b, ch, i, j]:
                                y[b, ch, i, j], arg[b, ch, i, j] = x[b, ch, hh, ww], hh * w + ww
    return y, arg


@pytest.mark.parametrize("case", DILATED)
def test_dilated_max_pool_matches_loops(case, rng):
    """Dilated max pooling (F.max_pool2d and nn.MaxPool2d): values, PyTorch's flat indices and the gradient
    (dy at each window's pick) against loops over the spaced taps; gradcheck; max_pool1d's dilation."""
    shape, k, s, p, d, cm = case
    x = rng.standard_normal(shape)
    want_y, want_idx = direct_dilated_max(x, k, s, p, d, cm)
    xt = T(x, True)
    y, idx = F.max_pool2d(xt, k, s, p, dilation=d, ceil_mode=cm, return_indices=True)
    np.testing.assert_array_equal(y._data, want_y)
    np.testing.assert_array_equal(idx._data, want_idx)
    dy = rng.standard_normal(y.shape)
    (y * T(dy)).sum().backward()
    dx = np.zeros((shape[0] * shape[1], shape[2] * shape[3]))
    np.add.at(dx, (np.repeat(np.arange(shape[0] * shape[1]), y.shape[2] * y.shape[3]), want_idx.ravel()), dy.ravel())
    np.testing.assert_allclose(xt.grad._data, dx.reshape(shape))
    np.testing.assert_array_equal(nn.MaxPool2d(k, s, p, dilation=d, ceil_mode=cm)(T(x))._data, want_y)
    assert gradcheck(lambda a: F.max_pool2d(a, k, s, p, dilation=d, ceil_mode=cm), [T(x, True)])
    row = x[:, :, 0, :]
    y1, idx1 = F.max_pool1d(T(row), k[1], s[1], p[1], dilation=d[1], ceil_mode=cm, return_indices=True)
    want1, arg1 = direct_dilated_max(row[:, :, None], (1, k[1]), (1, s[1]), (0, p[1]), (1, d[1]), cm)
    np.testing.assert_array_equal(y1._data, want1[:, :, 0])
    np.testing.assert_array_equal(idx1._data, arg1[:, :, 0])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_gpu_dilated_max_pool_matches_reference_and_torch(dtype, poisoned_pool):
    """pool.cu's dilated max pooling (forward, window indices, backward) against the references on random
    configurations, poisoned outputs; in float32 also against PyTorch (values, indices, gradient)."""
    import cupy

    dt = backend.as_dtype(dtype)
    rng = np.random.default_rng(5)
    tol = 1e-2 if dtype in ("float16", "bfloat16") else 1e-6
    for _ in range(30):
        k = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        d = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        s = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        p = (int(rng.integers(0, k[0] // 2 + 1)), int(rng.integers(0, k[1] // 2 + 1)))
        span = ((k[0] - 1) * d[0] + 1, (k[1] - 1) * d[1] + 1)
        shape = (int(rng.integers(1, 4)), int(rng.integers(1, 5)), int(rng.integers(span[0], 20)),
                 int(rng.integers(span[1], 20)))
        cm = bool(rng.random() < 0.3)
        x = ((rng.permutation(int(np.prod(shape))).reshape(shape) % 200 - 100).astype(np.float32) / 8).astype(dt)
        y, idx = K.max_pool2d_forward(cupy.asarray(x), k, s, p, cm, dilation=d)
        yr, idxr = K.max_pool2d_forward_ref(x, k, s, p, cm, dilation=d)
        np.testing.assert_array_equal(cupy.asnumpy(y).astype(np.float64), yr.astype(np.float64))
        np.testing.assert_array_equal(cupy.asnumpy(idx), idxr)
        dy = rng.standard_normal(y.shape).astype(dt)
        dx = K.max_pool2d_backward(cupy.asarray(dy), idx, shape, k, s, p, dilation=d)
        dxr = K.max_pool2d_backward_ref(dy, idxr, shape, k, s, p, dilation=d)
        np.testing.assert_allclose(cupy.asnumpy(dx).astype(np.float64), dxr.astype(np.float64), rtol=tol, atol=tol)
        if dtype == "float32":
            torch = pytest.importorskip("torch")
            xt = torch.tensor(x, device="cuda", requires_grad=True)
            yt, it = torch.nn.functional.max_pool2d(xt, k, s, p, dilation=d, ceil_mode=cm, return_indices=True)
            xm = T(cupy.asarray(x), True, "cuda")
            ym, im = F.max_pool2d(xm, k, s, p, dilation=d, ceil_mode=cm, return_indices=True)
            np.testing.assert_array_equal(cupy.asnumpy(ym._data), yt.detach().cpu().numpy())
            np.testing.assert_array_equal(cupy.asnumpy(im._data), it.cpu().numpy())
            ym.backward(T(cupy.asarray(dy), False, "cuda"))
            yt.backward(torch.tensor(dy, device="cuda"))
            np.testing.assert_allclose(cupy.asnumpy(xm.grad._data), xt.grad.cpu().numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
def test_gpu_matches_torch():
    torch = pytest.importorskip("torch")
    import cupy

    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 11, 10)).astype(np.float32)
    xt = torch.tensor(x, device="cuda", requires_grad=True)
    for kind in ("max", "avg", "avg_divisor"):
        xm = T(cupy.asarray(x), True, "cuda")
        fn = F.max_pool2d if kind == "max" else F.avg_pool2d
        tfn = torch.nn.functional.max_pool2d if kind == "max" else torch.nn.functional.avg_pool2d
        if kind == "avg_divisor":
            y = fn(xm, 3, 2, 1, ceil_mode=True, count_include_pad=False, divisor_override=4)
            yt = tfn(xt, 3, 2, 1, ceil_mode=True, count_include_pad=False, divisor_override=4)
        elif kind == "max":  # with PyTorch's indices
            y, idx = fn(xm, 3, 2, 1, ceil_mode=True, return_indices=True)
            yt, idxt = tfn(xt, 3, 2, 1, ceil_mode=True, return_indices=True)
            assert idx.dtype == np.int64
            np.testing.assert_array_equal(cupy.asnumpy(idx._data), idxt.cpu().numpy())
        else:
            y = fn(xm, 3, 2, 1, ceil_mode=True)
            yt = tfn(xt, 3, 2, 1, ceil_mode=True)
        np.testing.assert_allclose(cupy.asnumpy(y._data), yt.detach().cpu().numpy(), rtol=1e-6)
        y.sum().backward()
        xt.grad = None
        yt.sum().backward()
        np.testing.assert_allclose(cupy.asnumpy(xm.grad._data), xt.grad.cpu().numpy(), rtol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_gpu_max_pool_backward_tiled_windows(dtype, poisoned_pool):
    """Windows that tile the input exactly (kernel == stride, no padding, H = P*kh, W = Q*kw) take
    the one-thread-per-window backward; every input is written (poisoned pool); the shapes that
    leave a remainder take the general kernel."""
    import cupy

    dt = backend.as_dtype(dtype)
    rng = np.random.default_rng(8)
    for shape, k in (((3, 5, 24, 24), (2, 2)), ((2, 3, 12, 9), (3, 3)), ((1, 2, 8, 6), (4, 2)),
                     ((2, 2, 7, 9), (2, 2)), ((1, 1, 1, 1), (1, 1))):
        x = (rng.permutation(int(np.prod(shape))).reshape(shape) % 200 - 100).astype(np.float32) / 8
        x = x.astype(dt)
        y, idx = K.max_pool2d_forward(cupy.asarray(x), k, k, (0, 0))
        _, idxr = K.max_pool2d_forward_ref(x, k, k, (0, 0))
        dy = rng.standard_normal(y.shape).astype(dt)
        dx = K.max_pool2d_backward(cupy.asarray(dy), idx, shape, k, k, (0, 0))
        dxr = K.max_pool2d_backward_ref(dy, idxr, shape, k, k, (0, 0))
        np.testing.assert_array_equal(cupy.asnumpy(dx).astype(np.float64), dxr.astype(np.float64))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_gpu_max_pool_channels_last_vectors(dtype, poisoned_pool):
    """Channels-last max pooling of whole 16-byte channel vectors (maxpool_nhwc_*), random windows with
    padding, strides, dilation, ceil_mode, wide windows (int16 positions) and windows that tile the input (the tiled
    backward): the references' values and positions,
    and the same bits as the one-channel-a-thread kernels, which a misaligned input takes (every output written:
    poisoned pool)."""
    import cupy

    from minifused.kernels import is_channels_last, to_channels_last

    def bits(a):
        return np.ascontiguousarray(cupy.asnumpy(a)).view(np.uint8)

    def misaligned(a):  # a's values, channels-last, one element past a 16-byte boundary
        buf = cupy.empty(a.size + 1, a.dtype)
        out = cupy.ndarray(a.shape, a.dtype, buf.data + a.itemsize, strides=to_channels_last(a).strides)
        out[...] = a
        return out

    dt = backend.as_dtype(dtype)
    vec = 16 // dt.itemsize
    rng = np.random.default_rng(12)
    configs = [((2, 4 * vec, 17, 13), (3, 3), (2, 2), (1, 1), (1, 1), False),
               ((3, vec, 9, 10), (2, 3), (1, 2), (1, 1), (2, 1), True),
               ((1, 2 * vec, 40, 21), (17, 16), (3, 2), (8, 8), (1, 1), True),
               ((2, 3 * vec, 12, 9), (2, 3), (2, 3), (0, 0), (1, 1), False),  # windows tiling the input
               ((1, vec, 34, 32), (17, 16), (17, 16), (0, 0), (1, 1), False)]  # (int16 positions)
    for _ in range(8):
        k = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        d = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
        configs.append(((int(rng.integers(1, 3)), vec * int(rng.integers(1, 4)), int(rng.integers(6, 15)),
                         int(rng.integers(6, 15))), k, (int(rng.integers(1, 3)), int(rng.integers(1, 3))),
                        (int(rng.integers(0, k[0] // 2 + 1)), int(rng.integers(0, k[1] // 2 + 1))), d,
                        bool(rng.random() < 0.3)))
    for shape, k, s, p, d, cm in configs:
        x = (rng.permutation(int(np.prod(shape))).reshape(shape) % 200 - 100).astype(np.float32) / 8
        x = x.astype(dt)
        yr, idxr = K.max_pool2d_forward_ref(x, k, s, p, cm, dilation=d)
        dy = rng.standard_normal(yr.shape).astype(dt)
        dxr = K.max_pool2d_backward_ref(dy, idxr, shape, k, s, p, d)
        runs = []
        for xg in (to_channels_last(cupy.asarray(x)), misaligned(cupy.asarray(x))):
            y, idx = K.max_pool2d_forward(xg, k, s, p, cm, dilation=d)
            dx = K.max_pool2d_backward(misaligned(cupy.asarray(dy)) if len(runs) else to_channels_last(
                cupy.asarray(dy)), idx, shape, k, s, p, d, channels_last=True)
            assert is_channels_last(y) and is_channels_last(dx)
            np.testing.assert_array_equal(cupy.asnumpy(y).astype(np.float64), yr.astype(np.float64))
            np.testing.assert_array_equal(cupy.asnumpy(idx), idxr)
            tol = 1e-2 if dt.itemsize == 2 else 1e-6
            np.testing.assert_allclose(cupy.asnumpy(dx).astype(np.float64), dxr.astype(np.float64), rtol=tol,
                                       atol=tol)
            runs.append((bits(y), bits(idx), bits(dx)))
        for a, b in zip(*runs):
            np.testing.assert_array_equal(a, b)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_gpu_max_pool_row_vectors(dtype, poisoned_pool):
    """C-contiguous max pooling of rows of whole 16-byte vectors (maxpool_rows_fwd: V neighbouring outputs a
    thread; maxpool_rows_bwd: V neighbouring inputs), random windows with padding, strides, dilation, ceil_mode and
    wide windows (int16 positions): the references' values, positions and gradients, and the same bits as the
    one-element-a-thread kernels (every element written: poisoned pool)."""
    import cupy

    dt = backend.as_dtype(dtype)
    vec = 16 // dt.itemsize
    rng = np.random.default_rng(21)
    configs = [((2, 3, 17, 4 * vec), (3, 3), (2, 2), (1, 1), (1, 1), False),  # ResNet's stem window
               ((3, 2, 9, 2 * vec), (2, 3), (1, 2), (1, 1), (2, 1), True),
               ((2, 2, 11, 2 * vec), (2, 2), (2, 2), (0, 0), (1, 1), False),
               ((1, 3, 10, 3 * vec), (3, 3), (1, 1), (1, 1), (1, 1), False),
               ((2, 2, 12, 2 * vec), (3, 3), (1, 1), (2, 2), (2, 2), False),
               ((1, 2, 40, 24), (3, 5), (1, 3), (1, 2), (2, 3), True),
               ((1, 2, 20, 2 * vec), (17, 17), (1, 1), (8, 8), (1, 1), False),  # (int16 positions)
               ((1, 1, 34, 32), (17, 16), (3, 2), (8, 8), (1, 1), True)]
    for _ in range(8):
        k = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        configs.append(((int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(6, 15)),
                         8 * int(rng.integers(1, 4))), k, (int(rng.integers(1, 3)), int(rng.integers(1, 3))),
                        (int(rng.integers(0, k[0] // 2 + 1)), int(rng.integers(0, k[1] // 2 + 1))),
                        (int(rng.integers(1, 3)), int(rng.integers(1, 3))), bool(rng.random() < 0.3)))
    rows_fwd = 0
    for shape, k, s, p, d, cm in configs:
        x = ((rng.permutation(int(np.prod(shape))).reshape(shape) % 200 - 100) / 8).astype(dt)
        yr, idxr = K.max_pool2d_forward_ref(x, k, s, p, cm, dilation=d)
        dy = rng.standard_normal(yr.shape).astype(dt)
        y, idx = K.max_pool2d_forward(cupy.asarray(x), k, s, p, cm, dilation=d)
        np.testing.assert_array_equal(cupy.asnumpy(y).astype(np.float64), yr.astype(np.float64))
        np.testing.assert_array_equal(cupy.asnumpy(idx), idxr)
        dx = K.max_pool2d_backward(cupy.asarray(dy), idx, shape, k, s, p, d)
        tol = 1e-2 if dt.itemsize == 2 else 1e-6
        np.testing.assert_allclose(cupy.asnumpy(dx).astype(np.float64),
                                   K.max_pool2d_backward_ref(dy, idxr, shape, k, s, p, d).astype(np.float64),
                                   rtol=tol, atol=tol)
        n, c, h, w = shape
        window = (*k, *s, *p, *d)
        scalar_y, scalar_idx = cupy.full(yr.shape, np.nan, dt), cupy.full(yr.shape, 7, idx.dtype)
        K._launch(dt, "maxpool_fwd", y.size, (cupy.asarray(x), scalar_y, scalar_idx),
                  (n * c, c, h, w, *yr.shape[2:], *window, 1, 0), idx.dtype)
        scalar_dx = cupy.full(shape, np.nan, dt)
        K._launch(dt, "maxpool_bwd", dx.size, (cupy.asarray(dy), idx, scalar_dx),
                  (n * c, c, h, w, *yr.shape[2:], *window, 0), idx.dtype)
        for ours, theirs in ((y, scalar_y), (idx, scalar_idx), (dx, scalar_dx)):
            np.testing.assert_array_equal(cupy.asnumpy(ours).view(np.uint8), cupy.asnumpy(theirs).view(np.uint8))
        rows_fwd += yr.shape[3] % vec == 0
    assert rows_fwd >= 5  # (the row-vector forward ran)


@pytest.mark.gpu
@pytest.mark.parametrize("k,s,p,cm", [((17, 16), (3, 2), (8, 8), True), ((16, 16), (16, 16), (0, 0), False),
                                      ((1, 1), (1, 1), (0, 0), False)])
def test_gpu_wide_windows_int16_indices(k, s, p, cm, poisoned_pool):
    """Windows of more than 256 positions store int16 positions (and the 1x1 window uint8), through
    the general and the tiled backward alike."""
    import cupy

    rng = np.random.default_rng(5)
    shape = (2, 3, 32, 32)
    x = (rng.permutation(int(np.prod(shape))).reshape(shape) / 7.0).astype(np.float32)
    y, idx = K.max_pool2d_forward(cupy.asarray(x), k, s, p, cm)
    yr, idxr = K.max_pool2d_forward_ref(x, k, s, p, cm)
    assert idx.dtype == idxr.dtype == K.index_dtype(k)
    np.testing.assert_array_equal(cupy.asnumpy(y), yr)
    np.testing.assert_array_equal(cupy.asnumpy(idx), idxr)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    dx = K.max_pool2d_backward(cupy.asarray(dy), idx, shape, k, s, p)
    # (overlapping windows add in another order than the reference's: a few float32 roundings apart)
    np.testing.assert_allclose(cupy.asnumpy(dx), K.max_pool2d_backward_ref(dy, idxr, shape, k, s, p), rtol=1e-6,
                               atol=1e-6)


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_empty_batch(kind, device):
    """Batch 0 gives an empty output and an empty input gradient, as in PyTorch (the max-pool
    reference crashed on it)."""
    x = mf.zeros(0, 3, 8, 8, device=device, requires_grad=True)
    y = (F.max_pool2d if kind == "max" else F.avg_pool2d)(x, 2)
    assert y.shape == (0, 3, 4, 4)
    y.sum().backward()
    assert x.grad.shape == (0, 3, 8, 8)


def direct_max_nd(x, k, s, p, d):
    """Max pooling over the last len(k) dimensions by loops, with PyTorch's scan: a tap inside the input replaces
    the pick when it is larger, a NaN, or the window's first real tap (so a window of -inf picks its first real
    pixel, never the padding). (values, flat indices over those dimensions)."""
    import itertools

    dims = x.shape[-len(k):]
    out = [(n + 2 * pp - dd * (kk - 1) - 1) // ss + 1 for n, kk, ss, pp, dd in zip(dims, k, s, p, d)]
    lead = x.shape[:-len(k)]
    y, arg = np.full(lead + tuple(out), np.nan), np.full(lead + tuple(out), -1, np.int64)
    for li in itertools.product(*map(range, lead)):
        for o in itertools.product(*map(range, out)):
            for t in itertools.product(*map(range, k)):
                pos = [oo * ss - pp + tt * dd for oo, ss, pp, tt, dd in zip(o, s, p, t, d)]
                if not all(0 <= q < n for q, n in zip(pos, dims)):
                    continue
                v = x[li + tuple(pos)]
                if arg[li + o] < 0 or v > y[li + o] or np.isnan(v):
                    y[li + o], arg[li + o] = v, np.ravel_multi_index(pos, dims)
    return y, arg


@pytest.mark.parametrize("case", [  # kernel, stride, padding, dilation over 1, 2 and 3 dimensions
    ((3,), (1,), (1,), (1,)), ((3, 3), (1, 1), (1, 1), (1, 1)), ((3, 2), (2, 1), (1, 1), (2, 1)),
    ((3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1)), ((3, 2, 3), (2, 1, 2), (1, 1, 1), (2, 1, 1))])
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_max_pool_windows_of_minus_inf_pick_their_first_pixel(case, device, rng):
    """Windows whose real pixels are all -inf (masked features) next to the padding: the value -inf, the index of
    the window's first real pixel and the gradient there, as PyTorch's (not an index into the padding); on the
    NumPy path and on the CUDA kernels."""
    k, s, p, d = case
    shape = (2, 2) + (7, 6, 5)[:len(k)]
    x = rng.standard_normal(shape)
    x[(slice(None), slice(None)) + tuple(slice(0, n // 2) for n in shape[2:])] = -np.inf
    x[0, 0] = -np.inf
    want_y, want_idx = direct_max_nd(x, k, s, p, d)
    fn = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[len(k)]
    xt = T(x, True, device)
    y, idx = fn(xt, k, s, p, dilation=d, return_indices=True)
    np.testing.assert_array_equal(y.cpu().numpy(), want_y)
    np.testing.assert_array_equal(idx.cpu().numpy(), want_idx)
    dy = rng.standard_normal(y.shape)
    (y * T(dy, device=device)).sum().backward()
    dx = np.zeros((4, x[0, 0].size))
    np.add.at(dx, (np.repeat(np.arange(4), dy[0, 0].size), want_idx.ravel()), dy.ravel())
    np.testing.assert_allclose(xt.grad.cpu().numpy(), dx.reshape(shape))


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_max_unpool_output_size_strictly_within_a_stride(dims, rng):
    """PyTorch's rule: output_size (the spatial sizes, or the whole shape) lies strictly within a stride of the
    default size; inside it, each value lands at its flat index of the bigger output; at or past the bounds, a
    ValueError names them (before, an output larger than the bounds came back with its values misplaced)."""
    pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[dims]
    unpool = {1: F.max_unpool1d, 2: F.max_unpool2d, 3: F.max_unpool3d}[dims]
    shape = (2, 3) + (8,) * dims
    y, idx = pool(T(rng.standard_normal(shape)), 2, return_indices=True)  # default output: 8, bounds (6, 10)
    for size in (9,):  # (at 7 the pooled indices would not fit: an invalid index, as in PyTorch)
        out = unpool(y, idx, 2, output_size=(size,) * dims).numpy()
        want = np.zeros((6, size ** dims))
        np.put_along_axis(want, idx.numpy().reshape(6, -1), y.numpy().reshape(6, -1), axis=1)
        np.testing.assert_array_equal(out, want.reshape((2, 3) + (size,) * dims))
    np.testing.assert_array_equal(unpool(y, idx, 2, output_size=(2, 3) + (9,) * dims).shape, (2, 3) + (9,) * dims)
    for size in (6, 10, 12):
        with pytest.raises(ValueError, match=r"invalid output_size .* must be between 6 and 10"):
            unpool(y, idx, 2, output_size=(size,) * dims)


def test_int_arguments_as_pytorch_takes_them(rng):
    """A 1-tuple stands for every dimension and NumPy integers are ints (PyTorch takes both); a float is an
    error."""
    x = T(rng.standard_normal((2, 4, 9, 8)).astype(np.float32))
    w = T(rng.standard_normal((5, 4, 3, 3)).astype(np.float32))
    np.testing.assert_array_equal(F.conv2d(x, w, stride=(2,), padding=(1,)).numpy(),
                                  F.conv2d(x, w, stride=2, padding=1).numpy())
    np.testing.assert_array_equal(nn.MaxPool2d((2,))(x).numpy(), F.max_pool2d(x, 2).numpy())
    np.testing.assert_array_equal(nn.AvgPool2d(np.int64(3))(x).numpy(), F.avg_pool2d(x, 3).numpy())
    assert nn.Conv2d(4, 5, np.int64(3), stride=(2,))(x).shape == (2, 5, 4, 3)
    with pytest.raises(TypeError, match="kernel_size"):
        F.max_pool2d(x, 2.0)


def test_pool_and_conv1d_reprs_as_pytorch():
    assert repr(nn.Unflatten(1, [2, -1])) == "Unflatten(dim=1, unflattened_size=[2, -1])"
    assert repr(nn.Unflatten(1, (2, -1))) == "Unflatten(dim=1, unflattened_size=(2, -1))"
    assert nn.Unflatten(1, [2, -1])(T(np.zeros((3, 8)))).shape == (3, 2, 4)
    assert repr(nn.AvgPool1d(3)) == "AvgPool1d(kernel_size=(3,), stride=(3,), padding=(0,))"
    assert repr(nn.MaxUnpool2d(2)) == "MaxUnpool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))"
    assert repr(nn.MaxUnpool2d((2, 3), (2, 1))) == "MaxUnpool2d(kernel_size=(2, 3), stride=(2, 1), padding=(0, 0))"
    assert repr(nn.Conv1d(4, 6, 3, padding=1, bias=False, padding_mode="replicate")) == (
        "Conv1d(4, 6, kernel_size=(3,), stride=(1,), padding=(1,), bias=False, padding_mode=replicate)")


def test_max_pool2d_indices_of_a_channels_last_input_are_channels_last(rng):
    """PyTorch returns max_pool2d's indices in the output's layout: channels-last for a channels-last input; their
    values are the contiguous run's (flat positions h*W + w in each plane)."""
    x = rng.standard_normal((2, 3, 7, 8))
    y0, i0 = F.max_pool2d(mf.tensor(x), 3, 2, 1, return_indices=True)
    y, idx = F.max_pool2d(mf.tensor(x).to(memory_format=mf.channels_last), 3, 2, 1, return_indices=True)
    assert y.is_contiguous(memory_format=mf.channels_last) and not y.is_contiguous()
    assert idx.is_contiguous(memory_format=mf.channels_last) and not idx.is_contiguous()
    assert i0.is_contiguous() and idx.dtype == mf.int64
    np.testing.assert_array_equal(idx.numpy(), i0.numpy())
    np.testing.assert_array_equal(np.take_along_axis(x.reshape(2, 3, -1), idx.numpy().reshape(2, 3, -1), 2),
                                  y.numpy().reshape(2, 3, -1))


@pytest.mark.parametrize("fn,shape", [(F.max_pool2d, (1, 0, 4, 4)), (F.max_pool2d, (0, 4, 4)), (F.avg_pool2d, (2, 3, 0, 4)),
                                      (F.max_pool1d, (1, 0, 4)), (F.avg_pool1d, (0, 4)), (F.avg_pool1d, (2, 3, 0)),
                                      (F.lp_pool2d, (1, 0, 4, 4)), (F.lp_pool1d, (0, 4))])
def test_empty_channel_or_spatial_dimension_is_an_error(fn, shape):
    """PyTorch's 1-D and 2-D pools take an empty batch only: an empty channel or spatial dimension is a
    RuntimeError naming the op, not an empty result."""
    args = (2, 2) if fn in (F.lp_pool2d, F.lp_pool1d) else (1,)
    with pytest.raises(RuntimeError, match=fn.__name__):
        fn(mf.tensor(np.ones(shape)), *args)
    spatial = 2 if fn in (F.max_pool2d, F.avg_pool2d, F.lp_pool2d) else 1
    y = fn(mf.tensor(np.ones((0, 2) + (4,) * spatial)), *args)  # (an empty batch is fine)
    assert tuple(y.shape) == (0, 2) + ((4 // args[-1]),) * spatial



@pytest.mark.parametrize("output_size", [None, (7, 7)])
def test_max_unpool2d_of_a_channels_last_input_is_channels_last(output_size, rng):
    """PyTorch's max_unpool2d gives its output the input's layout (the indices' layout does not matter); the values
    are the contiguous run's: each pooled value back at its index, zeros elsewhere."""
    x = rng.standard_normal((2, 3, 6, 6))
    y, idx = F.max_pool2d(mf.tensor(x), 2, return_indices=True)
    out0 = F.max_unpool2d(y, idx, 2, output_size=output_size)
    out = F.max_unpool2d(y.contiguous(memory_format=mf.channels_last), idx, 2, output_size=output_size)
    assert out0.is_contiguous() and out.is_contiguous(memory_format=mf.channels_last) and not out.is_contiguous()
    h, w = output_size or (6, 6)
    want = np.zeros((2, 3, h * w))
    np.put_along_axis(want, idx.numpy().reshape(2, 3, -1), y.numpy().reshape(2, 3, -1), 2)
    np.testing.assert_array_equal(out.numpy(), want.reshape(2, 3, h, w))
    np.testing.assert_array_equal(out0.numpy(), want.reshape(2, 3, h, w))


def test_one_element_integer_tensors_as_int_arguments(rng):
    """PyTorch's int and int-tuple arguments take one-element integer tensors (sizes computed as tensors): a
    kernel size, a stride, a padding, divisor_override, conv's groups; lp_pool2d takes an empty stride as none.
    The results are those of the plain ints."""
    x = mf.tensor(rng.standard_normal((1, 4, 6, 6)))
    two, three = mf.tensor(2), mf.tensor(3)
    np.testing.assert_array_equal(F.max_pool2d(x, (two, 3), stride=[two], padding=mf.tensor(1)).numpy(),
                                  F.max_pool2d(x, (2, 3), stride=2, padding=1).numpy())
    np.testing.assert_allclose(F.avg_pool2d(x, two, divisor_override=three).numpy(),
                               F.avg_pool2d(x, 2).numpy() * 4 / 3, rtol=1e-12)
    np.testing.assert_array_equal(F.max_pool1d(x[0], three, two).numpy(), F.max_pool1d(x[0], 3, 2).numpy())
    w = mf.tensor(rng.standard_normal((2, 2, 3, 3)))
    np.testing.assert_array_equal(F.conv2d(x, w, groups=two, stride=(two, 1)).numpy(),
                                  F.conv2d(x, w, groups=2, stride=(2, 1)).numpy())
    np.testing.assert_array_equal(F.conv1d(x[0, :, 0], w[:, :, 0], groups=two).numpy(),
                                  F.conv1d(x[0, :, 0], w[:, :, 0], groups=2).numpy())
    np.testing.assert_array_equal(F.lp_pool2d(x, 2, 3, []).numpy(), F.lp_pool2d(x, 2, 3).numpy())
    with pytest.raises(TypeError, match="max_pool2d: kernel_size"):
        F.max_pool2d(x, mf.tensor(2.0))  # (a floating tensor is no int, as there)
    y = F.max_pool3d(x[None], (1, two, two), stride=[1, two, 2])
    np.testing.assert_array_equal(y.numpy(), F.max_pool3d(x[None], (1, 2, 2)).numpy())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_gpu_avg_pool_tiled_windows_either_layout(dtype, poisoned_pool):
    """Windows that tile the input exactly (global pooling among them) take avgpool_tiled_*, channels-last in
    place: the same bits as the general kernels in either layout (the same sums in the same order; the backward
    writes every input: poisoned pool), the layout kept, and the references' values; divisor_override too."""
    import cupy

    from minifused.kernels import empty_channels_last, is_channels_last

    def bits(a):
        return np.ascontiguousarray(cupy.asnumpy(a)).view(np.uint8)

    dt = backend.as_dtype(dtype)
    rng = np.random.default_rng(11)
    tol = 1e-2 if dt.itemsize == 2 else 1e-6
    for shape, k, divisor in (((3, 5, 4, 4), (4, 4), 0), ((2, 16, 12, 9), (3, 3), 0), ((2, 24, 8, 6), (4, 2), 5),
                              ((1, 8, 7, 7), (7, 7), 0), ((2, 3, 1, 1), (1, 1), 0)):
        x = rng.standard_normal(shape).astype(dt)
        n, c, h, w = shape
        p, q = h // k[0], w // k[1]
        dy = rng.standard_normal((n, c, p, q)).astype(dt)
        general_y = cupy.ndarray((n, c, p, q), dt)  # avgpool_fwd / avgpool_bwd, C-contiguous, for the bits
        K._launch(dt, "avgpool_fwd", general_y.size, (cupy.asarray(x), general_y),
                  (n * c, h, w, p, q, *k, *k, 0, 0, 1, divisor))
        general_dx = cupy.ndarray(shape, dt)
        K._launch(dt, "avgpool_bwd", general_dx.size, (cupy.asarray(dy), general_dx),
                  (n * c, h, w, p, q, *k, *k, 0, 0, 1, divisor))
        np.testing.assert_allclose(cupy.asnumpy(general_y).astype(np.float64),
                                   K.avg_pool2d_forward_ref(x, k, k, (0, 0), False, True, divisor).astype(np.float64),
                                   rtol=tol, atol=tol)
        np.testing.assert_array_equal(cupy.asnumpy(general_dx).astype(np.float64),
                                      K.avg_pool2d_backward_ref(dy, shape, k, k, (0, 0), True, divisor)
                                      .astype(np.float64))
        for cl in (False, True):
            xg = cupy.asarray(x)
            if cl:
                xg_cl = empty_channels_last(shape, dt)
                xg_cl[...] = xg
                xg = xg_cl
            y = K.avg_pool2d_forward(xg, k, k, (0, 0), False, True, divisor)
            dx = K.avg_pool2d_backward(cupy.asarray(dy), shape, k, k, (0, 0), True, divisor, channels_last=cl)
            assert is_channels_last(y) == (cl and p * q > 1 and c > 1)
            assert is_channels_last(dx) == (cl and h * w > 1 and c > 1)
            np.testing.assert_array_equal(bits(y), bits(general_y))
            np.testing.assert_array_equal(bits(dx), bits(general_dx))



@pytest.mark.parametrize("fn,shape,size", [(F.adaptive_avg_pool1d, (2, 3, 5), None),
                                           (F.adaptive_max_pool1d, (2, 3, 5), None),
                                           (F.adaptive_avg_pool1d, (2, 3, 5), (None,)),
                                           (F.adaptive_max_pool1d, (2, 3, 5), (None,)),
                                           (F.adaptive_avg_pool2d, (2, 3, 4, 5), None),
                                           (F.adaptive_max_pool2d, (2, 3, 4, 5), None),
                                           (F.adaptive_avg_pool3d, (2, 3, 4, 5, 6), None),
                                           (F.adaptive_max_pool3d, (2, 3, 4, 5, 6), None)])
def test_adaptive_pool_output_size_none_is_a_type_error(fn, shape, size):
    # PyTorch 2.13: None keeps one dimension of a 2-D or 3-D output_size tuple; a bare None, or a None in the
    # 1-D forms, is a TypeError (it was taken as the input's own size)
    with pytest.raises(TypeError, match="output_size"):
        fn(mf.zeros(shape), size)
    if len(shape) > 3:
        keep = (None,) * (len(shape) - 3) + (2,)
        assert fn(mf.zeros(shape), keep).shape == shape[:-1] + (2,)


@pytest.mark.parametrize("fn,shape", [(F.lp_pool1d, (2, 3, 6)), (F.lp_pool2d, (2, 3, 4, 4)),
                                      (F.lp_pool3d, (2, 3, 4, 4, 4))])
def test_lp_pool_norm_type_zero_is_a_zero_division_error(fn, shape):
    # PyTorch 2.13: "float division by zero" (its root 1/p), a ZeroDivisionError
    with pytest.raises(ZeroDivisionError, match="norm_type"):
        fn(mf.ones(shape), 0, 2)


def test_adaptive_pool_output_size_as_integer_tensors():
    # PyTorch 2.13: the 2-D and 3-D forms take a 1-D integer tensor as the sizes, and refuse a 0-d one ("len() of
    # a 0-d tensor", a TypeError); the 1-D forms take either
    x = mf.zeros((2, 3, 6, 6, 6))
    assert F.adaptive_avg_pool2d(x[0], mf.tensor([3, 2])).shape == (3, 6, 3, 2)
    assert F.adaptive_max_pool2d(x[0], mf.tensor([3, 2])).shape == (3, 6, 3, 2)
    assert F.adaptive_avg_pool3d(x, mf.tensor([3, 2, 1])).shape == (2, 3, 3, 2, 1)
    assert F.adaptive_max_pool1d(x[0, 0], mf.tensor(3)).shape == (6, 6, 3)
    assert F.adaptive_avg_pool1d(x[0, 0], mf.tensor([3])).shape == (6, 6, 3)
    for fn, inp in ((F.adaptive_avg_pool2d, x[0]), (F.adaptive_max_pool2d, x[0]), (F.adaptive_avg_pool3d, x),
                    (F.adaptive_max_pool3d, x)):
        with pytest.raises(TypeError, match="0-d tensor"):
            fn(inp, mf.tensor(3))
    with pytest.raises(RuntimeError, match="output_size"):
        F.adaptive_avg_pool2d(x[0], mf.tensor([3]))
