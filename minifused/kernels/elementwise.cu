// ReLU and GELU (both forms), forward and backward; the other activations (activation.cuh's
// act_value / act_grad / act_keep_value), forward and backward; ReLU that keeps a bit-packed mask for its
// backward, and the backward of any op whose gradient is "grad * scale where a mask bit is set,
// else 0" (ReLU: scale 1; dropout: scale 1 / (1 - p)); the same-shape add of two arrays. Every
// kernel loops over the C-order flat array (grid-stride). The activations compute in float for
// every T (float64 included, as they always have); the mask kernels and the add in S.
//
// Mask layout (shared with the NumPy reference in elementwise.py and with dropout.cu): uint32 word
// w holds elements 32w .. 32w+31 of the C-order flat array, element 32w+j in bit j; the bits past
// the last element of the last word are 0.
//
// The mask kernels, relu_fwd and the add are memory-bound, where one element per thread leaves much
// of the bandwidth unused (most of it on 16-bit tensors): each thread moves a chunk of 16 bytes
// (V elements) in one vector access when every pointer is 16-byte aligned, and element by element
// otherwise (the last, partial chunk; a view that starts mid-vector).
//
// relu_fwd and relu_fwd_mask may run in place (y == x): every chunk is read whole and then written
// by one thread, so x and y carry no __restrict__.
//
// nvrtc-check: -DEW_T=float -DEW_S=float
// nvrtc-check: -DEW_T=__half -DEW_S=float
// nvrtc-check: -DEW_T=__nv_bfloat16 -DEW_S=float
// nvrtc-check: -DEW_T=double -DEW_S=double
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef EW_T
#define EW_T float
#endif
#ifndef EW_S
#define EW_S float
#endif
typedef EW_T T;
typedef EW_S S;

#include "dtypes.cuh"  // to_acc / from_acc
#include "activation.cuh"  // gelu_erf, gelu_tanh and their gradients
#include "vec.cuh"  // Vec, load_as, store_as

#define GRID_LOOP(i, n) \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)

// gelu_fwd_* may run in place (y == x): each element is read, then written, by one thread.
extern "C" __global__ void gelu_fwd_erf(const T* x, T* y, long long n) {
    GRID_LOOP(i, n) y[i] = from_acc<T>(gelu_erf(to_acc<float>(x[i])));
}

extern "C" __global__ void gelu_fwd_tanh(const T* x, T* y, long long n) {
    GRID_LOOP(i, n) y[i] = from_acc<T>(gelu_tanh(to_acc<float>(x[i])));
}

extern "C" __global__ void gelu_bwd_erf(const T* __restrict__ g, const T* __restrict__ x, T* __restrict__ dx,
                                        long long n) {
    GRID_LOOP(i, n) dx[i] = from_acc<T>(to_acc<float>(g[i]) * gelu_erf_grad(to_acc<float>(x[i])));
}

extern "C" __global__ void gelu_bwd_tanh(const T* __restrict__ g, const T* __restrict__ x, T* __restrict__ dx,
                                         long long n) {
    GRID_LOOP(i, n) dx[i] = from_acc<T>(to_acc<float>(g[i]) * gelu_tanh_grad(to_acc<float>(x[i])));
}

// The activations of activation.cuh's act_value / act_grad (kind: ActKind), and the piecewise ones that
// keep a bool per element (act_fwd_keep, kind: KeepKind; keep may be null: nothing recorded) with the
// backward of them all, keep_bwd: dx = g * pass where kept, else g * cut (cut_multiplies) or 0 (selected,
// not multiplied, so an inf or NaN gradient stays out where the activation cuts it). The forwards may run
// in place (y == x).
extern "C" __global__ void act_fwd(const T* x, T* y, long long n, int kind, float a, float b, float c) {
    GRID_LOOP(i, n) y[i] = from_acc<T>(act_value(kind, to_acc<float>(x[i]), a, b, c));
}

extern "C" __global__ void act_bwd(const T* __restrict__ g, const T* __restrict__ kept, T* __restrict__ dx,
                                   long long n, int kind, float a, float b, float c) {
    GRID_LOOP(i, n) dx[i] = from_acc<T>(act_grad(kind, to_acc<float>(g[i]), to_acc<float>(kept[i]), a, b, c));
}

extern "C" __global__ void act_fwd_keep(const T* x, T* y, bool* __restrict__ keep, long long n, int kind, float a,
                                        float b) {
    GRID_LOOP(i, n) {
        bool k;
        const float v = act_keep_value(kind, to_acc<float>(x[i]), a, b, k);
        if (keep) keep[i] = k;
        y[i] = from_acc<T>(v);
    }
}

extern "C" __global__ void keep_bwd(const T* __restrict__ g, const bool* __restrict__ keep, T* __restrict__ dx,
                                    long long n, float pass, float cut, int cut_multiplies) {
    GRID_LOOP(i, n) {
        const float gi = to_acc<float>(g[i]);
        dx[i] = from_acc<T>(keep[i] ? gi * pass : cut_multiplies ? gi * cut : 0.0f);
    }
}

// Does nothing: the launch-overhead floor that bench/norms.py times.
extern "C" __global__ void noop() {}

// ---------------------------------------------------------------- 16-byte chunks
constexpr int V = 16 / sizeof(T);  // elements per chunk: 8 halves, 4 floats, 2 doubles
typedef Vec<T, V> VT;

__device__ __forceinline__ bool aligned16(const void* p) { return ((unsigned long long)p & 15) == 0; }

// Chunk i0 .. i0+V-1: one vector load when whole and vec (its pointers aligned), else element by
// element, the elements past n read as 0.
__device__ __forceinline__ VT load_chunk(const T* p, long long i0, long long n, bool vec) {
    if (vec && i0 + V <= n) return load_as<VT>(p + i0);
    VT a;
#pragma unroll
    for (int k = 0; k < V; ++k) a.v[k] = i0 + k < n ? p[i0 + k] : from_acc<T>((S)0);
    return a;
}

__device__ __forceinline__ void store_chunk(T* p, long long i0, long long n, bool vec, const VT& a) {
    if (vec && i0 + V <= n) {
        store_as(p + i0, a);
        return;
    }
#pragma unroll
    for (int k = 0; k < V; ++k)
        if (i0 + k < n) p[i0 + k] = a.v[k];
}

// ReLU without a mask (no gradient wanted): a chunk a thread, as relu_fwd_mask
extern "C" __global__ void relu_fwd(const T* x, T* y, long long n) {
    const bool vec = aligned16(x) && aligned16(y);
    GRID_LOOP(c, (n + V - 1) / V) {
        VT a = load_chunk(x, c * V, n, vec);
#pragma unroll
        for (int k = 0; k < V; ++k)
            if (to_acc<float>(a.v[k]) <= 0.0f) a.v[k] = from_acc<T>(0.0f);  // NaN stays NaN, as in PyTorch
        store_chunk(y, c * V, n, vec, a);
    }
}

// A mask word covers L = 32 / V chunks, those of L consecutive lanes: each lane builds its V bits
// in place in the word, an OR across the L lanes (xor shuffles) assembles it, the first lane stores
// it. The loop runs over the chunks rounded up to 32 and blockDim.x is a multiple of 32, so every
// warp covers 32 consecutive chunks from a multiple of 32: the loop condition is uniform in a warp
// (all its lanes take part in each shuffle) and each group of L lanes starts a word.
extern "C" __global__ void relu_fwd_mask(const T* x, T* y, unsigned* __restrict__ mask, long long n) {
    constexpr int L = 32 / V;
    const bool vec = aligned16(x) && aligned16(y);
    const long long c32 = ((n + V - 1) / V + 31) & ~31LL;
    for (long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x; c < c32;
         c += (long long)gridDim.x * blockDim.x) {
        const long long i0 = c * V;
        VT a = load_chunk(x, i0, n, vec);
        unsigned bits = 0;
#pragma unroll
        for (int k = 0; k < V; ++k) {
            // NaN is kept, and so is its gradient, as in PyTorch; false for the zeros past n: tail bits 0
            const bool keep = !(to_acc<S>(a.v[k]) <= (S)0);
            bits |= (unsigned)keep << k;
            if (!keep) a.v[k] = from_acc<T>((S)0);
        }
        store_chunk(y, i0, n, vec, a);
        bits <<= (int)(c % L) * V;
#pragma unroll
        for (int o = 1; o < L; o <<= 1) bits |= __shfl_xor_sync(0xffffffffu, bits, o);
        if (c % L == 0 && i0 < n) mask[c / L] = bits;
    }
}

extern "C" __global__ void mask_apply(const T* __restrict__ g, const unsigned* __restrict__ mask,
                                      T* __restrict__ dx, long long n, S scale) {
    constexpr int L = 32 / V;
    const bool vec = aligned16(g) && aligned16(dx);
    // a scale of 1 (ReLU) passes the kept elements as they are: through a product, -ftz=true would flush their
    // subnormals to zero (PyTorch's ReLU backward selects, and keeps them)
    const bool unit = scale == (S)1;
    GRID_LOOP(c, (n + V - 1) / V) {
        const long long i0 = c * V;
        const unsigned bits = mask[c / L] >> ((int)(c % L) * V);
        VT a = load_chunk(g, i0, n, vec);
#pragma unroll
        for (int k = 0; k < V; ++k)
            a.v[k] = (bits >> k) & 1u ? (unit ? a.v[k] : from_acc<T>(to_acc<S>(a.v[k]) * scale)) : from_acc<T>((S)0);
        store_chunk(dx, i0, n, vec, a);
    }
}

// bfloat16 <-> float by their bits, and a float add written as PTX: CuPy compiles every kernel with
// -ftz=true, which flushes bfloat16's subnormals (float's own range) to zero in conversions and float
// arithmetic, where PyTorch's add and the float64 reference keep them.
template <typename A, typename B> struct same_type { static constexpr bool value = false; };
template <typename A> struct same_type<A, A> { static constexpr bool value = true; };
template <typename U> __device__ __forceinline__ S widen_exact(U v) {
    if constexpr (same_type<U, __nv_bfloat16>::value) return __uint_as_float((unsigned)__bfloat16_as_ushort(v) << 16);
    else return to_acc<S>(v);
}
__device__ __forceinline__ float add_exact(float a, float b) {
    float r;
    asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
__device__ __forceinline__ double add_exact(double a, double b) { return a + b; }
template <typename U> __device__ __forceinline__ U round_exact(S f) {
    if constexpr (same_type<U, __nv_bfloat16>::value) {
        unsigned u = __float_as_uint(f);
        if ((u & 0x7fffffffu) > 0x7f800000u) return __ushort_as_bfloat16((unsigned short)((u >> 16) | 0x40u));  // NaN
        u += 0x7fffu + ((u >> 16) & 1u);  // to nearest, ties to even
        return __ushort_as_bfloat16((unsigned short)(u >> 16));
    } else {
        return from_acc<U>(f);
    }
}

// out = a + b, two arrays of n elements (the residual add and the gradient sums of 16-bit tensors):
// the sum in S, rounded once to T (to nearest, ties to even), as PyTorch's add. Any two of a, b and out may be
// one array (out is a for a += b: no __restrict__; each element is read before it is written, by its thread).
extern "C" __global__ void add_same(const T* a, const T* b, T* out, long long n) {
    const bool vec = aligned16(a) && aligned16(b) && aligned16(out);
    GRID_LOOP(c, (n + V - 1) / V) {
        const long long i0 = c * V;
        const VT u = load_chunk(a, i0, n, vec), w = load_chunk(b, i0, n, vec);
        VT r;
#pragma unroll
        for (int k = 0; k < V; ++k) r.v[k] = round_exact<T>(add_exact(widen_exact(u.v[k]), widen_exact(w.v[k])));
        store_chunk(out, i0, n, vec, r);
    }
}

// dx = (a + b) where the mask bit of an element is set, else 0: the backward of a ReLU whose output got two
// gradients (a residual block's output, read by the next block's body and its shortcut), their sum
// rounded once to T as add_same rounds it, so that the result is add_same's then mask_apply's, bit for bit,
// in one pass instead of two.
extern "C" __global__ void mask_add_apply(const T* __restrict__ a, const T* __restrict__ b,
                                          const unsigned* __restrict__ mask, T* __restrict__ dx, long long n) {
    constexpr int L = 32 / V;
    const bool vec = aligned16(a) && aligned16(b) && aligned16(dx);
    GRID_LOOP(c, (n + V - 1) / V) {
        const long long i0 = c * V;
        const unsigned bits = mask[c / L] >> ((int)(c % L) * V);
        const VT u = load_chunk(a, i0, n, vec), w = load_chunk(b, i0, n, vec);
        VT r;
#pragma unroll
        for (int k = 0; k < V; ++k)
            r.v[k] = (bits >> k) & 1u ? round_exact<T>(add_exact(widen_exact(u.v[k]), widen_exact(w.v[k])))
                                      : from_acc<T>((S)0);
        store_chunk(dx, i0, n, vec, r);
    }
}
