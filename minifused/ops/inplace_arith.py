"""Arithmetic written in place, recorded for autograd as PyTorch's: ``Tensor.add_`` / ``sub_`` / ``mul_`` /
``div_`` and ``+=`` / ``-=`` / ``*=`` / ``/=`` (a residual block's ``out += identity``), through
``Function.apply_`` as the other recorded in-place ops."""
from __future__ import annotations

import numbers

import numpy as np

from .. import backend
from ..autograd import Function, is_grad_enabled
from ..autograd.tape import refuse_partial_overlap
from ..kernels import elementwise as K
from ..tensor import Tensor
from ._common import (bfloat16_rounded, broadcast_shape, can_cast, cast, check_alpha, scalar_result_dtype, shape_of,
                      tensors_result_dtype, unbroadcast, unbroadcast_graph, wrapped)
from .elementwise import _zeros_graph
from ..backend import InputTypeError


_FLOATS, _WIDE_FLOATS = frozenset(backend.FLOAT_DTYPES), (backend.float32, backend.float64)
_HALF = (backend.float16, backend.bfloat16)


def _wide(g):
    """``g`` in float32 where a float16 / bfloat16 array: a product with a number computes there, rounded once."""
    return g.astype(np.float32) if g.dtype in _HALF else g


def _target(out, b):
    """The array an in-place op on ``out`` computes into: ``out`` itself, or, where the operand ``b`` is of a wider
    float dtype (see :func:`_inplace_operand`), a copy of ``out`` in that dtype, to be written back into ``out``
    (:func:`_written`), rounded once."""
    dtype = getattr(b, "dtype", None)
    if dtype is None or dtype == out.dtype or not backend.is_floating(out.dtype):
        return out
    return out.astype(dtype)


def _written(out, dst):
    """``out`` with ``dst``'s values (see :func:`_target`), cast first as the package's other writes across dtypes
    are."""
    if dst is not out:
        out[...] = dst.astype(out.dtype)
    return out


class AddInto(Function):
    """``a + alpha * b`` written into ``a``'s array: ``Tensor.add_`` / ``sub_``, ``+=`` / ``-=``. Integers wrap
    around as PyTorch's (``uint8.sub_(1)`` at 0 gives 255); a bool ``a`` gets ``a | (bool(alpha) & b)``; a float16
    / bfloat16 ``a`` with a tensor ``b`` and an ``alpha`` computes in float32 with alpha rounded to a's dtype and
    rounds once, as PyTorch's (an optimizer's ``p.add_(g, alpha=-lr)``)."""

    @staticmethod
    def forward(ctx, a, b, alpha, out):
        ctx.b_meta, ctx.alpha = (shape_of(b), getattr(b, "dtype", None)), alpha
        dst = _target(out, b)
        if alpha != 1 and dst.dtype in _HALF and hasattr(b, "shape"):
            alpha = float(dst.dtype.type(alpha))
            dst, b = dst.astype(np.float32), b.astype(np.float32)
        if alpha == 1:
            K.add_into(dst, b)
        elif dst.dtype == backend.bool_:
            if alpha:
                dst += b
        elif dst.dtype.kind in "iu":  # alpha (and a scalar's product) in out's dtype, wrapped as PyTorch casts them
            dst += wrapped(dst.dtype, alpha) * b if hasattr(b, "shape") else wrapped(dst.dtype, alpha * b)
        else:  # (a number times alpha as a float: sub_(0) adds -0.0, so that -0.0 stays -0.0 as in PyTorch)
            dst += (alpha if hasattr(b, "shape") else float(alpha)) * b
        return _written(out, dst)

    @staticmethod
    def backward(ctx, g):
        na, nb, _ = ctx.needs_input_grad
        gb = None
        if nb:
            shape, dtype = ctx.b_meta
            gb = unbroadcast(g if ctx.alpha == 1 else (_wide(g) * ctx.alpha).astype(g.dtype, copy=False), shape)
            gb = gb.astype(dtype, copy=False)
        return g if na else None, gb, None

    @staticmethod
    def backward_graph(ctx, g):
        na, nb, _ = ctx.needs_input_grad
        gb = None
        if nb:
            gb = g
            if ctx.alpha != 1:
                gb = cast(cast(g, np.float32) * ctx.alpha, g.dtype) if g.dtype in _HALF else g * ctx.alpha
            gb = unbroadcast_graph(gb, ctx.b_meta[0])
        return g if na else None, gb, None


class MulInto(Function):
    """``a * b`` written into ``a``'s array: ``Tensor.mul_``, ``*=``."""

    @staticmethod
    def forward(ctx, a, b, out):
        na, nb = ctx.needs_input_grad
        ctx.b_meta = (shape_of(b), getattr(b, "dtype", None))
        ctx.old = backend.copy(a) if nb and ctx.recording else None  # a's value, which the product overwrites
        if na:
            ctx.save_for_backward(b)
        dst = _target(out, b)
        dst *= b
        return _written(out, dst)

    @staticmethod
    def backward(ctx, g):
        na, nb = ctx.needs_input_grad
        shape, dtype = ctx.b_meta
        return ((g * ctx.saved_tensors[0]).astype(g.dtype, copy=False) if na else None,
                unbroadcast(g * ctx.old, shape).astype(dtype, copy=False) if nb else None)

    @staticmethod
    def backward_graph(ctx, g):
        # input 0 is a stand-in for a's value before the product: ctx.old, a copy of it
        na, nb = ctx.needs_input_grad
        return (g * ctx.graph_input(1, ctx.saved_tensors[0]) if na else None,
                unbroadcast_graph(g * ctx.graph_input(0, ctx.old), ctx.b_meta[0]) if nb else None)


class DivInto(Function):
    """``a / b`` written into ``a``'s array: ``Tensor.div_``, ``/=``."""

    @staticmethod
    def forward(ctx, a, b, out):
        ctx.b_meta = (shape_of(b), getattr(b, "dtype", None))
        ctx.save_for_backward(b)
        dst = _target(out, b)
        dst /= b
        # the divisor's gradient is -g * quotient / b: a copy of the quotient, which later in-place ops on a may
        # change (as MulInto keeps a's old value); a wider quotient is a new array already
        ctx.quotient = None
        if ctx.needs_input_grad[1] and ctx.recording:
            ctx.quotient = backend.copy(dst) if dst is out else dst
        return _written(out, dst)

    @staticmethod
    def backward(ctx, g):
        na, nb = ctx.needs_input_grad
        (b,) = ctx.saved_tensors
        shape, dtype = ctx.b_meta
        return ((g / b).astype(g.dtype, copy=False) if na else None,
                unbroadcast(-g * ctx.quotient / b, shape).astype(dtype, copy=False) if nb else None)

    @staticmethod
    def backward_graph(ctx, g):
        # the quotient is the output (its copy): its graph reaches a through this node
        na, nb = ctx.needs_input_grad
        b = ctx.graph_input(1, ctx.saved_tensors[0])
        return (g / b if na else None,
                unbroadcast_graph(-g * ctx.graph_output(ctx.quotient) / b, ctx.b_meta[0]) if nb else None)


def _inplace_operand(op, x, other):
    """``other`` as x's in-place arithmetic takes it: a number, or a tensor on x's device that broadcasts to x's
    shape. The result type must keep x's kind, as PyTorch's in-place ops require (no float into an integer tensor,
    nothing but bool into a bool one). The op computes in the dtype PyTorch computes it in, and its result is written
    into x, rounded once: a tensor of a wider dtype stays so (``float16.add_(float32)``); a float16 / bfloat16 x
    multiplied or divided by a number (a Python number, a 0-d tensor of another dtype) computes in float32, the
    number given as a float32 NumPy scalar; other numbers take x's dtype (integers wrapped into its range, bfloat16's
    rounded, as PyTorch casts them). ``op``'s name says the op: ``add``..., ``sub``..., ``mul``..., ``div``...; other
    ops (``clamp_``, ``pow_``, ``xlogy_`` ...) get a tensor cast (recorded) to x's dtype and a number as it is."""
    xd = x._data
    if isinstance(other, Tensor):  # the common cases first: a float tensor of x's dtype, shape and device
        od = other._data
        if (od.dtype == xd.dtype and od.shape == xd.shape and type(od) is type(xd) and od.dtype in _FLOATS
                and (type(od) is np.ndarray or od.data.device_id == xd.data.device_id)):
            return other
    elif type(other) in (float, int) and xd.dtype in _WIDE_FLOATS:  # a number into a float32 / float64 x
        return other
    if isinstance(other, np.generic):
        other = other.item()
    if op.startswith("sub") and (isinstance(other, bool) or x.dtype == backend.bool_ or
                                 isinstance(other, Tensor) and other.dtype == backend.bool_):
        raise RuntimeError(f"{op}: Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
                           f"trying to invert a mask, use the `~` or `logical_not()` operator instead.")
    if isinstance(other, Tensor):
        if other.device != x.device:
            raise RuntimeError(f"{op}: expected all tensors on the same device, got {x.device} and {other.device}")
        if other.shape != x.shape:
            shape = broadcast_shape(op, x.shape, other.shape)
            if tuple(shape) != tuple(x.shape):
                raise RuntimeError(f"{op}: output with shape {list(x.shape)} doesn't match the broadcast shape "
                                   f"{list(shape)}")
        result = tensors_result_dtype(x, other)
        number = other.ndim == 0 and other.dtype != result
    elif isinstance(other, numbers.Number) and not isinstance(other, complex):
        result, number = scalar_result_dtype(x.dtype, other), True
        other = wrapped(x.dtype, other)  # an integer into an integer tensor's range, as PyTorch casts it
    else:
        raise InputTypeError(f"{op}: expected a tensor or a number, got {type(other).__name__}")
    if op.startswith("div") and not backend.is_floating(result):
        result = backend.float32  # true division
    if not can_cast(result, x.dtype):
        raise RuntimeError(f"{op}: result type {np.dtype(result).name} can't be cast to the desired output type "
                           f"{np.dtype(x.dtype).name}")
    if not op.startswith(("add", "sub", "mul", "div")):  # (clamp_, pow_ ... compute in x's dtype)
        return cast(other, x.dtype) if isinstance(other, Tensor) and other.dtype != x.dtype else other
    if number and result in (backend.float16, backend.bfloat16) and op.startswith(("mul", "div")):
        result = backend.float32
    if isinstance(other, Tensor):
        if not backend.is_floating(x.dtype):  # (integers wrap the same way, cast first or after)
            result = x.dtype
        return other if other.dtype == result else cast(other, result)
    if result != x.dtype:
        return np.float32(other)
    return bfloat16_rounded(x.dtype, other)


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

    @staticmethod
    def backward_graph(ctx, g):
        need_x, need_src = ctx.needs_input_grad
        return (_zeros_graph(g, g.shape) if need_x else None,
                unbroadcast_graph(g, ctx.src_meta[0]) if need_src else None)


def copy_(x, other, non_blocking=False):
    """``x.copy_(other)``: other's values (broadcast to x's shape, cast to its dtype, brought to its device) written
    into x (returned); recorded for autograd, as PyTorch's, where other or x requires grad in grad mode and x is
    floating (an integer or bool copy carries no gradient)."""
    _check_target("copy_", x)
    if isinstance(other, Tensor):
        refuse_partial_overlap("copy_", x, other)
    if isinstance(other, Tensor) and (other.requires_grad or x.requires_grad) and is_grad_enabled() and \
            backend.is_floating(x.dtype):
        try:
            fits = tuple(np.broadcast_shapes(x.shape, other.shape)) == tuple(x.shape)
        except ValueError:
            fits = False
        if not fits:
            raise RuntimeError(f"copy_: the source's shape {list(other.shape)} does not broadcast to the "
                               f"destination's {list(x.shape)}")
        return CopyInto.apply_("copy_", x, other.to(x.device))
    return x._copy_values_(other)


def _check_target(op, x):
    if not isinstance(x, Tensor):
        raise InputTypeError(f"{op}: expected a tensor, got {type(x).__name__}")


def add_(x, other, alpha=1):
    """``x += alpha * other`` in place (returns x), recorded for autograd as PyTorch's ``add_``."""
    _check_target("add_", x)
    if not (type(alpha) is int and alpha == 1):
        alpha = check_alpha("add_", x.dtype, alpha)
    return AddInto.apply_("add_", x, _inplace_operand("add_", x, other), alpha)


def sub_(x, other, alpha=1):
    _check_target("sub_", x)
    if not (type(alpha) is int and alpha == 1):
        alpha = check_alpha("sub_", x.dtype, alpha)
    return AddInto.apply_("sub_", x, _inplace_operand("sub_", x, other), -alpha)


def mul_(x, other):
    _check_target("mul_", x)
    return MulInto.apply_("mul_", x, _inplace_operand("mul_", x, other))


def div_(x, other):
    _check_target("div_", x)
    return DivInto.apply_("div_", x, _inplace_operand("div_", x, other))
