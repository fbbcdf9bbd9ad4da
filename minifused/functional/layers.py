"""Spatial layers as functions: ``pad``, adaptive pooling, ``embedding`` and channel
dropout (``dropout1d``, ``dropout2d``), with PyTorch's arguments, defaults and index rules."""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from .. import backend
from ..autograd import no_grad
from ..kernels.gather import checked_index
from ..ops import resample as R
from ..ops import clone
from ..ops._common import autocast_float32 as _autocast_float32
from ..ops.shape import reshape, squeeze, unsqueeze
from ..tensor import Tensor
from ..backend import same_device as _same_device
from ._checks import _check_tensor
from ..backend import DtypeNotImplementedError, InputError, InputTypeError, NotImplementedInputError

__all__ = ["pad", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d",
           "adaptive_max_pool2d", "embedding", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
           "feature_alpha_dropout"]


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


# ---------------------------------------------------------------- pad
_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad(input, pad, mode="constant", value=None):
    """Pad the trailing dimensions as ``torch.nn.functional.pad``: ``pad`` lists (before, after) pairs
    from the last dimension backwards, ``(left, right, top, bottom, ...)``. ``'constant'`` (fill
    ``value``, default 0) pads any number of dimensions; ``'reflect'``, ``'replicate'`` and
    ``'circular'`` pad the last 1, 2 or 3 of a (batched or unbatched) input. Negative pads crop."""
    op = "pad"
    _check_tensor(op, input)
    given = pad
    if isinstance(pad, (tuple, list)):  # an integer tensor of one element is its int, as in PyTorch (max_len - n)
        pad = [p.__index__() if isinstance(p, Tensor) and p.numel() == 1 and p.dtype.kind in "iu" else p for p in pad]
    if not isinstance(pad, (tuple, list)) or not all(_is_int(p) for p in pad):
        raise InputTypeError(f"{op}: pad must be a tuple of ints, got {given!r}")
    if not isinstance(mode, str):
        raise InputTypeError(f"{op}: mode must be a string, one of {', '.join(map(repr, _PAD_MODES))}, got {mode!r}")
    if mode not in _PAD_MODES:  # (PyTorch: NotImplementedError, 'Unrecognised padding mode')
        raise NotImplementedInputError(f"{op}: mode must be one of {', '.join(map(repr, _PAD_MODES))}, got {mode!r}")
    if len(pad) % 2:
        raise InputError(f"{op}: padding length must be divisible by 2, got {len(pad)} values {tuple(pad)}")
    k, nd = len(pad) // 2, input.ndim
    if k > nd:
        raise InputError(f"{op}: padding length should be at most two times the input dimension, got "
                         f"padding length {len(pad)} for a {nd}-D input")
    shape = tuple(input.shape)
    pairs = [(0, 0)] * (nd - k) + [(int(pad[2 * i]), int(pad[2 * i + 1])) for i in range(k)][::-1]
    if mode == "constant":
        value = 0 if value is None else value
        if input.dtype.kind in "iu" and isinstance(value, numbers.Real):
            info = np.iinfo(input.dtype)
            # (PyTorch refuses rather than wrap; an infinity or NaN has no integer value either)
            if not (math.isfinite(value) and info.min <= int(value) <= info.max):
                raise RuntimeError(f"{op}: value cannot be converted to type {input.dtype} without overflow, got "
                                   f"{value!r}")
        for d in range(nd - k, nd):
            if shape[d] + pairs[d][0] + pairs[d][1] < 0:
                raise InputError(f"{op}: input size {shape[d]} of dimension {d} plus padding {pairs[d]} "
                                 f"gives a negative output size")
    else:
        if value not in (None, 0):  # (PyTorch takes 0, the default it would fill with, for these modes too)
            raise InputError(f"{op}: mode {mode!r} takes no value argument, got value={value!r}")
        if not 1 <= k <= 3 or nd not in (k + 1, k + 2):  # (PyTorch: NotImplementedError)
            raise NotImplementedInputError(f"{op}: mode {mode!r} pads the last 1, 2 or 3 dimensions of a {k + 1}-D "
                                           f"or {k + 2}-D input (len(pad) = 2, 4, 6), got padding length {len(pad)} "
                                           f"for a {nd}-D input of shape {shape}")
        if mode != "circular" and 0 in (shape[1:] if nd == k + 2 else shape):  # (whatever the pads, as PyTorch)
            raise InputError(f"{op}: mode {mode!r} expects a {k + 1}-D or {k + 2}-D (batch mode) input with possibly "
                             f"0 batch size and other non-zero dimensions, got shape {shape}")
        for d in range(nd - k, nd):
            n, (lo, hi) = shape[d], pairs[d]
            if mode == "reflect" and max(lo, hi) >= n:
                raise InputError(f"{op}: reflect padding {(lo, hi)} of dimension {d} must be less than "
                                 f"its size {n} (input shape {shape})")
            if mode == "circular" and max(lo, hi) > n + min(lo, 0) + min(hi, 0):
                raise InputError(f"{op}: circular padding {(lo, hi)} of dimension {d} must be at most its "
                                 f"size {n} (after cropping): it would wrap around more than once (input "
                                 f"shape {shape})")
            if n + min(lo, 0) + min(hi, 0) < 0:
                raise InputError(f"{op}: input size {n} of dimension {d} plus padding {(lo, hi)} gives a "
                                 f"negative output size")
        if mode == "replicate" or (mode == "reflect" and k < 3):  # (PyTorch's cpu autocast float32 list)
            (input,) = _autocast_float32(input, devices=("cpu",))
    if all(p == (0, 0) for p in pairs):
        return clone(input)  # a new tensor, as PyTorch's
    return R.PadFn.apply(input, tuple(pairs), mode, value)


# ---------------------------------------------------------------- adaptive pooling
def _int_tensors_as_ints(op, output_size, dims):
    """``output_size`` with each one-element integer tensor in it as its int: PyTorch takes them, e.g. sizes
    computed as tensors. A 1-D integer tensor is a sequence of sizes; a 0-d one alone is a size of the 1-D forms
    only (PyTorch's 2-D and 3-D forms take its len(), a TypeError)."""
    def as_int(v):
        return v.__index__() if isinstance(v, Tensor) and v.numel() == 1 and v.dtype.kind in "iu" else v

    if isinstance(output_size, (tuple, list)):
        return type(output_size)(as_int(v) for v in output_size)
    if isinstance(output_size, Tensor) and output_size.dtype.kind in "iu":
        if output_size.ndim == 1:
            return tuple(int(v) for v in output_size.tolist())
        if output_size.ndim == 0 and dims > 1:
            raise InputTypeError(f"{op}: output_size must be an int or a sequence of {dims}, got a 0-d tensor")
    return as_int(output_size)


def _adaptive_args(op, input, output_size, dims, empty_channels=False):
    """(input as 4-D, output (oh, ow), how to restore the result's dimensions). ``empty_channels``: no channel
    is fine (average pooling's rule in PyTorch; max pooling's needs one unless they are the first dimension, that
    of an unbatched input)."""
    _check_tensor(op, input)
    nd = input.ndim
    if nd not in (dims + 1, dims + 2):
        what = "(C, L) or (N, C, L)" if dims == 1 else "(C, H, W) or (N, C, H, W)"
        raise InputError(f"{op}: expected a {dims + 1}-D or {dims + 2}-D input {what}, got shape "
                         f"{tuple(input.shape)}")
    shape = tuple(input.shape)
    if any(n == 0 for n in shape[nd - dims if empty_channels else 1:]):
        raise InputError(f"{op}: expected input to have non-zero size for non-batch dimensions, got shape {shape}")
    if not backend.is_floating(input.dtype):
        raise DtypeNotImplementedError(f"{op}: expected a floating-point input, got dtype {input.dtype}")
    output_size = _int_tensors_as_ints(op, output_size, dims)
    if dims == 1:
        if isinstance(output_size, (tuple, list)):
            if len(output_size) != 1:
                raise InputError(f"{op}: output_size must be an int or a 1-tuple, got {output_size!r}")
            output_size = output_size[0]
        if output_size is None:  # (the 1-D forms take ints only, as PyTorch's)
            raise InputTypeError(f"{op}: output_size must be an int or a 1-tuple of ints, got None")
        sizes = (output_size,)
    elif isinstance(output_size, (tuple, list)):
        if len(output_size) != 2:
            raise InputError(f"{op}: output_size must be an int or a pair, got {output_size!r}")
        sizes = tuple(output_size)
    elif output_size is None:  # (None keeps one dimension of a pair, not both: PyTorch's TypeError)
        raise InputTypeError(f"{op}: output_size must be an int or a pair (None keeps a dimension), got None")
    else:
        sizes = (output_size, output_size)
    sizes = tuple(shape[nd - dims + i] if s is None else s for i, s in enumerate(sizes))
    if not all(_is_int(s) for s in sizes):
        raise InputTypeError(f"{op}: output_size must be ints (or None to keep a dimension), got {output_size!r}")
    if min(sizes) < 0:
        raise InputError(f"{op}: output_size must be >= 0, got {output_size!r}")
    x = input
    if nd == dims + 1:
        x = unsqueeze(x, 0)
    if dims == 1:
        x = unsqueeze(x, 2)
        sizes = (1,) + sizes

    def restore(y):
        if dims == 1:
            y = squeeze(y, 2)
        return squeeze(y, 0) if nd == dims + 1 else y

    return x, tuple(int(s) for s in sizes), restore


def _empty_pool(x, out_hw):
    """The (empty) result of pooling to a zero size, still on the tape (its gradient is zero)."""
    n, c = x.shape[:2]
    return reshape(reshape(x, (-1,))[:0], (n, c) + out_hw)


def adaptive_avg_pool2d(input, output_size):
    """Average over PyTorch's adaptive bins ``[floor(i*H/out), ceil((i+1)*H/out))``; ``output_size`` an
    int, a pair, with None keeping that dimension. ``(1, 1)`` is a plain mean over H and W."""
    x, out, restore = _adaptive_args("adaptive_avg_pool2d", input, output_size, 2, empty_channels=True)
    if 0 in out:
        return restore(_empty_pool(x, out))
    return restore(R.AdaptiveAvgPool2dFn.apply(x, out))


def adaptive_avg_pool1d(input, output_size):
    """:func:`adaptive_avg_pool2d` along the last dimension of a (N, C, L) or (C, L) input."""
    x, out, restore = _adaptive_args("adaptive_avg_pool1d", input, output_size, 1, empty_channels=True)
    if 0 in out:
        return restore(_empty_pool(x, out))
    return restore(R.AdaptiveAvgPool2dFn.apply(x, out))


def _adaptive_max(op, input, output_size, return_indices, dims):
    x, out, restore = _adaptive_args(op, input, output_size, dims)
    if 0 in out:
        y = _empty_pool(x, out)
        idx = Tensor._from_array(x._xp.zeros(y.shape, np.int64))
    else:
        found = {}
        y = R.AdaptiveMaxPool2dFn.apply(x, out, found=found)
        idx = Tensor._from_array(found["indices"])
    return (restore(y), restore(idx)) if return_indices else restore(y)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Maximum over PyTorch's adaptive bins; with ``return_indices``, ``(output, indices)``: each
    maximum's flat index ``h*W + w`` in its plane (int64), as PyTorch's."""
    return _adaptive_max("adaptive_max_pool2d", input, output_size, return_indices, 2)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """:func:`adaptive_max_pool2d` along the last dimension (indices are positions along it)."""
    return _adaptive_max("adaptive_max_pool1d", input, output_size, return_indices, 1)


# ---------------------------------------------------------------- embedding
class EmbeddingArgumentError(InputError, AssertionError):
    """A bad padding_idx or table shape of an embedding: the AssertionError PyTorch's asserts raise, and a
    ValueError/RuntimeError as the rest of the bad input here."""


def _renorm_rows(weight, flat, max_norm, norm_type):
    """PyTorch's ``embedding_renorm_``: the rows looked up whose ``norm_type`` norm exceeds ``max_norm``
    are scaled in place to ``max_norm / (norm + 1e-7)`` of themselves."""
    xp = weight._xp
    with no_grad():
        rows = xp.unique(flat)
        w = weight._data[rows].astype(np.float64 if weight.dtype == backend.float64 else np.float32)
        norms = xp.linalg.norm(w, ord=norm_type, axis=1) if norm_type != 2 else xp.sqrt((w * w).sum(axis=1))
        scale = backend.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0).astype(w.dtype)
        weight._data[rows] = (w * scale[:, None]).astype(weight.dtype)
        weight._bump("embedding_renorm_")


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """Rows of ``weight`` (num_embeddings, embedding_dim) looked up by the int64/int32 ``input``, as
    ``torch.nn.functional.embedding``: the result has shape ``input.shape + (embedding_dim,)``. The
    ``padding_idx`` row gets no gradient; ``scale_grad_by_freq`` divides each row's gradient by its
    index's count in the batch; ``max_norm`` renormalizes the looked-up rows of ``weight`` in place.
    Indices out of range raise IndexError (on cuda at the next sync, as deferred checks do)."""
    return _embedding("embedding", input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)


def _embedding(op, input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse):
    """:func:`embedding`, its errors naming ``op`` (embedding_bag looks its rows up here)."""
    if not isinstance(input, Tensor) or not isinstance(weight, Tensor):
        raise InputTypeError(f"{op}: expected tensors for input and weight, got {type(input).__name__} and "
                             f"{type(weight).__name__}")
    if input.dtype not in (backend.int64, backend.int32):
        raise InputTypeError(f"{op}: expected integer indices (int64 or int32) as input, got dtype {input.dtype}")
    if weight.ndim != 2:
        raise InputError(f"{op}: weight must be 2-D (num_embeddings, embedding_dim), got shape "
                         f"{tuple(weight.shape)}")
    if max_norm is not None and not backend.is_floating(weight.dtype):  # (a lookup alone takes any dtype, as PyTorch)
        raise InputTypeError(f"{op}: max_norm needs a floating-point weight (its rows' norms), got dtype "
                             f"{weight.dtype}")
    if not _same_device(input._data, weight._data):
        raise RuntimeError(f"{op}: input is on {input.device} but weight is on {weight.device}")
    # sparse=True: the gradient comes dense (PyTorch's sparse one holds the same values; any optimizer takes it),
    # the rows it holds (those looked up) recorded beside the weight's .grad for SparseAdam (EmbeddingFn.sparse_rows)
    num = weight.shape[0]
    if padding_idx is not None:
        if not _is_int(padding_idx) or not -num <= padding_idx < num:
            raise EmbeddingArgumentError(f"{op}: padding_idx must be within num_embeddings ([{-num}, {num})), "
                                         f"got {padding_idx!r}")
        padding_idx = int(padding_idx) % num
    idx = _row_indices(op, input, num)
    if max_norm is not None:
        _renorm_rows(weight, idx.reshape(-1), float(max_norm), float(norm_type))
    return R.EmbeddingFn.apply(Tensor._from_array(idx), weight, padding_idx, bool(scale_grad_by_freq), bool(sparse))


def _row_indices(op, input, num):
    """The int64 array of ``input``'s indices into ``num`` rows, each checked to be in range."""
    idx = input._data
    if input.device.type == "cpu":
        bad = (idx < 0) | (idx >= num)
        if bad.any():
            i = int(np.flatnonzero(bad.reshape(-1))[0])
            raise backend.IndexInputError(f"{op}: index {int(idx.reshape(-1)[i])} at position {i} is out of "
                                          f"range [0, {num}) (num_embeddings={num})")
    elif idx.size:  # (an IndexError, as PyTorch's embedding; a RuntimeError too, as its embedding_bag)
        idx = checked_index(idx, num, False, lambda v, i: backend.IndexInputError(
            f"{op}: index {v} at position {i} is out of range [0, {num}) (num_embeddings={num})"))
    return idx if idx.dtype == backend.int64 else idx.astype(np.int64)


# ---------------------------------------------------------------- channel dropout
def _check_p(op, p):
    """PyTorch's check of a dropout probability (a bool passes, as there: True is 1)."""
    if not isinstance(p, numbers.Real):
        raise InputTypeError(f"{op}: dropout probability must be a number, got {type(p).__name__}")
    if not 0.0 <= p <= 1.0:
        raise InputError(f"{op}: dropout probability has to be between 0 and 1, but got {p!r}")


def _dropped_all(input, inplace):
    """p = 1: ``input * 0`` of any shape and dtype (integers too; inf and NaN give NaN), as PyTorch's."""
    return input.mul_(0) if inplace else input * 0


def _channel_dropout(op, input, p, training, inplace, lead=2):
    """Zero whole channels (indices into the ``lead`` leading dimensions), PyTorch's feature_dropout."""
    _check_tensor(op, input)
    _check_p(op, p)
    if not training or p == 0.0:  # the input itself, of any dtype, as PyTorch's
        return input
    if p == 1.0:
        return _dropped_all(input, inplace)
    if input.ndim < lead:
        raise InputError(f"{op}: Feature dropout requires at least 2 dimensions in the input, got shape "
                         f"{tuple(input.shape)}")
    if not backend.is_floating(input.dtype):
        raise InputTypeError(f"{op}: expected a floating-point input, got dtype {input.dtype}")
    return R.feature_dropout(input, float(p), bool(inplace), lead)


def _warn_channel_dropout_rank(op, ndim, spatial):
    """PyTorch's deprecation warning of dropout2d / dropout3d (``spatial`` dimensions) for an input of another rank,
    pointing at their caller."""
    warnings.warn(f"{op}: Received a {ndim}-D input to {op}, which is deprecated and will result in an error in a "
                  f"future release. To retain the behavior and silence this warning, please use dropout instead. Note "
                  f"that {op} exists to provide channel-wise dropout on inputs with {spatial} spatial dimensions, a "
                  f"channel dimension, and an optional batch dimension (i.e. {spatial + 1}D or {spatial + 2}D "
                  f"inputs).", stacklevel=3)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of a (N, C, H, W) input with probability ``p`` and scale the rest by
    ``1/(1-p)``, as ``torch.nn.functional.dropout2d``. A 3-D input is taken as (N, C, L) (PyTorch's
    historical behaviour, with its warning); other ranks with PyTorch's deprecation warning, channels in
    dimension 1 (at least 2 dimensions when something is dropped)."""
    op = "dropout2d"
    _check_tensor(op, input)
    _check_p(op, p)
    if input.ndim not in (3, 4):
        _warn_channel_dropout_rank(op, input.ndim, 2)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim; "
                      "use dropout1d for that", stacklevel=2)
    return _channel_dropout(op, input, p, training, inplace)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of a (N, C, L) or unbatched (C, L) input, as ``torch.nn.functional.dropout1d``."""
    op = "dropout1d"
    _check_tensor(op, input)
    _check_p(op, p)
    if input.ndim not in (2, 3):
        raise InputError(f"{op}: expected a 2-D (C, L) or 3-D (N, C, L) input, got shape {tuple(input.shape)}")
    return _channel_dropout(op, input, p, training, inplace, lead=input.ndim - 1)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of a (N, C, D, H, W) or unbatched (C, D, H, W) input, as
    ``torch.nn.functional.dropout3d``. Other ranks come with PyTorch's deprecation warning and are taken as
    unbatched, as there (channels in dimension 0)."""
    op = "dropout3d"
    _check_tensor(op, input)
    _check_p(op, p)
    if input.ndim not in (4, 5):
        _warn_channel_dropout_rank(op, input.ndim, 3)
    return _channel_dropout(op, input, p, training, inplace, lead=2 if input.ndim == 5 else 1)


def _alpha(op, input, p, training, inplace, lead):
    _check_tensor(op, input)
    _check_p(op, p)
    if not training or p == 0.0 or input.numel() == 0:  # the input itself, of any dtype, as PyTorch's
        return input
    if p == 1.0:
        return _dropped_all(input, inplace)
    if lead is not None and input.ndim < 2:
        raise InputError(f"{op}: Feature dropout requires at least 2 dimensions in the input, got shape "
                         f"{tuple(input.shape)}")
    if not backend.is_floating(input.dtype):
        raise InputTypeError(f"{op}: expected a floating-point input, got dtype {input.dtype}")
    out = R.alpha_dropout(input, float(p), lead)
    return input.copy_(out) if inplace else out  # (in place: written over the input, as PyTorch's)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout for SELU networks, as ``torch.nn.functional.alpha_dropout`` (``training=False``
    by default, as there): dropped elements take SELU's negative saturation value and an affine map
    keeps the input's mean and variance."""
    return _alpha("alpha_dropout", input, p, training, inplace, None)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """:func:`alpha_dropout` of whole channels (dimension 1), as ``torch.nn.functional.feature_alpha_dropout``."""
    return _alpha("feature_alpha_dropout", input, p, training, inplace, 2)
