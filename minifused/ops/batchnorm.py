"""BatchNorm (optionally with its ReLU): one Function over the fused kernels of ``kernels.batchnorm``.

The kernels take (N, C, ...) arrays as they come (no reshapes on the hot path), C-contiguous or channels-last: a
channels-last x stays so (y and dx come back channels-last; the gradient is brought to x's layout), anything else
is made C-contiguous. Forward keeps the per-channel mean and rstd and, with the ReLU, its 1-bit mask on the
context, so the backward never recomputes the statistics; the running statistics (and a module's batch counter)
are raw arrays updated in place by the forward's statistics pass.
"""
from __future__ import annotations

from ..autograd import Function
from ..kernels import batchnorm as K
from ..kernels import is_channels_last, to_layout


class BatchNormFn(Function):
    @staticmethod
    def forward(ctx, x, weight, bias, *, running_mean, running_var, training, factor, eps, relu, count):
        x = to_layout(x, is_channels_last(x))
        y, mean, rstd, mask = K.batch_norm_forward(x, weight, bias, running_mean, running_var, training, factor,
                                                   eps, relu, count)
        ctx.save_for_backward(x, weight)
        ctx.mean, ctx.rstd, ctx.mask, ctx.batch_stats = mean, rstd, mask, training
        return y

    @staticmethod
    def backward(ctx, gy):
        x, weight = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad
        gy = to_layout(gy, is_channels_last(x))
        dx, dw, db = K.batch_norm_backward(gy, x, weight, ctx.mean, ctx.rstd, ctx.mask, ctx.batch_stats,
                                           need_dx=need_x, need_dw=need_w or need_b)
        return dx, dw if need_w else None, db if need_b else None


def batch_norm(x, weight, bias, running_mean, running_var, training, factor, eps, relu=False, count=None):
    """BatchNorm of tensor ``x`` (N, C, ...) with raw running-statistic arrays (or None) and, if given, the raw
    batch counter the forward advances with them; arguments unchecked."""
    return BatchNormFn.apply(x, weight, bias, running_mean=running_mean, running_var=running_var,
                             training=training, factor=factor, eps=eps, relu=relu, count=count)
