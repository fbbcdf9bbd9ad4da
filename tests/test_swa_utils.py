"""optim.swa_utils: AveragedModel (SWA, EMA, custom averages) against float64 recurrences, update_bn against
the batches' own statistics, and bad arguments. (SWALR's schedule: tests/test_lr_scheduler.py.)"""
import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
from minifused import nn
from minifused.optim import swa_utils as swa


def _net(device, seed=0):
    mf.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(2, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 3 * 3, 3)).to(device)


def _arrays(module, buffers=False):
    ts = list(module.parameters()) + (list(module.buffers()) if buffers else [])
    return [t.detach().cpu().numpy().astype(np.float64) for t in ts]


def _train_some(model, device, rng, steps=2):
    opt = mf.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        x = mf.tensor(rng.standard_normal((4, 2, 5, 5)).astype(np.float32), device=device)
        y = mf.tensor(rng.integers(0, 3, 4), device=device)
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()


def test_swa_is_the_mean_of_the_models_seen_and_buffers_follow(device, rng):
    model = _net(device)
    avg = swa.AveragedModel(model)
    seen = []
    for _ in range(4):
        _train_some(model, device, rng)
        avg.update_parameters(model)
        seen.append(_arrays(model))
    assert int(avg.n_averaged.item()) == 4
    for got, *versions in zip(_arrays(avg.module), *seen):
        np.testing.assert_allclose(got, np.mean(versions, axis=0), rtol=1e-5, atol=1e-6)
    for a, b in zip(avg.module.buffers(), model.buffers()):  # without use_buffers: the model's, as they are
        np.testing.assert_array_equal(a.cpu().numpy(), b.cpu().numpy())
    x = mf.tensor(rng.standard_normal((3, 2, 5, 5)).astype(np.float32), device=device)
    avg.eval()
    np.testing.assert_array_equal(avg(x).cpu().numpy(), avg.module(x).cpu().numpy())
    assert "n_averaged" in avg.state_dict() and "module.0.weight" in avg.state_dict()


@pytest.mark.parametrize("per_tensor", [False, True])
def test_ema_with_buffers_follows_the_recurrence(device, rng, per_tensor):
    """get_ema_multi_avg_fn (in place) and get_ema_avg_fn (per tensor) with use_buffers: the first update
    copies, then ema = decay * ema + (1 - decay) * model, buffers included (the integer counter truncated)."""
    decay = 0.75
    model = _net(device)
    fn = {"avg_fn": swa.get_ema_avg_fn(decay)} if per_tensor else {"multi_avg_fn": swa.get_ema_multi_avg_fn(decay)}
    ema = swa.AveragedModel(model, use_buffers=True, **fn)
    want = None
    for _ in range(3):
        _train_some(model, device, rng)
        ema.update_parameters(model)
        now = _arrays(model, buffers=True)
        want = now if want is None else [decay * w + (1 - decay) * n for w, n in zip(want, now)]
    for got, w, t in zip(_arrays(ema.module, buffers=True), want,
                         list(ema.module.parameters()) + list(ema.module.buffers())):
        if t.dtype == mf.int64:
            continue  # num_batches_tracked: a float average truncated back, as PyTorch's copy_ gives it
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("average", ["swa", "ema"])
def test_integer_buffers_take_pytorchs_float32_formula_truncated(device, average):
    """num_batches_tracked under use_buffers=True: PyTorch averages integer tensors with its own formulas (SWA
    on the CPU: avg + (cur - avg) / (n + 1); EMA: avg * decay + cur * (1 - decay)), whose int-by-float ops
    compute in the default dtype (float32), and copy_ truncates the result. Each sequence below has a step where
    float32 and float64 land on opposite sides of an integer (float64 gives 8, not 9; 14, not 13)."""
    f = np.float32
    bn = nn.BatchNorm1d(2).to(device)
    kw = {} if average == "swa" else {"multi_avg_fn": swa.get_ema_multi_avg_fn(0.9)}
    avg = swa.AveragedModel(bn, use_buffers=True, **kw)
    want, got = None, []
    for n, count in enumerate([1, 1, 25, 14, 14, 30] if average == "swa" else [14, 14, 14, 30]):
        bn.num_batches_tracked.fill_(count)
        avg.update_parameters(bn)
        got.append(int(avg.module.num_batches_tracked.item()))
        if want is None:
            want = [count]
        elif average == "swa":
            want.append(int(f(want[-1]) + f(count - want[-1]) / f(n + 1)))
        else:
            want.append(int(f(want[-1]) * f(0.9) + f(count) * f(1 - 0.9)))
    assert got == want
    assert got == ([1, 1, 9, 10, 10, 13] if average == "swa" else [14, 13, 13, 14])


def test_custom_multi_avg_fn_gets_lists_and_the_count(device):
    calls = []

    def keep_max(avg, cur, n):
        calls.append((len(avg), int(n.item())))
        for a, c in zip(avg, cur):
            a.data.copy_(mf.maximum(a.data, c.data))

    model = _net(device)
    avg = swa.AveragedModel(model, multi_avg_fn=keep_max)
    avg.update_parameters(model)
    with mf.no_grad():
        for p in model.parameters():
            p.mul_(-1.0)
    avg.update_parameters(model)
    assert calls == [(len(list(model.parameters())), 1)]
    for got, p in zip(_arrays(avg.module), _arrays(model)):
        np.testing.assert_array_equal(got, np.abs(p))


def test_update_bn_recomputes_the_statistics(device, rng):
    """Cumulative averages over the loader's batches: the mean of the batch means and of the unbiased batch
    variances; momentum and mode restored; (input, target) batches take their first element."""
    model = _net(device)
    bn = model[1]
    bn.momentum = 0.3
    model.eval()
    batches = [mf.tensor(rng.standard_normal((6, 2, 5, 5)).astype(np.float32), device=device) for _ in range(3)]
    swa.update_bn([(x, None) for x in batches], model)
    assert bn.momentum == 0.3 and not model.training
    with mf.no_grad():
        feats = [model[0](x).cpu().numpy().astype(np.float64) for x in batches]
    means = np.mean([f.mean(axis=(0, 2, 3)) for f in feats], axis=0)
    var = np.mean([f.transpose(1, 0, 2, 3).reshape(4, -1).var(axis=1, ddof=1) for f in feats], axis=0)
    np.testing.assert_allclose(bn.running_mean.cpu().numpy(), means, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(bn.running_var.cpu().numpy(), var, rtol=1e-4, atol=1e-5)
    assert int(bn.num_batches_tracked.item()) == 3


def test_bad_arguments():
    model = _net("cpu")
    with pytest.raises(AssertionError, match="only one of avg_fn and multi_avg_fn"):  # (PyTorch's kind)
        swa.AveragedModel(model, avg_fn=swa.get_swa_avg_fn(), multi_avg_fn=swa.get_swa_multi_avg_fn())
    with pytest.raises(TypeError, match="expected a Module"):
        swa.AveragedModel(object())
    with pytest.raises(ValueError, match="Invalid decay value"):
        swa.get_ema_multi_avg_fn(1.5)
    with pytest.raises(ValueError, match="Invalid decay value"):
        swa.get_ema_avg_fn(-0.1)
    avg = swa.AveragedModel(model)
    with pytest.raises(RuntimeError, match="the model has 2 parameters, the averaged model 6"):
        avg.update_parameters(nn.Linear(2, 2))
    assert int(avg.n_averaged.item()) == 0
    opt = mf.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="anneal_strategy must be one of"):
        swa.SWALR(opt, 0.05, anneal_strategy="exp")
    with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0"):
        swa.SWALR(opt, 0.05, anneal_epochs=-1)
    with pytest.raises(ValueError, match="one value per parameter group"):
        swa.SWALR(opt, [0.05, 0.01])
