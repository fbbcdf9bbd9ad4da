"""``CTCLoss``: the connectionist temporal classification loss (``F.ctc_loss``), with PyTorch's arguments."""
from __future__ import annotations

from .. import functional as F
from .activation import _Loss

__all__ = ["CTCLoss"]


class CTCLoss(_Loss):
    """``F.ctc_loss`` of log-probabilities (T, N, C) or (T, C), targets and their lengths; ``blank`` the blank
    class, ``zero_infinity`` zeroes the infinite losses (and their gradients) of impossible alignments."""

    def __init__(self, blank=0, reduction="mean", zero_infinity=False):
        super().__init__(reduction=reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                          self.zero_infinity)
