"""Calls on cuda where CuPy has no kernel of its own: bfloat16 batched GEMMs, sorting, where and scans, and a
where whose condition is a Python bool (integer powers of a number). Each keeps its dtype and gives the cpu's
values (the cpu results are checked against float64 in the op tests)."""
import numpy as np
import pytest

import minifused as mf
import minifused.functional as F

pytestmark = pytest.mark.gpu


def run_both(fn):
    """``fn(device)`` on cuda and on the cpu; every result (and every gradient it returns) must be the cpu's in
    dtype, shape and value."""
    got, ref = fn("cuda"), fn("cpu")
    got, ref = (r if isinstance(r, (tuple, list)) else (r,) for r in (got, ref))
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert g.dtype == r.dtype, (g.dtype, r.dtype)
        assert tuple(g.shape) == tuple(r.shape)
        np.testing.assert_allclose(g.detach().cpu().float().numpy(), r.detach().float().numpy(), rtol=1e-2,
                                   atol=1e-2)


def data(*shape, seed=0, grad=False):
    values = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return lambda device: mf.tensor(values, device=device).to(mf.bfloat16).requires_grad_(grad)


def test_batched_matmul():
    a, b, c = data(3, 7, 13, grad=True), data(3, 13, 5, seed=1, grad=True), data(13, 5, seed=2)

    def run(device):
        x, y, w = a(device), b(device), c(device)
        out = mf.bmm(x, y) + mf.matmul(x, w) + mf.baddbmm(mf.bmm(x, y), x, y)
        out.float().sum().backward()
        return out, x.grad, y.grad

    run_both(run)


def test_attention_in_bfloat16():
    q, k, v = data(2, 3, 5, 8, grad=True), data(2, 3, 6, 8, seed=1), data(2, 3, 6, 8, seed=2)
    mask = np.random.default_rng(3).random((5, 6)) > 0.3
    mask[:, 0] = True

    def run(device):
        x = q(device)
        out = F.scaled_dot_product_attention(x, k(device), v(device), attn_mask=mf.tensor(mask, device=device))
        out.float().sum().backward()
        return out, x.grad

    run_both(run)


def test_sorting_and_selection():
    a = data(4, 9)

    def run(device):
        x = a(device)
        s = mf.sort(x, dim=1, descending=True)
        t = mf.topk(x, 3, dim=1)
        k = mf.kthvalue(x, 2, dim=1)
        m = mf.median(x, dim=1)
        return (s.values, s.indices, x.argsort(0), t.values, t.indices, k.values, m.values, m.indices,
                mf.median(x), mf.unique(x.round()), x.msort())

    run_both(run)


def test_selection_keeps_bfloat16():
    a, b = data(4, 6, grad=True), data(6, seed=1)
    mask = np.random.default_rng(2).random((4, 6)) > 0.5

    def run(device):
        x, m = a(device), mf.tensor(mask, device=device)
        outs = (mf.where(m, x, b(device)), mf.where(m, x, 0.0), x.masked_fill(m, -3.0), x.tril(), x.triu(1),
                x.index_fill(1, mf.tensor([0, 2], device=device), -1.5), F.prelu(x, mf.tensor([0.25],
                device=device).to(mf.bfloat16)), mf.nansum(x, 1))
        sum(o.float().sum() for o in outs).backward()
        return outs + (x.grad,)

    run_both(run)


def test_scan_gradients():
    a = data(3, 5, grad=True)

    def run(device):
        x = a(device)
        p, c = x.prod(1), mf.cummax(x, 1).values
        (p.float().sum() + c.float().sum()).backward()
        return p, c, x.grad

    run_both(run)


def test_integer_powers_of_a_number():
    def run(device):
        x = mf.tensor([[-6, 0, 3], [2, 5, -1]], device=device)
        return x ** 2, mf.pow(x, 3), 2 ** x.abs() % 1000

    run_both(run)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_grid_sample_in_16_bits_rounds_once(dtype):
    """Sample points and weights in float32: the 16-bit result is the float32 one rounded."""
    rng = np.random.default_rng(0)
    image = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    grid = rng.uniform(-1.1, 1.1, (2, 4, 3, 2)).astype(np.float32)
    low = getattr(mf, dtype)
    x, g = (mf.tensor(a, device="cuda").to(low) for a in (image, grid))
    got = F.grid_sample(x, g, align_corners=False)
    ref = F.grid_sample(x.float(), g.float(), align_corners=False).to(low)
    assert got.dtype == low
    np.testing.assert_array_equal(got.float().cpu().numpy(), ref.float().cpu().numpy())


def test_gradients_keep_their_inputs_dtype_through_a_softmax():
    """A backward that widens a bfloat16 gradient (an array op with a Python number) hands it on in bfloat16: the
    fused softmax backward downstream reads it as such (it used to read float32 bytes: values of 1e34)."""
    a, b = data(4, 9, grad=True), data(4, 9, seed=1, grad=True)

    def run(device):
        x, y = a(device), b(device)
        out = F.softmax(mf.lerp(x, y, 0.25) * 3, -1).log().mean(0)
        out.float().sum().backward()
        return out, x.grad, y.grad

    run_both(run)


@pytest.mark.parametrize("dtype", [mf.bfloat16, mf.float16])
@pytest.mark.parametrize("nonlinearity", ["relu", "tanh"])
def test_rnn_pre_activation_rounds_once(dtype, nonlinearity):
    """A 16-bit RNN on cuda computes in float32 as PyTorch's cuDNN RNN: with W_ih x = 1 and W_hh h =
    (1 - 2^-7)(1 + 2^-7) = 1 - 2^-14 (all inputs exact in 16 bits), the pre-activation is 2^-14; rounding the
    recurrent product to 16 bits first would give 1 - 1 = 0, a dead ReLU and a zero gradient."""
    m = mf.nn.RNN(1, 1, nonlinearity=nonlinearity, bias=False).to("cuda", dtype)
    with mf.no_grad():
        m.weight_ih_l0.fill_(1.0)
        m.weight_hh_l0.fill_(-(1 - 2 ** -7))
    x = mf.tensor([[[1.0]]], device="cuda", dtype=dtype, requires_grad=True)
    y, h = m(x, mf.tensor([[[1 + 2 ** -7]]], device="cuda", dtype=dtype))
    y.sum().backward()
    assert y.dtype == h.dtype == x.grad.dtype == m.weight_hh_l0.grad.dtype == dtype
    pre = 2.0 ** -14
    want = pre if nonlinearity == "relu" else np.tanh(pre)
    np.testing.assert_allclose(float(y.float().item()), want, rtol=1e-2)
    np.testing.assert_allclose(float(h.float().item()), want, rtol=1e-2)
    np.testing.assert_allclose(float(x.grad.float().item()), 1.0, rtol=1e-2)


@pytest.mark.parametrize("cls", [mf.nn.RNN, mf.nn.LSTM, mf.nn.GRU])
def test_rnn_under_autocast_runs_in_float16(cls):
    """PyTorch's cuDNN RNN under autocast casts input, states and weights to float16, whatever the region's dtype:
    a float32 model with a float32 input gives float16 outputs within float16 rounding of the float32 run, and its
    float32 weights get float32 gradients."""
    mf.manual_seed(0)
    m = cls(5, 6, num_layers=2).to("cuda")
    x = mf.tensor(np.random.default_rng(0).standard_normal((7, 3, 5)).astype(np.float32), device="cuda")
    ref = m(x)[0]
    with mf.autocast("cuda", dtype=mf.bfloat16):
        y, h = m(x)
    h = h[0] if isinstance(h, tuple) else h
    assert y.dtype == h.dtype == mf.float16
    np.testing.assert_allclose(y.float().cpu().numpy(), ref.detach().cpu().numpy(), rtol=1e-2, atol=2e-3)
    y.float().sum().backward()
    assert m.weight_hh_l0.grad.dtype == mf.float32
