// 2-D max and average pooling over NCHW planes (max pooling, and average pooling whose windows tile the input, also
// channels-last), forward and backward. One thread per output
// (forward) or per input element (backward: it gathers from the windows that contain it, so the
// result is deterministic with no atomics). Max pooling's window taps are dh, dw apart (dilation); it
// keeps, for its backward, the argmax's position inside its window (tap i*kw + j, padding included) in
// IDX, the smallest integer type that holds kh*kw positions (unsigned char up to 256: 1 byte per output,
// not 4); the backward decodes it with the window's origin and the dilation. Padded positions never win
// a max; average pooling divides by the window clipped to the padded input (count_include_pad) or to the
// input itself, or by divisor_override.
//
// nvrtc-check: -DPOOL_T=float -DPOOL_ACC=float -DPOOL_IDX_BYTES=1
// nvrtc-check: -DPOOL_T=__half -DPOOL_ACC=float -DPOOL_IDX_BYTES=1
// nvrtc-check: -DPOOL_T=__nv_bfloat16 -DPOOL_ACC=float -DPOOL_IDX_BYTES=1
// nvrtc-check: -DPOOL_T=double -DPOOL_ACC=double -DPOOL_IDX_BYTES=1
// nvrtc-check: -DPOOL_T=float -DPOOL_ACC=float -DPOOL_IDX_BYTES=2
// nvrtc-check: -DPOOL_T=__half -DPOOL_ACC=float -DPOOL_IDX_BYTES=4
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef POOL_T
#define POOL_T float
#endif
#ifndef POOL_ACC
#define POOL_ACC float
#endif
#ifndef POOL_IDX_BYTES
#define POOL_IDX_BYTES 1
#endif
typedef POOL_T T;
typedef POOL_ACC A;
#if POOL_IDX_BYTES == 1
typedef unsigned char IDX;  // windows of up to 256 positions
#elif POOL_IDX_BYTES == 2
typedef short IDX;
#else
typedef int IDX;
#endif

#include "dtypes.cuh"  // to_acc / from_acc

// The index math (a division and a remainder per coordinate) runs in I: 32-bit whenever the
// element counts of input and output fit, since 64-bit division costs several times more instructions (it made
// the MNIST CNN's max-pool backward compute-bound; bench/mnist.py runs it).
#define GRID_LOOP(i, total) \
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < (I)(total); i += (I)gridDim.x * blockDim.x)
#define DISPATCH(body, total, ...) \
    if ((total) < 2147483647LL - (long long)gridDim.x * blockDim.x) body<int>(__VA_ARGS__); \
    else body<long long>(__VA_ARGS__)

// Max pooling in either layout (nhwc: x's memory (N, H, W, C), y's, idx's, dy's and dx's likewise; else NCHW).
// window_plane gives the flat index of input (h, w) = (0, 0) in the plane of output o (o in the output's memory
// order) and o's (p, q); input (h, w) then lies at that index + (h*W + w) * tap, tap = C channels-last, else 1.
// Channels-last, neighbouring threads take neighbouring channels: every load and store is coalesced, with no
// transposes around the kernels.
template <bool NHWC, typename I>
__device__ __forceinline__ I window_plane(I o, int C, int H, int W, int P, int Q, int& p, int& q) {
    if (NHWC) {
        const int c = (int)(o % C);
        const I t = o / C;
        q = (int)(t % Q);
        const I u = t / Q;
        p = (int)(u % P);
        return u / P * H * W * C + c;
    }
    q = (int)(o % Q);
    const I t = o / Q;
    p = (int)(t % P);
    return t / P * H * W;
}

// A tap's value v at window position pos against the window's max so far: NaN wins, then the larger, the first of
// equals (PyTorch's order); bi < 0 until the first tap.
__device__ __forceinline__ void take_max(A v, int pos, A& best, int& bi) {
    if (v > best || isnan(v) || bi < 0) { best = v; bi = pos; }
}

// The windows lo <= p < hi (of P along a dimension) whose extent e, dilation included, covers input position h:
// the ones the backward gathers from.
__device__ __forceinline__ void covering(int h, int pad, int e, int stride, int P, int& lo, int& hi) {
    lo = (h + pad < e) ? 0 : (h + pad - e) / stride + 1;
    hi = min((h + pad) / stride + 1, P);
}

// Window p's tap index along a dimension that lands on input position h, or -1 where h falls between its taps
// (dilation d): the offset from the window's origin p*stride - pad, over d.
__device__ __forceinline__ int tap_at(int h, int p, int stride, int pad, int d) {
    const int i = h - (p * stride - pad);
    if (d > 1) return i % d ? -1 : i / d;
    return i;
}

template <bool NHWC, typename I>
__device__ __forceinline__ void maxpool_fwd_body(const T* __restrict__ x, T* __restrict__ y, IDX* __restrict__ idx,
                                                 long long NC, int C, int H, int W, int P, int Q, int kh, int kw,
                                                 int sh, int sw, int ph, int pw, int dh, int dw, int want_idx) {
    const I tap = NHWC ? C : 1;
    GRID_LOOP(o, NC * P * Q) {
        int p, q;
        const T* plane = x + window_plane<NHWC, I>(o, C, H, W, P, Q, p, q);
        const int h0 = p * sh - ph, w0 = q * sw - pw;
        A best = (A)__int_as_float(0xff800000);
        int bi = -1;
        for (int i = 0; i < kh; ++i) {
            const int h = h0 + i * dh;
            if (h < 0 || h >= H) continue;
            for (int j = 0; j < kw; ++j) {
                const int w = w0 + j * dw;
                if (w < 0 || w >= W) continue;
                const A v = to_acc<A>(plane[((I)h * W + w) * tap]);
                take_max(v, i * kw + j, best, bi);
            }
        }
        y[o] = from_acc<T>(best);
        if (want_idx) idx[o] = (IDX)bi;
    }
}

template <typename I>
__device__ __forceinline__ void maxpool_fwd_layout(const T* __restrict__ x, T* __restrict__ y, IDX* __restrict__ idx,
                                                   long long NC, int C, int H, int W, int P, int Q, int kh, int kw,
                                                   int sh, int sw, int ph, int pw, int dh, int dw, int want_idx,
                                                   int nhwc) {
    if (nhwc) maxpool_fwd_body<true, I>(x, y, idx, NC, C, H, W, P, Q, kh, kw, sh, sw, ph, pw, dh, dw, want_idx);
    else maxpool_fwd_body<false, I>(x, y, idx, NC, C, H, W, P, Q, kh, kw, sh, sw, ph, pw, dh, dw, want_idx);
}

extern "C" __global__ void maxpool_fwd(const T* __restrict__ x, T* __restrict__ y, IDX* __restrict__ idx,
                                       long long NC, int C, int H, int W, int P, int Q, int kh, int kw, int sh, int sw,
                                       int ph, int pw, int dh, int dw, int want_idx, int nhwc) {
    DISPATCH(maxpool_fwd_layout, NC * max((long long)H * W, (long long)P * Q), x, y, idx, NC, C, H, W, P, Q, kh, kw,
             sh, sw, ph, pw, dh, dw, want_idx, nhwc);
}

// one thread per input element e (in its memory order) gathers from the windows that contain it
template <bool NHWC, typename I>
__device__ __forceinline__ void maxpool_bwd_body(const T* __restrict__ dy, const IDX* __restrict__ idx,
                                                 T* __restrict__ dx, long long NC, int C, int H, int W, int P, int Q,
                                                 int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw) {
    const int eh = (kh - 1) * dh + 1, ew = (kw - 1) * dw + 1;  // the windows' extent
    const I tap = NHWC ? C : 1;
    GRID_LOOP(e, NC * H * W) {
        int h, w;
        const I plane = window_plane<NHWC, I>(e, C, P, Q, H, W, h, w);  // (e's plane of the output: P x Q)
        // the windows whose extent covers (h, w); with dilation, only those with a tap on it
        int p0, p1, q0, q1;
        covering(h, ph, eh, sh, P, p0, p1);
        covering(w, pw, ew, sw, Q, q0, q1);
        A s = 0;
        for (int p = p0; p < p1; ++p) {
            const int i = tap_at(h, p, sh, ph, dh);
            if (i < 0) continue;
            for (int q = q0; q < q1; ++q) {
                const int j = tap_at(w, q, sw, pw, dw);
                if (j < 0) continue;
                const I o = plane + ((I)p * Q + q) * tap;
                if ((int)idx[o] == i * kw + j) s += to_acc<A>(dy[o]);
            }
        }
        dx[e] = from_acc<T>(s);
    }
}

template <typename I>
__device__ __forceinline__ void maxpool_bwd_layout(const T* __restrict__ dy, const IDX* __restrict__ idx,
                                                   T* __restrict__ dx, long long NC, int C, int H, int W, int P, int Q,
                                                   int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw,
                                                   int nhwc) {
    if (nhwc) maxpool_bwd_body<true, I>(dy, idx, dx, NC, C, H, W, P, Q, kh, kw, sh, sw, ph, pw, dh, dw);
    else maxpool_bwd_body<false, I>(dy, idx, dx, NC, C, H, W, P, Q, kh, kw, sh, sw, ph, pw, dh, dw);
}

extern "C" __global__ void maxpool_bwd(const T* __restrict__ dy, const IDX* __restrict__ idx, T* __restrict__ dx,
                                       long long NC, int C, int H, int W, int P, int Q, int kh, int kw, int sh, int sw,
                                       int ph, int pw, int dh, int dw, int nhwc) {
    DISPATCH(maxpool_bwd_layout, NC * max((long long)H * W, (long long)P * Q), dy, idx, dx, NC, C, H, W, P, Q, kh, kw,
             sh, sw, ph, pw, dh, dw, nhwc);
}

// the divisor of window (p, q): divisor_override where given (nonzero), else its positions (padding included or not)
__device__ __forceinline__ int pool_count(int p, int q, int H, int W, int kh, int kw, int sh, int sw, int ph, int pw,
                                          int include_pad, int divisor) {
    if (divisor) return divisor;
    int h0 = p * sh - ph, w0 = q * sw - pw;
    int h1 = min(h0 + kh, H + ph), w1 = min(w0 + kw, W + pw);
    if (include_pad) return (h1 - h0) * (w1 - w0);
    h0 = max(h0, 0); w0 = max(w0, 0); h1 = min(h1, H); w1 = min(w1, W);
    return (h1 - h0) * (w1 - w0);
}

// Channels-last max pooling with V = 16 / sizeof(T) channels a thread (C % V == 0, 16-byte aligned arrays): one
// 16-byte load a tap, one index computation for V outputs. The scalar kernels above spend most of their
// instructions on the index math (divisions by runtime sizes) and so run far from the copy bandwidth; these keep
// their comparisons, in their order, per channel: the same bits and positions.
constexpr int V = 16 / sizeof(T);
struct __align__(16) Vec { T v[V]; };
struct __align__(V * sizeof(IDX)) IdxVec { IDX v[V]; };

// The vector kernels' V running maxima (take_max), and their store: the maxima and positions of vector o.
__device__ __forceinline__ void start_max(A* best, int* bi) {
#pragma unroll
    for (int k = 0; k < V; ++k) { best[k] = (A)__int_as_float(0xff800000); bi[k] = -1; }
}

template <typename I>
__device__ __forceinline__ void store_max(const A* best, const int* bi, T* __restrict__ y, IDX* __restrict__ idx, I o,
                                          int want_idx) {
    Vec out;
    IdxVec pos;
#pragma unroll
    for (int k = 0; k < V; ++k) { out.v[k] = from_acc<T>(best[k]); pos.v[k] = (IDX)bi[k]; }
    reinterpret_cast<Vec*>(y)[o] = out;
    if (want_idx) reinterpret_cast<IdxVec*>(idx)[o] = pos;
}

template <typename I>
__device__ __forceinline__ void maxpool_nhwc_fwd_body(const T* __restrict__ x, T* __restrict__ y,
                                                      IDX* __restrict__ idx, long long N, int C, int H, int W, int P,
                                                      int Q, int kh, int kw, int sh, int sw, int ph, int pw, int dh,
                                                      int dw, int want_idx) {
    const int CV = C / V;
    GRID_LOOP(o, N * P * Q * CV) {  // o: the output's V-channel vector, in memory order
        const int cv = (int)(o % CV);
        const I t = o / CV;
        const int q = (int)(t % Q);
        const I u = t / Q;
        const int p = (int)(u % P);
        const T* plane = x + u / P * H * W * C + cv * V;
        const int h0 = p * sh - ph, w0 = q * sw - pw;
        A best[V];
        int bi[V];
        start_max(best, bi);
        for (int i = 0; i < kh; ++i) {
            const int h = h0 + i * dh;
            if (h < 0 || h >= H) continue;
            for (int j = 0; j < kw; ++j) {
                const int w = w0 + j * dw;
                if (w < 0 || w >= W) continue;
                const Vec in = *reinterpret_cast<const Vec*>(plane + ((I)h * W + w) * C);
#pragma unroll
                for (int k = 0; k < V; ++k) {
                    const A v = to_acc<A>(in.v[k]);
                    take_max(v, i * kw + j, best[k], bi[k]);
                }
            }
        }
        store_max(best, bi, y, idx, o, want_idx);
    }
}

extern "C" __global__ void maxpool_nhwc_fwd(const T* __restrict__ x, T* __restrict__ y, IDX* __restrict__ idx,
                                            long long N, int C, int H, int W, int P, int Q, int kh, int kw, int sh,
                                            int sw, int ph, int pw, int dh, int dw, int want_idx) {
    DISPATCH(maxpool_nhwc_fwd_body, N * C * max((long long)H * W, (long long)P * Q), x, y, idx, N, C, H, W, P, Q, kh,
             kw, sh, sw, ph, pw, dh, dw, want_idx);
}

template <typename I>
__device__ __forceinline__ void maxpool_nhwc_bwd_body(const T* __restrict__ dy, const IDX* __restrict__ idx,
                                                      T* __restrict__ dx, long long N, int C, int H, int W, int P,
                                                      int Q, int kh, int kw, int sh, int sw, int ph, int pw, int dh,
                                                      int dw) {
    const int eh = (kh - 1) * dh + 1, ew = (kw - 1) * dw + 1;
    const int CV = C / V;
    GRID_LOOP(e, N * H * W * CV) {  // e: the input's V-channel vector, in memory order
        const int cv = (int)(e % CV);
        const I t = e / CV;
        const int w = (int)(t % W);
        const I u = t / W;
        const int h = (int)(u % H);
        const I plane = u / H * P * Q * C + cv * V;  // (dy's and idx's (0, 0) for these channels)
        int p0, p1, q0, q1;
        covering(h, ph, eh, sh, P, p0, p1);
        covering(w, pw, ew, sw, Q, q0, q1);
        A s[V];
#pragma unroll
        for (int k = 0; k < V; ++k) s[k] = 0;
        for (int p = p0; p < p1; ++p) {
            const int i = tap_at(h, p, sh, ph, dh);
            if (i < 0) continue;
            for (int q = q0; q < q1; ++q) {
                const int j = tap_at(w, q, sw, pw, dw);
                if (j < 0) continue;
                const I o = plane + ((I)p * Q + q) * C;
                const IdxVec pos = *reinterpret_cast<const IdxVec*>(idx + o);
                const Vec g = *reinterpret_cast<const Vec*>(dy + o);
#pragma unroll
                for (int k = 0; k < V; ++k)
                    if ((int)pos.v[k] == i * kw + j) s[k] += to_acc<A>(g.v[k]);
            }
        }
        Vec out;
#pragma unroll
        for (int k = 0; k < V; ++k) out.v[k] = from_acc<T>(s[k]);
        reinterpret_cast<Vec*>(dx)[e] = out;
    }
}

extern "C" __global__ void maxpool_nhwc_bwd(const T* __restrict__ dy, const IDX* __restrict__ idx,
                                            T* __restrict__ dx, long long N, int C, int H, int W, int P, int Q, int kh,
                                            int kw, int sh, int sw, int ph, int pw, int dh, int dw) {
    DISPATCH(maxpool_nhwc_bwd_body, N * C * max((long long)H * W, (long long)P * Q), dy, idx, dx, N, C, H, W, P, Q,
             kh, kw, sh, sw, ph, pw, dh, dw);
}

// C-contiguous max-pool forward with V neighbouring outputs of a row a thread (Q % V == 0): one index computation
// and one 16-byte store for V outputs, whose windows overlap in the input rows they read (cached). Each output
// compares its window's taps in maxpool_fwd's order: the same values and positions.
template <typename I>
__device__ __forceinline__ void maxpool_rows_fwd_body(const T* __restrict__ x, T* __restrict__ y,
                                                      IDX* __restrict__ idx, long long NC, int H, int W, int P, int Q,
                                                      int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw,
                                                      int want_idx) {
    const int QV = Q / V;
    GRID_LOOP(o, NC * P * QV) {  // o: the output's V-element row vector, in memory order
        const int q0 = (int)(o % QV) * V;
        const I t = o / QV;
        const int p = (int)(t % P);
        const T* plane = x + t / P * H * W;
        const int h0 = p * sh - ph;
        A best[V];
        int bi[V];
        start_max(best, bi);
        for (int i = 0; i < kh; ++i) {
            const int h = h0 + i * dh;
            if (h < 0 || h >= H) continue;
            const T* row = plane + (I)h * W;
            for (int j = 0; j < kw; ++j) {
#pragma unroll
                for (int k = 0; k < V; ++k) {
                    const int w = (q0 + k) * sw - pw + j * dw;
                    if (w < 0 || w >= W) continue;
                    const A v = to_acc<A>(row[w]);
                    take_max(v, i * kw + j, best[k], bi[k]);
                }
            }
        }
        store_max(best, bi, y, idx, o, want_idx);
    }
}

extern "C" __global__ void maxpool_rows_fwd(const T* __restrict__ x, T* __restrict__ y, IDX* __restrict__ idx,
                                            long long NC, int H, int W, int P, int Q, int kh, int kw, int sh, int sw,
                                            int ph, int pw, int dh, int dw, int want_idx) {
    DISPATCH(maxpool_rows_fwd_body, NC * max((long long)H * W, (long long)P * Q), x, y, idx, NC, H, W, P, Q, kh, kw,
             sh, sw, ph, pw, dh, dw, want_idx);
}

// Its backward: V neighbouring inputs of a row a thread (W % V == 0): one index computation
// and one 16-byte store for V inputs, and the windows that cover them (a few of one dy row) read once for all V.
// Each input adds its windows' gradients in maxpool_bwd's order (p, then q, ascending): the same bits.
template <typename I>
__device__ __forceinline__ void maxpool_rows_bwd_body(const T* __restrict__ dy, const IDX* __restrict__ idx,
                                                      T* __restrict__ dx, long long NC, int H, int W, int P, int Q,
                                                      int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw) {
    const int eh = (kh - 1) * dh + 1, ew = (kw - 1) * dw + 1;
    const int WV = W / V;
    GRID_LOOP(e, NC * H * WV) {  // e: the input's V-element row vector, in memory order
        const int w0 = (int)(e % WV) * V;
        const I t = e / WV;
        const int h = (int)(t % H);
        const I plane = t / H * P * Q;
        int p0, p1, q0, q1, unused;
        covering(h, ph, eh, sh, P, p0, p1);
        covering(w0, pw, ew, sw, Q, q0, unused);  // the windows covering any of columns w0 .. w0 + V - 1
        covering(w0 + V - 1, pw, ew, sw, Q, unused, q1);
        A s[V];
#pragma unroll
        for (int k = 0; k < V; ++k) s[k] = 0;
        for (int p = p0; p < p1; ++p) {
            const int i = tap_at(h, p, sh, ph, dh);
            if (i < 0) continue;
            for (int q = q0; q < q1; ++q) {
                const I o = plane + (I)p * Q + q;
                const int j = (int)idx[o] - i * kw;  // the window's argmax tap column, if the argmax is on row h
                if (j < 0 || j >= kw) continue;
                const int col = q * sw - pw + j * dw - w0;  // its input column, from this thread's first
                const A g = to_acc<A>(dy[o]);
#pragma unroll
                for (int k = 0; k < V; ++k)
                    if (col == k) s[k] += g;
            }
        }
        Vec out;
#pragma unroll
        for (int k = 0; k < V; ++k) out.v[k] = from_acc<T>(s[k]);
        reinterpret_cast<Vec*>(dx)[e] = out;
    }
}

extern "C" __global__ void maxpool_rows_bwd(const T* __restrict__ dy, const IDX* __restrict__ idx, T* __restrict__ dx,
                                            long long NC, int H, int W, int P, int Q, int kh, int kw, int sh, int sw,
                                            int ph, int pw, int dh, int dw) {
    DISPATCH(maxpool_rows_bwd_body, NC * max((long long)H * W, (long long)P * Q), dy, idx, dx, NC, H, W, P, Q, kh,
             kw, sh, sw, ph, pw, dh, dw);
}

// maxpool_bwd_tiled's channels-last vector form: a thread writes the V channels of its window's kh*kw inputs
template <typename I>
__device__ __forceinline__ void maxpool_nhwc_bwd_tiled_body(const T* __restrict__ dy, const IDX* __restrict__ idx,
                                                            T* __restrict__ dx, long long N, int C, int H, int W,
                                                            int P, int Q, int kh, int kw) {
    const int CV = C / V;
    GRID_LOOP(o, N * P * Q * CV) {
        const int cv = (int)(o % CV);
        const I t = o / CV;
        const int q = (int)(t % Q);
        const I u = t / Q;
        const int p = (int)(u % P);
        T* plane = dx + u / P * H * W * C + cv * V;
        const IdxVec pos = reinterpret_cast<const IdxVec*>(idx)[o];
        const Vec g = reinterpret_cast<const Vec*>(dy)[o];
        for (int i = 0; i < kh; ++i)
            for (int j = 0; j < kw; ++j) {
                Vec out;
#pragma unroll
                for (int k = 0; k < V; ++k) out.v[k] = (int)pos.v[k] == i * kw + j ? g.v[k] : from_acc<T>((A)0);
                *reinterpret_cast<Vec*>(plane + ((I)(p * kh + i) * W + q * kw + j) * C) = out;
            }
    }
}

extern "C" __global__ void maxpool_nhwc_bwd_tiled(const T* __restrict__ dy, const IDX* __restrict__ idx,
                                                  T* __restrict__ dx, long long N, int C, int H, int W, int P, int Q,
                                                  int kh, int kw) {
    DISPATCH(maxpool_nhwc_bwd_tiled_body, N * C * max((long long)H * W, (long long)P * Q), dy, idx, dx, N, C, H, W, P,
             Q, kh, kw);
}

// Max-pool backward when the windows tile the input exactly (kernel == stride, no padding,
// H = P*kh, W = Q*kw: every input in exactly one window, as in the usual 2x2 pooling): one
// thread per window writes its whole window (the gradient at the argmax, zeros elsewhere), so
// no thread searches for the windows that contain it.
template <bool NHWC, typename I>
__device__ __forceinline__ void maxpool_bwd_tiled_body(const T* __restrict__ dy, const IDX* __restrict__ idx,
                                                       T* __restrict__ dx, long long NC, int C, int H, int W, int P,
                                                       int Q, int kh, int kw) {
    const I tap = NHWC ? C : 1;
    GRID_LOOP(o, NC * P * Q) {
        int p, q;
        T* plane = dx + window_plane<NHWC, I>(o, C, H, W, P, Q, p, q);
        const int arg = (int)idx[o];  // position in the window, i*kw + j
        const T g = dy[o];
        for (int i = 0; i < kh; ++i)
            for (int j = 0; j < kw; ++j)
                plane[((I)(p * kh + i) * W + q * kw + j) * tap] = i * kw + j == arg ? g : from_acc<T>((A)0);
    }
}

template <typename I>
__device__ __forceinline__ void maxpool_bwd_tiled_layout(const T* __restrict__ dy, const IDX* __restrict__ idx,
                                                         T* __restrict__ dx, long long NC, int C, int H, int W, int P,
                                                         int Q, int kh, int kw, int nhwc) {
    if (nhwc) maxpool_bwd_tiled_body<true, I>(dy, idx, dx, NC, C, H, W, P, Q, kh, kw);
    else maxpool_bwd_tiled_body<false, I>(dy, idx, dx, NC, C, H, W, P, Q, kh, kw);
}

extern "C" __global__ void maxpool_bwd_tiled(const T* __restrict__ dy, const IDX* __restrict__ idx,
                                             T* __restrict__ dx, long long NC, int C, int H, int W, int P, int Q,
                                             int kh, int kw, int nhwc) {
    DISPATCH(maxpool_bwd_tiled_layout, NC * max((long long)H * W, (long long)P * Q), dy, idx, dx, NC, C, H, W, P, Q,
             kh, kw, nhwc);
}

template <typename I>
__device__ __forceinline__ void avgpool_fwd_body(const T* __restrict__ x, T* __restrict__ y, long long NC, int H, int W,
                                       int P, int Q, int kh, int kw, int sh, int sw, int ph, int pw, int include_pad,
                                       int divisor) {
    GRID_LOOP(o, NC * P * Q) {
        const int q = (int)(o % Q);
        const int p = (int)((o / Q) % P);
        const I nc = o / ((I)P * Q);
        const T* plane = x + nc * H * W;
        const int h0 = p * sh - ph, w0 = q * sw - pw;
        A s = 0;
        for (int h = max(h0, 0); h < min(h0 + kh, H); ++h)
            for (int w = max(w0, 0); w < min(w0 + kw, W); ++w) s += to_acc<A>(plane[h * W + w]);
        const int cnt = pool_count(p, q, H, W, kh, kw, sh, sw, ph, pw, include_pad, divisor);
        y[o] = from_acc<T>(cnt != 0 ? s / (A)cnt : (A)__int_as_float(0x7fc00000));
    }
}

extern "C" __global__ void avgpool_fwd(const T* __restrict__ x, T* __restrict__ y, long long NC, int H, int W,
                                       int P, int Q, int kh, int kw, int sh, int sw, int ph, int pw, int include_pad,
                                       int divisor) {
    DISPATCH(avgpool_fwd_body, NC * max((long long)H * W, (long long)P * Q), x, y, NC, H, W, P, Q, kh, kw, sh, sw,
             ph, pw, include_pad, divisor);
}

template <typename I>
__device__ __forceinline__ void avgpool_bwd_body(const T* __restrict__ dy, T* __restrict__ dx, long long NC, int H, int W,
                                       int P, int Q, int kh, int kw, int sh, int sw, int ph, int pw, int include_pad,
                                       int divisor) {
    GRID_LOOP(e, NC * H * W) {
        const int w = (int)(e % W);
        const int h = (int)((e / W) % H);
        const I nc = e / ((I)H * W);
        int p0, p1, q0, q1;
        covering(h, ph, kh, sh, P, p0, p1);
        covering(w, pw, kw, sw, Q, q0, q1);
        A s = 0;
        for (int p = p0; p < p1; ++p)
            for (int q = q0; q < q1; ++q) {
                const int cnt = pool_count(p, q, H, W, kh, kw, sh, sw, ph, pw, include_pad, divisor);
                s += to_acc<A>(dy[(nc * P + p) * Q + q]) / (A)cnt;
            }
        dx[e] = from_acc<T>(s);
    }
}

extern "C" __global__ void avgpool_bwd(const T* __restrict__ dy, T* __restrict__ dx, long long NC, int H, int W,
                                       int P, int Q, int kh, int kw, int sh, int sw, int ph, int pw, int include_pad,
                                       int divisor) {
    DISPATCH(avgpool_bwd_body, NC * max((long long)H * W, (long long)P * Q), dy, dx, NC, H, W, P, Q, kh, kw, sh, sw,
             ph, pw, include_pad, divisor);
}

// Average pooling whose windows tile the input exactly (kernel == stride, no padding, H = P*kh, W = Q*kw: global
// pooling among them), in either layout: NHWC (channels-last, x's memory (N, H, W, C) and y's (N, P, Q, C)) or
// NCHW. The forward sums a window in avgpool_fwd's order (rows, then columns) and divides as it does, so both
// layouts give its bits; the backward's thread takes a window (one output) and writes its kh*kw inputs, each its
// output's gradient over the divisor (every input lies in one window): no per-element index math, which bounded
// avgpool_bwd's instructions. cnt: divisor_override, or kh*kw.
template <bool NHWC, typename I>
__device__ __forceinline__ I tile_origin(I o, int C, int H, int W, int P, int Q, int kh, int kw) {
    // the flat index of window o's first input (o in the output's memory order)
    int p, q;
    const I plane = window_plane<NHWC, I>(o, C, H, W, P, Q, p, q);
    return plane + ((I)p * kh * W + (I)q * kw) * (NHWC ? C : 1);
}

template <typename I>
__device__ __forceinline__ void avgpool_tiled_fwd_body(const T* __restrict__ x, T* __restrict__ y, long long NC, int C,
                                                       int H, int W, int P, int Q, int kh, int kw, int cnt, int nhwc) {
    const I tap = nhwc ? C : 1;  // the distance of neighbouring columns in memory
    GRID_LOOP(o, NC * P * Q) {
        const I at = nhwc ? tile_origin<true, I>(o, C, H, W, P, Q, kh, kw) : tile_origin<false, I>(o, C, H, W, P, Q,
                                                                                                  kh, kw);
        A s = 0;
        for (int i = 0; i < kh; ++i)
            for (int j = 0; j < kw; ++j) s += to_acc<A>(x[at + ((I)i * W + j) * tap]);
        y[o] = from_acc<T>(s / (A)cnt);
    }
}

extern "C" __global__ void avgpool_tiled_fwd(const T* __restrict__ x, T* __restrict__ y, long long NC, int C, int H,
                                             int W, int P, int Q, int kh, int kw, int cnt, int nhwc) {
    DISPATCH(avgpool_tiled_fwd_body, NC * (long long)H * W, x, y, NC, C, H, W, P, Q, kh, kw, cnt, nhwc);
}

template <typename I>
__device__ __forceinline__ void avgpool_tiled_bwd_body(const T* __restrict__ dy, T* __restrict__ dx, long long NC,
                                                       int C, int H, int W, int P, int Q, int kh, int kw, int cnt,
                                                       int nhwc) {
    const I tap = nhwc ? C : 1;
    GRID_LOOP(o, NC * P * Q) {
        const I at = nhwc ? tile_origin<true, I>(o, C, H, W, P, Q, kh, kw) : tile_origin<false, I>(o, C, H, W, P, Q,
                                                                                                  kh, kw);
        A s = 0;  // (0 + g, as avgpool_bwd's sum over the one window: -0 becomes +0 there too)
        s += to_acc<A>(dy[o]) / (A)cnt;
        const T g = from_acc<T>(s);
        for (int i = 0; i < kh; ++i)
            for (int j = 0; j < kw; ++j) dx[at + ((I)i * W + j) * tap] = g;
    }
}

extern "C" __global__ void avgpool_tiled_bwd(const T* __restrict__ dy, T* __restrict__ dx, long long NC, int C, int H,
                                             int W, int P, int Q, int kh, int kw, int cnt, int nhwc) {
    DISPATCH(avgpool_tiled_bwd_body, NC * (long long)H * W, dy, dx, NC, C, H, W, P, Q, kh, kw, cnt, nhwc);
}
