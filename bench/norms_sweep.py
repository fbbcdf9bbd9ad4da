"""Tuning sweep for the LayerNorm / softmax register-path configurations (GPU only).

    python3 bench/norms_sweep.py [--n 1024,2048] [--what fwd,bwd,softmax]

For each row length N (M = 4096, fp16, as bench/norms.py) it times every candidate
configuration of ``kernels.norm`` / ``kernels.softmax`` with ``harness.kernel_ms`` (L2 flushed,
launch hidden), checks each against the default plan's result, and prints the default and the best
GB/s with the winning configuration. The plan functions' rules are set from these tables; the
sweep is kept to re-derive them on another GPU. Full results: ``$OUT/norms_sweep.json``.
"""
import json
import os
import sys

import cupy

from harness import copy_bandwidth_gbs, gbs, kernel_ms
from minifused.kernels import norm as KN
from minifused.kernels import softmax as KS
from minifused.kernels.rows import RowConfig

M = 4096
VEC = 8  # fp16, 16-byte accesses


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def shapes(n, ept_max):
    """(K, TPR) pairs covering n with K vectors per thread, K*VEC <= ept_max, TPR <= 1024."""
    nvec = -(-n // VEC)
    out = []
    for k in range(1, ept_max // VEC + 1):
        tpr = -(-nvec // (k * 32)) * 32
        if tpr <= 1024 and (k, tpr) not in out:
            out.append((k, tpr))
    return out


def block_sizes(tpr):
    return [tpr * r for r in (1, 2, 4, 8, 16, 32) if 64 <= tpr * r <= 1024] or [tpr]


def rand(shape, seed):
    return cupy.random.RandomState(seed).standard_normal(shape, dtype=cupy.float32).astype(cupy.float16)


def close(a, b):
    return bool(cupy.allclose(a.astype(cupy.float32), b.astype(cupy.float32), rtol=2e-2, atol=2e-2))


def sweep(name, n, fn, configs, nbytes, check):
    """{config: GB/s} of every configuration that compiles, launches and agrees with the default."""
    ref = fn(None)
    out = {"default": gbs(nbytes, kernel_ms(lambda: fn(None), [()], warmup=5, repeat=30))}
    for cfg in configs:
        try:
            got = fn(cfg)
            if not check(ref, got):
                print(f"{name} N={n} {cfg}: WRONG RESULT")
                continue
            out[str(cfg)] = gbs(nbytes, kernel_ms(lambda: fn(cfg), [()], warmup=5, repeat=30))
        except Exception as e:  # noqa: BLE001 - a configuration that cannot launch is skipped
            print(f"{name} N={n} {cfg}: {type(e).__name__} {str(e)[:80]}")
    return out


def main():
    ns = [int(v) for v in arg("--n", "1024,2048,3072,4096,6144,8192,12288,16384").split(",")]
    what = arg("--what", "fwd,bwd,softmax").split(",")
    copy = copy_bandwidth_gbs()
    print(f"copy {copy:.0f} GB/s")
    results = {"copy": copy}
    for n in ns:
        x, dy = rand((M, n), 10 * n), rand((M, n), 10 * n + 1)
        w = (rand((n,), 1) * 0.1 + 1).astype(cupy.float16)
        b = rand((n,), 2)
        _, mean, rstd = KN.norm_forward(x, w, b)
        fwd_cfgs = [RowConfig(k, tpr, nt) for k, tpr in shapes(n, 32) for nt in block_sizes(tpr)]
        bwd_cfgs = [RowConfig(k, tpr, nt, acc_smem=acc) for k, tpr in shapes(n, 32) for acc in (0, 1)
                    for nt in ([tpr] if acc else block_sizes(tpr))]
        runs = {
            "fwd": (lambda c: KN.norm_forward(x, w, b, 1e-5, config=c)[0], fwd_cfgs, 2 * M * n * 2, close),
            "bwd": (lambda c: KN.norm_backward(dy, x, w, mean, rstd, config=c), bwd_cfgs, 3 * M * n * 2,
                    lambda r, g: all(close(p, q) for p, q in zip(r, g))),
            "softmax": (lambda c: KS.softmax_forward(x, config=c), fwd_cfgs, 2 * M * n * 2, close),
        }
        for name in what:
            fn, cfgs, nbytes, check = runs[name]
            res = sweep(name, n, fn, cfgs, nbytes, check)
            best = max((k for k in res if k != "default"), key=res.get, default="default")
            print(f"{name:8} N={n:6}  default {res['default']:7.0f} ({res['default'] / copy:.2f})  "
                  f"best {res[best]:7.0f} ({res[best] / copy:.2f}) {best}", flush=True)
            results[f"{name} {n}"] = res
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "norms_sweep.json"), "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
