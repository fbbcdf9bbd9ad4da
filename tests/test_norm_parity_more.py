"""Normalization layers against PyTorch's documented rules, on the cpu: the memory format of their results,
their warnings, their errors and the state they leave; values against float64 NumPy references."""
import re
import warnings

import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
import minifused.nn as nn

from tolerances import cpu


def _channels_last(a):
    return cpu(a).contiguous(memory_format=mf.channels_last)


def _is_cl(t):
    """Laid out channels-last, and not C-contiguous too."""
    return t.is_contiguous(memory_format=mf.channels_last) and not t.is_contiguous()


def gn64(x, groups, w=None, b=None, eps=1e-5):
    x = np.asarray(x, np.float64)
    n, c = x.shape[:2]
    g = x.reshape(n, groups, -1)
    y = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + eps)).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    if w is not None:
        y = y * np.reshape(w, shape)
    if b is not None:
        y = y + np.reshape(b, shape)
    return y


def lrn64(x, size, alpha, beta, k):
    """PyTorch's documented LRN: x / (k + alpha / size * sum of x^2 over channels c - size//2 .. c + (size-1)//2)^beta
    (channels outside [0, C) count as zeros)."""
    x = np.asarray(x, np.float64)
    c = x.shape[1]
    out = np.empty_like(x)
    for ch in range(c):
        lo, hi = max(0, ch - size // 2), min(c, ch + (size - 1) // 2 + 1)
        s = (x[:, lo:hi] ** 2).sum(1)
        out[:, ch] = x[:, ch] / (k + alpha / size * s) ** beta
    return out


# ---------------------------------------------------------------- memory format
@pytest.mark.parametrize("affine", [False, True])
def test_group_norm_keeps_channels_last_on_cpu(affine, rng):
    """PyTorch's cpu group_norm writes its result in the input's suggested memory format: a channels-last
    input gives a channels-last result (its cuda kernels give a C-contiguous one)."""
    x = rng.standard_normal((2, 6, 3, 4)).astype(np.float32)
    w, b = (rng.standard_normal(6, np.float32), rng.standard_normal(6, np.float32)) if affine else (None, None)
    y = F.group_norm(_channels_last(x), 3, None if w is None else cpu(w), None if b is None else cpu(b))
    assert _is_cl(y)
    np.testing.assert_allclose(y.numpy(), gn64(x, 3, w, b), rtol=1e-5, atol=1e-5)
    m = nn.GroupNorm(2, 6)
    assert _is_cl(m(_channels_last(x)))
    assert F.group_norm(cpu(x), 3).is_contiguous()  # a C-contiguous input stays so


def test_group_norm_channels_last_gradients(rng):
    """The channels-last result is the same function of the input: its gradient is the C-contiguous input's."""
    x = rng.standard_normal((2, 4, 3, 3))
    dy = rng.standard_normal(x.shape)
    grads = []
    for make in (cpu, _channels_last):
        xt = make(x).requires_grad_()
        w = cpu(np.linspace(0.5, 2, 4), requires_grad=True)
        (F.group_norm(xt, 2, w) * cpu(dy)).sum().backward()
        grads.append((xt.grad.numpy(), w.grad.numpy()))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("use_input_stats", [True, False])
def test_instance_norm_result_is_contiguous(use_input_stats, rng):
    """PyTorch's instance_norm normalizes ``input.contiguous()``: a channels-last input gives a C-contiguous
    result, in training and with the running statistics (which batch_norm alone would keep channels-last)."""
    x = rng.standard_normal((2, 3, 4, 5))
    rm, rv = rng.standard_normal(3), rng.random(3) + 0.5
    y = F.instance_norm(_channels_last(x), cpu(rm), cpu(rv), use_input_stats=use_input_stats, momentum=0.0)
    assert y.is_contiguous() and not _is_cl(y)
    if use_input_stats:
        ref = gn64(x, 3)
    else:
        ref = (x - rm.reshape(1, 3, 1, 1)) / np.sqrt(rv.reshape(1, 3, 1, 1) + 1e-5)
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-5, atol=1e-5)


def test_local_response_norm_keeps_channels_last(rng):
    """PyTorch's local_response_norm ends with ``input / div``, which takes the input's layout: a channels-last
    4-d input gives a channels-last result."""
    x = rng.standard_normal((2, 5, 3, 4)) * 2
    y = F.local_response_norm(_channels_last(x), 3, 0.5, 0.6, 2.0)
    assert _is_cl(y)
    np.testing.assert_allclose(y.numpy(), lrn64(x, 3, 0.5, 0.6, 2.0), rtol=1e-5, atol=1e-6)
    assert F.local_response_norm(cpu(x), 3).is_contiguous()


# ---------------------------------------------------------------- warnings
def test_instance_norm_channel_mismatch_warning_matches_pytorch_filter(rng):
    """Without affine (and running statistics) an InstanceNorm takes any channel count and warns; the warning
    starts with PyTorch's words, so that ``filterwarnings(message=...)`` written for PyTorch silences it."""
    x = cpu(rng.standard_normal((2, 3, 5)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = nn.InstanceNorm1d(4)(x)
    assert len(caught) == 1
    text = str(caught[0].message)
    assert text.startswith("input's size at dim=1 does not match num_features.")
    assert "InstanceNorm1d" in text and "[2, 3, 5]" in text
    np.testing.assert_allclose(y.numpy(), gn64(x.numpy(), 3), rtol=1e-5, atol=1e-5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", message=re.escape("input's size at dim=0 does not match num_features"))
        nn.InstanceNorm1d(4)(x[0])  # unbatched: the channels are dimension 0
    assert not caught


# ---------------------------------------------------------------- autocast
@pytest.mark.parametrize("shape", [(2, 5, 3, 4), (2, 5, 2, 2, 3)])
def test_local_response_norm_cpu_autocast_sums_in_float32(shape, rng):
    """PyTorch's local_response_norm sums the window of a 4-d or 5-d input with avg_pool3d, which cpu autocast
    runs in float32: the squares (rounded to the input's bfloat16) averaged in float32, and ``input / div`` a
    float32 result. A 3-d input takes avg_pool2d, not on that list: its result stays bfloat16."""
    x = cpu(rng.standard_normal(shape)).to(mf.bfloat16)
    with mf.autocast("cpu", dtype=mf.bfloat16):
        y = F.local_response_norm(x, 3, 0.5, 0.75, 1.0)
        y3 = F.local_response_norm(x.reshape(2, 5, -1), 3)
    assert y.dtype == mf.float32 and y3.dtype == mf.bfloat16
    xs = x.float().numpy().astype(np.float64)
    sq = (xs * xs).astype(mf.bfloat16).astype(np.float64)  # the squares, rounded as the bfloat16 product
    c = shape[1]
    want = np.empty_like(xs)
    for ch in range(c):
        lo, hi = max(0, ch - 1), min(c, ch + 2)
        want[:, ch] = xs[:, ch] / (1.0 + 0.5 / 3 * sq[:, lo:hi].sum(1)) ** 0.75
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- values at the edges
def test_cross_map_lrn2d_infinite_square_gives_zero_not_nan(rng):
    """CrossMapLRN2d (PyTorch's running sum over the channels, channel 0's x² never subtracted): where a window
    holds an x² that overflows float32, the scale is infinite and the output x * inf^-beta is 0, not NaN; here
    channel 0 overflows, so every channel's window holds it. Channels the overflow does not reach keep the
    formula's values."""
    x = rng.standard_normal((2, 5, 3, 3)).astype(np.float32)
    x[0, 0] = 1e20  # x² = inf in float32
    y = nn.CrossMapLRN2d(3, 0.5, 0.75, 2.0)(cpu(x)).numpy()
    assert np.all(np.isfinite(y))
    np.testing.assert_array_equal(y[0], 0.0)
    xs = x[1].astype(np.float64)
    sq = xs * xs
    for c in range(5):  # window c-1 .. c+1, plus channel 0's square for c > 1
        s = sq[max(0, c - 1):c + 2].sum(0) + (sq[0] if c > 1 else 0)
        np.testing.assert_allclose(y[1, c], xs[c] * (2.0 + 0.5 / 3 * s) ** -0.75, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [mf.float32, mf.float64, mf.float16])
def test_instance_norm_eps0_constant_instance_gives_bias(dtype, rng):
    """PyTorch's instance_norm runs its batch_norm kernel, whose ``InvStd`` is 0 where the variance and eps are
    both 0: with ``eps=0`` a constant instance normalizes to 0 (then the bias), with a zero gradient, not
    0 / 0 = NaN; the other instances are normalized as usual."""
    x = rng.standard_normal((2, 3, 4, 2))
    x[0, 1], x[1, 2] = 0.1, 0.0  # constant instances (0.1's mean may round: constant all the same)
    w, b = rng.random(3) + 0.5, rng.standard_normal(3)
    xt = cpu(x).to(dtype).requires_grad_()
    wt = cpu(w).to(mf.float32 if dtype == mf.float16 else dtype).requires_grad_()
    y = F.instance_norm(xt, weight=wt, bias=cpu(b).to(wt.dtype), eps=0.0)
    (y * cpu(rng.standard_normal(x.shape)).to(dtype)).sum().backward()
    xs = xt.detach().double().numpy()
    mean, var = xs.mean((2, 3), keepdims=True), xs.var((2, 3), keepdims=True)
    const = np.ptp(xs.reshape(2, 3, -1), axis=2).reshape(2, 3, 1, 1) == 0
    want = np.where(const, 0.0, (xs - mean) / np.sqrt(np.where(const, 1.0, var)))
    want = want * w.reshape(1, 3, 1, 1) + b.reshape(1, 3, 1, 1)
    tol = 2e-3 if dtype == mf.float16 else 1e-5
    np.testing.assert_allclose(y.detach().double().numpy(), want, rtol=tol, atol=tol)
    assert np.isfinite(xt.grad.double().numpy()).all()
    np.testing.assert_array_equal(xt.grad.double().numpy()[0, 1], 0.0)
    np.testing.assert_array_equal(xt.grad.double().numpy()[1, 2], 0.0)


# ---------------------------------------------------------------- errors and the state they leave
@pytest.mark.parametrize("op", ["batch_norm", "instance_norm"])
@pytest.mark.parametrize("training", [True, False])
def test_running_stats_requiring_grad_refused_in_grad_mode(op, training, rng):
    """PyTorch's batch_norm (and instance_norm, which runs it) is not differentiable with respect to the running
    statistics: one that requires grad is a RuntimeError while grad mode is on (a gradient would be missing, and
    training writes them in place), and the statistics stay as they were; under no_grad the call runs."""
    x = cpu(rng.standard_normal((3, 4, 5)).astype(np.float32))
    rm, rv = mf.zeros(4, requires_grad=True), mf.ones(4)
    if op == "batch_norm":
        def call():
            return F.batch_norm(x, rm, rv, training=training)
    else:
        def call():
            return F.instance_norm(x, rm, rv, use_input_stats=training)
    with pytest.raises(RuntimeError, match=f"{op}: .*running_mean.*requires_grad"):
        call()
    np.testing.assert_array_equal(rm.detach().numpy(), 0.0)
    np.testing.assert_array_equal(rv.numpy(), 1.0)
    with mf.no_grad():
        y = call()
    xs = x.numpy().astype(np.float64)
    if training:
        axes = (0, 2) if op == "batch_norm" else (2,)
        mean = xs.mean(axes, keepdims=True)
        want = (xs - mean) / np.sqrt(xs.var(axes, keepdims=True) + 1e-5)
        np.testing.assert_allclose(rm.detach().numpy(), 0.1 * xs.mean((0, 2)), rtol=1e-5, atol=1e-7)
    else:
        want = xs / np.sqrt(1 + 1e-5)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cls", [nn.LayerNorm, nn.RMSNorm])
def test_normalized_shape_takes_ints_only(cls):
    """normalized_shape is an int or a sequence of ints (anything with ``__index__``, NumPy's too), as PyTorch
    takes it; a float, a string or a bool in it is a TypeError naming the layer (PyTorch's fails making the
    weight), a negative size a RuntimeError (ValueError too)."""
    assert cls(np.int64(3)).normalized_shape == (3,)
    assert cls([2, np.int32(3)]).weight.shape == (2, 3)
    for bad in (4.0, (3, 4.0), "4", True, (True, 2), None):
        with pytest.raises(TypeError, match=f"{cls.__name__}: normalized_shape must be an int or a sequence"):
            cls(bad)
    with pytest.raises(RuntimeError, match=f"{cls.__name__}: normalized_shape must hold non-negative sizes"):
        cls((2, -1))


@pytest.mark.parametrize("shape, normalized, message", [
    ((3, 5, 4), [4, 5], r"Given normalized_shape=[4, 5], expected input with shape [*, 4, 5], but got input of "
                        r"size[3, 5, 4]"),
    ((4, 5), [3, 4, 5], r"Given normalized_shape=[3, 4, 5], expected input with shape [*, 3, 4, 5], but got input "
                        r"of size[4, 5]")])
def test_layer_norm_trailing_shape_mismatch_in_pytorchs_words(shape, normalized, message):
    """PyTorch 2.13's RuntimeError text for an input whose trailing shape is not normalized_shape (the module's
    and F.layer_norm's)."""
    for call in (lambda x: nn.LayerNorm(normalized)(x), lambda x: F.layer_norm(x, normalized)):
        with pytest.raises(RuntimeError, match=re.escape(message)):
            call(mf.zeros(*shape))


def test_group_norm_and_batch_norm_errors_in_pytorchs_words():
    """GroupNorm with num_groups not dividing num_channels: PyTorch's ValueError; F.batch_norm with
    training=False and no running statistics: PyTorch's RuntimeError text."""
    with pytest.raises(ValueError, match=re.escape("num_channels (4) must be divisible by num_groups (3)")):
        nn.GroupNorm(3, 4)
    with pytest.raises(RuntimeError, match="running_mean must be defined in evaluation mode"):
        F.batch_norm(mf.zeros(2, 3), None, None, training=False)
