"""Fused elementwise primitives: ReLU and GELU (both forms), forward and backward, and the
bit-packed masks that ReLU and dropout keep for their backward.

Each takes raw arrays; the CuPy versions are single fused kernels computing in
float32, the NumPy versions the reference (float64 inside). The forwards take
``out=``: the result is written there (it may be ``x`` itself: in place) and returned.

Mask layout (one for every path, see elementwise.cu): a uint32 array of ``mask_words(n)``
words; word ``w`` holds elements ``32w .. 32w+31`` of the C-order flat array, element
``32w+j`` in bit ``j``; bits past the last element are 0. That is NumPy's
``packbits(..., bitorder="little")`` read as little-endian uint32 words.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .. import backend

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_erf64 = np.vectorize(math.erf, otypes=[np.float64])


def _gelu_reference(x, approximate):
    x = x.astype(np.float64)
    if approximate == "tanh":
        inner = _SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)
        return 0.5 * x * (1.0 + np.tanh(inner))
    return 0.5 * x * (1.0 + _erf64(x / math.sqrt(2.0)))


def _gelu_grad_reference(x, approximate):
    x = x.astype(np.float64)
    if approximate == "tanh":
        inner = _SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)
        t = np.tanh(inner)
        dinner = _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * x ** 2)
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * dinner
    cdf = 0.5 * (1.0 + _erf64(x / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return cdf + x * pdf


_GELU_FWD = {
    "none": "float v = (float)x; y = (T)(0.5f * v * (1.0f + erff(v * 0.70710678118654752f)));",
    "tanh": ("float v = (float)x; float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);"
             "y = (T)(0.5f * v * (1.0f + tanhf(u)));"),
}
_GELU_BWD = {
    "none": ("float v = (float)x; float cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752f));"
             "float pdf = 0.3989422804014327f * expf(-0.5f * v * v);"
             "dx = (T)((float)g * (cdf + v * pdf));"),
    "tanh": ("float v = (float)x; float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);"
             "float t = tanhf(u); float du = 0.7978845608028654f * (1.0f + 0.134145f * v * v);"
             "dx = (T)((float)g * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du));"),
}


@functools.cache
def _cupy_kernel(body, name, params):
    import cupy

    return cupy.ElementwiseKernel(params[0], params[1], body, name)


def _into(out, y):
    """``y`` written into ``out`` (when given), for the reference paths."""
    if out is None:
        return y
    out[...] = y
    return out


def gelu(x, approximate="none", out=None):
    """GELU(x): ``approximate`` is 'none' (erf form) or 'tanh'; ``out`` may be ``x`` (in place)."""
    if backend.is_cuda_array(x):
        kern = _cupy_kernel(_GELU_FWD[approximate], f"minifused_gelu_{approximate}", ("T x", "T y"))
        if out is None:
            return kern(x)
        kern(x, out)  # in place is safe: each element is read, then written, by one thread
        return out
    return _into(out, _gelu_reference(x, approximate).astype(x.dtype))


def gelu_backward(grad, x, approximate="none"):
    """d GELU(x)/dx · grad."""
    if backend.is_cuda_array(x):
        return _cupy_kernel(_GELU_BWD[approximate], f"minifused_gelu_bwd_{approximate}",
                            ("T g, T x", "T dx"))(grad, x)
    return (grad.astype(np.float64) * _gelu_grad_reference(x, approximate)).astype(x.dtype)


def relu(x, out=None):
    """max(x, 0) in one pass; ``out`` may be ``x`` (in place)."""
    if backend.is_cuda_array(x):
        kern = _cupy_kernel("y = ((float)x > 0.0f) ? x : (T)0.0f;", "minifused_relu", ("T x", "T y"))
        if out is None:
            return kern(x)
        kern(x, out)
        return out
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


# element type and accumulator type per dtype, for elementwise.cu and dropout.cu
CTYPES = {np.dtype(np.float32): ("float", "float"), np.dtype(np.float16): ("__half", "float"),
          backend.bfloat16: ("__nv_bfloat16", "float"), np.dtype(np.float64): ("double", "double")}


@functools.cache
def _raw_kernel(dtype, name):
    from . import get_kernel

    t, s = CTYPES[np.dtype(dtype)]
    return get_kernel("elementwise.cu", name, (f"-DEW_T={t}", f"-DEW_S={s}"))


def grid(n):
    """Blocks of 256 threads for n elements (grid-stride loops past 65535 * 8)."""
    return (max(1, min(-(-n // 256), 65535 * 8)),)


def relu_mask(x, out=None):
    """``(relu(x), mask)``: the mask has a bit set where ``x > 0`` (the elements whose gradient
    passes). ``out`` may be ``x`` (in place): the mask is taken before ``x`` is overwritten.
    Floating dtypes only."""
    if not backend.is_cuda_array(x):
        mask = pack_mask_ref(x > 0)
        return relu(x, out=out), mask
    import cupy

    xc = cupy.ascontiguousarray(x)
    # a non-contiguous ``out`` gets the result through a contiguous temporary
    direct = out is not None and out.flags.c_contiguous and x.flags.c_contiguous
    y = out if direct else cupy.empty(x.shape, x.dtype)
    mask = cupy.empty(mask_words(x.size), cupy.uint32)
    if x.size:
        _raw_kernel(x.dtype, "relu_fwd_mask")(grid(x.size + 31), (256,), (xc, y, mask, np.int64(x.size)))
    if out is not None and y is not out:
        out[...] = y
        y = out
    return y, mask


def _scale(dtype, scale):
    return np.float64(scale) if dtype == np.float64 else np.float32(scale)


def mask_apply(grad, mask, scale=1.0):
    """``grad * scale`` where the mask bit of an element is set, else 0 (the backward of ReLU and
    dropout)."""
    if not backend.is_cuda_array(grad):
        keep = unpack_mask_ref(mask, grad.shape)
        g = grad if scale == 1 else grad * _scale(grad.dtype, scale)
        return np.where(keep, g, 0).astype(grad.dtype)
    import cupy

    dx = cupy.empty(grad.shape, grad.dtype)
    grad = cupy.ascontiguousarray(grad)
    if grad.size:
        _raw_kernel(grad.dtype, "mask_apply")(grid(grad.size), (256,), (grad, mask, dx, np.int64(grad.size),
                                                                         _scale(grad.dtype, scale)))
    return dx
