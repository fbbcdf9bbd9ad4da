"""``torch.linalg``'s solvers: ``solve`` / ``solve_ex`` (``left``), ``tensorsolve`` (solve of the tensor seen as a
matrix), ``solve_triangular``, ``cholesky_solve`` / ``cholesky_inverse``, ``pinv``, ``matrix_rank``, ``lstsq``.

``Function`` s where PyTorch has its own backward (solve, the triangular and Cholesky solves, pinv); lstsq is a
composition through pinv. Batch dims broadcast where PyTorch's do; the arrays go to ``xp.linalg`` broadcast to one
batch shape (CuPy's solvers take no broadcasting) and the gradients are summed back over the broadcast dims."""
from __future__ import annotations

import math
import numbers
from collections import namedtuple

import numpy as np

from .. import backend
from ..autograd import Function
from ..tensor import Tensor
from ._common import autocast_float32, unbroadcast, unbroadcast_graph
from .creation import eye
from .elementwise import mul, sub
from .linalg_common import (check_matrix, check_same_dtype, detached, factor, lu_info, set_diagonal, solve_quiet, swap,
                            tri_solve)
from .matmul import MatMul
from .movement import movedim, tril, triu
from .reduce import sum as _sum
from .shape import expand, reshape, squeeze, unsqueeze
from ..backend import InputError, InputTypeError

_xp = backend.array_module

SolveExResult = namedtuple("linalg_solve_ex", ["result", "info"])
LstsqResult = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])


def _batched(xp, shape, *arrays):
    """The stacks of matrices ``arrays`` broadcast to the batch ``shape``, C-contiguous."""
    return [xp.ascontiguousarray(xp.broadcast_to(a, tuple(shape) + a.shape[-2:])) for a in arrays]


def _narrowed(a, shape):
    """A view of ``a``, broadcast by :func:`_batched`, with the batch of ``shape`` again (its first element along
    each dim that broadcasting added or stretched): the input's values for a ``backward_graph``."""
    lead = a.ndim - len(shape)
    return a[(0,) * lead + tuple(slice(0, 1) if n == 1 else slice(None) for n in shape[:-2])]


def _batch(op, *tensors):
    try:
        return tuple(np.broadcast_shapes(*(t.shape[:-2] for t in tensors)))
    except ValueError:
        raise InputError(f"{op}: the batch dimensions of {' and '.join(str(list(t.shape)) for t in tensors)} cannot "
                         f"be broadcast together") from None


# ---------------------------------------------------------------- solve
class Solve(Function):
    """X with A X = B (and the info of each matrix): gB = A^-T g, gA = -gB X^T, summed over broadcast dims."""

    @staticmethod
    def forward(ctx, a, b, op, check):
        xp = _xp(a)
        ab, bb = _batched(xp, np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a, b)
        x, info = factor(op, xp, xp.linalg.solve, (ab, bb), lu_info,
                         lambda _: "The solver failed because the input matrix is singular.", check)
        ctx.save_for_backward(a, x)
        ctx.b_shape = b.shape
        return x, info

    @staticmethod
    def backward(ctx, g, _):
        a, x = ctx.saved_tensors
        xp = _xp(g)
        (at,) = _batched(xp, x.shape[:-2], swap(a))
        gb = solve_quiet(xp, at, xp.ascontiguousarray(g))
        ga = unbroadcast(-(gb @ swap(x)), a.shape) if ctx.needs_input_grad[0] else None
        return ga, unbroadcast(gb, ctx.b_shape), None, None

    @staticmethod
    def backward_graph(ctx, g, _):
        a, x = ctx.saved_tensors
        at = ctx.graph_input(0, a)
        gb = Solve.apply(at.mT, g, "linalg.solve", False)[0]
        ga = unbroadcast_graph(-(gb @ ctx.graph_output(x).mT), a.shape) if ctx.needs_input_grad[0] else None
        return ga, unbroadcast_graph(gb, ctx.b_shape), None, None


def _solve(op, A, B, left, check):
    check_matrix(op, A)
    check_same_dtype(op, A, B)
    n = A.shape[-1]
    equation = "AX = B" if left else "XA = B"
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])
    if B.ndim == 0 or (vector and (not left or B.shape[-1] != n)):
        raise InputError(f"{op}: Incompatible shapes of A and B for the equation {equation} ({n}x{n} and "
                         f"{B.shape[-1] if B.ndim else 0}x1)")
    if not vector and B.shape[-2 if left else -1] != n:
        raise InputError(f"{op}: Incompatible shapes of A and B for the equation {equation} ({n}x{n} and "
                         f"{B.shape[-2]}x{B.shape[-1]})")
    Bm = unsqueeze(B, -1) if vector else B
    _batch(op, A, Bm)
    if not left:  # X A = B is A^T X^T = B^T
        A, Bm = A.mT, Bm.mT
    X, info = Solve.apply(A, Bm, op, check)
    X = X if left else X.mT
    return (squeeze(X, -1) if vector else X), detached(info)


def solve(A, B, *, left=True):
    """``torch.linalg.solve``: X with A X = B (``left=False``: X A = B). B is a vector (or a batch of them) when it is
    1-D or has A's shape without the last dim, else matrices; batch dims broadcast. A singular A raises
    :class:`LinAlgError`. Under autocast on cpu in float32 (PyTorch's cpu float32 list; solve_ex is not on it)."""
    A, B = autocast_float32(A, B, devices=("cpu",))
    return _solve("linalg.solve", A, B, left, True)[0]


def solve_ex(A, B, *, left=True, check_errors=False):
    """``torch.linalg.solve_ex``: (result, info), info LAPACK's for a singular A (whose result is NaN)."""
    return SolveExResult(*_solve("linalg.solve_ex", A, B, left, check_errors))


def tensorsolve(input, other, dims=None):  # noqa: A002 - PyTorch's names
    """``torch.linalg.tensorsolve``: X with tensordot(input, X, X.ndim) = other, X shaped input.shape[other.ndim:]
    (after the dims ``dims`` of input are moved to its end); the products of other's and X's dims must be equal.
    A solve of input as a square matrix, so a singular one raises :class:`LinAlgError` and gradients are solve's.
    Under autocast on cpu in float32 (PyTorch's cpu float32 list)."""
    op = "linalg.tensorsolve"
    for i, (name, t) in enumerate((("input", input), ("other", other))):
        if not isinstance(t, Tensor):
            raise InputTypeError(f"linalg_tensorsolve(): argument '{name}' (position {i + 1}) must be Tensor, not "
                                 f"{type(t).__name__}")
    if dims is not None:
        if not isinstance(dims, (tuple, list)) or any(isinstance(d, bool) or not isinstance(d, numbers.Integral)
                                                      for d in dims):
            raise InputTypeError(f"linalg_tensorsolve(): argument 'dims' must be tuple of ints, not "
                                 f"{type(dims).__name__}")
        input = movedim(input, tuple(dims), tuple(range(input.ndim - len(dims), input.ndim)))
    input, other = autocast_float32(input, other, devices=("cpu",))
    if other.ndim > input.ndim:
        raise InputError(f"{op}: expected other to have at most input.ndim ({input.ndim}) dimensions, got "
                         f"{other.ndim}")
    shape = tuple(input.shape[other.ndim:])
    size, other_size = math.prod(shape), math.prod(other.shape)
    if size != other_size:
        raise InputError(f"{op}: Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
                         f"prod(self.shape[:other.ndim]), but got {size} != {other_size}")
    X = _solve(op, reshape(input, (size, size)), reshape(other, (size,)), True, True)[0]
    return reshape(X, shape)


def _triangle(xp, a, upper, unit):
    t = xp.triu(a) if upper else xp.tril(a)
    return set_diagonal(t, 1) if unit else t


class SolveTriangular(Function):
    """X with T X = B, T the ``upper`` or lower triangle of A (with ones on its diagonal if ``unit``): gB = T^-T g,
    gA = -gB X^T on that triangle (its diagonal excluded if ``unit``)."""

    @staticmethod
    def forward(ctx, a, b, upper, unit):
        xp = _xp(a)
        t, bb = _batched(xp, np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), _triangle(xp, a, upper, unit), b)
        x = tri_solve(xp, t, bb, upper)
        ctx.save_for_backward(t, x)
        ctx.meta = (upper, unit, a.shape, b.shape)
        return x

    @staticmethod
    def backward(ctx, g):
        t, x = ctx.saved_tensors
        upper, unit, a_shape, b_shape = ctx.meta
        xp = _xp(g)
        gb = tri_solve(xp, xp.ascontiguousarray(swap(t)), xp.ascontiguousarray(g), not upper)
        ga = None
        if ctx.needs_input_grad[0]:
            ga = -(gb @ swap(x))
            ga = xp.triu(ga, 1 if unit else 0) if upper else xp.tril(ga, -1 if unit else 0)
            ga = unbroadcast(ga, a_shape)
        return ga, unbroadcast(gb, b_shape), None, None

    @staticmethod
    def backward_graph(ctx, g):
        """As :meth:`backward`, recorded: A a stand-in valued T where it is not a leaf (only the triangle is
        read), X the node's output."""
        t, x = ctx.saved_tensors
        upper, unit, a_shape, b_shape = ctx.meta
        at = ctx.graph_input(0, _narrowed(t, a_shape))
        gb = SolveTriangular.apply(at.mT, g, not upper, unit)  # T^-T g
        ga = None
        if ctx.needs_input_grad[0]:
            ga = -(gb @ ctx.graph_output(x).mT)
            ga = triu(ga, 1 if unit else 0) if upper else tril(ga, -1 if unit else 0)
            ga = unbroadcast_graph(ga, a_shape)
        return ga, unbroadcast_graph(gb, b_shape), None, None


def solve_triangular(input, B, *, upper, left=True, unitriangular=False):
    """``torch.linalg.solve_triangular``: X with T X = B (``left=False``: X T = B), T the upper or lower triangle of
    A (the other one is not read), with ones on its diagonal if ``unitriangular``; batch dims broadcast. A zero on
    T's diagonal gives inf / NaN, not an error, as PyTorch's."""
    op = "linalg.solve_triangular"
    check_matrix(op, input)
    check_same_dtype(op, input, B)
    check_matrix(op, B, "B", square=False)
    n = input.shape[-1]
    if B.shape[-2 if left else -1] != n:
        raise InputError(f"{op}: Incompatible shapes of A and B for the equation {'AX = B' if left else 'XA = B'} "
                         f"({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    _batch(op, input, B)
    if left:
        return SolveTriangular.apply(input, B, bool(upper), bool(unitriangular))
    return SolveTriangular.apply(input.mT, B.mT, not upper, bool(unitriangular)).mT


class CholeskySolve(Function):
    """X with (L L^T) X = B for the lower factor L (``upper``: U^T U); PyTorch's gradients: gB = (L L^T)^-1 g and,
    for the whole of L (its other triangle included, as PyTorch's), -(gB X^T + X gB^T) L (upper: -U (...))."""

    @staticmethod
    def forward(ctx, b, low, upper):
        xp = _xp(low)
        lb, bb = _batched(xp, np.broadcast_shapes(low.shape[:-2], b.shape[:-2]), low, b)
        x = _cholesky_solve(xp, lb, bb, upper)
        ctx.save_for_backward(lb, x)
        ctx.meta = (upper, b.shape, low.shape)
        return x

    @staticmethod
    def backward(ctx, g):
        lb, x = ctx.saved_tensors
        upper, b_shape, l_shape = ctx.meta
        xp = _xp(g)
        gb = _cholesky_solve(xp, lb, xp.ascontiguousarray(g), upper)
        gl = None
        if ctx.needs_input_grad[1]:
            common = gb @ swap(x)
            common = common + swap(common)
            gl = unbroadcast(-(lb @ common if upper else common @ lb), l_shape)
        return unbroadcast(gb, b_shape), gl, None

    @staticmethod
    def backward_graph(ctx, g):
        lb, x = ctx.saved_tensors
        upper, b_shape, l_shape = ctx.meta
        low = ctx.graph_input(1, _narrowed(lb, l_shape))
        gb = CholeskySolve.apply(g, low, upper)
        gl = None
        if ctx.needs_input_grad[1]:
            common = gb @ ctx.graph_output(x).mT
            common = common + common.mT
            gl = unbroadcast_graph(-(low @ common if upper else common @ low), l_shape)
        return unbroadcast_graph(gb, b_shape), gl, None


def _cholesky_solve(xp, factor_, b, upper):
    """(F F^T)^-1 B for the lower factor F (``upper``: (F^T F)^-1 B): a lower then an upper triangular solve."""
    ft = xp.ascontiguousarray(swap(factor_))
    lower, upper_ = (ft, factor_) if upper else (factor_, ft)
    return tri_solve(xp, upper_, tri_solve(xp, lower, b, upper=False), upper=True)


def cholesky_solve(input, input2, upper=False):
    """``torch.cholesky_solve``: X with A X = B for A = L L^T given its Cholesky factor L (``upper``: A = U^T U);
    B is (*, n, k), batch dims broadcast. Under autocast on cpu in float32, as cholesky_inverse."""
    op = "cholesky_solve"
    input, input2 = autocast_float32(input, input2, devices=("cpu",))
    check_matrix(op, input2, "L")
    check_same_dtype(op, input2, input, names=("A", "b"))
    if input.ndim < 2:
        raise InputError(f"{op}: b should have at least 2 dimensions, but has {input.ndim} dimensions instead")
    if input.shape[-2] != input2.shape[-1]:
        raise InputError(f"{op}: Incompatible matrix sizes for cholesky_solve: each A matrix is {input2.shape[-1]} by "
                         f"{input2.shape[-1]} but each b matrix is {input.shape[-2]} by {input.shape[-1]}")
    _batch(op, input2, input)
    return CholeskySolve.apply(input, input2, bool(upper))


def cholesky_inverse(input, upper=False):
    """``torch.cholesky_inverse``: A^-1 for A = L L^T given L (``upper``: A = U^T U); the gradient is
    cholesky_solve's for B = I, as PyTorch's."""
    (input,) = autocast_float32(input, devices=("cpu",))
    check_matrix("cholesky_inverse", input, "A")
    n = input.shape[-1]
    return CholeskySolve.apply(eye(n, dtype=input.dtype, device=input.device), input, bool(upper))


# ---------------------------------------------------------------- pinv, matrix_rank, lstsq
def _tolerances(op, A, atol, rtol):
    """PyTorch's defaults: rtol = eps * max(m, n) unless atol is given (> 0), then 0; each a float or a tensor
    (per matrix, broadcast) as an array."""
    def value(v, name):
        if isinstance(v, Tensor):
            return v._data
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise InputTypeError(f"{op}(): argument '{name}' must be a float or a Tensor, not {type(v).__name__}")
        return float(v)
    given = atol is not None and (isinstance(atol, Tensor) or atol > 0)
    if rtol is None:
        rtol = 0.0 if given else float(np.finfo(A.dtype).eps) * max(A.shape[-2:])
    return (0.0 if atol is None else value(atol, "atol")), value(rtol, "rtol")


def _kept(xp, s, smax, atol, rtol):
    """Which singular values are above max(atol, rtol * smax) (atol / rtol per matrix, broadcast)."""
    tol = xp.maximum(xp.asarray(atol, s.dtype), xp.asarray(rtol, s.dtype) * smax)
    return s > tol[..., None]


class Pinv(Function):
    """The pseudo-inverse from the SVD (``hermitian``: the eigendecomposition), singular values at or below
    max(atol, rtol * largest) dropped. The gradient PyTorch's (constant rank): with P = A^+,
    -P^T g P^T + (I - A P) g^T P P^T + P^T P g^T (I - P A), summed over the batch dims that per-matrix atol /
    rtol broadcast A to."""

    @staticmethod
    def forward(ctx, a, atol, rtol, hermitian):
        xp = _xp(a)
        if min(a.shape[-2:]) == 0:
            p = xp.zeros(a.shape[:-2] + a.shape[::-1][:2], a.dtype)
        elif hermitian:
            w, v = xp.linalg.eigh(a)
            s = xp.abs(w)
            w_inv = backend.where(_kept(xp, s, s.max(-1), atol, rtol), 1 / w, 0)
            p = (v * w_inv[..., None, :]) @ swap(v)
        else:
            u, s, vh = xp.linalg.svd(a, full_matrices=False)
            s_inv = backend.where(_kept(xp, s, s[..., 0], atol, rtol), 1 / s, 0)
            p = swap(vh) @ (s_inv[..., :, None] * swap(u))
        ctx.save_for_backward(a, p)
        return p

    @staticmethod
    def backward(ctx, g):
        a, p = ctx.saved_tensors
        pt, gt = swap(p), swap(g)
        ga = -(pt @ g @ pt) + (gt - a @ (p @ gt)) @ (p @ pt) + (pt @ p) @ (gt - (gt @ p) @ a)
        return unbroadcast(ga, a.shape), None, None, None

    @staticmethod
    def backward_graph(ctx, g):
        a, p = ctx.saved_tensors
        at, p = ctx.graph_input(0, a), ctx.graph_output(p)
        pt, gt = p.mT, g.mT
        ga = -(pt @ g @ pt) + (gt - at @ (p @ gt)) @ (p @ pt) + (pt @ p) @ (gt - (gt @ p) @ at)
        return unbroadcast_graph(ga, a.shape), None, None, None


def pinv(input, rcond=None, hermitian=False, *, atol=None, rtol=None):
    """``torch.linalg.pinv``: the Moore-Penrose pseudo-inverse, singular values at or below max(atol, rtol * the
    largest) dropped (rtol's default eps * max(m, n), 0 once atol is given); ``hermitian``: A symmetric, through
    its eigenvalues. ``rcond`` (PyTorch's older spelling) is rtol."""
    op = "linalg.pinv"
    check_matrix(op, input, square=False)
    if rcond is not None:
        if atol is not None or rtol is not None:
            raise InputTypeError(f"{op}: rcond (the older spelling of rtol) cannot be combined with atol or rtol")
        rtol = rcond
    atol, rtol = _tolerances(op, input, atol, rtol)
    return Pinv.apply(input, atol, rtol, bool(hermitian))


def matrix_rank(input, tol=None, hermitian=False, *, atol=None, rtol=None):
    """``torch.linalg.matrix_rank``: how many singular values (``hermitian``: |eigenvalues|) are above
    max(atol, rtol * the largest), as int64; tolerances as :func:`pinv`'s. ``tol`` (the older spelling) is atol."""
    op = "linalg.matrix_rank"
    (input,) = autocast_float32(input, devices=("cpu",))  # (on PyTorch's cpu float32 list, as lstsq)
    check_matrix(op, input, square=False)
    if tol is not None:
        if atol is not None or rtol is not None:
            raise InputTypeError(f"{op}: tol (the older spelling of atol) cannot be combined with atol or rtol")
        atol, rtol = tol, 0.0
    atol, rtol = _tolerances(op, input, atol, rtol)
    xp = input._xp
    if min(input.shape[-2:]) == 0:
        return Tensor._from_array(xp.zeros(input.shape[:-2], np.int64))
    if hermitian:
        s = xp.abs(xp.linalg.eigvalsh(input._data))
        smax = s.max(-1)
    else:
        s = xp.linalg.svd(input._data, compute_uv=False)
        smax = s[..., 0]
    # (asarray: NumPy's sum of one matrix's flags is a scalar, the tensor wraps a 0-d array)
    return Tensor._from_array(xp.asarray(_kept(xp, s, smax, atol, rtol).sum(-1), dtype=np.int64))


_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def lstsq(input, b, rcond=None, *, driver=None):
    """``torch.linalg.lstsq``: the least-squares solution of A X = B, minimum-norm where A is rank-deficient, as
    (solution, residuals, rank, singular_values) with PyTorch's rules: ``driver`` 'gelsy' (the cpu's default; 'gels'
    the cuda's and its only one) gives the rank, 'gelsd' / 'gelss' the rank and singular values, the others are
    empty; residuals (the squared residual of each column) only for m > n, a driver other than 'gelsy' and every
    A of full rank. Values, not LAPACK's algorithms: the solution is pinv(A, rtol=rcond) @ B (rcond: eps * max(m, n)
    by default), so gradients follow pinv's."""
    op = "linalg.lstsq"
    input, b = autocast_float32(input, b, devices=("cpu",))
    check_matrix(op, input, name="input", square=False)
    check_same_dtype(op, input, b, names=("input", "other"))
    if driver is None:
        driver = "gels" if input.device.type == "cuda" else "gelsy"
    if driver not in _DRIVERS:
        raise InputError(f"torch.linalg.lstsq: parameter `driver` should be one of ({', '.join(_DRIVERS)})")
    if input.device.type == "cuda" and driver != "gels":
        raise InputError(f"torch.linalg.lstsq: `driver` other than `gels` is not supported on CUDA, got {driver!r}")
    vector = b.ndim == input.ndim - 1
    Bm = unsqueeze(b, -1) if vector else b
    if Bm.ndim < 2 or Bm.shape[-2] != input.shape[-2]:
        raise InputError(f"torch.linalg.lstsq: input.size(-2) should match other.size(-2), got {list(input.shape)} and "
                         f"{list(b.shape)}")
    batch = _batch(op, input, Bm)
    m, n = input.shape[-2:]
    eps_rtol = float(np.finfo(input.dtype).eps) * max(m, n)
    rtol = 0.0 if driver == "gels" else (eps_rtol if rcond is None or rcond < 0 else float(rcond))
    X = MatMul.apply(Pinv.apply(input, 0.0, rtol, False), Bm)
    xp, empty = input._xp, lambda dtype: Tensor._from_array(input._xp.zeros((0,), dtype))
    rank, values = empty(np.int64), empty(input.dtype)
    if driver != "gels":
        s = (xp.linalg.svd(input._data, compute_uv=False) if min(m, n)
             else xp.zeros(input.shape[:-2] + (0,), input.dtype))
        smax = s[..., 0] if min(m, n) else xp.zeros(input.shape[:-2], input.dtype)
        rank = Tensor._from_array(_kept(xp, s, smax, 0.0, rtol).sum(-1).astype(np.int64))
        if driver in ("gelsd", "gelss"):
            values = Tensor._from_array(s)
    residuals = empty(input.dtype)
    if m > n and driver != "gelsy" and (driver == "gels" or bool((rank._data == n).all())):
        r = sub(MatMul.apply(input, X), Bm)
        residuals = _sum(mul(r, r), -2)
        if residuals.shape[:-1] != batch:
            residuals = expand(residuals, *batch, residuals.shape[-1])
    return LstsqResult(squeeze(X, -1) if vector else X, residuals, rank, values)
