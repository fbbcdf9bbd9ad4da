"""Column sums of C-contiguous (n, m) CuPy arrays (``columns.cu``): float32 sums in two deterministic passes
(per-block partial sums of the rows, then a fixed-order sum of the blocks'), rounded once to the array's dtype, as
PyTorch sums 16-bit tensors. Rows whose m is a multiple of 8, in an array aligned to 8 elements, are read as
16- (or 32-) byte vectors; others an element a lane.

``column_sums(a, scale=1.0)``: the sums times ``scale`` (the bias gradient of a broadcast add, a sum or, with
``1 / n``, a mean over leading dimensions).
``activation_backward_sum(dz, aux, db, activation)``: ``dz *= act'`` in place from a Linear's aux (the ReLU's
bit-mask, the GELU's pre-activations) and ``db`` the column sums of the result (the data gradient's pass after a
plain GEMM, kernels/linear.py); vectors only.
"""
from __future__ import annotations

import functools

from . import ARG, F32, Prepared, ctype, get_kernel, grid_1d, sm_count

#: Floating dtypes the kernels take (by name: float32, float16, bfloat16).
DTYPES = ("float32", "float16", "bfloat16")


def vector_rows(*arrays):
    """Whether these (n, m) C-contiguous arrays' rows are whole vectors of 8 elements, each array aligned to one."""
    return all(a.shape[1] % 8 == 0 and a.data.ptr % (8 * a.itemsize) == 0 for a in arrays)


@functools.lru_cache(maxsize=1024)  # keyed by shape: bounded for workloads of many shapes
def _plan(name, dtype, vec, n, m, dev):
    """(the partials' launch, the final sum's launch, rows a block, blocks down the rows): blocks of 32 * vec
    columns and a range of rows, about one wave of them (8 a SM)."""
    strips = -(-m // (32 * vec))
    rows_per = -(-n // max(1, min(-(-n // 32), 8 * sm_count(dev) // strips)))
    row_blocks = -(-n // rows_per)
    opts = (f"-DELEM_T={ctype(dtype)}", f"-DMF_VEC={vec}")
    first = Prepared(get_kernel("columns.cu", name, opts), (strips, row_blocks), (256,),
                     (ARG,) * (5 if name == "column_partials" else 7), pdl=True)
    total = Prepared(get_kernel("columns.cu", "column_partials_sum", opts), (grid_1d(m, 256),), (256,),
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
    first(a.data.ptr, part.ptr, n, m, rows_per)
    total(part.ptr, out.data.ptr, m, row_blocks, scale)
    return out


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
