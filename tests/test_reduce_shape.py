"""What the op registry (tests/opinfo.py, REDUCE_OPS) cannot express for the reductions, scans, matrix
products and movement ops: split / chunk / unbind as tuples with gradients into every piece, PyTorch's
dtype rules (int and bool sums in int64, any/all as bool), 0-d tensors and empty dims, gradients where
the input has zeros (prod, cumprod, the 2-norm), einsum's equation forms, and the same on the GPU
against PyTorch."""
import math

import numpy as np
import pytest

import minifused as mf
from conftest import host
from minifused.testing import gradcheck


def t64(a, device="cpu", grad=True):
    return mf.tensor(np.asarray(a, np.float64), device=device, requires_grad=grad)


def rnd(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# ---------------------------------------------------------------- split, chunk, unbind: tuples of views
@pytest.mark.parametrize("shape,arg,dim,sizes", [
    ((7, 3), 2, 0, [2, 2, 2, 1]), ((3, 6), [1, 0, 5], 1, [1, 0, 5]), ((2, 5), 5, -1, [5]), ((4,), 9, 0, [4]),
    ((0, 3), 2, 0, [0])])
def test_split_pieces_and_gradients_into_each(shape, arg, dim, sizes):
    a = rnd(*shape)
    x = t64(a)
    pieces = x.split(arg, dim)
    assert isinstance(pieces, tuple) and [p.shape[dim] for p in pieces] == sizes
    for p, want in zip(pieces, np.split(a, np.cumsum(sizes)[:-1], axis=dim)):
        np.testing.assert_array_equal(p.numpy(), want)
    if x.numel():
        # every piece weighted differently: the gradient of each piece lands in its own place
        assert gradcheck(lambda v: mf.cat([p * (i + 1) for i, p in enumerate(v.split(arg, dim))], dim), (x,))
        assert gradcheck(lambda v: mf.split(v, arg, dim)[-1].exp(), (x,))  # only one piece used: zeros elsewhere


def test_chunk_counts_follow_pytorch():
    x = t64(rnd(6, 2))
    assert [p.shape[0] for p in x.chunk(4)] == [2, 2, 2]  # ceil(6/4) = 2: three pieces, not four
    assert [p.shape[0] for p in x.chunk(6)] == [1] * 6
    assert [p.shape[0] for p in mf.chunk(x, 10)] == [1] * 6
    assert [p.shape[1] for p in x.chunk(3, dim=-1)] == [1, 1]
    assert [p.shape for p in mf.zeros(0, 2).chunk(3)] == [(0, 2)] * 3  # empty: as many empty pieces as asked
    assert gradcheck(lambda v: v.chunk(4)[1] * 2 + v.chunk(4)[2], (x,))


def test_unbind_gradients_and_shapes():
    a = rnd(2, 3, 4)
    x = t64(a)
    rows = x.unbind(1)
    assert len(rows) == 3 and all(r.shape == (2, 4) for r in rows)
    np.testing.assert_array_equal(rows[2].numpy(), a[:, 2])
    (rows[0] * 1 + rows[2] * 3).sum().backward()
    want = np.zeros_like(a)
    want[:, 0], want[:, 2] = 1, 3
    np.testing.assert_array_equal(x.grad.numpy(), want)
    assert mf.unbind(mf.zeros(0, 3)) == ()
    assert gradcheck(lambda v: mf.stack(list(v.unbind(-1))[::-1], 0), (t64(rnd(3, 2)),))


def test_pieces_are_views_sharing_the_version_counter():
    x = mf.tensor(np.arange(6.0))
    first, second = x.split(3)
    second.add_(10)  # in place through a piece: the base sees it, as in PyTorch
    assert x.tolist() == [0, 1, 2, 13, 14, 15]
    assert x._version == 1 and first._version == 1


def test_pieces_of_a_tensor_without_grad_do_not_require_grad():
    assert not any(p.requires_grad for p in mf.ones(4, 2).split(1))


# ---------------------------------------------------------------- dtype rules
@pytest.mark.parametrize("dtype", [mf.int32, mf.int64, mf.uint8, mf.bool, mf.int8])
def test_integer_and_bool_inputs_sum_and_multiply_in_int64(dtype):
    x = mf.tensor(np.array([[1, 0, 1], [1, 1, 1]]), dtype=dtype)
    assert x.sum().dtype == mf.int64 and x.sum().item() == 5
    assert x.sum(1).tolist() == [2, 3] and x.sum(1).dtype == mf.int64
    assert x.prod(1).tolist() == [0, 1] and x.prod().dtype == mf.int64
    assert x.cumsum(1).tolist() == [[1, 1, 2], [1, 2, 3]] and x.cumsum(0).dtype == mf.int64
    assert x.cumprod(1).dtype == mf.int64 and x.cumprod(1).tolist() == [[1, 0, 0], [1, 1, 1]]
    assert x.any().dtype == (mf.uint8 if dtype == mf.uint8 else mf.bool) and x.all(1).tolist() == [False, True]
    assert mf.count_nonzero(x).dtype == mf.int64 and mf.count_nonzero(x, 0).tolist() == [2, 1, 2]
    assert x.sum(dtype=mf.float64).dtype == mf.float64


def test_uint8_sums_do_not_wrap():
    x = mf.tensor(np.full(300, 200, np.uint8))
    assert x.sum().item() == 60000 and x.cumsum(0)[-1].item() == 60000


def test_float_dtypes_are_kept_and_dtype_argument_casts():
    for dtype in (mf.float16, mf.bfloat16, mf.float32):
        x = mf.ones(3, 4, dtype=dtype)
        for out in (x.prod(1), x.cumsum(0), x.cumprod(1), x.logsumexp(1), x.norm(), mf.linalg.vector_norm(x, 1)):
            assert out.dtype == dtype
    assert mf.ones(3).prod(dtype=mf.float64).dtype == mf.float64
    assert mf.ones(3).cumsum(0, dtype=mf.float64).dtype == mf.float64
    assert mf.tensor([1, 2]).mean(dtype=mf.float32).item() == 1.5


def test_integer_inputs_where_pytorch_wants_floats():
    with pytest.raises(TypeError, match="mean: could not infer output dtype.*int64"):
        mf.tensor([1, 2]).mean()
    with pytest.raises(TypeError, match="vector_norm: expected a floating point input, got int64"):
        mf.tensor([1, 2]).norm()
    lse = mf.tensor([1, 2]).logsumexp(0)  # PyTorch promotes integer inputs of logsumexp to the default float
    assert lse.dtype == mf.float32 and abs(lse.item() - math.log(math.e + math.e ** 2)) < 1e-6


def test_any_all_on_floats_and_keepdim():
    x = mf.tensor([[0.0, 0.5], [0.0, 0.0]])
    assert x.any().item() is True and x.all().item() is False
    assert x.any(1).tolist() == [True, False] and x.any(dim=0, keepdim=True).shape == (1, 2)
    assert mf.all(mf.ones(2, 3), dim=(0, 1)).item() is True
    assert mf.zeros(0).all().item() is True and mf.zeros(0).any().item() is False


# ---------------------------------------------------------------- 0-d tensors
@pytest.mark.parametrize("dim", [0, -1])
def test_zero_d_tensors_take_dim_0_and_minus_1(dim):
    x = t64(2.5)
    for name in ("sum", "mean", "prod", "amax", "amin", "logsumexp"):
        out = getattr(x, name)(dim)
        assert out.shape == () and out.item() == pytest.approx(2.5), name
        assert getattr(x, name)(dim, keepdim=True).shape == ()
    values, indices = x.max(dim)
    assert values.item() == 2.5 and indices.item() == 0 and indices.dtype == mf.int64
    assert x.min(dim, keepdim=True).values.shape == ()
    assert x.argmax(dim).item() == 0 and x.argmin(dim).shape == ()
    assert x.cumsum(dim).shape == () and x.cumprod(dim).item() == 2.5
    assert x.norm(dim=dim).item() == 2.5 and x.any(dim).item() is True and mf.count_nonzero(x, dim).item() == 1
    assert x.flip(dim).item() == 2.5 and x.roll(1, dim).item() == 2.5 and x.movedim(dim, dim).shape == ()
    for fn in (lambda v: v.sum(dim), lambda v: v.prod(dim), lambda v: v.max(dim)[0], lambda v: v.logsumexp(dim),
               lambda v: v.cumprod(dim), lambda v: v.norm(dim=dim), lambda v: v.amax(dim)):
        assert gradcheck(fn, (t64(-1.5),))


@pytest.mark.parametrize("op", ["sum", "prod", "max", "argmax", "logsumexp", "cumsum", "any", "amax"])
def test_zero_d_tensors_refuse_other_dims(op):
    with pytest.raises(IndexError, match=op):
        getattr(t64(1.0), op)(1)


def test_zero_d_refusals():
    with pytest.raises(IndexError, match="unbind: a 0-d tensor"):
        t64(1.0).unbind()
    with pytest.raises(RuntimeError, match="chunk: expected a tensor of at least 1 dimension"):
        t64(1.0).chunk(2)
    with pytest.raises(RuntimeError, match="tril: expected a tensor of at least 2 dimensions, got a 0-d"):
        t64(1.0).tril()


def test_repeated_dims_are_refused():
    with pytest.raises(RuntimeError, match="sum: dim \\(1, -1\\) names a dimension more than once"):
        t64(rnd(2, 3)).sum((1, -1))


# ---------------------------------------------------------------- empty dims
def test_reductions_over_empty_dims():
    x = mf.zeros(2, 0)
    assert x.sum(1).tolist() == [0, 0] and x.prod(1).tolist() == [1, 1]
    assert x.logsumexp(1).tolist() == [-math.inf, -math.inf]
    assert x.norm(dim=1).tolist() == [0, 0] and x.cumsum(1).shape == (2, 0)
    assert mf.count_nonzero(x).item() == 0
    with pytest.raises(ValueError, match="vector_norm: cannot reduce over an empty dimension"):
        x.norm(math.inf, dim=1)
    with pytest.raises(ValueError, match="argmax: cannot reduce over an empty dimension"):
        x.argmax(1)
    with pytest.raises(ValueError, match="argmax: cannot reduce over an empty dimension"):
        x.argmax()  # (NumPy's own error before)
    assert mf.zeros(3, 4).sum(()).shape == ()  # an empty dim list: every dim, as PyTorch's sum
    # an empty tensor reduced along a dimension that is not empty: an empty result, as PyTorch's
    e = mf.zeros(0, 3, requires_grad=True)
    values, indices = e.max(dim=1)
    assert values.shape == indices.shape == (0,) and indices.dtype == mf.int64
    assert e.amin(1).shape == (0,) and e.argmax(1).shape == (0,) and e.min(1)[0].shape == (0,)
    values.sum().backward()
    assert e.grad.shape == (0, 3)
    with pytest.raises(ValueError, match="max: cannot reduce over an empty dimension"):
        e.max(dim=0)


# ---------------------------------------------------------------- gradients where the input has zeros
def _brute_prod_grad(a):
    return np.array([np.prod(np.delete(a, i)) for i in range(a.size)])


@pytest.mark.parametrize("values", [[2.0, 0.0, 3.0, -1.0], [0.0, 0.0, 2.0], [0.0], [1.5, -2.0, 0.5]])
def test_prod_gradient_with_zeros(values):
    x = t64(values)
    x.prod().backward()
    np.testing.assert_allclose(x.grad.numpy(), _brute_prod_grad(np.array(values)), rtol=1e-12)


def _brute_cumprod_grad(a, g):
    n = a.size
    return np.array([sum(g[k] * np.prod([a[j] for j in range(k + 1) if j != i]) for k in range(i, n))
                     for i in range(n)])


@pytest.mark.parametrize("values", [[2.0, 0.0, 3.0, -1.0], [0.0, 1.5, 0.0, 2.0], [1.0, 2.0, 0.0], [0.5, -2.0, 3.0],
                                    [0.0]])
def test_cumprod_gradient_with_zeros(values):
    a = np.array(values)
    g = np.arange(1.0, a.size + 1)
    x = t64(a)
    x.cumprod(0).backward(mf.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), _brute_cumprod_grad(a, g), rtol=1e-12, atol=1e-15)


def test_cumprod_gradient_with_zeros_batched_and_gradcheck():
    a = rnd(3, 5, 2)
    a[0, 1, 0] = a[1, 0, 1] = a[1, 3, 1] = a[2, 4, 0] = 0.0
    assert gradcheck(lambda v: v.cumprod(1), (t64(a),))
    assert gradcheck(lambda v: v.prod(1), (t64(a),))


def test_norm_gradient_at_zero_is_zero():
    x = t64(np.zeros((2, 3)))
    x.norm().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 3)))
    y = t64([[0.0, 0.0], [3.0, 4.0]])
    y.norm(dim=1).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), [[0, 0], [0.6, 0.8]])
    z = t64([0.0, 2.0, -1.0])
    mf.linalg.vector_norm(z, 3).backward()
    assert z.grad.numpy()[0] == 0 and np.isfinite(z.grad.numpy()).all()


def test_inf_norm_ties_share_the_gradient():
    x = t64([1.0, -3.0, 3.0])
    x.norm(math.inf).backward()
    np.testing.assert_allclose(x.grad.numpy(), [0, -0.5, 0.5])


def test_logsumexp_is_stable():
    x = t64([[1000.0, 1000.0], [-1000.0, -1001.0], [-math.inf, -math.inf]])
    out = x.logsumexp(1)
    np.testing.assert_allclose(out.numpy()[:2], [1000 + math.log(2), -1000 + math.log1p(math.exp(-1))])
    assert out.numpy()[2] == -math.inf
    y = t64([[1000.0, 999.0]])
    y.logsumexp(1).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), [[1 / (1 + math.exp(-1)), 1 / (1 + math.e)]])


def test_norm_p_forms():
    a = rnd(3, 4)
    x = t64(a)
    np.testing.assert_allclose(x.norm().item(), np.linalg.norm(a))
    np.testing.assert_allclose(x.norm("fro", dim=(0, 1)).item(), np.linalg.norm(a))
    np.testing.assert_allclose(x.norm(p=None).item(), np.linalg.norm(a))
    np.testing.assert_allclose(mf.norm(x, 1, dim=0).numpy(), np.abs(a).sum(0))
    np.testing.assert_allclose(mf.norm(x, -math.inf, dim=1).numpy(), np.abs(a).min(1))
    np.testing.assert_allclose(x.norm("nuc").item(), np.linalg.svd(a, compute_uv=False).sum())
    b = rnd(2, 3, 4)
    np.testing.assert_allclose(mf.norm(t64(b), "nuc", dim=(1, 2), keepdim=True).numpy().ravel(),
                               np.linalg.svd(b, compute_uv=False).sum(-1))
    with pytest.raises(RuntimeError, match="dim must be a 2-tuple. Got 0 1 2"):
        t64(b).norm("nuc")
    with pytest.raises(RuntimeError, match="dim must be a 2-tuple. Got 0"):
        x.norm("nuc", dim=0)
    with pytest.raises(TypeError, match="norm: p must be 'fro' or a number"):
        x.norm([2])
    # 'fro' over more than 2 dims is PyTorch's matrix norm, refused; p=None or 2 is the 2-norm over any dims
    np.testing.assert_allclose(mf.norm(t64(b), None, dim=(0, 1, 2)).item(), np.linalg.norm(b.ravel()))
    np.testing.assert_allclose(t64(b).norm(2, dim=[0, 1, 2]).item(), np.linalg.norm(b.ravel()))
    with pytest.raises(RuntimeError, match=r"norm: expected at most 2 dims for p='fro', got dim \(0, 1, 2\)"):
        t64(b).norm(dim=(0, 1, 2))


# ---------------------------------------------------------------- einsum
@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("i,i->", [(5,), (5,)]),
    ("ij->ji", [(3, 4)]), ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (3, 4, 2)]), ("ii->", [(4, 4)]), ("ii->i", [(3, 3)]),
    ("ij,jk", [(2, 3), (3, 4)]), ("ba,ca", [(2, 3), (4, 3)]), ("ij->", [(3, 4)]), ("ij->j", [(3, 4)]),
    ("iij->ji", [(3, 3, 2)]), ("i,j,k->ijk", [(2,), (3,), (4,)]), ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("i...->...", [(3, 2, 2)]), ("...,...->...", [(3,), (2, 3)]), ("iJ,Jk->ik", [(2, 3), (3, 4)]),
    ("ij,ij->i", [(3, 1), (3, 4)]), (" i j , j k -> i k ", [(2, 3), (3, 2)]), ("i,->i", [(3,), ()])])
def test_einsum_values_and_gradients(eq, shapes):
    arrays = [rnd(*s, seed=i) for i, s in enumerate(shapes)]
    xs = [t64(a) for a in arrays]
    out = mf.einsum(eq, *xs)
    broadcast = [np.broadcast_to(a, (3, 4)) if eq == "ij,ij->i" else a for a in arrays]
    np.testing.assert_allclose(out.numpy(), np.einsum(eq.replace(" ", ""), *broadcast), rtol=1e-12, atol=1e-12)
    assert gradcheck(lambda *v: mf.einsum(eq, *v), xs)
    np.testing.assert_array_equal(mf.einsum(eq, xs).numpy(), out.numpy())  # the operands as one list


def test_einsum_gradient_reaching_one_tensor_twice_and_dtype():
    x = t64(rnd(3, 3))
    assert gradcheck(lambda v: mf.einsum("ij,jk->ik", v, v), (x,))
    for dtype in (mf.float32, mf.float16, mf.bfloat16):
        a = mf.ones(2, 3, dtype=dtype, requires_grad=True)
        out = mf.einsum("ij,kj->ik", a, a)
        out.sum().backward()
        assert out.dtype == dtype and a.grad.dtype == dtype
        np.testing.assert_allclose(out.numpy().astype(np.float64), np.full((2, 2), 3.0))
        np.testing.assert_allclose(a.grad.numpy().astype(np.float64), np.full((2, 3), 4.0))


def test_einsum_bad_equations():
    with pytest.raises(ValueError, match="output subscript 'i' appears more than once"):
        mf.einsum("ij->ii", t64(rnd(2, 3)))
    with pytest.raises(ValueError, match="subscript 'i' repeats in operand 0 over dims of sizes \\[2, 3\\]"):
        mf.einsum("ii->i", t64(rnd(2, 3)))
    with pytest.raises(ValueError, match="expected at least one operand"):
        mf.einsum("ij")
    with pytest.raises(TypeError, match="einsum: the operands must be tensors"):
        mf.einsum("i,i", t64(rnd(2)), np.ones(2))


@pytest.mark.parametrize("sublists,shapes", [
    (([0, 1, 2], [0, 2, 3], [0, 1, 3]), [(2, 3, 4), (2, 4, 5)]), (([..., 1, 2], [..., 2, 3], [..., 1, 3]),
                                                                 [(2, 3, 4), (4, 5)]),
    (([0, 30], [30, 51]), [(3, 4), (4, 5)]), (([26, 1], [26, 2]), [(4, 3), (4, 5)]), (([1, 1], []), [(3, 3)]),
    (([0, 0],), [(3, 3)])])
def test_einsum_sublist_format_follows_pytorch(sublists, shapes):
    """torch.einsum(op1, sublist1, op2, sublist2, ..., [sublist_out]): 0-25 spell 'A'-'Z', 26-51 'a'-'z' (the
    implicit output's order), Ellipsis '...'; against NumPy's sublist einsum, and PyTorch's where importable."""
    arrays = [rnd(*s, seed=i) for i, s in enumerate(shapes)]
    out_sublist = list(sublists[len(arrays):])

    def spelled(operands):
        return [x for pair in zip(operands, sublists) for x in pair] + out_sublist

    out = mf.einsum(*spelled([t64(a) for a in arrays]))
    expected = np.einsum(*spelled(arrays))
    assert out.shape == expected.shape
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-12, atol=1e-12)
    try:
        import torch
    except ImportError:
        pass
    else:
        np.testing.assert_allclose(out.detach().numpy(), torch.einsum(*spelled([torch.tensor(a) for a in arrays])),
                                   rtol=1e-12, atol=1e-12)
    assert gradcheck(lambda *v: mf.einsum(*spelled(v)), [t64(a) for a in arrays])


def test_einsum_sublist_bad_subscripts():
    x = t64(rnd(2, 3))
    with pytest.raises(ValueError, match=r"einsum: subscript 52 in the sublist of operand 0 is not in \[0, 52\)"):
        mf.einsum(x, [0, 52])
    with pytest.raises(TypeError, match="einsum: subscripts in the sublist of the output must be ints or Ellipsis, "
                                        "got float"):
        mf.einsum(x, [0, 1], [1.0])
    with pytest.raises(TypeError, match="einsum: expected a list of subscripts for the output, got Tensor"):
        mf.einsum(x, [0, 1], x)


# ---------------------------------------------------------------- matrix products, movement
def test_mm_bmm_dot_outer_addmm_t_values():
    a, b, c = rnd(3, 4), rnd(4, 5, seed=1), rnd(2, 3, 4, seed=2)
    np.testing.assert_allclose(mf.mm(t64(a), t64(b)).numpy(), a @ b)
    np.testing.assert_allclose(mf.bmm(t64(c), t64(np.swapaxes(c, 1, 2))).numpy(), c @ np.swapaxes(c, 1, 2))
    np.testing.assert_allclose(mf.dot(t64(a[0]), t64(a[1])).item(), a[0] @ a[1])
    np.testing.assert_allclose(mf.outer(t64(a[0]), t64(b[1])).numpy(), np.outer(a[0], b[1]))
    np.testing.assert_allclose(mf.addmm(t64(b[0]), t64(a), t64(b), beta=2, alpha=0.5).numpy(), 2 * b[0] + 0.5 * a @ b)
    nan = t64(np.full((3, 5), np.nan))
    assert np.isfinite(mf.addmm(nan, t64(a), t64(b), beta=0).numpy()).all()  # beta = 0 ignores input
    assert t64(a).t().shape == (4, 3) and mf.t(t64(a[0])).shape == (4,)
    assert mf.outer(mf.tensor([1, 2]), mf.tensor([0.5])).dtype == mf.float32  # promoted as *


def test_movement_values():
    a = rnd(3, 4, 5)
    x = t64(a)
    np.testing.assert_array_equal(x.repeat(2, 1, 1, 3).numpy(), np.tile(a, (2, 1, 1, 3)))
    np.testing.assert_array_equal(x.tile((2,)).numpy(), np.tile(a, 2))
    np.testing.assert_array_equal(x.flip(0, 2).numpy(), a[::-1, :, ::-1])
    np.testing.assert_array_equal(x.roll(2).numpy(), np.roll(a, 2))
    np.testing.assert_array_equal(x.roll((1, -1), (2, 0)).numpy(), np.roll(a, (1, -1), (2, 0)))
    np.testing.assert_array_equal(x.tril(-1).numpy(), np.tril(a, -1))
    np.testing.assert_array_equal(mf.triu(x, 2).numpy(), np.triu(a, 2))
    np.testing.assert_array_equal(x.movedim((0, 1), (2, 0)).numpy(), np.moveaxis(a, (0, 1), (2, 0)))
    np.testing.assert_array_equal(x.narrow(2, 1, 3).numpy(), a[:, :, 1:4])
    np.testing.assert_array_equal(x.swapdims(0, 2).numpy(), np.swapaxes(a, 0, 2))
    np.testing.assert_array_equal(x.expand_as(mf.zeros(2, 3, 4, 5)).numpy(), np.broadcast_to(a, (2, 3, 4, 5)))
    np.testing.assert_array_equal(x.reshape_as(mf.zeros(5, 12)).numpy(), a.reshape(5, 12))
    y = x.flip(0)
    y.data[...] = 0  # flip copies, as torch.flip does
    assert x.numpy()[0, 0, 0] == a[0, 0, 0]
    assert gradcheck(lambda v: v.repeat(2, 1, 3, 1), (x,))
    assert gradcheck(lambda v: v.tril(1) * v.triu(), (x,))


# ---------------------------------------------------------------- the GPU against PyTorch
def _both(torch, a, requires_grad=True):
    return (mf.tensor(a.astype(np.float32), device="cuda", requires_grad=requires_grad),
            torch.tensor(a.astype(np.float32), device="cuda", requires_grad=requires_grad))


def _close(ours, theirs, tol=2e-5):
    np.testing.assert_allclose(host(ours), theirs.detach().cpu().numpy(), rtol=tol, atol=tol)


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["split", "sections", "chunk", "unbind"])
def test_pieces_match_pytorch_on_cuda(torch, how):
    a = rnd(7, 5)
    x, tx = _both(torch, a)
    call = {"split": lambda v: v.split(3, 0), "sections": lambda v: v.split([1, 3, 1], 1),
            "chunk": lambda v: v.chunk(3, 1), "unbind": lambda v: v.unbind(0)}[how]
    ours, theirs = call(x), call(tx)
    assert len(ours) == len(theirs)
    for i, (o, p) in enumerate(zip(ours, theirs)):
        assert o.device.type == "cuda"
        _close(o, p)
    # gradients into every piece but the second
    sum(((o * (i + 1)).sum() for i, o in enumerate(ours) if i != 1), mf.zeros((), device="cuda")).backward()
    sum((p * (i + 1)).sum() for i, p in enumerate(theirs) if i != 1).backward()
    _close(x.grad, tx.grad)


@pytest.mark.gpu
def test_zeros_in_products_and_norm_match_pytorch_on_cuda(torch):
    a = rnd(4, 6)
    a[0, 2] = a[1, 0] = a[1, 4] = a[3, 5] = 0.0
    a[2] = 0.0
    for fn in (lambda v: v.prod(1), lambda v: v.cumprod(1), lambda v: v.cumprod(0), lambda v: v.norm(dim=1),
               lambda v: v.prod(), lambda v: v.logsumexp(0), lambda v: v.cumsum(-1)):
        x, tx = _both(torch, a)
        y, ty = fn(x), fn(tx)
        _close(y, ty)
        g = rnd(*ty.shape, seed=3).astype(np.float32)
        (y * mf.tensor(g, device="cuda")).sum().backward()
        (ty * torch.tensor(g, device="cuda")).sum().backward()
        _close(x.grad, tx.grad, 1e-4)


@pytest.mark.gpu
def test_dtype_rules_and_zero_d_match_pytorch_on_cuda(torch):
    ints = np.array([[1, 0, 3], [2, 2, 0]], np.int32)
    x, tx = mf.tensor(ints, device="cuda"), torch.tensor(ints, device="cuda")
    for fn in (lambda v: v.sum(), lambda v: v.sum(1), lambda v: v.prod(0), lambda v: v.cumsum(1),
               lambda v: v.cumprod(0), lambda v: v.any(1), lambda v: v.all(), lambda v: v.count_nonzero()):
        ours, theirs = fn(x), fn(tx)
        assert str(ours.dtype) == str(theirs.dtype).replace("torch.", ""), (ours.dtype, theirs.dtype)
        np.testing.assert_array_equal(host(ours), theirs.cpu().numpy())
    s, ts = _both(torch, np.array(1.5))
    for fn in (lambda v: v.sum(0), lambda v: v.mean(-1), lambda v: v.max(0)[0], lambda v: v.amax(-1),
               lambda v: v.logsumexp(0), lambda v: v.cumsum(0), lambda v: v.prod(0)):
        ours, theirs = fn(s), fn(ts)
        assert ours.shape == tuple(theirs.shape)
        _close(ours, theirs)
    assert s.argmax(0).item() == ts.argmax(0).item()


@pytest.mark.gpu
@pytest.mark.parametrize("eq,shapes", [("ii->i", [(4, 4)]), ("ii->", [(5, 5)]), ("...ij,...jk->...ik", [(2, 1, 3, 4), (3, 4, 2)]),
                                        ("bhqd,bhkd->bhqk", [(2, 3, 4, 8), (2, 3, 5, 8)]), ("ij->j", [(3, 33)])])
def test_einsum_matches_pytorch_on_cuda(torch, eq, shapes):
    pairs = [_both(torch, rnd(*s, seed=i)) for i, s in enumerate(shapes)]
    y = mf.einsum(eq, *[p[0] for p in pairs])
    ty = torch.einsum(eq, *[p[1] for p in pairs])
    _close(y, ty, 1e-4)
    g = rnd(*ty.shape, seed=7).astype(np.float32)
    (y * mf.tensor(g, device="cuda")).sum().backward()
    (ty * torch.tensor(g, device="cuda")).sum().backward()
    for o, p in pairs:
        _close(o.grad, p.grad, 1e-4)


def test_cummax_cummin_ties_ints_and_gradients():
    x = mf.tensor([[1, 3, 2, 3, 0, 5]])
    values, indices = x.cummax(1)
    assert values.tolist() == [[1, 3, 3, 3, 3, 5]] and indices.tolist() == [[0, 1, 1, 3, 3, 5]]  # ties: later index
    assert values.dtype == mf.int64 and indices.dtype == mf.int64
    assert mf.cummin(x, -1).indices.tolist() == [[0, 0, 0, 0, 4, 4]]
    y = t64([2.0, 1.0, 2.0, 3.0])
    y.cummax(0).values.backward(mf.tensor([1.0, 10.0, 100.0, 1000.0], dtype=mf.float64))
    np.testing.assert_array_equal(y.grad.numpy(), [11, 0, 100, 1000])


def test_shape_methods_take_pytorchs_keywords_and_tile_separate_ints():
    """``Tensor.tile(2, 1)`` (the method takes the dims as separate ints, as repeat does) and the keyword names of
    PyTorch's signatures: permute(dims=), reshape(shape=), expand(size=), repeat(repeats=), tile(dims=)."""
    a = np.arange(6.0).reshape(2, 3)
    x = mf.tensor(a)
    np.testing.assert_array_equal(x.tile(2, 1).numpy(), np.tile(a, (2, 1)))
    np.testing.assert_array_equal(x.tile(dims=(2, 1, 1)).numpy(), np.tile(a, (2, 1, 1)))
    np.testing.assert_array_equal(mf.tile(x, (2,)).numpy(), np.tile(a, (1, 2)))
    np.testing.assert_array_equal(x.permute(dims=(1, 0)).numpy(), a.T)
    np.testing.assert_array_equal(mf.permute(x, dims=[1, 0]).numpy(), a.T)
    np.testing.assert_array_equal(x.reshape(shape=(3, 2)).numpy(), a.reshape(3, 2))
    np.testing.assert_array_equal(x.expand(size=(2, 2, 3)).numpy(), np.broadcast_to(a, (2, 2, 3)))
    np.testing.assert_array_equal(x.repeat(repeats=(2, 1)).numpy(), np.tile(a, (2, 1)))
    with pytest.raises(TypeError, match="permute\\(\\) got multiple values for argument 'dims'"):
        x.permute(1, 0, dims=(1, 0))
    with pytest.raises(TypeError, match="tile: dims must be ints"):
        x.tile(2, 1.5)


def test_repeat_interleave_takes_int32_counts_and_keeps_their_dtype():
    """PyTorch's repeat_interleave takes int32 as well as int64 repeats; the counts-only form returns indices in
    the counts' dtype (int32 in, int32 out). Other integer dtypes are refused, as PyTorch's."""
    a = np.arange(3.0)
    counts = mf.tensor([1, 2, 0], dtype=mf.int32)
    np.testing.assert_array_equal(mf.tensor(a).repeat_interleave(counts).numpy(), np.repeat(a, [1, 2, 0]))
    np.testing.assert_array_equal(mf.tensor(a).repeat_interleave(mf.tensor(2, dtype=mf.int32)).numpy(), np.repeat(a, 2))
    idx = mf.repeat_interleave(counts)
    assert idx.dtype == mf.int32 and idx.tolist() == [0, 1, 1]
    assert mf.repeat_interleave(mf.tensor([1, 2])).dtype == mf.int64
    with pytest.raises(RuntimeError, match="repeat_interleave: repeats must be an int or a 0-d / 1-d int64 or int32"):
        mf.tensor(a).repeat_interleave(mf.tensor([1, 2, 0], dtype=mf.int16))
    # a 0-d input: its element repeated without a dim, any dim refused (PyTorch's IndexError, for 0 and -1 too)
    assert mf.tensor(5).repeat_interleave(mf.tensor([2])).tolist() == [5, 5]
    with pytest.raises(IndexError, match="repeat_interleave: expected a tensor of at least 1 dimension for dim=0"):
        mf.tensor(5).repeat_interleave(2, 0)


def test_narrow_takes_a_0d_integer_tensor_start():
    """PyTorch documents narrow's ``start`` as an int or a 0-dim integral tensor (a bool, float or 1-element 1-D
    tensor is refused); narrow_copy follows."""
    a = np.arange(6.0)
    x = mf.tensor(a)
    np.testing.assert_array_equal(x.narrow(0, mf.tensor(1), 2).numpy(), a[1:3])
    np.testing.assert_array_equal(x.narrow(0, mf.tensor(-2, dtype=mf.int32), 2).numpy(), a[-2:])
    np.testing.assert_array_equal(mf.narrow_copy(x, 0, mf.tensor(3), mf.tensor(2)).numpy(), a[3:5])
    for bad in (mf.tensor([1]), mf.tensor(1.0), mf.tensor(True)):
        with pytest.raises(RuntimeError, match="narrow: start must be a 0-dim integral Tensor"):
            x.narrow(0, bad, 2)


def test_integer_0d_tensors_serve_as_sizes_and_counts():
    """A size, count or k computed by tensors (``n = lengths.max()``) goes where an int goes, as in PyTorch
    (its ``__index__``); a 0-d float tensor is refused as a float is."""
    a = np.arange(24.0).reshape(4, 6)
    x, n = mf.tensor(a), mf.tensor(2)
    np.testing.assert_array_equal(x.view(n, -1).numpy(), a.reshape(2, 12))
    np.testing.assert_array_equal(x.reshape(-1, n).numpy(), a.reshape(-1, 2))
    np.testing.assert_array_equal(mf.ones(1, 3).expand(n, -1).numpy(), np.ones((2, 3)))
    np.testing.assert_array_equal(x.repeat(n, 1).numpy(), np.tile(a, (2, 1)))
    np.testing.assert_array_equal(x.split(n)[1].numpy(), a[2:])
    np.testing.assert_array_equal(x.chunk(n, 1)[0].numpy(), a[:, :3])
    np.testing.assert_array_equal(x.roll(n, 1).numpy(), np.roll(a, 2, 1))
    np.testing.assert_array_equal(x.topk(n, 1).values.numpy(), a[:, :-3:-1])
    np.testing.assert_array_equal(x.kthvalue(n, 1).values.numpy(), a[:, 1])
    y = mf.tensor([0, 2, 1])
    np.testing.assert_array_equal(mf.functional.one_hot(y, y.max() + 1).numpy(), np.eye(3, dtype=np.int64)[[0, 2, 1]])
    with pytest.raises(TypeError, match=r"view: sizes must be ints, got \(tensor\(2\.\), -1\)"):
        x.view(mf.tensor(2.0), -1)
    with pytest.raises(TypeError, match="topk: k must be an int, got Tensor"):
        x.topk(mf.tensor(2.0))
