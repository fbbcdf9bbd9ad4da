"""Containers: ``Sequential`` (which fuses a ReLU into the layer before it), ``ModuleList``,
``ModuleDict``; the deprecated ``Container``."""
from __future__ import annotations

import collections.abc
import functools
import warnings
from collections import OrderedDict

from .. import backend
from ..autograd import is_grad_enabled
from ..tensor import Tensor
from .module import Module
from ..backend import InputError, InputTypeError


def _builtin(m):
    """A layer of this package (not a container: it may hold user modules)."""
    return type(m).__module__.startswith("minifused.nn.") and not isinstance(m, (Sequential, ModuleList,
                                                                                   ModuleDict))


@functools.cache
def _own_forward(cls):
    """Whether ``cls`` runs a ``forward`` of this package, which the fused and in-place forms its modules offer
    stand for (a user's subclass that overrides ``forward`` computes something else)."""
    owner = next(c for c in cls.__mro__ if "forward" in c.__dict__)
    return owner.__module__.startswith("minifused.nn.")


def _fuses(layer, names, follower, name):
    """Whether ``follower``, which computes ``name`` (None: nothing fusable), may run inside ``layer``, which can
    fuse ``names``: neither has hooks and both run this package's ``forward``."""
    return (name is not None and name in names and layer._call_hooks is None and follower._call_hooks is None
            and _own_forward(type(layer)) and _own_forward(type(follower)))


def _owned(y, x):
    """Whether ``y``, a built-in module's output, is a fresh result that only the running
    ``Sequential`` holds: a tensor sharing no memory with the caller's input ``x``. Built-in modules
    (this package's) keep no reference to their outputs; user modules might, so theirs never count."""
    if not isinstance(y, Tensor):
        return False
    xa = getattr(x, "_data", None)
    return not (type(xa) is type(y._data) and backend.array_module(y._data).may_share_memory(y._data, xa))


class _ModuleSequence(Module):
    """Modules in order, named "0", "1", ... (a Sequential built from a dict keeps its names until an insertion
    or deletion renumbers them): the list methods of PyTorch's Sequential and ModuleList."""

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        items = list(self._modules.values())
        return type(self)._of(items[idx]) if isinstance(idx, slice) else items[idx]

    def __setitem__(self, idx, module):
        self.register_module(self._key_at(idx), module)

    def __delitem__(self, idx):
        items = list(self._modules.values())
        if not isinstance(idx, slice):
            self._key_at(idx)  # (checks it)
        del items[idx]
        self._renumber(items)

    def append(self, module):
        self.register_module(str(len(self._modules)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        """``module`` placed before position ``index`` (negative: from the end; ``len(self)``: last)."""
        n = len(self._modules)
        if not isinstance(index, int) or isinstance(index, bool) or not -n <= index <= n:
            raise IndexError(f"{type(self).__name__}.insert: index {index!r} is out of range for {n} modules")
        items = list(self._modules.values())
        items.insert(index, module)
        self._renumber(items)
        return self

    def pop(self, idx=-1):
        """The module at ``idx`` (or the modules of a slice), removed."""
        popped = self[idx]
        del self[idx]
        return popped

    def __add__(self, other):
        if not isinstance(other, type(self)):
            return NotImplemented
        return type(self)._of([*self, *other])

    def __iadd__(self, other):
        return self.extend(other)

    def _key_at(self, idx):
        """The name of the module at position ``idx`` (negative: from the end)."""
        keys = list(self._modules)
        if not isinstance(idx, int) or isinstance(idx, bool):
            raise InputTypeError(f"{type(self).__name__} indices must be integers or slices, got {type(idx).__name__}")
        if not -len(keys) <= idx < len(keys):
            raise IndexError(f"{type(self).__name__}: index {idx} is out of range for {len(keys)} modules")
        return keys[idx]

    def _renumber(self, modules):
        for m in modules:  # (checked before anything changes)
            if m is not None and not isinstance(m, Module):
                raise InputTypeError(f"{type(self).__name__}: {type(m).__name__} is not a Module")
        self._modules.clear()
        for i, m in enumerate(modules):
            self._modules[str(i)] = m


class Sequential(_ModuleSequence):
    """Modules applied in order."""

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], (OrderedDict, dict)):
            for name, m in modules[0].items():
                self.register_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.register_module(str(i), m)

    @classmethod
    def _of(cls, modules):
        return cls(*modules)

    def __mul__(self, times):
        """The modules ``times`` over, in a new Sequential (the same module objects: their weights shared)."""
        if not isinstance(times, int) or isinstance(times, bool):
            raise InputTypeError(f"Sequential: can only be multiplied by an int, got {type(times).__name__}")
        if times <= 0:
            raise InputError(f"Sequential: can only be multiplied by a positive int, got {times}")
        return type(self)(*(list(self) * times))

    __rmul__ = __mul__

    def __imul__(self, times):
        self._renumber(list(self.__mul__(times)))
        return self

    def __getitem__(self, idx):
        """A module, or for a slice a Sequential of those modules under their own names (as PyTorch's, so
        that its state dict's keys are the original's)."""
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return super().__getitem__(idx)

    def forward(self, x):
        """Modules in order; an activation module right after a layer that declares it can fuse it
        (``fused_activations``: Linear, Conv2d with no activation of their own) runs inside that layer's
        GEMM epilog instead, and a norm module right after a layer that declares it (``fused_norms``: Conv2d
        then BatchNorm2d) runs with that layer as one op, with the activation module after it in its kernel.

        Under ``no_grad`` a module with an in-place form (``forward_inplace``: ReLU, GELU, Dropout,
        Softmax, LayerNorm) runs it on an intermediate result that only this container holds
        (see ``_owned``), saving one activation-sized allocation; never on the caller's input, nor under autocast
        (which may give an op's result another dtype than its input's, as LayerNorm's and Softmax's).
        Modules with hooks (``register_forward_hook`` ...), and modules whose class overrides the ``forward``
        of this package's class, are always called, never fused or run in place.
        """
        mods = list(self._modules.values())
        lean, first, owned = not is_grad_enabled() and not backend.autocast_dtypes(), x, False
        i, n = 0, len(mods)
        while i < n:
            m = mods[i]
            nxt = mods[i + 1] if i + 1 < n else None
            if nxt is not None and _fuses(m, m.fused_norms, nxt, nxt.fusable_norm) and m.activation is None:
                act, i = nxt.activation, i + 2
                after = mods[i] if i < n else None
                if act is None and after is not None and _fuses(nxt, nxt.fused_activations, after,
                                                                after.fusable_activation):
                    act, i = after.fusable_activation, i + 1
                x = m.forward_with_norm(x, nxt, act)
            elif (nxt is not None and _fuses(m, m.fused_activations, nxt, nxt.fusable_activation)
                  and m.activation is None):
                x = m.forward_with_activation(x, nxt.fusable_activation)
                i += 2
            elif owned and m.forward_inplace is not None and m._call_hooks is None and _own_forward(type(m)):
                x = m.forward_inplace(x)  # x stays owned: the same tensor, overwritten
                i += 1
                continue
            else:
                x = m(x)
                i += 1
            owned = lean and _builtin(m) and m._call_hooks is None and _owned(x, first)  # (a hook may keep x)
        return x


class ModuleList(_ModuleSequence):
    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    @classmethod
    def _of(cls, modules):
        return cls(modules)

    def __add__(self, other):
        """A new ModuleList of these modules, then those of any iterable of modules (as PyTorch's)."""
        return type(self)([*self, *other])

    def __repr__(self):
        """As PyTorch prints a ModuleList: runs of modules that print alike fold into ``(i-j): n x module``."""
        bodies = [repr(m).replace("\n", "\n  ") for m in self._modules.values()]
        if not bodies:
            return "ModuleList()"
        lines, start = [], 0
        for i in range(1, len(bodies) + 1):
            if i == len(bodies) or bodies[i] != bodies[start]:
                n = i - start
                lines.append(f"({start}): {bodies[start]}" if n == 1 else f"({start}-{i - 1}): {n} x {bodies[start]}")
                start = i
        return "ModuleList(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    def __init__(self, modules=None):
        """``modules``: a mapping of names to modules, or an iterable of (name, module) pairs, as PyTorch's."""
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.register_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __contains__(self, key):
        return key in self._modules

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def pop(self, key):
        return self._modules.pop(key)

    def clear(self):
        self._modules.clear()

    def update(self, modules):
        for name, m in dict(modules).items():
            self.register_module(name, m)

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()


def _as_parameter(owner, value):
    from .module import Parameter

    if isinstance(value, Parameter):
        return value
    if isinstance(value, Tensor):
        return Parameter(value)
    raise InputTypeError(f"{owner}: expected a Parameter or a tensor, got {type(value).__name__}")


class ParameterList(Module):
    """Parameters registered under '0', '1', ... in order, as PyTorch's (a tensor given becomes a Parameter):
    ``model.parameters()`` and the state dict see them."""

    def __init__(self, values=None):
        super().__init__()
        for v in values or ():
            self.append(v)

    def append(self, value):
        self.register_parameter(str(len(self._parameters)), _as_parameter("ParameterList", value))
        return self

    def extend(self, values):
        for v in values:
            self.append(v)
        return self

    def _index(self, idx):
        n = len(self._parameters)
        if not isinstance(idx, int) or not -n <= idx < n:
            raise IndexError(f"ParameterList: index {idx!r} out of range for {n} parameters")
        return idx % n

    def __getitem__(self, idx):
        items = list(self._parameters.values())
        return ParameterList(items[idx]) if isinstance(idx, slice) else items[self._index(idx)]

    def __setitem__(self, idx, value):
        self.register_parameter(str(self._index(idx)), _as_parameter("ParameterList", value))

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def extra_repr(self):
        lines = [f"({i}): Parameter of shape {tuple(p.shape)}, {p.dtype}" for i, p in enumerate(self)]
        return "\n  " + "\n  ".join(lines) + "\n" if lines else ""


class ParameterDict(Module):
    """Parameters registered under string keys, in insertion order, as PyTorch's (a tensor given becomes a
    Parameter)."""

    def __init__(self, parameters=None):
        super().__init__()
        self.update(parameters or {})

    def __getitem__(self, key):
        return self._parameters[key]

    def __setitem__(self, key, value):
        if not isinstance(key, str):
            raise InputTypeError(f"ParameterDict: keys must be strings, got {type(key).__name__}")
        self.register_parameter(key, _as_parameter("ParameterDict", value))

    def __delitem__(self, key):
        del self._parameters[key]

    def __contains__(self, key):
        return key in self._parameters

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters)

    def keys(self):
        return self._parameters.keys()

    def values(self):
        return self._parameters.values()

    def items(self):
        return self._parameters.items()

    def get(self, key, default=None):
        return self._parameters.get(key, default)

    def pop(self, key):
        return self._parameters.pop(key)

    def extra_repr(self):
        lines = [f"({k}): Parameter of shape {tuple(p.shape)}, {p.dtype}" for k, p in self.items()]
        return "\n  " + "\n  ".join(lines) + "\n" if lines else ""

    def update(self, parameters):
        """The entries of ``parameters``: an ``OrderedDict`` or ``ParameterDict`` in its order, another mapping
        (a plain dict) in the sorted order of its keys, as PyTorch's; else (key, value) pairs in their order."""
        items = list(parameters.items()) if hasattr(parameters, "items") else parameters
        if (isinstance(parameters, collections.abc.Mapping) and not isinstance(parameters, OrderedDict)
                and all(isinstance(key, str) for key, _ in items)):  # (a key of another type is refused by name)
            items.sort(key=lambda kv: kv[0])
        for key, value in items:
            self[key] = value


_CONTAINER_DEPRECATED = ("`nn.Container` is deprecated. All of its functionality is now implemented in `nn.Module`. "
                         "Subclass that instead.")


class Container(Module):
    """Deprecated: a Module holding the modules given as keywords. As PyTorch's, it warns (FutureWarning)
    when constructed directly and when subclassed."""

    def __init_subclass__(cls, **kwargs):
        warnings.warn(_CONTAINER_DEPRECATED, FutureWarning, stacklevel=2)
        super().__init_subclass__(**kwargs)

    def __init__(self, **kwargs):
        if type(self) is Container:
            warnings.warn(_CONTAINER_DEPRECATED, FutureWarning, stacklevel=2)
        super().__init__()
        for key, value in kwargs.items():
            self.add_module(key, value)
