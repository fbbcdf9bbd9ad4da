"""Margin, embedding and likelihood losses, as ``torch.nn.functional``'s: ``margin_ranking_loss``,
``hinge_embedding_loss``, ``soft_margin_loss``, ``cosine_embedding_loss``, ``multilabel_soft_margin_loss``,
``triplet_margin_loss``, ``triplet_margin_with_distance_loss``, ``multi_margin_loss``, ``multilabel_margin_loss``,
``poisson_nll_loss`` and ``gaussian_nll_loss``, composed from recorded ops with PyTorch's formulas (the same terms in
the same order), checks and reductions. Inside an autocast region they compute in float32 as PyTorch's (its
lists: ``multilabel_soft_margin_loss`` and ``gaussian_nll_loss`` on cuda only, where their sum or log is)."""
from __future__ import annotations

import math as _math
import numbers as _numbers

from .. import backend as _backend
from ..ops import cast as _cast
from ..ops import full_like as _full_like
from ..ops import gather as _gather
from ..ops import minimum as _minimum
from ..ops import where as _where
from ..ops._common import autocast_float32 as _autocast_float32
from ..ops._common import broadcast_shape as _broadcast_shape
from ..tensor import Tensor as _Tensor
from ._checks import _legacy_reduction, _not_differentiable
from .activation import _loss_operands, _loss_weight, _number, _reduce, logsigmoid, pairwise_distance, softplus
from ..backend import InputError, InputTypeError

__all__ = ["margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss", "cosine_embedding_loss",
           "multilabel_soft_margin_loss", "triplet_margin_loss", "multi_margin_loss", "poisson_nll_loss",
           "gaussian_nll_loss", "triplet_margin_with_distance_loss", "multilabel_margin_loss"]


_CUDA = ("cuda",)


def _tensors(op, **named):
    for name, t in named.items():
        if not isinstance(t, _Tensor):
            raise InputTypeError(f"{op}: expected a tensor for {name}, got {type(t).__name__}")


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """``max(0, -target * (input1 - input2) + margin)``: target 1 ranks input1 first, -1 input2."""
    op = "margin_ranking_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _tensors(op, input1=input1, input2=input2, target=target)
    if not input1.ndim == input2.ndim == target.ndim:
        raise InputError(f"{op}: All input tensors should have same dimension but got sizes: input1: "
                         f"{tuple(input1.shape)}, input2: {tuple(input2.shape)}, target: {tuple(target.shape)}")
    _broadcast_shape(op, input1.shape, input2.shape)  # (an error naming this loss, not the subtraction)
    diff = input1 - input2
    if diff.dtype.kind in "iu":  # PyTorch's float margin makes integer inputs a float loss (the target's, or default)
        diff = _cast(diff, target.dtype if _backend.is_floating(target.dtype) else _backend.get_default_dtype())
    diff, target = _loss_operands(op, diff, target, reduction, broadcast="silent")
    return _reduce((-target * diff + _number(op, "margin", margin)).clamp(min=0), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """``input`` where target is 1, ``max(0, margin - input)`` where it is -1."""
    op = "hinge_embedding_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _, target = _loss_operands(op, input, target, reduction, broadcast="silent")
    (input,) = _autocast_float32(input)  # (the target is only compared: the loss keeps the input's dtype, as PyTorch's)
    margin = _number(op, "margin", margin)
    zeros = input * 0
    loss = _where(target != 1, (margin - input).clamp(min=0), zeros) + _where(target != -1, input, zeros)
    return _reduce(loss, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """The two-class logistic loss ``log(1 + exp(-target * input))`` (target 1 or -1). Not differentiable with
    respect to ``target``: a target that requires grad raises (while grad mode is on), as in PyTorch."""
    op = "soft_margin_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    input, target = _autocast_float32(input, target)  # (float32 in an autocast region: the result's dtype too)
    dtype = input.dtype if isinstance(input, _Tensor) else None
    input, target = _loss_operands(op, input, target, reduction, broadcast="silent")
    if target.ndim > input.ndim or any(t not in (1, i) for t, i in zip(target.shape[::-1], input.shape[::-1])):
        # PyTorch's writes into an array of the input's shape: only the target broadcasts
        raise InputError(f"{op}: output with shape {list(input.shape)} doesn't match the broadcast shape of the "
                         f"input and the target {list(target.shape)}")
    _not_differentiable(op, "target", target)
    margin = -target * input
    if margin.dtype != dtype and _backend.is_floating(dtype):  # PyTorch's writes into the input's dtype
        margin = margin.to(dtype)
    return _reduce(softplus(margin), reduction)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """``1 - cos(input1, input2)`` where target is 1, ``max(0, cos - margin)`` where it is -1; rows of (N, D)
    inputs with (N,) targets, or one (D,) pair with a 0-d target."""
    op = "cosine_embedding_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _tensors(op, input1=input1, input2=input2, target=target)
    # PyTorch's checks in its order: the target's rank, the inputs' ranks for it, then their shapes
    if target.ndim not in (0, 1):
        raise InputError(f"{op}: 0D or 1D target tensor expected, multi-target not supported")
    if not input1.ndim == input2.ndim == target.ndim + 1:
        raise InputError(f"{op}: {target.ndim}D target tensor expects {target.ndim + 1}D input tensors, but found "
                         f"inputs with sizes {list(input1.shape)} and {list(input2.shape)}.")
    if tuple(input1.shape) != tuple(input2.shape):
        raise InputError(f"{op}: expected two inputs of one shape, got {tuple(input1.shape)} and "
                         f"{tuple(input2.shape)}")
    d = input1.ndim - 1
    input1, input2 = _autocast_float32(input1, input2)
    eps = 9.999999960041972e-13  # PyTorch's EPSILON on the squared magnitudes: 1e-12 as a float32
    cos = (input1 * input2).sum(d) / (((input1 * input1).sum(d) + eps) * ((input2 * input2).sum(d) + eps)).sqrt()
    _, target = _loss_operands(op, cos, target, reduction, broadcast=False)  # (compared only: cos keeps its dtype)
    zeros = cos * 0
    loss = (_where(target == 1, 1 - cos, zeros)
            + _where(target == -1, (cos - _number(op, "margin", margin)).clamp(min=0), zeros))
    return _reduce(loss, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """Per-class logistic losses ``-(y log σ(x) + (1 - y) log σ(-x))`` (times ``weight``), averaged over the
    classes (the last dimension), then reduced over the samples."""
    op = "multilabel_soft_margin_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction, elementwise_mean=False)  # (as PyTorch's)
    # float32 in a cuda autocast region (PyTorch's sum there is on its float32 list), the input's dtype on cpu
    # (composed as PyTorch's: the target broadcasts silently, the sum is over the input's last dimension)
    input, target = _loss_operands(op, input, target, reduction, broadcast="silent", autocast_devices=_CUDA,
                                   bool_target=False)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:  # (checked; the product promotes, as PyTorch's composition)
        _loss_weight(op, "weight", weight, loss)
        loss = loss * weight
    if not input.ndim:  # (PyTorch's sum over dim -1 raises)
        raise IndexError(f"{op}: expected an input with a class dimension (at least 1-D), got a 0-d tensor")
    return _reduce(loss.sum(input.ndim - 1) / input.shape[-1], reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """``max(0, d(anchor, positive) - d(anchor, negative) + margin)`` with ``d`` the ``p``-norm pairwise
    distance; ``swap`` takes the smaller of d(anchor, negative) and d(positive, negative)."""
    op = "triplet_margin_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _tensors(op, anchor=anchor, positive=positive, negative=negative)
    anchor, positive, negative = _autocast_float32(anchor, positive, negative)
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"{op}: The anchor, positive, and negative tensors are expected to have the same number "
                           f"of dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, and negative "
                           f"{negative.ndim}D inputs")
    if not isinstance(swap, bool):
        raise InputTypeError(f"{op}: swap must be a bool, got {swap!r}")
    if reduction not in ("none", "mean", "sum"):
        raise InputError(f"{op}: reduction must be one of 'none', 'mean', 'sum', got {reduction!r}")
    margin = _number(op, "margin", margin)
    if margin <= 0:  # (as PyTorch's functional form refuses it too)
        raise InputError(f"{op}: margin must be greater than 0, got {margin}")
    _broadcast_shape(op, _broadcast_shape(op, anchor.shape, positive.shape), negative.shape)  # (named errors)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        # a tie shares the gradient between the two distances, and NaN propagates, as PyTorch's min
        d_neg = _minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce((margin + d_pos - d_neg).clamp(min=0), reduction)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """The multi-class hinge loss: for each sample, ``sum over j != y of max(0, margin - x[y] + x[j])**p / C``
    (each term times ``weight[y]``); (N, C) input with (N,) class targets, or (C,) with a 0-d one."""
    op = "multi_margin_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _tensors(op, input=input, target=target)
    input, weight = _autocast_float32(input, weight)
    if p not in (1, 2):
        raise InputError(f"{op}: only p == 1 and p == 2 supported, got {p!r}")
    # PyTorch's shapes: (N, C) or (C,) or 0-d (one class) input; a target of N elements, 0-d or (N,)
    nframe = input.shape[0] if input.ndim == 2 else 1
    if (input.ndim > 2 or (input.ndim == 2 and input.shape[1] == 0) or target.ndim > 1
            or target.numel() != nframe or target.dtype != _backend.int64):
        raise InputError(f"{op}: expected (N, C) input and (N,) int64 targets (or (C,) and a 0-d one), got "
                         f"{tuple(input.shape)} and {target.dtype} {tuple(target.shape)}")
    if weight is not None and (not isinstance(weight, _Tensor) or weight.ndim != 1):
        raise InputError(f"{op}: weight must be one-dimensional, got "
                         f"{list(weight.shape) if isinstance(weight, _Tensor) else type(weight).__name__}")
    _not_differentiable(op, "weight", weight)  # (PyTorch's kernel has no gradient for it)
    c = input.shape[-1] if input.ndim else 1
    if weight is not None and weight.shape[0] != c:
        raise InputError(f"{op}: inconsistent weight size, expected {c} (one per class) but got {list(weight.shape)}")
    if weight is not None and weight.dtype != input.dtype:  # (PyTorch's kernel refuses another dtype)
        raise InputTypeError(f"{op}: expected weight of the input's dtype {input.dtype}, got {weight.dtype}")
    if reduction not in ("none", "mean", "sum"):
        raise InputError(f"{op}: reduction must be one of 'none', 'mean', 'sum', got {reduction!r}")
    x = input if input.ndim == 2 else input.reshape(1, -1)
    y = target.reshape(-1, 1)
    c = x.shape[1]
    if y.numel() and (int(y.min().item()) < 0 or int(y.max().item()) >= c):
        raise _backend.IndexInputError(f"{op}: target out of range for {c} classes")  # (PyTorch: a RuntimeError)
    # relu, not clamp: PyTorch's kernel takes the terms z > 0 only, so a term at the kink gets no gradient
    z = (_number(op, "margin", margin) - _gather(x, 1, y) + x).relu()
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * _gather(weight.reshape(1, -1).expand(x.shape[0], c), 1, y)
    others = (y != _arange_like(x, c)).to(x.dtype)  # the classes j != y
    loss = (z * others).sum(1) / c
    return _reduce(loss if target.ndim else loss.reshape(()), reduction)  # 'none': the target's shape, as PyTorch's


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False,
                                      reduction="mean"):
    """``max(0, d(anchor, positive) - d(anchor, negative) + margin)`` with ``distance_function`` (a callable on
    two tensors; default :func:`pairwise_distance`); ``swap`` takes the smaller of d(anchor, negative) and
    d(positive, negative)."""
    op = "triplet_margin_with_distance_loss"
    _tensors(op, anchor=anchor, positive=positive, negative=negative)
    if reduction not in ("none", "mean", "sum"):
        raise InputError(f"{op}: {reduction} is not a valid value for reduction")
    if _number(op, "margin", margin) <= 0:
        raise InputError(f"{op}: margin must be greater than 0, got {margin}")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"{op}: The anchor, positive, and negative tensors are expected to have the same number "
                           f"of dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, and negative "
                           f"{negative.ndim}D inputs")
    distance = pairwise_distance if distance_function is None else distance_function
    d_pos, d_neg = distance(anchor, positive), distance(anchor, negative)
    if swap:
        d_neg = _minimum(d_neg, distance(positive, negative))  # (as triplet_margin_loss's)
    return _reduce((float(margin) + d_pos - d_neg).clamp(min=0), reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """The multi-label hinge loss: per sample ``sum over target classes j and non-target classes i of
    max(0, 1 - (x[j] - x[i])) / C``. ``target`` (int64, the input's shape) lists each sample's classes, ended
    by the first -1; (N, C) input, or (C,) (0-d: one class)."""
    op = "multilabel_margin_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _tensors(op, input=input, target=target)
    (input,) = _autocast_float32(input)
    if reduction not in ("none", "mean", "sum"):
        raise InputError(f"{op}: {reduction} is not a valid value for reduction")
    if input.ndim > 2 or (input.ndim and input.shape[-1] == 0):
        raise RuntimeError(f"{op}: Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    if target.dtype != _backend.int64:
        raise RuntimeError(f"{op}: expected scalar type Long (int64) target but found {target.dtype}")
    if tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(f"{op}: inconsistent target size: {list(target.shape)} for input of size: "
                           f"{list(input.shape)}")
    if not _backend.is_floating(input.dtype):
        raise InputTypeError(f"{op}: expected a floating-point input, got dtype {input.dtype}")
    c = input.shape[-1] if input.ndim else 1
    x, y = input.reshape(-1, c), target.reshape(-1, c)
    if y.numel() and (int(y.min().item()) < -1 or int(y.max().item()) >= c):
        raise RuntimeError(f"{op}: argument #2 'target' is out of range: class indices must lie in [-1, {c}), "
                           f"got values in [{int(y.min().item())}, {int(y.max().item())}]")
    listed = (y == -1).long().cumsum(1) == 0  # the entries before each row's first -1
    picked = _where(listed, y, y * 0)  # (an index for every entry; the unlisted ones are masked below)
    # a (N, C + 1) mask of each row's target classes: unlisted entries are scattered to the spare column C
    spare = x.new_zeros((x.shape[0], c + 1)).scatter(1, _where(listed, y, y * 0 + c), x.new_ones(y.shape))
    others = 1 - spare[:, :c]
    # (N, j, i); relu as multi_margin_loss's: no gradient at the kink, as PyTorch's kernel
    z = (1 - _gather(x, 1, picked).reshape(-1, c, 1) + x.reshape(-1, 1, c)).relu()
    loss = (z * listed.to(x.dtype).reshape(-1, c, 1) * others.reshape(-1, 1, c)).sum((1, 2)) / c
    return _reduce(loss if input.ndim == 2 else loss.reshape(()), reduction)


def _arange_like(x, c):
    from ..ops import arange

    return arange(c, device=x.device).reshape(1, c)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """The negative log-likelihood of ``target`` under a Poisson distribution of rate ``exp(input)``
    (``log_input``) or ``input``; ``full`` adds Stirling's approximation of ``log(target!)`` where target > 1."""
    op = "poisson_nll_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction, elementwise_mean=False)  # (as PyTorch's)
    input, target = _loss_operands(op, input, target, reduction, broadcast="silent", int_input=True)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + _number(op, "eps", eps)).log()
    if full:
        stirling = target * target.log() - target + 0.5 * (2 * _math.pi * target).log()
        loss = loss + _where(target > 1, stirling, 0.0)  # (selected: at target 0 the formula is NaN)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """The negative log-likelihood of ``target`` under normal distributions of means ``input`` and variances
    ``var`` (of the input's shape, or one fewer trailing dimension, or as many dimensions with one of them 1 where
    the input's is not: shared along it), the variances clamped to at least ``eps`` (the clamp passes gradients,
    as PyTorch's no-grad clamp of a clone does)."""
    op = "gaussian_nll_loss"
    if isinstance(var, _numbers.Real) and not isinstance(var, bool):  # one variance for all (PyTorch's float var)
        var = _full_like(input, float(var))
    _tensors(op, input=input, target=target, var=var)
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):  # one fewer dimension: homoscedastic over the last
            var = var.reshape(*var.shape, 1)
        elif not (var.ndim == input.ndim and sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1):
            # (PyTorch's rule: the sizes of var where it differs from the input sum to 1, so one of them, 1)
            raise InputError(f"{op}: var is of incorrect size {tuple(var.shape)} for input {tuple(input.shape)}")
    if reduction not in ("none", "mean", "sum"):
        raise InputError(f"{op}: {reduction} is not a valid value for reduction")
    if bool((var < 0).any().item()):
        raise InputError(f"{op}: var has negative entry/entries")
    # float32 in a cuda autocast region (PyTorch's log and pow there are on its float32 list), the input's dtype on cpu
    input, target = _loss_operands(op, input, target, reduction, broadcast="silent", autocast_devices=_CUDA,
                                   int_input=True)
    var = var + (var.detach().clamp(min=_number(op, "eps", eps)) - var.detach())
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * _math.log(2 * _math.pi)
    return _reduce(loss, reduction)

