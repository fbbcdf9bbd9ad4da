"""minifused.linalg's vander, tensorinv, tensorsolve, the LU family (lu_factor / lu_factor_ex / lu / lu_solve and the
top-level lu_unpack, lu, lu_solve) and householder_product / orgqr (minifused/ops/linalg_lu.py, linalg_funcs.py,
linalg_decomp.py, linalg_solve.py, linalg_toplevel.py): values against float64 NumPy references written here (a
textbook LU with partial pivoting, the explicit product of the reflectors), hand-computed factors, infos and errors
as PyTorch gives them, batching, and gradients against central differences (gradcheck)."""
import warnings

import numpy as np
import pytest

import minifused as mf
from minifused.autograd import gradcheck
from minifused.ops.linalg_lu import getrf

L = mf.linalg


def f64(a, requires_grad=False):
    return mf.tensor(np.asarray(a, np.float64), device="cpu", requires_grad=requires_grad)


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def close(t, want, rtol=1e-10, atol=1e-12):
    got = t.detach().numpy() if isinstance(t, mf.Tensor) else np.asarray(t)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def ref_lu(a, pivot=True):
    """(P, L, U, pivots) of one (m, n) matrix: Doolittle elimination, each column's pivot the first of its
    largest entries (LAPACK's getf2)."""
    a = np.array(a, np.float64)
    m, n = a.shape
    k = min(m, n)
    perm, pivots = np.arange(m), []
    for j in range(k):
        p = j + int(np.argmax(np.abs(a[j:, j]))) if pivot else j
        pivots.append(p + 1)
        a[[j, p]], perm[[j, p]] = a[[p, j]], perm[[p, j]]
        if a[j, j] != 0:
            a[j + 1:, j] /= a[j, j]
        a[j + 1:, j + 1:] -= np.outer(a[j + 1:, j], a[j, j + 1:])
    P = np.eye(m)[:, perm]  # A = P L U: row i of L U is row perm[i] of A
    return P, np.tril(a[:, :k], -1) + np.eye(m, k), np.triu(a[:k, :]), np.array(pivots, np.int32)


# ---------------------------------------------------------------- vander, tensorinv, tensorsolve
def test_vander_values_dtypes_and_gradient():
    x = np.array([1.5, -2.0, 0.0])
    close(L.vander(f64(x)), np.vander(x, increasing=True))
    close(L.vander(f64(x), N=5), np.vander(x, 5, increasing=True))
    b = randn(2, 3)
    close(L.vander(f64(b), N=4), np.stack([np.vander(r, 4, increasing=True) for r in b]))
    close(L.vander(f64(2.5), N=3), [[1.0, 2.5, 6.25]])  # a 0-d x is one entry
    v = L.vander(mf.tensor(np.array([1, 2], np.uint8), device="cpu"), N=10)
    assert v.dtype == np.int64 and v.tolist()[1][-1] == 512  # integers in int64, as cumprod's
    assert L.vander(mf.zeros(0, device="cpu"), N=3).shape == (0, 3)
    assert gradcheck(lambda t: L.vander(t, N=4), [f64(x, True)])  # a zero entry included
    with pytest.raises(RuntimeError, match="N must be greater than 1"):
        L.vander(f64(x), N=1)
    with pytest.raises(RuntimeError, match="N must be greater than 1"):
        L.vander(f64(2.0))
    with pytest.raises(TypeError, match="but got Bool"):
        L.vander(mf.tensor([True], device="cpu"))
    with pytest.raises(TypeError, match="but got Half"):
        L.vander(mf.ones(2, dtype=mf.float16, device="cpu"))
    with pytest.raises(TypeError):
        L.vander(f64(x), 3)  # N is keyword-only, as PyTorch's


def test_tensorinv():
    a = randn(4, 6, 8, 3)
    inverse = L.tensorinv(f64(a), ind=2)
    close(inverse, np.linalg.tensorinv(a, ind=2), rtol=1e-9, atol=1e-12)
    assert inverse.shape == (8, 3, 4, 6)
    close(np.tensordot(a, inverse.numpy(), 2), np.eye(24).reshape(4, 6, 4, 6), atol=1e-10)
    b = randn(6, 2, 3, seed=1)
    close(L.tensorinv(f64(b), 1), np.linalg.tensorinv(b, 1), rtol=1e-9, atol=1e-12)
    assert gradcheck(lambda t: L.tensorinv(t, 1), [f64(randn(4, 2, 2, seed=2), True)])
    with pytest.raises(RuntimeError, match="strictly positive integer for 'ind', but got 0"):
        L.tensorinv(f64(a), ind=0)
    with pytest.raises(RuntimeError, match=r"prod\(self.shape\[ind:\]\) == prod\(self.shape\[:ind\]\), but got 144 "
                                           r"!= 4"):
        L.tensorinv(f64(a), ind=1)
    with pytest.raises(RuntimeError, match="'ind' must be at most input.ndim"):
        L.tensorinv(f64(np.eye(4)), ind=3)
    with pytest.raises(L.LinAlgError, match="linalg.tensorinv: The diagonal element 1 is zero"):
        L.tensorinv(f64(np.zeros((2, 2, 2, 2))))
    with pytest.raises(TypeError, match="'ind' must be int"):
        L.tensorinv(f64(np.eye(4)), ind=1.0)


def test_tensorsolve():
    a, b = randn(2, 3, 6), randn(2, 3, seed=1)
    x = L.tensorsolve(f64(a), f64(b))
    close(x, np.linalg.tensorsolve(a, b), rtol=1e-9, atol=1e-12)
    assert x.shape == (6,)
    c = randn(6, 2, 3, seed=2)  # dims (0,) moved to the end: (2, 3, 6)
    close(L.tensorsolve(f64(c), f64(b), dims=(0,)), np.linalg.tensorsolve(c, b, axes=(0,)), rtol=1e-9, atol=1e-12)
    assert gradcheck(L.tensorsolve, [f64(a, True), f64(b, True)])
    with pytest.raises(RuntimeError, match=r"but got 18 != 2"):
        L.tensorsolve(f64(a), f64(np.ones(2)))
    with pytest.raises(TypeError, match="'dims' must be tuple of ints"):
        L.tensorsolve(f64(a), f64(b), dims=0)
    with pytest.raises(L.LinAlgError, match="linalg.tensorsolve: The solver failed because the input matrix is "
                                            "singular"):
        L.tensorsolve(f64(np.zeros((2, 2))), f64(np.ones(2)))
    with pytest.raises(RuntimeError, match="at most input.ndim"):
        L.tensorsolve(f64(np.ones(4)), f64(np.ones((2, 2))))


# ---------------------------------------------------------------- LU: values
def test_lu_factor_hand_computed():
    a = np.array([[1.0, 2, 3], [4, 5, 6], [7, 8, 10]])
    LU, pivots = L.lu_factor(f64(a))
    close(LU, [[7, 8, 10], [1 / 7, 6 / 7, 11 / 7], [4 / 7, 1 / 2, -1 / 2]], atol=1e-15)
    assert pivots.dtype == np.int32 and pivots.tolist() == [3, 3, 3]  # 1-based, as LAPACK's
    r = L.lu_factor_ex(f64(a))
    assert type(r).__name__ == "linalg_lu_factor_ex" and r._fields == ("LU", "pivots", "info")
    assert r.info.dtype == np.int32 and r.info.shape == () and r.info.item() == 0
    P, Lo, U = L.lu(f64(a))
    close(P, [[0, 1, 0], [0, 0, 1], [1, 0, 0]])
    close(Lo, [[1, 0, 0], [1 / 7, 1, 0], [4 / 7, 1 / 2, 1]], atol=1e-15)
    assert type(L.lu(f64(a))).__name__ == "linalg_lu" and type(L.lu_factor(f64(a))).__name__ == "linalg_lu_factor"


@pytest.mark.parametrize("shape", [(4, 4), (3, 5, 5), (5, 3), (3, 5), (2, 3, 6, 4), (1, 1)])
def test_lu_against_partial_pivoting_reference(shape):
    a = randn(*shape, seed=3)
    flat = a.reshape((-1,) + shape[-2:])
    refs = [ref_lu(m) for m in flat]
    P, Lo, U = L.lu(f64(a))
    for got, i in ((P, 0), (Lo, 1), (U, 2)):
        close(got, np.stack([r[i] for r in refs]).reshape(shape[:-2] + refs[0][i].shape))
    LU, pivots, info = L.lu_factor_ex(f64(a))
    assert pivots.tolist() == np.stack([r[3] for r in refs]).reshape(shape[:-2] + (min(shape[-2:]),)).tolist()
    assert not info.numpy().any() and info.shape == shape[:-2]
    close(P @ Lo @ U, a)
    P2, L2, U2 = mf.lu_unpack(LU, pivots)
    close(P2, P.numpy())
    close(L2, Lo.numpy())
    close(U2, U.numpy())


def test_lu_float32_and_empty():
    a = randn(3, 4, 4, seed=4)
    LU, pivots = L.lu_factor(mf.tensor(a.astype(np.float32), device="cpu"))
    assert LU.dtype == np.float32 and pivots.dtype == np.int32
    close(LU, L.lu_factor(f64(a)).LU.numpy(), rtol=1e-4, atol=1e-5)
    P, Lo, U = L.lu(f64(np.zeros((2, 3, 0))))
    assert P.shape == (2, 3, 3) and Lo.shape == (2, 3, 0) and U.shape == (2, 0, 0)
    close(P, np.broadcast_to(np.eye(3), (2, 3, 3)))
    assert L.lu_factor(f64(np.zeros((0, 2, 2)))).pivots.shape == (0, 2)


def test_lu_singular_infos_and_errors():
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    LU, pivots, info = L.lu_factor_ex(f64(np.zeros((3, 3))))
    assert info.item() == 1 and pivots.tolist() == [1, 2, 3] and not LU.numpy().any()
    LU, pivots, info = L.lu_factor_ex(f64(np.stack([np.eye(2), singular])))
    assert info.tolist() == [0, 2] and pivots.tolist() == [[1, 2], [2, 2]]
    close(LU[1], [[2, 4], [0.5, 0]])  # the factorization goes on past the zero pivot, as getrf's
    P, Lo, U = L.lu(f64(singular))  # lu factors a singular matrix without complaint
    close(P @ Lo @ U, singular)
    with pytest.raises(RuntimeError, match=r"torch.linalg.lu_factor: U\[2,2\] is zero and using it on lu_solve"):
        L.lu_factor(f64(singular))
    with pytest.raises(RuntimeError, match=r"lu_factor_ex: \(Batch element 1\): U\[2,2\] is zero"):
        L.lu_factor_ex(f64(np.stack([np.eye(2), singular])), check_errors=True)
    with pytest.raises(RuntimeError, match="LU without pivoting is not implemented on the CPU"):
        L.lu_factor(f64(np.eye(2)), pivot=False)
    with pytest.raises(RuntimeError, match="LU without pivoting is not implemented on the CPU"):
        L.lu(f64(np.eye(2)), pivot=False)
    with pytest.raises(TypeError):
        L.lu_factor(f64(np.eye(2)), True)  # pivot is keyword-only
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        L.lu_factor(f64(np.ones(3)))
    with pytest.raises(TypeError, match="Got Long"):
        L.lu_factor(mf.ones(2, 2, dtype=mf.int64, device="cpu"))


def test_getrf_without_pivoting():
    """The cuda path of pivot=False, on arrays: plain Doolittle elimination, pivots 1..k."""
    a = randn(2, 4, 3, seed=5) + 4 * np.eye(4, 3)
    lu, pivots, info, perm = getrf(np, a, pivot=False)
    for i in range(2):
        _, Lo, U, piv = ref_lu(a[i], pivot=False)
        close(lu[i], np.tril(Lo, -1) + np.pad(U, ((0, 1), (0, 0))))  # L's multipliers below U
        assert pivots[i].tolist() == [1, 2, 3] == piv.tolist()
    assert not info.any() and perm.tolist() == [[0, 1, 2, 3]] * 2


def test_lu_unpack_options_and_errors():
    a = randn(4, 3, seed=6)
    LU, pivots = L.lu_factor(f64(a))
    P, Lo, U = mf.lu_unpack(LU, pivots, unpack_data=False)
    assert Lo.shape == (0,) and U.shape == (0,) and type(mf.lu_unpack(LU, pivots)).__name__ == "lu_unpack"
    close(P, ref_lu(a)[0])
    P, Lo, U = mf.lu_unpack(LU, pivots, unpack_pivots=False)
    assert P.shape == (0,) and Lo.shape == (4, 3) and U.shape == (3, 3)
    with pytest.raises(TypeError, match="torch.int32"):
        mf.lu_unpack(LU, pivots.long())
    with pytest.raises(RuntimeError, match="must be between 1 and LU.size"):
        mf.lu_unpack(LU, mf.tensor([5, 1, 1], dtype=mf.int32, device="cpu"))
    with pytest.raises(RuntimeError, match="2 or more dimensions"):
        mf.lu_unpack(f64(np.ones(3)), pivots)
    assert not hasattr(mf.Tensor, "lu_unpack")  # a function only, as PyTorch's


# ---------------------------------------------------------------- lu_solve
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve_modes_and_broadcasting(left, adjoint):
    a, b = randn(2, 4, 4, seed=7), randn(3, 1, 4, 2, seed=8)
    b = b if left else np.swapaxes(b, -1, -2)
    LU, pivots = L.lu_factor(f64(a))
    x = L.lu_solve(LU, pivots, f64(b), left=left, adjoint=adjoint)
    op = np.swapaxes(a, -1, -2) if adjoint else a
    want = np.linalg.solve(op, b) if left else np.swapaxes(np.linalg.solve(np.swapaxes(op, -1, -2),
                                                                         np.swapaxes(b, -1, -2)), -1, -2)
    close(x, want, rtol=1e-9, atol=1e-12)
    assert x.shape == (3, 2) + b.shape[-2:]


def test_lu_solve_errors():
    LU, pivots = L.lu_factor(f64(randn(3, 3)))
    b = f64(np.ones((3, 2)))
    with pytest.raises(RuntimeError, match="The input tensor B must have at least 2 dimensions"):
        L.lu_solve(LU, pivots, f64(np.ones(3)))
    with pytest.raises(RuntimeError, match=r"Incompatible shapes of A and B for the equation XA = B \(3x3 and 3x2\)"):
        L.lu_solve(LU, pivots, b, left=False)
    with pytest.raises(TypeError, match="Expected LU and B to have the same dtype"):
        L.lu_solve(LU, pivots, mf.ones(3, 2, device="cpu"))
    with pytest.raises(TypeError, match="pivots should be a Tensor of scalar type torch.int32"):
        L.lu_solve(LU, pivots.long(), b)
    with pytest.raises(RuntimeError, match="Expected LU.shape.:-1. and pivots.shape to be the same"):
        L.lu_solve(LU.expand(2, 3, 3), pivots, b)
    with pytest.raises(RuntimeError, match="must all be greater or equal to 1"):
        L.lu_solve(LU, mf.tensor([0, 1, 1], dtype=mf.int32, device="cpu"), b)
    with pytest.raises(RuntimeError, match="must all be smaller or equal to LU.size"):
        L.lu_solve(LU, mf.tensor([4, 1, 1], dtype=mf.int32, device="cpu"), b)
    with pytest.raises(RuntimeError, match="cannot be broadcast"):
        L.lu_solve(LU.expand(4, 3, 3), pivots.expand(4, 3), f64(np.ones((5, 3, 2))))
    assert L.lu_solve(f64(np.zeros((2, 0, 0))), mf.zeros(2, 0, dtype=mf.int32, device="cpu"),
                      f64(np.zeros((0, 3)))).shape == (2, 0, 3)


# ---------------------------------------------------------------- gradients (central differences)
@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 3), (4, 2), (2, 4)])
def test_lu_gradients(shape):
    a = f64(randn(*shape, seed=9), True)
    assert gradcheck(lambda t: L.lu(t)[1:], [a])
    assert gradcheck(lambda t: L.lu_factor(t).LU, [a])
    assert gradcheck(lambda t: mf.lu_unpack(*L.lu_factor(t))[1:], [a])


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve_gradients(left, adjoint):
    a, b = f64(randn(2, 3, 3, seed=10), True), f64(randn(3, 2, seed=11), True)
    bb = b if left else b.mT
    # through the factorization, w.r.t. A and B: the gradients of a solve
    assert gradcheck(lambda x, y: L.lu_solve(*L.lu_factor(x), y, left=left, adjoint=adjoint), [a, bb])
    LU, pivots = L.lu_factor(a.detach())
    lu = f64(LU.numpy(), True)  # w.r.t. the packed LU itself (its two triangles)
    assert gradcheck(lambda t: L.lu_solve(t, pivots, bb.detach(), left=left, adjoint=adjoint), [lu])


def test_lu_solve_gradient_equals_solve_gradient():
    a, b = randn(3, 3, seed=12), randn(3, 2, seed=13)
    g = randn(3, 2, seed=14)
    ta, tb = f64(a, True), f64(b, True)
    (L.lu_solve(*L.lu_factor(ta), tb) * f64(g)).sum().backward()
    gb = np.linalg.solve(a.T, g)
    close(tb.grad, gb, rtol=1e-9)
    close(ta.grad, -gb @ np.linalg.solve(a, b).T, rtol=1e-9)


# ---------------------------------------------------------------- householder_product, orgqr
def ref_householder(a, tau):
    m, n = a.shape
    q = np.eye(m)
    for i in range(tau.shape[-1]):
        v = np.concatenate([np.zeros(i), [1.0], a[i + 1:, i]])
        q = q @ (np.eye(m) - tau[i] * np.outer(v, v))
    return q[:, :n]


def test_householder_product_values_and_gradients():
    a, tau = randn(2, 5, 3, seed=15), randn(2, 2, seed=16)
    q = L.householder_product(f64(a), f64(tau))
    close(q, np.stack([ref_householder(a[i], tau[i]) for i in range(2)]))
    # reflectors of a QR: tau = 2 / |v|^2 makes each H orthogonal, so the product has orthonormal columns
    v_tau = 2 / (1 + (a[0, 1:, 0] ** 2).sum())
    q1 = L.householder_product(f64(a[0]), f64([v_tau]))
    close(q1.mT @ q1, np.eye(3), atol=1e-12)
    close(mf.orgqr(f64(a), f64(tau)), q.numpy())
    close(f64(a).orgqr(f64(tau)), q.numpy())
    close(L.householder_product(f64(a[0]), f64(np.zeros(0))), np.eye(5, 3))
    assert gradcheck(L.householder_product, [f64(a, True), f64(tau, True)])
    assert gradcheck(L.householder_product, [f64(randn(4, 4, seed=17), True), f64(randn(4, seed=18), True)])


def test_householder_product_errors():
    with pytest.raises(RuntimeError, match=r"input.shape\[-2\] must be greater than or equal to input.shape\[-1\]"):
        L.householder_product(f64(np.ones((2, 3))), f64(np.ones(2)))
    with pytest.raises(RuntimeError, match=r"input.shape\[-1\] must be greater than or equal to tau.shape\[-1\]"):
        L.householder_product(f64(np.ones((4, 3))), f64(np.ones(4)))
    with pytest.raises(RuntimeError, match="Expected batch dimensions of tau to be equal to input.shape"):
        L.householder_product(f64(np.ones((2, 4, 3))), f64(np.ones((3, 2))))
    with pytest.raises(RuntimeError, match="Expected tau to have one dimension less than input"):
        L.householder_product(f64(np.ones((2, 4, 3))), f64(np.ones(2)))
    with pytest.raises(TypeError, match="tau dtype Float does not match input dtype Double"):
        L.householder_product(f64(np.ones((4, 3))), mf.ones(2, device="cpu"))


# ---------------------------------------------------------------- the top-level spellings
def test_top_level_lu_and_lu_solve():
    a, b = randn(3, 3, seed=19), randn(3, 2, seed=20)
    LU, pivots = L.lu_factor(f64(a))
    with pytest.warns(UserWarning, match="torch.lu is deprecated in favor of torch.linalg.lu_factor"):
        r = mf.lu(f64(a))
    assert type(r) is tuple and len(r) == 2
    close(r[0], LU.numpy())
    with pytest.warns(UserWarning, match="torch.lu is deprecated"):
        r = mf.lu(f64([[1.0, 2.0], [2.0, 4.0]]), get_infos=True)  # no error for a singular matrix
    assert type(r).__name__ == "_lu_with_info" and r.info.item() == 2
    with pytest.warns(UserWarning, match="torch.lu is deprecated"):
        r = f64(a).lu(get_infos=True)
    assert type(r) is tuple and len(r) == 3
    with pytest.warns(UserWarning, match="Note that torch.linalg.lu_solve has its arguments reversed"):
        x = mf.lu_solve(f64(b), LU, pivots)
    close(x, np.linalg.solve(a, b), rtol=1e-9)
    with pytest.warns(UserWarning, match="torch.lu_solve is deprecated") as record:
        close(f64(b).lu_solve(LU, pivots), np.linalg.solve(a, b), rtol=1e-9)
    assert record[0].filename == __file__  # attributed to the caller
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="LU without pivoting is not implemented on the CPU"):
            mf.lu(f64(a), pivot=False)


def test_autocast_on_cpu():
    a = mf.tensor((np.eye(3) + 0.1).astype(np.float32), device="cpu").to(mf.bfloat16)
    pivots = mf.tensor([1, 2, 3], dtype=mf.int32, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with mf.autocast("cpu", dtype=mf.bfloat16):  # on PyTorch's cpu float32 list
            assert mf.lu(a)[0].dtype == np.float32 and mf.lu_solve(a, a, pivots).dtype == np.float32
            assert L.householder_product(a, a[0, :2]).dtype == np.float32
            assert L.tensorinv(a, 1).dtype == np.float32 and L.tensorsolve(a, a[0]).dtype == np.float32
            with pytest.raises(TypeError, match="BFloat16"):  # linalg.lu_factor is not on it
                L.lu_factor(a)
