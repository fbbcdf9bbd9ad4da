"""LayerNorm and RMSNorm over the trailing dimensions: one Function, the fused kernels.

Forward keeps mean and rstd (fp32) on the context, so backward never
recomputes the statistics; backward asks the kernel only for the gradients
``needs_input_grad`` wants.
"""
from __future__ import annotations

from .. import backend
from ..autograd import Function
from ..kernels import norm as K


def _flat(a, n):
    """``a`` as a C-contiguous (M, n) array (a view when it already is contiguous)."""
    return backend.array_module(a).ascontiguousarray(a).reshape(-1, n)


class Norm(Function):
    """y = (x - mean) * rstd * weight + bias over the last ``n`` elements (``rms``: x * rstd * weight)."""

    @staticmethod
    def forward(ctx, x, weight, bias, *, n, eps, rms):
        xp = backend.array_module(x)
        x_c = xp.ascontiguousarray(x)
        w = None if weight is None else xp.ascontiguousarray(weight).reshape(n)
        b = None if bias is None else xp.ascontiguousarray(bias).reshape(n)
        y, mean, rstd = K.norm_fwd(x_c.reshape(-1, n), w, b, eps, rms)
        ctx.save_for_backward(x_c, weight)
        ctx.mean, ctx.rstd, ctx.n, ctx.rms = mean, rstd, n, rms
        return y.reshape(x.shape)

    @staticmethod
    def backward(ctx, gy):
        x, weight = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad
        w = None if weight is None else weight.reshape(ctx.n)
        dx, dw, db = K.norm_bwd(_flat(gy, ctx.n), x.reshape(-1, ctx.n), w, ctx.mean, ctx.rstd, ctx.rms,
                                need_dx=need_x, need_dw=need_w, need_db=need_b)
        return (None if dx is None else dx.reshape(x.shape),
                None if dw is None else dw.reshape(weight.shape),
                None if db is None else db.reshape(weight.shape))


def norm(x, weight, bias, n, eps, rms=False):
    """LayerNorm (or RMSNorm) of tensor ``x`` over its last ``n`` elements; arguments unchecked."""
    return Norm.apply(x, weight, bias, n=n, eps=eps, rms=rms)
