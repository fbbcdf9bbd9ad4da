"""Autocast's op lists as PyTorch's, device by device: its cpu list lacks softmax and the norms (they keep the
input's dtype there) but holds the 3-d pools, padding and grid_sample (float32); the losses run in float32 on
both; the region's dtype rules (a cpu dtype other than bfloat16 / float16 turns it off with a warning)."""
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
