"""Creating tensors as PyTorch does: the dtype ``tensor()`` infers from NumPy scalars, arrays and tensors inside
lists (promoted together, never through NumPy's own inference), the overflow checks of the values it writes into
integer dtypes, ``from_numpy``'s refusals (negative strides, a foreign byte order, dtypes that are not numbers), and
the fill values ``full`` / ``full_like`` / ``new_full`` and linspace's bounds refuse. Expected values are worked out
by hand from PyTorch's documented rules (and checked against PyTorch 2.x)."""
import importlib
import warnings

import numpy as np
import pytest

import minifused as mf
from minifused import backend
from tolerances import cpu

INT64_MAX = 2 ** 63 - 1


def _is(t, dtype, values, shape=None):
    assert t.dtype == dtype, (t.dtype, dtype)
    if shape is not None:
        assert tuple(t.shape) == shape
    np.testing.assert_array_equal(t.numpy(), np.asarray(values, dtype=dtype))


# ---------------------------------------------------------------- tensor(): the inferred dtype
def test_tensor_keeps_numpy_scalar_dtypes_alone_and_in_lists():
    """A NumPy scalar has its own dtype, at the top level and in a list (promoted with the others: a Python float
    counts as float32, an int as int64)."""
    _is(cpu(np.int8(1)), mf.int8, 1, ())
    _is(cpu(np.float16(0.1)), mf.float16, np.float16(0.1), ())
    _is(cpu([np.float64(0.1)]), mf.float64, [0.1])  # exactly 0.1, not rounded through float32
    _is(cpu([np.float32(0.1), np.float64(1.0)]), mf.float64, [np.float32(0.1), 1.0])
    _is(cpu([np.float16(0.1), 1.0]), mf.float32, [np.float16(0.1), 1.0])  # float16 with float32: float32
    _is(cpu([np.float16(0.1), 1]), mf.float16, [np.float16(0.1), 1.0])  # a float beats int64
    _is(cpu([np.int8(1), np.uint8(2)]), mf.int16, [1, 2])
    _is(cpu([np.int8(1), 2]), mf.int64, [1, 2])
    _is(cpu([np.int32(1), np.float16(2)]), mf.float16, [1, 2])
    _is(cpu([True, 1]), mf.int64, [1, 1])
    _is(cpu([np.bool_(True)]), mf.bool, [True])
    _is(mf.as_tensor([np.float64(0.1)], device="cpu"), mf.float64, [0.1])
    _is(mf.as_tensor(np.int8(3), device="cpu"), mf.int8, 3, ())
    old = mf.get_default_dtype()
    try:
        mf.set_default_dtype(mf.float16)  # Python floats count as the default dtype
        _is(cpu([0.5, np.float32(0.1)]), mf.float32, [0.5, np.float32(0.1)])
    finally:
        mf.set_default_dtype(old)


def test_tensor_keeps_the_dtype_of_arrays_in_a_list():
    _is(cpu([np.array([0.1])]), mf.float64, [[0.1]], (1, 1))
    _is(cpu([np.ones(2, np.uint8)]), mf.uint8, [[1, 1]], (1, 2))
    _is(cpu([np.ones(1, np.uint8), np.ones(1, np.int8)]), mf.int16, [[1], [1]])
    _is(cpu([1.0, np.array(2.0)]), mf.float64, [1.0, 2.0])  # a 0-d array is one number of its dtype
    _is(cpu([np.zeros(0, np.int8)]), mf.int8, np.zeros((1, 0)), (1, 0))
    _is(cpu([[], np.zeros(0, np.int8)]), mf.float32, np.zeros((2, 0)), (2, 0))  # an empty list: the default dtype
    t = cpu([np.arange(3, dtype=">i4")])  # (a foreign byte order: in the machine's)
    _is(t, mf.int32, [[0, 1, 2]])
    assert t._data.dtype.isnative


def test_tensor_takes_one_element_tensors_in_a_list_as_numbers_of_their_dtype():
    h = cpu([1.0], dtype=mf.float16)
    _is(cpu([h, h]), mf.float16, [1.0, 1.0], (2,))  # each tensor is one number, not a row
    _is(cpu([cpu([[3.0]], dtype=mf.float16)]), mf.float16, [3.0], (1,))
    _is(cpu([cpu(0.1, dtype=mf.float64), 2.5]), mf.float64, [0.1, 2.5])
    _is(cpu([cpu(1.0, dtype=mf.bfloat16), cpu(1.0, dtype=mf.float16)]), mf.float32, [1.0, 1.0])
    _is(cpu([cpu(1, dtype=mf.int32), 2]), mf.int64, [1, 2])
    _is(cpu([cpu(1, dtype=mf.int32), 2.5]), mf.float32, [1.0, 2.5])
    with pytest.raises(ValueError, match="only one element tensors can be converted to Python scalars"):
        cpu([cpu([1.0, 2.0])])


# ---------------------------------------------------------------- tensor(): the values written
def test_tensor_refuses_python_ints_beyond_int64_where_it_infers_an_integer():
    for data in (2 ** 63, [2 ** 63], [2 ** 64], [1, -2 ** 63 - 1]):
        with pytest.raises(ValueError, match="too large to convert to int64 \\(Overflow when unpacking long long\\)"):
            cpu(data)
    with pytest.raises(ValueError, match="Overflow"):
        mf.as_tensor(2 ** 63, device="cpu")
    _is(cpu(-2 ** 63), mf.int64, -2 ** 63, ())
    _is(cpu([INT64_MAX]), mf.int64, [INT64_MAX])
    _is(cpu([2 ** 63], dtype=mf.float64), mf.float64, [2.0 ** 63])
    _is(cpu([2 ** 63, 1.5]), mf.float32, [2.0 ** 63, 1.5])  # a float among them: float32, where 2**63 fits
    _is(cpu([2.5, 2 ** 70]), mf.float32, [2.5, 2.0 ** 70])
    _is(cpu([2 ** 70, 0], dtype=mf.bool), mf.bool, [True, False])


def test_tensor_checks_values_written_into_integer_dtypes():
    """Into an integer dtype a value must fit (a float truncated toward zero first counts unrounded: 255.9 does
    not fit uint8); a negative int wraps into an unsigned dtype down to minus its largest value; NaN never fits.
    Floating dtypes round (past their range: infinity), and a NumPy array is cast as it is (wrapping)."""
    for data, dtype in (([300], mf.uint8), ([-256], mf.uint8), ([-1.0], mf.uint8), ([-0.5], mf.uint8),
                        ([255.9], mf.uint8), ([128], mf.int8), ([-129], mf.int8), ([127.5], mf.int8),
                        ([-128.5], mf.int8), ([1e10], mf.int32), ([2 ** 40], mf.int32), ([float("nan")], mf.int64),
                        ([float("inf")], mf.int64), ([9.3e18], mf.int64), ([0.5, 300], mf.uint8),
                        ([np.int64(300)], mf.uint8), (np.int64(300), mf.uint8), ([cpu(300)], mf.uint8)):
        with pytest.raises(RuntimeError, match=f"value cannot be converted to type {np.dtype(dtype)} without overf"):
            cpu(data, dtype=dtype)
    with pytest.raises(RuntimeError, match="without overflow"):
        mf.as_tensor([300], dtype=mf.uint8, device="cpu")
    with pytest.raises(RuntimeError, match="without overflow"):
        cpu([1], dtype=mf.int8).new_tensor([300])
    _is(cpu([-1, -255, 255], dtype=mf.uint8), mf.uint8, [255, 1, 255])
    _is(cpu([2.7, -2.7, 127.0, -128.0], dtype=mf.int8), mf.int8, [2, -2, 127, -128])
    _is(cpu([-2 ** 63, INT64_MAX], dtype=mf.int64), mf.int64, [-2 ** 63, INT64_MAX])
    _is(cpu([True, 2, 0.0, float("nan")], dtype=mf.bool), mf.bool, [True, True, False, True])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _is(cpu([1e5, 65519.0], dtype=mf.float16), mf.float16, [np.inf, 65504.0])
        _is(cpu([1e39], dtype=mf.float32), mf.float32, [np.inf])
    _is(cpu(np.array([300, -1]), dtype=mf.uint8), mf.uint8, [300 - 256, 255])


def test_tensor_wide_unsigned_and_unsupported_dtypes():
    """uint16/32/64 arrays are taken as PyTorch takes them (promoting only with floats); dtypes no tensor has,
    and data that is not numbers, are refused by name."""
    t = cpu(np.array([1, 2 ** 63], np.uint64))
    assert t.dtype == np.uint64 and t.tolist() == [1, 2 ** 63]
    _is(cpu([np.uint32(1), 1.5]), mf.float32, [1.0, 1.5])
    _is(cpu([np.uint32(1), np.uint32(2)]), np.dtype(np.uint32), [1, 2])
    with pytest.raises(TypeError, match="promotion for uint16, uint32, uint64 types is not supported"):
        cpu([np.uint16(1), np.uint8(2)])
    with pytest.raises(TypeError, match="can't convert np.ndarray of type float128"):
        cpu(np.ones(2, np.longdouble))
    with pytest.raises(TypeError, match="can't convert np.ndarray of type object"):
        cpu([np.array([1, 2], dtype=object)])
    for data, name in (([None], "NoneType"), ({1, 2}, "set"), ({1: 2}, "dict"), (None, "NoneType")):
        with pytest.raises(TypeError, match=f"could not infer dtype of {name}"):
            cpu(data)
    with pytest.raises(ValueError, match="ragged"):
        cpu([[1], [2, 3]])


# ---------------------------------------------------------------- from_numpy
def test_from_numpy_refuses_what_it_cannot_share():
    with pytest.raises(ValueError, match="negative"):
        mf.from_numpy(np.arange(3.0)[::-1])
    with pytest.raises(ValueError, match="negative"):
        mf.from_numpy(np.ones((2, 3))[:, ::-1])
    with pytest.raises(ValueError, match="byte order different from the native byte order"):
        mf.from_numpy(np.arange(3, dtype=">i4"))
    for a in (np.array([1, "a"], dtype=object), np.array(["a"]), np.zeros(2, np.longdouble)):
        with pytest.raises(TypeError, match="can't convert np.ndarray of type"):
            mf.from_numpy(a)
    odd = np.ndarray((2,), dtype=np.float32, buffer=np.zeros(12, np.uint8), strides=(6,))
    with pytest.raises(ValueError, match="not a multiple of the element byte size"):
        mf.from_numpy(odd)
    a = np.arange(6.0).reshape(2, 3)[:, ::2]  # positive strides, a view: shared
    t = mf.from_numpy(a)
    a[1, 1] = -7.0
    assert t.tolist() == [[0.0, 2.0], [3.0, -7.0]]
    assert mf.from_numpy(np.ones(2, backend.bfloat16)).dtype == mf.bfloat16
    assert mf.from_numpy(np.arange(3, dtype="<i4")).tolist() == [0, 1, 2]


# ---------------------------------------------------------------- full, full_like, new_full, linspace, logspace
def test_full_refuses_fill_values_its_dtype_cannot_hold():
    """PyTorch checks a fill value against an integer dtype's range (a float unrounded; NaN never fits; a negative
    int wraps into an unsigned dtype) and against float32's, not float16's or bfloat16's (they fill infinity)."""
    cases = [(lambda: mf.full((1,), 300, dtype=mf.uint8), "uint8"),
             (lambda: mf.full((0,), 300, dtype=mf.uint8), "uint8"),
             (lambda: mf.full((1,), 255.5, dtype=mf.uint8), "uint8"),
             (lambda: mf.full((1,), -1.0, dtype=mf.uint8), "uint8"),
             (lambda: mf.full((1,), float("nan"), dtype=mf.int32), "int32"),
             (lambda: mf.full((1,), 2 ** 31, dtype=mf.int32), "int32"),
             (lambda: mf.full((1,), 2 ** 63), "int64"),
             (lambda: mf.full((1,), 1e39), "float32"),
             (lambda: mf.full((1,), -1e39, dtype=mf.float32), "float32"),
             (lambda: mf.full((1,), cpu(300), dtype=mf.int8), "int8"),
             (lambda: mf.full((1,), np.int64(300), dtype=mf.int8), "int8"),
             (lambda: mf.full_like(cpu([1], dtype=mf.int32), 1e10), "int32"),
             (lambda: mf.full_like(cpu([1], dtype=mf.int8), cpu(300)), "int8"),
             (lambda: cpu([1], dtype=mf.int8).new_full((1,), 300), "int8")]
    for make, name in cases:
        with pytest.raises(RuntimeError, match=f"value cannot be converted to type {name} without overflow"):
            make()
    with pytest.raises(ValueError, match="int too big to convert"):
        mf.full((1,), 2 ** 64, dtype=mf.bool)
    with pytest.raises(RuntimeError, match="full_like: value cannot be converted"):
        mf.full_like(cpu([1], dtype=mf.int32), 1e10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _is(mf.full((2,), 1e5, dtype=mf.float16, device="cpu"), mf.float16, [np.inf] * 2)
        _is(mf.full((1,), 1e39, dtype=mf.bfloat16, device="cpu"), mf.bfloat16, [np.inf])
        _is(mf.full_like(cpu([1.0], dtype=mf.float16), -1e5), mf.float16, [-np.inf])
        _is(mf.full((1,), float("-inf"), device="cpu"), mf.float32, [-np.inf])
    _is(mf.full((2,), -1, dtype=mf.uint8, device="cpu"), mf.uint8, [255, 255])
    _is(mf.full_like(cpu([1], dtype=mf.uint8), -255), mf.uint8, [1])
    _is(mf.full((2,), -1.5, dtype=mf.int32, device="cpu"), mf.int32, [-1, -1])
    _is(mf.full((1,), 2 ** 63, dtype=mf.float64, device="cpu"), mf.float64, [2.0 ** 63])
    _is(mf.full((1,), 2 ** 64 - 1, dtype=mf.bool, device="cpu"), mf.bool, [True])
    _is(mf.full((1,), float("nan"), dtype=mf.bool, device="cpu"), mf.bool, [True])
    _is(cpu([1], dtype=mf.uint8).new_full((1,), -1), mf.uint8, [255])


def test_a_tensor_that_requires_grad_is_no_fill_value_or_bound():
    """PyTorch 2.13 reads a 0-d tensor as a number only where it needs no gradient: "full(): argument 'fill_value'
    (position 2) must be Number, not Tensor", "arange(): argument 'end' (position 1) must be Number, not Tensor"."""
    g = mf.tensor(0.5, requires_grad=True)
    for make, arg in ((lambda: mf.full((3,), g), "fill_value"), (lambda: mf.full_like(cpu([1, 2]), g), "fill_value"),
                      (lambda: cpu([1.0]).new_full((2,), g), "fill_value"), (lambda: mf.arange(g), "end"),
                      (lambda: mf.arange(0, 3, g), "step")):
        with pytest.raises(TypeError, match=f"argument '{arg}' must be Number, not Tensor"):
            make()
    _is(mf.full_like(cpu([1, 2]), mf.tensor(2.5)), mf.int64, [2, 2])  # (one without grad: its number)
    _is(mf.arange(mf.tensor(3), device="cpu"), mf.int64, [0, 1, 2])


def test_linspace_and_logspace_check_the_bounds_they_write():
    """Their bounds must fit the dtype (float16, bfloat16 and float32 checked too): none with 0 steps, the start
    with 1, both from 2."""
    for make in (lambda: mf.linspace(0, 300, 2, dtype=mf.uint8), lambda: mf.linspace(300, 0, 1, dtype=mf.uint8),
                 lambda: mf.linspace(0, 1e10, 2, dtype=mf.int32), lambda: mf.linspace(0, 1e5, 2, dtype=mf.float16),
                 lambda: mf.linspace(0, 1e39, 2, dtype=mf.bfloat16), lambda: mf.linspace(0, 1e39, 2),
                 lambda: mf.logspace(0, 300, 2, dtype=mf.uint8), lambda: mf.logspace(0, 1e5, 2, dtype=mf.float16)):
        with pytest.raises(RuntimeError, match="without overflow"):
            make()
    _is(mf.linspace(0, 300, 0, dtype=mf.uint8, device="cpu"), mf.uint8, [])
    _is(mf.linspace(0, 300, 1, dtype=mf.uint8, device="cpu"), mf.uint8, [0])
    _is(mf.linspace(0, 255, 2, dtype=mf.uint8, device="cpu"), mf.uint8, [0, 255])
    _is(mf.linspace(-1, 3, 2, dtype=mf.uint8, device="cpu"), mf.uint8, [255, 3])
    # a bound may be a 0-d tensor, no other (PyTorch 2.13's RuntimeError)
    _is(mf.linspace(0, mf.tensor(0.5), 3, device="cpu"), mf.float32, [0.0, 0.25, 0.5])
    with pytest.raises(RuntimeError, match=r"linspace only supports 0-dimensional start and end tensors, but got end "
                                           r"with 1 dimension\(s\)"):
        mf.linspace(0, mf.tensor([0.5]), 3)


def test_integer_dtype_casts_the_bounds_before_spacing_them():
    """For an integer dtype PyTorch casts arange's start/end/step and linspace's/logspace's start/end to it first
    (toward zero), then spaces them: arange(0.5, 3.7) is arange(0, 3); linspace(0.9, 4.9, 9) spaces 0 to 4 (the
    float values 0.9, 1.4, ... would truncate to 0, 1, 1, 2, ...); logspace's base stays a float."""
    assert mf.arange(0.5, 3.7, dtype=mf.int64).tolist() == list(range(0, 3))
    assert mf.arange(0.5, 3.7, dtype=mf.float32).tolist() == [0.5, 1.5, 2.5, 3.5]
    with pytest.raises(Exception, match="step must be nonzero"):
        mf.arange(0.5, 3.7, 0.9, dtype=mf.int64)  # (the step truncates to 0)
    assert mf.linspace(0.9, 4.9, 9, dtype=mf.int64).tolist() == np.trunc(np.linspace(0, 4, 9)).tolist()
    assert mf.linspace(-1.5, 1.5, 4, dtype=mf.int32).tolist() == np.trunc(np.linspace(-1, 1, 4)).tolist()
    assert mf.logspace(0.5, 2.5, 3, base=2.5, dtype=mf.int64).tolist() == np.trunc(2.5 ** np.arange(3.0)).tolist()
    with pytest.warns(UserWarning, match="deprecated"):
        assert mf.range(6, 2.26, -2, dtype=mf.int8).tolist() == [6, 4, 2]


@pytest.mark.parametrize("fn", [mf.zeros, mf.ones, mf.empty, mf.rand, mf.randn])
def test_creation_without_a_size_is_a_type_error_an_empty_size_a_0d_tensor(fn):
    """PyTorch's zeros() and its kin refuse a call without a size; zeros(()) (or zeros([])) is the 0-d tensor."""
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'size'"):
        fn()
    for empty in ((), []):
        t = fn(empty)
        assert t.shape == () and t.numel() == 1
    assert fn(size=()).shape == ()


def test_scalar_draws_and_legacy_constructors_of_0d_shapes():
    """What draws a 0-d tensor through the creation functions (a scalar distribution's sample, bernoulli of a 0-d
    tensor, normal with 0-d mean and std) gives one, as in PyTorch."""
    assert mf.distributions.Normal(0.0, 1.0).sample().shape == ()
    assert mf.bernoulli(mf.tensor(0.5)).shape == ()
    assert mf.normal(mf.tensor(0.0), mf.tensor(1.0)).shape == ()
    assert mf.normal(0.0, 1.0, size=()).shape == ()
    assert mf.FloatTensor(mf.Size([])).shape == ()


def test_float_of_a_tensor_that_requires_grad_warns_as_pytorch(monkeypatch):
    """float() of a tensor that requires grad, with grad mode on, warns that the number leaves the graph (PyTorch's
    words), once per process as PyTorch's (not once per call site); under no_grad, of a detached tensor, and int() /
    item() stay silent, as in PyTorch."""
    T = importlib.import_module("minifused.tensor")  # (the module: minifused.tensor is the function)
    monkeypatch.setattr(T, "_scalar_warned", [False])
    t = mf.tensor([1.5, 2.0], requires_grad=True).sum()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert float(t) == 3.5 and float(t * 2) == 7.0 and float(t + 1) == 4.5
    assert [str(w.message)[:55] for w in seen] == ["Converting a tensor with requires_grad=True to a scalar"]
    monkeypatch.setattr(T, "_scalar_warned", [False])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with mf.no_grad():
            assert float(t) == 3.5
        assert float(t.detach()) == 3.5 and int(t) == 3 and t.item() == 3.5
