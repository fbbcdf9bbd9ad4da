"""gather_rows (the DataLoader's batches): src[idx] for every row size, dtype and alignment."""
import numpy as np
import pytest

import minifused as mf
from minifused.kernels.gather import gather_rows


def test_cpu_is_take():
    src = np.arange(60, dtype=np.float32).reshape(10, 2, 3)
    idx = np.array([3, 0, 9, 3])
    np.testing.assert_array_equal(gather_rows(src, idx), src[idx])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,row", [(np.uint8, (784,)), (np.float32, (1, 28, 28)), (np.int64, ()),
                                       (mf.bfloat16, (5,)), (np.float16, (3, 3)), (np.uint8, (7,))],
                         ids=str)
@pytest.mark.parametrize("offset", [0, 1])  # 1: a source view that starts one row in (any alignment)
def test_gpu_gather_rows_matches_take(dtype, row, offset, poisoned_pool):
    import cupy

    rng = np.random.default_rng(0)
    host = rng.integers(0, 255, (101, *row)).astype(dtype)
    src = cupy.asarray(host)[offset:]
    for idx in (rng.permutation(101 - offset)[:64], np.array([0, 0, 99 - offset]), np.zeros(0, np.int64)):
        for dev_idx in (cupy.asarray(idx), cupy.asarray(idx.astype(np.int32)), cupy.asarray(np.repeat(idx, 2))[::2]):
            got = gather_rows(src, dev_idx)
            assert got.dtype == src.dtype and got.shape == (len(idx), *row)
            np.testing.assert_array_equal(cupy.asnumpy(got).view(np.uint8), host[offset:][idx].view(np.uint8))
