"""``Tensor``: an array (NumPy on cpu, CuPy on cuda) plus its autograd fields.

The operators (``+``, ``@``, ``.sum()``, ``.reshape()`` ...) are attached in one
place, ``minifused/ops/__init__.py``, because they are ops and the ops layer
sits below this one. What is defined here needs no op: properties, conversion
to host values, DLPack, the backward entry point, hooks, and the in-place
methods, which are not differentiable and bump the version counter that
recorded ops check in backward.
"""
from __future__ import annotations

import copy
import itertools
import math
import numbers
import operator
import warnings
import weakref

import ml_dtypes
import numpy as np

from . import autograd, backend, dtypes
from .kernels import c_contiguous, empty_like_layout, is_channels_last
from .backend import DtypeNotImplementedError, InputError, InputTypeError


class Size(tuple):
    """A tensor's shape, as PyTorch's ``torch.Size``: a tuple of ints (equal to the plain tuple) that knows its
    ``numel()``, stays a Size when sliced, added to or repeated, and whose repr is ``minifused.Size([2, 3])``. The
    legacy constructors read one as sizes, not data (``FloatTensor(x.size())`` is a tensor of x's shape)."""

    __slots__ = ()

    def __new__(cls, sizes=()):
        return tuple.__new__(cls, (operator.index(n) for n in sizes))  # (a one-element tensor counts as its int)

    def numel(self) -> int:
        return math.prod(self)

    def __getitem__(self, index):
        item = tuple.__getitem__(self, index)
        return tuple.__new__(Size, item) if isinstance(index, slice) else item

    def __add__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return tuple.__new__(Size, tuple.__add__(self, other))

    def __mul__(self, times):
        return tuple.__new__(Size, tuple.__mul__(self, times))

    __rmul__ = __mul__

    def __repr__(self):
        return f"minifused.Size({list(self)})"

    __str__ = tuple.__repr__  # (formatted into messages and printed, a shape reads as the tuple it is)

    def __reduce__(self):
        return Size, (tuple(self),)


class _HookHandle:
    """What ``register_hook`` and ``register_post_accumulate_grad_hook`` return, as PyTorch's ``RemovableHandle``:
    ``remove()`` unregisters the hook (twice is harmless); ``id`` tells handles apart; as a context manager it
    removes the hook on leaving the block."""

    _ids = itertools.count()

    def __init__(self, hooks: list, hook):
        self.id = next(_HookHandle._ids)
        self._hooks, self._hook = hooks, hook

    def remove(self):
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class _Overwrite(autograd.Function):
    """An in-place write of values that do not depend on the tensor's old ones (see :meth:`Tensor._write_`):
    the old value's gradient is zero, a 0-d tensor ``value``'s the output's summed."""

    writes_overlap = True  # (Tensor._write_ checks the overlap: a fill may write an expanded view, a draw not)

    @staticmethod
    def forward(ctx, x, value, out, write):
        ctx.value_dtype = getattr(value, "dtype", None)
        write(out)
        return out

    @staticmethod
    def backward(ctx, g):
        need_x, need_value = ctx.needs_input_grad
        xp = backend.array_module(g)
        gv = None
        if need_value:
            gv = xp.asarray(g.sum(dtype=np.float64 if g.dtype == np.float64 else np.float32)).astype(ctx.value_dtype)
        return (xp.zeros_like(g) if need_x else None), gv

    @staticmethod
    def backward_graph(ctx, g):
        need_x, need_value = ctx.needs_input_grad
        wide = np.float64 if g.dtype == np.float64 else np.float32
        gv = g.sum(dtype=wide).to(ctx.value_dtype) if need_value else None
        return (Tensor._from_array(g._xp.zeros_like(g._data)) if need_x else None), gv


class Tensor:
    """An n-dimensional array on a device that can record operations for autograd."""

    # (_sparse_rows: on a .grad only, and unset elsewhere: the rows a row-sparse backward (a sparse=True
    # embedding's) delivered into it since it was made or zeroed, which SparseAdam reads: see _accumulate_grad)
    __slots__ = ("_data", "_requires_grad", "_grad", "_ctx", "_out_index", "_vc", "_hooks",
                 "_retain", "_post_hooks", "_rewritten", "_view", "_sparse_rows", "__weakref__")
    __array_ufunc__ = None  # NumPy operators defer to Tensor's reflected methods
    __hash__ = object.__hash__

    def __init__(self, data=(), *sizes, requires_grad=False):
        if sizes and (isinstance(data, bool) or not isinstance(data, numbers.Integral)):
            raise InputTypeError(f"Tensor(): give data, or sizes as ints, got {(data, *sizes)}")
        if isinstance(data, Size) and not sizes:  # Tensor(x.size()): zeros of that shape, as PyTorch's
            data = np.zeros(data, backend.get_default_dtype())
        elif isinstance(data, Tensor):
            data = data._data
        elif isinstance(data, numbers.Integral) and not isinstance(data, bool):  # Tensor(2, 3): zeros of a shape
            shape = (data, *sizes)
            if not all(isinstance(n, numbers.Integral) and not isinstance(n, bool) for n in shape) or min(shape) < 0:
                raise InputError(f"Tensor(): sizes must be non-negative ints, got {shape}")
            data = np.zeros(shape, backend.get_default_dtype())
        elif type(self) is Tensor and isinstance(data, np.ndarray):  # PyTorch's legacy constructor: a copy in the
            data = data.astype(backend.get_default_dtype())  # default float dtype (a Parameter keeps the dtype)
        elif not (isinstance(data, np.ndarray) or backend.is_cuda_array(data)):
            data = np.asarray(data, backend.get_default_dtype())  # Python data, in the default float dtype
        self._data = data
        self._requires_grad = False
        self._grad = None
        self._ctx = None
        self._out_index = 0
        self._vc = autograd.VersionCounter()
        self._hooks = None  # the gradient hooks, a list once one is registered
        self._retain = None
        self._post_hooks = None
        self._rewritten = None
        if requires_grad is not False:
            self.requires_grad = requires_grad

    @classmethod
    def _from_array(cls, array, requires_grad=False):
        """Wrap an array without checks (the ops' fast path)."""
        t = cls.__new__(cls)
        t._data = array
        t._requires_grad = requires_grad
        t._grad = None
        t._ctx = None
        t._out_index = 0
        t._vc = autograd.VersionCounter()
        t._hooks = None  # (an empty list each would be one more object for the cyclic collector: see autograd.tape)
        t._retain = None
        t._post_hooks = None
        t._rewritten = None  # the in-place op written through a view of it since its node (see autograd.tape)
        return t

    # ------------------------------------------------------------ properties
    @property
    def data(self) -> "Tensor":
        """This tensor's values as a tensor cut from the tape, sharing its memory (PyTorch's ``.data``).

        Unlike :meth:`detach` it has its own version counter, so in-place changes through it are
        not seen by the autograd checks (as in PyTorch: that is what ``.data`` is for). Code inside
        minifused reads the raw array as ``_data``."""
        return Tensor._from_array(self._data, False)

    @data.setter
    def data(self, value):
        # PyTorch swaps the storage: shape and dtype may change with it.
        if not isinstance(value, Tensor):
            raise InputTypeError(f"Tensor.data: expected a Tensor, got {type(value).__name__}")
        if self._requires_grad and not backend.is_floating(value.dtype):
            raise RuntimeError(f"data set to a tensor that requires gradients must be floating point or complex dtype, "
                               f"got {value.dtype}")
        self._data = value._data

    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        if not isinstance(flag, bool):  # (PyTorch's: 1, a NumPy bool or a tensor is refused, not read as a truth value)
            raise InputTypeError(f"requires_grad must be a bool, got {_type_name(flag)}")
        if flag and not backend.is_floating(self._data.dtype):
            raise InputTypeError(
                f"only floating-point tensors can require gradients, got dtype {self._data.dtype}")
        if not flag and self._ctx is not None:
            raise RuntimeError("requires_grad can only be turned off on leaf tensors; use detach()")
        self._requires_grad = flag

    def requires_grad_(self, requires_grad=True):
        if not isinstance(requires_grad, bool):
            raise InputTypeError(f"requires_grad_(): argument 'requires_grad' must be bool, not "
                                 f"{_type_name(requires_grad)}")
        self.requires_grad = requires_grad
        return self

    @property
    def grad(self):
        if self._ctx is not None and not self._retain:  # (a non-leaf that keeps no .grad: PyTorch's warning)
            warnings.warn("The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
                          "attribute won't be populated during autograd.backward(). If you indeed want the .grad field "
                          "to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you "
                          "access the non-leaf Tensor by mistake, make sure you access the leaf Tensor instead.",
                          UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value):
        # Checked here, as PyTorch does, so that an optimizer step never meets a gradient
        # that does not fit its parameter (it would update some parameters and then fail).
        if value is not None:
            if not isinstance(value, Tensor):
                raise InputTypeError(f"assigned grad expected to be a Tensor or None, got {type(value).__name__}")
            if value._data.shape != self._data.shape:
                raise RuntimeError(f"assigned grad has shape {tuple(value._data.shape)}, the tensor "
                                   f"{tuple(self._data.shape)}")
            if value._data.dtype != self._data.dtype:
                raise RuntimeError(f"assigned grad has dtype {value._data.dtype}, the tensor {self._data.dtype}")
            if value.device != self.device:
                raise RuntimeError(f"assigned grad is on {value.device}, the tensor on {self.device}")
        self._grad = value

    @property
    def shape(self) -> Size:
        return tuple.__new__(Size, self._data.shape)

    @property
    def dtype(self) -> dtypes.dtype:
        return dtypes.public(self._data.dtype)

    @property
    def device(self) -> backend.Device:
        return backend.device_of(self._data)

    @property
    def is_cuda(self) -> bool:
        return backend.is_cuda_array(self._data)

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def is_leaf(self) -> bool:
        return self._ctx is None

    @property
    def grad_fn(self):
        """The node of the op that made this tensor (an ``autograd.graph.Node``: ``name()``, ``next_functions``),
        None for a leaf."""
        return None if self._ctx is None else autograd.graph.node_of(self._ctx)

    @property
    def _base(self):
        """The tensor this view views (PyTorch's ``._base``): the start of its chain of views, so never a view
        itself (``x[1:][1:]._base is x``); None for a tensor that is no view. A view op that copied (``reshape``
        of a transposed tensor) starts a chain of its own; ``view(dtype)``, ``detach()`` and ``.data`` share
        memory but are no views, as in PyTorch."""
        base, a = None, self._data
        taken = getattr(self, "_view", None)
        while type(taken) is tuple and _shares(a, taken[0]._data):
            base = taken[0]
            a, taken = base._data, getattr(base, "_view", None)
        return base

    def _is_view(self) -> bool:
        """Whether this tensor is a view of another (PyTorch's ``_is_view()``: ``_base`` is not None)."""
        return self._base is not None

    @property
    def _xp(self):
        return backend.array_module(self._data)

    def dim(self) -> int:
        return self._data.ndim

    def size(self, dim=None):
        return tuple.__new__(Size, self._data.shape) if dim is None else self._data.shape[dim]

    def stride(self, dim=None):
        """The step in elements from one element to the next along each dimension (``dim``: along that
        one), as PyTorch's ``Tensor.stride``: 1 along the last dimension of a contiguous tensor, along the
        channels of a channels-last one, 0 along an expanded one."""
        steps = tuple(s // self._data.itemsize for s in self._data.strides)
        if self._data.size == 0:  # no element to step between: PyTorch's contiguous steps (sizes of 0 as 1)
            steps = tuple(int(np.prod([max(n, 1) for n in self._data.shape[i + 1:]])) for i in range(len(steps)))
        if dim is None:
            return steps
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
            raise InputTypeError(f"stride: dimension must be an int, got {type(dim).__name__} {dim!r}")
        if not -len(steps) <= dim < len(steps):
            raise IndexError(f"stride: dimension {dim} out of range for a tensor of {len(steps)} dimensions")
        return steps[dim]

    def data_ptr(self) -> int:
        """The address of the first element (in device memory for a CUDA tensor)."""
        return self._data.data.ptr if self.is_cuda else self._data.ctypes.data

    def numel(self) -> int:
        return int(self._data.size)

    def element_size(self) -> int:
        return self._data.dtype.itemsize

    def __len__(self):
        if self._data.ndim == 0:
            raise InputTypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    # ------------------------------------------------------------ host values
    def numpy(self, *, force=False) -> np.ndarray:
        """The array as NumPy (shared); like PyTorch, only for cpu tensors, unless ``force`` (then a copy, from
        any device). Unlike PyTorch's, a tensor that requires grad gives its array too."""
        if force:
            return np.array(backend.to_device(self._data, backend.CPU))
        if self.is_cuda:
            raise InputTypeError(f"can't convert {self.device} tensor to numpy; use tensor.cpu() first")
        return self._data

    def __array__(self, dtype=None, copy=None):
        """NumPy's view of a cpu tensor (``np.asarray(t)``, what NumPy-based libraries call), as PyTorch's."""
        a = self.numpy()
        if dtype is not None and a.dtype != dtype:
            return a.astype(dtype)
        return a.copy() if copy else a

    def item(self):
        if self._data.size != 1:
            raise InputError(f"item(): only one-element tensors can be converted, got shape {self.shape}")
        if self.is_cuda:
            backend.refuse_sync("Tensor.item()")
            backend.run_deferred_checks()
        return backend.to_device(self._data, backend.CPU).reshape(()).item()

    def tolist(self):
        return _host(self._data).tolist()

    def __float__(self):
        if self.requires_grad and autograd.is_grad_enabled() and not _scalar_warned[0]:
            # PyTorch's warning that the number leaves the graph, once per process as PyTorch's
            _scalar_warned[0] = True
            warnings.warn("Converting a tensor with requires_grad=True to a scalar may lead to unexpected behavior. "
                          "Consider using tensor.detach() first.", UserWarning, stacklevel=2)
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError(f"the truth value of a tensor of shape {self.shape} is ambiguous")
        return bool(self.item())

    def __index__(self):
        if backend.is_floating(self._data.dtype) or self._data.size != 1:
            raise InputTypeError("only integer tensors of a single element can be used as an index")
        return int(self.item())

    def __repr__(self):
        opts = PRINT_OPTIONS
        digits, sci = opts["precision"], opts["sci_mode"]
        formatter = None if sci is None else {"float_kind": (lambda v: f"{v:.{digits}e}") if sci else
                                              (lambda v: f"{v:.{digits}f}")}
        values = _host(self._data)
        if values.dtype == backend.bfloat16:  # (NumPy formats it as no float: widened exactly, it prints as one)
            values = values.astype(np.float32)
        # PyTorch's float format: whole numbers as "1.", otherwise every value with ``precision`` digits
        finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values
        fixed = values.dtype.kind == "f" and bool((finite != np.round(finite)).any())
        body = np.array2string(values, separator=", ", precision=digits, prefix="tensor(",
                               threshold=opts["threshold"], edgeitems=opts["edgeitems"],
                               max_line_width=opts["linewidth"], formatter=formatter,
                               floatmode="fixed" if fixed else "maxprec")
        extras = []
        if self.is_cuda:
            extras.append(f"device='{self.device}'")
        if self._data.size == 0:
            # PyTorch's rule: no values show the shape (unless it is (0,)) or the dtype (unless the default)
            if self._data.ndim != 1:
                extras.append(f"size={tuple(self.shape)}")
            if self._data.dtype != backend.get_default_dtype():
                extras.append(f"dtype={self._data.dtype}")
        elif self._data.dtype not in (backend.float32, backend.int64, backend.bool_):
            extras.append(f"dtype={self._data.dtype}")
        if self._ctx is not None:
            extras.append(f"grad_fn=<{self._ctx.fn.__name__}Backward>")
        elif self._requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + body + "".join(", " + e for e in extras) + ")"

    def __format__(self, spec):
        # PyTorch formats a 0-d tensor as its value; any other takes no format spec, one element or not
        # (f"{acc1:.2f}" on top-k's (1,) result is a TypeError there: acc1.item(), or acc1[0])
        if self._data.ndim == 0:
            return format(self.item(), spec)
        if not spec:
            return str(self)
        raise InputTypeError(f"unsupported format string passed to Tensor.__format__ (format spec {spec!r} needs a "
                             f"0-d tensor, got shape {tuple(self.shape)})")

    # ------------------------------------------------------------ copies and pickles
    def __reduce_ex__(self, protocol):
        """Pickles (and ``copy.copy``) as PyTorch's: the values and ``requires_grad``, as a leaf whatever made this
        tensor, without ``.grad``, history or hooks (a hook left behind warns); a subclass's attributes too."""
        for hook in self._hooks or ():
            warnings.warn(f"backward hook {hook!r} on tensor will not be serialized", stacklevel=2)
        return _rebuild_tensor, (type(self), self._data, self._requires_grad), getattr(self, "__dict__", None) or None

    def __deepcopy__(self, memo):
        """``copy.deepcopy`` as PyTorch's: of a leaf only; a copy of the values with ``requires_grad`` and a deep copy
        of ``.grad`` (no hooks); tensors sharing an array in one deep copy share the copy."""
        if self._ctx is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                               "protocol at the moment; detach() (or clone().detach()) the tensor first")
        found = memo.get(id(self))
        if found is None:
            found = memo[id(self)] = type(self)._from_array(copy.deepcopy(self._data, memo), self._requires_grad)
            if self._grad is not None:
                found._grad = copy.deepcopy(self._grad, memo)
            state = getattr(self, "__dict__", None)
            if state:
                found.__dict__.update(copy.deepcopy(state, memo))
        return found

    # ------------------------------------------------------------ DLPack
    def __dlpack__(self, **kwargs):
        return self._data.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()

    # ------------------------------------------------------------ autograd
    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """``torch.Tensor.backward``: see :func:`minifused.autograd.backward` (``inputs``: the tensors whose
        ``.grad`` to accumulate into; None: every leaf)."""
        autograd.backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    def detach(self) -> "Tensor":
        """The same data, cut from the tape (shares the version counter)."""
        t = Tensor._from_array(self._data, False)
        t._vc = self._vc
        return t

    def detach_(self) -> "Tensor":
        """Cut this tensor from the tape in place: a leaf that requires no grad (a view of a recorded tensor
        refuses, as in PyTorch)."""
        if self._ctx is not None and getattr(self, "_view", False):
            raise RuntimeError("detach_: can't detach views in-place; use detach() instead")
        self._ctx, self._requires_grad = None, False
        return self

    def register_hook(self, hook):
        """``hook(grad) -> Tensor | None`` runs when this tensor's gradient is computed."""
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require grad")
        if self._hooks is None:
            self._hooks = []
        if self._ctx is None:
            hooks = self._hooks
        else:
            if self._ctx.hooks is None:
                self._ctx.hooks = {}
            hooks = self._ctx.hooks.setdefault(self._out_index, [])
            self._hooks.append(hook)  # marks the tensor as watched (no epilog fusion past it)
        hooks.append(hook)
        return _HookHandle(hooks, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """``hook(tensor)`` runs right after this leaf's ``.grad`` got its gradient in a backward.

        The backward writes such a leaf's ``.grad`` as soon as its gradient is complete, while
        the rest of the graph is still being differentiated (what ``DistributedDataParallel``
        needs to start reducing gradients early); other leaves are written at the end.
        """
        if self._ctx is not None or not self._requires_grad:
            raise RuntimeError("register_post_accumulate_grad_hook: only leaf tensors that require grad "
                               "accumulate a .grad")
        if self._post_hooks is None:
            self._post_hooks = []
        self._post_hooks.append(hook)
        autograd._post_hooks_used[0] = True
        return _HookHandle(self._post_hooks, hook)

    @property
    def retains_grad(self) -> bool:
        """Whether this non-leaf tensor keeps its ``.grad`` (:meth:`retain_grad`)."""
        return bool(self._retain) and self._ctx is not None

    def retain_grad(self):
        """Keep ``.grad`` on this non-leaf tensor after backward (a leaf keeps it anyway; a tensor that requires no
        grad has none to keep, and refuses, as PyTorch's)."""
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self._ctx is None:
            return
        if self._ctx.retained is None:
            self._ctx.retained = {}
        self._ctx.retained[self._out_index] = weakref.ref(self)
        self._retain = True

    def _accumulate_grad(self, g, owned, rows=None):
        """``g`` added into ``.grad`` (becoming it where there is none: as it is where ``owned``, else a copy).
        ``rows``: the rows a row-sparse gradient holds (a bool array per row: a sparse embedding's, looked-up rows
        whose gradient is zero too), recorded beside ``.grad`` as ``_sparse_rows``, with those of earlier
        backwards into the same ``.grad`` (as PyTorch's sparse gradients add up: their indices join); a ``.grad``
        replaced (set to None, assigned) or zeroed (``zero_``, ``zero_grad(set_to_none=False)``) holds none."""
        if not self._requires_grad:  # a leaf frozen after its graph was recorded gets none (PyTorch's AccumulateGrad)
            return
        if isinstance(g, np.generic):  # a 0-d NumPy op's gradient is a scalar: in-place ops on .grad need an array
            g, owned = np.array(g), True
        if self._grad is None:  # a new .grad takes the tensor's layout (PyTorch's), which the fused optimizers need
            if not is_channels_last(self._data):
                g = g if owned and c_contiguous(g) else backend.copy(g)
            elif not (owned and is_channels_last(g)):
                g = _copy_into(empty_like_layout(self._data, g.dtype), g)
            self._grad = Tensor._from_array(g, False)
        else:  # (into a .grad the user set to an expanded view: PyTorch's overlap error, not repeated adds)
            autograd.refuse_internal_overlap("backward (gradient accumulation)", self._grad._data)
            self._grad._data += g
            self._grad._bump("backward (gradient accumulation)")
        if rows is not None:
            had = getattr(self._grad, "_sparse_rows", None)
            self._grad._sparse_rows = rows if had is None else had | rows

    # ------------------------------------------------------------ in-place (not differentiable; the recorded
    # arithmetic ones, add_ / mul_ / += ..., are ops.elementwise's)
    def _check_inplace(self, op, overlap_ok=False):
        """The checks of an unrecorded in-place write by ``op``: not into a tensor that requires grad in grad mode,
        and (unless ``overlap_ok``: a fill writes one value, wherever it lands) not into an expanded view."""
        if self._requires_grad and autograd.is_grad_enabled():
            kind = "a leaf Variable that requires grad" if self._ctx is None else "a tensor that requires grad"
            raise RuntimeError(f"{op}: {kind} is being used in an in-place operation; wrap it in minifused.no_grad() "
                               f"or use the out-of-place form")
        autograd.refuse_no_grad_view(op, self)
        if not overlap_ok:
            autograd.refuse_internal_overlap(op, self._data)

    def _bump(self, op):
        """Record an in-place change of this tensor's array by ``op`` (every in-place writer calls this:
        the name shows in the error of a backward it breaks)."""
        self._vc.bump(op)
        return self

    @property
    def _version(self) -> int:
        """How many in-place changes this tensor's array has seen (PyTorch's ``_version``)."""
        return self._vc.version

    def _write_(self, op, write, value=None, overlap_ok=False):
        """``write(array)`` puts values that do not depend on this tensor's old ones into its array in place
        (``op``: a fill, a draw; ``value``: a 0-d tensor it writes, if any). Where this tensor or value is in the
        graph (grad mode), the write is recorded: the old value's gradient is zero, value's the sum of the
        output's, as PyTorch's (a leaf that requires grad refuses). Unless ``overlap_ok`` (a fill writes one
        value, wherever it lands), an expanded view refuses."""
        autograd.refuse_no_grad_view(op, self)
        if not overlap_ok:
            autograd.refuse_internal_overlap(op, self._data)
        if autograd.is_grad_enabled() and (self._requires_grad or getattr(value, "_requires_grad", False)):
            return _Overwrite.apply_(op, self, value, write=write)
        write(self._data)
        return self._bump(op)

    def zero_(self):
        self._write_("zero_", lambda a: a.fill(0), overlap_ok=True)
        self._sparse_rows = None  # (a zeroed sparse gradient holds no rows: PyTorch's zero_ empties its indices)
        return self

    def fill_(self, value):
        if isinstance(value, Tensor):
            if value.ndim:
                raise InputError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} "
                                 f"dimensions.")
            if value.device != self.device:
                value = value.to(self.device) if value._requires_grad else value.item()
        elif not isinstance(value, numbers.Number):
            raise InputTypeError(f"fill_(): argument 'value' must be a number or a 0-d tensor, not "
                                 f"{type(value).__name__}")
        else:
            value = backend.integer_fill("fill_", value, self._data.dtype)
        raw = value._data if isinstance(value, Tensor) else value
        return self._write_("fill_", lambda a: a.__setitem__(Ellipsis, raw), value, overlap_ok=True)

    def _copy_values_(self, src):
        """``src``'s values written into this tensor's array, unrecorded (``copy_``, ops.inplace_arith, records
        it where autograd needs it)."""
        self._check_inplace("copy_")
        src = self._xp.asarray(src.to(self.device)._data if isinstance(src, Tensor) else src)
        try:
            self._xp.copyto(self._data, src.astype(self._data.dtype, copy=False))
        except ValueError:  # NumPy's and CuPy's error names neither the op nor which side is which
            try:
                fits = tuple(np.broadcast_shapes(self.shape, src.shape)) == tuple(self.shape)
            except ValueError:
                fits = False
            if fits:
                raise
            raise RuntimeError(f"copy_: the source's shape {list(src.shape)} does not broadcast to the "
                               f"destination's {list(self.shape)}") from None
        return self._bump("copy_")

    copy_ = _copy_values_

    def uniform_(self, a=0.0, b=1.0, *, generator=None):
        a, b = number_arg("uniform_", "from", a, "float"), number_arg("uniform_", "to", b, "float")
        if not backend.is_floating(self.dtype):
            raise DtypeNotImplementedError(f"uniform_: expected a floating-point tensor, got {self.dtype}")
        top = float(ml_dtypes.finfo(self.dtype).max)  # (PyTorch's bounds: the dtype's finite range, and its span)
        c_name = _C_FLOAT_NAMES.get(np.dtype(self.dtype).name, np.dtype(self.dtype).name)
        for name, v in (("from", a), ("to", b)):
            if not -top <= v <= top:
                raise RuntimeError(f"uniform_: {name} is out of bounds for {c_name}, got {v}")
        if not a <= b:
            raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={a} > to={b}")
        if b - a > top:
            raise RuntimeError(f"uniform_ expects to-from <= std::numeric_limits<{c_name}>::max(), but found "
                               f"to={b} and from={a} which result in to-from to exceed the limit")
        gen = backend.generator(self.device, generator, "uniform_")

        def write(out):
            r = gen.random(out.shape) if isinstance(gen, np.random.Generator) else gen.random_sample(out.shape)
            out[...] = (r * (b - a) + a).astype(out.dtype)
        return self._write_("uniform_", write)

    def random_(self, *bounds, generator=None, **named):
        """In place, integers drawn uniformly from [from, to - 1], as PyTorch's ``random_(from=0, to=None)`` and
        ``random_(to)``: without ``to``, up to 2**mantissa for a floating dtype (every such integer is exact),
        up to the dtype's largest value for an integer one, 0 or 1 for bool."""
        if len(bounds) > 2 or set(named) - {"from", "to"} or (bounds and named):
            raise InputTypeError(f"random_: expected (to), (from, to) or the keywords from / to, got {len(bounds)} "
                                 f"positional and {sorted(named)}")
        lo, hi = (0, bounds[0]) if len(bounds) == 1 else bounds if bounds else (named.get("from", 0),
                                                                               named.get("to"))
        dtype = self._data.dtype
        if hi is None:  # (bfloat16 keeps 8 bits of mantissa, float16 11, float32 24, float64 53)
            mantissa = {backend.bfloat16: 8, np.dtype(np.float16): 11, np.dtype(np.float32): 24}.get(dtype, 53)
            hi = 2 if dtype == backend.bool_ else (2 ** mantissa + 1 if backend.is_floating(dtype)
                                                   else int(np.iinfo(dtype).max) + 1)
        if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in (lo, hi)):
            raise InputTypeError(f"random_: from and to must be ints, got {lo!r} and {hi!r}")
        if lo >= hi:
            raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={lo} >= to={hi}")
        gen = backend.generator(self.device, generator, "random_")
        draw = gen.integers if isinstance(gen, np.random.Generator) else gen.randint
        return self._write_("random_", lambda out: out.__setitem__(
            Ellipsis, draw(lo, min(hi, 2 ** 63 - 1), out.shape).astype(dtype)))

    def _draw_(self, op, draw, *, floating=True, generator=None):
        """``self`` filled in place with ``draw(gen, shape)``, drawn by the device's generator."""
        if floating and not backend.is_floating(self.dtype):
            raise DtypeNotImplementedError(f"{op}: expected a floating-point tensor, got {self.dtype}")
        gen = backend.generator(self.device, generator, op)
        return self._write_(op, lambda out: out.__setitem__(Ellipsis, draw(gen, out.shape).astype(out.dtype)))

    def exponential_(self, lambd=1.0, *, generator=None):
        """In place, draws of the exponential distribution of rate ``lambd`` (> 0)."""
        if not lambd > 0:
            raise InputError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
        return self._draw_("exponential_", lambda g, n: g.exponential(1.0 / lambd, n), generator=generator)

    def geometric_(self, p, *, generator=None):
        """In place, the number of Bernoulli(``p``) trials up to the first success (1, 2, ...), p in (0, 1)."""
        if not 0 < p < 1:
            raise InputError(f"geometric_ expects p to be in (0, 1), but got p={p}")
        return self._draw_("geometric_", lambda g, n: g.geometric(p, n), floating=False, generator=generator)

    def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
        """In place, exp of normal draws of ``mean`` and ``std`` (> 0)."""
        if not std > 0:
            raise InputError(f"log_normal_ expects std > 0.0, but found std={std}")
        return self._draw_("log_normal_", lambda g, n: g.lognormal(mean, std, n), generator=generator)

    def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
        """In place, draws of the Cauchy distribution of ``median`` and scale ``sigma`` (> 0)."""
        if not sigma > 0:
            raise InputError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
        return self._draw_("cauchy_", lambda g, n: median + sigma * g.standard_cauchy(n), generator=generator)

    def normal_(self, mean=0.0, std=1.0, *, generator=None):
        mean, std = number_arg("normal_", "mean", mean, "float"), number_arg("normal_", "std", std, "float")
        if not backend.is_floating(self.dtype):
            raise DtypeNotImplementedError(f"normal_: expected a floating-point tensor, got {self.dtype}")
        if not std >= 0:
            raise InputError(f"normal_: std must be >= 0, got {std}")
        gen = backend.generator(self.device, generator, "normal_")
        return self._write_("normal_", lambda out: out.__setitem__(
            Ellipsis, (gen.standard_normal(out.shape) * std + mean).astype(out.dtype)))


#: How tensors print (``minifused.set_printoptions``, PyTorch's names and defaults but for ``threshold``).
PRINT_OPTIONS = {"precision": 4, "threshold": 200, "edgeitems": 3, "linewidth": 80, "sci_mode": None}
_scalar_warned = [False]  # (Tensor.__float__'s warning given)
_C_FLOAT_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16"}
_PRINT_PROFILES = {"default": (4, 200, 3, 80), "short": (2, 1000, 2, 80), "full": (4, 2 ** 62, 3, 80)}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    """``torch.set_printoptions``: digits after the point, the element count past which a tensor prints
    summarized, the items kept at each edge then, the line width; ``profile`` 'default', 'short' or 'full'
    first; ``sci_mode`` True / False forces or suppresses scientific notation (None: automatic)."""
    if profile is not None:
        if profile not in _PRINT_PROFILES:
            raise InputError(f"set_printoptions: profile must be 'default', 'short' or 'full', got {profile!r}")
        PRINT_OPTIONS.update(zip(("precision", "threshold", "edgeitems", "linewidth"), _PRINT_PROFILES[profile]))
    for name, value in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                        ("linewidth", linewidth)):
        if value is not None:
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InputError(f"set_printoptions: {name} must be an int >= 0, got {value!r}")
            PRINT_OPTIONS[name] = value
    if sci_mode is not None and not isinstance(sci_mode, bool):
        raise InputTypeError(f"set_printoptions: sci_mode must be None or a bool, got {sci_mode!r}")
    PRINT_OPTIONS["sci_mode"] = sci_mode


def number_arg(op, name, value, kind="Number"):
    """A number argument as PyTorch's argument parser reads one: a 0-d tensor that needs no gradient is the number
    it holds (read on the host, as there: torchvision's RandomResizedCrop draws ``uniform_(log_ratio[0],
    log_ratio[1])``); another tensor is a TypeError naming the op, the argument and the ``kind`` of number wanted.
    Anything else comes back as it is, for the caller's own check."""
    if not isinstance(value, Tensor):
        return value
    if value.ndim or value.requires_grad:
        raise InputTypeError(f"{op}(): argument '{name}' must be {kind}, not Tensor (one of shape {list(value.shape)}"
                             f"{' that requires grad' if value.requires_grad else ''}: only a 0-d tensor without grad "
                             f"stands for a number)")
    return value.item()


def _type_name(value):
    """``value``'s type as PyTorch's argument errors name it: ``int``, ``numpy.bool``, ``Tensor``."""
    kind = type(value)
    return kind.__name__ if kind.__module__ in ("builtins", __name__) else f"{kind.__module__}.{kind.__name__}"


def _host(array):
    return backend.to_device(array, backend.CPU)


autograd._register_tensor_type(Tensor)


def _copy_into(out, a):
    out[...] = a
    return out


def _shares(a, b):
    """Whether array ``a``, taken by a view op from ``b``, views b's memory (the op did not copy); an empty one
    counts as a view, having no memory to tell by."""
    return not (a.size and b.size) or backend.array_module(a).may_share_memory(a, b)


def _rebuild_tensor(cls, data, requires_grad):
    """A pickled tensor, rebuilt (see :meth:`Tensor.__reduce_ex__`)."""
    return cls._from_array(data, requires_grad)
