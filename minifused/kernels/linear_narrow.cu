// A Linear with few outputs (a classifier head: NL_M <= 16 features), whole in one kernel per direction.
// cuBLASLt gives such a GEMM a tile of mostly idle columns, a split-K and its reduction kernel, and the backward
// three GEMMs and an epilogue kernel; here each direction is one pass over the layer's input and its gradient.
// Sums run in fp32 in a fixed order (no atomics): the same bits on every run.
//
// narrow_forward: y[r, i] = sum_j x[r, j] w[i, j] (+ bias[i]); a block per NL_R rows, its threads along j (each
//   w element loaded once for the block's rows), then sums across each warp and over the warps in order.
// narrow_backward: for the layer's output gradient dz (n x NL_M): dw = dz^T x, db = sum_r dz[r, :], and
//   dx = dz w, through the producer's activation backward when NL_ACT is set (1: ReLU bit-mask aux, bit j % 8 of
//   byte j / 8 of row r; 2: tanh GELU from the saved pre-activation) with the producer's bias gradient
//   dbx = sum_r dx[r, :]. A cluster of MF_CLUSTER blocks owns 32 columns j of x, each block a range of the rows:
//   its warps take rows in turn (NL_G at a time, their loads first), dz is staged in shared memory NL_CHUNK rows
//   at a time, the warps' sums are added in warp order, and the first block of the cluster adds the blocks' in
//   rank order (distributed shared memory: the sums over rows never leave the cluster). flags: 1 dw, 2 db, 4 dx
//   (and dbx with NL_ACT).
//
// nvrtc-check: -DNL_T=float -DNL_M=10 -DNL_ACT=0 -DNL_R=1
// nvrtc-check: -DNL_T=__half -DNL_M=16 -DNL_ACT=1 -DNL_R=4
// nvrtc-check: -DNL_T=__nv_bfloat16 -DNL_M=1 -DNL_ACT=2 -DNL_R=8
// nvrtc-check[sm_90a]: -DNL_T=float -DNL_M=10 -DNL_ACT=1 -DMF_CLUSTER=4
// nvrtc-check[sm_90a]: -DNL_T=__half -DNL_M=16 -DNL_ACT=2 -DMF_CLUSTER=8
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include "activation.cuh"
#include "cluster.cuh"
#include "launch.cuh"
#include "reduce.cuh"
#include "vec.cuh"

#ifndef NL_T
#define NL_T float
#endif
#ifndef NL_M
#define NL_M 10
#endif
#ifndef NL_ACT
#define NL_ACT 0
#endif

#ifndef NL_R
#define NL_R 2
#endif

#define NL_WARPS 16
#define NL_NT (NL_WARPS * 32)
#define NL_CHUNK 128
#define NL_G 4

extern "C" __global__ void __launch_bounds__(256) narrow_forward(const NL_T* __restrict__ x, long long ldx,
                                                                 const NL_T* __restrict__ w, long long ldw,
                                                                 const NL_T* __restrict__ bias,
                                                                 NL_T* __restrict__ y, int n, int k) {
    __shared__ float red[8][NL_R * NL_M];  // the warps' sums
    pdl_entry();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (long long r0 = (long long)blockIdx.x * NL_R; r0 < n; r0 += (long long)gridDim.x * NL_R) {
        float acc[NL_R][NL_M];
#pragma unroll
        for (int q = 0; q < NL_R; ++q)
#pragma unroll
            for (int i = 0; i < NL_M; ++i) acc[q][i] = 0.0f;
#pragma unroll 4
        for (int j = threadIdx.x; j < k; j += 256) {
            float xv[NL_R];
#pragma unroll
            for (int q = 0; q < NL_R; ++q) xv[q] = r0 + q < n ? (float)x[(r0 + q) * ldx + j] : 0.0f;
#pragma unroll
            for (int i = 0; i < NL_M; ++i) {
                const float wv = (float)w[i * ldw + j];
#pragma unroll
                for (int q = 0; q < NL_R; ++q) acc[q][i] = fmaf(xv[q], wv, acc[q][i]);
            }
        }
#pragma unroll
        for (int q = 0; q < NL_R; ++q)
#pragma unroll
            for (int i = 0; i < NL_M; ++i) {
                const float v = warp_sum(acc[q][i]);
                if (lane == 0) red[warp][q * NL_M + i] = v;
            }
        __syncthreads();
        if (threadIdx.x < NL_R * NL_M) {
            const int q = threadIdx.x / NL_M, i = threadIdx.x - q * NL_M;
            float s = bias ? (float)bias[i] : 0.0f;  // added last, as the GEMM's epilogue does
            float sum = 0.0f;
#pragma unroll
            for (int v = 0; v < 8; ++v) sum += red[v][threadIdx.x];
            if (r0 + q < n) y[(r0 + q) * NL_M + i] = NL_T(sum + s);
        }
        __syncthreads();
    }
}

extern "C" __global__ void CLUSTER_DIMS __launch_bounds__(NL_NT) narrow_backward(
    const NL_T* __restrict__ dz, long long ldz, const NL_T* __restrict__ x, long long ldx,
    const NL_T* __restrict__ w, long long ldw, const void* __restrict__ aux, long long aux_ld,
    NL_T* __restrict__ dw, NL_T* __restrict__ db, NL_T* __restrict__ dx, NL_T* __restrict__ dbx, int n, int k,
    int flags) {
    __shared__ float dz_s[NL_CHUNK][NL_M];
    __shared__ float part[NL_WARPS][NL_M + 1][32];  // the warps' sums: dw's rows, then dbx
    __shared__ Vec<float, 1> sums[NL_M + 2][32];    // the block's: dw's rows, dbx, db (lanes < NL_M)
    pdl_entry();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, rank = cluster_rank();
    const int j = blockIdx.x / CLUSTER * 32 + lane;
    const bool col = j < k, want_w = flags & 1, want_b = (flags & 2) && blockIdx.x / CLUSTER == 0, want_x = flags & 4;
    const int per = (n + CLUSTER - 1) / CLUSTER, lo = min(n, rank * per), hi = min(n, lo + per);  // the block's rows
    float wcol[NL_M], acc_w[NL_M], acc_x = 0.0f, acc_b = 0.0f;
#pragma unroll
    for (int i = 0; i < NL_M; ++i) {
        wcol[i] = want_x && col ? (float)w[i * ldw + j] : 0.0f;
        acc_w[i] = 0.0f;
    }
    for (int r0 = lo; r0 < hi; r0 += NL_CHUNK) {
        const int rows = min(NL_CHUNK, hi - r0);
        for (int e = threadIdx.x; e < rows * NL_M; e += NL_NT) {
            const int r = e / NL_M, i = e - r * NL_M;
            dz_s[r][i] = (float)dz[(r0 + r) * ldz + i];
        }
        __syncthreads();
        if (want_b && threadIdx.x < NL_M)
            for (int r = 0; r < rows; ++r) acc_b += dz_s[r][threadIdx.x];
        if (col) {
            for (int r = warp; r < rows; r += NL_WARPS * NL_G) {  // NL_G rows a warp, their loads first
                float xv[NL_G];
#pragma unroll
                for (int g = 0; g < NL_G; ++g)
                    xv[g] = want_w && r + g * NL_WARPS < rows ? (float)x[(r0 + r + g * NL_WARPS) * ldx + j] : 0.0f;
#pragma unroll
                for (int g = 0; g < NL_G; ++g) {
                    const int rr = r + g * NL_WARPS;
                    if (rr >= rows) break;
                    const long long row = r0 + rr;
#pragma unroll
                    for (int i = 0; i < NL_M; ++i) acc_w[i] = fmaf(dz_s[rr][i], xv[g], acc_w[i]);
                    if (want_x) {
                        float d = 0.0f;
#pragma unroll
                        for (int i = 0; i < NL_M; ++i) d = fmaf(dz_s[rr][i], wcol[i], d);
#if NL_ACT == 1
                        if (!((static_cast<const unsigned char*>(aux)[row * aux_ld + (j >> 3)] >> (j & 7)) & 1u))
                            d = 0.0f;
#elif NL_ACT == 2
                        d *= gelu_tanh_grad((float)static_cast<const NL_T*>(aux)[row * aux_ld + j]);
#endif
                        dx[row * k + j] = NL_T(d);
                        acc_x += d;
                    }
                }
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < NL_M; ++i) part[warp][i][lane] = acc_w[i];
    part[warp][NL_M][lane] = acc_x;
    __syncthreads();
    for (int i = warp; i <= NL_M; i += NL_WARPS) {  // warp v adds up rows v, v + NL_WARPS, ... in warp order
        float s = 0.0f;
        for (int v = 0; v < NL_WARPS; ++v) s += part[v][i][lane];
        sums[i][lane].v[0] = s;
    }
    if (warp == 0) sums[NL_M + 1][lane].v[0] = acc_b;  // (lanes past NL_M hold 0)
    if (CLUSTER > 1) cluster_sync();  // every block's sums are in; the first block adds them in rank order
    else __syncthreads();
    if (rank == 0)
        for (int i = warp; i < NL_M + 2; i += NL_WARPS) {
            const bool out = i < NL_M ? col && want_w : i == NL_M ? col && want_x && NL_ACT : want_b && lane < NL_M;
            if (!out) continue;
            float s = 0.0f;
            for (int q = 0; q < CLUSTER; ++q)
                s += CLUSTER > 1
                         ? load_cluster<Vec<float, 1>>((unsigned)__cvta_generic_to_shared(&sums[i][lane]), q).v[0]
                         : sums[i][lane].v[0];
            if (i < NL_M) dw[(long long)i * k + j] = NL_T(s);
            else if (i == NL_M) dbx[j] = NL_T(s);
            else db[lane] = NL_T(s);
        }
    if (CLUSTER > 1) cluster_sync();  // the blocks' shared memory stays until the first block has read it
}
