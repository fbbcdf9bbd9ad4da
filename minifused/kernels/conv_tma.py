"""Conv2d on Hopper's tensor memory accelerator (``conv_tma.cu``): the forward, the backward-data and the
filter gradient: where each applies, its launch constants, and the launch.

The kernels take the operands conv.cu's take, packed the same way (NHWC x and KRSC w; NHWK dy and CRSK w; dy
and x for the filter gradient; channels-last arrays are such operands as they are), and write the same outputs
(NCHW, or NHWC for channels-last; the filter gradient's fp32 split-K partials, which conv_util.cu's wgrad_reduce
sums). They apply (:func:`tma_plan`, :func:`tma_wgrad_plan`) on an sm_90 GPU
to fp16 / bf16 with one group, when the gathered operands' channels are multiples of 64 (a box row is 128
bytes) and every tile of output pixels is whole output rows of one image or whole images (:func:`tile_box`);
the forward where no ReLU mask is wanted, the backward-data at stride 1, or 2 as residue classes (no dilation,
dX's rows whole runs of 8 pixels: :func:`_classes`). The TMA descriptors hold the
operands' addresses: a call looks its two up by address (encoding them, host work only, on a miss) and passes
them by value.
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

from .. import backend
from . import ARG, REF, Prepared, get_kernel, sm_count
from .conv_plan import ConvMode, geometry, wgmma_on

BM = 128  # output pixels per tile
NT = 384  # threads: the producer's warpgroup and two of MMAs
BOX_C = 64  # channels per box row: 128 bytes of fp16 / bf16
MAX_BOX = 256  # the TMA unit's largest box side (elements traversed)
MAX_STEP = 8  # its largest element stride
WGRAD_PIXELS = 64  # output pixels per reduction stage of the filter gradient
_STAGES = {64: 6, 128: 4}  # the ring's depth per tile width (what fits one block per SM with room to spare)


def tile_box(oh, ow, stride, pixels=BM):
    """(row pixels, rows, images) of the box of one tile of ``pixels`` output pixels (the forward's 128, the
    filter gradient's 64 per reduction stage) of an ``oh`` x ``ow`` image, or None where tiles would not be
    whole rows of one image or whole images (or runs of 8 pixels, the epilogue's stores, would cross images,
    or the box outgrows the TMA unit)."""
    ohw = oh * ow
    if ohw % 8 or max(stride) > MAX_STEP:
        return None
    if ohw >= pixels:
        box = (ow, pixels // ow, 1) if ohw % pixels == 0 and pixels % ow == 0 else None
    else:
        box = (ow, oh, pixels // ohw) if pixels % ohw == 0 else None
    if box is None or box[0] * stride[1] > MAX_BOX or box[1] * stride[0] > MAX_BOX:
        return None
    return box


@dataclasses.dataclass(frozen=True)
class TmaPlan:
    """One configuration's launch: the kernel, its shared bytes and grid, the constants (a device array), and
    the two tensor maps' shapes: the gathered operand's (dims, byte strides, box, element strides) and the
    weights'."""

    kern: object
    smem: int
    grid: int
    prm: object
    dtype: int
    a_map: tuple
    b_map: tuple
    splits: int = 1  # the filter gradient's fp32 partials (splits of the pixels)
    #: the tensor maps made so far, by (operand, address): see :func:`_map_address`
    maps: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)
    launch: object = dataclasses.field(default=None, compare=False, repr=False)  # see _prepared

    def __post_init__(self):
        # the two maps by value, then the output, the bias (or the output), the constants and the epilogue's flags
        object.__setattr__(self, "launch", Prepared(self.kern, (self.grid,), (NT,), (REF, REF, ARG, ARG, self.prm,
                                                                                     ARG), self.smem))


def _tma_on(dtype, groups, dev_id, config):
    """Whether the config, the GPU, the data type (fp16 / bf16) and one group allow the TMA kernels."""
    return config.tma is not False and groups == 1 and np.dtype(dtype).itemsize == 2 and wgmma_on(config, dev_id)


def _kernel(name, dtype, smem, *defines):
    """A conv_tma.cu kernel for ``dtype`` (a NumPy dtype) with ``defines``, allowed at least ``smem`` shared bytes
    (plans share a kernel and need different amounts)."""
    is_bf16 = dtype == backend.bfloat16
    kern = get_kernel("conv_tma.cu", name, ("-arch=sm_90a", f"-DCT_T={'__nv_bfloat16' if is_bf16 else '__half'}",
                                            f"-DCT_IS_BF16={int(is_bf16)}", *defines))
    kern.max_dynamic_shared_size_bytes = max(kern.max_dynamic_shared_size_bytes, smem)
    return kern


def _map_type(dtype):
    from cuda.bindings import driver

    types = driver.CUtensorMapDataType
    bf16 = dtype == backend.bfloat16
    return types.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 if bf16 else types.CU_TENSOR_MAP_DATA_TYPE_FLOAT16


def _nhwc_map(n, h, w, c, box, step=(1, 1)):
    """The map shape of a packed (n, h, w, c) operand (16-bit) read in boxes of 64 channels by ``box`` = (row
    pixels, rows, images) of the output, ``step`` = the (h, w) element strides."""
    return ((c, w, h, n), (c * 2, w * c * 2, h * w * c * 2), (BOX_C, box[0] * step[1], box[1] * step[0], box[2]),
            (1, step[1], step[0], 1))


@functools.cache
def tma_plan(mode, dtype, x_shape, w_shape, stride, padding, dilation, groups, dev_id, config, nhwc_out=False):
    """The :class:`TmaPlan` of a FORWARD or BACKWARD_DATA GEMM writing NCHW (``nhwc_out``: channels-last)
    output, or None where the kernel does not apply, ``config.tma`` is False or the config asks for mma.sync
    (:func:`~.conv_plan.wgmma_on`)."""
    if not _tma_on(dtype, groups, dev_id, config):
        return None
    return _plan(mode, np.dtype(dtype), tuple(x_shape), tuple(w_shape), tuple(stride), tuple(padding),
                 tuple(dilation), dev_id, config.tile_n, bool(nhwc_out))


def _classes(mode, n_out, r, s, stride, padding, dilation):
    """(gather steps (sy, ry, rx), tap_step, subs, class rows: conv_tma.cu's Class entries) of a FORWARD or
    BACKWARD_DATA sum, or None where the kernel does not take it: the backward-data of a stride other than 1
    and 2 (both directions), with dilation, or whose output is not rows of whole runs of 4 pixels per class."""
    if mode == ConvMode.FORWARD:  # gather x onto the output (p, q)
        return (stride[0], dilation[0], dilation[1]), 1, 1, [(r, s, -padding[0], -padding[1], 0, 0, 0, 0)]
    if stride == (1, 1):  # gather dy onto dx's (h, w), the taps mirrored
        return (1, -dilation[0], -dilation[1]), 1, 1, [(r, s, padding[0], padding[1], 0, 0, 0, 0)]
    if stride != (2, 2) or dilation != (1, 1) or n_out[0] % 2 or n_out[1] % 8:
        return None
    rows = []
    for y0 in range(2):
        for x0 in range(2):  # dx[2i + y0] gathers dy[i + (y0 + pad - r) / 2] over the taps r = y0 + pad mod 2
            r0, s0 = (y0 + padding[0]) % 2, (x0 + padding[1]) % 2
            rows.append((len(range(r0, r, 2)), len(range(s0, s, 2)), (y0 + padding[0] - r0) // 2,
                         (x0 + padding[1] - s0) // 2, r0, s0, y0, x0))
    return (1, -1, -1), 2, 2, rows


@functools.cache
def _plan(mode, dtype, x_shape, w_shape, stride, padding, dilation, dev_id, tile_n, nhwc_out):
    """A plan holds device objects (its constants, its launch): one per device."""
    import cupy

    sms = sm_count(dev_id)
    n, c, h, wd, k, _, r, s, p, q = geometry(x_shape, w_shape, stride, padding, dilation)
    if mode == ConvMode.FORWARD:  # x (n, h, wd, c) onto the output (p, q) x k
        src, out, cols, step = (h, wd, c), (p, q), k, stride
    elif mode == ConvMode.BACKWARD_DATA:  # dy (n, p, q, k) onto dx's (h, wd) x c
        src, out, cols, step = (p, q, k), (h, wd), c, (1, 1)
    else:
        return None
    plan = _classes(mode, out, r, s, stride, padding, dilation)
    if plan is None:
        return None
    (sy, ry, rx), tap_step, subs, classes = plan
    out = (out[0] // subs, out[1] // subs)  # one class's map
    box = tile_box(*out, step)
    if box is None or src[2] % BOX_C or (nhwc_out and cols % 8):  # NHWC rows are written in runs of 8 channels
        return None
    m, ohw, ch = n * out[0] * out[1], out[0] * out[1], src[2]
    m_tiles = -(-m // BM)
    bn = tile_n if tile_n in (64, 128) else (128 if cols >= 128 and m_tiles * -(-cols // 128) * 2 >= sms else 64)
    n_tiles = -(-cols // bn)
    stages = _STAGES[bn]
    # the ring (1024-byte aligned), the epilogue's tiles T[bn][BM + 8] (NHWC: T[BM][bn + 8]; one per class of a
    # unit), the mbarriers
    epi = BM * (bn + 8) if nhwc_out else bn * (BM + 8)
    smem = 1024 + stages * (BM + bn) * BOX_C * 2 + subs * epi * 2 + 16 * stages
    kern = _kernel("conv_tma", dtype, smem, f"-DCT_BN={bn}", f"-DCT_STAGES={stages}", f"-DCT_NHWC_OUT={int(nhwc_out)}")
    per_row = m_tiles * n_tiles
    units = per_row * (len(classes) // subs)
    prm = cupy.asarray(np.array([m, cols, ohw, out[1], ch // BOX_C, n_tiles, per_row, units, sy, ry, rx, s,
                                 tap_step, subs, *(v for row in classes for v in row)], np.int32))
    b_map = ((r * s * ch, cols), (r * s * ch * 2,), (BOX_C, bn), (1, 1))
    return TmaPlan(kern, smem, min(units, sms), prm, _map_type(dtype), _nhwc_map(n, *src, box, step), b_map)


@functools.cache
def tma_wgrad_plan(dtype, x_shape, w_shape, stride, padding, dilation, groups, dev_id, config):
    """The :class:`TmaPlan` of the filter gradient (conv_tma_wgrad: dy and x packed, channels multiples of
    64, reduction tiles of :data:`WGRAD_PIXELS` whole output rows or images), or None as :func:`tma_plan`."""
    if not _tma_on(dtype, groups, dev_id, config):
        return None
    return _wgrad_plan(np.dtype(dtype), tuple(x_shape), tuple(w_shape), tuple(stride), tuple(padding),
                       tuple(dilation), dev_id)


#: The split count's model of the filter gradient: its MMAs' rate (FLOP/s) and the memory's (bytes/s).
_WGRAD_FLOPS, _MEMORY_BYTES = 4e14, 2.5e12


def _wgrad_splits(tiles, chunks, sms, flops, part_bytes):
    """How many splits of the pixels the filter gradient's ``tiles`` (column x row tiles) take: the count of
    least modeled time, the MMAs' (their ideal time over the share of the last wave of units that the
    persistent blocks fill) plus the fp32 partials' (each split's ``part_bytes``, written and read back by
    wgrad_reduce); each split at least 4 of the ``chunks`` long."""
    def time(s):
        units = tiles * s
        return flops / _WGRAD_FLOPS * (-(-units // sms) * sms / units) + 2 * s * part_bytes / _MEMORY_BYTES

    return min(range(1, max(1, min(chunks // 4, 256)) + 1), key=time)


@functools.cache
def _wgrad_plan(dtype, x_shape, w_shape, stride, padding, dilation, dev_id):
    import cupy

    sms = sm_count(dev_id)
    n, c, h, wd, k, _, r, s, p, q = geometry(x_shape, w_shape, stride, padding, dilation)
    box = tile_box(p, q, stride, WGRAD_PIXELS)
    if box is None or c % BOX_C or k % BOX_C:
        return None
    ncol, chunks = r * s * c, -(-n * p * q // WGRAD_PIXELS)
    bm = 64 if k <= 64 else 128
    m_tiles, n_tiles = -(-k // bm), -(-ncol // 128)
    tiles = m_tiles * n_tiles
    splits = _wgrad_splits(tiles, chunks, sms, 2 * k * ncol * n * p * q, k * ncol * 4)
    per = -(-chunks // splits)
    splits = -(-chunks // per)
    stages = 5 if bm == 128 else 6
    smem = 1024 + stages * (bm + 128) * BOX_C * 2 + 16 * stages  # the ring (1024-byte aligned), the mbarriers
    kern = _kernel("conv_tma_wgrad", dtype, smem, "-DCT_WGRAD=1", f"-DCT_BM={bm}", f"-DCT_STAGES={stages}")
    prm = cupy.asarray(np.array([k, ncol, p * q, q, chunks, per, c, s, stride[0], -padding[0], dilation[0],
                                 -padding[1], dilation[1], m_tiles, n_tiles, tiles * splits], np.int32))
    return TmaPlan(kern, smem, min(tiles * splits, sms), prm, _map_type(dtype), _nhwc_map(n, p, q, k, box),
                   _nhwc_map(n, h, wd, c, box, stride), splits)


def _tensor_map(dt, address, dims, strides, box, steps):
    """A CUtensorMap of the operand at ``address``: 128-byte swizzle (wgmma's layout), zeros outside."""
    from cuda.bindings import driver as d

    u64, u32 = d.cuuint64_t, d.cuuint32_t
    err, tmap = d.cuTensorMapEncodeTiled(
        dt, len(dims), address, [u64(v) for v in dims], [u64(v) for v in strides], [u32(v) for v in box],
        [u32(v) for v in steps], d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        d.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B, d.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != d.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"conv2d: cuTensorMapEncodeTiled failed ({err}) for dims {dims}, box {box}")
    return tmap


#: Tensor maps a plan keeps at most (it forgets them all when full).
MAPS_PER_PLAN = 256


def _map_address(plan, b_side, address):
    """The host address of the encoded tensor map of ``plan``'s operand (``b_side``: the second) at ``address``,
    which the launch passes by value. Kept per plan by address: a training step allocates its operands at the
    same addresses step after step (CuPy's pool), so encoding, most of a launch's host time, is mostly
    skipped."""
    key = (b_side, address)
    hit = plan.maps.get(key)
    if hit is None:
        if len(plan.maps) >= MAPS_PER_PLAN:
            plan.maps.clear()
        tmap = _tensor_map(plan.dtype, address, *(plan.b_map if b_side else plan.a_map))
        hit = plan.maps[key] = (tmap, tmap.getPtr())  # the address of the map the tuple keeps alive
    return hit[1]


def launch_tma(plan, a, b, out, bias, flags):
    """Runs ``plan`` on the packed operands at addresses ``a`` (the gathered one) and ``b`` (the weights; x for
    the filter gradient) into ``out`` (NCHW; the filter gradient's fp32 partials), with conv.cu's epilogue
    ``flags`` (an int32: bias, ReLU; ``bias`` an address or 0; the filter gradient has neither)."""
    plan.launch(_map_address(plan, False, a), _map_address(plan, True, b), out, bias or out, flags)
