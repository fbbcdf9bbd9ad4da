"""``svd_lowrank`` / ``pca_lowrank`` against NumPy's float64 SVD: on matrices of rank at most q the randomized
decomposition is exact (to rounding), whatever the Gaussian draw."""
import numpy as np
import pytest

import minifused as mf


def low_rank(shape, rank, seed=0):
    rs = np.random.RandomState(seed)
    *batch, m, n = shape
    return rs.randn(*batch, m, rank) @ rs.randn(*batch, rank, n)


def _orthonormal(Q):
    eye = np.broadcast_to(np.eye(Q.shape[-1]), Q.shape[:-2] + (Q.shape[-1],) * 2)
    np.testing.assert_allclose(np.swapaxes(Q, -1, -2) @ Q, eye, atol=1e-10)


@pytest.mark.parametrize("shape", [(10, 7), (7, 10), (2, 8, 6)])
def test_svd_lowrank_is_exact_on_a_low_rank_matrix(shape):
    a = low_rank(shape, 3)
    U, S, V = (t.numpy() for t in mf.svd_lowrank(mf.from_numpy(a), q=4))
    assert U.shape == shape[:-1] + (4,) and S.shape == shape[:-2] + (4,) and V.shape == shape[:-2] + (shape[-1], 4)
    np.testing.assert_allclose(S[..., :3], np.linalg.svd(a, compute_uv=False)[..., :3], rtol=1e-10)
    np.testing.assert_allclose((U * S[..., None, :]) @ np.swapaxes(V, -1, -2), a, atol=1e-10)
    _orthonormal(U)
    _orthonormal(V)


def test_svd_lowrank_of_a_difference_with_M():
    a, mean = low_rank((9, 6), 2), np.random.RandomState(1).randn(1, 6)
    U, S, V = mf.svd_lowrank(mf.from_numpy(a + mean), q=2, niter=1, M=mf.from_numpy(mean))
    np.testing.assert_allclose(S.numpy(), np.linalg.svd(a, compute_uv=False)[:2], rtol=1e-10)


def test_pca_lowrank_centres_the_columns_and_repeats_under_a_seed():
    a = low_rank((12, 5), 5, seed=2)
    mf.manual_seed(0)
    U, S, V = mf.pca_lowrank(mf.from_numpy(a))
    assert S.shape == (5,)  # q = min(6, m, n)
    np.testing.assert_allclose(S.numpy(), np.linalg.svd(a - a.mean(0), compute_uv=False), rtol=1e-10)
    mf.manual_seed(0)
    np.testing.assert_array_equal(mf.pca_lowrank(mf.from_numpy(a))[2].numpy(), V.numpy())
    S_raw = mf.pca_lowrank(mf.from_numpy(a), q=5, center=False)[1]
    np.testing.assert_allclose(S_raw.numpy(), np.linalg.svd(a, compute_uv=False), rtol=1e-10)


def test_gradient_of_the_singular_values():
    a = np.random.RandomState(3).randn(6, 4)
    x = mf.from_numpy(a).requires_grad_()
    mf.svd_lowrank(x, q=4)[1].sum().backward()  # the nuclear norm: its gradient U V^T
    u, _, vh = np.linalg.svd(a, full_matrices=False)
    np.testing.assert_allclose(x.grad.numpy(), u @ vh, atol=1e-8)


@pytest.mark.parametrize("fn, exc, match", [
    (lambda: mf.pca_lowrank(mf.zeros(4, 3), q=4), ValueError, "not greater than min"),
    (lambda: mf.pca_lowrank(mf.zeros(4, 3), niter=-1), ValueError, "niter"),
    (lambda: mf.svd_lowrank(mf.zeros(4)), ValueError, "matrix"),
    (lambda: mf.svd_lowrank(mf.zeros(4, 3, dtype=mf.int64)), TypeError, "floating"),
    (lambda: mf.svd_lowrank(np.zeros((4, 3))), TypeError, "Tensor"),
    (lambda: mf.svd_lowrank(mf.zeros(4, 3), q=2.0), TypeError, "'q'"),
])
def test_bad_input(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()
