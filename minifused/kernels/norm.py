"""LayerNorm and RMSNorm over the last dimension of a 2-D (M, N) array.

``norm_fwd(x, weight, bias, eps, rms) -> (y, mean, rstd)`` and
``norm_bwd(dy, x, weight, mean, rstd, rms, need_dx, need_dw, need_db) -> (dx, dw, db)``
dispatch on the array module: NumPy arrays go to the references
(``norm_fwd_ref`` / ``norm_bwd_ref``, fp32 arithmetic, fp64 for fp64 input;
they are written for either array module, so fp64 CuPy arrays use them too),
CuPy fp32/fp16/bf16 arrays to the kernels in ``norm.cu``. ``mean`` and ``rstd`` are fp32
(fp64 for fp64 input) arrays of length M; ``mean`` is None for RMSNorm.
Outputs have the input's dtype; dw/db the weight's. Inputs are assumed valid
and C-contiguous (the functional layer checks).
"""
from __future__ import annotations

import functools

import numpy as np

from .. import backend
from . import get_kernel, has_pdl, launch, pdl_active

# ---------------------------------------------------------------- references


def _acc_dtype(dtype):
    return np.float64 if np.dtype(dtype) == np.float64 else np.float32


def norm_fwd_ref(x, weight=None, bias=None, eps=1e-5, rms=False):
    xp = backend.array_module(x)
    acc = _acc_dtype(x.dtype)
    xf = xp.asarray(x, dtype=acc)
    n = xf.shape[-1]
    if rms:
        mean = None
        var = xp.einsum("ij,ij->i", xf, xf) / n if xf.size else xp.zeros(xf.shape[0], acc)
        xc = xf
    else:
        mean = xf.mean(axis=-1)
        xc = xf - mean[:, None]
        var = (xc * xc).mean(axis=-1)
    rstd = (1.0 / xp.sqrt(var + acc(eps))).astype(acc)
    y = xc * rstd[:, None]
    if weight is not None:
        y = y * xp.asarray(weight, dtype=acc)
    if bias is not None and not rms:
        y = y + xp.asarray(bias, dtype=acc)
    return y.astype(x.dtype), (None if mean is None else mean.astype(acc)), rstd


def norm_bwd_ref(dy, x, weight, mean, rstd, rms=False, need_dx=True, need_dw=True, need_db=True):
    xp = backend.array_module(x)
    acc = _acc_dtype(x.dtype)
    xf = xp.asarray(x, dtype=acc)
    d = xp.asarray(dy, dtype=acc)
    n = xf.shape[-1]
    xh = (xf if rms else xf - mean[:, None]) * rstd[:, None]
    g = d * xp.asarray(weight, dtype=acc) if weight is not None else d
    dx = dw = db = None
    if need_dx:
        c1 = (xh * g).sum(axis=-1, keepdims=True) / n
        inner = g - xh * c1
        if not rms:
            inner = inner - g.sum(axis=-1, keepdims=True) / n
        dx = (rstd[:, None] * inner).astype(x.dtype)
    if weight is not None and need_dw:
        dw = (d * xh).sum(axis=0).astype(weight.dtype)
    if weight is not None and need_db and not rms:
        db = d.sum(axis=0).astype(weight.dtype)
    return dx, dw, db


# ---------------------------------------------------------------- CUDA

CTYPES = {np.dtype(np.float32): "float", np.dtype(np.float16): "__half", backend.bfloat16: "__nv_bfloat16"}


def _ceil(a, b):
    return -(-a // b)


def vec_width(dtype, n, *arrays):
    """Elements per 16-byte access when N and every pointer allow it, else 1."""
    v = 16 // np.dtype(dtype).itemsize
    if n % v or any(a is not None and a.data.ptr % 16 for a in arrays):
        return 1
    return v


def row_plan(n, vec, ept_max, tpr_pref=256, tpr_max=1024, tpr_small=None):
    """(K, TPR) for the register path -- vectors per thread and threads per row --
    or None when a row of n elements does not fit (then the tiled kernels run).
    ``tpr_small``: first try rows of at most that many threads (a warp or two per
    row: no block barriers in the reductions), with up to ``ept_max`` elements each."""
    nvec = _ceil(n, vec)
    for limit in sorted({tpr_pref, 512, tpr_max} | ({tpr_small} if tpr_small else set())):
        k = 1
        while k * vec <= ept_max:
            tpr = _ceil(_ceil(nvec, k), 32) * 32
            if tpr <= limit:
                return k, tpr
            k *= 2
    return None


def narrow_plan(n, vec, ept_max, ept_warp=None):
    """(K, TPR) with the most elements per thread (up to ``ept_max``), so the fewest threads per row,
    or None when a row does not fit in 1024 threads. The forward's choice: measured on an H100 at
    M = 4096, fp16 (bench/norms_sweep.py), fewer, busier threads per row beat wider rows at every N
    (N = 1024: one warp per row with four 16-byte loads each, 1586 GB/s against 1427 for two warps,
    timed before graphs and PDL; _fwd_plan now splits those rows in two, see there).
    ``ept_warp``: up to that many elements per thread when it makes the row one warp (no block
    barriers in the reductions; fp16 N = 2048, eight loads each: 1999 GB/s against 1946 for two warps)."""
    nvec = _ceil(n, vec)
    if ept_warp and nvec <= 32 * (ept_warp // vec):
        return _ceil(nvec, 32), 32
    k = max(1, min(ept_max // vec, _ceil(nvec, 32)))
    tpr = _ceil(_ceil(nvec, k), 32) * 32
    return (k, tpr) if tpr <= 1024 else None


_SM_COUNT = {}


def sm_count():
    import cupy

    dev = cupy.cuda.runtime.getDevice()
    if dev not in _SM_COUNT:
        _SM_COUNT[dev] = cupy.cuda.Device(dev).attributes["MultiProcessorCount"]
    return _SM_COUNT[dev]


def blocks_per_sm(kern, nt, smem=0):
    regs = max(kern.num_regs, 16)
    by_regs = 65536 // (_ceil(regs, 8) * 8 * nt)
    by_smem = (233472 // (smem + 1024 + kern.shared_size_bytes)) if smem else 32
    return max(1, min(2048 // nt, 32, by_regs, by_smem))


@functools.cache
def kernel_occupancy(filename, name, options, nt, smem=0):
    """(kernel, resident blocks per SM) for one configuration, looked up once."""
    kern = get_kernel(filename, name, options)
    # One compiled kernel serves every configuration with the same options but different dynamic
    # shared memory: only ever raise its limit. (Setting it to each configuration's own size lowered
    # it below an earlier configuration's, whose next launch then failed with CUDA_ERROR_INVALID_VALUE;
    # found by the GPU fuzz of LayerNorm backward over random row lengths.)
    if smem > kern.max_dynamic_shared_size_bytes:
        kern.max_dynamic_shared_size_bytes = smem
    return kern, blocks_per_sm(kern, nt, smem)


# Blocks per cluster in the backward on sm_90+ when a block holds one row (long rows): the pair adds
# its dw/db partial rows in distributed shared memory, so half as many partial rows (each as long as
# a data row) are written and re-read by norm_bwd_reduce. Measured on an H100 at M = 4096, fp16
# (one run, GB/s without / with pairs): N = 9216 1695 / 1901, 12288 1894 / 2188, 16384 2026 / 2397.
# Not for shorter rows, several per block: clusters lower the resident blocks (a cluster must fit in
# one GPC: 30 clusters of 8, 240 blocks, where 264 single blocks fit) and lost there at every N
# (N = 1024-8192: 2-6 % slower with pairs, 3-6 % with clusters of 4 or 8).
BWD_CLUSTER = 2

@functools.cache
def resident_clusters(kern, nt, smem, cluster):
    """How many clusters of ``cluster`` blocks of ``kern`` fit on the device at once (the driver's
    occupancy query: clusters live within one GPC, so this can be fewer than SMs x blocks per SM / cluster)."""
    from cuda.bindings import driver

    cfg = driver.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = cluster, 1, 1
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = nt, 1, 1
    cfg.sharedMemBytes = smem
    err, count = driver.cuOccupancyMaxActiveClusters(driver.CUfunction(kern.kernel.ptr), cfg)
    if err != driver.CUresult.CUDA_SUCCESS or count < 1:
        raise RuntimeError(f"layer_norm backward: cluster occupancy query failed ({err}, {count})")
    return count


_NULL = np.uint64(0)


def _p(a):
    return _NULL if a is None else a


def _opts(dtype, vec, k, tpr, nt, rms, acc_smem=0, cluster=1, pipe=0, wb_smem=0, minb=1):
    return (f"-DMF_T={CTYPES[np.dtype(dtype)]}", f"-DMF_VEC={vec}", f"-DMF_K={k}", f"-DMF_TPR={tpr}",
            f"-DMF_NT={nt}", f"-DMF_RMS={int(rms)}", f"-DMF_ACC_SMEM={acc_smem}", f"-DMF_CLUSTER={cluster}",
            f"-DMF_PIPE={pipe}", f"-DMF_WB_SMEM={wb_smem}", f"-DMF_MINB={minb}")


# The forward's register path stages w and b in shared memory (MF_WB_SMEM) where a thread of a one-warp
# row holds 8 vectors of it and a block has 4 rows: there the loads of w/b after the reductions were the
# cost (H100, M = 4096, fp16 N = 2048: 16.9 us with w/b, 15.0 without) and staging, shared by the block's
# rows, measured faster (share of the copy bandwidth, without / with: fp16 N = 2048 0.667 / 0.700,
# bf16 0.556 / 0.636). Elsewhere it lost: fp16 N = 1024 (4 vectors) 0.556 / 0.538; one row per block,
# whose copy of w/b is as large as its row, N = 3072 0.750 / 0.534, 4096 0.804 / 0.667; fp32 N = 2048
# (2 rows per block) 0.792 / 0.777.
WB_SMEM_MAX = 16 * 1024  # bytes of w and b together


def _wb_smem(dtype, n, vec, k, rows_per_block):
    itemsize = np.dtype(dtype).itemsize
    return int(vec * itemsize == 16 and k >= 8 and rows_per_block >= 4 and 2 * n * itemsize <= WB_SMEM_MAX)


@functools.cache
def _fwd_plan(dtype, n, vec, rms, config=None, pdl=False):
    """(kernel, threads per block, rows per block, grid cap, w/b staged in shared memory) for a forward
    configuration. ``config`` = (K, TPR, NT) forces a register-path configuration (benchmark sweeps, tests);
    ``pdl``: launched with programmatic dependent launch (kernels.launch). A forced ``config`` may add
    MINB, the blocks per SM the kernel must fit (MF_MINB)."""
    if config is not None:
        k, tpr, nt, minb = (tuple(config) + (1,))[:4]
    else:
        plan = narrow_plan(n, vec, ept_max=32, ept_warp=64 if np.dtype(dtype).itemsize == 2 and vec > 1 else None)
        if plan is None:
            nt = 1024
            kern, bps = kernel_occupancy("norm.cu", "norm_fwd_tiled", _opts(dtype, vec, 1, nt, nt, rms), nt)
            return kern, nt, 1, sm_count() * bps, 0
        k, tpr = plan
        # A whole number of rows per block; small blocks measured best. One-warp rows of three or four
        # vectors a thread (fp16 N = 1024) go as two-warp rows of two, two rows to a block, as the softmax
        # forward's, held to 32 registers so that 2048 threads fit on an SM (M = 4096 rows then run in
        # one wave; 47 registers without the bound) where that needs no local memory (bf16 spilled 80
        # bytes, so it is not held). H100, M = 4096, fp16 N = 1024, harness.graph_ms,
        # with PDL, share of the copy bandwidth, two repeats in one run: 0.786 / 0.787 bound, 0.740 /
        # 0.741 unbound, 0.753 / 0.754 for the plan before (one-warp rows one to a block, 55 registers).
        # Also tried, all slower: two rows per row group sharing w/b loaded into registers before the
        # reductions (70-107 registers, 0.65-0.72); w/b lines prefetched to L1 or L2 after the row loads
        # (0.41-0.53); w/b staged in shared memory (0.54-0.70).
        minb = 1
        if tpr == 32 and 3 <= k <= 4:
            k, tpr, nt, minb = 2, 64, 128, 2048 // 128
        else:
            nt = (32 if pdl else 64) if tpr == 32 and k <= 2 else max(1, 128 // tpr) * tpr
    wb = _wb_smem(dtype, n, vec, k, nt // tpr)
    kern = get_kernel("norm.cu", "norm_fwd", _opts(dtype, vec, k, tpr, nt, rms, wb_smem=wb, minb=minb))
    if minb > 1 and kern.local_size_bytes and config is None:
        kern = get_kernel("norm.cu", "norm_fwd", _opts(dtype, vec, k, tpr, nt, rms, wb_smem=wb))
    return kern, nt, nt // tpr, 1 << 30, wb


def _fwd_cuda(x, weight, bias, eps, rms, config=None, out=None):
    import cupy

    m, n = x.shape
    y = cupy.empty_like(x) if out is None else out  # out may be x: each row is read before it is written
    mean = None if rms else cupy.empty(m, np.float32)
    rstd = cupy.empty(m, np.float32)
    if m == 0:
        return y, mean, rstd
    pdl = pdl_active()
    kern, nt, rpb, cap, wb = _fwd_plan(x.dtype, n, vec_width(x.dtype, n, x, weight, bias, y), rms, config, pdl)
    staged = (weight is not None) + (bias is not None and not rms) if wb else 0
    launch(kern, (min(_ceil(m, rpb), cap),), (nt,), (x, _p(weight), _p(bias), y, _p(mean), rstd, np.int32(m),
                                                     np.int32(n), np.float32(eps)),
           shared_mem=staged * n * x.itemsize, pdl=pdl)
    return y, mean, rstd


@functools.cache
def _bwd_plan(dtype, n, vec, rms, want_w, clusters, config=None):
    """(kernel, threads per block, rows per block, blocks per SM, dynamic smem, blocks per cluster)
    for a backward configuration; ``clusters``: the device has thread-block clusters.
    ``config`` = (K, TPR, NT, ACC_SMEM) forces a register-path configuration (benchmark sweeps, tests)."""
    plan = row_plan(n, vec, ept_max=32 if np.dtype(dtype).itemsize < 4 else 16, tpr_pref=256)
    if np.dtype(dtype).itemsize == 2 and vec > 1 and _ceil(n, vec) <= 512:
        # Up to N = 4096 (16-byte vectors of a 2-byte type) a thread holds one vector of the row, in rows
        # of up to 512 threads, and prefetches the next row (PIPE below): 64 registers at N = 4096, 80 at
        # 3072, two blocks per SM either way, one row each, in cluster pairs. Measured on an H100 at M = 4096, fp16, as a fraction of the
        # copy bandwidth, against two vectors on 192/256 threads at 78-80 registers (one or two blocks
        # per SM): N = 3072 0.627 / 0.589, N = 4096 0.684 / 0.583. (Capping those at 64 registers with
        # __launch_bounds__ for 2-4 blocks per SM reached 0.610-0.616 at N = 4096.)
        plan = 1, _ceil(_ceil(n, vec), 32) * 32
    smem, cluster = 0, 1
    if config is not None:
        k, tpr, nt, acc_smem = config
        plan = k, tpr
    elif plan is not None:
        # Measured on an H100 at M = 4096, fp16 (bench/norms_sweep.py): dw/db sums in registers at every
        # N (shared-memory sums cost up to 1/3 of the bandwidth at N = 6144-8192), rows of at most 256
        # threads where K allows, and blocks of about 512 threads.
        k, tpr = plan
        acc_smem = 0
        nt = max(1, 512 // tpr) * tpr
    if plan is not None and want_w:
        staged = 2 * k * vec * nt * 4  # bytes: each row group's sums, staged for the block's partial row
        if clusters and nt == tpr and not acc_smem and staged <= 200 * 1024:
            cluster = BWD_CLUSTER
        if acc_smem or nt > tpr or cluster > 1:
            smem = staged
        if smem > 200 * 1024:
            plan = None
    if plan is None:
        nt = 1024
        kern, bps = kernel_occupancy("norm.cu", "norm_bwd_tiled", _opts(dtype, vec, 1, nt, nt, rms), nt)
        return kern, nt, 1, bps, 0, 1
    # The next row is loaded while this one is worked on (MF_PIPE) only where a thread holds one vector of
    # the row: measured on an H100 at M = 4096, fp16, with / without, as a fraction of the copy bandwidth:
    # N = 1024 0.388 / 0.368, 2048 0.545 / 0.510. With more (K = 2, N = 3072-4096) the extra registers cost
    # resident blocks and it was no faster; from K = 4 (N >= 6144) it spilled and ran at a third of the speed.
    pipe = int(k == 1 and not acc_smem)
    kern, bps = kernel_occupancy("norm.cu", "norm_bwd", _opts(dtype, vec, k, tpr, nt, rms, acc_smem, cluster, pipe),
                                 nt, smem)
    return kern, nt, nt // tpr, bps, smem, cluster


def _bwd_cuda(dy, x, weight, mean, rstd, rms, need_dx, need_dw, need_db, config=None):
    import cupy

    m, n = x.shape
    dx = cupy.empty_like(x) if need_dx else None
    want_w = weight is not None and (need_dw or (need_db and not rms))
    if m == 0 or n == 0:
        z = cupy.zeros(n, weight.dtype) if want_w else None
        return dx, (z if need_dw else None), (z.copy() if want_w and need_db and not rms else None)
    vec = vec_width(x.dtype, n, x, dy, weight, dx)
    pdl = pdl_active()
    kern, nt, rpb, bps, smem, cluster = _bwd_plan(x.dtype, n, vec, rms, want_w,
                                                  has_pdl(x.device.id), config)
    if cluster > 1:  # whole clusters, no more than fit at once (a second wave would double the time)
        grid = min(_ceil(_ceil(m, rpb), cluster), resident_clusters(kern, nt, smem, cluster)) * cluster
    else:
        grid = min(_ceil(m, rpb), sm_count() * bps)
    rows = grid // cluster  # of partial sums
    partial = cupy.empty((rows, 2, n), np.float32) if want_w else None
    launch(kern, (grid,), (nt,), (dy, x, _p(weight), _p(mean), rstd, _p(dx), _p(partial), np.int32(m),
                                  np.int32(n)), shared_mem=smem, pdl=pdl)
    dw = db = None
    if want_w:
        dw = cupy.empty(n, weight.dtype)
        db = cupy.empty(n, weight.dtype) if (need_db and not rms) else None
        # A second launch, not a reduce by the kernel's last blocks: the in-launch variant (arrival tickets,
        # at most one reducing block per SM) measured 0.8 us faster at N = 1024 but 1-7 us slower from
        # N = 3072 up (H100, fp16, M = 4096), its reducers being narrower than this full-width pass.
        red = _reduce_kernel(weight.dtype, rms)
        launch(red, (_ceil(2 * n, 32),), (32, 32), (partial, np.int32(rows), np.int32(n), dw, _p(db)), pdl=pdl)
        if not need_dw:
            dw = None
    return dx, dw, db


@functools.cache
def _reduce_kernel(dtype, rms):
    return get_kernel("norm.cu", "norm_bwd_reduce", _opts(dtype, 1, 1, 32, 256, rms))


# ---------------------------------------------------------------- dispatch


def norm_fwd(x, weight=None, bias=None, eps=1e-5, rms=False, config=None, out=None):
    """(y, mean, rstd) of LayerNorm (or RMSNorm) over the last axis of a 2-D array.
    ``config``: see ``_fwd_plan`` (CUDA only; None picks the tuned plan). ``out`` (C-contiguous,
    x's shape and dtype) receives y and may be ``x`` itself (in place)."""
    if backend.is_cuda_array(x) and x.dtype != np.float64:
        return _fwd_cuda(x, weight, bias, eps, rms, config, out)
    y, mean, rstd = norm_fwd_ref(x, weight, bias, eps, rms)
    if out is not None:
        out[...] = y
        y = out
    return y, mean, rstd


def norm_bwd(dy, x, weight, mean, rstd, rms=False, need_dx=True, need_dw=True, need_db=True, config=None):
    """(dx, dw, db) of LayerNorm (or RMSNorm); entries not asked for are None.
    ``config``: see ``_bwd_plan`` (CUDA only; None picks the tuned plan)."""
    if backend.is_cuda_array(x) and x.dtype != np.float64:
        return _bwd_cuda(dy, x, weight, mean, rstd, rms, need_dx, need_dw, need_db, config)
    return norm_bwd_ref(dy, x, weight, mean, rstd, rms, need_dx, need_dw, need_db)

