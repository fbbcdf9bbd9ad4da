"""``LinearCrossEntropyLoss``: a classifier head (a ``Linear`` without activation) and its cross entropy in one
module, as PyTorch's; ``LinearCrossEntropyOptions`` (defined beside ``F.linear_cross_entropy``) is exported from
here, as PyTorch's ``nn`` does."""
from __future__ import annotations

import math

from .. import functional as F
from ..functional.linear_loss import LinearCrossEntropyOptions
from ..backend import InputError
from .linear import Linear
from .loss import _WeightedLoss

__all__ = ["LinearCrossEntropyLoss", "LinearCrossEntropyOptions"]


class LinearCrossEntropyLoss(_WeightedLoss):
    """``F.linear_cross_entropy`` of the input through a ``Linear(in_features, num_classes * prod(out_features))``
    held as ``self.linear`` (no bias by default), its weight seen as (num_classes, *out_features, in_features): the
    parameters, their names, shapes and initialization are PyTorch's, so state dicts load either way. ``weight``
    (num_classes,) is a buffer, as in ``CrossEntropyLoss``; ``ignore_index=None`` is -100 for class indices."""

    def __init__(self, in_features, num_classes, *, out_features=(), bias=False, device=None, dtype=None,
                 reduction="mean", weight=None, ignore_index=None, label_smoothing=0.0, options=None):
        if weight is not None and tuple(weight.shape) != (num_classes,):
            raise InputError(f"LinearCrossEntropyLoss: expected weight shape to be {(num_classes,)}, got "
                             f"{tuple(weight.shape)}")
        if label_smoothing < 0 or label_smoothing > 1.0:
            raise InputError(f"LinearCrossEntropyLoss: expected label_smoothing to be in range [0, 1], got "
                             f"{label_smoothing}")
        super().__init__(weight=weight, reduction=reduction)
        self.num_classes = num_classes
        self.out_features = out_features
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        # Stored 2-D (Linear's weight); forward views it as (num_classes, *out_features, in_features).
        self.linear = Linear(in_features, math.prod(out_features, start=num_classes), bias=bias, device=device,
                             dtype=dtype)
        self.options = options

    def forward(self, input, target):
        linear_weight = self.linear.weight.reshape((self.num_classes, *self.out_features, self.linear.in_features))
        linear_bias = (self.linear.bias.reshape((self.num_classes, *self.out_features))
                       if self.linear.bias is not None else None)
        return F.linear_cross_entropy(input, linear_weight, target, linear_bias=linear_bias, weight=self.weight,
                                      reduction=self.reduction, ignore_index=self.ignore_index,
                                      label_smoothing=self.label_smoothing, options=self.options)

    def extra_repr(self):
        return (f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
                f"out_features={self.out_features}, bias={self.linear.bias is not None}, reduction={self.reduction}, "
                f"ignore_index={self.ignore_index}, label_smoothing={self.label_smoothing}, options={self.options}")
