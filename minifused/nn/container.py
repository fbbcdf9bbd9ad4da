"""Containers: ``Sequential`` (which fuses a ReLU into the layer before it), ``ModuleList``,
``ModuleDict``."""
from __future__ import annotations

from collections import OrderedDict

from .. import backend
from ..autograd import is_grad_enabled
from ..tensor import Tensor
from .module import Module


def _builtin(m):
    """A layer of this package (not a container: it may hold user modules)."""
    return type(m).__module__.startswith("minifused.nn.") and not isinstance(m, (Sequential, ModuleList,
                                                                                   ModuleDict))


def _owned(y, x):
    """Whether ``y``, a built-in module's output, is a fresh result that only the running
    ``Sequential`` holds: a tensor sharing no memory with the caller's input ``x``. Built-in modules
    (this package's) keep no reference to their outputs; user modules might, so theirs never count."""
    if not isinstance(y, Tensor):
        return False
    xa = getattr(x, "_data", None)
    return not (type(xa) is type(y._data) and backend.array_module(y._data).may_share_memory(y._data, xa))


class Sequential(Module):
    """Modules applied in order."""

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], (OrderedDict, dict)):
            for name, m in modules[0].items():
                self.register_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.register_module(str(i), m)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        items = list(self._modules.values())
        if isinstance(idx, slice):
            return Sequential(*items[idx])
        return items[idx]

    def append(self, module):
        self.register_module(str(len(self)), module)
        return self

    def forward(self, x):
        """Modules in order; an activation module right after a layer that declares it can fuse it
        (``fused_activations``: Linear, Conv2d with no activation of their own) runs inside that layer's
        GEMM epilog instead.

        Under ``no_grad`` a module with an in-place form (``forward_inplace``: ReLU, GELU, Dropout,
        Softmax, LayerNorm) runs it on an intermediate result that only this container holds
        (see ``_owned``), saving one activation-sized allocation; never on the caller's input.
        Modules with hooks (``register_forward_hook`` ...) are always called, never fused or run in place.
        """
        mods = list(self._modules.values())
        lean, first, owned = not is_grad_enabled(), x, False
        i = 0
        while i < len(mods):
            m = mods[i]
            act = mods[i + 1].fusable_activation if i + 1 < len(mods) else None
            if (act is not None and act in m.fused_activations and m.activation is None
                    and m._call_hooks is None and mods[i + 1]._call_hooks is None):
                x = m.forward_with_activation(x, act)
                i += 2
            elif owned and m.forward_inplace is not None and m._call_hooks is None:
                x = m.forward_inplace(x)  # x stays owned: the same tensor, overwritten
                i += 1
                continue
            else:
                x = m(x)
                i += 1
            owned = lean and _builtin(m) and m._call_hooks is None and _owned(x, first)  # (a hook may keep x)
        return x


class ModuleList(Module):
    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module):
        self.register_module(str(len(self._modules)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        items = list(self._modules.values())
        return ModuleList(items[idx]) if isinstance(idx, slice) else items[idx]


class ModuleDict(Module):
    def __init__(self, modules=None):
        super().__init__()
        for name, m in (modules or {}).items():
            self.register_module(name, m)

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
    raise TypeError(f"{owner}: expected a Parameter or a tensor, got {type(value).__name__}")


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
            raise TypeError(f"ParameterDict: keys must be strings, got {type(key).__name__}")
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
        for key, value in (parameters.items() if hasattr(parameters, "items") else parameters):
            self[key] = value
