"""``torch.accelerator``: the device-agnostic spelling of the current accelerator, which is CUDA here when a GPU
is present (``current_accelerator()`` is then ``device('cuda')``, else None)."""
from __future__ import annotations

from . import cuda
from .backend import Device


def is_available() -> bool:
    return cuda.is_available()


def current_accelerator(check_available: bool = False):
    """``device('cuda')`` where a GPU is present, else None."""
    return Device("cuda") if cuda.is_available() else None


def device_count() -> int:
    return cuda.device_count() if cuda.is_available() else 0


def current_device_index() -> int:
    return cuda.current_device()


def set_device_index(device) -> None:
    cuda.set_device(device)


def current_stream(device=None):
    return cuda.current_stream(device)


def synchronize(device=None) -> None:
    cuda.synchronize(device)


__all__ = ["current_accelerator", "current_device_index", "current_stream", "device_count", "is_available",
           "set_device_index", "synchronize"]
