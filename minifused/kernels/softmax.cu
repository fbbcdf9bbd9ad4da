// Softmax / LogSoftmax over the last dimension (forward, backward), fused
// softmax-cross-entropy (forward: loss and logsumexp per row; backward: the
// logits gradient in one pass), NLL on log-probabilities.
//
// Configuration (compile-time defines, chosen by softmax.py):
//   MF_T    element type: float, __half, __nv_bfloat16
//   MF_VEC  elements per vector access (16 bytes / sizeof(T), or 1)
//   MF_K    vectors per thread in the register path
//   MF_TPR  threads per row (a multiple of 32); MF_NT threads per block
//   MF_LOG  1: log-softmax, 0: softmax
//   MF_TT   target index type (int or long, as the targets), cross-entropy / NLL
// Row statistics are fp32: every thread keeps a running (max, sum of
// exp(x - max)) pair that rows combine; exp(-inf - -inf) is never evaluated
// in those sums, so rows holding -inf are exact. A row of all -inf gives NaN
// (softmax, log-softmax, cross-entropy), as PyTorch does.
//
// nvrtc-check: -DMF_T=float -DMF_VEC=4 -DMF_K=2 -DMF_TPR=128 -DMF_NT=256 -DMF_LOG=0 -DMF_TT=long
// nvrtc-check: -DMF_T=__half -DMF_VEC=8 -DMF_K=4 -DMF_TPR=512 -DMF_NT=512 -DMF_LOG=1 -DMF_TT=int
// nvrtc-check: -DMF_T=__nv_bfloat16 -DMF_VEC=1 -DMF_K=1 -DMF_TPR=32 -DMF_NT=256 -DMF_LOG=0
#include <cuda_fp16.h>
#include <cuda_bf16.h>

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
#ifndef MF_LOG
#define MF_LOG 0
#endif
#ifndef MF_TT
#define MF_TT long
#endif
typedef MF_T T;
typedef MF_TT TT;
constexpr int VEC = MF_VEC, K = MF_K, TPR = MF_TPR, NT = MF_NT, LOG = MF_LOG;
constexpr int RPB = NT / TPR;  // rows per block
constexpr int WPR = TPR / 32;  // warps per row
#define NEG_INF __int_as_float(0xff800000)

#include "dtypes.cuh"  // to_f / from_f

#include "vec.cuh"  // Vec
#include "launch.cuh"  // pdl_entry
#include "reduce.cuh"  // warp_sum2
typedef Vec<T, VEC> VT;

__device__ __forceinline__ VT load_vec(const T* p) { return load_as<VT>(p); }
__device__ __forceinline__ void store_vec(T* p, const VT& a) { store_as(p, a); }

// (max, sum exp(x - max)) pairs: combine without ever computing -inf - -inf.
__device__ __forceinline__ float2 ms_combine(float2 a, float2 b) {
    const float m = fmaxf(a.x, b.x);
    float s = 0.f;
    if (a.x != NEG_INF) s += a.y * __expf(a.x - m);
    if (b.x != NEG_INF) s += b.y * __expf(b.x - m);
    return make_float2(m, s);
}
struct MaxSum { __device__ float2 operator()(float2 a, float2 b) const { return ms_combine(a, b); } };
struct Sum2 { __device__ float2 operator()(float2 a, float2 b) const { return make_float2(a.x + b.x, a.y + b.y); } };

// Reduce over the TPR threads of this thread's row; every thread of the block
// must call it (it may contain barriers).
template <typename Op>
__device__ __forceinline__ float2 row_reduce(float2 v, float2* red, Op op) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float2 u;
        u.x = __shfl_xor_sync(0xffffffffu, v.x, o);
        u.y = __shfl_xor_sync(0xffffffffu, v.y, o);
        v = op(v, u);
    }
    if (WPR > 1) {
        const int warp = threadIdx.x >> 5, first = (warp / WPR) * WPR;
        if ((threadIdx.x & 31) == 0) red[warp] = v;
        __syncthreads();
        float2 s = red[first];
#pragma unroll
        for (int i = 1; i < WPR; ++i) s = op(s, red[first + i]);
        __syncthreads();
        v = s;
    }
    return v;
}

// Fold VEC values into a thread's running (max, sum) pair.
__device__ __forceinline__ float2 ms_fold(float2 acc, const VT& a) {
    float m = acc.x;
#pragma unroll
    for (int e = 0; e < VEC; ++e) m = fmaxf(m, to_f(a.v[e]));
    if (m == NEG_INF) return acc;  // nothing but -inf so far
    float s = acc.x == NEG_INF ? 0.f : acc.y * __expf(acc.x - m);
#pragma unroll
    for (int e = 0; e < VEC; ++e) s += __expf(to_f(a.v[e]) - m);  // exp(-inf - finite) = 0
    return make_float2(m, s);
}

__device__ __forceinline__ float softmax_out(float x, float m, float s, float inv_s, float log_s) {
    return LOG ? (x - m) - log_s : __expf(x - m) * inv_s;
}

// ---------------------------------------------------------------- softmax forward
extern "C" __global__ void __launch_bounds__(NT)
softmax_fwd(const T* __restrict__ x, T* __restrict__ y, int M, int N) {
    pdl_entry();
    __shared__ float2 red[NT / 32];
    const int grp = threadIdx.x / TPR, t = threadIdx.x % TPR;
    for (long long r0 = (long long)blockIdx.x * RPB; r0 < M; r0 += (long long)gridDim.x * RPB) {
        const long long row = r0 + grp;
        const bool ok = row < M;
        VT xv[K];
        float2 ms = make_float2(NEG_INF, 0.f);
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int c = (t + k * TPR) * VEC;
            if (ok && c < N) xv[k] = load_vec(x + row * N + c);
        }
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int c = (t + k * TPR) * VEC;
            if (ok && c < N) ms = ms_fold(ms, xv[k]);
        }
        ms = row_reduce(ms, red, MaxSum());
        const float inv_s = 1.f / ms.y, log_s = logf(ms.y);  // once a row: the accurate log
        if (ok) {
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const int c = (t + k * TPR) * VEC;
                if (c < N) {
                    VT o;
#pragma unroll
                    for (int e = 0; e < VEC; ++e) o.v[e] = from_f<T>(softmax_out(to_f(xv[k].v[e]), ms.x, ms.y, inv_s, log_s));
                    store_vec(y + row * N + c, o);
                }
            }
        }
    }
}

// Long rows (online softmax): one pass for (max, sum), one pass to write.
extern "C" __global__ void __launch_bounds__(NT)
softmax_fwd_tiled(const T* __restrict__ x, T* __restrict__ y, int M, int N) {
    pdl_entry();
    __shared__ float2 red[NT / 32];
    const int t = threadIdx.x;
    for (long long row = blockIdx.x; row < M; row += gridDim.x) {
        const T* xr = x + row * N;
        float2 ms = make_float2(NEG_INF, 0.f);
        for (int c = t * VEC; c < N; c += NT * VEC) ms = ms_fold(ms, load_vec(xr + c));
        ms = row_reduce(ms, red, MaxSum());
        const float inv_s = 1.f / ms.y, log_s = logf(ms.y);  // once a row: the accurate log
        for (int c = t * VEC; c < N; c += NT * VEC) {
            VT a = load_vec(xr + c), o;
#pragma unroll
            for (int e = 0; e < VEC; ++e) o.v[e] = from_f<T>(softmax_out(to_f(a.v[e]), ms.x, ms.y, inv_s, log_s));
            store_vec(y + row * N + c, o);
        }
    }
}

// ---------------------------------------------------------------- softmax backward
// softmax:     dx = y * (dy - sum(dy * y))
// log-softmax: dx = dy - exp(y) * sum(dy)
__device__ __forceinline__ float bwd_term(float y, float g) { return LOG ? g : g * y; }
__device__ __forceinline__ float bwd_out(float y, float g, float dot) {
    return LOG ? g - __expf(y) * dot : y * (g - dot);
}

extern "C" __global__ void __launch_bounds__(NT)
softmax_bwd(const T* __restrict__ dy, const T* __restrict__ y, T* __restrict__ dx, int M, int N) {
    __shared__ float2 red[NT / 32];
    const int grp = threadIdx.x / TPR, t = threadIdx.x % TPR;
    for (long long r0 = (long long)blockIdx.x * RPB; r0 < M; r0 += (long long)gridDim.x * RPB) {
        const long long row = r0 + grp;
        const bool ok = row < M;
        VT yv[K], gv[K];
        float dot = 0.f;
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int c = (t + k * TPR) * VEC;
            if (ok && c < N) { yv[k] = load_vec(y + row * N + c); gv[k] = load_vec(dy + row * N + c); }
        }
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int c = (t + k * TPR) * VEC;
            if (ok && c < N) {
#pragma unroll
                for (int e = 0; e < VEC; ++e) dot += bwd_term(to_f(yv[k].v[e]), to_f(gv[k].v[e]));
            }
        }
        dot = row_reduce(make_float2(dot, 0.f), red, Sum2()).x;
        if (ok) {
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const int c = (t + k * TPR) * VEC;
                if (c < N) {
                    VT o;
#pragma unroll
                    for (int e = 0; e < VEC; ++e) o.v[e] = from_f<T>(bwd_out(to_f(yv[k].v[e]), to_f(gv[k].v[e]), dot));
                    store_vec(dx + row * N + c, o);
                }
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(NT)
softmax_bwd_tiled(const T* __restrict__ dy, const T* __restrict__ y, T* __restrict__ dx, int M, int N) {
    __shared__ float2 red[NT / 32];
    const int t = threadIdx.x;
    for (long long row = blockIdx.x; row < M; row += gridDim.x) {
        const T* yr = y + row * N;
        const T* gr = dy + row * N;
        float dot = 0.f;
        for (int c = t * VEC; c < N; c += NT * VEC) {
            VT a = load_vec(yr + c), g = load_vec(gr + c);
#pragma unroll
            for (int e = 0; e < VEC; ++e) dot += bwd_term(to_f(a.v[e]), to_f(g.v[e]));
        }
        dot = row_reduce(make_float2(dot, 0.f), red, Sum2()).x;
        for (int c = t * VEC; c < N; c += NT * VEC) {
            VT a = load_vec(yr + c), g = load_vec(gr + c), o;
#pragma unroll
            for (int e = 0; e < VEC; ++e) o.v[e] = from_f<T>(bwd_out(to_f(a.v[e]), to_f(g.v[e]), dot));
            store_vec(dx + row * N + c, o);
        }
    }
}

// ---------------------------------------------------------------- cross-entropy
// Sum of a float2 over the block; every thread calls it, thread 0 gets the result (warps' sums added in
// order: deterministic). ``part``: NT / 32 shared float2, not read again before a barrier.
__device__ __forceinline__ float2 block_sum2(float2 v, float2* part) {
    v = warp_sum2(v);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x == 0)
        for (int i = 1; i < NT / 32; ++i) { v.x += part[i].x; v.y += part[i].y; }
    return v;
}

// The 'sum' / 'mean' of a loss inside the kernel that computes its rows (no second launch, whose host
// time would sit between a training step's forward and backward). ``mine``: this thread's share of
// (sum of losses, sum of row weights). Each block writes its sums to partial[block] and counts itself
// in *ticket; the block that counts last adds the gridDim.x partials in a fixed order, so the result
// does not depend on which block that is (softmax.py bounds the grid, so this is short). atomicInc
// wraps *ticket back to 0; a ticket must not be shared by launches that may run at the same time.
// mean: *out = sum(loss) / sum(rw), *denom = sum(rw) (0/0 = NaN when every row is ignored, as PyTorch).
__device__ void add_blocks_last(float2 mine, float2* partial, bool mean, T* out, float* denom,
                                unsigned* ticket) {
    __shared__ bool last;
    __shared__ float2 part[NT / 32];
    mine = block_sum2(mine, part);
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = mine;
        __threadfence();  // the partial is visible before the count that may make another block last
        last = atomicInc(ticket, gridDim.x - 1) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    float2 s = make_float2(0.f, 0.f);
    for (int i = threadIdx.x; i < (int)gridDim.x; i += NT) {  // __ldcg: other blocks' partials, past L1
        const float2 p = __ldcg(partial + i);
        s.x += p.x;
        s.y += p.y;
    }
    s = block_sum2(s, part);
    if (threadIdx.x == 0) {
        if (mean) *denom = s.y;
        *out = from_f<T>(mean ? s.x / s.y : s.x);
    }
}

// Per row i with target t = target[i] (C = N classes, eps = label smoothing,
// w = class weights or all ones, W = sum(w)):
//   lse  = log sum_j exp(x_j) = mx + ls, mx = max_j x_j, ls = log sum_j exp(x_j - mx)
//   loss = (1 - eps) * w_t * ((mx - x_t) + ls) + eps / C * sum_j w_j * (lse - x_j)
//   rw   = w_t  (the row's share of the 'mean' denominator)
// Ignored rows (t == ignore_index): loss = 0, rw = 0. A label outside [0, C)
// sets *bad = 1 (checked later on the host, no sync here) and gives loss NaN.
// The softmax itself is never written: backward recomputes it from x and (mx, ls), stored apart in
// lse_out[2 * row ..] (mx + ls rounds at mx's magnitude: p_t - 1 of a confident row would carry it).
// reduce 1 ('sum') / 2 ('mean'): the last block also writes *out = sum(loss) (/ sum(rw)), and for
// 'mean' *denom = sum(rw) (see add_blocks_last; partial: gridDim.x float2).
extern "C" __global__ void __launch_bounds__(NT)
cross_entropy_fwd(const T* __restrict__ x, const TT* __restrict__ target, const T* __restrict__ w,
         float* __restrict__ lse_out, float* __restrict__ loss, float* __restrict__ rw,
         int* __restrict__ bad, int M, int N, long long ignore_index, float eps,
         int reduce, T* __restrict__ out, float* __restrict__ denom, float2* __restrict__ partial,
         unsigned* __restrict__ ticket) {
    __shared__ float2 red[NT / 32];
    const int grp = threadIdx.x / TPR, t = threadIdx.x % TPR;
    float2 mine = make_float2(0.f, 0.f);  // this thread's rows: sum of losses, of row weights
    for (long long r0 = (long long)blockIdx.x * RPB; r0 < M; r0 += (long long)gridDim.x * RPB) {
        const long long row = r0 + grp;
        const bool ok = row < M;
        const T* xr = x + row * N;
        float2 ms = make_float2(NEG_INF, 0.f);
        float2 sw = make_float2(0.f, 0.f);  // sum_j w_j x_j, sum_j w_j (smoothing only)
        if (ok) {
            // 4 independent 16-byte loads in flight per thread before they are folded
            for (int c0 = t * VEC; c0 < N; c0 += 4 * TPR * VEC) {
            VT av[4];
#pragma unroll
            for (int u = 0; u < 4; ++u)
                if (c0 + u * TPR * VEC < N) av[u] = load_vec(xr + c0 + u * TPR * VEC);
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const int c = c0 + u * TPR * VEC;
                if (c >= N) break;
                const VT& a = av[u];
                ms = ms_fold(ms, a);
                if (eps != 0.f) {
                    if (w) {
                        VT wv = load_vec(w + c);
#pragma unroll
                        for (int e = 0; e < VEC; ++e) { sw.x += to_f(wv.v[e]) * to_f(a.v[e]); sw.y += to_f(wv.v[e]); }
                    } else {
#pragma unroll
                        for (int e = 0; e < VEC; ++e) sw.x += to_f(a.v[e]);
                    }
                }
            }
            }
        }
        ms = row_reduce(ms, red, MaxSum());
        if (eps != 0.f) sw = row_reduce(sw, red, Sum2());
        if (ok && t == 0) {
            const float ls = logf(ms.y), lse = ms.x + ls;  // (not __logf: 2^-21 absolute error near 1)
            const TT tg = target[row];
            float l, r;
            if ((long long)tg == ignore_index) {
                l = 0.f; r = 0.f;
            } else if (tg < 0 || tg >= (TT)N) {
                *bad = 1;
                l = __int_as_float(0x7fc00000); r = 0.f;
            } else {
                const float wt = w ? to_f(w[tg]) : 1.f;
                const float W = w ? sw.y : (float)N;
                l = (1.f - eps) * wt * ((ms.x - to_f(xr[tg])) + ls);
                if (eps != 0.f) l += eps / (float)N * (W * lse - sw.x);
                r = wt;
            }
            lse_out[2 * row] = ms.x;
            lse_out[2 * row + 1] = ls;
            loss[row] = l;
            rw[row] = r;
            mine.x += l;
            mine.y += r;
        }
    }
    if (reduce) add_blocks_last(mine, partial, reduce == 2, out, denom, ticket);
}

// dx[i, j] = s_i * ((1 - eps) * w_t * (p_j - [j == t]) + eps / C * (W * p_j - w_j)),
// p_j = exp((x_j - mx_i) - ls_i); s_i = gout[i] (per_row) or gout[0] / (denom ? *denom : 1);
// W = *wsum (sum of the class weights) or N.
// One pass: reads x, writes dx. Rows with an ignored target get zeros.
// Grid: (column blocks, row blocks); each thread writes VEC elements.
extern "C" __global__ void __launch_bounds__(256)
cross_entropy_bwd(const T* __restrict__ x, const TT* __restrict__ target, const T* __restrict__ w,
         const float* __restrict__ lse, const T* __restrict__ gout, int per_row,
         const float* __restrict__ denom, const float* __restrict__ wsum, T* __restrict__ dx, int M, int N,
         long long ignore_index, float eps) {
    const int c = (blockIdx.x * 256 + threadIdx.x) * VEC;
    if (c >= N) return;
    float gscale = per_row ? 0.f : to_f(gout[0]);
    if (!per_row && denom) gscale /= *denom;
    const float W = wsum ? *wsum : (float)N;
    VT wv;
    if (w && eps != 0.f) wv = load_vec(w + c);
    // 4 rows per iteration: their loads are all in flight before the first store
    for (long long r0 = blockIdx.y; r0 < M; r0 += 4LL * gridDim.y) {
        VT av[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const long long row = r0 + (long long)u * gridDim.y;
            if (row < M) av[u] = load_vec(x + row * N + c);
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const long long row = r0 + (long long)u * gridDim.y;
            if (row >= M) break;
            const TT tg = target[row];
            const bool ign = (long long)tg == ignore_index || tg < 0 || tg >= (TT)N;
            const float sc = ign ? 0.f : (per_row ? to_f(gout[row]) : gscale);
            const float wt = (w && !ign) ? to_f(w[tg]) : 1.f;
            const float mx = lse[2 * row], ls = lse[2 * row + 1];
            const float a1 = sc * (1.f - eps) * wt, a2 = sc * eps / (float)N;
            VT o;
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
                const float p = __expf((to_f(av[u].v[e]) - mx) - ls);
                float g = a1 * (p - ((long long)(c + e) == (long long)tg ? 1.f : 0.f));
                if (eps != 0.f) g += a2 * (W * p - (w ? to_f(wv.v[e]) : 1.f));
                o.v[e] = from_f<T>(ign ? 0.f : g);
            }
            store_vec(dx + row * N + c, o);
        }
    }
}

// ---------------------------------------------------------------- NLL on log-probabilities
// loss[i] = -w_t * x[i, t], rw[i] = w_t; ignored rows 0; bad labels set *bad.
extern "C" __global__ void nll_fwd(const T* __restrict__ x, const TT* __restrict__ target,
                                   const T* __restrict__ w, float* __restrict__ loss,
                                   float* __restrict__ rw, int* __restrict__ bad, int M, int N,
                                   long long ignore_index) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= M) return;
    const TT tg = target[i];
    if ((long long)tg == ignore_index) { loss[i] = 0.f; rw[i] = 0.f; return; }
    if (tg < 0 || tg >= (TT)N) { *bad = 1; loss[i] = __int_as_float(0x7fc00000); rw[i] = 0.f; return; }
    const float wt = w ? to_f(w[tg]) : 1.f;
    loss[i] = -wt * to_f(x[i * N + tg]);
    rw[i] = wt;
}

// dx[i, j] = [j == t] * -w_t * s_i (s_i as in cross_entropy_bwd); every element written.
extern "C" __global__ void nll_bwd(const TT* __restrict__ target, const T* __restrict__ w,
                                   const T* __restrict__ gout, int per_row,
                                   const float* __restrict__ denom, T* __restrict__ dx,
                                   int M, int N, long long ignore_index) {
    const long long n = (long long)M * N;
    float gscale = per_row ? 0.f : to_f(gout[0]);
    if (!per_row && denom) gscale /= *denom;
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < n;
         idx += (long long)gridDim.x * blockDim.x) {
        const long long i = idx / N, j = idx % N;
        const TT tg = target[i];
        float g = 0.f;
        if ((long long)tg == j && (long long)tg != ignore_index) {
            const float wt = w ? to_f(w[tg]) : 1.f;
            g = -wt * (per_row ? to_f(gout[i]) : gscale);
        }
        dx[idx] = from_f<T>(g);
    }
}
