// Depthwise convolution (groups = C: each input channel c has its own M filters, output channels k = c*M ..
// c*M + M-1, so channel k reads input channel k / M): MobileNet's, EfficientNet's and ShuffleNet's 3x3 and 5x5
// layers. Each output reads R*S inputs of one channel, a reduction far too short for a GEMM (the grouped GEMM
// path ran one pack and one GEMM launch per channel): here one thread computes one output (one input
// gradient), reading NCHW as it is, in fp32 arithmetic.
//
//   dw_fwd     y[n,k,p,q] = act(bias[k] + sum_rs x[n, k/M, p*sh - ph + r*dh, q*sw - pw + s*dw] * w[k,r,s]),
//              and the bit-packed ReLU mask (uint32 (K, words), bit m % 32 of word [k, m / 32], m = n*P*Q + p*Q + q)
//   dw_dgrad   dx[n,c,h,w] = sum over the M filters of c and the taps (r, s) whose output pixel
//              (p, q) = ((h + ph - r*dh) / sh, (w + pw - s*dw) / sw) is whole and inside: dz[n,k,p,q] * w[k,r,s]
//   dw_wgrad   per (split of the output pixels, k) partial sums of dW[k, r, s] and db[k]; dw_reduce adds the
//              splits in order (deterministic, no atomics)
// where dz = dy masked by the ReLU mask when one is given. Threads of a block share one channel (blockIdx.y), so
// the filter is in shared memory and a warp's 32 consecutive pixels make one mask word (a ballot).
//
// On large planes (conv_depthwise.py's rule) the forward and the backward-data take the *_plane kernels instead:
// one block per plane, which loads its input plane (the backward-data: its output-gradient plane, spread out by
// the stride) into shared memory once, zero-padded, with coalesced loads, and computes every output of the plane
// from there, with no bounds checks or index divisions per output. On small planes (14x14 and under) a block per
// plane is mostly scheduling, and the thread-per-element kernels are faster; the filter gradient's plane form (a
// block summing its images' planes one after another) measured slower on every MobileNetV2 shape and is gone. The
// forward with a ReLU mask stays on dw_fwd, whose warps own whole mask words.
//
// R and S arrive as defines (one module per filter shape: the tap loops unroll); the rest of the geometry comes
// from a small device array, geo[0..13] = N, C, H, W, K, M, P, Q, sh, sw, ph, pw, dh, dw. Index math is 32-bit
// (conv_depthwise.py routes here only what fits).
//
// nvrtc-check: -DCONV_T=__half -DG_R=3 -DG_S=3
// nvrtc-check: -DCONV_T=__nv_bfloat16 -DG_R=5 -DG_S=5
// nvrtc-check: -DCONV_T=float -DG_R=7 -DG_S=1
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef CONV_T
#define CONV_T float
#endif
typedef CONV_T T;

#include "dtypes.cuh"  // to_f / from_f
#include "reduce.cuh"  // block_sums_to

constexpr int RS = G_R * G_S;

struct Geometry {
    int N, C, H, W, K, M, P, Q, sh, sw, ph, pw, dh, dw;
};

__device__ __forceinline__ Geometry load_geometry(const int* __restrict__ geo) {
    return {geo[0], geo[1], geo[2], geo[3], geo[4], geo[5], geo[6], geo[7], geo[8], geo[9], geo[10], geo[11],
            geo[12], geo[13]};
}

__device__ __forceinline__ bool kept(const unsigned* __restrict__ mask, int words, int k, int m) {
    return mask == nullptr || ((mask[(long long)k * words + (m >> 5)] >> (m & 31)) & 1u);
}

// grid (pixel blocks, K): thread m of channel k. flags: 1 = ReLU, 2 = bias (as conv_direct_fwd's).
extern "C" __global__ void __launch_bounds__(256) dw_fwd(const T* __restrict__ x, const T* __restrict__ w,
                                                         const T* __restrict__ bias, T* __restrict__ y,
                                                         unsigned* __restrict__ mask, int flags, int words,
                                                         const int* __restrict__ geo) {
    const Geometry g = load_geometry(geo);
    __shared__ float ws[RS];
    const int k = blockIdx.y, c = k / g.M;
    for (int i = threadIdx.x; i < RS; i += blockDim.x) ws[i] = to_f(w[k * RS + i]);
    __syncthreads();
    const int pq = g.P * g.Q, total = g.N * pq;
    const int m = blockIdx.x * blockDim.x + threadIdx.x;
    const bool live = m < total;
    float acc = (flags & 2) ? to_f(bias[k]) : 0.0f;
    int n = 0, rem = 0;
    if (live) {
        n = m / pq;
        rem = m - n * pq;
        const int p = rem / g.Q, q = rem - p * g.Q;
        const int h0 = p * g.sh - g.ph, w0 = q * g.sw - g.pw;
        const T* plane = x + (long long)(n * g.C + c) * g.H * g.W;
#pragma unroll
        for (int r = 0; r < G_R; ++r) {
            const int h = h0 + r * g.dh;
            if (h < 0 || h >= g.H) continue;
#pragma unroll
            for (int s = 0; s < G_S; ++s) {
                const int wc = w0 + s * g.dw;
                if (wc >= 0 && wc < g.W) acc = fmaf(to_f(plane[h * g.W + wc]), ws[r * G_S + s], acc);
            }
        }
    }
    const bool pos = !(acc <= 0.0f);  // NaN stays NaN and keeps its gradient, as in PyTorch
    if (flags & 1) acc = pos ? acc : 0.0f;
    if (live) y[(long long)(n * g.K + k) * pq + rem] = from_f<T>(acc);
    if (mask != nullptr) {
        const unsigned bits = __ballot_sync(0xffffffffu, live && pos);
        if ((threadIdx.x & 31) == 0 && m < total) mask[(long long)k * words + (m >> 5)] = bits;
    }
}

// grid (pixel blocks of N*H*W, C): thread (n, h, w) of input channel c.
extern "C" __global__ void __launch_bounds__(256) dw_dgrad(const T* __restrict__ dy, const T* __restrict__ w,
                                                           const unsigned* __restrict__ mask, T* __restrict__ dx,
                                                           int words, const int* __restrict__ geo) {
    const Geometry g = load_geometry(geo);
    const int c = blockIdx.y;
    const int hw = g.H * g.W, total = g.N * hw;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    const int n = i / hw, rem = i - n * hw;
    const int h = rem / g.W, wc = rem - h * g.W;
    const int pq = g.P * g.Q;
    float acc = 0.0f;
    for (int j = 0; j < g.M; ++j) {
        const int k = c * g.M + j;
        const T* plane = dy + (long long)(n * g.K + k) * pq;
        const T* wk = w + k * RS;
#pragma unroll
        for (int r = 0; r < G_R; ++r) {
            const int ty = h + g.ph - r * g.dh;  // p * sh
            if (ty < 0 || ty % g.sh) continue;
            const int p = ty / g.sh;
            if (p >= g.P) continue;
#pragma unroll
            for (int s = 0; s < G_S; ++s) {
                const int tx = wc + g.pw - s * g.dw;
                if (tx < 0 || tx % g.sw) continue;
                const int q = tx / g.sw;
                if (q >= g.Q) continue;
                const int m = n * pq + p * g.Q + q;
                if (kept(mask, words, k, m)) acc = fmaf(to_f(plane[p * g.Q + q]), to_f(wk[r * G_S + s]), acc);
            }
        }
    }
    dx[(long long)(n * g.C + c) * hw + rem] = from_f<T>(acc);
}

// grid (splits, K), 256 threads: block (b, k) sums its share of channel k's output pixels, [b*per, (b+1)*per),
// into part[b, k, 0..RS] (dW's taps, then db).
extern "C" __global__ void __launch_bounds__(256) dw_wgrad(const T* __restrict__ x, const T* __restrict__ dy,
                                                           const unsigned* __restrict__ mask,
                                                           float* __restrict__ part, int words, int per,
                                                           const int* __restrict__ geo) {
    const Geometry g = load_geometry(geo);
    const int k = blockIdx.y, c = k / g.M;
    const int pq = g.P * g.Q, total = g.N * pq;
    const int begin = blockIdx.x * per, end = min(total, begin + per);
    float acc[RS + 1];
#pragma unroll
    for (int i = 0; i <= RS; ++i) acc[i] = 0.0f;
    for (int m = begin + threadIdx.x; m < end; m += blockDim.x) {
        const int n = m / pq, rem = m - n * pq;
        float dz = to_f(dy[(long long)(n * g.K + k) * pq + rem]);
        if (!kept(mask, words, k, m)) dz = 0.0f;
        acc[RS] += dz;
        const int p = rem / g.Q, q = rem - p * g.Q;
        const int h0 = p * g.sh - g.ph, w0 = q * g.sw - g.pw;
        const T* plane = x + (long long)(n * g.C + c) * g.H * g.W;
#pragma unroll
        for (int r = 0; r < G_R; ++r) {
            const int h = h0 + r * g.dh;
            const bool row = h >= 0 && h < g.H;
#pragma unroll
            for (int s = 0; s < G_S; ++s) {
                const int wc = w0 + s * g.dw;
                if (row && wc >= 0 && wc < g.W) {
                    acc[r * G_S + s] = fmaf(dz, to_f(plane[h * g.W + wc]), acc[r * G_S + s]);
                }
            }
        }
    }
    block_sums_to<RS + 1, 8>(acc, part + ((long long)blockIdx.x * g.K + k) * (RS + 1));
}

// dw (K, 1, R, S) and db (K) from `splits` partials, added in split order.
extern "C" __global__ void dw_reduce(const float* __restrict__ part, T* __restrict__ dw, T* __restrict__ db,
                                     int splits, int K) {
    const int pairs = K * (RS + 1);
    const int pair = blockIdx.x * blockDim.x + threadIdx.x;
    if (pair >= pairs) return;
    float s = 0.0f;
    for (int b = 0; b < splits; ++b) s += part[(long long)b * pairs + pair];
    const int k = pair / (RS + 1), i = pair - k * (RS + 1);
    if (i < RS) {
        if (dw != nullptr) dw[k * RS + i] = from_f<T>(s);
    } else if (db != nullptr) {
        db[k] = from_f<T>(s);
    }
}


// ---------------------------------------------------------------- one block per plane, the plane in shared memory
// The input rows [-ph, -ph + hs) and columns [-pw, -pw + ws) of plane `src` (h x w) into `dst` (hs x ws) as floats,
// zeros outside the image; by 8 warps, each a row at a time.
__device__ __forceinline__ void load_padded(const T* __restrict__ src, int h, int w, int ph, int pw, float* dst,
                                            int hs, int ws) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int a = warp; a < hs; a += 8) {
        const int y = a - ph;
        const bool row = y >= 0 && y < h;
        for (int b = lane; b < ws; b += 32) {
            const int xx = b - pw;
            dst[a * ws + b] = (row && xx >= 0 && xx < w) ? to_f(src[y * w + xx]) : 0.0f;
        }
    }
}

// grid (N*K): block (n, k) computes y[n, k] (no mask). Shared memory: the padded input plane, hs x ws floats,
// hs = (P-1)*sh + (R-1)*dh + 1, ws likewise.
extern "C" __global__ void __launch_bounds__(256) dw_fwd_plane(const T* __restrict__ x, const T* __restrict__ w,
                                                               const T* __restrict__ bias, T* __restrict__ y,
                                                               int flags, const int* __restrict__ geo) {
    const Geometry g = load_geometry(geo);
    extern __shared__ float plane[];
    const int n = blockIdx.x / g.K, k = blockIdx.x - n * g.K, c = k / g.M;
    const int hs = (g.P - 1) * g.sh + (G_R - 1) * g.dh + 1, ws = (g.Q - 1) * g.sw + (G_S - 1) * g.dw + 1;
    load_padded(x + (long long)(n * g.C + c) * g.H * g.W, g.H, g.W, g.ph, g.pw, plane, hs, ws);
    float wr[RS];
#pragma unroll
    for (int i = 0; i < RS; ++i) wr[i] = to_f(w[k * RS + i]);
    const float b0 = (flags & 2) ? to_f(bias[k]) : 0.0f;
    __syncthreads();
    T* out = y + (long long)(n * g.K + k) * g.P * g.Q;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int p = warp; p < g.P; p += 8) {
        const float* top = plane + p * g.sh * ws;
        for (int q = lane; q < g.Q; q += 32) {
            float acc = b0;
#pragma unroll
            for (int r = 0; r < G_R; ++r) {
#pragma unroll
                for (int s = 0; s < G_S; ++s) {
                    acc = fmaf(top[r * g.dh * ws + q * g.sw + s * g.dw], wr[r * G_S + s], acc);
                }
            }
            if ((flags & 1) && acc <= 0.0f) acc = 0.0f;
            out[p * g.Q + q] = from_f<T>(acc);
        }
    }
}

// grid (N*C): block (n, c) computes dx[n, c]. Per filter j of the channel, the masked dz plane of k = c*M + j goes
// into `spread` (hb x wb floats, zero elsewhere) at row p*sh + (R-1)*dh, column q*sw + (S-1)*dw, so that
// dx[h, w] = sum_rs w[k, r, s] * spread[h + ph + (R-1-r)*dh, w + pw + (S-1-s)*dw]: a plain correlation, the taps
// that no whole output pixel reaches reading zeros. `acc` (H x W floats) sums the filters.
extern "C" __global__ void __launch_bounds__(256) dw_dgrad_plane(const T* __restrict__ dy, const T* __restrict__ w,
                                                                 const unsigned* __restrict__ mask,
                                                                 T* __restrict__ dx, int words,
                                                                 const int* __restrict__ geo) {
    const Geometry g = load_geometry(geo);
    extern __shared__ float smem[];
    const int n = blockIdx.x / g.C, c = blockIdx.x - n * g.C;
    const int ah = (G_R - 1) * g.dh, aw = (G_S - 1) * g.dw;
    const int hb = g.H + g.ph + ah, wb = g.W + g.pw + aw;
    float* spread = smem;
    float* acc = smem + hb * wb;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int pq = g.P * g.Q;
    for (int j = 0; j < g.M; ++j) {
        const int k = c * g.M + j;
        __syncthreads();  // (the previous filter's reads of spread are done)
        for (int i = threadIdx.x; i < hb * wb; i += blockDim.x) spread[i] = 0.0f;
        __syncthreads();
        const T* src = dy + (long long)(n * g.K + k) * pq;
        for (int p = warp; p < g.P; p += 8) {
            const int row = p * g.sh + ah;
            for (int q = lane; q < g.Q; q += 32) {
                const int col = q * g.sw + aw;
                if (row < hb && col < wb) {
                    spread[row * wb + col] = kept(mask, words, k, n * pq + p * g.Q + q) ? to_f(src[p * g.Q + q])
                                                                                       : 0.0f;
                }
            }
        }
        float wr[RS];
#pragma unroll
        for (int i = 0; i < RS; ++i) wr[i] = to_f(w[k * RS + i]);
        __syncthreads();
        for (int h = warp; h < g.H; h += 8) {
            const float* top = spread + (h + g.ph) * wb + g.pw;
            for (int xx = lane; xx < g.W; xx += 32) {
                float v = j ? acc[h * g.W + xx] : 0.0f;
#pragma unroll
                for (int r = 0; r < G_R; ++r) {
#pragma unroll
                    for (int s = 0; s < G_S; ++s) {
                        v = fmaf(top[(G_R - 1 - r) * g.dh * wb + xx + (G_S - 1 - s) * g.dw], wr[r * G_S + s], v);
                    }
                }
                acc[h * g.W + xx] = v;
            }
        }
    }
    __syncthreads();
    T* out = dx + (long long)(n * g.C + c) * g.H * g.W;
    for (int i = threadIdx.x; i < g.H * g.W; i += blockDim.x) out[i] = from_f<T>(acc[i]);
}
