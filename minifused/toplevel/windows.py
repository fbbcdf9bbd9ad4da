"""PyTorch's window functions (``torch.hann_window`` ...) and ``torch.vander``: new tensors of the default float
dtype unless ``dtype`` says, on ``device``. A periodic window (the default, what a DFT of its length wants) is the
symmetric window one longer with the last value left out; the values are computed in float64, then cast."""
from __future__ import annotations

import numbers

import numpy as np

from .. import backend, ops
from ..tensor import Tensor
from ..backend import InputError, InputTypeError

__all__ = ["hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window", "vander"]


def _window(op, length, periodic, dtype, device, requires_grad, values):
    """The window of ``length`` points: ``values(n, m)`` over n = 0 .. m-1 for the symmetric window of m points."""
    if isinstance(length, bool) or not isinstance(length, numbers.Integral):
        raise InputTypeError(f"{op}(): argument 'window_length' must be int, not {type(length).__name__}")
    if length < 0:
        raise RuntimeError(f"{op} requires non-negative window_length, got window_length={length}")
    if not isinstance(periodic, bool):
        raise InputTypeError(f"{op}(): argument 'periodic' must be bool, not {type(periodic).__name__}")
    dtype = backend.as_dtype(backend.get_default_dtype() if dtype is None else dtype)
    if not backend.is_floating(dtype):
        raise RuntimeError(f"{op} expects floating point dtypes, got: {dtype}")
    if length <= 1:
        w = np.ones(length)
    else:
        m = length + 1 if periodic else length
        w = values(np.arange(m, dtype=np.float64), m)[:length]
    return ops.tensor(w, dtype=dtype, device=device, requires_grad=requires_grad)


def _cosines(*coefficients):
    """sum_k (-1)^k a_k cos(2 pi k n / (m - 1)): the generalized cosine windows."""
    return lambda n, m: sum((-1) ** k * a * np.cos(2 * np.pi * k * n / (m - 1)) for k, a in enumerate(coefficients))


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                requires_grad=False):
    """0.5 - 0.5 cos(2 pi n / (N - 1))."""
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad, _cosines(0.5, 0.5))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=None, device=None,
                   pin_memory=False, requires_grad=False):
    """alpha - beta cos(2 pi n / (N - 1))."""
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   _cosines(float(alpha), float(beta)))


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                    requires_grad=False):
    """0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))."""
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad,
                   _cosines(0.42, 0.5, 0.08))


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                    requires_grad=False):
    """1 - |2n / (N - 1) - 1|: the triangular window."""
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, m: 1 - np.abs(2 * n / (m - 1) - 1))


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None,
                  pin_memory=False, requires_grad=False):
    """I0(beta sqrt(1 - (2n / (N - 1) - 1)^2)) / I0(beta), I0 the modified Bessel function of order 0."""
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, m: np.i0(float(beta) * np.sqrt(np.clip(1 - (2 * n / (m - 1) - 1) ** 2, 0, None)))
                   / np.i0(float(beta)))


def vander(x, N=None, increasing=False):  # noqa: N803 - PyTorch's name
    """The Vandermonde matrix of the 1-D ``x``: column j is x ** (N - 1 - j) (x ** j with ``increasing``), N
    columns (len(x) by default); built by a cumulative product, so its gradient is PyTorch's."""
    if not isinstance(x, Tensor):
        raise InputTypeError(f"vander(): argument 'x' must be Tensor, not {type(x).__name__}")
    if x.ndim != 1:
        raise RuntimeError(f"vander: x must be a one-dimensional tensor, got {x.ndim}-D")
    n = x.shape[0] if N is None else N
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise InputError(f"vander: N must be non-negative, got {N!r}")
    if x.dtype == backend.bool_:
        x = ops.cast(x, backend.int64)
    if n == 0:
        return ops.zeros(x.shape[0], 0, dtype=x.dtype, device=x.device)
    column = ops.unsqueeze(x, 1)
    parts = [ops.ones_like(column)]
    if n > 1:
        parts.append(ops.cumprod(ops.expand(column, x.shape[0], n - 1), 1))
    out = ops.cat(parts, 1)
    return out if increasing else ops.flip(out, (1,))
