"""Primitives on raw arrays (NumPy or CuPy), no autograd.

CUDA sources are ``.cu`` files in this folder, compiled once per configuration
by :func:`load_module` and cached. ``tests/test_kernel_build.py`` compiles every
``.cu`` file here with NVRTC for sm_80 and sm_90, without a GPU; a file may
list the option sets to check in comment lines of the form
``// nvrtc-check: -DBLOCK=256 -DT=float``.
"""
from __future__ import annotations

import functools
from pathlib import Path

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
