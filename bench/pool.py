"""Max pooling on the GPU, forward and backward: minifused's kernels against PyTorch's, in both layouts.

The cases: the ImageNet ResNet stem's 3x3 stride-2 pool with padding 1 (64 channels, 112x112 inputs, batch 128
and 256) and the 2x2 pool of CIFAR-sized CNNs (64 channels, 32x32, batch 256), bf16 and fp32; minifused
channels-last (``maxpool_nhwc_*``, 16 bytes of channels a thread) and C-contiguous (the backward
``maxpool_rows_bwd``, 16 bytes of a row a thread) against PyTorch's
``max_pool2d_with_indices`` and its backward in the same layout. Each call is timed with ``kernel_ms`` (L2 flushed,
device-side margin ahead of it), median; GB/s counts the bytes the math must move: forward x read and y written,
backward dy read and dx written (each framework's indices are its own business: ours a byte per output, PyTorch's
eight). Ratios: ``maxpool_{fwd,bwd}_{cl,cc}_over_torch_min`` (the smallest over the cases, channels-last or
C-contiguous: > 1, ours faster) and ``maxpool_{fwd,bwd}_{cl,cc}_over_copy_min`` (against the copy bandwidth
measured in the run).

    python bench/pool.py
"""
from __future__ import annotations

import cupy
import numpy as np

import minifused as mf
from conv import torch_tensor
from harness import Results, copy_bandwidth_gbs, gbs, kernel_ms, torch_or_none, warm_gpu
from minifused.kernels import pool as K
from minifused.kernels import to_channels_last
from norms import cast

CASES = [((128, 64, 112, 112), (3, 3), (2, 2), (1, 1)), ((256, 64, 112, 112), (3, 3), (2, 2), (1, 1)),
         ((256, 64, 32, 32), (2, 2), (2, 2), (0, 0))]
DTYPES = {"bf16": mf.bfloat16, "fp32": np.dtype(np.float32)}
SETS = 2


def main():
    torch = torch_or_none()
    res = Results("pool")
    warm_gpu()
    copy = copy_bandwidth_gbs()
    res.add("d2d copy", "cupy", copy, "GB/s")
    ratios = {}
    for shape, k, s, p in CASES:
        for name, dtype in DTYPES.items():
            rs = cupy.random.RandomState(0)
            xs = [cast(rs.standard_normal(shape, dtype=cupy.float32), dtype) for _ in range(SETS)]
            y0, _ = K.max_pool2d_forward(xs[0], k, s, p)
            dys = [cast(rs.standard_normal(y0.shape, dtype=cupy.float32), dtype) for _ in range(SETS)]
            fwd_bytes, bwd_bytes = xs[0].nbytes + y0.nbytes, xs[0].nbytes + y0.nbytes
            case = f"max_pool2d {'x'.join(map(str, shape))} k{k[0]} s{s[0]} p{p[0]} {name}"
            for cl in (True, False):
                layout = "channels-last" if cl else "C-contiguous"
                x_sets = [to_channels_last(x) if cl else x for x in xs]
                dy_sets = [to_channels_last(g) if cl else g for g in dys]
                idx_sets = [K.max_pool2d_forward(x, k, s, p)[1] for x in x_sets]
                ms = kernel_ms(lambda x: K.max_pool2d_forward(x, k, s, p), [(x,) for x in x_sets])
                ours_f = gbs(fwd_bytes, ms)
                res.add(f"{case} fwd", f"minifused {layout}", ours_f, "GB/s")
                ms = kernel_ms(lambda g, i: K.max_pool2d_backward(g, i, shape, k, s, p, channels_last=cl),
                               list(zip(dy_sets, idx_sets)))
                ours_b = gbs(bwd_bytes, ms)
                res.add(f"{case} bwd", f"minifused {layout}", ours_b, "GB/s")
                tag = "cl" if cl else "cc"
                ratios.setdefault(f"maxpool_fwd_{tag}_over_copy_min", []).append(ours_f / copy)
                ratios.setdefault(f"maxpool_bwd_{tag}_over_copy_min", []).append(ours_b / copy)
                if torch is None:
                    continue
                fmt = torch.channels_last if cl else torch.contiguous_format
                tx = [torch_tensor(torch, x).contiguous(memory_format=fmt) for x in xs]
                tg = [torch_tensor(torch, g).contiguous(memory_format=fmt) for g in dys]
                pool = torch.ops.aten.max_pool2d_with_indices
                ti = [pool(x, k, s, p)[1] for x in tx]
                ms = kernel_ms(lambda x: pool(x, k, s, p), [(x,) for x in tx])
                theirs_f = gbs(fwd_bytes, ms)
                res.add(f"{case} fwd", f"torch {layout}", theirs_f, "GB/s")
                back = torch.ops.aten.max_pool2d_with_indices_backward
                ms = kernel_ms(lambda g, x, i: back(g, x, k, s, p, (1, 1), False, i), list(zip(tg, tx, ti)))
                theirs_b = gbs(bwd_bytes, ms)
                res.add(f"{case} bwd", f"torch {layout}", theirs_b, "GB/s")
                ratios.setdefault(f"maxpool_fwd_{tag}_over_torch_min", []).append(ours_f / theirs_f)
                ratios.setdefault(f"maxpool_bwd_{tag}_over_torch_min", []).append(ours_b / theirs_b)
    for name, values in ratios.items():
        res.ratio(name, min(values))
    res.write()


if __name__ == "__main__":
    main()
