"""``torch.cuda.nvtx`` as ``minifused.cuda.nvtx``: NVTX ranges and markers, which Nsight Systems shows on its
timeline beside the kernels, through CuPy's NVTX binding (``cupy.cuda.nvtx``).

As PyTorch's, they need no GPU (NVTX records nothing until a profiler attaches); without CuPy's NVTX they raise a
RuntimeError naming themselves. CuPy's binding reports no nesting depth, so ``range_push`` and ``range_pop``
return None where PyTorch's return NVTX's depth (which is negative anyway while no profiler listens).
"""
from __future__ import annotations

from contextlib import contextmanager

from . import backend

__all__ = ["range_push", "range_pop", "range_start", "range_end", "mark", "range"]

_GREY = 0xFF808080  # CuPy's RangeStart takes an ARGB colour where PyTorch's range has none: a neutral one


def _nvtx(op):
    nvtx = None
    if backend.cupy is not None:
        from cupy.cuda import nvtx
    if nvtx is None or not nvtx.available:
        raise RuntimeError(f"minifused.cuda.nvtx.{op}: NVTX is not available (it needs CuPy with its NVTX library)")
    return nvtx


def range_push(msg):
    """Open a nested range named ``msg`` on this thread (closed by :func:`range_pop`)."""
    _nvtx("range_push").RangePush(msg)


def range_pop():
    """Close the innermost range :func:`range_push` opened on this thread."""
    _nvtx("range_pop").RangePop()


def range_start(msg) -> int:
    """Open a range named ``msg`` that may close on another thread; returns its id for :func:`range_end`."""
    return int(_nvtx("range_start").RangeStart(msg, _GREY))


def range_end(range_id) -> None:
    """Close the range :func:`range_start` opened under ``range_id``."""
    _nvtx("range_end").RangeEnd(range_id)


def mark(msg) -> None:
    """An instant event named ``msg``."""
    _nvtx("mark").Mark(msg)


@contextmanager
def range(msg, *args, **kwargs):  # noqa: A001 - PyTorch's name
    """``with nvtx.range("step {}", i):`` (or as a decorator): a range named ``msg.format(*args, **kwargs)``
    around the block."""
    range_push(msg.format(*args, **kwargs))
    try:
        yield
    finally:
        range_pop()
