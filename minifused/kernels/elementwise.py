"""Fused elementwise primitives: ReLU and GELU (both forms), forward and backward, the
bit-packed masks that ReLU and dropout keep for their backward, the other activations of
ops/activation.py (and sigmoid, tanh) in one pass each way, and the same-shape add of
16-bit arrays.

Each takes raw arrays; the CuPy versions are single fused kernels computing in
float32, the NumPy versions the reference (float64 inside). The forwards take
``out=``: the result is written there (it may be ``x`` itself: in place) and returned.

Mask layout (one for every path, see elementwise.cu): a uint32 array of ``mask_words(n)``
words; word ``w`` holds elements ``32w .. 32w+31`` of the C-order flat array, element
``32w+j`` in bit ``j``; bits past the last element are 0. That is NumPy's
``packbits(..., bitorder="little")`` read as little-endian uint32 words.

Layouts: the CUDA kernels run over memory, so a channels-last array (:func:`~minifused.kernels.is_channels_last`)
is taken as it is and gives a channels-last result; its ReLU mask is then in the order of its memory (NHWC),
which :func:`mask_apply` is told of. Other non-contiguous arrays go through a C-contiguous copy.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import backend
from . import (ARG, CTYPE, F32, Prepared, acc_dtype, c_contiguous, channels_last_strided, clear_unset, ctype,
               empty_channels_last, gelu_grad_ref, gelu_ref, get_kernel, is_channels_last, layout_like,
               to_channels_last)


def _dense(x):
    """``x`` itself where the kernels can run over its memory (C-contiguous or channels-last), else a C-contiguous
    copy."""
    import cupy

    return x if c_contiguous(x) or is_channels_last(x) else cupy.ascontiguousarray(x)


def _empty_as(x, dtype=None):
    """A new CuPy array of ``x``'s shape laid out as ``x`` (channels-last or C-contiguous)."""
    import cupy

    dtype = x.dtype if dtype is None else dtype
    return empty_channels_last(x.shape, dtype) if is_channels_last(x) else cupy.ndarray(x.shape, dtype)


def _writes_direct(out, x, xc):
    """Whether a kernel over ``xc`` (x's memory) may write ``out`` directly: ``out`` has ``x``'s layout."""
    return out is not None and xc is x and out.strides == x.strides and (out.flags.c_contiguous
                                                                        or is_channels_last(out))


def _into(out, y):
    """``y`` written into ``out`` (when given), for the reference paths."""
    if out is None:
        return y
    out[...] = y
    return out


def _unary_cuda(name, x, out, per_thread=1, consts=(), floats=()):
    """``name``(x) of elementwise.cu into ``out`` or a new array; a non-contiguous ``x`` or ``out`` goes
    through a contiguous copy / temporary (``out`` may be ``x``: in place). ``per_thread``: the elements
    the kernel takes a thread (a 16-byte chunk's for relu_fwd); the kernel's arguments after the element count:
    the NumPy scalars ``consts``, then the numbers ``floats`` (float32)."""
    xc = _dense(x)
    y = out if _writes_direct(out, x, xc) else _empty_as(xc)
    if x.size:
        _prepared(name, x.dtype, xc.data.device_id, -(-x.size // per_thread),
                  (ARG, ARG, np.int64(x.size), *consts) + (F32,) * len(floats))(xc.data.ptr, y.data.ptr, *floats)
    if out is not None and y is not out:
        out[...] = y
        y = out
    return y


def gelu_forward(x, approximate="none", out=None):
    """GELU(x): ``approximate`` is 'none' (erf form) or 'tanh'; ``out`` may be ``x`` (in place)."""
    if backend.is_cuda_array(x):
        return _unary_cuda("gelu_fwd_erf" if approximate == "none" else "gelu_fwd_tanh", x, out)
    return _into(out, gelu_ref(x, approximate).astype(x.dtype))


def gelu_backward(grad, x, approximate="none"):
    """d GELU(x)/dx · grad."""
    if backend.is_cuda_array(x):
        import cupy

        dx = cupy.ndarray(x.shape, x.dtype)
        if x.size:
            grad = grad if grad.dtype == x.dtype and c_contiguous(grad) else cupy.ascontiguousarray(grad, x.dtype)
            x = x if c_contiguous(x) else cupy.ascontiguousarray(x)
            _prepared("gelu_bwd_erf" if approximate == "none" else "gelu_bwd_tanh", x.dtype, x.data.device_id, x.size,
                      (ARG, ARG, ARG, np.int64(x.size)))(grad.data.ptr, x.data.ptr, dx.data.ptr)
        return dx
    return (grad.astype(np.float64) * gelu_grad_ref(x, approximate)).astype(x.dtype)


# ---------------------------------------------------------------- the other activations
# The kinds of activation.cuh's ActKind and KeepKind: the activations whose backward reads what the op keeps (the
# input; sigmoid's and tanh's output), and the piecewise ones that keep a bool of where the gradient passes.
ACTIVATIONS = {"silu": 0, "mish": 1, "elu": 2, "hardswish": 3, "softplus": 4, "sigmoid": 5, "tanh": 6, "scale": 7,
               "divide": 8, "shift": 9}
KEEP_ACTIVATIONS = {"leaky_relu": 0, "hardtanh": 1, "hardsigmoid": 2, "threshold": 3}
_ACTIVATION_DTYPES = (backend.float16, backend.bfloat16, backend.float32)


def fuses_activation(*arrays):
    """Whether the activation kernels take these arrays: CuPy arrays of one dtype, float32 or a 16-bit float (in
    float64 the ops stay on the array library's functions, which compute in double)."""
    return all(backend.is_cuda_array(a) and a.dtype == arrays[0].dtype for a in arrays) \
        and arrays[0].dtype in _ACTIVATION_DTYPES


def _floats(params, count):
    """``params`` as ``count`` float32 kernel arguments (zeros after them; rounded through NumPy's float32, which
    makes a number beyond its range infinite where the launch's packing would refuse it)."""
    return tuple(float(np.float32(p)) for p in params) + (0.0,) * (count - len(params))


def activation_forward(kind, x, params=(), out=None):
    """``kind`` (a key of ACTIVATIONS) of CUDA array ``x`` in one pass, computed in float32; ``params`` its
    numbers (ELU: alpha, scale, input scale; softplus: beta, threshold); ``out`` may be ``x`` (in place)."""
    return _unary_cuda("act_fwd", x, out, consts=(np.int32(ACTIVATIONS[kind]),), floats=_floats(params, 3))


def scale(x, s, divide):
    """A float32 / float16 / bfloat16 array times (``divide``: divided by) the number ``s``, computed in float32 and
    rounded once: one pass on the GPU (act_fwd), NumPy's float32 arithmetic on the cpu."""
    if backend.is_cuda_array(x) and x.size:
        return activation_forward("divide" if divide else "scale", x, (s,))
    return _with_number_ref(x, s, (lambda v, s: v / s) if divide else (lambda v, s: v * s))


def _with_number_ref(x, s, op):
    """``op(x, s)`` in float32 (x widened, s a float32), rounded once to x's dtype: scale's and shift's reference."""
    wide = x.astype(np.float32, copy=False)
    return backend.array_module(x).asarray(op(wide, np.float32(s))).astype(x.dtype, copy=False)


def shift(x, s, negate):
    """A float32 / float16 / bfloat16 array plus the number ``s`` (``negate``: ``s`` minus the array), computed in
    float32 and rounded once: one pass on the GPU (act_fwd), NumPy's float32 arithmetic on the cpu."""
    if backend.is_cuda_array(x) and x.size:
        return activation_forward("shift", x, (s, -1.0 if negate else 1.0))
    return _with_number_ref(x, s, (lambda v, s: s - v) if negate else (lambda v, s: v + s))


def activation_backward(kind, grad, kept, params=()):
    """``grad`` times the derivative of ``kind`` at ``kept`` (the input; sigmoid's and tanh's output), in one
    pass; the result is laid out as ``kept``."""
    kept = _dense(kept)
    grad = layout_like(grad, kept)
    dx = _empty_as(kept)
    if kept.size:
        _prepared("act_bwd", kept.dtype, kept.data.device_id, kept.size,
                  (ARG, ARG, ARG, np.int64(kept.size), np.int32(ACTIVATIONS[kind]), F32, F32, F32))(
            grad.data.ptr, kept.data.ptr, dx.data.ptr, *_floats(params, 3))
    return dx


def activation_keep_forward(kind, x, params=(), out=None, keep=True):
    """``(y, passes)`` of the piecewise ``kind`` (a key of KEEP_ACTIVATIONS; leaky_relu: the slope, hardtanh: the
    bounds, threshold: the threshold and value) of CUDA array ``x``: ``passes`` is a bool array laid out as ``x``'s
    dense form, whether the gradient passes at each element (None for ``keep=False``), taken before ``out`` (which
    may be ``x``) is written."""
    import cupy

    xc = _dense(x)
    y = out if _writes_direct(out, x, xc) else _empty_as(xc)
    passes = _empty_as(xc, cupy.bool_) if keep else None
    if x.size:
        _prepared("act_fwd_keep", x.dtype, xc.data.device_id, x.size,
                  (ARG, ARG, ARG, np.int64(x.size), np.int32(KEEP_ACTIVATIONS[kind]), F32, F32))(
            xc.data.ptr, y.data.ptr, passes.data.ptr if keep else 0, *_floats(params, 2))
    if out is not None and y is not out:
        out[...] = y
        y = out
    return y, passes


def keep_backward(grad, passes, scale=1.0, cut=None):
    """``grad * scale`` where ``passes``, else ``grad * cut`` (leaky_relu's slope) or, for ``cut`` None, 0
    (selected: an inf or NaN gradient stays out); laid out as ``passes``."""
    grad = layout_like(grad, passes)
    dx = _empty_as(passes, grad.dtype)
    if passes.size:
        _prepared("keep_bwd", grad.dtype, passes.data.device_id, passes.size,
                  (ARG, ARG, ARG, np.int64(passes.size), F32, F32, np.int32(cut is not None)))(
            grad.data.ptr, passes.data.ptr, dx.data.ptr, *_floats((scale, cut or 0), 2))
    return dx


def relu_forward(x, out=None):
    """max(x, 0) in one pass; ``out`` may be ``x`` (in place)."""
    if backend.is_cuda_array(x):
        if x.dtype not in CTYPE:  # integers, bool: CuPy's own ops
            return _into(out, backend.where(x > 0, x, x.dtype.type(0)))
        return _unary_cuda("relu_fwd", x, out, 16 // x.dtype.itemsize)
    return np.maximum(x, x.dtype.type(0), out=out)


# ---------------------------------------------------------------- bit-packed masks
def mask_words(n: int) -> int:
    """Number of uint32 words of the mask of ``n`` elements."""
    return -(-n // 32)


def pack_mask_ref(keep):
    """A bool array (any shape) as the packed uint32 mask of its C-order flat elements."""
    b = np.packbits(np.ascontiguousarray(keep).reshape(-1), bitorder="little")
    b = np.concatenate([b, np.zeros(-b.size % 4, np.uint8)])
    return b.view("<u4").astype(np.uint32, copy=False)


def unpack_mask_ref(mask, shape):
    """The bool array of ``shape`` that ``mask`` packs."""
    n = int(np.prod(shape))
    return np.unpackbits(mask.astype("<u4", copy=False).view(np.uint8), count=n,
                         bitorder="little").astype(bool).reshape(shape)


@functools.cache
def _kernel(dtype, name):
    """A kernel of elementwise.cu for ``dtype`` (S, the mask kernels' arithmetic: ``acc_dtype``)."""
    return get_kernel("elementwise.cu", name, (f"-DEW_T={ctype(dtype)}", f"-DEW_S={ctype(acc_dtype(dtype))}"))


def grid(n):
    """Blocks of 256 threads for n elements (grid-stride loops past 65535 * 8)."""
    return (max(1, min(-(-n // 256), 65535 * 8)),)


@functools.lru_cache(maxsize=1024)  # keyed by size: bounded for workloads of many shapes
def _prepared(name, dtype, dev, threads, params):
    """The prepared launch of elementwise.cu's ``name`` for ``dtype`` on device ``dev`` (CuPy's launch converts
    every argument on every call: more host time than the launch): blocks of 256 for ``threads`` threads,
    ``params`` as :class:`Prepared` takes them (the element count among the constants, the numbers that may
    differ from call to call as F32)."""
    return Prepared(_kernel(dtype, name), grid(threads), (256,), params)


def _chunk_launch(name, dtype, size, dev, *tail):
    """The prepared launch of a kernel that moves a 16-byte chunk per thread (relu_fwd_mask, mask_apply,
    add_same) over ``size`` elements of ``dtype`` on device ``dev``: blocks of 256 threads for the chunks; the
    arguments three addresses, then the element count and the constants ``tail``."""
    return _prepared(name, dtype, dev, -(-size * dtype.itemsize // 16), (ARG, ARG, ARG, np.int64(size), *tail))


def relu_mask(x, out=None):
    """``(relu(x), mask)``: the mask has a bit set where ``x > 0`` or ``x`` is NaN (the elements whose gradient
    passes; a NaN stays NaN and passes its gradient, as in PyTorch). ``out`` may be ``x`` (in place): the mask
    is taken before ``x`` is overwritten.
    Floating dtypes only."""
    if not backend.is_cuda_array(x):
        with np.errstate(invalid="ignore"):  # (bfloat16's comparisons warn of a NaN)
            mask = pack_mask_ref(~(x <= 0))
        return relu_forward(x, out=out), mask
    import cupy

    xc = _dense(x)
    # an ``out`` laid out otherwise gets the result through a temporary
    y = out if _writes_direct(out, x, xc) else _empty_as(xc)
    mask = cupy.ndarray((mask_words(x.size),), cupy.uint32)
    if x.size:
        _chunk_launch("relu_fwd_mask", x.dtype, x.size, x.data.device_id)(xc.data.ptr, y.data.ptr, mask.data.ptr)
    if out is not None and y is not out:
        out[...] = y
        y = out
    return y, mask


def _scale(dtype, scale):
    return np.float64(scale) if dtype == np.float64 else np.float32(scale)


def scaled_copy_ref(a, scale):
    """A new NumPy array of ``a * scale`` (in a's dtype, the product rounded once from float32, or float64 for
    float64; ``a``'s copy for a scale of 1), laid out as ``a`` (a channels-last gradient stays so); a NumPy
    scalar ``a`` (a 0-d op's gradient may be one) gives a 0-d array."""
    if scale == 1:
        return np.array(a, order="K")
    with np.errstate(invalid="ignore", over="ignore"):  # inf * 0 is NaN, a large value rounds to inf: no warnings
        return np.asarray(a * _scale(a.dtype, scale)).astype(a.dtype, copy=False)


def mask_apply(grad, mask, scale=1.0, channels_last=False):
    """``grad * scale`` where the mask bit of an element is set, else 0 (the backward of ReLU and
    dropout); ``channels_last``: the mask is in the order of a channels-last array's memory, and so is the
    result."""
    if not backend.is_cuda_array(grad):
        return clear_unset(scaled_copy_ref(grad, scale), unpack_mask_ref(mask, grad.shape))
    grad = to_channels_last(grad) if channels_last else _dense(grad)
    dx = _empty_as(grad)
    if grad.size:
        _chunk_launch("mask_apply", grad.dtype, grad.size, grad.data.device_id, _scale(grad.dtype, scale))(
            grad.data.ptr, mask.data.ptr, dx.data.ptr)
    return dx


# ---------------------------------------------------------------- casts among the float types
_CAST_DTYPES = (backend.float32, backend.float16, backend.bfloat16)


@functools.lru_cache(maxsize=1024)  # keyed by size, as _chunk_launch
def _cast_launch(src, dst, size, dev):
    kern = get_kernel("cast.cu", "cast", (f"-DCAST_FROM={ctype(src)}", f"-DCAST_TO={ctype(dst)}"))
    return Prepared(kern, grid(-(-size // 8)), (256,), (ARG, ARG, np.int64(size)))


def cast(x, dtype):
    """``x`` in ``dtype``: a CUDA array of float32, float16 or bfloat16 into another of them, C-contiguous or
    channels-last (kept), in one vectorized pass (cast.cu; CuPy's astype moves an element a thread and costs more
    host time: autocast casts every weight, and activations and gradients both ways, each step); anything else
    through ``backend.astype``."""
    dtype = backend.as_dtype(dtype)
    if not (backend.is_cuda_array(x) and x.dtype in _CAST_DTYPES and dtype in _CAST_DTYPES and x.dtype != dtype
            and (c_contiguous(x) or is_channels_last(x))):
        return backend.astype(x, dtype)
    y = _empty_as(x, dtype)
    if x.size:
        _cast_launch(x.dtype, dtype, x.size, x.data.device_id)(x.data.ptr, y.data.ptr)
    return y


# ---------------------------------------------------------------- same-shape add
_ADD_DTYPES = (backend.float16, backend.bfloat16, backend.float32)


def _takes_add_same(a, b):
    """Whether ``a + b`` runs on add_same: two CUDA arrays of one shape, one dtype (float32, float16 or bfloat16) and
    one layout (C-contiguous or channels-last, kept). It computes in float32 and rounds once, as CuPy's add does,
    but moves 16 bytes per thread (the residual adds and gradient sums of a 16-bit model) and costs less host time
    than CuPy's ufunc (the sums of small steps)."""
    return (backend.is_cuda_array(a) and backend.is_cuda_array(b) and a.dtype == b.dtype and a.dtype in _ADD_DTYPES
            and a.shape == b.shape and a.strides == b.strides and (c_contiguous(a) or is_channels_last(a)))


def add(a, b):
    """``a + b``: on add_same where :func:`_takes_add_same`; anything else (scalars, broadcasting, other dtypes or
    layouts, NumPy arrays) is ``a + b``."""
    if not _takes_add_same(a, b):
        return a + b
    out = _empty_as(a)
    if a.size:
        _chunk_launch("add_same", a.dtype, a.size, a.data.device_id)(a.data.ptr, b.data.ptr, out.data.ptr)
    return out


def add_into(a, b):
    """``a += b`` (``a`` returned): on add_same, written into ``a``, where :func:`_takes_add_same` (a residual
    block's ``out += shortcut``), else CuPy's or NumPy's in-place add."""
    if not _takes_add_same(a, b):
        a += b
    elif a.size:
        _chunk_launch("add_same", a.dtype, a.size, a.data.device_id)(a.data.ptr, b.data.ptr, a.data.ptr)
    return a


def mask_add_fuses(a, b, channels_last=False):
    """Whether :func:`mask_add_apply` takes ``a`` and ``b`` in one pass: two arrays of one shape and dtype, NumPy
    (the reference) or CUDA ones that :func:`add` takes to add_same, laid out in the mask's order (channels-last
    with ``channels_last``, else C-contiguous)."""
    if type(a) is not type(b) or a.shape != b.shape or a.dtype != b.dtype or a.strides != b.strides:
        return False
    if not backend.is_cuda_array(a):
        return isinstance(a, np.ndarray)
    return a.dtype in _ADD_DTYPES and (channels_last_strided(a) if channels_last else c_contiguous(a))


def mask_add_apply(a, b, mask, channels_last=False):
    """``mask_apply(add(a, b), mask)``, in one pass (the kernel rounds the sum once, as add_same does, so the
    result is the two ops' bit for bit) where :func:`mask_add_fuses`, else those two ops."""
    if not (backend.is_cuda_array(a) and mask_add_fuses(a, b, channels_last)):
        return mask_apply(add(a, b), mask, channels_last=channels_last)
    dx = _empty_as(a)
    if a.size:
        _prepared("mask_add_apply", a.dtype, a.data.device_id, -(-a.size * a.dtype.itemsize // 16),
                  (ARG, ARG, ARG, ARG, np.int64(a.size)))(a.data.ptr, b.data.ptr, mask.data.ptr, dx.data.ptr)
    return dx
