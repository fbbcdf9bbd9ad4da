"""Autocast's op lists as PyTorch's, device by device: its cpu list lacks softmax and the norms (they keep the
input's dtype there) but holds the 3-d pools, padding and grid_sample (float32); the losses run in float32 on
both; the region's dtype rules (a cpu dtype other than bfloat16 / float16 turns it off with a warning); the cpu
list's products (mv / addmv / addr stay float32, einsum and vecdot lowered), its float32 linalg, prod and quantile,
index_copy's promotion; PyTorch's top-level autocast state functions."""
import warnings

import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
from minifused import backend
from tolerances import cpu

BF16 = backend.bfloat16


def _x(shape, seed=0, positive=False):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return np.abs(a) + 0.1 if positive else a


def _low(a):
    """``a`` rounded to bfloat16, in float64 (the values a bfloat16 input holds)."""
    return np.asarray(a).astype(BF16).astype(np.float64)


def test_cpu_softmax_and_norms_keep_the_input_dtype():
    """PyTorch's cpu autocast lists softmax, log_softmax, layer / group / rms norm and instance_norm nowhere:
    a bfloat16 input gives bfloat16 (cuda's list computes the first five in float32)."""
    a = _x((4, 6))
    h = cpu(a).to(mf.bfloat16)
    ref = _low(a)
    e = np.exp(ref - ref.max(1, keepdims=True))
    soft = e / e.sum(1, keepdims=True)
    ln = (ref - ref.mean(1, keepdims=True)) / np.sqrt(ref.var(1, keepdims=True) + 1e-5)
    g = ref.reshape(4, 2, 3)
    gn = ((g - g.mean(2, keepdims=True)) / np.sqrt(g.var(2, keepdims=True) + 1e-5)).reshape(4, 6)
    rms = ref / np.sqrt((ref ** 2).mean(1, keepdims=True) + np.finfo(np.float32).eps)
    img = _low(_x((2, 3, 4), 1))
    inorm = (img - img.mean(2, keepdims=True)) / np.sqrt(img.var(2, keepdims=True) + 1e-5)
    with mf.autocast("cpu"):
        outs = [(F.softmax(h, 1), soft), (F.log_softmax(h, 1), np.log(soft)), (F.layer_norm(h, (6,)), ln),
                (F.group_norm(h, 2), gn), (F.rms_norm(h, (6,)), rms),
                (F.instance_norm(cpu(img.astype(np.float32)).to(mf.bfloat16)), inorm)]
    for out, want in outs:
        assert out.dtype == mf.bfloat16
        np.testing.assert_allclose(out.float().numpy(), want, rtol=2e-2, atol=2e-2)


def test_cpu_margin_losses_run_in_float32():
    """triplet_margin_loss, multi_margin_loss and multilabel_margin_loss are on both of PyTorch's float32 lists."""
    a, p, n = _x((3, 5), 0), _x((3, 5), 1), _x((3, 5), 2)
    la, lp, ln = _low(a), _low(p), _low(n)
    d = lambda u, v: np.sqrt(((u - v + 1e-6) ** 2).sum(1))  # noqa: E731
    triplet = np.maximum(1.0 + d(la, lp) - d(la, ln), 0).mean()
    y = np.array([0, 2, 4])
    z = np.maximum(1.0 - la[np.arange(3), y][:, None] + la, 0)
    z[np.arange(3), y] = 0
    multi = (z.sum(1) / 5).mean()
    t = np.array([[1, -1, 0, 0, 0], [3, 0, -1, 0, 0], [2, 4, 1, -1, 0]])
    ml = []
    for row, tr in zip(la, t):
        js = list(tr[:list(tr).index(-1)])
        ml.append(sum(max(0.0, 1 - (row[j] - row[i])) for j in js for i in range(5) if i not in js) / 5)
    with mf.autocast("cpu"):
        b = [cpu(v).to(mf.bfloat16) for v in (a, p, n)]
        outs = [(F.triplet_margin_loss(*b), triplet), (F.multi_margin_loss(b[0], cpu(y)), multi),
                (F.multilabel_margin_loss(b[0], cpu(t)), np.mean(ml))]
    for out, want in outs:
        assert out.dtype == mf.float32
        np.testing.assert_allclose(out.item(), want, rtol=1e-5)


def test_cpu_composite_losses_keep_the_input_dtype():
    """multilabel_soft_margin_loss and gaussian_nll_loss are composites in PyTorch (float32 on cuda, where their
    sum / log are on the list): on cpu a bfloat16 input gives bfloat16."""
    a, t, v = _x((3, 4), 0), 1 / (1 + np.exp(-_x((3, 4), 1))), _x((3, 4), 2, positive=True)
    la, lt, lv = _low(a), _low(t), _low(v)
    sig = 1 / (1 + np.exp(-la))
    msm = (-(lt * np.log(sig) + (1 - lt) * np.log(1 - sig))).mean(1).mean()
    gnll = (0.5 * (np.log(lv) + (la - lt) ** 2 / lv)).mean()
    with mf.autocast("cpu"):
        b = [cpu(x.astype(np.float32)).to(mf.bfloat16) for x in (a, t, v)]
        outs = [(F.multilabel_soft_margin_loss(b[0], b[1]), msm), (F.gaussian_nll_loss(b[0], b[1], b[2]), gnll)]
    for out, want in outs:
        assert out.dtype == mf.bfloat16
        np.testing.assert_allclose(out.item(), want, rtol=2e-2)


def test_prelu_computes_in_the_region_dtype():
    """prelu is on both lower-precision lists: float32 input and weight give bfloat16."""
    a = _x((2, 3, 4))
    w = np.array([0.25, -0.5, 0.1], np.float32)
    with mf.autocast("cpu"):
        out = F.prelu(cpu(a), cpu(w))
    lw = _low(w).reshape(1, 3, 1)
    assert out.dtype == mf.bfloat16
    np.testing.assert_allclose(out.float().numpy(), _low(np.where(_low(a) > 0, _low(a), lw * _low(a))), rtol=0)


def test_cpu_float32_list_pools_padding_and_grid_sample():
    """The 3-d / fractional max pools, max_unpool, reflect (1-d, 2-d) and replicate padding and grid_sample are on
    PyTorch's cpu float32 list: a bfloat16 input gives float32 (reflect padding of 3 dimensions is not)."""
    vol = _x((1, 2, 4, 4, 4))
    lv = _low(vol)
    b = cpu(vol).to(mf.bfloat16)
    img = cpu(vol[:, :, 0]).to(mf.bfloat16)
    with mf.autocast("cpu"):
        outs = {
            "max_pool3d": (F.max_pool3d(b, 2), lv.reshape(1, 2, 2, 2, 2, 2, 2, 2).max((3, 5, 7))),
            "avg_pool3d": (F.avg_pool3d(b, 2), lv.reshape(1, 2, 2, 2, 2, 2, 2, 2).mean((3, 5, 7))),
            "adaptive_avg_pool3d": (F.adaptive_avg_pool3d(b, 1), lv.mean((2, 3, 4), keepdims=True)),
            "adaptive_max_pool3d": (F.adaptive_max_pool3d(b, 1), lv.max((2, 3, 4), keepdims=True)),
            "replicate": (F.pad(b, (1, 1, 1, 1, 1, 1), mode="replicate"),
                          np.pad(lv, [(0, 0)] * 2 + [(1, 1)] * 3, mode="edge")),
            "reflect2d": (F.pad(img, (1, 1, 1, 1), mode="reflect"),
                          np.pad(lv[:, :, 0], [(0, 0)] * 2 + [(1, 1)] * 2, mode="reflect")),
            "grid_sample": (F.grid_sample(img, cpu(np.zeros((1, 1, 1, 2), np.float32)), align_corners=True),
                            lv[:, :, 0, 1:3, 1:3].mean((2, 3)).reshape(1, 2, 1, 1)),
            "fractional": (F.fractional_max_pool2d(img, 4, output_size=(1, 1)),
                           lv[:, :, 0].max((2, 3), keepdims=True)),
        }
        y, idx = F.max_pool2d(img.float(), 2, return_indices=True)
        unpooled = F.max_unpool2d(y.to(mf.bfloat16), idx, 2)
        reflect3d = F.pad(b, (1, 1, 1, 1, 1, 1), mode="reflect")
    assert unpooled.dtype == mf.float32 and reflect3d.dtype == mf.bfloat16
    for name, (out, want) in outs.items():
        assert out.dtype == mf.float32, name
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-6, atol=1e-6, err_msg=name)


def test_bilinear_computes_in_its_inputs_dtype():
    """bilinear is no lower-precision op on cpu: inside a region float32 inputs are multiplied in float32 (its
    inner product was cast to bfloat16, an error of about 1e-2)."""
    x1, x2, w = _x((4, 6), 0), _x((4, 5), 1), _x((3, 6, 5), 2)
    with mf.autocast("cpu"):
        out = F.bilinear(cpu(x1), cpu(x2), cpu(w))
    want = np.einsum("ni,oij,nj->no", x1.astype(np.float64), w, x2)
    assert out.dtype == mf.float32
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)


def test_region_dtype_rules():
    """As PyTorch's: a cpu dtype other than bfloat16 / float16 warns and turns the region off; the dtype is only
    checked when enabled; 'cuda' takes float32; dtype=None is the enclosing region's; get_autocast_dtype answers
    the innermost region's dtype, on or off; PyTorch's attribute names."""
    with pytest.warns(UserWarning, match="Disabling autocast"):
        region = mf.autocast("cpu", dtype=mf.float32)
    with region:
        assert not mf.is_autocast_enabled("cpu") and mf.get_autocast_dtype("cpu") == mf.float32
        assert F.linear(cpu(_x((2, 3))), cpu(_x((4, 3)))).dtype == mf.float32
    assert mf.get_autocast_dtype("cpu") == mf.bfloat16
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with mf.autocast("cpu", dtype=mf.float64, enabled=False):
            assert not mf.is_autocast_enabled("cpu")
        with mf.autocast("cuda", dtype=mf.float32) as region:
            assert mf.is_autocast_enabled("cuda") and mf.get_autocast_dtype("cuda") == mf.float32
    with mf.autocast("cpu", dtype=mf.float16):
        with mf.autocast("cpu") as inner:
            assert inner.fast_dtype == mf.float16 and inner.device == "cpu" and inner._cache_enabled is True
            assert (cpu(_x((2, 3))) @ cpu(_x((3, 2)))).dtype == mf.float16
        with mf.autocast("cpu", dtype=mf.bfloat16, enabled=False):
            assert mf.get_autocast_dtype("cpu") == mf.bfloat16 and not mf.is_autocast_enabled("cpu")
        assert mf.get_autocast_dtype("cpu") == mf.float16
    with pytest.raises(ValueError, match="of type `str`"):
        mf.autocast(1)


def test_device_policy_helpers():
    """The helpers' ``devices``: a policy named for cuda leaves cpu tensors alone; promote widens a mix to
    float32 and leaves an all-low set as it is."""
    from minifused.ops._common import autocast_float32, autocast_lower, autocast_promote

    f, h = cpu(_x((2,))), cpu(_x((2,))).to(mf.bfloat16)
    with mf.autocast("cpu"):
        assert autocast_float32(h, devices=("cuda",))[0].dtype == mf.bfloat16
        assert autocast_float32(h, devices=("cpu",))[0].dtype == mf.float32
        assert autocast_lower(f, devices=("cuda",))[0].dtype == mf.float32
        assert autocast_lower(f, devices=("cpu",))[0].dtype == mf.bfloat16
        a, b, none = autocast_promote(f, h, None)
        assert a.dtype == b.dtype == mf.float32 and none is None
        assert [t.dtype for t in autocast_promote(h, h)] == [mf.bfloat16, mf.bfloat16]
        assert autocast_promote(f, h, devices=("cuda",))[1].dtype == mf.bfloat16


def test_cpu_matrix_vector_products_and_dist_as_the_cpu_list():
    """mv, addmv, addr (and vdot, as dot) are on cuda's lower-precision list only: on cpu float32 inputs stay
    float32 (they were rounded to bfloat16); dist is on cuda's float32 list only: on cpu bfloat16 stays bfloat16."""
    m, v, w = _x((3, 4), 0), _x((4,), 1), _x((3,), 2)
    m64, v64, w64 = (a.astype(np.float64) for a in (m, v, w))
    with mf.autocast("cpu"):
        outs = [(mf.mv(cpu(m), cpu(v)), m64 @ v64), (mf.addmv(cpu(w), cpu(m), cpu(v)), w64 + m64 @ v64),
                (mf.addr(cpu(m), cpu(w), cpu(v)), m64 + np.outer(w64, v64)), (mf.vdot(cpu(v), cpu(v)), v64 @ v64)]
        d = mf.dist(cpu(m).to(mf.bfloat16), cpu(m + 1.5).to(mf.bfloat16))
    for out, want in outs:
        assert out.dtype == mf.float32
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)
    assert d.dtype == mf.bfloat16
    np.testing.assert_allclose(d.float().item(), np.linalg.norm(_low(m + 1.5) - _low(m)), rtol=1e-2)


def test_cpu_einsum_and_vecdot_lowered_as_the_cpu_list():
    """On cpu einsum is lowered where it contracts a subscript shared by two operands (its batched products are
    on the cpu list), a mixed float32 / bfloat16 pair included; one that only multiplies or sums one operand stays
    float32. linalg.vecdot is on the cpu list."""
    a, b = _x((3, 4), 0), _x((4, 2), 1)
    with mf.autocast("cpu"):
        prod = mf.einsum("ij,jk->ik", cpu(a), cpu(b))
        mixed = mf.einsum("ij,jk->ik", cpu(a).to(mf.bfloat16), cpu(b))
        hadamard = mf.einsum("ij,ij->ij", cpu(a), cpu(a))
        total = mf.einsum("ij->", cpu(a))
        vd = mf.linalg.vecdot(cpu(a), cpu(a))
    want = _low(a) @ _low(b)
    for out in (prod, mixed):
        assert out.dtype == mf.bfloat16
        np.testing.assert_allclose(out.float().numpy(), want, rtol=2e-2, atol=2e-2)
    assert hadamard.dtype == total.dtype == mf.float32
    np.testing.assert_allclose(hadamard.numpy(), a.astype(np.float64) ** 2, rtol=1e-6)
    np.testing.assert_allclose(total.item(), a.astype(np.float64).sum(), rtol=1e-5)
    assert vd.dtype == mf.bfloat16
    np.testing.assert_allclose(vd.float().numpy(), (_low(a) ** 2).sum(1), rtol=2e-2)


def test_cpu_float32_list_prod_and_quantile():
    """prod, quantile and nanquantile are on PyTorch's cpu float32 list: a bfloat16 input (and q) gives float32,
    computed from the bfloat16 values in float32 (quantile refused bfloat16)."""
    a = _x((3, 5), 3)
    a[1, 2] = np.nan
    h, la = cpu(a).to(mf.bfloat16), _low(a)
    with mf.autocast("cpu"):
        outs = [(mf.prod(h[0]), la[0].prod()), (h.prod(1), la.prod(1)),
                (mf.quantile(h[0], 0.3), np.quantile(la[0], 0.3)),
                (mf.quantile(h, cpu(np.array([0.25, 0.5], np.float32)).to(mf.bfloat16), dim=1),
                 np.quantile(la, [0.25, 0.5], axis=1)),
                (mf.nanquantile(h, 0.5, dim=1), np.nanquantile(la, 0.5, axis=1))]
    for out, want in outs:
        assert out.dtype == mf.float32
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-6, atol=1e-7)


def test_cpu_float32_list_linalg():
    """The factorizations and solvers on PyTorch's cpu float32 list take a bfloat16 input in float32 (they raised):
    inv, solve, cholesky, qr, svd, svdvals, eigh, eigvalsh, lstsq, matrix_rank, cond, cholesky_solve / _inverse,
    torch.inverse / pinverse / svd; det and slogdet are not on it and still refuse bfloat16."""
    g = _x((4, 4), 4)
    a = (g @ g.T / 4 + np.eye(4)).astype(np.float32)
    b = _x((4, 2), 5)
    la, lb = _low(a), _low(b)
    h, hb = cpu(a).to(mf.bfloat16), cpu(b).to(mf.bfloat16)
    low = np.linalg.cholesky(la)
    s = np.linalg.svd(la, compute_uv=False)
    with mf.autocast("cpu"):
        L = mf.linalg.cholesky(h)
        outs = {
            "inv": (mf.linalg.inv(h), np.linalg.inv(la)), "inverse": (mf.inverse(h), np.linalg.inv(la)),
            "inv_ex": (mf.linalg.inv_ex(h).inverse, np.linalg.inv(la)), "cholesky": (L, low),
            "solve": (mf.linalg.solve(h, hb), np.linalg.solve(la, lb)),
            "qr": (mf.linalg.qr(h).R.abs(), np.abs(np.linalg.qr(la)[1])),
            "svdvals": (mf.linalg.svdvals(h), s), "svd": (mf.linalg.svd(h).S, s),
            "torch.svd": (mf.svd(h, compute_uv=False).S, s), "eigvalsh": (mf.linalg.eigvalsh(h), s[::-1]),
            "eigh": (mf.linalg.eigh(h).eigenvalues, s[::-1]), "cond": (mf.linalg.cond(h), s[0] / s[-1]),
            "lstsq": (mf.linalg.lstsq(h, hb).solution, np.linalg.solve(la, lb)),
            "pinverse": (mf.pinverse(h), np.linalg.inv(la)),
            "cholesky_solve": (mf.cholesky_solve(hb, L.to(mf.bfloat16)), np.linalg.solve(
                _low(low) @ _low(low).T, lb)),
            "cholesky_inverse": (mf.cholesky_inverse(L.to(mf.bfloat16)), np.linalg.inv(_low(low) @ _low(low).T)),
        }
        rank = mf.linalg.matrix_rank(h)
        for op in (mf.linalg.det, mf.linalg.slogdet):
            with pytest.raises(TypeError, match="BFloat16"):
                op(h)
    assert rank.dtype == mf.int64 and rank.item() == 4
    for name, (out, want) in outs.items():
        assert out.dtype == mf.float32, name
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5, err_msg=name)


def test_cpu_index_copy_promotes():
    """index_copy is on PyTorch's cpu promote list: a bfloat16 input with a float32 source (or the reverse) gives
    float32 (it raised); all-bfloat16 stays bfloat16; the in-place form is not on the list and still refuses."""
    f = _x((3, 2), 6)
    src = _x((1, 2), 7)
    idx = cpu(np.array([1]))
    want = _low(f).copy()
    want[1] = src
    with mf.autocast("cpu"):
        out = mf.index_copy(cpu(f).to(mf.bfloat16), 0, idx, cpu(src))
        method = cpu(src).expand(3, 2).index_copy(0, idx, cpu(f[1:2]).to(mf.bfloat16))
        same = mf.index_copy(cpu(f).to(mf.bfloat16), 0, idx, cpu(src).to(mf.bfloat16))
        with pytest.raises(RuntimeError, match="same dtype"):
            cpu(f).index_copy_(0, idx, cpu(src).to(mf.bfloat16))
    assert out.dtype == method.dtype == mf.float32 and same.dtype == mf.bfloat16
    np.testing.assert_array_equal(out.numpy(), want)
    np.testing.assert_array_equal(method.numpy(), np.stack([src[0], _low(f[1]), src[0]]))
    np.testing.assert_array_equal(same.float().numpy(), np.where(np.arange(3)[:, None] == 1, _low(src), _low(f)))


def test_autocast_state_functions():
    """PyTorch's top-level state functions: the cache flag (a region's cache_enabled defaults to it and sets it
    inside), set_autocast_enabled / set_autocast_dtype outside a region (a region restores what it found), and
    the deprecated cpu / gpu spellings with their DeprecationWarning."""
    a, b = _x((2, 3), 0), _x((3, 2), 1)
    assert mf.is_autocast_cache_enabled() is True
    try:
        mf.set_autocast_cache_enabled(False)
        with mf.autocast("cpu") as region:
            assert region._cache_enabled is False and mf.is_autocast_cache_enabled() is False
        mf.set_autocast_cache_enabled(True)
        with mf.autocast("cpu", cache_enabled=False):
            assert mf.is_autocast_cache_enabled() is False
        assert mf.is_autocast_cache_enabled() is True and mf.clear_autocast_cache() is None
        with pytest.raises(TypeError, match="must be a bool"):
            mf.set_autocast_cache_enabled(1)

        mf.set_autocast_dtype("cpu", mf.float16)
        mf.set_autocast_enabled("cpu", True)
        assert mf.is_autocast_enabled("cpu") and mf.get_autocast_dtype("cpu") == mf.float16
        out = cpu(a) @ cpu(b)
        assert out.dtype == mf.float16
        np.testing.assert_allclose(out.float().numpy(), a.astype(np.float16).astype(np.float64) @ b.astype(
            np.float16), rtol=2e-3, atol=2e-3)
        with mf.autocast("cpu", enabled=False):
            assert not mf.is_autocast_enabled("cpu")
        assert mf.is_autocast_enabled("cpu")
        mf.set_autocast_dtype("cpu", mf.float32)  # (the lower-precision ops then compute in float32)
        np.testing.assert_allclose((cpu(a) @ cpu(b)).numpy(), a.astype(np.float64) @ b, rtol=1e-6)
        with pytest.raises(RuntimeError, match="device string"):
            mf.set_autocast_enabled("foo", True)
        with pytest.raises(TypeError, match="bool"):
            mf.set_autocast_enabled("cpu", 1)
    finally:
        mf.set_autocast_enabled("cpu", False)
        mf.set_autocast_dtype("cpu", mf.bfloat16)
        mf.set_autocast_cache_enabled(True)
    assert not mf.is_autocast_enabled("cpu") and (cpu(a) @ cpu(b)).dtype == mf.float32
    with pytest.warns(DeprecationWarning, match=r"is_autocast_enabled\('cpu'\)"):
        assert mf.is_autocast_cpu_enabled() is False
    with pytest.warns(DeprecationWarning, match=r"get_autocast_dtype\('cpu'\)"):
        assert mf.get_autocast_cpu_dtype() == mf.bfloat16
    with pytest.warns(DeprecationWarning, match=r"get_autocast_dtype\('cuda'\)"):
        assert mf.get_autocast_gpu_dtype() == mf.float16
    with pytest.raises(RuntimeError, match="device string"):
        mf.is_autocast_enabled("foo")


def test_cpu_trace_runs_in_float32():
    """trace is on PyTorch's cpu float32 list: a bfloat16 matrix's trace is float32 (exactly the float32 sum of
    its diagonal); an int64 one stays int64."""
    m = mf.tensor([[1.5, 2.0], [3.0, 2.25]]).bfloat16()
    with mf.autocast("cpu"):
        t, i = mf.trace(m), mf.trace(mf.tensor([[1, 2], [3, 4]]))
    assert t.dtype == mf.float32 and t.item() == 3.75 and i.dtype == mf.int64 and i.item() == 5


# ---------------------------------------------------------------- the cuda float32 list's math, sums and norms
def _cuda_list_cases(L, x, xp):
    """(name, result, float64 reference of the bfloat16 values or None, widens) under a bfloat16 region."""
    a, ap = _low(x.float().cpu().numpy()), _low(xp.float().cpu().numpy())
    return [
        ("exp", x.exp(), np.exp(a), True), ("log", L.log(xp), np.log(ap), True),
        ("rsqrt", xp.rsqrt(), 1 / np.sqrt(ap), True), ("reciprocal", L.reciprocal(xp), 1 / ap, True),
        ("rdiv", 2 / xp, 2 / ap, True), ("pow", x ** 2, a ** 2, True), ("rpow", 2 ** x, 2.0 ** a, True),
        ("square", L.square(x), a * a, True), ("sum", x.sum(), a.sum(), True),
        ("cumsum", x.cumsum(1), np.cumsum(a, 1), True), ("prod", xp.prod(1), ap.prod(1), True),
        ("logsumexp", x.logsumexp(1), np.log(np.exp(a).sum(1)), True),
        ("norm", x.norm(), np.sqrt((a * a).sum()), True),
        ("vector_norm", L.linalg.vector_norm(x, dim=1), np.sqrt((a * a).sum(1)), True),
        ("normalize", F.normalize(x) if L is mf else None, a / np.sqrt((a * a).sum(1, keepdims=True)), True),
        ("sum_dtype", x.sum(dtype=BF16), None, False), ("mean", x.mean(), None, False),
        ("nansum", L.nansum(x), None, False), ("sigmoid", L.sigmoid(x), None, False),
        ("xlog1py", L.special.xlog1py(xp, xp), None, False), ("exp_", x.clone().exp_(), None, False),
    ]


def _check_cuda_list(cases):
    for name, got, want, widens in cases:
        assert got.dtype == (np.float32 if widens else BF16), name
        if want is not None:  # computed in float32 from the bfloat16 values: float32 rounding only
            np.testing.assert_allclose(got.cpu().numpy(), want, rtol=2e-6, atol=1e-6, err_msg=name)


def test_cuda_float32_list_as_a_cpu_simulation(monkeypatch):
    """PyTorch's cuda autocast list computes exp, log, rsqrt, reciprocal (and so a number divided by a tensor), pow
    (and square, its pow(x, 2)), logsumexp, the norms and, where no dtype is given, sum / cumsum / prod in float32;
    an explicit dtype, mean, nansum, sigmoid, xlog1py and in-place ops keep bfloat16. The rules are the cuda
    list's, run here on the cpu by naming the cpu a device of that list."""
    from minifused.ops import _common
    monkeypatch.setattr(_common, "_CUDA_ONLY", ("cuda", "cpu"))
    x = cpu(_x((4, 6))).to(BF16)
    xp = cpu(_x((4, 6), 1, positive=True)).to(BF16)
    with mf.autocast("cpu", dtype=BF16):
        cases = [c for c in _cuda_list_cases(mf, x, xp) if c[0] != "normalize"]  # (normalize: cuda's own rule)
    _check_cuda_list(cases)


def test_cuda_float32_list_is_cuda_only():
    """On the cpu, PyTorch's cpu list leaves these ops in bfloat16 (prod aside: float32 on both lists)."""
    x = cpu(_x((4, 6))).to(BF16)
    with mf.autocast("cpu", dtype=BF16):
        assert x.exp().dtype == BF16 and (x ** 2).dtype == BF16 and x.sum().dtype == BF16
        assert x.cumsum(1).dtype == BF16 and x.norm().dtype == BF16 and (2 / x).dtype == BF16


@pytest.mark.gpu
def test_cuda_float32_list_on_cuda():
    x = mf.tensor(_x((4, 6)), device="cuda").to(BF16)
    xp = mf.tensor(_x((4, 6), 1, positive=True), device="cuda").to(BF16)
    with mf.autocast("cuda", dtype=BF16):
        cases = _cuda_list_cases(mf, x, xp)
        w = mf.tensor(_x((3, 6, 6), 2), device="cuda").to(BF16)
        cases.append(("bilinear", F.bilinear(x, x, w), None, False))
    _check_cuda_list(cases)
