// Multi-tensor Rprop and ASGD updates: one launch updates up to NSLOT parameters (slots, dtypes and master
// weights: optim_common.cuh).
//
// As in optim_adaptive.cu, whatever changes between steps is read from device memory, so a captured launch
// stays right on every replay: `hyper` (the group's hyper-parameters, double), `t` (each parameter's step
// count, advanced by the slot's last block), ASGD's per-parameter `eta` and `mu` (fp32, rewritten by that
// block), `amp` (optional GradScaler state: gradients times inv_scale, the update skipped on found_inf).
//
// Arithmetic follows torch.optim's single-tensor code op by op (see optim_extra.py): PyTorch's Python
// scalars in double, rounded once; its temporary tensors rounded to the state dtype (rnd).
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

// torch.sign: 0 for a NaN
__device__ __forceinline__ acc_t sgn(acc_t x) { return (acc_t)(x > (acc_t)0) - (acc_t)(x < (acc_t)0); }

// flags: bit 2 maximize. hyper = [lr, etaminus, etaplus, step_size_min, step_size_max] (lr seeds the state only).
#define RPROP_ARGS(i) PT* p##i, const PT* g##i, ST* prev##i, ST* ss##i, ST* w##i, long long* t##i, long long n##i, \
    int b##i,
#define RPROP_CASE(i) case i: p = p##i; g = g##i; prev = prev##i; ss = ss##i; w = w##i; t = t##i; n = n##i; \
    b = b##i; break;
extern "C" __global__ void rprop_multi(REPEAT(RPROP_ARGS) const double* hyper, const float* amp,
                                       unsigned int* done, int flags) {
    if (amp != nullptr && amp[2] != 0.0f) return;  // inf/NaN in the scaled gradients: skip the step
    int slot = 0;
    REPEAT(FIND)
    PT* p = p0; const PT* g = g0; ST* prev = prev0; ST* ss = ss0; ST* w = w0; long long* t = t0; long long n = n0;
    int b = b0;
    switch (slot) { REPEAT(RPROP_CASE) }
    const bool maximize = flags & 4;
    // sign[sign > 0] = etaplus etc. write the etas into a tensor of the state dtype
    const acc_t etaminus = rnd((acc_t)hyper[1]), etaplus = rnd((acc_t)hyper[2]);
    const acc_t lo = (acc_t)hyper[3], hi = (acc_t)hyper[4];
    ELEMENTS_BEGIN
        acc_t pi = load_param(p, w, i);
        acc_t gi = load_grad(g, i, amp, maximize);
        const acc_t prod = rnd(gi * (acc_t)prev[i]);                      // grad.mul(prev)
        const acc_t f = prod > (acc_t)0 ? etaplus : prod < (acc_t)0 ? etaminus : (acc_t)1;  // (NaN: sign 0 -> 1)
        acc_t s = rnd(mul_rn((acc_t)ss[i], f));                          // step_size.mul_(sign)
        s = s < lo ? lo : s;                                             // .clamp_(min, max), NaN kept
        s = rnd(s > hi ? hi : s);
        ss[i] = (ST)s;
        if (prod < (acc_t)0) gi = (acc_t)0;                              // grad[sign.eq(etaminus)] = 0
        store_param(p, w, i, pi + (acc_t)-1 * (sgn(gi) * s));            // addcmul_(grad.sign(), step_size, -1)
        prev[i] = (ST)gi;
    ELEMENTS_END
    advance_step(t, done, slot, n);
}

// flags: bit 2 maximize. hyper = [lr, lambd, alpha, t0, weight_decay]. eta, mu: the parameter's fp32 scalars.
#define ASGD_ARGS(i) PT* p##i, const PT* g##i, ST* ax##i, float* eta##i, float* mu##i, ST* w##i, long long* t##i, \
    long long n##i, int b##i,
#define ASGD_CASE(i) case i: p = p##i; g = g##i; ax = ax##i; eta = eta##i; mu = mu##i; w = w##i; t = t##i; \
    n = n##i; b = b##i; break;
extern "C" __global__ void asgd_multi(REPEAT(ASGD_ARGS) const double* hyper, const float* amp,
                                      unsigned int* done, int flags) {
    if (amp != nullptr && amp[2] != 0.0f) return;
    int slot = 0;
    REPEAT(FIND)
    PT* p = p0; const PT* g = g0; ST* ax = ax0; float* eta = eta0; float* mu = mu0; ST* w = w0; long long* t = t0;
    long long n = n0; int b = b0;
    switch (slot) { REPEAT(ASGD_CASE) }
    const bool maximize = flags & 4;
    const double lr = hyper[0], lambd = hyper[1], alpha = hyper[2], t_avg = hyper[3], step = (double)(*t + 1);
    const double eta_d = (double)*eta, mu_d = (double)*mu;  // eta.item(), mu.item()
    const acc_t decay = (acc_t)(1.0 - lambd * eta_d), neg_eta = (acc_t)(-eta_d), mu_a = (acc_t)mu_d;
    const acc_t weight_decay = (acc_t)hyper[4];
    const bool average = mu_d != 1.0;  // mu == 1: ax.copy_(param)
    ELEMENTS_BEGIN
        acc_t pi = load_param(p, w, i);
        const acc_t gi = decayed(load_grad(g, i, amp, maximize), pi, weight_decay);
        pi = rnd(mul_rn(pi, decay));                                     // param.mul_(1 - lambd * eta)
        pi = rnd(pi + neg_eta * gi);                                     // param.add_(grad, alpha=-eta)
        store_param(p, w, i, pi);
        if (average) {
            const acc_t a = (acc_t)ax[i];
            ax[i] = (ST)(a + rnd(mul_rn(rnd(pi - a), mu_a)));           // ax.add_(param.sub(ax).mul_(mu))
        } else {
            ax[i] = (ST)pi;
        }
    ELEMENTS_END
    const float eta_next = (float)(lr / pow(1.0 + lambd * lr * step, alpha));
    const float mu_next = (float)(1.0 / fmax(1.0, step - t_avg));
    advance_step(t, done, slot, n, eta, eta_next, mu, mu_next);  // eta and mu for the next step
}
