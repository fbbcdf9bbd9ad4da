"""The dtype objects users see (``minifused.float32``, ``tensor.dtype``): PyTorch's ``torch.dtype`` over NumPy's.

Inside minifused every array's dtype is NumPy's (``ml_dtypes`` adds bfloat16). A user's code also asks a dtype
what PyTorch's answers: ``v.dtype.is_floating_point`` (the EMA of a model's state dict), ``is_signed``,
``itemsize``; its repr is ``minifused.float32`` (its str the bare name, as messages write it). :class:`dtype` is
that object. It carries its NumPy dtype (``__numpy_dtype__``, and ``.dtype`` for NumPy before 2.4), which is how
NumPy and CuPy take it wherever a dtype goes (``np.zeros(n, d)``, ``a.astype(d)``); it equals and hashes as that
dtype, so dictionaries and comparisons keyed by NumPy's find it; NumPy's other attributes (``kind``, ``name``,
``type``) are read through. There is one per NumPy dtype: ``x.dtype is minifused.float32`` holds, as PyTorch's."""
from __future__ import annotations

import ml_dtypes
import numpy as np

_FLOATING = frozenset(np.dtype(t) for t in (np.float16, ml_dtypes.bfloat16, np.float32, np.float64))


class dtype:  # noqa: N801 - torch.dtype
    __slots__ = ("dtype", "is_floating_point", "is_complex", "is_signed", "itemsize", "kind", "name", "char", "type",
                 "_hash")

    def __new__(cls, spec):
        """The one object for NumPy dtype ``spec`` (anything ``np.dtype`` takes)."""
        d = np.dtype(spec)
        known = _PUBLIC.get(d)
        if known is not None:
            return known
        self = object.__new__(cls)
        self.dtype = d
        self.is_floating_point = d in _FLOATING  # (NumPy does not count bfloat16 as floating)
        self.is_complex = d.kind == "c"
        self.is_signed = d.kind in "ifc" or self.is_floating_point  # (bool and unsigned integers are not)
        self.itemsize = d.itemsize
        self.kind, self.name, self.char, self.type = d.kind, d.name, d.char, d.type  # (NumPy's, read most)
        self._hash = hash(d)
        _PUBLIC[d] = self
        return self

    def __eq__(self, other):
        return self is other if type(other) is dtype else self.dtype == other

    def __ne__(self, other):
        return self is not other if type(other) is dtype else self.dtype != other

    def __hash__(self):
        return self._hash

    @property
    def __numpy_dtype__(self):  # (NumPy's own protocol: it asks for this before .dtype, without it at a raise's cost)
        return self.dtype

    def __getattr__(self, name):  # (only for names the slots do not hold: NumPy's str, names, byteorder ...)
        if name[0] == "_" or name == "dtype":  # (copy's and pickle's probes: this object's, not NumPy's)
            raise AttributeError(name)
        return getattr(self.dtype, name)

    def __repr__(self):
        return f"minifused.{self.dtype.name}"

    def __str__(self):  # (the bare name, as messages and a tensor's repr have always written it)
        return self.dtype.name

    def __reduce__(self):  # (pickled and copied as the one object)
        return public, (self.dtype,)

    def to_real(self):
        """This dtype (minifused has no complex tensors), as PyTorch's ``dtype.to_real()``."""
        return self


_PUBLIC: dict = {}


def public(d) -> dtype:
    """The user-facing :class:`dtype` of NumPy dtype ``d`` (one dictionary look-up where it exists)."""
    known = _PUBLIC.get(d)
    return known if known is not None else dtype(d)
