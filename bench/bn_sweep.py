"""Tuning sweep for the cached-channel BatchNorm plans (GPU only).

    python3 bench/bn_sweep.py [--what fwd,bwd] [--maps 8,32]
    python3 bench/bn_sweep.py --layout cl [--batches 128,256,512]

For each of bench/norms.py's BatchNorm shapes (N=256, C=64..512, fp16 and bf16) it times the three
passes and every cached-channel plan that fits the shared memory (blocks per channel 1..16, 256/512/1024
threads, registers uncapped or capped for two 1024-thread blocks an SM) with ``harness.graph_ms`` over
inputs much larger than the L2, as bench/norms.py times them; each result is checked against the default
plan's, and the default and the six fastest print per shape. ``kernels.batchnorm._per_channel``'s rules
come from these tables; the sweep is kept to re-derive them on another GPU. Full results:
``$OUT/bn_sweep.json``.

``--layout cl``: the channels-last cached-tile plans (``kernels.batchnorm._per_tile``) at ResNet-18's BatchNorm
shapes (bf16, the stages' 64x32x32 ... 512x4x4 maps at each batch): the passes and every tile of 2, 4 or 8 vectors
with 1 to 16 blocks per tile that fits, forward (with and without the ReLU) and backward (with it), timed and checked
the same way. Full results: ``$OUT/bn_sweep_cl.json``.
"""
import json
import os
import sys
from pathlib import Path

import cupy

import minifused as mf
from harness import gbs, graph_ms, warm_gpu
from minifused.kernels import batchnorm as KB
from minifused.kernels import to_channels_last

SHAPES = [(256, c, hw) for hw in (8, 32) for c in (64, 128, 256, 512)]
GRAPH_BYTES = 256 << 20  # as bench/norms.py: the input sets together much larger than the L2
VEC = 8  # 16-bit elements, 16-byte vectors


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def rand(shape, dtype, seed):
    return cupy.random.RandomState(seed).standard_normal(shape, dtype=cupy.float32).astype(dtype)


def plans(n, s, tensors):
    """(label, plan) of the passes (None) and of every cached-channel plan that fits."""
    out = [("passes", None)]
    vectors, vbytes = n * s // VEC, VEC * 2 * tensors
    for min_blocks in (1, 2):
        for k in (1, 2, 4, 8, 16):
            chunk = KB._chunk(vectors, k)
            if chunk * vbytes > KB.SLICE_BYTES:
                continue
            for threads in (256, 512, 1024):
                if threads <= chunk or threads == 256:
                    out.append((f"k{k} t{threads} b{min_blocks}",
                                KB.ChannelPlan(k, min(threads, chunk), chunk, chunk * vbytes, min_blocks)))
    return out


def time_plans(fn, args, labelled_plans, forced, score):
    """(score of graph_ms, label, max abs difference from the default's output) of the default plan and of each
    (label, plan), the plan in ``forced`` while it runs (the patched plan function returns it)."""
    rows, ref = [], None
    for label, plan in [("default", None)] + labelled_plans:
        forced.clear()
        if label != "default":
            forced["plan"] = plan
        KB._plan.cache_clear()  # (it holds the launches of a signature)
        KB._launches.cache_clear()
        got = fn(*args[0]).astype(cupy.float32)
        ref = got if ref is None else ref
        rows.append((score(graph_ms(fn, args)), label, float(cupy.abs(got - ref).max())))
    forced.clear()
    KB._plan.cache_clear()
    KB._launches.cache_clear()
    return rows


def tile_plans(m, c, tensors):
    """(label, plan) of the passes (None) and of every cached-tile plan that fits."""
    out = [("passes", None)]
    for cols in (2, 4, 8):
        if (c // VEC) % cols:
            continue
        for k in (1, 2, 4, 8, 16):
            chunk = -(-m // k)
            if chunk * cols * 16 * tensors <= KB.TILE_SLICE_BYTES:
                threads = min(512, max(64, -(-chunk * cols // 32) * 32))
                out.append((f"cols{cols} k{k}", KB.TilePlan(c // VEC // cols, cols, k, threads, chunk,
                                                            chunk * cols * 16 * tensors)))
    return out


def main_channels_last():
    batches = [int(v) for v in arg("--batches", "128,256,512").split(",")]
    default_plan = KB._per_tile
    forced = {}
    KB._per_tile = lambda *a, **k: forced["plan"] if "plan" in forced else default_plan(*a, **k)
    warm_gpu()
    results = []
    for n in batches:
        for c, hw in ((64, 32), (128, 16), (256, 8), (512, 4)):
            shape, m = (n, c, hw, hw), n * hw * hw
            sets = max(3, -(-GRAPH_BYTES // (n * c * hw * hw * 2)))
            xs = [to_channels_last(rand(shape, mf.bfloat16, 7 * c + i)) for i in range(sets)]
            dys = [to_channels_last(rand(shape, mf.bfloat16, 9 * c + i)) for i in range(sets)]
            w, b = rand((c,), cupy.float32, 3) * 0.1 + 1, rand((c,), cupy.float32, 4)
            rm, rv = cupy.zeros(c, cupy.float32), cupy.ones(c, cupy.float32)
            _, mean, rstd, factors = KB.batch_norm_forward(xs[0], w, b, rm, rv, True, 0.1, 1e-5, True)
            for direction in ("fwd", "fwd+relu", "bwd"):
                relu = direction == "fwd+relu"
                if direction == "bwd":
                    fn, args = (lambda dy, x: KB.batch_norm_backward(dy, x, w, mean, rstd, factors, True)[0],
                                list(zip(dys, xs)))
                else:
                    fn, args = (lambda x: KB.batch_norm_forward(x, w, b, rm, rv, True, 0.1, 1e-5, relu)[0],
                                [(x,) for x in xs])
                tensors = 2 if direction == "bwd" else 1
                rows = sorted(time_plans(fn, args, tile_plans(m, c, tensors), forced, lambda ms: ms * 1e3))
                chosen = default_plan(m, c, 2, VEC, True, 132, tensors)
                line = {"shape": list(shape), "dir": direction, "default": str(chosen),
                        "default_us": next(r[0] for r in rows if r[1] == "default"),
                        "top": rows[:8], "max_abs_diff": max(r[2] for r in rows)}
                print(json.dumps(line), flush=True)
                results.append(line)
            del xs, dys
            cupy.get_default_memory_pool().free_all_blocks()
    Path(os.environ.get("OUT", "/tmp"), "bn_sweep_cl.json").write_text(json.dumps(results, indent=1))


def main():
    if arg("--layout", "nchw") == "cl":
        return main_channels_last()
    what = arg("--what", "fwd,bwd").split(",")
    maps = [int(v) for v in arg("--maps", "8,32").split(",")]
    default_plan = KB._per_channel
    forced = {}  # the plan _per_channel returns while one is forced
    KB._per_channel = lambda *a, **k: forced["plan"] if "plan" in forced else default_plan(*a, **k)
    warm_gpu()
    results = []
    for n, c, hw in (sh for sh in SHAPES if sh[2] in maps):
        s = hw * hw
        for dtype, name in ((cupy.float16, "fp16"), (mf.bfloat16, "bf16")):
            sets = max(3, -(-GRAPH_BYTES // (n * c * s * 2)))
            xs = [rand((n, c, s), dtype, 7 * c + i) for i in range(sets)]
            dys = [rand((n, c, s), dtype, 9 * c + i) for i in range(sets)]
            w, b = rand((c,), cupy.float32, 3) * 0.1 + 1, rand((c,), cupy.float32, 4)
            rm, rv = cupy.zeros(c, cupy.float32), cupy.ones(c, cupy.float32)
            saved = KB.batch_norm_forward(xs[0], w, b, rm, rv, True, 0.1, 1e-5)[1:3]
            for direction in what:
                if direction == "fwd":
                    fn, args, nbytes = (lambda x: KB.batch_norm_forward(x, w, b, rm, rv, True, 0.1, 1e-5)[0],
                                        [(x,) for x in xs], 2 * n * c * s * 2)
                else:
                    fn, args, nbytes = (lambda dy, x: KB.batch_norm_backward(dy, x, w, *saved, None, True)[0],
                                        list(zip(dys, xs)), 3 * n * c * s * 2)
                rows = sorted(time_plans(fn, args, plans(n, s, 1 if direction == "fwd" else 2), forced,
                                         lambda ms: gbs(nbytes, ms)), reverse=True)
                line = {"shape": [n, c, hw], "dtype": name, "dir": direction,
                        "default": next(r[0] for r in rows if r[1] == "default"),
                        "top": rows[:6], "max_abs_diff": max(r[2] for r in rows)}
                print(json.dumps(line), flush=True)
                results.append(line)
            del xs, dys
            cupy.get_default_memory_pool().free_all_blocks()
    Path(os.environ.get("OUT", "/tmp"), "bn_sweep.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
