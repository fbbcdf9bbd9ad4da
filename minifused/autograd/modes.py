"""Grad mode (``no_grad``, ``enable_grad``, ``inference_mode``, ``set_grad_enabled``) and the anomaly and
debug checks that ``Function.apply`` and the walk run on every op."""
from __future__ import annotations

import functools
import inspect
import threading
import warnings

from .. import backend


# ---------------------------------------------------------------- grad mode
class _GradMode(threading.local):
    enabled = True
    inference = False  # inside inference_mode(True): what is_inference_mode_enabled reports
    blocked = False  # grad mode turned on inside inference_mode: reported by is_grad_enabled, but nothing is recorded


_mode = _GradMode()


def is_grad_enabled() -> bool:
    return _mode.enabled or _mode.blocked


def _decorated(fn, guard):
    """``fn`` run inside a fresh ``guard()`` per call; a generator function's body inside one per resume, as
    PyTorch's (the caller's mode holds between the yields). A class decorated becomes a function constructing it
    in the mode, with PyTorch's FutureWarning."""
    if inspect.isclass(fn):
        warnings.warn("Decorating classes is deprecated and will be disabled in future versions. You should only "
                      "decorate functions or methods. To preserve the current behavior of class decoration, you can "
                      "directly decorate the `__init__` method and nothing else.", FutureWarning, stacklevel=3)
        cls = fn

        def fn(*args, **kwargs):
            return cls(*args, **kwargs)
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def generator(*args, **kwargs):
            gen = fn(*args, **kwargs)
            try:
                with guard():
                    value = gen.send(None)
                while True:
                    try:
                        sent = yield value
                    except GeneratorExit:
                        with guard():
                            gen.close()
                        raise
                    except BaseException as e:
                        with guard():
                            value = gen.throw(e)
                    else:
                        with guard():
                            value = gen.send(sent)
            except StopIteration as stop:
                return stop.value

        return generator

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with guard():
            return fn(*args, **kwargs)

    return wrapper


def _set(mode):
    """Grad mode on or off; inside ``inference_mode`` turning it on records nothing still (PyTorch's inference mode
    outranks grad mode), though :func:`is_grad_enabled` says it is on, as PyTorch's."""
    _mode.enabled, _mode.blocked = mode and not _mode.inference, mode and _mode.inference


class _GradModeGuard:
    """Sets grad mode on entry and restores it on exit; also a decorator. ``with ... as x`` binds None, as
    PyTorch's guards do."""

    def __init__(self, mode: bool = True):
        self.mode = bool(mode)
        self.prev = None

    def __enter__(self):
        self.prev = _mode.enabled, _mode.blocked
        _set(self.mode)

    def clone(self):
        """A fresh guard of the same kind and mode (PyTorch's ``clone``, which its decorators use)."""
        return type(self)()

    def __exit__(self, *exc):
        _mode.enabled, _mode.blocked = self.prev
        return False

    def __call__(self, fn):
        cls, mode = type(self), self.mode
        return _decorated(fn, lambda: _GradModeGuard(mode) if cls is set_grad_enabled else cls())


class set_grad_enabled(_GradModeGuard):
    """Turn grad mode on or off. As in PyTorch it takes effect at once, so ``set_grad_enabled(False)``
    works as a plain call; as a context manager (or decorator) it restores the previous mode on exit."""

    def __init__(self, mode: bool = True):
        if not isinstance(mode, bool):  # (PyTorch's: 0, 1 or a string is refused, not read as a truth value)
            raise TypeError(f"set_grad_enabled(): argument 'enabled' (position 1) must be bool, not "
                            f"{type(mode).__name__}")
        super().__init__(mode)
        self.prev = _mode.enabled, _mode.blocked
        _set(self.mode)

    def __enter__(self):
        pass  # the mode was set by the constructor; the mode before it is in self.prev

    def __call__(self, fn):
        _mode.enabled, _mode.blocked = self.prev  # as a decorator it changes the mode only while fn runs
        return super().__call__(fn)

    def clone(self):
        return set_grad_enabled(self.mode)


class _BareDecorator(_GradModeGuard):
    """A guard that also decorates uncalled: ``@no_grad`` as well as ``@no_grad()``, as in PyTorch."""

    def __new__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]):
            return cls()(args[0])
        return super().__new__(cls)


class no_grad(_BareDecorator):
    """Ops inside record nothing on the tape."""

    def __init__(self):
        super().__init__(False)


class enable_grad(_BareDecorator):
    def __init__(self):
        super().__init__(True)


class inference_mode(_BareDecorator):
    """PyTorch's ``inference_mode``: here the same as :class:`no_grad` (minifused has no separate
    inference tensors), a context manager and a decorator, except that ``enable_grad`` inside it records nothing
    either; ``inference_mode(False)`` turns grad mode on, as PyTorch's (inside ``no_grad`` too)."""

    def __init__(self, mode: bool = True):
        if not isinstance(mode, bool):
            raise TypeError(f"inference_mode(): mode must be a bool, got {type(mode).__name__}")
        super().__init__(not mode)
        self._flag = mode
        self._prev_inference = None

    def __enter__(self):
        self._prev_inference, _mode.inference = _mode.inference, self._flag
        super().__enter__()

    def __exit__(self, *exc):
        _mode.inference = self._prev_inference
        return super().__exit__(*exc)

    def __call__(self, fn):
        flag = self._flag
        return _decorated(fn, lambda: inference_mode(flag))

    def clone(self):
        return inference_mode(self._flag)


def is_inference_mode_enabled() -> bool:
    """Whether this thread is inside ``inference_mode()`` (``torch.is_inference_mode_enabled``)."""
    return _mode.inference


# ---------------------------------------------------------------- anomaly and debug modes
class _Checks(threading.local):
    anomaly = False
    nan = True  # whether anomaly mode checks the backward's gradients for NaN (PyTorch's check_nan)


_checks = _Checks()


class detect_anomaly:  # noqa: N801 - PyTorch's name
    """``torch.autograd.detect_anomaly(check_nan=True)``: inside, every backward's gradients are checked (with
    ``check_nan``): the first holding a NaN raises a RuntimeError naming the op and the shapes (costs a sync per
    node). As PyTorch's, forward outputs are not checked and infinities pass: ``-inf`` in an attention mask or an
    infinite gradient (``sqrt`` at 0) are legitimate values. Making one warns that the mode is slow, as
    PyTorch's does."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan
        self.prev = None
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
                      "enabled for debugging.", UserWarning, stacklevel=2)

    def __enter__(self):
        self.prev = _checks.anomaly, _checks.nan
        _checks.anomaly, _checks.nan = True, self.check_nan

    def __exit__(self, *exc):
        _checks.anomaly, _checks.nan = self.prev
        return False


class set_detect_anomaly:  # noqa: N801 - PyTorch's name
    """``torch.autograd.set_detect_anomaly(mode, check_nan=True)``: turns :class:`detect_anomaly`'s checks on or
    off as soon as it is called (so a plain call works), and, used as a context manager, restores the previous
    mode on exit. ``check_nan=False`` keeps anomaly mode on without its NaN checks, as PyTorch's."""

    def __init__(self, mode, check_nan=True):
        if not isinstance(mode, bool) or not isinstance(check_nan, bool):
            raise TypeError(f"set_detect_anomaly: mode and check_nan must be bools, got {mode!r} and {check_nan!r}")
        self.prev = _checks.anomaly, _checks.nan
        _checks.anomaly, _checks.nan = mode, check_nan

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _checks.anomaly, _checks.nan = self.prev
        return False


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on in this thread (``torch.is_anomaly_enabled``)."""
    return _checks.anomaly


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly detection checks gradients for NaN (``torch.is_anomaly_check_nan_enabled``); True outside
    anomaly mode too, as PyTorch's."""
    return _checks.nan


def _check_op(name, stage, arrays, inputs):
    """In debug mode, synchronize after each op so errors surface where they happen; under ``detect_anomaly``
    (with ``check_nan``), raise on the first of a backward's gradients ``arrays`` that holds a NaN, naming the op
    and the shapes of its ``inputs``. Forward outputs are not checked (a -inf mask is no anomaly)."""
    if backend.is_debug():
        backend.synchronize()
    if not (_checks.anomaly and _checks.nan) or not stage.startswith("backward"):
        return
    for i, a in enumerate(arrays):
        if a is None or not hasattr(a, "dtype") or not backend.is_floating(a.dtype):
            continue
        if bool(backend.array_module(a).isnan(a).any()):  # (PyTorch's words, then the op's shapes)
            raise RuntimeError(f"Function '{name}Backward' returned nan values in its {i}th output "
                               f"(detect_anomaly: {name} {stage} {i} (shape {tuple(a.shape)}) has NaN values; the "
                               f"op's inputs had shapes {[tuple(x.shape) for x in inputs if hasattr(x, 'shape')]})")
