// Conv2d as implicit GEMM: one kernel body, three directions (CONV_MODE).
// The host's names for the mode numbers are conv_plan.py's IntEnums: ConvMode (CONV_MODE), Mma (CONV_MMA)
// and Epilogue (the flags argument); keep the values of both in step.
//
//   mode 0  forward          Y[m=(n,p,q), k]      = sum_{(r,s,c)}  X_nhwc[n, p*sh-ph+r*dh, q*sw-pw+s*dw, c] * W_krsc[k, r, s, c]
//   mode 1  backward-data    dX[m=(n,h,w), c]     = sum_{(r,s,k)} dY_nhwk[n, (h+ph-r*dh)/sh, (w+pw-s*dw)/sw, k] * W_crsk[c, r, s, k]
//                            (a tap contributes only where the division is exact and in range)
//   mode 2  backward-filter  dW[k, (r,s,c)]       = sum_{(n,p,q)} dY_nhwk[(n,p,q), k] * X_nhwc[n, p*sh-ph+r*dh, q*sw-pw+s*dw, c]
//                            split-K over blockIdx.z: each split writes its own fp32 partial tile,
//                            conv_util.cu's wgrad_reduce sums the splits in a fixed order.
//   mode 3  forward, straight from NCHW x and KCRS w (no repacking, one launch):
//                            Y[m=(n,p,q), k]      = sum_{(c,r,s)} X[n, c, p*sh-ph+r*dh, q*sw-pw+s*dw] * W[k, (c,r,s)]
//                            the reduction runs in KCRS order, so W's rows are B's rows as they are (cp.async;
//                            the host picks this mode only when C*R*S is a multiple of 16 bytes). A is gathered
//                            element by element (one output pixel per thread, consecutive threads on consecutive
//                            pixels: coalesced) through registers into a k-major tile, one tile ahead of the
//                            MMAs, with the per-k offsets and taps from a table the host builds once per
//                            configuration, and each pixel's in-image taps as a bit mask (R*S <= 63).
//
// The gathered operands are NHWC with channels padded to a multiple of 16 bytes, so every
// 16-byte chunk of a tile row is contiguous and aligned: tiles stream into shared memory with
// cp.async (zero-fill for padding, out-of-range taps and tails), STAGES deep. Nothing of the
// lowered matrix ever exists in device memory. Row index math (m -> n, p, q) uses
// multiply-and-shift by launch-time magic numbers; the reduction index advances incrementally.
// Compute: CONV_MMA=1 mma.sync m16n8k16 fp16/bf16 -> fp32 (ldmatrix from shared memory);
// 2 mma.sync m16n8k8 TF32 (float inputs, operands rounded with cvt.rna);
// 0 FFMA in fp32; 3 (sm_90a, 128-byte tile rows) Hopper's wgmma: each of the block's two warpgroups
// multiplies its 64 rows of A by B (all of it, or with 64-row tiles its half of B's columns) straight from
// shared memory in the 128-byte-swizzled layouts the matrix descriptors name, asynchronously, one k-tile's
// group still in flight while the next is issued. Modes 0/1: both operands K-major; fp16/bf16, or TF32
// from float (operands rounded by the host's packs, since wgmma reads shared memory as it is). Mode 2:
// both MN-major (dY's channels and x's channels are the contiguous dimension; fp16/bf16 only, TF32 has
// no transposed form). Epilogue through shared memory: modes 0/1 write NCHW directly (coalesced along
// the spatial index) with bias, ReLU and a bit-packed ReLU mask (warp ballot, one word per warp,
// no atomics); mode 2 writes the fp32 partial.
//
// nvrtc-check: -DCONV_T=__half -DCONV_MODE=0 -DCONV_BM=128 -DCONV_BN=128 -DCONV_MMA=1
// nvrtc-check: -DCONV_IS_BF16=1 -DCONV_T=__nv_bfloat16 -DCONV_MODE=1 -DCONV_BM=128 -DCONV_BN=64 -DCONV_MMA=1
// nvrtc-check: -DCONV_T=__half -DCONV_MODE=2 -DCONV_BM=64 -DCONV_BN=128 -DCONV_MMA=1
// nvrtc-check: -DCONV_T=float -DCONV_MODE=0 -DCONV_BM=128 -DCONV_BN=64 -DCONV_MMA=0
// nvrtc-check: -DCONV_T=float -DCONV_MODE=2 -DCONV_BM=128 -DCONV_BN=128 -DCONV_MMA=0
// nvrtc-check: -DCONV_T=float -DCONV_MODE=2 -DCONV_BM=64 -DCONV_BN=128 -DCONV_MMA=0
// nvrtc-check: -DCONV_T=float -DCONV_MODE=0 -DCONV_BM=128 -DCONV_BN=128 -DCONV_MMA=0 -DCONV_BKB=128
// nvrtc-check: -DCONV_T=float -DCONV_MODE=1 -DCONV_BM=128 -DCONV_BN=128 -DCONV_MMA=2
// nvrtc-check: -DCONV_T=__half -DCONV_MODE=0 -DCONV_BM=128 -DCONV_BN=128 -DCONV_MMA=1 -DCONV_BKB=128
// nvrtc-check: -DCONV_T=float -DCONV_MODE=0 -DCONV_BM=128 -DCONV_BN=64 -DCONV_MMA=2 -DCONV_BKB=128
// nvrtc-check: -DCONV_T=__half -DCONV_MODE=2 -DCONV_BM=128 -DCONV_BN=128 -DCONV_MMA=1 -DCONV_BKB=128
// nvrtc-check: -DCONV_T=float -DCONV_MODE=2 -DCONV_BM=64 -DCONV_BN=128 -DCONV_MMA=2
// nvrtc-check: -DCONV_T=__half -DCONV_MODE=3 -DCONV_BM=128 -DCONV_BN=64 -DCONV_MMA=1
// nvrtc-check: -DCONV_IS_BF16=1 -DCONV_T=__nv_bfloat16 -DCONV_MODE=3 -DCONV_BM=128 -DCONV_BN=128 -DCONV_MMA=1
// nvrtc-check: -DCONV_T=__half -DCONV_MODE=0 -DCONV_BM=128 -DCONV_BN=128 -DCONV_MMA=1 -DCONV_BKB=128 -DCONV_WARPS_N=2
// nvrtc-check: -DCONV_T=__half -DCONV_MODE=1 -DCONV_BM=64 -DCONV_BN=128 -DCONV_MMA=1 -DCONV_WARPS_N=2
// nvrtc-check: -DCONV_T=__half -DCONV_MODE=2 -DCONV_BM=64 -DCONV_BN=128 -DCONV_MMA=1 -DCONV_WARPS_N=2
// nvrtc-check: -DCONV_T=float -DCONV_MODE=0 -DCONV_BM=128 -DCONV_BN=64 -DCONV_MMA=2 -DCONV_WARPS_N=2
// nvrtc-check: -DCONV_T=__half -DCONV_MODE=3 -DCONV_BM=128 -DCONV_BN=128 -DCONV_MMA=1 -DCONV_WARPS_N=2
// nvrtc-check: -DCONV_T=__half -DCONV_MODE=0 -DCONV_BM=128 -DCONV_BN=64 -DCONV_MMA=1 -DCONV_MIN_BLOCKS=4
// nvrtc-check: -DCONV_T=float -DCONV_MODE=1 -DCONV_BM=128 -DCONV_BN=32 -DCONV_MMA=2 -DCONV_BKB=128 -DCONV_WARPS_M=4 -DCONV_WARPS_N=2
// nvrtc-check: -DCONV_T=__half -DCONV_MODE=0 -DCONV_BM=128 -DCONV_BN=32 -DCONV_MMA=1 -DCONV_BKB=128 -DCONV_WARPS_M=4 -DCONV_WARPS_N=2
// nvrtc-check: -DCONV_T=float -DCONV_MODE=1 -DCONV_BM=128 -DCONV_BN=32 -DCONV_MMA=0 -DCONV_BKB=128
// nvrtc-check[sm_90a]: -DCONV_T=__half -DCONV_MODE=0 -DCONV_BM=128 -DCONV_BN=128 -DCONV_MMA=3 -DCONV_BKB=128
// nvrtc-check[sm_90a]: -DCONV_IS_BF16=1 -DCONV_T=__nv_bfloat16 -DCONV_MODE=1 -DCONV_BM=128 -DCONV_BN=64 -DCONV_MMA=3 -DCONV_BKB=128
// nvrtc-check[sm_90a]: -DCONV_T=float -DCONV_FLOAT=1 -DCONV_MODE=0 -DCONV_BM=128 -DCONV_BN=128 -DCONV_MMA=3 -DCONV_BKB=128 -DCONV_STAGES=3
// nvrtc-check[sm_90a]: -DCONV_T=float -DCONV_FLOAT=1 -DCONV_MODE=0 -DCONV_BM=128 -DCONV_BN=64 -DCONV_MMA=3 -DCONV_BKB=128
// nvrtc-check[sm_90a]: -DCONV_T=__half -DCONV_MODE=2 -DCONV_BM=128 -DCONV_BN=128 -DCONV_MMA=3 -DCONV_BKB=128
// nvrtc-check[sm_90a]: -DCONV_IS_BF16=1 -DCONV_T=__nv_bfloat16 -DCONV_MODE=2 -DCONV_BM=64 -DCONV_BN=128 -DCONV_MMA=3 -DCONV_BKB=128 -DCONV_STAGES=3
// nvrtc-check[sm_90a]: -DCONV_T=__half -DCONV_MODE=2 -DCONV_BM=64 -DCONV_BN=256 -DCONV_MMA=3 -DCONV_BKB=128
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef CONV_T
#define CONV_T __half
#endif
#ifndef CONV_MODE
#define CONV_MODE 0
#endif
#ifndef CONV_BM
#define CONV_BM 128
#endif
#ifndef CONV_BN
#define CONV_BN 128
#endif
#ifndef CONV_IS_BF16
#define CONV_IS_BF16 0
#endif
#ifndef CONV_FLOAT  // CONV_T is float (the wgmma path's TF32 instruction)
#define CONV_FLOAT 0
#endif
#ifndef CONV_BKB
#define CONV_BKB 64
#endif
#ifndef CONV_MMA
#define CONV_MMA 1
#endif
#ifndef CONV_WARPS_M  // warps along m and n: 2 x 4 (64 x 32 warp tiles at 128 x 128), or 2 x 2 (64 x 64)
#define CONV_WARPS_M 2
#endif
#ifndef CONV_WARPS_N
#define CONV_WARPS_N 4
#endif
#ifndef CONV_MIN_BLOCKS
// blocks per SM the registers must allow: two (<= 128 registers at 8 warps, <= 255 at 4); three for a
// 4-warp block of at most 128 x 64 (<= 168 registers: 32 x 64 or 64 x 32 warp tiles fit without spills)
// (four for the forward from NCHW on 128 x 64 tiles of 64-byte rows: 128 registers without spills, and
// 16 warps per SM to hide its gather: measured faster; bench/conv.py times it)
#define CONV_MIN_BLOCKS (CONV_MODE == 3 && CONV_WARPS_M * CONV_WARPS_N == 4 && CONV_BN == 64 && CONV_BKB == 64 ? 4 \
                         : CONV_WARPS_M * CONV_WARPS_N == 4 && CONV_BM * CONV_BN <= 8192 ? 3 : 2)
#endif

typedef CONV_T T;
constexpr int MODE = CONV_MODE;
// tile layouts in shared memory: A k-major (A[k][m]) in modes 2 and 3, B k-major (B[k][n]) in mode 2
#define CONV_A_KMAJOR (CONV_MODE >= 2)
#define CONV_B_KMAJOR (CONV_MODE == 2)
constexpr int WARPS_M = CONV_WARPS_M, WARPS_N = CONV_WARPS_N;
#ifndef CONV_STAGES  // shared-memory stages of the cp.async pipeline (modes 0-2)
#define CONV_STAGES (CONV_MMA == 3 ? 4 : 3)
#endif
constexpr int BM = CONV_BM, BN = CONV_BN, NT = 32 * WARPS_M * WARPS_N, STAGES = MODE == 3 ? 2 : CONV_STAGES;
constexpr bool WGMMA = CONV_MMA == 3;
constexpr int VEC = 16 / (int)sizeof(T);  // elements in one 16-byte chunk
constexpr int BK = CONV_BKB / (int)sizeof(T);  // reduction depth of one tile: CONV_BKB bytes per row
// shared-memory layouts (elements); rows padded by one chunk against bank conflicts, or (wgmma) not
// padded but swizzled: chunk j of row r at chunk position j ^ (r % 8), 1024-byte aligned tiles
// (mode 2 on wgmma: MN-major swizzle atoms, see mn_chunk_at)
constexpr int LDK = WGMMA ? BK : BK + VEC;  // m-major A[m][k], n-major B[n][k]
constexpr int LDA2 = WGMMA ? BM : BM + VEC, LDB2 = WGMMA ? BN : BN + VEC;  // k-major A[k][m], B[k][n]
constexpr int A_ELEMS = CONV_A_KMAJOR ? BK * LDA2 : BM * LDK;
constexpr int STAGE_ELEMS = A_ELEMS + (CONV_B_KMAJOR ? BK * LDB2 : BN * LDK);
constexpr int PRM_PER_CLASS = 39;  // launch-time constants per residue class (conv_plan.PARAMS_PER_CLASS)
constexpr int LDC = MODE != 2 ? BM + 4 : BN + 4;  // epilogue tile (fp32): col-major (0/1/3), row-major (2)

static_assert(NT % BM == 0 || MODE == 2, "epilogue maps one m per thread");
static_assert(BM % 64 == 0 && (BN % 64 == 0 || (BN == 32 && MODE < 2)),
              "tiles are multiples of 64 (32 columns: the forward and backward-data onto few channels)");
static_assert(!WGMMA || (sizeof(T) == 4) == (bool)CONV_FLOAT, "CONV_FLOAT=1 names a float CONV_T");
static_assert(!WGMMA || (CONV_BKB == 128 && MODE < 2 && NT == 256 && BM == 128 && (BN == 64 || BN == 128) &&
                         STAGES >= 3) ||
              (CONV_BKB == 128 && MODE == 2 && sizeof(T) == 2 && NT == 256 && STAGES >= 3 &&
               ((BM == 128 && (BN == 64 || BN == 128)) || (BM == 64 && (BN == 128 || BN == 256)))),
              "wgmma: two warpgroups on 128 x 64|128 tiles of 128-byte rows (mode 2, fp16/bf16: also 64 x 128|256 "
              "tiles, the warpgroups side by side), 3+ stages");

// where chunk j (16 bytes) of row r of an m- or n-major tile lives, in elements from the tile's start
__device__ __forceinline__ int chunk_at(int r, int j) { return r * LDK + (WGMMA ? j ^ (r & 7) : j) * VEC; }
// mode 2 on wgmma: where chunk j (along m or n) of reduction row r of a k-major tile lives. The tile is
// MN-major swizzle atoms of 8 rows x 128 bytes (64 elements along m or n), 1024 bytes each: the atoms of one
// 64-wide column block follow each other down the reduction (SBO = 1024 bytes apart), the column blocks
// are BK / 8 atoms apart (LBO); chunk j of row r sits at chunk position (j % 8) ^ (r % 8) of its atom's row
constexpr int MN_ATOM = 64 * VEC, MN_LBO = BK / 8 * MN_ATOM;  // elements
__device__ __forceinline__ int mn_chunk_at(int r, int j) {
    return (j >> 3) * MN_LBO + (r >> 3) * MN_ATOM + (r & 7) * 8 * VEC + ((j & 7) ^ (r & 7)) * VEC;
}

#include "dtypes.cuh"  // to_f / from_f

// n / d for n < 2^31 by multiply-and-shift (mul, shr from the host; d == 1 passes mul = 0).
__device__ __forceinline__ int fast_div(int n, unsigned mul, unsigned shr) {
    return mul ? (int)(__umulhi((unsigned)n, mul) >> shr) : n;
}

// the FFMA path's rows (and columns) of a thread: its i-th of a 16-thread grid line t
__device__ __forceinline__ int ffma_row(int i, int t) {
    return CONV_MODE == 2 ? (i >> 2) * 64 + t * 4 + (i & 3) : i * 16 + t;
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool pred) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    int bytes = pred ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}


// ---- tensor-core helpers (PTX: ldmatrix + mma.sync, no mma.h needed under NVRTC)
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
    unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* p) {
    unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
}
__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
#if CONV_IS_BF16
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}
__device__ __forceinline__ void mma1688_tf32(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ unsigned to_tf32(float v) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(v));
    return r;
}

#if CONV_MMA == 3
// ---- Hopper wgmma (sm_90a): wgmma.cuh, on this configuration's columns and types
// the columns of one warpgroup's MMA: all of the tile's, or half of them on a mode-2 tile of 64 rows
#if CONV_BM == 128
#define WG_N CONV_BN
#elif CONV_BN == 256
#define WG_N 128
#else
#define WG_N 64
#endif
#if CONV_IS_BF16
#define WG_KIND 1
#elif CONV_FLOAT
#define WG_KIND 2
#else
#define WG_KIND 0
#endif
#if CONV_MODE == 2  // both operands MN-major
#define WG_TRANS 1
#endif
#include "wgmma.cuh"
// the descriptor of an MN-major tile (mode 2): the leading-dimension byte offset is the step between 64-wide
// column blocks (MN_LBO), the stride byte offset the step between 8-row groups down the reduction (1024)
__device__ __forceinline__ unsigned long long wg_desc_mn(const void* p) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    return (unsigned long long)((a & 0x3FFFF) >> 4) | ((unsigned long long)(MN_LBO * sizeof(T) >> 4) << 16) |
           (64ull << 32) | (1ull << 62);
}
// cp.async writes shared memory through the generic proxy; wgmma reads it through the async proxy
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
#endif

// Kernel arguments: A_src (gathered/streamed operand A), B_src (operand B), bias, out, mask, prm, flags.
// prm holds the launch-time constants, in this order: M, N, Kred, IH, IW, ICp, OH, OW, R, S, sh, sw, ph, pw,
// dh, dw, ohw_mul, ohw_shr, ow_mul, ow_shr, out_C, lda_m, tiles_per_split, OHc, OWc, rh, rw, hstep, wstep, r0,
// s0, rstep, sstep, Rc, Sc, G, A_gs, B_gs, out_gs, where
//   M, N, Kred: the GEMM.
//   IH, IW, ICp: the NHWC tensor that is gathered (channels padded to ICp).
//   OH, OW: output spatial size (modes 0/1), dy's P, Q (mode 2).
//   ohw_mul/shr: magic for dividing by OH*OW; ow_mul/shr: by OW.
//   out_C: channel count of the NCHW output (modes 0/1: all groups');
//   lda_m: row length of dY_nhwk (mode 2, padded K); tiles_per_split (mode 2);
//   flags: 1 apply max(., 0), 2 add bias, 4 write the ReLU mask (rows of ceil(M / 32) uint32 words).
//   Modes 0/1 cover one residue class of output pixels: row m -> (n, hh, ww) over (OHc, OWc), output pixel
//   (hh*hstep + rh, ww*wstep + rw), and the taps r = r0 + jr*rstep (jr < Rc), s = s0 + js*sstep (js < Sc);
//   Kred = Rc*Sc*ICp. The identity class (OHc = OH, steps 1, r0 = s0 = 0, Rc = R, Sc = S) is the plain
//   GEMM; backward-data with stride > 1 (dilation 1) launches one class per (h % sh, w % sw), so that only
//   taps that land on an input pixel are in its reduction. ohw_mul/shr then divide by OHc*OWc, ow_* by OWc.
//   Those classes run in one launch: grid z picks the class, whose constants follow the previous class's in
//   prm; a class's M may fall short of the grid's rows, and its blocks past M leave at once.
//   G groups run in one launch, the group fastest along grid z (z = g + G * class or split): group g's
//   operands start A_gs and B_gs elements past group 0's (the packs lay the groups out one after another),
//   its output out_gs elements past (modes 0/1: its first channel of the NCHW output; mode 2 needs none, as
//   the split's partials at z * M * N are then [split][G * M][N], one GEMM's of all the groups' rows), its bias
//   N and its mask rows N * ceil(M / 32) words past. One group: G = 1.
//   Element offsets of the NHWC operands fit in 32 bits (the host checks), within a group.
extern "C" __global__ void __launch_bounds__(NT, CONV_MIN_BLOCKS)
conv_igemm(const T* __restrict__ A_src, const T* __restrict__ B_src, const T* __restrict__ bias,
           void* __restrict__ out_ptr, unsigned* __restrict__ mask, const int* __restrict__ prm, int flags) {
    // the launch-time constants, one small device array per configuration (few kernel arguments:
    // the host's launch cost grows with their count)
    // the group, and the residue class (mode 1) or split (mode 2)
    const int groups = prm[35], group = blockIdx.z % groups, zc = blockIdx.z / groups;
    if (MODE == 1) prm += zc * PRM_PER_CLASS;
    if (MODE < 3 && group) {
        A_src += (long long)group * prm[36];
        B_src += (long long)group * prm[37];
        if (MODE < 2) {
            out_ptr = reinterpret_cast<T*>(out_ptr) + (long long)group * prm[38];
            bias += (long long)group * prm[1];
            mask += (long long)group * prm[1] * ((prm[0] + 31) >> 5);
        }
    }
    const int M = prm[0], N = prm[1], Kred = prm[2], IH = prm[3], IW = prm[4], ICp = prm[5], OH = prm[6],
              OW = prm[7];
    const int R = prm[8], S = prm[9], sh = prm[10], sw = prm[11], ph = prm[12], pw = prm[13], dh = prm[14],
              dw = prm[15];
    const unsigned ohw_mul = (unsigned)prm[16], ohw_shr = (unsigned)prm[17], ow_mul = (unsigned)prm[18],
                   ow_shr = (unsigned)prm[19];
    const int out_C = prm[20], lda_m = prm[21], tiles_per_split = prm[22];
    const int OHc = prm[23], OWc = prm[24], rh = prm[25], rw = prm[26], hstep = prm[27], wstep = prm[28],
              r0 = prm[29], s0 = prm[30], rstep = prm[31], sstep = prm[32], Rc = prm[33], Sc = prm[34];
    extern __shared__ __align__(128) unsigned char smem_raw[];
    // wgmma's 128-byte swizzle is a function of the address bits: its tiles start on 1024 bytes (the host
    // allows 1024 bytes for this)
    T* smem = reinterpret_cast<T*>(
        smem_raw + (WGMMA ? (1024u - ((unsigned)__cvta_generic_to_shared(smem_raw) & 1023u)) & 1023u : 0u));
    const int tid = threadIdx.x;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    const int OHW = OH * OW;
    if (MODE == 1 && m0 >= M) return;  // past this residue class's rows (uniform in the block)

    const int numK_all = (Kred + BK - 1) / BK;
    int kt_begin = 0, kt_end = numK_all;
    if (MODE == 2) {
        kt_begin = zc * tiles_per_split;
        kt_end = min(numK_all, kt_begin + tiles_per_split);
    }

    // ------------------------------------------------------------ loader state
#if CONV_MODE < 2
    constexpr int CPR = BK / VEC;            // chunks per tile row (4)
    constexpr int A_IT = BM * CPR / NT, B_IT = BN * CPR / NT;
    static_assert(A_IT * NT == BM * CPR && B_IT * NT == BN * CPR, "every thread loads whole chunks of both tiles");
    const int jc = tid % CPR;
    int a_pix[A_IT], a_y0[A_IT], a_x0[A_IT];
    bool a_ok[A_IT];
    const int OHWc = OHc * OWc;
#pragma unroll
    for (int i = 0; i < A_IT; ++i) {
        int m = m0 + tid / CPR + i * (NT / CPR);
        a_ok[i] = m < M;
        int mm = a_ok[i] ? m : 0;
        int nimg = fast_div(mm, ohw_mul, ohw_shr);
        int rem = mm - nimg * OHWc;
        int hh = fast_div(rem, ow_mul, ow_shr);
        int oh = hh * hstep + rh, ow = (rem - hh * OWc) * wstep + rw;
        a_pix[i] = nimg * IH * IW;
        if (MODE == 0) { a_y0[i] = oh * sh - ph; a_x0[i] = ow * sw - pw; }
        else { a_y0[i] = oh + ph; a_x0[i] = ow + pw; }
    }
    // reduction index of this thread's chunk: kk = (jr*Sc + js)*ICp + c, advanced tile by tile
    int kc, kjs, kjr;
    {
        int kk = kt_begin * BK + jc * VEC;
        kc = kk % ICp;
        int rs = kk / ICp;
        kjr = Sc ? rs / Sc : Rc;  // an empty tap class (Rc or Sc = 0) has no tiles
        kjs = Sc ? rs - kjr * Sc : 0;
    }
    auto load_tile = [&](int stage) {
        T* As = smem + stage * STAGE_ELEMS;
        T* Bs = As + A_ELEMS;
        const bool k_ok = kjr < Rc;
        const int kr = r0 + kjr * rstep, ks_ = s0 + kjs * sstep;
#pragma unroll
        for (int i = 0; i < A_IT; ++i) {
            int row = tid / CPR + i * (NT / CPR);
            int iy, ix;
            bool ok = a_ok[i] && k_ok;
            if (MODE == 0) {
                iy = a_y0[i] + kr * dh;
                ix = a_x0[i] + ks_ * dw;
            } else {
                int ty = a_y0[i] - kr * dh, tx = a_x0[i] - ks_ * dw;
                if (sh == 1 && sw == 1) { iy = ty; ix = tx; }
                else {
                    ok = ok && ty >= 0 && tx >= 0 && (ty % sh) == 0 && (tx % sw) == 0;
                    iy = ty / sh; ix = tx / sw;
                }
            }
            ok = ok && iy >= 0 && iy < IH && ix >= 0 && ix < IW;
            const T* src = ok ? A_src + ((a_pix[i] + iy * IW + ix) * ICp + kc) : A_src;
            cp_async16(As + chunk_at(row, jc), src, ok);
        }
        const int boff = (kr * S + ks_) * ICp + kc;
#pragma unroll
        for (int i = 0; i < B_IT; ++i) {
            int row = tid / CPR + i * (NT / CPR);
            int n = n0 + row;
            bool ok = n < N && k_ok;
            const T* src = ok ? B_src + (n * R * S * ICp + boff) : B_src;
            cp_async16(Bs + chunk_at(row, jc), src, ok);
        }
        kc += BK;
        while (kc >= ICp) {
            kc -= ICp;
            if (++kjs == Sc) { kjs = 0; ++kjr; }
        }
    };
#elif CONV_MODE == 2
    constexpr int CPRA = BM / VEC, CPRB = BN / VEC;
    constexpr int A_IT = BK * CPRA / NT;
    // B: B_TPR threads share a reduction row (an output pixel: one decode per tile), each loading chunks
    // t, t + B_TPR, ... of it, so that a warp's cp.async covers B_TPR adjacent chunks of 32 / B_TPR rows
    constexpr int B_TPR = NT / BK, B_IT = CPRB / B_TPR;
    static_assert(A_IT >= 1 && B_IT >= 1 && B_TPR * BK == NT && B_IT * B_TPR == CPRB, "tile too small for the block");
    const int ca = tid % CPRA;
    const int am = m0 + ca * VEC;
    const bool am_ok = am < lda_m;
    const int brow = tid / B_TPR, bt = tid % B_TPR;
    // this thread's B column chunks: n = (r*S + s)*ICp + c, fixed for the whole kernel, as the tap's
    // offsets from the pixel (dy, dx) and its element offset from the pixel's (dy, dx, c)
    int b_dy[B_IT], b_dx[B_IT], b_off[B_IT];
    bool b_ok[B_IT];
#pragma unroll
    for (int j = 0; j < B_IT; ++j) {
        const int bn = n0 + (bt + j * B_TPR) * VEC;
        b_ok[j] = bn < N;
        const int nn = b_ok[j] ? bn : 0, rs = nn / ICp, r = rs / S;
        b_dy[j] = r * dh - ph;
        b_dx[j] = (rs - r * S) * dw - pw;
        b_off[j] = (b_dy[j] * IW + b_dx[j]) * ICp + nn % ICp;
    }
    int kt_cur = kt_begin;
    auto load_tile = [&](int stage) {
        T* As = smem + stage * STAGE_ELEMS;
        T* Bs = As + A_ELEMS;
        const int k0 = kt_cur * BK;
#pragma unroll
        for (int i = 0; i < A_IT; ++i) {
            int row = tid / CPRA + i * (NT / CPRA);
            int npq = k0 + row;
            bool ok = am_ok && npq < Kred;
            const T* src = ok ? A_src + (long long)npq * lda_m + am : A_src;
            cp_async16(As + (WGMMA ? mn_chunk_at(row, ca) : row * LDA2 + ca * VEC), src, ok);
        }
        const int npq = k0 + brow;
        const bool row_ok = npq < Kred;
        const int mm = row_ok ? npq : 0;
        const int nimg = fast_div(mm, ohw_mul, ohw_shr);
        const int pq = mm - nimg * OHW;
        const int p = fast_div(pq, ow_mul, ow_shr);
        const int y0 = p * sh, x0 = (pq - p * OW) * sw;
        const int base = ((nimg * IH + y0) * IW + x0) * ICp;
#pragma unroll
        for (int j = 0; j < B_IT; ++j) {
            const int iy = y0 + b_dy[j], ix = x0 + b_dx[j], cb = bt + j * B_TPR;
            const bool ok = row_ok && b_ok[j] && (unsigned)iy < (unsigned)IH && (unsigned)ix < (unsigned)IW;
            const T* src = ok ? B_src + (base + b_off[j]) : B_src;
            cp_async16(Bs + (WGMMA ? mn_chunk_at(brow, cb) : brow * LDB2 + cb * VEC), src, ok);
        }
        ++kt_cur;
    };
#else
    static_assert(sizeof(T) == 2 && CONV_MMA == 1, "mode 3 takes fp16 or bf16 on the tensor cores");
    typedef unsigned short U;  // the raw 16 bits: zero is +0 in both fp16 and bf16
    // two adjacent output pixels per thread: their values of one k are stored to the k-major tile as one
    // 32-bit word (measured faster than two 16-bit stores)
    constexpr int PIX = 2;
    constexpr int MW = BM / PIX;        // threads along m
    constexpr int AK = NT / MW;         // threads along k
    constexpr int A_IT = BK / AK;       // reduction rows per thread per tile
    constexpr int CPR = BK / VEC;       // 16-byte chunks per B row
    constexpr int B_IT = BN * CPR / NT;
    static_assert(A_IT >= 1 && B_IT >= 1, "tile too small for the block");
    const U* __restrict__ Araw = reinterpret_cast<const U*>(A_src);
    // per reduction index k = (c, r, s): x offset c*IH*IW + r*dh*IW + s*dw, and the tap r*S + s
    // (63, a tap no pixel has, past C*R*S: the host allows R*S <= 63)
    const int2* __restrict__ ktab = reinterpret_cast<const int2*>(prm + PRM_PER_CLASS + 1);
    const int ml = tid % MW, kl0 = tid / MW, jc = tid % CPR;
    int a_base[PIX];
    unsigned long long a_taps[PIX];  // bit r*S + s: tap (r, s) of this pixel is inside the image
#pragma unroll
    for (int u = 0; u < PIX; ++u) {
        const int m = m0 + ml * PIX + u;
        const int mm = m < M ? m : 0;
        const int nimg = fast_div(mm, ohw_mul, ohw_shr);
        const int rem = mm - nimg * OHW;
        const int oh = fast_div(rem, ow_mul, ow_shr);
        const int y0 = oh * sh - ph, x0 = (rem - oh * OW) * sw - pw;
        a_base[u] = nimg * ICp * IH * IW + y0 * IW + x0;  // ICp: x's channel count here
        unsigned long long taps = 0;
        for (int r = 0; r < R && m < M; ++r) {
            if ((unsigned)(y0 + r * dh) >= (unsigned)IH) continue;
            for (int s = 0; s < S; ++s)
                if ((unsigned)(x0 + s * dw) < (unsigned)IW) taps |= 1ull << (r * S + s);
        }
        a_taps[u] = taps;
    }
    U a_reg[A_IT][PIX];
    auto load_a = [&](int kt) {  // global -> registers, a tile ahead of its MMAs
#pragma unroll
        for (int j = 0; j < A_IT; ++j) {
            const int2 e = ktab[kt * BK + kl0 + j * AK];  // the table is padded to whole tiles
#pragma unroll
            for (int u = 0; u < PIX; ++u)
                a_reg[j][u] = (a_taps[u] >> e.y) & 1 ? Araw[a_base[u] + e.x] : (U)0;
        }
    };
    auto store_a = [&](int stage) {  // registers -> the k-major tile: consecutive threads, consecutive m
        U* As = reinterpret_cast<U*>(smem + stage * STAGE_ELEMS);
#pragma unroll
        for (int j = 0; j < A_IT; ++j)
            *reinterpret_cast<unsigned*>(As + (kl0 + j * AK) * LDA2 + ml * PIX) =
                a_reg[j][0] | ((unsigned)a_reg[j][1] << 16);
    };
    auto load_b = [&](int stage, int kt) {  // W's rows as they are: cp.async, whole chunks in or out
        T* Bs = smem + stage * STAGE_ELEMS + A_ELEMS;
        const int k = kt * BK + jc * VEC;
#pragma unroll
        for (int i = 0; i < B_IT; ++i) {
            const int row = tid / CPR + i * (NT / CPR), n = n0 + row;
            const bool ok = n < N && k < Kred;
            cp_async16(Bs + row * LDK + jc * VEC, ok ? B_src + ((long long)n * Kred + k) : B_src, ok);
        }
    };
#endif

    // ------------------------------------------------------------ compute state
    const int warp = tid / 32;
#if CONV_MMA == 3
    // warpgroup wg multiplies rows [64 wg, 64 wg + 64) of A by all of B; warp w of it holds 16 of those rows
    // (mode 2 with 64-row tiles: both warpgroups take all 64 rows, warpgroup wg columns [WG_N wg, WG_N wg + WG_N))
    const int wg = warp / 4, lane = tid % 32, g = lane >> 2, tig = lane & 3;
    const int wg_m = BM == 128 ? wg : 0, wg_n = BM == 128 ? 0 : wg;
    float acc[WG_N / 2];
#pragma unroll
    for (int i = 0; i < WG_N / 2; ++i) acc[i] = 0.0f;
    auto compute = [&](int stage) {  // issues the tile's MMAs as one group; does not wait for them
        const T* As = smem + stage * STAGE_ELEMS;
#if CONV_MODE == 2
        // a 64-wide column block is one LBO; 16 reduction rows (one MMA) are two 1024-byte atoms = 128 units
        const unsigned long long da = wg_desc_mn(As + wg_m * MN_LBO),
                                 db = wg_desc_mn(As + A_ELEMS + wg_n * (WG_N / 64) * MN_LBO);
        wg_fence();
#pragma unroll
        for (int kq = 0; kq < BK / 16; ++kq) wgmma_step(acc, da + 128 * kq, db + 128 * kq);
#else
        const unsigned long long da = wg_desc(As + wg_m * 64 * LDK), db = wg_desc(As + A_ELEMS);
        wg_fence();
#pragma unroll
        for (int kq = 0; kq < 4; ++kq) wgmma_step(acc, da + 2 * kq, db + 2 * kq);  // 32 bytes = 2 units apart
#endif
        wg_commit();
    };
#elif CONV_MMA >= 1
    constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N, FM = WM / 16, FN = WN / 8;
    static_assert(FN % 2 == 0, "B fragments load in pairs (ldmatrix x4)");
    const int wm = warp % WARPS_M, wn = warp / WARPS_M;
    const int lane = tid % 32, g = lane >> 2, tig = lane & 3;
    float acc[FM][FN][4];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j)
#pragma unroll
            for (int t = 0; t < 4; ++t) acc[i][j][t] = 0.0f;
#if CONV_MMA == 1
    static_assert(sizeof(T) == 2, "CONV_MMA=1 takes fp16 or bf16");
    auto compute = [&](int stage) {
        const T* As = smem + stage * STAGE_ELEMS;
        const T* Bs = As + A_ELEMS;
#pragma unroll
        for (int kq = 0; kq < BK; kq += 16) {
            unsigned a[FM][4], b[FN][2];
#pragma unroll
            for (int i = 0; i < FM; ++i) {
                const int mr = wm * WM + i * 16;
#if !CONV_A_KMAJOR
                ldmatrix_x4(a[i], As + (mr + (lane & 15)) * LDK + kq + (lane >> 4) * 8);
#else
                ldmatrix_x4_trans(a[i], As + (kq + (lane & 7) + ((lane >> 4) << 3)) * LDA2 + mr + ((lane >> 3) & 1) * 8);
#endif
            }
#pragma unroll
            for (int j = 0; j < FN; j += 2) {
                const int nc = wn * WN + j * 8;
                unsigned r[4];
#if !CONV_B_KMAJOR
                ldmatrix_x4(r, Bs + (nc + (lane & 7) + ((lane >> 4) << 3)) * LDK + kq + ((lane >> 3) & 1) * 8);
#else
                ldmatrix_x4_trans(r, Bs + (kq + (lane & 7) + ((lane >> 3) & 1) * 8) * LDB2 + nc + ((lane >> 4) << 3));
#endif
                b[j][0] = r[0]; b[j][1] = r[1]; b[j + 1][0] = r[2]; b[j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < FM; ++i)
#pragma unroll
                for (int j = 0; j < FN; ++j) mma16816(acc[i][j], a[i], b[j]);
        }
    };
#else
    static_assert(sizeof(T) == 4, "CONV_MMA=2 (TF32) takes float");
    // A(m, k), B(k, n) element reads from shared memory, by layout
#if CONV_MODE < 2
#define CONV_A(As, m, k) (As)[(m) * LDK + (k)]
#define CONV_B(Bs, k, n) (Bs)[(n) * LDK + (k)]
#else
#define CONV_A(As, m, k) (As)[(k) * LDA2 + (m)]
#define CONV_B(Bs, k, n) (Bs)[(k) * LDB2 + (n)]
#endif
    auto compute = [&](int stage) {
        const T* As = smem + stage * STAGE_ELEMS;
        const T* Bs = As + A_ELEMS;
#pragma unroll
        for (int kq = 0; kq < BK; kq += 8) {
            unsigned a[FM][4], b[FN][2];
#if CONV_MODE < 2
            // 32-bit elements through ldmatrix: each 8x8 b16 matrix is 8 rows of 4 floats
#pragma unroll
            for (int i = 0; i < FM; ++i) {
                const int mr = wm * WM + i * 16;
                ldmatrix_x4(a[i], As + (mr + (lane & 15)) * LDK + kq + (lane >> 4) * 4);
#pragma unroll
                for (int t = 0; t < 4; ++t) a[i][t] = to_tf32(__uint_as_float(a[i][t]));
            }
#pragma unroll
            for (int j = 0; j < FN; j += 2) {
                const int nc = wn * WN + j * 8;
                unsigned r[4];
                ldmatrix_x4(r, Bs + (nc + (lane & 7) + ((lane >> 4) << 3)) * LDK + kq + ((lane >> 3) & 1) * 4);
                b[j][0] = to_tf32(__uint_as_float(r[0])); b[j][1] = to_tf32(__uint_as_float(r[1]));
                b[j + 1][0] = to_tf32(__uint_as_float(r[2])); b[j + 1][1] = to_tf32(__uint_as_float(r[3]));
            }
#else
#pragma unroll
            for (int i = 0; i < FM; ++i) {
                const int mr = wm * WM + i * 16 + g;
                a[i][0] = to_tf32(CONV_A(As, mr, kq + tig));
                a[i][1] = to_tf32(CONV_A(As, mr + 8, kq + tig));
                a[i][2] = to_tf32(CONV_A(As, mr, kq + tig + 4));
                a[i][3] = to_tf32(CONV_A(As, mr + 8, kq + tig + 4));
            }
#pragma unroll
            for (int j = 0; j < FN; ++j) {
                const int nc = wn * WN + j * 8 + g;
                b[j][0] = to_tf32(CONV_B(Bs, kq + tig, nc));
                b[j][1] = to_tf32(CONV_B(Bs, kq + tig + 4, nc));
            }
#endif
#pragma unroll
            for (int i = 0; i < FM; ++i)
#pragma unroll
                for (int j = 0; j < FN; ++j) mma1688_tf32(acc[i][j], a[i], b[j]);
        }
    };
#endif
#else
    static_assert(NT == 256, "the FFMA path maps a 16 x 16 thread grid");
    // thread (tm, tn) holds rows ffma_row(i, tm) and columns ffma_row(j, tn): i * 16 + tm in modes 0/1,
    // runs of four (4 * tm + i % 4 + 64 * (i / 4)) in mode 2
    constexpr int TM = BM / 16, TN = BN / 16;
    const int tm = tid / 16, tn = tid % 16;
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    auto compute = [&](int stage) {
        const T* As = smem + stage * STAGE_ELEMS;
        const T* Bs = As + A_ELEMS;
#if CONV_MODE < 2
        // scalar reads: 16-byte loads of four consecutive k measured no faster in these modes (bench/conv.py),
        // whose shared-memory reads do not bound them as mode 2's did
#pragma unroll 4
        for (int kq = 0; kq < BK; ++kq) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = to_f(As[(i * 16 + tm) * LDK + kq]);
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = to_f(Bs[(j * 16 + tn) * LDK + kq]);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
#else
        // k-major tiles: a thread's rows (columns) are runs of four consecutive ones, 64 apart (see ffma_row),
        // each run one 16-byte load; a quarter warp's eight runs of B are 128 contiguous bytes
        static_assert(sizeof(T) == 4 && TM % 4 == 0 && TN % 4 == 0 && LDA2 % 4 == 0 && LDB2 % 4 == 0,
                      "the FFMA path reads float4s along m and n");
#pragma unroll 2
        for (int kq = 0; kq < BK; ++kq) {
            float4 a[TM / 4], b[TN / 4];
#pragma unroll
            for (int i = 0; i < TM / 4; ++i)
                a[i] = *reinterpret_cast<const float4*>(As + kq * LDA2 + ffma_row(i * 4, tm));
#pragma unroll
            for (int j = 0; j < TN / 4; ++j)
                b[j] = *reinterpret_cast<const float4*>(Bs + kq * LDB2 + ffma_row(j * 4, tn));
            const float* av = reinterpret_cast<const float*>(a);
            const float* bv = reinterpret_cast<const float*>(b);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
#endif
    };
#endif

    // ------------------------------------------------------------ main loop
#if CONV_MODE == 3
    // two stages: B by cp.async, A through registers; a stage is refilled only after the barrier
    // that follows its last reader
    if (kt_begin < kt_end) { load_a(kt_begin); load_b(0, kt_begin); }
    cp_async_commit();
    store_a(0);
    for (int kt = kt_begin; kt < kt_end; ++kt) {
        cp_async_wait<0>();
        __syncthreads();
        const int cur = (kt - kt_begin) & 1;
        const bool more = kt + 1 < kt_end;
        if (more) { load_a(kt + 1); load_b(cur ^ 1, kt + 1); }
        cp_async_commit();
        compute(cur);
        if (more) store_a(cur ^ 1);
    }
    __syncthreads();
#elif CONV_MMA == 3
    // tiles load STAGES - 2 ahead; a tile's MMAs run while the next tile's are issued, so a stage is
    // refilled only once every warpgroup has waited for the MMAs two tiles back (before the barrier)
#pragma unroll
    for (int st = 0; st < STAGES - 2; ++st) {
        if (kt_begin + st < kt_end) load_tile(st);
        cp_async_commit();
    }
    for (int kt = kt_begin; kt < kt_end; ++kt) {
        cp_async_wait<STAGES - 3>();
        fence_proxy_async();
        wg_wait<1>();
        __syncthreads();
        compute((kt - kt_begin) % STAGES);
        const int nk = kt + STAGES - 2;
        if (nk < kt_end) load_tile((nk - kt_begin) % STAGES);
        cp_async_commit();
    }
    wg_wait<0>();
    wg_fence_acc(acc);
    cp_async_wait<0>();
    __syncthreads();
#else
    // STAGES-deep cp.async pipeline
#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {
        if (kt_begin + st < kt_end) load_tile(st);
        cp_async_commit();
    }
    for (int kt = kt_begin; kt < kt_end; ++kt) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        const int nk = kt + STAGES - 1;
        if (nk < kt_end) load_tile((nk - kt_begin) % STAGES);
        cp_async_commit();
        compute((kt - kt_begin) % STAGES);
    }
    cp_async_wait<0>();
    __syncthreads();
#endif

    // ------------------------------------------------------------ epilogue through shared memory
    float* Cs = reinterpret_cast<float*>(smem_raw);
#if CONV_MMA == 3
#pragma unroll
    for (int j = 0; j < WG_N / 8; ++j)
#pragma unroll
        for (int t = 0; t < 4; ++t) {
            const int mr = wg_m * 64 + (warp % 4) * 16 + g + (t >> 1) * 8, nc = wg_n * WG_N + j * 8 + tig * 2 + (t & 1);
#if CONV_MODE != 2
            Cs[nc * LDC + mr] = acc[j * 4 + t];
#else
            Cs[mr * LDC + nc] = acc[j * 4 + t];
#endif
        }
#elif CONV_MMA >= 1
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j)
#pragma unroll
            for (int t = 0; t < 4; ++t) {
                const int mr = wm * WM + i * 16 + g + (t >> 1) * 8, nc = wn * WN + j * 8 + tig * 2 + (t & 1);
#if CONV_MODE != 2
                Cs[nc * LDC + mr] = acc[i][j][t];
#else
                Cs[mr * LDC + nc] = acc[i][j][t];
#endif
            }
#else
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int mr = ffma_row(i, tm), nc = ffma_row(j, tn);
#if CONV_MODE != 2
            Cs[nc * LDC + mr] = acc[i][j];
#else
            Cs[mr * LDC + nc] = acc[i][j];
#endif
        }
#endif
    __syncthreads();

#if CONV_MODE != 2
    {
        T* out = reinterpret_cast<T*>(out_ptr);
        const int ml = tid % BM;
        const int m = m0 + ml;
        const bool m_ok = m < M;
        const int mm = m_ok ? m : 0;
        const int nimg = fast_div(mm, ohw_mul, ohw_shr);
        const int rem = mm - nimg * (OHc * OWc);
        const int hh = fast_div(rem, ow_mul, ow_shr);
        const int oh = hh * hstep + rh, ow = (rem - hh * OWc) * wstep + rw;
        const long long obase = (long long)nimg * out_C * OHW + oh * OW + ow;
        const int lane = tid % 32;
        const bool warp_rows = (m - lane) < M;  // this warp's 32 rows start inside M
        for (int nl = tid / BM; nl < BN; nl += NT / BM) {
            const int n = n0 + nl;
            if (n >= N) break;  // uniform across the block's warps for a given nl
            float v = Cs[nl * LDC + ml];
            if (flags & 2) v += to_f(bias[n]);
            if ((flags & 1) && v <= 0.0f) v = 0.0f;  // ReLU: NaN stays NaN and keeps its gradient, as in PyTorch
            if (flags & 4) {
                const int mask_words = (M + 31) >> 5;
                unsigned bits = __ballot_sync(0xffffffffu, m_ok && !(v <= 0.0f));
                if (lane == 0 && warp_rows) mask[(long long)n * mask_words + (m >> 5)] = bits;
            }
            if (m_ok) out[obase + (long long)n * OHW] = from_f<T>(v);
        }
    }
#else
    {
        float* ws = reinterpret_cast<float*>(out_ptr) + (long long)blockIdx.z * M * N;
        const int nl = tid % BN;
        const int n = n0 + nl;
        if (n < N) {
            for (int ml = tid / BN; ml < BM; ml += NT / BN) {
                const int m = m0 + ml;
                if (m < M) ws[(long long)m * N + n] = Cs[ml * LDC + nl];
            }
        }
    }
#endif
}
