// Column sums of a row-major (n x m) array, in fp32, in two deterministic passes (no atomics, fixed orders: the
// same bits on every run). ELEM_T is float, __half or __nv_bfloat16 (-DELEM_T=...); MF_VEC is 1 or 8.
//
// column_partials: a block takes LW * MF_VEC columns (a lane's MF_VEC consecutive ones, read as one vector: with
//   MF_VEC 8, the row stride lda a multiple of 8 and the array aligned to a vector) of rows_per rows, and writes
//   their sums to part[blockIdx.y * m + j]. LW = 2^lane_shift lanes span a row: 32 for rows of 32 vectors or more,
//   else the power of two that covers m, so that a warp takes 32 / LW rows at once (a narrow m idles no lane); its
//   8 warps take the rows in turn, and the sums of the warps and their row groups are added in a fixed order.
//   Rows lie lda >= m elements apart (a convolution's packed dz: m channels of lda, the rest padding); a vector's
//   columns past m, read where lda reaches them, are summed and dropped.
// relu_mask_backward_partials: the same over dz after dz *= bit of a ReLU mask, in place (bit j % 8 of byte j / 8
//   of a row's aux_ld bytes; with MF_VEC 8 a lane's vector has one mask byte): the ReLU data gradient's pass
//   (kernels/linear.py), whose bias gradient the sums are.
// gelu_backward_partials: the same after dz *= gelu'(pre) in place (the tanh form; pre: the pre-activations,
//   aux_ld elements a row): the GELU data gradient's pass.
// column_partials_sum: out[j] = column j's partials added in a fixed order (a block's 32 warps take every 32nd row
//   block, then the warps' sums in warp order), times scale (1, or 1 / n for a mean), rounded once to ELEM_T.
// row_sums: out[i] = row i's sum times scale, rounded once to ELEM_T: a warp a row (8 rows a block), each lane adding
//   the row's MF_VEC-element vectors lane, lane + 32, ... (MF_VEC 8: m a multiple of 8 and the array aligned to a
//   vector), then the lanes' sums in a fixed butterfly order (the same bits on every run).
// row_broadcast: out[i, j] = g[i] * scale (n rows of m), rounded once to ELEM_T: the gradient of row_sums' sum or
//   mean, in one pass (a grid-stride loop of element per thread).
//
// nvrtc-check: -DELEM_T=float -DMF_VEC=1
// nvrtc-check: -DELEM_T=float -DMF_VEC=8
// nvrtc-check: -DELEM_T=__half -DMF_VEC=1
// nvrtc-check: -DELEM_T=__half -DMF_VEC=8
// nvrtc-check: -DELEM_T=__nv_bfloat16 -DMF_VEC=1
// nvrtc-check: -DELEM_T=__nv_bfloat16 -DMF_VEC=8
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include "activation.cuh"
#include "launch.cuh"
#include "vec.cuh"

#ifndef ELEM_T
#define ELEM_T float
#endif
#ifndef MF_VEC
#define MF_VEC 1
#endif

enum { PLAIN, RELU_MASK, GELU_PRE };  // what a row is multiplied by first, in place (see above)

template <int ACT>
__device__ __forceinline__ void partials(ELEM_T* __restrict__ a, const void* __restrict__ aux,
                                         float* __restrict__ part, int n, int m, long long lda, long long aux_ld,
                                         int rows_per, int lane_shift) {
    constexpr int V = MF_VEC;
    __shared__ float sums[8][32 * V];  // [warp][32 * k + lane], element k of a lane's vector: no bank conflict
    const int LW = 1 << lane_shift, G = 32 >> lane_shift, COLS = LW * V;  // lanes a row, rows a warp, columns
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int c = blockIdx.x * COLS + (lane & (LW - 1)) * V;
    const int lo = blockIdx.y * rows_per, hi = min(n, lo + rows_per);
    float acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = 0.0f;
    if (c < m) {
#pragma unroll 4
        for (int r = lo + warp * G + (lane >> lane_shift); r < hi; r += 8 * G) {
            ELEM_T* p = a + (long long)r * lda + c;
            Vec<ELEM_T, V> v = load_as<Vec<ELEM_T, V>>(p);
            if (ACT == RELU_MASK) {
                const unsigned bits =
                    static_cast<const unsigned char*>(aux)[(long long)r * aux_ld + (c >> 3)] >> (c & 7);
#pragma unroll
                for (int k = 0; k < V; ++k) {
                    if ((bits >> k) & 1u) acc[k] += (float)v.v[k];
                    else v.v[k] = ELEM_T(0.0f);
                }
                store_as(p, v);
            } else if (ACT == GELU_PRE) {
                const Vec<ELEM_T, V> z =
                    load_as<Vec<ELEM_T, V>>(static_cast<const ELEM_T*>(aux) + (long long)r * aux_ld + c);
#pragma unroll
                for (int k = 0; k < V; ++k) {
                    v.v[k] = ELEM_T((float)v.v[k] * gelu_tanh_grad((float)z.v[k]));
                    acc[k] += (float)v.v[k];
                }
                store_as(p, v);
            } else {
#pragma unroll
                for (int k = 0; k < V; ++k) acc[k] += (float)v.v[k];
            }
        }
    }
#pragma unroll
    for (int k = 0; k < V; ++k) sums[warp][k * 32 + lane] = acc[k];
    __syncthreads();
    for (int t = threadIdx.x; t < COLS; t += blockDim.x) {  // column t of the block: lane t / V of each row group
        const int j = blockIdx.x * COLS + t;
        if (j < m) {
            float s = 0.0f;
            for (int w = 0; w < 8; ++w)
                for (int g = 0; g < G; ++g) s += sums[w][(t % V) * 32 + g * LW + t / V];
            part[(long long)blockIdx.y * m + j] = s;
        }
    }
}

extern "C" __global__ void __launch_bounds__(256) column_partials(const ELEM_T* __restrict__ a,
                                                                  float* __restrict__ part, int n, int m,
                                                                  long long lda, int rows_per, int lane_shift) {
    pdl_entry();
    partials<PLAIN>(const_cast<ELEM_T*>(a), nullptr, part, n, m, lda, 0, rows_per, lane_shift);
}

extern "C" __global__ void __launch_bounds__(256) relu_mask_backward_partials(
    ELEM_T* __restrict__ dz, const unsigned char* __restrict__ mask, float* __restrict__ part, int n, int m,
    long long aux_ld, int rows_per, int lane_shift) {
    pdl_entry();
    partials<RELU_MASK>(dz, mask, part, n, m, m, aux_ld, rows_per, lane_shift);
}

extern "C" __global__ void __launch_bounds__(256) gelu_backward_partials(
    ELEM_T* __restrict__ dz, const ELEM_T* __restrict__ pre, float* __restrict__ part, int n, int m,
    long long aux_ld, int rows_per, int lane_shift) {
    pdl_entry();
    partials<GELU_PRE>(dz, pre, part, n, m, m, aux_ld, rows_per, lane_shift);
}

extern "C" __global__ void __launch_bounds__(256) row_sums(const ELEM_T* __restrict__ a, ELEM_T* __restrict__ out,
                                                           long long n, int m, float scale) {
    pdl_entry();
    const long long row = (long long)blockIdx.x * 8 + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= n) return;
    const ELEM_T* r = a + row * m;
    float s = 0.0f;
#pragma unroll 4
    for (int j = lane * MF_VEC; j < m; j += 32 * MF_VEC) {
        const Vec<ELEM_T, MF_VEC> v = load_as<Vec<ELEM_T, MF_VEC>>(r + j);
#pragma unroll
        for (int k = 0; k < MF_VEC; ++k) s += (float)v.v[k];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) out[row] = ELEM_T(s * scale);
}

extern "C" __global__ void __launch_bounds__(256) row_broadcast(const ELEM_T* __restrict__ g,
                                                                ELEM_T* __restrict__ out, long long total, int m,
                                                                float scale) {
    pdl_entry();
    for (long long i = (long long)blockIdx.x * 256 + threadIdx.x; i < total; i += (long long)gridDim.x * 256)
        out[i] = ELEM_T((float)g[i / m] * scale);
}

// A block of 1024 threads sums 32 columns: warp w the row blocks w, w + 32, ... (32 consecutive columns a read).
extern "C" __global__ void __launch_bounds__(1024) column_partials_sum(const float* __restrict__ part,
                                                                      ELEM_T* __restrict__ out, int m, int rows,
                                                                      float scale) {
    pdl_entry();
    __shared__ float sums[32][32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, j = blockIdx.x * 32 + lane;
    float s = 0.0f;
    if (j < m) {
#pragma unroll 4
        for (int b = warp; b < rows; b += 32) s += part[(long long)b * m + j];
    }
    sums[warp][lane] = s;
    __syncthreads();
    if (warp == 0 && j < m) {
        float t = 0.0f;
#pragma unroll
        for (int w = 0; w < 32; ++w) t += sums[w][lane];
        out[j] = ELEM_T(t * scale);
    }
}
