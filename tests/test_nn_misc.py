"""nn.DataParallel / nn.parallel, F.fractional_max_pool2d / nn.FractionalMaxPool2d, nn.NLLLoss2d,
nn.CrossMapLRN2d, nn.Container and nn.AdaptiveLogSoftmaxWithLoss. Values are checked against float64 NumPy
references and against PyTorch outputs computed once with PyTorch 2.14 on the CPU for fixed inputs and
hard-coded here (each such constant says so)."""
import math
import warnings

import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
import minifused.nn as nn
from minifused.testing import gradcheck


def t64(a, requires_grad=False):
    return mf.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


# ---------------------------------------------------------------- DataParallel
class _TwoArgs(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.bn = nn.BatchNorm1d(2)

    def forward(self, x, scale=1.0, *, shift=None):
        y = self.bn(self.lin(x)) * scale
        return y if shift is None else y + shift


def test_data_parallel_wraps_and_forwards():
    mf.manual_seed(0)
    inner = _TwoArgs()
    dp = nn.DataParallel(inner)
    assert dp.module is inner and nn.parallel.DataParallel is nn.DataParallel
    if not mf.cuda.is_available():
        assert dp.device_ids == []  # PyTorch's plain wrapper on a machine without a GPU
    x = mf.randn(4, 3)
    shift = mf.ones(2)
    got = dp(x, 2.0, shift=shift)
    inner.eval(), dp.eval()
    assert not inner.training and not inner.bn.training
    dp.train()
    assert inner.training and inner.bn.training
    want = inner(x, 2.0, shift=shift)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)
    assert [id(p) for p in dp.parameters()] == [id(p) for p in inner.parameters()]
    assert [n for n, _ in dp.named_parameters()] == ["module.lin.weight", "module.lin.bias", "module.bn.weight",
                                                     "module.bn.bias"]


def test_data_parallel_state_dict_prefix_and_load():
    mf.manual_seed(0)
    dp = nn.DataParallel(_TwoArgs())
    # PyTorch's keys for DataParallel(module) (torch.nn.DataParallel(...).state_dict() lists the same)
    assert list(dp.state_dict()) == ["module.lin.weight", "module.lin.bias", "module.bn.weight", "module.bn.bias",
                                     "module.bn.running_mean", "module.bn.running_var",
                                     "module.bn.num_batches_tracked"]
    src = nn.DataParallel(_TwoArgs())
    with mf.no_grad():
        src.module.lin.weight.fill_(0.5)
        src.module.bn.running_mean.fill_(3.0)
    dp.load_state_dict(src.state_dict())
    np.testing.assert_array_equal(dp.module.lin.weight.numpy(), np.full((2, 3), 0.5, np.float32))
    np.testing.assert_array_equal(dp.module.bn.running_mean.numpy(), [3.0, 3.0])
    with pytest.raises(Exception):  # an unprefixed dict is the inner module's, as in PyTorch
        dp.load_state_dict(src.module.state_dict())
    plain = _TwoArgs()
    plain.load_state_dict({k[len("module."):]: v for k, v in src.state_dict().items()})
    np.testing.assert_array_equal(plain.lin.weight.numpy(), src.module.lin.weight.numpy())


def test_data_parallel_to_and_repr():
    dp = nn.DataParallel(nn.Linear(3, 2)).to(mf.float64)
    assert dp.module.weight.dtype == mf.float64
    assert repr(dp).startswith("DataParallel(\n  (module): Linear(")
    with pytest.raises(TypeError, match="DataParallel: expected a Module"):
        nn.DataParallel(lambda x: x)


def test_data_parallel_function_and_ddp_name():
    import minifused.distributed as dist

    lin = nn.Linear(3, 2)
    x = mf.randn(5, 3)
    np.testing.assert_array_equal(nn.parallel.data_parallel(lin, x).numpy(), lin(x).numpy())
    assert nn.parallel.DistributedDataParallel is dist.DistributedDataParallel
    with pytest.raises(AttributeError):
        nn.parallel.NoSuchThing  # noqa: B018


# ---------------------------------------------------------------- fractional_max_pool2d
# x: ((arange(126) * 37) % 23 - 11) / 4 as (1, 2, 7, 9) float32; samples (u_W, u_H) per plane
_FX = (((np.arange(2 * 7 * 9) * 37) % 23 - 11) / 4.0).astype(np.float32).reshape(1, 2, 7, 9)
_FS = np.array([[[0.25, 0.75], [0.9, 0.1]]], np.float32)
# torch.nn.functional.fractional_max_pool2d(x, (2, 3), output_size=(4, 5), return_indices=True,
# _random_samples=s) with PyTorch 2.14 on the CPU
_TORCH_OUT = [[[[1.25, 2.0, 2.5, 2.5, 2.25], [2.75, 1.75, 2.5, 2.5, 2.0], [2.5, 1.5, 2.75, 2.75, 1.75],
                [2.25, 1.25, 2.5, 2.5, 1.5]],
               [[2.75, 2.75, 2.25, 2.25, 1.25], [2.5, 2.5, 2.25, 2.75, 2.75], [2.25, 2.25, 2.0, 2.5, 2.5],
                [2.75, 2.75, 1.75, 2.25, 2.25]]]]
_TORCH_IDX = [[[[11, 3, 13, 13, 8], [18, 21, 13, 13, 26], [36, 39, 41, 41, 44], [54, 57, 59, 59, 62]],
               [[1, 1, 14, 14, 17], [19, 19, 14, 24, 24], [37, 37, 32, 42, 42], [47, 47, 50, 60, 60]]]]


def _fmp_reference(x, k, out, samples):
    """ATen's CPU loop in float64: the interval sequence per (batch, plane, dim), then the first maximum of
    each window in row-major order (the last NaN where there is one)."""
    def starts(u, n_in, n_out, kk):
        seq = [n_in - kk] * n_out
        if n_out > 1:
            alpha = (n_in - kk) / (n_out - 1)
            for i in range(n_out - 1):
                seq[i] = int((i + u) * alpha) - int(u * alpha)
        return seq
    n, c, h, w = x.shape
    vals, idx = np.zeros((n, c) + out), np.zeros((n, c) + out, np.int64)
    for b in range(n):
        for p in range(c):
            sw = starts(samples[b, p, 0], w, out[1], k[1])
            sh = starts(samples[b, p, 1], h, out[0], k[0])
            for i, hs in enumerate(sh):
                for j, ws in enumerate(sw):
                    best, arg = -math.inf, hs * w + ws
                    for r in range(hs, hs + k[0]):
                        for q in range(ws, ws + k[1]):
                            v = x[b, p, r, q]
                            if v > best or math.isnan(v):
                                best, arg = v, r * w + q
                    vals[b, p, i, j], idx[b, p, i, j] = best, arg
    return vals, idx


def test_fractional_max_pool2d_matches_pytorch():
    out, idx = F.fractional_max_pool2d(mf.tensor(_FX), (2, 3), output_size=(4, 5), return_indices=True,
                                       _random_samples=mf.tensor(_FS))
    assert out.dtype == mf.float32 and idx.dtype == mf.int64
    np.testing.assert_array_equal(out.numpy(), np.array(_TORCH_OUT, np.float32))
    np.testing.assert_array_equal(idx.numpy(), _TORCH_IDX)


def test_fractional_max_pool2d_unbatched_ratio_matches_pytorch():
    x = np.sin(np.arange(3 * 8 * 10) * 1.7).reshape(3, 8, 10)
    s = np.array([[[0.1, 0.5], [0.333, 0.999], [0.0, 0.6]]])
    out, idx = F.fractional_max_pool2d(t64(x), 3, output_ratio=0.5, return_indices=True, _random_samples=t64(s))
    # torch.nn.functional.fractional_max_pool2d(x, 3, output_ratio=(0.5, 0.5), return_indices=True,
    # _random_samples=s) in float64, PyTorch 2.14 CPU
    want_idx = [[[12, 12, 23, 27, 27], [42, 23, 23, 27, 49], [60, 53, 64, 45, 49], [60, 71, 75, 75, 67]],
                [[2, 2, 6, 17, 17], [32, 43, 24, 47, 28], [32, 54, 54, 47, 39], [50, 54, 54, 65, 69]],
                [[22, 22, 15, 7, 7], [22, 22, 33, 37, 37], [52, 33, 33, 37, 59], [70, 63, 74, 55, 59]]]
    assert tuple(out.shape) == (3, 4, 5)
    np.testing.assert_array_equal(idx.numpy(), want_idx)
    np.testing.assert_array_equal(out.numpy(), np.take_along_axis(x.reshape(3, -1), idx.numpy().reshape(3, -1),
                                                                  1).reshape(3, 4, 5))


@pytest.mark.parametrize("shape,k,out", [((2, 3, 11, 9), (3, 2), (5, 6)), ((1, 2, 5, 5), (2, 2), (4, 4)),
                                         ((2, 1, 6, 13), (1, 4), (1, 7)), ((1, 1, 4, 4), (4, 4), (1, 1))])
def test_fractional_max_pool2d_matches_reference(shape, k, out):
    rng = np.random.default_rng(1)
    x = np.round(rng.standard_normal(shape) * 2) / 2  # ties: the first maximum wins
    x.ravel()[rng.integers(0, x.size, 2)] = np.nan
    s = rng.random(shape[:2] + (2,))
    s[0, 0] = (0.0, 0.9999999)
    got, idx = F.fractional_max_pool2d(t64(x), k, out, return_indices=True, _random_samples=t64(s))
    want, want_idx = _fmp_reference(x, k, out, s)
    np.testing.assert_array_equal(idx.numpy(), want_idx)
    np.testing.assert_array_equal(got.numpy(), want)


def test_fractional_max_pool2d_nan_takes_the_last():
    x = np.array([[[[math.nan, 1., 5.], [math.nan, 0., 5.], [2., 2., 2.]]]], np.float32)
    out, idx = F.fractional_max_pool2d(mf.tensor(x), 2, output_size=2, return_indices=True,
                                       _random_samples=mf.tensor(np.full((1, 1, 2), 0.5, np.float32)))
    # PyTorch 2.14 CPU: indices [[3, 2], [3, 5]], values [[nan, 5], [nan, 5]]
    np.testing.assert_array_equal(idx.numpy(), [[[[3, 2], [3, 5]]]])
    np.testing.assert_array_equal(out.numpy(), [[[[np.nan, 5], [np.nan, 5]]]])


def test_fractional_max_pool2d_gradient():
    rng = np.random.default_rng(2)
    x = rng.permutation(2 * 2 * 7 * 6).reshape(2, 2, 7, 6) / 10.0  # distinct values: max is differentiable
    s = t64(rng.random((2, 2, 2)))
    xt = t64(x, requires_grad=True)
    assert gradcheck(lambda a: F.fractional_max_pool2d(a, (2, 3), (4, 3), _random_samples=s), (xt,))
    # the gradient adds each output's gradient at its index (PyTorch's backward), overlaps summed
    xt = t64(x, requires_grad=True)
    out, idx = F.fractional_max_pool2d(xt, (2, 3), (4, 3), return_indices=True, _random_samples=s)
    g = rng.standard_normal(out.shape)
    out.backward(t64(g))
    want = np.zeros((2, 2, 42))
    for b in range(2):
        for p in range(2):
            np.add.at(want[b, p], idx.numpy()[b, p].ravel(), g[b, p].ravel())
    np.testing.assert_allclose(xt.grad.numpy(), want.reshape(x.shape), rtol=0, atol=1e-15)


def test_fractional_max_pool2d_draws_from_the_generator():
    x = mf.randn(2, 3, 9, 9)
    mf.manual_seed(5)
    a, ia = F.fractional_max_pool2d(x, 2, output_size=(4, 5), return_indices=True)
    mf.manual_seed(5)
    s = mf.rand(2, 3, 2)  # PyTorch's draw: rand(N, C, 2) of the input's dtype and device
    b, ib = F.fractional_max_pool2d(x, 2, output_size=(4, 5), return_indices=True, _random_samples=s)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(ia.numpy(), ib.numpy())
    assert tuple(a.shape) == (2, 3, 4, 5)


def test_fractional_max_pool2d_errors():
    x = mf.randn(2, 3, 7, 8)
    with pytest.raises(ValueError, match="either an output_size or an output_ratio"):
        F.fractional_max_pool2d(x, 3)
    with pytest.raises(RuntimeError, match="pool height 3 too large relative to input height 7"):
        F.fractional_max_pool2d(x, 3, output_size=(6, 5))
    with pytest.raises(RuntimeError, match="pool width 3 too large relative to input width 8"):
        F.fractional_max_pool2d(x, 3, output_size=(5, 7))
    with pytest.raises(RuntimeError, match="kernel size should be greater than zero"):
        F.fractional_max_pool2d(x, 0, output_size=2)
    with pytest.raises(RuntimeError, match="Expected 3D or 4D tensor"):
        F.fractional_max_pool2d(x[0, 0], 2, output_size=2)
    with pytest.raises(RuntimeError, match="non-zero size for non-batch dimensions"):
        F.fractional_max_pool2d(x[:, :0], 2, output_size=2)
    with pytest.raises(RuntimeError, match=r"size\(2\) equals to 2"):
        F.fractional_max_pool2d(x, 2, output_size=2, _random_samples=mf.rand(2, 3, 3))
    with pytest.raises(RuntimeError, match="no less then input batch size"):
        F.fractional_max_pool2d(x, 2, output_size=2, _random_samples=mf.rand(1, 3, 2))
    with pytest.raises(RuntimeError, match="same dtype as input"):
        F.fractional_max_pool2d(x, 2, output_size=2, _random_samples=mf.rand(2, 3, 2, dtype=mf.float64))
    with pytest.raises(RuntimeError, match="3 dimensions"):
        F.fractional_max_pool2d(x, 2, output_size=2, _random_samples=mf.rand(6, 2))
    with pytest.raises(TypeError, match="floating-point"):
        F.fractional_max_pool2d(mf.ones((1, 1, 4, 4), dtype=mf.int64), 2, output_size=2)
    empty = F.fractional_max_pool2d(x[:0], 2, output_size=3)
    assert tuple(empty.shape) == (0, 3, 3, 3)


def test_fractional_max_pool2d_module():
    s = mf.tensor(_FS)
    m = nn.FractionalMaxPool2d((2, 3), output_size=(4, 5), return_indices=True, _random_samples=s)
    assert repr(m) == "FractionalMaxPool2d()"  # as PyTorch's (no extra_repr)
    assert list(m.state_dict()) == ["_random_samples"] and m.kernel_size == (2, 3) and m.output_size == (4, 5)
    out, idx = m(mf.tensor(_FX))
    np.testing.assert_array_equal(idx.numpy(), _TORCH_IDX)
    r = nn.FractionalMaxPool2d(3, output_ratio=0.5)
    assert r.output_ratio == (0.5, 0.5) and list(r.state_dict()) == []
    assert tuple(r(mf.randn(2, 3, 10, 12)).shape) == (2, 3, 5, 6)
    with pytest.raises(ValueError, match="either an output size, or a pooling ratio"):
        nn.FractionalMaxPool2d(3)
    with pytest.raises(ValueError, match="only one of output_size and output_ratio"):
        nn.FractionalMaxPool2d(3, output_size=3, output_ratio=0.5)
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.FractionalMaxPool2d(3, output_ratio=1.0)


# ---------------------------------------------------------------- NLLLoss2d, Container
def test_nll_loss2d_is_nll_loss_with_a_warning():
    with pytest.warns(FutureWarning, match="NLLLoss2d` has been deprecated"):
        loss = nn.NLLLoss2d(ignore_index=1, reduction="sum")
    assert isinstance(loss, nn.NLLLoss)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 3, 3))
    t = rng.integers(0, 4, (2, 3, 3))
    got = loss(t64(x), mf.tensor(t)).item()
    picked = np.take_along_axis(x, t[:, None], 1)[:, 0]
    np.testing.assert_allclose(got, -picked[t != 1].sum(), rtol=1e-12)


def test_container_is_deprecated():
    with pytest.warns(FutureWarning, match="`nn.Container` is deprecated"):
        c = nn.Container(a=nn.Linear(2, 3), b=nn.ReLU())
    assert list(c.state_dict()) == ["a.weight", "a.bias"] and isinstance(c.b, nn.ReLU)
    with pytest.warns(FutureWarning, match="`nn.Container` is deprecated"):
        class Sub(nn.Container):
            pass
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # as PyTorch's: an instance of a subclass does not warn again
        Sub()


# ---------------------------------------------------------------- CrossMapLRN2d
def _lrn_reference(x, size, alpha, beta, k):
    """PyTorch's running sum, in float64: channels c - h .. c + h, h = int((size - 1) / 2), and channel 0 for
    every c > h (its ``c > pre_pad`` test never subtracts it)."""
    sq = x * x
    c = x.shape[1]
    h = int((size - 1) / 2)
    scale = np.zeros_like(x)
    for ch in range(c):
        scale[:, ch] = sq[:, max(ch - h, 0):min(ch + h, c - 1) + 1].sum(1) + (sq[:, 0] if ch > h else 0)
    return x * (k + alpha / size * scale) ** -beta


def test_cross_map_lrn2d_matches_pytorch():
    x = np.cos(np.arange(2 * 6 * 2 * 3) * 0.7).reshape(2, 6, 2, 3)
    # torch.nn.CrossMapLRN2d(size, alpha=0.5, beta=0.75, k=1.0)(x) in float64, PyTorch 2.14 CPU:
    # y[0, :, 0, 0] and y[1, :, 1, 2]
    torch_out = {3: ([0.8685473751497412, -0.414295258655573, -0.39959288594704095, 0.7709778938296596,
                      -0.3544231926086421, -0.46275661057524475],
                     [-0.8257914654000174, 0.0731277982866247, 0.6461279067464928, -0.7016049194323138,
                      0.04142261784355655, 0.7110050127258657]),
                 4: ([0.897534134044235, -0.43063441067026664, -0.4232128225014569, 0.8161640081411876,
                      -0.3753870975804753, -0.4810293804633532],
                     [-0.8452689369368478, 0.07602616994360745, 0.6821407659286391, -0.7406492391837779,
                      0.04375132080731971, 0.7395899700928308])}
    for size, (a, b) in torch_out.items():
        y = nn.CrossMapLRN2d(size, alpha=0.5, beta=0.75, k=1.0)(t64(x)).numpy()
        np.testing.assert_allclose(y[0, :, 0, 0], a, rtol=1e-12)
        np.testing.assert_allclose(y[1, :, 1, 2], b, rtol=1e-12)


@pytest.mark.parametrize("size,c", [(1, 4), (2, 5), (3, 1), (5, 3), (5, 9), (6, 8)])
def test_cross_map_lrn2d_reference_and_gradient(size, c):
    x = np.random.default_rng(size * 10 + c).standard_normal((2, c, 3, 2))
    m = nn.CrossMapLRN2d(size, alpha=0.3, beta=0.75, k=1.5)
    np.testing.assert_allclose(m(t64(x)).numpy(), _lrn_reference(x, size, 0.3, 0.75, 1.5), rtol=1e-12)
    assert gradcheck(m, (t64(x, requires_grad=True),))


def test_cross_map_lrn2d_errors_and_repr():
    assert repr(nn.CrossMapLRN2d(3)) == "CrossMapLRN2d(3, alpha=0.0001, beta=0.75, k=1)"  # PyTorch's
    with pytest.raises(ValueError, match="Expected input to be 4D, got 3D instead"):
        nn.CrossMapLRN2d(3)(mf.randn(2, 3, 4))
    with pytest.raises(ValueError, match="size must be a positive int"):
        nn.CrossMapLRN2d(0)


# ---------------------------------------------------------------- AdaptiveLogSoftmaxWithLoss
def _asm(head_bias=False):
    mf.manual_seed(0)
    return nn.AdaptiveLogSoftmaxWithLoss(16, 20, [3, 8, 12], div_value=2.0, head_bias=head_bias,
                                         dtype=mf.float64)


def _asm_reference(m, x):
    """Every class's log-probability in float64 NumPy from the module's weights."""
    def log_softmax(z):
        z = z - z.max(1, keepdims=True)
        return z - np.log(np.exp(z).sum(1, keepdims=True))
    head = x @ m.head.weight.numpy().T + (m.head.bias.numpy() if m.head.bias is not None else 0)
    hl = log_softmax(head)
    parts = [hl[:, :3]]
    for i, (a, b) in enumerate(m.tail):
        parts.append(log_softmax(x @ a.weight.numpy().T @ b.weight.numpy().T) + hl[:, 3 + i:4 + i])
    return np.concatenate(parts, 1)


def test_adaptive_log_softmax_names_and_shapes():
    m = _asm(head_bias=True)
    # torch.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [3, 8, 12], div_value=2.0, head_bias=True).state_dict()
    assert [(k, tuple(v.shape)) for k, v in m.state_dict().items()] == [
        ("head.weight", (6, 16)), ("head.bias", (6,)), ("tail.0.0.weight", (8, 16)), ("tail.0.1.weight", (5, 8)),
        ("tail.1.0.weight", (4, 16)), ("tail.1.1.weight", (4, 4)), ("tail.2.0.weight", (2, 16)),
        ("tail.2.1.weight", (8, 2))]
    assert m.cutoffs == [3, 8, 12, 20] and m.shortlist_size == 3 and m.n_clusters == 3 and m.head_size == 6
    assert "head.bias" not in _asm().state_dict()


@pytest.mark.parametrize("head_bias", [False, True])
def test_adaptive_log_softmax_values(head_bias):
    m = _asm(head_bias)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((9, 16))
    t = np.array([0, 2, 3, 7, 8, 11, 12, 19, 1])
    ref = _asm_reference(m, x)
    out, loss = m(t64(x), mf.tensor(t))
    np.testing.assert_allclose(out.numpy(), ref[np.arange(9), t], rtol=1e-12)
    np.testing.assert_allclose(loss.item(), -ref[np.arange(9), t].mean(), rtol=1e-12)
    np.testing.assert_allclose(m.log_prob(t64(x)).numpy(), ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.exp(ref).sum(1), 1.0, rtol=1e-12)
    res = m(t64(x[4]), mf.tensor(t[4]))  # unbatched: 0-d output
    assert res.output.ndim == 0 and res._fields == ("output", "loss")
    np.testing.assert_allclose(res.output.item(), ref[4, t[4]], rtol=1e-12)


def test_adaptive_log_softmax_predict():
    m = _asm(head_bias=True)
    x = np.random.default_rng(1).standard_normal((40, 16))
    for scale in (1.0, 4.0, -4.0):  # rows in the shortlist only, mixed, in clusters
        with mf.no_grad():
            m.head.bias.copy_(t64([0, 0, 0, scale, scale, scale]))
        np.testing.assert_array_equal(m.predict(t64(x)).numpy(), _asm_reference(m, x).argmax(1))


def test_adaptive_log_softmax_gradient():
    m = _asm()
    rng = np.random.default_rng(3)
    x = t64(rng.standard_normal((6, 16)), requires_grad=True)
    t = mf.tensor([0, 4, 9, 13, 19, 2])
    assert gradcheck(lambda a: m(a, t).loss, (x,))
    assert gradcheck(lambda a: m.log_prob(a), (x,))
    m(x, t).loss.backward()
    assert all(p.grad is not None for p in m.parameters())


def test_adaptive_log_softmax_errors():
    with pytest.raises(ValueError, match="length larger than 0"):
        nn.AdaptiveLogSoftmaxWithLoss(8, 10, [])
    for bad in ([5, 2], [0, 3], [3, 10], [3, 3]):
        with pytest.raises(ValueError, match="unique, positive integers sorted"):
            nn.AdaptiveLogSoftmaxWithLoss(8, 10, bad)
    m = nn.AdaptiveLogSoftmaxWithLoss(8, 10, [2, 5])
    with pytest.raises(RuntimeError, match=r"Target values should be in \[0, 9\]"):
        m(mf.randn(3, 8), mf.tensor([0, 10, 2]))
    with pytest.raises(RuntimeError, match="same size in the batch dimension"):
        m(mf.randn(3, 8), mf.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="1D target tensor expects 2D input"):
        m(mf.randn(3, 2, 8), mf.tensor([0, 1, 2]))
    with pytest.raises(RuntimeError, match="multi-target not supported"):
        m(mf.randn(3, 8), mf.tensor([[0], [1], [2]]))


# ---------------------------------------------------------------- GPU
@pytest.mark.gpu
def test_data_parallel_cuda():
    lin = nn.Linear(3, 2)
    dp = nn.DataParallel(lin, device_ids=[0])
    assert dp.device_ids == [0] and lin.weight.device == mf.device("cuda:0")  # moved to device_ids[0]
    x = mf.randn(4, 3, device="cpu")  # a cpu input is moved, as PyTorch's scatter does
    y = dp(x)
    assert y.device == mf.device("cuda:0")
    np.testing.assert_allclose(y.cpu().numpy(), x.numpy() @ lin.weight.cpu().numpy().T + lin.bias.cpu().numpy(),
                               rtol=1e-5, atol=1e-5)
    assert list(dp.state_dict()) == ["module.weight", "module.bias"]
    with pytest.raises(AssertionError, match="Invalid device id"):
        nn.DataParallel(nn.Linear(3, 2), device_ids=[mf.cuda.device_count()])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_fractional_max_pool2d_cuda_matches_cpu(dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 11, 10)).astype(dtype)
    s = rng.random((2, 3, 2)).astype(dtype)
    # PyTorch's CUDA kernel computes a half input's window sequence in float32 (its CPU one in float16): the
    # float32 cpu run of the same (exactly widened) values is the reference there
    ref = "float32" if dtype == "float16" else dtype
    cpu_out, cpu_idx = F.fractional_max_pool2d(mf.tensor(x.astype(ref), device="cpu"), (3, 2), (6, 7),
                                               return_indices=True,
                                               _random_samples=mf.tensor(s.astype(ref), device="cpu"))
    xg = mf.tensor(x).to("cuda").requires_grad_(dtype == "float32")
    out, idx = F.fractional_max_pool2d(xg, (3, 2), (6, 7), return_indices=True,
                                       _random_samples=mf.tensor(s).to("cuda"))
    assert cpu_idx.dtype == idx.dtype == mf.int64 and tuple(idx.shape) == (2, 3, 6, 7)
    np.testing.assert_array_equal(idx.cpu().numpy(), cpu_idx.numpy())
    np.testing.assert_array_equal(out.cpu().numpy().astype(ref), cpu_out.numpy())
    if dtype == "float32":
        out.sum().backward()
        want = np.zeros((2, 3, 110), np.float32)
        for b in range(2):
            for p in range(3):
                np.add.at(want[b, p], cpu_idx.numpy()[b, p].ravel(), 1.0)
        np.testing.assert_array_equal(xg.grad.cpu().numpy(), want.reshape(x.shape))
