"""Group normalization of CuPy arrays (``groupnorm.cu``): the forward with its per-(sample, group) statistics and the
backward's input, weight and bias gradients, each one kernel (the weight's and bias's per-sample partial sums then
summed over the samples in a fixed order, ``columns.column_sums``).

The input is float32, float16 or bfloat16; weight and bias (either may be None) of one dtype, the input's or float32
(mixed precision: the result is rounded once to the input's dtype). Everything computes in float32. Other inputs
(float64, NumPy arrays, empty ones, groups of more than MAX_GROUP_CHANNELS channels) are the caller's to take
another way: :func:`fuses` says which.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import backend
from . import ctype, get_kernel
from .columns import column_sums

#: The backward keeps two float32 sums per channel of a group in shared memory.
MAX_GROUP_CHANNELS = 4096
_DTYPES = (backend.float32, backend.float16, backend.bfloat16)


def _affine_dtype(x, weight, bias):
    """The weight's and bias's common dtype (the input's where both are None), or None where they differ."""
    dtypes = {a.dtype for a in (weight, bias) if a is not None}
    return x.dtype if not dtypes else dtypes.pop() if len(dtypes) == 1 else None


def fuses(x, weight, bias, groups) -> bool:
    """Whether the kernels take ``x`` (N, C, ...) in ``groups`` groups with this weight and bias."""
    if not (backend.is_cuda_array(x) and x.dtype in _DTYPES and x.size and x.shape[1] // groups <= MAX_GROUP_CHANNELS):
        return False
    w = _affine_dtype(x, weight, bias)
    # (the kernels read weight and bias as dense vectors: strided views go the composed way)
    return (w is not None and w in (x.dtype, backend.float32)
            and all(a is None or a.flags.c_contiguous for a in (weight, bias)))


@functools.cache
def _kernel(dtype, wdtype, name):
    return get_kernel("groupnorm.cu", name, (f"-DGN_T={ctype(dtype)}", f"-DGN_W={ctype(wdtype)}"))


def _null(a):
    return np.uint64(0) if a is None else a


def _sizes(x, groups):
    n, c = x.shape[:2]
    return n, c, c // groups, x.size // (n * c)


def group_norm_forward(x, weight, bias, groups, eps):
    """``(y, mean, rstd, xc)``: ``y`` (C-contiguous, x's dtype) the normalized and scaled ``x``, ``mean`` and
    ``rstd`` float32 (N * groups,), ``xc`` the C-contiguous ``x`` the backward takes."""
    import cupy

    n, c, d, s = _sizes(x, groups)
    xc = cupy.ascontiguousarray(x)
    y = cupy.empty(x.shape, x.dtype)
    mean = cupy.empty(n * groups, cupy.float32)
    rstd = cupy.empty(n * groups, cupy.float32)
    with xc.device:
        _kernel(x.dtype, _affine_dtype(x, weight, bias), "gn_fwd")(
            (n * groups,), (256,), (xc, _null(weight), _null(bias), y, mean, rstd, np.int32(groups), np.int32(d),
                                    np.int64(s), np.float32(eps)))
    return y, mean, rstd, xc


def group_norm_backward(dy, xc, weight, bias_dtype, mean, rstd, groups, need_dx, need_dw, need_db):
    """``(dx, dw, db)`` (None where not wanted) from the upstream gradient ``dy`` and the forward's ``xc``,
    ``mean``, ``rstd``: ``dx`` in x's dtype, ``dw`` in the weight's, ``db`` in ``bias_dtype``."""
    import cupy

    n, c, d, s = _sizes(xc, groups)
    dy = cupy.ascontiguousarray(dy, xc.dtype)
    dx = cupy.empty(xc.shape, xc.dtype) if need_dx else None
    dw_part = cupy.empty((n, c), cupy.float32) if need_dw else None
    db_part = cupy.empty((n, c), cupy.float32) if need_db else None
    wdtype = xc.dtype if weight is None else weight.dtype
    with xc.device:
        _kernel(xc.dtype, wdtype, "gn_bwd")(
            (n * groups,), (256,), (dy, xc, _null(weight), mean, rstd, _null(dx), _null(dw_part), _null(db_part),
                                    np.int32(groups), np.int32(d), np.int64(s)), shared_mem=8 * d)
    dw = None if dw_part is None else column_sums(dw_part).astype(wdtype, copy=False)
    db = None if db_part is None else column_sums(db_part).astype(bias_dtype, copy=False)
    return dx, dw, db
