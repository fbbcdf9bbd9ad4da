"""Fractional max pooling (Graham, arXiv:1412.6071) with PyTorch's pseudo-random window sequence:
``fractional_max_pool2d``, ``fractional_max_pool3d`` and their ``_with_indices`` forms (one code path for both).

The window starts and the argmax are computed on raw arrays (integers: no gradient flows through them);
the values are one ``gather`` of the input at the chosen indices, so autograd adds each output's gradient
back at its index, as PyTorch's backward does, on either device."""
from __future__ import annotations

import math as _math
import numbers as _numbers

from .. import backend as _backend
from ..ops import gather as _gather
from ..ops import rand as _rand
from ..ops._common import autocast_float32 as _autocast_float32
from ..ops.shape import reshape as _reshape
from ..tensor import Tensor as _Tensor
from ..backend import DtypeNotImplementedError, InputError, InputTypeError

__all__ = ["fractional_max_pool2d", "fractional_max_pool2d_with_indices", "fractional_max_pool3d",
           "fractional_max_pool3d_with_indices"]

_HALVES = (_backend.float16, _backend.bfloat16)


def _ints(op, name, value, d=2):
    """An int or ``d`` ints as a ``d``-tuple (the value checks are the caller's: PyTorch's differ per argument)."""
    ints = tuple(value) if isinstance(value, (tuple, list)) else (value,) * d
    if len(ints) != d or not all(isinstance(v, _numbers.Integral) and not isinstance(v, bool) for v in ints):
        count = "" if d == 2 else " of three"
        raise RuntimeError(f"{op}: {name} must either be a single Int or tuple{count} Ints, got {value!r}")
    return tuple(int(v) for v in ints)


def _output_size(op, input, output_size, output_ratio, d=2):
    if output_size is None and output_ratio is None:
        raise InputError(f"{op} requires specifying either an output_size or an output_ratio")
    if output_size is not None:
        out = _ints(op, "output_size", output_size, d)
        if min(out) < 0:
            raise RuntimeError(f"{op}: output_size must be >= 0, got {output_size!r}")
        return out
    ratio = tuple(output_ratio) if isinstance(output_ratio, (tuple, list)) else (output_ratio,) * d
    if len(ratio) != d or not all(isinstance(r, _numbers.Real) and not isinstance(r, bool) for r in ratio):
        raise InputError(f"{op}: output_ratio must be a number or {d} numbers, got {output_ratio!r}")
    return tuple(int(n * r) for n, r in zip(input.shape[-d:], ratio))  # PyTorch's truncation


def _check_samples(op, samples, input, n, c, d=2):
    if not isinstance(samples, _Tensor):
        raise InputTypeError(f"{op}: _random_samples must be a tensor or None, got {type(samples).__name__}")
    if samples.ndim != 3:
        raise RuntimeError(f"{op}: Expect _random_samples to have 3 dimensions, got {samples.ndim}")
    if samples.shape[2] != d:
        raise RuntimeError(f"{op}: Expect _random_samples.size(2) equals to {d}; got {samples.shape[2]}.")
    if samples.shape[0] < n:
        raise RuntimeError(f"{op}: Expect _random_samples.size(0) no less then input batch size ({n}), got "
                           f"{samples.shape[0]}")
    if samples.shape[1] != c:  # PyTorch reads past the planes it is given; here it is an error
        raise RuntimeError(f"{op}: Expect _random_samples.size(1) to equal the input's {c} channels, got "
                           f"{samples.shape[1]}")
    if samples.dtype != input.dtype:
        raise RuntimeError(f"{op}: Expect _random_samples to have the same dtype as input ({input.dtype}), got "
                           f"{samples.dtype}")
    if samples.device != input.device:
        raise RuntimeError(f"{op}: _random_samples is on {samples.device} but the input is on {input.device}")


def _intervals(xp, samples, n_in, n_out, k, dtype):
    """Window starts (N, C, n_out) from samples u (N, C), as ATen's ``generate_intervals``: for i < n_out - 1,
    ``int((i + u) * alpha) - int(u * alpha)`` with ``alpha = (n_in - k) / (n_out - 1)``, every step rounded
    to ``dtype`` as there (so the starts are PyTorch's bit for bit); the last window ends at the input's end."""
    u = samples.astype(dtype)[..., None]
    starts = xp.full(samples.shape + (n_out,), n_in - k, dtype=xp.int64)
    if n_out > 1:
        alpha = xp.asarray(n_in - k, dtype=dtype) / xp.asarray(n_out - 1, dtype=dtype)
        i = xp.arange(n_out - 1).astype(dtype)
        starts[..., :-1] = ((i + u) * alpha).astype(xp.int64) - (u * alpha).astype(xp.int64)
    return starts


def _window_argmax(xp, x, starts, kernel):
    """The plane index (``h * W + w``, ``t * H * W + h * W + w``) (N, C, *out) of each window's maximum, the
    windows starting at ``starts`` (one (N, C, out_i) array per spatial dimension): the first maximum in
    row-major order, or the last NaN where the window holds one (ATen's ``val > maxVal || isnan(val)``)."""
    n, c, *sizes = x.shape
    d, taps = len(sizes), _math.prod(kernel)
    win = 0
    for i, (st, k) in enumerate(zip(starts, kernel)):  # window positions (N, C, *out, *kernel), summed per dim
        shape = [n, c] + [1] * (2 * d)
        shape[2 + i], shape[2 + d + i] = st.shape[2], k
        win = win + (st[..., None] + xp.arange(k)).reshape(shape) * _math.prod(sizes[i + 1:])
    win = win.reshape(n, c, *(st.shape[2] for st in starts), taps)
    vals = xp.take_along_axis(x.reshape(n, c, -1), win.reshape(n, c, -1), axis=2).reshape(win.shape)
    if vals.dtype in _HALVES:  # exact in float32; the argmax and isnan of half types need no special path
        vals = vals.astype(xp.float32)
    pick = vals.argmax(-1)
    nan = xp.isnan(vals)
    # unconditionally: asking whether any NaN is there would wait for the GPU, which PyTorch's kernel never does
    last_nan = taps - 1 - nan[..., ::-1].argmax(-1)
    pick = _backend.where(nan.any(-1), last_nan, pick)
    return xp.take_along_axis(win, pick[..., None], axis=-1)[..., 0]


_DIM_NAMES = {2: ("height", "width"), 3: ("time", "height", "width")}


def _fractional(d, input, kernel_size, output_size, output_ratio, _random_samples):
    """``(output, indices)`` of the ``d``-dimensional fractional max pooling of (N, C, *spatial) or (C,
    *spatial) input: the checks, the window starts from the samples, the argmax, the gather."""
    op = f"fractional_max_pool{d}d"
    # float32 inside a cpu autocast region (PyTorch's cpu float32 list), the samples as the input
    input, _random_samples = _autocast_float32(input, _random_samples, devices=("cpu",))
    if not isinstance(input, _Tensor):
        raise InputTypeError(f"{op}: expected a tensor input, got {type(input).__name__}")
    if input.ndim not in (d + 1, d + 2):
        raise RuntimeError(f"{op}(): Expected {d + 1}D or {d + 2}D tensor, but got: {list(input.shape)}")
    for dim in range(input.ndim - d - 1, input.ndim):
        if input.shape[dim] == 0:
            raise RuntimeError(f"{op}(): Expected input to have non-zero size for non-batch dimensions, but got "
                               f"{list(input.shape)} with dimension {dim} being empty.")
    if not _backend.is_floating(input.dtype):
        raise DtypeNotImplementedError(f"{op}: expected a floating-point input, got dtype {input.dtype}")
    kernel = _ints(op, "kernel_size", kernel_size, d)
    if min(kernel) <= 0:
        # (PyTorch: RuntimeError in 2-D, the ValueError of its Python check in 3-D: InputError is both)
        raise InputError(f"{op}(): kernel size should be greater than zero, but got {'x'.join(map(str, kernel))}")
    out_size = _output_size(op, input, output_size, output_ratio, d)
    sizes = tuple(input.shape[-d:])
    strict = d == 3  # ATen checks o + k - 1 <= size in 2-D, but < size in 3-D (time, then width, then height)
    for i in ((0, 1) if d == 2 else (0, 2, 1)):
        name, k, o, size = _DIM_NAMES[d][i], kernel[i], out_size[i], sizes[i]
        if o + k - 1 > size - strict:
            raise RuntimeError(f"{op}(): pool {name} {k} too large relative to input {name} {size} (output {name} "
                               f"{o})")
    x = input if input.ndim == d + 2 else _reshape(input, (1, *input.shape))
    n, c = x.shape[:2]
    if _random_samples is None:  # d samples per plane from minifused's generator, as PyTorch's rand
        _random_samples = _rand(n, c, d, dtype=input.dtype, device=input.device)
    else:
        _check_samples(op, _random_samples, input, n, c, d)
    xp = _backend.array_module(x._data)
    if n == 0 or 0 in out_size:
        idx = xp.zeros((n, c, *out_size), dtype=xp.int64)
    else:
        # PyTorch's CUDA kernel computes the sequence in float32 for the half types (its accscalar_t), the
        # CPU one in the input's dtype
        dtype = xp.float32 if xp is not _backend.np and input.dtype in _HALVES else input.dtype
        u = _random_samples._data[:n]
        # ATen's sample order: (u_W, u_H) per plane in 2-D, (u_T, u_H, u_W) in 3-D
        order = (1, 0) if d == 2 else range(d)
        starts = [_intervals(xp, u[..., j], size, o, k, dtype)
                  for j, size, o, k in zip(order, sizes, out_size, kernel)]
        idx = _window_argmax(xp, x._data, starts, kernel)
    flat = _math.prod(out_size)
    out = _gather(_reshape(x, (n, c, _math.prod(sizes))), 2, _Tensor._from_array(idx.reshape(n, c, flat)))
    out, indices = _reshape(out, (n, c, *out_size)), _Tensor._from_array(idx)
    if input.ndim == d + 1:
        return _reshape(out, (c, *out_size)), _reshape(indices, (c, *out_size))
    return out, indices


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    """``(output, indices)`` of :func:`fractional_max_pool2d` (indices: ``h * W + w`` in each plane, int64),
    whatever ``return_indices`` says, as PyTorch's form of this name."""
    return _fractional(2, input, kernel_size, output_size, output_ratio, _random_samples)


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    """Max pooling over ``kernel_size`` windows placed by PyTorch's pseudo-random sequence, as
    ``torch.nn.functional.fractional_max_pool2d``: (N, C, H, W) or (C, H, W) input, output ``output_size``
    (an int or a pair) or ``int(size * output_ratio)``. ``_random_samples`` (N, C, 2) of the input's dtype
    fixes each plane's samples (u_W, u_H) in [0, 1); without it they come from minifused's generator.
    Given the same samples the windows, values and indices are PyTorch's. ``return_indices`` also returns
    the indices (``h * W + w`` in each plane, int64), which ``max_unpool2d`` takes."""
    out, indices = fractional_max_pool2d_with_indices(input, kernel_size, output_size, output_ratio,
                                                      return_indices, _random_samples)
    return (out, indices) if return_indices else out


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    """``(output, indices)`` of :func:`fractional_max_pool3d` (indices: ``t * H * W + h * W + w`` in each
    plane, int64), whatever ``return_indices`` says, as PyTorch's form of this name."""
    return _fractional(3, input, kernel_size, output_size, output_ratio, _random_samples)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    """:func:`fractional_max_pool2d` over (N, C, T, H, W) or (C, T, H, W) input, as
    ``torch.nn.functional.fractional_max_pool3d``: ``kernel_size`` and ``output_size`` an int or a triple,
    ``output_ratio`` a number or a triple; ``_random_samples`` (N, C, 3) holds each plane's (u_T, u_H, u_W).
    Given the same samples the windows, values and indices (``t * H * W + h * W + w``, which
    ``max_unpool3d`` takes) are PyTorch's."""
    out, indices = fractional_max_pool3d_with_indices(input, kernel_size, output_size, output_ratio,
                                                      return_indices, _random_samples)
    return (out, indices) if return_indices else out
