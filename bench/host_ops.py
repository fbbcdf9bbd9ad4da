"""Host µs per call of common tensor ops on the GPU, minifused against PyTorch: what a small eager model pays per op.

At small sizes an eager step is bound by the host's time to issue each op (validation, the tape, the launch),
not by the GPU. Each op here runs on small CUDA tensors that require grad (so the tape records it, as in a
training step's forward), timed by ``harness.host_us`` (bursts of calls with an untimed synchronize between
them: the GPU queue never fills, so no call waits for the GPU), in float32 and bfloat16, for both libraries in
one run. Rows: µs per call; ratios ``host_<op>_<dtype>_ours_over_torch`` (below 1: less host time than PyTorch).
Usage (GPU machine): python3 bench/host_ops.py [--ops matmul,bmm,...]
"""
import sys

import minifused as mf
from harness import Results, host_us, torch_or_none, warm_gpu


def cases(T, dtype_name):
    """name -> a call of the op on small tensors of library ``T`` (minifused or torch), built once."""
    F = T.nn.functional
    dtype = getattr(T, dtype_name)

    def leaf(*shape):
        return T.randn(*shape, device="cuda").to(dtype).requires_grad_()

    m, w, b3, vec = leaf(32, 64), leaf(64, 64), leaf(4, 32, 64), leaf(64)
    table = leaf(10, 64)
    idx = T.randint(0, 10, (32,), device="cuda")
    mask = T.rand(32, 64, device="cuda") > 0.5
    return {
        "matmul": lambda: m @ w, "bmm": lambda: T.bmm(b3, b3.transpose(1, 2)), "linear": lambda: F.linear(m, w, vec),
        "layer_norm": lambda: F.layer_norm(m, (64,), vec, vec), "softmax": lambda: F.softmax(m, -1),
        "embedding": lambda: F.embedding(idx, table), "index_select": lambda: T.index_select(m, 0, idx),
        "getitem_index": lambda: m[idx], "add_bias": lambda: m + vec, "mul": lambda: m * m,
        "relu": lambda: F.relu(m), "sum": lambda: m.sum(), "mean_dim": lambda: m.mean(1),
        "where": lambda: T.where(mask, m, 0.0), "transpose": lambda: m.t(), "chunk": lambda: m.chunk(2, 1),
    }


def main():
    torch = torch_or_none()
    only = sys.argv[sys.argv.index("--ops") + 1].split(",") if "--ops" in sys.argv else None
    res = Results("host_ops")
    warm_gpu()
    for dtype in ("float32", "bfloat16"):
        ours = cases(mf, dtype)
        theirs = cases(torch, dtype) if torch is not None else {}
        for name, call in ours.items():
            if only and name not in only:
                continue
            us = host_us(call)
            res.add(f"{name} {dtype}", "minifused", us, "us/call")
            if name in theirs:
                ref = host_us(theirs[name])
                res.add(f"{name} {dtype}", "torch", ref, "us/call")
                res.ratio(f"host_{name}_{dtype}_ours_over_torch", us / ref)
    res.write()


if __name__ == "__main__":
    main()
