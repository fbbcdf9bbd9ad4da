"""MNIST end to end on the GPU: throughput against PyTorch, parity, the example's recipe, bf16.

In one run, with the same data (whole dataset on the GPU, the same per-epoch batch
order for both frameworks), models, optimizer (Adam lr 1e-3) and PyTorch's default
initialization:

* ``throughput``: training samples/s of minifused eager, minifused graphed
  (``capture_step``), PyTorch eager (plain Adam), PyTorch eager with fused Adam, and PyTorch's whole
  step captured in one CUDA graph (capturable fused Adam), at batch 64, 256 and 1024, MLP and CNN. Each is
  measured over a fixed number of steps, ``min(200, 60000 // batch)`` (whole batches of
  one epoch's order), after a 20-step warm-up (plans, kernels, graph capture), synchronized
  at the ends only; the rows say how many steps. They take turns over ``ROUNDS`` timed
  epochs and each reports its median (one window of 0.1-0.3 s moved a ratio by 0.3 between
  two runs of the same tree: the turns cancel drift, the median an outlier). Ratios ``<model>_eager_over_torch_eager_b<B>``
  and ``<model>_graph_over_torch_eager_b<B>`` (> 1: minifused is faster); against PyTorch at its
  strongest, like with like: ``<model>_graph_over_torch_graph_b<B>`` and
  ``<model>_eager_over_torch_eager_fused_b<B>``;
* ``compile``: the same for ``torch.compile(model, mode="reduce-overhead")`` (PyTorch's
  CUDA-graph mode; its optimizer step stays eager, as is usual), compile time excluded;
  ratios ``<model>_graph_over_torch_compile_b<B>``; a failed compile is recorded as a row;
* ``<model>_parity``: Adam lr 1e-3, batch 64, MLP 5 epochs and CNN 3 epochs, seeds 0 and 1,
  both frameworks: ``mlp_acc_minus_torch`` / ``cnn_acc_minus_torch`` (points);
* ``<model>_recipe``: ``examples/mnist/train.py``'s defaults (10 epochs, graphed) in fp32
  and in bf16: ``mlp_test_acc`` / ``cnn_test_acc`` (percent, fp32) and
  ``bf16_acc_drop_mlp`` / ``bf16_acc_drop_cnn`` (fp32 accuracy minus bf16's, points); the example's small
  ResNet (``--model resnet``) the same over 5 epochs: ``resnet_test_acc``, ``bf16_acc_drop_resnet``.

Sections run in that order; one that would not fit in ``--budget`` seconds is skipped
and results are written after every section.

    python bench/mnist.py [--budget 530] [--quick] [--only throughput,compile]

A run of some sections only (``--sections`` / ``--only``) writes ``mnist_<sections>.json`` instead, so that
``mnist.json`` always holds one whole run.
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
MEASURED = {}  # (model, impl, batch) -> training samples/s, from the throughput sections
DEVICE = "cuda"
LIMIT = None  # smoke runs on the CPU: --device cpu --limit N


def elapsed():
    return time.perf_counter() - T0


# ---------------------------------------------------------------- minifused side
class Ours:
    def __init__(self, train_set, test_set, graphed=True):
        self.train_set, self.test_set = train_set, test_set
        self.test_loader = DataLoader(test_set, 1000, device=DEVICE)
        self.graphed = graphed
        self.name = "minifused graph" if graphed else "minifused eager"

    def setup(self, model, seed, batch):
        mf.manual_seed(seed)
        self.model = example.build_model(model, 0.0).to(DEVICE)
        self.opt = optim.Adam(self.model.parameters(), lr=1e-3)
        self.loader = DataLoader(self.train_set, batch, shuffle=True, seed=seed, device=DEVICE)
        self.step = example.make_step(self.model, self.opt)
        if self.graphed:
            self.step = mf.capture_step(self.step)

    def epoch(self, e, max_steps=None):
        self.loader.set_epoch(e)
        loader = self.loader
        if max_steps is not None:
            loader = _take(self.loader, max_steps)
        return example.train_epoch(self.model, self.opt, None, loader, step=self.step)

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
    name = "pytorch eager"

    def __init__(self, torch, train_set, test_set, order):
        self.torch = torch
        nn = torch.nn

        def tensors(ds):
            x, y = ds.as_tensors("cpu")
            return (torch.from_numpy(np.ascontiguousarray(x._data)).cuda(),
                    torch.from_numpy(np.ascontiguousarray(y._data)).cuda())

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

    def _step_begin(self):
        pass

    def epoch(self, e, max_steps=None):
        perm = self.torch.from_numpy(self.order(self.seed, e)).cuda()
        n, bs = len(perm), self.batch
        steps = -(-n // bs) if max_steps is None else max_steps
        self.model.train()
        total = None
        for b in range(steps):
            d = self._train_step(perm[b * bs:(b + 1) * bs])
            total = d if total is None else total + d
        return total.item() / steps

    def _train_step(self, idx):
        """One step on the batch of training rows ``idx``; its loss, detached."""
        self._step_begin()
        loss = self.torch.nn.functional.cross_entropy(self.model(self.x[idx]), self.y[idx])
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return loss.detach()

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


class TorchFused(Torch):
    """PyTorch eager with its fused Adam (one kernel for all parameters): its strongest eager step."""

    name = "pytorch eager fused"

    def setup(self, model, seed, batch):
        super().setup(model, seed, batch)
        self.opt = self.torch.optim.Adam(self.model.parameters(), lr=1e-3, fused=True)


class TorchGraph(Torch):
    """PyTorch's whole training step (forward, backward, capturable fused Adam) captured in one CUDA graph,
    as its documentation shows, and replayed on static input buffers; a batch of another size runs eagerly."""

    name = "pytorch graph"

    def setup(self, model, seed, batch):
        super().setup(model, seed, batch)
        torch = self.torch
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3, fused=True, capturable=True)
        self.sx = self.x[:batch].clone()
        self.sy = self.y[:batch].clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._eager(self.sx, self.sy)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        self.opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(self.graph):
            self.static_loss = self._forward_backward_step(self.sx, self.sy)

    def _forward_backward_step(self, x, y):
        loss = self.torch.nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        return loss.detach()

    def _eager(self, x, y):
        self.opt.zero_grad(set_to_none=True)
        return self._forward_backward_step(x, y)

    def _train_step(self, idx):
        if len(idx) != self.batch:  # a last short batch: not the captured shape
            return self._eager(self.x[idx], self.y[idx])
        self.sx.copy_(self.x[idx])
        self.sy.copy_(self.y[idx])
        self.graph.replay()
        return self.static_loss.clone()


class TorchCompiled(Torch):
    """``torch.compile(model, mode="reduce-overhead")``: forward and backward from CUDA graphs."""

    name = "pytorch compile"

    def setup(self, model, seed, batch):
        super().setup(model, seed, batch)
        self.model = self.torch.compile(self.model, mode="reduce-overhead", dynamic=False)

    def _step_begin(self):
        # a new iteration: the previous step's graph outputs may be overwritten
        self.torch.compiler.cudagraph_mark_step_begin()


# ---------------------------------------------------------------- sections
def _steps(bs, quick):
    return min(60 if quick else 200, LIMIT_N() // bs)


def LIMIT_N():  # noqa: N802 - the training-set size of this run
    return LIMIT or 60000


def measure(res, impl, model, bs, quick):
    """Samples/s of ``impl`` over a fixed number of steps after a 20-step warm-up."""
    steps = _steps(bs, quick)
    impl.setup(model, 0, bs)
    t = time.perf_counter()
    impl.epoch(0, max_steps=min(20, steps))  # warm-up: plans, kernels, allocator, graph capture / compile
    impl.sync()
    warm = time.perf_counter() - t
    t = time.perf_counter()
    impl.epoch(1, max_steps=steps)
    impl.sync()
    rate = steps * bs / (time.perf_counter() - t)
    res.add(f"{model} adam b{bs} train ({steps} steps)", impl.name, rate, "samples/s")
    MEASURED[(model, impl.name, bs)] = rate
    return rate, warm


ROUNDS = 7  # (a median of 3 turns still followed one slow host phase in an eager ratio)


def measure_in_turns(res, impls, model, bs, quick):
    """``measure`` for several impls set up side by side, timed in turns; median samples/s each."""
    steps = _steps(bs, quick)
    for impl in impls:
        impl.setup(model, 0, bs)
        impl.epoch(0, max_steps=min(20, steps))
        impl.sync()
    rates = {impl.name: [] for impl in impls}
    for r in range(ROUNDS):
        for impl in impls:
            t = time.perf_counter()
            impl.epoch(1 + r, max_steps=steps)
            impl.sync()
            rates[impl.name].append(steps * bs / (time.perf_counter() - t))
    for impl in impls:
        rate = statistics.median(rates[impl.name])
        res.add(f"{model} adam b{bs} train ({steps} steps, median of {ROUNDS})", impl.name, rate, "samples/s")
        MEASURED[(model, impl.name, bs)] = rate


def throughput(res, impls, models, batches, quick):
    for model in models:
        for bs in batches:
            measure_in_turns(res, impls, model, bs, quick)
            rate = {impl.name: MEASURED[(model, impl.name, bs)] for impl in impls}
            if "pytorch eager" in rate:
                res.ratio(f"{model}_eager_over_torch_eager_b{bs}", rate["minifused eager"] / rate["pytorch eager"])
                res.ratio(f"{model}_graph_over_torch_eager_b{bs}", rate["minifused graph"] / rate["pytorch eager"])
            if "pytorch eager fused" in rate:  # like with like: PyTorch at its strongest
                res.ratio(f"{model}_eager_over_torch_eager_fused_b{bs}",
                          rate["minifused eager"] / rate["pytorch eager fused"])
            if "pytorch graph" in rate:
                res.ratio(f"{model}_graph_over_torch_graph_b{bs}", rate["minifused graph"] / rate["pytorch graph"])


def compiled(res, impl, models, batches, quick, deadline):
    for model in models:
        for bs in batches:
            if elapsed() > deadline:
                res.add(f"skipped {model} b{bs} compile (time)", impl.name, 0, "error")
                continue
            try:
                _, warm = measure(res, impl, model, bs, quick)
                res.add(f"{model} b{bs} compile + 20 warm-up steps", impl.name, warm, "s")
            except Exception as e:  # record that it is missing, keep going
                res.add(f"failed {model} b{bs} compile: {type(e).__name__}: {str(e)[:100]}", impl.name, 0, "error")
                continue
            ours = MEASURED.get((model, "minifused graph", bs))
            if ours is not None:
                res.ratio(f"{model}_graph_over_torch_compile_b{bs}", ours / MEASURED[(model, impl.name, bs)])


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
    if "pytorch eager" in accs:
        res.ratio(f"{model}_acc_minus_torch",
                  statistics.mean(accs["minifused graph"]) - statistics.mean(accs["pytorch eager"]))


def recipe(res, model, epochs):
    """The example's default recipe in fp32 and in bf16 (same epochs, same seed)."""
    acc = {}
    for dtype in ("float32", "bf16"):
        argv = ["--model", model, "--epochs", str(epochs), "--device", DEVICE, "--no-progress", "--dtype", dtype]
        if LIMIT:
            argv += ["--limit", str(LIMIT)]
        summary = example.main(argv)
        tag = "" if dtype == "float32" else " bf16"
        for e, a in enumerate(summary["history"]["test_acc"]):
            res.add(f"{model} default recipe{tag} epoch {e + 1} test_acc", "minifused graph", a, "%")
        res.add(f"{model} default recipe{tag} s/epoch (batch 128)", "minifused graph", summary["s_per_epoch"], "s")
        acc[dtype] = summary["test_acc"]
    res.ratio(f"{model}_test_acc", acc["float32"])
    res.ratio(f"bf16_acc_drop_{model}", acc["float32"] - acc["bf16"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=float, default=530.0, help="seconds for the whole run")
    ap.add_argument("--quick", action="store_true", help="short throughput runs, 1 seed, fewer epochs")
    ap.add_argument("--only", default=None,
                    help="comma-separated section names or parts of them: throughput, compile, parity, recipe, "
                         "mlp_parity, cnn_recipe, ...")
    ap.add_argument("--sections",
                    default="throughput,compile,mlp_parity,mlp_recipe,cnn_parity,cnn_recipe,resnet_recipe")
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--batches", default="64,256,1024")
    ap.add_argument("--device", default="cuda", help="cpu only for a smoke run (no results written)")
    ap.add_argument("--limit", type=int, default=None, help="training images (smoke runs)")
    args = ap.parse_args()
    global DEVICE, LIMIT
    DEVICE, LIMIT = args.device, args.limit
    # PyTorch's defaults, which its side of every comparison runs with: cuDNN convolutions on TF32
    # tensor cores (torch.backends.cudnn.allow_tf32), matmuls in full float32. Ours the same.
    mf.backends.cudnn.allow_tf32, mf.backends.cuda.matmul.allow_tf32 = True, False
    train_set, test_set = MNIST(train=True), MNIST(train=False)
    if LIMIT:
        train_set.data, train_set.targets = train_set.data[:LIMIT], train_set.targets[:LIMIT]
        test_set.data, test_set.targets = test_set.data[:LIMIT // 2], test_set.targets[:LIMIT // 2]
    graph = Ours(train_set, test_set, graphed=True)
    impls = [Ours(train_set, test_set, graphed=False), graph]
    torch = torch_or_none() if DEVICE != "cpu" else None
    order = lambda seed, e: epoch_order(len(train_set), seed, e)  # noqa: E731
    if torch is not None:
        impls += [cls(torch, train_set, test_set, order) for cls in (Torch, TorchFused, TorchGraph)]
    else:
        print("PyTorch not importable: minifused only, no ratios against it", flush=True)
    sections = args.sections.split(",")
    if args.only:
        sections = [n for n in sections if any(w in n for w in args.only.split(","))]
    # a run of some sections only writes mnist_<sections>.json: mnist.json keeps a whole run's rows together
    res = Results("mnist" if sections == ap.get_default("sections").split(",") else "mnist_" + "_".join(sections))
    seeds = (0,) if args.quick else (0, 1)
    models = args.models.split(",")
    batches = tuple(int(b) for b in args.batches.split(","))
    parity_impls = [graph] + impls[2:3]  # (the parity runs: PyTorch eager with plain Adam)
    budget = args.budget
    # (section, estimated seconds on an H100, function)
    plan = {
        "throughput": (80, lambda: throughput(res, impls, models, batches, args.quick)),
        "compile": (150, lambda: compiled(res, TorchCompiled(torch, train_set, test_set, order), models, batches,
                                          args.quick, deadline=budget - 200)),
        "mlp_parity": (45, lambda: parity(res, parity_impls, "mlp", 2 if args.quick else 5, seeds)),
        "mlp_recipe": (25, lambda: recipe(res, "mlp", 3 if args.quick else 10)),
        "cnn_parity": (60, lambda: parity(res, parity_impls, "cnn", 1 if args.quick else 3, seeds)),
        "cnn_recipe": (60, lambda: recipe(res, "cnn", 3 if args.quick else 10)),
        "resnet_recipe": (90, lambda: recipe(res, "resnet", 2 if args.quick else 5)),
    }
    for name in sections:
        model = name.split("_")[0]
        if model in ("mlp", "cnn") and model not in models:
            continue
        if name == "compile" and torch is None:
            continue
        estimate, fn = plan[name]
        ours64 = MEASURED.get((model, "minifused graph", 64))  # samples/s
        if ours64 is not None and name.endswith("parity"):  # measured: epochs x seeds x both + evals
            per = LIMIT_N() / ours64 + LIMIT_N() / MEASURED.get((model, "pytorch eager", 64), ours64)
            estimate = (2 if args.quick else 5 if model == "mlp" else 3) * len(seeds) * per * 1.1 + 5
        elif ours64 is not None and name.endswith("recipe"):  # fp32 and bf16, batch 128
            estimate = 2 * (3 if args.quick else 10) * LIMIT_N() / ours64 * 0.8 + 10
        left = budget - elapsed()
        if left < estimate:
            print(f"skipping {name}: {left:.0f} s left, needs about {estimate:.0f} s", flush=True)
            res.add(f"skipped {name}", "bench", left, "s left")
            continue
        print(f"== {name} (t = {elapsed():.0f} s)", flush=True)
        t = time.perf_counter()
        try:
            fn()
        except Exception as e:  # keep what the other sections measured
            import traceback

            traceback.print_exc()
            res.add(f"failed {name}: {type(e).__name__}: {str(e)[:120]}", "bench", 0, "error")
        res.add(f"section {name} wall time", "bench", time.perf_counter() - t, "s")
        if DEVICE != "cpu":
            res.write()
    res.add("total wall time", "bench", elapsed(), "s")
    if DEVICE != "cpu":
        res.write()


if __name__ == "__main__":
    main()
