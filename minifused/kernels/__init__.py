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
from pathlib import Path

import numpy as np

KERNEL_DIR = Path(__file__).resolve().parent


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


@functools.cache
def is_sm90(dev: int) -> bool:
    """Compute capability 9.0 or newer: thread-block clusters, programmatic dependent launch."""
    import cupy

    return int(cupy.cuda.Device(dev).compute_capability) >= 90


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
    """Whether :func:`launch` uses programmatic dependent launch now (plans may differ with it)."""
    import cupy

    return cupy.cuda.get_current_stream().is_capturing() and is_sm90(cupy.cuda.runtime.getDevice())


def launch(kern, grid: tuple, block: tuple, args: tuple, shared_mem: int = 0, pdl: bool | None = None) -> None:
    """``kern(grid, block, args, shared_mem=...)``; while the current stream is being captured into a
    CUDA graph on an sm_90+ device, launched with programmatic dependent launch (PDL): the graph then lets
    the kernel's blocks start while the kernel before it drains, instead of after it has finished. The
    kernel must begin with ``pdl_entry()`` (launch.cuh), which waits for its predecessors before touching
    memory. Measured on an H100 (M = 4096, fp16, replayed graphs, share of the copy bandwidth, without /
    with): softmax forward N = 1024 0.751 / 0.807, 4096 0.915 / 0.938; LayerNorm forward N = 4096
    0.872 / 0.925; LayerNorm backward (GB/s, two bench runs) N = 1024 1792 / 1934, 4096 2387 / 2439.
    Eager launches stay CuPy's: this launch costs ~5 us more host time per call (21.6
    against 16.9 us for a LayerNorm forward), which small eager steps, bound by host time, would pay.
    ``pdl``: :func:`pdl_active` when the caller has asked already."""
    if not (pdl_active() if pdl is None else pdl):
        kern(grid, block, args, shared_mem=shared_mem)
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


@functools.cache
def _pdl_attrs():
    from cuda.bindings import driver

    attr = driver.CUlaunchAttribute()
    attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    attr.value.programmaticStreamSerializationAllowed = 1
    return [attr]
