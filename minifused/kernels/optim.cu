// Multi-tensor optimizer updates (Adam/AdamW, SGD) and the GradScaler's device pieces: one
// launch updates up to NSLOT parameters (slots, dtypes and master weights: optim_common.cuh).
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
// Arithmetic follows torch.optim.Adam / AdamW / SGD step by step (see optim.py): the
// scalars PyTorch computes in Python (1 - beta1, 1 - beta2, the bias corrections, the step
// size, 1 - dampening, 1 - lr * wd) are computed here in double and rounded once.
//
// nvrtc-check: -DNSLOT=4 -DPT=float
// nvrtc-check: -DNSLOT=8 -DPT=float
// nvrtc-check: -DNSLOT=16 -DPT=float
// nvrtc-check: -DNSLOT=8 -DPT=double
// nvrtc-check: -DNSLOT=8 -DPT=__half
// nvrtc-check: -DNSLOT=8 -DPT=__nv_bfloat16
// nvrtc-check: -DNSLOT=16 -DPT=__half -DMASTER=1
// nvrtc-check: -DNSLOT=4 -DPT=__nv_bfloat16 -DMASTER=1
#include "optim_common.cuh"

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
    // PyTorch's host-side scalars, in double: lr / (1 - beta1^t) and sqrt(1 - beta2^t), once per block (a double
    // pow in every thread measured slower); read after the loads are issued
    __shared__ acc_t bias_terms[2];
    if (threadIdx.x == 0) {
        const double step = (double)(*t + 1);
        bias_terms[0] = (acc_t)(lr / (1.0 - pow(beta1_d, step)));
        bias_terms[1] = (acc_t)sqrt(1.0 - pow(beta2_d, step));
    }
    // 1 - beta in double, as PyTorch passes it (1 - float(0.999) would be 1.3e-5 off)
    const acc_t one_m_beta1 = (acc_t)(1.0 - beta1_d), one_m_beta2 = (acc_t)(1.0 - beta2_d);
    const acc_t beta2 = (acc_t)beta2_d, eps = (acc_t)hyper[3], weight_decay = (acc_t)hyper[4];
    const acc_t decay = (acc_t)one_minus(lr, hyper[4]);
    const long long start = ((long long)blockIdx.x - b) * (long long)blockDim.x * ILP + threadIdx.x;
    acc_t pr[ILP], gr[ILP], mr[ILP], vr[ILP];  // every load before any store (load_chunk)
    load_chunk(p, w, g, start, n, amp, maximize, pr, gr);
#pragma unroll
    for (int k = 0; k < ILP; ++k) {
        const long long i = start + (long long)k * blockDim.x;
        if (i < n) {
            mr[k] = (acc_t)m[i];
            vr[k] = (acc_t)v[i];
        }
    }
    __syncthreads();
    const acc_t step_size = bias_terms[0], bc2_sqrt = bias_terms[1];
#pragma unroll
    for (int k = 0; k < ILP; ++k) {
        const long long i = start + (long long)k * blockDim.x;
        if (i >= n) break;
        acc_t pi = pr[k], gi = gr[k];
        if (weight_decay != (acc_t)0) {
            if (decoupled) pi = pi * decay;
            else gi = gi + weight_decay * pi;
        }
        acc_t mi = lerp(mr[k], gi, one_m_beta1);
        acc_t vi = mul_rn(vr[k], beta2);  // exp_avg_sq.mul_(beta2), then addcmul_
        vi = vi + one_m_beta2 * (gi * gi);
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
    advance_step(t, done, slot, n);
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
    const acc_t lr = (acc_t)hyper[0], momentum = (acc_t)hyper[1], weight_decay = (acc_t)hyper[3];
    const acc_t one_m_dampening = (acc_t)(1.0 - hyper[2]);  // in double, as PyTorch's alpha
    const long long start = ((long long)blockIdx.x - b) * (long long)blockDim.x * ILP + threadIdx.x;
    acc_t pr[ILP], gr[ILP], br[ILP];  // every load before any store (load_chunk)
    load_chunk(p, w, g, start, n, amp, maximize, pr, gr);
#pragma unroll
    for (int k = 0; k < ILP; ++k) {
        const long long i = start + (long long)k * blockDim.x;
        br[k] = i < n && momentum != (acc_t)0 && !init ? (acc_t)buf[i] : (acc_t)0;
    }
#pragma unroll
    for (int k = 0; k < ILP; ++k) {
        const long long i = start + (long long)k * blockDim.x;
        if (i >= n) break;
        acc_t pi = pr[k], d = gr[k];
        if (weight_decay != (acc_t)0) d = d + weight_decay * pi;
        if (momentum != (acc_t)0) {
            acc_t bi = init ? d : mul_rn(br[k], momentum) + one_m_dampening * d;
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
