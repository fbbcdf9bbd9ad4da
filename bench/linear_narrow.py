"""A Linear of few outputs (a classifier head, 1024 -> 10) on linear_narrow.cu against the cuBLASLt path it replaces.

    python bench/linear_narrow.py [--dtype float32]

Per batch (64 .. 8192 rows): the forward (y = x @ w.T + b) and the backward as a training step runs it after a
ReLU layer (dW, db and dX through the producer's ReLU bit-mask with its bias gradient): the narrow kernel, one
launch each way, against cuBLASLt's plans of the same primitives (the narrow path switched off:
``linear_forward``, then ``linear_backward_weight`` with BGRADB and ``linear_backward_data`` with DRELU_BGRAD).
Each is timed as a captured graph of calls replayed back to back (``harness.graph_ms``: the way a captured training
step runs them), both sides in turns, best of 3 medians. Ratios ``narrow_{fwd,bwd}_over_cublaslt_b<B>``: cuBLASLt's
time over the narrow kernel's (above 1: the narrow kernel is faster). Past ``NARROW_MAX_FORWARD_ROWS`` (2048) the
forward runs cuBLASLt's GEMM on both sides (ratio 1 by construction: the limit applies); the backward, whose clusters
sum all rows of their columns, runs the narrow kernel up to ``NARROW_MAX_ROWS`` (8192), the largest batch timed.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cupy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Results, graph_ms, warm_gpu  # noqa: E402

from minifused.kernels import linear as K  # noqa: E402

K_IN, M_OUT, SETS = 1024, 10, 4


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--batches", default="64,256,1024,4096,8192")
    args = ap.parse_args()
    dtype = cupy.dtype(args.dtype)
    res = Results("linear_narrow")
    warm_gpu()
    rs = cupy.random.RandomState(0)

    def rand(*shape, scale=1.0):
        return (rs.standard_normal(shape, dtype=cupy.float32) * scale).astype(dtype)

    w, b = rand(M_OUT, K_IN, scale=K_IN ** -0.5), rand(M_OUT)
    narrow_max = K.NARROW_MAX_OUT
    for n in map(int, args.batches.split(",")):
        sets = []
        for _ in range(SETS):  # a producer's ReLU output and mask, this layer's output gradient
            z = rand(n, K_IN)
            h = cupy.maximum(z, 0)
            sets.append((h, K._pack_mask(z), rand(n, M_OUT)))

        def fwd(h, mask, dy):
            return K.linear_forward(h, w, b)

        def bwd_narrow(h, mask, dy):
            return K.linear_backward_narrow(dy, h, w, True, True, True, "relu", mask)

        def bwd_cublaslt(h, mask, dy):
            return K.linear_backward_weight(dy, h, True), K.linear_backward_data(dy, w, "relu", mask)

        best = {}
        for _ in range(3):
            for name, fn, narrow in (("fwd narrow", fwd, True), ("fwd cublaslt", fwd, False),
                                     ("bwd narrow", bwd_narrow, True), ("bwd cublaslt", bwd_cublaslt, False)):
                K.NARROW_MAX_OUT = narrow_max if narrow else 0
                try:
                    best[name] = min(best.get(name, float("inf")), graph_ms(fn, sets))
                finally:
                    K.NARROW_MAX_OUT = narrow_max
        case = f"Linear {K_IN}->{M_OUT} b{n} {dtype.name}"
        for name, ms in best.items():
            res.add(f"{case} {name.split()[0]}", name.split()[1], ms * 1e3, "us")
        for d in ("fwd", "bwd"):
            res.ratio(f"narrow_{d}_over_cublaslt_b{n}", best[f"{d} cublaslt"] / best[f"{d} narrow"])
    res.write()


if __name__ == "__main__":
    main()
