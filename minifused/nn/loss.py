"""Loss layers: PyTorch's bases ``_Loss`` (the reduction) and ``_WeightedLoss`` (and a ``weight`` buffer) of every
loss module, ``CrossEntropyLoss`` (fused softmax-cross-entropy), ``NLLLoss`` (and its deprecated alias
``NLLLoss2d``)."""
from __future__ import annotations

import warnings

from .. import functional as F
from ..functional._checks import _legacy_reduction
from .module import Module
from ..backend import InputError


_REDUCTIONS = ("none", "mean", "sum")


def _check_reduction(name, reduction, allowed=_REDUCTIONS):
    if reduction not in allowed and reduction != "elementwise_mean":  # (deprecated: the loss maps it, or raises)
        raise InputError(f"{name}: reduction must be one of {', '.join(map(repr, allowed))}, got {reduction!r}")
    return reduction


class _Loss(Module):
    """The reduction (checked here, at construction; PyTorch's deprecated arguments mapped to one first). Loss
    modules print no settings (``MSELoss()`` whatever its arguments), as PyTorch's."""

    _reductions = _REDUCTIONS

    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        # (a deprecated 'elementwise_mean' stays: the functional form maps it, or raises, at the call, as PyTorch's)
        reduction = _legacy_reduction(size_average, reduce, reduction, elementwise_mean=False)
        self.reduction = _check_reduction(type(self).__name__, reduction, self._reductions)


class _WeightedLoss(_Loss):
    """A loss with a ``weight`` buffer (None: no weights), as PyTorch's (a ``_Loss`` too)."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                 label_smoothing=0.0):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class NLLLoss2d(NLLLoss):
    """Deprecated alias of :class:`NLLLoss` (PyTorch's FutureWarning at construction)."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        warnings.warn("`NLLLoss2d` has been deprecated. Please use `NLLLoss` instead as a drop-in replacement and "
                      "see https://pytorch.org/docs/main/nn.html#torch.nn.NLLLoss for more details.",
                      FutureWarning, stacklevel=2)
        super().__init__(weight, size_average, ignore_index, reduce, reduction)
