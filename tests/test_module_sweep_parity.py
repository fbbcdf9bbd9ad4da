"""PyTorch parity of the nn layers' attributes, extension points and edge inputs: the convolutions' ``transposed``,
``output_padding``, ``_reversed_padding_repeated_twice`` and ``_conv_forward`` (a subclass that transforms its weight
calls or overrides it), ``Upsample.name``, ``Unflatten`` of an empty tensor, BatchNorm's and InstanceNorm's
``_check_input_dim``, InstanceNorm's refusal of old running statistics, the state dict's ``_metadata`` versions,
``Embedding._fill_padding_idx_with_zero``, ``_non_persistent_buffers_set``, Hardtanh's deprecated keywords, the
clamping activations and channel dropouts on integer inputs, and adaptive max pooling of an unbatched input without
channels. Expected values are float64 NumPy or by hand."""
import warnings

import numpy as np
import pytest

import minifused as mf
from minifused import nn
from minifused import functional as F
from minifused.backend import InputError, InputTypeError

from tolerances import cpu

RNG = np.random.default_rng(7)


def _conv1d_ref(x, w, b, stride=1, dilation=1):
    """Plain float64 cross-correlation of an already padded (N, C, L) input with (K, C, k) weights."""
    n, c, length = x.shape
    k_out, _, k = w.shape
    span = dilation * (k - 1) + 1
    out_len = (length - span) // stride + 1
    y = np.zeros((n, k_out, out_len))
    for i in range(out_len):
        window = x[:, :, i * stride:i * stride + span:dilation]  # (N, C, k)
        y[:, :, i] = np.einsum("nck,ock->no", window, w)
    return y + (0 if b is None else b[None, :, None])


def _conv2d_ref(x, w, b):
    """Plain float64 cross-correlation (stride 1) of an already padded (N, C, H, W) input."""
    n, c, h, wd = x.shape
    k_out, _, kh, kw = w.shape
    y = np.zeros((n, k_out, h - kh + 1, wd - kw + 1))
    for i in range(h - kh + 1):
        for j in range(wd - kw + 1):
            y[:, :, i, j] = np.einsum("nchw,ochw->no", x[:, :, i:i + kh, j:j + kw], w)
    return y + b[None, :, None, None]


def _set(param, value):
    with mf.no_grad():
        param.copy_(cpu(value))


# ---------------------------------------------------------------- convolution attributes
def test_convolutions_have_pytorchs_transposed_output_padding_and_padding_mode():
    """``transposed`` tells the two kinds apart; a convolution's ``output_padding`` is zeros and a transposed one's
    ``padding_mode`` 'zeros', as on PyTorch's ``_ConvNd`` (code that inspects layers reads them)."""
    for m, dims in ((nn.Conv1d(2, 3, 3), 1), (nn.Conv2d(2, 3, 3), 2), (nn.Conv3d(2, 3, 3), 3)):
        assert m.transposed is False and m.output_padding == (0,) * dims
    for m in (nn.ConvTranspose1d(2, 3, 3), nn.ConvTranspose2d(2, 3, 3), nn.ConvTranspose3d(2, 3, 3)):
        assert m.transposed is True and m.padding_mode == "zeros"
    assert nn.ConvTranspose2d(2, 3, 3, stride=2, output_padding=1).output_padding == (1, 1)


def test_reversed_padding_repeated_twice_is_pytorchs():
    """F.pad's padding of the input, last dimension first, each side: by hand from the padding, and for 'same'
    from the total dilation * (kernel - 1) per dimension, the odd one after (a list then, as PyTorch's)."""
    assert nn.Conv1d(2, 2, 3, padding=2)._reversed_padding_repeated_twice == (2, 2)
    assert nn.Conv2d(2, 2, 3, padding=(1, 2))._reversed_padding_repeated_twice == (2, 2, 1, 1)
    assert nn.Conv3d(2, 2, 3, padding=(1, 2, 3))._reversed_padding_repeated_twice == (3, 3, 2, 2, 1, 1)
    # H: 1 * (4 - 1) = 3 -> (1, 2); W: 2 * (4 - 1) = 6 -> (3, 3)
    same = nn.Conv2d(2, 2, 4, padding="same", dilation=(1, 2))._reversed_padding_repeated_twice
    assert same == [3, 3, 1, 2]
    assert nn.Conv1d(2, 2, 4, padding="same")._reversed_padding_repeated_twice == [1, 2]
    assert nn.Conv2d(2, 2, 3, padding="valid")._reversed_padding_repeated_twice == [0, 0, 0, 0]
    assert nn.ConvTranspose2d(2, 2, 3, padding=(1, 2))._reversed_padding_repeated_twice == (2, 2, 1, 1)


def test_padding_modes_pad_by_reversed_padding_repeated_twice():
    """As PyTorch's forward, a non-zeros padding mode pads by the attribute (code that changes the padding
    after construction sets it): here circular padding (0, 2) of the length, by NumPy's wrap."""
    m = nn.Conv1d(2, 3, 3, padding=1, padding_mode="circular", dtype=mf.float64)
    m._reversed_padding_repeated_twice = (0, 2)
    x = RNG.standard_normal((2, 2, 6))
    ref = _conv1d_ref(np.pad(x, ((0, 0), (0, 0), (0, 2)), mode="wrap"), m.weight.detach().numpy(),
                      m.bias.detach().numpy())
    np.testing.assert_allclose(m(cpu(x)).detach().numpy(), ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_conv_forward_takes_another_weight(dims):
    """A weight-standardizing subclass (its forward calls ``self._conv_forward(x, w, self.bias)``, PyTorch's
    pattern) gets the convolution with its own weight: against the layer's forward with that weight copied in."""
    cls = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[dims]

    class Standardized(cls):
        def forward(self, x):
            w = self.weight - self.weight.mean(dim=tuple(range(1, dims + 2)), keepdim=True)
            return self._conv_forward(x, w, self.bias)

    m = Standardized(2, 3, 3, padding=1, padding_mode="replicate", dtype=mf.float64)
    x = cpu(RNG.standard_normal((2, 2) + (5,) * dims))
    w = m.weight.detach().numpy()
    plain = cls(2, 3, 3, padding=1, padding_mode="replicate", dtype=mf.float64)
    _set(plain.weight, w - w.mean(axis=tuple(range(1, dims + 2)), keepdims=True))
    _set(plain.bias, m.bias.detach().numpy())
    np.testing.assert_allclose(m(x).detach().numpy(), plain(x).detach().numpy(), rtol=1e-13, atol=1e-13)


def test_an_overridden_conv_forward_runs_in_forward_and_in_a_fused_sequential():
    """A subclass overriding ``_conv_forward`` (doubling its weight) is what its forward computes, and a
    Sequential that would fuse the layer with a ReLU (and a BatchNorm2d) still runs the override: against
    relu(conv(reflect-padded x, 2 W) + b) in NumPy."""

    class Doubled(nn.Conv2d):
        def _conv_forward(self, input, weight, bias):
            return super()._conv_forward(input, weight * 2.0, bias)

    m = Doubled(2, 3, 3, padding=1, padding_mode="reflect", dtype=mf.float64)
    x = RNG.standard_normal((2, 2, 4, 5))
    w, b = m.weight.detach().numpy(), m.bias.detach().numpy()
    conv = _conv2d_ref(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="reflect"), 2.0 * w, b)
    np.testing.assert_allclose(m(cpu(x)).detach().numpy(), conv, rtol=1e-12, atol=1e-12)
    seq = nn.Sequential(m, nn.ReLU())
    np.testing.assert_allclose(seq(cpu(x)).detach().numpy(), np.maximum(conv, 0), rtol=1e-12, atol=1e-12)
    bn = nn.BatchNorm2d(3, dtype=mf.float64)
    y = nn.Sequential(m, bn, nn.ReLU())(cpu(x)).detach().numpy()
    mean, var = conv.mean(axis=(0, 2, 3), keepdims=True), conv.var(axis=(0, 2, 3), keepdims=True)
    np.testing.assert_allclose(y, np.maximum((conv - mean) / np.sqrt(var + 1e-5), 0), rtol=1e-10, atol=1e-10)


# ---------------------------------------------------------------- small layers
def test_upsample_layers_have_pytorchs_name():
    assert nn.Upsample(scale_factor=2).name == "Upsample"
    assert nn.UpsamplingNearest2d(scale_factor=2).name == "UpsamplingNearest2d"
    assert nn.UpsamplingBilinear2d(scale_factor=2).name == "UpsamplingBilinear2d"


def test_unflatten_infers_minus_one_from_its_dimension_when_another_is_zero():
    """(0, 3, 6) unflattened at -1 into (2, -1): 6 / 2 = 3, whatever the batch (a reshape could not infer it)."""
    y = nn.Unflatten(-1, (2, -1))(cpu(np.zeros((0, 3, 6))))
    assert tuple(y.shape) == (0, 3, 2, 3)
    x = np.arange(12.0).reshape(2, 6)
    np.testing.assert_array_equal(nn.Unflatten(1, (-1, 3))(cpu(x)).numpy(), x.reshape(2, 2, 3))


def test_embedding_fill_padding_idx_with_zero():
    """PyTorch's helper, which a subclass's own initialisation calls after filling the table."""
    emb = nn.Embedding(4, 3, padding_idx=2, dtype=mf.float64)
    with mf.no_grad():
        emb.weight.fill_(1.5)
    emb._fill_padding_idx_with_zero()
    expected = np.full((4, 3), 1.5)
    expected[2] = 0.0
    np.testing.assert_array_equal(emb.weight.detach().numpy(), expected)
    emb.reset_parameters()
    assert not emb.weight.detach().numpy()[2].any()


def test_hardtanh_takes_the_deprecated_min_value_and_max_value():
    """PyTorch's older keyword names, with its FutureWarning: clamping to [-0.5, 2]."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = nn.Hardtanh(min_value=-0.5, max_value=2.0)
    assert [(w.category, str(w.message).split("`")[1]) for w in caught] == [(FutureWarning, "min_value"),
                                                                             (FutureWarning, "max_value")]
    assert (m.min_val, m.max_val) == (-0.5, 2.0)
    np.testing.assert_array_equal(m(cpu([-3.0, 0.25, 5.0])).numpy(), np.array([-0.5, 0.25, 2.0], np.float32))


# ---------------------------------------------------------------- norms
def test_a_batchnorm_subclass_can_widen_check_input_dim():
    """PyTorch's forward calls ``_check_input_dim``; a BatchNorm1d subclass that takes any rank normalizes a 4-D
    input per channel (dimension 1): against NumPy's mean and biased variance over (N, H, W)."""

    class AnyRank(nn.BatchNorm1d):
        def _check_input_dim(self, input):
            pass

    x = RNG.standard_normal((3, 2, 4, 5))
    with pytest.raises(ValueError, match="4-D"):
        nn.BatchNorm1d(2, dtype=mf.float64)(cpu(x))
    y = AnyRank(2, dtype=mf.float64)(cpu(x)).detach().numpy()
    mean, var = x.mean(axis=(0, 2, 3), keepdims=True), x.var(axis=(0, 2, 3), keepdims=True)
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(var + 1e-5), rtol=1e-12, atol=1e-12)


def test_a_fused_conv_batchnorm_runs_the_norms_own_check_input_dim():
    """A BatchNorm2d subclass whose ``_check_input_dim`` refuses (say, a batch of one) is asked in a Sequential
    that fuses it with its Conv2d too."""

    class NoSingles(nn.BatchNorm2d):
        def _check_input_dim(self, input):
            if input.shape[0] < 2:
                raise ValueError("NoSingles: batch of one")

    seq = nn.Sequential(nn.Conv2d(1, 2, 1), NoSingles(2))
    assert tuple(seq(cpu(np.ones((2, 1, 3, 3), np.float32))).shape) == (2, 2, 3, 3)
    with pytest.raises(ValueError, match="batch of one"):
        seq(cpu(np.ones((1, 1, 3, 3), np.float32)))


def test_instance_norm_check_input_dim_and_no_batch_dim():
    """PyTorch's helpers: the unbatched rank, and the rank check the forward calls (an override widens it)."""
    assert (nn.InstanceNorm1d(2)._get_no_batch_dim(), nn.InstanceNorm3d(2)._get_no_batch_dim()) == (2, 4)
    with pytest.raises(ValueError, match="4-D"):
        nn.InstanceNorm2d(2)._check_input_dim(cpu(np.zeros((2, 2))))

    class Strict(nn.InstanceNorm1d):
        def _check_input_dim(self, input):
            if input.ndim != 3:
                raise ValueError("Strict: batched only")

    with pytest.raises(ValueError, match="batched only"):
        Strict(2)(cpu(np.ones((2, 4), np.float32)))


def test_instance_norm_refuses_old_running_stats_when_it_tracks_none():
    """A state dict without version metadata holding running statistics for an InstanceNorm that tracks none is
    an error even with strict=False (PyTorch's message); with the current version they are unexpected keys."""
    m = nn.InstanceNorm1d(3)
    stats = {"running_mean": cpu(np.zeros(3)), "running_var": cpu(np.ones(3))}
    with pytest.raises(RuntimeError, match='Unexpected running stats buffer\\(s\\) "running_mean" and "running_var"'):
        m.load_state_dict(stats, strict=False)
    versioned = type(m.state_dict())(stats)
    versioned._metadata = {"": {"version": 1}}
    result = m.load_state_dict(versioned, strict=False)
    assert sorted(result.unexpected_keys) == ["running_mean", "running_var"]


# ---------------------------------------------------------------- state dict metadata
def test_state_dict_records_each_modules_version():
    """``state_dict()._metadata``: every module's ``{"version": _version}`` under its dotted name, as PyTorch's
    (BatchNorm's is 2, the version that added num_batches_tracked)."""
    sd = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3)).state_dict()
    assert {k: dict(v) for k, v in sd._metadata.items()} == {"": {"version": 1}, "0": {"version": 1},
                                                             "1": {"version": 2}}
    assert list(nn.Linear(2, 2).state_dict(prefix="enc.")._metadata) == ["enc"]


def test_a_current_batchnorm_state_dict_needs_num_batches_tracked():
    """With the version recorded, a BatchNorm state dict lacking num_batches_tracked is a missing key (as
    PyTorch's); without metadata (an older checkpoint) it is not, and the counter keeps its value."""
    m = nn.BatchNorm1d(3)
    sd = m.state_dict()
    del sd["num_batches_tracked"]
    with pytest.raises(RuntimeError, match="num_batches_tracked"):
        m.load_state_dict(sd)
    result = m.load_state_dict(dict(sd))
    assert result.missing_keys == [] and int(m.num_batches_tracked.item()) == 0


def test_non_persistent_buffers_set_is_the_live_set():
    """PyTorch's ``_non_persistent_buffers_set``: the names the state dict leaves out; code that edits it changes
    what is saved."""
    m = nn.Module()
    m.register_buffer("a", cpu(np.zeros(1)), persistent=False)
    m.register_buffer("b", cpu(np.ones(1)))
    assert m._non_persistent_buffers_set == {"a"} and list(m.state_dict()) == ["b"]
    m._non_persistent_buffers_set.discard("a")
    m._non_persistent_buffers_set.add("b")
    assert list(m.state_dict()) == ["a"]
    assert nn.Linear(2, 2)._non_persistent_buffers_set == set()


# ---------------------------------------------------------------- integer inputs
def test_hardtanh_relu6_and_threshold_of_integer_inputs():
    """PyTorch clamps integer tensors in their dtype, its float bounds truncated toward zero: hardtanh(x, -1.5,
    2.5) is clamp(x, -1, 2); threshold(x, -1.5, 9) replaces x <= -1 by 9; relu6 of int8 stays int8."""
    x = np.array([-3, -2, -1, 0, 1, 2, 3])
    y = F.hardtanh(cpu(x), -1.5, 2.5)
    assert y.dtype == mf.int64
    np.testing.assert_array_equal(y.numpy(), [-1, -1, -1, 0, 1, 2, 2])
    np.testing.assert_array_equal(F.threshold(cpu(x), -1.5, 9).numpy(), [9, 9, 9, 0, 1, 2, 3])
    np.testing.assert_array_equal(F.threshold(cpu(x), 1.5, -2.7).numpy(), [-2, -2, -2, -2, -2, 2, 3])
    r = F.relu6(cpu(np.array([-4, 3, 9], np.int8)))
    assert r.dtype == mf.int8 and r.tolist() == [0, 3, 6]
    t = cpu(x)
    out = nn.ReLU6(inplace=True)(t)
    assert out is t and t.tolist() == [0, 0, 0, 0, 1, 2, 3]
    t = cpu(x)
    nn.Threshold(0, 5, inplace=True)(t)
    assert t.tolist() == [5, 5, 5, 5, 1, 2, 3]


def test_integer_bounds_out_of_range_and_bool_inputs_are_refused():
    """A bound the dtype cannot hold is an overflow error, and bool inputs are refused, as in PyTorch."""
    with pytest.raises(InputError, match="overflow"):
        F.hardtanh(cpu(np.array([0, 5], np.uint8)), 1, 300)
    with pytest.raises(InputTypeError, match="Bool"):
        F.hardtanh(cpu(np.array([True, False])))
    with pytest.raises(InputTypeError, match="Bool"):
        F.threshold(cpu(np.array([True, False])), 0, 1)


def test_channel_dropouts_return_an_integer_input_itself_when_not_dropping():
    """In evaluation (or with p=0) every dropout is the identity, of any dtype, as PyTorch's; training with p>0 on
    an integer input stays an error."""
    x = cpu(np.arange(12).reshape(1, 3, 4))
    for layer in (nn.Dropout1d(), nn.AlphaDropout(), nn.FeatureAlphaDropout()):
        assert layer.eval()(x) is x
    x4 = cpu(np.arange(12).reshape(1, 3, 2, 2))
    assert nn.Dropout2d().eval()(x4) is x4 and nn.Dropout3d().eval()(x4) is x4
    assert F.dropout1d(x, 0.0, training=True) is x
    assert F.alpha_dropout(x, 0.0, training=True) is x
    with pytest.raises(InputTypeError):
        F.dropout1d(x, 0.5, training=True)


# ---------------------------------------------------------------- adaptive max pooling
def test_adaptive_max_pool_of_an_unbatched_input_without_channels():
    """PyTorch requires non-zero sizes past dimension 0 only: an unbatched (0, L) input pools to (0, out); a
    batched input without channels stays an error for max pooling."""
    assert tuple(F.adaptive_max_pool1d(cpu(np.zeros((0, 10))), 3).shape) == (0, 3)
    assert tuple(nn.AdaptiveMaxPool2d(3)(cpu(np.zeros((0, 4, 10)))).shape) == (0, 3, 3)
    with pytest.raises(InputError, match="non-zero size"):
        F.adaptive_max_pool1d(cpu(np.zeros((2, 0, 10))), 3)


def test_soft_margin_loss_broadcasts_only_the_target():
    """A (3,) target beside a (2, 3) input broadcasts (mean of softplus(-y x)); a (2, 3) target beside a (3,) input
    is refused, as PyTorch's (it used to give a (2, 3) loss silently)."""
    x = mf.tensor([[0.5, -1.0, 2.0], [1.0, 0.0, -0.5]], dtype=mf.float64)
    y = mf.tensor([1.0, -1.0, 1.0], dtype=mf.float64)
    expected = np.log1p(np.exp(-(y.numpy() * x.numpy()))).mean()
    np.testing.assert_allclose(mf.nn.functional.soft_margin_loss(x, y).item(), expected, rtol=1e-12)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        mf.nn.functional.soft_margin_loss(x[0], mf.ones(2, 3, dtype=mf.float64))


def test_functional_dropout_passes_an_integer_input_when_nothing_is_dropped():
    x = mf.tensor([1, 2, 3])
    assert F.dropout(x, 0.5, training=False) is x and F.dropout(x, 0.0) is x
    with pytest.raises(TypeError, match="floating-point"):
        F.dropout(x, 0.5, training=True)
