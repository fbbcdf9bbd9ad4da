"""``Module``: attribute registration, traversal, modes, hooks, state dicts (``Parameter`` from nn.param)."""
from __future__ import annotations

import collections.abc
import itertools
import warnings
import weakref
from collections import OrderedDict

import numpy as np

from .. import backend
from ..autograd import is_grad_enabled, no_grad
from ..kernels import to_channels_last_3d, to_layout
from ..ops.shape import channels_last, channels_last_3d, check_memory_format, contiguous_format, preserve_format
from ..tensor import Tensor
from ._backward_hooks import (_arrays, _checked, _wrap, global_backward_hooks as _global_backward_hooks,
                              global_backward_pre_hooks as _global_backward_pre_hooks, wrap_inputs, wrap_outputs)
from .param import Parameter
from .state_dicts import STATE_HOOK_KINDS, StateDicts
from ..backend import InputError, InputTypeError


_MISSING = object()  # (a default no stored value can be)


#: PyTorch's device types that minifused has none of (``Module.to('meta')`` names a device, not a dtype)
_OTHER_DEVICES = ("meta", "mps", "xpu", "hip", "xla", "ipu", "mtia", "hpu", "vulkan", "privateuseone")


class Module(StateDicts):
    """Base class of layers and models; subclasses set attributes in ``__init__`` and write ``forward``."""

    training: bool
    #: The activations this layer can run inside its own kernel (its ``forward_with_activation(x, name)``):
    #: ``Sequential`` runs a following activation module there when the layer has no activation of its own.
    fused_activations: tuple = ()
    #: The name, among ``fused_activations``' names, of what this activation module computes (None: nothing
    #: a layer can fuse).
    fusable_activation: str | None = None
    #: The norms this layer can run as one op with itself (its ``forward_with_norm(x, norm, activation)``):
    #: ``Sequential`` runs a following norm module (and the activation after it) so.
    fused_norms: tuple = ()
    #: The name, among ``fused_norms``' names, of what this norm module computes (None: nothing a layer can fuse).
    fusable_norm: str | None = None
    #: ``forward_inplace(x)``: the module's in-place form, which ``Sequential`` calls under ``no_grad`` on
    #: results only it holds (None: the module has none).
    forward_inplace = None
    #: Whether the layer brings its input to the channels-last layout (set by ``to(memory_format=...)``; None:
    #: a layer whose speed does not depend on its input's layout).
    channels_last_input: bool | None = None
    #: PyTorch's class switches, kept for code that sets them (minifused's __init__ needs no arguments).
    call_super_init = False
    dump_patches = False
    #: PyTorch's: which kind of backward hooks the module took, full (True) or deprecated (False); None: none yet.
    _is_full_backward_hook = None

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    # ------------------------------------------------------------ registration
    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            # as PyTorch's: a plain value (a config number, a tensor) may be set before super().__init__();
            # a parameter or a submodule has no table to go in yet
            if isinstance(value, (Parameter, Module)) or getattr(value, "_is_buffer", False):
                kind = ("parameters" if isinstance(value, Parameter) else "module" if isinstance(value, Module)
                        else "buffer")
                raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
            object.__setattr__(self, name, value)
            return
        if isinstance(getattr(type(self), name, None), property):  # a parametrized tensor (nn.utils.parametrize)
            object.__setattr__(self, name, value)
            return
        # PyTorch's rules: a Parameter or a Module registers as one; a name already registered keeps its kind
        # (None clears it, anything else of the wrong kind is an error), so ``self.count += 1`` on a buffer
        # keeps it a buffer, in the state dict
        params, buffers, modules = self._parameters, self._buffers, self._modules
        if not isinstance(value, (Parameter, Module)):
            for store, kind, ok in ((params, "parameter", "minifused.nn.Parameter"),
                                    (modules, "child module", "Module"), (buffers, "buffer", "Tensor")):
                if name in store:
                    if value is not None and not (store is buffers and isinstance(value, Tensor)):
                        raise InputTypeError(f"cannot assign {type(value).__name__} as {kind} {name!r} ({ok} or None "
                                             f"expected)")
                    if getattr(value, "_is_buffer", False):  # an nn.Buffer brings its own persistence
                        break
                    if store is not params:  # (PyTorch's registration hooks see a module or a buffer set here)
                        value = _registered(_global_module_registration_hooks if store is modules
                                            else _global_buffer_registration_hooks, self, name, value)
                    store[name] = value
                    return
            if getattr(value, "_is_buffer", False):  # nn.Buffer (nn.lazy): registers as a buffer, as PyTorch's
                if name in self.__dict__:
                    raise KeyError(f"attribute '{name}' already exists")
                self.register_buffer(name, value, value.persistent)
                return
            object.__setattr__(self, name, value)
            return
        if not isinstance(value, Parameter) and name in params:  # (a module never replaces a parameter)
            raise InputTypeError(f"cannot assign {type(value).__name__} as parameter {name!r} "
                                 f"(minifused.nn.Parameter or None expected)")
        target = params if isinstance(value, Parameter) else modules
        value = _registered(_global_parameter_registration_hooks if target is params
                            else _global_module_registration_hooks, self, name, value)
        for store in (params, buffers, modules):
            if store is not target:  # a name re-assigned in its own kind keeps its place (the state dict's order)
                store.pop(name, None)
        target[name] = value
        self.__dict__.pop(name, None)

    def __getattr__(self, name):
        d = self.__dict__  # (unrolled: every parameter, buffer and submodule read of every forward comes here)
        try:
            found = d["_parameters"].get(name, _MISSING)
            if found is _MISSING:
                found = d["_buffers"].get(name, _MISSING)
                if found is _MISSING:
                    found = d["_modules"].get(name, _MISSING)
        except KeyError:  # (before Module.__init__)
            found = _MISSING
        if found is not _MISSING:
            return found
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for store in (self._parameters, self._buffers, self._modules):
            if name in store:
                del store[name]
                if store is self._buffers:  # (a buffer registered again later is persistent unless told)
                    self.__dict__.get("_non_persistent", set()).discard(name)
                return
        object.__delattr__(self, name)

    def _check_name(self, kind, name, store):
        """PyTorch's rules for a registered name: a string, not empty, no '.', not another attribute's."""
        if store not in self.__dict__:
            raise AttributeError(f"cannot register a {kind} before Module.__init__() is called")
        if not isinstance(name, str):
            raise InputTypeError(f"{kind} name should be a string, got {type(name).__name__}")
        if not name:
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain ".", got: {name}')
        if name not in self.__dict__[store] and hasattr(self, name):
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name, param):
        self._check_name("parameter", name, "_parameters")
        if param is not None and not isinstance(param, Parameter):
            raise InputTypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                                 f"(minifused.nn.Parameter or None required)")
        if param is None:
            self._parameters[name] = None
        else:
            setattr(self, name, param)

    def register_buffer(self, name, tensor, persistent=True):
        self._check_name("buffer", name, "_buffers")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise InputTypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' (Tensor or None "
                                 f"required)")
        self._buffers[name] = _registered(_global_buffer_registration_hooks, self, name, tensor)
        if not persistent:
            self.__dict__.setdefault("_non_persistent", set()).add(name)
        else:
            self.__dict__.get("_non_persistent", set()).discard(name)

    _non_persistent_buffers_set = property(
        lambda self: self.__dict__.setdefault("_non_persistent", set()),
        lambda self, names: self.__dict__.__setitem__("_non_persistent", set(names)),
        doc="The names of the buffers the state dict leaves out, as PyTorch's (the set itself: edits take effect).")

    def register_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise InputTypeError(f"{type(self).__name__}: {name!r} is a {type(module).__name__}, not a Module")
        self._check_name("module", name, "_modules")
        self._modules[name] = _registered(_global_module_registration_hooks, self, name, module)

    add_module = register_module

    # ------------------------------------------------------------ calling
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    #: The hooks of :meth:`__call__` (a ``_Hooks``), None while there are none: the fast path's one check.
    _call_hooks = None

    def __call__(self, *args, **kwargs):
        if self._call_hooks is None and not (_global_forward_pre_hooks or _global_forward_hooks
                                             or _global_backward_hooks or _global_backward_pre_hooks):
            return self.forward(*args, **kwargs)
        return _call_with_hooks(self, args, kwargs)

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """``hook(module, args)`` runs before ``forward`` and may return new args (a tuple, or one value);
        with ``with_kwargs``, ``hook(module, args, kwargs)`` may return ``(args, kwargs)``. Hooks run in
        registration order (``prepend`` puts this one first). Returns a handle whose ``remove()`` unregisters it."""
        return self._add_hook("pre", (hook, bool(with_kwargs), False), prepend)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """``hook(module, args, output)`` (``hook(module, args, kwargs, output)`` with ``with_kwargs``) runs
        after ``forward`` and may return a replacement output; ``always_call`` runs it even when
        anything of the call raised (a pre-hook, ``forward``, an earlier forward hook: with the output so far,
        None before ``forward`` returned). Returns a handle whose ``remove()`` unregisters it."""
        return self._add_hook("post", (hook, bool(with_kwargs), bool(always_call)), prepend)

    def register_full_backward_hook(self, hook, prepend=False):
        """``hook(module, grad_input, grad_output)`` runs when the gradients with respect to the module's
        positional inputs are computed (``grad_input`` has one entry per positional argument, None where
        it is not a tensor requiring grad) and may return a replacement ``grad_input`` tuple."""
        if self._is_full_backward_hook is False:
            raise RuntimeError(_MIXED_BACKWARD_HOOKS)
        self.__dict__["_is_full_backward_hook"] = True
        return self._add_hook("backward", hook, prepend)

    def register_backward_hook(self, hook):
        """PyTorch's deprecated form of :meth:`register_full_backward_hook`, as PyTorch runs it: ``hook(module,
        grad_input, grad_output)`` runs in the backward of the op that made the first tensor of the module's output
        (the last op of its forward), with that op's output gradients and its input gradients (one per input of the
        op that takes a gradient, up to the last), and may return replacement ``grad_input``. PyTorch warns on each
        call (FutureWarning) where that op's inputs are not the module's inputs alone. The op is minifused's, which
        need not be PyTorch's: for a one-op module of the input alone (ReLU, Sigmoid, Softmax, pooling) or of
        (input, weight, bias) (Conv2d, BatchNorm, LayerNorm) grad_input is PyTorch's, but Linear is one op of
        (input, weight, bias) here, PyTorch's last op ``addmm(bias, input, weight.t())`` (on 2-d input; a view of
        its result on more dims). A module takes one kind of backward hooks, full or not, as in PyTorch."""
        if self._is_full_backward_hook is True:
            raise RuntimeError(_MIXED_BACKWARD_HOOKS)
        self.__dict__["_is_full_backward_hook"] = False
        return self._add_hook("old_backward", hook, False)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """``hook(module, grad_output)`` runs when the gradients of the module's outputs are known and may
        return a replacement ``grad_output`` tuple."""
        return self._add_hook("backward_pre", hook, prepend)

    _forward_pre_hooks = property(lambda self: _HookTable(self, "pre"), lambda self, v: _HookTable(self, "pre").set(v),
                                  doc="The forward pre-hooks by handle id, as PyTorch's (a live view).")
    _forward_hooks = property(lambda self: _HookTable(self, "post"), lambda self, v: _HookTable(self, "post").set(v),
                              doc="The forward hooks by handle id, as PyTorch's (a live view).")
    _backward_hooks = property(lambda self: _HookTable(self, _backward_kind(self)),
                               lambda self, v: _HookTable(self, _backward_kind(self)).set(v),
                               doc="The backward hooks (full, or the deprecated ones where the module took those) by "
                                   "handle id, as PyTorch's (a live view).")
    _backward_pre_hooks = property(lambda self: _HookTable(self, "backward_pre"),
                                   lambda self, v: _HookTable(self, "backward_pre").set(v),
                                   doc="The backward pre-hooks by handle id, as PyTorch's (a live view).")

    def _hook_table(self, kind):
        """The table of this module's hooks of ``kind`` (made, leaving the fast path, if there is none)."""
        hooks = self.__dict__.get("_call_hooks")
        if hooks is None:
            hooks = _Hooks()
            object.__setattr__(self, "_call_hooks", hooks)
        return getattr(hooks, kind)

    def _add_hook(self, kind, entry, prepend):
        table = self._hook_table(kind)
        handle = RemovableHandle(self, kind)
        table[handle.id] = entry
        if prepend:
            table.move_to_end(handle.id, last=False)
        return handle

    def _add_state_hook(self, kind, hook):
        table = self.__dict__.setdefault("_state_hooks", {}).setdefault(kind, OrderedDict())
        handle = RemovableHandle(self, kind)
        table[handle.id] = hook
        return handle

    def apply(self, fn):
        """``fn(module)`` on every submodule (children first, recursively), then on this module; returns self."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------ traversal
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(dotted name, module) of this module and every submodule, depth first, as PyTorch's: a module
        reached along several paths comes once (the first), unless ``remove_duplicate=False``. ``memo``: a set of
        the modules to leave out, to which those yielded are added (unless ``remove_duplicate=False``)."""
        if memo is None:
            memo = set()
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None:
                yield from child.named_modules(memo, f"{prefix}.{name}" if prefix else name, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def get_submodule(self, target: str):
        """The submodule at dotted path ``target`` ('' is the module itself), as PyTorch's."""
        mod = self
        for item in target.split(".") if target else ():
            if not hasattr(mod, item):
                raise AttributeError(f"{type(mod).__name__} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def set_submodule(self, target: str, module, strict: bool = False):
        """Put ``module`` at dotted path ``target``, as PyTorch's: its parent must exist; what it replaces must be
        a module; with ``strict`` the name must already be there."""
        if target == "":
            raise InputError("Cannot set the submodule without a target name!")
        if not isinstance(module, Module):
            raise InputError(f"`module` is not an nn.Module, found {type(module)}")
        path, _, name = target.rpartition(".")
        parent = self.get_submodule(path)
        if strict and not hasattr(parent, name):
            raise AttributeError(f"{type(parent).__name__} has no attribute `{name}`")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), Module):
            raise AttributeError(f"`{name}` is not an nn.Module")
        setattr(parent, name, module)

    def _get_name(self):
        return type(self).__name__

    def get_parameter(self, target: str):
        """The parameter at dotted path ``target``, as PyTorch's: a name registered as None is not one."""
        param = self._get_leaf(target, "_parameters", "an nn.Parameter")
        if not isinstance(param, Parameter):
            raise AttributeError(f"`{target.rpartition('.')[2]}` is not an nn.Parameter")
        return param

    def get_buffer(self, target: str):
        return self._get_leaf(target, "_buffers", "a buffer")

    def _get_leaf(self, target, table, kind):
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if not hasattr(mod, name):
            raise AttributeError(f"{type(mod).__name__} has no attribute `{name}`")
        if name not in getattr(mod, table):
            raise AttributeError(f"`{name}` is not {kind}")
        return getattr(mod, name)

    def named_children(self):
        """(name, child module) once per child: a module registered under two names comes under the first, as
        PyTorch's."""
        seen = set()
        for n, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield n, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, parameter); a parameter shared by several modules or names comes once (the first),
        unless ``remove_duplicate=False``."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, buffer); a shared buffer comes once unless ``remove_duplicate=False``."""
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def _named_members(self, table, prefix, recurse, remove_duplicate):
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mod_prefix, module in modules:
            for name, v in getattr(module, table).items():
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                seen.add(id(v))
                yield (f"{mod_prefix}.{name}" if mod_prefix else name), v

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ------------------------------------------------------------ modes and moves
    def train(self, mode=True):
        """This module and, through their own ``train`` (which a subclass may override, e.g. to keep a
        BatchNorm in evaluation), its children, as PyTorch's."""
        if not isinstance(mode, bool):
            raise InputError(f"train: the training mode is expected to be a bool, got {type(mode).__name__}")
        object.__setattr__(self, "training", mode)
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        """Set every parameter's ``requires_grad``; as PyTorch's, a flag that is not a bool is refused (when there
        is a parameter to set)."""
        for p in self.parameters():
            if not isinstance(requires_grad, bool):
                raise InputTypeError(f"requires_grad_(): argument 'requires_grad' must be bool, not "
                                     f"{type(requires_grad).__name__}")
            p.requires_grad = requires_grad
        return self

    def share_memory(self):
        """Returns self after ``share_memory_()`` on every parameter, gradient and buffer, as PyTorch's. PyTorch
        moves them to shared memory for other processes to update; minifused has no shared-memory tensors (tensors
        cross to other processes by value, see ``minifused.multiprocessing``): nothing moves, ``is_shared()`` says
        the call was made."""
        for t in itertools.chain(self.parameters(), self.buffers()):
            t.share_memory_()
            if t.grad is not None:
                t.grad.share_memory_()
        return self

    def compile(self, *args, **kwargs):
        """``Module.compile``, accepted as ``torch.compile`` is (``minifused.compile``): nothing to compile."""

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:  # (a gradient built by backward(create_graph=True) leaves its graph first, as PyTorch's)
                p.grad.detach_()
                p.grad.zero_()

    def _apply(self, fn):
        """Replace every parameter's and buffer's array by ``fn(array)`` in place (same objects)."""
        for m in self.modules():
            for p in m._parameters.values():
                if p is not None:
                    p._data = fn(p._data)
                    if p.grad is not None:
                        p.grad._data = fn(p.grad._data)
            for name, b in m._buffers.items():
                if b is not None:
                    b._data = fn(b._data)
        return self

    def to(self, *args, device=None, dtype=None, non_blocking=False, memory_format=None):
        """The module's parameters and buffers moved to ``device`` and cast to floating ``dtype``, in place.
        ``memory_format``, as PyTorch's: the 4-d parameters, buffers and gradients (convolution weights) are laid
        out in it (channels-last weights are the convolutions' own packed form; ``channels_last_3d``: the 5-d ones),
        and for ``channels_last`` the layers that read channels-last input faster (the convolutions) bring their
        input to that layout, so that the activations between them stay in it. ``non_blocking`` is accepted as
        PyTorch's."""
        args = [a for a in args if not isinstance(a, bool)]  # to(device, non_blocking)
        fmt = None if memory_format is None else check_memory_format("Module.to", memory_format)
        if fmt is channels_last or fmt is contiguous_format:
            for m in self.modules():
                if m.channels_last_input is not None:
                    m.channels_last_input = fmt is channels_last
        for a in args:
            if isinstance(a, (backend.Device, int)) or (isinstance(a, str) and a.split(":")[0] in ("cpu", "cuda")):
                device = a  # (an int: the GPU of that index, as PyTorch's model.to(local_rank))
            elif isinstance(a, str) and a.split(":")[0] in _OTHER_DEVICES:  # (not a dtype either)
                backend.device(a)  # refused, naming the devices there are
            elif isinstance(a, str) and a.lower() not in backend.DTYPE_NAMES:  # ('gpu': a device, as Tensor.to's)
                raise InputError(f"Module.to: unknown device {a!r}; expected 'cpu', 'cuda' or 'cuda:N' (or a dtype "
                                 f"name: {', '.join(sorted(backend.DTYPE_NAMES))})")
            else:
                dtype = a
        if device is not None:
            dev = backend.device(device)
            self._apply(lambda a: backend.to_device(a, dev))
        if dtype is not None:
            dt = backend.as_dtype(dtype)
            # as PyTorch's: a floating or complex dtype, given to the floating and complex tensors (integer buffers,
            # step counts and indices, keep theirs)
            castable = lambda d: backend.is_floating(d) or np.dtype(d).kind == "c"  # noqa: E731
            if not castable(dt):
                raise InputTypeError(f"Module.to only accepts floating point or complex dtypes, but got desired "
                                     f"dtype={dt}")
            self._apply(lambda a: a.astype(dt) if castable(a.dtype) else a)
        if fmt is channels_last_3d:  # (the 5-d ones alone, as channels_last leaves those)
            self._apply(lambda a: to_channels_last_3d(a) if a.ndim == 5 else a)
        elif fmt is channels_last:
            self._apply(lambda a: to_layout(a, True) if a.ndim == 4 else a)
        elif fmt is contiguous_format:  # (the 4-d and 5-d ones, as PyTorch's)
            self._apply(lambda a: to_layout(a, False) if a.ndim in (4, 5) else a)
        return self

    def type(self, dst_type):
        """Every parameter and buffer (integer ones too, and gradients) cast to ``dst_type``, in place. As
        PyTorch's (``Tensor.type`` on each), ``dst_type`` may also be a legacy tensor type (``minifused.DoubleTensor``)
        or its name (``'torch.DoubleTensor'``, ``'torch.cuda.FloatTensor'``), which also moves them to its device."""
        if (isinstance(dst_type, str) and dst_type.endswith("Tensor")) or isinstance(dst_type, type) and hasattr(
                dst_type, "is_cuda"):
            probe = Tensor._from_array(backend.xp(backend.CPU).zeros(0, backend.float32)).type(dst_type)
            self.to(probe.device)  # (Tensor.type resolves the name, refusing a bad one before anything changes)
            dst_type = probe.dtype
        dt = backend.as_dtype(dst_type)
        return self._apply(lambda a: a.astype(dt, copy=False))

    def to_empty(self, *, device, recurse=True):
        """The parameters and buffers moved to ``device`` with their values left unset (zeros here), in place:
        PyTorch's step after building on the meta device, before initializing. ``recurse=False``: this module's
        own only."""
        dev = backend.device(device)
        for m in self.modules() if recurse else (self,):
            for table in (m._parameters, m._buffers):
                for v in table.values():
                    if v is not None:
                        with backend.on_device(dev):
                            v._data = backend.xp(dev).zeros(v.shape, v.dtype)
                        if getattr(v, "grad", None) is not None:
                            v.grad = None
        return self

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else device)

    def _cast_floating(self, dt):
        # (as PyTorch's float() / half() / ...: the floating tensors alone; ``to(dtype)`` casts complex ones too)
        return self._apply(lambda a: a.astype(dt) if backend.is_floating(a.dtype) else a)

    def float(self):
        return self._cast_floating(backend.float32)

    def half(self):
        return self._cast_floating(backend.float16)

    def bfloat16(self):
        return self._cast_floating(backend.bfloat16)

    def double(self):
        return self._cast_floating(backend.float64)

    # ------------------------------------------------------------ printing
    def extra_repr(self) -> str:
        return ""

    def __repr__(self):
        """PyTorch's layout: a one-line ``extra_repr`` of a module without children inside the parentheses, else
        each of its lines and each child on a line of its own, indented."""
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): " + repr(child).replace("\n", "\n  ") for name, child in self._modules.items()]
        body = ""
        if len(extra_lines) == 1 and not child_lines:
            body = extra_lines[0]
        elif extra_lines or child_lines:
            body = "\n  " + "\n  ".join(extra_lines + child_lines) + "\n"
        return f"{self._get_name()}({body})"

    def __dir__(self):
        """As PyTorch's: the attributes with the parameters, buffers and submodules (names starting with a digit,
        as a Sequential's, left out)."""
        keys = {*dir(type(self)), *self.__dict__, *self._parameters, *self._modules, *self._buffers}
        return sorted(k for k in keys if not k[:1].isdigit())


class _Hooks:
    """One module's hooks by kind, each an ordered dict from handle id to the hook (and its options)."""

    __slots__ = ("pre", "post", "backward", "backward_pre", "old_backward")

    def __init__(self):
        self.pre, self.post = OrderedDict(), OrderedDict()
        self.backward, self.backward_pre = OrderedDict(), OrderedDict()
        self.old_backward = OrderedDict()  # (register_backward_hook's)

    def empty(self):
        return not (self.pre or self.post or self.backward or self.backward_pre or self.old_backward)


_NO_HOOKS = _Hooks()  # (what a module without hooks of its own runs with: the global hooks alone)

#: PyTorch's global module hooks (``nn.modules.module``'s, for debugging and profiling): every module's call runs
#: them before its own hooks. Dicts from handle id to hook, and the ids of the forward hooks with those options.
_global_forward_pre_hooks = OrderedDict()
_global_forward_hooks = OrderedDict()
_global_forward_hooks_with_kwargs = OrderedDict()
_global_forward_hooks_always_called = OrderedDict()


def register_module_forward_pre_hook(hook):
    """``hook(module, args)`` before every module's ``forward`` (before the module's own pre-hooks), as PyTorch's
    ``nn.modules.module.register_module_forward_pre_hook``; it may return new args (a tuple, or one value)."""
    handle = RemovableHandle(None, "pre")
    _global_forward_pre_hooks[handle.id] = hook
    return handle


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    """``hook(module, args, output)`` (``hook(module, args, kwargs, output)`` with ``with_kwargs``) after every
    module's ``forward`` (before the module's own forward hooks), as PyTorch's
    ``nn.modules.module.register_module_forward_hook``; ``always_call`` as ``Module.register_forward_hook``'s."""
    handle = RemovableHandle(None, "post")
    _global_forward_hooks[handle.id] = hook
    if with_kwargs:
        _global_forward_hooks_with_kwargs[handle.id] = True
    if always_call:
        _global_forward_hooks_always_called[handle.id] = True
    return handle


def register_module_full_backward_pre_hook(hook):
    """``hook(module, grad_output)`` when the gradients of every module's outputs are known (before the module's
    own backward pre-hooks), as PyTorch's ``nn.modules.module.register_module_full_backward_pre_hook``; it may
    return a replacement ``grad_output`` tuple."""
    handle = RemovableHandle(None, "backward_pre")
    _global_backward_pre_hooks[handle.id] = hook
    return handle


def register_module_full_backward_hook(hook):
    """``hook(module, grad_input, grad_output)`` when the gradients with respect to every module's positional
    inputs are computed (before the module's own full backward hooks), as PyTorch's
    ``nn.modules.module.register_module_full_backward_hook``; it may return a replacement ``grad_input`` tuple."""
    handle = RemovableHandle(None, "backward")
    _global_backward_hooks[handle.id] = hook
    return handle


#: PyTorch's global registration hooks: ``hook(module, name, value)`` as a module registers a buffer, a module or a
#: parameter (not None), which it may replace by returning another.
_global_buffer_registration_hooks = OrderedDict()
_global_module_registration_hooks = OrderedDict()
_global_parameter_registration_hooks = OrderedDict()


def _registered(hooks, module, name, value):
    """``value`` after the registration ``hooks`` (each may return a replacement)."""
    for hook in list(hooks.values()):
        output = hook(module, name, value)
        if output is not None:
            value = output
    return value


def _registration_hook(table, hook):
    handle = RemovableHandle(None, "registration")
    table[handle.id] = hook
    return handle


def register_module_buffer_registration_hook(hook):
    """``hook(module, name, buffer)`` whenever any module registers a buffer (``register_buffer``, an assignment to
    a buffer's name, an ``nn.Buffer``), as PyTorch's; it may return a replacement buffer."""
    return _registration_hook(_global_buffer_registration_hooks, hook)


def register_module_module_registration_hook(hook):
    """``hook(module, name, submodule)`` whenever any module registers a submodule (``add_module``, assignment), as
    PyTorch's; it may return a replacement module."""
    return _registration_hook(_global_module_registration_hooks, hook)


def register_module_parameter_registration_hook(hook):
    """``hook(module, name, param)`` whenever any module registers a parameter (not None), as PyTorch's; it may
    return a replacement parameter."""
    return _registration_hook(_global_parameter_registration_hooks, hook)


def runs_hooks(module):
    """Whether calling ``module`` runs hooks (its own or the global ones): then it is to be called as it is, never
    fused into a neighbour nor run in place."""
    return module._call_hooks is not None or bool(_global_forward_pre_hooks or _global_forward_hooks
                                                  or _global_backward_hooks or _global_backward_pre_hooks)


def remove_hook(module, kind, key):
    """Unregister ``module``'s hook of ``kind`` ('pre', 'post', 'backward', 'backward_pre' or a state-dict hook's
    kind) under the handle id ``key`` (module None: the global hook; gone already: nothing to do)."""
    if module is None:
        for table in (_global_forward_pre_hooks, _global_forward_hooks, _global_forward_hooks_with_kwargs,
                      _global_forward_hooks_always_called, _global_backward_hooks, _global_backward_pre_hooks,
                      _global_buffer_registration_hooks, _global_module_registration_hooks,
                      _global_parameter_registration_hooks):
            table.pop(key, None)
        return
    if kind in STATE_HOOK_KINDS:
        module.__dict__.get("_state_hooks", {}).get(kind, {}).pop(key, None)
        return
    hooks = module.__dict__.get("_call_hooks")
    if hooks is None:
        return
    getattr(hooks, kind).pop(key, None)
    if hooks.empty():  # back to the fast path
        del module.__dict__["_call_hooks"]


def forward_pre_hooks(module):
    """(handle id, hook) of ``module``'s forward pre-hooks, in the order they run."""
    hooks = module.__dict__.get("_call_hooks")
    return [] if hooks is None else [(key, entry[0]) for key, entry in hooks.pre.items()]


class _HookTable(collections.abc.MutableMapping):
    """A module's hooks of one kind from handle id to hook: PyTorch's ``module._forward_hooks``,
    ``_forward_pre_hooks``, ``_backward_hooks`` and ``_backward_pre_hooks``, which code reads (``len``, ``items``)
    and edits (``clear``, ``del``, ``[id] = hook``). A live view of the module's hook tables, whose entries carry
    the options beside each hook; a hook set through it has the default options (kept when it replaces one)."""

    __slots__ = ("_module", "_kind")

    def __init__(self, module, kind):
        self._module, self._kind = module, kind

    def _table(self):
        hooks = self._module.__dict__.get("_call_hooks")
        return getattr(hooks, self._kind) if hooks is not None else {}

    def __getitem__(self, key):
        entry = self._table()[key]
        return entry[0] if self._kind in ("pre", "post") else entry

    def __setitem__(self, key, hook):
        table = self._module._hook_table(self._kind)
        if self._kind in ("pre", "post"):
            hook = (hook, *table.get(key, (None, False, False))[1:])
        table[key] = hook

    def __delitem__(self, key):
        if key not in self._table():
            raise KeyError(key)
        remove_hook(self._module, self._kind, key)

    def __iter__(self):
        return iter(list(self._table()))

    def __len__(self):
        return len(self._table())

    def set(self, hooks):
        """Make the hooks those of the mapping ``hooks`` (``module._forward_hooks = OrderedDict()``)."""
        items = list(dict(hooks).items())
        self.clear()
        self.update(items)

    def __repr__(self):
        return repr(OrderedDict(self.items()))


class RemovableHandle:
    """What a hook registration returns: ``remove()`` unregisters the hook (twice is harmless); as a
    context manager it removes the hook on leaving the block. ``module`` None: a global module hook's."""

    _ids = itertools.count()

    def __init__(self, module, kind):
        self.id = next(RemovableHandle._ids)
        self._module, self._kind = (None if module is None else weakref.ref(module)), kind

    def remove(self):
        if self._module is None:
            remove_hook(None, self._kind, self.id)
            return
        module = self._module()
        if module is not None:
            remove_hook(module, self._kind, self.id)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


def pre_hook_arguments(what, result, args, kwargs):
    """The (args, kwargs) after a pre-hook that sees both returned ``result``: None keeps them, else it must
    be the new pair (module forward pre-hooks with kwargs, optimizer step pre-hooks)."""
    if result is None:
        return args, kwargs
    if not (isinstance(result, tuple) and len(result) == 2):
        raise RuntimeError(f"{what} must return None or a tuple of (new_args, new_kwargs), got "
                           f"{type(result).__name__}")
    return result


def _forward_hook_entries(hooks):
    """(handle id, (hook, with_kwargs, always_call)) of the global forward hooks, then of the module's
    (``hooks``), in the order they run."""
    entries = [(key, (hook, key in _global_forward_hooks_with_kwargs, key in _global_forward_hooks_always_called))
               for key, hook in _global_forward_hooks.items()]
    return entries + list(hooks.post.items())


def _call_with_hooks(module, args, kwargs):
    """``module.forward`` between the global and the module's pre-hooks and forward hooks, its inputs and outputs
    routed through the backward-hook nodes when it has backward hooks. As PyTorch's: when anything of it raises
    (a pre-hook, ``forward``, a forward hook), the ``always_call`` forward hooks that have not run yet run, with
    the output so far (None before ``forward`` returned), their own errors turned into warnings, and the error
    is raised again."""
    hooks = module._call_hooks or _NO_HOOKS
    output, ran = None, set()
    try:
        for hook in list(_global_forward_pre_hooks.values()):
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        for hook, with_kwargs, _ in list(hooks.pre.values()):
            if with_kwargs:
                args, kwargs = pre_hook_arguments("forward pre-hook", hook(module, args, kwargs), args, kwargs)
            else:
                result = hook(module, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        state = None
        if (hooks.backward or hooks.backward_pre or _global_backward_hooks or _global_backward_pre_hooks) and \
                is_grad_enabled():
            args, state = wrap_inputs(module, args)
        output = module.forward(*args, **kwargs)
        for key, (hook, with_kwargs, always) in _forward_hook_entries(hooks):
            if always:
                ran.add(key)
            result = hook(module, args, kwargs, output) if with_kwargs else hook(module, args, output)
            if result is not None:
                output = result
        if state is not None:
            output = wrap_outputs(output, state)
        if hooks.old_backward and is_grad_enabled():
            _hook_last_node(module, args, output, hooks.old_backward)
        return output
    except Exception:
        for key, (hook, with_kwargs, always) in _forward_hook_entries(hooks):
            if not always or key in ran:
                continue
            try:
                result = hook(module, args, kwargs, output) if with_kwargs else hook(module, args, output)
                if result is not None:
                    output = result
            except Exception as e:  # the first error is the one to raise
                where = "global module" if key in _global_forward_hooks else "module"
                warnings.warn(f"{where} forward hook with ``always_call=True`` raised an exception that was "
                              f"silenced as another error was raised in forward: {e}", stacklevel=2)
        raise


# ---------------------------------------------------------------- register_backward_hook (deprecated)
_MIXED_BACKWARD_HOOKS = ("Cannot use both regular backward hooks and full backward hooks on a single Module. "
                         "Please use only one of them.")


def _backward_kind(module):
    """The kind of the backward hooks ``module._backward_hooks`` shows: the deprecated ones where it took those."""
    return "old_backward" if module._is_full_backward_hook is False else "backward"


#: a tape node -> (module weakref, hook) of the deprecated backward hooks its backward runs
_NODE_HOOKS = weakref.WeakKeyDictionary()
#: a Function -> its subclass whose backward also runs those hooks (what a hooked node's ``fn`` becomes)
_HOOKED_FNS = {}


def _first_tensor(output):
    """The tensor whose node the deprecated hooks go on, PyTorch's pick: the output, or its first entry (a dict's
    first tensor value), nested; None where there is none."""
    while not isinstance(output, Tensor):
        if isinstance(output, dict):
            output = next((v for v in output.values() if isinstance(v, Tensor)), None)
        elif isinstance(output, (tuple, list)) and output:
            output = output[0]
        else:
            return None
    return output


def _hook_last_node(module, args, output, hooks):
    """The deprecated backward ``hooks`` of this call of ``module`` put on the node of its output's first tensor,
    with PyTorch's FutureWarnings where they miss gradients."""
    var = _first_tensor(output)
    node = None if var is None else var._ctx
    if node is None:
        return
    ref = weakref.ref(module)
    _NODE_HOOKS.setdefault(node, []).extend((ref, hook) for hook in hooks.values())
    node.fn = _hooked_fn(node.fn)
    _warn_partial_hooks(args, output, node)


def _hooked_fn(fn):
    """``fn``'s subclass of the same name whose backward also runs the node's deprecated hooks (one per Function)."""
    if "_unhooked" in fn.__dict__:
        return fn
    cls = _HOOKED_FNS.get(fn)
    if cls is None:
        cls = _HOOKED_FNS[fn] = type(fn.__name__, (fn,), {
            "backward": staticmethod(_hooked_backward(fn)), "on_arrays": fn.on_arrays, "_unhooked": fn,
            "__module__": fn.__module__, "__qualname__": fn.__qualname__})
    return cls


def _hooked_backward(fn):
    def backward(ctx, *grads):
        ctx._consumers = None  # (so that the op hands no producer a Handoff: the hooks see gradients as arrays)
        got = fn.backward(ctx, *grads)
        got = got if isinstance(got, tuple) else (got,)
        n, needs = len(got), ctx.needs_input_grad
        while n > 1 and got[n - 1] is None and not needs[n - 1]:  # (its arguments that are no tensor, as a rule)
            n -= 1
        grad_input, grad_output = _wrap(got[:n]), _wrap(grads)
        for ref, hook in list(_NODE_HOOKS.get(ctx, ())):
            module = ref()
            if module is None:
                raise RuntimeError("You are trying to call the hook of a dead Module!")
            result = hook(module, grad_input, grad_output)
            if result is not None:
                result = tuple(result) if isinstance(result, list) else result
                grad_input = _checked(result, grad_input, "gradients (one per input of the module's last op)")
        return _arrays(grad_input) + got[n:]
    return backward


def _warn_partial_hooks(args, result, node):
    """PyTorch's FutureWarnings for deprecated backward hooks that miss gradients (``Module``'s
    ``_maybe_warn_non_full_backward_hook``): ``node`` (the output's first tensor's) is not the module's only last
    op, or its inputs are not the module's inputs (a module of several ops, or of parameters too)."""
    if isinstance(result, Tensor):
        result = (result,)
    elif not (isinstance(result, tuple) and all(isinstance(r, Tensor) for r in result)):
        warnings.warn("Using non-full backward hooks on a Module that does not return a single Tensor or a tuple of "
                      "Tensors is deprecated and will be removed in future versions. This hook will be missing some "
                      "of the grad_output. Please use register_full_backward_hook to get the documented behavior.",
                      FutureWarning, stacklevel=4)
        return
    if not all(isinstance(a, Tensor) for a in args):
        warnings.warn("Using non-full backward hooks on a Module that does not take as input a single Tensor or a "
                      "tuple of Tensors is deprecated and will be removed in future versions. This hook will be "
                      "missing some of the grad_input. Please use register_full_backward_hook to get the documented "
                      "behavior.", FutureWarning, stacklevel=4)
        return
    out_nodes = {id(r._ctx) for r in result if r._ctx is not None}
    if len(out_nodes) > 1:
        warnings.warn("Using a non-full backward hook when outputs are generated by different autograd Nodes is "
                      "deprecated and will be removed in future versions. This hook will be missing some grad_output. "
                      "Please use register_full_backward_hook to get the documented behavior.", FutureWarning,
                      stacklevel=4)
        return
    # the op's inputs, as PyTorch's next_functions: a non-leaf's node, a leaf (its AccumulateGrad), None
    next_nodes = {None if t is None else id(t._ctx) if t._ctx is not None else ("leaf", id(t)) for t in node.inputs}
    if {id(a._ctx) for a in args if a._ctx is not None} != next_nodes:
        warnings.warn("Using a non-full backward hook when the forward contains multiple autograd Nodes is "
                      "deprecated and will be removed in future versions. This hook will be missing some grad_input. "
                      "Please use register_full_backward_hook to get the documented behavior.", FutureWarning,
                      stacklevel=4)
