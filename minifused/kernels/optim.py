"""Fused optimizer updates on raw arrays: Adam/AdamW (amsgrad) and SGD (momentum, nesterov).

Each function updates lists of arrays in place (parameters and their state). On
the GPU, parameters of one dtype are updated by one launch of a multi-tensor
kernel (``optim.cu``) per 16 parameters: every parameter's pointers and scalars
travel as kernel arguments, so there is no pointer table to upload and no host
synchronization. On the CPU the NumPy reference runs the same arithmetic, op by
op in the parameter's dtype's opmath (float32; float64 for float64), which is
also the order of PyTorch's ``torch.optim.Adam`` / ``AdamW`` / ``SGD``:

Adam/AdamW, per parameter at step ``t`` (already incremented)::

    g = -grad if maximize else grad
    AdamW: p = p * (1 - lr * wd)          Adam: g = g + wd * p
    m = lerp(m, g, 1 - beta1)             (torch.lerp's two-branch formula)
    v = v * beta2 + (1 - beta2) * g * g
    amsgrad: vmax = max(vmax, v); v_used = vmax
    p = p + (-lr / (1 - beta1^t)) * m / (sqrt(v_used) / sqrt(1 - beta2^t) + eps)

SGD::

    d = grad (+ wd * p); d = -d if maximize
    momentum: buf = d on the first step, else buf * momentum + (1 - dampening) * d
              d = d + momentum * buf if nesterov else buf
    p = p + (-lr) * d

Bias corrections and step sizes are computed on the host in double precision,
as PyTorch does for CPU ``step`` counters.
"""
from __future__ import annotations

import math

import numpy as np

from .. import backend

BLOCK = 256
ILP = 4
CHUNK = BLOCK * ILP
MAX_SLOTS = 16
_INT_MAX = 2 ** 31 - 1


def _acc(dtype):
    return np.float64 if np.dtype(dtype) == np.float64 else np.float32


def adam_scalars(lr, beta1, beta2, step):
    """(step_size, sqrt of the second bias correction) for one parameter at ``step``."""
    bc1 = 1.0 - beta1 ** step
    bc2 = 1.0 - beta2 ** step
    return lr / bc1, math.sqrt(bc2)


# ====================================================================== NumPy reference
def _lerp(a, b, w):
    return a + w * (b - a) if w < 0.5 else b - (b - a) * (1 - w)


def adam_ref(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, *, lr, beta1, beta2, eps,
             weight_decay=0.0, amsgrad=False, decoupled=False, maximize=False):
    """NumPy reference of :func:`adam`: updates every array in place."""
    for i, (p, g, m, v) in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs)):
        acc = _acc(p.dtype)
        s = acc
        ss, bc = adam_scalars(lr, beta1, beta2, steps[i])
        pa, ga = p.astype(acc, copy=False), g.astype(acc, copy=False)
        if maximize:
            ga = -ga
        if weight_decay != 0:
            if decoupled:
                pa = pa * s(1.0 - lr * weight_decay)
            else:
                ga = ga + s(weight_decay) * pa
        ma = _lerp(m.astype(acc, copy=False), ga, s(1.0 - beta1))
        va = v.astype(acc, copy=False) * s(beta2)
        va = va + s(1.0 - beta2) * ga * ga
        m[...] = ma
        v[...] = va
        ma, va = m.astype(acc, copy=False), v.astype(acc, copy=False)
        if amsgrad:
            vm = max_exp_avg_sqs[i]
            va = np.maximum(vm.astype(acc, copy=False), va)
            vm[...] = va
        denom = np.sqrt(va) / s(bc) + s(eps)
        p[...] = pa + s(-ss) * (ma / denom)


def sgd_ref(params, grads, bufs, init_bufs, *, lr, momentum=0.0, dampening=0.0, weight_decay=0.0,
            nesterov=False, maximize=False):
    """NumPy reference of :func:`sgd`. ``bufs[i]`` is updated (set, when ``init_bufs[i]``) in place."""
    for p, g, buf, init in zip(params, grads, bufs, init_bufs):
        acc = _acc(p.dtype)
        s = acc
        pa, d = p.astype(acc, copy=False), g.astype(acc, copy=False)
        if maximize:
            d = -d
        if weight_decay != 0:
            d = d + s(weight_decay) * pa
        if momentum != 0:
            b = d if init else buf.astype(acc, copy=False) * s(momentum) + s(1.0 - dampening) * d
            buf[...] = b
            b = buf.astype(acc, copy=False)
            d = d + s(momentum) * b if nesterov else b
        p[...] = pa + s(-lr) * d


# ====================================================================== CUDA
def _options(dtype, nslot):
    name = {np.dtype(np.float32): "float", np.dtype(np.float64): "double",
            np.dtype(np.float16): "__half", backend.bfloat16: "__nv_bfloat16"}[np.dtype(dtype)]
    return (f"-DNSLOT={nslot}", f"-DPT={name}")


def _kernel(name, dtype, nslot):
    from . import get_kernel

    return get_kernel("optim.cu", name, _options(dtype, nslot))


def _groups(arrays):
    """Indices grouped by (device, dtype), in chunks of at most MAX_SLOTS."""
    by_key = {}
    for i, a in enumerate(arrays):
        by_key.setdefault((a.device.id, a.dtype), []).append(i)
    for idx in by_key.values():
        for k in range(0, len(idx), MAX_SLOTS):
            yield idx[k:k + MAX_SLOTS]


def _contig(a):
    import cupy

    return a if a.flags.c_contiguous else cupy.ascontiguousarray(a)


def _launch(name, params, per_slot, scalars):
    """One multi-tensor launch. ``per_slot[i]`` is the tuple of slot i's arguments after the
    element count and first block (arrays first, then scalars), already typed."""
    import cupy

    n = len(params)
    nslot = 4 if n <= 4 else 8 if n <= 8 else 16
    args, block0 = [], 0
    for i in range(nslot):
        if i < n:
            count = params[i].size
            arrays, extra = per_slot[i]
            args += [*arrays, np.int64(count), np.int32(block0), *extra]
            block0 += -(-count // CHUNK)
        else:  # unused slot: any valid pointers, nothing to do
            arrays, extra = per_slot[0]
            args += [*arrays, np.int64(0), np.int32(_INT_MAX), *extra]
    if block0 == 0:
        return
    with cupy.cuda.Device(params[0].device.id):
        _kernel(name, params[0].dtype, nslot)((block0,), (BLOCK,), tuple(args) + tuple(scalars))


def adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, *, lr, beta1, beta2, eps,
         weight_decay=0.0, amsgrad=False, decoupled=False, maximize=False):
    """Adam (``decoupled=False``) or AdamW (``decoupled=True``) on lists of arrays, in place.

    ``steps[i]`` is parameter i's step count after this step (1 on the first).
    ``max_exp_avg_sqs`` is used with ``amsgrad`` only (may be None otherwise).
    All arrays of one parameter share its device and dtype.
    """
    if not params:
        return
    if not backend.is_cuda_array(params[0]):
        return adam_ref(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr=lr, beta1=beta1,
                        beta2=beta2, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        decoupled=decoupled, maximize=maximize)
    flags = int(amsgrad) | int(decoupled) << 1 | int(maximize) << 2
    for idx in _groups(params):
        acc = _acc(params[idx[0]].dtype)
        per_slot = []
        for i in idx:
            ss, bc = adam_scalars(lr, beta1, beta2, steps[i])
            vmax = max_exp_avg_sqs[i] if amsgrad else exp_avg_sqs[i]
            per_slot.append(((params[i], _contig(grads[i]), exp_avgs[i], exp_avg_sqs[i], vmax),
                             (acc(ss), acc(bc))))
        scalars = (acc(1.0 - lr * weight_decay), acc(beta1), acc(beta2), acc(eps), acc(weight_decay),
                   np.int32(flags))
        _launch("adam_multi", [params[i] for i in idx], per_slot, scalars)


def sgd(params, grads, bufs, init_bufs, *, lr, momentum=0.0, dampening=0.0, weight_decay=0.0,
        nesterov=False, maximize=False):
    """SGD on lists of arrays, in place. ``bufs[i]`` is parameter i's momentum buffer (any
    array of its shape when ``momentum == 0``); ``init_bufs[i]`` marks a buffer to set from
    this step's update (PyTorch's first step)."""
    if not params:
        return
    if not backend.is_cuda_array(params[0]):
        return sgd_ref(params, grads, bufs, init_bufs, lr=lr, momentum=momentum, dampening=dampening,
                       weight_decay=weight_decay, nesterov=nesterov, maximize=maximize)
    flags = int(nesterov) | int(maximize) << 1
    for idx in _groups(params):
        acc = _acc(params[idx[0]].dtype)
        per_slot = [((params[i], _contig(grads[i]), bufs[i]), (np.int32(bool(init_bufs[i])),)) for i in idx]
        scalars = (acc(lr), acc(momentum), acc(dampening), acc(weight_decay), np.int32(flags))
        _launch("sgd_multi", [params[i] for i in idx], per_slot, scalars)
