"""BatchNorm1d/2d/3d, F.batch_norm (fused kernels, with the ReLU), GroupNorm: PyTorch's semantics against
float64 NumPy, gradients against finite differences, the CUDA kernels against the reference (odd shapes,
poisoned outputs) and against PyTorch on the GPU; channels-last inputs against the same values C-contiguous,
their outputs channels-last; bad input leaves every state unchanged."""
import copy

import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
import minifused.nn as nn
from conftest import dev_array, f64, host
from minifused import backend
from minifused.kernels import batchnorm as K
from minifused.kernels import is_channels_last, to_channels_last
from minifused.testing import gradcheck
from tolerances import TOL


def bn_ref(x, mean, var, w, b, eps):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    return y * w.reshape(shape) + b.reshape(shape)


def batch_stats(x):
    axes = (0,) + tuple(range(2, x.ndim))
    return x.mean(axis=axes), x.var(axis=axes), x.var(axis=axes, ddof=1)


# ---------------------------------------------------------------- semantics (cpu, float64 against NumPy)
@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 7), (3, 2, 5, 4), (2, 3, 1, 1)])
def test_training_normalizes_with_batch_stats_and_moves_running_stats(rng, shape):
    x = rng.standard_normal(shape) * 3 + 1
    mod = {2: nn.BatchNorm1d, 3: nn.BatchNorm1d, 4: nn.BatchNorm2d}[len(shape)](shape[1], momentum=0.3,
                                                                                 dtype=mf.float64)
    w, b = rng.standard_normal(shape[1]), rng.standard_normal(shape[1])
    mod.weight._data[...] = w
    mod.bias._data[...] = b
    y = mod(mf.tensor(x))
    mean, var, unbiased = batch_stats(x)
    np.testing.assert_allclose(y.numpy(), bn_ref(x, mean, var, w, b, 1e-5), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(mod.running_mean.numpy(), 0.3 * mean, rtol=1e-12)
    np.testing.assert_allclose(mod.running_var.numpy(), 0.7 + 0.3 * unbiased, rtol=1e-12)
    assert int(mod.num_batches_tracked.item()) == 1
    mod.eval()
    x2 = rng.standard_normal(shape)
    want = bn_ref(x2, 0.3 * mean, 0.7 + 0.3 * unbiased, w, b, 1e-5)
    np.testing.assert_allclose(mod(mf.tensor(x2)).numpy(), want, rtol=1e-10, atol=1e-12)
    assert int(mod.num_batches_tracked.item()) == 1


def test_momentum_none_is_the_cumulative_average(rng):
    mod = nn.BatchNorm1d(4, momentum=None, dtype=mf.float64)
    xs = [rng.standard_normal((6, 4)) + i for i in range(3)]
    for x in xs:
        mod(mf.tensor(x))
    np.testing.assert_allclose(mod.running_mean.numpy(), np.mean([x.mean(0) for x in xs], axis=0), rtol=1e-12)
    np.testing.assert_allclose(mod.running_var.numpy(), np.mean([x.var(0, ddof=1) for x in xs], axis=0),
                               rtol=1e-12)
    assert int(mod.num_batches_tracked.item()) == 3


def test_without_a_batch_count_momentum_none_leaves_the_running_stats(rng):
    """PyTorch's factor with momentum=None is 1 / num_batches_tracked, and 0 when that buffer is None: the running
    statistics stay; a momentum still moves them."""
    for momentum in (None, 0.3):
        mod = nn.BatchNorm1d(4, momentum=momentum, dtype=mf.float64)
        mod.num_batches_tracked = None
        x = rng.standard_normal((6, 4)) * 2 + 1
        mean, var, unbiased = batch_stats(x)
        np.testing.assert_allclose(mod(mf.tensor(x)).numpy(), bn_ref(x, mean, var, np.ones(4), np.zeros(4), 1e-5),
                                   rtol=1e-10, atol=1e-12)
        m = 0.0 if momentum is None else momentum
        np.testing.assert_allclose(mod.running_mean.numpy(), m * mean, rtol=1e-12)
        np.testing.assert_allclose(mod.running_var.numpy(), (1 - m) + m * unbiased, rtol=1e-12)
        assert mod.num_batches_tracked is None

def test_channels_are_checked_against_the_tensors_not_num_features(rng):
    """PyTorch's BatchNorm checks the input against the running statistics it reads (else the weight), never
    num_features: model surgery that resizes the tensors alone (channel pruning) keeps working, and a BatchNorm
    with no such tensors takes any channel count."""
    mod = nn.BatchNorm2d(3, dtype=mf.float64)
    w, b = rng.standard_normal(5), rng.standard_normal(5)
    mod.weight, mod.bias = nn.Parameter(mf.tensor(w)), nn.Parameter(mf.tensor(b))
    mod.running_mean, mod.running_var = mf.zeros(5, dtype=mf.float64), mf.ones(5, dtype=mf.float64)
    x = rng.standard_normal((4, 5, 3, 3))
    mean, var, unbiased = batch_stats(x)
    np.testing.assert_allclose(mod(mf.tensor(x)).numpy(), bn_ref(x, mean, var, w, b, 1e-5), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(mod.running_mean.numpy(), 0.1 * mean, rtol=1e-12)
    bare = nn.BatchNorm2d(3, affine=False, track_running_stats=False, dtype=mf.float64)
    np.testing.assert_allclose(bare(mf.tensor(x)).numpy(), bn_ref(x, mean, var, np.ones(5), np.zeros(5), 1e-5),
                               rtol=1e-10, atol=1e-12)
    conv = nn.Conv2d(5, 4, 1, bias=False, dtype=mf.float64)  # (the fused pair of a Sequential too)
    h = conv(mf.tensor(x)).detach().numpy()
    got = nn.Sequential(conv, nn.BatchNorm2d(5, affine=False, track_running_stats=False, dtype=mf.float64))(
        mf.tensor(x)).detach().numpy()
    h_mean, h_var, _ = batch_stats(h)
    np.testing.assert_allclose(got, bn_ref(h, h_mean, h_var, np.ones(4), np.zeros(4), 1e-5), rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match=r"expected 3 channels \(num_features\)"):
        nn.BatchNorm2d(3, affine=False)(mf.tensor(x))

def test_group_norm_checks_the_channels_against_its_weight_not_num_channels(rng):
    mod = nn.GroupNorm(2, 4, dtype=mf.float64)
    w, b = rng.standard_normal(6), rng.standard_normal(6)
    mod.weight, mod.bias = nn.Parameter(mf.tensor(w)), nn.Parameter(mf.tensor(b))  # (resized alone, as PyTorch takes)
    x = rng.standard_normal((2, 6, 3))
    g = x.reshape(2, 2, 9)
    ref = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(2, 6, 3)
    np.testing.assert_allclose(mod(mf.tensor(x)).numpy(), ref * w[:, None] + b[:, None], rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match=r"GroupNorm: expected 6 channels in dimension 1"):
        mod(mf.tensor(rng.standard_normal((2, 4, 3))))


@pytest.mark.parametrize("make", [lambda v: F.group_norm(mf.randn(2, 4, 3), v), lambda v: nn.GroupNorm(v, 4),
                                  lambda v: nn.GroupNorm(1, v), lambda v: F.local_response_norm(mf.randn(2, 4, 3), v),
                                  lambda v: nn.CrossMapLRN2d(v)])
def test_a_group_count_or_lrn_size_that_is_no_int_is_a_type_error(make):
    """As PyTorch's argument parser: a float or bool group count (or LRN size) is a TypeError; an int below 1 a
    ValueError."""
    for v in (2.0, True):
        with pytest.raises(TypeError, match="must be a positive int"):
            make(v)
    with pytest.raises(ValueError, match="must be a positive int"):
        make(0)


def test_group_norm_eps_that_is_no_number_is_a_type_error():
    with pytest.raises(TypeError, match="^group_norm: eps must be a finite number >= 0, got None"):
        F.group_norm(mf.randn(2, 4, 3), 2, eps=None)
    with pytest.raises(ValueError, match="^group_norm: eps must be a finite number >= 0, got -1"):
        F.group_norm(mf.randn(2, 4, 3), 2, eps=-1)


def test_without_running_stats_eval_uses_the_batch(rng):
    mod = nn.BatchNorm2d(3, affine=False, track_running_stats=False, dtype=mf.float64).eval()
    assert mod.running_mean is None and mod.weight is None
    x = rng.standard_normal((2, 3, 4, 4))
    mean, var, _ = batch_stats(x)
    np.testing.assert_allclose(mod(mf.tensor(x)).numpy(), bn_ref(x, mean, var, np.ones(3), np.zeros(3), 1e-5),
                               rtol=1e-10)


def test_state_dict_keys_are_pytorchs():
    sd = nn.BatchNorm2d(8).state_dict()
    assert list(sd) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    assert sd["num_batches_tracked"].dtype == mf.int64 and sd["num_batches_tracked"].shape == ()
    # PyTorch 2.13's reprs, bias included
    assert repr(nn.BatchNorm2d(8)) == ("BatchNorm2d(8, eps=1e-05, momentum=0.1, affine=True, bias=True, "
                                       "track_running_stats=True)")
    assert repr(nn.BatchNorm2d(8, bias=False)) == ("BatchNorm2d(8, eps=1e-05, momentum=0.1, affine=True, bias=False, "
                                                   "track_running_stats=True)")
    assert repr(nn.InstanceNorm2d(4)) == ("InstanceNorm2d(4, eps=1e-05, momentum=0.1, affine=False, bias=False, "
                                          "track_running_stats=False)")
    assert repr(nn.GroupNorm(2, 4, affine=False)) == "GroupNorm(2, 4, eps=1e-05, affine=False, bias=False)"
    assert repr(nn.GroupNorm(2, 4)) == "GroupNorm(2, 4, eps=1e-05, affine=True, bias=True)"


@pytest.mark.parametrize("make", [lambda: nn.BatchNorm2d(3, bias=False), lambda: nn.GroupNorm(3, 3, bias=False),
                                  lambda: nn.InstanceNorm2d(3, affine=True, bias=False)])
def test_bias_false_keeps_the_weight_only(rng, make):
    """``bias=False`` (PyTorch's keyword): a weight and no bias (registered as None, out of the state dict); the
    output is the affine-free normalization times the weight, in training and in eval, with the weight's gradient."""
    m = make().double()
    assert m.bias is None and "bias" in m._parameters and "bias" not in m.state_dict() and "weight" in m.state_dict()
    x = rng.standard_normal((4, 3, 5, 2))
    with mf.no_grad():
        m.weight.copy_(mf.tensor(rng.standard_normal(3)))
    w = m.weight.detach().numpy()
    groups = m.num_groups if isinstance(m, nn.GroupNorm) else None
    axes = (1, 2, 3) if groups else (0, 2, 3) if isinstance(m, nn.BatchNorm2d) else (2, 3)
    want = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + 1e-5)
    want = want * w.reshape(1, 3, 1, 1) if not groups else (
        ((x.reshape(4, groups, -1) - x.reshape(4, groups, -1).mean(-1, keepdims=True))
         / np.sqrt(x.reshape(4, groups, -1).var(-1, keepdims=True) + 1e-5)).reshape(x.shape) * w.reshape(1, 3, 1, 1))
    xt = mf.tensor(x, requires_grad=True)
    y = m(xt)
    np.testing.assert_allclose(y.detach().numpy(), want, rtol=1e-10, atol=1e-12)
    g = rng.standard_normal(x.shape)
    y.backward(mf.tensor(g))
    xhat = want / w.reshape(1, 3, 1, 1)
    np.testing.assert_allclose(m.weight.grad.numpy(), (g * xhat).sum(axis=(0, 2, 3)), rtol=1e-9)
    m.eval()
    if isinstance(m, nn.BatchNorm2d):  # eval: the running statistics, weight, no bias
        rm, rv = m.running_mean.numpy(), m.running_var.numpy()
        want = (x - rm.reshape(1, 3, 1, 1)) / np.sqrt(rv.reshape(1, 3, 1, 1) + 1e-5) * w.reshape(1, 3, 1, 1)
        np.testing.assert_allclose(m(mf.tensor(x)).numpy(), want, rtol=1e-10, atol=1e-12)


def test_state_dict_without_num_batches_tracked_loads():
    """A state dict without ``num_batches_tracked`` (older checkpoints, dicts built by hand) loads strictly, as
    PyTorch's does, keeping the module's count; any other missing key is still an error, and nothing is copied."""
    src = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2))
    with mf.no_grad():
        src[1].running_mean.fill_(0.5)
    m = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2))
    m[1].num_batches_tracked += 7
    sd = {k: v for k, v in src.state_dict().items() if not k.endswith("num_batches_tracked")}
    assert m.load_state_dict(sd) == ([], [])
    assert int(m[1].num_batches_tracked.item()) == 7 and np.all(m[1].running_mean.numpy() == 0.5)
    fresh = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2))
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "1\.running_var"'):
        fresh.load_state_dict({k: v for k, v in sd.items() if k != "1.running_var"})
    assert np.all(fresh[1].running_mean.numpy() == 0)


@pytest.mark.parametrize("version", [1, 2])
def test_versioned_state_dict_needs_num_batches_tracked(version):
    """As PyTorch's: a dict whose version metadata says the module is of version 2 or later (num_batches_tracked's)
    must have the key (a strict load fails, nothing copied; a lax one lists it missing); version 1 may lack it."""
    class VersionedDict(dict):
        pass

    src = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2))
    with mf.no_grad():
        src[1].running_mean.fill_(0.5)
    sd = VersionedDict((k, v) for k, v in src.state_dict().items() if not k.endswith("num_batches_tracked"))
    sd._metadata = {"": {"version": 1}, "0": {"version": 1}, "1": {"version": version}}
    m = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2))
    if version == 1:
        assert m.load_state_dict(sd) == ([], [])
        assert np.all(m[1].running_mean.numpy() == 0.5)
        return
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "1\.num_batches_tracked"'):
        m.load_state_dict(sd)
    assert np.all(m[1].running_mean.numpy() == 0)
    assert m.load_state_dict(sd, strict=False) == (["1.num_batches_tracked"], [])
    assert np.all(m[1].running_mean.numpy() == 0.5) and int(m[1].num_batches_tracked.item()) == 0


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("relu", [False, True])
def test_gradients_against_finite_differences(rng, training, relu):
    x = mf.tensor(rng.standard_normal((4, 3, 3, 2)), requires_grad=True)
    w = mf.tensor(rng.uniform(0.5, 2, 3), requires_grad=True)
    b = mf.tensor(rng.standard_normal(3) * 0.1 + 0.3, requires_grad=True)
    rm, rv = mf.tensor(rng.standard_normal(3) * 0.1), mf.tensor(rng.uniform(0.5, 2, 3))

    def fn(x, w, b):  # running stats: copies, so every evaluation starts from the same
        return F.batch_norm(x, rm.clone(), rv.clone(), w, b, training=training, activation="relu" if relu else None)
    assert gradcheck(fn, (x, w, b))


def test_relu_fused_equals_relu_after(rng):
    x = rng.standard_normal((3, 4, 5, 5))
    fused = nn.Sequential(nn.BatchNorm2d(4, dtype=mf.float64), nn.ReLU())
    plain = nn.BatchNorm2d(4, dtype=mf.float64)
    xa, xb = mf.tensor(x, requires_grad=True), mf.tensor(x, requires_grad=True)
    ya, yb = fused(xa), F.relu(plain(xb))
    np.testing.assert_array_equal(ya.numpy(), yb.numpy())
    gy = mf.tensor(rng.standard_normal(x.shape))
    (ya * gy).sum().backward()
    (yb * gy).sum().backward()
    np.testing.assert_allclose(xa.grad.numpy(), xb.grad.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(fused[0].weight.grad.numpy(), plain.weight.grad.numpy(), rtol=1e-12)


def _bn_relu_grads(x, gy, bn, handoff, inplace=False, conv=None):
    """y and the gradients (x's, then the modules' parameters') of ``relu(bn(x))`` written one op at a time (``conv``:
    ``Sequential(conv, bn)``, one fused node). Without ``handoff`` the BatchNorm's output has a hook (which stays with
    that value through an in-place ReLU), so the engine names no sole producer and the ReLU applies its own mask;
    ``handoff`` asserts that the BatchNorm's backward took the ReLU's gradient instead."""
    from minifused.ops import batchnorm as B

    first = copy.deepcopy(bn if conv is None else nn.Sequential(conv, bn))
    xt = mf.tensor(x, requires_grad=True)
    h = first(xt)
    if not handoff:
        h.register_hook(lambda g: g)
    y = F.relu(h, inplace=inplace)
    before = B.stats["relu_from_consumer"]
    y.backward(mf.tensor(gy))
    assert B.stats["relu_from_consumer"] - before == (1 if handoff else 0)
    return [y.numpy(), xt.grad.numpy()] + [p.grad.numpy() for p in first.parameters()]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("inplace", [False, True])
def test_relu_after_batch_norm_hands_its_backward_to_it(rng, dtype, training, affine, layout, inplace):
    """``F.relu(bn(x))``: the ReLU's backward is applied in BatchNorm's (its decisions recomputed from the factors
    the forward kept), with the same output and gradients, bit for bit, as the ReLU's own mask pass (in float32
    and float64 the recomputed affine is the output's value)."""
    x = (rng.standard_normal((4, 5, 3, 3)) * 2 + 0.5).astype(dtype)
    if layout == "channels_last":
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    gy = rng.standard_normal(x.shape).astype(dtype)
    bn = nn.BatchNorm2d(5, affine=affine, dtype=dtype)
    if affine:
        with mf.no_grad():
            bn.weight.copy_(mf.tensor(rng.uniform(0.5, 2, 5).astype(dtype)))
            bn.bias.copy_(mf.tensor(rng.standard_normal(5).astype(dtype)))
    bn.running_mean.fill_(0.3)
    bn.train(training)
    want = _bn_relu_grads(x, gy, bn, False, inplace)
    got = _bn_relu_grads(x, gy, bn, True, inplace)
    assert len(got) == (4 if affine else 2)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    assert (want[0] == 0).any() and (want[0] > 0).any()  # the ReLU cut some elements and passed others


def test_relu_after_a_fused_conv_batch_norm_hands_its_backward_to_it(rng):
    """``F.relu(Sequential(conv, bn)(x))``: the fused convolution + BatchNorm node takes the ReLU's backward too."""
    from minifused.ops.batchnorm import ConvBatchNormFn

    x = rng.standard_normal((3, 2, 6, 6))
    gy = rng.standard_normal((3, 4, 6, 6))
    conv, bn = nn.Conv2d(2, 4, 3, padding=1, dtype=mf.float64), nn.BatchNorm2d(4, dtype=mf.float64)
    assert nn.Sequential(conv, bn)(mf.tensor(x, requires_grad=True))._ctx.fn is ConvBatchNormFn
    for a, b in zip(_bn_relu_grads(x, gy, bn, True, conv=conv), _bn_relu_grads(x, gy, bn, False, conv=conv)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("training", [True, False])
def test_relu_after_batch_norm_against_finite_differences(rng, training):
    x = mf.tensor(rng.standard_normal((4, 3, 3, 2)), requires_grad=True)
    w = mf.tensor(rng.uniform(0.5, 2, 3), requires_grad=True)
    b = mf.tensor(rng.standard_normal(3) * 0.1 + 0.3, requires_grad=True)
    rm, rv = mf.tensor(rng.standard_normal(3) * 0.1), mf.tensor(rng.uniform(0.5, 2, 3))

    def fn(x, w, b):
        return F.relu(F.batch_norm(x, rm.clone(), rv.clone(), w, b, training=training))
    assert gradcheck(fn, (x, w, b))


def test_relu_keeps_its_own_backward_where_the_batch_norm_output_has_another_consumer(rng):
    """A BatchNorm output that the ReLU and another op both read (or with a hook) gets the gradients added, so
    the ReLU applies its mask itself: the gradients as a float64 composite of the two ops."""
    from minifused.ops import batchnorm as B

    x = rng.standard_normal((4, 3, 2, 2))
    xt = mf.tensor(x, requires_grad=True)
    h = F.batch_norm(xt, None, None, training=True)
    before = B.stats["relu_from_consumer"]
    (F.relu(h) * 2 + h * h).sum().backward()
    assert B.stats["relu_from_consumer"] == before
    xr = mf.tensor(x, requires_grad=True)
    mean = xr.mean((0, 2, 3), keepdim=True)
    hr = (xr - mean) / ((xr - mean).pow(2).mean((0, 2, 3), keepdim=True) + 1e-5).sqrt()
    (hr.clamp(min=0) * 2 + hr * hr).sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(), xr.grad.numpy(), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("groups,shape", [(1, (2, 4, 3, 3)), (2, (3, 4, 5)), (4, (2, 4)), (3, (2, 6, 2, 3))])
def test_group_norm_against_float64(rng, groups, shape):
    x = rng.standard_normal(shape) * 2 + 0.5
    w, b = rng.standard_normal(shape[1]), rng.standard_normal(shape[1])
    g = x.reshape(shape[0], groups, -1)
    want = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(shape)
    cshape = (1, -1) + (1,) * (len(shape) - 2)
    want = want * w.reshape(cshape) + b.reshape(cshape)
    mod = nn.GroupNorm(groups, shape[1], dtype=mf.float64)
    mod.weight._data[...] = w
    mod.bias._data[...] = b
    np.testing.assert_allclose(mod(mf.tensor(x)).numpy(), want, rtol=1e-10, atol=1e-12)
    xt = mf.tensor(x, requires_grad=True)
    assert gradcheck(lambda x, w, b: F.group_norm(x, groups, w, b),
                     (xt, mf.tensor(w, requires_grad=True), mf.tensor(b, requires_grad=True)))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("training,running", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("relu", [False, True])
def test_bias_without_weight_keeps_its_own_dtype(device, rng, dtype, training, running, relu):
    """F.batch_norm of a 16-bit input with weight=None and a float32 bias (and running statistics): y in the
    input's dtype, the float64 values rounded once; bias.grad in float32, as PyTorch's: the float64 sum of the
    incoming gradient, not rounded to 16 bits (which took 950.99 to 952 in bfloat16)."""
    dt, shape = getattr(mf, dtype), (64, 3, 50)
    x = mf.tensor(rng.standard_normal(shape) * 2 + 0.5, dtype=dt, device=device)
    b = mf.tensor(rng.standard_normal(3), dtype=mf.float32, device=device, requires_grad=True)
    stats = [mf.tensor(a, dtype=mf.float32, device=device) for a in (rng.standard_normal(3), rng.uniform(0.5, 2, 3))]
    rm, rv = (f64(a) for a in stats)
    y = F.batch_norm(x, *(stats if running else (None, None)), None, b, training=training,
                     activation="relu" if relu else None)
    gy = mf.tensor(rng.standard_normal(shape) + 0.3, dtype=dt, device=device)
    (y * gy).sum().backward()
    mean, var, _ = batch_stats(f64(x)) if training else (rm, rv, None)
    want = bn_ref(f64(x), mean, var, np.ones(3), f64(b), 1e-5)
    want = np.maximum(want, 0) if relu else want
    assert y.dtype == dt and b.grad.dtype == mf.float32
    np.testing.assert_allclose(f64(y), want, rtol=TOL[dt], atol=TOL[dt] * np.abs(want).max())
    passed = f64(y) > 0 if relu else 1  # (where the ReLU passed: ours)
    np.testing.assert_allclose(f64(b.grad), (f64(gy) * passed).sum(axis=(0, 2)), rtol=1e-5)


def _real_batch(shape):
    return tuple(d or 2 for d in shape)


@pytest.mark.parametrize("training", [True, False])
def test_strided_channel_vectors(device, rng, training):
    """F.batch_norm and F.group_norm (and F.conv2d's bias) with weight, bias and running statistics that are
    strided views (every other element of larger tensors) give what their contiguous copies give: outputs,
    gradients, and running statistics updated through the views (the kernels read and write the vectors as dense
    ones)."""
    x = rng.standard_normal((4, 6, 3, 3)).astype(np.float32)
    dy = rng.standard_normal((4, 6, 3, 3)).astype(np.float32)
    big = {k: rng.standard_normal(12).astype(np.float32) for k in ("w", "b", "rm")}
    big["rv"] = rng.uniform(0.5, 2.0, 12).astype(np.float32)
    results = []
    for dense in (False, True):
        t = {k: mf.tensor(v, device=device) for k, v in big.items()}
        for k in ("w", "b"):
            t[k].requires_grad_(True)
        w, b, rm, rv = (t[k][::2] for k in ("w", "b", "rm", "rv"))
        if dense:
            w, b = w.contiguous(), b.contiguous()
            rm, rv = rm.contiguous(), rv.contiguous()
        xt = mf.tensor(x, device=device).requires_grad_(True)
        y = (F.batch_norm(xt, rm, rv, w, b, training=training, momentum=0.3) + F.group_norm(xt, 3, w, b)
             + F.conv2d(xt, mf.tensor(np.ones((6, 6, 1, 1), np.float32) / 6, device=device), b))
        (y * mf.tensor(dy, device=device)).sum().backward()
        # the running statistics as the kernels left them (the dense copies hold them in the second run)
        stats = [a.cpu().numpy() for a in ((t["rm"][::2], t["rv"][::2]) if not dense else (rm, rv))]
        results.append([y.detach().cpu().numpy(), xt.grad.cpu().numpy(), t["w"].grad.cpu().numpy(),
                        t["b"].grad.cpu().numpy(), *stats, t["rm"][1::2].cpu().numpy()])
    for strided, dense in zip(*results):
        np.testing.assert_allclose(strided, dense, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(0, 3), (0, 3, 5), (0, 3, 4, 4), (2, 3, 0, 4)])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_empty_batch_as_pytorch(device, rng, shape, training, momentum):
    """An empty input (N = 0, or an empty spatial dimension) gives an empty output of its shape and dtype in either
    mode; training leaves the running statistics as they were and counts the batch (PyTorch's module does); the
    input's gradient is empty, weight's and bias's are zeros."""
    bn = (nn.BatchNorm2d if len(shape) == 4 else nn.BatchNorm1d)(3, momentum=momentum, device=device)
    bn(mf.tensor(rng.standard_normal(_real_batch(shape)), dtype=mf.float32, device=device))  # stats off their start
    bn.train(training)
    before = _bn_state(bn)
    x = mf.tensor(np.zeros(shape), dtype=mf.float32, device=device, requires_grad=True)
    y = bn(x)
    assert y.shape == shape and y.dtype == mf.float32
    y.sum().backward()
    assert x.grad.shape == shape
    after = _bn_state(bn)
    for key in ("running_mean", "running_var"):
        np.testing.assert_array_equal(after[key], before[key])
    assert after["num_batches_tracked"] == before["num_batches_tracked"] + training
    for p in (bn.weight, bn.bias):
        np.testing.assert_array_equal(host(p.grad), np.zeros(3, np.float32))
    # the functional form, without running statistics or with, a 16-bit input
    half = mf.tensor(np.zeros(shape), dtype=mf.float16, device=device)
    assert F.batch_norm(half, None, None, training=True).dtype == mf.float16
    stats = [mf.tensor(np.ones(3), dtype=mf.float16, device=device) for _ in range(2)]
    assert F.batch_norm(half, *stats, training=training).shape == shape and f64(stats[0]).tolist() == [1, 1, 1]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("module", [False, True])
def test_group_norm_16_bit_input_with_float32_affine_keeps_the_input_dtype(device, rng, dtype, module):
    """As PyTorch: a 16-bit input with float32 weight and bias (the module's default) gives an output and an
    input gradient in the input's dtype, float32 weight and bias gradients; all rounded once from the float64
    values (the same op over the input's values in float64)."""
    dt, shape = getattr(mf, dtype), (3, 6, 5, 4)
    x = mf.tensor(rng.standard_normal(shape) * 2 + 0.5, dtype=dt, device=device, requires_grad=True)
    mod = nn.GroupNorm(3, 6, device=device)
    mod.weight._data[...] = dev_array(rng.uniform(0.5, 1.5, 6).astype(np.float32), device)
    mod.bias._data[...] = dev_array(rng.standard_normal(6).astype(np.float32), device)
    w, b = mod.weight, mod.bias
    y = mod(x) if module else F.group_norm(x, 3, w, b)
    gy = rng.standard_normal(shape)
    (y * mf.tensor(gy, dtype=dt, device=device)).sum().backward()
    ins = [mf.tensor(f64(a), requires_grad=True) for a in (x, w, b)]
    want = F.group_norm(*ins[:1], 3, *ins[1:])
    (want * mf.tensor(f64(mf.tensor(gy, dtype=dt)))).sum().backward()
    assert y.dtype == x.grad.dtype == dt and w.grad.dtype == b.grad.dtype == mf.float32
    for got, ref, tol in [(y, want, TOL[dt]), (x.grad, ins[0].grad, TOL[dt]), (w.grad, ins[1].grad, 1e-5),
                          (b.grad, ins[2].grad, 1e-5)]:
        ref = ref.detach().cpu().numpy()
        np.testing.assert_allclose(f64(got), ref, rtol=tol, atol=tol * np.abs(ref).max())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("groups,shape,affine", [(8, (5, 64, 7, 5), "both"), (1, (3, 40, 3), "weight"),
                                                 (2, (6, 12), "bias"), (16, (2, 16, 9, 9), None),
                                                 (2, (2, 6000, 3), "both"), (1, (2, 4100, 2), "both")])
def test_group_norm_on_cuda_against_float64(rng, dtype, groups, shape, affine):
    """The fused kernels (and, for groups of more than MAX_GROUP_CHANNELS channels, the rows-and-affine path): the
    output and every gradient against the float64 cpu path of the same rounded values, in the input's dtype with
    weight and bias of that dtype, either left out; odd positions, one position (2-d input), one channel a group
    (instance norm's case)."""
    dt = getattr(mf, dtype)
    x = mf.tensor(rng.standard_normal(shape) * 3 + 1.5, dtype=dt, device="cuda", requires_grad=True)
    c = shape[1]
    w = mf.tensor(rng.uniform(0.5, 1.5, c), dtype=dt, device="cuda", requires_grad=True) \
        if affine in ("both", "weight") else None
    b = mf.tensor(rng.standard_normal(c), dtype=dt, device="cuda", requires_grad=True) \
        if affine in ("both", "bias") else None
    y = F.group_norm(x, groups, w, b)
    gy = mf.tensor(rng.standard_normal(shape), dtype=dt, device="cuda")
    (y * gy).sum().backward()
    ins = [None if t is None else mf.tensor(f64(t), requires_grad=True) for t in (x, w, b)]
    want = F.group_norm(ins[0], groups, ins[1], ins[2])
    (want * mf.tensor(f64(gy))).sum().backward()
    assert y.dtype == dt and y.shape == shape
    tol = TOL[dt]
    pairs = [(y, want), (x.grad, ins[0].grad)] + [(t.grad, r.grad) for t, r in zip((w, b), ins[1:]) if t is not None]
    for got, ref in pairs:
        ref = f64(ref.detach())
        # (the weight's and bias's gradients sum N * positions terms, rounded once to the dtype)
        np.testing.assert_allclose(f64(got), ref, rtol=2 * tol, atol=2 * tol * np.abs(ref).max())


# ---------------------------------------------------------------- bad input: clear errors, nothing changed
def _bn_state(mod):
    return {k: v.cpu().numpy().copy() for k, v in mod.state_dict().items()}


@pytest.mark.parametrize("make,x,exc,words", [
    (lambda: nn.BatchNorm2d(3), lambda: mf.randn(2, 4, 3, 3), ValueError,
     r"BatchNorm2d: expected 3 channels \(num_features\) in dimension 1, got input of shape \[2, 4, 3, 3\]"),
    (lambda: nn.BatchNorm2d(3), lambda: mf.randn(2, 3, 3), ValueError, "BatchNorm2d: expected 4-D input, got 3-D"),
    (lambda: nn.BatchNorm1d(4), lambda: mf.randn(1, 4), ValueError,
     r"expected more than 1 value per channel when training, got input size \[1, 4\]"),
    (lambda: nn.BatchNorm2d(2), lambda: mf.randn(1, 2, 1, 1), ValueError, "more than 1 value per channel"),
    (lambda: nn.BatchNorm1d(2), lambda: mf.tensor([[1, 2], [3, 4]]), TypeError,
     "batch_norm: expected a floating-point input, got dtype int64"),
    (lambda: nn.BatchNorm1d(2), lambda: [[1.0, 2.0]], TypeError, "BatchNorm1d: expected a tensor input, got list"),
    # PyTorch refuses eps = 0 where the batch's statistics normalize (a constant channel divides by 0)
    (lambda: nn.BatchNorm2d(2, eps=0), lambda: mf.randn(2, 2, 3, 3), ValueError,
     r"batch_norm: eps must be a finite number, > 0 in training \(>= 0 in evaluation\), got 0"),
    (lambda: nn.BatchNorm2d(2, eps=0, track_running_stats=False).eval(), lambda: mf.randn(2, 2, 3, 3), ValueError,
     "eps must be a finite number, > 0 in training")])
def test_bad_input_changes_nothing(make, x, exc, words):
    mod = make()
    before = _bn_state(mod)
    with pytest.raises(exc, match=words):
        mod(x())
    after = _bn_state(mod)
    assert before.keys() == after.keys() and all(np.array_equal(before[k], after[k]) for k in before)


@pytest.mark.parametrize("fn,exc,words", [
    (lambda: nn.BatchNorm2d(3, momentum=1.5), ValueError, r"BatchNorm2d: momentum must be a number in \[0, 1\] or None, got 1.5"),
    (lambda: nn.BatchNorm2d(3, momentum=-0.1), ValueError, "momentum must be a number in"),
    # not a number: a TypeError, as F.batch_norm's (and PyTorch's) for the same value
    (lambda: nn.BatchNorm2d(3, momentum="0.1"), TypeError, r"BatchNorm2d: momentum must be a number in \[0, 1\]"),
    (lambda: nn.BatchNorm2d(0), ValueError, "BatchNorm2d: num_features must be a positive int, got 0"),
    # no int or no number at all: a TypeError, as PyTorch's (its factories refuse a float size; its argument parser a
    # string eps)
    (lambda: nn.BatchNorm2d(3.0), TypeError, "BatchNorm2d: num_features must be a positive int, got 3.0"),
    (lambda: nn.SyncBatchNorm(True), TypeError, "SyncBatchNorm: num_features must be a positive int, got True"),
    (lambda: nn.BatchNorm1d(3, eps="1e-5"), TypeError, "BatchNorm1d: eps must be a number >= 0, got '1e-5'"),
    (lambda: nn.BatchNorm1d(3, eps=-1.0), ValueError, "BatchNorm1d: eps must be a number >= 0, got -1.0"),
    (lambda: F.batch_norm(mf.randn(2, 3), mf.zeros(3), mf.ones(3), eps=None), TypeError,
     r"batch_norm: eps must be a finite number, > 0 in training \(>= 0 in evaluation\), got None"),
    (lambda: nn.GroupNorm(3, 4), ValueError, r"GroupNorm: num_channels \(4\) must be divisible by num_groups \(3\)"),
    (lambda: F.group_norm(mf.randn(2, 6, 3), 4), ValueError, r"group_norm: num_groups \(4\) must divide the number of channels \(6\)"),
    (lambda: nn.GroupNorm(2, 4)(mf.randn(2, 6, 3)), ValueError, "GroupNorm: expected 4 channels"),
    (lambda: F.batch_norm(mf.randn(2, 3), None, None, training=False), ValueError,
     "running_mean must be defined in evaluation mode"),
    (lambda: F.batch_norm(mf.randn(2, 3), mf.zeros(3), mf.ones(3), training=True, momentum=2.0), ValueError,
     r"batch_norm: momentum must be a number in \[0, 1\], got 2.0"),
    # PyTorch's F.batch_norm takes no momentum=None (the modules' cumulative average): a TypeError, as its
    (lambda: F.batch_norm(mf.randn(2, 3), mf.zeros(3), mf.ones(3), training=True, momentum=None), TypeError,
     r"batch_norm: momentum must be a number in \[0, 1\], got None"),
    (lambda: F.batch_norm(mf.randn(2, 3), mf.zeros(4), mf.ones(4)), ValueError,
     r"batch_norm: running_mean must have shape \[3\]"),
    (lambda: F.batch_norm(mf.randn(2, 3), mf.zeros(3), None), ValueError, "both be tensors or both None, got "
                                                                          "running_mean alone"),
    (lambda: F.batch_norm(mf.randn(2, 3), None, mf.ones(3)), ValueError, "got running_var alone"),
    (lambda: nn.utils.fusion.fuse_conv_bn_eval(nn.Conv2d(2, 3, 1).eval(), nn.BatchNorm2d(3)), ValueError,
     "fuse_conv_bn_eval: both modules must be in evaluation mode .*, got conv.training=False, bn.training=True"),
    (lambda: nn.utils.fusion.fuse_linear_bn_eval(nn.Linear(2, 3), nn.BatchNorm1d(3).eval()), ValueError,
     "fuse_linear_bn_eval: both .*, got linear.training=True, bn.training=False"),
    (lambda: nn.SyncBatchNorm(3, process_group=object()), NotImplementedError,
     r"SyncBatchNorm: process_group must be None \(minifused has one group\), got object"),
    (lambda: F.batch_norm(mf.randn(2, 3), mf.zeros(3), mf.ones(3), activation="gelu"), ValueError,
     "activation must be None or 'relu'"),
    (lambda: F.batch_norm(mf.randn(2, 3), mf.zeros(3), mf.ones(3, dtype=mf.float64)), TypeError, "share one dtype"),
    (lambda: F.batch_norm(mf.randn(2, 3), None, None, training=True, eps=0.0), ValueError, "> 0 in training"),
    # PyTorch's rule: one image whose groups hold one value each
    (lambda: nn.GroupNorm(4, 4)(mf.randn(1, 4, 1, 1)), ValueError,
     r"group_norm: expected more than 1 value per group, got input size \[1, 4, 1, 1\] with num_groups=4"),
    (lambda: F.group_norm(mf.randn(1, 4), 4), ValueError, "expected more than 1 value per group"),
    (lambda: nn.Conv2d(4, 6, 3, padding="same", stride=2), ValueError,
     r"Conv2d: padding='same' is not supported for strided convolutions, got stride=\(2, 2\)"),
    (lambda: nn.Conv1d(4, 6, 3, padding="same", stride=(2,)), ValueError,
     "Conv1d: padding='same' is not supported for strided convolutions, got stride=2")])
def test_bad_arguments(fn, exc, words):
    with pytest.raises(exc, match=words):
        fn()


def test_eps_zero_is_allowed_where_running_stats_normalize_and_group_norm_of_two_images_runs(rng):
    """As in PyTorch: eps = 0 in evaluation (the running variance normalizes); a group of one value per image
    normalizes to zeros when there are two images."""
    x = rng.standard_normal((2, 2, 3, 3)).astype(np.float32)
    bn = nn.BatchNorm2d(2, eps=0).eval()
    with mf.no_grad():
        bn.running_var.fill_(4.0)
    np.testing.assert_allclose(bn(mf.tensor(x)).numpy(), x / 2, rtol=1e-6)
    np.testing.assert_array_equal(nn.GroupNorm(4, 4)(mf.randn(2, 4, 1, 1)).detach().numpy(), np.zeros((2, 4, 1, 1)))


def test_refused_functional_call_keeps_running_stats():
    rm, rv = mf.zeros(3), mf.ones(3)
    with pytest.raises(ValueError):
        F.batch_norm(mf.randn(1, 3), rm, rv, training=True)
    assert rm.numpy().tolist() == [0, 0, 0] and rv.numpy().tolist() == [1, 1, 1] and rm._version == 0


# ---------------------------------------------------------------- CUDA kernels against the reference
SHAPES = [(4, 3, 5), (2, 64, 1024), (256, 7, 1), (3, 1, 777), (1, 2, 40000), (33, 130, 9),
          # a channel cached in shared memory (kernels.batchnorm._per_channel): one block (8x8 maps, runs of
          # 32, 48, 100), or in
          # the forward on sm_90+ a cluster of 2, 4 or 8 (an odd run whose last block holds a shorter slice;
          # a ReLU over a cluster), the backward then taking the three passes (these fit the L2; its
          # clusters: test_cluster_backward_matches_reference)
          (256, 16, 64), (5, 3, 32), (9, 4, 48), (3, 5, 100), (4, 2, 8192), (33, 4, 999), (64, 8, 1024),
          (16, 2, 16384),
          # channels too large for a cluster's shared memory: the three passes
          (9, 2, 40000)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float16, mf.bfloat16])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("relu", [False, True])
def test_cuda_kernels_match_reference(rng, poisoned_pool, dtype, shape, relu):
    import cupy

    x = (rng.standard_normal(shape) * 2 + 3).astype(dtype)
    c = shape[1]
    w, b = rng.uniform(0.5, 2, c).astype(np.float32), rng.standard_normal(c).astype(np.float32)
    rm, rv = rng.standard_normal(c).astype(np.float32), rng.uniform(0.5, 2, c).astype(np.float32)
    for training in (True, False):
        rm_d, rv_d = cupy.asarray(rm), cupy.asarray(rv)
        rm_h, rv_h = rm.copy(), rv.copy()
        count = cupy.full((), 41, np.int64)  # a module's num_batches_tracked: one more in training
        y, mean, rstd, factors = K.batch_norm_forward(dev_array(x, "cuda"), cupy.asarray(w), cupy.asarray(b), rm_d,
                                                      rv_d, training, 0.1, 1e-5, relu, count)
        assert int(count) == (42 if training else 41)
        y_r, mean_r, rstd_r, _ = K.batch_norm_forward_ref(x, w, b, rm_h, rv_h, training, 0.1, 1e-5, relu)
        tol = 1e-5 if dtype == np.float32 else 1e-2
        np.testing.assert_allclose(f64(y), f64(y_r), rtol=tol, atol=tol)
        np.testing.assert_allclose(host(mean), mean_r, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(host(rstd), rstd_r, rtol=1e-5)
        np.testing.assert_allclose(host(rm_d), rm_h, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(host(rv_d), rv_h, rtol=1e-5)
        if relu:
            _assert_relu_decisions(x, y, mean, rstd, factors, w, b)
        dy = rng.standard_normal(shape).astype(dtype)
        dx, dw, db = K.batch_norm_backward(dev_array(dy, "cuda"), dev_array(x, "cuda"), cupy.asarray(w), mean, rstd,
                                           factors, training)
        dx_r, dw_r, db_r = K.batch_norm_backward_ref(dy, x, w, host(mean), host(rstd),
                                                     None if factors is None else host(factors), training)
        scale = np.abs(f64(dx_r)).max() + 1
        np.testing.assert_allclose(f64(dx), f64(dx_r), rtol=tol, atol=tol * scale)
        np.testing.assert_allclose(host(dw), dw_r, rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(host(db), db_r, rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("relu", [False, True])
def test_cuda_bias_false_matches_the_cpu(rng, relu):
    """BatchNorm2d(bias=False) (+ a ReLU in its kernel) and GroupNorm(bias=False) on the GPU equal the same modules
    on the CPU: outputs, input and weight gradients, running statistics."""
    x = rng.standard_normal((8, 16, 6, 6)).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    runs = []
    for device in ("cpu", "cuda"):
        mf.manual_seed(0)
        layers = [nn.BatchNorm2d(16, bias=False)] + ([nn.ReLU()] if relu else []) + [nn.GroupNorm(4, 16, bias=False)]
        model = nn.Sequential(*layers).to(device)
        with mf.no_grad():
            for p in model.parameters():
                p.copy_(mf.tensor(np.linspace(0.5, 1.5, 16, dtype=np.float32)))
        xt = mf.tensor(x, device=device, requires_grad=True)
        model(xt).backward(mf.tensor(g, device=device))
        runs.append([host(a) for a in (model(xt).detach(), xt.grad, model[0].weight.grad, model[-1].weight.grad,
                                      model[0].running_mean, model[0].running_var)])
    for cpu, gpu in zip(*runs):
        np.testing.assert_allclose(gpu, cpu, rtol=2e-4, atol=2e-5)


@pytest.mark.gpu
def test_cuda_statistics_are_deterministic(rng):
    import cupy

    x = cupy.asarray(rng.standard_normal((64, 32, 33 * 33)).astype(np.float32))
    runs = [K.batch_norm_forward(x, None, None, None, None, True, 0.1, 1e-5)[1:3] for _ in range(3)]
    for mean, rstd in runs[1:]:
        assert cupy.array_equal(mean, runs[0][0]) and cupy.array_equal(rstd, runs[0][1])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("shape", [(16, 8, 6, 6), (32, 5), (8, 3, 11)])
def test_against_pytorch(torch, rng, dtype, shape):
    """A module in the input's dtype (PyTorch's layout for half models), three training steps then eval:
    outputs, input/weight/bias gradients and running statistics."""
    cls = nn.BatchNorm2d if len(shape) == 4 else nn.BatchNorm1d
    tcls = getattr(torch.nn, cls.__name__)
    ours = cls(shape[1], momentum=0.2, dtype=getattr(mf, dtype), device="cuda")
    theirs = tcls(shape[1], momentum=0.2).to(device="cuda", dtype=getattr(torch, dtype))
    w = rng.uniform(0.5, 2, shape[1]).astype(np.float32)
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(w))
    ours.weight._data[...] = mf.tensor(w, dtype=getattr(mf, dtype), device="cuda")._data
    tol = 1e-4 if dtype == "float32" else 3e-2
    for step in range(4):
        if step == 3:
            ours.eval(), theirs.eval()
        x = (rng.standard_normal(shape) * 2 + 1).astype(np.float32)
        gy = rng.standard_normal(shape).astype(np.float32)
        xo = mf.tensor(x, device="cuda", dtype=getattr(mf, dtype), requires_grad=True)
        xt = torch.tensor(x, device="cuda", dtype=getattr(torch, dtype), requires_grad=True)
        yo, yt = ours(xo), theirs(xt)
        (yo * mf.tensor(gy, device="cuda", dtype=getattr(mf, dtype))).sum().backward()
        (yt * torch.tensor(gy, device="cuda", dtype=getattr(torch, dtype))).sum().backward()
        np.testing.assert_allclose(f64(yo), yt.float().detach().cpu().numpy(), rtol=tol, atol=tol)
        np.testing.assert_allclose(f64(xo.grad), xt.grad.float().cpu().numpy(), rtol=tol, atol=tol * 4)
        for name in ("running_mean", "running_var"):
            np.testing.assert_allclose(f64(getattr(ours, name)), getattr(theirs, name).float().cpu().numpy(),
                                       rtol=tol, atol=tol)
    np.testing.assert_allclose(f64(ours.weight.grad), theirs.weight.grad.float().cpu().numpy(), rtol=tol * 10,
                               atol=tol * 10)
    np.testing.assert_allclose(f64(ours.bias.grad), theirs.bias.grad.float().cpu().numpy(), rtol=tol * 10,
                               atol=tol * 10)
    assert int(ours.num_batches_tracked.item()) == int(theirs.num_batches_tracked.item()) == 3


def test_cached_channel_plans():
    """Which inputs the cached-channel kernels take and how a channel is split: one block where it fits
    (1024 threads while the grid fits one wave at two blocks per SM, else 512); on sm_90+, the fewest blocks
    of a cluster that hold it (1024 threads for two, 512 for more; a 32x32 map of a batch of 256 in 16 bits
    in the forward, a cluster of 16 past the portable 8 for a batch of 512 or for 32 bits), none past 16
    blocks' room, nor past one block's without clusters; the forward's registers capped at 32 a thread where
    shared memory fits 2048 threads an SM. The backward caches dy and x: one block, or a
    cluster only where the two overflow the L2 or where a block per channel would leave half the SMs idle;
    1024 threads only while the grid fits one block an SM; past one wave of two blocks an SM, registers
    capped for three blocks of 512 an SM."""
    plan = K._per_channel
    assert plan((256, 64, 64), 2, 8, True, 132) == K.ChannelPlan(1, 1024, 2048, 32768, 2)
    assert plan((256, 512, 64), 2, 8, True, 132) == K.ChannelPlan(1, 512, 2048, 32768, 2)
    assert plan((256, 64, 64), 4, 4, False, 132) == K.ChannelPlan(1, 1024, 4096, K.SLICE_BYTES, 2)
    assert plan((256, 64, 1024), 2, 8, True, 132) == K.ChannelPlan(8, 512, 4096, K.SLICE_BYTES)
    assert plan((256, 128, 256), 2, 8, True, 132) == K.ChannelPlan(2, 1024, 4096, K.SLICE_BYTES, 2)
    assert plan((512, 64, 1024), 2, 8, True, 132) == K.ChannelPlan(16, 512, 4096, K.SLICE_BYTES)
    assert plan((256, 64, 1024), 4, 4, True, 132) == K.ChannelPlan(16, 512, 4096, K.SLICE_BYTES)
    assert plan((256, 64, 1024), 2, 8, False, 132) is None
    assert plan((1024, 64, 1024), 2, 8, True, 132) is None
    # odd sizes: slices are whole multiples of 32 vectors, the last one shorter; a tiny input one block
    p = plan((33, 4, 999), 4, 1, True, 132)
    assert p == K.ChannelPlan(4, 512, 8256, 8256 * 4, 2) and 3 * p.chunk < 33 * 999 <= 4 * p.chunk
    assert plan((4, 3, 5), 4, 1, True, 132) == K.ChannelPlan(1, 32, 32, 128, 2)
    # the backward (two tensors cached) on a 50 MiB L2: dy and x of 64 MiB take a cluster, of 16 MiB the passes
    l2 = 50 << 20
    half = K.SLICE_BYTES // 2
    assert plan((256, 64, 64), 2, 8, True, 132, 2, l2) == K.ChannelPlan(2, 512, 1024, half, 1)
    assert plan((256, 64, 64), 2, 8, False, 132, 2, l2) == K.ChannelPlan(1, 1024, 2048, K.SLICE_BYTES, 1)
    assert plan((256, 128, 64), 2, 8, True, 132, 2, l2) == K.ChannelPlan(1, 1024, 2048, K.SLICE_BYTES, 1)
    assert plan((256, 256, 64), 2, 8, True, 132, 2, l2) == K.ChannelPlan(1, 512, 2048, K.SLICE_BYTES, 1)
    assert plan((256, 512, 64), 2, 8, True, 132, 2, l2) == K.ChannelPlan(1, 512, 2048, K.SLICE_BYTES, 2)
    assert plan((4, 3, 5), 4, 1, True, 132, 2, l2) == K.ChannelPlan(1, 32, 32, 256, 1)
    assert plan((256, 64, 1024), 2, 8, True, 132, 2, l2) == K.ChannelPlan(16, 512, 2048, K.SLICE_BYTES, 2)
    assert plan((256, 256, 256), 2, 8, True, 132, 2, l2) == K.ChannelPlan(4, 512, 2048, K.SLICE_BYTES, 2)
    assert plan((256, 64, 256), 2, 8, True, 132, 2, l2) is None
    assert plan((256, 64, 1024), 2, 8, True, 132, 2, 0) == K.ChannelPlan(16, 512, 2048, K.SLICE_BYTES, 2)


_BIG = [(64, 8, 1024), (33, 4, 999), (9, 2, 4000), (5, 3, 4100)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,shape", [(d, s) for d in (np.float32, np.float16, mf.bfloat16) for s in _BIG]
                         + [(mf.bfloat16, (256, 4, 64)), (np.float16, (256, 4, 64))])
def test_cluster_backward_matches_reference(rng, poisoned_pool, monkeypatch, dtype, shape):
    """The backward's cached-channel cluster (taken on inputs that overflow the L2, here forced with an L2 of
    no bytes; or where a block per channel would leave half the SMs idle): dx, dw, db against the reference,
    with a ReLU and without, over slices whose last is shorter."""
    import cupy

    monkeypatch.setattr(K, "l2_bytes", lambda dev: 0)
    K._launches.cache_clear()
    K._plan.cache_clear()
    try:
        x = (rng.standard_normal(shape) * 2 + 3).astype(dtype)
        dy = rng.standard_normal(shape).astype(dtype)
        xd = dev_array(x, "cuda")
        channel = K._plan(shape, False, xd.dtype, np.dtype(np.float32), xd.data.ptr % 16 == 0, True, True,
                          xd.device.id)[0].channel
        assert channel is not None and channel._dims[0] > shape[1]  # a cluster: more blocks than channels
        c = shape[1]
        w = rng.uniform(0.5, 2, c).astype(np.float32)
        _, mean, rstd, factors = K.batch_norm_forward(dev_array(x, "cuda"), cupy.asarray(w), None, None, None, True,
                                                   0.1, 1e-5, True)
        for m in (factors, None):
            dx, dw, db = K.batch_norm_backward(dev_array(dy, "cuda"), dev_array(x, "cuda"), cupy.asarray(w), mean,
                                               rstd, m, True)
            dx_r, dw_r, db_r = K.batch_norm_backward_ref(dy, x, w, host(mean), host(rstd),
                                                         None if m is None else host(m), True)
            tol = 1e-5 if dtype == np.float32 else 1e-2
            np.testing.assert_allclose(f64(dx), f64(dx_r), rtol=tol, atol=tol * (np.abs(f64(dx_r)).max() + 1))
            np.testing.assert_allclose(host(dw), dw_r, rtol=1e-4, atol=1e-3)
            np.testing.assert_allclose(host(db), db_r, rtol=1e-4, atol=1e-3)
    finally:
        K._launches.cache_clear()
        K._plan.cache_clear()


@pytest.mark.gpu
def test_eager_backward_takes_one_launch_where_a_graph_takes_the_passes(rng):
    """dy and x that fit the L2: an eager backward runs the cached-channel cluster (one launch: host time), a
    captured one the passes (faster on the device); each matches the reference, and the graph's replay its
    capture."""
    import cupy

    shape, dtype = (128, 16, 1024), np.float16
    x = (rng.standard_normal(shape) * 2 + 3).astype(dtype)
    dy = rng.standard_normal(shape).astype(dtype)
    w = rng.uniform(0.5, 2, shape[1]).astype(np.float32)
    xd, dyd, wd = dev_array(x, "cuda"), dev_array(dy, "cuda"), cupy.asarray(w)
    args = (shape, False, xd.dtype, np.dtype(np.float32), True, True, True, xd.device.id)
    assert K._plan(*args, True)[0].channel is not None and K._plan(*args, False)[0].channel is None
    _, mean, rstd, factors = K.batch_norm_forward(xd, wd, None, None, None, True, 0.1, 1e-5, True)
    want = K.batch_norm_backward_ref(dy, x, w, host(mean), host(rstd), host(factors), True)
    eager = K.batch_norm_backward(dyd, xd, wd, mean, rstd, factors, True)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        with backend.capturing("test"):
            stream.begin_capture()
            captured = K.batch_norm_backward(dyd, xd, wd, mean, rstd, factors, True)
            graph = stream.end_capture()
        graph.launch(stream)
        stream.synchronize()
    for got in (eager, captured):
        np.testing.assert_allclose(f64(got[0]), f64(want[0]), rtol=1e-2, atol=1e-2 * (np.abs(f64(want[0])).max() + 1))
        np.testing.assert_allclose(host(got[1]), want[1], rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(host(got[2]), want[2], rtol=1e-4, atol=1e-3)


# ---------------------------------------------------------------- channels-last inputs
def _wrap(a, requires_grad=False):
    """A tensor over array ``a`` as it is (dtype and strides; the legacy ``mf.Tensor(ndarray)`` casts, as
    PyTorch's)."""
    return mf.Tensor._from_array(a).requires_grad_(requires_grad)


def _bn_in_layout(x, gy, w, b, rm, rv, training, relu, channels_last, device):
    """F.batch_norm of the values x (N, C, H, W) laid out channels-last or C-contiguous on ``device``, then its
    backward from gy (C-contiguous: the op brings it to x's layout). Returns y, the running statistics, and the
    gradients of x (as the op returned it: a leaf's .grad is a copy), w and b, as tensors or raw arrays."""
    xd = dev_array(x, device)
    xt = _wrap(to_channels_last(xd) if channels_last else xd, True)
    seen = []
    xt.register_hook(lambda g: seen.append(g._data))
    wt, bt = (None if a is None else _wrap(dev_array(a, device), True) for a in (w, b))
    rmt, rvt = _wrap(dev_array(rm.copy(), device)), _wrap(dev_array(rv.copy(), device))
    y = F.batch_norm(xt, rmt, rvt, wt, bt, training=training, momentum=0.1, activation="relu" if relu else None)
    y.backward(_wrap(dev_array(gy, device)))
    return y._data, rmt, rvt, seen[0], None if wt is None else wt.grad, None if bt is None else bt.grad


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("affine", [True, False])
def test_channels_last_matches_contiguous(rng, device, dtype, training, relu, affine):
    """y, the running statistics and every gradient are those of the same values C-contiguous; y and the input
    gradient come back channels-last (on CUDA fp32 takes the kernels, fp64 the reference)."""
    shape = (3, 5, 4, 6)
    x = (rng.standard_normal(shape) * 2 + 1).astype(dtype)
    gy = rng.standard_normal(shape).astype(dtype)
    w, b = (rng.uniform(0.5, 2, 5).astype(dtype), rng.standard_normal(5).astype(dtype)) if affine else (None, None)
    rm, rv = rng.standard_normal(5).astype(dtype), rng.uniform(0.5, 2, 5).astype(dtype)
    want = _bn_in_layout(x, gy, w, b, rm, rv, training, relu, False, device)
    got = _bn_in_layout(x, gy, w, b, rm, rv, training, relu, True, device)
    assert want[0].flags.c_contiguous and want[3].flags.c_contiguous
    assert is_channels_last(got[0]) and is_channels_last(got[3])
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for a, e in zip(got, want):
        if e is not None:
            np.testing.assert_allclose(f64(a), f64(e), rtol=tol, atol=tol)


def test_other_strided_inputs_come_back_contiguous(rng):
    """A 4-d input that is neither layout is made C-contiguous, as before channels-last existed."""
    x = rng.standard_normal((2, 3, 5, 4)).transpose(0, 1, 3, 2)
    assert not x.flags.c_contiguous and not is_channels_last(x)
    y = F.batch_norm(_wrap(x), None, None, training=True)
    assert y._data.flags.c_contiguous
    np.testing.assert_allclose(y.numpy(), F.batch_norm(mf.tensor(x.copy()), None, None, training=True).numpy(),
                               rtol=1e-12, atol=1e-12)


def test_channels_last_relu_follows_the_memory(rng):
    """A channels-last input's ReLU: the references over its memory's (M, C, 1) view agree with the C-contiguous ones
    element for element, y and the backward's recomputed decisions alike."""
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    xl = to_channels_last(x)
    w, b = rng.uniform(0.5, 2, 3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    y, mean, rstd, factors = K.batch_norm_forward(xl, w, b, None, None, True, 0.1, 1e-5, relu=True)
    assert is_channels_last(y)
    _assert_relu_decisions(x, y, mean, rstd, factors, w, b)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    dx, _, db = K.batch_norm_backward(to_channels_last(dy), xl, w, mean, rstd, factors, True)
    y_c, mean_c, rstd_c, factors_c = K.batch_norm_forward(x, w, b, None, None, True, 0.1, 1e-5, relu=True)
    np.testing.assert_allclose(y, y_c, rtol=1e-5, atol=1e-5)
    dx_c, _, db_c = K.batch_norm_backward(dy, x, w, mean_c, rstd_c, factors_c, True)
    assert is_channels_last(dx)
    np.testing.assert_allclose(dx, dx_c, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(db, db_c, rtol=1e-5, atol=1e-5)


def test_relu_keeps_nothing_per_element(rng):
    """BatchNorm with its ReLU keeps, beside the x and weight its backward needs anyway, per-channel arrays only: the
    mean, rstd and the ReLU's two factors (no mask: the backward recomputes the decisions from x, in float32 here as
    the kernels do); its gradients are those of a separate ReLU after the BatchNorm."""
    x = rng.standard_normal((4, 3, 5, 5)).astype(np.float32)
    fused = nn.Sequential(nn.BatchNorm2d(3), nn.ReLU())
    plain = nn.BatchNorm2d(3)
    xa, xb = mf.tensor(x, requires_grad=True), mf.tensor(x, requires_grad=True)
    ya, yb = fused(xa), F.relu(plain(xb))
    ctx = ya._ctx
    assert [a.shape for a in ctx.saved_tensors] == [(4, 3, 5, 5), (3,)]
    assert sorted(v.shape for v in vars(ctx).values() if isinstance(v, np.ndarray)) == [(2, 3), (3,), (3,)]
    gy = mf.tensor(rng.standard_normal(x.shape).astype(np.float32))
    (ya * gy).sum().backward()
    (yb * gy).sum().backward()
    np.testing.assert_allclose(ya.numpy(), yb.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(xa.grad.numpy(), xb.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fused[0].weight.grad.numpy(), plain.weight.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_channels_last_split():
    """bn_partial_nhwc's grid: a tile spans a 128-byte line of a row (the whole row where shorter); about four
    blocks per SM (one round at its four resident blocks) once the input is large, never more; each slice at
    least 128 rows, so that its partials weigh a thirty-second of its bytes or less."""
    split = K._split_nhwc
    assert split(64, 16, 4, 4, 132) == (1, 1, 4)
    assert split(512 * 32 * 32, 64, 8, 2, 132) == (528, 1, 8)
    assert split(512 * 4 * 4, 512, 8, 2, 132) == (64, 8, 8)  # (ResNet-18's last stage at batch 512)
    assert split(512 * 8 * 8, 256, 8, 2, 132) == (132, 4, 8)
    assert split(2 * 3 * 3, 1030, 1, 2, 132) == (1, 17, 64)
    assert split(64 * 16 * 16, 2056, 4, 4, 132) == (8, 65, 8)
    for m in (64, 147, 4096, 32768, 512 * 32 * 32):
        for c, vec, size in ((16, 4, 4), (16, 8, 2), (3, 1, 4), (64, 8, 2), (512, 4, 4), (512, 8, 2), (24, 1, 4)):
            p, tiles, cols = split(m, c, vec, size, 132)
            assert cols * vec * size <= 128 and (cols == c // vec or cols * vec * size == 128)
            assert tiles == -(-(c // vec) // cols)
            assert 1 <= p * tiles <= 4 * 132
            assert p == 1 or m // p >= 128
            if m >= 4 * 132 * 128 and c * size >= 128:  # enough rows for every SM: the GPU is full
                assert p * tiles >= 3 * 132


def test_channels_last_elementwise_grid():
    """One vector per thread (or two, a stride apart) up to four blocks per SM; past that the grid's stride is a
    whole number of rows (each thread stays on its channels); with two vectors a trip it is even where one trip
    covers the input."""
    grid = K._grid_nhwc
    assert grid(100, 4, 132) == 1 and grid(256 * 300, 3, 132) == 300
    assert grid(512 * 100, 3, 132, 2) == 102  # (100 blocks cover it; the stride a multiple of 3 rows)
    for per_trip in (1, 2):
        for total, d in ((2 ** 20, 8), (327680, 5), (16 * 64 * 1030, 1030), (2 ** 22, 257), (10 ** 6, 3000)):
            blocks = grid(total, d, 132, per_trip)
            assert blocks * 256 * per_trip < total and blocks * 256 % d == 0 and blocks <= max(4 * 132, d)
        for total, d in ((5000, 3), (8 * 64, 8), (77 * 5, 5)):
            blocks = grid(total, d, 132, per_trip)
            assert blocks * 256 * per_trip >= total and (per_trip == 1 or blocks * 256 % d == 0)


CL_SHAPES = [(4, 64, 8, 8), (3, 64, 7, 7), (8, 16, 4, 4), (2, 3, 5, 5), (3, 5, 7, 7), (128, 64, 16, 16),
             # C past one tile of 256 vectors: scalar (C % 8 != 0) and 16-byte vectors
             (2, 1030, 3, 3), (2, 2056, 2, 3),
             # elementwise passes of several trips per thread, their stride a multiple of an odd row
             (64, 5, 32, 32), (16, 1030, 8, 8),
             # several tiles of a 128-byte line and slices of 128 rows (ResNet's last stages); channels that fill
             # a block's threads unevenly (24 fp32 columns: ten rows of them, sixteen threads idle)
             (64, 512, 4, 4), (32, 256, 16, 16), (6, 24, 9, 9)]


def _channels_last_unaligned(a):
    """``a`` (CuPy, N, C, H, W) channels-last, one element past a 16-byte boundary (scalar accesses)."""
    import cupy

    n, c, h, w = a.shape
    nhwc = cupy.empty(a.size + 1, a.dtype)[1:].reshape(n, h, w, c)
    nhwc[...] = a.transpose(0, 2, 3, 1)
    return nhwc.transpose(0, 3, 1, 2)


def _assert_relu_decisions(x, y, mean, rstd, factors, w, b):
    """The ReLU's factors that the forward (an (N, C, ...) ``x`` to ``y``, either layout) kept are the float32 rstd * w
    and b exactly, and the decisions recomputed from them as the backward recomputes them (``relu_passes``) are y's
    sign: y is 0 where the ReLU cut and above 0 where it passed (but for a few positive sums that round to zero in
    a 16-bit y)."""
    f = host(factors)
    np.testing.assert_array_equal(f[0], host(rstd) * host(w).astype(np.float32))
    np.testing.assert_array_equal(f[1], host(b).astype(np.float32))
    xs, ys = host(x), f64(y)
    passes = K.relu_passes(xs.reshape(xs.shape[0], xs.shape[1], -1), host(mean), f).reshape(xs.shape)
    assert not np.any(~passes & (ys != 0))
    assert np.sum(passes & ~(ys > 0)) <= 4


@pytest.fixture
def without_tiles(monkeypatch):
    """The channels-last passes wherever a test would take the cached-tile kernels."""
    monkeypatch.setattr(K, "_per_tile", lambda *a, **k: None)
    K._launches.cache_clear()
    K._plan.cache_clear()
    yield
    K._launches.cache_clear()
    K._plan.cache_clear()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float16, mf.bfloat16])
@pytest.mark.parametrize("shape", CL_SHAPES)
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("tiles", [True, False])
def test_cuda_channels_last_matches_contiguous(rng, poisoned_pool, request, dtype, shape, relu, tiles):
    """The channels-last kernels (16-byte vectors and, unaligned, scalar; the cached tiles where they fit, and the
    passes) against the C-contiguous ones on the same values: y, statistics, running statistics, counter, the ReLU's
    factors and decisions, and dx, dw, db, in training and eval; y and dx channels-last."""
    import cupy

    if not tiles:
        request.getfixturevalue("without_tiles")
    c = shape[1]
    x = (rng.standard_normal(shape) * 2 + 3).astype(dtype)
    dy = rng.standard_normal(shape).astype(dtype)
    w = cupy.asarray(rng.uniform(0.5, 2, c).astype(np.float32))
    b = cupy.asarray(rng.standard_normal(c).astype(np.float32))
    rm, rv = rng.standard_normal(c).astype(np.float32), rng.uniform(0.5, 2, c).astype(np.float32)
    xd, dyd = dev_array(x, "cuda"), dev_array(dy, "cuda")
    tol = 1e-5 if dtype == np.float32 else 1e-2
    for training in (True, False):
        runs = []
        for layout in (lambda a: a, to_channels_last, _channels_last_unaligned):
            rm_d, rv_d, count = cupy.asarray(rm), cupy.asarray(rv), cupy.full((), 41, np.int64)
            xin = layout(xd)
            y, mean, rstd, factors = K.batch_norm_forward(xin, w, b, rm_d, rv_d, training, 0.1, 1e-5, relu, count)
            assert int(count) == (42 if training else 41)
            dx, dw, db = K.batch_norm_backward(layout(dyd), xin, w, mean, rstd, factors, training)
            runs.append((y, mean, rstd, rm_d, rv_d, dx, dw, db))
            if relu:
                _assert_relu_decisions(x, y, mean, rstd, factors, w, b)
        (y_r, mean_r, rstd_r, rm_r, rv_r, dx_r, dw_r, db_r) = runs[0]
        assert y_r.flags.c_contiguous and dx_r.flags.c_contiguous
        scale = np.abs(f64(dx_r)).max() + 1
        for y, mean, rstd, rm_d, rv_d, dx, dw, db in runs[1:]:
            assert is_channels_last(y) and is_channels_last(dx)
            np.testing.assert_allclose(f64(y), f64(y_r), rtol=tol, atol=tol)
            np.testing.assert_allclose(host(mean), host(mean_r), rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(host(rstd), host(rstd_r), rtol=1e-5)
            np.testing.assert_allclose(host(rm_d), host(rm_r), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(host(rv_d), host(rv_r), rtol=1e-5)
            np.testing.assert_allclose(f64(dx), f64(dx_r), rtol=tol, atol=tol * scale)
            np.testing.assert_allclose(host(dw), host(dw_r), rtol=1e-4, atol=1e-3)
            np.testing.assert_allclose(host(db), host(db_r), rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float16, mf.bfloat16])
@pytest.mark.parametrize("shape,layout", [(s, "contiguous") for s in SHAPES if len(s) == 3]
                         + [(s, cl) for s in CL_SHAPES for cl in ("tiles", "passes")])
def test_cuda_kept_factors_leave_y_without_the_relu(rng, poisoned_pool, request, dtype, shape, layout):
    """``keep_factors`` (for a separate ReLU's backward): y, the statistics and the running statistics bit for bit
    the plain forward's, the factors bit for bit those of the forward with the ReLU, on every forward kernel (NCHW one
    block, a cluster or the passes; channels-last cached tiles or the passes), in training and eval."""
    import cupy

    if layout == "passes":
        request.getfixturevalue("without_tiles")
    c = shape[1]
    x = (rng.standard_normal(shape) * 2 + 3).astype(dtype)
    xd = dev_array(x, "cuda") if layout == "contiguous" else to_channels_last(dev_array(x, "cuda"))
    w = cupy.asarray(rng.uniform(0.5, 2, c).astype(np.float32))
    b = cupy.asarray(rng.standard_normal(c).astype(np.float32))
    rm, rv = rng.standard_normal(c).astype(np.float32), rng.uniform(0.5, 2, c).astype(np.float32)
    for training in (True, False):
        runs = []
        for relu, keep in ((False, False), (False, True), (True, False)):
            rm_d, rv_d, count = cupy.asarray(rm), cupy.asarray(rv), cupy.full((), 41, np.int64)
            y, mean, rstd, factors = K.batch_norm_forward(xd, w, b, rm_d, rv_d, training, 0.1, 1e-5, relu, count,
                                                          keep_factors=keep)
            assert int(count) == (42 if training else 41)
            assert (factors is None) == (not relu and not keep)
            runs.append((y, mean, rstd, rm_d, rv_d, factors))
        plain, kept, fused = runs
        for a, b_ in zip(kept[:5], plain[:5]):
            assert cupy.array_equal(a, b_)
        assert cupy.array_equal(kept[5], fused[5])
        assert bool((kept[0] < 0).any())  # (no ReLU applied)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("shape", [(16, 8, 6, 6), (64, 16, 32, 32), (8, 3, 11)])
@pytest.mark.parametrize("channels_last", [False, True])
def test_cuda_relu_after_batch_norm_against_pytorch(torch, rng, dtype, shape, channels_last):
    """``F.relu(bn(x))`` with the ReLU's backward handed to BatchNorm's, two training steps and one in eval: outputs
    and input / weight / bias gradients against PyTorch's, and against the ReLU's own mask pass (the BatchNorm's output
    hooked): bit for bit in float32 (the recomputed affine is the output's value), within rounding in 16 bits."""
    from minifused.ops import batchnorm as B

    if channels_last and len(shape) != 4:
        pytest.skip("channels-last is 4-D")
    c = shape[1]
    cls = nn.BatchNorm2d if len(shape) == 4 else nn.BatchNorm1d
    ours = cls(c, dtype=getattr(mf, dtype), device="cuda")
    theirs = getattr(torch.nn, cls.__name__)(c).to(device="cuda", dtype=getattr(torch, dtype))
    w, b = rng.uniform(0.5, 2, c).astype(np.float32), rng.standard_normal(c).astype(np.float32)
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(w)), theirs.bias.copy_(torch.tensor(b))
    with mf.no_grad():
        ours.weight.copy_(mf.tensor(w, device="cuda")), ours.bias.copy_(mf.tensor(b, device="cuda"))
    tol = 1e-4 if dtype == "float32" else 3e-2
    for step in range(3):
        if step == 2:
            ours.eval(), theirs.eval()
        x = (rng.standard_normal(shape) * 2 + 1).astype(np.float32)
        gy = rng.standard_normal(shape).astype(np.float32)
        xt = torch.tensor(x, device="cuda", dtype=getattr(torch, dtype), requires_grad=True)
        if channels_last:
            xt = xt.detach().to(memory_format=torch.channels_last).requires_grad_()
        yt = torch.relu(theirs(xt))
        yt.backward(torch.tensor(gy, device="cuda", dtype=getattr(torch, dtype)))
        runs = []
        for handoff in (True, False):
            xo = mf.tensor(x, device="cuda", dtype=getattr(mf, dtype))
            xo = (xo.to(memory_format=mf.channels_last) if channels_last else xo).requires_grad_()
            model = copy.deepcopy(ours)
            h = model(xo)
            if not handoff:
                h.register_hook(lambda g: g)
            yo = F.relu(h)
            before = B.stats["relu_from_consumer"]
            yo.backward(mf.tensor(gy, device="cuda", dtype=getattr(mf, dtype)))
            assert B.stats["relu_from_consumer"] - before == int(handoff)
            runs.append([f64(yo), f64(xo.grad), f64(model.weight.grad), f64(model.bias.grad)])
        with mf.no_grad():  # (the running statistics move once per step, as PyTorch's)
            ours(mf.tensor(x, device="cuda", dtype=getattr(mf, dtype)))
        got, plain = runs
        expected = [yt.float().detach().cpu().numpy(), xt.grad.float().cpu().numpy(),
                    theirs.weight.grad.float().cpu().numpy(), theirs.bias.grad.float().cpu().numpy()]
        theirs.weight.grad = theirs.bias.grad = None
        for i, (a, p, e) in enumerate(zip(got, plain, expected)):
            t = tol if i < 2 else tol * 10
            np.testing.assert_allclose(a, e, rtol=t, atol=t * 4)
            if dtype == "float32":
                np.testing.assert_array_equal(a, p)
            else:
                np.testing.assert_allclose(a, p, rtol=t, atol=t)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(64, 96, 17, 17), (128, 256, 8, 8)])  # the passes; a cluster of cached tiles
def test_cuda_channels_last_statistics_are_deterministic(rng, shape):
    import cupy

    x = to_channels_last(cupy.asarray(rng.standard_normal(shape).astype(np.float16)))
    runs = [K.batch_norm_forward(x, None, None, None, None, True, 0.1, 1e-5)[1:3] for _ in range(3)]
    for mean, rstd in runs[1:]:
        assert cupy.array_equal(mean, runs[0][0]) and cupy.array_equal(rstd, runs[0][1])
    dy = to_channels_last(cupy.asarray(rng.standard_normal(shape).astype(np.float16)))
    grads = [K.batch_norm_backward(dy, x, None, runs[0][0], runs[0][1], None, True) for _ in range(3)]
    for dx, _, db in grads[1:]:
        assert cupy.array_equal(dx, grads[0][0]) and cupy.array_equal(db, grads[0][2])


def test_cached_tile_plans():
    """Which channels-last inputs the cached-tile kernels take and how: whole 16-byte vectors only; a tile of 4 or 8
    vectors of a row, the fewest blocks per tile that hold it first (a cluster on sm_90+, up to 16; without clusters
    one block), then the widest; the blocks per tile
    doubled while the grid leaves half the SMs idle and each block keeps two rows of vectors per thread; none where
    no tile fits. ResNet-18's shapes in 16 bits: at a batch of 512 the 4x4 stage's forward and backward, at 256 the
    8x8 stage's forward too."""
    plan, T = K._per_tile, K.TilePlan
    full = K.TILE_SLICE_BYTES
    assert plan(8192, 512, 2, 8, True, 132) == T(16, 4, 8, 512, 1024, 65536)
    assert plan(8192, 512, 2, 8, True, 132, 2) == T(16, 4, 16, 512, 512, 65536)
    assert plan(32768, 256, 2, 8, True, 132) is None and plan(32768, 256, 2, 8, True, 132, 2) is None
    assert plan(16384, 256, 2, 8, True, 132) == T(8, 4, 16, 512, 1024, 65536)
    assert plan(16384, 256, 2, 8, True, 132, 2) is None
    # spread: a 4x4 map of a batch of 128 fits one block a tile, and takes eight
    assert plan(2048, 512, 2, 8, True, 132) == T(16, 4, 8, 512, 256, 16384)
    # fp32: 4 channels a vector, a tile of 4 vectors (64 bytes: four blocks, spread to 16); 24 channels: no tile
    assert plan(4096, 64, 4, 4, True, 132) == T(4, 4, 16, 512, 256, 16384)
    assert plan(486, 24, 4, 4, True, 132) is None
    # small inputs: one block of at least 64 threads (a thread per channel of the tile in the reduction)
    assert plan(3, 64, 2, 8, True, 132) == T(1, 8, 1, 64, 3, 3 * 128)
    # no vectors (unaligned or channels not whole vectors), nothing, or too large
    assert plan(8192, 512, 2, 1, True, 132) is None and plan(0, 64, 2, 8, True, 132) is None
    assert plan(1 << 20, 64, 2, 8, True, 132) is None
    # without clusters one block a tile holds at most TILE_SLICE_BYTES
    assert plan(full // 64, 64, 2, 8, False, 132) == T(2, 4, 1, 512, full // 64, full)
    assert plan(full // 64 + 1, 64, 2, 8, False, 132) is None


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float16, mf.bfloat16])
@pytest.mark.parametrize("shape", [(2, 64, 4, 4), (3, 64, 7, 7), (33, 96, 5, 5), (64, 512, 4, 4), (128, 256, 8, 8),
                                   (64, 64, 16, 16), (256, 256, 8, 8)])
def test_cached_tiles_match_reference(rng, poisoned_pool, dtype, shape):
    """The cached-tile kernels (one block a tile; clusters of 2 to 16 blocks, the last block with fewer rows) against
    the float64 reference on the memory's (M, C, 1) view: y, statistics, running statistics, counter, the ReLU's
    factors and decisions, and dx (through the ReLU and not), dw, db; each launch checked to be the one-launch path."""
    import cupy

    c, m = shape[1], shape[0] * shape[2] * shape[3]
    x = (rng.standard_normal(shape) * 2 + 3).astype(dtype)
    dy = rng.standard_normal(shape).astype(dtype)
    w, b = rng.uniform(0.5, 2, c).astype(np.float32), rng.standard_normal(c).astype(np.float32)
    rm, rv = rng.standard_normal(c).astype(np.float32), rng.uniform(0.5, 2, c).astype(np.float32)
    xd, dyd = to_channels_last(dev_array(x, "cuda")), to_channels_last(dev_array(dy, "cuda"))
    # the references in float64: over the (M, C, 1) view NumPy adds the M rows one by one, in fp32 off by 1e-5
    x3, dy3 = f64(K._as3(x, True)), f64(K._as3(dy, True))
    tol = 1e-5 if dtype == np.float32 else 1e-2
    for relu in (False, True):
        launches, _ = K._plan(shape, True, xd.dtype, np.dtype(np.float32), True, False, True, xd.device.id)
        fits = K._per_tile(m, c, xd.dtype.itemsize, 16 // xd.dtype.itemsize, True, 132, 1) is not None
        assert (launches.channel is not None) == fits
        rm_d, rv_d, count = cupy.asarray(rm), cupy.asarray(rv), cupy.full((), 41, np.int64)
        y, mean, rstd, factors = K.batch_norm_forward(xd, cupy.asarray(w), cupy.asarray(b), rm_d, rv_d, True, 0.1,
                                                      1e-5, relu, count)
        rm_h, rv_h = rm.copy(), rv.copy()
        y_r, mean_r, rstd_r, _ = K.batch_norm_forward_ref(x3, w.astype(np.float64), b, rm_h, rv_h, True, 0.1, 1e-5,
                                                          relu)
        assert int(count) == 42 and is_channels_last(y)
        np.testing.assert_allclose(f64(K._as3(y, True)), f64(y_r), rtol=tol, atol=tol)
        np.testing.assert_allclose(host(mean), mean_r, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(host(rstd), rstd_r, rtol=1e-5)
        np.testing.assert_allclose(host(rm_d), rm_h, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(host(rv_d), rv_h, rtol=1e-5)
        if relu:
            _assert_relu_decisions(x, y, mean, rstd, factors, w, b)
        back, _ = K._plan(shape, True, xd.dtype, np.dtype(np.float32), True, True, True, xd.device.id, False)
        assert (back.channel is not None) == (K._per_tile(m, c, xd.dtype.itemsize, 16 // xd.dtype.itemsize, True, 132,
                                                           2) is not None)
        for batch in (True, False):
            dx, dw, db = K.batch_norm_backward(dyd, xd, cupy.asarray(w), mean, rstd, factors, batch)
            dx_r, dw_r, db_r = K.batch_norm_backward_ref(dy3, x3, w.astype(np.float64), host(mean), host(rstd),
                                                         None if factors is None else host(factors), batch)
            assert is_channels_last(dx)
            np.testing.assert_allclose(f64(K._as3(dx, True)), f64(dx_r), rtol=tol,
                                       atol=tol * (np.abs(f64(dx_r)).max() + 1))
            np.testing.assert_allclose(host(dw), dw_r, rtol=1e-4, atol=1e-3)
            np.testing.assert_allclose(host(db), db_r, rtol=1e-4, atol=1e-3)


def test_instance_norm_against_float64(rng):
    """InstanceNorm2d / F.instance_norm, PyTorch's semantics: each (sample, channel) normalized over its positions
    (biased variance), then the affine; tracked running statistics move by momentum towards the instances'
    mean and unbiased variance averaged over the batch, and normalize in evaluation; unbatched input; gradients
    by finite differences; a channel mismatch is an error with affine and a warning without; one position per
    instance is refused."""
    x = rng.standard_normal((3, 4, 5, 6))
    m = nn.InstanceNorm2d(4, affine=True, track_running_stats=True, dtype=mf.float64)
    with mf.no_grad():
        m.weight.copy_(mf.tensor(rng.random(4) + 0.5))
        m.bias.copy_(mf.tensor(rng.random(4)))
    w, b = m.weight.numpy().reshape(1, -1, 1, 1), m.bias.numpy().reshape(1, -1, 1, 1)
    want = (x - x.mean((2, 3), keepdims=True)) / np.sqrt(x.var((2, 3), keepdims=True) + 1e-5) * w + b
    np.testing.assert_allclose(m(mf.tensor(x)).numpy(), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(m.running_mean.numpy(), 0.1 * x.mean((2, 3)).mean(0), rtol=1e-12)
    np.testing.assert_allclose(m.running_var.numpy(), 0.9 + 0.1 * x.var((2, 3), ddof=1).mean(0), rtol=1e-12)
    m.eval()
    rm, rv = m.running_mean.numpy().reshape(1, -1, 1, 1), m.running_var.numpy().reshape(1, -1, 1, 1)
    np.testing.assert_allclose(m(mf.tensor(x)).numpy(), (x - rm) / np.sqrt(rv + 1e-5) * w + b, rtol=1e-12)
    plain = nn.InstanceNorm2d(4, dtype=mf.float64)
    assert plain.weight is None and plain.running_mean is None and list(plain.state_dict()) == []
    np.testing.assert_allclose(plain(mf.tensor(x[0])).numpy(), plain(mf.tensor(x[:1])).numpy()[0], rtol=1e-12)
    assert gradcheck(lambda a, wt, bs: F.instance_norm(a, weight=wt, bias=bs),
                     [mf.tensor(x[:2, :, :3, :4], requires_grad=True), mf.tensor(rng.random(4), requires_grad=True),
                      mf.tensor(rng.random(4), requires_grad=True)])
    with pytest.warns(UserWarning, match="expected 3 channels"):
        nn.InstanceNorm2d(3)(mf.randn(2, 4, 3, 3))
    with pytest.raises(ValueError, match="expected 3 channels"):
        nn.InstanceNorm2d(3, affine=True)(mf.randn(2, 4, 3, 3))
    with pytest.raises(ValueError, match="more than 1 spatial element"):
        nn.InstanceNorm1d(3)(mf.randn(2, 3, 1))
    with pytest.raises(ValueError, match="expected 3-D \\(unbatched\\) or 4-D input"):
        nn.InstanceNorm2d(3)(mf.randn(3, 3))


@pytest.mark.parametrize("use_input_stats", [True, False])
def test_instance_norm_refuses_a_bad_eps_or_momentum_by_its_own_name(use_input_stats):
    """F.instance_norm's own errors (not group_norm's or batch_norm's, which it calls) for a negative eps; a momentum
    of None (or any non-number) is a TypeError as in PyTorch, not a call that skips the running statistics; the
    running statistics stay as they were."""
    x, rm, rv = mf.randn(2, 3, 4), mf.zeros(3), mf.ones(3)
    with pytest.raises(ValueError, match="^instance_norm: eps"):
        F.instance_norm(x, rm, rv, use_input_stats=use_input_stats, eps=-1.0)
    with pytest.raises(TypeError, match="^instance_norm: eps"):  # (no number: a TypeError, as PyTorch's)
        F.instance_norm(x, rm, rv, use_input_stats=use_input_stats, eps=None)
    for momentum in (None, "0.1"):
        with pytest.raises(TypeError, match="^instance_norm: momentum"):
            F.instance_norm(x, rm, rv, use_input_stats=use_input_stats, momentum=momentum)
    assert (rm.numpy() == 0).all() and (rv.numpy() == 1).all()


# ---------------------------------------------------------------- Sequential's Conv2d + BatchNorm2d (+ ReLU): one op
def _graph_kinds(out):
    kinds, stack = [], [out._ctx]
    while stack:
        ctx = stack.pop()
        kinds.append(ctx.fn.__name__)
        stack.extend(t._ctx for t in ctx.inputs if t is not None and t._ctx is not None)
    return kinds


def _conv_bn_pair(device, dtype, conv_kw, bn_kw, relu, channels_last=False):
    """Two identical Sequentials of Conv2d, BatchNorm2d (and ReLU)."""
    mods = []
    for _ in range(2):
        mf.manual_seed(7)
        layers = [nn.Conv2d(3, 4, 3, **conv_kw), nn.BatchNorm2d(4, **bn_kw)] + ([nn.ReLU()] if relu else [])
        seq = nn.Sequential(*layers).to(device=device, dtype=dtype)
        if bn_kw.get("affine", True):  # weights away from one and zero, the running statistics off their start
            seq[1].weight._data[...] = dev_array(np.linspace(0.5, 1.5, 4), device).astype(seq[1].weight._data.dtype)
            seq[1].bias._data[...] = dev_array(np.linspace(-0.2, 0.3, 4), device).astype(seq[1].bias._data.dtype)
        if channels_last:
            seq.to(memory_format=mf.channels_last)
        mods.append(seq)
    return mods


def _one_by_one(seq, x):
    for m in seq:
        x = m(x)
    return x


def _unfused(seq, x):
    """The convolution, then BatchNorm2d (and the ReLU, which it runs in its kernel, as its Sequential does)."""
    return nn.Sequential(*list(seq)[1:])(seq[0](x))


CONV_BN_CASES = [  # (conv keywords, BatchNorm keywords, a ReLU module after)
    (dict(padding=1, bias=False), {}, True),
    (dict(padding=1), dict(momentum=None), False),
    (dict(stride=2, padding=0, bias=False), dict(affine=False), True),
    (dict(padding=1, padding_mode="reflect"), dict(track_running_stats=False), True),
    (dict(padding=2, dilation=2, bias=False), dict(activation="relu"), False),
]


@pytest.mark.parametrize("conv_kw,bn_kw,relu", CONV_BN_CASES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_sequential_conv_bn_is_one_op_with_the_modules_numbers(device, rng, conv_kw, bn_kw, relu, dtype):
    """A Sequential's Conv2d, BatchNorm2d and ReLU run as one node of the tape: outputs, every gradient, the
    running statistics and the batch counter equal (bitwise) to the convolution's and then BatchNorm's with its
    ReLU, over two training steps and an evaluation."""
    if dtype == "bfloat16" and device == "cpu":
        pytest.skip("bfloat16 convolutions run on the GPU")
    dt = getattr(mf, dtype)
    fused, plain = _conv_bn_pair(device, dt, conv_kw, bn_kw, relu)
    for step in range(3):
        if step == 2:
            fused.eval(), plain.eval()
        x = rng.standard_normal((3, 3, 9, 8)) * 2 + 0.5
        xs = [mf.tensor(x, dtype=dt, device=device, requires_grad=True) for _ in range(2)]
        yf, yp = fused(xs[0]), _unfused(plain, xs[1])
        kinds = _graph_kinds(yf)
        assert kinds[0] == "ConvBatchNormFn" and "BatchNormFn" not in kinds and "Relu" not in kinds
        np.testing.assert_array_equal(host(yf.float()), host(yp.float()))
        gy = mf.tensor(rng.standard_normal(yf.shape), dtype=dt, device=device)
        yf.backward(gy), yp.backward(gy)
        np.testing.assert_array_equal(host(xs[0].grad.float()), host(xs[1].grad.float()))
        for (name, a), b in zip(fused.named_parameters(), plain.parameters()):
            np.testing.assert_array_equal(host(a.grad.float()), host(b.grad.float()), err_msg=name)
        for (name, a), b in zip(fused.named_buffers(), plain.buffers()):
            np.testing.assert_array_equal(host(a), host(b), err_msg=name)
    if bn_kw.get("track_running_stats", True):
        assert int(fused[1].num_batches_tracked.item()) == 2


def test_sequential_conv_bn_channels_last_and_no_grad(device, rng):
    """Channels-last modules and input, and a forward under no_grad: the fused op's numbers are the modules'."""
    fused, plain = _conv_bn_pair(device, mf.float32, dict(padding=1, bias=False), {}, True, channels_last=True)
    x = mf.tensor(rng.standard_normal((2, 3, 6, 7)), dtype=mf.float32, device=device).to(
        memory_format=mf.channels_last)
    xs = [x.clone().requires_grad_() for _ in range(2)]
    yf, yp = fused(xs[0]), _unfused(plain, xs[1])
    assert _graph_kinds(yf)[0] == "ConvBatchNormFn" and yf.is_contiguous(memory_format=mf.channels_last)
    np.testing.assert_array_equal(host(yf), host(yp))
    yf.sum().backward(), yp.sum().backward()
    np.testing.assert_array_equal(host(xs[0].grad), host(xs[1].grad))
    np.testing.assert_array_equal(host(fused[0].weight.grad), host(plain[0].weight.grad))
    with mf.no_grad():
        np.testing.assert_array_equal(host(fused(x)), host(_unfused(plain, x)))


@pytest.mark.parametrize("training", [True, False])
def test_sequential_conv_bn_empty_batch(device, rng, training):
    """An empty batch through the fused Conv2d, BatchNorm2d and ReLU: an empty output, the running statistics kept
    and the batch counted in training (as the modules one by one, and PyTorch), zero parameter gradients."""
    fused, plain = _conv_bn_pair(device, mf.float32, dict(padding=1), {}, True)
    x = mf.tensor(rng.standard_normal((2, 3, 5, 4)), dtype=mf.float32, device=device)
    for seq in (fused, plain):  # the running statistics off their start
        seq(x)
        seq.train(training)
    before = _bn_state(fused[1])
    xs = [mf.tensor(np.zeros((0, 3, 5, 4)), dtype=mf.float32, device=device, requires_grad=True) for _ in range(2)]
    yf, yp = fused(xs[0]), _unfused(plain, xs[1])
    assert _graph_kinds(yf)[0] == "ConvBatchNormFn" and yf.shape == yp.shape == (0, 4, 5, 4)
    yf.sum().backward(), yp.sum().backward()
    assert xs[0].grad.shape == (0, 3, 5, 4)
    for (name, a), b in zip(fused.named_parameters(), plain.parameters()):
        np.testing.assert_array_equal(host(a.grad), np.zeros(a.shape, np.float32), err_msg=name)
    for (name, a), b in zip(fused.named_buffers(), plain.buffers()):
        np.testing.assert_array_equal(host(a), host(b), err_msg=name)
    after = _bn_state(fused[1])
    assert after.keys() == before.keys() and after["num_batches_tracked"] == before["num_batches_tracked"] + training
    for key in ("running_mean", "running_var"):
        np.testing.assert_array_equal(after[key], before[key])


def test_sequential_conv_bn_unfused_where_it_must_be(rng):
    """Hooks on either module, a BatchNorm that is not BatchNorm2d's forward (a subclass overriding it,
    SyncBatchNorm) and an unbatched input run the modules one by one, with their numbers."""
    class Shifted(nn.BatchNorm2d):
        def forward(self, x):
            return super().forward(x) + 1

    seen = []
    x = mf.tensor(rng.standard_normal((2, 3, 5, 5)), dtype=mf.float32, requires_grad=True)
    for build in (lambda s: s[0].register_forward_hook(lambda m, a, o: seen.append(o.shape)),
                  lambda s: s[1].register_forward_pre_hook(lambda m, a: seen.append(a[0].shape)),
                  lambda s: s.__setitem__(1, Shifted(4)), lambda s: s.__setitem__(1, nn.SyncBatchNorm(4))):
        mf.manual_seed(0)
        seq = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
        build(seq)
        y = seq(x)
        assert "ConvBatchNormFn" not in _graph_kinds(y)
        np.testing.assert_array_equal(y.detach().numpy(), _one_by_one(seq, x).detach().numpy())
    assert seen == [(2, 4, 3, 3)] * 4
    mf.manual_seed(0)
    seq = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
    with pytest.raises(ValueError, match="BatchNorm2d: expected 4-D input, got 3-D"):
        seq(x[0])


def test_sequential_skips_fusion_for_subclasses_that_override_forward():
    """A subclass overriding forward computes something else than the fused form its base offers: Sequential
    calls it (a Linear + ReLU pair, and a ReLU in place under no_grad, as well)."""
    class Zeroed(nn.Linear):
        def forward(self, x):
            return super().forward(x) * 0

    class Negated(nn.ReLU):
        def forward(self, x):
            return -F.relu(x)

    x = mf.ones(2, 3)
    assert np.all(nn.Sequential(Zeroed(3, 3), nn.ReLU())(x).detach().numpy() == 0)
    mf.manual_seed(0)
    lin = nn.Linear(3, 3)
    want = -F.relu(lin(x)).detach().numpy()
    np.testing.assert_array_equal(nn.Sequential(lin, Negated())(x).detach().numpy(), want)
    with mf.no_grad():
        np.testing.assert_array_equal(nn.Sequential(lin, nn.Identity(), Negated())(x).numpy(), want)


@pytest.mark.parametrize("make,x,exc,words", [
    (lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(5)), lambda: mf.randn(2, 3, 5, 5), ValueError,
     r"BatchNorm2d: expected 5 channels \(num_features\) in dimension 1, got input of shape \[2, 4, 3, 3\]"),
    (lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)), lambda: [[1.0]], TypeError,
     "conv2d: expected a tensor input, got list"),
    (lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)), lambda: mf.randn(1, 3, 3, 3), ValueError,
     r"batch_norm: expected more than 1 value per channel when training, got input size \[1, 4, 1, 1\]"),
    (lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)), lambda: mf.randn(2, 2, 5, 5), ValueError,
     "conv2d: input has 2 channels"),
    (lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, momentum=0.5), nn.ReLU()),
     lambda: mf.tensor(np.ones((2, 3, 5, 5), np.int64)), TypeError,
     "conv2d: input, weight and bias must have one dtype, got int64, float32")])
def test_sequential_conv_bn_bad_input_changes_nothing(make, x, exc, words):
    """The fused op refuses what the two modules refuse, with the same message, before changing any state."""
    seq = make()
    before = _bn_state(seq[1])
    with pytest.raises(exc, match=words):
        seq(x())
    with pytest.raises(exc, match=words):
        _one_by_one(seq, x())
    after = _bn_state(seq[1])
    assert all(np.array_equal(before[k], after[k]) for k in before)


CHANGES_AFTER_A_STEP = {  # (what changes between two calls, the input of the second call)
    "nothing": (lambda s: None, (2, 3, 5, 5)),
    "a resized running_mean": (lambda s: setattr(s[1], "running_mean", mf.zeros(5)), (2, 3, 5, 5)),
    "a negative eps": (lambda s: setattr(s[1], "eps", -1.0), (2, 3, 5, 5)),
    "momentum out of range": (lambda s: setattr(s[1], "momentum", 1.5), (2, 3, 5, 5)),
    "running_var requiring grad": (lambda s: s[1].running_var.requires_grad_(True), (2, 3, 5, 5)),
    "a weight of other channels": (lambda s: setattr(s[0].weight, "data", mf.randn(4, 2, 3, 3)), (2, 3, 5, 5)),
    "a float64 weight": (lambda s: setattr(s[0].weight, "data", s[0].weight.data.double()), (2, 3, 5, 5)),
    "an input of other channels": (lambda s: None, (2, 2, 5, 5)),
    "one value per channel": (lambda s: None, (1, 3, 1, 1)),
    "a float64 input": (lambda s: None, "float64"),
    "no BatchNorm weight": (lambda s: setattr(s[1], "weight", None), (2, 3, 5, 5)),
    "another stride": (lambda s: setattr(s[0], "stride", (2, 2)), (2, 3, 5, 5)),
    "another padding": (lambda s: setattr(s[0], "padding", (0, 0)), (2, 3, 5, 5)),
    "evaluation": (lambda s: s.eval(), (1, 3, 1, 1)),
}


def _outcome(run, model, x):
    """``run(model, x)``'s values, or its error's type and message."""
    try:
        return run(model, x).detach().numpy()
    except (ValueError, TypeError, RuntimeError) as e:
        return type(e), str(e)


def _same_outcome(got, want, seq, plain, before):
    """``got`` (the outcome of ``seq``, whose BatchNorm's state was ``before``) is ``want`` (``plain``'s): the same
    values and buffers, or the same error with the state unchanged."""
    if isinstance(want, tuple):
        assert got == want
        after = _bn_state(seq[1])
        assert all(np.array_equal(before[k], after[k]) for k in before)
    else:
        np.testing.assert_array_equal(got, want)
        for (name, a), b in zip(seq.named_buffers(), plain.buffers()):
            np.testing.assert_array_equal(host(a), host(b), err_msg=name)


@pytest.mark.parametrize("change", list(CHANGES_AFTER_A_STEP))
def test_sequential_conv_bn_checks_again_whatever_changed(monkeypatch, rng, change):
    """The fused Conv2d and BatchNorm2d skip their checks while all they read equals what the last call's checks
    passed, and check again after any change to the modules, the input or grad mode: the same result, or the
    same error with no state changed, as the modules one by one."""
    import minifused.nn.conv as conv_module

    checked = []
    run_checks = conv_module._conv2d_batch_norm_checks
    monkeypatch.setattr(conv_module, "_conv2d_batch_norm_checks", lambda *a, **k: (checked.append(1),
                                                                                   run_checks(*a, **k))[1])
    mf.manual_seed(0)
    seq = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
    x = mf.tensor(rng.standard_normal((2, 3, 5, 5)), dtype=mf.float32)
    seq(x), seq(x)
    assert len(checked) == 1  # (the second call's checks skipped)
    make, shape = CHANGES_AFTER_A_STEP[change]
    make(seq)
    x = x.double() if shape == "float64" else mf.tensor(rng.standard_normal(shape), dtype=mf.float32)
    plain = copy.deepcopy(seq)
    before = _bn_state(seq[1])
    got, want = _outcome(lambda s, x: s(x), seq, x), _outcome(_one_by_one, plain, x)
    assert len(checked) == 1 + (change != "nothing")
    _same_outcome(got, want, seq, plain, before)
    with mf.no_grad():  # grad mode is read too (running statistics requiring grad are refused only with it on)
        seq(x) if not isinstance(want, tuple) or change == "running_var requiring grad" else None
    assert len(checked) == 1 + (change != "nothing") + (not isinstance(want, tuple)
                                                         or change == "running_var requiring grad")


def _forget_checks(model):
    """A deep copy's modules check their next call again (the copy keeps what the original's checks last passed)."""
    for m in model.modules():
        for key in ("_conv_checks_passed", "_norm_checks_passed"):
            m.__dict__.pop(key, None)


@pytest.mark.parametrize("change", list(CHANGES_AFTER_A_STEP))
def test_modules_one_by_one_check_again_whatever_changed(monkeypatch, rng, change):
    """Conv2d and BatchNorm2d called one by one (a model's own forward) each skip their checks while all they read
    equals what their last call's checks passed, and check again after any change to the modules, the input or grad
    mode: the same result, or the same error with no state changed, as modules that check every call."""
    import minifused.functional.batchnorm as bn_functional
    import minifused.functional.conv as conv_functional

    checked = []
    for module, name in ((conv_functional, "_conv2d_args"), (bn_functional, "_check_batch_norm_args")):
        monkeypatch.setattr(module, name, lambda *a, _run=getattr(module, name), _name=name, **k: (
            checked.append(_name), _run(*a, **k))[1])
    own = nn.BatchNorm2d._check_input  # (the module's own checks, which come first)
    monkeypatch.setattr(nn.BatchNorm2d, "_check_input", lambda *a: (checked.append("own"), own(*a))[1])
    mf.manual_seed(0)
    seq = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
    x = mf.tensor(rng.standard_normal((2, 3, 5, 5)), dtype=mf.float32)
    _one_by_one(seq, x), _one_by_one(seq, x)
    assert checked == ["_conv2d_args", "own", "_check_batch_norm_args"]  # (the second call's checks skipped)
    make, shape = CHANGES_AFTER_A_STEP[change]
    make(seq)
    x = x.double() if shape == "float64" else mf.tensor(rng.standard_normal(shape), dtype=mf.float32)
    plain = copy.deepcopy(seq)
    _forget_checks(plain)
    before = _bn_state(seq[1])
    checked.clear()
    got = _outcome(_one_by_one, seq, x)
    assert (len(checked) == 0) == (change == "nothing")
    _same_outcome(got, _outcome(_one_by_one, plain, x), seq, plain, before)
    if change == "running_var requiring grad":  # grad mode is read too: refused only with it on
        with mf.no_grad():
            np.testing.assert_array_equal(_one_by_one(seq, x).numpy(), _one_by_one(plain, x).numpy())


def test_conv2d_checks_skipped_only_for_the_plain_path(rng):
    """A Conv2d keeps what its checks passed only for a batched input of floats with channels: an unbatched input, a
    'same' padding (which may pad the input) and integer inputs check every call, and give PyTorch's results."""
    mf.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3, padding=1)
    x = mf.tensor(rng.standard_normal((3, 5, 5)), dtype=mf.float32)
    want = F.conv2d(x[None], conv.weight, conv.bias, padding=1)[0].detach().numpy()
    for _ in range(2):
        np.testing.assert_array_equal(conv(x).detach().numpy(), want)
    assert "_conv_checks_passed" not in conv.__dict__
    conv.padding = "same"
    for _ in range(2):
        np.testing.assert_array_equal(conv(x).detach().numpy(), want)
    assert "_conv_checks_passed" not in conv.__dict__
    conv.padding = (1, 1)
    conv(x[None]), conv(x[None])
    assert "_conv_checks_passed" in conv.__dict__
    with pytest.raises(ValueError, match="conv2d: input has 2 channels"):
        conv(x[None, :2])


def test_sequential_conv_bn_sees_in_place_changes_and_retains_its_graph(rng):
    """The fused op checks what it saved against in-place changes (the convolution's weight, BatchNorm's weight)
    and, with retain_graph, walks twice to twice the gradient."""
    mf.manual_seed(0)
    seq = nn.Sequential(nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4), nn.ReLU())
    x = mf.tensor(rng.standard_normal((2, 3, 5, 5)), dtype=mf.float32, requires_grad=True)
    for param in (seq[0].weight, seq[1].weight):
        y = seq(x)
        with mf.no_grad():
            param.mul_(1.0)
        with pytest.raises(RuntimeError, match="modified by an in-place operation"):
            y.sum().backward()
    y = seq(x)
    y.sum().backward(retain_graph=True)
    once = x.grad.numpy().copy()
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * once, rtol=1e-6)


# ---------------------------------------------------------------- reset_parameters / reset_running_stats
def _scramble(module, device, rng):
    """Move the weight and bias off ones and zeros, so a reset has something to undo."""
    for p in module.parameters():
        with mf.no_grad():
            p.copy_(mf.tensor(rng.uniform(2, 3, p.shape), dtype=p.dtype, device=device))


@pytest.mark.parametrize("make,shape", [
    (lambda d: nn.BatchNorm1d(3, device=d), (4, 3)),
    (lambda d: nn.BatchNorm2d(3, momentum=None, device=d), (2, 3, 4, 4)),
    (lambda d: nn.BatchNorm2d(3, bias=False, device=d), (2, 3, 4, 4)),
    (lambda d: nn.BatchNorm3d(3, device=d), (2, 3, 2, 3, 3)),
    (lambda d: nn.SyncBatchNorm(3, device=d), (4, 3, 5)),
    (lambda d: nn.InstanceNorm2d(3, affine=True, track_running_stats=True, device=d), (2, 3, 4, 4)),
])
def test_reset_running_stats_and_reset_parameters_in_place(device, rng, make, shape):
    """As PyTorch: ``reset_running_stats`` zeros running_mean and num_batches_tracked and fills running_var with
    ones, leaving the affine parameters; ``reset_parameters`` does that and sets weight to ones, bias to zeros. Both
    write in place: the module holds the same Parameter and buffer objects (an optimizer's stay valid)."""
    bn = make(device)
    bn(mf.tensor(rng.standard_normal(shape) * 3 + 1, dtype=mf.float32, device=device))
    _scramble(bn, device, rng)
    bn.num_batches_tracked.fill_(7)  # InstanceNorm counts no batches (PyTorch's does not either)
    held = [bn.weight, bn.bias, bn.running_mean, bn.running_var, bn.num_batches_tracked]
    weight = f64(bn.weight)
    assert not np.allclose(f64(bn.running_var), 1) and not np.allclose(weight, 1)
    bn.reset_running_stats()
    np.testing.assert_array_equal(f64(bn.running_mean), np.zeros(3))
    np.testing.assert_array_equal(f64(bn.running_var), np.ones(3))
    assert int(bn.num_batches_tracked.item()) == 0
    np.testing.assert_array_equal(f64(bn.weight), weight)  # the parameters are not running statistics
    bn(mf.tensor(rng.standard_normal(shape), dtype=mf.float32, device=device))
    bn.num_batches_tracked.fill_(7)
    bn.reset_parameters()
    np.testing.assert_array_equal(f64(bn.weight), np.ones(3))
    if bn.bias is not None:
        np.testing.assert_array_equal(f64(bn.bias), np.zeros(3))
    np.testing.assert_array_equal(f64(bn.running_mean), np.zeros(3))
    np.testing.assert_array_equal(f64(bn.running_var), np.ones(3))
    assert int(bn.num_batches_tracked.item()) == 0
    assert all(a is b for a, b in zip(held, [bn.weight, bn.bias, bn.running_mean, bn.running_var,
                                             bn.num_batches_tracked]))
    assert bn.weight.requires_grad and bn.weight.dtype == mf.float32 and bn.weight.device == device


def test_reset_without_running_stats_or_affine_is_a_no_op_there(rng):
    bn = nn.BatchNorm2d(3, affine=False, track_running_stats=False)
    bn.reset_running_stats(), bn.reset_parameters()
    assert bn.weight is None and bn.running_mean is None
    inorm = nn.InstanceNorm1d(3)  # PyTorch's defaults: neither
    inorm.reset_parameters()
    assert inorm.weight is None and inorm.running_mean is None


@pytest.mark.parametrize("kwargs", [{}, {"bias": False}, {"affine": False}])
def test_group_norm_reset_parameters_in_place(device, rng, kwargs):
    gn = nn.GroupNorm(2, 4, device=device, **kwargs)
    _scramble(gn, device, rng)
    held = list(gn.parameters())
    gn.reset_parameters()
    assert len(held) == len(list(gn.parameters())) and all(a is b for a, b in zip(held, gn.parameters()))
    if gn.weight is not None:
        np.testing.assert_array_equal(f64(gn.weight), np.ones(4))
    if gn.bias is not None:
        np.testing.assert_array_equal(f64(gn.bias), np.zeros(4))
    x = rng.standard_normal((2, 4, 3))
    g = x.reshape(2, 2, 6)
    ref = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
    np.testing.assert_allclose(f64(gn(mf.tensor(x, dtype=mf.float32, device=device))), ref, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- conv + BatchNorm folding (nn.utils.fusion)
def _eval_bn(c, device, rng, dtype=mf.float64, **kw):
    """An evaluation BatchNorm2d whose statistics and affine parameters are all off their initial values."""
    bn = nn.BatchNorm2d(c, dtype=dtype, device=device, **kw)
    for t, v in ((bn.running_mean, rng.standard_normal(c)), (bn.running_var, rng.uniform(0.5, 2, c)),
                 (bn.weight, rng.uniform(0.5, 2, c)), (bn.bias, rng.standard_normal(c))):
        if t is not None:
            with mf.no_grad():
                t.copy_(mf.tensor(v, dtype=dtype, device=device))
    return bn.eval()


@pytest.mark.parametrize("groups,bias", [(1, True), (1, False), (2, True), (3, False)])
def test_fuse_conv_transpose_bn_equals_the_pair(device, rng, groups, bias):
    """``transpose=True`` folds a BatchNorm after a ConvTranspose2d (weight (in, out/groups, kH, kW)): the folded
    layer's output is the pair's evaluation output, grouped too (where PyTorch's reshape cannot broadcast)."""
    ct = nn.ConvTranspose2d(6, 12, 3, stride=2, padding=1, output_padding=1, groups=groups, bias=bias,
                            dtype=mf.float64, device=device).eval()
    bn = _eval_bn(12, device, rng)
    fused = nn.utils.fuse_conv_bn_eval(ct, bn, transpose=True)
    assert type(fused) is nn.ConvTranspose2d and fused is not ct and not fused.training
    x = mf.tensor(rng.standard_normal((2, 6, 5, 4)), device=device)
    np.testing.assert_allclose(f64(fused(x)), f64(bn(ct(x))), rtol=1e-10, atol=1e-12)
    # the weight by the formula: output channel g * 12/groups + j is column j of group g's rows of the weight
    s = f64(bn.weight) / np.sqrt(f64(bn.running_var) + bn.eps)
    w = f64(ct.weight).reshape(groups, 6 // groups, 12 // groups, 3, 3) * s.reshape(groups, 1, -1, 1, 1)
    np.testing.assert_allclose(f64(fused.weight), w.reshape(6, 12 // groups, 3, 3), rtol=1e-13)
    b0 = f64(ct.bias) if bias else 0.0
    np.testing.assert_allclose(f64(fused.bias), (b0 - f64(bn.running_mean)) * s + f64(bn.bias), rtol=1e-12)


@pytest.mark.parametrize("transpose", [False, True])
def test_fuse_conv_bn_eval_folds_3d_convolutions(rng, transpose):
    """PyTorch folds a BatchNorm3d into any convolution, Conv3d and ConvTranspose3d (grouped) too: the folded
    layer's output is the pair's evaluation output, and the pair's weights are left as they were."""
    conv = (nn.ConvTranspose3d(4, 6, 3, stride=2, groups=2, dtype=mf.float64) if transpose
            else nn.Conv3d(4, 6, 3, groups=2, dtype=mf.float64)).eval()
    bn = nn.BatchNorm3d(6, dtype=mf.float64)
    for t, v in ((bn.running_mean, rng.standard_normal(6)), (bn.running_var, rng.uniform(0.5, 2, 6)),
                 (bn.weight, rng.uniform(0.5, 2, 6)), (bn.bias, rng.standard_normal(6))):
        with mf.no_grad():
            t.copy_(mf.tensor(v))
    bn.eval()
    before = f64(conv.weight).copy()
    fused = nn.utils.fuse_conv_bn_eval(conv, bn, transpose=transpose)
    assert type(fused) is type(conv) and fused is not conv and not fused.training
    x = mf.tensor(rng.standard_normal((2, 4, 4, 5, 4)))
    np.testing.assert_allclose(f64(fused(x)), f64(bn(conv(x))), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(f64(conv.weight), before)


@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_fuse_conv_bn_weights_returns_parameters_as_pytorch(device, rng, transpose, bias):
    """PyTorch's return types: two Parameters in the conv weight's (and bias's) dtype, the weight with the conv
    weight's requires_grad, the bias with the conv bias's, False when the conv has none (PyTorch folds zeros)."""
    conv = (nn.ConvTranspose2d(3, 4, 3, bias=bias, device=device) if transpose
            else nn.Conv2d(3, 4, 3, bias=bias, device=device)).eval()
    bn = _eval_bn(4, device, rng, dtype=mf.float32)
    w, b = nn.utils.fuse_conv_bn_weights(conv.weight, conv.bias, bn.running_mean, bn.running_var, bn.eps,
                                         bn.weight, bn.bias, transpose=transpose)
    assert type(w) is nn.Parameter and type(b) is nn.Parameter
    assert (w.requires_grad, b.requires_grad) == (True, bias)
    assert w.dtype == b.dtype == mf.float32 and w.shape == conv.weight.shape and b.shape == (4,)
    fused = nn.utils.fuse_conv_bn_eval(conv, bn, transpose=transpose)
    assert type(fused.weight) is nn.Parameter and type(fused.bias) is nn.Parameter
    assert (fused.weight.requires_grad, fused.bias.requires_grad) == (True, bias)
    np.testing.assert_array_equal(f64(fused.weight), f64(w))
    conv.weight.requires_grad_(False)
    w, _ = nn.utils.fuse_conv_bn_weights(conv.weight, conv.bias, bn.running_mean, bn.running_var, bn.eps,
                                         None, None, transpose=transpose)
    assert not w.requires_grad
    x = mf.tensor(rng.standard_normal((2, 3, 5, 5)), dtype=mf.float32, device=device)
    np.testing.assert_allclose(f64(fused(x)), f64(bn(conv(x))), rtol=1e-5, atol=1e-5)


def test_fuse_conv_bn_16_bit_conv_keeps_its_dtype(rng):
    """A float16 conv with a float32 BatchNorm folds in float32 and comes back in the conv's dtype (PyTorch's)."""
    conv = nn.Conv2d(3, 4, 1, dtype=mf.float16).eval()
    bn = _eval_bn(4, "cpu", rng, dtype=mf.float32)
    w, b = nn.utils.fuse_conv_bn_weights(conv.weight, conv.bias, bn.running_mean, bn.running_var, bn.eps,
                                         bn.weight, bn.bias)
    assert w.dtype == b.dtype == mf.float16
    s = f64(bn.weight) / np.sqrt(f64(bn.running_var) + bn.eps)
    np.testing.assert_allclose(f64(w), f64(conv.weight) * s[:, None, None, None], rtol=1e-3)


def test_fuse_conv_bn_refuses_the_wrong_transpose_and_shapes(rng):
    ct, conv = nn.ConvTranspose2d(3, 4, 3).eval(), nn.Conv2d(3, 4, 3).eval()
    bn = _eval_bn(4, "cpu", rng, dtype=mf.float32)
    with pytest.raises(ValueError, match=r"a ConvTranspose2d needs transpose=True, got transpose=False"):
        nn.utils.fuse_conv_bn_eval(ct, bn)
    with pytest.raises(ValueError, match=r"a Conv2d needs transpose=False, got transpose=True"):
        nn.utils.fuse_conv_bn_eval(conv, bn, transpose=True)
    with pytest.raises(ValueError, match=r"ConvTranspose2d cannot run after its output"):
        nn.utils.fuse_conv_bn_eval(ct, _eval_bn(4, "cpu", rng, dtype=mf.float32, activation="relu"), transpose=True)
    with pytest.raises(ValueError, match=r"fuse_conv_bn_weights: expected a weight with 5 output channels in "
                                         r"dimension 0 \(the BatchNorm has 5 features\), got weight of shape "
                                         r"\[4, 3, 3, 3\]"):
        nn.utils.fuse_conv_bn_weights(conv.weight, None, mf.zeros(5), mf.ones(5), 1e-5, None, None)
    with pytest.raises(ValueError, match=r"expected a transposed weight with 6/groups output channels in dimension 1"):
        nn.utils.fuse_conv_bn_weights(ct.weight, None, mf.zeros(6), mf.ones(6), 1e-5, None, None, transpose=True)
    with pytest.raises(TypeError, match=r"expected a convolution and a BatchNorm, got BatchNorm2d and Conv2d"):
        nn.utils.fuse_conv_bn_eval(bn, conv)


def test_non_finite_input_is_quiet_and_poisons_its_channel_only(rng):
    """An inf in one channel's input: that channel's output and gradients are NaN, its running mean inf and
    running variance NaN, as in PyTorch; the other channels are right, and NumPy warns about nothing."""
    import warnings

    x = rng.standard_normal((4, 3, 5))
    x[1, 0, 2] = np.inf
    bn = nn.BatchNorm1d(3, dtype=mf.float64)
    xt = mf.tensor(x, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = bn(xt)
        y.backward(mf.ones_like(y))
    y, gx = f64(y), f64(xt.grad)
    assert np.isnan(y[:, 0]).all() and np.isnan(gx[:, 0]).all()
    assert np.isposinf(bn.running_mean.numpy()[0]) and np.isnan(bn.running_var.numpy()[0])  # PyTorch's too
    rest = x[:, 1:]
    mean, var = rest.mean(axis=(0, 2)), rest.var(axis=(0, 2))
    want = (rest - mean[None, :, None]) / np.sqrt(var[None, :, None] + 1e-5)
    np.testing.assert_allclose(y[:, 1:], want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(bn.running_mean.numpy()[1:], 0.1 * mean, rtol=1e-10)
    assert np.isfinite(gx[:, 1:]).all()


@pytest.mark.parametrize("x_dtype,p_dtype,ok", [
    ("float16", "float32", True), ("bfloat16", "float32", True), ("float32", "float32", True),
    ("float32", "float64", False), ("float64", "float32", False), ("float16", "bfloat16", False),
    ("float32", "float16", False)])
def test_parameter_dtypes_as_pytorch(device, x_dtype, p_dtype, ok):
    """Weight, bias and the running statistics in the input's dtype, or float32 under a 16-bit input (mixed
    precision); any other mix is refused, as PyTorch does, before the running statistics change."""
    x = mf.randn(4, 3, 5, device=device).to(getattr(mf, x_dtype))
    pd = getattr(mf, p_dtype)
    rm, rv = mf.zeros(3, device=device, dtype=pd), mf.ones(3, device=device, dtype=pd)
    w, b = mf.ones(3, device=device, dtype=pd), mf.zeros(3, device=device, dtype=pd)
    if ok:
        y = F.batch_norm(x, rm, rv, w, b, training=True)
        g = F.group_norm(x, 3, w, b)
        assert y.dtype == x.dtype and g.dtype == x.dtype
        xs = f64(x)
        want = (xs - xs.mean(axis=(0, 2), keepdims=True)) / np.sqrt(xs.var(axis=(0, 2), keepdims=True) + 1e-5)
        np.testing.assert_allclose(f64(y), want, rtol=2e-2, atol=2e-2)
        return
    for call in (lambda: F.batch_norm(x, rm, rv, w, b, training=True), lambda: F.group_norm(x, 3, w, b)):
        with pytest.raises(TypeError, match=rf"must have the input's dtype \({x_dtype}\), or float32 with a 16-bit"):
            call()
    assert (f64(rm) == 0).all() and (f64(rv) == 1).all()


def test_float64_parameters_of_two_dtypes_are_refused(device):
    """A float64 weight with a float32 bias (NumPy reads a missing dtype as float64: the check must not)."""
    x = mf.randn(4, 3, device=device, dtype=mf.float64)
    w, b = mf.ones(3, device=device, dtype=mf.float64), mf.zeros(3, device=device, dtype=mf.float32)
    with pytest.raises(TypeError, match=r"must share one dtype, got \['float32', 'float64'\]"):
        F.batch_norm(x, None, None, w, b, training=True)


def test_float32_statistics_on_cpu_are_the_float64_sums_rounded_once(rng):
    """A float32 input's batch mean is the float64 mean rounded once (PyTorch's CPU kernel sums in double): a
    float32 sum over (N, S) strayed up to 3 ulps, which a large mean over a unit spread carried into every output
    (1.7e-5 off here, PyTorch 6.5e-6)."""
    x = (rng.standard_normal((64, 8, 32, 32)) + 100).astype(np.float32)
    mod = nn.BatchNorm2d(8, momentum=1.0)  # (momentum 1: running_mean is the batch mean, unbiased var the batch's)
    y = mod(mf.tensor(x)).numpy()
    xs = x.astype(np.float64)
    mean, var = xs.mean(axis=(0, 2, 3)), xs.var(axis=(0, 2, 3))
    assert (np.abs(mod.running_mean.numpy() - mean) <= np.spacing(np.float32(100)) / 2).all()
    np.testing.assert_allclose(mod.running_var.numpy(), var * (x.size / 8) / (x.size / 8 - 1), rtol=1e-6)
    want = (xs - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5)
    assert np.abs(y - want).max() < 8e-6


def test_float32_channels_last_on_cpu_normalizes_to_float32_accuracy(rng):
    """Channels-last, the NumPy path reduces the (N*H*W, C, 1) view, adding the rows one by one: in float32 that
    drifted 1e-4 from the float64 result here (PyTorch: 3.5e-5); summed in float64 it is a rounding or two."""
    x = (rng.standard_normal((128, 8, 32, 32)) + 3).astype(np.float32)
    y = nn.BatchNorm2d(8)(mf.tensor(x).to(memory_format=mf.channels_last))
    assert is_channels_last(y._data)
    xs = x.astype(np.float64)
    want = (xs - xs.mean(axis=(0, 2, 3), keepdims=True)) / np.sqrt(xs.var(axis=(0, 2, 3), keepdims=True) + 1e-5)
    assert np.abs(y.numpy() - want).max() < 5e-6


def test_float32_channels_last_gradients_on_cpu_are_float64_sums(rng):
    """The backward's per-channel sums (bias's gradient, and the weight's) over the channels-last view, in float64 as
    the forward's: in float32, adding the rows one by one, the bias gradient was 1.2e-5 off (relative) here."""
    x = (rng.standard_normal((128, 8, 32, 32)) + 3).astype(np.float32)
    g = (rng.standard_normal(x.shape) + 0.5).astype(np.float32)
    mod = nn.BatchNorm2d(8)
    xt = mf.tensor(x).to(memory_format=mf.channels_last).requires_grad_()
    mod(xt).backward(mf.tensor(g).to(memory_format=mf.channels_last))
    xs, gs = x.astype(np.float64), g.astype(np.float64)
    xhat = (xs - xs.mean(axis=(0, 2, 3), keepdims=True)) / np.sqrt(xs.var(axis=(0, 2, 3), keepdims=True) + 1e-5)
    db, dw = gs.sum(axis=(0, 2, 3)), (gs * xhat).sum(axis=(0, 2, 3))
    assert np.abs(mod.bias.grad.numpy() - db).max() < 1e-6 * np.abs(db).max()
    assert np.abs(mod.weight.grad.numpy() - dw).max() < 2e-5 * np.abs(dw).max()  # (xhat itself is float32)


def test_convert_sync_batchnorm_refuses_an_uninitialized_lazy_batchnorm():
    """An uninitialized LazyBatchNorm has no size to give the SyncBatchNorm: a clear error naming it, not
    "num_features must be a positive int, got 0"; once initialized it converts with its values."""
    model = nn.Sequential(nn.Conv2d(3, 4, 1), nn.LazyBatchNorm2d())
    with pytest.raises(ValueError, match=r"^convert_sync_batchnorm: expected initialized BatchNorm layers, got an "
                                         r"uninitialized LazyBatchNorm2d \(run a forward"):
        nn.SyncBatchNorm.convert_sync_batchnorm(model)
    assert isinstance(model[1], nn.LazyBatchNorm2d)
    x = mf.tensor(np.arange(48.0, dtype=np.float32).reshape(2, 3, 2, 4))
    model(x)
    model.eval()
    want = model(x).numpy()
    nn.SyncBatchNorm.convert_sync_batchnorm(model)
    assert isinstance(model[1], nn.SyncBatchNorm) and model[1].num_features == 4
    np.testing.assert_allclose(model(x).numpy(), want, rtol=1e-6)


def test_sync_batchnorm_alone_takes_any_input_of_at_least_2_dimensions(rng):
    """As PyTorch's SyncBatchNorm (and its docstring): (N, C, ...) of any number of dimensions from 2 on (a 6-D input
    was refused), normalized per channel over everything else; 1-D refused by name."""
    x = rng.standard_normal((3, 2, 2, 3, 2, 2))
    y = nn.SyncBatchNorm(2, dtype=mf.float64)(mf.tensor(x))
    axes = (0, 2, 3, 4, 5)
    want = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match=r"^SyncBatchNorm: expected at least 2-D input, got 1-D input of shape \[2\]"):
        nn.SyncBatchNorm(2)(mf.randn(2))


@pytest.mark.parametrize("shape", [(2, 0, 4, 4), (0, 5, 4, 4), (0, 5), (2, 0)])
@pytest.mark.parametrize("training", [True, False])
def test_empty_input_of_another_channel_count_passes_as_pytorch(device, shape, training):
    """PyTorch's BatchNorm of an empty input reads none of its vectors, so checks no channel count: BatchNorm2d(3)
    of the (N, 0, H, W) output of a Conv2d(0, 3) (or of an empty batch of 5 channels) gives the input's empty copy,
    zero gradients for weight and bias, the running statistics untouched, the batch counted in training."""
    bn = (nn.BatchNorm2d if len(shape) == 4 else nn.BatchNorm1d)(3, device=device).train(training)
    x = mf.zeros(*shape, device=device, requires_grad=True)
    y = bn(x)
    assert tuple(y.shape) == shape and y.dtype == mf.float32
    y.sum().backward()
    assert tuple(x.grad.shape) == shape
    for p in (bn.weight, bn.bias):
        np.testing.assert_array_equal(host(p.grad), np.zeros(3, np.float32))
    assert f64(bn.running_mean).tolist() == [0, 0, 0] and f64(bn.running_var).tolist() == [1, 1, 1]
    assert int(bn.num_batches_tracked.item()) == int(training)
    y = F.batch_norm(mf.zeros(*shape, device=device), mf.zeros(3, device=device), mf.ones(3, device=device),
                     training=training)
    assert tuple(y.shape) == shape
    with pytest.raises(RuntimeError, match=r"expected 3 channels"):  # (a non-empty input is still checked)
        bn(mf.zeros(1, 5, *shape[2:3] * 2, device=device) if len(shape) == 4 else mf.zeros(2, 5, device=device))


def test_conv_of_no_input_channels_into_batch_norm_as_pytorch():
    """Sequential's Conv2d(0, 3) + BatchNorm2d(3) (fused into one op otherwise) gives PyTorch's empty (2, 0, 4, 4)
    output, and zero gradients to the convolution's bias and the norm's weight and bias."""
    model = nn.Sequential(nn.Conv2d(0, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU())
    y = model(mf.zeros(2, 0, 4, 4))
    assert tuple(y.shape) == (2, 0, 4, 4)
    y.sum().backward()
    for p in (model[0].bias, model[1].weight, model[1].bias):
        np.testing.assert_array_equal(p.grad.numpy(), np.zeros(3, np.float32))
    assert int(model[1].num_batches_tracked.item()) == 1
