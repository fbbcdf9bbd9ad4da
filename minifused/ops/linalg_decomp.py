"""``torch.linalg``'s factorizations and what they give directly: ``inv`` / ``inv_ex``, ``det``, ``slogdet``,
``cholesky`` / ``cholesky_ex``, ``qr``, ``eigh`` / ``eigvalsh``, ``svd`` / ``svdvals``, and ``tensorinv`` (inv of the
tensor seen as a matrix). Each op is one ``Function`` on raw arrays through ``xp.linalg`` (NumPy's LAPACK on the cpu,
CuPy's cuSOLVER / cuBLAS on cuda, both batched over the leading dims) whose backward is PyTorch's formula; failures
and checks as ``linalg_common.py`` describes. float32 and float64 only: float16 / bfloat16 and integers raise
InputTypeError, as PyTorch's CPU kernels refuse them. Under autocast on cpu inv, cholesky, qr, eigh, eigvalsh, svd,
svdvals (and their _ex forms) and tensorinv take a float16 / bfloat16 input in float32, as PyTorch's cpu float32 list
(det and slogdet are not on it)."""
from __future__ import annotations

import math
import numbers
from collections import namedtuple

from .. import backend
from ..autograd import Function
from ..tensor import Tensor
from ..backend import InputError, InputTypeError
from ._common import autocast_float32
from .diagonals import diag_embed
from .elementwise import where
from .linalg_solve import SolveTriangular
from .movement import tril
from .shape import cat, reshape
from .linalg_common import (check_matrix, cholesky_info, converged, detached, factor, inv_quiet, lu_info,
                            not_pd_message, set_diagonal, singular_message, swap, tri_solve)

_xp = backend.array_module

# PyTorch's torch.return_types
InvExResult = namedtuple("linalg_inv_ex", ["inverse", "info"])
CholeskyExResult = namedtuple("linalg_cholesky_ex", ["L", "info"])
SlogdetResult = namedtuple("linalg_slogdet", ["sign", "logabsdet"])
QRResult = namedtuple("linalg_qr", ["Q", "R"])
EighResult = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
SVDResult = namedtuple("linalg_svd", ["U", "S", "Vh"])


# ---------------------------------------------------------------- the Functions
class Inv(Function):
    """A^-1 (and the info of each matrix); the gradient -A^-T g A^-T."""

    @staticmethod
    def forward(ctx, a, op, check):
        xp = _xp(a)
        inverse, info = factor(op, xp, xp.linalg.inv, (a,), lu_info, singular_message, check)
        ctx.save_for_backward(inverse)
        return inverse, info

    @staticmethod
    def backward(ctx, g, _):
        (inverse,) = ctx.saved_tensors
        t = swap(inverse)
        return -(t @ g @ t), None, None

    @staticmethod
    def backward_graph(ctx, g, _):
        t = ctx.graph_output(ctx.saved_tensors[0]).mT
        return -(t @ g @ t), None, None


def _const(array):
    """An array (a mask, an identity, a sign: constant near the point) as a tensor of no graph."""
    return Tensor._from_array(array, False)


def _matrices(t):
    """A tensor of one number per matrix, shaped to scale its matrices."""
    return reshape(t, tuple(t.shape) + (1, 1))


def adjugate_t(xp, a):
    """adj(A)^T = det(A) A^-T, also where A is singular: from A = U S Vh, det(U) det(Vh) U diag(prod_{j != i} s_j) Vh
    (the products of the other singular values, without dividing)."""
    if a.shape[-1] == 0:
        return xp.zeros_like(a)
    u, s, vh = xp.linalg.svd(a)
    ones = xp.ones(s.shape[:-1] + (1,), s.dtype)
    before = xp.cumprod(xp.concatenate([ones, s[..., :-1]], -1), -1)
    after = xp.flip(xp.cumprod(xp.concatenate([ones, xp.flip(s, -1)[..., :-1]], -1), -1), -1)
    sign = xp.asarray(xp.linalg.det(u) * xp.linalg.det(vh))
    return (u * (before * after)[..., None, :]) @ vh * sign[..., None, None]


class Det(Function):
    """det(A); the gradient g adj(A)^T (g det(A) A^-T where A is invertible)."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return _xp(a).linalg.det(a)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return _xp(g).asarray(g)[..., None, None] * adjugate_t(_xp(g), a)

    @staticmethod
    def backward_graph(ctx, g):
        """g det(A) A^-T, as PyTorch's double backward takes it (through an inverse, not the SVD, which is not
        differentiable where singular values repeat: at the identity, say); the matrices that are exactly singular
        take :func:`adjugate_t`'s SVD formula, recorded (differentiable where their singular values are distinct),
        each path fed a harmless constant in place of the other path's matrices. The check for a singular one
        waits for the device."""
        (a,) = ctx.saved_tensors
        xp, n = _xp(a), a.shape[-1]
        at = ctx.graph_input(0, a)
        d = xp.linalg.det(a)  # (the forward's value, for the node's output)
        scaled = _matrices(g * ctx.graph_output(d))
        singular = xp.asarray(d == 0)
        if not bool(singular.any()):
            return scaled * Inv.apply(at, "linalg.det", False)[0].mT
        mask = _const(singular[..., None, None])
        ident = xp.eye(n, dtype=a.dtype)
        regular = scaled * Inv.apply(where(mask, _const(ident), at), "linalg.det", False)[0].mT
        u, s, vh = SVD.apply(where(mask, at, _const(ident * xp.arange(1, n + 1, dtype=a.dtype))), False, True,
                             "linalg.det")
        sign = _const(xp.asarray(xp.linalg.det(u._data) * xp.linalg.det(vh._data)))
        others = where(_const(ident.astype(bool)), 1.0, s.unsqueeze(-2)).prod(-1)  # prod_{j != i} s_j
        adjugate = (u * others.unsqueeze(-2)) @ vh * _matrices(sign)
        return where(mask, _matrices(g) * adjugate, regular)


class SLogDet(Function):
    """(log|det A|, sign det A); the gradient of the log g A^-T (the sign has none)."""

    @staticmethod
    def forward(ctx, a):
        sign, logabsdet = _xp(a).linalg.slogdet(a)
        ctx.save_for_backward(a)
        return logabsdet, sign

    @staticmethod
    def backward(ctx, g, _):
        (a,) = ctx.saved_tensors
        xp = _xp(g)
        return xp.asarray(g)[..., None, None] * swap(inv_quiet(xp, a))

    @staticmethod
    def backward_graph(ctx, g, _):
        (a,) = ctx.saved_tensors
        return _matrices(g) * Inv.apply(ctx.graph_input(0, a), "linalg.slogdet", False)[0].mT


class Cholesky(Function):
    """The lower factor L of A = L L^T (reading A's lower triangle), or with ``upper`` U = L^T of A's upper one
    (and the info of each matrix). The gradient PyTorch's: L^-T Phi L^-1, Phi the symmetric matrix of
    tril(L^T gL) with its diagonal halved."""

    @staticmethod
    def forward(ctx, a, upper, op, check):
        xp = _xp(a)
        src = xp.ascontiguousarray(swap(a)) if upper else a
        low, info = factor(op, xp, xp.linalg.cholesky, (src,), cholesky_info, not_pd_message, check)
        ctx.save_for_backward(low)
        ctx.upper = upper
        return (xp.ascontiguousarray(swap(low)) if upper else low), info

    @staticmethod
    def backward(ctx, g, _):
        (low,) = ctx.saved_tensors
        xp = _xp(g)
        phi = xp.tril(swap(low) @ (swap(g) if ctx.upper else g))
        phi = 0.5 * (phi + swap(xp.tril(phi, -1)))
        lt = xp.ascontiguousarray(swap(low))
        left = tri_solve(xp, lt, phi, upper=True)  # L^-T Phi, then (L^-T (L^-T Phi)^T)^T = L^-T Phi L^-1
        return swap(tri_solve(xp, lt, xp.ascontiguousarray(swap(left)), upper=True)), None, None, None

    @staticmethod
    def backward_graph(ctx, g, _):
        """As :meth:`backward`, with L the node's output and recorded triangular solves."""
        (low,) = ctx.saved_tensors
        out = ctx.graph_output(swap(low) if ctx.upper else low)
        low, g = (out.mT, g.mT) if ctx.upper else (out, g)
        phi = tril(low.mT @ g)
        phi = 0.5 * (phi + tril(phi, -1).mT)
        left = SolveTriangular.apply(low.mT, phi, True, False)  # L^-T Phi, then (L^-T (L^-T Phi)^T)^T
        return SolveTriangular.apply(low.mT, left.mT, True, False).mT, None, None, None


def copyltu(m):
    """The symmetric matrix whose lower triangle is m's."""
    xp = _xp(m)
    return xp.tril(m) + swap(xp.tril(m, -1))


def qr_grad(q, r, gq, gr):
    """The gradient of A = QR for a square R (m >= n): (gQ + Q copyltu(R gR^T - gQ^T Q)) R^-T."""
    xp = _xp(q)
    b = gq + q @ copyltu(r @ swap(gr) - swap(gq) @ q)
    return swap(tri_solve(xp, r, xp.ascontiguousarray(swap(b)), upper=True))


def qr_grad_graph(q, r, gq, gr):
    """:func:`qr_grad` of graph tensors, with recorded ops."""
    m = r @ gr.mT - gq.mT @ q
    b = gq + q @ (tril(m) + tril(m, -1).mT)
    return SolveTriangular.apply(r, b.mT, True, False).mT


class QR(Function):
    """(Q, R) of A = QR, ``mode`` as numpy's / PyTorch's ('r': Q empty). The gradient PyTorch's: :func:`qr_grad`,
    and for a wide A = Q [U | V] the square case of its first m columns with gQ + A[:, m:] gV^T."""

    @staticmethod
    def forward(ctx, a, mode):
        xp = _xp(a)
        ctx.mode = mode
        if mode == "r":
            return xp.empty((0,), a.dtype), xp.linalg.qr(a, mode="r")
        q, r = xp.linalg.qr(a, mode=mode)
        ctx.save_for_backward(q, r)
        return q, r

    @staticmethod
    def backward(ctx, gq, gr):
        if ctx.mode == "r":
            raise RuntimeError("linalg.qr: The derivative of linalg.qr depends on Q, which is not computed when "
                               "mode='r'. Please use linalg.qr(A, mode='reduced') if you are going to differentiate "
                               "through linalg.qr.")
        q, r = ctx.saved_tensors
        m, n = q.shape[-2], r.shape[-1]
        if ctx.mode == "complete" and m > n:
            raise RuntimeError("linalg.qr: The QR decomposition is not differentiable when mode='complete' and "
                               "nrows > ncols.")
        if m >= n:
            return qr_grad(q, r, gq, gr), None
        xp = _xp(q)
        gu, gv = gr[..., :m], gr[..., m:]
        gx = qr_grad(q, r[..., :m], gq + q @ (r[..., m:] @ swap(gv)), gu)
        return xp.concatenate([gx, q @ gv], -1), None

    @staticmethod
    def backward_graph(ctx, gq, gr):
        if ctx.mode == "r":
            return QR.backward(ctx, gq, gr)  # (raises PyTorch's error)
        q, r = ctx.saved_tensors
        m, n = q.shape[-2], r.shape[-1]
        if ctx.mode == "complete" and m > n:
            return QR.backward(ctx, gq, gr)  # (raises too)
        q, r = ctx.graph_output(q, 0), ctx.graph_output(r, 1)
        if m >= n:
            return qr_grad_graph(q, r, gq, gr), None
        gu, gv = gr[..., :m], gr[..., m:]
        gx = qr_grad_graph(q, r[..., :m], gq + q @ (r[..., m:] @ gv.mT), gu)
        return cat([gx, q @ gv], -1), None


class Eigh(Function):
    """Eigenvalues (ascending) and, with ``vectors``, eigenvectors of a symmetric A read from its ``uplo`` triangle.
    The gradient PyTorch's: V (diag(gw) + sym(V^T gV) / (w_j - w_i)) V^T, symmetric."""

    @staticmethod
    def forward(ctx, a, uplo, vectors, op):
        xp = _xp(a)
        if not (vectors or ctx.recording):
            return converged(op, xp.linalg.eigvalsh, a, UPLO=uplo)
        w, v = converged(op, xp.linalg.eigh, a, UPLO=uplo)
        ctx.save_for_backward(w, v)
        ctx.meta = (uplo, op)
        return (w, v) if vectors else w

    @staticmethod
    def backward(ctx, gw, gv=None):
        w, v = ctx.saved_tensors
        xp = _xp(w)
        if gv is None:
            inner = xp.zeros(v.shape, v.dtype)
        else:
            x = swap(v) @ gv
            e = set_diagonal(w[..., None, :] - w[..., :, None], 1)
            inner = 0.5 * (x - swap(x)) / e
        return v @ set_diagonal(inner, gw) @ swap(v), None, None, None

    @staticmethod
    def backward_graph(ctx, gw, gv=None):
        """As :meth:`backward`, with w and V the node's outputs; eigvalsh's V (not an output) from a recorded eigh of
        A (a stand-in valued V diag(w) V^T where A is not a leaf: only its ``uplo`` triangle is read)."""
        w, v = ctx.saved_tensors
        if gv is None:
            uplo, op = ctx.meta
            v = Eigh.apply(ctx.graph_input(0, (v * w[..., None, :]) @ swap(v)), uplo, True, op)[1]
            return (v * gw.unsqueeze(-2)) @ v.mT, None, None, None
        w, v = ctx.graph_output(w, 0), ctx.graph_output(v, 1)
        x = v.mT @ gv
        e = w.unsqueeze(-2) - w.unsqueeze(-1) + _const(_xp(x._data).eye(x.shape[-1], dtype=x.dtype))  # (1 on its 0s)
        inner = 0.5 * (x - x.mT) / e + diag_embed(gw)  # (x - x^T: 0 on the diagonal)
        return v @ inner @ v.mT, None, None, None


def svd_grad(u, s, vh, gu, gs, gvh):
    """PyTorch's svd_backward for real matrices (U: (m, k), Vh: (k, n), k = min(m, n)); ``gu`` / ``gvh`` None when
    only the singular values were asked for."""
    if gu is None:
        return (u * gs[..., None, :]) @ vh
    m, n, k = u.shape[-2], vh.shape[-1], s.shape[-1]
    v, gv = swap(vh), swap(gvh)
    uhgu, vhgv = swap(u) @ gu, swap(v) @ gv
    uhgu, vhgv = uhgu - swap(uhgu), vhgv - swap(vhgv)
    s2 = s * s
    e = set_diagonal(s2[..., None, :] - s2[..., :, None], 1)
    inner = set_diagonal((uhgu * s[..., None, :] + s[..., :, None] * vhgv) / e, gs)
    if m > k:  # gU's part outside U's span
        gus = gu / s[..., None, :]
        return (u @ inner + gus - u @ (swap(u) @ gus)) @ vh
    if n > k:
        sgvh = gvh / s[..., :, None]
        return u @ (inner @ vh + sgvh - (sgvh @ v) @ vh)
    return u @ inner @ vh


def svd_grad_graph(u, s, vh, gu, gs, gvh):
    """:func:`svd_grad` of graph tensors (U, Vh thin, all gradients given), with recorded ops."""
    m, n, k = u.shape[-2], vh.shape[-1], s.shape[-1]
    v, gv = vh.mT, gvh.mT
    uhgu, vhgv = u.mT @ gu, v.mT @ gv
    uhgu, vhgv = uhgu - uhgu.mT, vhgv - vhgv.mT  # (0 on the diagonal)
    s2 = s * s
    e = s2.unsqueeze(-2) - s2.unsqueeze(-1) + _const(_xp(s._data).eye(k, dtype=s.dtype))  # (1 on its 0s)
    inner = (uhgu * s.unsqueeze(-2) + s.unsqueeze(-1) * vhgv) / e + diag_embed(gs)
    if m > k:
        gus = gu / s.unsqueeze(-2)
        return (u @ inner + gus - u @ (u.mT @ gus)) @ vh
    if n > k:
        sgvh = gvh / s.unsqueeze(-1)
        return u @ (inner @ vh + sgvh - (sgvh @ v) @ vh)
    return u @ inner @ vh


class SVD(Function):
    """(U, S, Vh) of A = U diag(S) Vh (S descending), or with ``vectors`` False S alone. ``full``: U and Vh square;
    their extra columns / rows carry no gradient (PyTorch narrows them away too)."""

    @staticmethod
    def forward(ctx, a, full, vectors, op):
        xp = _xp(a)
        if not (vectors or ctx.recording):
            return converged(op, xp.linalg.svd, a, compute_uv=False)
        u, s, vh = converged(op, xp.linalg.svd, a, full_matrices=full and vectors)
        ctx.save_for_backward(u, s, vh)
        ctx.vectors = vectors
        ctx.op = op
        return (u, s, vh) if vectors else s

    @staticmethod
    def backward(ctx, *grads):
        u, s, vh = ctx.saved_tensors
        k = s.shape[-1]
        if not ctx.vectors:
            return svd_grad(u, s, vh, None, grads[0], None), None, None, None
        gu, gs, gvh = grads
        return svd_grad(u[..., :k], s, vh[..., :k, :], gu[..., :k], gs, gvh[..., :k, :]), None, None, None

    @staticmethod
    def backward_graph(ctx, *grads):
        """As :meth:`backward`, with U, S, Vh the node's outputs; svdvals' U and Vh (not outputs) from a recorded svd
        of A (a stand-in valued U diag(S) Vh where A is not a leaf)."""
        u, s, vh = ctx.saved_tensors
        k = s.shape[-1]
        if not ctx.vectors:
            u, _, vh = SVD.apply(ctx.graph_input(0, (u * s[..., None, :]) @ vh), False, True, ctx.op)
            return (u * grads[0].unsqueeze(-2)) @ vh, None, None, None
        u, s, vh = (ctx.graph_output(x, i) for i, x in enumerate((u, s, vh)))
        gu, gs, gvh = grads
        return svd_grad_graph(u[..., :k], s, vh[..., :k, :], gu[..., :k], gs, gvh[..., :k, :]), None, None, None


# ---------------------------------------------------------------- the public functions
def inv(A):
    """``torch.linalg.inv``: the inverse of each square matrix; a singular one raises :class:`LinAlgError`."""
    (A,) = autocast_float32(A, devices=("cpu",))
    check_matrix("linalg.inv", A)
    return Inv.apply(A, "linalg.inv", True)[0]


def inv_ex(A, *, check_errors=False):
    """``torch.linalg.inv_ex``: (inverse, info): info 0, or LAPACK's (the first zero pivot, counted from 1) for a
    singular matrix, whose inverse is then NaN; ``check_errors`` raises instead."""
    (A,) = autocast_float32(A, devices=("cpu",))
    check_matrix("linalg.inv_ex", A)
    inverse, info = Inv.apply(A, "linalg.inv_ex", check_errors)
    return InvExResult(inverse, detached(info))


def tensorinv(input, ind=2):  # noqa: A002 - PyTorch's name
    """``torch.linalg.tensorinv``: the inverse of ``input`` for tensordot over its first ``ind`` dims, shaped
    input.shape[ind:] + input.shape[:ind]; the two products of dims must be equal. A singular one raises
    :class:`LinAlgError`, as inv. Under autocast on cpu in float32 (PyTorch's cpu float32 list)."""
    op = "linalg.tensorinv"
    if not isinstance(input, Tensor):
        raise InputTypeError(f"linalg_tensorinv(): argument 'input' (position 1) must be Tensor, not "
                             f"{type(input).__name__}")
    if isinstance(ind, bool) or not isinstance(ind, numbers.Integral):
        raise InputTypeError(f"linalg_tensorinv(): argument 'ind' must be int, not {type(ind).__name__}")
    if ind <= 0:
        raise InputError(f"{op}: Expected a strictly positive integer for 'ind', but got {ind}")
    if ind > input.ndim:
        raise InputError(f"{op}: 'ind' must be at most input.ndim ({input.ndim}), but got {ind}")
    (input,) = autocast_float32(input, devices=("cpu",))
    start, end = input.shape[:ind], input.shape[ind:]
    rows, cols = math.prod(start), math.prod(end)
    if rows != cols:
        raise InputError(f"{op}: Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                         f"prod(self.shape[:ind]), but got {cols} != {rows}")
    matrix = reshape(input, (rows, cols))
    check_matrix(op, matrix)
    return reshape(Inv.apply(matrix, op, True)[0], tuple(end) + tuple(start))


def det(A):
    """``torch.linalg.det``: the determinant of each square matrix (1 for a 0 x 0 one)."""
    check_matrix("linalg.det", A)
    return Det.apply(A)


def slogdet(A):
    """``torch.linalg.slogdet``: (sign, logabsdet) of the determinant; a singular matrix gives (0, -inf)."""
    check_matrix("linalg.slogdet", A)
    logabsdet, sign = SLogDet.apply(A)
    return SlogdetResult(detached(sign), logabsdet)


def cholesky(input, *, upper=False):
    """``torch.linalg.cholesky``: L lower-triangular with A = L L^T (or U = L^T with ``upper``); a matrix that is
    not positive-definite raises :class:`LinAlgError` naming its first such leading minor."""
    (input,) = autocast_float32(input, devices=("cpu",))
    check_matrix("linalg.cholesky", input)
    return Cholesky.apply(input, bool(upper), "linalg.cholesky", True)[0]


def cholesky_ex(input, *, upper=False, check_errors=False):
    """``torch.linalg.cholesky_ex``: (L, info), info the order of the first leading minor that is not
    positive-definite (0: none; L is NaN there); ``check_errors`` raises instead."""
    (input,) = autocast_float32(input, devices=("cpu",))
    check_matrix("linalg.cholesky_ex", input)
    low, info = Cholesky.apply(input, bool(upper), "linalg.cholesky_ex", check_errors)
    return CholeskyExResult(low, detached(info))


def qr(A, mode="reduced"):
    """``torch.linalg.qr``: (Q, R) with ``mode`` 'reduced' (Q: (m, k), R: (k, n)), 'complete' (Q: (m, m)) or 'r'
    (R only; Q an empty tensor, and no gradient, as PyTorch's)."""
    if mode not in ("reduced", "complete", "r"):
        raise InputError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', or "
                         f"'complete'")
    (A,) = autocast_float32(A, devices=("cpu",))
    check_matrix("linalg.qr", A, square=False)
    return QRResult(*QR.apply(A, mode))


def _uplo(UPLO):  # noqa: N803 - PyTorch's name
    if not isinstance(UPLO, str) or UPLO.upper() not in ("L", "U"):
        raise InputError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return UPLO.upper()


def eigh(input, UPLO="L"):  # noqa: N803 - PyTorch's name
    """``torch.linalg.eigh``: (eigenvalues ascending, eigenvectors as columns) of symmetric matrices, read from
    their lower (``UPLO='L'``) or upper triangle."""
    (input,) = autocast_float32(input, devices=("cpu",))
    check_matrix("linalg.eigh", input)
    return EighResult(*Eigh.apply(input, _uplo(UPLO), True, "linalg.eigh"))


def eigvalsh(input, UPLO="L"):  # noqa: N803 - PyTorch's name
    """``torch.linalg.eigvalsh``: the eigenvalues (ascending) of symmetric matrices."""
    (input,) = autocast_float32(input, devices=("cpu",))
    check_matrix("linalg.eigvalsh", input)
    return Eigh.apply(input, _uplo(UPLO), False, "linalg.eigvalsh")


def _driver(op, A, driver):
    if driver is None:
        return
    if A.device.type != "cuda":
        raise InputError(f"torch.{op}: keyword argument `driver=` is only supported on CUDA inputs with cuSOLVER "
                         f"backend.")
    if driver not in ("gesvd", "gesvdj", "gesvda"):
        raise InputError(f"{op}: driver must be None, 'gesvd', 'gesvdj' or 'gesvda', got {driver!r}")


def svd(A, full_matrices=True, *, driver=None):
    """``torch.linalg.svd``: (U, S, Vh) with A = U diag(S) Vh, S descending. ``driver`` (cuda only, as PyTorch's)
    is accepted; CuPy picks its own (gesvdj for batches of small matrices, gesvd otherwise)."""
    (A,) = autocast_float32(A, devices=("cpu",))
    check_matrix("linalg.svd", A, square=False)
    _driver("linalg.svd", A, driver)
    return SVDResult(*SVD.apply(A, bool(full_matrices), True, "linalg.svd"))


def svdvals(A, *, driver=None):
    """``torch.linalg.svdvals``: the singular values, descending; differentiable (through U and Vh)."""
    (A,) = autocast_float32(A, devices=("cpu",))
    check_matrix("linalg.svdvals", A, square=False)
    _driver("linalg.svdvals", A, driver)
    return SVD.apply(A, False, False, "linalg.svdvals")
