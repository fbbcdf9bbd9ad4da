"""The planner of the row kernels: LayerNorm / RMSNorm (``norm.cu``), softmax and cross-entropy
(``softmax.cu``), each over the rows of a C-contiguous (M, N) array.

A row of N elements is read as vectors of VEC elements (16 bytes where N and every pointer allow
it); TPR threads (whole warps) share a row, each holding K vectors in registers; a block of NT
threads works on NT / TPR whole rows. A row too long for registers goes to the op's ``*_tiled``
kernel: one row per block of ``TILED_NT`` threads, as many blocks as are resident at once (they
loop over the rows). Each op picks K, TPR and NT by its own rules from the pieces here and returns
a :class:`RowPlan`; :func:`resolve` compiles it. A :class:`RowConfig` passed as ``config=`` forces
the register-path shape (benchmark sweeps, tests); ``None`` picks the tuned plan.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from . import SM_SHARED_BYTES, ctype, get_kernel, sm_count

TILED_NT = 1024  # threads per block (and per row) of the tiled kernels
UNBOUNDED = 1 << 30  # the block cap of a grid with one block per NT / TPR rows


@dataclass(frozen=True)
class RowConfig:
    """A forced register-path configuration: K vectors per thread, TPR threads per row, NT threads
    per block. ``minb`` (norm forward): blocks per SM the kernel must fit (``MF_MINB``);
    ``acc_smem`` (norm backward): dw/db sums in shared memory (``MF_ACC_SMEM``)."""
    k: int
    tpr: int
    nt: int
    minb: int = 1
    acc_smem: int = 0


class RowPlan(NamedTuple):
    """A row kernel's launch configuration before it is compiled."""
    name: str  # the kernel function
    options: tuple  # its compile options
    k: int
    tpr: int
    nt: int
    smem: int = 0  # dynamic shared memory of every launch (bytes)
    cluster: int = 1  # blocks per thread-block cluster
    persistent: bool = False  # grid capped at the resident blocks, which loop over the rows
    fallback: tuple = ()  # options compiled instead when the kernel of ``options`` uses local memory

    @property
    def rows(self) -> int:
        """Rows per block."""
        return self.nt // self.tpr


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def warps(threads: int) -> int:
    """``threads`` rounded up to whole warps."""
    return ceil_div(threads, 32) * 32


def block_threads(tpr: int, target: int) -> int:
    """Threads per block near ``target`` that hold a whole number of rows of ``tpr`` threads."""
    return max(1, target // tpr) * tpr


def row_blocks(m: int, rows_per_block: int, cap: int) -> int:
    """Blocks for ``m`` rows: one per ``rows_per_block`` rows, at most ``cap``."""
    return min(-(-m // rows_per_block), cap)


def vec_width(dtype, n, *arrays):
    """Elements per 16-byte access when N and every pointer allow it, else 1."""
    v = 16 // np.dtype(dtype).itemsize
    if n % v:
        return 1
    for a in arrays:  # (a loop, not any() over a generator: every row op of a step asks)
        if a is not None and a.data.ptr % 16:
            return 1
    return v


def options(dtype, vec, k, tpr, nt) -> tuple:
    """The compile options every row kernel takes (each op appends its own)."""
    return f"-DMF_T={ctype(dtype)}", f"-DMF_VEC={vec}", f"-DMF_K={k}", f"-DMF_TPR={tpr}", f"-DMF_NT={nt}"


def tiled(name: str, opts) -> RowPlan:
    """The plan of ``name``'s tiled kernel; ``opts(k, tpr, nt)``: its compile options."""
    return RowPlan(name + "_tiled", opts(1, TILED_NT, TILED_NT), 1, TILED_NT, TILED_NT, persistent=True)


def wide_fit(n, vec, ept_max, tpr_pref=256, tpr_max=1024, tpr_small=None):
    """(K, TPR) with the fewest vectors per thread whose row fits in the smallest thread limit
    (``tpr_small`` first, when given: rows of a warp or two need no block barriers in the
    reductions; then ``tpr_pref``, 512, ``tpr_max``), at most ``ept_max`` elements a thread;
    None when a row of n elements does not fit (then the tiled kernels run)."""
    nvec = ceil_div(n, vec)
    for limit in sorted({tpr_pref, 512, tpr_max} | ({tpr_small} if tpr_small else set())):
        k = 1
        while k * vec <= ept_max:
            tpr = warps(ceil_div(nvec, k))
            if tpr <= limit:
                return k, tpr
            k *= 2
    return None


def narrow_fit(n, vec, ept_max, ept_warp=None):
    """(K, TPR) with the most vectors per thread (up to ``ept_max`` elements), so the fewest threads
    per row, or None when a row does not fit in 1024 threads. ``ept_warp``: up to that many elements
    a thread when that makes the row one warp (no block barriers in the reductions)."""
    nvec = ceil_div(n, vec)
    if ept_warp and nvec <= 32 * (ept_warp // vec):
        return ceil_div(nvec, 32), 32
    k = max(1, min(ept_max // vec, ceil_div(nvec, 32)))
    tpr = warps(ceil_div(nvec, k))
    return (k, tpr) if tpr <= 1024 else None


# ---------------------------------------------------------------- compiling and occupancy


def current_sm_count() -> int:
    """Streaming multiprocessors of the current device."""
    import cupy

    return sm_count(cupy.cuda.runtime.getDevice())


def blocks_per_sm(kern, nt, smem=0):
    """Resident blocks of ``nt`` threads per SM, by registers, shared memory and thread limits."""
    regs = max(kern.num_regs, 16)
    by_regs = 65536 // (ceil_div(regs, 8) * 8 * nt)
    by_smem = (SM_SHARED_BYTES // (smem + 1024 + kern.shared_size_bytes)) if smem else 32
    return max(1, min(2048 // nt, 32, by_regs, by_smem))


@functools.cache
def kernel_occupancy(filename, name, opts, nt, smem=0):
    """(kernel, resident blocks per SM) for one configuration, looked up once."""
    kern = get_kernel(filename, name, opts)
    # One compiled kernel serves every configuration with the same options but different dynamic
    # shared memory: only ever raise its limit (lowering it broke an earlier configuration's launch).
    if smem > kern.max_dynamic_shared_size_bytes:
        kern.max_dynamic_shared_size_bytes = smem
    return kern, blocks_per_sm(kern, nt, smem)


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
        raise RuntimeError(f"{kern.name}: cluster occupancy query failed ({err}, {count})")
    return count


def resolve(filename: str, plan: RowPlan):
    """(kernel, block cap) of ``plan``: the cap is the resident blocks of a persistent plan, else
    ``UNBOUNDED``. Callers cache the result per configuration."""
    if plan.persistent:
        kern, bps = kernel_occupancy(filename, plan.name, plan.options, plan.nt, plan.smem)
        return kern, current_sm_count() * bps
    kern = get_kernel(filename, plan.name, plan.options)
    if plan.fallback and kern.local_size_bytes:
        kern = get_kernel(filename, plan.name, plan.fallback)
    return kern, UNBOUNDED
