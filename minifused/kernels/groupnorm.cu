// Group normalization of a C-contiguous (N, C, S) array (S: the positions, flattened) in G groups of D = C / G
// channels: row (n, g) is the D * S contiguous elements of those channels in sample n. One block a row.
//
// gn_fwd: the row's mean and inverse std (biased variance, two passes over the row, which stays in L2 between
// them; float32, kept for the backward), then y = x * a + b with a = rstd * gamma[c], b = beta[c] - mean * a (a
// warp a channel at a time, so each channel's a and b are computed once).
// gn_bwd: per channel of the row, sums of dy and of dy (x - mean) (a warp a channel, into shared memory: 2 D
// floats), from which come the row's partial weight and bias gradients (dw_part, db_part: (N, C) float32, summed
// over N by the caller in a fixed order) and the two sums of the input gradient
//   dx = rstd gamma dy + k1 (x - mean) + k0,  k1 = -rstd^3 sum_c gamma_c sum dy (x - mean) / (D S),
//                                             k0 = -rstd sum_c gamma_c sum dy / (D S),
// written in a second pass. Every sum has a fixed order: no atomics, the same bits every run. gamma, beta,
// dx, dw_part and db_part may be null (no weight, no bias, a gradient not wanted).
//
// nvrtc-check: -DGN_T=float -DGN_W=float
// nvrtc-check: -DGN_T=__half -DGN_W=__half
// nvrtc-check: -DGN_T=__half -DGN_W=float
// nvrtc-check: -DGN_T=__nv_bfloat16 -DGN_W=__nv_bfloat16
// nvrtc-check: -DGN_T=__nv_bfloat16 -DGN_W=float
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef GN_T
#define GN_T float
#endif
#ifndef GN_W
#define GN_W float
#endif
typedef GN_T T;  // the input's and output's type
typedef GN_W W;  // the weight's and bias's

#include "dtypes.cuh"  // to_acc / from_acc

#define NT 256
#define WARPS (NT / 32)

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// The block's sum of v, in every thread (scratch: WARPS floats, free again when it returns to all).
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    v = warp_sum(v);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < WARPS ? scratch[lane] : 0.0f;
    v = warp_sum(v);
    __syncthreads();
    return v;
}

extern "C" __global__ void __launch_bounds__(NT)
gn_fwd(const T* __restrict__ x, const W* __restrict__ gamma, const W* __restrict__ beta, T* __restrict__ y,
       float* __restrict__ mean_out, float* __restrict__ rstd_out, int groups, int D, long long S, float eps) {
    __shared__ float scratch[WARPS];
    const long long row = blockIdx.x, L = D * S;
    const T* xr = x + row * L;
    float s = 0.0f;
    for (long long i = threadIdx.x; i < L; i += NT) s += to_acc<float>(xr[i]);
    const float mean = block_sum(s, scratch) / (float)L;
    float q = 0.0f;
    for (long long i = threadIdx.x; i < L; i += NT) {
        const float d = to_acc<float>(xr[i]) - mean;
        q += d * d;
    }
    const float rstd = rsqrtf(block_sum(q, scratch) / (float)L + eps);
    if (threadIdx.x == 0) {
        mean_out[row] = mean;
        rstd_out[row] = rstd;
    }
    const int c0 = (int)(row % groups) * D, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int c = warp; c < D; c += WARPS) {
        const float a = rstd * (gamma ? to_acc<float>(gamma[c0 + c]) : 1.0f);
        const float b = (beta ? to_acc<float>(beta[c0 + c]) : 0.0f) - mean * a;
        const T* xc = xr + c * S;
        T* yc = y + row * L + c * S;
        for (long long i = lane; i < S; i += 32) yc[i] = from_acc<T>(to_acc<float>(xc[i]) * a + b);
    }
}

extern "C" __global__ void __launch_bounds__(NT)
gn_bwd(const T* __restrict__ dy, const T* __restrict__ x, const W* __restrict__ gamma, const float* __restrict__ mean,
       const float* __restrict__ rstd, T* __restrict__ dx, float* __restrict__ dw_part, float* __restrict__ db_part,
       int groups, int D, long long S) {
    extern __shared__ float sums[];  // [0, D): sum dy (x - mean) of each channel; [D, 2 D): sum dy
    __shared__ float scratch[WARPS];
    const long long row = blockIdx.x, L = D * S;
    const int g = (int)(row % groups), c0 = g * D, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long n = row / groups, C = (long long)groups * D;
    const float mu = mean[row], r = rstd[row];
    const T* xr = x + row * L;
    const T* dyr = dy + row * L;
    for (int c = warp; c < D; c += WARPS) {
        float sdx = 0.0f, sd = 0.0f;
        for (long long i = lane; i < S; i += 32) {
            const float gi = to_acc<float>(dyr[c * S + i]);
            sd += gi;
            sdx += gi * (to_acc<float>(xr[c * S + i]) - mu);
        }
        sdx = warp_sum(sdx);
        sd = warp_sum(sd);
        if (lane == 0) {
            sums[c] = sdx;
            sums[D + c] = sd;
        }
    }
    __syncthreads();
    float a = 0.0f, b = 0.0f;  // sum_c gamma_c sum dy, sum_c gamma_c sum dy (x - mean)
    for (int c = threadIdx.x; c < D; c += NT) {
        const float w = gamma ? to_acc<float>(gamma[c0 + c]) : 1.0f;
        if (dw_part) dw_part[n * C + c0 + c] = sums[c] * r;
        if (db_part) db_part[n * C + c0 + c] = sums[D + c];
        a += w * sums[D + c];
        b += w * sums[c];
    }
    if (!dx) return;
    a = block_sum(a, scratch);
    b = block_sum(b, scratch);
    const float k1 = -r * r * r * b / (float)L, k0 = -r * a / (float)L;
    for (int c = warp; c < D; c += WARPS) {
        const float wr = r * (gamma ? to_acc<float>(gamma[c0 + c]) : 1.0f);
        T* dxc = dx + row * L + c * S;
        for (long long i = lane; i < S; i += 32)
            dxc[i] = from_acc<T>(to_acc<float>(dyr[c * S + i]) * wr + (to_acc<float>(xr[c * S + i]) - mu) * k1 + k0);
    }
}
