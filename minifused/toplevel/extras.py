"""More of PyTorch's top-level functions: ``histogram``, the samplers ``binomial`` and ``poisson`` (drawn by
minifused's generators, as ``bernoulli`` and ``multinomial`` draw), ``empty_permuted``, ``imag``, the in-place
forms ``addmv_`` / ``gcd_`` / ``lcm_``, the ``strided`` layout, and the Tensor methods that go through the
functional layer (``hardshrink``, ``prelu``)."""
from __future__ import annotations

import numbers
from collections import namedtuple

import numpy as np

from .. import backend, functional as F, ops
from ..autograd import Function
from ..ops.tensor_extras import imag, layout, strided  # noqa: F401 - re-exported at top level
from ..tensor import Tensor
from ..backend import InputError, InputTypeError

__all__ = ["histogram", "binomial", "poisson", "empty_permuted", "imag", "addmv_", "gcd_", "lcm_", "layout",
           "strided"]

HistogramResult = namedtuple("histogram", ["hist", "bin_edges"])  # torch.return_types.histogram


def _tensor(op, t, name="input"):
    if not isinstance(t, Tensor):
        raise InputTypeError(f"{op}(): argument '{name}' must be Tensor, not {type(t).__name__}")
    return t


class _Sampled(Function):
    """A value drawn from ``x``'s distribution, recorded as PyTorch records it: with a zero gradient (``zero``),
    or with none (its backward raises, naming ``op``)."""

    @staticmethod
    def forward(ctx, x, other, value, op, zero):
        ctx.meta = (op, zero)
        return value

    @staticmethod
    def backward(ctx, g):
        op, zero = ctx.meta
        if not zero:
            raise NotImplementedError(f"the derivative for '{op}' is not implemented.")
        return backend.array_module(g).zeros_like(g), None, None, None, None


def histogram(input, bins, *, range=None, weight=None, density=False):  # noqa: A002 - PyTorch's names
    """(hist, bin_edges) of ``input``'s values: ``bins`` equal bins over ``range`` (default: the values' min and
    max, widened by 0.5 each way when equal) or the edges of a 1-D tensor; each value counted (or its ``weight``
    added) in its bin, the last bin closed; ``density`` divides by the total and the bin widths. Floating-point
    input; the counts are not differentiable."""
    op = "histogram"
    _tensor(op, input)
    if not backend.is_floating(input.dtype):
        raise RuntimeError(f'"histogramdd" not implemented for {input.dtype}')
    xp = input._xp
    x = input._data.reshape(-1).astype(np.float64)
    w = None
    if weight is not None:
        if tuple(_tensor(op, weight, "weight").shape) != tuple(input.shape):
            raise RuntimeError(f"{op}: if weight tensor is provided, it should have the same shape as the input "
                               f"tensor, got {tuple(weight.shape)} and {tuple(input.shape)}")
        w = weight._data.reshape(-1).astype(np.float64)
    if isinstance(bins, Tensor):
        if bins.ndim != 1 or bins.shape[0] < 1:
            raise RuntimeError(f"{op}: bins tensor should have one dimension and at least 1 element, got shape "
                               f"{tuple(bins.shape)}")
        edges = bins._data.astype(np.float64)
    else:
        if isinstance(bins, bool) or not isinstance(bins, numbers.Integral) or bins < 1:
            raise RuntimeError(f"{op}: bins must be > 0, got {bins!r}")
        if range is not None:
            lo, hi = map(float, range)
        else:
            lo, hi = (float(x.min()), float(x.max())) if x.size else (0.0, 0.0)
        if lo > hi:
            raise RuntimeError(f"{op}: min should not exceed max, got min {lo} max {hi}")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        edges = xp.linspace(lo, hi, int(bins) + 1)
    hist, _ = xp.histogram(x, bins=edges, weights=w)
    hist = hist.astype(np.float64)
    if density:
        hist = hist / (hist.sum() * xp.diff(edges))
    out = Tensor._from_array(hist.astype(input.dtype))
    if input.requires_grad:
        out = _Sampled.apply(input, None, out._data, op, False)
    return HistogramResult(out, Tensor._from_array(edges.astype(input.dtype)))


def _draw(op, like, gen, draw, other=None):
    dev = like.device
    with backend.on_device(dev):
        value = draw(backend.generator(dev, gen, op)).astype(like.dtype)
    return _Sampled.apply(like, other, value, op, op == "poisson")


def binomial(count, prob, generator=None):
    """The number of successes out of ``count`` trials of probability ``prob`` (both floating-point tensors of
    one shape), in count's dtype, as ``torch.binomial``; not differentiable (PyTorch has no derivative)."""
    op = "binomial"
    _tensor(op, count, "count")
    _tensor(op, prob, "prob")
    if not backend.is_floating(count.dtype) or not backend.is_floating(prob.dtype):
        raise RuntimeError(f"binomial only supports floating-point dtypes for count and prob, got: {count.dtype} "
                           f"and {prob.dtype}")
    if count.shape != prob.shape or count.device != prob.device:
        raise RuntimeError(f"{op}: count and prob must have one shape and device, got {tuple(count.shape)} on "
                           f"{count.device} and {tuple(prob.shape)} on {prob.device}")
    n, p = count._data.astype(np.float64), prob._data.astype(np.float64)
    if bool(((p < 0) | (p > 1) | (p != p)).any()) or bool((n < 0).any()):
        raise InputError(f"{op}: expected prob in [0, 1] and count >= 0")
    return _draw(op, count, generator, lambda g: g.binomial(n.astype(np.int64), p), prob)


def poisson(input, generator=None):  # noqa: A002 - PyTorch's names
    """Poisson draws of the rates ``input`` (non-negative, floating point), in its dtype, as ``torch.poisson``;
    recorded with a zero gradient, as PyTorch's."""
    op = "poisson"
    _tensor(op, input)
    if not backend.is_floating(input.dtype):
        raise RuntimeError(f"{op}: expected a floating-point tensor of rates, got {input.dtype}")
    rates = input._data.astype(np.float64)
    if bool(((rates < 0) | (rates != rates)).any()):
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    return _draw(op, input, generator, lambda g: g.poisson(rates))


def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, requires_grad=False,
                   pin_memory=False):
    """An uninitialized (zero) tensor of ``size`` whose dimensions lie in memory in the order
    ``physical_layout`` (outermost first): ``empty_permuted((N, C, H, W), (0, 2, 3, 1))`` is channels-last."""
    size, order = tuple(size), tuple(physical_layout)
    if sorted(order) != list(range(len(size))):
        raise RuntimeError(f"empty_permuted: physical_layout {list(order)} is not a permutation of the "
                           f"{len(size)} dimensions")
    stored = ops.zeros([size[d] for d in order], dtype=dtype, device=device)
    out = Tensor._from_array(stored._data.transpose(tuple(int(i) for i in np.argsort(order))))
    return out.requires_grad_() if requires_grad else out


def addmv_(input, mat, vec, *, beta=1, alpha=1):  # noqa: A002 - PyTorch's names
    return _tensor("addmv_", input).addmv_(mat, vec, beta=beta, alpha=alpha)


def gcd_(input, other):  # noqa: A002
    return _tensor("gcd_", input).gcd_(other)


def lcm_(input, other):  # noqa: A002
    return _tensor("lcm_", input).lcm_(other)


# the functional layer sits above the ops: the Tensor methods that call into it are given here
Tensor.hardshrink = lambda self, lambd=0.5: F.hardshrink(self, lambd)
Tensor.prelu = lambda self, weight: F.prelu(self, weight)
