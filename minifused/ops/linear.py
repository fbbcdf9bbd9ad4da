"""Linear: one cuBLASLt GEMM with its bias and activation epilog, and its backward.

Forward runs DEFAULT / BIAS / RELU_BIAS / GELU_BIAS, or the AUX variants when a
gradient will be needed; the aux (ReLU bit-mask or GELU pre-activation) stays on
the context, so backward recomputes nothing. Backward:

* ``dz``: the gradient at the pre-activation. Normally one elementwise pass over
  the incoming gradient and the aux (``kernels.linear.activation_backward``).
* ``dW = dzᵀ·X`` and the bias gradient in the same GEMM (BGRADB);
  ``dX = dz·W`` only when the input requires grad.
* A layer of few outputs without activation (a classifier head) runs forward and backward on
  ``linear_narrow.cu`` instead, its backward (dW, the bias gradient and dX, with the producer's activation
  backward below) in one kernel (``kernels.linear.narrow_backward_applies``).

**Cross-layer fusion**, through the engine's handoff protocol (``autograd``): when this
Linear's input came from a Linear with an activation and the engine names that op as
this Linear's sole producer (``ctx.sole_producer(0)``: no other consumer, no hook, aux
still held), this Linear's dX GEMM runs with DRELU_BGRAD / DGELU_BGRAD on the producer's
aux and returns, for its input, a :class:`PreActivationGrad` (the producer's ``dz`` and
bias gradient), which the engine delivers to the producer untouched; the producer's
backward then does no elementwise pass and no reduction. :data:`stats` records which
path ran.
"""
from __future__ import annotations

import math
from collections import Counter

from .. import autograd, backend
from ..autograd import Function
from ..kernels import GELU_C, GELU_CUBIC
from ..kernels import linear as K
from ..tensor import Tensor
from .elementwise import where, zero_tied
from .matmul import MatMul
from .shape import reshape, transpose

#: Which paths ran, for tests and debugging (never read on the hot path):
#: ``forward``; ``backward_narrow`` (a layer of few outputs: dW, db and dX in one kernel); ``dgrad_plain``;
#: ``dgrad_fused_relu`` / ``dgrad_fused_gelu`` (this Linear's dX GEMM carried the producer's activation backward);
#: ``act_bwd_elementwise`` (a Linear+act ran its own mask / GELU' pass); ``act_bwd_from_consumer`` (it received a
#: :class:`PreActivationGrad` and skipped that pass and its bias reduction).
stats: Counter = Counter()


def reset_stats() -> None:
    stats.clear()


class PreActivationGrad(autograd.Handoff):
    """The handoff a consumer Linear gives its producing Linear+activation: ``dz``, the
    gradient at the producer's pre-activation (already through the activation's backward),
    and ``db``, its sum over the batch (the producer's bias gradient)."""

    __slots__ = ("dz", "db")

    def __init__(self, dz, db):
        self.dz, self.db = dz, db


def _rows(a, k):
    """``a`` as a 2-D (rows, k) matrix that cuBLASLt can read in place: unit stride along
    k and non-overlapping rows (a view where possible, else a contiguous copy)."""
    if a.ndim != 2:
        a = a.reshape(math.prod(a.shape[:-1]), k)  # (not -1: k may be 0)
    s0, s1 = a.strides
    if (s1 != a.itemsize and k > 1) or (a.shape[0] > 1 and s0 < k * a.itemsize):
        a = backend.array_module(a).ascontiguousarray(a)
    return a


class LinearFn(Function):
    """``y = act(x @ weight.T + bias)`` for x of shape (..., in) and weight (out, in)."""

    @staticmethod
    def forward(ctx, x, weight, bias=None, *, activation=None):
        k = weight.shape[1]
        x2 = _rows(x, k)
        w = _rows(weight, k)
        if bias is not None and bias.strides[0] != bias.itemsize and bias.shape[0] > 1:
            bias = backend.array_module(bias).ascontiguousarray(bias)
        need = ctx.recording
        y2, aux = K.linear_forward(x2, w, bias, activation, aux=need)
        if need:
            # checked against in-place changes: only what a wanted gradient reads (x for dW, the weight for dX), so
            # a frozen weight's input, or an input without grad's weight, may change before the backward
            ctx.save_for_backward(x if ctx.needs_input_grad[1] else None, weight if ctx.needs_input_grad[0] else None)
            ctx.x2, ctx.w, ctx.x_shape = x2, w, x.shape
            ctx.activation, ctx.aux = activation, aux
            if activation == "gelu":  # (a reference: a gradient of the gradient recomputes the pre-activation)
                ctx.bias = bias
        stats["forward"] += 1
        return y2 if x.ndim == 2 else y2.reshape(*x.shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx, g):
        ctx.saved_tensors  # raises if freed
        x2, w, act = ctx.x2, ctx.w, ctx.activation
        need_x, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        need_b = len(ctx.needs_input_grad) > 2 and ctx.needs_input_grad[2]
        m = w.shape[0]

        db = None
        if isinstance(g, PreActivationGrad):  # the consumer's GEMM did act' and Σ
            dz, db = g.dz, g.db
            stats["act_bwd_from_consumer"] += 1
        elif act is not None:
            dz = K.activation_backward(_rows(g, m), ctx.aux, act)
            stats["act_bwd_elementwise"] += 1
        else:
            dz = _rows(g, m)
        if dz.ndim != 2:
            dz = _rows(dz, m)

        if act is None and K.narrow_backward_applies(dz, w.shape[1]):  # few outputs: one kernel for all
            producer = _fusable_producer(ctx) if need_x else None
            gw, gb, dx, dbx = K.linear_backward_narrow(dz, x2, w, need_w, need_b, need_x,
                                                       *((producer.activation, producer.aux) if producer else ()))
            stats["backward_narrow"] += 1
            return _data_grad(ctx, producer, dx, dbx) if need_x else None, gw, gb

        gw = gb = gx = None
        if need_w:
            gw, db_w = K.linear_backward_weight(dz, x2, bias_grad=need_b and db is None)
            if db is None:
                db = db_w
        if need_b:
            if db is None:
                xp = backend.array_module(dz)
                db = dz.sum(axis=0, dtype=xp.float32 if dz.dtype != xp.float64 else xp.float64).astype(dz.dtype)
            gb = db
        if need_x:
            producer = _fusable_producer(ctx)
            dx, dbx = K.linear_backward_data(dz, w, *((producer.activation, producer.aux) if producer else ()))
            gx = _data_grad(ctx, producer, dx, dbx)
        return gx, gw, gb

    @staticmethod
    def backward_graph(ctx, g):
        """As :meth:`backward`, with recorded ops (never a handoff): ``dz = g * act'(z)``, then ``dz @ weight``,
        ``dzᵀ x`` and ``Σ dz``. ReLU's mask, unpacked from the aux, is a constant; GELU's derivative is taken
        of ``z = x @ weight.T + bias`` rebuilt from the graph's tensors, so a second derivative reaches all three
        (the aux, a saved array, would cut it there)."""
        ctx.saved_tensors  # raises if freed
        need_x, need_w = ctx.needs_input_grad[:2]
        need_b = len(ctx.needs_input_grad) > 2 and ctx.needs_input_grad[2]
        (n, k), m = ctx.x2.shape, ctx.w.shape[0]
        x = _reshaped(ctx.graph_input(0, ctx.x2.reshape(ctx.x_shape)), n, k)
        w = ctx.graph_input(1, ctx.w)
        dz = _reshaped(g, n, m)
        if ctx.activation == "relu":  # the mask selects, as backward's (an inf or NaN g is cut where it cuts)
            ones = backend.array_module(ctx.w).ones((n, m), g.dtype)
            passes = Tensor._from_array(K.activation_backward(ones, ctx.aux, "relu") != 0, False)
            dz = zero_tied(where(passes, dz, 0), x, w, ctx.graph_input(2, ctx.w[:, 0]) if need_b else None)
        elif ctx.activation == "gelu":
            z = MatMul.apply(x, transpose(w, 0, 1))
            if ctx.bias is not None:
                z = z + ctx.graph_input(2, ctx.bias)
            t = (GELU_C * (z + GELU_CUBIC * z * z * z)).tanh()
            dz = dz * (0.5 * (1 + t) + 0.5 * z * (1 - t * t) * GELU_C * (1 + 3 * GELU_CUBIC * z * z))
        gx = _reshaped(MatMul.apply(dz, w), *ctx.x_shape) if need_x else None
        gw = MatMul.apply(transpose(dz, 0, 1), x) if need_w else None
        return gx, gw, dz.sum(0) if need_b else None


def _reshaped(t, *shape):
    """``t`` reshaped to ``shape``, recorded only where the shape changes (a graph's backward of a 2-D Linear)."""
    return t if tuple(t.shape) == shape else reshape(t, *shape)


def _data_grad(ctx, producer, dx, dbx):
    """The input's gradient from the backward's ``dx``: for a fusable ``producer`` (its activation's backward
    done, ``dbx`` its bias gradient) the handoff, else ``dx`` in x's shape."""
    if producer is not None:
        stats["dgrad_fused_" + producer.activation] += 1
        return PreActivationGrad(dx, dbx)  # rows as the producer's (n, k) output
    stats["dgrad_plain"] += 1
    shape = ctx.x_shape
    return dx if len(shape) == 2 else dx.reshape(shape)


def _fusable_producer(ctx):
    """The context of the Linear+activation whose output is this Linear's input, when the engine
    names it this Linear's sole producer (see ``autograd.Context.sole_producer``); else None."""
    p = ctx.sole_producer(0)
    if p is None or p.fn is not LinearFn or p.activation is None:
        return None
    return p


def linear(x, weight, bias=None, activation=None):
    """The op (inputs already validated by ``functional.linear``)."""
    return LinearFn.apply(x, weight, bias, activation=activation)
