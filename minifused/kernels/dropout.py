"""Dropout primitives: the mask from a counter-based hash, applied in one fused pass.

Element ``i`` (C order) of a call with seed ``s`` is kept when the top 24 bits of
``splitmix64(s + (i + 1) * 0x9E3779B97F4A7C15)`` are ``>= threshold`` with
``threshold = round(p * 2**24)``; kept values are scaled by ``1 / (1 - p)``. The
CUDA kernel (dropout.cu) and the NumPy reference compute the same hash, so for one seed both
devices drop the same elements. The mask kept for the backward is bit-packed (uint32 words,
the layout of ``kernels.elementwise``: 1 bit per element); the backward is
``elementwise.mask_apply``. The seed comes from the host (the caller draws it
from the CPU generator), so no device value is ever read back.

Inside a CUDA-graph capture the host seed would be baked into the graph and every
replay would drop the same elements; there the kernel adds ``counter * 0xD1B54A32D192ED03``
to the seed, where ``counter`` is a per-device uint64 that the captured step advances
before each mask, so each replay draws new masks.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import backend
from . import ARG, Prepared, acc_dtype, aligned_bytes, clear_unset, ctype, get_kernel
from . import elementwise as EW

_GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB


def threshold(p: float) -> int:
    return int(round(p * (1 << 24)))


def _keep_ref(n, seed, thresh):
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + (np.arange(1, n + 1, dtype=np.uint64) * np.uint64(_GOLDEN))
        z = (z ^ (z >> np.uint64(30))) * np.uint64(_M1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(_M2)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(40)) >= np.uint64(thresh)


def dropout_forward_ref(x, seed, p, out=None):
    """NumPy reference of :func:`dropout_forward`: ``(y, mask)``, mask the packed uint32 words."""
    keep = _keep_ref(x.size, seed, threshold(p)).reshape(x.shape)
    y = clear_unset(EW.scaled_copy_ref(x, _scale(x.dtype, p)), keep)
    if out is not None:
        out[...] = y
        y = out
    return y, EW.pack_mask_ref(keep)


def dropout_backward_ref(grad, mask, p):
    return EW.mask_apply(grad, mask, _scale(grad.dtype, p))


_counters = {}  # CUDA device index -> uint64[1], advanced by captured dropout calls


@functools.cache
def _kernel(dtype, name):
    return get_kernel("dropout.cu", name, (f"-DDROP_T={ctype(dtype)}", f"-DDROP_S={ctype(acc_dtype(dtype))}"))


def _scale(dtype, p):
    s = 1.0 / (1.0 - p) if p < 1.0 else 0.0  # p == 1 keeps nothing: every output and gradient is 0
    return np.float64(s) if dtype == np.float64 else np.float32(s)


@functools.lru_cache(maxsize=1024)  # keyed by size: bounded for workloads of many shapes
def _forward_launch(dtype, n, p, dev):
    """The prepared launch of dropout_fwd over ``n`` elements at probability ``p`` on device ``dev``: the call
    gives x, y, the mask, the seed and the replay counter (0: none) (less host time than the RawKernel call,
    which a model's every dropout layer would pay each eager step)."""
    return Prepared(_kernel(dtype, "dropout_fwd"), EW.grid(n + 31), (256,),
                    (ARG, ARG, ARG, np.int64(n), ARG, ARG, np.uint64(threshold(p)), _scale(dtype, p)))


def dropout_forward(x, seed: int, p: float, out=None):
    """``(x * mask / (1 - p), mask)`` with ``0 <= p <= 1``, the mask bit-packed; one fused kernel
    on the GPU. ``out`` (x's shape and dtype) receives the result; it may be ``x`` (in place)."""
    if not backend.is_cuda_array(x):
        return dropout_forward_ref(x, seed, p, out)
    import cupy

    dense = x._c_contiguous
    xc = x if dense else cupy.ascontiguousarray(x)
    n = x.size
    words = EW.mask_words(n)
    if out is not None and dense and out._c_contiguous:
        y, mask = out, cupy.ndarray((words,), cupy.uint32)
    else:  # y and the mask in one allocation
        y_bytes = aligned_bytes(n * x.itemsize)
        mem = cupy.cuda.alloc(y_bytes + 4 * words)
        y = cupy.ndarray(x.shape, x.dtype, memptr=mem)
        mask = cupy.ndarray((words,), cupy.uint32, memptr=mem + y_bytes)
    dev = x.data.device_id
    ctr = _counters.get(dev)
    if backend.is_capturing():
        if ctr is None:
            raise RuntimeError("dropout: its replay counter is created by an eager call; run the step "
                               "eagerly before capturing it (capture_step's warm-up does)")
        cupy.add(ctr, np.uint64(1), out=ctr)  # captured too: every replay advances it before this mask
    else:
        if ctr is None:
            _counters[dev] = cupy.zeros(1, cupy.uint64)
        ctr = None
    if n:
        bits = seed if seed < 1 << 63 else seed - (1 << 64)  # (the launch packs a signed 64-bit value)
        _forward_launch(x.dtype, n, p, dev)(xc.data.ptr, y.data.ptr, mask.data.ptr, bits,
                                            0 if ctr is None else ctr.data.ptr)
    if out is not None and y is not out:  # a non-contiguous out gets it through the temporary
        out[...] = y
        y = out
    return y, mask


def dropout_backward(grad, mask, p: float):
    """``grad * mask / (1 - p)`` (the packed mask of :func:`dropout_forward`)."""
    return EW.mask_apply(grad, mask, _scale(grad.dtype, p))
