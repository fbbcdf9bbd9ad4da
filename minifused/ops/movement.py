"""Movement ops beyond the basic views: split / chunk / unbind / narrow (views, gradients into every
piece), repeat / tile, tril / triu, flip, roll, diag, movedim, and the ``*_as`` forms. One-dim arguments
take PyTorch's range [-ndim, ndim - 1], a 0-d tensor taking 0 and -1."""
from __future__ import annotations

import numbers

import numpy as np

from .. import backend
from ..autograd import Function
from ..tensor import Tensor
from ._common import cast, check_tensors, host_int
from .reduce import dim_index as _dim
from .elementwise import where
from .indexing import EmbedItem
from .shape import Cat, Stack, _by_keyword, expand, getitem, joined_layout, permute, reshape, transpose, view
from ..backend import InputTypeError


def _xp(x):
    return backend.array_module(x)


def _ints(op, what, values):
    """``values`` (an int or a sequence of ints) as a tuple of ints."""
    values = tuple(host_int(v) for v in (values if isinstance(values, (tuple, list)) else (values,)))
    if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in values):
        raise InputTypeError(f"{op}: {what} must be ints, got {values}")
    return tuple(int(v) for v in values)


def _int(op, what, value):
    """``value`` (an int or a 0-d integer tensor, not a sequence) as an int."""
    value = host_int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputTypeError(f"{op}: {what} must be an int, got {value!r}")
    return int(value)


def _dims(op, dims, ndim):
    axes = tuple(_dim(op, d, ndim) for d in _ints(op, "dims", dims))
    if len(set(axes)) != len(axes):
        raise RuntimeError(f"{op}: dims {dims} name a dimension more than once")
    return axes if ndim else ()


class Split(Function):
    """Consecutive pieces of ``x`` along an axis (views; for unbind each of size 1 and squeezed). The
    gradient lays the pieces' gradients back side by side (zeros for pieces that got none)."""

    is_view = True
    write_back = None  # (only the first piece would know its base: a write through any marks x, see _mark_viewed)

    @staticmethod
    def forward(ctx, x, axis, sizes, squeeze):
        ctx.meta = (axis, squeeze)
        pieces = _xp(x).split(x, np.cumsum(sizes)[:-1].tolist(), axis=axis)
        return tuple(p.squeeze(axis) if squeeze else p for p in pieces)

    @staticmethod
    def backward(ctx, *grads):
        axis, squeeze = ctx.meta
        xp = _xp(grads[0])
        return (xp.stack(grads, axis) if squeeze else xp.concatenate(grads, axis)), None, None, None

    @staticmethod
    def backward_graph(ctx, *grads):
        axis, squeeze = ctx.meta
        return (Stack if squeeze else Cat).apply(*grads, axis=axis), None, None, None


def _pieces(x, axis, sizes, squeeze=False):
    if not sizes:
        return ()
    return Split.apply(x, axis, tuple(sizes), squeeze)  # views of x (sharing its version counter)


def _at_least_1d(op, x):
    if x.ndim == 0:
        raise RuntimeError(f"{op}: expected a tensor of at least 1 dimension, got a 0-d tensor")


def split(tensor, split_size_or_sections, dim=0):
    """Pieces of ``split_size`` along ``dim`` (the last one smaller), or of the sizes in a list."""
    _at_least_1d("split", tensor)
    axis = _dim("split", dim, tensor.ndim)
    n = tensor.shape[axis]
    if isinstance(split_size_or_sections, (tuple, list)):
        sizes = _ints("split", "split sizes", split_size_or_sections)
        if any(s < 0 for s in sizes) or sum(sizes) != n:
            raise RuntimeError(f"split: split sizes must be non-negative and sum to the size {n} of dim {dim}, "
                               f"got {list(sizes)}")
        return _pieces(tensor, axis, sizes)
    size = _int("split", "split_size", split_size_or_sections)
    if size < 0 or (size == 0 and n):
        raise RuntimeError(f"split: split_size must be positive, got {size}")
    if n == 0:
        return _pieces(tensor, axis, [0])
    return _pieces(tensor, axis, [size] * (n // size) + ([n % size] if n % size else []))


def chunk(input, chunks, dim=0):
    """At most ``chunks`` pieces of ``ceil(size / chunks)`` along ``dim``, as ``torch.chunk``."""
    _at_least_1d("chunk", input)
    chunks = _int("chunk", "chunks", chunks)
    if chunks <= 0:
        raise RuntimeError(f"chunk: chunks must be greater than 0, got {chunks}")
    axis = _dim("chunk", dim, input.ndim)
    n = input.shape[axis]
    if n == 0:
        return _pieces(input, axis, [0] * chunks)
    return split(input, -(-n // chunks), axis)


def unbind(input, dim=0):
    """The slices of ``input`` along ``dim``, that dim removed."""
    if input.ndim == 0:
        raise IndexError("unbind: a 0-d tensor has no dimension to unbind")
    axis = _dim("unbind", dim, input.ndim)
    return _pieces(input, axis, [1] * input.shape[axis], squeeze=True)


def narrow(input, dim, start, length):
    """``length`` elements of ``dim`` from ``start`` (negative: from the end), a view. ``start`` and ``length`` may
    be 0-d integer tensors, as PyTorch's (``narrow(0, i, n)`` with ``i`` a computed index)."""
    _at_least_1d("narrow", input)
    axis = _dim("narrow", dim, input.ndim)
    if isinstance(start, Tensor) or isinstance(length, Tensor):
        for name, value in (("start", start), ("length", length)):
            if isinstance(value, Tensor) and (value.ndim or np.dtype(value.dtype).kind not in "iu"):
                raise RuntimeError(f"narrow: {name} must be a 0-dim integral Tensor, got {value.dtype} of shape "
                                   f"{tuple(value.shape)}")
        start, length = (int(v.item()) if isinstance(v, Tensor) else v for v in (start, length))
    start, length = _ints("narrow", "start and length", (start, length))
    n = input.shape[axis]
    if not -n <= start <= n:
        raise IndexError(f"narrow: start {start} is out of range for dim {dim} of size {n}")
    start = start + n if start < 0 else start
    if length < 0 or start + length > n:
        raise RuntimeError(f"narrow: start ({start}) + length ({length}) exceeds the size {n} of dim {dim}")
    return getitem(input, (slice(None),) * axis + (slice(start, start + length),))


def narrow_copy(x, dim, start, length):
    """:func:`narrow`, copied out (not a view)."""
    return narrow(x, dim, start, length).clone()


class Repeat(Function):
    @staticmethod
    def forward(ctx, x, repeats):
        shape = (1,) * (len(repeats) - x.ndim) + x.shape
        ctx.meta = (x.shape, shape, repeats)
        out = _xp(x).tile(x.reshape(shape), repeats)
        # (all-ones repeats keep x's strides; ascontiguousarray would make a 0-d result 1-d)
        return out if out.flags.c_contiguous else _xp(x).ascontiguousarray(out)

    @staticmethod
    def backward(ctx, g):
        in_shape, shape, repeats = ctx.meta
        interleaved = [n for pair in zip(repeats, shape) for n in pair]  # (r0, s0, r1, s1, ...)
        return g.reshape(interleaved).sum(axis=tuple(range(0, 2 * len(shape), 2))).reshape(in_shape), None

    @staticmethod
    def backward_graph(ctx, g):
        in_shape, shape, repeats = ctx.meta
        interleaved = [n for pair in zip(repeats, shape) for n in pair]
        return g.reshape(interleaved).sum(tuple(range(0, 2 * len(shape), 2))).reshape(in_shape), None


def repeat(x, *sizes, repeats=None):
    """``x`` repeated ``sizes[i]`` times along each dim (new leading dims where there are more sizes); the
    sizes as ints, one tuple or PyTorch's keyword ``repeats=``."""
    sizes = _by_keyword("repeat", sizes, "repeats", repeats)
    sizes = _ints("repeat", "repeats", sizes[0] if len(sizes) == 1 and isinstance(sizes[0], (tuple, list))
                  else sizes)
    if len(sizes) < x.ndim:
        raise RuntimeError(f"repeat: {len(sizes)} repeats for a {x.ndim}-d tensor; give at least one per dim")
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"repeat: repeats must be non-negative, got {sizes}")
    return Repeat.apply(x, sizes)


def tile(input, *sizes, dims=None):
    """As ``repeat``, ``dims`` padded with leading 1s when it is shorter than ``input``'s dims. The dims as one
    tuple, the keyword ``dims=`` or separate ints (``Tensor.tile(2, 1)``, as PyTorch's method takes them)."""
    sizes = _by_keyword("tile", sizes, "dims", dims)
    dims = _ints("tile", "dims", sizes[0] if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes)
    if any(s < 0 for s in dims):
        raise RuntimeError(f"tile: dims must be non-negative, got {dims}")
    return repeat(input, (1,) * (input.ndim - len(dims)) + dims)


def _like(op, other):
    """The tensor whose shape or dtype an ``*_as`` method takes (no shape-like stand-ins, as PyTorch's)."""
    if not isinstance(other, Tensor):
        raise InputTypeError(f"{op}(): argument 'other' (position 1) must be Tensor, not {type(other).__name__}")
    return other


def expand_as(x, other):
    return expand(x, *_like("expand_as", other).shape)


def view_as(x, other):
    return view(x, _like("view_as", other).shape)


def reshape_as(x, other):
    return reshape(x, _like("reshape_as", other).shape)


def type_as(x, other):
    return cast(x, _like("type_as", other).dtype)


class Masked(Function):
    """``x`` where a fixed boolean mask holds, else 0 (tril, triu); the gradient passes the same mask."""

    @staticmethod
    def forward(ctx, x, mask, out=None):
        ctx.mask = mask
        return backend.where(mask, x, x.dtype.type(0))

    @staticmethod
    def backward(ctx, g):
        return backend.where(ctx.mask, g, g.dtype.type(0)), None

    @staticmethod
    def backward_graph(ctx, g):
        return where(Tensor._from_array(ctx.mask), g, 0), None  # (selected, as backward's)


def _triangle(op, x, diagonal):
    if x.ndim < 2:
        raise RuntimeError(f"{op}: expected a tensor of at least 2 dimensions, got a {x.ndim}-d tensor")
    k = _int(op, "diagonal", diagonal)
    rows, cols = x.shape[-2:]
    lower = x._xp.tri(rows, cols, k if op.startswith("tril") else k - 1, dtype=bool)
    keep = lower if op.startswith("tril") else ~lower
    return Masked.apply_(op, x, keep) if op.endswith("_") else Masked.apply(x, keep)


def tril(input, diagonal=0):
    """The lower triangle of the last two dims (on and below ``diagonal``), the rest 0."""
    return _triangle("tril", input, diagonal)


def triu(input, diagonal=0):
    """The upper triangle of the last two dims (on and above ``diagonal``), the rest 0."""
    return _triangle("triu", input, diagonal)


def tril_(x, diagonal=0):
    """:func:`tril` in place."""
    return _triangle("tril_", x, diagonal)


def triu_(x, diagonal=0):
    """:func:`triu` in place."""
    return _triangle("triu_", x, diagonal)


def _copy_in_order(a):
    """A dense copy of ``a`` whose strides keep ``a``'s order (PyTorch's ``empty_like`` with preserve_format, as its
    flip writes into): a transposed or channels-last input gives a transposed or channels-last copy."""
    order = sorted(range(a.ndim), key=lambda d: -abs(a.strides[d]))  # outermost first (stable for ties)
    if order == list(range(a.ndim)) or any(s == 0 and n > 1 for s, n in zip(a.strides, a.shape)):
        # (an expanded input's copy is C-contiguous, as PyTorch's)
        return backend.copy(a)
    return backend.copy(a.transpose(order)).transpose(np.argsort(order))


class Flip(Function):
    """A copy, as torch.flip, laid out as the input (so ``rot90``, a flip then a transpose, of a transposed
    input is C-contiguous, as PyTorch's)."""

    @staticmethod
    def forward(ctx, x, axes):
        ctx.axes = axes
        return _copy_in_order(_xp(x).flip(x, axes) if axes else x)

    @staticmethod
    def backward(ctx, g):
        return (_xp(g).flip(g, ctx.axes) if ctx.axes else g), None

    @staticmethod
    def backward_graph(ctx, g):
        return (Flip.apply(g, ctx.axes) if ctx.axes else g), None


def flip(input, *dims, **kw):
    """``input`` reversed along ``dims`` (a tuple, ints: ``input.flip(0, 1)``, or the keyword ``dims=``)."""
    if kw:
        if set(kw) != {"dims"} or dims:
            raise InputTypeError(f"flip: expected dims as positional ints, a tuple, or dims=, got {sorted(kw)}")
        dims = (kw["dims"],)
    dims = dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
    return Flip.apply(input, _dims("flip", dims, input.ndim))


class Roll(Function):
    """PyTorch's roll joins slices (a ``cat``): channels-last stays channels-last, any other layout comes out
    C-contiguous (NumPy's and CuPy's roll would keep a transposed one)."""

    @staticmethod
    def forward(ctx, x, shifts, axes):
        ctx.meta = (shifts, axes)
        out = _xp(x).roll(x, shifts, axes)
        return out if out.flags.c_contiguous or joined_layout((x,)) else _xp(x).ascontiguousarray(out)

    @staticmethod
    def backward(ctx, g):
        shifts, axes = ctx.meta
        back = -shifts if axes is None else tuple(-s for s in shifts)
        return _xp(g).roll(g, back, axes), None, None

    @staticmethod
    def backward_graph(ctx, g):
        shifts, axes = ctx.meta
        return Roll.apply(g, -shifts if axes is None else tuple(-s for s in shifts), axes), None, None


def roll(input, shifts, dims=None):
    """Elements shifted along ``dims`` (wrapping around); without ``dims`` over the flattened tensor."""
    shifts = _ints("roll", "shifts", shifts)
    if dims is None or (isinstance(dims, (tuple, list)) and not dims):  # (PyTorch's dims=() is no dims too)
        if len(shifts) != 1:
            raise RuntimeError(f"roll: without dims, shifts must be one int, got {shifts}")
        if input.ndim == 0:
            return Flip.apply(input, ())
        return Roll.apply(input, shifts[0], None)
    dims = _ints("roll", "dims", dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"roll: shifts and dims must have the same length, got {len(shifts)} and {len(dims)}")
    axes = tuple(_dim("roll", d, input.ndim) for d in dims)
    if input.ndim == 0:
        return Flip.apply(input, ())
    return Roll.apply(input, shifts, axes)


class Diag(Function):
    """A 1-D tensor onto the ``k``-th diagonal of a square matrix, or a matrix's ``k``-th diagonal out."""

    @staticmethod
    def forward(ctx, x, k):
        ctx.meta = (x.shape, k)
        xp = _xp(x)
        return xp.diag(x, k) if x.ndim == 1 else backend.copy(xp.diagonal(x, k))

    @staticmethod
    def backward(ctx, g):
        shape, k = ctx.meta
        xp = _xp(g)
        if len(shape) == 1:
            return backend.copy(xp.diagonal(g, k)), None
        out = xp.zeros(shape, g.dtype)
        i = xp.arange(g.shape[0])
        out[i + max(-k, 0), i + max(k, 0)] = g
        return out, None

    @staticmethod
    def backward_graph(ctx, g):
        shape, k = ctx.meta
        if len(shape) == 1:
            return Diag.apply(g, k), None
        i = g._xp.arange(g.shape[0])
        return EmbedItem.apply(g, shape, (i + max(-k, 0), i + max(k, 0)), True), None


def diag(input, diagonal=0):
    """1-D input: the square matrix with it on the ``diagonal``-th diagonal; 2-D: that diagonal."""
    if input.ndim not in (1, 2):
        raise RuntimeError(f"diag: expected a 1-D or 2-D tensor, got a {input.ndim}-d tensor")
    k = _int("diag", "diagonal", diagonal)
    return Diag.apply(input, k)


def movedim(input, source, destination):
    """Dims ``source`` moved to positions ``destination``; the others keep their order."""
    src, dst = _dims("movedim", source, input.ndim), _dims("movedim", destination, input.ndim)
    if len(_ints("movedim", "source", source)) != len(_ints("movedim", "destination", destination)):
        raise RuntimeError(f"movedim: source and destination must name as many dims, got {source} and "
                           f"{destination}")
    if input.ndim == 0:
        return input
    rest = iter(d for d in range(input.ndim) if d not in src)
    placed = dict(zip(dst, src))
    return permute(input, *[placed[i] if i in placed else next(rest) for i in range(input.ndim)])


def swapaxes(input, axis0, axis1):
    return transpose(input, axis0, axis1)


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The ``n``-th forward difference along ``dim`` (``prepend`` / ``append`` joined first), as ``torch.diff``:
    empty where ``n`` reaches the size; of bools, their xor."""
    from .shape import cat

    n = host_int(n)
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise InputTypeError(f"diff(): argument 'n' must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError(f"diff: order must be non-negative, got {n!r}")
    if input.ndim == 0:
        raise RuntimeError("diff: diff expects input to be at least one-dimensional")
    axis = _dim("diff", dim, input.ndim)
    check_tensors("diff", **{k: v for k, v in (("prepend", prepend), ("append", append)) if v is not None})
    parts = [t for t in (prepend, input, append) if t is not None]
    if len(parts) > 1:
        input = cat([t if t.ndim == input.ndim else expand(reshape(t, *([1] * input.ndim)), *input.shape[:axis], 1,
                                                   *input.shape[axis + 1:]) for t in parts], axis)
    for _ in range(int(n)):
        length = input.shape[axis]
        if length == 0:  # (an order at or past the size leaves an empty tensor, as PyTorch's)
            break
        later, earlier = narrow(input, axis, 1, length - 1), narrow(input, axis, 0, length - 1)
        input = (later != earlier) if input.dtype == backend.bool_ else later - earlier  # bools: PyTorch's xor
    return input


class UnfoldWindows(Function):
    """The windows of ``size`` elements every ``step`` along ``axis`` of x as a new last dim: a view of x (by
    strides, as PyTorch's: writes through it reach x). The gradient: each window's added back at its elements
    (overlapping windows sum)."""

    is_view = True
    write_back = None  # (overlapping windows: a write through them marks x instead, see _mark_viewed)

    @staticmethod
    def forward(ctx, x, axis, size, step):
        windows = (x.shape[axis] - size) // step + 1
        shape = x.shape[:axis] + (windows,) + x.shape[axis + 1:] + (size,)
        strides = x.strides[:axis] + (x.strides[axis] * step,) + x.strides[axis + 1:] + (x.strides[axis],)
        ctx.meta = (x.shape, x.dtype, axis, size, step, windows)
        if isinstance(x, np.ndarray):  # (NumPy's strided view is read-only unless asked; PyTorch's takes writes)
            return np.lib.stride_tricks.as_strided(x, shape, strides, writeable=x.flags.writeable)
        return backend.array_module(x).lib.stride_tricks.as_strided(x, shape, strides)

    @staticmethod
    def backward(ctx, g):
        from .index import _along
        from .indexing import accumulate

        shape, dtype, axis, size, step, windows = ctx.meta
        xp = backend.array_module(g)
        idx = backend.to_device((np.arange(windows)[:, None] * step + np.arange(size)[None, :]).reshape(-1),
                                backend.device_of(g))
        picked = xp.moveaxis(g, -1, axis + 1).reshape(shape[:axis] + (windows * size,) + shape[axis + 1:])
        return accumulate(shape, dtype, _along(axis, idx, len(shape)), picked), None, None, None

    @staticmethod
    def backward_graph(ctx, g):
        from .index import _along

        shape, _, axis, size, step, windows = ctx.meta
        idx = backend.to_device((np.arange(windows)[:, None] * step + np.arange(size)[None, :]).reshape(-1),
                                g.device)
        dims = list(range(g.ndim - 1))
        dims.insert(axis + 1, g.ndim - 1)  # each window's elements after its index, as x lays them
        picked = g.permute(dims).reshape(shape[:axis] + (windows * size,) + shape[axis + 1:])
        return EmbedItem.apply(picked, shape, _along(axis, idx, len(shape)), True), None, None, None


def unfold(x, dimension, size, step):
    """The windows of ``size`` elements every ``step`` along ``dimension``, as a new last dimension
    (``Tensor.unfold``): a view of x, as PyTorch's."""
    axis = _dim("unfold", dimension, x.ndim)
    n = x.shape[axis] if x.ndim else 1
    size, step = host_int(size), host_int(step)
    for name, v in (("size", size), ("step", step)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise InputTypeError(f"unfold: {name} must be an int, got {v!r}")
        if v < (0 if name == "size" else 1):
            raise RuntimeError(f"unfold: {name} must be {'>= 0' if name == 'size' else 'positive'}, got {v!r}")
    if size > n:
        raise RuntimeError(f"unfold: maximum size for tensor at dimension {axis} is {n} but size is {size}")
    if x.ndim == 0:  # (PyTorch's: the one window, of size 0 or 1, without a dim for the windows)
        return reshape(UnfoldWindows.apply(reshape(x, 1), 0, int(size), int(step)), int(size))
    return UnfoldWindows.apply(x, axis, int(size), int(step))
