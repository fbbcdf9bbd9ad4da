"""Spatial resampling and lookup ops on raw arrays, generic over NumPy and CuPy: padding,
interpolation (nearest, nearest-exact, linear per axis), adaptive pooling, sliding blocks (unfold / fold),
embedding lookup and channel dropout. Forwards gather; backwards scatter-add (``np.add.at`` / ``cupyx.scatter_add``),
accumulating half-precision gradients in float32. Arguments arrive validated (functional/layers.py)."""
from __future__ import annotations

import math

import numpy as np

from .. import backend
from ..autograd import Function
from ..kernels import (acc_dtype, c_contiguous, channels_last_3d_strided, is_channels_last, to_channels_last_3d,
                       to_layout)
from ..kernels import dropout as KD
from ..kernels import pool as KP
from ..kernels import resample as KR
from ..kernels.gather import gather_rows
from ..tensor import Tensor
from .elementwise import zero_linked

__all__ = []
METHODS = {}  # Tensor methods and operators this module adds (ops/__init__ attaches them)


def _xp(a):
    return backend.array_module(a)


def _at(ndim, axis, index):
    """An index tuple selecting ``index`` along ``axis`` of an ``ndim``-D array."""
    return (slice(None),) * axis + (index,)


def _add_at(target, index, values):
    """``target[index] += values`` along the first axis, repeated indices adding up."""
    if type(target) is np.ndarray:
        np.add.at(target, index, values)
    else:
        import cupyx

        cupyx.scatter_add(target, index, values)


def _scatter_axis(g, index, axis, size):
    """The adjoint of ``take(x, index, axis)`` for an ``x`` of ``size`` along ``axis``."""
    xp = _xp(g)
    moved = xp.moveaxis(g, axis, 0)
    out = xp.zeros((size,) + moved.shape[1:], g.dtype)
    _add_at(out, index, moved)
    return xp.moveaxis(out, 0, axis)


_tables = {}


def device_table(like, fn, *args):
    """``fn(*args)`` (host index or weight arrays: one, or a tuple) on ``like``'s device, as a tuple.
    On CUDA it is copied once per device and arguments and kept, so a training step repeats no
    host-to-device copy (and a captured step contains none)."""
    if type(like) is np.ndarray:
        out = fn(*args)
        return out if isinstance(out, tuple) else (out,)
    key = (like.device.id, fn, args)
    hit = _tables.get(key)
    if hit is None:
        import cupy

        out = fn(*args)

        if len(_tables) > 512:  # geometries seldom vary; bound the cache all the same
            _tables.clear()
        with like.device:
            hit = tuple(cupy.asarray(a) for a in (out if isinstance(out, tuple) else (out,)))
        _tables[key] = hit
    return hit


class _Saved:
    """A stand-in for a node's context, holding what one of its op's forward or backward reads."""

    def __init__(self, **saved):
        self.__dict__.update(saved)


class LinearMap(Function):
    """``apply(x, fwd, adj)``: ``fwd(x)`` for ``fwd`` a linear map of arrays and ``adj`` its adjoint (the two fixed
    by a node's saved geometry, positions or weights). Its gradient is ``adj`` of the output's, recorded as the
    LinearMap the other way round: the ``backward_graph`` of a linear op (or of one linear given its saved
    positions, max pooling's) that differentiates any number of times."""

    @staticmethod
    def forward(ctx, x, fwd, adj):
        ctx.maps = (fwd, adj)
        return fwd(x)

    @staticmethod
    def backward(ctx, g):
        return ctx.maps[1](g), None, None

    @staticmethod
    def backward_graph(ctx, g):
        fwd, adj = ctx.maps
        return LinearMap.apply(g, adj, fwd), None, None


# ---------------------------------------------------------------- padding
_NP_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


class PadFn(Function):
    """``pads``: one (before, after) pair per dimension of the input; negative parts crop. PyTorch's
    index rules: reflect and replicate pad from the whole input, then crop; circular crops first and
    wraps the cropped input (its kernel copies from the already cropped output); constant either way."""

    @staticmethod
    def forward(ctx, x, pads, mode, value):
        xp = _xp(x)
        # PyTorch's constant, reflect and replicate pads keep a channels-last input's layout (channels_last_3d's
        # too), circular's does not
        keep_cl = mode != "circular" and is_channels_last(x)
        keep_cl3 = mode != "circular" and not c_contiguous(x) and channels_last_3d_strided(x)
        grow = [(max(lo, 0), max(hi, 0)) for lo, hi in pads]
        crop_first = mode == "circular"
        if crop_first:
            x = x[_crop(pads, x.shape)]
        y = x
        if any(lo or hi for lo, hi in grow) and mode == "constant" and backend.is_floating(x.dtype):
            # a fill and one copy into it (the array modules' pad costs several times their host time)
            y = xp.full(tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, grow)), value, x.dtype)
            y[tuple(slice(lo, lo + n) for n, (lo, _) in zip(x.shape, grow))] = x
        elif any(lo or hi for lo, hi in grow):
            kw = {"constant_values": value} if mode == "constant" else {}
            y = xp.pad(x, grow, mode=_NP_MODES[mode], **kw)
        if not crop_first:
            y = y[_crop(pads, y.shape)]
        ctx.meta = (x.shape, pads, mode)  # x.shape: the shape the pads were folded onto
        return to_layout(y, True) if keep_cl else to_channels_last_3d(y) if keep_cl3 else xp.ascontiguousarray(y)

    @staticmethod
    def backward(ctx, g):
        inner, pads, mode = ctx.meta
        xp = _xp(g)
        dtype = g.dtype
        uncrop = [(max(-lo, 0), max(-hi, 0)) for lo, hi in pads]
        cropped = any(lo or hi for lo, hi in uncrop)
        if mode == "constant" and not cropped:  # the input's window of g, in one copy
            window = tuple(slice(lo, lo + n) for n, (lo, _) in zip(inner, pads))
            return xp.ascontiguousarray(g[window]), None, None, None
        if cropped and mode != "circular":
            g = xp.pad(g, uncrop)
        if mode != "constant":
            g = g.astype(acc_dtype(dtype))
        for d, ((lo, hi), n) in enumerate(zip(pads, inner)):
            lo, hi = max(lo, 0), max(hi, 0)
            if lo or hi:
                g = _fold(xp, g, d, lo, hi, n, mode)
        if cropped and mode == "circular":
            g = xp.pad(g, uncrop)
        return xp.ascontiguousarray(g.astype(dtype, copy=False)), None, None, None

    @staticmethod
    def backward_graph(ctx, g):
        """Constant padding's gradient is the constant padding by the opposite pads; the other modes' is the
        adjoint of their (linear) padding, a :class:`LinearMap`."""
        inner, pads, mode = ctx.meta
        if mode == "constant":
            return PadFn.apply(g, tuple((-lo, -hi) for lo, hi in pads), "constant", 0), None, None, None
        meta = ctx.meta
        return LinearMap.apply(g, lambda a: PadFn.backward(_Saved(meta=meta), a)[0],
                               lambda a: PadFn.forward(_Saved(), a, pads, mode, 0)), None, None, None


def _crop(pads, shape):
    return tuple(slice(max(-lo, 0), n - max(-hi, 0)) for (lo, hi), n in zip(pads, shape))


def _fold(xp, g, d, lo, hi, n, mode):
    """The adjoint of padding dimension ``d`` (size ``n``) by ``(lo, hi)`` in ``mode``."""
    c = backend.copy(g[_at(g.ndim, d, slice(lo, lo + n))])
    left, right = g[_at(g.ndim, d, slice(0, lo))], g[_at(g.ndim, d, slice(lo + n, lo + n + hi))]
    if mode == "reflect":  # left position i came from input lo - i, right k from n - 2 - k
        c[_at(c.ndim, d, slice(1, lo + 1))] += xp.flip(left, d)
        c[_at(c.ndim, d, slice(n - 1 - hi, n - 1))] += xp.flip(right, d)
    elif mode == "replicate":
        c[_at(c.ndim, d, slice(0, 1))] += left.sum(axis=d, keepdims=True)
        c[_at(c.ndim, d, slice(n - 1, n))] += right.sum(axis=d, keepdims=True)
    elif mode == "circular":
        c[_at(c.ndim, d, slice(n - lo, n))] += left
        c[_at(c.ndim, d, slice(0, hi))] += right
    return c


# ---------------------------------------------------------------- interpolation
def nearest_index(in_size, out_size, scale, exact, double=False):
    """PyTorch's source index of each output position (float32 arithmetic, as its kernels):
    ``floor(dst * s)`` (nearest) or ``floor((dst + 0.5) * s)`` (nearest-exact), ``s = 1/scale_factor``
    when a scale factor is used, else ``in/out``; clamped to ``in - 1``. ``double``: its cpu forward's for a float64
    input, the position in float64 (nearest-exact's ``max(s (dst + 0.5) - 0.5, 0) + 0.5``) floored as a float32."""
    if double:
        s, dst = 1.0 / scale if scale else in_size / out_size, np.arange(out_size, dtype=np.float64)
        real = np.maximum(s * (dst + 0.5) - 0.5, 0) + 0.5 if exact else s * dst
        return np.minimum(np.floor(real.astype(np.float32)).astype(np.int64), in_size - 1)
    s = np.float32(1.0 / scale) if scale else np.float32(in_size) / np.float32(out_size)
    dst = np.arange(out_size, dtype=np.float32)
    if exact:
        dst = dst + np.float32(0.5)
    return np.minimum(np.floor(dst * s).astype(np.int64), in_size - 1)


def linear_weights(in_size, out_size, scale, align_corners, dtype, floorf=False):
    """PyTorch's (index0, index1, lambda1) of linear interpolation along one axis, computed in
    ``dtype`` (float32, or float64 for float64 inputs, as its kernels' accumulation type). ``floorf``: the
    position floored as a float32, as its cpu kernels' guard_index_and_lambda (a float64 position near a whole
    number can round up to it)."""
    t = np.dtype(dtype).type
    if align_corners:
        s = t(in_size - 1) / t(out_size - 1) if out_size > 1 else t(0)
        src = s * np.arange(out_size, dtype=dtype)
    else:
        s = t(1.0 / scale) if scale else t(in_size) / t(out_size)
        src = np.maximum(s * (np.arange(out_size, dtype=dtype) + t(0.5)) - t(0.5), t(0))
    i0 = np.minimum(np.floor(src.astype(np.float32) if floorf else src).astype(np.int64), in_size - 1)
    lam = np.clip(src - i0.astype(dtype), t(0), t(1))
    i1 = i0 + (i0 < in_size - 1)
    return i0, i1, lam


#: The cubic convolution's parameter in PyTorch's bicubic interpolation (Keys' kernel, as OpenCV's)
CUBIC_A = -0.75


def cubic_weights(in_size, out_size, scale, align_corners, dtype, floorf=False):
    """PyTorch's bicubic taps along one axis: (4, out) source indices (clamped to the input, as its kernels
    read the border) and (4, out) weights, computed in ``dtype`` as its kernels' accumulation type. The source
    position is linear's unclamped (``s * (dst + 0.5) - 0.5``, or ``s * dst`` with ``align_corners``); the
    weights of its fractional part ``t`` are the cubic convolution's at ``t + 1``, ``t``, ``1 - t``, ``2 - t``.
    ``floorf`` as :func:`linear_weights` (``t`` then clamped to [0, 1])."""
    t = np.dtype(dtype).type
    dst = np.arange(out_size, dtype=dtype)
    if align_corners:
        s = t(in_size - 1) / t(out_size - 1) if out_size > 1 else t(0)
        src = s * dst
    else:
        s = t(1.0 / scale) if scale else t(in_size) / t(out_size)
        src = s * (dst + t(0.5)) - t(0.5)
    base = np.floor(src.astype(np.float32)).astype(dtype) if floorf else np.floor(src)
    frac = np.clip(src - base, t(0), t(1)) if floorf else src - base
    a = t(CUBIC_A)

    def near(x):  # |x| <= 1
        return ((a + t(2)) * x - (a + t(3))) * x * x + t(1)

    def far(x):  # 1 < |x| < 2
        return ((a * x - t(5) * a) * x + t(8) * a) * x - t(4) * a

    weights = np.stack([far(frac + t(1)), near(frac), near(t(1) - frac), far(t(2) - frac)]).astype(dtype)
    index = np.clip(base.astype(np.int64)[None, :] + np.arange(-1, 3)[:, None], 0, in_size - 1)
    return index, weights


class ResampleFn(Function):
    """Interpolation as a sequence of per-axis steps, last axis first (PyTorch's bilinear sums the
    two width neighbours of each row first): ``("nearest", axis, in, out, scale, exact[, double])`` or
    ``("linear", axis, in, out, scale, align_corners, weight_dtype[, floorf])`` or ``("cubic", ...)`` with the
    same arguments (four weighted taps), the last flag as their tables take it; a forward gathers, a backward
    scatter-adds, along each axis. ``grad_steps``
    (the same steps, other scales) are the backward's where its source indices differ from the forward's."""

    @staticmethod
    def forward(ctx, x, steps, grad_steps=None):
        xp = _xp(x)
        dtype, acc = x.dtype, acc_dtype(x.dtype)
        on = [device_table(x, _TABLES[s[0]], *s[2:]) for s in steps]
        back = on if grad_steps is None else [device_table(x, _TABLES[s[0]], *s[2:]) for s in grad_steps]
        cl = ctx.channels_last = is_channels_last(x)  # (PyTorch's upsampling keeps a channels-last layout)
        nearest = _nearest_2d(x, steps)
        if nearest is not None:  # resample.cu's one launch each way
            (rows, row_starts), (cols, col_starts) = nearest
            (_, _, w, q, *_), (_, _, h, p, *_) = steps
            ctx.plan = (steps, on, [x.shape, x.shape[:3] + (q,), x.shape[:2] + (p, q)], dtype)
            ctx.nearest = (row_starts, col_starts, (h, w))
            return to_layout(KR.nearest_forward(x, rows, cols, (p, q)), cl)
        y = x if all(s[0] == "nearest" for s in steps) else x.astype(acc)
        # PyTorch's cpu kernels store a 16-bit input's weights in its type (summing in float32): rounded here too,
        # but where its bilinear takes its vectorized kernel (float32 weights): an output of H + W <= 128, or a
        # channels-last input of more than 3 channels
        vectorized = steps[0][0] == "linear" and x.ndim == 4 and (sum(st[3] for st in steps) <= 128
                                                                  or cl and x.shape[1] > 3)
        half = xp is np and x.dtype in (np.dtype(np.float16), np.dtype(backend.bfloat16)) and not vectorized

        def stored(w):
            return w.astype(x.dtype).astype(acc) if half else w
        shape = [x.shape]
        for (kind, axis, *_), arrays in zip(steps, on):
            if kind == "nearest":
                y = xp.take(y, arrays[0], axis=axis)
            elif kind == "cubic":
                index, weights = arrays
                weights = stored(weights.astype(acc, copy=False)).reshape(weights.shape + (1,) * (y.ndim - axis - 1))
                taps = [xp.take(y, index[k], axis=axis) * weights[k] for k in range(4)]
                y = taps[0] + taps[1] + taps[2] + taps[3]  # (PyTorch's order of the sum)
            else:
                i0, i1, lam = arrays
                lam = lam.astype(acc, copy=False).reshape((-1,) + (1,) * (y.ndim - axis - 1))
                y = xp.take(y, i0, axis=axis) * stored(1 - stored(lam)) + xp.take(y, i1, axis=axis) * stored(lam)
            shape.append(y.shape)
        ctx.plan = (steps, back, shape, dtype)
        return to_layout(y.astype(dtype, copy=False), cl)

    @staticmethod
    def backward(ctx, g):
        steps, on, shapes, dtype = ctx.plan
        nearest = getattr(ctx, "nearest", None)
        if nearest is not None and g.dtype == dtype:
            gx = KR.nearest_backward(_xp(g).ascontiguousarray(g), *nearest)
            return to_layout(gx, getattr(ctx, "channels_last", False)), None, None
        g = g.astype(acc_dtype(dtype))
        for (kind, axis, *_), arrays, shape in zip(steps[::-1], on[::-1], shapes[-2::-1]):
            n = shape[axis]
            if kind == "nearest":
                g = _scatter_axis(g, arrays[0], axis, n)
            elif kind == "cubic":
                index, weights = arrays
                weights = weights.astype(g.dtype, copy=False).reshape(weights.shape + (1,) * (g.ndim - axis - 1))
                g = sum(_scatter_axis(g * weights[k], index[k], axis, n) for k in range(4))
            else:
                i0, i1, lam = arrays
                lam = lam.astype(g.dtype, copy=False).reshape((-1,) + (1,) * (g.ndim - axis - 1))
                g = _scatter_axis(g * (1 - lam), i0, axis, n) + _scatter_axis(g * lam, i1, axis, n)
        return to_layout(g.astype(dtype, copy=False), getattr(ctx, "channels_last", False)), None, None

    @staticmethod
    def backward_graph(ctx, g):
        """Interpolation is linear: its backward as a :class:`LinearMap`, whose adjoint is the forward again."""
        plan, steps = ctx.plan, ctx.plan[0]
        return LinearMap.apply(g, lambda a: ResampleFn.backward(_Saved(plan=plan), a)[0],
                               lambda a: ResampleFn.forward(_Saved(), a, steps)), None, None


_TABLES = {"nearest": nearest_index, "linear": linear_weights, "cubic": cubic_weights}


def _nearest_tables(in_size, out_size, scale, exact):
    return KR.nearest_tables(nearest_index(in_size, out_size, scale, exact), in_size)


def _nearest_2d(x, steps):
    """((row index, row starts), (column index, column starts)) on x's device, where ``steps`` resample the two
    spatial dims of a 4-D ``x`` by nearest (or nearest-exact) neighbours and resample.cu takes x; else None."""
    if len(steps) != 2 or steps[0][0] != "nearest" or steps[1][0] != "nearest" or not KR.applies(x):
        return None
    (_, _, w, q, sw, exact, *_), (_, _, h, p, sh, *_) = steps
    return device_table(x, _nearest_tables, h, p, sh, exact), device_table(x, _nearest_tables, w, q, sw, exact)


# ---------------------------------------------------------------- adaptive pooling
def adaptive_bins(in_size, out_size):
    """PyTorch's bins: output ``i`` covers ``[floor(i*in/out), ceil((i+1)*in/out))``."""
    i = np.arange(out_size)
    return (i * in_size) // out_size, -((-(i + 1) * in_size) // out_size)


def _bin_taps(in_size, out_size):
    """(out, k) positions of each bin, padded to the largest bin ``k`` by repeating its last position, the
    (out, k) mask of the real ones and the (out,) bin sizes."""
    start, end = adaptive_bins(in_size, out_size)
    pos = start[:, None] + np.arange(int((end - start).max()))
    return np.minimum(pos, end[:, None] - 1), pos < end[:, None], end - start


def _bin_sums(x, axis, taps, mask):
    """The sum of each bin's elements along ``axis``: gathered (out, k) at a time, the padding taps selected
    away (not multiplied by 0, so an inf or NaN stays in its own bins)."""
    xp = _xp(x)
    out, k = taps.shape
    win = xp.take(x, taps.reshape(-1), axis=axis).reshape(x.shape[:axis] + (out, k) + x.shape[axis + 1:])
    keep = mask.reshape(mask.shape + (1,) * (x.ndim - axis - 1))
    return backend.where(keep, win, x.dtype.type(0)).sum(axis=axis + 1)


def _bin_sums_adjoint(g, axis, taps, mask, size):
    """The adjoint of :func:`_bin_sums` for an input of ``size`` along ``axis``: each bin's gradient added to
    its elements."""
    xp = _xp(g)
    out, k = taps.shape
    keep = mask.reshape(mask.shape + (1,) * (g.ndim - axis - 1))
    spread = backend.where(keep, xp.expand_dims(g, axis + 1), g.dtype.type(0))
    return _scatter_axis(spread.reshape(g.shape[:axis] + (out * k,) + g.shape[axis + 1:]), taps.reshape(-1),
                         axis, size)


class AdaptiveAvgPool2dFn(Function):
    """Two paths: bins that tile the input exactly (global pooling among them) are average pooling with
    windows equal to their strides, on the pooling kernels (one launch each way); overlapping or uneven
    bins are summed per bin along H, then W (a gather of each bin's taps and a sum; the backward scatter-adds),
    so a NaN or inf reaches only the bins that hold it. A channels-last input gets a channels-last output and
    gradient."""

    @staticmethod
    def forward(ctx, x, out_hw):
        n, c, h, w = x.shape
        oh, ow = out_hw
        ctx.x_shape, ctx.channels_last = x.shape, is_channels_last(x)
        if h % oh == 0 and w % ow == 0:
            ctx.window = (h // oh, w // ow)
            return KP.avg_pool2d_forward(x, ctx.window, ctx.window, (0, 0))  # (in x's layout)
        acc = acc_dtype(x.dtype)
        ctx.window = None
        ctx.bins = rows, cols = device_table(x, _bin_taps, h, oh), device_table(x, _bin_taps, w, ow)
        y = _bin_sums(_bin_sums(x.astype(acc), 2, *rows[:2]), 3, *cols[:2])
        y /= (rows[2][:, None] * cols[2][None, :]).astype(acc)
        return to_layout(y.astype(x.dtype, copy=False), ctx.channels_last)

    @staticmethod
    def backward(ctx, g):
        if ctx.window is not None:
            return KP.avg_pool2d_backward(g, ctx.x_shape, ctx.window, ctx.window, (0, 0), True, 0,
                                          ctx.channels_last), None
        rows, cols = ctx.bins
        h, w = ctx.x_shape[2:]
        dtype, acc = g.dtype, acc_dtype(g.dtype)
        g = g.astype(acc) / (rows[2][:, None] * cols[2][None, :]).astype(acc)
        gx = _bin_sums_adjoint(_bin_sums_adjoint(g, 3, *cols[:2], w), 2, *rows[:2], h)
        return to_layout(gx.astype(dtype, copy=False), ctx.channels_last), None

    @staticmethod
    def backward_graph(ctx, g):
        """The (linear) backward as a :class:`LinearMap`, whose adjoint is the forward again."""
        saved = _Saved(**ctx.__dict__)
        out_hw = tuple(g.shape[2:])
        return LinearMap.apply(g, lambda a: AdaptiveAvgPool2dFn.backward(saved, a)[0],
                               lambda a: AdaptiveAvgPool2dFn.forward(_Saved(), a, out_hw)), None


def _bin_windows(in_size, out_size):
    """(out, k) positions of each bin, padded to the largest bin ``k`` by repeating its last position
    (the max is unchanged, and the repeat comes after the original, so argmax names the first maximum)."""
    start, end = adaptive_bins(in_size, out_size)
    k = int((end - start).max())
    return np.minimum(start[:, None] + np.arange(k), end[:, None] - 1)


def adaptive_max_pool2d_forward(x, out_hw):
    """(y, flat int64 index ``h*W + w`` of each maximum in its plane); the first maximum of a bin
    in row-major order wins, or where the bin holds a NaN its last NaN, as PyTorch's scan
    (``v > best || isnan(v)``)."""
    xp = _xp(x)
    n, c, h, w = x.shape
    oh, ow = out_hw
    (rows,), (cols,) = device_table(x, _bin_windows, h, oh), device_table(x, _bin_windows, w, ow)
    kh, kw = rows.shape[1], cols.shape[1]
    win = xp.take(x, rows.reshape(-1), axis=2).reshape(n, c, oh, kh, w)
    win = xp.take(win, cols.reshape(-1), axis=4).reshape(n, c, oh, kh, ow, kw)
    win = win.transpose(0, 1, 2, 4, 3, 5).reshape(n, c, oh, ow, kh * kw)
    arg = win.argmax(axis=-1)
    if kh * kw > 1:  # (a padding tap repeats its bin's last position, so the last NaN names a real one)
        nan = win != win
        arg = backend.where(nan.any(axis=-1), kh * kw - 1 - nan[..., ::-1].argmax(axis=-1), arg)
    y = xp.take_along_axis(win, arg[..., None], axis=-1)[..., 0]
    r = rows[xp.arange(oh)[:, None], arg // kw]
    q = cols[xp.arange(ow)[None, :], arg % kw]
    return xp.ascontiguousarray(y), (r * w + q).astype(np.int64)


def take_planes(x, flat):
    """``x`` (N, C, H, W) at the flat positions ``flat`` (N, C, P, Q) (``h*W + w``) of its planes: the pooled
    values of a max pooling whose maxima are at ``flat``."""
    xp = _xp(x)
    n, c, p, q = flat.shape
    planes = xp.ascontiguousarray(x).reshape(n, c, -1)
    return xp.take_along_axis(planes, flat.reshape(n, c, p * q), axis=2).reshape(n, c, p, q)


class AdaptiveMaxPool2dFn(Function):
    @staticmethod
    def forward(ctx, x, out_hw, found=None):
        y, idx = adaptive_max_pool2d_forward(x, out_hw)
        ctx.indices, ctx.x_shape, ctx.channels_last = idx, x.shape, is_channels_last(x)
        if found is not None:  # (in the output's layout, as PyTorch's)
            found["indices"] = to_layout(idx, ctx.channels_last)
        return to_layout(y, ctx.channels_last)

    @staticmethod
    def backward(ctx, g):
        n, c, h, w = ctx.x_shape
        xp = _xp(g)
        idx = ctx.indices
        acc = acc_dtype(g.dtype)
        planes = xp.arange(n * c, dtype=np.int64).reshape(n, c, 1, 1) * (h * w)
        gx = xp.zeros(n * c * h * w, acc)
        _add_at(gx, (idx + planes).reshape(-1), g.astype(acc).reshape(-1))
        return to_layout(gx.reshape(n, c, h, w).astype(g.dtype), ctx.channels_last), None

    @staticmethod
    def backward_graph(ctx, g):
        """The backward's scatter to the maxima's positions (constants of the graph) as a :class:`LinearMap`,
        whose adjoint gathers at them."""
        saved, idx, cl = _Saved(**ctx.__dict__), ctx.indices, ctx.channels_last
        gx = LinearMap.apply(g, lambda a: AdaptiveMaxPool2dFn.backward(saved, a)[0],
                             lambda a: to_layout(take_planes(a, idx), cl))
        return zero_linked(gx, ctx, 0, gx._data), None  # (tied to x, as relu's gradient: PyTorch's reaches it)


# ---------------------------------------------------------------- sliding blocks (unfold / fold)
def _tap_slices(kernel, dilation, stride, blocks):
    """Per kernel tap (i, j), row-major: the (rows, cols) slices of the padded image that hold the tap's value in
    every block, one element per block (so a tap's writes never collide)."""
    return [(slice(i * dilation[0], i * dilation[0] + stride[0] * (blocks[0] - 1) + 1, stride[0]),
             slice(j * dilation[1], j * dilation[1] + stride[1] * (blocks[1] - 1) + 1, stride[1]))
            for i in range(kernel[0]) for j in range(kernel[1])]


def im2col(x, kernel, dilation, padding, stride, blocks):
    """(N, C, H, W) -> (N, C*kh*kw, L) columns of the sliding blocks, channel-major within a column. Copies only
    (one strided copy per kernel tap): a NaN or inf reaches exactly the columns holding it."""
    xp = _xp(x)
    n, c, h, w = x.shape
    (ph, pw), (bh, bw) = padding, blocks
    if ph or pw:
        padded = xp.zeros((n, c, h + 2 * ph, w + 2 * pw), x.dtype)
        padded[:, :, ph:ph + h, pw:pw + w] = x
        x = padded
    cols = xp.empty((n, c, kernel[0] * kernel[1], bh, bw), x.dtype)
    for t, (rows, columns) in enumerate(_tap_slices(kernel, dilation, stride, blocks)):
        cols[:, :, t] = x[:, :, rows, columns]
    return cols.reshape(n, c * kernel[0] * kernel[1], bh * bw)


def col2im(cols, size, kernel, dilation, padding, stride, blocks):
    """The adjoint of :func:`im2col`: (N, C*kh*kw, L) columns summed into an (N, C, *size) image where their
    blocks overlap (one strided add per kernel tap; half precision accumulates in float32, bools OR)."""
    xp = _xp(cols)
    dtype = cols.dtype
    n, k = cols.shape[0], kernel[0] * kernel[1]
    c = cols.shape[1] // k
    (h, w), (ph, pw) = size, padding
    acc = backend.float32 if dtype in (backend.float16, backend.bfloat16) else dtype
    cols = cols.reshape(n, c, k, blocks[0], blocks[1])
    out = xp.zeros((n, c, h + 2 * ph, w + 2 * pw), acc)
    for t, (rows, columns) in enumerate(_tap_slices(kernel, dilation, stride, blocks)):
        out[:, :, rows, columns] += cols[:, :, t]
    return xp.ascontiguousarray(out[:, :, ph:ph + h, pw:pw + w]).astype(dtype, copy=False)


class UnfoldFn(Function):
    """``F.unfold`` of an (N, C, H, W) array; its gradient is the fold of the columns' gradient."""

    @staticmethod
    def forward(ctx, x, kernel, dilation, padding, stride, blocks):
        ctx.geometry = (x.shape[2:], kernel, dilation, padding, stride, blocks)
        return im2col(x, kernel, dilation, padding, stride, blocks)

    @staticmethod
    def backward(ctx, g):
        return col2im(g, *ctx.geometry), None, None, None, None, None

    @staticmethod
    def backward_graph(ctx, g):
        return FoldFn.apply(g, *ctx.geometry), None, None, None, None, None


class FoldFn(Function):
    """``F.fold`` of (N, C*kh*kw, L) columns into (N, C, *size); its gradient is the unfold of the image's."""

    @staticmethod
    def forward(ctx, cols, size, kernel, dilation, padding, stride, blocks):
        ctx.geometry = (kernel, dilation, padding, stride, blocks)
        return col2im(cols, size, kernel, dilation, padding, stride, blocks)

    @staticmethod
    def backward(ctx, g):
        return im2col(g, *ctx.geometry), None, None, None, None, None, None

    @staticmethod
    def backward_graph(ctx, g):
        return UnfoldFn.apply(g, *ctx.geometry), None, None, None, None, None, None


# ---------------------------------------------------------------- embedding
class EmbeddingFn(Function):
    """``weight[indices]``; the backward adds each row of the gradient into its index's row (repeats
    add up), leaves the padding row at zero and, with ``scale_grad_by_freq``, divides by each
    index's count in the batch. The indices arrive as the first (non-differentiable) input. With ``sparse``
    the gradient is still dense, and the rows it holds (PyTorch's sparse gradient's) are the rows looked up but
    the padding row (:meth:`sparse_rows`)."""

    @staticmethod
    def forward(ctx, indices, weight, padding_idx, scale_grad_by_freq, sparse=False):
        flat = indices.reshape(-1)
        ctx.meta = (flat, weight.shape, padding_idx, scale_grad_by_freq)
        ctx.sparse = sparse
        return gather_rows(weight, flat).reshape(indices.shape + weight.shape[1:])

    @staticmethod
    def sparse_rows(ctx):
        """The rows of a ``sparse`` lookup's weight gradient (see :attr:`Function.sparse_rows`): every row looked
        up, whatever its gradient (zero too), but the padding row; None for a dense lookup."""
        if not ctx.sparse:
            return None
        flat, (v, _), padding_idx, _ = ctx.meta
        rows = _xp(flat).zeros(v, bool)
        rows[flat] = True  # (on the device: no synchronization)
        if padding_idx is not None:
            rows[padding_idx] = False
        return rows

    @staticmethod
    def backward(ctx, g):
        flat, (v, d), padding_idx, by_freq = ctx.meta
        xp = _xp(g)
        acc = acc_dtype(g.dtype)
        rows = g.reshape(-1, d).astype(acc)
        if by_freq:
            counts = xp.bincount(flat, minlength=v).astype(acc)
            rows = rows / counts[flat][:, None]
        gw = xp.zeros((v, d), acc)
        _add_at(gw, flat, rows)
        if padding_idx is not None:
            gw[padding_idx] = 0
        return None, gw.astype(g.dtype), None, None, None

    @staticmethod
    def backward_graph(ctx, g):
        """The backward's scatter-add (linear in g, its positions constants) as a :class:`LinearMap`, whose
        adjoint gathers the rows again, scaled and masked as the backward scales and masks them."""
        saved = _Saved(meta=ctx.meta)
        flat, (v, _), padding_idx, by_freq = ctx.meta
        shape = tuple(g.shape)

        def gather(a):
            xp = _xp(a)
            rows = xp.take(a, flat, axis=0)
            if by_freq:
                rows = rows / xp.bincount(flat, minlength=v).astype(a.dtype)[flat][:, None]
            if padding_idx is not None:
                rows = backend.where((flat == padding_idx)[:, None], a.dtype.type(0), rows)
            return rows.astype(a.dtype, copy=False).reshape(shape)

        return None, LinearMap.apply(g, lambda a: EmbeddingFn.backward(saved, a)[1], gather), None, None, None


# ---------------------------------------------------------------- channel (feature) dropout
class FeatureDropoutFn(Function):
    """Whole channels zeroed: one keep/scale factor per channel of the ``lead`` leading dimensions
    ((N, C) batched, (C,) unbatched), drawn by the dropout kernel (so the same seed drops the same
    channels on every device) and broadcast over the rest."""

    @staticmethod
    def forward(ctx, x, p, seed, lead, out=None):
        xp = _xp(x)
        scale, _ = KD.dropout_forward(xp.ones(x.shape[:lead], x.dtype), seed, p)
        scale = scale.reshape(x.shape[:lead] + (1,) * (x.ndim - lead))
        ctx.scale = scale
        if out is not None:
            xp.multiply(x, scale, out=out)
            return out
        return x * scale

    @staticmethod
    def backward(ctx, g):
        return g * ctx.scale, None, None, None

    @staticmethod
    def backward_graph(ctx, g):
        return g * Tensor._from_array(ctx.scale, False), None, None, None


def feature_dropout(x, p, inplace, lead=2):
    """``x`` with each channel (an index into its ``lead`` leading dimensions) zeroed with probability
    ``p``, the rest scaled by ``1/(1-p)``; the seed comes from the CPU generator, as
    :func:`ops.dropout.dropout`'s."""
    seed = backend.kernel_seed()
    if inplace:
        return FeatureDropoutFn.apply_("feature_dropout_", x, float(p), seed, lead)
    return FeatureDropoutFn.apply(x, float(p), seed, lead)


_SELU_NEG = 1.7580993408473766  # -(SELU's value at -inf): alpha * scale


class AlphaDropoutFn(Function):
    """Alpha dropout (PyTorch's formula): dropped positions take SELU's negative saturation value and
    the result is ``a * (x * keep + alpha' * (1 - keep)) + b``, which keeps zero mean and unit variance.
    One draw per element (``lead`` None) or per channel of the ``lead`` leading dimensions."""

    @staticmethod
    def forward(ctx, x, p, seed, lead):
        xp = _xp(x)
        shape = x.shape if lead is None else x.shape[:lead] + (1,) * (x.ndim - lead)
        kept, _ = KD.dropout_forward(xp.ones(shape, x.dtype), seed, p)
        keep = (kept != 0).astype(acc_dtype(x.dtype))
        a = 1.0 / math.sqrt((_SELU_NEG ** 2 * p + 1) * (1 - p))
        noise = keep * a
        shift = (keep - 1) * (_SELU_NEG * a) + _SELU_NEG * a * p
        ctx.noise = noise.astype(x.dtype)
        y = (x.astype(noise.dtype, copy=False) * noise + shift).astype(x.dtype, copy=False)
        if not x.flags.c_contiguous:  # (the result in the input's layout, channels-last one too, as PyTorch's)
            out = xp.empty_like(x)
            out[...] = y
            return out
        return y

    @staticmethod
    def backward(ctx, g):
        return g * ctx.noise, None, None, None

    @staticmethod
    def backward_graph(ctx, g):
        return g * Tensor._from_array(ctx.noise, False), None, None, None


def alpha_dropout(x, p, lead=None):
    seed = backend.kernel_seed()
    return AlphaDropoutFn.apply(x, float(p), seed, lead)
