"""Conv2d on Hopper's tensor memory accelerator (``conv_tma.cu``): the forward, the backward-data and the
filter gradient: where each applies, its launch constants, and the launch.

The kernels take the operands conv.cu's take, packed the same way (NHWC x and KRSC w; NHWK dy and CRSK w, or for
conv_tma.cu a KRSC w as it is; dy and x for the filter gradient; channels-last arrays are such operands as they
are), and write the same outputs (NCHW, or NHWC for channels-last; the filter gradient's fp32 split-K partials,
which conv_util.cu's wgrad_reduce sums, or of one split a KRSC dW itself). They apply (:func:`tma_plan`,
:func:`tma_wgrad_plan`) on an sm_90 GPU to fp16 / bf16 with one group, when the gathered operands' channels are
multiples of 64 (a row of a load is 128 bytes) and the gather fits the TMA unit's im2col mode (:func:`window`); the
forward where no ReLU mask is wanted, the backward-data at stride 1, or 2 as residue classes (no dilation, dX's
sides even: :func:`_classes`). The forward / backward-data hand their tiles to the TMA unit to store where the
output's layout allows (:func:`_out_map`). Onto at most 64 output channels (an output the TMA unit stores)
``conv_tma_narrow.cu`` takes the forward / backward-data instead: the same sum with the GEMM transposed
(:func:`_narrow_plan`). The TMA descriptors hold the operands' addresses: a call looks its two (three with the
output's) up by address (encoding them, host work only, on a miss) and passes them by value.
"""
from __future__ import annotations

import dataclasses
import functools
import heapq

import numpy as np

from .. import backend
from . import ARG, REF, Prepared, get_kernel, sm_count, smem_per_block
from .conv_plan import ConvMode, geometry, wgmma_on

NT = 384  # the filter gradient's threads: the producer's warpgroup and two of MMAs
BOX_C = 64  # channels per row of a load: 128 bytes of fp16 / bf16
MAX_STEP = 8  # the TMA unit's largest element stride
CORNER = 127  # the largest magnitude of a 4-d im2col map's window corner (the driver's range is [-128, 127])
MAX_OFFSET = 127  # the largest im2col offset of a tap from the window's corner this module asks for
#: output pixels per reduction stage of the filter gradient: boxes of 16 KiB, which the TMA unit loads faster than
#: twice as many of 8 KiB (conv_tma.cu says more)
WGRAD_PIXELS = 128
MAX_STAGES = 8  # the deepest ring of the forward / backward-data (as deep as the shared memory takes, up to this)


def window(src, out, step, offsets):
    """The im2col window of a gather of an ``src`` = (h, w) map onto an ``out`` = (h, w) map at ``step`` = (h, w)
    element strides, its taps at the gather ``offsets`` [(dy, dx), ...] (output pixel (p, q) of tap (dy, dx) reads
    (p*step_h + dy, q*step_w + dx)): ((lower corner), (upper corner)), each as (h, w), or None where the TMA unit
    does not take it. The window starts at the least offset, so that each tap's offset from it is >= 0, and
    holds one position per output pixel: a row of the output is one row of positions, its last step_w * (out_w
    - 1) past the first; the upper corner is that last position's distance past the map's last pixel."""
    if not offsets or max(step) > MAX_STEP:
        return None
    lower = tuple(min(o[i] for o in offsets) for i in range(2))
    upper = tuple(lower[i] + (out[i] - 1) * step[i] - (src[i] - 1) for i in range(2))
    if max(map(abs, lower + upper)) > CORNER or max(o[i] - lower[i] for o in offsets for i in range(2)) > MAX_OFFSET:
        return None
    return lower, upper


@dataclasses.dataclass(frozen=True)
class TmaPlan:
    """One configuration's launch: the kernel, its shared bytes and grid, the constants (a device array), and
    the tensor maps' specs (:func:`_tensor_map`): the gathered operand's and the weights' (the filter gradient's:
    dy's and x's), and the output's where the tiles go out through the TMA unit."""

    kern: object
    smem: int
    grid: int
    prm: object
    dtype: int
    a_map: tuple
    b_map: tuple
    splits: int = 1  # the filter gradient's fp32 partials (splits of the pixels) of its split tiles
    #: the filter gradient's tiles (rows, tiles per row of them, whole tiles: the first ones, their splits: one
    #: where they are unsplit, their partials split 0's alone), as wgrad_reduce takes them
    wgrad_tiles: tuple = (1, 1, 0, 1)
    #: the filter gradient's split tiles where their own units sum them into a KRSC dW (conv_tma.cu's fixup: every
    #: split unit in the grid's last round), so that no wgrad_reduce follows; else 0
    fixup: int = 0
    threads: int = NT
    #: the kernel's tensor maps: 3 for conv_tma (its output's, ``out_map``, whose tiles then go out through the
    #: TMA unit; without one the weights' map stands in, unused), 2 for conv_tma_wgrad
    n_maps: int = 2
    out_map: tuple = None
    #: conv_tma_narrow.cu's kernel (at most 64 output channels, the GEMM transposed), not conv_tma's
    narrow: bool = False
    #: the backward-data's weights read from their own KRSC memory (a channels-last weight as it is), not packed
    b_krsc: bool = False
    #: NCHW output that the kernel writes channels-last (NHWC), into memory of the caller's that it then transposes
    #: (conv_tma_narrow.cu's stride-2 classes)
    nchw_via_nhwc: bool = False
    #: the tensor maps made so far, by (operand, address), and each launch's by its operands' addresses: see
    #: :func:`_map` and :func:`_launch_maps`
    maps: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)
    launch: object = dataclasses.field(default=None, compare=False, repr=False)  # see _prepared
    #: the fixup's tile counters by stream (a stream's launches run one after another; another stream's may
    #: overlap them)
    counters: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        # the maps by value, then the output, the bias (or the output), the constants and the epilogue's flags
        # (the filter gradient's: its partials, dW, the constants, its flags and the fixup's counters)
        wgrad = (ARG,) if self.n_maps == 2 else ()
        object.__setattr__(self, "launch", Prepared(self.kern, (self.grid,), (self.threads,),
                                                    (REF,) * self.n_maps + (ARG, ARG, self.prm, ARG) + wgrad,
                                                    self.smem, cooperative=self.fixup > 0))


def _tma_on(dtype, groups, dev_id, config):
    """Whether the config, the GPU, the data type (fp16 / bf16) and one group allow the TMA kernels."""
    return config.tma is not False and groups == 1 and np.dtype(dtype).itemsize == 2 and wgmma_on(config, dev_id)


def _kernel(name, dtype, smem, *defines, source="conv_tma.cu"):
    """A kernel of ``source`` for ``dtype`` (a NumPy dtype) with ``defines``, allowed at least ``smem`` shared bytes
    (plans share a kernel and need different amounts)."""
    is_bf16 = dtype == backend.bfloat16
    kern = get_kernel(source, name, ("-arch=sm_90a", f"-DCT_T={'__nv_bfloat16' if is_bf16 else '__half'}",
                                     f"-DCT_IS_BF16={int(is_bf16)}", *defines))
    kern.max_dynamic_shared_size_bytes = max(kern.max_dynamic_shared_size_bytes, smem)
    return kern


def _map_type(dtype):
    from cuda.bindings import driver

    types = driver.CUtensorMapDataType
    bf16 = dtype == backend.bfloat16
    return types.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 if bf16 else types.CU_TENSOR_MAP_DATA_TYPE_FLOAT16


def _tiled_map(dims, box):
    """The spec of a tiled map of a packed 16-bit operand of ``dims`` (innermost first), read in ``box``es."""
    strides = tuple(int(np.prod(dims[:i + 1])) * 2 for i in range(len(dims) - 1))
    return "tiled", dims, strides, box, (1,) * len(dims)


def _im2col_map(n, h, w, c, win, pixels, step):
    """The spec of the im2col map of a packed (n, h, w, c) operand (16-bit): 64 channels at each of ``pixels``
    positions of the ``win``dow (:func:`window`), stepped by ``step`` = (h, w)."""
    (ly, lx), (uy, ux) = win
    return ("im2col", (c, w, h, n), (c * 2, w * c * 2, h * w * c * 2), (lx, ly), (ux, uy), pixels,
            (1, step[1], step[0], 1))


@functools.cache
def tma_plan(mode, dtype, x_shape, w_shape, stride, padding, dilation, groups, dev_id, config, nhwc_out=False,
             b_krsc=False):
    """The :class:`TmaPlan` of a FORWARD or BACKWARD_DATA GEMM writing NCHW (``nhwc_out``: channels-last)
    output, or None where the kernel does not apply, ``config.tma`` is False or the config asks for mma.sync
    (:func:`~.conv_plan.wgmma_on`). ``b_krsc``: the backward-data's weights read from their KRSC memory as they
    are (the plan's ``b_krsc``) where conv_tma.cu takes them so (not where conv_tma_narrow.cu takes the sum)."""
    if not _tma_on(dtype, groups, dev_id, config):
        return None
    # the narrow kernel unless the config turns it off or forces a tile of conv_tma's
    narrow = config.tma_narrow is not False and config.tile_m is None and config.tile_n is None
    return _plan(mode, np.dtype(dtype), tuple(x_shape), tuple(w_shape), tuple(stride), tuple(padding),
                 tuple(dilation), dev_id, config.tile_m, config.tile_n, bool(nhwc_out), narrow,
                 bool(b_krsc) and mode == ConvMode.BACKWARD_DATA)


def _classes(mode, n_out, r, s, stride, padding, dilation):
    """(gather steps (sy, ry, rx), tap_step, subs, class rows: conv_tma.cu's Class entries) of a FORWARD or
    BACKWARD_DATA sum, or None where the kernel does not take it: the backward-data of a stride other than 1
    and 2 (both directions), with dilation, or whose output's sides are not even (classes of unequal maps)."""
    if mode == ConvMode.FORWARD:  # gather x onto the output (p, q)
        return (stride[0], dilation[0], dilation[1]), 1, 1, [(r, s, -padding[0], -padding[1], 0, 0, 0, 0)]
    if stride == (1, 1):  # gather dy onto dx's (h, w), the taps mirrored
        return (1, -dilation[0], -dilation[1]), 1, 1, [(r, s, padding[0], padding[1], 0, 0, 0, 0)]
    if stride != (2, 2) or dilation != (1, 1) or n_out[0] % 2 or n_out[1] % 2:
        return None
    rows = []
    for y0 in range(2):
        for x0 in range(2):  # dx[2i + y0] gathers dy[i + (y0 + pad - r) / 2] over the taps r = y0 + pad mod 2
            r0, s0 = (y0 + padding[0]) % 2, (x0 + padding[1]) % 2
            rows.append((len(range(r0, r, 2)), len(range(s0, s, 2)), (y0 + padding[0] - r0) // 2,
                         (x0 + padding[1] - s0) // 2, r0, s0, y0, x0))
    return (1, -1, -1), 2, 2, rows


@dataclasses.dataclass(frozen=True)
class Gather:
    """The operand A of a FORWARD or BACKWARD_DATA sum as conv_tma.cu gathers it: from ``src`` = (h, w,
    channels) of its packed operand onto each class's ``out`` = (h, w) map of ``cols`` output channels at
    ``step`` = (h, w); conv_tma.cu's ``steps`` (sy, ry, rx), ``tap_step``, ``subs`` and ``classes`` rows
    (:func:`_classes`), and the im2col ``win``dow (:func:`window`)."""

    src: tuple
    out: tuple
    cols: int
    step: tuple
    steps: tuple
    tap_step: int
    subs: int
    classes: tuple
    win: tuple


def gather(mode, x_shape, w_shape, stride, padding, dilation):
    """The :class:`Gather` of a FORWARD or BACKWARD_DATA sum, or None where conv_tma.cu does not take it."""
    n, c, h, wd, k, _, r, s, p, q = geometry(x_shape, w_shape, stride, padding, dilation)
    if mode == ConvMode.FORWARD:  # x (n, h, wd, c) onto the output (p, q) x k
        src, out, cols, step = (h, wd, c), (p, q), k, tuple(stride)
    elif mode == ConvMode.BACKWARD_DATA:  # dy (n, p, q, k) onto dx's (h, wd) x c
        src, out, cols, step = (p, q, k), (h, wd), c, (1, 1)
    else:
        return None
    plan = _classes(mode, out, r, s, stride, padding, dilation)
    if plan is None:
        return None
    (sy, ry, rx), tap_step, subs, classes = plan
    out = (out[0] // subs, out[1] // subs)  # one class's map
    win = window(src[:2], out, step, [(oy + i * ry, ox + j * rx) for taps_r, taps_s, oy, ox, *_ in classes
                                      for i in range(taps_r) for j in range(taps_s)])
    if win is None:
        return None
    return Gather(src, out, cols, step, (sy, ry, rx), tap_step, subs, tuple(classes), win)


@functools.cache
def _plan(mode, dtype, x_shape, w_shape, stride, padding, dilation, dev_id, tile_m, tile_n, nhwc_out, narrow=False,
          b_krsc=False):
    """A plan holds device objects (its constants, its launch): one per device. ``narrow``: conv_tma_narrow.cu's
    where it applies (:func:`_narrow_plan`); ``b_krsc``: the backward-data's weights as they are, KRSC."""
    sms = sm_count(dev_id)
    n, _, _, _, _, _, r, s, _, _ = geometry(x_shape, w_shape, stride, padding, dilation)
    g = gather(mode, x_shape, w_shape, stride, padding, dilation)
    if g is None or g.src[2] % BOX_C or (nhwc_out and g.cols % 8):  # NHWC rows are written in runs of 8 channels
        return None
    plan = _narrow_plan(dtype, g, n, r, s, dev_id, nhwc_out) if narrow else None
    if plan is not None:
        return plan
    src, out, cols, step, (sy, ry, rx), tap_step, subs, classes, win = dataclasses.astuple(g)
    m, ohw, ch = n * out[0] * out[1], out[0] * out[1], src[2]
    # the NCHW stores' run of pixels: along one image (subs = 1) or one class row (subs = 2, interleaved)
    vec = next(v for v in ((8, 4, 2, 1) if subs == 1 else (4, 2, 1)) if (ohw if subs == 1 else out[1]) % v == 0)
    class_work = [taps_r * taps_s * (ch // BOX_C) for taps_r, taps_s, *_ in classes]  # reduction stages a class

    def units_of(bm):  # (a unit's pixels, its classes) on tiles of bm rows: channels-last stride-2 classes take
        # one class's tile of whole rows of its map, out through the TMA unit, where those rows fill 3/4 of a
        # tile; else a unit sums the classes of a class row (two, interleaved), or the one class
        rows = bm // out[1]
        return (rows * out[1], 1) if subs == 2 and nhwc_out and 4 * rows * out[1] >= 3 * bm else (bm, subs)

    bm, bn = _tile(m, cols, class_work, sms, tile_m, tile_n, units_of, boxed=nhwc_out and subs == 1)
    (pix, per_unit), tma_out = units_of(bm), 1
    if per_unit < subs:
        out_map = _class_rows_map(dtype, n, out, cols, pix // out[1])
        if out_map is None:  # the driver does not take the map: two classes' interleaved tiles
            pix = bm
        else:
            tma_out, subs = 2, 1
    a_map = _im2col_map(n, *src, win, pix, step)
    if not _encodable(dtype, a_map):
        return None
    m_tiles, n_tiles = -(-m // pix), -(-cols // bn)
    if tma_out == 1:
        out_map = _out_map(dtype, n, ohw, m, cols, bm, bn, subs, nhwc_out, m_tiles * n_tiles > sms)
    # the ring (1024-byte aligned; as many stages as the block's shared memory holds beside the rest: loads
    # further ahead measured faster), the epilogue's tiles T[bn][bm + 8] (NHWC: T[bm][bn + 8]; one per class of a
    # unit; a tile out one box at a time, one box's room: bm x 64), the mbarriers (16 bytes a stage)
    out_boxes = 1 if (bm, bn) in _BOXED_TILES and out_map is not None else bn // BOX_C
    epi = (bm * BOX_C if out_boxes < bn // BOX_C else bm * (bn + 8)) if nhwc_out else bn * (bm + 8)
    fixed, per_stage = 1024 + subs * epi * 2, (bm + bn) * BOX_C * 2 + 16
    stages = min(MAX_STAGES, (smem_per_block(dev_id) - fixed) // per_stage)
    if stages < 2:
        return None
    smem = fixed + stages * per_stage
    # operand B: the packed weights, (R*S*Cp) x cols, in boxes of bn rows; or the weight's own (cols, R*S, Cp) of
    # KRSC memory in boxes of 64 columns x 64 of reduction (MN-major)
    b_map = (_tiled_map((cols, r * s, ch), (BOX_C, 1, BOX_C)) if b_krsc else
             _tiled_map((r * s * ch, cols), (BOX_C, bn)))
    if not _encodable(dtype, b_map):
        return None
    per_row = m_tiles * n_tiles
    units = _unit_stages(class_work, subs, per_row)
    grid = min(len(units), sms)
    table = schedule(units, grid)[0]
    kern = _kernel("conv_tma", dtype, smem, f"-DCT_BM={bm}", f"-DCT_BN={bn}", f"-DCT_STAGES={stages}",
                   f"-DCT_NHWC_OUT={int(nhwc_out)}", f"-DCT_TMA_OUT={tma_out if out_map is not None else 0}",
                   f"-DCT_B_KRSC={int(b_krsc)}", f"-DCT_SCHEDULE={int(table is not None)}",
                   f"-DCT_OUT_BOXES={out_boxes}")
    head = [m, cols, ohw, out[1], ch // BOX_C, n_tiles, per_row, len(units), sy, ry, rx, s, tap_step, subs, step[1],
            win[0][1], win[0][0], vec, pix]
    prm = _constants(head, classes, table)
    return TmaPlan(kern, smem, grid, prm, _map_type(dtype), a_map, b_map, threads=128 + 2 * bm,
                   n_maps=3, out_map=out_map, b_krsc=b_krsc)


NARROW_PIXELS = 192  # conv_tma_narrow.cu's CT_PIX: output pixels per unit (the MMA's columns)
NARROW_MIN_PIXELS = 128  # the fewest of them a unit of the stride-2 classes (whole rows of a class's map) may use
NARROW_ROWS_PIXELS = (168,)  # units of class rows that take a kernel of that many columns (6 rows of 28-wide maps)


def _narrow_plan(dtype, g, n, r, s, dev_id, nhwc_out):
    """The :class:`TmaPlan` of conv_tma_narrow.cu for the sum ``g`` (a :class:`Gather`), or None where it does
    not apply: more than 64 output channels; of one class, output images that are not whole boxes of 64 pixels
    (which NCHW output needs; channels-last output takes the same kernel as NCHW, so that both layouts compute the
    same bits); of the stride-2 classes, rows of a class's map that fill fewer than :data:`NARROW_MIN_PIXELS` of a
    unit's pixels, or channels not in runs of 16 bytes. The classes' units store NHWC boxes of whole rows of
    their map (NCHW output: the plan's ``nchw_via_nhwc``), on a kernel of as many columns where
    :data:`NARROW_ROWS_PIXELS` has one."""
    src, out, cols, step, (sy, ry, rx), tap_step, subs, classes, win = dataclasses.astuple(g)
    m, ohw = n * out[0] * out[1], out[0] * out[1]
    if cols > BOX_C:
        return None
    if subs == 1:
        if ohw % BOX_C:
            return None
        pix = columns = NARROW_PIXELS
        per_class = -(-m // pix)
        # the output: NHWC, the (m, cols) matrix of pixels x channels; NCHW, (n, cols, ohw) in boxes of 64 pixels
        out_map = _tiled_map((cols, m), (BOX_C, pix)) if nhwc_out else _tiled_map((ohw, cols, n), (BOX_C, BOX_C, 1))
    else:
        rows = NARROW_PIXELS // out[1]
        pix = rows * out[1]
        columns = pix if pix in NARROW_ROWS_PIXELS else NARROW_PIXELS
        if pix < NARROW_MIN_PIXELS or cols % 8:
            return None
        per_class = -(-n * out[0] // rows)
        out_map = _class_rows_map(dtype, n, out, cols, rows)
    a_map = _im2col_map(n, *src, win, pix, step)
    if out_map is None or not (_encodable(dtype, a_map) and _encodable(dtype, out_map)):
        return None
    # the ring (1024-byte aligned) beside the two warpgroups' output boxes; the mbarriers (16 bytes a stage, and
    # the two turns)
    fixed, per_stage = 1024 + 2 * columns * 128 + 16, (BOX_C + columns) * BOX_C * 2 + 16
    stages = min(MAX_STAGES, (smem_per_block(dev_id) - fixed) // per_stage)
    smem = fixed + stages * per_stage
    nhwc_kernel = nhwc_out or subs > 1
    units = _unit_stages([taps_r * taps_s * (src[2] // BOX_C) for taps_r, taps_s, *_ in classes], 1, per_class)
    grid = min(len(units), sm_count(dev_id))
    table = schedule(units, grid)[0]
    kern = _kernel("conv_tma_narrow", dtype, smem, f"-DCT_STAGES={stages}", f"-DCT_NHWC_OUT={int(nhwc_kernel)}",
                   f"-DCT_PIX={columns}", f"-DCT_SCHEDULE={int(table is not None)}", source="conv_tma_narrow.cu")
    head = [m, cols, ohw, out[1], src[2] // BOX_C, len(units), sy, ry, rx, s, tap_step, step[1], win[0][1], win[0][0],
            pix, per_class, subs]
    prm = _constants(head, classes, table)
    b_map = _tiled_map((r * s * src[2], cols), (BOX_C, BOX_C))
    return TmaPlan(kern, smem, grid, prm, _map_type(dtype), a_map, b_map, threads=384,
                   n_maps=3, out_map=out_map, narrow=True, nchw_via_nhwc=nhwc_kernel and not nhwc_out)


#: The forward / backward-data's tiles (rows, columns) and their MMAs' relative rate per SM (FLOP/s, measured on the
#: bench shapes, bench/conv_sweep.py: larger tiles load fewer bytes per FLOP); 192 rows take three MMA
#: warpgroups. (128 x 256 tiles, tried: a 3-stage ring beside their epilogue tile; on the bench shapes of 256
#: output channels or more their forward ran at 0.78-0.88 of 192 x 128's rate, the stride-2 backward-data at
#: a fifth to a third; 256 x 64 tiles, four MMA warpgroups, cuDNN's tile on c64h56: as fast as 192 x 64 there,
#: slower on every other shape.) 256 x 128 tiles, four MMA warpgroups, keep a 4-stage ring only where their
#: output leaves one 64-channel box at a time (channels-last, one class a unit: :data:`_BOXED_TILES`): where
#: they fill the waves as 192 rows do, 0.98-1.0x 192 x 128's rate; where 128 x 128 leaves two rounds and they
#: one (r18c256h8 at batch 256), 1.07x 128 x 128's.
_TILE_RATES = {(128, 64): 0.70, (128, 128): 1.0, (192, 64): 0.8, (192, 128): 1.1, (256, 128): 1.08}
#: tiles only for outputs that go out through the TMA unit one box at a time (conv_tma.cu's CT_OUT_BOXES 1)
_BOXED_TILES = {(256, 128)}


def _tile(m, cols, stages, sms, tile_m, tile_n, units_of=lambda bm: (bm, 1), boxed=False):
    """(rows, columns) of the forward / backward-data's tiles of an ``m`` x ``cols`` GEMM per class, its classes of
    ``stages`` reduction stages each: among the tiles of :data:`_TILE_RATES` that the config's ``tile_m`` /
    ``tile_n`` allow (a value no TMA tile has, conv.cu's 64 rows or 32 columns, allows all), the one of least
    modeled time: the longest block's stages under the units' :func:`schedule` (``units_of(rows)``: a unit's
    pixels and classes) times a stage's work over the tile's rate. A tile size that leaves the last wave nearly
    empty loses to one that fills it. ``boxed``: the output may go out box by box (:data:`_BOXED_TILES` allowed)."""
    def time(tile):
        bm, bn = tile
        pix, subs = units_of(bm)
        units = _unit_stages(stages, subs, -(-m // pix) * -(-cols // bn))
        return schedule(units, min(len(units), sms))[1] * bm * bn / _TILE_RATES[tile]

    tiles = [t for t in _TILE_RATES if boxed or t not in _BOXED_TILES]
    allowed = [t for t in tiles if tile_m in (None, t[0]) and tile_n in (None, t[1])]
    return min(allowed or tiles, key=time)


#: a unit's work beside its reduction stages (its epilogue: the tile out of the MMAs' registers), in stages
UNIT_OVERHEAD = 1


def _unit_stages(stages, subs, per_row):
    """Each unit's work in reduction stages, in the kernels' order: ``per_row`` units of each row of ``subs``
    classes (of ``stages`` stages each) in turn, each with :data:`UNIT_OVERHEAD` per class."""
    rows = [sum(stages[i:i + subs]) + subs * UNIT_OVERHEAD for i in range(0, len(stages), subs)]
    return [work for work in rows for _ in range(per_row)]


def schedule(work, blocks):
    """(the schedule, the longest block's work) of units of ``work`` each on ``blocks`` persistent blocks, as
    conv_tma.cuh's ``Schedule`` reads it: each block's first unit's place in the list (and the list's end), then
    the units, block by block; None where the units are equal (the kernels' round-robin: see CT_SCHEDULE in
    conv_tma.cuh). The units go longest first onto the least loaded block (the lowest of equals), and each
    block takes its own in that order: the stride-2 classes' units (4, 2, 2 and 1 taps of a 3x3 filter),
    round-robin, would leave the blocks of two 4-tap units a third more work than the mean."""
    if min(work, default=0) == max(work, default=0):
        return None, -(-len(work) // max(blocks, 1)) * (work[0] if work else 0)
    lists, heap = [[] for _ in range(blocks)], [(0, b) for b in range(blocks)]
    for u in sorted(range(len(work)), key=lambda u: -work[u]):
        load, b = heapq.heappop(heap)
        lists[b].append(u)
        heapq.heappush(heap, (load + work[u], b))
    starts = np.cumsum([0] + [len(units) for units in lists])
    return np.concatenate([starts, *map(np.asarray, lists)]).astype(np.int32), max(load for load, _ in heap)


def _constants(head, classes, table):
    """A plan's constants on the device: ``head``, then the schedule's place in them (0: none), the ``classes``'
    rows and the schedule ``table`` (:func:`schedule`)."""
    import cupy

    rows = [v for row in classes for v in row]
    at = len(head) + 1 + len(rows) if table is not None else 0
    return cupy.asarray(np.concatenate([head, [at], rows, [] if table is None else table]).astype(np.int32))


def _out_map(dtype, n, ohw, m, cols, bm, bn, subs, nhwc_out, waves):
    """The spec of the output's map where conv_tma.cu's tiles go out through the TMA unit (store_boxes), or
    None: one class per unit (the stride-2 backward-data's classes interleave), and NCHW images of whole boxes
    of 64 pixels (a box that spans two images would be two stores, the second from the middle of its rows) where
    the blocks take more than one tile each (``waves``: the unit's stores pay off as they overlap the next tile's
    MMAs; a single tile's NCHW stores by the warps measured faster)."""
    if subs != 1:
        return None
    if nhwc_out:  # the (m, cols) matrix of pixels x channels (cols % 8 == 0: the plan's rule)
        spec = _tiled_map((cols, m), (BOX_C, bm))
    # (n, cols, ohw), 128-row tiles only: ptxas spills 192 x 128's boxes (512 threads: 128 registers each)
    elif ohw % BOX_C == 0 and waves and bm == 128:
        spec = _tiled_map((ohw, cols, n), (BOX_C, bn, 1))
    else:
        return None
    return spec if _encodable(dtype, spec) else None


def _class_rows_map(dtype, n, out, cols, rows):
    """The spec of the map through which a stride-2 backward-data's units store tiles of ``rows`` whole rows of a
    class's ``out`` = (h, w) map, or None where the driver does not take it: the NHWC output (n, 2h, 2w, cols) as
    (cols, x0, q, y0, class row n*h + p), boxes of 64 channels of one class's rows."""
    e = 2 * cols  # a pixel's bytes
    spec = ("tiled", (cols, 2, out[1], 2, n * out[0]), (e, 2 * e, 2 * out[1] * e, 4 * out[1] * e),
            (BOX_C, 1, out[1], 1, rows), (1,) * 5)
    return spec if _encodable(dtype, spec) else None


@functools.cache
def tma_wgrad_plan(dtype, x_shape, w_shape, stride, padding, dilation, groups, dev_id, config):
    """The :class:`TmaPlan` of the filter gradient (conv_tma_wgrad: dy and x packed, channels multiples of
    64, x gathered as the forward's :func:`gather`, reduction tiles of :data:`WGRAD_PIXELS` output pixels), or
    None as :func:`tma_plan`."""
    if not _tma_on(dtype, groups, dev_id, config):
        return None
    return _wgrad_plan(np.dtype(dtype), tuple(x_shape), tuple(w_shape), tuple(stride), tuple(padding),
                       tuple(dilation), dev_id, config.wgrad_splits, config.wgrad_rows)


#: The most splits the filter gradient's fixup sums (:func:`_wgrad_plan`); more go to wgrad_reduce.
FIXUP_MAX_SPLITS = 10


#: The split count's model of the filter gradient: its MMAs' rate (FLOP/s) and the memory's (bytes/s).
_WGRAD_FLOPS, _MEMORY_BYTES = 4e14, 2.5e12


def _wgrad_splits(tiles, chunks, sms, flops, part_bytes):
    """How many splits of the pixels the filter gradient's ``tiles`` (column x row tiles) take: the count of
    least modeled time, the MMAs' (their ideal time over the share of the last wave of units that the
    persistent blocks fill) plus the fp32 partials' (each split's ``part_bytes``, written and read back by
    wgrad_reduce); each split at least 2 of the ``chunks`` long (at 4, r18c256h8s2k1's 8 tiles of 16 chunks
    took 4 splits, 32 units for the GPU's SMs; the 6 it takes now measured 1.01-1.1x as fast)."""
    def time(s):
        units = tiles * s
        return flops / _WGRAD_FLOPS * (-(-units // sms) * sms / units) + 2 * s * part_bytes / _MEMORY_BYTES

    return min(range(1, max(1, min(chunks // 2, 256)) + 1), key=time)


def _wgrad_schedule(tiles, chunks, sms, flops, part_bytes, splits=None):
    """(whole, whole_splits, splits, per): the filter gradient's units, the first ``whole`` tiles in
    ``whole_splits`` splits each (one: unsplit) that fill whole waves of the SMs, then the other tiles' ``splits``
    splits of ``per`` chunks each, one more round. ``splits`` given: that many of every tile (capped at one per
    chunk). Else the modeled fastest (the time of the longest block's chunks over the ideal's, plus the partials':
    each tile's splits') of :func:`_wgrad_splits`'s count for every tile and of whole waves of whole tiles, each
    split ``whole_splits`` ways (a divisor of the SMs, so that a wave takes whole tiles), with the rest split to
    fill one more round, each of the rest's splits 2 chunks or more (4 left r18c512h4's last wave half idle, 6%
    slower). Split whole tiles fill waves where every tile split alike leaves a last round part idle (c256h14s2:
    72 tiles in 3 splits, 216 units, two rounds on 132 SMs, the second 84 units: 34 chunks a block where 27 are
    the ideal; 44 tiles in 3 splits, then 28 in 4: 30); they and the rest take no more than one plane of partials
    above every tile split alike (the partials are dW's workspace)."""
    def per_of(s):
        per = -(-chunks // min(s, chunks))
        return per, -(-chunks // per)

    if splits is not None:
        return (0, 1, *reversed(per_of(splits)))
    s = _wgrad_splits(tiles, chunks, sms, flops, part_bytes)
    best = (flops / _WGRAD_FLOPS * -(-tiles * s // sms) * sms / (tiles * s) + 2 * s * part_bytes / _MEMORY_BYTES,
            (0, 1, *reversed(per_of(s))))  # (modeled time, schedule): every tile split alike
    for whole_splits in (d for d in range(1, s + 2) if sms % d == 0):
        whole_per, got = per_of(whole_splits)
        wave = sms // whole_splits  # tiles a wave
        whole = tiles // wave * wave
        rest = tiles - whole
        if got < whole_splits or not whole or not rest and whole_splits == 1:
            continue
        cap = sms if whole_splits == 1 else s + 1  # (the split whole tiles' partials: one plane more at most)
        per, split_rest = per_of(min(max(1, sms // rest), max(1, chunks // 2), cap)) if rest else (chunks, 1)
        if whole_splits == 1 and split_rest == 1:
            continue
        span = _span(tiles, chunks, sms, (whole, whole_splits, split_rest, per))
        time = (flops / _WGRAD_FLOPS * span * sms / (tiles * chunks)
                + 2 * (whole * whole_splits + rest * split_rest) / tiles * part_bytes / _MEMORY_BYTES)
        if time < best[0]:
            best = (time, (whole, whole_splits, split_rest, per))
    return best[1]


def wgrad_partials(k, ncol, wgrad_tiles, splits=1):
    """(stride, bytes): the filter gradient's fp32 partials of dW (``k``, ``ncol``) in ``splits`` splits (or the
    whole tiles' splits, where more) of its ``wgrad_tiles`` (:attr:`TmaPlan.wgrad_tiles`): split z's at z * stride
    floats. Past split 0 no split holds the rows of tiles that are all whole and unsplit (their partials, if any,
    are split 0's), so each split's plane starts that many rows before the end of the one before it: ResNet-18's
    512-channel 3x3 filters at batch 128, 132 of 144 tiles whole and 12 in 8 splits, take 2.75 planes, not 8."""
    rows, n_tiles, whole, whole_splits = wgrad_tiles
    plane = k * ncol
    stride = plane - (whole // n_tiles * rows * ncol if whole_splits == 1 else 0)
    return stride, 4 * (plane + (max(splits, whole_splits) - 1) * stride)


def _span(tiles, chunks, sms, schedule):
    """The longest block's chunks under a :func:`_wgrad_schedule` ``schedule``."""
    whole, whole_splits, splits, per = schedule
    if not whole:
        return -(-tiles * splits // sms) * per
    return whole // (sms // whole_splits) * -(-chunks // whole_splits) + (per if tiles > whole else 0)


#: The filter gradient's tile rows' model (:func:`_wgrad_tiles`), fitted to bench/conv.py's shapes timed at both:
#: a chunk's time on an SM by the rows (64-row tiles run their MMAs at a lower rate than 128-row ones, but twice
#: the tiles fill the SMs' waves more finely, and a whole tile's unit writes dW itself), a byte's of fp32
#: partials (written, then read back by the fixup or wgrad_reduce), and the summing's own (the fixup's wait or
#: wgrad_reduce's launch). (The 64-row chunk's time refitted since the producer's loop lost its divisions: the shapes
#: it moves to 64 rows, c256h14s2 at batch 256 and ResNet-18's 3x3 stride-2 layers at batch 128, measured faster.)
_CHUNK_SECONDS, _PARTIAL_BYTE_SECONDS, _SUM_SECONDS = {128: 0.75e-6, 64: 0.46e-6}, 0.67e-12, 3.5e-6
#: 64 rows only where modeled this much faster (the model's near ties measured either way)
_ROWS_MARGIN = 0.97


def _wgrad_tiles(k, ncol, chunks, sms, flops, splits=None, rows=None):
    """(rows, tiles, schedule): the filter gradient's tiles, of ``rows`` (64 or 128) output channels by 128 columns,
    and their :func:`_wgrad_schedule`. ``rows`` None: 64 onto at most 64 output channels, else 64 where modeled
    faster (by :data:`_ROWS_MARGIN`): the longest block's chunks and the partials. (c256h14s2: 72 tiles of 128
    rows leave two rounds of split units and their partials to sum; 144 of 64 rows fill a wave whole, each unit
    writing its dW tile, then the rest split, and measured faster.)"""
    def tiled(rows):
        tiles = -(-k // rows) * -(-ncol // 128)
        return rows, tiles, _wgrad_schedule(tiles, chunks, sms, flops, k * ncol * 4, splits)

    def cost(rows, tiles, schedule):
        whole, whole_splits, split, _ = schedule
        partials = (whole * whole_splits if whole_splits > 1 else 0) + ((tiles - whole) * split if split > 1 else 0)
        summed = partials * rows * 128 * 4 * _PARTIAL_BYTE_SECONDS + _SUM_SECONDS if partials else 0
        return _span(tiles, chunks, sms, schedule) * _CHUNK_SECONDS[rows] + summed

    if rows or k <= 64:
        return tiled(rows or 64)
    narrow, wide = tiled(64), tiled(128)
    return narrow if cost(*narrow) < _ROWS_MARGIN * cost(*wide) else wide


@functools.cache
def _wgrad_plan(dtype, x_shape, w_shape, stride, padding, dilation, dev_id, splits=None, rows=None):
    import cupy

    sms = sm_count(dev_id)
    n, c, h, wd, k, _, r, s, p, q = geometry(x_shape, w_shape, stride, padding, dilation)
    g = gather(ConvMode.FORWARD, x_shape, w_shape, stride, padding, dilation)  # x as the forward gathers it
    if g is None or c % BOX_C or k % BOX_C:
        return None
    x_map = _im2col_map(n, h, wd, c, g.win, WGRAD_PIXELS, stride)  # its window starts at -padding
    if not _encodable(dtype, x_map):
        return None
    ncol, chunks = r * s * c, -(-n * p * q // WGRAD_PIXELS)
    flops = 2 * k * ncol * n * p * q
    bm, tiles, (whole, whole_splits, splits, per) = _wgrad_tiles(k, ncol, chunks, sms, flops, splits, rows)
    m_tiles, n_tiles = -(-k // bm), -(-ncol // 128)
    units = whole * whole_splits + (tiles - whole) * splits
    grid = min(units, sms)
    # the split units all in the last round of the persistent blocks: they may wait for each other; and few splits
    # (each thread of the fixup reads its vectors' splits one after another; measured as fast as wgrad_reduce or
    # faster at 3 to 10 splits on ResNet's layers, not past that: more are wgrad_reduce's, spread over the GPU);
    # whole tiles unsplit (split ones are wgrad_reduce's too)
    fixup = (tiles - whole if 1 < splits <= FIXUP_MAX_SPLITS and whole_splits == 1 and whole % grid == 0
             and units - whole <= grid else 0)
    stages = 3 if bm == 128 else 4  # as deep as the shared memory takes
    smem = 1024 + stages * (bm + 128) * WGRAD_PIXELS * 2 + 16 * stages  # the ring (1024-byte aligned), the mbarriers
    kern = _kernel("conv_tma_wgrad", dtype, smem, "-DCT_WGRAD=1", f"-DCT_BM={bm}", f"-DCT_STAGES={stages}",
                   f"-DCT_WPIX={WGRAD_PIXELS}")
    wgrad_tiles = (bm, n_tiles, whole, whole_splits)
    prm = cupy.asarray(np.array([k, ncol, p * q, q, chunks, per, c, s, stride[0], -padding[0], dilation[0],
                                 -padding[1], dilation[1], m_tiles, n_tiles, units, stride[1], whole, fixup > 0,
                                 whole_splits, -(-chunks // whole_splits), wgrad_partials(k, ncol, wgrad_tiles)[0]],
                                np.int32))
    # dy: boxes of 64 channels x WGRAD_PIXELS pixels of the (n*p*q, k) matrix
    return TmaPlan(kern, smem, grid, prm, _map_type(dtype), _tiled_map((k, n * p * q), (BOX_C, WGRAD_PIXELS)),
                   x_map, splits, wgrad_tiles=wgrad_tiles, fixup=fixup)


def _tensor_map(dt, address, spec):
    """A CUtensorMap of the operand at ``address`` by its ``spec`` (:func:`_tiled_map`, :func:`_im2col_map`):
    128-byte swizzle (wgmma's layout), zeros outside; None where the driver refuses it."""
    from cuda.bindings import driver as d

    u64, u32 = d.cuuint64_t, d.cuuint32_t
    kind, dims, strides, *rest = spec
    head = (dt, len(dims), address, [u64(v) for v in dims], [u64(v) for v in strides])
    tail = (d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, d.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
            d.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if kind == "tiled":
        box, steps = rest
        err, tmap = d.cuTensorMapEncodeTiled(*head, [u32(v) for v in box], [u32(v) for v in steps], *tail)
    else:
        lower, upper, pixels, steps = rest
        err, tmap = d.cuTensorMapEncodeIm2col(*head, list(lower), list(upper), BOX_C, pixels,
                                              [u32(v) for v in steps], *tail)
    return tmap if err == d.CUresult.CUDA_SUCCESS else None


def _encodable(dtype, spec):
    """Whether the driver encodes ``spec`` (at a stand-in address: encoding reads no memory)."""
    return _tensor_map(_map_type(dtype), 1 << 20, spec) is not None


#: Tensor maps a plan keeps at most (it forgets them all when full).
MAPS_PER_PLAN = 256


def _map(plan, side, address):
    """(the encoded tensor map of ``plan``'s operand ``side`` (0: the gathered one, 1: the weights or x, 2: the
    output) at ``address``, its host address), which the launch passes by value. Kept per plan by address: a
    training step allocates its operands at the same addresses step after step (CuPy's pool), so encoding, most
    of a launch's host time, is mostly skipped."""
    key = (side, address)
    hit = plan.maps.get(key)
    if hit is None:
        if len(plan.maps) >= MAPS_PER_PLAN:
            plan.maps.clear()
        spec = (plan.a_map, plan.b_map, plan.out_map)[side]
        tmap = _tensor_map(plan.dtype, address, spec)
        if tmap is None:  # the plan encoded its spec; an operand's address must be 16-byte aligned
            raise RuntimeError(f"conv2d: the TMA unit refused the map {spec} at address {address:#x}")
        hit = plan.maps[key] = (tmap, tmap.getPtr())  # the address of the map the tuple keeps alive
    return hit


def _launch_maps(plan, addresses):
    """The host addresses of the tensor maps of one launch of ``plan`` on its operands at ``addresses`` (the
    gathered one's, the other one's and, for 3 maps, the output's), kept by those addresses in ``plan.maps`` as
    the maps are (one lookup a launch: a step's launches repeat their addresses)."""
    hit = plan.maps.get(addresses)
    if hit is None:
        maps = (_map(plan, 0, addresses[0]), _map(plan, 1, addresses[1]))
        if plan.n_maps == 3:
            maps += (_map(plan, 2, addresses[2]) if plan.out_map else maps[1],)
        # (the entry keeps its maps alive: clearing the per-operand ones above must not free them)
        hit = plan.maps[addresses] = (tuple(m[1] for m in maps), maps)
    return hit[0]


def launch_tma(plan, a, b, out, bias, flags):
    """Runs ``plan`` on the packed operands at addresses ``a`` (the gathered one) and ``b`` (the weights) into
    ``out`` (NCHW or NHWC), with conv.cu's epilogue ``flags`` (an int32: bias, ReLU; ``bias`` an address or 0)."""
    plan.launch(*_launch_maps(plan, (a, b, out)), out, bias or out, flags)


#: conv_tma_wgrad's flag: every unit's fp32 partials written (for wgrad_reduce), none of dW
WGRAD_PARTIALS = 1


def _counters(plan):
    """The address of the fixup's tile counters for the current stream (0 where the plan has no fixup)."""
    if not plan.fixup:
        return 0
    import cupy

    stream = cupy.cuda.get_current_stream().ptr
    counters = plan.counters.get(stream)
    if counters is None:
        counters = plan.counters[stream] = cupy.zeros(plan.fixup, np.uint64)
    return counters.data.ptr


def launch_tma_wgrad(plan, dy, x, dw, ws=None):
    """Runs the filter gradient's ``plan`` on the packed dy and x at addresses ``dy``, ``x``: into ``ws``, an
    address of fp32 partials of dW (K, R*S*C) as :func:`wgrad_partials` lays them out for conv_util.cu's
    wgrad_reduce to sum; with ``ws`` and ``dw`` (not 0), the unsplit whole tiles
    (``plan.wgrad_tiles``) go into ``dw`` instead, the address of dW itself in that (KRSC) order, and the others'
    partials into ``ws`` (with ``plan.fixup``, summed into ``dw`` by the kernel: dW is whole); split whole tiles
    write partials, all of them, ``dw`` unused; without ``ws`` (one split only) all go into ``dw``."""
    maps = _launch_maps(plan, (dy, x, None))
    whole_split = plan.wgrad_tiles[3] > 1
    if ws is not None:
        own = dw and not whole_split
        plan.launch(*maps, ws, dw if own else ws, np.int32(0 if own else WGRAD_PARTIALS), _counters(plan) if own else 0)
    elif plan.splits == 1 and not whole_split:
        plan.launch(*maps, dw, dw, np.int32(0), 0)
    else:
        raise ValueError(f"conv_tma_wgrad: a plan of {plan.splits} splits writes fp32 partials: ws is required")
