"""Batched and plain matrix products (``torch.bmm`` / ``@``) on the GPU: minifused against PyTorch, device time.

Shapes of attention (scores Q·Kᵀ and their product with V: 64 heads x batch of 256 or 1024 tokens, head size
64; the scores also as ``einsum("bhqd,bhkd->bhqk")``) and a plain (4096 x 1024)·(1024 x 1024), in bfloat16,
float16 and float32 (PyTorch's default float32 matmul: no TF32, as minifused's default). Each call is timed as
``harness.kernel_ms`` times it (the L2 flushed before each call, host overhead outside the events), through the
public op on tensors that do not require grad; TFLOP/s count 2·m·n·k per product. Ratios
``matmul_<case>_<dtype>_over_torch`` and ``einsum_scores_t1024_<dtype>_over_torch`` (above 1: faster).
Usage (GPU machine): python3 bench/matmul.py
"""
import minifused as mf
from harness import Results, kernel_ms, torch_or_none, warm_gpu

SETS = 3
#: name -> (a's shape, b's shape): b transposed where the name says so (a view, as attention's Kᵀ)
CASES = {"scores_t256": ((64, 256, 64), (64, 256, 64)), "values_t256": ((64, 256, 256), (64, 256, 64)),
         "scores_t1024": ((64, 1024, 64), (64, 1024, 64)), "values_t1024": ((64, 1024, 1024), (64, 1024, 64)),
         "plain_4096x1024x1024": ((4096, 1024), (1024, 1024))}


def operands(T, case, dtype_name, seed):
    """SETS pairs (a, b) of the case on the GPU in library T; the scores' b as the transposed view of K."""
    shape_a, shape_b = CASES[case]
    dtype = getattr(T, dtype_name)
    T.manual_seed(seed)
    pairs = []
    for _ in range(SETS):
        a = T.randn(*shape_a, device="cuda").to(dtype)
        b = T.randn(*shape_b, device="cuda").to(dtype)
        pairs.append((a, b.transpose(-1, -2) if case.startswith("scores") else b))
    return pairs


EINSUM, EINSUM_SHAPE = "bhqd,bhkd->bhqk", (4, 16, 1024, 64)
EINSUM_FLOP = 2 * 4 * 16 * 1024 * 1024 * 64


def einsum_operands(T, dtype_name):
    T.manual_seed(2)
    return [tuple(T.randn(*EINSUM_SHAPE, device="cuda").to(getattr(T, dtype_name)) for _ in range(2))
            for _ in range(SETS)]


def flop(case):
    shape_a, shape_b = CASES[case]
    batch = shape_a[0] if len(shape_a) == 3 else 1
    m, k = shape_a[-2:]
    n = shape_b[-2] if case.startswith("scores") else shape_b[-1]
    return 2 * batch * m * n * k


def main():
    torch = torch_or_none()
    res = Results("matmul")
    warm_gpu()
    for dtype in ("bfloat16", "float16", "float32"):
        for case in CASES:
            ms = kernel_ms(lambda a, b: a @ b, operands(mf, case, dtype, 1))
            res.add(f"{case} {dtype}", "minifused", flop(case) / ms / 1e9, "TFLOP/s")
            if torch is not None:
                ref = kernel_ms(lambda a, b: a @ b, operands(torch, case, dtype, 1))
                res.add(f"{case} {dtype}", "torch", flop(case) / ref / 1e9, "TFLOP/s")
                res.ratio(f"matmul_{case}_{dtype}_over_torch", ref / ms)
        # attention's scores written as an einsum over (batch, heads, tokens, head size)
        ms = kernel_ms(lambda q, k: mf.einsum(EINSUM, q, k), einsum_operands(mf, dtype))
        res.add(f"einsum {EINSUM} {dtype}", "minifused", EINSUM_FLOP / ms / 1e9, "TFLOP/s")
        if torch is not None:
            ref = kernel_ms(lambda q, k: torch.einsum(EINSUM, q, k), einsum_operands(torch, dtype))
            res.add(f"einsum {EINSUM} {dtype}", "torch", EINSUM_FLOP / ref / 1e9, "TFLOP/s")
            res.ratio(f"einsum_scores_t1024_{dtype}_over_torch", ref / ms)
    res.write()


if __name__ == "__main__":
    main()
