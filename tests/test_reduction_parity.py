"""PyTorch's results where the reductions, scans and sorting ops have edge cases: 16-bit floats added up in float32,
NaN in cummax / cummin, unique and searchsorted, the gradients of full max / min / median shared among ties, empty
inputs, uint8 any / all, the degrees-of-freedom warning of var / std, the ``axis`` alias, histc's bins in the input's
dtype. References are float64 NumPy or worked out by hand."""
import math
import warnings

import numpy as np
import pytest

import minifused as mf
from tolerances import cpu

nan = math.nan


def grad_of(fn, values):
    x = cpu(np.asarray(values, np.float32), requires_grad=True)
    fn(x).sum().backward()
    return x.grad.numpy()


# ---------------------------------------------------------------- 16-bit floats add up in float32
def test_bfloat16_sum_mean_logsumexp_add_in_float32(device):
    ones = mf.ones(1000, device=device, dtype=mf.bfloat16)
    assert ones.sum().item() == 1000.0 and ones.mean().item() == 1.0  # (adding in bfloat16 stops at 256)
    assert ones.cumsum(0)[-1].item() == 1000.0
    halves = mf.full((9,), 0.5, device=device, dtype=mf.bfloat16, requires_grad=True)
    prods = halves.cumprod(0)  # (in float32, rounded once; CuPy's bfloat16 scans did not compile)
    assert prods.dtype == mf.bfloat16 and prods.float().tolist() == [0.5**k for k in range(1, 10)]
    prods.sum().backward()
    np.testing.assert_allclose(halves.grad.float().cpu().numpy(),
                               [sum(0.5**k for k in range(i, 9)) for i in range(9)], rtol=1e-2)
    zeros = mf.zeros(1000, 2, device=device, dtype=mf.bfloat16)
    ref = np.float32(mf.tensor(math.log(1000.0)).to(mf.bfloat16).item())
    assert mf.logsumexp(zeros, 0).tolist() == [ref, ref]
    assert mf.ones(1000, 3, device=device, dtype=mf.bfloat16).mean(0).tolist() == [1.0] * 3


def test_float16_logsumexp_rounds_each_step_as_pytorch():
    # PyTorch's logsumexp is x - max, exp, sum, log and + max, each rounded to float16 (the sum added in float32):
    # 1.1376953125 here, where rounding once would give 1.138671875 (PyTorch 2.13's values)
    x = cpu(np.array([0.9, -1.4, -1.1, -2.7, -4.2], np.float16))
    assert mf.logsumexp(x, 0).item() == 1.1376953125
    assert mf.logsumexp(x.reshape(5, 1).expand(5, 3), 0).tolist() == [1.1376953125] * 3


def test_half_var_std_sum_in_float32_and_round_once():
    a = (np.arange(3000) / 3000).astype(np.float32)
    x = cpu(a).to(mf.bfloat16)
    ref = x.float().numpy().astype(np.float64).var(ddof=1)
    ulp = 2.0 ** (math.floor(math.log2(ref)) - 7)
    assert abs(x.var().item() - ref) <= ulp and abs(x.std().item() - math.sqrt(ref)) <= 2 * ulp


def test_float16_sums_over_leading_axes_and_cumsum_add_in_float32(device):
    x = mf.ones(5000, 2, device=device, dtype=mf.float16)
    assert x.sum(0).tolist() == [5000.0, 5000.0] and x.mean(0).tolist() == [1.0, 1.0]
    assert mf.nansum(x, 0).tolist() == [5000.0, 5000.0] and mf.nanmean(x, 0).tolist() == [1.0, 1.0]
    assert x.t().sum(1).tolist() == [5000.0, 5000.0]
    assert x[:, 0].cumsum(0)[-1].item() == 5000.0
    y = mf.ones(20000, device=device, dtype=mf.float16, requires_grad=True)
    y.cumsum(0).sum().backward()
    assert y.grad[0].item() == 20000.0 and y.grad[-1].item() == 1.0


def test_float32_cumsum_cumprod_accumulate_in_float64_on_the_host():
    # PyTorch's CPU scans keep a float64 running value for float32, each output rounded once (NumPy's float32 running
    # sum drifts by ~0.2 over these 200000 values); reference: float64 NumPy rounded to float32
    a = np.random.default_rng(0).standard_normal(200000).astype(np.float32) + np.float32(0.1)
    np.testing.assert_array_equal(mf.cumsum(cpu(a), 0).numpy(), np.cumsum(a.astype(np.float64)).astype(np.float32))
    b = np.float32(1) + a[:5000] * np.float32(1e-2)
    np.testing.assert_array_equal(mf.cumprod(cpu(b), 0).numpy(), np.cumprod(b.astype(np.float64)).astype(np.float32))
    x = cpu(a, requires_grad=True)
    (x.cumsum(0) * cpu(a)).sum().backward()  # (the gradient: a's running sum from the end, also in float64)
    np.testing.assert_array_equal(x.grad.numpy(), np.cumsum(a[::-1].astype(np.float64))[::-1].astype(np.float32))


def test_float16_var_std_past_65504_elements():
    a = np.random.default_rng(0).random(70000).astype(np.float16)
    x = cpu(a, requires_grad=True)
    ref = a.astype(np.float64).var(ddof=1)
    v = x.var()
    assert v.dtype == mf.float16 and abs(v.item() / ref - 1) < 1e-3  # (the divisor in float16 was inf: 0)
    assert abs(x.std().item() / math.sqrt(ref) - 1) < 1e-3
    v.backward()
    g_ref = 2 * (a.astype(np.float64) - a.astype(np.float64).mean()) / (a.size - 1)
    np.testing.assert_allclose(x.grad.numpy().astype(np.float64), g_ref, atol=1e-7)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_var_std_square_deviations_in_float32(device, dtype):
    a = np.zeros(10000, np.float32)
    a[:2] = (400.0, -400.0)  # (400 ** 2 is past float16's largest value)
    x = mf.tensor(a, device=device).to(getattr(mf, dtype)).requires_grad_()
    ref = 2 * 400.0**2 / (a.size - 1)
    v = x.var()
    assert v.dtype == getattr(mf, dtype) and abs(v.item() / ref - 1) < 1e-2
    assert abs(x.std().item() / math.sqrt(ref) - 1) < 1e-2
    v.backward()
    g = x.grad.float().cpu().numpy()
    np.testing.assert_allclose(g[:3], [2 * 400 / (a.size - 1), -2 * 400 / (a.size - 1), 0.0], rtol=1e-2)


# ---------------------------------------------------------------- NaN in cummax / cummin
@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_cummin_propagate_nan(op):
    x = cpu([1.0, nan, 3.0, nan, 2.0], requires_grad=True)
    values, indices = getattr(mf, op)(x, 0)
    np.testing.assert_array_equal(values.detach().numpy(), [1.0, nan, nan, nan, nan])
    assert indices.tolist() == [0, 1, 1, 3, 3]  # each NaN from its index on
    values.sum().backward()
    assert x.grad.tolist() == [1.0, 2.0, 0.0, 2.0, 0.0]
    y = cpu([[2.0, 1.0], [nan, 0.0], [5.0, nan]])
    assert getattr(mf, op)(y, 0).indices.tolist() == [[0, 0], [1, 1 if op == "cummin" else 0], [1, 2]]


# ---------------------------------------------------------------- full reductions: the gradient shared among ties
def test_full_max_min_gradient_goes_to_nan_or_is_shared_among_ties():
    np.testing.assert_array_equal(grad_of(lambda x: x.max(), [1.0, nan, nan, 3.0]), [0, 0.5, 0.5, 0])
    np.testing.assert_array_equal(grad_of(lambda x: x.min(), [1.0, nan, 3.0]), [0, 1, 0])
    np.testing.assert_array_equal(grad_of(lambda x: x.min(), [1.0, 1.0, 3.0]), [0.5, 0.5, 0])


def test_full_median_nanmedian_gradient_shared_among_ties():
    np.testing.assert_allclose(grad_of(lambda x: x.median(), [2.0, 1.0, 2.0, 2.0, 5.0]), [1 / 3, 0, 1 / 3, 1 / 3, 0])
    np.testing.assert_array_equal(grad_of(lambda x: x.median(), [1.0, 1.0, 2.0, 5.0]), [0.5, 0.5, 0, 0])
    np.testing.assert_array_equal(grad_of(lambda x: x.median(), [1.0, nan, nan, 3.0]), [0, 0.5, 0.5, 0])
    np.testing.assert_array_equal(grad_of(lambda x: mf.nanmedian(x), [1.0, 1.0, nan, 2.0, nan]), [0.5, 0.5, 0, 0, 0])
    np.testing.assert_array_equal(grad_of(lambda x: mf.nanmedian(x), [nan, nan]), [0.5, 0.5])
    # along a dim the gradient still goes to the index returned
    np.testing.assert_array_equal(grad_of(lambda x: x.median(0).values, [1.0, 1.0, 2.0, 5.0]), [0, 1, 0, 0])


# ---------------------------------------------------------------- empty inputs
def test_empty_inputs_prod_cummax_backward_and_median():
    x = cpu(np.zeros((2, 0), np.float32), requires_grad=True)
    x.prod(0).sum().backward()
    assert x.grad.shape == (2, 0)
    for op in ("cummax", "cummin"):
        y = cpu(np.zeros(0, np.float32), requires_grad=True)
        getattr(y, op)(0).values.sum().backward()
        assert y.grad.shape == (0,)
    for t in (cpu(np.zeros(0, np.float32)), cpu(np.zeros((2, 0)))):
        assert math.isnan(t.median().item()) and math.isnan(mf.nanmedian(t).item())
        assert t.median().dtype == t.dtype


# ---------------------------------------------------------------- any / all keep uint8
def test_any_all_of_uint8_are_uint8():
    x = cpu(np.array([[0, 1], [2, 3]], np.uint8))
    assert x.all(1).dtype == mf.uint8 and x.all(1).tolist() == [0, 1]
    assert x.any().dtype == mf.uint8 and x.any().item() == 1
    assert x.any(0, keepdim=True).tolist() == [[1, 1]]
    assert cpu(np.array([0, 1], np.int8)).any().dtype == mf.bool


# ---------------------------------------------------------------- bool inputs of the selections
@pytest.mark.parametrize("op,call,exc", [
    ("argmax", lambda b: b.argmax(), RuntimeError), ("argmax", lambda b: mf.argmax(b, dim=1), RuntimeError),
    ("argmin", lambda b: mf.argmin(b), RuntimeError), ("argmin", lambda b: b.argmin(0, keepdim=True), RuntimeError),
    ("median", lambda b: mf.median(b), NotImplementedError), ("median", lambda b: b.median(1), NotImplementedError),
    ("nanmedian", lambda b: mf.nanmedian(b), NotImplementedError),
    ("nanmedian", lambda b: b.nanmedian(dim=0), NotImplementedError),
    ("kthvalue", lambda b: mf.kthvalue(b, 2, dim=1), NotImplementedError),
    ("kthvalue", lambda b: b.kthvalue(1), NotImplementedError)])
def test_argmax_argmin_median_kthvalue_refuse_bool_as_pytorch(op, call, exc):
    """PyTorch has no bool kernel for these: argmax / argmin raise a RuntimeError, the medians and kthvalue a
    NotImplementedError."""
    with pytest.raises(exc, match=f"{op}: expected a tensor of a numeric dtype, got a bool tensor"):
        call(mf.tensor([[True, False, True], [False, False, True]]))


def test_mode_of_bool_keeps_bool_as_pytorch():
    """mode takes bool (the most frequent value, the smaller of those as frequent, at its last occurrence)."""
    values, indices = mf.tensor([[True, False, True], [False, False, True], [True, False, False]]).mode(1)
    assert values.dtype == mf.bool and values.tolist() == [True, False, False]
    assert indices.dtype == mf.int64 and indices.tolist() == [2, 1, 2]
    # against the same rows as integers
    assert mf.tensor([[1, 0, 1], [0, 0, 1], [1, 0, 0]]).mode(1).indices.tolist() == [2, 1, 2]


# ---------------------------------------------------------------- a dim not given
def test_keepdim_needs_a_dim_as_pytorch():
    """PyTorch's sum / mean take keepdim only beside a dim (dim=None, or the axis alias, will do)."""
    x = cpu(np.ones((2, 3)))
    assert x.sum(None, True).shape == (1, 1) and mf.mean(x, dim=None, keepdim=True).shape == (1, 1)
    assert x.sum(axis=0, keepdim=True).shape == (1, 3) and x.mean(dtype=mf.float64).dtype == mf.float64
    for call in (lambda: x.sum(keepdim=True), lambda: mf.mean(x, dtype=mf.float64, keepdim=True)):
        with pytest.raises(TypeError, match="(sum|mean): expected a dim with keepdim=True"):
            call()


def test_logsumexp_needs_a_dim_as_pytorch():
    """PyTorch's logsumexp has no form without a dim (here dim=None, as the axis alias, still works)."""
    x = cpu(np.ones((2, 3)))
    assert x.logsumexp(axis=1).shape == (2,) and mf.logsumexp(x, None).shape == ()
    for call in (lambda: x.logsumexp(), lambda: mf.logsumexp(x, keepdim=True)):
        with pytest.raises(TypeError, match=r"logsumexp: expected a dim \(an int or a tuple of ints\), got none"):
            call()


# ---------------------------------------------------------------- unique and searchsorted with NaN
def test_unique_keeps_every_nan_apart():
    values, inverse, counts = mf.unique(cpu([1.0, nan, nan, 1.0]), return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(values.numpy(), [1.0, nan, nan])
    assert inverse.tolist() == [0, 1, 2, 0] and counts.tolist() == [2, 1, 1]
    values, counts = mf.unique(cpu([2.0, nan, 1.0, 2.0, -1.0, 1.0]).to(mf.bfloat16), return_counts=True)
    assert values.dtype == mf.bfloat16
    np.testing.assert_array_equal(values.float().numpy(), [-1.0, 1.0, 2.0, nan])
    assert counts.tolist() == [1, 2, 2, 1]
    a = np.random.default_rng(0).integers(-3, 4, (4, 5))
    values, inverse, counts = mf.unique(cpu(a), return_inverse=True, return_counts=True)
    ref_v, ref_i, ref_c = np.unique(a, return_inverse=True, return_counts=True)
    assert values.tolist() == ref_v.tolist() and counts.tolist() == ref_c.tolist()
    assert inverse.tolist() == ref_i.reshape(a.shape).tolist()
    empty = mf.unique(cpu(np.zeros(0, np.float32)), return_inverse=True, return_counts=True)
    assert [tuple(t.shape) for t in empty] == [(0,), (0,), (0,)]


def _lower_bound(seq, v, right):
    """PyTorch's binary search, one value: step right unless ``seq[mid] >= v`` (``>`` for right)."""
    lo, hi = 0, len(seq)
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if not (seq[mid] > v if right else seq[mid] >= v):
            lo = mid + 1
        else:
            hi = mid
    return lo


def test_searchsorted_on_a_sequence_ending_in_nan_searches_as_pytorch():
    assert mf.searchsorted(cpu([-1.0, 0.0, 2.0, nan]), cpu([1.0, 3.0])).tolist() == [2, 4]
    rng = np.random.default_rng(0)
    for _ in range(30):
        k = int(rng.integers(1, 5))
        seq = np.concatenate([np.sort(rng.integers(-3, 4, int(rng.integers(0, 8)))), np.full(k, nan)])
        vals = np.append(rng.integers(-4, 5, 6).astype(np.float64), nan)
        for right in (False, True):
            got = mf.searchsorted(cpu(seq), cpu(vals), right=right).tolist()
            assert got == [_lower_bound(seq, v, right) for v in vals]
            rows = mf.searchsorted(cpu(np.stack([seq, seq])), cpu(np.stack([vals, vals[::-1]])), right=right)
            assert rows.tolist() == [got, [_lower_bound(seq, v, right) for v in vals[::-1]]]
    seq = np.sort(rng.standard_normal((3, 7)), axis=1)  # without NaN: NumPy's searchsorted, row by row
    vals = rng.standard_normal((3, 5))
    got = mf.searchsorted(cpu(seq), cpu(vals), right=True).tolist()
    assert got == [np.searchsorted(s, v, side="right").tolist() for s, v in zip(seq, vals)]


def test_searchsorted_sorter_out_of_range_and_bool_value():
    with pytest.raises(RuntimeError, match="sorter index out of range"):
        mf.searchsorted(cpu([1.0, 0.0]), cpu([0.5]), sorter=cpu([1, 2]))
    with pytest.raises(RuntimeError, match="sorter index out of range"):
        mf.searchsorted(cpu([1.0, 0.0]), cpu([0.5]), sorter=cpu([-1, 0]))
    assert mf.searchsorted(cpu([1.0, 0.0]), cpu([0.5]), sorter=cpu([1, 0])).tolist() == [1]
    assert mf.searchsorted(cpu([0.0, 1.0, 2.0]), True).item() == 1


# ---------------------------------------------------------------- var / std: the degrees-of-freedom warning
def test_var_std_warn_when_degrees_of_freedom_are_not_positive():
    with pytest.warns(UserWarning, match=r"std\(\): degrees of freedom is <= 0"):
        cpu([1.0]).std()
    with pytest.warns(UserWarning, match=r"var\(\): degrees of freedom is <= 0"):
        out = mf.var(cpu(np.ones((3, 1))), 1)
    assert np.isnan(out.numpy()).all()
    with pytest.warns(UserWarning, match="degrees of freedom"):
        mf.var(cpu([1.0, 2.0]), correction=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mf.var(cpu(np.ones((3, 2))), 1).tolist() == [0.0] * 3


def test_var_std_of_an_empty_input_warn_as_pytorch():
    # PyTorch's count is the input's numel over the result's, 0 for an empty input: correction 0 warns, -5 does not
    for shape, dim in (((0, 3), 1), ((2, 0), 0), ((0, 3), None)):
        with pytest.warns(UserWarning, match=r"var\(\): degrees of freedom is <= 0"):
            mf.var(cpu(np.zeros(shape)), dim, correction=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mf.var(cpu(np.zeros((0, 3))), 1, correction=-5).shape == (0,)


@pytest.mark.parametrize("create_graph", [False, True])
def test_var_std_gradient_with_no_degrees_of_freedom_left(create_graph):
    # PyTorch 2.13 over every element with correction >= the count: var's gradient inf, NaN at an element equal to
    # the mean (2.0 here), whatever the deviation's sign; std's NaN. Along a dim it divides by n - correction (-1).
    for c in (3, 4):
        x = cpu(np.array([1.0, 3.0, 2.0]), requires_grad=True)
        with pytest.warns(UserWarning, match="degrees of freedom"):
            v, s = mf.var(x, correction=c), mf.std(x, correction=c)
        assert v.item() == math.inf and s.item() == math.inf
        (gv,) = mf.autograd.grad(v, x, create_graph=create_graph)
        (gs,) = mf.autograd.grad(s, x, create_graph=create_graph)
        np.testing.assert_array_equal(gv.numpy(), [math.inf, math.inf, nan])
        assert np.isnan(gs.numpy()).all()
    x = cpu(np.array([[1.0, 3.0, 2.0]]), requires_grad=True)
    with pytest.warns(UserWarning, match="degrees of freedom"):
        (g,) = mf.autograd.grad(mf.var(x, 1, correction=4).sum(), x, create_graph=create_graph)
    assert g.tolist() == [[2.0, -2.0, 0.0]]


@pytest.mark.parametrize("op, args", [("mode", ()), ("nanmedian", ()), ("quantile", (0.5,)), ("nanquantile", (0.5,)),
                                      ("kthvalue", (1,)), ("sort", ())])
@pytest.mark.parametrize("dim", [(0,), ()])
def test_single_dim_ops_refuse_a_tuple_dim_as_pytorch(op, args, dim):
    with pytest.raises(TypeError, match=f"{op}.*dim.*must be an int"):
        getattr(mf, op)(cpu(3.0), *args, dim=dim)


def test_norm_dtype_only_widens_as_pytorch():
    x = cpu(np.array([3.0, 4.0], np.float32))
    assert mf.linalg.vector_norm(x, dtype=mf.float64).dtype == mf.float64 and mf.norm(x, dtype=mf.float64).item() == 5.0
    assert mf.linalg.vector_norm(x.half(), dtype=mf.float32).item() == 5.0
    # PyTorch 2.13: RuntimeError "the dtype of the input (Double) should be convertible without narrowing ..." and
    # "Expected a floating point or complex tensor as input. Got Long"
    for call in (lambda: mf.linalg.vector_norm(x.double(), dtype=mf.float32),
                 lambda: mf.norm(x.half(), dtype=mf.bfloat16), lambda: mf.norm(x.bfloat16(), 2, 0, dtype=mf.float16)):
        with pytest.raises(RuntimeError, match="vector_norm: the input's dtype .* without narrowing"):
            call()
    msg = "vector_norm: expected a floating point input and dtype, got input dtype int64"
    with pytest.raises(RuntimeError, match=msg):
        mf.linalg.vector_norm(cpu(np.array([3, 4])), dtype=mf.float32)


# ---------------------------------------------------------------- the axis alias of dim
def test_axis_is_an_alias_of_dim():
    a = np.random.default_rng(0).standard_normal((3, 4))
    x = cpu(a)
    for name in ("sum", "mean", "std", "var", "logsumexp", "argmax", "argmin", "cumsum"):
        fn = getattr(mf, name)
        np.testing.assert_array_equal(fn(x, axis=1).numpy(), fn(x, 1).numpy())
        np.testing.assert_array_equal(getattr(x, name)(axis=0).numpy(), getattr(x, name)(0).numpy())
    np.testing.assert_allclose(mf.sum(x, axis=1).numpy(), a.sum(1))
    with pytest.raises(TypeError, match="axis"):
        mf.sum(x, 1, axis=1)
    with pytest.raises(TypeError, match="dim"):
        mf.cumsum(x)
    assert mf.max(cpu([1.0, -1.0]), other=cpu([0.0, 0.0])).tolist() == [1.0, 0.0]
    assert mf.min(cpu([1.0, -1.0]), other=cpu([0.0, 0.0])).tolist() == [0.0, -1.0]


# ---------------------------------------------------------------- histc
def test_histc_bins_are_worked_out_in_the_input_dtype():
    # float32(0.7) * 10 rounds to 7.0 in float32 (bin 7), where float64 gives 6.99999988 (bin 6); so 0.9 (bin 9)
    x = cpu(np.array([0.7, 0.9, 0.05, 1.0, 1.5], np.float32))
    assert mf.histc(x, 10, 0, 1).tolist() == [1, 0, 0, 0, 0, 0, 0, 1, 0, 2]
    assert mf.histc(x.double(), 10, 0, 1).tolist() == [1, 0, 0, 0, 0, 0, 1, 0, 1, 1]
