"""The Tensor methods and top-level functions of minifused/ops/views_inplace.py, minifused/ops/tensor_extras.py,
minifused/toplevel/windows.py and minifused/toplevel/extras.py: values against float64 NumPy, in-place identity
and version counters, gradients by finite differences, errors; the gpu tests compare CUDA with PyTorch's."""
import numpy as np
import pytest

import minifused as mf
from minifused.testing import gradcheck


def f64(*shape, seed=0, grad=True):
    a = np.random.default_rng(seed).standard_normal(shape)
    return mf.tensor(a, dtype=mf.float64, device="cpu", requires_grad=grad)


# ---------------------------------------------------------------- in-place view ops
@pytest.mark.parametrize("op,args,before,want", [
    ("unsqueeze_", (0,), (2, 3), lambda a: a[None]), ("unsqueeze_", (-1,), (2, 3), lambda a: a[..., None]),
    ("squeeze_", (), (1, 2, 1, 3), lambda a: a.reshape(2, 3)), ("squeeze_", (0,), (1, 2, 1, 3), lambda a: a[0]),
    ("squeeze_", ((0, 1, 2),), (1, 2, 1, 3), lambda a: a[0, :, 0]), ("t_", (), (2, 3), lambda a: a.T),
    ("t_", (), (3,), lambda a: a), ("transpose_", (0, 2), (2, 1, 3), lambda a: a.transpose(2, 1, 0)),
    ("swapaxes_", (1, 0), (2, 3), lambda a: a.T), ("swapdims_", (0, -1), (2, 3), lambda a: a.T),
    ("as_strided_", ((2, 2), (1, 3), 1), (2, 3), lambda a: a.reshape(-1)[[[1, 4], [2, 5]]])])
def test_inplace_views_are_the_tensor_reshaped(op, args, before, want):
    base = np.arange(float(np.prod(before))).reshape(before)
    x = mf.tensor(base, device="cpu")
    other = x.view(*x.shape)
    v = x._version
    assert getattr(x, op)(*args) is x
    assert x._version == v + 1 and other._version == v + 1  # views share the counter, as in PyTorch
    np.testing.assert_array_equal(x.numpy(), want(base))
    assert x.shape == want(base).shape and np.shares_memory(x.numpy(), other.numpy())


def test_inplace_view_refused_on_a_leaf_that_requires_grad_allowed_under_no_grad():
    w = f64(2, 3)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        w.unsqueeze_(0)
    with mf.no_grad():
        assert w.t_() is w
    assert w.shape == (3, 2) and w.is_leaf and w.requires_grad


@pytest.mark.parametrize("op,args", [("t_", ()), ("unsqueeze_", (1,)), ("transpose_", (0, 1)), ("squeeze_", ()),
                                     ("as_strided_", ((3, 2), (1, 3)))])
def test_inplace_views_carry_the_gradient(op, args):
    weight = mf.tensor(np.random.default_rng(3).standard_normal(6), dtype=mf.float64)

    def fn(w):
        y = w * 2
        out = getattr(y, op)(*args)
        assert out is y
        return y.reshape(-1) * weight

    assert gradcheck(fn, [f64(2, 3)])
    # the values the gradient is taken of: the out-of-place view's
    w = f64(2, 3, grad=False)
    want = {"t_": w.t(), "unsqueeze_": w.unsqueeze(1), "transpose_": w.t(), "squeeze_": w,
            "as_strided_": w.as_strided((3, 2), (1, 3))}[op]
    np.testing.assert_array_equal((w * 2).__getattribute__(op)(*args).numpy(), want.numpy() * 2)


def test_inplace_view_keeps_the_hooks_on_the_old_value():
    w = f64(2, 3)
    y = w * 1
    seen = []
    y.register_hook(lambda g: seen.append(g.shape))
    y.t_()
    (y * mf.arange(6.0, dtype=mf.float64).reshape(3, 2)).sum().backward()
    assert seen == [(2, 3)]
    np.testing.assert_array_equal(w.grad.numpy(), np.arange(6.0).reshape(3, 2).T)


def test_inplace_view_errors():
    with pytest.raises(RuntimeError, match="t_\\(\\) expects a tensor with <= 2 dimensions"):
        mf.zeros(2, 2, 2).t_()
    with pytest.raises(IndexError, match="transpose_"):
        mf.zeros(2, 2).transpose_(0, 2)


# ---------------------------------------------------------------- storage: as_strided, resize_
def test_storage_offset_and_as_strided_read_the_storage():
    a = np.arange(24.0).reshape(4, 6)
    x = mf.tensor(a, device="cpu")
    assert x.storage_offset() == 0 and x[1].storage_offset() == 6 and x[1:, 2:].storage_offset() == 8
    flat = a.reshape(-1)
    np.testing.assert_array_equal(x.t().as_strided((2, 3), (1, 4), 5).numpy(), flat[5 + np.arange(2)[:, None]
                                                                                   + 4 * np.arange(3)])
    view = x[1].as_strided((3,), (2,))  # the offset defaults to the tensor's own
    np.testing.assert_array_equal(view.numpy(), flat[[6, 8, 10]])
    view[0] = -1.0
    assert a[1, 0] != -1 and x[1, 0].item() == -1.0  # a view of x's memory (mf.tensor copied a)
    copied = mf.as_strided_copy(x, (2, 2), (6, 1))
    np.testing.assert_array_equal(copied.numpy(), x.numpy()[:2, :2])
    assert not np.shares_memory(copied.numpy(), x.numpy())
    with pytest.raises(RuntimeError, match="out of bounds for storage of size 192"):
        x.as_strided((25,), (1,))
    with pytest.raises(RuntimeError, match="Negative strides"):
        x.as_strided((2,), (-1,))
    with pytest.raises(RuntimeError, match="mismatch in length"):
        x.as_strided((2, 2), (1,))


def test_as_strided_gradient_sums_overlaps():
    weight = mf.tensor(np.random.default_rng(4).standard_normal((3, 3)))
    assert gradcheck(lambda w: w.t().as_strided((3, 3), (2, 1), 1) * weight, [f64(3, 4)])
    # x's own elements overlap (expanded): the gradient is shared among them, as PyTorch's
    e = f64(3, 1)
    (e.expand(3, 4).as_strided((2, 2), (1, 0)) * mf.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=mf.float64)).sum().backward()
    np.testing.assert_allclose(e.grad.numpy().ravel(), [3.0, 7.0, 0.0])


def test_as_strided_gradient_reads_no_values_to_find_overlaps(monkeypatch):
    """Whether x's elements overlap comes from its sizes and strides: np.unique / cupy.unique on the positions
    would make the GPU backward wait for the device (and fail inside a CUDA-graph capture)."""
    def no_unique(*args, **kwargs):
        raise AssertionError("as_strided's backward read the positions' values on the host")

    monkeypatch.setattr(np, "unique", no_unique)
    w = mf.tensor(np.arange(1.0, 7.0).reshape(2, 3), dtype=mf.float64)
    x = f64(3, 4)
    (x.t().as_strided((2, 3), (1, 2), 1) * w).sum().backward()  # x.t(): strides (1, 4), no overlap
    want = np.zeros(12)
    np.add.at(want, (1 + np.arange(2)[:, None] + 2 * np.arange(3)).ravel(), np.arange(1.0, 7.0))
    np.testing.assert_allclose(x.grad.numpy(), want.reshape(3, 4))  # x.t()'s storage: x's, in x's order
    e = f64(3, 1)
    e.expand(3, 4).as_strided((2, 2), (1, 0)).sum().backward()  # stride 0: 2 per storage element, shared by 4
    np.testing.assert_allclose(e.grad.numpy().ravel(), [2.0, 2.0, 0.0])  # (PyTorch's, summed back over the 4)


def test_as_strided_scatter_values_and_gradient():
    a = np.arange(6.0).reshape(2, 3)
    out = mf.as_strided_scatter(mf.tensor(a).t(), mf.tensor([10.0, 20.0], dtype=mf.float64), (2,), (1,), 1)
    np.testing.assert_array_equal(out.numpy(), [[0, 3], [10, 4], [20, 5]])  # x's layout kept, as PyTorch's clone
    assert gradcheck(lambda x, s: mf.as_strided_scatter(x, s, (2, 2), (3, 1), 1), [f64(3, 3), f64(2, 2, seed=1)])
    with pytest.raises(RuntimeError, match="src size = \\[3\\]"):
        mf.as_strided_scatter(mf.zeros(3, 3), mf.zeros(3), (2,), (1,))


def test_resize_keeps_the_storage_prefix():
    x = mf.arange(6.0)
    v = x._version
    assert x.resize_(2, 2) is x and x._version == v + 1
    np.testing.assert_array_equal(x.numpy(), [[0, 1], [2, 3]])
    np.testing.assert_array_equal(mf.arange(6.0).reshape(2, 3).t().resize_(5).numpy(), np.arange(5.0))  # storage order
    y = mf.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(y.resize_(3, 3).numpy(), [[0, 1, 2], [3, 4, 5], [0, 0, 0]])
    z = mf.zeros(2, 3, 4, 5)
    assert z.resize_as_(mf.zeros(5, 4, 3, 2), memory_format=mf.channels_last).stride() == (24, 1, 8, 4)
    with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
        f64(3).resize_(2)
    with pytest.raises(RuntimeError, match="cannot resize variables that require grad"), mf.no_grad():
        f64(3).resize_(2)


def test_new_empty_strided_and_empty_permuted():
    x = mf.zeros(2, dtype=mf.float64)
    y = x.new_empty_strided((2, 3), (1, 2))
    assert y.stride() == (1, 2) and y.dtype == mf.float64 and y.shape == (2, 3)
    p = mf.empty_permuted((2, 3, 4), (0, 2, 1))
    assert p.shape == (2, 3, 4) and p.stride() == (12, 1, 3)
    with pytest.raises(RuntimeError, match="not a permutation"):
        mf.empty_permuted((2, 3), (0, 0))


# ---------------------------------------------------------------- new, split_with_sizes, unique_consecutive
def test_legacy_new():
    t = mf.tensor([1.0, 2.0], dtype=mf.float64)
    assert t.new().shape == (0,) and t.new(2, 3).shape == (2, 3) and t.new(t.shape).shape == (2,)
    assert t.new(2, 3).dtype == mf.float64
    np.testing.assert_array_equal(t.new([1, 2]).numpy(), [1.0, 2.0])
    assert t.new([1, 2]).dtype == mf.float64 and np.shares_memory(t.new(t).numpy(), t.numpy())
    with pytest.raises(TypeError, match="new\\(\\): expected a tensor of dtype float64"):
        t.new(mf.tensor([1, 2]))


def test_split_with_sizes():
    x = f64(5, 2)
    parts = mf.split_with_sizes(x, [2, 0, 3])
    assert [p.shape for p in parts] == [(2, 2), (0, 2), (3, 2)] and x.split_with_sizes([1, 4], 0)[1].shape == (4, 2)
    np.testing.assert_array_equal(parts[2].detach().numpy(), x.detach().numpy()[2:])
    with pytest.raises(RuntimeError, match="split_with_sizes expects split_sizes to sum exactly to 5"):
        x.split_with_sizes([1, 1])


def test_unique_consecutive():
    x = mf.tensor([1, 1, 2, 2, 3, 1, 1, 2])
    values, inverse, counts = mf.unique_consecutive(x, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(values.numpy(), [1, 2, 3, 1, 2])
    np.testing.assert_array_equal(inverse.numpy(), [0, 0, 1, 1, 2, 3, 3, 4])
    np.testing.assert_array_equal(counts.numpy(), [2, 2, 1, 2, 1])
    rows, counts = mf.tensor([[1, 1], [1, 1], [2, 3]]).unique_consecutive(dim=0, return_counts=True)
    np.testing.assert_array_equal(rows.numpy(), [[1, 1], [2, 3]])
    np.testing.assert_array_equal(counts.numpy(), [2, 1])
    assert mf.unique_consecutive(mf.tensor([[2.0, 2.0], [1.0, 1.0]])).tolist() == [2.0, 1.0]
    assert mf.unique_consecutive(mf.zeros(0)).shape == (0,)


def test_unique_consecutive_dim_refuses_a_zero_dimension_it_does_not_select():
    """As unique(dim=) and PyTorch's: with dim, only the selected dimension of an empty tensor may be 0."""
    values, counts = mf.zeros(0, 3).unique_consecutive(dim=0, return_counts=True)
    assert values.shape == (0, 3) and counts.shape == (0,) and counts.dtype == mf.int64
    assert mf.unique_consecutive(mf.zeros(2, 0, 3), dim=1).shape == (2, 0, 3)
    for shape, dim in (((0, 3), 1), ((3, 0), 0), ((2, 0, 3), 2)):
        with pytest.raises(RuntimeError, match="unique_consecutive: there are 0 sized dimensions, and they aren't "
                                               "selected"):
            mf.unique_consecutive(mf.zeros(*shape), dim=dim)
    with pytest.raises(RuntimeError, match="unique_consecutive: number of zero sized dimensions is more than one"):
        mf.zeros(0, 0).unique_consecutive(dim=0)


# ---------------------------------------------------------------- put, index_reduce, diagonal_scatter
def test_put_and_put_():
    a = np.arange(6.0).reshape(2, 3)
    out = mf.tensor(a).put(mf.tensor([0, 5, 0]), mf.tensor([10.0, 20, 30], dtype=mf.float64), accumulate=True)
    np.testing.assert_array_equal(out.numpy(), [[40, 1, 2], [3, 4, 25]])
    x = mf.tensor(a)
    assert x.put_(mf.tensor([-1]), mf.tensor([9.0], dtype=mf.float64)) is x and x.numpy()[1, 2] == 9.0
    assert x._version == 1
    assert gradcheck(lambda x, s: mf.put(x, mf.tensor([[4], [1]]), s), [f64(2, 3), f64(2, 1, seed=1)])
    with pytest.raises(IndexError, match="out of bounds"):
        mf.put(mf.zeros(2), mf.tensor([2]), mf.ones(1))
    with pytest.raises(RuntimeError, match="same number of elements"):
        mf.put(mf.zeros(2), mf.tensor([0, 1]), mf.ones(1))


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce_values(reduce, include_self):
    rng = np.random.default_rng(5)
    a, src = rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
    idx = np.array([0, 2, 0, 3, 0])
    want = a.copy()
    fn = {"prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}[reduce]
    for row in set(idx.tolist()):
        values = list(src[idx == row]) + ([a[row]] if include_self else [])
        want[row] = fn(np.stack(values), axis=0)
    got = mf.tensor(a).index_reduce(0, mf.tensor(idx), mf.tensor(src), reduce, include_self=include_self)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    x = mf.tensor(a.T.copy())
    assert x.index_reduce_(1, mf.tensor(idx), mf.tensor(src.T.copy()), reduce, include_self=include_self) is x
    np.testing.assert_allclose(x.numpy(), want.T, rtol=1e-12)


@pytest.mark.parametrize("reduce", ["mean", "amax", "amin"])
def test_index_reduce_gradient(reduce):
    idx = mf.tensor([0, 2, 0])
    assert gradcheck(lambda x, s: mf.index_reduce(x, 1, idx, s, reduce, include_self=False),
                     [f64(2, 3), f64(2, 3, seed=1)])
    assert gradcheck(lambda x, s: x.index_reduce(0, idx, s, reduce), [f64(3, 2), f64(3, 2, seed=2)])


def test_index_reduce_errors():
    with pytest.raises(RuntimeError, match="Expected reduce to be one of prod, mean, amax or amin but got sum"):
        mf.zeros(2).index_reduce(0, mf.tensor([0]), mf.ones(1), "sum")
    with pytest.raises(RuntimeError, match="source must have shape"):
        mf.zeros(2, 2).index_reduce(0, mf.tensor([0]), mf.ones(2), "amax")


def test_diagonal_scatter():
    out = mf.diagonal_scatter(mf.zeros(3, 3), mf.ones(2), 1)
    np.testing.assert_array_equal(out.numpy(), np.eye(3, k=1))
    np.testing.assert_array_equal(mf.zeros(2, 3).diagonal_scatter(mf.ones(2), -1, 1, 0).numpy(), np.eye(2, 3, k=1))
    assert gradcheck(lambda x, s: mf.diagonal_scatter(x, s, -1), [f64(3, 4), f64(2, seed=1)])
    assert gradcheck(lambda x, s: mf.diagonal_scatter(x, s, 0, 0, 2), [f64(2, 3, 2), f64(3, 2, seed=1)])
    with pytest.raises(RuntimeError, match="src size = \\[3\\], slice size = \\[2\\]"):
        mf.diagonal_scatter(mf.zeros(3, 3), mf.ones(3), 1)


# ---------------------------------------------------------------- real tensors' complex spellings, queries
def test_complex_spellings_on_real_tensors():
    x = f64(2, 3)
    assert x.real is x and x.conj() is x and mf.conj(x) is x and mf.real(x) is x and x.conj_physical() is x
    assert mf.conj_physical(x) is x and x.conj_physical_() is x and not x.is_conj() and not x.is_neg()
    with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex dtypes."):
        x.imag
    with pytest.raises(RuntimeError, match="imag is not implemented"):
        mf.imag(x)
    np.testing.assert_array_equal(x.adjoint().detach().numpy(), x.detach().numpy().T)
    assert mf.adjoint(f64(4, 2, 3)).shape == (4, 3, 2)
    with pytest.raises(RuntimeError, match="Got 1-D tensor"):
        mf.adjoint(f64(3))
    a = mf.tensor([-1.0, 0.0, 2.0, float("nan")], dtype=mf.float64, requires_grad=True)
    got = a.angle()
    np.testing.assert_array_equal(got.detach().numpy(), [np.pi, 0, 0, np.nan])
    got.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [0, 0, 0, 0])
    assert mf.angle(mf.tensor([-3, 2])).dtype == mf.float32


def test_queries():
    x = mf.zeros(2, 3)
    assert x.layout is mf.strided and repr(mf.strided) == "minifused.strided" and isinstance(mf.strided, mf.layout)
    assert not any(getattr(x, q) for q in ("is_meta", "is_sparse", "is_sparse_csr", "is_quantized", "is_mkldnn",
                                           "is_nested", "is_xpu", "is_mps"))
    assert x.dim_order() == (0, 1) and x.t().dim_order() == (1, 0)
    assert mf.zeros(2, 3, 4, 5).to(memory_format=mf.channels_last).dim_order() == (0, 2, 3, 1)
    assert x.output_nr == 0 and (f64(3) * 2).output_nr == 0
    y = mf.tensor([-1.6, 1.6], dtype=mf.float64)
    np.testing.assert_array_equal(y.fix().numpy(), [-1, 1])
    assert y.fix_() is y and y.tolist() == [-1.0, 1.0]
    np.testing.assert_array_equal(mf.tensor([-1.0, 0.3, 2.0]).hardshrink(0.5).numpy(), [-1.0, 0.0, 2.0])
    np.testing.assert_allclose(mf.tensor([-1.0, 2.0]).prelu(mf.tensor([0.25])).numpy(), [-0.25, 2.0])



def test_to_dense_of_a_dense_tensor():
    # PyTorch: a strided tensor's to_dense() is the tensor itself; with a dtype, a cast the gradient flows back through
    x = mf.tensor([1.0, -2.0, 3.0], requires_grad=True)
    assert x.to_dense() is x and x.to_dense(mf.float32, masked_grad=False) is x
    y = x.to_dense(mf.float64)
    assert y.dtype == mf.float64 and y.tolist() == [1.0, -2.0, 3.0]
    (y * y).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, -4.0, 6.0])
    emb = mf.nn.Embedding(4, 2, sparse=True)  # its "sparse" gradient is dense already
    emb(mf.tensor([1, 1, 3])).sum().backward()
    np.testing.assert_array_equal(emb.weight.grad.to_dense().numpy(), [[0, 0], [2, 2], [0, 0], [1, 1]])
    with pytest.raises(TypeError, match=r"to_dense\(\): argument 'dtype' .* must be minifused.dtype, not str"):
        x.to_dense("float64")

def test_element_callbacks():
    x = mf.tensor([1.0, 2.0, 3.0])
    assert x.apply_(lambda v: v * 2) is x and x.tolist() == [2.0, 4.0, 6.0] and x._version == 1
    assert x.map_(mf.tensor([1.0]), lambda a, b: a + b).tolist() == [3.0, 5.0, 7.0]
    assert x.map2_(mf.tensor([1.0, 2.0, 3.0]), mf.tensor(2.0), lambda a, b, c: a - b * c).tolist() == [1, 1, 1]
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        f64(2).apply_(abs)


def test_element_callbacks_refuse_cuda_operands():
    """A cuda operand of the cpu callbacks: the op's own TypeError (PyTorch's), not one from inside NumPy. A tensor
    that calls itself cuda stands in for one here (this machine may have no GPU)."""
    class OnCuda(mf.Tensor):
        __slots__ = ()
        is_cuda = True

    x, other = mf.tensor([1.0, 2.0]), OnCuda._from_array(np.ones(2, np.float32))
    with pytest.raises(TypeError, match="map_: expected a cpu tensor for 'other'"):
        x.map_(other, lambda a, b: a + b)
    with pytest.raises(TypeError, match="map2_: expected a cpu tensor for 'y'"):
        x.map2_(mf.tensor([1.0]), other, lambda a, b, c: a)
    assert x.tolist() == [1.0, 2.0] and x._version == 0


def test_multinomial_method_with_a_generator():
    w = mf.tensor([0.0, 1.0, 3.0])
    draws = [w.multinomial(2, generator=mf.Generator().manual_seed(7)).tolist() for _ in range(2)]
    assert draws[0] == draws[1] and 0 not in draws[0] and sorted(draws[0]) == [1, 2]
    assert w.multinomial(50, True).shape == (50,)


# ---------------------------------------------------------------- top level
def test_inplace_top_level_forms():
    x = mf.tensor([0.2, 0.5], dtype=mf.float64)
    for name, fn in (("acosh_", lambda a: np.arccosh(a + 1)), ("asinh_", np.arcsinh), ("atanh_", np.arctanh),
                     ("arccos_", np.arccos), ("arcsin_", np.arcsin), ("arctan_", np.arctan),
                     ("arccosh_", lambda a: np.arccosh(a + 1)), ("arcsinh_", np.arcsinh),
                     ("arctanh_", np.arctanh), ("i0_", np.i0)):
        y = x + 1 if name in ("acosh_", "arccosh_") else x.clone()
        assert getattr(mf, name)(y) is y
        np.testing.assert_allclose(y.numpy(), fn(x.numpy()), rtol=1e-12, err_msg=name)
    a = mf.tensor([4, 6, 9])
    assert mf.gcd_(a, mf.tensor([6, 4, 3])) is a and a.tolist() == [2, 2, 3]
    assert mf.lcm_(a, mf.tensor([3, 3, 2])).tolist() == [6, 6, 6]
    v = mf.ones(2, dtype=mf.float64)
    m = mf.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=mf.float64)
    assert mf.addmv_(v, m, mf.tensor([1.0, 1.0], dtype=mf.float64), beta=2) is v and v.tolist() == [5.0, 9.0]


def _symmetric(name, n):
    k = np.arange(n)
    c = np.cos(2 * np.pi * k / (n - 1))
    return {"hann_window": 0.5 - 0.5 * c, "hamming_window": 0.54 - 0.46 * c,
            "blackman_window": 0.42 - 0.5 * c + 0.08 * np.cos(4 * np.pi * k / (n - 1)),
            "bartlett_window": 1 - np.abs(2 * k / (n - 1) - 1), "kaiser_window": np.kaiser(n, 12.0)}[name]


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
                                  "kaiser_window"])
def test_windows(name):
    fn = getattr(mf, name)
    np.testing.assert_allclose(fn(7, periodic=False, dtype=mf.float64).numpy(), _symmetric(name, 7), atol=1e-12)
    np.testing.assert_allclose(fn(6, dtype=mf.float64).numpy(), _symmetric(name, 7)[:6], atol=1e-12)
    assert fn(6).dtype == mf.float32 and fn(0).shape == (0,) and fn(1).tolist() == [1.0]
    assert fn(3, requires_grad=True).requires_grad
    with pytest.raises(RuntimeError, match=f"{name} expects floating point dtypes"):
        fn(3, dtype=mf.int64)
    with pytest.raises(RuntimeError, match="non-negative window_length"):
        fn(-1)


def test_window_arguments():
    np.testing.assert_allclose(mf.hamming_window(5, False, 0.5, 0.5, dtype=mf.float64).numpy(),
                               _symmetric("hann_window", 5), atol=1e-12)
    np.testing.assert_allclose(mf.kaiser_window(5, False, 5.0, dtype=mf.float64).numpy(), np.kaiser(5, 5.0))


def test_vander():
    x = np.array([1.0, 2.0, -3.0, 0.5])
    np.testing.assert_allclose(mf.vander(mf.tensor(x, dtype=mf.float64)).numpy(), np.vander(x))
    np.testing.assert_allclose(mf.vander(mf.tensor(x), N=3, increasing=True).numpy(), np.vander(x, 3, True))
    assert mf.vander(mf.tensor([1, 2])).dtype == mf.int64 and mf.vander(mf.tensor([1.0]), N=0).shape == (1, 0)
    assert gradcheck(lambda a: mf.vander(a, N=4), [f64(3)])


def test_histogram():
    x = mf.tensor([1.0, 2.0, 1.0, 2.9], dtype=mf.float64)
    w = mf.tensor([1.0, 2.0, 4.0, 0.5], dtype=mf.float64)
    hist, edges = mf.histogram(x, bins=4, range=(0.0, 3.0), weight=w)
    want, want_edges = np.histogram(x.numpy(), 4, (0.0, 3.0), weights=w.numpy())
    np.testing.assert_allclose(hist.numpy(), want)
    np.testing.assert_allclose(edges.numpy(), want_edges)
    out = mf.histogram(x, mf.tensor([0.0, 1.0, 2.0, 3.0], dtype=mf.float64), density=True)
    np.testing.assert_allclose(out.hist.numpy(), np.histogram(x.numpy(), [0, 1, 2, 3], density=True)[0])
    np.testing.assert_allclose(mf.histogram(mf.tensor([2.0, 2.0]), bins=2).bin_edges.numpy(), [1.5, 2.0, 2.5])
    with pytest.raises(RuntimeError, match='"histogramdd" not implemented'):
        mf.histogram(mf.tensor([1, 2]), bins=2)


def test_binomial_and_poisson():
    mf.manual_seed(3)
    count = mf.full((20000,), 10.0, dtype=mf.float64)
    draws = mf.binomial(count, mf.full((20000,), 0.3, dtype=mf.float64))
    assert draws.dtype == mf.float64 and abs(draws.mean().item() - 3.0) < 0.1 and draws.max().item() <= 10
    rates = mf.full((20000,), 4.0, requires_grad=True)
    p = mf.poisson(rates)
    assert p.dtype == mf.float32 and abs(p.mean().item() - 4.0) < 0.1 and abs(p.var().item() - 4.0) < 0.3
    p.sum().backward()
    assert not rates.grad.numpy().any()  # PyTorch's derivative: zero
    g = mf.Generator().manual_seed(1)
    first = mf.poisson(mf.ones(5), generator=g).tolist()
    assert first == mf.poisson(mf.ones(5), generator=g.manual_seed(1)).tolist()
    with pytest.raises(RuntimeError, match="invalid Poisson rate"):
        mf.poisson(mf.tensor([-1.0]))
    with pytest.raises(RuntimeError, match="binomial only supports floating-point dtypes"):
        mf.binomial(mf.tensor([5]), mf.tensor([0.5]))
    b = mf.binomial(mf.tensor([5.0]), mf.tensor([0.5], requires_grad=True))
    with pytest.raises(NotImplementedError, match="the derivative for 'binomial' is not implemented"):
        b.sum().backward()


# ---------------------------------------------------------------- GPU: CUDA against PyTorch
@pytest.mark.gpu
def test_gpu_views_and_scatters_match_pytorch(torch):
    a = np.random.default_rng(9).standard_normal((4, 6)).astype(np.float32)
    x, t = mf.tensor(a, device="cuda", requires_grad=True), torch.tensor(a, device="cuda", requires_grad=True)
    w = np.random.default_rng(10).standard_normal(12).astype(np.float32)
    outs = []
    for v, lib, wt in ((x, mf, mf.tensor(w, device="cuda")), (t, torch, torch.tensor(w, device="cuda"))):
        y = v * 2
        y.t_()
        z = y.as_strided((3, 4), (1, 5), 2).reshape(-1)
        d = lib.diagonal_scatter(v, v[:, 1:5].sum(0), 1)
        # (input detached: PyTorch's gradient for it is the one at the scattered positions, not the zeros there)
        s = lib.as_strided_scatter(v.detach(), v[0, :4].reshape(2, 2), (2, 2), (6, 1), 1)
        r = v.index_reduce(0, lib.tensor([0, 2, 0], device="cuda"), v[1:], "amax", include_self=False)
        p = v.put(lib.tensor([3, 7, 3], device="cuda"), v[0, :3], accumulate=True)
        total = (z * wt).sum() + (d * d).sum() + (s * s).sum() + (r * r).sum() + (p * p).sum()
        total.backward()
        outs.append([o.detach().cpu().numpy() for o in (z, d, s, r, p)] + [v.grad.cpu().numpy()])
    for ours, theirs in zip(*outs):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_gpu_creation_matches_pytorch(torch):
    for name in ("hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"):
        np.testing.assert_allclose(getattr(mf, name)(9, device="cuda").cpu().numpy(),
                                   getattr(torch, name)(9, device="cuda").cpu().numpy(), rtol=1e-5, atol=1e-6)
    v = np.array([1.0, 2.0, -1.5], np.float32)
    np.testing.assert_allclose(mf.vander(mf.tensor(v, device="cuda")).cpu().numpy(),
                               torch.vander(torch.tensor(v, device="cuda")).cpu().numpy(), rtol=1e-6)
    h = np.random.default_rng(2).standard_normal(500).astype(np.float32)
    ours = mf.histogram(mf.tensor(h, device="cuda"), bins=7, range=(-2.0, 2.0))
    theirs = torch.histogram(torch.tensor(h), bins=7, range=(-2.0, 2.0))  # (PyTorch's histogram is cpu only)
    np.testing.assert_allclose(ours.hist.cpu().numpy(), theirs.hist.numpy())
    x = mf.tensor([1, 1, 2, 3, 3, 3], device="cuda")
    got = mf.unique_consecutive(x, return_inverse=True, return_counts=True)
    want = torch.unique_consecutive(torch.tensor([1, 1, 2, 3, 3, 3], device="cuda"), return_inverse=True,
                                    return_counts=True)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.cpu().numpy(), w.cpu().numpy())
    rates = mf.full((4000,), 3.0, device="cuda")
    assert abs(mf.poisson(rates).mean().item() - 3.0) < 0.2
    s = mf.zeros(6, device="cuda")
    s.record_stream(mf.cuda.Stream())
    assert s.resize_(2, 2).shape == (2, 2) and s.storage_offset() == 0


def test_nonzero_static_unsafe_splits_and_inplace_top_level_forms():
    """torch.nonzero_static (the first ``size`` index rows, padded with fill_value), the unsafe_chunk /
    unsafe_split / unsafe_split_with_sizes spellings of chunk / split / split_with_sizes, and the top-level
    as_strided_ / resize_as_ / index_put_, as PyTorch's."""
    x = mf.tensor([[0.0, 3.0], [1.0, 0.0], [0.0, 2.0]])
    np.testing.assert_array_equal(mf.nonzero_static(x, size=5).numpy(),
                                  [[0, 1], [1, 0], [2, 1], [-1, -1], [-1, -1]])
    np.testing.assert_array_equal(x.nonzero_static(size=2, fill_value=9).numpy(), [[0, 1], [1, 0]])
    assert mf.nonzero_static(x, size=0).shape == (0, 2) and mf.nonzero_static(x, size=4).dtype == mf.int64
    assert mf.nonzero_static(mf.tensor(3.0), size=2).shape == (2, 0)
    with pytest.raises(RuntimeError, match="nonzero_static: 'size' must be an non-negative integer"):
        mf.nonzero_static(x, size=-1)
    v = mf.arange(10.0)
    for got, want in ((mf.unsafe_chunk(v, 3), v.chunk(3)), (mf.unsafe_split(v, 4), v.split(4)),
                      (v.unsafe_split_with_sizes([3, 7]), v.split_with_sizes([3, 7])),
                      (v.unsafe_chunk(4), mf.chunk(v, 4)), (v.unsafe_split([2, 8]), mf.split(v, [2, 8]))):
        assert [g.tolist() for g in got] == [w.tolist() for w in want]
    y = mf.zeros(2)
    assert mf.resize_as_(y, mf.zeros(3, 2)) is y and y.shape == (3, 2)
    z = mf.zeros(3)
    assert mf.index_put_(z, (mf.tensor([0, 2]),), mf.tensor([1.0, 2.0]), accumulate=True) is z
    assert z.tolist() == [1.0, 0.0, 2.0]
    s = mf.zeros(6)
    assert mf.as_strided_(s, (2, 2), (1, 2)) is s and s.stride() == (1, 2)


def test_uniform_bounds_and_data_of_a_tensor_that_requires_grad_as_pytorch():
    """uniform_'s bounds as PyTorch checks them: each within the dtype's finite range (inf, and 1e5 for float16,
    out of bounds), from <= to, and to - from within it too; nothing written when refused. ``.data =`` an integer
    tensor on a tensor that requires grad is PyTorch's RuntimeError (a plain tensor takes it)."""
    x = mf.zeros(3)
    for bounds, words in (((0, float("inf")), "to is out of bounds for float"),
                          ((float("-inf"), 0), "from is out of bounds for float"),
                          ((-3e38, 3e38), r"to-from <= std::numeric_limits<float>::max\(\)"),
                          ((2, 1), r"\[from, to\) range, but found from=2 > to=1")):
        with pytest.raises(RuntimeError, match=words):
            x.uniform_(*bounds)
    assert x.tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(RuntimeError, match=r"to is out of bounds for c10::Half"):
        mf.zeros(2, dtype=mf.float16).uniform_(0, 1e5)
    y = mf.zeros(4, dtype=mf.bfloat16).uniform_(0, 1e5)  # (bfloat16's range holds it)
    assert float(y.float().min()) >= 0 and float(y.float().max()) <= 1e5
    p = mf.nn.Parameter(mf.ones(2))
    with pytest.raises(RuntimeError, match="data set to a tensor that requires gradients must be floating point"):
        p.data = mf.tensor([1, 2])
    assert p.dtype == mf.float32 and p.tolist() == [1.0, 1.0]
    q = mf.ones(2)
    q.data = mf.tensor([1, 2])
    assert q.dtype == mf.int64
