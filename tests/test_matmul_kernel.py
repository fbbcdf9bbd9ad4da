"""kernels.matmul: ``a @ b`` as one cuBLASLt (strided-batched) GEMM, for every operand layout it takes, against a
float64 product; and the layouts it leaves to CuPy (None)."""
import importlib

import numpy as np
import pytest

import minifused as mf
from minifused.kernels.cublaslt import OP_N, OP_T
from minifused.kernels.matmul import _batch_stride, _matrix

#: |error| allowed per unit of max|a| * max|b| * k: float32's accumulation, the 16-bit types' one rounding
TOL = {"float32": 1e-6, "float16": 2e-3, "bfloat16": 1.6e-2}


def test_matrix_layouts():
    """(op, ld) of the last two dims as cuBLASLt reads them (NumPy arrays: the same strides as CuPy's)."""
    a = np.zeros((6, 10), np.float32)
    assert _matrix(a, 6, 10) == (OP_N, 10)
    assert _matrix(a[:, :4], 6, 4) == (OP_N, 10)  # a column slice: ld the parent's row
    assert _matrix(a.T, 10, 6) == (OP_T, 10)  # a transposed view: read transposed, no copy
    assert _matrix(a[:, ::2], 6, 5) is None  # no unit stride
    assert _matrix(a[:1, :4], 1, 4) == (OP_N, 4)
    assert _matrix(a[:, :1], 6, 1) == (OP_N, 10)  # one column: its rows' stride
    assert _matrix(np.zeros((1, 1), np.float32), 1, 1) == (OP_N, 1)
    assert _matrix(np.broadcast_to(a[:1], (6, 10)), 6, 10) is None  # rows 0 apart


def test_batch_strides():
    x = np.zeros((2, 3, 4, 5), np.float32)
    assert _batch_stride(x, (2, 3)) == 20
    assert _batch_stride(x[:, 1:], (2, 2)) is None  # two strides
    assert _batch_stride(x[:1], (1, 3)) == 20 and _batch_stride(x[:, :1], (2, 1)) == 60
    assert _batch_stride(np.zeros((1, 1, 4, 5)), (2, 3)) == 0  # one matrix for the batch
    assert _batch_stride(x[0], (2, 3)) is None  # broadcast in part
    assert _batch_stride(x[0], (1, 3)) == 20
    assert _batch_stride(np.broadcast_to(x[:1], (2, 3, 4, 5)), (2, 3)) is None
    assert _batch_stride(x[::-1], (2, 3)) is None


def _layouts(rng, batch_a, batch_b, m, k, n):
    """(a, b) host operands in several layouts: contiguous, transposed views, sliced rows (ld > cols)."""
    def make(lead, r, c, form):
        if form == "rows":
            return rng.standard_normal((*lead, r, c))
        if form == "cols":
            return np.swapaxes(rng.standard_normal((*lead, c, r)), -1, -2)
        return rng.standard_normal((*lead, r, c + 3))[..., 1:c + 1]  # ld = c + 3, one element in
    for fa, fb in (("rows", "rows"), ("cols", "rows"), ("rows", "cols"), ("cols", "cols"), ("slice", "slice")):
        yield make(batch_a, m, k, fa), make(batch_b, k, n, fb)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shapes", [((), (), 1, 1, 1), ((), (), 17, 65, 3), ((), (), 64, 96, 128),
                                    ((4,), (4,), 32, 64, 16), ((3,), (), 5, 7, 9), ((), (3,), 5, 7, 9),
                                    ((2, 3), (2, 3), 8, 5, 12), ((1, 3), (3,), 4, 4, 4), ((2, 1), (1,), 33, 2, 1)],
                         ids=str)
def test_gpu_matmul_matches_float64(dtype, shapes, poisoned_pool):
    import cupy

    from minifused.kernels.matmul import matmul

    batch_a, batch_b, m, k, n = shapes
    dt = getattr(mf, dtype)
    rng = np.random.default_rng(m * 1000 + n)
    for ha, hb in _layouts(rng, batch_a, batch_b, m, k, n):
        a = cupy.asarray(np.ascontiguousarray(ha)).astype(dt)  # the values rounded to dtype first
        a_host = cupy.asnumpy(a.astype(np.float64))
        b = cupy.asarray(np.ascontiguousarray(hb)).astype(dt)
        b_host = cupy.asnumpy(b.astype(np.float64))
        if ha.strides[-1] != ha.itemsize:  # the same layout on the GPU: a transposed view of a copy
            a = cupy.swapaxes(cupy.ascontiguousarray(cupy.swapaxes(a, -1, -2)), -1, -2)
        if hb.strides[-1] != hb.itemsize:
            b = cupy.swapaxes(cupy.ascontiguousarray(cupy.swapaxes(b, -1, -2)), -1, -2)
        got = matmul(a, b)
        want = np.matmul(a_host, b_host)
        assert got is not None and got.dtype == dt and got.shape == want.shape and got.flags.c_contiguous
        scale = np.abs(a_host).max() * np.abs(b_host).max() * k
        tol = TOL[dtype] * scale
        np.testing.assert_allclose(cupy.asnumpy(got.astype(np.float64)), want, rtol=0, atol=tol)
    # views of larger arrays: ld > cols, a pointer off alignment, batch strides larger than a matrix
    big = rng.standard_normal((*batch_a, m + 2, k + 5))
    a = cupy.asarray(big).astype(dt)[..., 1:m + 1, 2:k + 2]
    b = cupy.asarray(rng.standard_normal((*batch_b, k, n))).astype(dt)
    a_host, b_host = cupy.asnumpy(a.astype(np.float64)), cupy.asnumpy(b.astype(np.float64))
    got = matmul(a, b)
    assert got is not None
    scale = np.abs(a_host).max() * np.abs(b_host).max() * k
    np.testing.assert_allclose(cupy.asnumpy(got.astype(np.float64)), np.matmul(a_host, b_host), rtol=0,
                               atol=TOL[dtype] * scale)


@pytest.mark.gpu
def test_gpu_matmul_leaves_what_does_not_fit():
    import cupy

    from minifused.kernels.matmul import matmul

    a = cupy.ones((4, 6), np.float32)
    assert matmul(a[:, ::2], cupy.ones((3, 2), np.float32)) is None  # no unit stride
    assert matmul(a, cupy.ones((6, 2), np.float64)) is None  # two dtypes
    assert matmul(a.astype(np.float64), cupy.ones((6, 2), np.float64)) is None  # float64: CuPy's
    assert matmul(cupy.ones((2, 4, 6), np.float32)[:, :, :0], cupy.ones((0, 2), np.float32)) is None  # empty
    assert matmul(cupy.ones(6, np.float32), cupy.ones((6, 2), np.float32)) is None  # 1-D


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_gpu_bmm_and_its_gradients_match_pytorch(dtype):
    """Through the op layer (forward and both gradients, whose transposed operands the kernel reads as they
    are), against PyTorch's bmm and matmul on the same values."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    ha, hb = rng.standard_normal((6, 33, 20)).astype(np.float32), rng.standard_normal((20, 17)).astype(np.float32)
    hb3 = rng.standard_normal((6, 20, 17)).astype(np.float32)
    for fn, other in (("bmm", hb3), ("matmul", hb)):
        ta = torch.tensor(ha, device="cuda").to(getattr(torch, dtype)).requires_grad_()
        tb = torch.tensor(other, device="cuda").to(getattr(torch, dtype)).requires_grad_()
        a = mf.tensor(ha, device="cuda").to(getattr(mf, dtype)).requires_grad_()
        b = mf.tensor(other, device="cuda").to(getattr(mf, dtype)).requires_grad_()
        ty = getattr(torch, fn)(ta, tb)
        y = getattr(mf, fn)(a, b)
        g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
        ty.backward(torch.tensor(g, device="cuda").to(ty.dtype))
        y.backward(mf.tensor(g, device="cuda").to(y.dtype))
        tol = 1e-5 if dtype == "float32" else 2e-2
        for mine, theirs in ((y, ty), (a.grad, ta.grad), (b.grad, tb.grad)):
            ref = theirs.detach().float().cpu().numpy()
            np.testing.assert_allclose(mine.float().cpu().numpy(), ref, rtol=tol, atol=tol * np.abs(ref).max())


@pytest.mark.gpu
def test_gpu_matmul_of_more_matrices_than_a_grid_dim_holds():
    """70000 products of 3x2 by 2x5 (a batch past 65535, the grid's y and z limit) and 70000 x-rows by one W."""
    import cupy

    from minifused.kernels.matmul import matmul

    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((70000, 3, 2)), rng.standard_normal((70000, 2, 5))
    got = matmul(cupy.asarray(a, np.float32), cupy.asarray(b, np.float32))
    assert got is not None
    np.testing.assert_allclose(cupy.asnumpy(got), np.matmul(a, b), rtol=0, atol=1e-5)
    w = rng.standard_normal((2, 5))
    got = matmul(cupy.asarray(a, np.float32), cupy.asarray(w, np.float32))  # folded into one GEMM of 210000 rows
    np.testing.assert_allclose(cupy.asnumpy(got), np.matmul(a, w), rtol=0, atol=1e-5)


@pytest.mark.parametrize("equation,shapes", [
    ("bhqd,bhkd->bhqk", [(2, 3, 5, 4), (2, 3, 6, 4)]), ("bhqk,bhkd->bhqd", [(2, 3, 5, 6), (2, 3, 6, 4)]),
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("ij,kj->ki", [(3, 4), (5, 4)]), ("i,j->ij", [(3,), (4,)]),
    ("bi,bi->b", [(6, 4), (6, 4)]), ("abc,cd->dba", [(2, 3, 4), (4, 5)]), ("nct,cd->ndt", [(2, 3, 4), (3, 5)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]), ("ij,jk->i", [(3, 4), (4, 5)]), ("ii,ij->j", [(3, 3), (3, 4)])])
def test_einsum_pairs_as_one_product(equation, shapes, monkeypatch):
    """The CUDA path's folding of two operands into one batched product (here with NumPy's matmul as the
    product): the same values as NumPy's einsum, or None where the equation needs more (a sum within one
    operand, a repeated subscript)."""
    M = importlib.import_module("minifused.ops.matmul")  # (the package's name matmul is the function)
    monkeypatch.setattr(M, "cuda_matmul", lambda a, b: np.matmul(a, b))
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in shapes]
    lhs, target = equation.split("->")
    got = M._pair_product(lhs.split(","), arrays, target)
    if equation in ("ij,jk->i", "ii,ij->j"):
        assert got is None
    else:
        np.testing.assert_allclose(got, np.einsum(equation, *arrays), rtol=1e-12, atol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("equation,shapes", [("bhqd,bhkd->bhqk", [(2, 3, 17, 8), (2, 3, 9, 8)]),
                                             ("abc,cd->dba", [(2, 5, 4), (4, 7)]), ("i,j->ij", [(3,), (5,)])])
def test_gpu_einsum_and_its_gradients_match_pytorch(dtype, equation, shapes):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    hosts = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    theirs = [torch.tensor(h, device="cuda").to(getattr(torch, dtype)).requires_grad_() for h in hosts]
    ours = [mf.tensor(h, device="cuda").to(getattr(mf, dtype)).requires_grad_() for h in hosts]
    ty, y = torch.einsum(equation, *theirs), mf.einsum(equation, *ours)
    g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    ty.backward(torch.tensor(g, device="cuda").to(ty.dtype))
    y.backward(mf.tensor(g, device="cuda").to(y.dtype))
    tol = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 2e-2}[dtype]
    for mine, ref in [(y, ty)] + [(a.grad, t.grad) for a, t in zip(ours, theirs)]:
        assert mine.dtype == getattr(mf, dtype)
        ref = ref.detach().float().cpu().numpy()
        np.testing.assert_allclose(mine.float().cpu().numpy(), ref, rtol=tol, atol=tol * np.abs(ref).max())


@pytest.mark.parametrize("a_shape,b_shape", [((4, 4, 2), (2, 0)), ((4, 4, 0), (0, 3)), ((0, 4, 2), (2, 3)),
                                             ((3, 5, 2), (2, 4))])
def test_batched_times_matrix_gradients_with_zero_sizes(a_shape, b_shape):
    """A batched operand times a shared matrix, with a zero size anywhere: its gradients are the NumPy products
    (zeros where a size is 0; the matrix's was a reshape error for an empty output), on the CPU."""
    rng = np.random.default_rng(0)
    a0, b0 = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    g = rng.standard_normal(a_shape[:-1] + b_shape[-1:])
    a, b = mf.tensor(a0, requires_grad=True), mf.tensor(b0, requires_grad=True)
    (a @ b).backward(mf.tensor(g))
    np.testing.assert_allclose(a.grad.numpy(), g @ b0.T, atol=1e-12)
    rows = int(np.prod(a_shape[:-1]))
    np.testing.assert_allclose(b.grad.numpy(), a0.reshape(rows, a_shape[-1]).T @ g.reshape(rows, b_shape[-1]),
                               atol=1e-12)
