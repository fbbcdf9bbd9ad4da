"""Activation layers beyond ReLU/GELU and the losses beyond cross-entropy/MSE, one-liners over ``F``
with PyTorch's arguments, attributes and ``repr``.

The layers with an in-place form (``inplace=True``) also give it to ``Sequential`` as
``forward_inplace`` (see ``nn/basic.py``)."""
from __future__ import annotations

import numbers
import warnings

from .. import backend
from .. import functional as F
from .loss import _Loss, _WeightedLoss
from .. import ops
from .module import Module, Parameter
from ..autograd import no_grad
from ..backend import InputError

__all__ = ["LeakyReLU", "SiLU", "ELU", "SELU", "CELU", "Softplus", "Hardtanh", "ReLU6", "Hardsigmoid",
           "Hardswish", "Mish", "Softsign", "LogSigmoid", "Tanhshrink", "PReLU", "PixelShuffle", "PixelUnshuffle",
           "Threshold", "Hardshrink", "Softshrink", "GLU", "Softmin", "Softmax2d", "ChannelShuffle", "CosineSimilarity",
           "PairwiseDistance", "RReLU",
           "BCELoss", "BCEWithLogitsLoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "KLDivLoss"]


def _inplace_suffix(inplace):
    return ", inplace=True" if inplace else ""


class _Activation(Module):
    """``forward`` is ``_fn(x, *args, inplace=self.inplace)``; ``args()`` gives the layer's parameters."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = bool(inplace)

    def args(self):
        return ()

    def forward(self, input):
        return type(self)._fn(input, *self.args(), inplace=self.inplace)

    def forward_inplace(self, input):
        if not backend.is_floating(input.dtype):  # out of place it raises the same TypeError
            return self.forward(input)
        return type(self)._fn(input, *self.args(), inplace=True)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class LeakyReLU(_Activation):
    _fn = staticmethod(F.leaky_relu)

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__(inplace)
        self.negative_slope = negative_slope

    def args(self):
        return (self.negative_slope,)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}{_inplace_suffix(self.inplace)}"


class PReLU(Module):
    """``F.prelu`` with a learned ``weight`` of ``num_parameters`` values (1, or the channels), each ``init``."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        if not isinstance(num_parameters, numbers.Integral) or isinstance(num_parameters, bool) or num_parameters < 1:
            raise InputError(f"PReLU: num_parameters must be a positive int, got {num_parameters!r}")
        self.num_parameters, self.init = num_parameters, init  # (a NumPy int too, as PyTorch takes it)
        self.weight = Parameter(ops.full((num_parameters,), float(init), dtype=dtype, device=device))

    def reset_parameters(self):
        with no_grad():
            self.weight.fill_(float(self.init))

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class PixelShuffle(Module):
    """``F.pixel_shuffle`` by ``upscale_factor``."""

    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """``F.pixel_unshuffle`` by ``downscale_factor``."""

    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


class SiLU(_Activation):
    _fn = staticmethod(F.silu)


class _ELUFamily(_Activation):
    """ELU and CELU's shared ``alpha`` (siblings, as in PyTorch: a CELU is no ELU)."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__(inplace)
        self.alpha = alpha

    def args(self):
        return (self.alpha,)

    def extra_repr(self):
        return f"alpha={self.alpha}{_inplace_suffix(self.inplace)}"


class ELU(_ELUFamily):
    _fn = staticmethod(F.elu)


class CELU(_ELUFamily):
    _fn = staticmethod(F.celu)


class SELU(_Activation):
    _fn = staticmethod(F.selu)


class HardtanhBoundsError(InputError, AssertionError):
    """Hardtanh's bounds out of order: the AssertionError PyTorch's module raises, and a ValueError/RuntimeError as
    the rest of the bad input here."""


class Hardtanh(_Activation):
    _fn = staticmethod(F.hardtanh)

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False, min_value=None, max_value=None):
        super().__init__(inplace)
        for old, new, v in (("min_value", "min_val", min_value), ("max_value", "max_val", max_value)):
            if v is not None:  # (PyTorch's deprecated spellings, still taken there)
                warnings.warn(f"keyword argument `{old}` is deprecated and renamed to `{new}`", FutureWarning,
                              stacklevel=2)
        min_val = min_val if min_value is None else min_value
        max_val = max_val if max_value is None else max_value
        if not max_val > min_val:  # (the module, unlike F.hardtanh, refuses equal bounds too, as PyTorch's)
            raise HardtanhBoundsError(f"Hardtanh: min_val cannot be greater than max_val, and max_val ({max_val}) "
                                      f"must be greater than min_val ({min_val})")
        self.min_val, self.max_val = min_val, max_val

    def args(self):
        return (self.min_val, self.max_val)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}{_inplace_suffix(self.inplace)}"


class ReLU6(Hardtanh):
    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class _Silent(_Activation):
    """Hardsigmoid and Hardswish (siblings, as in PyTorch), whose repr shows nothing."""

    def extra_repr(self):  # PyTorch shows nothing for these three
        return ""


class Hardsigmoid(_Silent):
    _fn = staticmethod(F.hardsigmoid)


class Hardswish(_Silent):
    _fn = staticmethod(F.hardswish)


class Mish(_Activation):
    _fn = staticmethod(F.mish)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Softplus(Module):
    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Softsign(Module):
    def forward(self, input):
        return F.softsign(input)


class LogSigmoid(Module):
    def forward(self, input):
        return F.logsigmoid(input)


class Tanhshrink(Module):
    def forward(self, input):
        return F.tanhshrink(input)


class RReLU(_Activation):
    """``F.rrelu``: random slopes in training, their mean in evaluation."""

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__(inplace)
        self.lower, self.upper = lower, upper

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def forward_inplace(self, input):
        if not backend.is_floating(input.dtype):
            return self.forward(input)
        return F.rrelu(input, self.lower, self.upper, self.training, True)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}{_inplace_suffix(self.inplace)}"


class Threshold(_Activation):
    _fn = staticmethod(F.threshold)

    def __init__(self, threshold, value, inplace=False):
        super().__init__(inplace)
        self.threshold, self.value = threshold, value

    def args(self):
        return (self.threshold, self.value)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}{_inplace_suffix(self.inplace)}"


class _Shrink(Module):
    """Hardshrink and Softshrink's shared ``lambd`` (siblings, as in PyTorch)."""

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return type(self)._fn(input, self.lambd)

    def extra_repr(self):
        return f"{self.lambd}"


class Hardshrink(_Shrink):
    _fn = staticmethod(F.hardshrink)


class Softshrink(_Shrink):
    _fn = staticmethod(F.softshrink)


class GLU(Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmin(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmin(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax2d(Module):
    """Softmax over the channels of (N, C, H, W) or (C, H, W) input."""

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise InputError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D instead")
        return F.softmax(input, -3)


class ChannelShuffle(Module):
    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"


class CosineSimilarity(Module):
    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


# ---------------------------------------------------------------- losses
class L1Loss(_Loss):
    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(size_average, reduce, reduction)
        if beta < 0:
            raise InputError(f"SmoothL1Loss: beta must be >= 0, got {beta}")
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction=reduction)
        if not delta > 0:
            raise InputError(f"HuberLoss: delta must be > 0, got {delta}")
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class KLDivLoss(_Loss):
    _reductions = ("none", "batchmean", "sum", "mean")

    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = bool(log_target)

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class BCELoss(_WeightedLoss):
    """``weight`` (a buffer: it moves with ``.to()`` and is saved) broadcasts to the input's shape."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """``weight`` and ``pos_weight`` are buffers; ``pos_weight`` (one per class) broadcasts along the last
    dimension. A ``_Loss`` with weights of its own, as PyTorch's (no ``_WeightedLoss``)."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, weight=self.weight, reduction=self.reduction,
                                                  pos_weight=self.pos_weight)
