"""LayerNorm and RMSNorm over the trailing dimensions: one Function, the fused kernels; GroupNorm's on CUDA.

Forward keeps mean and rstd (fp32) on the context, so backward never
recomputes the statistics; backward asks the kernel only for the gradients
``needs_input_grad`` wants. ``backward_graph`` (create_graph=True) does recompute
them from x, with recorded ops: they are functions of x, whose terms the gradient
of the gradient needs. The in-place form (``Function.apply_``, ``out`` is
``x``) is for inference: its backward would need the x it overwrites, so it
refuses to be recorded (see ``functional.layer_norm_``).
"""
from __future__ import annotations

from .. import backend
from ..autograd import Function
from ..autograd.higher import differentiate
from ..kernels import acc_dtype, c_contiguous
from ..kernels import groupnorm as KG
from ..kernels import norm as K


def normalized(x, axes, eps, rms=False):
    """``x`` normalized over ``axes`` with recorded ops, as the kernels compute it (biased variance; ``rms``: no
    mean taken), in x's dtype: the rebuild a ``backward_graph`` differentiates. The statistics are functions of x
    here, so the gradient of the gradient carries their terms."""
    if not rms:
        x = x - x.mean(axes, keepdim=True)
    return x / ((x * x).mean(axes, keepdim=True) + eps).sqrt()


def _wide(t):
    """Tensor ``t`` (or None) in the dtype the kernels compute in (float32 for a 16-bit one)."""
    return t if t is None else t.to(acc_dtype(t.dtype))


def _flat(a, n):
    """``a`` as a C-contiguous (M, n) array: ``a`` itself when it already is one, else a view of it when it is
    contiguous, else a copy (the reshapes and copies skipped where they would change nothing: every LayerNorm of
    a step comes here)."""
    if not c_contiguous(a):
        a = backend.array_module(a).ascontiguousarray(a)
    return a if a.ndim == 2 and a.shape[1] == n else a.reshape(-1, n)


def _vector(a, n):
    """``a`` (a weight or bias of the normalized shape) as a C-contiguous vector of its ``n`` elements."""
    if a.ndim == 1 and c_contiguous(a):
        return a
    return backend.array_module(a).ascontiguousarray(a).reshape(n)


def _shaped(a, shape):
    """``a`` reshaped to ``shape`` (itself when it has that shape already)."""
    return a if a.shape == shape else a.reshape(shape)


class Norm(Function):
    """y = (x - mean) * rstd * weight + bias over the last ``n`` elements (``rms``: x * rstd * weight)."""

    @staticmethod
    def forward(ctx, x, weight, bias, *, n, eps, rms, out=None):
        if out is not None and ctx.recording:
            raise RuntimeError("norm: the in-place form cannot be recorded (backward needs the input it "
                               "overwrites)")
        x_c = x if c_contiguous(x) else backend.array_module(x).ascontiguousarray(x)
        w = None if weight is None else _vector(weight, n)
        b = None if bias is None else _vector(bias, n)
        direct = out is not None and c_contiguous(x) and c_contiguous(out)  # else via a temporary
        y, mean, rstd = K.norm_forward(_flat(x_c, n), w, b, eps, rms, out=_flat(out, n) if direct else None)
        ctx.save_for_backward(x_c, weight)
        ctx.mean, ctx.rstd, ctx.n, ctx.rms, ctx.eps = mean, rstd, n, rms, eps
        ctx.bias_like = None if bias is None else (bias.shape, bias.dtype)
        return out if direct else _shaped(y, x.shape)

    @staticmethod
    def backward(ctx, gy):
        x, weight = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad
        w = None if weight is None else _vector(weight, ctx.n)  # (dense: a strided view's elements are not)
        g = _flat(gy, ctx.n)
        dx, dw, db = K.norm_backward(g, _flat(x, ctx.n), w, ctx.mean, ctx.rstd, ctx.rms,
                                     need_dx=need_x, need_dw=need_w, need_db=need_b and w is not None)
        if need_b and w is None:  # a bias without a weight: the kernels' sums come with dw's; its own sum here
            shape, dtype = ctx.bias_like
            db = g.sum(axis=0, dtype=acc_dtype(g.dtype)).astype(dtype)
        return (None if dx is None else _shaped(dx, x.shape),
                None if dw is None else _shaped(dw, weight.shape),
                None if db is None else _shaped(db, ctx.bias_like[0]))

    @staticmethod
    def backward_graph(ctx, gy):
        """The forward rebuilt from recorded ops on x and the weight (the statistics recomputed from x), then
        differentiated; the bias's gradient is gy's sum over the rows."""
        x, weight = ctx.saved_tensors
        n, eps, rms = ctx.n, ctx.eps, ctx.rms

        def build(x, w):
            y = normalized(_wide(x).reshape(-1, n), -1, eps, rms)
            return y if w is None else y * _wide(w).reshape(n)

        g = _wide(gy).reshape(-1, n)
        dx, dw = differentiate(build, (ctx.graph_input(0, x), ctx.graph_input(1, weight)), (g,))
        db = g.sum(0).reshape(ctx.bias_like[0]) if ctx.needs_input_grad[2] else None
        return dx, dw, db


def norm(x, weight, bias, n, eps, rms=False):
    """LayerNorm (or RMSNorm) of tensor ``x`` over its last ``n`` elements; arguments unchecked."""
    return Norm.apply(x, weight, bias, n=n, eps=eps, rms=rms)


def norm_(x, weight, bias, n, eps, rms=False):
    """``norm`` written into ``x`` (returned); not recordable, arguments unchecked."""
    return Norm.apply_("rms_norm_" if rms else "layer_norm_", x, weight, bias, n=n, eps=eps, rms=rms)


class GroupNorm(Function):
    """GroupNorm of a CUDA array (N, C, ...) that ``KG.fuses``: one kernel each way; keeps the input (C-contiguous)
    and the float32 statistics, and asks the backward kernel only for the gradients wanted."""

    @staticmethod
    def forward(ctx, x, weight, bias, *, groups, eps):
        y, ctx.mean, ctx.rstd, xc = KG.group_norm_forward(x, weight, bias, groups, eps)
        ctx.save_for_backward(xc, weight)
        ctx.groups, ctx.bias_dtype, ctx.eps = groups, None if bias is None else bias.dtype, eps
        return y.reshape(x.shape)

    @staticmethod
    def backward(ctx, gy):
        xc, weight = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad
        return KG.group_norm_backward(gy, xc, weight, ctx.bias_dtype, ctx.mean, ctx.rstd, ctx.groups, need_x,
                                      need_w, need_b)

    @staticmethod
    def backward_graph(ctx, gy):
        """As Norm's: the forward rebuilt from recorded ops (in float32, as the kernels) and differentiated."""
        xc, weight = ctx.saved_tensors
        shape = (1, xc.shape[1]) + (1,) * (xc.ndim - 2)  # a channel's vector along x's dimension 1

        def build(x, w):
            x = _wide(x)
            y = normalized(x.reshape(x.shape[0], ctx.groups, -1), -1, ctx.eps).reshape(x.shape)
            return y if w is None else y * _wide(w).reshape(shape)

        g = _wide(gy)
        dx, dw = differentiate(build, (ctx.graph_input(0, xc), ctx.graph_input(1, weight)), (g,))
        db = g.sum(tuple(i for i in range(g.ndim) if i != 1)) if ctx.needs_input_grad[2] else None
        return dx, dw, db


def group_norm(x, weight, bias, groups, eps):
    """GroupNorm of tensor ``x`` where ``KG.fuses`` (arguments checked by the caller)."""
    return GroupNorm.apply(x, weight, bias, groups=groups, eps=eps)


def fused_group_norm(x, weight, bias, groups) -> bool:
    """Whether :func:`group_norm` takes these tensors."""
    return KG.fuses(x._data, None if weight is None else weight._data, None if bias is None else bias._data, groups)
