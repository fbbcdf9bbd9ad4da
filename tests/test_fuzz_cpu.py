"""Fuzzed equivalence (issue 8): on the CPU here, the NumPy paths of the fused primitives, called through
the public API with autograd, against float64 references written here from the definitions (direct
loops for convolution and pooling), on random shapes, arguments, dtypes and values. Inputs are
rounded to the dtype first, so the references see exactly what the kernels see; tolerances come
from ``tests/tolerances.py`` (times a small factor for the longer chains of roundings)."""
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import minifused as mf  # noqa: E402
import minifused.functional as F  # noqa: E402
from minifused import nn, optim  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from tolerances import DTYPES, TOL, rel_err  # noqa: E402

# Example counts come from the hypothesis profile (tests/conftest.py: 'ci' on the CPU, 'gpu' for
# tests/test_fuzz_gpu.py, which runs these same tests on the CUDA kernels by setting DEVICE).
FUZZ = settings(deadline=None, derandomize=True)
DEVICE = "cpu"


def dev(data, **kw):
    """A tensor on the device under test."""
    return mf.tensor(data, device=DEVICE, **kw)
dtypes = st.sampled_from(DTYPES)
seeds = st.integers(0, 2**32 - 1)


def _rand(rng, shape, dtype, scale=1.0, loc=0.0):
    """Random values rounded to ``dtype``; returns (the tensor's array, its exact float64 values)."""
    a = (rng.normal(loc, scale, shape)).astype(dtype)
    return a, a.astype(np.float64)


def _leaf(a):
    return dev(a, requires_grad=True)


def _np(t):
    return t.cpu().numpy().astype(np.float64)


# ---- layer_norm / rms_norm


@FUZZ
@given(dtype=dtypes, m=st.integers(1, 6), n=st.integers(1, 70), affine=st.booleans(), rms=st.booleans(),
       loc=st.sampled_from([0.0, 3.0]), scale=st.sampled_from([0.01, 1.0, 50.0]), seed=seeds)
def test_norm_matches_float64(dtype, m, n, affine, rms, loc, scale, seed):
    rng = np.random.default_rng(seed)
    x, x64 = _rand(rng, (m, n), dtype, scale, loc * scale)
    w, w64 = _rand(rng, (n,), dtype, 1.0, 1.0)
    b, b64 = _rand(rng, (n,), dtype)
    dy, dy64 = _rand(rng, (m, n), dtype)
    eps = 1e-5
    xt, wt, bt = _leaf(x), _leaf(w), _leaf(b)
    if rms:
        y = F.rms_norm(xt, (n,), wt if affine else None, eps=eps)
    else:
        y = F.layer_norm(xt, (n,), wt if affine else None, bt if affine else None, eps=eps)
    y.backward(dev(dy))

    mu = np.zeros((m, 1)) if rms else x64.mean(1, keepdims=True)
    xc = x64 - mu
    rstd = 1.0 / np.sqrt((xc * xc).mean(1, keepdims=True) + eps)
    xhat = xc * rstd
    ref = xhat * w64 + (0 if rms else b64) if affine else xhat
    g = dy64 * w64 if affine else dy64
    dx = rstd * (g - (0 if rms else g.mean(1, keepdims=True)) - xhat * (g * xhat).mean(1, keepdims=True))
    # dx is a difference of terms that nearly cancel when one element dominates a row (n = 1 RMSNorm:
    # dx = eps * g / (x^2 + eps)^1.5): measured against the terms' size
    terms = rstd * (np.abs(g) + np.abs(g.mean(1, keepdims=True)) + np.abs(xhat * (g * xhat).mean(1, keepdims=True)))
    tol = TOL[np.dtype(dtype)]
    assert rel_err(_np(y), ref) < 2 * tol
    assert rel_err(_np(xt.grad), dx, np.linalg.norm(terms)) < 8 * tol
    if affine:
        assert rel_err(_np(wt.grad), (dy64 * xhat).sum(0)) < 4 * tol
        if not rms:
            assert rel_err(_np(bt.grad), dy64.sum(0)) < 4 * tol


# ---- softmax / log_softmax


@FUZZ
@given(dtype=dtypes, shape=st.lists(st.integers(1, 9), min_size=1, max_size=4), data=st.data(), log=st.booleans(),
       scale=st.sampled_from([0.1, 1.0, 30.0]), neg_inf=st.booleans(), seed=seeds)
def test_softmax_matches_float64(dtype, shape, data, log, scale, neg_inf, seed):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1), label="dim")
    rng = np.random.default_rng(seed)
    x, x64 = _rand(rng, shape, dtype, scale)
    if neg_inf and shape[dim] > 1:  # -inf entries, never a whole row (that is NaN, as in PyTorch)
        keep = np.moveaxis(np.zeros(shape, bool), dim, -1)
        keep[..., 0] = True
        drop = np.moveaxis((rng.random(keep.shape) < 0.3) & ~keep, -1, dim)
        x[drop] = -np.inf
        x64[drop] = -np.inf
    dy, dy64 = _rand(rng, shape, dtype)
    xt = _leaf(x)
    y = (F.log_softmax if log else F.softmax)(xt, dim=dim)
    y.backward(dev(dy))

    z = x64 - x64.max(dim, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(dim, keepdims=True)
    # backward reads the saved output, rounded to the dtype (as PyTorch's does): so does the reference
    if log:
        with np.errstate(divide="ignore"):
            ref = z - np.log(np.exp(z).sum(dim, keepdims=True))
        saved = np.exp(ref.astype(dtype).astype(np.float64))
        dx = dy64 - saved * dy64.sum(dim, keepdims=True)
        terms = np.abs(dy64) + saved * np.abs(dy64).sum(dim, keepdims=True)
    else:
        ref = p
        saved = p.astype(dtype).astype(np.float64)
        dx = saved * (dy64 - (dy64 * saved).sum(dim, keepdims=True))
        # a dominant entry's gradient is its weight times a difference that nearly cancels
        terms = saved * (np.abs(dy64) + (np.abs(dy64) * saved).sum(dim, keepdims=True))
    tol = TOL[np.dtype(dtype)]
    assert rel_err(_np(y), ref) < 2 * tol
    assert rel_err(_np(xt.grad), dx, np.linalg.norm(np.nan_to_num(terms))) < 8 * tol


# ---- cross_entropy / nll_loss


@FUZZ
@given(dtype=dtypes, m=st.integers(1, 12), c=st.integers(1, 20), weighted=st.booleans(),
       smoothing=st.sampled_from([0.0, 0.1, 0.7]), reduction=st.sampled_from(["mean", "sum", "none"]),
       ignore=st.booleans(), nll=st.booleans(), scale=st.sampled_from([1.0, 20.0]), seed=seeds)
def test_class_losses_match_float64(dtype, m, c, weighted, smoothing, reduction, ignore, nll, scale, seed):
    rng = np.random.default_rng(seed)
    x, x64 = _rand(rng, (m, c), dtype, scale)
    target = rng.integers(0, c, m)
    if ignore and m > 1:  # some ignored rows, never all of them ('mean' would be 0/0)
        target[1:][rng.random(m - 1) < 0.4] = -100
    w = rng.uniform(0.1, 2.0, c).astype(dtype)
    w64 = w.astype(np.float64) if weighted else np.ones(c)
    xt = _leaf(x)
    kw = dict(weight=dev(w) if weighted else None, reduction=reduction)
    if nll:
        loss = F.nll_loss(xt, dev(target), **kw)
        smoothing = 0.0
    else:
        loss = F.cross_entropy(xt, dev(target), label_smoothing=smoothing, **kw)
    gout, gout64 = _rand(rng, loss.shape, dtype)
    loss.backward(dev(gout))

    valid = target != -100
    t = np.where(valid, target, 0)
    if nll:
        logp, p = x64, None
    else:
        z = x64 - x64.max(1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(1, keepdims=True))
        p = np.exp(logp)
    rows = np.arange(m)
    rw = w64[t] * valid
    per_row = (1 - smoothing) * -rw * logp[rows, t] + smoothing / c * -(w64 * logp).sum(1) * valid
    dlogp = np.zeros((m, c))
    dlogp[rows, t] = -(1 - smoothing) * rw
    dlogp -= smoothing / c * w64 * valid[:, None]
    if reduction == "none":
        ref, scale_rows = per_row, gout64
    elif reduction == "sum":
        ref, scale_rows = per_row.sum(), np.full(m, gout64)
    else:
        ref, scale_rows = per_row.sum() / rw.sum(), np.full(m, gout64 / rw.sum())
    dlogp *= scale_rows[:, None]
    dx = dlogp if nll else dlogp - p * dlogp.sum(1, keepdims=True)
    # a log-probability carries rounding of the size of its logit less the row's max and of the log of
    # a sum of O(1) terms: a confident row's loss (near 0) is measured against that size, summed as the loss
    mag = 1 + np.abs(x64 if nll else x64 - x64.max(1, keepdims=True))
    size = (1 - smoothing) * rw * mag[rows, t] + smoothing / c * (w64 * mag).sum(1) * valid
    terms = size if reduction == "none" else size.sum() / (rw.sum() if reduction == "mean" else 1)
    tol = TOL[np.dtype(dtype)]
    assert rel_err(_np(loss), ref, np.linalg.norm(terms)) < 4 * tol
    assert rel_err(_np(xt.grad), dx) < 8 * tol


# ---- linear with its epilogs


def _gelu_tanh(z):
    k = np.sqrt(2 / np.pi)
    u = k * (z + 0.044715 * z**3)
    th = np.tanh(u)
    return 0.5 * z * (1 + th), 0.5 * (1 + th) + 0.5 * z * (1 - th**2) * k * (1 + 3 * 0.044715 * z**2)


def _gelu_tanh_curvature(z, h=1e-5):
    """|d²/dz² gelu(z)|, by central differences of the derivative."""
    return np.abs(_gelu_tanh(z + h)[1] - _gelu_tanh(z - h)[1]) / (2 * h)


@FUZZ
@given(dtype=dtypes, batch=st.lists(st.integers(1, 5), min_size=0, max_size=2), k=st.integers(1, 40),
       n=st.integers(1, 24), bias=st.booleans(), activation=st.sampled_from([None, "relu", "gelu"]), seed=seeds)
def test_linear_epilogs_match_float64(dtype, batch, k, n, bias, activation, seed):
    if not batch:
        batch = [1]
    rng = np.random.default_rng(seed)
    x, x64 = _rand(rng, (*batch, k), dtype)
    w, w64 = _rand(rng, (n, k), dtype, 1 / np.sqrt(k))
    b, b64 = _rand(rng, (n,), dtype)
    dy, dy64 = _rand(rng, (*batch, n), dtype)
    xt, wt, bt = _leaf(x), _leaf(w), _leaf(b)
    y = F.linear(xt, wt, bt if bias else None, activation=activation)
    y.backward(dev(dy))

    z = x64 @ w64.T + (b64 if bias else 0)
    if activation == "relu":
        ref, d = np.maximum(z, 0), (z > 0).astype(np.float64)
    elif activation == "gelu":
        ref, d = _gelu_tanh(z)
    else:
        ref, d = z, 1.0
    dz = (dy64 * d).reshape(-1, n)
    x2 = x64.reshape(-1, k)
    tol = TOL[np.dtype(dtype)]
    # each sum is measured against the size of its terms (a rounded dz or pre-activation, summed with
    # cancellation, keeps the rounding of the terms): |a| @ |b|. The GELU derivative is taken at the
    # pre-activation as rounded to the dtype (the aux): near its zero (z = -0.75) that moves dz by
    # |dy * gelu''(z) * z| times the rounding, which the size of dz includes.
    # The ReLU mask is the sign of the pre-activation as the GEMM computed it: one within the dtype's rounding
    # of the terms' size of 0 may land either side (cuBLASLt may reduce split-K partials in the output
    # dtype, as PyTorch's bf16 default allows), which moves dz there by |dy|.
    size = lambda a, b: np.linalg.norm(np.abs(a) @ np.abs(b))  # noqa: E731
    dz_size = np.abs(dz)
    if activation == "gelu":
        dz_size = dz_size + np.abs(dy64 * _gelu_tanh_curvature(z) * z).reshape(-1, n)
    elif activation == "relu":
        z_size = np.abs(x2) @ np.abs(w64.T) + (np.abs(b64) if bias else 0)
        near_zero = np.abs(z.reshape(-1, n)) <= 2 * float(ml_dtypes.finfo(np.dtype(dtype)).eps) * z_size
        dz_size = dz_size + np.abs(dy64.reshape(-1, n)) * near_zero
    assert rel_err(_np(y), ref, size(x2, w64.T) + (np.linalg.norm(b64) if bias else 0)) < 4 * tol
    assert rel_err(_np(xt.grad), (dz @ w64).reshape(x.shape), size(dz_size, w64)) < 8 * tol
    assert rel_err(_np(wt.grad), dz.T @ x2, size(dz_size.T, x2)) < 8 * tol
    if bias:
        assert rel_err(_np(bt.grad), dz.sum(0), np.linalg.norm(dz_size.sum(0))) < 8 * tol


# ---- conv2d against a direct loop


@st.composite
def conv_cases(draw):
    groups = draw(st.integers(1, 2))
    cg, kg = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    r, s = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = (draw(st.integers(0, 1)), draw(st.integers(0, 1)))
    h = draw(st.integers(max(1, dilation[0] * (r - 1) + 1 - 2 * padding[0]), 7))
    w = draw(st.integers(max(1, dilation[1] * (s - 1) + 1 - 2 * padding[1]), 7))
    n = draw(st.integers(1, 2))
    return dict(x=(n, cg * groups, h, w), w=(kg * groups, cg, r, s), stride=stride, padding=padding,
                dilation=dilation, groups=groups)


def _conv_loop(x, w, b, stride, padding, dilation, groups):
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    p = (h + 2 * padding[0] - dilation[0] * (r - 1) - 1) // stride[0] + 1
    q = (wd + 2 * padding[1] - dilation[1] * (s - 1) - 1) // stride[1] + 1
    kg = k // groups
    y = np.zeros((n, k, p, q))
    for ni in range(n):
        for ki in range(k):
            g = ki // kg
            for pi in range(p):
                for qi in range(q):
                    acc = 0.0
                    for ci in range(cg):
                        for ri in range(r):
                            for si in range(s):
                                acc += xp[ni, g * cg + ci, pi * stride[0] + ri * dilation[0],
                                          qi * stride[1] + si * dilation[1]] * w[ki, ci, ri, si]
                    y[ni, ki, pi, qi] = acc + (b[ki] if b is not None else 0.0)
    return y


def _conv_grads_loop(dz, x, w, stride, padding, dilation, groups):
    """dx, dw of the loop above (the same loop, accumulating instead of reading)."""
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    kg = k // groups
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    dxp, dw = np.zeros_like(xp), np.zeros_like(w)
    _, _, p, q = dz.shape
    for ni in range(n):
        for ki in range(k):
            g = ki // kg
            for pi in range(p):
                for qi in range(q):
                    d = dz[ni, ki, pi, qi]
                    for ci in range(cg):
                        for ri in range(r):
                            for si in range(s):
                                hh, ww = pi * stride[0] + ri * dilation[0], qi * stride[1] + si * dilation[1]
                                dxp[ni, g * cg + ci, hh, ww] += d * w[ki, ci, ri, si]
                                dw[ki, ci, ri, si] += d * xp[ni, g * cg + ci, hh, ww]
    return dxp[:, :, padding[0]:padding[0] + h, padding[1]:padding[1] + wd], dw


@FUZZ
@given(case=conv_cases(), dtype=dtypes, bias=st.booleans(), relu=st.booleans(), seed=seeds)
def test_conv2d_matches_direct_loop(case, dtype, bias, relu, seed):
    rng = np.random.default_rng(seed)
    x, x64 = _rand(rng, case["x"], dtype)
    w, w64 = _rand(rng, case["w"], dtype)
    b, b64 = _rand(rng, case["w"][:1], dtype)
    args = dict(stride=case["stride"], padding=case["padding"], dilation=case["dilation"], groups=case["groups"])
    xt, wt, bt = _leaf(x), _leaf(w), _leaf(b)
    y = F.conv2d(xt, wt, bt if bias else None, activation="relu" if relu else None, **args)
    z = _conv_loop(x64, w64, b64 if bias else None, **args)
    dy, dy64 = _rand(rng, z.shape, dtype)
    y.backward(dev(dy))

    ref = np.maximum(z, 0) if relu else z
    dz = dy64 * (z > 0) if relu else dy64
    dx, dw = _conv_grads_loop(dz, x64, w64, **args)
    # each sum measured against the size of its terms (the same loops on magnitudes)
    y_size = _conv_loop(np.abs(x64), np.abs(w64), np.abs(b64) if bias else None, **args)
    dx_size, dw_size = _conv_grads_loop(np.abs(dz), np.abs(x64), np.abs(w64), **args)
    size = np.linalg.norm
    tol = TOL[np.dtype(dtype)]
    assert rel_err(_np(y), ref, size(y_size)) < 4 * tol
    assert rel_err(_np(xt.grad), dx, size(dx_size)) < 8 * tol
    assert rel_err(_np(wt.grad), dw, size(dw_size)) < 8 * tol
    if bias:
        assert rel_err(_np(bt.grad), dz.sum((0, 2, 3)), size(np.abs(dz).sum((0, 2, 3)))) < 8 * tol


# ---- pooling against a direct loop (PyTorch's window and divisor rules)


@st.composite
def pool_cases(draw):
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = (draw(st.integers(0, kernel[0] // 2)), draw(st.integers(0, kernel[1] // 2)))
    h = draw(st.integers(max(1, kernel[0] - 2 * padding[0]), 7))
    w = draw(st.integers(max(1, kernel[1] - 2 * padding[1]), 7))
    return dict(shape=(draw(st.integers(1, 2)), draw(st.integers(1, 2)), h, w), kernel=kernel, stride=stride,
                padding=padding, ceil_mode=draw(st.booleans()))


def _out(size, k, s, p, ceil):
    o = -(-(size + 2 * p - k) // s) + 1 if ceil else (size + 2 * p - k) // s + 1
    if ceil and (o - 1) * s >= size + p:
        o -= 1
    return o


def _pool_loop(x, dy, kernel, stride, padding, ceil_mode, kind, include_pad):
    """(y, dx) of max or average pooling by loops, PyTorch's rules (first maximum wins)."""
    n, c, h, w = x.shape
    p, q = _out(h, kernel[0], stride[0], padding[0], ceil_mode), _out(w, kernel[1], stride[1], padding[1], ceil_mode)
    y, dx = np.zeros((n, c, p, q)), np.zeros_like(x)
    for pi in range(p):
        for qi in range(q):
            h0, w0 = pi * stride[0] - padding[0], qi * stride[1] - padding[1]
            h1, w1 = min(h0 + kernel[0], h + padding[0]), min(w0 + kernel[1], w + padding[1])
            area = (h1 - h0) * (w1 - w0)
            h0, w0, h1, w1 = max(h0, 0), max(w0, 0), min(h1, h), min(w1, w)
            win = x[:, :, h0:h1, w0:w1].reshape(n, c, -1)
            if kind == "max":
                arg = win.argmax(-1)
                y[:, :, pi, qi] = win.max(-1)
                for ni in range(n):
                    for ci in range(c):
                        a = arg[ni, ci]
                        dx[ni, ci, h0 + a // (w1 - w0), w0 + a % (w1 - w0)] += dy[ni, ci, pi, qi]
            else:
                div = area if include_pad else (h1 - h0) * (w1 - w0)
                y[:, :, pi, qi] = win.sum(-1) / div
                dx[:, :, h0:h1, w0:w1] += dy[:, :, pi, qi][:, :, None, None] / div
    return y, dx


@FUZZ
@given(case=pool_cases(), dtype=dtypes, kind=st.sampled_from(["max", "avg"]), include_pad=st.booleans(), seed=seeds)
def test_pooling_matches_direct_loop(case, dtype, kind, include_pad, seed):
    rng = np.random.default_rng(seed)
    shape = case["shape"]
    # distinct small integers (exact in every dtype): no ties, so the maximum's position is unambiguous
    x = (rng.permutation(int(np.prod(shape))) - 50).reshape(shape).astype(dtype)
    x64 = x.astype(np.float64)
    geo = dict(kernel_size=case["kernel"], stride=case["stride"], padding=case["padding"],
               ceil_mode=case["ceil_mode"])
    xt = _leaf(x)
    if kind == "max":
        y = F.max_pool2d(xt, **geo)
    else:
        y = F.avg_pool2d(xt, count_include_pad=include_pad, **geo)
    dy, dy64 = _rand(rng, y.shape, dtype)
    y.backward(dev(dy))
    ref, dx = _pool_loop(x64, dy64, case["kernel"], case["stride"], case["padding"], case["ceil_mode"], kind,
                         include_pad)
    assert y.shape == ref.shape
    tol = TOL[np.dtype(dtype)]
    assert rel_err(_np(y), ref) < 2 * tol
    assert rel_err(_np(xt.grad), dx) < 4 * tol


# ---- dropout


@FUZZ
@given(dtype=dtypes, shape=st.lists(st.integers(1, 30), min_size=1, max_size=3),
       p=st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0]), seed=seeds)
def test_dropout_keeps_or_scales_and_backward_uses_the_same_mask(dtype, shape, p, seed):
    rng = np.random.default_rng(seed)
    mf.manual_seed(seed % 2**31)
    x = (rng.uniform(0.5, 2.0, shape) * rng.choice([-1, 1], shape)).astype(dtype)  # no zeros
    xt = _leaf(x)
    y = F.dropout(xt, p)
    y.backward(mf.ones(*shape, dtype=dtype, device=DEVICE))
    yv, kept = _np(y), _np(y) != 0
    if p == 1.0:
        assert not kept.any() and not _np(xt.grad).any()
        return
    tol = TOL[np.dtype(dtype)]
    assert rel_err(yv[kept], x.astype(np.float64)[kept] / (1 - p)) < 2 * tol
    assert rel_err(_np(xt.grad), kept / (1 - p)) < 2 * tol
    if p == 0.0:
        assert kept.all()


# ---- optimizer updates


@FUZZ
@given(n=st.integers(1, 50), lr=st.sampled_from([1e-3, 0.1]), wd=st.sampled_from([0.0, 0.05]),
       kind=st.sampled_from(["sgd", "sgd_nesterov", "adam", "adamw", "adam_amsgrad"]),
       maximize=st.booleans(), seed=seeds)
def test_optimizer_updates_match_float64(n, lr, wd, kind, maximize, seed):
    rng = np.random.default_rng(seed)
    p0 = rng.normal(0, 1, n).astype(np.float32)
    param = nn.Parameter(dev(p0))
    b1, b2, eps, mom, damp = 0.9, 0.99, 1e-8, 0.9, 0.0 if kind == "sgd_nesterov" else 0.3
    if kind.startswith("sgd"):
        opt = optim.SGD([param], lr=lr, momentum=mom, dampening=damp, weight_decay=wd,
                        nesterov=kind == "sgd_nesterov", maximize=maximize)
    else:
        cls = optim.AdamW if kind == "adamw" else optim.Adam
        opt = cls([param], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, amsgrad=kind == "adam_amsgrad",
                  maximize=maximize)
    p = p0.astype(np.float64)
    m = v = vmax = buf = None
    for t in range(1, 4):
        g32 = rng.normal(0, 1, n).astype(np.float32)
        param.grad = dev(g32)
        opt.step()
        g = g32.astype(np.float64)
        g = -g if maximize else g
        if kind.startswith("sgd"):
            g = g + wd * p
            buf = g if buf is None else mom * buf + (1 - damp) * g
            p = p - lr * (g + mom * buf if kind == "sgd_nesterov" else buf)
        else:
            if kind == "adamw":
                p = p * (1 - lr * wd)
            else:
                g = g + wd * p
            m = (1 - b1) * g if m is None else b1 * m + (1 - b1) * g
            v = (1 - b2) * g * g if v is None else b2 * v + (1 - b2) * g * g
            vmax = v if vmax is None else np.maximum(vmax, v)
            denom = np.sqrt((vmax if kind == "adam_amsgrad" else v) / (1 - b2**t)) + eps
            p = p - lr / (1 - b1**t) * m / denom
        assert rel_err(_np(param), p) < 4 * TOL[np.dtype(np.float32)]
