// Multi-tensor RMSprop, Adagrad and Adadelta updates: one launch updates up to NSLOT
// parameters (slots, dtypes and master weights: optim_common.cuh).
//
// As in optim.cu, whatever changes between steps is read from device memory, so a
// captured launch stays right on every replay: `hyper` (the group's hyper-parameters,
// double, lr first), `t` (each parameter's step count, advanced here by the slot's last
// block), `amp` (optional GradScaler state: gradients times inv_scale, the whole update
// skipped when found_inf != 0).
//
// Arithmetic follows torch.optim's single-tensor code op by op (see optim_adaptive.py):
// scalars PyTorch computes in Python (1 - alpha, 1 - rho, Adagrad's decayed lr) are computed
// in double and rounded once; a temporary tensor of PyTorch's is rounded to the state dtype
// (rnd); a mul_ before an add is rounded on its own (mul_rn).
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

// flags: bit 0 centered, bit 1 momentum (momentum > 0), bit 2 maximize.
// hyper = [lr, alpha, eps, weight_decay, momentum]. ga / buf are read only when centered / momentum.
#define RMSPROP_ARGS(i) PT* p##i, const PT* g##i, ST* sq##i, ST* ga##i, ST* buf##i, ST* w##i, long long* t##i, \
    long long n##i, int b##i,
#define RMSPROP_CASE(i) case i: p = p##i; g = g##i; sq = sq##i; ga = ga##i; buf = buf##i; w = w##i; t = t##i; \
    n = n##i; b = b##i; break;
extern "C" __global__ void rmsprop_multi(REPEAT(RMSPROP_ARGS) const double* hyper, const float* amp,
                                         unsigned int* done, int flags) {
    if (amp != nullptr && amp[2] != 0.0f) return;  // inf/NaN in the scaled gradients: skip the step
    int slot = 0;
    REPEAT(FIND)
    PT* p = p0; const PT* g = g0; ST* sq = sq0; ST* ga = ga0; ST* buf = buf0; ST* w = w0; long long* t = t0;
    long long n = n0; int b = b0;
    switch (slot) { REPEAT(RMSPROP_CASE) }
    const bool centered = flags & 1, use_momentum = flags & 2, maximize = flags & 4;
    const acc_t lr = (acc_t)hyper[0], alpha = (acc_t)hyper[1], one_m_alpha = (acc_t)(1.0 - hyper[1]);
    const acc_t eps = (acc_t)hyper[2], weight_decay = (acc_t)hyper[3], momentum = (acc_t)hyper[4];
    ELEMENTS_BEGIN
        acc_t pi = load_param(p, w, i);
        acc_t gi = decayed(load_grad(g, i, amp, maximize), pi, weight_decay);
        acc_t si = rnd(mul_rn((acc_t)sq[i], alpha));        // square_avg.mul_(alpha)
        si = rnd(si + one_m_alpha * (gi * gi));              // .addcmul_(g, g, value=1 - alpha)
        sq[i] = (ST)si;
        acc_t avg;
        if (centered) {
            acc_t gai = rnd(lerp((acc_t)ga[i], gi, one_m_alpha));
            ga[i] = (ST)gai;
            avg = rnd(sqrt(rnd(si - mul_rn(gai, gai))));          // square_avg.addcmul(ga, ga, value=-1).sqrt_()
        } else {
            avg = rnd(sqrt(si));
        }
        avg = rnd(avg + eps);
        if (use_momentum) {
            acc_t bi = rnd(mul_rn((acc_t)buf[i], momentum));  // buf.mul_(momentum).addcdiv_(g, avg)
            bi = rnd(bi + gi / avg);
            buf[i] = (ST)bi;
            store_param(p, w, i, pi + (-lr) * bi);
        } else {
            store_param(p, w, i, pi + (-lr) * (gi / avg));
        }
    ELEMENTS_END
    advance_step(t, done, slot, n);
}

// flags: bit 2 maximize. hyper = [lr, lr_decay, weight_decay, eps].
#define ADAGRAD_ARGS(i) PT* p##i, const PT* g##i, ST* sum##i, ST* w##i, long long* t##i, long long n##i, int b##i,
#define ADAGRAD_CASE(i) case i: p = p##i; g = g##i; sum = sum##i; w = w##i; t = t##i; n = n##i; b = b##i; break;
extern "C" __global__ void adagrad_multi(REPEAT(ADAGRAD_ARGS) const double* hyper, const float* amp,
                                         unsigned int* done, int flags) {
    if (amp != nullptr && amp[2] != 0.0f) return;
    int slot = 0;
    REPEAT(FIND)
    PT* p = p0; const PT* g = g0; ST* sum = sum0; ST* w = w0; long long* t = t0; long long n = n0; int b = b0;
    switch (slot) { REPEAT(ADAGRAD_CASE) }
    const bool maximize = flags & 4;
    // clr = lr / (1 + (step - 1) * lr_decay) at this step, in double as PyTorch's Python scalar
    const double step = (double)(*t + 1);
    const acc_t neg_clr = (acc_t)(-(hyper[0] / (1.0 + (step - 1.0) * hyper[1])));
    const acc_t weight_decay = (acc_t)hyper[2], eps = (acc_t)hyper[3];
    ELEMENTS_BEGIN
        acc_t pi = load_param(p, w, i);
        acc_t gi = decayed(load_grad(g, i, amp, maximize), pi, weight_decay);
        acc_t si = rnd((acc_t)sum[i] + (acc_t)1 * (gi * gi));  // state_sum.addcmul_(g, g, value=1)
        sum[i] = (ST)si;
        acc_t std = rnd(rnd(sqrt(si)) + eps);                  // state_sum.sqrt().add_(eps)
        store_param(p, w, i, pi + neg_clr * (gi / std));
    ELEMENTS_END
    advance_step(t, done, slot, n);
}

// flags: bit 2 maximize. hyper = [lr, rho, eps, weight_decay].
#define ADADELTA_ARGS(i) PT* p##i, const PT* g##i, ST* sq##i, ST* acc##i, ST* w##i, long long* t##i, \
    long long n##i, int b##i,
#define ADADELTA_CASE(i) case i: p = p##i; g = g##i; sq = sq##i; acc = acc##i; w = w##i; t = t##i; n = n##i; \
    b = b##i; break;
extern "C" __global__ void adadelta_multi(REPEAT(ADADELTA_ARGS) const double* hyper, const float* amp,
                                          unsigned int* done, int flags) {
    if (amp != nullptr && amp[2] != 0.0f) return;
    int slot = 0;
    REPEAT(FIND)
    PT* p = p0; const PT* g = g0; ST* sq = sq0; ST* acc = acc0; ST* w = w0; long long* t = t0;
    long long n = n0; int b = b0;
    switch (slot) { REPEAT(ADADELTA_CASE) }
    const bool maximize = flags & 4;
    const acc_t lr = (acc_t)hyper[0], rho = (acc_t)hyper[1], one_m_rho = (acc_t)(1.0 - hyper[1]);
    const acc_t eps = (acc_t)hyper[2], weight_decay = (acc_t)hyper[3];
    ELEMENTS_BEGIN
        acc_t pi = load_param(p, w, i);
        acc_t gi = decayed(load_grad(g, i, amp, maximize), pi, weight_decay);
        acc_t si = rnd(mul_rn((acc_t)sq[i], rho));             // square_avg.mul_(rho).addcmul_(g, g, 1 - rho)
        si = rnd(si + one_m_rho * (gi * gi));
        sq[i] = (ST)si;
        acc_t std = rnd(sqrt(rnd(si + eps)));                  // square_avg.add(eps).sqrt_()
        acc_t ai = (acc_t)acc[i];
        acc_t delta = rnd(sqrt(rnd(ai + eps)));                // acc_delta.add(eps).sqrt_()
        delta = rnd(rnd(delta / std) * gi);                    // .div_(std).mul_(g)
        ai = rnd(mul_rn(ai, rho));                             // acc_delta.mul_(rho).addcmul_(d, d, 1 - rho)
        ai = rnd(ai + one_m_rho * (delta * delta));
        acc[i] = (ST)ai;
        store_param(p, w, i, pi + (-lr) * delta);
    ELEMENTS_END
    advance_step(t, done, slot, n);
}
