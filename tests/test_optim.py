"""Optimizers against PyTorch's formulas computed by hand, state dicts, schedulers, grad clipping,
and (GPU) the fused multi-tensor kernels against the NumPy reference."""
import math

import numpy as np
import pytest

import minifused as mf
from minifused import nn, optim
from minifused.kernels import optim as K
from minifused.optim import lr_scheduler as S
from minifused import backend


@pytest.fixture(autouse=True)
def _cpu_by_default(monkeypatch):
    """Tests without an explicit device run the NumPy path, also on a GPU machine."""
    monkeypatch.setattr(backend, "default_device", lambda: backend.CPU)

GRADS = [np.array([0.1, -0.2, 0.3]), np.array([-0.5, 0.25, 0.05]), np.array([0.2, 0.2, -0.4])]
P0 = np.array([1.0, -2.0, 0.5])


def _run(make_opt, dtype=np.float64, grads=GRADS):
    p = nn.Parameter(mf.tensor(P0.astype(dtype)))
    opt = make_opt([p])
    out = []
    for g in grads:
        p.grad = mf.tensor(g.astype(dtype))
        opt.step()
        out.append(p._data.copy())
    return out, opt


def _sgd_ref(lr, momentum=0.0, dampening=0.0, wd=0.0, nesterov=False, maximize=False):
    p, buf, out = P0.copy(), None, []
    for g in GRADS:
        d = -g if maximize else g.copy()
        d = d + wd * p
        if momentum:
            buf = d.copy() if buf is None else momentum * buf + (1 - dampening) * d
            d = d + momentum * buf if nesterov else buf
        p = p - lr * d
        out.append(p.copy())
    return out


def _adam_ref(lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, amsgrad=False, decoupled=False, maximize=False):
    p, m, v, vmax, out = P0.copy(), np.zeros(3), np.zeros(3), np.zeros(3), []
    for t, g in enumerate(GRADS, 1):
        g = -g if maximize else g.copy()
        if decoupled:
            p = p * (1 - lr * wd)
        else:
            g = g + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vhat = np.maximum(vmax, v) if amsgrad else v
        vmax = vhat
        denom = np.sqrt(vhat) / math.sqrt(1 - b2 ** t) + eps
        p = p - lr / (1 - b1 ** t) * m / denom
        out.append(p.copy())
    return out


@pytest.mark.parametrize("kw", [dict(), dict(momentum=0.9), dict(momentum=0.9, dampening=0.3),
                                dict(momentum=0.8, nesterov=True, wd=0.1), dict(wd=0.05, maximize=True)])
def test_sgd_matches_hand_computed(kw):
    wd = kw.pop("wd", 0.0)
    got, _ = _run(lambda ps: optim.SGD(ps, lr=0.1, weight_decay=wd, **kw))
    want = _sgd_ref(0.1, wd=wd, **kw)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("cls,kw", [(optim.Adam, dict()), (optim.Adam, dict(wd=0.1)),
                                    (optim.Adam, dict(amsgrad=True)), (optim.AdamW, dict(wd=0.1)),
                                    (optim.AdamW, dict(wd=0.01, amsgrad=True)),
                                    (optim.Adam, dict(maximize=True, betas=(0.8, 0.99)))])
def test_adam_matches_hand_computed(cls, kw):
    wd = kw.pop("wd", 0.0 if cls is optim.Adam else 0.01)
    b1, b2 = kw.pop("betas", (0.9, 0.999))
    got, opt = _run(lambda ps: cls(ps, lr=0.01, betas=(b1, b2), weight_decay=wd, **kw))
    want = _adam_ref(0.01, b1, b2, wd=wd, decoupled=cls is optim.AdamW, **kw)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    st = next(iter(opt.state_dict()["state"].values()))
    assert st["step"] == 3 and {"exp_avg", "exp_avg_sq"} <= set(st)


def test_adam_float32_close_to_float64():
    got, _ = _run(lambda ps: optim.Adam(ps, lr=0.01), dtype=np.float32)
    want = _adam_ref(0.01)
    assert got[-1].dtype == np.float32
    np.testing.assert_allclose(got[-1], want[-1], rtol=1e-6)


def test_adamw_default_weight_decay_and_errors():
    p = nn.Parameter(mf.ones(2))
    assert optim.AdamW([p]).param_groups[0]["weight_decay"] == 0.01
    with pytest.raises(ValueError, match="beta"):
        optim.Adam([p], betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="learning rate"):
        optim.SGD([p], lr=-1)
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="empty"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="more than one"):
        optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)


def test_params_without_grad_are_skipped_and_groups_have_own_lr():
    a, b = nn.Parameter(mf.ones(2)), nn.Parameter(mf.ones(2))
    opt = optim.SGD([{"params": [a]}, {"params": [b], "lr": 1.0}], lr=0.1)
    b.grad = mf.ones(2)
    opt.step()
    np.testing.assert_array_equal(a._data, [1, 1])
    np.testing.assert_array_equal(b._data, [0, 0])
    opt.zero_grad()
    assert b.grad is None


@pytest.mark.parametrize("make", [lambda ps: optim.Adam(ps, lr=0.01, amsgrad=True),
                                  lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
                                  lambda ps: optim.AdamW(ps, lr=0.01)])
def test_optimizer_state_dict_round_trip(make, tmp_path):
    first, opt = _run(make, grads=GRADS[:2])
    sd = opt.state_dict()
    mf.save(sd, tmp_path / "opt.ckpt")
    p2 = nn.Parameter(mf.tensor(first[-1]))
    opt2 = make([p2])
    opt2.load_state_dict(mf.load(tmp_path / "opt.ckpt"))
    p2.grad = mf.tensor(GRADS[2])
    opt2.step()
    full, _ = _run(make)
    np.testing.assert_array_equal(p2._data, full[-1])


def test_optimizer_load_state_dict_errors():
    a, b = nn.Parameter(mf.ones(2)), nn.Parameter(mf.ones(3))
    opt = optim.Adam([a, b])
    other = optim.Adam([a])
    with pytest.raises(ValueError, match="group 0 has 1 parameters"):
        opt.load_state_dict(other.state_dict())
    with pytest.raises(ValueError, match="2 parameter groups"):
        opt.load_state_dict({"state": {}, "param_groups": [{"params": [0]}, {"params": [1]}]})
    with pytest.raises(ValueError, match="expected a dict"):
        opt.load_state_dict({"weights": 1})


def _lrs(sched, n):
    out = [sched.get_last_lr()[0]]
    for _ in range(n):
        sched.optimizer.step()
        sched.step()
        out.append(sched.get_last_lr()[0])
    return out


def _opt(lr=0.1, cls=optim.SGD, **kw):
    p = nn.Parameter(mf.ones(1))
    return cls([p], lr=lr, **kw)


def test_step_lr():
    np.testing.assert_allclose(_lrs(S.StepLR(_opt(), step_size=2, gamma=0.5), 6),
                               [0.1, 0.1, 0.05, 0.05, 0.025, 0.025, 0.0125])


def test_cosine_annealing_matches_closed_form():
    T, lo = 10, 0.001
    got = _lrs(S.CosineAnnealingLR(_opt(), T_max=T, eta_min=lo), T)
    want = [lo + (0.1 - lo) * (1 + math.cos(math.pi * t / T)) / 2 for t in range(T + 1)]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_linear_lr_warmup():
    got = _lrs(S.LinearLR(_opt(), start_factor=0.25, total_iters=3), 5)
    np.testing.assert_allclose(got, [0.025, 0.05, 0.075, 0.1, 0.1, 0.1], rtol=1e-12)


def test_one_cycle_lr_and_momentum():
    opt = _opt(cls=optim.Adam, lr=0.01)
    total, max_lr = 10, 0.01
    sched = S.OneCycleLR(opt, max_lr=max_lr, total_steps=total)
    got = _lrs(sched, total - 1)
    initial, low = max_lr / 25, max_lr / 25 / 1e4
    up_end = 0.3 * total - 1

    def cos(a, b, pct):
        return b + (a - b) / 2 * (math.cos(math.pi * pct) + 1)

    want = [cos(initial, max_lr, t / up_end) if t <= up_end else cos(max_lr, low, (t - up_end) / (total - 1 - up_end))
            for t in range(total)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert got[-1] == pytest.approx(low)
    assert opt.param_groups[0]["betas"][0] == pytest.approx(0.95)  # momentum back at its maximum
    with pytest.raises(ValueError, match="total_steps"):
        sched.step()
        sched.step()


def test_scheduler_state_dict_round_trip(tmp_path):
    opt = _opt()
    sched = S.CosineAnnealingLR(opt, T_max=8)
    _lrs(sched, 3)
    mf.save(sched.state_dict(), tmp_path / "s.ckpt")
    rest = _lrs(sched, 3)[1:]
    opt2 = _opt()
    sched2 = S.CosineAnnealingLR(opt2, T_max=8)
    sched2.load_state_dict(mf.load(tmp_path / "s.ckpt"))
    opt2.param_groups[0]["lr"] = sched2.get_last_lr()[0]
    assert _lrs(sched2, 3)[1:] == rest


def test_clip_grad_norm():
    a, b = nn.Parameter(mf.zeros(2)), nn.Parameter(mf.zeros(1))
    a.grad, b.grad = mf.tensor([3.0, 0.0]), mf.tensor([4.0])
    total = nn.utils.clip_grad_norm_([a, b], max_norm=1.0)
    assert float(total) == pytest.approx(5.0)
    np.testing.assert_allclose(a.grad._data, [0.6, 0.0], rtol=1e-5)
    np.testing.assert_allclose(b.grad._data, [0.8], rtol=1e-5)
    total = nn.utils.clip_grad_norm_([a, b], max_norm=10.0)  # no change below the threshold
    np.testing.assert_allclose(b.grad._data, [0.8], rtol=1e-5)
    assert float(nn.utils.clip_grad_norm_([a, b], 1.0, norm_type=math.inf)) == pytest.approx(0.8, rel=1e-5)


# ---------------------------------------------------------------- GPU: fused kernels vs reference
def _arrays(rng, sizes, dtype):
    return [rng.standard_normal(n).astype(dtype) for n in sizes]


SIZES = [1, 5, 1023, 1024, 1025, 4096 + 3, 300000] + [7] * 12  # 19 tensors: two launches of <= 16


def _steps(values, xp=np):
    return [xp.full((), v, np.int64) for v in values]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float64, 1e-12), (np.float16, 2e-3)])
@pytest.mark.parametrize("flags", [dict(), dict(amsgrad=True), dict(decoupled=True, weight_decay=0.1),
                                   dict(weight_decay=0.05, maximize=True)])
def test_adam_kernel_matches_reference(dtype, tol, flags):
    import cupy

    rng = np.random.default_rng(0)
    p, g, m, v = (_arrays(rng, SIZES, dtype) for _ in range(4))
    v = [np.abs(a) for a in v]
    vmax = [a * 1.5 for a in v]
    start = [2 + i % 4 for i in range(len(SIZES))]
    steps, steps_d = _steps(start), _steps(start, cupy)
    cp = [[cupy.asarray(a) for a in lst] for lst in (p, g, m, v, vmax)]
    wd = flags.pop("weight_decay", 0.0)
    hyper = np.array([1e-2, 0.9, 0.999, 1e-8, wd])
    for _ in range(2):
        K.adam_ref(p, g, m, v, vmax, steps, hyper, **flags)
        K.adam(cp[0], cp[1], cp[2], cp[3], cp[4], steps_d, cupy.asarray(hyper), **flags)
    for ref, got in zip((p, m, v, vmax), (cp[0], cp[2], cp[3], cp[4])):
        for r, o in zip(ref, got):
            np.testing.assert_allclose(cupy.asnumpy(o).astype(np.float64), r.astype(np.float64), rtol=tol, atol=tol)
    assert [int(t) for t in steps_d] == [int(t) for t in steps] == [s + 2 for s in start]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float16, backend.bfloat16])
def test_adam_kernel_master_weights_and_scaler_match_reference(dtype):
    """fp32 masters and state, gradients unscaled by the scaler's inv_scale; a found inf skips it all."""
    import cupy

    rng = np.random.default_rng(3)
    w = _arrays(rng, SIZES, np.float32)
    p = [a.astype(dtype) for a in w]
    g = [a.astype(dtype) for a in _arrays(rng, SIZES, np.float32)]
    m, v = [np.zeros_like(a) for a in w], [np.zeros_like(a) for a in w]
    amp = np.array([1024.0, 1 / 1024.0, 0.0, 0.0], np.float32)
    steps, steps_d = _steps([0] * len(SIZES)), _steps([0] * len(SIZES), cupy)
    cp = [[cupy.asarray(a) for a in lst] for lst in (p, g, m, v, w)]
    hyper = np.array([1e-2, 0.9, 0.999, 1e-8, 0.01])
    for found in (0.0, 1.0, 0.0):
        amp[2] = found
        K.adam_ref(p, g, m, v, None, steps, hyper, decoupled=True, masters=w, amp=amp)
        K.adam(cp[0], cp[1], cp[2], cp[3], None, steps_d, cupy.asarray(hyper), decoupled=True, masters=cp[4],
               amp=cupy.asarray(amp))
    for ref, got in zip((w, m, v), (cp[4], cp[2], cp[3])):
        for r, o in zip(ref, got):
            np.testing.assert_allclose(cupy.asnumpy(o), r, rtol=1e-5, atol=1e-6)
    for r, o in zip(p, cp[0]):  # the rounded masters (one ulp apart at most, where a master differs)
        assert o.dtype == dtype
        np.testing.assert_allclose(cupy.asnumpy(o).astype(np.float32), r.astype(np.float32), rtol=1e-2, atol=1e-6)
    assert [int(t) for t in steps_d] == [2] * len(SIZES)  # the skipped step did not count


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float16, 2e-3)])
@pytest.mark.parametrize("kw", [dict(), dict(momentum=0.9, dampening=0.1, weight_decay=0.01),
                                dict(momentum=0.9, nesterov=True, maximize=True)])
def test_sgd_kernel_matches_reference(dtype, tol, kw):
    import cupy

    rng = np.random.default_rng(1)
    p, g, buf = (_arrays(rng, SIZES, dtype) for _ in range(3))
    cp = [[cupy.asarray(a) for a in lst] for lst in (p, g, buf)]
    kw = dict(kw)
    hyper = np.array([0.1, kw.pop("momentum", 0.0), kw.pop("dampening", 0.0), kw.pop("weight_decay", 0.0)])
    for init in ([True] * len(SIZES), [False] * len(SIZES)):
        K.sgd_ref(p, g, buf, init, hyper, **kw)
        K.sgd(cp[0], cp[1], cp[2], init, cupy.asarray(hyper), **kw)
    for ref, got in zip((p, buf), (cp[0], cp[2])):
        for r, o in zip(ref, got):
            np.testing.assert_allclose(cupy.asnumpy(o).astype(np.float64), r.astype(np.float64), rtol=tol, atol=tol)


@pytest.mark.gpu
def test_adam_on_gpu_keeps_step_on_device_and_follows_lr_changes():
    """The step count lives on the device (no host sync per step), state_dict() gives ints, and a
    new lr written into the group reaches the kernel through the device hyper-parameter array."""
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(3) for _ in range(4)]
    lrs = [0.01, 0.02, 0.005, 0.005]
    got = []
    for device in ("cpu", "cuda"):
        p = nn.Parameter(mf.tensor(P0.astype(np.float32), device=device))
        opt = optim.Adam([p], lr=0.01)
        for lr, gr in zip(lrs, grads):
            opt.param_groups[0]["lr"] = lr
            p.grad = mf.tensor(gr.astype(np.float32), device=device)
            opt.step()
        assert opt.state_dict()["state"][0]["step"] == 4
        assert opt.state[p]["step"].device == mf.device(device)
        got.append(p.cpu().numpy())
    np.testing.assert_allclose(got[1], got[0], rtol=1e-6, atol=1e-7)


@pytest.mark.gpu
@pytest.mark.parametrize("make", [lambda ps: optim.AdamW(ps, lr=1e-2, amsgrad=True),
                                  lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True)])
def test_optimizer_same_on_cpu_and_gpu(make):
    mf.manual_seed(0)
    cpu = nn.Sequential(nn.Linear(7, 33), nn.ReLU(), nn.Linear(33, 3))
    gpu = nn.Sequential(nn.Linear(7, 33), nn.ReLU(), nn.Linear(33, 3)).to("cuda")
    gpu.load_state_dict(cpu.state_dict())
    oc, og = make(cpu.parameters()), make(gpu.parameters())
    rng = np.random.default_rng(0)
    for _ in range(3):
        grads = [rng.standard_normal(p.shape).astype(np.float32) for p in cpu.parameters()]
        for p, q, gr in zip(cpu.parameters(), gpu.parameters(), grads):
            p.grad, q.grad = mf.tensor(gr), mf.tensor(gr, device="cuda")
        oc.step()
        og.step()
    for p, q in zip(cpu.parameters(), gpu.parameters()):
        np.testing.assert_allclose(q.cpu().numpy(), p.numpy(), rtol=1e-5, atol=1e-6)
