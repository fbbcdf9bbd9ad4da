"""LayerNorm, softmax and cross-entropy on the GPU against PyTorch and the copy bandwidth.

The seed's benchmark: M = 4096 rows, fp16, N = 1024 ... 16384 in steps of 1024;
GB/s counted as 2*M*N*2 bytes forward (read x, write y) and 3*M*N*2 backward
(read x and dy, write dx; dw/db and mean/rstd not counted), as the seed did.
minifused is timed at the kernel layer (``minifused.kernels``: the launcher with
its allocations, on raw CuPy arrays), PyTorch at its equivalent layer
(``torch.nn.functional``; backward ``aten.native_layer_norm_backward``, the op its
autograd calls); backward of both includes dw/db. Each is timed three ways:

* "graph" (``harness.graph_ms``), which the target ratios use: one call per input set captured in
  a CUDA graph and replayed back to back, as METHOD.md asks for small launches; the sets (at least
  256 MiB of inputs) make every call read device memory. This is the steady state of a training
  step: no per-call event floor, and each call writes back the L2 lines its predecessors left dirty.
  Inside a capture, LayerNorm (forward and backward) and the softmax forward launch with programmatic
  dependent launch (``minifused.kernels.launch``), as in a step captured by ``minifused.graphs``;
  eager calls do not.
* "isolated" (``harness.kernel_ms``), the seed's ``do_bench`` way: 256 MiB zeroed before each call,
  a 1 ms device wait, events around one call. An empty kernel's time this way (its row) is a large
  share of a copy of the N = 1024 forward's bytes: the ``*_isolated_min`` ratios are recorded beside
  the targets' for comparison with earlier runs.
* "eager" (``harness.bench_ms``: the GPU idle when the call is issued, so launch latency and host
  overhead count), for reference; the API layer (``F.layer_norm`` on Tensors) too.

The copy targets divide by a 1 GiB device-to-device copy, timed eagerly (see main()). Beside it, each
N lists copies of the forward's own bytes (an (M, N) fp16 array into another: CuPy's element copy and cudaMemcpyAsync)
timed the same two ways: ``same_size_copy_over_copy`` and ``*_over_same_size_copy_min`` (the fastest
of them) say how close a kernel moving those bytes can come, for reference, not as targets.
BatchNorm (``bn``): training forward (statistics, running-statistics update, normalize) and backward (dx, dw,
db) on (256, C, H, W) inputs, C = 64 ... 512, 32x32 and 8x8, fp16 and bf16 with fp32 weights, minifused's
kernel layer against PyTorch's native and cuDNN kernels (the faster of the two counts: PyTorch at its
strongest), GB/s as for LayerNorm (forward 2, backward 3 tensors of the input's size); ratios
``bn_fwd_over_copy_min``, ``bn_bwd_over_copy_min``, ``bn_fwd_over_torch_min``, ``bn_bwd_over_torch_min``.
Beside them, per shape, copies of x's bytes timed the same ways (``bn_*_over_same_size_copy_min``, for
reference): how close a kernel moving those bytes can come on the small 8x8 maps.
Cross-entropy: forward + backward through each library's public API on (4096 x 32768) fp16 logits,
eager (the target's ratio) and replayed from graphs (``xent_fwd_bwd_over_torch_graph``). Usage (GPU machine):
python3 bench/norms.py [--quick] [--only ln,bn,xent]
"""
import sys

import cupy

import minifused as mf
import minifused.functional as F
from harness import Results, bench_ms, copy_bandwidth_gbs, gbs, graph_ms, kernel_ms, torch_or_none, warm_gpu
from minifused.kernels import get_kernel
from minifused.kernels import batchnorm as KB
from minifused.kernels import norm as KN
from minifused.kernels import softmax as KS

M = 4096
NS = list(range(1024, 16384 + 1, 1024))
SETS = 3  # input sets for the eager and isolated timings (the L2 is flushed before each of those calls)
GRAPH_BYTES = 256 << 20  # at least this many bytes of x over the graph's sets
QUICK = "--quick" in sys.argv
ONLY = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else ["ln", "bn", "xent"]
BN_SHAPES = [(256, c, hw) for hw in (32, 8) for c in (64, 128, 256, 512)]


def rand(shape, dtype, seed):
    rs = cupy.random.RandomState(seed)
    return rs.standard_normal(shape, dtype=cupy.float32).astype(dtype)


def timed(res, case, impl, nbytes, fn, arg_sets, torch=None):
    """GB/s of fn (graph, isolated), each added as a row; eager is added too."""
    res.add(case, impl + " eager", gbs(nbytes, bench_ms(fn, arg_sets[:SETS])), "GB/s")
    isolated = gbs(nbytes, kernel_ms(fn, arg_sets[:SETS]))
    res.add(case, impl + " isolated", isolated, "GB/s")
    graph = gbs(nbytes, graph_ms(fn, arg_sets, torch=torch))
    res.add(case, impl + " graph", graph, "GB/s")
    return graph, isolated


def element_copy(x):
    y = cupy.empty_like(x)
    y[...] = x
    return y


def memcpy_copy(x):
    y = cupy.empty_like(x)
    cupy.cuda.runtime.memcpyAsync(y.data.ptr, x.data.ptr, x.nbytes, 3, cupy.cuda.get_current_stream().ptr)
    return y


def note(ratios, name, pair, denominator):
    """Appends the (graph, isolated) pair's ratios over the (graph, isolated) denominator to ``name`` and
    ``name_isolated``."""
    ratios.setdefault(name, []).append(pair[0] / denominator[0])
    ratios.setdefault(name + "_isolated", []).append(pair[1] / denominator[1])


def main():
    torch = torch_or_none()
    res = Results("norms")
    warm_gpu()  # the copy below is the denominator: a cold GPU measures it low
    # The copy denominator of every ratio: the 1 GiB copy, timed eagerly (the device-to-device copy);
    # a graph-timed 1 GiB copy measured lower, and the eager one matches the best graph-timed same-size copy.
    copy_eager = copy_bandwidth_gbs()
    res.add("d2d copy", "cupy", copy_eager, "GB/s")
    copy = (copy_eager, copy_eager)
    empty = get_kernel("elementwise.cu", "noop")
    res.add("empty kernel", "isolated", kernel_ms(lambda: empty((1,), (32,), ()), [()]) * 1e3, "us")
    ratios = {}
    if "ln" in ONLY:
        layer_norm_section(res, torch, copy, ratios)
    if "bn" in ONLY:
        batch_norm_section(res, torch, copy, ratios)
    if "xent" in ONLY:
        cross_entropy_section(res, torch)
    for name, vals in ratios.items():
        if vals:
            res.ratio(name + "_min", min(vals))
    res.write()
    print("done")


def layer_norm_section(res, torch, copy, ratios):
    ns = NS[::5] if QUICK else NS
    for n in ns:
        # Each N starts with both libraries' caches given back, so that no allocation inside a timed call
        # has to go to the driver; the free memory is printed per N.
        cupy.get_default_memory_pool().free_all_blocks()
        if torch is not None:
            torch.cuda.empty_cache()
        print(f"N={n}: {cupy.cuda.runtime.memGetInfo()[0] / 2**30:.1f} GiB free", flush=True)
        sets = max(SETS, -(-GRAPH_BYTES // (M * n * 2)))
        xs = [rand((M, n), cupy.float16, 10 * n + i) for i in range(sets)]
        dys = [rand((M, n), cupy.float16, 10 * n + 5000 + i) for i in range(sets)]
        w = (rand((n,), cupy.float16, 1) * 0.1 + 1).astype(cupy.float16)
        b = rand((n,), cupy.float16, 2)
        fwd_bytes, bwd_bytes = 2 * M * n * 2, 3 * M * n * 2
        case = f"M={M} N={n} fp16"
        same = (0.0, 0.0)
        for name, fn in (("cupy", element_copy), ("memcpyAsync", memcpy_copy)):
            pair = timed(res, f"d2d copy {case}", name, fwd_bytes, fn, [(x,) for x in xs])
            same = (max(same[0], pair[0]), max(same[1], pair[1]))
        note(ratios, "same_size_copy_over_copy", same, copy)

        ln_f = timed(res, f"layer_norm fwd {case}", "minifused", fwd_bytes,
                     lambda x: KN.norm_forward(x, w, b, 1e-5), [(x,) for x in xs])
        tx = [mf.Tensor(x) for x in xs[:SETS]]
        tw, tb = mf.Tensor(w), mf.Tensor(b)
        ms = bench_ms(lambda x: F.layer_norm(x, (n,), tw, tb), [(x,) for x in tx])
        res.add(f"layer_norm fwd {case}", "minifused F.layer_norm eager", gbs(fwd_bytes, ms), "GB/s")
        note(ratios, "ln_fwd_over_copy", ln_f, copy)
        note(ratios, "ln_fwd_over_same_size_copy", ln_f, same)

        stats = [KN.norm_forward(x, w, b, 1e-5)[1:] for x in xs]
        ln_b = timed(res, f"layer_norm bwd {case}", "minifused", bwd_bytes,
                     lambda dy, x, st: KN.norm_backward(dy, x, w, st[0], st[1]), list(zip(dys, xs, stats)))
        note(ratios, "ln_bwd_over_copy", ln_b, copy)

        sm_f = timed(res, f"softmax fwd {case}", "minifused", fwd_bytes, lambda x: KS.softmax_forward(x),
                     [(x,) for x in xs])
        note(ratios, "softmax_fwd_over_copy", sm_f, copy)
        note(ratios, "softmax_fwd_over_same_size_copy", sm_f, same)

        if torch is not None:
            txs = [torch.from_dlpack(x) for x in xs]
            tdys = [torch.from_dlpack(d) for d in dys]
            ttw, ttb = torch.from_dlpack(w), torch.from_dlpack(b)
            t_f = timed(res, f"layer_norm fwd {case}", "torch", fwd_bytes,
                        lambda x: torch.nn.functional.layer_norm(x, (n,), ttw, ttb), [(x,) for x in txs], torch)
            note(ratios, "ln_fwd_over_torch", ln_f, t_f)
            tstats = [torch.ops.aten.native_layer_norm(x, [n], ttw, ttb, 1e-5)[1:] for x in txs]
            t_b = timed(res, f"layer_norm bwd {case}", "torch", bwd_bytes,
                        lambda dy, x, st: torch.ops.aten.native_layer_norm_backward(
                            dy, x, [n], st[0], st[1], ttw, ttb, [True, True, True]),
                        list(zip(tdys, txs, tstats)), torch)
            note(ratios, "ln_bwd_over_torch", ln_b, t_b)
            t_s = timed(res, f"softmax fwd {case}", "torch", fwd_bytes, lambda x: torch.softmax(x, -1),
                        [(x,) for x in txs], torch)
            note(ratios, "softmax_fwd_over_torch", sm_f, t_s)
            del txs, tdys, tstats
        del xs, dys, stats, tx
        cupy.get_default_memory_pool().free_all_blocks()


def batch_norm_section(res, torch, copy, ratios):
    for n, c, hw in BN_SHAPES[::4] if QUICK else BN_SHAPES:
        same = None  # the fastest copy of x's bytes (fp16; bf16 has the same bytes)
        for dtype in (cupy.float16, "bfloat16"):
            dt = mf.bfloat16 if dtype == "bfloat16" else cupy.float16
            cupy.get_default_memory_pool().free_all_blocks()
            if torch is not None:
                torch.cuda.empty_cache()
            size = n * c * hw * hw
            sets = max(SETS, -(-GRAPH_BYTES // (size * 2)))
            xs = [cast(rand((n, c, hw * hw), cupy.float32, 7 * c + hw + i), dt) for i in range(sets)]
            dys = [cast(rand((n, c, hw * hw), cupy.float32, 9 * c + hw + i), dt) for i in range(sets)]
            w = rand((c,), cupy.float32, 3) * 0.1 + 1
            b = rand((c,), cupy.float32, 4)
            rm, rv = cupy.zeros(c, cupy.float32), cupy.ones(c, cupy.float32)
            case = f"batch_norm N={n} C={c} {hw}x{hw} {'bf16' if dtype == 'bfloat16' else 'fp16'}"
            if same is None:
                same = (0.0, 0.0)
                for name, fn in (("cupy", element_copy), ("memcpyAsync", memcpy_copy)):
                    pair = timed(res, f"d2d copy N={n} C={c} {hw}x{hw} fp16", name, 2 * size * 2, fn,
                                 [(x,) for x in xs])
                    same = (max(same[0], pair[0]), max(same[1], pair[1]))
            fwd = timed(res, case + " fwd", "minifused", 2 * size * 2,
                        lambda x: KB.batch_norm_forward(x, w, b, rm, rv, True, 0.1, 1e-5), [(x,) for x in xs])
            saved = [KB.batch_norm_forward(x, w, b, rm, rv, True, 0.1, 1e-5)[1:3] for x in xs]
            bwd = timed(res, case + " bwd", "minifused", 3 * size * 2,
                        lambda dy, x, st: KB.batch_norm_backward(dy, x, w, st[0], st[1], None, True),
                        list(zip(dys, xs, saved)))
            note(ratios, "bn_fwd_over_copy", fwd, copy)
            note(ratios, "bn_bwd_over_copy", bwd, copy)
            note(ratios, "bn_fwd_over_same_size_copy", fwd, same)
            note(ratios, "bn_bwd_over_same_size_copy", bwd, same)
            if torch is not None:
                shape = (n, c, hw, hw)
                tdt = torch.bfloat16 if dtype == "bfloat16" else torch.float16
                txs = [torch.randn(shape, device="cuda", dtype=tdt) for _ in xs]
                tdys = [torch.randn(shape, device="cuda", dtype=tdt) for _ in dys]
                tw, tb, trm, trv = (torch.from_dlpack(a) for a in (w, b, rm, rv))
                best_f = best_b = (0.0, 0.0)
                for impl in ("native", "cudnn"):
                    f, bk = _torch_bn(torch, impl, tw, tb, trm, trv)
                    try:
                        f(txs[0])
                    except RuntimeError as e:  # cuDNN takes no bfloat16 input with float32 weights
                        print(f"{case}: torch {impl} unavailable: {str(e).splitlines()[0][:120]}", flush=True)
                        continue
                    t_f = timed(res, case + " fwd", f"torch {impl}", 2 * size * 2, f, [(x,) for x in txs], torch)
                    tsaved = [f(x)[1:4] for x in txs]
                    t_b = timed(res, case + " bwd", f"torch {impl}", 3 * size * 2, bk,
                                list(zip(tdys, txs, tsaved)), torch)
                    best_f = (max(best_f[0], t_f[0]), max(best_f[1], t_f[1]))
                    best_b = (max(best_b[0], t_b[0]), max(best_b[1], t_b[1]))
                note(ratios, "bn_fwd_over_torch", fwd, best_f)
                note(ratios, "bn_bwd_over_torch", bwd, best_b)
                del txs, tdys
            del xs, dys, saved


def cast(x, dtype):
    """A CuPy float32 array in ``dtype`` (bfloat16 through minifused's cast)."""
    return mf.Tensor(x).to(dtype)._data if dtype == mf.bfloat16 else x.astype(dtype)


def _torch_bn(torch, impl, w, b, rm, rv):
    """PyTorch's training forward and backward kernels, called below autograd (as ours are)."""
    if impl == "cudnn":
        def fwd(x):
            return torch.ops.aten.cudnn_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)

        def bwd(dy, x, st):
            mean, invstd, reserve = st
            return torch.ops.aten.cudnn_batch_norm_backward(x, dy, w, rm, rv, mean, invstd, 1e-5, reserve)
        return fwd, bwd

    def fwd(x):
        y, mean, invstd = torch.ops.aten.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)
        return y, mean, invstd, None

    def bwd(dy, x, st):
        return torch.ops.aten.native_batch_norm_backward(dy, x, w, rm, rv, st[0], st[1], True, 1e-5,
                                                         [True, True, True])
    return fwd, bwd


def cross_entropy_section(res, torch):
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
        # The same calls replayed from CUDA graphs: device time without the host's issue time, which the
        # eager figure above includes for minifused (PyTorch's device time hides its own).
        try:
            g_ours = graph_ms(ours, list(zip(mx, mt)))
            g_t = graph_ms(theirs, list(zip(tl, tt)), torch=torch)
            res.add(f"cross_entropy fwd+bwd {rows}x{classes} fp16", "minifused F (api) graph", g_ours, "ms")
            res.add(f"cross_entropy fwd+bwd {rows}x{classes} fp16", "torch graph", g_t, "ms")
            res.ratio("xent_fwd_bwd_over_torch_graph", g_t / g_ours)
        except Exception as e:  # a capture failure should not lose the figures above
            print(f"cross_entropy graph timing failed: {type(e).__name__}: {e}", flush=True)
        # the timed results agree
        F.cross_entropy(mx[0], mt[0]).backward()
        torch.nn.functional.cross_entropy(tl[0], tt[0]).backward()
        err = float((torch.from_dlpack(mx[0].grad._data).float() - tl[0].grad.float()).norm()
                    / tl[0].grad.float().norm())
        res.add("cross_entropy grad rel. error vs torch", "minifused", err, "")


if __name__ == "__main__":
    main()
