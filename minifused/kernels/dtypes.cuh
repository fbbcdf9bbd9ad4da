// Element types of minifused's kernels and their conversions: most kernels load T, compute in
// float32 and store T (to_f / from_f); those that also take float64 compute in an accumulator
// type A, float or double (to_acc<A> / from_acc<T>).
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename U> __device__ __forceinline__ U from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename A> __device__ __forceinline__ A to_acc(float v) { return (A)v; }
template <typename A> __device__ __forceinline__ A to_acc(double v) { return (A)v; }
template <typename A> __device__ __forceinline__ A to_acc(__half v) { return (A)__half2float(v); }
template <typename A> __device__ __forceinline__ A to_acc(__nv_bfloat16 v) { return (A)__bfloat162float(v); }
template <typename U> __device__ __forceinline__ U from_acc(double v) { return (U)v; }  // (a float widens exactly)
template <> __device__ __forceinline__ __half from_acc<__half>(double v) { return __float2half_rn((float)v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16>(double v) {
    return __float2bfloat16_rn((float)v);
}
