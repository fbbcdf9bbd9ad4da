"""``bilinear`` and ``embedding_bag`` as ``torch.nn.functional``'s, composed from recorded ops (a GEMM and a
product for ``bilinear``; gathers and per-bag sums for ``embedding_bag``), so autograd and both devices come
with them."""
from __future__ import annotations

import numbers as _numbers
import warnings as _warnings

import numpy as _np

from .. import backend as _backend
from ..ops import index_add as _index_add
from ..ops import matmul as _matmul
from ..ops import where as _where
from ..ops._common import autocast_off as _autocast_off, autocast_promote as _autocast_promote
from ..ops.shape import permute as _permute
from ..ops.shape import reshape as _reshape
from ..tensor import Tensor as _Tensor
from ..backend import InputError, InputTypeError

__all__ = ["bilinear", "embedding_bag"]

_TORCH_DTYPE_NAMES = {"float32": "float", "float64": "double", "float16": "half", "bfloat16": "bfloat16"}


def _dtype_name(t):
    name = t._data.dtype.name
    return _TORCH_DTYPE_NAMES.get(name, name)


def bilinear(input1, input2, weight, bias=None):
    """``y[..., o] = sum_ij input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o]``, as
    ``torch.nn.functional.bilinear``: inputs (..., in1) and (..., in2) of one batch shape, weight
    (out, in1, in2), bias (out,) or None. One GEMM against weight laid out (in1, out * in2), then a product
    with input2 summed over in2."""
    op = "bilinear"
    # inside a cuda autocast region the wider of the dtypes (PyTorch's promote list), computed in it
    input1, input2, weight, bias = _autocast_promote(input1, input2, weight, bias, devices=("cuda",))
    for name, t in (("input1", input1), ("input2", input2), ("weight", weight)):
        if not isinstance(t, _Tensor):
            raise InputTypeError(f"{op}(): expected a tensor for {name}, got {type(t).__name__}")
    if bias is not None and not isinstance(bias, _Tensor):
        raise InputTypeError(f"{op}(): bias must be a tensor or None, got {type(bias).__name__}")
    if weight.ndim != 3:
        raise RuntimeError(f"{op}(): weight must be 3-D (out_features, in1_features, in2_features), got shape "
                           f"{tuple(weight.shape)}")
    if input1.ndim != input2.ndim:
        raise RuntimeError(f"{op}(): input dimensions do not match: got {input1.ndim} and {input2.ndim}")
    if input1.ndim == 0:
        raise RuntimeError(f"{op}(): expected inputs with a feature dimension, got 0-d tensors")
    for d in range(input1.ndim - 1):
        if input1.shape[d] != input2.shape[d]:
            raise RuntimeError(f"{op}(): input batch dimensions do not match at dim {d}: got {input1.shape[d]} and "
                               f"{input2.shape[d]}")
    out, in1, in2 = weight.shape
    for k, (x, n) in enumerate(((input1, in1), (input2, in2)), 1):
        if x.shape[-1] != n:
            raise RuntimeError(f"{op}(): input{k} size does not match weight size: got {x.shape[-1]} but expected "
                               f"{n}")
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != out):
        raise RuntimeError(f"{op}(): bias size does not match weight size: got "
                           f"{bias.shape[0] if bias.ndim == 1 else tuple(bias.shape)} but expected {out}")
    tensors = [input1, input2, weight] + ([bias] if bias is not None else [])
    if len({t.dtype for t in tensors}) != 1:
        names = ["input1", "input2", "weight", "bias"]
        got = ", ".join(f"{n}: {_dtype_name(t)}" for n, t in zip(names, tensors))
        raise RuntimeError(f"{op}(): All tensors must have the same dtype, got {got}")
    if not _backend.is_floating(weight.dtype):
        raise InputTypeError(f"{op}(): expected floating-point tensors, got dtype {weight.dtype}")
    if len({t.device for t in tensors}) != 1:
        raise RuntimeError(f"{op}(): expected all tensors on one device, got "
                           f"{', '.join(str(t.device) for t in tensors)}")
    lead = tuple(input1.shape[:-1])
    w = _reshape(_permute(weight, (1, 0, 2)), in1, out * in2)  # (in1, out * in2): one GEMM for every o
    with _autocast_off():  # (one op in PyTorch, in its inputs' dtype: no lower-precision GEMM inside)
        t = _reshape(_matmul(_reshape(input1, -1, in1), w), -1, out, in2)
        y = (t * _reshape(input2, -1, 1, in2)).sum(-1)
    if bias is not None:
        y = y + bias
    return _reshape(y, *lead, out)


_BAG_MODES = ("sum", "mean", "max")


def _index_dtype(what, t):
    if t.dtype not in (_backend.int64, _backend.int32):
        raise RuntimeError(f"embedding_bag: expected {what} of dtype int64 or int32 (Long, Int), got {t.dtype}")


def _bags(input, offsets, include_last_offset):
    """(the flat indices, the bag count, each entry's bag as a host int64 array, or -1 for entries past the
    last bag's end). The offsets are read on the host (a small copy), as PyTorch checks them there too."""
    op = "embedding_bag"
    if input.ndim == 2:
        if offsets is not None:
            raise InputError(f"{op}: if input is 2D, then offsets has to be None, as input is treated is a "
                             f"mini-batch of fixed length sequences. However, found offsets of type "
                             f"{type(offsets).__name__}")
        b, length = input.shape
        return _reshape(input, -1), b, _np.repeat(_np.arange(b), length)
    if input.ndim != 1:
        raise InputError(f"{op}: input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if not isinstance(offsets, _Tensor) or offsets.ndim != 1:
        got = "None" if offsets is None else f"shape {tuple(offsets.shape)}" if isinstance(offsets, _Tensor) \
            else type(offsets).__name__
        raise InputError(f"{op}: offsets has to be a 1D Tensor but got {got}")
    _index_dtype("offsets", offsets)
    starts = _np.asarray(offsets.tolist(), dtype=_np.int64)
    k = input.shape[0]
    if starts.size and starts[0] != 0:
        raise RuntimeError(f"{op}: offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start "
                           f"from position 0. However, got {int(starts[0])}")
    if starts.size and starts[-1] > k:
        raise RuntimeError(f"{op}: offsets[-1] can not be greater than input's length {k} but got offsets[-1] of "
                           f"{int(starts[-1])}")
    if (_np.diff(starts) < 0).any():
        raise RuntimeError(f"{op}: offsets must be non-decreasing, got {starts.tolist()}")
    if include_last_offset:  # CSR: bag i is [offsets[i], offsets[i + 1]); entries past offsets[-1] are in none
        starts, ends = starts[:-1], starts[1:]
    else:
        ends = _np.append(starts[1:], k)
    bag = _np.full(k, -1, _np.int64)
    for i, (lo, hi) in enumerate(zip(starts, ends)):
        bag[lo:hi] = i
    return input, len(starts), bag


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """The sums, means or maxima of bags of embeddings, as ``torch.nn.functional.embedding_bag``: one lookup of
    every entry, then an ``index_add`` into its bag (a padded gather and a max for 'max'). A 2-D ``input`` holds
    one bag per row; a 1-D one is cut into bags at ``offsets`` (``include_last_offset``: one offset more than
    there are bags, the end of the last one, as CSR row pointers). ``per_sample_weights`` (mode
    'sum') scale each entry; ``padding_idx`` entries are left out (of the means' counts too); an empty bag gives
    zeros. ``max_norm``, ``norm_type`` and ``scale_grad_by_freq`` as :func:`embedding`."""
    from .layers import _embedding

    op = "embedding_bag"
    if not isinstance(input, _Tensor) or not isinstance(weight, _Tensor):
        raise InputTypeError(f"{op}: expected tensors for input and weight, got {type(input).__name__} and "
                             f"{type(weight).__name__}")
    if weight.dtype == _backend.int64 and _backend.is_floating(input.dtype):  # (the old order, still taken)
        _warnings.warn("Argument order of nn.functional.embedding_bag was changed. Usage `embedding_bag(weight, "
                       "input, ...)` is deprecated, and should now be `embedding_bag(input, weight, ...)`.",
                       stacklevel=2)
        input, weight = weight, input
    if mode not in _BAG_MODES:
        raise InputError(f"{op}: mode has to be one of sum, mean or max, got {mode!r}")
    if mode == "max" and scale_grad_by_freq:
        raise InputError(f"{op}: max mode does not support scaling the gradient by the frequency")
    if mode == "max" and sparse:
        raise InputError(f"{op}: max mode does not support sparse weights")
    _index_dtype("input indices", input)
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"{op}: per_sample_weights was not None. per_sample_weights is only supported "
                                      f"for mode='sum' (got mode='{mode}')")
        if not isinstance(per_sample_weights, _Tensor) or tuple(per_sample_weights.shape) != tuple(input.shape):
            got = tuple(per_sample_weights.shape) if isinstance(per_sample_weights, _Tensor) else \
                type(per_sample_weights).__name__
            raise InputError(f"{op}: If per_sample_weights ({got}) is not None, then it must have the same shape as "
                             f"the input ({tuple(input.shape)})")
        if per_sample_weights.dtype != weight.dtype:
            raise RuntimeError(f"{op}: per_sample_weights must have the weight's dtype, got {per_sample_weights.dtype} "
                               f"and {weight.dtype}")
    if weight.ndim != 2:
        raise InputError(f"{op}: weight must be 2-D (num_embeddings, embedding_dim), got shape {tuple(weight.shape)}")
    num = weight.shape[0]
    if padding_idx is not None:
        if isinstance(padding_idx, bool) or not isinstance(padding_idx, _numbers.Integral) \
                or not -num <= padding_idx < num:
            raise RuntimeError(f"{op}: padding_idx must be within the number of embeddings, {-num} through "
                               f"{num - 1}, but got {padding_idx}")
        padding_idx = int(padding_idx) % num
    flat, nbags, bag = _bags(input, offsets, include_last_offset)
    # (the padding entries' gradient is zero by the bag's mask, not the lookup's; given to the lookup too, the
    # padding row is none of a sparse gradient's rows, as PyTorch's)
    rows = _embedding(op, flat, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)  # (K, D)
    xp = _backend.array_module(rows._data)
    keep = bag >= 0  # (host) the entries inside a bag, not padding
    if padding_idx is not None:
        keep &= _np.asarray(flat.tolist(), dtype=_np.int64).reshape(-1) != padding_idx
    dim = weight.shape[1]
    if mode == "max":
        return _bag_max(rows, bag, keep, nbags, dim, xp)
    scale = _Tensor._from_array(xp.asarray(keep.astype(_np.dtype(rows.dtype))))
    if per_sample_weights is not None:
        scale = scale * _reshape(per_sample_weights, -1).to(rows.dtype)
    into = _Tensor._from_array(xp.asarray(_np.where(keep, bag, 0)))
    out = _index_add(rows.new_zeros((nbags, dim)), 0, into, rows * _reshape(scale, -1, 1))
    if mode == "mean":
        counts = _np.bincount(bag[keep], minlength=nbags).astype(_np.dtype(rows.dtype))
        out = out / _Tensor._from_array(xp.asarray(_np.maximum(counts, 1).reshape(-1, 1)))
    return out


def _bag_max(rows, bag, keep, nbags, dim, xp):
    """Each bag's elementwise maximum: the kept rows gathered into a dense (bags, longest, D) block, the gaps
    -inf, reduced over the bag; an empty bag gives zeros."""
    counts = _np.bincount(bag[keep], minlength=nbags)
    longest = max(int(counts.max()) if nbags else 0, 1)
    pos = _np.zeros((nbags, longest), _np.int64)  # the entry of each (bag, slot); slot gaps point at entry 0
    filled = _np.arange(longest)[None, :] < counts[:, None]
    entries = _np.flatnonzero(keep)
    pos[filled] = entries[_np.argsort(bag[entries], kind="stable")]
    if rows.shape[0] == 0:  # zeros, still of the weight's graph (its gradient zeros), as PyTorch's
        return _index_add(rows.new_zeros((nbags, dim)), 0, _Tensor._from_array(xp.zeros(0, _np.int64)), rows)
    dense = rows[_Tensor._from_array(xp.asarray(pos))]  # (bags, longest, D)
    gap = _Tensor._from_array(xp.asarray(~filled)).reshape(nbags, longest, 1)
    best = _where(gap, float("-inf"), dense).max(1).values
    empty = _Tensor._from_array(xp.asarray(counts == 0)).reshape(nbags, 1)
    return _where(empty, 0.0, best)
