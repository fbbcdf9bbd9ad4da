"""Cross-entropy from logits (fused) and NLL on log-probabilities.

CrossEntropy's forward reads the logits once (per-row loss and logsumexp);
the context keeps the logits, targets, logsumexp (fp32, M floats) and the
'mean' denominator as a device scalar, so nothing syncs with the host.
Backward reads the logits once more and writes the gradient, scaled on the
device by the upstream gradient: the softmax matrix is never stored
(``backward_graph``, for create_graph=True, writes the gradient with the
recorded softmax of the logits and constants of the targets and weights).
"""
from __future__ import annotations

import numpy as np

from .. import backend
from ..autograd import Function
from ..kernels import acc_dtype
from ..kernels import loss_reduce as R
from ..kernels import softmax as K
from ..tensor import Tensor
from .elementwise import where
from .softmax import Softmax


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

    @staticmethod
    def backward_graph(ctx, g):
        """backward's gradient as ``(softmax(x) * B - A) * scale`` per row, with the constants of the targets
        and weights: A, each row's weights of its classes (the target's, and the smoothing's), B its sums
        (the weights are no input to differentiate); softmax(x) a recorded op, so the gradient of this gradient
        reaches x through it."""
        x, target, weight = ctx.saved_tensors
        if not ctx.needs_input_grad[0]:
            return None, None, None
        xp = backend.array_module(x)
        acc = acc_dtype(x.dtype).type
        m, n = x.shape
        valid, t, rw = K._weights_rows(target, weight, ctx.ignore_index, n, xp, acc)
        a = _at_targets(t, (1 - acc(ctx.eps)) * rw, n)
        if ctx.eps:
            a = a + acc(ctx.eps) / n * (weight.astype(acc) if weight is not None else xp.ones(n, acc))
        a = a * valid[:, None]
        p = Softmax.apply(ctx.graph_input(0, x).to(acc), log=False)
        dx = (p * Tensor._from_array(a.sum(axis=1, keepdims=True), False) - Tensor._from_array(a, False))
        scale = _rows_scaled(g.to(acc), _rows_scale(valid, ctx.denom, acc), ctx.per_row)
        dx = dx * where(Tensor._from_array(valid[:, None], False), scale, 0)  # ignored rows 0 for any g, as backward's
        if ctx.eps and ctx.denom is not None:  # NaN rows as backward's: a constant NaN (or 0) added
            dx = dx + Tensor._from_array(_nan_where_no_weight(xp.zeros((m, 1), acc), ctx.denom, valid[:, None]),
                                         False)
        return dx, None, None


def _at_targets(t, values, n):
    """An (M, n) array of ``values`` (one per row) at the rows' target columns ``t``, zeros elsewhere (picked, not
    multiplied: an inf value leaves the other columns 0)."""
    xp = backend.array_module(t)
    return backend.where(xp.arange(n)[None, :] == t[:, None], values[:, None], values.dtype.type(0))


def _rows_scale(valid, denom, acc):
    """What scales each row's gradient besides the upstream gradient: 1 on the valid rows, or 1 / denom ('mean';
    inf for no weight, as backward's quotient); 0 on the ignored."""
    if denom is None:
        return valid.astype(acc)
    with np.errstate(divide="ignore"):
        return backend.where(valid, 1 / denom.astype(acc).reshape(()), acc(0))


def _rows_scaled(g, scale, per_row):
    """The upstream gradient tensor ``g`` (one per row, or one) times the rows' ``scale``, as an (M, 1) column."""
    return ((g if per_row else g.reshape(())) * Tensor._from_array(scale, False)).reshape(-1, 1)


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

    @staticmethod
    def backward_graph(ctx, g):
        """backward's gradient, a constant of the targets and weights (scattered as backward's) times the
        upstream gradient: NLL is linear in x."""
        target, weight = ctx.saved_tensors
        if not ctx.needs_input_grad[0]:
            return None, None, None
        xp = backend.array_module(target)
        acc = acc_dtype(ctx.dtype).type
        n = ctx.shape[1]
        valid, t, rw = K._weights_rows(target, weight, ctx.ignore_index, n, xp, acc)
        with np.errstate(invalid="ignore"):  # (a 0 weight over a 0 denominator: NaN, as backward's)
            a = _at_targets(t, -rw * _rows_scale(valid, ctx.denom, acc), n)
        g = g.to(acc)
        dx = Tensor._from_array(a, False) * (g if ctx.per_row else g.reshape(())).reshape(-1, 1)
        # backward's scattered elements; the others are 0 even for an inf or NaN g, as backward's
        picked = (xp.arange(n)[None, :] == t[:, None]) & valid[:, None]
        dx = where(Tensor._from_array(picked, False), dx, 0)
        # PyTorch's gradient is a function of x (whose own gradient is 0): it requires grad, and differentiating it
        # gives x zeros. x enters picked nowhere (where, not a product: an inf in x leaves no NaN)
        x = ctx.graph_input(0, xp.broadcast_to(xp.zeros((), ctx.dtype), ctx.shape))
        nowhere = Tensor._from_array(xp.zeros((1, 1), bool), False)
        return dx + where(nowhere, x, 0).to(dx.dtype), None, None


def cross_entropy_rows(x, target, weight, ignore_index, label_smoothing, reduction):
    """Fused cross-entropy on tensors (x: (M, C) contiguous logits); arguments unchecked."""
    if x.shape[1] == 0:  # no classes, so no rows (a target would be out of range): nothing for the kernels to read
        return _no_classes(x, label_smoothing, reduction)
    return CrossEntropy.apply(x, target, weight, ignore_index=ignore_index,
                              label_smoothing=label_smoothing, reduction=reduction)


def nll_rows(x, target, weight, ignore_index, reduction):
    return NLLLoss.apply(x, target, weight, ignore_index=ignore_index, reduction=reduction)


def _no_classes(x, label_smoothing, reduction):
    """PyTorch's loss of (0, 0) logits: 'none' empty, 'mean' NaN (0 / 0), 'sum' 0, or NaN with label smoothing
    (its smoothing term scales a 0 sum by label_smoothing / C = inf)."""
    if reduction == "none":
        return x.sum(1)
    return x.sum() * (np.nan if reduction == "mean" or label_smoothing else 1.0)
