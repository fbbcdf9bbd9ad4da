"""Dropout primitives: the mask from a counter-based hash, applied in one fused pass.

Element ``i`` (C order) of a call with seed ``s`` is kept when the top 24 bits of
``splitmix64(s + (i + 1) * 0x9E3779B97F4A7C15)`` are ``>= threshold`` with
``threshold = round(p * 2**24)``; kept values are scaled by ``1 / (1 - p)``. The
CuPy kernel and the NumPy reference compute the same hash, so for one seed both
devices drop the same elements. The seed comes from the host (the caller draws it
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


def dropout_fwd_ref(x, seed, p):
    """NumPy reference of :func:`dropout_fwd`: ``(y, mask)``, mask a bool array of x's shape."""
    mask = _keep_ref(x.size, seed, threshold(p)).reshape(x.shape)
    y = np.where(mask, x * _scale(x.dtype, p), 0).astype(x.dtype)
    return y, mask


def dropout_bwd_ref(grad, mask, p):
    return np.where(mask, grad * _scale(grad.dtype, p), 0).astype(grad.dtype)


_FWD = """
unsigned long long z = seed + (unsigned long long)(i + 1) * 0x9E3779B97F4A7C15ULL;
z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
z = z ^ (z >> 31);
bool keep = (z >> 40) >= thresh;
mask = keep;
y = keep ? (T)((S)x * scale) : (T)(S)0;
"""
_BWD = "dx = m ? (T)((S)g * scale) : (T)(S)0;"
_REPLAY_SEED = "unsigned long long seed = seed0 + ctr[0] * 0xD1B54A32D192ED03ULL;\n"
_counters = {}  # CUDA device index -> uint64[1], advanced by captured dropout calls


@functools.cache
def _kernels(scalar):
    """Forward and backward kernels computing in ``scalar`` ('float' or 'double')."""
    import cupy

    name = {"float": "float32", "double": "float64"}[scalar]
    pre = f"typedef {scalar} S;\n"
    fwd = cupy.ElementwiseKernel(f"T x, uint64 seed, uint64 thresh, {name} scale", "T y, bool mask", _FWD,
                                 f"minifused_dropout_fwd_{name}", preamble=pre)
    bwd = cupy.ElementwiseKernel(f"T g, bool m, {name} scale", "T dx", _BWD, f"minifused_dropout_bwd_{name}",
                                 preamble=pre)
    fwd_replay = cupy.ElementwiseKernel(f"T x, uint64 seed0, raw uint64 ctr, uint64 thresh, {name} scale",
                                        "T y, bool mask", _REPLAY_SEED + _FWD,
                                        f"minifused_dropout_fwd_replay_{name}", preamble=pre)
    return fwd, bwd, fwd_replay


def _scale(dtype, p):
    return np.float64(1.0 / (1.0 - p)) if dtype == np.float64 else np.float32(1.0 / (1.0 - p))


def dropout_fwd(x, seed: int, p: float):
    """``(x * mask / (1 - p), mask)`` with ``0 <= p < 1``; one fused kernel on the GPU."""
    if not backend.is_cuda_array(x):
        return dropout_fwd_ref(x, seed, p)
    import cupy

    fwd, _, fwd_replay = _kernels("double" if x.dtype == np.float64 else "float")
    y = cupy.empty(x.shape, x.dtype)
    mask = cupy.empty(x.shape, cupy.bool_)
    ctr = _counters.get(x.device.id)
    if backend.is_capturing():
        if ctr is None:
            raise RuntimeError("dropout: its replay counter is created by an eager call; run the step "
                               "eagerly before capturing it (capture_step's warm-up does)")
        cupy.add(ctr, np.uint64(1), out=ctr)  # captured too: every replay advances it before this mask
        fwd_replay(x, np.uint64(seed), ctr, np.uint64(threshold(p)), _scale(x.dtype, p), y, mask)
        return y, mask
    if ctr is None:
        _counters[x.device.id] = cupy.zeros(1, cupy.uint64)
    fwd(x, np.uint64(seed), np.uint64(threshold(p)), _scale(x.dtype, p), y, mask)
    return y, mask


def dropout_bwd(grad, mask, p: float):
    """``grad * mask / (1 - p)``."""
    if not backend.is_cuda_array(grad):
        return dropout_bwd_ref(grad, mask, p)
    _, bwd, _ = _kernels("double" if grad.dtype == np.float64 else "float")
    return bwd(grad, mask, _scale(grad.dtype, p))
