// Vectors of n elements moved in one aligned access (16 bytes for the row kernels' VEC).
#pragma once

template <typename U, int n> struct alignas(sizeof(U) * n) Vec { U v[n]; };

template <typename V, typename U> __device__ __forceinline__ V load_as(const U* p) {
    return *reinterpret_cast<const V*>(p);
}
template <typename V, typename U> __device__ __forceinline__ void store_as(U* p, const V& a) {
    *reinterpret_cast<V*>(p) = a;
}
