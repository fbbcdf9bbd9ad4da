// Multi-tensor optimizer updates: one launch updates up to NSLOT parameters.
//
// Each parameter is a "slot" passed by value as plain kernel arguments (its
// pointers, element count, first block and per-parameter scalars), so a launch
// needs no pointer table in device memory and no host-to-device copy. Blocks are
// laid out parameter after parameter: slot s owns blocks [b_s, b_{s+1}); every
// block updates CHUNK = blockDim.x * ILP consecutive elements of its parameter.
// Unused slots have n = 0 and b = INT_MAX.
//
// PT is the parameter dtype (float, double, __half, __nv_bfloat16); the state
// (exp_avg, exp_avg_sq, momentum_buffer) has the parameter's dtype, as in
// PyTorch; arithmetic runs in float (double for double). The math follows
// PyTorch's torch.optim.Adam / AdamW / SGD step by step (see optim.py).
//
// nvrtc-check: -DNSLOT=4 -DPT=float
// nvrtc-check: -DNSLOT=8 -DPT=float
// nvrtc-check: -DNSLOT=16 -DPT=float
// nvrtc-check: -DNSLOT=8 -DPT=double
// nvrtc-check: -DNSLOT=8 -DPT=__half
// nvrtc-check: -DNSLOT=8 -DPT=__nv_bfloat16
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef NSLOT
#define NSLOT 8
#endif
#ifndef PT
#define PT float
#endif
#define ILP 4

template <typename T> struct OpMath { typedef float type; };
template <> struct OpMath<double> { typedef double type; };
typedef OpMath<PT>::type acc_t;

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

// flags: bit 0 amsgrad, bit 1 decoupled weight decay (AdamW), bit 2 maximize.
// Per slot: ss = lr / (1 - beta1^step), bc = sqrt(1 - beta2^step), computed on the host in double
// (passed in the opmath type).
#define ADAM_ARGS(i) PT* p##i, const PT* g##i, PT* m##i, PT* v##i, PT* vmax##i, long long n##i, \
    int b##i, acc_t ss##i, acc_t bc##i,
#define ADAM_CASE(i) case i: p = p##i; g = g##i; m = m##i; v = v##i; vmax = vmax##i; n = n##i; \
    b = b##i; ss = ss##i; bc = bc##i; break;
extern "C" __global__ void adam_multi(REPEAT(ADAM_ARGS) acc_t decay, acc_t beta1, acc_t beta2,
                                      acc_t eps, acc_t weight_decay, int flags) {
    int slot = 0;
    REPEAT(FIND)
    PT* p = p0; const PT* g = g0; PT* m = m0; PT* v = v0; PT* vmax = vmax0;
    long long n = n0; int b = b0; acc_t ss = ss0, bc = bc0;
    switch (slot) { REPEAT(ADAM_CASE) }
    const bool amsgrad = flags & 1, decoupled = flags & 2, maximize = flags & 4;
    const long long start = ((long long)blockIdx.x - b) * (long long)blockDim.x * ILP;
    const acc_t step_size = (acc_t)ss, bc2_sqrt = (acc_t)bc;
#pragma unroll
    for (int k = 0; k < ILP; ++k) {
        long long i = start + (long long)k * blockDim.x + threadIdx.x;
        if (i >= n) break;
        acc_t pi = (acc_t)p[i];
        acc_t gi = (acc_t)g[i];
        if (maximize) gi = -gi;
        if (weight_decay != (acc_t)0) {
            if (decoupled) pi = pi * decay;  // decay = 1 - lr * weight_decay, from the host
            else gi = gi + weight_decay * pi;
        }
        acc_t mi = lerp((acc_t)m[i], gi, (acc_t)1 - beta1);
        acc_t vi = (acc_t)v[i] * beta2;
        vi = vi + ((acc_t)1 - beta2) * gi * gi;
        m[i] = (PT)mi;
        v[i] = (PT)vi;
        mi = (acc_t)(PT)mi;
        vi = (acc_t)(PT)vi;
        if (amsgrad) {
            acc_t vm = (acc_t)vmax[i];
            vi = vm > vi ? vm : vi;
            vmax[i] = (PT)vi;
        }
        acc_t denom = sqrt(vi) / bc2_sqrt + eps;
        pi = pi + (-step_size) * (mi / denom);
        p[i] = (PT)pi;
    }
}

// flags: bit 0 nesterov, bit 1 maximize
#define SGD_ARGS(i) PT* p##i, const PT* g##i, PT* buf##i, long long n##i, int b##i, int init##i,
#define SGD_CASE(i) case i: p = p##i; g = g##i; buf = buf##i; n = n##i; b = b##i; init = init##i; break;
extern "C" __global__ void sgd_multi(REPEAT(SGD_ARGS) acc_t lr, acc_t momentum, acc_t dampening,
                                     acc_t weight_decay, int flags) {
    int slot = 0;
    REPEAT(FIND)
    PT* p = p0; const PT* g = g0; PT* buf = buf0; long long n = n0; int b = b0, init = init0;
    switch (slot) { REPEAT(SGD_CASE) }
    const bool nesterov = flags & 1, maximize = flags & 2;
    const long long start = ((long long)blockIdx.x - b) * (long long)blockDim.x * ILP;
#pragma unroll
    for (int k = 0; k < ILP; ++k) {
        long long i = start + (long long)k * blockDim.x + threadIdx.x;
        if (i >= n) break;
        acc_t pi = (acc_t)p[i];
        acc_t d = (acc_t)g[i];
        if (maximize) d = -d;
        if (weight_decay != (acc_t)0) d = d + weight_decay * pi;
        if (momentum != (acc_t)0) {
            acc_t bi = init ? d : (acc_t)buf[i] * momentum + ((acc_t)1 - dampening) * d;
            buf[i] = (PT)bi;
            bi = (acc_t)(PT)bi;
            d = nesterov ? d + momentum * bi : bi;
        }
        p[i] = (PT)(pi + (-lr) * d);
    }
}
