"""Margin and embedding losses, as ``torch.nn.functional``'s: ``margin_ranking_loss``, ``hinge_embedding_loss``,
``soft_margin_loss``, ``cosine_embedding_loss``, ``multilabel_soft_margin_loss`` and ``triplet_margin_loss``,
composed from recorded ops with PyTorch's formulas (the same terms in the same order), checks and reductions."""
from __future__ import annotations

from ..ops import where as _where
from ..tensor import Tensor as _Tensor
from .activation import _loss_operands, _loss_weight, _number, _reduce, logsigmoid, pairwise_distance, softplus

__all__ = ["margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss", "cosine_embedding_loss",
           "multilabel_soft_margin_loss", "triplet_margin_loss"]


def _tensors(op, **named):
    for name, t in named.items():
        if not isinstance(t, _Tensor):
            raise TypeError(f"{op}: expected a tensor for {name}, got {type(t).__name__}")


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """``max(0, -target * (input1 - input2) + margin)``: target 1 ranks input1 first, -1 input2."""
    op = "margin_ranking_loss"
    _tensors(op, input1=input1, input2=input2, target=target)
    if not input1.ndim == input2.ndim == target.ndim:
        raise ValueError(f"{op}: All input tensors should have same dimension but got sizes: input1: "
                         f"{tuple(input1.shape)}, input2: {tuple(input2.shape)}, target: {tuple(target.shape)}")
    diff, target = _loss_operands(op, input1 - input2, target, reduction, size_average, reduce, broadcast="silent")
    return _reduce((-target * diff + _number(op, "margin", margin)).clamp(min=0), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """``input`` where target is 1, ``max(0, margin - input)`` where it is -1."""
    op = "hinge_embedding_loss"
    input, target = _loss_operands(op, input, target, reduction, size_average, reduce, broadcast="silent")
    margin = _number(op, "margin", margin)
    zeros = input * 0
    loss = _where(target != 1, (margin - input).clamp(min=0), zeros) + _where(target != -1, input, zeros)
    return _reduce(loss, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """The two-class logistic loss ``log(1 + exp(-target * input))`` (target 1 or -1)."""
    input, target = _loss_operands("soft_margin_loss", input, target, reduction, size_average, reduce,
                                   broadcast="silent")
    return _reduce(softplus(-target * input), reduction)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """``1 - cos(input1, input2)`` where target is 1, ``max(0, cos - margin)`` where it is -1; rows of (N, D)
    inputs with (N,) targets, or one (D,) pair with a 0-d target."""
    op = "cosine_embedding_loss"
    _tensors(op, input1=input1, input2=input2, target=target)
    if input1.ndim not in (1, 2) or tuple(input1.shape) != tuple(input2.shape):
        raise ValueError(f"{op}: expected two (N, D) or (D,) inputs of one shape, got {tuple(input1.shape)} and "
                         f"{tuple(input2.shape)}")
    if target.ndim != input1.ndim - 1:
        raise ValueError(f"{op}: {input1.ndim}D target tensor expects {input1.ndim - 1}D target tensor, got "
                         f"{target.ndim}D")
    d = input1.ndim - 1
    eps = 1e-12  # PyTorch's EPSILON on the squared magnitudes
    cos = (input1 * input2).sum(d) / (((input1 * input1).sum(d) + eps) * ((input2 * input2).sum(d) + eps)).sqrt()
    cos, target = _loss_operands(op, cos, target, reduction, size_average, reduce, broadcast=False)
    zeros = cos * 0
    loss = (_where(target == 1, 1 - cos, zeros)
            + _where(target == -1, (cos - _number(op, "margin", margin)).clamp(min=0), zeros))
    return _reduce(loss, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """Per-class logistic losses ``-(y log σ(x) + (1 - y) log σ(-x))`` (times ``weight``), averaged over the
    classes (the last dimension), then reduced over the samples."""
    op = "multilabel_soft_margin_loss"
    input, target = _loss_operands(op, input, target, reduction, size_average, reduce, broadcast=False)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * _loss_weight(op, "weight", weight, loss)
    if input.ndim:
        loss = loss.sum(input.ndim - 1) / input.shape[-1]
    return _reduce(loss, reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """``max(0, d(anchor, positive) - d(anchor, negative) + margin)`` with ``d`` the ``p``-norm pairwise
    distance; ``swap`` takes the smaller of d(anchor, negative) and d(positive, negative)."""
    op = "triplet_margin_loss"
    _tensors(op, anchor=anchor, positive=positive, negative=negative)
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"{op}: The anchor, positive, and negative tensors are expected to have the same number "
                           f"of dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, and negative "
                           f"{negative.ndim}D inputs")
    if not isinstance(swap, bool):
        raise TypeError(f"{op}: swap must be a bool, got {swap!r}")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{op}: reduction must be one of 'none', 'mean', 'sum', got {reduction!r}")
    if size_average is not None or reduce is not None:
        raise ValueError(f"{op}: size_average and reduce are deprecated and not supported; use reduction=")
    margin = _number(op, "margin", margin)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_swap = pairwise_distance(positive, negative, p, eps)
        d_neg = _where(d_swap < d_neg, d_swap, d_neg)
    return _reduce((margin + d_pos - d_neg).clamp(min=0), reduction)
