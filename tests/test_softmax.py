"""Softmax / LogSoftmax: references against float64, gradients against finite differences,
extreme rows (+-1e4, -inf, all equal, all -inf = NaN as PyTorch), the kernels on a GPU."""
import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
import minifused.nn as nn
from minifused.kernels import softmax as K
from minifused.testing import gradcheck

from tolerances import DTYPES, TOL, cpu, rel_err  # noqa: E402

NINF = -np.inf


def softmax64(x, log=False):
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = x.max(-1, keepdims=True)
        e = np.exp(x - m)
        s = e.sum(-1, keepdims=True)
        return (x - m - np.log(s)) if log else e / s


def extreme_rows(n, dtype):
    big = 1e4
    rows = np.array([
        np.where(np.arange(n) % 2, big, -big),   # +-1e4
        np.full(n, 3.0),                           # all equal
        np.where(np.arange(n) % 3 == 0, NINF, np.linspace(-2, 2, n)),  # some -inf
        np.full(n, NINF),                          # all -inf -> NaN
    ])
    if n > 1:
        rows[2, 1] = 1.0  # at least one finite entry
    return rows.astype(dtype)


# ---------------------------------------------------------------- references (cpu)
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dtype", DTYPES + [np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (5, 7), (9, 1000)])
def test_reference_matches_float64(shape, dtype, log, rng):
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    y = K.softmax_forward_ref(x, log)
    assert y.dtype == np.dtype(dtype)
    assert rel_err(y, softmax64(x, log)) < TOL[np.dtype(dtype)] * 2
    dy = rng.standard_normal(shape).astype(dtype)
    p = softmax64(x)
    dy64 = dy.astype(np.float64)
    ref = dy64 - p * dy64.sum(-1, keepdims=True) if log else p * (dy64 - (dy64 * p).sum(-1, keepdims=True))
    assert rel_err(K.softmax_backward_ref(dy, y, log), ref) < TOL[np.dtype(dtype)] * 8


@pytest.mark.parametrize("log", [False, True])
def test_reference_extremes(log):
    x = extreme_rows(16, np.float32)
    y = K.softmax_forward_ref(x, log)
    ref = softmax64(x, log)
    assert np.isnan(y[3]).all()  # a row of all -inf is NaN, as in PyTorch
    assert rel_err(y[:3], ref[:3]) < 1e-6


@pytest.mark.parametrize("log", [False, True])
def test_gradcheck(log, rng):
    x = cpu(rng.standard_normal((3, 5)), requires_grad=True)
    fn = F.log_softmax if log else F.softmax
    assert gradcheck(lambda t: fn(t, dim=-1), [x])
    assert gradcheck(lambda t: fn(t, dim=0), [x])
    x3 = cpu(rng.standard_normal((2, 3, 4)), requires_grad=True)
    assert gradcheck(lambda t: fn(t, dim=1), [x3])


def test_dims_and_modules(rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    for dim in (0, 1, 2, -1):
        y = F.softmax(cpu(x), dim=dim)
        assert y.is_contiguous() and F.log_softmax(cpu(x), dim=dim).is_contiguous()  # as PyTorch's: y.view works
        ref = np.moveaxis(softmax64(np.moveaxis(x, dim, -1)), -1, dim)
        np.testing.assert_allclose(y.view(-1).numpy(), ref.reshape(-1), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(nn.LogSoftmax(dim=1)(cpu(x)).numpy(),
                               np.moveaxis(softmax64(np.moveaxis(x, 1, -1), True), -1, 1), rtol=1e-5, atol=1e-6)
    assert nn.Softmax(dim=-1)(cpu(x)).shape == x.shape
    y = F.softmax(cpu(x.astype(np.float16)), dim=-1, dtype="float32")
    assert y.dtype == np.float32
    assert float(F.softmax(cpu(np.float32(3.0)), dim=0).item()) == 1.0
    with pytest.raises(IndexError, match="softmax"):
        F.softmax(cpu(x), dim=3)
    with pytest.raises(TypeError, match="log_softmax"):
        F.log_softmax(cpu(np.ones((2, 2), np.int64)), dim=1)


# ---------------------------------------------------------------- GPU
GPU_SHAPES = [(1, 1), (3, 7), (4097, 7), (4097, 1000), (64, 1024), (33, 4096), (17, 8192), (8, 16384),
              (4, 32768), (5, 65536), (6, 1001), (2, 100003), (37, 640), (300, 3072), (64, 6144), (9, 12288)]


def poison(cp, *arrays_like):
    blocks = [cp.full(a.nbytes, 255, cp.uint8) for a in arrays_like]
    cp.cuda.get_current_stream().synchronize()
    del blocks


@pytest.mark.gpu
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=[f"{m}x{n}" for m, n in GPU_SHAPES])
def test_kernels_match_reference(shape, dtype, log):
    import cupy as cp

    rng = np.random.default_rng(hash((shape, log)) % 2**32)
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    dy = rng.standard_normal(shape).astype(dtype)
    tol = TOL[np.dtype(dtype)] * 2
    y = K.softmax_forward_ref(x, log)
    gx = cp.asarray(x)
    poison(cp, gx)
    gy = K.softmax_forward(gx, log)
    assert rel_err(gy.get(), y) < tol
    poison(cp, gx)
    gdx = K.softmax_backward(cp.asarray(dy), gy, log)
    assert rel_err(gdx.get(), K.softmax_backward_ref(dy, gy.get(), log)) < tol * 4


@pytest.mark.gpu
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("n", [1, 7, 1000, 65536])
def test_kernels_extreme_rows(n, dtype, log):
    import cupy as cp

    x = extreme_rows(n, dtype)
    y = K.softmax_forward(cp.asarray(x), log).get()
    ref = softmax64(x, log)
    assert np.isnan(np.asarray(y[3], np.float32)).all()
    assert rel_err(y[:3], ref[:3]) < TOL[np.dtype(dtype)] * 2


@pytest.mark.gpu
@pytest.mark.parametrize("log", [False, True])
def test_against_torch(log):
    torch = pytest.importorskip("torch")
    mf.manual_seed(1)
    x = (mf.randn(300, 2000, device="cuda") * 3).requires_grad_()
    g = mf.randn(300, 2000, device="cuda")
    y = (F.log_softmax if log else F.softmax)(x, dim=-1)
    y.backward(g)
    tx = torch.from_dlpack(x._data).double().requires_grad_()
    ty = (torch.log_softmax if log else torch.softmax)(tx, -1)
    ty.backward(torch.from_dlpack(g._data).double())
    assert rel_err(y._data.get(), ty.detach().cpu().numpy()) < 2e-6
    assert rel_err(x.grad._data.get(), tx.grad.cpu().numpy()) < 1e-5
    ninf = torch.full((1, 5), float("-inf"), device="cuda")
    assert torch.isnan((torch.log_softmax if log else torch.softmax)(ninf, -1)).all()  # what we match
