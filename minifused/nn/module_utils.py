"""``torch.nn.utils``' module-level helpers: :func:`skip_init` (build a module without initializing it),
:func:`convert_conv2d_weight_memory_format` and :func:`convert_conv3d_weight_memory_format`."""
from __future__ import annotations

import inspect

from .. import backend
from ..autograd import no_grad
from ..ops.shape import channels_last, channels_last_3d, check_memory_format, contiguous_format
from .conv import Conv2d, ConvTranspose2d
from .module import Module
from .volume import Conv3d, ConvTranspose3d
from ..backend import InputTypeError


def skip_init(module_cls, *args, **kwargs):
    """``module_cls(*args, **kwargs)`` with its parameters and buffers left uninitialized, as PyTorch's (which
    builds on the meta device): here the module is built on the cpu with the cpu generator's state put back
    afterwards, so no random numbers are consumed, its tensors are zeroed, and it is moved to ``device``
    (the default device when none is given). ``module_cls`` must take a ``device`` argument."""
    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise InputTypeError(f"skip_init: Expected a Module; got {module_cls}")  # (a TypeError for an instance too)
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    final = backend.device(kwargs.pop("device", None))
    gen = backend.generator(backend.CPU)
    state = dict(gen.bit_generator.state)
    try:
        module = module_cls(*args, device="cpu", **kwargs)
    finally:
        gen.bit_generator.state = state  # what the initializers drew is given back
    with no_grad():
        for t in list(module.parameters()) + list(module.buffers()):
            t._data[...] = 0
    return module.to(final) if final != backend.CPU else module


def convert_conv2d_weight_memory_format(module, memory_format):
    """Lay out the weights of every ``Conv2d`` / ``ConvTranspose2d`` in ``module`` (itself included) in
    ``memory_format`` (``channels_last`` or ``contiguous_format``), in place; returns ``module``. Like PyTorch's,
    whose convolutions then compute in their weight's layout, those layers also take their input in it."""
    fmt = check_memory_format("convert_conv2d_weight_memory_format", memory_format,
                              (contiguous_format, channels_last))
    if not isinstance(module, Module):
        raise InputTypeError(f"convert_conv2d_weight_memory_format: expected a Module, got {type(module).__name__}")
    for m in module.modules():
        if isinstance(m, (Conv2d, ConvTranspose2d)):
            m.to(memory_format=fmt)
    return module


def convert_conv3d_weight_memory_format(module, memory_format):
    """Lay out the weights of every ``Conv3d`` / ``ConvTranspose3d`` in ``module`` (itself included) in
    ``memory_format`` (``channels_last_3d`` or ``contiguous_format``), in place; returns ``module``, as PyTorch's."""
    fmt = check_memory_format("convert_conv3d_weight_memory_format", memory_format,
                              (contiguous_format, channels_last_3d))
    if not isinstance(module, Module):
        raise InputTypeError(f"convert_conv3d_weight_memory_format: expected a Module, got {type(module).__name__}")
    for m in module.modules():
        if isinstance(m, (Conv3d, ConvTranspose3d)):
            if fmt is channels_last_3d:
                m.to(memory_format=fmt)
            else:  # (Module.to's contiguous_format lays out the 4-d tensors alone)
                m._apply(lambda a: backend.array_module(a).ascontiguousarray(a) if a.ndim == 5 else a)
    return module
