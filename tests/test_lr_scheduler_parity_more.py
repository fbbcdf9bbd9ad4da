"""More parity of optim.lr_scheduler and optim.swa_utils with PyTorch's rules: the rounding of the averages that
AveragedModel keeps (exact rational references), schedules with arguments kept as given, long schedules against
their documented formulas, a custom scheduler's chainable and closed forms, the warnings of a misused step, and
the kinds of error PyTorch's raise for bad arguments."""
import math
from fractions import Fraction

import numpy as np
import pytest

import minifused as mf
from minifused import backend, nn, optim
from minifused.optim import lr_scheduler as S
from minifused.optim import swa_utils as swa
from test_lr_scheduler import _lrs, _warnings_of as _user_warnings


@pytest.fixture(autouse=True)
def _cpu_by_default(monkeypatch):
    monkeypatch.setattr(backend, "default_device", lambda: backend.CPU)


def _round(exact, dtype):
    """The float of ``dtype`` nearest the rational ``exact`` (ties to even): a correctly rounded reference."""
    if dtype == np.float64:
        return np.float64(float(exact))  # (Fraction's float is correctly rounded)
    guess = np.float32(float(exact))
    cands = [np.nextafter(guess, np.float32(-np.inf)), guess, np.nextafter(guess, np.float32(np.inf))]
    dist = [abs(Fraction(float(c)) - exact) for c in cands]
    best = min(dist)
    ties = [c for c, d in zip(cands, dist) if d == best]
    return min(ties, key=lambda c: int(c.view(np.int32)) & 1)


def _lerp_reference(avg, cur, weight, dtype):
    """PyTorch's lerp on CPU (and CUDA): in the parameters' dtype, d = cur - avg rounded, then one fused
    multiply-add: fma(w, d, avg) for w < 0.5, else fma(w - 1, d, cur), w being the weight in that dtype."""
    w = dtype(weight)
    out = []
    for a, c in zip(avg.tolist(), cur.tolist()):
        a, c = dtype(a), dtype(c)
        d = Fraction(float(dtype(c - a)))
        coeff, base = (Fraction(float(w)), a) if w < 0.5 else (Fraction(float(dtype(w - dtype(1)))), c)
        out.append(_round(coeff * d + Fraction(float(base)), dtype))
    return np.array(out, dtype=dtype)


def _linear(dtype, seed):
    mf.manual_seed(seed)
    return nn.Linear(16, 8).to(dtype)


def _set_params(model, rng, dtype, scale):
    for p in model.parameters():
        p.data = mf.tensor((rng.standard_normal(p.shape) * scale).astype(dtype))


def _flat(module):
    return np.concatenate([p.detach().numpy().ravel() for p in module.parameters()])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("decay", [0.9, 0.3])
def test_ema_average_is_lerp_rounded_once(dtype, decay):
    """get_ema_multi_avg_fn: ema = lerp(ema, model, 1 - decay), whose CPU kernel rounds a fused multiply-add
    once; each step is checked against the exact rational value rounded to the dtype."""
    rng = np.random.default_rng(1)
    model = _linear(mf.float32 if dtype == np.float32 else mf.float64, 0)
    ema = swa.AveragedModel(model, multi_avg_fn=swa.get_ema_multi_avg_fn(decay))
    for step in range(4):
        _set_params(model, rng, dtype, scale=10.0 ** (step - 2))
        before = _flat(ema.module)
        ema.update_parameters(model)
        got = _flat(ema.module)
        if step == 0:
            np.testing.assert_array_equal(got, _flat(model))  # the first update copies
        else:
            np.testing.assert_array_equal(got, _lerp_reference(before, _flat(model), 1 - decay, dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_swa_default_on_cpu_is_pytorchs_per_tensor_formula(dtype):
    """Without avg_fn / multi_avg_fn, PyTorch's AveragedModel on CPU (no foreach kernels there) uses
    get_swa_avg_fn per tensor: avg + (model - avg) / (n + 1), each operation rounded to the parameters' dtype
    (a lerp rounds otherwise). Over 12 updates of 136 values some element shows the difference."""
    rng = np.random.default_rng(2)
    model = _linear(mf.float32 if dtype == np.float32 else mf.float64, 0)
    avg = swa.AveragedModel(model)
    want = None
    for n in range(12):
        _set_params(model, rng, dtype, scale=1.0)
        avg.update_parameters(model)
        cur = _flat(model)
        want = cur.copy() if n == 0 else want + (cur - want) / dtype(n + 1)
        np.testing.assert_array_equal(_flat(avg.module), want)
    assert int(avg.n_averaged.item()) == 12


def test_swa_multi_avg_fn_weight_from_a_tensor_count_is_float32():
    """get_swa_multi_avg_fn's weight is 1 / (n + 1); with the count a tensor (what AveragedModel passes) that is
    an integer tensor's true division, in the default dtype: float32 even for float64 parameters. With a Python
    count it stays a double."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal(40)
    c = rng.standard_normal(40)
    for count, weight in ((mf.tensor(2), float(np.float32(1 / 3))), (2, 1 / 3)):
        avg = [mf.tensor(a.copy())]
        swa.get_swa_multi_avg_fn()(avg, [mf.tensor(c)], count)
        np.testing.assert_array_equal(avg[0].numpy(), _lerp_reference(a, c, weight, np.float64))
    assert float(np.float32(1 / 3)) != 1 / 3


def test_ema_of_half_parameters_rounds_in_float32_then_half():
    """16-bit parameters: lerp in float32 (PyTorch's accumulation type), rounded once there, then to half."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal(64).astype(np.float16)
    c = rng.standard_normal(64).astype(np.float16)
    avg = [mf.tensor(a)]
    swa.get_ema_multi_avg_fn(0.75)(avg, [mf.tensor(c)], 1)
    want = _lerp_reference(a.astype(np.float32), c.astype(np.float32), 0.25, np.float32).astype(np.float16)
    np.testing.assert_array_equal(avg[0].numpy(), want)


def test_averaged_model_errors_of_pytorchs_kinds():
    model = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2))
    with pytest.raises(AssertionError, match="AveragedModel: only one of avg_fn and multi_avg_fn"):
        swa.AveragedModel(model, avg_fn=swa.get_swa_avg_fn(), multi_avg_fn=swa.get_swa_multi_avg_fn())
    for make in (swa.get_ema_avg_fn, swa.get_ema_multi_avg_fn):
        with pytest.raises(TypeError, match="Invalid decay value '0.5'"):
            make("0.5")
    avg = swa.AveragedModel(model)
    avg.update_parameters(model)
    with pytest.raises(RuntimeError, match=r"#0 has shape \(3, 2\), expected \(3, 4\)"):
        avg.update_parameters(nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 2)))
    with pytest.raises(RuntimeError, match="the model has 2 parameters, the averaged model 4"):
        avg.update_parameters(nn.Linear(4, 3))
    custom = swa.AveragedModel(model, avg_fn=lambda a, b, n: 0.5)
    custom.update_parameters(model)
    with pytest.raises(TypeError, match="avg_fn must return a tensor, got float"):
        custom.update_parameters(model)
    assert int(avg.n_averaged.item()) == 1 and int(custom.n_averaged.item()) == 1


def _steps(sched, opt, n):
    for _ in range(n):
        opt.step()
        sched.step()
    return opt.param_groups[0]["lr"]


def _sgd(lr=0.1, groups=1):
    return optim.SGD([{"params": [nn.Parameter(mf.zeros(2))]} for _ in range(groups)], lr=lr, momentum=0.9)


def test_number_arguments_are_kept_as_given():
    """PyTorch's schedulers keep gamma, eta_min, CyclicLR's lrs and momenta and SWALR's swa_lr as given: a NumPy
    float32 gamma computes the lrs in float32 (NumPy's rule for a float32 times a Python float), a tensor gamma
    or lr turns the group's lr into a tensor (float32 here)."""
    opt = _sgd()
    lr = _steps(S.ExponentialLR(opt, gamma=np.float32(0.9)), opt, 5)
    want = np.float32(0.1) * np.float32(0.9) ** 5
    assert type(lr) is np.float32 and lr == want and float(want) != 0.1 * 0.9 ** 5
    opt = _sgd()
    lr = _steps(S.StepLR(opt, 2, gamma=mf.tensor(0.5)), opt, 4)
    assert isinstance(lr, mf.Tensor) and lr.item() == float(np.float32(0.1) * np.float32(0.25))
    opt = _sgd()
    lr = _steps(S.CosineAnnealingLR(opt, 4, eta_min=np.float32(0.01)), opt, 4)
    assert type(lr) is np.float32 and lr == np.float32(0.01)
    opt, base = _sgd(), mf.tensor(0.01)
    sched = S.CyclicLR(opt, base_lr=base, max_lr=0.1, step_size_up=2)
    lr = opt.param_groups[0]["lr"]
    assert isinstance(lr, mf.Tensor) and lr is not base and sched.base_lrs[0] is not base
    assert _steps(sched, opt, 2).item() == pytest.approx(0.1, rel=1e-7)
    opt = _sgd(groups=2)
    sched = swa.SWALR(opt, swa_lr=[mf.tensor(0.02), 0], anneal_epochs=3)
    assert isinstance(opt.param_groups[0]["swa_lr"], mf.Tensor) and type(opt.param_groups[1]["swa_lr"]) is int
    _steps(sched, opt, 3)
    assert sched.get_last_lr()[0].item() == float(np.float32(0.02)) and sched.get_last_lr()[1] == 0


@pytest.mark.parametrize("make", [
    lambda o: S.StepLR(o, 2, gamma="0.5"),
    lambda o: S.CyclicLR(o, "0.01", 0.1),
    lambda o: S.CyclicLR(o, 0.01, [0.1, None]),
    lambda o: S.CyclicLR(o, 0.01, 0.1, gamma="1"),
    lambda o: S.OneCycleLR(o, 0.1, total_steps=10, base_momentum="0.8"),
    lambda o: swa.SWALR(o, swa_lr="0.05"),
])
def test_arguments_that_are_no_numbers_are_type_errors(make):
    """PyTorch's fail in the arithmetic with such an argument (a TypeError), some at a later step; here at once,
    naming the scheduler and the argument."""
    with pytest.raises(TypeError, match=r"(CyclicLR|StepLR|OneCycleLR|SWALR): .*(number|gamma)"):
        make(_sgd(groups=2))


def test_cyclic_lr_with_step_size_down_zero_is_a_sawtooth():
    """step_size_down=0 (PyTorch's takes it): the rise takes the whole cycle, x = t / up - floor(t / up), and the
    lr falls back to base_lr at once; the momentum mirrors it."""
    opt = _sgd()
    sched = S.CyclicLR(opt, 0.01, 0.09, step_size_up=4, step_size_down=0, base_momentum=0.8, max_momentum=0.9)
    moms = [opt.param_groups[0]["momentum"]]
    lrs = [sched.get_last_lr()[0]]
    for _ in range(11):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
        moms.append(opt.param_groups[0]["momentum"])
    x = np.array([(t % 4) / 4 for t in range(12)])
    np.testing.assert_allclose(lrs, 0.01 + 0.08 * x, rtol=1e-14)
    np.testing.assert_allclose(moms, 0.9 - 0.1 * x, rtol=1e-14)
    for up, down in ((0, 3), (2, -1), (-2, None)):
        with pytest.raises(ValueError, match="CyclicLR: expected step_size_up > 0 and step_size_down >= 0"):
            S.CyclicLR(_sgd(), 0.01, 0.1, step_size_up=up, step_size_down=down)


def test_multistep_and_sequential_take_milestones_in_an_array():
    """A NumPy array of milestones (np.arange, a config's array) works as PyTorch's: the lr times gamma ** k
    after k milestones reached; SequentialLR keeps the array as given."""
    opt = _sgd()
    got = _lrs(S.MultiStepLR(opt, np.array([2, 5, 5]), gamma=0.5), opt, 7)
    np.testing.assert_allclose(got, [0.1 * 0.5 ** ((t >= 2) + 2 * (t >= 5)) for t in range(8)], rtol=1e-15)
    opt = _sgd()
    ms = np.array([3])
    seq = S.SequentialLR(opt, [S.ConstantLR(opt, 0.5, 10), S.ExponentialLR(opt, 0.5)], ms)
    assert seq._milestones is ms
    np.testing.assert_allclose(_lrs(seq, opt, 5), [0.05, 0.05, 0.05, 0.1, 0.05, 0.025], rtol=1e-15)


def test_sequential_restarting_a_composite_says_why_it_cannot():
    """PyTorch's SequentialLR restarts the scheduler of a milestone through its lr formula; a SequentialLR or
    ChainedScheduler has none (PyTorch's raise a bare NotImplementedError): the error names it."""
    opt = _sgd()
    inner = S.ChainedScheduler([S.ExponentialLR(opt, 0.9), S.StepLR(opt, 2)])
    seq = S.SequentialLR(opt, [S.ConstantLR(opt, 0.5, 10), inner], [2])
    _lrs(seq, opt, 1)
    opt.step()
    with pytest.raises(NotImplementedError, match="ChainedScheduler has no lr formula of its own"):
        seq.step()


@pytest.mark.parametrize("make,exc,words", [
    (lambda o: S.OneCycleLR(None, 0.1, 10), TypeError, "NoneType is not an Optimizer"),
    (lambda o: S.OneCycleLR(o, 0.1, "10"), TypeError, "OneCycleLR: expected a positive integer total_steps, got '10'"),
    (lambda o: S.OneCycleLR(o, 0.1, 10.0), ValueError, "OneCycleLR: expected a positive integer total_steps"),
    (lambda o: S.OneCycleLR(o, 0.1, epochs="2", steps_per_epoch=3), ValueError, "positive integer epochs, got '2'"),
    (lambda o: S.CosineAnnealingWarmRestarts(o, "2"), TypeError, "expected a positive integer T_0, got '2'"),
    (lambda o: S.CosineAnnealingWarmRestarts(o, 2, None), TypeError, "expected an integer T_mult >= 1, got None"),
    (lambda o: S.CosineAnnealingWarmRestarts(o, 2, 1.5), ValueError, "expected an integer T_mult >= 1, got 1.5"),
    (lambda o: S.OneCycleLR(o, 0.1, epochs=3), ValueError, "give total_steps, or epochs and steps_per_epoch; got "
                                                           "total_steps=None, epochs=3, steps_per_epoch=None"),
    (lambda o: S.OneCycleLR(optim.Adagrad(o.param_groups[0]["params"]), 0.1, 10), ValueError,
     "OneCycleLR: optimizer must support momentum or beta1 .* Adagrad has neither"),
])
def test_bad_arguments_raise_pytorchs_kind(make, exc, words):
    """The kind PyTorch's raises: a TypeError where its check compares the argument first (a string or None),
    a ValueError where it tests the type first or the value is out of range."""
    with pytest.raises(exc, match=words):
        make(_sgd())




def test_a_step_set_on_the_optimizer_as_pytorchs_wrapper_sees_it():
    """PyTorch's schedulers wrap ``optimizer.step`` to note its calls: a step set on the optimizer before the
    scheduler is wrapped too (its calls count); one set after it is not, and the scheduler's first step warns
    that it was overridden (not that the order is wrong). Later steps do not warn."""
    import types

    def loop(before, after):
        opt = _sgd()
        if before:
            opt.step = types.MethodType(lambda self: None, opt)
        sched = S.StepLR(opt, 2)
        if after:
            opt.step = types.MethodType(lambda self: None, opt)
        for _ in range(3):
            opt.step()
            sched.step()
    assert _user_warnings(lambda: loop(True, False)) == []
    words = _user_warnings(lambda: loop(False, True))
    assert len(words) == 1 and words[0].startswith("Seems like `optimizer.step()` has been overridden after")
    assert _user_warnings(lambda: loop(False, False)) == []


class _Halving(S.LRScheduler):
    """A custom schedule, PyTorch's way: the chainable get_lr (from the lr in force) and a closed form."""

    def get_lr(self):
        if self.last_epoch == 0:
            return [g["lr"] for g in self.optimizer.param_groups]
        return [g["lr"] / 2 for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base / 2 ** self.last_epoch for base in self.base_lrs]


def test_custom_scheduler_chainable_closed_form_and_resume():
    """The base's rules (PyTorch's): construction is step 0; step() adds one to last_epoch and sets get_lr();
    step(epoch) sets the closed form at that epoch (with the deprecation warning); last_epoch >= 0 needs each
    group's initial_lr (a KeyError naming the group) and resumes from the lr in force."""
    opt = _sgd(groups=2)
    opt.param_groups[1]["lr"] = 0.4
    sched = _Halving(opt)
    assert sched.get_last_lr() == [0.1, 0.4] and sched.base_lrs == [0.1, 0.4]
    assert _lrs(sched, opt, 3)[-1] == 0.1 / 8
    words = _user_warnings(lambda: sched.step(1))
    assert len(words) == 1 and words[0].startswith("The epoch parameter in `scheduler.step()`")
    assert sched.get_last_lr() == [0.05, 0.2] and sched.last_epoch == 1
    opt.step()
    sched.step()
    assert sched.get_last_lr() == [0.025, 0.1]
    with pytest.raises(KeyError, match=r"_Halving: param 'initial_lr' is not specified in param_groups\[0\].*"
                                       r"last_epoch=4"):
        _Halving(_sgd(), last_epoch=4)
    resumed = _Halving(opt, last_epoch=sched.last_epoch)  # (the groups have initial_lr from the first one)
    assert resumed.last_epoch == 3 and resumed.get_last_lr() == [0.0125, 0.05]
    with pytest.raises(NotImplementedError, match="LRScheduler.get_lr: a scheduler defines get_lr"):
        S.LRScheduler(_sgd())


def test_cosine_annealing_recursive_form_follows_the_closed_form_over_many_periods():
    """CosineAnnealingLR's chainable form (PyTorch's recursion, with its restart term at t = T_max + 1 + 2kT_max)
    keeps to eta_min + (base - eta_min)(1 + cos(pi t / T_max)) / 2 past T_max, for 400 steps (10 periods),
    per group; step(epoch) gives the closed form itself."""
    opt = _sgd(groups=2)
    opt.param_groups[1]["lr"] = 0.05
    sched = S.CosineAnnealingLR(opt, T_max=37, eta_min=0.001)
    seq = [sched.get_last_lr()]
    for _ in range(400):
        opt.step()
        sched.step()
        seq.append(sched.get_last_lr())
    want = [[0.001 + (b - 0.001) * (1 + math.cos(math.pi * t / 37)) / 2 for b in (0.1, 0.05)] for t in range(401)]
    np.testing.assert_allclose(seq, want, rtol=1e-12)
    _user_warnings(lambda: sched.step(123))
    assert sched.get_last_lr() == pytest.approx(want[123], rel=1e-15)


def test_one_cycle_three_phase_linear_over_300_steps():
    """OneCycleLR(three_phase, linear), PyTorch's phases: the lr rises from max_lr / div_factor to max_lr over
    steps [0, pct * total - 1], falls back over [.., 2 pct * total - 2], then to initial_lr / final_div_factor
    at total - 1; the momentum goes max -> base -> max, then stays. PyTorch's refuses a step past total_steps
    only (last_epoch > total_steps): step total_steps itself extends the last phase's line."""
    opt = _sgd()
    total, pct = 300, 0.25
    sched = S.OneCycleLR(opt, 0.3, total_steps=total, three_phase=True, anneal_strategy="linear", pct_start=pct)
    got = [(sched.get_last_lr()[0], opt.param_groups[0]["momentum"])]
    for _ in range(total - 1):
        opt.step()
        sched.step()
        got.append((sched.get_last_lr()[0], opt.param_groups[0]["momentum"]))
    lo, hi = 0.3 / 25, 0.3
    ends = [pct * total - 1, 2 * pct * total - 2, total - 1]

    def at(t):
        start = 0.0
        for end, (a, b), (ma, mb) in zip(ends, [(lo, hi), (hi, lo), (lo, lo / 1e4)],
                                         [(0.95, 0.85), (0.85, 0.95), (0.95, 0.95)]):
            if t <= end or end == ends[-1]:
                f = (t - start) / (end - start)
                return a + (b - a) * f, ma + (mb - ma) * f
            start = end
    np.testing.assert_allclose(got, [at(t) for t in range(total)], rtol=1e-11)
    opt.step()
    sched.step()
    assert sched.get_last_lr()[0] == pytest.approx(at(total)[0], rel=1e-9) and at(total)[0] < lo / 1e4
    opt.step()
    with pytest.raises(ValueError, match="OneCycleLR: tried to step 301 times, more than total_steps=300"):
        sched.step()


@pytest.mark.parametrize("make,words", [
    (lambda o: S.CyclicLR(o, [0.01], 0.1), "CyclicLR: base_lr must have the same length as optimizer.param_groups: "
                                           "base_lr has 1 values, param_groups has 2"),
    (lambda o: S.OneCycleLR(o, 0.1, 10, base_momentum=(0.8, 0.8, 0.8)), "OneCycleLR: base_momentum must have"),
])
def test_one_value_per_group_or_a_value_error_naming_the_scheduler(make, words):
    with pytest.raises(ValueError, match=words):
        make(_sgd(groups=2))


@pytest.mark.parametrize("make", [
    lambda o: S.StepLR(o, 3), lambda o: S.ExponentialLR(o, 0.9), lambda o: S.MultiplicativeLR(o, lambda e: 0.9),
    lambda o: S.CyclicLR(o, 0.01, 0.1), lambda o: swa.SWALR(o, 0.01),
])
def test_step_with_an_epoch_that_is_no_number(make):
    """step(epoch) takes a number (PyTorch's fails in the schedule's arithmetic with a raw TypeError, or keeps a
    string as last_epoch); the TypeError names the scheduler's step, and nothing changed."""
    opt = _sgd()
    sched = make(opt)
    before = sched.state_dict()
    opt.step()
    for bad in ("3", [1], {"epoch": 1}):
        with pytest.raises(TypeError, match=rf"{type(sched).__name__}\.step: expected a number epoch, got "):
            _user_warnings(lambda: sched.step(bad))
    assert sched.state_dict() == before


def test_lerp_branch_is_chosen_on_the_weight_in_the_accumulation_dtype():
    """lerp's branch (w < 0.5 or not) is PyTorch's test on the weight converted to the accumulation dtype: a
    weight just below 0.5 that float32 rounds to 0.5 takes the second branch, fma(w - 1, d, cur)."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal(300).astype(np.float32)
    c = rng.standard_normal(300).astype(np.float32)
    weight = 0.4999999999
    assert np.float32(weight) == 0.5
    avg = [mf.tensor(a)]
    swa.get_ema_multi_avg_fn(1 - weight)(avg, [mf.tensor(c)], 1)
    np.testing.assert_array_equal(avg[0].numpy(), _lerp_reference(a, c, 1 - (1 - weight), np.float32))


@pytest.mark.parametrize("total_iters", [0, -3])
def test_polynomial_lr_with_no_iterations_leaves_the_lr(total_iters):
    """PyTorch's chainable PolynomialLR leaves the lr as it is once last_epoch > total_iters: with total_iters 0
    (or less) it never decays. Its closed form (step(epoch)) divides by total_iters: for 0, a ZeroDivisionError
    that names the scheduler; LinearLR's likewise."""
    opt = _sgd()
    sched = S.PolynomialLR(opt, total_iters=total_iters, power=2.0)
    assert _lrs(sched, opt, 6) == [0.1] * 7
    if total_iters == 0:
        for s in (sched, S.LinearLR(_sgd(), 0.5, 1.0, total_iters=0)):
            with pytest.raises(ZeroDivisionError, match=rf"{type(s).__name__}.step\(epoch\): the closed form"):
                _user_warnings(lambda: s.step(3))
    with pytest.raises(TypeError, match="PolynomialLR: expected a number total_iters, got '5'"):
        S.PolynomialLR(_sgd(), total_iters="5")


def test_float64_lerp_near_the_largest_floats_stays_finite():
    """The float64 single rounding splits the factors (Dekker); for values near the largest double the split
    overflows, and the average falls back to the twice-rounded lerp: finite, within an ulp, no warnings."""
    import warnings

    a = np.array([1e305, -1.5e308, 3.0])
    c = np.array([-1e305, 1e307, 5.0])
    avg = [mf.tensor(a.copy())]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        swa.get_ema_multi_avg_fn(0.75)(avg, [mf.tensor(c)], 1)
    np.testing.assert_allclose(avg[0].numpy(), [5e304, -1.1e308, 3.5], rtol=1e-15)


def test_pytorchs_public_helpers_sequential_recursive_undo_and_swalr_anneal_func():
    """SequentialLR.recursive_undo(sched) takes back one construction step (of each scheduler a composite holds);
    SWALR.anneal_func is its curve ((1 - cos(pi t)) / 2, or t), kept out of the state dict, as PyTorch's."""
    opt = _sgd()
    inner = S.ChainedScheduler([S.ExponentialLR(opt, 0.9), S.StepLR(opt, 2)])
    seq = S.SequentialLR(opt, [S.ConstantLR(opt, 0.5, 10), inner], [4])
    epochs = [s.last_epoch for s in inner._schedulers]
    seq.recursive_undo(inner)
    assert [s.last_epoch for s in inner._schedulers] == [e - 1 for e in epochs]
    cos, lin = swa.SWALR(_sgd(), 0.01), swa.SWALR(_sgd(), 0.01, anneal_strategy="linear")
    assert cos.anneal_func(0.25) == pytest.approx((1 - math.cos(math.pi / 4)) / 2, rel=1e-15)
    assert lin.anneal_func(0.25) == 0.25 and "anneal_func" not in cos.state_dict()
