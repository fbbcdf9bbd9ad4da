"""Module state dicts in PyTorch's protocol: ``state_dict`` asks every module's ``_save_to_state_dict`` (its
parameters, persistent buffers and ``get_extra_state()``) between its state-dict hooks; ``load_state_dict`` asks
every module's ``_load_from_state_dict`` (which runs its load pre-hooks), then its load post-hooks, so a module
that overrides either (renaming old checkpoints' keys, keeping extra state) loads as under PyTorch. Unlike
PyTorch's, a load copies nothing until every key and value is checked: each module's ``_load_from_state_dict``
stages its copies, and they are made only if no module reported an error. Values come from minifused tensors,
NumPy / CuPy arrays or another library's tensors (DLPack, the array interfaces), cast to the target's dtype and
moved to its device; with ``assign=True`` the state dict's tensors themselves take the place of the module's, as
PyTorch's."""
from __future__ import annotations

import warnings
from collections import OrderedDict, namedtuple
from collections.abc import Mapping

import numpy as np

from .. import backend
from ..autograd import no_grad
from ..tensor import Tensor
from .param import Parameter
from ..backend import InputTypeError

EXTRA_STATE = "_extra_state"
#: The kinds of state-dict hooks a module keeps (in ``module.__dict__["_state_hooks"]``).
STATE_HOOK_KINDS = ("save_pre", "save_post", "load_pre", "load_post")
_staged = []  # per load_state_dict call in progress (innermost last): the copies it makes once all is checked


def state_hooks(module, kind):
    """``module``'s hooks of ``kind`` (one of STATE_HOOK_KINDS), in the order they run."""
    return list(module.__dict__.get("_state_hooks", {}).get(kind, {}).values())


def _overrides(module, name, base):
    return getattr(type(module), name) is not getattr(base, name)


def save_own_state(module, destination, prefix, keep_vars, base):
    """``Module._save_to_state_dict``: the module's parameters and persistent buffers (detached unless
    ``keep_vars``; an uninitialized one as itself, as PyTorch's), and ``get_extra_state()`` if its class defines
    it (``base``: the Module class)."""
    skip = module.__dict__.get("_non_persistent", set())
    for table, kept in ((module._parameters, ()), (module._buffers, skip)):
        for name, v in table.items():
            if v is not None and name not in kept:
                destination[prefix + name] = v if keep_vars or _uninitialized(v) else v.detach()
    if _overrides(module, "get_extra_state", base):
        destination[prefix + EXTRA_STATE] = module.get_extra_state()


def module_state_dict(module, destination, prefix, keep_vars):
    """``Module.state_dict``'s walk: pre-hooks, the module's own state, its children's, post-hooks (a hook
    registered through the private ``_register_state_dict_hook`` may return a new dict, as PyTorch's)."""
    local_metadata = {"version": module._version}
    if hasattr(destination, "_metadata"):  # each module's version under its dotted name, as PyTorch's
        destination._metadata[prefix[:-1]] = local_metadata
    for hook in state_hooks(module, "save_pre"):
        hook(module, prefix, keep_vars)
    module._save_to_state_dict(destination, prefix, keep_vars)
    for name, child in module._modules.items():
        if child is not None:
            module_state_dict(child, destination, prefix + name + ".", keep_vars)
    for hook in state_hooks(module, "save_post"):
        result = hook(module, destination, prefix, local_metadata)
        if getattr(hook, "_from_public_api", False):
            if result is not None:
                raise RuntimeError("state_dict post-hook must return None")
        elif result is not None:
            destination = result
    return destination


def load_own_state(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs,
                   base):
    """``Module._load_from_state_dict``: the module's load pre-hooks, then its parameters, persistent buffers
    and extra state checked against ``state_dict`` (problems into ``error_msgs``, absent keys into
    ``missing_keys`` unless the class lists them in ``_optional_state`` and the dict's version of the module is
    older than its ``_version`` or unknown, keys under ``prefix`` that name nothing of this module into
    ``unexpected_keys``) and staged for the copy, or, with ``local_metadata["assign_to_params_buffers"]``
    (``load_state_dict(assign=True)``), for the assignment (see :func:`_assigned`)."""
    for hook in state_hooks(module, "load_pre"):
        hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
    skip = module.__dict__.get("_non_persistent", set())
    local = {name: v for table, kept in ((module._parameters, ()), (module._buffers, skip))
             for name, v in table.items() if v is not None and name not in kept}
    stage = _staged[-1] if _staged else None
    version = local_metadata.get("version")
    optional = type(module)._optional_state if version is None or version < module._version else ()
    assign = local_metadata.get("assign_to_params_buffers", False)
    for name, target in local.items():
        key = prefix + name
        if key not in state_dict:
            if strict and name not in optional:
                missing_keys.append(key)
            continue
        src = _checked_source(key, target, state_dict[key], error_msgs)
        if src is not None and assign:
            put = _assigned(module, name, key, target, state_dict[key], src, error_msgs)
            if put is not None and stage is not None:
                stage.append((put, None))
            elif put is not None:
                put(None)
        elif src is not None and stage is not None:
            stage.append((target, src))
        elif src is not None:  # called outside load_state_dict (a user's own walk): copy now, as PyTorch does
            _copy_into(target, src)
    extra_key = prefix + EXTRA_STATE
    if _overrides(module, "set_extra_state", base):
        if extra_key in state_dict:
            value = state_dict[extra_key]
            if stage is not None:
                stage.append((module.set_extra_state, value))
            else:
                module.set_extra_state(value)
        elif strict:
            missing_keys.append(extra_key)
    elif strict and extra_key in state_dict:
        unexpected_keys.append(extra_key)
    if strict:
        for key in state_dict:
            if key.startswith(prefix) and key != extra_key:
                head = key[len(prefix):].split(".", 1)
                if (head[0] not in module._modules) if len(head) > 1 else (head[0] not in local):
                    unexpected_keys.append(key)


def _checked_source(key, target, value, error_msgs):
    """The array to copy into ``target`` from the state dict's ``value`` under ``key``, or None with the problem
    in ``error_msgs`` (uninitialized entries, left so, count as nothing to copy)."""
    if _uninitialized(target) or _uninitialized(value):
        if not _uninitialized(target):
            error_msgs.append(f"{key}: uninitialized in the state dict, shape {tuple(target.shape)} in the model")
        elif not _uninitialized(value) and not any(p.startswith(key + ":") for p in error_msgs):
            error_msgs.append(f"{key}: uninitialized in the model, outside a lazy module (nothing infers its shape)")
        return None
    src = _foreign_array(value)
    if src is None:
        error_msgs.append(f"{key}: a {type(value).__name__} in the state dict, expected a tensor or an array")
        return None
    if target.ndim == 0 and tuple(src.shape) == (1,):  # PyTorch loads a one-element vector into a 0-d state
        src = src.reshape(())
    if tuple(src.shape) != tuple(target.shape):
        error_msgs.append(f"size mismatch for {key}: copying a param with shape {tuple(src.shape)} from "
                          f"checkpoint, the shape in current model is {tuple(target.shape)}.")
        return None
    if not _castable(src.dtype):
        error_msgs.append(f"{key}: dtype {src.dtype} in the state dict cannot be copied into {target.dtype}")
        return None
    return src


def _assigned(module, name, key, target, value, src, error_msgs):
    """For ``load_state_dict(assign=True)``: a function that puts the state dict's ``value`` (checked, its array
    ``src``) in place of ``module``'s ``target`` under ``name``, as PyTorch's: the tensor itself, its dtype and
    device kept (an array or another library's tensor wrapped, sharing its memory); for a parameter, a Parameter
    with the old one's ``requires_grad`` (a Parameter given is itself set so). None, with the problem in
    ``error_msgs``, when it cannot be (a parameter that requires grad given an integer tensor)."""
    tensor = value if isinstance(value, Tensor) and value._data is src else Tensor._from_array(src)
    if isinstance(target, Parameter):
        requires_grad = target.requires_grad
        if requires_grad and not backend.is_floating(src.dtype):
            error_msgs.append(f'While copying the parameter named "{key}", whose dimensions in the model are '
                              f"{tuple(target.shape)} and whose dimensions in the checkpoint are {tuple(src.shape)}, "
                              f"an exception occurred : only floating-point tensors can require gradients, got "
                              f"dtype {src.dtype}.")
            return None
        if not isinstance(tensor, Parameter):
            tensor = Parameter(tensor, requires_grad=requires_grad)

        def put(_):
            tensor.requires_grad = requires_grad
            setattr(module, name, tensor)
        return put
    return lambda _: setattr(module, name, tensor)


def _copy_into(target, src):
    with no_grad():
        if src.dtype != target.dtype:  # cast on the host: NumPy (with ml_dtypes) casts every pair
            src = backend.to_device_bits(src, backend.CPU).astype(target.dtype)
        target._data[...] = backend.to_device_bits(src, target.device)
        target._bump("load_state_dict")


def load_state_into(root, state_dict, strict=True, assign=False):
    """``root.load_state_dict(state_dict, strict, assign)`` (see its docstring); returns (missing, unexpected)
    keys."""
    if not isinstance(state_dict, Mapping):
        raise InputTypeError(f"load_state_dict: expected a mapping of names to tensors, got "
                             f"{type(state_dict).__name__}")
    metadata = getattr(state_dict, "_metadata", None)
    state_dict = OrderedDict(state_dict)  # hooks and overrides may rename keys: the caller's dict stays as it was
    if metadata is not None:  # (the copy keeps it, as PyTorch's: load pre-hooks may read it)
        state_dict._metadata = metadata
    missing, unexpected = [], []
    # a lazy module (nn.lazy) first gives its uninitialized entries the loaded shapes, as PyTorch's load hook
    errors = [p for prefix, module in root.named_modules(remove_duplicate=False) if hasattr(module, "_lazy_load")
              for p in module._lazy_load(state_dict, f"{prefix}." if prefix else "")]
    stage = []
    _staged.append(stage)
    try:
        _load_walk(root, state_dict, "", metadata, missing, unexpected, errors, assign)
    finally:
        _staged.pop()
    if strict:  # (PyTorch's wording, so its users' checks match)
        if unexpected:
            errors.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
        if missing:
            errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
    if errors:
        raise RuntimeError(f"Error(s) in loading state_dict for {type(root).__name__}:\n\t" + "\n\t".join(errors))
    for target, src in stage:
        if isinstance(target, Tensor):
            _copy_into(target, src)
        else:
            target(src)  # a module's set_extra_state
    return _IncompatibleKeys(missing, unexpected)


def _load_walk(module, state_dict, prefix, metadata, missing, unexpected, errors, assign):
    """PyTorch's ``load``: the module's ``_load_from_state_dict`` on the keys under its prefix (``assign`` told in
    its ``local_metadata``, as PyTorch's), its children's, then its load post-hooks (which may edit the missing and
    unexpected keys in place)."""
    local_metadata = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
    if assign:
        local_metadata["assign_to_params_buffers"] = True
    module._load_from_state_dict(state_dict, prefix, local_metadata, True, missing, unexpected, errors)
    for name, child in module._modules.items():
        if child is not None:
            child_prefix = prefix + name + "."
            child_dict = {k: v for k, v in state_dict.items() if k.startswith(child_prefix)}
            _load_walk(child, child_dict, child_prefix, metadata, missing, unexpected, errors, assign)
    keys = _IncompatibleKeys(missing, unexpected)
    for hook in state_hooks(module, "load_post"):
        if hook(module, keys) is not None:
            raise RuntimeError("Hooks registered with register_load_state_dict_post_hook are not expected to return "
                               "new values; edit incompatible_keys in place instead")


def consume_prefix_in_state_dict_if_present(state_dict, prefix):
    """Strip ``prefix`` (``'module.'``, which ``DataParallel`` / ``DistributedDataParallel`` put before their
    module's names) from the keys of ``state_dict`` that start with it, in place, and from its ``_metadata`` keys if
    it has them (``'module'`` too; the wrapper's own ``''`` is left), as PyTorch's
    ``nn.modules.utils.consume_prefix_in_state_dict_if_present``."""
    for key in list(state_dict.keys()):
        if key.startswith(prefix):
            state_dict[key[len(prefix):]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        for key in list(metadata.keys()):
            if key and (key == prefix.replace(".", "") or key.startswith(prefix)):
                metadata[key[len(prefix):]] = metadata.pop(key)


def _foreign_array(value):
    """A NumPy or CuPy array viewing ``value`` (a Tensor, an array, or another library's tensor),
    or None when it is none of these."""
    if isinstance(value, Tensor):
        return value._data
    if isinstance(value, np.ndarray) or backend.is_cuda_array(value):
        return value
    if getattr(value, "requires_grad", False) and hasattr(value, "detach"):
        value = value.detach()  # PyTorch refuses to export a tensor that requires grad
    if str(getattr(value, "dtype", "")) == "torch.bfloat16" and hasattr(value, "view"):
        # DLPack consumers know no bfloat16: move its bits as int16 and view them back
        import torch

        bits = _foreign_array(value.view(torch.int16))
        return None if bits is None else bits.view(backend.bfloat16)
    if hasattr(value, "__dlpack__") and hasattr(value, "__dlpack_device__"):
        kind = value.__dlpack_device__()[0]
        if kind == 1:  # kDLCPU
            return np.from_dlpack(value)
        if kind == 2 and backend.cuda_available():  # kDLCUDA
            return backend.cupy.from_dlpack(value)
    if hasattr(value, "__cuda_array_interface__") and backend.cuda_available():
        return backend.cupy.asarray(value)
    if hasattr(value, "__array_interface__"):
        return np.asarray(value)
    return None


def _uninitialized(value):
    """Whether ``value`` is an uninitialized parameter or buffer (``nn.lazy``'s, which this module does not import)."""
    return getattr(value, "_uninitialized", False)


def _castable(dtype):
    return backend.is_floating(dtype) or np.dtype(dtype).kind in "biu"


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """(missing_keys, unexpected_keys): PyTorch's NamedTuple (``_fields``, ``_asdict()`` ...), shown as its."""

    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return f"_IncompatibleKeys(missing_keys={self.missing_keys}, unexpected_keys={self.unexpected_keys})"

    __str__ = __repr__


class StateDicts:
    """Module's state-dict methods (a base class of ``Module``): PyTorch's protocol as the module doc says."""

    #: The version a module's state dict records (its ``local_metadata["version"]``), as PyTorch's ``_version``.
    _version = 1
    #: Names of the module's own state that ``load_state_dict`` does not require (absent: kept as it is).
    #: States this ``_version`` added: a state dict of an older version of the module, or without version metadata
    #: (``state_dict._metadata``, which PyTorch's dicts carry), may lack them, and they then keep their values.
    _optional_state: tuple = ()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """Parameters and persistent buffers (and extra state) by dotted name, as detached tensors sharing memory
        (the Parameters themselves with ``keep_vars``), put into ``destination`` when given. ``prefix`` is
        prepended as given (``prefix="model."``). PyTorch's order and names: module by module (depth first),
        each one's parameters then its buffers, a module or tensor shared along several paths under each of its
        names. Positional arguments are PyTorch's deprecated (destination, prefix, keep_vars)."""
        if args:
            warnings.warn("Positional args are being deprecated, use kwargs instead.", FutureWarning, stacklevel=2)
            destination = args[0] if destination is None else destination
            prefix = args[1] if len(args) > 1 and prefix == "" else prefix
            keep_vars = args[2] if len(args) > 2 and keep_vars is False else keep_vars
        if not isinstance(prefix, str):
            raise InputTypeError(f"state_dict: prefix must be a string, got {type(prefix).__name__}")
        if destination is None:
            destination = OrderedDict()
            # every module's ``{"version": _version}`` by name, as PyTorch's dicts carry it (a load reads it)
            destination._metadata = OrderedDict()
        return module_state_dict(self, destination, prefix, keep_vars)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        """This module's own state (not its children's) into ``destination``; override to save more."""
        save_own_state(self, destination, prefix, keep_vars, StateDicts)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        """This module's own state from ``state_dict`` (see :func:`load_own_state`); override to rename old keys
        (then call this)."""
        load_own_state(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs,
                       StateDicts)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy values in place; with ``strict``, missing or unexpected keys are an error.

        Values may be minifused tensors or any array another library hands over (a PyTorch tensor,
        NumPy, CuPy: DLPack, ``__cuda_array_interface__`` or ``__array_interface__``). As in PyTorch
        each is copied into the existing tensor, cast to its dtype and moved to its device; shapes
        must match. Everything is checked before anything is copied. With ``assign``, as PyTorch's, the
        module's parameters and buffers become the state dict's tensors instead (their dtype and device kept,
        their memory shared; a parameter a Parameter keeping the old one's ``requires_grad``): an optimizer is to
        be made after such a load. A state a module lists in ``_optional_state`` may be
        absent from a dict of an older version of the module or without version metadata, and then keeps its
        value (BatchNorm's ``num_batches_tracked``, which PyTorch fills in for such dicts: older checkpoints,
        dicts built by hand).
        """
        return load_state_into(self, state_dict, strict, assign)

    def get_extra_state(self):
        """Define it (with :meth:`set_extra_state`) to keep any picklable value under ``<prefix>_extra_state``."""
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never be called.")

    def set_extra_state(self, state):
        """Define it (with :meth:`get_extra_state`) to take back the value saved under ``<prefix>_extra_state``."""
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never be called.")

    def register_state_dict_pre_hook(self, hook):
        """``hook(module, prefix, keep_vars)`` runs before this module's part of ``state_dict``."""
        return self._add_state_hook("save_pre", hook)

    def register_state_dict_post_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata)`` runs after this module's part of ``state_dict``
        and may edit it in place (returning anything else than None is an error)."""
        hook._from_public_api = True
        return self._add_state_hook("save_post", hook)

    def _register_state_dict_hook(self, hook):
        """PyTorch's older post-hook: as :meth:`register_state_dict_post_hook`, but a dict it returns replaces
        the state dict."""
        if getattr(hook, "_from_public_api", False):
            raise RuntimeError("Cannot register the same function as the state dict post hook that was previously "
                               "registered via register_state_dict_post_hook")
        return self._add_state_hook("save_post", hook)

    def register_load_state_dict_pre_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)``
        runs before this module's part of ``load_state_dict`` and may edit the (copied) state dict."""
        return self._add_state_hook("load_pre", hook)

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        """PyTorch's older form: the hook without the module first unless ``with_module``."""
        return self._add_state_hook("load_pre", hook if with_module else (lambda module, *args: hook(*args)))

    def register_load_state_dict_post_hook(self, hook):
        """``hook(module, incompatible_keys)`` runs after this module and its children loaded; it may edit
        ``incompatible_keys.missing_keys`` / ``unexpected_keys`` in place (what ``strict`` then checks)."""
        return self._add_state_hook("load_post", hook)
