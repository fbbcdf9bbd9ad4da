"""Matrix and tensor products beyond ``matmul.py``, with PyTorch's names and semantics: ``mv``, the scaled sums
``addmv`` / ``addr`` / ``baddbmm`` / ``addbmm`` (and the in-place ``addmv_`` ... ``addmm_``), ``inner``, ``vdot``,
``tensordot``, ``kron``, ``cross``, the distances ``cdist`` / ``pdist`` / ``dist`` (the diagonals: ``diagonals.py``).

Most are compositions of differentiable ops (``addbmm`` and ``tensordot`` reshape to one GEMM), so autograd, CPU
and GPU paths come with them. A ``Function`` where a composition would be wrong or slow: ``cdist`` (PyTorch's
backward; for p = 2 a matmul path that never forms the (P, R, M) differences). Dtypes as PyTorch's: one dtype
(``addr``, ``kron``, ``dist`` promote); bool products raise NotImplementedError (a RuntimeError).
"""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from .. import backend
from ..autograd import Function, is_grad_enabled
from ..tensor import Tensor
from ._common import (autocast_float32, autocast_float32_on_cuda, autocast_lower, autocast_off, cast, number_arg,
                      promote)
from .elementwise import add, clone, mul, sub, where
from .matmul import MatMul, _swap, addmm
from .movement import roll
from .reduce import dim_index, vector_norm
from .shape import expand, permute, reshape
from ..backend import InputError, InputTypeError


_xp = backend.array_module


# ---------------------------------------------------------------- checks shared by the family
def _tensors(op, **named):
    """Each argument a Tensor (a TypeError naming it otherwise), all on one device."""
    for arg, t in named.items():
        if not isinstance(t, Tensor):
            raise InputTypeError(f"{op}(): argument '{arg}' must be Tensor, not {type(t).__name__}")
    devices = sorted({str(t.device) for t in named.values()})
    if len(devices) > 1:
        raise RuntimeError(f"{op}: expected all tensors on the same device, got {' and '.join(devices)}")


def _name(dtype):
    return np.dtype(dtype).name


def _operands(op, devices=None, **named):
    """The tensors checked (:func:`_tensors`), autocast as the matrix products are (on ``devices``, as
    :func:`autocast_lower`), of one dtype, not bool."""
    _tensors(op, **named)
    tensors = autocast_lower(*named.values(), devices=devices)
    _same_dtype(op, *tensors)
    return tensors


def _same_dtype(op, *tensors):
    if len({t.dtype for t in tensors}) > 1:
        raise RuntimeError(f"{op}: expected all tensors to have the same dtype, got "
                           f"{', '.join(_name(t.dtype) for t in tensors)}")
    if tensors[0].dtype == backend.bool_:  # NotImplementedError is a RuntimeError, as PyTorch raises it
        raise NotImplementedError(f"{op}: not implemented for bool tensors")


def _broadcast(op, *shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise RuntimeError(f"{op}: shapes {' and '.join(str(list(s)) for s in shapes)} cannot be broadcast "
                           f"together") from None


def _number(op, p):
    p = number_arg(op, "p", p)
    if not isinstance(p, numbers.Real):
        raise InputTypeError(f"{op}(): argument 'p' must be a number, not {type(p).__name__}")
    return float(p)


def _int(op, arg, value):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise InputTypeError(f"{op}(): argument '{arg}' must be int, not {type(value).__name__}")
    return int(value)


def _input_fits(op, input, shape):  # noqa: A002 - PyTorch's name
    """``input`` must broadcast to the product's ``shape`` (it is expanded, never the product)."""
    if input.ndim > len(shape) or any(n not in (1, m) for n, m in zip(input.shape[::-1], shape[::-1])):
        raise RuntimeError(f"{op}: input of shape {list(input.shape)} does not broadcast to the product's shape "
                           f"{list(shape)}")


def _scaled(x, factor):
    # by a 0-d tensor of x's dtype: a Python float would widen bfloat16; integer tensors truncate the factor,
    # as PyTorch casts it
    return x if factor == 1 else mul(x, Tensor._from_array(x._xp.asarray(factor, x.dtype)))


def _ignored(x):
    """Zeros of ``x``'s shape and dtype that keep ``x`` on the tape (its gradient zero): a select, so a NaN or
    inf in ``x`` does not propagate as ``0 * x`` would."""
    return where(Tensor._from_array(x._xp.zeros((), bool)), x, 0)


def _plus(op, input, product, beta, alpha, ignore_product=False):  # noqa: A002 - PyTorch's name
    """``beta * input + alpha * product``, input broadcast; with beta = 0 input's values are ignored (NaN in
    it does not propagate) but it still gets its zero gradient, as in PyTorch; likewise the product's with
    alpha = 0 where ``ignore_product`` (PyTorch's addmv and addbmm; its baddbmm and addr multiply by 0)."""
    if not all(isinstance(v, numbers.Real) for v in (beta, alpha)):
        raise InputTypeError(f"{op}: beta and alpha must be real numbers, got {beta!r} and {alpha!r}")
    product = _ignored(product) if alpha == 0 and ignore_product else _scaled(product, alpha)
    if beta != 0:
        return add(_scaled(input, beta), product)
    if not backend.is_floating(input.dtype):
        return product
    return add(product, _ignored(input))


# ---------------------------------------------------------------- matrix-vector and batched products
def _mv_operands(op, mat, vec):
    if mat.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"{op}: expected a 2-D matrix and a 1-D vector, got shapes {list(mat.shape)} and "
                           f"{list(vec.shape)}")
    if mat.shape[1] != vec.shape[0]:
        raise RuntimeError(f"{op}: size mismatch, matrix {list(mat.shape)} and vector of size {vec.shape[0]}")


def mv(input, vec):  # noqa: A002 - PyTorch's name
    """The product of a matrix (n, m) and a vector (m,): shape (n,), one dtype. Lowered by autocast on cuda only
    (PyTorch's cpu list leaves it out, as addmv and addr)."""
    input, vec = _operands("mv", ("cuda",), input=input, vec=vec)
    _mv_operands("mv", input, vec)
    return MatMul.apply(input, vec)


def addmv(input, mat, vec, *, beta=1, alpha=1):  # noqa: A002 - PyTorch's name
    """``beta * input + alpha * (mat @ vec)``; input (n,), (1,) or 0-d; one dtype."""
    input, mat, vec = _operands("addmv", ("cuda",), input=input, mat=mat, vec=vec)
    _mv_operands("addmv", mat, vec)
    _input_fits("addmv", input, (mat.shape[0],))
    return _plus("addmv", input, MatMul.apply(mat, vec), beta, alpha, ignore_product=True)


def addr(input, vec1, vec2, *, beta=1, alpha=1):  # noqa: A002 - PyTorch's name
    """``beta * input + alpha * outer(vec1, vec2)``, input broadcast to (n, m); dtypes promote. Integer results
    take integer beta and alpha only; bool ones are logical (and / or), as in PyTorch."""
    _tensors("addr", input=input, vec1=vec1, vec2=vec2)
    input, vec1, vec2 = autocast_lower(input, vec1, vec2, devices=("cuda",))
    for arg, v in (("vec1", vec1), ("vec2", vec2)):
        if v.ndim != 1:
            raise RuntimeError(f"addr: expected 1-D argument {arg}, but got {v.ndim}-D")
    dtype = promote(promote(input.dtype, vec1.dtype), vec2.dtype)
    for arg, v in (("beta", beta), ("alpha", alpha)):
        if isinstance(v, bool) and dtype != backend.bool_:
            raise RuntimeError(f"addr: a bool {arg} is only supported for bool results, got {_name(dtype)}")
        if isinstance(v, float) and not backend.is_floating(dtype):
            raise RuntimeError(f"addr: for integral input tensors, argument {arg} must not be a floating point "
                               f"number, got {v}")
    _input_fits("addr", input, (vec1.shape[0], vec2.shape[0]))
    input, vec1, vec2 = (cast(t, dtype) for t in (input, vec1, vec2))
    return _plus("addr", input, mul(reshape(vec1, vec1.shape[0], 1), reshape(vec2, 1, vec2.shape[0])), beta, alpha)


def _bmm_operands(op, b1, b2):
    for arg, b in (("batch1", b1), ("batch2", b2)):
        if b.ndim != 3:
            raise RuntimeError(f"{op}: {arg} must be a 3-D tensor, got shape {list(b.shape)}")
    if b1.shape[0] != b2.shape[0]:
        raise RuntimeError(f"{op}: batch1 and batch2 must have the same number of batches, got {b1.shape[0]} "
                           f"and {b2.shape[0]}")
    if b1.shape[2] != b2.shape[1]:
        raise RuntimeError(f"{op}: matrices of shapes {list(b1.shape[1:])} and {list(b2.shape[1:])} cannot be "
                           f"multiplied ({b1.shape[2]} != {b2.shape[1]})")


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002 - PyTorch's name
    """``beta * input + alpha * bmm(batch1, batch2)``, input broadcast to (b, n, p); one dtype."""
    input, batch1, batch2 = _operands("baddbmm", input=input, batch1=batch1, batch2=batch2)
    _bmm_operands("baddbmm", batch1, batch2)
    _input_fits("baddbmm", input, (batch1.shape[0], batch1.shape[1], batch2.shape[2]))
    return _plus("baddbmm", input, MatMul.apply(batch1, batch2), beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002 - PyTorch's name
    """``beta * input + alpha * sum_b batch1[b] @ batch2[b]``, input broadcast to (n, p); one dtype."""
    input, batch1, batch2 = _operands("addbmm", input=input, batch1=batch1, batch2=batch2)
    _bmm_operands("addbmm", batch1, batch2)
    (b, n, k), p = batch1.shape, batch2.shape[2]
    _input_fits("addbmm", input, (n, p))
    # the sum over the batch is one GEMM: (n, b*k) @ (b*k, p)
    product = MatMul.apply(reshape(permute(batch1, 1, 0, 2), n, b * k), reshape(batch2, b * k, p))
    return _plus("addbmm", input, product, beta, alpha, ignore_product=True)


# ---------------------------------------------------------------- contractions
def _contraction_dims(a, b, dims):
    """tensordot's ``dims`` as two lists of dims (an int n: a's last n against b's first n)."""
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, numbers.Integral):
        n = int(dims)
        if not 0 <= n <= min(a.ndim, b.ndim):
            raise RuntimeError(f"tensordot: expects 0 <= dims <= each input's dimensions ({a.ndim}, {b.ndim}), "
                               f"got dims={n}")
        return list(range(a.ndim - n, a.ndim)), list(range(n))
    if not isinstance(dims, (list, tuple)):
        raise RuntimeError(f"tensordot: expects dims to be an int or two lists of ints, got dims={dims!r}")
    if len(dims) != 2:
        raise InputError(f"tensordot: dims must hold two lists of dims, got {len(dims)}: {dims!r}")
    if not all(isinstance(d, (list, tuple)) and all(isinstance(i, numbers.Integral) for i in d) for d in dims):
        raise InputTypeError(f"tensordot: dims must be two lists of ints, got {dims!r}")
    if len(dims[0]) != len(dims[1]):
        raise RuntimeError(f"tensordot: both dimension lists should have the same length, got {dims!r}")
    return list(dims[0]), list(dims[1])


def _tensordot(op, a, b, dims_a, dims_b):
    a, b = _operands(op, a=a, b=b)
    dims_a = [dim_index(op, int(d), a.ndim) for d in dims_a]
    dims_b = [dim_index(op, int(d), b.ndim) for d in dims_b]
    if len(set(dims_a)) < len(dims_a) or len(set(dims_b)) < len(dims_b):
        raise RuntimeError(f"{op}: a dim appears more than once in the lists of dims {dims_a} and {dims_b}")
    for da, db in zip(dims_a, dims_b):
        if a.shape[da] != b.shape[db]:
            raise RuntimeError(f"{op}: contracted dimensions need to match, but the first has size {a.shape[da]} "
                               f"in dim {da} and the second size {b.shape[db]} in dim {db}")
    free_a = [d for d in range(a.ndim) if d not in dims_a]
    free_b = [d for d in range(b.ndim) if d not in dims_b]
    shape = [a.shape[d] for d in free_a] + [b.shape[d] for d in free_b]
    if a.ndim == 0 or b.ndim == 0:
        return mul(a, b)
    k = math.prod(a.shape[d] for d in dims_a)
    # one GEMM: a as (free, contracted) @ b as (contracted, free)
    a2 = reshape(permute(a, *free_a, *dims_a), math.prod(shape[:len(free_a)]), k)
    b2 = reshape(permute(b, *dims_b, *free_b), k, math.prod(shape[len(free_a):]))
    return reshape(MatMul.apply(a2, b2), *shape)


def tensordot(a, b, dims=2):
    """The sum of products over ``dims``: an int n (a's last n dims against b's first n), or two lists of
    dims, ``([1, 2], [1, 0])`` (or a tensor of either); the free dims of a, then b's. One dtype."""
    _tensors("tensordot", a=a, b=b)
    return _tensordot("tensordot", a, b, *_contraction_dims(a, b, dims))


def inner(input, other):  # noqa: A002 - PyTorch's name
    """The sum of products over the last dims: shape ``input.shape[:-1] + other.shape[:-1]``; a 0-d operand
    multiplies (dtypes promote there), else one dtype."""
    _tensors("inner", input=input, other=other)
    if input.ndim == 0 or other.ndim == 0:
        return mul(input, other)
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner: the last dimension must match on both input tensors, got shapes "
                           f"{list(input.shape)} and {list(other.shape)}")
    return _tensordot("inner", input, other, [-1], [-1])


def vdot(input, other):  # noqa: A002 - PyTorch's name
    """The dot product of two 1-D tensors of one size and dtype (real tensors: no conjugation to do)."""
    input, other = _operands("vdot", ("cuda",), input=input, other=other)  # (as dot: not lowered on cpu)
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"vdot: 1-D tensors expected, but got {input.ndim}-D and {other.ndim}-D tensors")
    if input.shape != other.shape:
        raise RuntimeError(f"vdot: expected vectors of one size, got {input.shape[0]} and {other.shape[0]}")
    return MatMul.apply(input, other)


def kron(input, other):  # noqa: A002 - PyTorch's name
    """The Kronecker product: the shorter shape padded with leading 1s, block (i, j ...) is
    ``input[i, j ...] * other``; dtypes promote."""
    _tensors("kron", input=input, other=other)
    n = max(input.ndim, other.ndim)
    if n == 0:
        return mul(input, other)
    sa, sb = (1,) * (n - input.ndim) + input.shape, (1,) * (n - other.ndim) + other.shape
    # interleaved dims (a0, b0, a1, b1 ...): one broadcast product, then merge each pair
    out = mul(reshape(input, *[d for s in sa for d in (s, 1)]), reshape(other, *[d for s in sb for d in (1, s)]))
    return reshape(out, *[x * y for x, y in zip(sa, sb)])


def cross(input, other, dim=None):  # noqa: A002 - PyTorch's name
    """The cross product of 3-vectors along ``dim`` (the other dims broadcast). As ``torch.cross``:
    ``dim=None`` takes input's first dim of size 3, with PyTorch's deprecation warning (``linalg.cross``
    defaults to -1)."""
    _tensors("cross", input=input, other=other)
    if input.ndim != other.ndim:
        raise RuntimeError(f"cross: inputs must have the same number of dimensions, got {input.ndim} and "
                           f"{other.ndim}")
    _same_dtype("cross", input, other)
    if dim is None:
        dim = next((i for i, n in enumerate(input.shape) if n == 3), None)
        if dim is None:
            raise RuntimeError(f"cross: no dimension of size 3 in input of shape {list(input.shape)}")
        warnings.warn("cross: using it without specifying dim is deprecated (as torch.cross); pass dim, or use "
                      "dim=-1 as linalg.cross does", UserWarning, stacklevel=2)
    elif input.ndim == 0:
        raise RuntimeError("cross: expected tensors of at least one dimension, got 0-d ones")
    else:
        dim = dim_index("cross", dim, input.ndim)
    if input.shape[dim] != 3 or other.shape[dim] != 3:
        raise RuntimeError(f"cross: inputs dimension {dim} must have length 3, got {input.shape[dim]} and "
                           f"{other.shape[dim]}")
    _broadcast("cross", input.shape, other.shape)
    # (a1 b2 - a2 b1, a2 b0 - a0 b2, a0 b1 - a1 b0): rolled copies line the components up
    return sub(mul(roll(input, -1, dim), roll(other, -2, dim)), mul(roll(input, -2, dim), roll(other, -1, dim)))


# ---------------------------------------------------------------- distances
_COMPUTE_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


def _wide(a):
    return a.astype(np.float32) if a.dtype.itemsize < 4 else a  # half precision computes in float32


def _pnorm(xp, diff, p):
    a = xp.abs(diff)
    if p == 0:
        return (a != 0).sum(-1).astype(diff.dtype)
    if p == 1:
        return a.sum(-1)
    if p == 2:
        return xp.sqrt((diff * diff).sum(-1))
    if p == math.inf:
        return a.max(-1)
    return (a ** p).sum(-1) ** (1.0 / p)


def _pnorm_grad(xp, diff, d, p):
    """d(dist)/d(diff) as PyTorch's cdist backward: 0 where the distance is 0 (and, for p < 1, where a
    coordinate's difference is 0); every coordinate tied at the inf norm gets its sign."""
    sign = xp.sign(diff)
    if p == 1:
        return sign
    if p == math.inf:
        return sign * (xp.abs(diff) == d)
    with np.errstate(divide="ignore", invalid="ignore"):
        if p == 2:
            h = diff / d
        elif p < 2:
            h = sign * xp.abs(diff) ** (p - 1) / d ** (p - 1)
        else:
            h = diff * xp.abs(diff) ** (p - 2) / d ** (p - 1)
    masked = (d == 0) | (diff == 0) if p < 1 else d == 0
    return backend.where(masked, 0, h)


class Cdist(Function):
    """p-norm distances between the rows of x1 (..., P, M) and x2 (..., R, M) of one batch shape. ``use_mm``
    (p = 2): sqrt(|a|^2 + |b|^2 - 2 a.b) through one matmul, and a backward by two more, never forming the
    (..., P, R, M) differences the other p need."""

    @staticmethod
    def forward(ctx, x1, x2, p, use_mm):
        xp = _xp(x1)
        a, b = _wide(x1), _wide(x2)
        if a.shape[-1] == 0:
            d = xp.zeros(a.shape[:-1] + b.shape[-2:-1], a.dtype)
        elif use_mm:
            sq = (a * a).sum(-1)[..., :, None] + (b * b).sum(-1)[..., None, :] - 2 * xp.matmul(a, _swap(b))
            d = xp.sqrt(xp.maximum(sq, 0))
        else:
            d = _pnorm(xp, a[..., :, None, :] - b[..., None, :, :], p)
        d = d.astype(x1.dtype, copy=False)
        ctx.save_for_backward(x1, x2, d)
        ctx.meta = (p, use_mm)
        return d

    @staticmethod
    def backward(ctx, g):
        x1, x2, d = ctx.saved_tensors
        p, use_mm = ctx.meta
        xp = _xp(g)
        a, b, g, d = _wide(x1), _wide(x2), _wide(g), _wide(d)
        if p == 0 or a.shape[-1] == 0:  # a count of differing coordinates: zero gradient
            return xp.zeros_like(x1), xp.zeros_like(x2), None, None
        if use_mm:  # sum_j G_ij (a_i - b_j), G = g / d (0 where d = 0)
            with np.errstate(divide="ignore", invalid="ignore"):
                G = backend.where(d == 0, 0, g / d)  # noqa: N806 - a matrix
            ga = a * G.sum(-1)[..., None] - xp.matmul(G, b)
            gb = b * G.sum(-2)[..., None] - xp.matmul(_swap(G), a)
        else:
            t = _pnorm_grad(xp, a[..., :, None, :] - b[..., None, :, :], d[..., None], p) * g[..., None]
            ga, gb = t.sum(-2), -t.sum(-3)
        return ga.astype(x1.dtype, copy=False), gb.astype(x2.dtype, copy=False), None, None

    @staticmethod
    def backward_graph(ctx, g):
        """As :meth:`backward`, with recorded ops on x1, x2 and the distance (the output); what is piecewise
        constant (signs, which coordinate is the inf norm's, where a distance or difference is 0) a constant.
        ``d(dist)/d(diff) = sign(diff) (|diff| / dist)^(p-1)``: PyTorch's two forms (p < 2 and p > 2) in one."""
        x1, x2, d = ctx.saved_tensors
        p, use_mm = ctx.meta
        xp = _xp(d)
        needs = ctx.needs_input_grad
        if p == 0 or x1.shape[-1] == 0:
            return (Tensor._from_array(xp.zeros_like(x1)) if needs[0] else None,
                    Tensor._from_array(xp.zeros_like(x2)) if needs[1] else None, None, None)

        def const(a):
            return Tensor._from_array(xp.asarray(a, d.dtype), False)

        a, b = ctx.graph_input(0, x1), ctx.graph_input(1, x2)
        dist = ctx.graph_output(d) + const(d == 0)  # (1 where it is 0: a gradient masked there, not NaN)
        if use_mm:  # sum_j G_ij (a_i - b_j), G = g / d (0 where d = 0)
            G = g * const(d != 0) / dist  # noqa: N806 - a matrix
            ga = a * G.sum(-1, keepdim=True) - MatMul.apply(G, b) if needs[0] else None
            gb = b * G.sum(-2).unsqueeze(-1) - MatMul.apply(G.transpose(-1, -2), a) if needs[1] else None
            return ga, gb, None, None
        (*batch, n1, m), n2 = x1.shape, x2.shape[-2]
        diff_array = x1[..., :, None, :] - x2[..., None, :, :]
        sign = xp.sign(diff_array)
        if p == 1:
            h = const(sign)
        elif p == math.inf:
            h = const(sign * (xp.abs(diff_array) == d[..., None]))
        else:
            diff = reshape(a, *batch, n1, 1, m) - reshape(b, *batch, 1, n2, m)
            keep = (d != 0)[..., None] & (diff_array != 0) if p < 1 else xp.broadcast_to((d != 0)[..., None],
                                                                                            diff_array.shape)
            ratio = (diff.abs() + const(~keep)) / reshape(dist, *batch, n1, n2, 1)
            h = const(sign * keep) * (ratio if p == 2 else ratio ** (p - 1))
        t = h * reshape(g, *batch, n1, n2, 1)
        return t.sum(-2) if needs[0] else None, -t.sum(-3) if needs[1] else None, None, None


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distance (p >= 0, inf too) of every row of x1 (B..., P, M) to every row of x2 (B..., R, M):
    shape (B..., P, R), the batch dims broadcast. For p = 2 ``compute_mode`` picks a matmul (always, never, or
    by default when P or R exceeds 25, as PyTorch), faster but less exact for near rows."""
    _tensors("cdist", x1=x1, x2=x2)
    x1, x2 = autocast_float32(x1, x2)
    if x1.ndim < 2 or x2.ndim < 2:
        raise RuntimeError(f"cdist: expected tensors of at least 2 dimensions, got {x1.ndim}-D and {x2.ndim}-D")
    if not (backend.is_floating(x1.dtype) and backend.is_floating(x2.dtype)):
        raise RuntimeError(f"cdist: only floating point dtypes are supported, got {x1.dtype} and {x2.dtype}")
    _same_dtype("cdist", x1, x2)
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"cdist: x1 and x2 must have the same number of columns, got {x1.shape[-1]} and "
                           f"{x2.shape[-1]}")
    p = _number("cdist", p)
    if not p >= 0:
        raise RuntimeError(f"cdist: only non-negative p values are supported, got {p}")
    if compute_mode not in _COMPUTE_MODES:
        raise InputError(f"cdist: {compute_mode!r} is not a valid value for compute_mode; expected one of "
                         f"{', '.join(_COMPUTE_MODES)}")
    batch = _broadcast("cdist", x1.shape[:-2], x2.shape[:-2])
    (n1, m), n2 = x1.shape[-2:], x2.shape[-2]
    x1 = x1 if x1.shape[:-2] == batch else expand(x1, *batch, n1, m)
    x2 = x2 if x2.shape[:-2] == batch else expand(x2, *batch, n2, m)
    use_mm = p == 2 and (compute_mode == _COMPUTE_MODES[1] or (compute_mode == _COMPUTE_MODES[0] and max(n1, n2) > 25))
    return Cdist.apply(x1, x2, p, use_mm)


def pdist(input, p=2):  # noqa: A002 - PyTorch's name
    """The p-norm distance (p >= 0, inf too) between every pair of rows of an (N, M) input: shape
    (N * (N - 1) / 2,), pairs (i, j) with i < j in row-major order, as ``torch.pdist``. The upper triangle of
    :func:`cdist` without its matmul shortcut (PyTorch's pdist is exact for near rows), so its backward and
    the zero gradient at coincident rows come from there."""
    _tensors("pdist", input=input)
    if input.ndim != 2:
        raise RuntimeError(f"pdist: pdist only supports 2D tensors, got: {input.ndim}D")
    if not backend.is_floating(input.dtype):
        raise RuntimeError(f"pdist: pdist only supports floating-point dtypes, got {_name(input.dtype)}")
    if not _number("pdist", p) >= 0:
        raise RuntimeError(f"pdist: pdist only supports non-negative p values, got {p}")
    from .arrange import triu_indices  # (arrange sits beside this family; imported where used)

    n = input.shape[0]
    rows, cols = triu_indices(n, n, 1, device=input.device)
    (input,) = autocast_float32_on_cuda(input)  # (on PyTorch's cuda autocast float32 list; cdist's cpu rule not)
    with autocast_off():
        return cdist(input, input, p, "donot_use_mm_for_euclid_dist")[rows, cols]


def dist(input, other, p=2):  # noqa: A002 - PyTorch's name
    """The p-norm of ``input - other`` (broadcast, dtypes promoted): a 0-d tensor; p any number, +-inf. In float32
    under autocast on cuda (PyTorch's cpu list leaves it out)."""
    _tensors("dist", input=input, other=other)
    p = _number("dist", p)
    input, other = autocast_float32(input, other, devices=("cuda",))
    dtype = promote(input.dtype, other.dtype)
    if not backend.is_floating(dtype):
        raise RuntimeError(f"dist: expected floating point inputs, got {_name(input.dtype)} and "
                           f"{_name(other.dtype)}")
    _broadcast("dist", input.shape, other.shape)
    return vector_norm(sub(input, other), p)


# ---------------------------------------------------------------- in-place forms
class _WriteBack(Function):
    """An in-place form's result written into its tensor. The old value's gradient flows through the result's
    own graph (which read it through a clone), so none goes to it here."""

    @staticmethod
    def forward(ctx, x, src, out):
        out[...] = src
        return out

    @staticmethod
    def backward(ctx, g):
        return None, g

    backward_graph = backward


def _inplace(name, fn):
    """``self.<name>(...)``: ``fn(self, ...)`` written into self (returned, its version bumped once), recorded
    for autograd as PyTorch's; the result must have self's shape and a dtype that casts to self's kind."""
    def op(self, *args, **kwargs):
        if not isinstance(self, Tensor):
            raise InputTypeError(f"{name}(): expected a Tensor, got {type(self).__name__}")
        if name == "addmm_":  # (checked here too, for the message to name the in-place op)
            _same_dtype(name, self, *[a for a in args if isinstance(a, Tensor)])
        # the out-of-place graph may save self's array (beta * self), which the write changes: read a clone
        src = fn(clone(self) if self.requires_grad and is_grad_enabled() else self, *args, **kwargs)
        if src.shape != self.shape:
            raise RuntimeError(f"{name}: bad in-place call: input of shape {list(self.shape)} and output of shape "
                               f"{list(src.shape)} should match")
        if src.dtype != self.dtype:
            if (backend.is_floating(src.dtype) and not backend.is_floating(self.dtype)) or self.dtype == backend.bool_:
                raise RuntimeError(f"{name}: result type {_name(src.dtype)} can't be cast to the desired output "
                                   f"type {_name(self.dtype)}")
            src = cast(src, self.dtype)
        return _WriteBack.apply_(name, self, src)

    op.__name__ = name
    return op


__all__ = ["mv", "addmv", "addr", "baddbmm", "addbmm", "inner", "vdot", "kron", "tensordot", "cross", "cdist", "pdist",
           "dist"]

METHODS = {name: globals()[name] for name in __all__ if name not in ("tensordot", "cdist", "pdist")}
METHODS.update({
    "addmv_": _inplace("addmv_", addmv), "addr_": _inplace("addr_", addr), "baddbmm_": _inplace("baddbmm_", baddbmm),
    "addbmm_": _inplace("addbmm_", addbmm), "addmm_": _inplace("addmm_", addmm),
})
