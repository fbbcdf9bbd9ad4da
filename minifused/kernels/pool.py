"""2-D max and average pooling on raw NCHW arrays, forward and backward.

``max_pool2d_forward(x, kernel, stride, padding, ceil_mode, want_indices, dilation) -> (y, indices)``,
``max_pool2d_backward(dy, indices, x_shape, kernel, stride, padding, dilation, channels_last) -> dx``,
``avg_pool2d_forward(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor) -> y``,
``avg_pool2d_backward(dy, x_shape, kernel, stride, padding, count_include_pad, divisor) -> dx``
(``divisor``: divisor_override, each window's sum divided by it; 0: by the window's size).

``kernel``, ``stride``, ``padding``, ``dilation`` (max pooling's spacing of a window's taps) are (h, w)
pairs. ``indices`` have the shape of ``y`` and hold the position of each window's maximum *inside its
window*, ``i*kw + j`` (tap row ``i``, column ``j`` of the window, padding included), in the smallest
integer type that holds every position (:func:`index_dtype`: uint8 up to 256 positions, so a 2x2 or 3x3
pool keeps 1 byte per output instead of 4). The backward decodes it with the window's origin
``(p*sh - ph, q*sw - pw)`` and the dilation.
:func:`indices_to_flat` converts them to PyTorch's flat int64 ``h*W + w`` on demand.
NumPy arrays go to the references (``*_ref``), CuPy arrays (every float dtype) to ``pool.cu``. The forward
references also take integer arrays (max pooling any integer dtype, average pooling int64), computed in their own
dtype: the max exact, the average's sum divided with C's truncation toward zero, as PyTorch's cpu kernels.
Inputs are assumed valid; max pooling takes either dense layout (and returns it), channels-last in place, as average
pooling does where its windows tile the input (:func:`tiles_exactly`); other layouts are read as C-contiguous copies.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import backend
from . import ARG, Prepared, acc_dtype, clear_unset, ctype, empty_channels_last, get_kernel, is_channels_last, to_layout
from .conv import relayout


def out_size(size, kernel, stride, padding, ceil_mode=False, dilation=1):
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    n = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (n - 1) * stride >= size + padding:  # the last window must start inside the input
        n -= 1
    return n


def _windows(x, kernel, stride, padding, out_hw, fill, dilation=(1, 1)):
    """(N, C, P, Q, kh, kw) view of ``x`` padded with ``fill`` (enough on the far side for ceil_mode)."""
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw), (p, q), (dh, dw) = kernel, stride, padding, out_hw, dilation
    eh = max(0, (p - 1) * sh + (kh - 1) * dh + 1 - (h + 2 * ph))
    ew = max(0, (q - 1) * sw + (kw - 1) * dw + 1 - (w + 2 * pw))
    xp_ = x if ph == pw == eh == ew == 0 else np.pad(x, ((0, 0), (0, 0), (ph, ph + eh), (pw, pw + ew)),
                                                    constant_values=fill)
    s = xp_.strides
    return np.lib.stride_tricks.as_strided(xp_, (n, c, p, q, kh, kw),
                                           (s[0], s[1], s[2] * sh, s[3] * sw, s[2] * dh, s[3] * dw), writeable=False)


def _counts(size, kernel, stride, padding, out, include_pad):
    start = np.arange(out) * stride - padding
    end = np.minimum(start + kernel, size + padding)
    if not include_pad:
        start, end = np.maximum(start, 0), np.minimum(end, size)
    return end - start


# ---------------------------------------------------------------- references
def max_pool2d_forward_ref(x, kernel, stride, padding, ceil_mode=False, want_indices=True, dilation=(1, 1)):
    """The running maximum over the window positions (``np.maximum``: a NaN wins), then the position: from the
    last back to the first, each position inside the input and equal to the maximum takes it (so a window of
    -inf picks its first real pixel, not the padding), and where the maximum is NaN the last NaN does, as the
    CUDA kernel's scan (``v > best || isnan(v) || no pick yet``) and PyTorch pick. One strided pass per position
    and step, no copy of the windows; no index work without ``want_indices``."""
    n, c, h, w = x.shape
    p = out_size(h, kernel[0], stride[0], padding[0], ceil_mode, dilation[0])
    q = out_size(w, kernel[1], stride[1], padding[1], ceil_mode, dilation[1])
    integer = x.dtype.kind in "iu"  # (exact in its own dtype; its padding, the dtype's least value, never picked)
    win = _windows(x if integer else x.astype(acc_dtype(x.dtype), copy=False), kernel, stride, padding, (p, q),
                   np.iinfo(x.dtype).min if integer else -np.inf, dilation)
    positions = kernel[0] * kernel[1]

    def at(pos):
        return win[..., pos // kernel[1], pos % kernel[1]]

    best = at(0).copy()
    for pos in range(1, positions):
        np.maximum(best, at(pos), out=best)
    arg = None
    if want_indices:
        arg = np.full(best.shape, positions - 1, index_dtype(kernel))
        hit = np.empty(best.shape, bool)
        step = np.empty_like(arg)
        # inside[r][:, i]: output row r's tap i falls in the input (likewise columns): padding never wins
        inside = [((np.arange(o)[:, None] * st - pd + np.arange(k)[None, :] * dl) >= 0) &
                  ((np.arange(o)[:, None] * st - pd + np.arange(k)[None, :] * dl) < size)
                  for o, st, pd, k, dl, size in zip((p, q), stride, padding, kernel, dilation, (h, w))]
        for pos in range(positions - 2, -1, -1):  # arg = pos where hit: arg - (arg - pos) * hit (arg > pos here)
            i, j = divmod(pos, kernel[1])
            np.equal(at(pos), best, out=hit)
            hit &= inside[0][:, i, None] & inside[1][None, :, j]
            np.subtract(arg, arg.dtype.type(pos), out=step)
            np.multiply(step, hit, out=step)
            np.subtract(arg, step, out=arg)
        nan = None if integer else np.isnan(best)
        if nan is not None and nan.any():
            for pos in range(positions):
                np.copyto(arg, pos, where=np.logical_and(nan, np.isnan(at(pos)), out=hit), casting="unsafe")
    return best.astype(x.dtype, copy=False), arg


def max_pool2d_backward_ref(dy, indices, x_shape, kernel, stride, padding, dilation=(1, 1)):
    """Each window's gradient goes to the position its index names: one strided pass per window
    position (i, j), so overlapping windows accumulate without a scatter; windows that tile the input
    exactly write their picks straight into it."""
    n, c, h, w = x_shape
    _, _, p, q = dy.shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    g = dy.astype(acc_dtype(dy.dtype), copy=False)
    hit = np.empty(g.shape, bool)
    part = np.empty(g.shape, g.dtype)

    def picked(pos):
        """g where the window picked position ``pos``, else +0 (a select, not g * hit: a NaN gradient must not
        reach the positions not picked)."""
        np.copyto(part, g)
        return clear_unset(part, np.equal(indices, pos, out=hit))

    if _tiles(kernel, stride, padding, dilation, (h, w), (p, q)):
        dx = np.empty((n, c, p, kh, q, kw), g.dtype)  # each element is one window's position (i, j): written once
        for i in range(kh):
            for j in range(kw):
                dx[:, :, :, i, :, j] = picked(i * kw + j)
        return dx.reshape(x_shape).astype(dy.dtype, copy=False)
    eh = max(0, (p - 1) * sh + (kh - 1) * dh + 1 - (h + 2 * ph))
    ew = max(0, (q - 1) * sw + (kw - 1) * dw + 1 - (w + 2 * pw))
    dxp = np.zeros((n, c, h + 2 * ph + eh, w + 2 * pw + ew), g.dtype)
    for i in range(kh):
        for j in range(kw):
            dxp[:, :, i * dh:i * dh + sh * (p - 1) + 1:sh, j * dw:j * dw + sw * (q - 1) + 1:sw] += picked(i * kw + j)
    return np.ascontiguousarray(dxp[:, :, ph:ph + h, pw:pw + w]).astype(dy.dtype, copy=False)


def index_dtype(kernel):
    """The smallest integer type that holds every position ``0 .. kh*kw - 1`` of a window."""
    size = kernel[0] * kernel[1]
    return np.dtype(np.uint8 if size <= 256 else np.int16 if size <= 32768 else np.int32)


def _tiles(kernel, stride, padding, dilation, hw, pq):
    """Whether the windows tile the input exactly (each element in one window: the backward writes them whole)."""
    return (tuple(kernel) == tuple(stride) and tuple(padding) == (0, 0) and tuple(dilation) == (1, 1)
            and tuple(hw) == (pq[0] * kernel[0], pq[1] * kernel[1]))


def indices_to_flat(indices, x_shape, kernel, stride, padding, dilation=(1, 1)):
    """Window positions (``i*kw + j``, as stored for the backward) to PyTorch's flat int64 indices
    ``h*W + w`` in each (H, W) plane. NumPy or CuPy, as ``indices``; a new array of their shape."""
    xp = backend.array_module(indices)
    w_in = x_shape[3]
    p, q = indices.shape[2], indices.shape[3]
    pos = indices.astype(xp.int64)
    hh = xp.arange(p, dtype=xp.int64)[:, None] * stride[0] - padding[0] + pos // kernel[1] * dilation[0]
    ww = xp.arange(q, dtype=xp.int64)[None, :] * stride[1] - padding[1] + pos % kernel[1] * dilation[1]
    return hh * w_in + ww


def _divisors(h, w, p, q, kernel, stride, padding, count_include_pad, divisor):
    """Each window's divisor, (p, q): ``divisor`` where nonzero (divisor_override), else its positions."""
    if divisor:
        return np.full((p, q), divisor)
    return (_counts(h, kernel[0], stride[0], padding[0], p, count_include_pad)[:, None]
            * _counts(w, kernel[1], stride[1], padding[1], q, count_include_pad)[None, :])


def avg_pool2d_forward_ref(x, kernel, stride, padding, ceil_mode=False, count_include_pad=True, divisor=0):
    """Each window's sum over its divisor; an int64 ``x``'s sum (int64) divided as C divides integers, truncating
    toward zero (the mean of -3 and -4 is -3), as PyTorch's cpu kernel."""
    n, c, h, w = x.shape
    p = out_size(h, kernel[0], stride[0], padding[0], ceil_mode)
    q = out_size(w, kernel[1], stride[1], padding[1], ceil_mode)
    integer = x.dtype.kind in "iu"
    win = _windows(x if integer else x.astype(acc_dtype(x.dtype)), kernel, stride, padding, (p, q), 0)
    cnt = _divisors(h, w, p, q, kernel, stride, padding, count_include_pad, divisor)
    if integer:
        total = win.sum(axis=(-2, -1), dtype=x.dtype)
        quotient = total // cnt  # floor; one up where the signs differ and it leaves a remainder
        return (quotient + ((quotient * cnt != total) & ((total < 0) != (cnt < 0)))).astype(x.dtype)
    return (win.sum(axis=(-2, -1)) / cnt).astype(x.dtype)


def avg_pool2d_backward_ref(dy, x_shape, kernel, stride, padding, count_include_pad=True, divisor=0):
    n, c, h, w = x_shape
    _, _, p, q = dy.shape
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    cnt = _divisors(h, w, p, q, kernel, stride, padding, count_include_pad, divisor)
    g = dy.astype(acc_dtype(dy.dtype)) / cnt
    eh = max(0, (p - 1) * sh + kh - (h + 2 * ph))
    ew = max(0, (q - 1) * sw + kw - (w + 2 * pw))
    dxp = np.zeros((n, c, h + 2 * ph + eh, w + 2 * pw + ew), g.dtype)
    for i in range(kh):
        for j in range(kw):
            dxp[:, :, i:i + sh * (p - 1) + 1:sh, j:j + sw * (q - 1) + 1:sw] += g
    return np.ascontiguousarray(dxp[:, :, ph:ph + h, pw:pw + w]).astype(dy.dtype)


# ---------------------------------------------------------------- CUDA
@functools.cache
def _kernel(dtype, name, idx_dtype):
    # pool.cu picks unsigned char / short / int for the window positions from their size
    return get_kernel("pool.cu", name, (f"-DPOOL_T={ctype(dtype)}", f"-DPOOL_ACC={ctype(acc_dtype(dtype))}",
                                        f"-DPOOL_IDX_BYTES={np.dtype(idx_dtype).itemsize}"))


@functools.lru_cache(maxsize=512)  # keyed by shapes and windows: bounded
def _prepared(dtype, name, idx_dtype, total, n_arrays, consts, dev):
    """The launch of ``name`` over ``total`` elements: ``n_arrays`` addresses per call, then ``consts`` (ints: the
    first an int64, the rest int32); a Prepared launch costs less host time than the RawKernel call (pooling
    closes the forward of every CNN, so eager steps pay it). (Python ints key the cache: NumPy scalars made and
    hashed per call cost more than the launch's packing.)"""
    blocks = max(1, min((total + 255) // 256, 65535 * 4))
    typed = (np.int64(consts[0]), *(np.int32(v) for v in consts[1:]))
    return Prepared(_kernel(dtype, name, idx_dtype), (blocks,), (256,), (ARG,) * n_arrays + typed)


def _launch(dtype, name, total, arrays, consts, idx_dtype=np.dtype(np.uint8)):
    dev = arrays[0].data.device_id
    _prepared(dtype, name, idx_dtype, total, len(arrays), consts, dev)(*[a.data.ptr for a in arrays])


def max_pool2d_forward(x, kernel, stride, padding, ceil_mode=False, want_indices=True, dilation=(1, 1)):
    """(y, the window positions or None): y and the positions in x's layout (channels-last or C-contiguous; a
    strided x is read as a C-contiguous copy); on the CPU the positions are C-contiguous."""
    cl = is_channels_last(x)
    if not backend.is_cuda_array(x):
        y, idx = max_pool2d_forward_ref(to_layout(x, False), kernel, stride, padding, ceil_mode, want_indices,
                                        dilation)
        return to_layout(y, cl), idx
    import cupy

    n, c, h, w = x.shape
    p = out_size(h, kernel[0], stride[0], padding[0], ceil_mode, dilation[0])
    q = out_size(w, kernel[1], stride[1], padding[1], ceil_mode, dilation[1])
    empty = empty_channels_last if cl else cupy.ndarray
    y = empty((n, c, p, q), x.dtype)
    it = index_dtype(kernel)
    idx = empty((n, c, p, q), it) if want_indices else None
    x = relayout(x, cl)
    # without indices the kernel writes none: any device pointer fills the slot
    arrays, window = (x, y, y if idx is None else idx), (*kernel, *stride, *padding, *dilation, int(want_indices))
    if _vectors(cl, c, x, x.dtype):
        _launch(x.dtype, "maxpool_nhwc_fwd", y.size // _vector(x.dtype), arrays, (n, c, h, w, p, q, *window), it)
    elif not cl and q % _vector(x.dtype) == 0:  # (y and the positions are new: aligned)
        _launch(x.dtype, "maxpool_rows_fwd", y.size // _vector(x.dtype), arrays, (n * c, h, w, p, q, *window), it)
    else:
        _launch(x.dtype, "maxpool_fwd", y.size, arrays, (n * c, c, h, w, p, q, *window, int(cl)), it)
    return y, idx


def _vector(dtype):
    """Elements a thread of the vector kernels takes, 16 bytes of them: channels (``maxpool_nhwc_*``) or a row's
    columns (``maxpool_rows_*``)."""
    return 16 // np.dtype(dtype).itemsize


def _vectors(cl, c, a, dtype):
    """Whether channels-last pooling of ``a`` may take the ``maxpool_nhwc_*`` kernels: channels in whole 16-byte
    vectors, ``a`` 16-byte aligned (the other arrays are new)."""
    return cl and c % _vector(dtype) == 0 and a.data.ptr % 16 == 0


def max_pool2d_backward(dy, indices, x_shape, kernel, stride, padding, dilation=(1, 1), channels_last=False):
    """dx laid out ``channels_last`` or C-contiguous, from a dy in either (or strided); on the GPU ``indices`` are
    in that layout (the forward's, of an input so laid out), on the CPU C-contiguous."""
    if not backend.is_cuda_array(dy):
        return to_layout(max_pool2d_backward_ref(to_layout(dy, False), indices, x_shape, kernel, stride, padding,
                                                 dilation), channels_last)
    import cupy

    n, c, h, w = x_shape
    _, _, p, q = dy.shape
    dy = relayout(dy, channels_last)
    dx = empty_channels_last(x_shape, dy.dtype) if channels_last else cupy.ndarray(x_shape, dy.dtype)
    vectors = _vectors(channels_last, c, dy, dy.dtype)
    if _tiles(kernel, stride, padding, dilation, (h, w), (p, q)):
        # the windows tile the input: one thread per window writes it whole (pool.cu)
        if vectors:
            _launch(dy.dtype, "maxpool_nhwc_bwd_tiled", dy.size // _vector(dy.dtype), (dy, indices, dx),
                    (n, c, h, w, p, q, *kernel), indices.dtype)
        else:
            _launch(dy.dtype, "maxpool_bwd_tiled", dy.size, (dy, indices, dx),
                    (n * c, c, h, w, p, q, *kernel, int(channels_last)), indices.dtype)
        return dx
    window = (*kernel, *stride, *padding, *dilation)
    if vectors:
        _launch(dy.dtype, "maxpool_nhwc_bwd", dx.size // _vector(dy.dtype), (dy, indices, dx),
                (n, c, h, w, p, q, *window), indices.dtype)
        return dx
    if not channels_last and w % _vector(dy.dtype) == 0:  # (dx is new: 16-byte aligned)
        _launch(dy.dtype, "maxpool_rows_bwd", dx.size // _vector(dy.dtype), (dy, indices, dx),
                (n * c, h, w, p, q, *window), indices.dtype)
        return dx
    _launch(dy.dtype, "maxpool_bwd", dx.size, (dy, indices, dx), (n * c, c, h, w, p, q, *window, int(channels_last)),
            indices.dtype)
    return dx


def tiles_exactly(hw, kernel, stride, padding):
    """Whether pooling windows tile an ``hw`` (h, w) input exactly: kernel == stride, no padding, h and w whole
    windows (global pooling among them; every input in one window)."""
    return (tuple(stride) == tuple(kernel) and tuple(padding) == (0, 0) and hw[0] % kernel[0] == 0
            and hw[1] % kernel[1] == 0)


def avg_pool2d_forward(x, kernel, stride, padding, ceil_mode=False, count_include_pad=True, divisor=0):
    """``divisor``: divisor_override (0: none). x C-contiguous or channels-last (or strided), y in x's layout:
    windows that tile x exactly read a channels-last x in place (:func:`tiles_exactly`: avgpool_tiled_fwd, either
    layout), other windows a C-contiguous copy."""
    cl = is_channels_last(x)
    if not backend.is_cuda_array(x):
        return to_layout(avg_pool2d_forward_ref(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor), cl)
    import cupy

    n, c, h, w = x.shape
    p = out_size(h, kernel[0], stride[0], padding[0], ceil_mode)
    q = out_size(w, kernel[1], stride[1], padding[1], ceil_mode)
    if tiles_exactly((h, w), kernel, stride, padding):
        y = empty_channels_last((n, c, p, q), x.dtype) if cl else cupy.ndarray((n, c, p, q), x.dtype)
        _launch(x.dtype, "avgpool_tiled_fwd", y.size, (relayout(x, cl), y),
                (n * c, c, h, w, p, q, *kernel, divisor or kernel[0] * kernel[1], int(cl)))
        return y
    y = cupy.ndarray((n, c, p, q), x.dtype)
    _launch(x.dtype, "avgpool_fwd", y.size, (relayout(x, False), y),
            (n * c, h, w, p, q, *kernel, *stride, *padding, int(count_include_pad), int(divisor)))
    return relayout(y, cl)


def avg_pool2d_backward(dy, x_shape, kernel, stride, padding, count_include_pad=True, divisor=0, channels_last=False):
    """dx laid out ``channels_last`` or C-contiguous, from a dy in either (or strided)."""
    if not backend.is_cuda_array(dy):
        return to_layout(avg_pool2d_backward_ref(dy, x_shape, kernel, stride, padding, count_include_pad, divisor),
                         channels_last)
    import cupy

    n, c, h, w = x_shape
    _, _, p, q = dy.shape
    if tiles_exactly((h, w), kernel, stride, padding):
        dx = empty_channels_last(x_shape, dy.dtype) if channels_last else cupy.ndarray(x_shape, dy.dtype)
        _launch(dy.dtype, "avgpool_tiled_bwd", dy.size, (relayout(dy, channels_last), dx),
                (n * c, c, h, w, p, q, *kernel, divisor or kernel[0] * kernel[1], int(channels_last)))
        return dx
    dx = cupy.ndarray(x_shape, dy.dtype)
    _launch(dy.dtype, "avgpool_bwd", dx.size, (relayout(dy, False), dx),
            (n * c, h, w, p, q, *kernel, *stride, *padding, int(count_include_pad), int(divisor)))
    return relayout(dx, channels_last)
