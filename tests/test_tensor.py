"""Tensor creation, devices, conversions, DLPack, seeding, and bad input."""
import os
import subprocess
import sys

import numpy as np
import pytest

import minifused as mf
from minifused import backend, nn


def test_tensor_dtype_defaults():
    assert mf.tensor([1.0, 2.0]).dtype == mf.float32
    assert mf.tensor([1, 2]).dtype == mf.int64
    assert mf.tensor([True]).dtype == mf.bool
    assert mf.tensor(np.zeros(2, np.float64)).dtype == mf.float64
    assert mf.tensor([1, 2], dtype="bf16").dtype == mf.bfloat16
    assert mf.tensor(3.5).shape == ()


def test_creation_functions(device):
    assert mf.zeros(2, 3, device=device).tolist() == [[0, 0, 0], [0, 0, 0]]
    assert mf.ones((2,), dtype=mf.float16, device=device).dtype == mf.float16
    assert mf.full((2, 2), 7, device=device).tolist() == [[7, 7], [7, 7]]
    assert mf.full((1,), 1.5, device=device).dtype == mf.float32
    assert mf.empty(4, device=device).shape == (4,)
    assert mf.arange(5, device=device).tolist() == [0, 1, 2, 3, 4]
    assert mf.arange(0, 1, 0.25, device=device).tolist() == [0.0, 0.25, 0.5, 0.75]
    np.testing.assert_array_equal(mf.eye(3, device=device).cpu().numpy(), np.eye(3))
    x = mf.randn(1000, device=device)
    assert x.device == mf.device(device) and x.dtype == mf.float32
    assert abs(x.mean().item()) < 0.15 and 0.85 < x.std().item() < 1.15
    u = mf.rand(1000, device=device, dtype=mf.float64)
    assert 0 <= u.min().item() and u.max().item() < 1 and u.dtype == mf.float64
    r = mf.randint(0, 10, (1000,), device=device)
    assert r.dtype == mf.int64 and r.min().item() >= 0 and r.max().item() <= 9
    assert mf.randint(3, (5,), device=device).max().item() < 3
    like = mf.zeros_like(x)
    assert like.shape == x.shape and like.device == x.device and like.sum().item() == 0
    assert mf.ones_like(x, dtype=mf.float16).dtype == mf.float16
    assert mf.full_like(x, 2.0).sum().item() == 2000
    assert mf.randn_like(x).shape == x.shape and mf.rand_like(x).shape == x.shape
    assert mf.empty_like(x).shape == x.shape
    assert mf.randint_like(r, 5).max().item() < 5


def test_manual_seed_reproduces_both_backends(device):
    mf.manual_seed(7)
    a = mf.randn(5, device=device).cpu().numpy()
    b = mf.rand(3, device=device).cpu().numpy()
    mf.manual_seed(7)
    np.testing.assert_array_equal(mf.randn(5, device=device).cpu().numpy(), a)
    np.testing.assert_array_equal(mf.rand(3, device=device).cpu().numpy(), b)
    mf.manual_seed(8)
    assert not np.array_equal(mf.randn(5, device=device).cpu().numpy(), a)


def test_host_conversions(device):
    x = mf.tensor([[1.5, 2.0]], device=device)
    assert x.item is not None and x[0, 1].item() == 2.0
    assert x.tolist() == [[1.5, 2.0]]
    assert float(x[0, 0]) == 1.5
    assert x.cpu().numpy().dtype == np.float32
    with pytest.raises(ValueError, match="one-element"):
        x.item()
    assert "tensor(" in repr(x)


def test_to_dtype_and_device_round_trip(device):
    x = mf.tensor([1.0, 2.0], device="cpu", requires_grad=True)
    y = x.to(device).to(mf.float64) * 2
    assert y.device == mf.device(device) and y.dtype == mf.float64
    y.sum().backward()
    assert x.grad.device == mf.device("cpu") and x.grad.dtype == mf.float32
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])
    assert x.to(device="cpu", dtype="float16").dtype == mf.float16
    assert x.half().dtype == mf.float16 and x.double().dtype == mf.float64 and x.long().dtype == mf.int64


def test_to_takes_non_blocking_and_copy_and_pin_memory():
    """PyTorch's ``to(..., non_blocking, copy)`` by keyword or after the device, dtype or tensor (a training loop's
    ``x.to(device, non_blocking=True)``); ``copy=True`` gives a new tensor even where nothing changes; a loader's
    ``pin_memory()`` on a cpu tensor; Module.to takes non_blocking too."""
    x = mf.tensor([1.0, 2.0])
    assert x.to("cpu", non_blocking=True) is x and x.to("cpu", True) is x and x.to(x, non_blocking=True) is x
    y = x.to("cpu", copy=True)
    assert y is not x and y.tolist() == [1.0, 2.0]
    assert x.to("cpu", mf.float64, True, True).dtype == mf.float64
    with pytest.raises(TypeError, match="non_blocking must be a bool"):
        x.to("cpu", non_blocking=1)
    with pytest.raises(TypeError, match="come after the device"):
        x.to(True, "cpu")
    assert x.pin_memory() is x and not x.is_pinned()
    m = mf.nn.Linear(2, 2)
    assert m.to("cpu", non_blocking=True) is m and m.to("cpu", True) is m


def test_numpy_on_cpu_shares_memory_and_from_numpy():
    arr = np.arange(4, dtype=np.float32)
    t = mf.from_numpy(arr)
    arr[0] = 9
    assert t[0].item() == 9
    assert t.numpy() is arr


def test_dlpack_cpu_is_zero_copy():
    arr = np.arange(6, dtype=np.float32)
    t = mf.from_dlpack(arr)
    arr[1] = 42
    assert t[1].item() == 42
    back = np.from_dlpack(t)
    t._data[2] = -1
    assert back[2] == -1


def test_default_device_env_override():
    code = "import minifused as mf; print(mf.default_device(), mf.zeros(1).device)"
    env = dict(os.environ, MINIFUSED_DEVICE="cpu")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["cpu", "cpu"]


def test_device_block_makes_the_default_device_and_nests():
    """``with mf.device(...)``: the default device inside (PyTorch's device context), restored on leaving,
    innermost block first; a device that cannot be used is refused on entry, leaving the default as it was."""
    import threading

    outside = mf.get_default_device()
    with mf.device("cpu") as dev:
        assert dev == "cpu" and mf.get_default_device() == "cpu" and mf.zeros(1).device == "cpu"
        with mf.device("cpu"):
            assert mf.randn(2).device == "cpu"
        seen = []  # another thread keeps its own default
        worker = threading.Thread(target=lambda: seen.append(mf.get_default_device()))
        worker.start()
        worker.join()
        assert seen == [outside]
    assert mf.get_default_device() == outside
    if not mf.cuda_available():
        with pytest.raises(RuntimeError, match="no usable CUDA device"):
            with mf.device("cuda"):
                pass
        assert mf.get_default_device() == outside


@pytest.mark.gpu
def test_device_block_moves_the_default_between_cpu_and_cuda():
    with mf.device("cuda"):
        assert mf.zeros(2).device == "cuda:0"
        with mf.device("cpu"):
            assert mf.ones(2).device == "cpu"
        assert mf.empty(2).device == "cuda:0"


@pytest.mark.skipif(mf.cuda_available(), reason="only meaningful without a GPU")
def test_cuda_request_without_gpu_is_clear():
    with pytest.raises(RuntimeError, match="no usable CUDA device"):
        mf.zeros(1, device="cuda")


# ---------------------------------------------------------------- GPU-only conversions
@pytest.mark.gpu
def test_dlpack_cupy_zero_copy():
    import cupy

    c = cupy.arange(6, dtype=cupy.float32)
    t = mf.from_dlpack(c)
    assert t.device == mf.device("cuda")
    c[0] = 5
    assert t[0].item() == 5
    back = cupy.from_dlpack(t)
    back[1] = 7
    assert t[1].item() == 7


def _stride_cases(lib, device):
    """(tensor, its strides in PyTorch) over the layouts a CNN meets, built by ``lib`` (minifused or torch)."""
    x = lib.arange(120.0, device=device).reshape(2, 3, 4, 5)
    return [(x, (60, 20, 5, 1)), (x.to(memory_format=lib.channels_last), (60, 1, 15, 3)),
            (x[:, 1], (60, 5, 1)), (x[:, :, ::2, 1:], (60, 20, 10, 1)), (x.transpose(1, 3), (60, 1, 5, 20)),
            (lib.ones(3, 1, device=device).expand(3, 4), (1, 0)), (lib.zeros(0, 3, device=device), (3, 1)),
            (lib.zeros(3, 0, 2, device=device), (2, 2, 1)), (lib.tensor(5.0, device=device), ())]


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_stride_and_data_ptr_follow_pytorch(device):
    """``stride()`` gives PyTorch's element steps (contiguous, channels-last, slices, transposes, expanded
    and empty tensors, 0-d; on the GPU machine checked against PyTorch itself), ``stride(d)`` one of them
    (negative d too; out of range: IndexError, not an int: TypeError, naming the op), and ``data_ptr()`` the
    first element's address, a slice's offset from its base in bytes."""
    torch = None
    if device == "cuda":
        torch = pytest.importorskip("torch")
        for (_, want), (tt, _) in zip(_stride_cases(mf, device), _stride_cases(torch, device)):
            assert tt.stride() == want
    for t, want in _stride_cases(mf, device):
        assert t.stride() == want, (t.shape, t.stride(), want)
        for d in range(-len(want), len(want)):
            assert t.stride(d) == want[d]
        for bad in (len(want), -len(want) - 1):
            with pytest.raises(IndexError, match=rf"stride: dimension {bad} out of range for a tensor of {len(want)}"):
                t.stride(bad)
        for bad in (1.0, True):
            with pytest.raises(TypeError, match=r"stride: dimension must be an int, got (float|bool)"):
                t.stride(bad)
    x = mf.arange(24.0, device=device).reshape(4, 6)
    assert x[1:, 2:].data_ptr() - x.data_ptr() == (6 + 2) * x.element_size()
    assert x.data_ptr() == (x._data.data.ptr if device == "cuda" else x._data.ctypes.data)
    if torch is not None:  # the same memory seen through DLPack
        assert torch.from_dlpack(x[1:]).data_ptr() == x[1:].data_ptr()


@pytest.mark.gpu
def test_dlpack_torch_zero_copy():
    torch = pytest.importorskip("torch")
    tt = torch.arange(4, dtype=torch.float32, device="cuda")
    t = mf.from_dlpack(tt)
    tt[0] = 3
    torch.cuda.synchronize()
    assert t[0].item() == 3
    back = torch.from_dlpack(t)
    back[1] = 11
    torch.cuda.synchronize()
    assert t[1].item() == 11
    assert back.data_ptr() == t._data.data.ptr == t.data_ptr()


@pytest.mark.gpu
def test_cuda_default_device_and_cuda_method():
    assert mf.default_device() == "cuda" or os.environ.get("MINIFUSED_DEVICE") == "cpu"
    x = mf.ones(2).cuda()
    assert x.is_cuda and x.device == mf.device("cuda:0")
    assert x.cpu().device == "cpu"


@pytest.mark.gpu
def test_mixed_devices_error_names_both():
    a = mf.ones(2, device="cpu")
    b = mf.ones(2, device="cuda")
    with pytest.raises(RuntimeError, match="cpu.*cuda:0|cuda:0.*cpu"):
        a + b
    with pytest.raises(RuntimeError, match="cpu.*cuda:0|cuda:0.*cpu"):
        mf.cat([a, b])


# ---------------------------------------------------------------- bad input
def test_broadcast_mismatch_names_op_and_shapes(device):
    a = mf.ones(2, 3, device=device, requires_grad=True)
    b = mf.ones(4, device=device)
    with pytest.raises(ValueError, match=r"add: shapes \(2, 3\) and \(4,\)"):
        a + b
    with pytest.raises(ValueError, match=r"mul: shapes"):
        a * b
    with pytest.raises(ValueError, match=r"matmul: shapes \(2, 3\) and \(4,\)"):
        a @ b
    assert a.grad is None


def test_index_out_of_range(device):
    x = mf.arange(6, device=device).reshape(2, 3)
    with pytest.raises(IndexError):
        x[2]
    with pytest.raises(IndexError):
        x[0, -4]
    with pytest.raises(IndexError, match="out of range"):  # on cuda read without a sync: raised at the next one
        x[mf.tensor([0, 5], device=device)].sum().item()
    with pytest.raises(IndexError):
        x[:, [3]]
    with pytest.raises(IndexError, match="mask"):
        x[mf.tensor([True, False, True], device=device)]
    with pytest.raises(IndexError, match="too many"):
        x[0, 0, 0]


def test_setitem_and_reshape_errors(device):
    x = mf.zeros(2, 3, device=device)
    x[0] = 1.0
    x[:, 2] = mf.tensor([5.0, 6.0], device=device)
    x[x > 5] = -1.0
    assert x.tolist() == [[1, 1, 5], [0, 0, -1]]
    with pytest.raises(ValueError, match="reshape"):
        x.reshape(4, 2)
    with pytest.raises(IndexError, match="dimension"):
        x.sum(2)


def test_bad_dtype_name():
    with pytest.raises(TypeError, match="unknown dtype"):
        mf.zeros(2, dtype="float12")


def test_python_floats_go_to_a_requested_dtype_without_a_float32_rounding():
    # PyTorch converts Python data straight to the dtype asked for: 0.1 in float64 is float64's 0.1
    assert mf.tensor(0.1, dtype=mf.float64).item() == 0.1
    assert mf.tensor([0.1, 1e-8 + 1.0], dtype=mf.float64).tolist() == [0.1, 1e-8 + 1.0]
    assert mf.as_tensor([0.1], dtype=mf.float64).tolist() == [0.1]
    assert mf.tensor([0.1]).dtype == mf.float32 and mf.tensor([3]).dtype == mf.int64
    assert mf.tensor([1, 2], dtype=mf.float16).dtype == mf.float16


# ---------------------------------------------------------------- forms PyTorch scripts use
def test_reduction_arguments_as_pytorchs():
    a = np.arange(12.0).reshape(3, 4)
    x = mf.tensor(a)
    np.testing.assert_allclose(x.std(False).numpy(), a.std())  # std(input, unbiased): over everything
    np.testing.assert_allclose(x.var(True).numpy(), a.var(ddof=1))
    v, m = mf.var_mean(x, False)
    np.testing.assert_allclose((v.numpy(), m.numpy()), (a.var(), a.mean()))
    with pytest.raises(TypeError, match="dim"):
        x.sum(True)
    for dtype in (mf.int8, mf.int16, mf.int32, mf.uint8):
        s = mf.tensor(np.array([100, 100, 100, 1])).sum(dtype=dtype)
        assert s.dtype == dtype and int(s.item()) == np.array(301).astype(dtype)


def test_numpy_interop_and_legacy_constructor():
    t = mf.tensor([[1.0, 2.0], [3.0, 4.0]])
    a = np.asarray(t)
    assert type(a) is np.ndarray and a.dtype == np.float32 and np.shares_memory(a, t.numpy())
    assert np.array(t, dtype=np.float64).dtype == np.float64
    np.testing.assert_array_equal(t.numpy(force=True), a)
    for args, shape in ((([1, 2],), (2,)), (([0.5],), (1,)), ((2, 3), (2, 3)), ((), (0,))):
        u = mf.Tensor(*args)
        assert u.dtype == mf.float32 and u.shape == shape
    with pytest.raises(TypeError):
        mf.Tensor([1.0], 2)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_median_and_sort_with_nan(dtype):
    dt = getattr(mf, dtype)
    x = mf.tensor([1.0, float("nan"), 3.0, 0.0]).to(dt)
    assert np.isnan(float(x.median().item()))
    values, indices = x.median(0)
    assert np.isnan(float(values.item())) and int(indices.item()) == 1
    rows = mf.tensor([[1.0, 2.0, 3.0], [4.0, float("nan"), 6.0]]).to(dt).median(1)
    assert float(rows.values[0].item()) == 2.0 and np.isnan(float(rows.values[1].item()))
    np.testing.assert_array_equal(rows.indices.numpy(), [1, 1])
    s = x.sort()
    np.testing.assert_array_equal(s.values.float().numpy(), [0.0, 1.0, 3.0, np.nan])
    np.testing.assert_array_equal(s.indices.numpy(), [3, 0, 2, 1])


def test_uint8_index_is_a_mask():
    t = mf.tensor([10, 20, 30])
    with pytest.warns(UserWarning, match="uint8"):
        picked = t[mf.tensor(np.array([1, 0, 1], np.uint8))]
    np.testing.assert_array_equal(picked.numpy(), [10, 30])


def test_set_default_dtype_reaches_modules_and_promotions():
    """float64 as the default: new modules' parameters and buffers, integer true division and transcendental
    ops, int tensor with a float scalar, linspace, as PyTorch's."""
    mf.set_default_dtype(mf.float64)
    try:
        i, b = mf.tensor([1, 2]), mf.tensor([True, False])
        outs = (i / i, i + 1.5, i.sqrt(), b * 1.5, mf.linspace(0, 1, 3), mf.logspace(0, 1, 3),
                nn.Linear(2, 2)(mf.randn(3, 2)), nn.Conv2d(1, 2, 3)(mf.randn(1, 1, 4, 4)))
        assert all(o.dtype == mf.float64 for o in outs)
        for m in (nn.BatchNorm2d(2), nn.LayerNorm(3), nn.Embedding(3, 2), nn.PReLU(), nn.ConvTranspose2d(1, 1, 2)):
            assert all(t.dtype == mf.float64 for t in (*m.parameters(), *[v for v in m.buffers()
                                                                           if backend.is_floating(v.dtype)]))
    finally:
        mf.set_default_dtype(mf.float32)
    assert nn.Linear(2, 2).weight.dtype == mf.float32 and (mf.tensor([1]) / 2).dtype == mf.float32


def test_comparisons_iteration_and_membership_as_pytorchs():
    t = mf.tensor([1, 2])
    assert (t == None) is False and (t != None) is True and (t == "a") is False and (t == [1, 2]) is False  # noqa: E711
    with pytest.raises(TypeError):
        t < None  # noqa: B015
    with pytest.raises(TypeError, match="0-d"):
        list(mf.tensor(3))
    assert [int(v.item()) for v in t] == [1, 2]
    assert 2 in t and 5 not in t and mf.tensor([1, 2]) in mf.tensor([[1, 2], [3, 4]])
    np.testing.assert_array_equal((t == 1).numpy(), [True, False])


def test_creation_forms_as_pytorchs():
    """size= and 0-d tensors as sizes and bounds, NumPy float scalars as floats, the keywords PyTorch's
    creation functions take (layout, pin_memory, memory_format, out), input= on the *_like forms, rand of a
    16-bit dtype below 1, and the legacy constructor of a NumPy array in the default dtype."""
    assert mf.zeros(size=(2, 3)).shape == (2, 3) and mf.rand(size=(4,)).shape == (4,)
    n = mf.tensor([2, 3]).max()
    assert mf.arange(n).tolist() == [0, 1, 2] and mf.zeros(n).shape == (3,) and mf.randperm(n).shape == (3,)
    assert mf.linspace(0, 1, mf.tensor(5)).shape == (5,) and int(mf.randint(high=2, size=(50,)).max()) <= 1
    np.testing.assert_allclose(mf.arange(0, 1, np.float32(0.25)).numpy(), [0, 0.25, 0.5, 0.75])
    assert mf.full((2,), np.float64(1.5)).dtype == mf.float32
    cl = mf.empty(2, 3, 4, 5, memory_format=mf.channels_last, pin_memory=False, layout=mf.strided)
    assert cl.is_contiguous(memory_format=mf.channels_last)
    out = mf.empty(1)
    assert mf.arange(4, out=out) is out and out.tolist() == [0.0, 1.0, 2.0, 3.0]
    x = mf.ones(2, 3)
    assert mf.zeros_like(input=x).shape == (2, 3) and float(mf.full_like(input=x, fill_value=2.0)[0, 0]) == 2.0
    for dtype in (mf.float16, mf.bfloat16):
        r = mf.rand(200_000, dtype=dtype).float().numpy()
        assert r.max() < 1.0 and r.min() >= 0.0
    assert mf.Tensor(np.arange(3)).dtype == mf.float32 and nn.Parameter(mf.zeros(2, dtype=mf.float64)).dtype \
        == mf.float64


def test_as_tensor_and_asarray_keep_a_tensor_in_its_graph():
    w = mf.tensor([1.0, 2.0], requires_grad=True)
    out = w * 3
    (out.sum() + (mf.as_tensor(out, dtype=mf.float32, device="cpu") ** 2).sum()).backward()
    np.testing.assert_allclose(w.grad.numpy(), [21.0, 39.0])
    a = mf.asarray(w, copy=True)
    assert a.requires_grad and a.grad_fn is not None and not np.shares_memory(a.detach().numpy(), w.detach().numpy())
    assert mf.as_tensor(w) is w
