// Warp sums by xor butterflies: every lane gets the sum of the warp's 32 lanes, with the same bits in every lane
// (threads that go on to branch on it agree). The block and cluster reductions around them differ per kernel.
#pragma once

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float2 warp_sum2(float2 v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        v.x += __shfl_xor_sync(0xffffffffu, v.x, o);
        v.y += __shfl_xor_sync(0xffffffffu, v.y, o);
    }
    return v;
}

// The block's sums of each thread's N values, into out[0..N): each warp's by shuffles, then the warps' added in
// warp order through shared memory, so the bits do not depend on timing. Every thread of a block of WARPS warps
// calls it.
template <int N, int WARPS>
__device__ __forceinline__ void block_sums_to(const float (&acc)[N], float* __restrict__ out) {
    __shared__ float sums[WARPS][N];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const float v = warp_sum(acc[i]);
        if (lane == 0) sums[warp][i] = v;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < N; i += WARPS * 32) {
        float v = 0.0f;
#pragma unroll
        for (int wp = 0; wp < WARPS; ++wp) v += sums[wp][i];
        out[i] = v;
    }
}
