"""``out=`` on the top-level arithmetic, products and joins, by PyTorch's rules: the result written into ``out``
(resized, with a warning where it had elements; cast to its dtype where the result casts), ``out`` returned,
refused where autograd would have to record it; and ``Size``, what ``shape`` and ``size()`` return."""
import pickle

import numpy as np
import pytest

import minifused as mf
from tolerances import cpu


def test_out_receives_the_result_and_is_returned():
    a, b = cpu(np.arange(6.0).reshape(2, 3)), cpu(np.ones((3, 2)))
    out = mf.zeros(2, 2, device="cpu")
    assert mf.matmul(a, b, out=out) is out
    np.testing.assert_array_equal(out.numpy(), a.numpy() @ b.numpy())
    for name, ref in (("add", a.numpy() + 2), ("sub", a.numpy() - 2), ("mul", a.numpy() * 2),
                      ("div", a.numpy() / 2)):
        out = mf.empty(2, 3, device="cpu")
        getattr(mf, name)(a, 2, out=out)
        np.testing.assert_array_equal(out.numpy(), ref)
    wide = mf.empty(2, 3, device="cpu", dtype=mf.float64)  # (a float32 result cast into float64)
    mf.add(a, a, alpha=2, out=wide)
    assert wide.dtype == mf.float64 and wide.tolist() == (a.numpy() * 3).tolist()
    empty = mf.empty(0, device="cpu")
    mf.cat([cpu([1.0, 2.0]), cpu([3.0])], out=empty)
    assert empty.tolist() == [1.0, 2.0, 3.0]


def test_out_resized_with_a_warning_and_refusals():
    small = mf.ones(2, device="cpu")
    with pytest.warns(UserWarning, match=r"resized since it had shape \[2\]"):
        mf.add(mf.ones(3, device="cpu"), 1, out=small)
    assert small.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type int64"):
        mf.add(mf.ones(3, device="cpu"), 1, out=mf.empty(3, device="cpu", dtype=mf.int64))
    x = mf.ones(3, device="cpu", requires_grad=True)
    out = mf.zeros(3, device="cpu")
    with pytest.raises(RuntimeError, match="out=... arguments don't support automatic differentiation"):
        mf.mul(x, 2, out=out)
    assert out.tolist() == [0.0, 0.0, 0.0]
    with mf.no_grad():
        mf.mul(x, 2, out=out)
    assert out.tolist() == [2.0, 2.0, 2.0]


def test_out_on_the_elementwise_math():
    x = cpu([0.25, -1.5, 4.0])
    for name, args, ref in (("sqrt", (x.abs(),), np.sqrt([0.25, 1.5, 4.0])), ("exp", (x,), np.exp(x.numpy())),
                            ("pow", (x, 2), x.numpy() ** 2), ("remainder", (x, -1.0), [-0.75, -0.5, -0.0]),
                            ("clamp", (x, -1.0, 1.0), [0.25, -1.0, 1.0]), ("clip", (x, -1.0, 1.0), [0.25, -1.0, 1.0]),
                            ("floor", (x,), [0.0, -2.0, 4.0]),
                            ("nan_to_num", (cpu([np.nan]),), [0.0]), ("erfinv", (cpu([0.0]),), [0.0])):
        out = mf.empty(len(ref), device="cpu")
        assert getattr(mf, name)(*args, out=out) is out
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6)
    wide = mf.empty(3, device="cpu", dtype=mf.float64)  # sqrt's float32 result cast into float64 out
    mf.sqrt(x.abs(), out=wide)
    assert wide.dtype == mf.float64 and wide.tolist() == np.sqrt(np.float32([0.25, 1.5, 4.0])).tolist()
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type int64"):
        mf.exp(x, out=mf.empty(3, device="cpu", dtype=mf.int64))
    # abs, neg, the rounding ops, clamp, nan_to_num, heaviside: out in the result's dtype only, as PyTorch's
    for fn in (mf.abs, mf.neg, mf.floor, mf.round, mf.sign, mf.nan_to_num):
        with pytest.raises(RuntimeError, match="Found dtype float64 but expected float32"):
            fn(x, out=wide)
    flags = mf.empty(3, device="cpu", dtype=mf.bool)
    assert mf.signbit(x, out=flags) is flags and flags.tolist() == [False, True, False]
    with pytest.raises(RuntimeError, match="Found dtype float32 but expected bool"):
        mf.isposinf(x, out=mf.empty(3, device="cpu"))
    mf.float_power(x, 2, out=wide)
    assert wide.tolist() == [0.0625, 2.25, 16.0]
    with pytest.raises(RuntimeError, match="Found dtype float32 but expected float64"):
        mf.float_power(x, 2, out=mf.empty(3, device="cpu"))


def test_size_is_a_tuple_that_knows_its_numel_and_prints_as_a_size():
    x = mf.zeros(4, 1, 3, device="cpu")
    s = x.size()
    assert isinstance(s, mf.Size) and isinstance(x.shape, tuple) and s == (4, 1, 3) and x.shape == s
    assert s.numel() == 12 and mf.Size([]).numel() == 1 and repr(s) == "minifused.Size([4, 1, 3])"
    assert isinstance(s[1:], mf.Size) and s[1:] == (1, 3) and s[-1] == 3 and type(s[0]) is int
    assert isinstance(s + (2,), mf.Size) and s + (2,) == (4, 1, 3, 2) and isinstance(s * 2, mf.Size)
    assert mf.Size([mf.tensor(2), 3]) == (2, 3) and pickle.loads(pickle.dumps(s)) == s
    with pytest.raises(TypeError):
        mf.Size([2.5])


def test_legacy_constructors_read_a_size_as_sizes():
    pred = mf.full((4, 1), 0.3, device="cpu")
    target = mf.FloatTensor(pred.size()).fill_(1.0)  # (a GAN loss's target: a (2,) tensor of data before)
    assert target.shape == (4, 1) and target.tolist() == [[1.0]] * 4
    assert mf.Tensor(mf.Size([5])).shape == (5,) and mf.Tensor(pred.shape).shape == (4, 1)
    assert mf.FloatTensor((4, 1)).tolist() == [4.0, 1.0]  # a plain tuple stays data, as PyTorch's
