"""PyTorch's fake quantization, ``fake_quantize_per_tensor_affine`` and ``fake_quantize_per_channel_affine``: x
rounded onto an affine integer grid and back, ``(clamp(round(x / scale) + zero_point, quant_min, quant_max) -
zero_point) * scale``, with the straight-through gradient (the incoming one where the rounded value fell within
[quant_min, quant_max], zero where it was clamped); scale and zero point take none.

The numbers are PyTorch's kernels': ``x * (1 / scale)`` with the reciprocal in float32 and the product in float32
(float64 for a float64 input), halves rounded to even, an integer zero point added after the rounding and a
floating one (per channel) before it, a NaN taken to quant_min (its mask 0), the integer minus the zero point times
the scale formed exactly and rounded once into x's dtype.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import backend
from ..autograd import Function
from ..tensor import Tensor
from ._common import check_tensors, dim_index
from .elementwise import _const, where
from ..backend import DtypeNotImplementedError, InputError, InputTypeError

__all__ = ["fake_quantize_per_tensor_affine", "fake_quantize_per_channel_affine"]
METHODS = {}


class FakeQuantize(Function):
    """Forward on arrays: ``scale`` (float32) and ``zero_point`` (int64, or float32 added before the rounding)
    broadcast against x. Backward: the gradient where the rounded value was within range."""

    @staticmethod
    def forward(ctx, x, scale, zero_point, qmin, qmax, per_channel):
        xp = backend.array_module(x)
        wide = np.float64 if x.dtype == np.float64 else np.float32
        scaled = x.astype(wide, copy=False) * (np.float32(1) / scale.astype(np.float32)).astype(wide)
        floating_zero = zero_point.dtype.kind == "f"
        v = xp.rint(scaled + zero_point.astype(wide)) if floating_zero else xp.rint(scaled) + zero_point.astype(wide)
        ctx.keep = (v >= qmin) & (v <= qmax)  # NaN compares false: no gradient
        # the integer PyTorch's kernels convert v to: the per-tensor one takes NaN to quant_min and saturates; the
        # per-channel one's int64 cast gives int64's minimum for NaN, infinities and values beyond int64
        outside = ~(xp.abs(v) < 2.0 ** 63) if per_channel else xp.isnan(v)
        q = xp.clip(xp.where(outside, qmin, v), qmin, qmax).astype(np.float64) - zero_point.astype(np.float64)
        # the integer times the scale: formed exactly, rounded once into x's dtype per channel, into float32 first
        # per tensor
        out = q * scale.astype(np.float64)
        return (out if per_channel else out.astype(np.float32)).astype(x.dtype)

    @staticmethod
    def backward(ctx, g):
        return backend.where(ctx.keep, g, g.dtype.type(0)), None, None, None, None, None

    @staticmethod
    def backward_graph(ctx, g):
        return where(_const(ctx.keep), g, 0), None, None, None, None, None


def _check_input(op, input, quant_min, quant_max):
    check_tensors(op, input=input)
    for name, v in (("quant_min", quant_min), ("quant_max", quant_max)):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool):
            raise InputTypeError(f"{op}(): argument '{name}' must be int, not {type(v).__name__}")
    if not backend.is_floating(input.dtype):
        raise DtypeNotImplementedError(f"{op}: expected a floating-point input (float32, float64, float16 or "
                                       f"bfloat16), got dtype {input.dtype}")
    if quant_min > quant_max:
        raise InputError(f"{op}: `quant_min` should be less than or equal to `quant_max`, got quant_min {quant_min} "
                         f"and quant_max {quant_max}")


def _check_qparams_free(op, **qparams):
    for name, t in qparams.items():
        if t.requires_grad:
            raise RuntimeError(f"{op}: {name} takes no gradient (fake quantization is not differentiable with "
                               f"respect to it), got a tensor that requires grad")


def _zero_point_in_range(op, low, high, quant_min, quant_max):
    if low < quant_min or high > quant_max:
        raise InputError(f"{op}: `zero_point` must be between `quant_min` and `quant_max` ({quant_min} and "
                         f"{quant_max}), got values in [{low}, {high}]")


def fake_quantize_per_tensor_affine(input, scale, zero_point, quant_min, quant_max):  # noqa: A002
    """``input`` rounded onto the grid ``scale * (q - zero_point)``, q in [quant_min, quant_max]; scale and
    zero_point both numbers, or both one-element tensors (the zero point's value truncated to an integer)."""
    op = "fake_quantize_per_tensor_affine"
    _check_input(op, input, quant_min, quant_max)
    if isinstance(scale, Tensor) != isinstance(zero_point, Tensor):
        raise InputTypeError(f"{op}(): expected scale and zero_point both numbers or both tensors, got "
                             f"{type(scale).__name__} and {type(zero_point).__name__}")
    xp = input._xp
    if isinstance(scale, Tensor):
        _check_qparams_free(op, scale=scale, zero_point=zero_point)
        for name, t in (("scale", scale), ("zero_point", zero_point)):
            if t.numel() != 1:
                raise InputError(f"{op}: {name} must hold one element, got a tensor of shape {tuple(t.shape)}")
            if t.device != input.device:
                raise InputError(f"{op}: {name} is on {t.device} but the input is on {input.device}")
        s = scale._data.reshape(()).astype(np.float32)
        z = zero_point._data.reshape(()).astype(np.int64)  # (a float zero point truncated, as PyTorch's int cast)
    else:
        if not isinstance(scale, numbers.Real) or isinstance(scale, bool):
            raise InputTypeError(f"{op}(): argument 'scale' must be float, not {type(scale).__name__}")
        if not isinstance(zero_point, numbers.Integral) or isinstance(zero_point, bool):
            raise InputTypeError(f"{op}(): argument 'zero_point' must be int, not {type(zero_point).__name__}")
        _zero_point_in_range(op, zero_point, zero_point, quant_min, quant_max)
        s, z = xp.asarray(scale, np.float32), xp.asarray(zero_point, np.int64)
    return FakeQuantize.apply(input, s, z, int(quant_min), int(quant_max), False)


_CHANNEL_SCALES = (np.dtype(np.float32), backend.bfloat16)
_CHANNEL_ZERO_POINTS = (np.dtype(np.int32), np.dtype(np.float32), np.dtype(np.float16))


def fake_quantize_per_channel_affine(input, scale, zero_point, axis, quant_min, quant_max):  # noqa: A002
    """Fake quantization with a scale and zero point per index of ``axis`` (1-D tensors of input.size(axis)): an
    int32 zero point added after the rounding, a float32 or float16 one before it."""
    op = "fake_quantize_per_channel_affine"
    _check_input(op, input, quant_min, quant_max)
    check_tensors(op, scale=scale, zero_point=zero_point)
    if not isinstance(axis, numbers.Integral) or isinstance(axis, bool):
        raise InputTypeError(f"{op}(): argument 'axis' must be int, not {type(axis).__name__}")
    _check_qparams_free(op, scale=scale, zero_point=zero_point)
    if scale.dtype not in _CHANNEL_SCALES:
        raise InputTypeError(f"{op}: scale must be float32 or bfloat16, got dtype {scale.dtype}")
    if zero_point.dtype not in _CHANNEL_ZERO_POINTS:
        raise InputTypeError(f"{op}: zero_point must be int32, float32 or float16, got dtype {zero_point.dtype}")
    if scale.ndim != 1 or zero_point.ndim != 1:
        raise InputError(f"{op}: scale and zero_point must be 1-D tensors, got shapes {tuple(scale.shape)} and "
                         f"{tuple(zero_point.shape)}")
    dim = dim_index(op, axis, input.ndim)
    if axis < 0:  # (PyTorch's rule: in range, yet not counted from the end)
        raise InputError(f"{op}: `axis` must be between 0 and the number of dimensions of the input "
                         f"({input.ndim}), got {axis}")
    if not scale.shape[0] == zero_point.shape[0] == input.shape[dim]:
        raise InputError(f"{op}: scale and zero_point must each hold input.size({dim}) = {input.shape[dim]} values, "
                         f"got {scale.shape[0]} and {zero_point.shape[0]}")
    for name, t in (("scale", scale), ("zero_point", zero_point)):
        if t.device != input.device:
            raise InputError(f"{op}: {name} is on {t.device} but the input is on {input.device}")
    if zero_point.numel():  # (one host read, as PyTorch's check makes)
        low, high = (float(v) for v in (zero_point._data.min(), zero_point._data.max()))
        _zero_point_in_range(op, low, high, quant_min, quant_max)
    along = (-1,) + (1,) * (input.ndim - dim - 1)
    z = zero_point._data.reshape(along)
    z = z.astype(np.float32) if z.dtype.kind == "f" else z.astype(np.int64)
    return FakeQuantize.apply(input, scale._data.reshape(along), z, int(quant_min), int(quant_max), True)
