"""Linear: one cuBLASLt GEMM with its bias and activation epilog, and its backward.

Forward runs DEFAULT / BIAS / RELU_BIAS / GELU_BIAS, or the AUX variants when a
gradient will be needed; the aux (ReLU bit-mask or GELU pre-activation) stays on
the context, so backward recomputes nothing. Backward:

* ``dz``: the gradient at the pre-activation. Normally one elementwise pass over
  the incoming gradient and the aux (``kernels.linear.activation_backward``).
* ``dW = dzᵀ·X`` and the bias gradient in the same GEMM (BGRADB);
  ``dX = dz·W`` only when the input requires grad.

**Cross-layer fusion.** When this Linear's input was produced by a Linear with an
activation (its output tensor's ``_ctx`` is a ``LinearFn`` context holding an
aux) and this Linear is the sole consumer of that tensor (``ctx.sole_consumer[0]``,
which the engine sets: no other consumer, no hook, no retained grad), this
Linear's dX GEMM runs with DRELU_BGRAD / DGELU_BGRAD on the producer's aux and
returns, for its input, a :class:`PreActivationGrad` (the producer's ``dz`` and
bias gradient). The engine hands that object to the producer untouched, whose
backward then does no elementwise pass and no reduction. The decision is made in
backward, where all of it is known; :data:`stats` records which path ran.
"""
from __future__ import annotations

import math
from collections import Counter

from .. import autograd, backend
from ..autograd import Function
from ..kernels import linear as K

#: Which paths ran, for tests and debugging (never read on the hot path):
#: ``forward``; ``dgrad_plain``; ``dgrad_fused_relu`` / ``dgrad_fused_gelu`` (this
#: Linear's dX GEMM carried the producer's activation backward); ``act_bwd_elementwise``
#: (a Linear+act ran its own mask / GELU' pass); ``act_bwd_from_consumer`` (it
#: received a :class:`PreActivationGrad` and skipped that pass and its bias reduction).
stats: Counter = Counter()


def reset_stats() -> None:
    stats.clear()


class PreActivationGrad:
    """The gradient a consumer Linear hands a producing Linear+activation: ``dz``,
    the gradient at the producer's pre-activation (already through the activation's
    backward), and ``db``, its sum over the batch (the producer's bias gradient).

    Only :class:`LinearFn`'s backward understands it. It is returned only to a sole
    consumer's producer, so the engine never adds it to anything.
    """

    __slots__ = ("dz", "db")

    def __init__(self, dz, db):
        self.dz, self.db = dz, db

    def __add__(self, other):  # pragma: no cover - the engine never does this
        raise TypeError("PreActivationGrad cannot be accumulated: it is handed only to a sole consumer")

    __radd__ = __add__


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
        need = autograd.is_grad_enabled() and any(ctx.needs_input_grad)
        y2, aux = K.linear_forward(x2, w, bias, activation, aux=need)
        if need:
            ctx.save_for_backward(x, weight)
            ctx.x2, ctx.w = x2, w
            ctx.activation, ctx.aux = activation, aux
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
            if producer is not None:
                dzp, dbp = K.linear_backward_data(dz, w, producer.activation, producer.aux)
                stats["dgrad_fused_" + producer.activation] += 1
                gx = PreActivationGrad(dzp, dbp)  # rows as the producer's (n, k) output
            else:
                dx, _ = K.linear_backward_data(dz, w)
                stats["dgrad_plain"] += 1
                shape = ctx.inputs[0].shape
                gx = dx if len(shape) == 2 else dx.reshape(shape)
        return gx, gw, gb


def _fusable_producer(ctx):
    """The context of the Linear+activation that produced this Linear's input, when
    this Linear is its output's sole consumer and its aux is still held; else None."""
    sole = getattr(ctx, "sole_consumer", None)
    if not sole or not sole[0]:
        return None
    t = ctx.inputs[0]
    p = t._ctx
    if p is None or p.fn is not LinearFn or p.freed or t._out_index != 0:
        return None
    pd = p.__dict__
    if pd.get("activation") is None or pd.get("aux") is None:
        return None
    if pd["aux"].shape[0] != ctx.x2.shape[0]:  # pragma: no cover - same rows by construction
        return None
    return p


def linear(x, weight, bias=None, activation=None):
    """The op (inputs already validated by ``functional.linear``)."""
    return LinearFn.apply(x, weight, bias, activation=activation)
