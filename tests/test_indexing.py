"""Tensor indexing on both sides of ``=`` (ranges, lists, masks, index tensors broadcast together and mixed
with slices / None / Ellipsis, 0-d index tensors), against NumPy and hand-derived float64 gradients: a
case's reference applied to ``arange`` gives the flat positions it reads, from which the expected values
and gradients follow. setitem's autograd (the overwritten positions get no gradient, the value gets
the rest), its version bump and leaf check, the errors; sort / topk / kthvalue results. The GPU tests
compare the same cases with PyTorch."""
import numpy as np
import pytest

import minifused as mf
from minifused import backend
from minifused.testing import gradcheck
from tolerances import cpu

SHAPE = (4, 5, 6)
_RNG = np.random.default_rng(7)
MASK3 = _RNG.random(SHAPE) > 0.5
MASK2 = _RNG.random(SHAPE[:2]) > 0.4
MASK1 = np.array([True, False, True, True])


def _ours(device):
    return lambda data, dtype=np.int64: mf.tensor(np.asarray(data, dtype), device=device)


# (name, index builder given a tensor maker T, NumPy reference of the read) over an array of SHAPE.
# PyTorch applies integers before index tensors: x[1, :, [0, 5]] is x[1][:, [0, 5]] (NumPy: transposed).
CASES = [
    ("range", lambda T: range(1, 4), lambda a: a[[1, 2, 3]]),
    ("list", lambda T: [3, 0, 3], lambda a: a[[3, 0, 3]]),
    # PyTorch reads a short list holding sequences as a tuple (as NumPy did before 1.23)
    ("nested_list", lambda T: [[0, 1], [2, 3]], lambda a: a[[0, 1], [2, 3]]),
    ("list_of_slices", lambda T: [slice(1, 3), 2], lambda a: a[1:3, 2]),
    ("empty_list", lambda T: [], lambda a: a[np.array([], np.int64)]),
    ("negative_tensor", lambda T: T([-1, -4, 2]), lambda a: a[[3, 0, 2]]),
    ("two_tensors_broadcast", lambda T: (T([[0], [3]]), T([1, 4, 0])), lambda a: a[[[0], [3]], [1, 4, 0]]),
    ("tensors_split_by_slice", lambda T: (T([0, 2]), slice(None), T([1, 5])), lambda a: a[[0, 2], :, [1, 5]]),
    ("slice_then_adjacent_tensors", lambda T: (slice(1, 3), T([0, 4]), T([1, 5])), lambda a: a[1:3, [0, 4], [1, 5]]),
    ("int_slice_tensor", lambda T: (1, slice(None), T([0, 5])), lambda a: a[1][:, [0, 5]]),
    ("tensor_int_tensor", lambda T: (T([0, 1]), 2, T([3, 4])), lambda a: a[:, 2][[0, 1], [3, 4]]),
    ("mask_full", lambda T: T(MASK3, np.bool_), lambda a: a[MASK3]),
    ("mask_leading", lambda T: T(MASK2, np.bool_), lambda a: a[MASK2]),
    ("mask_then_slice", lambda T: (T(MASK1, np.bool_), slice(1, 4)), lambda a: a[MASK1, 1:4]),
    ("slice_mask", lambda T: (slice(None), T(MASK2[0], np.bool_)), lambda a: a[:, MASK2[0]]),
    ("ellipsis_tensor", lambda T: (Ellipsis, T([0, 0, 5])), lambda a: a[..., [0, 0, 5]]),
    ("none_tensor_none_step", lambda T: (None, T([1, 2]), None, slice(None, None, 2)),
     lambda a: a[None, [1, 2], None, ::2]),
    ("zero_d_tensor", lambda T: T(2), lambda a: a[2]),
    ("zero_d_tensor_with_tensor", lambda T: (T(1), slice(None), T([0, 5])), lambda a: a[1][:, [0, 5]]),
    ("true", lambda T: True, lambda a: a[None]),
    ("slice_tensor_bounds", lambda T: slice(T(1), T(3)), lambda a: a[1:3]),
    ("negative_ints_slices", lambda T: (-1, slice(-3, None), -2), lambda a: a[-1, -3:, -2]),
    ("repeated", lambda T: (T([1, 1, 1]), T([2, 2, 2])), lambda a: a[[1, 1, 1], [2, 2, 2]]),
]
IDS = [c[0] for c in CASES]
UNIQUE = [c for c in CASES if c[0] not in ("list", "repeated", "ellipsis_tensor")]


def _positions(ref):
    """The flat input positions a case reads, in the result's shape."""
    return ref(np.arange(int(np.prod(SHAPE))).reshape(SHAPE))


def _data(seed=0):
    return np.random.default_rng(seed).standard_normal(SHAPE)


@pytest.mark.parametrize("name,build,ref", CASES, ids=IDS)
def test_getitem_values_and_gradient(name, build, ref):
    a = _data()
    x = cpu(a, requires_grad=True)
    y = x[build(_ours("cpu"))]
    want = ref(a)
    assert y.shape == want.shape
    np.testing.assert_array_equal(y.detach().numpy(), want)
    w = np.random.default_rng(1).standard_normal(want.shape)
    (y * cpu(w)).sum().backward()
    grad = np.zeros(a.size)
    np.add.at(grad, _positions(ref).ravel(), w.ravel())
    np.testing.assert_allclose(x.grad.numpy(), grad.reshape(SHAPE), rtol=1e-12)


def test_an_ellipsis_of_no_dimension_keeps_index_tensors_adjacent():
    """PyTorch's rule: index tensors separated only by a '...' that covers no dimension are adjacent, so their
    result dimension stays in place (NumPy would move it to the front), in getitem and setitem."""
    a = np.arange(8.0).reshape(2, 2, 2)
    x = mf.tensor(a)
    got = x[:, [0, 1], ..., [1, 0]]
    np.testing.assert_array_equal(got.numpy(), a[:, [0, 1], [1, 0]])
    assert tuple(mf.zeros(2, 3, 4, 2)[:, :, [0, 1], ..., [0, 1]].shape) == (2, 3, 2)
    y = mf.zeros(2, 2, 2)
    y[:, [0, 1], ..., [1, 0]] = mf.tensor([[1.0, 2.0], [3.0, 4.0]])
    want = np.zeros((2, 2, 2))
    want[:, [0, 1], [1, 0]] = [[1.0, 2.0], [3.0, 4.0]]
    np.testing.assert_array_equal(y.numpy(), want)


def test_getitem_numpy_index_arrays_and_views():
    a = _data()
    x = cpu(a)
    np.testing.assert_array_equal(x[MASK2].numpy(), a[MASK2])
    np.testing.assert_array_equal(x[np.array([2, 0])].numpy(), a[[2, 0]])
    np.testing.assert_array_equal(x[np.int64(1), 2].numpy(), a[1, 2])
    v = x[1, 2, 3]  # a basic index is a view, also when it picks one element
    assert v.shape == () and v._data.base is not None
    x0 = cpu(np.float64(3.5))
    assert x0[()].shape == () and x0[None].shape == (1,) and x0[...].shape == () and x0[None, None].shape == (1, 1)
    assert x0[True].shape == (1,) and x0[False].shape == (0,)
    assert x[False].shape == (0, *SHAPE)


@pytest.mark.parametrize("index,exc,match", [
    (5, IndexError, r"getitem: index 5 is out of bounds for dimension 0 with size 4"),
    ((0, -6), IndexError, r"index -6 is out of bounds for dimension 1 with size 5"),
    ((slice(None), [0, 9]), IndexError, r"index 9 is out of bounds for dimension 1 with size 5"),
    (mf.tensor([1, -7], device="cpu"), IndexError, r"index -7 is out of bounds for dimension 0 with size 4"),
    (1.0, IndexError, "only integers, slices"),
    (mf.tensor([0.0], device="cpu"), IndexError, "must be integer or bool, got float32"),
    ([0.5, 1.0], IndexError, "must be integer or bool, got float64"),
    (mf.tensor([True, False], device="cpu"), IndexError,
     r"the shape of the mask \(2,\) does not match the shape \(4,\)"),
    ((0, 0, 0, 0), IndexError, "too many indices for a tensor of dimension 3"),
    ((Ellipsis, 0, Ellipsis, 0), IndexError, "with a second ellipsis"),
    ((Ellipsis, Ellipsis, None), IndexError, "with a second ellipsis"),
    ((mf.tensor([0, 1], device="cpu"), mf.tensor([0, 1, 2], device="cpu")), IndexError,
     r"shape mismatch: .* \(2,\), \(3,\)"),
    (slice(None, None, -1), ValueError, "step must be greater than zero"),
    ("a", TypeError, "only integers"),  # PyTorch 2.13: TypeError (it reads text as data)
])
def test_getitem_errors(index, exc, match):
    with pytest.raises(exc, match=match):
        cpu(_data())[index]


def test_several_ellipses_as_pytorch():
    """PyTorch takes several '...': the first stands for the unindexed dimensions, the later ones for none where
    nothing after them indexes one (its shapes and values here); x[..., 0, ...] = v writes as x[..., 0] = v."""
    a = np.arange(24).reshape(2, 3, 4)
    x = cpu(a)
    np.testing.assert_array_equal(x[..., ...].numpy(), a)
    np.testing.assert_array_equal(x[..., 0, ...].numpy(), a[..., 0])
    np.testing.assert_array_equal(x[0, ..., 1, ...].numpy(), a[0, ..., 1])
    np.testing.assert_array_equal(x[..., None, ...].numpy(), a[..., None])
    np.testing.assert_array_equal(x[0, 1, ..., None, ..., 2].numpy(), a[0, 1, None, 2])
    np.testing.assert_array_equal(x[..., [0, 1], ..., :].numpy(), a[:, [0, 1]])  # (the ":" counts as indexing)
    y = cpu(a.copy())
    y[..., 0, ...] = -1
    b = a.copy()
    b[..., 0] = -1
    np.testing.assert_array_equal(y.numpy(), b)


def test_zero_d_errors():
    with pytest.raises(IndexError, match="invalid index of a 0-dim tensor"):
        cpu(np.float64(1.0))[0]


# ---------------------------------------------------------------- setitem
@pytest.mark.parametrize("name,build,ref", UNIQUE, ids=[c[0] for c in UNIQUE])
def test_setitem_values_version_and_gradients(name, build, ref):
    """x[index] = w (w requires grad) on a non-leaf: the values are NumPy's; the leaf's gradient is the
    upstream one with the written positions zeroed, w's the upstream one at those positions."""
    a = _data()
    pos = _positions(ref)
    w_np = np.random.default_rng(2).standard_normal(pos.shape)
    leaf = cpu(a, requires_grad=True)
    h = leaf * 1.0
    w = cpu(w_np, requires_grad=True)
    v = h._version
    h[build(_ours("cpu"))] = w
    assert h._version == v + 1 and h.grad_fn is not None
    want = a.copy().ravel()
    want[pos.ravel()] = w_np.ravel()
    np.testing.assert_array_equal(h.detach().numpy(), want.reshape(SHAPE))
    c = np.random.default_rng(3).standard_normal(SHAPE)
    (h * cpu(c)).sum().backward()
    g_leaf = c.copy().ravel()
    g_leaf[pos.ravel()] = 0
    np.testing.assert_array_equal(leaf.grad.numpy(), g_leaf.reshape(SHAPE))
    np.testing.assert_array_equal(w.grad.numpy(), c.ravel()[pos.ravel()].reshape(pos.shape))


def test_setitem_broadcast_value_gradient_sums():
    a = _data()
    leaf = cpu(a, requires_grad=True)
    w = cpu(np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), requires_grad=True)
    h = leaf * 1.0
    h[cpu(MASK2)] = w  # each masked row of 6 takes w
    want = a.copy()
    want[MASK2] = w.detach().numpy()
    np.testing.assert_array_equal(h.detach().numpy(), want)
    c = np.random.default_rng(4).standard_normal(SHAPE)
    (h * cpu(c)).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), c[MASK2].sum(0), rtol=1e-12)
    np.testing.assert_array_equal(leaf.grad.numpy(), np.where(MASK2[..., None], 0.0, c))
    # a value with extra leading 1s (NumPy and PyTorch drop them)
    w2 = cpu(np.ones((1, 1, 6)), requires_grad=True)
    h2 = cpu(a, requires_grad=True) * 1.0
    h2[0, 0] = w2
    h2.sum().backward()
    np.testing.assert_array_equal(w2.grad.numpy(), np.ones((1, 1, 6)))


def test_setitem_gradcheck():
    def f(x, w):
        h = x * 1.0
        h[1:3, [0, 4]] = w * w
        h[cpu(MASK3)] = 0.5
        return h * x

    x = cpu(_data(5), requires_grad=True)
    w = cpu(np.random.default_rng(6).standard_normal((2, 2, 6)), requires_grad=True)
    assert gradcheck(f, [x, w])


def test_setitem_into_a_tensor_without_grad_records_the_value():
    x = cpu(np.zeros((3, 4)))
    w = cpu(np.array([1.0, 2.0, 3.0, 4.0]), requires_grad=True)
    x[1] = w
    assert x.requires_grad and not x.is_leaf
    (x * 3.0).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0] * 4)


def test_setitem_on_a_leaf_that_requires_grad():
    x = cpu(np.zeros(3), requires_grad=True)
    with pytest.raises(RuntimeError, match="setitem: a leaf Variable that requires grad is being used in an "
                                           "in-place operation"):
        x[0] = 1.0
    assert x._version == 0
    with mf.no_grad():
        x[cpu(np.array([True, False, True]))] = 2.0
    assert x._version == 1 and x.tolist() == [2.0, 0.0, 2.0] and x.is_leaf


def test_setitem_through_a_view_of_a_leaf_is_refused():
    w = cpu(np.zeros((2, 3)), requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        w[0][1] = 1.0
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        w.reshape(6)[1:3][0] = 1.0
    with mf.no_grad():
        w[0][1] = 1.0
    assert w.tolist() == [[0, 1, 0], [0, 0, 0]]
    h = w * 1.0
    h[1][2] = 4.0  # a view of a non-leaf: allowed, and written back into h's history (PyTorch's)
    assert h.tolist() == [[0, 1, 0], [0, 0, 4]]
    (h * 3.0).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [[3, 3, 3], [3, 3, 0]])


def test_setitem_after_a_save_raises_in_backward():
    leaf = cpu(_data(), requires_grad=True)
    h = leaf * 1.0
    out = (h * h).sum()  # Mul saved h
    h[0, 0, 0] = 5.0
    with pytest.raises(RuntimeError, match=r"last by setitem\): Mul saved"):
        out.backward()


def test_setitem_plain_forms():
    x = mf.arange(12, device="cpu").reshape(3, 4)
    ref = np.arange(12).reshape(3, 4)
    for index, value in [((slice(None), [0, 2]), 7), ((range(2),), np.array([9, 8, 7, 6])),
                         ((mf.tensor([2, 0]), mf.tensor([3, 1])), mf.tensor([-1, -2])),
                         ((Ellipsis, -1), 2.9), ((1, slice(None), None), mf.tensor([[5], [4], [3], [2]]))]:
        x[index] = value
        np_index = tuple(i.numpy() if isinstance(i, mf.Tensor) else i for i in index)
        ref[np_index] = value.numpy() if isinstance(value, mf.Tensor) else value
        np.testing.assert_array_equal(x.numpy(), ref)
    x[x > 5] = 0  # the mask read before the write
    ref[ref > 5] = 0
    np.testing.assert_array_equal(x.numpy(), ref)
    y = mf.arange(6.0, device="cpu")
    y[1:] = y[:-1]  # overlapping source and target
    np.testing.assert_array_equal(y.numpy(), [0, 0, 1, 2, 3, 4])
    z = cpu(np.zeros(3))
    z[mf.tensor(1)] = mf.tensor(4.0)  # 0-d index and value
    assert z.tolist() == [0, 4, 0]


def test_setitem_errors():
    x = cpu(np.zeros((3, 4)))
    with pytest.raises(RuntimeError, match=r"setitem: shape mismatch: value of shape \(3,\) cannot be broadcast "
                                           r"to the indexed shape \(4,\)"):
        x[0] = mf.tensor([1.0, 2.0, 3.0])
    with pytest.raises(IndexError, match="setitem: index 3 is out of bounds for dimension 0 with size 3"):
        x[3] = 1.0
    with pytest.raises(IndexError, match="setitem: index 4 is out of bounds for dimension 1 with size 4"):
        x[:, [4]] = 1.0
    assert x._version == 0 and not x.numpy().any()


# ---------------------------------------------------------------- sort, topk, kthvalue
def test_sort_returns_values_and_indices():
    x = mf.tensor([[3.0, 1.0, 2.0, 1.0], [0.0, 5.0, float("nan"), -1.0]])
    out = mf.sort(x)
    assert type(out).__name__ == "sort" and out.values is out[0] and out.indices is out[1]
    assert out.indices.dtype == mf.int64
    assert out.indices.tolist() == [[1, 3, 2, 0], [3, 0, 1, 2]]  # stable; NaN counts as the largest
    desc = x.sort(descending=True)
    assert desc.indices.tolist() == [[0, 2, 1, 3], [2, 1, 0, 3]]  # ties keep their order when descending too
    assert mf.argsort(x, dim=0).tolist() == [[1, 0, 0, 1], [0, 1, 1, 0]]
    top = x.topk(2, largest=False)
    assert type(top).__name__ == "topk" and top.indices.tolist() == [[1, 3], [3, 0]]
    kth = mf.kthvalue(x[:1], 4, keepdim=True)
    assert kth.values.tolist() == [[3.0]] and kth.indices.tolist() == [[0]]
    assert mf.sort(mf.tensor([2, 0, 1])).values.tolist() == [0, 1, 2]  # integers too


def test_topk_and_sort_gradients_reach_the_selected_positions():
    a = np.array([[0.3, -1.0, 2.0, 0.7], [1.5, 0.2, -0.4, 0.9]])
    x = cpu(a, requires_grad=True)
    x.topk(2).values.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 0, 1, 1], [1, 0, 0, 1]])
    x.grad = None
    values, indices = x.sort(dim=0, descending=True)
    (values * cpu(np.array([[1.0], [10.0]]))).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[10, 10, 1, 10], [1, 1, 10, 1]])


# ---------------------------------------------------------------- GPU against PyTorch
@pytest.mark.gpu
@pytest.mark.parametrize("name,build,ref", CASES, ids=IDS)
def test_gpu_getitem_matches_pytorch(torch, name, build, ref):
    a = _data().astype(np.float32)
    x = mf.tensor(a, device="cuda", requires_grad=True)
    tx = torch.tensor(a, device="cuda", requires_grad=True)
    y = x[build(_ours("cuda"))]
    ty = tx[build(lambda d, dtype=np.int64: torch.tensor(np.asarray(d, dtype), device="cuda"))]
    assert tuple(y.shape) == tuple(ty.shape)
    np.testing.assert_array_equal(y.detach().cpu().numpy(), ty.detach().cpu().numpy())
    w = np.random.default_rng(1).standard_normal(tuple(y.shape)).astype(np.float32)
    (y * mf.tensor(w, device="cuda")).sum().backward()
    (ty * torch.tensor(w, device="cuda")).sum().backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), tx.grad.cpu().numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("name,build,ref", UNIQUE, ids=[c[0] for c in UNIQUE])
def test_gpu_setitem_matches_pytorch(torch, name, build, ref):
    a = _data().astype(np.float32)
    w_np = np.random.default_rng(2).standard_normal(_positions(ref).shape).astype(np.float32)
    results = []
    for lib, make in ((mf, _ours("cuda")),
                      (torch, lambda d, dtype=np.int64: torch.tensor(np.asarray(d, dtype), device="cuda"))):
        leaf = lib.tensor(a, device="cuda", requires_grad=True)
        w = lib.tensor(w_np, device="cuda", requires_grad=True)
        h = leaf * 1.0
        h[build(make)] = w
        (h * h).sum().backward()
        results.append([np.asarray(t.detach().cpu().numpy()) for t in (h, leaf.grad, w.grad)])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
def test_gpu_index_ops_match_pytorch(torch):
    a = np.random.default_rng(3).permutation(60).reshape(4, 15).astype(np.float32)
    x, tx = mf.tensor(a, device="cuda"), torch.tensor(a, device="cuda")
    for ours, theirs in ((x.sort(1, descending=True), tx.sort(1, descending=True)), (x.topk(3, 0), tx.topk(3, 0)),
                         (x.kthvalue(3, 1), tx.kthvalue(3, 1))):
        np.testing.assert_array_equal(ours.values.cpu().numpy(), theirs.values.cpu().numpy())
        np.testing.assert_array_equal(ours.indices.cpu().numpy(), theirs.indices.cpu().numpy())
    np.testing.assert_array_equal(x.argsort(0).cpu().numpy(), tx.argsort(0).cpu().numpy())


@pytest.mark.gpu
def test_gpu_gather_range_error_is_deferred():
    x = mf.tensor(np.zeros((2, 3), np.float32), device="cuda")
    y = mf.gather(x, 1, mf.tensor([[0, 7]], device="cuda"))  # no sync here
    with pytest.raises(RuntimeError, match="gather: index 7 is out of bounds for dimension 1 with size 3"):
        y.sum().item()
    assert not backend._deferred


# ---------------------------------------------------------------- gather / scatter / fill odds and ends
def test_gather_and_scatters_take_int32_indices():
    """PyTorch's gather / scatter family take int32 indices as int64 ones (values and gradient)."""
    a = np.arange(6.0).reshape(2, 3)
    x = mf.tensor(a, requires_grad=True)
    for dtype in (mf.int32, mf.int64):
        i = mf.tensor([[1], [2]], dtype=dtype)
        x.grad = None
        got = x.gather(1, i)
        got.sum().backward()
        assert got.tolist() == [[1.0], [5.0]] and x.grad.tolist() == [[0, 1, 0], [0, 0, 1]]
        ones = mf.ones(2, 1, dtype=mf.float64)
        assert mf.zeros(2, 3, dtype=mf.float64).scatter_add(1, i, ones).tolist() == [[0, 1, 0], [0, 0, 1]]
        assert mf.zeros(2, 3, dtype=mf.float64).scatter_reduce(1, i, ones * 3, "amax").tolist() == [[0, 3, 0],
                                                                                                 [0, 0, 3]]


def test_gather_by_a_transposed_index_is_contiguous():
    x = mf.arange(12.0).reshape(3, 4)
    i = mf.tensor([[0, 1, 3], [2, 0, 1]]).t()
    want = np.take_along_axis(x.numpy(), i.numpy(), 1)
    for got in (x.gather(1, i), mf.take_along_dim(x, i, 1)):
        assert got.is_contiguous()
        np.testing.assert_array_equal(got.view(-1).numpy(), want.reshape(-1))


def test_scatter_reduce_multiply_and_fill_value_gradient():
    x = cpu(np.ones((2, 3)))
    out = x.scatter(1, mf.tensor([[0, 0], [2, 1]]), 3.0, reduce="multiply")
    np.testing.assert_array_equal(out.numpy(), [[9, 1, 1], [1, 3, 3]])  # repeated targets multiply twice
    with pytest.raises(RuntimeError, match="scatter: the gradient of reduce='multiply' is not implemented"):
        cpu(np.ones(3), requires_grad=True).scatter(0, mf.tensor([0]), 2.0, reduce="multiply")
    v = mf.tensor(2.0, dtype=mf.float32, requires_grad=True)  # a float32 value into a float64 tensor
    a = cpu(np.arange(6.0).reshape(2, 3), requires_grad=True)
    y = a.masked_fill(a > 2.5, v)
    assert y.dtype == mf.float64
    (y * cpu(np.arange(1.0, 7.0).reshape(2, 3))).sum().backward()
    assert v.grad.dtype == mf.float32 and v.grad.item() == 4 + 5 + 6
    np.testing.assert_array_equal(a.grad.numpy(), [[1, 2, 3], [0, 0, 0]])


def test_in_place_forms_take_a_0d_input_and_chain():
    y = mf.tensor(1.0)
    assert y.scatter_(0, mf.tensor(0), 2.0) is y and y.item() == 2.0  # as PyTorch's (ops/index.py's _into_0d)
    x = cpu(np.zeros(4))
    v = x._version
    x.index_fill_(0, mf.tensor([1, 3]), 5.0).masked_fill_(x > 4, 2.0).index_add_(0, mf.tensor([0]), mf.ones(1,
                                                                                                       dtype=mf.float64))
    assert x.tolist() == [1, 2, 0, 2] and x._version == v + 3 and x._vc.last_op == "index_add_"


def test_setitem_leaves_earlier_consumers_alone():
    """The tape routes each consumer's gradient to the node its input had when it was recorded."""
    leaf = cpu(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    h = leaf * 1.0
    before = h.sum()  # reads h before the write
    h[0] = 5.0
    (before + h.sum()).backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), [1.0, 2.0, 2.0])  # PyTorch's


@pytest.mark.gpu
def test_deferred_bound_checks_raise_the_first_failure_at_the_next_sync():
    """Index reads on the GPU check their bounds without a sync: clipped entries are read, and the first call whose
    index was out of range raises at the next sync point, naming its first bad entry; the checks are then gone."""
    from minifused.kernels import gather as K

    try:  # (an earlier test's checks out of the way)
        K.check_pending()
    except (IndexError, RuntimeError):
        pass
    x = mf.arange(12.0, device="cuda").reshape(3, 4)
    fine = mf.index_select(x, 0, mf.tensor([2, 0], device="cuda"))
    bad = mf.index_select(x, 1, mf.tensor([1, 9, 4, -1], device="cuda"))
    worse = x.gather(0, mf.tensor([[5, 0, 0, 0]], device="cuda"))
    assert len(K._pending) == 3
    # a device's checks fill its slots: one past them reads the first ones (a sync) and raises there
    for _ in range(K.SLOTS - len(K._pending)):
        mf.index_select(x, 0, mf.tensor([0], device="cuda"))
    with pytest.raises(IndexError, match="index_select: index 9"):
        mf.index_select(x, 0, mf.tensor([0], device="cuda"))
    assert not K._pending
    bad = mf.index_select(x, 1, mf.tensor([1, 9, 4, -1], device="cuda"))
    with pytest.raises(IndexError, match="index_select: index 9 is out of bounds for dimension 1 with size 4"):
        bad.sum().item()
    assert not K._pending
    np.testing.assert_array_equal(fine.cpu().numpy(), [[8, 9, 10, 11], [0, 1, 2, 3]])
    assert worse.shape == (1, 4)
    with pytest.raises(IndexError, match=r"getitem: index -5 is out of bounds for dimension 0 with size 3 "
                                         r"\(out of range \[-3, 3\)\)"):
        x[mf.tensor([[0, 2], [1, -5]], device="cuda")].sum().item()
    np.testing.assert_array_equal(x[mf.tensor([-1, 1], device="cuda", dtype=mf.int32)].cpu().numpy(),
                                  [[8, 9, 10, 11], [4, 5, 6, 7]])
    with pytest.raises(IndexError, match=r"embedding: index 7 at position 2 is out of range \[0, 3\)"):
        mf.nn.functional.embedding(mf.tensor([[0, 1], [7, -2]], device="cuda"), x[:, :2]).sum().item()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", (np.int64, np.int32, np.int16, np.uint8, np.uint64))
def test_gpu_checked_index_fixes_and_flags_entries(dtype, poisoned_pool):
    """kernels.gather.checked_index against NumPy: negatives wrapped, everything clipped into [0, n), the first
    entry outside the range found, for each integer width."""
    import cupy

    from minifused.kernels import gather as K

    rng = np.random.default_rng(0)
    lo = 0 if np.dtype(dtype).kind == "u" else -9
    host = rng.integers(lo, 9, 1000).astype(dtype)
    for negative, n in ((True, 7), (False, 7), (True, 0)):
        errors = []
        fixed = K.checked_index(cupy.asarray(host)[::2], n, negative, lambda v, i: errors.append((v, i)))
        got = cupy.asnumpy(fixed)
        raw = host[::2].astype(np.int64)
        want = np.clip(np.where(raw < 0, raw + n, raw), 0, max(n - 1, 0))
        np.testing.assert_array_equal(got, want)
        assert got.dtype == np.int64
        bad = np.flatnonzero((raw < (-n if negative else 0)) | (raw >= n))
        K._pending[-1] = K._pending[-1][:2] + (lambda v, i: IndexError(f"{v} {i}"),)  # (raise, not append)
        if bad.size:
            with pytest.raises(IndexError, match=f"^{raw[bad[0]]} {bad[0]}$"):
                K.check_pending()
        else:
            K.check_pending()


def test_scatter_reduce_prod_and_integer_mean_as_pytorch():
    """'prod' (no gradient: a clear error asks for one), and integer 'mean' rounding down, as PyTorch's."""
    x = mf.tensor([[1.0, 2.0, 3.0]])
    out = x.scatter_reduce(1, mf.tensor([[0, 0, 2, 2]]), mf.tensor([[2.0, 3.0, 4.0, 0.5]]), "prod")
    np.testing.assert_allclose(out.numpy(), [[6.0, 2.0, 6.0]])
    out = x.scatter_reduce(1, mf.tensor([[0, 0]]), mf.tensor([[2.0, 3.0]]), "prod", include_self=False)
    np.testing.assert_allclose(out.numpy(), [[6.0, 2.0, 3.0]])
    counts = mf.zeros(2, 3, dtype=mf.int64).scatter_reduce(
        0, mf.tensor([[0, 1, 0], [1, 1, 0], [0, 0, 1]]), mf.arange(9).reshape(3, 3), "mean")
    # each position's sum over its count (its own 0 included), rounded down: (0 + 0 + 6) // 3, (0 + 7) // 2, ...
    assert counts.tolist() == [[2, 3, 2], [1, 1, 4]] and counts.dtype == mf.int64
    # bool: amax / amin without the input's own value start from False / True
    falses, trues = mf.zeros(2, dtype=mf.bool), mf.ones(2, dtype=mf.bool)
    assert mf.zeros(3, dtype=mf.bool).scatter_reduce(0, mf.tensor([0, 0]), falses, "amax",
                                                     include_self=False).tolist() == [False, False, False]
    assert mf.ones(3, dtype=mf.bool).scatter_reduce(0, mf.tensor([0, 0]), trues, "amin",
                                                    include_self=False).tolist() == [True, True, True]


def test_index_add_casts_alpha_to_the_input_dtype_and_wants_its_dtype():
    """PyTorch casts alpha to self's dtype before scaling: an integer input truncates a float alpha toward zero,
    an unsigned one wraps a negative alpha (-1 as 255: 10 * 255 = 246 mod 256); source must be self's dtype."""
    x = cpu(np.zeros(3, np.int64))
    for alpha, want in ((0.5, 0), (2.7, 20), (-1.5, -10)):
        assert x.index_add(0, mf.tensor([1]), mf.tensor([10]), alpha=alpha).tolist() == [0, want, 0]
        assert x.clone().index_add_(0, mf.tensor([1]), mf.tensor([10]), alpha=alpha).tolist() == [0, want, 0]
    u8 = cpu(np.zeros(3, np.uint8)).index_add_(0, mf.tensor([1]), cpu(np.array([10], np.uint8)), alpha=-1)
    assert u8.tolist() == [0, (10 * 255) % 256, 0]
    f = cpu(np.zeros(3, np.float32)).index_add(0, mf.tensor([1]), cpu(np.array([3.0], np.float32)), alpha=0.5)
    assert f.tolist() == [0.0, 1.5, 0.0]
    with pytest.raises(RuntimeError, match=r"index_add_: self \(float32\) and source \(float64\) must have the same"):
        cpu(np.zeros(3, np.float32)).index_add_(0, mf.tensor([1]), cpu(np.ones(1)))
    with pytest.raises(RuntimeError, match=r"index_add: self \(int64\) and source \(float32\)"):
        x.index_add(0, mf.tensor([1]), cpu(np.ones(1, np.float32)))


def test_index_select_of_a_0d_input_is_0d_and_takes_one_index():
    x = mf.tensor(5.0)
    for index in (mf.tensor(0), mf.tensor([0])):
        y = mf.index_select(x, 0, index)
        assert y.shape == () and y.item() == 5.0
    for index in (mf.tensor([], dtype=mf.int64), mf.tensor([0, 0])):
        with pytest.raises(RuntimeError, match="index_select: a 0-d input takes exactly 1 index"):
            x.index_select(0, index)
