"""The MNIST example's training step on the CPU: minifused against PyTorch's CPU, same machine, same run.

The models are the example's (``examples/mnist/train.py``: the 784-1024-1024-10 MLP with dropout 0.2 and
PyTorch's examples/mnist CNN), PyTorch's twins get the same initial weights, both train with AdamW
(lr 1e-3, weight decay 0.01; PyTorch's fused CPU AdamW where it has one) on the same batches of MNIST-shaped
data (the real training set with ``--data-dir``, else standard normal images and random labels: the time
does not depend on the values). One step = forward, cross-entropy, backward, optimizer step. Both run on all
cores (NumPy's BLAS and PyTorch's intra-op threads); the frameworks take turns over ``--rounds`` rounds of
``--steps`` steps after a warm-up, and each reports its median step time.

Ratios ``cpu_<model>_time_over_torch_b<B>``: minifused's step time over PyTorch's (< 1: minifused is faster;
the target is <= 2). Results go to ``bench/results/mnist_cpu.json``; the "gpu" field names the CPU.

    python bench/mnist_cpu.py [--batch 128] [--models mlp,cnn] [--data-dir DIR]

PyTorch must be importable in the same interpreter (its CPU build is enough).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "examples" / "mnist"))

import minifused as mf  # noqa: E402
import minifused.functional as F  # noqa: E402
from harness import Results  # noqa: E402
from train import build_model  # noqa: E402


def cpu_name():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} cores)"
    except OSError:
        pass
    return f"{platform.processor() or 'cpu'} ({os.cpu_count()} cores)"


def torch_twin(torch, name, model):
    """PyTorch's version of the example's model, holding ``model``'s weights."""
    nn = torch.nn
    if name == "mlp":
        layers = [nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(), nn.Dropout(model.p),
                  nn.Linear(1024, 1024), nn.ReLU(), nn.Dropout(model.p), nn.Linear(1024, 10)]
        twin = nn.Sequential(*layers)
        names = {"1": "fc1", "4": "fc2", "7": "fc3"}
    else:
        twin = nn.Sequential(nn.Conv2d(1, 32, 3, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 1), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(), nn.Linear(9216, 128), nn.ReLU(),
                             nn.Dropout(0.5), nn.Linear(128, 10))
        names = {"0": "conv1", "2": "conv2", "7": "fc1", "10": "fc2"}
    ours = model.state_dict()
    twin.load_state_dict({k: torch.from_numpy(ours[f"{names[k.split('.')[0]]}.{k.split('.')[1]}"].numpy().copy())
                          for k in twin.state_dict()})
    return twin


def batches(args, count):
    if args.data_dir:
        train = mf.data.MNIST(args.data_dir, train=True)
        x, y = train.as_tensors(device="cpu")
        x, y = x.numpy(), y.numpy()
        order = np.random.default_rng(0).permutation(len(y))
        return [(x[order[i * args.batch:(i + 1) * args.batch]].reshape(-1, 1, 28, 28).astype(np.float32),
                 y[order[i * args.batch:(i + 1) * args.batch]].astype(np.int64)) for i in range(count)]
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((args.batch, 1, 28, 28)).astype(np.float32),
             rng.integers(0, 10, args.batch).astype(np.int64)) for _ in range(count)]


def minifused_step(model, data):
    opt = mf.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    tensors = [(mf.tensor(x), mf.tensor(y)) for x, y in data]

    def step(i):
        x, y = tensors[i % len(tensors)]
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def torch_step(torch, twin, data):
    try:
        opt = torch.optim.AdamW(twin.parameters(), lr=1e-3, weight_decay=0.01, fused=True)
    except (RuntimeError, TypeError):
        opt = torch.optim.AdamW(twin.parameters(), lr=1e-3, weight_decay=0.01)
    tensors = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in data]

    def step(i):
        x, y = tensors[i % len(tensors)]
        loss = torch.nn.functional.cross_entropy(twin(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


def timed(step, steps, offset):
    t0 = time.perf_counter()
    for i in range(steps):
        step(offset + i)
    return (time.perf_counter() - t0) / steps * 1e3


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--models", default="mlp,cnn")
    p.add_argument("--steps", type=int, default=10, help="steps per timed round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", default=None, help="results folder (default bench/results)")
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(os.cpu_count())
    results = Results("mnist_cpu", machine=cpu_name())
    data = batches(args, 8)
    for name in args.models.split(","):
        mf.manual_seed(0)
        model = build_model(name, dropout=0.2).to("cpu")
        steps = {"minifused": minifused_step(model, data), "torch": torch_step(torch, torch_twin(torch, name, model), data)}
        for step in steps.values():
            for i in range(args.warmup):
                step(i)
        times = {impl: [] for impl in steps}
        for r in range(args.rounds):
            for impl, step in steps.items():
                times[impl].append(timed(step, args.steps, r * args.steps))
        median = {impl: statistics.median(t) for impl, t in times.items()}
        case = f"{name}_train_step_b{args.batch}"
        for impl, ms in median.items():
            results.add(case, impl if impl == "minifused" else "torch_cpu_fused_adamw", ms, "ms")
        results.ratio(f"cpu_{name}_time_over_torch_b{args.batch}", median["minifused"] / median["torch"])
    results.write(args.out)


if __name__ == "__main__":
    main()
