"""LayerNorm, softmax and cross-entropy on the GPU against PyTorch and the copy bandwidth.

The seed's benchmark: M = 4096 rows, fp16, N = 1024 ... 16384 in steps of 1024;
GB/s counted as 2*M*N*2 bytes forward (read x, write y) and 3*M*N*2 backward
(read x and dy, write dx; dw/db and mean/rstd not counted), as the seed did.
minifused is timed at the kernel layer (``minifused.kernels``: the launcher with
its allocations, on raw CuPy arrays), PyTorch at ``torch.nn.functional`` /
``torch.autograd.grad`` (its equivalent layer); backward of both includes dw/db.
Each is timed two ways: "kernel", as the seed's ``do_bench`` times (``harness.kernel_ms``:
a 256 MiB buffer is zeroed before each call, which evicts the L2, and the GPU then waits
1 ms, so that it is busy while the call is issued and the events enclose the device work
and not the launch latency), which the ratios use; and "eager" (``harness.bench_ms``: the GPU idle when
the call is issued, so launch latency and host overhead are included), for reference.
The API layer (``F.layer_norm`` on Tensors, eager) is listed for reference too.
The copy targets divide by a 1 GiB device-to-device copy. Beside it, each N lists copies of
the forward's own bytes (an (M, N) fp16 array into another: CuPy's element copy, the same
through 16-byte elements, and cudaMemcpyAsync) timed the same "kernel" way, and the run lists
an empty kernel timed that way: the fastest of those copies is the most a kernel moving those
bytes was seen to reach under this method (a one-wave problem of 16 MB pays the time of an
empty kernel between the events, the ramp, and the write-back of the L2 lines the flush left
dirty). ``same_size_copy_over_copy_min`` and the ``*_over_same_size_copy_min`` ratios (minimum
over N, the fastest copy) are recorded for reference, not targets.
Cross-entropy: forward + backward through each library's public API on (4096 x 32768)
fp16 logits, eager. Usage (GPU machine): python3 bench/norms.py [--quick]
"""
import sys

import cupy

import minifused as mf
import minifused.functional as F
from harness import Results, bench_ms, copy_bandwidth_gbs, gbs, kernel_ms, torch_or_none, warm_gpu
from minifused.kernels import norm as KN
from minifused.kernels import softmax as KS

M = 4096
NS = list(range(1024, 16384 + 1, 1024))
SETS = 3
QUICK = "--quick" in sys.argv


def rand(shape, dtype, seed):
    rs = cupy.random.RandomState(seed)
    return rs.standard_normal(shape, dtype=cupy.float32).astype(dtype)


def timed(res, case, impl, nbytes, fn, arg_sets):
    """GB/s of fn by kernel_ms (returned: the ratios use it) and by bench_ms (listed)."""
    res.add(case, impl + " eager", gbs(nbytes, bench_ms(fn, arg_sets)), "GB/s")
    kernel = gbs(nbytes, kernel_ms(fn, arg_sets))
    res.add(case, impl + " kernel", kernel, "GB/s")
    return kernel


def main():
    torch = torch_or_none()
    res = Results("norms")
    warm_gpu()  # the copy below is the denominator: one run started right after another measured 2717 GB/s, not 2963
    copy = copy_bandwidth_gbs()
    res.add("d2d copy", "cupy", copy, "GB/s")
    empty = cupy.RawKernel('extern "C" __global__ void empty() {}', "empty")
    res.add("empty kernel", "kernel", kernel_ms(lambda: empty((1,), (32,), ()), [()]) * 1e3, "us")
    ratios = {k: [] for k in ("ln_fwd_over_copy", "ln_fwd_over_torch", "ln_bwd_over_copy", "ln_bwd_over_torch",
                              "softmax_fwd_over_copy", "softmax_fwd_over_torch", "same_size_copy_over_copy",
                              "ln_fwd_over_same_size_copy", "softmax_fwd_over_same_size_copy")}
    ns = NS[::5] if QUICK else NS
    for n in ns:
        # Each N starts with both libraries' caches given back, so that no allocation inside a timed call
        # has to go to the driver; the free memory is printed per N.
        cupy.get_default_memory_pool().free_all_blocks()
        if torch is not None:
            torch.cuda.empty_cache()
        print(f"N={n}: {cupy.cuda.runtime.memGetInfo()[0] / 2**30:.1f} GiB free", flush=True)
        xs = [rand((M, n), cupy.float16, 10 * n + i) for i in range(SETS)]
        dys = [rand((M, n), cupy.float16, 10 * n + 5 + i) for i in range(SETS)]
        w = (rand((n,), cupy.float16, 1) * 0.1 + 1).astype(cupy.float16)
        b = rand((n,), cupy.float16, 2)
        fwd_bytes, bwd_bytes = 2 * M * n * 2, 3 * M * n * 2
        case = f"M={M} N={n} fp16"
        outs = [cupy.empty_like(x) for x in xs]
        stream = cupy.cuda.get_current_stream()
        copies = {
            "cupy": lambda x, y: y.__setitem__(Ellipsis, x),
            "cupy 16-byte elements": lambda x, y: y.view(cupy.complex128).__setitem__(Ellipsis, x.view(cupy.complex128)),
            "memcpyAsync": lambda x, y: cupy.cuda.runtime.memcpyAsync(y.data.ptr, x.data.ptr, x.nbytes, 3, stream.ptr),
        }
        same = 0.0
        for name, fn in copies.items():
            bw = gbs(fwd_bytes, kernel_ms(fn, list(zip(xs, outs))))
            res.add(f"d2d copy {case}", name + " kernel", bw, "GB/s")
            same = max(same, bw)
        ratios["same_size_copy_over_copy"].append(same / copy)
        del outs

        ln_f = timed(res, f"layer_norm fwd {case}", "minifused", fwd_bytes,
                     lambda x: KN.norm_fwd(x, w, b, 1e-5), [(x,) for x in xs])
        tx = [mf.Tensor(x) for x in xs]
        tw, tb = mf.Tensor(w), mf.Tensor(b)
        ms = bench_ms(lambda x: F.layer_norm(x, (n,), tw, tb), [(x,) for x in tx])
        res.add(f"layer_norm fwd {case}", "minifused F.layer_norm eager", gbs(fwd_bytes, ms), "GB/s")
        ratios["ln_fwd_over_copy"].append(ln_f / copy)
        ratios["ln_fwd_over_same_size_copy"].append(ln_f / same)

        stats = [KN.norm_fwd(x, w, b, 1e-5)[1:] for x in xs]
        ln_b = timed(res, f"layer_norm bwd {case}", "minifused", bwd_bytes,
                     lambda dy, x, st: KN.norm_bwd(dy, x, w, st[0], st[1]), list(zip(dys, xs, stats)))
        ratios["ln_bwd_over_copy"].append(ln_b / copy)

        sm_f = timed(res, f"softmax fwd {case}", "minifused", fwd_bytes, lambda x: KS.softmax_fwd(x),
                     [(x,) for x in xs])
        ratios["softmax_fwd_over_copy"].append(sm_f / copy)
        ratios["softmax_fwd_over_same_size_copy"].append(sm_f / same)

        if torch is not None:
            txs = [torch.from_dlpack(x) for x in xs]
            tdys = [torch.from_dlpack(d) for d in dys]
            ttw = torch.from_dlpack(w).requires_grad_()
            ttb = torch.from_dlpack(b).requires_grad_()
            with torch.no_grad():
                t_f = timed(res, f"layer_norm fwd {case}", "torch", fwd_bytes,
                            lambda x: torch.nn.functional.layer_norm(x, (n,), ttw, ttb), [(x,) for x in txs])
            ratios["ln_fwd_over_torch"].append(ln_f / t_f)
            xg = [x.clone().requires_grad_() for x in txs]
            ys = [torch.nn.functional.layer_norm(x, (n,), ttw, ttb) for x in xg]
            t_b = timed(res, f"layer_norm bwd {case}", "torch", bwd_bytes,
                        lambda y, x, d: torch.autograd.grad(y, (x, ttw, ttb), d, retain_graph=True),
                        list(zip(ys, xg, tdys)))
            del ys
            ratios["ln_bwd_over_torch"].append(ln_b / t_b)
            with torch.no_grad():
                t_s = timed(res, f"softmax fwd {case}", "torch", fwd_bytes, lambda x: torch.softmax(x, -1),
                            [(x,) for x in txs])
            ratios["softmax_fwd_over_torch"].append(sm_f / t_s)
        del xs, dys, stats, tx
        cupy.get_default_memory_pool().free_all_blocks()

    # fused cross-entropy forward + backward, (4096 x 32768) fp16 logits, public API of each
    rows, classes = 4096, 32768
    logits = [rand((rows, classes), cupy.float16, 900 + i) for i in range(SETS)]
    targets = [cupy.random.RandomState(950 + i).randint(0, classes, rows).astype(cupy.int64) for i in range(SETS)]
    mx = [mf.Tensor(x, requires_grad=True) for x in logits]
    mt = [mf.Tensor(t) for t in targets]

    def ours(x, t):
        x.grad = None
        F.cross_entropy(x, t).backward()

    ms_ours = bench_ms(ours, list(zip(mx, mt)))
    res.add(f"cross_entropy fwd+bwd {rows}x{classes} fp16", "minifused F (api)", ms_ours, "ms")
    res.add(f"cross_entropy fwd+bwd {rows}x{classes} fp16", "minifused F (api)",
            gbs(3 * rows * classes * 2, ms_ours), "GB/s (3 passes)")
    if torch is not None:
        tl = [torch.from_dlpack(x).requires_grad_() for x in logits]
        tt = [torch.from_dlpack(t) for t in targets]

        def theirs(x, t):
            x.grad = None
            torch.nn.functional.cross_entropy(x, t).backward()

        ms_t = bench_ms(theirs, list(zip(tl, tt)))
        res.add(f"cross_entropy fwd+bwd {rows}x{classes} fp16", "torch", ms_t, "ms")
        res.ratio("xent_fwd_bwd_over_torch", ms_t / ms_ours)
        # the timed results agree
        F.cross_entropy(mx[0], mt[0]).backward()
        torch.nn.functional.cross_entropy(tl[0], tt[0]).backward()
        err = float((torch.from_dlpack(mx[0].grad.data).float() - tl[0].grad.float()).norm()
                    / tl[0].grad.float().norm())
        res.add("cross_entropy grad rel. error vs torch", "minifused", err, "")

    for name, vals in ratios.items():
        if vals:
            res.ratio(name + "_min", min(vals))
    res.write()
    print("done")


if __name__ == "__main__":
    main()
