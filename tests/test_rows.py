"""The row-kernel planner (``kernels.rows``) gives LayerNorm, softmax and cross-entropy the launch
configurations they had before it was shared: tuned on an H100, bench/results/norms.json depends on
them. The reference is a frozen copy of the plan functions as they were in kernels/norm.py and
kernels/softmax.py (kernel lookups replaced by their (name, options)); no GPU is needed."""
import itertools

import numpy as np
import pytest

from minifused import backend
from minifused.kernels import norm as KN
from minifused.kernels import rows
from minifused.kernels import softmax as KS

SM, BPS = 132, 3  # stand-ins for the device's SM count and a tiled kernel's resident blocks per SM
DTYPES = [np.dtype(np.float32), np.dtype(np.float16), backend.bfloat16]
NS = sorted(set(range(1, 130, 3)) | set(range(130, 4200, 61)) | {
    256, 512, 768, 1000, 1024, 1536, 2048, 2049, 3072, 4096, 4097, 5000, 6144, 8192, 9216, 12288, 16384,
    16385, 20000, 24576, 32768, 32769, 65536, 131072})
MS = [1, 3, 64, 4095, 4096, 100_000]


# ---------------------------------------------------------------- the frozen plans


def _ceil(a, b):
    return -(-a // b)


def _ctype(dtype):
    return {"float32": "float", "float16": "__half", "bfloat16": "__nv_bfloat16"}[np.dtype(dtype).name]


def old_row_plan(n, vec, ept_max, tpr_pref=256, tpr_max=1024, tpr_small=None):
    nvec = _ceil(n, vec)
    for limit in sorted({tpr_pref, 512, tpr_max} | ({tpr_small} if tpr_small else set())):
        k = 1
        while k * vec <= ept_max:
            tpr = _ceil(_ceil(nvec, k), 32) * 32
            if tpr <= limit:
                return k, tpr
            k *= 2
    return None


def old_narrow_plan(n, vec, ept_max, ept_warp=None):
    nvec = _ceil(n, vec)
    if ept_warp and nvec <= 32 * (ept_warp // vec):
        return _ceil(nvec, 32), 32
    k = max(1, min(ept_max // vec, _ceil(nvec, 32)))
    tpr = _ceil(_ceil(nvec, k), 32) * 32
    return (k, tpr) if tpr <= 1024 else None


def old_norm_opts(dtype, vec, k, tpr, nt, rms, acc_smem=0, cluster=1, pipe=0, wb_smem=0, minb=1):
    return (f"-DMF_T={_ctype(dtype)}", f"-DMF_VEC={vec}", f"-DMF_K={k}", f"-DMF_TPR={tpr}",
            f"-DMF_NT={nt}", f"-DMF_RMS={int(rms)}", f"-DMF_ACC_SMEM={acc_smem}", f"-DMF_CLUSTER={cluster}",
            f"-DMF_PIPE={pipe}", f"-DMF_WB_SMEM={wb_smem}", f"-DMF_MINB={minb}")


def old_wb_smem(dtype, n, vec, k, rows_per_block):
    itemsize = np.dtype(dtype).itemsize
    return int(vec * itemsize == 16 and k >= 8 and rows_per_block >= 4 and 2 * n * itemsize <= 16 * 1024)


def old_norm_forward(dtype, n, vec, rms, pdl):
    """((name, options), threads per block, rows per block, block cap, w/b staged, options if it spills)"""
    plan = old_narrow_plan(n, vec, ept_max=32, ept_warp=64 if np.dtype(dtype).itemsize == 2 and vec > 1 else None)
    if plan is None:
        nt = 1024
        return ("norm_fwd_tiled", old_norm_opts(dtype, vec, 1, nt, nt, rms)), nt, 1, SM * BPS, 0, None
    k, tpr = plan
    minb = 1
    if tpr == 32 and 3 <= k <= 4:
        k, tpr, nt, minb = 2, 64, 128, 2048 // 128
    else:
        nt = (32 if pdl else 64) if tpr == 32 and k <= 2 else max(1, 128 // tpr) * tpr
    wb = old_wb_smem(dtype, n, vec, k, nt // tpr)
    spill = old_norm_opts(dtype, vec, k, tpr, nt, rms, wb_smem=wb) if minb > 1 else None
    return ("norm_fwd", old_norm_opts(dtype, vec, k, tpr, nt, rms, wb_smem=wb, minb=minb)), nt, nt // tpr, 1 << 30, wb, spill


def old_norm_backward(dtype, n, vec, rms, want_w, clusters):
    """((name, options), threads per block, rows per block, dynamic smem, blocks per cluster)"""
    plan = old_row_plan(n, vec, ept_max=32 if np.dtype(dtype).itemsize < 4 else 16, tpr_pref=256)
    if np.dtype(dtype).itemsize == 2 and vec > 1 and _ceil(n, vec) <= 512:
        plan = 1, _ceil(_ceil(n, vec), 32) * 32
    smem, cluster = 0, 1
    if plan is not None:
        k, tpr = plan
        acc_smem = 0
        nt = max(1, 512 // tpr) * tpr
    if plan is not None and want_w:
        staged = 2 * k * vec * nt * 4
        if clusters and nt == tpr and not acc_smem and staged <= 200 * 1024:
            cluster = 2
        if acc_smem or nt > tpr or cluster > 1:
            smem = staged
        if smem > 200 * 1024:
            plan = None
    if plan is None:
        nt = 1024
        return ("norm_bwd_tiled", old_norm_opts(dtype, vec, 1, nt, nt, rms)), nt, 1, 0, 1
    pipe = int(k == 1 and not acc_smem)
    return ("norm_bwd", old_norm_opts(dtype, vec, k, tpr, nt, rms, acc_smem, cluster, pipe)), nt, nt // tpr, smem, cluster


def old_softmax_opts(dtype, vec=1, k=1, tpr=32, nt=256, log=False, tt=None):
    o = (f"-DMF_T={_ctype(dtype)}", f"-DMF_VEC={vec}", f"-DMF_K={k}", f"-DMF_TPR={tpr}",
         f"-DMF_NT={nt}", f"-DMF_LOG={int(log)}")
    if tt is not None:
        o += ("-DMF_TT=" + ("int" if np.dtype(tt).itemsize == 4 else "long"),)
    return o


def old_softmax(name, dtype, n, vec, log):
    """((name, options), threads per block, rows per block, block cap)"""
    ept_max = 32 if name == "softmax_fwd" or np.dtype(dtype).itemsize < 4 else 16
    plan = old_row_plan(n, vec, ept_max=ept_max, tpr_small=64 if name == "softmax_fwd" else None)
    if plan is None:
        nt = 1024
        return (name + "_tiled", old_softmax_opts(dtype, vec, 1, nt, nt, log)), nt, 1, SM * BPS
    k, tpr = plan
    nt = 128 if name == "softmax_fwd" and tpr == 64 else max(1, 256 // tpr) * tpr
    return (name, old_softmax_opts(dtype, vec, k, tpr, nt, log)), nt, nt // tpr, 1 << 30


def old_cross_entropy_forward(dtype, n, vec, tt):
    """(options, rows per block, threads per block)"""
    nvec = _ceil(n, vec)
    tpr = 32 if nvec <= 256 else (256 if nvec <= 4096 else 1024)
    nt = max(1, 256 // tpr) * tpr
    return old_softmax_opts(dtype, vec, 1, tpr, nt, tt=tt), nt // tpr, nt


# ---------------------------------------------------------------- the comparisons


def _cap(plan):
    return SM * BPS if plan.persistent else rows.UNBOUNDED


def _cases():
    for dtype, n in itertools.product(DTYPES, NS):
        for vec in sorted({1, 16 // dtype.itemsize}):
            if n % vec == 0:
                yield dtype, n, vec


@pytest.mark.parametrize("pdl", [False, True])
@pytest.mark.parametrize("rms", [False, True])
def test_norm_forward_plans_unchanged(rms, pdl):
    for dtype, n, vec in _cases():
        kern, nt, rpb, cap, wb, spill = old_norm_forward(dtype, n, vec, rms, pdl)
        plan = KN._forward_plan(dtype, n, vec, rms, None, pdl)
        got_wb = 0 if plan.persistent else KN._wb_smem(dtype, n, vec, plan.k, plan.rows)
        got = (plan.name, plan.options), plan.nt, plan.rows, _cap(plan), got_wb, plan.fallback or None
        assert got == (kern, nt, rpb, cap, wb, spill), (dtype, n, vec)
        for m in MS:
            assert rows.row_blocks(m, plan.rows, _cap(plan)) == min(_ceil(m, rpb), cap)


@pytest.mark.parametrize("clusters", [False, True])
@pytest.mark.parametrize("want_w", [False, True])
@pytest.mark.parametrize("rms", [False, True])
def test_norm_backward_plans_unchanged(rms, want_w, clusters):
    resident = 60  # stand-in for the clusters that fit at once
    for dtype, n, vec in _cases():
        kern, nt, rpb, smem, cluster = old_norm_backward(dtype, n, vec, rms, want_w, clusters)
        plan = KN._backward_plan(dtype, n, vec, rms, want_w, clusters)
        assert plan.persistent
        assert ((plan.name, plan.options), plan.nt, plan.rows, plan.smem, plan.cluster) == (kern, nt, rpb, smem,
                                                                                            cluster), (dtype, n, vec)
        for m in MS:
            if cluster > 1:  # the launch's grid (kernels/norm.py), against the old formula
                got = rows.row_blocks(m, plan.rows * cluster, resident) * cluster
                assert got == min(_ceil(_ceil(m, rpb), cluster), resident) * cluster
            else:
                assert rows.row_blocks(m, plan.rows, SM * BPS) == min(_ceil(m, rpb), SM * BPS)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("name", ["softmax_fwd", "softmax_bwd"])
def test_softmax_plans_unchanged(name, log):
    for dtype, n, vec in _cases():
        plan = KS._softmax_plan(name, dtype, n, vec, log)
        assert ((plan.name, plan.options), plan.nt, plan.rows, _cap(plan)) == old_softmax(name, dtype, n, vec, log)


@pytest.mark.parametrize("tt", [np.dtype(np.int32), np.dtype(np.int64)])
def test_cross_entropy_plans_unchanged(tt):
    for dtype, n, vec in _cases():
        plan = KS._cross_entropy_forward_plan(dtype, n, vec, tt)
        assert plan.name == "cross_entropy_fwd"
        assert (plan.options, plan.rows, plan.nt) == old_cross_entropy_forward(dtype, n, vec, tt)
        assert KS._opts(dtype, vec, tt=tt) == old_softmax_opts(dtype, vec, tt=tt)  # the backward's
        for m in MS:
            rpb = plan.rows
            assert rows.row_blocks(m, rpb, KS.CROSS_ENTROPY_GRID_MAX) == min(_ceil(m, rpb), 8192)
            assert rows.row_blocks(m, rpb, rows.UNBOUNDED) == _ceil(m, rpb)


def test_forced_configs():
    """A RowConfig forces the register-path shape (benchmark sweeps, tests)."""
    dt = np.dtype(np.float16)
    fwd = KN._forward_plan(dt, 1000, 8, False, rows.RowConfig(2, 64, 128, 16))
    assert (fwd.k, fwd.tpr, fwd.nt, fwd.fallback) == (2, 64, 128, ())
    assert "-DMF_MINB=16" in fwd.options
    bwd = KN._backward_plan(dt, 4096, 8, False, True, False, rows.RowConfig(4, 128, 128, acc_smem=1))
    assert (bwd.k, bwd.tpr, bwd.nt, bwd.smem) == (4, 128, 128, 2 * 4 * 8 * 128 * 4)
    assert "-DMF_ACC_SMEM=1" in bwd.options and "-DMF_PIPE=0" in bwd.options
    sm = KS._softmax_plan("softmax_fwd", dt, 2048, 8, True, rows.RowConfig(4, 64, 256))
    assert (sm.name, sm.k, sm.tpr, sm.nt, sm.persistent) == ("softmax_fwd", 4, 64, 256, False)
