"""More indexing parity with PyTorch: which index dtypes are taken, uint8 masks in index_put_, and the other
corners found by differential runs (the expected values are NumPy's or PyTorch's documented rule)."""
import numpy as np
import pytest

import minifused as mf


@pytest.mark.parametrize("dtype", (mf.int8, mf.int16))
def test_getitem_and_setitem_refuse_index_tensors_pytorch_refuses(dtype):
    # PyTorch takes long, int, byte (a mask) and bool index tensors only
    x = mf.arange(6.0)
    with pytest.raises(IndexError, match="getitem: tensors used as indices must be long, int, byte or bool.*int"):
        x[mf.tensor([1, 0], dtype=dtype)]
    with pytest.raises(IndexError, match="setitem: tensors used as indices"):
        x[mf.tensor([1, 0], dtype=dtype)] = 1.0
    np.testing.assert_array_equal(x.numpy(), np.arange(6.0))


def test_getitem_takes_int32_tensors_and_any_integer_numpy_array():
    x = mf.arange(6.0)
    np.testing.assert_array_equal(x[mf.tensor([5, 0], dtype=mf.int32)].numpy(), [5.0, 0.0])
    # a NumPy array is converted as a sequence by PyTorch, whatever its integer width
    np.testing.assert_array_equal(x[np.array([5, 0], np.int16)].numpy(), [5.0, 0.0])


def test_index_put_accumulate_reads_a_uint8_index_as_a_mask():
    # PyTorch (deprecated, warned): a byte index tensor is a mask, rows 0 and 2 here, not positions 1, 0, 1
    x = mf.zeros(3, 2)
    with pytest.warns(UserWarning, match="uint8"):
        x.index_put_((mf.tensor([1, 0, 1], dtype=mf.uint8),), mf.tensor(1.0), accumulate=True)
    np.testing.assert_array_equal(x.numpy(), [[1, 1], [0, 0], [1, 1]])


@pytest.mark.parametrize("accumulate", (False, True))
def test_index_put_refuses_int16_indices_and_a_mask_of_the_wrong_shape(accumulate):
    x = mf.zeros(2, 3)
    with pytest.raises(IndexError, match="index_put_: tensors used as indices must be long, int, byte or bool"):
        x.index_put_((mf.tensor([0], dtype=mf.int16),), mf.tensor(1.0), accumulate=accumulate)
    # a mask longer than its dimension: an IndexError naming the op, not NumPy's from inside the add
    with pytest.raises(IndexError, match=r"index_put_: the shape of the mask \(3,\) does not match.*\(2,\)"):
        x.index_put_((mf.tensor([True, False, True]),), mf.tensor(1.0), accumulate=accumulate)
    np.testing.assert_array_equal(x.numpy(), np.zeros((2, 3)))


def test_where_takes_a_uint8_condition_with_a_warning():
    # PyTorch: nonzero bytes select input (deprecated, warned); other integer conditions stay refused
    cond = mf.tensor([1, 0, 2], dtype=mf.uint8)
    with pytest.warns(UserWarning, match="uint8 condition"):
        out = mf.where(cond, mf.tensor([1.0, 2.0, 3.0]), 0.0)
    np.testing.assert_array_equal(out.numpy(), [1.0, 0.0, 3.0])
    with pytest.raises(TypeError, match="where: expected condition to be a bool tensor, got dtype int64"):
        mf.where(mf.tensor([1, 0]), mf.tensor([1.0, 2.0]), 0.0)


def _zero_d_cases():
    # (name, in-place call on a 0-d 3.0 given s = tensor(2.), expected value): a 0-d tensor acts as 1-d of size 1
    two = lambda s: mf.stack([s, s * 2])  # noqa: E731 - [2, 4] keeping the graph to s
    return [("scatter_value", lambda y, s: y.scatter_(0, mf.tensor([0, 0]), 5.0), 5.0),
            ("scatter_src", lambda y, s: y.scatter_(0, mf.tensor(0), s), 2.0),
            ("scatter_add", lambda y, s: y.scatter_add_(0, mf.tensor([0, 0]), two(s)), 9.0),
            ("scatter_reduce_prod", lambda y, s: y.scatter_reduce_(0, mf.tensor([0, 0]), two(s), "prod"), 24.0),
            ("scatter_reduce_mean", lambda y, s: y.scatter_reduce_(0, mf.tensor([0, 0]), two(s), "mean",
                                                                   include_self=False), 3.0),
            ("index_add", lambda y, s: y.index_add_(0, mf.tensor([0]), s, alpha=2), 7.0),
            ("index_copy", lambda y, s: y.index_copy_(0, mf.tensor([0]), s), 2.0)]


@pytest.mark.parametrize("name,op,want", _zero_d_cases(), ids=[c[0] for c in _zero_d_cases()])
def test_in_place_scatter_family_on_a_0d_input(name, op, want):
    # PyTorch runs these in place on a 0-d tensor (minifused refused them all)
    y, s = mf.tensor(3.0), mf.tensor(2.0)
    v = y._version
    assert op(y, s) is y and y.item() == want and y._version > v
    # gradients through y = 1 * a of the written value (by hand: 9 = 3 + s + 2s, 24 = 3 * s * 2s, ...)
    a, s = mf.tensor(3.0, requires_grad=True), mf.tensor(2.0, requires_grad=True)
    op(a * 1, s).backward()
    expect = {"scatter_value": (0, 0), "scatter_src": (0, 1), "scatter_add": (1, 3), "scatter_reduce_prod": (8, 24),
              "scatter_reduce_mean": (0, 1.5), "index_add": (1, 2), "index_copy": (0, 1)}[name]
    assert tuple(0 if t.grad is None else t.grad.item() for t in (a, s)) == expect
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        op(mf.tensor(3.0, requires_grad=True), mf.tensor(2.0))


@pytest.mark.parametrize("reduce,want", [("sum", 9.0), ("prod", 24.0), ("mean", 3.0), ("amax", 4.0), ("amin", 2.0)])
def test_scatter_reduce_of_a_0d_input_with_several_indices(reduce, want):
    # out-of-place: was a reshape error; 0-d index with a longer src reads src's first entry (PyTorch's rule)
    out = mf.scatter_reduce(mf.tensor(3.0), 0, mf.tensor([0, 0]), mf.tensor([2.0, 4.0]), reduce)
    assert out.shape == () and out.item() == want
    assert mf.scatter_add(mf.tensor(3.0), 0, mf.tensor(0), mf.tensor([2.0, 5.0])).item() == 5.0
    assert mf.scatter_add(mf.tensor(3.0), 0, mf.tensor([], dtype=mf.int64), mf.tensor(2.0)).item() == 3.0
    assert mf.scatter(mf.tensor(3.0), 0, mf.tensor([0, 0]), 4.0).item() == 4.0


def test_a_python_bool_index_is_an_index_tensor_on_a_new_axis():
    # PyTorch: True / False insert an axis of size 1 indexed by [0] / [], joining the other index tensors
    a = np.arange(24.0).reshape(2, 3, 4)
    x = mf.tensor(a)
    np.testing.assert_array_equal(x[True, [0, 1]].numpy(), a[[0, 1]])  # (2, 3, 4), was (1, 2, 3, 4)
    np.testing.assert_array_equal(x[:, True, [0, 1]].numpy(), a[:, [0, 1]])  # (2, 2, 4)
    np.testing.assert_array_equal(x[[0, 1], True, [0, 1]].numpy(), a[[0, 1], [0, 1]])  # (2, 4)
    assert x[0, True].shape == (1, 3, 4) and x[True, ..., False].shape == (0, 2, 3, 4)
    with pytest.raises(IndexError, match="shape mismatch"):  # [] and [0, 1] do not broadcast
        x[False, [0, 1]]
    # and advanced indexing copies: writing into x[True] leaves x alone
    y = x[True]
    y += 100
    np.testing.assert_array_equal(x.numpy(), a)
    g = mf.tensor(a, requires_grad=True)
    g[True, [1, 1]].sum().backward()  # the repeated row gets both gradients
    np.testing.assert_array_equal(g.grad.numpy(), np.stack([np.zeros((3, 4)), np.full((3, 4), 2.0)]))


def test_take_along_dim_names_itself_in_range_errors():
    # (PyTorch's CPU take_along_dim reads out of bounds here without an error; the check is ours, named so)
    x = mf.arange(12.0).reshape(3, 4)
    with pytest.raises(RuntimeError, match="take_along_dim: index 4 is out of bounds for dimension 1 with size 4"):
        mf.take_along_dim(x, mf.tensor([[4]]), 1)
    with pytest.raises(RuntimeError, match="take_along_dim: index -1 is out of bounds"):
        mf.take_along_dim(x, mf.tensor([-1]))
    np.testing.assert_array_equal(mf.take_along_dim(x, mf.tensor([[3], [0], [1]]), 1).numpy(), [[3], [4], [9]])


_WRITES = [lambda x, v: x.__setitem__(0, v), lambda x, v: x.masked_fill_(x > 0, v),
           lambda x, v: x.index_fill_(0, mf.tensor([0]), v), lambda x, v: x.scatter_(0, mf.tensor([0]), v)]


@pytest.mark.parametrize("write", _WRITES, ids=["setitem", "masked_fill_", "index_fill_", "scatter_"])
def test_written_numbers_that_do_not_fit_are_refused_and_negatives_wrap(write):
    # PyTorch refuses a finite float beyond the dtype's range (NumPy wrote inf) and a complex number (a raw
    # TypeError before); infinity still fits a float dtype, and -1 wraps into uint8 (scatter_ raised NumPy's error)
    for dtype, v in ((mf.float32, 1e40), (mf.float16, 70000.0), (mf.bfloat16, 1e39), (mf.float32, 1j)):
        x = mf.ones(2, dtype=dtype)
        if write is _WRITES[0] and dtype in (mf.float16, mf.bfloat16):  # PyTorch 2.13's setitem writes inf there
            write(x, v)
            assert x.float().tolist() == [float("inf"), 1.0]
            continue
        with pytest.raises(RuntimeError, match="value cannot be converted to type .* without overflow"):
            write(x, v)
        assert x.float().tolist() == [1.0, 1.0]
    x = mf.ones(2)
    write(x, float("inf"))
    assert x.tolist()[0] == float("inf")
    x = mf.ones(2, dtype=mf.uint8)
    write(x, -1)
    assert x.tolist()[0] == 255


def test_scatter_add_of_a_wrapped_value():
    # uint8: 1 + (-1 as 255) wraps to 0, as PyTorch's
    assert mf.ones(2, dtype=mf.uint8).scatter_(0, mf.tensor([0]), -1, reduce="add").tolist() == [0, 1]


def test_masked_fill_and_index_fill_write_through_an_expanded_view():
    # PyTorch allows these two (deprecated) on an expanded tensor: each write lands in the shared base element
    b = mf.arange(4.0)
    mask = mf.tensor([[True, False, False, False], [False] * 4, [False, False, False, True]])
    b.expand(3, 4).masked_fill_(mask, -1.0)
    assert b.tolist() == [-1.0, 1.0, 2.0, -1.0]
    b = mf.arange(4.0)
    b.expand(3, 4).index_fill_(0, mf.tensor([1]), -1.0)
    assert b.tolist() == [-1.0] * 4


def test_index_copy_and_index_fill_take_int64_indices_only():
    # PyTorch: index_select and index_add take int32 too, index_copy and index_fill refuse it
    x = mf.zeros(3)
    i32 = mf.tensor([1], dtype=mf.int32)
    with pytest.raises(RuntimeError, match="index_copy_: expected dtype int64 for index, got int32"):
        x.index_copy_(0, i32, mf.ones(1))
    with pytest.raises(IndexError, match="index_fill_: expected dtype int64 for index, got int32"):
        x.index_fill_(0, i32, 1.0)
    assert x.tolist() == [0.0, 0.0, 0.0]
    assert x.index_add(0, i32, mf.ones(1)).tolist() == [0.0, 1.0, 0.0]
    assert x.index_select(0, i32).tolist() == [0.0]


def _one_by_one(base, index, values):
    # PyTorch's CPU loop: each value added onto the running entry, rounded to the dtype at every step
    out = base.copy()
    for i, v in zip(index, values):
        out[i] = out[i] + v
    return out


@pytest.mark.parametrize("dtype", (np.float32, np.float16))
def test_index_add_and_index_put_accumulate_add_one_value_at_a_time(dtype):
    # adding the repeated entries' sum once rounded differently (float32: -4103.5376 for PyTorch's -4103.5371)
    rng = np.random.default_rng(3)
    values = (rng.standard_normal(64) * 1e3).astype(dtype)
    index = rng.integers(0, 4, 64)
    base = (rng.standard_normal(4) * 1e-3).astype(dtype)
    want = _one_by_one(base, index, values)
    i, v = mf.tensor(index), mf.tensor(values)
    np.testing.assert_array_equal(mf.tensor(base).index_add_(0, i, v).numpy(), want)
    np.testing.assert_array_equal(mf.tensor(base).index_put_((i,), v, accumulate=True).numpy(), want)
    if dtype == np.float32:  # (16-bit scatter_add_ adds a float32 sum once, as PyTorch's)
        np.testing.assert_array_equal(mf.tensor(base).scatter_add_(0, i, v).numpy(), want)
    # the gradient of a read with repeated indices: index_put_'s loop onto zeros
    x = mf.zeros(4, dtype=mf.tensor(base).dtype, requires_grad=True)
    x[i].backward(v)
    np.testing.assert_array_equal(x.grad.numpy(), _one_by_one(np.zeros(4, dtype), index, values))


@pytest.mark.parametrize("value", (None, "a", object(), [1.0, "a"]))
def test_setitem_refuses_a_value_that_is_no_number_and_writes_nothing(value):
    # PyTorch 2.13: TypeError "can't assign a NoneType to a torch.FloatTensor" (NumPy would write NaN for None)
    x = mf.arange(6.0).reshape(2, 3)
    with pytest.raises(TypeError, match=f"setitem: can't assign a {type(value).__name__} to a float32 tensor"):
        x[0] = value
    np.testing.assert_array_equal(x.numpy(), np.arange(6.0).reshape(2, 3))


def test_getitem_with_a_string_is_a_type_error():
    # PyTorch 2.13: TypeError (new(): invalid data type 'str'); other objects an IndexError
    with pytest.raises(TypeError, match="getitem: only integers, slices"):
        mf.arange(3.0)["a"]
    with pytest.raises(IndexError, match=r"getitem: only integers, slices .*\(got dict\)"):
        mf.arange(3.0)[{}]


def test_index_op_count_and_shape_errors_have_pytorchs_classes():
    x = mf.zeros(3, 2)
    # PyTorch 2.13: IndexError "index_copy_(): Number of indices (2) should be equal to source.size(dim) (3)"
    with pytest.raises(IndexError, match=r"index_copy_: source must have shape \(2, 2\).*got \(3, 2\)"):
        x.index_copy_(0, mf.tensor([0, 2]), mf.ones(3, 2))
    # other dims differing: RuntimeError there
    with pytest.raises(RuntimeError, match=r"index_copy_: source must have shape \(2, 2\).*got \(2, 3\)"):
        x.index_copy_(0, mf.tensor([0, 2]), mf.ones(2, 3))
    # PyTorch 2.13: IndexError "put_(): Expected source and index to have the same number of elements ..."
    with pytest.raises(IndexError, match=r"put_\(\): Expected source and index to have the same number"):
        x.put_(mf.tensor([0, 1]), mf.tensor([1.0]))
    # PyTorch 2.13: index_fill_ with a 2-d index is a RuntimeError ("Index has to be a vector/scalar"),
    # index_select's an IndexError
    with pytest.raises(RuntimeError, match=r"index_fill_: index must be a vector .*\(1, 1\)"):
        x.index_fill_(0, mf.tensor([[0]]), 1.0)
    with pytest.raises(IndexError, match=r"index_select: index must be a vector"):
        x.index_select(0, mf.tensor([[0]]))
    np.testing.assert_array_equal(x.numpy(), np.zeros((3, 2)))


def test_setitem_at_an_advanced_index_wants_the_tensors_dtype_as_pytorchs_index_put():
    # PyTorch 2.13: "Index put requires the source and destination dtypes match" (a RuntimeError) at an advanced
    # index; a basic index casts (copy_), and so does one bool mask with a one-element value (masked_fill)
    x = mf.arange(6.0).reshape(3, 2)
    for index, value in (([0, 1], mf.ones(2, 2, dtype=mf.float64)), ((0, [1]), mf.tensor([7])),
                         ((True, [0]), mf.ones(1, dtype=mf.float64)), (mf.tensor(True), mf.ones(1, dtype=mf.float64)),
                         (x > 3, mf.ones(2, dtype=mf.float64))):
        with pytest.raises(RuntimeError, match="setitem: an advanced index writes a value of the tensor's dtype "
                                               "float32, got (float64|int64)"):
            x[index] = value
    np.testing.assert_array_equal(x.numpy(), np.arange(6.0).reshape(3, 2))
    x[x > 3] = mf.tensor([2.5], dtype=mf.float64)
    x[:, mf.tensor([True, False])] = mf.tensor(-1)
    x[0:1] = mf.tensor([[7, 8]])  # basic: cast
    assert x.tolist() == [[7.0, 8.0], [-1.0, 3.0], [-1.0, 2.5]]  # PyTorch 2.13's
    x[True] = mf.ones(1, dtype=mf.float64) * 9  # a lone bool: a copy
    assert x.tolist() == [[9.0, 9.0]] * 3


def test_setitem_writes_infinity_for_a_number_beyond_a_16_bit_floats_range():
    # PyTorch 2.13: x[0] = 70000.0 in float16 (and x[mask] = ..., x[[1]] = -1e39 in bfloat16) writes +-inf;
    # float32 still refuses 1e40 (masked_fill_, index_fill_, scatter_ refuse all three)
    x = mf.ones(3, dtype=mf.float16)
    x[0] = 70000.0
    x[x < 2] = -1e6
    assert x.float().tolist() == [float("inf"), float("-inf"), float("-inf")]
    y = mf.ones(2, dtype=mf.bfloat16)
    y[[1]] = -1e39
    assert y.float().tolist() == [1.0, float("-inf")]
