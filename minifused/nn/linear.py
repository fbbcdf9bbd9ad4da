"""``Linear``: a fully connected layer, optionally with its activation fused into the GEMM; ``Bilinear``."""
from __future__ import annotations

import math
import numbers

from .. import backend
from .. import functional as F
from ..autograd import is_grad_enabled, no_grad
from ..functional import LINEAR_ACTIVATIONS as ACTIVATIONS
from .module import Module, Parameter
from ..backend import InputError, InputTypeError


class Linear(Module):
    """``y = activation(x @ weight.T + bias)``, weight (out_features, in_features) as in PyTorch.

    ``activation`` None, ``'relu'`` or ``'gelu'`` (tanh form) runs inside the GEMM's
    epilog; chained ``Linear(..., activation=...)`` layers also fuse the activation's
    backward into the next layer's input-gradient GEMM (see ``minifused.ops.linear``).
    Initialised as PyTorch does: weight kaiming_uniform(a=√5), i.e. U(-1/√in, 1/√in),
    and bias U(-1/√in, 1/√in).

    ``inplace=True`` (square layers only, in_features == out_features) is an opt-in for
    memory-lean inference: with grad mode off and a contiguous input, the forward **overwrites
    its input** with the output (``F.square_matmul_``: row blocks, bias and activation in the
    GEMM's epilog, extra memory within 1/8 of the input) and returns that same tensor. With grad
    mode on, or a non-contiguous input or one of another dtype, it is the ordinary forward.
    """

    fused_activations = ACTIVATIONS[1:]

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None, activation=None,
                 inplace=False):  # PyTorch's positional order first; activation, inplace are ours
        super().__init__()
        if activation not in ACTIVATIONS:
            raise InputError(f"Linear: activation must be None, 'relu' or 'gelu', got {activation!r}")
        if inplace and in_features != out_features:
            raise InputError(f"Linear: inplace=True needs a square layer (in_features == out_features), got "
                             f"in_features={in_features}, out_features={out_features}")
        if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in (in_features, out_features)):
            raise InputTypeError(f"Linear: in_features and out_features must be ints, got {in_features!r} and "
                                 f"{out_features!r}")
        if in_features < 0 or out_features < 0:
            raise InputError(f"Linear: feature counts must be >= 0, got in_features={in_features}, "
                             f"out_features={out_features}")
        dev = backend.device(device)
        dtype = backend.get_default_dtype() if dtype is None else backend.as_dtype(dtype)
        xp = backend.xp(dev)
        self.in_features, self.out_features, self.activation = int(in_features), int(out_features), activation
        self.inplace = bool(inplace)
        with backend.on_device(dev):
            self.weight = Parameter(xp.empty((self.out_features, self.in_features), dtype=dtype))
            self.bias = Parameter(xp.empty((self.out_features,), dtype=dtype)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        # kaiming_uniform(a=√5): gain √(2/(1+5)), bound gain·√(3/fan_in) = 1/√fan_in
        bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
        with no_grad():
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.uniform_(-bound, bound)

    def forward(self, input):
        return self.forward_with_activation(input, self.activation)

    def forward_with_activation(self, x, activation):
        """The layer with ``activation`` in its epilog (``Sequential`` fuses a following ReLU)."""
        if self.inplace and not is_grad_enabled() and self._can_overwrite(x):
            rows = x if x.ndim == 2 else x.reshape(-1, self.in_features)  # a view: x's own memory
            F.square_matmul_(rows, self.weight, True, bias=self.bias, activation=activation)
            return x
        return F.linear(x, self.weight, self.bias, activation)

    def _can_overwrite(self, x):
        w = self.weight._data
        a = getattr(x, "_data", None)
        return (a is not None and a.ndim >= 2 and a.shape[-1] == self.in_features and a.dtype == w.dtype
                and a.flags.c_contiguous and type(a) is type(w)
                and (not backend.is_cuda_array(a) or a.data.device_id == w.data.device_id))

    def extra_repr(self):
        act = f", activation='{self.activation}'" if self.activation else ""
        act += ", inplace=True" if self.inplace else ""
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}{act}"


class Bilinear(Module):
    """``y = x1^T A x2 + b`` per output feature (``F.bilinear``): weight (out_features, in1_features,
    in2_features), bias (out_features,); both U(-1/sqrt(in1_features), 1/sqrt(in1_features)), as PyTorch's."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        sizes = {"in1_features": in1_features, "in2_features": in2_features, "out_features": out_features}
        for name, v in sizes.items():
            if not isinstance(v, numbers.Integral) or isinstance(v, bool):
                raise InputTypeError(f"Bilinear: {name} must be an int, got {v!r}")
            if v <= 0 if name == "in1_features" else v < 0:  # (in1 > 0, as PyTorch's: its init divides by it)
                raise InputError(f"Bilinear: {name} must be {'> 0' if name == 'in1_features' else '>= 0'}, got {v}")
        dev = backend.device(device)
        dtype = backend.get_default_dtype() if dtype is None else backend.as_dtype(dtype)
        xp = backend.xp(dev)
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        with backend.on_device(dev):
            self.weight = Parameter(xp.empty((out_features, in1_features, in2_features), dtype=dtype))
            self.bias = Parameter(xp.empty((out_features,), dtype=dtype)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.in1_features) if self.in1_features > 0 else 0.0
        with no_grad():
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.uniform_(-bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
