"""The parity fixes whose arrays differ on the GPU, run on cuda against the same calls on the cpu (the cpu results
are checked against worked-out values in the parity test files): 16-bit arithmetic with numbers in float32,
integer true division and negative integer powers, hypot, the divisor's gradient in float16, 16-bit attention
scores, cross entropy over zero target weights, out=, and a DataLoader over a random_split of cuda tensors."""
import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
from minifused.data import DataLoader, TensorDataset, random_split

pytestmark = pytest.mark.gpu


def both(fn):
    """``fn(device)`` on cuda and on the cpu, as NumPy arrays."""
    got, ref = fn("cuda"), fn("cpu")
    as_np = lambda r: [t.detach().cpu().float().numpy() if t.dtype == mf.bfloat16 else t.detach().cpu().numpy()
                       for t in (r if isinstance(r, (tuple, list)) else (r,))]
    return as_np(got), as_np(ref)


def assert_same(fn, **tol):
    got, ref = both(fn)
    for g, r in zip(got, ref):
        assert g.dtype == r.dtype and g.shape == r.shape
        np.testing.assert_allclose(g.astype(np.float64), r.astype(np.float64), **(tol or {"rtol": 0}))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_arithmetic_with_numbers(dtype):
    values = np.random.default_rng(0).uniform(-3000, 3000, 4096).astype(np.float32)

    def run(device):
        x = mf.tensor(values, device=device).to(getattr(mf, dtype))
        y = x.clone()
        y.mul_(1e-8)
        return x * 0.1, x / 70000.0, 1e5 / (x.abs() + 60000), y, x * 70000.0

    assert_same(run)


def test_integer_division_and_powers():
    def run(device):
        i32, u8 = mf.tensor([3, -7], device=device, dtype=mf.int32), mf.tensor([3, 200], device=device,
                                                                                   dtype=mf.uint8)
        base = mf.tensor([0, 2, 1, -1, -1, 3], device=device)
        return i32 / 2**40, u8 / -1, base ** mf.tensor([-1, -1, -3, -3, -2, 2], device=device)

    assert_same(run)


def test_hypot_and_the_divisor_gradient_in_float16():
    def run(device):
        h = mf.hypot(mf.tensor([300.0, 3e4], device=device, dtype=mf.float16),
                     mf.tensor([400.0, 4e4], device=device, dtype=mf.float16))
        x = mf.tensor([-12.0, -11.0, -10.0], device=device, dtype=mf.float16, requires_grad=True)
        e = x.exp()
        (e / e.sum())[0].backward()
        return h, x.grad

    assert_same(run, rtol=2e-3, atol=1e-4)


def test_half_attention_scores_past_float16_range():
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, 4, 8)).astype(np.float32) * s for s in (60.0, 60.0, 1.0))

    def run(device):
        qt, kt, vt = (mf.tensor(a, device=device, dtype=mf.float16, requires_grad=True) for a in (q, k, v))
        out = F.scaled_dot_product_attention(qt, kt, vt)
        out.float().sum().backward()
        return out, qt.grad, vt.grad

    got, ref = both(run)
    for g, r in zip(got, ref):
        assert np.isfinite(g).all()
        np.testing.assert_allclose(g.astype(np.float64), r.astype(np.float64), rtol=2e-2, atol=2e-2)


def test_cross_entropy_over_zero_target_weights_is_nan():
    def run(device):
        logits = mf.tensor([[1.0, 2.0, 3.0], [0.5, 0.0, 1.0]], device=device, requires_grad=True)
        loss = F.cross_entropy(logits, mf.tensor([0, 0], device=device),
                               weight=mf.tensor([0.0, 1.0, 1.0], device=device), label_smoothing=0.1)
        loss.backward()
        return loss, logits.grad

    got, ref = both(run)
    assert np.isnan(got[0]) and np.isnan(ref[0])
    np.testing.assert_array_equal(np.isnan(got[1]), np.isnan(ref[1]))


def test_out_on_cuda():
    def run(device):
        out = mf.empty(0, device=device)
        a = mf.arange(6.0, device=device).reshape(2, 3)
        mf.matmul(a, a.t(), out=out)
        return out

    assert_same(run)


def test_loader_over_a_random_split_of_cuda_tensors_sees_later_edits():
    x = mf.arange(20.0, device="cuda").reshape(10, 2)
    y = mf.arange(10, device="cuda")
    train, _ = random_split(TensorDataset(x, y), [6, 4], generator=mf.Generator().manual_seed(0))
    rows = list(train.indices)
    loader = DataLoader(train, batch_size=4)
    first = [(bx.cpu().numpy(), by.cpu().numpy()) for bx, by in loader]
    np.testing.assert_array_equal(np.concatenate([b[1] for b in first]), rows)
    np.testing.assert_array_equal(np.concatenate([b[0] for b in first]), x.cpu().numpy()[rows])
    x.sub_(100)  # (an in-place edit of the base after the loader was made)
    later = np.concatenate([bx.cpu().numpy() for bx, _ in loader])
    np.testing.assert_array_equal(later, x.cpu().numpy()[rows])
    assert all(bx.device.type == "cuda" for bx, _ in loader)
