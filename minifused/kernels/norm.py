"""LayerNorm and RMSNorm over the last dimension of a 2-D (M, N) array.

``norm_forward(x, weight, bias, eps, rms) -> (y, mean, rstd)`` and
``norm_backward(dy, x, weight, mean, rstd, rms, need_dx, need_dw, need_db) -> (dx, dw, db)``
dispatch on the array module: NumPy arrays go to the references
(``norm_forward_ref`` / ``norm_backward_ref``, fp32 arithmetic, fp64 for fp64 input;
they are written for either array module, so fp64 CuPy arrays use them too),
CuPy fp32/fp16/bf16 arrays to the kernels in ``norm.cu``, planned by ``kernels.rows``.
``mean`` and ``rstd`` are fp32 (fp64 for fp64 input) arrays of length M; ``mean`` is None for
RMSNorm. Outputs have the input's dtype; dw/db the weight's. Inputs are assumed valid
and C-contiguous (the functional layer checks).
"""
from __future__ import annotations

import functools

import numpy as np

from .. import backend
from . import ARG, F32, Prepared, acc_dtype, address as _addr, aligned_bytes, get_kernel, has_pdl, pdl_active, rows
from .rows import ceil_div, row_blocks, vec_width

# ---------------------------------------------------------------- references


def norm_forward_ref(x, weight=None, bias=None, eps=1e-5, rms=False):
    xp = backend.array_module(x)
    acc = acc_dtype(x.dtype).type
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


def norm_backward_ref(dy, x, weight, mean, rstd, rms=False, need_dx=True, need_dw=True, need_db=True):
    xp = backend.array_module(x)
    acc = acc_dtype(x.dtype).type
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

# Blocks per cluster in the backward on sm_90+ when a block holds one row (long rows): the pair adds
# its dw/db partial rows in distributed shared memory, so half as many partial rows are written and
# re-read by norm_bwd_reduce (measured faster; bench/norms_sweep.py). Not for shorter rows, several
# per block: clusters lower the resident blocks (a cluster must fit in one GPC) and lost there.
BWD_CLUSTER = 2
# The forward's register path stages w and b in shared memory (MF_WB_SMEM) where a thread of a
# one-warp row holds 8 vectors of it and a block has 4 rows, so that the output loop does not wait
# on their loads after the reductions; elsewhere it measured slower (bench/norms_sweep.py).
WB_SMEM_MAX = 16 * 1024  # bytes of w and b together


def _opts(dtype, vec, k, tpr, nt, rms, acc_smem=0, cluster=1, pipe=0, wb_smem=0, minb=1):
    return rows.options(dtype, vec, k, tpr, nt) + (
        f"-DMF_RMS={int(rms)}", f"-DMF_ACC_SMEM={acc_smem}", f"-DMF_CLUSTER={cluster}", f"-DMF_PIPE={pipe}",
        f"-DMF_WB_SMEM={wb_smem}", f"-DMF_MINB={minb}")


def _wb_smem(dtype, n, vec, k, rows_per_block):
    itemsize = np.dtype(dtype).itemsize
    return int(vec * itemsize == 16 and k >= 8 and rows_per_block >= 4 and 2 * n * itemsize <= WB_SMEM_MAX)


def _forward_plan(dtype, n, vec, rms, config=None, pdl=False) -> rows.RowPlan:
    """The forward's plan: the fewest, busiest threads per row (narrow_fit), small blocks of whole
    rows. ``config``: a RowConfig (its ``minb`` applies); ``pdl``: launched with programmatic
    dependent launch (kernels.launch)."""
    fallback = ()
    if config is not None:
        k, tpr, nt, minb = config.k, config.tpr, config.nt, config.minb
    else:
        plan = rows.narrow_fit(n, vec, ept_max=32,
                               ept_warp=64 if np.dtype(dtype).itemsize == 2 and vec > 1 else None)
        if plan is None:
            return rows.tiled("norm_fwd", lambda k, tpr, nt: _opts(dtype, vec, k, tpr, nt, rms))
        k, tpr = plan
        minb = 1
        if tpr == 32 and 3 <= k <= 4:
            # One-warp rows of three or four vectors a thread go as two-warp rows of two, two rows to
            # a block, held to the registers that let 2048 threads reside on an SM (one wave at M = 4096;
            # measured faster, bench/norms.py), unless that bound makes the kernel spill (the fallback).
            k, tpr, nt, minb = 2, 64, 128, 2048 // 128
        else:
            nt = (32 if pdl else 64) if tpr == 32 and k <= 2 else rows.block_threads(tpr, 128)
    wb = _wb_smem(dtype, n, vec, k, nt // tpr)
    if minb > 1 and config is None:
        fallback = _opts(dtype, vec, k, tpr, nt, rms, wb_smem=wb)
    return rows.RowPlan("norm_fwd", _opts(dtype, vec, k, tpr, nt, rms, wb_smem=wb, minb=minb), k, tpr, nt,
                        fallback=fallback)


@functools.cache
def _forward_launch(dtype, n, vec, rms, config=None, pdl=False):
    """(kernel, threads per block, rows per block, block cap, w/b staged in shared memory), looked
    up once per configuration."""
    plan = _forward_plan(dtype, n, vec, rms, config, pdl)
    kern, cap = rows.resolve("norm.cu", plan)
    wb = 0 if plan.persistent else _wb_smem(dtype, n, vec, plan.k, plan.rows)
    return kern, plan.nt, plan.rows, cap, wb


@functools.lru_cache(maxsize=1024)  # keyed by the row count too (the grid), as the elementwise launches by size
def _forward_prepared(dtype, m, n, vec, rms, n_wb, config, pdl, dev):
    """The forward's :class:`Prepared` launch for M rows: (x, w, b, y, mean, rstd, eps) per call; ``n_wb``: how
    many of w and b the call has (those the kernel stages in shared memory)."""
    kern, nt, rpb, cap, wb = _forward_launch(dtype, n, vec, rms, config, pdl)
    return Prepared(kern, (row_blocks(m, rpb, cap),), (nt,), (ARG,) * 6 + (np.int32(m), np.int32(n), F32),
                    (n_wb if wb else 0) * n * np.dtype(dtype).itemsize, pdl=True)


def _norm_forward_cuda(x, weight, bias, eps, rms, config=None, out=None):
    import cupy

    m, n = x.shape
    y = cupy.ndarray(x.shape, x.dtype) if out is None else out  # out may be x: each row is read before it is written
    if rms:
        mean, rstd = None, cupy.ndarray((m,), np.float32)
    else:  # one allocation for both (each costs host time), two arrays on it, each part aligned
        half = aligned_bytes(4 * m)
        stats = cupy.cuda.alloc(2 * half)
        mean = cupy.ndarray((m,), np.float32, stats)
        rstd = cupy.ndarray((m,), np.float32, stats + half)
    if m == 0:
        return y, mean, rstd
    run = _forward_prepared(x.dtype, m, n, vec_width(x.dtype, n, x, weight, bias, y), rms,
                            (weight is not None) + (bias is not None and not rms), config, pdl_active(),
                            x.data.device_id)
    run(x.data.ptr, _addr(weight), _addr(bias), y.data.ptr, _addr(mean), rstd.data.ptr, eps)
    return y, mean, rstd


def _backward_plan(dtype, n, vec, rms, want_w, clusters, config=None) -> rows.RowPlan:
    """The backward's plan: rows of at most 256 threads where K allows (wide_fit), blocks of about 512
    threads, dw/db sums in registers; ``clusters``: the device has thread-block clusters.
    ``config``: a RowConfig (its ``acc_smem`` applies)."""
    two_byte = np.dtype(dtype).itemsize == 2
    plan = rows.wide_fit(n, vec, ept_max=32 if np.dtype(dtype).itemsize < 4 else 16, tpr_pref=256)
    if two_byte and vec > 1 and ceil_div(n, vec) <= 512:
        # Up to 512 16-byte vectors a thread holds one vector of the row and prefetches the next row
        # (MF_PIPE): fewer registers, more resident blocks (measured faster; bench/norms_sweep.py).
        plan = 1, rows.warps(ceil_div(n, vec))
    smem, cluster, acc_smem = 0, 1, 0
    if config is not None:
        k, tpr, nt, acc_smem = config.k, config.tpr, config.nt, config.acc_smem
        plan = k, tpr
    elif plan is not None:
        k, tpr = plan
        nt = rows.block_threads(tpr, 512)
    if plan is not None and want_w:
        staged = 2 * k * vec * nt * 4  # bytes: each row group's sums, staged for the block's partial row
        if clusters and nt == tpr and not acc_smem and staged <= 200 * 1024:
            cluster = BWD_CLUSTER
        if acc_smem or nt > tpr or cluster > 1:
            smem = staged
        if smem > 200 * 1024:
            plan = None
    if plan is None:
        return rows.tiled("norm_bwd", lambda k, tpr, nt: _opts(dtype, vec, k, tpr, nt, rms))
    # The next row is loaded while this one is worked on only where a thread holds one vector of the
    # row: with more, the extra registers cost resident blocks (or spilled).
    pipe = int(k == 1 and not acc_smem)
    return rows.RowPlan("norm_bwd", _opts(dtype, vec, k, tpr, nt, rms, acc_smem, cluster, pipe), k, tpr, nt,
                        smem=smem, cluster=cluster, persistent=True)


@functools.cache
def _backward_launch(dtype, n, vec, rms, want_w, clusters, config=None):
    """(kernel, threads per block, rows per block, block cap, dynamic smem, blocks per cluster),
    looked up once per configuration; with clusters the cap is in clusters (no more than fit at once:
    a second wave would double the time)."""
    plan = _backward_plan(dtype, n, vec, rms, want_w, clusters, config)
    kern, cap = rows.resolve("norm.cu", plan)
    if plan.cluster > 1:
        cap = rows.resident_clusters(kern, plan.nt, plan.smem, plan.cluster)
    return kern, plan.nt, plan.rows, cap, plan.smem, plan.cluster


@functools.lru_cache(maxsize=1024)  # keyed by the row count (the grid), as the forward's
def _backward_prepared(dtype, wdtype, m, n, vec, rms, want_w, config, dev):
    """The backward's :class:`Prepared` launches for M rows: the row kernel, (dy, x, w, mean, rstd, dx, partial
    sums) per call, and where w's gradients are wanted the reduce of its partial sums, (partial sums, dw, db);
    and the partial sums' row count (0 without them)."""
    kern, nt, rpb, cap, smem, cluster = _backward_launch(dtype, n, vec, rms, want_w, has_pdl(dev), config)
    grid = row_blocks(m, rpb * cluster, cap) * cluster if cluster > 1 else row_blocks(m, rpb, cap)
    n_partial = grid // cluster if want_w else 0  # rows of partial sums
    rows_kernel = Prepared(kern, (grid,), (nt,), (ARG,) * 7 + (np.int32(m), np.int32(n)), smem, pdl=True)
    reduce = None
    if want_w:
        # A second launch, not a reduce by the kernel's last blocks: that measured slower from N = 3072 up,
        # its reducers being narrower than this full-width pass.
        reduce = Prepared(_reduce_kernel(wdtype, rms), (ceil_div(2 * n, 32),), (32, 32),
                          (ARG, np.int32(n_partial), np.int32(n), ARG, ARG), pdl=True)
    return rows_kernel, reduce, n_partial


def _norm_backward_cuda(dy, x, weight, mean, rstd, rms, need_dx, need_dw, need_db, config=None):
    import cupy

    m, n = x.shape
    dx = cupy.ndarray(x.shape, x.dtype) if need_dx else None
    want_w = weight is not None and (need_dw or (need_db and not rms))
    if m == 0 or n == 0:
        z = cupy.zeros(n, weight.dtype) if want_w else None
        return dx, (z if need_dw else None), (z.copy() if want_w and need_db and not rms else None)
    vec = vec_width(x.dtype, n, x, dy, weight, dx)
    rows_kernel, reduce, n_partial = _backward_prepared(x.dtype, None if weight is None else weight.dtype, m, n,
                                                        vec, rms, want_w, config, x.data.device_id)
    partial = cupy.cuda.alloc(n_partial * 2 * n * 4) if want_w else None
    rows_kernel(dy.data.ptr, x.data.ptr, _addr(weight), _addr(mean), rstd.data.ptr, _addr(dx),
                0 if partial is None else partial.ptr)
    dw = db = None
    if want_w:
        dw = cupy.ndarray((n,), weight.dtype)
        db = cupy.ndarray((n,), weight.dtype) if (need_db and not rms) else None
        reduce(partial.ptr, dw.data.ptr, _addr(db))
        if not need_dw:
            dw = None
    return dx, dw, db


@functools.cache
def _reduce_kernel(dtype, rms):
    return get_kernel("norm.cu", "norm_bwd_reduce", _opts(dtype, 1, 1, 32, 256, rms))


# ---------------------------------------------------------------- dispatch


def norm_forward(x, weight=None, bias=None, eps=1e-5, rms=False, config=None, out=None):
    """(y, mean, rstd) of LayerNorm (or RMSNorm) over the last axis of a 2-D array.
    ``config``: a ``rows.RowConfig`` (CUDA only; None picks the tuned plan). ``out`` (C-contiguous,
    x's shape and dtype) receives y and may be ``x`` itself (in place)."""
    if backend.is_cuda_array(x) and x.dtype != np.float64:
        return _norm_forward_cuda(x, weight, bias, eps, rms, config, out)
    y, mean, rstd = norm_forward_ref(x, weight, bias, eps, rms)
    if out is not None:
        out[...] = y
        y = out
    return y, mean, rstd


def norm_backward(dy, x, weight, mean, rstd, rms=False, need_dx=True, need_dw=True, need_db=True, config=None):
    """(dx, dw, db) of LayerNorm (or RMSNorm); entries not asked for are None.
    ``config``: a ``rows.RowConfig`` (CUDA only; None picks the tuned plan)."""
    if backend.is_cuda_array(x) and x.dtype != np.float64:
        return _norm_backward_cuda(dy, x, weight, mean, rstd, rms, need_dx, need_dw, need_db, config)
    return norm_backward_ref(dy, x, weight, mean, rstd, rms, need_dx, need_dw, need_db)
