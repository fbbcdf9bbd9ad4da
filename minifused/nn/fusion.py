"""Folding an evaluation-mode BatchNorm into the convolution or Linear layer before it (PyTorch's names)."""
from __future__ import annotations

import copy

from .. import ops
from ..autograd import no_grad
from ..ops.shape import channels_last, channels_last_3d
from .conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d
from .linear import Linear
from .module import Parameter
from .norm import _BatchNorm
from .volume import Conv3d, ConvTranspose3d
from ..backend import InputError, InputTypeError

_TRANSPOSED = (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)


class UnfusableError(InputError, AssertionError):
    """Modules that cannot fold (training, no running statistics, features that differ): a ValueError, and the
    AssertionError of PyTorch's asserts."""


def _folded(w, b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """``w * s`` (s along w's output channels) and ``(b - mean) * s + beta``, ``s = gamma / sqrt(var + eps)``: a
    layer's weight and bias with an evaluation BatchNorm after it folded in, as PyTorch's Parameters: each in its
    source's dtype (the bias in the weight's when there is none) and with its requires_grad (False for the bias
    made from nothing, as PyTorch's zeros)."""
    with no_grad():
        scale = (bn_rv + bn_eps) ** -0.5
        if bn_w is not None:
            scale = scale * bn_w
        bias = (-bn_rm if b is None else b - bn_rm) * scale
        if bn_b is not None:
            bias = bias + bn_b
        if transpose:  # weight (in, out/groups, ...): the output channels are dimension 1 within each group
            groups = scale.shape[0] // w.shape[1]
            grouped = ops.reshape(w, groups, w.shape[0] // groups, *w.shape[1:])
            weight = ops.reshape(grouped * ops.reshape(scale, groups, 1, -1, *(1,) * (w.ndim - 2)), w.shape)
        else:
            weight = w * ops.reshape(scale, -1, *(1,) * (w.ndim - 1))
    b_like = w if b is None else b
    fmt = next((f for n, f in ((4, channels_last), (5, channels_last_3d))  # the weight's layout kept, as PyTorch's
                if w.ndim == n and w.is_contiguous(memory_format=f) and not w.is_contiguous()), None)
    weight = weight.to(w.dtype)
    return (Parameter(weight.contiguous() if fmt is None else weight.contiguous(memory_format=fmt), w.requires_grad),
            Parameter(bias.to(b_like.dtype).contiguous(), b is not None and b.requires_grad))


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """PyTorch's ``fuse_conv_bn_weights``: the Parameters of one convolution computing ``bn(conv(x))`` with the
    BatchNorm's running statistics, ``w * s`` and ``(b - mean) * s + beta`` per output channel, ``s = gamma /
    sqrt(var + eps)``. ``transpose=True`` for a transposed convolution's weight (in, out/groups, ...)."""
    features, out = bn_rm.shape[0], conv_w.shape[1 if transpose else 0]
    # a transposed weight holds out/groups output channels in dimension 1, its groups stacked along dimension 0
    groups = features // out if transpose and out and features % out == 0 else 1
    if out * groups != features or conv_w.shape[0] % groups:
        want = (f"a transposed weight with {features}/groups output channels in dimension 1 and groups dividing "
                f"dimension 0" if transpose else f"a weight with {features} output channels in dimension 0")
        raise InputError(f"fuse_conv_bn_weights: expected {want} (the BatchNorm has {features} features), got "
                         f"weight of shape {list(conv_w.shape)}")
    return _folded(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose)


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A new convolution (in evaluation mode) equal to ``bn(conv(x))`` for the BatchNorm in evaluation mode;
    ``transpose=True`` for a ConvTranspose1d/2d/3d. A ReLU the BatchNorm runs (``activation='relu'``) moves into the
    convolution's epilogue, where the convolution can run one (Conv2d)."""
    transposed = isinstance(conv, _TRANSPOSED)
    if not isinstance(conv, (Conv1d, Conv2d, Conv3d) + _TRANSPOSED) or not isinstance(bn, _BatchNorm):
        raise InputTypeError(f"fuse_conv_bn_eval: expected a convolution and a BatchNorm, got "
                             f"{type(conv).__name__} and {type(bn).__name__}")
    if transpose != transposed:  # PyTorch would scale the wrong weight dimension without a word
        raise InputError(f"fuse_conv_bn_eval: a {type(conv).__name__} needs transpose={transposed}, got "
                         f"transpose={transpose}")
    if conv.training or bn.training:
        raise UnfusableError(f"fuse_conv_bn_eval: both modules must be in evaluation mode (training BatchNorm "
                             f"uses the batch's statistics, which no fixed weight can fold), got "
                             f"conv.training={conv.training}, bn.training={bn.training}")
    if bn.running_mean is None:
        raise UnfusableError("fuse_conv_bn_eval: the BatchNorm has no running statistics (track_running_stats=False)")
    if getattr(conv, "activation", None) is not None:
        raise InputError(f"fuse_conv_bn_eval: the convolution applies {conv.activation!r} before the BatchNorm; "
                         f"only a BatchNorm straight after the convolution folds")
    if bn.activation is not None and bn.activation not in conv.fused_activations:
        raise InputError(f"fuse_conv_bn_eval: the BatchNorm applies {bn.activation!r}, which a "
                         f"{type(conv).__name__} cannot run after its output")
    if bn.num_features != conv.out_channels:
        raise InputError(f"fuse_conv_bn_eval: BatchNorm has {bn.num_features} features, the convolution "
                         f"{conv.out_channels} output channels")
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(conv.weight, conv.bias, bn.running_mean, bn.running_var,
                                                    bn.eps, bn.weight, bn.bias, transpose)
    if bn.activation is not None:
        fused.activation = bn.activation
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """PyTorch's ``fuse_linear_bn_weights``: the Parameters of one Linear computing ``bn(linear(x))`` with the
    BatchNorm's running statistics, ``w * s[:, None]`` and ``(b - mean) * s + beta``, ``s = gamma / sqrt(var +
    eps)`` (a BatchNorm of one feature broadcasts over every output)."""
    return _folded(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b)


def fuse_linear_bn_eval(linear, bn):
    """A new Linear (in evaluation mode) equal to ``bn(linear(x))`` for a BatchNorm1d in evaluation mode with
    ``num_features`` equal to the layer's ``out_features`` (or 1)."""
    if not isinstance(linear, Linear) or not isinstance(bn, _BatchNorm):
        raise InputTypeError(f"fuse_linear_bn_eval: expected a Linear and a BatchNorm, got {type(linear).__name__} and "
                             f"{type(bn).__name__}")
    if linear.training or bn.training:
        raise UnfusableError(f"fuse_linear_bn_eval: both modules must be in evaluation mode (fusion only for eval), "
                             f"got linear.training={linear.training}, bn.training={bn.training}")
    if bn.running_mean is None:
        raise UnfusableError("fuse_linear_bn_eval: the BatchNorm has no running statistics (track_running_stats=False)")
    if linear.activation is not None:
        raise InputError(f"fuse_linear_bn_eval: the Linear applies {linear.activation!r} before the BatchNorm; only "
                         f"a BatchNorm straight after the layer folds")
    if bn.num_features not in (linear.out_features, 1):
        raise UnfusableError(f"fuse_linear_bn_eval: to fuse, linear.out_features == bn.num_features or "
                             f"bn.num_features == 1; got {linear.out_features} and {bn.num_features}")
    fused = copy.deepcopy(linear)
    weight, bias = fuse_linear_bn_weights(linear.weight, linear.bias, bn.running_mean, bn.running_var, bn.eps,
                                          bn.weight, bn.bias)
    fused.weight, fused.bias = weight, bias
    if bias.shape != (linear.out_features,):  # one BatchNorm feature with no Linear bias: spread to every output
        fused.bias = Parameter(bias * ops.ones(linear.out_features, dtype=bias.dtype, device=bias.device), False)
    fused.activation = getattr(bn, "activation", None)
    return fused
