"""Spatial layers as Modules: ``Upsample``, adaptive pooling, the padding layers, ``Embedding``, ``EmbeddingBag``,
channel dropout (``Dropout1d``, ``Dropout2d``) and ``Unflatten``; each a one-liner over ``F``."""
from __future__ import annotations

import collections.abc
import math
import numbers

from .. import backend
from .. import functional as F
from ..autograd import no_grad
from ..tensor import Tensor
from .dropout import _DropoutNd
from .module import Module, Parameter
from ..backend import InputError, InputTypeError
from ..functional.layers import EmbeddingArgumentError

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d",
           "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "ZeroPad1d", "ZeroPad2d", "ConstantPad1d", "ConstantPad2d",
           "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d", "CircularPad1d",
           "CircularPad2d", "Embedding", "EmbeddingBag", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
           "FeatureAlphaDropout", "Unflatten",
           "Unfold", "Fold"]


# ---------------------------------------------------------------- resampling
class Upsample(Module):
    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.name = type(self).__name__  # (PyTorch's attribute)
        self.size, self.mode, self.align_corners = size, mode, align_corners
        self.scale_factor = (tuple(float(s) for s in scale_factor) if isinstance(scale_factor, (tuple, list))
                             else float(scale_factor) if scale_factor is not None else None)
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self):
        what = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return f"{what}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


# ---------------------------------------------------------------- adaptive pooling
class _AdaptivePool(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def extra_repr(self):
        return f"output_size={self.output_size!r}"


class _AdaptiveAvgPoolNd(_AdaptivePool):
    """PyTorch's base of the adaptive average pooling layers."""

    def __init__(self, output_size):
        super().__init__(output_size)


class _AdaptiveMaxPoolNd(_AdaptivePool):
    """PyTorch's base of the adaptive max pooling layers (only these have ``return_indices``, as PyTorch's)."""

    def __init__(self, output_size, return_indices=False):
        super().__init__(output_size)
        self.return_indices = return_indices


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """Average over PyTorch's adaptive bins; ``AdaptiveAvgPool2d(1)`` (global pooling) is a mean over H, W."""

    def forward(self, input):
        return F.adaptive_avg_pool2d(input, self.output_size)


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    def forward(self, input):
        return F.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    def forward(self, input):
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    def forward(self, input):
        return F.adaptive_max_pool1d(input, self.output_size, self.return_indices)


# ---------------------------------------------------------------- padding
class _PadNd(Module):
    """An int pads each side of the last ``dims`` dimensions; a sequence is kept as a tuple and checked by
    ``F.pad`` against each input, as PyTorch's modules do: ``ZeroPad2d((1, 2))`` pads the last dimension alone,
    and an odd length fails at the call."""
    mode, dims = "constant", 1

    def __init__(self, padding, value=None):
        super().__init__()
        if isinstance(padding, numbers.Integral) and not isinstance(padding, bool):
            padding = (int(padding),) * (2 * self.dims)
        elif isinstance(padding, collections.abc.Iterable):
            padding = tuple(padding)
        else:  # (repeated as PyTorch's _ntuple does: F.pad refuses a non-int)
            padding = (padding,) * (2 * self.dims)
        self.padding, self.value = padding, value

    def forward(self, input):
        return F.pad(input, self.padding, self.mode, self.value)

    def extra_repr(self):  # (PyTorch's reprs: the padding alone, "padding=..., value=..." for ConstantPad)
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    """PyTorch's base of the constant padding layers (``ConstantPad1d/2d/3d``; ``ZeroPad<n>d`` a subclass of
    ``ConstantPad<n>d``)."""

    def __init__(self, padding, value):
        if not isinstance(value, numbers.Real):  # (kept as given: PyTorch's repr shows it so)
            raise InputTypeError(f"{type(self).__name__}: value must be a number, got {type(value).__name__}")
        super().__init__(padding, value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class _ZeroPadding:
    """What ``ZeroPad<n>d`` adds to its ``ConstantPad<n>d``: the value 0, and the padding alone in the repr."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ConstantPad1d(_ConstantPadNd):
    pass


class ConstantPad2d(_ConstantPadNd):
    dims = 2


class ZeroPad1d(_ZeroPadding, ConstantPad1d):
    pass


class ZeroPad2d(_ZeroPadding, ConstantPad2d):
    pass


class _ReflectionPadNd(_PadNd):
    mode = "reflect"


class ReflectionPad1d(_ReflectionPadNd):
    pass


class ReflectionPad2d(_ReflectionPadNd):
    dims = 2


class _ReplicationPadNd(_PadNd):
    mode = "replicate"


class ReplicationPad1d(_ReplicationPadNd):
    pass


class ReplicationPad2d(_ReplicationPadNd):
    dims = 2


class _CircularPadNd(_PadNd):
    mode = "circular"


class CircularPad1d(_CircularPadNd):
    pass


class CircularPad2d(_CircularPadNd):
    dims = 2


# ---------------------------------------------------------------- embedding
class _EmbeddingTable(Module):
    """The table of :class:`Embedding` and :class:`EmbeddingBag` (neither a subclass of the other, as in PyTorch):
    ``num_embeddings`` rows of size ``embedding_dim``, initialised N(0, 1), the ``padding_idx`` row zeroed."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 0
                   for v in (num_embeddings, embedding_dim)):
            raise InputError(f"{name}: num_embeddings and embedding_dim must be non-negative ints, got "
                             f"{num_embeddings!r} and {embedding_dim!r}")
        if padding_idx is not None:
            if not isinstance(padding_idx, numbers.Integral) or not -num_embeddings <= padding_idx < num_embeddings:
                raise EmbeddingArgumentError(f"{name}: padding_idx must be within num_embeddings "
                                             f"([{-num_embeddings}, {num_embeddings})), got {padding_idx!r}")
            padding_idx = int(padding_idx) % num_embeddings
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        self.padding_idx, self.max_norm, self.norm_type = padding_idx, max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is None:
            dev = backend.device(device)
            dt = backend.get_default_dtype() if dtype is None else backend.as_dtype(dtype)
            with backend.on_device(dev):
                self.weight = Parameter(backend.xp(dev).empty((self.num_embeddings, self.embedding_dim), dt),
                                        requires_grad=not _freeze)
            self.reset_parameters()
        else:
            w = _weight._data if isinstance(_weight, Tensor) else _weight
            if tuple(w.shape) != (self.num_embeddings, self.embedding_dim):
                raise EmbeddingArgumentError(f"{name}: _weight must have shape ({self.num_embeddings}, "
                                             f"{self.embedding_dim}), got {tuple(w.shape)}")
            self.weight = Parameter(w, requires_grad=not _freeze)

    def reset_parameters(self):
        with no_grad():
            self.weight.normal_(0.0, 1.0)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self):
        """The ``padding_idx`` row zeroed in place (PyTorch's helper, which subclasses' initialisations call)."""
        if self.padding_idx is not None:
            with no_grad():
                self.weight._data[self.padding_idx] = 0
                self.weight._bump("Embedding.reset_parameters")


class Embedding(_EmbeddingTable):
    """A lookup table of ``num_embeddings`` rows of size ``embedding_dim``, initialised N(0, 1) as in
    PyTorch, the ``padding_idx`` row zeroed (and given no gradient)."""

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, sparse=False):
        """An Embedding holding ``embeddings`` (2-D; its array, not a copy), frozen unless ``freeze=False``.
        The padding row keeps its given values (only its gradient is withheld), as in PyTorch."""
        if not isinstance(embeddings, Tensor) or embeddings.ndim != 2:
            got = f"shape {tuple(embeddings.shape)}" if isinstance(embeddings, Tensor) else type(embeddings).__name__
            raise EmbeddingArgumentError(f"Embedding.from_pretrained: embeddings must be a 2-D tensor, got {got}")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                   _weight=embeddings, _freeze=freeze)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += ", scale_grad_by_freq=True"
        if self.sparse:
            s += ", sparse=True"
        return s


class EmbeddingBag(_EmbeddingTable):
    """Sums, means or maxima of bags of embeddings (``F.embedding_bag``); the table as :class:`Embedding`'s
    (N(0, 1), the ``padding_idx`` row zeroed), with PyTorch's argument order."""

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 mode="mean", sparse=False, _weight=None, include_last_offset=False, padding_idx=None, device=None,
                 dtype=None, _freeze=False):
        super().__init__(num_embeddings, embedding_dim, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                         _weight, _freeze, device, dtype)
        self.mode, self.include_last_offset = mode, include_last_offset

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq,
                               self.mode, self.sparse, per_sample_weights, self.include_last_offset, self.padding_idx)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                        mode="mean", sparse=False, include_last_offset=False, padding_idx=None):
        """An EmbeddingBag holding ``embeddings`` (2-D; its array, not a copy), frozen unless ``freeze=False``."""
        if not isinstance(embeddings, Tensor) or embeddings.ndim != 2:
            got = f"shape {tuple(embeddings.shape)}" if isinstance(embeddings, Tensor) else type(embeddings).__name__
            raise EmbeddingArgumentError(f"EmbeddingBag.from_pretrained: embeddings must be a 2-D tensor, got {got}")
        rows, cols = embeddings.shape
        return cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse, embeddings, include_last_offset,
                   padding_idx, _freeze=freeze)

    def extra_repr(self):  # PyTorch's: the non-default settings, mode always
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm!r}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type!r}"
        if self.scale_grad_by_freq:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq!r}"
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx!r}"
        return s


# ---------------------------------------------------------------- channel dropout
class Dropout2d(_DropoutNd):
    """Zero whole channels of (N, C, H, W) inputs in training mode (3-D inputs: see ``F.dropout2d``)."""

    def forward(self, input):
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    """Zero whole channels of (N, C, L) or (C, L) inputs in training mode."""

    def forward(self, input):
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) inputs in training mode."""

    def forward(self, input):
        return F.dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    """Alpha dropout (for SELU networks) in training mode. ``inplace`` is kept (and shown) but, as in PyTorch,
    the module never writes into its input."""

    def forward(self, input):
        return F.alpha_dropout(input, self.p, self.training)


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels in training mode; ``inplace`` ignored, as in :class:`AlphaDropout`."""

    def forward(self, input):
        return F.feature_alpha_dropout(input, self.p, self.training)


# ---------------------------------------------------------------- shapes
class Unflatten(Module):
    """Expand dimension ``dim`` into ``unflattened_size`` (one entry may be -1)."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if not isinstance(dim, numbers.Integral) or isinstance(dim, bool):
            raise InputTypeError(f"Unflatten: dim must be an int, got {dim!r}")
        if not isinstance(unflattened_size, (tuple, list)) or not all(
                isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in unflattened_size):
            raise InputTypeError(f"Unflatten: unflattened_size must be a tuple of ints, got {unflattened_size!r}")
        # kept as given (a list stays a list, as PyTorch keeps and prints it)
        self.dim, self.unflattened_size = int(dim), type(unflattened_size)(int(s) for s in unflattened_size)

    def forward(self, input):
        nd = input.ndim
        if not -nd <= self.dim < nd:
            raise IndexError(f"Unflatten: dim {self.dim} out of range for a {nd}-D input of shape {tuple(input.shape)}")
        d = self.dim % nd
        sizes, n = tuple(self.unflattened_size), input.shape[d]
        known = math.prod(s for s in sizes if s != -1)
        if sizes.count(-1) > 1 or (-1 not in sizes and known != n) or (-1 in sizes and (known == 0 or n % known)):
            raise InputError(f"Unflatten: sizes {sizes} don't multiply up to the size of dimension {d} ({n}) of "
                             f"the input of shape {tuple(input.shape)}")
        # the -1 resolved from dimension d alone (a reshape could not infer it where another dimension is 0)
        sizes = tuple(n // known if s == -1 else s for s in sizes)
        return input.reshape(tuple(input.shape[:d]) + sizes + tuple(input.shape[d + 1:]))

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Unfold(Module):
    """``F.unfold``: the sliding blocks of (N, C, H, W) input as (N, C*kh*kw, L) columns."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
                f"stride={self.stride}")


class Fold(Module):
    """``F.fold``: (N, C*kh*kw, L) columns summed back into (N, C, *output_size)."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size = output_size
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return f"output_size={self.output_size}, " + Unfold.extra_repr(self)

