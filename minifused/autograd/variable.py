"""``torch.autograd.Variable``: PyTorch's legacy wrapper, today a spelling of Tensor. ``Variable(t)`` gives a
tensor sharing ``t``'s data, cut from the tape, that requires grad if asked; ``isinstance(x, Variable)`` holds for
every tensor (while ``issubclass(Tensor, Variable)`` does not), as PyTorch's."""
from __future__ import annotations

import warnings

import numpy as np

from .. import backend
from . import tape as _tape


class _VariableMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, _tape._Tensor)


class Variable(metaclass=_VariableMeta):
    """``Variable(data=None, requires_grad=False, volatile=False)``: ``data.detach()`` (same memory and version
    counter), made to require grad when ``requires_grad``; with no data an empty cpu tensor. ``volatile`` has no
    effect (a warning says so, as PyTorch's)."""

    def __new__(cls, data=None, requires_grad=False, volatile=False):
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with minifused.no_grad():` instead.",
                          UserWarning, stacklevel=2)
        if not isinstance(requires_grad, int):  # (an int reads as a truth value there, as PyTorch's)
            raise TypeError(f"Variable: requires_grad must be a bool, got {requires_grad!r}")
        requires_grad = bool(requires_grad)
        T = _tape._Tensor
        if data is None:
            return T._from_array(np.zeros((0,), backend.get_default_dtype()), requires_grad)
        if not isinstance(data, T):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        out = data.detach()
        if requires_grad:
            out.requires_grad_(True)  # raises for a non-floating dtype, as PyTorch's
        return out
