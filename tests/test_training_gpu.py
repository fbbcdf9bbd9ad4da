"""Training on the GPU: bitwise determinism for a fixed seed, and a memory pool that stays flat.

Both use the MNIST models of examples/mnist/train.py on random batches (the data does not matter
here, the kernels and the allocation pattern do).
"""
import sys
from pathlib import Path

import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
from minifused import optim

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "mnist"))
import train as T  # noqa: E402

pytestmark = pytest.mark.gpu


def _run(name, steps, seed=0, opt="adam", hook=None):
    """Losses (as float32 bit patterns, read once at the end) of ``steps`` eager training steps."""
    import cupy

    mf.manual_seed(seed)
    model = T.build_model(name, dropout=0.3).to("cuda")
    o = optim.Adam(model.parameters(), lr=1e-3) if opt == "adam" else optim.SGD(model.parameters(), lr=0.05,
                                                                                   momentum=0.9)
    rs = cupy.random.RandomState(seed)
    x = rs.standard_normal((8, 64, 1, 28, 28), dtype=cupy.float32)
    y = rs.randint(0, 10, (8, 64)).astype(cupy.int64)
    losses = []
    for step in range(steps):
        o.zero_grad()
        loss = F.cross_entropy(model(mf.Tensor(x[step % 8])), mf.Tensor(y[step % 8]))
        loss.backward()
        o.step()
        losses.append(loss._data)
        if hook:
            hook(step)
    return np.array([float(v) for v in cupy.stack(losses).get()], dtype=np.float32).view(np.uint32)


@pytest.mark.parametrize("name", ["mlp", "cnn"])
@pytest.mark.parametrize("opt", ["adam", "sgd"])
def test_same_seed_gives_bitwise_identical_losses(name, opt):
    """20 steps twice with one seed (dropout included): every loss bit for bit the same; another
    seed differs. No kernel on these paths uses atomics (split-K and bias sums are fixed-order)."""
    a, b = _run(name, 20, opt=opt), _run(name, 20, opt=opt)
    assert np.array_equal(a, b), np.nonzero(a != b)
    assert not np.array_equal(a, _run(name, 20, seed=1, opt=opt))


def test_cnn_memory_pool_flat_over_1000_steps():
    """1,000 CNN training steps: after warm-up the pool's used bytes are the same after every step
    (nothing accumulates: no tape outlives its backward, no cache grows)."""
    import gc

    import cupy

    gc.collect()  # what earlier tests left for the collector must not be freed during the count
    pool = cupy.get_default_memory_pool()
    used = []
    _run("cnn", 1000, hook=lambda step: used.append(pool.used_bytes()))
    after_warmup = np.array(used[10:], dtype=np.int64)
    print(f"CNN pool used bytes: step 10 {used[10]}, step 999 {used[-1]}, min {after_warmup.min()}, "
          f"max {after_warmup.max()}, total held {pool.total_bytes()}")
    # the test keeps one 0-d loss per step (a 512-byte pool block each): exactly that growth is allowed
    per_step = np.diff(after_warmup)
    assert set(np.unique(per_step).tolist()) <= {0, 512}, np.unique(per_step)
