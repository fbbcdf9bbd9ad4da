"""PyTorch's legacy tensor types (``FloatTensor``, ``LongTensor`` ...): called, they make a cpu tensor of their
dtype (``LongTensor([1, 2])`` from data, ``FloatTensor(2, 3)`` of a size, zeros where PyTorch leaves memory
uninitialized); ``isinstance(t, FloatTensor)`` asks whether ``t`` is a cpu float32 tensor; ``t.type(FloatTensor)``
converts to one. A metaclass gives the classes these, so none of them is a subclass of ``Tensor`` (as in
PyTorch, where they are not either)."""
from __future__ import annotations

import numbers

from .. import backend, ops
from ..tensor import Size, Tensor
from ..backend import InputTypeError

_LEGACY = {"FloatTensor": backend.float32, "DoubleTensor": backend.float64, "HalfTensor": backend.float16,
           "BFloat16Tensor": backend.bfloat16, "LongTensor": backend.int64, "IntTensor": backend.int32,
           "ShortTensor": backend.int16, "CharTensor": backend.int8, "ByteTensor": backend.uint8,
           "BoolTensor": backend.bool_}
__all__ = list(_LEGACY)


class _LegacyTensorType(type):
    """The type of each legacy tensor type: calling one makes a tensor, ``isinstance`` checks dtype and device."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype and obj.device.type == "cpu"

    def __call__(cls, *args, device=None):
        name = cls.__name__
        if device is not None and backend.Device(device).type != "cpu":
            raise RuntimeError(f"{name}: legacy constructor expects device type: cpu but device type: "
                               f"{backend.Device(device).type} was passed")
        if not args:
            return ops.zeros(0, dtype=cls.dtype, device="cpu")
        if all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in args):
            return ops.zeros(*args, dtype=cls.dtype, device="cpu")  # a size
        if len(args) == 1 and isinstance(args[0], Size):  # FloatTensor(x.size()): a size too, as PyTorch's
            return ops.zeros(*args[0], dtype=cls.dtype, device="cpu")
        if len(args) != 1:
            raise InputTypeError(f"{name}(): expected a size (ints), one sequence of data or one tensor, got "
                                 f"{args!r}")
        data = args[0]
        if isinstance(data, Tensor):  # the tensor itself, when it is one of this type, as PyTorch's alias
            if not isinstance(data, cls):
                raise InputTypeError(f"{name}(): expected a cpu tensor of dtype {cls.dtype}, got one of dtype "
                                     f"{data.dtype} on {data.device} (convert it with .to(dtype))")
            return data
        if isinstance(data, (numbers.Number, str, bytes)):
            raise InputTypeError(f"{name}(): data must be a sequence (got {type(data).__name__})")
        return ops.tensor(data, dtype=cls.dtype, device="cpu")

    def __repr__(cls):
        return f"<class 'minifused.{cls.__name__}'>"


for _name, _dtype in _LEGACY.items():
    globals()[_name] = _LegacyTensorType(_name, (), {
        "dtype": _dtype, "is_cuda": False, "__module__": "minifused",
        "__doc__": f"The legacy cpu {_dtype} tensor type: ``{_name}(*size)``, ``{_name}(data)``, "
                   f"``isinstance(t, {_name})``."})
