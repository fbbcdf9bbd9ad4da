"""Every op of the registry (tests/opinfo.py): gradients against float64 central differences, values
against the float64 NumPy reference, every public spelling and every dtype (CPU), and CuPy against the
NumPy results (GPU). Below, the ops' hand-written edge cases."""
import inspect

import ml_dtypes
import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
from minifused.testing import gradcheck
from opinfo import OPS, call, grad_params, inplace_forms, make_arrays, make_inputs, params, reference, samples
from tolerances import TOL, rel_err


@pytest.mark.parametrize("entry,sample", grad_params(p for p in samples() if p[0].grad))
def test_gradcheck_cpu(entry, sample):
    assert gradcheck(lambda *x: call(entry, sample, x), make_inputs(sample.specs), **sample.check)


@pytest.mark.parametrize("entry,sample", params(samples()))
def test_values_against_float64_reference(entry, sample):
    out = call(entry, sample, make_inputs(sample.specs))
    want = reference(entry, sample, make_arrays(sample.specs))
    assert out.shape == np.shape(want)
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("entry", [e for e in OPS if e.aliases], ids=lambda e: e.name)
def test_public_spellings_agree(entry):
    """Every other public spelling of the op gives the same values on every sample."""
    for sample in entry.samples:
        if sample.fn:
            continue
        inputs = make_inputs(sample.specs)
        want = entry.op(*inputs, **sample.kwargs).detach().numpy()
        for name, alias in entry.aliases.items():
            np.testing.assert_array_equal(alias(*inputs, **sample.kwargs).detach().numpy(), want, err_msg=name)


@pytest.mark.parametrize("entry", OPS, ids=lambda e: e.name)
def test_dtypes_cpu(entry):
    """Each dtype the op takes: the result keeps it, and its values match the float64 reference of the
    same (rounded) inputs within the dtype's tolerance."""
    for sample in entry.samples:
        if sample.fn:  # compositions may promote (a float64 factor, a cast): float64 above checks them
            continue
        arrays = make_arrays(sample.specs)
        for dtype in entry.dtypes:
            if dtype == np.float64:
                continue
            rounded = [a if a.dtype.kind == "i" else a.astype(dtype).astype(np.float64) for a in arrays]
            out = call(entry, sample, make_inputs(sample.specs, dtype=dtype))
            assert out.dtype == dtype, (sample.name, dtype)
            want = reference(entry, sample, rounded)
            assert rel_err(out.detach().numpy().astype(np.float64), want) <= 10 * TOL[dtype], (sample.name, dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("entry,sample", params(samples()))
def test_cuda_matches_numpy(entry, sample):
    results = {}
    for device in ("cpu", "cuda"):
        inputs = make_inputs(sample.specs, device, np.float32)
        out = call(entry, sample, inputs)
        assert out.device == mf.device(device)
        if entry.grad:
            weight = mf.tensor(np.random.default_rng(1).standard_normal(out.shape).astype(np.float32), device=device)
            (out * weight).sum().backward()
        results[device] = [out.detach().cpu().numpy()] + [None if t.grad is None else t.grad.cpu().numpy()
                                                           for t in inputs if t.requires_grad]
    for cpu_value, cuda_value in zip(results["cpu"], results["cuda"], strict=True):
        assert (cpu_value is None) == (cuda_value is None)  # e.g. where's condition: no gradient on either
        if cpu_value is not None:
            np.testing.assert_allclose(cuda_value, cpu_value, rtol=entry.gpu_tol, atol=entry.gpu_tol)


# Public ops that have no entry, and where they are tested instead.
NO_ENTRY = {"F.square_matmul_": "in-place x @ W for a square W (cuBLASLt only); tests/test_square_matmul.py",
            "F.gumbel_softmax": "random: tests/test_nn.py checks its distribution and straight-through gradient",
            "F.fractional_max_pool2d": "random windows: tests/test_nn_misc.py checks them against PyTorch's for fixed "
                                       "samples, and the gradient by gradcheck",
            "F.fractional_max_pool2d_with_indices": "as F.fractional_max_pool2d",
            "mf.nonzero_static": "integer indices (nonzero's, padded): tests/test_tensor_extras.py",
            "mf.fake_quantize_per_tensor_affine": "a straight-through gradient, not the rounding's (gradcheck's): "
                                                  "tests/test_quantize.py checks values, masks and errors against "
                                                  "PyTorch's",
            "mf.fake_quantize_per_channel_affine": "as mf.fake_quantize_per_tensor_affine",
            "mf.svd_lowrank": "random (a Gaussian test matrix): tests/test_lowrank.py checks it against NumPy's SVD "
                              "on matrices of rank at most q, and its gradient",
            "mf.pca_lowrank": "as mf.svd_lowrank"}
NOT_DIFFERENTIABLE = {"eq", "ne", "lt", "le", "gt", "ge", "argmax", "argmin"}  # test_no_grad_ops below


def test_registry_covers_the_public_ops():
    """Every differentiable op that minifused and minifused.functional export has an entry (or one of its
    spellings or in-place forms does), every case of the table the registry replaced is still a sample,
    and sample names (the test ids) are unique."""
    from minifused.ops import creation

    public = {f"mf.{n}" for n in set(mf.ops.__all__) - set(creation.__all__) - NOT_DIFFERENTIABLE}
    public |= {f"F.{n}" for n, v in vars(F).items() if not n.startswith("_") and inspect.isfunction(v)}
    covered = {e.spelled for e in OPS} | {a for e in OPS for a in e.aliases} | {f"F.{f.op}" for _, f in inplace_forms()}
    assert not public - covered - set(NO_ENTRY), sorted(public - covered - set(NO_ENTRY))
    names = [s.name for _, s in samples()]
    assert len(names) == len(set(names))
    assert not OLD_CASES - set(names), sorted(OLD_CASES - set(names))
    # gradcheck covers every entry with gradients; an entry without gives values that carry none
    # (bool or integer tensors, Python bools)
    for entry, sample in samples():
        if not entry.grad:
            assert not getattr(call(entry, sample, make_inputs(sample.specs)), "requires_grad", False), sample.name


# The cases of test_ops.py's table before the registry (each is a sample of the same name now).
OLD_CASES = set("""add add_broadcast add_scalar sub_broadcast rsub_scalar mul_broadcast rmul_scalar div_broadcast
rdiv_scalar pow_scalar pow_tensor rpow_scalar neg matmul_2d matmul_batched_broadcast matmul_batched_both
matmul_vec_mat matmul_mat_vec matmul_vec_vec exp log sqrt abs tanh sigmoid relu gelu_erf gelu_tanh clamp clamp_min
maximum minimum where sum_all sum_axis sum_axes_keepdim mean_all mean_axis_keepdim max_all max_dim max_dim_keepdim
min_dim amax_axes min_all var_all var_axis var_biased std_axis reshape view_infer flatten transpose permute T
unsqueeze squeeze expand index_int index_slices index_negative_none_ellipsis index_int_array index_list_repeated
index_bool_mask cat stack cast_roundtrip clone""".split())


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


# ---------------------------------------------------------------- GPU: the same-shape add (float32, 16-bit)
def _add_operands(n, dtype, seed):
    """Two operands: half random bit patterns (subnormals, infinities, NaNs, huge values), half normal
    values (sums that round), and first, where n allows, the pairs at the edges: overflow, inf - inf,
    signed zeros, subnormals, ties to even."""
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((2, n)).astype(dtype)
    uint = _uint(dtype)
    for x in (a, b):
        bits = rng.random(n) < 0.5
        x[bits] = rng.integers(0, np.iinfo(uint).max, n, dtype=uint, endpoint=True).view(dtype)[bits]
    info = ml_dtypes.finfo(dtype) if dtype == mf.bfloat16 else np.finfo(dtype)
    big, tiny, eps = float(info.max), float(info.smallest_subnormal), float(info.eps)
    pairs = [(big, big), (big, -big), (np.inf, -np.inf), (np.inf, 1.0), (-0.0, -0.0), (-0.0, 0.0), (1.5, -1.5),
             (tiny, tiny), (tiny, -2 * tiny), (1.0, eps / 2), (1.0 + eps, eps / 2), (-1.0, -eps / 2)]
    k = min(n, len(pairs))
    a[:k], b[:k] = np.array(pairs[:k]).T.astype(dtype)
    return a, b


def _uint(dtype):
    return np.uint32 if np.dtype(dtype).itemsize == 4 else np.uint16


def _same_bits(got, want):
    """Equal bit for bit, any NaN matching any NaN."""
    nan = np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
    uint = _uint(want.dtype)
    np.testing.assert_array_equal(got.view(uint)[~nan], want.view(uint)[~nan])


def _add_ref(a, b):
    """The sum in float64, rounded once (float64 holds the sum of two float32 values closely enough that
    rounding it gives the correctly rounded float32 or 16-bit sum)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return (a.astype(np.float64) + b.astype(np.float64)).astype(a.dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [mf.float16, mf.bfloat16, mf.float32], ids=str)
@pytest.mark.parametrize("n", [1, 7, 31, 32, 33, 255, 257, 4097, 3_000_003])
@pytest.mark.parametrize("offset", [0, 1])  # 1: a view that starts mid-vector
def test_gpu_same_shape_add_against_float64(dtype, n, offset, poisoned_pool):
    from conftest import dev_array, host
    from minifused.kernels import elementwise as KE

    a, b = _add_operands(n, dtype, n)
    da = dev_array(np.concatenate([a[:offset], a]), "cuda")[offset:]
    db = dev_array(b, "cuda")
    if n == 1:  # a 0-d pair (the running loss sum of a training loop)
        _same_bits(host(KE.add(da.reshape(()), db.reshape(()))), _add_ref(a, b).reshape(()))
    _same_bits(host(KE.add(da, db)), _add_ref(a, b))
    _same_bits(host(KE.add(db, da)), _add_ref(a, b))
    _same_bits(host(KE.add(da, da)), _add_ref(a, a))
    m = n // 7 * 7
    if m:  # two dimensions
        _same_bits(host(KE.add(da[:m].reshape(7, -1), db[:m].reshape(7, -1))), _add_ref(a[:m], b[:m]).reshape(7, -1))
    # in place (a residual block's out += shortcut): written into a, b and a's other elements untouched
    whole = dev_array(np.concatenate([a[:offset], a, a[:3]]), "cuda")
    into = whole[offset:offset + n]
    assert KE.add_into(into, db) is into
    _same_bits(host(into), _add_ref(a, b))
    _same_bits(host(whole[n + offset:]), a[:3])
    _same_bits(host(db), b)
    _same_bits(host(KE.add_into(db, db)), _add_ref(b, b))  # (x += x)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [mf.float16, mf.bfloat16, mf.float32], ids=str)
@pytest.mark.parametrize("n", [1, 33, 257, 4097, 3_000_003])
@pytest.mark.parametrize("offset", [0, 1])  # 1: views that start mid-vector
def test_gpu_mask_add_apply_is_add_then_mask_apply(dtype, n, offset, poisoned_pool):
    """The ReLU backward of a sum of two gradients in one pass equals add_same then mask_apply bit for bit (the sum
    rounded once, then selected; a masked-out NaN or inf sum gives 0), C-contiguous and channels-last."""
    from conftest import dev_array, host
    from minifused.kernels import elementwise as KE
    from minifused.kernels import is_channels_last

    a, b = _add_operands(n, dtype, n + 1)
    keep = np.random.default_rng(n).random(n) < 0.5
    mask = dev_array(KE.pack_mask_ref(keep), "cuda")
    da = dev_array(np.concatenate([a[:offset], a]), "cuda")[offset:]
    db = dev_array(np.concatenate([b[:offset], b]), "cuda")[offset:]
    assert KE.mask_add_fuses(da, db)
    want = np.where(keep, _add_ref(a, b), np.zeros((), dtype))
    _same_bits(host(KE.mask_add_apply(da, db, mask)), want)
    _same_bits(host(KE.mask_apply(da, mask)), np.where(keep, a, np.zeros((), dtype)))  # (subnormals kept)
    _same_bits(host(KE.mask_add_apply(da, db, mask)), host(KE.mask_apply(KE.add(da, db), mask)))
    if n % 33 == 0:  # channels-last (n, 3, 1, 11) arrays whose memory holds a and b: the mask in its order
        ca, cb = (dev_array(v, "cuda").reshape(n // 33, 1, 11, 3).transpose(0, 3, 1, 2) for v in (a, b))
        assert is_channels_last(ca) and KE.mask_add_fuses(ca, cb, True) and not KE.mask_add_fuses(ca, cb, False)
        assert not KE.mask_add_fuses(ca, cb.copy(), True)  # (one of them C-contiguous)
        got = KE.mask_add_apply(ca, cb, mask, channels_last=True)
        _same_bits(host(got).transpose(0, 2, 3, 1).reshape(-1), want)
        _same_bits(host(got), host(KE.mask_apply(KE.add(ca, cb), mask, channels_last=True)))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_gpu_in_place_add_matches_pytorch(dtype):
    """``x += y``, ``x.add_(y)`` and their gradients as PyTorch's, for same-shape operands (the kernel's path:
    C-contiguous and channels-last) and the others (a broadcast operand, a number, mixed layouts)."""
    torch = pytest.importorskip("torch")
    from conftest import host

    rng = np.random.default_rng(1)
    a, b, c, g = (rng.standard_normal(s).astype(np.float32) for s in ((4, 6, 5, 3),) * 3 + ((4, 6, 5, 3),))
    for cl_a, cl_b, other in ((False, False, b), (True, True, b), (True, False, b), (False, False, c[:1, :, :1]),
                              (False, False, 2.5)):
        def run(lib, t):
            dt = getattr(lib, dtype)
            fmt = (lambda flag: lib.channels_last if flag else lib.contiguous_format)
            x = lib.tensor(a, device="cuda", dtype=dt).to(memory_format=fmt(cl_a)).requires_grad_()
            y = other if isinstance(other, float) else lib.tensor(other, device="cuda", dtype=dt).to(
                memory_format=fmt(cl_b)).requires_grad_()
            out = x * 1.0
            out += y
            out.add_(x)
            out.backward(lib.tensor(g, device="cuda", dtype=dt))
            grads = [x.grad] + ([] if isinstance(y, float) else [y.grad])
            return [t(v) for v in [out] + grads]

        got = run(mf, lambda v: host(v.detach()).astype(np.float32))
        want = run(torch, lambda v: v.detach().float().cpu().numpy())
        for u, w in zip(got[:2], want[:2]):  # the sum and x's gradient: bit for bit
            np.testing.assert_array_equal(u, w)
        for u, w in zip(got[2:], want[2:]):  # y's: summed over the broadcast dimensions, in another order
            np.testing.assert_allclose(u, w, rtol=2e-6 if dtype == "float32" else 8e-3, atol=1e-6)


@pytest.mark.gpu
def test_gpu_add_routes_and_fallbacks(monkeypatch):
    """Tensor ``+`` and the sums of gradients take the kernel for same-shape float32 and 16-bit operands and
    give the float64 reference rounded once; other operands keep CuPy's ``a + b``."""
    from conftest import dev_array, f64, host
    from minifused.autograd import walk
    from minifused.kernels import elementwise as KE

    rng = np.random.default_rng(0)
    x, w1, w2, g = (rng.standard_normal((33, 65)).astype(mf.bfloat16) for _ in range(4))
    calls = []
    monkeypatch.setattr(walk, "_add", lambda a, b: calls.append(a.dtype) or KE.add(a, b))
    t = mf.tensor(x, device="cuda", requires_grad=True)
    _same_bits(host((t + t * 1.0).detach()), _add_ref(x, x))
    h = t * 1.0
    (h * mf.tensor(w1, device="cuda") + h * mf.tensor(w2, device="cuda")).backward(mf.tensor(g, device="cuda"))
    # d/dh = g * w1 + g * w2, each product rounded once (exactly representable in float64), then summed
    g1, g2 = ((g.astype(np.float64) * w.astype(np.float64)).astype(mf.bfloat16) for w in (w1, w2))
    want = _add_ref(g1, g2)
    _same_bits(host(t.grad), want)
    t.grad = None
    (t + t).backward(mf.tensor(g, device="cuda"))  # one leaf's two gradients
    _same_bits(host(t.grad), _add_ref(g, g))
    assert calls == [mf.bfloat16, mf.bfloat16]
    da, db = dev_array(x, "cuda"), dev_array(w1, "cuda")
    for p, q in ((da, db[:1]), (da, 2.0), (da.T, db.T), (da.astype(np.float64), db.astype(np.float64)),
                 (da, db.astype(np.float32))):
        want, got = p + q, KE.add(p, q)  # broadcast, scalar, not C-contiguous, float64, mixed dtypes
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(f64(got), f64(want))
