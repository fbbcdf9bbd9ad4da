"""Tensor methods as PyTorch's where a sweep of the methods found them apart: integer pow_ / square_, a 0-d
quantile along its dim, multinomial of no rows, tensor_split's pieces written in place, view / reshape to the
tensor's own shape."""
import numpy as np
import pytest

import minifused as mf
from tolerances import cpu


def test_pow_inplace_integer_tensor_of_negative_exponents():
    base, exp = np.array([2, -3, 1, -1, 0, 5, -1]), np.array([-1, -1, -2, -3, 2, 3, -4])
    x = cpu(base)
    out = x.pow_(cpu(exp))
    assert out is x and x.dtype == mf.int64
    # integer powers: 1 for a base of 1, +-1 for -1 by the exponent's parity, 0 for other bases
    np.testing.assert_array_equal(x.numpy(), [0, 0, 1, -1, 0, 125, 1])
    with pytest.raises(RuntimeError, match="negative integer powers"):
        cpu(base).pow_(-1)  # (a negative number as the exponent is still refused)


def test_square_inplace_keeps_integers():
    base = np.array([[2, -3, 0], [7, -1, 4]])
    x = cpu(base)
    v = x.t()
    out = v.square_()
    assert out is v and x.dtype == mf.int64
    np.testing.assert_array_equal(x.numpy(), base * base)
    f = cpu([1.5, -2.0])
    np.testing.assert_allclose(f.square_().numpy(), [2.25, 4.0])
    with pytest.raises(RuntimeError, match="square_"):
        cpu([True, False]).square_()


def test_quantile_of_0d_along_dim_is_0d():
    x = cpu(np.float64(2.5))
    for keepdim in (False, True):
        out = x.quantile(0.7, 0, keepdim=keepdim)
        assert out.shape == () and float(out) == 2.5
    out = x.quantile(cpu([0.2, 0.5], dtype=mf.float64), 0, keepdim=True)
    assert out.shape == (2,)
    np.testing.assert_array_equal(out.numpy(), [2.5, 2.5])


def test_multinomial_of_no_rows():
    w = mf.empty(0, 3, device="cpu")
    for replacement, n in ((True, 4), (False, 2)):
        out = w.multinomial(n, replacement)
        assert out.shape == (0, n) and out.dtype == mf.int64


@pytest.mark.parametrize("split", [lambda y: y.tensor_split(3, 1)[2], lambda y: y.hsplit(3)[2],
                                   lambda y: y.vsplit([1, 3])[1]])
def test_tensor_split_piece_written_in_place(split):
    rng = np.random.default_rng(0)
    a0 = rng.standard_normal((4, 6))
    a = cpu(a0, requires_grad=True)
    y = a * 2
    piece = split(y)
    piece.mul_(3.0)  # reaches y, and y's gradient, as a slice written in place does
    (y ** 2).sum().backward()
    mask = np.zeros((4, 6), bool)
    mask[(slice(None), slice(4, 6)) if piece.shape == (4, 2) else (slice(1, 3), slice(None))] = True
    scale = np.where(mask, 3.0, 1.0)
    np.testing.assert_allclose(y.detach().numpy(), 2 * a0 * scale, rtol=1e-12)
    # d/da sum((2 a s)^2) = 8 a s^2
    np.testing.assert_allclose(a.grad.numpy(), 8 * a0 * scale ** 2, rtol=1e-12)


def test_view_and_reshape_to_own_shape_are_new_tensors():
    w = cpu(np.arange(6.0).reshape(2, 3), requires_grad=True)
    for v in (w.view(2, 3), w.view_as(w), w.reshape(2, 3), w.reshape_as(w)):
        assert v is not w and not v.is_leaf
        (v * cpu(np.full((2, 3), 2.0))).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.full((2, 3), 8.0))
    x = cpu(np.zeros(3))
    y = x.view(3)
    y.add_(1.0)  # a view: the write reaches x
    np.testing.assert_array_equal(x.numpy(), [1.0, 1.0, 1.0])


def test_pow_inplace_of_bool_by_tensor_refused():
    x = cpu([True, False])
    with pytest.raises(NotImplementedError, match="pow_"):
        x.pow_(cpu([True, True]))
    np.testing.assert_array_equal(x.numpy(), [True, False])  # (nothing written)
    np.testing.assert_array_equal(cpu([True, False]).pow_(True).numpy(), [True, False])
