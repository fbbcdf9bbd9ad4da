"""cat's GPU join and its gradient's split (kernels/join.py): every element against NumPy's concatenate and
split, in each memory order, dtype and alignment the copy kernel picks its pieces by."""
import numpy as np
import pytest

import minifused as mf
from minifused.kernels import is_channels_last, join

DTYPES = (np.float32, np.float16, np.int64, np.bool_, np.uint8)


def _host(rng, shape, dtype):
    return (rng.standard_normal(shape) * 10).astype(dtype)


def test_cpu_join_and_split_are_numpy_s():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 5, 4))
    out = join.concatenate([a, b], 1, np.empty((2, 8, 4)))
    np.testing.assert_array_equal(out, np.concatenate([a, b], 1))
    pieces = join.split(out, (3, 5), 1)
    np.testing.assert_array_equal(pieces[0], a)
    np.testing.assert_array_equal(pieces[1], b)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axis,sizes", [((4, 0, 5, 7), 1, (3, 1, 2)), ((3, 0, 5), 2, (1, 4, 3)),
                                              ((0, 6), 0, (2, 5, 1)), ((2, 3, 0, 9), 2, (7, 0, 1)),
                                              ((8, 0, 6, 6), 1, (8, 24))])
def test_gpu_concatenate_matches_numpy(dtype, shape, axis, sizes, poisoned_pool):
    import cupy

    rng = np.random.default_rng(1)
    hosts = [_host(rng, shape[:axis] + (n,) + shape[axis + 1:], dtype) for n in sizes]
    # each input also starting one element into its allocation (smaller pieces), and the output's too
    for skew in (0, 1):
        arrays = [cupy.asarray(np.concatenate([h.reshape(-1)[:skew], h.reshape(-1)]))[skew:].reshape(h.shape)
                  if skew else cupy.asarray(h) for h in hosts]
        total = sum(sizes)
        out_shape = shape[:axis] + (total,) + shape[axis + 1:]
        out = cupy.empty(int(np.prod(out_shape)) + skew, dtype)[skew:].reshape(out_shape)
        got = join.concatenate(arrays, axis, out)
        assert got is out
        np.testing.assert_array_equal(cupy.asnumpy(got), np.concatenate(hosts, axis))
        pieces = join.split(got, sizes, axis)
        for p, h in zip(pieces, hosts):
            assert p.shape == h.shape
            np.testing.assert_array_equal(cupy.asnumpy(p), h)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", (np.float32, np.float16))
@pytest.mark.parametrize("axis", (0, 1, 2, 3))
def test_gpu_channels_last_join_and_split(dtype, axis, poisoned_pool):
    import cupy

    rng = np.random.default_rng(2)
    base = [2, 3, 5, 7]
    sizes = (3, 1, 4)
    hosts = []
    for n in sizes:
        shape = list(base)
        shape[axis] = n
        hosts.append(_host(rng, tuple(shape), dtype))
    arrays = [cupy.asarray(h.transpose(0, 2, 3, 1).copy()).transpose(0, 3, 1, 2) for h in hosts]
    assert all(is_channels_last(a) for a in arrays if 1 not in a.shape)
    shape = list(base)
    shape[axis] = sum(sizes)
    n, c, h, w = shape
    out = cupy.empty((n, h, w, c), dtype).transpose(0, 3, 1, 2)
    got = join.concatenate(arrays, axis, out)
    np.testing.assert_array_equal(cupy.asnumpy(got), np.concatenate(hosts, axis))
    pieces = join.split(got, sizes, axis)
    for p, ref in zip(pieces, hosts):
        assert is_channels_last(p) or p.flags.c_contiguous
        np.testing.assert_array_equal(cupy.asnumpy(p), ref)


@pytest.mark.gpu
def test_gpu_join_of_views_and_mixed_layouts_falls_back(poisoned_pool):
    import cupy

    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal((6, 4)).astype(np.float32)
    out = join.concatenate([cupy.asarray(a), cupy.asarray(b).T], 1, cupy.empty((4, 12), np.float32))
    np.testing.assert_array_equal(cupy.asnumpy(out), np.concatenate([a, b.T], 1))
    pieces = join.split(cupy.asarray(np.concatenate([a, b.T], 1)).T, (5, 7), 0)
    np.testing.assert_array_equal(cupy.asnumpy(pieces[1]), np.concatenate([a, b.T], 1).T[5:])


@pytest.mark.gpu
@pytest.mark.parametrize("channels_last", (False, True))
def test_gpu_cat_forward_and_gradient(channels_last, poisoned_pool):
    rng = np.random.default_rng(4)
    hosts = [rng.standard_normal((3, c, 5, 6)).astype(np.float32) for c in (4, 2, 6)]
    weight = rng.standard_normal((3, 12, 5, 6)).astype(np.float32)
    fmt = mf.channels_last if channels_last else mf.contiguous_format
    ts = [mf.tensor(h).cuda().contiguous(memory_format=fmt).requires_grad_() for h in hosts]
    y = mf.cat(ts, 1)
    np.testing.assert_array_equal(y.detach().cpu().numpy(), np.concatenate(hosts, 1))
    assert y.is_contiguous(memory_format=fmt)
    (y * mf.tensor(weight).cuda()).sum().backward()
    for t, ref in zip(ts, np.split(weight, [4, 6], 1)):
        np.testing.assert_array_equal(t.grad.cpu().numpy(), ref)


@pytest.mark.gpu
@pytest.mark.parametrize("dim", (0, 1, 2, -1))
def test_gpu_stack_forward_and_gradient(dim, poisoned_pool):
    rng = np.random.default_rng(5)
    hosts = [rng.standard_normal((3, 5, 7)).astype(np.float16) for _ in range(4)]
    ts = [mf.tensor(h).cuda().requires_grad_() for h in hosts]
    y = mf.stack(ts, dim)
    ref = np.stack(hosts, dim)
    np.testing.assert_array_equal(y.detach().cpu().numpy(), ref)
    weight = rng.standard_normal(ref.shape).astype(np.float16)
    (y * mf.tensor(weight).cuda()).sum().backward()
    for i, t in enumerate(ts):
        np.testing.assert_array_equal(t.grad.cpu().numpy(), np.take(weight, i, axis=dim))
