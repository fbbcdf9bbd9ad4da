"""Linear on cuBLASLt epilogs: the seed's Figures 2 and 5, nn.Linear vs PyTorch, host time.

    python bench/linear.py            # everything (about a minute on an H100)
    python bench/linear.py --quick    # smaller sizes, for a smoke test

1. Seed size, fp16, (65536×16384)·(16384×8192):
   forward  — plain GEMM (DEFAULT), the seed's naive (``y = x @ w.T; y += b; y[y < 0] = 0``),
              fused RELU_AUX_BIAS (``linear_forward``), all in TFLOP/s;
   backward — the next layer's dX GEMM: plain, naive (GEMM, ``dx *= h > 0``, ``dx.sum(0)``)
              and fused on the producer's bit-mask (``linear_backward_data``: at this size the plain GEMM
              and one pass of ours, which measured faster than cuBLASLt's DRELU_BGRAD epilogue, timed beside
              it for reference).
2. ``nn.Linear(activation="relu")`` forward + backward (dX, dW, db) against PyTorch
   (``F.linear`` + ``relu``, autograd) at the seed size and at 8192³, fp16; autotuned, the same
   kernels nn.Linear runs, called with ``GemmConfig(autotune=True)``.
3. Host µs per call (784 → 1024, fp32) at batch 64, 256, 1024: Linear forward (training:
   params require grad, aux kept), forward + backward, the raw primitive, nvmath's
   stateful ``Matmul.execute`` and ``reset_operands`` + ``execute``, CuPy ``@``, PyTorch.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import cupy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Results, bench_ms, host_us, torch_or_none  # noqa: E402

from minifused import nn  # noqa: E402
from minifused.kernels import cublaslt as LT  # noqa: E402
from minifused.kernels import linear as K  # noqa: E402
from minifused.ops import linear as L  # noqa: E402
from minifused.tensor import Tensor  # noqa: E402


def rand(rs, shape, dtype, scale=1.0):
    return (rs.standard_normal(shape, dtype=cupy.float32) * scale).astype(dtype)


def bench_group(fns, input_sets, rounds=3, warmup=3, repeat=15):
    """Median ms of each function, measured round-robin (``rounds`` times, best round kept), so
    that clock and temperature drift during the run does not favour whichever ran first."""
    best = {name: float("inf") for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            best[name] = min(best[name], bench_ms(fn, input_sets, warmup=warmup, repeat=repeat))
    return best


def tflops(n, k, m, ms):
    return 2.0 * n * k * m / ms / 1e9


def seed_figures(res, n, k, m, sets=2):
    """Figure 2 (forward) and Figure 5 (backward) at (n×k)·(k×m), fp16."""
    rs = cupy.random.RandomState(0)
    dt = cupy.float16
    case = f"{n}x{k}x{m} fp16"
    w = rand(rs, (m, k), dt, k ** -0.5)
    b = rand(rs, (m,), dt)
    xs = [(rand(rs, (n, k), dt),) for _ in range(sets)]

    def naive_fwd(x):
        y = x @ w.T
        y += b
        y[y < 0] = 0
        return y

    for tuned in (False, True):
        cfg = LT.GemmConfig(autotune=tuned)
        LT.clear_plan_cache()
        t = bench_group({"plain": lambda x: K.linear_forward(x, w, config=cfg),
                         "fused": lambda x: K.linear_forward(x, w, b, "relu", aux=True, config=cfg),
                         "naive": naive_fwd, "cupy": lambda x: x @ w.T}, xs)
        sfx = " autotuned" if tuned else ""
        for impl, key in (("plain (cuBLASLt DEFAULT)", "plain"), ("cupy matmul", "cupy"),
                          ("naive (seed)", "naive"), ("fused RELU_AUX_BIAS", "fused")):
            if tuned and key in ("cupy", "naive"):
                continue
            res.add(f"fwd {case}", impl + sfx, tflops(n, k, m, t[key]), "TFLOP/s")
        sfx = "_autotuned" if tuned else ""
        res.ratio("fwd_fused_over_plain" + sfx, t["plain"] / t["fused"])
        res.ratio("fwd_fused_over_naive" + sfx, t["naive"] / t["fused"])
    del xs

    # Backward of the next layer: dy (n×k) @ w2 (k×m) -> the producer's (n×m) output gradient,
    # masked by the producer's ReLU and summed for its bias gradient.
    w2 = rand(rs, (k, m), dt, k ** -0.5)  # next layer's weight (out=k, in=m)
    hx = rand(rs, (n, k), dt)
    h, mask = K.linear_forward(hx, w, b, "relu", aux=True)  # the producer's output and bit-mask
    del hx
    dys = [(rand(rs, (n, k), dt),) for _ in range(sets)]

    def naive_bwd(dy):  # the seed's idiom, as its forward: boolean-mask assignment, then a sum
        dx = dy @ w2
        dx[h <= 0] = 0
        return dx, dx.sum(axis=0)

    def epilogue_bwd(dy, cfg):  # cuBLASLt's DRELU_BGRAD epilogue, which linear_backward_data leaves at this size
        split, K.DACT_SPLIT_MIN["relu"] = K.DACT_SPLIT_MIN["relu"], float("inf")
        try:
            return K.linear_backward_data(dy, w2, "relu", mask, config=cfg)
        finally:
            K.DACT_SPLIT_MIN["relu"] = split

    def naive_mul_bwd(dy):  # a stronger unfused baseline: multiply by the mask
        dx = dy @ w2
        dx *= h > 0
        return dx, dx.sum(axis=0)

    for tuned in (False, True):
        cfg = LT.GemmConfig(autotune=tuned)
        LT.clear_plan_cache()
        fns = {"plain": lambda dy: K.linear_backward_data(dy, w2, config=cfg),
               "fused": lambda dy: K.linear_backward_data(dy, w2, "relu", mask, config=cfg),
               "epilogue": lambda dy: epilogue_bwd(dy, cfg)}
        if not tuned:
            fns.update(naive=naive_bwd, naive_mul=naive_mul_bwd)
        t = bench_group(fns, dys)
        sfx = " autotuned" if tuned else ""
        for impl, key in (("plain (cuBLASLt DEFAULT)", "plain"), ("naive (seed: GEMM, dx[h<=0]=0, sum)", "naive"),
                          ("naive (GEMM, dx*=h>0, sum)", "naive_mul"), ("fused (linear_backward_data)", "fused"),
                          ("cuBLASLt DRELU_BGRAD epilogue (info)", "epilogue")):
            if key in t:
                res.add(f"bwd {case}", impl + sfx, tflops(n, k, m, t[key]), "TFLOP/s")
        if not tuned:
            res.ratio("bwd_fused_over_plain", t["plain"] / t["fused"])
            res.ratio("bwd_fused_over_naive", t["naive"] / t["fused"])
            res.ratio("bwd_fused_over_naive_mul (info)", t["naive_mul"] / t["fused"])
            res.ratio("bwd_drelu_bgrad_epilogue_over_plain (info)", t["plain"] / t["epilogue"])
        else:
            res.ratio("bwd_fused_over_plain_autotuned", t["plain"] / t["fused"])
    # correctness spot check of the fused backward against the naive one
    dx_f, db_f = K.linear_backward_data(dys[0][0], w2, "relu", mask)
    dx_n, db_n = naive_bwd(dys[0][0])
    err = float(cupy.linalg.norm((dx_f - dx_n).astype(cupy.float32)) / cupy.linalg.norm(dx_n.astype(cupy.float32)))
    print(f"  fused vs naive backward rel. error {err:.2e}", flush=True)
    del dys, h, mask, w2


def torch_layer(res, n, k, m, torch, sets=2, tag="", config=None):
    """nn.Linear(activation='relu') forward + backward vs PyTorch, fp16. With a ``config``
    (:class:`~minifused.kernels.cublaslt.GemmConfig`), the kernels nn.Linear runs, called with it."""
    case = f"Linear+relu fwd+bwd {n}x{k}->{m} fp16{tag}"
    flop = 3 * 2.0 * n * k * m
    lin = nn.Linear(k, m, activation="relu", device="cuda", dtype="float16")
    rs = cupy.random.RandomState(1)
    sets_ = [(Tensor(rand(rs, (n, k), cupy.float16), requires_grad=True), Tensor(rand(rs, (n, m), cupy.float16)))
             for _ in range(sets)]

    w, b = lin.weight._data, lin.bias._data

    def ours(x, g):
        if config is None:
            lin.weight.grad = lin.bias.grad = x.grad = None
            lin(x).backward(g)
            return
        # nn.Linear's kernels: forward with the ReLU mask, the mask's backward, dW with db, dX
        _, aux = K.linear_forward(x._data, w, b, "relu", aux=True, config=config)
        dz = K.activation_backward(g._data, aux, "relu")
        K.linear_backward_weight(dz, x._data, True, config=config)
        K.linear_backward_data(dz, w, config=config)

    if torch is not None:  # the same weights and random inputs, seen by PyTorch through DLPack
        tw = torch.nn.Parameter(torch.from_dlpack(lin.weight._data))
        tb = torch.nn.Parameter(torch.from_dlpack(lin.bias._data))
        tsets = [(torch.from_dlpack(x._data).requires_grad_(True), torch.from_dlpack(g._data)) for x, g in sets_]

        def theirs(x, g):
            tw.grad = tb.grad = x.grad = None
            torch.relu(torch.nn.functional.linear(x, tw, tb)).backward(g)

    t = {}
    for _ in range(3):
        t["ours"] = min(t.get("ours", float("inf")), bench_ms(ours, sets_, warmup=3, repeat=10))
        if torch is not None:
            t["torch"] = min(t.get("torch", float("inf")), bench_ms(theirs, tsets, warmup=3, repeat=10))
    ours_name = "minifused nn.Linear" + ("" if config is None else " kernels")
    res.add(case, ours_name, flop / t["ours"] / 1e9, "TFLOP/s")
    if torch is None:
        return None
    res.add(case, "pytorch linear+relu", flop / t["torch"] / 1e9, "TFLOP/s")
    return t["torch"] / t["ours"]


def host_times(res, batches=(64, 256, 1024), k=784, m=1024):
    """Host µs per call. Phase 1 runs before PyTorch is imported (a minifused program does not
    import it); phase 2 imports it, times PyTorch, and times nn.Linear again beside it."""
    rs = cupy.random.RandomState(2)
    lin = nn.Linear(k, m, activation="relu", device="cuda")
    data = {}
    for n in batches:
        x = Tensor(rand(rs, (n, k), cupy.float32))
        xg = Tensor(rand(rs, (n, k), cupy.float32), requires_grad=True)
        g = Tensor(rand(rs, (n, m), cupy.float32))
        data[n] = (x, xg, g)

    def fwd_bwd(xg, g):
        lin.weight.grad = lin.bias.grad = xg.grad = None
        lin(xg).backward(g)

    w, b = lin.weight._data, lin.bias._data
    rows = {n: {} for n in batches}
    for n in batches:
        x, xg, g = data[n]
        r = rows[n]
        r["nn.Linear fwd (training)"] = host_us(lambda: lin(x))
        r["nn.Linear fwd+bwd"] = host_us(lambda: fwd_bwd(xg, g))
        # (the row keeps the name of earlier results)
        r["kernel linear_fwd (aux)"] = host_us(lambda: K.linear_forward(x._data, w, b, "relu", aux=True))
        r["cupy x @ w.T"] = host_us(lambda: x._data @ w.T)
        try:
            from nvmath.linalg.advanced import Matmul, MatmulEpilog

            mm = Matmul(w, x._data.T)
            mm.plan(epilog=MatmulEpilog.RELU_AUX_BIAS, epilog_inputs={"bias": b})
            r["nvmath Matmul.execute"] = host_us(mm.execute)
            xs = [x._data, rand(rs, (n, k), cupy.float32)]

            def reset_exec(i=[0]):
                i[0] ^= 1
                mm.reset_operands(b=xs[i[0]].T)
                return mm.execute()

            r["nvmath reset_operands+execute"] = host_us(reset_exec)
            mm.free()
        except Exception as e:  # report, keep going
            print(f"  nvmath stateful timing failed: {e!r}", flush=True)
    torch = torch_or_none()
    if torch is not None:
        tw = torch.randn(m, k, device="cuda", requires_grad=True)
        tb = torch.randn(m, device="cuda", requires_grad=True)
        for n in batches:
            x, xg, g = data[n]
            r = rows[n]
            tx = torch.randn(n, k, device="cuda")
            txg = torch.randn(n, k, device="cuda", requires_grad=True)
            tg = torch.randn(n, m, device="cuda")

            def t_fwd_bwd():
                tw.grad = tb.grad = txg.grad = None
                torch.relu(torch.nn.functional.linear(txg, tw, tb)).backward(tg)

            # interleaved rounds, the median of each: the host's speed drifts over seconds
            # (its other tenants), and a drift must not favour whichever ran first
            pairs = {"pytorch linear+relu fwd": lambda: torch.relu(torch.nn.functional.linear(tx, tw, tb)),
                     "nn.Linear fwd (training), torch imported": lambda: lin(x),
                     "pytorch linear+relu fwd+bwd": t_fwd_bwd,
                     "nn.Linear fwd+bwd, torch imported": lambda: fwd_bwd(xg, g)}
            seen = {name: [] for name in pairs}
            for _ in range(5):
                for name, fn in pairs.items():
                    seen[name].append(host_us(fn, bursts=60, warmup=50))
            for name, v in seen.items():
                r[name] = statistics.median(v)
    for n in batches:
        for impl, v in rows[n].items():
            res.add(f"host {n}x{k}->{m} fp32", impl, v, "us")
        res.ratio(f"host_us_fwd_b{n}", rows[n]["nn.Linear fwd (training)"])
        res.ratio(f"host_us_fwd_bwd_b{n}", rows[n]["nn.Linear fwd+bwd"])
        if torch is not None:  # minifused over PyTorch host time, from the interleaved rounds
            r = rows[n]
            res.ratio(f"host_fwd_b{n}_over_torch (info)",
                      r["nn.Linear fwd (training), torch imported"] / r["pytorch linear+relu fwd"])
            res.ratio(f"host_fwd_bwd_b{n}_over_torch (info)",
                      r["nn.Linear fwd+bwd, torch imported"] / r["pytorch linear+relu fwd+bwd"])
    return torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip-seed", action="store_true")
    args = ap.parse_args()
    res = Results("linear")
    torch = host_times(res)
    L.reset_stats()
    if args.quick:
        seed = (4096, 2048, 1024)
        sizes = [seed, (2048, 2048, 2048)]
    else:
        seed = (65536, 16384, 8192)
        sizes = [seed, (8192, 8192, 8192)]
    if not args.skip_seed:
        seed_figures(res, *seed)
        cupy.get_default_memory_pool().free_all_blocks()
    names = ["seed", "8192"]
    for autotuned in (False, True):
        LT.clear_plan_cache()  # autotuning happens when a plan is made
        for (n, k, m), name in zip(sizes, names):
            r = torch_layer(res, n, k, m, torch, tag=" autotuned" if autotuned else "",
                            config=LT.GemmConfig(autotune=True) if autotuned else None)
            cupy.get_default_memory_pool().free_all_blocks()
            if torch is not None:
                torch.cuda.empty_cache()
            if r is not None:
                res.ratio(f"linear_relu_fwd_bwd_over_torch_{name}" + ("_autotuned" if autotuned else ""), r)
    print("plan cache:", LT.plan_cache_info(), "paths:", dict(L.stats), flush=True)
    res.write()
    import os

    for folder in filter(None, [str(Path(__file__).resolve().parent / "results"), os.environ.get("OUT")]):
        with open(Path(folder) / "linear.md", "a") as f:
            f.write(NOTES)


NOTES = """
Notes
- TFLOP/s count 2·n·k·m per GEMM (3 GEMMs for a Linear forward + backward). Each group of
  rows is timed round-robin (3 rounds, best median kept), CUDA events, 2 input sets rotated.
- fwd: plain = cuBLASLt DEFAULT through the same plan cache; naive = the seed's
  `y = x @ w.T; y += b; y[y < 0] = 0` (CuPy); fused = RELU_AUX_BIAS (output + bit-mask).
- bwd: the next layer's dX GEMM with the producer's ReLU backward and bias gradient.
  naive (seed) = GEMM, `dx[h <= 0] = 0`, `dx.sum(0)`; the `dx *= h > 0` row is a stronger
  unfused baseline, for information. fused = DRELU_BGRAD on the producer's bit-mask.
- "autotuned" rows: `GemmConfig(autotune=True)` (minifused.kernels.cublaslt, opt-in): each plan times
  the heuristic's candidates once when it is made; nn.Linear takes no config, so those Linear rows
  call the kernels nn.Linear runs. The target ratios use the default (heuristic) plans.
- host µs: the host's own time per call: bursts of 20 calls timed on the host clock with an
  untimed synchronize between bursts (so the GPU queue never fills and no call waits for the
  GPU), median over 200 bursts after 200 warm-up calls (`harness.host_us`); fp32,
  784 -> 1024, relu. `host_us_fwd_b*` is nn.Linear's training forward (parameters require
  grad, so the RELU_AUX_BIAS aux is kept), measured before PyTorch is imported; the rows
  marked "torch imported" repeat it in the same process after PyTorch is imported.
"""


if __name__ == "__main__":
    main()
