"""PyTorch's ``torch.backends`` switches under PyTorch's names, so ``torch.backends.cuda.matmul.allow_tf32 =
True`` ports with the import changed. ``cudnn`` names the convolution kernels' switches (minifused has no
cuDNN; the names are PyTorch's). The TF32 switches themselves live in :mod:`minifused.backend`."""
from __future__ import annotations

import contextlib
from types import SimpleNamespace

from .backend import InputError, InputTypeError, tf32_conv, tf32_matmul

cuda = SimpleNamespace(matmul=tf32_matmul)
#: ``torch.backends.mps`` (Apple's GPUs): never available here, so device pickers written for PyTorch fall through
mps = SimpleNamespace(is_available=lambda: False, is_built=lambda: False)


class _Cudnn:
    """``torch.backends.cudnn``. ``allow_tf32`` is the convolutions' TF32 switch. ``benchmark`` and
    ``deterministic`` are accepted and change nothing: the convolution kernels pick their launch
    configuration from the shapes alone (no timing-based choice) and give the same bits on every
    run. ``enabled`` is accepted likewise (there is no cuDNN to turn off)."""

    __slots__ = ("benchmark", "deterministic", "enabled")

    def __init__(self):
        self.benchmark, self.deterministic, self.enabled = False, False, True

    @property
    def allow_tf32(self) -> bool:
        return tf32_conv.allow_tf32

    @allow_tf32.setter
    def allow_tf32(self, flag):
        tf32_conv.allow_tf32 = bool(flag)

    @staticmethod
    def is_available() -> bool:
        return False

    @contextlib.contextmanager
    def flags(self, enabled=True, benchmark=False, deterministic=False, allow_tf32=True):
        saved = self._get()
        self._set(enabled, benchmark, deterministic, allow_tf32)
        try:
            yield
        finally:
            self._set(*saved)

    def _get(self):
        return self.enabled, self.benchmark, self.deterministic, self.allow_tf32

    def _set(self, enabled, benchmark, deterministic, allow_tf32):
        self.enabled, self.benchmark, self.deterministic = enabled, benchmark, deterministic
        self.allow_tf32 = allow_tf32

    def __repr__(self):
        return (f"backends.cudnn(allow_tf32={self.allow_tf32}, benchmark={self.benchmark}, "
                f"deterministic={self.deterministic})")


cudnn = _Cudnn()


# ---------------------------------------------------------------- torch.set_float32_matmul_precision and co.
_matmul_precision = ["highest"]


def set_float32_matmul_precision(precision):
    """``torch.set_float32_matmul_precision``: 'highest' computes float32 Linear / matmul GEMMs in float32,
    'high' and 'medium' on TF32 tensor cores (``backends.cuda.matmul.allow_tf32``; convolutions keep
    ``backends.cudnn.allow_tf32``)."""
    if precision not in ("highest", "high", "medium"):
        raise ValueError(f"set_float32_matmul_precision: expected 'highest', 'high' or 'medium', got {precision!r}")
    tf32_matmul.allow_tf32 = precision != "highest"
    _matmul_precision[0] = precision


def get_float32_matmul_precision():
    if tf32_matmul.allow_tf32 == (_matmul_precision[0] != "highest"):
        return _matmul_precision[0]
    return "high" if tf32_matmul.allow_tf32 else "highest"  # the switch was flipped directly since


_deterministic = {"on": False, "warn_only": False}


def use_deterministic_algorithms(mode, *, warn_only=False):
    """``torch.use_deterministic_algorithms``. minifused's kernels already sum in fixed orders (no atomics);
    what can differ between two processes is a small GEMM's algorithm, chosen by timing its candidates
    (``kernels.cublaslt``): ``mode=True`` makes new GEMM plans take the heuristic's first choice instead (the
    same in every process), False restores the timing."""
    from .kernels import cublaslt

    if not isinstance(mode, bool) or not isinstance(warn_only, bool):
        raise TypeError(f"use_deterministic_algorithms: mode and warn_only must be bools, got {mode!r}, "
                        f"{warn_only!r}")
    cublaslt.DEFAULT_CONFIG = cublaslt.GemmConfig(small_gemm_flop=0) if mode else cublaslt.GemmConfig()
    _deterministic.update(on=mode, warn_only=warn_only)


def are_deterministic_algorithms_enabled():
    return _deterministic["on"]


def is_deterministic_algorithms_warn_only_enabled():
    return _deterministic["warn_only"]


# ---------------------------------------------------------------- torch.set_num_threads and co.
_threads = {"intra": None, "inter": None}


def _thread_count(op, n):
    if not isinstance(n, int) or isinstance(n, bool):
        raise InputTypeError(f"{op} expects an int, but got {type(n).__name__}")
    if n < 1:
        raise InputError(f"{op} expects a positive integer, got {n}")
    return n


def set_num_threads(n):
    """``torch.set_num_threads``, recorded for :func:`get_num_threads`: minifused's cpu ops are NumPy's, whose
    BLAS sets its thread count when it loads (``OMP_NUM_THREADS`` and the like), so the count changes nothing
    here."""
    _threads["intra"] = _thread_count("set_num_threads", n)


def get_num_threads():
    """The count :func:`set_num_threads` set, else the machine's CPUs that this process may use."""
    import os

    if _threads["intra"] is not None:
        return _threads["intra"]
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def set_num_interop_threads(n):
    """``torch.set_num_interop_threads``, recorded likewise (minifused runs no inter-op thread pool)."""
    _threads["inter"] = _thread_count("set_num_interop_threads", n)


def get_num_interop_threads():
    return _threads["inter"] or 1
