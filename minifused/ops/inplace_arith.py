"""Arithmetic written in place, recorded for autograd as PyTorch's: ``Tensor.add_`` / ``sub_`` / ``mul_`` /
``div_`` and ``+=`` / ``-=`` / ``*=`` / ``/=`` (a residual block's ``out += identity``), through
``Function.apply_`` as the other recorded in-place ops."""
from __future__ import annotations

import numbers

import numpy as np

from .. import backend
from ..autograd import Function, is_grad_enabled
from ..tensor import Tensor
from ._common import (broadcast_shape, cast, check_alpha, scalar_result_dtype, shape_of, tensors_result_dtype,
                      unbroadcast, wrapped)
from ..backend import InputTypeError


class AddInto(Function):
    """``a + alpha * b`` written into ``a``'s array: ``Tensor.add_`` / ``sub_``, ``+=`` / ``-=``. Integers wrap
    around as PyTorch's (``uint8.sub_(1)`` at 0 gives 255); a bool ``a`` gets ``a | (bool(alpha) & b)``."""

    @staticmethod
    def forward(ctx, a, b, alpha, out):
        ctx.b_shape, ctx.alpha = shape_of(b), alpha
        if alpha == 1:
            out += b
        elif out.dtype == backend.bool_:
            if alpha:
                out += b
        elif out.dtype.kind in "iu":  # alpha (and a scalar's product) in out's dtype, wrapped as PyTorch casts them
            out += wrapped(out.dtype, alpha) * b if hasattr(b, "shape") else wrapped(out.dtype, alpha * b)
        else:
            out += alpha * b
        return out

    @staticmethod
    def backward(ctx, g):
        na, nb, _ = ctx.needs_input_grad
        gb = g if ctx.alpha == 1 else (g * ctx.alpha).astype(g.dtype, copy=False)
        return g if na else None, unbroadcast(gb, ctx.b_shape) if nb else None, None


class MulInto(Function):
    """``a * b`` written into ``a``'s array: ``Tensor.mul_``, ``*=``."""

    @staticmethod
    def forward(ctx, a, b, out):
        na, nb = ctx.needs_input_grad
        ctx.b_shape = shape_of(b)
        ctx.old = backend.copy(a) if nb and ctx.recording else None  # a's value, which the product overwrites
        if na:
            ctx.save_for_backward(b)
        out *= b
        return out

    @staticmethod
    def backward(ctx, g):
        na, nb = ctx.needs_input_grad
        return (g * ctx.saved_tensors[0] if na else None, unbroadcast(g * ctx.old, ctx.b_shape) if nb else None)


class DivInto(Function):
    """``a / b`` written into ``a``'s array: ``Tensor.div_``, ``/=``."""

    @staticmethod
    def forward(ctx, a, b, out):
        ctx.b_shape = shape_of(b)
        ctx.save_for_backward(b)
        out /= b
        # the divisor's gradient is -g * quotient / b: a copy of the quotient, which later in-place ops on a may
        # change (as MulInto keeps a's old value)
        ctx.quotient = backend.copy(out) if ctx.needs_input_grad[1] and ctx.recording else None
        return out

    @staticmethod
    def backward(ctx, g):
        na, nb = ctx.needs_input_grad
        (b,) = ctx.saved_tensors
        return g / b if na else None, unbroadcast(-g * ctx.quotient / b, ctx.b_shape) if nb else None


def _inplace_operand(op, x, other):
    """``other`` as x's in-place arithmetic takes it: a number, or a tensor on x's device that broadcasts to x's
    shape, cast (recorded) to x's dtype; the result type must keep x's kind, as PyTorch's in-place ops require
    (no float into an integer tensor, nothing but bool into a bool one)."""
    if isinstance(other, np.generic):
        other = other.item()
    if isinstance(other, Tensor):
        if other.device != x.device:
            raise RuntimeError(f"{op}: expected all tensors on the same device, got {x.device} and {other.device}")
        if other.shape != x.shape:
            shape = broadcast_shape(op, x.shape, other.shape)
            if tuple(shape) != tuple(x.shape):
                raise RuntimeError(f"{op}: output with shape {list(x.shape)} doesn't match the broadcast shape "
                                   f"{list(shape)}")
        result = tensors_result_dtype(x, other)
    elif isinstance(other, numbers.Number) and not isinstance(other, complex):
        result = scalar_result_dtype(x.dtype, other)
        other = wrapped(x.dtype, other)  # an integer into an integer tensor's range, as PyTorch casts it
    else:
        raise InputTypeError(f"{op}: expected a tensor or a number, got {type(other).__name__}")
    if op.startswith("div") and not backend.is_floating(result):
        result = backend.float32  # true division
    if (backend.is_floating(result) and not backend.is_floating(x.dtype)) or (
            x.dtype == backend.bool_ and result != backend.bool_):
        raise RuntimeError(f"{op}: result type {np.dtype(result).name} can't be cast to the desired output type "
                           f"{np.dtype(x.dtype).name}")
    if isinstance(other, Tensor) and other.dtype != x.dtype:
        other = cast(other, x.dtype)
    return other


class CopyInto(Function):
    """``x.copy_(src)`` recorded: src (broadcast, cast to x's dtype) written into x's array; x's old value gets a
    zero gradient (it is overwritten), src the output's, summed over what it was broadcast along, in its
    dtype."""

    @staticmethod
    def forward(ctx, x, src, out):
        ctx.src_meta = (src.shape, src.dtype)
        backend.array_module(out).copyto(out, src.astype(out.dtype, copy=False))
        return out

    @staticmethod
    def backward(ctx, g):
        shape, dtype = ctx.src_meta
        need_x, need_src = ctx.needs_input_grad
        return (backend.array_module(g).zeros_like(g) if need_x else None,
                unbroadcast(g, shape).astype(dtype, copy=False) if need_src else None)


def copy_(x, src, non_blocking=False):
    """``x.copy_(src)``: src's values (broadcast to x's shape, cast to its dtype, brought to its device) written
    into x (returned); recorded for autograd, as PyTorch's, where src or x requires grad in grad mode."""
    _check_target("copy_", x)
    if isinstance(src, Tensor) and (src.requires_grad or x.requires_grad) and is_grad_enabled():
        try:
            fits = tuple(np.broadcast_shapes(x.shape, src.shape)) == tuple(x.shape)
        except ValueError:
            fits = False
        if not fits:
            raise RuntimeError(f"copy_: the source's shape {list(src.shape)} does not broadcast to the "
                               f"destination's {list(x.shape)}")
        return CopyInto.apply_("copy_", x, src.to(x.device))
    return x._copy_values_(src)


def _check_target(op, x):
    if not isinstance(x, Tensor):
        raise InputTypeError(f"{op}: expected a tensor, got {type(x).__name__}")


def add_(x, other, alpha=1):
    """``x += alpha * other`` in place (returns x), recorded for autograd as PyTorch's ``add_``."""
    _check_target("add_", x)
    if not (type(alpha) is int and alpha == 1):
        check_alpha("add_", x.dtype, alpha)
    return AddInto.apply_("add_", x, _inplace_operand("add_", x, other), alpha)


def sub_(x, other, alpha=1):
    _check_target("sub_", x)
    if not (type(alpha) is int and alpha == 1):
        check_alpha("sub_", x.dtype, alpha)
    return AddInto.apply_("sub_", x, _inplace_operand("sub_", x, other), -alpha)


def mul_(x, other):
    _check_target("mul_", x)
    return MulInto.apply_("mul_", x, _inplace_operand("mul_", x, other))


def div_(x, other):
    _check_target("div_", x)
    return DivInto.apply_("div_", x, _inplace_operand("div_", x, other))
