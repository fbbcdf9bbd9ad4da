"""Tuning sweep for the implicit-GEMM convolution's ConvConfig fields (GPU only).

    python3 bench/conv_sweep.py [--shapes mnist2,c256h14] [--dtypes float16,tf32] [--match wgmma]

For each shape of bench/conv.py (the direct-kernel mnist1 aside) and dtype, it runs every ConvConfig
below through forward, backward-data and backward-filter (forward only for the forward-from-NCHW
field), checks each result against the default config's (float32 relative error), and prints
TFLOP/s twice: eager (``bench_ms``: host time included, as bench/conv.py's ratios) and on the device
alone (``kernel_ms``: L2 flushed, launch hidden). cuDNN's forward through PyTorch is printed beside,
when importable. The auto rules of ``kernels.conv_plan`` come from these tables; the sweep is kept to
re-derive them. ``--match S`` runs only the configs whose JSON contains S (and the defaults).
Full results: ``$OUT/conv_sweep.json``.
"""
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cupy  # noqa: E402
import numpy as np  # noqa: E402

from conv import SHAPES, primitives, shape  # noqa: E402
from harness import bench_ms, kernel_ms, torch_or_none  # noqa: E402
from minifused import backend  # noqa: E402
from minifused.kernels.conv import ConvConfig  # noqa: E402

W22, W24 = {"tile_warps": (2, 2)}, {"tile_warps": (2, 4)}
VARIANTS = [
    {}, W22, {**W22, "tile_row_bytes": 64}, {**W22, "tile_m": 64}, {**W22, "tile_m": 64, "tile_row_bytes": 64},
    {"tile_row_bytes": 64}, {"tile_m": 64}, {"nchw_forward": False}, {**W22, "nchw_forward": False},
    {"nchw_forward": True}, {**W22, "nchw_forward": True}, {**W24, "nchw_forward": True},
    {**W22, "nchw_forward": True, "tile_row_bytes": 64}, {**W22, "nchw_forward": True, "tile_row_bytes": 128},
    {"wgmma": False}, {"wgmma_stages": 3}, {"wgmma": False, "nchw_forward": False},
    {"wgmma_stages": 3, "nchw_forward": False}, {"wgmma_stages": 4, "nchw_forward": False},
    {"wgmma_stages": 4, "tile_row_bytes": 128},
    {"wgmma_stages": 3, "tile_row_bytes": 128}, {"wgmma": False, "tile_row_bytes": 128},
    {"split_k_blocks_per_sm": 1}, {"split_k_blocks_per_sm": 2}, {"split_k_blocks_per_sm": 8},
    {"wgrad_splits": 1}, {"wgrad_splits": 2}, {"wgrad_splits": 3}, {"wgrad_splits": 8}, {"wgrad_splits": 26},
    {"tile_n": 64}, {"tile_n": 128}, {"tile_n": 64, "wgmma_stages": 4}, {"tile_n": 64, "wgmma_stages": 3},
    {"tile_m": 128, "tile_n": 64}, {"tile_m": 128, "tile_n": 128}, {"tile_m": 192, "tile_n": 64},
    {"tile_m": 192, "tile_n": 128},  # the TMA kernels' tiles (conv_tma._TILE_RATES)
    {"wgrad_tile": [128, 128]}, {"wgrad_tile": [128, 64]}, {"wgrad_tile": [64, 128]}, {"wgrad_tile": [64, 256]},
    {"wgrad_tile": [128, 128], "split_k_blocks_per_sm": 1}, {"wgrad_tile": [128, 128], "split_k_blocks_per_sm": 4},
    {"wgrad_tile": [64, 128], "split_k_blocks_per_sm": 1}, {"wgrad_tile": [64, 128], "split_k_blocks_per_sm": 4},
    {"wgrad_tile": [128, 128], "wgmma_stages": 3}, {"wgrad_tile": [64, 128], "wgmma_stages": 3},
]
FORWARD_ONLY = ("nchw_forward",)


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def rel(a, b):
    a, b = a.astype(cupy.float32), b.astype(cupy.float32)
    return float(cupy.linalg.norm(a - b) / max(float(cupy.linalg.norm(b)), 1e-30))


def main():
    torch = torch_or_none()
    names = arg("--shapes", ",".join(s[0] for s in SHAPES[1:])).split(",")
    dtypes = arg("--dtypes", "float16,tf32").split(",")
    rs = cupy.random.RandomState(0)
    results = {}
    for name, (n, c, h, w), k, st, ks, pad, p in [shape(s) for s in SHAPES if s[0] in names]:
        geo = ((st, st), (pad, pad), (1, 1), 1)
        flops = 2.0 * n * k * p * p * c * ks * ks
        for dname in dtypes:
            dt = backend.float32 if dname == "tf32" else backend.as_dtype(dname)
            backend.tf32_conv.allow_tf32 = dname == "tf32"
            sets = [(rs.standard_normal((n, c, h, w), dtype=np.float32).astype(dt),
                     rs.standard_normal((k, c, ks, ks), dtype=np.float32).astype(dt),
                     rs.standard_normal((n, k, p, p), dtype=np.float32).astype(dt)) for _ in range(2)]
            refs = {d: fn(*sets[0]) for d, fn in primitives(geo).items()}
            if torch is not None and dname != "bfloat16":
                ts = [tuple(torch.as_tensor(a, device="cuda") for a in s) for s in sets]
                with torch.backends.cudnn.flags(enabled=True, allow_tf32=True):
                    f = lambda x, wt, dy: torch.nn.functional.conv2d(x, wt, None, st, pad)  # noqa: E731
                    e, kk = flops / bench_ms(f, ts) / 1e9, flops / kernel_ms(f, ts) / 1e9
                print(f"{name:10} {dname:8} {'cudnn':58} fwd {e:6.1f}/{kk:6.1f}", flush=True)
                results[f"{name} {dname} cudnn"] = {"fwd": [e, kk]}
                del ts
            for variant in [v for v in VARIANTS if not v or arg("--match", "") in json.dumps(v)]:
                fns = primitives(geo, ConvConfig(**variant))
                row = {}
                try:
                    for d, fn in fns.items():
                        if d != "fwd" and any(field in variant for field in FORWARD_ONLY):
                            continue
                        err = rel(fn(*sets[0]), refs[d])
                        if err > 1e-2:
                            row[d] = f"WRONG ({err:.2e})"
                            continue
                        row[d] = [flops / bench_ms(fn, sets) / 1e9, flops / kernel_ms(fn, sets) / 1e9]
                except Exception as e:  # noqa: BLE001 - a variant that cannot launch is reported, not fatal
                    row["error"] = f"{type(e).__name__}: {str(e)[:100]}"
                cells = "  ".join(f"{d} {v[0]:6.1f}/{v[1]:6.1f}" if isinstance(v, list) else f"{d} {v}"
                                  for d, v in row.items())
                print(f"{name:10} {dname:8} {json.dumps(variant):58} {cells}", flush=True)
                results[f"{name} {dname} {json.dumps(variant)}"] = row
            del sets, refs
            cupy.get_default_memory_pool().free_all_blocks()
    backend.tf32_conv.allow_tf32 = False
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "conv_sweep.json"), "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
