"""``torch.linalg``'s matrix functions and products: ``matrix_exp`` (a ``Function``: scaling and squaring of a Pade
approximant forward, the block-triangular identity backward), ``matrix_power`` and ``multi_dot`` (compositions of
matmul, so gradients, dtypes and autocast are matmul's), ``chain_matmul``, ``vander`` and ``householder_product``
(compositions too), and the thin ``cross``, ``vecdot``, ``diagonal``, ``matmul``."""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from .. import backend
from ..autograd import Function
from ..tensor import Tensor
from ._common import autocast_float32, autocast_lower, cast
from .creation import eye, full_like, ones
from .diagonals import diagonal as _diagonal
from .elementwise import clone, mul, where
from .linalg_common import check_dtype, check_matrix, check_same_dtype, dtype_name, solve_quiet, swap
from .linalg_decomp import inv
from .matmul import matmul
from .products import cross as _cross
from .reduce import sum as _sum
from .scan import cumprod
from .shape import cat, expand, squeeze, unsqueeze
from ..backend import InputError, InputTypeError

_xp = backend.array_module


_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0, 129060195264000.0,
           10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152  # the largest 1-norm Pade 13 takes unscaled (Higham 2005)


def expm(xp, a):
    """exp of each matrix: scaling and squaring on the [13/13] Pade approximant (Higham 2005), each matrix scaled
    by its own power of two."""
    if a.size == 0:
        return backend.copy(a)
    b, ident = _PADE13, xp.eye(a.shape[-1], dtype=a.dtype)
    s = xp.ceil(xp.log2(xp.maximum(xp.abs(a).sum(-2).max(-1) / _THETA13, 1)))
    s = backend.where(xp.isfinite(s), s, 0).astype(np.int64)  # inf / NaN entries: NaN results, unscaled
    a = a / (2.0 ** s).astype(a.dtype)[..., None, None]
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * ident)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * ident
    r = solve_quiet(xp, v - u, v + u)
    for i in range(int(s.max())):
        r = backend.where((s > i)[..., None, None], r @ r, r)
    return r


class MatrixExp(Function):
    """exp(A); the gradient the upper right block of exp([[A^T, g], [0, A^T]]) (the block-triangular identity)."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return expm(_xp(a), a)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        xp, n = _xp(g), a.shape[-1]
        block = xp.zeros(g.shape[:-2] + (2 * n, 2 * n), g.dtype)
        block[..., :n, :n] = block[..., n:, n:] = swap(a)
        block[..., :n, n:] = g
        return expm(xp, block)[..., :n, n:]

    @staticmethod
    def backward_graph(ctx, g):
        (a,) = ctx.saved_tensors
        n, at = a.shape[-1], ctx.graph_input(0, a).mT
        zeros = Tensor._from_array(_xp(a).zeros(g.shape, g.dtype))
        return MatrixExp.apply(cat([cat([at, g], -1), cat([zeros, at], -1)], -2))[..., :n, n:]


def matrix_exp(input):
    """``torch.linalg.matrix_exp``: the matrix exponential of each square matrix; float16 / bfloat16 computed in
    float32 and rounded once."""
    op = "linalg.matrix_exp"
    check_matrix(op, input, dtype=False)
    if input.dtype in (backend.float16, backend.bfloat16):
        return cast(MatrixExp.apply(cast(input, backend.float32)), input.dtype)
    check_dtype(op, input)
    return MatrixExp.apply(input)


def matrix_power(input, n):
    """``torch.linalg.matrix_power``: A^n by repeated squaring (matmuls, so any dtype matmul takes); n < 0: of
    inv(A); n = 0: the identity."""
    op = "linalg.matrix_power"
    check_matrix(op, input, dtype=False)
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise InputTypeError(f"{op}(): argument 'n' (position 2) must be int, not {type(n).__name__}")
    n = int(n)
    if n == 0:
        ident = clone(expand(eye(input.shape[-1], dtype=input.dtype, device=input.device), *input.shape))
        # on A's tape, as PyTorch's (A gets a zero gradient): the identity selected over A, never a product A * 0
        return where(full_like(input, True, dtype=backend.bool_), ident, input)
    if n < 0:
        input, n = inv(input), -n
    result, z = None, input
    while True:
        if n & 1:
            result = z if result is None else matmul(result, z)
        n >>= 1
        if not n:
            return clone(result) if result is input else result
        z = matmul(z, z)


def _chain_order(dims):
    """The cheapest parenthesization of matrices of shapes (dims[i], dims[i + 1]): split[i][j] is where the product
    of matrices i..j splits (the textbook dynamic program, as PyTorch's multi_dot)."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _chain(tensors, split, i, j):
    if i == j:
        return tensors[i]
    k = split[i][j]
    return matmul(_chain(tensors, split, i, k), _chain(tensors, split, k + 1, j))


def multi_dot(tensors):
    """``torch.linalg.multi_dot``: the product of two or more matrices in the cheapest order; the first may be a
    row vector and the last a column vector (1-D), whose dims the result drops."""
    op = "multi_dot()"
    tensors = list(tensors)
    if len(tensors) < 2:
        raise InputError(f"{op}: expected at least 2 tensors but got {len(tensors)}")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise InputTypeError(f"{op}: expected Tensor as element {i}, got {type(t).__name__}")
        first_or_last = "the first tensor" if i == 0 else "the last tensor" if i == len(tensors) - 1 else None
        if t.ndim != 2 and not (first_or_last and t.ndim == 1):
            what = first_or_last or f"tensor {i}"
            raise InputError(f"{op}: {what} must be {'1D or 2D' if first_or_last else '2D'} but got {t.ndim}D")
        if t.dtype != tensors[0].dtype:
            raise InputTypeError(f"{op}: all tensors must have be the same dtype but tensor 0 is "
                                 f"{np.dtype(tensors[0].dtype).name} and tensor {i} {np.dtype(t.dtype).name}")
    mats = list(tensors)
    if mats[0].ndim == 1:
        mats[0] = unsqueeze(mats[0], 0)
    if mats[-1].ndim == 1:
        mats[-1] = unsqueeze(mats[-1], 1)
    for i in range(len(mats) - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise InputError(f"{op}: tensors {i} and {i + 1} with shapes {list(tensors[i].shape)} and "
                             f"{list(tensors[i + 1].shape)} cannot be multiplied")
    out = _chain(mats, _chain_order([m.shape[0] for m in mats] + [mats[-1].shape[1]]), 0, len(mats) - 1)
    if tensors[-1].ndim == 1:
        out = squeeze(out, -1)
    return squeeze(out, 0) if tensors[0].ndim == 1 else out


def chain_matmul(*matrices):
    """``torch.chain_matmul`` (deprecated in PyTorch for ``linalg.multi_dot``, which it warns about as PyTorch
    does): the product of 2-D matrices in the cheapest order."""
    warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch release. Use "
                  "torch.linalg.multi_dot instead, which accepts a list of two or more tensors rather than multiple "
                  "parameters.", UserWarning, stacklevel=2)
    for t in matrices:
        if isinstance(t, Tensor) and t.ndim != 2:
            raise InputError(f"chain_matmul: Tensor dimension is {t.ndim}, expected 2 instead.")
    if len(matrices) == 1:
        return clone(matrices[0])
    return multi_dot(matrices)


def vander(x, *, N=None):  # noqa: N803 - PyTorch's name
    """``torch.linalg.vander``: the Vandermonde matrix of the last dim of ``x`` (a 0-d x as one entry), columns the
    powers 0 .. N - 1 (N: that dim's size by default, at least 2), as the running product of x, so its gradient is
    cumprod's. Integer inputs give int64 (cumprod's), as PyTorch's; bool, float16 and bfloat16 are refused."""
    op = "linalg.vander"
    if not isinstance(x, Tensor):
        raise InputTypeError(f"linalg_vander(): argument 'x' (position 1) must be Tensor, not {type(x).__name__}")
    if x.dtype in (backend.bool_, backend.float16, backend.bfloat16) or not (
            backend.is_floating(x.dtype) or np.issubdtype(x.dtype, np.integer)):
        raise InputTypeError(f"{op} supports floating point, complex, and integer tensors, but got "
                             f"{dtype_name(x.dtype)}")
    if N is not None and (isinstance(N, bool) or not isinstance(N, numbers.Integral)):
        raise InputTypeError(f"linalg_vander(): argument 'N' must be int, not {type(N).__name__}")
    x = unsqueeze(x, -1) if x.ndim == 0 else x
    n = x.shape[-1] if N is None else int(N)
    if n <= 1:
        raise InputError(f"{op}: N must be greater than 1, got N={n}")
    powers = cumprod(expand(unsqueeze(x, -1), *x.shape, n - 1), -1)
    return cat([ones(*x.shape, 1, dtype=powers.dtype, device=x.device), powers], -1)


def householder_product(input, tau):  # noqa: A002 - PyTorch's names
    """``torch.linalg.householder_product``: the first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T with v_i
    the i-th column of ``input`` (m, n) below its diagonal, 1 on it and 0 above (LAPACK's orgqr; ``input`` and
    ``tau`` as geqrf gives them). The reflectors applied one by one to I's first n columns: a composition of
    matmuls, so its gradients are theirs. Under autocast on cpu in float32, as PyTorch's cpu float32 list."""
    op = "torch.linalg.householder_product"
    for name, t in (("input", input), ("tau", tau)):
        if not isinstance(t, Tensor):
            raise InputTypeError(f"linalg_householder_product(): argument '{name}' must be Tensor, not "
                                 f"{type(t).__name__}")
    input, tau = autocast_float32(input, tau, devices=("cpu",))
    if input.ndim < 2:
        raise InputError(f"{op}: input must have at least 2 dimensions.")
    if tau.ndim != input.ndim - 1:
        raise InputError(f"{op}: Expected tau to have one dimension less than input, but got tau.ndim equal to "
                         f"{tau.ndim} and input.ndim is equal to {input.ndim}")
    m, n = input.shape[-2:]
    k = tau.shape[-1]
    if m < n:
        raise InputError(f"{op}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    if n < k:
        raise InputError(f"{op}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    if tuple(tau.shape[:-1]) != tuple(input.shape[:-2]):
        raise InputError(f"{op}: Expected batch dimensions of tau to be equal to input.shape[:-2], but got "
                         f"{list(tau.shape[:-1])}")
    if tau.dtype != input.dtype:
        raise InputTypeError(f"{op}: tau dtype {dtype_name(tau.dtype)} does not match input dtype "
                             f"{dtype_name(input.dtype)}")
    check_dtype(op, input)
    xp = input._xp
    ident = Tensor._from_array(xp.eye(m, n, dtype=input.dtype))
    below = Tensor._from_array(xp.tri(m, n, -1, dtype=bool))
    v = where(below, input, ident)  # the reflectors' vectors, as columns
    # I's first n columns, on input's tape (a zero gradient where no reflector reads it, as PyTorch's)
    q = where(Tensor._from_array(xp.zeros((), bool)), input, ident)
    for i in range(k - 1, -1, -1):  # H_i (H_{i+1} ... H_k I)
        vi = v[..., :, i:i + 1]
        q = q - vi @ (unsqueeze(tau[..., i:i + 1], -1) * (vi.mT @ q))
    return q


# ---------------------------------------------------------------- the thin ones
def cross(input, other, *, dim=-1):  # noqa: A002 - PyTorch's names
    """``torch.linalg.cross``: the cross product of 3-vectors along ``dim`` (-1 by default), batch dims broadcast
    (the ranks must agree, as PyTorch's)."""
    op = "linalg.cross"
    for name, t in (("input", input), ("other", other)):
        if not isinstance(t, Tensor):
            raise InputTypeError(f"{op}(): argument '{name}' must be Tensor, not {type(t).__name__}")
    if input.ndim != other.ndim:
        raise InputError(f"{op}: inputs must have the same number of dimensions.")
    if input.ndim == 0 or not -input.ndim <= dim < input.ndim:
        raise IndexError(f"{op}: dimension {dim} out of range for tensors of {input.ndim} dimensions")
    if input.shape[dim] != 3 or other.shape[dim] != 3:
        raise InputError(f"{op}: inputs dimension {dim} must have length 3. Got {input.shape[dim]} and "
                         f"{other.shape[dim]}")
    if input.dtype != other.dtype:
        raise InputTypeError(f"{op}: expected both inputs of one dtype, got {dtype_name(input.dtype)} and "
                             f"{dtype_name(other.dtype)}")
    return _cross(input, other, dim)


def vecdot(x, y, *, dim=-1):
    """``torch.linalg.vecdot``: the dot product of vectors along ``dim``, batch dims broadcast (real tensors: no
    conjugation). Lowered by autocast on cpu, as on PyTorch's cpu list."""
    op = "linalg.vecdot"
    for name, t in (("x", x), ("y", y)):
        if not isinstance(t, Tensor):
            raise InputTypeError(f"{op}(): argument '{name}' must be Tensor, not {type(t).__name__}")
    x, y = autocast_lower(x, y, devices=("cpu",))
    if not backend.is_floating(x.dtype):
        raise InputTypeError(f"{op}: Expected a floating point or complex tensor as input. Got {dtype_name(x.dtype)}")
    check_same_dtype(op, x, y, names=("x", "y"))
    try:
        np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        raise InputError(f"{op}: shapes {list(x.shape)} and {list(y.shape)} cannot be broadcast together") from None
    return _sum(mul(x, y), dim)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """``torch.linalg.diagonal``: :func:`minifused.diagonal` over the last two dims by default (a view)."""
    return _diagonal(A, offset, dim1, dim2)


def linalg_matmul(input, other):  # noqa: A002 - PyTorch's names
    """``torch.linalg.matmul``: :func:`minifused.matmul`."""
    return matmul(input, other)
