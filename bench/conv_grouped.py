"""Grouped 3x3 convolutions (ResNeXt's: 8 groups of 16, 32 and 64 channels at batch 128, CIFAR-sized maps) on the
GPU, fp16 and bf16, each direction: ours (its default plan, and its grouped GEMMs with the block-diagonal dense plan
turned off) beside cuDNN through PyTorch (NCHW and channels-last), device time as bench/conv.py times it
(``harness.kernel_ms``), TFLOP/s of the grouped convolution's multiply-adds. Ours takes the faster of NCHW and
channels-last inputs, cuDNN the faster of its layouts, as in bench/conv.py.

Ratios: ``grouped_<direction>_<fp16|bf16>_over_cudnn_<shape>`` (cuDNN's time over ours) and
``grouped_<direction>_<fp16|bf16>_over_grouped_gemm_<shape>`` (our default over our grouped GEMMs: what
``kernels.conv_plan.block_diagonal_applies`` buys). Writes bench/results/conv_grouped.json and .md.

    python bench/conv_grouped.py
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import cupy  # noqa: E402
import numpy as np  # noqa: E402

from conv import primitives, torch_tensor  # noqa: E402
from harness import Results, kernel_ms, torch_or_none, warm_gpu  # noqa: E402
from minifused import backend  # noqa: E402
from minifused.kernels import to_channels_last  # noqa: E402
from minifused.kernels.conv import ConvConfig  # noqa: E402

GROUPS = 8
SHAPES = [  # name, (N, C, H, W), stride: K = C, C / 8 channels a group
    ("c128h32g8", (128, 128, 32, 32), 1),
    ("c256h32s2g8", (128, 256, 32, 32), 2),
    ("c256h16g8", (128, 256, 16, 16), 1),
    ("c512h16s2g8", (128, 512, 16, 16), 2),
    ("c512h8g8", (128, 512, 8, 8), 1),
]


def main():
    torch = torch_or_none()
    res = Results("conv_grouped")
    rs = cupy.random.RandomState(0)
    warm_gpu()
    for name, (n, c, h, w), st in SHAPES:
        p = (h + 2 - 3) // st + 1
        geo = ((st, st), (1, 1), (1, 1), GROUPS)
        flops = 2.0 * n * c * p * p * (c // GROUPS) * 9
        for dname in ("float16", "bfloat16"):
            dt, tag = backend.as_dtype(dname), "fp16" if dname == "float16" else "bf16"
            sets = [(rs.standard_normal((n, c, h, w), dtype=np.float32).astype(dt),
                     rs.standard_normal((c, c // GROUPS, 3, 3), dtype=np.float32).astype(dt),
                     rs.standard_normal((n, c, p, p), dtype=np.float32).astype(dt)) for _ in range(2)]
            cl_sets = [tuple(to_channels_last(a) for a in s) for s in sets]
            times = {}
            for label, config in (("minifused", ConvConfig()), ("minifused_grouped_gemm", ConvConfig(
                    block_diagonal=False))):
                for layout, inputs in (("", sets), ("_channels_last", cl_sets)):
                    for direction, fn in primitives(geo, config).items():
                        ms = kernel_ms(fn, inputs)
                        res.add(f"{name} {direction} {dname}", label + layout, flops / ms / 1e9, "TFLOP/s")
                        times[label, direction] = min(ms, times.get((label, direction), ms))
            for direction in ("fwd", "bwd_data", "bwd_filter"):
                res.ratio(f"grouped_{direction}_{tag}_over_grouped_gemm_{name}",
                          times["minifused_grouped_gemm", direction] / times["minifused", direction])
            if torch is not None:
                torch.backends.cudnn.benchmark = True
                nchw = [tuple(torch_tensor(torch, a) for a in s) for s in sets]
                for label, tsets in (("cudnn", nchw), ("cudnn_channels_last", [tuple(
                        t.contiguous(memory_format=torch.channels_last) for t in s) for s in nchw])):
                    ops = {
                        "fwd": lambda x, wt, dy: torch.nn.functional.conv2d(x, wt, None, st, 1, 1, GROUPS),
                        "bwd_data": lambda x, wt, dy: torch.ops.aten.convolution_backward(
                            dy, x, wt, None, [st, st], [1, 1], [1, 1], False, [0, 0], GROUPS, [True, False, False]),
                        "bwd_filter": lambda x, wt, dy: torch.ops.aten.convolution_backward(
                            dy, x, wt, None, [st, st], [1, 1], [1, 1], False, [0, 0], GROUPS, [False, True, False]),
                    }
                    for direction, fn in ops.items():
                        ms = kernel_ms(fn, tsets)
                        res.add(f"{name} {direction} {dname}", label, flops / ms / 1e9, "TFLOP/s")
                        times["cudnn", direction] = min(ms, times.get(("cudnn", direction), ms))
                for direction in ("fwd", "bwd_data", "bwd_filter"):
                    res.ratio(f"grouped_{direction}_{tag}_over_cudnn_{name}",
                              times["cudnn", direction] / times["minifused", direction])
                del nchw
            del sets, cl_sets
            cupy.get_default_memory_pool().free_all_blocks()
    res.write()


if __name__ == "__main__":
    main()
