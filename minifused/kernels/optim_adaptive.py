"""Fused RMSprop, Adagrad, Adadelta, Adamax, NAdam and RAdam updates on raw arrays (``optim_adaptive.cu``).

The conventions of :mod:`minifused.kernels.optim` hold: lists of arrays updated in
place, one multi-tensor launch per 16 parameters of a dtype, ``hyper`` (float64, on
the parameters' device) and ``steps`` (0-d int64 per parameter, advanced by the update)
read from device memory so a captured launch stays right, optional GradScaler state
``amp`` and fp32 ``masters`` for low-precision parameters.

The NumPy references run PyTorch's single-tensor code op by op in the opmath dtype
(float32; float64 for float64), rounding each temporary tensor PyTorch makes to the
state dtype (a no-op for float32 state) and computing PyTorch's Python scalars in double:

RMSprop (``t`` the step count after incrementing; g = grad * inv_scale, -g if maximize)::

    g = g + wd * p                                  (when wd != 0)
    sq = sq * alpha + (1 - alpha) * (g * g)
    centered: ga = lerp(ga, g, 1 - alpha); avg = sqrt(sq - ga * ga) + eps
    else:     avg = sqrt(sq) + eps
    momentum > 0: buf = buf * momentum + g / avg; p = p + (-lr) * buf
    else:         p = p + (-lr) * (g / avg)

Adagrad::

    g = g + wd * p;  sum = sum + g * g
    p = p + (-lr / (1 + (t - 1) * lr_decay)) * (g / (sqrt(sum) + eps))

Adadelta::

    g = g + wd * p;  sq = sq * rho + (1 - rho) * (g * g)
    delta = sqrt(acc + eps) / sqrt(sq + eps) * g
    acc = acc * rho + (1 - rho) * (delta * delta);  p = p + (-lr) * delta

Adamax::

    g = g + wd * p;  m = lerp(m, g, 1 - beta1);  u = max(u * beta2, |g| + eps)
    p = p + (-lr / (1 - beta1^t)) * (m / u)

NAdam (``mu_product``: a per-parameter fp32 scalar, 1 at first; decoupled: p = p * (1 - lr * wd) in place of
the gradient's term)::

    g = g + wd * p;  mu = beta1 (1 - 0.5 * 0.96^(t psi));  mu' = beta1 (1 - 0.5 * 0.96^((t + 1) psi))
    mu_product = mu_product * mu;  m = lerp(m, g, 1 - beta1);  v = v * beta2 + (1 - beta2) * (g * g)
    denom = sqrt(v / (1 - beta2^t)) + eps
    p = p + (-lr (1 - mu) / (1 - mu_product)) * (g / denom)
    p = p + (-lr mu' / (1 - mu_product mu')) * (m / denom)

RAdam (decoupled as NAdam's; rho_inf = 2 / (1 - beta2) - 1, rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t))::

    g = g + wd * p;  m = lerp(m, g, 1 - beta1);  v = v * beta2 + (1 - beta2) * (g * g)
    u = m / (1 - beta1^t) * lr
    rho_t > 5: u = u * (sqrt(1 - beta2^t) / (sqrt(v) + eps)) * sqrt((rho_t - 4)(rho_t - 2) rho_inf
                                                                   / ((rho_inf - 4)(rho_inf - 2) rho_t))
    p = p - u
"""
from __future__ import annotations

import numpy as np

from .. import backend
from . import NULL, acc_dtype
from .optim import _done, _like_param, _grad, _groups, _launch, _lerp, _load, _skipped, _store

SOURCE = "optim_adaptive.cu"


# ====================================================================== NumPy reference
def _setup(p, state, masters, i):
    """(opmath type, rounding to the state dtype, parameter in opmath) of parameter i."""
    acc, st = acc_dtype(p.dtype).type, state.dtype

    def rnd(x):
        return x.astype(st).astype(acc, copy=False)

    return acc, rnd, _load(p, masters, i, acc)


def _decayed(ga, pa, weight_decay, acc, rnd):
    """grad.add(param, alpha=weight_decay): a temporary of the state dtype."""
    return rnd(ga + acc(weight_decay) * pa) if weight_decay != 0 else ga


def rmsprop_ref(params, grads, square_avgs, grad_avgs, momentum_bufs, steps, hyper, *, centered=False,
                use_momentum=False, maximize=False, masters=None, amp=None):
    """NumPy reference of :func:`rmsprop`."""
    if _skipped(amp):
        return
    lr, alpha, eps, weight_decay, momentum = (float(h) for h in hyper)
    for i, (p, g, sq) in enumerate(zip(params, grads, square_avgs)):
        acc, rnd, pa = _setup(p, sq, masters, i)
        steps[i][...] += 1
        ga = _decayed(_grad(g, acc, amp, maximize), pa, weight_decay, acc, rnd)
        s = rnd(sq.astype(acc) * acc(alpha))
        s = rnd(s + acc(1.0 - alpha) * (ga * ga))
        sq[...] = s
        if centered:
            gavg = rnd(_lerp(grad_avgs[i].astype(acc), ga, acc(1.0 - alpha)))
            grad_avgs[i][...] = gavg
            avg = rnd(np.sqrt(rnd(s - gavg * gavg)))
        else:
            avg = rnd(np.sqrt(s))
        avg = rnd(avg + acc(eps))
        if use_momentum:
            b = rnd(momentum_bufs[i].astype(acc) * acc(momentum))
            b = rnd(b + ga / avg)
            momentum_bufs[i][...] = b
            _store(p, masters, i, pa + acc(-lr) * b)
        else:
            _store(p, masters, i, pa + acc(-lr) * (ga / avg))


def adagrad_ref(params, grads, sums, steps, hyper, *, maximize=False, masters=None, amp=None):
    """NumPy reference of :func:`adagrad`."""
    if _skipped(amp):
        return
    lr, lr_decay, weight_decay, eps = (float(h) for h in hyper)
    for i, (p, g, sm) in enumerate(zip(params, grads, sums)):
        acc, rnd, pa = _setup(p, sm, masters, i)
        steps[i][...] += 1
        clr = lr / (1.0 + (int(steps[i]) - 1) * lr_decay)
        ga = _decayed(_grad(g, acc, amp, maximize), pa, weight_decay, acc, rnd)
        s = rnd(sm.astype(acc) + acc(1.0) * (ga * ga))
        sm[...] = s
        std = rnd(rnd(np.sqrt(s)) + acc(eps))
        _store(p, masters, i, pa + acc(-clr) * (ga / std))


def adadelta_ref(params, grads, square_avgs, acc_deltas, steps, hyper, *, maximize=False, masters=None,
                 amp=None):
    """NumPy reference of :func:`adadelta`."""
    if _skipped(amp):
        return
    lr, rho, eps, weight_decay = (float(h) for h in hyper)
    for i, (p, g, sq, ad) in enumerate(zip(params, grads, square_avgs, acc_deltas)):
        acc, rnd, pa = _setup(p, sq, masters, i)
        steps[i][...] += 1
        ga = _decayed(_grad(g, acc, amp, maximize), pa, weight_decay, acc, rnd)
        s = rnd(sq.astype(acc) * acc(rho))
        s = rnd(s + acc(1.0 - rho) * (ga * ga))
        sq[...] = s
        std = rnd(np.sqrt(rnd(s + acc(eps))))
        a = ad.astype(acc)
        delta = rnd(np.sqrt(rnd(a + acc(eps))))
        delta = rnd(rnd(delta / std) * ga)
        a = rnd(a * acc(rho))
        a = rnd(a + acc(1.0 - rho) * (delta * delta))
        ad[...] = a
        _store(p, masters, i, pa + acc(-lr) * delta)


def adamax_ref(params, grads, exp_avgs, exp_infs, steps, hyper, *, maximize=False, masters=None, amp=None):
    """NumPy reference of :func:`adamax`."""
    if _skipped(amp):
        return
    lr, beta1, beta2, eps, weight_decay = (float(h) for h in hyper)
    for i, (p, g, m, u) in enumerate(zip(params, grads, exp_avgs, exp_infs)):
        acc, rnd, pa = _setup(p, m, masters, i)
        steps[i][...] += 1
        clr = lr / (1.0 - beta1 ** int(steps[i]))
        ga = _decayed(_grad(g, acc, amp, maximize), pa, weight_decay, acc, rnd)
        ma = rnd(_lerp(m.astype(acc), ga, acc(1.0 - beta1)))
        m[...] = ma
        ua = np.maximum(rnd(u.astype(acc) * acc(beta2)), rnd(rnd(np.abs(ga)) + acc(eps)))  # (a NaN wins)
        u[...] = ua
        _store(p, masters, i, pa + acc(-clr) * (ma / ua))


def _decay_or_l2(pa, ga, lr, weight_decay, decoupled, acc, rnd):
    """NAdam's and RAdam's weight decay: the parameter shrunk by 1 - lr * wd (decoupled) or wd * p added to
    the gradient; (parameter, gradient)."""
    if weight_decay == 0:
        return pa, ga
    if decoupled:
        return rnd(pa * acc(1.0 - lr * weight_decay)), ga
    return pa, rnd(ga + acc(weight_decay) * pa)


def _moments(m, v, ga, beta1, beta2, acc, rnd):
    """exp_avg.lerp_(g, 1 - beta1) and exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1 - beta2), in place;
    the new values."""
    ma = rnd(_lerp(m.astype(acc), ga, acc(1.0 - beta1)))
    va = rnd(v.astype(acc) * acc(beta2))
    va = rnd(va + acc(1.0 - beta2) * (ga * ga))
    m[...], v[...] = ma, va
    return ma, va


def nadam_ref(params, grads, exp_avgs, exp_avg_sqs, mu_products, steps, hyper, *, decoupled=False, maximize=False,
              masters=None, amp=None):
    """NumPy reference of :func:`nadam`."""
    if _skipped(amp):
        return
    lr, beta1, beta2, eps, weight_decay, psi = (float(h) for h in hyper)
    for i, (p, g, m, v) in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs)):
        acc, rnd, pa = _setup(p, m, masters, i)
        steps[i][...] += 1
        t = int(steps[i])
        pa, ga = _decay_or_l2(pa, _grad(g, acc, amp, maximize), lr, weight_decay, decoupled, acc, rnd)
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (t * psi))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * psi))
        mu_product = np.float32(np.float32(mu_products[i]) * np.float32(mu))  # an fp32 tensor times a float
        mu_products[i][...] = mu_product
        ma, va = _moments(m, v, ga, beta1, beta2, acc, rnd)
        denom = rnd(rnd(np.sqrt(rnd(va / acc(1.0 - beta2 ** t)))) + acc(eps))
        pa = rnd(pa + acc(-lr * (1.0 - mu) / (1.0 - float(mu_product))) * (ga / denom))
        _store(p, masters, i, pa + acc((-lr * mu_next) / (1.0 - float(mu_product) * mu_next)) * (ma / denom))


def radam_ref(params, grads, exp_avgs, exp_avg_sqs, steps, hyper, *, decoupled=False, maximize=False, masters=None,
              amp=None):
    """NumPy reference of :func:`radam`."""
    if _skipped(amp):
        return
    lr, beta1, beta2, eps, weight_decay = (float(h) for h in hyper)
    for i, (p, g, m, v) in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs)):
        acc, rnd, pa = _setup(p, m, masters, i)
        steps[i][...] += 1
        t = int(steps[i])
        pa, ga = _decay_or_l2(pa, _grad(g, acc, amp, maximize), lr, weight_decay, decoupled, acc, rnd)
        ma, va = _moments(m, v, ga, beta1, beta2, acc, rnd)
        bc2 = 1.0 - beta2 ** t
        rho_inf = 2.0 / (1.0 - beta2) - 1.0
        rho_t = rho_inf - 2.0 * t * beta2 ** t / bc2
        u = rnd(rnd(ma / acc(1.0 - beta1 ** t)) * acc(lr))
        if rho_t > 5.0:
            rect = ((rho_t - 4.0) * (rho_t - 2.0) * rho_inf / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t)) ** 0.5
            adaptive = rnd(acc(bc2 ** 0.5) / rnd(rnd(np.sqrt(va)) + acc(eps)))
            u = rnd(rnd(u * adaptive) * acc(rect))
        _store(p, masters, i, pa - u)


# ====================================================================== CUDA
def _run(name, params, per_param, masters, hyper, amp, flags, source=SOURCE):
    """Launch ``name`` (of ``source``) over ``params`` in chunks of one (device, dtype, master) each;
    ``per_param(i, w)`` gives parameter i's arrays after its gradient (``w``: its master or the parameter)."""
    tail = (hyper, NULL if amp is None else amp, _done(params[0].device.id), np.int32(flags))
    for idx, master in _groups(params, masters):
        per_slot = [((params[i], *per_param(i, masters[i] if master else params[i])), ()) for i in idx]
        _launch(name, per_slot, tail, master, source)


def rmsprop(params, grads, square_avgs, grad_avgs, momentum_bufs, steps, hyper, *, centered=False,
            use_momentum=False, maximize=False, masters=None, amp=None):
    """RMSprop on lists of arrays, in place. ``hyper``: ``[lr, alpha, eps, weight_decay, momentum]``.
    ``grad_avgs`` is used with ``centered``, ``momentum_bufs`` with ``use_momentum`` (PyTorch's
    ``momentum > 0``, decided when the step is launched); either may be None otherwise."""
    if not params:
        return
    if not backend.is_cuda_array(params[0]):
        return rmsprop_ref(params, grads, square_avgs, grad_avgs, momentum_bufs, steps, hyper, centered=centered,
                           use_momentum=use_momentum, maximize=maximize, masters=masters, amp=amp)
    flags = int(centered) | int(use_momentum) << 1 | int(maximize) << 2

    def per_param(i, w):  # unused state slots get any array of the state dtype (never touched)
        sq = square_avgs[i]
        return (_like_param(grads[i], params[i]), sq, grad_avgs[i] if centered else sq,
                momentum_bufs[i] if use_momentum else sq, w, steps[i])

    _run("rmsprop_multi", params, per_param, masters, hyper, amp, flags)


def adagrad(params, grads, sums, steps, hyper, *, maximize=False, masters=None, amp=None):
    """Adagrad on lists of arrays, in place. ``hyper``: ``[lr, lr_decay, weight_decay, eps]``."""
    if not params:
        return
    if not backend.is_cuda_array(params[0]):
        return adagrad_ref(params, grads, sums, steps, hyper, maximize=maximize, masters=masters, amp=amp)
    _run("adagrad_multi", params, lambda i, w: (_like_param(grads[i], params[i]), sums[i], w, steps[i]), masters,
         hyper, amp, int(maximize) << 2)


def adadelta(params, grads, square_avgs, acc_deltas, steps, hyper, *, maximize=False, masters=None, amp=None):
    """Adadelta on lists of arrays, in place. ``hyper``: ``[lr, rho, eps, weight_decay]``."""
    if not params:
        return
    if not backend.is_cuda_array(params[0]):
        return adadelta_ref(params, grads, square_avgs, acc_deltas, steps, hyper, maximize=maximize,
                            masters=masters, amp=amp)
    _run("adadelta_multi", params,
         lambda i, w: (_like_param(grads[i], params[i]), square_avgs[i], acc_deltas[i], w, steps[i]), masters,
         hyper, amp, int(maximize) << 2)


def adamax(params, grads, exp_avgs, exp_infs, steps, hyper, *, maximize=False, masters=None, amp=None):
    """Adamax on lists of arrays, in place. ``hyper``: ``[lr, beta1, beta2, eps, weight_decay]``."""
    if not params:
        return
    if not backend.is_cuda_array(params[0]):
        return adamax_ref(params, grads, exp_avgs, exp_infs, steps, hyper, maximize=maximize, masters=masters,
                          amp=amp)
    _run("adamax_multi", params,
         lambda i, w: (_like_param(grads[i], params[i]), exp_avgs[i], exp_infs[i], w, steps[i]), masters, hyper,
         amp, int(maximize) << 2)


def nadam(params, grads, exp_avgs, exp_avg_sqs, mu_products, steps, hyper, *, decoupled=False, maximize=False,
          masters=None, amp=None):
    """NAdam on lists of arrays, in place. ``hyper``: ``[lr, beta1, beta2, eps, weight_decay, momentum_decay]``;
    ``mu_products``: each parameter's 0-d float32 running product of the momentum coefficients."""
    if not params:
        return
    if not backend.is_cuda_array(params[0]):
        return nadam_ref(params, grads, exp_avgs, exp_avg_sqs, mu_products, steps, hyper, decoupled=decoupled,
                         maximize=maximize, masters=masters, amp=amp)
    _run("nadam_multi", params,
         lambda i, w: (_like_param(grads[i], params[i]), exp_avgs[i], exp_avg_sqs[i], mu_products[i], w, steps[i]),
         masters, hyper, amp, int(decoupled) << 1 | int(maximize) << 2)


def radam(params, grads, exp_avgs, exp_avg_sqs, steps, hyper, *, decoupled=False, maximize=False, masters=None,
          amp=None):
    """RAdam on lists of arrays, in place. ``hyper``: ``[lr, beta1, beta2, eps, weight_decay]``."""
    if not params:
        return
    if not backend.is_cuda_array(params[0]):
        return radam_ref(params, grads, exp_avgs, exp_avg_sqs, steps, hyper, decoupled=decoupled,
                         maximize=maximize, masters=masters, amp=amp)
    _run("radam_multi", params,
         lambda i, w: (_like_param(grads[i], params[i]), exp_avgs[i], exp_avg_sqs[i], w, steps[i]), masters,
         hyper, amp, int(decoupled) << 1 | int(maximize) << 2)
