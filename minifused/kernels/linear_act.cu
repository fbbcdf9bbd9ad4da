// Activation backward from a Linear's cuBLASLt aux, for the unfused path
// (the producer's own backward when no consumer GEMM took the mask over).
// ELEM_T is the element type: float, __half or __nv_bfloat16 (set with -DELEM_T=...).
//
// relu_mask_backward: dz[i, j] = bit j of row i of the uint8 mask ? dy[i, j] : 0
//   (bit j % 8, least significant first, of byte j / 8; aux_ld bytes per row).
// gelu_tanh_backward: dz[i, j] = dy[i, j] * gelu'(pre[i, j]) (tanh form; aux_ld elements per row).
//
// nvrtc-check: -DELEM_T=float
// nvrtc-check: -DELEM_T=__half
// nvrtc-check: -DELEM_T=__nv_bfloat16
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include "activation.cuh"

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
