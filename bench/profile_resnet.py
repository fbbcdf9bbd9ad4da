"""Where a ResNet-18 training step spends its GPU time, ours beside PyTorch's, kernel by kernel.

The step is bench/resnet.py's (CIFAR ResNet-18, bf16, SGD with momentum). Each variant runs
``--steps`` steps under ``torch.profiler`` (CUPTI sees every kernel of the process, CuPy's
included); the kernels' device times are summed per kernel name and launch shape, and the
step's wall time beside them shows the gaps. A cProfile of our eager step shows where the host
time goes. Prints tables; ``--trace DIR`` also writes each variant's Chrome trace there.

    python bench/profile_resnet.py [--batch 128] [--steps 3] [--trace DIR]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import resnet as rn  # noqa: E402
from harness import torch_or_none  # noqa: E402

import minifused as mf  # noqa: E402


def warm(torch, step, batches):
    """Three steps (a captured step captures on its third), then both frameworks' queues drained."""
    for i in range(3):
        step(*batches[i % len(batches)])
    mf.cuda.synchronize()
    torch.cuda.synchronize()


def kernels_of(torch, step, batches, steps, trace):
    """({(name, grid, block): [calls, device µs]} per step, wall µs per step)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(steps):
            step(*batches[i % len(batches)])
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / steps * 1e6
    path = Path(trace or "/tmp") / "profile_resnet_trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    table = defaultdict(lambda: [0, 0.0])
    for ev in events:
        if ev.get("cat") != "kernel":
            continue
        args = ev.get("args", {})
        key = (ev["name"][:60], tuple(args.get("grid", ())), tuple(args.get("block", ())))
        table[key][0] += 1 / steps
        table[key][1] += ev["dur"] / steps
    return table, wall, path


def report(label, table, wall, top):
    total = sum(us for _, us in table.values())
    calls = sum(n for n, _ in table.values())
    print(f"\n== {label}: {total:.0f} µs of kernels in {calls:.0f} launches per step; wall {wall:.0f} µs per step")
    fam = defaultdict(lambda: [0, 0.0])
    for (name, _, _), (n, us) in table.items():
        fam[name][0] += n
        fam[name][1] += us
    print("  by kernel name:")
    for name, (n, us) in sorted(fam.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"    {us:9.1f} µs {100 * us / total:5.1f}%  {n:5.0f}×  {name}")
    print("  by name and launch shape:")
    for (name, grid, block), (n, us) in sorted(table.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"    {us:9.1f} µs  {n:4.0f}×  {us / n:8.1f} µs each  {name} grid={grid} block={block}")


def host_profile(step, batches, steps, top):
    prof = cProfile.Profile()
    prof.enable()
    for i in range(steps):
        step(*batches[i % len(batches)])
    prof.disable()
    mf.cuda.synchronize()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    print(f"\n== host profile of our eager step ({steps} steps)\n{out.getvalue()}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--trace", default=None, help="a directory for the Chrome traces")
    p.add_argument("--only", default="ours_graph,ours_eager,torch_graph,torch_eager,host",
                   help="variants (also torch_compile: max-autotune, minutes to build)")
    p.add_argument("--channels-last", action="store_true", help="our model and batches channels-last")
    args = p.parse_args(argv)
    torch = torch_or_none()
    if torch is None:
        sys.exit("profile_resnet.py needs PyTorch (its profiler) on the GPU machine")
    only = args.only.split(",")
    for name in ("ours_graph", "ours_eager", "torch_graph", "torch_eager", "torch_compile"):
        if name not in only:
            continue
        how = name.split("_")[1]
        step, batches = (rn.our_step(args.batch, "bf16", how == "graph", args.channels_last)
                         if name.startswith("ours") else rn.their_step(torch, args.batch, "bf16", how))
        warm(torch, step, batches)
        table, wall, path = kernels_of(torch, step, batches, args.steps, args.trace)
        if args.trace:
            path.rename(Path(args.trace) / f"{name}_b{args.batch}.json")
        report(f"{name} b{args.batch}", table, wall, args.top)
        del step, batches
        mf.cuda.empty_cache()
        torch.cuda.empty_cache()
    if "host" in only:
        step, batches = rn.our_step(args.batch, "bf16", False, args.channels_last)
        warm(torch, step, batches)
        host_profile(step, batches, 10, args.top)


if __name__ == "__main__":
    main()
