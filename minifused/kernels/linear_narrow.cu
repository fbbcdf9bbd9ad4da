// A Linear with few outputs (a classifier head: NL_M <= 16 features), whole in one kernel per direction.
// cuBLASLt gives such a GEMM a tile of mostly idle columns, a split-K and its reduction kernel, and the backward
// three GEMMs and an epilogue kernel; here each direction is one pass over the layer's input and its gradient.
// Sums run in fp32 in a fixed order (no atomics): the same bits on every run.
//
// narrow_forward: y[r, i] = sum_j x[r, j] w[i, j] (+ bias[i]); a warp per row, lanes along j, then a butterfly
//   sum of each output across the warp.
// narrow_backward: for the layer's output gradient dz (n x NL_M): dw = dz^T x, db = sum_r dz[r, :], and
//   dx = dz w, through the producer's activation backward when NL_ACT is set (1: ReLU bit-mask aux, bit j % 8 of
//   byte j / 8 of row r; 2: tanh GELU from the saved pre-activation) with the producer's bias gradient
//   dbx = sum_r dx[r, :]. A block owns 32 columns j of x for all rows (so the sums over rows stay in the block):
//   its warps take rows in turn, dz is staged in shared memory NL_CHUNK rows at a time, and the warps' partial
//   sums are added in warp order at the end. flags: 1 dw, 2 db, 4 dx (and dbx with NL_ACT).
//
// nvrtc-check: -DNL_T=float -DNL_M=10 -DNL_ACT=0
// nvrtc-check: -DNL_T=__half -DNL_M=16 -DNL_ACT=1
// nvrtc-check: -DNL_T=__nv_bfloat16 -DNL_M=1 -DNL_ACT=2
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include "activation.cuh"
#include "launch.cuh"

#ifndef NL_T
#define NL_T float
#endif
#ifndef NL_M
#define NL_M 10
#endif
#ifndef NL_ACT
#define NL_ACT 0
#endif

#define NL_WARPS 16
#define NL_NT (NL_WARPS * 32)
#define NL_CHUNK 128
#define FULL 0xffffffffu

extern "C" __global__ void __launch_bounds__(256) narrow_forward(const NL_T* __restrict__ x, long long ldx,
                                                                 const NL_T* __restrict__ w, long long ldw,
                                                                 const NL_T* __restrict__ bias,
                                                                 NL_T* __restrict__ y, int n, int k) {
    pdl_entry();
    const int lane = threadIdx.x & 31;
    for (long long row = blockIdx.x * 8ll + (threadIdx.x >> 5); row < n; row += gridDim.x * 8ll) {
        const NL_T* xr = x + row * ldx;
        float acc[NL_M];
#pragma unroll
        for (int i = 0; i < NL_M; ++i) acc[i] = 0.0f;
#pragma unroll 4
        for (int j = lane; j < k; j += 32) {
            const float xv = (float)xr[j];
#pragma unroll
            for (int i = 0; i < NL_M; ++i) acc[i] = fmaf(xv, (float)w[i * ldw + j], acc[i]);
        }
        float mine = 0.0f;  // lane i keeps output i
#pragma unroll
        for (int i = 0; i < NL_M; ++i) {
            float v = acc[i];
#pragma unroll
            for (int off = 16; off; off >>= 1) v += __shfl_xor_sync(FULL, v, off);
            if (lane == i) mine = v;
        }
        if (lane < NL_M) y[row * NL_M + lane] = NL_T(bias ? mine + (float)bias[lane] : mine);
    }
}

extern "C" __global__ void __launch_bounds__(NL_NT) narrow_backward(
    const NL_T* __restrict__ dz, long long ldz, const NL_T* __restrict__ x, long long ldx,
    const NL_T* __restrict__ w, long long ldw, const void* __restrict__ aux, long long aux_ld,
    NL_T* __restrict__ dw, NL_T* __restrict__ db, NL_T* __restrict__ dx, NL_T* __restrict__ dbx, int n, int k,
    int flags) {
    __shared__ float dz_s[NL_CHUNK][NL_M];
    __shared__ float part[NL_WARPS][NL_M + 1][32];  // the warps' sums: dw's rows, then dbx
    pdl_entry();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int j = blockIdx.x * 32 + lane;
    const bool col = j < k, want_w = flags & 1, want_b = (flags & 2) && blockIdx.x == 0, want_x = flags & 4;
    float wcol[NL_M], acc_w[NL_M], acc_x = 0.0f, acc_b = 0.0f;
#pragma unroll
    for (int i = 0; i < NL_M; ++i) {
        wcol[i] = want_x && col ? (float)w[i * ldw + j] : 0.0f;
        acc_w[i] = 0.0f;
    }
    for (int r0 = 0; r0 < n; r0 += NL_CHUNK) {
        const int rows = min(NL_CHUNK, n - r0);
        for (int e = threadIdx.x; e < rows * NL_M; e += NL_NT) {
            const int r = e / NL_M, i = e - r * NL_M;
            dz_s[r][i] = (float)dz[(r0 + r) * ldz + i];
        }
        __syncthreads();
        if (want_b && threadIdx.x < NL_M)
            for (int r = 0; r < rows; ++r) acc_b += dz_s[r][threadIdx.x];
        if (col) {
#pragma unroll 4
            for (int r = warp; r < rows; r += NL_WARPS) {
                const long long row = r0 + r;
                if (want_w) {
                    const float xv = (float)x[row * ldx + j];
#pragma unroll
                    for (int i = 0; i < NL_M; ++i) acc_w[i] = fmaf(dz_s[r][i], xv, acc_w[i]);
                }
                if (want_x) {
                    float d = 0.0f;
#pragma unroll
                    for (int i = 0; i < NL_M; ++i) d = fmaf(dz_s[r][i], wcol[i], d);
#if NL_ACT == 1
                    if (!((static_cast<const unsigned char*>(aux)[row * aux_ld + (j >> 3)] >> (j & 7)) & 1u)) d = 0.0f;
#elif NL_ACT == 2
                    d *= gelu_tanh_grad((float)static_cast<const NL_T*>(aux)[row * aux_ld + j]);
#endif
                    dx[row * k + j] = NL_T(d);
                    acc_x += d;
                }
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < NL_M; ++i) part[warp][i][lane] = acc_w[i];
    part[warp][NL_M][lane] = acc_x;
    __syncthreads();
    // warp v adds up rows v, v + NL_WARPS, ... of the partials, over the warps in order
    for (int i = warp; i <= NL_M; i += NL_WARPS) {
        if (!col || (i < NL_M ? !want_w : !(want_x && NL_ACT))) continue;
        float s = 0.0f;
        for (int v = 0; v < NL_WARPS; ++v) s += part[v][i][lane];
        if (i < NL_M) dw[(long long)i * k + j] = NL_T(s);
        else dbx[j] = NL_T(s);
    }
    if (want_b && threadIdx.x < NL_M) db[threadIdx.x] = NL_T(acc_b);
}
