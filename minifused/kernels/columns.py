"""Column sums of C-contiguous (n, m) CuPy arrays (``columns.cu``): float32 sums in two deterministic passes
(per-block partial sums of the rows, then a fixed-order sum of the blocks'), rounded once to the array's dtype, as
PyTorch sums 16-bit tensors. Rows whose m is a multiple of 8, in an array aligned to 8 elements, are read as
16- (or 32-) byte vectors; others an element a lane.

``column_sums(a, scale=1.0)``: the sums times ``scale`` (the bias gradient of a broadcast add, a sum or, with
``1 / n``, a mean over leading dimensions).
``strided_sums(dtype, n, m, lda, dev)``: the same sums prepared for raw memory whose rows lie ``lda`` elements apart
(a convolution's bias gradient from its packed dy, kernels/conv.py).
``row_sums(a, scale=1.0)``: the sums along the rows, a warp a row (a sum or mean over trailing dimensions), where
the rows are enough or short enough to fill the GPU so (:func:`row_sums_apply`).
``row_broadcast(g, m, scale=1.0)``: their gradient, g (n,) times ``scale`` along rows of m, in one pass.
``activation_backward_sum(dz, aux, db, activation)``: ``dz *= act'`` in place from a Linear's aux (the ReLU's
bit-mask, the GELU's pre-activations) and ``db`` the column sums of the result (the data gradient's pass after a
plain GEMM, kernels/linear.py); vectors only.
"""
from __future__ import annotations

import functools

import numpy as np

from . import ARG, F32, Prepared, ctype, get_kernel, grid_1d, sm_count

#: Floating dtypes the kernels take (by name: float32, float16, bfloat16).
DTYPES = ("float32", "float16", "bfloat16")


def vector_rows(*arrays):
    """Whether these (n, m) C-contiguous arrays' rows are whole vectors of 8 elements, each array aligned to one."""
    return all(a.shape[1] % 8 == 0 and a.data.ptr % (8 * a.itemsize) == 0 for a in arrays)


@functools.lru_cache(maxsize=1024)  # keyed by shape: bounded for workloads of many shapes
def _plan(name, dtype, vec, n, m, dev):
    """(the partials' launch, the final sum's launch, rows a block, blocks down the rows): blocks of ``lanes`` * vec
    columns (32 lanes a row, or for a row of fewer vectors the power of two that spans it, a warp then taking
    32 / lanes rows at once) and a range of rows, at least two rounds of the block's 8 warps, about one wave of
    blocks (8 a SM), and at most 4 blocks a SM down the rows (a narrow m's final sum adds every row block's
    partials: more of them cost it more than their loads in flight save the first pass)."""
    vectors = -(-m // vec)
    lanes = 32 if vectors >= 32 else 1 << (vectors - 1).bit_length()
    strips = -(-m // (lanes * vec))
    sms = sm_count(dev)
    rows_per = -(-n // max(1, min(-(-n // (16 * 32 // lanes)), 8 * sms // strips, 4 * sms)))
    row_blocks = -(-n // rows_per)
    opts = (f"-DELEM_T={ctype(dtype)}", f"-DMF_VEC={vec}")
    first = Prepared(get_kernel("columns.cu", name, opts), (strips, row_blocks), (256,),
                     (ARG,) * (6 if name == "column_partials" else 7) + (np.int32(lanes.bit_length() - 1),), pdl=True)
    total = Prepared(get_kernel("columns.cu", "column_partials_sum", opts), (grid_1d(m, 32),), (1024,),
                     (ARG,) * 4 + (F32,), pdl=True)
    return first, total, rows_per, row_blocks


def column_sums(a, out=None, scale=1.0):
    """The sums over the rows of ``a`` (n, m), C-contiguous, of a dtype in :data:`DTYPES`, on the GPU, times
    ``scale``: an (m,) array of a's dtype (``out``, if given)."""
    import cupy

    n, m = a.shape
    out = cupy.ndarray((m,), a.dtype) if out is None else out
    if n == 0 or m == 0:
        out.fill(0)
        return out
    first, total, rows_per, row_blocks = _plan("column_partials", a.dtype, 8 if vector_rows(a) else 1, n, m,
                                               a.data.device_id)
    part = cupy.cuda.alloc(row_blocks * m * 4)
    first(a.data.ptr, part.ptr, n, m, m, rows_per)
    total(part.ptr, out.data.ptr, m, row_blocks, scale)
    return out


@functools.lru_cache(maxsize=1024)  # keyed by shape, as _plan
def _row_plan(dtype, vec, n, dev):
    opts = (f"-DELEM_T={ctype(dtype)}", f"-DMF_VEC={vec}")
    return Prepared(get_kernel("columns.cu", "row_sums", opts), (-(-n // 8),), (256,),
                    (ARG, ARG, np.int64(n), ARG, F32), pdl=True)


#: Row lengths a warp a row reads at the bandwidth of the GPU however few the rows; longer rows go to the
#: kernel where they are at least ROW_WARPS_PER_SM warps a SM (else CuPy's reduction, whose blocks share a row).
ROW_SUMS_M_MAX, ROW_WARPS_PER_SM = 4096, 32


def row_sums_apply(n, m, dev):
    """Whether :func:`row_sums` takes n rows of m elements (n, m > 0)."""
    return n > 0 and 0 < m < 2 ** 31 and (m <= ROW_SUMS_M_MAX or n >= ROW_WARPS_PER_SM * sm_count(dev))


def row_sums(a, scale=1.0):
    """The sums along the rows of ``a`` (n, m), C-contiguous, of a dtype in :data:`DTYPES`, on the GPU, times
    ``scale`` (float32 sums, rounded once): an (n,) array of a's dtype. n, m > 0."""
    import cupy

    n, m = a.shape
    out = cupy.ndarray((n,), a.dtype)
    _row_plan(a.dtype, 8 if vector_rows(a) else 1, n, a.data.device_id)(a.data.ptr, out.data.ptr, m, scale)
    return out


@functools.lru_cache(maxsize=1024)  # keyed by shape, as _plan
def _broadcast_plan(dtype, total, m, dev):
    kern = get_kernel("columns.cu", "row_broadcast", (f"-DELEM_T={ctype(dtype)}", "-DMF_VEC=1"))
    return Prepared(kern, (min(grid_1d(total, 256), 32 * sm_count(dev)),), (256,),
                    (ARG, ARG, np.int64(total), np.int32(m), F32), pdl=True)


def row_broadcast(g, m, scale=1.0):
    """``g`` (n,), C-contiguous, of a dtype in :data:`DTYPES`, times ``scale`` repeated along rows of ``m``: an (n, m)
    array of g's dtype (the gradient of :func:`row_sums`). n, m > 0."""
    import cupy

    out = cupy.ndarray((g.shape[0], m), g.dtype)
    _broadcast_plan(g.dtype, out.size, m, g.data.device_id)(g.data.ptr, out.data.ptr, scale)
    return out


@functools.lru_cache(maxsize=1024)
def strided_sums(dtype, n, m, lda, dev):
    """The column sums of n rows of m elements of ``dtype``, ``lda`` >= m apart, on device ``dev``, prepared once per
    signature for a caller that brings the memory: ``(part_bytes, run)``, ``run(a, part, out)`` on addresses (the
    rows; ``part_bytes`` of scratch for the partials; m elements for the sums, rounded to dtype). Rows are read as
    vectors where lda is a multiple of 8 and ``a`` is aligned to one, else an element a lane. n > 0."""
    plans = {vec: _plan("column_partials", dtype, vec, n, m, dev) for vec in ((1, 8) if lda % 8 == 0 else (1,))}
    part_bytes = max(plan[3] for plan in plans.values()) * m * 4
    vector_bytes = 8 * np.dtype(dtype).itemsize

    def run(a, part, out):
        first, total, rows_per, row_blocks = plans[8 if 8 in plans and a % vector_bytes == 0 else 1]
        first(a, part, n, m, lda, rows_per)
        total(part, out, m, row_blocks, 1.0)
    return part_bytes, run


def activation_backward_sum(dz, aux, db, activation):
    """``dz *= act'`` in place, from a Linear's ``aux`` for ``activation`` ('relu': its bit-mask, bit j % 8 of byte
    j // 8 of a row; 'gelu': its pre-activations, rows of a multiple of 8), and ``db`` the column sums of the result,
    for a ``dz`` whose rows are vectors (:func:`vector_rows`)."""
    import cupy

    n, m = dz.shape
    name = "relu_mask_backward_partials" if activation == "relu" else "gelu_backward_partials"
    first, total, rows_per, row_blocks = _plan(name, dz.dtype, 8, n, m, dz.data.device_id)
    part = cupy.cuda.alloc(row_blocks * m * 4)
    first(dz.data.ptr, aux.data.ptr, part.ptr, n, m, aux.shape[1], rows_per)
    total(part.ptr, db.data.ptr, m, row_blocks, 1.0)
