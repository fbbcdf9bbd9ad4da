"""minifused.linalg's decompositions, solvers and matrix functions (minifused/ops/linalg*.py) beyond their registry
entries (tests/opinfo.py, LINALG_OPS): the result tuples and their fields, LinAlgError and the ``_ex`` infos,
batching and broadcasting, gradients against float64 central differences (gradcheck) through every Function and
PyTorch's conventions where the math leaves a choice (symmetric gradients of cholesky / eigh, no gradient from
extra columns of full factors), the singular cases, the drivers and fields of lstsq, the top-level and Tensor
spellings, and bad inputs. Values against float64 NumPy. On the GPU: the CuPy path against PyTorch's on the GPU."""
import math
import warnings

import numpy as np
import pytest

import minifused as mf
from minifused.autograd import gradcheck
from opinfo import make_arrays

L = mf.linalg


def f64(a, requires_grad=False, device="cpu"):
    return mf.tensor(np.asarray(a, np.float64), device=device, requires_grad=requires_grad)


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def spd(*shape, seed=0):
    x = randn(*shape, seed=seed)
    return x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])


def spd_of(x):
    """x x^T + n I, differentiable: a symmetric positive-definite matrix for gradcheck to perturb."""
    return x @ x.mT + x.shape[-1] * mf.eye(x.shape[-1], dtype=x.dtype)


def close(t, want, rtol=1e-10, atol=1e-12):
    got = t.detach().numpy() if isinstance(t, mf.Tensor) else np.asarray(t)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


# ---------------------------------------------------------------- values, fields and batching
def test_factorizations_values_and_fields():
    a = randn(2, 4, 4)
    close(L.inv(f64(a)), np.linalg.inv(a))
    close(L.det(f64(a)), np.linalg.det(a))
    sign, logabsdet = np.linalg.slogdet(a)
    r = L.slogdet(f64(a))
    close(r.sign, sign)
    close(r.logabsdet, logabsdet)
    s = spd(3, 4, 4)
    low = L.cholesky(f64(s))
    close(low, np.linalg.cholesky(s))
    close(L.cholesky(f64(s), upper=True), np.swapaxes(np.linalg.cholesky(s), -1, -2))
    w, v = L.eigh(f64(s))
    close(w, np.linalg.eigvalsh(s))
    close(v @ mf.diag_embed(w) @ v.mT, s, rtol=1e-9)
    close(L.eigvalsh(f64(s), UPLO="u"), np.linalg.eigvalsh(s, UPLO="U"))
    upper_only, lower_only = s[0] + np.tril(np.full((4, 4), 9.0), -1), s[0] + np.triu(np.full((4, 4), 9.0), 1)
    close(L.cholesky(f64(upper_only), upper=True), np.linalg.cholesky(s[0]).T)  # the other triangle is not read
    close(L.cholesky(f64(lower_only)), np.linalg.cholesky(s[0]))
    close(L.eigvalsh(f64(upper_only), UPLO="U"), np.linalg.eigvalsh(s[0]))
    x = randn(2, 5, 3)
    q, rr = L.qr(f64(x))
    close(q @ rr, x)
    assert q.shape == (2, 5, 3) and rr.shape == (2, 3, 3)
    q, rr = L.qr(f64(x), mode="complete")
    assert q.shape == (2, 5, 5) and rr.shape == (2, 5, 3)
    close(q.mT @ q, np.broadcast_to(np.eye(5), (2, 5, 5)), atol=1e-12)
    q, rr = L.qr(f64(x), mode="r")
    assert q.shape == (0,)
    close(rr.abs(), np.abs(np.linalg.qr(x, mode="r")))
    u, sv, vh = L.svd(f64(x))
    assert u.shape == (2, 5, 5) and sv.shape == (2, 3) and vh.shape == (2, 3, 3)
    close(sv, np.linalg.svd(x, compute_uv=False))
    close((u[..., :3] * sv.unsqueeze(-2)) @ vh, x)
    close(L.svdvals(f64(x)), np.linalg.svd(x, compute_uv=False))
    assert type(r).__name__ == "linalg_slogdet" and L.eigh(f64(s))._fields == ("eigenvalues", "eigenvectors")
    assert L.svd(f64(x))._fields == ("U", "S", "Vh") and L.qr(f64(x))._fields == ("Q", "R")


def test_float32_results_keep_their_dtype():
    a = mf.tensor(randn(3, 3).astype(np.float32))
    for out in (L.inv(a), L.det(a), L.slogdet(a)[1], L.svdvals(a), L.matrix_exp(a), L.pinv(a), L.solve(a, a)):
        assert out.dtype == mf.float32
    assert L.inv_ex(a).info.dtype == mf.int32 and L.matrix_rank(a).dtype == mf.int64


def test_solve_vector_rule_broadcasting_and_left():
    a, b = randn(2, 1, 3, 3), randn(4, 3, 2, seed=1)
    close(L.solve(f64(a), f64(b)), np.linalg.solve(a, b))
    a2, v = randn(2, 3, 3), randn(2, 3, seed=2)
    # B with A's shape less its last dim is a batch of vectors; one 1-D B serves every matrix
    close(L.solve(f64(a2), f64(v)), np.linalg.solve(a2, v[..., None])[..., 0])
    close(L.solve(f64(a2), f64(v[0])), np.linalg.solve(a2, v[0][:, None])[..., 0])
    # (3, 3) beside (2, 3, 3) is not a batch of vectors: it is a matrix, broadcast
    close(L.solve(f64(a2), f64(a2[0])), np.linalg.solve(a2, a2[0]))
    c = randn(2, 5, 3, seed=3)
    close(L.solve(f64(a2[0]), f64(c), left=False), c @ np.linalg.inv(a2[0]))
    res = L.solve_ex(f64(a2), f64(v))
    assert res._fields == ("result", "info") and res.info.tolist() == [0, 0]


def test_solve_triangular_reads_one_triangle():
    a, b = randn(2, 4, 4) + 4 * np.eye(4), randn(2, 4, 3, seed=1)
    for upper in (True, False):
        t = np.triu(a) if upper else np.tril(a)
        close(L.solve_triangular(f64(a), f64(b), upper=upper), np.linalg.solve(t, b))
        unit = t - t * np.eye(4) + np.eye(4)
        close(L.solve_triangular(f64(a), f64(b), upper=upper, unitriangular=True), np.linalg.solve(unit, b))
        bt = np.swapaxes(b, -1, -2)
        close(L.solve_triangular(f64(a), f64(bt), upper=upper, left=False), bt @ np.linalg.inv(t))
    # a zero on the diagonal: inf / NaN, as trsm computes, not an error
    out = L.solve_triangular(f64([[1.0, 1.0], [0.0, 0.0]]), f64([[1.0], [1.0]]), upper=True).numpy()
    assert np.isinf(out).all()


def test_cholesky_solve_and_inverse():
    s = spd(2, 4, 4)
    low = np.linalg.cholesky(s)
    b = randn(3, 1, 4, 2, seed=1)
    close(mf.cholesky_solve(f64(b), f64(low)), np.linalg.solve(s, b))
    close(mf.cholesky_solve(f64(b), f64(np.swapaxes(low, -1, -2)), upper=True), np.linalg.solve(s, b))
    close(mf.cholesky_inverse(f64(low)), np.linalg.inv(s))
    close(f64(np.swapaxes(low, -1, -2)).cholesky_inverse(True), np.linalg.inv(s))


def test_pinv_tolerances_and_matrix_rank():
    a = randn(5, 2) @ randn(2, 4, seed=1)  # rank 2
    close(L.pinv(f64(a)), np.linalg.pinv(a), rtol=1e-8, atol=1e-10)
    assert L.matrix_rank(f64(a)).item() == 2
    assert mf.stack([L.matrix_rank(f64(a)), L.matrix_rank(f64(a.T))]).tolist() == [2, 2]  # a 0-d array each
    s = np.diag([4.0, 1.0, 0.1])
    close(L.pinv(f64(s), atol=0.5), np.diag([0.25, 1.0, 0.0]))
    close(L.pinv(f64(s), rtol=0.2), np.diag([0.25, 1.0, 0.0]))
    close(L.pinv(f64(s), 0.2), np.diag([0.25, 1.0, 0.0]))  # rcond, the older spelling of rtol
    close(mf.pinverse(f64(s), rcond=0.3), np.diag([0.25, 0.0, 0.0]))
    assert L.matrix_rank(f64(s), atol=0.5).item() == 2 and L.matrix_rank(f64(s), 2.0).item() == 1
    assert L.matrix_rank(f64(np.stack([s, -s])), hermitian=True).tolist() == [3, 3]
    close(L.pinv(f64(-s), hermitian=True, rtol=0.2), -np.diag([0.25, 1.0, 0.0]))
    close(L.pinv(f64(np.zeros((0, 3)))), np.zeros((3, 0)))


@pytest.mark.parametrize("driver", ["gelsy", "gelsd", "gelss", "gels"])
def test_lstsq_fields_follow_pytorchs_rules(driver):
    a, b = randn(5, 3), randn(5, 2, seed=1)
    r = L.lstsq(f64(a), f64(b), driver=driver)
    assert r._fields == ("solution", "residuals", "rank", "singular_values")
    sol, res, _, sv = np.linalg.lstsq(a, b, rcond=None)
    close(r.solution, sol)
    close(r.residuals, res if driver != "gelsy" else np.zeros(0))  # gelsy computes none
    assert r.rank.tolist() == ([] if driver == "gels" else 3)
    close(r.singular_values, sv if driver in ("gelsd", "gelss") else np.zeros(0))
    deficient = randn(6, 2, seed=2) @ randn(2, 3, seed=3)
    r = L.lstsq(f64(deficient), f64(randn(6, 2, seed=4)), driver="gelsd")
    assert r.rank.item() == 2 and r.residuals.shape == (0,)  # residuals only where every A has full rank
    close(r.solution, np.linalg.pinv(deficient) @ randn(6, 2, seed=4), rtol=1e-8, atol=1e-10)
    vec = L.lstsq(f64(randn(2, 5, 3)), f64(randn(2, 5, seed=5)), driver="gelsd")
    assert vec.solution.shape == (2, 3) and vec.residuals.shape == (2, 1) and vec.rank.tolist() == [3, 3]


def test_matrix_functions():
    a = randn(3, 3, 3) * np.array([0.01, 1.0, 20.0])[:, None, None]  # each matrix scaled by its own power of 2
    want = []
    for m in a:
        w, v = np.linalg.eig(m)
        want.append((v * np.exp(w)) @ np.linalg.inv(v))
    close(L.matrix_exp(f64(a)), np.real(np.array(want)), rtol=1e-8, atol=1e-10)
    h = L.matrix_exp(mf.tensor(a[1].astype(np.float16)))  # float16: computed in float32, rounded once
    assert h.dtype == mf.float16
    close(h.float(), np.real(want[1]), rtol=2e-3, atol=2e-3)
    m = randn(2, 3, 3, seed=1)
    for n in (0, 1, 2, 5, -1, -3):
        close(L.matrix_power(f64(m), n), np.linalg.matrix_power(m, n), rtol=1e-9)
    assert mf.matrix_power(mf.tensor([[1, 1], [1, 0]]), 10).tolist() == [[89, 55], [55, 34]]  # integers, as matmul
    x, y, z, w = randn(4), randn(4, 6, seed=1), randn(6, 2, seed=2), randn(2, seed=3)
    close(L.multi_dot([f64(x), f64(y), f64(z), f64(w)]), x @ y @ z @ w)
    close(L.multi_dot([f64(y.T), f64(y), f64(z)]), y.T @ y @ z)
    with pytest.warns(UserWarning, match="chain_matmul is deprecated"):
        close(mf.chain_matmul(f64(y), f64(z)), y @ z)


def test_thin_ones_and_norms():
    a, b = randn(4, 3), randn(1, 3, seed=1)
    close(L.cross(f64(a), f64(b)), np.cross(a, b))
    close(L.vecdot(f64(a), f64(b[0])), a @ b[0])
    close(L.vecdot(f64(a.T), f64(a.T), dim=0), (a * a).sum(1))
    c = randn(2, 3, 4)
    close(L.diagonal(f64(c), offset=1), np.diagonal(c, 1, -2, -1))
    v = randn(4, seed=2)
    close(L.matmul(f64(c), f64(v)), c @ v)
    for p in (None, 2, -2, "fro", "nuc", math.inf, -math.inf, 1, -1):
        close(L.cond(f64(c[:, :3, :3]), p), np.linalg.cond(c[:, :3, :3], p), rtol=1e-9)
    close(L.cond(f64(c)), np.linalg.cond(c))  # 2-norm: any shape
    assert L.cond(f64([[1.0, 2.0], [2.0, 4.0]]), "fro").item() == math.inf  # singular: inf, no error
    for ord_ in ("nuc", 2, -2):
        close(L.matrix_norm(f64(c), ord_, dim=(2, 0), keepdim=True),
              np.linalg.norm(c, ord_, axis=(2, 0), keepdims=True))
        close(L.norm(f64(c[0]), ord_), np.linalg.norm(c[0], ord_))


def test_top_level_and_tensor_spellings():
    a = randn(3, 3)
    s = spd(3, 3)
    t = f64(a)
    for got, want in ((mf.det(t), np.linalg.det(a)), (t.det(), np.linalg.det(a)), (t.inverse(), np.linalg.inv(a)),
                      (mf.inverse(t), np.linalg.inv(a)), (t.pinverse(), np.linalg.pinv(a)),
                      (t.matrix_power(2), a @ a), (mf.matrix_exp(t), L.matrix_exp(t).numpy()),
                      (t.slogdet().logabsdet, np.linalg.slogdet(a)[1]), (f64(s).logdet(), np.linalg.slogdet(s)[1])):
        close(got, want)
    assert type(mf.slogdet(t)).__name__ == "slogdet"
    logdet = mf.logdet(f64(np.stack([np.diag([-1.0, 2.0]), np.zeros((2, 2)), np.eye(2)]))).numpy()
    assert np.isnan(logdet[0]) and logdet[1] == -math.inf and logdet[2] == 0
    x = randn(4, 3)
    u, sv, v = mf.svd(f64(x))  # V, not Vh
    assert u.shape == (4, 3) and v.shape == (3, 3)
    close((u * sv) @ v.mT, x)
    u, sv, v = f64(x).svd(some=False)
    assert u.shape == (4, 4) and v.shape == (3, 3)
    u, sv, v = mf.svd(f64(x), compute_uv=False)
    assert not u.numpy().any() and u.shape == (4, 4) and v.shape == (3, 3)
    close(sv, np.linalg.svd(x, compute_uv=False))
    with pytest.warns(UserWarning, match="torch.qr is deprecated"):
        q, r = mf.qr(f64(x), some=False)
    assert q.shape == (4, 4) and r.shape == (4, 3)
    with pytest.warns(UserWarning, match="torch.cholesky is deprecated"):
        close(f64(s).cholesky(upper=True), np.linalg.cholesky(s).T)
    b = randn(3, 2)
    close(f64(b).cholesky_solve(f64(np.linalg.cholesky(s))), np.linalg.solve(s, b))


def test_empty_inputs():
    assert L.inv(f64(np.zeros((0, 0)))).shape == (0, 0) and L.inv(f64(np.zeros((0, 3, 3)))).shape == (0, 3, 3)
    assert L.det(f64(np.zeros((2, 0, 0)))).tolist() == [1.0, 1.0]
    assert L.cholesky(f64(np.zeros((0, 0)))).shape == (0, 0)
    assert L.solve(f64(np.zeros((0, 0))), f64(np.zeros((0, 2)))).shape == (0, 2)
    u, s, vh = L.svd(f64(np.zeros((0, 3))))
    assert u.shape == (0, 0) and s.shape == (0,) and vh.shape == (3, 3)
    assert L.matrix_exp(f64(np.zeros((0, 2, 2)))).shape == (0, 2, 2)


# ---------------------------------------------------------------- failures: LinAlgError and the infos
def test_singular_and_not_positive_definite_raise_linalg_error():
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    assert issubclass(L.LinAlgError, RuntimeError)
    with pytest.raises(L.LinAlgError, match="linalg.inv: The diagonal element 2 is zero, the inversion could not"):
        L.inv(f64(singular))
    with pytest.raises(L.LinAlgError, match=r"linalg.inv: \(Batch element 1\): The diagonal element 1 is zero"):
        mf.inverse(f64(np.stack([np.eye(2), np.zeros((2, 2))])))
    with pytest.raises(L.LinAlgError, match=r"\(Batch element 1\): The solver failed because the input matrix is "
                                            r"singular"):
        L.solve(f64(np.stack([np.eye(2), singular])), f64(np.ones((2, 2))))
    with pytest.raises(L.LinAlgError, match="the leading minor of order 2 is not positive-definite"):
        L.cholesky(f64([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(L.LinAlgError, match="linalg.inv: The diagonal element 2"):
        L.matrix_power(f64(singular), -2)


def test_ex_forms_report_infos():
    a = f64(np.stack([np.eye(2), [[1.0, 2.0], [2.0, 4.0]], np.zeros((2, 2))]))
    inverse, info = L.inv_ex(a)
    assert info.tolist() == [0, 2, 1] and info.dtype == mf.int32 and not info.requires_grad
    close(inverse[0], np.eye(2))
    assert np.isnan(inverse[1:].numpy()).all()  # undefined where info > 0: NaN here
    with pytest.raises(L.LinAlgError, match=r"linalg.inv_ex: \(Batch element 1\)"):
        L.inv_ex(a, check_errors=True)
    assert L.solve_ex(a, f64(np.ones((3, 2)))).info.tolist() == [0, 2, 1]
    m = np.stack([np.eye(3), [[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]], -np.eye(3), np.diag([1.0, 1, -1])])
    low, info = L.cholesky_ex(f64(m))
    assert info.tolist() == [0, 2, 1, 3]
    close(low[0], np.eye(3))
    with pytest.raises(L.LinAlgError, match="linalg.cholesky_ex: .Batch element 1.: The factorization"):
        L.cholesky_ex(f64(m), check_errors=True)


# ---------------------------------------------------------------- gradients
def test_gradients_of_the_factorizations():
    a = f64(randn(2, 3, 3), True)
    assert gradcheck(L.inv, [a]) and gradcheck(L.det, [a]) and gradcheck(lambda x: L.slogdet(x).logabsdet, [a])
    assert gradcheck(lambda x: L.inv_ex(x).inverse, [a])
    x = f64(randn(2, 3, 3, seed=1), True)
    assert gradcheck(lambda x: L.cholesky(spd_of(x)), [x])
    assert gradcheck(lambda x: L.cholesky(spd_of(x), upper=True), [x])
    assert gradcheck(lambda x: mf.logdet(spd_of(x)), [x])
    sym = lambda x: x + x.mT  # noqa: E731
    assert gradcheck(lambda x: (lambda w, v: (w, v * v))(*L.eigh(sym(x))), [x])
    assert gradcheck(lambda x: (lambda w, v: (w, v * v))(*L.eigh(sym(x), UPLO="U")), [x])
    assert gradcheck(lambda x: L.eigvalsh(sym(x)), [x])
    for shape in ((4, 3), (3, 3), (2, 3, 5)):
        y = f64(randn(*shape, seed=2), True)
        assert gradcheck(lambda y: L.qr(y), [y]), shape
        assert gradcheck(lambda y: L.svdvals(y), [y]), shape
        k = min(shape[-2:])
        assert gradcheck(lambda y: (lambda u, s, vh: (u[..., :k] @ vh[..., :k, :], s, u[..., :k] * u[..., :k]))(
            *L.svd(y)), [y]), shape
    wide = f64(randn(3, 5, seed=3), True)
    assert gradcheck(lambda y: L.qr(y, mode="complete"), [wide])


def test_det_gradient_where_the_matrix_is_singular():
    """det is a polynomial: its gradient, the adjugate's transpose, exists at singular matrices too (rank n - 1:
    not zero; rank n - 2: zero), where det(A) A^-T does not."""
    a = randn(3, 3)
    a[2] = a[0] + 2 * a[1]
    t = f64(a, True)
    L.det(t).backward()
    adj = np.array([[(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(a, i, 0), j, 1)) for j in range(3)]
                    for i in range(3)])
    close(t.grad, adj, atol=1e-12)
    assert np.abs(adj).max() > 0.1
    assert gradcheck(L.det, [f64(a, True)])
    z = f64(np.outer(randn(3), randn(3, seed=1)), True)
    L.det(z).backward()
    close(z.grad, np.zeros((3, 3)), atol=1e-14)


def test_gradients_follow_pytorchs_conventions():
    """cholesky and eigh read one triangle; PyTorch's gradient (and ours) is the symmetric one, so a symmetric
    perturbation of A sees the true derivative. svd(full_matrices=True): U's extra columns carry no gradient."""
    s = f64(spd(4, 4), True)
    (L.cholesky(s) * f64(randn(4, 4, seed=1))).sum().backward()
    close(s.grad, s.grad.numpy().T, atol=1e-14)
    s2 = f64(spd(4, 4), True)
    (L.eigh(s2).eigenvectors ** 2 * f64(randn(4, 4, seed=2))).sum().backward()
    close(s2.grad, s2.grad.numpy().T, atol=1e-12)
    x = f64(randn(4, 3), True)
    L.svd(x).U[:, 3].sum().backward()
    close(x.grad, np.zeros((4, 3)), atol=1e-14)


def test_qr_gradient_refusals():
    x = f64(randn(4, 3), True)
    with pytest.raises(RuntimeError, match="not computed when mode='r'"):
        L.qr(x, mode="r").R.sum().backward()
    with pytest.raises(RuntimeError, match="not differentiable when mode='complete' and nrows > ncols"):
        L.qr(x, mode="complete").R.sum().backward()


def test_gradients_of_the_solvers():
    a, b = f64(randn(2, 1, 3, 3), True), f64(randn(4, 3, 2, seed=1), True)
    assert gradcheck(L.solve, [a, b])
    assert gradcheck(lambda a, b: L.solve(a, b, left=False), [f64(randn(3, 3), True), f64(randn(2, 4, 3), True)])
    assert gradcheck(L.solve, [f64(randn(2, 3, 3), True), f64(randn(3), True)])
    t, c = f64(randn(2, 3, 3) + 3 * np.eye(3), True), f64(randn(3, 2, seed=1), True)
    for upper in (True, False):
        assert gradcheck(lambda t, c: L.solve_triangular(t, c, upper=upper), [t, c])
        assert gradcheck(lambda t, c: L.solve_triangular(t, c.mT, upper=upper, left=False, unitriangular=True),
                         [t, c])
    # the factor's other triangle is not read; PyTorch's gradient (ours) fills it anyway, so gradcheck goes through
    # the triangle, and the gradient on it is checked
    low = np.linalg.cholesky(spd(3, 3))
    for upper in (False, True):
        factor = f64(low.T if upper else low, True)
        tri = (lambda l: l.triu()) if upper else (lambda l: l.tril())  # noqa: E731
        assert gradcheck(lambda b, l: mf.cholesky_solve(b, tri(l), upper), [f64(randn(2, 3, 2), True), factor])
        assert gradcheck(lambda l: mf.cholesky_inverse(tri(l), upper), [factor])
    noise = np.triu(randn(3, 3, seed=4), 1)  # garbage above the diagonal of a lower factor changes nothing
    close(mf.cholesky_solve(f64(np.eye(3)), f64(low + noise)), np.linalg.inv(spd(3, 3)), rtol=1e-9)
    for shape in ((3, 5), (5, 3), (2, 4, 4)):
        assert gradcheck(L.pinv, [f64(randn(*shape, seed=3), True)]), shape
    assert gradcheck(lambda x: L.pinv(x + x.mT, hermitian=True), [f64(randn(3, 3), True)])
    x, y = f64(randn(5, 3), True), f64(randn(5, 2, seed=1), True)
    assert gradcheck(lambda x, y: L.lstsq(x, y, driver="gelsd")[:2], [x, y])
    assert gradcheck(lambda x, y: L.lstsq(x, y).solution, [f64(randn(3, 5), True), f64(randn(3, 2), True)])


def test_gradients_of_the_matrix_functions_and_norms():
    for scale in (0.1, 1.0, 8.0):
        assert gradcheck(L.matrix_exp, [f64(randn(2, 3, 3) * scale, True)], rtol=1e-5), scale
    m = f64(randn(2, 3, 3), True)
    for n in (1, 3, 4, -2):
        assert gradcheck(lambda m: L.matrix_power(m, n), [m]), n
    assert gradcheck(lambda *t: L.multi_dot(t), [f64(randn(3), True), f64(randn(3, 4), True),
                                                 f64(randn(4, 2), True), f64(randn(2, 5), True)])
    c = f64(randn(2, 3, 4), True)
    for ord_ in ("nuc", 2, -2):
        assert gradcheck(lambda c: L.matrix_norm(c, ord_), [c]), ord_
    for p in (None, -2, "fro", 1, math.inf):
        assert gradcheck(lambda m: L.cond(m, p), [m]), p
    assert gradcheck(lambda a, b: L.cross(a, b, dim=0), [f64(randn(3, 2), True), f64(randn(3, 1), True)])
    assert gradcheck(L.vecdot, [f64(randn(2, 4), True), f64(randn(4), True)])


def test_no_grad_paths_skip_the_vectors_but_match():
    x = randn(3, 4)
    with mf.no_grad():
        s = L.svdvals(f64(x, True))
        w = L.eigvalsh(f64(spd(4, 4), True))
    close(s, np.linalg.svd(x, compute_uv=False))
    close(w, np.linalg.eigvalsh(spd(4, 4)))
    assert not s.requires_grad


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("call,exc,match", [
    (lambda: L.inv(mf.ones(2, 2, dtype=mf.float16)), TypeError, "linalg.inv: not implemented for 'Half'"),
    (lambda: L.svd(mf.ones(2, 2, dtype=mf.bfloat16)), TypeError, "not implemented for 'BFloat16'"),
    (lambda: L.cholesky(mf.ones(2, 2, dtype=mf.int64)), TypeError,
     "linalg.cholesky: Expected a floating point or complex tensor as input. Got Long"),
    (lambda: L.det(mf.ones(3)), RuntimeError, "linalg.det: The input tensor A must have at least 2 dimensions"),
    (lambda: L.eigh(mf.ones(2, 3)), ValueError, "linalg.eigh: A must be batches of square matrices, but they are "
                                                "2 by 3 matrices"),
    (lambda: L.eigh(mf.ones(2, 2), UPLO="X"), RuntimeError, "Expected UPLO argument to be 'L' or 'U', but got X"),
    (lambda: L.qr(mf.ones(2, 2), mode="full"), RuntimeError, "qr received unrecognized mode 'full'"),
    (lambda: L.svd(mf.ones(2, 2, device="cpu"), driver="gesvd"), RuntimeError, "only supported on CUDA inputs"),
    (lambda: L.solve(mf.ones(3, 3), mf.ones(4)), RuntimeError,
     r"linalg.solve: Incompatible shapes of A and B for the equation AX = B \(3x3 and 4x1\)"),
    (lambda: L.solve(mf.ones(3, 3), mf.ones(3), left=False), RuntimeError, r"XA = B \(3x3 and 3x1\)"),
    (lambda: L.solve(mf.ones(3, 3), mf.ones(3, dtype=mf.float64)), TypeError,
     "Expected A and B to have the same dtype, but found A of type Float and B of type Double"),
    (lambda: L.solve(mf.ones(2, 3, 3), mf.ones(4, 3, 1)), RuntimeError, "cannot be broadcast"),
    (lambda: L.solve_triangular(mf.ones(2, 2), mf.ones(3, 1), upper=True), RuntimeError, r"\(2x2 and 3x1\)"),
    (lambda: L.solve_triangular(mf.ones(2, 2), mf.ones(2, 1)), TypeError, "upper"),
    (lambda: mf.cholesky_solve(mf.ones(3), mf.eye(3)), RuntimeError, "b should have at least 2 dimensions"),
    (lambda: L.lstsq(mf.ones(3, 2), mf.ones(4, 2)), RuntimeError, r"input.size\(-2\) should match other.size\(-2\)"),
    (lambda: L.lstsq(mf.ones(3, 2), mf.ones(3, 2), driver="gesv"), RuntimeError, "driver` should be one of"),
    (lambda: L.matrix_power(mf.ones(2, 3), 2), RuntimeError, "A must be batches of square matrices"),
    (lambda: L.matrix_power(mf.ones(2, 2), 2.0), TypeError, "argument 'n' .position 2. must be int, not float"),
    (lambda: L.matrix_exp(mf.ones(2, 2, dtype=mf.int64)), TypeError, "Expected a floating point"),
    (lambda: L.multi_dot([mf.ones(3)]), RuntimeError, "expected at least 2 tensors but got 1"),
    (lambda: L.multi_dot([mf.ones(2, 2), mf.ones(2), mf.ones(2, 2)]), RuntimeError, "tensor 1 must be 2D but got 1D"),
    (lambda: L.multi_dot([mf.ones(2, 3), mf.ones(2, 2)]), RuntimeError,
     r"tensors 0 and 1 with shapes \[2, 3\] and \[2, 2\] cannot be multiplied"),
    (lambda: L.cross(mf.ones(2, 3), mf.ones(3)), RuntimeError, "inputs must have the same number of dimensions"),
    (lambda: L.cross(mf.ones(3, 4), mf.ones(3, 4)), RuntimeError, "inputs dimension -1 must have length 3"),
    (lambda: L.vecdot(mf.ones(3, dtype=mf.int64), mf.ones(3, dtype=mf.int64)), TypeError, "Got Long"),
    (lambda: L.cond(mf.ones(2, 2), p=3), ValueError, "linalg.cond got an invalid norm type: 3"),
    (lambda: L.cond(mf.ones(2, 3), p="fro"), RuntimeError, "A must be batches of square matrices"),
    (lambda: L.matrix_norm(mf.ones(2, 2, dtype=mf.float16), "nuc"), TypeError, "Low precision dtypes not supported"),
    (lambda: L.pinv(mf.ones(2, 2), 0.1, atol=0.1), TypeError, "cannot be combined"),
    (lambda: L.det([[1.0]]), TypeError, "argument 'A' must be Tensor, not list"),
    (lambda: mf.chain_matmul(mf.ones(2), mf.ones(2, 2)), RuntimeError, "Tensor dimension is 1, expected 2"),
])
def test_bad_input(call, exc, match):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with pytest.raises(exc, match=match):
            call()


# ---------------------------------------------------------------- the GPU: CuPy against PyTorch on the GPU
def _signless(name, out):
    """Values free of the signs a factorization may pick differently (columns of U / V / Q, eigenvectors)."""
    if name in ("qr",):
        q, r = out
        d = r.diagonal(dim1=-2, dim2=-1).sign()
        return q * d.unsqueeze(-2), r * d.unsqueeze(-1)
    if name == "svd":
        u, s, vh = out
        return u @ vh, s
    if name == "eigh":
        w, v = out
        return w, v * v
    return out if isinstance(out, tuple) else (out,)


GPU_CASES = {  # name: (the op on the module m (minifused or torch), input makers)
    "inv": (lambda m, a: m.linalg.inv(a), [lambda: randn(2, 4, 4)]),
    "det": (lambda m, a: m.linalg.det(a), [lambda: randn(3, 4, 4)]),
    "slogdet": (lambda m, a: m.linalg.slogdet(a)[1], [lambda: randn(2, 4, 4)]),
    "cholesky": (lambda m, a: m.linalg.cholesky(a @ a.mT + 4 * m.eye(4, dtype=a.dtype, device=a.device)),
                 [lambda: randn(2, 4, 4)]),
    "cholesky_upper": (lambda m, a: m.linalg.cholesky(a @ a.mT + 4 * m.eye(4, dtype=a.dtype, device=a.device),
                                                      upper=True), [lambda: randn(4, 4)]),
    "qr": (lambda m, a: m.linalg.qr(a), [lambda: randn(2, 6, 4)]),
    "qr_wide": (lambda m, a: m.linalg.qr(a), [lambda: randn(3, 5)]),
    "svd": (lambda m, a: m.linalg.svd(a, full_matrices=False), [lambda: randn(2, 6, 4)]),
    "svd_large": (lambda m, a: m.linalg.svd(a, full_matrices=False), [lambda: randn(40, 35)]),
    "svdvals": (lambda m, a: m.linalg.svdvals(a), [lambda: randn(3, 4, 5)]),
    "eigh": (lambda m, a: m.linalg.eigh(a + a.mT), [lambda: randn(2, 5, 5)]),
    "eigvalsh": (lambda m, a: m.linalg.eigvalsh(a + a.mT, UPLO="U"), [lambda: randn(5, 5)]),
    "solve": (lambda m, a, b: m.linalg.solve(a, b), [lambda: randn(2, 1, 4, 4), lambda: randn(3, 4, 2, seed=1)]),
    "solve_vector": (lambda m, a, b: m.linalg.solve(a, b), [lambda: randn(2, 4, 4), lambda: randn(2, 4, seed=1)]),
    "solve_right": (lambda m, a, b: m.linalg.solve(a, b, left=False), [lambda: randn(4, 4), lambda: randn(3, 4)]),
    "solve_large": (lambda m, a, b: m.linalg.solve(a, b), [lambda: randn(3, 80, 80) + 20 * np.eye(80),
                                                           lambda: randn(3, 80, 2, seed=1)]),
    "solve_triangular": (lambda m, a, b: m.linalg.solve_triangular(a, b, upper=False),
                         [lambda: randn(2, 4, 4) + 4 * np.eye(4), lambda: randn(2, 4, 3, seed=1)]),
    "solve_triangular_right_unit": (lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True, left=False,
                                                                              unitriangular=True),
                                    [lambda: randn(4, 4), lambda: randn(2, 3, 4, seed=1)]),
    "cholesky_solve": (lambda m, b, low: m.cholesky_solve(b, low),
                       [lambda: randn(2, 4, 3), lambda: np.linalg.cholesky(spd(4, 4))]),
    "cholesky_inverse": (lambda m, low: m.cholesky_inverse(low, upper=True),
                         [lambda: np.linalg.cholesky(spd(4, 4)).T]),
    "pinv": (lambda m, a: m.linalg.pinv(a), [lambda: randn(2, 5, 3)]),
    "pinv_hermitian": (lambda m, a: m.linalg.pinv(a + a.mT, hermitian=True), [lambda: randn(4, 4)]),
    "lstsq": (lambda m, a, b: m.linalg.lstsq(a, b).solution, [lambda: randn(2, 6, 3), lambda: randn(2, 6, 2)]),
    "matrix_exp": (lambda m, a: m.linalg.matrix_exp(a),
                   [lambda: randn(3, 4, 4) * np.array([0.1, 1, 8])[:, None, None]]),
    "matrix_power": (lambda m, a: m.linalg.matrix_power(a, -3), [lambda: randn(2, 3, 3)]),
    "matrix_norm_nuc": (lambda m, a: m.linalg.matrix_norm(a, "nuc"), [lambda: randn(2, 4, 3)]),
    "cond": (lambda m, a: m.linalg.cond(a), [lambda: randn(2, 4, 4)]),
    "multi_dot": (lambda m, a, b, c: m.linalg.multi_dot([a, b, c]),
                  [lambda: randn(5), lambda: randn(5, 3), lambda: randn(3, 4)]),
}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(GPU_CASES))
def test_cuda_matches_pytorch(torch, name, dtype):
    """Values and the gradient of every input, ours on the GPU (CuPy's solvers) against PyTorch's on the GPU, from
    the same inputs in ``dtype``; through sign-free values where a factorization picks signs."""
    fn, makers = GPU_CASES[name]
    arrays = [np.asarray(make()).astype(dtype) for make in makers]
    ours = [mf.tensor(a, device="cuda", requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, device="cuda", requires_grad=True) for a in arrays]
    kind = name.split("_")[0]
    out, tout = _signless(kind, fn(mf, *ours)), _signless(kind, fn(torch, *theirs))
    tol = 2e-4 if dtype == "float32" else 1e-9
    loss, tloss = 0, 0
    for i, (o, t) in enumerate(zip(out, tout, strict=True)):
        assert o.device.type == "cuda" and o.shape == tuple(t.shape)
        want = t.detach().cpu().double().numpy()
        got = o.detach().cpu().double().numpy()
        assert np.linalg.norm(got - want) <= tol * max(np.linalg.norm(want), 1.0), (name, i)
        w = randn(*o.shape, seed=10 + i).astype(dtype)
        loss = loss + (o * mf.tensor(w, device="cuda")).sum()
        tloss = tloss + (t * torch.tensor(w, device="cuda")).sum()
    loss.backward()
    tloss.backward()
    for i, (o, t) in enumerate(zip(ours, theirs)):
        want, got = t.grad.cpu().double().numpy(), o.grad.cpu().double().numpy()
        assert np.linalg.norm(got - want) <= 10 * tol * max(np.linalg.norm(want), 1.0), (name, "grad", i)


@pytest.mark.gpu
def test_cuda_failures_and_infos():
    singular = mf.tensor([[1.0, 2.0], [2.0, 4.0]], device="cuda")
    with pytest.raises(L.LinAlgError, match="The diagonal element 2 is zero"):
        L.inv(singular)
    with pytest.raises(L.LinAlgError, match="the leading minor of order 2 is not positive-definite"):
        L.cholesky(mf.tensor([[1.0, 2.0], [2.0, 1.0]], device="cuda"))
    batch = mf.stack([mf.eye(2, device="cuda"), singular, mf.zeros(2, 2, device="cuda")])
    inverse, info = L.inv_ex(batch)
    assert info.device.type == "cuda" and info.cpu().tolist() == [0, 2, 1]
    np.testing.assert_allclose(inverse[0].cpu().numpy(), np.eye(2))
    assert L.solve_ex(batch, mf.ones(3, 2, 1, device="cuda")).info.cpu().tolist() == [0, 2, 1]
    out = L.solve_triangular(mf.tensor([[1.0, 1.0], [0.0, 0.0]], device="cuda"), mf.ones(2, 1, device="cuda"),
                             upper=True)
    assert np.isinf(out.cpu().numpy()).all() or np.isnan(out.cpu().numpy()).any()
    arrays = make_arrays([(2, 3, 3)])
    assert L.matrix_rank(mf.tensor(arrays[0], device="cuda")).cpu().tolist() == [3, 3]
