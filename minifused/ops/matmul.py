"""``matmul`` / ``@`` with NumPy's rules: 1-D operands, batched and broadcast leading dims."""
from __future__ import annotations

from .. import backend
from ..autograd import Function
from ..tensor import Tensor
from ._common import binary_operands, broadcast_shape, unbroadcast


def _swap(a):
    return a.swapaxes(-1, -2)


def _mm(a, b):
    """``a @ b`` in the operands' dtype (NumPy multiplies bfloat16 into float32)."""
    out = backend.array_module(a).matmul(a, b)
    return out if out.dtype == a.dtype else out.astype(a.dtype)


class MatMul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _mm(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        if a.ndim == 1 and b.ndim == 1:
            return (g * b if na else None), (g * a if nb else None)
        # Lift 1-D operands to matrices so one rule covers every case.
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        g2 = g
        if a.ndim == 1:
            g2 = g2[..., None, :]
        if b.ndim == 1:
            g2 = g2[..., None]
        ga = gb = None
        if na:
            ga = unbroadcast(_mm(g2, _swap(b2)), a2.shape).reshape(a.shape)
        if nb:
            gb = unbroadcast(_mm(_swap(a2), g2), b2.shape).reshape(b.shape)
        return ga, gb


def matmul(a, b):
    if not (isinstance(a, Tensor) and isinstance(b, Tensor)):
        raise TypeError("matmul: both operands must be tensors")
    a, b = binary_operands("matmul", a, b, broadcast=False)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: both operands must have at least one dimension, got a 0-d tensor")
    k_a = a.shape[-1]
    k_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if k_a != k_b:
        raise ValueError(f"matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be multiplied "
                         f"({k_a} != {k_b})")
    broadcast_shape("matmul", a.shape[:-2], b.shape[:-2])
    return MatMul.apply(a, b)
