"""Pooling and resampling forms beyond ``conv.py`` and ``layers.py``, with PyTorch's names: the
``*_with_indices`` max poolings, the power-average poolings ``lp_pool1d`` / ``lp_pool2d``, ``max_unpool1d``
and the deprecated ``upsample`` aliases of ``interpolate``. All are compositions of those ops."""
from __future__ import annotations

import math as _math
import numbers as _numbers
import warnings as _warnings

from .. import backend as _backend
from ..ops import where as _where
from ..ops._common import autocast_float32 as _autocast_float32
from ..ops.shape import reshape as _reshape
from ..tensor import Tensor as _Tensor
from ._checks import NormTypeZeroError, _pair, _single, _unpool_size
from .conv import _check_pool_nonempty, avg_pool1d, avg_pool2d, max_pool1d, max_pool2d
from .layers import _adaptive_max
from .resize import interpolate
from ..backend import InputTypeError

__all__ = ["max_pool1d_with_indices", "max_pool2d_with_indices", "adaptive_max_pool1d_with_indices",
           "adaptive_max_pool2d_with_indices", "lp_pool1d", "lp_pool2d", "max_unpool1d", "upsample",
           "upsample_nearest", "upsample_bilinear"]


# ---------------------------------------------------------------- the return_indices=True forms
# PyTorch's signatures keep ``return_indices``, which these ignore: they always return (output, indices).
def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    """``(output, indices)`` of :func:`max_pool1d` (indices: positions along L, int64)."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    """``(output, indices)`` of :func:`max_pool2d` (indices: ``h*W + w`` in each plane, int64)."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    """``(output, indices)`` of :func:`adaptive_max_pool1d`."""
    return _adaptive_max("adaptive_max_pool1d_with_indices", input, output_size, True, 1)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    """``(output, indices)`` of :func:`adaptive_max_pool2d`."""
    return _adaptive_max("adaptive_max_pool2d_with_indices", input, output_size, True, 2)


# ---------------------------------------------------------------- power-average pooling
def _pooled_size(n, k, s, ceil_mode):
    """A window count along one dimension (no padding), as PyTorch's pooling shape rule."""
    out = (-(-(n - k) // s) if ceil_mode else (n - k) // s) + 1
    if ceil_mode and (out - 1) * s >= n:  # the last window must start inside the input
        out -= 1
    return out


def _lp_pool(op, dims, input, norm_type, kernel_size, stride, ceil_mode):
    if not isinstance(input, _Tensor):
        raise InputTypeError(f"{op}: expected a tensor input, got {type(input).__name__}")
    if isinstance(norm_type, bool) or not isinstance(norm_type, _numbers.Real):
        raise InputTypeError(f"{op}: norm_type must be a number, got {type(norm_type).__name__}")
    p = float(norm_type)
    if p == 0:
        raise NormTypeZeroError(f"{op}: norm_type must be a non-zero value, but got {norm_type}")
    if input.ndim not in (dims + 1, dims + 2):
        raise RuntimeError(f"{op}: Expected {dims + 1} to {dims + 2} dimensions, but got {input.ndim}-dimensional "
                           f"tensor (shape {tuple(input.shape)})")
    _check_pool_nonempty(op, input, dims)
    def convert(name, value):  # a tuple of ``dims`` ints
        return (_single(op, name, value, 1),) if dims == 1 else _pair(op, name, value, 1)
    kernel = convert("kernel_size", kernel_size)
    # (no stride, or an empty one, as PyTorch's avg_pool takes it: windows that tile)
    steps = kernel if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) else \
        convert("stride", stride)
    sizes = tuple(input.shape[-dims:])
    out = tuple(_pooled_size(n, k, s, ceil_mode) for n, k, s in zip(sizes, kernel, steps))
    if min(out) < 1:
        raise RuntimeError(f"{op}: Given input size: {tuple(input.shape)}. Calculated output size: {out}. "
                           f"Output size is too small (kernel_size {kernel})")
    if p in (_math.inf, -_math.inf):  # the largest (smallest) magnitude of each window
        pool = max_pool1d if dims == 1 else max_pool2d
        return pool(input.abs(), kernel_size, stride, 0, 1, ceil_mode) if p > 0 else \
            -pool(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    pool = avg_pool1d if dims == 1 else avg_pool2d
    # PyTorch's composition: the window's mean of x^p times the kernel's size (with ceil_mode a clipped last
    # window keeps avg_pool's smaller divisor, as there), then the 1/p power. An integer or bool input is raised
    # as PyTorch's ``input.pow(norm_type)`` raises it: to the default float dtype by a float norm_type, to an
    # integer dtype by an int one (which the average pooling then takes or refuses, as there)
    integral = not _backend.is_floating(input.dtype) and isinstance(norm_type, _numbers.Integral)
    total = pool(input.pow(int(norm_type) if integral else p), kernel_size, stride, 0, ceil_mode) * \
        _math.prod(kernel)
    # where a window's sum is 0 the result is 0 ** (1/p) and its gradient 0 (PyTorch's sign * relu(abs)
    # masks the infinite derivative of the power); negative sums with fractional 1/p give NaN, as there
    zero = total == 0
    return _where(zero, 0.0 if p > 0 else _math.inf, _where(zero, 1.0, total).pow(1.0 / p))


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling along L, as ``torch.nn.functional.lp_pool1d``: ``(sum over the window of
    x^p) ^ (1/p)``; p = inf is max pooling of ``|x|``. (N, C, L) or (C, L) input, no padding."""
    return _lp_pool("lp_pool1d", 1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling over (H, W), as ``torch.nn.functional.lp_pool2d``: ``(sum over the window of
    x^p) ^ (1/p)``; p = inf is max pooling of ``|x|``. (N, C, H, W) or (C, H, W) input, no padding."""
    return _lp_pool("lp_pool2d", 2, input, norm_type, kernel_size, stride, ceil_mode)


# ---------------------------------------------------------------- max_unpool1d
def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of ``max_pool1d(..., return_indices=True)``, as ``torch.nn.functional.max_unpool1d``:
    each value put back at its index along L, zeros elsewhere; the output length is
    ``(L_in - 1) * stride - 2 * padding + kernel_size``, or ``output_size`` (within a stride of it)."""
    op = "max_unpool1d"
    (input,) = _autocast_float32(input, devices=("cpu",))  # (PyTorch's runs max_unpool2d, on its cpu float32 list)
    if not isinstance(input, _Tensor) or not isinstance(indices, _Tensor):
        raise InputTypeError(f"{op}: expected tensors for input and indices, got {type(input).__name__} and "
                             f"{type(indices).__name__}")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"{op}: expected a 2-D (C, L) or 3-D (N, C, L) input, got shape {tuple(input.shape)}")
    if tuple(indices.shape) != tuple(input.shape) or indices.dtype != _backend.int64:
        raise RuntimeError(f"{op}: expected int64 indices of the input's shape {tuple(input.shape)}, got "
                           f"{indices.dtype} {tuple(indices.shape)}")
    k = _single(op, "kernel_size", kernel_size, 1)
    s = k if stride is None else _single(op, "stride", stride, 1)
    p = _single(op, "padding", padding, 0)
    length, = _unpool_size(op, [(input.shape[-1] - 1) * s - 2 * p + k], (s,), output_size)
    x = input if input.ndim == 3 else _reshape(input, 1, *input.shape)
    idx = indices if indices.ndim == 3 else _reshape(indices, 1, *indices.shape)
    if idx.numel() and (int(idx.min().item()) < 0 or int(idx.max().item()) >= length):
        raise RuntimeError(f"{op}: Found an invalid max index (indices must lie in [0, {length}) for an output of "
                           f"length {length})")
    out = x.new_zeros((x.shape[0], x.shape[1], length)).scatter(2, idx, x)
    return out if input.ndim == 3 else _reshape(out, *out.shape[1:])


# ---------------------------------------------------------------- the deprecated upsample aliases
def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated alias of :func:`interpolate` (PyTorch's warning, then the same call)."""
    _warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(..., mode='nearest')`` (with PyTorch's warning)."""
    _warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.",
                   stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(..., mode='bilinear', align_corners=True)`` (with PyTorch's warning)."""
    _warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.",
                   stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
