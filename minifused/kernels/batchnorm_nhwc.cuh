// Channels-last batch statistics of batchnorm.cu (included there under MF_NHWC, with its types and helpers): the
// NHWC partial-sums pass and the folds of its rows into each channel's sums, finalized there.
#pragma once

constexpr int NHWC_THREADS = 256;  // the block of bn_partial_nhwc (batchnorm.py's _THREADS)

// Channels-last: block (p, t) sums the p-th of P equal slices of the M rows over the t-th tile of CB
// vector columns (CB from the host, at most NHWC_THREADS; a tile spans about a 128-byte line of a row, so that
// a slice holds enough rows for its partials to be few beside x: batchnorm.py's _split_nhwc). Its threads form
// R = NHWC_THREADS / CB rows of CB columns; each adds every R-th row of the slice in its column, VEC channels at
// once, so consecutive threads read consecutive vectors of a row (and, with fewer than 32 columns, of the rows
// after it). The R rows' sums are then added in shared memory in a fixed tree (deterministic). Sums and shift
// as bn_partial's (forward: the shift is x[n=0, h=0, w=0, c] = x[c]); writes raw[p, c, 0..1], row p of a
// (P, 2C) array, for the folds. The launch bounds keep four blocks on an SM (_split_nhwc counts on it).
extern "C" __global__ void __launch_bounds__(NHWC_THREADS, 4)
bn_partial_nhwc(const T* __restrict__ x, const T* __restrict__ dy, const unsigned* __restrict__ mask,
                const float* __restrict__ mean, float* __restrict__ raw, long long M, long long C, int P, int CB) {
    pdl_entry();
    const int CV = (int)(C / VEC), R = NHWC_THREADS / CB;
    const int r = threadIdx.x / CB, col = threadIdx.x - r * CB;
    const long long cv = (long long)blockIdx.y * CB + col, p = blockIdx.x;  // this thread's vector column
    const bool live = r < R && cv < CV;  // (threads past R * CB idle where CB does not divide the block)
    float a[VEC], b[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) a[k] = b[k] = 0.f;
    if (live) {
        float shift[VEC];
#pragma unroll
        for (int k = 0; k < VEC; ++k) shift[k] = dy ? mean[cv * VEC + k] : to_f(x[cv * VEC + k]);
        const long long j0 = M * p / P + r, j1 = M * (p + 1) / P;
        if (dy) {
#pragma unroll 2  // two rows' loads of dy and x in flight per thread (four would spill under the launch bounds)
            for (long long j = j0; j < j1; j += R) add_terms<true>(x, dy, mask, j * C + cv * VEC, shift, a, b);
        } else {
#pragma unroll 4  // four rows' loads of x in flight per thread (two left the pass well under the bandwidth)
            for (long long j = j0; j < j1; j += R) add_terms<true>(x, nullptr, nullptr, j * C + cv * VEC, shift, a, b);
        }
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

constexpr int FOLD_ROWS = 32;  // warps of the folds

// The column sums of raw (P, 2C) in float64, in a fixed order (deterministic): block b takes columns
// [32b, 32b + 32), lane l of warp w column 32b + l over rows w, w + FOLD_ROWS, ...; then warp 0 adds the
// FOLD_ROWS sums in order. Column j = 2c + q is sum q of channel c: on return, the even lanes of warp 0 whose
// column is live hold their channel's two sums in (a, b), and the function returns the channel (else -1).
__device__ __forceinline__ long long fold_columns(const float* __restrict__ raw, long long C, int P, double& a,
                                                  double& b) {
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
    if (w != 0) return -1;
    double t = 0.0;
    for (int q = 0; q < FOLD_ROWS; ++q) t += sums[q][lane];
    a = t;
    b = __shfl_down_sync(0xffffffffu, t, 1);  // (the odd neighbour's column: the channel's second sum)
    return (lane & 1) == 0 && j < cols ? j / 2 : -1;
}

// The forward's fold: each channel's sums of bn_partial_nhwc's slices, then finalize_forward_channel over M rows.
extern "C" __global__ void __launch_bounds__(32 * FOLD_ROWS)
bn_fold_forward_nhwc(const float* __restrict__ raw, const T* __restrict__ x, W* running_mean, W* running_var,
                     long long* count, float* __restrict__ mean, float* __restrict__ rstd, long long M, long long C,
                     int P, float eps, float factor, int update) {
    pdl_entry();
    double a, b;
    const long long c = fold_columns(raw, C, P, a, b);
    if (c >= 0) finalize_forward_channel(c, a, b, x, running_mean, running_var, count, mean, rstd, (double)M, 1, eps,
                                         factor, update);
}

// The backward's fold: each channel's sums, then finalize_backward_channel (dw, db and dx's coefficients).
extern "C" __global__ void __launch_bounds__(32 * FOLD_ROWS)
bn_fold_backward_nhwc(const float* __restrict__ raw, const W* __restrict__ w, const float* __restrict__ rstd,
                      W* __restrict__ dw, W* __restrict__ db, float* __restrict__ coef, long long M, long long C,
                      int P, int batch) {
    pdl_entry();
    double a, b;
    const long long c = fold_columns(raw, C, P, a, b);
    if (c >= 0) finalize_backward_channel(c, a, b, w, rstd, dw, db, coef, (double)M, batch);
}
