"""MNIST end to end on the GPU: parity with PyTorch, the example's default recipe, and throughput.

In one run, with the same data (whole dataset on the GPU, the same per-epoch batch
order for both frameworks), models, optimizer and PyTorch's default initialization:

* parity: Adam lr 1e-3, batch 64, MLP 5 epochs and CNN 3 epochs, seeds 0 and 1, both
  frameworks; ratios ``mlp_acc_minus_torch`` / ``cnn_acc_minus_torch`` (mean test
  accuracy of minifused minus PyTorch's, in points);
* the example's default recipe (``examples/mnist/train.py`` defaults, 10 epochs):
  ``mlp_test_acc`` / ``cnn_test_acc`` (percent);
* throughput: seconds per 60,000-sample training epoch with Adam at batch 64, 256 and
  1024 for both models and both frameworks (after a warm-up pass, synchronized only
  at the epoch's ends); ratios ``<model>_eager_over_torch_eager_b<B>`` = PyTorch's
  seconds / ours (> 1: minifused is faster).

Sections run in that order of cost-effectiveness (throughput, MLP parity, MLP recipe,
CNN parity, CNN recipe); one that would not fit in ``--budget`` seconds is skipped
and results are written after every section.

    python bench/mnist.py [--budget 420] [--quick]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "examples" / "mnist"))

import numpy as np  # noqa: E402

import minifused as mf  # noqa: E402
from harness import Results, torch_or_none  # noqa: E402
from minifused import backend, optim  # noqa: E402
from minifused.data import MNIST, DataLoader, epoch_order  # noqa: E402

import train as example  # noqa: E402

T0 = time.perf_counter()
MEASURED = {}  # (model, impl, batch) -> s per epoch, from the throughput section
DEVICE = "cuda"
LIMIT = None  # smoke runs on the CPU: --device cpu --limit N


def elapsed():
    return time.perf_counter() - T0


# ---------------------------------------------------------------- minifused side
class Ours:
    name = "minifused"

    def __init__(self, train_set, test_set):
        self.train_set, self.test_set = train_set, test_set
        self.test_loader = DataLoader(test_set, 1000, device=DEVICE)

    def setup(self, model, seed, batch):
        mf.manual_seed(seed)
        self.model = example.build_model(model, 0.0).to(DEVICE)
        self.opt = optim.Adam(self.model.parameters(), lr=1e-3)
        self.loader = DataLoader(self.train_set, batch, shuffle=True, seed=seed, device=DEVICE)

    def epoch(self, e, max_steps=None):
        self.loader.set_epoch(e)
        loader = self.loader
        if max_steps is not None:
            loader = _take(self.loader, max_steps)
        return example.train_epoch(self.model, self.opt, None, loader)

    def accuracy(self):
        return example.evaluate(self.model, self.test_loader)

    @staticmethod
    def sync():
        backend.synchronize()


def _take(it, n):
    for i, b in enumerate(it):
        if i >= n:
            break
        yield b


# ---------------------------------------------------------------- PyTorch side
class Torch:
    name = "pytorch"

    def __init__(self, torch, train_set, test_set, order):
        self.torch = torch
        nn = torch.nn

        def tensors(ds):
            x, y = ds.as_tensors("cpu")
            return (torch.from_numpy(np.ascontiguousarray(x.data)).cuda(),
                    torch.from_numpy(np.ascontiguousarray(y.data)).cuda())

        self.x, self.y = tensors(train_set)
        self.xt, self.yt = tensors(test_set)
        self.order = order  # (seed, epoch) -> host permutation, the same as minifused's loader

        class Net(nn.Module):  # PyTorch's examples/mnist network
            def __init__(self):
                super().__init__()
                self.conv1 = nn.Conv2d(1, 32, 3, 1)
                self.conv2 = nn.Conv2d(32, 64, 3, 1)
                self.dropout1 = nn.Dropout(0.25)
                self.dropout2 = nn.Dropout(0.5)
                self.fc1 = nn.Linear(9216, 128)
                self.fc2 = nn.Linear(128, 10)

            def forward(self, x):
                F = torch.nn.functional
                x = F.relu(self.conv2(F.relu(self.conv1(x))))
                x = self.dropout1(F.max_pool2d(x, 2)).flatten(1)
                return self.fc2(self.dropout2(F.relu(self.fc1(x))))

        self.builders = {
            "mlp": lambda: nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024),
                                         nn.ReLU(), nn.Linear(1024, 10)),
            "cnn": Net,
        }

    def setup(self, model, seed, batch):
        torch = self.torch
        torch.manual_seed(seed)
        self.model = self.builders[model]().cuda()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.seed, self.batch = seed, batch

    def epoch(self, e, max_steps=None):
        torch = self.torch
        F = torch.nn.functional
        perm = torch.from_numpy(self.order(self.seed, e)).cuda()
        n, bs = len(perm), self.batch
        steps = -(-n // bs) if max_steps is None else max_steps
        self.model.train()
        total = None
        for b in range(steps):
            idx = perm[b * bs:(b + 1) * bs]
            loss = F.cross_entropy(self.model(self.x[idx]), self.y[idx])
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            d = loss.detach()
            total = d if total is None else total + d
        return total.item() / steps

    def accuracy(self):
        torch = self.torch
        self.model.eval()
        correct = None
        with torch.no_grad():
            for i in range(0, len(self.yt), 1000):
                hits = (self.model(self.xt[i:i + 1000]).argmax(1) == self.yt[i:i + 1000]).sum()
                correct = hits if correct is None else correct + hits
        self.model.train()
        return 100.0 * int(correct.item()) / len(self.yt)

    def sync(self):
        self.torch.cuda.synchronize()


# ---------------------------------------------------------------- sections
def throughput(res, impls, models, batches, quick):
    for model in models:
        for bs in batches:
            secs = {}
            for impl in impls:
                impl.setup(model, 0, bs)
                impl.epoch(0, max_steps=20)  # warm-up: plans, kernels, allocator
                impl.sync()
                if quick:
                    steps = min(200, -(-60000 // bs))
                    t = time.perf_counter()
                    impl.epoch(1, max_steps=steps)
                    impl.sync()
                    secs[impl.name] = (time.perf_counter() - t) * (60000 / (steps * bs))
                else:
                    t = time.perf_counter()
                    impl.epoch(1)
                    impl.sync()
                    secs[impl.name] = time.perf_counter() - t
                res.add(f"{model} adam b{bs} epoch", impl.name, secs[impl.name], "s")
                MEASURED[(model, impl.name, bs)] = secs[impl.name]
            if "pytorch" in secs and "minifused" in secs:
                res.ratio(f"{model}_eager_over_torch_eager_b{bs}", secs["pytorch"] / secs["minifused"])


def parity(res, impls, model, epochs, seeds):
    accs = {impl.name: [] for impl in impls}
    for seed in seeds:
        for impl in impls:
            impl.setup(model, seed, 64)
            t = time.perf_counter()
            for e in range(epochs):
                loss = impl.epoch(e)
            acc = impl.accuracy()
            accs[impl.name].append(acc)
            res.add(f"{model} parity seed{seed} {epochs}ep test_acc", impl.name, acc, "%")
            res.add(f"{model} parity seed{seed} final train loss", impl.name, loss, "loss")
            print(f"  ({time.perf_counter() - t:.1f} s)", flush=True)
    for name, v in accs.items():
        res.add(f"{model} parity mean test_acc", name, statistics.mean(v), "%")
    if "pytorch" in accs:
        res.ratio(f"{model}_acc_minus_torch", statistics.mean(accs["minifused"]) - statistics.mean(accs["pytorch"]))


def recipe(res, model, epochs):
    argv = ["--model", model, "--epochs", str(epochs), "--device", DEVICE, "--no-progress"]
    if LIMIT:
        argv += ["--limit", str(LIMIT)]
    summary = example.main(argv)
    for e, (acc, s) in enumerate(zip(summary["history"]["test_acc"], summary["history"]["epoch_s"])):
        res.add(f"{model} default recipe epoch {e + 1} test_acc", "minifused", acc, "%")
    res.add(f"{model} default recipe s/epoch (batch 128)", "minifused", summary["s_per_epoch"], "s")
    res.ratio(f"{model}_test_acc", summary["test_acc"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=float, default=420.0, help="seconds for the whole run")
    ap.add_argument("--quick", action="store_true", help="short throughput runs, 1 seed, fewer epochs")
    ap.add_argument("--sections", default="throughput,mlp_parity,mlp_recipe,cnn_parity,cnn_recipe")
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--device", default="cuda", help="cpu only for a smoke run (no results written)")
    ap.add_argument("--limit", type=int, default=None, help="training images (smoke runs)")
    args = ap.parse_args()
    global DEVICE, LIMIT
    DEVICE, LIMIT = args.device, args.limit
    train_set, test_set = MNIST(train=True), MNIST(train=False)
    if LIMIT:
        train_set.data, train_set.targets = train_set.data[:LIMIT], train_set.targets[:LIMIT]
        test_set.data, test_set.targets = test_set.data[:LIMIT // 2], test_set.targets[:LIMIT // 2]
    ours = Ours(train_set, test_set)
    impls = [ours]
    torch = torch_or_none()
    if torch is not None:
        impls.append(Torch(torch, train_set, test_set, lambda seed, e: epoch_order(len(train_set), seed, e)))
    else:
        print("PyTorch not importable: minifused only, no ratios against it", flush=True)
    res = Results("mnist")
    seeds = (0,) if args.quick else (0, 1)
    models = args.models.split(",")
    # (section, estimated seconds on an H100, function)
    plan = {
        "throughput": (60, lambda: throughput(res, impls, models, (64, 256, 1024), args.quick)),
        "mlp_parity": (45, lambda: parity(res, impls, "mlp", 2 if args.quick else 5, seeds)),
        "mlp_recipe": (25, lambda: recipe(res, "mlp", 3 if args.quick else 10)),
        "cnn_parity": (60, lambda: parity(res, impls, "cnn", 1 if args.quick else 3, seeds)),
        "cnn_recipe": (60, lambda: recipe(res, "cnn", 3 if args.quick else 10)),
    }
    for name in args.sections.split(","):
        if any(name.startswith(m) for m in ("mlp", "cnn")) and name.split("_")[0] not in models:
            continue
        estimate, fn = plan[name]
        model = name.split("_")[0]
        ours64 = MEASURED.get((model, "minifused", 64))
        if ours64 is not None and name.endswith("parity"):  # measured: epochs x seeds x both + evals
            per = ours64 + MEASURED.get((model, "pytorch", 64), 0.0)
            estimate = (2 if args.quick else 5 if model == "mlp" else 3) * len(seeds) * per * 1.1 + 5
        elif ours64 is not None and name.endswith("recipe"):
            estimate = (3 if args.quick else 10) * ours64 * 0.8 + 5
        left = args.budget - elapsed()
        if left < estimate:
            print(f"skipping {name}: {left:.0f} s left, needs about {estimate} s", flush=True)
            res.add(f"skipped {name}", "minifused", left, "s left")
            continue
        print(f"== {name} (t = {elapsed():.0f} s)", flush=True)
        t = time.perf_counter()
        try:
            fn()
        except Exception as e:  # keep what the other sections measured
            import traceback

            traceback.print_exc()
            res.add(f"failed {name}: {type(e).__name__}: {str(e)[:120]}", "minifused", 0, "error")
        res.add(f"section {name} wall time", "bench", time.perf_counter() - t, "s")
        if DEVICE != "cpu":
            res.write()
    if DEVICE != "cpu":
        res.write()


if __name__ == "__main__":
    main()
