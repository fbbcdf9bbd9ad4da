"""Shared test setup: the ``gpu`` marker skips where CUDA is unusable; ``device`` runs a test per device;
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
