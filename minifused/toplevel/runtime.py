"""PyTorch's process-wide switches and handles at the top level: ``set_warn_always`` / ``is_warn_always_enabled``
(and :func:`warn_once`, the once-per-process warnings they govern), ``set_flush_denormal``, ``default_generator``
(the global cpu generator as a :class:`minifused.Generator`), ``to_dlpack`` and ``get_deterministic_debug_mode`` /
``set_deterministic_debug_mode``."""
from __future__ import annotations

import numbers

from .. import backend, backends
from ..tensor import Tensor
from ..backend import InputError, InputTypeError

__all__ = ["set_warn_always", "is_warn_always_enabled", "set_flush_denormal", "default_generator", "to_dlpack",
           "get_deterministic_debug_mode", "set_deterministic_debug_mode"]

from ..backend import is_warn_always_enabled, set_warn_always, warn_once  # noqa: E402,F401 - (kept in backend)


_flush_denormal = [False]


def set_flush_denormal(mode):
    """Whether denormal floats may be flushed to zero on the cpu: PyTorch sets the cpu's FTZ/DAZ flags and
    returns True where the cpu supports them. minifused's cpu tensors are NumPy arrays, whose arithmetic keeps
    denormals and has no such switch, so asking to flush returns False (PyTorch's answer on a cpu without the
    flags) and changes nothing; ``set_flush_denormal(False)``, the state minifused is always in, returns True.
    CUDA kernels are unaffected, as in PyTorch."""
    if not isinstance(mode, bool):
        raise RuntimeError(f"flush_denormal expects a bool, but got {type(mode).__name__}")
    return not mode


class _DefaultGenerator(backend.Generator):
    """``torch.default_generator``: the global cpu generator, the one ``minifused.manual_seed`` seeds and random
    ops draw from without ``generator=``. Every draw and state read goes to that generator as it is at the call
    (``manual_seed`` replaces it), so ``randn(3, generator=default_generator)`` continues the global stream.
    ``manual_seed(s)`` seeds as :func:`minifused.manual_seed` does (the CUDA generators too, minifused seeding all
    devices from one seed) and returns the generator; ``initial_seed()`` is :func:`minifused.initial_seed`."""

    _OWN = frozenset(("manual_seed", "initial_seed", "seed", "get_state", "set_state", "device", "_seed", "_OWN"))

    def __init__(self):
        super().__init__()

    def __getattribute__(self, name):
        if name.startswith("__") or name in _DefaultGenerator._OWN:
            return object.__getattribute__(self, name)
        return getattr(backend._generators.get(backend.CPU), name)

    def manual_seed(self, seed):
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise RuntimeError(f"manual_seed expected a long, but got {type(seed).__name__}")
        backend.manual_seed(int(seed))
        return self

    def initial_seed(self):
        return backend.initial_seed()

    def seed(self):
        """Seed from the operating system's entropy (:func:`minifused.seed`); returns the seed."""
        return backend.seed()

    def __repr__(self):
        return "<minifused.Generator: the default cpu generator>"

    __str__ = __repr__

    def __reduce__(self):
        """Pickled (or deep-copied): a separate generator in the global one's present state and seed."""
        return _generator_copy, (backend.initial_seed(), self.get_state())


def _generator_copy(seed, state):
    copy = backend.Generator()
    copy._seed = seed
    return copy.set_state(state)


default_generator = _DefaultGenerator()


def to_dlpack(tensor):
    """The tensor's data as a DLPack capsule (``tensor.__dlpack__()``), which ``from_dlpack`` of minifused, NumPy,
    CuPy or PyTorch takes without a copy."""
    if not isinstance(tensor, Tensor):
        raise InputTypeError(f"to_dlpack(): argument 'tensor' (position 1) must be Tensor, not "
                             f"{type(tensor).__name__}")
    return tensor.__dlpack__()


_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_deterministic_debug_mode(debug_mode):
    """PyTorch's other spelling of :func:`minifused.use_deterministic_algorithms`: ``"default"`` or 0 turns it
    off, ``"warn"`` or 1 on with ``warn_only=True``, ``"error"`` or 2 on."""
    if not isinstance(debug_mode, (int, str)):
        raise InputTypeError(f"set_deterministic_debug_mode: debug_mode must be str or int, but got "
                             f"{type(debug_mode).__name__}")
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise InputError(f"set_deterministic_debug_mode: invalid value of debug_mode, expected one of "
                             f"`default`, `warn`, `error`, but got {debug_mode}")
        debug_mode = _DEBUG_MODES[debug_mode]
    if debug_mode not in (0, 1, 2):
        raise InputError(f"set_deterministic_debug_mode: invalid value of debug_mode, expected 0, 1, or 2, but "
                         f"got {debug_mode}")
    backends.use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode():
    """0, 1 or 2 (see :func:`set_deterministic_debug_mode`), read from
    :func:`minifused.use_deterministic_algorithms`'s state, whichever function set it."""
    if not backends.are_deterministic_algorithms_enabled():
        return 0
    return 1 if backends.is_deterministic_algorithms_warn_only_enabled() else 2
