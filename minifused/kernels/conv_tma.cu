// Conv2d as an implicit GEMM on Hopper (sm_90a), fed by the tensor memory accelerator (TMA): the forward,
// and the backward-data of stride 1 (the same sum with the taps mirrored), fp16 / bf16 with fp32 accumulation.
//
//   Y[m=(n,p,q), k] = sum_{(r,s,c)} X_nhwc[n, p*sy + oy + r*ry, q*sx + ox + s*rx, c] * W[k, r, s, c]
//     forward:            sy, sx = stride, oy, ox = -padding, ry, rx = dilation
//     backward-data (s1): X is dY, W is W_crsk, oy, ox = +padding, ry, rx = -dilation
//
// A tile is 128 output pixels that are whole output rows of one image, or whole images (the host picks this
// kernel only for such shapes). For one tap (r, s) and 64 channels, the tile's operand A is then one TMA
// box of the 4-d NHWC tensor {64 channels, a row's pixels, the tile's rows, its images}, started at the tap's
// offset and read with the convolution's stride as the box's element strides: the TMA unit zero-fills what
// lies outside the tensor (the padding), writes the box in wgmma's 128-byte-swizzled K-major layout, and
// counts its bytes on the stage's mbarrier. Operand B is a 2-d box of the packed weights (K rows of
// R*S*Cp). No thread computes an address of the operands.
//
// Warp-specialized and persistent: one block per SM walks the tiles (blockIdx.x, + gridDim.x, ...); warp 0
// issues the loads into a STAGES-deep ring (full / empty mbarriers), warpgroups 1 and 2 multiply rows
// [0, 64) and [64, 128) of A by all of B with wgmma, and write the tile through shared memory to NCHW
// (16-byte stores along the pixels), bias and ReLU applied in fp32. While they write one tile, the
// producer already loads the next one's stages.
//
// nvrtc-check[sm_90a]: -DCT_T=__half -DCT_BN=128
// nvrtc-check[sm_90a]: -DCT_T=__nv_bfloat16 -DCT_IS_BF16=1 -DCT_BN=64 -DCT_STAGES=6
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef CT_T
#define CT_T __half
#endif
#ifndef CT_IS_BF16
#define CT_IS_BF16 0
#endif
#ifndef CT_BN
#define CT_BN 128
#endif
#ifndef CT_STAGES
#define CT_STAGES 4
#endif

typedef CT_T T;
constexpr int BM = 128, BN = CT_BN, BK = 64, STAGES = CT_STAGES;  // BK: 64 elements = 128 bytes
constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, STAGE_BYTES = A_BYTES + B_BYTES;
constexpr int LDE = BM + 8;  // the epilogue tile, T[BN][LDE]: a row of 16-byte-aligned pixel runs
constexpr int NT = 384;      // warpgroup 0: the producer (warp 0); warpgroups 1, 2: the MMAs
static_assert(BN == 64 || BN == 128, "tiles of 128 x 64 or 128 x 128");
static_assert(sizeof(T) == 2, "fp16 or bf16");

// the host's CUtensorMap (cuTensorMapEncodeTiled), passed by value
struct __align__(64) TmaDesc { unsigned long long w[16]; };

#define WG_N CT_BN
#define WG_KIND CT_IS_BF16
#include "wgmma.cuh"

__device__ __forceinline__ unsigned smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    asm volatile("{\n.reg .pred p;\nWAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra WAIT;\n}\n" ::"r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ void tma_load_4d(unsigned dst, const TmaDesc* map, unsigned bar, int c0, int c1, int c2,
                                            int c3) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5, %6}], [%2];\n"
                 ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2),
                 "r"(c3) : "memory");
}
__device__ __forceinline__ void tma_load_2d(unsigned dst, const TmaDesc* map, unsigned bar, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4}], [%2];\n"
                 ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(c0), "r"(c1) : "memory");
}
// the consumer warpgroups' own barrier (id 1): the producer warp never waits on it
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, 256;\n" ::: "memory"); }

__device__ __forceinline__ float to_f(T v) {
#if CT_IS_BF16
    return __bfloat162float(v);
#else
    return __half2float(v);
#endif
}
__device__ __forceinline__ T from_f(float v) {
#if CT_IS_BF16
    return __float2bfloat16_rn(v);
#else
    return __float2half_rn(v);
#endif
}

// prm: M, N, OHW, OW, k_tiles (R*S*Cp/64), c_tiles (Cp/64), S, sy, oy, ry, ox, rx, n_tiles, tiles
// flags: 1 ReLU, 2 bias (conv.cu's Epilogue values; no mask here)
extern "C" __global__ void __launch_bounds__(NT, 1)
conv_tma(const __grid_constant__ TmaDesc map_a, const __grid_constant__ TmaDesc map_b, T* __restrict__ out,
         const T* __restrict__ bias, const int* __restrict__ prm, int flags) {
    const int M = prm[0], N = prm[1], OHW = prm[2], OW = prm[3], k_tiles = prm[4], c_tiles = prm[5], S = prm[6],
              sy = prm[7], oy = prm[8], ry = prm[9], ox = prm[10], rx = prm[11], n_tiles = prm[12],
              tiles = prm[13];
    extern __shared__ __align__(128) unsigned char smem_raw[];
    // the ring's tiles start on 1024 bytes (the 128-byte swizzle is a function of the address bits)
    unsigned char* ring = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
    T* epi = reinterpret_cast<T*>(ring + STAGES * STAGE_BYTES);
    unsigned long long* bars = reinterpret_cast<unsigned long long*>(epi + BN * LDE);  // full[STAGES], empty[STAGES]
    const unsigned full0 = smem_addr(bars), empty0 = full0 + 8 * STAGES;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    if (tid == 0) {
        for (int i = 0; i < STAGES; ++i) {
            mbar_init(full0 + 8 * i, 1);
            mbar_init(empty0 + 8 * i, 8);  // one arrival per consumer warp
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (warp < 4) {  // ---------------------------------------------------------------- producer
        if (warp != 0 || lane != 0) return;
        int stage = 0;
        unsigned phase = 0;
        for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
            const int mt = tile / n_tiles, n0 = (tile - mt * n_tiles) * BN, m0 = mt * BM;
            const int img = m0 / OHW, p0 = (m0 - img * OHW) / OW;
            for (int kt = 0; kt < k_tiles; ++kt) {
                mbar_wait(empty0 + 8 * stage, phase ^ 1);
                const unsigned full = full0 + 8 * stage, dst = smem_addr(ring + stage * STAGE_BYTES);
                mbar_expect_tx(full, STAGE_BYTES);
                const int tap = kt / c_tiles, ct = kt - tap * c_tiles, r = tap / S, s = tap - r * S;
                tma_load_4d(dst, &map_a, full, ct * BK, ox + s * rx, p0 * sy + oy + r * ry, img);
                tma_load_2d(dst + A_BYTES, &map_b, full, kt * BK, n0);
                if (++stage == STAGES) { stage = 0; phase ^= 1; }
            }
        }
        return;
    }

    // -------------------------------------------------------------------- consumers
    const int wg = warp / 4 - 1, ct_id = tid - 128;  // warpgroup 0 or 1 of the MMAs; index among their threads
    const int g = lane >> 2, tig = lane & 3;
    int stage = 0;
    unsigned phase = 0;
    float acc[BN / 2];
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const int mt = tile / n_tiles, n0 = (tile - mt * n_tiles) * BN, m0 = mt * BM;
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
        int prev = -1;
        for (int kt = 0; kt < k_tiles; ++kt) {
            mbar_wait(full0 + 8 * stage, phase);
            const unsigned char* st = ring + stage * STAGE_BYTES;
            const unsigned long long da = wg_desc(st + wg * (A_BYTES / 2)), db = wg_desc(st + A_BYTES);
            wg_fence();
#pragma unroll
            for (int kq = 0; kq < 4; ++kq) wgmma_step(acc, da + 2 * kq, db + 2 * kq);  // 32 bytes = 2 units
            wg_commit();
            wg_wait<1>();  // the previous k-tile's MMAs are done: its stage goes back to the producer
            if (prev >= 0 && lane == 0) mbar_arrive(empty0 + 8 * prev);
            prev = stage;
            if (++stage == STAGES) { stage = 0; phase ^= 1; }
        }
        wg_wait<0>();
        wg_fence_acc(acc);
        if (prev >= 0 && lane == 0) mbar_arrive(empty0 + 8 * prev);

        // epilogue: fp32 -> bias, ReLU -> T, through shared memory (the last tile's readers are done first)
        consumers_sync();
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
            for (int t = 0; t < 4; ++t) {
                const int mr = wg * 64 + (warp % 4) * 16 + g + (t >> 1) * 8, nc = j * 8 + tig * 2 + (t & 1);
                float v = acc[j * 4 + t];
                if (flags & 2) v += n0 + nc < N ? to_f(bias[n0 + nc]) : 0.0f;
                if (flags & 1) v = fmaxf(v, 0.0f);
                epi[nc * LDE + mr] = from_f(v);
            }
        consumers_sync();
        // 16 runs of 8 pixels per channel; a run lies in one image (the host requires OHW % 8 == 0)
        for (int i = ct_id; i < BN * (BM / 8); i += 256) {
            const int nl = i / (BM / 8), m = m0 + (i % (BM / 8)) * 8, n = n0 + nl;
            if (m >= M || n >= N) continue;
            const int img = m / OHW, pq = m - img * OHW;
            *reinterpret_cast<uint4*>(out + ((long long)img * N + n) * OHW + pq) =
                *reinterpret_cast<const uint4*>(epi + nl * LDE + (i % (BM / 8)) * 8);
        }
    }
}
