"""``torch.nn.utils.parametrize``: a module's tensor computed by parametrization modules from the tensors they
were registered on, as PyTorch's. After ``register_parametrization(module, "weight", P())``, ``module.weight``
is ``P()(original)``, recomputed at each access; the original lives in
``module.parametrizations.weight.original`` (the registered tensor object itself, holding the first
parametrization's ``right_inverse`` of it; ``original0``, ``original1``, ... where that splits it), which is what
the state dict and the optimizers see; assigning ``module.weight = value`` stores ``right_inverse(value)`` there
(an error where a parametrization has none). As in PyTorch the module's class becomes a
``Parametrized<Class>`` subclass holding the properties. Within ``cached()`` each tensor is computed once."""
from __future__ import annotations

import contextlib
import copy

from .. import backend
from ..autograd import no_grad
from ..tensor import Tensor
from .container import ModuleDict, ModuleList
from .module import Module, Parameter
from ..backend import InputError, InputTypeError

__all__ = ["register_parametrization", "is_parametrized", "remove_parametrizations", "cached", "ParametrizationList",
           "type_before_parametrizations", "transfer_parametrizations_and_params"]


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order to ``original`` (or to ``original0``, ``original1``,
    ... when the first one's ``right_inverse`` returns several tensors)."""

    def __init__(self, modules, original, unsafe=False):
        super().__init__(modules)
        self.unsafe = unsafe
        first = modules[0]
        with no_grad():
            try:
                new = first.right_inverse(original) if hasattr(first, "right_inverse") else original
            except NotImplementedError:  # PyTorch's: a right_inverse that cannot run keeps the original as it is
                new = original  # (orthogonal's matrix_exp and cayley maps without trivialization)
        if not isinstance(new, (Tensor, list, tuple)):
            raise InputError(f"'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). Got "
                             f"{type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if new.dtype != original.dtype:
                raise InputError(f"When `right_inverse` outputs one tensor, it may not change the dtype.\n"
                                 f"original.dtype: {original.dtype}\nright_inverse(original).dtype: {new.dtype}")
        else:
            for i, value in enumerate(new):
                if not isinstance(value, Tensor):
                    raise InputError(f"'right_inverse' must return a Tensor or a Sequence of tensors (list, "
                                     f"tuple...). Got element {i} of the sequence with type {type(value).__name__}.")
        # the same tensor object holds right_inverse's value (PyTorch's set_): an optimizer made before the
        # registration still trains it; given back where the parametrization's check below fails
        before = original._data
        if self.is_tensor:
            if new is not original:
                with no_grad():
                    _store(original, new)
            self._register("original", original)
        else:
            for i, value in enumerate(new):  # requires_grad as the original's, as PyTorch's
                value = value.detach().clone()
                self._register(f"original{i}", Parameter(value, original.requires_grad) if isinstance(
                    original, Parameter) else value.requires_grad_(original.requires_grad))
        if not unsafe:
            try:
                _check_same(tuple(before.shape), before.dtype, self())
            except BaseException:
                original._data = before
                raise

    def _register(self, name, value):
        if isinstance(value, Parameter):
            self.register_parameter(name, value)
        else:
            self.register_buffer(name, value)

    def originals(self):
        return [self.original] if self.is_tensor else [getattr(self, f"original{i}") for i in range(self.ntensors)]

    def forward(self):
        x = self[0](*self.originals())
        for m in list(self)[1:]:
            x = m(x)
        return x

    def right_inverse(self, value):
        """Store ``value`` as the originals that give it back (each parametrization's ``right_inverse``, last
        first)."""
        with no_grad():
            for m in reversed(list(self)):
                if not hasattr(m, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(m).__name__} does not implement right_inverse.")
                value = m.right_inverse(value)
            if not self.is_tensor and not isinstance(value, (list, tuple)):
                raise InputError(f"'right_inverse' must return a sequence of tensors. Got {type(value).__name__}.")
            values = [value] if self.is_tensor else list(value)
            if len(values) != self.ntensors:
                raise InputError(f"'right_inverse' must return a sequence of tensors of length {self.ntensors}. Got a "
                                 f"sequence of length {len(values)}.")
            for i, (original, v) in enumerate(zip(self.originals(), values)):
                if not isinstance(v, Tensor):
                    raise InputError(f"`right_inverse` should return a tensor. Got {type(v).__name__}")
                if v.dtype != original.dtype:
                    name = "original" if self.is_tensor else f"original{i}"
                    raise InputError(f"The tensor returned by `right_inverse` has dtype {v.dtype} while `{name}` has "
                                     f"dtype {original.dtype}")
            for original, v in zip(self.originals(), values):
                _store(original, v)


def _store(original, value):
    """``original`` (the same tensor object) holding ``value``: copied in where the shapes agree, else its data
    replaced (PyTorch's set_, which a right_inverse of another shape needs)."""
    with no_grad():
        if tuple(value.shape) == tuple(original.shape) and value.dtype == original.dtype:
            original.copy_(value)
        else:
            original._data = backend.copy(value.detach()._data)
            original._bump("register_parametrization")


def is_parametrized(module, tensor_name=None):
    plist = module.__dict__.get("_modules", {}).get("parametrizations")
    if not isinstance(plist, ModuleDict):
        return False
    return tensor_name in plist if tensor_name is not None else len(plist) > 0


def _parametrized_property(name):
    def get(self):
        given = self.__dict__.get("_given_tensors")  # functional_call's tensors stand in for the parametrized one
        if given and name in given:
            return given[name]
        if _cache_depth:  # inside cached(): computed once per module and tensor, as PyTorch's
            key = (id(self), name)
            value = _cache.get(key)
            if value is None:
                value = _cache[key] = self.parametrizations[name]()
            return value
        return self.parametrizations[name]()

    def put(self, value):
        self.parametrizations[name].right_inverse(value)
    return property(get, put)


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Parametrize ``module``'s parameter or buffer ``tensor_name`` by ``parametrization`` (a Module; more than
    one are applied in registration order). Unless ``unsafe``, the result must keep the tensor's shape and
    dtype. Returns the module."""
    if not isinstance(parametrization, Module):
        raise InputTypeError(f"register_parametrization: expected a Module, got {type(parametrization).__name__}")
    if is_parametrized(module, tensor_name):
        plist = module.parametrizations[tensor_name]
        if not unsafe:  # the new one keeps the tensor's shape and dtype, and so does its right_inverse (PyTorch's)
            before = getattr(module, tensor_name)
            after = parametrization(before)
            _check_same(tuple(before.shape), before.dtype, after)
            if hasattr(parametrization, "right_inverse"):
                try:
                    back = parametrization.right_inverse(after)
                except NotImplementedError:
                    pass
                else:
                    if not isinstance(back, Tensor) or tuple(back.shape) != tuple(before.shape) or \
                            back.dtype != before.dtype:
                        raise InputError(f"Registering a parametrization may not change the shape or dtype of the "
                                         f"tensor through its right_inverse, unless the `unsafe` flag is enabled: "
                                         f"{before.dtype}{tuple(before.shape)} became "
                                         f"{getattr(back, 'dtype', type(back).__name__)}"
                                         f"{tuple(getattr(back, 'shape', ()))}")
        plist.append(parametrization)
        plist.unsafe = plist.unsafe or unsafe
        return module
    if tensor_name in module._parameters:
        store = module._parameters
    elif tensor_name in module._buffers:
        store = module._buffers
    else:
        raise InputError(f"register_parametrization: module {type(module).__name__} has no parameter or buffer "
                         f"with name {tensor_name!r}")
    original = store[tensor_name]
    plist = ParametrizationList([parametrization], original, unsafe)  # (which checks the result unless unsafe)
    del store[tensor_name]
    if not is_parametrized(module):
        cls = type(module)
        module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), {
            "_unparametrized_class": cls, "__getstate__": _refuse_pickling, "__deepcopy__": _deepcopy})
        module.parametrizations = ModuleDict()
    module.parametrizations[tensor_name] = plist
    setattr(type(module), tensor_name, _parametrized_property(tensor_name))
    return module


def _refuse_pickling(self):
    """A parametrized module's class is made at registration (no name to pickle it by): PyTorch's error."""
    raise RuntimeError("Serialization of parametrized modules is only supported through state_dict(). See:\n"
                       "https://pytorch.org/tutorials/beginner/saving_loading_models.html"
                       "#saving-loading-a-general-checkpoint-for-inference-and-or-resuming-training")


def _deepcopy(self, memo):
    """A copy of the parametrized module (its class shared), as PyTorch's: pickling is refused, copying is not."""
    replica = memo.get(id(self))
    if replica is None:
        replica = memo[id(self)] = self.__class__.__new__(self.__class__)
        replica.__dict__ = copy.deepcopy(self.__dict__, memo)
    return replica


def _check_same(shape, dtype, new):
    if not isinstance(new, Tensor):
        raise InputError(f"A parametrization must return a tensor. Got {type(new).__name__}.")
    if tuple(new.shape) != shape or new.dtype != dtype:
        raise InputError(f"Registering a parametrization may not change the shape or dtype of the tensor, unless "
                         f"the `unsafe` flag is enabled: {dtype}{shape} became {new.dtype}{tuple(new.shape)}")


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Remove ``tensor_name``'s parametrizations: it becomes a plain parameter (or buffer) again, holding its
    parametrized value (``leave_parametrized``) or its original. Returns the module."""
    if not is_parametrized(module, tensor_name):
        raise InputError(f"Module {type(module).__name__} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if leave_parametrized:
        with no_grad():
            value = plist().detach()
        original = plist.originals()[0]
        if plist.is_tensor and original.shape == value.shape and original.dtype == value.dtype:
            with no_grad():
                original.copy_(value)  # the same tensor object: the optimizers' keeps working
            kept = original
        else:
            kept = Parameter(value.clone()) if isinstance(original, Parameter) else value.clone()
    elif plist.is_tensor:
        kept = plist.original
    else:
        raise InputError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is parametrized in "
                         "terms of a sequence of tensors.")
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    if isinstance(kept, Parameter):
        module.register_parameter(tensor_name, kept)
    else:
        module.register_buffer(tensor_name, kept)
    if not is_parametrized(module):
        del module.parametrizations
        module.__class__ = type(module)._unparametrized_class
    return module


#: cached()'s nesting depth and the parametrized tensors computed within it, by (id(module), tensor name)
_cache_depth = 0
_cache = {}


@contextlib.contextmanager
def cached():
    """PyTorch's caching context: within it each parametrized tensor is computed once, at its first access (the
    same tensor, one graph, afterwards), until the outermost ``cached()`` exits."""
    global _cache_depth
    _cache_depth += 1
    try:
        yield
    finally:
        _cache_depth -= 1
        if not _cache_depth:
            _cache.clear()


def type_before_parametrizations(module):
    """The module's class before any parametrization was registered on it (its class where none is)."""
    return type(module)._unparametrized_class if is_parametrized(module) else type(module)


def transfer_parametrizations_and_params(from_module, to_module, tensor_name=None):
    """Register ``from_module``'s parametrizations (the same parametrization modules) of ``tensor_name`` (all of
    them by default) on ``to_module``, whose originals become ``from_module``'s (the same tensors), as PyTorch's;
    a tensor ``to_module`` lacks is first made a Parameter holding ``from_module``'s value. Returns
    ``to_module``; nothing happens where ``from_module`` is not parametrized."""
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        if not is_parametrized(from_module, name):
            raise KeyError(f"transfer_parametrizations_and_params: {type(from_module).__name__} has no "
                           f"parametrization on {name!r}")  # (PyTorch's KeyError)
        if not hasattr(to_module, name):
            with no_grad():
                setattr(to_module, name, Parameter(getattr(from_module, name).detach().clone()))
        source = from_module.parametrizations[name]
        for parametrization in source:
            register_parametrization(to_module, name, parametrization)
        target = to_module.parametrizations[name]
        for i, original in enumerate(source.originals()):
            setattr(target, "original" if source.is_tensor else f"original{i}", original)
    return to_module
