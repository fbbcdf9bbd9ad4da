"""Shape ops (reshape, transpose, squeeze ...) and concatenation; indexing is ops/indexing.py (re-exported here)."""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import backend
from ..autograd import Function
from ..kernels import (channels_last_3d_strided, channels_last_strided, is_channels_last, join,
                       to_channels_last_3d, to_layout)
from ..tensor import Tensor
from ._common import broadcast_shape, cast, dim_index, host_int, normalize_axis, promote, unbroadcast, unbroadcast_graph
from .linalg_common import dtype_name
from .indexing import GatherItem, GetItem, SetItem, accumulate, getitem, setitem  # noqa: F401 - shape's API
from ..backend import InputError, InputTypeError


def _xp(x):
    return backend.array_module(x)


class Reshape(Function):
    is_view = True

    @staticmethod
    def forward(ctx, x, shape):
        ctx.in_shape = x.shape
        return x.reshape(shape)

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.in_shape), None

    backward_graph = backward


class Permute(Function):
    is_view = True

    @staticmethod
    def forward(ctx, x, dims):
        ctx.dims = dims
        return x.transpose(dims)

    @staticmethod
    def backward(ctx, g):
        return g.transpose(tuple(np.argsort(ctx.dims))), None

    @staticmethod
    def backward_graph(ctx, g):
        return g.permute(tuple(int(d) for d in np.argsort(ctx.dims))), None


class Expand(Function):
    is_view = True
    write_back = None  # (its elements repeat: a write through it marks x instead, see _mark_viewed)

    @staticmethod
    def forward(ctx, x, shape):
        ctx.in_shape = x.shape
        out = _xp(x).broadcast_to(x, shape)
        if isinstance(out, np.ndarray) and x.flags.writeable:
            # NumPy's broadcast view is read-only; PyTorch's expanded view (as CuPy's) takes fills and indexed
            # writes, through to x (other in-place ops refuse it: autograd.refuse_internal_overlap)
            out = np.lib.stride_tricks.as_strided(x, out.shape, out.strides, writeable=True)
        return out

    @staticmethod
    def backward(ctx, g):
        return unbroadcast(g, ctx.in_shape), None

    @staticmethod
    def backward_graph(ctx, g):
        return unbroadcast_graph(g, ctx.in_shape), None


class memory_format:  # noqa: N801 - torch.memory_format
    """A memory layout of a tensor's elements, as PyTorch names them: :data:`contiguous_format` (C order),
    :data:`channels_last` (a 4-d (N, C, H, W) tensor stored as (N, H, W, C): the layout convolutions read without
    a repack), :data:`channels_last_3d` (a 5-d (N, C, D, H, W) tensor stored as (N, D, H, W, C): tensors take it and
    keep it where they are copied in their own layout, but the ops compute on it as on any strided tensor, and their
    results are C-contiguous, where PyTorch's keep it) and :data:`preserve_format` (whatever the tensor has)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"minifused.{self.name}"


contiguous_format, channels_last, channels_last_3d, preserve_format = (
    memory_format(n) for n in ("contiguous_format", "channels_last", "channels_last_3d", "preserve_format"))


def check_memory_format(op, fmt, allowed=(contiguous_format, channels_last, channels_last_3d, preserve_format)):
    """``fmt``, checked for ``op`` to be one of ``allowed``."""
    if not any(fmt is f for f in allowed):
        raise InputError(f"{op}: memory_format must be one of {', '.join(map(repr, allowed))}, got {fmt!r}")
    return fmt


def result_format(op, x, fmt):
    """The layout of ``op``'s new tensor like ``x`` under ``fmt``: ``preserve_format`` (PyTorch's default for clone
    and the ``*_like`` creators) keeps x's channels-last layout (4-d or 5-d), else C order; ``channels_last`` needs
    a 4-d x, ``channels_last_3d`` a 5-d one."""
    if check_memory_format(op, fmt) is preserve_format:
        if x.ndim == 4 and is_channels_last(x._data):
            return channels_last
        if x.ndim == 5 and not x._data.flags.c_contiguous and channels_last_3d_strided(x._data):
            return channels_last_3d
        return contiguous_format
    return _memory_format(op, x, fmt)


def _memory_format(op, x, fmt):
    """``fmt`` checked for ``op`` on tensor ``x``: C order or channels-last, the latter for a 4-d tensor (the 3-d
    form for a 5-d one)."""
    check_memory_format(op, fmt, (contiguous_format, channels_last, channels_last_3d))
    if fmt is channels_last and x.ndim != 4:
        raise RuntimeError(f"{op}: channels_last needs a 4-d (N, C, H, W) tensor, got {x.ndim}-d shape "
                           f"{tuple(x.shape)}")
    if fmt is channels_last_3d and x.ndim != 5:
        raise RuntimeError(f"{op}: required rank 5 tensor to use channels_last_3d format (N, C, D, H, W), got "
                           f"{x.ndim}-d shape {tuple(x.shape)}")
    return fmt


class Contiguous(Function):
    """x in C order, or (``channels_last``) in channels-last order (``three_d``: a 5-d x's); the gradient passes as
    it comes."""

    @staticmethod
    def forward(ctx, x, channels_last=False, three_d=False):
        return to_channels_last_3d(x) if three_d else to_layout(x, channels_last)

    @staticmethod
    def backward(ctx, g):
        return g

    backward_graph = backward


def _sizes(args, op):
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    if all(type(a) is int for a in args):  # the common case, without the abstract-class checks
        return args
    args = tuple(host_int(a) for a in args)
    if not all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in args):
        raise InputTypeError(f"{op}: sizes must be ints, got {args}")
    return tuple(int(a) for a in args)


def _by_keyword(op, args, name, value):
    """The sizes given either positionally (``args``) or as PyTorch's keyword ``name`` (``value``), not both."""
    if value is None:
        return args
    if args:
        raise InputTypeError(f"{op}() got multiple values for argument '{name}'")
    return (value,)


def reshape(input, *sizes, shape=None):
    """``input`` in ``shape`` (ints or one tuple; the keyword ``shape=`` as PyTorch's), a view where strides allow."""
    shape = _sizes(_by_keyword("reshape", sizes, "shape", shape), "reshape")
    if -1 not in shape and min(shape, default=0) >= 0 and math.prod(shape) == input._data.size:  # (the common case)
        return Reshape.apply(input, shape)
    known = [s for s in shape if s != -1]
    if shape.count(-1) > 1 or any(s < -1 for s in shape):
        raise InputError(f"reshape: invalid shape {shape}")
    total = math.prod(known)
    if (-1 in shape and (total == 0 or input.numel() % total)) or (-1 not in shape and total != input.numel()):
        raise InputError(f"reshape: shape {shape} is invalid for a tensor of shape {tuple(input.shape)} "
                         f"({input.numel()} elements)")
    return Reshape.apply(input, shape)  # (a new tensor even for x's own shape, as PyTorch's: ``y is not x``)


def view(x, *shape, dtype=None, size=None):
    """``reshape`` that never copies: as in PyTorch, a shape the strides cannot express raises. ``view(dtype)`` (or
    ``view(dtype=...)``) reads x's memory as another dtype instead (see :func:`view_dtype`); ``size=`` is the
    shape as a keyword, as PyTorch's."""
    if dtype is not None or size is not None or (len(shape) == 1 and backend.is_dtype(shape[0])):
        if dtype is not None and not shape and size is None:
            return view_dtype(x, dtype)
        if len(shape) == 1 and backend.is_dtype(shape[0]) and dtype is None and size is None:
            return view_dtype(x, shape[0])
        if size is None or shape or dtype is not None:
            kind = lambda a: "dtype" if backend.is_dtype(a) else type(a).__name__  # noqa: E731
            given = [kind(a) for a in shape] + [f"{k}={kind(v)}" for k, v in (("dtype", dtype), ("size", size))
                                                if v is not None]
            raise InputTypeError(f"view() received an invalid combination of arguments - got ({', '.join(given)}), "
                                 f"but expected one of: (dtype dtype) or (tuple of ints size)")
        shape = (size,)
    shape = _sizes(shape, "view")
    known = [s for s in shape if s != -1]
    total = math.prod(known)
    if (shape.count(-1) > 1 or any(s < -1 for s in shape) or (-1 in shape and (total == 0 or x.numel() % total))
            or (-1 not in shape and total != x.numel())):
        raise RuntimeError(f"view: shape {list(shape)} is invalid for input of size {x.numel()}")
    a = x._data
    if a.size > 1 and not a.flags.c_contiguous:
        r = a.reshape(shape)  # a view when the strides allow one, else a copy
        if not _xp(a).may_share_memory(r, a):
            raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one "
                               "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")
    return Reshape.apply(x, shape)  # (a view even of x's own shape: a tensor of its own, not x, as PyTorch's)


_VIEW_DTYPES = frozenset(backend.DTYPE_NAMES.values())


def view_dtype(x, dtype):
    """``x.view(dtype)``: x's memory read as ``dtype``, bit for bit, as PyTorch's. Another element size rescales
    the last dimension (x's last stride must be 1; a larger element must divide the last size, the storage offset
    and the other strides, counted in x's elements), PyTorch's messages otherwise. The result shares x's memory and
    its version counter (an in-place write through either bumps both, so a backward that saved the other refuses)
    but not its history: as PyTorch's, it never requires grad, and it is no autograd view of x (a write through it
    is not recorded on x, nor refused where x is a leaf that requires grad)."""
    if not backend.is_dtype(dtype) or dtype not in _VIEW_DTYPES:
        raise InputTypeError(f"view: expected a dtype (one of {', '.join(sorted({d.name for d in _VIEW_DTYPES}))}) "
                             f"or sizes, got {dtype!r}")
    a = x._data
    old, new = a.itemsize, dtype.itemsize
    shape = a.shape
    if old != new:
        what = f"to view {dtype_name(a.dtype)} as {dtype_name(dtype)} (different element sizes)"
        if a.ndim == 0:
            raise InputError(f"self.dim() cannot be 0 {what}")
        steps = x.stride()  # (PyTorch's steps, also where x has no elements)
        if new > old:
            ratio = new // old
            if shape[-1] % ratio:
                raise InputError(f"self.size(-1) must be divisible by {ratio} {what}, but got {shape[-1]}")
            offset = _byte_offset(a) // old
            if offset % ratio:
                raise InputError(f"self.storage_offset() must be divisible by {ratio} {what}, but got {offset}")
        if steps[-1] != 1:
            raise InputError(f"self.stride(-1) must be 1 {what}, but got {steps[-1]}")
        if new > old:
            for i, s in enumerate(steps[:-1]):
                if s % ratio:
                    raise InputError(f"self.stride({i}) must be divisible by {ratio} {what}, but got {s}")
        shape = shape[:-1] + (shape[-1] * old // new,)
    if a.size == 0:
        out = _xp(a).empty(shape, dtype)  # (no memory to share)
    elif old == new or a.flags.c_contiguous or isinstance(a, np.ndarray):
        out = a.view(dtype)
    else:  # (CuPy changes the element size of a C-contiguous array only: the same memory, the bytes' strides kept)
        out = _xp(a).ndarray(shape, dtype, a.data, a.strides[:-1] + (new,))
    t = Tensor._from_array(out, False)
    t._vc = x._vc
    return t


def _byte_offset(a):
    """How many bytes into its storage array ``a`` starts: into the NumPy array that owns its memory, or into
    CuPy's allocation."""
    if not isinstance(a, np.ndarray):
        return a.data.ptr - a.data.mem.ptr
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    return a.__array_interface__["data"][0] - root.__array_interface__["data"][0]


def flatten(input, start_dim=0, end_dim=-1):
    dims = input._data.shape
    n = len(dims)
    if n == 0:  # a scalar's dims are checked as one dimension's ([-1, 0]), as PyTorch's: flatten(x, 1) is an error
        normalize_axis("flatten", (start_dim, end_dim), 0)
        return reshape(input, 1)
    if type(start_dim) is int and type(end_dim) is int and -n <= start_dim < n and -n <= end_dim < n:
        s, e = start_dim % n, end_dim % n  # (the common case, without normalize_axis's checks)
    else:
        (s, e) = normalize_axis("flatten", (start_dim, end_dim), n)
    if s > e:
        raise InputError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    if s == e:  # nothing to flatten: the tensor itself, as PyTorch's
        return input
    return Reshape.apply(input, dims[:s] + (math.prod(dims[s:e + 1]),) + dims[e + 1:])


def permute(input, *order, dims=None):
    """``input`` with its dims reordered (ints or one tuple; the keyword ``dims=`` as PyTorch's), a view."""
    dims = normalize_axis("permute", _sizes(_by_keyword("permute", order, "dims", dims), "permute"), input.ndim)
    if sorted(dims) != list(range(input.ndim)):
        raise InputError(f"permute: dims {dims} are not a permutation of {input.ndim} dimensions")
    return Permute.apply(input, dims)


def transpose(input, dim0, dim1):
    if input.ndim < 2 and (dim0, dim1) in ((0, 0), (0, -1), (-1, 0), (-1, -1)):
        return input
    d0, d1 = normalize_axis("transpose", (dim0, dim1), input.ndim)
    dims = list(range(input.ndim))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return Permute.apply(input, tuple(dims))


def T(x):
    return x if x.ndim < 2 else Permute.apply(x, tuple(reversed(range(x.ndim))))


def unsqueeze(input, dim):
    d = dim_index("unsqueeze", host_int(dim), input.ndim + 1)  # (one dim: no tuple, unlike squeeze)
    return Reshape.apply(input, input.shape[:d] + (1,) + input.shape[d:])


def squeeze(input, dim=None):
    if dim is None:
        shape = tuple(s for s in input.shape if s != 1)
    else:
        axes = normalize_axis("squeeze", dim, input.ndim)
        if len(set(axes)) < len(axes):
            raise InputError(f"squeeze: dim {dim} names a dimension more than once")
        shape = tuple(s for i, s in enumerate(input.shape) if not (i in axes and s == 1))
    return Reshape.apply(input, shape)  # (a view also where nothing is squeezed, as PyTorch's)


def expand(x, *sizes, size=None):
    """``x`` broadcast to ``sizes`` (ints or one tuple; the keyword ``size=`` as PyTorch's), a view."""
    shape = _sizes(_by_keyword("expand", sizes, "size", size), "expand")
    lead = len(shape) - x.ndim
    if lead < 0:
        raise InputError(f"expand: cannot expand shape {tuple(x.shape)} to {shape}")
    if -1 in shape[:lead]:  # (-1 keeps an existing dim's size; a new leading dim has none)
        raise InputError(f"expand: the expanded size of the tensor (-1) isn't allowed in a leading, non-existing "
                         f"dimension {shape.index(-1)} (expanding shape {tuple(x.shape)} to {shape})")
    full = tuple(x.shape[i - lead] if s == -1 else s for i, s in enumerate(shape))
    if broadcast_shape("expand", x.shape, full) != full:
        raise InputError(f"expand: cannot expand shape {tuple(x.shape)} to {shape}")
    return Expand.apply(x, full)


def contiguous(x, memory_format=contiguous_format):
    """``x`` itself where its elements already lie in ``memory_format``'s order, else a copy that does."""
    fmt = _memory_format("contiguous", x, memory_format)
    if fmt is channels_last:
        return x if channels_last_strided(x._data) else Contiguous.apply(x, True)
    if fmt is channels_last_3d:
        return x if channels_last_3d_strided(x._data) else Contiguous.apply(x, True, True)
    if x._data.flags.c_contiguous:
        return x
    return Contiguous.apply(x)


def is_contiguous(x, memory_format=contiguous_format):
    """Whether ``x``'s elements lie in ``memory_format``'s order (both orders where they coincide, as a
    (N, 1, H, W) tensor's do); as PyTorch's, never channels-last for a tensor that is not 4-d (channels_last_3d: not
    5-d)."""
    check_memory_format("is_contiguous", memory_format, (contiguous_format, channels_last, channels_last_3d))
    if memory_format is channels_last:
        return x.ndim == 4 and channels_last_strided(x._data)
    if memory_format is channels_last_3d:
        return x.ndim == 5 and channels_last_3d_strided(x._data)
    return bool(x._data.flags.c_contiguous)


# ---------------------------------------------------------------- joining
def joined_layout(arrays):
    """Whether a join of ``arrays`` keeps their layout: PyTorch's joins come out channels-last where every input is,
    else C-contiguous (transposed inputs too, so ``.view`` works on the result)."""
    return all(is_channels_last(a) for a in arrays)


class Cat(Function):
    @staticmethod
    def forward(ctx, *arrays, axis):
        ctx.meta = (axis, tuple(a.shape[axis] for a in arrays))
        xp = _xp(arrays[0])
        shape = arrays[0].shape[:axis] + (sum(ctx.meta[1]),) + arrays[0].shape[axis + 1:]
        if joined_layout(arrays):
            n, c, h, w = shape
            out = xp.empty((n, h, w, c), arrays[0].dtype).transpose(0, 3, 1, 2)
        else:
            out = xp.empty(shape, arrays[0].dtype)
        return join.concatenate(arrays, axis, out)

    @staticmethod
    def backward(ctx, g):
        axis, sizes = ctx.meta
        return tuple(join.split(g, sizes, axis))

    @staticmethod
    def backward_graph(ctx, g):
        axis, sizes = ctx.meta
        ends = np.cumsum(sizes).tolist()
        return tuple(GetItem.apply(g, (slice(None),) * axis + (slice(end - n, end),)) for n, end in zip(sizes, ends))


class Stack(Function):
    @staticmethod
    def forward(ctx, *arrays, axis):
        ctx.axis = axis
        xp = _xp(arrays[0])
        if joined_layout(arrays):
            return xp.stack(arrays, axis=axis)
        one = arrays[0].shape[:axis] + (1,) + arrays[0].shape[axis:]
        shape = arrays[0].shape[:axis] + (len(arrays),) + arrays[0].shape[axis:]
        return join.concatenate([a.reshape(one) for a in arrays], axis, xp.empty(shape, arrays[0].dtype))

    @staticmethod
    def backward(ctx, g):
        shape = g.shape[:ctx.axis] + g.shape[ctx.axis + 1:]
        return tuple(piece.reshape(shape) for piece in join.split(g, (1,) * g.shape[ctx.axis], ctx.axis))

    @staticmethod
    def backward_graph(ctx, g):
        return tuple(GetItem.apply(g, (slice(None),) * ctx.axis + (i,)) for i in range(g.shape[ctx.axis]))


def _joinable(op, tensors):
    if isinstance(tensors, Tensor) or not hasattr(tensors, "__iter__"):
        raise InputTypeError(f"{op}: expected a sequence (list or tuple) of Tensors, got {type(tensors).__name__}")
    tensors = list(tensors)
    if not tensors:
        raise InputError(f"{op}: expected a non-empty sequence of tensors")
    if any(not isinstance(t, Tensor) for t in tensors):
        raise InputTypeError(f"{op}: expected a sequence of Tensors")
    first = tensors[0]._data
    if not all(backend.same_device(first, t._data) for t in tensors):
        raise RuntimeError(f"{op}: expected all tensors on the same device, got "
                           + " and ".join(sorted({str(t.device) for t in tensors})))
    if all(t._data.dtype == first.dtype for t in tensors):  # (the common case: nothing to promote)
        return tensors
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = promote(dtype, t.dtype)
    return [cast(t, dtype) for t in tensors]


def cat(tensors, dim=0, *, axis=None):
    """``tensors`` joined along ``dim`` (``axis`` as NumPy spells it, which PyTorch takes too)."""
    dim = dim if axis is None else axis
    tensors = given = _joinable("cat", tensors)
    if any(t.ndim != 1 for t in tensors):
        # PyTorch's legacy rule: an empty 1-d tensor (a torch.tensor([]) to append to) is skipped beside tensors
        # of other ranks, after taking part in the dtype (and, where it requires grad, in the graph: below)
        tensors = [t for t in tensors if t.shape != (0,)] or tensors[:1]
    for i, t in enumerate(tensors):
        if t.ndim == 0:
            raise RuntimeError(f"cat: zero-dimensional tensor (at position {i}) cannot be concatenated; use stack, "
                               f"or reshape it to (1,)")
    axis = dim_index("cat", dim, tensors[0].ndim)
    ref = tensors[0].shape
    for t in tensors:
        if t.ndim != len(ref) or any(a != b for i, (a, b) in enumerate(zip(t.shape, ref)) if i != axis):
            raise InputError(f"cat: shapes {tuple(ref)} and {tuple(t.shape)} differ outside dimension {axis}")
    if len(tensors) < len(given) and any(t.requires_grad for t in given):  # (its gradient: empty, not None)
        empty = ref[:axis] + (0,) + ref[axis + 1:]
        tensors = [Reshape.apply(t, empty) if t.ndim != len(ref) else t for t in given]
    return Cat.apply(*tensors, axis=axis)


def stack(tensors, dim=0, *, axis=None):
    """``tensors`` joined along a new ``dim`` (``axis`` as NumPy spells it, which PyTorch takes too)."""
    dim = dim if axis is None else axis
    tensors = _joinable("stack", tensors)
    ref = tensors[0].shape
    for t in tensors:
        if t.shape != ref:
            raise InputError(f"stack: all tensors must have the same shape, got {tuple(ref)} and {tuple(t.shape)}")
    axis = dim_index("stack", dim, len(ref) + 1)
    return Stack.apply(*tensors, axis=axis)
