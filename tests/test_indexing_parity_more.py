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
