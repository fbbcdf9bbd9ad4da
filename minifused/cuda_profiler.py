"""``torch.cuda.profiler`` as ``minifused.cuda.profiler``: turn the CUDA profiler's collection on and off
(``cudaProfilerStart`` / ``cudaProfilerStop``, through CuPy), so that ``nsys profile --capture-range=cudaProfilerApi``
or ``ncu --profile-from-start off`` records only the region between them. Without a CUDA device each raises a
RuntimeError naming itself, as PyTorch's raise.
"""
from __future__ import annotations

from contextlib import contextmanager

from . import backend

__all__ = ["start", "stop", "profile"]


def _profiler(op):
    if not backend.cuda_available():
        raise RuntimeError(f"minifused.cuda.profiler.{op}: no usable CUDA device was found")
    from cupy.cuda import profiler

    return profiler


def start() -> None:
    """Start the profiler's collection (``cudaProfilerStart``)."""
    _profiler("start").start()


def stop() -> None:
    """Stop the profiler's collection (``cudaProfilerStop``)."""
    _profiler("stop").stop()


@contextmanager
def profile():
    """``with profiler.profile():`` collects the block: :func:`start` before it, :func:`stop` after it (also when
    it raises)."""
    start()
    try:
        yield
    finally:
        stop()
