// Multi-tensor RMSprop, Adagrad, Adadelta, Adamax, NAdam and RAdam updates: one launch updates up to NSLOT
// parameters (slots, dtypes and master weights: optim_common.cuh).
//
// As in optim.cu, whatever changes between steps is read from device memory, so a
// captured launch stays right on every replay: `hyper` (the group's hyper-parameters,
// double, lr first), `t` (each parameter's step count, advanced here by the slot's last
// block), `amp` (optional GradScaler state: gradients times inv_scale, the whole update
// skipped when found_inf != 0).
//
// Arithmetic follows torch.optim's single-tensor code op by op (see optim_adaptive.py):
// scalars PyTorch computes in Python (1 - alpha, 1 - rho, Adagrad's decayed lr, the bias corrections)
// are computed in double and rounded once; a temporary tensor of PyTorch's is rounded to the state dtype
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

// max(a, b) that keeps a NaN of either, as torch.maximum
__device__ __forceinline__ acc_t nan_max(acc_t a, acc_t b) { return (a != a || a > b) ? a : b; }

// flags: bit 2 maximize. hyper = [lr, beta1, beta2, eps, weight_decay].
#define ADAMAX_ARGS(i) PT* p##i, const PT* g##i, ST* m##i, ST* u##i, ST* w##i, long long* t##i, long long n##i, \
    int b##i,
#define ADAMAX_CASE(i) case i: p = p##i; g = g##i; m = m##i; u = u##i; w = w##i; t = t##i; n = n##i; b = b##i; break;
extern "C" __global__ void adamax_multi(REPEAT(ADAMAX_ARGS) const double* hyper, const float* amp,
                                        unsigned int* done, int flags) {
    if (amp != nullptr && amp[2] != 0.0f) return;
    int slot = 0;
    REPEAT(FIND)
    PT* p = p0; const PT* g = g0; ST* m = m0; ST* u = u0; ST* w = w0; long long* t = t0; long long n = n0;
    int b = b0;
    switch (slot) { REPEAT(ADAMAX_CASE) }
    const bool maximize = flags & 4;
    const double step = (double)(*t + 1);
    const acc_t neg_clr = (acc_t)(-(hyper[0] / (1.0 - pow(hyper[1], step))));  // lr / (1 - beta1^t)
    const acc_t one_m_beta1 = (acc_t)(1.0 - hyper[1]), beta2 = (acc_t)hyper[2], eps = (acc_t)hyper[3];
    const acc_t weight_decay = (acc_t)hyper[4];
    ELEMENTS_BEGIN
        acc_t pi = load_param(p, w, i);
        acc_t gi = decayed(load_grad(g, i, amp, maximize), pi, weight_decay);
        acc_t mi = rnd(lerp((acc_t)m[i], gi, one_m_beta1));               // exp_avg.lerp_(g, 1 - beta1)
        m[i] = (ST)mi;
        acc_t ui = nan_max(rnd(mul_rn((acc_t)u[i], beta2)), rnd(rnd(fabs(gi)) + eps));  // max(u*beta2, |g|+eps)
        u[i] = (ST)ui;
        store_param(p, w, i, pi + neg_clr * (mi / ui));                   // addcdiv_(exp_avg, exp_inf, -clr)
    ELEMENTS_END
    advance_step(t, done, slot, n);
}

// NAdam's and RAdam's weight decay: the parameter shrunk by decay = 1 - lr * wd (param.mul_, decoupled) or
// wd * p added to the gradient (grad.add(param, alpha=wd)); then their moments, exp_avg.lerp_(g, 1 - beta1)
// and exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1 - beta2), written back and returned in mi, vi
__device__ __forceinline__ void decay_and_moments(acc_t& pi, acc_t& gi, acc_t weight_decay, acc_t decay,
                                                  bool decoupled, ST* m, ST* v, long long i, acc_t one_m_beta1,
                                                  acc_t beta2, acc_t one_m_beta2, acc_t& mi, acc_t& vi) {
    if (weight_decay != (acc_t)0) {
        if (decoupled) pi = rnd(pi * decay);
        else gi = rnd(gi + weight_decay * pi);
    }
    mi = rnd(lerp((acc_t)m[i], gi, one_m_beta1));
    m[i] = (ST)mi;
    vi = rnd(mul_rn((acc_t)v[i], beta2));
    vi = rnd(vi + one_m_beta2 * (gi * gi));
    v[i] = (ST)vi;
}

// flags: bit 1 decoupled weight decay, bit 2 maximize. hyper = [lr, beta1, beta2, eps, weight_decay,
// momentum_decay]. mu: the parameter's mu_product (fp32, as PyTorch keeps it), rewritten by the last block.
#define NADAM_ARGS(i) PT* p##i, const PT* g##i, ST* m##i, ST* v##i, float* mu##i, ST* w##i, long long* t##i, \
    long long n##i, int b##i,
#define NADAM_CASE(i) case i: p = p##i; g = g##i; m = m##i; v = v##i; mu = mu##i; w = w##i; t = t##i; n = n##i; \
    b = b##i; break;
extern "C" __global__ void nadam_multi(REPEAT(NADAM_ARGS) const double* hyper, const float* amp,
                                       unsigned int* done, int flags) {
    if (amp != nullptr && amp[2] != 0.0f) return;
    int slot = 0;
    REPEAT(FIND)
    PT* p = p0; const PT* g = g0; ST* m = m0; ST* v = v0; float* mu = mu0; ST* w = w0; long long* t = t0;
    long long n = n0; int b = b0;
    switch (slot) { REPEAT(NADAM_CASE) }
    const bool decoupled = flags & 2, maximize = flags & 4;
    const double lr = hyper[0], beta1 = hyper[1], beta2 = hyper[2], psi = hyper[5], step = (double)(*t + 1);
    const double mu_t = beta1 * (1.0 - 0.5 * pow(0.96, step * psi));
    const double mu_next = beta1 * (1.0 - 0.5 * pow(0.96, (step + 1.0) * psi));
    const float mu_product = __fmul_rn(*mu, (float)mu_t);  // mu_product *= mu: an fp32 tensor times a float
    const double mu_product_next = (double)mu_product * mu_next;
    const acc_t c_grad = (acc_t)(-lr * (1.0 - mu_t) / (1.0 - (double)mu_product));
    const acc_t c_avg = (acc_t)((-lr * mu_next) / (1.0 - mu_product_next));
    const acc_t bc2 = (acc_t)(1.0 - pow(beta2, step)), one_m_beta1 = (acc_t)(1.0 - beta1);
    const acc_t beta2_a = (acc_t)beta2, one_m_beta2 = (acc_t)(1.0 - beta2), eps = (acc_t)hyper[3];
    const acc_t weight_decay = (acc_t)hyper[4], decay = (acc_t)(1.0 - lr * hyper[4]);
    ELEMENTS_BEGIN
        acc_t pi = load_param(p, w, i), gi = load_grad(g, i, amp, maximize), mi, vi;
        decay_and_moments(pi, gi, weight_decay, decay, decoupled, m, v, i, one_m_beta1, beta2_a, one_m_beta2, mi, vi);
        acc_t denom = rnd(rnd(sqrt(rnd(vi / bc2))) + eps);           // exp_avg_sq.div(bc2).sqrt().add_(eps)
        pi = rnd(pi + c_grad * (gi / denom));                         // param.addcdiv_(grad, denom, value=...)
        store_param(p, w, i, pi + c_avg * (mi / denom));              // param.addcdiv_(exp_avg, denom, value=...)
    ELEMENTS_END
    advance_step(t, done, slot, n, mu, mu_product);
}

// flags: bit 1 decoupled weight decay, bit 2 maximize. hyper = [lr, beta1, beta2, eps, weight_decay].
#define RADAM_ARGS(i) PT* p##i, const PT* g##i, ST* m##i, ST* v##i, ST* w##i, long long* t##i, long long n##i, \
    int b##i,
#define RADAM_CASE(i) case i: p = p##i; g = g##i; m = m##i; v = v##i; w = w##i; t = t##i; n = n##i; b = b##i; break;
extern "C" __global__ void radam_multi(REPEAT(RADAM_ARGS) const double* hyper, const float* amp,
                                       unsigned int* done, int flags) {
    if (amp != nullptr && amp[2] != 0.0f) return;
    int slot = 0;
    REPEAT(FIND)
    PT* p = p0; const PT* g = g0; ST* m = m0; ST* v = v0; ST* w = w0; long long* t = t0; long long n = n0;
    int b = b0;
    switch (slot) { REPEAT(RADAM_CASE) }
    const bool decoupled = flags & 2, maximize = flags & 4;
    const double lr = hyper[0], beta1 = hyper[1], beta2 = hyper[2], step = (double)(*t + 1);
    const double bc1 = 1.0 - pow(beta1, step), bc2 = 1.0 - pow(beta2, step);
    const double rho_inf = 2.0 / (1.0 - beta2) - 1.0, rho_t = rho_inf - 2.0 * step * pow(beta2, step) / bc2;
    const bool rectified = rho_t > 5.0;  // the variance is tractable: the adaptive, rectified step
    const acc_t rect = rectified ? (acc_t)sqrt((rho_t - 4.0) * (rho_t - 2.0) * rho_inf /
                                               ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t)) : (acc_t)1;
    const acc_t bc1_a = (acc_t)bc1, sqrt_bc2 = (acc_t)sqrt(bc2), lr_a = (acc_t)lr, eps = (acc_t)hyper[3];
    const acc_t one_m_beta1 = (acc_t)(1.0 - beta1), beta2_a = (acc_t)beta2, one_m_beta2 = (acc_t)(1.0 - beta2);
    const acc_t weight_decay = (acc_t)hyper[4], decay = (acc_t)(1.0 - lr * hyper[4]);
    ELEMENTS_BEGIN
        acc_t pi = load_param(p, w, i), gi = load_grad(g, i, amp, maximize), mi, vi;
        decay_and_moments(pi, gi, weight_decay, decay, decoupled, m, v, i, one_m_beta1, beta2_a, one_m_beta2, mi, vi);
        acc_t upd = rnd(rnd(mi / bc1_a) * lr_a);                          // exp_avg / bc1 * lr
        if (rectified) {
            const acc_t adaptive = rnd(sqrt_bc2 / rnd(rnd(sqrt(vi)) + eps));  // bc2**0.5 / (sqrt(v) + eps)
            upd = rnd(rnd(upd * adaptive) * rect);
        }
        store_param(p, w, i, pi - upd);                                   // param.add_(update, alpha=-1)
    ELEMENTS_END
    advance_step(t, done, slot, n);
}
