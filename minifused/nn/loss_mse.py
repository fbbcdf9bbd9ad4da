"""``MSELoss``: mean squared error (``F.mse_loss``)."""
from __future__ import annotations

from .. import functional as F
from .loss import _Loss


class MSELoss(_Loss):
    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)
