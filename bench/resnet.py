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


def our_step(batch, dtype, captured, channels_last=False):
    """(step, batches) of our ResNet-18 training step (``step(x, y)``; under ``capture_step`` if
    ``captured``) on 8 resident batches; ``channels_last``: the model (its weights too) and the batches in that
    memory format (C-contiguous by default: channels-last saves the convolutions' repacks but pays slower
    BatchNorm passes, and its eager step more host time; compare with bench/profile_resnet.py --channels-last)."""
    mf.manual_seed(0)
    model = resnet18(nn, F.relu).to("cuda")
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


def ours(batch, dtype, captured, steps, repeats, channels_last=False):
    gc.collect()  # an earlier run's arrays (in reference cycles) would count in this run's peak
    mf.cuda.reset_peak_memory_stats()  # (the peak counts weights, optimizer state, batches, any graph's pool)
    step, batches = our_step(batch, dtype, captured, channels_last)
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


def alternating_eager(torch, batch, dtype, steps, rounds):
    """(median steps/s of our eager step, of PyTorch's, median of the rounds' ratios ours / theirs, the host
    calibration before each round (:func:`host_calibration_ms`)), both steps
    built first, over ``rounds`` rounds that time one then the other (each round ``steps`` steps after its own
    warm-up). The ratio pairs each round's two timings, taken seconds apart: the host's drift between rounds
    (which moves both) cancels in it, where a ratio of the two medians mixes rounds of different phases."""
    mine, mine_batches = our_step(batch, dtype, False)
    their, their_batches = their_step(torch, batch, dtype, "eager")
    ours_rates, their_rates, host = [], [], []
    for _ in range(rounds):
        host.append(host_calibration_ms())
        ours_rates.append(steps_per_s(mine, mine_batches, steps, 1, mf.cuda.synchronize,
                                      lambda: (cupy.cuda.Event(), cupy.cuda.Event())))
        their_rates.append(steps_per_s(their, their_batches, steps, 1, torch.cuda.synchronize,
                                       lambda: (torch.cuda.Event(enable_timing=True),
                                                torch.cuda.Event(enable_timing=True))))
    del mine, their, mine_batches, their_batches
    mf.cuda.empty_cache()
    torch.cuda.empty_cache()
    return (statistics.median(ours_rates), statistics.median(their_rates),
            statistics.median(a / b for a, b in zip(ours_rates, their_rates)), host)


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
            for captured, cl in ((False, False), (True, False)) + (((True, True),) if dtype == "bf16" else ()):
                name = f"minifused {'graph' if captured else 'eager'} {dtype}" + (" channels-last" if cl else "")
                try:
                    rates[name], peak = ours(batch, dtype, captured, args.steps, args.repeats, cl)
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
        mine = max((v for k, v in rates.items() if k.startswith("minifused graph bf16")), default=None)
        if best and mine:
            res.ratio(f"resnet_graph_over_torch_best_b{batch}", mine / best)
        if torch is not None and args.rounds > 0:
            for dtype, ratio in (("bf16", f"resnet_eager_over_torch_eager_b{batch}"),
                                 ("fp32", f"resnet_eager_fp32_over_torch_eager_fp32_b{batch}")):
                if dtype not in args.dtypes.split(","):
                    continue
                mine, their, paired, host = alternating_eager(torch, batch, dtype, args.steps, args.rounds)
                res.add(f"resnet18 b{batch}", f"minifused eager {dtype} alternating", mine, "steps/s")
                res.add(f"resnet18 b{batch}", f"torch eager {dtype} alternating", their, "steps/s")
                for stat, value in (("min", min(host)), ("median", statistics.median(host)), ("max", max(host))):
                    res.add(f"resnet18 b{batch} host calibration before the {dtype} rounds", stat, value, "ms")
                res.ratio(ratio, paired)
        res.write()
    print("done")


if __name__ == "__main__":
    main()
