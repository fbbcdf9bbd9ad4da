"""PyTorch's surface details: how float tensors print (whole numbers as ``1.``, otherwise ``precision`` digits each,
bfloat16 as a float), the key order of Adam's state (``step`` first), and which shape ops return the tensor itself
(``flatten`` over one dim) or a view of it (``squeeze`` with nothing to squeeze)."""
import minifused as mf


def test_float_tensors_print_as_pytorch():
    assert repr(mf.tensor([1.0, 2.5])) == "tensor([1.0000, 2.5000])"
    assert repr(mf.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(mf.tensor([1e-8, 3.0])) == "tensor([1.0000e-08, 3.0000e+00])"
    assert repr(mf.tensor([float("nan"), 1.5, float("inf")])) == "tensor([   nan, 1.5000,    inf])"
    assert repr(mf.tensor(3.14159)) == "tensor(3.1416)"
    assert repr(mf.tensor([[1.25, -2.0], [3.0, 4.0]])) == "tensor([[ 1.2500, -2.0000],\n        [ 3.0000,  4.0000]])"
    assert repr(mf.tensor(2.0, dtype=mf.bfloat16)) == "tensor(2., dtype=bfloat16)"
    assert repr(mf.tensor([1.0, 2.5], dtype=mf.bfloat16)) == "tensor([1.0000, 2.5000], dtype=bfloat16)"
    assert repr(mf.tensor([1, 2])) == "tensor([1, 2])"


def test_adam_state_keys_in_pytorchs_order():
    p = mf.nn.Parameter(mf.ones(2))
    for opt, keys in ((mf.optim.Adam([p], amsgrad=True), ["step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"]),
                      (mf.optim.AdamW([p]), ["step", "exp_avg", "exp_avg_sq"])):
        p.grad = mf.ones(2)
        opt.step()
        assert list(opt.state[p].keys()) == keys
        assert int(opt.state[p]["step"].item()) == 1


def test_squeeze_views_and_flatten_of_one_dim_is_the_tensor():
    x, y = mf.ones(3), mf.ones(2, 3)
    s = x.squeeze()
    assert s is not x and s._base is x
    s[0] = 5.0
    assert float(x[0].item()) == 5.0
    assert x.flatten() is x and y.flatten(1, 1) is y
    assert tuple(mf.ones(()).flatten().shape) == (1,)
    assert tuple(y.flatten().shape) == (6,) and y.flatten()._base is y
