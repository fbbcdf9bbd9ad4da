"""BatchNorm (optionally with its ReLU): one Function over the fused kernels of ``kernels.batchnorm``.

The kernels take (N, C, ...) arrays as they come (no reshapes on the hot path), C-contiguous or channels-last: a
channels-last x stays so (y and dx come back channels-last; the gradient is brought to x's layout), anything else
is made C-contiguous. Forward keeps the per-channel mean and rstd and, with the ReLU, its per-channel factors on
the context (no mask: the backward recomputes the ReLU's decisions from x, which it keeps anyway), so the backward
never recomputes the statistics (``backward_graph``, for create_graph=True, does: see
:func:`_graph_grads`); the running statistics (and a module's batch counter) are raw arrays updated in place by the
forward's statistics pass.

A separate ReLU after a BatchNorm (``F.relu(self.bn(x))``, as models are written one op at a time) costs a pass over
the gradient in its backward. A recorded forward without the ReLU keeps the factors too (``relu_factors``; the same
kernel writes them), and when the ReLU's backward finds this BatchNorm its sole producer it hands over its gradient
(``ops.elementwise.ReluGrad``): the backward then applies the ReLU's decisions, recomputed from the factors as for the
fused ReLU, in its own pass. Those are the ReLU's own decisions but where a positive affine rounds to zero in a 16-bit
output (the ReLU's mask cuts it; the recomputation passes it), as with the fused ReLU. :data:`stats` counts it.
"""
from __future__ import annotations

from collections import Counter

from ..autograd import Context, Function
from ..autograd.higher import differentiate
from ..kernels import batchnorm as K
from ..kernels import is_channels_last, to_layout
from ..tensor import Tensor
from .conv import Conv2dFn
from .elementwise import ReluGrad, where, zero_tied
from .norm import _wide, normalized


#: ``relu_from_consumer``: backwards that applied a separate ReLU's decisions handed over to them (for tests).
stats: Counter = Counter()


class BatchNormFn(Function):
    @staticmethod
    def forward(ctx, x, weight, bias, *, running_mean, running_var, training, factor, eps, relu, count):
        x = to_layout(x, is_channels_last(x))
        keep = not relu and ctx.recording
        y, mean, rstd, factors = K.batch_norm_forward(x, weight, bias, running_mean, running_var, training, factor,
                                                      eps, relu, count, keep)
        ctx.save_for_backward(x, weight)
        ctx.mean, ctx.rstd, ctx.batch_stats, ctx.eps = mean, rstd, training, eps
        # the fused ReLU's factors, or those kept for a separate ReLU after it
        ctx.factors, ctx.relu_factors = (None, factors) if keep else (factors, None)
        # dw and db come in the parameters' dtype (weight's and bias's, one), which need not be x's: a bias alone
        # sets it too
        ctx.wdtype = next((p.dtype for p in (weight, bias) if p is not None), None)
        return y

    @staticmethod
    def backward(ctx, gy):
        x, weight = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad
        factors = ctx.factors
        if type(gy) is ReluGrad:  # the following ReLU's backward, handed over: its decisions applied here
            gy, factors = gy.g, ctx.relu_factors
            stats["relu_from_consumer"] += 1
        gy = to_layout(gy, is_channels_last(x))
        dx, dw, db = K.batch_norm_backward(gy, x, weight, ctx.mean, ctx.rstd, factors, ctx.batch_stats,
                                           need_dx=need_x, need_dw=need_w or need_b, wdtype=ctx.wdtype)
        return dx, dw if need_w else None, db if need_b else None

    @staticmethod
    def backward_graph(ctx, gy):
        """See :func:`_graph_grads`."""
        x, weight = ctx.saved_tensors
        bias = ctx.graph_input(2, ctx.rstd) if ctx.factors is not None else None  # (rstd: an array of its shape)
        return _graph_grads(ctx, gy, ctx.graph_input(0, x), ctx.graph_input(1, weight), bias)


def _graph_grads(ctx, gy, x, weight, bias=None):
    """BatchNormFn's gradients as tensors of the graph, for its input ``x``, ``weight`` and ``bias`` as graph
    tensors: the ReLU's decisions (a constant, recomputed as the backward does) applied to ``gy``, then the forward
    rebuilt from recorded ops and differentiated. In training the batch statistics are recomputed from x (the
    gradient of the gradient carries their terms); in evaluation the running ones are constants, as the forward's
    mean and rstd."""
    g = _wide(gy)
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)  # a channel's vector along x's dimension 1
    if ctx.factors is not None:
        saved = ctx.saved_tensors[0]
        nhwc = is_channels_last(saved)
        on = K._from3(K.relu_passes(K._as3(saved, nhwc), ctx.mean, ctx.factors), saved.shape, nhwc)
        # selected, as a separate relu's gradient (an inf or NaN gy is cut where the ReLU cuts), and tied to the
        # inputs as that one is to its input
        g = zero_tied(where(Tensor._from_array(on != 0, False), g, 0), x, weight, bias)

    def build(x, w):
        x = _wide(x)
        if ctx.batch_stats:
            y = normalized(x, axes, ctx.eps)
        else:
            mean, rstd = (Tensor._from_array(a.reshape(shape), False) for a in (ctx.mean, ctx.rstd))
            y = (x - mean) * rstd
        return y if w is None else y * _wide(w).reshape(shape)

    dx, dw = differentiate(build, (x, weight), (g,))
    return dx, dw, g.sum(axes) if ctx.needs_input_grad[2] else None


def batch_norm(x, weight, bias, running_mean, running_var, training, factor, eps, relu=False, count=None):
    """BatchNorm of tensor ``x`` (N, C, ...) with raw running-statistic arrays (or None) and, if given, the raw
    batch counter the forward advances with them; arguments unchecked."""
    return BatchNormFn.apply(x, weight, bias, running_mean=running_mean, running_var=running_var,
                             training=training, factor=factor, eps=eps, relu=relu, count=count)


class ConvBatchNormFn(Function):
    """A convolution and the BatchNorm of its output (with its ReLU) as one node of the tape: Conv2dFn's forward,
    then BatchNormFn's on the result, each with a context of its own, and their backwards in reverse. The same
    kernels, so the same numbers, as the two ops; one recording, one node of the backward walk and one tensor
    fewer, which a step bound by host time (a ResNet's at small batches) pays once per layer."""

    @staticmethod
    def forward(ctx, x, weight, bias, bn_weight, bn_bias, *, conv, norm):
        needs = ctx.needs_input_grad
        conv_ctx, norm_ctx = Context(needs[:3]), Context((any(needs[:3]), needs[3], needs[4]))
        y = BatchNormFn.forward(norm_ctx, Conv2dFn.forward(conv_ctx, x, weight, bias, **conv), bn_weight, bn_bias,
                                **norm)
        ctx.parts, ctx.relu_factors = (conv_ctx, norm_ctx), norm_ctx.relu_factors  # (BatchNormFn.backward takes it)
        # checked against in-place changes: what the convolution saved (the inputs it keeps) and BatchNorm's weight
        ctx.save_for_backward(*conv_ctx.saved, norm_ctx.saved[1])
        return y

    @staticmethod
    def backward(ctx, gy):
        conv_ctx, norm_ctx = ctx.parts
        dy, d_bn_weight, d_bn_bias = BatchNormFn.backward(norm_ctx, gy)
        dx, dw, db = Conv2dFn.backward(conv_ctx, dy) if dy is not None else (None, None, None)
        return dx, dw, db, d_bn_weight, d_bn_bias

    @staticmethod
    def backward_graph(ctx, gy):
        """The two ops' as on the tape: the convolution's part becomes a node of the graph (the producer of the
        BatchNorm's input, which the gradient of this gradient reaches), then BatchNormFn's and Conv2dFn's
        backward_graph in reverse."""
        conv_ctx, norm_ctx = ctx.parts
        run = getattr(Conv2dFn, "backward_graph", None)
        if run is None:
            raise NotImplementedError("ConvBatchNormFn: differentiating its gradient (create_graph=True) needs "
                                      "Conv2dFn's, which is not supported")
        y = norm_ctx.saved_tensors[0]
        node = ctx.__dict__.get("conv_node")
        if node is None:  # (once: a later walk through this node finds it made)
            node = ctx.conv_node = _conv_node(ctx, conv_ctx, y)
        bias = ctx.graph_input(4, norm_ctx.rstd) if norm_ctx.factors is not None else None
        dy, d_bn_weight, d_bn_bias = _graph_grads(norm_ctx, gy, node.graph_output(y),
                                                  ctx.graph_input(3, norm_ctx.saved_tensors[1]), bias)
        dx, dw, db = run(node, dy) if dy is not None else (None, None, None)
        return dx, dw, db, d_bn_weight, d_bn_bias


def _conv_node(ctx, conv_ctx, y):
    """The convolution's part of ``ctx`` (a ConvBatchNormFn node) as a Conv2dFn node of its own: the same saved
    arrays, in a context of its own, so that a walk without retain_graph, which frees each node it passes, frees
    the two apart (this node first leaves ConvBatchNormFn's own backward what it needs)."""
    node = Context(conv_ctx.needs_input_grad)
    node.saved, node.__dict__ = conv_ctx.saved, dict(conv_ctx.__dict__)
    node.fn, node.seq, node.inputs, node.out_meta = Conv2dFn, ctx.seq, ctx.inputs[:3], ((y.shape, y.dtype),)
    return node


def conv_batch_norm(x, weight, bias, bn_weight, bn_bias, stride, padding, dilation, groups, running_mean, running_var,
                    training, factor, eps, relu=False, count=None):
    """:func:`batch_norm` of ``ops.conv.conv2d(x, weight, bias, ...)`` as one op (:class:`ConvBatchNormFn`);
    arguments unchecked."""
    source = x if x._ctx is not None else None  # (as ops.conv.conv2d: a tape tensor's packed copy is shared)
    return ConvBatchNormFn.apply(x, weight, bias, bn_weight, bn_bias,
                                 conv=dict(stride=tuple(stride), padding=tuple(padding), dilation=tuple(dilation),
                                           groups=int(groups), activation=None, source=source),
                                 norm=dict(running_mean=running_mean, running_var=running_var, training=training,
                                           factor=factor, eps=eps, relu=relu, count=count))
