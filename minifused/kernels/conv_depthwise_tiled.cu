// Depthwise convolution with one filter a channel (K = C), no ReLU mask, on whole planes in shared memory: the
// bandwidth-bound path of conv_depthwise.py. A block copies its source planes into shared memory with 16-byte
// loads (all of a thread's loads in flight before any is stored), as floats, zero-padded, then each thread
// computes a strip of TQ outputs of one row (dgrad: SH rows) from a window of the plane read into registers, so
// each input is read from shared memory about once per strip rather than once per tap.
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
// plane of G_SR x G_SC floats (G_SC odd: the threads of a warp take consecutive rows, so their reads fall in
// distinct banks), source pixel (i, j) at (i + G_R0, j + G_C0).
//
// nvrtc-check: -DCONV_T=__half -DG_DIR=0 -DG_R=3 -DG_S=3 -DG_SH=1 -DG_SW=1 -DG_PH=1 -DG_PW=1 -DG_DH=1 -DG_DW=1 -DG_H=56 -DG_W=56 -DG_P=56 -DG_Q=56 -DG_TQ=8 -DG_PLANES=1 -DG_SR=58 -DG_SC=59 -DG_R0=1 -DG_C0=1
// nvrtc-check: -DCONV_T=__nv_bfloat16 -DG_DIR=1 -DG_R=5 -DG_S=5 -DG_SH=2 -DG_SW=1 -DG_PH=0 -DG_PW=3 -DG_DH=2 -DG_DW=1 -DG_H=13 -DG_W=9 -DG_P=3 -DG_Q=11 -DG_TQ=8 -DG_PLANES=3 -DG_SR=11 -DG_SC=21 -DG_R0=4 -DG_C0=1
// nvrtc-check: -DCONV_T=float -DG_DIR=2 -DG_R=3 -DG_S=3 -DG_SH=2 -DG_SW=2 -DG_PH=1 -DG_PW=1 -DG_DH=1 -DG_DW=1 -DG_H=112 -DG_W=112 -DG_P=56 -DG_Q=56 -DG_TQ=8 -DG_PLANES=2 -DG_SR=113 -DG_SC=113 -DG_R0=1 -DG_C0=1
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef CONV_T
#define CONV_T float
#endif
typedef CONV_T T;

#include "dtypes.cuh"  // to_f / from_f
#include "reduce.cuh"  // warp_sum

constexpr int R = G_R, S = G_S, SH = G_SH, SW = G_SW, PH = G_PH, PW = G_PW, DH = G_DH, DW = G_DW;
constexpr int RS = R * S, TQ = G_TQ, PLANES = G_PLANES, SR = G_SR, SC = G_SC;
constexpr int THREADS = 256;

// floor division and its remainder's test, for the dgrad's tap offsets (negative ones included)
__host__ __device__ constexpr int fdiv(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
__host__ __device__ constexpr bool divides(int b, int a) { return a - fdiv(a, b) * b == 0; }

// Zeros into `cells` floats of shared memory: the padding and the strips' overhang, which read zeros. Written once a
// block: the planes' pixels land on the same cells for every group, and the padding is never written.
__device__ __forceinline__ void zero_fill(float* dst, int cells) {
    for (int i = threadIdx.x; i < cells; i += THREADS) dst[i] = 0.0f;
}

// Element k of a 4-byte word of T's, and a word from two outputs (16-bit T's) or one: bit operations, where a
// pointer cast or a union of a register would put it in local memory. (The tag argument picks the 16-bit type.)
__device__ __forceinline__ float from_bits(unsigned short b, __half) { return __half2float(__ushort_as_half(b)); }
__device__ __forceinline__ float from_bits(unsigned short b, __nv_bfloat16) {
    return __bfloat162float(__ushort_as_bfloat16(b));
}
__device__ __forceinline__ float from_bits(unsigned short, float) { return 0.0f; }  // (floats are whole words)
__device__ __forceinline__ unsigned short to_bits(float v, __half) { return __half_as_ushort(__float2half_rn(v)); }
__device__ __forceinline__ unsigned short to_bits(float v, __nv_bfloat16) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}
__device__ __forceinline__ unsigned short to_bits(float, float) { return 0; }

__device__ __forceinline__ float element(unsigned word, int k) {
    if constexpr (sizeof(T) == 4) {
        return __uint_as_float(word);
    } else {
        return from_bits((unsigned short)(k ? word >> 16 : word & 0xffffu), T());
    }
}
__device__ __forceinline__ unsigned word_of(const float* acc, int i) {
    if constexpr (sizeof(T) == 4) {
        return __float_as_uint(acc[i]);
    } else {
        return (unsigned)to_bits(acc[2 * i], T()) | ((unsigned)to_bits(acc[2 * i + 1], T()) << 16);
    }
}

// A group of up to NP planes of PH_ x PW_ elements, copied into shared memory as floats: plane g's pixel (i, j) at
// dst[(g * ROWS + i + R0) * COLS + j + C0] where that is inside ROWS x COLS (pixels no output reads are left out).
// The copy goes by 4-byte words, lane after lane (a warp reads 128 consecutive bytes, and its stores into shared
// memory fall in distinct banks, or two to a bank for 16-bit types; 16-byte words put eight lanes on a bank).
// `issue` starts the group's first MAXW words a thread into registers (all in flight at once) and `scatter` stores
// them, then loads and stores the rest (the loads issued early overlap the computation on the group before;
// conv_depthwise.py sizes the groups so that there is seldom a rest). The words run over the group's elements
// where the planes follow each other (stride == AREA: the host makes each group start 4-byte aligned), else plane
// by plane (AREA and the stride whole words); otherwise, or where the source is not 4-byte aligned, `scatter`
// loads the elements one by one itself.
template <int PH_, int PW_, int NP, int ROWS, int COLS, int R0, int C0, int MAXW>
struct Group {
    static constexpr int AREA = PH_ * PW_, EW = 4 / sizeof(T);  // elements a word
    static constexpr int ALL = (NP * AREA + EW * THREADS - 1) / (EW * THREADS);  // words a thread, at most
    static constexpr int PER = ALL < MAXW ? ALL : MAXW;                            // of which issued early
    unsigned v[PER];
    bool vec;

    __device__ __forceinline__ static void put(float* dst, int g, int e, float val) {
        const int i = e / PW_ + R0, j = e - (e / PW_) * PW_ + C0;
        if (i >= 0 && i < ROWS && j >= 0 && j < COLS) dst[(g * ROWS + i) * COLS + j] = val;
    }

    // words of the group; where word `idx` starts: its plane g, its element e in the plane, its offset from src
    __device__ __forceinline__ static int words(long long stride, int count) {
        return stride == AREA ? count * AREA / EW : count * (AREA / EW);
    }
    __device__ __forceinline__ static long long offset(int idx, long long stride, int& g, int& e) {
        if (stride == AREA) {
            g = idx * EW / AREA;
            e = idx * EW - g * AREA;
            return (long long)idx * EW;
        }
        g = idx / (AREA / EW);
        e = (idx - g * (AREA / EW)) * EW;
        return g * stride + e;
    }
    __device__ __forceinline__ static unsigned load(const T* __restrict__ src, int idx, long long stride) {
        int g, e;
        return __ldg(reinterpret_cast<const unsigned*>(src + offset(idx, stride, g, e)));
    }
    __device__ __forceinline__ static void store(float* __restrict__ dst, int idx, long long stride, unsigned word) {
        int g, e;
        offset(idx, stride, g, e);
#pragma unroll
        for (int k = 0; k < EW; ++k) put(dst, g + (e + k) / AREA, (e + k) % AREA, element(word, k));
    }

    __device__ __forceinline__ void issue(const T* __restrict__ src, long long stride, int count) {
        vec = (reinterpret_cast<unsigned long long>(src) & 3) == 0 &&
              (stride == AREA || (AREA % EW == 0 && (stride * (long long)sizeof(T)) % 4 == 0));
        if (!vec) return;
        const int nw = words(stride, count);
#pragma unroll
        for (int u = 0; u < PER; ++u) {
            const int idx = threadIdx.x + u * THREADS;
            if (idx < nw) v[u] = load(src, idx, stride);
        }
    }

    __device__ __forceinline__ void scatter(const T* __restrict__ src, long long stride, int count,
                                            float* __restrict__ dst) const {
        int tail = 0;  // the elements past the last whole word (a group of planes that follow each other)
        if (vec) {
            const int nw = words(stride, count);
#pragma unroll
            for (int u = 0; u < PER; ++u) {
                const int idx = threadIdx.x + u * THREADS;
                if (idx < nw) store(dst, idx, stride, v[u]);
            }
            for (int base = threadIdx.x + PER * THREADS; base < nw; base += 8 * THREADS) {  // the rest
                unsigned rest[8];
#pragma unroll
                for (int u = 0; u < 8; ++u) {
                    if (base + u * THREADS < nw) rest[u] = load(src, base + u * THREADS, stride);
                }
#pragma unroll
                for (int u = 0; u < 8; ++u) {
                    if (base + u * THREADS < nw) store(dst, base + u * THREADS, stride, rest[u]);
                }
            }
            tail = stride == AREA ? nw * EW : count * AREA;
        }
        for (int idx = tail + threadIdx.x; idx < count * AREA; idx += THREADS) {
            const int g = idx / AREA, e = idx - g * AREA;
            put(dst, g, e, to_f(src[g * stride + e]));
        }
    }
};

// TQ outputs at row[col0 ..], fewer where the row ends (OW columns); vector stores where every strip is whole and
// its bytes a multiple of 4 (the rows then start aligned: outputs are fresh, 256-byte aligned arrays).
template <int OW>
__device__ __forceinline__ void store_strip(T* __restrict__ row, int col0, const float* acc) {
    constexpr int BYTES = TQ * sizeof(T);
    if constexpr (OW % TQ == 0 && BYTES % 4 == 0) {
        unsigned* dst = reinterpret_cast<unsigned*>(row + col0);
        if constexpr (BYTES % 16 == 0) {
#pragma unroll
            for (int i = 0; i < BYTES / 16; ++i) {
                reinterpret_cast<uint4*>(dst)[i] = make_uint4(word_of(acc, 4 * i), word_of(acc, 4 * i + 1),
                                                              word_of(acc, 4 * i + 2), word_of(acc, 4 * i + 3));
            }
        } else if constexpr (BYTES % 8 == 0) {
#pragma unroll
            for (int i = 0; i < BYTES / 8; ++i) {
                reinterpret_cast<uint2*>(dst)[i] = make_uint2(word_of(acc, 2 * i), word_of(acc, 2 * i + 1));
            }
        } else {
#pragma unroll
            for (int i = 0; i < BYTES / 4; ++i) dst[i] = word_of(acc, i);
        }
    } else {
#pragma unroll
        for (int t = 0; t < TQ; ++t) {
            if (col0 + t < OW) row[col0 + t] = from_f<T>(acc[t]);
        }
    }
}

#if G_DIR == 0
// ---------------------------------------------------------------- forward
// Persistent blocks: block b takes the groups of PLANES planes (of the N*C) b, b + gridDim.x, ...; flags: 1 = ReLU,
// 2 = bias. A thread item is (plane, strip, row), rows fastest. Shared memory: PLANES source planes, then their
// filters (RS floats each).
extern "C" __global__ void __launch_bounds__(THREADS) dwt_fwd(const T* __restrict__ x, const T* __restrict__ w,
                                                              const T* __restrict__ bias, T* __restrict__ y,
                                                              int flags, int planes, int channels) {
    constexpr int P = G_P, Q = G_Q, NSEG = (Q + TQ - 1) / TQ, WC = (TQ - 1) * SW + (S - 1) * DW + 1;
    extern __shared__ float smem[];
    float* taps = smem + PLANES * SR * SC;
    Group<G_H, G_W, PLANES, SR, SC, G_R0, G_C0, 16> group;
    constexpr long long AREA = G_H * G_W;
    const int groups = (planes + PLANES - 1) / PLANES;
    zero_fill(smem, PLANES * SR * SC);
    int b = blockIdx.x;
    if (b < groups) group.issue(x + b * PLANES * AREA, AREA, min(PLANES, planes - b * PLANES));
    for (; b < groups; b += gridDim.x) {
        const int first = b * PLANES, count = min(PLANES, planes - first);
        __syncthreads();  // (the previous group's reads are done)
        group.scatter(x + first * AREA, AREA, count, smem);
        for (int i = threadIdx.x; i < count * RS; i += THREADS) {
            const int g = i / RS;
            taps[i] = to_f(w[((first + g) % channels) * RS + i - g * RS]);
        }
        __syncthreads();
        const int next = b + gridDim.x;
        if (next < groups) group.issue(x + next * PLANES * AREA, AREA, min(PLANES, planes - next * PLANES));
        for (int it = threadIdx.x; it < count * NSEG * P; it += THREADS) {
            const int p = it % P, rest = it / P, seg = rest % NSEG, g = rest / NSEG;
            const float* base = smem + (g * SR + p * SH) * SC + seg * TQ * SW;
            const float* tg = taps + g * RS;
            const float b0 = (flags & 2) ? to_f(bias[(first + g) % channels]) : 0.0f;
            float acc[TQ];
#pragma unroll
            for (int t = 0; t < TQ; ++t) acc[t] = b0;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                float win[WC];
#pragma unroll
                for (int j = 0; j < WC; ++j) win[j] = base[r * DH * SC + j];
#pragma unroll
                for (int s = 0; s < S; ++s) {
                    const float tap = tg[r * S + s];
#pragma unroll
                    for (int t = 0; t < TQ; ++t) acc[t] = fmaf(win[t * SW + s * DW], tap, acc[t]);
                }
            }
            if (flags & 1) {
#pragma unroll
                for (int t = 0; t < TQ; ++t) acc[t] = acc[t] <= 0.0f ? 0.0f : acc[t];  // NaN stays NaN (PyTorch's)
            }
            store_strip<Q>(y + ((long long)(first + g) * P + p) * Q, seg * TQ, acc);
        }
    }
}

#elif G_DIR == 1
// ---------------------------------------------------------------- input gradient
// Persistent blocks over groups of planes, as the forward's. The source planes are dy's (G_P x G_Q); a thread
// item is (plane, strip of TQ columns, block of SH rows), rows fastest. With h = rb*SH + i and w = cb*TQ + j (TQ a
// multiple of SW), tap (r, s) reaches dx[h, w] from dy row rb + (i + PH - r*DH) / SH and column
// cb*TQ/SW + (j + PW - s*DW) / SW where those divide exactly: which taps, and where in the window, are constants
// once the loops unroll.
extern "C" __global__ void __launch_bounds__(THREADS) dwt_dgrad(const T* __restrict__ dy, const T* __restrict__ w,
                                                                T* __restrict__ dx, int planes, int channels) {
    constexpr int H = G_H, W = G_W, NRB = (H + SH - 1) / SH, NCB = (W + TQ - 1) / TQ, CS = TQ / SW;
    constexpr int OFF_MIN = fdiv(PH - (R - 1) * DH, SH), OFF_MAX = fdiv(SH - 1 + PH, SH);
    constexpr int COFF_MIN = fdiv(PW - (S - 1) * DW, SW), COFF_MAX = fdiv(TQ - 1 + PW, SW);
    constexpr int WR = OFF_MAX - OFF_MIN + 1, WC = COFF_MAX - COFF_MIN + 1;
    static_assert(TQ % SW == 0, "dgrad strips span whole column strides");
    static_assert(G_R0 == -OFF_MIN && G_C0 == -COFF_MIN, "conv_depthwise.py's layout of the dy planes");
    extern __shared__ float smem[];
    float* taps = smem + PLANES * SR * SC;
    Group<G_P, G_Q, PLANES, SR, SC, G_R0, G_C0, 16> group;
    constexpr long long AREA = G_P * G_Q;
    const int groups = (planes + PLANES - 1) / PLANES;
    zero_fill(smem, PLANES * SR * SC);
    int b = blockIdx.x;
    if (b < groups) group.issue(dy + b * PLANES * AREA, AREA, min(PLANES, planes - b * PLANES));
    for (; b < groups; b += gridDim.x) {
        const int first = b * PLANES, count = min(PLANES, planes - first);
        __syncthreads();  // (the previous group's reads are done)
        group.scatter(dy + first * AREA, AREA, count, smem);
        for (int i = threadIdx.x; i < count * RS; i += THREADS) {
            const int g = i / RS;
            taps[i] = to_f(w[((first + g) % channels) * RS + i - g * RS]);
        }
        __syncthreads();
        const int next = b + gridDim.x;
        if (next < groups) group.issue(dy + next * PLANES * AREA, AREA, min(PLANES, planes - next * PLANES));
        for (int it = threadIdx.x; it < count * NCB * NRB; it += THREADS) {
            const int rb = it % NRB, rest = it / NRB, cb = rest % NCB, g = rest / NCB;
            const float* base = smem + (g * SR + rb) * SC + cb * CS;
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
                for (int j = 0; j < WC; ++j) win[j] = base[a * SC + j];
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
                if (h < H) store_strip<W>(dx + ((long long)(first + g) * H + h) * W, cb * TQ, acc[i]);
            }
        }
    }
}

#else
// ---------------------------------------------------------------- filter and bias gradients
// grid (splits, C): block (b, c) sums images [b*per, min(N, b*per + per)) of channel c, PLANES images at a time
// (the next ones' loads in flight during the sums of these), into part[b, c, 0..RS] (dW's taps, then db). Shared
// memory: PLANES x planes as the forward lays them, then PLANES dy planes of P x NSEG*TQ floats (zeros past Q).
// Items as the forward's: each thread keeps its RS + 1 sums over all its items, then the block adds them, warps in
// order.
extern "C" __global__ void __launch_bounds__(THREADS) dwt_wgrad(const T* __restrict__ x, const T* __restrict__ dy,
                                                                float* __restrict__ part, int images, int per,
                                                                int channels) {
    constexpr int P = G_P, Q = G_Q, NSEG = (Q + TQ - 1) / TQ, QZ = NSEG * TQ;
    constexpr int WC = (TQ - 1) * SW + (S - 1) * DW + 1;
    extern __shared__ float smem[];
    float* dzs = smem + PLANES * SR * SC;
    Group<G_H, G_W, PLANES, SR, SC, G_R0, G_C0, 4> xg;
    Group<P, Q, PLANES, P, QZ, 0, 0, 4> dg;
    const int c = blockIdx.y, n0 = blockIdx.x * per, n1 = min(images, n0 + per);
    const long long step = (long long)channels * G_H * G_W, dstep = (long long)channels * P * Q;
    const T* xc = x + (long long)c * G_H * G_W;
    const T* dc = dy + (long long)c * P * Q;
    float acc[RS + 1];
#pragma unroll
    for (int i = 0; i <= RS; ++i) acc[i] = 0.0f;
    zero_fill(smem, PLANES * (SR * SC + P * QZ));
    if (n0 < n1) {
        xg.issue(xc + n0 * step, step, min(PLANES, n1 - n0));
        dg.issue(dc + n0 * dstep, dstep, min(PLANES, n1 - n0));
    }
    for (int n = n0; n < n1; n += PLANES) {
        const int count = min(PLANES, n1 - n);
        __syncthreads();  // (the previous images' reads are done)
        xg.scatter(xc + n * step, step, count, smem);
        dg.scatter(dc + n * dstep, dstep, count, dzs);
        __syncthreads();
        const int next = n + PLANES;
        if (next < n1) {
            xg.issue(xc + next * step, step, min(PLANES, n1 - next));
            dg.issue(dc + next * dstep, dstep, min(PLANES, n1 - next));
        }
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
    __shared__ float sums[THREADS / 32][RS + 1];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int i = 0; i <= RS; ++i) {
        const float v = warp_sum(acc[i]);
        if (lane == 0) sums[warp][i] = v;
    }
    __syncthreads();
    for (int i = threadIdx.x; i <= RS; i += THREADS) {
        float v = 0.0f;
#pragma unroll
        for (int wp = 0; wp < THREADS / 32; ++wp) v += sums[wp][i];
        part[((long long)blockIdx.x * channels + c) * (RS + 1) + i] = v;
    }
}
#endif
