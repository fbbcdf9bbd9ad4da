"""BatchNorm (optionally with its ReLU): one Function over the fused kernels of ``kernels.batchnorm``.

The kernels take (N, C, ...) arrays as they come (no reshapes on the hot path). Forward keeps the per-channel mean and rstd and, with the ReLU, its 1-bit mask on the context, so the
backward never recomputes the statistics; the running statistics (and a module's batch counter) are raw
arrays updated in place by the forward's statistics pass.
"""
from __future__ import annotations

from .. import backend
from ..autograd import Function
from ..kernels import batchnorm as K


def _contiguous(a):
    return backend.array_module(a).ascontiguousarray(a)


class BatchNormFn(Function):
    @staticmethod
    def forward(ctx, x, weight, bias, *, running_mean, running_var, training, factor, eps, relu, count):
        x = _contiguous(x)
        y, mean, rstd, mask = K.batch_norm_forward(x, weight, bias, running_mean, running_var, training, factor,
                                                   eps, relu, count)
        ctx.save_for_backward(x, weight)
        ctx.mean, ctx.rstd, ctx.mask, ctx.batch_stats = mean, rstd, mask, training
        return y

    @staticmethod
    def backward(ctx, gy):
        x, weight = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad
        dx, dw, db = K.batch_norm_backward(_contiguous(gy), x, weight, ctx.mean, ctx.rstd, ctx.mask,
                                           ctx.batch_stats, need_dx=need_x, need_dw=need_w or need_b)
        return dx, dw if need_w else None, db if need_b else None


def batch_norm(x, weight, bias, running_mean, running_var, training, factor, eps, relu=False, count=None):
    """BatchNorm of tensor ``x`` (N, C, ...) with raw running-statistic arrays (or None) and, if given, the raw
    batch counter the forward advances with them; arguments unchecked."""
    return BatchNormFn.apply(x, weight, bias, running_mean=running_mean, running_var=running_var,
                             training=training, factor=factor, eps=eps, relu=relu, count=count)
