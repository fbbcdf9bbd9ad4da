"""BatchNorm (optionally with its ReLU): one Function over the fused kernels of ``kernels.batchnorm``.

The kernels take (N, C, ...) arrays as they come (no reshapes on the hot path), C-contiguous or channels-last: a
channels-last x stays so (y and dx come back channels-last; the gradient is brought to x's layout), anything else
is made C-contiguous. Forward keeps the per-channel mean and rstd and, with the ReLU, its 1-bit mask on the
context, so the backward never recomputes the statistics; the running statistics (and a module's batch counter)
are raw arrays updated in place by the forward's statistics pass.
"""
from __future__ import annotations

from ..autograd import Context, Function
from ..kernels import batchnorm as K
from ..kernels import is_channels_last, to_layout
from .conv import Conv2dFn


class BatchNormFn(Function):
    @staticmethod
    def forward(ctx, x, weight, bias, *, running_mean, running_var, training, factor, eps, relu, count):
        x = to_layout(x, is_channels_last(x))
        y, mean, rstd, mask = K.batch_norm_forward(x, weight, bias, running_mean, running_var, training, factor,
                                                   eps, relu, count)
        ctx.save_for_backward(x, weight)
        ctx.mean, ctx.rstd, ctx.mask, ctx.batch_stats = mean, rstd, mask, training
        # dw and db come in the parameters' dtype (weight's and bias's, one), which need not be x's: a bias alone
        # sets it too
        ctx.wdtype = next((p.dtype for p in (weight, bias) if p is not None), None)
        return y

    @staticmethod
    def backward(ctx, gy):
        x, weight = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad
        gy = to_layout(gy, is_channels_last(x))
        dx, dw, db = K.batch_norm_backward(gy, x, weight, ctx.mean, ctx.rstd, ctx.mask, ctx.batch_stats,
                                           need_dx=need_x, need_dw=need_w or need_b, wdtype=ctx.wdtype)
        return dx, dw if need_w else None, db if need_b else None


def batch_norm(x, weight, bias, running_mean, running_var, training, factor, eps, relu=False, count=None):
    """BatchNorm of tensor ``x`` (N, C, ...) with raw running-statistic arrays (or None) and, if given, the raw
    batch counter the forward advances with them; arguments unchecked."""
    return BatchNormFn.apply(x, weight, bias, running_mean=running_mean, running_var=running_var,
                             training=training, factor=factor, eps=eps, relu=relu, count=count)


class ConvBatchNormFn(Function):
    """A convolution and the BatchNorm of its output (with its ReLU) as one node of the tape: Conv2dFn's forward,
    then BatchNormFn's on the result, each with a context of its own, and their backwards in reverse. The same
    kernels, so the same numbers, as the two ops; one recording, one node of the backward walk and one tensor
    fewer, which a step bound by host time (a ResNet's at small batches) pays once per layer."""

    @staticmethod
    def forward(ctx, x, weight, bias, bn_weight, bn_bias, *, conv, norm):
        needs = ctx.needs_input_grad
        conv_ctx, norm_ctx = Context(needs[:3]), Context((any(needs[:3]), needs[3], needs[4]))
        y = BatchNormFn.forward(norm_ctx, Conv2dFn.forward(conv_ctx, x, weight, bias, **conv), bn_weight, bn_bias,
                                **norm)
        ctx.parts = conv_ctx, norm_ctx
        # checked against in-place changes: what the convolution saved (the inputs it keeps) and BatchNorm's weight
        ctx.save_for_backward(*conv_ctx.saved, norm_ctx.saved[1])
        return y

    @staticmethod
    def backward(ctx, gy):
        conv_ctx, norm_ctx = ctx.parts
        dy, d_bn_weight, d_bn_bias = BatchNormFn.backward(norm_ctx, gy)
        dx, dw, db = Conv2dFn.backward(conv_ctx, dy) if dy is not None else (None, None, None)
        return dx, dw, db, d_bn_weight, d_bn_bias


def conv_batch_norm(x, weight, bias, bn_weight, bn_bias, stride, padding, dilation, groups, running_mean, running_var,
                    training, factor, eps, relu=False, count=None):
    """:func:`batch_norm` of ``ops.conv.conv2d(x, weight, bias, ...)`` as one op (:class:`ConvBatchNormFn`);
    arguments unchecked."""
    source = x if x._ctx is not None else None  # (as ops.conv.conv2d: a tape tensor's packed copy is shared)
    return ConvBatchNormFn.apply(x, weight, bias, bn_weight, bn_bias,
                                 conv=dict(stride=tuple(stride), padding=tuple(padding), dilation=tuple(dilation),
                                           groups=int(groups), activation=None, source=source),
                                 norm=dict(running_mean=running_mean, running_var=running_var, training=training,
                                           factor=factor, eps=eps, relu=relu, count=count))
