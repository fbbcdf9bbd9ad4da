"""``torch.linalg``'s LU family: ``lu_factor`` / ``lu_factor_ex`` / ``lu``, ``lu_solve``, and ``torch.lu_unpack``
(the older top-level ``torch.lu`` / ``torch.lu_solve`` are in ``linalg_toplevel.py``).

The factorization is LU with partial pivoting written on arrays, as LAPACK's unblocked getrf computes it: a loop
over the columns, each step vectorized over the batch (NumPy has no getrf; the same code runs on CuPy), so its
factors are LAPACK's up to rounding: the pivot of each column is the first of its largest entries, a zero pivot is
left in U (and reported in ``info``) rather than divided by. ``pivots`` are int32 and 1-based, as LAPACK's and
PyTorch's: at step i row i was swapped with row ``pivots[i] - 1``.

Only the factorization is a ``Function`` (PyTorch's gradient of A = P L U); ``lu_unpack`` and ``lu_solve`` are
compositions of the triangles, a row gather and the triangular solves, so their gradients are theirs."""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from .. import backend
from ..autograd import Function
from ..tensor import Tensor
from .elementwise import where
from .index import take_along_dim
from .linalg_common import check_dtype, check_matrix, detached, dtype_name, swap, tri_solve
from .linalg_solve import SolveTriangular, solve_triangular
from .movement import tril, triu
from .shape import cat, reshape
from ..backend import InputError, InputTypeError

_xp = backend.array_module

# PyTorch's torch.return_types
LUFactorResult = namedtuple("linalg_lu_factor", ["LU", "pivots"])
LUFactorExResult = namedtuple("linalg_lu_factor_ex", ["LU", "pivots", "info"])
LUResult = namedtuple("linalg_lu", ["P", "L", "U"])
LUUnpackResult = namedtuple("lu_unpack", ["P", "L", "U"])


# ---------------------------------------------------------------- on arrays
def getrf(xp, a, pivot):
    """(LU, pivots, info, perm) of each (m, n) matrix of ``a``: L's multipliers below U, the 1-based int32 pivots
    of its min(m, n) steps, getrf's info (1 + the first column whose pivot is exactly zero, else 0) and the row
    permutation as int64 (LU is of ``a[perm]``). Without ``pivot`` no row is swapped and pivots count 1..k."""
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    k, count = min(m, n), math.prod(batch)
    lu = a.reshape((count, m, n)).copy()
    rows = xp.arange(count)
    perm = xp.tile(xp.arange(m), (count, 1))
    pivots = xp.tile(xp.arange(1, k + 1, dtype=np.int32), (count, 1))
    info = xp.zeros(count, np.int32)
    for j in range(k):
        if pivot:
            p = j + xp.argmax(xp.abs(lu[:, j:, j]), axis=-1)
            pivots[:, j] = p + 1
            for x in (lu, perm):  # swap rows j and p of each matrix
                top = x[:, j].copy()
                x[:, j] = x[rows, p]
                x[rows, p] = top
        d = lu[:, j, j]
        zero = d == 0
        info = backend.where((info == 0) & zero, np.int32(j + 1), info)
        lu[:, j + 1:, j] /= backend.where(zero, d.dtype.type(1), d)[:, None]  # a zero pivot's column is left as it is
        lu[:, j + 1:, j + 1:] -= lu[:, j + 1:, j, None] * lu[:, j, None, j + 1:]
    return (lu.reshape(a.shape), pivots.reshape(batch + (k,)), info.reshape(batch), perm.reshape(batch + (m,)))


def permutation(xp, pivots, m):
    """The int64 row permutation ``perm`` (``A[perm]`` is what LU factors) that 1-based ``pivots`` (..., k) of
    (m, n) matrices describe: their swaps, applied in order. Out-of-range pivots are clipped (checked where the
    check needs no wait for the device)."""
    batch, k = pivots.shape[:-1], pivots.shape[-1]
    count = math.prod(batch)
    piv = xp.clip(pivots.reshape((count, k)).astype(np.int64) - 1, 0, max(m - 1, 0))
    rows = xp.arange(count)
    perm = xp.tile(xp.arange(m), (count, 1))
    for i in range(k):
        j = piv[:, i]
        top = perm[:, i].copy()
        perm[:, i] = perm[rows, j]
        perm[rows, j] = top
    return perm.reshape(batch + (m,))


def lu_grad(lu, perm, g):
    """The gradient of A = P L U from that of the packed LU (PyTorch's linalg_lu_backward; gL the strictly lower
    part of g's first k columns, gU the upper part of its first k rows, k = min(m, n)):
    with L = [L1; L2], U = [U1 U2] (L1, U1 k x k), M = tril(L1^T gL1 - gU2 U2^T, -1) + triu(gU1 U1^T - L2^T gL2),
    gA = P [[L1^-T M U1^-T, L1^-T gU2], [gL2 U1^-T, 0]] (the blocks a wide or tall A has)."""
    xp = _xp(g)
    m, n = lu.shape[-2:]
    k = min(m, n)
    ident = xp.eye(k, dtype=lu.dtype)
    low, up, g1 = xp.tril(lu[..., :k, :k], -1) + ident, xp.triu(lu[..., :k, :k]), g[..., :k, :k]
    lower, upper = swap(low) @ g1, g1 @ swap(up)
    if n > k:
        lower = lower - g[..., :k, k:] @ swap(lu[..., :k, k:])
    if m > k:
        upper = upper - swap(lu[..., k:, :k]) @ g[..., k:, :k]
    inner = xp.tril(lower, -1) + xp.triu(upper)
    lt = xp.ascontiguousarray(swap(low))

    def right_ut(b):  # b U1^-T
        return swap(tri_solve(xp, up, xp.ascontiguousarray(swap(b)), upper=True))

    top = right_ut(tri_solve(xp, lt, xp.ascontiguousarray(inner), upper=True))
    if n > k:
        top = xp.concatenate([top, tri_solve(xp, lt, xp.ascontiguousarray(g[..., :k, k:]), upper=True)], -1)
    if m > k:
        top = xp.concatenate([top, right_ut(g[..., k:, :k])], -2)
    inverse = xp.argsort(perm, axis=-1)  # (P G)[perm[i]] = G[i]
    return xp.take_along_axis(top, inverse[..., :, None], -2)


def lu_grad_graph(lu, perm, g):
    """:func:`lu_grad` of graph tensors (``perm`` an array), with recorded ops."""
    m, n = lu.shape[-2:]
    k = min(m, n)
    xp = _xp(perm)
    low = tril(lu[..., :k, :k], -1) + Tensor._from_array(xp.eye(k, dtype=lu.dtype))
    up, g1 = triu(lu[..., :k, :k]), g[..., :k, :k]
    lower, upper = low.mT @ g1, g1 @ up.mT
    if n > k:
        lower = lower - g[..., :k, k:] @ lu[..., :k, k:].mT
    if m > k:
        upper = upper - lu[..., k:, :k].mT @ g[..., k:, :k]
    inner = tril(lower, -1) + triu(upper)

    def right_ut(b):  # b U1^-T
        return SolveTriangular.apply(up, b.mT, True, False).mT

    top = right_ut(SolveTriangular.apply(low.mT, inner, True, True))
    if n > k:
        top = cat([top, SolveTriangular.apply(low.mT, g[..., :k, k:], True, True)], -1)
    if m > k:
        top = cat([top, right_ut(g[..., k:, :k])], -2)
    inverse = xp.argsort(perm, axis=-1)
    return take_along_dim(top, Tensor._from_array(xp.ascontiguousarray(inverse[..., :, None])), -2)


class LUFactor(Function):
    """(LU, pivots, info, perm) of A (see :func:`getrf`); the gradient :func:`lu_grad`. With ``check`` a zero pivot
    raises PyTorch's RuntimeError (a wait for the device on cuda, as PyTorch's checked form)."""

    @staticmethod
    def forward(ctx, a, pivot, op, check):
        xp = _xp(a)
        lu, pivots, info, perm = getrf(xp, a, pivot)
        if check and info.size:
            backend.refuse_sync(op)
            host = backend.to_device(info, backend.CPU).reshape(-1)
            failed = np.flatnonzero(host)
            if failed.size:
                where_ = f": (Batch element {failed[0]})" if a.ndim > 2 else ""
                k = int(host[failed[0]])
                raise RuntimeError(f"{op}{where_}: U[{k},{k}] is zero and using it on lu_solve would result in a "
                                   f"division by zero. If you still want to perform the factorization, consider "
                                   f"calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")
        ctx.save_for_backward(lu)
        ctx.perm = perm
        return lu, pivots, info, perm

    @staticmethod
    def backward(ctx, g, *_):
        (lu,) = ctx.saved_tensors
        return lu_grad(lu, ctx.perm, g), None, None, None

    @staticmethod
    def backward_graph(ctx, g, *_):
        return lu_grad_graph(ctx.graph_output(ctx.saved_tensors[0]), ctx.perm, g), None, None, None


# ---------------------------------------------------------------- the public functions
def _factor(op, A, pivot, check):
    check_matrix(op, A, square=False)
    if not pivot and A.device.type == "cpu":
        raise InputError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    lu, pivots, info, perm = LUFactor.apply(A, bool(pivot), op, check)
    return lu, detached(pivots), detached(info), perm


def lu_factor(A, *, pivot=True):
    """``torch.linalg.lu_factor``: (LU, pivots) of A = P L U with partial pivoting, A (*, m, n): L's multipliers
    below U's diagonal, the 1-based int32 pivots. A zero pivot (a singular A) raises RuntimeError, as PyTorch's.
    ``pivot=False`` (no row swaps) is refused on the cpu, as PyTorch's."""
    lu, pivots, _, _ = _factor("torch.linalg.lu_factor", A, pivot, True)
    return LUFactorResult(lu, pivots)


def lu_factor_ex(A, *, pivot=True, check_errors=False):
    """``torch.linalg.lu_factor_ex``: (LU, pivots, info), info LAPACK's getrf's (1 + the first column with a zero
    pivot, else 0); ``check_errors`` raises instead."""
    lu, pivots, info, _ = _factor("torch.linalg.lu_factor_ex", A, pivot, check_errors)
    return LUFactorExResult(lu, pivots, info)


def _unpacked(LU, perm, data, P_too):  # noqa: N803 - PyTorch's name
    """(P, L, U) of a packed LU and its row permutation (None: P empty); L and U empty without ``data``."""
    xp, (m, n) = LU._xp, LU.shape[-2:]
    k = min(m, n)
    empty = Tensor._from_array(xp.zeros((0,), LU.dtype))
    P = empty
    if P_too:
        P = Tensor._from_array((perm[..., None, :] == xp.arange(m)[:, None]).astype(LU.dtype))
    if not data:
        return P, empty, empty
    unit = Tensor._from_array(xp.eye(m, k, dtype=bool))
    one = Tensor._from_array(xp.ones((), LU.dtype))
    return P, where(unit, one, tril(LU[..., :, :k], -1)), triu(LU[..., :k, :])


def lu(A, *, pivot=True):
    """``torch.linalg.lu``: (P, L, U) with A = P L U, A (*, m, n): P (m, m), L (m, k) unit lower-triangular, U (k, n)
    upper-triangular, k = min(m, n). A singular A is factored (a zero on U's diagonal), not refused. With
    ``pivot=False`` (cuda only, as PyTorch's) P is an empty tensor."""
    lu_, _, _, perm = _factor("linalg.lu", A, pivot, False)
    return LUResult(*_unpacked(lu_, perm._data, True, pivot))


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):  # noqa: N803 - PyTorch's names
    """``torch.lu_unpack``: (P, L, U) from :func:`lu_factor`'s (LU, pivots); L and U empty without
    ``unpack_data``, P empty without ``unpack_pivots``. Differentiable in LU (through its triangles)."""
    op = "torch.lu_unpack"
    if not isinstance(LU_data, Tensor):
        raise InputTypeError(f"lu_unpack(): argument 'LU_data' (position 1) must be Tensor, not "
                             f"{type(LU_data).__name__}")
    if not isinstance(LU_pivots, Tensor):
        raise InputTypeError(f"lu_unpack(): argument 'LU_pivots' (position 2) must be Tensor, not "
                             f"{type(LU_pivots).__name__}")
    if LU_data.ndim < 2:
        raise InputError(f"{op}: Expected tensor with 2 or more dimensions. Got size: {list(LU_data.shape)} instead")
    perm = None
    if unpack_pivots:
        m, n = LU_data.shape[-2:]
        if LU_pivots.dtype != np.int32:
            raise InputTypeError(f"{op}: LU_pivots is expected to be a contiguous tensor of torch.int32 dtype.\n"
                                 f"Note: this function is intended to be used with the output produced by "
                                 f"torch.linalg.lu_factor")
        want = tuple(LU_data.shape[:-2]) + (min(m, n),)
        if tuple(LU_pivots.shape) != want:
            raise InputError(f"{op}: expected LU_pivots of shape {list(want)} (LU_data's batch and min(m, n)) for "
                             f"LU_data of shape {list(LU_data.shape)}, got {list(LU_pivots.shape)}")
        message = ("pivots passed to lu_unpack must be between 1 and LU.size(-2) inclusive.Did you properly pass the "
                   "result of lu_factor?")
        check_pivots(LU_pivots, m, message, message)
        perm = permutation(LU_data._xp, LU_pivots._data, m)
    return LUUnpackResult(*_unpacked(LU_data, perm, unpack_data, unpack_pivots))


def check_pivots(pivots, m, below, above):
    """Pivots below 1 raise ``below``, above m ``above``, where that needs no wait for the device (on the cpu)."""
    if pivots.device.type != "cpu" or not pivots.numel():
        return
    if bool((pivots._data < 1).any()):
        raise InputError(below)
    if bool((pivots._data > m).any()):
        raise InputError(above)


def _gather(B, perm, dim):
    """B's rows (``dim`` -2) or columns (-1) taken in the order ``perm`` (an int64 array of LU's batch), batch dims
    broadcast."""
    idx = perm[..., :, None] if dim == -2 else perm[..., None, :]
    lead = max(B.ndim - idx.ndim, 0)
    idx = Tensor._from_array(idx.reshape((1,) * lead + idx.shape))
    if idx.ndim > B.ndim:
        B = reshape(B, (1,) * (idx.ndim - B.ndim) + tuple(B.shape))
    return take_along_dim(B, idx, dim)


def lu_solve(LU, pivots, B, *, left=True, adjoint=False):  # noqa: N803 - PyTorch's names
    """``torch.linalg.lu_solve``: X with A X = B given :func:`lu_factor`'s (LU, pivots) of a square A
    (``adjoint``: A^T X = B; ``left=False``: X A = B or X A^T = B); the batch dims of B and LU broadcast (pivots
    has LU's). Composed of a row gather and two triangular solves, so gradients reach LU and B."""
    op = "linalg.lu_solve"
    for name, t in (("LU", LU), ("pivots", pivots), ("B", B)):
        if not isinstance(t, Tensor):
            raise InputTypeError(f"{op}(): argument '{name}' must be Tensor, not {type(t).__name__}")
    if B.ndim < 2:
        raise InputError(f"{op}: The input tensor B must have at least 2 dimensions.")
    check_matrix(f"torch.{op}", LU, square=True, dtype=False)
    n = LU.shape[-1]
    if B.shape[-2 if left else -1] != n:
        raise InputError(f"{op}: Incompatible shapes of A and B for the equation {'AX = B' if left else 'XA = B'} "
                         f"({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    if LU.dtype != B.dtype:
        raise InputTypeError(f"{op}: Expected LU and B to have the same dtype, but found LU of type "
                             f"{dtype_name(LU.dtype)} and B of type {dtype_name(B.dtype)} instead")
    check_dtype(f"torch.{op}", LU)
    if pivots.dtype != np.int32:
        raise InputTypeError(f"{op}: pivots should be a Tensor of scalar type torch.int32")
    if pivots.ndim == 0 or pivots.shape[-1] != n:
        raise InputError(f"{op}: Number of pivots per batch should be same as the dimension of the matrix")
    if tuple(pivots.shape) != tuple(LU.shape[:-1]):
        raise InputError(f"{op}: Expected LU.shape[:-1] and pivots.shape to be the same, but got pivots with shape "
                         f"{list(pivots.shape)} instead")
    try:
        np.broadcast_shapes(LU.shape[:-2], B.shape[:-2])
    except ValueError:
        raise InputError(f"{op}: the batch dimensions of LU {list(LU.shape)} and B {list(B.shape)} cannot be "
                         f"broadcast together") from None
    if LU.device != B.device or LU.device != pivots.device:
        raise RuntimeError(f"{op}: expected all tensors on the same device, got {LU.device}, {pivots.device} and "
                           f"{B.device}")
    check_pivots(pivots, n, "Pivots given to lu_solve must all be greater or equal to 1. Did you properly pass the "
                            "result of lu_factor?", "Pivots given to lu_solve must all be smaller or equal to "
                            "LU.size(-2). Did you properly pass the result of lu_factor?")
    xp = LU._xp
    perm = permutation(xp, pivots._data, n)
    inverse = xp.argsort(perm, axis=-1)
    # A = P L U with P^T B = B[perm], P B = B[inverse] (rows); B P = B[:, perm], B P^T = B[:, inverse] (columns)
    if left and not adjoint:  # X = U^-1 L^-1 P^T B
        y = solve_triangular(LU, _gather(B, perm, -2), upper=False, unitriangular=True)
        return solve_triangular(LU, y, upper=True)
    if left:  # A^T X = B: X = P L^-T U^-T B
        y = solve_triangular(LU.mT, B, upper=False)
        return _gather(solve_triangular(LU.mT, y, upper=True, unitriangular=True), inverse, -2)
    if not adjoint:  # X A = B: X = B U^-1 L^-1 P^T
        y = solve_triangular(LU, B, upper=True, left=False)
        return _gather(solve_triangular(LU, y, upper=False, left=False, unitriangular=True), inverse, -1)
    y = _gather(B, perm, -1)  # X A^T = B: X = B P L^-T U^-T
    y = solve_triangular(LU.mT, y, upper=True, left=False, unitriangular=True)
    return solve_triangular(LU.mT, y, upper=False, left=False)
