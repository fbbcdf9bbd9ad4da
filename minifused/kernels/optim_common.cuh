// Shared pieces of the multi-tensor optimizer kernels (optim.cu, optim_adaptive.cu, optim_extra.cu).
//
// Each parameter is a "slot" passed by value as plain kernel arguments (its
// pointers, element count, first block), so a launch needs no pointer table in
// device memory and no host-to-device copy. Blocks are laid out parameter after
// parameter: slot s owns blocks [b_s, b_{s+1}); every block updates CHUNK =
// blockDim.x * ILP consecutive elements of its parameter (a parameter with no
// elements still owns one block, which advances its step count). Unused slots
// have n = 0 and b = INT_MAX.
//
// PT is the parameter dtype (float, double, __half, __nv_bfloat16). With
// MASTER=1 the update runs on fp32 master weights w (and fp32 state ST) and writes
// the rounded result to the low-precision parameter; otherwise the state has the
// parameter's dtype, as in PyTorch. Arithmetic runs in acc_t (float; double for
// double), as PyTorch's opmath.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef NSLOT
#define NSLOT 8
#endif
#ifndef PT
#define PT float
#endif
#ifndef MASTER
#define MASTER 0
#endif
#define ILP 8  // elements per thread (optim.py's ILP): on Adam, 8 measured faster than 2, 4 or 16

template <typename T> struct OpMath { typedef float type; };
template <> struct OpMath<double> { typedef double type; };
typedef OpMath<PT>::type acc_t;
#if MASTER
typedef float ST;  // master weights and optimizer state
#else
typedef PT ST;
#endif

// REPEAT(S) expands S(i) for every slot i < NSLOT (literal tokens, for ## pasting).
#define REP4_0(S) S(0) S(1) S(2) S(3)
#define REP4_4(S) S(4) S(5) S(6) S(7)
#define REP4_8(S) S(8) S(9) S(10) S(11)
#define REP4_12(S) S(12) S(13) S(14) S(15)
#if NSLOT == 4
#define REPEAT(S) REP4_0(S)
#elif NSLOT == 8
#define REPEAT(S) REP4_0(S) REP4_4(S)
#elif NSLOT == 16
#define REPEAT(S) REP4_0(S) REP4_4(S) REP4_8(S) REP4_12(S)
#else
#error "NSLOT must be 4, 8 or 16"
#endif

// The slot owning this block: the last one whose first block is <= blockIdx.x.
#define FIND(i) if ((int)blockIdx.x >= b##i) slot = i;

__device__ __forceinline__ acc_t lerp(acc_t a, acc_t b, acc_t w) {
    // torch.lerp: a + w (b - a) for w < 0.5, else b - (b - a)(1 - w)
    return w < (acc_t)0.5 ? a + w * (b - a) : b - (b - a) * ((acc_t)1 - w);
}

// x rounded to the state dtype: PyTorch's temporaries (sqrt(v), v + eps ...) are tensors of it.
__device__ __forceinline__ acc_t rnd(acc_t x) { return (acc_t)(ST)x; }

// a * b rounded on its own (never contracted into an FMA with a following add), as PyTorch's
// separate mul_ before add_/addcmul_ rounds it.
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }

__device__ __forceinline__ acc_t load_param(const PT* p, const ST* w, long long i) {
#if MASTER
    return (acc_t)w[i];
#else
    return (acc_t)p[i];
#endif
}

__device__ __forceinline__ void store_param(PT* p, ST* w, long long i, acc_t x) {
#if MASTER
    w[i] = (ST)x;
#endif
    p[i] = (PT)x;
}

// The gradient as the update uses it: unscaled by the GradScaler's inv_scale, negated for maximize.
__device__ __forceinline__ acc_t load_grad(const PT* g, long long i, const float* amp, bool maximize) {
    acc_t gi = (acc_t)g[i];
    if (amp != nullptr) gi = gi * (acc_t)amp[1];
    return maximize ? -gi : gi;
}

// The elements i < n of this thread in its block's chunk, one by one (the slot's n and first block b in scope):
// ELEMENTS_BEGIN <body using i> ELEMENTS_END
#define ELEMENTS_BEGIN                                                               \
    const long long start = ((long long)blockIdx.x - b) * (long long)blockDim.x * ILP; \
    _Pragma("unroll") for (int k = 0; k < ILP; ++k) {                                \
        long long i = start + (long long)k * blockDim.x + threadIdx.x;               \
        if (i >= n) break;
#define ELEMENTS_END }

// grad.add(param, alpha=weight_decay), a temporary of the parameter's dtype
__device__ __forceinline__ acc_t decayed(acc_t g, acc_t p, acc_t wd) {
    return wd != (acc_t)0 ? rnd(g + wd * p) : g;
}

// This thread's ILP parameters and gradients of its block's chunk (first element ``start``, then every
// blockDim.x), into registers. The kernels issue all their loads before any store: the arrays may alias as
// far as the compiler knows, so a load written after a store would wait for it, one element at a time.
__device__ __forceinline__ void load_chunk(const PT* p, const ST* w, const PT* g, long long start, long long n,
                                           const float* amp, bool maximize, acc_t* pr, acc_t* gr) {
#pragma unroll
    for (int k = 0; k < ILP; ++k) {
        const long long i = start + (long long)k * blockDim.x;
        if (i < n) {
            pr[k] = load_param(p, w, i);
            gr[k] = load_grad(g, i, amp, maximize);
        }
    }
}

// The last block of the slot to finish advances its step count *t (and writes ``value`` / ``value2`` to
// per-parameter scalars of state, ``scalar`` / ``scalar2``, where given): every block has read them by then (the
// barrier and the fence order this block's reads before its count). done[slot] is a zeroed counter, left zeroed.
__device__ __forceinline__ void advance_step(long long* t, unsigned int* done, int slot, long long n,
                                             float* scalar = nullptr, float value = 0.0f, float* scalar2 = nullptr,
                                             float value2 = 0.0f) {
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        const long long chunk = (long long)blockDim.x * ILP;
        const unsigned int blocks = n > 0 ? (unsigned int)((n + chunk - 1) / chunk) : 1u;
        if (atomicAdd(&done[slot], 1u) == blocks - 1) {
            *t = *t + 1;
            if (scalar != nullptr) *scalar = value;
            if (scalar2 != nullptr) *scalar2 = value2;
            done[slot] = 0;
        }
    }
}
