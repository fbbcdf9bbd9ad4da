"""A one-element tensor as the learning rate, as PyTorch's optimizers take it: kept in the group, its value read
at each step (on the device, captured steps too), filled in place by the schedulers; the same updates as the
float lr. The values (0.0625, halved, then 0.25) are exact in every float dtype, so a tensor of any of them
steps bit for bit as the float lr."""
import numpy as np
import pytest

import minifused as mf
from minifused import backend, nn, optim
from minifused.optim import lr_scheduler as S

OPTIMIZERS = {"SGD": dict(momentum=0.9), "Adam": {}, "AdamW": {}, "RMSprop": dict(momentum=0.5), "Adagrad": {},
              "Adadelta": {}, "Adamax": {}, "NAdam": {}, "RAdam": {}, "Rprop": {}, "ASGD": {}, "Adafactor": {},
              "LBFGS": {}}
W0 = np.linspace(-1, 1, 12).reshape(3, 4)
LR, REFILL = 0.0625, 0.25
DTYPES = ["float32", "float64", "float16", "bfloat16"]


@pytest.fixture(autouse=True)
def _cpu_by_default(monkeypatch):
    monkeypatch.setattr(backend, "default_device", lambda: backend.CPU)


def _train(name, lr, device="cpu", dtype=np.float32, refill=REFILL):
    """Four steps of ``name`` on sum(p^2 + p) under a StepLR that halves the lr after each; then the lr is set to
    ``refill`` (a float lr by assignment, a tensor lr in place, as a user would) and a fifth step runs. Returns
    the parameter after each step, the optimizer and the scheduler."""
    p = nn.Parameter(mf.tensor(W0.astype(dtype), device=device))
    opt = getattr(optim, name)([p], lr=lr, **OPTIMIZERS[name])
    sched = S.StepLR(opt, 1, gamma=0.5)

    def closure():
        opt.zero_grad()
        loss = (p * p + p).sum()
        loss.backward()
        return loss

    out = []
    for i in range(5):
        if i == 4 and refill is not None:
            if isinstance(lr, mf.Tensor):
                lr.fill_(refill)
            else:
                opt.param_groups[0]["lr"] = refill
        if name == "LBFGS":
            opt.step(closure)
        else:
            closure()
            opt.step()
        if i < 3:
            sched.step()
        out.append(p.detach().cpu().numpy().copy())
    return out, opt, sched


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_tensor_lr_steps_as_the_float_lr(name, dtype):
    """Every step, through the scheduler's changes and a user's in-place change, equals the float lr's bit for bit;
    the group keeps the tensor itself, the scheduler's records are copies of it."""
    want, _, _ = _train(name, LR)
    lr = mf.tensor(LR, dtype=getattr(mf, dtype))
    got, opt, sched = _train(name, lr)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    group = opt.param_groups[0]
    assert group["lr"] is lr and float(lr) == REFILL
    assert isinstance(group["initial_lr"], mf.Tensor) and group["initial_lr"] is not lr
    assert float(group["initial_lr"]) == LR
    last, = sched.get_last_lr()
    assert isinstance(last, mf.Tensor) and last is not lr and float(last) == LR / 8
    assert isinstance(sched.base_lrs[0], mf.Tensor) and float(sched.base_lrs[0]) == LR


@pytest.mark.parametrize("make", [
    lambda o: S.ReduceLROnPlateau(o, patience=0),
    lambda o: S.CosineAnnealingWarmRestarts(o, 2),
    lambda o: S.OneCycleLR(o, 0.1, total_steps=6),
    lambda o: S.CyclicLR(o, 0.01, 0.1, 2),
    lambda o: S.SequentialLR(o, [S.ConstantLR(o, 0.5, 2), S.ExponentialLR(o, 0.9)], [2]),
    lambda o: S.ChainedScheduler([S.ConstantLR(o, 0.5, 2), S.ExponentialLR(o, 0.9)]),
    lambda o: optim.swa_utils.SWALR(o, 0.05, anneal_epochs=2),
    lambda o: S.CosineAnnealingLR(o, 4),
], ids=["plateau", "warm_restarts", "one_cycle", "cyclic", "sequential", "chained", "swalr", "cosine"])
def test_schedulers_fill_a_tensor_lr_in_place(make):
    """Each scheduler gives a tensor lr the float lr's values, written into the same tensor."""
    def lrs(lr):
        p = nn.Parameter(mf.zeros(2))
        opt = optim.SGD([p], lr=lr, momentum=0.9)
        sched = make(opt)
        out = []
        for _ in range(5):
            p.grad = mf.ones(2)
            opt.step()
            sched.step(1.0) if isinstance(sched, S.ReduceLROnPlateau) else sched.step()
            out.append(float(opt.param_groups[0]["lr"]))
        return out, opt

    want, _ = lrs(0.1)
    lr = mf.tensor(0.1)
    got, opt = lrs(lr)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)  # (the tensor holds float32)
    assert opt.param_groups[0]["lr"] is lr


@pytest.mark.parametrize("bad,match", [(mf.tensor([0.1, 0.2]), "one-element"), (mf.tensor(True), "real dtype"),
                                       (mf.tensor(-0.1), "invalid learning rate"),
                                       (mf.tensor(float("nan")), "invalid")])
def test_bad_tensor_lr_is_refused(bad, match):
    for name in OPTIMIZERS:
        with pytest.raises(ValueError, match=match):
            getattr(optim, name)([nn.Parameter(mf.zeros(2))], lr=bad)


def test_tensor_lr_in_state_dicts():
    """A tensor lr is saved as a tensor and loads as one; replacing it with another tensor or a float steps with
    the new value."""
    def adam(lr):
        p = nn.Parameter(mf.zeros(2))
        return p, optim.Adam([p], lr=lr)

    p, opt = adam(mf.tensor(0.01))
    p.grad = mf.ones(2)
    opt.step()
    sd = opt.state_dict()
    assert isinstance(sd["param_groups"][0]["lr"], mf.Tensor)
    q, other = adam(0.5)
    other.load_state_dict(sd)
    assert isinstance(other.param_groups[0]["lr"], mf.Tensor)
    q.grad = mf.ones(2)
    other.step()  # Adam's first step moves by lr
    np.testing.assert_allclose(q.numpy(), [-0.01, -0.01], rtol=1e-5)
    for lr in (mf.tensor(0.001), 0.002):
        before = p.numpy().copy()
        opt.param_groups[0]["lr"] = lr
        p.grad = mf.ones(2)
        opt.step()
        np.testing.assert_allclose(before - p.numpy(), [float(lr)] * 2, rtol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "NAdam", "Rprop", "ASGD"])
def test_tensor_lr_on_the_device_steps_as_the_float_lr(name):
    """On the GPU (the fused kernels, the recorded launches of the later steps): a tensor lr of each float dtype on
    the device, and one on the cpu, step as the float lr, a scheduler's and a user's in-place changes included."""
    want, _, _ = _train(name, LR, "cuda")
    for where, dtype in [("cuda", d) for d in DTYPES] + [("cpu", "float32")]:
        got, opt, _ = _train(name, mf.tensor(LR, dtype=getattr(mf, dtype), device=where), "cuda")
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b, err_msg=f"{where} {dtype}")


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["Adam", "SGD"])
def test_captured_step_reads_the_tensor_lr_at_replay(name):
    """Under capture_step, the scheduler's fill_ of a device tensor lr between replays is what each replay uses:
    the same losses and weights as the eager run."""
    from conftest import scheduled_training

    def run(graphed):
        lr = mf.tensor(0.05, device="cuda")
        return scheduled_training("cuda", graphed, lambda ps: getattr(optim, name)(ps, lr=lr),
                                  lambda opt: S.ExponentialLR(opt, gamma=0.7), 8), lr

    (eager, w_eager, _, _), _ = run(False)
    (graphed, w_graph, opt, step), lr = run(True)
    assert step.captures == 1 and opt.param_groups[0]["lr"] is lr
    assert float(lr) == pytest.approx(0.05 * 0.7 ** 8, rel=1e-6)
    np.testing.assert_allclose(graphed, eager, rtol=1e-5, atol=1e-6)
    for a, b in zip(w_graph, w_eager):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
def test_capture_refuses_a_cpu_tensor_lr():
    """A graph could not read a cpu tensor's later values: capturing a step with one raises, naming it."""
    from conftest import scheduled_training

    with pytest.raises(RuntimeError, match="tensor hyper-parameter on cpu"):
        scheduled_training("cuda", True, lambda ps: optim.Adam(ps, lr=mf.tensor(0.05)),
                           lambda opt: S.ExponentialLR(opt, gamma=0.7), 4)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("name", ["Adam", "AdamW", "NAdam", "RAdam", "Adamax"])
def test_tensor_betas_step_as_float_betas(name, device):
    """Adam's betas as one-element tensors (PyTorch's Adam takes them): the float betas' steps bit for bit, beta1
    changed in place between steps included."""
    def run(tensors):
        p = nn.Parameter(mf.tensor(W0.astype(np.float32), device=device))
        betas = tuple(mf.tensor(b, device=device) if tensors else b for b in (0.875, 0.9375))
        opt = getattr(optim, name)([p], lr=LR, betas=betas, weight_decay=0.01)
        out = []
        for i in range(5):
            if i == 3:
                if tensors:
                    betas[0].fill_(0.75)
                else:
                    opt.param_groups[0]["betas"] = (0.75, 0.9375)
            p.grad = mf.tensor(np.cos(W0 * (i + 1)).astype(np.float32), device=device)
            opt.step()
            out.append(p.detach().cpu().numpy().copy())
        return out

    for a, b in zip(run(True), run(False)):
        np.testing.assert_array_equal(a, b)
