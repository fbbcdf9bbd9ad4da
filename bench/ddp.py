"""Data-parallel scaling: training samples/s of a compute-bound MLP on 1 GPU and on N GPUs.

The model: 4 Linear layers 4096 -> 4096 (ReLU fused into the first three), cross-entropy over
4096 classes, SGD with momentum; batch 4096 per GPU, fresh random inputs (4 sets, rotated).
Per dtype (fp32 in full fp32, no TF32, by default; bf16 with fp32 master weights):

* ``1 GPU``: rank 0 alone trains the plain model (the other ranks wait at a host barrier);
* ``N GPU ddp``: every rank trains ``DistributedDataParallel(model)`` (25 MB buckets, NCCL
  all-reduce overlapped with backward on a second stream); the step time is the slowest
  rank's median; samples/s counts all ranks' samples;
* ``N GPU ddp no_sync``: the same without communication, the ceiling DDP can reach.

A step is zero_grad + forward + backward + (DDP wait) + optimizer step, timed with CUDA events
(median of 20 after 5 warm-up steps). Ratios: ``ddp_scaling_2gpu`` (fp32; target >= 1.8),
``ddp_scaling_2gpu_bf16``, and ``ddp_comm_efficiency[_bf16]`` (no_sync step time / DDP's).

    bash .gpu/run.sh python3 -m minifused.distributed.run --nproc-per-node 2 bench/ddp.py
    (options after the script: --dtypes fp32,bf16 --width 4096 --layers 4 --batch 4096)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import cupy  # noqa: E402
import numpy as np  # noqa: E402

import minifused as mf  # noqa: E402
import minifused.distributed as dist  # noqa: E402
import minifused.functional as F  # noqa: E402
import minifused.nn as nn  # noqa: E402
from harness import Results, bench_ms  # noqa: E402
from minifused import optim  # noqa: E402


def build(width, layers, dtype, dev):
    mf.manual_seed(0)
    mods = [nn.Linear(width, width, activation="relu") for _ in range(layers - 1)] + [nn.Linear(width, width)]
    return nn.Sequential(*mods).to(dev, dtype)


def make_step(net, dtype):
    opt = optim.SGD(net.parameters(), lr=1e-3, momentum=0.9, master_weights=dtype != mf.float32)

    def step(x, y):
        opt.zero_grad()
        F.cross_entropy(net(x).float(), y).backward()
        opt.step()

    return step


def inputs(batch, width, dtype, dev, seed):
    rs = cupy.random.RandomState(seed)
    with cupy.cuda.Device(dev.index):
        return [(mf.Tensor(rs.standard_normal((batch, width), dtype=cupy.float32).astype(dtype)),
                 mf.Tensor(rs.randint(0, width, batch).astype(cupy.int64))) for _ in range(4)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dtypes", default="fp32,bf16")
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=4096, help="per GPU")
    p.add_argument("--repeat", type=int, default=20)
    a = p.parse_args()
    dist.init_process_group("nccl", timeout=600)
    rank, world, dev = dist.get_rank(), dist.get_world_size(), mf.default_device()
    res = Results("ddp")
    case = f"mlp {a.layers}x{a.width} b{a.batch}/gpu"

    def timed(step, data):
        ms = bench_ms(step, data, warmup=5, repeat=a.repeat)
        slowest = [None] * world
        dist.all_gather_object(slowest, ms)
        return max(slowest)

    for name in a.dtypes.split(","):
        dtype = mf.backend.as_dtype(name)
        data = inputs(a.batch, a.width, dtype, dev, seed=rank)
        single = None
        if rank == 0:
            model = build(a.width, a.layers, dtype, dev)
            single = a.batch / (bench_ms(make_step(model, dtype), data, warmup=5, repeat=a.repeat) / 1e3)
            res.add(f"{case} {name}", "1 GPU", single, "samples/s")
            del model
        dist.barrier()
        if world == 1:
            continue
        model = build(a.width, a.layers, dtype, dev)
        ddp = dist.DistributedDataParallel(model)
        step = make_step(ddp, dtype)
        ddp_ms = timed(step, data)
        with ddp.no_sync():
            free_ms = timed(step, data)
        if rank == 0:
            suffix = "" if dtype == mf.float32 else f"_{name}"
            res.add(f"{case} {name}", f"{world} GPU ddp", world * a.batch / (ddp_ms / 1e3), "samples/s")
            res.add(f"{case} {name}", f"{world} GPU ddp no_sync", world * a.batch / (free_ms / 1e3), "samples/s")
            res.ratio(f"ddp_scaling_{world}gpu{suffix}", world * a.batch / (ddp_ms / 1e3) / single)
            res.ratio(f"ddp_comm_efficiency{suffix}", free_ms / ddp_ms)
        del ddp, model, step
        dist.barrier()
    if rank == 0:
        res.write()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
