"""PyTorch's behaviour of the padding modules (a padding tuple of any length kept at construction and checked by
``F.pad`` at the call: a short one pads the last dimensions alone) and of power-average pooling of integer and
bool inputs (raised to the default float dtype by a float ``norm_type``, as ``input.pow`` does). Expected values
are NumPy float64 computations (``numpy.pad``, window sums of ``x ** p``)."""
import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
from minifused import nn
from tolerances import cpu


# ---------------------------------------------------------------- padding modules
def _ramp(*shape):
    return np.arange(np.prod(shape), dtype=np.float32).reshape(shape)


@pytest.mark.parametrize("make,shape,np_pad,np_mode", [
    # a 2-tuple pads the last dimension alone, whatever the module's own dimension count
    (lambda: nn.ZeroPad2d((1, 2)), (1, 1, 4, 4), [(0, 0), (0, 0), (0, 0), (1, 2)], "constant"),
    (lambda: nn.ZeroPad3d([2, 0]), (1, 2, 2, 3, 3), [(0, 0)] * 4 + [(2, 0)], "constant"),
    (lambda: nn.ReplicationPad1d((1, 0, 0, 2)), (2, 3, 4), [(0, 0), (0, 2), (1, 0)], "edge"),
    (lambda: nn.ReflectionPad2d((1, 1, 2, 1, 1, 0)), (1, 3, 4, 4), [(0, 0), (1, 0), (2, 1), (1, 1)], "reflect"),
    (lambda: nn.CircularPad2d((1, 2, 0, 1, 1, 1)), (1, 3, 4, 4), [(0, 0), (1, 1), (0, 1), (1, 2)], "wrap"),
    (lambda: nn.ConstantPad1d((1, 1, 1, 1, 1, 1), 0.0), (2, 3, 4), [(1, 1), (1, 1), (1, 1)], "constant"),
])
def test_a_padding_tuple_of_another_length_pads_the_last_dimensions(make, shape, np_pad, np_mode):
    x = _ramp(*shape)
    got = make()(cpu(x))
    np.testing.assert_array_equal(got.numpy(), np.pad(x.astype(np.float64), np_pad, mode=np_mode))


def test_a_constant_pad_module_with_a_short_tuple_pads_with_its_value():
    x = _ramp(1, 2, 3, 3)
    got = nn.ConstantPad2d((0, 1), -2.5)(cpu(x))
    np.testing.assert_array_equal(got.numpy(), np.pad(x.astype(np.float64), [(0, 0)] * 3 + [(0, 1)],
                                                      constant_values=-2.5))


def test_a_padding_module_keeps_its_tuple_and_shows_it():
    assert nn.ZeroPad2d((1, 2)).padding == (1, 2) and repr(nn.ZeroPad2d([1, 2])) == "ZeroPad2d((1, 2))"
    assert nn.ReflectionPad3d((1,)).padding == (1,)
    assert repr(nn.ConstantPad1d((1, 2, 3, 4), 0.5)) == "ConstantPad1d(padding=(1, 2, 3, 4), value=0.5)"
    assert nn.ZeroPad3d(2).padding == (2,) * 6


@pytest.mark.parametrize("make,shape,match", [
    (lambda: nn.ZeroPad2d((1, 2, 3)), (1, 1, 4, 4), "divisible by 2"),
    (lambda: nn.ReflectionPad2d((1,)), (1, 1, 4, 4), "divisible by 2"),
    (lambda: nn.ConstantPad1d((1,), 0.0), (1, 2, 4), "divisible by 2"),
    (lambda: nn.ReplicationPad3d((1, 1, 1, 1, 1)), (1, 1, 3, 3, 3), "divisible by 2"),
    (lambda: nn.ZeroPad1d((1,) * 8), (1, 2, 4), "at most two times the input dimension"),
    (lambda: nn.CircularPad1d((1,) * 8), (1, 2, 4), "at most two times the input dimension"),
    (lambda: nn.ReflectionPad2d((1, 2)), (1, 1, 4, 4), "reflect"),  # 4-D input: 2 or 3 dimensions padded
])
def test_a_padding_tuple_that_does_not_fit_fails_at_the_call(make, shape, match):
    module = make()  # (construction accepts it, as PyTorch's)
    with pytest.raises(RuntimeError, match=match):
        module(cpu(_ramp(*shape)))


# ---------------------------------------------------------------- power-average pooling of integer inputs
def _lp_windows(x, p, k):
    """(sum over each non-overlapping window of length k along the last axis of x ** p) ** (1 / p), float64."""
    x = np.asarray(x, np.float64)
    n = x.shape[-1] // k
    return (x[..., :n * k].reshape(*x.shape[:-1], n, k) ** p).sum(-1) ** (1.0 / p)


@pytest.mark.parametrize("dtype", [mf.int64, mf.int32, mf.uint8, mf.int8])
@pytest.mark.parametrize("p", [2.0, 1.5])
def test_lp_pool1d_of_an_integer_input_with_a_float_norm_type(dtype, p):
    x = np.array([[[2, 3, 1, 5, 4, 4, 0, 7]], [[9, 0, 0, 0, 1, 1, 6, 2]]])
    got = F.lp_pool1d(cpu(x).to(dtype), p, 2)
    assert got.dtype == mf.float32 and tuple(got.shape) == (2, 1, 4)
    np.testing.assert_allclose(got.numpy(), _lp_windows(x, p, 2), rtol=1e-6)


def test_lp_pool2d_of_uint8_and_bool_inputs_with_a_float_norm_type():
    x = np.array([[[1, 2, 3, 4], [5, 6, 7, 8], [0, 1, 0, 1], [9, 9, 2, 0]]])
    got = F.lp_pool2d(cpu(x).to(mf.uint8), 2.0, 2)
    blocks = x.reshape(1, 2, 2, 2, 2).transpose(0, 1, 3, 2, 4).reshape(1, 2, 2, 4).astype(np.float64)
    assert got.dtype == mf.float32
    np.testing.assert_allclose(got.numpy(), np.sqrt((blocks ** 2).sum(-1)), rtol=1e-6)
    b = np.array([[[True, False, True, True], [True, True, False, False]]])
    got = nn.LPPool1d(3.0, 2)(cpu(b))
    np.testing.assert_allclose(got.numpy(), _lp_windows(b, 3.0, 2), rtol=1e-6)


def test_lp_pool_of_an_int32_input_with_an_int_norm_type_is_refused():
    """``x.pow(2)`` stays int32 there, whose average pooling PyTorch does not implement either."""
    with pytest.raises(TypeError, match="avg_pool2d.*int32"):
        F.lp_pool2d(cpu(np.ones((1, 4, 4), np.int32)), 2, 2)
