"""Adafactor and Muon against float64 NumPy versions of PyTorch's updates written here (Muon's Newton-Schulz
iteration rounded to bfloat16 where PyTorch's runs in bfloat16), with lr schedules through ``param_groups``; their
state names and shapes, state dicts (round trips, PyTorch's layout), argument checks and refusals."""
import math

import ml_dtypes
import numpy as np
import pytest

import minifused as mf
from minifused import backend, nn, optim


@pytest.fixture(autouse=True)
def _cpu_by_default(monkeypatch):
    monkeypatch.setattr(backend, "default_device", lambda: backend.CPU)


def _problem(shapes, steps, seed=0, grad_scale=1.0):
    rng = np.random.default_rng(seed)
    w0 = [rng.standard_normal(s) for s in shapes]
    grads = [[rng.standard_normal(s) * rng.uniform(0.2, 2.0) * grad_scale for s in shapes] for _ in range(steps)]
    return w0, grads


def _run(name, kw, w0, grads, dtype, lrs=None, **extra):
    """minifused's weights (float64) after each step; ``lrs``: the lr set in every group before each step."""
    params = [nn.Parameter(mf.tensor(w.astype(dtype))) for w in w0]
    opt = getattr(optim, name)(params, **kw, **extra)
    out = []
    for t, g in enumerate(grads):
        if lrs is not None:
            for group in opt.param_groups:
                group["lr"] = lrs[t]
        for p, gi in zip(params, g):
            p.grad = mf.tensor(gi.astype(dtype))
        opt.step()
        out.append([p.detach().numpy().astype(np.float64) for p in params])
    return out, opt, params


# ================================================================ Adafactor
def _f64_adafactor(w, gs, lrs, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, maximize=False,
                   eps1_of=np.float64, foreach=None):
    """PyTorch's Adafactor in float64 (RMS written as the root of the mean square): the weights after each
    step."""
    eps1 = ml_dtypes.finfo(eps1_of).eps if eps[0] is None else eps[0]
    w = w.copy()
    factored = w.ndim > 1
    if factored:
        row, col = np.zeros(w.shape[:-1] + (1,)), np.zeros(w.shape[:-2] + (1, w.shape[-1]))
    else:
        var = np.zeros_like(w)
    for t, (g, lr) in enumerate(zip(gs, lrs), 1):
        g = -g if maximize else g
        decay = t ** beta2_decay  # 1 - beta2_t
        alpha = max(eps[1], math.sqrt(np.mean(w * w))) * min(lr, 1 / math.sqrt(t))
        w = w * (1 - lr * weight_decay)
        if factored:
            row = row + decay * (np.mean(g * g, axis=-1, keepdims=True) - row)
            col = col + decay * (np.mean(g * g, axis=-2, keepdims=True) - col)
            v = row * col / np.maximum(np.mean(row, axis=-2, keepdims=True), eps1)
        else:
            var = var + decay * (g * g - var)
            v = var
        u = g / np.sqrt(np.maximum(v, eps1 * eps1))
        w = w - alpha / max(1.0, math.sqrt(np.mean(u * u)) / d) * u
        yield w


SHAPES = [(3, 4), (5,), (), (2, 3, 4), (4, 2)]
LRS = [0.05, 0.3, 0.02, 0.1, 0.6, 0.01]
ADAFACTOR = [
    dict(),
    dict(lr=0.5, weight_decay=0.1),
    dict(lr=0.2, maximize=True, d=1.5, beta2_decay=-0.5),
    dict(lr=0.3, eps=(1e-3, 1e-2), weight_decay=0.05, foreach=True),
]


def _adafactor_reference(kw, w0, grads, lrs, eps1_of=np.float64):
    lrs = lrs or [kw.get("lr", 1e-2)] * len(grads)
    runs = [list(_f64_adafactor(w, [g[i] for g in grads], lrs, eps1_of=eps1_of, **{k: v for k, v in kw.items()
                                                                                   if k != "lr"}))
            for i, w in enumerate(w0)]
    return [[run[t] for run in runs] for t in range(len(grads))]


def _resume(opt, params, grads, expected):
    """Steps of a reloaded optimizer over the remaining gradients: it ends where the uninterrupted run did."""
    for g in grads:
        for p, gi in zip(params, g):
            p.grad = mf.tensor(gi.astype(np.float32))
        opt.step()
    for p, w in zip(params, expected):
        np.testing.assert_array_equal(p.numpy(), w.astype(np.float32))


@pytest.mark.parametrize("lrs", [None, LRS], ids=["fixed_lr", "lr_schedule"])
@pytest.mark.parametrize("kw", ADAFACTOR, ids=[str(i) for i in range(len(ADAFACTOR))])
def test_adafactor_float64_steps_follow_pytorchs_formulas(kw, lrs):
    """2-D, 1-D, 0-d and 3-D parameters (the last factored over its last two axes), six steps."""
    w0, grads = _problem(SHAPES, 6)
    got, _, _ = _run("Adafactor", kw, w0, grads, np.float64, lrs)
    for g_step, w_step in zip(got, _adafactor_reference(kw, w0, grads, lrs)):
        for g, w in zip(g_step, w_step):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kw", ADAFACTOR, ids=[str(i) for i in range(len(ADAFACTOR))])
def test_adafactor_float32_steps_within_1e6_of_float64(kw):
    """float32 parameters (epsilon1 None: float32's machine epsilon) against the float64 formulas."""
    w0, grads = _problem(SHAPES, 6, seed=1)
    w0 = [w.astype(np.float32).astype(np.float64) for w in w0]
    grads = [[g.astype(np.float32).astype(np.float64) for g in step] for step in grads]
    got, _, _ = _run("Adafactor", kw, w0, grads, np.float32)
    for g_step, w_step in zip(got, _adafactor_reference(kw, w0, grads, None, eps1_of=np.float32)):
        for g, w in zip(g_step, w_step):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("eps", [(1e-3, 1e-3), (None, 1e-3)])
def test_adafactor_epsilon1_floors_small_second_moments(eps):
    """Gradients of 1e-4: their second moments (1e-8) fall under epsilon1 squared (1e-6), which then sets the
    update's denominator (and, factored, the row mean's floor); None is float64's machine epsilon."""
    w0, grads = _problem(SHAPES, 4, seed=2, grad_scale=1e-4)
    kw = dict(lr=0.1, eps=eps)
    got, _, _ = _run("Adafactor", kw, w0, grads, np.float64)
    for g_step, w_step in zip(got, _adafactor_reference(kw, w0, grads, None)):
        for g, w in zip(g_step, w_step):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


def test_adafactor_default_epsilon1_is_the_groups_first_parameters():
    """epsilon1 None takes the machine epsilon of the group's first parameter's dtype for the whole group, as
    PyTorch's (default, for-loop) update does: a float64 parameter after a float32 one floors gradients of 1e-8
    (squares 1e-16) at float32's epsilon squared (1.4e-14)."""
    w0, grads = _problem([(3, 4), (5,)], 3, seed=8, grad_scale=1e-8)
    params = [nn.Parameter(mf.tensor(w0[0].astype(np.float32))), nn.Parameter(mf.tensor(w0[1]))]
    opt = optim.Adafactor(params, lr=0.1)
    for g in grads:
        params[0].grad, params[1].grad = mf.tensor(g[0].astype(np.float32)), mf.tensor(g[1])
        opt.step()
    want = list(_f64_adafactor(w0[1], [g[1] for g in grads], [0.1] * 3, eps1_of=np.float32))[-1]
    np.testing.assert_allclose(params[1].detach().numpy(), want, rtol=1e-12, atol=1e-14)
    assert np.abs(want - list(_f64_adafactor(w0[1], [g[1] for g in grads], [0.1] * 3))[-1]).max() > 1e-3


def test_adafactor_state_names_shapes_and_step_are_pytorchs():
    params = [nn.Parameter(mf.ones(s)) for s in [(3, 4), (5,), (), (2, 3, 4)]]
    opt = optim.Adafactor(params)
    for _ in range(2):
        for p in params:
            p.grad = mf.ones(p.shape)
        opt.step()
    sd = opt.state_dict()
    shapes = {k: {name: tuple(v.shape) for name, v in s.items()} for k, s in sd["state"].items()}
    assert shapes == {0: {"step": (), "row_var": (3, 1), "col_var": (1, 4)}, 1: {"step": (), "variance": (5,)},
                      2: {"step": (), "variance": ()},
                      3: {"step": (), "row_var": (2, 3, 1), "col_var": (2, 1, 4)}}
    for s in sd["state"].values():
        assert s["step"].dtype == mf.float32 and float(s["step"]) == 2.0
    assert sd["param_groups"] == [dict(lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0,
                                       foreach=None, maximize=False, params=[0, 1, 2, 3])]
    assert "foreach: None" in repr(opt)


def test_adafactor_state_dict_round_trip_and_pytorchs_layout(tmp_path):
    """Three steps, saved and loaded into a new optimizer (also as PyTorch's: float32 step tensors, its ``foreach``
    in the groups), three more: bitwise the six-step run."""
    w0, grads = _problem(SHAPES, 6, seed=3)
    kw = dict(lr=0.2, weight_decay=0.1)
    full, _, _ = _run("Adafactor", kw, w0, grads, np.float32)
    first, opt, _ = _run("Adafactor", kw, w0, grads[:3], np.float32)
    mf.save(opt.state_dict(), tmp_path / "o")
    sd = opt.state_dict()
    theirs = {"state": {i: {k: mf.tensor(v.numpy()) for k, v in s.items()} for i, s in sd["state"].items()},
              "param_groups": [dict(g, foreach=None) for g in sd["param_groups"]]}
    for state_dict in (mf.load(tmp_path / "o"), theirs):
        params = [nn.Parameter(mf.tensor(w.astype(np.float32))) for w in first[-1]]
        opt2 = optim.Adafactor(params, **kw)
        opt2.load_state_dict(state_dict)
        assert opt2.param_groups[0]["foreach"] is None
        _resume(opt2, params, grads[3:], full[-1])


def test_adafactor_load_state_dict_checks_factor_shapes():
    p = nn.Parameter(mf.ones(3, 4))
    opt = optim.Adafactor([p])
    p.grad = mf.ones(3, 4)
    opt.step()
    sd = opt.state_dict()
    sd["state"][0]["row_var"] = mf.zeros(1, 4)
    with pytest.raises(ValueError, match=r"state 'row_var' of parameter 0 is a tensor of shape \(1, 4\).*expected "
                                         r"a floating tensor of shape \(3, 1\)"):
        optim.Adafactor([nn.Parameter(mf.ones(3, 4))]).load_state_dict(sd)


def test_adafactor_master_weights_step_float32_masters():
    """bfloat16 parameters with master weights: the float32 masters follow the float64 formulas (epsilon1 given:
    None would be bfloat16's), the parameters are the masters rounded."""
    w0, grads = _problem([(3, 4), (5,)], 4, seed=4)
    bf = backend.bfloat16
    w0 = [w.astype(bf).astype(np.float64) for w in w0]
    grads = [[g.astype(bf).astype(np.float64) for g in step] for step in grads]
    kw = dict(lr=0.1, eps=(1e-30, 1e-3), weight_decay=0.1)
    _, opt, params = _run("Adafactor", kw, w0, grads, bf, master_weights=True)
    for p, w in zip(params, _adafactor_reference(kw, w0, grads, None)[-1]):
        master = opt.state[p]["master"].numpy()
        assert master.dtype == np.float32 and opt.state[p]["step"].item() == 4
        np.testing.assert_allclose(master, w, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(p.detach().numpy(), master.astype(bf))


@pytest.mark.parametrize("kw,pattern", [
    (dict(lr=-1), "Adafactor: invalid learning rate -1"),
    (dict(lr=float("nan")), "Adafactor: invalid learning rate nan"),
    (dict(beta2_decay=0.1), r"Adafactor: invalid beta2_decay 0\.1; expected a number <= 0"),
    (dict(eps=(-1, 1e-3)), "Adafactor: invalid epsilon1 -1"),
    (dict(eps=(None, -1e-3)), "Adafactor: invalid epsilon2"),
    (dict(eps=1e-3), r"Adafactor: eps must be a pair \(epsilon1 or None, epsilon2\)"),
    (dict(d=0.5), r"Adafactor: invalid clipping threshold d 0\.5; expected a number >= 1"),
    (dict(weight_decay=-0.1), "Adafactor: invalid weight_decay -0.1"),
])
def test_adafactor_bad_hyper_parameters(kw, pattern):
    with pytest.raises(ValueError, match=pattern):
        optim.Adafactor([nn.Parameter(mf.ones(2))], **kw)


def test_adafactor_takes_pytorchs_switches_only():
    p = nn.Parameter(mf.ones(2))
    for foreach in (None, False, True):
        optim.Adafactor([p], foreach=foreach, maximize=True)
    for flag in ("fused", "capturable", "differentiable"):
        with pytest.raises(TypeError, match=flag):
            optim.Adafactor([p], **{flag: False})


# ================================================================ Muon
def _bf16(x):
    return np.asarray(x, np.float64).astype(ml_dtypes.bfloat16).astype(np.float64)


def _f64_newton_schulz(g, coefficients, steps, eps):
    """PyTorch's iteration on bfloat16 tensors: each product summed exactly (float64) and rounded to bfloat16."""
    a, b, c = coefficients
    x = _bf16(g)
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    x = _bf16(x / _bf16(max(_bf16(np.linalg.norm(x)), eps)))
    for _ in range(steps):
        gram = _bf16(x @ x.T)
        x = _bf16(a * x + _bf16(b * gram + c * gram @ gram) @ x)
    return x.T if tall else x


def _f64_muon(w, gs, lrs, weight_decay=0.1, momentum=0.95, nesterov=True, ns_coefficients=(3.4445, -4.7750, 2.0315),
              eps=1e-7, ns_steps=5, adjust_lr_fn=None):
    rows, cols = w.shape
    scale = 0.2 * math.sqrt(max(rows, cols)) if adjust_lr_fn == "match_rms_adamw" else math.sqrt(max(1, rows / cols))
    buf = np.zeros_like(w)
    for g, lr in zip(gs, lrs):
        buf = buf + (1 - momentum) * (g - buf)
        update = g + momentum * (buf - g) if nesterov else buf
        w = w * (1 - lr * weight_decay) - lr * scale * _f64_newton_schulz(update, ns_coefficients, ns_steps, eps)
        yield w


MATRICES = [(3, 4), (5, 3), (6, 6), (8, 2)]  # wide, tall (iterated transposed), square
MUON = [
    dict(lr=0.02),
    dict(lr=0.05, nesterov=False, momentum=0.9, weight_decay=0.0, adjust_lr_fn="match_rms_adamw"),
    dict(lr=0.03, weight_decay=0.2, ns_coefficients=(2.0, -1.5, 0.5), ns_steps=3, eps=1e-3, adjust_lr_fn="original"),
]


def _muon_reference(kw, w0, grads, lrs):
    lrs = lrs or [kw["lr"]] * len(grads)
    runs = [list(_f64_muon(w, [g[i] for g in grads], lrs, **{k: v for k, v in kw.items() if k != "lr"}))
            for i, w in enumerate(w0)]
    return [[run[t] for run in runs] for t in range(len(grads))]


@pytest.mark.parametrize("lrs", [None, LRS], ids=["fixed_lr", "lr_schedule"])
@pytest.mark.parametrize("kw", MUON, ids=[str(i) for i in range(len(MUON))])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_muon_steps_follow_pytorchs_formulas(kw, lrs, dtype):
    """The updates are bfloat16 values: the runs agree to far less than one bfloat16 rounding of an update
    (2 ** -8 relative, times lr)."""
    w0, grads = _problem(MATRICES, 6, seed=5)
    w0 = [w.astype(dtype).astype(np.float64) for w in w0]
    grads = [[g.astype(dtype).astype(np.float64) for g in step] for step in grads]
    got, _, _ = _run("Muon", kw, w0, grads, dtype, lrs)
    for g_step, w_step in zip(got, _muon_reference(kw, w0, grads, lrs)):
        for g, w in zip(g_step, w_step):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_muon_state_and_param_groups_are_pytorchs(tmp_path):
    """One state entry, ``momentum_buffer`` (no step count); a save / load round trip resumes bitwise."""
    w0, grads = _problem(MATRICES, 6, seed=6)
    kw = dict(lr=0.02)
    full, _, _ = _run("Muon", kw, w0, grads, np.float32)
    first, opt, _ = _run("Muon", kw, w0, grads[:3], np.float32)
    sd = opt.state_dict()
    assert {i: list(s) for i, s in sd["state"].items()} == {i: ["momentum_buffer"] for i in range(len(MATRICES))}
    assert sd["param_groups"] == [dict(lr=0.02, weight_decay=0.1, momentum=0.95, nesterov=True,
                                       ns_coefficients=(3.4445, -4.7750, 2.0315), eps=1e-7, ns_steps=5,
                                       adjust_lr_fn=None, params=[0, 1, 2, 3])]
    mf.save(sd, tmp_path / "o")
    params = [nn.Parameter(mf.tensor(w.astype(np.float32))) for w in first[-1]]
    opt2 = optim.Muon(params, **kw)
    opt2.load_state_dict(mf.load(tmp_path / "o"))
    _resume(opt2, params, grads[3:], full[-1])


@pytest.mark.parametrize("shape", [(4,), (), (2, 3, 4)])
def test_muon_refuses_parameters_that_are_not_matrices(shape):
    with pytest.raises(ValueError, match=r"Muon only supports 2D parameters .* size: \(" + ", ".join(map(str, shape))):
        optim.Muon([nn.Parameter(mf.ones(3, 3)), nn.Parameter(mf.ones(shape))])
    opt = optim.Muon([nn.Parameter(mf.ones(3, 3))])
    with pytest.raises(ValueError, match="Muon only supports 2D parameters"):
        opt.add_param_group({"params": [nn.Parameter(mf.ones(shape))]})
    assert len(opt.param_groups) == 1


@pytest.mark.parametrize("kw,pattern", [(dict(ns_steps=100), "number of steps must be less than 100"),
                                        (dict(ns_coefficients=(1.0, 2.0)), "exactly 3 values")])
def test_muon_step_refuses_bad_iteration_before_changing_anything(kw, pattern):
    a, b = nn.Parameter(mf.ones(2, 3)), nn.Parameter(mf.ones(3, 2))
    opt = optim.Muon([{"params": [a]}, {"params": [b], **kw}])
    a.grad, b.grad = mf.ones(2, 3), mf.ones(3, 2)
    with pytest.raises(ValueError, match=pattern):
        opt.step()
    np.testing.assert_array_equal(a.detach().numpy(), np.ones((2, 3), np.float32))
    assert not opt.state_dict()["state"]


@pytest.mark.parametrize("kw,pattern", [
    (dict(lr=-1), "Muon: invalid learning rate -1"),
    (dict(momentum=-0.5), "Muon: invalid momentum -0.5"),
    (dict(weight_decay=-1), "Muon: invalid weight_decay -1"),
    (dict(adjust_lr_fn="cosine"), "Muon: adjust_lr_fn 'cosine' is not supported"),
])
def test_muon_bad_hyper_parameters(kw, pattern):
    with pytest.raises(ValueError, match=pattern):
        optim.Muon([nn.Parameter(mf.ones(2, 2))], **kw)


def test_muon_takes_no_implementation_switches():
    """PyTorch's Muon takes neither ``foreach`` nor ``maximize`` (nor any other switch)."""
    p = nn.Parameter(mf.ones(2, 2))
    optim.Muon([p], momentum=2.0)  # (PyTorch bounds momentum below only)
    for flag in ("foreach", "maximize", "fused", "differentiable"):
        with pytest.raises(TypeError, match=flag):
            optim.Muon([p], **{flag: False})
    assert "foreach" not in repr(optim.Muon([p]))


def test_muon_master_weights_step_float32_masters():
    w0, grads = _problem([(3, 4)], 3, seed=7)
    bf = backend.bfloat16
    w0 = [w.astype(bf).astype(np.float64) for w in w0]
    grads = [[g.astype(bf).astype(np.float64) for g in step] for step in grads]
    kw = dict(lr=0.05)
    _, opt, (p,) = _run("Muon", kw, w0, grads, bf, master_weights=True)
    master = opt.state[p]["master"].numpy()
    assert master.dtype == np.float32
    np.testing.assert_allclose(master, _muon_reference(kw, w0, grads, None)[-1][0], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(p.detach().numpy(), master.astype(bf))


def test_closure_loss_is_returned():
    p = nn.Parameter(mf.ones(2, 2))
    for opt in (optim.Adafactor([p]), optim.Muon([p])):
        def closure():
            p.grad = mf.ones(2, 2)
            return mf.tensor(3.0)
        assert float(opt.step(closure)) == 3.0
