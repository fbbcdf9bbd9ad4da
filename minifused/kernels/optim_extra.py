"""Fused Rprop and ASGD updates on raw arrays (``optim_extra.cu``).

The conventions of :mod:`minifused.kernels.optim` hold: lists of arrays updated in place, one
multi-tensor launch per 16 parameters of a dtype, ``hyper`` (float64, on the parameters' device)
and ``steps`` (0-d int64 per parameter, advanced by the update) read from device memory so a
captured launch stays right, optional GradScaler state ``amp`` and fp32 ``masters`` for
low-precision parameters.

The NumPy references run PyTorch's single-tensor code op by op in the opmath dtype (float32;
float64 for float64), rounding each temporary tensor PyTorch makes to the state dtype, with
PyTorch's Python scalars in double (g = grad * inv_scale, -g if maximize):

Rprop (``hyper = [lr, etaminus, etaplus, step_size_min, step_size_max]``; ``lr`` only seeds
``step_size`` when the state is made; ``sgn(x) = (x > 0) - (x < 0)``, torch.sign, 0 for NaN)::

    prod = g * prev
    f = etaplus where prod > 0, etaminus where prod < 0, else 1     (rounded to the state dtype)
    step_size = clamp(step_size * f, step_size_min, step_size_max)
    g = 0 where prod < 0
    p = p + (-1) * (sgn(g) * step_size);  prev = g

ASGD (``hyper = [lr, lambd, alpha, t0, weight_decay]``; ``eta`` and ``mu``: 0-d float32 per
parameter, as PyTorch keeps them; ``t`` the step count after incrementing)::

    g = g + wd * p                                         (when wd != 0)
    p = p * (1 - lambd * eta);  p = p + (-eta) * g
    ax = ax + (p - ax) * mu if mu != 1 else p
    eta = fp32(lr / (1 + lambd * lr * t) ** alpha);  mu = fp32(1 / max(1, t - t0))
"""
from __future__ import annotations

import numpy as np

from .. import backend
from .optim import _like_param, _grad, _skipped, _store
from .optim_adaptive import _decayed, _run, _setup

SOURCE = "optim_extra.cu"


def _sign(x):
    """torch.sign: 0 for NaN (numpy's sign gives NaN)."""
    return (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)


def asgd_scalars(lr, lambd, alpha, t0, step):
    """(eta, mu) after step ``step``, as PyTorch's Python scalars stored into its float32 tensors."""
    return np.float32(lr / ((1.0 + lambd * lr * step) ** alpha)), np.float32(1.0 / max(1.0, step - t0))


# ====================================================================== NumPy reference
def rprop_ref(params, grads, prevs, step_sizes, steps, hyper, *, maximize=False, masters=None, amp=None):
    """NumPy reference of :func:`rprop`."""
    if _skipped(amp):
        return
    _, etaminus, etaplus, lo, hi = (float(h) for h in hyper)
    for i, (p, g, prev, ss) in enumerate(zip(params, grads, prevs, step_sizes)):
        acc, rnd, pa = _setup(p, ss, masters, i)
        steps[i][...] += 1
        ga = _grad(g, acc, amp, maximize)
        prod = rnd(ga * prev.astype(acc))
        factor = np.where(prod > 0, rnd(acc(etaplus)), np.where(prod < 0, rnd(acc(etaminus)), acc(1.0)))
        size = rnd(np.minimum(np.maximum(rnd(ss.astype(acc) * factor), acc(lo)), acc(hi)))  # (NaN stays)
        ss[...] = size
        ga = np.where(prod < 0, acc(0.0), ga)
        _store(p, masters, i, pa + acc(-1.0) * (_sign(ga) * size))
        prev[...] = ga


def asgd_ref(params, grads, axs, etas, mus, steps, hyper, *, maximize=False, masters=None, amp=None):
    """NumPy reference of :func:`asgd`."""
    if _skipped(amp):
        return
    lr, lambd, alpha, t0, weight_decay = (float(h) for h in hyper)
    for i, (p, g, ax) in enumerate(zip(params, grads, axs)):
        acc, rnd, pa = _setup(p, ax, masters, i)
        steps[i][...] += 1
        ga = _decayed(_grad(g, acc, amp, maximize), pa, weight_decay, acc, rnd)
        eta, mu = float(etas[i]), float(mus[i])
        pa = rnd(pa * acc(1.0 - lambd * eta))  # param.mul_(1 - lambd * eta)
        pa = rnd(pa + acc(-eta) * ga)  # param.add_(grad, alpha=-eta)
        _store(p, masters, i, pa)
        if mu != 1.0:
            a = ax.astype(acc)
            ax[...] = rnd(a + rnd(rnd(pa - a) * acc(mu)))  # ax.add_(param.sub(ax).mul_(mu))
        else:
            ax[...] = pa
        etas[i][...], mus[i][...] = asgd_scalars(lr, lambd, alpha, t0, int(steps[i]))


# ====================================================================== CUDA
def rprop(params, grads, prevs, step_sizes, steps, hyper, *, maximize=False, masters=None, amp=None):
    """Rprop on lists of arrays, in place. ``hyper``: ``[lr, etaminus, etaplus, step_size_min, step_size_max]``."""
    if not params:
        return
    if not backend.is_cuda_array(params[0]):
        return rprop_ref(params, grads, prevs, step_sizes, steps, hyper, maximize=maximize, masters=masters, amp=amp)
    _run("rprop_multi", params,
         lambda i, w: (_like_param(grads[i], params[i]), prevs[i], step_sizes[i], w, steps[i]), masters, hyper,
         amp, int(maximize) << 2, SOURCE)


def asgd(params, grads, axs, etas, mus, steps, hyper, *, maximize=False, masters=None, amp=None):
    """ASGD on lists of arrays, in place. ``hyper``: ``[lr, lambd, alpha, t0, weight_decay]``; ``etas`` and
    ``mus``: each parameter's 0-d float32 ``eta`` and ``mu``, rewritten by the update."""
    if not params:
        return
    if not backend.is_cuda_array(params[0]):
        return asgd_ref(params, grads, axs, etas, mus, steps, hyper, maximize=maximize, masters=masters, amp=amp)
    _run("asgd_multi", params,
         lambda i, w: (_like_param(grads[i], params[i]), axs[i], etas[i], mus[i], w, steps[i]), masters, hyper,
         amp, int(maximize) << 2, SOURCE)
