"""Folding an evaluation-mode BatchNorm into the convolution or Linear layer before it (PyTorch's names)."""
from __future__ import annotations

import copy

from .. import ops
from ..autograd import no_grad
from .conv import Conv2d
from .linear import Linear
from .module import Parameter
from .norm import _BatchNorm


def _folded(w, b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """``w * s`` (s along w's first dimension) and ``(b - mean) * s + beta``, ``s = gamma / sqrt(var + eps)``: a
    layer's weight and bias with an evaluation BatchNorm after it folded in (both contiguous, no gradient)."""
    with no_grad():
        scale = (bn_rv + bn_eps) ** -0.5
        if bn_w is not None:
            scale = scale * bn_w
        bias = (-bn_rm if b is None else b - bn_rm) * scale
        if bn_b is not None:
            bias = bias + bn_b
        weight = w * ops.reshape(scale, -1, *(1,) * (w.ndim - 1))
    return weight.contiguous(), bias.contiguous()


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """The weight and bias of one convolution computing ``bn(conv(x))`` with the BatchNorm's running
    statistics: ``w * s`` and ``(b - mean) * s + beta`` per output channel, ``s = gamma / sqrt(var + eps)``."""
    return _folded(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b)


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


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """PyTorch's ``fuse_linear_bn_weights``: the Parameters of one Linear computing ``bn(linear(x))`` with the
    BatchNorm's running statistics, ``w * s[:, None]`` and ``(b - mean) * s + beta``, ``s = gamma / sqrt(var +
    eps)`` (a BatchNorm of one feature broadcasts over every output). Each keeps its source's requires_grad."""
    weight, bias = _folded(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b)
    bias_grad = linear_w.requires_grad if linear_b is None else linear_b.requires_grad
    return Parameter(weight.contiguous(), linear_w.requires_grad), Parameter(bias.contiguous(), bias_grad)


def fuse_linear_bn_eval(linear, bn):
    """A new Linear (in evaluation mode) equal to ``bn(linear(x))`` for a BatchNorm1d in evaluation mode with
    ``num_features`` equal to the layer's ``out_features`` (or 1)."""
    if not isinstance(linear, Linear) or not isinstance(bn, _BatchNorm):
        raise TypeError(f"fuse_linear_bn_eval: expected a Linear and a BatchNorm, got {type(linear).__name__} and "
                        f"{type(bn).__name__}")
    if linear.training or bn.training:
        raise ValueError("fuse_linear_bn_eval: both modules must be in evaluation mode (fusion only for eval)")
    if bn.running_mean is None:
        raise ValueError("fuse_linear_bn_eval: the BatchNorm has no running statistics (track_running_stats=False)")
    if linear.activation is not None:
        raise ValueError(f"fuse_linear_bn_eval: the Linear applies {linear.activation!r} before the BatchNorm; only "
                         f"a BatchNorm straight after the layer folds")
    if bn.num_features not in (linear.out_features, 1):
        raise ValueError(f"fuse_linear_bn_eval: to fuse, linear.out_features == bn.num_features or "
                         f"bn.num_features == 1; got {linear.out_features} and {bn.num_features}")
    fused = copy.deepcopy(linear)
    weight, bias = fuse_linear_bn_weights(linear.weight, linear.bias, bn.running_mean, bn.running_var, bn.eps,
                                          bn.weight, bn.bias)
    fused.weight = Parameter(weight.to(linear.weight.dtype), linear.weight.requires_grad)
    if bias.shape != (linear.out_features,):  # one BatchNorm feature with no Linear bias: spread to every output
        bias = bias * ops.ones(linear.out_features, dtype=bias.dtype, device=bias.device)
    fused.bias = Parameter(bias.to(linear.weight.dtype), bias.requires_grad)
    fused.activation = getattr(bn, "activation", None)
    return fused
