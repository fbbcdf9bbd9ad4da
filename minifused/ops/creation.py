"""Creating tensors: from data, filled, random, ranges, and the ``*_like`` forms."""
from __future__ import annotations

import collections.abc
import functools
import math
import numbers

import ml_dtypes
import numpy as np

from .. import backend
from ..kernels import copy_in_layout
from ..tensor import Tensor
from ._common import number_arg, promote
from .shape import contiguous_format, preserve_format, result_format
from ..backend import InputError, InputTypeError

__all__ = ["tensor", "as_tensor", "asarray", "from_numpy", "from_dlpack", "zeros", "ones", "empty", "full", "rand",
           "randn", "randint", "arange", "eye", "zeros_like", "ones_like", "empty_like", "full_like",
           "rand_like", "randn_like", "randint_like", "linspace", "logspace", "randperm", "numel", "is_tensor",
           "is_floating_point", "normal", "multinomial", "bernoulli"]


def _place(array, dtype, device, requires_grad):
    dev = backend.device(device)
    if dtype is not None:
        dtype = backend.as_dtype(dtype)
        array = array if array.dtype == dtype else backend.astype(array, dtype)
    t = Tensor._from_array(backend.to_device(array, dev), False)
    if requires_grad is not False and requires_grad is not None:  # (None: the default, as PyTorch's factories take
        t.requires_grad = requires_grad                              # it; the setter refuses anything but a bool)
    return t


# NumPy dtypes a tensor may be made from: PyTorch's (``torch.from_numpy``'s list) and minifused's bfloat16
_ARRAY_DTYPES = tuple(np.dtype(d) for d in (
    np.float64, np.float32, np.float16, ml_dtypes.bfloat16, np.complex64, np.complex128, np.int64, np.int32, np.int16,
    np.int8, np.uint64, np.uint32, np.uint16, np.uint8, np.bool_))
_WIDE_UNSIGNED = tuple(np.dtype(d) for d in (np.uint16, np.uint32, np.uint64))
_SEQUENCES = (list, tuple, range, collections.abc.Sequence)  # (str and bytes are sequences too: not of numbers)


def _checked_array_dtype(op, dtype):
    """``dtype`` (of a NumPy array or scalar) in native byte order, or an error if a tensor cannot have it."""
    native = dtype.newbyteorder("=")
    if native not in _ARRAY_DTYPES:
        what = " (not numeric)" if dtype.kind in "USOMmV" else ""
        raise InputTypeError(f"{op}: can't convert np.ndarray of type {dtype}{what}. The only supported types are: "
                             f"{', '.join(str(d) for d in _ARRAY_DTYPES)}")
    return native


def _promote_data_dtypes(a, b):
    """PyTorch's ``promoteTypes`` for the dtypes in one piece of data: as its ops promote, except that uint16,
    uint32 and uint64 promote only with themselves and with floats."""
    if a == b:
        return a
    if a.kind == "c" or b.kind == "c":  # complex with an integer stays that complex; with a float as wide as both
        return np.result_type(a, b) if backend.is_floating(a) or backend.is_floating(b) or a.kind == b.kind else \
            (a if a.kind == "c" else b)
    for wide, other in ((a, b), (b, a)):
        if wide in _WIDE_UNSIGNED and not backend.is_floating(other):
            raise InputTypeError(f"tensor: promotion for uint16, uint32, uint64 types is not supported, attempted to "
                                 f"promote {a} and {b}")
    return promote(a, b)


def number_dtype(v):
    """The dtype PyTorch infers for one number of the data (not a sequence): a NumPy scalar's or a tensor's own,
    int64 for a Python int, the default dtype for a Python float."""
    if isinstance(v, (np.generic, np.ndarray)):  # (NumPy floats are Python floats too: first)
        return _checked_array_dtype("tensor", v.dtype)
    if isinstance(v, Tensor):
        return v.dtype
    if isinstance(v, bool):
        return backend.bool_
    if isinstance(v, int):
        return backend.int64
    if isinstance(v, float):
        return backend.get_default_dtype()
    if isinstance(v, complex):
        return np.dtype(np.complex128 if backend.get_default_dtype() == backend.float64 else np.complex64)
    if isinstance(v, (str, bytes)):
        raise InputTypeError(f"tensor: invalid data type {type(v).__name__!r}: not numeric (expected numbers, "
                             f"sequences of numbers, arrays or tensors)")
    raise InputTypeError(f"tensor: could not infer dtype of {type(v).__name__}")


def _data_dtypes(data):
    """The dtypes of the numbers in Python data (nested sequences of numbers, NumPy scalars and arrays, one-element
    tensors), and whether tensors are among them. Each sequence's types are taken at once, so that a long list of
    Python numbers costs little; an empty sequence counts as the default dtype, as PyTorch's."""
    if type(data) not in (list, tuple) and (not isinstance(data, _SEQUENCES) or isinstance(data, (str, bytes))):
        return {number_dtype(data)}, isinstance(data, Tensor)
    dtypes, tensors, pending = set(), False, [data]
    while pending:
        seq = pending.pop()
        if not len(seq):
            dtypes.add(backend.get_default_dtype())
        for kind in set(map(type, seq)):
            if kind is float or kind is int or kind is bool:  # (the common case first: Python numbers)
                dtypes.add(number_dtype(kind()))
            elif kind is list or kind is tuple or issubclass(kind, _SEQUENCES) and not issubclass(kind, (str, bytes)):
                pending.extend(v for v in seq if type(v) is kind)
            elif issubclass(kind, (np.ndarray, Tensor)):
                dtypes.update(number_dtype(v) for v in seq if type(v) is kind)
                tensors = tensors or issubclass(kind, Tensor)
            else:
                dtypes.add(number_dtype(next(v for v in seq if type(v) is kind)))
    return dtypes, tensors


def _items(data):
    """Data with each tensor in it replaced by the number it holds (PyTorch takes only one-element tensors there)."""
    if isinstance(data, Tensor):
        if data.numel() != 1:
            raise InputError(f"tensor: only one element tensors can be converted to Python scalars, got a tensor of "
                             f"shape {tuple(data.shape)} in the data")
        return data.item()
    if isinstance(data, _SEQUENCES) and not isinstance(data, (str, bytes)):
        return [_items(v) for v in data]
    return data


def _from_python(data, dtype, floats):
    """NumPy array of ``dtype`` from Python data, each number converted as PyTorch's ``tensor()`` stores it: into
    an integer dtype an error where it does not fit (a negative int into an unsigned dtype wraps, down to minus its
    largest value; a float is truncated toward zero, NaN refused), a Python int beyond int64 refused; into a
    floating dtype rounded once (beyond its range: infinity). ``floats``: whether the data holds floating numbers."""
    try:
        if dtype == backend.float64 or dtype.kind in "bc" or dtype in _WIDE_UNSIGNED:
            return np.asarray(data, dtype=dtype)
        if backend.is_floating(dtype):  # float64, then as a cast makes it (float16 through float32, as PyTorch's)
            with np.errstate(over="ignore"):
                return backend.astype(np.asarray(data, dtype=np.float64), dtype)
        if dtype == backend.int64 and not floats:
            return np.asarray(data, dtype=np.int64)
        info = np.iinfo(dtype)
        if floats:
            values = np.asarray(data, dtype=np.float64)
            top = values >= 2.0 ** 63 if dtype.itemsize == 8 else values > info.max
            bad = top | (values < info.min) | np.isnan(values)
        else:
            values = np.asarray(data, dtype=np.int64)
            bad = (values > info.max) | (values < (-info.max if dtype.kind == "u" else info.min))
    except OverflowError:
        target = "int64 (Overflow when unpacking long long)" if dtype.kind in "iu" else str(dtype)
        raise InputError(f"tensor: a Python int in the data is too large to convert to {target}; give "
                         f"dtype=float64 to keep a large one approximately") from None
    except ValueError:
        raise InputError("tensor: expected a rectangular nested sequence (the same length at each depth), got "
                         "ragged data") from None
    except TypeError as e:
        raise InputTypeError(f"tensor: cannot convert the data to {dtype}: {e}") from None
    if bad.any():
        raise InputError(f"tensor: value cannot be converted to type {dtype} without overflow (first: "
                         f"{values[bad].flat[0]!r})")
    with np.errstate(invalid="ignore"):
        return values.astype(dtype)


def _infer_host_array(data, dtype=None):
    """NumPy array for host data, with PyTorch's ``tensor()`` rules: a NumPy array as it is (in native byte order;
    its values cast to ``dtype`` by the caller, wrapping as PyTorch's); other data (Python numbers, NumPy scalars,
    nested sequences of them, of arrays and of one-element tensors) in ``dtype``, else in the dtype PyTorch
    infers from all its numbers' types (float32 for Python floats, int64 for ints, a NumPy scalar's, array's or
    tensor's own dtype, promoted together), converted with PyTorch's overflow checks."""
    if type(data) not in (list, tuple) and not isinstance(data, (np.ndarray, np.generic, Tensor)) \
            and hasattr(data, "__array__"):
        data = np.asarray(data)  # (array-likes: a data frame, an image)
    if isinstance(data, np.ndarray):
        arr = data if data.dtype.isnative else data.astype(data.dtype.newbyteorder("="))
        _checked_array_dtype("tensor", arr.dtype)
        return arr
    dtypes, tensors = _data_dtypes(data)
    if dtype is None:
        dtype = functools.reduce(_promote_data_dtypes, sorted(dtypes, key=str) if len(dtypes) > 1 else dtypes)
    floats = any(d.kind in "fcV" for d in dtypes)  # (V: bfloat16)
    return _from_python(_items(data) if tensors else data, backend.as_dtype(dtype), floats)


def tensor(data, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A new tensor holding a copy of ``data`` (nested lists, scalars, NumPy/CuPy arrays, Tensors)."""
    if not isinstance(requires_grad, bool):  # (None too: PyTorch's tensor() has no default to fall back on)
        raise InputTypeError(f"tensor(): argument 'requires_grad' must be a bool, got {type(requires_grad).__name__}")
    if isinstance(data, Tensor):
        data = data._data
    if backend.is_cuda_array(data):
        arr = backend.copy(data)
        device = device if device is not None else backend.device_of(data)
    else:
        arr = np.array(_infer_host_array(data, dtype), copy=True)
    return _place(arr, dtype, device, requires_grad)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Like :func:`tensor` but without a copy when ``data`` already fits; a tensor stays in its graph (a cast or
    move of it is recorded, as PyTorch's)."""
    if isinstance(data, Tensor):
        return data.to(device=device if device is not None else data.device,
                       dtype=dtype if dtype is not None else data.dtype)
    if backend.is_cuda_array(data):
        return _place(data, dtype, device if device is not None else backend.device_of(data), False)
    return _place(_infer_host_array(data, dtype), dtype, device, False)


def _address(a):
    return a.data.ptr if backend.is_cuda_array(a) else a.__array_interface__["data"][0]


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False) -> Tensor:
    """``torch.asarray``: ``obj`` (a tensor, an array, Python data) as a tensor: sharing its memory where the
    dtype and device allow it (``copy=None``), always a copy (``copy=True``), or never one (``copy=False``: an
    error where one would be needed)."""
    if copy:
        out = as_tensor(obj, dtype, device).clone() if isinstance(obj, Tensor) else tensor(obj, dtype, device)
    else:
        out = as_tensor(obj, dtype, device)
        src = obj._data if isinstance(obj, Tensor) else obj
        if copy is False and not ((isinstance(src, np.ndarray) or backend.is_cuda_array(src)) and src.size
                                  and type(src) is type(out._data) and _address(src) == _address(out._data)):
            raise InputError(f"asarray: copy=False, but {type(obj).__name__} data as a tensor of dtype "
                             f"{out.dtype} on {out.device} needs a copy")
    if requires_grad is not False and requires_grad is not None:
        out = out.detach().requires_grad_(requires_grad)
    return out


def from_numpy(array: np.ndarray) -> Tensor:
    """A cpu tensor sharing memory with ``array``: refused, as PyTorch's, where the memory cannot be shared as a
    tensor's (a dtype that is not a number type of a tensor, a byte order not the machine's, a negative stride or
    one that is not a whole number of elements)."""
    if not isinstance(array, np.ndarray):
        raise InputTypeError(f"from_numpy: expected a numpy.ndarray, got {type(array).__name__}")
    _checked_array_dtype("from_numpy", array.dtype)
    if not array.dtype.isnative:
        raise InputError(f"from_numpy: given numpy array has byte order different from the native byte order "
                         f"({array.dtype.str}). Conversion between byte orders is currently not supported (copy it "
                         f"with array.astype(array.dtype.newbyteorder('=')))")
    if any(s < 0 for s in array.strides):
        raise InputError(f"from_numpy: at least one stride in the given numpy array is negative (strides "
                         f"{array.strides}), and tensors with negative strides are not supported (copy it with "
                         f"array.copy())")
    if any(s % array.itemsize for s in array.strides):
        raise InputError(f"from_numpy: given numpy array strides {array.strides} are not a multiple of the element "
                         f"byte size {array.itemsize}. Copy the numpy array to reallocate the memory")
    return Tensor._from_array(array, False)


def from_dlpack(obj) -> Tensor:
    """Zero-copy import of any DLPack producer (CuPy, NumPy, PyTorch, a Tensor)."""
    if not hasattr(obj, "__dlpack_device__"):
        raise InputTypeError(f"from_dlpack: expected an object with __dlpack__ (a tensor or array), got "
                             f"{type(obj).__name__}")
    kind, _ = obj.__dlpack_device__()
    if kind == 1:  # kDLCPU
        return Tensor._from_array(np.from_dlpack(obj), False)
    import cupy

    return Tensor._from_array(cupy.from_dlpack(obj), False)


def _host_number(v):
    """A 0-d tensor as the Python number it holds: PyTorch takes sizes, bounds and steps so
    (``arange(lengths.max())``)."""
    return v.item() if isinstance(v, Tensor) and v.ndim == 0 else v


def _shape(op, size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    size = tuple(_host_number(s) for s in size)
    for s in size:
        if not isinstance(s, numbers.Integral):  # (a type error, as PyTorch's)
            raise InputTypeError(f"{op}: expected a shape of non-negative ints, got {size}")
        if s < 0:
            raise InputError(f"{op}: expected a shape of non-negative ints, got {size}")
    return tuple(int(s) for s in size)


def _filled(fill, size, dtype, device, requires_grad):
    dev = backend.device(device)
    dtype = backend.as_dtype(dtype if dtype is not None else backend.get_default_dtype())
    with backend.on_device(dev), np.errstate(over="ignore"):  # (a float beyond float16's range fills infinity)
        xp = backend.xp(dev)
        arr = xp.empty(size, dtype) if fill is None else xp.full(size, fill, dtype)
    return _place(arr, None, dev, requires_grad)


def _options(op, size, named, sized=True):
    """The size (positional, or PyTorch's ``size=`` keyword) and the keywords PyTorch's creation functions also
    take: ``layout`` / ``pin_memory`` (accepted: one layout; pinning is moot here), ``memory_format`` and ``out``
    (applied by :func:`_finish`). ``sized``: a size must be given (an empty one is the 0-d shape)."""
    unknown = set(named) - {"size", "layout", "pin_memory", "memory_format", "out"}
    if unknown:
        raise InputTypeError(f"{op}() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    if "size" in named:
        if size:
            raise InputTypeError(f"{op}(): give the size positionally or as size=, not both")
        size = (named["size"],)
    elif sized and not size:  # (a 0-d tensor is asked for by an empty size, () or [], as in PyTorch)
        raise InputTypeError(f"{op}() missing 1 required positional argument: 'size'")
    return _shape(op, size)


def _finish(t, named):
    """``t`` in the asked ``memory_format`` and written into ``out`` where given (returned then, as PyTorch's)."""
    fmt = named.get("memory_format")
    if fmt is not None and fmt is not preserve_format:
        t = t.contiguous(memory_format=fmt)
    out = named.get("out")
    if out is None:
        return t
    if not isinstance(out, Tensor):
        raise InputTypeError(f"out must be a Tensor, got {type(out).__name__}")
    if tuple(out.shape) != tuple(t.shape):  # resized to the result, as PyTorch's out=
        out._data = backend.array_module(out._data).empty(t.shape, out._data.dtype)
    out.copy_(t)
    return out


def zeros(*size, dtype=None, device=None, requires_grad=False, **named):
    return _finish(_filled(0, _options("zeros", size, named), dtype, device, requires_grad), named)


def ones(*size, dtype=None, device=None, requires_grad=False, **named):
    return _finish(_filled(1, _options("ones", size, named), dtype, device, requires_grad), named)


def empty(*size, dtype=None, device=None, requires_grad=False, **named):
    return _finish(_filled(None, _options("empty", size, named), dtype, device, requires_grad), named)


def _fill_value(op, value, dtype):
    """``value`` (a number, NumPy scalar or 0-d tensor) and ``dtype`` (None: inferred from it, as PyTorch's: the
    default dtype for a float, int64 for an int) for a tensor filled with it: the number as it is written into
    dtype (truncated toward zero for an integer dtype, a negative one wrapped into an unsigned one), an error where
    PyTorch's full() refuses it (a value outside an integer dtype's range or float32's; an int beyond 64 bits)."""
    value = number_arg(op, "fill_value", value)
    if isinstance(value, np.generic):  # a NumPy scalar fills as the Python number it is (PyTorch's)
        value = value.item()
    if not isinstance(value, numbers.Number):
        raise InputTypeError(f"{op}: fill_value must be a number, got {type(value).__name__}")
    dtype = backend.as_dtype(dtype if dtype is not None else number_dtype(value))
    return backend.fit_number(op, value, dtype), dtype


def full(size, fill_value, dtype=None, device=None, requires_grad=False, **named):
    fill_value, dtype = _fill_value("full", fill_value, dtype)
    return _finish(_filled(fill_value, _options("full", (size,), named), dtype, device, requires_grad), named)


def _random(kind, size, dtype, device, requires_grad, low=0, high=None, generator=None):
    if kind != "randint" and dtype is not None and not backend.is_floating(backend.as_dtype(dtype)):
        raise InputTypeError(f"{kind}: expected a floating-point dtype, got {backend.as_dtype(dtype)} (before any "
                             f"number is drawn)")
    dev = backend.device(device)
    gen = backend.generator(dev, generator, kind)
    with backend.on_device(dev):
        if kind == "randint":
            if isinstance(gen, np.random.Generator):
                arr = gen.integers(low, high, size=size, dtype=np.int64)
            else:
                arr = gen.randint(low, high, size=size, dtype=np.int64)
            dtype = dtype if dtype is not None else backend.int64
        else:
            if kind == "randn":
                arr = gen.standard_normal(size, dtype=np.float32)
            elif isinstance(gen, np.random.Generator):
                arr = gen.random(size, dtype=np.float32)
            else:
                arr = gen.random_sample(size, dtype=np.float32)
            dtype = backend.as_dtype(dtype if dtype is not None else backend.get_default_dtype())
            if kind == "rand" and dtype in (backend.float16, backend.bfloat16):
                arr = below_one(arr.astype(dtype))  # a draw near 1 would round up to 1 in 16 bits
    return _place(arr, dtype, dev, requires_grad)


def below_one(a):
    """Uniform [0, 1) draws rounded to a 16-bit dtype: those that rounded up to 1 become its largest value
    below 1, so that the interval stays half-open (PyTorch's draws never give 1)."""
    top = a.dtype.type(1 - float(ml_dtypes.finfo(a.dtype).epsneg))  # (exact: 1 minus the spacing below 1)
    return backend.where(a >= 1, top, a)


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False, **named):
    """Uniform on [0, 1) (from ``generator``, a cpu :class:`minifused.Generator`, if given)."""
    return _finish(_random("rand", _options("rand", size, named), dtype, device, requires_grad,
                           generator=generator), named)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False, **named):
    """Standard normal (from ``generator`` if given)."""
    return _finish(_random("randn", _options("randn", size, named), dtype, device, requires_grad,
                           generator=generator), named)


def randint(low=None, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    """Integers in [low, high) (``randint(high, size)`` as in PyTorch when ``size`` is the 2nd arg; ``low``
    0 when only ``high=`` is given)."""
    low, high = _host_number(low), _host_number(high)
    if low is None:
        low = 0
    if high is None:
        low, high = 0, low
    elif isinstance(high, (tuple, list)):
        low, high, size = 0, low, high
    # PyTorch's size is a required tuple: randint(2, 5) is no single draw from [2, 5), randint(0, 5, 3) no shape
    if not isinstance(size, (tuple, list)):
        raise InputTypeError(f"randint: size must be a tuple of ints, got {type(size).__name__} ({size!r})")
    for name, v in (("low", low), ("high", high)):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool):
            raise InputTypeError(f"randint: {name} must be an int, got {type(v).__name__} ({v!r})")
    if high <= low:
        raise InputError(f"randint: expected low < high, got low={low}, high={high}")
    return _random("randint", _shape("randint", (size,)), dtype, device, requires_grad, low, high, generator=generator)


def integer_bounds(dtype, *values):
    """``values`` (bounds, steps) as PyTorch's arange, range, linspace and logspace take them for an integer
    ``dtype``: cast to it first (truncated toward zero), then spaced; so ``arange(0.5, 3.7, dtype=int64)`` is
    ``[0, 1, 2]`` and int64 ``linspace(0.9, 4.9, 9)`` spaces 0 to 4. Floating dtypes keep them as given."""
    if dtype is None or backend.is_floating(backend.as_dtype(dtype)):
        return values
    return tuple(int(v) if isinstance(v, numbers.Real) and not isinstance(v, bool) else v for v in values)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False, **named):
    if end is None:
        start, end = 0, start
    start, end, step = (number_arg("arange", name, v) for name, v in (("start", start), ("end", end), ("step", step)))
    for name, v in (("start", start), ("end", end), ("step", step)):
        if not isinstance(v, numbers.Real) or isinstance(v, bool):
            raise InputTypeError(f"arange: {name} must be a number, got {type(v).__name__}")
    start, end, step = integer_bounds(dtype, start, end, step)
    if not all(isinstance(v, numbers.Integral) or math.isfinite(v) for v in (start, end)):
        raise InputError(f"arange: unsupported range: {start} -> {end} (the bounds must be finite)")
    if step == 0 or step != step:
        raise InputError(f"arange: step must be nonzero, got {step}")
    if (end - start) * step < 0:
        raise InputError(f"arange: the bounds and the step's sign disagree (start={start}, end={end}, step={step}): "
                         f"a negative step needs end < start")
    if dtype is None:  # (NumPy floats count as floats: not Integral)
        floating = any(not isinstance(v, numbers.Integral) for v in (start, end, step))
        dtype = backend.get_default_dtype() if floating else backend.int64
    dev = backend.device(device)
    with backend.on_device(dev):
        arr = backend.xp(dev).arange(start, end, step, dtype=np.float64 if backend.is_floating(dtype) else np.int64)
    _options("arange", (), named, sized=False)
    return _finish(_place(arr, dtype, dev, requires_grad), named)


def _eye_size(name, position, value):
    """``n`` or ``m`` of ``eye`` as an int: an integer (a NumPy one, a one-element integer tensor), not a bool or
    float."""
    integer_tensor = isinstance(value, Tensor) and value.numel() == 1 and value.dtype.kind in "iu"
    if isinstance(value, bool) or not (isinstance(value, numbers.Integral) or integer_tensor):
        raise InputTypeError(f"eye(): argument '{name}' (position {position}) must be int, not "
                             f"{type(value).__name__}")
    value = int(value)
    if value < 0:
        raise InputError(f"eye: {name} must be greater or equal to 0, got {value}")
    return value


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    n = _eye_size("n", 1, n)
    m = None if m is None else _eye_size("m", 2, m)
    dev = backend.device(device)
    with backend.on_device(dev):
        arr = backend.xp(dev).eye(n, m, dtype=backend.as_dtype(dtype or backend.get_default_dtype()))
    return _place(arr, None, dev, requires_grad)


def _in_layout(t, x, fmt, op):
    """New tensor ``t`` (C order) laid out as ``memory_format`` ``fmt`` asks of a tensor like ``x`` (PyTorch's
    ``preserve_format`` default: as x)."""
    if result_format(op, x, fmt) is not contiguous_format:  # (channels-last, 4-d or 5-d)
        t._data = copy_in_layout(t._data, True)
    return t


def _like(fn):
    def like(input, *args, dtype=None, device=None, requires_grad=False, memory_format=preserve_format,  # noqa: A002
             **kwargs):
        if fn in (rand, randn) and not backend.is_floating(dtype or input.dtype):
            raise RuntimeError(f"{fn.__name__}_like: random floats need a floating-point dtype, got "
                               f"{dtype or input.dtype}")
        return _in_layout(fn(*args, input.shape, dtype=dtype or input.dtype, device=device or input.device,
                             requires_grad=requires_grad, **kwargs), input, memory_format, like.__name__)

    like.__name__ = fn.__name__ + "_like"
    return like


zeros_like = _like(zeros)
ones_like = _like(ones)
empty_like = _like(empty)
rand_like = _like(rand)
randn_like = _like(randn)


def full_like(input, fill_value, dtype=None, device=None, requires_grad=False,  # noqa: A002 - PyTorch's names
              memory_format=preserve_format):
    if isinstance(fill_value, Tensor) and fill_value.ndim != 0 or not isinstance(fill_value, (numbers.Number, Tensor)):
        shape = tuple(fill_value.shape) if isinstance(fill_value, Tensor) else ""
        raise InputTypeError(f"full_like: fill_value must be a number (or a 0-d tensor), got "
                             f"{type(fill_value).__name__}{shape}")
    fill_value, dtype = _fill_value("full_like", fill_value, dtype or input.dtype)
    return _in_layout(full(input.shape, fill_value, dtype=dtype, device=device or input.device,
                           requires_grad=requires_grad), input, memory_format, "full_like")


def randint_like(input, low=None, high=None, *, generator=None, dtype=None, device=None,  # noqa: A002
                 memory_format=preserve_format):
    """``randint(low, high, input.shape)`` in input's dtype and device (``randint_like(input, high)``: from 0)."""
    return _in_layout(randint(low, high, input.shape, generator=generator, dtype=dtype or input.dtype,
                              device=device or input.device), input, memory_format, "randint_like")


def _steps(name, steps):
    steps = _host_number(steps)
    if not isinstance(steps, numbers.Integral) or isinstance(steps, bool):
        raise InputTypeError(f"{name}: steps must be an int, got {type(steps).__name__}")
    if steps < 0:
        raise RuntimeError(f"{name}: number of steps must be non-negative, got {steps}")
    return int(steps)


def _check_ends(op, dtype, steps, start, end):
    """PyTorch's check of linspace's and logspace's bounds: numbers or 0-d tensors; those it writes (none for 0
    steps, start for 1) must fit ``dtype`` (float16, bfloat16 and float32 checked too)."""
    for name, v in (("start", start), ("end", end)):
        if isinstance(v, Tensor) and v.ndim:
            raise InputError(f"{op} only supports 0-dimensional start and end tensors, but got {name} with {v.ndim} "
                             f"dimension(s).")
    for v in (start, end)[:min(steps, 2)]:
        v = _host_number(v)
        v = v.item() if isinstance(v, np.generic) else v
        if isinstance(v, numbers.Real) and backend.scalar_overflows(v, dtype, backend.FLOAT_DTYPES):
            raise InputError(f"{op}: value cannot be converted to type {dtype} without overflow (got {v!r})")


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    """``steps`` values from ``start`` to ``end`` (both included), evenly spaced; the default dtype by default."""
    steps = _steps("linspace", steps)
    dtype = backend.as_dtype(dtype if dtype is not None else backend.get_default_dtype())
    _check_ends("linspace", dtype, steps, start, end)
    start, end = integer_bounds(dtype, _host_number(start), _host_number(end))
    dev = backend.device(device)
    with backend.on_device(dev):
        arr = backend.xp(dev).linspace(float(start), float(end), steps, dtype=np.float64)
    if not backend.is_floating(dtype):
        arr = backend.xp(dev).trunc(arr)  # integer dtypes round toward zero, as PyTorch's
    return _place(arr, dtype, dev, requires_grad)


def logspace(start, end, steps, base=10.0, dtype=None, device=None, requires_grad=False):
    """``base ** linspace(start, end, steps)``; the default dtype by default."""
    steps = _steps("logspace", steps)
    dtype = backend.as_dtype(dtype if dtype is not None else backend.get_default_dtype())
    _check_ends("logspace", dtype, steps, start, end)
    start, end = integer_bounds(dtype, _host_number(start), _host_number(end))  # (not base: it stays a float)
    dev = backend.device(device)
    with backend.on_device(dev):
        xp = backend.xp(dev)
        arr = float(base) ** xp.linspace(float(start), float(end), steps, dtype=np.float64)
    if not backend.is_floating(dtype):
        arr = backend.xp(dev).trunc(arr)
    return _place(arr, dtype, dev, requires_grad)


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of 0 .. n-1 (int64 by default), from minifused's generator (``manual_seed``)."""
    n = _host_number(n)
    if not isinstance(n, numbers.Integral) or isinstance(n, bool):
        raise InputTypeError(f"randperm: n must be an int, got {type(n).__name__}")
    if n < 0:
        raise RuntimeError(f"randperm: n must be non-negative, got {n}")
    dev = backend.device(device)
    with backend.on_device(dev):
        arr = backend.generator(dev, generator, "randperm").permutation(int(n))
    return _place(arr, dtype if dtype is not None else backend.int64, dev, requires_grad)


def numel(input) -> int:  # noqa: A002 - PyTorch's name
    """The number of elements of ``input``."""
    if not isinstance(input, Tensor):
        raise InputTypeError(f"numel(): argument 'input' must be Tensor, not {type(input).__name__}")
    return input.numel()


def is_tensor(obj) -> bool:
    """Whether ``obj`` is a minifused Tensor."""
    return isinstance(obj, Tensor)


def is_floating_point(input) -> bool:  # noqa: A002 - PyTorch's name
    """Whether ``input``'s dtype is a floating-point one (float16, bfloat16, float32, float64)."""
    if not isinstance(input, Tensor):
        raise InputTypeError(f"is_floating_point(): argument 'input' must be Tensor, not {type(input).__name__}")
    return backend.is_floating(input.dtype)


# ---- Tensor.new_*: a new tensor with this tensor's dtype and device unless given
def _new(fn):
    def new(self, *sizes, size=None, dtype=None, device=None, requires_grad=False):
        if size is not None:  # PyTorch's keyword: x.new_zeros(size=(2, 3))
            if sizes:
                raise InputTypeError(f"new_{fn.__name__}() got multiple values for argument 'size'")
            sizes = (size,)
        return fn(*sizes, dtype=self.dtype if dtype is None else dtype,
                  device=self.device if device is None else device, requires_grad=requires_grad)

    new.__name__ = "new_" + fn.__name__
    return new


new_zeros = _new(zeros)
new_ones = _new(ones)
new_empty = _new(empty)


def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
    fill_value, dtype = _fill_value("new_full", fill_value, self.dtype if dtype is None else dtype)
    return full(size, fill_value, dtype=dtype,
                device=self.device if device is None else device, requires_grad=requires_grad)


def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    return tensor(data, dtype=self.dtype if dtype is None else dtype,
                  device=self.device if device is None else device, requires_grad=requires_grad)


def normal(mean=0.0, std=1.0, size=None, *, dtype=None, device=None, requires_grad=False):
    """Normal samples: ``mean`` and ``std`` numbers (with ``size``) or tensors (broadcast together), as
    ``torch.normal``."""
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        like = mean if isinstance(mean, Tensor) else std
        shape = np.broadcast_shapes(tuple(getattr(mean, "shape", ())), tuple(getattr(std, "shape", ())))
        if isinstance(std, Tensor) and bool((std < 0).any()) or not isinstance(std, Tensor) and not std >= 0:
            raise InputError("normal: std must be >= 0")
        z = randn(tuple(shape), dtype=like.dtype, device=like.device)
        return (z * std + mean).detach().requires_grad_(requires_grad)
    if size is None:
        raise InputTypeError("normal: with number mean and std, pass size (e.g. normal(0.0, 1.0, size=(2, 3)))")
    if not std >= 0:
        raise InputError(f"normal: std must be >= 0, got {std}")
    z = randn(_shape("normal", (size,)), dtype=dtype, device=device)
    return (z * float(std) + float(mean)).detach().requires_grad_(requires_grad)


def _bernoulli_draw(op, like, p, generator=None):
    """0/1 draws in ``like``'s shape, dtype and device with probability ``p`` (a number, or a tensor that
    broadcasts to like's shape), as PyTorch's bernoulli."""
    if isinstance(p, Tensor):
        if p.device != like.device:
            raise RuntimeError(f"{op}: p is on {p.device} but the tensor is on {like.device}")
        prob = p._data
        outside = (prob < 0) | (prob > 1) | (prob != prob)
        if bool(outside.any()):
            raise InputError(f"{op}: probabilities must lie in [0, 1], got {float(prob[outside].ravel()[0])} in p")
    elif isinstance(p, numbers.Real) and not isinstance(p, bool):
        prob = float(p)
        if not 0.0 <= prob <= 1.0:
            raise InputError(f"{op} expects p to be in [0, 1], but got p={p}")
    else:
        raise InputTypeError(f"{op}: p must be a number or a tensor, got {type(p).__name__}")
    u = rand(tuple(like.shape), generator=generator, dtype=backend.float64, device=like.device)._data
    return (u < prob).astype(like.dtype)


def bernoulli(input, p=None, *, generator=None):  # noqa: A002 - PyTorch's name
    """0/1 samples, each 1 with the probability ``input`` holds there (or ``p`` for all), in input's dtype:
    ``torch.bernoulli``. Not differentiable (its result requires no grad)."""
    if not isinstance(input, Tensor) or not backend.is_floating(input.dtype):
        raise InputTypeError(f"bernoulli: expected a floating-point tensor of probabilities, got "
                             f"{input.dtype if isinstance(input, Tensor) else type(input).__name__}")
    return Tensor._from_array(_bernoulli_draw("bernoulli", input, input.detach() if p is None else p, generator))


def bernoulli_(self, p=0.5, *, generator=None):
    """``self`` filled in place with 0/1 draws, each 1 with probability ``p`` (stochastic depth's noise)."""
    draws = _bernoulli_draw("bernoulli_", self, p, generator)
    return self._write_("bernoulli_", lambda out: out.__setitem__(Ellipsis, draws))


def multinomial(input, num_samples, replacement=False, *, generator=None):  # noqa: A002 - PyTorch's name
    """``num_samples`` category indices per row of the weights ``input`` (1-D or 2-D), as
    ``torch.multinomial``: with replacement by the inverse of the cumulative weights, without by the
    Gumbel top-k of the log weights (drawn from ``generator``, a cpu :class:`minifused.Generator`, if given)."""
    op = "multinomial"
    if not isinstance(input, Tensor) or input.ndim not in (1, 2) or not backend.is_floating(input.dtype):
        raise InputTypeError(f"{op}: expected a 1-D or 2-D floating-point tensor of weights, got "
                             f"{type(input).__name__ if not isinstance(input, Tensor) else (input.ndim, input.dtype)}")
    if not isinstance(num_samples, numbers.Integral) or isinstance(num_samples, bool) or num_samples < 1:
        raise InputError(f"{op}: num_samples must be a positive int, got {num_samples!r}")
    xp = input._xp
    w = input._data.astype(np.float64).reshape(-1, input.shape[-1])
    if bool((w < 0).any()) or not bool(xp.isfinite(w).all()) or bool((w.sum(axis=1) <= 0).any()):
        raise InputError(f"{op}: weights must be finite, non-negative and have a positive sum in every row")
    k = w.shape[1]
    if not replacement and num_samples > k:
        raise InputError(f"{op}: cannot draw {num_samples} samples without replacement from {k} categories")
    u = rand(w.shape[0], num_samples if replacement else k, generator=generator, dtype=backend.float64,
             device=input.device)._data
    if replacement:
        cdf = xp.cumsum(w, axis=1)
        cdf /= cdf[:, -1:]
        out = xp.stack([xp.searchsorted(cdf[i], u[i], side="right") for i in range(w.shape[0])]) if len(w) else \
            xp.zeros((0, num_samples), np.int64)  # (a 2-D input of no rows: no draws, as PyTorch's)
        out = xp.minimum(out, k - 1)
    else:
        with np.errstate(divide="ignore"):
            keys = xp.log(w) - xp.log(-xp.log(xp.maximum(u, 1e-300)))
        out = xp.argsort(-keys, axis=1)[:, :num_samples]
    out = out.astype(np.int64)
    return Tensor._from_array(out.reshape(num_samples) if input.ndim == 1 else out)
