"""Attention and the Transformer layers: F.scaled_dot_product_attention, F.multi_head_attention_forward,
nn.MultiheadAttention and the encoder / decoder layers against float64 NumPy references written from PyTorch's
equations (masks, causal, GQA, bias_kv, zero attention, batch-first and unbatched inputs), gradients by
gradcheck, PyTorch's state-dict keys, initialization and nested-tensor padding, errors, a few training steps,
and (gpu) the cuda path against PyTorch with the same weights."""
import math
import warnings

import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
from minifused import nn
from minifused.testing import gradcheck
from opinfo import mha_ref as ref_mha
from opinfo import sdpa_ref as ref_sdpa

F64 = mf.float64


def t(a, rg=False, device="cpu"):
    a = np.asarray(a)
    return mf.tensor(a if a.dtype == bool else a.astype(np.float64), requires_grad=rg, device=device)


def arr(x):
    return np.asarray(x._data) if hasattr(x, "_data") else np.asarray(x)


# ---------------------------------------------------------------- the NumPy references
# (ref_sdpa and ref_mha are the registry's, tests/opinfo.py, which also holds the functions' error cases)
def layer_norm(x, p, name, eps=1e-5):
    y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    return y * p[f"{name}.weight"] + p.get(f"{name}.bias", 0.0)


def sub(p, prefix):
    return {k[len(prefix):]: v for k, v in p.items() if k.startswith(prefix)}


_erf = np.vectorize(math.erf)
ACTS = {"relu": lambda x: np.maximum(x, 0.0), "gelu": lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))}


def feed_forward(x, p, act):
    h = ACTS[act](x @ p["linear1.weight"].T + p.get("linear1.bias", 0.0))
    return h @ p["linear2.weight"].T + p.get("linear2.bias", 0.0)


def ref_encoder_layer(x, p, H, norm_first, act, kpm=None, mask=None):
    def sa(y):
        return ref_mha(y, y, y, sub(p, "self_attn."), H, kpm, mask, need_weights=False)[0]

    if norm_first:
        x = x + sa(layer_norm(x, p, "norm1"))
        return x + feed_forward(layer_norm(x, p, "norm2"), p, act)
    x = layer_norm(x + sa(x), p, "norm1")
    return layer_norm(x + feed_forward(x, p, act), p, "norm2")


def ref_decoder_layer(x, mem, p, H, tgt_mask=None, memory_kpm=None):
    x = layer_norm(x + ref_mha(x, x, x, sub(p, "self_attn."), H, None, tgt_mask, need_weights=False)[0], p, "norm1")
    x = layer_norm(x + ref_mha(x, mem, mem, sub(p, "multihead_attn."), H, memory_kpm, need_weights=False)[0], p,
                   "norm2")
    return layer_norm(x + feed_forward(x, p, "relu"), p, "norm3")


def params(module):
    return {k: arr(v) for k, v in module.state_dict().items()}


# ---------------------------------------------------------------- scaled_dot_product_attention
def _bool_mask(rng, shape):
    m = rng.random(shape) > 0.4
    m[..., 1, :] = False  # query row 1 may attend nothing: its output is 0
    return m


SDPA_CASES = {
    "3d": ((2, 3, 4), (2, 5, 4), (2, 5, 6), {}),
    "2d": ((3, 4), (5, 4), (5, 6), {}),
    "causal L<S": ((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 6), {"is_causal": True}),
    "causal L>S": ((1, 2, 6, 4), (1, 2, 3, 4), (1, 2, 3, 5), {"is_causal": True}),
    "bool mask": ((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 6), {"mask": "bool"}),
    "float mask": ((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 6), {"mask": "float"}),
    "gqa": ((2, 4, 3, 4), (2, 2, 5, 4), (2, 1, 5, 6), {"enable_gqa": True, "scale": 0.3}),
    "gqa + mask": ((1, 4, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4), {"enable_gqa": True, "mask": "bool"}),
    "broadcast batch": ((2, 3, 4), (1, 5, 4), (2, 5, 6), {"scale": -0.7}),
}


@pytest.mark.parametrize("case", list(SDPA_CASES))
def test_sdpa_against_reference(case, rng):
    qs, ks, vs, kw = SDPA_CASES[case]
    kw = dict(kw)
    q, k, v = (rng.standard_normal(s) for s in (qs, ks, vs))
    L, S = qs[-2], ks[-2]
    mask = kw.pop("mask", None)
    if mask == "bool":
        mask = _bool_mask(rng, (1, L, S))
    elif mask == "float":
        mask = rng.standard_normal((L, S))
        mask[1] = -np.inf
        mask[2, :3] = -np.inf
    out = F.scaled_dot_product_attention(t(q), t(k), t(v), None if mask is None else t(mask), **kw)
    ref = ref_sdpa(q, k, v, mask, kw.get("is_causal", False), kw.get("scale"), kw.get("enable_gqa", False))
    assert out.shape == ref.shape and out.dtype == F64
    np.testing.assert_allclose(arr(out), ref, rtol=1e-12, atol=1e-12)
    if mask is not None:
        assert np.all(arr(out)[..., 1, :] == 0.0)  # the row with no key left: zeros, as PyTorch 2.x's


@pytest.mark.parametrize("kind", ["bool", "float", "causal", "gqa"])
def test_sdpa_gradcheck(kind, rng):
    shapes = {"gqa": ((1, 4, 3, 2), (1, 2, 4, 2), (1, 2, 4, 3))}.get(kind, ((1, 2, 3, 2), (1, 2, 4, 2), (1, 2, 4, 3)))
    q, k, v = (t(rng.standard_normal(s), rg=True) for s in shapes)
    if kind == "bool":
        mask = t(_bool_mask(rng, (3, 4)))
        assert gradcheck(lambda *x: F.scaled_dot_product_attention(*x, attn_mask=mask), (q, k, v))
    elif kind == "float":
        m = rng.standard_normal((1, 1, 3, 4))
        m[..., 0, :2] = -np.inf
        mask = t(m, rg=True)
        assert gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=mask), (q, k, v))
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sum().backward()
        g = arr(mask.grad)
        assert np.all(np.isfinite(g)) and np.all(g[..., 0, :2] == 0)  # the mask gets the scores' gradient
    else:
        kw = {"is_causal": True} if kind == "causal" else {"enable_gqa": True}
        assert gradcheck(lambda *x: F.scaled_dot_product_attention(*x, **kw), (q, k, v))


def test_sdpa_fully_masked_row_has_zero_finite_gradients(rng):
    q, k, v = (t(rng.standard_normal(s), rg=True) for s in ((3, 4), (5, 4), (5, 2)))
    mask = np.ones((3, 5), bool)
    mask[0] = False
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=t(mask))
    (out * t(rng.standard_normal((3, 2)))).sum().backward()
    for x in (q, k, v):
        assert np.all(np.isfinite(arr(x.grad)))
    assert np.all(arr(q.grad)[0] == 0) and np.all(arr(out)[0] == 0)


def test_sdpa_dropout():
    mf.manual_seed(0)
    q, k = mf.randn(2, 32, 8, dtype=F64), mf.randn(2, 32, 8, dtype=F64)
    eye = t(np.eye(32))  # the output is the (dropped, rescaled) attention weights themselves
    assert np.all(arr(F.scaled_dot_product_attention(q, k, eye, dropout_p=1.0)) == 0)
    w = arr(F.scaled_dot_product_attention(q, k, eye))
    out = arr(F.scaled_dot_product_attention(q, k, eye, dropout_p=0.5))
    dropped = out == 0
    np.testing.assert_allclose(out[~dropped], 2 * w[~dropped], rtol=1e-12)
    assert abs(dropped.mean() - 0.5) < 0.05


# ---------------------------------------------------------------- MultiheadAttention
E, H = 8, 2
MHA_CONFIGS = [{}, {"batch_first": True}, {"bias": False}, {"add_bias_kv": True}, {"add_zero_attn": True},
               {"kdim": 4, "vdim": 6}]


def _mha_inputs(rng, kw, L=3, S=5, N=2):
    bf = kw.get("batch_first", False)

    def make(T, D):
        return rng.standard_normal((N, T, D) if bf else (T, N, D))

    return make(L, E), make(S, kw.get("kdim", E)), make(S, kw.get("vdim", E))


def _seq_first(a, kw):
    return a.transpose(1, 0, 2) if kw.get("batch_first") else a


@pytest.mark.parametrize("kw", MHA_CONFIGS, ids=str)
@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_against_reference(kw, need_weights, rng):
    m = nn.MultiheadAttention(E, H, dtype=F64, **kw)
    p = params(m)
    q, k, v = _mha_inputs(rng, kw)
    kpm = rng.random((2, 5)) > 0.6
    kpm[0] = True  # every key of sample 0 padded: NaN weights with need_weights, zeros through SDPA without
    am = rng.random((3, 5)) > 0.7
    out, w = m(t(q), t(k), t(v), key_padding_mask=t(kpm), attn_mask=t(am), need_weights=need_weights)
    ro, rw = ref_mha(_seq_first(q, kw), _seq_first(k, kw), _seq_first(v, kw), p, H, kpm, am, need_weights,
                     add_zero_attn=kw.get("add_zero_attn", False))
    np.testing.assert_allclose(arr(out), _seq_first(ro, kw), rtol=1e-12, atol=1e-12)
    if need_weights:
        assert w.shape == (2, 3, 5 + ("add_bias_kv" in kw) + ("add_zero_attn" in kw))
        np.testing.assert_allclose(arr(w), rw, rtol=1e-12, atol=1e-12)
        if "add_zero_attn" not in kw and "add_bias_kv" not in kw:  # (those add a key no padding covers)
            assert np.isnan(arr(out)[0] if kw.get("batch_first") else arr(out)[:, 0]).all()
    else:
        assert w is None and np.all(np.isfinite(arr(out)))


def test_mha_self_attention_heads_causal_and_unbatched(rng):
    m = nn.MultiheadAttention(E, H, dtype=F64)
    p = params(m)
    x = rng.standard_normal((4, 2, E))
    causal = np.triu(np.full((4, 4), -np.inf), 1)
    for need in (True, False):  # is_causal: the mask's hint (SDPA's own causal path without weights)
        out, _ = m(t(x), t(x), t(x), attn_mask=t(causal), is_causal=True, need_weights=need)
        np.testing.assert_allclose(arr(out), ref_mha(x, x, x, p, H, attn_mask=causal)[0], rtol=1e-12, atol=1e-12)
    out, w = m(t(x), t(x), t(x), average_attn_weights=False, attn_mask=t(rng.standard_normal((4, 4))))
    assert w.shape == (2, H, 4, 4)
    am3 = rng.random((2 * H, 4, 4)) > 0.5
    am3[..., 0] = False
    out, w = m(t(x), t(x), t(x), attn_mask=t(am3))
    ro, rw = ref_mha(x, x, x, p, H, attn_mask=am3)
    np.testing.assert_allclose(arr(out), ro, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(arr(w), rw, rtol=1e-12, atol=1e-12)
    xu, kpm = rng.standard_normal((4, E)), np.array([False, True, False, True])
    out, w = m(t(xu), t(xu), t(xu), key_padding_mask=t(kpm))
    ro, rw = ref_mha(xu[:, None], xu[:, None], xu[:, None], p, H, kpm[None])
    assert out.shape == (4, E) and w.shape == (4, 4)
    np.testing.assert_allclose(arr(out), ro[:, 0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(arr(w), rw[0], rtol=1e-12, atol=1e-12)


def test_mha_functional_gradcheck(rng):
    L, S, N, e = 2, 3, 2, 4
    q, k, v = (t(rng.standard_normal(s), rg=True) for s in ((L, N, e), (S, N, e), (S, N, e)))
    w, b = t(rng.standard_normal((3 * e, e)), rg=True), t(rng.standard_normal(3 * e), rg=True)
    ow, ob = t(rng.standard_normal((e, e)), rg=True), t(rng.standard_normal(e), rg=True)
    bk, bv = t(rng.standard_normal((1, 1, e)), rg=True), t(rng.standard_normal((1, 1, e)), rg=True)
    kpm = t(np.array([[False, True, False], [False, False, False]]))

    def fn(q, k, v, w, b, ow, ob, bk, bv):
        out, weights = F.multi_head_attention_forward(q, k, v, e, 2, w, b, bk, bv, False, 0.0, ow, ob,
                                                      key_padding_mask=kpm)
        return out, weights

    assert gradcheck(fn, (q, k, v, w, b, ow, ob, bk, bv))
    sdpa_path = lambda q, w: F.multi_head_attention_forward(  # noqa: E731
        q, q, q, e, 2, w, None, None, None, True, 0.0, ow, None, need_weights=False)[0]
    assert gradcheck(sdpa_path, (q, w))


def test_mha_state_dict_keys_match_pytorch():
    # the keys and shapes PyTorch 2.14 lists for the same configurations
    assert list(nn.MultiheadAttention(8, 2).state_dict()) == [
        "in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    sd = nn.MultiheadAttention(8, 2, add_bias_kv=True, kdim=4, vdim=6).state_dict()
    assert list(sd) == ["q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias", "bias_k", "bias_v",
                        "out_proj.weight", "out_proj.bias"]
    assert [tuple(v.shape) for v in sd.values()] == [(8, 8), (8, 4), (8, 6), (24,), (1, 1, 8), (1, 1, 8), (8, 8),
                                                     (8,)]
    assert list(nn.MultiheadAttention(8, 2, bias=False).state_dict()) == ["in_proj_weight", "out_proj.weight"]
    m = nn.MultiheadAttention(8, 2)
    assert m.q_proj_weight is None and m.bias_k is None and m.head_dim == 4 and m._qkv_same_embed_dim
    assert repr(m) == ("MultiheadAttention(\n  (out_proj): NonDynamicallyQuantizableLinear(in_features=8, "
                       "out_features=8, bias=True)\n)")


def test_mha_initialization():
    mf.manual_seed(0)
    m = nn.MultiheadAttention(64, 4, add_bias_kv=True)
    w = arr(m.in_proj_weight)
    bound = math.sqrt(6 / (64 + 3 * 64))  # xavier_uniform_ on (3E, E)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert np.all(arr(m.in_proj_bias) == 0) and np.all(arr(m.out_proj.bias) == 0)
    assert np.abs(arr(m.out_proj.weight)).max() <= 1 / 8  # Linear's own init
    np.testing.assert_allclose(arr(m.bias_k).std(), math.sqrt(2 / 128), rtol=0.3)  # xavier_normal_ on (1, 1, E)


def test_mha_errors():
    x = mf.randn(3, 2, 8)
    m = nn.MultiheadAttention(8, 2)
    with pytest.raises(ValueError, match="MultiheadAttention: embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(ValueError, match="embed_dim and num_heads must be greater than 0"):
        nn.MultiheadAttention(0, 3)
    with pytest.raises(ValueError, match=r"the shape of the 2D attn_mask is \(3, 4\), but should be \(3, 3\)"):
        m(x, x, x, attn_mask=mf.ones(3, 4, dtype=mf.bool))
    with pytest.raises(TypeError, match="MultiheadAttention: only bool and floating types of attn_mask"):
        m(x, x, x, attn_mask=mf.ones(3, 3, dtype=mf.int64))
    with pytest.raises(ValueError, match=r"key_padding_mask of shape \(2, 3\) .* got \(2, 4\)"):
        m(x, x, x, key_padding_mask=mf.ones(2, 4, dtype=mf.bool))
    with pytest.raises(RuntimeError, match="need attn_mask if specifying the is_causal hint"):
        m(x, x, x, is_causal=True)
    with pytest.raises(ValueError, match=r"key shape \(3, 2, 8\) does not match value shape \(3, 2, 7\)"):
        m(x, x, mf.randn(3, 2, 7))
    with pytest.raises(ValueError, match="expecting embedding dimension of 8, but got 7"):
        y = mf.randn(3, 2, 7)
        m(y, y, y)
    with pytest.raises(ValueError, match="expected `key` and `value` to be 2-D but found 3-D"):
        m(mf.randn(3, 8), x, x)
    with pytest.raises(ValueError, match="received 4-D query tensor"):
        m(mf.randn(1, 3, 2, 8), x, x)
    with pytest.warns(UserWarning, match="Support for mismatched key_padding_mask and attn_mask is deprecated"):
        m(x, x, x, key_padding_mask=mf.zeros(2, 3, dtype=mf.bool), attn_mask=mf.zeros(3, 3))


# ---------------------------------------------------------------- Transformer layers
@pytest.mark.parametrize("kw", [{}, {"norm_first": True}, {"activation": "gelu", "batch_first": True},
                                {"bias": False}], ids=str)
def test_encoder_layer_against_reference(kw, rng):
    layer = nn.TransformerEncoderLayer(E, H, 16, dropout=0.0, dtype=F64, **kw)
    p = params(layer)
    bf = kw.get("batch_first", False)
    x = rng.standard_normal((2, 4, E) if bf else (4, 2, E))
    kpm = np.array([[False, False, True, True], [False] * 4])
    out = layer(t(x), src_key_padding_mask=t(kpm))
    ref = ref_encoder_layer(_seq_first(x, kw), p, H, kw.get("norm_first", False), kw.get("activation", "relu"), kpm)
    np.testing.assert_allclose(arr(out), _seq_first(ref, kw), rtol=1e-10, atol=1e-10)


def test_decoder_layer_and_gradcheck(rng):
    layer = nn.TransformerDecoderLayer(4, 2, 6, dropout=0.0, dtype=F64)
    p = params(layer)
    tgt, mem = rng.standard_normal((3, 2, 4)), rng.standard_normal((4, 2, 4))
    causal = nn.Transformer.generate_square_subsequent_mask(3, dtype=F64)
    kpm = np.array([[False, False, False, True], [False] * 4])
    out = layer(t(tgt), t(mem), tgt_mask=causal, tgt_is_causal=True, memory_key_padding_mask=t(kpm))
    ref = ref_decoder_layer(tgt, mem, p, 2, arr(causal), kpm)
    np.testing.assert_allclose(arr(out), ref, rtol=1e-10, atol=1e-10)
    assert gradcheck(lambda a, b: layer(a, b, tgt_mask=causal, memory_key_padding_mask=t(kpm)),
                     (t(tgt, rg=True), t(mem, rg=True)))


def test_layers_state_dict_keys_match_pytorch():
    enc = ["self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
           "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
           "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"]
    assert list(nn.TransformerEncoderLayer(8, 2, 16).state_dict()) == enc
    dec = (enc[:4] + [k.replace("self_attn", "multihead_attn") for k in enc[:4]] + enc[4:]
           + ["norm3.weight", "norm3.bias"])
    assert list(nn.TransformerDecoderLayer(8, 2, 16).state_dict()) == dec
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = nn.Transformer(8, 2, 1, 1, 16)
    assert list(model.state_dict()) == (["encoder.layers.0." + k for k in enc] + ["encoder.norm.weight",
                                        "encoder.norm.bias"] + ["decoder.layers.0." + k for k in dec]
                                        + ["decoder.norm.weight", "decoder.norm.bias"])
    layer = nn.TransformerEncoderLayer(8, 2, 16)
    names = [n for n, _ in layer.named_children()]
    assert names == ["self_attn", "linear1", "dropout", "linear2", "norm1", "norm2", "dropout1", "dropout2"]
    assert layer.activation is F.relu and layer.activation_relu_or_gelu == 1 and not layer.norm_first
    assert nn.TransformerEncoderLayer(8, 2, activation="gelu").activation_relu_or_gelu == 2


def test_encoder_deep_copies_and_transformer_init():
    mf.manual_seed(1)
    layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
    enc = nn.TransformerEncoder(layer, 3, enable_nested_tensor=False)
    assert len(enc.layers) == 3 and enc.num_layers == 3 and enc.norm is None
    a, b = enc.layers[0].linear1.weight, enc.layers[1].linear1.weight
    assert a is not b and a is not layer.linear1.weight and np.array_equal(arr(a), arr(b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = nn.Transformer(8, 2, 2, 1, 16)
    assert model.d_model == 8 and model.nhead == 2 and len(model.encoder.layers) == 2
    for name, p in model.named_parameters():
        if p.ndim > 1:  # xavier_uniform_ over every matrix
            bound = math.sqrt(6 / (p.shape[0] + p.shape[1]))
            assert np.abs(arr(p)).max() <= bound, name
    w0, w1 = arr(model.encoder.layers[0].linear1.weight), arr(model.encoder.layers[1].linear1.weight)
    assert not np.array_equal(w0, w1)  # re-initialized after the copies


def test_generate_square_subsequent_mask():
    m = nn.Transformer.generate_square_subsequent_mask(3)
    assert m.dtype == mf.float32
    assert m.tolist() == [[0.0, -math.inf, -math.inf], [0.0, 0.0, -math.inf], [0.0, 0.0, 0.0]]
    assert nn.Transformer.generate_square_subsequent_mask(2, dtype=F64).dtype == F64


def test_encoder_nested_padding_and_warning(rng):
    with pytest.warns(UserWarning, match="enable_nested_tensor is True, but self.use_nested_tensor is False because "
                                         "encoder_layer.self_attn.batch_first was not True"):
        nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 1)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, dtype=F64)
    norm = nn.LayerNorm(8, dtype=F64)
    with mf.no_grad():
        norm.bias.copy_(t(rng.standard_normal(8)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a qualifying layer: no warning
        enc = nn.TransformerEncoder(layer, 2, norm=norm)
    x = t(rng.standard_normal((2, 4, 8)))
    p = params(enc)
    kpm = np.array([[False, False, True, True], [False] * 4])
    ref = x_ref = arr(x).transpose(1, 0, 2)
    for i in range(2):
        x_ref = ref_encoder_layer(x_ref, sub(p, f"layers.{i}."), 2, False, "relu", kpm)
    ref = layer_norm(x_ref, p, "norm").transpose(1, 0, 2)
    np.testing.assert_allclose(arr(enc(x, src_key_padding_mask=t(kpm))), ref, rtol=1e-10, atol=1e-10)
    enc.eval()
    np.testing.assert_allclose(arr(enc(x, src_key_padding_mask=t(kpm))), ref, rtol=1e-10, atol=1e-10)
    with mf.no_grad():  # PyTorch's nested-tensor path: the padded positions are zeros before the norm
        out = arr(enc(x, src_key_padding_mask=t(kpm)))
        ragged = np.array([[True, False, True, False], [False] * 4])  # not left-aligned: the regular path
        out2 = arr(enc(x, src_key_padding_mask=t(ragged)))
    np.testing.assert_allclose(out[~kpm], ref[~kpm], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(out[kpm], np.broadcast_to(arr(norm.bias), (2, 8)), rtol=1e-12)
    assert np.all(np.isfinite(out2)) and not np.allclose(out2[ragged], arr(norm.bias))


def test_transformer_layer_errors():
    with pytest.raises(ValueError, match="TransformerEncoderLayer: activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = nn.Transformer(8, 2, 1, 1, 16)
    with pytest.raises(ValueError, match="the batch number of src and tgt must be equal"):
        model(mf.randn(3, 2, 8), mf.randn(4, 3, 8))
    with pytest.raises(ValueError, match="the feature number of src and tgt must be equal to d_model=8"):
        model(mf.randn(3, 2, 8), mf.randn(4, 2, 6))
    with pytest.raises(RuntimeError, match="need attn_mask if specifying the is_causal hint"):
        model.encoder(mf.randn(3, 2, 8), is_causal=True)


def test_tiny_encoder_trains():
    mf.manual_seed(0)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True), 1,
                                enable_nested_tensor=False)
    head = nn.Linear(16, 1)
    params_ = list(enc.parameters()) + list(head.parameters())
    opt = mf.optim.Adam(params_, lr=1e-2)
    x = mf.randn(8, 5, 16)
    y = mf.randn(8, 5, 1)
    causal = nn.Transformer.generate_square_subsequent_mask(5)
    losses = []
    for _ in range(25):
        opt.zero_grad()
        loss = F.mse_loss(head(enc(x, mask=causal, is_causal=True)), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(np.isfinite(losses)) and losses[-1] < 0.5 * losses[0]


# ---------------------------------------------------------------- the cuda path against PyTorch
def _to_torch(torch, a, rg=False):
    return torch.tensor(np.asarray(a), device="cuda", requires_grad=rg)


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["plain", "bool mask", "float mask", "causal", "gqa"])
def test_sdpa_cuda_against_torch(torch, case, rng):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    qs, ks, vs = ((2, 4, 9, 16), (2, 2 if case == "gqa" else 4, 12, 16), (2, 2 if case == "gqa" else 4, 12, 8))
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in (qs, ks, vs))
    mask = None
    if case == "bool mask":
        mask = _bool_mask(rng, (2, 1, 9, 12))
    elif case == "float mask":
        mask = rng.standard_normal((9, 12)).astype(np.float32)
        mask[3] = -np.inf
    kw = {"is_causal": case == "causal", "enable_gqa": case == "gqa"}
    mine = [mf.tensor(a, device="cuda", requires_grad=True) for a in (q, k, v)]
    theirs = [_to_torch(torch, a, rg=True) for a in (q, k, v)]
    mine_mask = None if mask is None else mf.tensor(mask, device="cuda")
    out = F.scaled_dot_product_attention(*mine, attn_mask=mine_mask, **kw)
    with sdpa_kernel(SDPBackend.MATH):
        ref = torch.nn.functional.scaled_dot_product_attention(
            *theirs, attn_mask=None if mask is None else _to_torch(torch, mask), **kw)
    g = rng.standard_normal(ref.shape).astype(np.float32)
    out.backward(mf.tensor(g, device="cuda"))
    ref.backward(_to_torch(torch, g))
    np.testing.assert_allclose(out.cpu().numpy(), ref.detach().cpu().numpy(), rtol=1e-4, atol=1e-5)
    for a, b in zip(mine, theirs):
        np.testing.assert_allclose(a.grad.cpu().numpy(), b.grad.cpu().numpy(), rtol=1e-4, atol=1e-5)


def _copy_weights(torch_module, module):
    module.load_state_dict({k: mf.tensor(v.detach().cpu().numpy(), device="cuda")
                            for k, v in torch_module.state_dict().items()})


@pytest.mark.gpu
@pytest.mark.parametrize("which", ["mha", "mha kdim", "encoder", "decoder", "transformer"])
def test_modules_cuda_against_torch(torch, which, rng):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    N, L, S, e = 3, 7, 9, 32
    kpm = rng.random((N, S)) > 0.7
    kpm[:, 0] = False
    causal = np.triu(np.full((L, L), -np.inf, np.float32), 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if which.startswith("mha"):
            kw = {"kdim": 12, "vdim": 20} if which == "mha kdim" else {}
            pair = [lib.MultiheadAttention(e, 4, batch_first=True, **kw) for lib in (torch.nn, nn)]
            shapes = [(N, L, e), (N, S, kw.get("kdim", e)), (N, S, kw.get("vdim", e))]

            def call(m, lib, xs):
                return m(*xs, key_padding_mask=lib.tensor(kpm, device="cuda"))[0]
        elif which == "encoder":
            pair = [lib.TransformerEncoder(lib.TransformerEncoderLayer(e, 4, 64, dropout=0.0, norm_first=True), 2)
                    for lib in (torch.nn, nn)]
            shapes = [(S, N, e)]

            def call(m, lib, xs):
                return m(xs[0], src_key_padding_mask=lib.tensor(kpm, device="cuda"))
        elif which == "decoder":
            pair = [lib.TransformerDecoder(lib.TransformerDecoderLayer(e, 4, 64, dropout=0.0, activation="gelu"), 2)
                    for lib in (torch.nn, nn)]
            shapes = [(L, N, e), (S, N, e)]

            def call(m, lib, xs):
                return m(xs[0], xs[1], tgt_mask=lib.tensor(causal, device="cuda"), tgt_is_causal=True,
                         memory_key_padding_mask=lib.tensor(kpm, device="cuda"))
        else:
            pair = [lib.Transformer(e, 4, 2, 2, 64, dropout=0.0, batch_first=True) for lib in (torch.nn, nn)]
            shapes = [(N, S, e), (N, L, e)]

            def call(m, lib, xs):
                return m(xs[0], xs[1], tgt_mask=lib.tensor(causal, device="cuda"),
                         src_key_padding_mask=lib.tensor(kpm, device="cuda"))
    tm, mm = pair[0].cuda(), pair[1].to("cuda")
    _copy_weights(tm, mm)
    data = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    mine = [mf.tensor(a, device="cuda", requires_grad=True) for a in data]
    theirs = [_to_torch(torch, a, rg=True) for a in data]
    out = call(mm, mf, mine)
    with sdpa_kernel(SDPBackend.MATH):
        ref = call(tm, torch, theirs)
    g = rng.standard_normal(ref.shape).astype(np.float32)
    out.backward(mf.tensor(g, device="cuda"))
    ref.backward(_to_torch(torch, g))
    np.testing.assert_allclose(out.cpu().numpy(), ref.detach().cpu().numpy(), rtol=1e-4, atol=1e-4)
    for a, b in zip(mine, theirs):
        np.testing.assert_allclose(a.grad.cpu().numpy(), b.grad.cpu().numpy(), rtol=1e-3, atol=1e-4)
    tp = dict(tm.named_parameters())
    for name, p in mm.named_parameters():
        np.testing.assert_allclose(p.grad.cpu().numpy(), tp[name].grad.cpu().numpy(), rtol=1e-3, atol=1e-4,
                                   err_msg=name)


def test_attention_of_empty_batches_and_queries():
    import minifused as mf

    assert mf.nn.MultiheadAttention(8, 2)(mf.zeros(4, 0, 8), mf.zeros(5, 0, 8), mf.zeros(5, 0, 8))[0].shape == (4, 0, 8)
    assert mf.nn.MultiheadAttention(8, 2)(mf.zeros(0, 3, 8), mf.zeros(5, 3, 8), mf.zeros(5, 3, 8))[0].shape == (0, 3, 8)
    assert mf.nn.TransformerEncoderLayer(8, 2, 16)(mf.zeros(0, 3, 8)).shape == (0, 3, 8)
