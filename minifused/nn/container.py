"""Containers: ``Sequential`` (which fuses a ReLU into the layer before it), ``ModuleList``,
``ModuleDict``; the deprecated ``Container``."""
from __future__ import annotations

import collections.abc
import functools
import operator
import warnings
from collections import OrderedDict

from .. import backend
from ..autograd import is_grad_enabled
from ..tensor import Tensor
from .module import Module, Parameter, runs_hooks
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


def runs_own_forward(module):
    """Whether calling ``module`` runs this package's ``forward``, which its fused and in-place forms stand for:
    neither a user's subclass overrides it nor the instance was given a ``forward`` of its own (``m.forward =
    ...``, which PyTorch's call runs)."""
    return "forward" not in module.__dict__ and _own_forward(type(module))


def _fuses(layer, names, follower, name):
    """Whether ``follower``, which computes ``name`` (None: nothing fusable), may run inside ``layer``, which can
    fuse ``names``: neither runs hooks and both run this package's ``forward``."""
    return (name is not None and name in names and not runs_hooks(layer) and not runs_hooks(follower)
            and runs_own_forward(layer) and runs_own_forward(follower))


def _owned(y, x):
    """Whether ``y``, a built-in module's output, is a fresh result that only the running
    ``Sequential`` holds: a tensor sharing no memory with the caller's input ``x``. Built-in modules
    (this package's) keep no reference to their outputs; user modules might, so theirs never count."""
    if not isinstance(y, Tensor):
        return False
    xa = getattr(x, "_data", None)
    return not (type(xa) is type(y._data) and backend.array_module(y._data).may_share_memory(y._data, xa))


def _as_index(idx, what):
    """``idx`` as an int, as PyTorch's containers take it (``operator.index``: NumPy integers and one-element
    integer tensors too); ``what`` starts the error that names anything else."""
    try:
        return operator.index(idx)
    except TypeError:
        raise InputTypeError(f"{what} {type(idx).__name__}") from None


class _ModuleSequence(Module):
    """Modules in order, named "0", "1", ... (a Sequential built from a dict keeps its names until an insertion
    or deletion renumbers them): the list methods of PyTorch's Sequential and ModuleList."""

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)._of(list(self._modules.values())[idx])
        return self._modules[self._key_at(idx)]

    def __setitem__(self, idx, module):
        if isinstance(idx, slice):
            raise InputTypeError(f"{type(self).__name__}: item assignment takes an integer index, got a slice")
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
        """``modules`` appended in order; all checked first, so that a bad one adds none."""
        if not isinstance(modules, collections.abc.Iterable):
            raise InputTypeError(f"{type(self).__name__}.extend should be called with an iterable, but got "
                                 f"{type(modules).__name__}")
        modules = list(modules)
        for m in modules:
            if m is not None and not isinstance(m, Module):
                raise InputTypeError(f"{type(self).__name__}.extend: {type(m).__name__} is not a Module")
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        """``module`` placed before position ``index`` (negative: from the end; ``len(self)``: last)."""
        n = len(self._modules)
        index = _as_index(index, f"{type(self).__name__}.insert: the index must be an integer, got")
        if not -n <= index <= n:
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
        """A new Sequential of these modules, then ``other``'s (a Sequential), as PyTorch's: a plain Sequential
        even for a subclass, whose own ``__init__`` may take other arguments."""
        if not isinstance(other, Sequential):
            raise InputError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        return Sequential(*self, *other)

    def __iadd__(self, other):
        return self.extend(other)

    def _key_at(self, idx):
        """The name of the module at position ``idx`` (negative: from the end)."""
        keys = list(self._modules)
        idx = _as_index(idx, f"{type(self).__name__} indices must be integers or slices, got")
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
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):  # (a plain dict is refused, as PyTorch's)
            for name, m in modules[0].items():
                self.register_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.register_module(str(i), m)

    @classmethod
    def _of(cls, modules):
        return cls(*modules)

    def __mul__(self, times):
        """The modules ``times`` over, in a new Sequential (the same module objects: their weights shared; a plain
        Sequential even for a subclass, as PyTorch's)."""
        if not isinstance(times, int) or isinstance(times, bool):
            raise InputTypeError(f"Sequential: can only be multiplied by an int, got {type(times).__name__}")
        if times <= 0:
            raise InputError(f"Sequential: can only be multiplied by a positive int, got {times}")
        return Sequential(*(list(self) * times))

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

    def forward(self, input):
        """Modules in order; an activation module right after a layer that declares it can fuse it
        (``fused_activations``: Linear, Conv2d with no activation of their own) runs inside that layer's
        GEMM epilog instead, and a norm module right after a layer that declares it (``fused_norms``: Conv2d
        then BatchNorm2d) runs with that layer as one op, with the activation module after it in its kernel.

        Under ``no_grad`` a module with an in-place form (``forward_inplace``: ReLU, GELU, Dropout,
        Softmax, LayerNorm) runs it on an intermediate result that only this container holds
        (see ``_owned``), saving one activation-sized allocation; never on the caller's input, nor under autocast
        (which may give an op's result another dtype than its input's, as LayerNorm's and Softmax's).
        Modules with hooks (``register_forward_hook`` ...), and modules whose class or instance overrides the
        ``forward`` of this package's class, are always called, never fused or run in place.
        """
        x = input
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
            elif owned and m.forward_inplace is not None and not runs_hooks(m) and runs_own_forward(m):
                x = m.forward_inplace(x)  # x stays owned: the same tensor, overwritten
                i += 1
                continue
            else:
                x = m(x)
                i += 1
            owned = lean and _builtin(m) and not runs_hooks(m) and _owned(x, first)  # (a hook may keep x)
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
        """A new ModuleList of these modules, then those of any iterable of modules (a plain ModuleList even for a
        subclass, as PyTorch's)."""
        return ModuleList([*self, *other])

    def __repr__(self):
        """As PyTorch prints a ModuleList: runs of modules that print alike fold into ``(i-j): n x module``."""
        bodies = [repr(m).replace("\n", "\n  ") for m in self._modules.values()]
        if not bodies:
            return f"{self._get_name()}()"
        lines, start = [], 0
        for i in range(1, len(bodies) + 1):
            if i == len(bodies) or bodies[i] != bodies[start]:
                n = i - start
                lines.append(f"({start}): {bodies[start]}" if n == 1 else f"({start}-{i - 1}): {n} x {bodies[start]}")
                start = i
        return f"{self._get_name()}(\n  " + "\n  ".join(lines) + "\n)"


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
        """The entries of a mapping, or of an iterable of (name, module) pairs, in their order; all checked first,
        so that a bad one adds none."""
        if not isinstance(modules, collections.abc.Iterable):
            raise InputTypeError(f"ModuleDict.update should be called with an iterable of key/value pairs, but got "
                                 f"{type(modules).__name__}")
        items = list(modules.items()) if isinstance(modules, (collections.abc.Mapping, ModuleDict)) else list(modules)
        for i, pair in enumerate(items):
            if not isinstance(pair, collections.abc.Iterable):
                raise InputTypeError(f"ModuleDict update sequence element #{i} should be Iterable; is "
                                     f"{type(pair).__name__}")
            pair = items[i] = tuple(pair)
            if len(pair) != 2:
                raise InputError(f"ModuleDict update sequence element #{i} has length {len(pair)}; 2 is required")
            name, m = pair
            if m is not None and not isinstance(m, Module):
                raise InputTypeError(f"ModuleDict: {name!r} is a {type(m).__name__}, not a Module")
            if name not in self._modules:
                self._check_name("module", name, "_modules")
        for name, m in items:
            self.register_module(name, m)

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()


def _entry_repr(key, value, type_name):
    """One line of PyTorch's ParameterList / ParameterDict repr: a tensor's kind, type (``type_name(value)``) and
    size (and device, on a GPU), the type of anything else."""
    if not isinstance(value, Tensor):
        return f"  ({key}): Object of type: {type(value).__name__}"
    kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
    size = "x".join(str(n) for n in value.shape)
    device = f" ({value.device})" if value.device.type == "cuda" else ""
    return f"  ({key}): {kind} containing: [{type_name(value)} of size {size}{device}]"


class ParameterList(Module):
    """Values under '0', '1', ... in order, as PyTorch's: a tensor given becomes a Parameter, registered under its
    index (``model.parameters()`` and the state dict see it); anything else (a number, None) is kept as a plain
    attribute of that name."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.__dict__.setdefault("_size", len(self._parameters))  # (a list pickled holding Parameters alone)

    def _key(self, idx):
        """The name of the entry at position ``idx`` (negative: from the end)."""
        try:
            idx = operator.index(idx)
        except TypeError:
            raise InputTypeError(f"ParameterList indices must be integers or slices, got "
                                 f"{type(idx).__name__}") from None
        n = len(self)
        if not -n <= idx < n:
            raise IndexError(f"ParameterList: index {idx} is out of range for {n} entries")
        return str(idx % n)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            out = type(self)()
            for i in range(*idx.indices(len(self))):
                out.append(self[i])
            return out
        return getattr(self, self._key(idx))

    def __setitem__(self, idx, value):
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, self._key(idx), value)  # (a non-tensor in place of a Parameter is refused there)

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __iadd__(self, values):
        return self.extend(values)

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")

    def append(self, value):
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values):
        if not isinstance(values, collections.abc.Iterable) or isinstance(values, Tensor):
            raise InputTypeError(f"ParameterList.extend should be called with an iterable, but got "
                                 f"{type(values).__name__}")
        for v in values:
            self.append(v)
        return self

    def extra_repr(self):
        return "\n".join(_entry_repr(i, v, lambda t: str(t.dtype)) for i, v in enumerate(self))


class _MissingKey(KeyError, AttributeError):
    """A key a ParameterDict lacks: a KeyError, as a dict's, and an AttributeError, as PyTorch's (which looks the
    key up as an attribute)."""


class ParameterDict(Module):
    """Values under string keys, in insertion order, as PyTorch's: a tensor given becomes a Parameter, registered
    under its key; anything else (a number, None) is kept as a plain attribute of that name. The dict methods,
    ``|`` and ``|=`` included."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.__dict__.setdefault("_keys", dict.fromkeys(self._parameters))  # (pickled holding Parameters alone)

    def __getitem__(self, key):
        if key not in self._keys:
            raise _MissingKey(key)
        return getattr(self, key)

    def __setitem__(self, key, value):
        if not isinstance(key, str):
            raise InputTypeError(f"ParameterDict: keys must be strings, got {type(key).__name__}")
        if key not in self._keys:
            self._check_name("parameter", key, "_parameters")  # (not a name of the class's: keys(), update ...)
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, key, value)  # (a non-tensor in place of a Parameter is refused there)
        self._keys[key] = None

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, key)

    def __contains__(self, key):
        return key in self._keys

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(list(self._keys))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterDict should not be called.")

    def __or__(self, other):
        out = self.copy()
        out.update(other)
        return out

    def __ror__(self, other):
        out = other.copy()
        out.update(self)
        return out

    def __ior__(self, other):
        self.update(other)
        return self

    def keys(self):
        return self._keys.keys()

    def values(self):
        return (self[k] for k in self._keys)

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def popitem(self):
        """The last (key, value), removed."""
        if not self._keys:
            raise KeyError("popitem(): ParameterDict is empty")
        key = next(reversed(self._keys))
        return key, self.pop(key)

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        for key in list(self._keys):
            del self[key]

    def copy(self):
        """A new ParameterDict of the same values (the same Parameter objects)."""
        return ParameterDict(OrderedDict(self.items()))

    def fromkeys(self, keys, default=None):
        """A new ParameterDict with ``keys`` all set to ``default``."""
        return ParameterDict((k, default) for k in keys)

    def extra_repr(self):
        return "\n".join(_entry_repr(k, v, lambda t: t.type()) for k, v in self.items())

    def update(self, parameters):
        """The entries of ``parameters``: an ``OrderedDict`` or ``ParameterDict`` in its order, another mapping
        (a plain dict) in the sorted order of its keys, as PyTorch's; else (key, value) pairs in their order."""
        if not isinstance(parameters, collections.abc.Iterable):
            raise InputTypeError(f"ParameterDict.update should be called with an iterable of key/value pairs, but "
                                 f"got {type(parameters).__name__}")
        items = list(parameters.items()) if hasattr(parameters, "items") else list(parameters)
        if (isinstance(parameters, collections.abc.Mapping) and not isinstance(parameters, OrderedDict)
                and all(isinstance(key, str) for key, _ in items)):  # (a key of another type is refused by name)
            items.sort(key=lambda kv: kv[0])
        for i, pair in enumerate(items):
            if not isinstance(pair, collections.abc.Iterable) or len(pair) != 2:
                raise InputError(f"ParameterDict update sequence element #{i} should be a (key, value) pair, got "
                                 f"{pair!r}")
            self[pair[0]] = pair[1]


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
