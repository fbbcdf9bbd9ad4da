// Depthwise convolution with one filter a channel (K = C), no ReLU mask, on whole planes in shared memory: the
// bandwidth-bound path of conv_depthwise.py. A block copies its source planes into shared memory with wide
// loads (all of a thread's loads in flight before any is stored), as floats (or G_P16), zero-padded, then each thread
// computes a strip of TQ outputs of one row (dgrad: SH rows) from a window of the plane read into registers, so
// each input is read from shared memory about once per strip rather than once per tap; the forward and the input
// gradient then write their planes out from shared memory too (G_OUT below).
//
//   dwt_fwd    y[n,c,p,q] = act(bias[c] + sum_rs x[n, c, p*SH - PH + r*DH, q*SW - PW + s*DW] * w[c,r,s])
//   dwt_dgrad  dx[n,c,h,w] = sum over the taps whose output pixel (p, q) = ((h + PH - r*DH) / SH,
//              (w + PW - s*DW) / SW) is whole and inside: dy[n,c,p,q] * w[c,r,s]
//   dwt_wgrad  per (split of the images, c) partial sums of dW[c, r, s] and db[c] (conv_depthwise.cu's dw_reduce
//              adds the splits in order: deterministic, no atomics)
//
// The whole geometry arrives as defines, one module a layer shape and direction (G_DIR: 0 forward, 1 input
// gradient, 2 filter gradient), so every index below folds to constants, the dgrad's stride parities too: G_R, G_S,
// G_SH, G_SW, G_PH, G_PW, G_DH, G_DW; the input plane G_H x G_W, the output plane G_P x G_Q; G_TQ outputs a strip;
// G_PLANES planes a block; and the shared-memory layout that conv_depthwise.py computes (its one home): the source
// plane of G_SR x G_SC elements (G_SC odd: the threads of a warp take consecutive rows, so their reads fall in
// distinct banks), source pixel (i, j) at (i + G_R0, j + G_C0); and G_OUT, where the forward and the input
// gradient stage their output planes in shared memory (a float offset; 0: none). A warp's strips lie in 32
// different rows: stored straight from registers they scatter over the output, and a strip narrower than a
// 32-byte sector (a 16-bit one of 8) leaves the L2 cache partial sectors to merge. Staged, the block's planes, one
// contiguous span of the output, leave by whole 16-byte words (faster at all of MobileNetV2's depthwise shapes
// but its strided forwards, a few percent slower there; bench/conv_depthwise.py).
//
// nvrtc-check: -DCONV_T=__half -DG_DIR=0 -DG_R=3 -DG_S=3 -DG_SH=1 -DG_SW=1 -DG_PH=1 -DG_PW=1 -DG_DH=1 -DG_DW=1 -DG_H=56 -DG_W=56 -DG_P=56 -DG_Q=56 -DG_TQ=8 -DG_PLANES=1 -DG_SR=58 -DG_SC=59 -DG_R0=1 -DG_C0=1 -DG_OUT=3432 -DG_P16=0
// nvrtc-check: -DCONV_T=__half -DG_DIR=0 -DG_R=3 -DG_S=3 -DG_SH=2 -DG_SW=2 -DG_PH=1 -DG_PW=1 -DG_DH=1 -DG_DW=1 -DG_H=112 -DG_W=112 -DG_P=56 -DG_Q=56 -DG_TQ=8 -DG_PLANES=1 -DG_SR=113 -DG_SC=113 -DG_R0=1 -DG_C0=1 -DG_OUT=6396 -DG_P16=1
// nvrtc-check: -DCONV_T=float -DG_DIR=0 -DG_R=3 -DG_S=3 -DG_SH=1 -DG_SW=1 -DG_PH=1 -DG_PW=1 -DG_DH=1 -DG_DW=1 -DG_H=56 -DG_W=56 -DG_P=56 -DG_Q=56 -DG_TQ=8 -DG_PLANES=1 -DG_SR=58 -DG_SC=59 -DG_R0=1 -DG_C0=1 -DG_OUT=0 -DG_P16=0
// nvrtc-check: -DCONV_T=__nv_bfloat16 -DG_DIR=1 -DG_R=5 -DG_S=5 -DG_SH=2 -DG_SW=1 -DG_PH=0 -DG_PW=3 -DG_DH=2 -DG_DW=1 -DG_H=13 -DG_W=9 -DG_P=3 -DG_Q=11 -DG_TQ=8 -DG_PLANES=3 -DG_SR=11 -DG_SC=21 -DG_R0=4 -DG_C0=1 -DG_OUT=768 -DG_P16=0
// nvrtc-check: -DCONV_T=float -DG_DIR=2 -DG_R=3 -DG_S=3 -DG_SH=2 -DG_SW=2 -DG_PH=1 -DG_PW=1 -DG_DH=1 -DG_DW=1 -DG_H=112 -DG_W=112 -DG_P=56 -DG_Q=56 -DG_TQ=8 -DG_PLANES=2 -DG_SR=113 -DG_SC=113 -DG_R0=1 -DG_C0=1 -DG_OUT=0 -DG_P16=0
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef CONV_T
#define CONV_T float
#endif
typedef CONV_T T;

#include "dtypes.cuh"  // to_f / from_f
#include "reduce.cuh"  // block_sums_to

constexpr int R = G_R, S = G_S, SH = G_SH, SW = G_SW, PH = G_PH, PW = G_PW, DH = G_DH, DW = G_DW;
constexpr int RS = R * S, TQ = G_TQ, PLANES = G_PLANES, SR = G_SR, SC = G_SC, OUT = G_OUT;
constexpr int THREADS = 256;

// The source planes' element in shared memory: float, or the 16-bit T itself where G_P16 says so (planes so large
// that as floats they would hold an SM to few blocks; conv_depthwise.py decides). PLANES_END is the float offset
// where the planes end and the filters (the filter gradient: its dy planes) begin.
#if G_P16
typedef T PT;
static_assert(G_DIR != 2 && sizeof(T) == 2, "16-bit planes: the forward's and the input gradient's");
#else
typedef float PT;
#endif
constexpr int PLANES_END = (PLANES * SR * SC * (int)sizeof(PT) + 3) / 4;
static_assert(OUT == 0 || OUT >= PLANES_END + PLANES * RS, "conv_depthwise.py's staging offset");

// floor division and its remainder's test, for the dgrad's tap offsets (negative ones included)
__host__ __device__ constexpr int fdiv(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
__host__ __device__ constexpr bool divides(int b, int a) { return a - fdiv(a, b) * b == 0; }

// Zeros into `cells` elements of shared memory (the padding and the strips' overhang read zeros).
template <typename D>
__device__ __forceinline__ void zero_fill(D* dst, int cells) {
    for (int i = threadIdx.x; i < cells; i += THREADS) dst[i] = from_f<D>(0.0f);
}

// A source element as a plane keeps it: as a float, or as it is.
template <typename D>
__device__ __forceinline__ D plane_value(T v) {
    if constexpr (sizeof(D) == sizeof(float)) {
        return to_f(v);
    } else {
        return v;
    }
}

template <int LB> struct Word;  // the word of an LB-byte load
template <> struct Word<4> { using type = unsigned; };
template <> struct Word<8> { using type = uint2; };
template <> struct Word<16> { using type = uint4; };

// `count` planes of PH_ x PW_ elements, `stride` elements apart from `src` on, into `dst` (as D): plane g's
// pixel (i, j) at dst[(g * ROWS + i + R0) * COLS + j + C0] where that is inside ROWS x COLS (pixels no output
// reads are left out). Loads of 16 bytes, else of 8 or 4 where a plane's bytes are no multiple of 16 (the widest
// measured fastest; 14 x 14 16-bit planes would otherwise go element by element), 64 bytes a thread issued before
// any is stored.
template <int PH_, int PW_, int ROWS, int COLS, int R0, int C0, typename D>
__device__ __forceinline__ void load_planes(const T* __restrict__ src, long long stride, int count,
                                            D* __restrict__ dst) {
    constexpr int AREA = PH_ * PW_, BYTES = AREA * sizeof(T);
    constexpr int LB = BYTES % 16 == 0 ? 16 : BYTES % 8 == 0 ? 8 : 4, VE = LB / sizeof(T), U = 64 / LB;
    using W = typename Word<LB>::type;
    auto put = [&](int g, int e, T v) {
        const int i = e / PW_ + R0, j = e - (e / PW_) * PW_ + C0;
        if (i >= 0 && i < ROWS && j >= 0 && j < COLS) dst[(g * ROWS + i) * COLS + j] = plane_value<D>(v);
    };
    const bool vec = AREA % VE == 0 && (reinterpret_cast<unsigned long long>(src) & (LB - 1)) == 0 &&
                     (stride * (long long)sizeof(T)) % LB == 0;
    if (vec) {
        constexpr int PER = AREA / VE;  // words a plane
        const int total = count * PER;
        for (int base = threadIdx.x; base < total; base += U * THREADS) {
            W v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int idx = base + u * THREADS;
                if (idx < total) {
                    const int g = idx / PER;
                    v[u] = __ldg(reinterpret_cast<const W*>(src + g * stride) + (idx - g * PER));
                }
            }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int idx = base + u * THREADS;
                if (idx < total) {
                    const int g = idx / PER, e0 = (idx - g * PER) * VE;
                    const T* t = reinterpret_cast<const T*>(&v[u]);
#pragma unroll
                    for (int e = 0; e < VE; ++e) put(g, e0 + e, t[e]);
                }
            }
        }
    } else {
        for (int idx = threadIdx.x; idx < count * AREA; idx += THREADS) {
            const int g = idx / AREA, e = idx - g * AREA;
            put(g, e, src[g * stride + e]);
        }
    }
}

// TQ outputs at row[col0 ..], fewer where the row ends (OW columns); one vector store where every strip is whole
// and its bytes a multiple of 4 (the rows then start aligned: outputs are fresh, 256-byte aligned arrays).
template <int OW>
__device__ __forceinline__ void store_strip(T* __restrict__ row, int col0, const float* acc) {
    constexpr int BYTES = TQ * sizeof(T);
    if constexpr (OW % TQ == 0 && BYTES % 4 == 0) {
        union {
            T t[TQ];
            unsigned u[BYTES / 4];
        } out;
#pragma unroll
        for (int t = 0; t < TQ; ++t) out.t[t] = from_f<T>(acc[t]);
        unsigned* dst = reinterpret_cast<unsigned*>(row + col0);
        if constexpr (BYTES % 16 == 0) {
#pragma unroll
            for (int i = 0; i < BYTES / 16; ++i) {
                reinterpret_cast<uint4*>(dst)[i] = make_uint4(out.u[4 * i], out.u[4 * i + 1], out.u[4 * i + 2],
                                                              out.u[4 * i + 3]);
            }
        } else if constexpr (BYTES % 8 == 0) {
#pragma unroll
            for (int i = 0; i < BYTES / 8; ++i) {
                reinterpret_cast<uint2*>(dst)[i] = make_uint2(out.u[2 * i], out.u[2 * i + 1]);
            }
        } else {
#pragma unroll
            for (int i = 0; i < BYTES / 4; ++i) dst[i] = out.u[i];
        }
    } else {
#pragma unroll
        for (int t = 0; t < TQ; ++t) {
            if (col0 + t < OW) row[col0 + t] = from_f<T>(acc[t]);
        }
    }
}

// The forward's and the input gradient's shared memory: planes [first, first + count) of the N*C from `src`
// (PAH x PAW elements each), zero-padded as the layout defines say, then their filters (RS floats a plane).
template <int PAH, int PAW>
__device__ __forceinline__ void load_block(const T* __restrict__ src, const T* __restrict__ w, int first, int count,
                                           int channels, float* __restrict__ smem) {
    PT* const planes = reinterpret_cast<PT*>(smem);
    float* taps = smem + PLANES_END;
    zero_fill(planes, count * SR * SC);
    for (int i = threadIdx.x; i < count * RS; i += THREADS) {
        const int g = i / RS;
        taps[i] = to_f(w[((first + g) % channels) * RS + i - g * RS]);
    }
    __syncthreads();
    load_planes<PAH, PAW, SR, SC, G_R0, G_C0>(src + (long long)first * PAH * PAW, (long long)PAH * PAW, count,
                                              planes);
    __syncthreads();
}

// Where a block's strips go: its part of the output, or the staging planes in shared memory (the same layout).
__device__ __forceinline__ T* strip_home(T* __restrict__ out, float* smem) {
    if constexpr (OUT != 0) return reinterpret_cast<T*>(smem + OUT);
    return out;
}

// The staged planes, `elems` elements from shared memory (16-byte aligned), out to `out` by 16-byte words where
// its address allows; nothing when the strips went straight out.
__device__ __forceinline__ void write_staged(T* __restrict__ out, const float* smem, int elems) {
    if constexpr (OUT != 0) {
        constexpr int VE = 16 / sizeof(T);
        const T* staged = reinterpret_cast<const T*>(smem + OUT);
        __syncthreads();
        if ((reinterpret_cast<unsigned long long>(out) & 15) == 0) {
            for (int i = threadIdx.x; i < elems / VE; i += THREADS) {
                reinterpret_cast<uint4*>(out)[i] = reinterpret_cast<const uint4*>(staged)[i];
            }
            for (int i = elems / VE * VE + threadIdx.x; i < elems; i += THREADS) out[i] = staged[i];
        } else {
            for (int i = threadIdx.x; i < elems; i += THREADS) out[i] = staged[i];
        }
    }
}

#if G_DIR == 0
// ---------------------------------------------------------------- forward
// grid (planes / PLANES): block b the planes [b*PLANES, ...) of the N*C; flags: 1 = ReLU, 2 = bias. A thread item
// is (plane, strip, row), rows fastest. Shared memory: PLANES source planes, their filters (RS floats each), and
// at G_OUT the staged output planes.
extern "C" __global__ void __launch_bounds__(THREADS) dwt_fwd(const T* __restrict__ x, const T* __restrict__ w,
                                                              const T* __restrict__ bias, T* __restrict__ y,
                                                              int flags, int planes, int channels) {
    constexpr int P = G_P, Q = G_Q, NSEG = (Q + TQ - 1) / TQ, WC = (TQ - 1) * SW + (S - 1) * DW + 1;
    extern __shared__ float smem[];
    const PT* const source = reinterpret_cast<const PT*>(smem);
    const float* taps = smem + PLANES_END;
    const int first = blockIdx.x * PLANES, count = min(PLANES, planes - first);
    load_block<G_H, G_W>(x, w, first, count, channels, smem);
    T* const out = y + (long long)first * P * Q;
    T* const home = strip_home(out, smem);
    for (int it = threadIdx.x; it < count * NSEG * P; it += THREADS) {
        const int p = it % P, rest = it / P, seg = rest % NSEG, g = rest / NSEG;
        const PT* base = source + (g * SR + p * SH) * SC + seg * TQ * SW;
        const float* tg = taps + g * RS;
        const float b0 = (flags & 2) ? to_f(bias[(first + g) % channels]) : 0.0f;
        float acc[TQ];
#pragma unroll
        for (int t = 0; t < TQ; ++t) acc[t] = b0;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            float win[WC];
#pragma unroll
            for (int j = 0; j < WC; ++j) win[j] = to_f(base[r * DH * SC + j]);
#pragma unroll
            for (int s = 0; s < S; ++s) {
                const float tap = tg[r * S + s];
#pragma unroll
                for (int t = 0; t < TQ; ++t) acc[t] = fmaf(win[t * SW + s * DW], tap, acc[t]);
            }
        }
        if (flags & 1) {
#pragma unroll
            for (int t = 0; t < TQ; ++t) acc[t] = acc[t] <= 0.0f ? 0.0f : acc[t];  // NaN stays NaN, as PyTorch's
        }
        store_strip<Q>(home + (g * P + p) * Q, seg * TQ, acc);
    }
    write_staged(out, smem, count * P * Q);
}

#elif G_DIR == 1
// ---------------------------------------------------------------- input gradient
// grid (planes / PLANES). The source planes are dy's (G_P x G_Q); a thread item is (plane, strip of TQ columns,
// block of SH rows), rows fastest. With h = rb*SH + i and w = cb*TQ + j (TQ a multiple of SW), tap (r, s) reaches
// dx[h, w] from dy row rb + (i + PH - r*DH) / SH and column cb*TQ/SW + (j + PW - s*DW) / SW where those divide
// exactly: which taps, and where in the window, are constants once the loops unroll.
extern "C" __global__ void __launch_bounds__(THREADS) dwt_dgrad(const T* __restrict__ dy, const T* __restrict__ w,
                                                                T* __restrict__ dx, int planes, int channels) {
    constexpr int H = G_H, W = G_W, NRB = (H + SH - 1) / SH, NCB = (W + TQ - 1) / TQ, CS = TQ / SW;
    constexpr int OFF_MIN = fdiv(PH - (R - 1) * DH, SH), OFF_MAX = fdiv(SH - 1 + PH, SH);
    constexpr int COFF_MIN = fdiv(PW - (S - 1) * DW, SW), COFF_MAX = fdiv(TQ - 1 + PW, SW);
    constexpr int WR = OFF_MAX - OFF_MIN + 1, WC = COFF_MAX - COFF_MIN + 1;
    static_assert(TQ % SW == 0, "dgrad strips span whole column strides");
    static_assert(G_R0 == -OFF_MIN && G_C0 == -COFF_MIN, "conv_depthwise.py's layout of the dy planes");
    extern __shared__ float smem[];
    const PT* const source = reinterpret_cast<const PT*>(smem);
    const float* taps = smem + PLANES_END;
    const int first = blockIdx.x * PLANES, count = min(PLANES, planes - first);
    load_block<G_P, G_Q>(dy, w, first, count, channels, smem);
    T* const out = dx + (long long)first * H * W;
    T* const home = strip_home(out, smem);
    for (int it = threadIdx.x; it < count * NCB * NRB; it += THREADS) {
        const int rb = it % NRB, rest = it / NRB, cb = rest % NCB, g = rest / NCB;
        const PT* base = source + (g * SR + rb) * SC + cb * CS;
        const float* tg = taps + g * RS;
        float acc[SH][TQ];
#pragma unroll
        for (int i = 0; i < SH; ++i) {
#pragma unroll
            for (int t = 0; t < TQ; ++t) acc[i][t] = 0.0f;
        }
#pragma unroll
        for (int a = 0; a < WR; ++a) {
            float win[WC];
#pragma unroll
            for (int j = 0; j < WC; ++j) win[j] = to_f(base[a * SC + j]);
#pragma unroll
            for (int i = 0; i < SH; ++i) {
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    const int d = i + PH - r * DH;
                    if (!divides(SH, d) || fdiv(d, SH) - OFF_MIN != a) continue;
#pragma unroll
                    for (int s = 0; s < S; ++s) {
                        const float tap = tg[r * S + s];
#pragma unroll
                        for (int t = 0; t < TQ; ++t) {
                            const int e = t + PW - s * DW;
                            if (divides(SW, e)) acc[i][t] = fmaf(win[fdiv(e, SW) - COFF_MIN], tap, acc[i][t]);
                        }
                    }
                }
            }
        }
#pragma unroll
        for (int i = 0; i < SH; ++i) {
            const int h = rb * SH + i;
            if (h < H) store_strip<W>(home + (g * H + h) * W, cb * TQ, acc[i]);
        }
    }
    write_staged(out, smem, count * H * W);
}

#else
// ---------------------------------------------------------------- filter and bias gradients
// grid (splits, C): block (b, c) sums images [b*per, min(N, b*per + per)) of channel c, PLANES images at a time,
// into part[b, c, 0..RS] (dW's taps, then db). Shared memory: PLANES x planes as the forward lays them, then
// PLANES dy planes of P x NSEG*TQ floats (zeros past Q). Items as the forward's: each thread keeps its RS + 1 sums
// over all its items, then the block adds them, warps in order.
extern "C" __global__ void __launch_bounds__(THREADS) dwt_wgrad(const T* __restrict__ x, const T* __restrict__ dy,
                                                                float* __restrict__ part, int images, int per,
                                                                int channels) {
    constexpr int P = G_P, Q = G_Q, NSEG = (Q + TQ - 1) / TQ, QZ = NSEG * TQ;
    constexpr int WC = (TQ - 1) * SW + (S - 1) * DW + 1;
    extern __shared__ float smem[];
    float* dzs = smem + PLANES_END;
    const int c = blockIdx.y, n0 = blockIdx.x * per, n1 = min(images, n0 + per);
    float acc[RS + 1];
#pragma unroll
    for (int i = 0; i <= RS; ++i) acc[i] = 0.0f;
    for (int n = n0; n < n1; n += PLANES) {
        const int count = min(PLANES, n1 - n);
        __syncthreads();  // (the previous images' reads are done)
        zero_fill(smem, count * SR * SC);
        zero_fill(dzs, count * P * QZ);
        __syncthreads();
        const long long step = (long long)channels * G_H * G_W, dstep = (long long)channels * P * Q;
        load_planes<G_H, G_W, SR, SC, G_R0, G_C0>(x + ((long long)n * channels + c) * G_H * G_W, step, count, smem);
        load_planes<P, Q, P, QZ, 0, 0>(dy + ((long long)n * channels + c) * P * Q, dstep, count, dzs);
        __syncthreads();
        for (int it = threadIdx.x; it < count * NSEG * P; it += THREADS) {
            const int p = it % P, rest = it / P, seg = rest % NSEG, g = rest / NSEG;
            const float* base = smem + (g * SR + p * SH) * SC + seg * TQ * SW;
            const float* dz = dzs + (g * P + p) * QZ + seg * TQ;
            float d[TQ];
#pragma unroll
            for (int t = 0; t < TQ; ++t) {
                d[t] = dz[t];
                acc[RS] += d[t];
            }
#pragma unroll
            for (int r = 0; r < R; ++r) {
                float win[WC];
#pragma unroll
                for (int j = 0; j < WC; ++j) win[j] = base[r * DH * SC + j];
#pragma unroll
                for (int s = 0; s < S; ++s) {
#pragma unroll
                    for (int t = 0; t < TQ; ++t) acc[r * S + s] = fmaf(d[t], win[t * SW + s * DW], acc[r * S + s]);
                }
            }
        }
    }
    block_sums_to<RS + 1, THREADS / 32>(acc, part + ((long long)blockIdx.x * channels + c) * (RS + 1));
}
#endif
