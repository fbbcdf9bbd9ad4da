"""LayerNorm / RMSNorm: references against float64 formulas, gradients against finite
differences, API checks; on a GPU the kernels against the references and PyTorch."""
import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
import minifused.nn as nn
from minifused import backend
from minifused.kernels import norm as K
from minifused.kernels.rows import RowConfig
from minifused.testing import gradcheck

from tolerances import DTYPES, TOL, cpu, rel_err  # noqa: E402



def ln64(x, w, b, eps, rms=False):
    x = x.astype(np.float64)
    if rms:
        y = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    else:
        mu = x.mean(-1, keepdims=True)
        y = (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    if w is not None:
        y = y * w.astype(np.float64)
    if b is not None:
        y = y + b.astype(np.float64)
    return y


def ln64_grads(x, w, dy, eps, rms=False):
    """Analytic float64 gradients (dx, dw, db) from the textbook formulas."""
    x, dy = x.astype(np.float64), dy.astype(np.float64)
    n = x.shape[-1]
    mu = 0 if rms else x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    r = 1 / np.sqrt(var + eps)
    xh = (x - mu) * r
    g = dy * (w.astype(np.float64) if w is not None else 1)
    dx = r * (g - xh * (g * xh).mean(-1, keepdims=True) - (0 if rms else g.mean(-1, keepdims=True)))
    return dx, (dy * xh).sum(0), dy.sum(0)
    del n


# ---------------------------------------------------------------- references (cpu)
@pytest.mark.parametrize("rms", [False, True])
@pytest.mark.parametrize("dtype", DTYPES + [np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (17, 1000), (2, 4099)])
def test_reference_matches_float64(shape, dtype, rms, rng):
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    w = rng.standard_normal(shape[1]).astype(dtype)
    b = rng.standard_normal(shape[1]).astype(dtype)
    y, mean, rstd = K.norm_forward_ref(x, w, None if rms else b, 1e-5, rms)
    assert y.dtype == np.dtype(dtype) and rstd.dtype in (np.float32, np.float64)
    assert (mean is None) == rms
    ref = ln64(x, w, None if rms else b, 1e-5, rms)
    assert rel_err(y, ref) < TOL[np.dtype(dtype)] * 2
    dy = rng.standard_normal(shape).astype(dtype)
    dx, dw, db = K.norm_backward_ref(dy, x, w, mean, rstd, rms)
    rdx, rdw, rdb = ln64_grads(x, w, dy, 1e-5, rms)
    tol = TOL[np.dtype(dtype)] * 4
    assert rel_err(dx, rdx) < tol and rel_err(dw, rdw) < tol
    assert (db is None) if rms else rel_err(db, rdb) < tol


def test_reference_extremes():
    x = np.array([[1e4, -1e4, 1e4, -1e4], [5.0, 5.0, 5.0, 5.0], [1e-3, 0, 0, 0]], np.float32)
    y, mean, rstd = K.norm_forward_ref(x, None, None, 1e-5)
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y[0], [1, -1, 1, -1], rtol=1e-6)
    np.testing.assert_array_equal(y[1], 0)  # an all-equal row normalizes to zeros


# ---------------------------------------------------------------- autograd (cpu, float64)
@pytest.mark.parametrize("affine", ["none", "weight", "bias", "both"])
def test_layer_norm_gradcheck(affine, rng):
    x = cpu(rng.standard_normal((3, 2, 5)), requires_grad=True)
    w = cpu(rng.standard_normal((2, 5)), requires_grad=True) if affine in ("weight", "both") else None
    b = cpu(rng.standard_normal((2, 5)), requires_grad=True) if affine in ("bias", "both") else None
    inputs = [t for t in (x, w, b) if t is not None]

    def fn(a, *rest):
        rest = list(rest)
        ww = rest.pop(0) if w is not None else None
        bb = rest.pop(0) if b is not None else None
        return F.layer_norm(a, (2, 5), ww, bb, eps=1e-3)

    assert gradcheck(fn, inputs)


def test_rms_norm_gradcheck(rng):
    x = cpu(rng.standard_normal((4, 6)), requires_grad=True)
    w = cpu(rng.standard_normal(6), requires_grad=True)
    assert gradcheck(lambda a, b: F.rms_norm(a, (6,), b, eps=1e-3), [x, w])
    assert gradcheck(lambda a: F.rms_norm(a, [6]), [x])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_bias_without_weight_gets_its_gradient(device, dtype, rng):
    """F.layer_norm(x, shape, None, bias): the bias's gradient is dy summed over the rows, in the bias's dtype
    (it had none: the kernels sum db beside dw)."""
    dt = backend.as_dtype(dtype)
    x = rng.standard_normal((6, 3, 8)).astype(np.float32)
    dy = rng.standard_normal((6, 3, 8)).astype(np.float32)
    b = mf.tensor(rng.standard_normal((3, 8)).astype(np.float32), device=device).to(dt).requires_grad_(True)
    xt = mf.tensor(x, device=device).to(dt).requires_grad_(True)
    y = F.layer_norm(xt, (3, 8), None, b)
    (y * mf.tensor(dy, device=device).to(dt)).sum().backward()
    assert b.grad.dtype == dt and b.grad.shape == (3, 8)
    want = dy.astype(dt).astype(np.float64).sum(axis=0)
    np.testing.assert_allclose(b.grad.float().cpu().numpy(), want, rtol=TOL[dt], atol=TOL[dt])


@pytest.mark.parametrize("rms", [False, True])
def test_strided_weight_and_bias(device, rms, rng):
    """A weight (and bias) that is a strided view (every other element of a larger leaf) gives the gradients its
    contiguous copy gives: the kernels read parameters as dense vectors, so the op hands them dense ones both
    ways."""
    x = rng.standard_normal((5, 16)).astype(np.float32)
    dy = rng.standard_normal((5, 16)).astype(np.float32)
    w0, b0 = rng.standard_normal(32).astype(np.float32), rng.standard_normal(32).astype(np.float32)
    grads = []
    for dense in (False, True):
        big_w = mf.tensor(w0, device=device).requires_grad_(True)
        big_b = mf.tensor(b0, device=device).requires_grad_(True)
        xt = mf.tensor(x, device=device).requires_grad_(True)
        w, b = big_w[::2], big_b[1::2]
        if dense:
            w, b = w.contiguous(), b.contiguous()
        y = F.rms_norm(xt, (16,), w, eps=1e-5) if rms else F.layer_norm(xt, (16,), w, b)
        (y * mf.tensor(dy, device=device)).sum().backward()
        grads.append([t.grad.cpu().numpy() for t in ((xt, big_w) if rms else (xt, big_w, big_b))])
    for strided, dense in zip(*grads):
        np.testing.assert_allclose(strided, dense, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rms", [False, True])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_float32_parameters_of_a_16_bit_input(device, dtype, rms, rng):
    """PyTorch's mixed precision: float32 weight (and bias) over a 16-bit input normalize in float32 and round
    once to the input's dtype; the input's gradient comes in its dtype, the parameters' in float32. Against
    float64 formulas on the 16-bit input's values. Mixed parameter dtypes, or 16-bit ones over a float32
    input, are refused by layer_norm (rms_norm takes them, as PyTorch's)."""
    dt = backend.as_dtype(dtype)
    x = (rng.standard_normal((12, 32)) * 2 + 0.5).astype(dt)
    w, b = rng.standard_normal(32).astype(np.float32), rng.standard_normal(32).astype(np.float32)
    dy = rng.standard_normal((12, 32)).astype(dt)
    xt = mf.tensor(x, device=device).requires_grad_(True)
    wt, bt = (mf.tensor(a, device=device).requires_grad_(True) for a in (w, b))
    y = F.rms_norm(xt, (32,), wt, eps=1e-5) if rms else F.layer_norm(xt, (32,), wt, bt)
    (y * mf.tensor(dy, device=device)).sum().backward()
    assert y.dtype == xt.grad.dtype == dt and wt.grad.dtype == np.float32
    tol = TOL[dt]
    np.testing.assert_allclose(y.float().cpu().numpy(), ln64(x, w, None if rms else b, 1e-5, rms), rtol=tol,
                               atol=tol)
    dx, dw, db = ln64_grads(x, w, dy, 1e-5, rms)
    np.testing.assert_allclose(xt.grad.float().cpu().numpy(), dx, rtol=tol, atol=4 * tol)
    scale = np.abs(dw).max()  # (12 rows of 16-bit terms)
    np.testing.assert_allclose(wt.grad.cpu().numpy(), dw, rtol=tol, atol=tol * scale)
    if not rms:
        np.testing.assert_allclose(bt.grad.cpu().numpy(), db, rtol=tol, atol=tol * np.abs(db).max())
        with pytest.raises(TypeError, match="layer_norm: weight and bias must share one dtype"):
            F.layer_norm(xt, (32,), wt, bt.to(dt))
    if rms:  # (PyTorch's rms_norm takes a weight of any floating dtype, the result in x's dtype; its cpu path warns)
        if xt.device.type == "cpu":
            with pytest.warns(UserWarning, match="rms_norm: mismatch dtype between input and weight"):
                assert F.rms_norm(xt.float(), (32,), wt.to(dt)).dtype == np.float32
        else:
            assert F.rms_norm(xt.float(), (32,), wt.to(dt)).dtype == np.float32
        return
    with pytest.raises(TypeError, match=r"weight dtype .* differs from input dtype float32 \(the input's dtype, "
                                        r"or float32 with a 16-bit input"):
        F.layer_norm(xt.float(), (32,), wt.to(dt))


def test_only_some_grads(rng):
    x = cpu(rng.standard_normal((5, 8)))
    w = cpu(rng.standard_normal(8), requires_grad=True)
    b = cpu(rng.standard_normal(8))
    F.layer_norm(x, (8,), w, b).sum().backward()
    ref = ln64_grads(x.numpy(), w.numpy(), np.ones((5, 8)), 1e-5)[1]
    np.testing.assert_allclose(w.grad.numpy(), ref, rtol=1e-10, atol=1e-12)
    assert x.grad is None and b.grad is None


def test_layer_norm_forward_values(rng):
    x = rng.standard_normal((2, 3, 16)).astype(np.float32)
    w, b = rng.standard_normal(16).astype(np.float32), rng.standard_normal(16).astype(np.float32)
    y = F.layer_norm(cpu(x), [16], cpu(w), cpu(b))
    assert y.dtype == np.float32 and y.shape == (2, 3, 16)
    np.testing.assert_allclose(y.numpy(), ln64(x.reshape(-1, 16), w, b, 1e-5).reshape(x.shape), rtol=1e-5,
                               atol=1e-5)


# ---------------------------------------------------------------- API
def test_bad_arguments(rng):
    x = cpu(rng.standard_normal((4, 6)).astype(np.float32))
    with pytest.raises(ValueError, match="layer_norm.*normalized_shape"):
        F.layer_norm(x, (5,))
    with pytest.raises(ValueError, match=r"expected input with shape \[\*, 4, 5\], but got input of size\[4, 6\]"):
        F.layer_norm(x, (4, 5))
    with pytest.raises(ValueError, match="weight must have shape"):
        F.layer_norm(x, (6,), mf.ones(5, device="cpu"))
    with pytest.raises(TypeError, match="dtype"):
        F.layer_norm(x, (6,), mf.ones(6, dtype="float64", device="cpu"))
    with pytest.raises(TypeError, match="rms_norm"):
        F.rms_norm(cpu(np.ones((2, 2), np.int32)), (2,))


def test_functional_normalized_shape_is_a_sequence(rng):
    """PyTorch's F.layer_norm / F.rms_norm take a tuple or list of ints only (an int raises TypeError); the
    modules take an int."""
    x = cpu(rng.standard_normal((4, 6)).astype(np.float32))
    for shape in (6, 6.0, range(6, 7)):
        with pytest.raises(TypeError, match="layer_norm: normalized_shape must be a tuple or list of ints"):
            F.layer_norm(x, shape)
    with pytest.raises(TypeError, match="rms_norm: normalized_shape must be a tuple or list"):
        F.rms_norm(x, 6)
    xd = x.numpy().astype(np.float64)
    want = (xd - xd.mean(1, keepdims=True)) / np.sqrt(xd.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(nn.LayerNorm(6, device="cpu")(x).detach().numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(nn.RMSNorm(6, device="cpu")(x).detach().numpy(),
                               F.rms_norm(x, [6]).numpy(), rtol=0, atol=0)


def test_modules():
    ln = nn.LayerNorm(8, device="cpu")
    assert set(ln.state_dict()) == {"weight", "bias"}
    np.testing.assert_array_equal(ln.weight.numpy(), 1)
    np.testing.assert_array_equal(ln.bias.numpy(), 0)
    assert ln.weight.requires_grad
    assert nn.LayerNorm((2, 4), elementwise_affine=False).weight is None
    no_bias = nn.LayerNorm(4, bias=False, device="cpu")
    assert no_bias.bias is None and set(no_bias.state_dict()) == {"weight"}
    rms = nn.RMSNorm([4], device="cpu")
    assert set(rms.state_dict()) == {"weight"}
    x = mf.randn(3, 4, device="cpu")
    y = rms(x)
    ref = x.numpy() / np.sqrt((x.numpy().astype(np.float64) ** 2).mean(-1, keepdims=True)
                              + np.finfo(np.float32).eps)
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-5)
    out = ln(mf.randn(2, 8, device="cpu", requires_grad=True))
    out.sum().backward()
    assert ln.weight.grad.shape == (8,) and ln.bias.grad.shape == (8,)



@pytest.mark.parametrize("make,size", [(lambda: nn.LayerNorm((2, 3), device="cpu"), (2, 3)),
                                       (lambda: nn.LayerNorm(4, bias=False, device="cpu"), (4,)),
                                       (lambda: nn.RMSNorm(5, device="cpu"), (5,)),
                                       (lambda: nn.LayerNorm(4, elementwise_affine=False), None)])
def test_reset_parameters_in_place(make, size):
    """``reset_parameters`` (PyTorch's): weight back to ones and bias to zeros, the same Parameter objects."""
    m = make()
    held = list(m.parameters())
    with mf.no_grad():
        for p in held:
            p.fill_(3.0)
    m.reset_parameters()
    assert all(a is b for a, b in zip(held, m.parameters())) and len(held) == len(list(m.parameters()))
    if size is None:
        assert m.weight is None
        return
    np.testing.assert_array_equal(m.weight.numpy(), np.ones(size, np.float32))
    if getattr(m, "bias", None) is not None:
        np.testing.assert_array_equal(m.bias.numpy(), np.zeros(size, np.float32))
    assert m.weight.requires_grad


# which norm modules have reset_parameters / reset_running_stats: exactly PyTorch's (torch 2.9)
RESET_METHODS = {"BatchNorm1d": (True, True), "BatchNorm2d": (True, True), "BatchNorm3d": (True, True),
                 "SyncBatchNorm": (True, True), "LazyBatchNorm1d": (True, True), "LazyBatchNorm2d": (True, True),
                 "LazyBatchNorm3d": (True, True), "InstanceNorm1d": (True, True), "InstanceNorm2d": (True, True),
                 "InstanceNorm3d": (True, True), "LazyInstanceNorm2d": (True, True), "GroupNorm": (True, False),
                 "LayerNorm": (True, False), "RMSNorm": (True, False), "LocalResponseNorm": (False, False),
                 "CrossMapLRN2d": (False, False)}


@pytest.mark.parametrize("name", sorted(RESET_METHODS))
def test_reset_methods_are_pytorchs(name):
    cls = getattr(nn, name)
    assert (hasattr(cls, "reset_parameters"), hasattr(cls, "reset_running_stats")) == RESET_METHODS[name]


# ---------------------------------------------------------------- GPU: kernels against references
GPU_SHAPES = [(1, 1), (3, 7), (4097, 7), (4097, 1000), (64, 1024), (33, 4096), (17, 8192), (8, 16384),
              (3, 30000), (5, 65536), (6, 1001), (37, 640), (300, 3072), (64, 6144), (9, 12288), (2000, 160),
              (129, 2048), (5, 1536), (301, 9216)]  # one warp per fp16 row; pairs of blocks (sm_90)


def poison(cp, *arrays_like):
    """Hand CuPy's memory pool 0xFF-filled (NaN in fp32/fp16/bf16) blocks of the outputs' sizes,
    so the kernels' fresh outputs land on them and an unwritten element shows as NaN."""
    blocks = [cp.full(a.nbytes, 255, cp.uint8) for a in arrays_like]
    cp.cuda.get_current_stream().synchronize()
    del blocks


@pytest.mark.gpu
@pytest.mark.parametrize("rms", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=[f"{m}x{n}" for m, n in GPU_SHAPES])
def test_kernels_match_reference(shape, dtype, rms):
    import cupy as cp

    rng = np.random.default_rng(hash((shape, rms)) % 2**32)
    m, n = shape
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(dtype)
    w = rng.standard_normal(n).astype(dtype)
    b = None if rms else rng.standard_normal(n).astype(dtype)
    dy = rng.standard_normal(shape).astype(dtype)
    tol = TOL[np.dtype(dtype)] * 2
    y, mean, rstd = K.norm_forward_ref(x, w, b, 1e-5, rms)
    dx, dw, db = K.norm_backward_ref(dy, x, w, mean, rstd, rms)
    gx, gw, gdy = cp.asarray(x), cp.asarray(w), cp.asarray(dy)
    gb = None if b is None else cp.asarray(b)
    poison(cp, gx, gx)
    gy, gmean, grstd = K.norm_forward(gx, gw, gb, 1e-5, rms)
    assert rel_err(gy.get(), y) < tol
    assert rel_err(grstd.get(), rstd) < 1e-5
    if not rms:
        assert rel_err(gmean.get(), mean) < 1e-5
    poison(cp, gx, gx)
    gdx, gdw, gdb = K.norm_backward(gdy, gx, gw, gmean, grstd, rms)
    assert rel_err(gdx.get(), dx) < tol * 2
    assert rel_err(gdw.get(), dw) < tol * 2
    if not rms:
        assert rel_err(gdb.get(), db) < tol * 2
    # without weight, and dx only
    gdx2, gdw2, gdb2 = K.norm_backward(gdy, gx, None, gmean, grstd, rms, need_dw=False, need_db=False)
    dx2 = K.norm_backward_ref(dy, x, None, mean, rstd, rms)[0]
    assert gdw2 is None and gdb2 is None
    assert rel_err(gdx2.get(), dx2) < tol * 2


@pytest.mark.gpu
@pytest.mark.parametrize("affine", ["none", "weight", "both"])
@pytest.mark.parametrize("rms", [False, True])
@pytest.mark.parametrize("shape,config", [((4097, 1024), RowConfig(4, 32, 64)), ((3, 1000), RowConfig(2, 64, 128, 16)),
                                          ((5, 7), RowConfig(1, 32, 64)), ((65, 2048), RowConfig(4, 64, 128)),
                                          ((1, 1024), RowConfig(4, 32, 32))])
def test_forward_register_configs(shape, config, rms, affine):
    """Forced register-path forward configurations (RowConfig: K, TPR, NT, MINB), rows past the end of the last
    block among them, against the float64 reference on poisoned outputs."""
    import cupy as cp

    rng = np.random.default_rng(hash((shape, config, rms, affine)) % 2**32)
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(np.float16)
    w = None if affine == "none" else rng.standard_normal(shape[1]).astype(np.float16)
    b = rng.standard_normal(shape[1]).astype(np.float16) if affine == "both" and not rms else None
    y, mean, rstd = K.norm_forward_ref(x.astype(np.float64), w, b, 1e-5, rms)
    gx = cp.asarray(x)
    poison(cp, gx, gx)
    gy, gmean, grstd = K.norm_forward(gx, None if w is None else cp.asarray(w),
                                      None if b is None else cp.asarray(b), 1e-5, rms, config=config)
    assert rel_err(gy.get(), y) < TOL[np.dtype(np.float16)] * 2
    assert rel_err(grstd.get(), rstd) < 1e-5
    if not rms:
        assert rel_err(gmean.get(), mean) < 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("rms", [False, True])
@pytest.mark.parametrize("dtype,n,vec", [(np.float16, 1024, 8), (backend.bfloat16, 1024, 8), (np.float32, 512, 4),
                                         (np.float16, 100, 1)])
def test_short_row_forward_fits_one_wave_without_spills(dtype, n, vec, rms):
    """The forward plan of rows of three or four vectors a warp thread is bounded to 2048 threads per SM
    (fp16 N = 1024, M = 4096: one wave on an H100), but never into local memory (bf16 would spill)."""
    kern, nt, *_ = K._forward_launch(np.dtype(dtype), n, vec, rms)
    assert nt == 128 and kern.local_size_bytes == 0
    if np.dtype(dtype) != backend.bfloat16:
        assert kern.num_regs <= 32


@pytest.mark.gpu
def test_kernels_extreme_inputs():
    import cupy as cp

    x = np.array([[1e4, -1e4] * 50, [3.0] * 100, [1e-3] + [0.0] * 99], np.float32)
    y = K.norm_forward(cp.asarray(x), None, None, 1e-5)[0].get()
    ref = K.norm_forward_ref(x, None, None, 1e-5)[0]
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    assert np.all(y[1] == 0)


@pytest.mark.gpu
def test_deterministic_weight_grads():
    import cupy as cp

    rng = np.random.default_rng(7)
    x, dy = (cp.asarray(rng.standard_normal((3000, 1536)).astype(np.float16)) for _ in range(2))
    w = cp.asarray(rng.standard_normal(1536).astype(np.float16))
    _, mean, rstd = K.norm_forward(x, w, w, 1e-5)
    first = K.norm_backward(dy, x, w, mean, rstd)
    for _ in range(3):
        again = K.norm_backward(dy, x, w, mean, rstd)
        for a, b in zip(first, again):
            assert cp.array_equal(a, b)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_layer_norm_against_torch(dtype):
    torch = pytest.importorskip("torch")
    shape, n = (37, 3, 640), 640
    mf.manual_seed(0)
    x = mf.randn(*shape, device="cuda").to(dtype).requires_grad_()
    w = (mf.randn(n, device="cuda") * 0.5 + 1).to(dtype).requires_grad_()
    b = mf.randn(n, device="cuda").to(dtype).requires_grad_()
    g = mf.randn(*shape, device="cuda").to(dtype)
    y = F.layer_norm(x, (n,), w, b)
    y.backward(g)
    tt = {k: torch.from_dlpack(v._data.astype(np.float32)).double().requires_grad_()
          for k, v in (("x", x), ("w", w), ("b", b))}
    ty = torch.nn.functional.layer_norm(tt["x"], (n,), tt["w"], tt["b"])
    ty.backward(torch.from_dlpack(g._data.astype(np.float32)).double())
    tol = TOL[backend.as_dtype(dtype)] * 4
    assert rel_err(y._data.astype(np.float32).get(), ty.detach().cpu().numpy()) < tol
    for mine, theirs in ((x, tt["x"]), (w, tt["w"]), (b, tt["b"])):
        assert rel_err(mine.grad._data.astype(np.float32).get(), theirs.grad.cpu().numpy()) < tol * 2
