"""``unique(dim=...)`` (the distinct slices along a dimension, with inverse and counts) against NumPy's
``unique(axis=...)`` and hand-worked cases, and the gradient of ``scatter_reduce(reduce='prod')`` against a float64
NumPy re-implementation that multiplies the other values at each position (no division), with zeros in input and
src, repeated indices and ``include_self`` both ways."""
import math

import numpy as np
import pytest

import minifused as mf
from minifused import backend
from tolerances import cpu

NAN = float("nan")


def _np_unique_dim(a, axis):
    values, inverse, counts = np.unique(a, axis=axis, return_inverse=True, return_counts=True)
    return values, inverse.reshape(-1), counts


def _check_unique_dim(a, dim, **kw):
    values, inverse, counts = mf.unique(cpu(a, **kw), dim=dim, return_inverse=True, return_counts=True)
    want = _np_unique_dim(a, dim % a.ndim)
    for got, ref in zip((values, inverse, counts), want):
        np.testing.assert_array_equal(got.numpy(), ref)
    assert inverse.dtype == counts.dtype == mf.int64 and tuple(inverse.shape) == (a.shape[dim],)


def test_unique_dim_rows_and_columns_of_ints():
    a = np.array([[3, 1, 3, 0], [1, 2, 1, 0], [3, 1, 3, 0], [1, 0, 1, 9]])
    values, inverse, counts = mf.unique(cpu(a), dim=0, return_inverse=True, return_counts=True)
    assert values.tolist() == [[1, 0, 1, 9], [1, 2, 1, 0], [3, 1, 3, 0]]  # lexicographic order of the rows
    assert inverse.tolist() == [2, 1, 2, 0] and counts.tolist() == [1, 1, 2]
    _check_unique_dim(a, 1)
    _check_unique_dim(a, -2)


def test_unique_dim_of_a_3d_tensor_method_and_unsorted():
    a = np.array([[[1, 2], [3, 4]], [[1, 2], [3, 4]], [[0, 9], [3, 4]]], np.float32)
    for dim in range(-3, 3):
        _check_unique_dim(a, dim)
    # sorted=False still sorts, as PyTorch's (the slices are found by sorting); one output without the flags
    got = cpu(a).unique(sorted=False, dim=0)
    np.testing.assert_array_equal(got.numpy(), [[[0, 9], [3, 4]], [[1, 2], [3, 4]]])
    assert got.dtype == mf.float32


def test_unique_dim_many_columns_random():
    """Wide slices (odd and even column counts: the column ranks are paired round after round)."""
    rng = np.random.default_rng(0)
    for shape, dim in (((50, 7), 0), ((3, 40, 5), 1), ((6, 33), 1), ((64, 2, 3, 3), 0)):
        a = rng.integers(0, 2, shape)
        _check_unique_dim(a, dim)
        _check_unique_dim(a.astype(np.float64) - 0.5, dim)


def test_unique_dim_bool_and_bfloat16():
    a = np.array([[True, False], [True, False], [False, True]])
    values, inverse, counts = mf.unique(cpu(a), dim=0, return_inverse=True, return_counts=True)
    assert values.tolist() == [[False, True], [True, False]] and values.dtype == mf.bool
    assert inverse.tolist() == [1, 1, 0] and counts.tolist() == [1, 2]
    b = np.array([[1.5, -2.0, 1.5], [0.25, 3.0, 0.25]])
    values, inverse = mf.unique(cpu(b, dtype=mf.bfloat16), dim=1, return_inverse=True)
    assert values.dtype == mf.bfloat16 and values.float().tolist() == [[-2.0, 1.5], [3.0, 0.25]]
    assert inverse.tolist() == [1, 0, 1]


def test_unique_dim_nan_slices_stay_apart():
    """NaN != NaN: a slice holding a NaN equals no other, also an identical one (PyTorch keeps both); here those
    slices sort after the numbers, as NaN does in unique() without dim."""
    a = np.array([[1, NAN], [0, 5], [1, NAN], [1, 0], [0, 5]])
    values, inverse, counts = mf.unique(cpu(a), dim=0, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(values.numpy(), [[0, 5], [1, 0], [1, NAN], [1, NAN]])
    assert inverse.tolist() == [2, 0, 3, 1, 0] and counts.tolist() == [2, 1, 1, 1]
    values, inverse = mf.unique(cpu([NAN, 2.0, NAN, 2.0]), dim=0, return_inverse=True)
    np.testing.assert_array_equal(values.numpy(), [2.0, NAN, NAN])
    assert inverse.tolist() == [1, 0, 2, 0]


def test_unique_dim_keeps_the_first_of_equal_slices():
    assert math.copysign(1, mf.unique(cpu([[-0.0], [0.0]]), dim=0).item()) == -1
    assert math.copysign(1, mf.unique(cpu([[0.0], [-0.0]]), dim=0).item()) == 1


def test_unique_dim_empty():
    values, inverse, counts = mf.unique(cpu(np.zeros((2, 0, 3))), dim=1, return_inverse=True, return_counts=True)
    assert tuple(values.shape) == (2, 0, 3) and tuple(inverse.shape) == tuple(counts.shape) == (0,)
    assert inverse.dtype == counts.dtype == mf.int64
    with pytest.raises(RuntimeError, match="aren't selected"):
        mf.unique(cpu(np.zeros((0, 3))), dim=1)
    with pytest.raises(RuntimeError, match="more than one"):
        mf.unique(cpu(np.zeros((0, 0))), dim=0)


def test_unique_dim_errors():
    with pytest.raises(IndexError, match="no dimensions"):
        mf.unique(cpu(5.0), dim=0)
    with pytest.raises(IndexError, match="unique: dimension 2 out of range"):
        mf.unique(cpu(np.zeros((2, 3))), dim=2)
    for bad in (1.0, True, (0,)):
        with pytest.raises(TypeError, match="argument 'dim' must be int"):
            mf.unique(cpu(np.zeros((2, 3))), dim=bad)
    with pytest.raises(NotImplementedError, match="complex"):
        mf.unique(cpu(np.ones((2, 2), np.complex64)), dim=0)


# ---------------------------------------------------------------- scatter_reduce(reduce='prod') gradients
def _prod_ref(x, src, index, dim, include_self, g):
    """(result, input's gradient, src's gradient): each position's product and, for each value in it, the
    product of the others there times g, multiplied out term by term in float64."""
    x, src, g = (np.asarray(v, np.float64) for v in (x, src, g))
    at = {}
    for i in np.ndindex(*np.shape(index)):
        target = list(i)
        target[dim] = index[i]
        at.setdefault(tuple(target), []).append(i)
    out, gx, gs = x.copy(), g.copy(), np.zeros(src.shape)
    for t, sources in at.items():
        vals = [src[i] for i in sources]
        if include_self:
            vals.append(x[t])
        out[t] = np.prod(vals)
        gx[t] = g[t] * np.prod(vals[:-1]) if include_self else 0.0
        for k, i in enumerate(sources):
            gs[i] = g[t] * np.prod(vals[:k] + vals[k + 1:])
    return out, gx, gs


@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_prod_gradient_with_zeros(include_self):
    # row 0: a zero of input at 1, a single zero of src at 1; row 1: two zeros of src at position 2, one at 3
    x = np.array([[2.0, 0.0, 3.0, 1.0], [1.0, 5.0, 0.0, 2.0]])
    src = np.array([[4.0, 0.0, 2.0], [3.0, 0.0, 0.0]])
    index = np.array([[0, 1, 0], [2, 2, 3]])
    g = np.array([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]])
    xt, st = cpu(x, requires_grad=True), cpu(src, requires_grad=True)
    out = mf.scatter_reduce(xt, 1, cpu(index), st, "prod", include_self=include_self)
    gx, gs = mf.autograd.grad(out, (xt, st), cpu(g))
    want = _prod_ref(x, src, index, 1, include_self, g)
    for got, ref in zip((out, gx, gs), want):
        np.testing.assert_allclose(got.detach().numpy(), ref, rtol=1e-12, atol=0)
    if include_self:  # worked by hand: 2*4*2 at (0, 0); the zero src at (0, 1) gets g * input's 0
        assert gs.tolist() == [[4.0, 0.0, 8.0], [0.0, 0.0, 16.0]] and gx[0].tolist() == [8.0, 0.0, 3.0, 4.0]
    else:
        assert gs.tolist() == [[2.0, 2.0, 4.0], [0.0, 21.0, 8.0]] and gx[0].tolist() == [0.0, 0.0, 3.0, 4.0]


@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_prod_gradient_random_repeated_indices(include_self):
    rng = np.random.default_rng(1)
    for dim, shape, ishape in ((0, (4, 3), (6, 3)), (1, (2, 3, 4), (2, 7, 3)), (2, (2, 3, 4), (1, 3, 5))):
        x = rng.integers(-2, 3, shape).astype(np.float64) * rng.uniform(0.5, 1.5, shape)
        src = rng.integers(-2, 3, ishape).astype(np.float64) * rng.uniform(0.5, 1.5, ishape)
        index = rng.integers(0, shape[dim], ishape)
        g = rng.standard_normal(shape)
        xt, st = cpu(x, requires_grad=True), cpu(src, requires_grad=True)
        out = xt.scatter_reduce(dim, cpu(index), st, "prod", include_self=include_self)
        gx, gs = mf.autograd.grad(out, (xt, st), cpu(g))
        want = _prod_ref(x, src, index, dim, include_self, g)
        for got, ref in zip((out, gx, gs), want):
            np.testing.assert_allclose(got.detach().numpy(), ref, rtol=1e-12, atol=1e-12)


def test_scatter_reduce_prod_gradient_finite_differences_and_inplace():
    """Without zeros the gradient is the derivative: central differences of the sum of g * result."""
    rng = np.random.default_rng(2)
    x, src = rng.uniform(0.5, 2, (3, 4)), rng.uniform(-2, -0.5, (3, 4))
    index, g = np.array([[0, 0, 2, 0], [1, 1, 1, 2], [0, 2, 2, 1]]), rng.standard_normal((3, 4))

    def f(xa, sa):
        return float((mf.scatter_reduce(cpu(xa), 0, cpu(index), cpu(sa), "prod").numpy() * g).sum())

    xt, st = cpu(x, requires_grad=True), cpu(src, requires_grad=True)
    y = xt * 1
    y.scatter_reduce_(0, cpu(index), st, "prod")  # the in-place form takes the same gradient
    (y * cpu(g)).sum().backward()
    h = 1e-6
    for arr, grad, which in ((x, xt.grad, 0), (src, st.grad, 1)):
        fd = np.zeros_like(arr)
        for i in np.ndindex(*arr.shape):
            up, down = arr.copy(), arr.copy()
            up[i] += h
            down[i] -= h
            args_up, args_down = ((up, src), (down, src)) if which == 0 else ((x, up), (x, down))
            fd[i] = (f(*args_up) - f(*args_down)) / (2 * h)
        np.testing.assert_allclose(grad.numpy(), fd, rtol=1e-6, atol=1e-8)


def test_scatter_reduce_prod_gradient_half_precision_dtype():
    for dtype in (mf.float16, mf.bfloat16):
        xt = cpu([1.5, 0.0, 3.0], dtype=dtype, requires_grad=True)
        st = cpu([0.75, 4.0, 5.0, 0.0], dtype=dtype, requires_grad=True)
        xt.scatter_reduce(0, cpu([0, 0, 2, 1]), st, "prod").sum().backward()
        assert xt.grad.dtype == st.grad.dtype == dtype
        # (0, 0) holds 1.5 * 0.75 * 4 = 4.5: input's share 0.75 * 4, src's 1.5 * 4 and 1.5 * 0.75
        assert xt.grad.float().tolist() == [3.0, 0.0, 5.0] and st.grad.float().tolist() == [6.0, 1.125, 3.0, 0.0]


def test_scatter_reduce_prod_gradient_zero_dim():
    xt, st = cpu(3.0, requires_grad=True), cpu(0.0, requires_grad=True)
    out = mf.scatter_reduce(xt, 0, cpu(0), st, "prod")
    out.backward()
    assert out.item() == 0.0 and xt.grad.item() == 0.0 and st.grad.item() == 3.0
    assert backend.is_floating(xt.grad.dtype)
