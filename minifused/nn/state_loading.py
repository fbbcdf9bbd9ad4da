"""Loading a state dict into a module (``Module.load_state_dict``): every key and value checked before anything
is copied; values from minifused tensors, NumPy / CuPy arrays or another library's tensors (DLPack, the array
interfaces), cast to the target's dtype and moved to its device."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .. import backend
from ..autograd import no_grad
from ..tensor import Tensor
from ..backend import InputTypeError


def load_state_into(root, state_dict, strict=True):
    """``root.load_state_dict(state_dict, strict)`` (see its docstring); returns (missing, unexpected) keys."""
    if not isinstance(state_dict, Mapping):
        raise InputTypeError(f"load_state_dict: expected a mapping of names to tensors, got "
                             f"{type(state_dict).__name__}")
    # a lazy module (nn.lazy) first gives its uninitialized entries the loaded shapes, as PyTorch's load hook
    problems = [p for prefix, module in root.named_modules(remove_duplicate=False) if hasattr(module, "_lazy_load")
                for p in module._lazy_load(state_dict, f"{prefix}." if prefix else "")]
    own = root.state_dict()
    optional = {(f"{prefix}." if prefix else "") + name
                for prefix, module in root.named_modules(remove_duplicate=False)
                for name in type(module)._optional_state}
    missing = [k for k in own if k not in state_dict and k not in optional]
    unexpected = [k for k in state_dict if k not in own]
    sources = {}
    if strict and (missing or unexpected):  # (PyTorch's wording, so its users' checks match)
        if missing:
            problems.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        if unexpected:
            problems.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
    for k, target in own.items():
        if k not in state_dict:
            continue
        if _uninitialized(target) or _uninitialized(state_dict[k]):  # left uninitialized (or refused above)
            if not _uninitialized(target):
                problems.append(f"{k}: uninitialized in the state dict, shape {tuple(target.shape)} in the model")
            elif not _uninitialized(state_dict[k]) and not any(p.startswith(k + ":") for p in problems):
                problems.append(f"{k}: uninitialized in the model, outside a lazy module (nothing infers its "
                                f"shape)")
            continue
        src = _foreign_array(state_dict[k])
        if src is None:
            problems.append(f"{k}: a {type(state_dict[k]).__name__} in the state dict, expected a tensor "
                            f"or an array")
        elif tuple(src.shape) != tuple(target.shape):
            problems.append(f"size mismatch for {k}: copying a param with shape {tuple(src.shape)} from checkpoint, "
                            f"the shape in current model is {tuple(target.shape)}.")
        elif not _castable(src.dtype):
            problems.append(f"{k}: dtype {src.dtype} in the state dict cannot be copied into {target.dtype}")
        else:
            sources[k] = src
    if problems:
        raise RuntimeError(f"Error(s) in loading state_dict for {type(root).__name__}:\n\t" + "\n\t".join(problems))
    with no_grad():
        for k, src in sources.items():
            target = own[k]
            if src.dtype != target.dtype:  # cast on the host: NumPy (with ml_dtypes) casts every pair
                src = backend.to_device_bits(src, backend.CPU).astype(target.dtype)
            target._data[...] = backend.to_device_bits(src, target.device)
            target._bump("load_state_dict")
    return _LoadResult(missing, unexpected)


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


class _LoadResult(tuple):
    """(missing_keys, unexpected_keys), by name too, shown as PyTorch shows them."""

    def __new__(cls, missing, unexpected):
        obj = super().__new__(cls, (missing, unexpected))
        obj.missing_keys, obj.unexpected_keys = missing, unexpected
        return obj

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return f"_IncompatibleKeys(missing_keys={self.missing_keys}, unexpected_keys={self.unexpected_keys})"
