// Layout helpers of the implicit-GEMM convolution (conv.cu):
//   pack_nhwc     NCHW (G groups' channel slices) -> NHWC with channels zero-padded to Cp, one group's
//                 packed image after another's, optionally multiplied by a bit-packed ReLU mask (the
//                 backward's dz); a block packs 64x64 (16-bit T) or 32x32 tiles (float)
//   transpose_pad the backward-data's weight: KCRS as (K, C*R*S) (or KRSC) -> CRSK (C*R*S, Kp), 32x32 tiles
//   pack_forward  the forward's pack_nhwc of x and its KRSC pack of w (channels zero-padded to Cp) in
//                 one launch (optionally rounding float to TF32)
//   wgrad_reduce  sum of the split-K fp32 partials, in a fixed order, written as KRSC (or KCRS)
//   wgrad_reduce_kcrs
//                 the same sum written as KCRS through a shared-memory transpose (filters of more than one tap)
//   wgrad_reduce_runs
//                 the same sum written as KRSC for small filters of many splits, runs of them summed by warps
//
// nvrtc-check: -DCONV_T=__half
// nvrtc-check: -DCONV_T=__nv_bfloat16
// nvrtc-check: -DCONV_T=float
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef CONV_T
#define CONV_T float
#endif
typedef CONV_T T;

#include "dtypes.cuh"  // to_f / from_f

// v as TF32 (round to nearest, ties away: cvt.rna) where tf32 is set and v is a float, else v: conv.cu's
// wgmma reads its float operands from shared memory as they are, so the forward's pack rounds them
template <typename U> __device__ __forceinline__ U tf32_if(U v, bool) { return v; }
template <> __device__ __forceinline__ float tf32_if<float>(float v, bool tf32) {
    if (!tf32) return v;
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(v));
    return __uint_as_float(r);
}

// in: (N, Ctot, HW) with this call's C channels starting at `in` (already offset);
// out: (N, HW, Cp). mask (optional, mask_words > 0): bit m%32 of word [c*mask_words + m/32],
// m = n*HW + hw, rows already offset to this group's first channel.
// One 32 x 32 tile (hw0.., c0..) of image n, by a block of (32, 8) threads.
__device__ __forceinline__ void pack_nhwc_tile(const T* __restrict__ in, T* __restrict__ out,
                                               const unsigned* __restrict__ mask, int C, int Ctot, int HW, int Cp,
                                               int mask_words, int n, int hw0, int c0, bool tf32 = false) {
    __shared__ T tile[32][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
#pragma unroll
    for (int j = 0; j < 32; j += 8) {
        const int c = c0 + ty + j, hw = hw0 + tx;
        T v = from_f<T>(0.0f);
        if (c < C && hw < HW) {
            v = in[((long long)n * Ctot + c) * HW + hw];
            if (mask_words) {
                const long long m = (long long)n * HW + hw;
                if (!((mask[(long long)c * mask_words + (m >> 5)] >> (m & 31)) & 1u)) v = from_f<T>(0.0f);
            }
        }
        tile[ty + j][tx] = v;
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 32; j += 8) {
        const int hw = hw0 + ty + j, c = c0 + tx;
        if (hw < HW && c < Cp) out[((long long)n * HW + hw) * Cp + c] = tf32_if(tile[tx][ty + j], tf32);
    }
    __syncthreads();  // the tile is free for the block's next image
}

// 16-bit T, HW % 8 == 0, Cp % 8 == 0, 16-byte aligned arrays: a 64 x 64 tile (hw0.., c0..) of image n moved in 16-byte
// pieces, 8 pixels of one channel in and 8 channels of one pixel out (2-byte accesses reach a fraction of the
// copy bandwidth). Shared memory holds the tile as 64 rows of pixels whose 16-byte chunks of channels are
// XOR-swizzled by the row's group of 8 pixels, so that neither phase has bank conflicts.
__device__ __forceinline__ void pack_nhwc_tile64(const T* __restrict__ in, T* __restrict__ out,
                                                 const unsigned* __restrict__ mask, int C, int Ctot, int HW, int Cp,
                                                 int mask_words, int n, int hw0, int c0) {
    __shared__ __align__(16) T tile[64][64];
    const int t = threadIdx.y * 32 + threadIdx.x;
#pragma unroll
    for (int rep = 0; rep < 2; ++rep) {
        const int cl = rep * 32 + t / 8, g = t % 8, c = c0 + cl, hw = hw0 + g * 8;  // g: the group of 8 pixels
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (c < C && hw < HW) {
            v = *reinterpret_cast<const uint4*>(in + ((long long)n * Ctot + c) * HW + hw);
            if (mask_words) {  // the 8 pixels' bits (n * HW + hw is a multiple of 8): clear the masked halves
                const long long m = (long long)n * HW + hw;
                const unsigned bits = mask[(long long)c * mask_words + (m >> 5)] >> (m & 31);
                unsigned* u = reinterpret_cast<unsigned*>(&v);
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    u[i] &= ((bits >> (2 * i)) & 1u ? 0xFFFFu : 0u) | ((bits >> (2 * i + 1)) & 1u ? 0xFFFF0000u : 0u);
            }
        }
        const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
        for (int i = 0; i < 8; ++i) tile[g * 8 + i][(((cl >> 3) ^ g) << 3) + (cl & 7)] = e[i];
    }
    __syncthreads();
#pragma unroll
    for (int rep = 0; rep < 2; ++rep) {
        const int row = rep * 32 + t / 8, chunk = t % 8, hw = hw0 + row, c = c0 + chunk * 8;
        if (hw < HW && c < Cp)
            *reinterpret_cast<uint4*>(out + ((long long)n * HW + hw) * Cp + c) =
                *reinterpret_cast<const uint4*>(&tile[row][(chunk ^ (row >> 3)) << 3]);
    }
    __syncthreads();  // the tile is free for the block's next image
}

__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<unsigned long long>(p) & 15) == 0; }

// A block's tile (hw0.., c0..) of image n: PACK_TILE x PACK_TILE, the host's pack_tile (64 for 16-bit T, 32 for
// float); 16-bit tiles that the vector path cannot take go as four 32 x 32 ones.
constexpr int PACK_TILE = sizeof(T) == 2 ? 64 : 32;
__device__ __forceinline__ void pack_nhwc_block(const T* __restrict__ in, T* __restrict__ out,
                                                const unsigned* __restrict__ mask, int C, int Ctot, int HW, int Cp,
                                                int mask_words, int n, bool tf32 = false) {
    const int hw0 = blockIdx.x * PACK_TILE, c0 = blockIdx.y * PACK_TILE;
    if (PACK_TILE == 32) {
        pack_nhwc_tile(in, out, mask, C, Ctot, HW, Cp, mask_words, n, hw0, c0, tf32);
    } else if (HW % 8 == 0 && Cp % 8 == 0 && aligned16(in) && aligned16(out)) {
        pack_nhwc_tile64(in, out, mask, C, Ctot, HW, Cp, mask_words, n, hw0, c0);
    } else {
#pragma unroll 1
        for (int q = 0; q < 4; ++q)
            pack_nhwc_tile(in, out, mask, C, Ctot, HW, Cp, mask_words, n, hw0 + (q & 1) * 32, c0 + (q >> 1) * 32);
    }
}

// Image n of group g (C channels each, from channel g * C of Ctot) packed to (G, N, HW, Cp): group g's
// (N, HW, Cp) after group g - 1's, as conv.cu reads them (its prm's group strides).
__device__ __forceinline__ void pack_group_image(const T* __restrict__ in, T* __restrict__ out,
                                                 const unsigned* __restrict__ mask, int C, int Ctot, int HW, int Cp,
                                                 int mask_words, int N, int image, bool tf32 = false) {
    const int g = image / N, n = image - g * N;
    pack_nhwc_block(in + (long long)g * C * HW, out + (long long)g * N * HW * Cp,
                    mask_words ? mask + (long long)g * C * mask_words : mask, C, Ctot, HW, Cp, mask_words, n, tf32);
}

// grid (ceil(HW/PACK_TILE), ceil(Cp/PACK_TILE), min(G * N, 65535)), block (32, 8): block z packs images z,
// z + gridDim.z, ... of the G groups' G * N (pack_group_image)
extern "C" __global__ void __launch_bounds__(256)
pack_nhwc(const T* __restrict__ in, T* __restrict__ out, const unsigned* __restrict__ mask,
          int C, int Ctot, int HW, int Cp, int mask_words, int N, int G) {
    for (int i = blockIdx.z; i < G * N; i += gridDim.z)
        pack_group_image(in, out, mask, C, Ctot, HW, Cp, mask_words, N, i);
}

// out (A, RS, Bp): out[a, rs, b] = b < B ? w[a*sa + b*sb + rs] : 0, elements first, first + step, ...
__device__ __forceinline__ void pack_weight_range(const T* __restrict__ w, T* __restrict__ out, int A, int RS, int B,
                                                  int Bp, int sa, int sb, long long first, long long step,
                                                  bool tf32 = false) {
    const long long total = (long long)A * RS * Bp;
    for (long long i = first; i < total; i += step) {
        const int b = (int)(i % Bp);
        const long long t = i / Bp;
        const int rs = (int)(t % RS);
        const int a = (int)(t / RS);
        out[i] = b < B ? tf32_if(w[(long long)a * sa + (long long)b * sb + rs], tf32) : from_f<T>(0.0f);
    }
}

// The backward-data's weight: in (B, J) row-major (one group's KCRS weight as (K, C*R*S)) -> out (J, Bp),
// out[j][b] = b < B ? in[b][j] : 0. 32 x 32 tiles through shared memory, so that both the reads and the
// writes are coalesced; one tile (j0.., b0..) of the jn rows by a block of (32, 8) threads, in[b][j] at
// b * in_ld + j and out[j][b] at j * out_ld + b.
__device__ __forceinline__ void transpose_pad_tile(const T* __restrict__ in, T* __restrict__ out, int B, int jn,
                                                   int Bp, int in_ld, int out_ld, int j0, int b0) {
    __shared__ T tile[32][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
#pragma unroll
    for (int i = 0; i < 32; i += 8) {
        const int b = b0 + ty + i, j = j0 + tx;
        tile[ty + i][tx] = b < B && j < jn ? in[(long long)b * in_ld + j] : from_f<T>(0.0f);
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 32; i += 8) {
        const int j = j0 + ty + i, b = b0 + tx;
        if (j < jn && b < Bp) out[(long long)j * out_ld + b] = tile[tx][ty + i];
    }
    __syncthreads();  // the tile is free for the block's next one
}

// grid (RS' * ceil(J / RS' / 32), ceil(Bp / 32)) with RS' = max(RS, 1), block (32, 8). RS > 0: the weight is
// channels-last (KRSC memory, in[b][j = c*RS + rs] at b*J + rs*C + c): a block transposes 32 channels of one tap
// (blockIdx.x = channel tile * RS + rs), so that it reads runs of C-contiguous elements.
extern "C" __global__ void __launch_bounds__(256) transpose_pad(const T* __restrict__ in, T* __restrict__ out, int B,
                                                                int J, int Bp, int RS) {
    if (RS > 0) {
        const int rs = blockIdx.x % RS;
        transpose_pad_tile(in + rs * (J / RS), out + (long long)rs * Bp, B, J / RS, Bp, J, RS * Bp,
                           blockIdx.x / RS * 32, blockIdx.y * 32);
    } else if (blockIdx.x * 32 < J) {
        transpose_pad_tile(in, out, B, J, Bp, J, Bp, blockIdx.x * 32, blockIdx.y * 32);
    }
}

// The backward's two packs in one launch (one launch less of host time per convolution of an eager step): dy
// (NCHW, times the ReLU mask if mask_words > 0) -> (G, N, PQ, Kp) as pack_nhwc, and the G groups' KCRS weights w
// (G * K, J = C*R*S) -> (G, J, Kp) as transpose_pad. grid (ceil(PQ/PACK_TILE), ceil(Kp/PACK_TILE), ZD + ZW),
// block (32, 8): block z < ZD packs images z, z + ZD, ... of the G * N; the blocks of z >= ZD take the weights'
// 32 x 32 tiles in turn.
extern "C" __global__ void __launch_bounds__(256)
pack_backward(const T* __restrict__ dy, T* __restrict__ dyout, const unsigned* __restrict__ mask, int mask_words,
              const T* __restrict__ w, T* __restrict__ wout, int N, int K, int Ktot, int PQ, int Kp, int J, int ZD,
              int G) {
    if ((int)blockIdx.z < ZD) {
        for (int i = blockIdx.z; i < G * N; i += ZD)
            pack_group_image(dy, dyout, mask, K, Ktot, PQ, Kp, mask_words, N, i);
        return;
    }
    const int tiles_j = (J + 31) / 32, tiles = tiles_j * ((Kp + 31) / 32);
    const int blocks = (gridDim.z - ZD) * gridDim.y * gridDim.x;
    for (int t = ((blockIdx.z - ZD) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x; t < G * tiles; t += blocks) {
        const int g = t / tiles, u = t - g * tiles;
        transpose_pad_tile(w + (long long)g * K * J, wout + (long long)g * J * Kp, K, J, Kp, J, Kp,
                           (u % tiles_j) * 32, (u / tiles_j) * 32);
    }
}

// The forward's two packs in one launch: x (NCHW, G groups of C channels) -> (G, N, HW, Cp) as pack_nhwc,
// and w (K, C, RS) -> (K, RS, Cp) by pack_weight_range with sa = C*RS, sb = RS (K: the G groups' rows).
// grid (ceil(HW/PACK_TILE), ceil(Cp/PACK_TILE), ZX + ZW), block (32, 8): block z < ZX packs images z, z + ZX,
// ... of the G * N; the blocks of z >= ZX pack the weight.
extern "C" __global__ void __launch_bounds__(256)
pack_forward(const T* __restrict__ x, T* __restrict__ xout, const T* __restrict__ w, T* __restrict__ wout,
             int N, int C, int Ctot, int HW, int Cp, int K, int RS, int ZX, int G, int tf32) {
    if ((int)blockIdx.z < ZX) {
        for (int i = blockIdx.z; i < G * N; i += ZX)
            pack_group_image(x, xout, nullptr, C, Ctot, HW, Cp, 0, N, i, tf32);
        return;
    }
    const long long block = ((long long)(blockIdx.z - ZX) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    const long long blocks = (long long)(gridDim.z - ZX) * gridDim.y * gridDim.x;
    pack_weight_range(w, wout, K, RS, C, Cp, C * RS, RS, block * 256 + threadIdx.y * 32 + threadIdx.x, blocks * 256,
                      tf32);
}

// The splits of the partials at row k, column col (= rs * Cp + c): all of them, or where the filter gradient
// ran its first `whole` tiles (of tile_rows x 128, row-major in rows of n_tiles) in `whole_splits` splits
// (conv_tma_wgrad; one: unsplit), that many there, or none if those tiles wrote dw themselves (`done`)
__device__ __forceinline__ int splits_at(int splits, int k, long long col, int tile_rows, int n_tiles, int whole,
                                         int whole_splits, int done) {
    return (long long)(k / tile_rows) * n_tiles + col / 128 >= whole ? splits : done ? 0 : whole_splits;
}

__device__ __forceinline__ void add_to(float& s, float v) { s += v; }
__device__ __forceinline__ void add_to(float4& s, const float4& v) { s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w; }

// s + p[0] + p[stride] + ... + p[(n - 1) * stride], added in that order, the reads issued 8 at a time ahead of
// their adds: a small filter's sum of many splits (1x1 of 64 channels: 2048 threads of 4 channels, 131 splits)
// is bound by the reads' latency
template <class V> __device__ __forceinline__ V sum_splits(V s, const V* __restrict__ p, long long stride, int n) {
    int z = 0;
    for (; z + 8 <= n; z += 8) {
        V v[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] = p[(z + j) * stride];
#pragma unroll
        for (int j = 0; j < 8; ++j) add_to(s, v[j]);
    }
    for (; z < n; ++z) add_to(s, p[z * stride]);
    return s;
}

// four adjacent channels' sums stored into dw at `out` (KRSC: adjacent there too), as one 8- or 16-byte write
__device__ __forceinline__ void store4(T* out, const float4& s) {
    __align__(16) T o[4] = {from_f<T>(s.x), from_f<T>(s.y), from_f<T>(s.z), from_f<T>(s.w)};
    if (sizeof(T) == 2)
        *reinterpret_cast<uint2*>(out) = *reinterpret_cast<const uint2*>(o);
    else
        *reinterpret_cast<uint4*>(out) = *reinterpret_cast<const uint4*>(o);
}

// ws (K, RS*Cp) fp32 partials, split z's at ws + z * stride (conv_tma.py's wgrad_partials) -> dw (K, C, RS) in T
// (this group's rows, already offset), or with krsc set dw (K, RS, C) (a channels-last weight's memory), each
// element the sum of its splits (splits_at) in split order;
// with `done` (KRSC) the whole tiles are dw already: threads start at the first row of tiles not all whole (the
// host sizes the grid for the rows from there).
// Threads walk ws's order (c fastest), so that the reads of the fp32 partials, splits times the output's size,
// are coalesced; the KCRS writes, strided by RS, merge in the L2; the KRSC writes are coalesced too.
// Where C and Cp are multiples of 4, a thread takes 4 adjacent channels: one 16-byte read per split, and for
// KRSC one 8- or 16-byte write (conv.wgrad_reduce_vec sizes the grid for that).
extern "C" __global__ void wgrad_reduce(const float* __restrict__ ws, T* __restrict__ dw, int splits, int K, int C,
                                        int RS, int Cp, int krsc, int tile_rows, int n_tiles, int whole,
                                        int whole_splits, int done, long long stride) {
    const long long total = (long long)K * C * RS;
    const long long first = done ? (long long)(whole / n_tiles) * tile_rows * C * RS : 0;  // (an element index)
    if ((C & 3) == 0 && (Cp & 3) == 0) {
        const int C4 = C / 4;
        for (long long i = first / 4 + blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total / 4;
             i += (long long)gridDim.x * blockDim.x) {
            const int c = (int)(i % C4) * 4;
            const long long t = i / C4;  // k * RS + rs
            const float4* p = reinterpret_cast<const float4*>(ws + t * Cp + c);
            const int n = splits_at(splits, (int)(t / RS), (t % RS) * Cp + c, tile_rows, n_tiles, whole,
                                    whole_splits, done);
            if (n == 0) continue;
            const float4 s = sum_splits(p[0], p + stride / 4, stride / 4, n - 1);
            if (krsc) {
                store4(dw + 4 * i, s);
            } else {
                const int rs = (int)(t % RS), k = (int)(t / RS);
                T* out = dw + ((long long)k * C + c) * RS + rs;
                out[0] = from_f<T>(s.x), out[RS] = from_f<T>(s.y), out[2 * RS] = from_f<T>(s.z);
                out[3 * RS] = from_f<T>(s.w);
            }
        }
        return;
    }
    for (long long i = first + blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const int c = (int)(i % C);
        const long long t = i / C;  // k * RS + rs
        const int rs = (int)(t % RS);
        const int k = (int)(t / RS);
        const float* p = ws + t * Cp + c;
        const int n = splits_at(splits, k, (long long)rs * Cp + c, tile_rows, n_tiles, whole, whole_splits, done);
        if (n == 0) continue;
        const float s = sum_splits(0.0f, p, stride, n);
        dw[krsc ? i : ((long long)k * C + c) * RS + rs] = from_f<T>(s);
    }
}

// wgrad_reduce's KRSC output (split-K's partials alone, C and Cp multiples of 4) where the filter is small and
// the splits many (a 1x1 filter of 64 x 128 channels: 2048 threads of 4 channels, 131 splits), which one thread
// per 4 channels would sum at the reads' latency: a block of 8 warps takes 32 such items (a lane each), warp w
// sums the run of splits [w * per, (w + 1) * per) in order (per = ceil(splits / 8)), and warp 0 adds the runs'
// sums in run order. Blocks stride over the ceil(K * RS * C / 128) groups of 32 items.
extern "C" __global__ void __launch_bounds__(256) wgrad_reduce_runs(const float* __restrict__ ws,
                                                                    T* __restrict__ dw, int splits, int K, int C,
                                                                    int RS, int Cp) {
    __shared__ float4 run[8][32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, per = (splits + 7) / 8, C4 = C / 4;
    const long long items = (long long)K * RS * C4, plane4 = (long long)K * RS * Cp / 4;
    const int z0 = warp * per, n = min(splits, z0 + per) - z0;  // this warp's run (none: n <= 0)
    for (long long i0 = blockIdx.x * 32LL; i0 < items; i0 += gridDim.x * 32LL) {
        const long long i = i0 + lane, t = i / C4;  // (t: k * RS + rs)
        if (i < items && n > 0) {
            const float4* p = reinterpret_cast<const float4*>(ws + t * Cp + (i % C4) * 4) + z0 * plane4;
            run[warp][lane] = sum_splits(p[0], p + plane4, plane4, n - 1);
        }
        __syncthreads();
        if (warp == 0 && i < items) {
            float4 s = run[0][lane];
            for (int w = 1; w < 8 && w * per < splits; ++w) add_to(s, run[w][lane]);
            store4(dw + 4 * i, s);
        }
        __syncthreads();
    }
}

// the sum of the splits (n of them, `stride` floats apart, in split order) of the V adjacent floats at p, into out
__device__ __forceinline__ void sum_run(const float* p, long long stride, int n, float (&out)[1]) {
    out[0] = sum_splits(p[0], p + stride, stride, n - 1);
}
__device__ __forceinline__ void sum_run(const float* p, long long stride, int n, float (&out)[4]) {
    const float4* q = reinterpret_cast<const float4*>(p);
    const float4 s = sum_splits(q[0], q + stride / 4, stride / 4, n - 1);
    out[0] = s.x, out[1] = s.y, out[2] = s.z, out[3] = s.w;
}

// wgrad_reduce_kcrs's blocks of 32 * V channels, V adjacent ones a thread (one 4- or 16-byte read a split)
template <int V>
__device__ void kcrs_blocks(const float* __restrict__ ws, T* __restrict__ dw, float* tile, int splits, int K, int C,
                            int RS, int Cp, int tile_rows, int n_tiles, int whole, int whole_splits,
                            long long stride) {
    const int width = 32 * V, chunks = (C + width - 1) / width;
    for (long long b = blockIdx.x; b < (long long)K * chunks; b += gridDim.x) {
        const int k = (int)(b / chunks), c0 = (int)(b % chunks) * width, cn = min(width, C - c0);
        for (int e = threadIdx.x; e < 32 * RS; e += blockDim.x) {
            const int rs = e >> 5, cl = (e & 31) * V;
            if (cl < cn) {  // (V 4: C is a multiple of 4, so are cn and cl: all V in range)
                const long long col = (long long)rs * Cp + c0 + cl;
                float sum[V];
                sum_run(ws + (long long)k * RS * Cp + col, stride,
                        splits_at(splits, k, col, tile_rows, n_tiles, whole, whole_splits, 0), sum);
#pragma unroll
                for (int j = 0; j < V; ++j) tile[(cl + j) * RS + rs] = sum[j];
            }
        }
        __syncthreads();
        T* out = dw + ((long long)k * C + c0) * RS;
        for (int e = threadIdx.x; e < cn * RS; e += blockDim.x) out[e] = from_f<T>(tile[e]);
        __syncthreads();
    }
}

// wgrad_reduce's KCRS output (of the partials as it takes them) for filters of RS > 1 taps, coalesced both ways: a
// block takes one k and 32 * V channels c0.., reads their RS rows of each split's partials (32 * V adjacent floats a
// row; V = `vec`, 4 only where C and Cp are multiples of 4: each thread then has 16 bytes a split in flight, not 4,
// and the sum is bound by the reads' latency; the host picks 1 where 4 would leave blocks part idle), sums the
// splits (splits_at) in order into shared memory transposed ([c][rs]), and writes dw's span [k][c0..][0..RS), which
// is contiguous in KCRS. Dynamic shared memory: 32 * V * RS floats. Blocks stride over the K * ceil(C / (32 * V))
// (k, c0) pairs.
extern "C" __global__ void wgrad_reduce_kcrs(const float* __restrict__ ws, T* __restrict__ dw, int splits, int K,
                                             int C, int RS, int Cp, int tile_rows, int n_tiles, int whole,
                                             int whole_splits, long long stride, int vec) {
    extern __shared__ float tile[];
    if (vec == 4)
        kcrs_blocks<4>(ws, dw, tile, splits, K, C, RS, Cp, tile_rows, n_tiles, whole, whole_splits, stride);
    else
        kcrs_blocks<1>(ws, dw, tile, splits, K, C, RS, Cp, tile_rows, n_tiles, whole, whole_splits, stride);
}
