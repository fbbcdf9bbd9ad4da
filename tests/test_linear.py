"""F.linear / nn.Linear: forward and gradients against float64, the cross-layer epilog
fusion (which path ran, same gradients as the unfused path), plan reuse, bad input."""
import math

import numpy as np
import pytest

from conftest import dev_array, f64, host

import minifused.functional as F
from minifused import backend, nn
from minifused.autograd import no_grad
from minifused.kernels import cublaslt as LT
from minifused.ops import linear as L
import minifused as mf

DTYPES = [backend.float32, backend.float16, backend.bfloat16]
TOL = {backend.float32: 2e-5, backend.float16: 5e-3, backend.bfloat16: 4e-2}
C = math.sqrt(2 / math.pi)


# ---------------------------------------------------------------- helpers






def tensor(a, device, requires_grad=False):
    return mf.tensor(dev_array(a, device), device=device, requires_grad=requires_grad)


def rel(a, b):
    a, b = f64(a), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert np.isfinite(a).all()
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)


def act64(z, act):
    if act == "relu":
        return np.maximum(z, 0), (z > 0).astype(np.float64)
    if act == "gelu":
        t = np.tanh(C * (z + 0.044715 * z ** 3))
        d = 0.5 * (1 + t) + 0.5 * z * (1 - t * t) * C * (1 + 3 * 0.044715 * z * z)
        return 0.5 * z * (1 + t), d
    return z, np.ones_like(z)


def reference(x, w, b, g, act):
    """float64 forward and all gradients of act(x @ w.T + b) under upstream gradient g."""
    x64, w64, g64 = f64(x), f64(w), f64(g)
    k = w64.shape[1]
    rows = math.prod(x64.shape[:-1])
    z = x64.reshape(rows, k) @ w64.T + (f64(b) if b is not None else 0)
    y, d = act64(z, act)
    dz = g64.reshape(z.shape) * d
    return (y.reshape(*x64.shape[:-1], w64.shape[0]), (dz @ w64).reshape(x64.shape),
            dz.T @ x64.reshape(rows, k), dz.sum(0))


@pytest.fixture(autouse=True)
def _clean_stats():
    L.reset_stats()
    yield


# ---------------------------------------------------------------- forward and gradients
CASES = [((1, 7), 5), ((3, 13), 17), ((4, 5, 30), 9), ((2, 3, 4, 64), 40), ((65, 784), 100)]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("xshape,out", CASES, ids=lambda c: str(c))
def test_forward_and_gradients(device, rng, dtype, activation, with_bias, xshape, out):
    k = xshape[-1]
    x = rng.standard_normal(xshape).astype(dtype)
    w = (rng.standard_normal((out, k)) / math.sqrt(k)).astype(dtype)
    b = rng.standard_normal(out).astype(dtype) if with_bias else None
    g = rng.standard_normal((*xshape[:-1], out)).astype(dtype)
    xt, wt = tensor(x, device, True), tensor(w, device, True)
    bt = tensor(b, device, True) if with_bias else None
    y = F.linear(xt, wt, bt, activation)
    assert y.dtype == dtype and y.shape == (*xshape[:-1], out) and y.device == xt.device
    y.backward(tensor(g, device))
    ry, rdx, rdw, rdb = reference(x, w, b, g, activation)
    tol = TOL[dtype]
    # cuBLASLt's GELU epilog approximates tanh: up to 2.04e-5 relative in fp32 with some of its
    # algorithms (a (1, 7) x 5 GEMM, H100), which autotuning may pick
    assert rel(y, ry) < (2 * tol if activation == "gelu" and dtype == backend.float32 else tol)
    assert xt.grad.dtype == dtype and rel(xt.grad, rdx) < 2 * tol
    assert wt.grad.dtype == dtype and rel(wt.grad, rdw) < 2 * tol
    if with_bias:
        assert bt.grad.dtype == dtype and rel(bt.grad, rdb) < 3 * tol
    assert L.stats["dgrad_plain"] == 1
    assert L.stats["act_bwd_elementwise"] == (activation is not None)


def test_one_dimensional_input_and_float64_on_cpu(rng):
    x = rng.standard_normal(6)
    w = rng.standard_normal((4, 6))
    b = rng.standard_normal(4)
    xt, wt, bt = (mf.tensor(a, device="cpu", requires_grad=True) for a in (x, w, b))
    y = F.linear(xt, wt, bt, "gelu")
    assert y.shape == (4,)
    g = rng.standard_normal(4)
    y.backward(mf.tensor(g, device="cpu"))
    ry, rdx, rdw, rdb = reference(x, w, b, g, "gelu")
    assert rel(y, ry) < 1e-12 and rel(xt.grad, rdx) < 1e-12
    assert rel(wt.grad, rdw) < 1e-12 and rel(bt.grad, rdb) < 1e-12


def test_first_layer_computes_no_input_gradient(device, rng):
    lin = nn.Linear(8, 6, activation="relu", device=device)
    x = tensor(rng.standard_normal((5, 8)).astype(np.float32), device)  # no grad wanted
    lin(x).sum().backward()
    assert L.stats["dgrad_plain"] == 0 and not any(k.startswith("dgrad_fused") for k in L.stats)
    assert lin.weight.grad is not None and lin.bias.grad is not None


def test_no_grad_forward_keeps_nothing(device, rng):
    lin = nn.Linear(8, 6, activation="gelu", device=device)
    with no_grad():
        y = lin(tensor(rng.standard_normal((5, 8)).astype(np.float32), device))
    assert not y.requires_grad and y._ctx is None


@pytest.mark.parametrize("dtype", [backend.float32, backend.float16], ids=lambda d: d.name)
@pytest.mark.parametrize("view", ["strided_last_dim", "transposed_3d", "row_stride"])
def test_non_contiguous_inputs(device, rng, dtype, view):
    from minifused.ops import getitem, permute

    if view == "row_stride":
        base = rng.standard_normal((6, 40)).astype(dtype)
        xt_base = tensor(base, device, True)
        index = (slice(None), slice(5, 25))  # unit inner stride, rows 40 apart, unaligned start
        xv, xnp = getitem(xt_base, index), base[index]
    else:
        base = rng.standard_normal((6, 20, 3)).astype(dtype)
        xt_base = tensor(base, device, True)
        if view == "strided_last_dim":
            index = (slice(None), slice(None), 1)
            xv, xnp = getitem(xt_base, index), base[index]
        else:
            xv, xnp = permute(xt_base, 2, 0, 1), base.transpose(2, 0, 1)
    assert xv.shape == xnp.shape
    k = xnp.shape[-1]
    w = (rng.standard_normal((7, k)) * 0.3).astype(dtype)
    b = rng.standard_normal(7).astype(dtype)
    wt, bt = tensor(w, device, True), tensor(b, device, True)
    y = F.linear(xv, wt, bt, "relu")
    g = rng.standard_normal(y.shape).astype(dtype)
    y.backward(tensor(g, device))
    ry, rdx, rdw, rdb = reference(xnp, w, b, g, "relu")
    assert rel(y, ry) < TOL[dtype]
    assert rel(wt.grad, rdw) < 2 * TOL[dtype] and rel(bt.grad, rdb) < 3 * TOL[dtype]
    expect = np.zeros(base.shape)
    if view == "transposed_3d":
        expect[...] = rdx.transpose(1, 2, 0)
    else:
        expect[index] = rdx
    assert rel(xt_base.grad, expect) < 2 * TOL[dtype]


# ---------------------------------------------------------------- cross-layer fusion
def _mlp(device, dtype, act, sizes=(30, 45, 33, 10), seed=0):
    backend.manual_seed(seed)
    layers = [nn.Linear(a, b, activation=act if i < len(sizes) - 2 else None, device=device, dtype=dtype)
              for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:]))]
    return layers


def _unfused_forward(layers, x, act):
    """The same model as separate ops: linear without activation, then F.relu / F.gelu."""
    h = x
    for lin in layers:
        h = F.linear(h, lin.weight, lin.bias)
        if lin.activation == "relu":
            h = F.relu(h)
        elif lin.activation == "gelu":
            h = F.gelu(h, approximate="tanh")
    return h


@pytest.mark.parametrize("dtype", [backend.float32, backend.float16], ids=lambda d: d.name)
@pytest.mark.parametrize("act", ["relu", "gelu"])
@pytest.mark.parametrize("x_requires_grad", [True, False])
def test_mlp_backward_runs_fused_path_and_matches_unfused(device, rng, dtype, act, x_requires_grad):
    layers = _mlp(device, dtype, act)
    x_np = rng.standard_normal((16, 30)).astype(dtype)
    g_np = rng.standard_normal((16, 10)).astype(dtype)

    x = tensor(x_np, device, x_requires_grad)
    h = x
    for lin in layers:
        h = lin(h)
    L.reset_stats()
    h.backward(tensor(g_np, device))
    # Layers 2 and 3 carried their producers' activation backward in their dX GEMMs.
    assert L.stats[f"dgrad_fused_{act}"] == 2
    assert L.stats["act_bwd_from_consumer"] == 2 and L.stats["act_bwd_elementwise"] == 0
    assert L.stats["dgrad_plain"] == (1 if x_requires_grad else 0)
    assert L.stats["backward_narrow"] == (device == "cuda")  # the 10-output head: one kernel on the GPU
    fused = [(f64(p.grad), p) for lin in layers for p in (lin.weight, lin.bias)]
    fused_x = f64(x.grad) if x_requires_grad else None

    for lin in layers:
        lin.zero_grad()
    x2 = tensor(x_np, device, x_requires_grad)
    L.reset_stats()
    _unfused_forward(layers, x2, act).backward(tensor(g_np, device))
    assert not any(k.startswith("dgrad_fused") for k in L.stats)
    tol = 1e-5 if dtype == backend.float32 else 1e-2
    for (gf, p) in fused:
        assert rel(p.grad, gf) < tol
    if x_requires_grad:
        assert rel(x2.grad, fused_x) < tol

    # and both against float64
    hs, zs = [f64(x_np)], []
    for lin in layers:
        z = hs[-1] @ f64(lin.weight).T + f64(lin.bias)
        zs.append(z)
        hs.append(act64(z, lin.activation)[0])
    d = f64(g_np)
    for i in reversed(range(len(layers))):
        d = d * act64(zs[i], layers[i].activation)[1]
        assert rel(fused[2 * i][0], d.T @ hs[i]) < 5 * TOL[dtype]
        assert rel(fused[2 * i + 1][0], d.sum(0)) < 5 * TOL[dtype]
        d = d @ f64(layers[i].weight)


@pytest.mark.parametrize("watch", ["second_consumer", "hook", "retain_grad"])
def test_fusion_is_skipped_when_the_activation_output_is_watched(device, rng, watch):
    l1, l2 = _mlp(device, backend.float32, "relu", sizes=(12, 20, 6))
    x_np = rng.standard_normal((5, 12)).astype(np.float32)
    x = tensor(x_np, device, True)
    h = l1(x)
    seen = []
    if watch == "hook":
        h.register_hook(lambda grad: seen.append(1))
    if watch == "retain_grad":
        h.retain_grad()
    out = l2(h).sum()
    if watch == "second_consumer":
        out = out + (h * h).sum()
    L.reset_stats()
    out.backward()
    assert not any(k.startswith("dgrad_fused") for k in L.stats)
    assert L.stats["act_bwd_elementwise"] == 1 and L.stats["act_bwd_from_consumer"] == 0
    if watch == "hook":
        assert seen == [1]
    z1 = f64(x_np) @ f64(l1.weight).T + f64(l1.bias)
    h1 = np.maximum(z1, 0)
    dh = np.ones((5, 6)) @ f64(l2.weight)
    if watch == "second_consumer":
        dh = dh + 2 * h1
    if watch == "retain_grad":
        assert rel(h.grad, dh) < 1e-5
    dz = dh * (z1 > 0)
    assert rel(l1.weight.grad, dz.T @ f64(x_np)) < 1e-5
    assert rel(l1.bias.grad, dz.sum(0)) < 1e-5
    assert rel(x.grad, dz @ f64(l1.weight)) < 1e-5


def test_same_layer_applied_twice_fuses_with_itself(device, rng):
    lin = nn.Linear(9, 9, activation="relu", device=device)
    x_np = rng.standard_normal((4, 9)).astype(np.float32)
    x = tensor(x_np, device, True)
    lin(lin(x)).sum().backward()
    assert L.stats["dgrad_fused_relu"] == 1 and L.stats["act_bwd_from_consumer"] == 1
    w, b = f64(lin.weight), f64(lin.bias)
    z1 = f64(x_np) @ w.T + b
    h1 = np.maximum(z1, 0)
    z2 = h1 @ w.T + b
    dz2 = (z2 > 0).astype(float)
    dz1 = (dz2 @ w) * (z1 > 0)
    assert rel(lin.weight.grad, dz2.T @ h1 + dz1.T @ f64(x_np)) < 1e-5
    assert rel(lin.bias.grad, dz2.sum(0) + dz1.sum(0)) < 1e-5
    assert rel(x.grad, dz1 @ w) < 1e-5


# ---------------------------------------------------------------- plans, module, parity
@pytest.mark.gpu
def test_second_training_step_creates_no_plan(rng):
    layers = _mlp("cuda", backend.float16, "relu", sizes=(64, 96, 80, 10))
    x = tensor(rng.standard_normal((32, 64)).astype(np.float16), "cuda")

    def step():
        h = x
        for lin in layers:
            lin.zero_grad()
            h = lin(h)
        h.sum().backward()

    step()
    created = LT.plan_cache_info()["created"]
    step()
    assert LT.plan_cache_info()["created"] == created
    assert L.stats["dgrad_fused_relu"] == 4


def test_linear_module_init_and_repr(device):
    lin = nn.Linear(50, 20, device=device)
    bound = 1 / math.sqrt(50)
    w, b = f64(lin.weight), f64(lin.bias)
    assert w.shape == (20, 50) and b.shape == (20,)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert w.std() > bound / 3  # uniform: std = bound / √3
    assert lin.weight.requires_grad and lin.weight.dtype == backend.float32
    assert set(dict(lin.named_parameters())) == {"weight", "bias"}
    assert "in_features=50, out_features=20, bias=True" in repr(lin)
    nb = nn.Linear(3, 2, bias=False, activation="gelu", device=device, dtype="float16")
    assert nb.bias is None and nb.weight.dtype == backend.float16 and "gelu" in repr(nb)
    assert set(dict(nb.named_parameters())) == {"weight"}


@pytest.mark.gpu
@pytest.mark.parametrize("act", ["relu", "gelu"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_parity_with_pytorch(rng, act, dtype):
    torch = pytest.importorskip("torch")
    lin = nn.Linear(100, 70, activation=act, device="cuda", dtype=dtype)
    x_np = rng.standard_normal((33, 100)).astype(backend.as_dtype(dtype))
    x = tensor(x_np, "cuda", True)
    y = lin(x)
    g = rng.standard_normal((33, 70)).astype(backend.as_dtype(dtype))
    y.backward(tensor(g, "cuda"))

    tdt = getattr(torch, dtype)
    tt = lambda a: torch.tensor(f64(a), device="cuda").to(tdt).requires_grad_(True)  # noqa: E731
    tx, tw, tb = tt(x_np), tt(lin.weight), tt(lin.bias)
    z = torch.nn.functional.linear(tx, tw, tb)
    ty = torch.relu(z) if act == "relu" else torch.nn.functional.gelu(z, approximate="tanh")
    ty.backward(torch.tensor(f64(g), device="cuda").to(tdt))
    tol = {"float32": 1e-5, "float16": 3e-3, "bfloat16": 2e-2}[dtype]
    tn = lambda t: t.detach().double().cpu().numpy()  # noqa: E731
    assert rel(y, tn(ty)) < tol
    assert rel(x.grad, tn(tx.grad)) < 2 * tol
    assert rel(lin.weight.grad, tn(tw.grad)) < 2 * tol
    assert rel(lin.bias.grad, tn(tb.grad)) < 3 * tol


# ---------------------------------------------------------------- bad input
def test_bad_input(device, rng):
    x = tensor(rng.standard_normal((4, 5)).astype(np.float32), device)
    w = tensor(rng.standard_normal((3, 6)).astype(np.float32), device)
    with pytest.raises(ValueError, match=r"5.*6|6.*5"):
        F.linear(x, w)
    w = tensor(rng.standard_normal((3, 5)).astype(np.float32), device)
    with pytest.raises(ValueError, match=r"bias.*\(3,\).*\(4,\)"):
        F.linear(x, w, tensor(np.zeros(4, np.float32), device))
    with pytest.raises(TypeError, match="same dtype"):
        F.linear(x, tensor(rng.standard_normal((3, 5)).astype(np.float16), device))
    with pytest.raises(TypeError, match="bias dtype"):
        F.linear(x, w, tensor(np.zeros(3, np.float16), device))
    with pytest.raises(TypeError, match="unsupported dtype"):
        F.linear(tensor(np.ones((4, 5), np.int32), device), tensor(np.ones((3, 5), np.int32), device))
    if device == "cuda":
        with pytest.raises(TypeError, match="unsupported dtype"):
            F.linear(tensor(np.ones((4, 5)), device), tensor(np.ones((3, 5)), device))
    with pytest.raises(ValueError, match="activation"):
        F.linear(x, w, activation="tanh")
    with pytest.raises(ValueError, match="2-D"):  # (a 1-D weight is PyTorch's matmul(x, w): taken)
        F.linear(x, tensor(np.ones((1, 3, 5), np.float32), device))
    with pytest.raises(TypeError):
        F.linear(x._data, w)
    with pytest.raises(ValueError, match="activation"):
        nn.Linear(3, 4, activation="swish")


@pytest.mark.gpu
def test_device_mismatch():
    x = mf.tensor(np.ones((2, 3), np.float32), device="cpu")
    w = tensor(np.ones((4, 3), np.float32), "cuda")
    with pytest.raises(RuntimeError, match="device"):
        F.linear(x, w)


@pytest.mark.parametrize("shape", [(0, 5, 4), (3, 0, 4)], ids=["empty_batch", "no_in_features"])
def test_zero_sized(device, rng, shape):
    n, k, m = shape
    x = rng.standard_normal((n, k)).astype(np.float32)
    w = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    xt, wt, bt = tensor(x, device, True), tensor(w, device, True), tensor(b, device, True)
    y = F.linear(xt, wt, bt, "relu")
    g = np.ones((n, m), np.float32)
    y.backward(tensor(g, device))
    ry, rdx, rdw, rdb = reference(x, w, b, g, "relu")
    assert f64(y).shape == (n, m) and np.allclose(f64(y), ry)
    assert np.allclose(f64(xt.grad), rdx) and np.allclose(f64(wt.grad), rdw)
    assert np.allclose(f64(bt.grad), rdb)
