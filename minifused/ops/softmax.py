"""Softmax and log-softmax over the last dimension: one Function, the fused kernels.

Forward saves its output (the backward of both needs only y), so backward is
one read of y and dy and one write of dx (``backward_graph``, for create_graph=True, the same
formulas with recorded ops). The in-place form (``Function.apply_``,
``out`` is ``x``) writes y over x and saves it: x's array is y then, so an
in-place change of the result after the op is still detected.
"""
from __future__ import annotations

from .. import backend
from ..autograd import Function
from ..kernels import acc_dtype
from ..kernels import softmax as K


class Softmax(Function):
    """Over the last axis; the in-place form takes ``dim`` (any axis: it is moved last in views)."""

    @staticmethod
    def forward(ctx, x, *, log, out=None, dim=-1):
        xp = backend.array_module(x)
        xv = x if x.ndim == 0 or dim in (-1, x.ndim - 1) else xp.moveaxis(x, dim, -1)
        n = xv.shape[-1] if x.ndim else 1
        x2 = xp.ascontiguousarray(xv).reshape(-1, n)
        ov = None if out is None else (out if xv is x else xp.moveaxis(out, dim, -1))
        if ov is not None and xv.flags.c_contiguous and ov.flags.c_contiguous:  # x2 is a view of x
            y = K.softmax_forward(x2, log, out=ov.reshape(-1, n)).reshape(ov.shape)
        else:  # out of place (or x not contiguous: through a temporary)
            y = K.softmax_forward(x2, log).reshape(xv.shape)
            if ov is not None:
                ov[...] = y
        y = y if out is None else out  # saved whole, so the version check can see x's array
        ctx.save_for_backward(y)
        ctx.log, ctx.n, ctx.dim = log, n, (None if xv is x else dim)
        return y

    @staticmethod
    def backward(ctx, gy):
        (y,) = ctx.saved_tensors
        xp = backend.array_module(y)
        if ctx.dim is not None:
            y, gy = xp.moveaxis(y, ctx.dim, -1), xp.moveaxis(gy, ctx.dim, -1)
        dx = K.softmax_backward(xp.ascontiguousarray(gy).reshape(-1, ctx.n),
                           xp.ascontiguousarray(y).reshape(-1, ctx.n), ctx.log).reshape(y.shape)
        return dx if ctx.dim is None else xp.moveaxis(dx, -1, ctx.dim)

    @staticmethod
    def backward_graph(ctx, gy):
        """backward's formulas on the output as a tensor of the graph (its gradient reaches x through this node
        again), along the op's axis where it is (the in-place form's ``dim``); in float32 for 16-bit arrays, as
        the kernels."""
        y = ctx.graph_output(ctx.saved_tensors[0])
        if y.ndim == 0:  # one element: y is constant (1, or 0 for log_softmax)
            return gy * 0
        dim = -1 if ctx.dim is None else ctx.dim
        acc = acc_dtype(y.dtype)
        y, gy = y.to(acc), gy.to(acc)
        if ctx.log:
            return gy - y.exp() * gy.sum(dim, keepdim=True)
        return y * (gy - (gy * y).sum(dim, keepdim=True))


def softmax_last(x, log=False):
    """softmax (``log``: log_softmax) of tensor ``x`` over its last dimension; arguments unchecked."""
    return Softmax.apply(x, log=log)


def softmax_(x, dim, log=False):
    """softmax of tensor ``x`` along ``dim`` written into ``x`` (returned); arguments unchecked."""
    return Softmax.apply_("log_softmax_" if log else "softmax_", x, log=log, dim=dim)
