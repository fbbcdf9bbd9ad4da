"""Fractional max pooling (Graham, arXiv:1412.6071) with PyTorch's pseudo-random window sequence:
``fractional_max_pool2d`` and its ``_with_indices`` form.

The window starts and the argmax are computed on raw arrays (integers: no gradient flows through them);
the values are one ``gather`` of the input at the chosen indices, so autograd adds each output's gradient
back at its index, as PyTorch's backward does, on either device."""
from __future__ import annotations

import numbers as _numbers

from .. import backend as _backend
from ..ops import gather as _gather
from ..ops import rand as _rand
from ..ops.shape import reshape as _reshape
from ..tensor import Tensor as _Tensor
from ..backend import InputError, InputTypeError

__all__ = ["fractional_max_pool2d", "fractional_max_pool2d_with_indices"]

_HALVES = (_backend.float16, _backend.bfloat16)


def _ints(op, name, value):
    """An int or a pair of ints as a pair (the value checks are the caller's: PyTorch's differ per argument)."""
    pair = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(pair) != 2 or not all(isinstance(v, _numbers.Integral) and not isinstance(v, bool) for v in pair):
        raise RuntimeError(f"{op}: {name} must either be a single Int or tuple of Ints, got {value!r}")
    return int(pair[0]), int(pair[1])


def _output_size(op, input, output_size, output_ratio):
    if output_size is None and output_ratio is None:
        raise InputError(f"{op} requires specifying either an output_size or an output_ratio")
    if output_size is not None:
        oh, ow = _ints(op, "output_size", output_size)
        if oh < 0 or ow < 0:
            raise RuntimeError(f"{op}: output_size must be >= 0, got {output_size!r}")
        return oh, ow
    ratio = tuple(output_ratio) if isinstance(output_ratio, (tuple, list)) else (output_ratio, output_ratio)
    if len(ratio) != 2 or not all(isinstance(r, _numbers.Real) and not isinstance(r, bool) for r in ratio):
        raise InputError(f"{op}: output_ratio must be a number or a pair of numbers, got {output_ratio!r}")
    return int(input.shape[-2] * ratio[0]), int(input.shape[-1] * ratio[1])  # PyTorch's truncation


def _check_samples(op, samples, input, n, c):
    if not isinstance(samples, _Tensor):
        raise InputTypeError(f"{op}: _random_samples must be a tensor or None, got {type(samples).__name__}")
    if samples.ndim != 3:
        raise RuntimeError(f"{op}: Expect _random_samples to have 3 dimensions, got {samples.ndim}")
    if samples.shape[2] != 2:
        raise RuntimeError(f"{op}: Expect _random_samples.size(2) equals to 2; got {samples.shape[2]}.")
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


def _window_argmax(xp, x, sh, sw, kh, kw):
    """The plane index ``h * W + w`` (N, C, oH, oW) of each window's maximum: the first one in row-major
    order, or the last NaN where the window holds one (ATen's ``val > maxVal || isnan(val)``)."""
    n, c, h, w = x.shape
    rows = sh[:, :, :, None, None, None] + xp.arange(kh)[:, None]   # (N, C, oH, 1, kH, 1)
    cols = sw[:, :, None, :, None, None] + xp.arange(kw)            # (N, C, 1, oW, 1, kW)
    win = (rows * w + cols).reshape(n, c, sh.shape[2], sw.shape[2], kh * kw)
    vals = xp.take_along_axis(x.reshape(n, c, h * w), win.reshape(n, c, -1), axis=2).reshape(win.shape)
    if vals.dtype in _HALVES:  # exact in float32; the argmax and isnan of half types need no special path
        vals = vals.astype(xp.float32)
    pick = vals.argmax(-1)
    nan = xp.isnan(vals)
    if nan.any():
        last_nan = kh * kw - 1 - nan[..., ::-1].argmax(-1)
        pick = xp.where(nan.any(-1), last_nan, pick)
    return xp.take_along_axis(win, pick[..., None], axis=-1)[..., 0]


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    """``(output, indices)`` of :func:`fractional_max_pool2d` (indices: ``h * W + w`` in each plane, int64),
    whatever ``return_indices`` says, as PyTorch's form of this name."""
    op = "fractional_max_pool2d"
    if not isinstance(input, _Tensor):
        raise InputTypeError(f"{op}: expected a tensor input, got {type(input).__name__}")
    if input.ndim not in (3, 4):
        raise RuntimeError(f"{op}(): Expected 3D or 4D tensor, but got: {list(input.shape)}")
    for d in range(input.ndim - 3, input.ndim):
        if input.shape[d] == 0:
            raise RuntimeError(f"{op}(): Expected input to have non-zero size for non-batch dimensions, but got "
                               f"{list(input.shape)} with dimension {d} being empty.")
    if not _backend.is_floating(input.dtype):
        raise InputTypeError(f"{op}: expected a floating-point input, got dtype {input.dtype}")
    kh, kw = _ints(op, "kernel_size", kernel_size)
    if kh <= 0 or kw <= 0:
        raise RuntimeError(f"{op}(): kernel size should be greater than zero, but got {kh}x{kw}")
    oh, ow = _output_size(op, input, output_size, output_ratio)
    h, w = input.shape[-2:]
    if oh + kh - 1 > h:
        raise RuntimeError(f"{op}(): pool height {kh} too large relative to input height {h} (output height {oh})")
    if ow + kw - 1 > w:
        raise RuntimeError(f"{op}(): pool width {kw} too large relative to input width {w} (output width {ow})")
    x = input if input.ndim == 4 else _reshape(input, (1, *input.shape))
    n, c = x.shape[:2]
    if _random_samples is None:  # one (u_W, u_H) pair per plane from minifused's generator, as PyTorch's rand
        _random_samples = _rand(n, c, 2, dtype=input.dtype, device=input.device)
    else:
        _check_samples(op, _random_samples, input, n, c)
    xp = _backend.array_module(x._data)
    if n == 0 or oh == 0 or ow == 0:
        idx = xp.zeros((n, c, oh, ow), dtype=xp.int64)
    else:
        # PyTorch's CUDA kernel computes the sequence in float32 for the half types (its accscalar_t), the
        # CPU one in the input's dtype
        dtype = xp.float32 if xp is not _backend.np and input.dtype in _HALVES else input.dtype
        u = _random_samples._data[:n]
        sw = _intervals(xp, u[..., 0], w, ow, kw, dtype)
        sh = _intervals(xp, u[..., 1], h, oh, kh, dtype)
        idx = _window_argmax(xp, x._data, sh, sw, kh, kw)
    out = _gather(_reshape(x, (n, c, h * w)), 2, _Tensor(idx.reshape(n, c, oh * ow)))
    out, indices = _reshape(out, (n, c, oh, ow)), _Tensor(idx)
    if input.ndim == 3:
        return _reshape(out, (c, oh, ow)), _reshape(indices, (c, oh, ow))
    return out, indices


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
