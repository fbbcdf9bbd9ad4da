"""normalize, rms_norm, embedding, embedding_bag, one_hot, distances, dropout and bilinear against PyTorch's
documented rules, on the cpu: values and gradients against float64 NumPy references and finite differences,
dtypes, memory formats, warnings and errors."""

import warnings

import numpy as np
import pytest

import minifused as mf
import minifused.functional as F

RNG = np.random.default_rng(0)


def _t(a, dtype=mf.float64, grad=False):
    t = mf.tensor(np.asarray(a), dtype=dtype)
    return t.requires_grad_() if grad else t


def _np(t):
    return np.asarray(t.detach().double().numpy())


def _numgrad(f, a, h=1e-6):
    """Central differences of the scalar f (NumPy in, float out) at a."""
    g = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        d = np.zeros_like(a)
        d[i] = h
        g[i] = (f(a + d) - f(a - d)) / (2 * h)
    return g


# ---------------------------------------------------------------- normalize
def _pnorm(a, p, axes):
    """PyTorch's vector norm: sum(|a|^p)^(1/p); p=0 counts non-zeros; +-inf the max / min of |a| (a negative p
    over a zero element gives 0, as 1/inf)."""
    m = np.abs(a)
    if p == 0:
        return (m != 0).sum(axes, keepdims=True).astype(np.float64)
    if p == np.inf:
        return m.max(axes, keepdims=True)
    if p == -np.inf:
        return m.min(axes, keepdims=True)
    with np.errstate(divide="ignore"):
        return (m ** p).sum(axes, keepdims=True) ** (1.0 / p)


@pytest.mark.parametrize("p", [2.0, -1.0, -2.5, float("-inf"), 0.5])
@pytest.mark.parametrize("dim,axes", [(1, (1,)), ((0, 2), (0, 2)), ([-1, 1], (1, 2)), (None, (0, 1, 2))])
def test_normalize_any_p_and_dims(p, dim, axes):
    """PyTorch's normalize is input / input.norm(p, dim, keepdim=True).clamp_min(eps): any p (negative and -inf
    too), dim an int, a tuple/list or None (all dimensions)."""
    a = RNG.standard_normal((3, 4, 5)) + 0.1
    eps = 1e-12
    ref = a / np.maximum(_pnorm(a, p, axes), eps)
    x = _t(a, grad=True)
    y = F.normalize(x, p=p, dim=dim, eps=eps)
    np.testing.assert_allclose(_np(y), ref, rtol=1e-10, atol=1e-12)
    g = RNG.standard_normal(a.shape)
    (y * _t(g)).sum().backward()
    num = _numgrad(lambda b: (b / np.maximum(_pnorm(b, p, axes), eps) * g).sum(), a)
    np.testing.assert_allclose(_np(x.grad), num, rtol=1e-5, atol=1e-6)


def test_normalize_out_and_zero_d():
    """out= gets the quotient (torch.div's out= rules: resized, refused when an input requires grad); a 0-d input
    with dim=None is x / |x|."""
    a = RNG.standard_normal((2, 3))
    out = mf.empty(2, 3, dtype=mf.float64)
    r = F.normalize(_t(a), p=1.0, dim=(0, 1), out=out)
    assert r is out
    np.testing.assert_allclose(_np(out), a / np.abs(a).sum(), rtol=1e-12)
    with pytest.raises(RuntimeError, match="out="):
        F.normalize(_t(a, grad=True), out=mf.empty(2, 3, dtype=mf.float64))
    assert F.normalize(_t(-3.0), dim=None).item() == -1.0
    # p=None is Tensor.norm's default, the 2-norm
    np.testing.assert_allclose(_np(F.normalize(_t([[3.0, 4.0]]), p=None)), [[0.6, 0.8]])


def test_normalize_errors():
    """An empty dimension has no -inf/inf norm (PyTorch's RuntimeError); p must be a number or 'fro'/'nuc'."""
    with pytest.raises(RuntimeError):
        F.normalize(mf.zeros(0, 3), p=float("inf"), dim=0)
    with pytest.raises(TypeError, match="normalize: p must be a number"):
        F.normalize(mf.zeros(2, 3), p=[1])


# ---------------------------------------------------------------- rms_norm
def _rms64(a, w, eps):
    a = np.asarray(a, np.float64)
    return a / np.sqrt((a * a).mean(-1, keepdims=True) + eps) * np.asarray(w, np.float64)


@pytest.mark.parametrize("xdt,wdt", [(mf.float32, mf.float64), (mf.float64, mf.float32), (mf.float32, mf.float16),
                                     (mf.bfloat16, mf.float16), (mf.float16, mf.float32)])
def test_rms_norm_weight_of_another_dtype(xdt, wdt):
    """PyTorch's rms_norm takes a weight of any floating dtype (warning that no fused kernel serves the pair): the
    norm runs in float32 (float64 for a float64 input) and the result comes in the input's dtype; the weight's
    gradient in the weight's dtype."""
    a, w = RNG.standard_normal((4, 6)), RNG.standard_normal(6)
    x, wt = _t(a, xdt, grad=True), _t(w, wdt, grad=True)
    with pytest.warns(UserWarning, match="rms_norm: mismatch dtype between input and weight"):
        y = F.rms_norm(x, (6,), wt, eps=1e-6)
    assert y.dtype == xdt
    y.sum().backward()
    assert x.grad.dtype == xdt and wt.grad.dtype == wdt
    ref = _rms64(_np(x), _np(wt), 1e-6)
    tol = 1e-2 if mf.bfloat16 in (xdt, wdt) else 2e-3 if mf.float16 in (xdt, wdt) else 1e-6
    np.testing.assert_allclose(_np(y), ref, rtol=tol, atol=tol)
    # the weight's gradient: sum over rows of the normalized input
    xn = _np(x) / np.sqrt((_np(x) ** 2).mean(-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(_np(wt.grad), xn.sum(0), rtol=4 * tol, atol=4 * tol)


def test_rms_norm_integer_input_not_implemented():
    """An integer input has no rms_norm: PyTorch's NotImplementedError (a TypeError too here)."""
    with pytest.raises(NotImplementedError, match="rms_norm: expected a float32, float16, bfloat16 or float64"):
        F.rms_norm(mf.ones(2, 3, dtype=mf.int64), (3,))


@pytest.mark.parametrize("shape,ns,fmt", [((2, 3, 4, 5), (5,), mf.channels_last),
                                          ((2, 3, 4, 5), (4, 5), mf.channels_last),
                                          ((2, 3, 2, 4, 5), (5,), mf.channels_last_3d)])
def test_rms_norm_keeps_channels_last(shape, ns, fmt):
    """A channels-last input gives a channels-last result, as PyTorch's (its result takes the input's layout)."""
    a = RNG.standard_normal(shape)
    x = _t(a, mf.float32).contiguous(memory_format=fmt)
    y = F.rms_norm(x, ns)
    assert y.is_contiguous(memory_format=fmt) and not y.is_contiguous()
    k = len(ns)
    flat = a.reshape(a.shape[:a.ndim - k] + (-1,))
    ref = (flat / np.sqrt((flat ** 2).mean(-1, keepdims=True) + np.finfo(np.float32).eps)).reshape(shape)
    np.testing.assert_allclose(_np(y), ref, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- embedding
def test_embedding_integer_weight_lookup():
    """A lookup alone takes a weight of any dtype (PyTorch's embedding is an index_select); max_norm needs the
    rows' norms, so a floating weight."""
    w = mf.tensor(np.arange(12).reshape(4, 3))
    y = F.embedding(mf.tensor([[3, 0]]), w, padding_idx=0)
    assert y.dtype == mf.int64 and y.tolist() == [[[9, 10, 11], [0, 1, 2]]]
    with pytest.raises(TypeError, match="embedding: max_norm needs a floating-point weight"):
        F.embedding(mf.tensor([1]), w, max_norm=1.0)


@pytest.mark.parametrize("norm_type", [1.0, 2.0, 3.0, float("inf")])
def test_embedding_max_norm_renormalizes_looked_up_rows(norm_type):
    """PyTorch's embedding_renorm_: each looked-up row whose norm exceeds max_norm is scaled in place by
    max_norm / (norm + 1e-7); rows not looked up and rows within max_norm stay as they were."""
    a = RNG.standard_normal((5, 4)) * 3
    a[1] *= 1e-3  # within max_norm
    w = _t(a, grad=True)
    idx = [[0, 1, 0], [3, 1, 1]]
    y = F.embedding(mf.tensor(idx), w, max_norm=1.0, norm_type=norm_type)
    ref = a.copy()
    for r in (0, 1, 3):
        n = np.linalg.norm(a[r], ord=norm_type)
        if n > 1.0:
            ref[r] = a[r] * (1.0 / (n + 1e-7))
    np.testing.assert_allclose(_np(w), ref, rtol=1e-12)
    np.testing.assert_allclose(_np(y), ref[np.array(idx)], rtol=1e-12)
    y.sum().backward()  # each row's gradient: its count of lookups
    np.testing.assert_array_equal(_np(w.grad)[:, 0], [2, 3, 0, 1, 0])


# ---------------------------------------------------------------- embedding_bag
def test_embedding_bag_old_argument_order_and_errors():
    """PyTorch still takes embedding_bag(weight, input, ...) (an int64 'weight' with a floating 'input' are swapped,
    with its deprecation warning); max mode refuses sparse=True (ValueError); per_sample_weights must have the
    weight's dtype (RuntimeError); an index out of range is a RuntimeError there (embedding's an IndexError)."""
    w = _t(np.arange(12.0).reshape(4, 3))
    idx, off = mf.tensor([1, 3, 2]), mf.tensor([0, 2])
    with pytest.warns(UserWarning, match="Argument order of nn.functional.embedding_bag was changed"):
        y = F.embedding_bag(w, idx, off, mode="sum")
    np.testing.assert_array_equal(_np(y), [[12, 14, 16], [6, 7, 8]])
    with pytest.raises(ValueError, match="embedding_bag: max mode does not support sparse weights"):
        F.embedding_bag(idx, w, off, mode="max", sparse=True)
    with pytest.raises(RuntimeError, match="embedding_bag: per_sample_weights must have the weight's dtype"):
        F.embedding_bag(idx, w, off, mode="sum", per_sample_weights=mf.ones(3, dtype=mf.float32))
    with pytest.raises(RuntimeError, match="index 4 at position 1 is out of range"):
        F.embedding_bag(mf.tensor([1, 4]), w, mf.tensor([0]))
    with pytest.raises(IndexError, match="index 4 at position 1 is out of range"):
        F.embedding(mf.tensor([1, 4]), w)


def test_embedding_bag_scale_grad_by_freq_documented_rule():
    """scale_grad_by_freq divides each row's gradient by its index's count in the mini-batch (PyTorch's documented
    rule; its CPU kernel scales some rows by another index's count): sum of [2, 1] and [1, 3] with a gradient of
    ones gives row 1: 2/2, rows 2 and 3: 1/1."""
    w = _t(np.ones((4, 2)), grad=True)
    F.embedding_bag(mf.tensor([2, 1, 1, 3]), w, mf.tensor([0, 2]), mode="sum", scale_grad_by_freq=True).sum().backward()
    np.testing.assert_array_equal(_np(w.grad)[:, 0], [0, 1, 1, 1])


# ---------------------------------------------------------------- one_hot, pairwise_distance, cosine_similarity
def test_one_hot_num_classes_type():
    """num_classes must be an int (PyTorch's TypeError for a float), >= -1 (ValueError/RuntimeError)."""
    with pytest.raises(TypeError, match="one_hot: num_classes must be an int, got float"):
        F.one_hot(mf.tensor([0, 1]), 3.0)
    with pytest.raises(ValueError, match="num_classes must be an int >= -1"):
        F.one_hot(mf.tensor([0, 1]), -2)
    assert F.one_hot(mf.tensor([[1], [0]])).tolist() == [[[0, 1]], [[1, 0]]]


@pytest.mark.parametrize("p", [-1.0, -2.0, float("-inf"), 0.5])
def test_pairwise_distance_any_p(p):
    """pairwise_distance is (x1 - x2 + eps).norm(p, dim=-1): a negative p is taken, as Tensor.norm takes it."""
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((1, 4))
    x = _t(a, grad=True)
    y = F.pairwise_distance(x, _t(b), p=p, eps=1e-6)
    ref = _pnorm(a - b + 1e-6, p, (1,))[:, 0]
    np.testing.assert_allclose(_np(y), ref, rtol=1e-10)
    y.sum().backward()
    num = _numgrad(lambda c: _pnorm(c - b + 1e-6, p, (1,)).sum(), a)
    np.testing.assert_allclose(_np(x.grad), num, rtol=1e-5, atol=1e-7)


def test_pairwise_distance_integer_inputs():
    """Integer inputs: x1 - x2 + eps is floating (the default dtype), as PyTorch's."""
    y = F.pairwise_distance(mf.tensor([[1, 2]]), mf.tensor([[4, 6]]), eps=0.0)
    assert y.dtype == mf.float32 and y.tolist() == [5.0]
    with pytest.raises(RuntimeError, match=r"pairwise_distance: shapes \(4, 5\) and \(3,\) cannot be broadcast"):
        F.pairwise_distance(mf.ones(4, 5), mf.ones(3))


def test_cosine_similarity_infinite_norm_gives_zero():
    """Each input is divided by max(norm, eps): an infinite norm gives x / inf = 0, as PyTorch's (not NaN)."""
    x = _t([[1e200, 2e200], [1.0, 0.0]], grad=True)
    y = F.cosine_similarity(x, _t([[1e200, 1e200], [0.0, 2.0]]))
    assert y.tolist() == [0.0, 0.0]
    y.sum().backward()
    assert np.isfinite(_np(x.grad)).all()


# ---------------------------------------------------------------- dropout family
_DROPOUTS = ["dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"]


def _drop(name, x, p, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (dropout2d/3d's deprecation warnings on some ranks)
        return getattr(F, name)(x, p, **kw)


@pytest.mark.parametrize("name", _DROPOUTS)
def test_dropout_p1_is_input_times_zero_any_dtype(name):
    """p = 1 in training: input * 0 (PyTorch's), for integer inputs too, inf and NaN giving NaN; in place it is
    the input, zeroed."""
    shape = (2, 3, 2, 2, 2) if name == "dropout3d" else (2, 3, 4)
    y = _drop(name, mf.ones(shape, dtype=mf.int64), 1.0, training=True)
    assert y.dtype == mf.int64 and y.shape == shape and not y.numpy().any()
    a = np.ones(shape)
    a.flat[0], a.flat[1] = np.inf, np.nan
    y = _drop(name, _t(a), 1.0, training=True)
    assert np.isnan(_np(y).flat[:2]).all() and not _np(y).flat[2:].any()
    x = _t(a)
    assert _drop(name, x, 1.0, training=True, inplace=True) is x and not _np(x).flat[2:].any()


@pytest.mark.parametrize("name", _DROPOUTS)
def test_dropout_p_checks(name):
    """A bool p is taken (True is 1, as PyTorch's); a p that is no number is a TypeError; outside [0, 1] a
    ValueError."""
    x = _t(np.ones((2, 3, 2) if name == "dropout1d" else (2, 3, 2, 2, 2)))
    assert not _np(_drop(name, x, True, training=True)).any()
    with pytest.raises(TypeError, match=f"{name}: dropout probability must be a number"):
        _drop(name, x, "0.5", training=True)
    with pytest.raises(ValueError, match="between 0 and 1"):
        _drop(name, x, 1.5, training=True)


def test_dropout_modules_p_checks():
    """The modules check p as the functions: a bool passes, a string is a TypeError."""
    for cls in (mf.nn.Dropout, mf.nn.Dropout1d, mf.nn.Dropout2d, mf.nn.Dropout3d, mf.nn.AlphaDropout,
                mf.nn.FeatureAlphaDropout):
        assert cls(True).p is True
        with pytest.raises(TypeError, match=f"{cls.__name__}: dropout probability must be a number"):
            cls("0.5")
        with pytest.raises(ValueError, match="between 0 and 1"):
            cls(-0.1)


def _channels_kept(y, x, lead, p):
    """Per channel (an index into the lead leading dimensions): True kept (scaled by 1/(1-p)), False zeroed; any
    other value fails."""
    yc = _np(y).reshape(int(np.prod(y.shape[:lead])), -1)
    xc = _np(x).reshape(yc.shape)
    kept = np.all(np.isclose(yc, xc / (1 - p)), axis=1)
    assert np.all(kept | np.all(yc == 0, axis=1))
    return kept


@pytest.mark.parametrize("name,shape,lead,n_warn", [
    ("dropout2d", (40, 50, 3), 2, 1), ("dropout2d", (40, 50), 2, 1), ("dropout2d", (40, 50, 2, 2, 2), 2, 1),
    ("dropout3d", (200, 3, 2, 2), 1, 0), ("dropout3d", (200, 3), 1, 1), ("dropout3d", (2000,), 1, 1),
    ("dropout1d", (200, 3), 1, 0), ("dropout1d", (40, 50, 3), 2, 0)])
def test_channel_dropout_channels_and_scale(name, shape, lead, n_warn):
    """PyTorch's feature dropout: each channel kept with probability 1-p (scaled 1/(1-p)) or zeroed. Channels are
    dimensions (N, C) of a batched input, dimension 0 of dropout1d/3d's unbatched one (PyTorch adds the batch
    dimension); dropout2d takes any rank >= 2 (channels in dims 0, 1) and dropout3d any rank >= 1 (unbatched),
    with its deprecation warning. Wide bounds: 2000 channels, p = 0.3, kept fraction within 0.05."""
    mf.manual_seed(0)
    x = _t(RNG.standard_normal(shape) + 3.0)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        y = getattr(F, name)(x, 0.3, training=True)
    assert len(rec) == n_warn
    kept = _channels_kept(y, x, lead, 0.3)
    assert abs(kept.mean() - 0.7) < 0.05


def test_channel_dropout_needs_two_dims():
    """Dropping channels of a 0-d/1-d input (dropout2d, feature_alpha_dropout) or a 0-d one (dropout3d) is a
    RuntimeError, as PyTorch's feature dropout; with p = 0 or training=False the input comes back."""
    for name, x in (("dropout2d", mf.ones(5)), ("dropout3d", mf.ones(())), ("feature_alpha_dropout", mf.ones(5))):
        with pytest.raises(RuntimeError, match="Feature dropout requires at least 2 dimensions"):
            _drop(name, x, 0.5, training=True)
        assert _drop(name, x, 0.0, training=True) is x and _drop(name, x, 0.5, training=False) is x


def test_alpha_dropout_statistics():
    """alpha_dropout keeps a standard normal input's mean 0 and variance 1 (SELU's self-normalization, PyTorch's
    affine a(x*keep + alpha'(1-keep)) + b with alpha' = -1.7581); dropped elements all take one value.
    feature_alpha_dropout draws once per (N, C) channel. Wide bounds: 40000 elements."""
    mf.manual_seed(0)
    x = _t(RNG.standard_normal((200, 200)))
    y = _np(F.alpha_dropout(x, 0.2, training=True))
    assert abs(y.mean()) < 0.05 and abs(y.var() - 1) < 0.05
    a = 1 / np.sqrt((1.7580993408473766 ** 2 * 0.2 + 1) * 0.8)
    dropped_value = a * -1.7580993408473766 + a * 1.7580993408473766 * 0.2
    kept = np.isclose(y, a * _np(x) + a * 1.7580993408473766 * 0.2)
    assert np.all(kept | np.isclose(y, dropped_value)) and abs(kept.mean() - 0.8) < 0.02
    z = _np(F.feature_alpha_dropout(_t(np.zeros((50, 40, 3))), 0.2, training=True)).reshape(2000, 3)
    assert np.all(z == z[:, :1])  # one draw per channel


# ---------------------------------------------------------------- linear, bilinear
@pytest.mark.parametrize("xshape,bias", [((4, 3), None), ((3,), None), ((2, 4, 3), None), ((3,), ()),
                                         ((2, 4, 3), ())])
def test_linear_one_d_weight(xshape, bias):
    """A 1-D weight (in_features,) is PyTorch's matmul(input, weight): the output drops the feature dimension; a
    bias broadcasts onto it."""
    a, w = RNG.standard_normal(xshape), RNG.standard_normal(3)
    b = None if bias is None else RNG.standard_normal(bias)
    x, wt = _t(a, grad=True), _t(w, grad=True)
    bt = None if b is None else _t(b, grad=True)
    y = F.linear(x, wt, bt)
    ref = a @ w + (0 if b is None else b)
    assert y.shape == ref.shape
    np.testing.assert_allclose(_np(y), ref, rtol=1e-12)
    g = RNG.standard_normal(ref.shape)
    (y * _t(g)).sum().backward()
    np.testing.assert_allclose(_np(x.grad), np.multiply.outer(g, w), rtol=1e-12)
    np.testing.assert_allclose(_np(wt.grad), np.tensordot(g, a, axes=g.ndim), rtol=1e-12)
    if b is not None:
        np.testing.assert_allclose(_np(bt.grad), g.sum(), rtol=1e-12)


@pytest.mark.parametrize("bshape", [(), (1,), (4, 1), (1, 2), (4, 2)])
def test_linear_bias_broadcasts(bshape):
    """PyTorch's linear adds the bias with broadcasting (addmm / add): a 0-d, (1,), (N, 1) or (N, out) bias is
    taken; its gradient is the output's summed over the broadcast dimensions. One that would grow the output is
    an error."""
    a, w, b = RNG.standard_normal((4, 3)), RNG.standard_normal((2, 3)), RNG.standard_normal(bshape)
    bt = _t(b, grad=True)
    y = F.linear(_t(a), _t(w), bt)
    np.testing.assert_allclose(_np(y), a @ w.T + b, rtol=1e-12)
    y.sum().backward()
    np.testing.assert_allclose(_np(bt.grad), np.full(bshape, 8.0 / max(b.size, 1)), rtol=1e-12)
    with pytest.raises(RuntimeError, match=r"linear: bias must have shape \(2,\) .* got shape \(3, 4, 2\)"):
        F.linear(_t(a), _t(w), _t(np.ones((3, 4, 2))))


def test_embedding_argument_errors_are_assertion_errors():
    """PyTorch asserts padding_idx within [-num_embeddings, num_embeddings), _weight's shape and from_pretrained's
    2-D table (AssertionError); here they are AssertionErrors and ValueErrors both."""
    w = _t(np.ones((4, 2)))
    for fn in (lambda: F.embedding(mf.tensor([0]), w, padding_idx=4), lambda: mf.nn.Embedding(4, 2, padding_idx=-5),
               lambda: mf.nn.EmbeddingBag(4, 2, padding_idx=4), lambda: mf.nn.Embedding(3, 2, _weight=w),
               lambda: mf.nn.Embedding.from_pretrained(_t(np.ones(3))),
               lambda: mf.nn.EmbeddingBag.from_pretrained(_t(np.ones(3)))):
        with pytest.raises(AssertionError) as e:
            fn()
        assert isinstance(e.value, ValueError) and "mbedding" in str(e.value)
    # a negative padding_idx counts from the end: row 3, whose gradient is withheld
    w = _t(np.ones((4, 2)), grad=True)
    F.embedding(mf.tensor([3, 1, 3]), w, padding_idx=-1).sum().backward()
    np.testing.assert_array_equal(_np(w.grad)[:, 0], [0, 1, 0, 0])


@pytest.mark.parametrize("name", ["alpha_dropout", "feature_alpha_dropout", "dropout", "dropout2d"])
def test_dropout_keeps_channels_last(name):
    """A channels-last input gives a channels-last result (PyTorch's elementwise results take the input's
    layout), the values those of the same draw on the contiguous input."""
    a = RNG.standard_normal((2, 3, 4, 5))
    x = _t(a, mf.float32).contiguous(memory_format=mf.channels_last)
    mf.manual_seed(3)
    y = getattr(F, name)(x, 0.4, training=True)
    assert y.is_contiguous(memory_format=mf.channels_last) and not y.is_contiguous()
    mf.manual_seed(3)
    ref = getattr(F, name)(_t(a, mf.float32), 0.4, training=True)
    np.testing.assert_array_equal(_np(y), _np(ref))


def test_toplevel_feature_dropouts_take_any_rank_when_nothing_is_dropped():
    """torch.feature_dropout / feature_alpha_dropout (and their in-place forms) ask for 2 dimensions only when
    something is dropped: p = 0 gives the input, p = 1 its zeros, for a 0-d or 1-d input too, as PyTorch's."""
    for fn in (mf.feature_dropout, mf.feature_dropout_, mf.feature_alpha_dropout, mf.feature_alpha_dropout_):
        for shape in ((), (5,)):
            assert _np(fn(mf.full(shape, 2.0), 0.0, True)).tolist() == np.full(shape, 2.0).tolist()
            assert not _np(fn(mf.full(shape, 2.0), 1.0, True)).any()
        with pytest.raises(RuntimeError, match="Feature dropout requires at least 2 dimensions"):
            fn(mf.ones(5), 0.5, True)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_scale_fraction_and_gradient(p):
    """F.dropout in training zeroes each element with probability p and scales the rest by exactly 1/(1-p); the
    gradient is that same mask over (1-p). Wide bounds: 40000 elements, dropped fraction within 0.02. The same
    seed gives the same mask; training=False gives the input itself."""
    a = RNG.uniform(1.0, 2.0, (200, 200)).astype(np.float32)
    x = _t(a, mf.float32, grad=True)
    mf.manual_seed(7)
    y = F.dropout(x, p)
    yv = _np(y)
    kept = yv != 0
    assert abs((~kept).mean() - p) < 0.02
    np.testing.assert_allclose(yv[kept], a[kept] / np.float32(1 - p), rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(_np(x.grad), kept / np.float32(1 - p), rtol=1e-6)
    mf.manual_seed(7)
    np.testing.assert_array_equal(_np(F.dropout(_t(a, mf.float32), p)) != 0, kept)
    assert F.dropout(x, p, training=False) is x
