"""Volumetric (3-D) layers with PyTorch's names, arguments, initialisation and reprs: ``Conv3d``,
``ConvTranspose3d``, the 3-D pooling layers and the 3-D padding layers; each is a thin layer over ``F``'s 3-D
functions (built on the 2-D kernels) or ``F.pad``."""
from __future__ import annotations

import math

from .. import backend
from .. import functional as F
from ..autograd import no_grad
from ..functional.volume import _triple
from .conv import (PADDING_MODES, ConvTranspose2d, _check_channel_args, _init_bound, conv_attributes,
                   padding_minimum)
from .layers import (_AdaptiveAvgPoolNd, _AdaptiveMaxPoolNd, _CircularPadNd, _ConstantPadNd, _ReflectionPadNd,
                     _ReplicationPadNd, _ZeroPadding)
from .module import Module, Parameter
from .pool import _AvgPoolNd, _LPPoolNd, _MaxPoolNd, _MaxUnpoolNd
from ..backend import InputError, InputTypeError

__all__ = ["Conv3d", "ConvTranspose3d", "MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d", "AdaptiveMaxPool3d",
           "LPPool3d", "MaxUnpool3d", "ZeroPad3d", "ConstantPad3d", "ReflectionPad3d", "ReplicationPad3d",
           "CircularPad3d"]


def _layer_triple(name, arg, value, minimum):
    """A layer argument as a triple: a value that is no int, a float say, raises the TypeError PyTorch's constructor
    raises (building the weight of that size), a wrong one a ValueError (and RuntimeError)."""
    try:
        return _triple(name, arg, value, minimum)
    except TypeError as e:
        raise InputTypeError(str(e)) from None
    except RuntimeError as e:
        raise InputError(str(e)) from None


class _Conv3dBase(Module):
    """What Conv3d and ConvTranspose3d share: argument checks, the parameters and PyTorch's initialisation
    (kaiming_uniform(a=√5) for the weight, i.e. U(-1/√fan_in, 1/√fan_in), the same bound for the bias, fan_in
    = weight.shape[1]·kD·kH·kW), as nn.Conv2d does it."""

    def _setup(self, in_channels, out_channels, kernel_size, stride, dilation, groups, bias, device, dtype,
               weight_shape, transposed):
        name = type(self).__name__
        _check_channel_args(name, in_channels, out_channels, groups)
        self.in_channels, self.out_channels, self.groups = int(in_channels), int(out_channels), int(groups)
        self.kernel_size = _layer_triple(name, "kernel_size", kernel_size, 1)
        self.stride = _layer_triple(name, "stride", stride, 1)
        self.dilation = _layer_triple(name, "dilation", dilation, 1)
        dev = backend.device(device)
        dtype = backend.get_default_dtype() if dtype is None else backend.as_dtype(dtype)
        xp = backend.xp(dev)
        with backend.on_device(dev):
            self.weight = Parameter(xp.empty(weight_shape(self) + self.kernel_size, dtype=dtype))
            self.bias = Parameter(xp.empty((self.out_channels,), dtype=dtype)) if bias else None
        conv_attributes(self, transposed)
        self.reset_parameters()

    def reset_parameters(self):
        bound = _init_bound(self.weight.shape[1] * math.prod(self.kernel_size))
        with no_grad():
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.uniform_(-bound, bound)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0, 0, 0):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1, 1):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0, 0, 0):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv3d(_Conv3dBase):
    """``conv3d(x, weight) + bias`` over (N, C, D, H, W) or (C, D, H, W) inputs, weight (out_channels,
    in_channels/groups, kD, kH, kW); ``padding`` an int, a triple, 'valid' or 'same'; ``padding_mode`` zeros,
    reflect, replicate or circular (F.pad first, as PyTorch's)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode not in PADDING_MODES:
            raise InputError(f"Conv3d: padding_mode must be one of {', '.join(map(repr, PADDING_MODES))}, got "
                             f"{padding_mode!r}")
        self.padding_mode = padding_mode
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise InputError(f"Conv3d: Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
            self.padding = padding
        else:
            self.padding = _layer_triple("Conv3d", "padding", padding, padding_minimum(padding_mode))
        self._setup(in_channels, out_channels, kernel_size, stride, dilation, groups, bias, device, dtype,
                    lambda m: (m.out_channels, m.in_channels // m.groups), transposed=False)
        if self.padding == "same" and self.stride != (1, 1, 1):
            raise InputError(f"Conv3d: padding='same' is not supported for strided convolutions, got stride "
                             f"{self.stride}")

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)

    def _conv_forward(self, input, weight, bias):
        """The convolution of ``input`` with ``weight`` and ``bias`` (PyTorch's: what a subclass that transforms
        its weight calls, and may override), ``padding_mode`` applied (F.pad by
        ``_reversed_padding_repeated_twice``: (left, right, top, bottom, front, back), 'same' the odd one after)."""
        padding = self.padding
        if self.padding_mode != "zeros" and padding != "valid":
            input, padding = F.pad(input, tuple(self._reversed_padding_repeated_twice), mode=self.padding_mode), 0
        return F.conv3d(input, weight, bias, self.stride, padding, self.dilation, self.groups)


class ConvTranspose3d(_Conv3dBase):
    """``conv_transpose3d(x, weight) + bias`` with weight (in_channels, out_channels/groups, kD, kH, kW);
    ``forward(x, output_size)`` picks among the output sizes a stride > 1 allows, as PyTorch's."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros":
            raise InputError(f'ConvTranspose3d: Only "zeros" padding mode is supported for ConvTranspose3d, got '
                             f'{padding_mode!r}')
        self.padding_mode = padding_mode
        self.padding = _layer_triple("ConvTranspose3d", "padding", padding, 0)
        self.output_padding = _layer_triple("ConvTranspose3d", "output_padding", output_padding, 0)
        self._setup(in_channels, out_channels, kernel_size, stride, dilation, groups, bias, device, dtype,
                    lambda m: (m.in_channels, m.out_channels // m.groups), transposed=True)

    def forward(self, input, output_size=None):
        output_padding = self.output_padding if output_size is None else self._output_padding(input, output_size)
        return F.conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding, output_padding, self.groups,
                                  self.dilation)

    _output_padding = ConvTranspose2d._output_padding


# ---------------------------------------------------------------- pooling
class MaxPool3d(_MaxPoolNd):
    _fn = staticmethod(F.max_pool3d)


class AvgPool3d(_AvgPoolNd):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.ceil_mode, self.count_include_pad = padding, ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        return F.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad,
                            self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    def forward(self, input):
        return F.adaptive_avg_pool3d(input, self.output_size)


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    def forward(self, input):
        return F.adaptive_max_pool3d(input, self.output_size, self.return_indices)


class LPPool3d(_LPPoolNd):
    """Power-average pooling (``F.lp_pool3d``)."""
    _fn = staticmethod(F.lp_pool3d)


class MaxUnpool3d(_MaxUnpoolNd):
    """``F.max_unpool3d``: the values of a ``MaxPool3d(return_indices=True)`` put back at their places."""

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = _layer_triple("MaxUnpool3d", "kernel_size", kernel_size, 1)
        self.stride = _layer_triple("MaxUnpool3d", "stride", stride if stride is not None else kernel_size, 1)
        self.padding = _layer_triple("MaxUnpool3d", "padding", padding, 0)

    def forward(self, input, indices, output_size=None):
        return F.max_unpool3d(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


# ---------------------------------------------------------------- padding (F.pad pads 3 dimensions in every mode)
class ConstantPad3d(_ConstantPadNd):
    dims = 3


class ZeroPad3d(_ZeroPadding, ConstantPad3d):
    pass


class ReflectionPad3d(_ReflectionPadNd):
    dims = 3


class ReplicationPad3d(_ReplicationPadNd):
    dims = 3


class CircularPad3d(_CircularPadNd):
    dims = 3
