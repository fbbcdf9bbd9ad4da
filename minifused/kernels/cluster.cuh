// Thread-block clusters (sm_90+): MF_CLUSTER blocks per cluster (1: no clusters, any architecture).
// A kernel declared with CLUSTER_DIMS is launched on a grid that is a multiple of CLUSTER; its blocks meet
// at cluster barriers and read each other's shared memory (load_cluster).
#pragma once
#include "vec.cuh"

#ifndef MF_CLUSTER
#define MF_CLUSTER 1
#endif
constexpr int CLUSTER = MF_CLUSTER;
#if MF_CLUSTER > 1
#if __CUDA_ARCH__ < 900
#error "MF_CLUSTER > 1 needs thread-block clusters (sm_90 or newer)"
#endif
#define CLUSTER_DIMS __cluster_dims__(MF_CLUSTER, 1, 1)
#else
#define CLUSTER_DIMS
#endif

// The cluster barrier in two halves (release/acquire: shared-memory writes before a block's arrive are
// visible to every block after its wait), so work can sit between them; cluster_sync is both. Every
// thread of every block of the cluster takes part (.aligned: whole warps).
__device__ __forceinline__ void cluster_arrive() {
#if MF_CLUSTER > 1
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait() {
#if MF_CLUSTER > 1
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_sync() {
    cluster_arrive();
    cluster_wait();
}
__device__ __forceinline__ unsigned cluster_rank() {
    unsigned r = 0;
#if MF_CLUSTER > 1
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
#endif
    return r;
}
// ``addr``: a shared-memory address of this block; the same offset in block ``rank``'s (V: a Vec of 1, 2
// or 4 floats).
template <typename V> __device__ __forceinline__ V load_cluster(unsigned addr, unsigned rank) {
    V a = {};
#if MF_CLUSTER > 1
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
    if constexpr (sizeof(V) == 16)
        asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
                     : "=f"(a.v[0]), "=f"(a.v[1]), "=f"(a.v[2]), "=f"(a.v[3]) : "r"(remote) : "memory");
    else if constexpr (sizeof(V) == 8)
        asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];" : "=f"(a.v[0]), "=f"(a.v[1]) : "r"(remote) : "memory");
    else
        asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(a.v[0]) : "r"(remote) : "memory");
#endif
    return a;
}
// The same for a pair of doubles (16 bytes).
__device__ __forceinline__ Vec<double, 2> load_cluster_pair(unsigned addr, unsigned rank) {
    Vec<double, 2> a = {};
#if MF_CLUSTER > 1
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
    asm volatile("ld.shared::cluster.v2.f64 {%0, %1}, [%2];" : "=d"(a.v[0]), "=d"(a.v[1]) : "r"(remote) : "memory");
#endif
    return a;
}
