"""LR schedulers: lr sequences against PyTorch's documented closed forms (CPU), against
torch.optim.lr_scheduler itself (GPU machines, the ``torch`` fixture), state dicts that resume a
schedule exactly, and bad arguments."""
import importlib
import math

import numpy as np
import pytest

import minifused as mf
from minifused import backend, nn, optim
from minifused.optim import lr_scheduler as S

BASES = (0.1, 0.05)  # two parameter groups
N = 50


@pytest.fixture(autouse=True)
def _cpu_by_default(monkeypatch):
    monkeypatch.setattr(backend, "default_device", lambda: backend.CPU)


def _metrics(n=N):
    """A noisy, mostly falling loss with plateaus (deterministic)."""
    rng = np.random.default_rng(5)
    out, v = [], 1.0
    for i in range(n):
        v = v * (0.97 if i % 9 < 3 else 1.0) + (0.002 * rng.standard_normal() if i % 4 else 0.0)
        out.append(float(v))
    return out


# name -> (build(lr_scheduler module, optimizer), step arguments: None (plain step), ("epoch", e), ("metric", m))
def _sequential(M, o):
    return M.SequentialLR(o, [M.LinearLR(o, start_factor=0.1, total_iters=5), M.CosineAnnealingLR(o, T_max=20)],
                          milestones=[5])


def _sequential3(M, o):
    return M.SequentialLR(o, [M.ExponentialLR(o, gamma=0.9), M.MultiStepLR(o, [4, 9], 0.5),
                              M.CosineAnnealingWarmRestarts(o, T_0=4, T_mult=2)], milestones=[6, 20])


def _swa(M):
    """The swa_utils module beside lr_scheduler module ``M`` (PyTorch's or ours): SWALR lives there."""
    return importlib.import_module(M.__name__.rsplit(".", 1)[0] + ".swa_utils")


CASES = {
    "StepLR": (lambda M, o: M.StepLR(o, step_size=7, gamma=0.5), None),
    "MultiStepLR": (lambda M, o: M.MultiStepLR(o, milestones=[3, 10, 10, 25], gamma=0.3), None),
    "ExponentialLR": (lambda M, o: M.ExponentialLR(o, gamma=0.93), None),
    "LambdaLR": (lambda M, o: M.LambdaLR(o, lambda e: 0.95 ** e), None),
    "LambdaLR_per_group": (lambda M, o: M.LambdaLR(o, [lambda e: 0.95 ** e, lambda e: 1.0 / (1 + e)]), None),
    "MultiplicativeLR": (lambda M, o: M.MultiplicativeLR(o, lambda e: 0.97), None),
    "CosineAnnealingLR": (lambda M, o: M.CosineAnnealingLR(o, T_max=20, eta_min=0.001), None),
    "LinearLR": (lambda M, o: M.LinearLR(o, start_factor=0.2, total_iters=10), None),
    "ConstantLR": (lambda M, o: M.ConstantLR(o, factor=0.4, total_iters=6), None),
    "PolynomialLR": (lambda M, o: M.PolynomialLR(o, total_iters=15, power=2.0), None),
    "PolynomialLR_float_total_iters": (lambda M, o: M.PolynomialLR(o, total_iters=7.5, power=1.5), None),
    "ChainedScheduler": (lambda M, o: M.ChainedScheduler([M.ConstantLR(o, factor=0.1, total_iters=3),
                                                          M.ExponentialLR(o, gamma=0.9)]), None),
    "OneCycleLR": (lambda M, o: M.OneCycleLR(o, max_lr=[0.3, 0.2], total_steps=N + 1), None),
    "SequentialLR": (_sequential, None),
    "SequentialLR_three": (_sequential3, None),
    "CosineAnnealingWarmRestarts": (lambda M, o: M.CosineAnnealingWarmRestarts(o, T_0=5, T_mult=2, eta_min=0.002),
                                    None),
    "CosineAnnealingWarmRestarts_T_mult1": (lambda M, o: M.CosineAnnealingWarmRestarts(o, T_0=7), None),
    "CosineAnnealingWarmRestarts_float_epoch": (
        lambda M, o: M.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.001),
        [("epoch", 0.37 * k) for k in range(1, N + 1)]),
    "StepLR_epoch_jumps": (lambda M, o: M.StepLR(o, step_size=4, gamma=0.5),
                           [("epoch", e) for e in [1, 5, 2, 9, 9, 13, 0, 21] * 7][:N]),
    "CyclicLR": (lambda M, o: M.CyclicLR(o, base_lr=[0.01, 0.005], max_lr=[0.1, 0.05], step_size_up=4,
                                         step_size_down=6), None),
    "CyclicLR_triangular2": (lambda M, o: M.CyclicLR(o, 0.01, 0.1, step_size_up=3, mode="triangular2"), None),
    "CyclicLR_exp_range": (lambda M, o: M.CyclicLR(o, 0.01, 0.1, step_size_up=5, mode="exp_range", gamma=0.97),
                           None),
    "SWALR": (lambda M, o: _swa(M).SWALR(o, swa_lr=0.02, anneal_epochs=6), None),
    "SWALR_linear_per_group": (lambda M, o: _swa(M).SWALR(o, swa_lr=[0.01, 0.2], anneal_epochs=4,
                                                          anneal_strategy="linear"), None),
    "SWALR_no_anneal": (lambda M, o: _swa(M).SWALR(o, swa_lr=0.03, anneal_epochs=0), None),
    "ReduceLROnPlateau": (lambda M, o: M.ReduceLROnPlateau(o, patience=2, factor=0.5, cooldown=1),
                          [("metric", m) for m in _metrics()]),
    "ReduceLROnPlateau_max_abs": (
        lambda M, o: M.ReduceLROnPlateau(o, mode="max", threshold=0.01, threshold_mode="abs", patience=1,
                                         min_lr=[0.02, 0.001], factor=0.3),
        [("metric", -m) for m in _metrics()]),
}


def _opt(params=None):
    a, b = params or (nn.Parameter(mf.ones(3)), nn.Parameter(mf.ones(2)))
    return optim.SGD([{"params": [a]}, {"params": [b], "lr": BASES[1]}], lr=BASES[0], momentum=0.9)


def _drive(sched, opt, args, n=N):
    """The lrs of every group after construction and after each of n steps."""
    seq = [sched.get_last_lr()]
    for i in range(n):
        opt.step()
        arg = args[i] if args else None
        sched.step() if arg is None else sched.step(arg[1])  # an epoch or a metric
        seq.append(sched.get_last_lr())
        assert [g["lr"] for g in opt.param_groups] == seq[-1]
    return np.array(seq, dtype=np.float64)


def _ours(name, n=N):
    build, args = CASES[name]
    opt = _opt()
    return _drive(build(S, opt), opt, args, n)


# ---------------------------------------------------------------- closed-form references
def _sgdr(t, T0, mult):
    """(T_cur, T_i) of SGDR at (fractional) epoch t."""
    Ti, start = T0, 0
    while t >= start + Ti:
        start, Ti = start + Ti, Ti * mult
    return t - start, Ti


def _cos(base, lo, cur, T):
    return lo + (base - lo) * (1 + math.cos(math.pi * cur / T)) / 2


def _plateau(metrics, mode, factor, patience, threshold, threshold_mode, cooldown, min_lrs):
    lrs, best, bad, cool, out = list(BASES), math.inf if mode == "min" else -math.inf, 0, 0, [list(BASES)]
    for m in metrics:
        if mode == "min":
            better = m < (best * (1 - threshold) if threshold_mode == "rel" else best - threshold)
        else:
            better = m > (best * (1 + threshold) if threshold_mode == "rel" else best + threshold)
        best, bad = (m, 0) if better else (best, bad + 1)
        if cool > 0:
            cool, bad = cool - 1, 0
        if bad > patience:
            new = [max(lr * factor, lo) for lr, lo in zip(lrs, min_lrs)]
            lrs = [n if lr - n > 1e-8 else lr for lr, n in zip(lrs, new)]
            cool, bad = cooldown, 0
        out.append(list(lrs))
    return out


def _reference(name):
    ts = range(N + 1)
    if name == "StepLR":
        return [[b * 0.5 ** (t // 7) for b in BASES] for t in ts]
    if name == "MultiStepLR":
        return [[b * 0.3 ** sum(t >= m for m in (3, 10, 10, 25)) for b in BASES] for t in ts]
    if name == "ExponentialLR":
        return [[b * 0.93 ** t for b in BASES] for t in ts]
    if name == "LambdaLR":
        return [[b * 0.95 ** t for b in BASES] for t in ts]
    if name == "LambdaLR_per_group":
        return [[BASES[0] * 0.95 ** t, BASES[1] / (1 + t)] for t in ts]
    if name == "MultiplicativeLR":
        return [[b * 0.97 ** t for b in BASES] for t in ts]
    if name == "LinearLR":
        return [[b * (0.2 + 0.8 * min(t, 10) / 10) for b in BASES] for t in ts]
    if name == "ConstantLR":
        return [[b * (0.4 if t < 6 else 1.0) for b in BASES] for t in ts]
    if name == "PolynomialLR":
        return [[b * (1 - min(t, 15) / 15) ** 2 for b in BASES] for t in ts]
    if name == "PolynomialLR_float_total_iters":
        # (after the last step within total_iters, t = 7, the lr holds there, as PyTorch's)
        return [[b * (1 - min(t, 7) / 7.5) ** 1.5 for b in BASES] for t in ts]
    if name == "ChainedScheduler":  # each scales what the one before left: the product of their factors
        return [[b * (0.1 if t < 3 else 1.0) * 0.9 ** t for b in BASES] for t in ts]
    if name == "SequentialLR":
        return [[b * (0.1 + 0.9 * t / 5) if t < 5 else _cos(b, 0.0, t - 5, 20) for b in BASES] for t in ts]
    if name == "SequentialLR_three":
        def lr(b, t):
            if t < 6:
                return b * 0.9 ** t
            if t < 20:
                return b * 0.5 ** sum(t - 6 >= m for m in (4, 9))
            return _cos(b, 0.0, *_sgdr(t - 20, 4, 2))
        return [[lr(b, t) for b in BASES] for t in ts]
    if name == "CosineAnnealingWarmRestarts":
        return [[_cos(b, 0.002, *_sgdr(t, 5, 2)) for b in BASES] for t in ts]
    if name == "CosineAnnealingWarmRestarts_T_mult1":
        return [[_cos(b, 0.0, t % 7, 7) for b in BASES] for t in ts]
    if name == "CosineAnnealingWarmRestarts_float_epoch":
        return [[_cos(b, 0.001, *_sgdr(e, 3, 2)) for b in BASES] for e in [0] + [0.37 * k for k in range(1, N + 1)]]
    if name == "StepLR_epoch_jumps":
        epochs = [0] + [e for e in [1, 5, 2, 9, 9, 13, 0, 21] * 7][:N]
        return [[b * 0.5 ** (e // 4) for b in BASES] for e in epochs]
    if name == "ReduceLROnPlateau":
        return _plateau(_metrics(), "min", 0.5, 2, 1e-4, "rel", 1, [0, 0])
    if name == "ReduceLROnPlateau_max_abs":
        return _plateau([-m for m in _metrics()], "max", 0.3, 1, 0.01, "abs", 0, [0.02, 0.001])
    if name.startswith("CyclicLR"):
        bases, tops, up, down, mode = {"CyclicLR": ((0.01, 0.005), (0.1, 0.05), 4, 6, "triangular"),
                                       "CyclicLR_triangular2": ((0.01, 0.01), (0.1, 0.1), 3, 3, "triangular2"),
                                       "CyclicLR_exp_range": ((0.01, 0.01), (0.1, 0.1), 5, 5, "exp_range")}[name]
        return [[_cyclic(t, b, top, up, down, mode) for b, top in zip(bases, tops)] for t in ts]
    if name.startswith("SWALR"):  # from each group's lr to its swa_lr over anneal_epochs, then held
        swa, epochs, shape = {"SWALR": ((0.02, 0.02), 6, "cos"), "SWALR_linear_per_group": ((0.01, 0.2), 4, "lin"),
                              "SWALR_no_anneal": ((0.03, 0.03), 0, "cos")}[name]

        def alpha(t):
            x = 1.0 if epochs == 0 else min(1.0, t / epochs)
            return (1 - math.cos(math.pi * x)) / 2 if shape == "cos" else x
        return [[s * alpha(t) + b * (1 - alpha(t)) for s, b in zip(swa, BASES)] for t in ts]
    if name == "OneCycleLR":
        total, up = N + 1, 0.3 * (N + 1) - 1

        def lr(mx, t):
            lo, hi, end = mx / 25, mx, mx / 25 / 1e4
            if t <= up:
                return _cos_anneal(lo, hi, t / up)
            return _cos_anneal(hi, end, (t - up) / (total - 1 - up))
        return [[lr(mx, t) for mx in (0.3, 0.2)] for t in ts]
    return [[_cos(b, 0.001, t, 20) for b in BASES] for t in ts]  # CosineAnnealingLR


def _cyclic(t, base, top, up, down, mode, gamma=0.97):
    """CyclicLR's documented triangle at step t, its height scaled per cycle or per step."""
    cycle = math.floor(1 + t / (up + down))
    x = 1 + t / (up + down) - cycle
    rise = up / (up + down)
    f = x / rise if x <= rise else (x - 1) / (rise - 1)
    scale = {"triangular": 1.0, "triangular2": 0.5 ** (cycle - 1), "exp_range": gamma ** t}[mode]
    return base + (top - base) * f * scale


def test_cyclic_lr_cycles_momentum_and_beta1_the_other_way():
    """cycle_momentum: SGD's momentum (Adam's beta1) goes from max_momentum down to base_momentum while the lr
    climbs, and back; a custom scale_fn; an optimizer without momentum is refused."""
    for make, key in ((lambda ps: optim.SGD(ps, lr=1.0, momentum=0.5), "momentum"),
                      (lambda ps: optim.Adam(ps, lr=1.0, betas=(0.5, 0.99)), "betas")):
        opt = make([nn.Parameter(mf.ones(2))])
        sched = S.CyclicLR(opt, 0.1, 0.5, step_size_up=2, base_momentum=0.8, max_momentum=0.9,
                           scale_fn=lambda c: 0.5, scale_mode="cycle")
        seen = []
        for _ in range(5):
            g = opt.param_groups[0]
            seen.append((g["lr"], g[key] if key == "momentum" else g[key][0]))
            sched.step()
        np.testing.assert_allclose(seen, [(0.1, 0.9), (0.2, 0.875), (0.3, 0.85), (0.2, 0.875), (0.1, 0.9)],
                                   rtol=1e-12)
        if key == "betas":
            assert opt.param_groups[0]["betas"][1] == 0.99
        assert sched.state_dict()["_scale_fn_custom"] is None
    with pytest.raises(ValueError, match="must support momentum or beta1"):
        S.CyclicLR(optim.Adagrad([nn.Parameter(mf.ones(1))]), 0.1, 0.5)
    with pytest.raises(ValueError, match="mode is invalid"):
        S.CyclicLR(_opt(), 0.1, 0.5, mode="sine")
    with pytest.raises(ValueError, match="max_lr must have the same length"):
        S.CyclicLR(_opt(), 0.1, [0.5, 0.4, 0.3])


def _cos_anneal(start, end, pct):
    return end + (start - end) / 2 * (math.cos(math.pi * pct) + 1)


@pytest.mark.parametrize("name", list(CASES))
def test_lr_sequence_matches_closed_form(name):
    np.testing.assert_allclose(_ours(name), np.array(_reference(name)), rtol=1e-12, atol=1e-15)


def test_plateau_reference_is_not_trivial():
    """The metric sequence does trigger reductions (otherwise the plateau tests prove little)."""
    lrs = np.array(_reference("ReduceLROnPlateau"))
    assert len(set(lrs[:, 0])) >= 4
    assert len(set(np.array(_reference("ReduceLROnPlateau_max_abs"))[:, 1])) >= 3


@pytest.mark.parametrize("name", list(CASES))
def test_state_dict_resumes_the_schedule(name, tmp_path):
    """Save optimizer and scheduler after 20 steps, rebuild both, load, and continue: the same lrs."""
    build, args = CASES[name]
    full = _ours(name)
    opt = _opt()
    sched = build(S, opt)
    _drive(sched, opt, args, 20)
    mf.save({"opt": opt.state_dict(), "sched": sched.state_dict()}, tmp_path / "ck")
    ck = mf.load(tmp_path / "ck")
    opt2 = _opt()
    sched2 = build(S, opt2)
    opt2.load_state_dict(ck["opt"])
    sched2.load_state_dict(ck["sched"])
    assert sched2.get_last_lr() == pytest.approx(full[20].tolist(), rel=0, abs=0)
    rest = _drive(sched2, opt2, args[20:] if args else None, N - 20)
    np.testing.assert_allclose(rest, full[20:], rtol=1e-15, atol=0)


class _Warmup:
    """A callable object: LambdaLR saves its attributes (not the function) in the state dict."""

    def __init__(self, n):
        self.n = n

    def __call__(self, epoch):
        return min(1.0, (epoch + 1) / self.n)


def test_lambda_lr_saves_callable_objects_state_not_functions():
    opt = _opt()
    sched = S.LambdaLR(opt, [_Warmup(4), lambda e: 1.0])
    sd = sched.state_dict()
    assert sd["lr_lambdas"] == [{"n": 4}, None]
    sched2 = S.LambdaLR(_opt(), [_Warmup(10), lambda e: 1.0])
    sched2.load_state_dict(sd)
    assert sched2.lr_lambdas[0].n == 4


def test_one_cycle_cycles_momentum_inversely_and_stops_at_total_steps():
    p = nn.Parameter(mf.ones(1))
    opt = optim.Adam([p], lr=0.01)
    sched = S.OneCycleLR(opt, max_lr=0.01, total_steps=10)
    assert opt.param_groups[0]["betas"][0] == pytest.approx(0.95)  # momentum starts at its maximum
    for _ in range(3):
        opt.step()
        sched.step()
    assert opt.param_groups[0]["betas"][0] < 0.9  # near the lr's peak, momentum near its base
    for _ in range(6):
        sched.step()
    assert opt.param_groups[0]["betas"][0] == pytest.approx(0.95)
    assert sched.get_last_lr()[0] == pytest.approx(0.01 / 25 / 1e4)
    with pytest.raises(ValueError, match="total_steps"):
        sched.step()
        sched.step()


def test_one_cycle_takes_one_momentum_range_per_group():
    """base_momentum / max_momentum as lists, one per group (PyTorch's): each group cycles its own range, in the
    closed form (cos annealing, pct_start 0.3 of 10 steps: max at step 0, base at step 2); a list of the wrong
    length raises."""
    groups = [{"params": [nn.Parameter(mf.ones(1))]} for _ in range(2)]
    opt = optim.SGD(groups, lr=0.1, momentum=0.9)
    sched = S.OneCycleLR(opt, 0.1, total_steps=10, base_momentum=[0.8, 0.85], max_momentum=[0.9, 0.95])
    assert [g["momentum"] for g in opt.param_groups] == [0.9, 0.95]
    for _ in range(2):
        opt.step()
        sched.step()
    assert [g["momentum"] for g in opt.param_groups] == pytest.approx([0.8, 0.85])
    with pytest.raises(ValueError, match="max_momentum must have the same length as optimizer.param_groups"):
        S.OneCycleLR(opt, 0.1, total_steps=10, max_momentum=[0.9])


@pytest.mark.parametrize("last_epoch", [0, 1, 3, 7])
def test_polynomial_lr_resumed_keeps_the_lr_at_construction(last_epoch):
    """Constructed at last_epoch >= 0 (resuming), PolynomialLR leaves the lr as it is, as PyTorch's (its
    constructor's step decayed it once more); the steps after it decay by the chainable factor."""
    opt = optim.SGD([nn.Parameter(mf.ones(1))], lr=0.1)
    opt.param_groups[0]["initial_lr"] = 0.1
    sched = S.PolynomialLR(opt, total_iters=8, power=2.0, last_epoch=last_epoch)
    assert opt.param_groups[0]["lr"] == 0.1
    opt.step()
    sched.step()
    t = last_epoch + 2  # (the constructor's step counted one epoch)
    want = 0.1 * ((1 - t / 8) / (1 - (t - 1) / 8)) ** 2 if t <= 8 else 0.1
    assert opt.param_groups[0]["lr"] == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("kwargs, match", [
    ({"max_lr": [0.1]}, "OneCycleLR: max_lr must have the same length as optimizer.param_groups: max_lr has 1 "
                        "values, param_groups has 2"), ({"max_lr": [0.1, 0.2, 0.3]}, "max_lr has 3 values"),
    ({"total_steps": 10.5}, "positive integer total_steps"), ({"total_steps": 0}, "positive integer total_steps"),
    ({"epochs": -2, "steps_per_epoch": -5}, "positive integer epochs"),
    ({"epochs": 2.5, "steps_per_epoch": 4}, "positive integer epochs"),
    ({"epochs": 2, "steps_per_epoch": 0}, "positive integer steps_per_epoch")])
def test_one_cycle_checks_its_arguments_as_pytorch(kwargs, match):
    """A max_lr a group, and whole positive step counts (before, a short max_lr list was a KeyError and -2 * -5
    epochs ran 10 steps); the optimizer's groups are left untouched."""
    opt = _opt()
    before = [dict(g) for g in opt.param_groups]
    args = {"max_lr": 0.1, **({} if "epochs" in kwargs else {"total_steps": 10}), **kwargs}
    with pytest.raises(ValueError, match=match):
        S.OneCycleLR(opt, **args)
    assert [dict(g) for g in opt.param_groups] == before


def _lrs(sched, opt, n=10):
    out = [sched.get_last_lr()[0]]
    for _ in range(n):
        opt.step()
        sched.step()
        out.append(sched.get_last_lr()[0])
    return out


def test_sequential_with_a_milestone_at_zero_starts_the_second_scheduler():
    """As PyTorch: the scheduler that runs at step 0 (bisect of the milestones) takes the first step."""
    opt = optim.SGD([nn.Parameter(mf.ones(1))], lr=0.1)
    sched = S.SequentialLR(opt, [S.ConstantLR(opt, 0.5, total_iters=2), S.ExponentialLR(opt, 0.9),
                                 S.StepLR(opt, 2)], milestones=[0, 3])
    want = [0.1 * 0.9 ** t if t < 3 else 0.1 * 0.1 ** ((t - 3) // 2) for t in range(11)]
    np.testing.assert_allclose(_lrs(sched, opt), want, rtol=1e-12)


def test_sequential_inside_sequential_as_pytorch():
    """A SequentialLR as a SequentialLR's first scheduler: its schedulers' construction steps are undone, not its
    own count. The values are PyTorch 2.13's (recorded from it): its ConstantLR then holds one step only."""
    opt = optim.SGD([nn.Parameter(mf.ones(1))], lr=0.1)
    inner = S.SequentialLR(opt, [S.ConstantLR(opt, 0.5, total_iters=2), S.ExponentialLR(opt, 0.9)], milestones=[2])
    sched = S.SequentialLR(opt, [inner, S.StepLR(opt, 3)], milestones=[6])
    want = [0.05, 0.1, 0.09, 0.081, 0.0729, 0.06561, 0.1, 0.1, 0.1, 0.01, 0.01]
    np.testing.assert_allclose(_lrs(sched, opt), want, rtol=1e-9)


def test_plateau_accepts_tensor_metrics_and_leaves_lr_at_construction():
    opt = _opt()
    sched = S.ReduceLROnPlateau(opt, patience=0)
    assert sched.get_last_lr() == list(BASES)
    sched.step(mf.tensor(1.0))
    sched.step(mf.tensor(2.0))
    assert sched.get_last_lr() == pytest.approx([b * 0.1 for b in BASES])


@pytest.mark.parametrize("make,exc,pattern", [
    (lambda o: S.LambdaLR(o, [lambda e: 1.0]), ValueError, "expected 2 lr_lambdas"),
    (lambda o: S.MultiplicativeLR(o, 0.9), TypeError, "must be callable"),
    (lambda o: S.CosineAnnealingWarmRestarts(o, T_0=0), ValueError, "positive integer T_0"),
    (lambda o: S.CosineAnnealingWarmRestarts(o, T_0=2.5), ValueError, "positive integer T_0"),
    (lambda o: S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=0), ValueError, "T_mult >= 1"),
    (lambda o: S.CosineAnnealingWarmRestarts(o, T_0=3, eta_min="0"), ValueError, "eta_min"),
    (lambda o: S.CosineAnnealingWarmRestarts(o, T_0=3).step(-1), ValueError, "non-negative epoch"),
    (lambda o: S.ReduceLROnPlateau(o, factor=1.0), ValueError, "factor should be < 1.0"),
    (lambda o: S.ReduceLROnPlateau(o, mode="up"), ValueError, "mode must be 'min' or 'max'"),
    (lambda o: S.ReduceLROnPlateau(o, threshold_mode="pct"), ValueError, "threshold_mode"),
    (lambda o: S.ReduceLROnPlateau(o, min_lr=[0.1]), ValueError, "expected 2 min_lrs"),
    (lambda o: S.ReduceLROnPlateau([1], 0.1), TypeError, "not an Optimizer"),
    (lambda o: S.SequentialLR(o, [], []), ValueError, "at least one scheduler"),
    (lambda o: S.SequentialLR(o, [S.ExponentialLR(o, 0.9)] * 2, []), ValueError, "expected 1 milestones"),
    (lambda o: S.SequentialLR(o, [S.ReduceLROnPlateau(o)], []), ValueError, "cannot be sequenced"),
    (lambda o: S.SequentialLR(o, [S.ExponentialLR(_opt(), 0.9)], []), ValueError, "another optimizer"),
    (lambda o: S.SequentialLR(o, [object()], []), TypeError, "not a scheduler"),
    (lambda o: S.StepLR(o, 2, gamma="0.5"), TypeError, "StepLR: expected a number gamma, got '0.5'"),
    (lambda o: S.MultiStepLR(o, [2], gamma=None), TypeError, "MultiStepLR: expected a number gamma, got None"),
    (lambda o: S.ExponentialLR(o, "0.9"), TypeError, "ExponentialLR: expected a number gamma"),
    (lambda o: S.CosineAnnealingLR(o, 5, eta_min="0"), TypeError, "CosineAnnealingLR: expected a number eta_min"),
    (lambda o: S.ChainedScheduler([S.ExponentialLR(o, 0.9), S.ReduceLROnPlateau(o)]), ValueError,
     r"schedulers\[1\] is a ReduceLROnPlateau, which cannot be chained"),
    (lambda o: S.ChainedScheduler([S.ExponentialLR(o, 0.9), object()]), TypeError, "not a scheduler"),
    # arguments PyTorch's take and fail on at a later step (a modulo by zero, a string's TypeError, None * lr)
    (lambda o: S.ChainedScheduler([1]), TypeError, r"schedulers\[0\] is a int, not a scheduler"),
    (lambda o: S.StepLR(o, "3"), TypeError, "StepLR: expected a number step_size, got '3'"),
    (lambda o: S.CosineAnnealingLR(o, None), TypeError, "CosineAnnealingLR: expected a number T_max"),
    (lambda o: S.MultiStepLR(o, 5), TypeError, "MultiStepLR: milestones must be a list of epochs, got 5"),
    (lambda o: S.MultiStepLR(o, ["10"]), TypeError, "MultiStepLR: milestones must be numbers"),
    (lambda o: S.OneCycleLR(o, "0.1", total_steps=5), TypeError, "OneCycleLR: expected a number max_lr"),
    (lambda o: S.LambdaLR(o, lambda e: None), TypeError, "LambdaLR: lr_lambda returned None for epoch 0"),
    (lambda o: S.MultiplicativeLR(o, lambda e: "0.9").step(), TypeError, "MultiplicativeLR: lr_lambda returned"),
    (lambda o: S.ReduceLROnPlateau(o, factor="0.5"), TypeError, "ReduceLROnPlateau: expected a number factor"),
    (lambda o: S.ReduceLROnPlateau(o, min_lr=[0, "1e-4"]), TypeError, "ReduceLROnPlateau: expected a number min_lr"),
    (lambda o: S.ReduceLROnPlateau(o).step(None), TypeError, "ReduceLROnPlateau.step: expected the metric"),
    (lambda o: S.ReduceLROnPlateau(o).step("low"), ValueError, "ReduceLROnPlateau.step: expected the metric"),
    (lambda o: S.ReduceLROnPlateau(o).step(mf.tensor([1.0, 2.0])), ValueError, "one-element tensor"),
    (lambda o: S.CosineAnnealingWarmRestarts(o, T_0=3).step("1"), TypeError, "expected a number epoch, got '1'"),
    (lambda o: S.LinearLR(o, start_factor="0.1"), TypeError, "LinearLR: expected a number start_factor, got '0.1'"),
    (lambda o: S.LinearLR(o, total_iters=None), TypeError, "LinearLR: expected a number total_iters, got None"),
    (lambda o: S.ConstantLR(o, factor="0.5"), TypeError, "ConstantLR: expected a number factor, got '0.5'"),
    (lambda o: S.ConstantLR(o, total_iters="5"), TypeError, "ConstantLR: expected a number total_iters"),
    (lambda o: S.PolynomialLR(o, power="2"), TypeError, "PolynomialLR: expected a number power, got '2'"),
    (lambda o: S.OneCycleLR(o, 0.1, total_steps=9, pct_start="0.3"), TypeError, "expected a number pct_start"),
    (lambda o: S.OneCycleLR(o, 0.1, total_steps=9, div_factor="25"), TypeError, "expected a number div_factor"),
    (lambda o: S.ReduceLROnPlateau(o, patience="2"), TypeError, "ReduceLROnPlateau: expected a number patience"),
    (lambda o: S.ReduceLROnPlateau(o, eps=None), TypeError, "ReduceLROnPlateau: expected a number eps, got None"),
    (lambda o: S.SequentialLR(o, [S.ExponentialLR(o, 0.9)] * 2, 3), TypeError, "milestones must be a list of epochs"),
    (lambda o: S.SequentialLR(o, [S.ExponentialLR(o, 0.9)] * 2, ["3"]), TypeError,
     r"SequentialLR: expected a number milestones\[0\], got '3'"),
])
def test_bad_scheduler_arguments(make, exc, pattern):
    with pytest.raises(exc, match=pattern):
        make(_opt())


def test_constant_lr_factor_zero():
    """Factor 0 holds the lr at 0 (a frozen start); PyTorch's divides by it at total_iters to restore the lr (a
    ZeroDivisionError): here one that says why, the lr left as it was. Ended by a SequentialLR before then, it
    runs."""
    opt = _opt()
    sched = S.ConstantLR(opt, factor=0.0, total_iters=3)
    seen = [sched.get_last_lr()]
    for _ in range(2):
        opt.step()
        sched.step()
        seen.append(sched.get_last_lr())
    assert seen == [[0.0, 0.0]] * 3
    opt.step()
    with pytest.raises(ZeroDivisionError, match="ConstantLR: a factor of 0 cannot be undone at total_iters=3"):
        sched.step()
    assert sched.last_epoch == 3 and sched.get_last_lr() == [0.0, 0.0] == [g["lr"] for g in opt.param_groups]
    opt = _opt()
    seq = S.SequentialLR(opt, [S.ConstantLR(opt, factor=0.0, total_iters=3), S.ExponentialLR(opt, 0.5)], [3])
    assert _lrs(seq, opt, 4) == pytest.approx([0.0, 0.0, 0.0, 0.1, 0.05], rel=1e-15)


def test_scheduled_lr_reaches_a_new_optimizer_kernel():
    """A scheduler's lr is what the next fused update uses (RMSprop: p moves by lr * g / sqrt(...))."""
    p = nn.Parameter(mf.zeros(1, dtype=mf.float64))
    opt = optim.RMSprop([p], lr=1.0, alpha=0.0, eps=0.0)  # sq = g^2, update = lr * sign(g)
    sched = S.ExponentialLR(opt, gamma=0.5)
    moves = []
    for _ in range(4):
        before = float(p.data[0])
        p.grad = mf.tensor([2.0], dtype=mf.float64)
        opt.step()
        sched.step()
        moves.append(before - float(p.data[0]))
    assert moves == [1.0, 0.5, 0.25, 0.125]


# ---------------------------------------------------------------- GPU machines: PyTorch itself
@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CASES))
def test_lr_sequence_matches_pytorch(name, torch):
    import warnings

    build, args = CASES[name]
    ours = _ours(name)
    a = torch.zeros(3, device="cuda", requires_grad=True)
    b = torch.zeros(2, device="cuda", requires_grad=True)
    opt = torch.optim.SGD([{"params": [a]}, {"params": [b], "lr": BASES[1]}], lr=BASES[0], momentum=0.9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # step(epoch) is deprecated in PyTorch; the schedule is what counts
        sched = build(torch.optim.lr_scheduler, opt)
        seq = [[float(g["lr"]) for g in opt.param_groups]]
        for i in range(N):
            opt.step()
            arg = args[i] if args else None
            sched.step() if arg is None else sched.step(arg[1])
            seq.append([float(g["lr"]) for g in opt.param_groups])
    np.testing.assert_allclose(ours, np.array(seq, dtype=np.float64), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("bad,words", [({"step_size": "x"}, "'step_size' must be like 2, got 'x'"),
                                       ({"last_epoch": None}, "'last_epoch' must be like"),
                                       ({"base_lrs": [0.1, 0.2]}, "'base_lrs' must be like"),
                                       ({"_is_initial": 1}, "'_is_initial' must be like")])
def test_load_state_dict_checks_every_value_before_applying(bad, words):
    p = mf.zeros(2, requires_grad=True)
    sched = mf.optim.lr_scheduler.StepLR(mf.optim.SGD([p], lr=0.1), 2)
    before = sched.state_dict()
    with pytest.raises(ValueError, match=words):
        sched.load_state_dict({**before, **bad})
    assert sched.state_dict() == before


def _first_lrs(sched, opt, steps):
    out = []
    for _ in range(steps):
        out.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    return out


def test_non_integer_step_size_and_milestones_as_given():
    """A computed step size (10/3) or milestone (2.5) is used as given, as PyTorch uses it: the lr changes only
    at an epoch that is an exact multiple (never, for 10/3 over 7 epochs) or equal to a milestone (4.0, not
    2.5); not truncated to int first. A state dict's milestones come back as such numbers."""
    opt = optim.SGD([nn.Parameter(mf.zeros(1))], lr=0.1)
    assert _first_lrs(S.StepLR(opt, step_size=10 / 3), opt, 7) == [0.1] * 7
    opt = optim.SGD([nn.Parameter(mf.zeros(1))], lr=0.1)
    sched = S.MultiStepLR(opt, milestones=[2.5, 4.0])
    assert np.allclose(_first_lrs(sched, opt, 6), [0.1, 0.1, 0.1, 0.1, 0.01, 0.01])
    other = S.MultiStepLR(optim.SGD([nn.Parameter(mf.zeros(1))], lr=0.1), milestones=[1])
    other.load_state_dict({**sched.state_dict(), "milestones": {"2.5": 1, "4": 1}})
    assert dict(other.milestones) == {2.5: 1, 4: 1}


@pytest.mark.parametrize("make,fails_at", [
    (lambda o: S.LambdaLR(o, lambda e: 0.9 ** e), 1),
    (lambda o: S.MultiplicativeLR(o, lambda e: 0.9), 1),
    (lambda o: S.CyclicLR(o, 0.01, 0.1, step_size_up=2), 1),
    (lambda o: S.CosineAnnealingWarmRestarts(o, T_0=3), 1),
    (lambda o: S.CosineAnnealingLR(o, T_max=3), 2),  # (its restart at T_max + 1 reads base_lrs)
])
def test_a_group_added_after_the_scheduler_is_refused_where_the_schedule_has_none_for_it(make, fails_at):
    """Schedules that keep a value per group from their construction (base_lrs, lr_lambdas) have no lr for a
    group added later: PyTorch's refuse the step (ValueError); the added group's lr was left as it was."""
    opt = _opt()
    sched = make(opt)
    for _ in range(2):
        opt.step()
        sched.step()
    opt.add_param_group({"params": [nn.Parameter(mf.ones(1))], "lr": 0.5})
    for _ in range(fails_at - 1):
        opt.step()
        sched.step()
    with pytest.raises(ValueError, match=r"gives 2 lrs, one per parameter group it was built with, but the "
                                         r"optimizer has 3 groups"):
        sched.step()


def test_schedules_that_follow_the_groups_take_a_group_added_after_them():
    """StepLR (and the other chainable ones) scale every group's current lr: an added group is scaled too."""
    opt = _opt()
    sched = S.StepLR(opt, step_size=2, gamma=0.5)
    opt.add_param_group({"params": [nn.Parameter(mf.ones(1))], "lr": 0.5})
    for _ in range(2):
        opt.step()
        sched.step()
    assert sched.get_last_lr() == [BASES[0] * 0.5, BASES[1] * 0.5, 0.25]


def test_state_dict_taken_after_a_group_was_added_loads_into_a_scheduler_whose_optimizer_has_it_too():
    """A checkpoint taken once a group was added: the resumed optimizer gets the group before loading, the
    scheduler (built before it, as in the run saved) loads the three lrs (PyTorch's load takes any values)."""
    def run(steps, state=None):
        opt = _opt([nn.Parameter(mf.ones(2)), nn.Parameter(mf.ones(2))])
        sched = S.StepLR(opt, step_size=2, gamma=0.5)
        opt.add_param_group({"params": [nn.Parameter(mf.ones(1))], "lr": 0.5})
        if state is not None:
            opt.load_state_dict(state[0])
            sched.load_state_dict(state[1])
        for _ in range(steps):
            opt.step()
            sched.step()
        return opt, sched

    opt, sched = run(3)
    resumed = run(2, (opt.state_dict(), sched.state_dict()))[1]
    assert sched.get_last_lr() == [BASES[0] * 0.5, BASES[1] * 0.5, 0.25]
    assert resumed.last_epoch == 5 and resumed.get_last_lr() == [BASES[0] / 4, BASES[1] / 4, 0.125]
    with pytest.raises(ValueError, match=r"'_last_lr' must be like \[0.1, 0.05\], got \[0.1, 0.05, 0.5\]"):
        S.StepLR(_opt(), step_size=2).load_state_dict(sched.state_dict() | {"_last_lr": [0.1, 0.05, 0.5]})


def _warnings_of(fn):
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in seen if w.category is UserWarning]


def test_scheduler_step_before_the_optimizer_step_warns_once_as_pytorch():
    """PyTorch's rule: the first scheduler.step() after construction warns if optimizer.step() has not run since
    the optimizer got a scheduler (the old order skips the schedule's first value); later steps never do."""
    def loop(first, opt_step_before=False):
        opt = _opt()
        if opt_step_before:
            opt.step()  # (before the scheduler: does not count)
        sched = S.StepLR(opt, step_size=2)
        for _ in range(3):
            (sched.step(), opt.step()) if first == "scheduler" else (opt.step(), sched.step())
    assert _warnings_of(lambda: loop("optimizer")) == []
    for words in (_warnings_of(lambda: loop("scheduler")), _warnings_of(lambda: loop("scheduler", True))):
        assert len(words) == 1 and "lr_scheduler.step()` before `optimizer.step()" in words[0]
    opt = _opt()
    chained = S.ChainedScheduler([S.ConstantLR(opt, 0.5, 2), S.ExponentialLR(opt, 0.9)])
    assert len(_warnings_of(chained.step)) == 2  # (each chained scheduler's own first step)


def test_step_with_an_epoch_warns_of_its_deprecation_and_get_lr_outside_a_step_warns():
    opt = _opt()
    sched = S.StepLR(opt, step_size=2)
    opt.step()
    assert _warnings_of(sched.step) == []
    words = _warnings_of(lambda: sched.step(4))
    assert len(words) == 1 and words[0].startswith("The epoch parameter in `scheduler.step()` was not necessary")
    assert len(_warnings_of(lambda: S.ReduceLROnPlateau(opt).step(1.0, 3))) == 1
    warm = S.CosineAnnealingWarmRestarts(opt, T_0=3)
    assert _warnings_of(lambda: warm.step(0.5)) == []  # (its fractional epoch is the documented use)
    words = _warnings_of(sched.get_lr)
    assert words == ["To get the last learning rate computed by the scheduler, please use `get_last_lr()`."]
    assert _warnings_of(sched.get_last_lr) == []


def test_constant_lr_undoes_its_factor_with_pytorchs_rounding():
    """At total_iters the chainable form multiplies by 1 / factor (PyTorch's), which rounds differently from
    dividing by factor: 0.9 * 0.1 * (1 / 0.1) is 0.9000000000000001, and so is PyTorch's lr there."""
    opt = optim.SGD([nn.Parameter(mf.zeros(1))], lr=0.9)
    sched = S.ConstantLR(opt, factor=0.1, total_iters=2)
    for _ in range(2):
        opt.step()
        sched.step()
    assert sched.get_last_lr() == [0.9 * 0.1 * (1.0 / 0.1)] and 0.9 * 0.1 * (1.0 / 0.1) != 0.9


def test_step_lr_of_step_size_zero_builds_and_its_step_divides_by_zero():
    """PyTorch's StepLR(step_size=0) is built (lr unchanged at epoch 0); its first step raises ZeroDivisionError,
    leaving the lr as it was and last_epoch counted, as PyTorch's (so does a step to an explicit epoch)."""
    opt = _opt()
    sched = S.StepLR(opt, step_size=0)
    assert sched.last_epoch == 0 and sched.get_last_lr() == list(BASES)
    opt.step()
    with pytest.raises(ZeroDivisionError, match=r"StepLR: division by zero \(step_size is 0\)"):
        sched.step()
    assert sched.last_epoch == 1 and sched.get_last_lr() == [g["lr"] for g in opt.param_groups] == list(BASES)
    with pytest.warns(UserWarning), pytest.raises(ZeroDivisionError):
        sched.step(3)


def _lrs_of(make, steps=6):
    opt = optim.SGD([nn.Parameter(mf.zeros(1))], lr=1.0)
    sched, lrs = make(opt), [opt.param_groups[0]["lr"]]
    for _ in range(steps):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    return lrs


@pytest.mark.parametrize("make,expected", [  # PyTorch 2.13's lrs, step by step
    (lambda o: S.StepLR(o, step_size=-1, gamma=0.5), [1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625]),
    (lambda o: S.StepLR(o, step_size=-2, gamma=0.5), [1.0, 1.0, 0.5, 0.5, 0.25, 0.25, 0.125]),
    (lambda o: S.CosineAnnealingLR(o, T_max=-1), [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]),
    (lambda o: S.CosineAnnealingLR(o, T_max=-2, eta_min=0.1), [1.0, 0.55, 0.1, 0.55, 1.0, 0.55, 0.1]),
])
def test_negative_periods_run_pytorchs_formulas(make, expected):
    """PyTorch's StepLR and CosineAnnealingLR take a negative period and run their formulas on it."""
    np.testing.assert_allclose(_lrs_of(make), expected, rtol=1e-12, atol=1e-15)


def test_cosine_of_t_max_zero_builds_and_its_step_divides_by_zero():
    """PyTorch's CosineAnnealingLR(T_max=0) is built (lr unchanged at epoch 0); each step raises ZeroDivisionError,
    leaving the lr as it was and last_epoch counted, as there (so does a step to an explicit epoch)."""
    opt = optim.SGD([nn.Parameter(mf.zeros(1))], lr=0.5)
    sched = S.CosineAnnealingLR(opt, T_max=0, eta_min=0.1)
    assert sched.last_epoch == 0 and sched.get_last_lr() == [0.5]
    for epoch in (1, 2):
        opt.step()
        with pytest.raises(ZeroDivisionError, match=r"CosineAnnealingLR: division by zero \(T_max is 0\)"):
            sched.step()
        assert sched.last_epoch == epoch and sched.get_last_lr() == [0.5] == [opt.param_groups[0]["lr"]]
    with pytest.warns(UserWarning), pytest.raises(ZeroDivisionError):
        sched.step(3)


def _group_lrs(sched, opt, steps):
    """[lr of every group] after each of ``steps`` steps (floats: a tensor lr read as its value)."""
    out = []
    for _ in range(steps):
        opt.step()
        sched.step()
        assert [float(v) for v in sched.get_last_lr()] == [float(g["lr"]) for g in opt.param_groups]
        out.append([float(g["lr"]) for g in opt.param_groups])
    return out


def test_one_cycle_clones_a_tensor_max_lr_for_each_group():
    """A tensor max_lr is cloned for each group, as PyTorch's: the tensor given, filled after construction, leaves
    the schedule as it was (each group held that tensor itself). PyTorch 2.13's lrs (float32 tensors)."""
    opt = _opt()
    m = mf.tensor(0.3)
    sched = S.OneCycleLR(opt, m, total_steps=10)
    g0, g1 = opt.param_groups
    assert g0["max_lr"] is not m and g1["max_lr"] is not m and g0["max_lr"] is not g1["max_lr"]
    m.fill_(1.0)
    want = [0.15600000321865082, 0.30000001192092896, 0.2851454019546509, 0.2435237318277359]
    assert _group_lrs(sched, opt, 4) == [[v, v] for v in want]


@pytest.mark.parametrize("kwargs, want", [  # PyTorch 2.13's lrs after the 2nd and 3rd steps (float32 tensors)
    (dict(factor=mf.tensor(0.5)), [[0.05000000074505806, 0.02500000037252903],
                                   [0.02500000037252903, 0.012500000186264515]]),
    (dict(min_lr=mf.tensor(0.03)), [[0.029999999329447746] * 2] * 2),
    (dict(min_lr=[mf.tensor(0.03), 0.0]), [[0.029999999329447746, 0.005000000000000001],
                                           [0.029999999329447746, 0.0005000000000000001]]),
])
def test_plateau_takes_a_tensor_factor_and_min_lr(kwargs, want):
    """PyTorch's ReduceLROnPlateau takes a one-element tensor factor or min_lr (it raised a TypeError here): the lr
    it reduces to a tensor becomes one, filled in place from then on (a float floor keeps a float)."""
    opt = _opt()
    sched = S.ReduceLROnPlateau(opt, patience=0, **kwargs)
    sched.step(1.0)
    assert sched.get_last_lr() == list(BASES)
    got = []
    for _ in range(2):
        sched.step(1.0)
        got.append([float(v) for v in sched.get_last_lr()])
    assert got == want
    assert [isinstance(g["lr"], mf.Tensor) for g in opt.param_groups] == [True, "factor" in kwargs or
                                                                          not isinstance(kwargs["min_lr"], list)]


def test_cyclic_lr_step_size_up_zero_is_pytorchs_zero_division_error():
    """PyTorch's CyclicLR(step_size_up=0) fails in its constructor with a ZeroDivisionError; here the error is that
    and a ValueError naming the argument, the optimizer's lrs untouched."""
    opt = _opt()
    for down in (None, 3):
        with pytest.raises(ZeroDivisionError, match="CyclicLR: expected step_size_up > 0 and step_size_down >= 0, "
                                                    f"got 0 and {down}"):
            S.CyclicLR(opt, 0.01, 0.1, step_size_up=0, step_size_down=down)
    assert [g["lr"] for g in opt.param_groups] == list(BASES)


@pytest.mark.parametrize("opt_name, make", [
    ("Adagrad", lambda o: S.CyclicLR(o, 0.01, 0.1)),  # no momentum to cycle
    ("SGD", lambda o: S.CyclicLR(o, 0.01, 0.1, mode="tri")),
    ("SGD", lambda o: S.CyclicLR(o, 0.01, 0.1, base_momentum=[0.8])),
    ("Adagrad", lambda o: S.OneCycleLR(o, 0.1, total_steps=10)),
    ("SGD", lambda o: S.OneCycleLR(o, 0.1, total_steps=10, max_momentum=[0.9, 0.9, 0.9])),
])
def test_cyclic_and_one_cycle_refused_leave_the_groups_as_they_were(opt_name, make):
    """A bad argument of CyclicLR / OneCycleLR raises before any group changes (PyTorch's had set the base lrs, or
    initial_lr / max_lr / min_lr, by then)."""
    a, b = nn.Parameter(mf.ones(3)), nn.Parameter(mf.ones(2))
    opt = getattr(optim, opt_name)([{"params": [a]}, {"params": [b], "lr": BASES[1]}], lr=BASES[0])
    before = [dict(g) for g in opt.param_groups]
    with pytest.raises(ValueError):
        make(opt)
    assert [dict(g) for g in opt.param_groups] == before


# PyTorch 2.13's lrs and momenta (AdamW's beta1 / SGD's momentum) of both groups after steps 3, 12, 24 and 33
_CYCLED = {
    "OneCycleLR_three_phase_linear_AdamW": (
        "AdamW", lambda o: S.OneCycleLR(o, max_lr=[0.3, 0.1], total_steps=41, three_phase=True,
                                        anneal_strategy="linear", base_momentum=0.8, max_momentum=[0.9, 0.99]),
        {3: ([0.08846017699115044, 0.029486725663716816], [0.8734513274336283, 0.9395575221238938]),
         12: ([0.2821592920353982, 0.09405309734513274], [0.8061946902654867, 0.8117699115044248]),
         24: ([0.011034579310344827, 0.0036781931034482757], [0.9, 0.99]),
         33: ([0.004828303448275862, 0.0016094344827586207], [0.9, 0.99])}),
    "CyclicLR_exp_range_SGD": (
        "SGD", lambda o: S.CyclicLR(o, 0.01, 0.1, step_size_up=5, mode="exp_range", gamma=0.97),
        {3: ([0.05928434200000001] * 2, [0.8452396200000001] * 2),
         12: ([0.03497832499583579] * 2, [0.8722463055601825] * 2),
         24: ([0.044662039977644084] * 2, [0.8614866222470622] * 2),
         33: ([0.029763369510498405] * 2, [0.8780407005438907] * 2)}),
}


@pytest.mark.parametrize("name", list(_CYCLED))
def test_cycled_lrs_and_momenta_resumed_mid_run_are_pytorchs(name):
    """Both groups' lrs and momenta, bit for bit PyTorch's, through a state-dict round trip at step 17 into a fresh
    optimizer and scheduler (built first, then the optimizer's state loaded, then the scheduler's)."""
    opt_name, make, want = _CYCLED[name]

    def fresh():
        a, b = nn.Parameter(mf.ones(3)), nn.Parameter(mf.ones(2))
        kw = {"momentum": 0.9} if opt_name == "SGD" else {}
        opt = getattr(optim, opt_name)([{"params": [a]}, {"params": [b], "lr": BASES[1]}], lr=BASES[0], **kw)
        return opt, make(opt)

    opt, sched = fresh()
    key = "betas" if opt_name == "AdamW" else "momentum"
    for step in range(1, 34):
        opt.step()
        sched.step()
        if step == 17:
            state, opt_state = sched.state_dict(), opt.state_dict()
            opt, sched = fresh()
            opt.load_state_dict(opt_state)
            sched.load_state_dict(state)
        if step in want:
            moms = [g[key][0] if key == "betas" else g[key] for g in opt.param_groups]
            assert (sched.get_last_lr(), moms) == want[step], step
    assert sched.last_epoch == 33 and [g["lr"] for g in opt.param_groups] == sched.get_last_lr()


def test_one_cycle_phase_of_no_length_names_it():
    """A phase that starts and ends at the same step divides by zero in PyTorch's (a bare ZeroDivisionError, at the
    same step): pct_start 1 makes the annealing phase one after the last step, three phases over 2 steps the
    first."""
    match = r"OneCycleLR: step {} falls in phase {} of the schedule, which has no length"
    opt = _opt()
    sched = S.OneCycleLR(opt, 0.1, total_steps=10, pct_start=1.0)
    for _ in range(9):
        opt.step()
        sched.step()
    assert sched.get_last_lr() == pytest.approx([0.1, 0.1], rel=1e-12)  # the peak, at the last step
    opt.step()
    with pytest.raises(ZeroDivisionError, match=match.format(10, 2)):
        sched.step()
    with pytest.raises(ZeroDivisionError, match=match.format(0, 1)):
        S.OneCycleLR(_opt(), 0.1, total_steps=2, pct_start=0.5, three_phase=True)
