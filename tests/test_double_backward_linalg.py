"""Second (and third) derivatives of the linalg Functions under create_graph=True: gradgradcheck in float64 against
finite differences on well-conditioned inputs (symmetric positive-definite ones for the Cholesky family and eigh,
distinct eigenvalues and singular values for eigh and svd), and a few derivatives against their closed forms."""
import zlib

import numpy as np
import pytest

import minifused as mf
from minifused import autograd
from minifused.autograd import gradgradcheck

LA = mf.linalg


def _rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _t(array):
    return mf.tensor(array, requires_grad=True)


def _normal(rng, *shape):
    return _t(rng.standard_normal(shape))


def _regular(rng, *shape):
    """Square matrices far from singular: normal entries plus 3 I."""
    return _t(rng.standard_normal(shape) + 3 * np.eye(shape[-1]))


def _spd(x):
    """A symmetric positive-definite matrix of x (recorded, so the gradient spreads over both triangles)."""
    return x @ x.mT + x.shape[-1] * mf.eye(x.shape[-1], dtype=x.dtype)


def _sym(x):
    return x + x.mT


def _sign_free(u, v):
    """Products of singular (or eigen-) vectors that do not depend on their signs, which LAPACK chooses."""
    return u * u, v * v


# name: (function, inputs from a generator); each input requires grad
CASES = {
    "inv": (LA.inv, lambda r: [_regular(r, 3, 3)]),
    "inv_batch": (LA.inv, lambda r: [_regular(r, 2, 3, 3)]),
    "inv_ex": (lambda a: LA.inv_ex(a).inverse, lambda r: [_regular(r, 2, 2, 2)]),
    "tensorinv": (lambda a: LA.tensorinv(a, 1), lambda r: [_t(r.standard_normal((4, 2, 2)) + 3 * np.eye(4)
                                                             .reshape(4, 2, 2))]),
    "matrix_power_negative": (lambda a: LA.matrix_power(a, -2), lambda r: [_regular(r, 3, 3)]),
    "det": (LA.det, lambda r: [_normal(r, 3, 3)]),
    "det_batch": (LA.det, lambda r: [_normal(r, 2, 3, 3)]),
    "det_1x1": (LA.det, lambda r: [_normal(r, 2, 1, 1)]),
    "slogdet": (lambda a: LA.slogdet(a).logabsdet, lambda r: [_normal(r, 2, 3, 3)]),
    "solve": (LA.solve, lambda r: [_regular(r, 3, 3), _normal(r, 3, 2)]),
    "solve_broadcast": (LA.solve, lambda r: [_regular(r, 3, 3), _normal(r, 2, 3, 2)]),
    "solve_vector": (LA.solve, lambda r: [_regular(r, 2, 3, 3), _normal(r, 3)]),
    "solve_right": (lambda a, b: LA.solve(a, b, left=False), lambda r: [_regular(r, 2, 3, 3), _normal(r, 4, 3)]),
    "solve_ex": (lambda a, b: LA.solve_ex(a, b).result, lambda r: [_regular(r, 3, 3), _normal(r, 3, 2)]),
    "solve_triangular_upper": (lambda a, b: LA.solve_triangular(a, b, upper=True),
                               lambda r: [_regular(r, 2, 3, 3), _normal(r, 3, 2)]),
    "solve_triangular_lower_right": (lambda a, b: LA.solve_triangular(a, b, upper=False, left=False),
                                     lambda r: [_regular(r, 3, 3), _normal(r, 2, 4, 3)]),
    "solve_triangular_unit": (lambda a, b: LA.solve_triangular(a, b, upper=False, unitriangular=True),
                              lambda r: [_normal(r, 1, 3, 3), _normal(r, 2, 3, 2)]),
    "cholesky": (lambda x: LA.cholesky(_spd(x)), lambda r: [_normal(r, 2, 3, 3)]),
    "cholesky_upper": (lambda x: LA.cholesky(_spd(x), upper=True), lambda r: [_normal(r, 3, 3)]),
    "cholesky_ex": (lambda x: LA.cholesky_ex(_spd(x)).L, lambda r: [_normal(r, 3, 3)]),
    "cholesky_solve": (lambda b, x: mf.cholesky_solve(b, LA.cholesky(_spd(x))),
                       lambda r: [_normal(r, 2, 3, 2), _normal(r, 3, 3)]),
    "cholesky_solve_upper": (lambda b, x: mf.cholesky_solve(b, mf.triu(x) + 3 * mf.eye(3, dtype=x.dtype), upper=True),
                             lambda r: [_normal(r, 3, 2), _normal(r, 2, 3, 3)]),
    "cholesky_inverse": (lambda x: mf.cholesky_inverse(LA.cholesky(_spd(x))), lambda r: [_normal(r, 3, 3)]),
    "pinv_tall": (LA.pinv, lambda r: [_normal(r, 2, 4, 3)]),
    "pinv_wide": (LA.pinv, lambda r: [_normal(r, 3, 5)]),
    "pinv_hermitian": (lambda x: LA.pinv(_spd(x), hermitian=True), lambda r: [_normal(r, 3, 3)]),
    "lstsq": (lambda a, b: LA.lstsq(a, b).solution, lambda r: [_normal(r, 4, 3), _normal(r, 4, 2)]),
    "matrix_exp": (LA.matrix_exp, lambda r: [_t(0.5 * r.standard_normal((3, 3)))]),
    "matrix_exp_batch": (LA.matrix_exp, lambda r: [_t(0.5 * r.standard_normal((2, 2, 2)))]),
    "lu_factor": (lambda a: LA.lu_factor(a).LU, lambda r: [_normal(r, 2, 3, 3)]),
    "lu_factor_tall": (lambda a: LA.lu_factor(a).LU, lambda r: [_normal(r, 4, 3)]),
    "lu_factor_wide": (lambda a: LA.lu_factor(a).LU, lambda r: [_normal(r, 3, 5)]),
    "lu": (lambda a: LA.lu(a)[1:], lambda r: [_normal(r, 2, 4, 3)]),
    "lu_solve": (lambda a, b: LA.lu_solve(*LA.lu_factor(a), b), lambda r: [_regular(r, 3, 3), _normal(r, 3, 2)]),
    "qr_tall": (LA.qr, lambda r: [_normal(r, 2, 4, 3)]),
    "qr_square_complete": (lambda a: LA.qr(a, mode="complete"), lambda r: [_normal(r, 3, 3)]),
    "qr_wide": (LA.qr, lambda r: [_normal(r, 3, 5)]),
    "eigh": (lambda x: LA.eigh(_sym(x)), lambda r: [_normal(r, 2, 3, 3)]),
    "eigh_upper": (lambda x: LA.eigh(_sym(x), UPLO="U"), lambda r: [_normal(r, 3, 3)]),
    "eigvalsh": (lambda x: LA.eigvalsh(_sym(x)), lambda r: [_normal(r, 2, 3, 3)]),
    "svd_tall": (lambda a: LA.svd(a, full_matrices=False), lambda r: [_normal(r, 2, 4, 3)]),
    "svd_wide": (lambda a: LA.svd(a, full_matrices=False), lambda r: [_normal(r, 3, 4)]),
    "svd_full": (lambda a: (lambda u, s, vh: (*_sign_free(u[..., :3], vh), s))(*LA.svd(a)),
                 lambda r: [_normal(r, 4, 3)]),
    "svdvals": (LA.svdvals, lambda r: [_normal(r, 2, 4, 3)]),
    "svdvals_wide": (lambda a: LA.svdvals(a * 2), lambda r: [_normal(r, 3, 4)]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_gradgradcheck(name):
    fn, make = CASES[name]
    assert gradgradcheck(fn, tuple(make(_rng(name))))


def _hessian_vector(fn, x, v, w):
    """d/dx <d<fn(x), v>/dx, w>."""
    (g,) = autograd.grad(fn(x), x, v, create_graph=True)
    (h,) = autograd.grad((g * w).sum(), x)
    return h.numpy()


def test_slogdet_second_derivative():
    rng = _rng("slogdet")
    a0, w0 = rng.standard_normal((2, 3, 3)), rng.standard_normal((2, 3, 3))
    v0 = rng.standard_normal(2)
    h = _hessian_vector(lambda a: LA.slogdet(a).logabsdet, _t(a0), mf.tensor(v0), mf.tensor(w0))
    # d logabsdet / dA = A^-T, and d<A^-T, W> = d tr(A^-1 W) = -tr(A^-1 dA A^-1 W): the gradient -A^-T W^T A^-T
    inv_t = np.swapaxes(np.linalg.inv(a0), -1, -2)
    np.testing.assert_allclose(h, -v0[:, None, None] * (inv_t @ np.swapaxes(w0, -1, -2) @ inv_t), rtol=1e-10)


def test_det_second_derivative_2x2():
    """det = a d - b c: the gradient [[d, -c], [-b, a]], so d<grad, W>/dA = [[W11, -W10], [-W01, W00]]."""
    rng = _rng("det")
    w0 = rng.standard_normal((2, 2))
    h = _hessian_vector(LA.det, _normal(rng, 2, 2), mf.tensor(1.5), mf.tensor(w0))
    np.testing.assert_allclose(h, 1.5 * np.array([[w0[1, 1], -w0[1, 0]], [-w0[0, 1], w0[0, 0]]]), rtol=1e-12)


def test_det_singular():
    """An exactly singular matrix (with distinct singular values): the gradient is the adjugate's transpose (the
    cofactors), and differentiates again through the SVD."""
    a0 = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [4.0, 5.0, 7.0]])
    a = _t(np.stack([a0, np.eye(3) + 0.1 * a0]))
    (g,) = autograd.grad(LA.det(a).sum(), a, create_graph=True)
    cofactors = np.array([[np.linalg.det(np.delete(np.delete(a0, i, 0), j, 1)) * (-1) ** (i + j) for j in range(3)]
                          for i in range(3)])
    np.testing.assert_allclose(g.numpy()[0], cofactors, atol=1e-12)
    assert gradgradcheck(LA.det, (a,))


def test_cholesky_1x1_derivatives():
    """cholesky of a 1 x 1 matrix is sqrt: second derivative -a^-3/2 / 4, third 3 a^-5/2 / 8."""
    a0 = np.array([0.7, 1.3, 2.2])
    a = _t(a0.reshape(3, 1, 1))
    (g,) = autograd.grad(LA.cholesky(a).sum(), a, create_graph=True)
    (h,) = autograd.grad(g.sum(), a, create_graph=True)
    (t,) = autograd.grad(h.sum(), a)
    np.testing.assert_allclose(h.numpy().ravel(), -0.25 * a0 ** -1.5, rtol=1e-12)
    np.testing.assert_allclose(t.numpy().ravel(), 0.375 * a0 ** -2.5, rtol=1e-12)


def test_third_derivative():
    """inv of 1 x 1 matrices is 1 / a (third derivative -6 / a^4); of larger ones, gradgradcheck of a gradient."""
    a0 = np.array([0.6, -1.4, 2.1])
    a = _t(a0.reshape(3, 1, 1))
    (g,) = autograd.grad(LA.inv(a).sum(), a, create_graph=True)
    (h,) = autograd.grad(g.sum(), a, create_graph=True)
    (t,) = autograd.grad(h.sum(), a)
    np.testing.assert_allclose(t.numpy().ravel(), -6 / a0 ** 4, rtol=1e-12)

    def gradient(x, b):
        y = LA.solve(LA.inv(x), b) + LA.matrix_exp(0.3 * x) @ b
        return autograd.grad((y * y).sum(), (x, b), create_graph=True)

    rng = _rng("third")
    assert gradgradcheck(gradient, (_regular(rng, 2, 2), _normal(rng, 2, 2)))


def test_qr_mode_r_refused():
    a = _normal(_rng("qr_r"), 3, 3)
    r = LA.qr(a, mode="r").R
    with pytest.raises(RuntimeError, match="mode='r'"):
        autograd.grad(r.sum(), a, create_graph=True)
