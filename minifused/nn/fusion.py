"""Folding an evaluation-mode BatchNorm into the convolution before it (PyTorch's names)."""
from __future__ import annotations

import copy

from .. import ops
from ..autograd import no_grad
from .conv import Conv2d
from .norm import _BatchNorm


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """The weight and bias of one convolution computing ``bn(conv(x))`` with the BatchNorm's running
    statistics: ``w * s`` and ``(b - mean) * s + beta`` per output channel, ``s = gamma / sqrt(var + eps)``."""
    with no_grad():
        scale = (bn_rv + bn_eps) ** -0.5
        if bn_w is not None:
            scale = scale * bn_w
        bias = -bn_rm if conv_b is None else conv_b - bn_rm
        bias = bias * scale
        if bn_b is not None:
            bias = bias + bn_b
        weight = conv_w * ops.reshape(scale, -1, 1, 1, 1)
    return weight.contiguous(), bias.contiguous()


def fuse_conv_bn_eval(conv, bn):
    """A new Conv2d (in evaluation mode) equal to ``bn(conv(x))`` for the BatchNorm in evaluation mode; a
    ReLU the BatchNorm runs (``activation='relu'``) moves into the convolution's epilogue."""
    if not isinstance(conv, Conv2d) or not isinstance(bn, _BatchNorm):
        raise TypeError(f"fuse_conv_bn_eval: expected a Conv2d and a BatchNorm, got {type(conv).__name__} and "
                        f"{type(bn).__name__}")
    if conv.training or bn.training:
        raise ValueError("fuse_conv_bn_eval: both modules must be in evaluation mode (training BatchNorm uses "
                         "the batch's statistics, which no fixed weight can fold)")
    if bn.running_mean is None:
        raise ValueError("fuse_conv_bn_eval: the BatchNorm has no running statistics (track_running_stats=False)")
    if conv.activation is not None:
        raise ValueError(f"fuse_conv_bn_eval: the convolution applies {conv.activation!r} before the BatchNorm; "
                         f"only a BatchNorm straight after the convolution folds")
    if bn.num_features != conv.out_channels:
        raise ValueError(f"fuse_conv_bn_eval: BatchNorm has {bn.num_features} features, the convolution "
                         f"{conv.out_channels} output channels")
    fused = copy.deepcopy(conv)
    weight, bias = fuse_conv_bn_weights(conv.weight, conv.bias, bn.running_mean, bn.running_var, bn.eps,
                                        bn.weight, bn.bias)
    fused.weight = type(conv.weight)(weight.to(conv.weight.dtype))
    fused.bias = type(conv.weight)(bias.to(conv.weight.dtype))
    fused.activation = bn.activation
    return fused
