"""Parameter-free layers: activations, Flatten, Identity.

``forward_inplace(x)`` (ReLU, GELU; also Dropout, Softmax, LayerNorm) is the module's in-place
form: ``Sequential`` calls it under ``no_grad`` on results that only it holds.
"""
from __future__ import annotations

from .. import backend
from .. import functional as F
from .module import Module


class Identity(Module):
    """Returns its input; takes and ignores any constructor arguments, as PyTorch's."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class ReLU(Module):
    """``inplace=True`` overwrites the input (``F.relu_``), as PyTorch's ``ReLU(inplace=True)``."""

    fusable_activation = "relu"

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = bool(inplace)

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)

    def forward_inplace(self, x):
        return F.relu_(x)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class GELU(Module):
    # Not fusable: the GEMM epilog computes the tanh form, and a Sequential gives the same numbers as
    # the modules it holds run one by one.

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def forward_inplace(self, x):
        if not backend.is_floating(x.dtype):  # gelu casts it to float32: no in-place form
            return self.forward(x)
        return F.gelu_(x, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate='{self.approximate}'"


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"
