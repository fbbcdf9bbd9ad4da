"""``torch.cuda``'s device queries, per-device random states and the ``device`` context manager; re-exported by
:mod:`minifused.cuda` (kept apart so that neither module grows past a screenful of topics).

CUDA random states: minifused draws on a CUDA device from CuPy's cuRAND generator, whose position cannot be read
back. So :func:`get_rng_state` re-seeds the device's generator with a seed drawn from it (deterministic given
the seeding history) and returns that seed as PyTorch's 16-byte state (seed and offset, little-endian uint64s,
a cpu uint8 tensor): :func:`set_rng_state` with it replays the draws that followed, as in PyTorch. The one
difference: taking the state moves the stream to the new seed.
"""
from __future__ import annotations

import struct

import numpy as np

from . import backend


def _require(op):
    if not backend.cuda_available():
        raise RuntimeError(f"minifused.cuda.{op}: no usable CUDA device was found")
    return backend.cupy


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


def is_bf16_supported(including_emulation=True) -> bool:
    """Whether bfloat16 runs on the current device: compute capability 8.0 or newer (older GPUs emulate it,
    which counts when ``including_emulation``, as PyTorch's); False without CUDA."""
    if not backend.cuda_available():
        return False
    return get_device_capability()[0] >= 8 or bool(including_emulation)


def is_tf32_supported() -> bool:
    """Whether the current device runs TF32 matmuls natively (compute capability 8.0 or newer: PyTorch's rule,
    bfloat16 without emulation); False without CUDA."""
    return is_bf16_supported(including_emulation=False)


def init() -> None:
    """Initialize CUDA now (the current device's context), which minifused otherwise does on first use;
    nothing if already done. Without a CUDA device it raises, as PyTorch's."""
    cupy = _require("init")
    cupy.cuda.runtime.free(0)  # the runtime's documented way to make the context exist


def is_initialized() -> bool:
    """Whether CUDA is initialized here: a CUDA context is current on this thread (made by :func:`init` or by
    any CUDA work); False without CUDA."""
    if not backend.cuda_available():
        return False
    return backend.cupy.cuda.driver.ctxGetCurrent() != 0


def can_device_access_peer(device, peer_device) -> bool:
    """Whether ``device`` can read and write ``peer_device``'s memory directly (CUDA peer access)."""
    cupy = _require("can_device_access_peer")
    count = cupy.cuda.runtime.getDeviceCount()
    device, peer_device = _index(device), _index(peer_device)
    if not 0 <= device < count:  # PyTorch's type and words
        raise AssertionError("minifused.cuda.can_device_access_peer: Invalid device id")
    if not 0 <= peer_device < count:
        raise AssertionError("minifused.cuda.can_device_access_peer: Invalid peer device id")
    return bool(cupy.cuda.runtime.deviceCanAccessPeer(device, peer_device))


class _CudaDeviceProperties:
    """What ``get_device_properties`` gives: PyTorch's main attributes of a CUDA device."""

    def __init__(self, props):
        name = props["name"]
        self.name = name.decode() if isinstance(name, bytes) else name
        self.total_memory = int(props["totalGlobalMem"])
        self.major, self.minor = int(props["major"]), int(props["minor"])
        self.multi_processor_count = int(props["multiProcessorCount"])
        self.L2_cache_size = int(props.get("l2CacheSize", 0))
        self.warp_size = int(props.get("warpSize", 32))

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // (1024 * 1024)}MB, "
                f"multi_processor_count={self.multi_processor_count})")


def get_device_properties(device=None) -> _CudaDeviceProperties:
    """``name``, ``total_memory`` (bytes), ``major``, ``minor``, ``multi_processor_count`` of ``device``."""
    cupy = _require("get_device_properties")
    idx = _index(device)
    if not 0 <= idx < cupy.cuda.runtime.getDeviceCount():
        raise AssertionError(f"minifused.cuda.get_device_properties: invalid device id {idx}")  # PyTorch's type
    return _CudaDeviceProperties(cupy.cuda.runtime.getDeviceProperties(idx))


def get_device_capability(device=None) -> tuple:
    """``(major, minor)``: the compute capability of ``device`` (the current one by default)."""
    _require("get_device_capability")
    props = get_device_properties(device)
    return props.major, props.minor


def mem_get_info(device=None) -> tuple:
    """``(free, total)`` bytes of ``device``'s memory, as the driver reports them (cudaMemGetInfo)."""
    cupy = _require("mem_get_info")
    with cupy.cuda.Device(_index(device)):
        free, total = cupy.cuda.runtime.memGetInfo()
    return int(free), int(total)


def is_current_stream_capturing() -> bool:
    """Whether a CUDA graph capture is under way on the current stream (a ``minifused.capture_step`` included)."""
    cupy = _require("is_current_stream_capturing")
    return backend.is_capturing() or bool(cupy.cuda.get_current_stream().is_capturing())


def get_arch_list() -> list:
    """The architectures minifused's kernels build for: NVRTC compiles them at run time for the GPUs present,
    so these are the visible devices' ``sm_XY`` (empty without CUDA)."""
    if not backend.cuda_available():
        return []
    cupy = backend.cupy
    return sorted({f"sm_{get_device_capability(i)[0]}{get_device_capability(i)[1]}"
                   for i in range(cupy.cuda.runtime.getDeviceCount())})


# ---------------------------------------------------------------- random states
def _generator(op, device):
    _require(op)
    return backend.generator(backend.Device("cuda", _index(device)))


def _reseed(gen, seed, offset=0):
    from cupy_backends.cuda.libs import curand

    gen.seed(seed)
    if offset:
        curand.setGeneratorOffset(gen._generator, offset)
    gen._minifused_seed = seed  # what initial_seed reports


def get_rng_state(device="cuda"):
    """The random state of ``device`` as a 16-byte cpu uint8 tensor (see the module: the stream moves to it)."""
    from .tensor import Tensor

    gen = _generator("get_rng_state", device)
    backend.refuse_sync("minifused.cuda.get_rng_state")
    with backend.cupy.cuda.Device(_index(device)):  # gen's cuRAND generator lives on its device, not the current
        seed = int(gen.randint(0, 2 ** 62, size=1, dtype=np.int64).get()[0])  # drawn from the stream: deterministic
        _reseed(gen, seed)
    return Tensor._from_array(np.frombuffer(struct.pack("<QQ", seed, 0), np.uint8).copy())


def set_rng_state(new_state, device="cuda") -> None:
    """Restore a state from :func:`get_rng_state` (PyTorch's 16 bytes: seed, offset); without CUDA, nothing."""
    from .tensor import Tensor

    if not isinstance(new_state, Tensor) or new_state.dtype != np.uint8:
        raise TypeError(f"minifused.cuda.set_rng_state: expected a uint8 tensor (from get_rng_state), got "
                        f"{getattr(new_state, 'dtype', type(new_state).__name__)}")
    raw = backend.to_device(new_state._data, backend.CPU).reshape(-1)
    if raw.size != 16:
        raise RuntimeError(f"minifused.cuda.set_rng_state: RNG state is wrong size: expected 16 bytes, got "
                           f"{raw.size}")
    if not backend.cuda_available():
        return
    seed, offset = struct.unpack("<QQ", raw.tobytes())
    _reseed(_generator("set_rng_state", device), seed, offset)


def get_rng_state_all() -> list:
    """:func:`get_rng_state` of every device."""
    _require("get_rng_state_all")
    return [get_rng_state(i) for i in range(backend.cupy.cuda.runtime.getDeviceCount())]


def set_rng_state_all(new_states) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def seed() -> None:
    """Seed the current device's generator with a random number (nothing without CUDA, as PyTorch's)."""
    if backend.cuda_available():
        _reseed(_generator("seed", None), int(np.random.SeedSequence().entropy) & (2 ** 63 - 1))


def seed_all() -> None:
    """Seed every device's generator with one random number (nothing without CUDA)."""
    if backend.cuda_available():
        value = int(np.random.SeedSequence().entropy) & (2 ** 63 - 1)
        for i in range(backend.cupy.cuda.runtime.getDeviceCount()):
            _reseed(_generator("seed_all", i), value)


def initial_seed() -> int:
    """The seed of the current device's generator (``minifused.manual_seed(s)`` seeds device ``i`` with
    ``s + i``)."""
    gen = _generator("initial_seed", None)
    return int(getattr(gen, "_minifused_seed", backend.initial_seed() + backend.cupy.cuda.runtime.getDevice()))


class device:  # noqa: N801 - PyTorch's name
    """``with minifused.cuda.device(i):`` makes CUDA device ``i`` current inside (an int, 'cuda:1' or a
    Device); None or a negative index does nothing, as PyTorch's."""

    def __init__(self, device):
        self.idx = -1 if device is None or (isinstance(device, int) and device < 0) else None
        self._spec, self.prev_idx = device, -1

    def __enter__(self):
        if self.idx == -1:
            return self
        cupy = _require("device")
        self.idx = _index(self._spec)
        self.prev_idx = cupy.cuda.runtime.getDevice()
        if self.idx != self.prev_idx:
            cupy.cuda.runtime.setDevice(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx != -1 and self.prev_idx != self.idx:
            backend.cupy.cuda.runtime.setDevice(self.prev_idx)
        return False


class device_of(device):  # noqa: N801 - PyTorch's name
    """``with minifused.cuda.device_of(t):`` makes ``t``'s CUDA device current inside; a no-op for a cpu
    tensor."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.is_cuda else -1)
