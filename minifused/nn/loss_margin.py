"""The margin, embedding and likelihood losses as layers (``F.margin_ranking_loss`` ... ``F.gaussian_nll_loss``,
``F.multilabel_margin_loss``, ``F.triplet_margin_with_distance_loss``), with PyTorch's arguments."""
from __future__ import annotations

from .. import functional as F
from .activation import PairwiseDistance, _Loss
from .loss import _WeightedLoss
from ..backend import InputError, InputTypeError

__all__ = ["MarginRankingLoss", "HingeEmbeddingLoss", "SoftMarginLoss", "CosineEmbeddingLoss",
           "MultiLabelSoftMarginLoss", "TripletMarginLoss", "MultiMarginLoss", "PoissonNLLLoss", "GaussianNLLLoss",
           "MultiLabelMarginLoss", "TripletMarginWithDistanceLoss"]


def _positive_margin(name, margin):
    """``margin`` for a triplet loss, which PyTorch's constructors refuse unless it is greater than 0 (their
    ``margin <= 0`` test, so a NaN passes)."""
    try:
        bad = margin <= 0
    except TypeError:
        raise InputTypeError(f"{name}: expected margin to be a number, got {type(margin).__name__}") from None
    if bad:
        raise InputError(f"{name}: expected margin to be greater than 0, got {margin} instead")
    return margin


class _MarginLoss(_Loss):
    """A ``margin`` kept as given (None too, refused at the call, as PyTorch's); each loss's default in its
    signature."""

    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = margin


class MarginRankingLoss(_MarginLoss):
    def forward(self, input1, input2, target):
        return F.margin_ranking_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class HingeEmbeddingLoss(_MarginLoss):
    def __init__(self, margin=1.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(margin, size_average, reduce, reduction)

    def forward(self, input, target):
        return F.hinge_embedding_loss(input, target, margin=self.margin, reduction=self.reduction)


class SoftMarginLoss(_Loss):
    def forward(self, input, target):
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class CosineEmbeddingLoss(_MarginLoss):
    def forward(self, input1, input2, target):
        return F.cosine_embedding_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """``weight`` (a buffer), one per class, multiplies the per-class losses."""

    def forward(self, input, target):
        return F.multilabel_soft_margin_loss(input, target, weight=self.weight, reduction=self.reduction)


class TripletMarginLoss(_MarginLoss):
    def __init__(self, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None, reduce=None, reduction="mean"):
        super().__init__(_positive_margin("TripletMarginLoss", margin), size_average, reduce, reduction)
        self.p, self.eps, self.swap = p, eps, swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p, eps=self.eps,
                                     swap=self.swap, reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    """``weight`` (a buffer), one per class, multiplies the terms of each sample's target class."""

    def __init__(self, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise InputError(f"MultiMarginLoss: only p == 1 and p == 2 supported, got {p!r}")
        self.p, self.margin = p, margin

    def forward(self, input, target):
        return F.multi_margin_loss(input, target, p=self.p, margin=self.margin, weight=self.weight,
                                   reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    def __init__(self, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input, target):
        return F.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full, eps=self.eps,
                                  reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    def __init__(self, *, full=False, eps=1e-6, reduction="mean"):
        super().__init__(reduction=reduction)
        self.full, self.eps = full, eps

    def forward(self, input, target, var):
        return F.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps, reduction=self.reduction)



class MultiLabelMarginLoss(_Loss):
    def forward(self, input, target):
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """``distance_function`` None is a ``PairwiseDistance()`` child module, as in PyTorch."""

    def __init__(self, *, distance_function=None, margin=1.0, swap=False, reduction="mean"):
        super().__init__(reduction=reduction)
        _positive_margin("TripletMarginWithDistanceLoss", margin)
        self.distance_function = distance_function if distance_function is not None else PairwiseDistance()
        self.margin, self.swap = margin, swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_with_distance_loss(anchor, positive, negative, distance_function=self.distance_function,
                                                   margin=self.margin, swap=self.swap, reduction=self.reduction)
