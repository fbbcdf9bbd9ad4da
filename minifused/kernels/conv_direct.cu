// Direct convolution for layers with a short reduction (C*R*S <= CRS_MAX, groups = 1), such
// as a network's first layer on 1- or 3-channel images. The implicit GEMM pads C to 16 bytes
// (C = 1 becomes 8: 8x the work) and needs two repack launches per call; here one thread
// gathers its output pixel's C*R*S inputs into registers straight from NCHW and one launch
// does the whole forward (or the whole filter gradient).
//
//   conv_direct_fwd    y = act(conv(x, w) + bias) in NCHW, and the bit-packed ReLU mask
//   conv_direct_wgrad  per-block partial sums of dW (K, C*R*S) and db (K) from dy (NCHW),
//                      masked by the ReLU mask; conv_direct_reduce adds the partials in
//                      block order (deterministic, no atomics)
//
// Layouts as conv.py: x (N, C, H, W), w (K, C, R, S), y / dy (N, K, P, Q); the mask is uint32
// (K, words), bit m % 32 of word [k, m / 32] for m = n*P*Q + p*Q + q. Index math is 32-bit
// (conv_plan.py routes here only what fits). G_NHWC=1 (the forward of a channels-last x): x's memory
// is (N, H, W, C) and y's (N, P, Q, K), K a multiple of 8 (fp16 / bf16 outputs go out through shared
// memory, fp32 ones eight channels a store: see conv_direct_fwd).
//
// conv_plan.py compiles one module per filter shape: C, R and S arrive as defines (G_C, G_R, G_S),
// so the reduction loops run exactly C*R*S steps instead of CRS_MAX predicated ones and the
// divisions by R*S and S are by constants (multiply and shift). The rest of the geometry is read
// from a small device array (one per configuration, made once by conv_plan.py): one module serves
// every image size, batch, stride, padding and dilation, and a launch passes one pointer for it
// instead of 15 scalars (the host's launch cost grows with the argument count).
//
// nvrtc-check: -DCONV_T=__half -DG_C=1 -DG_R=3 -DG_S=3
// nvrtc-check: -DCONV_T=__nv_bfloat16 -DG_C=3 -DG_R=3 -DG_S=2
// nvrtc-check: -DCONV_T=float -DG_C=2 -DG_R=4 -DG_S=4
// nvrtc-check: -DCONV_T=__nv_bfloat16 -DG_C=3 -DG_R=3 -DG_S=3 -DG_NHWC=1
// nvrtc-check: -DCONV_T=float -DG_C=1 -DG_R=5 -DG_S=5 -DG_NHWC=1
// nvrtc-check: -DCONV_T=__nv_bfloat16 -DG_C=3 -DG_R=3 -DG_S=3 -DG_NHWC=1 -DG_PIX=2
// nvrtc-check: -DCONV_T=__half -DG_C=1 -DG_R=3 -DG_S=3 -DG_PIX=4
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef CONV_T
#define CONV_T float
#endif
typedef CONV_T T;
#ifndef G_NHWC
#define G_NHWC 0
#endif

#include "dtypes.cuh"  // to_f / from_f
#include "vec.cuh"

#define CRS_MAX 32  // longest reduction handled here (conv_plan.py's DIRECT_CRS_MAX)
#define K_MAX 64    // most output channels of the filter gradient kernel
#define CHUNK 64    // output pixels staged per step of the filter gradient
#define DIRECT_PIXELS 256  // output pixels a block of the forward covers (conv_plan.py's DIRECT_PIXELS)
#ifndef G_PIX
#define G_PIX 1
#endif
constexpr int PIX = G_PIX;  // output pixels a thread of the forward computes

struct Geometry {
    int N, C, H, W, K, R, S, P, Q, sh, sw, ph, pw, dh, dw;
};
// The geometry: geo[0..14] = N, C, H, W, K, R, S, P, Q, sh, sw, ph, pw, dh, dw (C, R, S as compiled).
#define GEOMETRY_ARGS const int* __restrict__ geo
#define GEOMETRY {geo[0], G_C, geo[2], geo[3], geo[4], G_R, G_S, geo[7], geo[8], geo[9], geo[10], geo[11], \
                  geo[12], geo[13], geo[14]}

// The C*R*S inputs under output pixel m (zero outside the image), as floats.
__device__ __forceinline__ void gather(const T* __restrict__ x, const Geometry& g, int m, float* v) {
    const int pq = g.P * g.Q;
    const int n = m / pq, rem = m - n * pq;
    const int p = rem / g.Q, q = rem - p * g.Q;
    const int h0 = p * g.sh - g.ph, w0 = q * g.sw - g.pw;
    const int crs = g.C * g.R * g.S;
#pragma unroll
    for (int i = 0; i < CRS_MAX; ++i) {
        float val = 0.0f;
        if (i < crs) {
            const int c = i / (g.R * g.S), rs = i - c * g.R * g.S;
            const int r = rs / g.S, s = rs - r * g.S;
            const int h = h0 + r * g.dh, w = w0 + s * g.dw;
            if (h >= 0 && h < g.H && w >= 0 && w < g.W)
                val = to_f(x[G_NHWC ? ((n * g.H + h) * g.W + w) * g.C + c : ((n * g.C + c) * g.H + h) * g.W + w]);
        }
        v[i] = val;
    }
}

// PIX output pixels a thread, all K channels: each weight read from shared memory feeds PIX FMAs (the shared
// loads, one per four FMAs with a pixel a thread, bounded the kernel as much as the FMAs). A block of
// DIRECT_PIXELS / PIX threads covers DIRECT_PIXELS consecutive pixels, thread t those at t, t + blockDim.x, ...;
// each warp's 32 pixels of a set start at a multiple of 32, so each ReLU mask word is one ballot. flags: 1 = ReLU,
// 2 = bias (conv_plan.py's Epilogue).
extern "C" __global__ void __launch_bounds__(DIRECT_PIXELS / PIX) conv_direct_fwd(
        const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias, T* __restrict__ y,
        unsigned* __restrict__ mask, int flags, int words, GEOMETRY_ARGS) {
    const Geometry g = GEOMETRY;
    // A channel's weights padded to whole float4s (zeros past C*R*S, where v is zero too): every thread reads
    // the same weights, so one 16-byte shared load feeds 4 * PIX FMAs.
    constexpr int CRSP = (G_C * G_R * G_S + 3) / 4 * 4;
    __shared__ __align__(16) float ws[K_MAX * CRSP];
    __shared__ float bs[K_MAX];
    // STAGED (NHWC, 16-bit T): the block's outputs gathered in shared memory, a pixel's row of TILE_ROW
    // elements, eight channels (16 bytes) a store, then written out 16 bytes a thread by consecutive threads (its
    // pixels' rows are consecutive in y: coalesced). A row of 36 words: the eight threads of a 16-byte store's
    // phase, rows apart, fall in distinct banks. A thread's own stores to y (16 bytes, K * 2 bytes apart across a
    // warp) each touched 32 sectors; two channels a store and 4-byte words out cost more instructions than the
    // FMAs (the kernel was bound by its instructions' issue).
    constexpr bool STAGED = G_NHWC && sizeof(T) == 2;
    constexpr int TILE_ROW = K_MAX + 8;
    __shared__ __align__(16) T tile[STAGED ? DIRECT_PIXELS * TILE_ROW : 1];
    const int crs = g.C * g.R * g.S;
    const int M = g.N * g.P * g.Q, pq = g.P * g.Q;
    const int m0 = blockIdx.x * DIRECT_PIXELS;
    float v[PIX][CRS_MAX];
    int n[PIX], rem[PIX];
#pragma unroll
    for (int i = 0; i < PIX; ++i) {
        const int m = m0 + threadIdx.x + i * blockDim.x;
        if (m < M) gather(x, g, m, v[i]);
        n[i] = m < M ? m / pq : 0;
        rem[i] = m < M ? m - n[i] * pq : 0;
    }
    for (int k0 = 0; k0 < g.K; k0 += K_MAX) {  // weights staged K_MAX channels at a time
        const int kn = min(K_MAX, g.K - k0);
        __syncthreads();
        for (int i = threadIdx.x; i < kn * CRSP; i += blockDim.x) {
            const int kk = i / CRSP, j = i - kk * CRSP;
            ws[i] = j < crs ? to_f(w[(k0 + kk) * crs + j]) : 0.0f;
        }
        for (int i = threadIdx.x; i < kn; i += blockDim.x) bs[i] = (flags & 2) ? to_f(bias[k0 + i]) : 0.0f;
        __syncthreads();
        // channels a trip (kn is a multiple): NHWC 16-byte runs into the tile, or 32-byte runs of fp32
        constexpr int GROUP = G_NHWC ? 8 : 1;
        for (int kg = 0; kg < kn; kg += GROUP) {
            float out[PIX][GROUP];
#pragma unroll
            for (int e = 0; e < GROUP; ++e) {
                const int kk = kg + e;
#pragma unroll
                for (int i = 0; i < PIX; ++i) out[i][e] = bs[kk];
                const float4* wk = reinterpret_cast<const float4*>(ws + kk * CRSP);
#pragma unroll
                for (int j = 0; j < CRSP / 4; ++j) {
                    const float4 q = wk[j];
#pragma unroll
                    for (int i = 0; i < PIX; ++i) {
                        float acc = out[i][e];
                        acc = fmaf(v[i][4 * j], q.x, acc);
                        acc = fmaf(v[i][4 * j + 1], q.y, acc);
                        acc = fmaf(v[i][4 * j + 2], q.z, acc);
                        acc = fmaf(v[i][4 * j + 3], q.w, acc);
                        out[i][e] = acc;
                    }
                }
#pragma unroll
                for (int i = 0; i < PIX; ++i) {
                    const int m = m0 + threadIdx.x + i * blockDim.x;
                    const bool pos = !(out[i][e] <= 0.0f);  // NaN stays NaN and keeps its gradient, as in PyTorch
                    if (flags & 1) out[i][e] = pos ? out[i][e] : 0.0f;
                    if (mask != nullptr) {
                        const unsigned bits = __ballot_sync(0xffffffffu, m < M && pos);
                        if ((threadIdx.x & 31) == 0 && m < M) mask[(long long)(k0 + kk) * words + (m >> 5)] = bits;
                    }
                }
            }
#pragma unroll
            for (int i = 0; i < PIX; ++i) {
                const int r = threadIdx.x + i * blockDim.x, m = m0 + r;
                if (m >= M) continue;
                if (G_NHWC) {
                    Vec<T, GROUP> o;
#pragma unroll
                    for (int e = 0; e < GROUP; ++e) o.v[e] = from_f<T>(out[i][e]);
                    T* at = STAGED ? tile + r * TILE_ROW + kg : y + (long long)m * g.K + k0 + kg;
                    *reinterpret_cast<Vec<T, GROUP>*>(at) = o;
                } else {
                    y[(n[i] * g.K + k0 + kg) * pq + rem[i]] = from_f<T>(out[i][0]);
                }
            }
        }
        if (STAGED) {  // the block's pixels' channels k0 .. k0 + kn, 16 bytes (eight channels) a thread at a time
            __syncthreads();
            const int runs = kn / 8;  // a row's 16-byte runs
            for (int i = threadIdx.x; i < DIRECT_PIXELS * runs; i += blockDim.x) {
                const int r = i / runs, q = i - r * runs;
                if (m0 + r < M)
                    *reinterpret_cast<uint4*>(y + (long long)(m0 + r) * g.K + k0 + 8 * q) =
                        *reinterpret_cast<const uint4*>(tile + r * TILE_ROW + 8 * q);
            }
        }
    }
}

// Partial filter and bias gradients: block b handles pixel chunks b, b + gridDim.x, ... and
// writes part[b, k, i] for i < C*R*S (dW) and i = C*R*S (db). dz = dy * mask is formed on load.
extern "C" __global__ void __launch_bounds__(256) conv_direct_wgrad(const T* __restrict__ x, const T* __restrict__ dy,
                                                                    const unsigned* __restrict__ mask,
                                                                    float* __restrict__ part, int words,
                                                                    GEOMETRY_ARGS) {
    const Geometry g = GEOMETRY;
    __shared__ float dz[K_MAX][CHUNK + 1];
    __shared__ float patch[CHUNK][CRS_MAX + 1];
    const int crs = g.C * g.R * g.S, cols = crs + 1;
    const int M = g.N * g.P * g.Q, pq = g.P * g.Q;
    const int pairs = g.K * cols;
    constexpr int PER = (K_MAX * (CRS_MAX + 1) + 255) / 256;  // (k, i) pairs per thread, at most
    float acc[PER];
#pragma unroll
    for (int j = 0; j < PER; ++j) acc[j] = 0.0f;
    const int chunks = (M + CHUNK - 1) / CHUNK;
    for (int chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
        const int m0 = chunk * CHUNK;
        __syncthreads();
        for (int t = threadIdx.x; t < g.K * CHUNK; t += blockDim.x) {  // consecutive threads: consecutive pixels
            const int k = t / CHUNK, j = t - k * CHUNK, m = m0 + j;
            float val = 0.0f;
            if (m < M) {
                const int n = m / pq;
                val = to_f(dy[(n * g.K + k) * pq + (m - n * pq)]);
                if (mask != nullptr && !((mask[(long long)k * words + (m >> 5)] >> (m & 31)) & 1u)) val = 0.0f;
            }
            dz[k][j] = val;
        }
        if (threadIdx.x < CHUNK) {
            const int m = m0 + threadIdx.x;
            float v[CRS_MAX];
            if (m < M) {
                gather(x, g, m, v);
            } else {
#pragma unroll
                for (int i = 0; i < CRS_MAX; ++i) v[i] = 0.0f;
            }
#pragma unroll
            for (int i = 0; i < CRS_MAX; ++i) patch[threadIdx.x][i] = v[i];
            patch[threadIdx.x][CRS_MAX] = 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int j = 0; j < PER; ++j) {
            const int pair = threadIdx.x + j * blockDim.x;
            if (pair < pairs) {
                const int k = pair / cols, i = pair - k * cols;
                float s = 0.0f;
                if (i < crs) {
                    for (int t = 0; t < CHUNK; ++t) s = fmaf(dz[k][t], patch[t][i], s);
                } else {
                    for (int t = 0; t < CHUNK; ++t) s += dz[k][t];
                }
                acc[j] += s;
            }
        }
    }
#pragma unroll
    for (int j = 0; j < PER; ++j) {
        const int pair = threadIdx.x + j * blockDim.x;
        if (pair < pairs) part[(long long)blockIdx.x * pairs + pair] = acc[j];
    }
}

// dw (K, C*R*S) and db (K) from the partials of `blocks` blocks, summed in block order.
extern "C" __global__ void conv_direct_reduce(const float* __restrict__ part, T* __restrict__ dw, T* __restrict__ db,
                                              int blocks, int K, int crs) {
    const int cols = crs + 1, pairs = K * cols;
    const int pair = blockIdx.x * blockDim.x + threadIdx.x;
    if (pair >= pairs) return;
    float s = 0.0f;
    for (int b = 0; b < blocks; ++b) s += part[(long long)b * pairs + pair];
    const int k = pair / cols, i = pair - k * cols;
    if (i < crs) {
        dw[k * crs + i] = from_f<T>(s);
    } else if (db != nullptr) {
        db[k] = from_f<T>(s);
    }
}
