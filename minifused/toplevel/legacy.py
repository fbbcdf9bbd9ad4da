"""PyTorch's legacy tensor types (``FloatTensor``, ``LongTensor`` ...): called, they make a cpu tensor of their
dtype (``LongTensor([1, 2])`` from data, ``FloatTensor(2, 3)`` of a size, zeros where PyTorch leaves memory
uninitialized); ``isinstance(t, FloatTensor)`` asks whether ``t`` is a cpu float32 tensor; ``t.type(FloatTensor)``
converts to one. Their cuda twins (``minifused.cuda.FloatTensor`` ..., set on that module here) do the same on the
current cuda device (``Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor``, a pattern of older
scripts). A metaclass gives the classes these, so none of them is a subclass of ``Tensor`` (as in PyTorch, where
they are not either)."""
from __future__ import annotations

import importlib
import numbers
import os

from .. import backend, ops
from .. import cuda as _cuda_module
from ..tensor import Size, Tensor
from ..backend import InputTypeError

_LEGACY = {"FloatTensor": backend.float32, "DoubleTensor": backend.float64, "HalfTensor": backend.float16,
           "BFloat16Tensor": backend.bfloat16, "LongTensor": backend.int64, "IntTensor": backend.int32,
           "ShortTensor": backend.int16, "CharTensor": backend.int8, "ByteTensor": backend.uint8,
           "BoolTensor": backend.bool_}
__all__ = list(_LEGACY) + ["set_default_tensor_type", "is_storage"]


class _LegacyTensorType(type):
    """The type of each legacy tensor type: calling one makes a tensor, ``isinstance`` checks dtype and device."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype and obj.device.type == cls._device

    def __call__(cls, *args, device=None):
        name, where = f"{cls.__module__}.{cls.__name__}", cls._device
        if device is not None and backend.Device(device).type != where:
            raise RuntimeError(f"{name}: legacy constructor expects device type: {where} but device type: "
                               f"{backend.Device(device).type} was passed")
        if where == "cuda" and not backend.cuda_available():
            raise TypeError(f"type {name} not available: no usable CUDA device")
        if not args:
            return ops.zeros(0, dtype=cls.dtype, device=where)
        if all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in args):
            return ops.zeros(*args, dtype=cls.dtype, device=where)  # a size
        if len(args) == 1 and isinstance(args[0], Size):  # FloatTensor(x.size()): a size too, as PyTorch's
            return ops.zeros(tuple(args[0]), dtype=cls.dtype, device=where)
        if len(args) != 1:
            raise InputTypeError(f"{name}(): expected a size (ints), one sequence of data or one tensor, got "
                                 f"{args!r}")
        data = args[0]
        if isinstance(data, Tensor):  # the tensor itself, when it is one of this type, as PyTorch's alias
            if not isinstance(data, cls):
                raise InputTypeError(f"{name}(): expected a {where} tensor of dtype {cls.dtype}, got one of dtype "
                                     f"{data.dtype} on {data.device} (convert it with .to(dtype))")
            return data
        if isinstance(data, (numbers.Number, str, bytes)):
            raise InputTypeError(f"{name}(): data must be a sequence (got {type(data).__name__})")
        return ops.tensor(data, dtype=cls.dtype, device=where)

    def __repr__(cls):
        return f"<class '{cls.__module__}.{cls.__name__}'>"


def _legacy_type(name, dtype, cuda):
    where = "cuda" if cuda else "cpu"
    return _LegacyTensorType(name, (), {
        "dtype": dtype, "is_cuda": cuda, "_device": where, "__module__": "minifused.cuda" if cuda else "minifused",
        "__doc__": f"The legacy {where} {dtype} tensor type: ``{name}(*size)``, ``{name}(data)``, "
                   f"``isinstance(t, {name})``."})


for _name, _dtype in _LEGACY.items():
    globals()[_name] = _legacy_type(_name, _dtype, False)
    setattr(_cuda_module, _name, _legacy_type(_name, _dtype, True))


_TYPE_MODULES = ("torch", "minifused", "torch.cuda", "minifused.cuda")
_NOT_FLOATING = "only floating-point types are supported as the default type"
_replaced_device = []  # the default-device setting (MINIFUSED_DEVICE, or None) a cuda tensor type replaced


def _import_dotted_name(name):
    """The object a dotted name imports, as PyTorch resolves it (``torch`` read as minifused)."""
    first, *rest = name.split(".")
    obj = importlib.import_module(backend.__name__.rpartition(".")[0] if first == "torch" else first)
    for component in rest:
        obj = getattr(obj, component)
    return obj


def _tensor_type(t):
    """(name, dtype, is_cuda) of a legacy tensor type or its name; None for another object."""
    if isinstance(t, str):
        module, _, kind = t.rpartition(".")
        if module in _TYPE_MODULES and kind in _LEGACY:
            return t, _LEGACY[kind], module.endswith("cuda")
        t = _import_dotted_name(t)  # AttributeError / ModuleNotFoundError for a name that is not there
    if isinstance(t, _LegacyTensorType):
        return f"{t.__module__}.{t.__name__}", t.dtype, t.is_cuda
    return None


def set_default_tensor_type(t, /):
    """``torch.set_default_tensor_type`` (deprecated since PyTorch 2.1, warned once as there): ``t``, a floating
    legacy tensor type or its name (``minifused.DoubleTensor``, ``'torch.DoubleTensor'``,
    ``'torch.cuda.FloatTensor'``), makes its dtype the default (:func:`minifused.set_default_dtype`). A cuda type
    also makes ``cuda`` the default device (:func:`minifused.set_default_device`), as PyTorch's does; a cpu type
    after one restores the default device it replaced. A cpu type otherwise leaves the default device as it is
    (minifused's own is ``cuda`` when usable)."""
    resolved = _tensor_type(t)
    backend.warn_once("set_default_tensor_type", "torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, "
                      "please use torch.set_default_dtype() and torch.set_default_device() as alternatives.")
    if resolved is None:
        raise TypeError(f"set_default_tensor_type: invalid type object: {_NOT_FLOATING}, got {t!r}")
    name, dtype, is_cuda = resolved
    if is_cuda and not backend.cuda_available():
        raise TypeError(f"set_default_tensor_type: type {name} not available: no usable CUDA device")
    if not backend.is_floating(dtype):
        raise TypeError(f"set_default_tensor_type: {_NOT_FLOATING}, got {name}")
    backend.set_default_dtype(dtype)
    from . import set_default_device  # (the package above, loaded by the time this runs)

    if is_cuda:
        if not _replaced_device:
            _replaced_device.append(os.environ.get("MINIFUSED_DEVICE"))
        set_default_device("cuda")
    elif _replaced_device:
        set_default_device(_replaced_device.pop())


def is_storage(obj, /):
    """``torch.is_storage``: False, whatever ``obj`` is: minifused has no storage objects (a tensor's memory is
    its array's)."""
    return False
