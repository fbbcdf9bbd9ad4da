"""Conv2d on the GPU, planning: the tuning config, geometry, path choice and every launch's constants.

Paths (float16 / bfloat16 / float32 CuPy arrays):

- the implicit-GEMM kernels of ``conv.cu`` (:class:`ConvMode` FORWARD, BACKWARD_DATA, BACKWARD_FILTER) on
  operands repacked NHWC with channels padded to 16 bytes by ``conv_util.cu``; the output is written NCHW by
  the GEMM's epilogue. float32 runs on FFMA unless ``backend.tf32_conv.allow_tf32`` is set (then on TF32
  tensor cores, as cuDNN's default). On an sm_90 GPU the forward and the fp16/bf16 backward-data and
  backward-filter GEMMs with 128-byte tile rows run on Hopper's wgmma, the rest on mma.sync (:class:`Mma`).
  groups > 1 runs every group's GEMM in one launch (grid z), on packs that lay the groups out one after
  another. Where Hopper's TMA kernels of ``conv_tma.cu`` apply (``conv_tma.py``:
  fp16/bf16, channels in multiples of 64, gathers the TMA unit's im2col mode takes) they take the forward,
  the backward-data (a stride of 2 as residue classes) and the backward-filter on the same packed operands
  (onto at most 64 output channels the forward / stride-1 backward-data on ``conv_tma_narrow.cu``).
- FORWARD_NCHW: a small fp16/bf16 forward (:attr:`ConvConfig.nchw_gather_max`), or one onto at most 64
  channels that would not run on wgmma, skips the repack: it gathers from NCHW x and reads KCRS w as they
  are, in one launch.
- a short reduction (C*R*S <= :data:`DIRECT_CRS_MAX`, groups = 1: a first layer on 1-3 channel images) runs
  on the direct kernels of ``conv_direct.cu``: forward, and the filter and bias gradients, one launch each
  (the filter gradient where :func:`direct_filter_gradient` says so: a larger one runs faster on the tensor
  cores).

Everything here is cached per configuration (the :class:`ConvConfig` and the TF32 switch included), so a
call only allocates and launches.
"""
from __future__ import annotations

import dataclasses
import functools
from enum import IntEnum, IntFlag

import numpy as np

from .. import backend
from . import ctype, get_kernel, has_wgmma, sm_count


class ConvMode(IntEnum):
    """conv.cu's CONV_MODE (the values are its defines)."""
    FORWARD = 0          # NHWC-repacked x and KRSC w
    BACKWARD_DATA = 1    # dX from NHWK dY and CRSK w
    BACKWARD_FILTER = 2  # dW, split-K into fp32 partials
    FORWARD_NCHW = 3     # forward straight from NCHW x and KCRS w


class Mma(IntEnum):
    """conv.cu's CONV_MMA (the values are its defines)."""
    FFMA = 0     # float32 on the CUDA cores
    FP16 = 1     # mma.sync m16n8k16, fp16 / bf16
    TF32 = 2     # mma.sync m16n8k8, float32 operands rounded to TF32
    WGMMA = 3    # Hopper's wgmma (sm_90a)


class Epilogue(IntFlag):
    """The ``flags`` argument of conv.cu's conv_igemm (RELU and BIAS also of conv_direct.cu's forward)."""
    RELU = 1
    BIAS = 2
    MASK = 4


_WGRAD_TILES = ((128, 128), (128, 64), (64, 128), (64, 256))  # conv.cu's mode-2 wgmma tiles


@dataclasses.dataclass(frozen=True)
class ConvConfig:
    """Tuning of the GPU convolution; None picks automatically. Production runs :data:`DEFAULT_CONFIG`;
    benchmarks, sweeps and tests pass their own (``config=`` of the primitives). Hashable: launch plans
    are cached per config."""

    #: Bytes of one tile row along the reduction (64 or 128); None: 128 for long reductions (64 from NCHW).
    tile_row_bytes: int | None = None
    #: Rows (output pixels) per block for forward / backward-data (64 or 128; 192 for the TMA kernels, 128 for the
    #: others); None: 128, and conv_tma.py decides for its kernels.
    tile_m: int | None = None
    #: Blocks per SM the backward-filter's split-K aims at (more splits: more parallel work, more fp32
    #: partials to write and sum); None: 4 on mma.sync, 2 on wgmma.
    split_k_blocks_per_sm: int | None = None
    #: The backward-filter's block tile on wgmma, (output channels, filter columns): (128, 128), (128, 64),
    #: (64, 128) or (64, 256); None: 64 rows onto at most 64 output channels, else 128, by 128 columns.
    wgrad_tile: tuple | None = None
    #: Splits of the TMA filter gradient's pixels (conv_tma.py: each an fp32 partial, summed after); None: its
    #: model decides (a sweep's knob: bench/conv_sweep.py).
    wgrad_splits: int | None = None
    #: Rows (output channels) of the TMA filter gradient's tiles, 64 or 128 (conv_tma.py); None: 64 onto at most 64
    #: output channels, else its model picks.
    wgrad_rows: int | None = None
    #: Output channels per block for forward / backward-data (32, 64 or 128; the TMA kernels take 64 or 128);
    #: None: :func:`_tile_n` and conv_tma.py decide.
    tile_n: int | None = None
    #: Warps of a tensor-core block along (m, n): (2, 4) gives each warp a 64 x 32 share of a 128 x 128 tile,
    #: (2, 2) a 64 x 64 share. None: (2, 2) for the forward from NCHW onto 64 output channels or fewer, else
    #: (2, 4) (measured fastest; bench/conv_sweep.py times the alternatives).
    tile_warps: tuple | None = None
    #: Hopper's wgmma for the repacked forward and backward-data GEMMs with 128-byte tile rows (fp16/bf16, and
    #: float32 with TF32) and for the backward-filter's (fp16/bf16): None uses it on sm_90 GPUs, False never.
    wgmma: bool | None = None
    #: The forward, backward-data and backward-filter on Hopper's TMA kernels (conv_tma.py) where they
    #: apply: None uses them there, False takes conv.cu's paths.
    tma: bool | None = None
    #: conv_tma_narrow.cu's kernel for the TMA forward / stride-1 backward-data onto at most 64 output channels
    #: (conv_tma.py's :func:`~.conv_tma._narrow_plan`): None uses it where it applies (unless ``tile_m`` or
    #: ``tile_n`` asks for a tile of conv_tma.cu's), False never.
    tma_narrow: bool | None = None
    #: Shared-memory stages of the wgmma pipeline (3: two blocks fit on an SM; 4: one, loads a tile further
    #: ahead); None picks by the grid's size.
    wgmma_stages: int | None = None
    #: The direct kernels (conv_direct.cu) where they apply (:func:`is_direct`): True uses them, False takes the
    #: implicit GEMM, None the direct forward and the filter gradient by :func:`direct_filter_gradient`'s rule.
    direct: bool | None = None
    #: Output pixels a thread of the direct forward computes (1, 2 or 4: each weight it reads from shared memory
    #: feeds that many FMAs); None: :data:`DIRECT_PIX`.
    direct_pixels: int | None = None
    #: The forward from NCHW (FORWARD_NCHW) where it applies: None lets :func:`uses_nchw_forward` decide,
    #: True / False force it.
    nchw_forward: bool | None = None
    #: Winograd (winograd.py) for the fp32 (no TF32) 3x3 stride-1 forward, backward-data and backward-filter: None
    #: uses it where it applies with at least 32 input and output channels, True at any channel count, False never.
    winograd: bool | None = None
    #: The fp32 (no TF32) 1x1 forward and backward-data as batched cuBLASLt GEMMs (conv1x1.py): None where it
    #: applies with at least 32 input and output channels, True at any channel count, False never.
    conv1x1: bool | None = None
    #: A grouped convolution as the dense one over a block-diagonal weight (:func:`block_diagonal_applies`): None
    #: where it applies, True for every grouped one (tests), False never.
    block_diagonal: bool | None = None
    #: Over 64 output channels the forward from NCHW gathers A once per 128-wide tile of them, and its kernel
    #: runs longer than the repacked GEMM; it saves the packs' launch, allocation and pass over x, which wins
    #: up to this many gathered elements.
    nchw_gather_max: int = 1 << 25

    def __post_init__(self):
        for name in ("tile_warps", "wgrad_tile"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, tuple(getattr(self, name)))
        if self.wgrad_tile is not None and self.wgrad_tile not in _WGRAD_TILES:
            raise ValueError(f"ConvConfig: wgrad_tile must be one of {_WGRAD_TILES}, got {self.wgrad_tile}")
        if self.wgrad_splits is not None and (type(self.wgrad_splits) is not int or self.wgrad_splits < 1):
            raise ValueError(f"ConvConfig: wgrad_splits must be a positive int, got {self.wgrad_splits!r}")
        if self.direct_pixels not in (None, 1, 2, 4):
            raise ValueError(f"ConvConfig: direct_pixels must be 1, 2 or 4, got {self.direct_pixels!r}")
        if self.wgrad_rows not in (None, 64, 128):
            raise ValueError(f"ConvConfig: wgrad_rows must be 64 or 128, got {self.wgrad_rows!r}")
        # cached: the forward hashes its config on every call (a launch plan cache key)
        object.__setattr__(self, "_hash", hash(dataclasses.astuple(self)))

    def __hash__(self):
        return self._hash


#: Production's config: the primitives' default (one object, so the common path constructs nothing).
DEFAULT_CONFIG = ConvConfig()

GPU_DTYPES = (backend.float16, backend.bfloat16, backend.float32)
THREADS = 256
GRID_Z = 65535  # the most blocks along a grid's z (the packs loop over the images beyond)
DIRECT_CRS_MAX = 32  # conv_direct.cu's CRS_MAX: C*R*S at most this runs direct
DIRECT_K_MAX = 64  # conv_direct.cu's K_MAX: the filter gradient's limit on K
DIRECT_PIXELS = 256  # conv_direct.cu's DIRECT_PIXELS: output pixels a block of the direct forward covers
DIRECT_PIX = 2  # output pixels a thread of the direct forward computes (ConvConfig.direct_pixels; 4 measured slower)
_STAGES = 3
PARAMS_PER_CLASS = 39  # conv.cu's launch-time constants of one residue class (its prm)
_INT32_LIMIT = 1 << 31


def out_size(size, kernel, stride, padding, dilation):
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def geometry(x_shape, w_shape, stride, padding, dilation):
    """(N, C, H, W, K, C/groups, R, S, P, Q)."""
    n, c, h, wd = x_shape
    k, cg, r, s = w_shape
    return (n, c, h, wd, k, cg, r, s, out_size(h, r, stride[0], padding[0], dilation[0]),
            out_size(wd, s, stride[1], padding[1], dilation[1]))


def magic(d):
    """(mul, shr) with n // d == (n * mul) >> (32 + shr) for 0 <= n < 2**31 (mul = 0 means d == 1)."""
    if d == 1:
        return 0, 0
    ell = (d - 1).bit_length()  # ceil(log2(d))
    p = 31 + ell
    return ((1 << p) + d - 1) // d, p - 32


def pack_tile(dtype):
    """The side of the tile one block of conv_util.cu's pack_nhwc / pack_forward packs (its PACK_TILE)."""
    return 64 if np.dtype(dtype).itemsize == 2 else 32


def padded_channels(c, dtype):
    vec = 16 // np.dtype(dtype).itemsize
    return (c + vec - 1) // vec * vec


@functools.cache
def ints(*vals):
    """The values as int32 kernel arguments, made once per distinct tuple (a NumPy scalar costs host time)."""
    return tuple(np.int32(v) for v in vals)


@functools.cache
@functools.cache  # (every GPU convolution's backward asks)
def fits_int32(x_shape, w_shape, stride, padding, dilation, groups, dtype):
    """Whether the NHWC operands' element offsets fit the kernels' 32-bit index math."""
    n, c, h, wd, k, cg, r, s, p, q = geometry(x_shape, w_shape, stride, padding, dilation)
    kg = k // groups
    return (n * h * wd * padded_channels(cg, dtype) < _INT32_LIMIT
            and n * p * q * padded_channels(kg, dtype) < _INT32_LIMIT
            and groups * stride[0] * stride[1] <= GRID_Z // 2)  # (the groups along grid z: see _gemm_launches)


# ---------------------------------------------------------------- conv.cu configurations
def smem_bytes(itemsize, mode, bm, bn, bkb, stages=_STAGES, wgmma=False):
    """Dynamic shared memory of one conv.cu configuration (the larger of its pipeline and its epilogue)."""
    vec, bk = 16 // itemsize, bkb // itemsize
    if wgmma:  # unpadded swizzled rows, and 1024 bytes to align the tiles to the swizzle
        return max(stages * (bm + bn) * bkb + 1024, bn * (bm + 4) * 4, bm * (bn + 4) * 4)
    if mode in (ConvMode.FORWARD, ConvMode.BACKWARD_DATA):
        stage, cs = (bm + bn) * (bk + vec), bn * (bm + 4) * 4
    elif mode == ConvMode.BACKWARD_FILTER:
        stage, cs = bk * (bm + vec + bn + vec), bm * (bn + 4) * 4
    else:  # FORWARD_NCHW: k-major A, n-major B, two stages
        return max(2 * (bk * (bm + vec) + bn * (bk + vec)) * itemsize, bn * (bm + 4) * 4)
    return max(stages * stage * itemsize, cs)


def mma_for(dtype, tf32):
    """The tensor-core (or FFMA) path of ``dtype`` on mma.sync; ``tf32``: the switch read at call time."""
    if dtype == backend.float32:
        return Mma.TF32 if tf32 else Mma.FFMA
    return Mma.FP16


def _bkb(kred, itemsize, row_bytes=None):
    if row_bytes:
        return int(row_bytes)
    return 128 if kred * itemsize >= 1024 else 64


@functools.cache
def _igemm(dtype, mode, bm, bn, mma, bkb, warps=(2, 4), stages=None):
    """(kernel, block, shared bytes) of one conv.cu configuration (``stages``: the wgmma pipeline's depth)."""
    wg = mma == Mma.WGMMA
    stages = stages or _STAGES
    # sm_90a first: NVRTC takes the first architecture named, and CuPy appends the device's plain one
    opts = (("-arch=sm_90a",) if wg else ()) + (
        f"-DCONV_T={ctype(dtype)}", f"-DCONV_MODE={int(mode)}", f"-DCONV_BM={bm}", f"-DCONV_BN={bn}",
        f"-DCONV_MMA={int(mma)}", f"-DCONV_IS_BF16={int(dtype == backend.bfloat16)}", f"-DCONV_BKB={bkb}",
        f"-DCONV_WARPS_M={warps[0]}", f"-DCONV_WARPS_N={warps[1]}", f"-DCONV_STAGES={stages}",
        f"-DCONV_FLOAT={int(dtype == backend.float32)}")
    kern = get_kernel("conv.cu", "conv_igemm", opts)
    smem = smem_bytes(np.dtype(dtype).itemsize, mode, bm, bn, bkb, stages, wg)
    kern.max_dynamic_shared_size_bytes = smem
    return kern, (32 * warps[0] * warps[1],), smem


@functools.cache
def util_kernel(dtype, name):
    """A kernel of conv_util.cu (the repacks and the reductions)."""
    return get_kernel("conv_util.cu", name, (f"-DCONV_T={ctype(dtype)}",))


def _params(values):
    """The kernel's launch-time constants as one device array (uploaded once per configuration)."""
    import cupy

    return cupy.asarray(np.array([int(v) for v in values], dtype=np.int64).astype(np.uint32))


def _whole_grid(m, cols, kred, h, wd, ch, p, q, conv, mid, group=(1, 0, 0, 0)):
    """conv.cu's launch-time constants (in its order) for a GEMM over every output pixel, the identity
    residue class: ``conv`` is (R, S, stride, padding, dilation), ``mid`` (out_C, lda_m, tiles_per_split),
    ``group`` (G, A_gs, B_gs, out_gs)."""
    r, s = conv[0], conv[1]
    return (*ints(m, cols, kred, h, wd, ch, p, q), *conv, *(np.uint32(v) for v in (*magic(p * q), *magic(q))),
            *mid, *ints(p, q, 0, 0, 1, 1, 0, 0, 1, 1, r, s), *ints(*group))


def _tile_n(config, m, n, sms):
    """Columns per block of an ``m`` x ``n`` forward or backward-data GEMM: the config's, else 64 onto at most
    64 channels or where 128-wide tiles would leave SMs without a block (the late layers of a ResNet: few
    output pixels, many channels; measured faster, bench/conv_sweep.py times both), else 128 (and
    :func:`_gemm_kernel` may narrow 64 to 32)."""
    if config.tile_n:
        return config.tile_n
    return 64 if n <= 64 or -(-m // 128) * -(-n // 128) < sms else 128


def _tile_m(config):
    """Rows per block of conv.cu's GEMMs: the config's, 128 for None (and for 192, the TMA kernels' only)."""
    return min(config.tile_m or 128, 128)


def _warps(mma, warps, default=(2, 4)):
    """The warp grid of a block: ``warps`` (the config's) if set (tensor cores only), else ``default``."""
    return tuple(warps) if warps and mma else default


def wgmma_on(config, dev_id):
    """Whether the config and the GPU allow the wgmma path (a set warp grid or 64-row tiles ask for mma.sync)."""
    return config.wgmma is not False and config.tile_m in (None, 128, 192, 256) and config.tile_warps is None \
        and has_wgmma(dev_id)


def _wgmma_applies(mode, mma, itemsize, bkb):
    """Where conv.cu's wgmma path runs: tensor cores, 128-byte tile rows, the forward, or in fp16/bf16 the
    backward-data (its packs do not round to TF32) and backward-filter (TF32 has no MN-major operands)."""
    return mma != Mma.FFMA and bkb == 128 and (
        mode == ConvMode.FORWARD or (mode in (ConvMode.BACKWARD_DATA, ConvMode.BACKWARD_FILTER) and itemsize == 2))


def block_diagonal_applies(dtype, w_shape, groups, config):
    """Whether a grouped convolution of 16-bit floats with few channels a group runs as the dense one over the
    block-diagonal weight (``groups`` times the multiply-adds): at most 8 groups of 2 to 32 input and output
    channels. There the grouped GEMMs' tiles are mostly padding and their reductions a few tiles deep; over
    ResNeXt's 8 groups of 16 and 32 channels the dense kernels ran the three directions 1.02-3.4x as fast as the
    grouped GEMMs, and slower over 64 channels in a scratch sweep (bench/conv_grouped.py's ratios)."""
    if groups == 1 or config.block_diagonal is False:
        return False
    kg, cg = w_shape[0] // groups, w_shape[1]
    return bool(config.block_diagonal) or (np.dtype(dtype).itemsize == 2 and groups <= 8 and 1 < cg <= 32
                                           and kg <= 32)


def gemm_plan(mode, dtype, x_shape, w_shape, stride, padding, dilation, groups, dev_id, config, tf32):
    """The launches of the GEMM(s) of ``mode``, every group's (see :func:`_gemm_launches`)."""
    wg_stages = (config.wgmma_stages or -1) if wgmma_on(config, dev_id) else 0
    return _gemm_launches(mode, np.dtype(dtype), tuple(x_shape), tuple(w_shape), stride, padding, dilation, groups,
                          mma_for(dtype, tf32), sm_count(dev_id), config, wg_stages)


@functools.cache
def _gemm_launches(mode, dtype, x_shape, w_shape, stride, padding, dilation, groups, mma, sms, config, wg_stages):
    """Everything static about the GEMM(s) of ``mode``: a tuple of (kernel, grid, block, smem, params array,
    extra) per launch, each of which runs every group's GEMM (grid z: the group fastest, fits_int32 keeps it
    within the grid). ``wg_stages`` allows the wgmma path where :func:`_wgmma_applies`: 0 never, -1
    with the depth by grid size, else that depth."""
    geo = geometry(x_shape, w_shape, stride, padding, dilation)
    conv = ints(*geo[6:8], *stride, *padding, *dilation)
    kernel = functools.partial(_gemm_kernel, dtype, mma, sms, config, wg_stages)
    if mode == ConvMode.FORWARD:
        return (_forward_launch(dtype, geo, groups, conv, mma, sms, config, kernel),)
    if mode == ConvMode.BACKWARD_DATA:
        return _backward_data_launches(dtype, geo, groups, stride, padding, dilation, conv, mma, sms, config, kernel)
    return (_backward_filter_launch(dtype, geo, groups, conv, mma, sms, config, wg_stages),)


def _gemm_kernel(dtype, mma, sms, config, wg_stages, mode, bm, bn, bkb, m, n):
    """(kernel, block, smem, tile columns) of an ``m`` x ``n`` GEMM of the forward or backward-data: on wgmma
    where allowed and it applies, else on ``mma`` with ``bm`` x ``bn`` tiles, narrowed to 32 columns onto at
    most 32 channels (a 64-wide tile would multiply zeros half the time: the TF32 backward-data of a small
    CNN's second layer). 32-wide tiles need 128-byte rows (each thread loads whole 16-byte chunks of them)
    and run on mma.sync; elsewhere a config's 32 runs 64."""
    wg = bool(wg_stages) and _wgmma_applies(mode, mma, np.dtype(dtype).itemsize, bkb)
    if config.tile_n is None and n <= 32 and not wg:
        bn = 32
    if bn == 32 and bkb != 128:
        bn = 64
    if wg and bn > 32:
        # 128-wide tiles: a grid under two blocks per SM runs 3 stages, two blocks to an SM; a larger one 4,
        # a tile further ahead. 64-wide tiles fit two blocks of 4 stages (measured faster; bench/conv_sweep.py
        # times both depths)
        blocks = -(-m // 128) * -(-n // bn)
        stages = wg_stages if wg_stages > 0 else (3 if blocks < 2 * sms and bn == 128 else 4)
        return (*_igemm(dtype, mode, 128, bn, Mma.WGMMA, bkb, (2, 4), stages), bn)
    if bn == 32:  # 32-row warp tiles down, two 16-column ones across (B fragments load in pairs)
        return (*_igemm(dtype, mode, bm, bn, mma, bkb, (bm // 32, 2) if mma else (2, 4)), bn)
    return (*_igemm(dtype, mode, bm, bn, mma, bkb, _warps(mma, config.tile_warps)), bn)


def _forward_launch(dtype, geo, groups, conv, mma, sms, config, kernel):
    """FORWARD's launch; its extra: conv_util.cu's pack_forward (grid, int arguments, x's packed elements,
    both operands' packed elements)."""
    n, c, h, wd, k, cg, r, s, p, q = geo
    kg = k // groups
    cpad = padded_channels(cg, dtype)
    m, kred = n * p * q, r * s * cpad
    # FFMA: 64-wide tiles (128-wide ones measured slower on every fp32 ResNet shape left to this kernel, by up to
    # a quarter: c256h14s2)
    bn = 64 if mma == Mma.FFMA and not config.tile_n else _tile_n(config, m, kg, sms)
    bm, bkb = _tile_m(config), _bkb(kred, np.dtype(dtype).itemsize, config.tile_row_bytes)
    kern, block, smem, bn = kernel(ConvMode.FORWARD, bm, bn, bkb, m, kg)
    grid = ((m + bm - 1) // bm, (kg + bn - 1) // bn, groups)
    # pack_forward: x's tiles in z < G * N (group by group), the weights' grid-stride blocks above them
    group_x, group_w = n * h * wd * cpad, kg * r * s * cpad
    xn_elems, w_elems = groups * group_x, groups * group_w
    tile = pack_tile(dtype)
    gx, gy = -(-h * wd // tile), -(-cpad // tile)
    zw = (min((w_elems + 255) // 256, 1024) + gx * gy - 1) // (gx * gy)
    zx = min(groups * n, GRID_Z - zw)
    tf32 = dtype == backend.float32 and mma != Mma.FFMA  # TF32 operands rounded once, in the pack
    pack = ((gx, gy, zx + zw), ints(n, cg, c, h * wd, cpad, k, r * s, zx, groups, tf32), xn_elems,
            xn_elems + w_elems)
    group = (groups, group_x, group_w, kg * p * q)
    return kern, grid, block, smem, _params(_whole_grid(m, kg, kred, h, wd, cpad, p, q, conv, (k, 0, 0), group)), pack


def _backward_data_launches(dtype, geo, groups, stride, padding, dilation, conv, mma, sms, config, kernel):
    """BACKWARD_DATA's launch: with stride > 1 (dilation 1) one residue class of output pixels per grid z, so
    that only live taps are in a class's reduction (one launch for all of them: each class alone fills a
    fraction of the GPU); else the identity class. No extra."""
    n, c, h, wd, k, cg, r, s, p, q = geo
    kpad = padded_channels(k // groups, dtype)
    if stride != (1, 1) and dilation == (1, 1):
        classes = [(rh, rw) for rh in range(stride[0]) for rw in range(stride[1])]
        steps = stride
    else:
        classes, steps = [(0, 0)], (1, 1)
    params, rows, depth = [], 0, 0
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
        rows, depth = max(rows, m), max(depth, kred)
        head = (*ints(m, cg, kred, p, q, kpad, h, wd), *conv,
                *(np.uint32(v) for v in (*magic(ohc * owc), *magic(owc))))
        params += [*head, c, 0, 0, *ints(ohc, owc, rh, rw, steps[0], steps[1], r0, s0, steps[0], steps[1], rc, sc),
                   *ints(groups, n * p * q * kpad, cg * r * s * kpad, cg * h * wd)]
    bn, bkb = _tile_n(config, n * h * wd, cg, sms), _bkb(depth, np.dtype(dtype).itemsize, config.tile_row_bytes)
    # FFMA under 128-wide tiles: 64 rows (twice the blocks over a stride's classes of few pixels each; measured
    # 1.1-1.4x on the fp32 ResNet stride-2 shapes of over 64 input channels)
    bm = 64 if mma == Mma.FFMA and bn == 128 and not config.tile_m else _tile_m(config)
    kern, block, smem, bn = kernel(ConvMode.BACKWARD_DATA, bm, bn, bkb, n * h * wd, cg)
    grid = ((rows + bm - 1) // bm, (cg + bn - 1) // bn, len(params) // PARAMS_PER_CLASS * groups)
    return ((kern, grid, block, smem, _params(params), None),)


def _backward_filter_launch(dtype, geo, groups, conv, mma, sms, config, wg_stages):
    """BACKWARD_FILTER's launch, split-K over a few blocks per SM; its extra: the number of splits.
    ``wg_stages`` as for :func:`_gemm_launches`."""
    n, c, h, wd, k, cg, r, s, p, q = geo
    kg = k // groups
    kpad = padded_channels(kg, dtype)
    cpad = padded_channels(cg, dtype)
    ncol, npq = r * s * cpad, n * p * q
    itemsize = np.dtype(dtype).itemsize
    bm, bn, bkb = (64 if kg <= 64 else 128), 128, _bkb(npq, itemsize, config.tile_row_bytes)
    if wg_stages and _wgmma_applies(ConvMode.BACKWARD_FILTER, mma, itemsize, bkb):
        bm, bn = config.wgrad_tile or (bm, bn)
        kern, block, smem = _igemm(dtype, ConvMode.BACKWARD_FILTER, bm, bn, Mma.WGMMA, bkb, (2, 4),
                                   wg_stages if wg_stages > 0 else 4)
        # a split of at least 4 k-tiles: onto few columns (a 1x1 filter over 64 channels) the split-K would
        # otherwise run blocks of 2 tiles each, whose fp32 partials cost more than they save
        per_sm, min_tiles = config.split_k_blocks_per_sm or 2, 4
    else:
        kern, block, smem = _igemm(dtype, ConvMode.BACKWARD_FILTER, bm, bn, mma, bkb, _warps(mma, config.tile_warps))
        per_sm, min_tiles = config.split_k_blocks_per_sm or 4, 1
    bk = bkb // itemsize
    tiles = (npq + bk - 1) // bk
    base = groups * ((kg + bm - 1) // bm) * ((ncol + bn - 1) // bn)  # blocks a split
    splits = max(1, min(-(-tiles // min_tiles), (per_sm * sms + base - 1) // base, 256, GRID_Z // groups))
    per = (tiles + splits - 1) // splits
    splits = (tiles + per - 1) // per
    grid = ((kg + bm - 1) // bm, (ncol + bn - 1) // bn, splits * groups)
    group = (groups, npq * kpad, n * h * wd * cpad, 0)
    prm = _params(_whole_grid(kg, ncol, npq, h, wd, cpad, p, q, conv, (0, kpad, per), group))
    return kern, grid, block, smem, prm, splits


# ---------------------------------------------------------------- the forward straight from NCHW
def uses_nchw_forward(x_shape, w_shape, stride, padding, dilation, groups, dtype, config, dev_id=None):
    """Whether this forward runs FORWARD_NCHW: where it applies (:func:`_nchw_gather`), if forced, if the gather
    is small enough to pay, or onto 64 output channels or fewer (one column of tiles, each element gathered
    once: measured as fast as the mma.sync repack or faster) unless the repacked GEMM runs on wgmma on GPU
    ``dev_id`` (measured faster there)."""
    if config.nchw_forward is False:
        return False
    elems = _nchw_gather(x_shape, w_shape, stride, padding, dilation, groups, dtype)
    if elems is None:
        return False
    if config.nchw_forward or elems <= config.nchw_gather_max:
        return True
    repack_bkb = _bkb(w_shape[2] * w_shape[3] * padded_channels(w_shape[1], dtype), 2, config.tile_row_bytes)
    wg = dev_id is not None and wgmma_on(config, dev_id) and _wgmma_applies(ConvMode.FORWARD, Mma.FP16, 2,
                                                                             repack_bkb)
    return w_shape[0] <= 64 and not wg


@functools.cache
def _nchw_gather(x_shape, w_shape, stride, padding, dilation, groups, dtype):
    """Elements FORWARD_NCHW would gather, or None where it does not apply: fp16/bf16, one group, whole
    16-byte weight rows, at most 63 taps (the kernel's per-pixel tap mask)."""
    n, c, h, wd, k, cg, r, s, p, q = geometry(x_shape, w_shape, stride, padding, dilation)
    kred = cg * r * s
    if groups != 1 or np.dtype(dtype).itemsize != 2 or kred % 8 or r * s > 63:
        return None
    return n * p * q * kred * -(-k // 128)


@functools.cache
def nchw_plan(dtype, x_shape, w_shape, stride, padding, dilation, config):
    """(kernel, grid, block, shared bytes, params with the k-table) of a FORWARD_NCHW launch."""
    import cupy

    n, c, h, wd, k, _, r, s, p, q = geometry(x_shape, w_shape, stride, padding, dilation)
    m, kred = n * p * q, c * r * s
    itemsize = np.dtype(dtype).itemsize
    bm, bn, bkb = _tile_m(config), (64 if k <= 64 else 128), _bkb(kred, itemsize, config.tile_row_bytes)
    kern, block, smem = _igemm(dtype, ConvMode.FORWARD_NCHW, bm, bn, Mma.FP16, bkb,
                               _warps(Mma.FP16, config.tile_warps, (2, 2) if bn == 64 else (2, 4)))
    bk = bkb // itemsize
    kk = np.arange(-(-kred // bk) * bk)
    cc, rr, ss = kk // (r * s), kk % (r * s) // s, kk % s
    dy, dx = rr * dilation[0], ss * dilation[1]
    table = np.stack([cc * h * wd + dy * wd + dx, rr * s + ss], axis=1)
    table[kred:] = (0, 63)  # a tap no pixel has
    consts = _whole_grid(m, k, kred, h, wd, c, p, q, ints(r, s, *stride, *padding, *dilation), (k, 0, 0))
    prm = np.concatenate([np.array([int(v) for v in (*consts, 0)], np.int64), table.ravel()])
    grid = ((m + bm - 1) // bm, (k + bn - 1) // bn, 1)
    return kern, grid, block, smem, cupy.asarray(prm.astype(np.uint32))


# ---------------------------------------------------------------- direct convolution (conv_direct.cu)
def is_direct(w_shape, groups, config=None):
    """Whether a convolution runs on the direct kernels (e.g. a first layer on 1-3 channel images): where
    they apply (C*R*S <= DIRECT_CRS_MAX, groups = 1) unless ``config.direct`` is False."""
    return groups == 1 and w_shape[1] * w_shape[2] * w_shape[3] <= DIRECT_CRS_MAX and (
        config is None or config.direct is not False)


#: K*C*R*S from which the filter gradient leaves the direct kernel (FFMA, K*C*R*S per pixel) for the implicit
#: GEMM where that runs on tensor cores (measured: a CIFAR ResNet's 3 -> 64 channel 3x3 stem, 1728, is over
#: twice as fast on the GEMM in fp16, bf16 and TF32; MNIST's 1 -> 32 channel first layer, 288, is faster direct)
DIRECT_WGRAD_MAX_WORK = 1024


def direct_filter_gradient(w_shape, groups, dtype, tf32, config):
    """Whether the filter gradient runs on conv_direct.cu (dW and db in one pass over dy): where
    :func:`is_direct` and K <= DIRECT_K_MAX, unless ``config.direct`` is None and the implicit GEMM runs on
    tensor cores (fp16/bf16, or float32 with ``tf32``) with K*C*R*S >= DIRECT_WGRAD_MAX_WORK."""
    if not is_direct(w_shape, groups, config) or w_shape[0] > DIRECT_K_MAX:
        return False
    tensor_cores = dtype != backend.float32 or tf32
    return config.direct is True or not tensor_cores or int(np.prod(w_shape)) < DIRECT_WGRAD_MAX_WORK


@functools.cache
def _direct_kernel(dtype, name, crs, nhwc=False, pix=1):
    """A direct kernel compiled for one filter shape ``crs`` = (C, R, S) (constant reduction loops), channels-last
    (``nhwc``) or C-contiguous, its forward computing ``pix`` pixels a thread."""
    c, r, s = crs
    return get_kernel("conv_direct.cu", name, (f"-DCONV_T={ctype(dtype)}", f"-DG_C={c}", f"-DG_R={r}", f"-DG_S={s}",
                                               f"-DG_NHWC={int(nhwc)}", f"-DG_PIX={pix}"))


@functools.cache
def direct_plan(dtype, x_shape, w_shape, stride, padding, dilation, nhwc=False, pix=1):
    """(forward kernel, filter-gradient kernel, reduce kernel, P, Q, the geometry as a device int32
    array in conv_direct.cu's order, made once per configuration). ``nhwc``: the forward of a channels-last x
    into a channels-last y (conv_direct.cu's G_NHWC; K a multiple of 8), and no filter-gradient kernels (None);
    ``pix``: the forward's pixels a thread."""
    import cupy

    n, c, h, wd, k, _, r, s, p, q = geometry(x_shape, w_shape, stride, padding, dilation)
    names = ("conv_direct_fwd",) if nhwc else ("conv_direct_fwd", "conv_direct_wgrad", "conv_direct_reduce")
    geo = cupy.asarray(np.array([n, c, h, wd, k, r, s, p, q, *stride, *padding, *dilation], np.int32))
    kernels = tuple(_direct_kernel(dtype, name, (c, r, s), nhwc, pix if name == "conv_direct_fwd" else 1)
                    for name in names)
    return (*(kernels + (None, None) if nhwc else kernels), p, q, geo)
