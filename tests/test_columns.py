"""kernels/columns.py (columns.cu): column sums on the GPU against float64, and the ops that take them: a
broadcast add's bias gradient and a sum over leading dimensions."""
import numpy as np
import pytest

import minifused as mf
from conftest import dev_array, f64, host
from minifused import backend
from minifused.kernels import columns

DTYPES = [backend.float32, backend.float16, backend.bfloat16]
# float32 sums; a 16-bit result rounded once (half an ulp, as a norm over the columns)
TOL = {backend.float32: 1e-5, backend.float16: 2 ** -11, backend.bfloat16: 2 ** -8}


def rel(a, b):
    a = f64(a)
    assert np.isfinite(a).all()
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(1, 8), (3, 5), (1000, 264), (1001, 263), (70000, 16), (33, 4104), (0, 24),
                                   (5000, 3), (2000, 64), (4099, 40)])
def test_column_sums(rng, poisoned_pool, dtype, shape):
    """Against float64 on poisoned memory, 8-element vectors (m % 8 == 0) and single elements alike; the same
    bits on a second call (fixed summation orders); an empty column is 0."""
    a = (rng.standard_normal(shape) + 0.5).astype(dtype)
    ad = dev_array(a, "cuda")
    got = columns.column_sums(ad)
    assert got.dtype == dtype and got.shape == (shape[1],)
    expect = f64(a).sum(0)
    if shape[0] == 0:
        assert (f64(got) == 0).all()
        return
    assert rel(got, expect) < TOL[dtype]
    again = columns.column_sums(ad)
    assert (host(again).view(np.uint8) == host(got).view(np.uint8)).all()
    assert rel(columns.column_sums(ad, scale=1 / shape[0]), expect / shape[0]) < TOL[dtype]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("n,m,lda", [(1000, 10, 16), (33, 5, 8), (70000, 64, 64), (517, 100, 104), (7, 3, 3),
                                     (300, 20, 21)])
@pytest.mark.parametrize("offset", [0, 1], ids=["aligned", "unaligned"])
def test_strided_sums(rng, poisoned_pool, dtype, n, m, lda, offset):
    """The sums of the first m columns of rows lda apart (a convolution's packed dy), against float64: the columns
    past m hold other values, which a vector reads and must drop; vectors (lda % 8 == 0, aligned) and elements (an
    address one element past a vector's); the same bits on a second call."""
    import cupy

    a = (rng.standard_normal(n * lda + offset) + 0.5).astype(dtype)
    ad = dev_array(a, "cuda")
    part_bytes, run = columns.strided_sums(np.dtype(dtype), n, m, lda, 0)
    part = cupy.cuda.alloc(part_bytes)
    out = dev_array(np.full(m + 1, np.nan, dtype), "cuda")  # a poisoned element past the sums: untouched
    run(ad.data.ptr + offset * a.itemsize, part.ptr, out.data.ptr)
    expect = f64(a[offset:]).reshape(n, lda)[:, :m].sum(0)
    assert rel(out[:m], expect) < TOL[dtype] and np.isnan(f64(out[m:])).all()
    first = host(out).view(np.uint8).copy()
    run(ad.data.ptr + offset * a.itemsize, part.ptr, out.data.ptr)
    assert (host(out).view(np.uint8) == first).all()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(1, 8), (3, 5), (1000, 264), (1001, 263), (70000, 16), (33, 4104), (5000, 3),
                                   (2, 50001), (9, 1)])
def test_row_sums(rng, poisoned_pool, dtype, shape):
    """columns.cu's row sums (a warp a row) against float64 on poisoned memory, 8-element vectors (m % 8 == 0) and
    single elements, a misaligned start (single elements), long and one-element rows; the same bits on a second
    call; scaled for a mean."""
    a = (rng.standard_normal((shape[0] * shape[1] + 1,)) + 0.5).astype(dtype)
    expect = f64(a[:-1]).reshape(shape).sum(1)
    for start in (0, 1):
        ad = dev_array(a, "cuda")[start:start + shape[0] * shape[1]].reshape(shape)
        got = columns.row_sums(ad)
        assert got.dtype == dtype and got.shape == (shape[0],)
        want = f64(a[start:start + shape[0] * shape[1]]).reshape(shape).sum(1)
        assert rel(got, want) < TOL[dtype], start
        assert (host(columns.row_sums(ad)).view(np.uint8) == host(got).view(np.uint8)).all()
    assert rel(columns.row_sums(dev_array(a, "cuda")[:-1].reshape(shape), scale=1 / shape[1]),
               expect / shape[1]) < TOL[dtype]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_sums_and_means_over_trailing_dimensions_take_the_row_kernel(rng, monkeypatch, dtype):
    """``x.sum`` / ``x.mean`` over trailing dimensions (a global average pool's (2, 3), the last dim; keepdim or
    not) run on the row sums: values and gradients against float64, the kernel called each time; long rows that
    are few, and a non-contiguous x, keep CuPy's reduction, with the same values."""
    calls, spreads = [], []
    real, spread = columns.row_sums, columns.row_broadcast
    monkeypatch.setattr(columns, "row_sums", lambda a, scale=1.0: (calls.append(a.shape), real(a, scale))[1])
    monkeypatch.setattr(columns, "row_broadcast",
                        lambda g, m, scale=1.0: (spreads.append((g.shape, m)), spread(g, m, scale))[1])
    x = rng.standard_normal((16, 32, 7, 7)).astype(dtype)
    xt = mf.Tensor(dev_array(x, "cuda"), requires_grad=True)
    m = xt.mean((2, 3))
    assert m.shape == (16, 32) and m.dtype == dtype and rel(m, f64(x).mean((2, 3))) < TOL[dtype]
    g = rng.standard_normal((16, 32)).astype(dtype)
    m.backward(mf.Tensor(dev_array(g, "cuda")))
    assert rel(xt.grad, np.broadcast_to(f64(g)[:, :, None, None] / 49, x.shape)) < TOL[dtype]
    xt.grad = None
    s = xt.sum((3, 2), keepdim=True)
    assert s.shape == (16, 32, 1, 1) and rel(s, f64(x).sum((2, 3), keepdims=True)) < TOL[dtype]
    s.backward(mf.Tensor(dev_array(g.reshape(16, 32, 1, 1), "cuda")))
    assert rel(xt.grad, np.broadcast_to(f64(g)[:, :, None, None], x.shape)) == 0
    assert spreads == [((512,), 49), ((512,), 49)]
    last = xt.detach().mean(-1, keepdim=True)
    assert last.shape == (16, 32, 7, 1) and rel(last, f64(x).mean(-1, keepdims=True)) < TOL[dtype]
    assert rel(xt.detach().sum(-1), f64(x).sum(-1)) < TOL[dtype]
    assert calls == [(512, 49), (512, 49), (3584, 7), (3584, 7)]
    calls.clear()
    few_long = rng.standard_normal((2, 8200)).astype(dtype)
    # (CuPy's float16 reduction does not add in float32: off by up to an ulp of the result, not half of one)
    assert rel(mf.Tensor(dev_array(few_long, "cuda")).sum(1), f64(few_long).sum(1)) < 4 * TOL[dtype]
    strided = xt.detach().transpose(0, 1)
    assert rel(strided.mean((2, 3)), f64(x).transpose(1, 0, 2, 3).mean((2, 3))) < TOL[dtype]
    assert calls == []


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (70000, 16), (5, 50001)])
def test_row_broadcast(rng, poisoned_pool, dtype, shape):
    """columns.cu's row_broadcast: g[i] * scale in every element of row i, the float32 product rounded once."""
    g = rng.standard_normal(shape[0]).astype(dtype)
    for scale in (1.0, 1 / 49):
        got = columns.row_broadcast(dev_array(g, "cuda"), shape[1], scale)
        want = (g.astype(np.float32) * np.float32(scale)).astype(dtype)
        assert got.shape == shape and got.dtype == dtype
        want = np.ascontiguousarray(np.broadcast_to(want[:, None], shape))
        assert (host(got).view(np.uint8) == want.view(np.uint8)).all()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_bias_gradient_and_leading_sums_take_the_column_kernels(rng, monkeypatch, dtype):
    """``x + b``'s bias gradient (b broadcast over leading dimensions), ``x.sum`` and ``x.mean`` over leading
    dimensions (keepdim or not) run on the column sums: values against float64, the kernel called each time; a
    broadcast over leading and trailing dimensions (b of shape (m, 1), a per-channel (1, C, 1, 1)) sums the trailing
    ones first, then takes the column sums; a non-contiguous x keeps CuPy's reduction, with the same values."""
    calls = []
    real = columns.column_sums
    monkeypatch.setattr(columns, "column_sums",
                        lambda a, out=None, scale=1.0: (calls.append(a.shape), real(a, out, scale))[1])
    x = rng.standard_normal((6, 50, 40)).astype(dtype)
    b = rng.standard_normal(40).astype(dtype)
    g = rng.standard_normal((6, 50, 40)).astype(dtype)
    xt = mf.Tensor(dev_array(x, "cuda"), requires_grad=True)
    bt = mf.Tensor(dev_array(b, "cuda"), requires_grad=True)
    (xt + bt).backward(mf.Tensor(dev_array(g, "cuda")))
    assert calls == [(300, 40)]
    assert bt.grad.dtype == dtype and rel(bt.grad, f64(g).sum((0, 1))) < TOL[dtype]
    assert rel(xt.grad, f64(g)) == 0
    s = xt.detach().sum(0)
    assert s.shape == (50, 40) and rel(s, f64(x).sum(0)) < TOL[dtype]
    s = xt.detach().sum((1, 0), keepdim=True)
    assert s.shape == (1, 1, 40) and rel(s, f64(x).sum((0, 1), keepdims=True)) < TOL[dtype]
    m = xt.detach().mean(0, keepdim=True)
    assert m.shape == (1, 50, 40) and rel(m, f64(x).mean(0, keepdims=True)) < TOL[dtype]
    assert calls[1:] == [(6, 2000), (300, 40), (6, 2000)]
    calls.clear()
    col = mf.Tensor(dev_array(rng.standard_normal((50, 1)).astype(dtype), "cuda"), requires_grad=True)
    (xt + col).backward(mf.Tensor(dev_array(g, "cuda")))
    s = xt.detach().transpose(1, 2).sum(0)
    assert calls == [(6, 50)]
    assert rel(col.grad, f64(g).sum((0, 2))[:, None]) < TOL[dtype]
    assert rel(s, f64(x).transpose(0, 2, 1).sum(0)) < 8 * TOL[dtype] + 1e-6
    calls.clear()
    narrow = rng.standard_normal((4000, 3)).astype(dtype)
    nb = mf.Tensor(dev_array(narrow[0], "cuda"), requires_grad=True)  # rows of 3 columns: the kernels too
    (mf.Tensor(dev_array(narrow, "cuda")) + nb).backward(mf.Tensor(dev_array(narrow, "cuda")))
    s = mf.Tensor(dev_array(narrow, "cuda")).sum(0)
    assert calls == [(4000, 3), (4000, 3)]
    assert rel(nb.grad, f64(narrow).sum(0)) < TOL[dtype] and rel(s, f64(narrow).sum(0)) < TOL[dtype]
    calls.clear()
    images = rng.standard_normal((16, 3, 20, 24)).astype(dtype)
    for bias_shape in [(1, 3, 1, 1), (3, 1, 1)]:
        bias = mf.Tensor(dev_array(rng.standard_normal(bias_shape).astype(dtype), "cuda"), requires_grad=True)
        (mf.Tensor(dev_array(images, "cuda")) + bias).backward(mf.Tensor(dev_array(images, "cuda")))
        assert bias.grad.shape == bias_shape and bias.grad.dtype == dtype
        assert rel(bias.grad, f64(images).sum((0, 2, 3)).reshape(bias_shape)) < TOL[dtype]
    assert calls == [(16, 3), (16, 3)]
