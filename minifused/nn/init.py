"""Parameter initialization, PyTorch's ``torch.nn.init`` (same fans, gains and bounds).

Every function fills a tensor in place under ``no_grad`` with the device's generator
(``minifused.manual_seed`` seeds it) and returns the tensor.
"""
from __future__ import annotations

import math

from ..autograd import no_grad

__all__ = ["calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_", "xavier_uniform_",
           "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"]


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d")
    if nonlinearity in linear or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"calculate_gain: negative_slope {param} is not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _calculate_fan_in_and_fan_out(tensor):
    """fan_in = size(1) * receptive field, fan_out = size(0) * receptive field (dims >= 2)."""
    if tensor.ndim < 2:
        raise ValueError("fan in and fan out can not be computed for a tensor with fewer than 2 dimensions "
                         f"(got shape {tuple(tensor.shape)})")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor, mode):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode {mode!r} not supported, please use one of 'fan_in', 'fan_out'")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0):
    with no_grad():
        return tensor.uniform_(a, b)


def normal_(tensor, mean=0.0, std=1.0):
    with no_grad():
        return tensor.normal_(mean, std)


def constant_(tensor, val):
    with no_grad():
        return tensor.fill_(val)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor, gain=1.0):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a)


def xavier_normal_(tensor, gain=1.0):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)))


def kaiming_uniform_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu"):
    """U(-bound, bound), bound = gain * sqrt(3 / fan). ``a=sqrt(5)`` is Linear's and Conv's default."""
    if 0 in tensor.shape:
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu"):
    if 0 in tensor.shape:
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return normal_(tensor, 0.0, std)
