"""Higher-order gradients (``create_graph=True``) of the shape, indexing and reduction ops: gradgradcheck in float64
at random points (no ties where an op selects, no zeros where a norm has a kink), second derivatives of the norms,
logsumexp, var and prod against hand-derived formulas, third derivatives, and a gradient penalty."""
import math

import numpy as np
import pytest

import minifused as mf
from minifused import autograd


def leaf(a):
    return mf.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


def const(a):
    return mf.tensor(np.asarray(a))


def sq(x):
    """x * x: the input of the op under test is then a non-leaf with a second derivative of its own."""
    return x * x


IDX = np.random.default_rng(3).integers(0, 4, (3, 2, 5))
MASK = np.random.default_rng(4).random((4, 5)) > 0.5
ROWS = np.array([2, 0, 2])

# (name, function of one tensor of shape (3, 4, 5))
MOVEMENT = [
    ("cat", lambda x: mf.cat([sq(x), x.exp(), x[:, :1]], 1)),
    ("cat_last", lambda x: mf.cat([sq(x), x], -1)),
    ("stack", lambda x: mf.stack([sq(x), x.exp()], 2)),
    ("stack_first", lambda x: mf.stack([sq(x), x], 0)),
    ("split", lambda x: sq(x).split([1, 3], 1)[1] * x[:, 1:]),
    ("chunk", lambda x: sum(c.exp().sum() for c in sq(x).chunk(2, 2))),
    ("unbind", lambda x: sum(t * t.exp() for t in sq(x).unbind(0))),
    ("narrow", lambda x: sq(x).narrow(2, 1, 3).exp()),
    ("tensor_split", lambda x: sq(x).tensor_split(3, 2)[2].exp()),
    ("select", lambda x: sq(x).select(1, -1).exp()),
    ("squeeze_unsqueeze", lambda x: sq(x)[:, :1].squeeze(1).unsqueeze(0).exp()),
    ("flatten_view", lambda x: sq(x).flatten(1).view(3, 5, 4).exp()),
    ("transpose_t", lambda x: sq(x).transpose(0, 2)[0].t().exp()),
    ("movedim", lambda x: sq(x).movedim(0, 2).exp()),
    ("expand", lambda x: sq(x)[:, :1].expand(3, 4, 5) * x),
    ("unsqueeze_", lambda x: sq(x).unsqueeze_(1).exp()),
    ("t_", lambda x: sq(x[0]).t_().exp()),
    ("repeat", lambda x: sq(x).repeat(2, 1, 1, 2).exp()),
    ("tile", lambda x: sq(x).tile((2,)).exp()),
    ("repeat_interleave", lambda x: sq(x).repeat_interleave(2, 1).exp()),
    ("flip", lambda x: sq(x).flip(0, 2) * x),
    ("roll", lambda x: sq(x).roll((1, -2), (1, 2)) * x),
    ("roll_flat", lambda x: sq(x).roll(3) * x),
    ("rot90", lambda x: mf.rot90(sq(x), 1, (1, 2)).exp()),
    ("unfold", lambda x: sq(x).unfold(2, 3, 1).exp()),
    ("diagonal", lambda x: mf.diagonal(sq(x), 1, 1, 2).exp()),
    ("diagonal_neg", lambda x: mf.diagonal(sq(x), -1, 2, 0).exp()),
    ("diag_embed", lambda x: mf.diag_embed(sq(x)[0], 1).exp()),
    ("trace", lambda x: mf.trace(sq(x)[1]) * x),
    ("diag_matrix", lambda x: mf.diag(sq(x)[0], -1).exp()),
    ("diag_vector", lambda x: mf.diag(sq(x)[0, 0], 1).exp()),
    ("tril", lambda x: sq(x).tril(1) * x),
    ("triu", lambda x: sq(x).triu(-1) * x),
    ("as_strided", lambda x: mf.as_strided(sq(x), (3, 3), (1, 2), 2).exp()),
]

INDEXING = [
    ("slice", lambda x: sq(x)[1:, ::2, None].exp()),
    ("int_slice", lambda x: sq(x)[0, :, 1:4].exp()),
    ("ellipsis", lambda x: sq(x)[..., 3].exp()),
    ("int_array", lambda x: sq(x)[[0, 2, 0]].exp()),
    ("int_arrays", lambda x: sq(x)[[0, 2, 2], :, [1, 1, 4]].exp()),
    ("int_then_array", lambda x: sq(x)[1, :, [4, 0, 4]].exp()),
    ("bool_mask", lambda x: sq(x)[:, const(MASK)].exp()),
    ("bool_full", lambda x: sq(x)[const(np.abs(np.arange(60).reshape(3, 4, 5) % 7 - 3) < 2)].exp()),
    ("gather", lambda x: mf.gather(sq(x), 1, const(IDX)).exp()),
    ("take_along_dim", lambda x: mf.take_along_dim(sq(x), const(IDX[:, :, :1]), 1).exp()),
    ("take", lambda x: mf.take(sq(x), const(np.array([[0, 59], [7, 7]]))).exp()),
    ("index_select", lambda x: mf.index_select(sq(x), 1, const(ROWS)).exp()),
    ("masked_fill", lambda x: sq(x).masked_fill(const(MASK), 0.5) * x),
    ("index_fill", lambda x: sq(x).index_fill(2, const(ROWS), -1.0) * x),
    ("masked_select", lambda x: mf.masked_select(sq(x), const(MASK)).exp()),
]

REDUCTIONS = [
    ("amax", lambda x: (x * x.exp()).amax(1)),
    ("amax_dims", lambda x: (x * x.exp()).amax((0, 2), keepdim=True)),
    ("amin_all", lambda x: (x * x.exp()).amin()),
    ("max_dim", lambda x: (x * x.exp()).max(2).values),
    ("min_dim_keep", lambda x: (x * x.exp()).min(0, keepdim=True).values),
    ("max_all", lambda x: (x * x.exp()).max()),
    ("median_dim", lambda x: (x * x.exp()).median(1).values),
    ("median_all", lambda x: (x * x.exp()).median()),
    ("var", lambda x: sq(x).var(1)),
    ("var_dims_c0", lambda x: sq(x).var((0, 2), correction=0, keepdim=True)),
    ("var_all_leaf", lambda x: x.var()),
    ("var_unbiased_false", lambda x: x.exp().var(2, unbiased=False)),
    ("var_mean", lambda x: sum(t.sum() for t in mf.var_mean(sq(x), 1, correction=2))),
    ("std", lambda x: sq(x).std(1)),
    ("std_keep_c0", lambda x: x.exp().std((0, 1), correction=0, keepdim=True)),
    ("std_all_leaf", lambda x: x.std()),
    ("prod", lambda x: mf.prod(x, 1)),
    ("prod_keep", lambda x: mf.prod(sq(x), 2, keepdim=True)),
    ("prod_all", lambda x: mf.prod(x[0] * 0.9)),
    ("logsumexp", lambda x: mf.logsumexp(sq(x), 2)),
    ("logsumexp_dims", lambda x: mf.logsumexp(x, (0, 1), keepdim=True)),
    ("logsumexp_all", lambda x: mf.logsumexp(x * 3, None)),
]

NORMS = [
    ("vector_norm_2", lambda x: mf.linalg.vector_norm(sq(x), 2, 1)),
    ("vector_norm_2_all", lambda x: mf.linalg.vector_norm(x)),
    ("vector_norm_1", lambda x: mf.linalg.vector_norm(x * x.exp(), 1, (0, 2))),
    ("vector_norm_inf", lambda x: mf.linalg.vector_norm(x * x.exp(), math.inf, 2, keepdim=True)),
    ("vector_norm_-inf", lambda x: mf.linalg.vector_norm(x * x.exp(), -math.inf, 0)),
    ("vector_norm_3", lambda x: mf.linalg.vector_norm(x * x.exp(), 3, 2)),
    ("vector_norm_0.5", lambda x: mf.linalg.vector_norm(x, 0.5, (1, 2))),
    ("vector_norm_-1.5", lambda x: mf.linalg.vector_norm(sq(x), -1.5, 1)),
    ("tensor_norm", lambda x: x.norm(2, dim=1)),
    ("norm_fro", lambda x: mf.norm(sq(x), "fro")),
    ("norm_p", lambda x: mf.norm(x, 4, dim=(0, 2), keepdim=True)),
    ("linalg_norm", lambda x: mf.linalg.norm(sq(x)[0])),
    ("linalg_norm_ord", lambda x: mf.linalg.norm(x, 3, dim=2)),
]


@pytest.mark.parametrize("fn", [pytest.param(fn, id=name) for name, fn in MOVEMENT + INDEXING + REDUCTIONS + NORMS])
def test_gradgradcheck(fn):
    x = leaf(np.random.default_rng(0).uniform(0.3, 1.5, (3, 4, 5))
             * np.where(np.arange(60).reshape(3, 4, 5) % 3, 1, -1))  # (no element near 0 or tied with another)
    assert autograd.gradgradcheck(fn, (x,))


def _setitem(x, v):
    y = sq(x)
    y[1] = v[0].exp()
    y[[0, 2], 1:3] = v[:2, :2] * v[:2, :2]
    y[:, 0] = 2.0
    return y * x


def _view_write(x, v):
    y = sq(x)
    y[:, 1].mul_(v[0, :3])
    y[2].add_(v[1].exp())
    return y * y


IDX2 = np.random.default_rng(0).integers(0, 4, (3, 2))
COLS = np.array([3, 0, 3])

# the ops that write one tensor into another: both get second derivatives
WRITES = [
    ("setitem", _setitem),
    ("view_write", _view_write),
    ("scatter", lambda x, v: mf.scatter(sq(x), 1, const(IDX2), v.exp())),
    ("scatter_value", lambda x, v: mf.scatter(sq(x), 1, const(IDX2), 1.5) * v),
    ("scatter_add", lambda x, v: mf.scatter_add(sq(x), 1, const(IDX2), sq(v))),
    ("index_add", lambda x, v: mf.index_add(sq(x), 1, const(COLS), sq(v[:, :3]), alpha=0.5)),
    ("index_copy", lambda x, v: mf.index_copy(sq(x), 1, const(COLS[:2]), v[:, :2].exp())),
    ("index_put_acc", lambda x, v: sq(x).index_put((const([0, 2, 0]), const([1, 1, 1])), sq(v[0, :3]),
                                                   accumulate=True)),
    ("index_put_mask", lambda x, v: sq(x).index_put((const(MASK[:3, :4]),), v[0, 0] * v[2, 1])),
    ("masked_fill_tensor", lambda x, v: sq(x).masked_fill(const(MASK[0, :4]), v[0, 0] * v[1, 1])),
    ("masked_scatter", lambda x, v: mf.masked_scatter(sq(x), const(MASK[:3, :4]), v.exp())),
    ("select_scatter", lambda x, v: mf.select_scatter(sq(x), v[0].exp(), 0, 1)),
    ("slice_scatter", lambda x, v: mf.slice_scatter(sq(x), sq(v[:, :2]), 1, 1, 4, 2)),
    ("as_strided_scatter", lambda x, v: mf.as_strided_scatter(sq(x), v[:2, :2].exp(), (2, 2), (1, 4), 1)),
]


@pytest.mark.parametrize("fn", [pytest.param(fn, id=name) for name, fn in WRITES])
def test_gradgradcheck_of_written_values(fn):
    rng = np.random.default_rng(0)
    x, v = leaf(rng.standard_normal((3, 4))), leaf(rng.standard_normal((3, 4)))
    assert autograd.gradgradcheck(fn, (x, v))


@pytest.mark.parametrize("shape, dim", [((4, 5), 1), ((3, 2, 4), 2), ((6,), 0)])
def test_vector_norm_hessian(shape, dim):
    """p=2 along ``dim``: with n = |x|, the Hessian of w . n applied to v is w (v / n - x (x . v) / n^3)."""
    rng = np.random.default_rng(1)
    xa, va = rng.standard_normal(shape), rng.standard_normal(shape)
    w = rng.standard_normal(np.delete(shape, dim))
    x = leaf(xa)
    (g,) = autograd.grad((mf.linalg.vector_norm(x, 2, dim) * const(w)).sum(), x, create_graph=True)
    (h,) = autograd.grad((g * const(va)).sum(), x)
    n = np.linalg.norm(xa, axis=dim, keepdims=True)
    we = np.expand_dims(w, dim)
    want = we * (va / n - xa * (xa * va).sum(dim, keepdims=True) / n ** 3)
    np.testing.assert_allclose(h.numpy(), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("p", [3.0, 0.5, -2.0])
def test_general_norm_hessian(p):
    """A general p over a vector: the Hessian of |x|_p is (p - 1) / n (D(u^(p-2)) - u^(p-1) u^(p-1)^T) / n
    with u = |x| / n, times the signs."""
    rng = np.random.default_rng(2)
    xa = rng.uniform(0.5, 2, 5) * np.array([1, -1, 1, -1, 1])
    va = rng.standard_normal(5)
    x = leaf(xa)
    (g,) = autograd.grad(mf.linalg.vector_norm(x, p), x, create_graph=True)
    (h,) = autograd.grad((g * const(va)).sum(), x)
    n = (np.abs(xa) ** p).sum() ** (1 / p)
    s, u = np.sign(xa), np.abs(xa) / n
    hess = (p - 1) / n * (np.diag(u ** (p - 2)) - np.outer(s * u ** (p - 1), s * u ** (p - 1)))
    np.testing.assert_allclose(h.numpy(), hess @ va, rtol=1e-10)


def test_logsumexp_var_prod_hessians():
    """Second derivatives along dim 1 of a (3, 5) input, w . f(x) differentiated twice in direction v:
    logsumexp: w (s v - s (s . v)), s the softmax; var with correction c: 2 w (v - mean(v)) / (n - c);
    prod: w P / x_j * sum_{k != j} v_k / x_k."""
    rng = np.random.default_rng(5)
    xa, va, w = rng.uniform(0.5, 1.5, (3, 5)), rng.standard_normal((3, 5)), rng.standard_normal((3, 1))

    def hv(f):
        x = leaf(xa)
        (g,) = autograd.grad((f(x) * const(w[:, 0])).sum(), x, create_graph=True)
        (h,) = autograd.grad((g * const(va)).sum(), x)
        return h.numpy()

    s = np.exp(xa) / np.exp(xa).sum(1, keepdims=True)
    np.testing.assert_allclose(hv(lambda x: mf.logsumexp(x, 1)), w * (s * va - s * (s * va).sum(1, keepdims=True)),
                               rtol=1e-10)
    np.testing.assert_allclose(hv(lambda x: x.var(1, correction=2)), 2 * w * (va - va.mean(1, keepdims=True)) / 3,
                               rtol=1e-10)
    prod = xa.prod(1, keepdims=True)
    others = (va / xa).sum(1, keepdims=True) - va / xa
    np.testing.assert_allclose(hv(lambda x: mf.prod(x, 1)), w * prod / xa * others, rtol=1e-10)


def test_prod_second_derivative_with_zeros():
    """Rows with one zero and with two: the products of the others need no division, so the mixed second
    derivatives at the zeros are the products of the remaining elements."""
    xa = np.array([[0.5, 0.0, -1.5, 2.0], [0.0, 1.5, 0.0, -0.7]])
    x = leaf(xa)
    (g,) = autograd.grad(mf.prod(x, 1).sum(), x, create_graph=True)
    hess = np.stack([autograd.grad(g[i, j], x, retain_graph=True)[0].numpy() for i in range(2) for j in range(4)])
    for i in range(2):
        for j in range(4):
            for k in range(4):
                want = 0.0 if j == k else np.prod(np.delete(xa[i], [j, k]))
                assert hess[i * 4 + j][i, k] == pytest.approx(want)
                assert not hess[i * 4 + j][1 - i].any()


@pytest.mark.parametrize("fn", [
    lambda x: mf.logsumexp(x, 1),
    lambda x: mf.prod(x, 1),
    lambda x: mf.linalg.vector_norm(x, 3, 1),
    lambda x: x.std(0),
    lambda x: mf.cat([x, x[:, 1:] * x[:, :1]], 1).exp()[[0, 2, 2]],
    lambda x: mf.gather(x * x, 1, const(np.array([[0, 1], [3, 3], [2, 0]]))).exp(),
], ids=["logsumexp", "prod", "norm3", "std", "cat_getitem", "gather"])
def test_third_derivative(fn):
    """gradgradcheck of a function that is itself a gradient (taken with create_graph): third derivatives."""
    x = leaf(np.random.default_rng(6).uniform(0.5, 1.5, (3, 4)))

    def grad_of(x):
        (g,) = autograd.grad(fn(x).sum(), x, create_graph=True)
        return g

    assert autograd.gradgradcheck(grad_of, (x,))


def test_gradient_penalty():
    """WGAN-GP's penalty (|grad_x D(x)|_2 along dim 1 - 1)^2, its gradient with respect to D's weight checked
    against central differences (the gradient of a gradient, through vector_norm and the ops of D)."""
    rng = np.random.default_rng(8)
    x0 = rng.standard_normal((4, 3))

    def penalty(w):
        x = leaf(x0)
        with mf.enable_grad():  # (gradcheck's differences run under no_grad)
            d = (x * w).sum(1).tanh() + mf.logsumexp(x * w, 1)
            (g,) = autograd.grad(d.sum(), x, create_graph=True)
        n = g.norm(2, dim=1) - 1
        return (n * n).mean()

    w = leaf(rng.standard_normal(3))
    assert autograd.gradcheck(penalty, (w,))
    penalty(w).backward()
    assert w.grad is not None and w.grad.shape == (3,)
