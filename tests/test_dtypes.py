"""minifused.dtype: the dtype objects users see, PyTorch's torch.dtype over NumPy's dtypes."""
import copy
import io
import pickle

import ml_dtypes
import numpy as np
import pytest

import minifused as mf

NAMES = ["float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16", "int32", "int64", "bool"]


def test_each_dtype_answers_as_pytorchs():
    torch = pytest.importorskip("torch")
    for name in NAMES:
        ours, theirs = getattr(mf, name), getattr(torch, name)
        assert isinstance(ours, mf.dtype)
        assert (ours.is_floating_point, ours.is_complex, ours.is_signed, ours.itemsize) == (
            theirs.is_floating_point, theirs.is_complex, theirs.is_signed, theirs.itemsize), name
        assert repr(ours) == repr(theirs).replace("torch.", "minifused.")


def test_attributes_follow_the_numpy_dtype():
    for name in NAMES:
        d = getattr(mf, name)
        np_dtype = np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)
        assert d.is_floating_point == (name in ("float16", "bfloat16", "float32", "float64"))
        assert d.is_signed == (name not in ("uint8", "bool"))
        assert not d.is_complex
        assert d.itemsize == np_dtype.itemsize
        assert (d.kind, d.name, d.char, d.type, d.str) == (np_dtype.kind, np_dtype.name, np_dtype.char,
                                                            np_dtype.type, np_dtype.str)
        assert d.to_real() is d
        assert str(d) == np_dtype.name and repr(d) == f"minifused.{np_dtype.name}"


def test_a_tensors_dtype_is_the_one_object():
    x = mf.zeros(3, dtype=mf.float16, device="cpu")
    assert x.dtype is mf.float16 and isinstance(x.dtype, mf.dtype)
    assert x.float().dtype is mf.float32 and x.to(mf.bfloat16).dtype is mf.bfloat16
    assert mf.tensor([1, 2], device="cpu").dtype is mf.int64 and mf.tensor([True], device="cpu").dtype is mf.bool
    assert (mf.float, mf.half, mf.double, mf.long, mf.int) == (mf.float32, mf.float16, mf.float64, mf.int64,
                                                               mf.int32)
    assert mf.float is mf.float32 and mf.bool_ is mf.bool


def test_equal_and_hashed_as_numpys_dtype():
    d, np_d = mf.float32, np.dtype(np.float32)
    assert d == np_d and np_d == d and d == np.float32 and d == "float32"
    assert d != mf.float16 and d != np.float64 and not (d != np_d)
    assert hash(d) == hash(np_d)
    assert {np_d: "a"}[d] == "a" and {d: "b"}[np_d] == "b"
    assert d in (np.float16, np.float32) and mf.bfloat16 in {np.dtype(ml_dtypes.bfloat16)}


def test_numpy_takes_it_wherever_a_dtype_goes():
    assert np.zeros(2, mf.bfloat16).dtype == np.dtype(ml_dtypes.bfloat16)
    assert np.ones(2).astype(mf.float16).dtype == np.float16
    assert np.dtype(mf.int32) is np.dtype(np.int32)
    assert np.result_type(mf.float16, np.float32) == np.float32
    assert np.issubdtype(mf.int64, np.integer) and np.finfo(mf.float16).eps == np.finfo(np.float16).eps


def test_pickled_copied_and_saved_as_the_one_object(tmp_path):
    for d in (mf.float32, mf.bfloat16, mf.int64):
        assert pickle.loads(pickle.dumps(d)) is d
        assert copy.copy(d) is d and copy.deepcopy(d) is d
    buf = io.BytesIO()
    mf.save({"dtype": mf.bfloat16, "w": mf.ones(2, dtype=mf.float16, device="cpu")}, buf)
    buf.seek(0)
    back = mf.load(buf)
    assert back["dtype"] is mf.bfloat16 and back["w"].dtype is mf.float16


def test_functions_that_answer_a_dtype_answer_one():
    assert mf.get_default_dtype() is mf.float32
    mf.set_default_dtype(mf.float64)
    try:
        assert mf.get_default_dtype() is mf.float64
        assert mf.tensor([1.0], device="cpu").dtype is mf.float64
    finally:
        mf.set_default_dtype(mf.float32)
    assert mf.promote_types(mf.float16, mf.bfloat16) is mf.float32
    assert mf.result_type(mf.ones(2, dtype=mf.float16, device="cpu"), 1.5) is mf.float16
    assert mf.get_autocast_dtype("cpu") is mf.bfloat16
    with mf.autocast("cpu", dtype=mf.bfloat16):
        assert mf.get_autocast_dtype("cpu") is mf.bfloat16
        y = mf.nn.functional.linear(mf.ones(2, 3, device="cpu"), mf.ones(4, 3, device="cpu"))
    assert y.dtype is mf.bfloat16


def test_an_ema_over_the_state_dict_updates_the_floating_entries():
    # the EMA of YOLOv5 / timm-style training loops: only floating entries of the state dict are averaged
    model = mf.nn.Sequential(mf.nn.Linear(3, 4), mf.nn.BatchNorm1d(4)).to("cpu")
    ema = copy.deepcopy(model)
    with mf.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    model.train()
    model(mf.tensor(np.random.RandomState(0).randn(5, 3).astype(np.float32), device="cpu"))
    before = {k: v.numpy().copy() for k, v in ema.state_dict().items()}
    msd, decay = model.state_dict(), 0.9
    with mf.no_grad():
        for k, v in ema.state_dict().items():
            if v.dtype.is_floating_point:
                v.mul_(decay).add_((1 - decay) * msd[k].detach())
    after = ema.state_dict()
    for k, v in after.items():
        if k.endswith("num_batches_tracked"):
            assert v.dtype is mf.int64 and v.item() == before[k]  # not floating: left alone
        else:
            np.testing.assert_allclose(v.numpy(), decay * before[k] + (1 - decay) * msd[k].numpy(), rtol=1e-6)


def test_bad_dtype_arguments_still_named():
    x = mf.zeros(2, device="cpu")
    with pytest.raises(TypeError, match="to_dense"):
        x.to_dense("float32")
    with pytest.raises(TypeError, match="set_autocast_dtype"):
        mf.set_autocast_dtype("cpu", mf.int32)


@pytest.mark.gpu
def test_cupy_takes_it_and_cuda_tensors_answer_it():
    import cupy

    assert cupy.zeros(2, mf.bfloat16).dtype == np.dtype(ml_dtypes.bfloat16)
    assert cupy.ones(2).astype(mf.float16).dtype == np.float16
    x = mf.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device="cuda")
    assert x.dtype is mf.float32 and x.to(mf.bfloat16).dtype is mf.bfloat16 and x.half().dtype is mf.float16
    assert mf.zeros(2, dtype=mf.float16, device="cuda").dtype is mf.float16
    layer = mf.nn.Linear(3, 4).to("cuda")
    with mf.autocast("cuda", dtype=mf.bfloat16):
        y = layer(x)
    assert y.dtype is mf.bfloat16
    y.float().sum().backward()
    assert layer.weight.grad.dtype is mf.float32
    expected = np.ones((4, 1), np.float32) * x.cpu().numpy().astype(ml_dtypes.bfloat16).astype(np.float32).sum(0)
    np.testing.assert_allclose(layer.weight.grad.cpu().numpy(), expected, rtol=1e-2)
