"""PyTorch's ``torch.backends`` switches under PyTorch's names, so ``torch.backends.cuda.matmul.allow_tf32 =
True`` ports with the import changed. ``cudnn`` names the convolution kernels' switches (minifused has no
cuDNN; the names are PyTorch's). The TF32 switches themselves live in :mod:`minifused.backend`."""
from __future__ import annotations

import contextlib
from types import SimpleNamespace

from .backend import tf32_conv, tf32_matmul

cuda = SimpleNamespace(matmul=tf32_matmul)


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
