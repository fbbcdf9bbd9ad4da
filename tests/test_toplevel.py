"""minifused.toplevel: PyTorch's top-level spellings. The functional forms with ATen's signatures (positional
calls exactly as torch.<name>'s) against the functional results; the in-place forms mutate and return their
input, with NumPy float64 values; the *_copy forms copy; creation helpers, the trapezoid rule, the legacy tensor
types, the runtime switches and the errors. The gpu tests compare the cuda path with PyTorch on the GPU."""
import array
import math
import warnings

import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
from minifused.testing import gradcheck


def t(a, **kw):
    return mf.tensor(np.asarray(a), **kw)


def f64(*shape, seed=0, requires_grad=True):
    return mf.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=requires_grad)


def close(a, b, tol=1e-6):
    np.testing.assert_allclose(np.asarray(a.numpy() if isinstance(a, mf.Tensor) else a, np.float64),
                               np.asarray(b.numpy() if isinstance(b, mf.Tensor) else b, np.float64),
                               rtol=tol, atol=tol)


def test_constants_and_dtypes():
    assert (mf.pi, mf.e, mf.inf) == (math.pi, math.e, math.inf) and math.isnan(mf.nan) and mf.newaxis is None
    assert mf.arange(3.0)[:, mf.newaxis].shape == (3, 1)
    assert mf.short == np.int16 and mf.zeros(2, dtype=mf.short).dtype == np.int16
    u = mf.tensor([1, 2, 3], dtype=mf.uint16)
    assert (u + u).dtype == mf.uint16 and (u * 2).tolist() == [2, 4, 6] and mf.uint64 == np.uint64


# ---------------------------------------------------------------- the functional forms, ATen's signatures
def test_conv_and_pool_forms_take_atens_positional_arguments(rng):
    x2, w2, b = t(rng.standard_normal((2, 3, 6, 6)).astype(np.float32)), \
        t(rng.standard_normal((4, 3, 3, 3)).astype(np.float32)), t(rng.standard_normal(4).astype(np.float32))
    close(mf.conv2d(x2, w2, b, 2, 1, 1, 1), F.conv2d(x2, w2, b, stride=2, padding=1))
    close(mf.convolution(x2, w2, b, [2, 2], [1, 1], [1, 1], False, [0, 0], 1), F.conv2d(x2, w2, b, 2, 1))
    x1, wt = t(rng.standard_normal((2, 3, 8)).astype(np.float32)), t(rng.standard_normal((3, 2, 3)).astype(np.float32))
    close(mf.convolution(x1, wt, None, [2], [1], [1], True, [1], 1), F.conv_transpose1d(x1, wt, None, 2, 1, 1))
    # ATen's pools: stride=() is the kernel size, there is no return_indices, the 1-D one with indices is its own op
    close(mf.max_pool2d(x2, 2), F.max_pool2d(x2, 2))
    close(mf.max_pool2d(x2, 3, 1, 1, 1, True), F.max_pool2d(x2, 3, 1, 1, 1, True))
    with pytest.raises(TypeError):
        mf.max_pool2d(x2, 2, return_indices=True)
    out, idx = mf.max_pool1d_with_indices(x1, 2)
    ref_out, ref_idx = F.max_pool1d(x1, 2, return_indices=True)
    close(out, ref_out)
    assert idx.tolist() == ref_idx.tolist()
    close(mf.avg_pool1d(x1, 3, 2, 1, False, False), F.avg_pool1d(x1, 3, 2, 1, count_include_pad=False))
    vals, where = mf.adaptive_max_pool1d(x1, 3)  # always a pair, as ATen's
    close(vals, F.adaptive_max_pool1d(x1, 3))
    assert where.dtype == mf.int64
    close(mf.constant_pad_nd(x1, [1, 2, -1, 0], 3.0), np.pad(x1.numpy()[:, 1:], ((0, 0), (0, 0), (1, 2)),
                                                             constant_values=3.0))


def test_norm_forms_order_their_arguments_as_aten(rng):
    x = t(rng.standard_normal((4, 3, 5)).astype(np.float32))
    w, b = t(rng.uniform(0.5, 1.5, 3).astype(np.float32)), t(rng.standard_normal(3).astype(np.float32))
    mean, var = mf.zeros(3), mf.ones(3)
    # torch.batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled)
    y = mf.batch_norm(x, w, b, mean, var, True, 0.5, 1e-5, True)
    xs = x.numpy().astype(np.float64)
    ref = (xs - xs.mean((0, 2), keepdims=True)) / np.sqrt(xs.var((0, 2), keepdims=True) + 1e-5)
    close(y, ref * w.numpy()[:, None] + b.numpy()[:, None], 1e-5)
    close(mean, 0.5 * xs.mean((0, 2)), 1e-6)  # the running statistics were updated in place
    with pytest.raises(TypeError):
        mf.batch_norm(x, w, b, mean, var, True)  # every argument is required, as ATen's
    close(mf.instance_norm(x, w, b, None, None, True, 0.1, 1e-5, False), F.instance_norm(x, weight=w, bias=b))
    close(mf.layer_norm(x, [5], None, None, 1e-3, True), F.layer_norm(x, (5,), eps=1e-3))
    close(mf.group_norm(x, 3, w, b, 1e-5, True), F.group_norm(x, 3, w, b))


def test_dropout_forms_need_train_and_in_place_ones_return_their_input():
    x = mf.ones(64, 8)
    with pytest.raises(TypeError):
        mf.dropout(x, 0.5)
    assert mf.dropout(x, 0.5, False) is x
    y = mf.dropout(x, 0.5, True)
    assert set(np.unique(y.numpy())) <= {0.0, 2.0} and 0 < (y.numpy() == 0).mean() < 1
    z = mf.ones(64, 8)
    assert mf.dropout_(z, 0.25, True) is z and set(np.unique(z.numpy())) <= {0.0, np.float32(4.0 / 3.0)}
    # feature dropout drops whole channels (dim 1) of any input of 2 dims or more, and only in training checks that
    c = mf.feature_dropout(mf.ones(8, 16, 5), 0.5, True).numpy()
    assert (c.min(-1) == c.max(-1)).all() and set(np.unique(c)) == {0.0, 2.0}
    assert mf.feature_dropout(mf.ones(4), 0.5, False).tolist() == [1.0] * 4
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        mf.feature_dropout(mf.ones(4), 0.5, True)
    v = mf.ones(8, 16, 5)
    assert mf.feature_dropout_(v, 0.5, True) is v and (v.numpy().min(-1) == v.numpy().max(-1)).all()
    a = mf.ones(1000)
    assert mf.alpha_dropout_(a, 0.5, True) is a and len(np.unique(a.numpy())) == 2  # kept and dropped values
    fa = mf.ones(32, 8, 3)
    assert mf.feature_alpha_dropout_(fa, 0.5, True) is fa
    assert (fa.numpy().min(-1) == fa.numpy().max(-1)).all() and len(np.unique(fa.numpy())) == 2


def test_alpha_dropout_in_place_is_recorded_for_autograd():
    x = f64(200, seed=1)
    h = x * 1.0
    mf.manual_seed(3)
    mf.alpha_dropout_(h, 0.5, True)
    h.sum().backward()
    g = x.grad.numpy()
    a = 1.0 / math.sqrt((1.7580993408473766 ** 2 * 0.5 + 1) * 0.5)
    assert set(np.round(np.unique(g), 12)) == {0.0, round(a, 12)}


def test_embedding_forms(rng):
    w = t(rng.standard_normal((6, 2)))
    idx = mf.tensor([[1, 5], [0, 2]])
    close(mf.embedding(w, idx), w.numpy()[idx.numpy()])  # the weight first
    w.requires_grad_()
    mf.embedding(w, idx, 0).sum().backward()  # padding_idx as a row: no gradient there
    assert w.grad.numpy()[:, 0].tolist() == [0, 1, 1, 0, 0, 1]
    flat, offsets = mf.tensor([0, 2, 1, 5, 3]), mf.tensor([0, 2, 2])
    wd = w.detach()
    for mode, name in enumerate(("sum", "mean", "max")):
        out, offset2bag, bag_size, max_indices = mf.embedding_bag(wd, flat, offsets, False, mode, False, None, False,
                                                                   1)
        close(out, F.embedding_bag(flat, wd, offsets, mode=name, padding_idx=1))
        assert offset2bag.tolist() == [0, 0, 2, 2, 2] and bag_size.tolist() == [2, 0, 2]
        if mode == 2:  # the row of each maximum; 0 for the empty bag; the padding row 1 never counts
            def rows_of_max(rows):
                return [rows[i] for i in wd.numpy()[rows].argmax(0)]

            assert max_indices.tolist() == [rows_of_max([0, 2]), [0, 0], rows_of_max([5, 3])]
        else:
            assert max_indices.tolist() == [2, 0, 2]



def test_embedding_renorm_(rng):
    # the rows named (a repeat counts once) whose norm passes max_norm scaled to max_norm / (norm + 1e-7), in place
    w0 = rng.standard_normal((5, 3)) * 2
    for norm_type, ord_ in ((1, 1), (2.0, 2)):
        w = t(w0)
        assert mf.embedding_renorm_(w, mf.tensor([[1, 1], [4, 3]], dtype=mf.int32), 1.5, norm_type) is w
        norms = np.linalg.norm(w0, ord=ord_, axis=1)
        scale = np.where((np.arange(5) >= 1) & (np.arange(5) != 2) & (norms > 1.5), 1.5 / (norms + 1e-7), 1.0)
        close(w, w0 * scale[:, None], 1e-12)
        assert w._version == 1 and 0 < np.sum(scale < 1) < 5
    f = mf.nn.Embedding.from_pretrained(t(w0), max_norm=1.5)  # the same scaling as a max_norm lookup's
    f(mf.tensor([4, 3, 1]))
    close(w, f.weight, 1e-12)
    p = mf.zeros(5, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="embedding_renorm_: a leaf Variable that requires grad"):
        mf.embedding_renorm_(p, mf.tensor([0]), 1.0, 2.0)
    with mf.no_grad():
        mf.embedding_renorm_(p, mf.tensor([0]), 1.0, 2.0)
    with pytest.raises(IndexError, match=r"embedding_renorm_: index 5 at position 1 is out of range \[0, 5\)"):
        mf.embedding_renorm_(w, mf.tensor([0, 5]), 1.0, 2.0)
    with pytest.raises(RuntimeError, match="embedding_renorm_: expected integer indices"):
        mf.embedding_renorm_(w, mf.tensor([0.0]), 1.0, 2.0)
    with pytest.raises(RuntimeError, match=r"embedding_renorm_: expected a 2-D floating-point input .* shape \(3,\)"):
        mf.embedding_renorm_(w[0], mf.tensor([0]), 1.0, 2.0)
    with pytest.raises(TypeError, match="embedding_renorm_: argument 'max_norm' must be a number, not NoneType"):
        mf.embedding_renorm_(w, mf.tensor([0]), None, 2.0)
    assert w.tolist() == t(w0 * scale[:, None]).tolist()  # refused calls left it as it was

def test_activation_forms(rng):
    x = t(rng.standard_normal((3, 4)))
    xs = x.numpy()
    close(mf.threshold(x, 0.1, 20.0), np.where(xs > 0.1, xs, 20.0))
    close(mf.hardshrink(x, 0.3), np.where(np.abs(xs) > 0.3, xs, 0.0))
    close(mf.celu(x, 0.5), np.where(xs > 0, xs, 0.5 * np.expm1(xs / 0.5)))
    close(mf.selu(x), F.selu(x))
    close(mf.rrelu(x, 0.1, 0.3), np.where(xs >= 0, xs, 0.2 * xs))
    close(mf.prelu(x, mf.tensor([0.25], dtype=x.dtype)), np.where(xs >= 0, xs, 0.25 * xs))  # (one dtype: no promotion)
    for name, ref in (("relu_", np.maximum(xs, 0)), ("selu_", F.selu(x).numpy()), ("celu_", F.celu(x).numpy())):
        y = x.clone()
        assert getattr(mf, name)(y) is y
        close(y, ref)
    y = x.clone()
    assert mf.threshold_(y, 0.0, -1.0) is y and mf.rrelu_(y) is y
    with pytest.raises(NotImplementedError, match="generator"):
        mf.rrelu(x, training=True, generator=mf.Generator())


def test_losses_take_reduction_as_an_int(rng):
    lp = t(np.log(rng.dirichlet(np.ones(5), 3)))
    tp = t(rng.dirichlet(np.ones(5), 3))
    elem = tp.numpy() * (np.log(tp.numpy()) - lp.numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (ATen's mean gives no warning, F.kl_div's 'mean' does)
        close(mf.kl_div(lp, tp, 1), elem.mean())  # 1: the mean over every element
    close(mf.kl_div(lp, tp, 0), elem)
    # left out, PyTorch's binding reads ATen's default reduction as 0: per-element losses
    close(mf.kl_div(lp, tp), elem)
    y = t(np.sign(rng.standard_normal(3)))
    close(mf.binary_cross_entropy_with_logits(lp, tp), F.binary_cross_entropy_with_logits(lp, tp, reduction="none"))
    close(mf.cosine_embedding_loss(lp, tp, y), F.cosine_embedding_loss(lp, tp, y, reduction="none"))
    close(mf.hinge_embedding_loss(lp, tp), F.hinge_embedding_loss(lp, tp, reduction="none"))
    close(mf.margin_ranking_loss(lp[0], tp[0], y.repeat(2)[:5]),
          F.margin_ranking_loss(lp[0], tp[0], y.repeat(2)[:5], reduction="none"))
    close(mf.triplet_margin_loss(lp, tp, tp.flip(0)), F.triplet_margin_loss(lp, tp, tp.flip(0), reduction="none"))
    close(mf.kl_div(lp, mf.log(tp), 2, log_target=True), elem.sum())
    y = t(np.sign(rng.standard_normal(3)))
    for red, name in enumerate(("none", "mean", "sum")):
        close(mf.binary_cross_entropy_with_logits(lp, tp, None, None, red),
              F.binary_cross_entropy_with_logits(lp, tp, reduction=name))
        close(mf.cosine_embedding_loss(lp, tp, y, 0.1, red), F.cosine_embedding_loss(lp, tp, y, 0.1, reduction=name))
        close(mf.hinge_embedding_loss(lp[0], y.repeat(2)[:5], 0.5, red),
              F.hinge_embedding_loss(lp[0], y.repeat(2)[:5], 0.5, reduction=name))
        close(mf.margin_ranking_loss(lp[0], tp[0], y.repeat(2)[:5], 0.1, red),
              F.margin_ranking_loss(lp[0], tp[0], y.repeat(2)[:5], 0.1, reduction=name))
        close(mf.triplet_margin_loss(lp, tp, tp.flip(0), 1.0, 2.0, 1e-6, True, red),
              F.triplet_margin_loss(lp, tp, tp.flip(0), swap=True, reduction=name))
        close(mf.poisson_nll_loss(lp, tp * 3, True, True, 1e-8, red),
              F.poisson_nll_loss(lp, tp * 3, True, True, eps=1e-8, reduction=name))
    with pytest.raises(TypeError, match="reduction"):
        mf.kl_div(lp, tp, "sum")


# ---------------------------------------------------------------- in-place and query forms of Tensor methods
_UNARY = {"abs_": np.abs, "ceil_": np.ceil, "floor_": np.floor, "trunc_": np.trunc, "frac_": lambda a: a - np.trunc(a),
          "cos_": np.cos, "cosh_": np.cosh, "sin_": np.sin, "sinh_": np.sinh, "tan_": np.tan, "tanh_": np.tanh,
          "sigmoid_": lambda a: 1 / (1 + np.exp(-a)), "exp_": np.exp, "exp2_": np.exp2, "expm1_": np.expm1,
          "neg_": np.negative, "negative_": np.negative, "reciprocal_": np.reciprocal, "square_": np.square,
          "sinc_": lambda a: np.sinc(a), "erf_": lambda a: np.vectorize(math.erf)(a),
          "erfc_": lambda a: np.vectorize(math.erfc)(a), "deg2rad_": np.deg2rad, "rad2deg_": np.rad2deg,
          "zero_": np.zeros_like, "fix_": np.trunc, "round_": np.round}
_POSITIVE = {"acos_": np.arccos, "asin_": np.arcsin, "atan_": np.arctan, "log_": np.log, "log10_": np.log10,
             "log1p_": np.log1p, "log2_": np.log2, "rsqrt_": lambda a: 1 / np.sqrt(a), "sqrt_": np.sqrt,
             "logit_": lambda a: np.log(a / (1 - a))}


@pytest.mark.parametrize("name", sorted(_UNARY) + sorted(_POSITIVE))
def test_unary_in_place_forms_write_into_their_input(name, rng):
    values = rng.uniform(0.05, 0.95, (3, 4)) if name in _POSITIVE else rng.standard_normal((3, 4)) * 2
    x = t(values)
    version = x._version
    assert getattr(mf, name)(x) is x and x._version > version
    close(x, {**_UNARY, **_POSITIVE}[name](values), 1e-12)
    with pytest.raises(TypeError, match=f"{name}\\(\\): argument 'input' must be a Tensor, not list"):
        getattr(mf, name)([1.0, 2.0])


def test_in_place_forms_with_arguments(rng):
    a = rng.standard_normal((3, 4))
    cases = [(mf.clamp_, (-0.5, 0.5), np.clip(a, -0.5, 0.5)), (mf.clip_, (None, 0.2), np.minimum(a, 0.2)),
             (mf.clamp_min_, (0.2,), np.maximum(a, 0.2)), (mf.clamp_max_, (0.2,), np.minimum(a, 0.2)),
             (mf.xlogy_, (3.0,), a * np.log(3.0)), (mf.fill_, (2.5,), np.full_like(a, 2.5)),
             (mf.ldexp_, (t([1, 2, 3, -1]),), a * 2.0 ** np.array([1, 2, 3, -1]))]
    for fn, args, ref in cases:
        x = t(a)
        assert fn(x, *args) is x, fn.__name__
        close(x, ref, 1e-12)
    x = t(a)
    assert mf.round_(x, decimals=2) is x
    close(x, np.round(a, 2), 1e-12)
    p = t(rng.uniform(0.05, 0.95, 4))
    ref = np.clip(p.numpy(), 0.2, 0.8)
    close(mf.logit_(p, 0.2), np.log(ref / (1 - ref)), 1e-12)
    x = t([np.nan, np.inf, -np.inf, 1.0])
    assert mf.nan_to_num_(x, 1.0, 2.0, -2.0) is x and x.tolist() == [1.0, 2.0, -2.0, 1.0]
    x = t(a)
    assert mf.fill_(x, mf.tensor(3.0)) is x and (x.numpy() == 3.0).all()
    with pytest.raises(ValueError, match="0-dimension value tensor"):
        mf.fill_(x, mf.ones(2))


def test_in_place_form_is_recorded_like_the_method():
    x = f64(5)
    h = x * 2
    mf.exp_(h)
    h.sum().backward()
    close(x.grad, 2 * np.exp(2 * x.detach().numpy()), 1e-12)


def test_fill_detach_fix_and_queries(rng):
    x = t(rng.standard_normal((2, 3)))
    f = mf.fill(x, 2.5)
    assert f is not x and f.tolist() == [[2.5] * 3] * 2 and mf.fill(mf.tensor([1, 2]), 2.7).tolist() == [2, 2]
    v = mf.tensor(2.0, dtype=mf.float64, requires_grad=True)
    mf.fill(x, v).sum().backward()
    assert v.grad.item() == 6.0  # the value gets the summed gradient
    close(mf.fix(x), np.trunc(x.numpy()))
    y = f64(3) * 2
    assert not mf.detach(y).requires_grad and mf.detach_(y) is y and not y.requires_grad
    assert mf.is_nonzero(mf.tensor([1.0])) and not mf.is_nonzero(mf.tensor(0))
    with pytest.raises(RuntimeError, match="ambiguous"):
        mf.is_nonzero(x)
    assert mf.is_signed(x) and not mf.is_signed(mf.zeros(2, dtype=mf.uint8))
    assert mf.is_same_size(x, mf.zeros(2, 3)) and not mf.is_same_size(x, mf.zeros(3, 2))
    assert mf.get_device(x) == -1 and not mf.is_inference(x) and not mf.is_conj(x) and not mf.is_neg(x)
    assert mf.resolve_conj(x) is x and mf.resolve_neg(x) is x


# ---------------------------------------------------------------- *_copy
def test_copy_forms_copy_the_views_values(rng):
    a = rng.standard_normal((2, 3, 4))
    x = t(a)
    cases = {
        "view_copy": (mf.view_copy(x, (4, 6)), a.reshape(4, 6)),
        "permute_copy": (mf.permute_copy(x, (2, 0, 1)), a.transpose(2, 0, 1)),
        "expand_copy": (mf.expand_copy(x[:, :1], (2, 5, 4)), np.broadcast_to(a[:, :1], (2, 5, 4))),
        "t_copy": (mf.t_copy(x[0]), a[0].T),
        "transpose_copy": (mf.transpose_copy(x, 0, 2), a.transpose(2, 1, 0)),
        "unsqueeze_copy": (mf.unsqueeze_copy(x, -1), a[..., None]),
        "squeeze_copy": (mf.squeeze_copy(x[:, :1], 1), a[:, 0]),
        "select_copy": (mf.select_copy(x, 1, -1), a[:, -1]),
        "slice_copy": (mf.slice_copy(x, 2, 1, None, 2), a[:, :, 1::2]),
        "unfold_copy": (mf.unfold_copy(x, 2, 2, 2), a.reshape(2, 3, 2, 2)),
        "diagonal_copy": (mf.diagonal_copy(x, 1, 1, 2), np.diagonal(a, 1, 1, 2)),
        "detach_copy": (mf.detach_copy(x), a),
        "alias_copy": (mf.alias_copy(x), a),
        "narrow_copy": (mf.narrow_copy(x, 1, 1, 2), a[:, 1:3]),
    }
    for name, (got, ref) in cases.items():
        assert got.shape == ref.shape and got.is_contiguous(), name
        close(got, ref, 0)
        got.fill_(7.0)  # a copy: the source is untouched
        assert np.array_equal(x.numpy(), a), name
    parts = mf.split_copy(x, 3, 2)
    assert [p.shape for p in parts] == [(2, 3, 3), (2, 3, 1)]
    assert [p.shape for p in mf.split_with_sizes_copy(x, [1, 3], 2)] == [(2, 3, 1), (2, 3, 3)]
    assert [p.shape for p in mf.unbind_copy(x, 1)] == [(2, 4)] * 3
    bits = mf.view_copy(mf.tensor([1.0], dtype=mf.float32), mf.int32)
    assert bits.tolist() == [0x3F800000]


def test_copy_forms_are_differentiable():
    assert gradcheck(lambda x: mf.permute_copy(x, (1, 0, 2)), (f64(2, 3, 2),))
    assert gradcheck(lambda x: mf.slice_copy(x, 1, 0, 3, 2), (f64(2, 4),))
    assert gradcheck(lambda x: mf.expand_copy(x, (3, -1)), (f64(1, 4),))
    assert gradcheck(lambda x: mf.unfold_copy(x, 0, 2, 1), (f64(4),))
    assert not mf.detach_copy(f64(3)).requires_grad and mf.alias_copy(f64(3)).requires_grad


# ---------------------------------------------------------------- creation helpers and the trapezoid rule
def test_creation_helpers():
    s = mf.scalar_tensor(3)
    assert s.shape == () and s.dtype == mf.float32 and s.item() == 3.0
    assert mf.scalar_tensor(2, dtype=mf.int64).dtype == mf.int64
    assert mf.scalar_tensor(1.0, requires_grad=True).requires_grad
    e = mf.empty_strided((2, 3), (1, 2))
    assert e.shape == (2, 3) and e.stride() == (1, 2) and not e.is_contiguous()
    buf = array.array("i", [1, 2, 3, 4])
    fb = mf.frombuffer(buf, dtype=mf.int32)
    assert fb.tolist() == [1, 2, 3, 4] and mf.frombuffer(buf, dtype=mf.int32, count=2, offset=4).tolist() == [2, 3]
    fb[0] = 9
    assert buf[0] == 9  # memory shared, as PyTorch's
    with pytest.warns(UserWarning, match="deprecated"):
        r = mf.range(1, 4)
    assert r.dtype == mf.float32 and r.tolist() == [1.0, 2.0, 3.0, 4.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        close(mf.range(0, 0.9, 0.3), [0, 0.3, 0.6, 0.9])  # the end counts, within rounding, as PyTorch's
        assert mf.range(4, 1, -1).tolist() == [4, 3, 2, 1] and mf.range(1, 3, dtype=mf.int64).tolist() == [1, 2, 3]
        with pytest.raises(ValueError, match="inconsistent with step sign"):
            mf.range(4, 1)
    assert mf.broadcast_shapes((2, 1), (3,)) == (2, 3) and mf.broadcast_shapes(2, (3, 1)) == (3, 2)
    assert mf.broadcast_shapes() == () and mf.broadcast_shapes((5, 1, 4), (0, 1)) == (5, 0, 4)
    with pytest.raises(RuntimeError, match="Attempting to broadcast a dimension of length 3"):
        mf.broadcast_shapes((2,), (3,))


def test_trapezoid_rule(rng):
    y = rng.standard_normal((2, 3, 4))
    close(mf.trapezoid(t(y)), np.trapezoid(y), 1e-12)
    close(mf.trapz(t(y), dx=0.5), np.trapezoid(y, dx=0.5), 1e-12)
    xs = np.array([0.0, 1.0, 3.0])
    close(mf.trapezoid(t(y), t(xs), dim=1), np.trapezoid(y, xs, axis=1), 1e-12)
    xfull = np.cumsum(np.abs(y), -1)
    close(mf.trapezoid(t(y), t(xfull)), np.trapezoid(y, xfull), 1e-12)
    areas = (y[..., 1:] + y[..., :-1]) / 2 * np.diff(xfull)
    close(mf.cumulative_trapezoid(t(y), t(xfull)), np.cumsum(areas, -1), 1e-12)
    ints = mf.trapezoid(mf.tensor([1, 2, 4]))
    assert ints.dtype == mf.float32 and ints.item() == 4.5
    assert mf.trapezoid(mf.zeros(2, 0)).tolist() == [0.0, 0.0] and mf.cumulative_trapezoid(mf.ones(1)).shape == (0,)
    assert gradcheck(lambda a, b: mf.trapezoid(a, b), (f64(2, 4), f64(4, seed=1)))
    assert gradcheck(lambda a: mf.cumulative_trapezoid(a, dx=0.3, dim=0), (f64(3, 2),))
    with pytest.raises(ValueError, match="one `x` value for each sample point"):
        mf.trapezoid(mf.ones(3), mf.ones(2))
    with pytest.raises(TypeError, match="not both"):
        mf.trapezoid(mf.ones(3), mf.ones(3), dx=1.0)


# ---------------------------------------------------------------- legacy tensor types
def test_legacy_tensor_types():
    assert mf.FloatTensor(2, 3).tolist() == [[0.0] * 3] * 2 and mf.FloatTensor().shape == (0,)
    lt = mf.LongTensor([1, 2])
    assert lt.dtype == mf.int64 and lt.tolist() == [1, 2]
    for name, dtype in (("DoubleTensor", mf.float64), ("HalfTensor", mf.float16), ("BFloat16Tensor", mf.bfloat16),
                        ("IntTensor", mf.int32), ("ShortTensor", mf.int16), ("CharTensor", mf.int8),
                        ("ByteTensor", mf.uint8), ("BoolTensor", mf.bool)):
        made = getattr(mf, name)([1, 0])
        assert made.dtype == dtype and isinstance(made, getattr(mf, name)) and not isinstance(made, mf.FloatTensor)
    x = mf.tensor([1.5, 2.0])
    assert isinstance(x, mf.FloatTensor) and not isinstance(x, mf.LongTensor) and not isinstance(3, mf.FloatTensor)
    assert mf.FloatTensor(x) is x
    with pytest.raises(TypeError, match="expected a cpu tensor of dtype int64"):
        mf.LongTensor(x)
    with pytest.raises(TypeError, match="data must be a sequence"):
        mf.FloatTensor(2.5)
    assert x.type(mf.LongTensor).tolist() == [1, 2] and x.type("torch.DoubleTensor").dtype == mf.float64
    assert x.type(mf.FloatTensor) is x and x.type() == "minifused.FloatTensor"
    with pytest.raises(ValueError, match="invalid type"):
        x.type("torch.FooTensor")


def test_cuda_legacy_tensor_types_are_their_cpu_twins_on_cuda():
    """``minifused.cuda.FloatTensor`` ...: the types, their dtypes and names, isinstance by dtype and device; on a
    machine without CUDA calling one is refused as PyTorch refuses it."""
    for name in ("FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor",
                 "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor"):
        cpu_type, cuda_type = getattr(mf, name), getattr(mf.cuda, name)
        assert cuda_type.dtype == cpu_type.dtype and cuda_type.is_cuda and not cpu_type.is_cuda
        assert repr(cuda_type) == f"<class 'minifused.cuda.{name}'>"
        assert not isinstance(mf.zeros(1, dtype=cpu_type.dtype, device="cpu"), cuda_type)
    if not mf.cuda.is_available():
        with pytest.raises(TypeError, match="minifused.cuda.FloatTensor not available"):
            mf.cuda.FloatTensor(2, 3)
    assert mf.OutOfMemoryError is mf.cuda.OutOfMemoryError  # (torch.OutOfMemoryError, PyTorch 2.5 on)


@pytest.mark.gpu
def test_cuda_legacy_tensor_types_make_cuda_tensors():
    Tensor = mf.cuda.FloatTensor  # the pattern of older scripts (GAN examples): real / fake labels
    valid = Tensor(4, 1).fill_(1.0)
    assert valid.is_cuda and valid.dtype == mf.float32 and valid.cpu().tolist() == [[1.0]] * 4
    assert isinstance(valid, Tensor) and not isinstance(valid, mf.FloatTensor)
    labels = mf.cuda.LongTensor([3, 1])
    assert labels.is_cuda and labels.dtype == mf.int64 and labels.cpu().tolist() == [3, 1]
    assert mf.cuda.LongTensor(labels) is labels
    with pytest.raises(TypeError, match="expected a cuda tensor of dtype int64"):
        mf.cuda.LongTensor(labels.cpu())
    x = mf.tensor([1.5, 2.0]).type(mf.cuda.HalfTensor)
    assert x.is_cuda and x.dtype == mf.float16 and x.type() == "minifused.cuda.HalfTensor"
    assert x.type(mf.DoubleTensor).device.type == "cpu"


# ---------------------------------------------------------------- runtime switches and names
def test_default_device_and_mode_queries(monkeypatch):
    monkeypatch.setenv("MINIFUSED_DEVICE", "cpu")  # restored after the test
    mf.set_default_device("cpu")
    assert mf.get_default_device() == mf.device("cpu") and mf.zeros(1).device.type == "cpu"
    if not mf.cuda.is_available():
        with pytest.raises(RuntimeError, match="no usable CUDA device"):
            mf.set_default_device("cuda")
    mf.set_default_device(None)
    assert not mf.is_inference_mode_enabled()
    with mf.inference_mode():
        assert mf.is_inference_mode_enabled() and not mf.is_grad_enabled()
        with mf.inference_mode(False):
            assert not mf.is_inference_mode_enabled()
        assert mf.is_inference_mode_enabled()
    assert not mf.is_inference_mode_enabled()
    assert mf.inference_mode()(mf.is_inference_mode_enabled)()
    try:
        mf.set_anomaly_enabled(True)
        assert mf.is_anomaly_enabled() and mf.is_anomaly_check_nan_enabled()
    finally:
        mf.set_anomaly_enabled(False)
    assert not mf.is_anomaly_enabled()


def test_typename_stream_event_and_grad_scaler():
    assert mf.typename(mf.zeros(2)) == "minifused.FloatTensor" and mf.typename(mf.zeros(1, dtype=mf.long)) == \
        "minifused.LongTensor"
    assert mf.typename(3) == "int" and mf.typename(mf.nn.Linear) == "minifused.nn.linear.Linear"
    assert mf.typename(mf.nn.Linear(2, 2)) == "minifused.nn.linear.Linear"
    assert mf.GradScaler is mf.amp.GradScaler and mf.Stream is mf.cuda.Stream
    assert issubclass(mf.Event, mf.cuda.Event)
    if not mf.cuda.is_available():
        with pytest.raises(RuntimeError):
            mf.Event()


# ---------------------------------------------------------------- the cuda path against PyTorch on the GPU
@pytest.mark.gpu
def test_gpu_forms_match_pytorch(torch):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    g, b = rng.uniform(0.5, 1.5, 3).astype(np.float32), rng.standard_normal(3).astype(np.float32)

    def both(fn_t, fn_m, *arrays):
        ours = fn_m(*[mf.tensor(a, device="cuda") for a in arrays])
        theirs = fn_t(*[torch.tensor(a, device="cuda") for a in arrays])
        return ours, theirs

    cases = [
        (lambda X, W: torch.conv2d(X, W, None, 1, 1), lambda X, W: mf.conv2d(X, W, None, 1, 1), x, w),
        (lambda X: torch.max_pool2d(X, 2, 2), lambda X: mf.max_pool2d(X, 2, 2), x),
        (lambda X, G, B: torch.batch_norm(X, G, B, None, None, True, 0.1, 1e-5, True),
         lambda X, G, B: mf.batch_norm(X, G, B, None, None, True, 0.1, 1e-5, True), x, g, b),
        (lambda X: torch.layer_norm(X, [8]), lambda X: mf.layer_norm(X, [8]), x),
        (lambda X: torch.exp_(X), lambda X: mf.exp_(X), x),
        (lambda X: torch.clamp_(X, -0.5, 0.5), lambda X: mf.clamp_(X, -0.5, 0.5), x),
        (lambda X: torch.trapezoid(X, dx=0.5), lambda X: mf.trapezoid(X, dx=0.5), x),
        (lambda X: torch.cumulative_trapezoid(X), lambda X: mf.cumulative_trapezoid(X), x),
        (lambda X: torch.permute_copy(X, (3, 1, 0, 2)), lambda X: mf.permute_copy(X, (3, 1, 0, 2)), x),
        (lambda X: torch.kl_div(X.log_softmax(-1), X.softmax(-1), 2),
         lambda X: mf.kl_div(X.log_softmax(-1), X.softmax(-1), 2), x),
    ]
    for fn_t, fn_m, *arrays in cases:
        ours, theirs = both(fn_t, fn_m, *arrays)
        assert ours.device.type == "cuda"
        np.testing.assert_allclose(ours.cpu().numpy(), theirs.cpu().numpy(), rtol=1e-4, atol=1e-4)
    wt = rng.standard_normal((6, 4)).astype(np.float32)
    idx, offs = np.array([0, 2, 1, 5, 3]), np.array([0, 2, 2])
    for mode in (1, 2):
        ours, theirs = both(lambda W, I, O: torch.embedding_bag(W, I, O, False, mode),
                            lambda W, I, O: mf.embedding_bag(W, I, O, False, mode), wt, idx, offs)
        np.testing.assert_allclose(ours[0].cpu().numpy(), theirs[0].cpu().numpy(), rtol=1e-6)
        if mode == 2:
            assert ours[3].cpu().tolist() == theirs[3].cpu().tolist()
    e = mf.empty_strided((2, 3), (1, 2), device="cuda")
    assert e.stride() == (1, 2) and e.device.type == "cuda"
    start, end = mf.Event(enable_timing=True), mf.Event("cuda", enable_timing=True)
    start.record()
    mf.randn(256, 256, device="cuda").sum()
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0


def test_accelerator_names_the_gpu_where_there_is_one():
    """torch.accelerator, the device-agnostic spelling scripts now use: CUDA where a GPU is present, else none."""
    if mf.cuda.is_available():
        assert mf.accelerator.is_available() and mf.accelerator.current_accelerator() == mf.device("cuda")
        assert mf.accelerator.device_count() == mf.cuda.device_count() >= 1
        assert mf.accelerator.current_device_index() == mf.cuda.current_device()
    else:
        assert not mf.accelerator.is_available() and mf.accelerator.current_accelerator() is None
        assert mf.accelerator.device_count() == 0


def test_foreach_forms_apply_the_op_to_each_tensor():
    """torch._foreach_* (EMA updates, hand-written optimizer steps): each tensor of the list takes the op, with a
    number for all or one operand each, in place for the ``_`` forms."""
    rng = np.random.default_rng(5)
    a = [rng.standard_normal(s) for s in ((3,), (2, 4))]
    b = [rng.standard_normal(s) for s in ((3,), (2, 4))]
    xs, ys = [mf.tensor(v) for v in a], [mf.tensor(v) for v in b]
    mf._foreach_lerp_(xs, ys, 0.25)
    mf._foreach_mul_(xs, [2.0, 3.0])
    mf._foreach_add_(xs, ys, alpha=0.5)
    mf._foreach_addcmul_(xs, ys, ys, value=2.0)
    for x, u, v, k in zip(xs, a, b, (2.0, 3.0)):
        np.testing.assert_allclose(x.numpy(), (u + 0.25 * (v - u)) * k + 0.5 * v + 2.0 * v * v, rtol=1e-12)
    got = mf._foreach_sub(ys, 1.0)
    np.testing.assert_allclose(got[1].numpy(), b[1] - 1.0)
    np.testing.assert_allclose([n.item() for n in mf._foreach_norm(ys)], [np.linalg.norm(v) for v in b], rtol=1e-12)
    mf._foreach_zero_(ys)
    assert all(float(y.abs().sum()) == 0.0 for y in ys)
    with pytest.raises(RuntimeError, match="expected 2 operands"):
        mf._foreach_add_(xs, [1.0])
