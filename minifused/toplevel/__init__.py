"""PyTorch's top-level spellings that the layers below do not name themselves, gathered for ``import minifused as
torch`` code: the constants (``pi``, ``inf`` ...), the dtypes ``short``, ``uint16/32/64`` and ``complex64/128``,
the default device, anomaly and inference-mode queries, ``Stream`` / ``Event`` / ``GradScaler``, ``typename``, and
the families in this package's modules: the functional forms with ATen's signatures (``nn_forms``), the in-place,
query and ``*_copy`` forms of Tensor methods (``tensor_forms``), the ``_foreach_*`` list forms (``foreach``), creation
helpers and the trapezoid rule (``creation``), the legacy tensor types (``legacy``), the numerical ``gradient``
(``differences``), the deprecated ``ctc_loss`` / ``frobenius_norm`` / ``nuclear_norm`` / ``matrix_rank``
(``deprecated``), the process-wide switches and ``default_generator`` (``runtime``) and the ``version`` module.
Everything here is a thin spelling over an implementation below; it sits above the functional layer and below
nothing."""
from __future__ import annotations

import math
import os
import sys

import numpy as np

from .. import amp as _amp
from .. import autograd as _autograd
from .. import backend as _backend
from .. import cuda as _cuda
from ..autograd.modes import is_inference_mode_enabled
from ..tensor import Tensor as _Tensor
from . import creation, deprecated, extras, foreach, legacy, nn_forms, out_forms, runtime, tensor_forms, version
from . import windows
from .creation import *  # noqa: F401,F403
from .extras import *  # noqa: F401,F403
from .foreach import *  # noqa: F401,F403
from .windows import *  # noqa: F401,F403
from .legacy import *  # noqa: F401,F403
from .nn_forms import *  # noqa: F401,F403
from .tensor_forms import *  # noqa: F401,F403
from .out_forms import *  # noqa: F401,F403,A004 - add, div... with out=
from .deprecated import *  # noqa: F401,F403
from .differences import gradient  # noqa: F401
from .runtime import *  # noqa: F401,F403

# minifused.version is torch.version: importable by its name too (`from minifused.version import cuda`)
sys.modules.setdefault(__name__.rpartition(".")[0] + ".version", version)

pi, e, inf, nan = math.pi, math.e, math.inf, math.nan
newaxis = None  # x[:, minifused.newaxis] as NumPy's and PyTorch's
short = _backend.int16
uint16, uint32, uint64 = np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.uint64)
complex64 = cfloat = np.dtype(np.complex64)  # the complex tensors complex data makes (no complex32)
complex128 = cdouble = np.dtype(np.complex128)

Stream = _cuda.Stream  # torch.Stream(device, *, priority): the CUDA stream (minifused has no other accelerator)
GradScaler = _amp.GradScaler  # torch.GradScaler is torch.amp.GradScaler


class Event(_cuda.Event):
    """``torch.Event(device=None, *, enable_timing=False, blocking=False, interprocess=False)``: a CUDA event
    (:class:`minifused.cuda.Event`, whose first argument is ``enable_timing``)."""

    def __init__(self, device=None, *, enable_timing=False, blocking=False, interprocess=False):
        if device is not None and _backend.Device(device).type != "cuda":
            raise RuntimeError(f"Event: only CUDA events exist here, got device {device!r}")
        super().__init__(enable_timing, blocking, interprocess)


def get_default_device():
    """The device of tensors made without ``device=``: ``cuda`` when usable, else ``cpu``, unless
    :func:`set_default_device` or ``MINIFUSED_DEVICE`` chose one."""
    return _backend.default_device()


def set_default_device(device):
    """Make ``device`` (``'cpu'``, ``'cuda'``, ``'cuda:1'`` or a device) the default of tensors made without
    ``device=``, for the whole process; None goes back to minifused's own choice (``cuda`` when usable, where
    PyTorch's is ``cpu``). The setting is ``MINIFUSED_DEVICE``, the variable the default is read from, so worker
    processes started later inherit it."""
    if device is None:
        os.environ.pop("MINIFUSED_DEVICE", None)
    else:
        os.environ["MINIFUSED_DEVICE"] = str(_backend.device(device))  # checked usable before it is set
    _backend._env_default_device.cache_clear()


def is_anomaly_enabled():
    """Whether :class:`minifused.autograd.detect_anomaly`'s checks are on in this thread."""
    return _autograd.is_anomaly_enabled()


def is_anomaly_check_nan_enabled():
    """Whether anomaly mode's check of backward gradients for NaN is on in this thread."""
    return _autograd.is_anomaly_check_nan_enabled()


def set_anomaly_enabled(enabled, check_nan=True):
    """Turn anomaly detection on or off in this thread; ``check_nan=False`` leaves out its check of backward
    gradients for NaN."""
    _autograd.set_detect_anomaly(enabled, check_nan)


def typename(obj, /):
    """The type's name of ``obj``: a tensor's ``type()`` (``'minifused.FloatTensor'``), else the module and
    qualified name of ``obj`` if it is a class or function, of its class otherwise (``'int'`` for builtins)."""
    if isinstance(obj, _Tensor):
        return obj.type()
    if hasattr(obj, "__qualname__") or hasattr(obj, "__name__"):
        module, qualname = getattr(obj, "__module__", "") or "", getattr(obj, "__qualname__", None) or obj.__name__
    else:
        module, qualname = type(obj).__module__ or "", type(obj).__qualname__
    return qualname if module in ("", "builtins") else f"{module}.{qualname}"


#: ``torch.OutOfMemoryError``: what running out of device memory raises (``minifused.cuda.OutOfMemoryError``).
OutOfMemoryError = _cuda.OutOfMemoryError


def _assert(condition, message):
    """Python's ``assert condition, message`` as a function (``torch._assert``, which model code calls to check
    shapes): AssertionError when ``condition`` (a bool or one-element tensor) is false."""
    assert condition, message


__all__ = (creation.__all__ + out_forms.__all__ + foreach.__all__ + legacy.__all__ + nn_forms.__all__
           + tensor_forms.__all__ + extras.__all__ + windows.__all__ + deprecated.__all__ + runtime.__all__ + [
    "gradient", "version",
    "pi", "e", "inf", "nan", "newaxis", "short", "uint16", "uint32", "uint64", "Stream", "Event", "GradScaler",
    "complex64", "cfloat", "complex128", "cdouble",
    "get_default_device", "set_default_device", "is_anomaly_enabled", "is_anomaly_check_nan_enabled",
    "set_anomaly_enabled", "is_inference_mode_enabled", "typename", "_assert", "OutOfMemoryError"])
