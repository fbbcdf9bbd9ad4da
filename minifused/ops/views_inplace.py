"""Storage-level views and the in-place view ops: ``as_strided`` (and its ``_`` / ``_copy`` / ``_scatter``
forms), ``storage_offset``, ``resize_`` / ``resize_as_``, ``new_empty_strided``, and ``unsqueeze_``,
``squeeze_``, ``t_``, ``transpose_``, ``swapaxes_`` / ``swapdims_``.

A tensor's storage is the memory of the array that owns its array's memory (the end of its ``base`` chain,
NumPy's or CuPy's), read as one run of elements: offsets and strides are counted in elements of that run, as
PyTorch counts them in its storage. An in-place view op re-points the tensor at the view's array: the tensor's
value before it becomes the view op's input (a stand-in holding its old node, as :meth:`Function.apply_` does)
and the tensor the view op's output, so a later backward reaches the old graph through the view's inverse
movement; on a leaf that requires grad it raises in grad mode, as PyTorch does."""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import autograd, backend
from ..autograd import Function
from ..autograd.tape import _stand_in
from ..tensor import Tensor
from .indexing import EmbedItem, GatherItem, accumulate
from ._common import normalize_axis
from .shape import (Permute, Reshape, _sizes, channels_last, channels_last_3d, check_memory_format, contiguous_format,
                    squeeze, unsqueeze)
from ..backend import InputTypeError


def _xp(a):
    return backend.array_module(a)


def _address(a):
    return a.data.ptr if backend.is_cuda_array(a) else a.__array_interface__["data"][0]


def _owner(a):
    """The array that owns ``a``'s memory: the end of its ``base`` chain, followed also through the wrapper that
    NumPy's ``as_strided`` / ``broadcast_to`` put between a view and the array it views (an expanded tensor's)."""
    root = a
    while True:
        b = root.base
        if not isinstance(b, type(a)):
            b = getattr(b, "base", None)
            if not isinstance(b, type(a)):
                return root
        root = b


def storage_of(a):
    """(the 1-d array of ``a``'s whole storage, ``a``'s offset in it), both in elements of ``a``'s dtype."""
    root = _owner(a)
    steps = [s // a.itemsize for s in root.strides]
    if root.dtype != a.dtype or any(s < 0 or s * a.itemsize != b for s, b in zip(steps, root.strides)):
        raise NotImplementedError(f"storage of an array whose memory is owned as dtype {root.dtype} with strides "
                                  f"{root.strides} (not a run of {a.dtype} elements)")
    span = 1 + sum((n - 1) * s for n, s in zip(root.shape, steps)) if root.size else 0
    flat = _xp(a).lib.stride_tricks.as_strided(root, (span,), (a.itemsize,))
    return flat, (_address(a) - _address(root)) // a.itemsize if a.size else 0


def _positions(xp, size, stride, offset):
    """The storage index of every element of the strided view (size, stride, offset), in its shape."""
    pos = xp.full(tuple(size), offset, np.int64)
    for d, (n, s) in enumerate(zip(size, stride)):
        pos += (xp.arange(n, dtype=np.int64) * s).reshape((n,) + (1,) * (len(size) - d - 1))
    return pos


def _geometry(op, size, stride, storage_offset, own, storage_len, itemsize):
    """(size, stride, offset) checked as PyTorch checks them against a storage of ``storage_len`` elements;
    ``own``: the offset where ``storage_offset`` is None."""
    size, stride = _sizes((size,), op), _sizes((stride,), op)
    if len(size) != len(stride):
        raise RuntimeError(f"{op}: mismatch in length of strides and shape ({len(stride)} strides, {len(size)} "
                           f"sizes)")
    if any(n < 0 for n in size):
        raise RuntimeError(f"{op}: sizes must be non-negative, got {list(size)}")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"{op}: Negative strides are not supported at the moment, got strides: {list(stride)}")
    if storage_offset is not None and (isinstance(storage_offset, bool)
                                       or not isinstance(storage_offset, numbers.Integral)):
        raise InputTypeError(f"{op}: storage_offset must be an int, got {storage_offset!r}")
    if storage_offset is not None and storage_offset < 0:
        raise RuntimeError(f"{op}: Tensor: invalid storage offset {storage_offset!r}")
    offset = own if storage_offset is None else int(storage_offset)
    need = offset + 1 + sum((n - 1) * s for n, s in zip(size, stride)) if math.prod(size) else 0
    if need > storage_len:
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, and "
                           f"itemsize {itemsize} requiring a storage size of {need * itemsize} are out of bounds "
                           f"for storage of size {storage_len * itemsize}")
    return size, stride, offset


def _strided(flat, size, stride, offset):
    item = flat.itemsize
    return _xp(flat).lib.stride_tricks.as_strided(flat[offset:], size, tuple(s * item for s in stride))


class AsStrided(Function):
    """The elements of x's storage at (size, stride, offset). The gradient: the output's gradient summed per
    storage element, read back at x's own elements (divided among x's elements sharing one, as PyTorch's)."""

    is_view = True
    write_back = None  # (its elements may repeat: a write through it marks x instead, see _mark_viewed)

    @staticmethod
    def forward(ctx, x, size, stride, offset):
        flat, own = storage_of(x)
        ctx.meta = (x.shape, tuple(s // x.itemsize for s in x.strides), own, flat.size, size, stride, offset)
        return _strided(flat, size, stride, offset)

    @staticmethod
    def backward(ctx, g):
        shape, steps, own, n, size, stride, offset = ctx.meta
        xp = _xp(g)
        total = accumulate((n,), g.dtype, (_positions(xp, size, stride, offset).reshape(-1),), g.reshape(-1))
        mine = _positions(xp, shape, steps, own)
        gx = total[mine].astype(g.dtype, copy=False)
        if _may_overlap(shape, steps):  # (an expanded x) decided on the host: xp.unique would sync the GPU
            count = accumulate((n,), np.float32, (mine.reshape(-1),), xp.ones(mine.size, np.float32))
            gx = (gx / count[mine]).astype(g.dtype, copy=False)
        return gx, None, None, None

    @staticmethod
    def backward_graph(ctx, g):
        shape, steps, own, n, size, stride, offset = ctx.meta
        xp = g._xp
        total = EmbedItem.apply(g.reshape(-1), (n,), (_positions(xp, size, stride, offset).reshape(-1),), True)
        mine = _positions(xp, shape, steps, own)
        gx = GatherItem.apply(total, (mine,))
        if _may_overlap(shape, steps):
            count = accumulate((n,), g.dtype, (mine.reshape(-1),), xp.ones(mine.size, g.dtype))
            gx = gx / Tensor._from_array(count[mine])
        return gx, None, None, None


def _may_overlap(shape, steps):
    """Whether two elements of the geometry (shape, steps) may share a storage element: PyTorch's conservative
    test (each stride, smallest first, past the reach of the smaller ones), from the sizes alone."""
    reach = 0
    for step, n in sorted((s, n) for s, n in zip(steps, shape) if n > 1):
        if step <= reach:
            return True
        reach += step * (n - 1)
    return False


def as_strided(input, size, stride, storage_offset=None):  # noqa: A002 - PyTorch's names
    """A view of ``input``'s storage with the given sizes and strides (in elements) from ``storage_offset``
    (default: input's own), as ``torch.as_strided``."""
    flat, own = storage_of(input._data)
    return AsStrided.apply(input, *_geometry("as_strided", size, stride, storage_offset, own, flat.size,
                                             input.element_size()))


def as_strided_copy(input, size, stride, storage_offset=None):  # noqa: A002
    """The values of :func:`as_strided` in a new contiguous tensor."""
    return as_strided(input, size, stride, storage_offset).clone(memory_format=contiguous_format)


class AsStridedScatter(Function):
    """A copy of x (x's layout kept, as PyTorch's clone) with src written at the strided positions of its
    storage; the gradient: x's without those positions, src's read at them."""

    @staticmethod
    def forward(ctx, x, src, size, stride, offset):
        out = _like(x, x.dtype)
        out[...] = x
        flat, _ = storage_of(out)
        _strided(flat, size, stride, offset)[...] = src
        ctx.meta = (size, stride, offset, x)
        return out

    @staticmethod
    def backward(ctx, g):
        size, stride, offset, x = ctx.meta
        gx = _like(x, g.dtype)
        gx[...] = g
        flat, _ = storage_of(gx)
        view = _strided(flat, size, stride, offset)
        gsrc = backend.copy(view)
        view[...] = 0
        return gx, gsrc, None, None, None

    @staticmethod
    def backward_graph(ctx, g):
        size, stride, offset, x = ctx.meta
        xp = g._xp
        where = _like(x, np.int64)  # each element's index in x, laid out as the forward's copy of x
        where[...] = xp.arange(x.size, dtype=np.int64).reshape(x.shape)
        written = backend.copy(_strided(storage_of(where)[0], size, stride, offset))
        gx = gsrc = None
        if ctx.needs_input_grad[0]:
            kept = xp.ones(x.size, g.dtype)
            kept[written.reshape(-1)] = 0
            gx = g * Tensor._from_array(kept.reshape(x.shape))
        if ctx.needs_input_grad[1]:
            gsrc = GatherItem.apply(g.reshape(-1), (written,))
        return gx, gsrc, None, None, None


def as_strided_scatter(input, src, size, stride, storage_offset=None):  # noqa: A002
    """``input`` with ``src`` embedded at ``input.as_strided(size, stride, storage_offset)``'s elements, as a
    new tensor (``torch.as_strided_scatter``); storage positions count from the new tensor's start."""
    if not isinstance(src, Tensor):
        raise InputTypeError(f"as_strided_scatter(): argument 'src' must be Tensor, not {type(src).__name__}")
    size, stride, offset = _geometry("as_strided_scatter", size, stride, storage_offset, 0, input.numel(),
                                     input.element_size())
    if tuple(src.shape) != tuple(size):
        raise RuntimeError(f"as_strided_scatter: expected src to have a size equal to the slice of self. src size = "
                           f"{list(src.shape)}, slice size = {list(size)}")
    return AsStridedScatter.apply(input, src.to(input.device, input.dtype), size, stride, offset)


def _like(a, dtype):
    """A new array of ``a``'s shape laid out as PyTorch's clone lays it out: a's strides where its elements are
    dense (a permuted array), else C order."""
    return _xp(a).empty_like(a, dtype=dtype, order="K" if _dense(a) else "C")


def _dense(a):
    """Whether ``a``'s elements fill its memory without gaps or overlaps (an ``empty_like`` keeps its strides)."""
    steps = sorted((s, n) for s, n in zip(a.strides, a.shape) if n != 1)
    want = a.itemsize
    for s, n in steps:
        if s != want:
            return False
        want *= n
    return True


def storage_offset(self):
    """The index of this tensor's first element in its storage (PyTorch's ``storage_offset``), counted in elements
    of this tensor's dtype also where the memory is owned as another dtype (a ``view(dtype)``, sliced)."""
    a = self._data
    return (_address(a) - _address(_owner(a))) // a.itemsize if a.size else 0


# ---------------------------------------------------------------- in-place view ops
def _refuse_grad_leaf(op, x):
    if x._requires_grad and x._ctx is None and autograd.is_grad_enabled():
        raise RuntimeError(f"{op}: a leaf Variable that requires grad is being used in an in-place operation.")


def _view_inplace(op, x, view, *args):
    """``x`` re-pointed at ``view(x, *args)``'s array (recorded as that view of x's old value), its version
    bumped, and returned."""
    _refuse_grad_leaf(op, x)
    if x._requires_grad and autograd.is_grad_enabled():
        out = view(_stand_in(x), *args)
        x._ctx, x._out_index = out._ctx, out._out_index
    else:
        with autograd.no_grad():
            out = view(x.detach(), *args)
    x._data = out._data
    return x._bump(op)


def unsqueeze_(self, dim):
    return _view_inplace("unsqueeze_", self, unsqueeze, dim)


def squeeze_(self, dim=None):
    shape = squeeze(self.detach(), dim).shape
    return _view_inplace("squeeze_", self, lambda t: Reshape.apply(t, shape))


def t_(self):
    if self.ndim > 2:
        raise RuntimeError(f"t_() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
    return _view_inplace("t_", self, lambda t: Permute.apply(t, tuple(reversed(range(t.ndim)))))


def _swap(op, dim0, dim1):
    """The view op of ``op``: ``t`` with dims ``dim0`` and ``dim1`` swapped (a 0-d or 1-d tensor as itself)."""
    def view(t):
        dims = list(range(t.ndim))
        if t.ndim or (dim0, dim1) not in ((0, 0), (0, -1), (-1, 0), (-1, -1)):
            a, b = normalize_axis(op, (dim0, dim1), t.ndim)
            dims[a], dims[b] = dims[b], dims[a]
        return Permute.apply(t, tuple(dims))
    return view


def transpose_(self, dim0, dim1):
    return _view_inplace("transpose_", self, _swap("transpose_", dim0, dim1))


def swapaxes_(self, axis0, axis1):
    return _view_inplace("swapaxes_", self, _swap("swapaxes_", axis0, axis1))


def swapdims_(self, dim0, dim1):
    return _view_inplace("swapdims_", self, _swap("swapdims_", dim0, dim1))


def as_strided_(self, size, stride, storage_offset=None):
    return _view_inplace("as_strided_", self, as_strided, size, stride, storage_offset)


# ---------------------------------------------------------------- resizing and strided creation
def _contiguous_steps(shape, fmt):
    if fmt is channels_last:
        n, c, h, w = shape
        return (h * w * c, 1, w * c, c)
    if fmt is channels_last_3d:
        n, c, d, h, w = shape
        return (d * h * w * c, 1, h * w * c, w * c, c)
    return tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))


def resize_(self, *sizes, size=None, memory_format=None):
    """This tensor given the shape ``sizes`` (or PyTorch's keyword ``size=``) in place, as PyTorch's ``resize_``:
    where the elements fit in its storage from its offset it becomes a contiguous view of them (sharing the
    memory); else a new storage holds the old one's elements and zeros after them. Refused on a tensor that
    requires grad."""
    if size is not None:
        if sizes:
            raise InputTypeError("resize_() got multiple values for argument 'size'")
        sizes = (size,)
    if self._requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    shape = _sizes(sizes, "resize_")
    if any(n < 0 for n in shape):
        raise RuntimeError(f"resize_: Trying to create tensor with negative dimension: {list(shape)}")
    fmt = contiguous_format if memory_format is None else check_memory_format(
        "resize_", memory_format, (contiguous_format, channels_last, channels_last_3d))
    if fmt is channels_last and len(shape) != 4:
        raise RuntimeError(f"resize_: required rank 4 tensor to use channels_last format, got {len(shape)}-d")
    if fmt is channels_last_3d and len(shape) != 5:
        raise RuntimeError(f"resize_: required rank 5 tensor to use channels_last_3d format, got {len(shape)}-d")
    flat, offset = storage_of(self._data)
    n = math.prod(shape)
    if offset + n > flat.size:
        xp = _xp(flat)
        with backend.on_device(self.device):
            grown = xp.zeros(offset + n, flat.dtype)
        grown[:flat.size] = flat
        flat = grown
    self._data = _strided(flat, shape, _contiguous_steps(shape, fmt), offset)
    return self._bump("resize_")


def resize_as_(self, the_template, *, memory_format=None):
    if not isinstance(the_template, Tensor):
        raise InputTypeError(f"resize_as_(): argument 'the_template' must be Tensor, not "
                             f"{type(the_template).__name__}")
    return resize_(self, the_template.shape, memory_format=memory_format)


def new_empty_strided(self, size, stride, *, dtype=None, device=None, requires_grad=False):
    """A new tensor (zeros) with the given sizes and strides, in this tensor's dtype and device unless given."""
    size, stride = _sizes((size,), "new_empty_strided"), _sizes((stride,), "new_empty_strided")
    if len(size) != len(stride) or any(n < 0 for n in size) or any(s < 0 for s in stride):
        raise RuntimeError(f"new_empty_strided: expected as many non-negative strides as sizes, got sizes "
                           f"{list(size)} and strides {list(stride)}")
    dev = backend.device(self.device if device is None else device)
    span = 1 + sum((n - 1) * s for n, s in zip(size, stride)) if math.prod(size) else 0
    with backend.on_device(dev):
        flat = backend.xp(dev).zeros(span, backend.as_dtype(self.dtype if dtype is None else dtype))
    out = Tensor._from_array(_strided(flat, size, stride, 0))
    return out.requires_grad_() if requires_grad else out


__all__ = ["as_strided", "as_strided_copy", "as_strided_scatter"]
METHODS = {name: globals()[name] for name in __all__ if name != "as_strided_copy"}
METHODS.update({name: globals()[name] for name in (
    "as_strided_", "storage_offset", "unsqueeze_", "squeeze_", "t_", "transpose_", "swapaxes_", "swapdims_",
    "resize_", "resize_as_", "new_empty_strided")})
