"""Fused elementwise primitives: ReLU and GELU (both forms), forward and backward.

Each takes raw arrays; the CuPy versions are single fused kernels computing in
float32, the NumPy versions the reference (float64 inside).
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


def gelu(x, approximate="none"):
    """GELU(x): ``approximate`` is 'none' (erf form) or 'tanh'."""
    if backend.is_cuda_array(x):
        return _cupy_kernel(_GELU_FWD[approximate], f"minifused_gelu_{approximate}", ("T x", "T y"))(x)
    return _gelu_reference(x, approximate).astype(x.dtype)


def gelu_backward(grad, x, approximate="none"):
    """d GELU(x)/dx · grad."""
    if backend.is_cuda_array(x):
        return _cupy_kernel(_GELU_BWD[approximate], f"minifused_gelu_bwd_{approximate}",
                            ("T g, T x", "T dx"))(grad, x)
    return (grad.astype(np.float64) * _gelu_grad_reference(x, approximate)).astype(x.dtype)


def relu(x):
    """max(x, 0) in one pass."""
    if backend.is_cuda_array(x):
        return _cupy_kernel("y = ((float)x > 0.0f) ? x : (T)0.0f;", "minifused_relu", ("T x", "T y"))(x)
    return np.maximum(x, x.dtype.type(0))


def relu_backward(grad, out):
    """grad where the ReLU's output is positive, else 0, in one pass."""
    if backend.is_cuda_array(out):
        return _cupy_kernel("dx = ((float)y > 0.0f) ? g : (T)0.0f;", "minifused_relu_bwd",
                            ("T g, T y", "T dx"))(grad, out)
    return np.where(out > 0, grad, grad.dtype.type(0))
