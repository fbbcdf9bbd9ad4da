"""``a @ b`` of CUDA arrays as one cuBLASLt GEMM, strided-batched over the leading dims: ``matmul(a, b)`` returns
the product, or None where the operands do not fit that form (the caller takes the array module's ``matmul``).

It fits float16, bfloat16 and float32 operands of at least 2 dims, of one dtype and device, with no empty dim,
whose last two dims are row- or column-major (a unit stride in one of them: a transposed view needs no copy)
and whose leading dims either match the product's batch dims and step by one stride, or are all of size one
(one matrix for the whole batch, stride 0). The product is a new C-contiguous array of the operands' dtype,
accumulated in float32 and rounded once, as PyTorch's GEMMs do (float32 on TF32 tensor cores where
``backend.tf32_matmul.allow_tf32`` says so, as PyTorch's matmuls); CuPy's ``matmul`` has no batched bfloat16
GEMM and costs several times the host time of a cached plan's launch. Plans come from :mod:`.cublaslt`'s cache
with :data:`MATMUL_CONFIG`: the heuristic's first algorithm, untimed, so that the many shapes a model's
products can take cost no timing runs (and every process computes the same bits).
"""
from __future__ import annotations

import math

import numpy as np

from .. import backend
from ..backend import tf32_matmul
from .cublaslt import OP_N, OP_T, GemmConfig, PlanError, alignment, execute

#: How the products' plans pick their algorithm: the heuristic's first choice, never timed.
MATMUL_CONFIG = GemmConfig(small_gemm_flop=0)

_DTYPES = (backend.float16, backend.bfloat16, backend.float32)


def _matrix(arr, rows, cols):
    """``(op, ld)`` of ``arr``'s last two dims (rows x cols) read column-major as cuBLASLt does: a row-major
    matrix is its own transpose there (OP_N on the cols x rows view), a column-major one is read transposed;
    None for neither (no unit stride)."""
    item = arr.itemsize
    sr, sc = arr.strides[-2] // item, arr.strides[-1] // item
    if (sc == 1 or cols == 1) and (sr >= cols or rows == 1):
        return OP_N, max(sr if rows > 1 else cols, cols)
    if (sr == 1 or rows == 1) and (sc >= rows or cols == 1):
        return OP_T, max(sc if cols > 1 else rows, rows)
    return None


def _batch_stride(arr, batch):
    """The one stride (elements, not negative) that steps ``arr`` through the flattened ``batch`` dims, 0 for a
    matrix shared by the whole batch; None where its leading dims are broadcast in part or need more strides."""
    lead = arr.shape[:-2]
    if all(d == 1 for d in lead):
        return 0
    if (1,) * (len(batch) - len(lead)) + tuple(lead) != batch:
        return None
    item = arr.itemsize
    first, span = None, 1
    for size, step in zip(reversed(lead), reversed(arr.strides[:-2])):
        if size == 1:
            continue
        if first is None:
            first = step // item
        elif step // item != first * span:
            return None
        span *= size
    return first if first >= 0 else None


def matmul(a, b):
    """``a @ b`` (CuPy arrays) as one cuBLASLt GEMM on the current stream, or None where it does not fit."""
    import cupy

    dtype = a.dtype
    if (b.dtype != dtype or dtype not in _DTYPES or a.ndim < 2 or b.ndim < 2 or a.size == 0 or b.size == 0
            or a.data.device_id != b.data.device_id):
        return None
    rows, inner = a.shape[-2:]
    cols = b.shape[-1]
    lead_a, lead_b = a.shape[:-2], b.shape[:-2]
    if lead_a == lead_b or not lead_b:  # (the common cases without NumPy's broadcast, whose call costs more)
        batch = lead_a
    elif not lead_a:
        batch = lead_b
    else:
        try:
            batch = tuple(np.broadcast_shapes(lead_a, lead_b))
        except ValueError:
            return None
    count = math.prod(batch)
    mat_a, mat_b = _matrix(a, rows, inner), _matrix(b, inner, cols)
    stride_a, stride_b = _batch_stride(a, batch), _batch_stride(b, batch)
    if mat_a is None or mat_b is None or stride_a is None or stride_b is None or count == 0:
        return None
    dev = a.data.device_id
    if cupy.cuda.runtime.getDevice() != dev:
        with cupy.cuda.Device(dev):
            return matmul(a, b)
    out = cupy.ndarray((*batch, rows, cols), dtype)
    item = dtype.itemsize
    # row-major out (rows x cols) is column-major (cols x rows): out^T = b^T @ a^T, b the GEMM's "A" operand
    (op_b, ld_b), (op_a, ld_a) = mat_b, mat_a
    gemm_rows = rows
    if count > 1 and stride_b == 0 and op_a == OP_N and stride_a == rows * ld_a:
        # one b for a batch of row-major matrices that follow each other: one GEMM of all their rows (x @ W)
        gemm_rows, count, stride_a = count * rows, 1, 0
    stride_d = rows * cols if count > 1 else 0
    aligns = (alignment(b.data.ptr | item * stride_b), alignment(a.data.ptr | item * stride_a),
              alignment(out.data.ptr | item * stride_d))
    tf32 = dtype == backend.float32 and tf32_matmul.allow_tf32
    batched = None if count == 1 else (count, stride_b, stride_a, stride_d)
    stream = cupy.cuda.get_current_stream().ptr
    key = (dev, stream, "matmul", dtype, op_b, op_a, cols, gemm_rows, inner, ld_b, ld_a, aligns, tf32, batched)
    args = (dtype, op_b, op_a, cols, gemm_rows, inner, ld_b, ld_a, cols, "DEFAULT", 0, aligns, tf32, batched)
    try:
        execute(key, args, b.data.ptr, a.data.ptr, out, config=MATMUL_CONFIG)
    except PlanError:
        return None
    return out
