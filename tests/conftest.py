"""Shared test setup: the ``gpu`` marker skips where CUDA is unusable; ``device`` runs a test per device."""
import numpy as np
import pytest

from minifused import backend


def pytest_collection_modifyitems(config, items):
    if backend.cuda_available():
        return
    skip = pytest.mark.skip(reason="no usable CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def device(request):
    """Each test taking ``device`` runs on the NumPy path and, on a GPU machine, on CuPy."""
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
