// Multi-tensor optimizer updates: one launch updates up to NSLOT parameters.
//
// Each parameter is a "slot" passed by value as plain kernel arguments (its
// pointers, element count, first block), so a launch needs no pointer table in
// device memory and no host-to-device copy. Blocks are laid out parameter after
// parameter: slot s owns blocks [b_s, b_{s+1}); every block updates CHUNK =
// blockDim.x * ILP consecutive elements of its parameter (a parameter with no
// elements still owns one block, which advances its step count). Unused slots
// have n = 0 and b = INT_MAX.
//
// Everything that changes between steps lives in device memory, so a launch
// captured into a CUDA graph stays right on every replay:
//   hyper  the group's hyper-parameters in double (lr first), rewritten by the
//          host between steps when a scheduler or the user changes them;
//   step   each parameter's step count (Adam), advanced by the kernel itself;
//   amp    optional GradScaler state [scale, inv_scale, found_inf, tracker]:
//          gradients are multiplied by inv_scale and the whole update (step
//          count included) is skipped when found_inf != 0.
//
// PT is the parameter dtype (float, double, __half, __nv_bfloat16). With
// MASTER=1 the update runs on fp32 master weights w (and fp32 state) and writes
// the rounded result to the low-precision parameter; otherwise the state has the
// parameter's dtype, as in PyTorch. Arithmetic runs in float (double for double)
// and follows torch.optim.Adam / AdamW / SGD step by step (see optim.py).
//
// nvrtc-check: -DNSLOT=4 -DPT=float
// nvrtc-check: -DNSLOT=8 -DPT=float
// nvrtc-check: -DNSLOT=16 -DPT=float
// nvrtc-check: -DNSLOT=8 -DPT=double
// nvrtc-check: -DNSLOT=8 -DPT=__half
// nvrtc-check: -DNSLOT=8 -DPT=__nv_bfloat16
// nvrtc-check: -DNSLOT=16 -DPT=__half -DMASTER=1
// nvrtc-check: -DNSLOT=4 -DPT=__nv_bfloat16 -DMASTER=1
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
#define ILP 4

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

// 1 - lr * wd without an FMA contraction: the host computes it with two roundings.
__device__ __forceinline__ double one_minus(double a, double b) { return __dadd_rn(1.0, -__dmul_rn(a, b)); }

// flags: bit 0 amsgrad, bit 1 decoupled weight decay (AdamW), bit 2 maximize.
// hyper = [lr, beta1, beta2, eps, weight_decay]. done: NSLOT zeroed counters (left zeroed).
#define ADAM_ARGS(i) PT* p##i, const PT* g##i, ST* m##i, ST* v##i, ST* vmax##i, ST* w##i, long long* t##i, \
    long long n##i, int b##i,
#define ADAM_CASE(i) case i: p = p##i; g = g##i; m = m##i; v = v##i; vmax = vmax##i; w = w##i; t = t##i; \
    n = n##i; b = b##i; break;
extern "C" __global__ void adam_multi(REPEAT(ADAM_ARGS) const double* hyper, const float* amp,
                                      unsigned int* done, int flags) {
    if (amp != nullptr && amp[2] != 0.0f) return;  // inf/NaN in the scaled gradients: skip the step
    int slot = 0;
    REPEAT(FIND)
    PT* p = p0; const PT* g = g0; ST* m = m0; ST* v = v0; ST* vmax = vmax0; ST* w = w0; long long* t = t0;
    long long n = n0; int b = b0;
    switch (slot) { REPEAT(ADAM_CASE) }
    const bool amsgrad = flags & 1, decoupled = flags & 2, maximize = flags & 4;
    const double lr = hyper[0], beta1_d = hyper[1], beta2_d = hyper[2];
    const double step = (double)(*t + 1);
    // PyTorch's host-side scalars, in double: lr / (1 - beta1^t) and sqrt(1 - beta2^t)
    const acc_t step_size = (acc_t)(lr / (1.0 - pow(beta1_d, step)));
    const acc_t bc2_sqrt = (acc_t)sqrt(1.0 - pow(beta2_d, step));
    const acc_t beta1 = (acc_t)beta1_d, beta2 = (acc_t)beta2_d, eps = (acc_t)hyper[3], weight_decay = (acc_t)hyper[4];
    const acc_t decay = (acc_t)one_minus(lr, hyper[4]);
    const long long start = ((long long)blockIdx.x - b) * (long long)blockDim.x * ILP;
#pragma unroll
    for (int k = 0; k < ILP; ++k) {
        long long i = start + (long long)k * blockDim.x + threadIdx.x;
        if (i >= n) break;
        acc_t pi = load_param(p, w, i);
        acc_t gi = (acc_t)g[i];
        if (amp != nullptr) gi = gi * (acc_t)amp[1];
        if (maximize) gi = -gi;
        if (weight_decay != (acc_t)0) {
            if (decoupled) pi = pi * decay;
            else gi = gi + weight_decay * pi;
        }
        acc_t mi = lerp((acc_t)m[i], gi, (acc_t)1 - beta1);
        acc_t vi = (acc_t)v[i] * beta2;
        vi = vi + ((acc_t)1 - beta2) * gi * gi;
        m[i] = (ST)mi;
        v[i] = (ST)vi;
        mi = (acc_t)(ST)mi;
        vi = (acc_t)(ST)vi;
        if (amsgrad) {
            acc_t vm = (acc_t)vmax[i];
            vi = vm > vi ? vm : vi;
            vmax[i] = (ST)vi;
        }
        acc_t denom = sqrt(vi) / bc2_sqrt + eps;
        store_param(p, w, i, pi + (-step_size) * (mi / denom));
    }
    // The last block of the slot to finish advances its step count: every block has read it by
    // then (the barrier and the fence order this block's read before its count).
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        const long long chunk = (long long)blockDim.x * ILP;
        const unsigned int blocks = n > 0 ? (unsigned int)((n + chunk - 1) / chunk) : 1u;
        if (atomicAdd(&done[slot], 1u) == blocks - 1) {
            *t = *t + 1;
            done[slot] = 0;
        }
    }
}

// flags: bit 0 nesterov, bit 1 maximize. hyper = [lr, momentum, dampening, weight_decay].
#define SGD_ARGS(i) PT* p##i, const PT* g##i, ST* buf##i, ST* w##i, long long n##i, int b##i, int init##i,
#define SGD_CASE(i) case i: p = p##i; g = g##i; buf = buf##i; w = w##i; n = n##i; b = b##i; init = init##i; break;
extern "C" __global__ void sgd_multi(REPEAT(SGD_ARGS) const double* hyper, const float* amp, int flags) {
    if (amp != nullptr && amp[2] != 0.0f) return;
    int slot = 0;
    REPEAT(FIND)
    PT* p = p0; const PT* g = g0; ST* buf = buf0; ST* w = w0; long long n = n0; int b = b0, init = init0;
    switch (slot) { REPEAT(SGD_CASE) }
    const bool nesterov = flags & 1, maximize = flags & 2;
    const acc_t lr = (acc_t)hyper[0], momentum = (acc_t)hyper[1], dampening = (acc_t)hyper[2],
                weight_decay = (acc_t)hyper[3];
    const long long start = ((long long)blockIdx.x - b) * (long long)blockDim.x * ILP;
#pragma unroll
    for (int k = 0; k < ILP; ++k) {
        long long i = start + (long long)k * blockDim.x + threadIdx.x;
        if (i >= n) break;
        acc_t pi = load_param(p, w, i);
        acc_t d = (acc_t)g[i];
        if (amp != nullptr) d = d * (acc_t)amp[1];
        if (maximize) d = -d;
        if (weight_decay != (acc_t)0) d = d + weight_decay * pi;
        if (momentum != (acc_t)0) {
            acc_t bi = init ? d : (acc_t)buf[i] * momentum + ((acc_t)1 - dampening) * d;
            buf[i] = (ST)bi;
            bi = (acc_t)(ST)bi;
            d = nesterov ? d + momentum * bi : bi;
        }
        store_param(p, w, i, pi + (-lr) * d);
    }
}

// GradScaler: found_inf (amp[2]) := 1 when any element of the slots' gradients is inf or NaN.
// It is never cleared here (scaler_update does that), so several launches OR their findings.
#define CHECK_ARGS(i) const PT* g##i, long long n##i, int b##i,
#define CHECK_CASE(i) case i: g = g##i; n = n##i; b = b##i; break;
extern "C" __global__ void nonfinite_multi(REPEAT(CHECK_ARGS) float* amp) {
    int slot = 0;
    REPEAT(FIND)
    const PT* g = g0; long long n = n0; int b = b0;
    switch (slot) { REPEAT(CHECK_CASE) }
    const long long start = ((long long)blockIdx.x - b) * (long long)blockDim.x * ILP;
    bool bad = false;
#pragma unroll
    for (int k = 0; k < ILP; ++k) {
        long long i = start + (long long)k * blockDim.x + threadIdx.x;
        if (i < n) bad |= !isfinite((acc_t)g[i]);
    }
    if (bad) amp[2] = 1.0f;  // every writer writes the same value
}

// GradScaler.update, one thread: s = [scale, inv_scale, found_inf, growth_tracker] (float32, so the
// powers of two and counts up to 2^24 are exact). Back off after an inf/NaN, grow after `interval`
// clean steps (unless the grown scale would overflow), then clear found_inf for the next step.
extern "C" __global__ void scaler_update(float* s, float growth, float backoff, float interval) {
    if (s[2] != 0.0f) {
        s[0] = s[0] * backoff;
        s[3] = 0.0f;
    } else {
        s[3] = s[3] + 1.0f;
        if (s[3] >= interval) {
            float grown = s[0] * growth;
            if (isfinite(grown)) s[0] = grown;
            s[3] = 0.0f;
        }
    }
    s[1] = 1.0f / s[0];
    s[2] = 0.0f;
}

// dst[0:n] = a[0:n]: hyper-parameters written from kernel arguments (no host buffer to keep
// alive, ordered on the stream like any launch).
extern "C" __global__ void set_scalars(double* dst, int n, double a0, double a1, double a2, double a3,
                                       double a4, double a5, double a6, double a7) {
    const double a[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
    for (int i = 0; i < n && i < 8; ++i) dst[i] = a[i];
}
