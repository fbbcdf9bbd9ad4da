"""Max and average pooling. Max pooling keeps, on the tape, each maximum's position inside its window
(uint8 for windows of up to 256 positions; see ``kernels.pool``) for its backward; asked for them, it
also returns them as PyTorch does (flat int64 ``h*W + w``, no gradient). A channels-last input gets a channels-last
output and gradient, as PyTorch's: max pooling's kernels (and average pooling's whose windows tile the input exactly)
run on it in place, others on C-contiguous copies (``relayout``: on the GPU the convolutions' tiled transpose, which a
copy of a transposed view reaches a fraction of the speed of)."""
from __future__ import annotations

from .. import autograd, backend
from ..autograd import Function
from ..kernels import is_channels_last, to_layout
from ..kernels import pool as K
from ..tensor import Tensor
from .elementwise import zero_linked
from .resample import LinearMap, take_planes


class MaxPool2dFn(Function):
    @staticmethod
    def forward(ctx, x, *, kernel, stride, padding, ceil_mode, dilation=(1, 1), found=None):
        """``found``, a dict if given, receives the window positions as ``found["indices"]``."""
        ctx.channels_last = is_channels_last(x)
        grad = autograd.is_grad_enabled() and ctx.needs_input_grad[0]
        y, idx = K.max_pool2d_forward(x, kernel, stride, padding, ceil_mode, want_indices=grad or found is not None,
                                      dilation=dilation)  # (y and idx in x's layout)
        if found is not None:
            found["indices"] = idx
        ctx.indices = idx
        ctx.x_shape = tuple(x.shape)
        ctx.geometry = (kernel, stride, padding, dilation)
        return y

    @staticmethod
    def backward(ctx, dy):
        return K.max_pool2d_backward(dy, ctx.indices, ctx.x_shape, *ctx.geometry, ctx.channels_last)

    @staticmethod
    def backward_graph(ctx, dy):
        """The backward's scatter to the maxima's positions, a constant of the graph (the gradient is linear in
        dy there): a :class:`LinearMap` whose adjoint gathers at those positions."""
        idx, x_shape, geometry, cl = ctx.indices, ctx.x_shape, ctx.geometry, ctx.channels_last
        flat = K.indices_to_flat(idx, x_shape, *geometry)
        gx = LinearMap.apply(dy, lambda g: K.max_pool2d_backward(g, idx, x_shape, *geometry, cl),
                             lambda g: to_layout(take_planes(g, flat), cl))
        return zero_linked(gx, ctx, 0, gx._data)  # (tied to x, as relu's gradient: PyTorch's reaches it)


class AvgPool2dFn(Function):
    @staticmethod
    def forward(ctx, x, *, kernel, stride, padding, ceil_mode, count_include_pad, divisor):
        ctx.channels_last = is_channels_last(x)
        ctx.x_shape = tuple(x.shape)
        ctx.geometry = (kernel, stride, padding)
        ctx.count_include_pad, ctx.divisor = count_include_pad, divisor
        if ctx.recording:  # (the forward again, for a gradient of the gradient)
            ctx.ceil_mode = ceil_mode
        return K.avg_pool2d_forward(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor)  # (x's layout)

    @staticmethod
    def backward(ctx, dy):
        return K.avg_pool2d_backward(dy, ctx.x_shape, *ctx.geometry, ctx.count_include_pad, ctx.divisor,
                                     ctx.channels_last)

    @staticmethod
    def backward_graph(ctx, dy):
        """The backward as a :class:`LinearMap` (average pooling is linear): its adjoint is the pooling itself."""
        x_shape, (kernel, stride, padding), cl = ctx.x_shape, ctx.geometry, ctx.channels_last
        ceil_mode, include, divisor = ctx.ceil_mode, ctx.count_include_pad, ctx.divisor
        return LinearMap.apply(
            dy, lambda g: to_layout(K.avg_pool2d_backward(_contiguous(g), x_shape, kernel, stride, padding, include,
                                                          divisor), cl),
            lambda g: to_layout(K.avg_pool2d_forward(_contiguous(g), kernel, stride, padding, ceil_mode, include,
                                                     divisor), cl))


def _contiguous(a):
    return backend.array_module(a).ascontiguousarray(a)


def max_pool2d(x, kernel, stride, padding, ceil_mode=False, return_indices=False, dilation=(1, 1)):
    """The pooled tensor, and with ``return_indices`` also each maximum's flat index in its input plane."""
    kernel, stride, padding, dilation = tuple(kernel), tuple(stride), tuple(padding), tuple(dilation)
    found = {} if return_indices else None
    y = MaxPool2dFn.apply(x, kernel=kernel, stride=stride, padding=padding, ceil_mode=bool(ceil_mode),
                          dilation=dilation, found=found)
    if not return_indices:
        return y
    flat = K.indices_to_flat(found["indices"], x.shape, kernel, stride, padding, dilation)
    return y, Tensor._from_array(to_layout(flat, is_channels_last(x._data)))  # (in the output's layout, as PyTorch's)


def avg_pool2d(x, kernel, stride, padding, ceil_mode=False, count_include_pad=True, divisor=0):
    """``divisor``: divisor_override (0: none)."""
    return AvgPool2dFn.apply(x, kernel=tuple(kernel), stride=tuple(stride), padding=tuple(padding),
                             ceil_mode=bool(ceil_mode), count_include_pad=bool(count_include_pad), divisor=int(divisor))
