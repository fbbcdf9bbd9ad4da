"""``linear_cross_entropy``: the cross entropy of linearly projected inputs (a classifier head and its loss in one
call), as ``torch.nn.functional.linear_cross_entropy``. The file is not named after the function, so that the
package's attribute of that name stays the function."""
from __future__ import annotations

import dataclasses
import math as _math
import warnings as _warnings
from typing import Literal, NamedTuple

from .. import backend as _backend
from ..ops.shape import reshape as _reshape
from ..tensor import Tensor as _Tensor
from ..backend import InputError, InputTypeError
from . import cross_entropy as _cross_entropy, linear as _linear

__all__ = ["linear_cross_entropy"]


class _AutoDefault(NamedTuple):
    acc_policy: str
    chunking_method: str


# PyTorch's picks for the "auto" acc_policy / chunking_method, keyed by (device type, input dtype).
_AUTO_DEFAULTS = {
    ("cuda", _backend.bfloat16): _AutoDefault("compact", "aspect_ratio:2"),
    ("cuda", _backend.float16): _AutoDefault("compact", "aspect_ratio:2"),
    ("cpu", _backend.bfloat16): _AutoDefault("accurate", "aspect_ratio"),
    ("cpu", _backend.float16): _AutoDefault("accurate", "aspect_ratio"),
}
_AUTO_FALLBACK = _AutoDefault("compact", "aspect_ratio:2")
_ACC_DTYPES = (_backend.float16, _backend.bfloat16, _backend.float32, _backend.float64)


@dataclasses.dataclass(slots=True, frozen=True)
class LinearCrossEntropyOptions:
    """PyTorch's options for the chunked ``linear_cross_entropy`` (the batch processed in pieces, so that the
    (N, C) logits are never whole), with its fields, defaults and checks: ``allow_retain_graph``,
    ``batch_chunk_size`` (a positive int or None), ``chunking_method`` ('auto', 'aspect_ratio', 'aspect_ratio:N'
    or None), ``acc_policy`` ('auto', 'accurate', 'balanced', 'compact') and ``acc_dtype`` (None or a float dtype).
    minifused does not chunk: ``F.linear_cross_entropy`` checks the options and computes the unchunked loss."""

    allow_retain_graph: bool = False
    batch_chunk_size: int | None = None
    chunking_method: str | None = "auto"
    acc_policy: Literal["accurate", "balanced", "compact", "auto"] = "auto"
    acc_dtype: object = None

    def __post_init__(self):
        if self.acc_policy not in {"auto", "accurate", "balanced", "compact"}:
            raise ValueError(f"invalid acc_policy: {self.acc_policy!r}")
        if self.chunking_method is not None and self.chunking_method != "auto":
            if not isinstance(self.chunking_method, str):
                raise ValueError(f"invalid chunking_method: {self.chunking_method!r}")
            name, sep, factor = self.chunking_method.partition(":")
            if not sep:
                factor = "1"
            if not (name == "aspect_ratio" and factor.isdigit() and int(factor) > 0):
                raise ValueError(f"invalid chunking_method: {self.chunking_method!r}")
        if not (self.batch_chunk_size is None
                or (isinstance(self.batch_chunk_size, int) and self.batch_chunk_size > 0)):
            raise ValueError(f"batch_chunk_size must be positive int or None, got {self.batch_chunk_size!r}")
        if self.acc_dtype is not None and not self._is_acc_dtype(self.acc_dtype):
            raise ValueError(f"acc_dtype must be one of {{None, float16, bfloat16, float32, float64}}, got "
                             f"{self.acc_dtype!r}. Pass acc_dtype=None to let the op pick automatically.")

    @staticmethod
    def _is_acc_dtype(dtype):
        try:
            return _backend.as_dtype(dtype) in _ACC_DTYPES
        except (TypeError, ValueError, KeyError):
            return False

    @staticmethod
    def _ceil_div(a, b):
        return -(-a // b)

    @staticmethod
    def _resolve_auto_acc_dtype(dtype, device):
        """float32 for a float16 / bfloat16 input where the GEMMs can accumulate in it (the CPU; CUDA from compute
        capability 7.0 for float16, 8.0 for bfloat16), else None (the input's dtype), as PyTorch resolves it."""
        if device is None or dtype not in (_backend.float16, _backend.bfloat16):
            return None
        if device.type == "cuda":
            from .. import cuda

            if not cuda.is_available():
                return None
            major, _ = cuda.get_device_capability(device)
            if major < (8 if dtype == _backend.bfloat16 else 7):
                return None
            return _backend.float32
        return _backend.float32 if device.type == "cpu" else None

    def _compute_batch_chunk_size(self, num_batches, in_features, num_classes, method=None):
        """The rows per chunk of an 'aspect_ratio[:N]' method: each chunk's logits about the input's size (/ N)."""
        method = str(method if method is not None else self.chunking_method)
        factor = int(method.split(":", 1)[1]) if ":" in method else 1
        target = self._ceil_div(num_batches, self._ceil_div(num_classes, in_features))
        chunk_size = 1 << (target - 1).bit_length()  # the next power of 2 >= target
        return min(chunk_size // factor, num_batches)

    def _adjust(self, num_batches, in_features, num_classes, dtype, device=None):
        """These options resolved against a call (the "auto" picks, the chunk size, the accumulation dtype), as
        PyTorch's; a ValueError where ``batch_chunk_size`` and ``chunking_method`` give different sizes."""
        acc_policy, chunking_method = self.acc_policy, self.chunking_method
        if chunking_method == "auto" and self.batch_chunk_size is not None:
            chunking_method = None  # an explicit size wins over the automatic one
        if acc_policy == "auto" or chunking_method == "auto":
            ap, cm = _AUTO_DEFAULTS.get((device.type, dtype), _AUTO_FALLBACK) if device is not None \
                else _AUTO_FALLBACK
            acc_policy = ap if acc_policy == "auto" else acc_policy
            chunking_method = cm if chunking_method == "auto" else chunking_method
        batch_chunk_size = num_batches if self.batch_chunk_size is None else min(self.batch_chunk_size, num_batches)
        if chunking_method is not None:
            batch_chunk_size = self._compute_batch_chunk_size(num_batches, in_features, num_classes, chunking_method)
            if self.batch_chunk_size is not None and self.batch_chunk_size != batch_chunk_size:
                raise ValueError(f"batch_chunk_size (={self.batch_chunk_size}) and chunking_method "
                                 f"('{chunking_method}') give different chunk sizes ({self.batch_chunk_size} vs "
                                 f"{batch_chunk_size}); pass only one.")
        if self.acc_dtype is None:
            auto = self._resolve_auto_acc_dtype(dtype, device) if self.acc_policy == "auto" else None
            acc_dtype = auto if auto is not None else dtype
        else:
            acc_dtype = self.acc_dtype
        return dataclasses.replace(self, acc_policy=acc_policy, chunking_method=chunking_method,
                                   batch_chunk_size=max(1, batch_chunk_size), acc_dtype=acc_dtype)


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None, reduction="mean",
                         ignore_index=None, label_smoothing=0.0, options=None):
    """``cross_entropy(linear(input, linear_weight, linear_bias), target, ...)``, as PyTorch's.

    ``input`` (in_features,) or (N, in_features); ``linear_weight`` (C, in_features), or (C, d1, ..., dK,
    in_features) for a K-dimensional loss (batched input only), whose logits are (N, C, d1, ..., dK);
    ``linear_bias`` None or of shape (C, d1, ..., dK). ``target``: class indices, or class probabilities when it
    has the logits' shape. ``ignore_index=None`` is -100 for class indices; given with probabilities it raises.

    Built of :func:`linear` (one GEMM) and :func:`cross_entropy` (the fused loss), so the whole (N, C) logits are
    made. ``options`` (``nn.LinearCrossEntropyOptions``) is checked as PyTorch checks it (its fields, and where
    PyTorch would chunk, that ``batch_chunk_size`` and ``chunking_method`` agree; elsewhere PyTorch's warning
    that it is ignored) but does not chunk the batch: the result is the same, the memory that of ``options=None``.
    """
    op = "linear_cross_entropy"
    for name, t in (("input", input), ("linear_weight", linear_weight), ("target", target)):
        if not isinstance(t, _Tensor):
            raise InputTypeError(f"{op}: expected a tensor for {name}, got {type(t).__name__}")
    if linear_bias is not None and not isinstance(linear_bias, _Tensor):
        raise InputTypeError(f"{op}: linear_bias must be a tensor or None, got {type(linear_bias).__name__}")
    if not 1 <= input.ndim <= 2:
        raise InputError(f"{op}: expected input with dimensionality 1 or 2, got {input.ndim}")
    if linear_weight.ndim < 2:
        raise InputError(f"{op}: expected linear_weight with dimensionality at least 2, got {linear_weight.ndim}")
    num_batches, in_features = tuple(input.shape[:-1]), input.shape[-1]
    wshape = tuple(linear_weight.shape)
    if in_features != wshape[-1]:
        raise InputError(f"{op}: expected equal input and linear_weight last dimensions (in_features), got "
                         f"{in_features} and {wshape[-1]}, respectively")
    num_classes, out_features = wshape[0], wshape[1:-1]
    if linear_bias is not None and tuple(linear_bias.shape) != (num_classes, *out_features):
        raise InputError(f"{op}: expected linear_bias shape {(num_classes, *out_features)}, got "
                         f"{tuple(linear_bias.shape)}")
    if out_features and not num_batches:
        raise InputError(f"{op}: K-dimensional loss defined by linear_weight shape {wshape} requires batched "
                         f"input, (N, {in_features}), got unbatched input with shape {tuple(input.shape)}")
    logits_shape = (*num_batches, num_classes, *out_features)
    # As PyTorch: a target of the logits' shape holds probabilities (cross_entropy's own rule), whatever its dtype.
    if tuple(target.shape) == logits_shape and ignore_index is not None:
        raise InputError(f"{op}: ignore_index cannot be specified when target contains probabilities")
    ignore_index = -100 if ignore_index is None else ignore_index
    if options is not None:
        _check_options(op, options, input, target, linear_bias, reduction, label_smoothing, out_features,
                       num_classes)
    if out_features:
        rows = _math.prod(out_features, start=num_classes)
        linear_weight = _reshape(linear_weight, (rows, in_features))
        if linear_bias is not None:
            linear_bias = _reshape(linear_bias, (rows,))
    logits = _reshape(_linear(input, linear_weight, linear_bias), logits_shape)
    return _cross_entropy(logits, target, weight=weight, reduction=reduction, ignore_index=ignore_index,
                          label_smoothing=label_smoothing)


def _check_options(op, options, input, target, linear_bias, reduction, label_smoothing, out_features, num_classes):
    """PyTorch's handling of ``options`` short of chunking: the warning where its chunked path does not apply, else
    the resolution of the options against the call (``_adjust``: its ValueError where the sizes disagree)."""
    if not isinstance(options, LinearCrossEntropyOptions):
        raise InputTypeError(f"{op}: options must be a LinearCrossEntropyOptions or None, got "
                             f"{type(options).__name__}")
    if (out_features or reduction not in ("mean", "sum", "none") or label_smoothing != 0.0
            or target.dtype != _backend.int64):
        bias_shape = tuple(linear_bias.shape) if linear_bias is not None else None
        _warnings.warn("linear_cross_entropy: ``options`` ignored; chunked path needs reduction in "
                       "{'mean','sum','none'}, label_smoothing == 0, target.dtype == int64, out_features == (). "
                       f"Got reduction={reduction!r}, label_smoothing={label_smoothing}, target.dtype={target.dtype}, "
                       f"out_features={tuple(out_features)}, tracing=False, linear_bias.shape={bias_shape}.",
                       UserWarning, stacklevel=3)
        return
    options._adjust(num_batches=input.shape[0] if input.ndim == 2 else 1, in_features=input.shape[-1],
                    num_classes=num_classes, dtype=input.dtype, device=input.device)
