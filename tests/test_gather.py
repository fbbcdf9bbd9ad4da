"""gather_rows (the DataLoader's batches): src[idx] for every row size, dtype and alignment."""
import numpy as np
import pytest

import minifused as mf
from minifused.kernels.gather import gather_rows, rows_gatherer


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


def test_cpu_rows_gatherer_is_take():
    a, b = np.arange(30, dtype=np.uint8).reshape(10, 3), np.arange(10, dtype=np.int64)
    idx = np.array([9, 2, 2])
    got = rows_gatherer([a, b])(idx)
    np.testing.assert_array_equal(got[0], a[idx])
    np.testing.assert_array_equal(got[1], b[idx])


@pytest.mark.gpu
@pytest.mark.parametrize("count", [1, 2, 3])
def test_gpu_rows_gatherer_pairs_sources_per_launch(count, poisoned_pool):
    """Sources of different row sizes, dtypes and alignments gathered by one index, two per launch (the last
    alone when odd), a non-contiguous one by the reference, each equal to take."""
    import cupy

    rng = np.random.default_rng(count)
    hosts = [rng.integers(0, 255, (57, 28, 28)).astype(np.float32), rng.integers(0, 10, 57).astype(np.int64),
             rng.integers(0, 255, (58, 5)).astype(np.uint8)][:count]
    srcs = [cupy.asarray(h) for h in hosts]
    if count == 3:  # one row in: a source that starts off 16 bytes, and a transposed (non-contiguous) one
        srcs[2], hosts[2] = srcs[2][1:], hosts[2][1:]
        srcs.append(cupy.asarray(hosts[0][:, :, 0]).T.T)
        srcs[3] = cupy.asfortranarray(srcs[3])
        hosts.append(hosts[0][:, :, 0])
    gather = rows_gatherer(srcs)
    for idx in (rng.permutation(57)[:40], np.array([56, 0, 0]), np.zeros(0, np.int64)):
        got = gather(cupy.asarray(idx))
        assert len(got) == len(srcs)
        for g, h in zip(got, hosts):
            assert g.dtype == h.dtype and g.shape == (len(idx), *h.shape[1:])
            np.testing.assert_array_equal(cupy.asnumpy(g), h[idx])


@pytest.mark.gpu
@pytest.mark.parametrize("sizes", [(784 * 64, 64), (3, 5), (4096 * 4, 17), (1, 1)])
@pytest.mark.parametrize("offsets", [(0, 0), (1, 3), (4, 8)])  # bytes into their buffers: every piece width
def test_gpu_copy_pair_copies_both_arrays(sizes, offsets, poisoned_pool):
    """copy_pair: two byte arrays of any size and alignment copied in one launch, every byte (poisoned memory)."""
    import cupy

    from minifused.kernels.gather import copy_pair

    rng = np.random.default_rng(0)
    srcs = [cupy.asarray(rng.integers(0, 256, size + off, dtype=np.uint8))[off:] for size, off in zip(sizes, offsets)]
    dsts = [cupy.empty(size + off, np.uint8)[off:] for size, off in zip(sizes, offsets[::-1])]
    copy_pair(dsts[0], srcs[0], dsts[1], srcs[1])
    for d, s in zip(dsts, srcs):
        assert np.array_equal(d.get(), s.get())
