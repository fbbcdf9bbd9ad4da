"""Conv2d on the GPU: TFLOP/s per direction and dtype on MNIST's and ResNet-18's shapes, beside cuDNN
through PyTorch measured in the same run. Writes bench/results/conv.json and conv.md.

ResNet-18's shapes at batch 128 and 256 (the ``*b256`` rows): its 3x3 stride-1 and stride-2 convolutions and
its 1x1 stride-2 shortcuts, at CIFAR's 32x32 inputs (``r18*``) and at ImageNet's 56x56 stage inputs (the
``c*h56`` ... ``c512h7`` rows). ``conv_<direction>_<dtype>_over_cudnn_min`` is the worst ratio over them.

Our times include everything a call does on the GPU (NHWC repacks, weight packing, split-K reduction), timed
as device time (``harness.kernel_ms``: the L2 flushed and the GPU kept busy while the host issues the call, so
neither side's host overhead is counted; a call's host time is the eager steps' concern, bench/resnet.py).
Backward-data and backward-filter are timed separately, and so is cuDNN's
(``aten.convolution_backward`` with one output mask each). 3x3 convolutions use padding 1.
fp32: ours runs FFMA by default and TF32 when ``backend.tf32_conv.allow_tf32`` is set; PyTorch's cuDNN default
for fp32 convolutions is TF32 (``torch.backends.cudnn.allow_tf32 = True``), so both are
reported: ``cudnn`` (its default, TF32) and ``cudnn_strict_fp32``. fp16 / bf16 also time cuDNN on channels-last
tensors (``cudnn_channels_last``: x, w and dy, as a channels-last model has them) and ours on the same channels-last
x, w and dy (``minifused_channels_last``: x and dy read and written without repacks, the weights as their own
pack, dW written channels-last), and their ratios take each side's faster layout. Ratios compare like with like:
``*_fp32_over_cudnn_strict_<shape>`` (the fp32 target, and the fp32 ``_min``) is our default (FFMA) over
cuDNN without TF32; ``fwd_fp32_over_cudnn_<shape>`` is our fp32 forward with TF32 enabled over cuDNN's fp32
forward with its default, TF32 (TF32 against TF32: cuDNN's TF32 figures exceed the GPU's FFMA peak).
``fwd_fp32_ffma_over_cudnn_tf32_<shape>``, our FFMA default over cuDNN's TF32 default, is listed too.

    python bench/conv.py [--quick]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import cupy  # noqa: E402
import numpy as np  # noqa: E402

from harness import Results, kernel_ms, torch_or_none, warm_gpu  # noqa: E402
from minifused import backend  # noqa: E402
from minifused.kernels import conv as K  # noqa: E402
from minifused.kernels import to_channels_last  # noqa: E402
from minifused.kernels.conv import DEFAULT_CONFIG, ConvConfig  # noqa: E402

SHAPES = [  # name, (N, C, H, W), K, stride[, kernel size (3); padding is half of it]
    ("mnist1", (256, 1, 28, 28), 32, 1),
    ("mnist2", (256, 32, 28, 28), 64, 1),
    ("c64h56", (128, 64, 56, 56), 64, 1),
    ("c256h14", (128, 256, 14, 14), 256, 1),
    ("c128h28s2", (128, 128, 28, 28), 256, 2),
    ("c128h28", (128, 128, 28, 28), 128, 1),
    ("c512h7", (128, 512, 7, 7), 512, 1),
    ("c64h56s2", (128, 64, 56, 56), 128, 2),
    ("c256h14s2", (128, 256, 14, 14), 512, 2),
    ("c64h56s2k1", (128, 64, 56, 56), 128, 2, 1),
    ("c128h28s2k1", (128, 128, 28, 28), 256, 2, 1),
    ("c256h14s2k1", (128, 256, 14, 14), 512, 2, 1),
    ("r18c64h32", (128, 64, 32, 32), 64, 1),
    ("r18c128h16", (128, 128, 16, 16), 128, 1),
    ("r18c256h8", (128, 256, 8, 8), 256, 1),
    ("r18c512h4", (128, 512, 4, 4), 512, 1),
    ("r18c64h32s2", (128, 64, 32, 32), 128, 2),
    ("r18c128h16s2", (128, 128, 16, 16), 256, 2),
    ("r18c256h8s2", (128, 256, 8, 8), 512, 2),
    ("r18c64h32s2k1", (128, 64, 32, 32), 128, 2, 1),
    ("r18c128h16s2k1", (128, 128, 16, 16), 256, 2, 1),
    ("r18c256h8s2k1", (128, 256, 8, 8), 512, 2, 1),
]
# the same ResNet-18 shapes at batch 256, the other end of the range (``<name>b256``)
SHAPES += [(name + "b256", (256, *chw), k, *rest) for name, (_, *chw), k, *rest in SHAPES
           if not name.startswith("mnist")]
#: the five shapes the diagnostics look into (the forward's variants, host time, graph replay)
DIAGNOSED = ("mnist1", "mnist2", "c64h56", "c256h14", "c128h28s2")


def shape(entry):
    """(name, (N, C, H, W), K, stride, kernel size, padding, output size P)."""
    name, (n, c, h, w), k, st, *ks = entry
    ks = ks[0] if ks else 3
    return name, (n, c, h, w), k, st, ks, ks // 2, K.out_size(h, ks, st, ks // 2, 1)


def primitives(geo, config=DEFAULT_CONFIG):
    """Our three directions at ``geo`` (stride, padding, dilation, groups) under ``config``, as functions of
    (x, w, dy) that return the result."""
    return {
        "fwd": lambda x, wt, dy: K.conv2d_forward(x, wt, None, *geo, config=config)[0],
        "bwd_data": lambda x, wt, dy: K.conv2d_backward_data(dy, wt, x.shape, *geo, config=config),
        "bwd_filter": lambda x, wt, dy: K.conv2d_backward_filter(dy, x, wt.shape, *geo, config=config,
                                                                 channels_last_weight=not wt.flags.c_contiguous),
    }


def diagnostics(res, rs, warm, rep):
    """Where the time goes: the forward from NCHW vs the repacking one, 64-byte vs 128-byte tiles (fp16),
    pure GPU time of a forward through a CUDA-graph replay (no host gaps) and the host's enqueue time per
    call, for the small shapes."""
    import time

    for name, (n, c, h, w), k, st in (e for e in SHAPES if e[0] in DIAGNOSED):
        geo = ((st, st), (1, 1), (1, 1), 1)
        p = K.out_size(h, 3, st, 1, 1)
        flops = 2.0 * n * k * p * p * c * 9
        sets = [(rs.standard_normal((n, c, h, w), dtype=np.float32).astype(np.float16),
                 rs.standard_normal((k, c, 3, 3), dtype=np.float32).astype(np.float16),
                 rs.standard_normal((n, k, p, p), dtype=np.float32).astype(np.float16)) for _ in range(2)]
        if name != "mnist1":  # the forward from NCHW (conv.cu's FORWARD_NCHW) forced on and off
            for label, forced in (("minifused_nchw", True), ("minifused_repack", False)):
                fwd = primitives(geo, ConvConfig(nchw_forward=forced))["fwd"]
                res.add(f"{name} fwd float16", label, flops / kernel_ms(fwd, sets, warm, rep) / 1e9, "TFLOP/s")
        if name not in ("mnist1", "mnist2"):
            for direction, fn in primitives(geo, ConvConfig(tile_row_bytes=64)).items():
                res.add(f"{name} {direction} float16", "minifused_tile64B",
                        flops / kernel_ms(fn, sets, warm, rep) / 1e9, "TFLOP/s")
            rows64 = primitives(geo, ConvConfig(tile_m=64))
            for direction in ("fwd", "bwd_data"):
                res.add(f"{name} {direction} float16", "minifused_tileM64",
                        flops / kernel_ms(rows64[direction], sets, warm, rep) / 1e9, "TFLOP/s")
            continue
        fwd = primitives(geo)["fwd"]
        x, wt, dy = sets[0]
        fwd(x, wt, dy)
        cupy.cuda.get_current_stream().synchronize()
        t0 = time.perf_counter()
        for _ in range(50):
            fwd(x, wt, dy)
        t1 = time.perf_counter()
        cupy.cuda.get_current_stream().synchronize()
        res.add(f"{name} fwd float16", "minifused_host_enqueue", (t1 - t0) / 50 * 1e6, "us/call")
        try:
            stream = cupy.cuda.Stream(non_blocking=True)
            with stream:
                fwd(x, wt, dy)
                stream.synchronize()
                stream.begin_capture()
                for _ in range(10):
                    fwd(x, wt, dy)
                graph = stream.end_capture()
                graph.launch(stream)
                stream.synchronize()
                start, stop = cupy.cuda.Event(), cupy.cuda.Event()
                times = []
                for _ in range(20):
                    start.record(stream)
                    graph.launch(stream)
                    stop.record(stream)
                    stop.synchronize()
                    times.append(cupy.cuda.get_elapsed_time(start, stop) / 10)
            ms = sorted(times)[len(times) // 2]
            res.add(f"{name} fwd float16", "minifused_graph_replay", flops / ms / 1e9, "TFLOP/s")
        except Exception as exc:  # capture is a diagnostic only
            print(f"graph capture failed for {name}: {exc!r}")


def torch_tensor(torch, a):
    """A CuPy array as a PyTorch tensor on the GPU (bfloat16 through its bits: DLPack carries no
    ml_dtypes)."""
    if a.dtype == backend.bfloat16:
        return torch.as_tensor(a.view(np.uint16), device="cuda").view(torch.bfloat16)
    return torch.as_tensor(a, device="cuda")


def main(quick=False, only=None):
    torch = torch_or_none()
    res = Results("conv")
    warm, rep = (3, 10) if quick else (5, 30)
    rs = cupy.random.RandomState(0)
    warm_gpu()
    for entry in SHAPES:
        name, (n, c, h, w), k, st, ks, pad, p = shape(entry)
        if only and name not in only:
            continue
        geo = ((st, st), (pad, pad), (1, 1), 1)
        flops = 2.0 * n * k * p * p * c * ks * ks
        for dname in ("float16", "float32", "tf32", "bfloat16"):
            dt = backend.float32 if dname == "tf32" else backend.as_dtype(dname)
            backend.tf32_conv.allow_tf32 = dname == "tf32"
            sets = [(rs.standard_normal((n, c, h, w), dtype=np.float32).astype(dt),
                     rs.standard_normal((k, c, ks, ks), dtype=np.float32).astype(dt),
                     rs.standard_normal((n, k, p, p), dtype=np.float32).astype(dt)) for _ in range(2)]
            ours = primitives(geo)
            for direction, fn in ours.items():
                ms = kernel_ms(fn, sets, warm, rep)
                res.add(f"{name} {direction} {dname}", "minifused", flops / ms / 1e9, "TFLOP/s")
                ours[direction] = ms
            if dname in ("float16", "bfloat16"):  # ours at its strongest too: channels-last x and dy, read as they are
                cl_sets = [tuple(to_channels_last(a) for a in s) for s in sets]
                for direction, fn in primitives(geo).items():
                    ms = kernel_ms(fn, cl_sets, warm, rep)
                    res.add(f"{name} {direction} {dname}", "minifused_channels_last", flops / ms / 1e9, "TFLOP/s")
                    ours[direction] = min(ours[direction], ms)
                del cl_sets
            if torch is None or dname == "tf32":
                continue
            nchw = [tuple(torch_tensor(torch, a) for a in s) for s in sets]
            layouts = [("cudnn", nchw, False)]
            if dname == "float32":
                layouts.append(("cudnn_strict_fp32", nchw, True))
            else:  # cuDNN at its strongest: its channels-last kernels too (the ratio takes the faster layout)
                layouts.append(("cudnn_channels_last", [tuple(t.contiguous(memory_format=torch.channels_last)
                                                              for t in s) for s in nchw], False))
            best = {}
            for label, tsets, strict in layouts:
                with torch.backends.cudnn.flags(enabled=True, allow_tf32=not strict):
                    ops = {
                        "fwd": lambda x, wt, dy: torch.nn.functional.conv2d(x, wt, None, st, pad),
                        "bwd_data": lambda x, wt, dy: torch.ops.aten.convolution_backward(
                            dy, x, wt, None, [st, st], [pad, pad], [1, 1], False, [0, 0], 1, [True, False, False]),
                        "bwd_filter": lambda x, wt, dy: torch.ops.aten.convolution_backward(
                            dy, x, wt, None, [st, st], [pad, pad], [1, 1], False, [0, 0], 1, [False, True, False]),
                    }
                    for direction, fn in ops.items():
                        ms = kernel_ms(fn, tsets, warm, rep)
                        res.add(f"{name} {direction} {dname}", label, flops / ms / 1e9, "TFLOP/s")
                        if strict:
                            res.ratio(f"{direction}_fp32_over_cudnn_strict_{name}", ms / ours[direction])
                        elif dname == "float32" and direction == "fwd":
                            res.ratio(f"fwd_fp32_ffma_over_cudnn_tf32_{name}", ms / ours[direction])
                        best[direction] = min(ms, best.get(direction, ms))
            if dname in ("float16", "bfloat16"):
                tag = "fp16" if dname == "float16" else "bf16"
                for direction, ms in best.items():
                    res.ratio(f"{direction}_{tag}_over_cudnn_{name}", ms / ours[direction])
            del nchw, layouts
            del sets
            cupy.get_default_memory_pool().free_all_blocks()
    backend.tf32_conv.allow_tf32 = False
    if not only:
        diagnostics(res, rs, warm, rep)
    # fp32 forward at matched precision: ours with TF32 against cuDNN's default (TF32)
    rows = {(r["case"], r["impl"]): r["value"] for r in res.rows}
    for name, *_ in SHAPES:
        ours_tf32 = rows.get((f"{name} fwd tf32", "minifused"))
        cud = rows.get((f"{name} fwd float32", "cudnn"))
        if ours_tf32 and cud:
            res.ratio(f"fwd_fp32_over_cudnn_{name}", ours_tf32 / cud)
    resnet = [e[0] for e in SHAPES if e[0] not in ("mnist1", "mnist2")]
    for direction in ("fwd", "bwd_data", "bwd_filter"):
        for tag in ("fp16", "bf16", "fp32"):
            pick = "{d}_{t}_over_cudnn_{n}" if tag != "fp32" else "{d}_{t}_over_cudnn_strict_{n}"
            got = [res.ratios[key] for key in (pick.format(d=direction, t=tag, n=n) for n in resnet)
                   if key in res.ratios]
            if got:
                res.ratio(f"conv_{direction}_{tag}_over_cudnn_min", min(got))
    res.write()


if __name__ == "__main__":
    args = sys.argv[1:]
    main(quick="--quick" in args,
         only=set(args[args.index("--only") + 1].split(",")) if "--only" in args else None)
