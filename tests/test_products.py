"""The products family (minifused/ops/products.py) beyond its registry entries (tests/opinfo.py, PRODUCT_OPS):
cdist's p = 0 / inf / fractional p, its matmul path and batch broadcasting, PyTorch's cdist gradients at zero
distances and inf-norm ties, diagonal as a writable view, the in-place forms (addmv_, addr_, baddbmm_, addbmm_,
addmm_: values, identity, version, recorded gradients), beta = 0 ignoring NaN, cross's dim=None, integer and
bool dtypes. Values against float64 NumPy references."""
import math
import warnings

import numpy as np
import pytest

import minifused as mf
from opinfo import make_arrays


def f64(a, requires_grad=False):
    return mf.tensor(np.asarray(a, np.float64), device="cpu", requires_grad=requires_grad)


def pairwise(a, b, p):
    return np.linalg.norm(a[..., :, None, :] - b[..., None, :, :], ord=p, axis=-1)


# ---------------------------------------------------------------- cdist
@pytest.mark.parametrize("p", [0, 0.5, 1, 2, 3, math.inf])
def test_cdist_values_batched_broadcast(p):
    a, b = make_arrays([(2, 1, 4, 3), (5, 6, 3)], seed=3)
    a[0, 0, 1] = b[2, 4]  # one zero distance, and some equal coordinates (p = 0 counts them)
    a[1, 0, 2, 0] = b[1, 1, 0]
    out = mf.cdist(f64(a), f64(b), p=p)
    assert out.shape == (2, 5, 4, 6)
    np.testing.assert_allclose(out.numpy(), pairwise(a, b, p), rtol=1e-12, atol=1e-12)


def test_cdist_matmul_path_matches_direct_values_and_gradients():
    a, b, g = make_arrays([(3, 40, 5), (3, 30, 5), (3, 40, 30)], seed=4)
    a[1, 7] = b[1, 2]  # a zero distance: gradient 0 there on both paths
    grads = {}
    for mode in ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"):
        x1, x2 = f64(a, True), f64(b, True)
        out = mf.cdist(x1, x2, compute_mode=mode)
        np.testing.assert_allclose(out.detach().numpy(), pairwise(a, b, 2), rtol=1e-9, atol=1e-7)
        (out * f64(g)).sum().backward()
        grads[mode] = (x1.grad.numpy(), x2.grad.numpy())
    for mode in ("use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"):
        for got, want in zip(grads[mode], grads["use_mm_for_euclid_dist_if_necessary"]):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("p", [0.5, 1, 2, 3, math.inf])
@pytest.mark.parametrize("mode", ["use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"])
def test_cdist_gradient_zero_at_zero_distance(p, mode):
    x1 = f64([[1.0, -2.0], [0.5, 0.5]], True)
    x2 = f64([[1.0, -2.0]], True)
    mf.cdist(x1, x2, p=p, compute_mode=mode)[0].sum().backward()  # only the zero distance
    assert not x1.grad.numpy().any() and not x2.grad.numpy().any()


def test_cdist_gradients_follow_pytorch():
    """PyTorch's cdist backward: p = 0 gives zeros; for p < 1 a coordinate with no difference gets 0; every
    coordinate tied at the inf norm gets the full sign (torch.dist splits ties, torch.cdist does not)."""
    def grad(a, b, p):
        x1, x2 = f64(a, True), f64(b, True)
        mf.cdist(x1, x2, p=p).sum().backward()
        return x1.grad.numpy(), x2.grad.numpy()

    np.testing.assert_array_equal(grad([[0.0, 0.0]], [[1.0, 1.0]], math.inf)[0], [[-1.0, -1.0]])
    np.testing.assert_array_equal(grad([[0.0, 0.0]], [[1.0, 0.0]], 0.5)[0], [[-1.0, 0.0]])
    zero = grad([[0.0, 0.0]], [[1.0, 0.0]], 0)
    assert zero[0].shape == (1, 2) and not zero[0].any() and not zero[1].any()
    # values from torch.cdist (PyTorch 2.14) on the same inputs
    a, b = [[0.0, 0.0], [1.0, 1.0]], [[0.0, 0.0], [2.0, 1.0]]
    np.testing.assert_allclose(grad(a, b, 0.5)[0], [[-1.7071067812, -2.4142135624], [1.0, 2.0]], rtol=1e-8)
    np.testing.assert_allclose(grad(a, b, 3)[1], [[-0.6299605249, -0.6299605249], [1.9244817024, 0.2311204247]],
                               rtol=1e-7)


def test_cdist_empty_and_half_precision():
    assert mf.cdist(mf.zeros(0, 4), mf.ones(5, 4)).shape == (0, 5)
    np.testing.assert_array_equal(mf.cdist(mf.zeros(3, 0), mf.ones(2, 0)).numpy(), np.zeros((3, 2)))
    a, b = make_arrays([(30, 4), (6, 4)], seed=5)
    for dtype in (mf.float16, mf.bfloat16):  # computed in float32, rounded once
        out = mf.cdist(mf.tensor(a, dtype=dtype), mf.tensor(b, dtype=dtype))
        assert out.dtype == dtype
        rounded = [x.astype(dtype).astype(np.float64) for x in (a, b)]
        np.testing.assert_allclose(out.float().numpy(), pairwise(*rounded, 2), rtol=1e-2, atol=1e-2)


def test_dist_ties_share_gradient_as_norm_and_p0_counts():
    """(p = 0 is not a registry sample: PyTorch's own dist backward fails there, so the parity suite cannot run it.)"""
    x = f64([1.0, 0.0, 2.0], True)
    out = mf.dist(x, f64([1.0, 1.0, 1.0]), p=0)
    assert out.item() == 2.0
    out.backward()
    assert x.grad is None or not x.grad.numpy().any()
    x = f64([[0.0, 0.0]], True)
    mf.dist(x, f64([[1.0, 1.0]]), p=math.inf).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[-0.5, -0.5]])
    assert mf.dist(mf.ones(3, dtype=mf.float16), mf.zeros(3)).dtype == mf.float32  # promoted


# ---------------------------------------------------------------- diagonal: a view
def test_diagonal_is_a_writable_view():
    x = mf.zeros(3, 4)
    d = x.diagonal(1)
    v = x._version
    d.fill_(2.0)
    np.testing.assert_array_equal(x.numpy(), np.eye(3, 4, 1) * 2)
    assert x._version == v + 1  # one counter for the view and its base
    x.add_(1.0)
    np.testing.assert_array_equal(d.numpy(), [3.0, 3.0, 3.0])
    y = mf.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(y.diagonal(0, -1, 0).numpy(), np.diagonal(np.arange(24.0).reshape(2, 3, 4), 0, -1, 0))


def test_diag_embed_inverts_diagonal_and_trace_dtypes():
    a = make_arrays([(2, 3, 4)], seed=6)[0]
    for offset, d1, d2 in [(0, -2, -1), (2, 0, 3), (-1, 3, 1)]:
        e = mf.diag_embed(f64(a), offset, d1, d2)
        np.testing.assert_array_equal(e.diagonal(offset, d1, d2).numpy(), a)
        assert float(e.abs().sum().item()) == pytest.approx(np.abs(a).sum())
    assert mf.trace(mf.tensor([[1, 2], [3, 4]], dtype=mf.int32)).dtype == mf.int64
    assert mf.trace(mf.tensor([[1, 2], [3, 4]])).item() == 5
    assert mf.trace(mf.zeros(0, 3)).item() == 0.0


def test_block_diag_empty_and_dtypes():
    assert mf.block_diag().shape == (1, 0)
    out = mf.block_diag(mf.tensor([[1, 2]]), mf.tensor([0.5]), mf.tensor(True))
    assert out.dtype == mf.float32
    np.testing.assert_array_equal(out.numpy(), [[1, 2, 0, 0], [0, 0, 0.5, 0], [0, 0, 0, 1]])
    assert mf.block_diag(mf.zeros(0, 3), mf.ones(2, 0)).shape == (2, 3)


# ---------------------------------------------------------------- in-place forms
def _operands(name, seed=7):
    shapes = {"addmv_": [(3,), (3, 4), (4,)], "addr_": [(3, 4), (3,), (4,)], "addmm_": [(3, 5), (3, 4), (4, 5)],
              "baddbmm_": [(2, 3, 5), (2, 3, 4), (2, 4, 5)], "addbmm_": [(3, 5), (2, 3, 4), (2, 4, 5)]}[name]
    return make_arrays(shapes, seed=seed)


@pytest.mark.parametrize("name", ["addmv_", "addr_", "baddbmm_", "addbmm_", "addmm_"])
def test_inplace_values_identity_version_and_gradients(name):
    c, a, b = _operands(name)
    kw = {"beta": 0.5, "alpha": -2.0}
    plain = getattr(mf.Tensor, name[:-1])
    want = plain(f64(c), f64(a), f64(b), **kw).numpy()
    x = f64(c)
    arr, v = x._data, x._version
    assert getattr(x, name)(f64(a), f64(b), **kw) is x and x._data is arr and x._version == v + 1
    np.testing.assert_allclose(x.numpy(), want, rtol=1e-12)
    # recorded: a non-leaf written in place, gradients to its leaf and to the operands as out of place
    g = make_arrays([want.shape], seed=8)[0]
    grads = []
    for inplace in (False, True):
        leaf, ta, tb = f64(c, True), f64(a, True), f64(b, True)
        y = leaf * 1.0
        out = getattr(y, name)(ta, tb, **kw) if inplace else plain(y, ta, tb, **kw)
        assert not inplace or (out is y and y.grad_fn is not None)
        (out * f64(g)).sum().backward()
        grads.append([t.grad.numpy() for t in (leaf, ta, tb)])
    for got, ref in zip(*grads):
        np.testing.assert_allclose(got, ref, rtol=1e-12)


def test_inplace_rules():
    x = mf.ones(2, 3)
    x.addr_(f64([1.0, 2.0]), f64([1.0, 0.0, -1.0]))  # a float64 product cast into the float32 tensor
    assert x.dtype == mf.float32
    np.testing.assert_array_equal(x.numpy(), [[2, 1, 0], [3, 1, -1]])
    with pytest.raises(RuntimeError, match="addmm_: expected all tensors to have the same dtype, got float64, float32"):
        mf.ones(2, 2, dtype=mf.float64).addmm_(mf.ones(2, 2), mf.ones(2, 2))
    with pytest.raises(RuntimeError, match=r"addbmm_: bad in-place call: input of shape \[5\]"):
        mf.ones(5).addbmm_(mf.ones(2, 3, 4), mf.ones(2, 4, 5))  # PyTorch resizes here; we refuse
    y = mf.ones(3)
    y.addmv_(mf.ones(3, 2), mf.ones(2), alpha=2)  # no tensor requires grad: nothing recorded
    assert y.grad_fn is None and y.tolist() == [5.0, 5.0, 5.0]


# ---------------------------------------------------------------- beta = 0, dtypes, cross
@pytest.mark.parametrize("op,shapes", [
    (mf.addmv, [(3,), (3, 2), (2,)]), (mf.addr, [(3, 2), (3,), (2,)]),
    (mf.baddbmm, [(1, 3, 2), (1, 3, 4), (1, 4, 2)]), (mf.addbmm, [(3, 2), (2, 3, 4), (2, 4, 2)]),
])
def test_beta_zero_ignores_nan_and_gives_zero_gradient(op, shapes):
    c, a, b = make_arrays(shapes, seed=9)
    c[...] = np.nan
    tc, ta, tb = f64(c, True), f64(a), f64(b)
    out = op(tc, ta, tb, beta=0, alpha=2)
    assert np.isfinite(out.detach().numpy()).all()
    out.sum().backward()
    np.testing.assert_array_equal(tc.grad.numpy(), np.zeros(c.shape))


def test_integer_and_bool_products_follow_pytorch():
    o = lambda *s: mf.ones(*s, dtype=mf.int64)  # noqa: E731
    assert mf.addmv(o(2), o(2, 3), o(3), alpha=0.5).tolist() == [1, 1]  # the factor is cast (truncated)
    assert mf.addmv(o(2), o(2, 3), o(3), alpha=1.5).tolist() == [4, 4]
    assert mf.mv(o(2, 3), o(3)).dtype == mf.int64 and mf.vdot(o(3), o(3)).item() == 3
    assert mf.tensordot(o(2, 3), o(3, 4), dims=mf.tensor(1)).tolist() == [[3] * 4] * 2
    assert mf.kron(mf.tensor([True, False]), mf.tensor([[True], [True]])).tolist() == [[True, False]] * 2
    logical = mf.addr(mf.tensor([[False, True]]), mf.tensor([True]), mf.tensor([True, False]))
    assert logical.dtype == mf.bool and logical.tolist() == [[True, True]]
    with pytest.raises(NotImplementedError, match="cross: not implemented for bool"):
        mf.cross(mf.ones(3, dtype=mf.bool), mf.ones(3, dtype=mf.bool), dim=0)


def test_cross_dim_none_takes_the_first_dim_of_size_3_and_warns():
    a, b = make_arrays([(3, 3, 4), (3, 3, 4)], seed=10)
    with pytest.warns(UserWarning, match="cross: using it without specifying dim is deprecated"):
        out = mf.cross(f64(a), f64(b))
    np.testing.assert_allclose(out.numpy(), np.cross(a, b, axis=0), rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(f64(a).cross(f64(b), dim=1).numpy(), np.cross(a, b, axis=1), rtol=1e-12)
    # the size-3 dim of input is taken even where other's is 1 there: that is an error, as in PyTorch
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="cross: inputs dimension 1 must have length 3"):
        mf.cross(mf.ones(1, 3), mf.ones(3, 1))
