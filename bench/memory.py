"""Device memory, minifused vs PyTorch, measured in the same run.

    python bench/memory.py            # the full set (H100: a few minutes)
    python bench/memory.py --quick    # smaller shapes, fewer repeats; results go to $OUT or a temp dir

1. **Saved for backward** (per layer, bytes per sample) after one training forward of the MNIST MLP
   and CNN (examples/mnist/train.py ``build_model``, batch 64): the tape is walked from the loss and
   every node's ``ctx.saved`` arrays plus the array-valued entries of its ``ctx.__dict__`` are
   counted by the allocation that holds them, once (a buffer shared by two ops counts for the
   first, in forward order). Parameters are left out on both sides (they are not per sample). A
   node belongs to the leaf module whose call created it, else it is named by its op. PyTorch's:
   ``saved_tensors_hooks`` summing unique storages, attributed to the leaf module running (its
   functional calls, e.g. ``F.relu``, under ``functional``).
2. **Training-step peak** (Adam, fp32): MLP and CNN at batch 64 and 1024, and an 8-layer 4096-wide
   MLP (Linear+ReLU, cross-entropy on the last layer's 4096 outputs) at batch 4096. After three
   warm-up steps the peak of one more step: ours from the CuPy pool (an allocator hook reads the
   pool's used bytes after every allocation), PyTorch's ``max_memory_allocated`` after
   ``reset_peak_memory_stats``. Both count live allocations: parameters, optimizer state, GEMM
   workspaces. Ratios ``train_peak_over_torch_{mlp,cnn}_b{64,1024}``, ``train_peak_over_torch_mlp4096``.
3. **Inference peak** (``no_grad``) of a 16-layer 4096-wide square MLP (Linear with bias + ReLU) at
   batch 65536, fp16: ours with ``nn.Linear(..., inplace=True)`` in a ``Sequential`` (the ReLU rides
   in the GEMM's epilog), PyTorch's the usual way (``nn.ReLU(inplace=True)``). The input is created
   before the measured window and the peak counts it and the parameters on both sides. Ratio
   ``inference_peak_over_torch`` (target <= 0.6).
4. **square_matmul_** at (65536 x 4096) . (4096 x 4096) fp16: TFLOP/s of the in-place product vs an
   out-of-place GEMM of the same size through the same minifused GEMM (``linear_forward``), CUDA events,
   median (``harness.bench_ms``). Ratios ``square_inplace_over_outofplace`` (target >= 0.85) and
   ``square_inplace_extra_over_x``: the pool's peak growth during one call (after warm-up, so plans
   and the GEMM workspace exist) over ``x.nbytes`` (target <= 0.125).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import cupy
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "mnist"))

from harness import Results, bench_ms, torch_or_none  # noqa: E402

import minifused as mf  # noqa: E402
import minifused.functional as F  # noqa: E402
import minifused.nn as nn  # noqa: E402
from minifused import optim  # noqa: E402
from minifused.kernels import linear as KL  # noqa: E402
from minifused.kernels import square_matmul as KS  # noqa: E402
import train as T  # noqa: E402


class PeakTracker:
    """The pool's used bytes after every allocation; the maximum is the window's peak."""

    def __init__(self):
        self.pool = cupy.get_default_memory_pool()
        self.peak = self.start = 0

    def malloc(self, size):
        mem = self.pool.malloc(size)
        self.peak = max(self.peak, self.pool.used_bytes())
        return mem

    def __enter__(self):
        cupy.cuda.Device().synchronize()
        self.peak = self.start = self.pool.used_bytes()
        cupy.cuda.set_allocator(self.malloc)
        return self

    def __exit__(self, *exc):
        cupy.cuda.Device().synchronize()
        cupy.cuda.set_allocator(self.pool.malloc)


# ---------------------------------------------------------------- 1. saved for backward
def _allocation(a):
    """(key, bytes) of the allocation holding array ``a``: what keeping ``a`` keeps alive."""
    if isinstance(a, np.ndarray):
        while isinstance(a.base, np.ndarray):
            a = a.base
        return ("host", a.__array_interface__["data"][0]), a.nbytes
    mem = a.data.mem
    return ("dev", mem.ptr), mem.size


def _arrays(value):
    if isinstance(value, (np.ndarray, cupy.ndarray)):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _arrays(v)


def tape_nodes(root):
    """The tape's nodes reachable from ``root`` (a Tensor), in forward order (inputs first)."""
    order, seen, stack = [], set(), [(root._ctx, False)] if root._ctx is not None else []
    while stack:
        ctx, done = stack.pop()
        if done:
            order.append(ctx)
            continue
        if id(ctx) in seen:
            continue
        seen.add(id(ctx))
        stack.append((ctx, True))
        stack.extend((t._ctx, False) for t in ctx.inputs if t is not None and t._ctx is not None)
    return order


def saved_bytes(loss, owner=None, exclude=()):
    """{label: bytes} kept for backward by the tape below ``loss``, each allocation once.
    ``owner`` maps id(ctx) to a label (else the op's name); arrays in ``exclude`` are not counted."""
    counted = {_allocation(a)[0] for a in exclude}
    out = defaultdict(int)
    for ctx in tape_nodes(loss):
        label = (owner or {}).get(id(ctx)) or ctx.fn.__name__.removesuffix("Fn")
        for a in _arrays(list(ctx.saved) + list(vars(ctx).values())):
            key, nbytes = _allocation(a)
            if key not in counted:
                counted.add(key)
                out[label] += nbytes
    return dict(out)


def ours_saved_by_layer(model, x, y):
    """Forward + loss with every leaf module's call labelled; {layer: bytes} saved for backward."""
    owner = {}
    leaves = [(n, m) for n, m in model.named_modules() if n and not m._modules]

    def wrap(name, fn):
        def forward(*args, **kwargs):
            out = fn(*args, **kwargs)
            before = {id(c) for a in args if isinstance(a, mf.Tensor) and a._ctx is not None for c in tape_nodes(a)}
            for c in tape_nodes(out):
                if id(c) not in before:
                    owner.setdefault(id(c), name)
            return out
        return forward

    for name, m in leaves:
        object.__setattr__(m, "forward", wrap(name, m.forward))
    try:
        loss = F.cross_entropy(model(x), y)
    finally:
        for _, m in leaves:
            del m.__dict__["forward"]
    return saved_bytes(loss, owner, exclude=[p._data for p in model.parameters()])


def torch_saved_by_layer(torch, model, x, y):
    """PyTorch: unique storages packed by saved_tensors_hooks, by the leaf module running."""
    current, counted, out = ["functional"], {p.untyped_storage().data_ptr() for p in model.parameters()}, defaultdict(int)
    handles = []
    for name, m in model.named_modules():
        if name and not list(m.children()):
            handles.append(m.register_forward_pre_hook(lambda mod, a, name=name: current.__setitem__(0, name)))
            handles.append(m.register_forward_hook(lambda mod, a, o: current.__setitem__(0, "functional")))

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in counted:
            counted.add(s.data_ptr())
            out[current[0]] += s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        torch.nn.functional.cross_entropy(model(x), y)
    for h in handles:
        h.remove()
    return dict(out)


# ---------------------------------------------------------------- models on the PyTorch side
def torch_mnist(torch, name):
    """The example's models with the example's attribute names (the same layer labels)."""
    tnn, tf = torch.nn, torch.nn.functional

    class MLP(tnn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.fc3 = tnn.Linear(784, 1024), tnn.Linear(1024, 1024), tnn.Linear(1024, 10)

        def forward(self, x):
            x = tf.dropout(tf.relu(self.fc1(x.flatten(1))), 0.2, self.training)
            return self.fc3(tf.dropout(tf.relu(self.fc2(x)), 0.2, self.training))

    class CNN(tnn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = tnn.Conv2d(1, 32, 3, 1), tnn.Conv2d(32, 64, 3, 1)
            self.dropout1, self.dropout2 = tnn.Dropout(0.25), tnn.Dropout(0.5)
            self.fc1, self.fc2 = tnn.Linear(9216, 128), tnn.Linear(128, 10)

        def forward(self, x):
            x = tf.max_pool2d(tf.relu(self.conv2(tf.relu(self.conv1(x)))), 2)
            x = self.dropout1(x).flatten(1)
            return self.fc2(self.dropout2(tf.relu(self.fc1(x))))

    return (MLP() if name == "mlp" else CNN()).cuda()


def wide_mlp(layers, width, inplace=False, torch=None, dtype="float32"):
    if torch is not None:
        tnn = torch.nn
        mods = [m for _ in range(layers) for m in (tnn.Linear(width, width), tnn.ReLU(inplace=inplace))]
        return tnn.Sequential(*mods).to("cuda", getattr(torch, dtype))
    mods = [m for _ in range(layers) for m in (nn.Linear(width, width, inplace=inplace, device="cuda", dtype=dtype),
                                               nn.ReLU())]
    return nn.Sequential(*mods)


# ---------------------------------------------------------------- 2. training peak
def ours_train_peak(model, x, y):
    opt = optim.Adam(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(3):
        step()
    with PeakTracker() as t:
        step()
    return t.peak


def torch_train_peak(torch, model, x, y):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

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


def mnist_inputs(batch, torch=None):
    if torch is not None:
        return torch.randn(batch, 1, 28, 28, device="cuda"), torch.randint(0, 10, (batch,), device="cuda")
    rs = cupy.random.RandomState(0)
    return (mf.Tensor(rs.standard_normal((batch, 1, 28, 28), dtype=cupy.float32)),
            mf.Tensor(rs.randint(0, 10, batch).astype(cupy.int64)))


# ---------------------------------------------------------------- main
def main(quick=False):
    res = Results("memory")
    torch = torch_or_none()
    pool = cupy.get_default_memory_pool()

    # 1. saved for backward, per layer and sample
    batch = 64
    for name in ("mlp", "cnn"):
        mf.manual_seed(0)
        model = T.build_model(name, dropout=0.2).to("cuda")
        saved = ours_saved_by_layer(model, *mnist_inputs(batch))
        for layer, nbytes in saved.items():
            res.add(f"{name} b{batch} saved {layer}", "minifused", nbytes / batch, "B/sample")
        res.add(f"{name} b{batch} saved total", "minifused", sum(saved.values()) / batch, "B/sample")
        if torch is not None:
            theirs = torch_saved_by_layer(torch, torch_mnist(torch, name), *mnist_inputs(batch, torch))
            for layer, nbytes in theirs.items():
                res.add(f"{name} b{batch} saved {layer}", "pytorch", nbytes / batch, "B/sample")
            res.add(f"{name} b{batch} saved total", "pytorch", sum(theirs.values()) / batch, "B/sample")
            res.ratio(f"saved_per_sample_over_torch_{name}", sum(saved.values()) / sum(theirs.values()))
        del model
        pool.free_all_blocks()

    # 2. training-step peaks
    for name in ("mlp", "cnn"):
        for batch in ((64,) if quick else (64, 1024)):
            mf.manual_seed(0)
            ours = ours_train_peak(T.build_model(name, dropout=0.2).to("cuda"), *mnist_inputs(batch))
            case = f"{name} adam fp32 b{batch} training step peak"
            res.add(case, "minifused", ours / 2**20, "MiB")
            if torch is not None:
                theirs = torch_train_peak(torch, torch_mnist(torch, name), *mnist_inputs(batch, torch))
                res.add(case, "pytorch", theirs / 2**20, "MiB")
                res.ratio(f"train_peak_over_torch_{name}_b{batch}", ours / theirs)
            pool.free_all_blocks()
    layers, width, batch = (2, 1024, 512) if quick else (8, 4096, 4096)
    rs = cupy.random.RandomState(1)
    xa, ya = rs.standard_normal((batch, width), dtype=cupy.float32), rs.randint(0, width, batch).astype(cupy.int64)
    mf.manual_seed(0)
    ours = ours_train_peak(wide_mlp(layers, width), mf.Tensor(xa), mf.Tensor(ya))
    case = f"mlp {layers}x{width} adam fp32 b{batch} training step peak"
    res.add(case, "minifused", ours / 2**20, "MiB")
    if torch is not None:
        theirs = torch_train_peak(torch, wide_mlp(layers, width, torch=torch), torch.as_tensor(xa, device="cuda"),
                                  torch.as_tensor(ya, device="cuda"))
        res.add(case, "pytorch", theirs / 2**20, "MiB")
        res.ratio("train_peak_over_torch_mlp4096", ours / theirs)
    del xa, ya
    pool.free_all_blocks()

    # 3. inference peak, in-place square layers
    layers, width, batch = (4, 1024, 8192) if quick else (16, 4096, 65536)
    case = f"mlp {layers}x{width} fp16 b{batch} inference peak"
    mf.manual_seed(0)
    model = wide_mlp(layers, width, inplace=True, dtype="float16")
    with mf.no_grad():
        model(mf.Tensor(rs.standard_normal((batch, width), dtype=cupy.float32).astype(cupy.float16)))  # plans
        x = mf.Tensor(rs.standard_normal((batch, width), dtype=cupy.float32).astype(cupy.float16))
        with PeakTracker() as t:
            model(x)
    ours = t.peak
    res.add(case, "minifused", ours / 2**20, "MiB")
    del model, x
    pool.free_all_blocks()
    if torch is not None:
        with torch.no_grad():
            model = wide_mlp(layers, width, inplace=True, torch=torch, dtype="float16")
            model(torch.randn(batch, width, device="cuda", dtype=torch.float16))
            x = torch.randn(batch, width, device="cuda", dtype=torch.float16)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            model(x)
            torch.cuda.synchronize()
            theirs = torch.cuda.max_memory_allocated()
            del model, x
        torch.cuda.empty_cache()
        res.add(case, "pytorch", theirs / 2**20, "MiB")
        res.ratio("inference_peak_over_torch", ours / theirs)

    # 4. square_matmul_ vs an out-of-place GEMM through the same plans
    rows, n = (8192, 1024) if quick else (65536, 4096)
    w = (rs.standard_normal((n, n), dtype=cupy.float32) / np.sqrt(n)).astype(cupy.float16)  # keeps |x| steady
    xs = [(rs.standard_normal((rows, n), dtype=cupy.float32).astype(cupy.float16),) for _ in range(2)]
    reps = (3, 10) if quick else (5, 30)
    flop = 2.0 * rows * n * n
    # interleaved rounds, the median of each side: clock drift between two long loops once moved the ratio by 0.1
    outs, ins = [], []
    for _ in range(3):
        outs.append(bench_ms(lambda a: KL.linear_forward(a, w), xs, *reps))
        ins.append(bench_ms(lambda a: KS.square_matmul_(a, w, True), xs, *reps))
    out_ms, in_ms = sorted(outs)[1], sorted(ins)[1]
    case = f"square ({rows}x{n})·({n}x{n}) fp16"
    res.add(case + " out-of-place", "minifused", flop / out_ms / 1e9, "TFLOP/s")
    res.add(case + " in place", "minifused", flop / in_ms / 1e9, "TFLOP/s")
    res.ratio("square_inplace_over_outofplace", out_ms / in_ms)
    with PeakTracker() as t:
        KS.square_matmul_(xs[0][0], w, True)
    res.add(case + " in place extra", "minifused", (t.peak - t.start) / 2**20, "MiB")
    res.ratio("square_inplace_extra_over_x", (t.peak - t.start) / xs[0][0].nbytes)

    res.write(out_dir=(os.environ.get("OUT") or tempfile.mkdtemp()) if quick else None)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small shapes; does not touch bench/results")
    np.seterr(all="ignore")
    main(ap.parse_args().quick)
