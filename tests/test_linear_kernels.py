"""kernels/linear.py (and its cuBLASLt plans, kernels/cublaslt.py): every epilog against float64 formulas
written out here, on both devices."""
import math

import numpy as np
import pytest

from conftest import dev_array, f64, host
from minifused import backend
from minifused.kernels import cublaslt as LT
from minifused.kernels import linear as K

DTYPES = [backend.float32, backend.float16, backend.bfloat16]
TOL = {backend.float32: 1e-5, backend.float16: 3e-3, backend.bfloat16: 2e-2}
SHAPES = [(1, 7, 5), (3, 13, 17), (37, 130, 257), (64, 784, 1024)]
C = math.sqrt(2 / math.pi)


def gelu64(z):
    return 0.5 * z * (1 + np.tanh(C * (z + 0.044715 * z ** 3)))


def dgelu64(z):
    t = np.tanh(C * (z + 0.044715 * z ** 3))
    return 0.5 * (1 + t) + 0.5 * z * (1 - t * t) * C * (1 + 3 * 0.044715 * z * z)








def rel(a, b):
    a, b = f64(a), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert np.isfinite(a).all()
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)


def rand(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def unpack(mask, m):
    return np.unpackbits(host(mask), axis=1, count=m, bitorder="little").astype(bool)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("shape", SHAPES)
def test_forward_epilogs(device, rng, dtype, activation, with_bias, shape):
    n, k, m = shape
    x = rand(rng, (n, k), dtype)
    w = rand(rng, (m, k), dtype, 1 / math.sqrt(k))
    b = rand(rng, (m,), dtype) if with_bias else None
    z = f64(x) @ f64(w).T + (f64(b) if with_bias else 0)
    y, aux = K.linear_forward(dev_array(x, device), dev_array(w, device),
                          None if b is None else dev_array(b, device), activation, aux=True)
    assert y.dtype == dtype and y.shape == (n, m) and y.flags.c_contiguous
    expect = {None: z, "relu": np.maximum(z, 0), "gelu": gelu64(z)}[activation]
    # cuBLASLt's GELU evaluates tanh approximately: ~2e-5 relative in float32
    tol = 1e-4 if activation == "gelu" and dtype == backend.float32 else TOL[dtype]
    assert rel(y, expect) < tol
    if activation is None:
        assert aux is None
    elif activation == "relu":
        assert aux.dtype == np.uint8 and aux.shape == (n, K.relu_aux_cols(m))
        bits = unpack(aux, m)
        clear = np.abs(z) > 1e-2 * np.abs(z).max()  # rounding may flip signs near 0
        assert (bits[clear] == (z[clear] > 0)).all()
    else:
        assert aux.dtype == dtype and aux.shape == (n, K.gelu_aux_cols(m))
        assert rel(f64(host(aux)[:, :m]), z) < TOL[dtype]  # padding columns are unspecified


@pytest.mark.gpu
def test_gelu_is_the_tanh_form(rng):
    """cuBLASLt's GELU epilog is the tanh approximation, not the erf form."""
    from math import erf

    x = rand(rng, (64, 256), np.float32)
    w = rand(rng, (512, 256), np.float32, 0.2)
    z = f64(x) @ f64(w).T
    y, _ = K.linear_forward(dev_array(x, "cuda"), dev_array(w, "cuda"), None, "gelu")
    erf_form = 0.5 * z * (1 + np.vectorize(erf)(z / math.sqrt(2)))
    err_tanh = np.abs(f64(y) - gelu64(z)).max()
    err_erf = np.abs(f64(y) - erf_form).max()
    assert err_tanh < 1e-5 < err_erf, (err_tanh, err_erf)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("act", [None, "relu", "gelu"])
@pytest.mark.parametrize("shape", SHAPES)
def test_backward_data_with_fused_activation_backward(device, rng, dtype, act, shape):
    """dx = dy @ w, and with DRELU_BGRAD / DGELU_BGRAD the producer's mask and bias grad."""
    n, k, m = shape  # this layer: k inputs (the producer's outputs) -> m outputs
    dy = rand(rng, (n, m), dtype)
    w = rand(rng, (m, k), dtype, 1 / math.sqrt(m))
    aux = None
    scale = 1.0
    if act is not None:
        # a producer's pre-activation and its aux, made by the forward primitive itself
        xp_ = rand(rng, (n, 11), dtype)
        wp = rand(rng, (k, 11), dtype, 0.3)
        _, aux = K.linear_forward(dev_array(xp_, device), dev_array(wp, device), None, act, aux=True)
        zp = f64(xp_) @ f64(wp).T
        if act == "relu":
            scale = unpack(aux, k)
        else:
            scale = dgelu64(f64(host(aux)[:, :k]))
        del zp
    dx, db = K.linear_backward_data(dev_array(dy, device), dev_array(w, device), act, aux)
    expect = (f64(dy) @ f64(w)) * scale
    assert dx.dtype == dtype and dx.shape == (n, k)
    assert rel(dx, expect) < TOL[dtype]
    if act is None:
        assert db is None
    else:
        assert db.shape == (k,) and db.dtype == dtype
        assert rel(db, expect.sum(0)) < 3 * TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("bias_grad", [True, False])
@pytest.mark.parametrize("shape", SHAPES)
def test_backward_weight_and_bias_grad(device, rng, dtype, bias_grad, shape):
    n, k, m = shape
    dy = rand(rng, (n, m), dtype)
    x = rand(rng, (n, k), dtype)
    dw, db = K.linear_backward_weight(dev_array(dy, device), dev_array(x, device), bias_grad)
    assert dw.shape == (m, k) and dw.dtype == dtype and dw.flags.c_contiguous
    assert rel(dw, f64(dy).T @ f64(x)) < TOL[dtype]
    if bias_grad:
        assert rel(db, f64(dy).sum(0)) < 3 * TOL[dtype]
    else:
        assert db is None


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("act", ["relu", "gelu"])
@pytest.mark.parametrize("m", [45, 48, 1024])
def test_activation_backward(device, rng, dtype, act, m, request):
    """dz = dy * act'(aux) against float64 (poisoned memory on the GPU): rows of 45 features an element at a time,
    rows of 48 and 1024 as 8-element vectors."""
    if device == "cuda":
        request.getfixturevalue("poisoned_pool")
    n, k = 19, 23
    x = rand(rng, (n, k), dtype)
    w = rand(rng, (m, k), dtype, 0.3)
    _, aux = K.linear_forward(dev_array(x, device), dev_array(w, device), None, act, aux=True)
    dy = rand(rng, (n, m), dtype)
    dz = K.activation_backward(dev_array(dy, device), aux, act)
    scale = unpack(aux, m) if act == "relu" else dgelu64(f64(host(aux)[:, :m]))
    assert dz.dtype == dtype and dz.shape == (n, m)
    assert rel(dz, f64(dy) * scale) < TOL[dtype]


NARROW_SHAPES = [(1, 1, 1), (37, 33, 10), (300, 1024, 10), (129, 70, 16), (2049, 40, 3), (K.NARROW_MAX_ROWS, 9, 1)]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("shape", NARROW_SHAPES + [(5000, 257, 7)])
def test_narrow_forward(device, rng, dtype, with_bias, shape, request):
    """A layer of at most NARROW_MAX_OUT outputs without activation (one kernel on the GPU up to
    NARROW_MAX_FORWARD_ROWS rows, no cuBLASLt plan; cuBLASLt past them):
    rows read with a stride larger than the row, every output written (poisoned memory on the GPU)."""
    n, k, m = shape
    if device == "cuda":
        request.getfixturevalue("poisoned_pool")
    padded = rand(rng, (n, k + 3), dtype)
    x = padded[:, 2:k + 2]
    w = rand(rng, (m, k), dtype, 1 / math.sqrt(k))
    b = rand(rng, (m,), dtype) if with_bias else None
    made = LT.plan_cache_info()["created"]
    bd = None if b is None else dev_array(b, device)
    y, aux = K.linear_forward(dev_array(padded, device)[:, 2:k + 2], dev_array(w, device), bd, aux=True)
    assert aux is None and y.shape == (n, m) and y.dtype == dtype and y.flags.c_contiguous
    assert rel(y, f64(x) @ f64(w).T + (f64(b) if with_bias else 0)) < TOL[dtype]
    if n <= K.NARROW_MAX_FORWARD_ROWS:  # (more rows: cuBLASLt's GEMM)
        assert LT.plan_cache_info()["created"] == made


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("act", [None, "relu", "gelu"])
@pytest.mark.parametrize("flags", [(True, True, True), (True, False, False), (False, True, False),
                                   (False, False, True), (True, True, False)],
                         ids=lambda f: "".join(c for c, on in zip("WBX", f) if on))
@pytest.mark.parametrize("shape", NARROW_SHAPES)
def test_linear_backward_narrow(device, rng, dtype, act, flags, shape, request):
    """dW, db and dX (through the producer's ReLU mask or GELU, with its bias gradient) of a layer of few outputs
    in one kernel, each part alone or together, against float64 formulas; parts not asked for are None."""
    n, k, m = shape
    weight_grad, bias_grad, data_grad = flags
    if device == "cuda":
        request.getfixturevalue("poisoned_pool")
    padded = rand(rng, (n, m + 2), dtype)
    dy = padded[:, :m]  # rows with a stride larger than the row
    x = rand(rng, (n, k), dtype)
    w = rand(rng, (m, k), dtype, 1 / math.sqrt(m))
    aux, scale = None, 1.0
    if act is not None:  # the producer's aux, made by the forward primitive itself
        _, aux = K.linear_forward(dev_array(rand(rng, (n, 11), dtype), device),
                                  dev_array(rand(rng, (k, 11), dtype, 0.3), device), None, act, aux=True)
        scale = unpack(aux, k) if act == "relu" else dgelu64(f64(host(aux)[:, :k]))
    dyd = dev_array(padded, device)
    if device == "cuda":
        assert K.narrow_backward_applies(dyd[:, :m], k)
    dw, db, dx, dbx = K.linear_backward_narrow(dyd[:, :m], dev_array(x, device), dev_array(w, device), weight_grad,
                                               bias_grad, data_grad, act, aux)
    if weight_grad:
        assert dw.shape == (m, k) and dw.dtype == dtype and rel(dw, f64(dy).T @ f64(x)) < TOL[dtype]
    else:
        assert dw is None
    if bias_grad:
        assert db.shape == (m,) and db.dtype == dtype and rel(db, f64(dy).sum(0)) < 3 * TOL[dtype]
    else:
        assert db is None
    if data_grad:
        expect = (f64(dy) @ f64(w)) * scale
        assert dx.shape == (n, k) and dx.dtype == dtype and rel(dx, expect) < TOL[dtype]
        if act is None:
            assert dbx is None
        else:
            assert dbx.shape == (k,) and dbx.dtype == dtype and rel(dbx, expect.sum(0)) < 3 * TOL[dtype]
    else:
        assert dx is None and dbx is None


def test_narrow_backward_applies():
    """The one-kernel backward takes GPU arrays of few outputs and at most NARROW_MAX_ROWS rows only."""
    small = np.zeros((8, K.NARROW_MAX_OUT), np.float32)
    assert not K.narrow_backward_applies(small, 5)  # a host array: the NumPy path
    if backend.cuda_available():
        import cupy

        assert K.narrow_backward_applies(cupy.asarray(small), 5)
        assert not K.narrow_backward_applies(cupy.zeros((8, K.NARROW_MAX_OUT + 1), np.float32), 5)
        assert not K.narrow_backward_applies(cupy.zeros((K.NARROW_MAX_ROWS + 1, 4), np.float32), 5)
        assert not K.narrow_backward_applies(cupy.asarray(small), 0)
        assert not K.narrow_backward_applies(cupy.zeros((8, 4), np.float64), 5)


def test_references_agree_with_aux_layout(rng):
    """The NumPy bit-mask packs bit j%8 of byte j//8, rows padded to 16 bytes."""
    z = np.array([[1.0, -1.0, 2.0, 0.0, 3.0, -2.0, 1.0, 1.0, 5.0]])
    mask = K._pack_mask(z)
    assert mask.shape == (1, 16)
    assert mask[0, 0] == 0b11010101 and mask[0, 1] == 1 and not mask[0, 2:].any()


def test_relu_mask_check(rng):
    """The check that a new RELU_AUX_BIAS plan's candidates pass (array logic, run here on NumPy): the
    true mask passes; a set bit on a positive pre-activation that rounds to y == 0 passes; a set bit on a
    negative pre-activation, a clear bit under y > 0, an unwritten (NaN) output, or more such zeros than
    it rechecks each fail."""
    n, k, m = 6, 5, 20
    x = rand(rng, (n, k), np.float16)
    w = rand(rng, (m, k), np.float16)
    b = rand(rng, (m,), np.float16)
    x[2], w[3] = 0, 0
    x[2, 1], w[3, 1], b[3] = 2.0 ** -13, 2.0 ** -13, 0  # z[2, 3] = 2^-26: y rounds to 0, the bit is set
    z = f64(x) @ f64(w).T + f64(b)
    y = np.maximum(z, 0).astype(np.float16)
    assert y[2, 3] == 0 and z[2, 3] > 0
    good = K._pack_mask(z)

    def right(y_, mask, recheck=256):
        return K._relu_mask_right(x, w, b, y_, mask, recheck)

    assert right(y, good)
    assert not right(y, good, recheck=0)  # the one ambiguous zero is over the limit
    for where, value in ((z < 0, 1.0), (y > 0, -1.0)):  # a bit set on a negative z; a bit clear under y > 0
        wrong = z.copy()
        wrong[tuple(np.argwhere(where)[0])] = value
        assert not right(y, K._pack_mask(wrong))
    y_nan = y.copy()
    y_nan[0, 0] = np.nan
    assert not right(y_nan, good)


def test_non_contiguous_leading_dimension(device, rng):
    """Rows with a stride larger than the row (a column slice) and an unaligned start."""
    big = rand(rng, (9, 40), np.float32)
    x = big[1:, 3:30]  # 8 x 27, row stride 40, start offset 43 floats (not 16-byte aligned)
    w = rand(rng, (12, 27), np.float32, 0.2)
    xd = dev_array(big, device)[1:, 3:30]
    y, _ = K.linear_forward(xd, dev_array(w, device))
    assert rel(y, f64(x) @ f64(w).T) < 1e-5
    dw, db = K.linear_backward_weight(dev_array(rand(rng, (8, 12), np.float32), device), xd, True)
    assert dw.shape == (12, 27)


@pytest.mark.gpu
def test_second_call_with_same_shapes_plans_nothing(rng):
    x = dev_array(rand(rng, (32, 48), np.float32), "cuda")
    w = dev_array(rand(rng, (24, 48), np.float32), "cuda")
    b = dev_array(rand(rng, (24,), np.float32), "cuda")
    K.linear_forward(x, w, b, "relu", aux=True)
    before = LT.plan_cache_info()
    x2 = dev_array(rand(rng, (32, 48), np.float32), "cuda")
    y, _ = K.linear_forward(x2, w, b, "relu", aux=True)
    after = LT.plan_cache_info()
    assert after["created"] == before["created"] and after["hits"] == before["hits"] + 1
    assert rel(y, np.maximum(f64(x2) @ f64(w).T + f64(b), 0)) < 1e-5


@pytest.mark.gpu
def test_autotune_and_tf32_opt_in(rng, monkeypatch):
    x = rand(rng, (256, 512), np.float32)
    w = rand(rng, (384, 512), np.float32, 0.05)
    expect = f64(x) @ f64(w).T
    tune = LT.GemmConfig(autotune=True)
    tuned = LT.plan_cache_info()["autotuned"]
    y, _ = K.linear_forward(dev_array(x, "cuda"), dev_array(w, "cuda"), config=tune)
    assert rel(y, expect) < 1e-5 and LT.plan_cache_info()["autotuned"] >= tuned
    monkeypatch.setattr(backend.tf32_matmul, "allow_tf32", True)
    y, _ = K.linear_forward(dev_array(x, "cuda"), dev_array(w, "cuda"), config=tune)
    assert rel(y, expect) < 5e-3


@pytest.mark.gpu
def test_small_gemms_are_timed_once_large_ones_only_on_request(rng):
    """A small GEMM's new plan times its candidates (the heuristic's first choice can cost more
    host time per call than another); the timed choice still computes the right result, the
    next call reuses it, and a GEMM above GemmConfig.small_gemm_flop is not timed unless autotune is on."""
    x = dev_array(rand(rng, (64, 784), np.float32), "cuda")
    w = dev_array(rand(rng, (1024, 784), np.float32, 0.05), "cuda")
    b = dev_array(rand(rng, (1024,), np.float32), "cuda")
    LT.clear_plan_cache()
    before = LT.plan_cache_info()["autotuned"]
    y, mask = K.linear_forward(x, w, b, "relu", aux=True)
    info = LT.plan_cache_info()
    assert info["autotuned"] == before + 1
    expect, expect_mask = K.linear_forward_ref(x.get(), w.get(), b.get(), "relu", aux=True)
    assert rel(y, expect) < 1e-5 and np.array_equal(mask.get()[:, :128], expect_mask[:, :128])
    K.linear_forward(x, w, b, "relu", aux=True)
    assert LT.plan_cache_info()["autotuned"] == info["autotuned"]
    # now every GEMM counts as large
    K.linear_forward(x[:32], w, b, "relu", aux=True, config=LT.GemmConfig(small_gemm_flop=0))
    assert LT.plan_cache_info()["autotuned"] == info["autotuned"]


def _mlp_layer_gemms(rng, device):
    """An MNIST MLP layer's GEMMs (256 x 784 -> 1024, fp32): its arrays (x, w, b, dy) on ``device`` and ``run()``, the
    forward (ReLU, aux), dgrad and wgrad (with the bias gradient), as host arrays (y, dx, dw, db)."""
    x = dev_array(rand(rng, (256, 784), np.float32), device)
    w = dev_array(rand(rng, (1024, 784), np.float32, 0.05), device)
    b = dev_array(rand(rng, (1024,), np.float32), device)
    dy = dev_array(rand(rng, (256, 1024), np.float32), device)

    def run():
        y, _ = K.linear_forward(x, w, b, "relu", aux=True)
        dx = K.linear_backward_data(dy, w)[0]
        dw, db = K.linear_backward_weight(dy, x, True)
        return [host(a) for a in (y, dx, dw, db)]

    return (x, w, b, dy), run


@pytest.mark.gpu
def test_another_streams_plan_takes_the_chosen_algorithm(rng):
    """A plan made on a second stream (a captured step's capture stream) takes the algorithm timed on the
    first, untimed: the two streams compute bitwise the same forward, dgrad and wgrad."""
    import cupy

    (x, w, b, _), run = _mlp_layer_gemms(rng, "cuda")
    LT.clear_plan_cache()
    start = LT.plan_cache_info()  # the counts run on over the process
    first = run()
    info = LT.plan_cache_info()
    made = info["created"] - start["created"]
    assert made >= 3 and info["autotuned"] > start["autotuned"]
    with cupy.cuda.Stream(non_blocking=True):
        second = run()
    after = LT.plan_cache_info()
    assert after["created"] - info["created"] == made and after["autotuned"] == info["autotuned"]
    for a, c in zip(first, second):
        assert np.array_equal(a, c)
    expect, _ = K.linear_forward_ref(x.get(), w.get(), b.get(), "relu", aux=True)
    assert rel(first[0], expect) < 1e-5


@pytest.mark.gpu
def test_graph_streams_time_candidates_as_graphs(rng, monkeypatch):
    """A plan made on a stream that ``capture_step`` registered (``backend.graph_streams``) times its candidates
    as captured graphs and keeps its own choice; an eager stream's plan of the same problem times them as eager
    launches. Both compute the right forward, dgrad and wgrad; a captured step registers its stream."""
    import cupy

    import minifused as mf

    (x, w, b, dy), run = _mlp_layer_gemms(rng, "cuda")
    graph_timed = []
    timer = LT._graph_timer

    def counting(*args):
        graph_timed.append(1)
        got = timer(*args)
        assert got is not None  # cuBLASLt's candidates capture
        return got

    monkeypatch.setattr(LT, "_graph_timer", counting)
    LT.clear_plan_cache()
    graph_stream = cupy.cuda.Stream(non_blocking=True)
    monkeypatch.setattr(backend, "graph_streams", {(cupy.cuda.runtime.getDevice(), graph_stream.ptr)})
    with graph_stream:
        captured = run()
    assert len(graph_timed) >= 3
    timed = len(graph_timed)
    eager = run()
    assert len(graph_timed) == timed
    xd, wd, dyd = f64(x), f64(w), f64(dy)
    for got in (captured, eager):
        assert rel(got[0], np.maximum(xd @ wd.T + f64(b), 0)) < 1e-5
        assert rel(got[1], dyd @ wd) < 1e-5
        assert rel(got[2], dyd.T @ xd) < 1e-5 and rel(got[3], dyd.sum(0)) < 1e-5
    step = mf.capture_step(lambda t: t * 2)
    step(mf.ones(3, device="cuda"))
    assert (cupy.cuda.runtime.getDevice(), step._stream.ptr) in backend.graph_streams


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(3, 13, 17), (37, 130, 257), (256, 1024, 1024), (1030, 64, 40)])
def test_captured_fp32_relu_epilogues_run_as_passes(rng, monkeypatch, poisoned_pool, shape):
    """On a captured step's stream, strict fp32 RELU_AUX_BIAS and DRELU_BGRAD run as a plain GEMM and a pass of
    linear_act.cu: the output, every mask byte (padding zero), dz and the bias gradient against float64, poisoned
    memory; a NaN pre-activation stays NaN with its bit set, its gradient passing (PyTorch's relu). Off the
    captured streams the fused epilogues run."""
    import cupy

    n, k, m = shape
    x = rand(rng, (n, k), np.float32)
    x[0, 0] = np.nan
    w = rand(rng, (m, k), np.float32, 1 / math.sqrt(k))
    b = rand(rng, (m,), np.float32)
    g = rand(rng, (n, 24), np.float32)  # the output gradient of a consumer of 24 features, its weight w2
    w2 = rand(rng, (24, m), np.float32, 0.2)
    passes = []
    for name in ("_relu_mask_forward", "_relu_mask_backward_sum"):
        monkeypatch.setattr(K, name, lambda *a, f=getattr(K, name), name=name: (passes.append(name), f(*a)))
    monkeypatch.setattr(backend, "graph_streams", {(cupy.cuda.runtime.getDevice(), cupy.cuda.get_current_stream().ptr)})
    y, aux = K.linear_forward(dev_array(x, "cuda"), dev_array(w, "cuda"), dev_array(b, "cuda"), "relu", aux=True)
    dz, db = K.linear_backward_data(dev_array(g, "cuda"), dev_array(w2, "cuda"), "relu", aux)
    assert passes == ["_relu_mask_forward", "_relu_mask_backward_sum"]
    z = f64(x) @ f64(w).T + f64(b)
    bits = unpack(aux, m)
    yh = f64(y)
    assert np.isnan(yh[0]).all() and bits[0].all()  # the NaN's gradient passes (expect's row 0)
    assert rel(yh[1:], np.maximum(z[1:], 0)) < 1e-5
    clear = np.abs(z[1:]) > 1e-3 * np.abs(z[1:]).max()
    assert (bits[1:][clear] == (z[1:][clear] > 0)).all()
    assert aux.shape == (n, K.relu_aux_cols(m)) and not host(aux)[:, -(-m // 8):].any()
    expect = (f64(g) @ f64(w2)) * bits
    assert rel(dz, expect) < 1e-5 and rel(db, expect.sum(0)) < 1e-5
    monkeypatch.setattr(backend, "graph_streams", set())
    y2, aux2 = K.linear_forward(dev_array(x[1:], "cuda"), dev_array(w, "cuda"), dev_array(b, "cuda"), "relu",
                                aux=True)
    assert len(passes) == 2 and rel(y2, np.maximum(z[1:], 0)) < 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(4099, 264), (1024, 1024), (37, 4104), (8193, 136), (5, 8)])
def test_vector_relu_passes(rng, monkeypatch, poisoned_pool, dtype, shape):
    """The ReLU backward passes over rows of 8-element vectors (relu_mask_backward_vec; columns.cu's
    relu_mask_backward_partials then column_partials_sum), forced at these sizes: dz bit for bit as the element
    kernels write it, db against float64, on poisoned memory; a NaN whose bit is set passes into dz and db, one
    whose bit is clear does not."""
    import cupy

    n, m = shape
    g = rand(rng, (n, m), dtype)
    g[0, 1] = g[n - 1, m - 1] = np.nan
    bits = rng.random((n, m)) < 0.5
    bits[0, 1], bits[n - 1, m - 1] = True, False
    mask = np.zeros((n, K.relu_aux_cols(m)), np.uint8)
    mask[:, :-(-m // 8)] = np.packbits(bits, axis=1, bitorder="little")
    gd, maskd = dev_array(g, "cuda"), cupy.asarray(mask)
    expect = np.where(bits, f64(g), 0.0)
    vector = []
    real, real_sum = K._act_pass, K.columns.activation_backward_sum
    monkeypatch.setattr(K, "_act_pass", lambda name, *a, **kw: (vector.append(name), real(name, *a, **kw))[1])
    monkeypatch.setattr(K.columns, "activation_backward_sum", lambda *a: (vector.append("columns"), real_sum(*a)))

    def both():
        dz = K.activation_backward(gd, maskd, "relu")
        dx = backend.copy(gd)
        db = cupy.ndarray((m,), gd.dtype)
        K._activation_backward_sum(dx, maskd, db, "relu")
        return dz, dx, db

    monkeypatch.setattr(K, "VECTOR_PASS_MIN", 0)
    dz, dx, db = both()
    assert vector == ["relu_mask_backward_vec", "columns"]
    monkeypatch.setattr(K, "VECTOR_PASS_MIN", 1 << 62)
    monkeypatch.setattr(K.columns, "vector_rows", lambda *a: False)
    dz_e, dx_e, db_e = both()
    assert vector[2:] == ["relu_mask_backward_sum"]
    bits_of = lambda a: host(a).view(np.uint8)  # noqa: E731
    # (the element pass rounds its NaN through float32, which gives the canonical NaN: the values compared there)
    assert (bits_of(dz) == bits_of(dz_e)).all() and (bits_of(dz) == bits_of(dx)).all()
    assert np.array_equal(f64(dx), f64(dx_e), equal_nan=True)
    ok = ~np.isnan(expect)  # (the NaN at [0, 1], whose bit is set)
    assert np.isnan(f64(dz)[~ok]).all() and np.array_equal(f64(dz)[ok], expect[ok])
    got, got_e = f64(db), f64(db_e)
    assert np.isnan(got[1]) and np.isnan(got_e[1])
    sums = np.delete(expect, 1, axis=1).sum(0)
    assert rel(np.delete(got, 1), sums) < TOL[dtype] and rel(np.delete(got_e, 1), sums) < TOL[dtype]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [backend.float16, backend.bfloat16], ids=lambda d: d.name)
@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_large_data_gradient_runs_as_gemm_and_pass(rng, monkeypatch, poisoned_pool, dtype, act):
    """A 16-bit ReLU (GELU) data gradient of at least DACT_SPLIT_MIN multiply-adds (lowered here) runs as the plain
    GEMM and columns.cu's pass: dz and db against float64, as the DRELU_BGRAD (DGELU_BGRAD) epilogue's below the
    threshold."""
    import cupy

    n, m, k = 1030, 96, 264  # dy (n, m) @ w (m, k), through the producer's activation of k features
    g, w = rand(rng, (n, m), dtype), rand(rng, (m, k), dtype, 1 / math.sqrt(m))
    if act == "relu":
        scale = rng.random((n, k)) < 0.5
        aux = np.zeros((n, K.relu_aux_cols(k)), np.uint8)
        aux[:, :-(-k // 8)] = np.packbits(scale, axis=1, bitorder="little")
        aux = cupy.asarray(aux)
    else:
        pre = rand(rng, (n, K.gelu_aux_cols(k)), dtype)
        scale, aux = dgelu64(f64(pre)), dev_array(pre, "cuda")
    expect = (f64(g) @ f64(w)) * scale
    passes = []
    real = K.columns.activation_backward_sum
    monkeypatch.setattr(K.columns, "activation_backward_sum", lambda *a: (passes.append(1), real(*a)))
    monkeypatch.setattr(K, "VECTOR_PASS_MIN", 0)
    for threshold, split in ((n * m * k, True), (n * m * k + 1, False)):
        monkeypatch.setitem(K.DACT_SPLIT_MIN, act, threshold)
        dz, db = K.linear_backward_data(dev_array(g, "cuda"), dev_array(w, "cuda"), act, aux)
        assert bool(passes) == split
        assert rel(dz, expect) < TOL[dtype] and rel(db, expect.sum(0)) < TOL[dtype]
        passes.clear()


@pytest.mark.gpu
def test_clear_plan_cache_releases_and_replans(rng):
    x = dev_array(rand(rng, (8, 16), np.float16), "cuda")
    w = dev_array(rand(rng, (K.NARROW_MAX_OUT + 8, 16), np.float16), "cuda")  # more outputs than the narrow kernel's
    K.linear_forward(x, w)
    assert LT.plan_cache_info()["size"] > 0
    LT.clear_plan_cache()
    assert LT.plan_cache_info()["size"] == 0
    y, _ = K.linear_forward(x, w)
    assert rel(y, f64(x) @ f64(w).T) < 3e-3


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("rows,k,m", [(2, 1, 16), (2, 1, 9), (1, 1, 16), (5, 1, 24), (2, 3, 5), (64, 1, 16)])
def test_gpu_backward_weight_bias_grad_every_kept_candidate(dtype, rows, k, m, poisoned_pool):
    """Every cuBLASLt candidate a BGRADB plan keeps writes the right bias gradient (cuBLASLt offered
    candidates that left it unwritten on tiny GEMMs, and autotuning could pick one): each is run in
    turn on poisoned memory."""
    import cupy

    rng = np.random.default_rng(rows * 100 + k * 10 + m)
    dt = backend.as_dtype(dtype)
    x = cupy.asarray(rng.standard_normal((rows, k))).astype(dt)
    dy = cupy.asarray(rng.standard_normal((rows, m))).astype(dt)
    ref_db = dy.astype(cupy.float64).sum(0)
    ref_dw = dy.astype(cupy.float64).T @ x.astype(cupy.float64)
    K.linear_backward_weight(dy, x, bias_grad=True)
    plans = [p for key, p in LT._plans.items() if "wgrad" in key and "BGRADB" in key and key[4:8] == (dt, k, m, rows)]
    for plan in plans or [None]:
        for i in range(len(plan.algos) if plan else 1):
            if plan:
                plan.choose(i)
            dw, db = K.linear_backward_weight(dy, x, bias_grad=True)
            scale = float(cupy.abs(dy.astype(cupy.float64)).sum(0).max())
            assert float(cupy.abs(db.astype(cupy.float64) - ref_db).max()) <= 1e-2 * scale, (i, db, ref_db)
            assert float(cupy.abs(dw.astype(cupy.float64) - ref_dw).max()) <= 1e-2 * scale, i
        if plan:
            plan.choose(0)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("act", ["relu", "gelu"])
@pytest.mark.parametrize("n,k,m", [(2, 1, 16), (1, 1, 16), (5, 1, 24), (2, 3, 5), (64, 1, 16), (2, 16, 1)])
def test_gpu_backward_data_bias_grad_every_kept_candidate(dtype, act, n, k, m, poisoned_pool):
    """Every cuBLASLt candidate a DRELU_BGRAD / DGELU_BGRAD plan keeps writes the right pre-activation
    gradient and its column sum (the BGRADB plans were offered candidates that left the sum unwritten on
    tiny GEMMs): each is run in turn on poisoned memory."""
    import cupy

    rng = np.random.default_rng(n * 100 + k * 10 + m)
    dt = backend.as_dtype(dtype)
    dy = cupy.asarray(rng.standard_normal((n, m))).astype(dt)
    w = cupy.asarray(rng.standard_normal((m, k))).astype(dt)
    xp_ = cupy.asarray(rng.standard_normal((n, 7))).astype(dt)
    wp = cupy.asarray(rng.standard_normal((k, 7)) * 0.4).astype(dt)
    _, aux = K.linear_forward(xp_, wp, None, act, aux=True)
    scale = unpack(aux, k) if act == "relu" else dgelu64(f64(host(aux)[:, :k]))
    ref = (f64(dy) @ f64(w)) * scale
    size = float((np.abs(f64(dy)) @ np.abs(f64(w))).sum(0).max()) + 1e-30
    K.linear_backward_data(dy, w, act, aux)
    epi = "DRELU_BGRAD" if act == "relu" else "DGELU_BGRAD"
    plans = [p for key, p in LT._plans.items() if key[2:8] == ("dgrad", epi, dt, k, n, m)]
    for plan in plans or [None]:
        for i in range(len(plan.algos) if plan else 1):
            if plan:
                plan.choose(i)
            dz, db = K.linear_backward_data(dy, w, act, aux)
            assert np.abs(f64(dz) - ref).max() <= 1e-2 * size, i
            assert np.abs(f64(db) - ref.sum(0)).max() <= 1e-2 * size, (i, db, ref.sum(0))
        if plan:
            plan.choose(0)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("n,k,m", [(3, 26, 24), (128, 256, 10), (2, 1, 16), (64, 784, 256)])
def test_gpu_relu_mask_matches_the_output(dtype, n, k, m):
    """The ReLU bit-mask of a forward with aux is the pre-activation's sign wherever that is clear. Every
    cuBLASLt RELU_AUX_BIAS candidate wrote masks that disagreed with their output for (128, 256) -> 10
    (fp16, bf16) and (3, 26) -> 24 (bf16) on an H100: a new plan keeps only the candidates whose mask is
    y > 0 under two opposite poisons, and with none left the forward runs the GEMM and the ReLU apart."""
    import cupy

    rng = np.random.default_rng(0)
    dt = backend.as_dtype(dtype)
    x = cupy.asarray(rng.standard_normal((n, k))).astype(dt)
    w = cupy.asarray(rng.standard_normal((m, k)) / np.sqrt(k)).astype(dt)
    b = cupy.asarray(rng.standard_normal(m)).astype(dt)
    y, aux = K.linear_forward(x, w, b, "relu", aux=True)
    z = f64(x) @ f64(w).T + f64(b)
    clear = np.abs(z) > 1e-2 * np.abs(z).max()
    assert not ((unpack(aux, m) != (z > 0)) & clear).any()
    assert rel(y, np.maximum(z, 0)) < 1e-2


@pytest.mark.gpu
def test_gpu_relu_mask_keeps_a_positive_pre_activation_that_rounds_to_zero():
    """fp16: z = 2^-13 * 2^-13 = 2^-26 > 0 rounds to y = 0 but its mask bit is set (the mask is taken
    before rounding). The candidate check must accept that (a large GEMM has a few such outputs: the seed's
    65536 x 16384 x 8192 fell back to an unfused forward before), yet still reject a set bit where the
    pre-activation is negative: the same element with z = -2^-26 leaves the bit clear."""
    import cupy

    n, k, m = 96, 40, 56  # a shape no other test plans, so this call makes (and checks) a new plan
    rng = np.random.default_rng(3)
    for sign in (1, -1):
        x = rng.standard_normal((n, k)).astype(np.float16)
        w = (rng.standard_normal((m, k)) / np.sqrt(k)).astype(np.float16)
        x[5], w[7] = 0, 0
        x[5, 3], w[7, 3] = 2.0 ** -13, sign * 2.0 ** -13
        before = LT.plan_cache_info()["aux_fallbacks"]
        y, aux = K.linear_forward(cupy.asarray(x), cupy.asarray(w), None, "relu", aux=True)
        assert LT.plan_cache_info()["aux_fallbacks"] == before
        z = f64(x) @ f64(w).T
        assert float(host(y)[5, 7]) == 0.0 and z[5, 7] == sign * 2.0 ** -26
        np.testing.assert_array_equal(unpack(aux, m), z > 0)
        assert rel(y, np.maximum(z, 0)) < 1e-3
        LT.clear_plan_cache()
