"""Softmax / log-softmax over the last axis, fused softmax-cross-entropy, NLL.

All functions take 2-D C-contiguous (M, N) arrays (N = classes for the
losses) and dispatch on the array module: NumPy arrays go to the ``*_ref``
references (fp32 arithmetic, fp64 for fp64 input; written for either array
module, so fp64 CuPy arrays use them too), CuPy fp32/fp16/bf16 arrays to the
kernels in ``softmax.cu``, planned by ``kernels.rows``.

Cross-entropy is split so that the (M, N) softmax is never materialised:
``cross_entropy_forward`` reads the logits once and returns per-row loss, per-row
logsumexp and per-row weight (the 'mean' denominator's terms), and on the GPU
the 'sum' / 'mean' loss too, added by the kernel's last block;
``cross_entropy_backward`` reads the logits once more and writes the logits gradient,
scaled on the device by the upstream gradient (and 1/denominator). That is
three passes over (M, N) for forward+backward -- the least possible for any
upstream gradient, since writing the gradient in the forward would need a
fourth pass to scale it by grad_output.

Class labels outside [0, N) (other than ``ignore_index``) raise ValueError on
the host for NumPy targets. For CuPy targets the kernels set a device flag
instead (no sync) and register :func:`check_label_errors` with
``backend.defer_check``: it reads the flag and raises at the next ``.item()``, or
right after the launch in debug mode (``MINIFUSED_DEBUG=1``).
"""
from __future__ import annotations

import functools

import numpy as np

from .. import backend
from . import ARG, F32, NULL, Prepared, acc_dtype, address as _addr, get_kernel, rows
from .rows import ceil_div, row_blocks, vec_width


# ---------------------------------------------------------------- references


def softmax_forward_ref(x, log=False):
    xp = backend.array_module(x)
    xf = x.astype(acc_dtype(x.dtype).type)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        m = xf.max(axis=-1, keepdims=True) if xf.shape[-1] else xf.sum(axis=-1, keepdims=True)
        z = xf - m
        e = xp.exp(z)
        s = e.sum(axis=-1, keepdims=True)
        y = z - xp.log(s) if log else e / s
    return y.astype(x.dtype)


def softmax_backward_ref(dy, y, log=False):
    xp = backend.array_module(y)
    acc = acc_dtype(y.dtype).type
    yf, g = y.astype(acc), dy.astype(acc)
    if log:
        dx = g - xp.exp(yf) * g.sum(axis=-1, keepdims=True)
    else:
        dx = yf * (g - (g * yf).sum(axis=-1, keepdims=True))
    return dx.astype(y.dtype)


def _check_labels_host(target, n, ignore_index, op):
    bad = (target != ignore_index) & ((target < 0) | (target >= n))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise backend.IndexInputError(f"{op}: target {int(target[i])} at position {i} is out of bounds: "
                                      f"expected class indices in [0, {n}) or ignore_index={ignore_index}")


def _weights_rows(target, weight, ignore_index, n, xp, acc):
    valid = target != ignore_index
    t = backend.where(valid, target, 0)
    wt = weight.astype(acc)[t] if weight is not None else xp.ones(t.shape, acc)
    return valid, t, backend.where(valid, wt, acc(0))


def cross_entropy_forward_ref(x, target, weight=None, ignore_index=-100, label_smoothing=0.0):
    """(loss_rows, lse, row_weights), fp32 (fp64 for fp64 logits): loss_rows and row_weights of length
    M, lse (M, 2), each row's log-sum-exp as its max and the log of the sum of exp(x - max). Kept apart,
    so that x - lse loses nothing to the rounding of max + log(sum) at the max's magnitude (a confident
    row's target gradient p - 1 is small: with logits near 50 in float32 that rounding moved it by 2%)."""
    xp = backend.array_module(x)
    acc = acc_dtype(x.dtype).type
    m, n = x.shape
    if xp is np:
        _check_labels_host(target, n, ignore_index, "cross_entropy")
    xf = x.astype(acc)
    valid, t, rw = _weights_rows(target, weight, ignore_index, n, xp, acc)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        mx = xf.max(axis=-1, keepdims=True)
        ls = xp.log(xp.exp(xf - mx).sum(axis=-1, keepdims=True))
        x_t = xp.take_along_axis(xf, t[:, None], axis=1)
        eps = acc(label_smoothing)
        loss = (1 - eps) * rw * ((mx - x_t) + ls)[:, 0]
        if label_smoothing:
            w = weight.astype(acc) if weight is not None else xp.ones(n, acc)
            smooth = (w[None, :] * ((mx - xf) + ls)).sum(axis=-1)
            loss = loss + eps / n * smooth
    loss = backend.where(valid, loss, acc(0))
    return loss.astype(acc), xp.concatenate([mx, ls], axis=1).astype(acc), rw.astype(acc)


def _row_scale(gout, per_row, denom, m, xp, acc):
    g = gout.astype(acc)
    if per_row:
        return g.reshape(m)
    s = g.reshape(())
    if denom is not None:
        s = s / denom.astype(acc).reshape(())
    return xp.broadcast_to(s, (m,))


def cross_entropy_backward_ref(x, target, weight, lse, gout, per_row, denom, ignore_index=-100, label_smoothing=0.0):
    """The logits gradient. ``gout``: upstream gradient (shape (M,) when per_row,
    else one element); ``denom``: one-element array dividing it ('mean'), or None."""
    xp = backend.array_module(x)
    acc = acc_dtype(x.dtype).type
    m, n = x.shape
    xf = x.astype(acc)
    valid, t, rw = _weights_rows(target, weight, ignore_index, n, xp, acc)
    sc = _row_scale(gout, per_row, denom, m, xp, acc) * valid
    with np.errstate(invalid="ignore", over="ignore"):
        lse = lse.astype(acc)
        p = xp.exp((xf - lse[:, :1]) - lse[:, 1:])
    onehot = xp.zeros((m, n), acc)
    xp.put_along_axis(onehot, t[:, None], acc(1), axis=1)
    eps = acc(label_smoothing)
    g = ((1 - eps) * rw)[:, None] * (p - onehot)
    if label_smoothing:
        w = weight.astype(acc) if weight is not None else xp.ones(n, acc)
        g = g + eps / n * (w.sum() * p - w[None, :])
    g = backend.where(valid[:, None], g * sc[:, None], acc(0))
    return g.astype(x.dtype)


def nll_forward_ref(x, target, weight=None, ignore_index=-100):
    """(loss_rows, row_weights) for log-probabilities ``x``."""
    xp = backend.array_module(x)
    acc = acc_dtype(x.dtype).type
    m, n = x.shape
    if xp is np:
        _check_labels_host(target, n, ignore_index, "nll_loss")
    valid, t, rw = _weights_rows(target, weight, ignore_index, n, xp, acc)
    x_t = xp.take_along_axis(x.astype(acc), t[:, None], axis=1)[:, 0]
    return backend.where(valid, -rw * x_t, acc(0)).astype(acc), rw.astype(acc)


def nll_backward_ref(target, weight, gout, per_row, denom, shape, dtype, ignore_index=-100):
    xp = backend.array_module(target)
    acc = acc_dtype(dtype).type
    m, n = shape
    valid, t, rw = _weights_rows(target, weight, ignore_index, n, xp, acc)
    with np.errstate(invalid="ignore", divide="ignore"):  # 'mean' over no valid row divides by 0: no gradient
        sc = backend.where(valid, _row_scale(gout, per_row, denom, m, xp, acc), acc(0))
    g = xp.zeros((m, n), acc)
    xp.put_along_axis(g, t[:, None], (-rw * sc)[:, None], axis=1)
    return g.astype(dtype)


# ---------------------------------------------------------------- CUDA

_flags = {}


def _flag(dev=None):
    """The label-error flag (an int32 on the device, set by kernels) of device ``dev`` (default: the current one)."""
    import cupy

    dev = cupy.cuda.runtime.getDevice() if dev is None else dev
    if dev not in _flags:
        _flags[dev] = cupy.zeros(1, np.int32)
    return _flags[dev]


def check_label_errors():
    """Raise IndexInputError if a kernel saw a class label out of range since the last check (syncs)."""
    if not _flags:
        return
    for dev, f in _flags.items():
        import cupy

        with cupy.cuda.Device(dev):
            if int(f.get()[0]):
                f.fill(0)
                raise backend.IndexInputError("cross_entropy/nll_loss: a target class index was out of bounds "
                                              "(expected indices in [0, C) or ignore_index)")


def _opts(dtype, vec=1, k=1, tpr=32, nt=256, log=False, tt=None):
    o = rows.options(dtype, vec, k, tpr, nt) + (f"-DMF_LOG={int(log)}",)
    if tt is not None:
        o += ("-DMF_TT=" + ("int" if np.dtype(tt).itemsize == 4 else "long"),)
    return o


def _softmax_plan(name, dtype, n, vec, log, config=None) -> rows.RowPlan:
    """The plan of softmax_fwd / softmax_bwd: the fewest vectors per thread whose row fits (wide_fit;
    the forward tries rows of up to two warps first), blocks of about 256 threads. ``config``: a
    RowConfig."""
    if config is not None:
        k, tpr, nt = config.k, config.tpr, config.nt
        return rows.RowPlan(name, _opts(dtype, vec, k, tpr, nt, log), k, tpr, nt)
    forward = name == "softmax_fwd"
    fit = rows.wide_fit(n, vec, ept_max=32 if forward or np.dtype(dtype).itemsize < 4 else 16,
                        tpr_small=64 if forward else None)
    if fit is None:
        return rows.tiled(name, lambda k, tpr, nt: _opts(dtype, vec, k, tpr, nt, log))
    k, tpr = fit
    # Two-warp forward rows go two to a block (measured faster than four; bench/norms.py).
    nt = 128 if forward and tpr == 64 else rows.block_threads(tpr, 256)
    return rows.RowPlan(name, _opts(dtype, vec, k, tpr, nt, log), k, tpr, nt)


@functools.cache
def _softmax_launch(name, dtype, n, vec, log, config=None):
    """(kernel, threads per block, rows per block, block cap), looked up once per configuration."""
    plan = _softmax_plan(name, dtype, n, vec, log, config)
    return (*rows.resolve("softmax.cu", plan), plan.nt, plan.rows)


def _softmax_forward_cuda(x, log, config=None, out=None):
    import cupy

    m, n = x.shape
    y = cupy.empty_like(x) if out is None else out  # out may be x: each row is read before it is written
    if m == 0 or n == 0:
        return y
    _softmax_prepared("softmax_fwd", x.dtype, m, n, vec_width(x.dtype, n, x, y), log, config, x.data.device_id)(
        x.data.ptr, y.data.ptr)
    return y


@functools.lru_cache(maxsize=1024)  # keyed by the row count too (the grid), as the elementwise launches by size
def _softmax_prepared(name, dtype, m, n, vec, log, config, dev):
    """The :class:`Prepared` launch of ``name`` for M rows: (x, y) per call for the forward, (dy, y, dx) for the
    backward (which CuPy launched, never with programmatic dependent launch: it does not wait for one)."""
    kern, cap, nt, rpb = _softmax_launch(name, dtype, n, vec, log, config)
    forward = name == "softmax_fwd"
    return Prepared(kern, (row_blocks(m, rpb, cap),), (nt,), (ARG,) * (2 if forward else 3) + (np.int32(m),
                                                                                            np.int32(n)),
                    pdl=forward)


def _softmax_backward_cuda(dy, y, log):
    import cupy

    m, n = y.shape
    dx = cupy.empty_like(y)
    if m == 0 or n == 0:
        return dx
    _softmax_prepared("softmax_bwd", y.dtype, m, n, vec_width(y.dtype, n, y, dy, dx), log, None, y.data.device_id)(
        dy.data.ptr, y.data.ptr, dx.data.ptr)
    return dx


def _cross_entropy_forward_plan(dtype, n, vec, tt) -> rows.RowPlan:
    """One vector a thread, rows of one warp, 256 or 1024 threads; blocks of about 256 threads."""
    nvec = ceil_div(n, vec)
    tpr = 32 if nvec <= 256 else (256 if nvec <= 4096 else 1024)
    nt = rows.block_threads(tpr, 256)
    return rows.RowPlan("cross_entropy_fwd", _opts(dtype, vec, 1, tpr, nt, tt=tt), 1, tpr, nt)


@functools.cache
def _cross_entropy_forward_launch(dtype, n, vec, tt):
    """(kernel, rows per block, threads per block): looked up once per configuration, as the
    forward's host time is in every training step's critical path."""
    plan = _cross_entropy_forward_plan(dtype, n, vec, tt)
    return get_kernel("softmax.cu", plan.name, plan.options), plan.rows, plan.nt


_REDUCE = {"none": 0, "sum": 1, "mean": 2}
CROSS_ENTROPY_GRID_MAX = 8192  # blocks of the cross-entropy forward when it also reduces


_tickets = {}  # (device, stream address) -> the stream's cross-entropy ticket (a uint32 array, zero between launches)


def _stream_ticket(dev, stream):
    """The ticket of add_blocks_last for launches on ``stream`` of device ``dev``: zeroed once, and zero again
    after every launch (atomicInc wraps it), so that launches on one stream, which run one after another,
    share it without a memset each (a memset between kernels costs a captured step a few microseconds of
    idle GPU). Launches on other streams, which may run at the same time, have their own. None while
    capturing for a stream that has none yet (one made then would live in the graph's memory): the caller
    zeroes a ticket of its own then."""
    import cupy

    key = (dev, stream.ptr)
    kept = _tickets.get(key)
    if kept is None and not stream.is_capturing():
        kept = _tickets[key] = cupy.zeros(1, np.uint32)
    return kept


@functools.lru_cache(maxsize=256)
def _cross_entropy_forward_prepared(dtype, n, vec, tt, grid, dev):
    """The forward's launch for one configuration and grid on device ``dev``: (x, target, w, lse, loss, rw, label
    flag), M, N, ignore_index, label_smoothing, reduce, (out, denom, partials, ticket) (see :class:`Prepared`: CuPy's
    call converts its 16 arguments on every call, several times the launch's own host time)."""
    kern, _, nt = _cross_entropy_forward_launch(dtype, n, vec, tt)
    return Prepared(kern, (grid,), (nt,), (ARG,) * 8 + (np.int32(n), ARG, F32, ARG) + (ARG,) * 4)


def _cross_entropy_forward_cuda(x, target, weight, ignore_index, label_smoothing, reduction):
    import cupy

    m, n = x.shape
    reduce = _REDUCE[reduction] if m else 0
    grid = 0
    if m:
        vec = vec_width(x.dtype, n, x, weight)
        _, rpb, _ = _cross_entropy_forward_launch(x.dtype, n, vec, target.dtype)
        # With a reduction the grid is bounded (its blocks loop over the rows), so the last block adds
        # at most CROSS_ENTROPY_GRID_MAX partial sums however many rows there are.
        grid = row_blocks(m, rpb, CROSS_ENTROPY_GRID_MAX if reduce else rows.UNBOUNDED)
    # One float32 buffer, as each allocation costs host time before the launch: (mx, ls) per row
    # (2M, for the backward) | per-row loss (M) | per-row weight (M) | 'mean' denominator | a ticket for
    # the kernel's own 'sum' / 'mean' (add_blocks_last in softmax.cu) where the stream has none yet (see
    # _stream_ticket) | the blocks' partial sums (2 * grid, 8-byte aligned).
    buf = cupy.ndarray((4 * m + 2 + (2 * grid if reduce else 0),), np.float32)
    ptr = buf.data.ptr
    loss, rw, denom, ticket, partial = (ptr + 8 * m, ptr + 12 * m, ptr + 16 * m, ptr + 16 * m + 4,
                                        ptr + 16 * m + 8)
    out = None
    if reduce:
        out = cupy.ndarray((), x.dtype)
        stream = cupy.cuda.get_current_stream()
        kept = _stream_ticket(buf.data.device_id, stream)
        if kept is None:
            cupy.cuda.runtime.memsetAsync(ticket, 0, 4, stream.ptr)
        else:
            ticket = kept.data.ptr
    if m:
        dev = buf.data.device_id
        prepared = _cross_entropy_forward_prepared(x.dtype, n, vec, target.dtype, grid, dev)
        prepared(x.data.ptr, target.data.ptr, _addr(weight), ptr, loss, rw, _flag(dev).data.ptr, m, ignore_index,
                 label_smoothing, reduce, _addr(out), denom, partial, ticket)
        backend.defer_check(check_label_errors)
    if reduce:
        return None, buf, None, (out, buf[4 * m:4 * m + 1] if reduce == 2 else None)
    return buf[2 * m:3 * m], buf, buf[3 * m:4 * m], None


@functools.cache
def _cross_entropy_backward_kernel(dtype, vec, tt):
    return get_kernel("softmax.cu", "cross_entropy_bwd", _opts(dtype, vec, tt=tt))


@functools.lru_cache(maxsize=256)
def _cross_entropy_backward_prepared(dtype, vec, tt, cols, n_rows, dev):
    """The backward's launch on device ``dev``: (x, target, w, lse, gout, per_row, denom, wsum, dx, M, N,
    ignore_index), label_smoothing."""
    return Prepared(_cross_entropy_backward_kernel(dtype, vec, tt), (cols, n_rows), (256,), (ARG,) * 12 + (F32,))


def _cross_entropy_backward_cuda(x, target, weight, lse, gout, per_row, denom, ignore_index, label_smoothing):
    import cupy

    m, n = x.shape
    dx = cupy.ndarray(x.shape, x.dtype)  # (x is C-contiguous; CuPy's empty_like costs more host time)
    if m == 0 or n == 0:
        return dx
    vec = vec_width(x.dtype, n, x, weight, dx)
    wsum = weight.astype(np.float32).sum() if weight is not None else None
    if gout.dtype != x.dtype:
        gout = gout.astype(x.dtype)
    cols = ceil_div(ceil_div(n, vec), 256)
    n_rows = min(m, max(1, (rows.current_sm_count() * 64) // cols))
    prepared = _cross_entropy_backward_prepared(x.dtype, vec, target.dtype, cols, n_rows, dx.data.device_id)
    prepared(x.data.ptr, target.data.ptr, _addr(weight), lse.data.ptr, gout.data.ptr, int(bool(per_row)),
             _addr(denom), _addr(wsum), dx.data.ptr, m, n, ignore_index, label_smoothing)
    return dx


def _nll_forward_cuda(x, target, weight, ignore_index):
    import cupy

    m, n = x.shape
    loss = cupy.empty(m, np.float32)
    rw = cupy.empty(m, np.float32)
    if m == 0:
        return loss, rw
    dev = x.data.device_id
    _nll_prepared("nll_fwd", x.dtype, target.dtype, m, n, False, dev)(
        x.data.ptr, target.data.ptr, _addr(weight), loss.data.ptr, rw.data.ptr, _flag(dev).data.ptr, ignore_index)
    backend.defer_check(check_label_errors)
    return loss, rw


@functools.lru_cache(maxsize=256)  # keyed by the row count (the grid)
def _nll_prepared(name, dtype, tt, m, n, per_row, dev):
    """The :class:`Prepared` launch of ``nll_fwd`` (x, target, weight, loss, row weights, the label-error flag,
    ignore_index per call) or ``nll_bwd`` (target, weight, the output gradient, the mean's denominator, dx,
    ignore_index) for M rows of N classes (CuPy's launch converted its nine arguments on every call)."""
    kern = get_kernel("softmax.cu", name, _opts(dtype, tt=tt))
    if name == "nll_fwd":
        return Prepared(kern, (ceil_div(m, 256),), (256,), (ARG,) * 6 + (np.int32(m), np.int32(n), ARG))
    grid = min(ceil_div(m * n, 256), rows.current_sm_count() * 16)
    return Prepared(kern, (grid,), (256,), (ARG, ARG, ARG, np.int32(bool(per_row)), ARG, ARG, np.int32(m),
                                            np.int32(n), ARG))


def _nll_backward_cuda(target, weight, gout, per_row, denom, shape, dtype, ignore_index):
    import cupy

    m, n = shape
    dx = cupy.empty(shape, dtype)
    if m * n == 0:
        return dx
    gout = gout.astype(dtype, copy=False)
    _nll_prepared("nll_bwd", np.dtype(dtype), target.dtype, m, n, bool(per_row), dx.data.device_id)(
        target.data.ptr, _addr(weight), gout.data.ptr, _addr(denom), dx.data.ptr, ignore_index)
    return dx


def _p(a):
    return NULL if a is None else a


# ---------------------------------------------------------------- dispatch


def _gpu(x):
    return backend.is_cuda_array(x) and x.dtype != np.float64


def softmax_forward(x, log=False, config=None, out=None):
    """softmax (or log_softmax with ``log=True``) over the last axis of a 2-D array.
    ``config``: a ``rows.RowConfig`` (CUDA only; None picks the tuned plan). ``out`` (C-contiguous,
    x's shape and dtype) receives the result and may be ``x`` itself (in place)."""
    if _gpu(x):
        return _softmax_forward_cuda(x, log, config, out)
    y = softmax_forward_ref(x, log)
    if out is not None:
        out[...] = y
        y = out
    return y


def softmax_backward(dy, y, log=False):
    """Input gradient of softmax / log_softmax from the output ``y``."""
    return _softmax_backward_cuda(dy, y, log) if _gpu(y) else softmax_backward_ref(dy, y, log)


def cross_entropy_forward(x, target, weight=None, ignore_index=-100, label_smoothing=0.0, reduction="none"):
    """(per-row loss, lse, per-row weight, reduced): ``reduced`` is (loss, 'mean' denominator or None)
    when the kernel has also made the 'sum' / 'mean' reduction (CUDA, M > 0); then the per-row arrays
    are None, else ``reduced`` is. ``lse`` is for cross_entropy_backward, which reads (mx, ls) of each
    row from it."""
    if _gpu(x):
        return _cross_entropy_forward_cuda(x, target, weight, ignore_index, label_smoothing, reduction)
    return cross_entropy_forward_ref(x, target, weight, ignore_index, label_smoothing) + (None,)


def cross_entropy_backward(x, target, weight, lse, gout, per_row, denom, ignore_index=-100, label_smoothing=0.0):
    if _gpu(x):
        return _cross_entropy_backward_cuda(x, target, weight, lse, gout, per_row, denom, ignore_index,
                                            label_smoothing)
    return cross_entropy_backward_ref(x, target, weight, lse, gout, per_row, denom, ignore_index, label_smoothing)


def nll_forward(x, target, weight=None, ignore_index=-100):
    return _nll_forward_cuda(x, target, weight, ignore_index) if _gpu(x) else nll_forward_ref(x, target, weight,
                                                                                              ignore_index)


def nll_backward(target, weight, gout, per_row, denom, shape, dtype, ignore_index=-100):
    if backend.is_cuda_array(target) and np.dtype(dtype) != np.float64:
        return _nll_backward_cuda(target, weight, gout, per_row, denom, shape, dtype, ignore_index)
    return nll_backward_ref(target, weight, gout, per_row, denom, shape, dtype, ignore_index)
