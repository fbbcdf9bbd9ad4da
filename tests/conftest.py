"""Shared test setup: the ``gpu`` marker skips where CUDA is unusable (and the tests without it run with the CPU
as the default device); ``device`` runs a test per device;
``rng`` a seeded generator; ``torch`` PyTorch on CUDA with TF32 off (skips without it); hypothesis
profiles: 'ci' (100 examples per fuzzed primitive, the default) and 'gpu' (300, for the CUDA kernels:
``MINIFUSED_HYPOTHESIS=gpu``). The op registry and the array makers: tests/opinfo.py."""
import os

import numpy as np
import pytest

from minifused import backend
from minifused.tensor import Tensor

try:
    from hypothesis import settings

    settings.register_profile("ci", max_examples=100, deadline=None, derandomize=True)
    settings.register_profile("gpu", max_examples=300, deadline=None, derandomize=True)
    settings.load_profile(os.environ.get("MINIFUSED_HYPOTHESIS", "ci"))
except ImportError:  # hypothesis is a test extra; the fuzz modules skip without it
    pass


def pytest_collection_modifyitems(config, items):
    if backend.cuda_available():
        return
    skip = pytest.mark.skip(reason="no usable CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def dev_array(a, device):
    """A NumPy array on ``device`` ("cpu": itself; bfloat16 goes over as its bits)."""
    if device == "cpu":
        return a
    import cupy

    if a.dtype == backend.bfloat16:
        return cupy.asarray(a.view(np.uint16)).view(backend.bfloat16)
    return cupy.asarray(a)


def host(a):
    """A tensor's or array's values as a NumPy array (None stays None)."""
    if isinstance(a, Tensor):
        a = a._data
    if a is None or isinstance(a, np.ndarray):
        return a
    import cupy

    if a.dtype == backend.bfloat16:
        return cupy.asnumpy(a.view(cupy.uint16)).view(backend.bfloat16)
    return cupy.asnumpy(a)


def f64(a):
    return np.asarray(host(a)).astype(np.float64)


def rel_norm_error(a, ref):
    """||a - ref|| / ||ref|| of two CuPy arrays in float64, asserting first that a holds no NaN (an output a
    kernel left unwritten, under the ``poisoned_pool`` fixture)."""
    import cupy

    a, ref = a.astype(cupy.float64), ref.astype(cupy.float64)
    assert not bool(cupy.isnan(a).any()), "NaN in result (unwritten or poisoned output)"
    return float(cupy.linalg.norm(a - ref)) / max(float(cupy.linalg.norm(ref)), 1e-30)


@pytest.fixture(autouse=True)
def _cpu_default_outside_gpu_tests(request):
    """A test not marked ``gpu`` is part of the CPU suite: on a GPU machine it runs with the CPU as the
    default device (``MINIFUSED_DEVICE=cpu``), as it does where CUDA is unusable, so the README's plain
    ``pytest`` passes there too."""
    if "gpu" in request.keywords or not backend.cuda_available():
        yield
        return
    prev = os.environ.get("MINIFUSED_DEVICE")
    os.environ["MINIFUSED_DEVICE"] = "cpu"
    backend._env_default_device.cache_clear()
    try:
        yield
    finally:
        if prev is None:
            os.environ.pop("MINIFUSED_DEVICE", None)
        else:
            os.environ["MINIFUSED_DEVICE"] = prev
        backend._env_default_device.cache_clear()


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def device(request):
    """Each test taking ``device`` runs on the NumPy path and, on a GPU machine, on CuPy."""
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(scope="session")
def torch():
    """PyTorch with CUDA, TF32 off (an optional test dependency: the test skips without it)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch


@pytest.fixture
def poisoned_pool():
    """Every CuPy allocation in the test starts as 0xFF bytes (NaN in every float dtype), so an
    output element a kernel never writes shows as NaN."""
    import cupy

    pool = cupy.get_default_memory_pool()

    def alloc(size):
        mem = pool.malloc(size)
        if size:
            cupy.cuda.runtime.memsetAsync(mem.ptr, 0xFF, size, cupy.cuda.get_current_stream().ptr)
        return mem

    cupy.cuda.set_allocator(alloc)
    yield
    cupy.cuda.set_allocator(pool.malloc)


def doubling_function(backward, name="Doubling"):
    """A custom Function ``name`` computing 2a whose backward is ``backward(g)`` (tests give it deliberately wrong
    ones)."""
    import minifused as mf

    return type(name, (mf.autograd.Function,), {"forward": staticmethod(lambda ctx, a: a * 2),
                                                "backward": staticmethod(lambda ctx, g: backward(g))})


def scheduled_training(device, graphed, make_opt, make_sched, steps):
    """A small MLP trained ``steps`` steps on one batch, the lr changed by a scheduler after each step, the
    step run eagerly or under ``capture_step``: a graph that baked the step count or the lr into its kernels
    would drift from the eager run after the warm-up. Returns (losses, weights, optimizer, step)."""
    import minifused as mf
    import minifused.functional as F
    from minifused import nn

    mf.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
    opt = make_opt(model.parameters())
    sched = make_sched(opt)
    rng = np.random.default_rng(1)
    x = mf.tensor(rng.standard_normal((8, 20)), dtype=mf.float32, device=device)
    y = mf.tensor(rng.integers(0, 4, 8), device=device)

    def step(xb, yb):
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        return loss.detach()

    if graphed:
        step = mf.capture_step(step, warmup=2)
    losses = []
    for _ in range(steps):
        losses.append(float(step(x, y).item()))
        sched.step()
    return losses, [p.cpu().numpy() for p in model.parameters()], opt, step
