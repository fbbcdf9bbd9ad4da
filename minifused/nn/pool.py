"""Pooling layers: ``MaxPool1d`` / ``MaxPool2d``, ``AvgPool1d`` / ``AvgPool2d``, ``LPPool1d`` / ``LPPool2d`` and
``MaxUnpool1d`` / ``MaxUnpool2d``, ``FractionalMaxPool2d`` / ``FractionalMaxPool3d`` with PyTorch's arguments."""
from __future__ import annotations

from .. import functional as F
from .module import Module
from ..backend import InputError


class _MaxPoolNd(Module):
    """PyTorch's base of the max pooling layers (none of them a subclass of another); ``_fn``: the functional."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        # (as PyTorch's: no stride means windows that tile, so the layer keeps kernel_size as its stride)
        self.kernel_size, self.padding = kernel_size, padding
        self.stride = stride if stride is not None else kernel_size
        self.dilation, self.return_indices, self.ceil_mode = dilation, return_indices, ceil_mode

    def forward(self, input):
        return self._fn(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                        self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool2d(_MaxPoolNd):
    _fn = staticmethod(F.max_pool2d)


class _AvgPoolNd(Module):
    """PyTorch's base of the average pooling layers (none of them a subclass of another)."""


class AvgPool2d(_AvgPoolNd):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size, self.padding = kernel_size, padding
        self.stride = stride if stride is not None else kernel_size
        self.ceil_mode, self.count_include_pad, self.divisor_override = ceil_mode, count_include_pad, divisor_override

    def forward(self, input):
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad,
                            self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxPool1d(_MaxPoolNd):
    """Max pooling along L of (N, C, L) or (C, L) input."""
    _fn = staticmethod(F.max_pool1d)


class AvgPool1d(_AvgPoolNd):
    """Average pooling along L of (N, C, L) or (C, L) input."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None else kernel_size)
        self.padding = _single(padding)
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, input):
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _MaxUnpoolNd(Module):
    """PyTorch's base of the max unpooling layers."""


class MaxUnpool2d(_MaxUnpoolNd):
    """``F.max_unpool2d``: the values of a ``MaxPool2d(return_indices=True)`` put back at their places."""

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = _pair(kernel_size)
        self.stride = _pair(stride if stride is not None else kernel_size)
        self.padding = _pair(padding)

    def forward(self, input, indices, output_size=None):
        return F.max_unpool2d(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"



def _single(v):
    """A 1-D layer's int argument as the 1-tuple PyTorch's layers keep (and print)."""
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


def _pair(v):
    """A 2-D layer's int argument as the pair PyTorch's layers keep (and print); the functional checks it."""
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


class MaxUnpool1d(_MaxUnpoolNd):
    """``F.max_unpool1d``: the values of a ``MaxPool1d(return_indices=True)`` put back at their places."""

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None else kernel_size)
        self.padding = _single(padding)

    def forward(self, input, indices, output_size=None):
        return F.max_unpool1d(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _LPPoolNd(Module):
    """PyTorch's base of the power-average pooling layers ``(sum over the window of x^p) ^ (1/p)``; ``_fn``: the
    functional."""

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, ceil_mode

    def forward(self, input):
        return self._fn(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self):
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"ceil_mode={self.ceil_mode}")


class LPPool2d(_LPPoolNd):
    """Power-average pooling (``F.lp_pool2d``)."""
    _fn = staticmethod(F.lp_pool2d)


class LPPool1d(_LPPoolNd):
    """Power-average pooling along L (``F.lp_pool1d``)."""
    _fn = staticmethod(F.lp_pool1d)


class _FractionalMaxPoolNd(Module):
    """Max pooling over ``kernel_size`` windows at pseudo-random steps, to ``output_size`` or ``output_ratio`` (in
    (0, 1)) of the input; ``_random_samples`` (a buffer, as in PyTorch) fixes the windows. ``_d``: the dimensions
    pooled, ``_fn``: the functional."""

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                 _random_samples=None):
        super().__init__()
        name, d = type(self).__name__, self._d
        tup = (lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v,) * d)  # noqa: E731 - _pair, _triple
        self.kernel_size = tup(kernel_size)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = tup(output_size) if output_size is not None else None
        self.output_ratio = tup(output_ratio) if output_ratio is not None else None
        if output_size is None and output_ratio is None:
            raise InputError(f"{name} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise InputError(f"{name}: only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise InputError(f"{name}: output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input):
        return self._fn(input, self.kernel_size, self.output_size, self.output_ratio, self.return_indices,
                        _random_samples=self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """``F.fractional_max_pool2d`` (see :class:`_FractionalMaxPoolNd`)."""

    _d = 2
    _fn = staticmethod(F.fractional_max_pool2d)


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """``F.fractional_max_pool3d``: :class:`FractionalMaxPool2d` over (N, C, T, H, W) or (C, T, H, W) input;
    ``kernel_size``, ``output_size`` and ``output_ratio`` an int (a number) or a triple."""

    _d = 3
    _fn = staticmethod(F.fractional_max_pool3d)
