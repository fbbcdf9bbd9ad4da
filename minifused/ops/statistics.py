"""Covariance and correlation of variables observed together (``cov``, ``corrcoef``), as PyTorch's: composed of
the differentiable ops, so their gradients are the composition's."""
from __future__ import annotations

import warnings

from .. import backend
from ..backend import InputError, InputTypeError
from ..tensor import Tensor
from ._common import promote
from .elementwise import clamp, sqrt
from .matmul import matmul
from .reduce import sum  # noqa: A004
from .shape import reshape, transpose

__all__ = ["cov", "corrcoef"]


def _observations(op, input):
    """``input`` as (variables, observations), floating point."""
    if not isinstance(input, Tensor):
        raise InputTypeError(f"{op}(): expected a Tensor, got {type(input).__name__}")
    if input.ndim > 2:
        raise InputError(f"{op}(): expected input to have two or fewer dimensions but got an input with "
                         f"{input.ndim} dimensions")
    x = reshape(input, (1, -1)) if input.ndim < 2 else input
    return x if backend.is_floating(x.dtype) else x.to(backend.get_default_dtype())


def _weights(op, name, w, n, x, integral):
    if w is None:
        return None
    if not isinstance(w, Tensor) or w.ndim > 1 or (w.ndim == 1 and w.shape[0] != n):
        raise InputError(f"{op}(): expected {name} to be a scalar or 1D tensor with {n} elements (one per "
                         f"observation), got {getattr(w, 'shape', type(w).__name__)}")
    if integral and backend.is_floating(w.dtype):
        raise InputTypeError(f"{op}(): expected fweights to have an integral dtype, got {w.dtype}")
    if bool((w < 0).any()):
        raise InputError(f"{op}(): {name} cannot be negative")
    return w.to(x.dtype)


def cov(input, *, correction=1, fweights=None, aweights=None):  # noqa: A002 - PyTorch's names
    """The covariance matrix of the variables in ``input``'s rows (one variable: a 0-d result),
    with ``correction`` (1: Bessel's) and optional integer frequency and float observation weights, as
    ``torch.cov``."""
    op = "cov"
    x = _observations(op, input)
    for w in (fweights, aweights):  # the result's dtype is PyTorch's promotion of the input's and the weights'
        if isinstance(w, Tensor) and backend.is_floating(w.dtype):
            x = x.to(promote(x.dtype, w.dtype))
    n = x.shape[1]
    fw = _weights(op, "fweights", fweights, n, x, True)
    aw = _weights(op, "aweights", aweights, n, x, False)
    w = fw if aw is None else aw if fw is None else fw * aw
    if w is None:
        total = float(n)
        mean = sum(x, 1, keepdim=True) / max(n, 1)
        norm = total - correction
    else:
        total = sum(w)
        if float(total) == 0:  # (PyTorch's check: the weighted mean would be 0 / 0)
            raise InputError(f"{op}(): weights sum to zero, can't be normalized")
        mean = sum(x * w, 1, keepdim=True) / total
        norm = total - (correction if aw is None else correction * sum(w * aw) / total)
    if float(norm) <= 0:
        warnings.warn(f"{op}(): degrees of freedom is <= 0. Correction should be strictly less than the number of "
                      f"observations.", UserWarning, stacklevel=2)
        norm = norm * 0 if isinstance(norm, Tensor) else 0.0
    centered = x - mean
    weighted = centered if w is None else centered * w
    out = matmul(weighted, transpose(centered, 0, 1)) / norm
    return reshape(out, ()) if x.shape[0] == 1 else out  # (one variable, 1-D or not: a 0-d result, as PyTorch's)


def corrcoef(input):  # noqa: A002
    """Pearson's correlation coefficients of the variables in ``input``'s rows, clipped to [-1, 1], as
    ``torch.corrcoef``."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = c.diagonal()
    std = sqrt(d)
    return clamp(c / reshape(std, (-1, 1)) / reshape(std, (1, -1)), -1, 1)


METHODS = {"cov": lambda self, **kw: cov(self, **kw), "corrcoef": lambda self: corrcoef(self)}
