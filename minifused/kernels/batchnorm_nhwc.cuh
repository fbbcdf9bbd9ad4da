// Channels-last partial sums of batchnorm.cu (included there under MF_NHWC, with its types and helpers): the
// NHWC partial-sums pass and the fold of its rows into the per-channel sums the finalize kernels read.
#pragma once

constexpr int NHWC_THREADS = 256;  // the block of bn_partial_nhwc (batchnorm.py's _THREADS)

// Channels-last: block (p, t) sums the p-th of P equal slices of the M rows over the t-th tile of CB
// vector columns (CB = min(C/VEC, NHWC_THREADS) columns of VEC channels each). Its threads form R =
// NHWC_THREADS / CB rows of CB columns (the rest idle); each adds every R-th row of the slice in its column,
// VEC channels at once, so consecutive threads read consecutive vectors of a row (and, with fewer than 32
// columns, of the rows after it). The R rows' sums are then added in shared memory in a fixed tree
// (deterministic). Sums and shift as bn_partial's (forward: the shift is x[n=0, h=0, w=0, c] = x[c]);
// writes raw[p, c, 0..1], row p of a (P, 2C) array (coalesced), for bn_fold_nhwc. The launch bounds keep
// four blocks on an SM (batchnorm.py's _split_nhwc counts on it).
extern "C" __global__ void __launch_bounds__(NHWC_THREADS, 4)
bn_partial_nhwc(const T* __restrict__ x, const T* __restrict__ dy, const unsigned* __restrict__ mask,
                const float* __restrict__ mean, float* __restrict__ raw, long long M, long long C, int P) {
    pdl_entry();
    const int CV = (int)(C / VEC), CB = min(CV, NHWC_THREADS), R = NHWC_THREADS / CB;
    const int r = threadIdx.x / CB, col = threadIdx.x - r * CB;
    const long long cv = (long long)blockIdx.y * CB + col, p = blockIdx.x;  // this thread's vector column
    const bool live = r < R && cv < CV;
    float a[VEC], b[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) a[k] = b[k] = 0.f;
    if (live) {
        float shift[VEC];
#pragma unroll
        for (int k = 0; k < VEC; ++k) shift[k] = dy ? mean[cv * VEC + k] : to_f(x[cv * VEC + k]);
        const long long j1 = M * (p + 1) / P;
#pragma unroll 2  // two loads in flight per thread (four would spill at VEC = 8 under the launch bounds)
        for (long long j = M * p / P + r; j < j1; j += R) add_terms<true>(x, dy, mask, j * C + cv * VEC, shift, a, b);
    }
    // red[k][t] and red[VEC + k][t]: thread t's sums of channel k of its vector (consecutive threads,
    // consecutive words: no bank conflicts)
    __shared__ float red[2 * VEC][NHWC_THREADS];
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
        red[k][threadIdx.x] = a[k];
        red[VEC + k][threadIdx.x] = b[k];
    }
    __syncthreads();
    int h = 1;  // the largest power of two below R (1 when R is 1): row r adds row r + h, h halving
    while (2 * h < R) h *= 2;
    for (; h > 0; h >>= 1) {
        if (r < h && r + h < R) {
#pragma unroll
            for (int q = 0; q < 2 * VEC; ++q) red[q][threadIdx.x] += red[q][threadIdx.x + h * CB];
        }
        __syncthreads();
    }
    if (r == 0 && cv < CV) {
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const long long c = cv * VEC + k;
            raw[(p * C + c) * 2] = red[k][col];
            raw[(p * C + c) * 2 + 1] = red[VEC + k][col];
        }
    }
}

constexpr int FOLD_ROWS = 32;  // warps of bn_fold_nhwc

// The column sums of raw (P, 2C) in float64, in a fixed order (deterministic): block b takes columns
// [32b, 32b + 32), lane l of warp w column 32b + l over rows w, w + FOLD_ROWS, ...; then warp 0 adds the
// FOLD_ROWS sums in order. Column j = 2c + q is part[c, 0, q]: one row of partials, for the finalize
// kernels with P = 1.
extern "C" __global__ void __launch_bounds__(32 * FOLD_ROWS)
bn_fold_nhwc(const float* __restrict__ raw, float* __restrict__ part, long long C, int P) {
    pdl_entry();
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const long long j = (long long)blockIdx.x * 32 + lane, cols = 2 * C;
    double s = 0.0;
    if (j < cols) {
#pragma unroll 4
        for (int p = w; p < P; p += FOLD_ROWS) s += raw[p * cols + j];
    }
    __shared__ double sums[FOLD_ROWS][32];
    sums[w][lane] = s;
    __syncthreads();
    if (w == 0 && j < cols) {
        double t = 0.0;
        for (int q = 0; q < FOLD_ROWS; ++q) t += sums[q][lane];
        part[j] = (float)t;
    }
}
