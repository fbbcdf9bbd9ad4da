"""What every op family needs: operand preparation (devices, broadcasting, dtype
promotion, Python scalars), the differentiable cast, and reducing a broadcast
gradient to its input's shape."""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from .. import backend
from ..kernels import c_contiguous, columns
from ..kernels import elementwise as _ew
from ..autograd import Function, is_grad_enabled, no_grad
from ..tensor import Tensor, number_arg  # noqa: F401 - number_arg: the ops take it from here
from ..backend import InputError, InputTypeError


def host_int(v):
    """A 0-d integer tensor as the int it holds, as PyTorch takes one wherever an int goes (``x.view(n, -1)``,
    ``topk(k)``, ``one_hot(y, y.max() + 1)``); anything else as it is, for the caller's own check."""
    if isinstance(v, Tensor) and v.ndim == 0 and v.dtype.kind in "iu":
        return v.item()
    return v


class Cast(Function):
    """``x`` in another dtype, and the gradient back in x's (one kernel each way among the CUDA float types)."""

    @staticmethod
    def forward(ctx, x, dtype):
        ctx.in_dtype = x.dtype
        return _ew.cast(x, dtype)

    @staticmethod
    def backward(ctx, g):
        return _ew.cast(g, ctx.in_dtype)

    @staticmethod
    def backward_graph(ctx, g):
        return cast(g, ctx.in_dtype)


def cast(x: Tensor, dtype) -> Tensor:
    dtype = backend.as_dtype(dtype)
    if x.dtype == dtype:
        return x
    if x.requires_grad and not backend.is_floating(dtype):
        if dtype.kind == "c" and is_grad_enabled():
            raise InputTypeError(f"cannot make a {dtype} tensor of one that requires grad: minifused's autograd has "
                                 f"no complex numbers (detach() the tensor, or compute under no_grad())")
        return Tensor._from_array(x._data.astype(dtype), False)
    return Cast.apply(x, dtype)


def autocast_lower(*tensors, devices=None):
    """``tensors`` as the lower-precision ops take them inside an autocast region on their device
    (``minifused.autocast``: linear, the convolutions, the matrix products): each floating tensor of
    another dtype cast to the region's (a recorded cast, so float32 weights get float32 gradients), the
    rest as they are. Outside a region, ``tensors`` unchanged. ``devices`` (device types, None for all)
    names where the op is on PyTorch's lower-precision list, whose cpu and cuda lists differ (``mv``,
    ``addr``: cuda only); on other devices its tensors are left as they are."""
    dtypes = backend.autocast_dtypes()
    if not dtypes:
        return tensors
    if devices is not None:
        dtypes = {k: v for k, v in dtypes.items() if k in devices}
    return tuple(_autocast_cast(t, dtypes) for t in tensors)


def _autocast_cast(t, dtypes):
    if not isinstance(t, Tensor) or not backend.is_floating(t.dtype) or t.dtype == backend.float64:
        return t
    dtype = dtypes.get(t.device.type)
    return t if dtype is None or t.dtype == dtype else cast(t, dtype)


def autocast_float32(*tensors, devices=None):
    """``tensors`` as the float32 ops take them inside an autocast region on their device (the losses, and
    on cuda softmax, layer and group norm): float16 / bfloat16 tensors cast up to float32; outside,
    unchanged. ``devices`` (device types, None for all) names where the op is on PyTorch's float32 list,
    whose cpu and cuda lists differ (softmax: cuda only; the 3-d pools: cpu only); on other devices a
    low-precision tensor stays as it is."""
    dtypes = backend.autocast_dtypes()
    if not dtypes:
        return tensors
    return tuple(cast(t, backend.float32) if isinstance(t, Tensor) and t.device.type in dtypes
                 and (devices is None or t.device.type in devices)
                 and t.dtype in (backend.float16, backend.bfloat16) else t for t in tensors)


_CUDA_ONLY = ("cuda",)


def autocast_float32_on_cuda(*tensors):
    """:func:`autocast_float32` for the ops only PyTorch's cuda list widens: the pointwise math (exp, log, pow,
    rsqrt, reciprocal, ...), logsumexp, renorm, pdist, and the sums, products and norms that are not given a
    dtype (sum, prod, cumsum, cumprod, norm, vector and matrix norms). Like PyTorch's autocast, it applies where
    a user's code calls the op, so compositions written with these ops widen as PyTorch's Python ones do."""
    return autocast_float32(*tensors, devices=_CUDA_ONLY)


def autocast_promote(*tensors, devices=None):
    """``tensors`` as the promote ops take them inside an autocast region on their device (cuda:
    grid_sample, addcmul, ...; cpu: cat, stack, index_copy): the floating tensors (float64 aside) cast to
    float32 if any of them is float32, else left in the region's dtype; outside, unchanged. ``devices`` as
    for :func:`autocast_float32`."""
    dtypes = backend.autocast_dtypes()
    if not dtypes:
        return tensors
    eligible = [isinstance(t, Tensor) and t.device.type in dtypes and (devices is None or t.device.type in devices)
                and t.dtype in (backend.float32, backend.float16, backend.bfloat16) for t in tensors]
    if not any(ok and t.dtype == backend.float32 for ok, t in zip(eligible, tensors)):
        return tensors
    return tuple(cast(t, backend.float32) if ok else t for ok, t in zip(eligible, tensors))


class autocast_off:  # noqa: N801 - a context manager, as minifused.autocast
    """A region with every autocast region off, for an op that PyTorch runs as one kernel whose dtypes are
    decided once (bilinear): its inner products then compute in the dtypes it gave them."""

    def __enter__(self):
        dtypes = backend.autocast_dtypes()
        self._saved = dict(dtypes)
        dtypes.clear()
        return self

    def __exit__(self, *exc):
        dtypes = backend.autocast_dtypes()
        dtypes.clear()
        dtypes.update(self._saved)
        return False


def dense(a):
    """``a`` C-contiguous (a copy only where it is not), keeping its shape: NumPy's and CuPy's
    ``ascontiguousarray`` turn a 0-d array into a 1-d one."""
    out = backend.array_module(a).ascontiguousarray(a)
    return out if out.ndim == a.ndim else out.reshape(a.shape)


def dense_results(cls):
    """A reduction or scan Function (class decorator) whose forward gives C-contiguous results, as PyTorch's
    reductions and scans allocate theirs: NumPy's follow a strided input's memory order, so a channels-last
    tensor's ``sum(3)`` came back strided and could not be ``view``-ed."""
    forward = cls.forward

    def contiguous_forward(ctx, *args, **kwargs):
        out = forward(ctx, *args, **kwargs)
        return tuple(_dense_result(o) for o in out) if isinstance(out, tuple) else _dense_result(out)
    cls.forward = staticmethod(contiguous_forward)
    return cls


def _dense_result(o):
    """An array result C-contiguous (itself where it is: the usual case, read from the flag alone); anything else
    (a NumPy scalar) as it is."""
    if isinstance(o, np.ndarray) or backend.is_cuda_array(o):
        return o if c_contiguous(o) else dense(o)
    return o


def unbroadcast_graph(grad, shape):
    """:func:`unbroadcast` of a gradient tensor, recorded (for a ``backward_graph``)."""
    return grad if tuple(grad.shape) == tuple(shape) else grad.sum_to_size(tuple(shape))


def unbroadcast(grad, shape):
    """Sum ``grad`` over the axes along which an input of ``shape`` was broadcast (float16 / bfloat16 in
    float32, rounded once, as PyTorch accumulates them: a bias's gradient summed in bfloat16 itself was off
    by percents)."""
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and grad.shape[lead + i] != 1)
    if not axes:
        return grad.reshape(shape)
    lead_sum = leading_sum(grad, len(axes)) if axes == tuple(range(len(axes))) else _around_sum(grad, axes)
    if lead_sum is not None:
        return lead_sum.reshape(shape)
    if grad.dtype in (backend.float16, backend.bfloat16):
        return grad.astype(np.float32).sum(axis=axes, keepdims=True).astype(grad.dtype).reshape(shape)
    return grad.sum(axis=axes, keepdims=True).reshape(shape)


def leading_sum(a, lead, scale=1.0):
    """``a`` summed over its first ``lead`` axes on the GPU's column-sum kernels, times ``scale`` (float32 sums,
    rounded once; a bandwidth-bound pass where CuPy's reduction over leading axes is not), with the remaining
    axes' shape; None where they do not take it (not a C-contiguous CUDA array of float32, float16 or bfloat16, or
    2^31 rows or more, past the kernels' int rows). Narrow rows too: CuPy's reduction over a leading axis of few
    columns runs on few threads (tens of times slower from 65536 rows)."""
    rows, cols, rest = math.prod(a.shape[:lead]), math.prod(a.shape[lead:]), a.shape[lead:]
    if not (backend.is_cuda_array(a) and a.dtype.name in columns.DTYPES and a.flags.c_contiguous
            and rows < 2 ** 31):
        return None
    return columns.column_sums(a.reshape(rows, cols), scale=scale).reshape(rest)


def trailing_sum(a, trail, scale=1.0):
    """``a`` summed over its last ``trail`` axes on the GPU's row-sum kernel, times ``scale`` (float32 sums, rounded
    once; one launch where CuPy's reduction costs several times its host time), with the leading axes' shape; None
    where it does not take ``a`` (as :func:`leading_sum`, and :func:`columns.row_sums_apply`)."""
    lead = a.shape[:a.ndim - trail]
    rows, cols = math.prod(lead), math.prod(a.shape[a.ndim - trail:])
    if not (backend.is_cuda_array(a) and a.dtype.name in columns.DTYPES and a.flags.c_contiguous
            and columns.row_sums_apply(rows, cols, a.data.device_id)):
        return None
    return columns.row_sums(a.reshape(rows, cols), scale=scale).reshape(lead)


def trailing_broadcast(g, shape, trail, scale=1.0):
    """The gradient of :func:`trailing_sum`: ``g`` (the kept axes' values, with or without the reduced axes as 1s)
    times ``scale`` repeated over the last ``trail`` axes of ``shape``, in one pass on the GPU (where CuPy's product
    and copy of a broadcast take two); None where the kernel does not take ``g``."""
    m = math.prod(shape[len(shape) - trail:])
    if not (backend.is_cuda_array(g) and g.dtype.name in columns.DTYPES and g.flags.c_contiguous and g.size and m):
        return None
    return columns.row_broadcast(g.reshape(-1), m, scale).reshape(shape)


def _around_sum(a, axes):
    """``a`` summed over leading and trailing axes around kept middle ones (a per-channel bias's gradient, (N, C,
    H, W) to C) in two passes, float32 sums rounded once: the trailing axes' row sums, then their column sums
    (:func:`leading_sum`); CuPy's one reduction there runs a block per kept element, few for few channels. None
    where the kernels do not take ``a`` (as leading_sum), ``axes`` have another pattern, or 128 or more elements
    are kept (CuPy's block per kept element then fills the GPU, and its one pass is the faster)."""
    lead = next((i for i in range(len(axes)) if axes[i] != i), len(axes))
    trail = a.ndim - (len(axes) - lead)
    if not (0 < lead < trail and axes[lead:] == tuple(range(trail, a.ndim)) and backend.is_cuda_array(a)
            and a.dtype.name in columns.DTYPES and a.flags.c_contiguous and a.size
            and math.prod(a.shape[lead:trail]) < 128):
        return None
    rows = a.reshape(math.prod(a.shape[:trail]), -1).sum(axis=1, dtype=np.float32)
    out = leading_sum(rows.reshape(math.prod(a.shape[:lead]), -1), 1)
    return None if out is None else out.astype(a.dtype, copy=False)


def broadcast_shape(op, a_shape, b_shape):
    try:
        return np.broadcast_shapes(a_shape, b_shape)
    except ValueError:
        raise InputError(
            f"{op}: shapes {tuple(a_shape)} and {tuple(b_shape)} cannot be broadcast together") from None


_COMPLEX128 = np.dtype(np.complex128)


def _complex_of(dtype, complex_dtype):
    """The complex dtype of an op on real ``dtype`` and ``complex_dtype`` (PyTorch's: float64 makes it
    complex128; integers, bool and the narrower floats keep the complex one)."""
    return _COMPLEX128 if dtype == backend.float64 else complex_dtype


def promote(a_dtype, b_dtype):
    """PyTorch's rule: a complex beats a float, a float beats an integer; otherwise the wider type."""
    if a_dtype.kind == "c" or b_dtype.kind == "c":
        if a_dtype.kind == b_dtype.kind:
            return np.result_type(a_dtype, b_dtype)
        return _complex_of(b_dtype, a_dtype) if a_dtype.kind == "c" else _complex_of(a_dtype, b_dtype)
    fa, fb = backend.is_floating(a_dtype), backend.is_floating(b_dtype)
    if fa and not fb:
        return a_dtype
    if fb and not fa:
        return b_dtype
    if {a_dtype, b_dtype} == {backend.float16, backend.bfloat16}:
        return backend.float32
    return np.result_type(a_dtype, b_dtype)


def _category(dtype):
    return 3 if dtype.kind == "c" else 2 if backend.is_floating(dtype) else 0 if dtype == backend.bool_ else 1


def can_cast(src, dst) -> bool:
    """Whether an in-place op may write a result of dtype ``src`` into a tensor of ``dst``, PyTorch's rule: not a
    float into an integer or bool tensor, nor an integer into a bool one; a narrower dtype of the same kind is fine
    (``float32.addcmul_(float64, float64)``, ``int8 &= int64``)."""
    return _category(src) <= _category(dst)


def tensors_result_dtype(a, b):
    """dtype of ``a <op> b`` for two tensors (see :func:`promote_operands`)."""
    return promote_operands(a.dtype, a.ndim == 0, b.dtype, b.ndim == 0)


def promote_operands(a_dtype, a_zero_dim, b_dtype, b_zero_dim):
    """dtype of an op on two tensors of these dtypes, PyTorch's rule: a 0-d tensor beside a dimensioned one
    counts only where its kind (bool, integer, float) is higher (``x * tensor(2.0, dtype=float64)`` stays x's
    float32; ``int_x * tensor(0.5)`` is float32); else :func:`promote`."""
    if a_zero_dim != b_zero_dim:
        (dim, zero) = (b_dtype, a_dtype) if a_zero_dim else (a_dtype, b_dtype)
        if _category(zero) <= _category(dim):
            return dim
        if zero.kind == "c" and backend.is_floating(dim):  # their width (float32 and a 0-d complex128: complex64)
            return _complex_of(dim, np.dtype(np.complex64))
        return zero
    return promote(a_dtype, b_dtype)


def scalar_result_dtype(dtype, scalar):
    """dtype of ``tensor <op> python_scalar`` (the tensor's, unless the scalar is a wider kind)."""
    if isinstance(scalar, bool):
        return dtype
    if isinstance(scalar, numbers.Integral):
        return backend.int64 if dtype == backend.bool_ else dtype
    if isinstance(scalar, numbers.Real):
        return dtype if backend.is_floating(dtype) or dtype.kind == "c" else backend.get_default_dtype()
    if isinstance(scalar, numbers.Complex) and dtype.kind != "c":
        if dtype == backend.float16:
            raise InputTypeError("a float16 tensor with a complex number would be complex32 (PyTorch's ComplexHalf), "
                                 "which minifused does not have; convert the tensor with .float() first")
        if backend.is_floating(dtype):
            return _complex_of(dtype, np.dtype(np.complex64))
        return _COMPLEX128 if backend.get_default_dtype() == backend.float64 else np.dtype(np.complex64)
    return dtype


_INT_BOUNDS = {np.dtype(t): (int(np.iinfo(t).min), int(np.iinfo(t).max))
               for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64)}


def wrapped(dtype, value):
    """A Python integer as an integer dtype's op takes it: wrapped around into the dtype's range, as PyTorch casts
    the scalar into the tensor's dtype (``uint8 - 1`` wraps, ``int8 + 1000`` is ``int8 + (-24)``, ``uint8 == -1``
    compares with 255), where NumPy raises OverflowError. Anything else as it is (an integer outside even uint64's
    range too: NumPy's OverflowError then, as PyTorch's)."""
    bounds = _INT_BOUNDS.get(dtype)
    if bounds is None or isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return value
    lo, hi = bounds
    if lo <= value <= hi or not -2 ** 63 <= value < 2 ** 64:
        return value
    return (int(value) - lo) % (hi - lo + 1) + lo


def bfloat16_rounded(dtype, value):
    """A Python number beside a bfloat16 tensor rounded to bfloat16 first, as PyTorch's comparisons, ``%`` and
    ``fmod`` take it (``bfloat16 tensor([1.3]) == 1.3`` holds); NumPy would use it unrounded, in float32."""
    if dtype != backend.bfloat16 or isinstance(value, bool) or not isinstance(value, numbers.Real):
        return value
    return float(backend.bfloat16.type(value))


def check_integer_divisor(op, a, b):
    """PyTorch's integer ``//``, ``%``, ``fmod`` and rounded ``div`` raise on a zero divisor ``b`` on the cpu, where
    NumPy gives 0. Its CUDA kernels do not check, and neither is a device array checked here (that would wait for
    the device)."""
    t = a if isinstance(a, Tensor) else b
    if t.dtype.kind not in "iu" or type(t._data) is not np.ndarray or any(
            isinstance(v, Tensor) and v._data.size == 0 for v in (a, b)):  # (an empty result divides nothing)
        return
    if (b._data == 0).any() if isinstance(b, Tensor) else b == 0:
        raise RuntimeError(f"{op}: integer division by zero (ZeroDivisionError)")


def check_alpha(op, dtype, alpha):
    """``add`` / ``sub``'s ``alpha`` for a result of ``dtype`` (returned; a 0-d tensor as its number, see
    :func:`number_arg`), PyTorch's checks: a number; a bool only for a bool result; no float for an integer (or bool)
    one."""
    alpha = number_arg(op, "alpha", alpha)
    if not isinstance(alpha, numbers.Number) or isinstance(alpha, complex):
        raise InputTypeError(f"{op}: alpha must be a number, got {type(alpha).__name__}")
    if isinstance(alpha, bool) and dtype != backend.bool_:
        raise RuntimeError(f"{op}: Boolean alpha only supported for Boolean results.")
    if not backend.is_floating(dtype) and not isinstance(alpha, numbers.Integral):
        raise RuntimeError(f"{op}: For integral input tensors, argument alpha must not be a floating point number.")
    return alpha


def as_tensor_like(value, like: Tensor):
    """Arrays and array-likes become tensors on ``like``'s device; Python scalars stay scalars."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (bool, numbers.Number)):
        if type(value) is int and not -2 ** 63 <= value < 2 ** 64:  # (PyTorch's: no dtype holds it)
            raise OverflowError(f"int too big to convert: {value} (an operand must fit int64 or uint64)")
        return value
    arr = backend.to_device(value, like.device) if (
        isinstance(value, np.ndarray) or backend.is_cuda_array(value)) else like._xp.asarray(value)
    return Tensor._from_array(arr, False)


def _refuse_containers(op, a, b):
    for v in (a, b):
        if isinstance(v, (list, tuple, str, bytes, type(None))):
            raise InputTypeError(f"{op}(): expected a tensor or a number operand, got {type(v).__name__} (make it a "
                                 f"tensor first: minifused.tensor(...))")


def _cpu_scalar_moved(op, a, b):
    """``a`` and ``b`` on two devices: a 0-d cpu tensor joins a cuda one on its device, as PyTorch's binary ops take
    a cpu scalar tensor beside a cuda tensor (``cuda_acc > best_acc`` after a checkpoint loaded to the cpu); any
    other pair is refused."""
    for s, t in ((a, b), (b, a)):
        if s.ndim == 0 and s.device.type == "cpu" and t.device.type == "cuda":
            moved = s.to(t.device)
            return (moved, t) if s is a else (t, moved)
    raise RuntimeError(f"{op}: expected all tensors on the same device, got {a.device} and {b.device}")


def binary_operands(op, a, b, broadcast=True):
    """Check devices and shapes and promote dtypes of a binary op's operands.

    Either side may be a Python scalar (never both). A differentiable cast is
    applied where a tensor's dtype must change, so gradients flow back in the
    input's own dtype.
    """
    if isinstance(a, Tensor) and isinstance(b, Tensor):  # the common case first: nothing to check further
        da, db = a._data, b._data
        if (type(da) is type(db) and da.dtype == db.dtype and da.shape == db.shape
                and (type(da) is np.ndarray or da.data.device_id == db.data.device_id)):
            return a, b
    like = a if isinstance(a, Tensor) else b
    if not isinstance(like, Tensor):
        raise InputTypeError(f"{op}(): expected a Tensor operand, got {type(a).__name__} and {type(b).__name__}")
    _refuse_containers(op, a, b)  # (PyTorch's TypeError: a list is no operand of tensor arithmetic)
    a, b = as_tensor_like(a, like), as_tensor_like(b, like)
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        if type(a._data) is not type(b._data) or a.device != b.device:
            a, b = _cpu_scalar_moved(op, a, b)
        if broadcast and a.shape != b.shape:
            broadcast_shape(op, a.shape, b.shape)
        if a.dtype != b.dtype:
            dtype = tensors_result_dtype(a, b)
            a, b = cast(a, dtype), cast(b, dtype)
        return a, b
    t, s = (a, b) if isinstance(a, Tensor) else (b, a)
    dtype = scalar_result_dtype(t.dtype, s)
    if dtype != t.dtype:
        t = cast(t, dtype)
    s = wrapped(dtype, s)
    return (t, s) if isinstance(a, Tensor) else (s, t)


_FLOATS = frozenset(backend.FLOAT_DTYPES)
_HALF, _WIDE_FLOATS = (backend.float16, backend.bfloat16), (backend.float32, backend.float64)


def _result_dtype(a, b, floating):
    """The dtype of an op on ``a`` and ``b`` (one a tensor, the other a tensor or a Python number); ``floating``:
    the default float dtype where that is no float (true division)."""
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        dtype = tensors_result_dtype(a, b)
    else:
        t, s = (a, b) if isinstance(a, Tensor) else (b, a)
        dtype = scalar_result_dtype(t.dtype, s)
    return backend.get_default_dtype() if floating and not backend.is_floating(dtype) else dtype


def _as_operands(op, a, b):
    """``a`` and ``b`` with arrays made tensors, as :func:`binary_operands` takes them (unchanged where neither is a
    tensor: binary_operands refuses them)."""
    like = a if isinstance(a, Tensor) else b
    if not isinstance(like, Tensor):
        return a, b
    _refuse_containers(op, a, b)
    return as_tensor_like(a, like), as_tensor_like(b, like)


def float_operands(op, a, b):
    """:func:`binary_operands` for an op whose result is floating whatever its operands (true division, atan2,
    copysign, xlogy): integer and bool tensors are cast straight to the result's dtype (the default float dtype
    where no operand is floating), never first to a promoted integer dtype, and a Python int is not wrapped into
    one, as PyTorch computes them (``int8 / 300`` is 0.01 and ``uint8 / -1`` is -3, where the wrapped 44 and 255
    would divide)."""
    if isinstance(a, Tensor) and isinstance(b, Tensor) and a._data.dtype == b._data.dtype and \
            a._data.dtype in _FLOATS:
        return binary_operands(op, a, b)
    a, b = _as_operands(op, a, b)
    if any(isinstance(v, Tensor) and not backend.is_floating(v.dtype) for v in (a, b)):
        dtype = _result_dtype(a, b, True)
        a, b = (cast(v, dtype) if isinstance(v, Tensor) and not backend.is_floating(v.dtype) else v for v in (a, b))
    return binary_operands(op, a, b)


def opmath_operands(op, a, b, floating=False):
    """:func:`binary_operands` (:func:`float_operands` where ``floating``) for a product or a true quotient, and the
    dtype to round its result to (None: none). As PyTorch computes them, a float16 / bfloat16 result with a number
    (a Python number on either side, ``2 * x`` being ``x * 2``; a 0-d tensor of another dtype as the second operand)
    is computed in float32 and rounded once: NumPy and CuPy would round the number into the 16-bit dtype first
    (``float16 / 70000.`` would divide by inf, ``float16 * 0.1`` be one ulp off on a third of the values)."""
    if isinstance(a, Tensor):  # the common cases first: nothing to widen or cast
        if isinstance(b, Tensor):
            if a._data.dtype == b._data.dtype and (not floating or a._data.dtype in _FLOATS):
                return (*binary_operands(op, a, b), None)
        elif type(b) in (float, int) and a._data.dtype in _WIDE_FLOATS:
            return (*binary_operands(op, a, b), None)
    elif isinstance(b, Tensor) and type(a) in (float, int) and b._data.dtype in _WIDE_FLOATS:
        return (*binary_operands(op, a, b), None)
    a, b = _as_operands(op, a, b)
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        dtype = _result_dtype(a, b, floating)
        if dtype in _HALF and (not isinstance(b, Tensor) or not isinstance(a, Tensor) or
                               b.ndim == 0 and b.dtype != dtype):
            wide = (cast(v, backend.float32) if isinstance(v, Tensor) else v for v in (a, b))
            return (*binary_operands(op, *wide), dtype)
    return (*(float_operands if floating else binary_operands)(op, a, b), None)


def check_tensors(op, **named):
    """Each named argument a Tensor, as PyTorch's argument parser wants where an op has no overload for a Python
    number (``maximum(x, 0.)``, ``outer(x, 2)``): a TypeError naming the op, the argument and what came."""
    for name, v in named.items():
        if not isinstance(v, Tensor):
            raise InputTypeError(f"{op}(): argument '{name}' must be Tensor, not {type(v).__name__}")


def check_bools(op, **flags):
    """PyTorch's bool arguments (``keepdim``, ``descending``, ``equal_nan`` ...): a bool, no other truthy value (a
    string, a 1), refused as PyTorch's argument parser refuses it."""
    for name, v in flags.items():
        if not isinstance(v, (bool, np.bool_)):
            raise InputTypeError(f"{op}(): argument '{name}' must be bool, not {type(v).__name__}")


def dim_index(op, dim, ndim):
    """One ``dim`` as a non-negative int, in PyTorch's range [-ndim, ndim - 1] (0 and -1 for a 0-d tensor)."""
    dim = host_int(dim)
    if not isinstance(dim, numbers.Integral) or isinstance(dim, bool):
        raise InputTypeError(f"{op}: dim must be an int, got {type(dim).__name__}")
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{op}: dim {dim} is out of range for a {ndim}-d tensor")
    return int(dim) % n


def normalize_axis(op, axis, ndim):
    """``axis`` (int, tuple or None) as a tuple of non-negative ints, checked against ``ndim``."""
    if axis is None:
        return None
    if type(axis) is int and -ndim <= axis < ndim:  # the common cases first (the checks below cost more)
        return (axis % ndim,)
    n = ndim or 1
    if type(axis) is tuple and all(type(ax) is int and -n <= ax < n for ax in axis):
        return tuple([ax % n for ax in axis])
    try:
        axes = (axis,) if isinstance(axis, numbers.Integral) else tuple(axis)
    except TypeError:  # (not iterable: a float, say; refused below as not an int)
        axes = (axis,)
    out = []
    for ax in map(host_int, axes):
        if isinstance(ax, bool) or not isinstance(ax, numbers.Integral):
            raise InputTypeError(f"{op}(): argument 'dim' must be an int or a tuple of ints, got {axis!r}")
        if not -max(ndim, 1) <= ax < max(ndim, 1):
            raise IndexError(f"{op}: dimension {ax} out of range for a tensor of {ndim} dimensions")
        out.append(ax % max(ndim, 1))
    return tuple(out)


def shape_of(x):
    return x.shape if hasattr(x, "shape") else None


def write_out(op, result, out):
    """``result`` written into ``out`` by PyTorch's out= rules (``toplevel.out_forms``: resized, with its warning
    where it had elements; cast to its dtype where the result casts to it; refused where autograd would record it);
    ``out``."""
    if not isinstance(out, Tensor):
        raise InputTypeError(f"{op}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if result.requires_grad or (out.requires_grad and is_grad_enabled()):
        raise RuntimeError(f"{op}(): functions with out=... arguments don't support automatic differentiation, "
                           f"but one of the arguments requires grad.")
    if out.device != result.device:
        raise RuntimeError(f"{op}(): the result is on {result.device}, out on {out.device}")
    if not can_cast(result.dtype, out.dtype):
        raise RuntimeError(f"{op}(): result type {result.dtype} can't be cast to the desired output type "
                           f"{out.dtype}")
    if out.shape != result.shape:
        if out.numel():
            warnings.warn(f"{op}(): an output with one or more elements was resized since it had shape "
                          f"{list(out.shape)}, which does not match the required output shape "
                          f"{list(result.shape)}", UserWarning, stacklevel=3)
        out.resize_(result.shape)
    with no_grad():
        out.copy_(result)
    return out
