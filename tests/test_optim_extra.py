"""Rprop, ASGD and LBFGS: trajectories recorded from torch.optim (CPU, float64, foreach=False) for a small
problem, state names and PyTorch state dicts, argument checks, and (GPU) the fused Rprop / ASGD kernels against
their NumPy references. The float64 formulas of Rprop and ASGD, their fp32 runs, state-dict round trips, master
weights and GradScaler steps run in test_optim.py's registries (REFERENCES, CONFIGS, NEW)."""
import warnings

import numpy as np
import pytest

import minifused as mf
from minifused import backend, nn, optim
from minifused.kernels import optim_extra as KE
from conftest import dev_array, host


@pytest.fixture(autouse=True)
def _cpu_by_default(monkeypatch):
    monkeypatch.setattr(backend, "default_device", lambda: backend.CPU)


GRADS = [np.array([0.1, -0.2, 0.3]), np.array([-0.5, 0.25, 0.05]), np.array([0.2, 0.2, -0.4]),
         np.array([0.3, -0.1, -0.2]), np.array([-0.1, 0.4, 0.0])]
P0 = np.array([1.0, -2.0, 0.5])

# torch.optim.<name>([p], foreach=False, **kw) after the five GRADS from P0, float64: (weights, state but step)
TORCH_RUNS = [
    ("Rprop", {}, [0.979, -1.9974999999999998, 0.484],
     {"prev": [0.0, 0.4, 0.0], "step_size": [0.003, 0.0025, 0.006]}),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.08), maximize=True),
     [1.0875, -2.0304999999999995, 0.6025],
     {"prev": [0.0, -0.4, -0.0], "step_size": [0.00675, 0.0045, 0.022500000000000003]}),
    ("ASGD", {}, [0.9999949989978066, -2.005489982883574, 0.5024974933946187],
     {"eta": 0.009999962523579597, "mu": 1.0, "ax": [0.9999949989978066, -2.005489982883574, 0.5024974933946187]}),
    ("ASGD", dict(lr=0.05, lambd=1e-2, alpha=0.6, t0=2, weight_decay=0.05),
     [0.9850449492726754, -1.9976305132928536, 0.5050809797526574],
     {"eta": 0.049925148487091064, "mu": 0.3333333432674408,
      "ax": [0.9840206725377021, -1.9906143267709004, 0.5058399677420895]}),
    ("ASGD", dict(lr=0.1, t0=0, maximize=True, weight_decay=0.1),
     [0.95133583423262, -1.8471396305979948, 0.4501374241788737],
     {"eta": 0.09999625384807587, "mu": 0.20000000298023224,
      "ax": [0.9532357700167936, -1.9059278142765996, 0.47726344602269216]}),
]


@pytest.mark.parametrize("name,kw,weights,state", TORCH_RUNS, ids=[f"{r[0]}{i}" for i, r in enumerate(TORCH_RUNS)])
def test_float64_steps_equal_pytorchs(name, kw, weights, state):
    p = nn.Parameter(mf.tensor(P0))
    opt = getattr(optim, name)([p], **kw)
    for g in GRADS:
        p.grad = mf.tensor(g)
        opt.step()
    np.testing.assert_allclose(p.numpy(), weights, rtol=1e-14, atol=1e-16)
    st = opt.state_dict()["state"][0]
    assert list(st) == ["step", *state] and st["step"] == len(GRADS)
    for k, v in state.items():
        np.testing.assert_allclose(st[k].numpy(), v, rtol=1e-14, atol=1e-16)
    if name == "ASGD":  # eta and mu stay float32 0-d tensors, as PyTorch's
        assert st["eta"].dtype == mf.float32 and st["eta"].ndim == 0 and st["mu"].dtype == mf.float32


# ---------------------------------------------------------------- LBFGS
A = np.array([[1.0, 2.0, 0.5], [0.3, -1.0, 1.5], [2.0, 0.1, -0.7], [-0.4, 0.8, 1.1]])
B = np.array([1.0, -0.5, 0.25, 2.0])
X0, V0 = np.array([0.5, -1.0, 2.0]), np.array([[0.3, -0.2], [1.0, 0.4]])

# torch.optim.LBFGS([x, v], **kw), three steps on sign * _lbfgs_loss, float64: (the losses step returned, x, v,
# func_evals, n_iter, len(old_dirs))
TORCH_LBFGS = [
    (dict(max_iter=5), 1.0, [30.484550000000006, 1.7584524729049031, 1.7431688203238092],
     [-0.04874331039148914, 0.7112944521441786, 0.3576862301281704],
     [[0.691156208220419, 0.7230678235011271], [0.7229892504541121, 0.6912662631986558]], 15, 15, 14),
    (dict(max_iter=5, line_search_fn="strong_wolfe"), 1.0, [30.484550000000006, 1.7584524729049031, 1.7431688203238092],
     [-0.04874331039148914, 0.7112944521441786, 0.3576862301281704],
     [[0.691156208220419, 0.7230678235011271], [0.7229892504541121, 0.6912662631986558]], 18, 15, 14),
    (dict(lr=0.5, max_iter=4, history_size=2, maximize=True), -1.0,
     [-30.484550000000006, -2.3461067920150236, -1.7535724129960872],
     [-0.04816295664793193, 0.7108947876020705, 0.35824482148350484],
     [[0.5995186374073017, 0.8209464581629857], [0.8094200006487112, 0.597593399827169]], 12, 12, 2),
    (dict(max_iter=6, history_size=3, line_search_fn="strong_wolfe", maximize=True), -1.0,
     [-30.484550000000006, -1.74678967271839, -1.743319549885002],
     [-0.04856171301174471, 0.7115168904775754, 0.3577026446387107],
     [[0.6850578130012496, 0.7287128513841341], [0.7293150635161152, 0.6850869895098844]], 21, 16, 3),
]


def _lbfgs_problem(kw, sign=1.0, dtype=np.float64, device="cpu"):
    """(x, v, optimizer, closure): a least-squares term with a quartic one in x, v @ v pulled to ones."""
    x = nn.Parameter(mf.tensor(X0.astype(dtype), device=device))
    v = nn.Parameter(mf.tensor(V0.astype(dtype), device=device))
    a, b = mf.tensor(A.astype(dtype), device=device), mf.tensor(B.astype(dtype), device=device)
    opt = optim.LBFGS([x, v], **kw)

    def closure():
        opt.zero_grad()
        r, w = a @ x - b, v @ v
        loss = ((r * r).sum() + 0.1 * (x * x * x * x).sum() + ((w - 1.0) * (w - 1.0)).sum()) * sign
        loss.backward()
        return loss
    return x, v, opt, closure


@pytest.mark.parametrize("kw,sign,losses,x_want,v_want,evals,n_iter,history", TORCH_LBFGS,
                         ids=["fixed", "wolfe", "fixed-maximize-history2", "wolfe-maximize-history3"])
def test_lbfgs_float64_steps_equal_pytorchs(kw, sign, losses, x_want, v_want, evals, n_iter, history):
    x, v, opt, closure = _lbfgs_problem(kw, sign)
    got = [float(opt.step(closure)) for _ in range(3)]
    np.testing.assert_allclose(got, losses, rtol=1e-12)
    np.testing.assert_allclose(x.numpy(), x_want, rtol=1e-9, atol=1e-12)  # (reductions in another order)
    np.testing.assert_allclose(v.numpy(), v_want, rtol=1e-9, atol=1e-12)
    st = opt.state[x]
    assert (st["func_evals"], st["n_iter"], len(st["old_dirs"])) == (evals, n_iter, history)


def test_lbfgs_state_is_pytorchs_and_its_state_dict_round_trips(tmp_path):
    x, v, opt, closure = _lbfgs_problem(dict(max_iter=4, history_size=3))
    opt.step(closure)
    sd = opt.state_dict()
    assert list(sd["state"]) == [0] and set(sd["state"][0]) == {
        "func_evals", "n_iter", "d", "t", "old_dirs", "old_stps", "ro", "H_diag", "prev_flat_grad", "prev_loss", "al"}
    st = sd["state"][0]
    assert st["d"].shape == (7,) and st["H_diag"].ndim == 0 and len(st["al"]) == 3
    assert isinstance(st["prev_loss"], float) and isinstance(st["func_evals"], int)
    assert sd["param_groups"][0]["max_eval"] == 5 and sd["param_groups"][0]["line_search_fn"] is None
    mf.save(sd, tmp_path / "o")
    x2, v2, opt2, closure2 = _lbfgs_problem(dict(max_iter=4, history_size=3))
    x2._data[...], v2._data[...] = x._data, v._data
    opt2.load_state_dict(mf.load(tmp_path / "o"))
    opt.step(closure)
    opt2.step(closure2)
    np.testing.assert_array_equal(x2.numpy(), x.numpy())
    np.testing.assert_array_equal(v2.numpy(), v.numpy())


def test_lbfgs_loads_pytorchs_state_dict():
    """PyTorch's LBFGS state dict (tensors, lists of tensors, None in 'al') loads; the next steps agree."""
    torch = pytest.importorskip("torch")
    kw = dict(max_iter=3, history_size=4, line_search_fn="strong_wolfe")
    tx, tv = torch.nn.Parameter(torch.tensor(X0)), torch.nn.Parameter(torch.tensor(V0))
    ta, tb = torch.tensor(A), torch.tensor(B)
    topt = torch.optim.LBFGS([tx, tv], **kw)

    def tclosure():
        topt.zero_grad()
        r, w = ta @ tx - tb, tv @ tv
        loss = (r * r).sum() + 0.1 * (tx * tx * tx * tx).sum() + ((w - 1.0) * (w - 1.0)).sum()
        loss.backward()
        return loss
    topt.step(tclosure)
    conv = lambda v: ([conv(e) for e in v] if isinstance(v, list)  # noqa: E731
                      else mf.tensor(v.detach().numpy()) if isinstance(v, torch.Tensor) else v)
    sd = topt.state_dict()
    x, v, opt, closure = _lbfgs_problem(kw)
    x._data[...], v._data[...] = tx.detach().numpy(), tv.detach().numpy()
    opt.load_state_dict({"state": {i: {k: conv(e) for k, e in s.items()} for i, s in sd["state"].items()},
                         "param_groups": sd["param_groups"]})
    for _ in range(2):
        np.testing.assert_allclose(float(opt.step(closure)), float(topt.step(tclosure).detach()), rtol=1e-12)
    np.testing.assert_allclose(x.numpy(), tx.detach().numpy(), rtol=1e-9, atol=1e-12)


def test_lbfgs_float32_close_to_float64():
    """Away from convergence (fp32 reductions differ in order: no bitwise agreement is expected)."""
    (x32, _, o32, c32), (x64, _, o64, c64) = (_lbfgs_problem(dict(max_iter=3), dtype=d)
                                              for d in (np.float32, np.float64))
    o32.step(c32)
    o64.step(c64)
    assert x32.dtype == mf.float32 and o32.state[x32]["d"].dtype == mf.float32
    np.testing.assert_allclose(x32.numpy(), x64.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_lbfgs_reads_the_closures_loss_without_a_warning(line_search):
    """The step reads the closure's loss (a tensor that requires grad) silently, as PyTorch's does (its ``float`` of
    such a tensor warns, its step does not)."""
    x, _, opt, closure = _lbfgs_problem(dict(max_iter=4, line_search_fn=line_search))
    before = x.detach().clone()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss = opt.step(closure)
    assert loss.requires_grad and not np.array_equal(x.numpy(), before.numpy())


def test_lbfgs_stops_at_an_optimum_and_without_a_closure_complains():
    p = nn.Parameter(mf.zeros(3))
    opt = optim.LBFGS([p])

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss
    assert float(opt.step(closure)) == 0.0
    assert opt.state[p] == {"func_evals": 1, "n_iter": 0}  # the gradient is zero: nothing else happened
    with pytest.raises(TypeError, match="LBFGS.step requires a closure"):
        opt.step()


@pytest.mark.parametrize("make,exc,pattern", [
    (lambda ps: optim.LBFGS(ps, lr=-1), ValueError, "LBFGS: invalid learning rate -1"),
    (lambda ps: optim.LBFGS([{"params": ps[:1]}, {"params": ps[1:]}]), ValueError, "parameter groups"),
    (lambda ps: optim.Rprop(ps, lr=-0.1), ValueError, "Rprop: invalid learning rate"),
    (lambda ps: optim.Rprop(ps, etas=(1.5, 1.2)), ValueError, r"Rprop: invalid eta values \(1\.5, 1\.2\)"),
    (lambda ps: optim.Rprop(ps, etas=(0.5, 1.0)), ValueError, "Rprop: invalid eta values"),
    (lambda ps: optim.Rprop(ps, step_sizes=(1e-6,)), ValueError, "Rprop: invalid step_sizes"),
    (lambda ps: optim.Rprop(ps, differentiable=True), NotImplementedError, "Rprop: differentiable=True"),
    (lambda ps: optim.ASGD(ps, lr=-1), ValueError, "ASGD: invalid learning rate -1"),
    (lambda ps: optim.ASGD(ps, weight_decay=-1e-3), ValueError, "ASGD: invalid weight_decay"),
    (lambda ps: optim.ASGD(ps, foreach="yes"), TypeError, "ASGD: foreach must be None or a bool"),
])
def test_bad_arguments_name_the_optimizer(make, exc, pattern):
    with pytest.raises(exc, match=pattern):
        make([nn.Parameter(mf.ones(2)), nn.Parameter(mf.ones(1))])


def test_lbfgs_unknown_line_search_is_refused_at_step():
    p = nn.Parameter(mf.ones(2))
    opt = optim.LBFGS([p], line_search_fn="armijo")  # PyTorch refuses it in step, as here
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        opt.step(lambda: (p * p).sum())


def test_pytorch_switches_are_accepted():
    for cls in (optim.Rprop, optim.ASGD):
        opt = cls([nn.Parameter(mf.ones(2))], foreach=True, capturable=True)
        assert opt.param_groups[0]["foreach"] is True and opt.param_groups[0]["capturable"] is True


# ---------------------------------------------------------------- GPU: fused kernels vs reference
SIZES = [1, 5, 1023, 1024, 1025, 4096 + 3, 300000] + [7] * 12  # 19 tensors: two launches of <= 16


def _lists(rng, dtype, name):
    p, g, prev = ([rng.standard_normal(n).astype(dtype) for n in SIZES] for _ in range(3))
    if name == "rprop":  # step sizes > 0, prev with some zeros (sign 0)
        size = [(np.abs(a) * 0.01 + 1e-4).astype(dtype) for a in prev]
        prev = [np.where(np.abs(a) < 0.3, 0, a).astype(dtype) for a in prev]
        return p, g, prev, size, None
    etas = [np.full((), 0.01 + 0.001 * i, np.float32) for i in range(len(SIZES))]
    mus = [np.full((), 1.0 if i % 2 else 0.25, np.float32) for i in range(len(SIZES))]
    return p, g, prev, etas, mus


def _call(name, kernel, lists, steps, hyper, **flags):
    fn = getattr(KE, name if kernel else name + "_ref")
    p, g, s1, s2, s3 = lists
    if name == "rprop":
        fn(p, g, s1, s2, steps, hyper, **flags)
    else:
        fn(p, g, s1, s2, s3, steps, hyper, **flags)


EXTRA = [("rprop", [1e-2, 0.5, 1.2, 1e-6, 50.0], {}), ("rprop", [1e-2, 0.3, 1.5, 1e-3, 2e-2], dict(maximize=True)),
         ("asgd", [1e-2, 1e-4, 0.75, 1e6, 0.0], {}), ("asgd", [5e-2, 1e-2, 0.6, 3.0, 0.05], dict(maximize=True))]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float64, 1e-12), (np.float16, 4e-3)])
@pytest.mark.parametrize("name,hyper,flags", EXTRA, ids=[f"{n}{i}" for i, (n, _, _) in enumerate(EXTRA)])
def test_extra_kernels_match_reference(name, hyper, flags, dtype, tol):
    import cupy

    ref = _lists(np.random.default_rng(0), dtype, name)
    dev = [None if lst is None else [cupy.asarray(a) for a in lst] for lst in ref]
    start = [2 + i % 4 for i in range(len(SIZES))]
    steps, steps_d = [np.full((), s, np.int64) for s in start], [cupy.full((), s, np.int64) for s in start]
    for _ in range(3):
        _call(name, False, ref, steps, np.array(hyper), **flags)
        _call(name, True, dev, steps_d, cupy.asarray(np.array(hyper)), **flags)
    for r_list, d_list in zip(ref, dev):
        for r, d in zip(r_list or (), d_list or ()):
            np.testing.assert_allclose(cupy.asnumpy(d).astype(np.float64), r.astype(np.float64), rtol=tol, atol=tol)
    assert [int(t) for t in steps_d] == [int(t) for t in steps] == [s + 3 for s in start]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float16, backend.bfloat16])
@pytest.mark.parametrize("name,hyper,flags", EXTRA[1:2] + EXTRA[3:4], ids=["rprop", "asgd"])
def test_extra_kernels_master_weights_and_scaler(name, hyper, flags, dtype):
    """fp32 masters and state, gradients unscaled by the scaler's inv_scale; a found inf skips it all."""
    import cupy

    rng = np.random.default_rng(3)
    w, g, s1, s2, s3 = _lists(rng, np.float32, name)
    p = [a.astype(dtype) for a in w]
    g = [(a * 1024).astype(dtype) for a in g]
    amp = np.array([1024.0, 1 / 1024.0, 0.0, 0.0], np.float32)
    steps, steps_d = [np.zeros((), np.int64) for _ in SIZES], [cupy.zeros((), np.int64) for _ in SIZES]
    ref = (p, g, s1, s2, s3)
    dev = [None if lst is None else [dev_array(a, "cuda") for a in lst] for lst in (*ref, w)]
    for found in (0.0, 1.0, 0.0):
        amp[2] = found
        _call(name, False, ref, steps, np.array(hyper), masters=w, amp=amp, **flags)
        _call(name, True, dev[:5], steps_d, cupy.asarray(np.array(hyper)), masters=dev[5], amp=cupy.asarray(amp),
              **flags)
    for r_list, d_list in zip((w, s1, s2, s3), (dev[5], dev[2], dev[3], dev[4])):
        for r, d in zip(r_list or (), d_list or ()):
            np.testing.assert_allclose(host(d), r, rtol=1e-4, atol=2e-5)
    for r, d in zip(p, dev[0]):
        assert d.dtype == dtype
        np.testing.assert_allclose(host(d).astype(np.float32), r.astype(np.float32), rtol=1e-2, atol=1e-6)
    assert [int(t) for t in steps_d] == [2] * len(SIZES)


@pytest.mark.gpu
@pytest.mark.parametrize("kw", [dict(max_iter=5), dict(max_iter=6, history_size=3, line_search_fn="strong_wolfe")])
def test_lbfgs_on_gpu_follows_the_cpu(kw):
    """The same iterations on CuPy arrays (flat vectors and 0-d scalars on the device) as on the CPU, float64."""
    runs = []
    for device in ("cpu", "cuda"):
        x, v, opt, closure = _lbfgs_problem(kw, device=device)
        losses = [float(opt.step(closure)) for _ in range(3)]
        runs.append((losses, host(x._data), host(v._data), opt.state[x]["func_evals"]))
        assert opt.state[x]["d"].device == mf.device(device)
    (lc, xc, vc, ec), (lg, xg, vg, eg) = runs
    np.testing.assert_allclose(lg, lc, rtol=1e-10)
    np.testing.assert_allclose(xg, xc, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(vg, vc, rtol=1e-8, atol=1e-10)
    assert eg == ec
