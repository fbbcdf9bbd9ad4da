// Channels-last batch statistics of batchnorm.cu (included there under MF_NHWC, with its types and helpers): the
// NHWC partial-sums pass and the folds of its rows into each channel's sums, finalized there.
#pragma once

constexpr int NHWC_THREADS = 256;  // the block of bn_partial_nhwc (batchnorm.py's _THREADS)

// Rows of a vector column that bn_partial_nhwc's forward threads load before they add their terms: two rows' loads
// in flight per thread, issued before the sums (an unrolled one-row loop left them behind the sums, and the pass,
// one vector a row, read well under the bandwidth; four rows spilled in the bf16 build and measured slower).
constexpr int PARTIAL_ROWS_FORWARD = 2;

// The forward's add_vector_terms of rows j0, j0 + R, ... < j1 of x at column offset `at` (row length C), U rows a
// trip, their loads issued before their sums. Indices in I (32-bit unless the tensor needs 64): the registers of
// 64-bit row arithmetic spilled.
template <int U>
__device__ __forceinline__ void add_rows(const T* __restrict__ x, long long j0, long long j1, int R, long long C,
                                         long long at, const float* shift, float* a, float* b) {
    const I rows = j1 > j0 ? (I)((j1 - j0 + R - 1) / R) : 0, first = (I)(j0 * C + at), step = (I)R * (I)C;
    for (I t = 0; t < rows; t += U) {
        TV xv[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (t + u < rows) xv[u] = *reinterpret_cast<const TV*>(x + first + (t + u) * step);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (t + u < rows) add_vector_terms<true>(xv[u], nullptr, false, shift, nullptr, nullptr, a, b);
        }
    }
}

// Channels-last: block (p, t) sums the p-th of P equal slices of the M rows over the t-th tile of CB
// vector columns (CB from the host, at most NHWC_THREADS; a tile spans about a 128-byte line of a row, so that
// a slice holds enough rows for its partials to be few beside x: batchnorm.py's _split_nhwc). Its threads form
// R = NHWC_THREADS / CB rows of CB columns; each adds every R-th row of the slice in its column, VEC channels at
// once, so consecutive threads read consecutive vectors of a row (and, with fewer than 32 columns, of the rows
// after it). The R rows' sums are then added in shared memory in a fixed tree (deterministic). Sums and shift
// as bn_partial's (forward: the shift is x[n=0, h=0, w=0, c] = x[c]); writes raw[p, c, 0..1], row p of a
// (P, 2C) array, for the folds. The launch bounds keep four blocks on an SM (_split_nhwc counts on it).
extern "C" __global__ void __launch_bounds__(NHWC_THREADS, 4)
bn_partial_nhwc(const T* __restrict__ x, const T* __restrict__ dy, const float* __restrict__ relu,
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
        float shift[VEC], rs[VEC], rt[VEC];
        const bool on = dy && relu;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const long long c = cv * VEC + k;
            shift[k] = dy ? mean[c] : to_f(x[c]);
            rs[k] = on ? relu[c] : 0.f;
            rt[k] = on ? relu[C + c] : 0.f;
        }
        const long long j0 = M * p / P + r, j1 = M * (p + 1) / P, at = cv * VEC;
        if (dy) {
            // a row of dy and x a trip (two loads in flight): with the ReLU's factors held, two rows spilled under
            // the launch bounds and measured slower
#pragma unroll 1
            for (long long j = j0; j < j1; j += R) add_terms<true>(x, dy, on, j * C + at, shift, rs, rt, a, b);
        } else {
            add_rows<PARTIAL_ROWS_FORWARD>(x, j0, j1, R, C, at, shift, a, b);
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
                     long long* count, const W* __restrict__ w, const W* __restrict__ bias, float* __restrict__ mean,
                     float* __restrict__ rstd, float* __restrict__ relu, long long M, long long C, int P, float eps,
                     float factor, int update) {
    pdl_entry();
    double a, b;
    const long long c = fold_columns(raw, C, P, a, b);
    if (c >= 0) finalize_forward_channel(c, C, a, b, x, running_mean, running_var, count, w, bias, mean, rstd, relu,
                                         (double)M, 1, eps, factor, update);
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

// ---------------------------------------------------------------- a tile of channels cached in shared memory
// Where a tile of the channels (COLS vectors of each row: TC = COLS * VEC channels, COLS 4 or 8) over all M rows
// fits the shared memory of one block, or of a thread-block cluster of CLUSTER blocks (sm_90+; batchnorm.py's
// _per_tile), one launch does what the passes and the fold do, as the cached-channel kernels do for an NCHW channel:
// block `rank` of tile t's cluster (blocks t * CLUSTER ...) loads rows [lo, lo + CHUNK) of the tile once (the last
// block fewer), the cluster adds the tile's per-channel sums over distributed shared memory, and each block writes
// its rows once. A thread keeps one vector column (the block is a multiple of COLS threads): its VEC channels' sums
// and factors stay in registers, with no per-vector channel arithmetic.
constexpr int TILE_THREADS = 512;  // the block at most (batchnorm.py's _per_tile)
constexpr int TILE_MAX = 8 * VEC;  // channels of the widest tile: 8 vectors, a 128-byte line of a row

typedef Vec<double, 2> D2;

// The tile's per-channel totals over the cluster of this thread's sums a[k], b[k] (channel k of its column), in
// float64, as the folds add the passes' fp32 partials (a thread's fp32 sums cover a few rows; the rounding of their
// thousands of terms then stays out of the statistics): the lanes of a column added by xor shuffles, then the warps'
// sums in shared memory and the blocks' over distributed shared memory, each in a fixed order, so every block gets
// the same totals (deterministic). Thread j < TC gets channel j's; every thread has then arrived at the cluster's
// barrier (the caller waits there before it exits, so that no block's `mine` goes while another may read it).
__device__ __forceinline__ D2 tile_totals(const float* a, const float* b, int COLS, D2* warp_sums, D2* mine) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, TC = COLS * VEC;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {  // (a channel at a time: two doubles live, not 2 * VEC)
        D2 s = {{a[k], b[k]}};
        for (int off = 16; off >= COLS; off >>= 1) {
            s.v[0] += __shfl_xor_sync(0xffffffffu, s.v[0], off);
            s.v[1] += __shfl_xor_sync(0xffffffffu, s.v[1], off);
        }
        if (lane < COLS) warp_sums[warp * TC + lane * VEC + k] = s;
    }
    __syncthreads();
    D2 t = {};
    const int j = threadIdx.x;
    if (j < TC) {
        for (int q = 0; q < (int)(blockDim.x >> 5); ++q) {
            t.v[0] += warp_sums[q * TC + j].v[0];
            t.v[1] += warp_sums[q * TC + j].v[1];
        }
        mine[j] = t;
    }
    if (CLUSTER > 1) {
        cluster_sync();
        if (j < TC) {
            t = D2{};
            const unsigned addr = (unsigned)__cvta_generic_to_shared(mine + j);
            for (int q = 0; q < CLUSTER; ++q) {
                const D2 u = load_cluster_pair(addr, q);
                t.v[0] += u.v[0];
                t.v[1] += u.v[1];
            }
        }
    }
    cluster_arrive();  // this block has read the others' sums
    return t;
}

// The training forward: statistics (the sums of v and v*v, v = x - x[row 0], as bn_partial_nhwc's, finalized as
// the fold does), the running statistics and the count (block 0 of each cluster; `flags` as bn_channel_forward's), y
// and, with `relu`, the ReLU (and its factors, store_stats).
extern "C" __global__ void CLUSTER_DIMS __launch_bounds__(TILE_THREADS, 2)
bn_tile_forward(const T* __restrict__ x, W* running_mean, W* running_var, long long* count, const W* __restrict__ w,
                const W* __restrict__ b, T* __restrict__ y, float* __restrict__ relu, float* __restrict__ mean,
                float* __restrict__ rstd, long long M, long long C, int COLS, int CHUNK, float eps, float factor,
                int flags) {
    pdl_entry();
    extern __shared__ __align__(16) unsigned char smem_raw[];
    TV* cache = reinterpret_cast<TV*>(smem_raw);
    __shared__ D2 warp_sums[TILE_THREADS / 32 * TILE_MAX];
    __shared__ D2 mine[TILE_MAX];
    __shared__ float fm[TILE_MAX], fs[TILE_MAX], fb[TILE_MAX];
    const unsigned rank = cluster_rank();
    const long long CV = C / VEC, c0 = (long long)(blockIdx.x / CLUSTER) * COLS * VEC;  // the tile's first channel
    const int col = threadIdx.x % COLS, row = threadIdx.x / COLS;
    const long long lo = min(M, (long long)rank * CHUNK), step = (long long)(blockDim.x / COLS) * CV;
    const int n_own = (int)(min(M, lo + CHUNK) - lo) * COLS;  // the block's vectors (CHUNK fits the shared memory)
    const TV* xs = reinterpret_cast<const TV*>(x);
    const long long v0 = (lo + row) * CV + c0 / VEC + col;  // this thread's first vector
    const TV first = xs[c0 / VEC + col];
    float shift[VEC], a[VEC], q[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
        shift[k] = to_f(first.v[k]);
        a[k] = q[k] = 0.f;
    }
    long long v = v0;
#pragma unroll 4  // several loads in flight per thread
    for (int j = threadIdx.x; j < n_own; j += blockDim.x, v += step) {
        const TV xv = xs[v];
        cache[j] = xv;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const float d = to_f(xv.v[k]) - shift[k];
            a[k] += d;
            q[k] += d * d;
        }
    }
    const D2 t = tile_totals(a, q, COLS, warp_sums, mine);
    if ((int)threadIdx.x < COLS * VEC) {
        const int j = threadIdx.x;
        const long long c = c0 + j;
        const ChannelStats st = channel_stats(t.v[0], t.v[1], (double)to_f(x[c]), (double)M, eps);
        fm[j] = (float)st.mean;
        fs[j] = affine_scale(c, st.rstd, w);
        fb[j] = affine_shift(c, b);
        if (rank == 0) {
            store_stats(c, C, (float)st.mean, st.rstd, w, b, mean, rstd, relu);
            if (flags & UPDATE) update_running(c, st, running_mean, running_var, count, (double)M, factor);
        }
    }
    __syncthreads();
    float m[VEC], scale[VEC], bc[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
        m[k] = fm[col * VEC + k];
        scale[k] = fs[col * VEC + k];
        bc[k] = fb[col * VEC + k];
    }
    TV* out = reinterpret_cast<TV*>(y);
    v = v0;
    for (int j = threadIdx.x; j < n_own; j += blockDim.x, v += step)
        out[v] = apply_vector(load_as<TV>(cache + j), m, scale, bc, relu != nullptr && !(flags & FACTORS_ONLY));
    cluster_wait();  // no block exits while another may still read its sums
}

// The backward: the sums of g and g*(x - mean), g = dy where the ReLU (factors `relu`, or null) passed it, else 0 (as
// bn_partial_nhwc's), then dw and db (block 0 of each cluster) and dx = k0*g - k1 - (x - mean)*k2, as the fold and
// bn_backward_dx compute them. Block `rank` caches its rows of g and of x.
extern "C" __global__ void CLUSTER_DIMS __launch_bounds__(TILE_THREADS, 2)
bn_tile_backward(const T* __restrict__ dy, const T* __restrict__ x, const float* __restrict__ relu,
                 const float* __restrict__ mean, const float* __restrict__ rstd, const W* __restrict__ w,
                 T* __restrict__ dx, W* __restrict__ dw, W* __restrict__ db, long long M, long long C, int COLS,
                 int CHUNK, int batch) {
    pdl_entry();
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __shared__ D2 warp_sums[TILE_THREADS / 32 * TILE_MAX];
    __shared__ D2 mine[TILE_MAX];
    __shared__ float fk[3][TILE_MAX];
    const unsigned rank = cluster_rank();
    const long long CV = C / VEC, c0 = (long long)(blockIdx.x / CLUSTER) * COLS * VEC;
    const int col = threadIdx.x % COLS, row = threadIdx.x / COLS;
    const long long lo = min(M, (long long)rank * CHUNK), step = (long long)(blockDim.x / COLS) * CV;
    const int n_own = (int)(min(M, lo + CHUNK) - lo) * COLS;
    TV* gc = reinterpret_cast<TV*>(smem_raw);
    TV* xc = gc + (long long)CHUNK * COLS;
    const TV* g = reinterpret_cast<const TV*>(dy);
    const TV* xs = reinterpret_cast<const TV*>(x);
    const long long v0 = (lo + row) * CV + c0 / VEC + col;
    const bool on = relu != nullptr;
    float m[VEC], a[VEC], p[VEC], rs[VEC], rt[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
        const long long c = c0 + col * VEC + k;
        m[k] = mean[c];
        rs[k] = on ? relu[c] : 0.f;
        rt[k] = on ? relu[C + c] : 0.f;
        a[k] = p[k] = 0.f;
    }
    long long v = v0;
#pragma unroll 2
    for (int j = threadIdx.x; j < n_own; j += blockDim.x, v += step) {
        TV gv = g[v];
        const TV xv = xs[v];
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const float d = to_f(xv.v[k]) - m[k];
            if (on && !relu_passes(affine(d, rs[k], rt[k]))) gv.v[k] = from_f<T>(0.f);  // (cached so)
            const float gk = to_f(gv.v[k]);
            a[k] += gk;
            p[k] += gk * d;
        }
        gc[j] = gv;
        xc[j] = xv;
    }
    const D2 t = tile_totals(a, p, COLS, warp_sums, mine);
    if ((int)threadIdx.x < COLS * VEC) {
        const int j = threadIdx.x;
        const long long c = c0 + j;
        const double r = rstd[c];
        if (rank == 0) {
            if (dw) dw[c] = from_acc<W>(t.v[1] * r);
            if (db) db[c] = from_acc<W>(t.v[0]);
        }
        const DxCoef k = dx_coefficients(t.v[0], t.v[1], r, w ? to_acc<double>(w[c]) : 1.0, (double)M, batch);
        fk[0][j] = k.k0;
        fk[1][j] = k.k1;
        fk[2][j] = k.k2;
    }
    __syncthreads();
    if (dx) {
        float k0[VEC], k1[VEC], k2[VEC];
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            k0[k] = fk[0][col * VEC + k];
            k1[k] = fk[1][col * VEC + k];
            k2[k] = fk[2][col * VEC + k];
        }
        TV* out = reinterpret_cast<TV*>(dx);
        v = v0;
        for (int j = threadIdx.x; j < n_own; j += blockDim.x, v += step) {
            const TV gv = load_as<TV>(gc + j), xv = load_as<TV>(xc + j);
            TV o;
#pragma unroll
            for (int k = 0; k < VEC; ++k)
                o.v[k] = from_f<T>(k0[k] * to_f(gv.v[k]) - k1[k] - (to_f(xv.v[k]) - m[k]) * k2[k]);
            out[v] = o;
        }
    }
    cluster_wait();  // no block exits while another may still read its sums
}
