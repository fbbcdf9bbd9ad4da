"""Arranging tensors, with PyTorch's names, signatures and errors: broadcasting (broadcast_to, broadcast_tensors),
views that reshape (ravel, unflatten, select, atleast_1d / 2d / 3d), splitting (tensor_split, hsplit, vsplit,
dsplit), joining (hstack, vstack / row_stack, dstack, column_stack, concat / concatenate), flipping and rotating
(fliplr, flipud, rot90), flat and triangular indices (take, tril_indices, triu_indices, unravel_index), index-set
products (cartesian_prod, combinations) and the out-of-place scatters select_scatter / slice_scatter.

Each is a composition of the ops of shape.py, movement.py and index.py, so gradients, the GPU path and the
views (where PyTorch returns one: ravel of a contiguous tensor, unflatten, select, broadcast_to, the splits,
atleast_*) come from them. Index tensors are int64."""
from __future__ import annotations

import itertools
import numbers

import numpy as np

from .. import backend
from ..tensor import Tensor
from ._common import host_int
from .elementwise import clone
from .index import IndexSelect, _in_bounds, index_select, meshgrid
from .movement import _ints, flip, movedim, swapaxes
from .reduce import dim_index as _dim
from .shape import cat, contiguous_format, expand, getitem, reshape, setitem, stack, transpose, unsqueeze
from ..backend import InputError, InputTypeError

__all__ = ["broadcast_to", "broadcast_tensors", "ravel", "unflatten", "select", "tensor_split", "hsplit", "vsplit",
           "dsplit", "hstack", "vstack", "row_stack", "dstack", "column_stack", "atleast_1d", "atleast_2d",
           "atleast_3d", "concat", "concatenate", "swapdims", "moveaxis", "fliplr", "flipud", "rot90", "take",
           "tril_indices", "triu_indices", "unravel_index", "cartesian_prod", "combinations", "select_scatter",
           "slice_scatter"]


def _int(op, name, v):
    v = host_int(v)  # (a 0-d integer tensor stands for its int, as in PyTorch)
    if not isinstance(v, numbers.Integral) or isinstance(v, bool):
        raise InputTypeError(f"{op}: {name} must be an int, got {type(v).__name__}")
    return int(v)


def _int_tuple(op, name, values):
    """A tuple / list of ints (PyTorch refuses a bare int where it wants a size)."""
    if not isinstance(values, (tuple, list)):
        raise InputTypeError(f"{op}: {name} must be a tuple of ints, got {type(values).__name__}")
    return _ints(op, name, values)


def _tensor(op, name, t):
    if not isinstance(t, Tensor):
        raise InputTypeError(f"{op}: expected {name} to be a Tensor, got {type(t).__name__}")
    return t


def _tensor_list(op, tensors):
    """The tensors of a joining op: a non-empty list or tuple of Tensors, as PyTorch's TensorList."""
    if not isinstance(tensors, (tuple, list)):
        raise InputTypeError(f"{op}: expected a tuple or list of Tensors, got {type(tensors).__name__}")
    if not tensors:
        raise RuntimeError(f"{op}: expects a non-empty TensorList")
    for i, t in enumerate(tensors):
        _tensor(op, f"tensors[{i}]", t)
    return list(tensors)


# ---------------------------------------------------------------- broadcasting
def broadcast_to(input, size):  # noqa: A002 - PyTorch's names
    """``input`` expanded to ``size`` (-1 keeps a dim's size), a view, as ``torch.broadcast_to``."""
    if isinstance(size, numbers.Integral) and not isinstance(size, bool):  # as Tensor.broadcast_to(3) takes it
        size = (size,)
    op, size, shape = "broadcast_to", _int_tuple("broadcast_to", "size", size), tuple(input.shape)
    lead = len(size) - len(shape)
    if lead < 0:
        raise RuntimeError(f"{op}: the target size {list(size)} has fewer dims than the tensor's {list(shape)}")
    for i, s in enumerate(size):
        n = shape[i - lead] if i >= lead else None
        if (s < 0 and (s != -1 or n is None)) or (n is not None and s != -1 and n != 1 and n != s):
            raise RuntimeError(f"{op}: the expanded size {s} does not fit the existing size "
                               f"{'(new leading dim)' if n is None else n} at dim {i}; target sizes {list(size)}, "
                               f"tensor sizes {list(shape)}")
    return expand(input, *size)


def broadcast_tensors(*tensors):
    """The tensors expanded to their common broadcast shape (views), as ``torch.broadcast_tensors``."""
    for i, t in enumerate(tensors):
        _tensor("broadcast_tensors", f"tensors[{i}]", t)
    try:
        shape = np.broadcast_shapes(*(t.shape for t in tensors))
    except ValueError:
        raise RuntimeError("broadcast_tensors: shapes " + ", ".join(str(tuple(t.shape)) for t in tensors)
                           + " cannot be broadcast together") from None
    return tuple(t if t.shape == shape else expand(t, *shape) for t in tensors)


# ---------------------------------------------------------------- views that reshape
def ravel(input):  # noqa: A002
    """``input`` flattened to 1-D: a view where its elements are contiguous, else a copy."""
    return reshape(input, -1)


def unflatten(input, dim, sizes):  # noqa: A002
    """Dim ``dim`` of ``input`` split into ``sizes`` (one of them may be -1, inferred), a view."""
    op = "unflatten"
    sizes = _int_tuple(op, "sizes", sizes)
    if not sizes:
        raise RuntimeError(f"{op}: sizes must be non-empty")
    if input.ndim == 0:
        raise RuntimeError(f"{op}: a 0-d tensor has no dimension to unflatten")
    axis = _dim(op, dim, input.ndim)
    n = input.shape[axis]
    if sizes.count(-1) > 1 or any(s < -1 for s in sizes):
        raise RuntimeError(f"{op}: sizes may hold one -1 (inferred) and no other negative size, got {list(sizes)}")
    known = int(np.prod([s for s in sizes if s != -1], dtype=np.int64))
    if (known != n) if -1 not in sizes else (known == 0 or n % known):
        raise RuntimeError(f"{op}: provided sizes {list(sizes)} don't multiply up to the size of dim {dim} ({n}) "
                           f"in the input tensor")
    sizes = tuple(n // known if s == -1 else s for s in sizes)
    return reshape(input, input.shape[:axis] + sizes + input.shape[axis + 1:])


def _selected(op, input, dim, index):  # noqa: A002
    """The basic index of ``input.select(dim, index)``, checked with PyTorch's errors."""
    if input.ndim == 0:
        raise IndexError(f"{op}: cannot be applied to a 0-d tensor")
    axis = _dim(op, dim, input.ndim)
    index, n = _int(op, "index", index), input.shape[axis]
    if not -n <= index < n:
        raise IndexError(f"{op}: index {index} out of range for tensor of size {list(input.shape)} at dimension "
                         f"{dim}")
    return (slice(None),) * axis + (index,)


def select(input, dim, index):  # noqa: A002
    """The slice of ``input`` at ``index`` along ``dim``, that dim removed (a view)."""
    return getitem(input, _selected("select", input, dim, index))


def _atleast(op, tensors, fix):
    """One tensor -> one result; several, or one list / tuple of them -> a tuple (PyTorch's atleast_* rule)."""
    seq = len(tensors) == 1 and isinstance(tensors[0], (tuple, list))
    items = tensors[0] if seq else tensors
    for i, t in enumerate(items):
        _tensor(op, f"tensors[{i}]", t)
    out = tuple(fix(t) for t in items)
    return out[0] if len(tensors) == 1 and not seq else out


def atleast_1d(*tensors):
    """A 0-d tensor as shape (1,); others as they are."""
    return _atleast("atleast_1d", tensors, lambda t: reshape(t, 1) if t.ndim == 0 else t)


def atleast_2d(*tensors):
    """0-d as (1, 1), 1-d (n,) as (1, n); others as they are."""
    return _atleast("atleast_2d", tensors, lambda t: reshape(t, 1, 1) if t.ndim == 0
                    else unsqueeze(t, 0) if t.ndim == 1 else t)


def atleast_3d(*tensors):
    """0-d as (1, 1, 1), 1-d (n,) as (1, n, 1), 2-d (m, n) as (m, n, 1); others as they are."""
    return _atleast("atleast_3d", tensors, lambda t: reshape(t, 1, 1, 1) if t.ndim == 0
                    else reshape(t, 1, -1, 1) if t.ndim == 1 else unsqueeze(t, 2) if t.ndim == 2 else t)


# ---------------------------------------------------------------- splitting
def _boundaries(op, spec, n):
    """The split points of ``tensor_split``'s indices_or_sections along a dim of size ``n``: sections put the
    remainder in the first pieces; indices are Python slice bounds (negative from the end, clipped)."""
    if isinstance(spec, Tensor):
        if spec.dtype != backend.int64:
            raise RuntimeError(f"{op}: expected tensor_indices_or_sections to have dtype int64, got {spec.dtype}")
        if spec.ndim > 1:
            raise RuntimeError(f"{op}: expected tensor_indices_or_sections to be a 0-d or 1-d tensor, got a "
                               f"{spec.ndim}-d tensor")
        values = backend.to_device(spec._data, backend.CPU)  # split points are sizes: the host needs them
        spec = int(values) if spec.ndim == 0 else [int(v) for v in values]
    if isinstance(spec, (tuple, list)):
        return [min(max(b + n if b < 0 else b, 0), n) for b in _ints(op, "indices", spec)]
    sections = _int(op, "indices_or_sections", spec)
    if sections <= 0:
        raise RuntimeError(f"{op}: number of sections must be larger than 0, got {sections}")
    q, r = divmod(n, sections)
    return np.cumsum([q + 1] * r + [q] * (sections - r))[:-1].tolist()


def tensor_split(input, indices_or_sections=None, dim=0, *, sections=None, indices=None):  # noqa: A002
    """``input`` cut along ``dim`` into ``sections`` near-equal pieces (an int: the first ``size % sections`` one
    larger), or at ``indices`` (a list, or a 0-d / 1-d int64 tensor), as ``torch.tensor_split``; views. Each piece
    is a slice of its own (not one ``split``'s outputs): as in PyTorch, a piece may be written in place, and the
    write reaches ``input`` and its gradient."""
    op = "tensor_split"
    given = [v for v in (indices_or_sections, sections, indices) if v is not None]
    if len(given) != 1:
        raise InputTypeError(f"{op}: expected exactly one of indices_or_sections, sections or indices")
    if input.ndim == 0:
        raise RuntimeError(f"{op}: expected at least a 1-dimensional tensor, got a 0-d tensor")
    axis = _dim(op, dim, input.ndim)
    n = input.shape[axis]
    starts = [0] + _boundaries(op, given[0], n)
    ends = starts[1:] + [n]
    return tuple(getitem(input, (slice(None),) * axis + (slice(s, max(s, e)),)) for s, e in zip(starts, ends))


def _split_along(op, input, specs, dim, least):  # noqa: A002
    """``specs``: (indices_or_sections, sections, indices), exactly one given (PyTorch's keywords are the last two)."""
    given = [v for v in specs if v is not None]
    if len(given) != 1:
        raise InputTypeError(f"{op}: expected exactly one of indices_or_sections, sections or indices")
    spec = given[0]
    if input.ndim < least:
        raise RuntimeError(f"{op}: requires a tensor with at least {least} dimension(s), got a {input.ndim}-d tensor")
    if isinstance(spec, numbers.Integral) and not isinstance(spec, bool):
        n = input.shape[dim]
        if spec == 0 or n % spec:
            raise RuntimeError(f"{op}: attempted to split along dimension {dim}, but the size of the dimension {n} "
                               f"is not divisible by the split_size {spec}")
    elif not isinstance(spec, (tuple, list)):
        raise InputTypeError(f"{op}: indices_or_sections must be an int or a list of ints, got {type(spec).__name__}")
    return tensor_split(input, spec, dim)


def hsplit(input, indices_or_sections=None, *, sections=None, indices=None):  # noqa: A002
    """``tensor_split`` along dim 1 (dim 0 of a 1-D tensor); an int must divide that dim."""
    return _split_along("hsplit", input, (indices_or_sections, sections, indices), 1 if input.ndim > 1 else 0, 1)


def vsplit(input, indices_or_sections=None, *, sections=None, indices=None):  # noqa: A002
    """``tensor_split`` along dim 0 of a tensor of at least 2 dims; an int must divide that dim."""
    return _split_along("vsplit", input, (indices_or_sections, sections, indices), 0, 2)


def dsplit(input, indices_or_sections=None, *, sections=None, indices=None):  # noqa: A002
    """``tensor_split`` along dim 2 of a tensor of at least 3 dims; an int must divide that dim."""
    return _split_along("dsplit", input, (indices_or_sections, sections, indices), 2, 3)


# ---------------------------------------------------------------- joining
def _join(op, tensors, dim):
    """``cat`` with PyTorch's RuntimeErrors for tensors that do not fit, naming ``op``."""
    ref = tensors[0]
    for i, t in enumerate(tensors[1:], 1):
        if t.ndim != ref.ndim:
            raise RuntimeError(f"{op}: tensors must have the same number of dimensions: got {ref.ndim} and {t.ndim}")
        bad = [d for d in range(t.ndim) if d != dim and t.shape[d] != ref.shape[d]]
        if bad:
            raise RuntimeError(f"{op}: sizes of tensors must match except in dimension {dim}; expected size "
                               f"{ref.shape[bad[0]]} but got size {t.shape[bad[0]]} for tensor number {i}")
    return cat(tensors, dim)


def hstack(tensors):
    """The tensors joined column-wise: along dim 1, or dim 0 where they are 1-D (0-d as 1-D)."""
    tensors = atleast_1d(_tensor_list("hstack", tensors))
    return _join("hstack", tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    """The tensors joined row-wise: along dim 0, after ``atleast_2d``."""
    return _join("vstack", atleast_2d(_tensor_list("vstack", tensors)), 0)


def row_stack(tensors):
    """Alias of :func:`vstack`."""
    return _join("row_stack", atleast_2d(_tensor_list("row_stack", tensors)), 0)


def dstack(tensors):
    """The tensors joined depth-wise: along dim 2, after ``atleast_3d``."""
    return _join("dstack", atleast_3d(_tensor_list("dstack", tensors)), 2)


def column_stack(tensors):
    """0-d and 1-D tensors as columns (n, 1), then all joined along dim 1."""
    tensors = _tensor_list("column_stack", tensors)
    return _join("column_stack", [reshape(t, -1, 1) if t.ndim <= 1 else t for t in tensors], 1)


def concat(tensors, dim=0, *, axis=None):
    """Alias of :func:`cat` (``axis`` as NumPy spells ``dim``)."""
    return cat(tensors, dim if axis is None else axis)


def concatenate(tensors, axis=0, *, dim=None):
    """Alias of :func:`cat`, with NumPy's ``axis`` (``dim`` taken too)."""
    return cat(tensors, axis if dim is None else dim)


def swapdims(input, dim0, dim1):  # noqa: A002
    """Alias of ``swapaxes`` / ``transpose``."""
    return swapaxes(input, dim0, dim1)


def moveaxis(input, source, destination):  # noqa: A002
    """Alias of ``movedim``."""
    return movedim(input, source, destination)


# ---------------------------------------------------------------- flipping, rotating
def fliplr(input):  # noqa: A002
    """``input`` reversed along dim 1 (left / right); at least 2-D. A copy, as PyTorch's."""
    if input.ndim < 2:
        raise RuntimeError(f"fliplr: input must be >= 2-d, got a {input.ndim}-d tensor")
    return flip(input, 1)


def flipud(input):  # noqa: A002
    """``input`` reversed along dim 0 (up / down); at least 1-D. A copy, as PyTorch's."""
    if input.ndim < 1:
        raise RuntimeError("flipud: input must be >= 1-d, got a 0-d tensor")
    return flip(input, 0)


def rot90(input, k=1, dims=(0, 1)):  # noqa: A002
    """``input`` rotated ``k`` quarter turns in the plane of ``dims``, from the first towards the second
    (negative ``k``: the other way). A copy, as PyTorch's."""
    op = "rot90"
    k, dims = _int(op, "k", k), _ints(op, "dims", dims)
    if len(dims) != 2:
        raise RuntimeError(f"{op}: expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"{op}: expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = (_dim(op, d, input.ndim) for d in dims)
    if d0 == d1:
        raise RuntimeError(f"{op}: expected rotation dims to be different, but got dim0 = {dims[0]} and "
                           f"dim1 = {dims[1]}")
    k %= 4
    if k == 1:
        return transpose(flip(input, d1), d0, d1)
    if k == 2:
        return flip(input, (d0, d1))
    if k == 3:
        return transpose(flip(input, d0), d0, d1)
    return clone(input, memory_format=contiguous_format)  # (PyTorch's: C order, as its rotations are)


# ---------------------------------------------------------------- flat and triangular indices
def take(input, index):  # noqa: A002
    """The elements of ``input`` (read as 1-D) at the int64 ``index`` (negative: from the end), in index's shape."""
    op = "take"
    _tensor(op, "index", index)
    if index.dtype != backend.int64:
        raise RuntimeError(f"{op}: expected a long (int64) tensor for index, got {index.dtype}")
    if index.device != input.device:
        raise RuntimeError(f"{op}: expected index on {input.device} like the input, got {index.device}")
    n = input.numel()
    idx = _in_bounds(op, index._data.reshape(-1), n, 0, IndexError)
    return reshape(IndexSelect.apply(reshape(input, -1), idx, 0), index.shape)


def _triangle_indices(op, row, col, offset, dtype, device, lower):
    row, col, offset = _int(op, "row", row), _int(op, "col", col), _int(op, "offset", offset)
    for name, v in (("row", row), ("col", col)):
        if v < 0:
            raise RuntimeError(f"{op}: {name} must be non-negative, got {v}")
    dtype = backend.as_dtype(dtype)
    if dtype not in (backend.int64, backend.int32):  # PyTorch's kernels exist for these two only
        raise NotImplementedError(f"{op}: not implemented for {dtype}; expected int64 or int32")
    dev = backend.device(device)
    with backend.on_device(dev):
        xp = backend.xp(dev)
        mask = xp.tri(row, col, offset if lower else offset - 1, dtype=bool)
        rows, cols = xp.nonzero(mask if lower else ~mask)  # row-major order, as PyTorch lists them
        return Tensor._from_array(xp.stack([rows, cols]).astype(dtype))


def tril_indices(row, col, offset=0, *, dtype=backend.int64, device=None):
    """The (2, N) coordinates of the lower triangle (on and below diagonal ``offset``) of a ``row`` x ``col``
    matrix, row by row."""
    return _triangle_indices("tril_indices", row, col, offset, dtype, device, True)


def triu_indices(row, col, offset=0, *, dtype=backend.int64, device=None):
    """The (2, N) coordinates of the upper triangle (on and above diagonal ``offset``) of a ``row`` x ``col``
    matrix, row by row."""
    return _triangle_indices("triu_indices", row, col, offset, dtype, device, False)


def unravel_index(indices, shape):
    """The coordinates in a tensor of ``shape`` of flat ``indices`` (an integer tensor): a tuple of int64 tensors,
    one per dim, each of indices' shape. As PyTorch's, an index is taken modulo ``shape``'s dims (floor
    division), so -1 is the last element."""
    op = "unravel_index"
    _tensor(op, "indices", indices)
    if not np.issubdtype(indices.dtype, np.integer):
        raise InputTypeError(f"{op}: expected 'indices' to be integer dtype, but got {indices.dtype}")
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in shape):
        raise InputTypeError(f"{op}: expected 'shape' to be an int or a sequence of ints, got {shape!r}")
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise InputError(f"{op}: 'shape' cannot have negative values, but got {shape}")
    flat = indices._data.astype(np.int64)
    if 0 in shape:
        if flat.size:
            raise InputError(f"{op}: 'shape' cannot have zero dimensions when 'indices' is non-empty, got {shape}")
        return tuple(Tensor._from_array(backend.copy(flat)) for _ in shape)
    strides = np.cumprod((shape[1:] + (1,))[::-1])[::-1].tolist()
    return tuple(Tensor._from_array((flat // st) % s) for st, s in zip(strides, shape))


# ---------------------------------------------------------------- products of index sets
def _vectors(op, tensors):
    for i, t in enumerate(tensors):
        _tensor(op, f"tensors[{i}]", t)
        if t.ndim != 1:
            raise RuntimeError(f"{op}: expected a 1-D tensor, got shape {list(t.shape)}")


def cartesian_prod(*tensors):
    """Every tuple of one element from each 1-D tensor, as rows of an (N, k) tensor (first tensor slowest);
    one tensor: itself."""
    op = "cartesian_prod"
    if not tensors:
        raise RuntimeError(f"{op}: expects at least one tensor")
    _vectors(op, tensors)
    if len({t.dtype for t in tensors}) > 1:
        raise RuntimeError(f"{op}: expects all tensors to have the same dtype, got "
                           + ", ".join(str(t.dtype) for t in tensors))
    if len(tensors) == 1:
        return tensors[0]
    return stack([reshape(g, -1) for g in meshgrid(*tensors, indexing="ij")], 1)


def combinations(input, r=2, with_replacement=False):  # noqa: A002
    """The length-``r`` combinations of a 1-D tensor's elements (as ``itertools.combinations``, or
    ``combinations_with_replacement``), as rows of a (C, r) tensor; ``r == 0``: an empty 1-D tensor."""
    op = "combinations"
    _vectors(op, (input,))
    r = _int(op, "r", r)
    if r < 0:
        raise RuntimeError(f"{op}: expect a non-negative number r, but got {r}")
    if r == 0:
        return getitem(input, slice(0, 0))
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = np.fromiter(itertools.chain.from_iterable(pick(range(input.shape[0]), r)), dtype=np.int64)
    idx = Tensor._from_array(backend.to_device(idx, input.device))
    return reshape(index_select(input, 0, idx), -1, r)


# ---------------------------------------------------------------- out-of-place scatters
def _scatter_into(op, input, src, index):  # noqa: A002
    """A copy of ``input`` with ``src`` written at the basic ``index``; src must have the slice's exact shape.
    Recorded (clone, then setitem), so both get gradients."""
    _tensor(op, "src", src)
    want = tuple(input._data[index].shape)
    if tuple(src.shape) != want:
        raise RuntimeError(f"{op}: expected src to have a size equal to the slice of input; src size = "
                           f"{list(src.shape)}, slice size = {list(want)}")
    if src.device != input.device:
        raise RuntimeError(f"{op}: expected src on {input.device} like the input, got {src.device}")
    out = clone(input)
    setitem(out, index, src)
    return out


def select_scatter(input, src, dim, index):  # noqa: A002
    """A copy of ``input`` with ``src`` embedded at ``index`` along ``dim`` (``src`` has the shape of
    ``input.select(dim, index)``)."""
    return _scatter_into("select_scatter", input, src, _selected("select_scatter", input, dim, index))


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):  # noqa: A002
    """A copy of ``input`` with ``src`` embedded at ``start:end:step`` along ``dim`` (Python slice bounds;
    ``src`` has the shape of that slice)."""
    op = "slice_scatter"
    if input.ndim == 0:
        raise IndexError(f"{op}: slice() cannot be applied to a 0-d tensor")
    axis = _dim(op, dim, input.ndim)
    start, end = (None if v is None else _int(op, name, v) for name, v in (("start", start), ("end", end)))
    if _int(op, "step", step) <= 0:
        raise RuntimeError(f"{op}: slice step must be positive, got {step}")
    return _scatter_into(op, input, src, (slice(None),) * axis + (slice(start, end, step),))


def _method(fn):
    return lambda self, *args, **kwargs: fn(self, *args, **kwargs)


METHODS = {name: _method(fn) for name, fn in {
    "broadcast_to": broadcast_to, "ravel": ravel, "unflatten": unflatten, "select": select,
    "tensor_split": tensor_split, "hsplit": hsplit, "vsplit": vsplit, "dsplit": dsplit, "fliplr": fliplr,
    "flipud": flipud, "rot90": rot90, "take": take, "select_scatter": select_scatter,
    "slice_scatter": slice_scatter}.items()}
