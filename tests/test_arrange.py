"""The arranging ops (minifused/ops/arrange.py) beyond their registry entries (tests/opinfo.py, ARRANGE_OPS):
the several-tensor results, the argument forms PyTorch takes, views and in-place writes through them, the index
makers' values and dtypes against NumPy, and gradients through the compositions."""
import itertools

import numpy as np
import pytest

import minifused as mf
from minifused.testing import gradcheck


def f64(*shape, seed=0, requires_grad=True):
    a = np.random.default_rng(seed).standard_normal(shape)
    return mf.tensor(a, dtype=mf.float64, device="cpu", requires_grad=requires_grad)


# ---------------------------------------------------------------- splitting
@pytest.mark.parametrize("spec", [3, 4, 9, [2, 5], [5, 2], [-2, 6], [-20, 3], [0, 0, 7, 7], []])
def test_tensor_split_matches_numpy_array_split(spec):
    a = f64(7, 2, requires_grad=False)
    got = mf.tensor_split(a, spec)
    want = np.array_split(a.numpy(), spec)
    assert isinstance(got, tuple) and len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w)


def test_tensor_split_tensor_and_keyword_forms():
    a = mf.arange(7, device="cpu")
    assert [p.tolist() for p in a.tensor_split(mf.tensor(3))] == [[0, 1, 2], [3, 4], [5, 6]]
    assert [p.tolist() for p in a.tensor_split(mf.tensor([2, -2]))] == [[0, 1], [2, 3, 4], [5, 6]]
    assert [p.tolist() for p in mf.tensor_split(a, sections=2)] == [[0, 1, 2, 3], [4, 5, 6]]
    assert [p.tolist() for p in mf.tensor_split(a, indices=(4,))] == [[0, 1, 2, 3], [4, 5, 6]]
    with pytest.raises(TypeError, match="exactly one of"):
        mf.tensor_split(a, 2, sections=2)


def test_hsplit_vsplit_dsplit_pieces():
    a = f64(4, 6, 2, requires_grad=False)
    for ours, theirs in ((mf.hsplit(a, 3), np.hsplit(a.numpy(), 3)), (a.vsplit([1, 3]), np.vsplit(a.numpy(), [1, 3])),
                         (a.dsplit(2), np.dsplit(a.numpy(), 2)), (a.hsplit(sections=2), np.hsplit(a.numpy(), 2)),
                         (mf.vsplit(a, indices=[1]), np.vsplit(a.numpy(), [1]))):
        assert len(ours) == len(theirs)
        for g, w in zip(ours, theirs):
            np.testing.assert_array_equal(g.numpy(), w)
    with pytest.raises(TypeError, match="dsplit: expected exactly one of indices_or_sections, sections or indices"):
        a.dsplit(2, indices=[1])


def test_split_gradients_overlapping_and_unused_pieces():
    a = f64(7, 3)
    assert gradcheck(lambda x: mf.tensor_split(x, [5, 2]), [a])  # the middle piece empty, the outer two overlapping
    assert gradcheck(lambda x: x.tensor_split(3, dim=1)[1] * 2, [a])
    assert gradcheck(lambda x: x.hsplit([1])[1].exp(), [a])


# ---------------------------------------------------------------- views and in-place writes
def test_views_share_memory_and_version():
    x = mf.zeros(2, 3, device="cpu")
    x.select(0, 1)[...] = 5
    x.ravel()[0] = 7
    x.unflatten(1, (3, 1))[0, 2, 0] = 9
    x.tensor_split(3, dim=1)[1][:] = 1
    mf.atleast_3d(x)[1, 2, 0] = 4
    assert x.tolist() == [[7.0, 1.0, 9.0], [5.0, 1.0, 4.0]]
    v = x.select(1, 0)
    before = x._version
    v.mul_(2)
    assert x._version == v._version == before + 1 and x[1, 0].item() == 10.0


def test_in_place_through_a_view_of_a_leaf_is_refused():
    leaf = f64(3)
    with pytest.raises(RuntimeError, match="view of a leaf Variable"):
        leaf.select(0, 1).mul_(2)


def test_copies_do_not_alias():
    x = mf.arange(6.0, device="cpu").reshape(2, 3)
    for y in (x.rot90(0), x.rot90(2), x.fliplr(), x.flipud(), mf.select_scatter(x, mf.zeros(2), 1, 0)):
        y.mul_(0)
    assert x.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


def test_broadcast_to_is_a_view_and_broadcast_tensors_a_tuple():
    a = mf.arange(3.0, device="cpu")
    b = mf.broadcast_to(a, (2, -1))
    assert b.shape == (2, 3) and np.shares_memory(b._data, a._data)
    assert a.broadcast_to(3).shape == (3,)
    x, y = mf.broadcast_tensors(a, mf.ones(2, 1, device="cpu"))
    assert x.shape == y.shape == (2, 3)
    assert mf.broadcast_tensors() == ()


# ---------------------------------------------------------------- joining
def test_atleast_return_forms():
    s, v = mf.tensor(1.0, device="cpu"), mf.ones(2, 3, device="cpu")
    assert mf.atleast_1d(v) is v and mf.atleast_2d(v) is v
    assert mf.atleast_1d(s).shape == (1,)
    one = mf.atleast_2d([s])
    assert isinstance(one, tuple) and one[0].shape == (1, 1)
    both = mf.atleast_3d(s, v)
    assert isinstance(both, tuple) and [t.shape for t in both] == [(1, 1, 1), (2, 3, 1)]
    assert mf.atleast_1d() == ()


def test_stacks_promote_and_match_numpy():
    i, f = mf.tensor([1, 2], device="cpu"), mf.tensor([0.5, 1.5], device="cpu")
    out = mf.hstack([i, f])
    assert out.dtype == mf.float32 and out.tolist() == [1.0, 2.0, 0.5, 1.5]
    assert mf.row_stack((i, i)).tolist() == np.vstack([[1, 2], [1, 2]]).tolist()
    a, b = f64(3, requires_grad=False), f64(3, 2, seed=1, requires_grad=False)
    np.testing.assert_array_equal(mf.column_stack([a, b, a]).numpy(),
                                  np.column_stack([a.numpy(), b.numpy(), a.numpy()]))
    np.testing.assert_array_equal(mf.dstack([b, b]).numpy(), np.dstack([b.numpy(), b.numpy()]))


def test_concat_spellings():
    a, b = mf.ones(2, 1, device="cpu"), mf.zeros(2, 3, device="cpu")
    for out in (mf.concat([a, b], 1), mf.concat([a, b], axis=1), mf.concatenate([a, b], 1),
                mf.concatenate([a, b], dim=-1), mf.cat([a, b], 1), mf.cat([a, b], axis=1)):
        assert out.shape == (2, 4) and out[:, 0].tolist() == [1.0, 1.0]
    stacked = mf.stack([b, b + 1], axis=-1)
    assert stacked.shape == (2, 3, 2) and stacked[0, 0].tolist() == [0.0, 1.0]


def test_cat_skips_an_empty_1d_tensor_as_pytorch():
    """The accumulate-into-torch.tensor([]) idiom: an empty 1-d tensor beside tensors of another rank is
    skipped (after taking part in the result's dtype), as PyTorch's legacy rule; another empty shape is not."""
    preds = mf.tensor([])
    for i in range(3):
        preds = mf.cat([preds, mf.full((2, 4), float(i))])
    assert preds.shape == (6, 4) and preds[:, 0].tolist() == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0]
    x = mf.ones(2, 3, dtype=mf.float64, requires_grad=True)
    y = mf.cat([mf.tensor([]), x], 1)
    assert y.dtype == mf.float64 and y.shape == (2, 3)
    (y * 2).sum().backward()
    assert x.grad.tolist() == [[2.0] * 3] * 2
    empty = mf.zeros(0, dtype=mf.float64, requires_grad=True)  # (its gradient is empty, as PyTorch's, not None)
    mf.cat([empty, x, empty], -1).sum().backward()
    assert empty.grad.shape == (0,) and x.grad.tolist() == [[3.0] * 3] * 2
    assert mf.cat([mf.tensor([]), mf.ones(2, dtype=mf.int64)]).dtype == mf.float32  # (all 1-d: an ordinary cat)
    assert mf.cat([mf.tensor([]), mf.tensor([])]).shape == (0,)
    with pytest.raises(ValueError, match=r"cat: shapes \(0, 3\) and \(2, 4\) differ outside dimension 0"):
        mf.cat([mf.zeros(0, 3), mf.ones(2, 4)])


def test_join_gradients():
    a, b = f64(3), f64(3, 2, seed=1)
    assert gradcheck(lambda x, y: mf.column_stack([x, y]), [a, b])
    assert gradcheck(lambda x, y: mf.vstack([x, y.T]), [a, b])
    assert gradcheck(lambda x: mf.dstack([x, x * 2]), [b])


# ---------------------------------------------------------------- rotating
@pytest.mark.parametrize("k", range(-5, 6))
@pytest.mark.parametrize("dims", [(0, 1), (1, 0), (2, 0), (-1, 1)])
def test_rot90_matches_numpy(k, dims):
    a = f64(2, 3, 4, requires_grad=False)
    np.testing.assert_array_equal(a.rot90(k, dims).numpy(), np.rot90(a.numpy(), k, dims))


def test_rot90_gradient():
    assert gradcheck(lambda x: mf.rot90(x, 1, (1, 2)), [f64(2, 3, 4)])
    assert gradcheck(lambda x: x.rot90(-1), [f64(3, 5)])


# ---------------------------------------------------------------- flat and triangular indices
def test_take_negative_and_repeated_indices():
    x = f64(3, 4)
    idx = mf.tensor([[0, -1], [5, 5]], device="cpu")
    np.testing.assert_array_equal(mf.take(x, idx).detach().numpy(), np.take(x.detach().numpy(), idx.numpy()))
    mf.take(x, idx).sum().backward()
    want = np.zeros(12)
    np.add.at(want, [0, 11, 5, 5], 1)
    np.testing.assert_array_equal(x.grad.numpy(), want.reshape(3, 4))
    assert mf.take(x, mf.zeros(0, dtype=mf.int64, device="cpu")).shape == (0,)


@pytest.mark.parametrize("row,col,offset", [(0, 0, 0), (1, 1, 0), (3, 4, 0), (4, 3, 1), (5, 2, -2), (3, 3, 5),
                                            (3, 3, -5), (33, 7, -3)])
def test_triangle_indices_match_numpy(row, col, offset):
    lo, up = mf.tril_indices(row, col, offset, device="cpu"), mf.triu_indices(row, col, offset, device="cpu")
    assert lo.dtype == up.dtype == mf.int64 and lo.shape[0] == up.shape[0] == 2
    np.testing.assert_array_equal(lo.numpy(), np.stack(np.tril_indices(row, offset, col)))
    np.testing.assert_array_equal(up.numpy(), np.stack(np.triu_indices(row, offset, col)))


def test_triangle_indices_dtype_and_keywords():
    out = mf.tril_indices(row=3, col=3, dtype=mf.int32, device="cpu")
    assert out.dtype == mf.int32 and out.tolist() == [[0, 1, 1, 2, 2, 2], [0, 0, 1, 0, 1, 2]]
    assert mf.triu_indices(3, 3, 1, dtype="int64", device="cpu").tolist() == [[0, 0, 1], [1, 2, 2]]


def test_unravel_index_wraps_as_pytorch():
    idx = mf.tensor([4, 1, -1, 6, -7], dtype=mf.int32, device="cpu")
    rows, cols = mf.unravel_index(idx, (2, 3))
    assert rows.dtype == cols.dtype == mf.int64
    assert rows.tolist() == [1, 0, 1, 0, 1] and cols.tolist() == [1, 1, 2, 0, 2]  # PyTorch's floor division and mod
    (flat,) = mf.unravel_index(mf.tensor(4, device="cpu"), 6)
    assert flat.shape == () and flat.item() == 4
    assert mf.unravel_index(mf.tensor(0, device="cpu"), ()) == ()
    assert [t.shape for t in mf.unravel_index(mf.zeros(0, dtype=mf.int64, device="cpu"), (2, 0))] == [(0,), (0,)]
    with pytest.raises(ValueError, match="zero dimensions"):
        mf.unravel_index(mf.tensor([0], device="cpu"), (2, 0))


# ---------------------------------------------------------------- products of index sets
@pytest.mark.parametrize("r", [1, 2, 3, 5])
@pytest.mark.parametrize("with_replacement", [False, True])
def test_combinations_match_itertools(r, with_replacement):
    a = mf.tensor([3, 1, 4, 1], device="cpu")
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    want = np.array(list(pick(a.tolist(), r)), dtype=np.int64).reshape(-1, r)
    out = mf.combinations(a, r, with_replacement)
    assert out.dtype == mf.int64 and out.shape == want.shape
    np.testing.assert_array_equal(out.numpy(), want)


def test_combinations_r0_and_gradient():
    assert mf.combinations(mf.ones(3, device="cpu"), 0).shape == (0,)
    assert gradcheck(lambda x: mf.combinations(x, 3, with_replacement=True), [f64(4)])


def test_cartesian_prod():
    a = mf.tensor([1, 2], device="cpu")
    assert mf.cartesian_prod(a) is a
    out = mf.cartesian_prod(a, mf.tensor([3, 4, 5], device="cpu"), mf.tensor([0], device="cpu"))
    assert out.tolist() == [list(p) for p in itertools.product([1, 2], [3, 4, 5], [0])]
    assert gradcheck(lambda x, y: mf.cartesian_prod(x, y), [f64(2), f64(3, seed=1)])


# ---------------------------------------------------------------- out-of-place scatters
def test_scatters_leave_input_and_cast_src():
    x = mf.zeros(4, 3, device="cpu")
    out = x.slice_scatter(mf.ones(2, 3, dtype=mf.float64, device="cpu"), start=1, step=2)
    assert out.dtype == mf.float32 and x.sum().item() == 0
    assert out[:, 0].tolist() == [0.0, 1.0, 0.0, 1.0]
    out = mf.select_scatter(x, mf.tensor([1, 2, 3], device="cpu"), 0, -1)
    assert out.dtype == mf.float32 and out[3].tolist() == [1.0, 2.0, 3.0]


def test_scatter_gradients():
    a, s = f64(3, 4), f64(3, 2, seed=1)
    assert gradcheck(lambda x, y: mf.slice_scatter(x, y, 1, 1, None, 2), [a, s])
    assert gradcheck(lambda x, y: x.select_scatter(y, 0, 1), [a, f64(4, seed=2)])
    # src alone requiring grad (input a constant), and input alone
    c = f64(3, 4, requires_grad=False)
    assert gradcheck(lambda y: mf.slice_scatter(c, y, -1, 2, 4), [s])
    assert gradcheck(lambda x: mf.select_scatter(x, mf.zeros(3, dtype=mf.float64, device="cpu"), 1, 0), [a])


def test_methods_and_functions_agree():
    x = f64(2, 6, requires_grad=False)
    assert mf.unflatten(x, -1, (3, -1)).shape == x.unflatten(-1, [3, 2]).shape == (2, 3, 2)
    assert mf.ravel(x).shape == (12,) and mf.select(x, 1, -1).shape == (2,)
    assert mf.swapdims(x, 0, 1).shape == (6, 2) and mf.moveaxis(x, 0, -1).shape == (6, 2)
    np.testing.assert_array_equal(mf.fliplr(x).numpy(), np.fliplr(x.numpy()))
    np.testing.assert_array_equal(mf.flipud(x).numpy(), np.flipud(x.numpy()))


def test_int_arguments_take_a_0d_integer_tensor():
    """PyTorch takes a 0-d integer tensor wherever an int goes (``x.select(1, i)`` with ``i = idx[0]``)."""
    a = np.arange(24.0).reshape(2, 3, 4)
    x, two, one = mf.tensor(a), mf.tensor(2), mf.tensor(1)
    np.testing.assert_array_equal(x.select(1, two).numpy(), a[:, 2])
    np.testing.assert_array_equal(x.rot90(one).numpy(), np.rot90(a))
    np.testing.assert_array_equal(x.unfold(2, two, one).numpy(), np.lib.stride_tricks.sliding_window_view(a, 2, 2))
    assert [p.shape for p in x.chunk(two, 2)] == [(2, 3, 2)] * 2
    np.testing.assert_array_equal(mf.slice_scatter(x, x[:, :, :2] * 0, 2, one, mf.tensor(3)).numpy()[..., 1:3], 0)


def test_dims_take_a_0d_integer_tensor():
    a = np.arange(6.0).reshape(2, 3)
    x, d = mf.tensor(a), mf.tensor(-1)
    np.testing.assert_array_equal(x.transpose(d, 0).numpy(), a.T)
    np.testing.assert_array_equal(mf.cat([x, x], d).numpy(), np.concatenate([a, a], -1))
    np.testing.assert_array_equal(x.sum((d, mf.tensor(0))).numpy(), a.sum())
    np.testing.assert_array_equal(x.gather(d, mf.tensor([[2], [0]])).numpy(), [[2.0], [3.0]])
    with pytest.raises(TypeError, match="must be an int"):
        x.sum(mf.tensor(1.0))
