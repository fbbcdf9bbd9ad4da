"""``torch.cpu``: the ``torch.cuda`` counterparts that device-agnostic code calls with ``device_type='cpu'``, as
PyTorch's: one device, always available and initialized, named 'cpu'; its streams and events stand in and wait
for nothing (cpu ops run to completion before they return). ``amp``: the deprecated ``torch.cpu.amp`` spellings.
"""
from __future__ import annotations

import warnings
from types import SimpleNamespace

__all__ = ["is_available", "is_initialized", "synchronize", "current_device", "current_stream", "stream",
           "set_device", "device_count", "Stream", "StreamContext", "Event"]


def is_available() -> bool:
    return True


def is_initialized() -> bool:
    return True


def device_count() -> int:
    """The cpu devices (not cores): 1."""
    return 1


def current_device() -> str:
    return "cpu"


def set_device(device) -> None:
    """Does nothing: there is one cpu device."""


def synchronize(device=None) -> None:
    """Does nothing: cpu ops have finished when they return (``device`` is ignored, as PyTorch's)."""


class Stream:
    """A cpu stream: runs nothing of its own, so it waits for nothing."""

    def __init__(self, priority=-1):
        pass

    def wait_stream(self, stream):
        pass

    def record_event(self):
        pass

    def wait_event(self, event):
        pass


class Event:
    def query(self) -> bool:
        return True

    def record(self, stream=None):
        pass

    def synchronize(self):
        pass

    def wait(self, stream=None):
        pass


_default_stream = Stream()
_current = [_default_stream]


def current_stream(device=None) -> Stream:
    return _current[0]


class StreamContext:
    """``with stream(s):`` makes ``s`` the current cpu stream (None: a no-op), the previous one back on exit."""

    def __init__(self, stream):
        self.stream, self.prev_stream = stream, _default_stream

    def __enter__(self):
        if self.stream is not None:
            self.prev_stream, _current[0] = _current[0], self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            _current[0] = self.prev_stream


def stream(stream) -> StreamContext:
    return StreamContext(stream)


def _cpu_autocast(enabled=True, dtype=None, cache_enabled=True):
    """``torch.cpu.amp.autocast``, deprecated (PyTorch's FutureWarning): :class:`minifused.amp.autocast` on 'cpu'
    (bfloat16 by default)."""
    from .amp import autocast

    warnings.warn("`minifused.cpu.amp.autocast(args...)` is deprecated. Please use `minifused.amp.autocast('cpu', "
                  "args...)` instead.", FutureWarning, stacklevel=2)
    return autocast("cpu", dtype, enabled, cache_enabled)


def _cpu_grad_scaler(init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                     enabled=True):
    """``torch.cpu.amp.GradScaler``, deprecated (PyTorch's FutureWarning): :class:`minifused.amp.GradScaler` on
    'cpu'."""
    from .amp import GradScaler

    warnings.warn("`minifused.cpu.amp.GradScaler(args...)` is deprecated. Please use `minifused.amp.GradScaler('cpu', "
                  "args...)` instead.", FutureWarning, stacklevel=2)
    return GradScaler("cpu", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


#: ``torch.cpu.amp``: autocast and GradScaler under their deprecated spellings.
amp = SimpleNamespace(autocast=_cpu_autocast, GradScaler=_cpu_grad_scaler)
