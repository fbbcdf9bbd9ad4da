"""Data-parallel scaling: training samples/s of a compute-bound MLP on 1 GPU and on N GPUs.

The model: 4 Linear layers 4096 -> 4096 (ReLU fused into the first three), cross-entropy over
4096 classes, SGD with momentum; batch 4096 per GPU, fresh random inputs (4 sets, rotated).
Per dtype (fp32 in full fp32, no TF32, by default; bf16 with fp32 master weights):

* ``1 GPU``: rank 0 alone trains the plain model (the other ranks wait at a host barrier);
* ``N GPU ddp``: every rank trains ``DistributedDataParallel(model)`` (25 MB buckets, NCCL
  all-reduce overlapped with backward on a second stream); the step time is the slowest
  rank's median; samples/s counts all ranks' samples;
* ``N GPU ddp no_sync``: the same without communication, the ceiling DDP can reach;
* ``N GPU ddp bucket_view`` (with ``--bucket-view``): DDP with ``gradient_as_bucket_view=True``.

A step is zero_grad + forward + backward + (DDP wait) + optimizer step, timed with CUDA events
(median of 20 after 5 warm-up steps). Ratios: ``ddp_scaling_2gpu`` (fp32; target >= 1.8),
``ddp_scaling_2gpu_bf16``, ``ddp_comm_efficiency[_bf16]`` (no_sync step time / DDP's) and, with
``--bucket-view``, ``ddp_bucket_view_step_over_ddp[_bf16]`` (its step time / the default's).
The same rows for bench/resnet.py's ResNet-18 (bf16 with fp32 master weights, ``--resnet-batch``
images per GPU, 128 by default): ratios ``ddp_scaling_Ngpu_resnet_bf16`` and
``ddp_comm_efficiency_resnet_bf16``.

ZeRO (case ``... adam``, after the rows above): the same DDP model trained with Adam, plain
(``N GPU ddp``) and with ``ZeroRedundancyOptimizer`` (``N GPU ddp zero``): the step time (the
slowest rank's median), the peak of live device memory per rank over those steps (the largest
rank's; ``minifused.cuda.max_memory_allocated``, measured after every SGD row so that its
allocation hook times none of them) and the optimizer state per rank (its tensors' bytes, master
weights included). Ratios ``zero_state_memory_over_unsharded[_bf16]`` (the largest shard's state
over the whole state) and ``zero_step_over_ddp[_bf16]`` (step times).

    bash .gpu/run.sh python3 -m minifused.distributed.run --nproc-per-node 2 bench/ddp.py
    (options after the script: --dtypes fp32,bf16 --width 4096 --layers 4 --batch 4096 --bucket-view)
"""
from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import cupy  # noqa: E402

import minifused as mf  # noqa: E402
import minifused.distributed as dist  # noqa: E402
import minifused.functional as F  # noqa: E402
import minifused.nn as nn  # noqa: E402
import resnet  # noqa: E402
from harness import Results, bench_ms  # noqa: E402
from minifused import amp, optim  # noqa: E402


def build(width, layers, dtype, dev):
    mf.manual_seed(0)
    mods = [nn.Linear(width, width, activation="relu") for _ in range(layers - 1)] + [nn.Linear(width, width)]
    return nn.Sequential(*mods).to(dev, dtype)


def sgd(params, dtype):
    return optim.SGD(params, lr=1e-3, momentum=0.9, master_weights=dtype != mf.float32)


def adam(params, dtype, zero=False):
    kw = dict(lr=1e-4, master_weights=dtype != mf.float32)
    return dist.ZeroRedundancyOptimizer(params, optim.Adam, **kw) if zero else optim.Adam(params, **kw)


def state_bytes(opt):
    """Bytes of the optimizer's state tensors on this rank (a ZeRO optimizer: its shard's)."""
    inner = opt.optim if isinstance(opt, dist.ZeroRedundancyOptimizer) else opt
    if inner is None:  # a ZeRO rank that owns no parameter
        return 0
    return sum(v._data.nbytes for st in inner.state.values() for v in st.values() if isinstance(v, mf.Tensor))


def make_step(net, opt):
    def step(x, y):
        opt.zero_grad()
        F.cross_entropy(net(x).float(), y).backward()
        opt.step()

    return step


def resnet_bf16(dev):
    mf.manual_seed(0)
    model = resnet.resnet18(nn, F.relu).to(dev)
    amp.cast_model(model, mf.bfloat16)
    return model


def resnet_inputs(batch, dev, seed):
    rs = cupy.random.RandomState(seed)
    with cupy.cuda.Device(dev.index):
        return [(mf.Tensor(rs.standard_normal((batch, 3, 32, 32), dtype=cupy.float32).astype(mf.bfloat16)),
                 mf.Tensor(rs.randint(0, 10, batch).astype(cupy.int64))) for _ in range(4)]


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
    p.add_argument("--bucket-view", action="store_true", help="also DDP with gradient_as_bucket_view=True")
    p.add_argument("--resnet-batch", type=int, default=128, help="per GPU; 0 leaves ResNet-18 out")
    a = p.parse_args()
    dist.init_process_group("nccl", timeout=600)
    rank, world, dev = dist.get_rank(), dist.get_world_size(), mf.default_device()
    res = Results("ddp")
    case = f"mlp {a.layers}x{a.width} b{a.batch}/gpu"

    def largest(value):  # over the ranks
        every = [None] * world
        dist.all_gather_object(every, value)
        return max(every)

    def timed(step, data):
        return largest(bench_ms(step, data, warmup=5, repeat=a.repeat))

    def adam_case(dtype, data, zero):
        """(step ms, peak bytes per rank, optimizer-state bytes per rank), each the largest rank's."""
        gc.collect()  # the models of the cases before (DDP's hooks make cycles) are gone from the peak
        model = build(a.width, a.layers, dtype, dev)
        ddp = dist.DistributedDataParallel(model)
        opt = adam(ddp.parameters(), dtype, zero)
        mf.cuda.reset_peak_memory_stats()
        ms = timed(make_step(ddp, opt), data)
        return ms, largest(mf.cuda.max_memory_allocated()), largest(state_bytes(opt))

    def scaling(case, name, make_model, dtype, data, batch, suffix):
        """The rows and ratios of one model: 1 GPU (rank 0 alone), N GPUs under DDP, without its
        communication (no_sync), and with the grads as bucket views (``--bucket-view``)."""
        def rate(ms):
            return world * batch / (ms / 1e3)

        single = None
        if rank == 0:
            model = make_model()
            single = batch / (bench_ms(make_step(model, sgd(model.parameters(), dtype)), data, warmup=5,
                                       repeat=a.repeat) / 1e3)
            res.add(f"{case} {name}", "1 GPU", single, "samples/s")
            del model
        dist.barrier()
        if world == 1:
            return
        model = make_model()
        ddp = dist.DistributedDataParallel(model)
        step = make_step(ddp, sgd(ddp.parameters(), dtype))
        ddp_ms = timed(step, data)
        with ddp.no_sync():
            free_ms = timed(step, data)
        if rank == 0:
            res.add(f"{case} {name}", f"{world} GPU ddp", rate(ddp_ms), "samples/s")
            res.add(f"{case} {name}", f"{world} GPU ddp no_sync", rate(free_ms), "samples/s")
            res.ratio(f"ddp_scaling_{world}gpu{suffix}", rate(ddp_ms) / single)
            res.ratio(f"ddp_comm_efficiency{suffix}", free_ms / ddp_ms)
        del ddp, model, step
        if a.bucket_view:
            model = make_model()
            ddp = dist.DistributedDataParallel(model, gradient_as_bucket_view=True)
            view_ms = timed(make_step(ddp, sgd(ddp.parameters(), dtype)), data)
            if rank == 0:
                res.add(f"{case} {name}", f"{world} GPU ddp bucket_view", rate(view_ms), "samples/s")
                res.ratio(f"ddp_bucket_view_step_over_ddp{suffix}", view_ms / ddp_ms)
            del ddp, model
        dist.barrier()

    dtypes = [(name, mf.backend.as_dtype(name)) for name in a.dtypes.split(",")]
    for name, dtype in dtypes:
        suffix = "" if dtype == mf.float32 else f"_{name}"
        scaling(case, name, lambda: build(a.width, a.layers, dtype, dev), dtype,
                inputs(a.batch, a.width, dtype, dev, seed=rank), a.batch, suffix)
    if a.resnet_batch:  # bench/resnet.py's ResNet-18 (CIFAR), bf16 with fp32 master weights
        scaling(f"resnet18 b{a.resnet_batch}/gpu", "bf16", lambda: resnet_bf16(dev), mf.bfloat16,
                resnet_inputs(a.resnet_batch, dev, seed=rank), a.resnet_batch, "_resnet_bf16")
    # Adam and ZeRO after every SGD row: the allocation hook behind max_memory_allocated times none of them
    for name, dtype in dtypes if world > 1 else ():  # ZeRO shards over several ranks
        data = inputs(a.batch, a.width, dtype, dev, seed=rank)
        suffix = "" if dtype == mf.float32 else f"_{name}"
        plain_ms, plain_peak, plain_state = adam_case(dtype, data, zero=False)
        zero_ms, zero_peak, zero_state = adam_case(dtype, data, zero=True)
        if rank == 0:
            for impl, ms, peak, state in ((f"{world} GPU ddp", plain_ms, plain_peak, plain_state),
                                          (f"{world} GPU ddp zero", zero_ms, zero_peak, zero_state)):
                res.add(f"{case} {name} adam", impl, ms, "ms/step")
                res.add(f"{case} {name} adam", f"{impl} peak/rank", peak / 2 ** 20, "MiB")
                res.add(f"{case} {name} adam", f"{impl} optimizer state/rank", state / 2 ** 20, "MiB")
            res.ratio(f"zero_state_memory_over_unsharded{suffix}", zero_state / plain_state)
            res.ratio(f"zero_step_over_ddp{suffix}", zero_ms / plain_ms)
        dist.barrier()
    if rank == 0:
        res.write()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
