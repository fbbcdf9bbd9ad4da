"""Depthwise convolutions (``groups`` = input channels, each with its own filters) on ``conv_depthwise.cu``: one launch
forward (bias, ReLU and its mask included), one for the input gradient, two for the filter and bias gradients
(per-split partial sums, then their fixed-order sum). :mod:`.conv` routes here the C-contiguous fp32 / fp16 / bf16
calls whose filters have at most :data:`TAPS_MAX` taps; its grouped GEMM path would run one pack and one GEMM per
channel. Calls with one filter a channel and no ReLU mask (MobileNet's) take the tiled kernels of
``conv_depthwise_tiled.cu`` (planes copied into shared memory with wide loads, strips of outputs from register
windows, output planes staged there too); the others, in the forward and the backward-data, the kernels that hold a
whole image plane in shared memory on large planes (the rules below; the forward not when it writes a ReLU mask),
else the thread-per-element ones. The launchers' ``run`` functions have :mod:`.conv`'s launcher signatures."""
from __future__ import annotations

import functools

import numpy as np

from . import NULL, ctype, get_kernel, grid_1d, sm_count
from .conv_plan import GPU_DTYPES, geometry

TAPS_MAX = 64  # R*S at most (the filter gradient keeps R*S + 1 sums per thread in registers)
PLANE_BYTES = 96 * 1024  # the most shared memory a plane kernel's block takes (two blocks an SM)
#: Where the plane kernels pay (measured on MobileNetV2's batch-128 layers, H200, fp16 and fp32, before the tiled
#: kernels took the calls without filter multipliers or masks): the forward at
#: stride 1 from this many output pixels a plane (28x28 and 56x56 faster, 14x14 and 7x7 slower, and the
#: stride-2 56x56 one), the backward-data from this many input pixels (all but 7x7 faster, up to 5x).
PLANE_MIN_OUTPUTS, PLANE_MIN_INPUTS = 512, 196
THREADS = 256  # conv_depthwise.cu's blocks (its warp sums assume 8 warps)
_INT32 = 2 ** 31
#: The tiled kernels (conv_depthwise_tiled.cu) take the calls with one filter a channel and no ReLU mask whose
#: filters have at most TILED_TAPS_MAX taps (a thread keeps R*S + 1 sums) and whose one source plane fits in
#: TILED_PLANE_BYTES of shared memory; a block takes several planes where they are small, up to TILED_SOURCE
#: source elements and TILED_BLOCK_BYTES (four blocks an SM).
TILED = True
TILED_TAPS_MAX, TILED_PLANE_BYTES, TILED_SOURCE, TILED_BLOCK_BYTES = 25, 100 * 1024, 4096, 48 * 1024
#: Whether the tiled forward and input gradient stage their output planes in shared memory (the kernel file says
#: why), where they fit.
TILED_STAGE = True
#: 16-bit forwards and input gradients keep their source planes as 16-bit values in shared memory where one plane
#: as floats, with its staged output, would take over this many bytes (fewer than four blocks an SM).
TILED_PLANE16_OVER = TILED_BLOCK_BYTES
#: The tiled filter gradient splits each channel's images for about this many blocks an SM, and its blocks take
#: images up to this many source elements at once (its rounds of images run one after the other).
TILED_WGRAD_BLOCKS_PER_SM, TILED_WGRAD_SOURCE = 8, 8192


def applies(dtype, x_shape, w_shape, groups):
    """Whether a convolution is depthwise and fits these kernels."""
    n, c, h, wd = x_shape
    k, cg, r, s = w_shape
    return (groups > 1 and groups == c and cg == 1 and k % c == 0 and r * s <= TAPS_MAX and k < 65536
            and np.dtype(dtype) in GPU_DTYPES and n * max(c, k) * h * wd < _INT32)


@functools.cache
def _plan(dtype, x_shape, w_shape, stride, padding, dilation):
    """(the four kernels, P, Q, the geometry as a device int32 array in conv_depthwise.cu's order)."""
    import cupy

    n, c, h, wd, k, _, r, s, p, q = geometry(x_shape, w_shape, stride, padding, dilation)
    if n * k * p * q >= _INT32:
        return None
    opts = (f"-DCONV_T={ctype(dtype)}", f"-DG_R={r}", f"-DG_S={s}")
    kernels = {name: get_kernel("conv_depthwise.cu", name, opts) for name in (
        "dw_fwd", "dw_dgrad", "dw_wgrad", "dw_reduce", "dw_fwd_plane", "dw_dgrad_plane")}
    # the plane kernels' shared memory: the padded input plane; the spread dz plane and the dx sums (floats); 0
    # where the thread-per-element kernels run instead
    hs, ws = (p - 1) * stride[0] + (r - 1) * dilation[0] + 1, (q - 1) * stride[1] + (s - 1) * dilation[1] + 1
    hb, wb = h + padding[0] + (r - 1) * dilation[0], wd + padding[1] + (s - 1) * dilation[1]
    fwd_plane = stride == (1, 1) and p * q >= PLANE_MIN_OUTPUTS
    smem = {"dw_fwd_plane": 4 * hs * ws if fwd_plane else 0,
            "dw_dgrad_plane": 4 * (hb * wb + h * wd) if h * wd >= PLANE_MIN_INPUTS else 0}
    smem = {name: b if b <= PLANE_BYTES else 0 for name, b in smem.items()}
    for name, b in smem.items():
        if b:
            kernels[name].max_dynamic_shared_size_bytes = max(kernels[name].max_dynamic_shared_size_bytes, b)
    geo = cupy.asarray(np.array([n, c, h, wd, k, k // c, p, q, *stride, *padding, *dilation], np.int32))
    return kernels, smem, p, q, geo


def _strip(width, step):
    """Outputs a thread's strip: 8 or 4 where that divides the row (whole vector stores), else a divisor of the row
    from 5 to 7, else 8 (the last strip cut short); a multiple of ``step`` (the dgrad's column stride)."""
    for t in (8, 4, 7, 6, 5):
        if width % t == 0 and t % step == 0:
            return t
    return -(-8 // step) * step


def _tiled_layout(direction, x_shape, stride, padding, dilation, r, s, p, q):
    """``(tq, rows, cols, r0, c0)``: the strip width and the shared-memory plane of conv_depthwise_tiled.cu's
    kernels for ``direction`` (0 forward, 1 input gradient, 2 filter gradient): ``rows x cols`` floats (cols odd),
    source pixel (i, j) at (i + r0, j + c0). The forward's source is x and each strip reads rows
    ``p*sh + r*dh`` and columns ``q*sw + s*dw`` of the plane padded by (ph, pw); the input gradient's source is
    dy, whose rows ``rb + (i + ph - r*dh) // sh`` a block of sh dx rows reads (columns likewise, per strip)."""
    _, _, h, wd = x_shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    if direction != 1:
        tq = _strip(q, 1)
        return tq, (p - 1) * sh + (r - 1) * dh + 1, ((-(-q // tq) * tq - 1) * sw + (s - 1) * dw + 1) | 1, ph, pw
    tq = _strip(wd, sw)
    off_min, off_max = (ph - (r - 1) * dh) // sh, (sh - 1 + ph) // sh
    coff_min, coff_max = (pw - (s - 1) * dw) // sw, (tq - 1 + pw) // sw
    rows = -(-h // sh) - 1 + off_max - off_min + 1
    cols = ((-(-wd // tq) - 1) * (tq // sw) + coff_max - coff_min + 1) | 1
    return tq, rows, cols, -off_min, -coff_min


@functools.cache
def _tiled_plan(dtype, x_shape, w_shape, stride, padding, dilation, direction, dev):
    """``(kernel, grid, shared bytes, images a block)`` of a tiled direction (the last for the filter gradient,
    whose blocks each sum a share of the images of one channel), or None where it does not apply."""
    n, c, h, wd, k, _, r, s, p, q = geometry(x_shape, w_shape, stride, padding, dilation)
    if not TILED or k != c or r * s > TILED_TAPS_MAX or n * c * max(h * wd, p * q) >= _INT32:
        return None
    tq, rows, cols, r0, c0 = _tiled_layout(direction, x_shape, stride, padding, dilation, r, s, p, q)
    source = p * q if direction == 1 else h * wd
    extra = p * -(-q // tq) * tq if direction == 2 else r * s  # per plane: the dy plane, or its filter
    floats = rows * cols + extra  # a plane's floats before any staged output
    if 4 * floats > TILED_PLANE_BYTES:
        return None
    # the staged output plane (the forward's y, the input gradient's dx), where it pays and fits
    item = np.dtype(dtype).itemsize
    out_bytes = item * (h * wd if direction == 1 else p * q)
    if direction == 2 or not TILED_STAGE or 4 * floats + out_bytes > TILED_PLANE_BYTES:
        out_bytes = 0
    narrow = direction != 2 and item == 2 and 4 * floats + out_bytes > TILED_PLANE16_OVER  # 16-bit source planes
    plane_bytes = (item if narrow else 4) * rows * cols + 4 * extra + out_bytes  # a plane's share of the block
    # planes a block at once: up to TILED_SOURCE (filter gradient: TILED_WGRAD_SOURCE) source elements and
    # TILED_BLOCK_BYTES; the forward's and the input gradient's blocks two an SM at least, the filter gradient's
    # images split for TILED_WGRAD_BLOCKS_PER_SM
    per = -(-n // min(n, -(-TILED_WGRAD_BLOCKS_PER_SM * sm_count(dev) // c)))
    planes = max(1, min((TILED_WGRAD_SOURCE if direction == 2 else TILED_SOURCE) // source,
                        TILED_BLOCK_BYTES // plane_bytes, per if direction == 2 else -(-n * c // (2 * sm_count(dev)))))
    grid = (-(-n // per), c) if direction == 2 else (-(-n * c // planes),)
    used = -(-planes * rows * cols * (item if narrow else 4) // 4) + planes * extra  # floats before the staging
    out = -(-used // 4) * 4 if out_bytes else 0  # the staged planes' float offset, 16-byte aligned
    opts = (f"-DCONV_T={ctype(dtype)}", f"-DG_DIR={direction}", f"-DG_R={r}", f"-DG_S={s}",
            *(f"-DG_{name}={v}" for name, v in zip(("SH", "SW", "PH", "PW", "DH", "DW"),
                                                    (*stride, *padding, *dilation))),
            f"-DG_H={h}", f"-DG_W={wd}", f"-DG_P={p}", f"-DG_Q={q}", f"-DG_TQ={tq}", f"-DG_PLANES={planes}",
            f"-DG_SR={rows}", f"-DG_SC={cols}", f"-DG_R0={r0}", f"-DG_C0={c0}", f"-DG_OUT={out}",
            f"-DG_P16={int(narrow)}")
    kern = get_kernel("conv_depthwise_tiled.cu", ("dwt_fwd", "dwt_dgrad", "dwt_wgrad")[direction], opts)
    smem = 4 * out + planes * out_bytes if out_bytes else 4 * used
    kern.max_dynamic_shared_size_bytes = max(kern.max_dynamic_shared_size_bytes, smem)
    return kern, grid, smem, per


def _flags(relu, bias):
    return np.int32((1 if relu else 0) | (2 if bias else 0))


@functools.cache
def forward_launcher(dtype, x_shape, w_shape, stride, padding, dilation):
    """``run(x, w, bias, relu, want_mask, keep_x=False, packed=None) -> (y, mask)`` (and a None kept input with
    ``keep_x``), or None where the output's indices would not fit."""
    import cupy

    plan = _plan(dtype, x_shape, w_shape, stride, padding, dilation)
    if plan is None:
        return None
    kernels, smem, p, q, geo = plan
    fwd, plane, plane_smem = kernels["dw_fwd"], kernels["dw_fwd_plane"], smem["dw_fwd_plane"]
    n, k = x_shape[0], w_shape[0]
    m = n * p * q
    words = (m + 31) // 32
    grid = (grid_1d(m, THREADS), k)

    tiled = _tiled_plan(dtype, x_shape, w_shape, stride, padding, dilation, 0, cupy.cuda.runtime.getDevice())
    if tiled is not None:
        tiled_kern, tiled_grid, tiled_smem, _ = tiled
        nc = np.int32(n * k)

    def run(x, w, bias, relu, want_mask, keep_x=False, packed=None):
        y = cupy.ndarray((n, k, p, q), dtype)
        mask = cupy.ndarray((k, words), np.uint32) if (relu and want_mask) else None
        flags = _flags(relu, bias is not None)
        if mask is None and tiled is not None:
            tiled_kern(tiled_grid, (THREADS,), (x, w, y if bias is None else bias, y, flags, nc, np.int32(k)),
                       shared_mem=tiled_smem)
        elif mask is None and plane_smem:
            plane((n * k,), (THREADS,), (x, w, y if bias is None else bias, y, flags, geo), shared_mem=plane_smem)
        else:
            fwd(grid, (THREADS,), (x, w, y if bias is None else bias, y, NULL if mask is None else mask, flags,
                                   np.int32(words), geo))
        return (y, mask, None) if keep_x else (y, mask)
    return run


def _splits(k, m, dev):
    """Splits of each channel's ``m`` output pixels for the filter gradient: enough blocks for two per SM, each
    split at least 2048 pixels."""
    return max(1, min(-(-2 * sm_count(dev) // k), -(-m // 2048)))


@functools.cache
def backward_launcher(dtype, x_shape, w_shape, stride, padding, dilation, dev):
    """``run(dy, x, w, mask, need_dx, need_dw, need_db) -> (dx, dw, db)``, or None as :func:`forward_launcher`."""
    import cupy

    plan = _plan(dtype, x_shape, w_shape, stride, padding, dilation)
    if plan is None:
        return None
    kernels, smem, p, q, geo = plan
    reduce = kernels["dw_reduce"]
    n, c, h, wd = x_shape
    k, _, r, s = w_shape
    m = n * p * q
    words = np.int32((m + 31) // 32)
    dgrad_smem, wgrad = smem["dw_dgrad_plane"], kernels["dw_wgrad"]
    splits = _splits(k, m, dev)
    per = np.int32(-(-m // splits))
    pairs = k * (r * s + 1)
    tiled_dx = _tiled_plan(dtype, x_shape, w_shape, stride, padding, dilation, 1, dev)
    tiled_dw = _tiled_plan(dtype, x_shape, w_shape, stride, padding, dilation, 2, dev)
    if tiled_dw is not None:
        dw_splits, dw_per = tiled_dw[1][0], np.int32(tiled_dw[3])

    def run(dy, x, w, mask, need_dx, need_dw, need_db, w_channels_last=False):
        dx = dw = db = None
        ma = NULL if mask is None else mask
        if (need_dw or need_db) and mask is None and tiled_dw is not None:
            dw = cupy.ndarray(w_shape, dtype) if need_dw else None
            db = cupy.ndarray((k,), dtype) if need_db else None
            part = cupy.ndarray((dw_splits, pairs), np.float32)
            tiled_dw[0](tiled_dw[1], (THREADS,), (x, dy, part, np.int32(n), dw_per, np.int32(c)),
                        shared_mem=tiled_dw[2])
            reduce((grid_1d(pairs, 128),), (128,), (part, NULL if dw is None else dw, NULL if db is None else db,
                                                   np.int32(dw_splits), np.int32(k)))
        elif need_dw or need_db:
            dw = cupy.ndarray(w_shape, dtype) if need_dw else None
            db = cupy.ndarray((k,), dtype) if need_db else None
            part = cupy.ndarray((splits, pairs), np.float32)
            wgrad((splits, k), (THREADS,), (x, dy, ma, part, words, per, geo))
            reduce((grid_1d(pairs, 128),), (128,), (part, NULL if dw is None else dw, NULL if db is None else db,
                                                   np.int32(splits), np.int32(k)))
        if need_dx:
            dx = cupy.ndarray(x_shape, dtype)
            if mask is None and tiled_dx is not None:
                tiled_dx[0](tiled_dx[1], (THREADS,), (dy, w, dx, np.int32(n * c), np.int32(c)),
                            shared_mem=tiled_dx[2])
            elif dgrad_smem:
                kernels["dw_dgrad_plane"]((n * c,), (THREADS,), (dy, w, ma, dx, words, geo), shared_mem=dgrad_smem)
            else:
                kernels["dw_dgrad"]((grid_1d(n * h * wd, THREADS), c), (THREADS,), (dy, w, ma, dx, words, geo))
        return dx, dw, db
    return run
