"""Idioms of model-zoo CNN code (ResNet, MobileNet, DenseNet, U-Net and their training loops) held to PyTorch's
documented rules."""
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
