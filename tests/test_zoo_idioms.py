"""Idioms of model-zoo CNN code (ResNet, MobileNet, DenseNet, U-Net and their training loops) held to PyTorch's
documented rules."""
import pytest

import minifused as mf


def test_repr_of_an_empty_tensor_names_its_shape_and_non_default_dtype():
    # PyTorch's rule: with no values to show, the shape is printed unless it is (0,), and the dtype unless it
    # is the default one (an empty int64 tensor cannot be told from a float one by its values)
    assert repr(mf.zeros(1, 1, 0, 1)) == "tensor([], size=(1, 1, 0, 1))"
    assert repr(mf.zeros(0)) == "tensor([])"
    assert repr(mf.zeros(0, dtype=mf.int64)) == "tensor([], dtype=int64)"
    assert repr(mf.zeros(2, 0, dtype=mf.float64)) == "tensor([], size=(2, 0), dtype=float64)"
    assert repr(mf.zeros(2, 0, requires_grad=True)) == "tensor([], size=(2, 0), requires_grad=True)"
    assert repr(mf.nn.AdaptiveAvgPool2d((0, 1))(mf.zeros(1, 1, 4, 4))) == "tensor([], size=(1, 1, 0, 1))"


def test_bernoulli_refuses_probabilities_outside_0_1_naming_the_value():
    # stochastic depth's noise, torch.empty(shape).bernoulli_(keep_prob), with a drop rate above 1: PyTorch's words
    with pytest.raises(ValueError, match=r"^bernoulli_ expects p to be in \[0, 1\], but got p=1.5$"):
        mf.empty(4, 1, 1, 1).bernoulli_(1.5)
    with pytest.raises(ValueError, match=r"but got p=nan"):
        mf.empty(2).bernoulli_(float("nan"))
    with pytest.raises(ValueError, match=r"^bernoulli: probabilities must lie in \[0, 1\], got -0.25 in p$"):
        mf.bernoulli(mf.tensor([0.5, -0.25, 2.0]))
    assert mf.empty(3).bernoulli_(1.0).tolist() == [1.0, 1.0, 1.0]  # the bounds themselves are valid
    assert mf.empty(3).bernoulli_(mf.zeros(3)).tolist() == [0.0, 0.0, 0.0]
