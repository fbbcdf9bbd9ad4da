// Casts among float32, float16 and bfloat16 (autocast's casts of activations, weights and gradients, both ways):
// y = x rounded to nearest even through float (exact between the 16-bit types, as every value of one is a float).
// Memory-bound: a thread takes a chunk of V = 8 elements, moved in vector accesses where both pointers are aligned
// to a chunk (the last partial chunk, and unaligned views, element by element). x and y are dense in one memory
// order (C order or channels-last: the caller's), walked as flat arrays.
//
// nvrtc-check: -DCAST_FROM=float -DCAST_TO=__half
// nvrtc-check: -DCAST_FROM=float -DCAST_TO=__nv_bfloat16
// nvrtc-check: -DCAST_FROM=__half -DCAST_TO=float
// nvrtc-check: -DCAST_FROM=__nv_bfloat16 -DCAST_TO=float
// nvrtc-check: -DCAST_FROM=__half -DCAST_TO=__nv_bfloat16
// nvrtc-check: -DCAST_FROM=__nv_bfloat16 -DCAST_TO=__half
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef CAST_FROM
#define CAST_FROM float
#endif
#ifndef CAST_TO
#define CAST_TO __nv_bfloat16
#endif
typedef CAST_FROM From;
typedef CAST_TO To;

#include "dtypes.cuh"  // to_acc / from_acc
#include "vec.cuh"     // Vec, load_as, store_as

constexpr int V = 8;

extern "C" __global__ void cast(const From* __restrict__ x, To* __restrict__ y, long long n) {
    const bool vec = (unsigned long long)x % (V * sizeof(From)) == 0 && (unsigned long long)y % (V * sizeof(To)) == 0;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x; c * V < n; c += step) {
        const long long i0 = c * V;
        if (vec && i0 + V <= n) {
            const Vec<From, V> a = load_as<Vec<From, V>>(x + i0);
            Vec<To, V> b;
#pragma unroll
            for (int k = 0; k < V; ++k) b.v[k] = from_acc<To>(to_acc<float>(a.v[k]));
            store_as(y + i0, b);
        } else {
            for (long long i = i0; i < n && i < i0 + V; ++i) y[i] = from_acc<To>(to_acc<float>(x[i]));
        }
    }
}
