// Conv2d onto at most 64 output channels (the forward's K, the backward-data's C) on Hopper (sm_90a): conv_tma.cu's
// implicit GEMM with its product transposed, fp16 / bf16 with fp32 accumulation: the forward, the backward-data of
// stride 1, and that of stride 2 as residue classes (the same gather, window, taps and classes as conv_tma.cu's,
// which says how).
//
//   Y^T[k, m=(n,p,q)] = sum_{(r,s,c)} W[k, r, s, c] * X_nhwc[n, p*sy + oy + r*ry, q*sx + ox + s*rx, c]
//
// Why transposed: conv_tma.cu puts the output pixels on the MMA's rows and the output channels on its columns,
// so onto 64 channels each of its warpgroups runs m64 x n64 x k16 steps, whose operands (2 KiB of pixels, 2 KiB of
// weights) read from shared memory take as long as the step's MMAs: the shared memory, which the TMA unit also
// fills, is what limits those tiles. Here the 64 channels are the MMA's rows (operand A: a box of the packed
// weights) and a warpgroup's 192 pixels its columns (operand B: one im2col load): an m64 x n192 x k16 step reads
// 8 KiB for three times the MMAs.
//
// A unit is 192 consecutive output pixels x the 64 channels; of a stride-2 backward-data's class, as many whole rows of
// the class's map as 192 columns take (its pixels interleave with the other classes' in the output, so that a box of
// them is a strided 5-d box of the NHWC output, whole rows of it; the MMA's columns past them are stale and not stored;
// 28-wide maps take 168 columns, 6 rows, and leave none), the units of one class after another. Warp-specialized and
// persistent as conv_tma.cu: one block per SM walks its units (CT_SCHEDULE); warp 0 issues the loads
// of each unit's stages in turn into a STAGES-deep ring; the two MMA warpgroups take the block's units alternately,
// each its own stages of the ring. Their main loops take turns (ping-pong: one writes its tile while the other
// multiplies): a warpgroup waits for a stage's loads by the parity of its phase, which tells the stage's use from the
// one before it but not from the one before that, so a warpgroup starts on its unit's stages only once the other has
// seen each of its own land (the turn mbarriers). The tiles go out through the TMA unit: NHWC (CT_NHWC_OUT) a box of
// 192 pixels x 64 channels (a class's: of its rows' pixels), NCHW three boxes of 64 channels x 64 pixels of one image
// (the host's OHW is a multiple of 64; the stride-2 classes only NHWC, which the host transposes for NCHW). Bias and
// ReLU in fp32, as conv_tma.cu's.
//
// nvrtc-check[sm_90a]: -DCT_T=__half -DCT_STAGES=5
// nvrtc-check[sm_90a]: -DCT_T=__nv_bfloat16 -DCT_IS_BF16=1 -DCT_STAGES=5 -DCT_NHWC_OUT=1
// nvrtc-check[sm_90a]: -DCT_T=__half -DCT_STAGES=5 -DCT_NHWC_OUT=1 -DCT_PIX=168
// nvrtc-check[sm_90a]: -DCT_T=__half -DCT_STAGES=5 -DCT_NHWC_OUT=1 -DCT_PIX=168 -DCT_SCHEDULE=1
#include "conv_tma.cuh"  // CT_T, CT_IS_BF16

#ifndef CT_STAGES
#define CT_STAGES 5
#endif
#ifndef CT_NHWC_OUT  // 1: channels-last (NHWC) output, else NCHW
#define CT_NHWC_OUT 0
#endif

#ifndef CT_PIX  // output pixels per unit, the MMA's columns: 192, or 168 for the classes of 28-wide maps (6 rows)
#define CT_PIX 192
#endif

typedef CT_T T;
constexpr int PIX = CT_PIX, BK = 64, STAGES = CT_STAGES, NT = 384;  // the producer's warpgroup and two of MMAs
constexpr int A_BYTES = 64 * BK * 2, B_BYTES = PIX * BK * 2, STAGE_BYTES = A_BYTES + B_BYTES;
constexpr int BOX_BYTES = PIX * 128;  // a warpgroup's output tile, PIX x 64 16-bit elements as 128-byte rows
static_assert(sizeof(T) == 2, "fp16 or bf16");
static_assert(PIX == 192 || (PIX == 168 && CT_NHWC_OUT), "192 pixels a unit (168: NHWC boxes of class rows)");

#define WG_N CT_PIX
#define WG_KIND CT_IS_BF16
#define WG_TRANS 0
#include "wgmma.cuh"

// warpgroup wg's own barrier (ids 1, 2): the producer and the other warpgroup never wait on it
__device__ __forceinline__ void group_sync(int wg) { asm volatile("bar.sync %0, 128;\n" ::"r"(wg + 1) : "memory"); }

// prm: M (a class's output pixels), N (output channels, <= 64), OHW, OW (a class's map), c_tiles (Cp/64), units,
// sy, ry, rx, S (the filter's columns), tap_step, sx, lx, ly (the window's corner), pix (a unit's output pixels),
// per_class (units per class), subs (1, or 2: the classes of a stride of 2, stored to NHWC by 5-d boxes), the
// schedule's place in prm (0: none), then PER_CLASS entries per class (Class), then the units' Schedule. The
// signature is conv_tma's (out unused: the tiles go out through map_out).
extern "C" __global__ void __launch_bounds__(NT, 1)
conv_tma_narrow(const __grid_constant__ TmaDesc map_a, const __grid_constant__ TmaDesc map_b,
                const __grid_constant__ TmaDesc map_out, T* __restrict__ out, const T* __restrict__ bias,
                const int* __restrict__ prm, int flags) {
    const int M = prm[0], N = prm[1], OHW = prm[2], OW = prm[3], c_tiles = prm[4], units = prm[5], sy = prm[6],
              ry = prm[7], rx = prm[8], S_all = prm[9], tap_step = prm[10], sx = prm[11], lx = prm[12], ly = prm[13],
              pix = prm[14], per_class = prm[15], subs = prm[16];
    const int* classes = prm + 18;
#if CT_SCHEDULE
    const Schedule sched(prm + prm[17]);
#endif
    extern __shared__ __align__(128) unsigned char smem_raw[];
    // the ring's tiles and the boxes start on 1024 bytes (the 128-byte swizzle is a function of the address bits)
    unsigned char* ring = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
    unsigned char* boxes = ring + STAGES * STAGE_BYTES;
    const unsigned full0 = smem_addr(boxes + 2 * BOX_BYTES), empty0 = full0 + 8 * STAGES, turn0 = empty0 + 8 * STAGES;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    if (tid == 0) {
        for (int i = 0; i < STAGES; ++i) {
            mbar_init(full0 + 8 * i, 1);
            mbar_init(empty0 + 8 * i, 4);  // the four warps of the warpgroup that took the stage
        }
        mbar_init(turn0, 1);  // turn[w]: warpgroup w may start its next main loop (the other's leader arrives)
        mbar_init(turn0 + 8, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    // a stage's place in the ring: the position-th stage loaded by this block (all units' in turn). Units go class
    // by class, pix pixels each.
    if (warp < 4) {  // ---------------------------------------------------------------- producer
        if (tid != 0) return;
        int pos = 0;
#if CT_SCHEDULE
        for (int i = sched.begin; i < sched.end; ++i) { const int unit = sched.list[i];
#else
        for (int unit = blockIdx.x; unit < units; unit += gridDim.x) {
#endif
            const int cls = unit / per_class, m0 = (unit - cls * per_class) * pix, img = m0 / OHW,
                      pq = m0 - img * OHW, p0 = pq / OW, q0 = pq - p0 * OW;
            const Class c(classes + PER_CLASS * cls);
            for (int r = 0; r < c.R; ++r)  // tap by tap, channel tile by channel tile (no division a stage)
                for (int s = 0; s < c.S; ++s) {
                    const int off_w = c.ox + s * rx - lx, off_h = c.oy + r * ry - ly,
                              b_tap = (c.r0 + r * tap_step) * S_all + c.s0 + s * tap_step;
                    for (int ct = 0; ct < c_tiles; ++ct, ++pos) {
                        const int stage = pos % STAGES;
                        mbar_wait(empty0 + 8 * stage, ((pos / STAGES) & 1) ^ 1);
                        const unsigned full = full0 + 8 * stage, dst = smem_addr(ring + stage * STAGE_BYTES);
                        mbar_expect_tx(full, A_BYTES + pix * 128);  // (the MMAs' columns past pix: stale, not stored)
                        tma_load_2d(dst, &map_b, full, (b_tap * c_tiles + ct) * BK, 0);  // the weights' (tap, tile)
                        tma_load_im2col(dst + A_BYTES, &map_a, full, ct * BK, lx + q0 * sx, ly + p0 * sy, img, off_w,
                                        off_h);
                    }
                }
        }
        return;
    }

    // -------------------------------------------------------------------- the MMA warpgroups
    const int wg = warp / 4 - 1, g = lane >> 2;
    const int row = (warp % 4) * 16 + g;  // the thread's first output channel (and row + 8)
    const bool leader = tid % 128 == 0;
    unsigned char* box = boxes + wg * BOX_BYTES;
    float acc[PIX / 2];
    int pos = 0, local = 0, turns = 0;
#if CT_SCHEDULE
    for (int i = sched.begin; i < sched.end; ++i, ++local) { const int unit = sched.list[i];
#else
    for (int unit = blockIdx.x; unit < units; unit += gridDim.x, ++local) {
#endif
        const int cls = unit / per_class, m0 = (unit - cls * per_class) * pix;
        const Class c(classes + PER_CLASS * cls);
        const int kt_all = c.R * c.S * c_tiles;  // stages of the unit (none for a class without live taps: zeros)
        if ((local & 1) != wg) {  // the other warpgroup's unit: its stages are the other's
            pos += kt_all;
            continue;
        }
        // this warpgroup's turn: the first of warpgroup 0 at once (a fresh mbarrier's preceding phase counts as done)
        mbar_wait(turn0 + 8 * wg, (turns++ + (wg == 0)) & 1);
#pragma unroll
        for (int i = 0; i < PIX / 2; ++i) acc[i] = 0.0f;
        int prev = -1;
        for (int kt = 0; kt < kt_all; ++kt) {  // K-major operands: 16 of reduction are 32 bytes = 2 units
            const int stage = (pos + kt) % STAGES;
            mbar_wait(full0 + 8 * stage, ((pos + kt) / STAGES) & 1);
            const unsigned char* st = ring + stage * STAGE_BYTES;
            const unsigned long long da = wg_desc(st), db = wg_desc(st + A_BYTES);
            wg_fence();
#pragma unroll
            for (int kq = 0; kq < 4; ++kq) wgmma_step(acc, da + 2 * kq, db + 2 * kq);
            wg_commit();
            wg_wait<1>();
            if (prev >= 0 && lane == 0) mbar_arrive(empty0 + 8 * prev);
            prev = stage;
        }
        pos += kt_all;
        if (leader) mbar_arrive(turn0 + 8 * (1 - wg));  // every stage of this unit has landed: the other's turn
        wg_wait<0>();
        wg_fence_acc(acc);
        if (prev >= 0 && lane == 0) mbar_arrive(empty0 + 8 * prev);

        // the tile into its box (once the TMA unit has read this warpgroup's last one out of it)
        if (leader) bulk_wait_read();
        group_sync(wg);
        // the accumulators by stmatrix, four 8 x 8 matrices at a time: (pixel block j, channels + 0), (j, + 8),
        // (j + 1, + 0), (j + 1, + 8) of the warp's 16 channels; this lane addresses matrix mi's row (or column) l8
        // (an odd last pixel block, PIX = 168: its two matrices alone, addressed by lanes 0-15)
        const int mi = lane >> 3, l8 = lane & 7, c0 = (warp % 4) * 16 + (mi & 1) * 8;
#pragma unroll
        for (int j = 0; j < PIX / 8; j += 2) {
            unsigned r[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int jj = min(j + i / 2, PIX / 8 - 1), h = i & 1;
                r[i] = pack2<T>(bias_relu(acc[jj * 4 + h * 2], row + h * 8, N, bias, flags),
                                bias_relu(acc[jj * 4 + h * 2 + 1], row + h * 8, N, bias, flags));
            }
            const int px = (j + mi / 2) * 8;  // matrix mi's first pixel
#if CT_NHWC_OUT  // a row per pixel: the matrices transposed, a pixel's 8 channels (16 bytes) a row
            const unsigned at = smem_addr(box + swizzle128((px + l8) * 128 + c0 * 2));
#else  // a row per channel in the box of 64 pixels: a channel's 8 pixels a row
            const unsigned at = smem_addr(box + (px / 64) * 8192 + swizzle128((c0 + l8) * 128 + (px % 64) * 2));
#endif
            if (j + 1 < PIX / 8)
                stmatrix_x4<CT_NHWC_OUT != 0>(at, r);
            else
                stmatrix_x2<CT_NHWC_OUT != 0>(at, r[0], r[1]);
        }
        fence_async_smem();
        group_sync(wg);
        if (leader) {  // the unit leaves out what lies past the tensor's ends (pixels past M, channels past N)
#if CT_NHWC_OUT
            if (subs == 2)  // whole rows of the class's map: (channels, x0, q, y0, class row n * OH + p)
                tma_store_5d(&map_out, smem_addr(box), 0, c.x0, 0, c.y0, m0 / OW);
            else
                tma_store_2d(&map_out, smem_addr(box), 0, m0);
#else
            for (int b = 0; b < PIX / 64 && m0 + 64 * b < M; ++b) {
                const int m = m0 + 64 * b, img = m / OHW;
                tma_store_3d(&map_out, smem_addr(box + b * 8192), m - img * OHW, 0, img);
            }
#endif
            bulk_commit();
        }
    }
    if (leader) bulk_wait();  // the last tile's stores written before the block's shared memory goes
}
