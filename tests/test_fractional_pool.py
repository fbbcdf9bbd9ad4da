"""F.fractional_max_pool3d(_with_indices) / nn.FractionalMaxPool3d: windows, values and indices against
PyTorch 2.14's for fixed samples and against ATen's loop (tests/opinfo.py's reference), gradients, the drawn
samples, the errors and the module; the cuda path against the cpu one. (The 2-D form: tests/test_nn_misc.py.)"""
import math

import numpy as np
import pytest
from opinfo import fractional_max_pool3d_ref

import minifused as mf
import minifused.functional as F
from minifused import nn
from minifused.autograd import gradcheck


def t64(a, **kw):
    return mf.tensor(np.asarray(a, np.float64), **kw)


# x: ((arange(420) * 37) % 23 - 11) / 4 as (1, 2, 5, 6, 7) float32; samples (u_T, u_H, u_W) per plane
_X = (((np.arange(2 * 5 * 6 * 7) * 37) % 23 - 11) / 4.0).astype(np.float32).reshape(1, 2, 5, 6, 7)
_S = np.array([[[0.25, 0.75, 0.5], [0.9, 0.1, 0.3]]], np.float32)
# torch.nn.functional.fractional_max_pool3d(x, (2, 3, 2), output_size=(3, 3, 4), return_indices=True,
# _random_samples=s) with PyTorch 2.14 on the CPU
_TORCH_IDX = [[[[[8, 59, 18, 13], [64, 59, 18, 13], [64, 31, 82, 41]],
                [[49, 87, 54, 54], [64, 59, 110, 110], [64, 72, 110, 110]],
                [[133, 128, 179, 174], [133, 192, 179, 146], [197, 156, 151, 202]]],
               [[[15, 10, 10, 61], [15, 10, 10, 61], [28, 38, 38, 33]],
                [[84, 51, 102, 61], [56, 107, 102, 61], [120, 107, 74, 125]],
                [[176, 171, 130, 138], [176, 143, 143, 153], [148, 199, 199, 153]]]]]
_TORCH_OUT_FIRST_ROWS = [[2.25, 2.5, 2.75, 2.5], [2.75, 2.5, 2.75, 2.5], [2.75, 2.25, 2.5, 2.75]]


def test_matches_pytorch():
    out, idx = F.fractional_max_pool3d(mf.tensor(_X), (2, 3, 2), output_size=(3, 3, 4), return_indices=True,
                                       _random_samples=mf.tensor(_S))
    assert out.dtype == mf.float32 and idx.dtype == mf.int64 and tuple(out.shape) == (1, 2, 3, 3, 4)
    np.testing.assert_array_equal(idx.numpy(), _TORCH_IDX)
    np.testing.assert_array_equal(out.numpy()[0, 0, 0], _TORCH_OUT_FIRST_ROWS)
    np.testing.assert_array_equal(out.numpy(), np.take_along_axis(_X.reshape(1, 2, -1), idx.numpy().reshape(1, 2, -1),
                                                                  2).reshape(out.shape))
    same, same_idx = F.fractional_max_pool3d_with_indices(mf.tensor(_X), (2, 3, 2), (3, 3, 4),
                                                          _random_samples=mf.tensor(_S))
    np.testing.assert_array_equal(same_idx.numpy(), _TORCH_IDX)


def test_nan_takes_the_last():
    x = np.zeros((1, 1, 3, 3, 3), np.float32)
    x[0, 0, 0, 1, 1] = x[0, 0, 0, 2, 2] = math.nan
    x[0, 0, 0, 1, 2], x[0, 0, 2, 1, 1], x[0, 0, 2, 2, 2] = 7, 4, 4
    out, idx = F.fractional_max_pool3d(mf.tensor(x), (1, 2, 2), output_size=(2, 1, 1), return_indices=True,
                                       _random_samples=mf.tensor(np.full((1, 1, 3), 0.5, np.float32)))
    # PyTorch 2.14 CPU: indices [8, 22], values [nan, 4]
    np.testing.assert_array_equal(idx.numpy().ravel(), [8, 22])
    np.testing.assert_array_equal(out.numpy().ravel(), [np.nan, 4])


@pytest.mark.parametrize("shape,k,out", [((2, 3, 7, 6, 9), (3, 2, 2), (4, 4, 5)), ((1, 2, 5, 5, 5), 2, 3),
                                         ((2, 1, 3, 8, 4), (1, 4, 1), (2, 1, 3)), ((1, 1, 5, 5, 5), 4, 1)])
def test_matches_reference(shape, k, out):
    rng = np.random.default_rng(1)
    x = np.round(rng.standard_normal(shape) * 2) / 2  # ties: the first maximum wins
    x.ravel()[rng.integers(0, x.size, 2)] = np.nan
    s = rng.random(shape[:2] + (3,))
    s[0, 0] = (0.0, 0.9999999, 0.5)
    got, idx = F.fractional_max_pool3d(t64(x), k, out, return_indices=True, _random_samples=t64(s))
    kernel = k if isinstance(k, tuple) else (k,) * 3
    want, want_idx = fractional_max_pool3d_ref(x, kernel, out if isinstance(out, tuple) else (out,) * 3, s)
    np.testing.assert_array_equal(idx.numpy(), want_idx)
    np.testing.assert_array_equal(got.numpy(), want)


def test_unbatched_and_ratio():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 8, 10, 7))
    s = rng.random((1, 3, 3))
    out, idx = F.fractional_max_pool3d(t64(x), 2, output_ratio=(0.5, 0.5, 0.6), return_indices=True,
                                       _random_samples=t64(s))
    assert tuple(out.shape) == tuple(idx.shape) == (3, 4, 5, 4)  # int(size * ratio), as PyTorch
    want, want_idx = fractional_max_pool3d_ref(x[None], (2, 2, 2), (4, 5, 4), s)
    np.testing.assert_array_equal(idx.numpy(), want_idx[0])
    np.testing.assert_array_equal(out.numpy(), want[0])


def test_gradient():
    rng = np.random.default_rng(2)
    x = rng.permutation(2 * 2 * 5 * 6 * 4).reshape(2, 2, 5, 6, 4) / 10.0  # distinct: max is differentiable
    s = t64(rng.random((2, 2, 3)))
    xt = t64(x, requires_grad=True)
    assert gradcheck(lambda a: F.fractional_max_pool3d(a, (2, 3, 2), (3, 3, 2), _random_samples=s), (xt,))
    # each output's gradient lands at its index (PyTorch's backward), overlaps summed
    out, idx = F.fractional_max_pool3d(xt, (2, 3, 2), (3, 3, 2), return_indices=True, _random_samples=s)
    g = rng.standard_normal(out.shape)
    out.backward(t64(g))
    want = np.zeros((2, 2, 120))
    for b in range(2):
        for p in range(2):
            np.add.at(want[b, p], idx.numpy()[b, p].ravel(), g[b, p].ravel())
    np.testing.assert_allclose(xt.grad.numpy(), want.reshape(x.shape), rtol=0, atol=1e-15)


def test_draws_from_the_generator():
    x = mf.randn(2, 3, 6, 7, 8)
    mf.manual_seed(5)
    a, ia = F.fractional_max_pool3d(x, 2, output_size=(3, 4, 5), return_indices=True)
    mf.manual_seed(5)
    s = mf.rand(2, 3, 3)  # PyTorch's draw: rand(N, C, 3) of the input's dtype and device
    b, ib = F.fractional_max_pool3d(x, 2, output_size=(3, 4, 5), return_indices=True, _random_samples=s)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(ia.numpy(), ib.numpy())


def test_errors():
    x = mf.randn(2, 3, 6, 7, 8)
    with pytest.raises(ValueError, match="either an output_size or an output_ratio"):
        F.fractional_max_pool3d(x, 2)
    # PyTorch checks o + k - 1 < size in 3-D (<= in 2-D), time first, then width, then height
    with pytest.raises(RuntimeError, match="pool time 2 too large relative to input time 6"):
        F.fractional_max_pool3d(x, 2, output_size=(5, 3, 3))
    with pytest.raises(RuntimeError, match="pool width 2 too large relative to input width 8"):
        F.fractional_max_pool3d(x, 2, output_size=(3, 6, 7))
    with pytest.raises(RuntimeError, match="pool height 3 too large relative to input height 7"):
        F.fractional_max_pool3d(x, 3, output_size=(3, 5, 3))
    with pytest.raises(RuntimeError, match="kernel size should be greater than zero, but got 0x0x0"):
        F.fractional_max_pool3d(x, 0, output_size=2)
    with pytest.raises(RuntimeError, match="kernel_size must either be a single Int or tuple of three Ints"):
        F.fractional_max_pool3d(x, (2, 2), output_size=2)
    with pytest.raises(RuntimeError, match="output_size must either be a single Int or tuple of three Ints"):
        F.fractional_max_pool3d(x, 2, output_size=(2, 2))
    with pytest.raises(RuntimeError, match="Expected 4D or 5D tensor"):
        F.fractional_max_pool3d(x[0, 0], 2, output_size=2)
    with pytest.raises(RuntimeError, match="non-zero size for non-batch dimensions"):
        F.fractional_max_pool3d(x[:, :, :0], 2, output_size=2)
    with pytest.raises(RuntimeError, match=r"size\(2\) equals to 3"):
        F.fractional_max_pool3d(x, 2, output_size=2, _random_samples=mf.rand(2, 3, 2))
    with pytest.raises(RuntimeError, match="no less then input batch size"):
        F.fractional_max_pool3d(x, 2, output_size=2, _random_samples=mf.rand(1, 3, 3))
    with pytest.raises(RuntimeError, match="same dtype as input"):
        F.fractional_max_pool3d(x, 2, output_size=2, _random_samples=mf.rand(2, 3, 3, dtype=mf.float64))
    with pytest.raises(TypeError, match="floating-point"):
        F.fractional_max_pool3d(mf.ones((1, 1, 4, 4, 4), dtype=mf.int64), 2, output_size=2)
    assert tuple(F.fractional_max_pool3d(x[:0], 2, output_size=3).shape) == (0, 3, 3, 3, 3)
    assert tuple(F.fractional_max_pool3d(x, 2, output_size=(0, 3, 3)).shape) == (2, 3, 0, 3, 3)


def test_module():
    s = mf.tensor(_S)
    m = nn.FractionalMaxPool3d((2, 3, 2), output_size=(3, 3, 4), return_indices=True, _random_samples=s)
    assert repr(m) == "FractionalMaxPool3d()"  # as PyTorch's (no extra_repr)
    assert list(m.state_dict()) == ["_random_samples"] and m.kernel_size == (2, 3, 2) and m.output_size == (3, 3, 4)
    out, idx = m(mf.tensor(_X))
    np.testing.assert_array_equal(idx.numpy(), _TORCH_IDX)
    r = nn.FractionalMaxPool3d(2, output_ratio=0.5)
    assert r.kernel_size == (2, 2, 2) and r.output_ratio == (0.5, 0.5, 0.5) and r.output_size is None
    assert list(r.state_dict()) == [] and tuple(r(mf.randn(2, 3, 8, 10, 12)).shape) == (2, 3, 4, 5, 6)
    with pytest.raises(ValueError, match="FractionalMaxPool3d requires specifying either an output size"):
        nn.FractionalMaxPool3d(3)
    with pytest.raises(ValueError, match="only one of output_size and output_ratio"):
        nn.FractionalMaxPool3d(3, output_size=3, output_ratio=0.5)
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.FractionalMaxPool3d(3, output_ratio=1.0)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_cuda_matches_cpu(dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 7, 9, 8)).astype(dtype)
    s = rng.random((2, 3, 3)).astype(dtype)
    # PyTorch's CUDA kernel computes a half input's window sequence in float32: the float32 cpu run is the reference
    ref = "float32" if dtype == "float16" else dtype
    cpu_out, cpu_idx = F.fractional_max_pool3d(mf.tensor(x.astype(ref), device="cpu"), (3, 2, 2), (4, 6, 5),
                                               return_indices=True,
                                               _random_samples=mf.tensor(s.astype(ref), device="cpu"))
    xg = mf.tensor(x).to("cuda").requires_grad_(dtype == "float32")
    out, idx = F.fractional_max_pool3d(xg, (3, 2, 2), (4, 6, 5), return_indices=True,
                                       _random_samples=mf.tensor(s).to("cuda"))
    np.testing.assert_array_equal(idx.cpu().numpy(), cpu_idx.numpy())
    np.testing.assert_array_equal(out.cpu().numpy().astype(ref), cpu_out.numpy())
    if dtype == "float32":
        out.sum().backward()
        want = np.zeros((2, 3, 7 * 9 * 8), np.float32)
        for b in range(2):
            for p in range(3):
                np.add.at(want[b, p], cpu_idx.numpy()[b, p].ravel(), 1.0)
        np.testing.assert_array_equal(xg.grad.cpu().numpy(), want.reshape(x.shape))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cuda_matches_pytorch(torch, dtype):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 7, 9, 8)).astype(dtype)
    s = rng.random((2, 3, 3)).astype(dtype)
    out, idx = F.fractional_max_pool3d(mf.tensor(x, device="cuda"), (3, 2, 2), (4, 6, 5), return_indices=True,
                                       _random_samples=mf.tensor(s, device="cuda"))
    t_out, t_idx = torch.nn.functional.fractional_max_pool3d(
        torch.tensor(x, device="cuda"), (3, 2, 2), (4, 6, 5), return_indices=True,
        _random_samples=torch.tensor(s, device="cuda"))
    np.testing.assert_array_equal(idx.cpu().numpy(), t_idx.cpu().numpy())
    np.testing.assert_array_equal(out.cpu().numpy(), t_out.cpu().numpy())



class _DeviceLike(np.ndarray):
    """A NumPy array that refuses to be truth-tested, as a CuPy one would only by waiting for the GPU."""

    def __bool__(self):
        raise AssertionError("the window argmax waited for the device (truth-tested an array)")


def test_window_argmax_never_waits_for_the_device():
    from minifused.functional.fractional_pool import _window_argmax

    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(1, 2, 3, 4)
    x[0, 1, 0, 1] = math.nan
    starts = [np.array([[[0, 1]]] * 2).reshape(1, 2, 2), np.array([[[0, 2]]] * 2).reshape(1, 2, 2)]
    idx = _window_argmax(np, x.view(_DeviceLike), [s.view(_DeviceLike) for s in starts], (2, 2))
    # windows rows {0,1} / {1,2} x cols {0,1} / {2,3}: the bottom-right of each, the NaN where it is one
    np.testing.assert_array_equal(np.asarray(idx), [[[[5, 7], [9, 11]], [[1, 7], [9, 11]]]])
