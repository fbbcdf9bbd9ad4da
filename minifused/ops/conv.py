"""Conv2d: one implicit-GEMM forward with bias and ReLU fused, and its backward.

Forward keeps the weight (saved, version-checked), the input (saved, or, where its GEMM packed it to
channels-last and the weight wants a gradient, that packed copy instead: the filter gradient then skips
packing it again, and the input's own array may go) and, with ``activation='relu'`` and a gradient to
come, the bit-packed ReLU mask the kernel's epilogue wrote: backward multiplies the
incoming gradient by it inside the same pass that repacks the gradient for its GEMMs, so it
recomputes nothing. Backward runs only the GEMMs whose inputs need a gradient.

Two convolutions of one tensor (a residual block's strided body and its projection shortcut) share that packed
copy: the second forward finds the first's while the tensor is the same array at the same version, so it packs
only its weights, and one copy, not two, waits for the backward.

A channels-last input stays so (PyTorch's rule: the output, and the input's gradient, take its layout); the
incoming gradient is brought to it. A channels-last weight (``Module.to(memory_format=channels_last)``) is the
channels-last forward's own packed form, and gets a channels-last gradient.
"""
from __future__ import annotations

import weakref

from .. import backend
from ..autograd import Function
from ..kernels import conv as K
from ..kernels import c_contiguous, is_channels_last, to_layout
from ..tensor import Tensor
from .elementwise import where, zero_tied
from .resample import PadFn


class _PackedCopies:
    """The packed copies forwards kept, by the tape tensor they were packed from: an entry holds the tensor's
    array and the packed copy weakly (it keeps neither alive) and is valid while the tensor still has that array
    at the version it had (an in-place change bumps it)."""

    def __init__(self):
        self._entries = {}  # id(array) -> (weakref to the array, version counter, version, weakref to the copy)

    def find(self, t):
        entry = self._entries.get(id(t._data))
        if entry is None:
            return None
        array, counter, version, copy = entry
        return copy() if array() is t._data and counter is t._vc and counter.version == version else None

    def add(self, t, packed):
        key = id(t._data)

        def drop(ref):
            if self._entries.get(key, (None,))[0] is ref:
                del self._entries[key]

        self._entries[key] = (weakref.ref(t._data, drop), t._vc, t._vc.version, weakref.ref(packed))


_packed_copies = _PackedCopies()


class Conv2dFn(Function):
    """``act(conv2d(x, weight) + bias)``; x (N, C, H, W), weight (K, C/groups, R, S), bias (K,) or None;
    ``source``: the tensor x came from, if the forward may share its packed copy (see the module's doc)."""

    @staticmethod
    def forward(ctx, x, weight, bias=None, *, stride, padding, dilation, groups, activation, source=None):
        cl, w_cl = is_channels_last(x), is_channels_last(weight)
        if not (cl or c_contiguous(x)):
            x = backend.array_module(x).ascontiguousarray(x)
        if not (c_contiguous(weight) or w_cl):  # a channels-last weight goes as it is
            weight = backend.array_module(weight).ascontiguousarray(weight)
        grad = ctx.recording
        keep = grad and ctx.needs_input_grad[1]
        share = keep and not cl and source is not None
        earlier = _packed_copies.find(source) if share else None
        y, mask, *packed = K.conv2d_forward(x, weight, bias, stride, padding, dilation, groups, activation,
                                            want_mask=grad and activation == "relu", keep_packed_x=keep,
                                            packed_x=earlier)
        packed = packed[0] if packed else None
        if share and packed is not None and packed is not earlier:
            _packed_copies.add(source, packed)
        ctx.geometry = (stride, padding, dilation, groups)
        ctx.mask, ctx.channels_last = mask, cl
        if packed is not None:  # the filter gradient reads x as the forward packed it: x itself may go
            ctx.x = packed
            ctx.save_for_backward(weight)
        else:
            ctx.save_for_backward(x, weight)
        # y comes in x's layout; a channels-last weight (a model made channels-last) makes it channels-last from a
        # contiguous x too, as PyTorch's convolutions pick it (backward brings dy back to x's layout)
        return K.relayout(y, True) if w_cl and not cl else y

    @staticmethod
    def backward(ctx, dy):
        saved = ctx.saved_tensors
        x, weight = (ctx.x, saved[0]) if len(saved) == 1 else saved
        stride, padding, dilation, groups = ctx.geometry
        needs = ctx.needs_input_grad
        dy = K.relayout(dy, ctx.channels_last)
        dx, dw, db = K.conv2d_backward(dy, x, weight, stride, padding, dilation, groups, ctx.mask,
                                       need_dx=needs[0], need_dw=needs[1], need_db=len(needs) > 2 and needs[2])
        return dx, dw, db

    @staticmethod
    def backward_graph(ctx, dy):
        """As :meth:`backward`, with recorded ops: the ReLU mask (a constant) on dy, then the data gradient as a
        transposed convolution of it by the weight, the filter gradient as :class:`Conv2dWeightGradFn` of x and
        it, the bias gradient as its sum; each differentiates again in all its operands."""
        saved = ctx.saved_tensors
        x, weight = (_unpacked(ctx.x), saved[0]) if len(saved) == 1 else saved
        needs = ctx.needs_input_grad
        geometry = dict(zip(("stride", "padding", "dilation", "groups"), ctx.geometry))
        w, xg = ctx.graph_input(1, weight), ctx.graph_input(0, x)
        if ctx.mask is not None:  # selected as backward's (an inf or NaN dy is cut where the ReLU cuts), and tied
            # to the inputs, as a separate relu's gradient to the convolution's output
            passes = Tensor._from_array(K.unpack_mask(ctx.mask, tuple(dy.shape)) != 0, False)
            bias = ctx.graph_input(2, weight[:, 0, 0, 0]) if len(needs) > 2 and needs[2] else None
            dy = zero_tied(where(passes, dy, 0), xg, w, bias)
        dx = ConvTranspose2dFn.apply(dy, w, out_shape=tuple(x.shape), **geometry) if needs[0] else None
        dw = Conv2dWeightGradFn.apply(xg, dy, w_shape=tuple(weight.shape), **geometry) if needs[1] else None
        return dx, dw, dy.sum((0, 2, 3)) if len(needs) > 2 and needs[2] else None


def _unpacked(packed):
    """x's values from the packed copy its forward kept in its place (as the GEMM read them: TF32-rounded where
    it ran TF32): x itself where it was channels-last, else its (groups, N, H, W, C / groups padded) pack."""
    a = packed.array
    if a.ndim == 4:
        return a
    n, c, h, w = packed.shape
    if packed.groups == 1:
        return a.reshape(n, h, w, -1)[..., :c].transpose(0, 3, 1, 2)
    g = packed.groups
    return a.reshape(g, n, h, w, -1)[..., :c // g].transpose(1, 0, 4, 2, 3).reshape(n, c, h, w)


def _zero_padded(x, rows):
    """``x`` (N, C, H, W) with zero rows and columns after its own up to ``rows`` (H', W') (copied as bits: any
    float dtype); ``x`` itself where it has that size."""
    if tuple(rows) == tuple(x.shape[2:]):
        return x
    xp = backend.array_module(x)
    bits = {2: "uint16", 4: "uint32", 8: "uint64"}[x.itemsize]
    padded = xp.zeros(x.shape[:2] + tuple(rows), bits)
    padded[:, :, :x.shape[2], :x.shape[3]] = x.view(bits)
    return padded.view(x.dtype)


def _cropped(t, shape):
    """Tensor ``t`` (N, C, H', W') cut to ``shape``'s (H, W), recorded (a negative constant padding)."""
    (h, w), (ht, wt) = shape[2:], t.shape[2:]
    return t if (ht, wt) == (h, w) else PadFn.apply(t, ((0, 0), (0, 0), (0, h - ht), (0, w - wt)), "constant", 0)


class Conv2dWeightGradFn(Function):
    """The filter gradient of a convolution as an op: ``(x, dy) -> dw`` for x convolved by a weight of ``w_shape``
    whose output's gradient is dy. It is bilinear: its gradients are the data gradient of dy by the incoming
    one (a transposed convolution) for x, and the convolution of x by it for dy, so a gradient of a convolution
    taken with create_graph differentiates again. A dy smaller than the convolution's output (a transposed
    convolution's output_padding of the stride or more) has zeros in the rows and columns it lacks."""

    @staticmethod
    def forward(ctx, x, dy, *, w_shape, stride, padding, dilation, groups):
        xp = backend.array_module(x)
        x, dy = xp.ascontiguousarray(x), xp.ascontiguousarray(dy)
        rows = tuple(K.out_size(x.shape[2 + i], w_shape[2 + i], stride[i], padding[i], dilation[i]) for i in (0, 1))
        ctx.geometry, ctx.rows = (stride, padding, dilation, groups), rows
        ctx.x_shape, ctx.dy_shape = x.shape, dy.shape
        ctx.save_for_backward(x if ctx.needs_input_grad[1] else None, dy if ctx.needs_input_grad[0] else None)
        return K.conv2d_backward_filter(_zero_padded(dy, rows), x, w_shape, stride, padding, dilation, groups)

    @staticmethod
    def backward(ctx, gw):
        x, dy = ctx.saved_tensors
        gw = backend.array_module(gw).ascontiguousarray(gw)
        gx = gdy = None
        if ctx.needs_input_grad[0]:
            gx = K.conv2d_backward_data(_zero_padded(dy, ctx.rows), gw, ctx.x_shape, *ctx.geometry)
        if ctx.needs_input_grad[1]:
            gdy = K.conv2d_forward(x, gw, None, *ctx.geometry)[0]
            h, w = ctx.dy_shape[2:]
            gdy = backend.array_module(gdy).ascontiguousarray(gdy[:, :, :h, :w])
        return gx, gdy

    @staticmethod
    def backward_graph(ctx, gw):
        x, dy = ctx.saved_tensors
        stride, padding, dilation, groups = ctx.geometry
        geometry = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
        gx = gdy = None
        if ctx.needs_input_grad[0]:
            gx = ConvTranspose2dFn.apply(ctx.graph_input(1, dy), gw, out_shape=ctx.x_shape, **geometry)
        if ctx.needs_input_grad[1]:
            gdy = _cropped(Conv2dFn.apply(ctx.graph_input(0, x), gw, None, activation=None, **geometry), ctx.dy_shape)
        return gx, gdy


def conv2d(x, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, activation=None):
    # only a tape tensor's copy is shared: an activation, which nothing but in-place ops (which bump it) changes
    return Conv2dFn.apply(x, weight, bias, stride=tuple(stride), padding=tuple(padding),
                          dilation=tuple(dilation), groups=int(groups), activation=activation,
                          source=x if x._ctx is not None else None)


class ConvTranspose2dFn(Function):
    """The adjoint of conv2d (its data gradient run forward): x (N, K, H, W), weight (K, C/groups, R, S) ->
    (N, C, H', W'); backward is the convolution of the gradient (dx) and the filter gradient with x in the
    role of the output gradient (dw)."""

    @staticmethod
    def forward(ctx, x, weight, *, out_shape, stride, padding, dilation, groups):
        xp = backend.array_module(x)
        # the kernels take C-contiguous arrays; dx and dw come back in their layouts (channels-last in, out), y
        # channels-last where x or the weight is, as PyTorch's convolutions pick it
        ctx.channels_last = is_channels_last(x), is_channels_last(weight)
        x, weight = K.relayout(x, False), xp.ascontiguousarray(weight)
        ctx.x_shape = x.shape
        # An output_padding of the stride or more (allowed below the dilation) makes out_shape's convolution
        # output, the shape the kernels take x in, larger than x: x is zero-padded to it (its extra rows and
        # columns add nothing), and backward crops dx back to x's shape.
        rows = tuple(K.out_size(out_shape[2 + i], weight.shape[2 + i], stride[i], padding[i], dilation[i])
                     for i in range(2))
        if rows != x.shape[2:]:
            bits = {2: "uint16", 4: "uint32", 8: "uint64"}[x.itemsize]  # (copied as bits: any float dtype)
            padded = xp.zeros(x.shape[:2] + rows, bits)
            padded[:, :, :x.shape[2], :x.shape[3]] = x.view(bits)
            x = padded.view(x.dtype)
        y = K.conv2d_backward_data(x, weight, out_shape, stride, padding, dilation, groups)
        ctx.geometry = (stride, padding, dilation, groups)
        ctx.save_for_backward(x, weight)
        return K.relayout(y, any(ctx.channels_last))  # (a channels-last weight too makes y so, as PyTorch's)

    @staticmethod
    def backward(ctx, gy):
        x, weight = ctx.saved_tensors
        stride, padding, dilation, groups = ctx.geometry
        gy = K.relayout(gy, False)
        need_x, need_w = ctx.needs_input_grad
        dx = None
        if need_x:
            dx = K.conv2d_forward(gy, weight, None, stride, padding, dilation, groups)[0]
            h, w = ctx.x_shape[2:]
            if dx.shape[2:] != (h, w):  # (x was padded: see forward)
                dx = backend.array_module(dx).ascontiguousarray(dx[:, :, :h, :w])
            dx = K.relayout(dx, ctx.channels_last[0])
        dw = K.conv2d_backward_filter(x, gy, weight.shape, stride, padding, dilation, groups) if need_w else None
        return dx, None if dw is None else to_layout(dw, ctx.channels_last[1])

    @staticmethod
    def backward_graph(ctx, gy):
        """As :meth:`backward`, with recorded ops: the convolution of gy by the weight, and
        :class:`Conv2dWeightGradFn` with gy as the convolution's input and x as its output's gradient."""
        x, weight = ctx.saved_tensors
        stride, padding, dilation, groups = ctx.geometry
        geometry = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
        need_x, need_w = ctx.needs_input_grad
        h, w = ctx.x_shape[2:]
        dx = dw = None
        if need_x:
            dx = _cropped(Conv2dFn.apply(gy, ctx.graph_input(1, weight), None, activation=None, **geometry),
                          ctx.x_shape)
        if need_w:
            dw = Conv2dWeightGradFn.apply(gy, ctx.graph_input(0, x[:, :, :h, :w]), w_shape=tuple(weight.shape),
                                          **geometry)
        return dx, dw


def conv_transpose2d(x, weight, out_shape, stride, padding, dilation, groups):
    return ConvTranspose2dFn.apply(x, weight, out_shape=tuple(out_shape), stride=tuple(stride),
                                   padding=tuple(padding), dilation=tuple(dilation), groups=int(groups))
