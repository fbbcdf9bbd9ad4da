"""Optimizers against PyTorch's formulas computed by hand (float64 and fp32), state dicts and their
checks, failed steps, grad clipping, and (GPU) the fused multi-tensor kernels against the NumPy
references, every optimizer against torch.optim, captured steps. LR schedulers: test_lr_scheduler.py."""
import math

import numpy as np
import pytest

import minifused as mf
from minifused import nn, optim
from minifused.kernels import optim as K
from minifused.optim import lr_scheduler as S
from minifused import backend
from conftest import dev_array, host


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


def test_zero_grad_keeping_the_tensors_cuts_a_create_graph_gradient_from_its_graph():
    """zero_grad(set_to_none=False) zeroes each gradient in place; one built by backward(create_graph=True)
    first leaves its graph (PyTorch's detach_): a leaf that requires no grad, so the next backward adds into
    plain zeros instead of growing the old graph."""
    p = nn.Parameter(mf.ones(3, dtype=mf.float64))
    (p ** 3).sum().backward(create_graph=True)
    grad = p.grad
    assert grad.requires_grad and grad.grad_fn is not None
    optim.SGD([p], lr=0.1).zero_grad(set_to_none=False)
    assert p.grad is grad and not grad.requires_grad and grad.grad_fn is None
    np.testing.assert_array_equal(grad.numpy(), [0.0, 0.0, 0.0])
    (p * 2).sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), [2.0, 2.0, 2.0])


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_named_parameters_as_pytorch_2_13(device):
    """An optimizer of ``named_parameters()``: the same steps as of the tensors (the fused kernels' too), the
    names kept in the group and its state dict (``param_names``); names on some parameters or groups only are
    errors, as PyTorch's."""
    mf.manual_seed(0)  # (initial weights whose three steps all move them: the check below)
    model = nn.Linear(3, 2).to(device)
    plain = nn.Linear(3, 2).to(device)
    plain.load_state_dict(model.state_dict())
    named, unnamed = optim.Adam(model.named_parameters(), lr=0.1), optim.Adam(plain.parameters(), lr=0.1)
    x = mf.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), device=device)
    start = model.weight.cpu().numpy().copy()
    for _ in range(3):
        for m, opt in ((model, named), (plain, unnamed)):
            opt.zero_grad()
            m(x).pow(2).sum().backward()
            opt.step()
    np.testing.assert_array_equal(model.weight.cpu().numpy(), plain.weight.cpu().numpy())
    assert np.abs(model.weight.cpu().numpy() - start).min() > 1e-3  # (the steps moved every weight)
    assert named.param_groups[0]["param_names"] == ["weight", "bias"]
    assert named.state_dict()["param_groups"][0]["param_names"] == ["weight", "bias"]
    with pytest.raises(ValueError, match="Some param names are missing"):
        optim.SGD([("w", model.weight), model.bias], lr=0.1)
    with pytest.raises(ValueError, match="cannot add param group without names"):
        optim.SGD([{"params": [("w", model.weight)]}, {"params": [model.bias]}], lr=0.1)
    with pytest.raises(ValueError, match="same parameter more than once"):
        optim.SGD([model.weight, model.weight], lr=0.1)
    with pytest.raises(TypeError, match="ordered collections"):
        optim.SGD([{"params": {model.weight}}], lr=0.1)


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


def test_stateless_update_leaves_no_state_entry():
    """SGD without momentum keeps no state, so its state dict has none, as PyTorch's (an empty entry per
    parameter was listed); a round trip still resumes."""
    p = nn.Parameter(mf.ones(3))
    opt = optim.SGD([p], lr=0.1)
    p.grad = mf.ones(3)
    opt.step()
    sd = opt.state_dict()
    assert sd["state"] == {} and sd["param_groups"][0]["params"] == [0]
    assert len(opt.state) == 0 and p not in opt.state  # (not an entry of a None buffer: PyTorch's has none)
    opt2 = optim.SGD([nn.Parameter(mf.ones(3))], lr=0.5)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == 0.1
    opt.param_groups[0]["momentum"] = 0.9  # momentum switched on later: the buffer starts from that step's grad
    opt.step()
    np.testing.assert_allclose(p.detach().numpy(), [0.8] * 3, rtol=1e-6)
    assert list(opt.state) == [p] and opt.state[p]["momentum_buffer"].tolist() == [1.0] * 3


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
    # the layout itself, checked before anything is read (PyTorch's: a raw KeyError / TypeError / AttributeError)
    groups = r"Adam\.load_state_dict: expected 'param_groups' to be a list of dicts with a 'params' list"
    with pytest.raises(ValueError, match=groups + r".*got \[\{'lr': 0\.1\}\]"):
        opt.load_state_dict({"state": {}, "param_groups": [{"lr": 0.1}]})
    with pytest.raises(ValueError, match=groups + ".*got 3"):
        opt.load_state_dict({"state": {}, "param_groups": 3})
    with pytest.raises(ValueError, match="expected 'state' to be a dict of parameter indices to their state, got 3"):
        opt.load_state_dict({"state": 3, "param_groups": [{"params": [0, 1]}]})
    assert opt.state_dict()["param_groups"][0]["lr"] == 1e-3 and not opt.state


def test_optimizer_load_state_of_another_shape_raises_runtime_error_too():
    """State of the wrong shape is refused at load (PyTorch loads it and its step raises a RuntimeError: the error
    is both a ValueError and that RuntimeError), and nothing of the state dict is taken."""
    a, b = nn.Parameter(mf.ones(2)), nn.Parameter(mf.ones(3))
    opt = optim.Adam([a, b], lr=0.1)
    a.grad, b.grad = mf.ones(2), mf.ones(3)
    opt.step()
    sd = opt.state_dict()
    sd["state"][1]["exp_avg"] = mf.zeros(7)
    sd["param_groups"][0]["lr"] = 0.5
    with pytest.raises(RuntimeError, match=r"Adam\.load_state_dict: state 'exp_avg' of parameter 1 has shape \(7,\), "
                                           r"the parameter \(3,\)") as e:
        opt.load_state_dict(sd)
    assert isinstance(e.value, ValueError)
    assert opt.param_groups[0]["lr"] == 0.1 and opt.state[b]["exp_avg"].shape == (3,)


def test_step_with_a_loss_instead_of_a_closure():
    """optimizer.step(loss): PyTorch's raises a raw "'Tensor' object is not callable"; here the step says what a
    closure is, before anything changes."""
    p = nn.Parameter(mf.tensor([1.0, -2.0]))
    opt = optim.SGD([p], lr=0.1)
    loss = (p * p).sum()
    loss.backward()
    with pytest.raises(TypeError, match="SGD.step: closure must be a function that reevaluates the model and "
                                        "returns the loss, got Tensor"):
        opt.step(loss)
    np.testing.assert_array_equal(p.detach().numpy(), [1.0, -2.0])


@pytest.mark.parametrize("params,kind", [(None, "NoneType"), (3, "int")])
def test_optimizer_params_not_iterable(params, kind):
    with pytest.raises(TypeError, match=f"SGD: params argument given to the optimizer should be an iterable of "
                                        f"Tensors or dicts, but got {kind}"):
        optim.SGD(params, lr=0.1)


def test_state_dict_with_scheduler_keys_resumes():
    """A state dict saved while a scheduler was attached (its initial_lr, OneCycleLR's max_lr and momenta) or
    with a user's group key loads into a fresh optimizer, as PyTorch's: the usual resume (load, then a
    scheduler built with last_epoch) follows the run that was not interrupted. Another optimizer's
    hyper-parameters are still refused."""
    grads = [np.array([1.0, -2.0, 0.5], np.float32) * (i + 1) for i in range(6)]

    def train(opt, sched, p, steps):
        for g in steps:
            p.grad = mf.tensor(g)
            opt.step()
            sched.step()

    p = nn.Parameter(mf.zeros(3))
    opt = optim.SGD([{"params": [p], "name": "head"}], lr=0.1, momentum=0.9)
    train(opt, S.StepLR(opt, 2, 0.5), p, grads)
    q = nn.Parameter(mf.zeros(3))
    opt1 = optim.SGD([{"params": [q], "name": "head"}], lr=0.1, momentum=0.9)
    train(opt1, S.StepLR(opt1, 2, 0.5), q, grads[:3])
    saved = opt1.state_dict()
    assert saved["param_groups"][0]["initial_lr"] == 0.1
    r = nn.Parameter(mf.tensor(q.detach().numpy()))
    opt2 = optim.SGD([r], lr=0.1, momentum=0.9)
    opt2.load_state_dict(saved)
    assert opt2.param_groups[0]["name"] == "head" and opt2.param_groups[0]["initial_lr"] == 0.1
    train(opt2, S.StepLR(opt2, 2, 0.5, last_epoch=2), r, grads[3:])
    np.testing.assert_allclose(r.detach().numpy(), p.detach().numpy(), rtol=1e-12)
    assert opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"] == 0.1 * 0.5 ** 3

    a = nn.Parameter(mf.zeros(3))
    adam = optim.Adam([a], lr=1e-3)
    S.OneCycleLR(adam, max_lr=0.01, total_steps=10)
    fresh = optim.Adam([nn.Parameter(mf.zeros(3))], lr=1e-3)
    fresh.load_state_dict(adam.state_dict())
    assert {"initial_lr", "max_lr", "min_lr", "max_momentum", "base_momentum"} <= set(fresh.param_groups[0])
    with pytest.raises(ValueError, match=r"\['dampening', 'momentum', 'nesterov'\] that Adam does not use"):
        fresh.load_state_dict(opt.state_dict())


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


# ================================================================ PyTorch's formulas in float64, 20 steps
# Independent of minifused.kernels: each follows torch.optim's single-tensor code, written out.
SHAPES = [(7, 5), (33,), (1,), (2, 1, 3)]
STEPS = 20


def _problem(seed=0, shapes=SHAPES, steps=STEPS):
    """Initial weights and a fresh random gradient per step and parameter (float64)."""
    rng = np.random.default_rng(seed)
    w0 = [rng.standard_normal(s) for s in shapes]
    grads = [[rng.standard_normal(s) * rng.uniform(0.1, 2.0) for s in shapes] for _ in range(steps)]
    return w0, grads


def _f64_sgd(p, gs, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False):
    buf = None
    for g in gs:
        d = -g if maximize else g
        d = d + weight_decay * p
        if momentum:
            buf = d.copy() if buf is None else momentum * buf + (1 - dampening) * d
            d = d + momentum * buf if nesterov else buf
        p = p - lr * d
        yield p


def _f64_decay(p, g, lr, weight_decay, decoupled, maximize):
    """The Adam family's first lines: the gradient negated for maximize, then the parameter shrunk by
    1 - lr * weight_decay (decoupled) or weight_decay * p added to the gradient."""
    g = -g if maximize else g
    if decoupled:
        return p * (1 - lr * weight_decay), g
    return p, g + weight_decay * p


def _f64_adam(p, gs, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, maximize=False,
              decoupled=False):
    b1, b2 = betas
    m, v, vmax = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(gs, 1):
        p, g = _f64_decay(p, g, lr, weight_decay, decoupled, maximize)
        m = m + (1 - b1) * (g - m)
        v = b2 * v + (1 - b2) * g * g
        vmax = np.maximum(vmax, v)
        denom = np.sqrt(vmax if amsgrad else v) / math.sqrt(1 - b2 ** t) + eps
        p = p - lr / (1 - b1 ** t) * m / denom
        yield p


def _f64_rmsprop(p, gs, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False,
                 maximize=False):
    sq, ga, buf = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    for g in gs:
        g = -g if maximize else g
        g = g + weight_decay * p
        sq = alpha * sq + (1 - alpha) * g * g
        if centered:
            ga = alpha * ga + (1 - alpha) * g
            avg = np.sqrt(sq - ga * ga) + eps
        else:
            avg = np.sqrt(sq) + eps
        if momentum > 0:
            buf = momentum * buf + g / avg
            p = p - lr * buf
        else:
            p = p - lr * g / avg
        yield p


def _f64_adagrad(p, gs, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10,
                 maximize=False):
    s = np.full_like(p, initial_accumulator_value)
    for t, g in enumerate(gs, 1):
        g = -g if maximize else g
        g = g + weight_decay * p
        s = s + g * g
        p = p - lr / (1 + (t - 1) * lr_decay) * g / (np.sqrt(s) + eps)
        yield p


def _f64_adadelta(p, gs, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, maximize=False):
    sq, acc = np.zeros_like(p), np.zeros_like(p)
    for g in gs:
        g = -g if maximize else g
        g = g + weight_decay * p
        sq = rho * sq + (1 - rho) * g * g
        delta = np.sqrt(acc + eps) / np.sqrt(sq + eps) * g
        acc = rho * acc + (1 - rho) * delta * delta
        p = p - lr * delta
        yield p


def _f64_adamax(p, gs, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, maximize=False):
    b1, b2 = betas
    m, u = np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(gs, 1):
        g = (-g if maximize else g) + weight_decay * p
        m = b1 * m + (1 - b1) * g
        u = np.maximum(b2 * u, np.abs(g) + eps)
        p = p - lr / (1 - b1 ** t) * m / u
        yield p


def _f64_nadam(p, gs, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, momentum_decay=4e-3,
               decoupled_weight_decay=False, maximize=False):
    b1, b2 = betas
    m, v, mu_product = np.zeros_like(p), np.zeros_like(p), 1.0
    for t, g in enumerate(gs, 1):
        p, g = _f64_decay(p, g, lr, weight_decay, decoupled_weight_decay, maximize)
        mu = b1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
        mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
        mu_product = float(np.float32(mu_product) * np.float32(mu))  # PyTorch keeps it as a float32 tensor
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        denom = np.sqrt(v / (1 - b2 ** t)) + eps
        p = p - lr * (1 - mu) / (1 - mu_product) * g / denom - lr * mu_next / (1 - mu_product * mu_next) * m / denom
        yield p


def _f64_radam(p, gs, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled_weight_decay=False,
               maximize=False):
    b1, b2 = betas
    m, v = np.zeros_like(p), np.zeros_like(p)
    rho_inf = 2 / (1 - b2) - 1
    for t, g in enumerate(gs, 1):
        p, g = _f64_decay(p, g, lr, weight_decay, decoupled_weight_decay, maximize)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat = m / (1 - b1 ** t)
        rho_t = rho_inf - 2 * t * b2 ** t / (1 - b2 ** t)
        if rho_t > 5:
            rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            p = p - lr * m_hat * math.sqrt(1 - b2 ** t) / (np.sqrt(v) + eps) * rect
        else:
            p = p - lr * m_hat
        yield p


def _f64_rprop(p, gs, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), maximize=False):
    prev, size = np.zeros_like(p), np.full_like(p, lr)
    for g in gs:
        g = -g if maximize else g
        prod = g * prev
        size = np.clip(size * np.where(prod > 0, etas[1], np.where(prod < 0, etas[0], 1.0)), *step_sizes)
        g = np.where(prod < 0, 0.0, g)  # a sign change: no step, and no sign change seen next time
        p = p - np.sign(g) * size
        prev = g
        yield p


def _f64_asgd(p, gs, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0.0, maximize=False):
    eta = float(np.float32(lr))  # PyTorch keeps eta as a float32 tensor
    for t, g in enumerate(gs, 1):
        g = (-g if maximize else g) + weight_decay * p
        p = p * (1 - lambd * eta) - eta * g
        eta = float(np.float32(lr / (1 + lambd * lr * t) ** alpha))
        yield p


def _f64_adam_any(p, gs, decoupled_weight_decay=False, **kw):
    return _f64_adam(p, gs, decoupled=decoupled_weight_decay, **kw)


REFERENCES = {"SGD": _f64_sgd, "Adam": _f64_adam_any,
              "AdamW": lambda p, gs, **kw: _f64_adam(p, gs, decoupled=True, **kw),
              "RMSprop": _f64_rmsprop, "Adagrad": _f64_adagrad, "Adadelta": _f64_adadelta, "Adamax": _f64_adamax,
              "NAdam": _f64_nadam, "RAdam": _f64_radam, "Rprop": _f64_rprop, "ASGD": _f64_asgd}

# (optimizer, hyper-parameters): the configurations checked against float64 and, on GPUs, PyTorch
CONFIGS = [
    ("Adam", dict(lr=1e-2)),
    ("Adam", dict(lr=1e-2, weight_decay=0.1, amsgrad=True)),
    ("Adam", dict(lr=1e-2, betas=(0.8, 0.99), maximize=True)),
    ("AdamW", dict(lr=1e-2, weight_decay=0.05)),
    ("Adam", dict(lr=1e-2, weight_decay=0.05, decoupled_weight_decay=True)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.1)),
    ("RMSprop", dict(lr=1e-2)),
    ("RMSprop", dict(lr=1e-2, centered=True, momentum=0.9, weight_decay=0.01)),
    ("RMSprop", dict(lr=1e-3, alpha=0.9, momentum=0.5, maximize=True)),
    ("Adagrad", dict(lr=0.05)),
    ("Adagrad", dict(lr=0.05, lr_decay=0.01, weight_decay=0.01, initial_accumulator_value=0.1)),
    ("Adadelta", dict(weight_decay=0.01)),
    ("Adadelta", dict(lr=0.5, rho=0.95, maximize=True)),
    ("Adamax", dict(lr=1e-2, weight_decay=0.01)),
    ("Adamax", dict(lr=1e-2, betas=(0.8, 0.99), maximize=True)),
    ("NAdam", dict(lr=1e-2)),
    ("NAdam", dict(lr=1e-2, weight_decay=0.05, momentum_decay=0.01)),
    ("NAdam", dict(lr=1e-2, weight_decay=0.05, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", dict(lr=1e-2, weight_decay=0.01)),
    ("RAdam", dict(lr=1e-2, betas=(0.8, 0.9), weight_decay=0.05, decoupled_weight_decay=True, maximize=True)),
    ("Rprop", dict()),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2), maximize=True)),
    ("ASGD", dict(lr=1e-2)),
    ("ASGD", dict(lr=0.05, lambd=1e-2, alpha=0.6, t0=5, weight_decay=0.05)),
    ("ASGD", dict(lr=0.02, t0=0, weight_decay=0.1, maximize=True)),
]
CONFIG_IDS = [f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for n, kw in CONFIGS]


def _reference_run(name, kw, w0, grads):
    """[step][param] float64 weights after each step."""
    per_param = [list(REFERENCES[name](w, [g[i] for g in grads], **kw)) for i, w in enumerate(w0)]
    return [[per_param[i][t] for i in range(len(w0))] for t in range(len(grads))]


def _minifused_run(name, kw, w0, grads, dtype, device="cpu", groups=False):
    params = [nn.Parameter(mf.tensor(w.astype(dtype), device=device)) for w in w0]
    spec = [{"params": params[:2]}, {"params": params[2:]}] if groups else params
    opt = getattr(optim, name)(spec, **kw)
    out = []
    for g in grads:
        for p, gi in zip(params, g):
            p.grad = mf.tensor(gi.astype(dtype), device=device)
        opt.step()
        out.append([p.detach().cpu().numpy().astype(np.float64) for p in params])
    return out, opt, params


@pytest.mark.parametrize("name,kw", CONFIGS, ids=CONFIG_IDS)
def test_float64_steps_follow_pytorch_formulas(name, kw):
    w0, grads = _problem()
    got, _, _ = _minifused_run(name, kw, w0, grads, np.float64, groups=True)
    for g_step, w_step in zip(got, _reference_run(name, kw, w0, grads)):
        for g, w in zip(g_step, w_step):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name,kw", CONFIGS, ids=CONFIG_IDS)
def test_float32_steps_within_1e6_of_float64(name, kw):
    """The fp32 NumPy path (PyTorch's CPU arithmetic) against the float64 formulas after each of 20
    steps: within 1e-6 relative, or 1e-6 absolute where fp32 rounding of the weights (of size ~1) over
    20 momentum steps dominates an element that passed near zero (observed up to 2.5e-7). The exact
    check of the formulas is the float64 test above; the fp32 one against PyTorch is the GPU test."""
    w0, grads = _problem(1)
    w0 = [w.astype(np.float32).astype(np.float64) for w in w0]  # the same start for both
    grads = [[g.astype(np.float32).astype(np.float64) for g in step] for step in grads]
    got, _, _ = _minifused_run(name, kw, w0, grads, np.float32)
    for g_step, w_step in zip(got, _reference_run(name, kw, w0, grads)):
        for g, w in zip(g_step, w_step):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


# ================================================================ the new optimizers: state, errors, state dicts
NEW = {"RMSprop": dict(lr=1e-2, centered=True, momentum=0.9), "Adagrad": dict(lr=0.05, lr_decay=0.01),
       "Adadelta": dict(weight_decay=0.01), "Adamax": dict(lr=1e-2, weight_decay=0.01),
       "NAdam": dict(lr=1e-2, weight_decay=0.01), "RAdam": dict(lr=1e-2, betas=(0.9, 0.9)),
       "Rprop": dict(lr=0.05, etas=(0.4, 1.3)), "ASGD": dict(lr=0.05, t0=2, weight_decay=0.01)}


@pytest.mark.parametrize("name,kw,keys", [
    ("RMSprop", dict(), {"step", "square_avg"}),
    ("RMSprop", dict(momentum=0.9), {"step", "square_avg", "momentum_buffer"}),
    ("RMSprop", dict(centered=True), {"step", "square_avg", "grad_avg"}),
    ("Adagrad", dict(), {"step", "sum"}),
    ("Adadelta", dict(), {"step", "square_avg", "acc_delta"}),
    ("Adamax", dict(), {"step", "exp_avg", "exp_inf"}),
    ("NAdam", dict(), {"step", "mu_product", "exp_avg", "exp_avg_sq"}),
    ("RAdam", dict(), {"step", "exp_avg", "exp_avg_sq"}),
    ("Rprop", dict(), {"step", "prev", "step_size"}),
    ("ASGD", dict(), {"step", "eta", "mu", "ax"}),
])
def test_state_names_are_pytorchs(name, kw, keys):
    p = nn.Parameter(mf.ones(3))
    opt = getattr(optim, name)([p], **kw)
    p.grad = mf.ones(3)
    opt.step()
    st = opt.state_dict()["state"][0]
    assert set(st) == keys and st["step"] == 1


def test_adagrad_creates_its_state_in_the_constructor():
    p = nn.Parameter(mf.ones(2))
    st = optim.Adagrad([p], initial_accumulator_value=0.25).state_dict()["state"][0]
    assert st["step"] == 0
    np.testing.assert_array_equal(st["sum"].numpy(), [0.25, 0.25])


@pytest.mark.parametrize("make,pattern", [
    (lambda p: optim.RMSprop(p, alpha=-0.5), r"RMSprop: invalid alpha -0\.5; expected >= 0"),
    (lambda p: optim.RMSprop(p, lr=-1), "RMSprop: invalid learning rate -1"),
    (lambda p: optim.RMSprop(p, eps=-1e-8), "RMSprop: invalid epsilon"),
    (lambda p: optim.RMSprop(p, momentum=-0.1), "RMSprop: invalid momentum"),
    (lambda p: optim.RMSprop(p, weight_decay=float("nan")), "RMSprop: invalid weight_decay nan"),
    (lambda p: optim.Adagrad(p, lr_decay=-1), "Adagrad: invalid lr_decay -1"),
    (lambda p: optim.Adagrad(p, initial_accumulator_value=-1), "Adagrad: invalid initial_accumulator_value"),
    (lambda p: optim.Adagrad(p, eps=-1), "Adagrad: invalid epsilon"),
    (lambda p: optim.Adagrad(p, weight_decay=-1), "Adagrad: invalid weight_decay"),
    (lambda p: optim.Adadelta(p, rho=1.5), r"Adadelta: invalid rho 1\.5; expected in \[0, 1\.0\]"),
    (lambda p: optim.Adadelta(p, eps=-1), "Adadelta: invalid epsilon"),
    (lambda p: optim.Adamax(p, betas=(0.9, 1.0)), r"Adamax: invalid beta parameter at index 1 1\.0; expected in"),
    (lambda p: optim.NAdam(p, momentum_decay=-1), "NAdam: invalid momentum_decay -1"),
    (lambda p: optim.RAdam(p, lr=-1), "RAdam: invalid learning rate -1"),
    (lambda p: optim.RAdam(p, weight_decay=-0.1), "RAdam: invalid weight_decay"),
    (lambda p: optim.Rprop(p, lr=-1), "Rprop: invalid learning rate -1"),
    (lambda p: optim.Rprop(p, etas=(0.5, 0.9)), r"Rprop: invalid eta values \(0\.5, 0\.9\)"),
    (lambda p: optim.ASGD(p, lr=-1), "ASGD: invalid learning rate -1"),
    (lambda p: optim.ASGD(p, weight_decay=-1), "ASGD: invalid weight_decay -1"),
])
def test_bad_hyper_parameters_name_optimizer_and_argument(make, pattern):
    with pytest.raises(ValueError, match=pattern):
        make([nn.Parameter(mf.ones(2))])


@pytest.mark.parametrize("make,pattern", [
    (lambda p: optim.Adadelta(p, lr="1"), "Adadelta: invalid learning rate '1'; expected a number >= 0"),
    (lambda p: optim.SGD(p, lr=None), "SGD: invalid learning rate None; expected a number >= 0"),
    (lambda p: optim.Adam(p, weight_decay="0"), "Adam: invalid weight_decay '0'; expected a number >= 0"),
    (lambda p: optim.RMSprop(p, momentum=[0.9]), r"RMSprop: invalid momentum \[0\.9\]; expected a number"),
    (lambda p: optim.Adam(p, 0.1, 0.9), r"Adam: betas must be a pair \(beta1, beta2\), got 0\.9"),
])
def test_hyper_parameters_that_are_no_numbers_raise_type_error_as_pytorch(make, pattern):
    """PyTorch's checks compare the value with a bound, which raises TypeError for no number at all (a value out
    of range is a ValueError: above)."""
    with pytest.raises(TypeError, match=pattern):
        make([nn.Parameter(mf.ones(2))])


@pytest.mark.parametrize("key,value", [("lr", None), ("weight_decay", "0.1"), ("betas", (None, 0.999)),
                                       ("eps", None)])
def test_group_entry_set_to_no_number_raises_at_step(key, value):
    """A group's hyper-parameter set to None or a string after construction raises a TypeError naming it at the
    step (as PyTorch's step fails), the parameters unchanged, rather than stepping with NaN or a parsed string."""
    p = nn.Parameter(mf.tensor([1.0, -2.0]))
    opt = optim.Adam([p], lr=0.1)
    opt.param_groups[0][key] = value
    (p * p).sum().backward()
    with pytest.raises(TypeError, match=f"group entry '{key}' must be a number or a one-element tensor, got"):
        opt.step()
    np.testing.assert_array_equal(p.detach().numpy(), [1.0, -2.0])


@pytest.mark.parametrize("name,key,value", [("Adam", "betas", None), ("AdamW", "betas", (0.9,)),
                                            ("NAdam", "betas", 0.9), ("Rprop", "etas", (0.5, 1.2, 2.0))])
def test_group_pair_set_to_no_pair_raises_at_step(name, key, value):
    """A pair hyper-parameter (betas, etas) set by hand to no pair raises a TypeError naming it, the parameters
    unchanged, rather than a raw subscript error from inside the step."""
    p = nn.Parameter(mf.tensor([1.0, -2.0]))
    opt = getattr(optim, name)([p], lr=0.1)
    opt.param_groups[0][key] = value
    (p * p).sum().backward()
    with pytest.raises(TypeError, match=f"group entry '{key}' must be a pair of numbers, got"):
        opt.step()
    np.testing.assert_array_equal(p.detach().numpy(), [1.0, -2.0])


def test_adadelta_accepts_rho_one_and_zero():
    for rho in (0.0, 1.0):
        optim.Adadelta([nn.Parameter(mf.ones(2))], rho=rho)


@pytest.mark.parametrize("name", list(NEW))
def test_new_optimizer_state_dict_round_trip(name, tmp_path):
    w0, grads = _problem(2, steps=6)
    full, _, _ = _minifused_run(name, NEW[name], w0, grads, np.float32, groups=True)
    first, opt, _ = _minifused_run(name, NEW[name], w0, grads[:3], np.float32, groups=True)
    mf.save(opt.state_dict(), tmp_path / "o")
    _resume_equals(name, NEW[name], first[-1], mf.load(tmp_path / "o"), grads[3:], full[-1])


def _resume_equals(name, kw, weights, state_dict, grads, want):
    """A new optimizer on ``weights`` (two groups) loads ``state_dict``, steps through ``grads``, and ends bitwise
    on ``want``; returns it."""
    params = [nn.Parameter(mf.tensor(w.astype(np.float32))) for w in weights]
    opt = getattr(optim, name)([{"params": params[:2]}, {"params": params[2:]}], **kw)
    opt.load_state_dict(state_dict)
    for g in grads:
        for p, gi in zip(params, g):
            p.grad = mf.tensor(gi.astype(np.float32))
        opt.step()
    for p, w in zip(params, want):
        np.testing.assert_array_equal(p.numpy(), w.astype(np.float32))
    return opt


PYTORCH_SWITCHES = dict(foreach=None, fused=None, capturable=False, differentiable=False)


@pytest.mark.parametrize("name,kw", [("Adam", dict(lr=1e-2)), ("AdamW", dict(lr=1e-2)),
                                     ("SGD", dict(lr=0.05, momentum=0.9)), ("NAdam", dict(lr=1e-2)),
                                     ("RAdam", dict(lr=1e-2)), ("Rprop", dict(lr=1e-2)), ("ASGD", dict(lr=1e-2, t0=1))])
def test_state_dict_in_pytorchs_layout_loads(name, kw):
    """A PyTorch optimizer's state dict carries its implementation switches in every group and its step counts
    (and NAdam's mu_product) as float tensors: it loads, and the steps after it are those of the run it came
    from."""
    w0, grads = _problem(5, steps=6)
    full, _, _ = _minifused_run(name, kw, w0, grads, np.float32, groups=True)
    first, opt, _ = _minifused_run(name, kw, w0, grads[:3], np.float32, groups=True)
    sd = opt.state_dict()
    theirs = {"state": {i: {k: (mf.tensor(np.float32(v)) if k == "step" else v) for k, v in s.items()}
                        for i, s in sd["state"].items()},
              "param_groups": [dict(g, **PYTORCH_SWITCHES) for g in sd["param_groups"]]}
    opt2 = _resume_equals(name, kw, first[-1], theirs, grads[3:], full[-1])
    assert {k: opt2.param_groups[0][k] for k in PYTORCH_SWITCHES} == PYTORCH_SWITCHES  # loaded, as PyTorch's
    with pytest.raises(NotImplementedError, match=r"Adam\.load_state_dict: differentiable=True"):
        _trained()[0].load_state_dict(dict(sd, param_groups=[dict(g, differentiable=True) for g in sd["param_groups"]]))


@pytest.mark.parametrize("name,kw", [("Adam", dict(weight_decay=0.1)), ("AdamW", {}), ("SGD", dict(momentum=0.9)),
                                     ("RMSprop", dict(momentum=0.5)), ("Adagrad", {}), ("Adadelta", {}), ("Adamax", {}),
                                     ("NAdam", {}), ("RAdam", dict(decoupled_weight_decay=True, weight_decay=0.1)),
                                     ("Rprop", dict(etas=(0.4, 1.3))), ("ASGD", dict(t0=2, weight_decay=0.1))])
def test_resumes_from_a_pytorch_optimizer_state_dict(name, kw):
    """PyTorch's own state dict (tensors converted) loads into the same optimizer, and five more steps of both
    agree (CPU, fp32)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    w = rng.standard_normal((3, 2)).astype(np.float32)
    grads = [rng.standard_normal((3, 2)).astype(np.float32) for _ in range(10)]
    tw = torch.nn.Parameter(torch.tensor(w))
    topt = getattr(torch.optim, name)([tw], **dict(kw, lr=1e-2))
    for g in grads[:5]:
        tw.grad = torch.tensor(g)
        topt.step()
    sd = topt.state_dict()
    ours = {"state": {i: {k: mf.tensor(v.numpy()) if isinstance(v, torch.Tensor) else v for k, v in s.items()}
                      for i, s in sd["state"].items()}, "param_groups": sd["param_groups"]}
    p = nn.Parameter(mf.tensor(tw.detach().numpy().copy()))
    opt = getattr(optim, name)([p], **dict(kw, lr=1e-2))
    opt.load_state_dict(ours)
    for g in grads[5:]:
        tw.grad = torch.tensor(g)
        topt.step()
        p.grad = mf.tensor(g)
        opt.step()
    np.testing.assert_allclose(p.numpy(), tw.detach().numpy(), rtol=1e-6, atol=1e-6)


def _snapshot(opt, params):
    st = {i: {k: (v.numpy().copy() if hasattr(v, "numpy") else v) for k, v in s.items()}
          for i, s in opt.state_dict()["state"].items()}
    return [p.numpy().copy() for p in params], st, [{k: v for k, v in g.items() if k != "params"}
                                                    for g in opt.param_groups]


def _assert_same(a, b):
    (wa, sa, ga), (wb, sb, gb) = a, b
    for x, y in zip(wa, wb):
        np.testing.assert_array_equal(x, y)
    assert sa.keys() == sb.keys() and ga == gb
    for i in sa:
        assert sa[i].keys() == sb[i].keys()
        for k in sa[i]:
            np.testing.assert_array_equal(np.asarray(sa[i][k]), np.asarray(sb[i][k]))


def _trained(name="Adam", kw=None, dtype=np.float32):
    w0, grads = _problem(3, steps=2)
    _, opt, params = _minifused_run(name, kw if kw is not None else {}, w0, grads, dtype, groups=True)
    return opt, params


@pytest.mark.parametrize("case,pattern", [
    ("shape", r"Adam\.load_state_dict: state 'exp_avg_sq' of parameter 3 has shape \(2,\), the parameter \(2, 1, 3\)"),
    ("int_dtype", r"state 'exp_avg' of parameter 1 has dtype int64; expected a floating dtype"),
    ("bad_step", r"state 'step' of parameter 0 is 'three'; expected a step count"),
    ("step_shape", r"state 'step' of parameter 2 is .*expected a step count"),
    ("not_a_dict", r"the state of parameter 0 is a list"),
])
def test_load_state_dict_checks_every_entry_before_changing_anything(case, pattern):
    opt, params = _trained()
    before = _snapshot(opt, params)
    sd = opt.state_dict()
    bad = {"state": {i: dict(s) for i, s in sd["state"].items()},
           "param_groups": [dict(g, lr=123.0) for g in sd["param_groups"]]}
    if case == "shape":
        bad["state"][3]["exp_avg_sq"] = mf.zeros(2)
    elif case == "int_dtype":
        bad["state"][1]["exp_avg"] = mf.zeros(33, dtype=mf.int64)
    elif case == "bad_step":
        bad["state"][0]["step"] = "three"
    elif case == "step_shape":
        bad["state"][2]["step"] = mf.zeros(2)
    else:
        bad["state"][0] = [1, 2]
    with pytest.raises(ValueError, match=pattern):
        opt.load_state_dict(bad)
    _assert_same(before, _snapshot(opt, params))


def test_load_state_dict_casts_float_state_to_the_parameter_dtype_and_keeps_step():
    opt, params = _trained()
    sd = opt.state_dict()
    sd["state"] = {i: {k: (v.double() if k != "step" else v) for k, v in s.items()} for i, s in sd["state"].items()}
    sd["state"][0]["step"] = mf.tensor(2.0)  # PyTorch keeps its step as a float tensor
    opt2, params2 = _trained()
    opt2.load_state_dict(sd)
    st = opt2.state[params2[0]]
    assert st["exp_avg"].dtype == mf.float32 and st["exp_avg_sq"].dtype == mf.float32
    assert st["step"].dtype == mf.float32  # as it came
    np.testing.assert_array_equal(st["exp_avg"].numpy(), opt.state[params[0]]["exp_avg"].numpy())
    for p in params2:
        p.grad = mf.ones(*p.shape)
    opt2.step()  # the float step becomes a device counter and counts on
    assert opt2.state_dict()["state"][0]["step"] == 3


def test_load_state_dict_copies_state():
    """Loaded state does not share memory with the state dict (the next step would change both)."""
    opt, params = _trained("RMSprop", dict(momentum=0.9))
    sd = opt.state_dict()
    saved = sd["state"][0]["square_avg"].numpy().copy()
    opt.load_state_dict(sd)
    for p in params:
        p.grad = mf.ones(*p.shape)
    opt.step()
    np.testing.assert_array_equal(sd["state"][0]["square_avg"].numpy(), saved)


@pytest.mark.parametrize("name", ["Adam", "SGD", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "Rprop",
                                  "ASGD"])
def test_step_with_a_bad_gradient_changes_nothing(name):
    """A gradient whose data no longer fits (set behind the grad setter's check) is found before the
    first launch: no group's weights or state move, in the first group either."""
    opt, params = _trained(name, dict(lr=0.1, momentum=0.9) if name == "SGD" else {})
    for p in params:
        p.grad = mf.ones(*p.shape)
    before = _snapshot(opt, params)
    params[-1]._grad = mf.ones(5)
    with pytest.raises(RuntimeError, match=rf"{name}\.step: the gradient of parameter 3 has shape \(5,\)"):
        opt.step()
    _assert_same(before, _snapshot(opt, params))


@pytest.mark.parametrize("name", list(NEW))
def test_master_weights_on_the_cpu_follow_float32(name):
    """float16 parameters with master_weights: the update runs on fp32 masters and fp32 state."""
    w0, grads = _problem(4, steps=5)
    w0 = [w.astype(np.float16).astype(np.float64) for w in w0]
    grads = [[g.astype(np.float16).astype(np.float64) for g in s] for s in grads]
    want, _, _ = _minifused_run(name, NEW[name], w0, grads, np.float32)
    params = [nn.Parameter(mf.tensor(w.astype(np.float16))) for w in w0]
    opt = getattr(optim, name)(params, master_weights=True, **NEW[name])
    for g in grads:
        for p, gi in zip(params, g):
            p.grad = mf.tensor(gi.astype(np.float16))
        opt.step()
    for p, w in zip(params, want[-1]):
        assert p.dtype == mf.float16 and opt.state[p]["master"].dtype == mf.float32
        np.testing.assert_array_equal(opt.state[p]["master"].numpy(), w.astype(np.float32))
        np.testing.assert_array_equal(p.numpy(), w.astype(np.float32).astype(np.float16))


# ================================================================ GPU: new kernels vs reference, PyTorch, graphs
def _adaptive_call(name, fn_kind, arrays, steps, hyper, **flags):
    """One RMSprop / Adagrad / Adadelta / Adamax / NAdam / RAdam update through ``kernels.optim_adaptive``: the
    kernel (``fn_kind="kernel"``, CuPy arrays) or the NumPy reference (``"ref"``). ``arrays``: params, grads
    and three state lists (RMSprop square_avg, grad_avg, momentum_buffer; Adagrad uses the first, Adadelta,
    Adamax and RAdam the first two, NAdam all three: its moments and its 0-d float32 mu_products)."""
    from minifused.kernels import optim_adaptive as KA

    p, g, s1, s2, s3 = arrays
    fn = getattr(KA, name + ("_ref" if fn_kind == "ref" else ""))
    if name == "rmsprop":
        fn(p, g, s1, s2, s3, steps, hyper, **flags)
    elif name == "adagrad":
        fn(p, g, s1, steps, hyper, **flags)
    elif name == "nadam":
        fn(p, g, s1, s2, s3, steps, hyper, **flags)
    else:
        fn(p, g, s1, s2, steps, hyper, **flags)


ADAPTIVE = [
    ("rmsprop", [1e-2, 0.99, 1e-8, 0.0, 0.0], dict()),
    ("rmsprop", [1e-2, 0.9, 1e-8, 0.01, 0.9], dict(centered=True, use_momentum=True)),
    ("rmsprop", [1e-3, 0.95, 1e-6, 0.0, 0.5], dict(use_momentum=True, maximize=True)),
    ("adagrad", [5e-2, 0.01, 0.0, 1e-10], dict()),
    ("adagrad", [5e-2, 0.0, 0.01, 1e-10], dict(maximize=True)),
    ("adadelta", [1.0, 0.9, 1e-6, 0.01], dict()),
    ("adadelta", [0.5, 0.95, 1e-6, 0.0], dict(maximize=True)),
    ("adamax", [2e-3, 0.9, 0.999, 1e-8, 0.01], dict()),
    ("adamax", [1e-2, 0.8, 0.99, 1e-8, 0.0], dict(maximize=True)),
    ("nadam", [2e-3, 0.9, 0.999, 1e-8, 0.01, 4e-3], dict()),
    ("nadam", [1e-2, 0.8, 0.99, 1e-8, 0.05, 1e-2], dict(decoupled=True, maximize=True)),
    ("radam", [1e-3, 0.9, 0.999, 1e-8, 0.01], dict()),  # steps 3-8: both sides of rho_t = 5
    ("radam", [1e-2, 0.8, 0.9, 1e-8, 0.05], dict(decoupled=True, maximize=True)),
]


def _mu_products(name, lists):
    """NAdam's third state list is its 0-d float32 mu_products (1 at first; a product of coefficients < 1)."""
    if name != "nadam":
        return lists
    return [*lists[:2], [np.full((), 0.5 + 0.1 * i, np.float32) for i in range(len(lists[2]))]]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float64, 1e-12), (np.float16, 4e-3)])
@pytest.mark.parametrize("name,hyper,flags", ADAPTIVE, ids=[f"{n}{i}" for i, (n, _, _) in enumerate(ADAPTIVE)])
def test_adaptive_kernels_match_reference(name, hyper, flags, dtype, tol):
    import cupy

    rng = np.random.default_rng(0)
    p, g = (_arrays(rng, SIZES, dtype) for _ in range(2))
    s1, s2, s3 = _mu_products(name, [[np.abs(a) * 0.1 for a in _arrays(rng, SIZES, dtype)] for _ in range(3)])
    if name == "rmsprop" and flags.get("centered"):
        s1 = [a + b * b for a, b in zip(s1, s2)]  # square_avg >= grad_avg**2, as it stays in a run
    start = [2 + i % 4 for i in range(len(SIZES))]
    steps, steps_d = _steps(start), _steps(start, cupy)
    ref = (p, g, s1, s2, s3)
    dev = [[cupy.asarray(a) for a in lst] for lst in ref]
    for _ in range(3):
        _adaptive_call(name, "ref", ref, steps, np.array(hyper), **flags)
        _adaptive_call(name, "kernel", dev, steps_d, cupy.asarray(np.array(hyper)), **flags)
    for r_list, d_list in zip(ref, dev):
        for r, d in zip(r_list, d_list):
            np.testing.assert_allclose(cupy.asnumpy(d).astype(np.float64), r.astype(np.float64), rtol=tol, atol=tol)
    assert [int(t) for t in steps_d] == [int(t) for t in steps] == [s + 3 for s in start]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float16, backend.bfloat16])
@pytest.mark.parametrize("name,hyper,flags", ADAPTIVE[1:2] + ADAPTIVE[3:4] + ADAPTIVE[5:6] + ADAPTIVE[7:8]
                         + ADAPTIVE[9:10] + ADAPTIVE[12:13], ids=["rmsprop", "adagrad", "adadelta", "adamax", "nadam",
                                                                 "radam"])
def test_adaptive_kernels_master_weights_and_scaler(name, hyper, flags, dtype):
    """fp32 masters and state, gradients unscaled by the scaler's inv_scale; a found inf skips it all."""
    import cupy

    rng = np.random.default_rng(3)
    w = _arrays(rng, SIZES, np.float32)
    p = [a.astype(dtype) for a in w]
    g = [(a * 1024).astype(dtype) for a in _arrays(rng, SIZES, np.float32)]
    s1, s2, s3 = _mu_products(name, [[np.zeros_like(a) for a in w] for _ in range(3)])
    amp = np.array([1024.0, 1 / 1024.0, 0.0, 0.0], np.float32)
    steps, steps_d = _steps([0] * len(SIZES)), _steps([0] * len(SIZES), cupy)
    dev = [[dev_array(a, "cuda") for a in lst] for lst in (p, g, s1, s2, s3, w)]
    for found in (0.0, 1.0, 0.0):
        amp[2] = found
        _adaptive_call(name, "ref", (p, g, s1, s2, s3), steps, np.array(hyper), masters=w, amp=amp, **flags)
        _adaptive_call(name, "kernel", dev[:5], steps_d, cupy.asarray(np.array(hyper)), masters=dev[5],
                       amp=cupy.asarray(amp), **flags)
    for r_list, d_list in zip((w, s1, s2, s3), (dev[5], dev[2], dev[3], dev[4])):
        for r, d in zip(r_list, d_list):  # (fp32 masters of half parameters: a few roundings apart)
            np.testing.assert_allclose(host(d), r, rtol=1e-4, atol=2e-5)
    for r, d in zip(p, dev[0]):
        assert d.dtype == dtype
        np.testing.assert_allclose(host(d).astype(np.float32), r.astype(np.float32), rtol=1e-2, atol=1e-6)
    assert [int(t) for t in steps_d] == [2] * len(SIZES)  # the skipped step did not count


def _torch_variants(name):
    """PyTorch constructor options to compare with: its single-tensor path and, where it has one on
    CUDA, its fused one."""
    return [dict(foreach=False)] + ([dict(fused=True)] if name in ("Adam", "AdamW", "SGD") else [])


TORCH_CASES = [(n, kw, v) for n, kw in CONFIGS for v in _torch_variants(n)]


@pytest.mark.gpu
@pytest.mark.parametrize("name,kw,variant", TORCH_CASES,
                         ids=[f"{i}-{n}-{'fused' if 'fused' in v else 'single'}" for i, (n, _, v)
                              in enumerate(TORCH_CASES)])
def test_fp32_steps_match_pytorch(name, kw, variant, torch):
    """Same weights, same fresh random gradients, 20 steps: every element of every parameter (and
    every state tensor) within 1e-6 relative of PyTorch's fp32 update on the GPU."""
    w0, grads = _problem(7)
    w0 = [w.astype(np.float32) for w in w0]
    grads = [[g.astype(np.float32) for g in s] for s in grads]
    ours, opt, params = _minifused_run(name, kw, w0, grads, np.float32, device="cuda", groups=True)
    tp = [torch.tensor(w, device="cuda", requires_grad=True) for w in w0]
    try:
        topt = getattr(torch.optim, name)([{"params": tp[:2]}, {"params": tp[2:]}], **kw, **variant)
    except (TypeError, RuntimeError, ValueError) as e:  # an older PyTorch without this fused optimizer
        pytest.skip(f"torch.optim.{name}({variant}): {e}")
    for t, step in enumerate(grads):
        for p, gi in zip(tp, step):
            p.grad = torch.tensor(gi, device="cuda")
        topt.step()
        for o, p in zip(ours[t], tp):
            torch.testing.assert_close(torch.tensor(o, dtype=torch.float32, device="cuda"), p.detach(),
                                       rtol=1e-6, atol=1e-7)
    for i, p in enumerate(params):
        st, tst = opt.state[p], topt.state[tp[i]]
        assert set(st) == set(tst), (set(st), set(tst))
        for k in st:
            if k != "step":
                # (PyTorch's fused kernels round the moments' updates as one FMA, foreach=False as two
                # steps, which ours follow: the parameters agree to 1e-6 either way, the moments to 1e-4)
                torch.testing.assert_close(torch.as_tensor(st[k].cpu().numpy(), device="cuda"), tst[k].cuda(),
                                           rtol=1e-4 if variant.get("fused") else 1e-5, atol=1e-6 if variant.get("fused") else 1e-7)
            else:
                assert int(st[k].item()) == int(tst[k].item()) == STEPS


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "Rprop", "ASGD"])
def test_captured_step_follows_step_count_and_scheduler(name):
    """A step of the new optimizers captured into a CUDA graph replays like eager steps while a
    scheduler changes the lr every step (and Adagrad's decayed lr follows the device step count)."""
    from conftest import scheduled_training

    def run(graphed):
        kw = dict(NEW[name], lr_decay=0.1) if name == "Adagrad" else NEW[name]
        return scheduled_training("cuda", graphed, lambda ps: getattr(optim, name)(ps, **kw),
                                  lambda opt: S.ExponentialLR(opt, gamma=0.8), 8)

    eager, w_eager, _, _ = run(False)
    graphed, w_graph, opt, step = run(True)
    assert step.captures == 1
    np.testing.assert_allclose(graphed, eager, rtol=1e-5, atol=1e-6)
    for a, b in zip(w_graph, w_eager):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert opt.state_dict()["state"][0]["step"] == 8


@pytest.mark.parametrize("name", list(NEW))
def test_grad_scaler_unscales_and_skips_for_new_optimizers(name):
    """GradScaler.step: gradients of a scaled loss are unscaled inside the update; a step with an inf
    gradient changes nothing (weights, state, step count)."""
    from minifused import amp

    def setup():
        p = nn.Parameter(mf.tensor(np.array([1.0, -2.0, 0.5], np.float32)))
        return p, getattr(optim, name)([p], **NEW[name])

    p_ref, o_ref = setup()
    p, opt = setup()
    scaler = amp.GradScaler(init_scale=1024.0)
    x = mf.tensor(np.array([0.3, -0.1, 0.2], np.float32))
    for bad in (False, True, False):
        (p_ref * x).sum().backward()
        if not bad:
            o_ref.step()
        o_ref.zero_grad()
        scaler.scale((p * x).sum()).backward()
        if bad:
            p.grad = mf.tensor(np.array([np.inf, 0.0, 0.0], np.float32))
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
    np.testing.assert_allclose(p.numpy(), p_ref.numpy(), rtol=1e-6, atol=1e-7)
    assert opt.state_dict()["state"][0]["step"] == 2


@pytest.mark.parametrize("decoupled,weight_decay,maximize,beta1", [(False, 0.0, False, 0.9), (True, 0.01, False, 0.9),
                                                                   (False, 0.1, True, 0.3)])
@pytest.mark.parametrize("chunks", [0, 2])
def test_adam_cpu_fast_path_is_the_reference_bit_for_bit(decoupled, weight_decay, maximize, beta1, chunks):
    """The in-place cpu path of a plain float32 parameter takes the reference's operations in its order: the
    same bits as the general path (forced here by an identity gradient scale), also where it updates a large
    parameter chunk by chunk (``chunks`` whole chunks of ``ADAM_CHUNK`` elements and a part of one)."""
    from minifused.kernels import optim as KO

    shape = (1000,) if chunks == 0 else (chunks * KO.ADAM_CHUNK // 64 + 1, 64)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(shape).astype(np.float32) for _ in range(2)]
    runs = []
    for amp in (None, np.array([1.0, 1.0, 0.0, 0.0], np.float32)):
        p, m, v = arrays[0].copy(), np.zeros(shape, np.float32), np.zeros(shape, np.float32)
        steps = [np.zeros((), np.int64)]
        for k in range(3):
            g = (arrays[1] * (k + 1)).astype(np.float32)
            KO.adam_ref([p], [g], [m], [v], None, steps, np.array([1e-2, beta1, 0.999, 1e-8, weight_decay]),
                        decoupled=decoupled, maximize=maximize, amp=amp)
        runs.append((p, m, v))
    for fast, general in zip(*runs):
        np.testing.assert_array_equal(fast, general)


def test_pytorch_implementation_flags_are_accepted():
    """foreach / fused / capturable, which PyTorch code passes for its fastest updates, are accepted by every
    optimizer (minifused's updates are always fused multi-tensor kernels, and capturable); the same steps
    result; differentiable=True, non-bool flags and foreach with fused (PyTorch's RuntimeError) are refused."""
    w0 = np.array([1.0, -2.0, 3.0], np.float32)
    for cls, kw in [(optim.SGD, dict(lr=0.1, momentum=0.9)), (optim.Adam, dict(lr=0.1)), (optim.AdamW, dict(lr=0.1)),
                    (optim.RMSprop, dict(lr=0.01)), (optim.Adagrad, dict(lr=0.1)), (optim.Adadelta, dict(lr=1.0))]:
        results = []
        for flags in ({}, dict(foreach=True, capturable=True), dict(fused=True, capturable=True)):
            p = nn.Parameter(mf.tensor(w0))
            opt = cls([p], **kw, **flags)
            for _ in range(2):
                opt.zero_grad()
                (p * p).sum().backward()
                opt.step()
            results.append(p.detach().numpy())
        np.testing.assert_array_equal(results[0], results[1])
        np.testing.assert_array_equal(results[0], results[2])
        with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together"):
            cls([nn.Parameter(mf.tensor(w0))], **kw, foreach=True, fused=True)
        with pytest.raises(NotImplementedError, match="differentiable=True"):
            cls([nn.Parameter(mf.tensor(w0))], **kw, differentiable=True)
        with pytest.raises(TypeError, match="fused must be None or a bool"):
            cls([nn.Parameter(mf.tensor(w0))], **kw, fused="yes")


def test_step_hooks_run_around_every_optimizer_step():
    """register_step_pre_hook / register_step_post_hook, as PyTorch's: called with (optimizer, args, kwargs)
    around step (a pre-hook may replace the arguments), on every optimizer class and a user's subclass;
    handle.remove() stops them."""
    class Halving(optim.SGD):
        def step(self, closure=None):
            return super().step(closure)

    for make in (lambda ps: optim.SGD(ps, lr=0.1), lambda ps: optim.Adam(ps), lambda ps: optim.AdamW(ps),
                 lambda ps: optim.RMSprop(ps), lambda ps: Halving(ps, lr=0.1)):
        p = nn.Parameter(mf.ones(2))
        opt = make([p])
        calls = []
        pre = opt.register_step_pre_hook(lambda o, args, kwargs: calls.append(("pre", o is opt, args)))
        post = opt.register_step_post_hook(lambda o, args, kwargs: calls.append(("post", o is opt, args)))
        p.grad = mf.ones(2)
        opt.step()
        assert calls == [("pre", True, (opt,)), ("post", True, (opt,))], (type(opt).__name__, calls)
        pre.remove()
        post.remove()
        opt.step()
        assert len(calls) == 2
    p = nn.Parameter(mf.ones(1))
    opt = optim.SGD([p], lr=0.1)
    opt.register_step_pre_hook(lambda o, args, kwargs: ((o, lambda: mf.tensor(3.0)), {}))  # swaps in a closure
    p.grad = mf.ones(1)
    assert float(opt.step()) == 3.0
    opt.register_step_pre_hook(lambda o, args, kwargs: "bad")
    with pytest.raises(RuntimeError, match="must return None or a tuple"):
        opt.step()


# ================================================================ recorded steps replayed (GPU)
REPLAY_CASES = [
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2), mf.float32),
    ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=5e-4, master_weights=True), mf.bfloat16),
    ("SGD", dict(lr=0.1), mf.float32),
    ("Adam", dict(lr=1e-2, amsgrad=True), mf.float32),
    ("AdamW", dict(lr=1e-2, master_weights=True), mf.float16),
]


@pytest.mark.gpu
@pytest.mark.parametrize("name,kw,dtype", REPLAY_CASES)
def test_replayed_steps_equal_full_steps(monkeypatch, name, kw, dtype, device="cuda"):
    """From its second step on, a fused optimizer replays the last step's launches with the new gradients
    while nothing else moved. Bitwise the same weights and state as an optimizer that never replays, through
    steps that change what replays must notice: a scheduler's lr, a parameter without a gradient, a
    gradient in another layout, a parameter's array replaced, a loaded state dict, a new group, a flag."""
    replays = []
    monkeypatch.setattr(K.Replay, "__call__", lambda self, grads, _run=K.Replay.__call__: (
        replays.append(len(grads)), _run(self, grads))[1])
    rng = np.random.default_rng(5)
    shapes = [(6, 5), (5,), (3, 4, 3, 3)]
    w0 = [rng.standard_normal(s).astype(np.float32) for s in shapes]

    def build():
        ps = [nn.Parameter(mf.tensor(w, dtype=dtype, device=device)) for w in w0]
        return ps, getattr(optim, name)([{"params": ps[:2]}, {"params": ps[2:]}], **kw)

    (ps, opt), (qs, ref) = build(), build()
    ref._replay = lambda step_name: False  # the full step, every time
    e0 = rng.standard_normal(4).astype(np.float32)
    extra = [nn.Parameter(mf.tensor(e0, dtype=dtype, device=device)) for _ in range(2)]
    replayed = []
    for t in range(12):
        grads = [rng.standard_normal(s).astype(np.float32) for s in shapes + [(4,)]]
        for a, b, g in zip(ps + extra[:1], qs + extra[1:], grads):
            a.grad = mf.tensor(g, dtype=dtype, device=device)
            b.grad = mf.tensor(g, dtype=dtype, device=device)
        if t == 3:
            ps[1].grad = qs[1].grad = None
        if t == 4:
            for p in (ps[0], qs[0]):  # a gradient laid out column-major: the full step brings it to the weight's
                p.grad = mf.tensor(grads[0].T, dtype=dtype, device=device).contiguous().t()
                assert not p.grad.is_contiguous()
        if t == 5:
            for o in (opt, ref):
                o.param_groups[0]["lr"] *= 0.5
        if t == 6:
            for p in (ps[2], qs[2]):
                p.data = p.data.clone()
        if t == 7:
            for o in (opt, ref):
                o.load_state_dict(o.state_dict())
        if t == 8:
            opt.add_param_group({"params": [extra[0]]})
            ref.add_param_group({"params": [extra[1]]})
        if t == 9:
            flag = "nesterov" if name == "SGD" and kw.get("nesterov") else "maximize"
            for o in (opt, ref):
                o.param_groups[0][flag] = not o.param_groups[0][flag]
        before = len(replays)
        opt.step()
        ref.step()
        replayed += [t] * (len(replays) - before)
        for a, b in zip(ps + extra[:1], qs + extra[1:]):
            np.testing.assert_array_equal(host(a.float()), host(b.float()), err_msg=f"step {t}")
        for a, b in zip(ps, qs):  # (.get: reading state[p] would store an empty state, which the next step notices)
            for k, v in opt.state.get(a, {}).items():
                w = ref.state[b][k]
                if isinstance(v, mf.Tensor):
                    np.testing.assert_array_equal(host(v.float()), host(w.float()), err_msg=f"{k}, step {t}")
    # which steps replayed: every step whose only change since the last full step is the gradients' values or
    # the lr (the first step is full, with momentum SGD's second too: its first sets the momentum buffers); the
    # steps after the other changes (3, 4, 6, 7, 8, 9) are full, but for plain SGD's after the loaded state dict
    # (7): it keeps no state for a load to replace
    stateless = name == "SGD" and not kw.get("momentum")
    first = [1] if name != "SGD" or stateless else []
    assert replayed == first + [2, 5] + ([7] if stateless else []) + [10, 11], replayed


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adam_steps_a_zero_dimensional_parameter_as_a_one_element_one(name, dtype):
    """A 0-d parameter (a learned scalar: a temperature, a scale) takes the cpu fast path as a one-element view:
    the same bits as a (1,) parameter given the same gradients (NumPy's 0-d ufunc results are scalars, which the
    in-place update could not write into: it raised)."""
    def run(shape):
        p = nn.Parameter(mf.tensor(np.full(shape, 1.0, dtype)))
        opt = getattr(optim, name)([p], lr=0.1, weight_decay=0.1)
        for i in range(3):
            p.grad = mf.tensor(np.full(shape, 0.5 * (i + 1), dtype))
            opt.step()
        return p.detach().numpy(), opt.state[p]["exp_avg"].numpy()

    (p0, m0), (p1, m1) = run(()), run((1,))
    assert p0.shape == () and p0.reshape(1).tobytes() == p1.tobytes() and m0.reshape(1).tobytes() == m1.tobytes()


def test_adagrad_fills_every_accumulator_with_the_constructors_value():
    """PyTorch's Adagrad fills ``sum`` with the constructor's initial_accumulator_value for every parameter, also
    in groups that give their own or are added later (the group keeps its entry, unused): the first step is then
    the same for all three parameters."""
    a, b, c = (nn.Parameter(mf.tensor(np.ones(2))) for _ in range(3))
    opt = optim.Adagrad([{"params": [a]}, {"params": [b], "initial_accumulator_value": 5.0}], lr=0.1,
                        initial_accumulator_value=0.5)
    opt.add_param_group({"params": [c], "initial_accumulator_value": 3.0})
    for p in (a, b, c):
        p.grad = mf.tensor(np.full(2, 0.5))
    opt.step()
    for p in (a, b, c):
        np.testing.assert_array_equal(opt.state[p]["sum"].numpy(), [0.75, 0.75])
        np.testing.assert_allclose(p.detach().numpy(), 1 - 0.1 * 0.5 / (np.sqrt(0.75) + 1e-10), rtol=1e-15)
    assert opt.param_groups[1]["initial_accumulator_value"] == 5.0


@pytest.mark.parametrize("make,zeros", [
    (lambda ps: optim.SGD(ps, lr=0.1), ("momentum", "dampening", "weight_decay")),
    (lambda ps: optim.Adam(ps), ("weight_decay",)),
    (lambda ps: optim.RMSprop(ps), ("weight_decay", "momentum")),
    (lambda ps: optim.Adagrad(ps), ("lr_decay", "weight_decay", "initial_accumulator_value")),
    (lambda ps: optim.Adadelta(ps), ("weight_decay",)),
    (lambda ps: optim.Adamax(ps), ("weight_decay",)),
    (lambda ps: optim.NAdam(ps), ("weight_decay",)),
    (lambda ps: optim.RAdam(ps), ("weight_decay",)),
    (lambda ps: optim.ASGD(ps), ("weight_decay",)),
])
def test_zero_defaults_are_the_int_0_of_pytorchs_signatures(make, zeros):
    """PyTorch's documented signatures default these to the int 0 (SGD(params, lr=0.001, momentum=0, dampening=0,
    weight_decay=0, ...)): groups, state dicts and print(optimizer) show ``momentum: 0``, not ``0.0``."""
    opt = make([nn.Parameter(mf.ones(2))])
    for key in zeros:
        value = opt.param_groups[0][key]
        assert value == 0 and type(value) is int, (key, value)
        assert f"\n    {key}: 0\n" in repr(opt)


def test_a_custom_optimizer_with_a_required_lr_as_pytorchs_optimizer_required():
    """``from torch.optim.optimizer import Optimizer, required`` (optimizers written for older PyTorch, LARS ...):
    ``lr=required`` in the signature; a group without an lr of its own is refused (PyTorch's ValueError), one with
    it takes its own."""
    from minifused.optim.optimizer import Optimizer, required

    class PlainSGD(Optimizer):
        def __init__(self, params, lr=required):
            if lr is not required and lr < 0.0:
                raise ValueError(f"Invalid learning rate: {lr}")
            super().__init__(params, dict(lr=lr))

        @mf.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    p.add_(p.grad, alpha=-group["lr"])

    a, b = nn.Parameter(mf.ones(2, dtype=mf.float64)), nn.Parameter(mf.ones(1, dtype=mf.float64))
    with pytest.raises(ValueError, match="PlainSGD: parameter group didn't specify a value of required optimization "
                                         "parameter lr"):
        PlainSGD([a])
    opt = PlainSGD([{"params": [a], "lr": 0.5}, {"params": [b], "lr": 0.25}])
    a.grad, b.grad = mf.ones(2, dtype=mf.float64), mf.ones(1, dtype=mf.float64)
    opt.step()
    assert a.tolist() == [0.5, 0.5] and b.tolist() == [0.75]
    assert repr(required) == "<required parameter>" and opt.defaults["lr"] is required


def test_a_custom_optimizers_setstate_calls_the_base_as_pytorchs():
    """Optimizers written for PyTorch (copies of its old SGD: LARS ...) override ``__setstate__`` to fill in group
    entries and call ``super().__setstate__(state)`` first; a deep copy or an unpickled one then works."""
    import copy
    import pickle

    p = nn.Parameter(mf.ones(2, dtype=mf.float64))
    opt = _SetstateSGD([p], lr=0.5, momentum=0.9)
    for clone in (copy.deepcopy(opt), pickle.loads(pickle.dumps(opt))):
        assert clone.param_groups[0]["nesterov"] is False and clone.param_groups[0]["lr"] == 0.5
        assert clone.state_dict()["state"][0]["momentum_buffer"].tolist() == [1.0, 1.0]


class _SetstateSGD(optim.SGD):  # (at module level: pickled by name)
    def __init__(self, params, **kwargs):
        super().__init__(params, **kwargs)
        self.param_groups[0]["params"][0].grad = mf.ones(2, dtype=mf.float64)
        self.step()
        del self.param_groups[0]["nesterov"]

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)


def test_global_step_hooks_run_around_every_optimizers_own():
    """optim.optimizer.register_optimizer_step_pre_hook / _post_hook, as PyTorch's: on every optimizer, the global
    pre-hooks before its own, the global post-hooks after its own (a global pre-hook may replace the arguments);
    once for a subclass's step that calls its base; handle.remove() stops them."""
    from minifused.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    class Mine(optim.SGD):
        def step(self, closure=None):
            return super().step(closure)

    calls = []
    p = nn.Parameter(mf.ones(2, dtype=mf.float64))
    sgd, mine = optim.SGD([p], lr=0.5), Mine([p], lr=0.5)
    sgd.register_step_pre_hook(lambda o, args, kwargs: calls.append("pre"))
    sgd.register_step_post_hook(lambda o, args, kwargs: calls.append("post"))
    handles = [register_optimizer_step_pre_hook(lambda o, args, kwargs: calls.append(("global pre", type(o).__name__))),
               register_optimizer_step_post_hook(lambda o, args, kwargs: calls.append("global post"))]
    try:
        p.grad = mf.ones(2, dtype=mf.float64)
        sgd.step()
        mine.step()
    finally:
        for h in handles:
            h.remove()
    sgd.step()
    assert calls == [("global pre", "SGD"), "pre", "post", "global post", ("global pre", "Mine"), "global post",
                     "pre", "post"]
    assert p.tolist() == [-0.5, -0.5]
