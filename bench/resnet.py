"""ResNet-18 (CIFAR variant) training steps on the GPU: minifused against PyTorch at its strongest.

The model: a 3x3 stem (64 channels), four stages of two basic blocks (64, 128, 256, 512 channels; the
last three start with stride 2), global average pooling, a Linear to 10 classes; 3x32x32 inputs,
synthetic and resident on the GPU (eight batches in turn: the time does not depend on the values).
One step = forward, cross-entropy, backward, SGD with momentum 0.9 and weight decay 5e-4.

* minifused: eager and captured (``capture_step``), fp32 and bf16 (the model in bf16 with fp32 master
  weights in the optimizer, the example's recipe);
* PyTorch: eager with channels_last, ``cudnn.benchmark`` and fused SGD, in fp32 (TF32 off, as ours) and
  with bf16 autocast;
  its whole-step CUDA graph (captured by hand as its documentation shows); ``torch.compile`` of the
  whole step (``--compile``: max-autotune compiles for minutes, so it is opt-in, and such a run writes
  ``resnet_compile_b<B>.json`` per batch, its compile time as a row; ``--dtypes bf16 --rounds 0`` keeps it short).

Steps/s are timed with CUDA events around ``--steps`` steps after a warm-up (and a capture), median of
``--repeats``; peak memory is each framework's allocator peak over its run. Ratios:
``resnet_graph_over_torch_best_b<B>`` (the faster of minifused's captured bf16 steps over the best PyTorch bf16
step the run timed: eager and graph in ``resnet.json``, compile too in ``resnet_compile_b<B>.json``; ours is timed
C-contiguous and channels-last, as PyTorch's model is channels-last: the layout is the user's choice, and
captured, channels-last measured faster, where its eager step pays more host time than the C-contiguous one) and
``resnet_eager_over_torch_eager_b<B>`` (eager bf16 over eager bf16 autocast), > 1: minifused is faster.
The model as a PyTorch user writes it (:func:`resnet18_explicit`: each block's forward calls its Conv2d, BatchNorm2d
and ReLU one by one, which no Sequential fuses) runs beside it in bf16, captured and as a third step of each eager
round: ``resnet_explicit_graph_over_torch_best_b<B>`` and ``resnet_explicit_eager_over_torch_eager_b<B>``, over the
same PyTorch steps (PyTorch runs the same kernels whichever way its model is written).
Eager steps at these sizes are bound by host time, which drifts on a shared machine by more than the
difference measured (one framework's rounds timed minutes apart from the other's can land in different
phases of it): so the eager ratios come from ``--rounds`` further rounds of both eager steps, built side
by side and timed in alternation (the ``eager ... alternating`` rows: the median of those rounds), each ratio
the median of the rounds' own ratios (ours over theirs, timed seconds apart). Pairing cancels drift that moves
both steps alike, not the part of it that moves them unequally: the host's slow phases slow our step (Python
issuing the launches) more than PyTorch's (C++), so the eager ratios still differ from run to run.

    python bench/resnet.py [--batches 128,256,512] [--dtypes fp32,bf16] [--steps 20] [--rounds 11] [--compile]
"""
from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import cupy  # noqa: E402

import minifused as mf  # noqa: E402
import minifused.functional as F  # noqa: E402
import minifused.nn as nn  # noqa: E402
from harness import Results, torch_or_none  # noqa: E402
from minifused import amp, optim  # noqa: E402

WIDTHS = (64, 128, 256, 512)


# ---------------------------------------------------------------- the model, in both frameworks
def conv_bn(nn_, cin, cout, stride, relu, k=3):
    layers = [nn_.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn_.BatchNorm2d(cout)]
    return nn_.Sequential(*layers, nn_.ReLU()) if relu else nn_.Sequential(*layers)


def resnet18(nn_, relu):
    """ResNet-18 for 32x32 inputs, built from ``nn_`` (minifused.nn or torch.nn); ``relu(x)`` the functional
    ReLU after each residual add."""
    class Block(nn_.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.body = nn_.Sequential(conv_bn(nn_, cin, cout, stride, True), conv_bn(nn_, cout, cout, 1, False))
            self.shortcut = (nn_.Identity() if stride == 1 and cin == cout
                             else conv_bn(nn_, cin, cout, stride, False, k=1))

        def forward(self, x):
            return relu(self.body(x) + self.shortcut(x))

    blocks, cin = [], WIDTHS[0]
    for i, w in enumerate(WIDTHS):
        blocks += [Block(cin, w, 1 if i == 0 else 2), Block(w, w, 1)]
        cin = w
    return nn_.Sequential(conv_bn(nn_, 3, WIDTHS[0], 1, True), *blocks, nn_.AdaptiveAvgPool2d(1), nn_.Flatten(),
                          nn_.Linear(WIDTHS[-1], 10))


def resnet18_explicit(nn_, F_):
    """The same ResNet-18 as a PyTorch user writes it: layers as attributes, each block's forward calling them one by
    one (``F.relu(self.bn1(self.conv1(x)))``), the shortcut added in place. Its Conv2d, BatchNorm2d and ReLU run one
    op each (no Sequential to fuse them)."""
    class BasicBlock(nn_.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn_.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn_.BatchNorm2d(cout)
            self.conv2 = nn_.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn_.BatchNorm2d(cout)
            self.shortcut = nn_.Sequential()
            if stride != 1 or cin != cout:
                self.shortcut = nn_.Sequential(nn_.Conv2d(cin, cout, 1, stride, bias=False), nn_.BatchNorm2d(cout))

        def forward(self, x):
            out = F_.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            out += self.shortcut(x)
            return F_.relu(out)

    class ResNet(nn_.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn_.Conv2d(3, WIDTHS[0], 3, 1, 1, bias=False)
            self.bn1 = nn_.BatchNorm2d(WIDTHS[0])
            blocks, cin = [], WIDTHS[0]
            for i, w in enumerate(WIDTHS):
                blocks += [BasicBlock(cin, w, 1 if i == 0 else 2), BasicBlock(w, w, 1)]
                cin = w
            self.layers = nn_.Sequential(*blocks)
            self.linear = nn_.Linear(WIDTHS[-1], 10)

        def forward(self, x):
            out = self.layers(F_.relu(self.bn1(self.conv1(x))))
            return self.linear(F_.adaptive_avg_pool2d(out, 1).flatten(1))

    return ResNet()


# ---------------------------------------------------------------- timing
def steps_per_s(step, batches, steps, repeats, sync, events):
    """Median steps/s of ``steps`` calls of ``step(x, y)`` (timed with the framework's CUDA events)."""
    for i in range(3):
        step(*batches[i % len(batches)])
    sync()
    rates = []
    for _ in range(repeats):
        start, stop = events()
        start.record()
        for i in range(steps):
            step(*batches[i % len(batches)])
        stop.record()
        stop.synchronize()
        rates.append(steps / (elapsed(start, stop) / 1e3))
    return statistics.median(rates)


def elapsed(start, stop):
    return cupy.cuda.get_elapsed_time(start, stop) if isinstance(start, cupy.cuda.Event) else start.elapsed_time(stop)


def our_step(batch, dtype, captured, channels_last=False, explicit=False):
    """(step, batches) of our ResNet-18 training step (``step(x, y)``; under ``capture_step`` if
    ``captured``) on 8 resident batches; ``channels_last``: the model (its weights too) and the batches in that
    memory format (C-contiguous by default: channels-last saves the convolutions' repacks but pays slower
    BatchNorm passes, and its eager step more host time; compare with bench/profile_resnet.py --channels-last);
    ``explicit``: the model as :func:`resnet18_explicit` writes it."""
    mf.manual_seed(0)
    model = (resnet18_explicit(nn, F) if explicit else resnet18(nn, F.relu)).to("cuda")
    low = dtype == "bf16"
    if low:
        amp.cast_model(model, mf.bfloat16)
    fmt = mf.channels_last if channels_last else mf.contiguous_format
    model.to(memory_format=fmt)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4, master_weights=low)
    xdt = mf.bfloat16 if low else mf.float32
    batches = [(mf.randn(batch, 3, 32, 32, device="cuda", dtype=xdt).to(memory_format=fmt),
                mf.randint(0, 10, (batch,), device="cuda")) for _ in range(8)]

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x).float(), y)
        loss.backward()
        opt.step()
        return loss.detach()

    return (mf.capture_step(step) if captured else step), batches


def ours(batch, dtype, captured, steps, repeats, channels_last=False, explicit=False):
    gc.collect()  # an earlier run's arrays (in reference cycles) would count in this run's peak
    mf.cuda.reset_peak_memory_stats()  # (the peak counts weights, optimizer state, batches, any graph's pool)
    step, batches = our_step(batch, dtype, captured, channels_last, explicit)
    rate = steps_per_s(step, batches, steps, repeats, mf.cuda.synchronize,
                       lambda: (cupy.cuda.Event(), cupy.cuda.Event()))
    return rate, mf.cuda.max_memory_allocated()


def their_step(torch, batch, dtype, how):
    """(step, batches) of PyTorch's ResNet-18 training step at its strongest for ``how``: eager (channels_last,
    cudnn.benchmark, fused SGD), ``graph`` (its documented whole-step capture, capturable foreach SGD) or
    ``compile`` (``torch.compile(mode='max-autotune')``)."""
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    # the same math as ours: fp32 is strict fp32 (PyTorch's convolutions default to TF32), bf16 is autocast
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    model = resnet18(torch.nn, torch.relu).cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4,
                          fused=how != "graph", foreach=None if how != "graph" else True)
    batches = [(torch.randn(batch, 3, 32, 32, device="cuda").to(memory_format=torch.channels_last),
                torch.randint(0, 10, (batch,), device="cuda")) for _ in range(8)]
    autocast = dtype == "bf16"

    def step(x, y):
        opt.zero_grad(set_to_none=how != "graph")
        with torch.autocast("cuda", torch.bfloat16, enabled=autocast):
            loss = torch.nn.functional.cross_entropy(model(x).float(), y)
        loss.backward()
        opt.step()
        return loss.detach()

    if how == "compile":
        return torch.compile(step, mode="max-autotune"), batches
    if how != "graph":
        return step, batches
    # PyTorch's documented whole-network capture: warm up on a side stream, then capture
    sx, sy = (t.clone() for t in batches[0])
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step(sx, sy)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step(sx, sy)

    def replay(x, y):
        sx.copy_(x)
        sy.copy_(y)
        graph.replay()
    return replay, batches


def theirs(torch, batch, dtype, how, steps, repeats):
    gc.collect()
    torch.cuda.reset_peak_memory_stats()
    run, batches = their_step(torch, batch, dtype, how)
    rate = steps_per_s(run, batches, steps, repeats, torch.cuda.synchronize,
                       lambda: (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)))
    return rate, torch.cuda.max_memory_allocated()


def alternating_eager(torch, batch, dtype, steps, rounds, explicit=False):
    """(median steps/s of our eager step, of PyTorch's, median of the rounds' ratios ours / theirs, the host
    calibration before each round (:func:`host_calibration_ms`), and with ``explicit`` the median steps/s of our
    :func:`resnet18_explicit` step and of its rounds' ratios over PyTorch's, else Nones), the steps
    built first, over ``rounds`` rounds that time one after the other (each round ``steps`` steps after its own
    warm-up). The ratio pairs each round's timings, taken seconds apart: the host's drift between rounds
    (which moves both) cancels in it, where a ratio of the two medians mixes rounds of different phases."""
    ours_events = lambda: (cupy.cuda.Event(), cupy.cuda.Event())  # noqa: E731
    steps_of = [(our_step(batch, dtype, False), mf.cuda.synchronize, ours_events)]
    if explicit:
        steps_of.append((our_step(batch, dtype, False, explicit=True), mf.cuda.synchronize, ours_events))
    steps_of.append((their_step(torch, batch, dtype, "eager"), torch.cuda.synchronize,
                     lambda: (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))))
    rates, host = [[] for _ in steps_of], []
    for _ in range(rounds):
        host.append(host_calibration_ms())
        for ((step, batches), sync, events), timed in zip(steps_of, rates):
            timed.append(steps_per_s(step, batches, steps, 1, sync, events))
    del steps_of
    mf.cuda.empty_cache()
    torch.cuda.empty_cache()
    theirs_ = rates[-1]
    paired = [statistics.median(a / b for a, b in zip(mine, theirs_)) for mine in rates[:-1]]
    return (statistics.median(rates[0]), statistics.median(theirs_), paired[0], host,
            statistics.median(rates[1]) if explicit else None, paired[1] if explicit else None)


def host_calibration_ms():
    """Milliseconds of a fixed pure-Python loop: the host's speed at that moment (on the device's host it took
    about 6.5 ms in fast phases and 11-13 ms in slow ones), recorded beside the eager rounds it preceded."""
    began, total = time.perf_counter(), 0
    for i in range(200000):
        total += i
    return (time.perf_counter() - began) * 1e3


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batches", default="128,256,512")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--rounds", type=int, default=11, help="alternating rounds of the eager pairs")
    p.add_argument("--dtypes", default="fp32,bf16")
    p.add_argument("--compile", action="store_true", help="also time torch.compile(mode='max-autotune')")
    args = p.parse_args(argv)
    torch = torch_or_none()
    res = Results("resnet")
    for batch in (int(b) for b in args.batches.split(",")):
        if args.compile:  # a file per batch: compiling takes minutes a batch, so batches run in separate calls
            res = Results(f"resnet_compile_b{batch}")
        rates = {}
        for dtype in args.dtypes.split(","):
            # (the captured bf16 step in both layouts: see the module's doc)
            # (and the explicit-forward model's captured bf16 step, C-contiguous)
            for captured, cl, explicit in ((False, False, False), (True, False, False)) + (
                    ((True, True, False), (True, False, True)) if dtype == "bf16" else ()):
                name = (f"minifused {'graph' if captured else 'eager'} {dtype}" + (" channels-last" if cl else "")
                        + (" explicit" if explicit else ""))
                try:
                    rates[name], peak = ours(batch, dtype, captured, args.steps, args.repeats, cl, explicit)
                except Exception as e:  # noqa: BLE001 - one failed configuration must not lose the others
                    print(f"b{batch} {name} failed: {type(e).__name__}: {e}", flush=True)
                    continue
                res.add(f"resnet18 b{batch}", name, rates[name], "steps/s")
                res.add(f"resnet18 b{batch} peak memory", name, peak / 2 ** 20, "MiB")
                mf.cuda.empty_cache()
            if torch is None:
                continue
            for how in ("eager", "graph") + (("compile",) if args.compile else ()):
                name = f"torch {how} {dtype}"
                try:
                    began = time.perf_counter()
                    rates[name], peak = theirs(torch, batch, dtype, how, args.steps, args.repeats)
                    if how == "compile":  # the warm-up steps compile; the timed ones do not
                        res.add(f"resnet18 b{batch} build and timing", name, time.perf_counter() - began, "s")
                except Exception as e:  # noqa: BLE001
                    print(f"b{batch} {name} failed: {type(e).__name__}: {e}", flush=True)
                    continue
                res.add(f"resnet18 b{batch}", name, rates[name], "steps/s")
                res.add(f"resnet18 b{batch} peak memory", name, peak / 2 ** 20, "MiB")
                torch.cuda.empty_cache()
        best = max((v for k, v in rates.items() if k.startswith("torch") and k.endswith("bf16")), default=None)
        mine = max((v for k, v in rates.items() if k.startswith("minifused graph bf16") and "explicit" not in k),
                   default=None)
        if best and mine:
            res.ratio(f"resnet_graph_over_torch_best_b{batch}", mine / best)
        if best and "minifused graph bf16 explicit" in rates:
            res.ratio(f"resnet_explicit_graph_over_torch_best_b{batch}", rates["minifused graph bf16 explicit"] / best)
        if torch is not None and args.rounds > 0:
            for dtype, ratio in (("bf16", f"resnet_eager_over_torch_eager_b{batch}"),
                                 ("fp32", f"resnet_eager_fp32_over_torch_eager_fp32_b{batch}")):
                if dtype not in args.dtypes.split(","):
                    continue
                mine, their, paired, host, explicit, explicit_paired = alternating_eager(
                    torch, batch, dtype, args.steps, args.rounds, explicit=dtype == "bf16")
                res.add(f"resnet18 b{batch}", f"minifused eager {dtype} alternating", mine, "steps/s")
                if explicit is not None:
                    res.add(f"resnet18 b{batch}", f"minifused eager {dtype} explicit alternating", explicit, "steps/s")
                    res.ratio(f"resnet_explicit_eager_over_torch_eager_b{batch}", explicit_paired)
                res.add(f"resnet18 b{batch}", f"torch eager {dtype} alternating", their, "steps/s")
                for stat, value in (("min", min(host)), ("median", statistics.median(host)), ("max", max(host))):
                    res.add(f"resnet18 b{batch} host calibration before the {dtype} rounds", stat, value, "ms")
                res.ratio(ratio, paired)
        res.write()
    print("done")


if __name__ == "__main__":
    main()
