// Vectors of n elements in one aligned access (16 bytes for the row kernels' VEC), and their loads.
#pragma once

template <typename U, int n> struct alignas(sizeof(U) * n) Vec { U v[n]; };

// MF_STREAM 1: data a kernel reads exactly once (a row kernel's input, never re-read by it) is loaded
// cache-streaming (ld.global.cs: evict-first in L1 and L2), so its lines replace its own earlier lines
// in L2 and not the lines other kernels left there -- dirty ones among them, whose write-back would
// share the DRAM bandwidth with this kernel. 2: outputs are stored the same way too. 0: plain accesses.
#ifndef MF_STREAM
#define MF_STREAM 1
#endif

template <typename V> __device__ __forceinline__ V load_plain(const void* p) { return *reinterpret_cast<const V*>(p); }

template <typename V> __device__ __forceinline__ V load_once(const void* p) {
#if MF_STREAM >= 1
    V out;
    if constexpr (sizeof(V) == 16) {
        const int4 r = __ldcs(reinterpret_cast<const int4*>(p));
        memcpy(&out, &r, 16);
    } else if constexpr (sizeof(V) == 8) {
        const int2 r = __ldcs(reinterpret_cast<const int2*>(p));
        memcpy(&out, &r, 8);
    } else if constexpr (sizeof(V) == 4) {
        const int r = __ldcs(reinterpret_cast<const int*>(p));
        memcpy(&out, &r, 4);
    } else {
        out = *reinterpret_cast<const V*>(p);
    }
    return out;
#else
    return load_plain<V>(p);
#endif
}

template <typename V> __device__ __forceinline__ void store_out(void* p, const V& a) {
#if MF_STREAM >= 2
    if constexpr (sizeof(V) == 16) {
        int4 r;
        memcpy(&r, &a, 16);
        __stcs(reinterpret_cast<int4*>(p), r);
        return;
    }
#endif
    *reinterpret_cast<V*>(p) = a;
}
