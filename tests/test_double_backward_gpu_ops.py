"""Double backward of single ops on the GPU against PyTorch's, on the paths the GPU takes (fused activation,
norm, softmax and cross-entropy kernels, the convolution kernels and their packed inputs, cuBLASLt epilogs):
with random r and v, the first gradients of sum(r * f(inputs)) and their product with v differentiated again."""
import numpy as np
import pytest

import minifused as mf

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


def _conv_t(T, x, w):
    return T.nn.functional.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1)


CASES = {  # name: (f(T, *inputs), input shapes)
    "silu": (lambda T, x: T.nn.functional.silu(x), [(4, 8, 5, 5)]),
    "gelu": (lambda T, x: T.nn.functional.gelu(x), [(4, 33)]),
    "gelu_tanh": (lambda T, x: T.nn.functional.gelu(x, approximate="tanh"), [(4, 33)]),
    "leaky_relu": (lambda T, x: T.nn.functional.leaky_relu(x, 0.2) * x, [(4, 8, 5, 5)]),
    "elu": (lambda T, x: T.nn.functional.elu(x), [(64,)]),
    "softplus": (lambda T, x: T.nn.functional.softplus(x, beta=2.0), [(64,)]),
    "mish": (lambda T, x: T.nn.functional.mish(x), [(64,)]),
    "hardswish": (lambda T, x: T.nn.functional.hardswish(x) * x, [(64,)]),
    "tanh_sigmoid": (lambda T, x: T.tanh(x) * T.sigmoid(x), [(64,)]),
    "layer_norm": (lambda T, x, w, b: T.nn.functional.layer_norm(x, (48,), w, b), [(6, 48), (48,), (48,)]),
    "group_norm": (lambda T, x, w, b: T.nn.functional.group_norm(x, 4, w, b), [(3, 8, 5, 5), (8,), (8,)]),
    "batch_norm": (lambda T, x, w, b: T.nn.functional.batch_norm(x, None, None, w, b, training=True),
                   [(6, 4, 5, 5), (4,), (4,)]),
    "softmax": (lambda T, x: T.softmax(x, 1), [(6, 37)]),
    "log_softmax": (lambda T, x: T.log_softmax(x, -1), [(6, 37)]),
    "cross_entropy": (lambda T, x: T.nn.functional.cross_entropy(
        x, T.tensor(np.arange(6) % 5, device="cuda"), label_smoothing=0.1), [(6, 5)]),
    "linear_relu": (lambda T, x, w, b: T.relu(T.nn.functional.linear(x, w, b)) * x.sum(), [(8, 16), (24, 16), (24,)]),
    "matmul": (lambda T, a, b: a @ b, [(3, 5, 7), (7, 4)]),
    "conv2d": (lambda T, x, w, b: T.nn.functional.conv2d(x, w, b, stride=2, padding=1, groups=2) ** 2,
               [(2, 4, 9, 9), (6, 2, 3, 3), (6,)]),
    "conv_transpose2d": (_conv_t, [(2, 4, 5, 5), (4, 3, 3, 3)]),
    "max_pool": (lambda T, x: T.nn.functional.max_pool2d(x * x, 2), [(2, 3, 6, 6)]),
    "avg_pool": (lambda T, x: T.nn.functional.avg_pool2d(x * x, 3, 2, 1), [(2, 3, 7, 7)]),
    "adaptive_avg": (lambda T, x: T.nn.functional.adaptive_avg_pool2d(x * x, 1), [(2, 3, 6, 6)]),
    "interpolate": (lambda T, x: T.nn.functional.interpolate(x * x, scale_factor=2, mode="bilinear"),
                    [(2, 3, 4, 4)]),
    "norm_penalty": (lambda T, x: (x.flatten(1).norm(2, dim=1) - 1) ** 2, [(4, 3, 4, 4)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_second_derivatives_match_pytorch(name):
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    f, shapes = CASES[name]
    rng = np.random.default_rng(abs(hash(name)) % 1000)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    out_shape = tuple(f(torch, *[torch.tensor(a).cuda() for a in inputs]).shape)
    r = rng.standard_normal(out_shape).astype(np.float32)
    vs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    results = []
    for T in (mf, torch):
        xs = [T.tensor(a).cuda().requires_grad_(True) for a in inputs]
        out = f(T, *xs)
        first = T.autograd.grad((out * T.tensor(r).cuda()).sum(), xs, create_graph=True)
        dot = sum((g * T.tensor(v).cuda()).sum() for g, v in zip(first, vs))
        second = T.autograd.grad(dot, xs, allow_unused=True)
        results.append([*first, *[s if s is not None else T.zeros_like(x) for s, x in zip(second, xs)]])
    for a, b in zip(*results):
        want = b.detach().cpu().double().numpy()
        np.testing.assert_allclose(a.detach().cpu().numpy().astype(np.float64), want, rtol=1e-3,
                                   atol=1e-4 * max(1.0, np.abs(want).max()))
