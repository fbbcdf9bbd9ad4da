"""Softmax and log-softmax over the last dimension: one Function, the fused kernels.

Forward saves its output (the backward of both needs only y), so backward is
one read of y and dy and one write of dx.
"""
from __future__ import annotations

from .. import backend
from ..autograd import Function
from ..kernels import softmax as K


class Softmax(Function):
    @staticmethod
    def forward(ctx, x, *, log):
        xp = backend.array_module(x)
        n = x.shape[-1] if x.ndim else 1
        y = K.softmax_fwd(xp.ascontiguousarray(x).reshape(-1, n), log).reshape(x.shape)
        ctx.save_for_backward(y)
        ctx.log, ctx.n = log, n
        return y

    @staticmethod
    def backward(ctx, gy):
        (y,) = ctx.saved_tensors
        xp = backend.array_module(y)
        dx = K.softmax_bwd(xp.ascontiguousarray(gy).reshape(-1, ctx.n), y.reshape(-1, ctx.n), ctx.log)
        return dx.reshape(y.shape)


def softmax_last(x, log=False):
    """softmax (``log``: log_softmax) of tensor ``x`` over its last dimension; arguments unchecked."""
    return Softmax.apply(x, log=log)
