"""``torch.gradient``: the numerical gradient of sampled values by central differences (second-order accurate in
the interior, first- or second-order at the edges), PyTorch's formulas in PyTorch's order of operations. Composed
of differentiable tensor ops (slices, arithmetic, ``cat``), so it runs on NumPy and CuPy alike and autograd
records it."""
from __future__ import annotations

import numbers

from .. import backend, ops
from ..tensor import Tensor
from ..backend import InputError, InputTypeError

__all__ = ["gradient"]

_OP = "torch.gradient"


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _dim_list(input, dim):
    """``dim`` as a list of ints (None: every dimension), or a TypeError."""
    if dim is None:
        return None
    if _is_int(dim):
        return [int(dim)]
    if isinstance(dim, (tuple, list)) and all(_is_int(d) for d in dim):
        return [int(d) for d in dim]
    raise InputTypeError(f"gradient(): argument 'dim' must be an int or a tuple of ints, not {dim!r}")


def _spacing(spacing):
    """('scalar', number) or ('list', [numbers]) or ('tensors', [tensors]), as PyTorch's overloads read it: a
    number (a bool too) or a 0-d tensor is a scalar; a list or tuple holds all numbers or all tensors."""
    if spacing is None:
        return "scalar", None
    if isinstance(spacing, Tensor):
        if spacing.ndim != 0:
            raise InputTypeError(f"gradient(): argument 'spacing' must be a number, a list of numbers or a list of "
                                 f"1-D tensors, not a {spacing.ndim}-D tensor")
        return "scalar", spacing.item()
    if isinstance(spacing, numbers.Number):
        return "scalar", spacing
    if isinstance(spacing, (tuple, list)):
        if all(isinstance(s, Tensor) for s in spacing):
            return "tensors", list(spacing)
        if all(isinstance(s, numbers.Number) and not isinstance(s, Tensor) for s in spacing):
            return "list", list(spacing)
        bad = next(i for i, s in enumerate(spacing) if not isinstance(s, Tensor))
        raise InputTypeError(f"gradient(): expected Tensor as element {bad} in argument 'spacing', but got "
                             f"{type(spacing[bad]).__name__} (spacing is all numbers or all tensors)")
    raise InputTypeError(f"gradient(): argument 'spacing' must be a number, a list of numbers or a list of 1-D "
                         f"tensors, not {type(spacing).__name__}")


def _checked(input, count, dims, edge_order):
    """PyTorch's checks, in its order: the dtype, ``count`` spacings for the dims, the edge order, each dim in
    range and named once, each dim long enough. Returns the dims, normalized."""
    if input.dtype == backend.uint8:
        raise RuntimeError(f"{_OP} does not support uint8 input.")
    if count is not None and dims is None and count != input.ndim:
        raise RuntimeError(f"{_OP} expected spacing to be unspecified, a scalar, or a list of length equal to "
                           f"'self.dim() = {input.ndim}', since dim argument was not given, but got a list of length "
                           f"{count}")
    if count is not None and dims is not None and count != len(dims):
        raise RuntimeError(f"{_OP} expected spacing to be unspecified, a scalar or it's spacing and dim arguments "
                           f"to have the same length, but got a spacing argument of length {count} and a dim "
                           f"argument of length {len(dims)}.")
    if edge_order not in (1, 2):
        raise RuntimeError(f"{_OP} only supports edge_order=1 and edge_order=2.")
    if dims is None:
        out = list(range(input.ndim))
    else:
        out, bound = [], max(input.ndim, 1)
        for d in dims:
            if not -bound <= d < bound:
                raise IndexError(f"Dimension out of range (expected to be in range of [{-bound}, {bound - 1}], but "
                                 f"got {d})")
            if d % bound in out:
                raise RuntimeError(f"dim {d % bound} appears multiple times in the list of dims")
            out.append(d % bound)
        if out and input.ndim == 0:
            raise IndexError(f"Dimension specified as {dims[0]} but tensor has no dimensions")
    if any(input.shape[d] < edge_order + 1 for d in out):
        raise RuntimeError(f"{_OP} expected each dimension size to be at least edge_order+1")
    return out


def _cut(x, d, start, stop=None):
    """``x[start:stop]`` along ``d`` (Python's slice rules, negative ends counting from the end)."""
    return ops.narrow(x, d, *_span(x.shape[d], start, stop))


def _span(n, start, stop):
    lo, hi, _ = slice(start, stop).indices(n)
    return lo, max(hi - lo, 0)


def _uniform(x, h, d, edge_order):
    """The gradient along ``d`` of samples ``h`` apart (ATen's ``gradient_helper_float``)."""
    center = (_cut(x, d, 2) - _cut(x, d, 0, -2)) / h
    if edge_order == 1:
        first = (_cut(x, d, 1, 2) - _cut(x, d, 0, 1)) / h
        last = (_cut(x, d, -1) - _cut(x, d, -2, -1)) / h
    else:
        first = (_cut(x, d, 0, 1) * -1.5 + _cut(x, d, 1, 2) * 2 + _cut(x, d, 2, 3) * -0.5) / h
        last = (_cut(x, d, -3, -2) * 0.5 + _cut(x, d, -2, -1) * -2 + _cut(x, d, -1) * 1.5) / h
    return ops.cat([first, center / 2, last], d)


def _coordinates(x, coords, d, edge_order):
    """The gradient along ``d`` of samples at the coordinates ``coords`` (ATen's ``gradient_helper``)."""
    if coords.ndim != 1:
        raise RuntimeError(f"{_OP} expected each element of spacing to have one dimension, but got an element with "
                           f"{coords.ndim} dimensions!")
    if coords.shape[0] != x.shape[d]:
        raise RuntimeError(f"{_OP} expected one coordinate per sample: got {coords.shape[0]} coordinates for "
                           f"dimension {d} of size {x.shape[d]}")
    shape = [1] * x.ndim
    shape[d] = -1
    dx = ops.diff(coords)
    dx1, dx2 = _cut(dx, 0, 0, -1), _cut(dx, 0, 1)
    a = ops.reshape(-dx2 / (dx1 * (dx1 + dx2)), shape)
    b = ops.reshape((dx2 - dx1) / (dx1 * dx2), shape)
    c = ops.reshape(dx1 / (dx2 * (dx1 + dx2)), shape)
    center = a * _cut(x, d, 0, -2) + b * _cut(x, d, 1, -1) + c * _cut(x, d, 2)
    h0, h1 = dx[0], dx[-1]
    if edge_order == 1:
        first = (_cut(x, d, 1, 2) - _cut(x, d, 0, 1)) / h0
        last = (_cut(x, d, -1) - _cut(x, d, -2, -1)) / h1
    else:
        g1, g0 = dx[1], dx[-2]
        a = -(2.0 * h0 + g1) / (h0 * (h0 + g1))
        b = (h0 + g1) / (h0 * g1)
        c = (-h0) / (g1 * (h0 + g1))
        first = a * _cut(x, d, 0, 1) + b * _cut(x, d, 1, 2) + c * _cut(x, d, 2, 3)
        a = h1 / (g0 * (h1 + g0))
        b = -(h1 + g0) / (h1 * g0)
        c = (2 * h1 + g0) / (h1 * (h1 + g0))
        last = a * _cut(x, d, -3, -2) + b * _cut(x, d, -2, -1) + c * _cut(x, d, -1)
    return ops.cat([first, center, last], d)


def gradient(input, *, spacing=1, dim=None, edge_order=1):  # noqa: A002 - PyTorch's names
    """The partial derivatives of the function sampled by ``input``, one tensor per dimension of ``dim`` (every
    dimension by default), as a tuple: central differences inside (second-order accurate for uneven spacing too),
    first- or second-order (``edge_order`` 1 or 2) one-sided differences at the two ends. ``spacing``: the
    distance between neighbouring samples (a number, for every dimension), one number per dimension, or one 1-D
    tensor of coordinates per dimension. Integer input gives floating-point output; each dimension needs at least
    ``edge_order + 1`` samples."""
    if not isinstance(input, Tensor):
        raise InputTypeError(f"gradient(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not _is_int(edge_order):
        raise InputTypeError(f"gradient(): argument 'edge_order' must be int, not {type(edge_order).__name__}")
    dims = _dim_list(input, dim)
    kind, values = _spacing(spacing)
    if kind == "scalar":
        dims = _checked(input, None, dims, edge_order)  # (one spacing for every dim: no count to check)
        h = 1.0 if values is None else values
        h = int(h) if isinstance(h, bool) else h
        return tuple(_uniform(input, h, d, edge_order) for d in dims)
    dims = _checked(input, len(values), dims, edge_order)
    if kind == "list":
        return tuple(_uniform(input, int(h) if isinstance(h, bool) else h, d, edge_order)
                     for h, d in zip(values, dims))
    for coords in values:
        if coords.device != input.device:
            raise InputError(f"gradient(): the coordinates are on {coords.device}, the input on {input.device}")
    return tuple(_coordinates(input, coords, d, edge_order) for coords, d in zip(values, dims))
