"""Winograd convolution in fp32 without TF32: the 3x3 stride-1 forward, backward-data and backward-filter, and
the 3x3 stride-2 forward at padding 1 (:func:`conv_s2_ref`).

F(4x4, 3x3): a 4x4 block of outputs of one channel pair takes 36 multiplies of transformed values instead of 144
of the direct sum: x's 6x6 windows are transformed (``V = B^T d B``), the filters too (``U = G g G^T``), the 36
transform-domain positions are 36 GEMMs over the channels (cuBLASLt, strict fp32 compute), and each 6x6 product
folds into its 4x4 outputs (``A^T m A``). (cuDNN's strict-fp32 convolutions run these shapes above the FFMA peak
of a direct sum, so by a fast algorithm too.) The data gradient is the same sum over dy with each filter turned
180 degrees, its channels swapped and the padding ``2 - padding``. The filter gradient is F(3x3, 4x4), the same
matrices in swapped roles (``A^T``'s transpose transforms the filters, ``G^T`` folds): each tile's 4x4 block of
dy, taken as the filter, correlates with the tile's 6x6 window of x into a 3x3 share of dW; the shares sum over
the tiles in the transform domain (GEMMs that reduce over runs of the tiles, the runs' sums added in order), and
one fold per filter gives dW. Rounding, measured against float64 on ResNet's 3x3 layers (the norm of the error
over the result's): forward and data gradient 1.1e-6 to 3.4e-6 (stride-2 forward 1.2e-6 to 2.6e-6), a few
times a direct fp32 sum's (cuDNN strict: 2e-7 to 1.1e-6); filter gradient 1.7e-6 to 7.1e-6, below cuDNN
strict's (2.7e-6 to 3.1e-5).

winograd.cu holds the transforms; :func:`conv_ref` and :func:`wgrad_ref` are the same decompositions in NumPy
(the tests' check of the algebra and the tiling against the direct sums).
"""
from __future__ import annotations

import functools

import numpy as np

from .. import backend
from . import ARG, Prepared, cublaslt, get_kernel, sm_count

#: the transforms of F(4x4, 3x3) (Lavin & Gray's construction), interpolating at 0, 1, -1, 2, -1/2 and infinity:
#: in a float32 simulation (256 channels; 512 tiles for the filter gradient) their rounding error is 1.4x
#: (forward) and 1.5x (filter gradient) below that of the usual 0, +-1, +-2, whose transforms scale by up to
#: 8 both ways. F(3x3, 4x4), the filter gradient's, is (A_T.T, G.T, B_T).
B_T = np.array([[1, 1.5, -2, -1.5, 1, 0], [0, -1, -2.5, -0.5, 1, 0], [0, 1, 0.5, -2.5, 1, 0], [0, -0.5, -1, 0.5, 1, 0],
                [0, 2, -1, -2, 1, 0], [0, 1, 1.5, -2, -1.5, 1]], np.float64)
G = np.array([[1, 0, 0], [-1 / 3, -1 / 3, -1 / 3], [1 / 3, -1 / 3, 1 / 3], [1 / 15, 2 / 15, 4 / 15],
              [-16 / 15, 8 / 15, -4 / 15], [0, 0, 1]], np.float64)
A_T = np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -0.5, 0], [0, 1, 1, 4, 0.25, 0], [0, 1, -1, 8, -0.125, 1]],
               np.float64)
#: F(4x4, 2x2)'s, interpolating at 0, 1, -1, 1/2 and infinity: the 3x3 stride-2 forward at padding 1 as a stride-1
#: 2x2 correlation over x's four phases (see :func:`conv_s2_ref`)
B5_T = np.array([[0.5, -1, -0.5, 1, 0], [0, -0.5, 0.5, 1, 0], [0, 0.5, -1.5, 1, 0], [0, -1, 0, 1, 0],
                 [0, 0.5, -1, -0.5, 1]], np.float64)
G5 = np.array([[2, 0], [1, 1], [-1 / 3, 1 / 3], [-8 / 3, -4 / 3], [0, 1]], np.float64)
A5_T = np.array([[1, 1, 1, 1, 0], [0, 1, -1, 0.5, 0], [0, 1, 1, 0.25, 0], [0, 1, -1, 0.125, 1]], np.float64)
#: each phase's filter taps along one axis, as rows (columns) of w at the correlation's offsets -1 and 0 (None:
#: no tap): an even phase meets only w's middle row, an odd one its first and last
PHASE_TAPS = ((None, 1), (0, 2))
TILE = 4  #: outputs per tile side (the filter gradient's dy blocks too)
POINTS = 36  #: transform-domain positions: 36 GEMMs

_THREADS = 256


def applies(dtype, x_shape, w_shape, stride, padding, dilation, groups, tf32, config, forward=False) -> bool:
    """Whether the GPU convolution takes this path: fp32 without TF32, one group, a 3x3 filter at dilation 1, and
    (unless ``config.winograd`` forces it) at least 32 input and output channels, where its GEMMs are long enough
    to beat the direct kernels; at stride 1 the same padding (0-2) both ways, in every direction alike; at stride
    2 padding 1, the ``forward`` only (the direct kernels' strided data and filter gradients run near cuDNN's).
    The stride-2 forward measured faster than the direct kernel on each of ResNet's six stride-2 3x3 layers."""
    if config.winograd is False or dtype != backend.float32 or tf32 or groups != 1:
        return False
    if tuple(w_shape[2:]) != (3, 3) or tuple(dilation) != (1, 1) or padding[0] != padding[1]:
        return False
    if tuple(stride) == (2, 2):
        if not forward or tuple(padding) != (1, 1):
            return False
    elif tuple(stride) != (1, 1) or not 0 <= padding[0] <= 2:
        return False
    return bool(config.winograd) or (x_shape[1] >= 32 and w_shape[0] >= 32)


def _tiles(p, q):
    return -(-p // TILE), -(-q // TILE)


def _windows(x, padding, th, tw):
    """x's 6x6 windows of the tiles (TILE apart), (N, C, TH, TW, 6, 6), zero outside x."""
    n, c, h, wd = x.shape
    size = TILE + 2
    xp = np.zeros((n, c, TILE * th + 2, TILE * tw + 2))
    rows, cols = min(h, TILE * th + 2 - padding), min(wd, TILE * tw + 2 - padding)
    xp[:, :, padding:padding + rows, padding:padding + cols] = x[:, :, :rows, :cols]
    return np.stack([np.stack([xp[:, :, TILE * i:TILE * i + size, TILE * j:TILE * j + size] for j in range(tw)], 2)
                     for i in range(th)], 2)


def wgrad_ref(dy, x, padding=1):
    """The filter gradient's decomposition in NumPy float64: dW (K, C, 3, 3) of dy (N, K, P, Q) and x (N, C, H,
    W) for the 3x3 stride-1 convolution of that padding."""
    dy, x = np.asarray(dy, np.float64), np.asarray(x, np.float64)
    n, k, p, q = dy.shape
    th, tw = _tiles(p, q)
    g = np.zeros((n, k, TILE * th, TILE * tw))
    g[:, :, :p, :q] = dy
    g = g.reshape(n, k, th, TILE, tw, TILE).transpose(0, 1, 2, 4, 3, 5)  # (n, k, th, tw, 4, 4)
    v = np.einsum("ar,nctwrs,bs->nctwab", B_T, _windows(x, padding, th, tw), B_T)
    u = np.einsum("ra,nktwrs,sb->nktwab", A_T, g, A_T)
    m = np.einsum("nktwab,nctwab->kcab", u, v)
    return np.einsum("ai,kcab,bj->kcij", G, m, G)


def conv_ref(x, w, bias=None, padding=1, data_grad=False):
    """The decomposition in NumPy float64: the 3x3 stride-1 convolution of x (N, C, H, W) by w (K, C, 3, 3), or
    with ``data_grad`` the data gradient's sum of x = dy (N, K, P, Q) by w turned and swapped (onto C channels,
    padding ``padding`` as given: the caller passes ``2 - padding``)."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    if data_grad:
        w = w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3)
    n, c, h, wd = x.shape
    k = w.shape[0]
    p, q = h + 2 * padding - 2, wd + 2 * padding - 2
    th, tw = _tiles(p, q)
    v = np.einsum("ar,nctwrs,bs->nctwab", B_T, _windows(x, padding, th, tw), B_T)
    u = np.einsum("ar,kcrs,bs->kcab", G, w, G)
    m = np.einsum("nctwab,kcab->nktwab", v, u)
    yt = np.einsum("ia,nktwab,jb->nktwij", A_T, m, A_T)  # (n, k, th, tw, 4, 4)
    y = yt.transpose(0, 1, 2, 4, 3, 5).reshape(n, k, TILE * th, TILE * tw)[:, :, :p, :q]
    return y if bias is None else y + np.asarray(bias, np.float64)[None, :, None, None]


def conv_s2_ref(x, w, bias=None):
    """The stride-2 decomposition in NumPy float64: the 3x3 stride-2 convolution at padding 1 of x (N, C, H, W) by
    w (K, C, 3, 3) as F(4x4, 2x2) over x's four phases X_ab = x[:, :, a::2, b::2], 4C channels of 2x2 filters."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    n, c, h, wd = x.shape
    k = w.shape[0]
    p, q = -(-h // 2), -(-wd // 2)
    th, tw = _tiles(p, q)
    y = np.zeros((n, k, TILE * th, TILE * tw))
    for a, b in ((0, 0), (0, 1), (1, 0), (1, 1)):
        ph = np.zeros((n, c, TILE * th + 1, TILE * tw + 1))  # the phase, from its row (column) -1
        part = x[:, :, a::2, b::2][:, :, :TILE * th, :TILE * tw]
        ph[:, :, 1:1 + part.shape[2], 1:1 + part.shape[3]] = part
        win = np.stack([np.stack([ph[:, :, TILE * i:TILE * i + 5, TILE * j:TILE * j + 5] for j in range(tw)], 2)
                        for i in range(th)], 2)  # (n, c, th, tw, 5, 5)
        taps = np.zeros((k, c, 2, 2))
        for u, r in enumerate(PHASE_TAPS[a]):
            for v, s in enumerate(PHASE_TAPS[b]):
                if r is not None and s is not None:
                    taps[:, :, u, v] = w[:, :, r, s]
        v_ = np.einsum("ar,nctwrs,bs->nctwab", B5_T, win, B5_T)
        u_ = np.einsum("ar,kcrs,bs->kcab", G5, taps, G5)
        m = np.einsum("nctwab,kcab->nktwab", v_, u_)
        y += np.einsum("ia,nktwab,jb->nktwij", A5_T, m, A5_T).transpose(0, 1, 2, 4, 3, 5).reshape(y.shape)
    y = y[:, :, :p, :q]
    return y if bias is None else y + np.asarray(bias, np.float64)[None, :, None, None]


@functools.lru_cache(maxsize=1024)  # keyed by sizes: bounded for workloads of many shapes
def _prepared(name, items, n_arrays, consts, wide, dev):
    """The launch of winograd.cu's ``name`` over ``items`` threads on device ``dev``: ``n_arrays`` addresses per
    call, then ``consts`` as int32, the last ``wide`` of them as int64."""
    grid = (min(-(-items // _THREADS), 65535 * 8),)
    cut = len(consts) - wide
    typed = (*(np.int32(v) for v in consts[:cut]), *(np.int64(v) for v in consts[cut:]))
    return Prepared(get_kernel("winograd.cu", name), grid, (_THREADS,), (ARG,) * n_arrays + typed)


def _launch(name, items, arrays, consts, wide):
    """One launch (a prepared one: CuPy's call converts every argument and looks the function up each time, host
    time that an eager fp32 step pays for each of the transforms); ``arrays`` CuPy arrays or None (a null
    pointer); ``consts`` ints, the last ``wide`` of them int64."""
    dev = arrays[0].data.device_id
    _prepared(name, items, len(arrays), consts, wide, dev)(*[0 if a is None else a.data.ptr for a in arrays])


def _chunks(*sizes):
    """The distance (floats) between the matrices of each: a multiple of 64 (256-byte aligned, as cuBLASLt's
    plans take their outputs)."""
    return tuple(-(-e // 64) * 64 for e in sizes)


def _conv(x, w, bias, n, c_in, h, wd, k_out, padding, data_grad, out):
    """``out`` (N, k_out, P, Q) = the transformed sum of x (N, c_in, H, W) by the filters w (as stored: (k_out,
    c_in, 3, 3), or for the data gradient (c_in, k_out, 3, 3), turned by wino_filter)."""
    import cupy

    p, q = h + 2 * padding - 2, wd + 2 * padding - 2
    th, tw = _tiles(p, q)
    t = n * th * tw
    sv, su, sm = _chunks(c_in * t, k_out * c_in, k_out * t)
    v, u, m = (cupy.ndarray((POINTS * e,), np.float32) for e in (sv, su, sm))
    _launch("wino_input", c_in * t, (x, v), (n, c_in, h, wd, th, tw, padding, 1, t, sv), 2)
    kw, cw = (c_in, k_out) if data_grad else (k_out, c_in)  # w's own (K, C)
    _launch("wino_filter", kw * cw, (w, u), (kw, cw, int(data_grad), su), 1)
    # M[xi] (k_out x T, row-major) = U[xi] (k_out x c_in) @ V[xi] (c_in x T): column-major D (T x k_out) =
    # A (T x c_in, ld T) @ B (c_in x k_out, ld c_in)
    cublaslt.strided_batched(v, u, m, POINTS, (sv, su, sm), cublaslt.OP_N, cublaslt.OP_N, t, k_out, c_in, t, c_in,
                             t)
    _launch("wino_output", k_out * t, (m, bias, out), (n, k_out, p, q, th, tw, sm), 1)
    return out


def forward(x, w, bias, stride, padding):
    """y (N, K, P, Q) of x (N, C, H, W) and w (K, C, 3, 3), fp32 C-contiguous CuPy arrays, at the convolution's
    stride and padding (``applies``: stride 1 and the same padding both ways, or stride 2 and padding 1)."""
    import cupy

    if tuple(stride) == (2, 2):
        return _forward_s2(x, w, bias)
    padding = padding[0]
    n, c, h, wd = x.shape
    k = w.shape[0]
    y = cupy.empty((n, k, h + 2 * padding - 2, wd + 2 * padding - 2), np.float32)
    if y.size:
        _conv(x, w, bias, n, c, h, wd, k, padding, False, y)
    return y


def _forward_s2(x, w, bias):
    """The 3x3 stride-2 forward at padding 1: F(4x4, 2x2) over x's phases, 25 GEMMs over 4C channels."""
    import cupy

    n, c, h, wd = x.shape
    k = w.shape[0]
    p, q = -(-h // 2), -(-wd // 2)
    y = cupy.empty((n, k, p, q), np.float32)
    if y.size == 0:
        return y
    th, tw = _tiles(p, q)
    t = n * th * tw
    sv, su, sm = _chunks(4 * c * t, k * 4 * c, k * t)
    v, u, m = (cupy.ndarray((25 * e,), np.float32) for e in (sv, su, sm))
    _launch("wino_s2_input", 4 * c * t, (x, v), (n, c, h, wd, th, tw, sv), 1)
    _launch("wino_s2_filter", k * 4 * c, (w, u), (k, c, su), 1)
    # as _conv's: column-major D (T x K) = A (T x 4C, ld T) @ B (4C x K, ld 4C)
    cublaslt.strided_batched(v, u, m, 25, (sv, su, sm), cublaslt.OP_N, cublaslt.OP_N, t, k, 4 * c, t, 4 * c, t)
    _launch("wino_s2_output", k * t, (m, bias, y), (n, k, p, q, th, tw, sm), 1)
    return y


def backward_data(dy, w, x_shape, stride, padding):
    """dx (N, C, H, W) of dy (N, K, P, Q) and w (K, C, 3, 3) (``applies``)."""
    import cupy

    padding = padding[0]
    n, k, p, q = dy.shape
    dx = cupy.empty(tuple(x_shape), np.float32)
    if dx.size:
        _conv(dy, w, None, n, k, p, q, x_shape[1], 2 - padding, True, dx)
    return dx


@functools.lru_cache(maxsize=None)
def runs(c, k, t, dev):
    """How many runs the filter gradient splits its ``t`` tiles into: enough GEMMs (36 per run, about one block
    per 128 x 128 of the (C, K) product each) for two on every SM of ``dev``, with runs of 512 tiles or more."""
    blocks = -(-c // 128) * -(-k // 128)
    return max(1, min(-(-2 * sm_count(dev) // (POINTS * blocks)), t // 512))


def backward_filter(dy, x, w_shape, stride, padding):
    """dW (K, C, 3, 3) of dy (N, K, P, Q) and x (N, C, H, W) (``applies``): F(3x3, 4x4), GEMMs over runs of the
    tiles."""
    import cupy

    padding = padding[0]
    n, k, p, q = dy.shape
    c, h, wd = x.shape[1:]
    dw = cupy.empty(tuple(w_shape), np.float32)
    th, tw = _tiles(p, q)
    t = n * th * tw
    if t == 0:
        dw.fill(0)
        return dw
    s = runs(c, k, t, dy.data.device_id)
    ts = -(-t // s)
    sv, su, sm = _chunks(c * ts, k * ts, k * c)
    v, u, m = (cupy.ndarray((POINTS * s * e,), np.float32) for e in (sv, su, sm))
    _launch("wino_input", c * ts * s, (x, v), (n, c, h, wd, th, tw, padding, s, ts, sv), 2)
    _launch("wino_wgrad_dy", k * ts * s, (dy, u), (n, k, p, q, th, tw, s, ts, su), 2)
    # M[xi][s] (k x c, row-major) = U[xi][s] (k x Ts) @ V[xi][s]^T (Ts x c): column-major D (c x k) = A^T (A: Ts x
    # c, ld Ts) @ B (Ts x k, ld Ts)
    cublaslt.strided_batched(v, u, m, POINTS * s, (sv, su, sm), cublaslt.OP_T, cublaslt.OP_N, c, k, ts, ts, ts,
                             c)
    _launch("wino_wgrad_output", k * c, (m, dw), (k, c, s, sm), 1)
    return dw
