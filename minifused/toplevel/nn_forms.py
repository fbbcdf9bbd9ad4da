"""The functional forms PyTorch also exposes at its top level (``torch.conv2d``, ``torch.max_pool2d``,
``torch.batch_norm``, ``torch.dropout``, ``torch.embedding`` ...), each with ``torch.<name>``'s own signature,
which is ATen's and not always ``torch.nn.functional``'s: ``torch.dropout(input, p, train)`` has ``train``
required, ``torch.batch_norm`` takes ``weight, bias`` before the running statistics, ``torch.embedding`` takes
the weight first, the losses take ``reduction`` as an int (0 none, 1 mean, 2 sum), the max pools return no
indices. Each is the functional form underneath, where the arguments are checked."""
from __future__ import annotations

import numbers

import numpy as np

from .. import backend, ops
from .. import functional as F
from ..autograd import no_grad
from ..functional.layers import _channel_dropout, _renorm_rows, _row_indices
from ..tensor import Tensor
from ..backend import InputError, InputTypeError

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "convolution",
           "max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices", "avg_pool1d", "adaptive_avg_pool1d",
           "adaptive_max_pool1d", "batch_norm", "layer_norm", "group_norm", "instance_norm", "rms_norm",
           "dropout", "dropout_", "alpha_dropout", "alpha_dropout_", "feature_alpha_dropout",
           "feature_alpha_dropout_", "feature_dropout", "feature_dropout_", "embedding", "embedding_renorm_",
           "embedding_bag",
           "bilinear", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "constant_pad_nd", "relu_", "selu",
           "selu_", "celu", "celu_", "rrelu", "rrelu_", "prelu", "threshold", "threshold_", "hardshrink", "kl_div",
           "binary_cross_entropy_with_logits", "cosine_embedding_loss", "hinge_embedding_loss",
           "margin_ranking_loss", "triplet_margin_loss", "poisson_nll_loss"]

# the same signatures as torch's, so the functional forms serve as they are
conv1d, conv2d, conv3d = F.conv1d, F.conv2d, F.conv3d
conv_transpose1d, conv_transpose2d, conv_transpose3d = F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d
adaptive_avg_pool1d, rms_norm, bilinear, prelu = F.adaptive_avg_pool1d, F.rms_norm, F.bilinear, F.prelu
pixel_shuffle, pixel_unshuffle, channel_shuffle = F.pixel_shuffle, F.pixel_unshuffle, F.channel_shuffle
relu_, selu_, celu_, threshold_ = F.relu_, F.selu_, F.celu_, F.threshold_


# ---------------------------------------------------------------- convolution and pooling
_CONVS = {(1, False): F.conv1d, (2, False): F.conv2d, (3, False): F.conv3d,
          (1, True): F.conv_transpose1d, (2, True): F.conv_transpose2d, (3, True): F.conv_transpose3d}


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """``torch.convolution``: the 1-, 2- or 3-D convolution (``transposed``: the transposed one) that the
    weight's dimensions name, every argument given, as ATen's (``output_padding`` is read when transposed)."""
    if not isinstance(weight, Tensor):
        raise InputTypeError(f"convolution(): argument 'weight' must be a Tensor, not {type(weight).__name__}")
    conv = _CONVS.get((weight.ndim - 2, bool(transposed)))
    if conv is None:
        raise InputError(f"convolution: expected a 3-D, 4-D or 5-D weight (1, 2 or 3 spatial dimensions), got "
                         f"shape {tuple(weight.shape)}")
    if transposed:
        return conv(input, weight, bias, stride, padding, output_padding, groups, dilation)
    return conv(input, weight, bias, stride, padding, dilation, groups)  # output_padding unused, as in ATen


def _stride(stride):
    """ATen's ``stride=[]`` (the default) is the kernel size, F's ``stride=None``."""
    return None if stride is None or (isinstance(stride, (tuple, list)) and not stride) else stride


def max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """``torch.max_pool1d``: the pooled values only (:func:`max_pool1d_with_indices` gives the indices too)."""
    return F.max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool2d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """``torch.max_pool2d``: the pooled values only."""
    return F.max_pool2d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """``torch.max_pool3d``: the pooled values only."""
    return F.max_pool3d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool1d_with_indices(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """``(output, indices)`` of :func:`max_pool1d` (indices: positions along L, int64)."""
    return F.max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode, True)


def avg_pool1d(input, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True):
    return F.avg_pool1d(input, kernel_size, _stride(stride), padding, ceil_mode, count_include_pad)


def adaptive_max_pool1d(input, output_size):
    """``torch.adaptive_max_pool1d``: always ``(output, indices)``, as ATen's."""
    return F.adaptive_max_pool1d(input, output_size, True)


def constant_pad_nd(input, pad, value=0):
    """``input`` padded with ``value`` by ``pad`` (pairs from the last dimension back; negative entries crop)."""
    return F.pad(input, pad, "constant", value)


# ---------------------------------------------------------------- normalization
def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled):
    """``torch.batch_norm``: the affine parameters before the running statistics, every argument given
    (``cudnn_enabled`` is accepted and unused: minifused has its own kernels)."""
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    return F.group_norm(input, num_groups, weight, bias, eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn_enabled):
    """``torch.instance_norm``: ordered as :func:`batch_norm`, every argument given."""
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


# ---------------------------------------------------------------- dropout: (input, p, train), train required
def dropout(input, p, train):
    return F.dropout(input, p, train)


def dropout_(input, p, train):
    """:func:`dropout` written into ``input`` (returned)."""
    return F.dropout(input, p, train, inplace=True)


def feature_dropout(input, p, train):
    """Whole channels (dimension 1 of an input of at least 2 dimensions) zeroed with probability ``p``, the rest
    scaled by ``1/(1-p)``: the dropout of ``nn.Dropout2d`` / ``Dropout3d`` for any number of dimensions."""
    _feature_input("feature_dropout", input, train)
    return _channel_dropout("feature_dropout", input, p, train, False)


def feature_dropout_(input, p, train):
    _feature_input("feature_dropout_", input, train)
    return _channel_dropout("feature_dropout_", input, p, train, True)


def alpha_dropout(input, p, train):
    return F.alpha_dropout(input, p, train)


def alpha_dropout_(input, p, train):
    """:func:`alpha_dropout` written into ``input`` (returned; recorded for autograd as a copy into it)."""
    return _written_into(input, F.alpha_dropout(input, p, train))


def feature_alpha_dropout(input, p, train):
    _feature_input("feature_alpha_dropout", input, train)
    return F.feature_alpha_dropout(input, p, train)


def feature_alpha_dropout_(input, p, train):
    _feature_input("feature_alpha_dropout_", input, train)
    return _written_into(input, F.feature_alpha_dropout(input, p, train))


def _feature_input(op, input, train):
    """A tensor input. (Channels need a dimension 1: the functional forms ask for it, as PyTorch only when
    something is dropped, 0 < p < 1 in training.)"""
    if not isinstance(input, Tensor):
        raise InputTypeError(f"{op}(): argument 'input' must be a Tensor, not {type(input).__name__}")


def _written_into(input, result):
    # the alpha dropouts have no in-place kernel: the result is copied back, which copy_ records for autograd
    return input if result is input else input.copy_(result)


# ---------------------------------------------------------------- embeddings
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """``torch.embedding``: the weight first; a negative ``padding_idx`` (-1 by default) means none, as ATen's
    (PyTorch's F.embedding turns a negative one into its row before it calls this)."""
    if isinstance(padding_idx, bool) or not isinstance(padding_idx, numbers.Integral):
        raise InputTypeError(f"embedding(): argument 'padding_idx' must be int, not {type(padding_idx).__name__}")
    return F.embedding(indices, weight, None if padding_idx < 0 else int(padding_idx), None, 2.0,
                       scale_grad_by_freq, sparse)



def embedding_renorm_(input, indices, max_norm, norm_type):  # noqa: A002 - PyTorch's names
    """``torch.embedding_renorm_``: the rows of the 2-D ``input`` that ``indices`` name (each once), where their
    ``norm_type`` norm exceeds ``max_norm``, scaled in place to ``max_norm / (norm + 1e-7)`` of themselves: what a
    lookup with ``max_norm`` does first. Returns ``input``. Not recorded for autograd, as in PyTorch: a weight that
    requires grad is renormalized under ``no_grad()``."""
    op = "embedding_renorm_"
    if not isinstance(input, Tensor) or not isinstance(indices, Tensor):
        raise InputTypeError(f"{op}: expected tensors for input and indices, got {type(input).__name__} and "
                             f"{type(indices).__name__}")
    if input.ndim != 2 or not backend.is_floating(input.dtype):
        raise InputError(f"{op}: expected a 2-D floating-point input (rows to renormalize), got shape "
                         f"{tuple(input.shape)} and dtype {input.dtype}")
    if indices.dtype not in (backend.int64, backend.int32):
        raise InputTypeError(f"{op}: expected integer indices (int64 or int32), got dtype {indices.dtype}")
    for name, v in (("max_norm", max_norm), ("norm_type", norm_type)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise InputTypeError(f"{op}: argument '{name}' must be a number, not {type(v).__name__}")
    if not backend.same_device(indices._data, input._data):
        raise RuntimeError(f"{op}: indices are on {indices.device} but input is on {input.device}")
    input._check_inplace(op)
    _renorm_rows(input, _row_indices(op, indices, input.shape[0]).reshape(-1), float(max_norm), float(norm_type))
    return input


_BAG_MODES = ("sum", "mean", "max")


def embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False, per_sample_weights=None,
                  include_last_offset=False, padding_idx=None):
    """``torch.embedding_bag``: the weight first, ``mode`` an int (0 sum, 1 mean, 2 max), ``indices`` cut into
    bags at ``offsets`` (a 2-D ``indices`` is read flat). Returns ``(output, offset2bag, bag_size,
    max_indices)`` as ATen does: each index's bag, each bag's count of non-padding indices, and in max mode the
    row of ``weight`` that gave each maximum (first of equals; in an empty bag 0 on the cpu, -1 on cuda, as
    ATen's kernels), else ``bag_size`` again, as
    PyTorch's CPU kernel. (Its CPU sum mode leaves offset2bag empty and bag_size zero, a shortcut; here they
    are always filled.)"""
    op = "embedding_bag"
    if isinstance(mode, bool) or not isinstance(mode, numbers.Integral) or not 0 <= mode < 3:
        raise InputError(f"{op}: mode must be 0 (sum), 1 (mean) or 2 (max), got {mode!r}")
    if not isinstance(indices, Tensor) or not isinstance(weight, Tensor):
        raise InputTypeError(f"{op}: expected tensors for weight and indices, got {type(weight).__name__} and "
                             f"{type(indices).__name__}")
    flat = indices.reshape(-1) if indices.ndim == 2 else indices
    if per_sample_weights is not None and per_sample_weights.ndim == 2:
        per_sample_weights = per_sample_weights.reshape(-1)
    out = F.embedding_bag(flat, weight, offsets, None, 2, scale_grad_by_freq, _BAG_MODES[mode], sparse,
                          per_sample_weights, include_last_offset, padding_idx)
    idx = np.asarray(flat.tolist(), dtype=np.int64)
    offsets = np.asarray(offsets.tolist(), dtype=np.int64)
    starts = offsets[:-1] if include_last_offset else offsets
    nbags = starts.size
    bag = np.searchsorted(starts, np.arange(idx.size), side="right") - 1  # each index's bag
    if include_last_offset and offsets.size:  # past the last bag's end (CSR), as F.embedding_bag
        bag[offsets[-1]:] = -1
    keep = bag >= 0 if padding_idx is None else (bag >= 0) & (idx != padding_idx % weight.shape[0])
    bag_size = np.bincount(bag[keep], minlength=nbags)[:nbags]
    max_indices = _bag_argmax(weight, idx, keep, bag_size) if mode == 2 else None
    bag, bag_size = (Tensor._from_array(backend.to_device(a, weight.device)) for a in (bag, bag_size))
    return out, bag, bag_size, bag_size if max_indices is None else max_indices


def _bag_argmax(weight, idx, keep, bag_size):
    """(bags, D): the index whose row gave each bag's maximum per feature (the first of equal ones), from the
    bags gathered into a dense (bags, longest, D) block whose gaps are -inf."""
    nbags, dev = bag_size.size, weight.device
    longest = max(int(bag_size.max()) if nbags else 0, 1)
    filled = np.arange(longest)[None, :] < bag_size[:, None]
    rows = np.zeros((nbags, longest), np.int64)
    rows[filled] = idx[keep]  # bags are contiguous runs, so the kept indices come bag by bag
    rows, gap, empty = (Tensor._from_array(backend.to_device(a, dev)) for a in (rows, ~filled, bag_size == 0))
    with no_grad():
        dense = ops.where(ops.unsqueeze(gap, 2), float("-inf"), weight[rows])
        chosen = ops.gather(rows, 1, ops.argmax(dense, 1))
        # an empty bag's entry: 0 from ATen's CPU kernel, -1 from its CUDA one
        return ops.where(ops.unsqueeze(empty, 1), -1 if dev.type == "cuda" else 0, chosen)


# ---------------------------------------------------------------- activations
def selu(input):
    return F.selu(input)


def celu(input, alpha=1.0):
    return F.celu(input, alpha)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """``torch.rrelu``: random negative slopes in ``[lower, upper]`` in training, their mean otherwise."""
    _no_generator("rrelu", training, generator)
    return F.rrelu(input, lower, upper, training)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    _no_generator("rrelu_", training, generator)
    return F.rrelu_(input, lower, upper, training)


def _no_generator(op, training, generator):
    if training and generator is not None:
        raise NotImplementedError(f"{op}: a generator for the random slopes is not supported (they come from the "
                                  f"global generator; seed it with minifused.manual_seed)")


def threshold(input, threshold, value):
    return F.threshold(input, threshold, value)


def hardshrink(input, lambd=0.5):
    return F.hardshrink(input, lambd)


# ---------------------------------------------------------------- losses: reduction as ATen's int
_REDUCTIONS = ("none", "mean", "sum")


def _reduction(op, reduction):
    if isinstance(reduction, bool) or not isinstance(reduction, numbers.Integral) or not 0 <= reduction < 3:
        raise InputTypeError(f"{op}(): argument 'reduction' must be an int: 0 (none), 1 (mean) or 2 (sum), got "
                             f"{reduction!r} (torch.nn.functional.{op} takes the names)")
    return _REDUCTIONS[reduction]


# The losses below take ATen's int reduction. PyTorch 2.13's Python binding reads their ATen default (Mean) as 0:
# left out, the reduction is none (per-element losses), so the defaults here are 0.
def kl_div(input, target, reduction=0, *, log_target=False):
    """``torch.kl_div``: reduction 1 is the mean over every element (not F's 'batchmean'), without F's warning
    about it (ATen's op gives none)."""
    red = _reduction("kl_div", reduction)
    loss = F.kl_div(input, target, reduction="none" if red == "mean" else red, log_target=log_target)
    return loss.mean() if red == "mean" else loss


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=0):
    red = _reduction("binary_cross_entropy_with_logits", reduction)
    return F.binary_cross_entropy_with_logits(input, target, weight, reduction=red, pos_weight=pos_weight)


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    red = _reduction("cosine_embedding_loss", reduction)
    return F.cosine_embedding_loss(input1, input2, target, margin, reduction=red)


def hinge_embedding_loss(input, target, margin=1.0, reduction=0):
    return F.hinge_embedding_loss(input, target, margin, reduction=_reduction("hinge_embedding_loss", reduction))


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    red = _reduction("margin_ranking_loss", reduction)
    return F.margin_ranking_loss(input1, input2, target, margin, reduction=red)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False, reduction=0):
    red = _reduction("triplet_margin_loss", reduction)
    return F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, reduction=red)


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    """``torch.poisson_nll_loss``: every argument given, as ATen's."""
    red = _reduction("poisson_nll_loss", reduction)
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps, reduction=red)
