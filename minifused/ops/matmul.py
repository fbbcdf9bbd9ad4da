"""``matmul`` / ``@`` with NumPy's rules (1-D operands, batched and broadcast leading dims); the
fixed-rank forms mm, bmm, dot, outer, addmm and t; einsum."""
from __future__ import annotations

import math
import string

import numpy as np

from .. import backend
from ..autograd import Function
from ..kernels.matmul import matmul as cuda_matmul
from ..tensor import Tensor
from ._common import (autocast_lower, binary_operands, broadcast_shape, check_tensors, dense, unbroadcast,
                      unbroadcast_graph)
from .elementwise import add, mul
from .shape import reshape, transpose
from ..backend import InputError, InputTypeError


def _swap(a):
    return a.swapaxes(-1, -2)


def _mm(a, b):
    """``a @ b`` in the operands' dtype (NumPy multiplies bfloat16 into float32): on the GPU one cuBLASLt GEMM
    (:mod:`..kernels.matmul`) where the operands fit it, else CuPy's, which has no batched bfloat16 GEMM: there
    the operands are widened to float32 (exactly) and the product rounded once, as PyTorch's float32-accumulating
    bfloat16 GEMM rounds it."""
    if backend.is_cuda_array(a):
        out = cuda_matmul(a, b)  # one cuBLASLt GEMM where the operands fit
        if out is not None:
            return out
        if a.dtype == backend.bfloat16 and (a.ndim > 2 or b.ndim > 2):
            return backend.array_module(a).matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
    out = backend.array_module(a).matmul(a, b)
    return out if out.dtype == a.dtype else out.astype(a.dtype)


class MatMul(Function):
    """Saves only what the wanted gradients use: ``h @ w`` with a frozen ``w`` keeps ``w`` alone (PyTorch's)."""

    @staticmethod
    def forward(ctx, a, b):
        na, nb = ctx.needs_input_grad
        ctx.shapes = (a.shape, b.shape)
        ctx.save_for_backward(a if nb else None, b if na else None)
        return _mm(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        a_shape, b_shape = ctx.shapes
        if len(a_shape) == 1 and len(b_shape) == 1:
            return (g * b if na else None), (g * a if nb else None)
        # Lift 1-D operands to matrices so one rule covers every case.
        a2_shape = (1,) + a_shape if len(a_shape) == 1 else a_shape
        b2_shape = b_shape + (1,) if len(b_shape) == 1 else b_shape
        g2 = g
        if len(a_shape) == 1:
            g2 = g2[..., None, :]
        if len(b_shape) == 1:
            g2 = g2[..., None]
        ga = gb = None
        if na:
            ga = unbroadcast(_mm(g2, _swap(b.reshape(b2_shape))), a2_shape).reshape(a_shape)
        if nb and len(b_shape) == 2 and len(a_shape) > 2:  # a shared weight: one product over every row
            rows = math.prod(a_shape[:-1])  # (not -1: a reshape cannot infer it beside a zero size)
            gb = _mm(_swap(a.reshape(rows, a_shape[-1])), g2.reshape(rows, b_shape[-1]))
        elif nb:
            gb = unbroadcast(_mm(_swap(a.reshape(a2_shape)), g2), b2_shape).reshape(b_shape)
        return ga, gb

    @staticmethod
    def backward_graph(ctx, g):
        """As :meth:`backward`, with recorded products (each the other operand's gradient's own MatMul)."""
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        a_shape, b_shape = ctx.shapes
        at = ctx.graph_input(0, a) if nb else None
        bt = ctx.graph_input(1, b) if na else None
        if len(a_shape) == 1 and len(b_shape) == 1:
            return (g * bt if na else None), (g * at if nb else None)
        a2_shape = (1,) + a_shape if len(a_shape) == 1 else a_shape
        b2_shape = b_shape + (1,) if len(b_shape) == 1 else b_shape
        g2 = g
        if len(a_shape) == 1:
            g2 = reshape(g2, *g2.shape[:-1], 1, g2.shape[-1])
        if len(b_shape) == 1:
            g2 = reshape(g2, *g2.shape, 1)
        ga = gb = None
        if na:
            ga = reshape(unbroadcast_graph(MatMul.apply(g2, transpose(reshape(bt, *b2_shape), -1, -2)), a2_shape),
                         *a_shape)
        if nb:
            gb = reshape(unbroadcast_graph(MatMul.apply(transpose(reshape(at, *a2_shape), -1, -2), g2), b2_shape),
                         *b_shape)
        return ga, gb


def matmul(input, other):
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        raise InputTypeError("matmul: both operands must be tensors")
    input, other = autocast_lower(input, other)
    if input.dtype != other.dtype:  # PyTorch's matmul never promotes
        raise RuntimeError(f"matmul: expected m1 and m2 to have the same dtype, but got: {input.dtype} != "
                           f"{other.dtype}")
    _no_bool("matmul", input)
    input, other = binary_operands("matmul", input, other, broadcast=False)
    if input.ndim == 0 or other.ndim == 0:
        raise InputError("matmul: both operands must have at least one dimension, got a 0-d tensor")
    k_a = input.shape[-1]
    k_b = other.shape[0] if other.ndim == 1 else other.shape[-2]
    if k_a != k_b:
        raise InputError(f"matmul: shapes {tuple(input.shape)} and {tuple(other.shape)} cannot be multiplied "
                         f"({k_a} != {k_b})")
    broadcast_shape("matmul", input.shape[:-2], other.shape[:-2])
    return MatMul.apply(input, other)


def _no_bool(op, a):
    """Products of bool tensors raise, as PyTorch's (a NotImplementedError, which is a RuntimeError)."""
    if a.dtype == backend.bool_:
        raise NotImplementedError(f"{op}: not implemented for bool tensors")


# ---------------------------------------------------------------- the fixed-rank forms (PyTorch's checks)
def _matrices(op, a, b, ndim):
    if not (isinstance(a, Tensor) and isinstance(b, Tensor)):
        raise InputTypeError(f"{op}: both operands must be tensors")
    if a.ndim != ndim or b.ndim != ndim:
        raise RuntimeError(f"{op}: expected {ndim}-D tensors, got {a.ndim}-D and {b.ndim}-D")
    if a.device != b.device:
        raise RuntimeError(f"{op}: expected both tensors on the same device, got {a.device} and {b.device}")
    if a.dtype != b.dtype:
        raise RuntimeError(f"{op}: expected both tensors to have the same dtype, got {a.dtype} and {b.dtype}")
    _no_bool(op, a)


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """The matrix product of two 2-D tensors (no broadcasting, one dtype)."""
    input, mat2 = autocast_lower(input, mat2)
    _matrices("mm", input, mat2, 2)
    if input.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"mm: shapes ({input.shape[0]}x{input.shape[1]}) and ({mat2.shape[0]}x{mat2.shape[1]}) "
                           f"cannot be multiplied ({input.shape[1]} != {mat2.shape[0]})")
    return MatMul.apply(input, mat2)


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Batched matrix products of two 3-D tensors with equal batch sizes (no broadcasting, one dtype)."""
    input, mat2 = autocast_lower(input, mat2)
    _matrices("bmm", input, mat2, 3)
    if input.shape[0] != mat2.shape[0]:
        raise RuntimeError(f"bmm: batch sizes differ: {input.shape[0]} and {mat2.shape[0]}")
    if input.shape[2] != mat2.shape[1]:
        raise RuntimeError(f"bmm: shapes {tuple(input.shape)} and {tuple(mat2.shape)} cannot be multiplied "
                           f"({input.shape[2]} != {mat2.shape[1]})")
    return MatMul.apply(input, mat2)


def dot(input: Tensor, tensor: Tensor) -> Tensor:
    """The inner product of two 1-D tensors of one size and dtype."""
    _matrices("dot", input, tensor, 1)
    if input.shape != tensor.shape:
        raise RuntimeError(f"dot: expected vectors of one size, got {input.shape[0]} and {tensor.shape[0]}")
    return MatMul.apply(input, tensor)


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """``input[i] * vec2[j]`` for two 1-D tensors (dtypes promoted as ``*`` does)."""
    check_tensors("outer", input=input, vec2=vec2)
    for name, v in (("first", input), ("second", vec2)):
        if v.ndim != 1:
            raise RuntimeError(f"outer: expected 1-D tensors, the {name} operand is {v.ndim}-D")
    return mul(reshape(input, -1, 1), reshape(vec2, 1, -1))


def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:  # noqa: A002
    """``beta * input + alpha * (mat1 @ mat2)``, ``input`` broadcast to the product's shape; with beta = 0
    ``input`` is ignored (NaN in it does not propagate), with alpha = 0 the product, as in PyTorch."""
    (input,) = autocast_lower(input)
    out = mm(mat1, mat2)
    if input.dtype != out.dtype:  # PyTorch's addmm never promotes (the whole family wants one dtype)
        raise RuntimeError(f"addmm: expected all tensors to have the same dtype, got {input.dtype}, {mat1.dtype}, "
                           f"{mat2.dtype}")
    if tuple(broadcast_shape("addmm", input.shape, out.shape)) != tuple(out.shape):
        raise RuntimeError(f"addmm: input of shape {tuple(input.shape)} does not broadcast to the product's "
                           f"shape {tuple(out.shape)}")
    def scaled(x, factor):  # by a 0-d tensor of x's dtype: a Python float would widen bfloat16 to float32
        return x if factor == 1 else mul(x, Tensor._from_array(x._xp.asarray(factor, x.dtype)))

    from .elementwise import where  # noqa: PLC0415 - one op of the family below, only here

    def ignored(x):  # zeros that keep x on the tape (its zero gradient) without reading its values, NaN included
        return where(Tensor._from_array(x._xp.zeros((), bool)), x, 0)

    out = ignored(out) if alpha == 0 else scaled(out, alpha)
    if beta == 0:  # input's values are ignored, but it still gets its (zero) gradient, as in PyTorch
        return add(out, ignored(input))
    return add(scaled(input, beta), out)


def t(input: Tensor) -> Tensor:
    """The transpose of a tensor of at most 2 dims (0-d and 1-d ones are returned as they are)."""
    if input.ndim > 2:
        raise RuntimeError(f"t: expects a tensor with at most 2 dimensions, got a {input.ndim}-D tensor")
    return transpose(input, 0, -1) if input.ndim == 2 else input


# ---------------------------------------------------------------- einsum
def _pair_product(terms, arrays, target):
    """``einsum`` of two CUDA operands as one (batched) matrix product (:mod:`..kernels.matmul`): the subscripts in
    both and in ``target`` are the batch, those in both only are summed, the others (each operand's own, all in
    ``target``) are the rows and the columns. None where that does not fit (a subscript repeated in an operand or
    summed within one operand, an empty operand, a dtype the kernel does not take)."""
    (t1, t2), (a1, a2) = terms, arrays
    if len(set(t1)) != len(t1) or len(set(t2)) != len(t2) or not set(t1) ^ set(t2) <= set(target):
        return None
    size, size2 = dict(zip(t1, a1.shape)), dict(zip(t2, a2.shape))
    if any(size[c] != n for c, n in size2.items() if c in size):  # (a broadcast '...' dim)
        return None
    size.update(size2)
    batch = [c for c in target if c in t1 and c in t2]
    summed = [c for c in t1 if c in t2 and c not in target]
    rows = [c for c in t1 if c not in t2]
    cols = [c for c in t2 if c not in t1]

    def folded(a, term, first, second):  # a's dims as (batch, first, second), the letters of each folded into one
        a = a.transpose([term.index(c) for c in batch + first + second])
        return a.reshape([math.prod(size[c] for c in group) for group in (batch, first, second)])

    out = cuda_matmul(folded(a1, t1, rows, summed), folded(a2, t2, summed, cols))
    if out is None:
        return None
    order = batch + rows + cols
    return out.reshape([size[c] for c in order]).transpose([order.index(c) for c in target])


def _contract(xp, terms, arrays, target):
    """``einsum`` of ``terms -> target``, 0-d operands (empty subscripts) multiplied in afterwards
    (bfloat16 in float32: NumPy's einsum loops do not take it); two CUDA operands as one matrix product where
    they fit (:func:`_pair_product`)."""
    if len(arrays) == 2 and all(terms) and xp is not np:
        out = _pair_product(terms, arrays, target)
        if out is not None:
            return out
    if arrays[0].dtype == backend.bfloat16:
        arrays = [a.astype(np.float32) for a in arrays]
    scale, keep = None, []
    for term, a in zip(terms, arrays):
        if term:
            keep.append((term, a))
        else:
            scale = a if scale is None else scale * a
    if keep:
        eq = ",".join(term for term, _ in keep) + "->" + target
        out = xp.einsum(eq, *[a for _, a in keep], **({"optimize": len(keep) > 1} if xp is np else {}))
        return out if scale is None else out * scale
    return scale


class Einsum(Function):
    """The forward contraction; each operand's gradient is the contraction of the output's gradient with
    the other operands, broadcast along the subscripts only that operand has, and put on the diagonal
    where it repeats a subscript (a trace, a diagonal)."""

    @staticmethod
    def forward(ctx, *arrays, terms, output, sizes):
        ctx.save_for_backward(*arrays)
        ctx.meta = (terms, output, sizes)
        out = _contract(backend.array_module(arrays[0]), terms, arrays, output)
        if len(arrays) == 1:  # a transpose or a diagonal comes back as a view of the input: own the result
            out = backend.copy(out)
        return out.astype(arrays[0].dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        arrays = ctx.saved_tensors
        terms, output, sizes = ctx.meta
        xp = backend.array_module(g)
        grads = []
        for i, (term, a) in enumerate(zip(terms, arrays)):
            if not ctx.needs_input_grad[i]:
                grads.append(None)
                continue
            others = [(u, b) for j, (u, b) in enumerate(zip(terms, arrays)) if j != i]
            known = set(output).union(*[u for u, _ in others])
            letters = "".join(dict.fromkeys(term))  # each subscript once, in order
            target = "".join(c for c in letters if c in known)
            gi = _contract(xp, [output] + [u for u, _ in others], [g] + [b for _, b in others], target)
            gi = xp.broadcast_to(xp.asarray(gi).reshape([sizes[c] if c in known else 1 for c in letters]),
                                 [sizes[c] for c in letters])
            if len(letters) != len(term):
                full = xp.zeros(a.shape, g.dtype)
                grid = {c: xp.arange(sizes[c]).reshape([-1 if d == c else 1 for d in letters]) for c in letters}
                full[tuple(grid[c] for c in term)] = gi
                gi = full
            grads.append(dense(gi).astype(a.dtype, copy=False))
        return tuple(grads)

    @staticmethod
    def backward_graph(ctx, g):
        """As :meth:`backward`, each gradient one recorded Einsum of g and the other operands (so it differentiates
        again): a subscript only its operand has comes from a constant vector of ones, and a repeat of a subscript
        in its operand (a diagonal) gets a fresh letter tied to the first by a constant identity matrix."""
        arrays = ctx.saved_tensors
        terms, output, sizes = ctx.meta
        xp = backend.array_module(arrays[0])
        ts = [ctx.graph_input(i, a) for i, a in enumerate(arrays)]
        spare = iter(c for c in string.ascii_letters if c not in sizes)
        grads = []
        for i, term in enumerate(terms):
            if not ctx.needs_input_grad[i]:
                grads.append(None)
                continue
            ops = [(output, g)] + [(u, t) for j, (u, t) in enumerate(zip(terms, ts)) if j != i]
            known = set(output).union(*[u for u, _ in ops])
            sizes_i, target = dict(sizes), ""
            for c in term:
                if c in target:
                    d = next(spare)
                    sizes_i[d] = sizes[c]
                    ops.append((c + d, xp.eye(sizes[c], dtype=g.dtype)))
                    target += d
                else:
                    if c not in known:
                        ops.append((c, xp.ones(sizes[c], g.dtype)))
                    target += c
            ops = [(u, t if isinstance(t, Tensor) else Tensor._from_array(t, False)) for u, t in ops]
            grads.append(Einsum.apply(*[t for _, t in ops], terms=[u for u, _ in ops], output=target, sizes=sizes_i))
        return tuple(grads)


def _einsum_terms(equation, shapes):
    """(the operands' subscripts with '...' spelled out as spare letters, the output's, each letter's size)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    bad = sorted(set(eq) - set(string.ascii_letters) - set(",.->"))
    if bad or "->" in rhs:
        raise InputError(f"einsum: invalid equation {equation!r}: subscripts must be letters, "
                         f"',' '->' and '...'")
    parts = lhs.split(",")
    if len(parts) != len(shapes):
        raise InputError(f"einsum: the equation {equation!r} names {len(parts)} operands, got {len(shapes)}")
    spare = [c for c in string.ascii_letters if c not in eq]
    split = []
    for i, (part, shape) in enumerate(zip(parts, shapes)):
        head, dots, tail = part.partition("...")
        if "." in head or "." in tail:
            raise InputError(f"einsum: invalid subscripts {part!r} (a '.' outside one '...')")
        extra = len(shape) - len(head) - len(tail)
        if extra < 0 or (extra and not dots):
            raise InputError(f"einsum: operand {i} has {len(shape)} dimensions but its subscripts {part!r} "
                             f"name {len(head) + len(tail)}")
        split.append((head, extra, tail))
    n_ell = max([extra for _, extra, _ in split], default=0)
    ell = "".join(spare[:n_ell])
    terms = [head + ell[n_ell - extra:] + tail for head, extra, tail in split]
    if arrow:
        head, dots, tail = rhs.partition("...")
        if "." in head or "." in tail:
            raise InputError(f"einsum: invalid output subscripts {rhs!r}")
        output = head + (ell if dots else "") + tail
    else:
        counts = "".join(terms)
        output = ell + "".join(sorted(c for c in set(counts) if c not in ell and counts.count(c) == 1))
    for c in output:
        if output.count(c) > 1:
            raise InputError(f"einsum: output subscript {c!r} appears more than once")
        if not any(c in term for term in terms):
            raise InputError(f"einsum: output subscript {c!r} does not appear in any operand")
    sizes = {}
    for i, (term, shape) in enumerate(zip(terms, shapes)):
        for c in set(term):
            dims = [n for d, n in zip(term, shape) if d == c]
            if len(set(dims)) > 1:
                raise InputError(f"einsum: subscript {c!r} repeats in operand {i} over dims of sizes {dims}")
        for c, n in zip(term, shape):
            if sizes.get(c, 1) not in (1, n) and n != 1:
                raise InputError(f"einsum: subscript {c!r} has size {sizes[c]} in one operand and {n} in "
                                 f"another")
            sizes[c] = n if sizes.get(c, 1) == 1 else sizes[c]
    return terms, output, sizes


def _sublist_equation(args):
    """PyTorch's sublist format, ``einsum(op1, sublist1, op2, sublist2, ..., [sublist_out])``: (the equation
    it spells, the operands). Subscript ``n`` is 'A' + n below 26, 'a' + n - 26 below 52; ``...`` is '...'."""
    def letters(sublist, where):
        if not isinstance(sublist, (list, tuple)):
            raise InputTypeError(f"einsum: expected a list of subscripts for {where}, got {type(sublist).__name__}")
        out = []
        for n in sublist:
            if n is Ellipsis:
                out.append("...")
            elif not isinstance(n, int) or isinstance(n, bool):
                raise InputTypeError(f"einsum: subscripts in the sublist of {where} must be ints or Ellipsis, got "
                                     f"{type(n).__name__}")
            elif 0 <= n < 52:
                out.append(chr(ord("A") + n) if n < 26 else chr(ord("a") + n - 26))
            else:
                raise InputError(f"einsum: subscript {n} in the sublist of {where} is not in [0, 52)")
        return "".join(out)

    operands = args[0:len(args) - len(args) % 2:2]
    equation = ",".join(letters(sub, f"operand {i}") for i, sub in enumerate(args[1::2][:len(operands)]))
    if len(args) % 2:
        equation += "->" + letters(args[-1], "the output")
    return equation, tuple(operands)


def einsum(equation: str, *operands) -> Tensor:
    """Einstein summation as ``torch.einsum``: ``einsum('bij,bjk->bik', a, b)``, with the operands in one
    list, or in the sublist format (``einsum(a, [0, 1], b, [1, 2], [0, 2])``); '...' for leading (broadcast)
    dims, implicit output (the letters named once, sorted), repeated subscripts for traces and diagonals.
    Size-1 dims broadcast against their subscript's size."""
    if isinstance(equation, Tensor):
        equation, operands = _sublist_equation((equation,) + operands)
    elif len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise InputTypeError(f"einsum: the equation must be a str, got {type(equation).__name__}")
    if not operands:
        raise InputError("einsum: expected at least one operand")
    if not all(isinstance(o, Tensor) for o in operands):
        raise InputTypeError("einsum: the operands must be tensors")
    first = operands[0]
    for o in operands[1:]:
        if o.device != first.device:
            raise RuntimeError(f"einsum: expected all operands on one device, got {first.device} and {o.device}")
    terms, output, sizes = _einsum_terms(equation, [o.shape for o in operands])
    # autocast: cuda's list lowers einsum; cpu's lowers the batched products einsum contracts pairs of operands
    # with, so there only an einsum that sums a subscript shared by two operands is lowered (one that only
    # multiplies, or sums within single operands, is not)
    joined = "".join(terms)
    shared_sum = any(c not in output and sum(c in term for term in terms) > 1 for c in set(joined))
    operands = autocast_lower(*operands, devices=None if shared_sum else ("cuda",))
    first = operands[0]
    for o in operands[1:]:
        if o.dtype != first.dtype:
            raise RuntimeError(f"einsum: expected all operands to have one dtype, got {first.dtype} and {o.dtype}")
    if len(operands) > 1:  # (one operand's einsum is a sum, a trace or a transpose: any dtype)
        _no_bool("einsum", first)
    # a size-1 dim against a larger size broadcasts: squeeze it out of that operand
    squeezed = []
    for term, o in zip(terms, operands):
        keep = [(c, n) for c, n in zip(term, o.shape) if not (n == 1 and sizes[c] != 1)]
        if len(keep) != len(term):
            o = reshape(o, *[n for _, n in keep])
            term = "".join(c for c, _ in keep)
        squeezed.append((term, o))
    return Einsum.apply(*[o for _, o in squeezed], terms=[u for u, _ in squeezed], output=output, sizes=sizes)
