// Conv2d as an implicit GEMM on Hopper (sm_90a), fed by the tensor memory accelerator (TMA): the forward and
// the backward-data (the same sum with the taps mirrored), fp16 / bf16 with fp32 accumulation.
//
//   Y[m=(n,p,q), k] = sum_{(r,s,c)} X_nhwc[n, p*sy + oy + r*ry, q*sx + ox + s*rx, c] * W[k, r, s, c]
//     forward:            sy, sx = stride, oy, ox = -padding, ry, rx = dilation
//     backward-data (s1): X is dY, W is W_crsk, oy, ox = +padding, ry, rx = -dilation
//
// The backward-data of a stride > 1 runs as one such sum per residue class of dX's pixels (y, x) modulo the
// stride: a class's pixels are a map of their own, reached from dY at stride 1 by the taps whose rows and
// columns match the class (those tap_step = stride apart; none for some classes of a 1x1 filter, whose pixels
// are then zeros). One launch runs every class of a stride of 2: a unit sums the two column classes of one
// class row for the same pixels in turn, and writes them interleaved; or, channels-last through the TMA unit
// (CT_TMA_OUT 2), a unit is one class's tile of whole rows of its map (as many as BM rows of the MMA take; those
// past them are stale and not stored), stored as a strided 5-d box of the output.
//
// A tile is BM = 128, 192 or 256 consecutive output pixels (m = (n, p, q) in order, across rows and images). For one
// tap (r, s) and 64 channels, its operand A is one im2col-mode TMA load of the 4-d NHWC tensor {C, W, H, N}: the
// TMA unit walks the tile's pixels through a window of the image (the tensor map's pixel box, stepped by the
// convolution's stride: one position per output pixel of a row, one row per output row, then the next
// image), reads 64 channels at each position plus the tap's offset, zero-fills what lies outside the tensor
// (the padding), writes 128-byte rows in wgmma's 128-byte-swizzled K-major layout, and counts the bytes on the
// stage's mbarrier. The window starts at (lx, ly), the least gather offset (ox + s*rx, oy + r*ry) over the
// taps and classes, so that every tap's offset from it is >= 0. Operand B is a 2-d box of the packed weights
// (K rows of R*S*Cp); the backward-data of a channels-last weight (CT_B_KRSC) reads it from the weight's own KRSC
// memory instead, boxes of 64 output channels x 64 of reduction (MN-major), so that the weights need no pack
// before it: on ResNet's shapes the pack's launch and pass cost the backward-data 4-22% of its time. No
// thread computes an address of the operands.
//
// Warp-specialized and persistent: one block per SM walks its tiles (CT_SCHEDULE); warp 0
// issues the loads into a STAGES-deep ring (full / empty mbarriers), warpgroups 1, 2 (3, 4) multiply rows [0, 64),
// [64, 128) ([128, 192), [192, 256)) of A by all of B with wgmma, and write the tile through shared memory to NCHW
// (stores of runs of pixels along a channel), bias and ReLU applied in fp32. While they write one tile, the
// producer already loads the next one's stages. Where the output's layout allows (CT_TMA_OUT), the tile goes
// out through the TMA unit instead: the MMA warps lay it into shared memory as boxes of 128-byte rows
// (128-byte swizzled) and one thread hands those to the unit, which writes them to global memory while the
// warps go on to the next tile's MMAs; written by the warps themselves, a tile's stores left the tensor cores
// idle for as long as they took. (Measured no faster: a single column tile's weights held in shared memory for
// all of a block's tiles, loaded once rather than in every stage, a quarter to a third fewer bytes through the
// L2 on 64-column tiles: 0.94-1.03x the streamed kernel's speed on ResNet's 64-channel shapes, forward and
// backward-data, so operand B's loads do not limit those tiles. Nsight Compute on c64h56: the tensor pipe active
// 47% of the time, cuDNN's 256 x 64 x 32 kernel 60%.) Onto 64 output channels the shared memory limits these tiles:
// conv_tma_narrow.cu runs those sums transposed instead (it says why).
//
// The backward-filter (CT_WGRAD=1, conv_tma_wgrad) is the same machinery on the transposed sum,
//
//   dW[k, (r,s,c)] = sum_{m=(n,p,q)} dY_nhwk[m, k] * X_nhwc[n, p*sy + oy + r*ry, q*sx + ox + s*rx, c],
//
// reduced over WPIX = 128 output pixels per stage: operand A is dY's 2-d boxes of 128 pixels x 64 channels (one
// per 64 rows of the tile), operand B two im2col loads of X, each 128 pixels x 64 channels of one tap (a column
// tile of 128 may span two taps). Both land pixel-major, i.e. MN-major for wgmma (the transposed operand form).
// Work units are (row tile, column tile, split of the pixels). Split, each unit writes its fp32 partial tile
// from registers, and conv_util.cu's wgrad_reduce sums the splits in order; unsplit (one split, or the whole
// waves of whole tiles where there are more tiles than SMs), the units may write dW itself where its memory is
// the partials' order (KRSC: a channels-last weight's, or any 1x1 filter's).
//
// The loads limit this kernel: its MMAs alone, and its loads alone, each ran faster than both together, and
// neither the ring's depth (3 to 7 stages), the unit order, the MMAs' wait (a stage released as soon as its own
// MMAs finish), the operands' MN-major form nor the epilogue (the partial tiles stored through the TMA unit
// while the MMAs go on) moved it. What did: the producer thread's own instructions between two stages' loads
// (integer divisions a chunk, for its pixel and taps, held the ring's refills back; without them every shape
// ran faster, so the one thread's issue rate, not the TMA unit alone, paces the loads). The TMA unit's rate
// does depend on the boxes' size: a stage of 64 pixels, four boxes of 8 KiB, left the MMA warps waiting for data
// a quarter of their time, and the same bytes in boxes of 16 KiB (128 pixels, half as many boxes per byte) run the
// whole kernel 1.1-1.5x as fast on ResNet's shapes.
// (Measured slower, at 64 pixels a stage: KCRS dW written from the registers, 2-byte stores RS apart, where
// wgrad_reduce_kcrs transposes through shared memory; split tiles summed by their last unit to arrive, counted on
// a per-tile counter: each unit's fence, count and read-back stall its MMA warps; a stream-K schedule, each
// block an equal run of one tile's steps after another (no idle SMs in a last wave), at 0.54-0.98x (again at 128
// pixels, over every tile or after whole waves of whole tiles: 0.8-1.05x against split-K or the hybrid); a tile's
// splits on the 2 or 4 blocks of a thread-block cluster, summed over distributed shared memory into dW: 0.86-1.04x
// on ResNet's deep layers, 0.1-0.7x where split-K takes many splits; x read by tiled loads where a 1x1 filter
// allows: as fast as by im2col loads; 128 x 256 tiles (m64n256 per warpgroup, a quarter fewer bytes per FLOP):
// 0.87-1.2x; row tiles in pairs of a thread-block cluster that share X's loads by multicast: 0.64-0.87x, and
// again with each stage freed by both blocks' consumer warps (remote mbarrier arrivals, no cluster barrier per
// stage): 0.60-0.83x on the 3x3 shapes of 256 and 512 output channels, 0.95x on the 1x1, though it reads a
// quarter fewer bytes; on c256h14s2, a stream schedule (each block an equal run of the tiles' chunks, the split
// tiles summed by the fixup deferred to each block's end): as fast as two rounds of split units, and 0.89x of
// them on c256h14; the fixup's partials staged in the ring by bulk copies and summed from shared memory: 0.90x on
// c512h7, 0.73x on r18c256h8s2k1; 256-row tiles, four MMA warpgroups, at 64 pixels a stage in a 4-stage ring:
// 1.02-1.07x the default at batch 256 on c256h14s2, c256h14, r18c256h8s2 and r18c256h8, 0.79-0.86x on the
// 512-channel layers and 0.86-0.98x on the stride-2 layers at batch 128, and at 128 pixels a stage (2 stages fit)
// slower on every shape; two blocks an SM (64-row tiles, 80 registers a thread; 128 rows need more): 0.72-0.93x
// one block's 64-row tiles, at 128 pixels a stage (2 stages a block) or 64 (4 stages). Per unit, beside its
// chunks, a block spends about 2.5 chunks' time (Nsight Compute: SM cycles per chunk at 3 and 5 splits), which
// more, shorter units pay. Also measured and not kept: a last column tile of 64 (64-channel layers, ncol 4.5
// tiles of 128) loading one box of X and multiplying m64n64 (128 rows) or with one warpgroup idle (64 rows): 1.3x
// on the 1x1 shortcuts, 0.95-1.04x on the 3x3 layers.)
//
// nvrtc-check[sm_90a]: -DCT_T=__half -DCT_BN=128 -DCT_STAGES=5
// nvrtc-check[sm_90a]: -DCT_T=__nv_bfloat16 -DCT_IS_BF16=1 -DCT_BN=64 -DCT_STAGES=8
// nvrtc-check[sm_90a]: -DCT_T=__half -DCT_BN=64 -DCT_STAGES=6 -DCT_NHWC_OUT=1
// nvrtc-check[sm_90a]: -DCT_T=__half -DCT_BN=128 -DCT_STAGES=6 -DCT_NHWC_OUT=1 -DCT_TMA_OUT=1
// nvrtc-check[sm_90a]: -DCT_T=__nv_bfloat16 -DCT_IS_BF16=1 -DCT_BN=64 -DCT_STAGES=6 -DCT_TMA_OUT=1
// nvrtc-check[sm_90a]: -DCT_T=__nv_bfloat16 -DCT_IS_BF16=1 -DCT_BM=192 -DCT_STAGES=4 -DCT_NHWC_OUT=1 -DCT_TMA_OUT=1
// nvrtc-check[sm_90a]: -DCT_T=__half -DCT_BM=192 -DCT_BN=128 -DCT_STAGES=4
// nvrtc-check[sm_90a]: -DCT_T=__half -DCT_BM=256 -DCT_STAGES=4 -DCT_NHWC_OUT=1 -DCT_TMA_OUT=1 -DCT_OUT_BOXES=1
// nvrtc-check[sm_90a]: -DCT_T=__nv_bfloat16 -DCT_IS_BF16=1 -DCT_STAGES=6 -DCT_NHWC_OUT=1 -DCT_TMA_OUT=1 -DCT_B_KRSC=1
// nvrtc-check[sm_90a]: -DCT_T=__half -DCT_BM=192 -DCT_BN=64 -DCT_STAGES=4 -DCT_NHWC_OUT=1 -DCT_B_KRSC=1
// nvrtc-check[sm_90a]: -DCT_T=__half -DCT_BN=128 -DCT_STAGES=6 -DCT_NHWC_OUT=1 -DCT_TMA_OUT=2 -DCT_B_KRSC=1
// nvrtc-check[sm_90a]: -DCT_T=__half -DCT_BM=192 -DCT_STAGES=4 -DCT_NHWC_OUT=1 -DCT_TMA_OUT=2 -DCT_SCHEDULE=1
// nvrtc-check[sm_90a]: -DCT_T=__half -DCT_BN=128 -DCT_STAGES=4 -DCT_SCHEDULE=1
// nvrtc-check[sm_90a]: -DCT_T=__nv_bfloat16 -DCT_IS_BF16=1 -DCT_BM=192 -DCT_STAGES=4 -DCT_NHWC_OUT=1 -DCT_TMA_OUT=2
// nvrtc-check[sm_90a]: -DCT_T=__half -DCT_WGRAD=1 -DCT_BM=128 -DCT_STAGES=3 -DCT_WPIX=128
// nvrtc-check[sm_90a]: -DCT_T=__nv_bfloat16 -DCT_IS_BF16=1 -DCT_WGRAD=1 -DCT_BM=64 -DCT_STAGES=4 -DCT_WPIX=128
// nvrtc-check[sm_90a]: -DCT_T=__nv_bfloat16 -DCT_IS_BF16=1 -DCT_WGRAD=1 -DCT_BM=128 -DCT_STAGES=3 -DCT_WPIX=128
#include "conv_tma.cuh"  // CT_T, CT_IS_BF16

#ifndef CT_BN
#define CT_BN 128
#endif
#ifndef CT_STAGES
#define CT_STAGES 4
#endif
#ifndef CT_WGRAD
#define CT_WGRAD 0
#endif
#ifndef CT_BM  // rows per tile: the forward / backward-data's output pixels (128 or 192), the backward-filter's
#define CT_BM 128  // output channels (64 or 128)
#endif
#ifndef CT_NHWC_OUT  // 1: the forward / backward-data write channels-last (NHWC) output, else NCHW
#define CT_NHWC_OUT 0
#endif
#ifndef CT_TMA_OUT  // 1: the forward / backward-data's tiles go out through the TMA unit (one class per unit); 2: the
                    // stride-2 classes' tiles, of whole rows of a class's map, to NHWC output
#define CT_TMA_OUT 0
#endif
#ifndef CT_B_KRSC  // 1: the backward-data's operand B read from the weight's own KRSC memory (MN-major), not packed
#define CT_B_KRSC 0
#endif

typedef CT_T T;
constexpr int BN = CT_BN, STAGES = CT_STAGES;
// warpgroup 0: the producer (warp 0); the others the MMAs, one per 64 rows of the forward's tile (two for the filter
// gradient's)
constexpr int MMA_WGS = CT_WGRAD ? 2 : CT_BM / 64, CONSUMERS = 128 * MMA_WGS, NT = 128 + CONSUMERS;
static_assert(BN == 64 || BN == 128, "tiles of 64 or 128 columns");
static_assert(sizeof(T) == 2, "fp16 or bf16");

// one warpgroup's MMA: the forward's whole tile width; the backward-filter's 128 columns on 128-row tiles,
// else its half of them (both warpgroups take all 64 rows)
#if !CT_WGRAD
#define WG_N CT_BN
#elif CT_BM == 128
#define WG_N 128
#else
#define WG_N 64
#endif
#define WG_KIND CT_IS_BF16
#define WG_TRANS_A CT_WGRAD
#if CT_WGRAD || CT_B_KRSC  // (a literal: wgmma.cuh spells it into the instruction)
#define WG_TRANS_B 1
#else
#define WG_TRANS_B 0
#endif
#include "wgmma.cuh"


// the consumer warpgroups' own barrier (id 1): the producer warp never waits on it
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;\n" ::"n"(CONSUMERS) : "memory"); }

// The ring of STAGES stages: full[i] (the producer's expected bytes, completed by the TMA unit) and empty[i]
// (one arrival per consumer warp) mbarriers, and one side's position in it. Both sides walk the stages in the
// same order; a stage's phase bit flips each time round.
struct Ring {
    unsigned full0, empty0;
    int stage = 0, prev = -1;  // prev: the consumers' stage whose MMAs may still be running
    unsigned phase = 0;
    __device__ Ring(const void* bars) : full0(smem_addr(bars)), empty0(smem_addr(bars) + 8 * STAGES) {}
    __device__ void init() const {  // one thread, before the block's barrier
        for (int i = 0; i < STAGES; ++i) {
            mbar_init(full0 + 8 * i, 1);
            mbar_init(empty0 + 8 * i, CONSUMERS / 32);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __device__ void advance() {
        prev = stage;
        if (++stage == STAGES) { stage = 0; phase ^= 1; }
    }
    // the producer: wait until the stage is free, announce its bytes; returns its full barrier
    __device__ unsigned acquire(unsigned bytes) const {
        mbar_wait(empty0 + 8 * stage, phase ^ 1);
        mbar_expect_tx(full0 + 8 * stage, bytes);
        return full0 + 8 * stage;
    }
    // the consumers: the stage's KSTEPS MMAs, 16 of reduction each (descriptors da, db advanced by `step_a`,
    // `step_b` units per step: 2 for K-major operands, 128 for MN-major ones) as one group, once its loads have
    // landed; then the stage before it goes back to the producer, its MMAs done
    template <int N, int KSTEPS = 4>
    __device__ void consume(float (&acc)[N], unsigned long long da, unsigned long long db, int step_a, int step_b,
                            int lane) {
        mbar_wait(full0 + 8 * stage, phase);
        wg_fence();
#pragma unroll
        for (int kq = 0; kq < KSTEPS; ++kq) wgmma_step(acc, da + step_a * kq, db + step_b * kq);
        wg_commit();
        wg_wait<1>();
        if (prev >= 0 && lane == 0) mbar_arrive(empty0 + 8 * prev);
        advance();
    }
    template <int N> __device__ void drain(float (&acc)[N], int lane) {  // after a tile's last stage
        wg_wait<0>();
        wg_fence_acc(acc);
        if (prev >= 0 && lane == 0) mbar_arrive(empty0 + 8 * prev);
        prev = -1;
    }
};

// the descriptor of an MN-major operand of 64-wide column blocks BLOCK_BYTES apart (the leading-dimension byte
// offset; 8 KiB: 64 rows of reduction, 128 bytes each), 8 rows of reduction 1024 bytes apart, 128-byte swizzle
template <int BLOCK_BYTES = 8192>
__device__ __forceinline__ unsigned long long wg_desc_mn(const void* p) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    return (unsigned long long)((a & 0x3FFFF) >> 4) | ((unsigned long long)(BLOCK_BYTES >> 4) << 16) | (64ull << 32) |
           (1ull << 62);
}

#if !CT_WGRAD
constexpr int BM = CT_BM, BK = 64;  // BK: 64 elements = 128 bytes
static_assert(BM == 128 || BM == 192 || BM == 256, "tiles of 128, 192 or 256 output pixels");
#ifndef CT_OUT_BOXES  // CT_TMA_OUT's boxes of 64 channels in shared memory at once: all BN / 64, or 1 (the tile goes
#define CT_OUT_BOXES (CT_BN / 64)  // out box by box through one box's room, which leaves the ring a stage more)
#endif
constexpr int OUT_BOXES = CT_OUT_BOXES;
static_assert(OUT_BOXES == BN / 64 || (OUT_BOXES == 1 && CT_NHWC_OUT && CT_TMA_OUT == 1), "one box at a time: NHWC");
constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, STAGE_BYTES = A_BYTES + B_BYTES;
// an epilogue tile: NCHW out, T[BN][LDE] (a row of 16-byte-aligned pixel runs per channel); NHWC out,
// T[BM][LDE] (a row of 16-byte-aligned channel runs per pixel); the 8 of padding keeps the MMA fragments' writes
// off each other's banks
#if CT_NHWC_OUT  // (one box's room: BM x 64)
constexpr int LDE = BN + 8, EPI_ELEMS = OUT_BOXES < BN / 64 ? BM * 64 : BM * LDE;
#else
constexpr int LDE = BM + 8, EPI_ELEMS = BN * LDE;
#endif
constexpr int HEAD = 20;  // prm's shared entries (then PER_CLASS per class, then the schedule)

// V 16-bit elements as one store
template <int V> struct Run;
template <> struct Run<8> { typedef uint4 t; };
template <> struct Run<4> { typedef uint2 t; };
template <> struct Run<2> { typedef unsigned t; };
template <> struct Run<1> { typedef unsigned short t; };

// A tile's NCHW stores (subs = 1): runs of V pixels of one channel, in one image (the host's V divides OHW)
template <int V>
__device__ __forceinline__ void store_nchw(T* __restrict__ out, const T* epi, int m0, int n0, int M, int N, int OHW,
                                           int ct_id) {
    typedef typename Run<V>::t R;
    for (int i = ct_id; i < BN * (BM / V); i += CONSUMERS) {
        const int nl = i / (BM / V), ml = (i % (BM / V)) * V, m = m0 + ml, n = n0 + nl;
        if (m >= M || n >= N) continue;
        const int img = m / OHW, pq = m - img * OHW;
        *reinterpret_cast<R*>(out + ((long long)img * N + n) * OHW + pq) = *reinterpret_cast<const R*>(epi + nl * LDE + ml);
    }
}

// The stride-2 backward-data's (subs = 2): runs of V pixels of each column class of one class row (the host's V
// divides the class map's OW), interleaved into 2V pixels of one output row
template <int V>
__device__ __forceinline__ void store_nchw_pairs(T* __restrict__ out, const T* epi, int m0, int n0, int M, int N,
                                                 int OHW, int OW, int y0, int ct_id) {
    for (int i = ct_id; i < BN * (BM / V); i += CONSUMERS) {
        const int nl = i / (BM / V), ml = (i % (BM / V)) * V, m = m0 + ml, n = n0 + nl;
        if (m >= M || n >= N) continue;
        const int img = m / OHW, pq = m - img * OHW, p = pq / OW, q = pq - p * OW;
        union { typename Run<2 * V>::t run; T e[2 * V]; } v;
#pragma unroll
        for (int j = 0; j < V; ++j) {
            v.e[2 * j] = epi[nl * LDE + ml + j];
            v.e[2 * j + 1] = epi[BN * LDE + nl * LDE + ml + j];
        }
        *reinterpret_cast<typename Run<2 * V>::t*>(out + (((long long)img * N + n) * 2 * OHW + (y0 + 2 * p) * OW) * 2 +
                                                   2 * q) = v.run;
    }
}

// A tile's accumulators as T into shared memory, bias and ReLU applied in fp32, by stmatrix four 8 x 8 matrices at a
// time: (column block j, rows + 0), (j, + 8), (j + 1, + 0), (j + 1, + 8). `row0` is the warp's first of the
// accumulators' rows (mma.sync's C layout per 16 rows: row0 + lane / 4, + 8; columns 2 * (lane % 4), + 1 of each
// 8); `at(m, n)` the shared address of the 16 bytes of pixel m's channels n.. n + 7 (NHWC) or of channel n's
// pixels m.. m + 7 (NCHW).
template <int NA, typename At, int J0 = 0, int J1 = BN / 8>  // column blocks [J0, J1) of the tile
__device__ __forceinline__ void tile_to_smem(const float (&acc)[NA], int row0, int lane, int n0, int N,
                                             const T* __restrict__ bias, int flags, At at) {
    const int tig = lane & 3, mi = lane >> 3, l8 = lane & 7;  // this lane addresses matrix mi's row (column) l8
    const int mr = row0 + (mi & 1) * 8;  // matrix mi's first row
#pragma unroll
    for (int j = J0; j < J1; j += 2) {
        unsigned r[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int jj = j + i / 2, h = i & 1, nc = jj * 8 + tig * 2;
            r[i] = pack2<T>(bias_relu(acc[jj * 4 + h * 2], n0 + nc, N, bias, flags),
                            bias_relu(acc[jj * 4 + h * 2 + 1], n0 + nc + 1, N, bias, flags));
        }
        const int nc = (j + mi / 2) * 8;  // matrix mi's first column
#if CT_NHWC_OUT  // a row per pixel
        stmatrix_x4<false>(at(mr + l8, nc), r);
#else  // a row per channel: the matrices transposed
        stmatrix_x4<true>(at(mr, nc + l8), r);
#endif
    }
}

// CT_TMA_OUT: a tile's boxes for the TMA unit, 128-byte swizzled rows of 64 elements: NHWC, BN / 64 boxes of
// BM pixels x 64 channels (or boxes [B0, B0 + OUT_BOXES) of them); NCHW, BM / 64 boxes of BN channels x 64 pixels
template <int B0 = 0, int NA>
__device__ __forceinline__ void tile_to_boxes(unsigned char* boxes, const float (&acc)[NA], int row0, int lane,
                                              int n0, int N, const T* __restrict__ bias, int flags) {
    const auto at = [boxes](int m, int n) {
#if CT_NHWC_OUT
        return smem_addr(boxes + (n / 64 - B0) * (BM * 128) + swizzle128(m * 128 + (n % 64) * 2));
#else
        return smem_addr(boxes + (m / 64) * (BN * 128) + swizzle128(n * 128 + (m % 64) * 2));
#endif
    };
    tile_to_smem<NA, decltype(at), B0 * 8, (B0 + OUT_BOXES) * 8>(acc, row0, lane, n0, N, bias, flags, at);
    fence_async_smem();
}

// CT_TMA_OUT: the tile at pixel m0, channel n0 out of its boxes (one thread): NHWC, into the (M, N) matrix of
// pixels x channels (CT_TMA_OUT 2: class c's pixels among the others', a box of whole rows of its (OH, OW) map);
// NCHW, into the (images, N, OHW) array, where a box of 64 pixels lies in one image (the host's OHW is a
// multiple of 64). The unit leaves out what lies past the tensor's ends (the last tile's rows
// past M, a partial column tile's columns past N); a box wholly past them is not stored.
__device__ __forceinline__ void store_boxes(const TmaDesc* map, const unsigned char* boxes, int m0, int n0, int M,
                                            int N, int OHW, int OW, const Class& c) {
#if CT_NHWC_OUT
    for (int b = 0; b < BN / 64 && n0 + 64 * b < N; ++b)
#if CT_TMA_OUT == 2  // whole rows of class c's map: (channels, x0, q, y0, class row n * OH + p)
        tma_store_5d(map, smem_addr(boxes + b * BM * 128), n0 + 64 * b, c.x0, 0, c.y0, m0 / OW);
#else
        tma_store_2d(map, smem_addr(boxes + b * BM * 128), n0 + 64 * b, m0);
#endif
#else
    for (int h = 0; h < BM / 64 && m0 + 64 * h < M; ++h) {
        const int m = m0 + 64 * h, img = m / OHW;
        tma_store_3d(map, smem_addr(boxes + h * BN * 128), m - img * OHW, n0, img);
    }
#endif
    bulk_commit();
}

// a unit's class row and its tile's first pixel m0 and first channel n0 (units row-major, then pixel-major)
__device__ __forceinline__ void unit_tile(int unit, int per_row, int n_tiles, int pix, int& row, int& m0, int& n0) {
    row = unit / per_row;
    const int rem = unit - row * per_row, mt = rem / n_tiles;
    m0 = mt * pix, n0 = (rem - mt * n_tiles) * BN;
}

// prm: M (a class's output pixels), N, OHW, OW (a class's map), c_tiles (Cp/64), n_tiles, per_row (units of one
// class row), units, sy, ry, rx, S (the filter's), tap_step, subs, sx, lx, ly (the window's corner), vec (the
// NCHW stores' run of pixels), pix (a tile's pixels: BM, or for CT_TMA_OUT 2 its whole rows of a class's map),
// the schedule's place in prm (0: none), then PER_CLASS entries per class (Class), then the units' Schedule.
// A unit is a tile of pix pixels x BN channels of `subs` classes: one (subs = 1: the forward, the stride-1
// backward-data), or the two column classes of a class row (subs = 2: the backward-data of stride 2, whose
// pixels interleave in the output's rows; each class's tile is summed in turn and kept in shared memory, and
// the two are written together). out: NCHW (or, CT_NHWC_OUT, NHWC) of subs * (OH, OW); map_out its tensor map
// for CT_TMA_OUT (store_boxes), else unused. flags: 1 ReLU, 2 bias (conv.cu's Epilogue values; no mask here).
extern "C" __global__ void __launch_bounds__(NT, 1)
conv_tma(const __grid_constant__ TmaDesc map_a, const __grid_constant__ TmaDesc map_b,
         const __grid_constant__ TmaDesc map_out, T* __restrict__ out, const T* __restrict__ bias,
         const int* __restrict__ prm, int flags) {
    const int M = prm[0], N = prm[1], OHW = prm[2], OW = prm[3], c_tiles = prm[4], n_tiles = prm[5],
              per_row = prm[6], units = prm[7], sy = prm[8], ry = prm[9], rx = prm[10], S_all = prm[11],
              tap_step = prm[12], subs = prm[13], sx = prm[14], lx = prm[15], ly = prm[16], vec = prm[17],
              pix = prm[18];
#if CT_SCHEDULE
    const Schedule sched(prm + prm[19]);
#endif
    extern __shared__ __align__(128) unsigned char smem_raw[];
    // the ring's tiles start on 1024 bytes (the 128-byte swizzle is a function of the address bits)
    unsigned char* ring = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
    T* epi = reinterpret_cast<T*>(ring + STAGES * STAGE_BYTES);  // subs tiles
    Ring pipe(epi + subs * EPI_ELEMS);
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    if (tid == 0) pipe.init();
    __syncthreads();

    if (warp < 4) {  // ---------------------------------------------------------------- producer
        if (warp != 0 || lane != 0) return;
#if CT_SCHEDULE
        for (int i = sched.begin; i < sched.end; ++i) { const int unit = sched.list[i];
#else
        for (int unit = blockIdx.x; unit < units; unit += gridDim.x) {
#endif
            int row, m0, n0;
            unit_tile(unit, per_row, n_tiles, pix, row, m0, n0);
            const int img = m0 / OHW, pq = m0 - img * OHW, p0 = pq / OW, q0 = pq - p0 * OW;
            for (int sub = 0; sub < subs; ++sub) {
                const Class c(prm + HEAD + PER_CLASS * (row * subs + sub));
                // the stages tap by tap, channel tile by tile: nested loops, no division a stage (the one thread's
                // dependent instructions between two loads delay the ring's refills)
                for (int r = 0; r < c.R; ++r)
                    for (int s = 0; s < c.S; ++s) {
                        const int off_w = c.ox + s * rx - lx, off_h = c.oy + r * ry - ly,
                                  b_tap = (c.r0 + r * tap_step) * S_all + c.s0 + s * tap_step;
                        for (int ct = 0; ct < c_tiles; ++ct) {
                            const unsigned full = pipe.acquire(STAGE_BYTES - (BM - pix) * BK * 2),
                                           dst = smem_addr(ring + pipe.stage * STAGE_BYTES);
                            tma_load_im2col(dst, &map_a, full, ct * BK, lx + q0 * sx, ly + p0 * sy, img, off_w, off_h);
#if CT_B_KRSC  // BN / 64 boxes of 64 output channels x 64 of reduction (rows), the weight's (C, R*S, K) map
#pragma unroll
                            for (int j = 0; j < BN / 64; ++j)
                                tma_load_3d(dst + A_BYTES + j * 64 * 128, &map_b, full, n0 + 64 * j, b_tap, ct * BK);
#else
                            tma_load_2d(dst + A_BYTES, &map_b, full, (b_tap * c_tiles + ct) * BK, n0);
#endif
                            pipe.advance();
                        }
                    }
            }
        }
        return;
    }

    // -------------------------------------------------------------------- consumers
    const int wg = warp / 4 - 1, ct_id = tid - 128;  // the warpgroup among the MMAs' (from 0); the thread's index
    float acc[BN / 2];
#if CT_SCHEDULE
    for (int i = sched.begin; i < sched.end; ++i) { const int unit = sched.list[i];
#else
    for (int unit = blockIdx.x; unit < units; unit += gridDim.x) {
#endif
        int row, m0, n0;
        unit_tile(unit, per_row, n_tiles, pix, row, m0, n0);
        for (int sub = 0; sub < subs; ++sub) {
            const Class c(prm + HEAD + PER_CLASS * (row * subs + sub));
#pragma unroll
            for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
            for (int kt = 0; kt < c.R * c.S * c_tiles; ++kt) {
                const unsigned char* st = ring + pipe.stage * STAGE_BYTES;
                pipe.consume(acc, wg_desc(st + wg * (A_BYTES / MMA_WGS)),
                             CT_B_KRSC ? wg_desc_mn(st + A_BYTES) : wg_desc(st + A_BYTES), 2, CT_B_KRSC ? 128 : 2,
                             lane);
            }
            pipe.drain(acc, lane);  // a class without live taps (a 1x1 filter's) is zeros

#if CT_TMA_OUT && CT_OUT_BOXES < CT_BN / 64  // one class per unit, its boxes out one by one through the one's room
#pragma unroll
            for (int b = 0; b < BN / 64; ++b) {
                if (ct_id == 0) bulk_wait_read();  // the TMA unit has read the last box out of the room
                consumers_sync();
                if (b == 0) tile_to_boxes<0>(reinterpret_cast<unsigned char*>(epi), acc, wg * 64 + (warp % 4) * 16,
                                             lane, n0, N, bias, flags);
                else tile_to_boxes<1>(reinterpret_cast<unsigned char*>(epi), acc, wg * 64 + (warp % 4) * 16, lane,
                                      n0, N, bias, flags);
                consumers_sync();
                if (ct_id == 0 && n0 + 64 * b < N) {
                    tma_store_2d(&map_out, smem_addr(epi), n0 + 64 * b, m0);
                    bulk_commit();
                }
            }
#elif CT_TMA_OUT  // one class per unit
            if (ct_id == 0) bulk_wait_read();  // the TMA unit has read the last tile out of the boxes
            consumers_sync();
            tile_to_boxes(reinterpret_cast<unsigned char*>(epi), acc, wg * 64 + (warp % 4) * 16, lane, n0, N,
                          bias, flags);
#else
            // fp32 -> bias, ReLU -> T into the sub's tile (after the last unit's readers are done)
            if (sub == 0) consumers_sync();
            T* e = epi + sub * EPI_ELEMS;
            tile_to_smem(acc, wg * 64 + (warp % 4) * 16, lane, n0, N, bias, flags,
                         [e](int m, int n) { return smem_addr(CT_NHWC_OUT ? e + m * LDE + n : e + n * LDE + m); });
#endif
        }
#if CT_TMA_OUT && CT_OUT_BOXES < CT_BN / 64
#elif CT_TMA_OUT
        consumers_sync();
        if (ct_id == 0)
            store_boxes(&map_out, reinterpret_cast<unsigned char*>(epi), m0, n0, M, N, OHW, OW,
                        Class(prm + HEAD + PER_CLASS * row));
#else
        consumers_sync();
        const int y0 = Class(prm + HEAD + PER_CLASS * row * subs).y0;
#if CT_NHWC_OUT
        // runs of 8 channels of one pixel (the host requires N % 8 == 0); output pixel m of a class row is pixel
        // (y0 + subs * p, subs * q + sub) of its image: (p, q) itself for subs = 1
        const int OH = OHW / OW;
        for (int i = ct_id; i < subs * BM * (BN / 8); i += CONSUMERS) {
            const int sub = i / (BM * (BN / 8)), ml = (i / (BN / 8)) % BM, nl = (i % (BN / 8)) * 8;
            const int m = m0 + ml, n = n0 + nl;
            if (m >= M || n >= N) continue;
            const int img = m / OHW, pq = m - img * OHW, p = pq / OW, q = pq - p * OW;
            const long long pixel = ((long long)img * subs * OH + y0 + subs * p) * (subs * OW) + subs * q + sub;
            *reinterpret_cast<uint4*>(out + pixel * N + n) =
                *reinterpret_cast<const uint4*>(epi + sub * EPI_ELEMS + ml * LDE + nl);
        }
#else
        if (subs == 1) {
            if (vec == 8) store_nchw<8>(out, epi, m0, n0, M, N, OHW, ct_id);
            else if (vec == 4) store_nchw<4>(out, epi, m0, n0, M, N, OHW, ct_id);
            else if (vec == 2) store_nchw<2>(out, epi, m0, n0, M, N, OHW, ct_id);
            else store_nchw<1>(out, epi, m0, n0, M, N, OHW, ct_id);
        } else {
            if (vec == 4) store_nchw_pairs<4>(out, epi, m0, n0, M, N, OHW, OW, y0, ct_id);
            else if (vec == 2) store_nchw_pairs<2>(out, epi, m0, n0, M, N, OHW, OW, y0, ct_id);
            else store_nchw_pairs<1>(out, epi, m0, n0, M, N, OHW, OW, y0, ct_id);
        }
#endif
#endif  // CT_TMA_OUT
    }
#if CT_TMA_OUT
    if (ct_id == 0) bulk_wait();  // the last tile's stores written before the block's shared memory goes
#endif
}
#else
#ifndef CT_WPIX  // output pixels per reduction stage (the host's WGRAD_PIXELS)
#define CT_WPIX 128
#endif
constexpr int WBM = CT_BM, WPIX = CT_WPIX, BOX_BYTES = WPIX * 128, W_A_BYTES = (WBM / 64) * BOX_BYTES,
              W_STAGE_BYTES = W_A_BYTES + 2 * BOX_BYTES;
static_assert(WBM == 64 || WBM == 128, "64 or 128 output channels per tile");
static_assert(WPIX == 64 || WPIX == 128, "64 or 128 pixels per stage");

// prm: K, ncol (R*S*Cp), OHW, OW, chunks (reduction tiles of WPIX pixels), per (chunks per split), Cp, S, sy, oy,
// ry, ox, rx, m_tiles, n_tiles, units, sx, whole, fixup, whole_splits, whole_per, stride. Units: the first `whole`
// tiles in `whole_splits` splits of `whole_per` chunks each (tile-major; unsplit where whole_splits is 1, each then
// into split 0's partials), then the other tiles' splits of `per` chunks (split-major); without whole tiles, tiles
// x splits units (more tiles than SMs would leave a last wave partly idle; the whole tiles fill waves, and the
// rest, split, one more; where the tiles' splits leave two rounds, part idle, the whole tiles, split a few ways,
// fill waves instead). ws: fp32 partials (K, ncol) of the split tiles, split z's at ws + z * stride (conv_tma.py's
// wgrad_partials: past split 0 no split holds the rows of tiles all whole and unsplit, so each overlaps the one
// before it there); dw: the filter gradient, (K, ncol) (KRSC), of the unsplit whole tiles (all tiles where there
// is one split); flags & WGRAD_PARTIALS: every unit writes partials instead, an unsplit whole tile as split 0's
// (the host sums them: wgrad_reduce's splits_at).
// The window of X's map starts at (ox, oy): the taps' offsets from it, (s*rx, r*ry), are >= 0.
// prm[18] (fixup), where every split unit runs in the grid's last round of units (each block takes at most one,
// after its whole tiles): the split tiles' units sum their partials into dW themselves, unless flags asks for
// partials. A unit writes its partials, counts itself in at its tile's counter (`counters`, this stream's, one
// per split tile, never reset: each launch adds `splits` to each), waits there for its tile's other units (the
// launch is cooperative: every block is resident, and reaches its split unit once its whole tiles are done), and
// sums its share of the tile's rows over the splits in order (wgrad_reduce's order: the same dW). That saves
// wgrad_reduce's launch and the step between the two kernels.
constexpr int WGRAD_PARTIALS = 1;

__device__ __forceinline__ unsigned long long load_acquire(const unsigned long long* p) {
    unsigned long long v;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];\n" : "=l"(v) : "l"(p) : "memory");
    return v;
}

// this unit's share of a split tile's rows (k0.., columns col0..; the partials ws, `stride` floats apart,
// written): their sums over the splits, in split order, into dW (K, ncol) KRSC; the consumer threads `ct`
// of CONSUMERS, 4 columns each. (Measured slower: more vectors' reads in flight at once, 8 or 16 a thread; they
// took the kernel from 116 registers to 156, or to 168 and spills in its main loop.)
template <typename TT>
__device__ void wgrad_fixup(const float* __restrict__ ws, TT* __restrict__ dw, long long stride, int splits, int split,
                            int k0, int col0, int K, int ncol, int ct) {
    const int r0 = split * WBM / splits, r1 = (split + 1) * WBM / splits;
    for (int e = ct; e < (r1 - r0) * 32; e += CONSUMERS) {
        const int k = k0 + r0 + e / 32, col = col0 + (e % 32) * 4;
        if (k >= K || col >= ncol) continue;  // (ncol is a multiple of 64: col < ncol takes all four)
        const float* p = ws + (long long)k * ncol + col;
        float4 sum = __ldcg(reinterpret_cast<const float4*>(p));
        for (int z = 1; z < splits; ++z) {
            const float4 v = __ldcg(reinterpret_cast<const float4*>(p + z * stride));
            sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
        }
        union { uint2 u; TT e[4]; } out;
        out.e[0] = from_f<TT>(sum.x), out.e[1] = from_f<TT>(sum.y), out.e[2] = from_f<TT>(sum.z);
        out.e[3] = from_f<TT>(sum.w);
        *reinterpret_cast<uint2*>(dw + (long long)k * ncol + col) = out.u;
    }
}

// a unit's work: its split (of the partials), tile (rows k0.., columns col0..) and chunks [c_begin, c_end)
struct Work {
    int whole, split_tiles, n_tiles, chunks, per, whole_splits, whole_per;
    __device__ void of(int unit, int& split, int& k0, int& col0, int& c_begin, int& c_end, int& tile) const {
        if (unit < whole * whole_splits) {
            tile = unit / whole_splits, split = unit - tile * whole_splits;
            c_begin = split * whole_per, c_end = min(chunks, c_begin + whole_per);
        } else {
            const int u = unit - whole * whole_splits;
            split = u / split_tiles;
            tile = whole + (u - split * split_tiles);
            c_begin = split * per, c_end = min(chunks, c_begin + per);
        }
        const int mt = tile / n_tiles;
        k0 = mt * WBM, col0 = (tile - mt * n_tiles) * 128;
    }
};

extern "C" __global__ void __launch_bounds__(NT, 1)
conv_tma_wgrad(const __grid_constant__ TmaDesc map_dy, const __grid_constant__ TmaDesc map_x, float* __restrict__ ws,
               T* __restrict__ dw, const int* __restrict__ prm, int flags, unsigned long long* __restrict__ counters) {
    const int K = prm[0], ncol = prm[1], OHW = prm[2], OW = prm[3], chunks = prm[4], per = prm[5], Cp = prm[6],
              S = prm[7], sy = prm[8], oy = prm[9], ry = prm[10], ox = prm[11], rx = prm[12], m_tiles = prm[13],
              n_tiles = prm[14], units = prm[15], sx = prm[16], whole = prm[17], whole_splits = prm[19],
              whole_per = prm[20], whole_units = whole * whole_splits;
    const long long stride = prm[21];
    const bool fixup = prm[18] && !(flags & WGRAD_PARTIALS);
    extern __shared__ __align__(128) unsigned char smem_raw[];
    unsigned char* ring = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
    Ring pipe(ring + STAGES * W_STAGE_BYTES);
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    if (tid == 0) pipe.init();
    __syncthreads();
    const int tiles = m_tiles * n_tiles, split_tiles = tiles - whole;
    const int splits = whole == tiles ? 1 : (units - whole_units) / split_tiles;
    const Work work{whole, split_tiles, n_tiles, chunks, per, whole_splits, whole_per};

    if (warp < 4) {  // ---------------------------------------------------------------- producer
        if (warp != 0 || lane != 0) return;
        // Per chunk, only additions: the taps' offsets are a unit's, and the chunk's first pixel (img, p0, q0)
        // steps by WPIX (one thread issues every load, and each division in its loop, a chain of dependent
        // instructions, delays the ring's refills: the MMAs waited for them)
        const int P = OHW / OW, step_img = WPIX / OHW, step_p = WPIX % OHW / OW, step_q = WPIX % OHW % OW;
        for (int unit = blockIdx.x; unit < units; unit += gridDim.x) {
            int split, k0, col0, c_begin, c_end, tile;
            work.of(unit, split, k0, col0, c_begin, c_end, tile);
            int c0[2], off_w[2], off_h[2];  // each column block's channels and tap (a block past ncol loads some
                                            // tap's pixels: never written)
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const int col = col0 + 64 * j, tap = col / Cp, r = tap / S;
                c0[j] = col - tap * Cp, off_w[j] = (tap - r * S) * rx, off_h[j] = r * ry;
            }
            int pix = c_begin * WPIX, img = pix / OHW, p0 = (pix - img * OHW) / OW, q0 = pix - img * OHW - p0 * OW;
            for (int ch = c_begin; ch < c_end; ++ch) {
                const unsigned full = pipe.acquire(W_STAGE_BYTES), dst = smem_addr(ring + pipe.stage * W_STAGE_BYTES);
#pragma unroll
                for (int i = 0; i < WBM / 64; ++i) tma_load_2d(dst + i * BOX_BYTES, &map_dy, full, k0 + 64 * i, pix);
#pragma unroll
                for (int j = 0; j < 2; ++j)
                    tma_load_im2col(dst + W_A_BYTES + j * BOX_BYTES, &map_x, full, c0[j], ox + q0 * sx, oy + p0 * sy,
                                    img, off_w[j], off_h[j]);
                pipe.advance();
                pix += WPIX, img += step_img, p0 += step_p, q0 += step_q;
                if (q0 >= OW) q0 -= OW, ++p0;
                if (p0 >= P) p0 -= P, ++img;
            }
        }
        return;
    }

    // -------------------------------------------------------------------- consumers
    const int wg = warp / 4 - 1, g = lane >> 2, tig = lane & 3;
    const int row_base = WBM == 128 ? wg * 64 : 0, col_base = WBM == 128 ? 0 : wg * 64;
    float acc[WG_N / 2];
    for (int unit = blockIdx.x; unit < units; unit += gridDim.x) {
        int split, k0, col0, c_begin, c_end, tile;
        work.of(unit, split, k0, col0, c_begin, c_end, tile);
#pragma unroll
        for (int i = 0; i < WG_N / 2; ++i) acc[i] = 0.0f;
        for (int ch = c_begin; ch < c_end; ++ch) {  // pixel-major operands: 16 pixels are 2 KiB = 128 units
            const unsigned char* st = ring + pipe.stage * W_STAGE_BYTES;
            pipe.consume<WG_N / 2, WPIX / 16>(acc, wg_desc_mn<BOX_BYTES>(st + (row_base / 64) * BOX_BYTES),
                                              wg_desc_mn<BOX_BYTES>(st + W_A_BYTES + (col_base / 64) * BOX_BYTES),
                                              128, 128, lane);
        }
        pipe.drain(acc, lane);
        // this thread's accumulators: rows k0 + row_base + (warp % 4) * 16 + g (+ 8), two columns per 8; one
        // split's partials, or (unsplit) dW itself, (K, ncol) KRSC: two columns as one 4-byte store
        // (an unsplit whole tile, or every tile of one split, is dW itself unless all units are to write partials)
        const bool partials = (flags & WGRAD_PARTIALS) || (unit >= whole_units ? splits > 1 : whole_splits > 1);
        float* part = ws + split * stride;
#pragma unroll
        for (int j = 0; j < WG_N / 8; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int k = k0 + row_base + (warp % 4) * 16 + g + h * 8, col = col0 + col_base + j * 8 + tig * 2;
                if (k >= K || col >= ncol) continue;
                const float a = acc[j * 4 + h * 2], b = acc[j * 4 + h * 2 + 1];
                if (partials) {
                    *reinterpret_cast<float2*>(part + (long long)k * ncol + col) = make_float2(a, b);
                } else {
                    union { unsigned u; T e[2]; } pair;
                    pair.e[0] = from_f<T>(a);
                    pair.e[1] = from_f<T>(b);
                    *reinterpret_cast<unsigned*>(dw + (long long)k * ncol + col) = pair.u;
                }
            }
        if (fixup && unit >= whole_units && splits > 1) {
            __threadfence();  // this thread's partials visible to the GPU before the count below
            consumers_sync();
            if (tid == 128) {
                unsigned long long* count = counters + (tile - whole);
                const unsigned long long target = (atomicAdd(count, 1ull) / splits + 1) * splits;
                while (load_acquire(count) < target) __nanosleep(64);
            }
            consumers_sync();
            wgrad_fixup<T>(ws, dw, stride, splits, split, k0, col0, K, ncol, tid - 128);
        }
    }
}
#endif
