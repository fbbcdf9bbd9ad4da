"""``minifused.fft``: PyTorch's ``torch.fft`` discrete Fourier transforms (``fft`` / ``ifft``, ``rfft`` / ``irfft``
along one dimension, ``fftfreq`` / ``rfftfreq``, ``fftshift`` / ``ifftshift``), and ``stft`` (``torch.stft``, at
the top level as in PyTorch), on the device's FFT (``numpy.fft`` / ``cupy.fft``).

minifused's autograd has no complex numbers, so a transform whose input requires a gradient (with grad mode on)
is refused; data features (a spectrogram of the input signals) are what these serve. The results take
PyTorch's dtypes: a real input of a floating dtype gives the complex dtype of its precision (float32 and the
integers: complex64, float64: complex128), ``irfft`` the real dtype of its complex input's."""
from __future__ import annotations

import numbers

import numpy as np

from . import backend, ops
from .autograd import is_grad_enabled
from .backend import InputError, InputTypeError
from .ops.linalg_common import dtype_name
from .tensor import Tensor

__all__ = ["fft", "ifft", "rfft", "irfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_NORMS = (None, "backward", "ortho", "forward")


def _complex_of(dtype):
    return np.dtype(np.complex128) if dtype in (np.float64, np.complex128) else np.dtype(np.complex64)


def _real_of(dtype):
    return np.dtype(np.float64) if dtype == np.complex128 else np.dtype(np.float32)


def _input(op, input, norm, complex_ok=True):  # noqa: A002 - PyTorch's name
    """``input``'s array, after the checks every transform shares."""
    if not isinstance(input, Tensor):
        raise InputTypeError(f"{op}(): argument 'input' must be Tensor, not {type(input).__name__}")
    if input.requires_grad and is_grad_enabled():
        raise InputTypeError(f"{op}: its result is complex and minifused's autograd has no complex numbers "
                             f"(detach() the input, or compute under no_grad())")
    if norm not in _NORMS:
        raise InputError(f"{op}: Invalid normalization mode: {norm!r} (expected one of 'backward', 'ortho', "
                         f"'forward')")
    if input.dtype in (np.float16, backend.bfloat16):
        raise RuntimeError(f"{op}: Unsupported dtype {dtype_name(input.dtype)}")
    if input.dtype.kind == "c" and not complex_ok:
        raise RuntimeError(f"{op} expects a real input tensor, but got {dtype_name(input.dtype)}")
    return input._data


def _dim_n(op, x, n, dim):
    if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
        raise InputTypeError(f"{op}(): argument 'dim' must be int, not {type(dim).__name__}")
    if not -max(x.ndim, 1) <= dim < max(x.ndim, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-max(x.ndim, 1)}, "
                         f"{max(x.ndim, 1) - 1}], but got {dim})")
    if n is not None and (isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1):
        raise RuntimeError(f"{op}: Invalid number of data points ({n}) specified")
    return n, dim


def _transform(op, name, input, n, dim, norm, out_dtype, complex_ok=True):  # noqa: A002
    x = _input(op, input, norm, complex_ok)
    n, dim = _dim_n(op, x, n, dim)
    if x.ndim == 0:
        raise IndexError(f"{op}: expected a tensor of at least one dimension, got a 0-d tensor")
    if x.dtype.kind in "biu":
        x = x.astype(backend.get_default_dtype())
    y = getattr(backend.array_module(x).fft, name)(x, n=n, axis=dim, norm=norm)
    return Tensor._from_array(y.astype(out_dtype(x.dtype), copy=False), False)


def fft(input, n=None, dim=-1, norm=None):  # noqa: A002
    """The one-dimensional discrete Fourier transform along ``dim`` (``n`` points: cropped or zero-padded)."""
    return _transform("fft_fft", "fft", input, n, dim, norm, _complex_of)


def ifft(input, n=None, dim=-1, norm=None):  # noqa: A002
    """The inverse of :func:`fft`."""
    return _transform("fft_ifft", "ifft", input, n, dim, norm, _complex_of)


def rfft(input, n=None, dim=-1, norm=None):  # noqa: A002
    """The transform of a real input, its ``n // 2 + 1`` non-negative frequencies."""
    return _transform("fft_rfft", "rfft", input, n, dim, norm, _complex_of, complex_ok=False)


def irfft(input, n=None, dim=-1, norm=None):  # noqa: A002
    """The real signal of ``n`` points (``2 * (m - 1)`` for ``m`` frequencies) whose :func:`rfft` is ``input``."""
    return _transform("fft_irfft", "irfft", input, n, dim, norm, _real_of)


def _freqs(op, n, d, values, dtype, device, requires_grad):
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise RuntimeError(f"{op}: expected n to be a non-negative int, got {n!r}")
    dtype = backend.get_default_dtype() if dtype is None else dtype
    return ops.tensor(values(int(n), float(d)), dtype=dtype, device=device, requires_grad=requires_grad)


def fftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of an :func:`fft` of ``n`` points spaced ``d`` apart."""
    return _freqs("fftfreq", n, d, np.fft.fftfreq, dtype, device, requires_grad)


def rfftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of an :func:`rfft` of ``n`` points spaced ``d`` apart."""
    return _freqs("rfftfreq", n, d, np.fft.rfftfreq, dtype, device, requires_grad)


def fftshift(input, dim=None):  # noqa: A002
    """``input`` rolled so that the zero frequency sits in the middle of each of ``dim`` (all when None)."""
    dims = tuple(range(input.ndim)) if dim is None else (dim,) if isinstance(dim, numbers.Integral) else tuple(dim)
    return ops.roll(input, [input.shape[d] // 2 for d in dims], dims)


def ifftshift(input, dim=None):  # noqa: A002
    """The inverse of :func:`fftshift`."""
    dims = tuple(range(input.ndim)) if dim is None else (dim,) if isinstance(dim, numbers.Integral) else tuple(dim)
    return ops.roll(input, [-(input.shape[d] // 2) for d in dims], dims)


_PAD_MODES = {"reflect": "reflect", "constant": "constant", "replicate": "edge", "circular": "wrap"}


def _stft_checks(x, n_fft, hop_length, win_length, window, pad_mode, return_complex):
    if return_complex is None and x.dtype.kind != "c":
        raise RuntimeError("stft requires the return_complex parameter be given for real inputs, and will further "
                           "require that return_complex=True in a future PyTorch release.")
    if x.ndim not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got a {x.ndim}D tensor")
    if pad_mode not in _PAD_MODES:
        raise InputError(f"stft: pad_mode must be one of {sorted(_PAD_MODES)}, got {pad_mode!r}")
    if isinstance(n_fft, bool) or not isinstance(n_fft, numbers.Integral) or n_fft < 1:
        raise RuntimeError(f"stft: expected n_fft > 0, but got n_fft={n_fft}")
    if hop_length < 1:
        raise RuntimeError(f"stft: expected hop_length > 0, but got hop_length={hop_length}")
    if not 0 < win_length <= n_fft:
        raise RuntimeError(f"stft: expected 0 < win_length <= n_fft, but got win_length={win_length}")
    if window is not None and (window.ndim != 1 or window.shape[0] != win_length):
        raise RuntimeError(f"stft: expected a 1D window tensor of size equal to win_length={win_length}, but got "
                           f"window with size {list(window.shape)}")


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, pad_mode="reflect",  # noqa: A002
         normalized=False, onesided=None, return_complex=None):
    """The short-time Fourier transform, PyTorch's ``torch.stft``: (freq, frames) for a 1-D signal, (batch, freq,
    frames) for a 2-D batch; frame t starts at ``t * hop_length`` of the signal (padded by ``n_fft // 2`` on each
    side when ``center``), is multiplied by ``window`` (``win_length`` points, centered in ``n_fft``; ones when
    None) and transformed. ``normalized`` scales by ``n_fft ** -0.5``; a real input gives the ``n_fft // 2 + 1``
    non-negative frequencies unless ``onesided=False``; ``return_complex=False`` gives the real and imaginary
    parts in a last dimension of 2."""
    x = _input("stft", input, None)
    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    _stft_checks(x, n_fft, hop_length, win_length, window, pad_mode, return_complex)
    xp = backend.array_module(x)
    if x.dtype.kind in "biu":
        x = x.astype(backend.get_default_dtype())
    if center:
        x = xp.pad(x, [(0, 0)] * (x.ndim - 1) + [(n_fft // 2, n_fft // 2)], mode=_PAD_MODES[pad_mode])
    if not 0 < n_fft <= x.shape[-1]:
        raise RuntimeError(f"stft: expected 0 < n_fft <= {x.shape[-1]}, but got n_fft={n_fft}")
    w = xp.ones(win_length, x.dtype) if window is None else window._data.astype(x.dtype, copy=False)
    left = (n_fft - win_length) // 2
    w = xp.pad(w, (left, n_fft - win_length - left))
    frames = 1 + (x.shape[-1] - n_fft) // hop_length
    starts = xp.arange(frames)[:, None] * hop_length + xp.arange(n_fft)
    segments = x[..., starts] * w  # (..., frames, n_fft)
    onesided = x.dtype.kind != "c" if onesided is None else onesided
    y = (xp.fft.rfft if onesided else xp.fft.fft)(segments, axis=-1, norm="ortho" if normalized else "backward")
    y = xp.swapaxes(y, -1, -2).astype(_complex_of(x.dtype), copy=False)
    if not return_complex:
        y = xp.stack([y.real, y.imag], axis=-1)
    return Tensor._from_array(xp.ascontiguousarray(y), False)
