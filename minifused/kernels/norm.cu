// LayerNorm and RMSNorm over the last dimension, forward and backward.
//
// Configuration (compile-time defines, chosen by norm.py per dtype and N):
//   MF_T    element type: float, __half, __nv_bfloat16
//   MF_VEC  elements per vector access (16 bytes / sizeof(T), or 1 when N or a
//        pointer is not aligned)
//   MF_K    vectors per thread in the register path (a row is kept in registers:
//        thread t of a row owns columns (t + k*TPR)*VEC .. +VEC-1, k < K)
//   MF_TPR  threads per row (a multiple of 32); NT threads per block, so a block
//        works on NT/TPR rows at a time
//   MF_RMS  1: RMSNorm (no mean, no bias), 0: LayerNorm
//   MF_ACC_SMEM  backward keeps its dw/db sums in shared memory (long rows)
//   MF_CLUSTER  backward: blocks per thread-block cluster (sm_90+) that add their
//        dw/db partial rows over distributed shared memory before writing one
//        row per cluster; 1 (no clusters) elsewhere
//   MF_PIPE  backward: prefetch the next row (see PIPE below)
//   MF_WB_SMEM  forward: w and b through shared memory (see WB_SMEM below)
//   MF_MINB  forward register path: blocks per SM it must fit (__launch_bounds__), so registers
//        do not cut the resident blocks below what a single wave needs (norm.py says where)
// Statistics and accumulation are fp32. mean/rstd are stored (fp32) for the
// backward. dw/db: every block accumulates its rows' contributions in
// registers and writes one fp32 row of partial sums to partial[block, 2, N]
// (with clusters: the cluster's blocks add theirs in rank order and write
// partial[cluster, 2, N], CLUSTER times fewer bytes to write and re-read);
// norm_bwd_reduce sums those rows in a fixed order (deterministic, no atomics).
//
// nvrtc-check: -DMF_T=float -DMF_VEC=4 -DMF_K=2 -DMF_TPR=128 -DMF_NT=256 -DMF_RMS=0
// nvrtc-check: -DMF_T=__half -DMF_VEC=8 -DMF_K=4 -DMF_TPR=512 -DMF_NT=512 -DMF_RMS=0 -DMF_ACC_SMEM=1
// nvrtc-check: -DMF_T=__nv_bfloat16 -DMF_VEC=1 -DMF_K=1 -DMF_TPR=32 -DMF_NT=256 -DMF_RMS=1
// nvrtc-check[sm_90]: -DMF_T=__half -DMF_VEC=8 -DMF_K=1 -DMF_TPR=128 -DMF_NT=512 -DMF_RMS=0 -DMF_CLUSTER=8
// nvrtc-check: -DMF_T=__half -DMF_VEC=8 -DMF_K=2 -DMF_TPR=128 -DMF_NT=512 -DMF_RMS=0 -DMF_PIPE=1 -DMF_WB_SMEM=1
// nvrtc-check: -DMF_T=float -DMF_VEC=4 -DMF_K=8 -DMF_TPR=32 -DMF_NT=128 -DMF_RMS=1 -DMF_WB_SMEM=1
// nvrtc-check: -DMF_T=__half -DMF_VEC=8 -DMF_K=2 -DMF_TPR=64 -DMF_NT=128 -DMF_RMS=0 -DMF_MINB=16
// nvrtc-check[sm_90]: -DMF_T=float -DMF_VEC=4 -DMF_K=2 -DMF_TPR=256 -DMF_NT=256 -DMF_RMS=1 -DMF_CLUSTER=8
// nvrtc-check[sm_90]: -DMF_T=__half -DMF_VEC=1 -DMF_K=2 -DMF_TPR=64 -DMF_NT=256 -DMF_RMS=0 -DMF_CLUSTER=2
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "cluster.cuh"  // CLUSTER (MF_CLUSTER), CLUSTER_DIMS, cluster_sync, load_cluster

#ifndef MF_T
#define MF_T float
#endif
#ifndef MF_VEC
#define MF_VEC 1
#endif
#ifndef MF_K
#define MF_K 1
#endif
#ifndef MF_TPR
#define MF_TPR 32
#endif
#ifndef MF_NT
#define MF_NT 256
#endif
#ifndef MF_RMS
#define MF_RMS 0
#endif
#ifndef MF_ACC_SMEM
#define MF_ACC_SMEM 0
#endif
#ifndef MF_PIPE
#define MF_PIPE 0
#endif
#ifndef MF_WB_SMEM
#define MF_WB_SMEM 0
#endif
#ifndef MF_MINB
#define MF_MINB 1
#endif
typedef MF_T T;
constexpr int VEC = MF_VEC, K = MF_K, TPR = MF_TPR, NT = MF_NT, RMS = MF_RMS;
// Backward: dw/db partial sums live in registers (0) or, for long rows, in
// shared memory (1: needs NT == TPR and 2*K*VEC*NT floats of dynamic smem).
constexpr int ACC_SMEM = MF_ACC_SMEM;
// Backward register path: 1 loads the block's next row (x, dy, mean, rstd) before working on this
// one, so its memory latency overlaps the reductions and stores, and keeps the thread's w vectors in
// registers; 0 loads each row, and w, where it is used (norm.py says when each is chosen).
constexpr int PIPE = MF_PIPE;
// Forward register path: 1 copies w and b into shared memory (cp.async, issued with the row loads) so
// the output loop does not wait on their loads after the reductions. Needs VEC * sizeof(T) == 16 and
// dynamic shared memory for them (N elements each).
constexpr int WB_SMEM = MF_WB_SMEM;
static_assert(!WB_SMEM || VEC * sizeof(T) == 16, "w/b staging copies 16-byte chunks");
static_assert(CLUSTER == 1 || !ACC_SMEM, "cluster partial sums start from registers");

constexpr int RPB = NT / TPR;  // rows per block
constexpr int WPR = TPR / 32;  // warps per row

#include "dtypes.cuh"  // to_f / from_f

#include "vec.cuh"  // Vec
#include "launch.cuh"  // pdl_entry
#include "reduce.cuh"  // warp_sum2
typedef Vec<T, VEC> VT;

__device__ __forceinline__ VT load_vec(const T* p) { return load_as<VT>(p); }
__device__ __forceinline__ void store_vec(T* p, const VT& a) { store_as(p, a); }

// A 16-byte global -> shared copy that needs no registers (cp.async, sm_80+), and its wait.
__device__ __forceinline__ void copy16_async(void* smem, const void* gmem) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"((unsigned)__cvta_generic_to_shared(smem)), "l"(gmem));
#else
    *reinterpret_cast<int4*>(smem) = *reinterpret_cast<const int4*>(gmem);
#endif
}
__device__ __forceinline__ void copy_async_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

// Sum of two values over the TPR threads of this thread's row. Every thread of the block must call it.
// One barrier: the warps' sums go to red[turn] and ``turn`` flips, so a buffer is written again only two
// calls later, after the barrier of the call in between (one buffer needs a second barrier per call).
__device__ __forceinline__ float2 row_sum2(float2 v, float2 (*red)[NT / 32], int& turn) {
    v = warp_sum2(v);
    if (WPR > 1) {
        float2* r = red[turn];
        turn ^= 1;
        const int warp = threadIdx.x >> 5, first = (warp / WPR) * WPR;
        if ((threadIdx.x & 31) == 0) r[warp] = v;
        __syncthreads();
        float2 s = make_float2(0.f, 0.f);
#pragma unroll
        for (int i = 0; i < WPR; ++i) { s.x += r[first + i].x; s.y += r[first + i].y; }
        v = s;
    }
    return v;
}

// ---------------------------------------------------------------- forward
// y = (x - mean) * rstd * w + b  (RMS: y = x * rstd * w). w, b may be null.
extern "C" __global__ void __launch_bounds__(NT, MF_MINB)
norm_fwd(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
         T* __restrict__ y, float* __restrict__ mean_out, float* __restrict__ rstd_out,
         int M, int N, float eps) {
    pdl_entry();
    __shared__ float2 red[2][NT / 32];
    int turn = 0;
    extern __shared__ __align__(16) unsigned char wb_smem[];  // WB_SMEM: w then b (those given)
    const int grp = threadIdx.x / TPR, t = threadIdx.x % TPR;
    const float inv_n = 1.f / (float)N;
    const T* ws = w;
    const T* bs = RMS ? nullptr : b;
    if (WB_SMEM) {
        T* sw = reinterpret_cast<T*>(wb_smem);
        T* sb = sw + (w ? N : 0);
        for (int c = threadIdx.x * VEC; c < N; c += NT * VEC) {
            if (w) copy16_async(sw + c, w + c);
            if (bs) copy16_async(sb + c, b + c);
        }
        if (w) ws = sw;
        if (bs) bs = sb;
    }
    bool staged = !WB_SMEM;
    for (long long r0 = (long long)blockIdx.x * RPB; r0 < M; r0 += (long long)gridDim.x * RPB) {
        const long long row = r0 + grp;
        const bool ok = row < M;
        const T* xr = x + row * N;
        VT xv[K];  // the row stays in registers, in its own type
        float s = 0.f;
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int c = (t + k * TPR) * VEC;
            if (ok && c < N) {
                xv[k] = load_vec(xr + c);
#pragma unroll
                for (int e = 0; e < VEC; ++e) s += to_f(xv[k].v[e]);
            }
        }
        float mu = 0.f;
        if (!RMS) mu = row_sum2(make_float2(s, 0.f), red, turn).x * inv_n;
        float q = 0.f;
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int c = (t + k * TPR) * VEC;
            if (ok && c < N) {
#pragma unroll
                for (int e = 0; e < VEC; ++e) { const float d = to_f(xv[k].v[e]) - mu; q += d * d; }
            }
        }
        const float rs = rsqrtf(row_sum2(make_float2(q, 0.f), red, turn).x * inv_n + eps);
        if (!staged) {  // the same for every thread of the block
            copy_async_wait();
            __syncthreads();
            staged = true;
        }
        if (ok) {
            T* yr = y + row * N;
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const int c = (t + k * TPR) * VEC;
                if (c < N) {
                    VT o, wv, bv;
                    if (w) wv = load_vec(ws + c);
                    if (!RMS && b) bv = load_vec(bs + c);
#pragma unroll
                    for (int e = 0; e < VEC; ++e) {
                        float r = (to_f(xv[k].v[e]) - mu) * rs;
                        if (w) r *= to_f(wv.v[e]);
                        if (!RMS && b) r += to_f(bv.v[e]);
                        o.v[e] = from_f<T>(r);
                    }
                    store_vec(yr + c, o);
                }
            }
            if (t == 0) {
                if (!RMS) mean_out[row] = mu;
                rstd_out[row] = rs;
            }
        }
    }
}

// Rows too long for registers: one row per block (TPR == NT), three passes
// over the row (mean, variance, output); the re-reads hit L2.
extern "C" __global__ void __launch_bounds__(NT)
norm_fwd_tiled(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
               T* __restrict__ y, float* __restrict__ mean_out, float* __restrict__ rstd_out,
               int M, int N, float eps) {
    pdl_entry();
    __shared__ float2 red[2][NT / 32];
    int turn = 0;
    const int t = threadIdx.x;
    const float inv_n = 1.f / (float)N;
    for (long long row = blockIdx.x; row < M; row += gridDim.x) {
        const T* xr = x + row * N;
        float mu = 0.f;
        if (!RMS) {
            float s = 0.f;
            for (int c = t * VEC; c < N; c += NT * VEC) {
                VT a = load_vec(xr + c);
#pragma unroll
                for (int e = 0; e < VEC; ++e) s += to_f(a.v[e]);
            }
            mu = row_sum2(make_float2(s, 0.f), red, turn).x * inv_n;
        }
        float q = 0.f;
        for (int c = t * VEC; c < N; c += NT * VEC) {
            VT a = load_vec(xr + c);
#pragma unroll
            for (int e = 0; e < VEC; ++e) { const float d = to_f(a.v[e]) - mu; q += d * d; }
        }
        const float rs = rsqrtf(row_sum2(make_float2(q, 0.f), red, turn).x * inv_n + eps);
        T* yr = y + row * N;
        for (int c = t * VEC; c < N; c += NT * VEC) {
            VT a = load_vec(xr + c), o, wv, bv;
            if (w) wv = load_vec(w + c);
            if (!RMS && b) bv = load_vec(b + c);
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
                float r = (to_f(a.v[e]) - mu) * rs;
                if (w) r *= to_f(wv.v[e]);
                if (!RMS && b) r += to_f(bv.v[e]);
                o.v[e] = from_f<T>(r);
            }
            store_vec(yr + c, o);
        }
        if (t == 0) {
            if (!RMS) mean_out[row] = mu;
            rstd_out[row] = rs;
        }
    }
}

// ---------------------------------------------------------------- backward
// dw/db partial sums move in units of U floats (16 bytes where a vector holds a multiple of 4 elements).
// A row group stages its sums as a partial row in column order, dw then db, each padded to K*VEC*TPR
// columns: UPG units in all.
constexpr int U = VEC % 4 == 0 ? 4 : 1;
constexpr int UPG = 2 * K * VEC * TPR / U;
typedef Vec<float, U> UT;
__device__ __forceinline__ UT acc_unit(const float* a, int h) {
    UT u;
#pragma unroll
    for (int e = 0; e < U; ++e) u.v[e] = a[h * U + e];
    return u;
}

// xhat = (x - mean) * rstd, g = dy * w,
// dx = rstd * (g - xhat * mean(xhat * g) - mean(g))      (RMS: no mean(g) term)
// partial[block, 0, :] = sum over the block's rows of dy * xhat   (-> dw)
// partial[block, 1, :] = sum over the block's rows of dy          (-> db)
// dx may be null (no input grad wanted); partial may be null (no weight grad).
// Dynamic shared memory: 2*K*VEC*NT floats with ACC_SMEM, RPB > 1 or CLUSTER > 1, else none.
// With CLUSTER > 1 the grid is a multiple of CLUSTER and partial has gridDim.x / CLUSTER rows.
extern "C" __global__ void CLUSTER_DIMS __launch_bounds__(NT)
norm_bwd(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ w,
         const float* __restrict__ mean, const float* __restrict__ rstd,
         T* __restrict__ dx, float* __restrict__ partial, int M, int N) {
    pdl_entry();
    __shared__ float2 red[2][NT / 32];
    int turn = 0;
    extern __shared__ __align__(16) float sacc[];
    const int grp = threadIdx.x / TPR, t = threadIdx.x % TPR;
    const float inv_n = 1.f / (float)N;
    constexpr int RA = ACC_SMEM ? 1 : K;  // register accumulators
    float aw[RA][VEC], ab[RA][VEC];
    // smem accumulator j of this thread (j = k*VEC + e) at sacc[j*NT + t]: conflict-free
#pragma unroll
    for (int k = 0; k < RA; ++k)
#pragma unroll
        for (int e = 0; e < VEC; ++e) { aw[k][e] = 0.f; ab[k][e] = 0.f; }
    if (ACC_SMEM && partial)
        for (int j = 0; j < 2 * K * VEC; ++j) sacc[j * NT + t] = 0.f;
    // This thread's columns, hence its w vectors, are the same in every row it visits (PIPE: kept).
    VT wk[PIPE ? K : 1];
#pragma unroll
    for (int k = 0; k < (PIPE ? K : 0); ++k) {
        const int c = (t + k * TPR) * VEC;
        if (w && c < N) wk[k] = load_vec(w + c);
    }
    auto w_vec = [&](int k, int c) { VT v; if (w) v = PIPE ? wk[PIPE ? k : 0] : load_vec(w + c); return v; };
    // Row `row`'s x, dy, mean and rstd (nothing for rows past the end).
    auto fetch = [&](long long row, VT* xa, VT* ga, float& mu, float& rs) {
        if (row >= M) return;
        if (!RMS) mu = mean[row];
        rs = rstd[row];
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int c = (t + k * TPR) * VEC;
            if (c < N) {
                xa[k] = load_vec(x + row * N + c);
                ga[k] = load_vec(dy + row * N + c);
            }
        }
    };
    const long long step = (long long)gridDim.x * RPB;
    VT xv[K], gv[K];
    float mu = 0.f, rs = 0.f;
    if (PIPE) fetch((long long)blockIdx.x * RPB + grp, xv, gv, mu, rs);
    for (long long r0 = (long long)blockIdx.x * RPB; r0 < M; r0 += step) {
        const long long row = r0 + grp;
        const bool ok = row < M;
        VT xn[K], gn[K];  // the next row (PIPE)
        float mun = 0.f, rsn = 0.f;
        if (PIPE) fetch(row + step, xn, gn, mun, rsn);
        else fetch(row, xv, gv, mu, rs);
        float2 s = make_float2(0.f, 0.f);  // sum(xhat * g), sum(g)
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int c = (t + k * TPR) * VEC;
            if (ok && c < N) {
                const VT wv = w_vec(k, c);
#pragma unroll
                for (int e = 0; e < VEC; ++e) {
                    const float xh = (to_f(xv[k].v[e]) - mu) * rs;
                    const float d = to_f(gv[k].v[e]);
                    const float g = w ? d * to_f(wv.v[e]) : d;
                    s.x += xh * g;
                    s.y += g;
                    if (ACC_SMEM) {
                        if (partial) {
                            sacc[(k * VEC + e) * NT + t] += d * xh;
                            if (!RMS) sacc[(K * VEC + k * VEC + e) * NT + t] += d;
                        }
                    } else {
                        aw[ACC_SMEM ? 0 : k][e] += d * xh;
                        ab[ACC_SMEM ? 0 : k][e] += d;
                    }
                }
            }
        }
        s = row_sum2(s, red, turn);
        const float c1 = s.x * inv_n, c2 = RMS ? 0.f : s.y * inv_n;
        if (ok && dx) {
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const int c = (t + k * TPR) * VEC;
                if (c < N) {
                    VT o;
                    const VT wv = w_vec(k, c);
#pragma unroll
                    for (int e = 0; e < VEC; ++e) {
                        const float xh = (to_f(xv[k].v[e]) - mu) * rs;
                        const float d = to_f(gv[k].v[e]);
                        const float g = w ? d * to_f(wv.v[e]) : d;
                        o.v[e] = from_f<T>(rs * (g - xh * c1 - c2));
                    }
                    store_vec(dx + row * N + c, o);
                }
            }
        }
        if (PIPE) {
#pragma unroll
            for (int k = 0; k < K; ++k) { xv[k] = xn[k]; gv[k] = gn[k]; }
            mu = mun;
            rs = rsn;
        }
    }
    if (!partial) return;  // null for every block or for none, so all blocks reach the barriers below
    float* pc = partial + (long long)(blockIdx.x / CLUSTER) * 2 * N;
    if (ACC_SMEM) {
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int c = (t + k * TPR) * VEC;
            if (c < N) {
#pragma unroll
                for (int e = 0; e < VEC; ++e) {
                    pc[c + e] = sacc[(k * VEC + e) * NT + t];
                    pc[N + c + e] = RMS ? 0.f : sacc[(K * VEC + k * VEC + e) * NT + t];
                }
            }
        }
        return;
    }
    if (RPB == 1 && CLUSTER == 1) {  // the block's one row group writes its sums directly
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int c = (t + k * TPR) * VEC;
            if (c < N) {
#pragma unroll
                for (int h = 0; h < VEC / U; ++h) {
                    store_as(pc + c + h * U, acc_unit(aw[ACC_SMEM ? 0 : k], h));
                    store_as(pc + N + c + h * U, acc_unit(ab[ACC_SMEM ? 0 : k], h));
                }
            }
        }
        return;
    }
    // Several row groups, or a cluster: every group stages its sums in shared memory (group g's at su[g * UPG]),
    // then unit j is summed over the cluster's blocks in rank order and, within each, over the row groups
    // in order (deterministic), and stored: consecutive threads on consecutive units, whole 32-byte sectors.
    // Measured faster than adding the groups one after another into one row (bench/norms.py times it).
    UT* su = reinterpret_cast<UT*>(sacc);
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
        for (int h = 0; h < VEC / U; ++h) {
            const int cu = ((t + k * TPR) * VEC) / U + h;  // unit of column (t + k*TPR)*VEC + h*U
            su[grp * UPG + cu] = acc_unit(aw[ACC_SMEM ? 0 : k], h);
            su[grp * UPG + UPG / 2 + cu] = acc_unit(ab[ACC_SMEM ? 0 : k], h);
        }
    if (CLUSTER > 1) cluster_sync(); else __syncthreads();
    // Block `rank` of a cluster sums units [lo, hi) (all of them without clusters).
    constexpr int CHUNK = (UPG + CLUSTER - 1) / CLUSTER;
    const int lo = (int)cluster_rank() * CHUNK, hi = min(UPG, lo + CHUNK);
    const unsigned base = (unsigned)__cvta_generic_to_shared(su);
    for (int j = lo + threadIdx.x; j < hi; j += NT) {
        const int which = j / (UPG / 2), c = (j % (UPG / 2)) * U;
        if (c >= N) continue;
        UT s;
#pragma unroll
        for (int e = 0; e < U; ++e) s.v[e] = 0.f;
        for (int q = 0; q < CLUSTER; ++q)
#pragma unroll
            for (int g = 0; g < RPB; ++g) {
                const UT a = CLUSTER > 1 ? load_cluster<UT>(base + (unsigned)sizeof(UT) * (g * UPG + j), q)
                                         : su[g * UPG + j];
#pragma unroll
                for (int e = 0; e < U; ++e) s.v[e] += a.v[e];
            }
        store_as(pc + which * N + c, s);
    }
    if (CLUSTER > 1) cluster_sync();  // no block exits while another still reads its shared memory
}

// Rows too long for registers: one row per block; two passes over the row,
// the block's dw/db partial row is accumulated in place in global memory
// (each block owns its row of partial, so there are no races).
extern "C" __global__ void __launch_bounds__(NT)
norm_bwd_tiled(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ w,
               const float* __restrict__ mean, const float* __restrict__ rstd,
               T* __restrict__ dx, float* __restrict__ partial, int M, int N) {
    pdl_entry();
    __shared__ float2 red[2][NT / 32];
    int turn = 0;
    const int t = threadIdx.x;
    const float inv_n = 1.f / (float)N;
    float* pw = partial ? partial + (long long)blockIdx.x * 2 * N : nullptr;
    for (long long row = blockIdx.x; row < M; row += gridDim.x) {
        const bool first = row == blockIdx.x;
        const T* xr = x + row * N;
        const T* dr = dy + row * N;
        const float mu = RMS ? 0.f : mean[row], rs = rstd[row];
        float2 s = make_float2(0.f, 0.f);
        for (int c = t * VEC; c < N; c += NT * VEC) {
            VT a = load_vec(xr + c), d = load_vec(dr + c), wv;
            if (w) wv = load_vec(w + c);
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
                const float xh = (to_f(a.v[e]) - mu) * rs;
                const float g = w ? to_f(d.v[e]) * to_f(wv.v[e]) : to_f(d.v[e]);
                s.x += xh * g;
                s.y += g;
            }
        }
        s = row_sum2(s, red, turn);
        const float c1 = s.x * inv_n, c2 = RMS ? 0.f : s.y * inv_n;
        for (int c = t * VEC; c < N; c += NT * VEC) {
            VT a = load_vec(xr + c), d = load_vec(dr + c), wv, o;
            if (w) wv = load_vec(w + c);
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
                const float xh = (to_f(a.v[e]) - mu) * rs;
                const float dd = to_f(d.v[e]);
                const float g = w ? dd * to_f(wv.v[e]) : dd;
                o.v[e] = from_f<T>(rs * (g - xh * c1 - c2));
                if (pw) {
                    pw[c + e] = first ? dd * xh : pw[c + e] + dd * xh;
                    pw[N + c + e] = first ? dd : pw[N + c + e] + dd;
                }
            }
            if (dx) store_vec(dx + row * N + c, o);
        }
    }
}

// dw[c] = sum_s partial[s, 0, c], db[c] = sum_s partial[s, 1, c], summed in a
// fixed order. Block (32, 32): 32 columns; thread row ty sums partial rows
// ty, ty+32, ... in four independent accumulators (four loads in flight: the
// partial rows are few and short, so this pass is latency-bound), then the 32
// thread rows are added in order. db may be null.
extern "C" __global__ void __launch_bounds__(1024)
norm_bwd_reduce(const float* __restrict__ partial, int S, int N, T* __restrict__ dw, T* __restrict__ db) {
    pdl_entry();
    __shared__ float sm[32][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int col = blockIdx.x * 32 + tx;  // over 2N columns: [0, N) -> dw, [N, 2N) -> db
    const long long stride = 2LL * N;
    float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
    if (col < 2 * N) {
        int r = ty;
        for (; r + 96 < S; r += 128) {
            a0 += partial[r * stride + col];
            a1 += partial[(r + 32) * stride + col];
            a2 += partial[(r + 64) * stride + col];
            a3 += partial[(r + 96) * stride + col];
        }
        for (; r < S; r += 32) a0 += partial[r * stride + col];
    }
    sm[ty][tx] = (a0 + a1) + (a2 + a3);
    __syncthreads();
    if (ty == 0 && col < 2 * N) {
        float tot = 0.f;
#pragma unroll
        for (int i = 0; i < 32; ++i) tot += sm[i][tx];
        if (col < N) dw[col] = from_f<T>(tot);
        else if (db) db[col - N] = from_f<T>(tot);
    }
}
