"""Idioms of metric learning, distillation and graph training loops: what their ops keep for backward (a result
changed in place before backward), their gradients and their messages for bad input."""
import numpy as np
import pytest

import minifused as mf


def _leaf(values):
    return mf.tensor(np.asarray(values, np.float32), requires_grad=True)


def test_pow_result_changed_in_place_keeps_its_gradient():
    # a GCN's degree normalisation: d = deg.pow(-0.5); d[isinf(d)] = 0. PyTorch's pow keeps its input, not its
    # result, for the base's gradient, so the write is allowed and the gradient is -0.5 * deg ** -1.5 (times the 0
    # that reaches the overwritten entry: NaN there, 0 * -inf)
    deg = _leaf([0.0, 1.0, 4.0, 0.25])
    d = deg.pow(-0.5)
    d[mf.isinf(d)] = 0.0
    (d * mf.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    x = np.array([1.0, 4.0, 0.25])
    np.testing.assert_allclose(deg.grad.numpy()[1:], -0.5 * x ** -1.5 * [2.0, 3.0, 4.0], rtol=1e-6)
    assert np.isnan(deg.grad.numpy()[0])


@pytest.mark.parametrize("exponent", [2, 3, 0.5])
def test_pow_by_a_number_result_changed_in_place(exponent):
    x = _leaf([0.5, 1.5, 2.0])
    y = x ** exponent
    y.mul_(3)
    y.sum().backward()
    base = np.array([0.5, 1.5, 2.0])
    np.testing.assert_allclose(x.grad.numpy(), 3 * exponent * base ** (exponent - 1), rtol=1e-6)


def test_pow_keeps_its_result_for_the_exponents_gradient():
    # d/db a ** b = a ** b * log a reads the result: a write to it must make that backward raise
    b = _leaf([1.0, 2.0])
    y = mf.tensor([2.0, 3.0]) ** b
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()


def test_xlogy_result_changed_in_place_keeps_its_gradient():
    # PyTorch's xlogy keeps its operands only: d/da = log b, d/db = a / b
    a, b = _leaf([0.5, 2.0]), _leaf([3.0, 0.25])
    y = mf.xlogy(a, b)
    y.mul_(2)
    y.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 2 * np.log([3.0, 0.25]), rtol=1e-6)
    np.testing.assert_allclose(b.grad.numpy(), 2 * np.array([0.5 / 3.0, 2.0 / 0.25]), rtol=1e-6)


def test_copysign_keeps_its_result():
    # PyTorch's copysign reads its result (y / a) for the gradient: a write to it makes the backward raise
    a = _leaf([1.0, -2.0])
    y = mf.copysign(a, mf.tensor([-1.0, 1.0]))
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()


@pytest.mark.parametrize("shapes, message", [
    (((4,), (4,), (1,)), r"1D target tensor expects 2D input tensors, but found inputs with sizes \[4\] and \[4\]"),
    (((3, 4), (4,), (3,)), r"1D target tensor expects 2D input tensors, but found inputs with sizes \[3, 4\] and \[4\]"),
    (((2, 3), (2, 3), ()), r"0D target tensor expects 1D input tensors"),
    (((2, 3, 4), (2, 3, 4), (2, 3)), "0D or 1D target tensor expected, multi-target not supported"),
    (((3, 4), (2, 4), (3,)), r"expected two inputs of one shape, got \(3, 4\) and \(2, 4\)"),
])
def test_cosine_embedding_loss_names_the_ranks_it_expects(shapes, message):
    a, b, y = (mf.ones(*s) if s else mf.tensor(1.0) for s in shapes)
    with pytest.raises(RuntimeError, match="cosine_embedding_loss: " + message):
        mf.nn.functional.cosine_embedding_loss(a, b, y)
