"""``MultiheadAttention`` and the Transformer layers (``TransformerEncoderLayer``, ``TransformerDecoderLayer``,
``TransformerEncoder``, ``TransformerDecoder``, ``Transformer``) with PyTorch's signatures, structure, parameter
names, shapes and initialization, so state dicts load across. The attention runs through
``F.multi_head_attention_forward`` (ops composed, autograd derives the backward); the feed-forward block runs
its ReLU in ``linear1``'s GEMM epilog."""
from __future__ import annotations

import copy
import math
import numbers
import warnings

from .. import backend, ops
from .. import functional as F
from ..autograd import is_grad_enabled
from ..tensor import Tensor
from . import init
from .basic import GELU, ReLU
from .container import ModuleList, runs_own_forward
from .dropout import Dropout
from .linear import Linear
from .module import Module, Parameter, runs_hooks
from .norm import LayerNorm
from ..backend import InputError, InputTypeError

__all__ = ["MultiheadAttention", "Transformer", "TransformerEncoder", "TransformerDecoder",
           "TransformerEncoderLayer", "TransformerDecoderLayer"]


class NonDynamicallyQuantizableLinear(Linear):
    """A ``Linear``: PyTorch's class of ``MultiheadAttention.out_proj`` (the name only keeps dynamic quantization
    off it), kept so the module prints as PyTorch's."""


class MultiheadAttention(Module):
    """Attention over ``num_heads`` heads of ``embed_dim // num_heads`` features each (PyTorch's module).

    Parameters as PyTorch's: ``in_proj_weight`` (3E, E) when key and value have ``embed_dim`` features, else
    ``q_proj_weight`` (E, E), ``k_proj_weight`` (E, kdim), ``v_proj_weight`` (E, vdim); ``in_proj_bias`` (3E,),
    ``out_proj`` a Linear (E, E); ``bias_k``, ``bias_v`` (1, 1, E) with ``add_bias_kv``. The projections are
    xavier-uniform, the biases zero, ``bias_k``/``bias_v`` xavier-normal. Inputs are sequence-first (L, N, E),
    batch-first (N, L, E) with ``batch_first``, or unbatched (L, E); ``forward`` returns (output, weights)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        for name, v in (("embed_dim", embed_dim), ("num_heads", num_heads)):
            if not isinstance(v, numbers.Integral) or isinstance(v, bool):
                raise InputTypeError(f"MultiheadAttention: {name} must be an int, got {v!r}")
        if embed_dim <= 0 or num_heads <= 0:
            raise InputError(f"MultiheadAttention: embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        if embed_dim % num_heads:
            raise InputError(f"MultiheadAttention: embed_dim must be divisible by num_heads, got embed_dim="
                             f"{embed_dim} and num_heads={num_heads}")
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads, self.dropout, self.batch_first = num_heads, dropout, batch_first
        self.head_dim = embed_dim // num_heads
        dev = backend.device(device)
        dtype = backend.get_default_dtype() if dtype is None else backend.as_dtype(dtype)
        xp = backend.xp(dev)
        with backend.on_device(dev):
            def empty(*shape):
                return Parameter(xp.empty(shape, dtype=dtype))

            if not self._qkv_same_embed_dim:
                self.q_proj_weight = empty(embed_dim, embed_dim)
                self.k_proj_weight = empty(embed_dim, self.kdim)
                self.v_proj_weight = empty(embed_dim, self.vdim)
                self.register_parameter("in_proj_weight", None)
            else:
                self.in_proj_weight = empty(3 * embed_dim, embed_dim)
                for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                    self.register_parameter(name, None)
            if bias:
                self.in_proj_bias = empty(3 * embed_dim)
            else:
                self.register_parameter("in_proj_bias", None)
            self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, device=dev, dtype=dtype)
            if add_bias_kv:
                self.bias_k, self.bias_v = empty(1, 1, embed_dim), empty(1, 1, embed_dim)
            else:
                self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        for b in (self.bias_k, self.bias_v):
            if b is not None:
                init.xavier_normal_(b)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        """(output, weights): output shaped as ``query``; weights (N, L, S) averaged over the heads, (N,
        num_heads, L, S) with ``average_attn_weights=False``, None with ``need_weights=False``. Bool masks:
        True = left out; ``key_padding_mask`` (N, S), ``attn_mask`` (L, S) or (N * num_heads, L, S)."""
        if not isinstance(query, Tensor):
            raise InputTypeError(f"MultiheadAttention: expected a tensor query, got {type(query).__name__}")
        batched = query.ndim == 3
        op = "MultiheadAttention"
        key_padding_mask = F._canonical_mask(key_padding_mask, "key_padding_mask", F._none_or_dtype(attn_mask),
                                             "attn_mask", query.dtype, op=op)
        attn_mask = F._canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, check_other=False, op=op)
        if self.batch_first and batched:  # to sequence-first, keeping self-attention recognizable (q is k is v)
            q = query.transpose(1, 0)
            k = q if key is query else key.transpose(1, 0)
            value = k if value is key else q if value is query else value.transpose(1, 0)
            query, key = q, k
        separate = {} if self._qkv_same_embed_dim else {
            "use_separate_proj_weight": True, "q_proj_weight": self.q_proj_weight,
            "k_proj_weight": self.k_proj_weight, "v_proj_weight": self.v_proj_weight}
        out, weights = F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias, self.bias_k,
            self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight, self.out_proj.bias,
            training=self.training, key_padding_mask=key_padding_mask, need_weights=need_weights,
            attn_mask=attn_mask, average_attn_weights=average_attn_weights, is_causal=is_causal, **separate)
        return (out.transpose(1, 0) if self.batch_first and batched else out), weights


def _activation(op, activation):
    if isinstance(activation, str):
        if activation == "relu":
            return F.relu
        if activation == "gelu":
            return F.gelu
        raise InputError(f"{op}: activation should be relu/gelu, not {activation}")
    if not callable(activation):
        raise InputTypeError(f"{op}: activation must be 'relu', 'gelu' or a callable, got {activation!r}")
    return activation


def _feed_forward(layer, x):
    """``linear2(dropout(activation(linear1(x))))``; a ReLU (F.relu or a hook-free nn.ReLU) runs in linear1's
    GEMM epilog when linear1 is a plain, hook-free Linear."""
    act, lin = layer.activation, layer.linear1
    relu = act is F.relu or (type(act) is ReLU and not runs_hooks(act) and runs_own_forward(act))
    if relu and type(lin) is Linear and not runs_hooks(lin) and runs_own_forward(lin) and lin.activation is None:
        h = lin.forward_with_activation(x, "relu")
    else:
        h = act(lin(x))
    return layer.linear2(layer.dropout(h))


def _masks(op, x, mask, padding, mask_name, padding_name):
    """PyTorch's canonical forms of a layer's (attention mask, key padding mask): float, -inf where left out."""
    if not isinstance(x, Tensor):
        raise InputTypeError(f"{op}: expected a tensor input, got {type(x).__name__}")
    padding = F._canonical_mask(padding, padding_name, F._none_or_dtype(mask), mask_name, x.dtype, op=op)
    return F._canonical_mask(mask, mask_name, None, "", x.dtype, check_other=False, op=op), padding


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block, each with a residual connection and a LayerNorm (after it, or
    before it with ``norm_first``), as PyTorch's: ``self_attn``, ``linear1``, ``dropout``, ``linear2``,
    ``norm1``, ``norm2``, ``dropout1``, ``dropout2``; ``activation`` 'relu', 'gelu' or a callable."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)
        activation = _activation("TransformerEncoderLayer", activation)
        # PyTorch's flag (its fast path keys on it; TransformerEncoder's nested-tensor choice here too)
        self.activation_relu_or_gelu = (1 if activation is F.relu or isinstance(activation, ReLU) else
                                        2 if activation is F.gelu or isinstance(activation, GELU) else 0)
        self.activation = activation

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        src_mask, src_key_padding_mask = _masks("TransformerEncoderLayer", src, src_mask, src_key_padding_mask,
                                                "src_mask", "src_key_padding_mask")
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self.dropout2(_feed_forward(self, self.norm2(x)))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self.dropout2(_feed_forward(self, x)))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)


class TransformerDecoderLayer(Module):
    """Self-attention, attention over the encoder's output (``multihead_attn``), then a feed-forward block, each
    with a residual connection and a LayerNorm (``norm1``..``norm3``; before it with ``norm_first``), as
    PyTorch's."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias, **kw)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias,
                                                 **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1, self.dropout2, self.dropout3 = Dropout(dropout), Dropout(dropout), Dropout(dropout)
        self.activation = _activation("TransformerDecoderLayer", activation)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            return x + self.dropout3(_feed_forward(self, self.norm3(x)))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
        return self.norm3(x + self.dropout3(_feed_forward(self, x)))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, is_causal=is_causal,
                           need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                is_causal=is_causal, need_weights=False)[0]
        return self.dropout2(x)


def _get_clones(module, n):
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def _why_not_nested(layer):
    """PyTorch's reason an encoder of ``layer`` cannot take nested tensors ('' when it can)."""
    name = "encoder_layer"
    if not isinstance(layer, TransformerEncoderLayer):
        return f"{name} was not TransformerEncoderLayer"
    attn = layer.self_attn
    for failed, why in ((layer.norm_first, "norm_first was True"),
                        (not attn.batch_first, "self_attn.batch_first was not True(use batch_first for better "
                                               "inference performance)"),
                        (not attn._qkv_same_embed_dim, "self_attn._qkv_same_embed_dim was not True"),
                        (attn.in_proj_bias is None, "self_attn was passed bias=False"),
                        (not layer.activation_relu_or_gelu, "activation_relu_or_gelu was not True"),
                        (layer.norm1.eps != layer.norm2.eps, f"norm1.eps was not equal to {name}.norm2.eps"),
                        (attn.num_heads % 2 == 1, "self_attn.num_heads is odd")):
        if failed:
            return f"{name}.{why}"
    return ""


class TransformerEncoder(Module):
    """``num_layers`` deep copies of ``encoder_layer`` (``layers``), then ``norm`` if given, as PyTorch's.

    Where PyTorch would run its nested-tensor fast path (``enable_nested_tensor`` and a qualifying layer, eval
    mode, a batched input with ``src_key_padding_mask`` and no ``mask``, nothing requiring grad, the padding at
    the end of each sequence when ``mask_check``), the padded positions come out as zeros before ``norm``, as
    PyTorch's; everything else is the same computation either way."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm
        self.enable_nested_tensor = self.use_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        why = _why_not_nested(encoder_layer)
        if enable_nested_tensor and why:
            warnings.warn(f"enable_nested_tensor is True, but self.use_nested_tensor is False because {why}",
                          stacklevel=2)
            self.use_nested_tensor = False

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        mask, src_key_padding_mask = _masks("TransformerEncoder", src, mask, src_key_padding_mask, "mask",
                                            "src_key_padding_mask")
        padded = self._nested_padding(src, mask, src_key_padding_mask)
        output = src
        for mod in self.layers:
            output = mod(output, src_mask=mask, is_causal=is_causal is True, src_key_padding_mask=src_key_padding_mask)
        if padded is not None:
            output = ops.where(padded.unsqueeze(-1), 0.0, output)
        return output if self.norm is None else self.norm(output)

    def _nested_padding(self, src, mask, padding):
        """The (N, S) padded positions PyTorch's nested-tensor path would leave at zero, or None where it would
        not run."""
        first = self.layers[0]
        if (not self.use_nested_tensor or first.training or src.ndim != 3 or padding is None or mask is not None
                or backend.autocast_dtypes()):
            return None
        if is_grad_enabled() and (src.requires_grad or any(p.requires_grad for p in first.parameters())):
            return None
        valid = padding == 0
        if self.mask_check and bool((valid[:, 1:] & ~valid[:, :-1]).any().item()):
            return None  # not left-aligned: PyTorch takes its regular path
        return ~valid


class TransformerDecoder(Module):
    """``num_layers`` deep copies of ``decoder_layer`` (``layers``), then ``norm`` if given, as PyTorch's."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        output = tgt
        for mod in self.layers:
            output = mod(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                         tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask,
                         tgt_is_causal=tgt_is_causal is True, memory_is_causal=memory_is_causal)
        return output if self.norm is None else self.norm(output)


class Transformer(Module):
    """An encoder-decoder Transformer with PyTorch's defaults (d_model 512, 8 heads, 6 + 6 layers, feed-forward
    2048, dropout 0.1, ReLU): ``encoder`` and ``decoder`` (each with a final LayerNorm) unless custom ones are
    given; every parameter of 2 or more dimensions xavier-uniform."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation=F.relu, custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first,
                      bias)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            self.encoder = TransformerEncoder(TransformerEncoderLayer(*layer_args, **kw), num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            self.decoder = TransformerDecoder(TransformerDecoderLayer(*layer_args, **kw), num_decoder_layers, norm)
        self._reset_parameters()
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        for name, t in (("src", src), ("tgt", tgt)):
            if not isinstance(t, Tensor):
                raise InputTypeError(f"Transformer: expected a tensor {name}, got {type(t).__name__}")
        batch_dim = 0 if self.batch_first else 1
        if src.ndim == 3 and src.shape[batch_dim] != tgt.shape[batch_dim]:
            raise InputError(f"Transformer: the batch number of src and tgt must be equal, got src "
                             f"{tuple(src.shape)} and tgt {tuple(tgt.shape)} (batch_first={self.batch_first})")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise InputError(f"Transformer: the feature number of src and tgt must be equal to d_model="
                             f"{self.d_model}, got {src.shape[-1]} and {tgt.shape[-1]}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The (sz, sz) causal mask: -inf above the diagonal (a position may not attend later ones), 0 elsewhere."""
        return ops.triu(ops.full((sz, sz), -math.inf, dtype=dtype, device=device), diagonal=1)

    def _reset_parameters(self):
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
