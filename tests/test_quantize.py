"""Fake quantization (``fake_quantize_per_tensor_affine`` / ``fake_quantize_per_channel_affine``) against
PyTorch 2.13's CPU results: the small cases' values and straight-through gradients below are PyTorch's, exact
(ties to even, the float32 reciprocal, NaN and infinities as its kernels convert them)."""
import math

import numpy as np
import pytest

import minifused as mf

NAN, INF = math.nan, math.inf


def test_per_tensor_values_and_gradient():
    x = mf.tensor([0.05, 0.15, -0.25, 0.35, 1.0, -1.0, NAN, INF, -INF], requires_grad=True)
    y = mf.fake_quantize_per_tensor_affine(x, 0.1, 2, -8, 7)
    y.backward(mf.ones(9))
    expected = np.float32([0.0, 0.2, -0.2, 0.4, 0.5, -1.0, -1.0, 0.5, -1.0])
    np.testing.assert_array_equal(y.detach().numpy(), expected)
    np.testing.assert_array_equal(x.grad.numpy(), [1, 1, 1, 1, 0, 1, 0, 0, 0])


@pytest.mark.parametrize("dtype, expected", [("float64", [0.0, 0.20000000298023224]),  # the product in float32
                                             ("float16", [0.0, 0.199951171875])])
def test_per_tensor_other_dtypes(dtype, expected):
    x = mf.tensor([0.05, 0.15], dtype=getattr(mf, dtype))
    y = mf.fake_quantize_per_tensor_affine(x, 0.1, 0, -8, 7)
    assert y.dtype == x.dtype
    assert y.tolist() == expected


def test_per_tensor_tensor_qparams_match_numbers():
    x = mf.from_numpy(np.random.RandomState(0).randn(4, 5).astype(np.float32))
    a = mf.fake_quantize_per_tensor_affine(x, 0.07, 3, 0, 15)
    b = mf.fake_quantize_per_tensor_affine(x, mf.tensor(0.07), mf.tensor(3), 0, 15)
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_per_channel_values_and_gradient():
    x = mf.tensor([[0.3, 0.3, 0.3], [-0.7, 0.6, INF], [0.05, -0.2, 2.0]], requires_grad=True)
    y = mf.fake_quantize_per_channel_affine(x, mf.tensor([0.1, 0.25, 0.5]), mf.tensor([0, 1, -1], dtype=mf.int32),
                                            1, -2, 2)
    y.backward(mf.ones(3, 3))
    np.testing.assert_array_equal(y.detach().numpy(), np.float32([[0.2, 0.25, 0.5], [-0.2, 0.25, -0.5],
                                                                   [0.0, -0.25, 1.5]]))
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 1, 1], [0, 0, 0], [1, 1, 0]])


def test_per_channel_floating_zero_point_rounds_after_adding_it():
    x = mf.tensor([[0.3, 0.3, 0.3], [-0.7, 0.6, INF], [0.05, -0.2, 2.0]])
    y = mf.fake_quantize_per_channel_affine(x, mf.tensor([0.1, 0.25, 0.5]), mf.tensor([0.5, 0.0, 0.0]), 0, -8, 7)
    np.testing.assert_array_equal(y.numpy(), np.float32([[0.35, 0.35, 0.35], [-0.75, 0.5, -2.0], [0.0, 0.0, 2.0]]))


def test_straight_through_gradient_differentiates_again():
    x = mf.tensor([0.12, 3.0, -0.31], requires_grad=True)
    (g,) = mf.autograd.grad(mf.fake_quantize_per_tensor_affine(x, 0.1, 0, -8, 7).sum(), x, create_graph=True)
    assert g.tolist() == [1.0, 0.0, 1.0]
    (gg,) = mf.autograd.grad((g * x).sum(), x)
    assert gg.tolist() == [1.0, 0.0, 1.0]


def _fq_channel(x, scale=None, zero_point=None, axis=1, qmin=-8, qmax=7):
    scale = mf.full((3,), 0.1) if scale is None else scale
    zero_point = mf.zeros(3, dtype=mf.int32) if zero_point is None else zero_point
    return mf.fake_quantize_per_channel_affine(x, scale, zero_point, axis, qmin, qmax)


X = mf.zeros(2, 3)
BAD = [
    (lambda: mf.fake_quantize_per_tensor_affine(X, 0.1, 0, 7, -8), RuntimeError, "quant_min"),
    (lambda: mf.fake_quantize_per_tensor_affine(X, 0.1, 9, -8, 7), RuntimeError, "zero_point"),
    (lambda: mf.fake_quantize_per_tensor_affine(X.long(), 0.1, 0, -8, 7), NotImplementedError, "floating-point"),
    (lambda: mf.fake_quantize_per_tensor_affine(X, 0.1, 0.5, -8, 7), TypeError, "zero_point"),
    (lambda: mf.fake_quantize_per_tensor_affine(X, mf.tensor(0.1), 0, -8, 7), TypeError, "both numbers"),
    (lambda: mf.fake_quantize_per_tensor_affine(X, mf.tensor([0.1, 0.2]), mf.tensor([0, 0]), -8, 7), RuntimeError,
     "one element"),
    (lambda: mf.fake_quantize_per_tensor_affine(X, mf.tensor(0.1, requires_grad=True), mf.tensor(0), -8, 7),
     RuntimeError, "no gradient"),
    (lambda: _fq_channel(X, zero_point=mf.zeros(3, dtype=mf.int64)), TypeError, "int32, float32 or float16"),
    (lambda: _fq_channel(X, scale=mf.full((3,), 0.1, dtype=mf.float64)), TypeError, "float32 or bfloat16"),
    (lambda: _fq_channel(X, axis=2), IndexError, "out of range"),
    (lambda: _fq_channel(X, axis=-1), RuntimeError, "axis"),
    (lambda: _fq_channel(X, axis=1.0), TypeError, "axis"),
    (lambda: _fq_channel(X, axis=0), RuntimeError, "input.size"),
    (lambda: _fq_channel(X, zero_point=mf.tensor([0, 9, 0], dtype=mf.int32)), RuntimeError, "zero_point"),
    (lambda: _fq_channel(X, scale=mf.full((1, 3), 0.1)), RuntimeError, "1-D"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_input(i):
    fn, exc, match = BAD[i]
    with pytest.raises(exc, match=match):
        fn()
