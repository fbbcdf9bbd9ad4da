"""Depthwise Conv2d (``groups`` = channels, 3x3, padding 1) on the GPU: MobileNetV2's depthwise layers at batch
128 against cuDNN through PyTorch, measured in the same run. Writes bench/results/conv_depthwise.json and .md.

Each direction (forward, backward-data, backward-filter) is timed as device time (``harness.kernel_ms``: the L2
flushed, host overhead not counted), ours through minifused.kernels.conv's routing (kernels/conv_depthwise.cu),
cuDNN's as ``F.conv2d`` / ``aten.convolution_backward`` with one output mask, on NCHW and on channels-last
tensors, the faster of the two kept. A depthwise convolution does 9 multiply-adds per output element: it is
bound by memory, so the rows also give our effective bandwidth (input plus output bytes over the time) beside
the device-to-device copy's. Ratios: ``dw_<direction>_<dtype>_over_cudnn_<shape>`` (cuDNN's time over ours:
> 1 is faster than cuDNN) and ``dw_<direction>_<dtype>_over_cudnn_min`` over the shapes.

    python bench/conv_depthwise.py
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import cupy  # noqa: E402
import numpy as np  # noqa: E402

from harness import Results, copy_bandwidth_gbs, kernel_ms, torch_or_none, warm_gpu  # noqa: E402
from minifused import backend  # noqa: E402
from minifused.kernels import conv as K  # noqa: E402

SHAPES = [  # name, N, C, H (= W), stride: MobileNetV2's depthwise layers at 224x224 inputs
    ("c96h112s2", 128, 96, 112, 2),
    ("c144h56", 128, 144, 56, 1),
    ("c144h56s2", 128, 144, 56, 2),
    ("c192h28", 128, 192, 28, 1),
    ("c384h14", 128, 384, 14, 1),
    ("c576h14s2", 128, 576, 14, 2),
    ("c960h7", 128, 960, 7, 1),
]
DTYPES = ("float16", "bfloat16", "float32")
DIRECTIONS = ("fwd", "bwd_data", "bwd_filter")


def ours(direction, stride, channels):
    s, p, d = (stride, stride), (1, 1), (1, 1)
    if direction == "fwd":
        return lambda x, w, dy: K.conv2d_forward(x, w, None, s, p, d, channels)
    if direction == "bwd_data":
        return lambda x, w, dy: K.conv2d_backward_data(dy, w, x.shape, s, p, d, channels)
    return lambda x, w, dy: K.conv2d_backward_filter(dy, x, w.shape, s, p, d, channels)


def theirs(torch, direction, stride, channels):
    if direction == "fwd":
        return lambda x, w, dy: torch.nn.functional.conv2d(x, w, None, stride, 1, 1, channels)
    mask = [direction == "bwd_data", direction == "bwd_filter", False]
    return lambda x, w, dy: torch.ops.aten.convolution_backward(dy, x, w, None, [stride] * 2, [1, 1], [1, 1],
                                                                False, [0, 0], channels, mask)


def main():
    torch = torch_or_none()
    if torch is None:
        sys.exit("bench/conv_depthwise.py compares against cuDNN: it needs PyTorch with CUDA")
    torch.backends.cudnn.benchmark = True
    warm_gpu()
    res = Results("conv_depthwise")
    res.add("copy", "device-to-device", copy_bandwidth_gbs(), "GB/s")
    rs = cupy.random.RandomState(0)
    worst = {}
    for name, n, c, h, stride in SHAPES:
        p = (h + 2 - 3) // stride + 1
        for dname in DTYPES:
            dt = backend.as_dtype(dname)
            sets = [tuple(rs.standard_normal(shape, dtype=cupy.float32).astype(dt)
                          for shape in ((n, c, h, h), (c, 1, 3, 3), (n, c, p, p))) for _ in range(2)]
            # bfloat16 crosses to PyTorch as its bits (DLPack knows no bfloat16)
            tdt = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}[dname]
            tsets = [tuple(torch.as_tensor(a.view(np.int16) if dname == "bfloat16" else a, device="cuda").view(tdt)
                           for a in s) for s in sets]
            tcl = [tuple(t.contiguous(memory_format=torch.channels_last) for t in s) for s in tsets]
            nbytes = (n * c * h * h + n * c * p * p) * np.dtype(dt).itemsize
            for direction in DIRECTIONS:
                mine = kernel_ms(ours(direction, stride, c), sets, 5, 20)
                fn = theirs(torch, direction, stride, c)
                cudnn = min(kernel_ms(fn, tsets, 5, 20), kernel_ms(fn, tcl, 5, 20))
                case = f"{name} {direction} {dname}"
                res.add(case, "minifused", mine * 1e3, "us")
                res.add(case, "cudnn best layout", cudnn * 1e3, "us")
                res.add(case, "minifused bandwidth", nbytes / mine / 1e6, "GB/s")
                res.ratio(f"dw_{direction}_{dname}_over_cudnn_{name}", cudnn / mine)
                key = f"dw_{direction}_{dname}_over_cudnn_min"
                worst[key] = min(worst.get(key, float("inf")), cudnn / mine)
    for key, value in worst.items():
        res.ratio(key, value)
    res.write()


if __name__ == "__main__":
    main()
