"""``MSELoss``: mean squared error (``F.mse_loss``)."""
from __future__ import annotations

from .. import functional as F
from ..functional._checks import _legacy_reduction
from .module import Module
from ..backend import InputError


class MSELoss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        reduction = _legacy_reduction(size_average, reduce, reduction)
        if reduction not in ("mean", "sum", "none"):
            raise InputError(f"MSELoss: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
        self.reduction = reduction

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)
