"""Every differentiable op: gradients against float64 central differences (CPU), and the
same op suite on CuPy against the NumPy results (GPU)."""
import numpy as np
import pytest

import minifused as mf
from minifused.testing import gradcheck


def positive(shape):
    """Inputs kept away from 0 for log/sqrt/div/pow."""
    return ("pos", shape)


def distinct(shape):
    """Inputs whose elements are well separated (max/min/abs/relu/clamp are not smooth at ties or 0)."""
    return ("distinct", shape)


# name -> (function of tensors, input specs). A spec is a shape (standard normal),
# positive(shape) or distinct(shape).
CASES = {
    "add": (lambda a, b: a + b, [(3, 4), (3, 4)]),
    "add_broadcast": (lambda a, b: a + b, [(2, 3, 4), (3, 1)]),
    "add_scalar": (lambda a: 2.5 + a + 1, [(3, 4)]),
    "sub_broadcast": (lambda a, b: a - b, [(4, 1), (1, 5)]),
    "rsub_scalar": (lambda a: 1.0 - a, [(3,)]),
    "mul_broadcast": (lambda a, b: a * b, [(2, 3, 4), (4,)]),
    "rmul_scalar": (lambda a: 3 * a, [(2, 2)]),
    "div_broadcast": (lambda a, b: a / b, [(3, 4), positive((1, 4))]),
    "rdiv_scalar": (lambda a: 2.0 / a, [positive((5,))]),
    "pow_scalar": (lambda a: a ** 3, [(3, 4)]),
    "pow_tensor": (lambda a, b: a ** b, [positive((3, 4)), (3, 4)]),
    "rpow_scalar": (lambda a: 2.0 ** a, [(3,)]),
    "neg": (lambda a: -a, [(3, 4)]),
    "matmul_2d": (lambda a, b: a @ b, [(3, 4), (4, 5)]),
    "matmul_batched_broadcast": (lambda a, b: a @ b, [(2, 3, 4), (4, 5)]),
    "matmul_batched_both": (lambda a, b: mf.matmul(a, b), [(2, 1, 3, 4), (3, 4, 2)]),
    "matmul_vec_mat": (lambda a, b: a @ b, [(4,), (4, 5)]),
    "matmul_mat_vec": (lambda a, b: a @ b, [(3, 4), (4,)]),
    "matmul_vec_vec": (lambda a, b: a @ b, [(4,), (4,)]),
    "exp": (lambda a: a.exp(), [(3, 4)]),
    "log": (lambda a: a.log(), [positive((3, 4))]),
    "sqrt": (lambda a: a.sqrt(), [positive((3, 4))]),
    "abs": (lambda a: abs(a), [distinct((3, 4))]),
    "tanh": (lambda a: a.tanh(), [(3, 4)]),
    "sigmoid": (lambda a: mf.sigmoid(a * 4), [(3, 4)]),
    "relu": (lambda a: a.relu(), [distinct((3, 4))]),
    "gelu_erf": (lambda a: mf.gelu(a), [(3, 4)]),
    "gelu_tanh": (lambda a: mf.gelu(a, approximate="tanh"), [(3, 4)]),
    "clamp": (lambda a: a.clamp(-0.5, 0.5), [distinct((4, 5))]),
    "clamp_min": (lambda a: mf.clamp(a, min=0.1), [distinct((4, 5))]),
    "maximum": (lambda a, b: mf.maximum(a, b), [distinct((3, 4)), distinct((4,))]),
    "minimum": (lambda a, b: mf.minimum(a, b), [distinct((3, 4)), distinct((3, 1))]),
    "where": (lambda a, b: mf.where(a > 0, a, b), [distinct((3, 4)), (4,)]),
    "sum_all": (lambda a: a.sum(), [(3, 4)]),
    "sum_axis": (lambda a: a.sum(1), [(3, 4, 2)]),
    "sum_axes_keepdim": (lambda a: a.sum((0, 2), keepdim=True), [(3, 4, 2)]),
    "mean_all": (lambda a: a.mean(), [(3, 4)]),
    "mean_axis_keepdim": (lambda a: a.mean(-1, keepdim=True), [(3, 4)]),
    "max_all": (lambda a: a.max(), [distinct((3, 4))]),
    "max_dim": (lambda a: a.max(1).values, [distinct((3, 4))]),
    "max_dim_keepdim": (lambda a: a.max(0, keepdim=True)[0], [distinct((3, 4))]),
    "min_dim": (lambda a: a.min(dim=-1).values, [distinct((3, 4))]),
    "amax_axes": (lambda a: mf.amax(a, (0, 2)), [distinct((3, 4, 2))]),
    "min_all": (lambda a: a.min(), [distinct((3, 4))]),
    "var_all": (lambda a: a.var(), [(3, 4)]),
    "var_axis": (lambda a: a.var(1, keepdim=True), [(3, 4)]),
    "var_biased": (lambda a: a.var(0, unbiased=False), [(3, 4)]),
    "std_axis": (lambda a: a.std(1), [(3, 4)]),
    "reshape": (lambda a: a.reshape(4, 3) * mf.arange(3, dtype=mf.float64, device=a.device), [(3, 4)]),
    "view_infer": (lambda a: a.view(-1, 2).exp(), [(3, 4)]),
    "flatten": (lambda a: a.flatten(1).exp(), [(2, 3, 4)]),
    "transpose": (lambda a: a.transpose(0, 2).exp(), [(2, 3, 4)]),
    "permute": (lambda a: a.permute(2, 0, 1).exp(), [(2, 3, 4)]),
    "T": (lambda a: a.T @ a, [(3, 4)]),
    "unsqueeze": (lambda a: a.unsqueeze(1) * a.unsqueeze(0), [(3,)]),
    "squeeze": (lambda a: a.squeeze(1).exp(), [(3, 1, 2)]),
    "expand": (lambda a: a.expand(2, 3, 4).exp(), [(3, 1)]),
    "index_int": (lambda a: a[1], [(3, 4)]),
    "index_slices": (lambda a: a[1:, ::2], [(3, 4)]),
    "index_negative_none_ellipsis": (lambda a: a[..., -1, None], [(2, 3, 4)]),
    "index_int_array": (lambda a: a[mf.tensor([0, 2, 0], device=a.device)], [(3, 4)]),
    "index_list_repeated": (lambda a: a[:, [1, 1, 3]], [(3, 4)]),
    "index_bool_mask": (lambda a: a[a > 0], [distinct((3, 4))]),
    "cat": (lambda a, b: mf.cat([a, b, a], dim=1), [(2, 3), (2, 1)]),
    "stack": (lambda a, b: mf.stack([a, b], dim=1), [(2, 3), (2, 3)]),
    "cast_roundtrip": (lambda a: a.float().double() * 2, [(3,)], {"eps": 1e-3, "atol": 1e-3}),
    "clone": (lambda a: a.clone() * a, [(3,)]),
}


def make_inputs(specs, device="cpu", dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for spec in specs:
        kind, shape = spec if isinstance(spec[0], str) else ("normal", spec)
        n = int(np.prod(shape))
        if kind == "pos":
            arr = rng.uniform(0.5, 2.0, shape)
        elif kind == "distinct":
            arr = (rng.permutation(n) - n / 2 + 0.5) / n * 2 + rng.uniform(-0.1, 0.1, n) / n
            arr = arr.reshape(shape)
        else:
            arr = rng.standard_normal(shape)
        out.append(mf.tensor(arr.astype(dtype), device=device, requires_grad=True))
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradcheck_cpu(name):
    fn, specs, *options = CASES[name]
    assert gradcheck(fn, make_inputs(specs), **(options[0] if options else {}))


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda_matches_numpy(name):
    fn, specs = CASES[name][:2]
    results = {}
    for device in ("cpu", "cuda"):
        inputs = make_inputs(specs, device, np.float32)
        out = fn(*inputs)
        assert out.device == mf.device(device)
        weight = mf.tensor(np.random.default_rng(1).standard_normal(out.shape).astype(np.float32), device=device)
        (out * weight).sum().backward()
        results[device] = [out.cpu().numpy()] + [t.grad.cpu().numpy() for t in inputs]
    for cpu_value, cuda_value in zip(results["cpu"], results["cuda"]):
        np.testing.assert_allclose(cuda_value, cpu_value, rtol=2e-5, atol=2e-5)


def test_forward_values_against_numpy():
    a, b = make_inputs([(3, 4), (4,)])
    x, y = a.numpy(), b.numpy()
    np.testing.assert_allclose((a * b + a / (b * b + 1)).detach().numpy(), x * y + x / (y * y + 1))
    np.testing.assert_allclose(a.var(1).detach().numpy(), x.var(1, ddof=1))
    np.testing.assert_allclose(mf.gelu(a).detach().numpy(),
                               0.5 * x * (1 + np.vectorize(__import__("math").erf)(x / np.sqrt(2))))
    values, indices = a.max(1)
    np.testing.assert_array_equal(indices.numpy(), x.argmax(1))
    np.testing.assert_allclose(values.detach().numpy(), x.max(1))


def test_ties_share_gradient_evenly():
    a = mf.tensor([1.0, 3.0, 3.0], requires_grad=True)
    a.max().backward()
    np.testing.assert_allclose(a.grad.numpy(), [0, 0.5, 0.5])
    b = mf.tensor([2.0, 2.0], requires_grad=True)
    c = mf.tensor([2.0, 1.0], requires_grad=True)
    mf.maximum(b, c).sum().backward()
    np.testing.assert_allclose(b.grad.numpy(), [0.5, 1.0])
    np.testing.assert_allclose(c.grad.numpy(), [0.5, 0.0])


def test_std_of_equal_values_has_zero_gradient():
    """std is 0 over equal values (or one value, correction 0); its gradient there is 0, as PyTorch's
    std backward masks it, not the NaN that sqrt's and var's chain rule gives (0 * inf)."""
    a = mf.tensor([[3.0, 3.0, 3.0], [1.0, 2.0, 4.0]], dtype=mf.float64, requires_grad=True)
    a.std(dim=1).sum().backward()
    centered = np.array([1.0, 2.0, 4.0]) - 7 / 3
    np.testing.assert_allclose(a.grad.numpy(), [[0, 0, 0], centered / (2 * np.std([1.0, 2.0, 4.0], ddof=1))])
    b = mf.tensor([[5.0], [6.0]], requires_grad=True)
    b.std(dim=1, correction=0).sum().backward()
    np.testing.assert_array_equal(b.grad.numpy(), [[0.0], [0.0]])


def test_pow_gradients_at_zero_follow_pytorch():
    """Where the chain rule meets 0 * inf, PyTorch's conventions: d(a^b)/da = 0 where b == 0 (0^0 too),
    d(a^b)/db = 0 where a == 0 and b >= 0, NaN for a negative base (log a)."""
    a = mf.tensor([0.0, 2.0, 0.0, -2.0], dtype=mf.float64, requires_grad=True)
    b = mf.tensor([0.0, 2.0, 2.0, 3.0], dtype=mf.float64, requires_grad=True)
    (a ** b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [0.0, 4.0, 0.0, 12.0])
    np.testing.assert_array_equal(b.grad.numpy()[[0, 2]], [0.0, 0.0])
    np.testing.assert_allclose(b.grad.numpy()[1], 4 * np.log(2))
    assert np.isnan(b.grad.numpy()[3])


def test_no_grad_ops():
    a = mf.tensor([[1.0, 5.0], [7.0, 2.0]])
    assert a.argmax().item() == 2
    assert a.argmax(1).tolist() == [1, 0]
    assert a.argmin(0, keepdim=True).tolist() == [[0, 1]]
    assert (a > 2).tolist() == [[False, True], [True, False]]
    assert (a == 5).dtype == mf.bool
    assert (a <= 2).sum().item() == 2


def test_dtype_promotion():
    i = mf.tensor([1, 2, 3])
    assert i.dtype == mf.int64
    assert (i * 2).dtype == mf.int64
    assert (i * 2.5).dtype == mf.float32
    assert (i / 2).dtype == mf.float32
    assert (i / 2).tolist() == [0.5, 1.0, 1.5]
    h = mf.ones(3, dtype=mf.float16)
    assert (h + 1.0).dtype == mf.float16
    assert (h + mf.ones(3)).dtype == mf.float32
    assert (h + mf.ones(3, dtype=mf.bfloat16)).dtype == mf.float32
    assert (mf.ones(2) + i[:2]).dtype == mf.float32


def test_gradient_flows_through_cast_in_own_dtype():
    a = mf.ones(3, dtype=mf.float16, requires_grad=True)
    b = mf.ones(3, dtype=mf.float32, requires_grad=True)
    (a * b).sum().backward()
    assert a.grad.dtype == mf.float16 and b.grad.dtype == mf.float32
