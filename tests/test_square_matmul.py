"""square_matmul_: in-place x @ W / x @ W.T in row blocks, vs a float64 product; validation;
the GPU path (both copy modes) vs the NumPy reference, with a bound on its extra memory."""
import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
from minifused import backend
from minifused.kernels import square_matmul as SQ
from minifused.tensor import Tensor


def T(a, requires_grad=False):
    return Tensor._from_array(a, requires_grad)


def expected(x, w, transpose, bias=None, activation=None):
    z = x.astype(np.float64) @ (w.T if transpose else w).astype(np.float64)
    if bias is not None:
        z = z + bias.astype(np.float64)
    if activation == "relu":
        z = np.maximum(z, 0)
    return z


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-12), ("float32", 1e-5), ("float16", 2e-2),
                                       ("bfloat16", 5e-2)])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("rows,block", [(37, None), (37, 8), (64, 16), (5, 1), (3, 100)])
def test_cpu_matches_product(dtype, tol, transpose, rows, block, rng):
    dt = backend.as_dtype(dtype)
    n = 12
    x = rng.standard_normal((rows, n)).astype(dt)
    w = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(dt)
    want = expected(x, w, transpose)
    buf = x.copy()
    out = SQ.square_matmul_(buf, w, transpose, config=SQ.SquareMatmulConfig(block_rows=block))
    assert out is buf
    np.testing.assert_allclose(buf.astype(np.float64), want, rtol=tol, atol=tol)


def test_functional_in_place_version_and_epilog(rng):
    x = rng.standard_normal((20, 8)).astype(np.float32)
    w = rng.standard_normal((8, 8)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    xt = T(x.copy())
    v0 = xt._version
    arr = xt._data
    assert F.square_matmul_(xt, T(w), transpose=True, bias=T(b), activation="relu") is xt
    assert xt._data is arr and xt._version == v0 + 1
    np.testing.assert_allclose(xt._data, expected(x, w, True, b, "relu"), rtol=1e-5, atol=1e-5)
    xt = T(x.copy())
    F.square_matmul_(xt, T(w))
    np.testing.assert_allclose(xt._data, expected(x, w, False), rtol=1e-5, atol=1e-5)


def test_version_bump_is_seen_by_backward(rng):
    """A tensor saved by a recorded op and then overwritten (under no_grad) fails its backward."""
    w = T(rng.standard_normal((4, 4)).astype(np.float32))
    a = T(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    h = a * 1.0
    loss = (h * h).sum()
    with mf.no_grad():
        F.square_matmul_(h, w)
    with pytest.raises(RuntimeError, match="in-place"):
        loss.backward()


def test_bad_input(rng):
    x = T(np.ones((4, 3), np.float32))
    w = T(np.ones((3, 3), np.float32))
    cases = [
        ((x, T(np.ones((3, 4), np.float32))), ValueError, "square"),
        ((x, T(np.ones((4, 4), np.float32))), ValueError, "columns"),
        ((T(np.ones((2, 4, 3), np.float32)), w), ValueError, "2-D"),
        ((x, T(np.ones((3, 3), np.float64))), TypeError, "same dtype"),
        ((T(np.ones((4, 3), np.int32)), T(np.ones((3, 3), np.int32))), TypeError, "dtype"),
        ((x._data, w), TypeError, "expected tensors"),
    ]
    for args, exc, msg in cases:
        with pytest.raises(exc, match=msg) as e:
            F.square_matmul_(*args)
        assert "square_matmul_" in str(e.value)
    with pytest.raises(ValueError, match="transpose=True"):
        F.square_matmul_(x, w, bias=T(np.ones(3, np.float32)))
    with pytest.raises(ValueError, match=r"\(3,\)"):
        F.square_matmul_(x, w, True, bias=T(np.ones(4, np.float32)))
    with pytest.raises(ValueError, match="activation"):
        F.square_matmul_(x, w, True, activation="tanh")
    with pytest.raises(ValueError, match="unit stride"):
        F.square_matmul_(T(np.ones((3, 6), np.float32))[:, ::2], w)
    leaf = T(np.ones((4, 3), np.float32), requires_grad=True)
    with pytest.raises(RuntimeError, match="not differentiable; x requires grad .a leaf"):
        F.square_matmul_(leaf, w)
    with pytest.raises(RuntimeError, match="not differentiable; x requires grad .the output"):
        F.square_matmul_(leaf * 2.0, w)
    with pytest.raises(RuntimeError, match="weight requires grad"):
        F.square_matmul_(x, T(np.ones((3, 3), np.float32), requires_grad=True))
    with mf.no_grad():  # outside grad mode the in-place update is allowed, as in PyTorch
        F.square_matmul_(leaf, w)


def test_block_rows_budget():
    assert SQ.block_rows_for(65536, 2) == 4096
    assert SQ.block_rows_for(65536, 1) == 8192
    assert SQ.block_rows_for(10, 2) == 1
    for rows in (1, 7, 300, 1000, 4097, 65535):
        for bufs in (1, 2):
            b = SQ.block_rows_for(rows, bufs)
            assert 1 <= b and (b * bufs * SQ.SCRATCH_FRACTION <= rows or b == 1)


# ---------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize("overlap", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("transpose", [False, True])
def test_gpu_matches_reference(overlap, dtype, transpose, poisoned_pool):
    import cupy

    dt = backend.as_dtype(dtype)
    rng = np.random.default_rng(3)
    tol = 1e-4 if dtype == "float32" else 3e-2
    for rows, n, block in ((1000, 64, None), (333, 40, 64), (16, 24, None), (7, 8, 2), (4096, 256, None)):
        x = rng.standard_normal((rows, n)).astype(dt)
        w = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(dt)
        b = rng.standard_normal(n).astype(dt) if transpose else None
        act = "relu" if transpose else None
        xg = cupy.asarray(x)
        SQ.square_matmul_(xg, cupy.asarray(w), transpose, None if b is None else cupy.asarray(b), act,
                          config=SQ.SquareMatmulConfig(block_rows=block, overlap_copies=overlap))
        want = SQ.square_matmul_ref(x.copy(), w, transpose, b, act)
        np.testing.assert_allclose(cupy.asnumpy(xg).astype(np.float64), want.astype(np.float64), rtol=tol,
                                   atol=tol)


@pytest.mark.gpu
def test_gpu_extra_memory_within_an_eighth():
    import cupy

    pool = cupy.get_default_memory_pool()
    rs = cupy.random.RandomState(0)
    x = rs.standard_normal((8192, 512), dtype=cupy.float32).astype(cupy.float16)
    w = rs.standard_normal((512, 512), dtype=cupy.float32).astype(cupy.float16)
    SQ.square_matmul_(x.copy(), w, True)  # plans and workspace exist before the measured call
    cupy.cuda.Device().synchronize()
    base, peak = pool.used_bytes(), [0]

    def alloc(size):
        mem = pool.malloc(size)
        peak[0] = max(peak[0], pool.used_bytes())
        return mem

    cupy.cuda.set_allocator(alloc)
    try:
        F.square_matmul_(Tensor._from_array(x), Tensor._from_array(w), True)
    finally:
        cupy.cuda.set_allocator(pool.malloc)
    assert peak[0] - base <= x.nbytes / 8
