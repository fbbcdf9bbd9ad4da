"""Normalization layers: ``LayerNorm``, ``RMSNorm`` (PyTorch's names, shapes and init)."""
from __future__ import annotations

import numbers

from .. import functional as F
from .. import ops
from .module import Module, Parameter


def _shape(normalized_shape):
    if isinstance(normalized_shape, numbers.Integral):
        return (int(normalized_shape),)
    return tuple(int(s) for s in normalized_shape)


class LayerNorm(Module):
    """``y = (x - mean) / sqrt(var + eps) * weight + bias`` over the trailing ``normalized_shape``.

    ``weight`` (ones) and ``bias`` (zeros) have shape ``normalized_shape``; none
    when ``elementwise_affine=False``, no bias when ``bias=False``.
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ops.ones(self.normalized_shape, dtype=dtype, device=device))
            if bias:
                self.bias = Parameter(ops.zeros(self.normalized_shape, dtype=dtype, device=device))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def forward_inplace(self, input):
        """``F.layer_norm_`` (inference only: it raises where anything requires grad)."""
        return F.layer_norm_(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class RMSNorm(Module):
    """``y = x / sqrt(mean(x^2) + eps) * weight``; ``eps=None``: the input dtype's machine epsilon."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ops.ones(self.normalized_shape, dtype=dtype, device=device))
        else:
            self.register_parameter("weight", None)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
