"""``ctc_loss``, as ``torch.nn.functional.ctc_loss``: the arguments (log-probabilities batched (T, N, C) or
unbatched (T, C); targets padded (N, S) or concatenated; lengths as tensors or tuples / lists) checked and
brought to one layout here, the recursions and the gradient in ``ops.ctc``, the reductions composed of
recorded ops as PyTorch composes them ('mean' divides each loss by its target length, clamped to 1, then
averages over the batch)."""
from __future__ import annotations

import numbers as _numbers

import numpy as _np

from .. import backend as _backend
from ..ops._common import autocast_float32 as _autocast_float32
from ..ops.ctc import ctc_rows as _ctc_rows
from ..ops.shape import reshape as _reshape
from ..tensor import Tensor as _Tensor
from ..backend import InputError, InputTypeError
from ._checks import _legacy_reduction

__all__ = ["ctc_loss"]

_OP = "ctc_loss"
_DTYPES = (_backend.float32, _backend.float64)


def _host_lengths(name, lengths, batch):
    """The lengths as an int64 NumPy array (batch,), from a tensor of integers (any device, any shape with
    ``batch`` elements) or a tuple / list of ints."""
    if isinstance(lengths, _Tensor):
        if _backend.is_floating(lengths.dtype) or lengths.dtype == _np.bool_ or lengths.dtype.kind == "c":
            raise InputTypeError(f"{_OP}: {name} must be integral, got a tensor of dtype {lengths.dtype}")
        values = _np.asarray(_backend.to_device(lengths._data, _backend.device("cpu"))).reshape(-1)
    elif isinstance(lengths, (tuple, list)):
        if not all(isinstance(v, _numbers.Integral) and not isinstance(v, (bool, _np.bool_)) for v in lengths):
            raise InputTypeError(f"{_OP}: {name} must be a tensor or a tuple / list of ints, got {lengths!r}")
        values = _np.asarray([int(v) for v in lengths], dtype=_np.int64)
    else:
        raise InputTypeError(f"{_OP}: {name} must be a tensor or a tuple / list of ints, got "
                             f"{type(lengths).__name__}")
    if values.size != batch:
        raise InputError(f"{_OP}: {name} must be of size batch_size ({batch}), got {values.size} values")
    return values.astype(_np.int64)


def _check_args(log_probs, targets, blank, reduction, zero_infinity):
    if not isinstance(log_probs, _Tensor) or not isinstance(targets, _Tensor):
        raise InputTypeError(f"{_OP}: expected tensors for log_probs and targets, got {type(log_probs).__name__} "
                             f"and {type(targets).__name__}")
    if reduction not in ("none", "mean", "sum"):
        raise InputError(f"{_OP}: reduction must be one of 'none', 'mean', 'sum', got {reduction!r}")
    if not isinstance(blank, _numbers.Integral) or isinstance(blank, (bool, _np.bool_)):
        raise InputTypeError(f"{_OP}: blank must be an int, got {blank!r}")
    if not isinstance(zero_infinity, (bool, _np.bool_)):
        raise InputTypeError(f"{_OP}: zero_infinity must be a bool, got {zero_infinity!r}")
    if log_probs.ndim not in (2, 3):
        raise InputError(f"{_OP}: expected log_probs of shape (T, N, C) or unbatched (T, C), got shape "
                         f"{list(log_probs.shape)}")
    if log_probs.dtype not in _DTYPES:  # PyTorch's CUDA kernel takes these two only
        raise NotImplementedError(f"{_OP}: not implemented for {log_probs.dtype} log_probs (expected float32 or "
                                  f"float64)")
    if 0 in log_probs.shape:
        raise InputError(f"{_OP}: log_probs tensor must not be empty, got shape {list(log_probs.shape)}")
    c = log_probs.shape[-1]
    if not 0 <= blank < c:
        raise InputError(f"{_OP}: blank must be in label range [0, {c}), got {blank}")
    if targets.dtype.kind == "c":  # other dtypes are truncated to int64, as PyTorch's .to(kLong)
        raise InputTypeError(f"{_OP}: targets must be class indices (a real dtype), got dtype {targets.dtype}")
    if targets.ndim not in (1, 2):
        raise InputError(f"{_OP}: expected targets of 1 to 2 dimensions (padded (N, S) or concatenated), got "
                         f"shape {list(targets.shape)}")


def _padded_targets(xp, targets, batch, tl, blank):
    """(N, S) int64 targets on the log-probabilities' device (S = the longest target), blank past each length."""
    s = int(tl.max(initial=0))
    if targets.ndim == 2:
        if targets.shape[0] != batch:
            raise InputError(f"{_OP}: expected targets to have size {batch} (the batch) at dimension 0, got shape "
                             f"{list(targets.shape)}")
        if targets.shape[1] < s:
            raise InputError(f"{_OP}: expected targets to have size at least {s} (the longest target length) at "
                             f"dimension 1, got shape {list(targets.shape)}")
        flat = targets[:, :s].reshape(-1)
        starts = _np.arange(batch, dtype=_np.int64) * s
    else:
        if targets.shape[0] != int(tl.sum()):
            raise InputError(f"{_OP}: expected concatenated targets of size {int(tl.sum())} (the sum of "
                             f"target_lengths), got shape {list(targets.shape)}")
        flat = targets
        starts = _np.cumsum(tl) - tl
    pos = _np.arange(s, dtype=_np.int64)
    at = _np.minimum(starts[:, None] + pos, max(flat.shape[0] - 1, 0))
    inside = pos[None, :] < tl[:, None]
    if flat.shape[0] == 0:
        return xp.full((batch, s), blank, dtype=xp.int64)
    picked = xp.take(xp.asarray(flat).astype(xp.int64), xp.asarray(at))
    return _backend.where(xp.asarray(inside), picked, blank)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """The connectionist temporal classification loss, as ``torch.nn.functional.ctc_loss``: the negative
    log-likelihood of each target under all alignments of ``log_probs`` (T, N, C), or (T, C) unbatched, that
    collapse to it (repeats merged, ``blank`` dropped). ``targets`` padded (N, S) or the N targets concatenated
    (sum(target_lengths),); ``input_lengths`` and ``target_lengths`` (N,) tensors or tuples / lists of ints.
    'mean' divides each loss by its target length (at least 1) and averages over the batch; 'sum' adds them;
    'none' gives (N,). An impossible alignment (a target too long for its input) has an infinite loss and a NaN
    gradient, both 0 with ``zero_infinity``. The gradient is PyTorch's: that of the loss with respect to the
    logits of a log_softmax that made ``log_probs``. float32 and float64 (as PyTorch's CUDA kernel)."""
    reduction = _legacy_reduction(None, None, reduction)  # (the deprecated 'elementwise_mean')
    (log_probs,) = _autocast_float32(log_probs)
    _check_args(log_probs, targets, blank, reduction, zero_infinity)
    unbatched = log_probs.ndim == 2
    if unbatched:  # a batch of one: the targets' layouts are the batched ones, as PyTorch reads them
        log_probs = _reshape(log_probs, (log_probs.shape[0], 1, log_probs.shape[1]))  # (lengths: one each, below)
    t_max, batch, c = log_probs.shape
    il = _host_lengths("input_lengths", input_lengths, batch)
    tl = _host_lengths("target_lengths", target_lengths, batch)
    for name, v, most in (("input_lengths", il, t_max), ("target_lengths", tl, None)):
        if v.min() < 0:
            raise InputError(f"{_OP}: expected {name} to have value at least 0, but got value {v.min()}")
        if most is not None and v.max() > most:
            raise InputError(f"{_OP}: expected {name} to have value at most {most} (T), but got value {v.max()}")
    xp = _backend.array_module(log_probs._data)
    with _backend.on_device(log_probs.device):
        tg = targets._data if targets.device == log_probs.device else \
            _backend.to_device(targets._data, log_probs.device)
        padded = _padded_targets(xp, tg, batch, tl, int(blank))
        if padded.size and bool(((padded < 0) | (padded >= c)).any()):
            bad = _backend.to_device(padded[(padded < 0) | (padded >= c)][:1], _backend.device("cpu"))
            raise InputError(f"{_OP}: targets must be class indices in [0, {c}) (C = log_probs.size(-1)), got "
                             f"{int(bad[0])}")
        loss = _ctc_rows(log_probs, padded, xp.asarray(il), xp.asarray(tl), int(blank), bool(zero_infinity))
        if reduction == "mean":
            per_char = xp.asarray(_np.maximum(tl, 1)).astype(log_probs.dtype)
            return (loss / _Tensor._from_array(per_char, False)).mean()
    if reduction == "sum":
        return loss.sum()
    return _reshape(loss, ()) if unbatched else loss
