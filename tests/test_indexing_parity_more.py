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
