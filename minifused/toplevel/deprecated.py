"""Deprecated top-level functions PyTorch still has: ``ctc_loss`` with ATen's signature (reduction an int),
``frobenius_norm`` and ``nuclear_norm`` (each warns once, as PyTorch's, and is the ``linalg`` norm it names), and
``matrix_rank``, which PyTorch keeps only to raise, pointing at ``linalg.matrix_rank``."""
from __future__ import annotations

import numbers

from .. import functional as F
from ..ops import linalg as _linalg
from ..tensor import Tensor
from ..backend import InputTypeError
from ..ops._common import write_out
from .runtime import warn_once

__all__ = ["ctc_loss", "frobenius_norm", "nuclear_norm", "matrix_rank"]

_CTC_REDUCTIONS = {1: "mean", 2: "sum"}


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=0, zero_infinity=False):
    """``torch.ctc_loss``: :func:`minifused.nn.functional.ctc_loss` with ``reduction`` an int, 1 the mean and 2 the
    sum, any other int none (ATen's reading). The lengths are both tensors or both sequences of ints. The default
    is 0, no reduction: PyTorch's signature says Mean, but its top-level binding passes 0 when the argument is left
    out, and a call without it gives the losses per sample there too."""
    op = "ctc_loss"
    if isinstance(reduction, bool) or not isinstance(reduction, numbers.Integral):
        raise InputTypeError(f"{op}(): argument 'reduction' must be int (1 mean, 2 sum, else none), not "
                             f"{type(reduction).__name__} (torch.nn.functional.ctc_loss takes the names)")
    if isinstance(input_lengths, Tensor) != isinstance(target_lengths, Tensor):
        raise InputTypeError(f"{op}(): input_lengths and target_lengths must both be tensors or both tuples of "
                             f"ints, got {type(input_lengths).__name__} and {type(target_lengths).__name__}")
    named = _CTC_REDUCTIONS.get(int(reduction), "none")
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, named, zero_infinity)


def _dims(op, dim, copies):
    """``dim`` as a tuple: one int stands for ``copies`` of itself (ATen's ``int[1]`` / ``int[2]``)."""
    if isinstance(dim, numbers.Integral) and not isinstance(dim, bool):
        return (int(dim),) * copies
    if isinstance(dim, (tuple, list)) and all(isinstance(d, numbers.Integral) and not isinstance(d, bool)
                                               for d in dim):
        return tuple(int(d) for d in dim)
    raise InputTypeError(f"{op}(): argument 'dim' must be tuple of ints, not {type(dim).__name__}")


def frobenius_norm(input, dim, keepdim=False, *, out=None):  # noqa: A002 - PyTorch's names
    """Deprecated: the 2-norm of ``input``'s elements over ``dim`` (at most two dimensions; ``()`` all of them),
    :func:`minifused.linalg.vector_norm` ``(input, 2, dim, keepdim)``."""
    warn_once("frobenius_norm", "frobenius_norm is deprecated and it is just left for JIT compatibility. It will be "
              "removed in a future release. Please use `linalg.vector_norm(A, 2., dim, keepdim)` instead")
    dim = _dims("frobenius_norm", dim, 1)
    if len(dim) > 2:
        raise RuntimeError(f"frobenius_norm: Expected at most 2 dimensions, but got {len(dim)} dimensions instead.")
    result = _linalg.vector_norm(input, 2, dim, keepdim)
    return result if out is None else write_out("frobenius_norm", result, out)


def nuclear_norm(input, dim=None, keepdim=False, *, out=None):  # noqa: A002 - PyTorch's names
    """Deprecated: the sum of the singular values of the matrices over ``dim`` (the last two dimensions when
    left out), :func:`minifused.linalg.matrix_norm` ``(input, 'nuc', dim, keepdim)``. As PyTorch's, the second
    positional argument is ``keepdim`` when it is a bool (``nuclear_norm(A, True)``) and one int ``d`` stands
    for ``(d, d)``."""
    if isinstance(dim, bool):
        dim, keepdim = None, dim
    warn_once("nuclear_norm", "nuclear_norm is deprecated and it is just left for JIT compatibility. It will be "
              "removed in a future release. Please use `linalg.matrix_norm(A, 'nuc', dim, keepdim)` instead")
    dim = (-2, -1) if dim is None else _dims("nuclear_norm", dim, 2)
    result = _linalg.matrix_norm(input, "nuc", dim, keepdim)
    return result if out is None else write_out("nuclear_norm", result, out)


def matrix_rank(input, tol=None, symmetric=False, *, out=None):  # noqa: A002 - PyTorch's names
    """Removed from PyTorch (it raises there, as here): use :func:`minifused.linalg.matrix_rank`."""
    raise RuntimeError("This function was deprecated since version 1.9 and is now removed.\nPlease use the "
                       "`minifused.linalg.matrix_rank` function instead. The parameter 'symmetric' was renamed in "
                       "`minifused.linalg.matrix_rank()` to 'hermitian'.")
