"""``Dropout``: zeroes elements with probability ``p`` in training mode (fused mask kernel)."""
from __future__ import annotations

import numbers

from .. import functional as F
from .module import Module
from ..backend import InputError


class Dropout(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= p <= 1.0:
            raise InputError(f"Dropout: probability has to be between 0 and 1, but got {p!r}")
        self.p = p  # as given (its repr shows it so, as PyTorch's)
        self.inplace = inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, inplace=self.inplace)

    def forward_inplace(self, x):
        return F.dropout(x, self.p, self.training, inplace=True)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"
