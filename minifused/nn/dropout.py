"""``Dropout``: zeroes elements with probability ``p`` in training mode (fused mask kernel)."""
from __future__ import annotations

import numbers

from .. import functional as F
from .module import Module
from ..backend import InputError, InputTypeError


class _DropoutNd(Module):
    """PyTorch's base of the dropout layers (``Dropout``, ``Dropout1d/2d/3d``, the alpha dropouts): the probability
    ``p`` and ``inplace``, kept as given (the repr shows them so)."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not isinstance(p, numbers.Real):  # (a bool passes, as PyTorch's: True is 1)
            raise InputTypeError(f"{type(self).__name__}: dropout probability must be a number, got "
                                 f"{type(p).__name__}")
        if not 0.0 <= p <= 1.0:
            raise InputError(f"{type(self).__name__}: dropout probability has to be between 0 and 1, but got {p!r}")
        self.p, self.inplace = p, inplace

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    def forward(self, input):
        return F.dropout(input, self.p, self.training, inplace=self.inplace)

    def forward_inplace(self, x):
        return F.dropout(x, self.p, self.training, inplace=True)
