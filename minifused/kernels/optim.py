"""Fused optimizer updates on raw arrays: Adam/AdamW (amsgrad) and SGD (momentum, nesterov),
plus the GradScaler's device-side pieces (inf/NaN check, scale update).

Each function updates lists of arrays in place (parameters and their state). On
the GPU, parameters of one dtype are updated by one launch of a multi-tensor
kernel (``optim.cu``, its slot machinery in ``optim_common.cuh``) per 16 parameters:
every parameter's pointers travel as kernel arguments, so there is no pointer table
to upload and no host synchronization. Whatever changes from step to step is read from device memory,
so a launch captured into a CUDA graph stays right on every replay:

* ``hyper``: the group's hyper-parameters (Adam: lr, beta1, beta2, eps, weight_decay; SGD:
  lr, momentum, dampening, weight_decay), an array on the parameters' device (float64),
  rewritten by the optimizer when they change;
* ``steps``: each parameter's step count, a 0-d int64 array that the update advances;
* ``amp`` (optional): a GradScaler's float32 state ``[scale, inv_scale, found_inf,
  growth_tracker]``: gradients are multiplied by ``inv_scale``, and when ``found_inf`` is
  set nothing changes at all (parameters, state, step counts);
* ``masters`` (optional): fp32 master weights of low-precision parameters; the update
  runs on them (with fp32 state) and the parameter receives the rounded result.

On the CPU the NumPy reference runs the same arithmetic, op by op in the parameter's
dtype's opmath (float32; float64 for float64), which is also the order of PyTorch's
``torch.optim.Adam`` / ``AdamW`` / ``SGD``:

Adam/AdamW, per parameter at step ``t`` (after incrementing)::

    g = grad * inv_scale (with amp);  g = -g if maximize
    AdamW: p = p * (1 - lr * wd)          Adam: g = g + wd * p
    m = lerp(m, g, 1 - beta1)             (torch.lerp's two-branch formula)
    v = v * beta2 + (1 - beta2) * (g * g)   (the product v * beta2 rounded on its own)
    amsgrad: vmax = max(vmax, v); v_used = vmax
    p = p + (-lr / (1 - beta1^t)) * m / (sqrt(v_used) / sqrt(1 - beta2^t) + eps)

SGD::

    d = grad (* inv_scale) (+ wd * p); d = -d if maximize
    momentum: buf = d on the first step, else buf * momentum + (1 - dampening) * d
              d = d + momentum * buf if nesterov else buf
    p = p + (-lr) * d

The scalars PyTorch computes in Python -- ``1 - beta1``, ``1 - beta2``, the bias corrections
``1 - beta^t`` and ``sqrt(1 - beta2^t)``, the step size, ``1 - dampening``, ``1 - lr * wd`` --
are computed in double precision (on the host for the reference, in the kernel on the GPU, where
the step count lives) and rounded to the opmath dtype once, as PyTorch does for CPU ``step``
counters. RMSprop, Adagrad, Adadelta and the Adam variants: ``optim_adaptive.py``; Rprop, ASGD: ``optim_extra.py``.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .. import backend
from . import ARG, NULL, Prepared, acc_dtype, c_contiguous, ctype, get_kernel, is_channels_last, layout_like

BLOCK = 256
ILP = 8  # elements per thread: optim_common.cuh's ILP
CHUNK = BLOCK * ILP
MAX_SLOTS = 16
_INT_MAX = 2 ** 31 - 1


def adam_scalars(lr, beta1, beta2, step):
    """(step_size, sqrt of the second bias correction) for one parameter at ``step``."""
    bc1 = 1.0 - beta1 ** step
    bc2 = 1.0 - beta2 ** step
    return lr / bc1, math.sqrt(bc2)


# ====================================================================== NumPy reference
def _lerp(a, b, w):
    return a + w * (b - a) if w < 0.5 else b - (b - a) * (1 - w)


def _skipped(amp):
    return amp is not None and float(amp[2]) != 0.0


def _load(p, masters, i, acc):
    w = masters[i] if masters is not None else None
    return (w if w is not None else p).astype(acc, copy=False)


def _store(p, masters, i, value):
    w = masters[i] if masters is not None else None
    if w is not None:
        w[...] = value
    p[...] = value


def _grad(g, acc, amp, maximize):
    ga = g.astype(acc, copy=False)
    if amp is not None:
        ga = ga * acc(amp[1])
    return -ga if maximize else ga


def adam_ref(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, hyper, *, amsgrad=False,
             decoupled=False, maximize=False, masters=None, amp=None):
    """NumPy reference of :func:`adam`: updates every array (and step count) in place."""
    if _skipped(amp):
        return
    lr, beta1, beta2, eps, weight_decay = (float(h) for h in hyper)
    for i, (p, g, m, v) in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs)):
        acc = s = acc_dtype(p.dtype).type
        steps[i][...] += 1
        ss, bc = adam_scalars(lr, beta1, beta2, int(steps[i]))
        if (amp is None and not amsgrad and (masters is None or masters[i] is None)
                and p.dtype == g.dtype == m.dtype == v.dtype == acc):
            _adam_in_place(p, g, m, v, s, lr, beta1, beta2, eps, weight_decay, decoupled, maximize, ss, bc)
            continue
        pa, ga = _load(p, masters, i, acc), _grad(g, acc, amp, maximize)
        if weight_decay != 0:
            if decoupled:
                pa = pa * s(1.0 - lr * weight_decay)
            else:
                ga = ga + s(weight_decay) * pa
        ma = _lerp(m.astype(acc, copy=False), ga, s(1.0 - beta1))
        va = v.astype(acc, copy=False) * s(beta2)
        va = va + s(1.0 - beta2) * (ga * ga)
        m[...] = ma
        v[...] = va
        ma, va = m.astype(acc, copy=False), v.astype(acc, copy=False)
        if amsgrad:
            vm = max_exp_avg_sqs[i]
            va = np.maximum(vm.astype(acc, copy=False), va)
            vm[...] = va
        denom = np.sqrt(va) / s(bc) + s(eps)
        _store(p, masters, i, pa + s(-ss) * (ma / denom))


ADAM_CHUNK = 1 << 15  # elements :func:`_adam_in_place` updates at a time (see there)


def _adam_in_place(p, g, m, v, s, lr, beta1, beta2, eps, weight_decay, decoupled, maximize, ss, bc):
    """:func:`adam_ref`'s arithmetic, operation for operation (so the same roundings), written into the arrays
    with two scratch arrays instead of a temporary per operation: the cpu path of a plain float32/float64
    parameter. Contiguous arrays are updated ``ADAM_CHUNK`` elements at a time: a chunk's operands stay in the
    cache across the update's dozen operations, so each array crosses the memory bus once, not once per
    operation (each element sees the same operations either way)."""
    arrays = (p, g, m, v)
    if p.ndim == 0:  # as one-element views: NumPy's ufuncs give 0-d operands a scalar, which out= cannot take
        p, g, m, v = (a.reshape(1) for a in arrays)
    if p.size <= ADAM_CHUNK or not all(a.flags.c_contiguous for a in arrays):
        _adam_update(p, g, m, v, s, lr, beta1, beta2, eps, weight_decay, decoupled, maximize, ss, bc)
        return
    flat = [a.reshape(-1) for a in arrays]  # (views: the arrays are contiguous)
    for lo in range(0, p.size, ADAM_CHUNK):
        _adam_update(*(a[lo:lo + ADAM_CHUNK] for a in flat), s, lr, beta1, beta2, eps, weight_decay, decoupled,
                     maximize, ss, bc)


def _adam_update(p, g, m, v, s, lr, beta1, beta2, eps, weight_decay, decoupled, maximize, ss, bc):
    """One :func:`_adam_in_place` update of the arrays (or of one chunk of them)."""
    ga = -g if maximize else g
    if weight_decay != 0:
        if decoupled:
            p *= s(1.0 - lr * weight_decay)
        else:
            ga = ga + s(weight_decay) * p
    t = np.subtract(ga, m)  # m + (1 - beta1) (g - m), as _lerp for a weight below 0.5
    if 1.0 - beta1 < 0.5:
        t *= s(1.0 - beta1)
        m += t
    else:
        m[...] = ga - t * (1 - s(1.0 - beta1))
    v *= s(beta2)
    np.multiply(ga, ga, out=t)
    t *= s(1.0 - beta2)
    v += t
    np.sqrt(v, out=t)
    t /= s(bc)
    t += s(eps)
    np.divide(m, t, out=t)
    t *= s(-ss)
    p += t


def sgd_ref(params, grads, bufs, init_bufs, hyper, *, nesterov=False, maximize=False, masters=None, amp=None):
    """NumPy reference of :func:`sgd`. ``bufs[i]`` is updated (set, when ``init_bufs[i]``) in place."""
    if _skipped(amp):
        return
    lr, momentum, dampening, weight_decay = (float(h) for h in hyper)
    for i, (p, g, buf, init) in enumerate(zip(params, grads, bufs, init_bufs)):
        acc = s = acc_dtype(p.dtype).type
        pa, d = _load(p, masters, i, acc), _grad(g, acc, amp, maximize)
        if weight_decay != 0:
            d = d + s(weight_decay) * pa
        if momentum != 0:
            b = d if init else buf.astype(acc, copy=False) * s(momentum) + s(1.0 - dampening) * d
            buf[...] = b
            b = buf.astype(acc, copy=False)
            d = d + s(momentum) * b if nesterov else b
        _store(p, masters, i, pa + s(-lr) * d)


def nonfinite_ref(grads, amp):
    """Set ``amp[2]`` (found_inf) to 1 when any gradient holds an inf or NaN; never clear it."""
    if any(not np.isfinite(g.astype(acc_dtype(g.dtype), copy=False)).all() for g in grads):
        amp[2] = 1.0


def scaler_update_ref(amp, growth, backoff, interval):
    """GradScaler.update on ``amp = [scale, inv_scale, found_inf, growth_tracker]`` (float32)."""
    f = np.float32
    if amp[2] != 0:
        amp[0], amp[3] = amp[0] * f(backoff), 0
    else:
        amp[3] += 1
        if amp[3] >= f(interval):
            with np.errstate(over="ignore"):
                grown = amp[0] * f(growth)
            if np.isfinite(grown):
                amp[0] = grown
            amp[3] = 0
    amp[1] = f(1) / amp[0]
    amp[2] = 0


# ====================================================================== CUDA
def _kernel(name, dtype, nslot, master=False, source="optim.cu"):
    master_opt = ("-DMASTER=1",) if master else ()
    return get_kernel(source, name, (f"-DNSLOT={nslot}", f"-DPT={ctype(dtype)}") + master_opt)


def _groups(arrays, masters=None):
    """(indices, master?) grouped by (device, dtype, master weights), in chunks of at most MAX_SLOTS."""
    by_key = {}
    for i, a in enumerate(arrays):
        has_master = masters is not None and masters[i] is not None
        by_key.setdefault((a.data.device_id, a.dtype, has_master), []).append(i)
    for (_, _, has_master), idx in by_key.items():
        for k in range(0, len(idx), MAX_SLOTS):
            yield idx[k:k + MAX_SLOTS], has_master


def _contig(a):
    """``a`` dense in C order or channels-last (a walk of its memory visits every element once)."""
    import cupy

    return a if c_contiguous(a) or is_channels_last(a) else cupy.ascontiguousarray(a)


def _check_layouts(name, arrays):
    p = arrays[0]
    if not is_channels_last(p):
        raise RuntimeError(f"{name}: a parameter must be dense, in C order or channels-last; got shape {p.shape} "
                           f"with strides {p.strides}")
    for a in arrays[1:]:
        if a.shape == p.shape and not is_channels_last(a):
            raise RuntimeError(f"{name}: a channels-last parameter's gradient and state must be channels-last too; "
                               f"got strides {a.strides} beside the parameter's {p.strides}")


def _like_param(g, p):
    """Gradient ``g`` in the memory order of its parameter ``p``: the kernels walk both in memory order."""
    return layout_like(g, p)


_done_counters = {}


def _done(device_id):
    """MAX_SLOTS zeroed counters per device for adam_multi's last-block step advance; each launch
    leaves them zeroed, and launches on a device run one after another in this library."""
    import cupy

    if device_id not in _done_counters:
        with cupy.cuda.Device(device_id):
            _done_counters[device_id] = cupy.zeros(MAX_SLOTS, cupy.uint32)
    return _done_counters[device_id]


@functools.lru_cache(maxsize=1024)  # keyed by parameter sizes: bounded
def _prepared(name, dtype, nslot, master, source, blocks, nargs, dev):
    """The launch of ``name`` over ``blocks`` blocks with ``nargs`` arguments, each given per call."""
    return Prepared(_kernel(name, dtype, nslot, master, source), (blocks,), (BLOCK,), (ARG,) * nargs)


class Replay:
    """The launches of one optimizer step, recorded (see :func:`sgd`'s ``record``) to be issued again with new
    gradients: ``replay(grads)``, ``grads[j]`` the gradient of the recording's ``params[j]``. Valid while
    everything else the launches read stays where it was: the parameters' and state's arrays, the hyper-parameter
    arrays and the flags (the optimizer checks that), each gradient laid out as its parameter."""

    def __init__(self):
        self.params = []  # the parameters whose gradients the launches read, in the order replay takes them
        self._launches = []  # (device id, Prepared, values, ((value index, gradient index), ...))

    def add(self, dev, launch, values, grads):
        """One launch: ``grads`` the (value index, parameter) pairs whose values are gradient addresses."""
        at = {id(p): j for j, p in enumerate(self.params)}
        slots = []
        for pos, p in grads:
            if id(p) not in at:
                at[id(p)] = len(self.params)
                self.params.append(p)
            slots.append((pos, at[id(p)]))
        self._launches.append((dev, launch, tuple(values), tuple(slots)))

    def __call__(self, grads):
        import cupy

        for dev, launch, values, slots in self._launches:
            values = list(values)
            for pos, j in slots:
                values[pos] = grads[j].data.ptr
            with cupy.cuda.Device(dev):
                launch(*values)


def _launch(name, per_slot, scalars, master=False, source="optim.cu", record=None, params=None):
    """One multi-tensor launch of kernel ``name`` of ``source``. ``per_slot[i]`` = (arrays, extra):
    slot i's arrays (the first one sets the element count, the second is its gradient) and its scalars after
    the element count and first block; ``scalars`` (arrays or integers) follow the slots. ``record`` (a
    :class:`Replay`, with ``params[i]`` the parameter of slot i): the launch added to it."""
    import cupy

    n = len(per_slot)
    nslot = 4 if n <= 4 else 8 if n <= 8 else 16
    values, block0, grads = [], 0, []
    for i, (arrays, extra) in enumerate(per_slot):
        count = arrays[0].size
        if not c_contiguous(arrays[0]):  # a channels-last parameter: its gradient and state must be so too
            _check_layouts(name, arrays)
        if record is not None:
            grads.append((len(values) + 1, params[i]))
        values += [a.data.ptr for a in arrays]
        values += (count, block0, *extra)
        block0 += max(1, -(-count // CHUNK))  # an empty parameter still owns a block (its step count)
    if nslot > n:  # unused slots: any valid pointers, nothing to do
        arrays, extra = per_slot[0]
        values += ([a.data.ptr for a in arrays] + [0, _INT_MAX, *extra]) * (nslot - n)
    values += [a.data.ptr if isinstance(a, cupy.ndarray) else int(a) for a in scalars]
    first = per_slot[0][0][0]
    dev = first.data.device_id
    launch = _prepared(name, first.dtype, nslot, master, source, block0, len(values), dev)
    with cupy.cuda.Device(dev):
        launch(*values)
    if record is not None:
        record.add(dev, launch, values, grads)


def adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, hyper, *, amsgrad=False,
         decoupled=False, maximize=False, masters=None, amp=None, record=None):
    """Adam (``decoupled=False``) or AdamW (``decoupled=True``) on lists of arrays, in place.

    ``steps[i]``: parameter i's step count before this step (0-d int64), advanced by one.
    ``hyper``: ``[lr, beta1, beta2, eps, weight_decay]`` (float64, on the parameters' device).
    ``max_exp_avg_sqs`` is used with ``amsgrad`` only (may be None otherwise); ``masters``
    (or its entries) may be None; ``amp`` is a GradScaler state (module docstring).
    All arrays of one parameter share its device; state has the dtype of its master or parameter.
    ``record``: ``(Replay, the parameter tensors)``: on the GPU, the launches are added to the Replay.
    """
    if not params:
        return
    if not backend.is_cuda_array(params[0]):
        return adam_ref(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, hyper, amsgrad=amsgrad,
                        decoupled=decoupled, maximize=maximize, masters=masters, amp=amp)
    flags = int(amsgrad) | int(decoupled) << 1 | int(maximize) << 2
    tail = (hyper, NULL if amp is None else amp, _done(params[0].device.id), np.int32(flags))
    for idx, master in _groups(params, masters):
        per_slot = []
        for i in idx:
            vmax = max_exp_avg_sqs[i] if amsgrad else exp_avg_sqs[i]
            w = masters[i] if master else params[i]
            g = _like_param(grads[i], params[i])
            per_slot.append(((params[i], g, exp_avgs[i], exp_avg_sqs[i], vmax, w, steps[i]), ()))
        _launch("adam_multi", per_slot, tail, master, **_recording(record, idx))


def sgd(params, grads, bufs, init_bufs, hyper, *, nesterov=False, maximize=False, masters=None, amp=None,
        record=None):
    """SGD on lists of arrays, in place. ``bufs[i]`` is parameter i's momentum buffer (any
    array of its state dtype when ``momentum == 0``); ``init_bufs[i]`` marks a buffer to set from
    this step's update (PyTorch's first step). ``hyper``: ``[lr, momentum, dampening, weight_decay]``.
    ``record``: as :func:`adam`'s."""
    if not params:
        return
    if not backend.is_cuda_array(params[0]):
        return sgd_ref(params, grads, bufs, init_bufs, hyper, nesterov=nesterov, maximize=maximize,
                       masters=masters, amp=amp)
    flags = int(nesterov) | int(maximize) << 1
    tail = (hyper, NULL if amp is None else amp, np.int32(flags))
    for idx, master in _groups(params, masters):
        per_slot = [((params[i], _like_param(grads[i], params[i]), bufs[i], masters[i] if master else params[i]),
                     (int(bool(init_bufs[i])),)) for i in idx]
        _launch("sgd_multi", per_slot, tail, master, **_recording(record, idx))


def _recording(record, idx):
    """``_launch``'s recording arguments for the slots of parameters ``idx`` of a ``(Replay, tensors)`` record."""
    if record is None:
        return {}
    replay, tensors = record
    return {"record": replay, "params": [tensors[i] for i in idx]}


def nonfinite(grads, amp):
    """Set the GradScaler's found_inf (``amp[2]``) when any gradient holds an inf or NaN; one
    launch per 16 gradients of a dtype, no host synchronization."""
    if not grads:
        return
    if not backend.is_cuda_array(grads[0]):
        return nonfinite_ref(grads, amp)
    for idx, _ in _groups(grads):
        _launch("nonfinite_multi", [((_contig(grads[i]),), ()) for i in idx], (amp,))


def scaler_update(amp, growth, backoff, interval):
    """Back off / grow the loss scale on the device from found_inf, then clear found_inf."""
    if not backend.is_cuda_array(amp):
        return scaler_update_ref(amp, growth, backoff, interval)
    import cupy

    with cupy.cuda.Device(amp.device.id):
        _kernel("scaler_update", np.float32, 4)((1,), (1,), (amp, np.float32(growth), np.float32(backoff),
                                                               np.float32(interval)))


def set_scalars(dst, values):
    """``dst[:len(values)] = values`` (float64, at most 8): on the GPU a one-thread launch whose
    arguments carry the values, ordered on the stream with no host buffer to keep alive."""
    if not backend.is_cuda_array(dst):
        dst[:len(values)] = values
        return
    import cupy

    vals = [np.float64(v) for v in values] + [np.float64(0)] * (8 - len(values))
    with cupy.cuda.Device(dst.device.id):
        _kernel("set_scalars", np.float32, 4)((1,), (1,), (dst, np.int32(len(values)), *vals))


def copy_scalar(dst, i, src):
    """``dst[i] = src`` (a one-element array of any real dtype, on dst's device), cast to float64 on the stream:
    a tensor hyper-parameter's value at the moment the step runs, with no read on the host."""
    if not backend.is_cuda_array(dst):
        dst[i] = src.reshape(-1)[0]
        return
    import cupy

    src = src.reshape(1)
    with cupy.cuda.Device(dst.device.id):
        if src.dtype == backend.bfloat16:  # (no bfloat16 loop in copyto; exact in float32)
            src = src.astype(np.float32)
        cupy.copyto(dst[i:i + 1], src, casting="unsafe")
