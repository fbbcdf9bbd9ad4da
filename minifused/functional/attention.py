"""``scaled_dot_product_attention`` and ``multi_head_attention_forward`` as ``torch.nn.functional``'s, composed from
recorded ops (matmuls, softmax, where, dropout), so autograd and both devices come with them. No fused kernel: the
(L, S) score matrix of every head is materialized, as in PyTorch's math backend.

Masks follow PyTorch's two conventions: ``scaled_dot_product_attention`` takes a bool mask whose True entries *take
part* (or a float mask that is added); ``multi_head_attention_forward`` takes bool masks whose True entries are
*left out* (``_canonical_mask`` turns them into additive -inf masks)."""
from __future__ import annotations

import math as _math
import warnings as _warnings

import numpy as _np

from .. import backend as _backend
from .. import backends as _backends
from ..ops import cast as _cast
from ..ops import cat as _cat
from ..ops import chunk as _chunk
from ..ops import matmul as _matmul
from ..ops import repeat_interleave as _repeat_interleave
from ..ops import where as _where
from ..ops._common import autocast_lower as _autocast_lower
from ..ops.shape import reshape as _reshape
from ..ops.shape import transpose as _transpose
from ..tensor import Tensor as _Tensor
from ..backend import InputError, InputTypeError

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]

_NEG_INF = float("-inf")


# ---- scaled dot-product attention


def _check_qkv(op, query, key, value, enable_gqa):
    """The batch shape the three broadcast to (heads at dim -3 repeated for GQA); raises naming what is wrong."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, _Tensor):
            raise InputTypeError(f"{op}: argument '{name}' must be a Tensor, not {type(t).__name__}")
    shapes = f"query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
    if min(query.ndim, key.ndim, value.ndim) < 2:
        raise InputError(f"{op}: expected query (..., L, E), key (..., S, E) and value (..., S, Ev) of at least "
                         f"2 dimensions, got {shapes}")
    if not query.dtype == key.dtype == value.dtype:
        raise InputTypeError(f"{op}: expected query, key and value of one dtype, got {query.dtype}, {key.dtype} "
                             f"and {value.dtype}")
    if not _backend.is_floating(query.dtype):
        raise InputTypeError(f"{op}: expected floating-point query, key and value, got dtype {query.dtype}")
    if not query.device == key.device == value.device:
        raise RuntimeError(f"{op}: expected query, key and value on one device, got {query.device}, {key.device} "
                           f"and {value.device}")
    if query.shape[-1] != key.shape[-1]:
        raise InputError(f"{op}: query and key must have the same embedding size E (last dimension), got {shapes}")
    if key.shape[-2] != value.shape[-2]:
        raise InputError(f"{op}: key and value must have the same sequence length S (dimension -2), got {shapes}")
    batch = [tuple(t.shape[:-2]) for t in (query, key, value)]
    if enable_gqa and query.ndim >= 3:
        hq = query.shape[-3]
        for t in (key, value):
            h = t.shape[-3] if t.ndim >= 3 else 1
            if h == 0 or hq % h:
                raise InputError(f"{op}: with enable_gqa=True the number of heads (dimension -3) of key and value "
                                 f"must divide that of query, got {shapes}")
        batch = [batch[0]] + [b[:-1] + (hq,) if b else b for b in batch[1:]]
    try:
        return _np.broadcast_shapes(*batch)
    except ValueError:
        raise InputError(f"{op}: the batch dimensions (all but the last two) of query, key and value must "
                         f"broadcast, got {shapes}") from None


def _check_mask(op, attn_mask, query, scores_shape):
    if not isinstance(attn_mask, _Tensor):
        raise InputTypeError(f"{op}: attn_mask must be a Tensor or None, got {type(attn_mask).__name__}")
    dt = attn_mask.dtype
    if dt != _backend.bool_ and dt != query.dtype and dt != _backend.float32:
        raise InputTypeError(f"{op}: expected attn_mask of dtype bool, float32 or the query's ({query.dtype}), "
                             f"got {dt}")
    if attn_mask.device != query.device:
        raise RuntimeError(f"{op}: attn_mask is on {attn_mask.device} but query is on {query.device}")
    try:
        fits = _np.broadcast_shapes(tuple(attn_mask.shape), scores_shape) == scores_shape
    except ValueError:
        fits = False
    if not fits:
        raise InputError(f"{op}: attn_mask of shape {tuple(attn_mask.shape)} does not broadcast to the attention "
                         f"scores' shape (..., L, S) = {scores_shape}")


def _mask_bias(attn_mask, query):
    """(an additive mask in the query's dtype, the rows no key may be attended from, or None). A row with no key
    left gets a 0 bias here and a 0 output after the softmax (PyTorch's safe softmax), so neither the forward
    nor the backward sees the NaN of a softmax over -inf only."""
    if attn_mask.dtype == _backend.bool_:
        dead = ~attn_mask.any(-1, keepdim=True)
        return query.new_zeros(tuple(attn_mask.shape)).masked_fill(~(attn_mask | dead), _NEG_INF), dead
    mask = attn_mask if attn_mask.dtype == query.dtype else _cast(attn_mask, query.dtype)
    dead = (mask == _NEG_INF).all(-1, keepdim=True)
    return _where(dead, 0.0, mask), dead


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """``softmax(query @ key^T * scale + mask) @ value`` as ``torch.nn.functional.scaled_dot_product_attention``.

    query (..., L, E), key (..., S, E), value (..., S, Ev), batch dimensions broadcast; the result is
    (..., L, Ev). ``attn_mask`` broadcasts to (..., L, S): bool (True = may be attended) or float (added).
    ``is_causal`` masks key j > query i (the top-left aligned lower triangle, also where L != S) and excludes
    ``attn_mask``. ``scale`` defaults to 1/sqrt(E). A query row that may attend no key gives zeros (PyTorch
    2.x's math backend). ``dropout_p`` drops attention weights (always: the function has no training flag).
    ``enable_gqa``: key and value may have fewer heads (dimension -3) than query, each repeated to match.
    """
    op = "scaled_dot_product_attention"
    batch = _check_qkv(op, query, key, value, enable_gqa)
    if attn_mask is not None and is_causal:
        raise InputError(f"{op}: explicit attn_mask should not be set when is_causal=True")
    if _backend.autocast_dtypes():
        query, key, value = _autocast_lower(query, key, value)
    if dropout_p > 1.0:
        raise InputError(f"{op}: dropout probability has to be between 0 and 1, but got {dropout_p}")
    L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
    if attn_mask is not None:
        _check_mask(op, attn_mask, query, tuple(batch) + (L, S))
    _backends.check_sdp_backends(query, key, value, attn_mask, dropout_p, enable_gqa)  # sdpa_kernel's choice
    if enable_gqa and query.ndim >= 3:
        hq = query.shape[-3]
        key, value = (t if t.ndim < 3 or t.shape[-3] == hq else _repeat_interleave(t, hq // t.shape[-3], dim=-3)
                      for t in (key, value))
    scale = 1.0 / _math.sqrt(E) if scale is None else float(scale)
    if query.dtype in (_backend.float16, _backend.bfloat16):
        # scores and softmax in float32, as PyTorch's: float16 scores past 65504 would be inf and the softmax NaN
        query, key = _cast(query, _backend.float32), _cast(key, _backend.float32)
    scores = _matmul(query * scale, _transpose(key, -2, -1))
    dead = None
    if is_causal:  # key j > query i left out: every row keeps key 0, so no row is empty
        scores = scores.masked_fill(query.new_ones((L, S), dtype=_backend.bool_).triu(1), _NEG_INF)
    elif attn_mask is not None:
        bias, dead = _mask_bias(attn_mask, query)
        scores = scores + bias
    from . import dropout, softmax

    weights = softmax(scores, -1)
    if weights.dtype != value.dtype:  # (16-bit inputs: the weights rounded once, to the value's dtype)
        weights = _cast(weights, value.dtype)
    if dead is not None:
        weights = _where(dead, 0.0, weights)
    if dropout_p > 0.0:
        weights = dropout(weights, float(dropout_p), True)
    return _matmul(weights, value)


# ---- multi-head attention


def _none_or_dtype(mask):
    return None if mask is None else mask.dtype


def _canonical_mask(mask, mask_name, other_type, other_name, target_type, check_other=True,
                    op="multi_head_attention_forward"):
    """PyTorch's ``F._canonical_mask``: a bool mask (True = left out) as an additive float mask of
    ``target_type`` (-inf where True, 0 elsewhere); a float mask as it is; None stays None. ``op`` names the
    caller in errors."""
    if mask is None:
        return None
    if not isinstance(mask, _Tensor):
        raise InputTypeError(f"{op}: {mask_name} must be a Tensor or None, got {type(mask).__name__}")
    is_float = _backend.is_floating(mask.dtype)
    if mask.dtype != _backend.bool_ and not is_float:
        raise InputTypeError(f"{op}: only bool and floating types of {mask_name} are supported, got {mask.dtype}")
    if check_other and other_type is not None and mask.dtype != other_type:
        _warnings.warn(f"Support for mismatched {mask_name} and {other_name} is deprecated. Use same type for both "
                       f"instead.", stacklevel=3)
    if not is_float:
        mask = mask.new_zeros(tuple(mask.shape), dtype=target_type).masked_fill(mask, _NEG_INF)
    return mask


def _mha_shape_check(op, query, key, value, key_padding_mask, attn_mask, num_heads):
    """Whether the input is batched (3-D query); PyTorch's shape rules, raised as InputError."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, _Tensor):
            raise InputTypeError(f"{op}: argument '{name}' must be a Tensor, not {type(t).__name__}")
    if query.ndim not in (2, 3):
        raise InputError(f"{op}: query should be unbatched 2D or batched 3D tensor but received {query.ndim}-D "
                         f"query tensor")
    batched = query.ndim == 3
    kind = "batched (3-D)" if batched else "unbatched (2-D)"
    if key.ndim != query.ndim or value.ndim != query.ndim:
        raise InputError(f"{op}: for {kind} `query`, expected `key` and `value` to be {query.ndim}-D but found "
                         f"{key.ndim}-D and {value.ndim}-D tensors respectively")
    if key_padding_mask is not None and key_padding_mask.ndim != query.ndim - 1:
        raise InputError(f"{op}: for {kind} `query`, expected `key_padding_mask` to be `None` or "
                         f"{query.ndim - 1}-D but found {key_padding_mask.ndim}-D tensor instead")
    if attn_mask is not None:
        if attn_mask.ndim not in (2, 3):
            raise InputError(f"{op}: for {kind} `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found "
                             f"{attn_mask.ndim}-D tensor instead")
        expected = (num_heads, query.shape[0], key.shape[0])
        if not batched and attn_mask.ndim == 3 and tuple(attn_mask.shape) != expected:
            raise InputError(f"{op}: expected `attn_mask` shape to be {expected} but got {tuple(attn_mask.shape)}")
    return batched


def _in_projection(query, key, value, in_proj_weight, in_proj_bias, separate):
    """q, k, v projected: one GEMM for self-attention (q is k is v), two for k is v, else three."""
    from . import linear

    E = query.shape[-1]
    if separate is not None:
        wq, wk, wv = separate
        for name, w, shape in (("q_proj_weight", wq, (E, E)), ("k_proj_weight", wk, (E, key.shape[-1])),
                               ("v_proj_weight", wv, (E, value.shape[-1]))):
            if not isinstance(w, _Tensor):
                raise InputError(f"multi_head_attention_forward: use_separate_proj_weight is True but {name} is "
                                 f"{type(w).__name__}")
            if tuple(w.shape) != shape:
                raise InputError(f"multi_head_attention_forward: expecting {name} of shape {shape}, but got "
                                 f"{tuple(w.shape)}")
        bq, bk, bv = (None,) * 3 if in_proj_bias is None else _chunk(in_proj_bias, 3)
        return linear(query, wq, bq), linear(key, wk, bk), linear(value, wv, bv)
    if in_proj_weight is None:
        raise InputError("multi_head_attention_forward: use_separate_proj_weight is False but in_proj_weight is None")
    if key is value and query is key:
        proj = linear(query, in_proj_weight, in_proj_bias)
        return proj[..., :E], proj[..., E:2 * E], proj[..., 2 * E:]
    if key is value:
        b = (None, None) if in_proj_bias is None else (in_proj_bias[:E], in_proj_bias[E:])
        kv = linear(key, in_proj_weight[E:], b[1])
        return linear(query, in_proj_weight[:E], b[0]), kv[..., :E], kv[..., E:]
    ws = _chunk(in_proj_weight, 3)
    bs = (None,) * 3 if in_proj_bias is None else _chunk(in_proj_bias, 3)
    return tuple(linear(x, w, b) for x, w, b in zip((query, key, value), ws, bs))


def _prepare_attn_mask(op, attn_mask, tgt_len, src_len, bsz, num_heads):
    if attn_mask.ndim == 2:
        if tuple(attn_mask.shape) != (tgt_len, src_len):
            raise InputError(f"{op}: the shape of the 2D attn_mask is {tuple(attn_mask.shape)}, but should be "
                             f"{(tgt_len, src_len)}.")
        return attn_mask.unsqueeze(0)
    if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
        raise InputError(f"{op}: the shape of the 3D attn_mask is {tuple(attn_mask.shape)}, but should be "
                         f"{(bsz * num_heads, tgt_len, src_len)}.")
    return attn_mask


def _as_dtype(mask, dtype):
    return mask if mask.dtype == dtype else _cast(mask, dtype)


def _pad_key(mask):
    """A mask with one more key position (a column of zeros: that key may be attended)."""
    return None if mask is None else _cat([mask, mask.new_zeros(tuple(mask.shape[:-1]) + (1,))], -1)


def _static(op, name, static, bsz, num_heads, head_dim):
    if static.shape[0] != bsz * num_heads or static.shape[2] != head_dim:
        raise InputError(f"{op}: expecting {name} of shape ({bsz * num_heads}, S, {head_dim}), but got "
                         f"{tuple(static.shape)}")
    return static


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """``torch.nn.functional.multi_head_attention_forward``: sequence-first query (L, N, E), key (S, N, Ek), value
    (S, N, Ev), or unbatched (L, E), (S, Ek), (S, Ev). Returns (output (L, N, E), weights) where the weights are
    (N, L, S) averaged over the heads, (N, num_heads, L, S) with ``average_attn_weights=False``, or None when
    ``need_weights=False`` (then the attention runs through :func:`scaled_dot_product_attention`, whose rows with
    no key left give 0; with ``need_weights=True`` such rows give NaN, both as in PyTorch). Bool masks: True = left
    out; ``attn_mask`` (L, S) or (N * num_heads, L, S), ``key_padding_mask`` (N, S)."""
    from . import dropout, linear, softmax

    op = "multi_head_attention_forward"
    batched = _mha_shape_check(op, query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:  # a batch of one, squeezed again at the end; self-attention stays recognizable
        q1 = query.unsqueeze(1)
        k1 = q1 if key is query else key.unsqueeze(1)
        value = k1 if value is key else q1 if value is query else value.unsqueeze(1)
        query, key = q1, k1
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", _none_or_dtype(attn_mask), "attn_mask",
                                       query.dtype)
    if is_causal and attn_mask is None:
        raise InputError(f"{op}: need attn_mask if specifying the is_causal hint. You may use the Transformer "
                         f"module method `generate_square_subsequent_mask` to create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # the hint stands for the mask: SDPA builds the causal one itself
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, check_other=False)
        if key_padding_mask is not None:
            is_causal = False  # merged with the padding, the mask is no longer causal
    if embed_dim != embed_dim_to_check:
        raise InputError(f"{op}: was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise InputError(f"{op}: embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise InputError(f"{op}: key's sequence and batch dims {tuple(key.shape[:2])} do not match value's "
                             f"{tuple(value.shape[:2])}")
    elif tuple(key.shape) != tuple(value.shape):
        raise InputError(f"{op}: key shape {tuple(key.shape)} does not match value shape {tuple(value.shape)}")
    if key.ndim != 3 or key.shape[1] != bsz:
        raise InputError(f"{op}: key of shape {tuple(key.shape)} does not fit the query's batch: expected "
                         f"(source length, {bsz}, embed dim) for query of shape {tuple(query.shape)}")
    separate = (q_proj_weight, k_proj_weight, v_proj_weight) if use_separate_proj_weight else None
    q, k, v = _in_projection(query, key, value, in_proj_weight, in_proj_bias, separate)
    if attn_mask is not None:
        attn_mask = _prepare_attn_mask(op, _as_dtype(attn_mask, query.dtype), tgt_len, src_len, bsz, num_heads)
    if (bias_k is None) != (bias_v is None):
        raise InputError(f"{op}: bias_k and bias_v must be given together, got "
                         f"{'bias_k' if bias_v is None else 'bias_v'} only")
    if bias_k is not None:
        if static_k is not None or static_v is not None:
            raise InputError(f"{op}: bias cannot be added to static key or value")
        k = _cat([k, bias_k.expand(1, bsz, embed_dim)])
        v = _cat([v, bias_v.expand(1, bsz, embed_dim)])
        attn_mask, key_padding_mask = _pad_key(attn_mask), _pad_key(key_padding_mask)
    q = _transpose(_reshape(q, tgt_len, bsz * num_heads, head_dim), 0, 1)
    k = (_transpose(_reshape(k, k.shape[0], bsz * num_heads, head_dim), 0, 1) if static_k is None
         else _static(op, "static_k", static_k, bsz, num_heads, head_dim))
    v = (_transpose(_reshape(v, v.shape[0], bsz * num_heads, head_dim), 0, 1) if static_v is None
         else _static(op, "static_v", static_v, bsz, num_heads, head_dim))
    if add_zero_attn:
        k = _cat([k, k.new_zeros((bsz * num_heads, 1, head_dim))], 1)
        v = _cat([v, v.new_zeros((bsz * num_heads, 1, head_dim))], 1)
        attn_mask, key_padding_mask = _pad_key(attn_mask), _pad_key(key_padding_mask)
    src_len = k.shape[1]
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise InputError(f"{op}: expected key_padding_mask of shape {(bsz, src_len)} (batch, source length), "
                             f"got {tuple(key_padding_mask.shape)}")
        key_padding_mask = _as_dtype(key_padding_mask, query.dtype)
        kpm = _reshape(key_padding_mask.reshape(bsz, 1, 1, src_len).expand(bsz, num_heads, 1, src_len),
                       bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if not training:
        dropout_p = 0.0
    if need_weights:
        weights = _matmul(q * _math.sqrt(1.0 / float(head_dim)), _transpose(k, -2, -1))
        if attn_mask is not None:
            weights = weights + attn_mask
        weights = softmax(weights, -1)
        if dropout_p > 0.0:
            weights = dropout(weights, p=dropout_p)
        out = _reshape(_transpose(_matmul(weights, v), 0, 1), tgt_len * bsz, embed_dim)
        out = _reshape(linear(out, out_proj_weight, out_proj_bias), tgt_len, bsz, out_proj_weight.shape[0])
        weights = _reshape(weights, bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(1)
        return (out, weights) if batched else (out.squeeze(1), weights.squeeze(0))
    if attn_mask is not None:
        attn_mask = (attn_mask.unsqueeze(0) if attn_mask.shape[0] == 1
                     else _reshape(attn_mask, bsz, num_heads, -1, src_len))
    q, k, v = (_reshape(t, bsz, num_heads, t.shape[1], head_dim) for t in (q, k, v))
    out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = _reshape(out.permute(2, 0, 1, 3), bsz * tgt_len, embed_dim)
    out = _reshape(linear(out, out_proj_weight, out_proj_bias), tgt_len, bsz, out_proj_weight.shape[0])
    return (out if batched else out.squeeze(1)), None
