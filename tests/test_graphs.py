"""capture_step: replays equal eager steps, re-capture on a new shape, no host sync inside."""
import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
from minifused import backend


def make_problem(device, seed=0):
    rng = np.random.default_rng(seed)
    w1 = mf.tensor(rng.standard_normal((16, 20)) * 0.3, dtype=mf.float32, device=device, requires_grad=True)
    w2 = mf.tensor(rng.standard_normal((4, 16)) * 0.3, dtype=mf.float32, device=device, requires_grad=True)
    batches = [(mf.tensor(rng.standard_normal((n, 20)), dtype=mf.float32, device=device),
                mf.tensor(rng.standard_normal((n, 4)), dtype=mf.float32, device=device))
               for n in [8] * 6 + [3] * 4 + [8] * 2]
    return [w1, w2], batches


def sgd_step(params):
    w1, w2 = params

    def step(x, y):
        for p in params:
            p.grad = None
        # F.linear runs on cuBLASLt through nvmath, which captures into graphs
        # (CuPy's own cuBLAS calls refuse stream capture).
        loss = ((F.linear(F.linear(x, w1).relu(), w2) - y) ** 2).mean()
        loss.backward()
        with mf.no_grad():
            for p in params:
                p -= 0.1 * p.grad
        return loss

    return step


def run(device, graphed):
    params, batches = make_problem(device)
    step = sgd_step(params)
    if graphed:
        step = mf.capture_step(step, warmup=2)
    losses = [step(x, y).item() for x, y in batches]
    return losses, [p.detach().cpu().numpy() for p in params], step


def test_cpu_runs_eagerly():
    eager, weights, _ = run("cpu", graphed=False)
    graphed, weights_g, step = run("cpu", graphed=True)
    assert graphed == eager and step.captures == 0
    for a, b in zip(weights, weights_g):
        np.testing.assert_array_equal(a, b)


def test_warmup_must_be_positive():
    with pytest.raises(ValueError, match="warmup"):
        mf.capture_step(lambda x: x, warmup=0)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["transposed", "side_stream"])
def test_replays_take_strided_inputs_and_follow_the_callers_stream(layout):
    """A replay copies a non-contiguous batch into its static buffer (elementwise, not memcpy), and runs
    on whatever stream the caller is on, after the work already queued there."""
    import cupy

    eager, weights, _ = run("cuda", graphed=False)
    params, batches = make_problem("cuda")
    step = mf.capture_step(sgd_step(params), warmup=2)
    losses = []
    side = cupy.cuda.Stream(non_blocking=True)
    for i, (x, y) in enumerate(batches):
        if layout == "transposed":  # the same values, from a transposed array
            x = x.t().contiguous().t()
            assert not x._data.flags.c_contiguous
            losses.append(step(x, y).item())
        else:
            with side:
                # queued on the side stream just before the replay: the replay must see it
                xs = mf.zeros(x.shape, device="cuda")
                cupy.cuda.runtime.memcpyAsync(xs._data.data.ptr, x._data.data.ptr, x._data.nbytes,
                                              cupy.cuda.runtime.memcpyDeviceToDevice, side.ptr)
                losses.append(step(xs, y).item())
    assert step.captures == 2
    np.testing.assert_allclose(losses, eager, rtol=1e-5, atol=1e-6)
    for a, p in zip(weights, params):
        np.testing.assert_allclose(a, p.detach().cpu().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
def test_graph_replay_matches_eager_and_recaptures_per_shape():
    eager, weights, _ = run("cuda", graphed=False)
    graphed, weights_g, step = run("cuda", graphed=True)
    assert step.captures == 2  # batch 8, then the partial batch of 3
    np.testing.assert_allclose(graphed, eager, rtol=1e-5, atol=1e-6)
    for a, b in zip(weights, weights_g):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
def test_host_sync_inside_capture_is_named():
    x = mf.randn(4, device="cuda")

    def bad_step(t):
        return (t * 2).sum().item()

    step = mf.capture_step(bad_step, warmup=1)
    step(x)  # the eager warm-up is fine
    with pytest.raises(RuntimeError, match=r"Tensor.item\(\).*captured step"):
        step(x)
    y = (x * 3).sum()  # the stream is usable again after the failed capture
    assert abs(y.item() - 3 * x.sum().item()) < 1e-5


def _adam_run(device, graphed, steps=10):
    """Adam with a per-step cosine lr (conftest.scheduled_training)."""
    from conftest import scheduled_training

    from minifused import optim

    return scheduled_training(device, graphed, lambda ps: optim.Adam(ps, lr=1e-2),
                              lambda opt: optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps), steps)[:3]


@pytest.mark.gpu
def test_captured_adam_follows_step_count_and_scheduler():
    eager, w_eager, _ = _adam_run("cuda", graphed=False)
    graphed, w_graph, opt = _adam_run("cuda", graphed=True)
    cpu, w_cpu, _ = _adam_run("cpu", graphed=False)
    print("eager", eager, "\ngraphed", graphed, "\ncpu", cpu)
    np.testing.assert_allclose(graphed, eager, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(eager, cpu, rtol=1e-3, atol=1e-5)
    for a, b in zip(w_graph, w_eager):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert opt.state_dict()["state"][0]["step"] == 10


@pytest.mark.gpu
def test_setting_lr_inside_a_capture_is_refused():
    from minifused import optim

    w = mf.randn(4, device="cuda", requires_grad=True)
    opt = optim.SGD([w], lr=0.1)

    def step(x):
        opt.zero_grad()
        (w * x).sum().backward()
        opt.param_groups[0]["lr"] *= 0.5
        opt.step()
        return w.detach()

    g = mf.capture_step(step, warmup=1)
    g(mf.ones(4, device="cuda"))
    with pytest.raises(RuntimeError, match="hyper-parameters changed .* inside a captured step"):
        g(mf.ones(4, device="cuda"))


@pytest.mark.gpu
def test_dropout_draws_new_masks_on_every_replay():
    x = mf.ones(64, 256, device="cuda")
    step = mf.capture_step(lambda t: F.dropout(t, 0.5, True) * 1.0, warmup=1)
    masks = [(step(x).cpu().numpy() != 0) for _ in range(5)]  # eager, capture, 3 replays
    assert step.captures == 1
    for m in masks:
        assert 0.45 < m.mean() < 0.55
    for a, b in zip(masks[1:], masks[2:]):
        assert (a != b).mean() > 0.3, "a replay repeated the previous dropout mask"


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1024, 3000, 4096, 70000], ids=lambda n: f"N{n}")  # two-warp rows, odd, block rows, tiled
def test_pdl_kernels_in_graph_match_eager(n, monkeypatch):
    """Inside a capture marked as capture_step marks it, the LayerNorm forward and backward and the softmax forward launch with
    programmatic dependent launch (sm_90+): a chain where each kernel reads what the ones before wrote
    (a CuPy kernel launched without PDL, then PDL after PDL) replays to the eager results, bit for bit,
    on new inputs."""
    import cupy as cp
    from cuda.bindings import driver

    from minifused import kernels
    from minifused.kernels import norm as KN
    from minifused.kernels import softmax as KS

    rs = cp.random.RandomState(n)
    m = 257
    a, b = (rs.standard_normal((m, n), dtype=cp.float32).astype(cp.float16) for _ in range(2))
    w1, b1, w2 = (rs.standard_normal(n, dtype=cp.float32).astype(cp.float16) for _ in range(3))

    def chain():
        x = a + b
        y1, mean, rstd1 = KN.norm_forward(x, w1, b1, 1e-5)
        y2, _, rstd = KN.norm_forward(y1, w2, None, 1e-5, rms=True)
        dx, dw, db = KN.norm_backward(y2, x, w1, mean, rstd1)  # its two kernels: rows, then dw/db
        return KS.softmax_forward(y2, log=True), y2, rstd, dx, dw, db

    launches, real = [], driver.cuLaunchKernelEx
    monkeypatch.setattr(driver, "cuLaunchKernelEx", lambda *args: launches.append(1) or real(*args))
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        chain()  # compiles and plans outside the capture
        stream.synchronize()
        with backend.capturing("test"):  # as capture_step marks its captures
            stream.begin_capture()
            got = chain()
            graph = stream.end_capture()
        assert len(launches) == (5 if kernels.has_pdl(cp.cuda.runtime.getDevice()) else 0)
        for t in (a, b):  # new inputs, then replay
            t[...] = rs.standard_normal((m, n), dtype=cp.float32).astype(cp.float16)
        graph.launch(stream)
        stream.synchronize()
    want = chain()
    for g, e in zip(got, want):
        assert bool(cp.isfinite(e).all())
        cp.testing.assert_array_equal(g, e)


def test_replays_copy_batches_laid_out_alike_as_bytes():
    """A replay copies a batch into its static input as bytes where the two lay their elements out alike in dense
    memory (C-contiguous, or both channels-last); otherwise element by element."""
    from minifused.graphs import _dense_alike

    nchw = np.zeros((2, 3, 4, 5), np.float32)
    cl = np.zeros((2, 4, 5, 3), np.float32).transpose(0, 3, 1, 2)
    assert _dense_alike(nchw, nchw.copy()) and _dense_alike(cl, cl.copy(order="K"))
    assert not _dense_alike(cl, nchw) and not _dense_alike(nchw, cl)
    assert not _dense_alike(nchw[:, :, ::2], nchw[:, :, ::2].copy())  # (a strided view: not dense)


@pytest.mark.gpu
@pytest.mark.parametrize("make_opt", ["sgd", "adam"])
def test_gpu_channels_last_model_captured_matches_eager(make_opt):
    """A channels-last CNN (channels-last weights, gradients and optimizer state; 64 channels, so the
    channels-last kernels read the weights unpacked) trained under capture_step equals its eager run."""
    import minifused.nn as nn

    def build():
        mf.manual_seed(11)
        model = nn.Sequential(nn.Conv2d(64, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                              nn.Conv2d(64, 64, 3, stride=2, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                              nn.Linear(64, 10)).to("cuda", memory_format=mf.channels_last)
        opt = (mf.optim.SGD(model.parameters(), lr=0.05, momentum=0.9) if make_opt == "sgd"
               else mf.optim.Adam(model.parameters(), lr=1e-3))
        return model, opt

    rng = np.random.default_rng(3)
    batches = [(mf.tensor(rng.standard_normal((8, 64, 8, 8)), dtype=mf.float32, device="cuda")
                .contiguous(memory_format=mf.channels_last), mf.tensor(rng.integers(0, 10, 8), device="cuda"))
               for _ in range(6)]
    runs = []
    for graphed in (False, True):
        model, opt = build()

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss.detach()

        step = mf.capture_step(step, warmup=2) if graphed else step
        runs.append(([float(step(x, y).item()) for x, y in batches], model))
    np.testing.assert_allclose(runs[1][0], runs[0][0], rtol=1e-4, atol=1e-5)
    w = runs[1][1][0].weight
    assert w.is_contiguous(memory_format=mf.channels_last) and not w.is_contiguous()
    for a, b in zip(runs[0][1].parameters(), runs[1][1].parameters()):
        np.testing.assert_allclose(b.detach().cpu().numpy(), a.detach().cpu().numpy(), rtol=1e-4, atol=1e-5)
