"""BatchNorm (optionally with its ReLU): one Function over the fused kernels of ``kernels.batchnorm``.

Forward keeps the per-channel mean and rstd and, with the ReLU, its 1-bit mask on the context, so the
backward never recomputes the statistics; the running statistics (and a module's batch counter) are raw
arrays updated in place by the forward's statistics pass.
"""
from __future__ import annotations

from .. import backend
from ..autograd import Function
from ..kernels import batchnorm as K


def _as3(a, n, c):
    """``a`` as a C-contiguous (N, C, S) array."""
    return backend.array_module(a).ascontiguousarray(a).reshape(n, c, -1)


class BatchNormFn(Function):
    @staticmethod
    def forward(ctx, x, weight, bias, *, running_mean, running_var, training, factor, eps, relu, count):
        n, c = x.shape[0], x.shape[1]
        x3 = _as3(x, n, c)
        y, mean, rstd, mask = K.batch_norm_forward(x3, weight, bias, running_mean, running_var, training, factor,
                                                   eps, relu, count)
        ctx.save_for_backward(x3, weight)
        ctx.mean, ctx.rstd, ctx.mask, ctx.batch_stats, ctx.shape = mean, rstd, mask, training, x.shape
        return y.reshape(x.shape)

    @staticmethod
    def backward(ctx, gy):
        x3, weight = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad
        dx, dw, db = K.batch_norm_backward(_as3(gy, *x3.shape[:2]), x3, weight, ctx.mean, ctx.rstd, ctx.mask,
                                           ctx.batch_stats, need_dx=need_x, need_dw=need_w or need_b)
        return (None if dx is None else dx.reshape(ctx.shape), dw if need_w else None, db if need_b else None)


def batch_norm(x, weight, bias, running_mean, running_var, training, factor, eps, relu=False, count=None):
    """BatchNorm of tensor ``x`` (N, C, ...) with raw running-statistic arrays (or None) and, if given, the raw
    batch counter the forward advances with them; arguments unchecked."""
    return BatchNormFn.apply(x, weight, bias, running_mean=running_mean, running_var=running_var,
                             training=training, factor=factor, eps=eps, relu=relu, count=count)
