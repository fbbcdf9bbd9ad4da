"""``torch.nn.parallel``'s names: ``DataParallel`` (and ``data_parallel``) on one device, and
``DistributedDataParallel``, which is :class:`minifused.distributed.DistributedDataParallel`.

minifused drives one device per process; training on several GPUs is ``minifused.distributed``'s DDP (one
process per GPU), as PyTorch itself recommends over ``DataParallel``. ``DataParallel`` is here so that PyTorch
code and checkpoints run unchanged: it keeps the wrapped module as ``.module`` (state dict keys
``module.<name>``, PyTorch's) and runs it on one device."""
from __future__ import annotations

import warnings

from .. import backend
from ..tensor import Tensor
from .module import Module
from ..backend import InputError, InputTypeError

__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel"]

_DDP_HINT = ("for training on several GPUs use minifused.distributed.DistributedDataParallel (one process per "
             "GPU: python -m minifused.distributed.run --nproc-per-node N train.py)")


def _device_index(op, d):
    """A CUDA device index from an int, 'cuda:N' or a Device (PyTorch's ``_get_device_index``)."""
    if isinstance(d, int) and not isinstance(d, bool):
        return d
    if isinstance(d, str) or isinstance(d, backend.Device):
        dev = backend.Device(d)
        if dev.type != "cuda":
            raise InputError(f"{op}: Expected a non cpu device, but got: {dev}")
        return dev.index
    raise InputTypeError(f"{op}: expected a device id (an int, 'cuda:N' or a device), got {type(d).__name__}")


def _resolve(op, device_ids, output_device):
    """``(ids, output index)``, checked against this machine's devices; warns where PyTorch would use more
    than one device."""
    runtime = backend.cupy.cuda.runtime
    count = runtime.getDeviceCount()
    if device_ids is None:  # PyTorch's default is every device; here the current one
        ids = [runtime.getDevice()]
        if count > 1:
            warnings.warn(f"{op}: {count} GPUs are visible but minifused drives one device per process; running "
                          f"on cuda:{ids[0]} only ({_DDP_HINT})", UserWarning, stacklevel=3)
    else:
        ids = [_device_index(op, d) for d in device_ids]
        if not ids:
            raise InputError(f"{op}: device_ids must name at least one CUDA device, got {list(device_ids)}")
    for i in ids:
        if not 0 <= i < count:  # PyTorch's torch.cuda.get_device_properties check
            raise AssertionError(f"{op}: Invalid device id {i} (device_ids {ids}; {count} CUDA device(s) visible)")
    if len(ids) > 1:
        warnings.warn(f"{op}: device_ids {ids} name {len(ids)} GPUs but minifused drives one device per process; "
                      f"running on cuda:{ids[0]} only (the same results, without the speed-up; {_DDP_HINT})",
                      UserWarning, stacklevel=3)
    out = ids[0] if output_device is None else _device_index(op, output_device)
    return ids, out


def _to(obj, dev):
    """Tensors in ``obj`` (nested tuples, lists and dicts, as PyTorch's scatter walks them) moved to ``dev``."""
    if isinstance(obj, Tensor):
        return obj if obj.device == dev else obj.to(dev)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a namedtuple
        return type(obj)(*(_to(v, dev) for v in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(_to(v, dev) for v in obj)
    if isinstance(obj, dict):
        return type(obj)((k, _to(v, dev)) for k, v in obj.items())
    return obj


class DataParallel(Module):
    """PyTorch's ``nn.DataParallel`` on one device: ``module`` runs on ``cuda:device_ids[0]`` (default: the
    current device) with the inputs' tensors moved there, as PyTorch's single-device path does; without CUDA
    it just calls ``module``, as PyTorch does on a machine with no GPU.

    ``.module`` is the wrapped module, so ``state_dict`` keys carry PyTorch's ``module.`` prefix and such a
    dict loads back; ``parameters()``, ``.to()``, ``train()`` / ``eval()`` reach the module.

    Several ``device_ids`` (or, with the default, several visible GPUs): a UserWarning, then everything runs
    on the first; the results are those of PyTorch's DataParallel (it computes the same loss and sums the
    replicas' gradients), without the speed-up, so code written for a multi-GPU machine still runs. An id
    that no visible device has raises AssertionError("Invalid device id"), as PyTorch's. With several ids
    the output goes to ``output_device`` (PyTorch's gather); a 0-d output stays 0-d (PyTorch's gather makes
    it a vector of one value per device). For real multi-GPU training use
    ``minifused.distributed.DistributedDataParallel``."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        if not isinstance(module, Module):
            raise InputTypeError(f"DataParallel: expected a Module to wrap, got {type(module).__name__}")
        self.module = module
        self.dim = dim
        if not backend.cuda_available():  # PyTorch's path on a machine with no accelerator
            self.device_ids, self.output_device, self.src_device_obj = [], None, None
            return
        self.device_ids, self.output_device = _resolve("DataParallel", device_ids, output_device)
        self.src_device_obj = backend.Device("cuda", self.device_ids[0])
        self.module.to(self.src_device_obj)

    def forward(self, *inputs, **kwargs):
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        src = self.src_device_obj
        for t in (*self.module.parameters(), *self.module.buffers()):
            if t.device != src:
                raise RuntimeError(f"DataParallel: module must have its parameters and buffers on device {src} "
                                   f"(device_ids[0]) but found one of them on device: {t.device}")
        out = self.module(*_to(inputs, src), **_to(kwargs, src))
        if len(self.device_ids) > 1 and self.output_device != self.device_ids[0]:
            out = _to(out, backend.Device("cuda", self.output_device) if self.output_device >= 0 else backend.CPU)
        return out


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0, module_kwargs=None):
    """``module(*inputs, **module_kwargs)`` as :class:`DataParallel` runs it (PyTorch's functional form;
    ``output_device=-1`` is the CPU). Unlike PyTorch's, it also runs without CUDA (on the CPU)."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    wrapper = DataParallel(module, device_ids, output_device, dim)
    return wrapper(*inputs, **(module_kwargs or {}))


# DistributedDataParallel (torch.nn.parallel's name) is minifused.distributed's, a layer above: that package sets
# it here when imported (``import minifused`` imports it).
