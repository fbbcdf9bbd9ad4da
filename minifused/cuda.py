"""``torch.cuda``'s everyday functions, answered by CuPy and its memory pool.

On a machine without a usable CUDA device every function works: ``is_available()`` is False,
``device_count()`` 0, the memory counters 0, and the seeding, synchronizing and cache calls do
nothing (``current_device()`` alone raises, as PyTorch's does).

Memory counters are those of CuPy's default memory pool, which every minifused cuda array comes
from: ``memory_allocated`` is the bytes held by live arrays, ``memory_reserved`` the bytes the
pool holds from the driver. The pool keeps no high-water mark, so ``max_memory_allocated``
tracks one itself from the first call of it or of ``reset_peak_memory_stats``: from then on each
allocation goes through a small wrapper that updates the peak (code that never asks pays nothing).
Before that first call it reports the current use.
"""
from __future__ import annotations

from types import SimpleNamespace

from . import backend

__all__ = ["is_available", "device_count", "current_device", "set_device", "get_device_name", "synchronize",
           "manual_seed", "manual_seed_all", "memory_allocated", "max_memory_allocated", "memory_reserved",
           "reset_peak_memory_stats", "empty_cache"]


def is_available() -> bool:
    return backend.cuda_available()


def device_count() -> int:
    return backend.cupy.cuda.runtime.getDeviceCount() if is_available() else 0


def _require(op):
    if not is_available():
        raise RuntimeError(f"minifused.cuda.{op}: no usable CUDA device was found")
    return backend.cupy


def current_device() -> int:
    return _require("current_device").cuda.runtime.getDevice()


def set_device(device) -> None:
    _require("set_device").cuda.Device(_index(device)).use()


def get_device_name(device=None) -> str:
    cupy = _require("get_device_name")
    name = cupy.cuda.runtime.getDeviceProperties(_index(device))["name"]
    return name.decode() if isinstance(name, bytes) else name


def _index(device) -> int:
    """The CUDA device index for ``device`` (None: the current device; an int, 'cuda:1', a Device)."""
    cupy = backend.cupy
    if device is None:
        return cupy.cuda.runtime.getDevice()
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    dev = device if isinstance(device, backend.Device) else backend.Device(device)
    if dev.type != "cuda":
        raise ValueError(f"minifused.cuda: expected a cuda device, got {dev}")
    return cupy.cuda.runtime.getDevice() if dev.index is None else dev.index


def synchronize(device=None) -> None:
    """Wait for the work queued on ``device``'s current stream."""
    if is_available():
        with backend.cupy.cuda.Device(_index(device)):
            backend.cupy.cuda.get_current_stream().synchronize()


def manual_seed(seed: int) -> None:
    """Seed the CUDA generators. minifused seeds all devices from one seed, so this is
    :func:`minifused.manual_seed` (which also seeds the cpu generator)."""
    backend.manual_seed(seed)


manual_seed_all = manual_seed


def _pool_bytes(device, what):
    if not is_available():
        return 0
    cupy = backend.cupy
    with cupy.cuda.Device(_index(device)):
        pool = cupy.get_default_memory_pool()
        return int(pool.used_bytes() if what == "used" else pool.total_bytes())


def memory_allocated(device=None) -> int:
    """Bytes held by live cuda arrays on ``device``."""
    return _pool_bytes(device, "used")


def memory_reserved(device=None) -> int:
    """Bytes CuPy's pool holds from the driver on ``device`` (in use or cached)."""
    return _pool_bytes(device, "total")


_peaks = {}  # device index -> highest used bytes seen since tracking began or the last reset
_tracker = [None]


def _track():
    """Route allocations through a wrapper of the default pool that records the peak, unless some
    other allocator than the default pool's is installed (then that one is left alone)."""
    if not is_available():
        return
    cupy = backend.cupy
    pool = cupy.get_default_memory_pool()
    current = cupy.cuda.get_allocator()
    if current is _tracker[0] or current != pool.malloc:
        return

    def malloc(size):
        mem = pool.malloc(size)
        used = pool.used_bytes()
        if used > _peaks.get(mem.device_id, 0):
            _peaks[mem.device_id] = used
        return mem

    _tracker[0] = malloc
    cupy.cuda.set_allocator(malloc)


def max_memory_allocated(device=None) -> int:
    """The most bytes live arrays held on ``device`` since tracking began (see the module's doc)."""
    if not is_available():
        return 0
    _track()
    idx = _index(device)
    now = memory_allocated(idx)
    _peaks[idx] = max(_peaks.get(idx, 0), now)
    return _peaks[idx]


def reset_peak_memory_stats(device=None) -> None:
    """Start the peak of :func:`max_memory_allocated` afresh from the current use."""
    if not is_available():
        return
    _track()
    idx = _index(device)
    _peaks[idx] = memory_allocated(idx)


def empty_cache() -> None:
    """Give the pool's cached, unused blocks back to the driver."""
    if is_available():
        backend.cupy.get_default_memory_pool().free_all_blocks()


def _cuda_grad_scaler(init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                      enabled=True):
    """``torch.cuda.amp.GradScaler``: :class:`minifused.amp.GradScaler` on 'cuda' (its arguments, no device)."""
    from .amp import GradScaler

    return GradScaler("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


def _cuda_autocast(enabled=True, dtype=None, cache_enabled=True):
    """``torch.cuda.amp.autocast``: :class:`minifused.amp.autocast` on 'cuda' (float16 by default)."""
    from .amp import autocast

    return autocast("cuda", dtype, enabled, cache_enabled)


#: ``torch.cuda.amp``: the GradScaler and autocast under their older spellings.
amp = SimpleNamespace(GradScaler=_cuda_grad_scaler, autocast=_cuda_autocast)
