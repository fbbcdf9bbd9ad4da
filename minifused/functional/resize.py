"""``interpolate``, with PyTorch's arguments, modes and source-index arithmetic: above the adaptive poolings of
``layers`` and ``volume`` (its 'area' mode), which the convolutions' module imports."""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import backend
from ..ops import resample as R
from ..ops import clone
from ..ops.matmul import MatMul
from ..ops.shape import channels_last
from ..kernels import is_channels_last, to_layout
from ..ops._common import autocast_float32 as _autocast_float32
from ..tensor import Tensor
from ._checks import _check_tensor
from .layers import _is_int, adaptive_avg_pool1d, adaptive_avg_pool2d
from .volume import adaptive_avg_pool3d
from ..backend import InputError, InputTypeError, NotImplementedInputError

__all__ = ["interpolate"]


# ---------------------------------------------------------------- interpolate
_INTERP_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "area", "bicubic", "trilinear", "lanczos")


def _host_size(v):
    """A 0-d integer tensor as its int (PyTorch's size arguments take one, as SymInts); anything else as given."""
    if isinstance(v, Tensor) and v.ndim == 0 and not backend.is_floating(v.dtype) and v.dtype != backend.bool_:
        return int(v.item())
    return v


def _per_dim(op, name, value, dim, kind):
    if kind == "int":
        value = [_host_size(v) for v in value] if isinstance(value, (tuple, list)) else _host_size(value)
    if isinstance(value, (tuple, list)):
        if len(value) != dim:
            raise InputError(f"{op}: {name} must have {dim} entries (one per spatial dimension of the input), "
                             f"got {tuple(value)}")
        return tuple(value)
    return (value,) * dim


def _interp_sizes(op, input, size, scale_factor, recompute_scale_factor, mode):
    dim = input.ndim - 2
    spatial = tuple(input.shape[2:])
    if (size is None) == (scale_factor is None):
        raise InputError(f"{op}: exactly one of size and scale_factor must be given, got "
                         f"{'both' if size is not None else 'neither'}")
    if size is not None:
        if recompute_scale_factor:
            raise InputError(f"{op}: recompute_scale_factor is not meaningful with an explicit size")
        out = _per_dim(op, "size", size, dim, "int")
        if not all(_is_int(s) for s in out):
            raise InputTypeError(f"{op}: size must be an int or a tuple of ints, got {size!r}")
        scales = (None,) * dim
    else:
        scales = _per_dim(op, "scale_factor", scale_factor, dim, "float")
        if not all(isinstance(s, numbers.Real) and not isinstance(s, bool) for s in scales):
            raise InputTypeError(f"{op}: scale_factor must be a number or a tuple of numbers, got {scale_factor!r}")
        if not all(math.isfinite(s) and s > 0 for s in scales):
            raise InputError(f"{op}: scale_factor must be positive and finite, got {scale_factor!r}")
        out = tuple(int(math.floor(float(n) * float(s))) for n, s in zip(spatial, scales))
        scales = (None,) * dim if recompute_scale_factor else tuple(float(s) for s in scales)
    # (PyTorch's 'area' goes to the adaptive poolings unchecked: an empty output size gives an empty output there)
    if (min(out) <= 0 and mode != "area") or min(out) < 0 or min(spatial) <= 0:
        raise InputError(f"{op}: input and output sizes must be greater than 0, got input {spatial} and "
                         f"output {tuple(out)}")
    return tuple(int(s) for s in out), scales


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize a (N, C, L), (N, C, H, W) or (N, C, D, H, W) input as ``torch.nn.functional.interpolate``:
    ``'nearest'``, ``'nearest-exact'`` and ``'area'`` (3-D to 5-D), ``'linear'`` (3-D),
    ``'bilinear'`` and ``'bicubic'`` (4-D), ``'trilinear'`` (5-D), with PyTorch's source-index arithmetic
    (``align_corners`` and a given ``scale_factor`` as its kernels use them, unless ``recompute_scale_factor``)
    and its bicubic kernel (Keys' cubic convolution, a = -0.75, the border repeated). ``antialias=True`` (bilinear
    and bicubic, 4-D; ``'lanczos'`` needs it) filters as PyTorch's (and PIL's) when shrinking: see
    :func:`_antialias_matrix`."""
    op = "interpolate"
    _check_tensor(op, input)
    if mode not in _INTERP_MODES:
        # (PyTorch's is a NotImplementedError; the ValueError the other arguments' checks raise fits too)
        raise NotImplementedInputError(f"{op}: mode must be one of {', '.join(map(repr, _INTERP_MODES))}, "
                                       f"got {mode!r}")
    if input.ndim not in (3, 4, 5):
        raise NotImplementedError(f"{op}: expected a 3-D (N, C, L), 4-D (N, C, H, W) or 5-D (N, C, D, H, W) "
                                  f"input, got shape {tuple(input.shape)}")
    need = {"linear": 3, "bilinear": 4, "bicubic": 4, "trilinear": 5}.get(mode)
    if need is not None and input.ndim != need:
        raise NotImplementedError(f"{op}: got {input.ndim}D input, but {mode} mode needs {need}D input")
    if mode != "area":  # (the upsampling kernels are on PyTorch's cuda autocast float32 list)
        (input,) = _autocast_float32(input, devices=("cuda",))
    weighted = need is not None  # linear, bilinear, bicubic, trilinear
    if align_corners is not None and not weighted and mode != "lanczos":
        raise InputError(f"{op}: align_corners can only be set with the interpolating modes linear | bilinear | "
                         f"bicubic | trilinear, got mode {mode!r}")
    if antialias and (mode not in ("bilinear", "bicubic", "lanczos") or input.ndim != 4):
        raise InputError(f"{op}: antialias=True is restricted to the bilinear, bicubic and lanczos modes and needs a "
                         f"4-D input, got mode {mode!r} and a {input.ndim}-D input")
    if mode == "lanczos" and not antialias:
        raise InputError(f"{op}: mode 'lanczos' needs antialias=True (it is an antialiasing filter)")
    if mode == "lanczos" and align_corners:
        raise InputError(f"{op}: mode 'lanczos' does not support align_corners=True")
    out, scales = _interp_sizes(op, input, size, scale_factor, recompute_scale_factor, mode)
    if mode != "area" and input.shape[1] == 0:  # (PyTorch's upsampling checks; an empty batch passes)
        raise InputError(f"{op}: Non-empty {input.ndim}D data tensor expected but got a tensor with sizes "
                         f"{list(input.shape)} (no channels)")
    if input.dtype == backend.uint8 and mode in ("bilinear", "bicubic") and not input.is_cuda:
        return _uint8_resized(input, out, scales, mode, antialias, bool(align_corners))
    if antialias:
        if not backend.is_floating(input.dtype):
            raise InputTypeError(f"{op}: mode {mode!r} needs a floating-point input, got dtype {input.dtype}")
        return _antialiased(input, out, scales, mode, bool(align_corners))
    if mode == "area":
        return (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[input.ndim - 3](input, out)
    if weighted and not backend.is_floating(input.dtype):
        raise InputTypeError(f"{op}: mode {mode!r} needs a floating-point input, got dtype {input.dtype}")
    spatial = tuple(input.shape[2:])
    if weighted and tuple(out) == spatial and (mode != "bicubic" or input.is_cuda):
        # PyTorch's kernels copy where no size changes, whatever the scale (its bicubic on CUDA only: on the CPU it
        # interpolates at the given scale)
        return clone(input)
    steps = []
    wdtype = np.float64 if input.dtype == backend.float64 else np.float32
    kind = "cubic" if mode == "bicubic" else "linear"
    # (PyTorch's cpu 2-D nearest forward takes its vectorized kernel for an output of H + W <= 128 or a channels-last
    # input of more than 3 channels, else its generic one)
    vectorized = input.ndim == 4 and (sum(out) <= 128 or is_channels_last(input._data) and input.shape[1] > 3)
    for axis in range(input.ndim - 1, 1, -1):
        n, m, s = spatial[axis - 2], out[axis - 2], scales[axis - 2]
        if not input.is_cuda and (weighted and kind == "linear" and m == n
                                  or mode == "nearest" and vectorized and m in (n, 2 * n)):
            # PyTorch's cpu kernels ignore the scale factor along a dimension that keeps its size (the linear modes;
            # vectorized 2-D nearest, which also takes a doubled size as an exact 2x): its sizes give the same indices
            s = None
        # (PyTorch's generic cpu kernels place a float64 input's points in float64, then floor them as float32s)
        double = (input.dtype == backend.float64 and not input.is_cuda and (weighted or not vectorized),)
        if weighted:
            steps.append((kind, axis, n, m, s, bool(align_corners), wdtype) + double)
        else:
            steps.append(("nearest", axis, n, m, s, mode == "nearest-exact") + double)
    grad_steps = None
    if not weighted and not input.is_cuda:
        # PyTorch's cpu nearest backward takes its indices in float32 arithmetic, and ignores the scale along a
        # dimension that keeps its size or doubles it, where its forward does not (but the vectorized 2-D one):
        # its gradient reads other source indices
        kept = mode == "nearest"
        grad_steps = tuple(st[:4] + (None if kept and st[3] in (st[2], 2 * st[2]) else st[4], st[5]) for st in steps)
    return R.ResampleFn.apply(input, tuple(steps), grad_steps)


def _antialias_matrix(n, m, scale, align_corners, mode):
    """PyTorch's antialiased resampling of one axis of size ``n`` to ``m``, as an (m, n) matrix: output ``i``
    centred at ``s * (i + 0.5)`` (``s`` the input step: ``1/scale`` when a scale factor is used, else ``n/m``, or
    ``(n-1)/(m-1)`` with align_corners) takes the inputs within the filter's support (1 for bilinear's triangle,
    2 for bicubic's cubic, a = -0.5, 3 for lanczos' sinc(d) sinc(d / 3)), both stretched by ``s`` when it shrinks;
    each row's weights normalized to sum to 1."""
    if align_corners:
        s = (n - 1) / (m - 1) if m > 1 else 0.0
    else:
        s = 1.0 / scale if scale else n / m
    support = {"bilinear": 1.0, "bicubic": 2.0, "lanczos": 3.0}[mode] * max(s, 1.0)
    stretch = 1.0 / s if s >= 1.0 else 1.0
    w = np.zeros((m, n))
    for i in range(m):
        center = s * (i + 0.5)
        lo, hi = max(int(center - support + 0.5), 0), min(int(center + support + 0.5), n)
        d = np.abs((np.arange(lo, hi) - center + 0.5) * stretch)
        if mode == "bicubic":
            row = np.where(d < 1, (1.5 * d - 2.5) * d * d + 1, np.where(d < 2, ((-0.5 * d + 2.5) * d - 4) * d + 2, 0.0))
        elif mode == "lanczos":
            row = np.where(d < 3, np.sinc(d) * np.sinc(d / 3), 0.0)
        else:
            row = np.maximum(1.0 - d, 0.0)
        total = row.sum()
        w[i, lo:hi] = row / total if total else row
    return w


def _antialiased(input, out, scales, mode, align_corners):
    """``interpolate(..., antialias=True)`` of a 4-D input: each axis that changes size multiplied by its
    :func:`_antialias_matrix` (PyTorch's cpu kernel leaves an axis that keeps its size, whatever the scale), in the
    input's dtype (the products bypass matmul's autocast, as PyTorch's kernel is not on its lists)."""
    y = input
    for axis in (3, 2):
        n, m = input.shape[axis], out[axis - 2]
        if n == m:
            continue
        w = _antialias_matrix(n, m, scales[axis - 2], align_corners, mode).astype(input.dtype)
        w = Tensor._from_array(backend.to_device_bits(w, input.device))
        y = MatMul.apply(y, w.T) if axis == 3 else MatMul.apply(w, y)
    if y is input:
        return clone(input)
    # (PyTorch's antialiased kernel keeps a channels-last layout; the products give a contiguous one)
    return y.contiguous(memory_format=channels_last) if is_channels_last(input._data) else y


def _uint8_matrix(n, m, scale, align_corners, mode, antialias):
    """The (m, n) float64 weights of PyTorch's uint8 resampling of one axis: the antialiasing filter's
    (:func:`_antialias_matrix`) with ``antialias``; else bilinear's triangle at the same centres (half a pixel
    further with align_corners), or bicubic's Keys kernel (A = -0.75) at the float kernels' source positions, its
    taps clamped into the input."""
    if antialias:
        return _antialias_matrix(n, m, scale, align_corners, mode)
    s = ((n - 1) / (m - 1) if m > 1 else 0.0) if align_corners else (1.0 / scale if scale else n / m)
    w = np.zeros((m, n))
    for i in range(m):
        if mode == "bilinear":
            delta = 0.5 if align_corners else 0.0
            centre = s * (i + 0.5 - delta)
            lo, hi = max(int(centre - 1 + 0.5 + delta), 0), min(int(centre + 1 + 0.5 + delta), n)
            row = np.maximum(1 - np.abs(np.arange(lo, hi) - centre + 0.5 - delta), 0.0)
            w[i, lo:hi] = row / row.sum() if row.sum() else row
        else:
            src = s * i if align_corners else s * (i + 0.5) - 0.5
            base = math.floor(src)
            t, a = src - base, R.CUBIC_A
            taps = [((a * d - 5 * a) * d + 8 * a) * d - 4 * a if far else ((a + 2) * d - (a + 3)) * d * d + 1
                    for d, far in ((t + 1, True), (t, False), (1 - t, False), (2 - t, True))]
            for k, tap in enumerate(taps):
                w[i, min(max(base - 1 + k, 0), n - 1)] += tap
    return w


def _uint8_resized(input, out, scales, mode, antialias, align_corners):
    """``interpolate`` of a uint8 (N, C, H, W) input in bilinear or bicubic mode, as PyTorch's cpu kernel (PIL's
    fixed-point resampling): each axis that changes size, the width first, by its weights scaled to int16 at the
    finest precision that keeps the largest below 2**15, summed in integers, rounded and clamped to 0..255."""
    y = input._data.astype(np.int64)
    for axis in (3, 2):
        n, m = input.shape[axis], out[axis - 2]
        if n == m:
            continue
        w = _uint8_matrix(n, m, scales[axis - 2], align_corners, mode, antialias)
        bits = 0
        while bits < 22 and int(0.5 + w.max() * (1 << (bits + 1))) < 1 << 15:
            bits += 1
        v = w * (1 << bits)
        wi = np.trunc(np.where(v < 0, v - 0.5, v + 0.5)).astype(np.int64)
        y = np.moveaxis(np.tensordot(np.moveaxis(y, axis, -1), wi, axes=([-1], [1])), -1, axis)
        y = np.clip((y + (1 << (bits - 1))) >> bits, 0, 255)
    y = y.astype(np.uint8)
    return Tensor._from_array(to_layout(y, True) if is_channels_last(input._data) else np.ascontiguousarray(y))
