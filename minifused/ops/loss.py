"""Cross-entropy from logits (fused) and NLL on log-probabilities.

CrossEntropy's forward reads the logits once (per-row loss and logsumexp);
the context keeps the logits, targets, logsumexp (fp32, M floats) and the
'mean' denominator as a device scalar, so nothing syncs with the host.
Backward reads the logits once more and writes the gradient, scaled on the
device by the upstream gradient: the softmax matrix is never stored.
"""
from __future__ import annotations

import numpy as np

from .. import backend
from ..autograd import Function
from ..kernels import loss_reduce as R
from ..kernels import softmax as K


def _reduce(loss_rows, rw, reduction, dtype):
    """(loss, denominator or None) as arrays on the rows' device, in ``dtype``."""
    xp = backend.array_module(loss_rows)
    if reduction == "none":
        return loss_rows.astype(dtype), None
    if xp is not np and dtype != np.float64:  # one launch on the GPU
        return R.loss_reduce(loss_rows, rw, reduction == "mean", dtype)
    total = xp.asarray(loss_rows.sum())  # NumPy's sum gives a scalar: keep arrays
    if reduction == "sum":
        return total.astype(dtype), None
    denom = xp.asarray(rw.sum())
    with np.errstate(invalid="ignore", divide="ignore"):  # all targets ignored: NaN, as PyTorch
        return xp.asarray(total / denom).astype(dtype), denom.reshape(1)


def _nan_where_no_weight(a, denom, rows=True):
    """``a`` (the 'mean' loss, or the rows ``rows`` of its gradient) NaN where the targets' weights sum to 0. With
    label smoothing PyTorch divides its two terms by that sum apart: the target term's 0 / 0 makes the loss and the
    gradient NaN, where the one quotient of the summed terms would be +-inf. On the device, without a sync."""
    xp = backend.array_module(a)
    empty = (denom == 0).reshape(()) & rows
    return backend.where(empty, xp.asarray(np.nan, np.float32), a).astype(a.dtype, copy=False)


class CrossEntropy(Function):
    """Cross-entropy of logits (M, C) and class indices (M,); ``weight`` (C,) or None."""

    @staticmethod
    def forward(ctx, x, target, weight, *, ignore_index, label_smoothing, reduction):
        xp = backend.array_module(x)
        x, target = xp.ascontiguousarray(x), xp.ascontiguousarray(target)
        weight = None if weight is None else xp.ascontiguousarray(weight)
        loss_rows, lse, rw, reduced = K.cross_entropy_forward(x, target, weight, ignore_index, label_smoothing, reduction)
        out, denom = reduced or _reduce(loss_rows, rw, reduction, x.dtype)
        if label_smoothing and denom is not None:
            out = _nan_where_no_weight(out, denom)
        ctx.save_for_backward(x, target, weight)
        ctx.lse, ctx.denom = lse, denom
        ctx.ignore_index, ctx.eps, ctx.per_row = ignore_index, label_smoothing, reduction == "none"
        return out

    @staticmethod
    def backward(ctx, g):
        x, target, weight = ctx.saved_tensors
        if not ctx.needs_input_grad[0]:
            return None, None, None
        xp = backend.array_module(x)
        gout = xp.ascontiguousarray(g).reshape(-1) if ctx.per_row else g  # the kernel reads g[0] otherwise
        dx = K.cross_entropy_backward(x, target, weight, ctx.lse, gout, ctx.per_row, ctx.denom, ctx.ignore_index, ctx.eps)
        if ctx.eps and ctx.denom is not None:
            dx = _nan_where_no_weight(dx, ctx.denom, (target != ctx.ignore_index)[:, None])
        return dx, None, None


class NLLLoss(Function):
    """Negative log-likelihood of log-probabilities (M, C) and class indices (M,)."""

    @staticmethod
    def forward(ctx, x, target, weight, *, ignore_index, reduction):
        xp = backend.array_module(x)
        x, target = xp.ascontiguousarray(x), xp.ascontiguousarray(target)
        weight = None if weight is None else xp.ascontiguousarray(weight)
        loss_rows, rw = K.nll_forward(x, target, weight, ignore_index)
        out, denom = _reduce(loss_rows, rw, reduction, x.dtype)
        ctx.save_for_backward(target, weight)
        ctx.denom, ctx.shape, ctx.dtype = denom, x.shape, x.dtype
        ctx.ignore_index, ctx.per_row = ignore_index, reduction == "none"
        return out

    @staticmethod
    def backward(ctx, g):
        target, weight = ctx.saved_tensors
        if not ctx.needs_input_grad[0]:
            return None, None, None
        xp = backend.array_module(target)
        dx = K.nll_backward(target, weight, xp.ascontiguousarray(g).reshape(-1), ctx.per_row, ctx.denom,
                       ctx.shape, ctx.dtype, ctx.ignore_index)
        return dx, None, None


def cross_entropy_rows(x, target, weight, ignore_index, label_smoothing, reduction):
    """Fused cross-entropy on tensors (x: (M, C) contiguous logits); arguments unchecked."""
    return CrossEntropy.apply(x, target, weight, ignore_index=ignore_index,
                              label_smoothing=label_smoothing, reduction=reduction)


def nll_rows(x, target, weight, ignore_index, reduction):
    return NLLLoss.apply(x, target, weight, ignore_index=ignore_index, reduction=reduction)
