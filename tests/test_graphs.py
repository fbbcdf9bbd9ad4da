"""capture_step: replays equal eager steps, re-capture on a new shape, no host sync inside."""
import numpy as np
import pytest

import minifused as mf
import minifused.functional as F


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
