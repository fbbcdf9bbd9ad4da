"""The modules over the functional gaps (LPPool1d/2d, MaxUnpool1d, Bilinear, MultiLabelMarginLoss,
TripletMarginWithDistanceLoss, EmbeddingBag) and the functions' edge cases; the functions' values, gradients,
dtypes and errors are in the registry (tests/opinfo.py, FUNCTIONAL_GAP_OPS). Values are checked against float64
NumPy references or hand-derived numbers; the reprs are PyTorch's (checked against torch 2.x by hand)."""
import math
import warnings

import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
import minifused.nn as nn
from opinfo import bilinear_ref, embedding_bag_ref, multilabel_margin_ref, pdist_ref, randn


def _t(a, **kw):
    return mf.tensor(np.asarray(a, dtype=np.float64), **kw)


# ---------------------------------------------------------------- pooling forms
def test_with_indices_forms_always_return_indices():
    x = _t(randn(2, 3, 6, 8, seed=1))
    for name, kw in (("max_pool2d", {"kernel_size": 2}), ("max_pool1d", {"kernel_size": 3, "stride": 2})):
        xi = x if name == "max_pool2d" else x[:, :, 0]
        out, idx = getattr(F, name + "_with_indices")(xi, return_indices=False, **kw)
        want_out, want_idx = getattr(F, name)(xi, return_indices=True, **kw)
        np.testing.assert_array_equal(out.numpy(), want_out.numpy())
        np.testing.assert_array_equal(idx.numpy(), want_idx.numpy())
        assert idx.dtype == mf.int64
    for dims, name in ((1, "adaptive_max_pool1d"), (2, "adaptive_max_pool2d")):
        xi = x if dims == 2 else x[:, :, 0]
        out, idx = getattr(F, name + "_with_indices")(xi, 3)
        want_out, want_idx = getattr(F, name)(xi, 3, return_indices=True)
        np.testing.assert_array_equal(out.numpy(), want_out.numpy())
        np.testing.assert_array_equal(idx.numpy(), want_idx.numpy())


def test_lp_pool_values_by_hand():
    """Hand-derived: windows [1, -2], [3, -4], [0.5] (ceil_mode; the clipped last window keeps avg_pool's divisor
    1, so its sum counts twice, as PyTorch's composition does)."""
    x = _t([[[1.0, -2.0, 3.0, -4.0, 0.5]]])
    np.testing.assert_allclose(F.lp_pool1d(x, 1, 2, ceil_mode=True).numpy(), [[[-1.0, -1.0, 1.0]]])
    np.testing.assert_allclose(F.lp_pool1d(x, 2, 2, ceil_mode=True).numpy(),
                               [[[math.sqrt(5), 5.0, math.sqrt(0.5)]]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a negative sum to a fractional power: NaN, as PyTorch's
        y = F.lp_pool1d(x, 3, 2, ceil_mode=True).numpy()
    assert np.isnan(y[0, 0, :2]).all() and y[0, 0, 2] == pytest.approx(0.25 ** (1 / 3))
    np.testing.assert_allclose(F.lp_pool1d(x, math.inf, 2).numpy(), [[[2.0, 4.0]]])


def test_lp_pool_zero_window_has_zero_gradient():
    x = mf.zeros(1, 1, 4, dtype=mf.float64, requires_grad=True)
    y = F.lp_pool1d(x, 2, 2)
    y.sum().backward()
    np.testing.assert_array_equal(y.detach().numpy(), [[[0.0, 0.0]]])
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((1, 1, 4)))
    # p < 0: a window whose x^p cancel to 0 gives 0^(1/p) = inf (PyTorch's, checked by hand)
    assert F.lp_pool1d(_t([[[1.0, -1.0]]]), -1, 2).numpy()[0, 0, 0] == math.inf


@pytest.mark.parametrize("cls,fn,shape", [(nn.LPPool1d, F.lp_pool1d, (2, 3, 9)),
                                          (nn.LPPool2d, F.lp_pool2d, (2, 3, 5, 6))])
def test_lp_pool_modules(cls, fn, shape):
    x = _t(np.abs(randn(*shape, seed=2)) + 0.5)
    m = cls(1.5, 3, 2, ceil_mode=True)
    np.testing.assert_array_equal(m(x).numpy(), fn(x, 1.5, 3, 2, True).numpy())
    assert repr(m) == f"{cls.__name__}(norm_type=1.5, kernel_size=3, stride=2, ceil_mode=True)"
    assert repr(cls(2, 3)) == f"{cls.__name__}(norm_type=2, kernel_size=3, stride=None, ceil_mode=False)"
    assert m.state_dict() == {}


def test_max_unpool1d_module_round_trip():
    x = _t([[[1.0, 5.0, 3.0, 2.0, 7.0, 4.0]]])
    out, idx = nn.MaxPool1d(2, return_indices=True)(x)
    unpool = nn.MaxUnpool1d(2)
    np.testing.assert_array_equal(unpool(out, idx).numpy(), [[[0, 5, 3, 0, 7, 0]]])
    np.testing.assert_array_equal(unpool(out, idx, output_size=[1, 1, 7]).numpy(), [[[0, 5, 3, 0, 7, 0, 0]]])
    np.testing.assert_array_equal(unpool(out[0], idx[0]).numpy(), [[0, 5, 3, 0, 7, 0]])  # unbatched
    assert repr(unpool) == "MaxUnpool1d(kernel_size=(2,), stride=(2,), padding=(0,))"
    assert repr(nn.MaxUnpool1d(3, 2, 1)) == "MaxUnpool1d(kernel_size=(3,), stride=(2,), padding=(1,))"


def test_upsample_aliases_warn_and_match_interpolate_and_modules():
    x = _t(randn(1, 2, 3, 4, seed=3))
    with pytest.warns(UserWarning, match="upsample_nearest` is deprecated"):
        a = F.upsample_nearest(x, scale_factor=2)
    np.testing.assert_array_equal(a.numpy(), F.interpolate(x, scale_factor=2, mode="nearest").numpy())
    np.testing.assert_array_equal(a.numpy(), nn.UpsamplingNearest2d(scale_factor=2)(x).numpy())
    with pytest.warns(UserWarning, match="upsample_bilinear` is deprecated"):
        b = F.upsample_bilinear(x, size=(5, 7))
    np.testing.assert_array_equal(b.numpy(), F.interpolate(x, (5, 7), mode="bilinear", align_corners=True).numpy())
    np.testing.assert_array_equal(b.numpy(), nn.UpsamplingBilinear2d((5, 7))(x).numpy())
    with pytest.warns(UserWarning, match="functional.upsample` is deprecated"):
        c = F.upsample(x, size=(5, 7), mode="bilinear")
    np.testing.assert_array_equal(c.numpy(), F.interpolate(x, (5, 7), mode="bilinear").numpy())


# ---------------------------------------------------------------- pdist
def test_pdist_coincident_rows_get_zero_gradient():
    x = _t([[1.0, 2.0], [1.0, 2.0], [4.0, 6.0]], requires_grad=True)
    d = mf.pdist(x)
    np.testing.assert_allclose(d.detach().numpy(), pdist_ref(x.detach().numpy()))
    np.testing.assert_allclose(d.detach().numpy(), [0.0, 5.0, 5.0])
    d.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[-0.6, -0.8], [-0.6, -0.8], [1.2, 1.6]])
    assert F.pdist is mf.pdist
    assert F.pdist(mf.zeros(0, 3)).shape == (0,) and F.pdist(mf.zeros(3, 0)).shape == (3,)


# ---------------------------------------------------------------- Bilinear
def test_bilinear_module_init_state_and_values():
    mf.manual_seed(0)
    m = nn.Bilinear(16, 5, 7)
    assert repr(m) == "Bilinear(in1_features=16, in2_features=5, out_features=7, bias=True)"
    assert list(m.state_dict()) == ["weight", "bias"]
    assert m.weight.shape == (7, 16, 5) and m.bias.shape == (7,)
    w, b = m.weight.detach().numpy(), m.bias.detach().numpy()
    bound = 1 / math.sqrt(16)  # U(-1/sqrt(in1), 1/sqrt(in1)) for both, as PyTorch's
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert np.abs(w).max() > 0.9 * bound and abs(w.std() - bound / math.sqrt(3)) < 0.1 * bound
    x1, x2 = randn(4, 16, seed=4), randn(4, 5, seed=5)
    y = m(mf.tensor(x1), mf.tensor(x2))
    np.testing.assert_array_equal(y.numpy(), F.bilinear(mf.tensor(x1), mf.tensor(x2), m.weight, m.bias).numpy())
    np.testing.assert_allclose(y.detach().numpy(), bilinear_ref(x1.astype(np.float64), x2.astype(np.float64), w, b),
                               rtol=1e-5, atol=1e-5)
    plain = nn.Bilinear(2, 3, 4, bias=False, dtype=mf.float64)
    assert plain.bias is None and list(plain.state_dict()) == ["weight"] and plain.weight.dtype == mf.float64
    assert repr(plain).endswith("bias=False)")


# ---------------------------------------------------------------- the losses
def test_multilabel_margin_loss_by_hand_and_module():
    """PyTorch's documented example: targets 3 and 0 against classes 1 and 2 of [0.1, 0.2, 0.4, 0.8]:
    ((1 - (0.1 - 0.2)) + (1 - (0.1 - 0.4)) + (1 - (0.8 - 0.2)) + (1 - (0.8 - 0.4))) / 4 = 0.85."""
    x, y = _t([[0.1, 0.2, 0.4, 0.8]]), mf.tensor([[3, 0, -1, 1]])
    assert F.multilabel_margin_loss(x, y).item() == pytest.approx(0.85)
    assert nn.MultiLabelMarginLoss()(x, y).item() == pytest.approx(0.85)
    # a repeated target counts twice (PyTorch's loop over the listed targets)
    assert F.multilabel_margin_loss(x, mf.tensor([[3, 3, -1, 1]])).item() == pytest.approx(0.65)
    none = nn.MultiLabelMarginLoss(reduction="none")(x[0], y[0])
    assert none.shape == () and none.item() == pytest.approx(0.85)
    xs, ys = randn(3, 5, seed=6).astype(np.float64), np.array([[0, 4, -1, 2, 2], [1, 1, 1, 1, 1], [-1, 0, 0, 0, 0]])
    np.testing.assert_allclose(nn.MultiLabelMarginLoss(reduction="sum")(_t(xs), mf.tensor(ys)).item(),
                               multilabel_margin_ref(xs, ys, "sum"))


def test_triplet_margin_with_distance_loss_module():
    m = nn.TripletMarginWithDistanceLoss()
    assert repr(m) == "TripletMarginWithDistanceLoss(\n  (distance_function): PairwiseDistance()\n)"
    a, p, n = (_t(randn(4, 3, seed=s)) for s in (7, 8, 9))
    np.testing.assert_array_equal(m(a, p, n).numpy(), F.triplet_margin_loss(a, p, n).numpy())

    def l1(u, v):
        return (u - v).abs().sum(-1)
    custom = nn.TripletMarginWithDistanceLoss(distance_function=l1, margin=0.5, swap=True, reduction="none")
    an, pn, nn_ = (x.numpy() for x in (a, p, n))
    d_neg = np.minimum(np.abs(an - nn_).sum(-1), np.abs(pn - nn_).sum(-1))
    np.testing.assert_allclose(custom(a, p, n).numpy(), np.maximum(0, 0.5 + np.abs(an - pn).sum(-1) - d_neg))
    with pytest.raises(ValueError, match="TripletMarginWithDistanceLoss: expected margin to be greater than 0"):
        nn.TripletMarginWithDistanceLoss(margin=0)


# ---------------------------------------------------------------- EmbeddingBag
def test_embedding_bag_module_init_repr_state():
    mf.manual_seed(0)
    m = nn.EmbeddingBag(400, 8, mode="max", padding_idx=3)
    assert repr(m) == "EmbeddingBag(400, 8, mode='max', padding_idx=3)"
    assert repr(nn.EmbeddingBag(10, 3)) == "EmbeddingBag(10, 3, mode='mean')"
    assert list(m.state_dict()) == ["weight"]
    w = m.weight.detach().numpy()
    assert (w[3] == 0).all()  # the padding row zeroed; the rest N(0, 1)
    assert abs(np.delete(w, 3, 0).mean()) < 0.05 and abs(np.delete(w, 3, 0).std() - 1) < 0.05


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_module_matches_functional_and_reference(mode):
    weight = randn(6, 4, seed=10).astype(np.float64)
    m = nn.EmbeddingBag.from_pretrained(_t(weight), mode=mode, padding_idx=1)
    idx, offsets = np.array([1, 2, 4, 4, 3, 1, 0]), np.array([0, 2, 2, 5])
    y = m(mf.tensor(idx), mf.tensor(offsets))
    np.testing.assert_array_equal(y.numpy(), F.embedding_bag(mf.tensor(idx), m.weight, mf.tensor(offsets), mode=mode,
                                                             padding_idx=1).numpy())
    np.testing.assert_allclose(y.numpy(), embedding_bag_ref(idx, weight, offsets, mode, padding_idx=1))
    assert not m.weight.requires_grad  # from_pretrained freezes


def test_embedding_bag_gradients_by_hand():
    """sum with per-sample weights: each row's gradient is the sum of its entries' weights; mean: 1/bag size;
    the padding row none."""
    w = mf.tensor(np.arange(15.0).reshape(5, 3), requires_grad=True)
    idx, offsets = mf.tensor([1, 2, 4, 4, 3]), mf.tensor([0, 2])
    psw = mf.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=mf.float64, requires_grad=True)
    F.embedding_bag(idx, w, offsets, mode="sum", per_sample_weights=psw).sum().backward()
    np.testing.assert_allclose(w.grad.numpy()[:, 0], [0, 1, 2, 5, 7])
    np.testing.assert_allclose(psw.grad.numpy(), w.detach().numpy()[[1, 2, 4, 4, 3]].sum(1))
    w.grad = None
    F.embedding_bag(idx, w, offsets, mode="mean", padding_idx=4).sum().backward()
    np.testing.assert_allclose(w.grad.numpy()[:, 0], [0, 0.5, 0.5, 1, 0])


@pytest.mark.parametrize("mode", ["max", "sum", "mean"])
def test_embedding_bag_of_no_entries_is_zeros_on_the_weights_graph(mode):
    """No entries at all (every bag empty): zeros that still depend on the weight, whose gradient is then zeros
    (PyTorch's; 'max' gave a tensor off the graph, so backward raised)."""
    w = mf.tensor(np.ones((3, 2)), requires_grad=True)
    out = F.embedding_bag(mf.zeros(0, dtype=mf.int64), w, mf.tensor([0, 0]), mode=mode)
    assert out.requires_grad and out.shape == (2, 2)
    np.testing.assert_array_equal(out.detach().numpy(), np.zeros((2, 2)))
    out.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.zeros((3, 2)))


def test_grid_sample_edges_nan_points_and_empty_inputs():
    """'border' padding: a point exactly on the edge gets no coordinate gradient (PyTorch's grid sampler; an
    identity affine grid puts the edge pixels there); a NaN point gives NaN (bilinear) or 0 (nearest), not an
    indexing error; an input without pixels is refused by name."""
    x = mf.tensor(np.arange(6.0).reshape(1, 1, 2, 3) ** 2)
    g = mf.tensor([[[[1.0, 0.0]]]], dtype=mf.float64, requires_grad=True)
    F.grid_sample(x, g, padding_mode="border", align_corners=True).sum().backward()
    assert g.grad.numpy()[0, 0, 0, 0] == 0.0 and g.grad.numpy()[0, 0, 0, 1] != 0.0
    inner = mf.tensor([[[[0.5, 0.0]]]], dtype=mf.float64, requires_grad=True)
    F.grid_sample(x, inner, padding_mode="border", align_corners=True).sum().backward()
    d = 1e-6
    f = [float(F.grid_sample(x, mf.tensor([[[[0.5 + s, 0.0]]]], dtype=mf.float64), padding_mode="border",
                             align_corners=True).sum()) for s in (d, -d)]
    np.testing.assert_allclose(inner.grad.numpy()[0, 0, 0, 0], (f[0] - f[1]) / (2 * d), rtol=1e-5)
    nan = mf.tensor([[[[float("nan"), 0.0]]]], dtype=mf.float64)
    assert np.isnan(F.grid_sample(x, nan, align_corners=False).numpy()).all()
    assert F.grid_sample(x, nan, mode="nearest", align_corners=False).numpy().tolist() == [[[[0.0]]]]
    with pytest.raises(RuntimeError, match="non-empty spatial"):
        F.grid_sample(mf.zeros(1, 1, 0, 3), mf.zeros(1, 1, 1, 2), align_corners=False)


def test_embedding_sparse_flag_reprs_and_bag_checks():
    """sparse=True gives the dense gradient (PyTorch's sparse one holds the same values); the repr shows every
    setting; max bags refuse scale_grad_by_freq, as PyTorch's."""
    w = mf.ones(5, 2, requires_grad=True)
    F.embedding(mf.tensor([1, 1, 3]), w, sparse=True).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [[0, 0], [2, 2], [0, 0], [1, 1], [0, 0]])
    e = nn.Embedding(5, 2, max_norm=1.0, norm_type=1.0, scale_grad_by_freq=True, sparse=True)
    assert repr(e) == "Embedding(5, 2, max_norm=1.0, norm_type=1.0, scale_grad_by_freq=True, sparse=True)"
    with pytest.raises(ValueError, match="max mode does not support scaling"):
        F.embedding_bag(mf.tensor([[1, 2]]), mf.ones(5, 2), mode="max", scale_grad_by_freq=True)


def test_bilinear_checks_its_sizes():
    for args, exc in (((0, 2, 5), ValueError), ((-3, 2, 5), ValueError), ((3.0, 2, 5), TypeError)):
        with pytest.raises(exc, match="in1_features"):
            nn.Bilinear(*args)
    assert nn.Bilinear(3, 2, 4)(mf.ones(5, 3), mf.ones(5, 2)).shape == (5, 4)
