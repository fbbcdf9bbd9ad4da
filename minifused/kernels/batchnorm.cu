// BatchNorm over x (N, C, S) contiguous, or with MF_NHWC=1 over a channels-last x, its memory (M, C)
// contiguous with M = N*H*W rows: per-channel statistics over N and S, or over the M rows (see batchnorm.py).
//
// Configuration: MF_T the element type (float, __half, __nv_bfloat16), MF_W the type of weight, bias and
// running statistics, MF_VEC elements per vector access (16 bytes / sizeof(T) when S, or C channels-last,
// is a multiple of it and the arrays are 16-byte aligned, else 1), MF_WIDE 1: 64-bit indices in the
// elementwise passes (0: unsigned, for arrays of fewer than 2^32 elements, where the channel of an element
// costs a 32-bit division), MF_CLUSTER the blocks per channel of the cached-channel kernels (cluster.cuh; the last
// section), MF_CHANNEL_BLOCKS the 1024-thread blocks per SM their registers must allow (2: at most 32 a
// thread, which puts three blocks of 512 on an SM where the backward's otherwise put two). Arithmetic is
// fp32; the per-channel combination of the partial sums is fp64, in a fixed order (deterministic, no atomics).
// Flat element i is at channel (i / S) % C.
//
// The fused ReLU keeps no mask: its forward writes the channels' affine factors (`relu`: C scales, then C shifts,
// fp32), and the backward recomputes each element's decision from x, the mean and those factors with the forward's
// own expression (affine, relu_passes), bit for bit. A forward may write the factors without applying the ReLU (the
// one-launch kernels' FACTORS_ONLY flag; the passes' bn_apply given none): a separate ReLU that follows may then hand
// its backward to this BatchNorm's (ops/batchnorm.py).
//
// MF_NHWC=1 (channels-last): flat (memory) element i is at channel i % C. bn_partial_nhwc replaces bn_partial, and
// bn_fold_forward_nhwc / bn_fold_backward_nhwc the finalize kernels of the batch statistics: they add the
// row slices' partials in parallel (the finalize kernels' serial loop over the rows, one thread per channel,
// would be slow over the hundreds of slices a channels-last pass needs) and finalize each channel with the
// same per-channel functions (N = M, S = 1: the shift x[c * S] is then x[n=0, h=0, w=0, c], as in NCHW).
// bn_finalize_forward still serves evaluation. The cached-channel kernels are left out (a channel is strided);
// bn_tile_forward / bn_tile_backward cache a tile of the channels instead. VEC divides C there (16-byte vectors run
// along the channels).
//
// nvrtc-check: -DMF_T=float -DMF_W=float -DMF_VEC=4 -DMF_WIDE=0
// nvrtc-check: -DMF_T=__half -DMF_W=float -DMF_VEC=8 -DMF_WIDE=0
// nvrtc-check: -DMF_T=__nv_bfloat16 -DMF_W=__nv_bfloat16 -DMF_VEC=1 -DMF_WIDE=1
// nvrtc-check[sm_90]: -DMF_T=__half -DMF_W=float -DMF_VEC=8 -DMF_WIDE=0 -DMF_CLUSTER=16
// nvrtc-check[sm_90]: -DMF_T=float -DMF_W=float -DMF_VEC=1 -DMF_WIDE=0 -DMF_CLUSTER=2
// nvrtc-check[sm_90]: -DMF_T=__nv_bfloat16 -DMF_W=float -DMF_VEC=8 -DMF_WIDE=0 -DMF_CLUSTER=16 -DMF_CHANNEL_BLOCKS=2
// nvrtc-check: -DMF_T=float -DMF_W=float -DMF_VEC=4 -DMF_WIDE=0 -DMF_NHWC=1
// nvrtc-check: -DMF_T=__half -DMF_W=float -DMF_VEC=8 -DMF_WIDE=1 -DMF_NHWC=1
// nvrtc-check: -DMF_T=__nv_bfloat16 -DMF_W=__nv_bfloat16 -DMF_VEC=1 -DMF_WIDE=0 -DMF_NHWC=1
// nvrtc-check[sm_90]: -DMF_T=__nv_bfloat16 -DMF_W=float -DMF_VEC=8 -DMF_WIDE=0 -DMF_NHWC=1 -DMF_CLUSTER=16
// nvrtc-check[sm_90]: -DMF_T=float -DMF_W=float -DMF_VEC=4 -DMF_WIDE=1 -DMF_NHWC=1 -DMF_CLUSTER=4
#include "dtypes.cuh"
#include "launch.cuh"
#include "vec.cuh"
#include "cluster.cuh"
#include "reduce.cuh"

#ifndef MF_T
#define MF_T float
#endif
#ifndef MF_W
#define MF_W float
#endif
#ifndef MF_VEC
#define MF_VEC 1
#endif
#ifndef MF_WIDE
#define MF_WIDE 1
#endif
#ifndef MF_NHWC
#define MF_NHWC 0
#endif
typedef MF_T T;
typedef MF_W W;
#if MF_WIDE
typedef long long I;
#else
typedef unsigned I;
#endif
constexpr int VEC = MF_VEC;
#ifndef MF_CHANNEL_BLOCKS
#define MF_CHANNEL_BLOCKS 1
#endif
// Channels one vector spans: NCHW its VEC elements lie in one channel's run, channels-last in VEC consecutive
// channels.
constexpr int CH = MF_NHWC ? VEC : 1;

// The one-launch forwards' `flags`: UPDATE moves the running statistics; FACTORS_ONLY (with `relu` given) writes the
// ReLU's factors but leaves y without the ReLU.
constexpr int UPDATE = 1, FACTORS_ONLY = 2;

typedef Vec<T, VEC> TV;  // one vector access
typedef Vec<float, 2> F2;  // a pair of sums

// The affine of an element of a channel, d = x - mean its distance from the mean: d * scale + shift with one
// rounding (fmaf, not left to the compiler's contraction), so that the backward's recomputation is the forward's.
__device__ __forceinline__ float affine(float d, float scale, float shift) { return fmaf(d, scale, shift); }

// Whether the ReLU passes an element of affine o (NaN kept with its gradient, as in PyTorch).
__device__ __forceinline__ bool relu_passes(float o) { return !(o <= 0.f); }

// Channel c's affine factors from its rstd r: scale = r * w[c] (r without a weight), shift = b[c] (0 without).
__device__ __forceinline__ float affine_scale(long long c, float r, const W* __restrict__ w) {
    return r * (w ? to_acc<float>(w[c]) : 1.f);
}
__device__ __forceinline__ float affine_shift(long long c, const W* __restrict__ b) {
    return b ? to_acc<float>(b[c]) : 0.f;
}

// The ReLU's gradient of an element: g where the forward's ReLU passed it (its affine recomputed from d = x - mean
// and the channel's factors rs, rt), else 0; g itself without a ReLU.
__device__ __forceinline__ float relu_gradient(float g, float d, bool relu, float rs, float rt) {
    return !relu || relu_passes(affine(d, rs, rt)) ? g : 0.f;
}

// The partial-sum terms of the vector xv (gv its dy, or null): forward v and v*v, v = x - shift; backward g and
// g*(x - shift), g = dy where the ReLU passed it (relu_gradient: shift is then the mean, rs and rt the ReLU's
// factors). PER_ELEMENT: element k's terms go to a[k], b[k] with shift[k], rs[k], rt[k] (the channels of a
// channels-last vector), else all to a[0], b[0] with shift[0], rs[0], rt[0] (one channel's run).
template <bool PER_ELEMENT>
__device__ __forceinline__ void add_vector_terms(const TV& xv, const TV* gv, bool relu, const float* shift,
                                                 const float* rs, const float* rt, float* a, float* b) {
    if (gv) {
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const int e = PER_ELEMENT ? k : 0;
            const float d = to_f(xv.v[k]) - shift[e];
            const float g = relu_gradient(to_f(gv->v[k]), d, relu, rs[e], rt[e]);
            a[e] += g;
            b[e] += g * d;
        }
    } else {
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const int e = PER_ELEMENT ? k : 0;
            const float v = to_f(xv.v[k]) - shift[e];
            a[e] += v;
            b[e] += v * v;
        }
    }
}

// add_vector_terms of the vector at flat index i of x (and of dy, when not null).
template <bool PER_ELEMENT>
__device__ __forceinline__ void add_terms(const T* __restrict__ x, const T* __restrict__ dy, bool relu, long long i,
                                          const float* shift, const float* rs, const float* rt, float* a, float* b) {
    const TV xv = *reinterpret_cast<const TV*>(x + i);
    if (dy) {
        const TV gv = *reinterpret_cast<const TV*>(dy + i);
        add_vector_terms<PER_ELEMENT>(xv, &gv, relu, shift, rs, rt, a, b);
    } else {
        add_vector_terms<PER_ELEMENT>(xv, nullptr, relu, shift, rs, rt, a, b);
    }
}

#if !MF_NHWC
// Block (p, c) sums the p-th of P equal slices of channel c's N*S elements (j = n*S + s).
// Forward (dy null): sums of v and v*v, v = x - x[n=0, c, s=0] (the shift keeps the squares from
// cancelling). Backward: sums of g and g*(x - mean[c]), g = dy where the ReLU (factors `relu`, or null) passed it,
// else 0. Writes part[c, p, 0..1].
extern "C" __global__ void bn_partial(const T* __restrict__ x, const T* __restrict__ dy,
                                      const float* __restrict__ relu, const float* __restrict__ mean,
                                      float* __restrict__ part, long long N, long long C, long long S, int P) {
    pdl_entry();
    const long long c = blockIdx.y, p = blockIdx.x, SV = S / VEC, M = N * SV;  // M vectors per channel
    const long long j0 = M * p / P, j1 = M * (p + 1) / P;
    const float shift = dy ? mean[c] : to_f(x[c * S]);
    const float rs = relu ? relu[c] : 0.f, rt = relu ? relu[C + c] : 0.f;
    float a = 0.f, b = 0.f;
    // (n, vector s) of this thread's first vector, then advanced without a division per vector
    long long j = j0 + threadIdx.x, n = j / SV, s = j - n * SV;
    const long long step_n = blockDim.x / SV, step_s = blockDim.x - step_n * SV;
    for (; j < j1; j += blockDim.x) {
        add_terms<false>(x, dy, relu, (n * C + c) * S + s * VEC, &shift, &rs, &rt, &a, &b);
        n += step_n;
        s += step_s;
        if (s >= SV) { s -= SV; ++n; }
    }
    __shared__ float sa[32], sb[32];
    a = warp_sum(a);
    b = warp_sum(b);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { sa[warp] = a; sb[warp] = b; }
    __syncthreads();
    if (warp == 0) {
        const int warps = blockDim.x >> 5;
        a = warp_sum(lane < warps ? sa[lane] : 0.f);
        b = warp_sum(lane < warps ? sb[lane] : 0.f);
        if (lane == 0) {
            part[(c * P + p) * 2] = a;
            part[(c * P + p) * 2 + 1] = b;
        }
    }
}
#endif

// A channel's mean (shift + the mean of v), biased variance and rstd from its sums a (of v) and b (of v*v),
// v = x - shift, over M elements.
struct ChannelStats {
    double mean, var;
    float rstd;
};
__device__ __forceinline__ ChannelStats channel_stats(double a, double b, double shift, double M, float eps) {
    const double mu = a / M;
    const double var = fmax(b / M - mu * mu, 0.0);
    return {shift + mu, var, 1.0f / sqrtf((float)var + eps)};
}

// Moves channel c's running statistics by `factor` towards the batch's mean and unbiased variance over M elements
// (and counts the batch).
__device__ __forceinline__ void update_running(long long c, const ChannelStats& st, W* running_mean, W* running_var,
                                               long long* count, double M, float factor) {
    const double unbiased = M > 1.0 ? st.var * M / (M - 1.0) : st.var;
    const double f = factor;
    running_mean[c] = from_acc<W>((1.0 - f) * to_acc<double>(running_mean[c]) + f * st.mean);
    running_var[c] = from_acc<W>((1.0 - f) * to_acc<double>(running_var[c]) + f * unbiased);
    if (count && c == 0) *count += 1;
}

// Writes channel c's mean and rstd and, with a ReLU (`relu` not null), its affine factors, relu[c] the scale and
// relu[C + c] the shift, from which the backward recomputes the ReLU's decisions.
__device__ __forceinline__ void store_stats(long long c, long long C, float mu, float r, const W* __restrict__ w,
                                            const W* __restrict__ bias, float* __restrict__ mean,
                                            float* __restrict__ rstd, float* __restrict__ relu) {
    mean[c] = mu;
    rstd[c] = r;
    if (relu) {
        relu[c] = affine_scale(c, r, w);
        relu[C + c] = affine_shift(c, bias);
    }
}

// Channel c's statistics from its sums a (of v) and b (of v*v), v = x - shift (x[c * S], its first element),
// over M = N*S elements: store_stats and, when `update`, the running statistics moved.
__device__ __forceinline__ void finalize_forward_channel(long long c, long long C, double a, double b,
                                                         const T* __restrict__ x, W* running_mean, W* running_var,
                                                         long long* count, const W* __restrict__ w,
                                                         const W* __restrict__ bias, float* __restrict__ mean,
                                                         float* __restrict__ rstd, float* __restrict__ relu,
                                                         double M, long long S, float eps, float factor, int update) {
    const ChannelStats st = channel_stats(a, b, (double)to_f(x[c * S]), M, eps);
    store_stats(c, C, (float)st.mean, st.rstd, w, bias, mean, rstd, relu);
    if (update) update_running(c, st, running_mean, running_var, count, M, factor);
}

// One thread per channel. batch: mean and biased variance from the partials (and the running statistics
// moved by `factor` towards the mean and the unbiased variance when `update`); otherwise from the running
// statistics. store_stats.
extern "C" __global__ void bn_finalize_forward(const float* __restrict__ part, const T* __restrict__ x,
                                               W* running_mean, W* running_var, long long* count,
                                               const W* __restrict__ w, const W* __restrict__ bias,
                                               float* __restrict__ mean, float* __restrict__ rstd,
                                               float* __restrict__ relu, long long N, long long C, long long S, int P,
                                               float eps, float factor, int update, int batch) {
    pdl_entry();
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    if (!batch) {
        store_stats(c, C, to_acc<float>(running_mean[c]), 1.0f / sqrtf(to_acc<float>(running_var[c]) + eps), w, bias,
                    mean, rstd, relu);
        return;
    }
    double a = 0.0, b = 0.0;
    for (int p = 0; p < P; ++p) {
        a += part[(c * P + p) * 2];
        b += part[(c * P + p) * 2 + 1];
    }
    finalize_forward_channel(c, C, a, b, x, running_mean, running_var, count, w, bias, mean, rstd, relu,
                             (double)N * (double)S, S, eps, factor, update);
}

// The channel of vector v's first element: NCHW (v / D) % C, D = S / VEC vectors per run; channels-last
// (v % D) * VEC, D = C / VEC vectors per row. The vector then spans channels c .. c + CH - 1. Channels-last,
// the elementwise passes keep the factors of the channels they last loaded and reload them only when the
// channel changes: the host makes the grid's stride a multiple of D where a thread takes several trips
// (batchnorm.py's _grid_nhwc), so each thread loads its VEC channels' factors once.
__device__ __forceinline__ I vector_channel(I v, I C, I D) {
#if MF_NHWC
    return v % D * VEC;
#else
    return v / D % C;
#endif
}

// y of the vector xv: its channels' mean m and affine factors scale, bc, then the ReLU when `relu`.
__device__ __forceinline__ TV apply_vector(const TV& xv, const float* m, const float* scale, const float* bc,
                                           bool relu) {
    TV yv;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
        const int e = MF_NHWC ? k : 0;
        const float o = affine(to_f(xv.v[k]) - m[e], scale[e], bc[e]);
        yv.v[k] = from_f<T>(relu && !relu_passes(o) ? 0.f : o);
    }
    return yv;
}

// y = (x - mean) * rstd * w + b (affine), then the ReLU where `relu` (the factors the finalize wrote; only whether
// there are is read here: the same factors come from affine_scale and affine_shift): a grid-stride loop over
// vectors. Channels-last, a thread takes two vectors a grid's stride apart per trip, as bn_backward_dx does (the same
// channels; their loads issued together).
extern "C" __global__ void bn_apply(const T* __restrict__ x, const float* __restrict__ mean,
                                    const float* __restrict__ rstd, const W* __restrict__ w,
                                    const W* __restrict__ b, T* __restrict__ y, const float* __restrict__ relu,
                                    long long total_, long long C_, long long S_) {
    pdl_entry();
    const I vectors = (I)(total_ / VEC), C = (I)C_, D = (I)((MF_NHWC ? C_ : S_) / VEC);
    const I stride = (I)gridDim.x * blockDim.x, trip = MF_NHWC ? 2 * stride : stride;
    const TV* xs = reinterpret_cast<const TV*>(x);
    TV* out = reinterpret_cast<TV*>(y);
    const bool on = relu != nullptr;
    float m[CH], scale[CH], bc[CH];
    I held = ~(I)0;  // the channel whose factors m, scale, bc hold
    for (I v = (I)blockIdx.x * blockDim.x + threadIdx.x; v < vectors; v += trip) {
        const I c = vector_channel(v, C, D);
        if (!MF_NHWC || c != held) {
            held = c;
#pragma unroll
            for (int e = 0; e < CH; ++e) {
                m[e] = mean[c + e];
                scale[e] = affine_scale(c + e, rstd[c + e], w);
                bc[e] = affine_shift(c + e, b);
            }
        }
        const TV x0 = xs[v];
        if (MF_NHWC && v + stride < vectors) {
            const TV x1 = xs[v + stride];
            out[v] = apply_vector(x0, m, scale, bc, on);
            out[v + stride] = apply_vector(x1, m, scale, bc, on);
        } else {
            out[v] = apply_vector(x0, m, scale, bc, on);
        }
    }
}

// The coefficients of dx = k0*g - k1 - (x - mean)*k2 of a channel with sums a (of g) and b (of g*(x - mean)) over
// M elements, rstd r and weight wc (k1 = k2 = 0 when the statistics were constants).
struct DxCoef {
    float k0, k1, k2;
};
// (k0 = rstd * w: the float product of two floats, which the double one rounds to, so a channel's k0 is its ReLU's
// scale, affine_scale's)
__device__ __forceinline__ DxCoef dx_coefficients(double a, double b, double r, double wc, double M, int batch) {
    const double k0 = r * wc;
    return {(float)k0, batch ? (float)(k0 * a / M) : 0.f, batch ? (float)(k0 * r * r * b / M) : 0.f};
}

// Channel c's weight and bias gradients from its sums a (of g) and b (of g*(x - mean)) over M elements, and its
// dx coefficients.
__device__ __forceinline__ void finalize_backward_channel(long long c, double a, double b, const W* __restrict__ w,
                                                          const float* __restrict__ rstd, W* __restrict__ dw,
                                                          W* __restrict__ db, float* __restrict__ coef, double M,
                                                          int batch) {
    const double r = rstd[c];
    if (dw) dw[c] = from_acc<W>(b * r);
    if (db) db[c] = from_acc<W>(a);
    const DxCoef k = dx_coefficients(a, b, r, w ? to_acc<double>(w[c]) : 1.0, M, batch);
    coef[c * 3] = k.k0;
    coef[c * 3 + 1] = k.k1;
    coef[c * 3 + 2] = k.k2;
}

// One thread per channel: finalize_backward_channel from the partials (sum g, sum g*(x - mean)).
extern "C" __global__ void bn_finalize_backward(const float* __restrict__ part, const W* __restrict__ w,
                                                const float* __restrict__ rstd, W* __restrict__ dw,
                                                W* __restrict__ db, float* __restrict__ coef, long long N,
                                                long long C, long long S, int P, int batch) {
    pdl_entry();
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double a = 0.0, b = 0.0;
    for (int p = 0; p < P; ++p) {
        a += part[(c * P + p) * 2];
        b += part[(c * P + p) * 2 + 1];
    }
    finalize_backward_channel(c, a, b, w, rstd, dw, db, coef, (double)N * (double)S, batch);
}

// dx of the vectors gv (dy) and xv (x), their channels' coefficients in k0, k1, k2, mean m and, with a ReLU, its
// shifts rt: its scales are the k0 (rstd * w, the same float product: see dx_coefficients).
__device__ __forceinline__ TV dx_of(const TV& gv, const TV& xv, bool relu, const float* k0, const float* k1,
                                    const float* k2, const float* m, const float* rt) {
    TV out;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
        const int e = MF_NHWC ? k : 0;
        const float d = to_f(xv.v[k]) - m[e];
        const float g = relu_gradient(to_f(gv.v[k]), d, relu, k0[e], rt[e]);
        out.v[k] = from_f<T>(k0[e] * g - k1[e] - d * k2[e]);
    }
    return out;
}

// Channels-last, a thread takes two vectors a grid's stride apart per trip, their loads issued together (the
// same channels: the host makes the stride a multiple of the row's vectors, batchnorm.py's _grid_nhwc): that grid
// holds few blocks, and one vector of dy and of x in flight per thread left the loads latency-bound. The launch
// bounds keep the four blocks an SM that the grid counts on (the coefficients and the ReLU's factors of VEC
// channels, held, took more registers: the few that spill are loop-invariant, reloaded from the L1).
extern "C" __global__ void __launch_bounds__(256, 4) bn_backward_dx(const T* __restrict__ dy, const T* __restrict__ x,
                                          const float* __restrict__ relu, const float* __restrict__ mean,
                                          const float* __restrict__ coef, T* __restrict__ dx, long long total_,
                                          long long C_, long long S_) {
    pdl_entry();
    const I vectors = (I)(total_ / VEC), C = (I)C_, D = (I)((MF_NHWC ? C_ : S_) / VEC);
    const I stride = (I)gridDim.x * blockDim.x, trip = MF_NHWC ? 2 * stride : stride;
    const TV* g = reinterpret_cast<const TV*>(dy);
    const TV* xs = reinterpret_cast<const TV*>(x);
    TV* out = reinterpret_cast<TV*>(dx);
    const bool on = relu != nullptr;
    float k0[CH], k1[CH], k2[CH], m[CH], rt[CH];
    I held = ~(I)0;  // the channel whose coefficients k0, k1, k2, m hold
    for (I v = (I)blockIdx.x * blockDim.x + threadIdx.x; v < vectors; v += trip) {
        const I c = vector_channel(v, C, D);
        if (!MF_NHWC || c != held) {
            held = c;
#pragma unroll
            for (int e = 0; e < CH; ++e) {
                k0[e] = coef[(c + e) * 3];
                k1[e] = coef[(c + e) * 3 + 1];
                k2[e] = coef[(c + e) * 3 + 2];
                m[e] = mean[c + e];
            }
        }
        // The ReLU's shifts loaded every trip (from the L1), not held with the coefficients: channels-last, the
        // registers of both took blocks of 256 threads off an SM
#pragma unroll
        for (int e = 0; e < CH; ++e) rt[e] = on ? relu[C + c + e] : 0.f;
        const TV g0 = g[v], x0 = xs[v];
        if (MF_NHWC && v + stride < vectors) {
            const TV g1 = g[v + stride], x1 = xs[v + stride];
            out[v] = dx_of(g0, x0, on, k0, k1, k2, m, rt);
            out[v + stride] = dx_of(g1, x1, on, k0, k1, k2, m, rt);
        } else {
            out[v] = dx_of(g0, x0, on, k0, k1, k2, m, rt);
        }
    }
}

#if MF_NHWC
#include "batchnorm_nhwc.cuh"  // (after the per-channel functions and the vector passes' helpers, which it calls)
#endif

// ---------------------------------------------------------------- a channel cached in shared memory
#if !MF_NHWC
// Where a channel's N*S elements fit in the shared memory of one block, or of a thread-block cluster of
// CLUSTER blocks (sm_90+; batchnorm.py's _per_channel), one launch does what the three passes
// above do: block `rank` of channel c's cluster loads its slice of the channel once, the cluster reduces it
// (every block adds the blocks' sums from their shared memory in rank order, so all get the same
// statistics, in a fixed order: deterministic) and each block writes its slice once. Block `rank` holds
// vectors [lo, lo + CHUNK) of the channel's N*S/VEC, lo = rank*CHUNK, CHUNK a multiple of 32 (given by the
// host, which sizes the shared memory by it), the last block fewer.
// A block loads, then stores: its loads and stores do not overlap, only those of the blocks an SM holds. Measured
// slower at every 32x32 and 8x8 bench shape: a persistent grid whose clusters stream consecutive channels through
// two shared-memory stages (cp.async for the next channel while the current one is reduced and written, the sums
// exchanged by st.async onto mbarriers, no cluster barrier per channel). One block an SM keeps too few bytes in
// flight, and at 128 KiB a block only 15 clusters of 8 fit the GPU at once.

__device__ __forceinline__ F2 warp_sum2(F2 v) {
    return F2{{warp_sum(v.v[0]), warp_sum(v.v[1])}};
}

// The sums of the pair v over the block (blockDim.x a multiple of 32, at most 1024), returned to every thread
// (the xor butterflies give every lane the same bits). One call per launch: `scratch` is not reused.
__device__ __forceinline__ F2 block_sum2(F2 v, F2* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_sum2(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    return warp_sum2(lane < warps ? scratch[lane] : F2{});
}

// The cluster's total of the block sums v (every thread holds its block's): each block publishes its sum
// in `slot` (its own shared memory, not reused within the launch) and every thread adds the CLUSTER blocks'
// in rank order (a lane per block and a warp sum instead measured slower on the backward's clusters of 16).
// The caller's cluster_arrive/cluster_wait around the kernel's exit keep each block's slot alive while the
// others read it.
__device__ __forceinline__ F2 cluster_total(F2 v, F2* slot) {
    if (CLUSTER == 1) return v;
    if (threadIdx.x == 0) *slot = v;
    cluster_sync();
    F2 t = {};
    const unsigned addr = (unsigned)__cvta_generic_to_shared(slot);
    for (int q = 0; q < CLUSTER; ++q) {
        const F2 u = load_cluster<F2>(addr, q);
        t.v[0] += u.v[0];
        t.v[1] += u.v[1];
    }
    return t;
}

// The flat element index of vector j of channel c's N*S/VEC (j = n*SV + s, SV = S/VEC) for j = j0, j0 + step,
// ...: one division for the first, additions after it (a division per 16-byte vector costs about as many
// instructions as the vector's arithmetic, and these kernels issue near what the SM issues per byte at full
// bandwidth). Arithmetic in I: 32-bit unless the tensor needs 64-bit indices. Past the channel's end the index
// is meaningless (the callers' dead trips do not use it).
struct ChannelWalk {
    I at, s, ds, dat, wrap, SV;
    __device__ __forceinline__ ChannelWalk(long long j0, long long step, long long SV_, long long C, long long c)
        : SV((I)SV_) {
        const I n = (I)j0 / SV, dn = (I)step / SV;
        s = (I)j0 - n * SV;
        ds = (I)step - dn * SV;
        at = ((n * (I)C + (I)c) * SV + s) * VEC;
        dat = (dn * (I)C * SV + ds) * VEC;
        wrap = ((I)C - 1) * SV * VEC;  // from (n, s >= SV) on to (n + 1, s - SV)
    }
    __device__ __forceinline__ long long index() const { return (long long)at; }
    __device__ __forceinline__ void next() {
        at += dat;
        s += ds;
        if (s >= SV) {
            s -= SV;
            at += wrap;
        }
    }
};

extern "C" __global__ void CLUSTER_DIMS __launch_bounds__(1024, MF_CHANNEL_BLOCKS)
bn_channel_forward(const T* __restrict__ x, W* running_mean, W* running_var, long long* count, const W* __restrict__ w,
                   const W* __restrict__ b, T* __restrict__ y, float* __restrict__ relu, float* __restrict__ mean,
                   float* __restrict__ rstd, long long N, long long C, long long S, long long CHUNK, float eps,
                   float factor, int flags) {
    pdl_entry();
    extern __shared__ __align__(16) unsigned char smem_raw[];
    TV* cache = reinterpret_cast<TV*>(smem_raw);
    __shared__ F2 scratch[32];
    __shared__ F2 sums;
    const unsigned rank = cluster_rank();
    const long long c = blockIdx.x / CLUSTER, SV = S / VEC, MV = N * SV;
    const long long lo = min(MV, rank * CHUNK);
    const int n_own = (int)(min(MV, lo + CHUNK) - lo);  // (CHUNK fits the shared memory)
    const float M = (float)(N * S);
    // One pass: the sums of v and v*v, v = x - (the channel's first element), as bn_partial (the shift
    // keeps the squares from cancelling); a second pass over the cached copy would cost more instructions
    // than the SM issues per byte at full bandwidth.
    const float shift = to_f(x[c * S]);
    // The channel's factors, loaded now: after the reduction their latency would stand between it and the first
    // store. (The running statistics, read by one thread, stay after it: held across the loop they spill
    // under the 32-register cap.)
    const float wc = w ? to_acc<float>(w[c]) : 1.f, bc = affine_shift(c, b);
    float a = 0.f, q = 0.f;
    ChannelWalk at(lo + threadIdx.x, blockDim.x, SV, C, c);
#pragma unroll 4  // several loads in flight per thread: a block alone on its SM is bound by their latency
    for (int j = threadIdx.x; j < n_own; j += blockDim.x, at.next()) {
        const TV v = *reinterpret_cast<const TV*>(x + at.index());
        cache[j] = v;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const float d = to_f(v.v[k]) - shift;
            a += d;
            q += d * d;
        }
    }
    const F2 t = cluster_total(block_sum2(F2{{a, q}}, scratch), &sums);
    cluster_arrive();  // this block has read the others' sums
    const float d_mean = t.v[0] / M, var = fmaxf(t.v[1] / M - d_mean * d_mean, 0.f);
    const float mu = shift + d_mean, r = 1.0f / sqrtf(var + eps);
    if (threadIdx.x == 0 && rank == 0) {
        store_stats(c, C, mu, r, w, b, mean, rstd, relu);
        if (flags & UPDATE) {
            const double Md = (double)M, unbiased = Md > 1.0 ? (double)var * Md / (Md - 1.0) : (double)var;
            const double f = factor;
            running_mean[c] = from_acc<W>((1.0 - f) * to_acc<double>(running_mean[c]) + f * (double)mu);
            running_var[c] = from_acc<W>((1.0 - f) * to_acc<double>(running_var[c]) + f * unbiased);
            if (count && c == 0) *count += 1;
        }
    }
    const float scale = r * wc;  // (affine_scale's product)
    const bool on = relu != nullptr && !(flags & FACTORS_ONLY);
    ChannelWalk out_at(lo + threadIdx.x, blockDim.x, SV, C, c);
    for (int j = threadIdx.x; j < n_own; j += blockDim.x, out_at.next()) {
        const TV v = load_as<TV>(cache + j);  // one 16-byte load (elementwise reads conflict 4-way)
        TV out;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const float o = affine(to_f(v.v[k]) - mu, scale, bc);
            out.v[k] = from_f<T>(on && !relu_passes(o) ? 0.f : o);
        }
        *reinterpret_cast<TV*>(y + out_at.index()) = out;
    }
    cluster_wait();  // no block exits while another may still read its sums
}

// dx, dw, db of channel c from its dy (where the ReLU passed it) and x, cached: the sums of g and g*(x - mean)
// over the cluster, then dx = k0*g - k1 - (x - mean)*k2 as bn_finalize_backward and bn_backward_dx compute them.
// Block `rank` of the channel's cluster caches vectors [lo, lo + CHUNK) of g and of x, as bn_channel_forward does x.
extern "C" __global__ void CLUSTER_DIMS __launch_bounds__(1024, MF_CHANNEL_BLOCKS)
bn_channel_backward(const T* __restrict__ dy, const T* __restrict__ x, const float* __restrict__ relu,
                    const float* __restrict__ mean, const float* __restrict__ rstd, const W* __restrict__ w,
                    T* __restrict__ dx, W* __restrict__ dw, W* __restrict__ db, long long N, long long C, long long S,
                    long long CHUNK, int batch) {
    pdl_entry();
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __shared__ F2 scratch[32];
    __shared__ F2 sums;
    const unsigned rank = cluster_rank();
    const long long c = blockIdx.x / CLUSTER, SV = S / VEC, MV = N * SV;
    const long long lo = min(MV, rank * CHUNK);
    const int n_own = (int)(min(MV, lo + CHUNK) - lo);  // (CHUNK fits the shared memory)
    TV* gc = reinterpret_cast<TV*>(smem_raw);
    TV* xc = gc + CHUNK;
    // rstd loaded with the mean, before the loop: after the reduction its latency would stand between it and the
    // first store (w's stays there: held across the loop too, it measured slower where 32 registers are the cap)
    const float m = mean[c], rs = rstd[c];
    const bool on = relu != nullptr;
    const float rscale = on ? relu[c] : 0.f, rshift = on ? relu[C + c] : 0.f;  // the ReLU's factors
    float a = 0.f, p = 0.f;
    ChannelWalk at(lo + threadIdx.x, blockDim.x, SV, C, c);
#pragma unroll 2  // with 4, the 16-bit float build took 43 registers: two blocks an SM, not three
    for (int j = threadIdx.x; j < n_own; j += blockDim.x, at.next()) {
        const long long i = at.index();
        TV gv = *reinterpret_cast<const TV*>(dy + i);
        const TV xv = *reinterpret_cast<const TV*>(x + i);
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const float d = to_f(xv.v[k]) - m;
            if (on && !relu_passes(affine(d, rscale, rshift))) gv.v[k] = from_f<T>(0.f);  // (cached so)
            const float g = to_f(gv.v[k]);
            a += g;
            p += g * d;
        }
        gc[j] = gv;
        xc[j] = xv;
    }
    const F2 t = cluster_total(block_sum2(F2{{a, p}}, scratch), &sums);
    cluster_arrive();  // this block has read the others' sums
    a = t.v[0];
    p = t.v[1];
    const double r = rs, M = (double)N * (double)S;
    if (threadIdx.x == 0 && rank == 0) {
        if (dw) dw[c] = from_acc<W>((double)p * r);
        if (db) db[c] = from_acc<W>((double)a);
    }
    if (dx) {
        const double k0d = r * (w ? to_acc<double>(w[c]) : 1.0);
        const float k0 = (float)k0d, k1 = batch ? (float)(k0d * a / M) : 0.f;
        const float k2 = batch ? (float)(k0d * r * r * p / M) : 0.f;
        ChannelWalk out_at(lo + threadIdx.x, blockDim.x, SV, C, c);
        for (int j = threadIdx.x; j < n_own; j += blockDim.x, out_at.next()) {
            const TV gv = load_as<TV>(gc + j), xv = load_as<TV>(xc + j);  // 16-byte loads, as in the forward
            TV out;
#pragma unroll
            for (int k = 0; k < VEC; ++k)
                out.v[k] = from_f<T>(k0 * to_f(gv.v[k]) - k1 - (to_f(xv.v[k]) - m) * k2);
            *reinterpret_cast<TV*>(dx + out_at.index()) = out;
        }
    }
    cluster_wait();  // no block exits while another may still read its sums
}
#endif  // !MF_NHWC
