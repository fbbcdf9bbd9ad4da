"""Peak device memory of one training step, minifused vs PyTorch, in the same run.

    python bench/memory.py

The MNIST MLP and CNN of examples/mnist/train.py (Adam, float32, dropout as in the example) at
batch 64 and 1024. After three warm-up steps (so optimizer state and caches exist), the peak is
taken over one more step: ours from the CuPy memory pool (an allocator hook reads the pool's used
bytes after every allocation: the high-water mark of live blocks), PyTorch's from
``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``. Both count the bytes of live
allocations, rounded to their allocators' 512-byte blocks, parameters and optimizer state included.
Ratio ``train_peak_over_torch_<model>_b<batch>`` (target: <= 1.0; ``cnn_b64`` is issue 8's case).
"""
from __future__ import annotations

import sys
from pathlib import Path

import cupy
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "mnist"))

from harness import Results, torch_or_none  # noqa: E402

import minifused as mf  # noqa: E402
import minifused.functional as F  # noqa: E402
from minifused import optim  # noqa: E402
import train as T  # noqa: E402


class PeakTracker:
    """The pool's used bytes after every allocation; the maximum is the step's peak."""

    def __init__(self):
        self.pool = cupy.get_default_memory_pool()
        self.peak = 0

    def malloc(self, size):
        mem = self.pool.malloc(size)
        self.peak = max(self.peak, self.pool.used_bytes())
        return mem

    def __enter__(self):
        cupy.cuda.Device().synchronize()
        self.peak = self.pool.used_bytes()
        cupy.cuda.set_allocator(self.malloc)
        return self

    def __exit__(self, *exc):
        cupy.cuda.set_allocator(self.pool.malloc)


def ours_peak(name, batch):
    mf.manual_seed(0)
    model = T.build_model(name, dropout=0.2).to("cuda")
    opt = optim.Adam(model.parameters(), lr=1e-3)
    rs = cupy.random.RandomState(0)
    x = mf.Tensor(rs.standard_normal((batch, 1, 28, 28), dtype=cupy.float32))
    y = mf.Tensor(rs.randint(0, 10, batch).astype(cupy.int64))

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    with PeakTracker() as t:
        step()
    return t.peak


def torch_peak(torch, name, batch):
    tnn = torch.nn
    if name == "mlp":
        model = tnn.Sequential(tnn.Flatten(), tnn.Linear(784, 1024), tnn.ReLU(), tnn.Dropout(0.2),
                               tnn.Linear(1024, 1024), tnn.ReLU(), tnn.Dropout(0.2), tnn.Linear(1024, 10))
    else:
        model = tnn.Sequential(tnn.Conv2d(1, 32, 3, 1), tnn.ReLU(), tnn.Conv2d(32, 64, 3, 1), tnn.ReLU(),
                               tnn.MaxPool2d(2), tnn.Dropout(0.25), tnn.Flatten(), tnn.Linear(9216, 128),
                               tnn.ReLU(), tnn.Dropout(0.5), tnn.Linear(128, 10))
    model = model.cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(batch, 1, 28, 28, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated()


def main():
    res = Results("memory")
    torch = torch_or_none()
    for name in ("mlp", "cnn"):
        for batch in (64, 1024):
            ours = ours_peak(name, batch)
            case = f"{name} adam fp32 b{batch} training step peak"
            res.add(case, "minifused", ours / 2**20, "MiB")
            if torch is not None:
                theirs = torch_peak(torch, name, batch)
                res.add(case, "pytorch", theirs / 2**20, "MiB")
                res.ratio(f"train_peak_over_torch_{name}_b{batch}", ours / theirs)
            cupy.get_default_memory_pool().free_all_blocks()
    res.write()


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
