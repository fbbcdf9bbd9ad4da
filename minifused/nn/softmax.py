"""Softmax layers: ``Softmax``, ``LogSoftmax``."""
from __future__ import annotations

from .. import backend
from .. import functional as F
from .module import Module


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def forward_inplace(self, input):
        if not backend.is_floating(input.dtype):  # out of place it raises the same TypeError
            return self.forward(input)
        return F.softmax_(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.log_softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"
