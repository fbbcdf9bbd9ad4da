// Activation backward from a Linear's cuBLASLt aux, for the unfused path
// (the producer's own backward when no consumer GEMM took the mask over).
// ELEM_T is the element type: float, __half or __nv_bfloat16 (set with -DELEM_T=...).
//
// relu_mask_backward: dz[i, j] = bit j of row i of the uint8 mask ? dy[i, j] : 0
//   (bit j % 8, least significant first, of byte j / 8; aux_ld bytes per row).
// gelu_tanh_backward: dz[i, j] = dy[i, j] * gelu'(pre[i, j]) (tanh form; aux_ld elements per row).
//
// The ReLU epilogue as passes of their own, for a captured step's fp32 GEMMs (linear.py: _split_relu):
// relu_mask_forward: z (n x m, the GEMM's output with its bias) becomes relu(z) in place and the bit-mask of
//   !(z <= 0) is written (a NaN stays NaN and keeps its gradient, as in PyTorch and elementwise.cu's ReLU), a
//   warp per 32-bit word of it (words per row: aux_ld / 4), the row's padding words zero.
// relu_mask_backward_sum: dz = dx * bit in place and db[j] = sum_i dz[i, j]: a cluster of MF_CLUSTER blocks per
//   32 columns, each block a range of the rows (its warps in turn); the warps' sums are added in warp order and
//   the blocks' in rank order by the first block (fixed order: the same bits on every run).
//
// relu_mask_backward_vec, gelu_tanh_backward_vec: relu_mask_backward and gelu_tanh_backward over rows of
//   8-element vectors (m % 8 == 0, the arrays aligned to a vector): a thread takes 8 columns of a row at a time
//   (for the ReLU one mask byte) in one load and one store each (the kernels above move an element at a time,
//   which large layers pay for at a fraction of the memory bandwidth). relu_mask_backward_sum's vector form is
//   columns.cu's relu_mask_backward_partials.
//
// nvrtc-check: -DELEM_T=float
// nvrtc-check: -DELEM_T=__half
// nvrtc-check: -DELEM_T=__nv_bfloat16
// nvrtc-check[sm_90a]: -DELEM_T=float -DMF_CLUSTER=8
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include "activation.cuh"
#include "cluster.cuh"
#include "launch.cuh"
#include "vec.cuh"

#ifndef ELEM_T
#define ELEM_T float
#endif

extern "C" __global__ void relu_mask_backward(const ELEM_T* __restrict__ dy, const unsigned char* __restrict__ mask,
                                              ELEM_T* __restrict__ dz, long long n, long long m, long long aux_ld) {
    const long long total = n * m;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long r = i / m, c = i - r * m;
        const unsigned bit = (mask[r * aux_ld + (c >> 3)] >> (c & 7)) & 1u;
        dz[i] = bit ? dy[i] : ELEM_T(0.0f);
    }
}

extern "C" __global__ void gelu_tanh_backward(const ELEM_T* __restrict__ dy, const ELEM_T* __restrict__ pre,
                                              ELEM_T* __restrict__ dz, long long n, long long m, long long aux_ld) {
    const long long total = n * m;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long r = i / m, c = i - r * m;
        dz[i] = ELEM_T((float)dy[i] * gelu_tanh_grad((float)pre[r * aux_ld + c]));
    }
}

extern "C" __global__ void relu_mask_forward(ELEM_T* __restrict__ z, unsigned* __restrict__ mask, long long n,
                                             long long m, long long words) {
    pdl_entry();
    const int lane = threadIdx.x & 31;
    const long long step = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long i = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5; i < n * words; i += step) {
        const long long r = i / words, c = (i - r * words) * 32 + lane;  // a warp per 32 columns of a row
        bool on = false;
        if (c < m) {
            ELEM_T* p = z + r * m + c;
            const float v = (float)*p;
            on = !(v <= 0.0f);  // a NaN is kept, and so is its gradient (its bit set), as PyTorch's relu does
            if (!on) *p = ELEM_T(0.0f);
        }
        const unsigned bits = __ballot_sync(0xffffffffu, on);  // bit j of word i: column 32 (i % words) + j
        if (lane == 0) mask[i] = bits;
    }
}

extern "C" __global__ void CLUSTER_DIMS __launch_bounds__(512) relu_mask_backward_sum(
    ELEM_T* __restrict__ dz, const unsigned char* __restrict__ mask, ELEM_T* __restrict__ db, int n, int m,
    long long aux_ld) {
    __shared__ float part[16][32];
    __shared__ Vec<float, 1> block_sum[32];
    pdl_entry();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, rank = cluster_rank();
    const int j = blockIdx.x / CLUSTER * 32 + lane;
    const int per = (n + CLUSTER - 1) / CLUSTER, lo = min(n, rank * per), hi = min(n, lo + per);
    float acc = 0.0f;
    if (j < m) {
#pragma unroll 4
        for (int r = lo + warp; r < hi; r += 16) {
            ELEM_T* p = dz + (long long)r * m + j;
            const float d = (mask[r * aux_ld + (j >> 3)] >> (j & 7)) & 1u ? (float)*p : 0.0f;
            *p = ELEM_T(d);
            acc += d;
        }
    }
    part[warp][lane] = acc;
    __syncthreads();
    if (warp == 0) {
        float s = 0.0f;
        for (int v = 0; v < 16; ++v) s += part[v][lane];
        block_sum[lane].v[0] = s;
    }
    if (CLUSTER > 1) cluster_sync();
    else __syncthreads();
    if (rank == 0 && warp == 0 && j < m) {
        float s = 0.0f;
        for (int q = 0; q < CLUSTER; ++q)
            s += CLUSTER > 1 ? load_cluster<Vec<float, 1>>((unsigned)__cvta_generic_to_shared(&block_sum[lane]), q).v[0]
                             : block_sum[lane].v[0];
        db[j] = ELEM_T(s);
    }
    if (CLUSTER > 1) cluster_sync();
}

enum { RELU_MASK, GELU_PRE };  // what the vector kernels multiply dy by (see above)

template <int ACT>
__device__ __forceinline__ void act_backward_vec(const ELEM_T* __restrict__ dy, const void* __restrict__ aux,
                                                 ELEM_T* __restrict__ dz, long long n, long long m,
                                                 long long aux_ld) {
    pdl_entry();
    const long long per_row = m >> 3, total = n * per_row;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long r = i / per_row, c8 = i - r * per_row, c = c8 << 3;
        Vec<ELEM_T, 8> v;
        if (ACT == RELU_MASK) {
            const unsigned bits = static_cast<const unsigned char*>(aux)[r * aux_ld + c8];
            v = load_as<Vec<ELEM_T, 8>>(dy + r * m + c);
#pragma unroll
            for (int k = 0; k < 8; ++k)
                if (!((bits >> k) & 1u)) v.v[k] = ELEM_T(0.0f);
        } else {
            v = load_as<Vec<ELEM_T, 8>>(dy + r * m + c);
            const Vec<ELEM_T, 8> z = load_as<Vec<ELEM_T, 8>>(static_cast<const ELEM_T*>(aux) + r * aux_ld + c);
#pragma unroll
            for (int k = 0; k < 8; ++k) v.v[k] = ELEM_T((float)v.v[k] * gelu_tanh_grad((float)z.v[k]));
        }
        store_as(dz + r * m + c, v);
    }
}

extern "C" __global__ void relu_mask_backward_vec(const ELEM_T* __restrict__ dy, const unsigned char* __restrict__ mask,
                                                  ELEM_T* __restrict__ dz, long long n, long long m,
                                                  long long aux_ld) {
    act_backward_vec<RELU_MASK>(dy, mask, dz, n, m, aux_ld);
}

extern "C" __global__ void gelu_tanh_backward_vec(const ELEM_T* __restrict__ dy, const ELEM_T* __restrict__ pre,
                                                  ELEM_T* __restrict__ dz, long long n, long long m,
                                                  long long aux_ld) {
    act_backward_vec<GELU_PRE>(dy, pre, dz, n, m, aux_ld);
}
