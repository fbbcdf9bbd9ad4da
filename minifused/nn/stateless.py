"""``torch.nn.utils.stateless.functional_call``: a module's forward run with some of its parameters and buffers
replaced by given tensors for the one call, the module's own put back afterwards (also when the call raises).
``minifused.func.functional_call`` is the same call taking a sequence of dicts too."""
from __future__ import annotations

import warnings

from ..tensor import Tensor
from .module import Module
from .parametrize import is_parametrized
from ..backend import InputError, InputTypeError

__all__ = ["functional_call"]


def _owner(module, name):
    """The submodule holding dotted ``name`` and its last part (AttributeError for a missing submodule)."""
    *path, leaf = name.split(".")
    for part in path:
        module = getattr(module, part)
    return module, leaf


def _tied_names(module):
    """For each parameter / buffer name, every name of the same tensor (tied weights), as a dict."""
    by_id = {}
    for name, t in list(module.named_parameters(remove_duplicate=False)) + \
            list(module.named_buffers(remove_duplicate=False)):
        by_id.setdefault(id(t), []).append(name)
    return {name: names for names in by_id.values() for name in names}


def _untie(module, given):
    """``given`` extended to the other names of tied tensors (PyTorch's ``tie_weights=True``)."""
    tied = _tied_names(module)
    out = dict(given)
    for name, value in given.items():
        group = tied.get(name, [name])
        clash = [n for n in group if n in given and given[n] is not value]
        if clash:
            raise InputError(f"functional_call got multiple values for keys {sorted([name] + clash)}, which are "
                             f"tied. Consider using tie_weights=False")
        for other in group:
            out[other] = value
    return out


def _check_strict(module, given):
    expected = [n for n, _ in module.named_parameters(remove_duplicate=False)] + \
               [n for n, _ in module.named_buffers(remove_duplicate=False)]
    missing = sorted(set(expected) - set(given))  # (sorted, as PyTorch's)
    unexpected = sorted(set(given) - set(expected))
    if missing or unexpected:
        lines = [f"Error(s) in reparametrizing for {type(module).__name__}:"]
        if unexpected:
            lines.append("\tUnexpected key(s): " + ", ".join(repr(n) for n in unexpected) + ".")
        if missing:
            lines.append("\tMissing key(s): " + ", ".join(repr(n) for n in missing) + ".")
        raise RuntimeError("\n".join(lines))


def _swap_in(module, given):
    """Put ``given`` into the module; returns what restores it (store, key, previous value; None: a new attribute)."""
    undo = []
    try:
        for name, value in given.items():
            owner, leaf = _owner(module, name)
            if is_parametrized(owner, leaf):  # the tensor the parametrization computes, as PyTorch's
                store = owner.__dict__.setdefault("_given_tensors", {})
                undo.append((store, leaf, store.get(leaf, _ABSENT)))
                store[leaf] = value
                continue
            for store in (owner._parameters, owner._buffers):
                if leaf in store:  # the stores are what attribute access reads: a plain tensor may stand in
                    undo.append((store, leaf, store[leaf]))
                    store[leaf] = value
                    break
            else:
                undo.append((owner.__dict__, leaf, owner.__dict__.get(leaf, _ABSENT)))
                owner.__dict__[leaf] = value
    except BaseException:
        _restore(undo)
        raise
    return undo


_ABSENT = object()


def _restore(undo):
    for store, key, previous in reversed(undo):
        if previous is _ABSENT:
            store.pop(key, None)
        else:
            store[key] = previous


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """:func:`call_with` with PyTorch's deprecation warning of ``torch.nn.utils.stateless.functional_call``
    (``torch.func.functional_call`` is its replacement, and calls :func:`call_with` without it)."""
    warnings.warn("`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 and will be removed in a "
                  "future version of PyTorch. Please use `torch.func.functional_call` instead which is a drop-in "
                  "replacement.", FutureWarning, stacklevel=2)
    return call_with(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights, strict=strict)


def call_with(module, parameters_and_buffers, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """``module(*args, **kwargs)`` with the parameters and buffers named (dotted, as in ``state_dict``) in
    ``parameters_and_buffers`` replaced by the given tensors during the call; the module's own are restored
    afterwards, even if the call raises. ``args`` that is not a tuple is the one positional argument.
    ``tie_weights`` replaces every name of a tied tensor when one is given; ``strict`` requires exactly the
    module's names. A None value stands for no tensor (a Linear without bias for the call), as in PyTorch.
    Gradients flow to the given tensors, not to the module's parameters."""
    if not isinstance(module, Module):
        raise InputTypeError(f"functional_call: expected a minifused.nn.Module, got {type(module).__name__}")
    if not isinstance(parameters_and_buffers, dict):
        raise InputTypeError(f"functional_call: parameters_and_buffers must be a dict of name -> tensor, got "
                             f"{type(parameters_and_buffers).__name__}")
    for name, value in parameters_and_buffers.items():
        if not isinstance(name, str) or not (value is None or isinstance(value, Tensor)):
            raise InputTypeError(f"functional_call: expected str keys and tensor values (or None), got {name!r}: "
                                 f"{type(value).__name__}")
    given = _untie(module, parameters_and_buffers) if tie_weights else dict(parameters_and_buffers)
    if strict:
        _check_strict(module, given)
    args = () if args is None else args if isinstance(args, tuple) else (args,)
    kwargs = {} if kwargs is None else kwargs
    undo = _swap_in(module, given)
    try:
        return module(*args, **kwargs)
    finally:
        _restore(undo)
