"""Primitives on raw arrays (NumPy or CuPy), no autograd.

CUDA sources are ``.cu`` files in this folder, compiled once per configuration
by :func:`load_module` and cached. ``tests/test_kernel_build.py`` compiles every
``.cu`` file here with NVRTC for sm_80 and sm_90, without a GPU; a file may
list the option sets to check in comment lines of the form
``// nvrtc-check: -DBLOCK=256 -DT=float``. Kernels that begin with ``pdl_entry()``
(launch.cuh) launch through :func:`launch`, with programmatic dependent launch in graph captures.
"""
from __future__ import annotations

import ctypes
import functools
import math
from pathlib import Path

import numpy as np

from .. import backend
from .special_math import erf64

KERNEL_DIR = Path(__file__).resolve().parent

# ---------------------------------------------------------------- the toolbox every kernel module shares
#: The C++ element type of each dtype the CUDA kernels take (dtypes.cuh converts them).
CTYPE = {backend.float16: "__half", backend.bfloat16: "__nv_bfloat16", backend.float32: "float",
         backend.float64: "double"}

#: The null pointer kernel argument of an optional array.
NULL = np.uint64(0)

#: The activations a GEMM or convolution epilog can apply (``None``: none).
ACTIVATIONS = (None, "relu", "gelu")


def acc_dtype(dtype) -> np.dtype:
    """The accumulation dtype of ``dtype``: float64 for float64, float32 for everything else."""
    return backend.float64 if np.dtype(dtype) == backend.float64 else backend.float32


def clear_unset(a, keep):
    """Set to +0, in place, each element of ``a`` (an array the caller owns) where ``keep`` (bools or 0/1
    integers of a's shape) is false; returns ``a``. An and of each element's bits with all ones or all zeros:
    a NaN or inf is dropped where the bit is unset, as a select drops it (a product would keep it), at a
    fraction of NumPy's ``where`` cost. The host paths' ReLU masks; NumPy or CuPy."""
    xp = backend.array_module(a)
    word = np.dtype(f"u{a.itemsize}")
    bits = a.view(word)
    xp.bitwise_and(bits, keep.astype(word) * word.type(np.iinfo(word).max), out=bits)
    return a


def ctype(dtype) -> str:
    """The C++ element type of ``dtype``, for a ``-DT=...`` compile option."""
    return CTYPE[np.dtype(dtype)]


def address(a) -> int:
    """The device address of CuPy array ``a``, 0 for None: a :class:`Prepared` launch's pointer argument."""
    return 0 if a is None else a.data.ptr


def aligned_bytes(nbytes: int) -> int:
    """``nbytes`` rounded up to 256: the offset of the next part of one allocation shared by several buffers,
    which then starts aligned as an allocation of its own does."""
    return -(-int(nbytes) // 256) * 256


# ---------------------------------------------------------------- memory layouts
# A 4-d (N, C, H, W) array is C-contiguous (PyTorch's contiguous_format) or channels-last: a view, under the same
# shape, of a C-contiguous (N, H, W, C) array, whose strides are then those below. Where both hold (C == 1 or
# H * W == 1) the array counts as C-contiguous.
def _channels_last_strides(shape, itemsize):
    n, c, h, w = shape
    return (h * w * c * itemsize, itemsize, w * c * itemsize, c * itemsize)


def channels_last_strided(a) -> bool:
    """Whether ``a`` is a 4-d array whose memory is (N, H, W, C) in C order (maybe C-contiguous as well)."""
    return a.ndim == 4 and _channels_last_layout(a.shape, a.strides, a.itemsize)


@functools.lru_cache(maxsize=4096)  # asked hundreds of times a step, of a model's few dozen layouts
def _channels_last_layout(shape, strides, itemsize):
    return _same_strides(shape, strides, _channels_last_strides(shape, itemsize))


def channels_last_3d_strided(a) -> bool:
    """Whether ``a`` is a 5-d array whose memory is (N, D, H, W, C) in C order (maybe C-contiguous as well)."""
    if a.ndim != 5:
        return False
    n, c, d, h, w = a.shape
    size = a.itemsize
    return _same_strides(a.shape, a.strides, (d * h * w * c * size, size, h * w * c * size, w * c * size, c * size))


def c_contiguous(a) -> bool:
    """``a.flags.c_contiguous`` of a NumPy or CuPy array. (CuPy's ``flags`` builds an object per read, its
    ``_c_contiguous`` is the flag itself: the ops' hot paths ask hundreds of times a training step.)"""
    return a.flags.c_contiguous if isinstance(a, np.ndarray) else a._c_contiguous


def is_channels_last(a) -> bool:
    """Whether ``a`` is a 4-d array laid out channels-last and not also C-contiguous."""
    return not c_contiguous(a) and channels_last_strided(a)


def _same_strides(shape, strides, expected):
    # axes of one element may have any stride (NumPy and CuPy give them different ones)
    return all(n == 1 or s == e for n, s, e in zip(shape, strides, expected))


def to_channels_last(a):
    """``a`` (N, C, H, W) laid out channels-last: ``a`` itself where its memory already is, else a copy."""
    if channels_last_strided(a):
        return a
    xp = backend.array_module(a)
    return xp.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


def to_channels_last_3d(a):
    """``a`` (N, C, D, H, W) laid out channels-last (memory (N, D, H, W, C)): ``a`` itself where it already is,
    else a copy. (The kernels' channels-last paths are 4-d ones: a 5-d array in this layout is only laid out so.)"""
    if channels_last_3d_strided(a):
        return a
    xp = backend.array_module(a)
    return xp.ascontiguousarray(a.transpose(0, 2, 3, 4, 1)).transpose(0, 4, 1, 2, 3)


def to_layout(a, channels_last: bool):
    """``a`` channels-last, or C-contiguous: ``a`` itself where it already is."""
    if channels_last:
        return to_channels_last(a)
    return a if c_contiguous(a) else backend.array_module(a).ascontiguousarray(a)


def empty_channels_last(shape, dtype):
    """An uninitialized CuPy array of ``shape`` (N, C, H, W) laid out channels-last, a view of nothing (its own
    memory, so that it may become a leaf's ``.grad`` as it is)."""
    import cupy

    n, c, h, w = shape
    size = np.dtype(dtype).itemsize
    return cupy.ndarray(shape, dtype, cupy.cuda.alloc(n * c * h * w * size),
                        strides=(h * w * c * size, size, w * c * size, c * size))


def layout_like(a, ref):
    """``a`` laid out as ``ref`` is: channels-last where ``ref`` is, else C order; ``a`` itself where it already
    is (the fused optimizers walk a parameter, its gradient and its state in one memory order)."""
    return to_layout(a, is_channels_last(ref))


def copy_in_layout(a, channels_last: bool):
    """A new array holding ``a``'s elements, laid out channels-last (``a`` 4-d; or 5-d: (N, D, H, W, C) memory) or
    in C order."""
    if not channels_last:
        return backend.copy(a)
    xp = backend.array_module(a)
    if a.ndim == 5:
        n, c, d, h, w = a.shape
        with backend.on_device(backend.device_of(a)):
            out = xp.empty((n, d, h, w, c), a.dtype).transpose(0, 4, 1, 2, 3)
    elif xp is np:
        n, c, h, w = a.shape
        out = np.empty((n, h, w, c), a.dtype).transpose(0, 3, 1, 2)
    else:
        with a.device:
            out = empty_channels_last(a.shape, a.dtype)
    out[...] = a
    return out


def empty_like_layout(ref, dtype):
    """An uninitialized array of ``ref``'s shape and device in ``dtype``, laid out as ``ref`` (channels-last or
    C order)."""
    xp = backend.array_module(ref)
    if not is_channels_last(ref):
        return xp.empty(ref.shape, dtype)
    if xp is np:
        n, c, h, w = ref.shape
        return np.empty((n, h, w, c), dtype).transpose(0, 3, 1, 2)
    return empty_channels_last(ref.shape, dtype)


def grid_1d(total: int, threads: int) -> int:
    """Blocks of ``threads`` that cover ``total`` elements (at least one)."""
    return max(1, -(-int(total) // threads))


@functools.cache
def compute_capability(dev: int) -> int:
    """The device's compute capability as an int (90 for an H100)."""
    import cupy

    return int(cupy.cuda.Device(dev).compute_capability)


@functools.cache
def sm_count(dev: int) -> int:
    """Streaming multiprocessors of the device."""
    import cupy

    return cupy.cuda.runtime.getDeviceProperties(dev)["multiProcessorCount"]


#: Shared memory of an sm_90 SM (bytes), of which each resident block takes 1 KiB more than it asks for.
SM_SHARED_BYTES = 233472


def smem_per_block(dev: int) -> int:
    """The most shared memory one block of the device may ask for (bytes, its opt-in limit)."""
    import cupy

    return cupy.cuda.runtime.getDeviceProperties(dev)["sharedMemPerBlockOptin"]


@functools.cache
def l2_bytes(dev: int) -> int:
    """The device's L2 cache (bytes)."""
    import cupy

    return cupy.cuda.runtime.getDeviceProperties(dev)["l2CacheSize"]


def has_pdl(dev: int) -> bool:
    """sm_90 or newer: thread-block clusters, programmatic dependent launch."""
    return compute_capability(dev) >= 90


def has_wgmma(dev: int) -> bool:
    """Exactly sm_90 (Hopper): ``wgmma`` instructions (sm_100 does not have them)."""
    return compute_capability(dev) == 90


# GELU, PyTorch's definitions; activation.cuh has the same constants for the kernels.
GELU_C = math.sqrt(2.0 / math.pi)
GELU_CUBIC = 0.044715


def gelu_ref(z, approximate="tanh"):
    """GELU of ``z`` in float64 (NumPy): the tanh approximation or, ``approximate="none"``, exact."""
    z = np.asarray(z, dtype=np.float64)
    if approximate == "tanh":
        return 0.5 * z * (1.0 + np.tanh(GELU_C * (z + GELU_CUBIC * z ** 3)))
    return 0.5 * z * (1.0 + erf64(z / math.sqrt(2.0)))


def gelu_grad_ref(z, approximate="tanh"):
    """d GELU(z) / dz in float64 (NumPy)."""
    z = np.asarray(z, dtype=np.float64)
    if approximate == "tanh":
        t = np.tanh(GELU_C * (z + GELU_CUBIC * z ** 3))
        return 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * GELU_C * (1.0 + 3 * GELU_CUBIC * z * z)
    cdf = 0.5 * (1.0 + erf64(z / math.sqrt(2.0)))
    return cdf + z * np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)


# ---------------------------------------------------------------- compiling and launching


def source(filename: str) -> str:
    return (KERNEL_DIR / filename).read_text()


@functools.cache
def load_module(filename: str, options: tuple = (), name_expressions: tuple = ()):
    """A compiled ``cupy.RawModule`` for ``filename`` with ``options``, cached per configuration."""
    import cupy

    return cupy.RawModule(
        code=source(filename),
        options=("--std=c++17", f"-I{KERNEL_DIR}") + tuple(options),
        name_expressions=name_expressions or None,
    )


def get_kernel(filename: str, name: str, options: tuple = (), name_expressions: tuple = ()):
    """One function of a compiled module (``name`` may be a template instantiation)."""
    return load_module(filename, options, name_expressions).get_function(name)


def _param(a):
    """(value, ctypes type) of one kernel argument, as ``cuLaunchKernelEx`` takes it."""
    import cupy

    if isinstance(a, cupy.ndarray):
        return a.data.ptr, ctypes.c_void_p
    if isinstance(a, np.uint64):  # the null pointer of optional arrays
        return int(a), ctypes.c_void_p
    if isinstance(a, np.int32):
        return int(a), ctypes.c_int
    if isinstance(a, np.int64):
        return int(a), ctypes.c_longlong
    if isinstance(a, np.float32):
        return float(a), ctypes.c_float
    raise TypeError(f"launch: unsupported kernel argument type {type(a).__name__}")


def pdl_active() -> bool:
    """Whether :func:`launch` uses programmatic dependent launch now (plans may differ with it): inside
    minifused's own captures (``capture_step``; the flag costs no driver query, which every eager launch
    would pay) on a GPU that has it."""
    if not backend.is_capturing():
        return False
    import cupy

    return has_pdl(cupy.cuda.runtime.getDevice())


def launch(kern, grid: tuple, block: tuple, args: tuple, shared_mem: int = 0, pdl: bool | None = None) -> None:
    """``kern(grid, block, args, shared_mem=...)``; while the current stream is being captured into a
    CUDA graph on an sm_90+ device, launched with programmatic dependent launch (PDL): the graph then lets
    the kernel's blocks start while the kernel before it drains, instead of after it has finished. The
    kernel must begin with ``pdl_entry()`` (launch.cuh), which waits for its predecessors before touching
    memory. It pays in graphs (bench/norms.py measures it). Eager launches stay CuPy's: this launch costs
    more host time per call, which small eager steps, bound by host time, would pay.
    ``pdl``: :func:`pdl_active` when the caller has asked already."""
    if not (pdl_active() if pdl is None else pdl):
        kern.kernel(grid, block, args, shared_mem)  # the Function itself: less host time than RawKernel's call
        return
    import cupy
    from cuda.bindings import driver

    stream = cupy.cuda.get_current_stream()
    cfg = driver.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = (tuple(grid) + (1, 1))[:3]
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = (tuple(block) + (1, 1))[:3]
    cfg.sharedMemBytes = shared_mem
    cfg.hStream = driver.CUstream(stream.ptr)
    cfg.attrs, cfg.numAttrs = _pdl_attrs(), 1
    vals, types = zip(*(_param(a) for a in args))
    err, = driver.cuLaunchKernelEx(cfg, driver.CUfunction(kern.kernel.ptr), (vals, types), 0)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{kern.name}: cuLaunchKernelEx with programmatic dependent launch failed: {err}")


_current_stream = None  # CuPy's current stream, bound by the first Prepared
_capture = backend._capture  # (whether this thread is capturing: pdl_active's first test, inlined in Prepared)

#: A :class:`Prepared` parameter given per call: an 8-byte value (an array's address, an integer).
ARG = "arg"
#: A :class:`Prepared` parameter given per call as the address of a struct passed by value (a tensor map).
REF = "ref"
#: A :class:`Prepared` parameter given per call: a float32.
F32 = "f32"


class Prepared:
    """One kernel's launch with its parameter buffer laid out once: a call writes only the values that change
    (the arrays' addresses), all in one ``struct`` pack, and calls the driver's ``cuLaunchKernel``. CuPy's launch
    converts every argument on every call, which costs a small kernel of an eager training step more host time
    than the launch itself.

    ``params`` has one entry per kernel parameter, in order: :data:`ARG`, :data:`F32` or :data:`REF` for a value
    the call gives (in that order; the REFs, if any, first), or a constant: a NumPy scalar (its bytes) or a CuPy
    array (its address; the launch keeps it alive). ``grid`` and ``block`` are fixed; ``pdl``: the kernel begins
    with ``pdl_entry()``, so in graph captures it launches as :func:`launch` does; ``cooperative``: the blocks wait
    for each other, so the launch (``cuLaunchCooperativeKernel``) starts them only once all fit on the GPU together
    (never some of them waiting for SMs that others hold). Made for the current device (its kernel function), as
    the plans that hold one are. A lock keeps two threads from filling one buffer at once."""

    __slots__ = ("name", "_fn", "_dims", "_launch", "_buf", "_table_ptr", "_refs", "_ref_at", "_pack_refs", "_pack",
                 "_fill", "_cells", "_keep", "_lock", "_pdl")

    def __init__(self, kern, grid, block, params, smem=0, pdl=False, cooperative=False):
        import struct
        import threading

        import cupy
        from cupy_backends.cuda.api.driver import launchCooperativeKernel, launchKernel

        global _current_stream
        _current_stream = cupy.cuda.get_current_stream

        fn = kern.kernel if isinstance(kern, cupy.RawKernel) else kern
        self.name, self._fn, self._pdl = getattr(kern, "name", "kernel"), fn, pdl
        grid, block = (tuple(grid) + (1, 1))[:3], (tuple(block) + (1, 1))[:3]
        self._dims = (*(int(v) for v in grid), *(int(v) for v in block), int(smem))
        if cooperative:  # (the same call but for launchKernel's `extra`, always 0 here)
            start = functools.partial(launchCooperativeKernel, fn.ptr, *self._dims)
            self._launch = lambda stream, table, extra: start(stream, table)
        else:
            self._launch = functools.partial(launchKernel, fn.ptr, *self._dims)
        # one buffer of 8-byte slots: the kernelParams table (n pointers), then a cell per parameter value: first
        # the values given per call, in call order (one pack writes them), then the constants
        n = len(params)
        given = [i for i, p in enumerate(params) if p is ARG or p is F32]
        refs = [i for i, p in enumerate(params) if p is REF]
        if refs and (refs != list(range(refs[0], refs[0] + len(refs))) or given and given[0] < refs[-1]):
            raise TypeError(f"Prepared({self.name}): REF parameters must be adjacent and come before every ARG "
                            f"and F32")
        constants = [i for i, p in enumerate(params) if i not in given and i not in refs]
        self._buf = np.zeros(max(2 * n, 1), np.int64)
        raw = self._buf.view(np.uint8)
        base = self._buf.ctypes.data
        for cell, i in enumerate(given + constants):
            self._buf[i] = base + 8 * (n + cell)
        self._table_ptr = base
        self._cells = 8 * n
        self._refs, self._ref_at = len(refs), 8 * (refs[0] if refs else 0)
        self._pack_refs = struct.Struct("<" + "Q" * len(refs)).pack_into
        self._pack = struct.Struct("<" + "".join("f4x" if params[i] is F32 else "q" for i in given)).pack_into
        # a call's one write of its values (a partial where there are no REFs: the common case, fewest steps)
        self._fill = self._fill_refs if refs else functools.partial(self._pack, self._buf, self._cells)
        self._keep = []
        for cell, i in enumerate(constants, start=n + len(given)):
            p = params[i]
            if isinstance(p, cupy.ndarray):
                self._buf[cell] = p.data.ptr
                self._keep.append(p)
            elif isinstance(p, np.generic) and p.nbytes <= 8:
                raw[8 * cell:8 * cell + p.nbytes] = np.frombuffer(p.tobytes(), np.uint8)
            else:
                raise TypeError(f"Prepared({self.name}): parameter {i} must be ARG, F32, REF, a NumPy scalar of up to "
                                f"8 bytes or a CuPy array, got {type(p).__name__}")
        self._lock = threading.Lock()

    def __call__(self, *values):
        with self._lock:
            self._fill(*values)
            if _capture.name is None or not self._pdl or not pdl_active():  # (eager launches: one test)
                self._launch(_current_stream().ptr, self._table_ptr, 0)
            else:
                self._launch_pdl(_current_stream().ptr)

    def _fill_refs(self, *values):
        """The values into the buffer where REFs lead them: the structs' addresses go into the table itself."""
        self._pack_refs(self._buf, self._ref_at, *values[:self._refs])
        self._pack(self._buf, self._cells, *values[self._refs:])

    def _launch_pdl(self, stream):
        from cuda.bindings import driver

        cfg = driver.CUlaunchConfig()
        (cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ, cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ,
         cfg.sharedMemBytes) = self._dims
        cfg.hStream = driver.CUstream(stream)
        cfg.attrs, cfg.numAttrs = _pdl_attrs(), 1
        err, = driver.cuLaunchKernelEx(cfg, driver.CUfunction(self._fn.ptr), self._table_ptr, 0)
        if err != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"{self.name}: cuLaunchKernelEx with programmatic dependent launch failed: {err}")


@functools.cache
def _pdl_attrs():
    from cuda.bindings import driver

    attr = driver.CUlaunchAttribute()
    attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    attr.value.programmaticStreamSerializationAllowed = 1
    return [attr]
