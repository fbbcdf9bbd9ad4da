"""Small PyTorch APIs added at the top level and around it: the warn-always switch, set_flush_denormal,
default_generator, to_dlpack, the version module, the deprecated ctc_loss / frobenius_norm / nuclear_norm /
matrix_rank, nn.init's deprecated spellings and sparse_, Tensor.share_memory_ / is_shared, the numerical
gradient, and torch.cuda's small helpers (sync debug mode, nested memory stats, the NVML readings)."""
import copy
import ctypes
import itertools
import math
import os
import re
import subprocess
import sys
import types
import warnings

import numpy as np
import pytest

import minifused as mf
from minifused import backend
from minifused.nn import init
from minifused import backend as runtime  # (warn_once and its record live in backend)
from tolerances import cpu


# ---------------------------------------------------------------- warn always, flush denormal
def _warnings(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [w for w in caught if "deprecated" in str(w.message)]


def test_warn_always_switch_governs_the_once_per_process_warnings():
    a = cpu(np.arange(6.0).reshape(2, 3))
    runtime._warned.discard("frobenius_norm")
    assert mf.is_warn_always_enabled() is False
    assert len(_warnings(lambda: mf.frobenius_norm(a, (0, 1)))) == 1
    assert _warnings(lambda: mf.frobenius_norm(a, (0, 1))) == []  # once per process, as PyTorch's
    mf.set_warn_always(True)
    try:
        assert mf.is_warn_always_enabled() is True
        assert len(_warnings(lambda: mf.frobenius_norm(a, (0, 1)))) == 1
        assert len(_warnings(lambda: mf.frobenius_norm(a, (0, 1)))) == 1
    finally:
        mf.set_warn_always(False)
    assert mf.is_warn_always_enabled() is False
    with pytest.raises(RuntimeError, match="expects a bool, but got int"):
        mf.set_warn_always(1)


def test_set_flush_denormal_answers_and_keeps_denormals():
    assert mf.set_flush_denormal(False) is True
    assert mf.set_flush_denormal(True) is False  # not supported on NumPy arrays: nothing changed
    tiny = cpu([1e-310], dtype=mf.float64)
    assert (tiny * 1.0).tolist() == [1e-310]  # denormals kept
    for bad in (1, None, "x"):
        with pytest.raises(RuntimeError, match="flush_denormal expects a bool"):
            mf.set_flush_denormal(bad)


# ---------------------------------------------------------------- default_generator
def test_default_generator_is_the_global_cpu_generator():
    g = mf.default_generator
    assert isinstance(g, mf.Generator) and g.device.type == "cpu"
    assert g.manual_seed(1234) is g and mf.initial_seed() == 1234 and g.initial_seed() == 1234
    first = mf.randn(5, device="cpu").numpy()
    mf.manual_seed(1234)
    assert np.array_equal(mf.randn(5, device="cpu").numpy(), first)
    assert g.initial_seed() == 1234
    # drawing through it continues the global stream
    mf.manual_seed(99)
    both = mf.rand(6, device="cpu").numpy()
    mf.manual_seed(99)
    head = mf.rand(3, device="cpu").numpy()
    tail = mf.rand(3, generator=g, device="cpu").numpy()
    assert np.array_equal(np.concatenate([head, tail]), both)
    # its state is the global generator's
    state = g.get_state()
    x = mf.rand(4, device="cpu").numpy()
    g.set_state(state)
    assert np.array_equal(mf.rand(4, device="cpu").numpy(), x)
    # a deep copy is a separate generator at the global one's present state
    g.set_state(state)
    clone = copy.deepcopy(g)
    assert type(clone) is mf.Generator and clone.initial_seed() == 99
    assert np.array_equal(mf.rand(4, generator=clone, device="cpu").numpy(), x)
    assert np.array_equal(mf.rand(4, device="cpu").numpy(), x)  # the global stream did not move


def test_default_generator_manual_seed_checks_as_pytorch():
    g = mf.default_generator
    g.manual_seed(-1)  # a negative seed is its two's complement
    assert g.initial_seed() == 2 ** 64 - 1
    with pytest.raises(ValueError, match="Overflow"):
        g.manual_seed(2 ** 64)
    for bad in (1.5, True):
        with pytest.raises(RuntimeError, match="manual_seed expected a long"):
            g.manual_seed(bad)
    mf.manual_seed(0)


def test_manual_seed_returns_the_default_generator_as_pytorch():
    # torch.manual_seed returns torch.default_generator, so `generator=torch.manual_seed(0)` draws the seeded stream
    g = mf.manual_seed(5)
    assert g is mf.default_generator and mf.random.manual_seed(5) is g and g.initial_seed() == 5
    a = mf.rand(3, generator=mf.manual_seed(5), device="cpu").numpy()
    mf.manual_seed(5)
    np.testing.assert_array_equal(mf.rand(3, device="cpu").numpy(), a)
    # the seed goes through int() first (3.7 and "3" seed 3, True 1); a negative one is its two's complement
    for given, seed in ((3.7, 3), ("3", 3), (True, 1), (-1, 2 ** 64 - 1), (-2 ** 63, 2 ** 63)):
        assert mf.manual_seed(given).initial_seed() == seed
    for bad in (2 ** 64, -2 ** 63 - 1):
        with pytest.raises(ValueError, match="Overflow when unpacking long long"):
            mf.manual_seed(bad)
    with pytest.raises(TypeError):
        mf.manual_seed(None)
    assert mf.cuda.manual_seed(-1) is None and mf.initial_seed() == 2 ** 64 - 1
    mf.manual_seed(0)


# ---------------------------------------------------------------- to_dlpack
class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


def test_to_dlpack_gives_a_capsule_of_the_tensors_memory():
    t = cpu(np.arange(6.0).reshape(2, 3))
    capsule = mf.to_dlpack(t)
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    dl = _DLTensor.from_address(get(capsule, b"dltensor"))  # DLManagedTensor starts with its DLTensor
    assert dl.data + dl.byte_offset == t.numpy().__array_interface__["data"][0]
    assert (dl.device_type, dl.ndim, dl.code, dl.bits, dl.lanes) == (1, 2, 2, 64, 1)  # cpu, float64
    assert [dl.shape[0], dl.shape[1]] == [2, 3]
    with pytest.raises(TypeError, match="must be Tensor, not list"):
        mf.to_dlpack([1.0])


# ---------------------------------------------------------------- version
def test_version_module():
    import minifused.version as version
    from minifused.version import cuda

    assert version is mf.version and version.__version__ == mf.__version__
    root = os.path.dirname(os.path.dirname(os.path.abspath(mf.__file__)))
    with open(os.path.join(root, "pyproject.toml")) as f:
        assert re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1) == version.__version__
    assert version.debug is False and version.hip is None and version.rocm is None and version.xpu is None
    if backend.cuda_available():
        assert re.fullmatch(r"\d+\.\d+", cuda)
    else:
        assert cuda is None
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        head = ""
    assert version.git_version == (head or version.git_version)
    assert version.git_version == "Unknown" or re.fullmatch(r"[0-9a-f]{40}", version.git_version)


# ---------------------------------------------------------------- deprecated top-level functions
def _collapse(path):
    out = [k for i, k in enumerate(path) if i == 0 or k != path[i - 1]]
    return [k for k in out if k != 0]


def test_ctc_loss_top_level_against_enumerated_alignments(rng):
    logits = rng.standard_normal((3, 2, 3))
    lp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    targets, lengths = [[1, 0], [2, 1]], [1, 2]
    losses = []
    for n, tgt in enumerate(targets):  # the likelihood of every path of 3 steps that collapses to the target
        p = sum(np.exp(sum(lp[t, n, k] for t, k in enumerate(path)))
                for path in itertools.product(range(3), repeat=3) if _collapse(path) == tgt[:lengths[n]])
        losses.append(-np.log(p))
    losses = np.array(losses)
    x, y = cpu(lp), cpu(targets)
    np.testing.assert_allclose(mf.ctc_loss(x, y, [3, 3], lengths).numpy(), losses, rtol=1e-12)  # default: none
    np.testing.assert_allclose(mf.ctc_loss(x, y, [3, 3], lengths, 0, 0).numpy(), losses, rtol=1e-12)
    np.testing.assert_allclose(mf.ctc_loss(x, y, [3, 3], lengths, 0, 7).numpy(), losses, rtol=1e-12)
    np.testing.assert_allclose(mf.ctc_loss(x, y, [3, 3], lengths, 0, 1).item(), np.mean(losses / lengths),
                               rtol=1e-12)
    np.testing.assert_allclose(mf.ctc_loss(x, y, cpu([3, 3]), cpu(lengths), 0, 2).item(), losses.sum(), rtol=1e-12)
    with pytest.raises(TypeError, match="both be tensors or both"):
        mf.ctc_loss(x, y, [3, 3], cpu(lengths))
    with pytest.raises(TypeError, match="'reduction' must be int"):
        mf.ctc_loss(x, y, [3, 3], lengths, 0, "mean")


def test_frobenius_and_nuclear_norm(rng):
    a = rng.standard_normal((3, 4, 5))
    t = cpu(a)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(mf.frobenius_norm(t, (1, 2)).numpy(), np.linalg.norm(a, axis=(1, 2)),
                                   rtol=1e-12)
        np.testing.assert_allclose(mf.frobenius_norm(t, 2, True).numpy(),
                                   np.linalg.norm(a, axis=2, keepdims=True), rtol=1e-12)
        np.testing.assert_allclose(mf.frobenius_norm(t, ()).item(), np.linalg.norm(a.ravel()), rtol=1e-12)
        with pytest.raises(RuntimeError, match="at most 2 dimensions"):
            mf.frobenius_norm(t, (0, 1, 2))
        nuc = np.linalg.svd(a, compute_uv=False).sum(-1)
        np.testing.assert_allclose(mf.nuclear_norm(t).numpy(), nuc, rtol=1e-12)
        np.testing.assert_allclose(mf.nuclear_norm(t, True).numpy(), nuc[:, None, None], rtol=1e-12)
        np.testing.assert_allclose(mf.nuclear_norm(t, (0, 2)).numpy(),
                                   np.linalg.svd(a.transpose(1, 0, 2), compute_uv=False).sum(-1), rtol=1e-12)
        with pytest.raises(RuntimeError, match="dims must be different"):
            mf.nuclear_norm(t, 1)  # one int stands for (1, 1), as PyTorch's int[2]
        out = mf.empty(0, dtype=mf.float64, device="cpu")
        assert mf.frobenius_norm(t, (1, 2), out=out) is out
        np.testing.assert_allclose(out.numpy(), np.linalg.norm(a, axis=(1, 2)), rtol=1e-12)
    runtime._warned.discard("nuclear_norm")
    assert len(_warnings(lambda: mf.nuclear_norm(t))) == 1


def test_matrix_rank_is_removed_as_in_pytorch():
    with pytest.raises(RuntimeError, match="deprecated since version 1.9 and is now removed"):
        mf.matrix_rank(cpu(np.eye(3)))


# ---------------------------------------------------------------- nn.init
@pytest.mark.parametrize("name,args", [("uniform", (-1.0, 1.0)), ("normal", (0.0, 2.0)), ("constant", (3.0,)),
                                       ("xavier_uniform", ()), ("xavier_normal", ()), ("kaiming_uniform", ()),
                                       ("kaiming_normal", ()), ("orthogonal", ()), ("eye", ()),
                                       ("sparse", (0.5,))])
def test_deprecated_init_spellings_warn_and_call_the_new_ones(name, args):
    old, new = getattr(init, name), getattr(init, name + "_")
    mf.manual_seed(3)
    expected = new(mf.empty(4, 6, device="cpu"), *args).numpy()
    mf.manual_seed(3)
    with pytest.warns(FutureWarning, match=re.escape(f"`nn.init.{name}` is now deprecated in favor of "
                                                     f"`nn.init.{name}_`")):
        got = old(mf.empty(4, 6, device="cpu"), *args)
    assert old.__name__ == name and np.array_equal(got.numpy(), expected)


def test_deprecated_dirac_spelling():
    with pytest.warns(FutureWarning, match="nn.init.dirac"):
        w = init.dirac(mf.empty(2, 2, 3, device="cpu"))
    assert w.numpy()[:, :, 1].tolist() == [[1, 0], [0, 1]] and w.numpy().sum() == 2


def test_sparse_init():
    rows, cols, std = 400, 30, 2.0
    w = init.sparse_(mf.empty(rows, cols, device="cpu"), 0.33, std=std)
    a = w.numpy()
    assert ((a == 0).sum(0) == math.ceil(0.33 * rows)).all()  # the same count of zeros in every column
    assert abs(a[a != 0].std() / std - 1) < 0.05 and abs(a[a != 0].mean()) < 0.05 * std
    assert len({tuple(np.flatnonzero(c == 0)) for c in a.T}) == cols  # at different rows in each column
    mf.manual_seed(5)
    plain = init.normal_(mf.empty(6, 4, device="cpu"), 0, std).numpy()
    mf.manual_seed(5)
    assert np.array_equal(init.sparse_(mf.empty(6, 4, device="cpu"), 0.0, std).numpy(), plain)  # none zeroed
    mf.manual_seed(5)
    again = init.sparse_(mf.empty(6, 4, device="cpu"), 0.5, std).numpy()
    mf.manual_seed(5)
    assert np.array_equal(init.sparse_(mf.empty(6, 4, device="cpu"), 0.5, std).numpy(), again)  # seeded
    # the count is PyTorch's randperm(rows)[:ceil(sparsity * rows)]: all rows past 1, rows - k below 0
    assert ((init.sparse_(mf.empty(10, 3, device="cpu"), 1.5).numpy() == 0).sum(0) == 10).all()
    assert ((init.sparse_(mf.empty(10, 3, device="cpu"), -0.1).numpy() == 0).sum(0) == 9).all()
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions"):
        init.sparse_(mf.empty(3, device="cpu"), 0.1)


# ---------------------------------------------------------------- share_memory_ / is_shared
def test_share_memory_marks_the_storage():
    t = cpu([1.0, 2.0, 3.0])
    view = t[1:]
    assert t.is_shared() is False and view.is_shared() is False
    assert t.share_memory_() is t
    assert t.is_shared() is True and view.is_shared() is True and t[:2].is_shared() is True
    assert t.clone().is_shared() is False and cpu([1.0]).is_shared() is False
    assert t.tolist() == [1.0, 2.0, 3.0]


# ---------------------------------------------------------------- gradient
def _np_gradient(x, *args, **kw):
    out = np.gradient(x, *args, **kw)
    return list(out) if isinstance(out, (list, tuple)) else [out]


@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient_matches_numpy_exactly_in_float64(rng, edge_order):
    x = rng.standard_normal((4, 5, 6))
    t = cpu(x)
    assert len(mf.gradient(t, edge_order=edge_order)) == 3
    for got, want in zip(mf.gradient(t, edge_order=edge_order), _np_gradient(x, edge_order=edge_order)):
        assert got.dtype == mf.float64 and np.array_equal(got.numpy(), want)
    # one spacing for every dim; one per dim (powers of two: NumPy's edge_order=2 rounds other steps differently)
    for got, want in zip(mf.gradient(t, spacing=0.5, edge_order=edge_order),
                         _np_gradient(x, 0.5, edge_order=edge_order)):
        assert np.array_equal(got.numpy(), want)
    for got, want in zip(mf.gradient(t, spacing=[2.0, 0.25], dim=(2, 0), edge_order=edge_order),
                         _np_gradient(x, 2.0, 0.25, axis=(2, 0), edge_order=edge_order)):
        assert np.array_equal(got.numpy(), want)
    # coordinates, unevenly spaced
    coords = [np.cumsum(rng.uniform(0.2, 2.0, n)) for n in x.shape]
    got = mf.gradient(t, spacing=[cpu(c) for c in coords], edge_order=edge_order)
    assert len(got) == 3
    for g, want in zip(got, _np_gradient(x, *coords, edge_order=edge_order)):
        assert np.array_equal(g.numpy(), want)
    (one,) = mf.gradient(t, spacing=[cpu(coords[1])], dim=1, edge_order=edge_order)
    assert np.array_equal(one.numpy(), _np_gradient(x, coords[1], axis=1, edge_order=edge_order)[0])


def test_gradient_hand_values_and_dtypes():
    t = cpu([[1, 2, 4, 8], [10, 20, 40, 80]])  # integers: float output (PyTorch's documented example)
    g0, g1 = mf.gradient(t)
    assert g0.dtype == mf.float32 and g0.tolist() == [[9.0, 18.0, 36.0, 72.0]] * 2
    assert g1.tolist() == [[1.0, 1.5, 3.0, 4.0], [10.0, 15.0, 30.0, 40.0]]
    (g,) = mf.gradient(t, spacing=2.0, dim=1)
    assert g.tolist() == [[0.5, 0.75, 1.5, 2.0], [5.0, 7.5, 15.0, 20.0]]
    (g,) = mf.gradient(cpu([4.0, 1.0, 1.0, 16.0]), spacing=(cpu([-2.0, -1.0, 1.0, 4.0]),))  # f = x^2
    assert g.tolist() == [-3.0, -2.0, 2.0, 5.0]
    x = np.linspace(0, 1, 7, dtype=np.float32) ** 2
    (g,) = mf.gradient(cpu(x), spacing=1 / 6, edge_order=2)
    assert g.dtype == mf.float32
    np.testing.assert_allclose(g.numpy(), 2 * np.linspace(0, 1, 7), rtol=1e-5, atol=1e-5)  # exact for a quadratic
    assert mf.gradient(cpu(3.0)) == () and mf.gradient(t, dim=[]) == ()


def test_gradient_is_differentiable(rng):
    """gradient is linear: the backward of sum(w * gradient(x)) is G^T w, G the gradient's matrix."""
    x, w = rng.standard_normal(6), rng.standard_normal(6)
    coords = np.cumsum(rng.uniform(0.5, 1.5, 6))
    G = np.stack([np.gradient(e, coords, edge_order=2) for e in np.eye(6)], axis=1)
    t = cpu(x, requires_grad=True)
    c = cpu(coords)
    (g,) = mf.gradient(t, spacing=[c], edge_order=2)
    (g * cpu(w)).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), G.T @ w, rtol=1e-12, atol=1e-12)


def test_gradient_errors():
    x = cpu(np.ones((2, 3)))
    with pytest.raises(RuntimeError, match="each dimension size to be at least edge_order\\+1"):
        mf.gradient(x, edge_order=2)
    with pytest.raises(RuntimeError, match="only supports edge_order=1 and edge_order=2"):
        mf.gradient(x, edge_order=3)
    with pytest.raises(RuntimeError, match="does not support uint8 input"):
        mf.gradient(cpu(np.ones((3, 3), np.uint8)))
    with pytest.raises(RuntimeError, match="a list of length equal to 'self.dim\\(\\) = 2'"):
        mf.gradient(x, spacing=[1.0])
    with pytest.raises(RuntimeError, match="spacing argument of length 1 and a dim argument of length 2"):
        mf.gradient(x, spacing=[1.0], dim=(0, 1))
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times"):
        mf.gradient(x, dim=(0, -2))
    with pytest.raises(IndexError, match="Dimension out of range"):
        mf.gradient(x, dim=2)
    with pytest.raises(RuntimeError, match="to have one dimension, but got an element with 2 dimensions"):
        mf.gradient(x, spacing=[x], dim=0)
    with pytest.raises(RuntimeError, match="one coordinate per sample"):
        mf.gradient(x, spacing=[cpu([0.0, 1.0])], dim=1)
    with pytest.raises(TypeError, match="spacing"):
        mf.gradient(x, spacing=cpu([1.0, 2.0]))
    with pytest.raises(TypeError, match="spacing"):
        mf.gradient(x, spacing=[cpu([0.0, 1.0]), 1.0])
    with pytest.raises(TypeError, match="must be Tensor, not list"):
        mf.gradient([1.0, 2.0])
    with pytest.raises(RuntimeError, match="two bool tensors"):
        mf.gradient(cpu([True, False, True]))


# ---------------------------------------------------------------- torch.cuda helpers
def test_sync_debug_mode_is_recorded():
    cuda = mf.cuda
    assert cuda.get_sync_debug_mode() == 0
    try:
        runtime._warned.discard("set_sync_debug_mode")
        with pytest.warns(UserWarning, match="does not detect synchronizing operations"):
            cuda.set_sync_debug_mode("warn")
        assert cuda.get_sync_debug_mode() == 1
        cuda.set_sync_debug_mode(2)
        assert cuda.get_sync_debug_mode() == 2
        with pytest.raises(RuntimeError, match="expected one of 0,1,2"):
            cuda.set_sync_debug_mode(3)
        with pytest.raises(RuntimeError, match="expected one of `default`, `warn`, `error`"):
            cuda.set_sync_debug_mode("loud")
        with pytest.raises(RuntimeError, match="invalid argument to set_sync_debug_mode"):
            cuda.set_sync_debug_mode(1.0)
        assert cuda.get_sync_debug_mode() == 2
    finally:
        cuda.set_sync_debug_mode("default")
    assert cuda.get_sync_debug_mode() == 0


def test_memory_stats_nested_and_the_no_op_helpers(monkeypatch):
    cuda = mf.cuda
    assert cuda.reset_accumulated_memory_stats() is None and cuda.ipc_collect() is None
    monkeypatch.setattr(cuda, "memory_stats", lambda device=None: {
        "allocated_bytes.all.current": 5, "allocated_bytes.all.peak": 9, "reserved_bytes.all.current": 16})
    assert cuda.memory_stats_as_nested_dict() == {"allocated_bytes": {"all": {"current": 5, "peak": 9}},
                                                  "reserved_bytes": {"all": {"current": 16}}}
    monkeypatch.undo()
    if not backend.cuda_available():
        assert cuda.memory_stats_as_nested_dict() == {}


def test_nvml_readings_without_nvidia_ml_py(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml fails
    assert mf.cuda.list_gpu_processes() == "pynvml module not found, please install nvidia-ml-py"
    for name in ("utilization", "memory_usage", "temperature", "power_draw", "clock_rate", "device_memory_used"):
        with pytest.raises(ModuleNotFoundError, match="nvidia-ml-py does not seem to be installed"):
            getattr(mf.cuda, name)()


def test_nvml_readings_through_nvidia_ml_py(monkeypatch):
    calls = []

    class DriverNotLoaded(Exception):
        pass

    fake = types.SimpleNamespace(
        NVMLError_DriverNotLoaded=DriverNotLoaded, nvmlInit=lambda: calls.append("init"),
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=37, memory=12),
        nvmlDeviceGetTemperature=lambda h, sensor: 61 + sensor, nvmlDeviceGetPowerUsage=lambda h: 250000,
        nvmlDeviceGetClockInfo=lambda h, clock: 1980 if clock == 1 else -1,
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=2 ** 30), nvmlDeviceGetIndex=lambda h: 3,
        nvmlDeviceGetComputeRunningProcesses=lambda h: [types.SimpleNamespace(pid=4242, usedGpuMemory=3 * 2 ** 20)])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(mf.cuda, "_nvml_handle", lambda pynvml, device, op: ("handle", device))
    cuda = mf.cuda
    assert (cuda.utilization(), cuda.memory_usage(), cuda.temperature(), cuda.power_draw(), cuda.clock_rate(),
            cuda.device_memory_used()) == (37, 12, 61, 250000, 1980, 2 ** 30)
    assert cuda.list_gpu_processes() == "GPU:3\nprocess       4242 uses        3.000 MB GPU memory"
    fake.nvmlDeviceGetComputeRunningProcesses = lambda h: []
    assert cuda.list_gpu_processes() == "GPU:3\nno processes are running"

    def no_driver():
        raise DriverNotLoaded()

    fake.nvmlInit = no_driver
    assert cuda.list_gpu_processes() == "cuda driver can't be loaded, is cuda enabled?"
    with pytest.raises(RuntimeError, match="cuda driver can't be loaded"):
        cuda.temperature()


def test_version_and_default_generator_have_one_home():
    assert mf.__version__ == mf.version.__version__
    assert mf.random.default_generator is mf.default_generator


def test_module_share_memory_marks_parameters_and_buffers():
    m = mf.nn.BatchNorm1d(3)
    assert not m.weight.is_shared()
    assert m.share_memory() is m
    assert m.weight.is_shared() and m.bias.is_shared() and m.running_mean.is_shared()
