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
        cl = is_channels_last(x)
        if not (cl or c_contiguous(x)):
            x = backend.array_module(x).ascontiguousarray(x)
        if not (c_contiguous(weight) or is_channels_last(weight)):  # a channels-last weight goes as it is
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
        return y

    @staticmethod
    def backward(ctx, dy):
        saved = ctx.saved_tensors
        x, weight = (ctx.x, saved[0]) if len(saved) == 1 else saved
        stride, padding, dilation, groups = ctx.geometry
        needs = ctx.needs_input_grad
        dy = to_layout(dy, ctx.channels_last)
        dx, dw, db = K.conv2d_backward(dy, x, weight, stride, padding, dilation, groups, ctx.mask,
                                       need_dx=needs[0], need_dw=needs[1], need_db=len(needs) > 2 and needs[2])
        return dx, dw, db


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
        # the kernels take C-contiguous arrays; y, dx and dw come back in their layouts (channels-last in, out)
        ctx.channels_last = is_channels_last(x), is_channels_last(weight)
        x, weight = xp.ascontiguousarray(x), xp.ascontiguousarray(weight)
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
        return to_layout(y, ctx.channels_last[0])

    @staticmethod
    def backward(ctx, gy):
        x, weight = ctx.saved_tensors
        stride, padding, dilation, groups = ctx.geometry
        gy = backend.array_module(gy).ascontiguousarray(gy)
        need_x, need_w = ctx.needs_input_grad
        dx = None
        if need_x:
            dx = K.conv2d_forward(gy, weight, None, stride, padding, dilation, groups)[0]
            h, w = ctx.x_shape[2:]
            if dx.shape[2:] != (h, w):  # (x was padded: see forward)
                dx = backend.array_module(dx).ascontiguousarray(dx[:, :, :h, :w])
            dx = to_layout(dx, ctx.channels_last[0])
        dw = K.conv2d_backward_filter(x, gy, weight.shape, stride, padding, dilation, groups) if need_w else None
        return dx, None if dw is None else to_layout(dw, ctx.channels_last[1])


def conv_transpose2d(x, weight, out_shape, stride, padding, dilation, groups):
    return ConvTranspose2dFn.apply(x, weight, out_shape=tuple(out_shape), stride=tuple(stride),
                                   padding=tuple(padding), dilation=tuple(dilation), groups=int(groups))
