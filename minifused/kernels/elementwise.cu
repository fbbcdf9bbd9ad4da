// ReLU and GELU (both forms), forward and backward; ReLU that keeps a bit-packed mask for its
// backward, and the backward of any op whose gradient is "grad * scale where a mask bit is set,
// else 0" (ReLU: scale 1; dropout: scale 1 / (1 - p)). Every kernel loops over the C-order flat
// array (grid-stride). The activations compute in float for every T (float64 included, as they
// always have); the mask kernels in S.
//
// Mask layout (shared with the NumPy reference in elementwise.py and with dropout.cu): uint32 word
// w holds elements 32w .. 32w+31 of the C-order flat array, element 32w+j in bit j; the bits past
// the last element of the last word are 0. Each warp covers 32 consecutive elements, so one
// __ballot_sync makes a word and lane 0 stores it.
//
// relu_fwd_mask may run in place (y == x): every element is read and then written by one thread,
// so x and y carry no __restrict__.
//
// nvrtc-check: -DEW_T=float -DEW_S=float
// nvrtc-check: -DEW_T=__half -DEW_S=float
// nvrtc-check: -DEW_T=__nv_bfloat16 -DEW_S=float
// nvrtc-check: -DEW_T=double -DEW_S=double
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef EW_T
#define EW_T float
#endif
#ifndef EW_S
#define EW_S float
#endif
typedef EW_T T;
typedef EW_S S;

#include "dtypes.cuh"  // to_acc / from_acc
#include "activation.cuh"  // gelu_erf, gelu_tanh and their gradients

#define GRID_LOOP(i, n) \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)

// relu_fwd and gelu_fwd_* may run in place (y == x): each element is read, then written, by one thread.
extern "C" __global__ void relu_fwd(const T* x, T* y, long long n) {
    GRID_LOOP(i, n) {
        const T v = x[i];
        y[i] = to_acc<float>(v) > 0.0f ? v : from_acc<T>(0.0f);
    }
}

extern "C" __global__ void gelu_fwd_erf(const T* x, T* y, long long n) {
    GRID_LOOP(i, n) y[i] = from_acc<T>(gelu_erf(to_acc<float>(x[i])));
}

extern "C" __global__ void gelu_fwd_tanh(const T* x, T* y, long long n) {
    GRID_LOOP(i, n) y[i] = from_acc<T>(gelu_tanh(to_acc<float>(x[i])));
}

extern "C" __global__ void gelu_bwd_erf(const T* __restrict__ g, const T* __restrict__ x, T* __restrict__ dx,
                                        long long n) {
    GRID_LOOP(i, n) dx[i] = from_acc<T>(to_acc<float>(g[i]) * gelu_erf_grad(to_acc<float>(x[i])));
}

extern "C" __global__ void gelu_bwd_tanh(const T* __restrict__ g, const T* __restrict__ x, T* __restrict__ dx,
                                         long long n) {
    GRID_LOOP(i, n) dx[i] = from_acc<T>(to_acc<float>(g[i]) * gelu_tanh_grad(to_acc<float>(x[i])));
}

// Does nothing: the launch-overhead floor that bench/norms.py times.
extern "C" __global__ void noop() {}

// n32: n rounded up to a multiple of 32. blockDim.x is a multiple of 32, so every warp sees 32
// consecutive indices starting at a multiple of 32 and the loop condition is uniform in a warp.
extern "C" __global__ void relu_fwd_mask(const T* x, T* y, unsigned* __restrict__ mask, long long n) {
    const long long n32 = (n + 31) & ~31LL;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n32;
         i += (long long)gridDim.x * blockDim.x) {
        bool keep = false;
        if (i < n) {
            const T v = x[i];
            keep = to_acc<S>(v) > (S)0;
            y[i] = keep ? v : from_acc<T>((S)0);
        }
        const unsigned word = __ballot_sync(0xffffffffu, keep);
        if ((threadIdx.x & 31) == 0) mask[i >> 5] = word;
    }
}

extern "C" __global__ void mask_apply(const T* __restrict__ g, const unsigned* __restrict__ mask,
                                      T* __restrict__ dx, long long n, S scale) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const bool keep = (mask[i >> 5] >> (i & 31)) & 1u;
        dx[i] = keep ? from_acc<T>(to_acc<S>(g[i]) * scale) : from_acc<T>((S)0);
    }
}
