"""nn.utils.prune: PyTorch's pruning methods, their reparametrization and its removal, against NumPy references
(weights of distinct magnitudes, so the choices have no ties); masks and trained weights matched PyTorch 2.14's on
the same calls."""
import numpy as np
import pytest

import minifused as mf
import minifused.nn.utils.prune as prune
from minifused import nn


def _weights(*shape, seed=0):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    return ((rng.permutation(n) + 1) / 10 * rng.choice([-1, 1], n)).reshape(shape).astype(np.float32)


def _linear(i, o, device, seed=0):
    m = nn.Linear(i, o).to(device)
    with mf.no_grad():
        m.weight.copy_(mf.tensor(_weights(o, i, seed=seed), device=device))
        m.bias.copy_(mf.tensor(_weights(o, seed=seed + 7), device=device))
    return m


def _smallest(a, k, kept=None):
    """The 0/1 mask that zeroes the k entries of least |a| among those ``kept`` (all by default)."""
    kept = np.ones(a.shape, bool) if kept is None else kept.astype(bool)
    mask = kept.astype(np.float32)
    order = [i for i in np.argsort(np.abs(a), axis=None) if kept.reshape(-1)[i]]
    mask.reshape(-1)[order[:k]] = 0
    return mask


def test_l1_then_structured_then_remove(device):
    m = _linear(5, 4, device)
    w = _weights(4, 5)
    prune.l1_unstructured(m, "weight", amount=0.3)  # round(0.3 * 20) = 6 entries
    mask = _smallest(w, 6)
    np.testing.assert_array_equal(m.weight_mask.cpu().numpy(), mask)
    np.testing.assert_array_equal(m.weight.cpu().numpy(), w * mask)
    assert [n for n, _ in m.named_parameters()] == ["bias", "weight_orig"]
    assert list(m.state_dict()) == ["bias", "weight_orig", "weight_mask"] and prune.is_pruned(m)
    prune.l1_unstructured(m, "weight", amount=3)  # 3 more, among the 14 kept
    mask = _smallest(w, 3, mask)
    np.testing.assert_array_equal(m.weight_mask.cpu().numpy(), mask)
    prune.ln_structured(m, "weight", amount=0.5, n=1, dim=0)  # the 2 rows of least L1 norm (of the original w)
    rows = np.argsort(np.abs(w).sum(1))[:2]
    mask[rows] = 0
    np.testing.assert_array_equal(m.weight_mask.cpu().numpy(), mask)
    prune.ln_structured(m, "weight", amount=1, n=float("inf"), dim=1)  # of the columns, among the kept rows
    kept_rows = mask.sum(1) != 0
    col = np.argmin(np.abs(w[kept_rows]).max(0))
    mask[:, col] = 0
    np.testing.assert_array_equal(m.weight_mask.cpu().numpy(), mask)
    assert isinstance(m._call_hooks.pre[next(iter(m._call_hooks.pre))][0], prune.PruningContainer)
    prune.remove(m, "weight")
    assert [n for n, _ in m.named_parameters()] == ["bias", "weight"] and not list(m.named_buffers())
    assert isinstance(m.weight, nn.Parameter) and not prune.is_pruned(m) and m._call_hooks is None
    np.testing.assert_array_equal(m.weight.detach().cpu().numpy(), w * mask)


def test_structured_norms_custom_and_global(device):
    conv = nn.Conv2d(2, 3, 2).to(device)
    w = _weights(3, 2, 2, 2)
    with mf.no_grad():
        conv.weight.copy_(mf.tensor(w, device=device))
    prune.ln_structured(conv, "weight", amount=1, n="fro", dim=0)  # a 3-D channel: the flat 2-norm
    want = np.ones_like(w)
    want[np.argmin(np.sqrt((w ** 2).sum((1, 2, 3))))] = 0
    np.testing.assert_array_equal(conv.weight_mask.cpu().numpy(), want)
    prune.custom_from_mask(conv, "bias", mask=mf.tensor([1.0, 0.0, 1.0], device=device))
    assert conv.bias.cpu().numpy()[1] == 0 and conv.bias_mask.cpu().numpy().tolist() == [1, 0, 1]

    a, b = nn.Conv2d(2, 3, 2).to(device), _linear(12, 2, device, seed=2)
    wa, wb = _weights(3, 2, 2, 2, seed=1), _weights(2, 12, seed=2)
    with mf.no_grad():
        a.weight.copy_(mf.tensor(wa, device=device))
    prune.global_unstructured([(a, "weight"), (b, "weight")], pruning_method=prune.L1Unstructured, amount=10)
    both = _smallest(np.concatenate([wa.reshape(-1), wb.reshape(-1)]), 10)
    np.testing.assert_array_equal(a.weight_mask.cpu().numpy().reshape(-1), both[:24])
    np.testing.assert_array_equal(b.weight_mask.cpu().numpy().reshape(-1), both[24:])
    prune.global_unstructured([(a, "weight"), (b, "weight")], pruning_method=prune.L1Unstructured, amount=0.25)
    both = _smallest(np.concatenate([wa.reshape(-1), wb.reshape(-1)]), 10, both)  # round(0.25 * 38 kept)
    np.testing.assert_array_equal(np.concatenate([a.weight_mask.cpu().numpy().reshape(-1),
                                                  b.weight_mask.cpu().numpy().reshape(-1)]), both)


def test_pruned_model_trains_its_kept_weights_only(device):
    m = nn.Sequential(_linear(4, 6, device), nn.ReLU(), _linear(6, 2, device, seed=3))
    ref = nn.Sequential(_linear(4, 6, device), nn.ReLU(), _linear(6, 2, device, seed=3))
    prune.l1_unstructured(m[0], "weight", amount=0.5)
    mask = m[0].weight_mask.detach()
    opt, ref_opt = mf.optim.SGD(m.parameters(), lr=0.1), mf.optim.SGD(ref.parameters(), lr=0.1)
    x, y = mf.tensor(_weights(5, 4, seed=9), device=device), mf.tensor(_weights(5, 2, seed=11), device=device)
    for _ in range(3):
        opt.zero_grad()
        ((m(x) - y) ** 2).mean().backward()
        opt.step()
        ref_opt.zero_grad()  # the same model with the mask applied by hand
        with mf.no_grad():
            ref[0].weight.mul_(mask)
        ((ref(x) - y) ** 2).mean().backward()
        ref[0].weight.grad.mul_(mask)
        ref_opt.step()
    m(x)  # (module.weight is the product as of the last forward: the pre-hook renews it)
    np.testing.assert_allclose(m[0].weight.detach().cpu().numpy(), (ref[0].weight * mask).detach().cpu().numpy(),
                               rtol=1e-5, atol=1e-6)
    assert float((m[0].weight_orig.grad * (1 - mask)).abs().sum()) == 0  # no gradient where pruned


def test_random_methods_prune_the_asked_counts(device):
    m = _linear(4, 3, device)
    prune.random_unstructured(m, "weight", amount=5)
    assert int((m.weight_mask == 0).sum()) == 5
    m = _linear(4, 3, device)
    prune.random_structured(m, "weight", amount=2, dim=1)
    cols = m.weight_mask.cpu().numpy().sum(0)
    assert sorted(cols.tolist()) == [0, 0, 3, 3]
    m = _linear(3, 3, device)
    prune.identity(m, "weight")
    assert m.weight_mask.cpu().numpy().tolist() == [[1.0] * 3] * 3


def test_bad_pruning_raises_and_leaves_the_module_alone():
    for call, exc, match in (
            (lambda m: prune.l1_unstructured(m, "weight", amount=-1), ValueError, "non-negative integer"),
            (lambda m: prune.l1_unstructured(m, "weight", amount=1.5), ValueError, r"range \[0, 1\]"),
            (lambda m: prune.l1_unstructured(m, "weight", amount="a"), TypeError, "Invalid type for amount"),
            (lambda m: prune.l1_unstructured(m, "weight", amount=5), ValueError, "should be smaller than"),
            (lambda m: prune.ln_structured(m, "bias", amount=1, n=2, dim=0), ValueError, "multidimensional"),
            (lambda m: prune.ln_structured(m, "weight", amount=1, n=2, dim=2), IndexError, "Invalid index 2"),
            (lambda m: prune.remove(m, "weight"), ValueError, "has to be pruned before"),
            (lambda m: prune.l1_unstructured(m, "weight", amount=1, importance_scores=mf.ones(3)), ValueError,
             "same shape"),
            (lambda m: prune.global_unstructured([(m, "weight")], pruning_method=prune.LnStructured, amount=1, n=2,
                                                 dim=0), TypeError, 'Only "unstructured"')):
        m = _linear(2, 2, "cpu")
        before = {k: v.numpy().copy() for k, v in m.state_dict().items()}
        with pytest.raises(exc, match=match):
            call(m)
        assert [n for n, _ in m.named_parameters()] == ["weight", "bias"] and m._call_hooks is None
        assert all(np.array_equal(v.numpy(), before[k]) for k, v in m.state_dict().items())
    m = _linear(3, 3, "cpu")
    prune.l1_unstructured(m, "weight", amount=2)
    mask = m.weight_mask.numpy().copy()
    with pytest.raises(ValueError, match="should be smaller than"):  # a second pruning that fails keeps the first
        prune.l1_unstructured(m, "weight", amount=20)
    assert np.array_equal(m.weight_mask.numpy(), mask) and len(m._call_hooks.pre) == 1


def test_prune_module_path_and_prune_method():
    import importlib

    assert importlib.import_module("minifused.nn.utils.prune") is prune
    got = prune.L1Unstructured(amount=2).prune(mf.tensor([3.0, -1.0, 2.0, 0.5]))
    assert got.tolist() == [3.0, 0.0, 2.0, 0.0]
