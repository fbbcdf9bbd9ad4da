"""Conv2d primitives on raw NCHW arrays: forward (bias, ReLU and its bit-mask fused) and backward.

``conv2d_forward(x, w, bias, stride, padding, dilation, groups, activation, want_mask) -> (y, mask)``
``conv2d_backward(dy, x, w, stride, padding, dilation, groups, mask, need_dx, need_dw, need_db)
-> (dx, dw, db)``, and the two halves of the backward on their own for benchmarks:
``conv2d_backward_data(dy, w, x_shape, ...)``, ``conv2d_backward_filter(dy, x, w_shape, ...)``.

Shapes as PyTorch: x (N, C, H, W), w (K, C/groups, R, S), y (N, K, P, Q). ``stride``,
``padding``, ``dilation`` are (h, w) pairs. ``mask`` is the ReLU mask, bit-packed: uint32 of shape
(K, ceil(M/32)), M = N*P*Q, bit ``m % 32`` of word ``[k, m // 32]`` set where y[n, k, p, q] > 0
(m = n*P*Q + p*Q + q); the backward multiplies ``dy`` by it before anything else.

Dispatch on the array module: NumPy arrays (and float64 CuPy arrays) go to the references
(``*_ref``, im2col through strided windows + tensordot, written for either module); CuPy
float16 / bfloat16 / float32 arrays go to the implicit-GEMM kernels of ``conv.cu`` with the layout
helpers of ``conv_util.cu``: the gathered operand is repacked NHWC with channels padded to 16
bytes (a transient copy, freed on return), the output is written NCHW by the GEMM's epilogue.
float32 runs on FFMA unless :data:`allow_tf32` is set (then on TF32 tensor cores, as cuDNN's
default). On an sm_90 GPU (H100) the forward and the fp16/bf16 backward-data GEMMs with 128-byte tile
rows run on Hopper's wgmma (:data:`wgmma`), the rest on mma.sync. groups > 1 runs one GEMM per group.
A small fp16/bf16 forward (:data:`NCHW_GATHER_MAX`), or one onto at most 64 channels that would not run on
wgmma, skips the repack: conv.cu's mode 3 gathers from NCHW x and reads KCRS w as they are, in one launch.
A short reduction (C*R*S <= 32, groups = 1: a first layer on 1-3 channel images) runs on the direct
kernels of ``conv_direct.cu`` instead: forward, and the filter and bias gradients, in one launch each,
from NCHW as it is. The forward settles its path and launch constants once per call signature and knob
setting (:func:`_forward_launcher`); a call then only allocates and launches. Inputs are assumed valid and
C-contiguous.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import backend
from . import get_kernel

#: Run float32 convolutions on TF32 tensor cores (about 1e-3 relative error) instead of FFMA.
allow_tf32 = False


def out_size(size, kernel, stride, padding, dilation):
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _acc(dtype):
    return np.float64 if np.dtype(dtype) == np.float64 else np.float32


def _as_strided(xp, a, shape, strides):
    if xp is np:
        return np.lib.stride_tricks.as_strided(a, shape, strides, writeable=False)
    return xp.lib.stride_tricks.as_strided(a, shape, strides)


# ---------------------------------------------------------------- ReLU mask (bit-packed)
def pack_mask(positive):
    """(N, K, P, Q) booleans -> (K, ceil(N*P*Q/32)) uint32, bit m%32 of word m//32."""
    xp = backend.array_module(positive)
    n, k, p, q = positive.shape
    m = n * p * q
    words = (m + 31) // 32
    bits = xp.zeros((k, words * 32), np.uint32)
    bits[:, :m] = positive.transpose(1, 0, 2, 3).reshape(k, m)
    shifts = xp.arange(32, dtype=np.uint32)
    return (bits.reshape(k, words, 32) << shifts).sum(axis=-1, dtype=np.uint32)


def unpack_mask(mask, shape):
    """The booleans (N, K, P, Q) that :func:`pack_mask` packed."""
    xp = backend.array_module(mask)
    n, k, p, q = shape
    m = n * p * q
    shifts = xp.arange(32, dtype=np.uint32)
    bits = ((mask[:, :, None] >> shifts) & np.uint32(1)).reshape(k, -1)[:, :m]
    return bits.reshape(k, n, p, q).transpose(1, 0, 2, 3).astype(bool)


# ---------------------------------------------------------------- references
def _windows(xpad, r, s, p, q, stride, dilation):
    """(N, C, P, Q, R, S) strided view of the padded input: the lowered matrix, never copied here."""
    xp = backend.array_module(xpad)
    sn, sc, sh, sw = xpad.strides
    return _as_strided(xp, xpad, xpad.shape[:2] + (p, q, r, s),
                       (sn, sc, sh * stride[0], sw * stride[1], sh * dilation[0], sw * dilation[1]))


def _padded(xf, padding):
    xp = backend.array_module(xf)
    ph, pw = padding
    if ph == 0 and pw == 0:
        return xp.ascontiguousarray(xf)
    return xp.pad(xf, ((0, 0), (0, 0), (ph, ph), (pw, pw)))


def conv2d_forward_ref(x, w, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
                       activation=None, want_mask=False):
    xp = backend.array_module(x)
    acc = _acc(x.dtype)
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    p = out_size(h, r, stride[0], padding[0], dilation[0])
    q = out_size(wd, s, stride[1], padding[1], dilation[1])
    cols = _windows(_padded(x.astype(acc), padding), r, s, p, q, stride, dilation)
    wf = w.astype(acc)
    kg = k // groups
    parts = [xp.tensordot(cols[:, g * cg:(g + 1) * cg], wf[g * kg:(g + 1) * kg], axes=([1, 4, 5], [1, 2, 3]))
             for g in range(groups)]  # each (N, P, Q, Kg)
    y = (parts[0] if groups == 1 else xp.concatenate(parts, axis=3)).transpose(0, 3, 1, 2)
    if bias is not None:
        y = y + bias.astype(acc)[None, :, None, None]
    mask = None
    if activation == "relu":
        y = xp.maximum(y, 0)
        if want_mask:
            mask = pack_mask(y > 0)
    return xp.ascontiguousarray(y.astype(x.dtype)), mask


def _masked(dy, mask, acc):
    d = dy.astype(acc)
    if mask is not None:
        d = d * unpack_mask(mask, dy.shape)
    return d


def _bwd_data_ref(d, wf, x_shape, stride, padding, dilation, groups):
    xp = backend.array_module(d)
    n, c, h, wd = x_shape
    k, cg, r, s = wf.shape
    _, _, p, q = d.shape
    ph, pw = padding
    dxp = xp.zeros((n, c, h + 2 * ph, wd + 2 * pw), d.dtype)
    kg = k // groups
    for g in range(groups):
        gcols = xp.tensordot(d[:, g * kg:(g + 1) * kg], wf[g * kg:(g + 1) * kg], axes=([1], [0]))  # N,P,Q,Cg,R,S
        for i in range(r):
            for j in range(s):
                y0, x0 = i * dilation[0], j * dilation[1]
                dxp[:, g * cg:(g + 1) * cg, y0:y0 + stride[0] * (p - 1) + 1:stride[0],
                    x0:x0 + stride[1] * (q - 1) + 1:stride[1]] += gcols[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    return dxp[:, :, ph:ph + h, pw:pw + wd]


def _bwd_filter_ref(d, xf, w_shape, stride, padding, dilation, groups):
    xp = backend.array_module(d)
    k, cg, r, s = w_shape
    _, _, p, q = d.shape
    cols = _windows(_padded(xf, padding), r, s, p, q, stride, dilation)
    kg = k // groups
    parts = [xp.tensordot(d[:, g * kg:(g + 1) * kg], cols[:, g * cg:(g + 1) * cg], axes=([0, 2, 3], [0, 2, 3]))
             for g in range(groups)]  # each (Kg, Cg, R, S)
    return parts[0] if groups == 1 else xp.concatenate(parts, axis=0)


def conv2d_backward_ref(dy, x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, mask=None,
                        need_dx=True, need_dw=True, need_db=False):
    xp = backend.array_module(dy)
    acc = _acc(dy.dtype)
    d = _masked(dy, mask, acc)
    dx = dw = db = None
    if need_db:
        db = d.sum(axis=(0, 2, 3)).astype(dy.dtype)
    if need_dx:
        dx = xp.ascontiguousarray(
            _bwd_data_ref(d, w.astype(acc), x.shape, stride, padding, dilation, groups).astype(x.dtype))
    if need_dw:
        dw = xp.ascontiguousarray(
            _bwd_filter_ref(d, x.astype(acc), w.shape, stride, padding, dilation, groups).astype(w.dtype))
    return dx, dw, db


# ---------------------------------------------------------------- CUDA
_GPU_DTYPES = (backend.float16, backend.bfloat16, backend.float32)
_CTYPE = {backend.float16: "__half", backend.bfloat16: "__nv_bfloat16", backend.float32: "float"}
_THREADS = 256
_STAGES = 3
_INT32_LIMIT = 1 << 31
_GRID_Z = 65535  # the most blocks along a grid's z (the packs loop over the images beyond)
#: Bytes of one tile row along the reduction (64 or 128); None picks 128 for long reductions (64 from NCHW).
tile_row_bytes = None
#: Rows (output pixels) per block for forward / backward-data (64 or 128); None picks 128.
tile_m = None
#: Warps of a tensor-core block along (m, n): (2, 4) gives each warp a 64 x 32 share of a 128 x 128 tile,
#: (2, 2) a 64 x 64 share; None picks: (2, 2) for the forward from NCHW onto 64 output channels or fewer
#: (mode 3, H100: MNIST conv2 at batch 256 from 75 to 92 TFLOP/s on the device, at batch 64 from 52 to 78),
#: else (2, 4) (for the repacked GEMMs 4-warp blocks measured the same or slower, backward-data up to 30%).
tile_warps = None
#: Hopper's wgmma (conv.cu's CONV_MMA=3) for the repacked forward and backward-data GEMMs with 128-byte tile
#: rows: None uses it on sm_90 GPUs (fp16/bf16, and float32 when :data:`allow_tf32`), False never.
wgmma = None
#: Shared-memory stages of the wgmma pipeline (3: two blocks fit on an SM; 4: one, loads a tile further ahead);
#: None picks by the grid's size.
wgmma_stages = None
_WGMMA = 3  # conv.cu's CONV_MMA value of the wgmma path


def _on_gpu(a):
    return backend.is_cuda_array(a) and a.dtype in _GPU_DTYPES


def _magic(d):
    """(mul, shr) with n // d == (n * mul) >> (32 + shr) for 0 <= n < 2**31 (mul = 0 means d == 1)."""
    if d == 1:
        return 0, 0
    ell = (d - 1).bit_length()  # ceil(log2(d))
    p = 31 + ell
    return ((1 << p) + d - 1) // d, p - 32


def _padded_channels(c, dtype):
    vec = 16 // np.dtype(dtype).itemsize
    return (c + vec - 1) // vec * vec


def _smem_bytes(itemsize, mode, bm, bn, bkb, stages=_STAGES, wgmma=False):
    vec, bk = 16 // itemsize, bkb // itemsize
    if wgmma:  # unpadded swizzled rows, and 1024 bytes to align the tiles to the swizzle
        return max(stages * (bm + bn) * bkb + 1024, bn * (bm + 4) * 4)
    if mode < 2:
        stage, cs = (bm + bn) * (bk + vec), bn * (bm + 4) * 4
    elif mode == 2:
        stage, cs = bk * (bm + vec + bn + vec), bm * (bn + 4) * 4
    else:  # conv.cu's mode 3: k-major A, n-major B, two stages
        return max(2 * (bk * (bm + vec) + bn * (bk + vec)) * itemsize, bn * (bm + 4) * 4)
    return max(stages * stage * itemsize, cs)


def _mma(dtype):
    if dtype == backend.float32:
        return 2 if allow_tf32 else 0
    return 1


def _bkb(kred, itemsize, row_bytes=None):
    if row_bytes:
        return int(row_bytes)
    return 128 if kred * itemsize >= 1024 else 64


@functools.cache
def _igemm(dtype, mode, bm, bn, mma, bkb, warps=(2, 4), stages=None):
    """(kernel, block, shared bytes) of one conv.cu configuration (``stages``: the wgmma pipeline's depth)."""
    wg = mma == _WGMMA
    stages = stages or _STAGES
    # sm_90a first: NVRTC takes the first architecture named, and CuPy appends the device's plain one
    opts = (("-arch=sm_90a",) if wg else ()) + (
        f"-DCONV_T={_CTYPE[dtype]}", f"-DCONV_MODE={mode}", f"-DCONV_BM={bm}", f"-DCONV_BN={bn}",
        f"-DCONV_MMA={mma}", f"-DCONV_IS_BF16={int(dtype == backend.bfloat16)}", f"-DCONV_BKB={bkb}",
        f"-DCONV_WARPS_M={warps[0]}", f"-DCONV_WARPS_N={warps[1]}", f"-DCONV_STAGES={stages}",
        f"-DCONV_FLOAT={int(dtype == backend.float32)}")
    kern = get_kernel("conv.cu", "conv_igemm", opts)
    smem = _smem_bytes(np.dtype(dtype).itemsize, mode, bm, bn, bkb, stages, wg)
    kern.max_dynamic_shared_size_bytes = smem
    return kern, (32 * warps[0] * warps[1],), smem


@functools.cache
def _util(dtype, name):
    return get_kernel("conv_util.cu", name, (f"-DCONV_T={_CTYPE[dtype]}",))


@functools.cache
def _sm_count(dev_id):
    import cupy

    return cupy.cuda.runtime.getDeviceProperties(dev_id)["multiProcessorCount"]


def _ptr(a, offset_elems=0):
    """``a`` itself at offset 0 (CuPy passes an array's pointer fastest), else the offset address."""
    return a if offset_elems == 0 else np.uint64(a.data.ptr + offset_elems * a.itemsize)


@functools.cache
def _ints(*vals):
    """The values as int32 kernel arguments, made once per distinct tuple (a NumPy scalar costs ~1 us)."""
    return tuple(np.int32(v) for v in vals)


def _blocks(total, per=_THREADS):
    return (max(1, min((total + per - 1) // per, 65535 * 8)),)


def _pack_nhwc(a, c_off, c, cp_, mask=None, mask_words=0):
    """Channels [c_off, c_off+c) of NCHW ``a`` as (N, H, W, cp_), zero-padded (times ``mask``)."""
    import cupy

    n, ctot, h, w = a.shape
    hw = h * w
    out = cupy.empty((n, h, w, cp_), a.dtype)
    grid = ((hw + 31) // 32, (cp_ + 31) // 32, min(n, _GRID_Z))
    _util(a.dtype, "pack_nhwc")(grid, (32, 8, 1), (
        _ptr(a, c_off * hw), out, _ptr(mask, c_off * mask_words) if mask is not None else a,
        *_ints(c, ctot, hw, cp_, mask_words if mask is not None else 0, n)))
    return out


def _pack_weight(w, rows, inner_real, inner_pad, sa, sb):
    """(rows, R, S, inner_pad) from KCRS ``w``: out[a, rs, b] = w[a*sa + b*sb + rs]."""
    import cupy

    rs = w.shape[2] * w.shape[3]
    out = cupy.empty((rows, w.shape[2], w.shape[3], inner_pad), w.dtype)
    _util(w.dtype, "pack_weight")(_blocks(out.size), (_THREADS,), (
        w, out, *_ints(rows, rs, inner_real, inner_pad, sa, sb)))
    return out


def _geometry(x_shape, w_shape, stride, padding, dilation):
    n, c, h, wd = x_shape
    k, cg, r, s = w_shape
    return (n, c, h, wd, k, cg, r, s, out_size(h, r, stride[0], padding[0], dilation[0]),
            out_size(wd, s, stride[1], padding[1], dilation[1]))


@functools.cache
def _fits_int32(x_shape, w_shape, stride, padding, dilation, groups, dtype):
    n, c, h, wd, k, cg, r, s, p, q = _geometry(x_shape, w_shape, stride, padding, dilation)
    kg = k // groups
    return (n * h * wd * _padded_channels(cg, dtype) < _INT32_LIMIT
            and n * p * q * _padded_channels(kg, dtype) < _INT32_LIMIT)


def _params(values):
    """The kernel's launch-time constants as one device array (uploaded once per configuration)."""
    import cupy

    return cupy.asarray(np.array([int(v) for v in values], dtype=np.int64).astype(np.uint32))


def _whole_grid(m, cols, kred, h, wd, ch, p, q, conv, mid):
    """conv.cu's launch-time constants (in its order) for a GEMM over every output pixel, the identity
    residue class: ``conv`` is (R, S, stride, padding, dilation), ``mid`` (out_C, lda_m, tiles_per_split)."""
    r, s = conv[0], conv[1]
    return (*_ints(m, cols, kred, h, wd, ch, p, q), *conv, *(np.uint32(v) for v in (*_magic(p * q), *_magic(q))),
            *mid, *_ints(p, q, 0, 0, 1, 1, 0, 0, 1, 1, r, s))


def _warps(mma, warps, default=(2, 4)):
    """The warp grid of a block: :data:`tile_warps` if set (tensor cores only), else ``default``."""
    return tuple(warps) if warps and mma else default


@functools.cache
def _igemm_launches(mode, dtype, x_shape, w_shape, stride, padding, dilation, groups, mma, sm_count, row_bytes,
                    rows_m, warps, wg_stages):
    """Everything static about one group's GEMM(s) of ``mode``: a tuple of (kernel, grid, block, smem, params
    array, extra) per launch. Cached per configuration, so a call only allocates and launches. ``wg_stages``
    allows the wgmma path where :func:`_wgmma_applies`: 0 never, -1 with the depth by grid size, else that depth."""

    def kernel(mode_, bm, bn, bkb, m_, n_):
        if wg_stages and _wgmma_applies(mode_, mma, itemsize, bkb):
            # a grid under two blocks per SM runs 3 stages, two blocks to an SM; a larger one 4, a tile further
            # ahead (H100: strided backward-data's 196-block residue classes 60 -> 77 TFLOP/s with 3; TF32 and
            # the larger grids as fast or faster with 4, c256h14's TF32 forward 147 -> 168)
            blocks = -(-m_ // 128) * -(-n_ // bn)
            stages = wg_stages if wg_stages > 0 else (3 if blocks < 2 * sm_count else 4)
            return _igemm(dtype, mode_, 128, bn, _WGMMA, bkb, (2, 4), stages)
        return _igemm(dtype, mode_, bm, bn, mma, bkb, _warps(mma, warps))

    n, c, h, wd, k, cg, r, s, p, q = _geometry(x_shape, w_shape, stride, padding, dilation)
    kg = k // groups
    conv = _ints(r, s, stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1])
    itemsize = np.dtype(dtype).itemsize
    launches = []
    if mode == 0:
        cpad = _padded_channels(cg, dtype)
        m, kred = n * p * q, r * s * cpad
        bm, bn, bkb = rows_m or 128, (64 if kg <= 64 else 128), _bkb(kred, itemsize, row_bytes)
        kern, block, smem = kernel(0, bm, bn, bkb, m, kg)
        grid = ((m + bm - 1) // bm, (kg + bn - 1) // bn, 1)
        # conv_util.cu's pack_forward: x's tiles in z < N, the weight's grid-stride blocks above them
        xn_elems, w_elems = n * h * wd * cpad, kg * r * s * cpad
        gx, gy = (h * wd + 31) // 32, (cpad + 31) // 32
        zw = (min((w_elems + 255) // 256, 1024) + gx * gy - 1) // (gx * gy)
        zx = min(n, _GRID_Z - zw)
        tf32 = dtype == backend.float32 and mma != 0  # TF32 operands rounded once, in the pack
        pack = ((gx, gy, zx + zw), _ints(n, cg, c, h * wd, cpad, kg, r * s, zx, tf32), xn_elems, xn_elems + w_elems)
        launches.append((kern, grid, block, smem, _params(_whole_grid(m, kg, kred, h, wd, cpad, p, q, conv, (k, 0, 0))),
                         pack))
    elif mode == 1:
        kpad = _padded_channels(kg, dtype)
        if stride != (1, 1) and dilation == (1, 1):  # one GEMM per output residue class: only live taps
            classes = [(rh, rw) for rh in range(stride[0]) for rw in range(stride[1])]
            steps = stride
        else:
            classes, steps = [(0, 0)], (1, 1)
        for rh, rw in classes:
            ohc, owc = (h - rh + steps[0] - 1) // steps[0], (wd - rw + steps[1] - 1) // steps[1]
            if ohc <= 0 or owc <= 0:
                continue
            if steps == (1, 1):
                r0, s0, rc, sc = 0, 0, r, s
            else:
                r0, s0 = (rh + padding[0]) % steps[0], (rw + padding[1]) % steps[1]
                rc, sc = max(0, (r - r0 + steps[0] - 1) // steps[0]), max(0, (s - s0 + steps[1] - 1) // steps[1])
            m, kred = n * ohc * owc, rc * sc * kpad
            bm, bn, bkb = rows_m or 128, (64 if cg <= 64 else 128), _bkb(kred, itemsize, row_bytes)
            kern, block, smem = kernel(1, bm, bn, bkb, m, cg)
            grid = ((m + bm - 1) // bm, (cg + bn - 1) // bn, 1)
            head = (*_ints(m, cg, kred, p, q, kpad, h, wd), *conv,
                    *(np.uint32(v) for v in (*_magic(ohc * owc), *_magic(owc))))
            tail = _ints(ohc, owc, rh, rw, steps[0], steps[1], r0, s0, steps[0], steps[1], rc, sc)
            launches.append((kern, grid, block, smem, _params((*head, c, 0, 0, *tail)), None))
    else:
        kpad = _padded_channels(kg, dtype)
        cpad = _padded_channels(cg, dtype)
        ncol, npq = r * s * cpad, n * p * q
        bm, bn, bkb = (64 if kg <= 64 else 128), 128, _bkb(npq, itemsize, row_bytes)
        kern, block, smem = _igemm(dtype, 2, bm, bn, mma, bkb, _warps(mma, warps))
        bk = bkb // itemsize
        tiles = (npq + bk - 1) // bk
        base = ((kg + bm - 1) // bm) * ((ncol + bn - 1) // bn)
        splits = max(1, min(tiles, (4 * sm_count + base - 1) // base, 256))
        per = (tiles + splits - 1) // splits
        splits = (tiles + per - 1) // per
        grid = ((kg + bm - 1) // bm, (ncol + bn - 1) // bn, splits)
        prm = _params(_whole_grid(kg, ncol, npq, h, wd, cpad, p, q, conv, (0, kpad, per)))
        launches.append((kern, grid, block, smem, prm, splits))
    return tuple(launches)


@functools.cache
def _is_sm90(dev_id):
    import cupy

    return cupy.cuda.Device(dev_id).compute_capability == "90"


def _wgmma_on(dev_id):
    """Whether the knobs and the GPU allow the wgmma path (a set warp grid or 64-row tiles ask for mma.sync)."""
    return wgmma is not False and tile_m in (None, 128) and tile_warps is None and _is_sm90(dev_id)


def _wgmma_applies(mode, mma, itemsize, bkb):
    """Where conv.cu's wgmma path runs: tensor cores, 128-byte tile rows, the forward or (fp16/bf16: its
    packs do not round to TF32) backward-data."""
    return mma != 0 and bkb == 128 and (mode == 0 or (mode == 1 and itemsize == 2))


def _plan(mode, dtype, x_shape, w_shape, stride, padding, dilation, groups, dev_id):
    return _igemm_launches(mode, np.dtype(dtype), tuple(x_shape), tuple(w_shape), stride, padding, dilation, groups,
                           _mma(dtype), _sm_count(dev_id), tile_row_bytes, tile_m, tile_warps,
                           (wgmma_stages or -1) if _wgmma_on(dev_id) else 0)


# ---- forward straight from NCHW (conv.cu's mode 3): one launch, no repacking
#: Forward from NCHW without repacking: None lets :func:`_nchw_forward` decide, True / False force it
#: where it applies (benchmarks and tests).
nchw_forward = None
#: Over 64 output channels mode 3 gathers A element by element once per 128-wide tile of them, with
#: 8-warp blocks: its kernel ran 10-25% longer than the repacked GEMM (H100), but it saves the packs'
#: launch, allocation and pass over x. Up to this many gathered elements that saving won.
NCHW_GATHER_MAX = 1 << 25


def _nchw_forward(x_shape, w_shape, stride, padding, dilation, groups, dtype, dev_id=None):
    """Whether this forward runs on mode 3: where it applies (:func:`_nchw_gather`), if forced, if the gather is
    small enough to pay, or onto 64 output channels or fewer (one column of tiles, each element gathered once:
    with 4-warp blocks it measured as fast as the mma.sync repack or faster at every size, H100: MNIST conv2 at
    batch 256 92 against 82 TFLOP/s on the device, 128 x 64 x 56 x 56 117 against 118) unless the repacked
    GEMM runs on wgmma on GPU ``dev_id`` (128 x 64 x 56 x 56: 155 against mode 3's 117)."""
    if nchw_forward is False:
        return False
    elems = _nchw_gather(x_shape, w_shape, stride, padding, dilation, groups, dtype)
    if elems is None:
        return False
    if nchw_forward or elems <= NCHW_GATHER_MAX:
        return True
    repack_bkb = _bkb(w_shape[2] * w_shape[3] * _padded_channels(w_shape[1], dtype), 2, tile_row_bytes)
    wg = dev_id is not None and _wgmma_on(dev_id) and _wgmma_applies(0, 1, 2, repack_bkb)
    return w_shape[0] <= 64 and not wg


@functools.cache
def _nchw_gather(x_shape, w_shape, stride, padding, dilation, groups, dtype):
    """Elements mode 3 would gather, or None where it does not apply: fp16/bf16, one group, whole
    16-byte weight rows, at most 63 taps (the kernel's per-pixel tap mask)."""
    n, c, h, wd, k, cg, r, s, p, q = _geometry(x_shape, w_shape, stride, padding, dilation)
    kred = cg * r * s
    if groups != 1 or np.dtype(dtype).itemsize != 2 or kred % 8 or r * s > 63:
        return None
    return n * p * q * kred * -(-k // 128)


@functools.cache
def _nchw_launch(dtype, x_shape, w_shape, stride, padding, dilation, rows_m, warps, row_bytes):
    """(kernel, grid, block, shared bytes, params with the k-table, output shape, mask words) of a mode-3
    forward."""
    import cupy

    n, c, h, wd, k, _, r, s, p, q = _geometry(x_shape, w_shape, stride, padding, dilation)
    m, kred = n * p * q, c * r * s
    itemsize = np.dtype(dtype).itemsize
    bm, bn, bkb = rows_m or 128, (64 if k <= 64 else 128), _bkb(kred, itemsize, row_bytes)
    kern, block, smem = _igemm(dtype, 3, bm, bn, 1, bkb, _warps(1, warps, (2, 2) if bn == 64 else (2, 4)))
    bk = bkb // itemsize
    kk = np.arange(-(-kred // bk) * bk)
    cc, rr, ss = kk // (r * s), kk % (r * s) // s, kk % s
    dy, dx = rr * dilation[0], ss * dilation[1]
    table = np.stack([cc * h * wd + dy * wd + dx, rr * s + ss], axis=1)
    table[kred:] = (0, 63)  # a tap no pixel has
    consts = _whole_grid(m, k, kred, h, wd, c, p, q, _ints(r, s, *stride, *padding, *dilation), (k, 0, 0))
    prm = np.concatenate([np.array([int(v) for v in (*consts, 0)], np.int64), table.ravel()])
    grid = ((m + bm - 1) // bm, (k + bn - 1) // bn, 1)
    return kern, grid, block, smem, cupy.asarray(prm.astype(np.uint32)), (n, k, p, q), (m + 31) // 32


# ---- direct convolution for a short reduction (conv_direct.cu): one launch, no repacking
DIRECT_CRS_MAX = 32  # conv_direct.cu's CRS_MAX: C*R*S at most this runs direct
_DIRECT_K_MAX = 64  # conv_direct.cu's K_MAX: the filter gradient's limit on K


def _direct(w_shape, groups):
    """Whether a convolution runs on the direct kernels (e.g. a first layer on 1-3 channel images)."""
    return groups == 1 and w_shape[1] * w_shape[2] * w_shape[3] <= DIRECT_CRS_MAX


@functools.cache
def _direct_kernel(dtype, name, crs):
    """A direct kernel compiled for one filter shape ``crs`` = (C, R, S) (constant reduction loops)."""
    c, r, s = crs
    return get_kernel("conv_direct.cu", name, (f"-DCONV_T={_CTYPE[dtype]}", f"-DG_C={c}", f"-DG_R={r}", f"-DG_S={s}"))


@functools.cache
def _direct_plan(dtype, x_shape, w_shape, stride, padding, dilation):
    """(forward kernel, filter-gradient kernel, reduce kernel, P, Q, the geometry as a device int32
    array in conv_direct.cu's order, made once per configuration)."""
    import cupy

    n, c, h, wd, k, _, r, s, p, q = _geometry(x_shape, w_shape, stride, padding, dilation)
    names = ("conv_direct_fwd", "conv_direct_wgrad", "conv_direct_reduce")
    geo = cupy.asarray(np.array([n, c, h, wd, k, r, s, p, q, *stride, *padding, *dilation], np.int32))
    return (*(_direct_kernel(dtype, name, (c, r, s)) for name in names), p, q, geo)


def _direct_forward(x, w, bias, stride, padding, dilation, relu, want_mask):
    import cupy

    fwd, _, _, p, q, geo = _direct_plan(x.dtype, x.shape, w.shape, stride, padding, dilation)
    k = w.shape[0]
    m = x.shape[0] * p * q
    words = (m + 31) // 32
    y = cupy.empty((x.shape[0], k, p, q), x.dtype)
    mask = cupy.empty((k, words), np.uint32) if (relu and want_mask) else None
    flags = (1 if relu else 0) | (2 if bias is not None else 0)
    fwd(((m + _THREADS - 1) // _THREADS,), (_THREADS,), (
        x, w, bias if bias is not None else y, y, mask if mask is not None else np.uint64(0),
        *_ints(flags, words), geo))
    return y, mask


def _direct_filter_grad(dy, x, w_shape, stride, padding, dilation, mask, dw, db):
    """dW into ``dw`` and, if given, db into ``db``: per-block partials, then a fixed-order sum."""
    import cupy

    _, wgrad, reduce, p, q, geo = _direct_plan(dy.dtype, x.shape, w_shape, stride, padding, dilation)
    k, crs = w_shape[0], w_shape[1] * w_shape[2] * w_shape[3]
    m = x.shape[0] * p * q
    chunks = (m + 63) // 64  # conv_direct.cu's CHUNK
    blocks = max(1, min(chunks, 4 * _sm_count(dy.device.id)))
    pairs = k * (crs + 1)
    part = cupy.empty((blocks, pairs), np.float32)
    wgrad((blocks,), (_THREADS,), (x, dy, mask if mask is not None else np.uint64(0), part,
                                   *_ints((m + 31) // 32), geo))
    reduce(((pairs + 127) // 128,), (128,), (part, dw, db if db is not None else np.uint64(0),
                                             *_ints(blocks, k, crs)))


def _knobs():
    """The module's tuning knobs, part of every launch plan's cache key (a test or benchmark may change them)."""
    return (allow_tf32, tile_row_bytes, tile_m, tile_warps, wgmma, wgmma_stages, nchw_forward, NCHW_GATHER_MAX)


@functools.cache
def _forward_launcher(dtype, x_shape, w_shape, stride, padding, dilation, groups, dev_id, knobs):
    """The GPU forward of one call signature as ``run(x, w, bias, relu, want_mask) -> (y, mask)``, which only
    allocates and launches (None where the kernels' int32 indexing does not reach): the path and every
    launch's constants are settled here, once (``knobs``, the :func:`_knobs` they were settled under, is only
    part of the key). One call of the MNIST conv2 forward
    spent about 4-6 us of host time in Python choosing its path before this (H100 host; the whole eager
    call is ~90 us)."""
    import cupy

    if not _fits_int32(x_shape, w_shape, stride, padding, dilation, groups, dtype):
        return None  # the reference runs it
    if _direct(w_shape, groups):
        def run(x, w, bias, relu, want_mask):
            return _direct_forward(x, w, bias, stride, padding, dilation, relu, want_mask)
        return run
    # Launches go to the kernels' CuPy Function objects (cupy.cuda.function.Function), and outputs are made by
    # cupy.ndarray: on an H100 host the RawKernel wrapper cost ~1 us per launch more, cupy.empty ~0.8 us more,
    # and each kernel argument ~0.6 us (so conv.cu takes few).
    n, c, h, wd, k, cg, r, s, p, q = _geometry(x_shape, w_shape, stride, padding, dilation)
    words = (n * p * q + 31) // 32
    flags = [[[_ints(relu + 2 * has_bias + 4 * mask)[0] for mask in (0, 1)] for has_bias in (0, 1)]
             for relu in (0, 1)]  # conv.cu's flags argument: [relu][has_bias][mask]
    y_shape = (n, k, p, q)
    if _nchw_forward(x_shape, w_shape, stride, padding, dilation, groups, dtype, dev_id):
        kern, grid, block, smem, prm, _, _ = _nchw_launch(dtype, x_shape, w_shape, stride, padding, dilation, tile_m,
                                                          tile_warps, tile_row_bytes)
        fn = kern.kernel

        def run(x, w, bias, relu, want_mask):
            y = cupy.ndarray(y_shape, dtype)
            mask = cupy.ndarray((k, words), np.uint32) if (relu and want_mask) else None
            fn(grid, block, (x, w, y if bias is None else bias, y, y if mask is None else mask, prm,
                             flags[relu][bias is not None][mask is not None]), smem)
            return y, mask
        return run
    kg = k // groups
    ((kern, grid, block, smem, prm, pack),) = _plan(0, dtype, x_shape, w_shape, stride, padding, dilation, groups,
                                                    dev_id)
    pack_grid, pack_ints, xn_elems, total = pack
    pack_fn, fn = _util(dtype, "pack_forward").kernel, kern.kernel

    def run(x, w, bias, relu, want_mask):
        y = cupy.ndarray(y_shape, dtype)
        mask = cupy.ndarray((k, words), np.uint32) if (relu and want_mask) else None
        flag = flags[relu][bias is not None][mask is not None]
        for g in range(groups):
            # both packed operands in one allocation and one launch (H100: the device time the same or up to 6%
            # shorter than two of each, and one launch less of host time before the GEMM's)
            xn = cupy.ndarray(total, dtype)
            wk = _ptr(xn, xn_elems)
            pack_fn(pack_grid, (32, 8, 1), (_ptr(x, g * cg * h * wd), xn, _ptr(w, g * kg * cg * r * s), wk, *pack_ints))
            fn(grid, block, (xn, wk, _ptr(bias, g * kg) if bias is not None else y, _ptr(y, g * kg * p * q),
                             _ptr(mask, g * kg * words) if mask is not None else y, prm, flag), smem)
            del xn, wk
        return y, mask
    return run


def _bwd_data_gpu(dz, w, x_shape, g, groups, stride, padding, dilation, dx):
    """One group's dX from the packed (N, P, Q, Kp) dz, written into ``dx``."""
    n, c, h, wd, k, cg, r, s, p, q = _geometry(x_shape, w.shape, stride, padding, dilation)
    kg = k // groups
    kpad = dz.shape[3]
    wc = _pack_weight(w[g * kg:(g + 1) * kg] if groups > 1 else w, cg, kg, kpad, r * s, cg * r * s)  # (Cg,R,S,Kp)
    out = _ptr(dx, g * cg * h * wd)
    for kern, grid, block, smem, prm, _ in _plan(1, dz.dtype, x_shape, w.shape, stride, padding, dilation, groups,
                                                 dz.device.id):
        kern(grid, block, (dz, wc, _ptr(dz), out, _ptr(dz), prm, *_ints(0)), shared_mem=smem)


def _bwd_filter_gpu(dz, x, w_shape, g, groups, stride, padding, dilation, dw):
    """One group's dW from the packed dz and the input, written into ``dw`` (deterministic split-K)."""
    import cupy

    n, c, h, wd, k, cg, r, s, p, q = _geometry(x.shape, w_shape, stride, padding, dilation)
    kg = k // groups
    cpad = _padded_channels(cg, x.dtype)
    xn = _pack_nhwc(x, g * cg, cg, cpad)
    ((kern, grid, block, smem, prm, splits),) = _plan(2, x.dtype, x.shape, w_shape, stride, padding, dilation,
                                                      groups, x.device.id)
    ws = cupy.empty((splits, kg, r * s * cpad), np.float32)
    kern(grid, block, (dz, xn, _ptr(dz), ws, _ptr(dz), prm, *_ints(0)), shared_mem=smem)
    _util(x.dtype, "wgrad_reduce")(_blocks(kg * cg * r * s), (_THREADS,), (
        ws, _ptr(dw, g * kg * cg * r * s), *_ints(splits, kg, cg, r * s, cpad)))


def _column_sums(dz, kg, kpad, out, offset):
    """``out[offset:offset+kg]`` = column sums of the packed (rows, kpad) ``dz``: the bias gradient,
    in two deterministic passes. (A CuPy ``sum(axis=0)`` over the strided slice ran one thread per
    column: 15 ms for the MNIST conv1 at batch 1024.)"""
    import cupy

    rows = dz.size // kpad
    per_block = 512
    blocks = max(1, -(-rows // per_block))
    part = cupy.empty((blocks, kg), np.float32)
    _util(dz.dtype, "colsum_partial")((blocks,), (_THREADS,), (
        dz, part, np.int64(rows), *_ints(kg, kpad, per_block)))
    _util(dz.dtype, "colsum_reduce")(((kg + 127) // 128,), (128,), (
        part, _ptr(out, offset), *_ints(blocks, kg)))


def _backward_impl(dy, x, x_shape, w, w_shape, stride, padding, dilation, groups, mask, need_dx, need_dw,
                   need_db):
    import cupy

    n, c, h, wd, k, cg, r, s, p, q = _geometry(x_shape, w_shape, stride, padding, dilation)
    kg = k // groups
    kpad = _padded_channels(kg, dy.dtype)
    words = (n * p * q + 31) // 32
    dx = None
    dw = cupy.empty(w_shape, dy.dtype) if need_dw else None
    db = cupy.empty((k,), dy.dtype) if need_db else None
    if need_dw and _direct(w_shape, groups) and k <= _DIRECT_K_MAX:  # dW and db in one pass over dy
        _direct_filter_grad(dy, x, w_shape, stride, padding, dilation, mask, dw, db)
        need_dw = need_db = False
        if not need_dx:
            return dx, dw, db
    for g in range(groups):
        dz = _pack_nhwc(dy, g * kg, kg, kpad, mask, words)
        if need_db:
            _column_sums(dz, kg, kpad, db, g * kg)
        # dW first: its packed copy of x is gone before dX is allocated (a lower peak in training)
        if need_dw:
            _bwd_filter_gpu(dz, x, w_shape, g, groups, stride, padding, dilation, dw)
        if need_dx:
            if dx is None:
                dx = cupy.empty(x_shape, dy.dtype)
            _bwd_data_gpu(dz, w, x_shape, g, groups, stride, padding, dilation, dx)
        del dz
    return dx, dw, db


# ---------------------------------------------------------------- public primitives
def conv2d_forward(x, w, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, activation=None,
                   want_mask=False):
    """``act(conv2d(x, w) + bias)`` and, for activation 'relu' with ``want_mask``, its bit-packed mask."""
    stride, padding, dilation = tuple(stride), tuple(padding), tuple(dilation)
    if x.shape[0] == 0:  # an empty batch: an empty output (and mask), as PyTorch gives
        xp = backend.array_module(x)
        p, q = (out_size(x.shape[2 + i], w.shape[2 + i], stride[i], padding[i], dilation[i]) for i in (0, 1))
        mask = xp.empty((w.shape[0], 0), np.uint32) if activation == "relu" and want_mask else None
        return xp.empty((0, w.shape[0], p, q), x.dtype), mask
    if _on_gpu(x):
        run = _forward_launcher(x.dtype, x.shape, w.shape, stride, padding, dilation, groups, x.device.id, _knobs())
        if run is not None:
            return run(x, w, bias, activation == "relu", want_mask)
    return conv2d_forward_ref(x, w, bias, stride, padding, dilation, groups, activation, want_mask)


def conv2d_backward(dy, x, w, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, mask=None,
                    need_dx=True, need_dw=True, need_db=False):
    """(dx, dw, db) of the convolution for output gradient ``dy`` (masked by the ReLU ``mask`` if given)."""
    stride, padding, dilation = tuple(stride), tuple(padding), tuple(dilation)
    if dy.shape[0] == 0:  # an empty batch contributes nothing: zero weight and bias gradients
        xp = backend.array_module(dy)
        return (xp.empty(x.shape, dy.dtype) if need_dx else None, xp.zeros(w.shape, dy.dtype) if need_dw else None,
                xp.zeros((w.shape[0],), dy.dtype) if need_db else None)
    if _on_gpu(dy) and _fits_int32(x.shape, w.shape, stride, padding, dilation, groups, dy.dtype):
        return _backward_impl(dy, x, x.shape, w, w.shape, stride, padding, dilation, groups, mask, need_dx, need_dw,
                              need_db)
    return conv2d_backward_ref(dy, x, w, stride, padding, dilation, groups, mask, need_dx, need_dw, need_db)


def conv2d_backward_data(dy, w, x_shape, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """dX alone (benchmarks and users of the data gradient only)."""
    stride, padding, dilation, x_shape = tuple(stride), tuple(padding), tuple(dilation), tuple(x_shape)
    if _on_gpu(dy) and _fits_int32(x_shape, w.shape, stride, padding, dilation, groups, dy.dtype):
        return _backward_impl(dy, None, x_shape, w, w.shape, stride, padding, dilation, groups, None, True, False,
                              False)[0]
    d = dy.astype(_acc(dy.dtype))
    return _bwd_data_ref(d, w.astype(d.dtype), x_shape, stride, padding, dilation, groups).astype(dy.dtype)


def conv2d_backward_filter(dy, x, w_shape, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """dW alone (benchmarks and users of the filter gradient only)."""
    stride, padding, dilation, w_shape = tuple(stride), tuple(padding), tuple(dilation), tuple(w_shape)
    if _on_gpu(dy) and _fits_int32(x.shape, w_shape, stride, padding, dilation, groups, dy.dtype):
        return _backward_impl(dy, x, x.shape, None, w_shape, stride, padding, dilation, groups, None, False, True,
                              False)[1]
    acc = _acc(dy.dtype)
    return _bwd_filter_ref(dy.astype(acc), x.astype(acc), w_shape, stride, padding, dilation,
                           groups).astype(dy.dtype)
