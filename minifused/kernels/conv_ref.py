"""NumPy references of the conv2d primitives (written for either array module), and the ReLU mask's packing.

Each ``*_ref`` has the signature and results of its primitive in :mod:`.conv`, accumulating in
:func:`acc_dtype`; they are also the cpu path. They work channel-major: the lowered input is (C*R*S, N*P*Q)
(im2col, one copy of the strided windows), so the forward (K, N*P*Q) and, from the output gradient taken as
(K, N, P, Q), the filter gradient are one GEMM per group and slice of images, and the data gradient one GEMM
per group plus a col2im of contiguous blocks. On NumPy all three lower a few images at a time
(:data:`COLUMN_BYTES`), in cache. The ReLU mask is bit-packed:
uint32 of shape (K, ceil(M/32)), M = N*P*Q, bit ``m % 32`` of word ``[k, m // 32]`` set where
y[n, k, p, q] > 0 or is NaN (m = n*P*Q + p*Q + q): a NaN passes its gradient, as in PyTorch.
"""
from __future__ import annotations

import numpy as np

from .. import backend
from . import acc_dtype, clear_unset
from .conv_plan import out_size


# ---------------------------------------------------------------- ReLU mask (bit-packed)
def pack_mask(positive):
    """(N, K, P, Q) booleans -> (K, ceil(N*P*Q/32)) uint32, bit m%32 of word m//32."""
    n, k, p, q = positive.shape
    bits = _mask_rows(backend.array_module(positive), k, n * p * q)
    bits[:, :n * p * q] = positive.transpose(1, 0, 2, 3).reshape(k, n * p * q)
    return _pack_rows(bits)


def _mask_rows(xp, k, m):
    """Zeroed (K, 32*ceil(M/32)) booleans for :func:`_pack_rows`: the channel-major mask, its tail padded."""
    return xp.zeros((k, (m + 31) // 32 * 32), bool)


def _pack_rows(bits):
    """The uint32 words of :func:`_mask_rows`'s booleans."""
    xp = backend.array_module(bits)
    k, words = bits.shape[0], bits.shape[1] // 32
    if xp is np:  # the little-endian bytes of little-endian bit order are the words
        return np.packbits(bits, axis=1, bitorder="little").view("<u4").astype(np.uint32, copy=False)
    shifts = xp.arange(32, dtype=np.uint32)
    return (bits.reshape(k, words, 32).astype(np.uint32) << shifts).sum(axis=-1, dtype=np.uint32)


def _mask_bits(mask, m):
    """The (K, M) 0/1 array of :func:`pack_mask`'s words: uint8 on NumPy, uint32 elsewhere."""
    xp = backend.array_module(mask)
    if xp is np:
        return np.unpackbits(np.ascontiguousarray(mask).astype("<u4", copy=False).view(np.uint8), axis=1,
                             count=m, bitorder="little")
    shifts = xp.arange(32, dtype=np.uint32)
    return ((mask[:, :, None] >> shifts) & np.uint32(1)).reshape(mask.shape[0], -1)[:, :m]


def unpack_mask(mask, shape):
    """The booleans (N, K, P, Q) that :func:`pack_mask` packed."""
    n, k, p, q = shape
    return _mask_bits(mask, n * p * q).reshape(k, n, p, q).transpose(1, 0, 2, 3).astype(bool)


# ---------------------------------------------------------------- im2col
def _as_strided(xp, a, shape, strides):
    if xp is np:
        return np.lib.stride_tricks.as_strided(a, shape, strides, writeable=False)
    return xp.lib.stride_tricks.as_strided(a, shape, strides)


def _padded(xf, padding):
    xp = backend.array_module(xf)
    ph, pw = padding
    if ph == 0 and pw == 0:
        return xf
    return xp.pad(xf, ((0, 0), (0, 0), (ph, ph), (pw, pw)))


def _columns(x, r, s, p, q, stride, padding, dilation):
    """The lowered input (C*R*S, N*P*Q): row (c, i, j) holds the padded input under filter tap (i, j) of channel
    c at every output position (n, p, q), so that one GEMM with the (K, C*R*S) weight gives the output
    channel-major, and one with the channel-major output gradient the filter gradient."""
    xp = backend.array_module(x)
    xpad = _padded(x, padding)
    sn, sc, sh, sw = xpad.strides
    n, c = xpad.shape[:2]
    view = _as_strided(xp, xpad, (c, r, s, n, p, q),
                       (sc, sh * dilation[0], sw * dilation[1], sn, sh * stride[0], sw * stride[1]))
    return xp.ascontiguousarray(view).reshape(c * r * s, n * p * q)


# ---------------------------------------------------------------- references
#: Bytes of lowered columns the cpu path makes at a time: a few images' worth, so that the GEMM writes them
#: and the next step reads them back while they are still in cache.
COLUMN_BYTES = 4 << 20


def _image_step(xp, n, per_image):
    """Images per slice of the lowered columns: about COLUMN_BYTES of them on NumPy; all at once on a GPU."""
    return max(1, COLUMN_BYTES // max(per_image, 1)) if xp is np else n


def conv2d_forward_ref(x, w, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
                       activation=None, want_mask=False):
    xp = backend.array_module(x)
    acc = acc_dtype(x.dtype)
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    p = out_size(h, r, stride[0], padding[0], dilation[0])
    q = out_size(wd, s, stride[1], padding[1], dilation[1])
    xa = x.astype(acc, copy=False)
    kg, rows, pq = k // groups, cg * r * s, p * q
    wg = w.astype(acc, copy=False).reshape(groups, kg, rows)
    y = xp.empty((k, n * pq), acc)  # channel-major, as the ReLU mask is: NCHW by one copy at the end
    b = None if bias is None else bias.astype(acc)[:, None]
    keep = _mask_rows(xp, k, n * pq) if activation == "relu" and want_mask else None
    step = _image_step(xp, n, c * r * s * pq * y.itemsize)
    for n0 in range(0, n, step):
        n1 = min(n, n0 + step)
        cols = _columns(xa[n0:n1], r, s, p, q, stride, padding, dilation)
        ys = y[:, n0 * pq:n1 * pq]
        for g in range(groups):
            xp.matmul(wg[g], cols[g * rows:(g + 1) * rows], out=ys[g * kg:(g + 1) * kg])
        # the epilogue on the slice while it is in cache
        if b is not None:
            ys += b
        if activation == "relu":
            xp.maximum(ys, 0, out=ys)
            if keep is not None:  # not <= 0: NaN kept with its gradient, as in PyTorch
                xp.logical_not(ys <= 0, out=keep[:, n0 * pq:n1 * pq])
    mask = None if keep is None else _pack_rows(keep)
    return y.reshape(k, n, p, q).transpose(1, 0, 2, 3).astype(x.dtype, order="C"), mask


def _data_grad(dk, wf, x_shape, stride, padding, dilation, groups):
    """dX, (N, C, H, W) in ``dk``'s dtype (a view), from the output gradient as (K, N, P, Q) ``dk`` and the weight
    ``wf``: the columns ``W^T dY`` of each group and slice of images (one GEMM, rows in (tap, channel) order),
    added back onto the padded input tap by tap (col2im), each tap's columns one contiguous block."""
    xp = backend.array_module(dk)
    n, c, h, wd = x_shape
    k, cg, r, s = wf.shape
    _, _, p, q = dk.shape
    ph, pw = padding
    kg = k // groups
    w_tap = wf.reshape(groups, kg, cg, r * s).transpose(0, 3, 2, 1)  # (group, tap, channel, k)
    dk3 = dk.reshape(k, n, p * q)
    step = _image_step(xp, n, r * s * cg * p * q * dk.itemsize)
    dxp = xp.zeros((c, n, h + 2 * ph, wd + 2 * pw), dk.dtype)
    for g in range(groups):
        wt = xp.ascontiguousarray(w_tap[g]).reshape(r * s * cg, kg)
        for n0 in range(0, n, step):
            n1 = min(n, n0 + step)
            cols = (wt @ dk3[g * kg:(g + 1) * kg, n0:n1].reshape(kg, -1)).reshape(r, s, cg, n1 - n0, p, q)
            for i in range(r):
                for j in range(s):
                    y0, x0 = i * dilation[0], j * dilation[1]
                    dxp[g * cg:(g + 1) * cg, n0:n1, y0:y0 + stride[0] * (p - 1) + 1:stride[0],
                        x0:x0 + stride[1] * (q - 1) + 1:stride[1]] += cols[i, j]
    return dxp[:, :, ph:ph + h, pw:pw + wd].transpose(1, 0, 2, 3)


def _channel_major(dy, acc, mask=None):
    """The output gradient as a C-contiguous (K, N, P, Q) array in ``acc``, +0 where ``mask`` (the forward's
    packed ReLU mask) has no bit (:func:`clear_unset`: a NaN gradient stops where the ReLU cut)."""
    xp = backend.array_module(dy)
    if mask is None:
        return xp.ascontiguousarray(dy.transpose(1, 0, 2, 3), dtype=acc)
    # a copy always: at N = 1 (or K = 1) the transposed dy is itself contiguous, and is the caller's
    dk = xp.array(dy.transpose(1, 0, 2, 3), dtype=acc, order="C")
    n, k, p, q = dy.shape
    return clear_unset(dk, _mask_bits(mask, n * p * q).reshape(dk.shape))


def _filter_grad(dk, xf, w_shape, stride, padding, dilation, groups):
    """dW in ``dk``'s dtype from the (masked) output gradient as a C-contiguous (K, N, P, Q) ``dk`` and the input
    ``xf``: per group and slice of images one GEMM, ``dY cols^T``, the slices' products added."""
    xp = backend.array_module(dk)
    k, cg, r, s = w_shape
    _, n, p, q = dk.shape
    kg, rows, pq = k // groups, cg * r * s, p * q
    d2 = dk.reshape(k, n * pq)
    dw = xp.zeros((k, rows), dk.dtype)
    step = _image_step(xp, n, xf.shape[1] * r * s * pq * dk.itemsize)
    for n0 in range(0, n, step):
        n1 = min(n, n0 + step)
        cols = _columns(xf[n0:n1], r, s, p, q, stride, padding, dilation)
        for g in range(groups):
            dw[g * kg:(g + 1) * kg] += d2[g * kg:(g + 1) * kg, n0 * pq:n1 * pq] @ cols[g * rows:(g + 1) * rows].T
    return dw.reshape(w_shape)


def conv2d_backward_ref(dy, x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, mask=None,
                        need_dx=True, need_dw=True, need_db=False):
    xp = backend.array_module(dy)
    acc = acc_dtype(dy.dtype)
    dk = _channel_major(dy, acc, mask)
    dx = dw = db = None
    if need_db:
        db = dk.sum(axis=(1, 2, 3)).astype(dy.dtype)
    if need_dx:
        dx = xp.ascontiguousarray(
            _data_grad(dk, w.astype(acc, copy=False), x.shape, stride, padding, dilation, groups).astype(
                x.dtype, copy=False))
    if need_dw:
        dw = xp.ascontiguousarray(
            _filter_grad(dk, x.astype(acc, copy=False), w.shape, stride, padding, dilation, groups).astype(
                w.dtype, copy=False))
    return dx, dw, db


def conv2d_backward_data_ref(dy, w, x_shape, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    xp = backend.array_module(dy)
    dk = _channel_major(dy, acc_dtype(dy.dtype))
    return xp.ascontiguousarray(
        _data_grad(dk, w.astype(dk.dtype), x_shape, stride, padding, dilation, groups).astype(dy.dtype))


def conv2d_backward_filter_ref(dy, x, w_shape, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    acc = acc_dtype(dy.dtype)
    return _filter_grad(_channel_major(dy, acc), x.astype(acc), w_shape, stride, padding, dilation, groups).astype(
        dy.dtype)
