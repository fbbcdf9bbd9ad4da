"""Tensor methods and functions PyTorch code still reached for: the legacy ``Tensor.new``, ``split_with_sizes``,
``unique_consecutive``, ``put`` / ``put_``, ``index_reduce`` / ``index_reduce_``, ``diagonal_scatter``, the
complex-number spellings on real tensors (``real``, ``conj`` ... as PyTorch answers them for a real dtype),
``angle``, ``adjoint``, the layout and backend queries (``layout``, ``is_sparse`` ..., all a dense strided
tensor's answers) and ``to_dense``, ``dim_order``, ``output_nr``, the cpu-only element callbacks ``apply_`` /
``map_`` / ``map2_``, ``record_stream`` and ``share_memory_`` / ``is_shared``."""
from __future__ import annotations

import numbers
import weakref

import numpy as np

from .. import backend
from ..autograd import Function
from ..tensor import Tensor
from .creation import multinomial as _multinomial, new_empty, tensor as _new_tensor
from .diagonals import Diagonal, _diagonal_dims, _diagonal_view
from .elementwise import _zeros_graph, cast
from .index import _in_bounds, index_put
from .logic import nonzero
from .movement import chunk, split
from .scatter_reductions import scatter_reduce
from .shape import expand, reshape, transpose
from .sorting import _check_empty_dims
from .special_math import recorded_into
from ..backend import InputTypeError


def _xp(a):
    return backend.array_module(a)


def _tensor(op, name, t):
    if not isinstance(t, Tensor):
        raise InputTypeError(f"{op}(): argument '{name}' must be Tensor, not {type(t).__name__}")
    return t


def new(self, *args, device=None):
    """The legacy ``Tensor.new``: no argument, an empty 1-d tensor; ints or a tuple of them (``x.new(x.shape)``:
    a shape is a tuple here, PyTorch's ``torch.Size``), an uninitialized (zero) tensor of that shape; a list or
    an array, a tensor of its values; a tensor of the same dtype, that tensor's data (shared). Always in this
    tensor's dtype, on its device unless ``device`` is given."""
    dev = self.device if device is None else backend.device(device)
    if len(args) == 1 and isinstance(args[0], Tensor):
        if args[0].dtype != self.dtype or args[0].device != dev:
            raise InputTypeError(f"new(): expected a tensor of dtype {self.dtype} on {dev}, got {args[0].dtype} on "
                                 f"{args[0].device}")
        return Tensor._from_array(args[0]._data)
    sizes = args[0] if len(args) == 1 and isinstance(args[0], tuple) else args
    if all(isinstance(n, numbers.Integral) and not isinstance(n, bool) for n in sizes):
        return new_empty(self, *(sizes or (0,)), device=dev).zero_()
    if len(args) != 1:
        raise InputTypeError(f"new(): expected sizes (ints), a sequence of values or a tensor, got {args!r}")
    return _new_tensor(args[0], dtype=self.dtype, device=dev)


def split_with_sizes(input, split_sizes, dim=0):  # noqa: A002 - PyTorch's names
    """Views of ``input`` along ``dim`` of the lengths ``split_sizes``, which must add up to its size there."""
    if not isinstance(split_sizes, (tuple, list)):
        raise InputTypeError(f"split_with_sizes(): argument 'split_sizes' must be tuple of ints, not "
                             f"{type(split_sizes).__name__}")
    if input.ndim == 0:
        raise RuntimeError("split_with_sizes expects at least a 1-dimensional tensor")
    n = input.shape[dim % input.ndim] if -input.ndim <= dim < input.ndim else None
    if n is not None and sum(split_sizes) != n:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at "
                           f"dimension {dim}), but got split_sizes={list(split_sizes)}")
    return tuple(split(input, list(split_sizes), dim))


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """``input`` with each run of equal consecutive elements (or slices along ``dim``) kept once, as
    ``torch.unique_consecutive``; with ``return_inverse`` each element's run index, with ``return_counts`` each
    run's length (int64). Not differentiable."""
    _tensor("unique_consecutive", "input", input)
    xp, a = input._xp, input._data
    if dim is None:
        a, axis = a.reshape(-1), 0
    else:
        if not -max(a.ndim, 1) <= dim < max(a.ndim, 1) or a.ndim == 0:
            raise IndexError(f"unique_consecutive: dimension {dim} out of range for a tensor of {a.ndim} dimensions")
        axis = dim % a.ndim
        if a.size == 0:  # (as unique(dim=): a 0 dimension other than dim is refused)
            _check_empty_dims("unique_consecutive", a.shape, axis)
    moved = xp.moveaxis(a, axis, 0).reshape(a.shape[axis], a.size // max(a.shape[axis], 1))
    n = moved.shape[0]
    changed = (moved[1:] != moved[:-1]).any(axis=1) if moved.shape[1] else xp.zeros(max(n - 1, 0), bool)
    starts = xp.concatenate([xp.ones(min(n, 1), bool), changed])
    first = xp.nonzero(starts)[0]
    values = Tensor._from_array(xp.take(a, first, axis=axis))
    out = [values]
    if return_inverse:
        inv = xp.cumsum(starts).astype(np.int64) - 1
        out.append(Tensor._from_array(inv.reshape(input.shape) if dim is None else inv))
    if return_counts:
        out.append(Tensor._from_array(xp.diff(xp.concatenate([first, xp.asarray([n])])).astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


def _multinomial_method(self, num_samples, replacement=False, *, generator=None):
    return _multinomial(self, num_samples, replacement, generator=generator)


# ---------------------------------------------------------------- put, index_reduce, diagonal_scatter
def put(input, index, source, accumulate=False):  # noqa: A002 - PyTorch's names
    """A copy of ``input`` with ``source``'s values written (added, with ``accumulate``) at the flat (C-order)
    positions ``index`` (negative from the end), as ``torch.put``."""
    _tensor("put", "input", input)
    _tensor("put", "index", index)
    _tensor("put", "source", source)
    if index.dtype != np.int64:
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got {np.dtype(index.dtype).name}")
    if source.dtype != input.dtype:  # (no cast, as PyTorch's)
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got self.dtype = "
                           f"{np.dtype(input.dtype).name} and source.dtype = {np.dtype(source.dtype).name}")
    if index.numel() != source.numel():
        raise backend.IndexInputError(  # (an IndexError, PyTorch's class, and the RuntimeError it was)
            f"put_(): Expected source and index to have the same number of elements, but got "
            f"source.numel() = {source.numel()}, index.numel() = {index.numel()}")
    n = input.numel()
    flat_index = Tensor._from_array(_in_bounds("put", index._data.reshape(-1), n, 0, IndexError))
    flat = index_put(reshape(input, -1), (flat_index,), reshape(source, -1), accumulate)
    return reshape(flat, *input.shape)


def index_reduce(input, dim, index, source, reduce, *, include_self=True):  # noqa: A002 - PyTorch's names
    """A copy of ``input`` with the slices of ``source`` along ``dim`` reduced ('prod', 'mean', 'amax', 'amin')
    into the slices ``index`` names, with input's own values unless ``include_self`` is False, as
    ``torch.index_reduce``; gradients as :func:`minifused.scatter_reduce`'s (none for 'prod')."""
    op = "index_reduce"
    _tensor(op, "input", input)
    _tensor(op, "source", source)
    _tensor(op, "index", index)
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"{op}(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    if index.ndim > 1 or index.dtype not in (np.int64, np.int32):
        raise IndexError(f"{op}(): Index is supposed to be a vector of int32 or int64, got shape "
                         f"{tuple(index.shape)} and dtype {index.dtype}")
    if input.ndim == 0:
        return reshape(index_reduce(reshape(input, 1), 0, index, reshape(source, -1), reduce,
                                    include_self=include_self), ())
    if not -input.ndim <= dim < input.ndim:
        raise IndexError(f"{op}: dimension {dim} out of range for a tensor of {input.ndim} dimensions")
    axis = dim % input.ndim
    want = input.shape[:axis] + (index.numel(),) + input.shape[axis + 1:]
    if tuple(source.shape) != want and not (source.ndim == 0 and want == (1,)):
        raise RuntimeError(f"{op}: source must have shape {want} (the input's with index's length along dim "
                           f"{axis}), got {tuple(source.shape)}")
    index = Tensor._from_array(_in_bounds(op, index._data.reshape(-1), input.shape[axis], axis,
                                          backend.IndexInputError, negative=False))
    lead = (1,) * axis + (index.numel(),) + (1,) * (input.ndim - axis - 1)
    grid = expand(reshape(index, *lead), *want)
    return scatter_reduce(input, axis, grid, reshape(source, *want), reduce, include_self=include_self)


class DiagonalScatter(Function):
    """x with its (offset, axis1, axis2) diagonal replaced by src; the gradient: x's with that diagonal zeroed,
    src's the diagonal."""

    @staticmethod
    def forward(ctx, x, src, offset, axis1, axis2):
        out = backend.copy(x)
        _diagonal_view(_xp(x), out, offset, axis1, axis2)[...] = src
        ctx.meta = (offset, axis1, axis2)
        return out

    @staticmethod
    def backward(ctx, g):
        offset, axis1, axis2 = ctx.meta
        xp = _xp(g)
        gx = backend.copy(g)
        diag = _diagonal_view(xp, gx, offset, axis1, axis2)
        gsrc = backend.copy(diag)
        diag[...] = 0
        return gx, gsrc, None, None, None

    @staticmethod
    def backward_graph(ctx, g):
        offset, axis1, axis2 = ctx.meta
        gsrc = Diagonal.apply(g, offset, axis1, axis2)
        gx = DiagonalScatter.apply(g, _zeros_graph(g, gsrc.shape), *ctx.meta) if ctx.needs_input_grad[0] else None
        return gx, gsrc if ctx.needs_input_grad[1] else None, None, None, None


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):  # noqa: A002 - PyTorch's names
    """A copy of ``input`` with ``src`` as its diagonal (``offset``, ``dim1``, ``dim2`` as :func:`diagonal`)."""
    op = "diagonal_scatter"
    _tensor(op, "input", input)
    _tensor(op, "src", src)
    offset, axis1, axis2 = _diagonal_dims(op, input.ndim, offset, dim1, dim2)
    want = _diagonal_view(np, np.empty(input.shape, np.bool_), offset, axis1, axis2).shape
    if tuple(src.shape) != tuple(want):
        raise RuntimeError(f"{op}: expected src to have a size equal to the slice of self. src size = "
                           f"{list(src.shape)}, slice size = {list(want)}")
    return DiagonalScatter.apply(input, cast(src.to(input.device), input.dtype), offset, axis1, axis2)


# ---------------------------------------------------------------- complex parts (complex tensors hold data: no grad)
def _complex_part(op, input, part):
    """``part`` (NumPy's real / imag / conj) of a complex tensor, as a tensor that shares its memory where NumPy's
    result does (real and imag are views, as PyTorch's); None for a real tensor."""
    _tensor(op, "input", input)
    if input._data.dtype.kind != "c":
        return None
    return Tensor._from_array(part(input._data))


def real(input):  # noqa: A002 - PyTorch's name
    """The real part of a complex tensor (a view); a real tensor is its own."""
    out = _complex_part("real", input, backend.array_module(input._data).real)
    return input if out is None else out


def imag(input):  # noqa: A002
    out = _complex_part("imag", input, backend.array_module(input._data).imag)
    if out is None:
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return out


def conj(input):  # noqa: A002
    """The complex conjugate (a copy); a real tensor is its own."""
    out = _complex_part("conj", input, backend.array_module(input._data).conj)
    return input if out is None else out


def conj_physical(input):  # noqa: A002
    return conj(input)


class Angle(Function):
    """pi where x < 0, 0 where x >= 0 (NaN stays NaN); its gradient is 0, as PyTorch's for a real x."""

    @staticmethod
    def forward(ctx, x, dtype):
        return backend.where(x < 0, np.pi, backend.where(x != x, x, 0)).astype(dtype)

    @staticmethod
    def backward(ctx, g):
        return _xp(g).zeros_like(g), None

    @staticmethod
    def backward_graph(ctx, g):
        return _zeros_graph(g, g.shape), None


def angle(input):  # noqa: A002
    """The argument of each element as a complex number: pi for a negative one, 0 else; an integer or bool tensor
    gives the default float dtype."""
    _tensor("angle", "input", input)
    dtype = input.dtype if backend.is_floating(input.dtype) else backend.get_default_dtype()
    return Angle.apply(input, dtype)


def adjoint(input):  # noqa: A002
    """The conjugate transpose of the last two dimensions: their transpose (a view), for a real tensor."""
    _tensor("adjoint", "input", input)
    if input.ndim < 2:
        raise RuntimeError(f"tensor.adjoint() is only supported on matrices or batches of matrices. Got "
                           f"{input.ndim}-D tensor.")
    return transpose(input, -2, -1)


# ---------------------------------------------------------------- queries
class layout:  # noqa: N801 - torch.layout
    """How a tensor's elements are stored, as PyTorch names it: minifused has dense strided tensors only,
    :data:`strided`."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"minifused.{self.name}"


strided = layout("strided")


def dim_order(self, *, ambiguity_check=False):
    """The dimensions from the outermost in memory to the innermost (largest stride first; ties in order)."""
    if ambiguity_check:
        raise NotImplementedError("dim_order: ambiguity_check=True")
    steps = self.stride()
    return tuple(sorted(range(self.ndim), key=lambda d: -steps[d]))


# ---------------------------------------------------------------- element callbacks (cpu), streams
def _host_only(op, self):
    if self.is_cuda:
        raise RuntimeError(f"{op}_ is only implemented on CPU tensors")
    self._check_inplace(op)


def _host_tensor(op, name, t):
    """``t``, a cpu tensor: the callbacks read its values through NumPy (a cuda one would fail inside it)."""
    if _tensor(op, name, t).is_cuda:
        raise InputTypeError(f"{op}: expected a cpu tensor for '{name}' (as self), got one on {t.device}")
    return t


def apply_(self, callable):  # noqa: A002 - PyTorch's name
    """Each element replaced by ``callable(element)`` (a Python number in, one out), in place; cpu only."""
    _host_only("apply_", self)
    a = self._data
    a[...] = np.vectorize(callable, otypes=[a.dtype])(a) if a.size else a
    return self._bump("apply_")


def map_(self, other, callable):  # noqa: A002
    """Each element replaced by ``callable(element, other)`` with ``other`` broadcast to this one; cpu only."""
    _host_only("map_", self)
    _host_tensor("map_", "other", other)
    a = self._data
    a[...] = np.vectorize(callable, otypes=[a.dtype])(a, np.broadcast_to(other._data, a.shape)) if a.size else a
    return self._bump("map_")


def map2_(self, x, y, callable):  # noqa: A002
    """Each element replaced by ``callable(element, x's, y's)``, ``x`` and ``y`` broadcast to it; cpu only."""
    _host_only("map2_", self)
    a = self._data
    others = [np.broadcast_to(_host_tensor("map2_", n, t)._data, a.shape) for n, t in (("x", x), ("y", y))]
    a[...] = np.vectorize(callable, otypes=[a.dtype])(a, *others) if a.size else a
    return self._bump("map2_")


_in_use = []  # (event, array) pairs of record_stream: the arrays kept alive until their event has completed


def record_stream(self, stream):
    """Mark this CUDA tensor as used by work queued on ``stream`` (a :class:`minifused.cuda.Stream` or a CuPy
    stream). CuPy's pool gives a freed block back only to the stream it was allocated on, which may reuse it at
    once while ``stream`` still reads it; so this records an event on ``stream`` and keeps the array alive until
    the event has completed (checked at each later call), as PyTorch's caching allocator does."""
    if not self.is_cuda:
        raise RuntimeError("record_stream: only CUDA tensors can be recorded on a stream")
    raw = getattr(stream, "_stream", stream)
    cupy = backend.cupy
    # CuPy < 14's external streams (what minifused.cuda.ExternalStream wraps there) are no cupy.cuda.Stream
    if not isinstance(raw, (cupy.cuda.Stream, getattr(cupy.cuda, "ExternalStream", cupy.cuda.Stream))):
        raise InputTypeError(f"record_stream(): argument 's' must be a CUDA stream, not {type(stream).__name__}")
    _in_use[:] = [(e, a) for e, a in _in_use if not e.done]
    event = cupy.cuda.Event(disable_timing=True)
    event.record(raw)
    _in_use.append((event, self._data))


_shared = {}  # id -> weak reference of each cpu array (a buffer owner) that share_memory_ was called on


def _owner(array):
    """The array that owns ``array``'s buffer (its views all lead to it)."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def share_memory_(self):
    """``Tensor.share_memory_``: returns the tensor. PyTorch moves a cpu tensor's storage into shared memory, so
    that processes it is sent to write the same memory; minifused's tensors cross to other processes by value
    (see :mod:`minifused.multiprocessing`), so nothing is moved and writes in another process stay there. The
    call is remembered for :meth:`is_shared`. A CUDA tensor is left as it is, as in PyTorch."""
    if not self.is_cuda:
        owner = _owner(self._data)
        _shared[id(owner)] = weakref.ref(owner, lambda _, key=id(owner): _shared.pop(key, None))
    return self


def is_shared(self):
    """``Tensor.is_shared``, PyTorch's answers: True for a CUDA tensor; for a cpu tensor, whether
    :meth:`share_memory_` was called on it or on a tensor viewing the same memory (which here marks the tensor
    only: its memory is not shared with other processes)."""
    if self.is_cuda:
        return True
    owner = _owner(self._data)
    ref = _shared.get(id(owner))
    return ref is not None and ref() is owner


def _false(self):
    return False


def to_dense(self, dtype=None, *, masked_grad=True):
    """``Tensor.to_dense``: the tensor itself, as PyTorch's answer for a strided tensor (with ``dtype``, a
    differentiable cast). Every minifused tensor is dense, an ``nn.Embedding(sparse=True)``'s gradient too, so
    code that densifies a sparse gradient (``weight.grad.to_dense()``) reads the same values."""
    if dtype is None:
        return self
    if not backend.is_dtype(dtype):
        raise TypeError(f"to_dense(): argument 'dtype' (position 1) must be minifused.dtype, not "
                        f"{type(dtype).__name__}")
    return self.to(dtype)


def nonzero_static(input, *, size, fill_value=-1):  # noqa: A002 - PyTorch's names
    """:func:`nonzero`'s (n, ndim) int64 indices as a fixed (``size``, ndim) tensor, as ``torch.nonzero_static``:
    the first ``size`` rows, or all of them then rows of ``fill_value``."""
    if not isinstance(size, numbers.Integral) or isinstance(size, bool) or size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be an non-negative integer, got {size!r}")
    found = nonzero(input)
    rows = found.shape[0]
    if rows >= size:
        return found[:size].clone()
    pad = found._xp.full((size - rows, found.shape[1]), fill_value, np.int64)
    return Tensor._from_array(found._xp.concatenate([found._data, pad]))


def unsafe_chunk(input, chunks, dim=0):  # noqa: A002 - PyTorch's names
    """:func:`chunk` (PyTorch's variant skips its views' checks; the values are the same)."""
    return chunk(input, chunks, dim)


def unsafe_split(tensor, split_size_or_sections, dim=0):
    """:func:`split` (PyTorch's variant skips its views' checks; the values are the same)."""
    return split(tensor, split_size_or_sections, dim)


def unsafe_split_with_sizes(input, split_sizes, dim=0):  # noqa: A002 - PyTorch's names
    """:func:`split_with_sizes` (PyTorch's variant skips its views' checks; the values are the same)."""
    return split_with_sizes(input, split_sizes, dim)


__all__ = ["split_with_sizes", "unique_consecutive", "put", "index_reduce", "diagonal_scatter", "real", "conj",
           "conj_physical", "angle", "adjoint", "nonzero_static", "unsafe_chunk", "unsafe_split",
           "unsafe_split_with_sizes"]
METHODS = {name: globals()[name] for name in __all__ if name not in ("real",)}
METHODS.update({
    "new": new, "multinomial": _multinomial_method,
    "put_": recorded_into("put_", put), "index_reduce_": recorded_into("index_reduce_", index_reduce),
    "fix": lambda self: self.trunc(), "fix_": lambda self: self.trunc_(),
    "conj_physical_": lambda self: self, "is_conj": _false, "is_neg": _false,
    "real": property(real), "imag": property(imag), "layout": property(lambda self: strided),
    "output_nr": property(lambda self: self._out_index), "dim_order": dim_order,
    "apply_": apply_, "map_": map_, "map2_": map2_, "record_stream": record_stream,
    "share_memory_": share_memory_, "is_shared": is_shared, "to_dense": to_dense,
})
METHODS.update({name: property(_false) for name in ("is_meta", "is_sparse", "is_sparse_csr", "is_quantized",
                                                    "is_mkldnn", "is_nested", "is_xpu", "is_mps")})
