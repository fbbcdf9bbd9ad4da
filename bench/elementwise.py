"""Elementwise ops through minifused on the GPU: add and relu, forward and backward.

GB/s counts the bytes an op must move (each input read once, each output
written once); the ratio is to device-to-device copy bandwidth measured in the
same run. Usage (GPU machine): python3 bench/elementwise.py
"""
import cupy

import minifused as mf
from harness import Results, bench_ms, copy_bandwidth_gbs, gbs

ROWS, COLS = 8192, 8192  # 64 Mi elements: far larger than L2
SETS = 3


def tensors(shape, requires_grad=False, seed=0):
    mf.manual_seed(seed)
    return [mf.randn(*shape, device="cuda", requires_grad=requires_grad) for _ in range(SETS)]


def main():
    res = Results("elementwise")
    copy = copy_bandwidth_gbs()
    res.add("d2d copy", "cupy", copy, "GB/s")
    n = ROWS * COLS
    item = 4

    a, b = tensors((ROWS, COLS), seed=1), tensors((ROWS, COLS), seed=2)
    ms = bench_ms(lambda x, y: x + y, list(zip(a, b)))
    res.add(f"add fwd {ROWS}x{COLS} fp32", "minifused", gbs(3 * n * item, ms), "GB/s")
    res.ratio("add_fwd_over_copy", gbs(3 * n * item, ms) / copy)

    ms = bench_ms(lambda x: x.relu(), [(x,) for x in a])
    res.add(f"relu fwd {ROWS}x{COLS} fp32", "minifused", gbs(2 * n * item, ms), "GB/s")
    res.ratio("relu_fwd_over_copy", gbs(2 * n * item, ms) / copy)

    xs = tensors((ROWS, COLS), requires_grad=True, seed=3)
    outs = [x.relu() for x in xs]
    grads = tensors((ROWS, COLS), seed=4)  # (backward takes Tensor gradients, as PyTorch's)

    def relu_backward(x, y, g):
        x.grad = None
        y.backward(g, retain_graph=True)

    ms = bench_ms(relu_backward, list(zip(xs, outs, grads)))
    res.add(f"relu bwd {ROWS}x{COLS} fp32", "minifused", gbs(3 * n * item, ms), "GB/s")
    res.ratio("relu_bwd_over_copy", gbs(3 * n * item, ms) / copy)

    bias = tensors((COLS,), requires_grad=True, seed=5)
    sums = [x.detach() + bb for x, bb in zip(a, bias)]

    def add_bias_backward(bb, y, g):
        bb.grad = None
        y.backward(g, retain_graph=True)

    ms = bench_ms(add_bias_backward, list(zip(bias, sums, grads)))
    res.add(f"add bwd (bias grad) {ROWS}x{COLS} fp32", "minifused", gbs((n + COLS) * item, ms), "GB/s")
    res.ratio("add_bwd_bias_over_copy", gbs((n + COLS) * item, ms) / copy)

    # correctness of what was timed, once
    cupy.testing.assert_allclose(bias[0].grad._data, grads[0]._data.sum(0), rtol=1e-4, atol=1e-2)
    res.write()


if __name__ == "__main__":
    main()
