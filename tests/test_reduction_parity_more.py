"""More of PyTorch's edge cases of the reductions, scans, sorting and statistics ops, with the values PyTorch gives:
var / std with a correction past the element count, prod's gradient with NaN, the vector norms at NaN and on empty
dims, quantile with infinities. References are float64 NumPy or PyTorch's formula worked out by hand."""
import math
import warnings

import numpy as np
import pytest

import minifused as mf
from tolerances import cpu

nan, inf = math.nan, math.inf


def grad_of(fn, values, dtype=np.float64):
    x = cpu(np.asarray(values, dtype), requires_grad=True)
    fn(x).sum().backward()
    return x.grad.numpy()


# ---------------------------------------------------------------- var / std
def test_var_gradient_with_correction_past_the_count_divides_by_the_negative_dof():
    # PyTorch's forward divides by max(N - correction, 0) (inf here), its backward by N - correction itself
    a = np.array([[1.0, 2.0, 4.0, 7.0], [0.5, -1.0, 3.0, 2.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.isinf(cpu(a).var(1, correction=5).numpy()).all()
        g = grad_of(lambda x: x.var(1, correction=5), a)
        np.testing.assert_allclose(g, 2 * (a - a.mean(1, keepdims=True)) / (4 - 5))
        assert (grad_of(lambda x: x.std(1, correction=5), a) == 0).all()  # (g / (2 * inf) first: 0)
        assert (grad_of(lambda x: x.var(1, correction=2), [[1.5], [3.0]]) == 0).all()  # (one value: 0, not NaN)


# ---------------------------------------------------------------- prod's gradient
def test_prod_gradient_divides_where_there_is_no_zero_as_pytorch():
    # PyTorch's prod_backward is g * out / x when the input holds no zero: a NaN or inf in a slice makes the whole
    # slice's gradient NaN (not the product of the others); with a zero anywhere, the products of the others
    a = [[1.0, nan, 3.0], [2.0, 4.0, 5.0]]
    g = grad_of(lambda x: x.prod(1), a)
    assert np.isnan(g[0]).all() and g[1].tolist() == [20.0, 10.0, 8.0]
    g = grad_of(lambda x: x.prod(1), [[1.0, inf, 3.0], [2.0, 4.0, 5.0]])
    assert np.isnan(g[0, 1]) and g[0, 0] == inf and g[0, 2] == inf
    np.testing.assert_array_equal(grad_of(lambda x: x.prod(1), [[0.0, inf, 3.0], [2.0, 4.0, 5.0]]),
                                  [[inf, 0.0, nan], [20.0, 10.0, 8.0]])  # (a zero: the others' products)
    assert np.isnan(grad_of(lambda x: x.prod(), [nan])).all()  # (one element: divided too)
    assert grad_of(lambda x: x.prod(), nan).tolist() == 1.0  # (0-d: the gradient as it is)
    assert grad_of(lambda x: x.prod(), [[0.0, nan], [0.0, 1.0]]).tolist() == [[0.0, 0.0], [0.0, 0.0]]  # (2 zeros)


def test_prod_second_derivative_without_zeros():
    a = np.array([[2.0, 3.0, 5.0]])
    x = cpu(a, requires_grad=True)
    (g,) = mf.autograd.grad(x.prod(), x, create_graph=True)
    (h,) = mf.autograd.grad(g[0, 0], x)
    assert g.numpy().tolist() == [[15.0, 10.0, 6.0]] and h.numpy().tolist() == [[0.0, 5.0, 3.0]]


# ---------------------------------------------------------------- the vector norms
def test_one_norm_gradient_at_nan_is_zero_as_pytorchs_sign():
    g = grad_of(lambda x: mf.linalg.vector_norm(x, 1, 1), [[1.0, nan, -3.0], [2.0, -2.0, 0.0]])
    assert g.tolist() == [[1.0, 0.0, -1.0], [1.0, -1.0, 0.0]]


@pytest.mark.parametrize("order", [-1, -2, -0.5, -inf, inf])
def test_negative_and_inf_norms_refuse_an_empty_dim(order):
    with pytest.raises(RuntimeError, match="vector_norm"):
        mf.linalg.vector_norm(mf.zeros(0, 3), order, 0)
    assert mf.linalg.vector_norm(mf.zeros(0, 3), order, 1).shape == (0,)  # (a non-empty dim: an empty result)


# ---------------------------------------------------------------- quantile
@pytest.mark.parametrize("mode", ["lower", "higher", "nearest"])
def test_quantile_lower_higher_nearest_gather_without_arithmetic(mode):
    # PyTorch gathers the sorted value at the rank for these: an infinity is itself, not inf - inf = NaN
    x = cpu(np.array([[2.0, 2.0, inf, 2.0, 2.0], [-inf, 1.0, 3.0, 4.0, 5.0]]))
    assert x.quantile(1.0, 1, interpolation=mode).tolist() == [inf, 5.0]
    assert x.quantile(0.0, 1, interpolation=mode).tolist() == [2.0, -inf]
    assert x.nanquantile(0.0, 1, interpolation=mode).tolist() == [2.0, -inf]


def test_nanquantile_of_an_all_nan_row_is_its_first_element():
    # PyTorch's rank for a row without numbers is 0: the value is NaN and the gradient goes to that element
    a = np.array([[1.0, nan, 3.0], [nan, nan, nan]])
    x = cpu(a, requires_grad=True)
    out = x.nanquantile(0.5, 1)
    assert out[0].item() == 2.0 and math.isnan(out[1].item())
    out.sum().backward()
    assert x.grad.numpy().tolist() == [[0.5, 0.0, 0.5], [1.0, 0.0, 0.0]]


def test_quantile_of_a_0d_tensor_checks_its_dim():
    x = cpu(np.float64(2.5))
    assert x.quantile(0.5, 0).item() == 2.5 and x.quantile(0.5, -1, keepdim=True).shape == ()
    with pytest.raises(IndexError):
        x.quantile(0.5, 1)


# ---------------------------------------------------------------- nansum / nanmean
def test_nanmean_gradient_of_an_all_nan_row_is_nan_as_pytorch():
    # PyTorch's nanmean is nansum / count, and nansum's gradient g * (x is not NaN): g / 0 * 0 = NaN on such a row
    g = grad_of(lambda x: mf.nanmean(x, 1), [[1.0, nan, 3.0], [nan, nan, nan]])
    np.testing.assert_array_equal(g, [[0.5, 0.0, 0.5], [nan, nan, nan]])
    assert grad_of(lambda x: mf.nansum(x, 1), [[1.0, nan], [nan, nan]]).tolist() == [[1.0, 0.0], [0.0, 0.0]]


def test_nanmean_refuses_an_integer_dtype_and_nan_ops_name_themselves():
    x = cpu(np.ones((2, 3), np.float32))
    with pytest.raises(RuntimeError, match="nanmean"):
        mf.nanmean(x, 0, dtype=mf.int64)
    assert mf.nanmean(x, 0, dtype=mf.float64).dtype == mf.float64
    for op in (mf.nansum, mf.nanmean):
        with pytest.raises(IndexError, match=op.__name__):
            op(x, 2)


# ---------------------------------------------------------------- errors name the op
def test_aminmax_names_itself_and_a_float_dim_is_a_clear_type_error():
    with pytest.raises(RuntimeError, match="aminmax: cannot reduce over an empty dimension"):
        mf.aminmax(mf.zeros(0, 3), dim=0)
    with pytest.raises(TypeError, match=r"sum\(\): argument 'dim' must be an int or a tuple of ints, got 1.0"):
        mf.ones(2, 3).sum(1.0)  # (was Python's "'float' object is not iterable")


def test_cov_refuses_weights_summing_to_zero():
    x = cpu(np.arange(6.0).reshape(2, 3))
    for kw in ({"fweights": cpu(np.array([0, 0, 0]))}, {"aweights": cpu(np.zeros(3))}):
        with pytest.raises(RuntimeError, match="weights sum to zero"):
            mf.cov(x, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (1 - correction = 0 degrees of freedom: NaN, as PyTorch's)
        assert np.isnan(mf.cov(x, fweights=cpu(np.array([1, 0, 0]))).numpy()).all()


# ---------------------------------------------------------------- cumprod's gradient
def test_cumprod_gradient_with_infinities_and_zeros_follows_pytorchs_formula():
    # before the first zero PyTorch sums g * out over those positions only: the NaN of -inf * 0 after the zero
    # does not reach them; a one-element dim passes the gradient as it is
    g = grad_of(lambda x: x.cumprod(0), [2.0, -inf, 0.0, 5.0])
    assert g[0] == -inf and np.isnan(g[1]) and g[3] == 0.0
    x = np.array([[1.0, 0.5, 0.0, 3.0, 0.0, 2.0]])  # (finite: the brute-force derivative)
    brute = [sum(np.prod(np.delete(x[0, :k + 1], i)) for k in range(i, 6)) for i in range(6)]
    np.testing.assert_allclose(grad_of(lambda t: t.cumprod(1), x)[0], brute)
    assert np.isnan(grad_of(lambda t: t.cumprod(1), [[nan]])).tolist() == [[False]]


@pytest.mark.parametrize("order", [3.0, 1.5, 0.5, -1.0])
def test_p_norm_gradient_at_zero_is_nan_where_the_norm_is_nan(order):
    # PyTorch's gradient at x = 0 is 0 times its scale (g / norm^(p - 1), or g * norm^(1 - p) for p < 1): NaN when
    # the norm is NaN; 0 where the norm is finite
    g = grad_of(lambda x: mf.linalg.vector_norm(x, order, 1), [[0.0, 2.0, nan], [0.0, 2.0, -1.0]])
    assert np.isnan(g[0]).all() and g[1, 0] == 0.0 and np.isfinite(g[1]).all()


def test_fractional_norm_gradient_at_zero_with_an_infinite_norm_is_nan():
    g = grad_of(lambda x: mf.linalg.vector_norm(x, 0.5, 1), [[1.0, 0.0, inf]])
    assert g[0, 0] == inf and np.isnan(g[0, 1:]).all()


def test_histc_bins_must_be_an_int():
    with pytest.raises(TypeError, match="bins"):  # (PyTorch's TypeError; was "bins must be > 0, got 4.0")
        mf.histc(mf.ones(3), 4.0)
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        mf.histc(mf.ones(3), 0)


@pytest.mark.parametrize("call", [lambda x: x.amax(0), lambda x: x.max(0), lambda x: x.argmax(0), lambda x: x.median(0),
                                  lambda x: mf.aminmax(x, dim=0)])
def test_reducing_an_empty_dim_without_identity_is_an_index_error_as_pytorchs(call):
    with pytest.raises(IndexError, match="empty dimension"):  # (still a ValueError / RuntimeError too)
        call(mf.zeros(0, 3))


def test_kthvalue_along_an_empty_dim_is_an_index_error():
    with pytest.raises(IndexError, match="kthvalue"):  # (was "k must be in [1, 0]")
        mf.zeros(0, 3).kthvalue(1, 0)
    assert mf.zeros(0, 3).kthvalue(1, 1).values.shape == (0,)


def test_mode_of_a_short_row_with_nan_follows_pytorchs_insertion_sort():
    # PyTorch sorts (value, index) pairs with <: a NaN stays where it is and stops the numbers moving past it, so
    # [nan, 2, 1] sorts as [nan, 1, 2] and the first run, NaN, is the mode (every value once); [1, nan, 1] stays as
    # it is: the two 1s are apart, and the first is named
    x = cpu(np.array([[nan, 2.0, 1.0], [1.0, nan, 1.0], [2.0, 2.0, nan], [3.0, 1.0, 2.0]]))
    values, indices = x.mode(1)
    np.testing.assert_array_equal(values.numpy(), [nan, 1.0, 2.0, 1.0])
    assert indices.tolist() == [0, 0, 1, 1]


def test_var_mean_and_std_mean_means_follow_pytorchs_welford_update():
    # PyTorch's var_mean / std_mean take the mean by m += (x - m) / k: an infinity followed by anything is NaN
    x = cpu(np.array([[1.0, inf, 0.0, 2.0], [1.0, 0.0, 2.0, inf], [1.0, 2.0, 3.0, 6.0]]), requires_grad=True)
    for fn in (mf.var_mean, mf.std_mean):
        m = fn(x, 1)[1]
        np.testing.assert_array_equal(m.detach().numpy(), [nan, inf, 3.0])
        assert np.isnan(fn(x)[1].item()) and fn(x, 1, keepdim=True)[1].shape == (3, 1)
    assert mf.mean(x, 1).tolist()[0] == inf  # (mean itself sums)
    mf.var_mean(x, 1)[1].sum().backward()
    assert (x.grad.numpy() == 0.25).all()  # (the gradient is mean's)
