"""``torch.cuda``'s everyday functions, answered by CuPy and its memory pool.

On a machine without a usable CUDA device every function works: ``is_available()`` is False,
``device_count()`` 0, the memory counters 0, ``is_bf16_supported()`` False, ``get_arch_list()`` empty, and the
seeding (``set_rng_state`` too), synchronizing and cache calls do nothing; the functions that ask a device
(``current_device``, ``get_device_capability``, ``get_rng_state`` ...) raise a RuntimeError naming themselves, as
PyTorch's raise.

Memory counters are those of CuPy's default memory pool, which every minifused cuda array comes
from: ``memory_allocated`` is the bytes held by live arrays, ``memory_reserved`` the bytes the
pool holds from the driver. The pool keeps no high-water mark, so ``max_memory_allocated``
tracks one itself from the first call of it or of ``reset_peak_memory_stats``: from then on each
allocation goes through a small wrapper that updates the peak (code that never asks pays nothing).
Before that first call it reports the current use.

Also without a device: ``is_initialized()`` and ``is_tf32_supported()`` are False, ``stream(None)``,
``set_stream(None)`` and ``device_of(cpu_tensor)`` do nothing, and ``init``, ``ExternalStream``,
``can_device_access_peer``, ``profiler.start`` and ``make_graphed_callables`` raise. ``nvtx`` (CuPy's NVTX
binding) works wherever CuPy has it, a device or not, as PyTorch's. ``ipc_collect`` (minifused shares no tensor
through CUDA IPC) and ``reset_accumulated_memory_stats`` (the pool counts no allocations) do nothing;
``set_sync_debug_mode`` records a mode that nothing acts on. The NVML readings (``utilization``, ``temperature``,
``power_draw`` ..., ``list_gpu_processes``) come from nvidia-ml-py (``pynvml``) where it is installed, and raise
(or, for ``list_gpu_processes``, say) as PyTorch's where it is not. Left out, having nothing to stand on:
``memory_snapshot`` (the pool cannot list its blocks).
"""
from __future__ import annotations

import numbers
import sys as _sys
from types import SimpleNamespace

from . import backend

__all__ = ["is_available", "device_count", "current_device", "set_device", "get_device_name", "synchronize",
           "manual_seed", "manual_seed_all", "memory_allocated", "max_memory_allocated", "memory_reserved",
           "reset_peak_memory_stats", "empty_cache", "Event", "Stream", "stream", "current_stream", "default_stream",
           "is_bf16_supported", "get_device_capability", "get_device_properties", "mem_get_info",
           "is_current_stream_capturing", "get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all",
           "seed", "seed_all", "initial_seed", "device", "get_arch_list", "CUDAGraph", "graph", "graph_pool_handle",
           "max_memory_reserved", "reset_max_memory_allocated", "reset_max_memory_cached", "memory_cached",
           "max_memory_cached", "memory_stats", "memory_summary", "set_per_process_memory_fraction",
           "get_per_process_memory_fraction", "OutOfMemoryError", "set_stream", "StreamContext", "ExternalStream",
           "device_of", "init", "is_initialized", "is_tf32_supported", "can_device_access_peer",
           "nvtx", "profiler", "memory_stats_as_nested_dict", "reset_accumulated_memory_stats", "ipc_collect",
           "set_sync_debug_mode", "get_sync_debug_mode", "list_gpu_processes", "utilization", "memory_usage",
           "temperature", "power_draw", "clock_rate", "device_memory_used"]


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


def synchronize(device=None) -> None:
    """Wait for the work queued on ``device``'s current stream."""
    if is_available():
        with backend.cupy.cuda.Device(_index(device)):
            backend.cupy.cuda.get_current_stream().synchronize()


def manual_seed(seed: int) -> None:
    """Seed the CUDA generators. minifused seeds all devices from one seed, so this is
    :func:`minifused.manual_seed` (which also seeds the cpu generator), without its return value."""
    backend.manual_seed(int(seed))


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
_reserved_peaks = {}  # device index -> highest bytes the pool held, likewise
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
        used, held = pool.used_bytes(), pool.total_bytes()
        if used > _peaks.get(mem.device_id, 0):
            _peaks[mem.device_id] = used
        if held > _reserved_peaks.get(mem.device_id, 0):
            _reserved_peaks[mem.device_id] = held
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


def max_memory_reserved(device=None) -> int:
    """The most bytes the pool held from the driver on ``device`` since tracking began (see the module's doc)."""
    if not is_available():
        return 0
    _track()
    idx = _index(device)
    _reserved_peaks[idx] = max(_reserved_peaks.get(idx, 0), memory_reserved(idx))
    return _reserved_peaks[idx]


def reset_peak_memory_stats(device=None) -> None:
    """Start the peaks of :func:`max_memory_allocated` and :func:`max_memory_reserved` afresh from the current
    use."""
    reset_max_memory_allocated(device)
    reset_max_memory_cached(device)


def reset_max_memory_allocated(device=None) -> None:
    """Start the peak of :func:`max_memory_allocated` afresh from the current use."""
    if is_available():
        _track()
        idx = _index(device)
        _peaks[idx] = memory_allocated(idx)


def reset_max_memory_cached(device=None) -> None:
    """Start the peak of :func:`max_memory_reserved` afresh from the current use."""
    if is_available():
        _track()
        idx = _index(device)
        _reserved_peaks[idx] = memory_reserved(idx)


memory_cached, max_memory_cached = memory_reserved, max_memory_reserved  # PyTorch's older names


def memory_stats(device=None) -> dict:
    """PyTorch's allocator statistics that the pool can answer, under PyTorch's keys: ``allocated_bytes``
    (= ``active_bytes``: bytes held by live arrays), ``reserved_bytes`` (bytes held from the driver) and
    ``inactive_split_bytes`` (held but unused), each ``.all.current`` and ``.all.peak``; {} without CUDA, as
    PyTorch's before CUDA is initialized."""
    if not is_available():
        return {}
    idx = _index(device)
    used, held = memory_allocated(idx), memory_reserved(idx)
    used_peak, held_peak = max_memory_allocated(idx), max_memory_reserved(idx)
    stats = {}
    for name, current, peak in (("active_bytes", used, used_peak), ("allocated_bytes", used, used_peak),
                                ("inactive_split_bytes", held - used, None), ("reserved_bytes", held, held_peak)):
        stats[f"{name}.all.current"] = current
        if peak is not None:
            stats[f"{name}.all.peak"] = peak
    return dict(sorted(stats.items()))


def memory_summary(device=None, abbreviated=False) -> str:
    """A readable table of :func:`memory_stats` (current and peak, in MiB)."""
    stats = memory_stats(device)
    where = f"cuda:{_index(device)}" if is_available() else "no CUDA device"
    lines = [f"minifused CUDA memory summary ({where}, CuPy's memory pool)",
             f"{'metric':<24}{'current':>14}{'peak':>14}"]
    for name in ("allocated_bytes", "reserved_bytes", "inactive_split_bytes"):
        if f"{name}.all.current" in stats:
            peak = stats.get(f"{name}.all.peak")
            lines.append(f"{name:<24}{stats[name + '.all.current'] / 2 ** 20:>10.1f} MiB"
                         + (f"{peak / 2 ** 20:>10.1f} MiB" if peak is not None else f"{'-':>14}"))
    return "\n".join(lines) + "\n"


def set_per_process_memory_fraction(fraction, device=None) -> None:
    """Cap the pool on ``device`` at ``fraction`` of its memory: an allocation past it raises
    :class:`OutOfMemoryError` (CuPy's pool limit)."""
    cupy = _require("set_per_process_memory_fraction")
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if not 0 <= fraction <= 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    with cupy.cuda.Device(_index(device)):
        cupy.get_default_memory_pool().set_limit(fraction=fraction)


def get_per_process_memory_fraction(device=None) -> float:
    """The fraction of ``device``'s memory the pool may hold (1.0 when uncapped)."""
    cupy = _require("get_per_process_memory_fraction")
    with cupy.cuda.Device(_index(device)):
        limit = cupy.get_default_memory_pool().get_limit()
        total = cupy.cuda.runtime.memGetInfo()[1]
    return 1.0 if limit in (0, total) else limit / total


#: What running out of device memory raises (CuPy's error: ``except minifused.cuda.OutOfMemoryError`` catches it).
OutOfMemoryError = backend.cupy.cuda.memory.OutOfMemoryError if backend.cupy is not None else type(
    "OutOfMemoryError", (RuntimeError, MemoryError), {"__module__": __name__})


def empty_cache() -> None:
    """Give the pool's cached, unused blocks back to the driver."""
    if is_available():
        backend.cupy.get_default_memory_pool().free_all_blocks()


def memory_stats_as_nested_dict(device=None) -> dict:
    """:func:`memory_stats` nested at its dots (``{'allocated_bytes': {'all': {'current': ...}}}``), PyTorch's
    form of the same numbers; {} without CUDA."""
    nested = {}
    for key, value in memory_stats(device).items():
        *path, last = key.split(".")
        node = nested
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return nested


def reset_accumulated_memory_stats(device=None) -> None:
    """Nothing to reset: PyTorch's accumulated statistics are allocation and free counts, which CuPy's pool does
    not keep and :func:`memory_stats` does not report (its peaks are reset by :func:`reset_peak_memory_stats`)."""


def ipc_collect() -> None:
    """Nothing to collect: PyTorch frees here the memory of CUDA tensors other processes received through CUDA
    IPC, and minifused sends tensors to other processes by value, never through IPC."""


_SYNC_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}
_sync_debug_mode = [0]


def set_sync_debug_mode(debug_mode) -> None:
    """Record PyTorch's synchronization debug mode: 0 or 'default', 1 or 'warn', 2 or 'error';
    :func:`get_sync_debug_mode` returns it. minifused does not act on it: host-device synchronizations neither warn
    nor raise (except inside a captured step, which refuses them always), and the first call of a mode that asks
    for it says so in a warning."""
    if isinstance(debug_mode, str):
        if debug_mode not in _SYNC_DEBUG_MODES:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`")
        debug_mode = _SYNC_DEBUG_MODES[debug_mode]
    elif isinstance(debug_mode, bool) or not isinstance(debug_mode, numbers.Integral):
        raise RuntimeError("invalid argument to set_sync_debug_mode")
    if not 0 <= debug_mode <= 2:
        raise RuntimeError("invalid value of debug_mode, expected one of 0,1,2")
    if debug_mode:
        backend.warn_once("set_sync_debug_mode", "minifused.cuda.set_sync_debug_mode: the mode is recorded, but minifused "
                  "does not detect synchronizing operations (none warns or raises)")
    _sync_debug_mode[0] = int(debug_mode)


def get_sync_debug_mode() -> int:
    """The mode :func:`set_sync_debug_mode` recorded (0 until it is called)."""
    return _sync_debug_mode[0]


def _nvml():
    """``pynvml`` (nvidia-ml-py), initialized, or PyTorch's errors without it or without a driver."""
    try:
        import pynvml
    except ImportError as e:
        raise ModuleNotFoundError("nvidia-ml-py does not seem to be installed or it can't be imported.") from e
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_DriverNotLoaded as e:
        raise RuntimeError("cuda driver can't be loaded, is cuda enabled?") from e
    return pynvml


def _nvml_handle(pynvml, device, op):
    """NVML's handle of the CUDA device ``device`` (found by its PCI bus id, so CUDA_VISIBLE_DEVICES is heeded)."""
    bus_id = _require(op).cuda.Device(_index(device)).pci_bus_id
    return pynvml.nvmlDeviceGetHandleByPciBusId(bus_id)


def list_gpu_processes(device=None) -> str:
    """The processes running on ``device`` and the device memory each uses, as NVML (``nvidia-smi``) reports them,
    in PyTorch's words; without nvidia-ml-py or a driver, the sentence saying so."""
    try:
        pynvml = _nvml()
    except ModuleNotFoundError:
        return "pynvml module not found, please install nvidia-ml-py"
    except RuntimeError as e:
        return str(e)
    handle = _nvml_handle(pynvml, device, "list_gpu_processes")
    procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
    lines = [f"GPU:{pynvml.nvmlDeviceGetIndex(handle)}"]
    if not procs:
        lines.append("no processes are running")
    for p in procs:
        used = p.usedGpuMemory  # None where NVML cannot tell (no permission to see the process)
        amount = "an unknown amount of" if used is None else f"{used / (1024 * 1024):>12.3f} MB"
        lines.append(f"process {p.pid:>10d} uses {amount} GPU memory")
    return "\n".join(lines)


def _nvml_reading(op, read):
    def reading(device=None) -> int:
        pynvml = _nvml()
        return read(pynvml, _nvml_handle(pynvml, device, op))

    reading.__name__ = reading.__qualname__ = op
    return reading


utilization = _nvml_reading("utilization", lambda nv, h: nv.nvmlDeviceGetUtilizationRates(h).gpu)
utilization.__doc__ = "The percent of time over NVML's last sample period that a kernel ran on ``device``."
memory_usage = _nvml_reading("memory_usage", lambda nv, h: nv.nvmlDeviceGetUtilizationRates(h).memory)
memory_usage.__doc__ = "The percent of time over NVML's last sample period that ``device``'s memory was in use."
temperature = _nvml_reading("temperature", lambda nv, h: nv.nvmlDeviceGetTemperature(h, 0))
temperature.__doc__ = "``device``'s GPU die temperature in degrees Celsius (NVML's sensor 0)."
power_draw = _nvml_reading("power_draw", lambda nv, h: nv.nvmlDeviceGetPowerUsage(h))
power_draw.__doc__ = "``device``'s power draw in milliwatts, as NVML reports it."
clock_rate = _nvml_reading("clock_rate", lambda nv, h: nv.nvmlDeviceGetClockInfo(h, 1))
clock_rate.__doc__ = "``device``'s streaming-multiprocessor clock in MHz (NVML's clock 1)."
device_memory_used = _nvml_reading("device_memory_used", lambda nv, h: nv.nvmlDeviceGetMemoryInfo(h).used)
device_memory_used.__doc__ = "The bytes of ``device``'s memory in use by every process, as NVML reports them."


# ---------------------------------------------------------------- streams and events
class Stream:
    """``torch.cuda.Stream``: a CUDA stream (a CuPy stream underneath). Inside ``with minifused.cuda.stream(s)``
    (or ``with s``) it is the current stream, on which minifused queues its kernels."""

    def __init__(self, device=None, priority=0):
        cupy = _require("Stream")
        self.device_index = _index(device)
        with cupy.cuda.Device(self.device_index):
            self._stream = (cupy.cuda.Stream(non_blocking=True, priority=priority) if priority
                            else cupy.cuda.Stream(non_blocking=True))

    @classmethod
    def _of(cls, cupy_stream, device_index):
        s = cls.__new__(cls)
        s._stream, s.device_index = cupy_stream, device_index
        return s

    @property
    def cuda_stream(self) -> int:
        return self._stream.ptr

    def synchronize(self):
        self._stream.synchronize()

    def query(self) -> bool:
        return self._stream.done

    def wait_event(self, event):
        self._stream.wait_event(event._event)

    def wait_stream(self, stream):
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        event = Event() if event is None else event
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and self._stream.ptr == other._stream.ptr

    def __hash__(self):
        return hash(self._stream.ptr)

    def __enter__(self):
        self._stream.__enter__()
        return self

    def __exit__(self, *exc):
        return self._stream.__exit__(*exc)

    def __repr__(self):
        return f"<minifused.cuda.Stream device=cuda:{self.device_index} cuda_stream={self._stream.ptr:#x}>"


class Event:
    """``torch.cuda.Event``: a CUDA event; ``enable_timing`` lets ``elapsed_time`` measure between two."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        cupy = _require("Event")
        self._event = cupy.cuda.Event(block=blocking, disable_timing=not enable_timing, interprocess=interprocess)

    def record(self, stream=None):
        """Record on ``stream`` (the current stream when None)."""
        self._event.record(None if stream is None else stream._stream)

    def synchronize(self):
        self._event.synchronize()

    def query(self) -> bool:
        return self._event.done

    def wait(self, stream=None):
        """Make ``stream`` (the current one when None) wait for this event."""
        (current_stream() if stream is None else stream).wait_event(self)

    def elapsed_time(self, end_event) -> float:
        """Milliseconds between this event and ``end_event`` (both recorded, with timing enabled)."""
        return float(backend.cupy.cuda.get_elapsed_time(self._event, end_event._event))


def current_stream(device=None) -> Stream:
    cupy = _require("current_stream")
    index = _index(device)
    with cupy.cuda.Device(index):
        return Stream._of(cupy.cuda.get_current_stream(), index)


def default_stream(device=None) -> Stream:
    cupy = _require("default_stream")
    return Stream._of(cupy.cuda.Stream.null, _index(device))


class ExternalStream(Stream):
    """``torch.cuda.ExternalStream``: a stream made elsewhere (another library's ``cudaStream_t``, by address) on
    ``device`` (the current one when None), used as any :class:`Stream`; its owner keeps it alive."""

    def __init__(self, stream_ptr, device=None):
        cupy = _require("ExternalStream")
        if isinstance(stream_ptr, bool) or not isinstance(stream_ptr, int):
            raise backend.InputTypeError(f"minifused.cuda.ExternalStream: stream_ptr must be an int (a "
                                         f"cudaStream_t address), got {type(stream_ptr).__name__}")
        self.device_index = _index(device)
        if hasattr(cupy.cuda.Stream, "from_external"):  # CuPy 14 deprecates ExternalStream for this
            self._stream = cupy.cuda.Stream.from_external(_StreamAddress(stream_ptr))
        else:
            self._stream = cupy.cuda.ExternalStream(stream_ptr, self.device_index)


class _StreamAddress:
    """A raw stream address under the CUDA stream protocol (what ``Stream.from_external`` takes)."""

    def __init__(self, ptr):
        self.ptr = ptr

    def __cuda_stream__(self):
        return 0, self.ptr  # (protocol version, address)


def set_stream(stream) -> None:
    """Make ``stream`` the current stream (of its device, which becomes the current device, as PyTorch's);
    None does nothing. The :func:`stream` context manager is the better way: it restores what was current."""
    if stream is None:
        return
    if not isinstance(stream, Stream):
        raise backend.InputTypeError(f"minifused.cuda.set_stream: expected a minifused.cuda.Stream or None, got "
                                     f"{type(stream).__name__}")
    cupy = _require("set_stream")
    if cupy.cuda.runtime.getDevice() != stream.device_index:
        cupy.cuda.runtime.setDevice(stream.device_index)
    stream._stream.use()


class StreamContext:
    """``torch.cuda.StreamContext``, what :func:`stream` returns: inside ``with``, ``stream`` is the current stream
    (and its device the current device); on exit the streams (and the device) that were current come back.
    None, or no CUDA device, makes it a no-op. As PyTorch's, ``with ... as x`` gives None."""

    def __init__(self, stream):
        if stream is not None and not isinstance(stream, Stream):
            raise backend.InputTypeError(f"minifused.cuda.stream: expected a minifused.cuda.Stream or None, got "
                                         f"{type(stream).__name__}")
        self.stream = stream
        self.idx = backend.cupy.cuda.runtime.getDevice() if is_available() else -1
        self._saved = []  # per entry: (device, its stream, the target device's stream or None); re-entrant

    def __enter__(self):
        if self.stream is None or self.idx == -1:
            return
        cuda = backend.cupy.cuda
        dev, target = cuda.runtime.getDevice(), self.stream.device_index
        dst_prev = None
        if target != dev:  # the target device's own current stream changes too: keep it to restore
            with cuda.Device(target):
                dst_prev = cuda.get_current_stream()
        self._saved.append((dev, cuda.get_current_stream(), dst_prev))
        set_stream(self.stream)

    def __exit__(self, *exc):
        if self.stream is None or self.idx == -1:
            return False
        runtime = backend.cupy.cuda.runtime
        dev, src_prev, dst_prev = self._saved.pop()
        if dst_prev is not None:  # (CuPy's current streams are per device: use() sets the current device's)
            runtime.setDevice(self.stream.device_index)
            dst_prev.use()
        if runtime.getDevice() != dev:
            runtime.setDevice(dev)
        src_prev.use()
        return False


def stream(stream) -> StreamContext:
    """``with minifused.cuda.stream(s):`` makes ``s`` the current stream (None: a no-op), as PyTorch's: a
    :class:`StreamContext`."""
    return StreamContext(stream)


def _cuda_grad_scaler(init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                      enabled=True):
    """``torch.cuda.amp.GradScaler``: :class:`minifused.amp.GradScaler` on 'cuda' (its arguments, no device)."""
    from .amp import GradScaler

    return GradScaler("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


def _cuda_autocast(enabled=True, dtype=None, cache_enabled=True):
    """``torch.cuda.amp.autocast``: :class:`minifused.amp.autocast` on 'cuda' (float16 by default)."""
    from .amp import autocast

    return autocast("cuda", dtype, enabled, cache_enabled)


# device queries, random states and ``device``: in cuda_info (with ``_index``, the one parser of device arguments)
from .cuda_info import (can_device_access_peer, device, device_of, get_arch_list,  # noqa: E402,F401
                        get_device_capability, get_device_properties, get_rng_state, get_rng_state_all, init,
                        initial_seed, is_bf16_supported, is_current_stream_capturing, is_initialized,
                        is_tf32_supported, mem_get_info, seed, seed_all, set_rng_state, set_rng_state_all)
from .cuda_info import _index  # noqa: E402
from .graphs import CUDAGraph, graph, graph_pool_handle  # noqa: E402,F401 - PyTorch's graph API
from . import cuda_nvtx as nvtx, cuda_profiler as profiler  # noqa: E402 - torch.cuda.nvtx, torch.cuda.profiler

# ``import minifused.cuda.nvtx`` (this module is no package): the submodules under their PyTorch names
_sys.modules.setdefault(__name__ + ".nvtx", nvtx)
_sys.modules.setdefault(__name__ + ".profiler", profiler)

#: ``torch.cuda.amp``: the GradScaler and autocast under their older spellings.
amp = SimpleNamespace(GradScaler=_cuda_grad_scaler, autocast=_cuda_autocast)
