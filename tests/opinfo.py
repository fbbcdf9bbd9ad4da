"""One entry per public op: adding an op = its files + one entry here.

An :class:`OpInfo` names the op, calls it through the public API (``minifused``, ``minifused.functional``,
tensor methods and operators), lists sample inputs (odd shapes: size 1, sizes that are not multiples of
8/32, 0-d where the op allows, broadcasting), the dtypes it takes, a float64 NumPy reference, whether it is
differentiable, its other public spellings, its in-place forms, its PyTorch equivalent and bad inputs with
the error they raise. The suites iterate it: tests/test_ops.py (gradients, values against the reference,
dtypes, CUDA against NumPy), tests/test_fuzz_ops.py (the fuzzed unary / binary / reduction tables),
tests/test_bad_input.py (the op cases), tests/test_inplace.py and tests/test_torch_parity.py.

A sample's input specs: a shape (standard normal), ``pos(shape)`` (in [0.5, 2], for log/sqrt/div/pow),
``distinct(shape)`` (well-separated values: max/min/abs/relu/clamp are not smooth at ties or 0) or
``index(shape, high)`` (int64 class indices, never differentiated). A sample whose ``fn`` is set checks a
composition around the op (e.g. ``a.T @ a``: the gradient reaching one tensor along two paths); its ``ref``
is then the composition's reference.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import minifused as mf
import minifused.functional as F
from minifused import backend

FLOATING = (np.dtype(np.float32), np.dtype(np.float16), backend.bfloat16, np.dtype(np.float64))


# ---------------------------------------------------------------- shared makers (every suite uses these)
def randn(*shape, seed=0, dtype=np.float32):
    """A standard normal NumPy array."""
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def cpu_randn(*shape, dtype=mf.float32, **kw):
    """A random tensor on the cpu (for bad-input cases, where only shapes and dtypes matter)."""
    return mf.randn(shape, dtype=dtype, device="cpu", **kw)


def pos(shape):
    return ("pos", shape)


def distinct(shape):
    return ("distinct", shape)


def index(shape, high):
    return ("index", shape, high)


def sign(shape):
    return ("sign", shape)


def binary(shape):
    return ("binary", shape)


def const(spec):
    """An input that is not differentiated (e.g. class weights)."""
    return ("const", spec)


def _unwrap(spec):
    return spec[1] if spec and spec[0] == "const" else spec


def make_arrays(specs, seed=0):
    """The float64 (or int64, for ``index``) NumPy arrays of a sample's specs, from one seeded stream."""
    rng = np.random.default_rng(seed)
    out = []
    for spec in map(_unwrap, specs):
        kind, shape = spec[:2] if spec and isinstance(spec[0], str) else ("normal", spec)
        n = int(np.prod(shape))
        if kind == "pos":
            arr = rng.uniform(0.5, 2.0, shape)
        elif kind == "distinct":
            arr = (rng.permutation(n) - n / 2 + 0.5) / n * 2 + rng.uniform(-0.1, 0.1, n) / n
            arr = arr.reshape(shape)
        elif kind == "index":
            arr = rng.integers(0, spec[2], shape)
        elif kind == "sign":  # targets of the margin losses: -1.0 or 1.0
            arr = rng.integers(0, 2, shape) * 2.0 - 1.0
        elif kind == "binary":  # multi-label targets: 0.0 or 1.0
            arr = rng.integers(0, 2, shape).astype(np.float64)
        else:
            arr = rng.standard_normal(shape)
        out.append(arr)
    return out


def make_inputs(specs, device="cpu", dtype=np.float64, seed=0):
    """Tensors of a sample's specs: floating ones in ``dtype`` requiring grad, indices as int64."""
    return [mf.tensor(a, device=device) if a.dtype.kind == "i" else
            mf.tensor(a.astype(dtype), device=device, requires_grad=_unwrap(s) is s)
            for s, a in zip(specs, make_arrays(specs, seed))]


# ---------------------------------------------------------------- the table's types
@dataclass(frozen=True)
class Sample:
    name: str  # unique over the registry: the test id
    specs: tuple
    kwargs: dict = field(default_factory=dict)
    fn: Callable | None = None  # a composition around the op, instead of ``op(*inputs, **kwargs)``
    ref: Callable | None = None  # its float64 reference
    check: dict = field(default_factory=dict)  # gradcheck options
    grad_bug: str = ""  # a known gradient bug: gradcheck is a strict xfail until it is fixed


@dataclass(frozen=True)
class InPlace:
    name: str  # the test id
    fn: Callable  # fn(t) writes into t and returns it
    plain: Callable  # the out-of-place form it must equal
    grad: bool = True  # recorded on the tape (layer_norm_ refuses autograd)
    op: str = ""  # the op named in "a saved array was modified" errors


@dataclass(frozen=True)
class BadInput:
    name: str  # the test id (as in tests/test_bad_input.py before the registry)
    fn: Callable
    exc: type | tuple
    match: str


@dataclass(frozen=True)
class OpInfo:
    name: str
    op: Callable  # op(*tensors, **kwargs), through the public API
    ref: Callable | None  # float64 NumPy: ref(*arrays, **kwargs)
    samples: tuple
    dtypes: tuple = FLOATING
    grad: bool = True  # gradients are checked (gradcheck) on every sample
    spelled: str = ""  # the public spelling ``op`` uses
    aliases: dict = field(default_factory=dict)  # other public spellings -> callables giving the same values
    domain: tuple = ()  # per input, for the fuzz tables: "real", "pos" or "nonzero"
    fuzz: str = ""  # "unary", "binary" or "reduction": which fuzz table of test_fuzz_ops draws it
    inplace: tuple = ()
    torch: Callable | None = None  # torch(torch_module, *tensors, **kwargs); SAME: ``op`` itself runs on torch
    errors: tuple = ()
    gpu_tol: float = 2e-5  # CUDA against NumPy (float32), rtol and atol


def SAME(T, *args, **kwargs):  # noqa: N802 - a marker: the op's own callable also runs on torch tensors
    raise AssertionError("SAME is a marker")


def torch_fn(entry):
    return entry.op if entry.torch is SAME else (lambda *a, **kw: entry.torch(_torch(), *a, **kw))


def _torch():
    import torch

    return torch


def _tf(name, **fixed):
    """torch.nn.functional.<name>."""
    return lambda T, *a, **kw: getattr(T.nn.functional, name)(*a, **kw, **fixed)


def _torch_linear_cross_entropy(T, x, w, target, linear_bias=None, **kw):
    """PyTorch's linear_cross_entropy; where it has none (before 2.13: the GPU machine's 2.11), the composition its
    documentation defines it as, cross_entropy of linear's logits."""
    F_ = T.nn.functional
    if hasattr(F_, "linear_cross_entropy"):
        return F_.linear_cross_entropy(x, w, target, linear_bias=linear_bias, **kw)
    rows = w.reshape(-1, w.shape[-1])
    logits = F_.linear(x, rows, None if linear_bias is None else linear_bias.reshape(-1))
    return F_.cross_entropy(logits.reshape(x.shape[:-1] + w.shape[:-1]), target, **kw)


def _torch_lp_pool(dims):
    """PyTorch's lp_pool{1,2}d; a norm_type of +-inf as PyTorch 2.14 defines it (the max of |x| over the window, or
    the min), which PyTorch 2.11 (the GPU machine's) computes as (sum |x|^inf)^(1/inf) = 1."""
    def call(T, x, norm_type, kernel_size, stride=None, ceil_mode=False):
        if not math.isinf(norm_type):
            return getattr(T.nn.functional, f"lp_pool{dims}d")(x, norm_type, kernel_size, stride, ceil_mode)
        sign = 1.0 if norm_type > 0 else -1.0
        return sign * getattr(T.nn.functional, f"max_pool{dims}d")(sign * x.abs(), kernel_size, stride,
                                                                   ceil_mode=ceil_mode)
    return call


def _torch_trace(T, a):
    """torch.trace; a tall matrix's as its diagonal's sum: PyTorch 2.11's trace backward puts a tall matrix's
    gradient on the wrong elements (every (cols + 1)-th of the flat matrix), which PyTorch 2.14 no longer does."""
    return T.trace(a) if a.shape[0] <= a.shape[1] else T.diagonal(a).sum()


def S(name, *specs, fn=None, ref=None, check=None, grad_bug="", **kwargs):  # noqa: N802
    return Sample(name, specs, kwargs, fn, ref, check or {}, grad_bug)


def E(name, fn, exc, match):  # noqa: N802
    return BadInput(name, fn, exc, match)


t = cpu_randn

# ---------------------------------------------------------------- references
_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu_ref(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def softmax_ref(x, dim):
    e = np.exp(x - np.max(x, axis=dim, keepdims=True))
    return e / np.sum(e, axis=dim, keepdims=True)


def log_softmax_ref(x, dim):
    s = x - np.max(x, axis=dim, keepdims=True)
    return s - np.log(np.sum(np.exp(s), axis=dim, keepdims=True))


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def _windows(x, kernel, stride, padding, dilation=(1, 1), fill=0.0):
    """(N, C, OH, OW, kh, kw) windows of the padded image."""
    (ph, pw), (sh, sw), (dh, dw), (r, s) = padding, stride, dilation, kernel
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
    win = sliding_window_view(xp, ((r - 1) * dh + 1, (s - 1) * dw + 1), axis=(2, 3))
    return win[:, :, ::sh, ::sw, ::dh, ::dw]


def conv2d_ref(x, w, b=None, stride=1, padding=0, dilation=1, groups=1, activation=None):
    k, cg, r, s = w.shape
    win = _windows(x, (r, s), _pair(stride), _pair(padding), _pair(dilation))
    kg = k // groups
    out = np.concatenate([np.einsum("nchwrs,kcrs->nkhw", win[:, g * cg:(g + 1) * cg], w[g * kg:(g + 1) * kg])
                          for g in range(groups)], axis=1)
    out = out if b is None else out + b[:, None, None]
    return np.maximum(out, 0) if activation == "relu" else out


def max_pool2d_ref(x, kernel_size, stride=None, padding=0, dilation=1):
    kernel = _pair(kernel_size)
    win = _windows(x, kernel, _pair(stride or kernel_size), _pair(padding), _pair(dilation), fill=-np.inf)
    return win.max(axis=(-2, -1))


def avg_pool2d_ref(x, kernel_size, stride=None, padding=0):
    kernel = _pair(kernel_size)
    return _windows(x, kernel, _pair(stride or kernel_size), _pair(padding)).mean(axis=(-2, -1))


def _pool1d_ref(ref):
    """A 1-D pooling reference: the 2-D one over a height of one ((C, L) input: unbatched; ``dilation``: max
    pooling's)."""
    def pool(x, kernel_size, stride=None, padding=0, **dilation):
        if x.ndim == 2:
            return pool(x[None], kernel_size, stride, padding, **dilation)[0]
        if dilation:
            dilation = {"dilation": (1, dilation["dilation"])}
        return ref(x[:, :, None], (1, kernel_size), (1, stride or kernel_size), (0, padding), **dilation)[:, :, 0]
    return pool


def linear_ref(x, w, b=None, activation=None):
    y = x @ w.T + (0 if b is None else b)
    return {None: y, "relu": np.maximum(y, 0), "gelu": gelu_ref(y, "tanh")}[activation]


def layer_norm_ref(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    y = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)
    return y * (1 if weight is None else weight) + (0 if bias is None else bias)


def rms_norm_ref(x, normalized_shape, weight=None, eps=None):
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    eps = np.finfo(x.dtype).eps if eps is None else eps
    return x / np.sqrt(np.mean(x * x, axes, keepdims=True) + eps) * (1 if weight is None else weight)


def _class_rows(x, target):
    """(rows, C) values and (rows,) targets, classes along dim 1 as in PyTorch."""
    c = x.shape[1]
    return np.moveaxis(x, 1, -1).reshape(-1, c), target.reshape(-1)


def nll_loss_ref(x, target, weight=None, ignore_index=-100, reduction="mean"):
    rows, tgt = _class_rows(x, target)
    w = np.ones(rows.shape[1]) if weight is None else weight
    keep = tgt != ignore_index
    safe = np.where(keep, tgt, 0)
    wt = np.where(keep, w[safe], 0.0)
    losses = -rows[np.arange(len(safe)), safe] * wt
    if reduction == "none":
        return losses.reshape(target.shape)
    return losses.sum() if reduction == "sum" else losses.sum() / wt.sum()


def cross_entropy_ref(x, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    logp = log_softmax_ref(x, 1)
    if not label_smoothing:
        return nll_loss_ref(logp, target, weight, ignore_index, reduction)
    assert weight is None  # PyTorch weighs the smoothing term per class: not sampled here
    rows, tgt = _class_rows(logp, target)
    keep = tgt != ignore_index
    picked = -rows[np.arange(len(tgt)), np.where(keep, tgt, 0)]
    losses = np.where(keep, (1 - label_smoothing) * picked - label_smoothing * rows.mean(1), 0.0)
    if reduction == "none":
        return losses.reshape(target.shape)
    return losses.sum() if reduction == "sum" else losses.sum() / keep.sum()


def mse_loss_ref(x, y, reduction="mean"):
    d = (x - y) ** 2
    return d if reduction == "none" else d.sum() if reduction == "sum" else d.mean()


def _reduce(np_fn):
    return lambda a, dim=None, keepdim=False: np_fn(a, axis=dim, keepdims=keepdim)


def _moments(np_fn):
    def ref(a, dim=None, keepdim=False, unbiased=True, correction=None):
        return np_fn(a, axis=dim, keepdims=keepdim, ddof=int(unbiased) if correction is None else correction)
    return ref


def _as_index(a, idx):
    """An index with NumPy arrays in it, the arrays as tensors on ``a``'s device (ours or torch's)."""
    if isinstance(a, mf.Tensor):
        return tuple(mf.tensor(i, device=a.device) if isinstance(i, np.ndarray) else i for i in idx)
    return tuple(_torch().tensor(i, device=a.device) if isinstance(i, np.ndarray) else i for i in idx)


def _max_min(name):
    def op(a, dim=None, keepdim=False):
        return getattr(a, name)() if dim is None else getattr(a, name)(dim, keepdim=keepdim).values

    def ref(a, dim=None, keepdim=False):
        return getattr(np, name)(a, axis=dim, keepdims=keepdim)
    return op, ref


def _by_function(fn):
    """mf.max / mf.min as functions, with the method form's arguments."""
    return lambda a, dim=None, keepdim=False: fn(a) if dim is None else fn(a, dim, keepdim=keepdim).values


def _norm(fn):
    """A norm with its parameters as leading positional inputs (how samples pass tensors)."""
    return lambda x, *params, normalized_shape, **kw: fn(x, normalized_shape, *params, **kw)


def _torch_norm(name):
    return lambda T, x, *p, normalized_shape, **kw: getattr(T.nn.functional, name)(x, normalized_shape, *p, **kw)


# ---- references of BatchNorm, GroupNorm and the transposed convolution
def batch_norm_ref(x, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5,
                   activation=None):
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean, var = (x.mean(axis=axes), x.var(axis=axes)) if training else (running_mean, running_var)
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return np.maximum(y, 0) if activation == "relu" else y


def group_norm_ref(x, weight=None, bias=None, num_groups=1, eps=1e-5):
    g = x.reshape(x.shape[0], num_groups, -1)
    y = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + eps)).reshape(x.shape)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(shape)
    return y if bias is None else y + bias.reshape(shape)


def conv1d_ref(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """conv2d_ref over a height of one."""
    if x.ndim == 2:  # unbatched
        return conv1d_ref(x[None], w, b, stride, padding, dilation, groups)[0]
    y = conv2d_ref(x[:, :, None], w[:, :, None], b, (1, stride), (0, padding), (1, dilation), groups)
    return y[:, :, 0]


def conv_transpose1d_ref(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """conv_transpose2d_ref over a height of one."""
    if x.ndim == 2:  # unbatched
        return conv_transpose1d_ref(x[None], w, b, stride, padding, output_padding, groups, dilation)[0]
    y = conv_transpose2d_ref(x[:, :, None], w[:, :, None], b, (1, stride), (0, padding), (0, output_padding),
                             groups, (1, dilation))
    return y[:, :, 0]


def local_response_norm_ref(x, size, alpha=1e-4, beta=0.75, k=1.0):
    """Each channel over the mean of the squares in its window of ``size`` channels (zeros beyond the ends)."""
    c, sq = x.shape[1], x * x
    div = np.stack([sq[:, max(0, i - size // 2):min(c, i + (size - 1) // 2 + 1)].sum(1) for i in range(c)], 1) / size
    return x / (k + alpha * div) ** beta


def cosine_embedding_ref(a, b, y, margin=0.0, reduction="mean"):
    d = a.ndim - 1
    cos = (a * b).sum(d) / np.sqrt(((a * a).sum(d) + 1e-12) * ((b * b).sum(d) + 1e-12))
    return _red(np.where(y == 1, 1 - cos, np.maximum(0, cos - margin)), reduction)


def multilabel_soft_margin_ref(x, y, weight=None, reduction="mean"):
    logsig = -np.logaddexp(0, -x)
    loss = -(y * logsig + (1 - y) * -np.logaddexp(0, x)) * (1 if weight is None else weight)
    return _red(loss.mean(-1), reduction)


def triplet_margin_ref(a, pos, neg, margin=1.0, p=2.0, eps=1e-6, swap=False, reduction="mean"):
    def dist(u, v):
        return np.linalg.norm(u - v + eps, ord=p, axis=-1)
    d_neg = np.minimum(dist(a, neg), dist(pos, neg)) if swap else dist(a, neg)
    return _red(np.maximum(0, margin + dist(a, pos) - d_neg), reduction)


def _coords(n, align_corners):
    if n <= 1:
        return np.zeros(1)
    r = np.linspace(-1.0, 1.0, n)
    return r if align_corners else r * (n - 1) / n


def affine_grid_ref(theta, size, align_corners=False):
    n, _, h, w = size
    base = np.stack(np.broadcast_arrays(_coords(w, align_corners)[None, :], _coords(h, align_corners)[:, None],
                                        np.ones((h, w))), -1)
    return np.einsum("hwk,njk->nhwj", base, theta)


def grid_sample_ref(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False):
    """Point by point: each output the weighted corners around its unnormalized source point (zeros outside)."""
    n, c, h, w = x.shape
    unnorm = (lambda g, s: (g + 1) / 2 * (s - 1)) if align_corners else (lambda g, s: ((g + 1) * s - 1) / 2)
    ix, iy = unnorm(grid[..., 0], w), unnorm(grid[..., 1], h)
    if padding_mode == "border":
        ix, iy = np.clip(ix, 0, w - 1), np.clip(iy, 0, h - 1)
    out = np.zeros((n, c) + grid.shape[1:3])

    def pixel(b, xc, yc):
        return x[b, :, yc, xc] if 0 <= xc < w and 0 <= yc < h else np.zeros(c)
    for b in range(n):
        for i in range(grid.shape[1]):
            for j in range(grid.shape[2]):
                px, py = ix[b, i, j], iy[b, i, j]
                if mode == "nearest":
                    out[b, :, i, j] = pixel(b, int(np.rint(px)), int(np.rint(py)))
                    continue
                x0, y0 = int(np.floor(px)), int(np.floor(py))
                for xc, yc, wgt in ((x0, y0, (x0 + 1 - px) * (y0 + 1 - py)), (x0 + 1, y0, (px - x0) * (y0 + 1 - py)),
                                    (x0, y0 + 1, (x0 + 1 - px) * (py - y0)), (x0 + 1, y0 + 1, (px - x0) * (py - y0))):
                    out[b, :, i, j] += wgt * pixel(b, xc, yc)
    return out


def multi_margin_ref(x, y, weight=None, p=1, margin=1.0, reduction="mean"):
    x2, y2 = (x, y) if x.ndim == 2 else (x[None], np.asarray(y).reshape(1))
    n, c = x2.shape
    picked = x2[np.arange(n), y2][:, None]
    z = np.maximum(0, margin - picked + x2) ** p
    if weight is not None:
        z = z * weight[y2][:, None]
    z[np.arange(n), y2] = 0
    loss = z.sum(1) / c
    return _red(loss if x.ndim == 2 else loss[0], reduction)


def poisson_nll_ref(x, t, log_input=True, full=False, eps=1e-8, reduction="mean"):
    loss = np.exp(x) - t * x if log_input else x - t * np.log(x + eps)
    if full:
        loss = loss + np.where(t > 1, t * np.log(t) - t + 0.5 * np.log(2 * np.pi * t), 0)
    return _red(loss, reduction)


def gaussian_nll_ref(x, t, var, full=False, eps=1e-6, reduction="mean"):
    var = var if var.shape == x.shape or var.shape[-1:] == (1,) else var[..., None]
    var = np.maximum(var, eps)
    loss = 0.5 * (np.log(var) + (x - t) ** 2 / var) + (0.5 * np.log(2 * np.pi) if full else 0)
    return _red(loss, reduction)


def unfold_windows_ref(a, dimension, size, step):
    windows = [np.take(a, range(i, i + size), axis=dimension) for i in range(0, a.shape[dimension] - size + 1, step)]
    return np.moveaxis(np.stack(windows, dimension), dimension + 1, -1)


def _unpool_ref(x, k, s):
    """Each window's maximum kept at its place, zeros elsewhere."""
    out = np.zeros_like(x)
    h, w = x.shape[-2:]
    for i in range(0, h - k + 1, s):
        for j in range(0, w - k + 1, s):
            win = x[..., i:i + k, j:j + k].reshape(*x.shape[:-2], k * k)
            a = win.argmax(-1)
            for idx in np.ndindex(*a.shape):
                out[idx + (i + a[idx] // k, j + a[idx] % k)] = win[idx + (a[idx],)]
    return out


def _blocks_of(size, kernel_size, dilation, padding, stride):
    k, d, p, s = map(_pair, (kernel_size, dilation, padding, stride))
    counts = [(size[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in (0, 1)]
    return k, d, p, s, counts


def unfold_ref(x, kernel_size, dilation=1, padding=0, stride=1):
    """Column (b_y, b_x) of channel c, tap (i, j): the padded input at (b_y*s + i*d, b_x*s + j*d)."""
    k, d, p, s, (by, bx) = _blocks_of(x.shape[-2:], kernel_size, dilation, padding, stride)
    xp = np.pad(x, [(0, 0)] * (x.ndim - 2) + [(p[0], p[0]), (p[1], p[1])])
    cols = [xp[..., i * d[0]:i * d[0] + s[0] * (by - 1) + 1:s[0], j * d[1]:j * d[1] + s[1] * (bx - 1) + 1:s[1]]
            for i in range(k[0]) for j in range(k[1])]
    out = np.stack(cols, -3)  # (..., C, kh*kw, by, bx)
    return out.reshape(*x.shape[:-3], x.shape[-3] * k[0] * k[1], by * bx)


def fold_ref(cols, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Each column's taps added back at their places of the padded image, which is then cropped."""
    k, d, p, s, (by, bx) = _blocks_of(_pair(output_size), kernel_size, dilation, padding, stride)
    h, w = _pair(output_size)
    lead, c = cols.shape[:-2], cols.shape[-2] // (k[0] * k[1])
    blocks = cols.reshape(*lead, c, k[0], k[1], by, bx)
    out = np.zeros((*lead, c, h + 2 * p[0], w + 2 * p[1]))
    for i in range(k[0]):
        for j in range(k[1]):
            out[..., i * d[0]:i * d[0] + s[0] * (by - 1) + 1:s[0], j * d[1]:j * d[1] + s[1] * (bx - 1) + 1:s[1]] += \
                blocks[..., i, j, :, :]
    return out[..., p[0]:p[0] + h, p[1]:p[1] + w]


def instance_norm_ref(x, weight=None, bias=None, eps=1e-5):
    return group_norm_ref(x, weight, bias, num_groups=x.shape[1], eps=eps)


def prelu_ref(x, w):
    slope = w if w.size == 1 or x.ndim < 2 else w.reshape((-1,) + (1,) * (x.ndim - 2))
    return np.where(x > 0, x, slope * x)


def pixel_shuffle_ref(x, upscale_factor):
    """out[..., c, h r + i, w r + j] = x[..., c r^2 + i r + j, h, w], element by element."""
    r = upscale_factor
    *lead, c, h, w = x.shape
    out = np.zeros((*lead, c // (r * r), h * r, w * r))
    for ch in range(c):
        out[..., ch // (r * r), (ch % (r * r)) // r::r, ch % r::r] = x[..., ch, :, :]
    return out


def pixel_unshuffle_ref(x, downscale_factor):
    r = downscale_factor
    *lead, c, h, w = x.shape
    out = np.zeros((*lead, c * r * r, h // r, w // r))
    for ch in range(c * r * r):
        out[..., ch, :, :] = x[..., ch // (r * r), (ch % (r * r)) // r::r, ch % r::r]
    return out


def conv_transpose2d_ref(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Each input pixel scatters ``x * w`` onto the output, tap by tap."""
    (sh, sw), (ph, pw), (oh, ow), (dh, dw) = map(_pair, (stride, padding, output_padding, dilation))
    n, cin, h, wd = x.shape
    _, cg, kh, kw = w.shape
    ho, wo = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oh + 1, (wd - 1) * sw - 2 * pw + dw * (kw - 1) + ow + 1
    full = np.zeros((n, cg * groups, ho + 2 * ph + sh, wo + 2 * pw + sw))
    per = cin // groups
    for g in range(groups):
        xs, ws = x[:, g * per:(g + 1) * per], w[g * per:(g + 1) * per]
        for a in range(kh):
            for c in range(kw):
                full[:, g * cg:(g + 1) * cg, a * dh:a * dh + sh * (h - 1) + 1:sh, c * dw:c * dw + sw * (wd - 1) + 1:sw] \
                    += np.einsum("nihw,io->nohw", xs, ws[:, :, a, c])
    y = full[:, :, ph:ph + ho, pw:pw + wo]
    return y if b is None else y + b[None, :, None, None]


# ---- references of the spatial layers (index rules written out from PyTorch's kernels)
def _pad_source(j, n, lo, mode):
    """Source position of padded position ``j`` (None: the constant fill)."""
    i = j - lo
    if mode == "constant":
        return i if 0 <= i < n else None
    if mode == "reflect":
        return -i if i < 0 else 2 * (n - 1) - i if i >= n else i
    if mode == "replicate":
        return min(max(i, 0), n - 1)
    return i % n  # circular


def pad_ref(x, pad, mode="constant", value=None):
    out = x
    for k in range(len(pad) // 2):
        d, lo, hi = x.ndim - 1 - k, pad[2 * k], pad[2 * k + 1]
        if mode == "circular":  # PyTorch crops first and wraps what is left
            out = np.take(out, range(max(-lo, 0), out.shape[d] - max(-hi, 0)), axis=d)
            lo, hi = max(lo, 0), max(hi, 0)
        n = out.shape[d]
        src = [_pad_source(j, n, lo, mode) for j in range(n + lo + hi)]
        taken = np.take(out, [0 if s is None else s for s in src], axis=d)
        fill = np.array([s is None for s in src]).reshape([-1 if a == d else 1 for a in range(x.ndim)])
        out = np.where(fill, 0.0 if value is None else value, taken)
    return out


def _linear_src(n, m, scale, align_corners):
    """PyTorch's (i0, i1, lambda1) of one axis of linear interpolation, float64."""
    out = []
    for j in range(m):
        if align_corners:
            src = (n - 1) / (m - 1) * j if m > 1 else 0.0
        else:
            s = 1.0 / scale if scale else n / m
            src = max(s * (j + 0.5) - 0.5, 0.0)
        i0 = min(int(math.floor(src)), n - 1)
        out.append((i0, i0 + (i0 < n - 1), min(max(src - i0, 0.0), 1.0)))
    return out


def _nearest_src(n, m, scale, exact):
    s = np.float32(1.0 / scale) if scale else np.float32(n) / np.float32(m)
    return [min(int(np.floor((np.float32(j) + np.float32(0.5 if exact else 0)) * s)), n - 1) for j in range(m)]


def interpolate_ref(x, size=None, scale_factor=None, mode="nearest", align_corners=None,
                    recompute_scale_factor=None):
    dims = x.ndim - 2
    spatial = x.shape[2:]
    if size is not None:
        out = (size,) * dims if isinstance(size, int) else tuple(size)
        scales = (None,) * dims
    else:
        sf = (scale_factor,) * dims if not isinstance(scale_factor, tuple) else scale_factor
        out = tuple(int(math.floor(n * s)) for n, s in zip(spatial, sf))
        scales = (None,) * dims if recompute_scale_factor else sf
    if mode == "area":
        return adaptive_avg_pool_ref(x, out)
    if mode == "bicubic":
        return _bicubic_ref(x, out, scales, bool(align_corners))
    y = x
    for d in range(dims):  # separable: one axis at a time
        axis, n, m, s = 2 + d, spatial[d], out[d], scales[d]
        if mode in ("nearest", "nearest-exact"):
            y = np.take(y, _nearest_src(n, m, s, mode == "nearest-exact"), axis=axis)
        else:
            src = _linear_src(n, m, s, bool(align_corners))
            shape = [-1 if a == axis else 1 for a in range(x.ndim)]
            lam = np.array([t[2] for t in src]).reshape(shape)
            lo, hi = np.take(y, [t[0] for t in src], axis=axis), np.take(y, [t[1] for t in src], axis=axis)
            y = lo * (1 - lam) + hi * lam
    return y


def _cubic(d, a=-0.75):
    """Keys' cubic convolution kernel at distance ``d`` (PyTorch's bicubic, a = -0.75)."""
    d = abs(d)
    if d <= 1:
        return ((a + 2) * d - (a + 3)) * d * d + 1
    return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a if d < 2 else 0.0


def _bicubic_ref(x, out, scales, align_corners):
    """PyTorch's bicubic interpolation pixel by pixel, float64: the 4 x 4 input pixels around each output's source
    position (unclamped: ``s * (j + 0.5) - 0.5``, or ``s * j`` with align_corners), read with the border
    repeated, weighted by the kernel of their distances along each axis."""
    (n_h, n_w), y = x.shape[2:], np.zeros(x.shape[:2] + tuple(out))

    def source(n, m, scale, j):
        if align_corners:
            return (n - 1) / (m - 1) * j if m > 1 else 0.0
        return (1.0 / scale if scale else n / m) * (j + 0.5) - 0.5

    for i in range(out[0]):
        sy = source(n_h, out[0], scales[0], i)
        for j in range(out[1]):
            sx = source(n_w, out[1], scales[1], j)
            by, bx = math.floor(sy), math.floor(sx)
            for r in range(by - 1, by + 3):
                for c in range(bx - 1, bx + 3):
                    w = _cubic(sy - r) * _cubic(sx - c)
                    y[:, :, i, j] += w * x[:, :, min(max(r, 0), n_h - 1), min(max(c, 0), n_w - 1)]
    return y


def _bins(n, m):
    return [((i * n) // m, -(-(i + 1) * n // m)) for i in range(m)]


def adaptive_avg_pool_ref(x, output_size, reducer=np.mean):
    """Adaptive pooling (``reducer`` over each bin) of the last ``len(output_size)`` dimensions; None
    entries keep a dimension."""
    sizes = output_size if isinstance(output_size, tuple) else (output_size,)
    k = len(sizes)
    sizes = [x.shape[x.ndim - k + i] if s is None else s for i, s in enumerate(sizes)]
    lead = x.shape[:x.ndim - k]
    out = np.zeros(lead + tuple(sizes))
    grids = [_bins(x.shape[x.ndim - k + i], sizes[i]) for i in range(k)]
    for pos in np.ndindex(*sizes):
        sl = tuple(slice(*grids[i][p]) for i, p in enumerate(pos))
        win = x[(Ellipsis,) + sl].reshape(lead + (-1,))
        out[(Ellipsis,) + pos] = reducer(win, axis=-1)
    return out


def _adaptive(reducer, dims):
    def ref(x, output_size):
        size = output_size if isinstance(output_size, tuple) else (output_size,) * dims
        return adaptive_avg_pool_ref(x, size, reducer)
    return ref


def embedding_ref(idx, w, padding_idx=None, **kw):
    return w[idx]


def _channel_dropout_ref(x, p=0.5, training=True, inplace=False):
    return x


# ---------------------------------------------------------------- the registry
_MAX, _MAX_REF = _max_min("max")
_MIN, _MIN_REF = _max_min("min")

OPS = [
    # ---- binary arithmetic (broadcasting; a Python scalar on either side)
    OpInfo("add", lambda a, b: a + b, np.add, spelled="Tensor.__add__", fuzz="binary", domain=("real", "real"),
           aliases={"mf.add": mf.add, "Tensor.add": lambda a, b: a.add(b)}, torch=SAME, samples=(
               S("add", (3, 4), (3, 4)), S("add_broadcast", (2, 3, 4), (3, 1)),
               S("add_scalar", (3, 4), fn=lambda a: 2.5 + a + 1, ref=lambda a: 2.5 + a + 1),
               S("add_0d", (), (3,)), S("add_size1", (1,), (1, 1)), S("add_odd", (33,), (7, 1))),
           inplace=(InPlace("add_", lambda x: x.add_(_row(x), alpha=2.0), lambda x: x + 2.0 * _row(x), op="add_"),
                    InPlace("+=", lambda x: x.__iadd__(_row(x)), lambda x: x + _row(x), op="add_")),
           errors=(E("add_broadcast", lambda: t(2, 3) + t(4), ValueError, r"add: shapes \(2, 3\) and \(4,\)"),
                   E("add_inplace_grows", lambda: t(3).add_(t(2, 3)), RuntimeError,
                     r"add_: output with shape \[3\] doesn't match the broadcast shape \[2, 3\]"),
                   E("add_inplace_float_into_int", lambda: mf.arange(3).add_(0.5), RuntimeError,
                     "add_: result type float32 can't be cast to the desired output type int64"),
                   E("add_inplace_leaf", lambda: t(3, requires_grad=True).add_(1.0), RuntimeError,
                     "add_: a leaf Variable that requires grad"),
                   E("add_inplace_not_a_number", lambda: t(3).add_("1"), TypeError,
                     "add_: expected a tensor or a number, got str"))),
    OpInfo("sub", lambda a, b: a - b, np.subtract, spelled="Tensor.__sub__", fuzz="binary", domain=("real", "real"),
           aliases={"mf.sub": mf.sub}, torch=SAME, samples=(
               S("sub_broadcast", (4, 1), (1, 5)),
               S("rsub_scalar", (3,), fn=lambda a: 1.0 - a, ref=lambda a: 1.0 - a),
               S("sub_0d", (), ()), S("sub_odd", (9, 33), (33,))),
           inplace=(InPlace("sub_", lambda x: x.sub_(_row(x), alpha=0.5), lambda x: x - 0.5 * _row(x), op="sub_"),
                    InPlace("-=", lambda x: x.__isub__(0.25), lambda x: x - 0.25, op="sub_"))),
    OpInfo("mul", lambda a, b: a * b, np.multiply, spelled="Tensor.__mul__", fuzz="binary", domain=("real", "real"),
           aliases={"mf.mul": mf.mul}, torch=SAME, samples=(
               S("mul_broadcast", (2, 3, 4), (4,)),
               S("rmul_scalar", (2, 2), fn=lambda a: 3 * a, ref=lambda a: 3 * a),
               S("mul_0d", (3, 1), ()), S("mul_size1", (1,), (5,))),
           inplace=(InPlace("mul_", lambda x: x.mul_(_row(x)), lambda x: x * _row(x), op="mul_"),
                    InPlace("*=", lambda x: x.__imul__(3.0), lambda x: x * 3.0, op="mul_"))),
    OpInfo("div", lambda a, b: a / b, np.divide, spelled="Tensor.__truediv__", fuzz="binary",
           domain=("real", "nonzero"), aliases={"mf.div": mf.div}, torch=SAME, samples=(
               S("div_broadcast", (3, 4), pos((1, 4))),
               S("rdiv_scalar", pos((5,)), fn=lambda a: 2.0 / a, ref=lambda a: 2.0 / a),
               S("div_0d", (), pos(())), S("div_odd", (1, 33), pos((7, 1)))),
           inplace=(InPlace("div_", lambda x: x.div_(_row(x)), lambda x: x / _row(x), op="div_"),
                    InPlace("/=", lambda x: x.__itruediv__(4.0), lambda x: x / 4.0, op="div_")),
           errors=(E("div_inplace_int", lambda: mf.arange(3).div_(2), RuntimeError,
                     "div_: result type float32 can't be cast to the desired output type int64"),)),
    OpInfo("pow", lambda a, b: a ** b, np.power, spelled="Tensor.__pow__", fuzz="binary", domain=("pos", "real"),
           aliases={"mf.pow": mf.pow}, torch=SAME, samples=(
               S("pow_scalar", (3, 4), fn=lambda a: a ** 3, ref=lambda a: a ** 3),
               S("pow_tensor", pos((3, 4)), (3, 4)),
               S("rpow_scalar", (3,), fn=lambda a: 2.0 ** a, ref=lambda a: 2.0 ** a),
               S("pow_broadcast_0d", pos((7, 1)), ())),
           # PyTorch 2.13: "pow() received an invalid combination of arguments - got (bool, bool)"
           errors=(E("pow_two_bools", lambda: mf.pow(True, True), TypeError,
                     r"pow\(\): expected a Tensor operand, got bool and bool"),)),
    OpInfo("maximum", mf.maximum, np.maximum, spelled="mf.maximum", fuzz="binary", domain=("real", "real"),
           aliases={"F.maximum": F.maximum, "Tensor.maximum": lambda a, b: a.maximum(b)},
           torch=lambda T, a, b: T.maximum(a, b), samples=(
               S("maximum", distinct((3, 4)), distinct((4,))), S("maximum_odd", distinct((33,)), distinct((1,)))),
           # PyTorch 2.13: "maximum(): argument 'other' (position 2) must be Tensor, not float" (clamp_min takes one)
           errors=(E("maximum_number", lambda: mf.maximum(t(3), 0.), TypeError,
                     r"maximum\(\): argument 'other' must be Tensor, not float"),
                   E("maximum_method_number", lambda: t(3).maximum(True), TypeError,
                     r"maximum\(\): argument 'other' must be Tensor, not bool"))),
    OpInfo("minimum", mf.minimum, np.minimum, spelled="mf.minimum", fuzz="binary", domain=("real", "real"),
           aliases={"F.minimum": F.minimum}, torch=lambda T, a, b: T.minimum(a, b), samples=(
               S("minimum", distinct((3, 4)), distinct((3, 1))), S("minimum_0d", distinct(()), distinct((5,)))),
           errors=(E("minimum_number", lambda: mf.minimum(mf.tensor([1, 2], device="cpu"), 2), TypeError,
                     r"minimum\(\): argument 'other' must be Tensor, not int"),
                   E("minimum_method_number", lambda: t(3).minimum(2.5), TypeError,
                     r"minimum\(\): argument 'other' must be Tensor, not float"))),
    OpInfo("where", lambda c, a, b: mf.where(c > 0, a, b), lambda c, a, b: np.where(c > 0, a, b),
           spelled="mf.where", aliases={"F.where": lambda c, a, b: F.where(c > 0, a, b)},
           torch=lambda T, c, a, b: T.where(c > 0, a, b), samples=(
               S("where", distinct((3, 4)), (4,), fn=lambda a, b: mf.where(a > 0, a, b),
                 ref=lambda a, b: np.where(a > 0, a, b)),
               S("where_broadcast", distinct((5, 1)), (1, 33), ())),
           errors=(E("where_broadcast", lambda: mf.where(t(2, 3) > 0, t(2, 3), t(5)), ValueError, r"where: shapes"),
                   E("where_float_condition", lambda: mf.where(t(2, 3), t(2, 3), t(2, 3)), TypeError,
                     r"where: expected condition to be a bool tensor, got dtype float32"))),
    OpInfo("matmul", lambda a, b: a @ b, np.matmul, spelled="Tensor.__matmul__", dtypes=FLOATING, torch=SAME,
           aliases={"mf.matmul": mf.matmul, "F.matmul": F.matmul, "Tensor.matmul": lambda a, b: a.matmul(b)},
           samples=(
               S("matmul_2d", (3, 4), (4, 5)), S("matmul_batched_broadcast", (2, 3, 4), (4, 5)),
               S("matmul_batched_both", (2, 1, 3, 4), (3, 4, 2)), S("matmul_vec_mat", (4,), (4, 5)),
               S("matmul_mat_vec", (3, 4), (4,)), S("matmul_vec_vec", (4,), (4,)),
               S("matmul_odd", (1, 33), (33, 9)), S("matmul_size1", (1, 1), (1, 1))),
           errors=(E("matmul_inner", lambda: t(2, 3) @ t(4, 5), ValueError, r"matmul: shapes \(2, 3\) and \(4, 5\)"),
                   E("matmul_0d", lambda: t() @ t(3), ValueError, "at least one dimension"),
                   E("matmul_batch", lambda: t(2, 3, 4) @ t(5, 4, 2), ValueError, "cannot be broadcast"))),
    # ---- unary
    OpInfo("neg", lambda a: -a, np.negative, spelled="Tensor.__neg__", fuzz="unary", domain=("real",), torch=SAME,
           aliases={"mf.neg": mf.neg, "Tensor.neg": lambda a: a.neg()},
           samples=(S("neg", (3, 4)), S("neg_0d", ()))),
    OpInfo("exp", lambda a: a.exp(), np.exp, spelled="Tensor.exp", fuzz="unary", domain=("real",), torch=SAME,
           aliases={"mf.exp": mf.exp, "F.exp": F.exp},
           samples=(S("exp", (3, 4)), S("exp_0d", ()), S("exp_odd", (33,)))),
    OpInfo("log", lambda a: a.log(), np.log, spelled="Tensor.log", fuzz="unary", domain=("pos",), torch=SAME,
           aliases={"mf.log": mf.log, "F.log": F.log}, samples=(S("log", pos((3, 4))), S("log_0d", pos(())))),
    OpInfo("sqrt", lambda a: a.sqrt(), np.sqrt, spelled="Tensor.sqrt", fuzz="unary", domain=("pos",), torch=SAME,
           aliases={"mf.sqrt": mf.sqrt, "F.sqrt": F.sqrt},
           samples=(S("sqrt", pos((3, 4))), S("sqrt_odd", pos((1, 33))))),
    OpInfo("abs", abs, np.abs, spelled="Tensor.__abs__", fuzz="unary", domain=("real",), torch=SAME,
           aliases={"mf.abs": mf.abs, "F.abs": F.abs, "Tensor.abs": lambda a: a.abs()},
           samples=(S("abs", distinct((3, 4))), S("abs_0d", distinct(())))),
    OpInfo("tanh", lambda a: a.tanh(), np.tanh, spelled="Tensor.tanh", fuzz="unary", domain=("real",), torch=SAME,
           aliases={"mf.tanh": mf.tanh, "F.tanh": F.tanh}, samples=(S("tanh", (3, 4)), S("tanh_size1", (1,)))),
    OpInfo("sigmoid", mf.sigmoid, lambda a: 1 / (1 + np.exp(-a)), spelled="mf.sigmoid", fuzz="unary", domain=("real",),
           aliases={"F.sigmoid": F.sigmoid, "Tensor.sigmoid": lambda a: a.sigmoid()},
           torch=lambda T, a: T.sigmoid(a), samples=(
               S("sigmoid", (3, 4), fn=lambda a: mf.sigmoid(a * 4), ref=lambda a: 1 / (1 + np.exp(-4 * a))),
               S("sigmoid_odd", (33,)))),
    OpInfo("relu", lambda a: a.relu(), lambda a: np.maximum(a, 0), spelled="Tensor.relu", fuzz="unary",
           domain=("real",), aliases={"mf.relu": mf.relu, "F.relu": F.relu}, torch=SAME,
           samples=(S("relu", distinct((3, 4))), S("relu_odd", distinct((7, 33))), S("relu_0d", distinct(()))),
           inplace=(InPlace("relu_", F.relu_, F.relu, op="relu_"),
                    InPlace("relu(inplace=True)", lambda x: F.relu(x, inplace=True), F.relu, op="relu_")),
           errors=(E("relu_not_tensor", lambda: F.relu_(np.ones(3)), TypeError, "relu_"),)),
    OpInfo("gelu", mf.gelu, gelu_ref, spelled="mf.gelu", aliases={"F.gelu": F.gelu},
           torch=lambda T, a, **kw: T.nn.functional.gelu(a, **kw), samples=(
               S("gelu_erf", (3, 4)), S("gelu_tanh", (3, 4), approximate="tanh"), S("gelu_odd", (33,)),
               S("gelu_0d", (), approximate="tanh")),
           inplace=(InPlace("gelu_", F.gelu_, F.gelu, op="gelu_"),
                    InPlace("gelu_ tanh", lambda x: F.gelu_(x, approximate="tanh"),
                            lambda x: F.gelu(x, approximate="tanh"), op="gelu_")),
           errors=(E("gelu_mode", lambda: mf.gelu(t(3), approximate="cubic"), ValueError, "approximate"),
                   E("gelu_int_inplace", lambda: F.gelu_(mf.tensor([1, 2])), TypeError, "gelu_.*floating"))),
    OpInfo("clamp", lambda a, **kw: a.clamp(**kw), lambda a, min=None, max=None: np.clip(a, min, max),
           spelled="Tensor.clamp", aliases={"mf.clamp": mf.clamp, "F.clamp": F.clamp,
                                            "Tensor.clip": lambda a, **kw: a.clip(**kw)}, torch=SAME, samples=(
               S("clamp", distinct((4, 5)), min=-0.5, max=0.5),
               S("clamp_min", distinct((4, 5)), fn=lambda a: mf.clamp(a, min=0.1), ref=lambda a: np.maximum(a, 0.1)),
               S("clamp_max_odd", distinct((33,)), max=0.2)),
           errors=(E("clamp_no_bounds", lambda: t(3).clamp(), ValueError, "at least one of min and max"),
                   E("clamp_number_min_tensor_max", lambda: mf.clamp(t(2, 3), min=0.0, max=t(3)), TypeError,
                     r"clamp: expected min and max both numbers or both tensors, got max a tensor of shape \(3,\) "
                     "and min a number"),
                   E("clamp_tensor_min_number_max", lambda: t(3).clip(t(1), 1), TypeError,
                     r"clamp: expected min and max both numbers or both tensors, got min a tensor of shape \(1,\)"),
                   E("clamp_grad_0d_min_number_max", lambda: t(3).clamp(t(requires_grad=True), 1.0), TypeError,
                     r"got min a tensor of shape \(\) that requires grad and max a number"))),
    # ---- reductions
    OpInfo("sum", lambda a, **kw: a.sum(**kw), _reduce(np.sum), spelled="Tensor.sum", fuzz="reduction",
           aliases={"mf.sum": mf.sum}, torch=SAME, samples=(
               S("sum_all", (3, 4)), S("sum_axis", (3, 4, 2), dim=1),
               S("sum_axes_keepdim", (3, 4, 2), dim=(0, 2), keepdim=True),
               S("sum_0d", ()),
               S("sum_odd", (33, 1), dim=0)),
           errors=(E("sum_dim_range", lambda: t(2, 3).sum(2), IndexError, "dimension 2 out of range"),
                   E("sum_keepdim_without_dim", lambda: mf.sum(t(2, 3), keepdim=True), TypeError,
                     "sum: expected a dim with keepdim=True .*, got keepdim without a dim"))),
    OpInfo("mean", lambda a, **kw: a.mean(**kw), _reduce(np.mean), spelled="Tensor.mean", fuzz="reduction",
           aliases={"mf.mean": mf.mean}, torch=SAME, samples=(
               S("mean_all", (3, 4)), S("mean_axis_keepdim", (3, 4), dim=-1, keepdim=True),
               S("mean_odd", (7, 33), dim=1)),
           errors=(E("mean_int", lambda: mf.tensor([1, 2]).mean(), TypeError, "floating point"),
                   E("mean_keepdim_without_dim", lambda: t(2, 3).mean(keepdim=True), TypeError,
                     "mean: expected a dim with keepdim=True .*, got keepdim without a dim"))),
    OpInfo("max", _MAX, _MAX_REF, spelled="Tensor.max", aliases={"mf.max": _by_function(mf.max)}, torch=SAME,
           samples=(S("max_all", distinct((3, 4))), S("max_dim", distinct((3, 4)), dim=1),
                    S("max_dim_keepdim", distinct((3, 4)), fn=lambda a: a.max(0, keepdim=True)[0],
                      ref=lambda a: a.max(0, keepdims=True)),
                    S("max_odd", distinct((2, 33)), dim=-1), S("max_0d", distinct(()))),
           errors=(E("max_empty", lambda: mf.zeros(0).max(), ValueError, "empty dimension"),)),
    OpInfo("min", _MIN, _MIN_REF, spelled="Tensor.min", aliases={"mf.min": _by_function(mf.min)}, torch=SAME,
           samples=(S("min_dim", distinct((3, 4)), fn=lambda a: a.min(dim=-1).values, ref=lambda a: a.min(-1)),
                    S("min_all", distinct((3, 4))), S("min_odd", distinct((33, 3)), dim=0, keepdim=True)),
           errors=(E("min_empty", lambda: mf.zeros(2, 0).min(1), ValueError, "empty dimension"),)),
    OpInfo("amax", mf.amax, lambda a, dim=None, keepdim=False: np.amax(a, axis=dim, keepdims=keepdim),
           spelled="mf.amax", fuzz="reduction", aliases={"Tensor.amax": lambda a, *d, **kw: a.amax(*d, **kw)},
           torch=lambda T, a, *d, **kw: T.amax(a, *d, **kw),
           samples=(S("amax_axes", distinct((3, 4, 2)), dim=(0, 2)), S("amax_odd", distinct((33,)), dim=0))),
    OpInfo("amin", mf.amin, lambda a, dim=None, keepdim=False: np.amin(a, axis=dim, keepdims=keepdim),
           spelled="mf.amin", fuzz="reduction", aliases={"Tensor.amin": lambda a, *d, **kw: a.amin(*d, **kw)},
           torch=lambda T, a, *d, **kw: T.amin(a, *d, **kw),
           samples=(S("amin_axes_keepdim", distinct((3, 5, 2)), dim=(1, 2), keepdim=True),)),
    OpInfo("var", lambda a, **kw: a.var(**kw), _moments(np.var), spelled="Tensor.var", fuzz="reduction",
           aliases={"mf.var": mf.var}, torch=SAME, samples=(
               S("var_all", (3, 4)), S("var_axis", (3, 4), dim=1, keepdim=True),
               S("var_biased", (3, 4), dim=0, unbiased=False), S("var_correction_odd", (5, 33), dim=1, correction=2))),
    OpInfo("std", lambda a, **kw: a.std(**kw), _moments(np.std), spelled="Tensor.std", fuzz="reduction",
           aliases={"mf.std": mf.std}, torch=SAME, samples=(
               S("std_axis", (3, 4), dim=1), S("std_all_odd", (33,)))),
    # ---- shapes and indexing
    OpInfo("reshape", lambda a, shape: a.reshape(shape), lambda a, shape: a.reshape(shape), spelled="Tensor.reshape",
           aliases={"mf.reshape": lambda a, shape: mf.reshape(a, shape)}, torch=SAME, samples=(
               S("reshape", (3, 4), fn=lambda a: a.reshape(4, 3) * mf.arange(3, dtype=mf.float64, device=a.device),
                 ref=lambda a: a.reshape(4, 3) * np.arange(3)),
               S("reshape_to_0d", (1, 1), shape=()), S("reshape_odd", (3, 11), shape=(33, 1))),
           errors=(E("reshape_size", lambda: t(2, 3).reshape(4, 2), ValueError, r"reshape: shape \(4, 2\) is invalid"),
                   E("reshape_two_infer", lambda: t(4).reshape(-1, -1), ValueError, "invalid shape"),
                   E("reshape_float_size", lambda: t(6).reshape(2.0, 3), TypeError, r"reshape: sizes must be ints, got \(2.0, 3\)"))),
    OpInfo("view", lambda a, shape: a.view(*shape), lambda a, shape: a.reshape(shape), spelled="Tensor.view",
           torch=SAME, samples=(
               S("view_infer", (3, 4), fn=lambda a: a.view(-1, 2).exp(), ref=lambda a: np.exp(a.reshape(-1, 2))),
               S("view_odd", (33,), shape=(3, -1, 1)))),
    OpInfo("flatten", lambda a, start_dim=0, end_dim=-1: a.flatten(start_dim, end_dim),
           lambda a, start_dim=0, end_dim=-1: a.reshape(a.shape[:start_dim] + (-1,) + a.shape[end_dim:][1:]),
           spelled="Tensor.flatten", torch=SAME, aliases={"mf.flatten": mf.flatten}, samples=(
               S("flatten", (2, 3, 4), fn=lambda a: a.flatten(1).exp(), ref=lambda a: np.exp(a.reshape(2, 12))),
               S("flatten_odd", (3, 11, 1, 2), start_dim=1, end_dim=2), S("flatten_0d", ()))),
    OpInfo("transpose", lambda a, d0, d1: a.transpose(d0, d1), lambda a, d0, d1: np.swapaxes(a, d0, d1),
           spelled="Tensor.transpose", torch=SAME,
           aliases={"mf.transpose": lambda a, d0, d1: mf.transpose(a, d0, d1)}, samples=(
               S("transpose", (2, 3, 4), fn=lambda a: a.transpose(0, 2).exp(),
                 ref=lambda a: np.exp(a.transpose(2, 1, 0))),
               S("transpose_odd", (1, 33), d0=0, d1=-1))),
    OpInfo("permute", lambda a, dims: a.permute(*dims), lambda a, dims: a.transpose(dims), spelled="Tensor.permute",
           torch=SAME, aliases={"mf.permute": lambda a, dims: mf.permute(a, *dims)}, samples=(
               S("permute", (2, 3, 4), fn=lambda a: a.permute(2, 0, 1).exp(),
                 ref=lambda a: np.exp(a.transpose(2, 0, 1))),
               S("permute_odd", (1, 33, 2), dims=(1, 2, 0))),
           errors=(E("permute_not_perm", lambda: t(2, 3).permute(0, 0), ValueError, "not a permutation"),
                   E("permute_float_dim", lambda: t(2, 3).permute(1.0, 0), TypeError, "permute: sizes must be ints"))),
    OpInfo("T", lambda a: a.T, lambda a: a.T, spelled="Tensor.T", aliases={"Tensor.mT": lambda a: a.mT}, torch=SAME,
           samples=(S("T", (3, 4), fn=lambda a: a.T @ a, ref=lambda a: a.T @ a), S("T_odd", (33, 2)))),
    OpInfo("unsqueeze", lambda a, d: a.unsqueeze(d), lambda a, d: np.expand_dims(a, d), spelled="Tensor.unsqueeze",
           aliases={"mf.unsqueeze": lambda a, d: mf.unsqueeze(a, d)}, torch=SAME, samples=(
               S("unsqueeze", (3,), fn=lambda a: a.unsqueeze(1) * a.unsqueeze(0), ref=lambda a: a[:, None] * a[None]),
               S("unsqueeze_0d", (), d=0)),
           errors=(E("unsqueeze_tuple", lambda: t(3).unsqueeze((0,)), TypeError,
                     "unsqueeze: dim must be an int, got tuple"),
                   E("unsqueeze_none", lambda: mf.unsqueeze(t(3), None), TypeError, "must be an int, got NoneType"))),
    OpInfo("squeeze", lambda a, dim=None: a.squeeze() if dim is None else a.squeeze(dim),
           lambda a, dim=None: np.squeeze(a, dim), spelled="Tensor.squeeze", torch=SAME,
           aliases={"mf.squeeze": mf.squeeze}, samples=(
               S("squeeze", (3, 1, 2), fn=lambda a: a.squeeze(1).exp(), ref=lambda a: np.exp(a[:, 0])),
               S("squeeze_all_size1", (1, 33, 1)), S("squeeze_to_0d", (1, 1), dim=None))),
    OpInfo("expand", lambda a, shape: a.expand(*shape), lambda a, shape: np.broadcast_to(a, shape),
           spelled="Tensor.expand", torch=SAME, samples=(
               S("expand", (3, 1), fn=lambda a: a.expand(2, 3, 4).exp(),
                 ref=lambda a: np.exp(np.broadcast_to(a, (2, 3, 4)))),
               S("expand_0d", (), shape=(33,))),
           errors=(E("expand_float_size", lambda: t(3, 1).expand(3, 2.5), TypeError, "expand: sizes must be ints"),)),
    OpInfo("getitem", lambda a, idx: a[_as_index(a, idx)], lambda a, idx: a[idx], spelled="Tensor.__getitem__",
           torch=SAME, samples=(
               S("index_int", (3, 4), idx=(1,)), S("index_slices", (3, 4), idx=(slice(1, None), slice(None, None, 2))),
               S("index_negative_none_ellipsis", (2, 3, 4), idx=(Ellipsis, -1, None)),
               S("index_int_array", (3, 4), idx=(np.array([0, 2, 0]),)),
               S("index_list_repeated", (3, 4), fn=lambda a: a[:, [1, 1, 3]], ref=lambda a: a[:, [1, 1, 3]]),
               S("index_bool_mask", distinct((3, 4)), fn=lambda a: a[a > 0], ref=lambda a: a[a > 0]),
               S("index_odd", (33,), idx=(slice(3, 30, 3),))),
           errors=(E("index_range", lambda: t(2, 3)[2], IndexError, "out of range"),
                   E("index_array_range", lambda: t(2, 3)[mf.tensor([0, 7])], IndexError, "out of range"),
                   E("index_float_array", lambda: t(2, 3)[mf.tensor([0.5])], IndexError, "integer or bool"),
                   E("index_mask_shape", lambda: t(2, 3)[mf.tensor([True, False, True])], IndexError, "mask"),
                   E("index_too_many", lambda: t(2, 3)[0, 0, 0], IndexError, "too many indices"))),
    OpInfo("cat", lambda *ts, dim=0: mf.cat(list(ts), dim=dim), lambda *a, dim=0: np.concatenate(a, axis=dim),
           spelled="mf.cat", torch=lambda T, *ts, dim=0: T.cat(list(ts), dim=dim), samples=(
               S("cat", (2, 3), (2, 1), fn=lambda a, b: mf.cat([a, b, a], dim=1),
                 ref=lambda a, b: np.concatenate([a, b, a], 1)),
               S("cat_odd", (33,), (1,))),
           errors=(E("cat_shapes", lambda: mf.cat([t(2, 3), t(2, 4)], 0), ValueError, "differ outside dimension 0"),
                   E("cat_empty", lambda: mf.cat([]), ValueError, "non-empty"),
                   E("cat_dim_tuple", lambda: mf.cat([t(2)], ()), TypeError, "cat: dim must be an int, got tuple"))),
    OpInfo("stack", lambda *ts, dim=0: mf.stack(list(ts), dim=dim), lambda *a, dim=0: np.stack(a, axis=dim),
           spelled="mf.stack", torch=lambda T, *ts, dim=0: T.stack(list(ts), dim=dim), samples=(
               S("stack", (2, 3), (2, 3), dim=1), S("stack_0d", (), ())),
           errors=(E("stack_shapes", lambda: mf.stack([t(2), t(3)]), ValueError, "same shape"),
                   E("stack_dim_none", lambda: mf.stack([t(2)], None), TypeError, "stack: dim must be an int"))),
    OpInfo("cast", lambda a, dtype: mf.cast(a, dtype), lambda a, dtype: a.astype(dtype), spelled="mf.cast",
           aliases={"Tensor.to": lambda a, dtype: a.to(dtype)}, samples=(
               S("cast_roundtrip", (3,), fn=lambda a: a.float().double() * 2,
                 ref=lambda a: a.astype(np.float32).astype(np.float64) * 2, check={"eps": 1e-3, "atol": 1e-3}),)),
    OpInfo("clone", lambda a: a.clone(), lambda a: a.copy(), spelled="Tensor.clone", aliases={"mf.clone": mf.clone},
           torch=SAME, samples=(S("clone", (3,), fn=lambda a: a.clone() * a, ref=lambda a: a * a), S("clone_0d", ()))),
    # ---- functional: layers, normalization, softmax, losses
    OpInfo("linear", F.linear, linear_ref, spelled="F.linear", gpu_tol=1e-4,
           torch=lambda T, x, w, b=None, activation=None: {
               None: lambda y: y, "relu": T.relu,
               "gelu": lambda y: T.nn.functional.gelu(y, approximate="tanh")}[activation](
                   T.nn.functional.linear(x, w, b)), samples=(
               S("linear", (5, 3, 7), (4, 7), (4,)), S("linear_relu_odd", (33, 9), (3, 9), (3,), activation="relu"),
               S("linear_gelu_nobias", (1, 8), (2, 8), activation="gelu")),
           errors=(E("linear_features", lambda: F.linear(t(2, 3), t(4, 5)), ValueError, "in_features=5"),
                   E("linear_dtype", lambda: F.linear(t(2, 3), t(4, 3, dtype=mf.float16)), TypeError, "same dtype"),
                   E("linear_bias_shape", lambda: F.linear(t(2, 3), t(4, 3), t(5)), ValueError,
                     r"bias must have shape \(4,\)"))),
    OpInfo("conv2d", F.conv2d, conv2d_ref, spelled="F.conv2d", gpu_tol=1e-4,
           torch=lambda T, x, w, b=None, activation=None, **kw: (T.relu if activation else (lambda y: y))(
               T.nn.functional.conv2d(x, w, b, **kw)), samples=(
               S("conv2d", (2, 3, 5, 6), (4, 3, 3, 3), (4,)),
               S("conv2d_stride_pad_dilation", (1, 2, 7, 5), (3, 2, 2, 3), stride=2, padding=1, dilation=(2, 1)),
               S("conv2d_groups_relu", (1, 4, 5, 5), (2, 2, 3, 3), (2,), groups=2, activation="relu")),
           errors=(E("conv_channels", lambda: F.conv2d(t(1, 3, 5, 5), t(4, 2, 3, 3)), ValueError, "channel"),
                   E("conv_not_4d", lambda: F.conv2d(t(5, 5), t(4, 3, 3, 3)), ValueError, "4-D|4D|dimensions"),
                   E("conv_kernel_too_big", lambda: F.conv2d(t(1, 1, 2, 2), t(1, 1, 3, 3)), ValueError,
                     "kernel|larger"),
                   E("conv_stride", lambda: F.conv2d(t(1, 1, 5, 5), t(1, 1, 3, 3), stride=0), ValueError, "stride"),
                   E("conv_zero_channels", lambda: F.conv2d(t(2, 3, 5, 5), t(0, 3, 3, 3)), ValueError,
                     r"at least 1 output channel.*\(0, 3, 3, 3\)"),
                   E("conv_same_stride", lambda: F.conv2d(t(1, 1, 5, 5), t(1, 1, 3, 3), stride=2, padding="same"),
                     ValueError, "'same' is not supported for strided convolutions"),
                   E("conv_dtype", lambda: F.conv2d(t(1, 1, 5, 5), t(1, 1, 3, 3, dtype=mf.float64)), TypeError,
                     "one dtype"))),
    OpInfo("max_pool2d", F.max_pool2d, max_pool2d_ref, spelled="F.max_pool2d", torch=_tf("max_pool2d"), samples=(
        S("max_pool2d", distinct((2, 3, 4, 6)), kernel_size=2),
        S("max_pool2d_s2p1_odd", distinct((1, 2, 7, 5)), kernel_size=3, stride=2, padding=1),
        S("max_pool2d_dilated", distinct((1, 2, 9, 8)), kernel_size=(3, 2), stride=(2, 1), padding=1, dilation=(2, 3))),
           errors=(E("max_pool2d_dilation_zero", lambda: F.max_pool2d(t(1, 1, 5, 5), 2, dilation=0), ValueError,
                     "max_pool2d: dilation must be >= 1"),
                   E("max_pool2d_dilated_too_big", lambda: F.max_pool2d(t(1, 1, 5, 5), 3, dilation=3), ValueError,
                     r"max_pool2d: kernel \(3, 3\) \(dilation \(3, 3\): it spans 7x7\) is larger than the padded"))),
    OpInfo("avg_pool2d", F.avg_pool2d, avg_pool2d_ref, spelled="F.avg_pool2d", torch=_tf("avg_pool2d"), samples=(
        S("avg_pool2d", (2, 3, 4, 6), kernel_size=2),
        S("avg_pool2d_s2p1_odd", (1, 2, 7, 5), kernel_size=3, stride=2, padding=1))),
    OpInfo("max_pool1d", F.max_pool1d, _pool1d_ref(max_pool2d_ref), spelled="F.max_pool1d", torch=_tf("max_pool1d"),
           samples=(S("max_pool1d", distinct((2, 3, 8)), kernel_size=2),
                    S("max_pool1d_s2p1_odd", distinct((1, 2, 9)), kernel_size=3, stride=2, padding=1),
                    S("max_pool1d_unbatched", distinct((3, 7)), kernel_size=3, stride=1),
                    S("max_pool1d_dilated", distinct((2, 3, 11)), kernel_size=3, stride=2, padding=1, dilation=3)),
           errors=(E("max_pool1d_too_big", lambda: F.max_pool1d(t(1, 2, 3), 5), ValueError,
                     "max_pool1d: kernel 5 is larger than the padded input 3"),
                   E("max_pool1d_4d", lambda: F.max_pool1d(t(1, 2, 3, 4), 2), ValueError,
                     "max_pool1d: expected a 3-D input"),
                   E("avg_pool1d_padding", lambda: F.avg_pool1d(t(1, 2, 6), 2, padding=2), ValueError,
                     "avg_pool1d: padding 2 must be at most half the kernel size 2"))),
    OpInfo("avg_pool1d", F.avg_pool1d, _pool1d_ref(avg_pool2d_ref), spelled="F.avg_pool1d", torch=_tf("avg_pool1d"),
           samples=(S("avg_pool1d", (2, 3, 8), kernel_size=2),
                    S("avg_pool1d_s2p1_odd", (1, 2, 9), kernel_size=3, stride=2, padding=1),
                    S("avg_pool1d_unbatched", (3, 7), kernel_size=3, stride=1))),
    OpInfo("layer_norm", _norm(F.layer_norm), _norm(layer_norm_ref), spelled="F.layer_norm", gpu_tol=1e-4,
           torch=_torch_norm("layer_norm"),
           samples=(S("layer_norm", (4, 33), normalized_shape=(33,)),
                    S("layer_norm_affine", (2, 3, 8), (8,), (8,), normalized_shape=(8,), eps=1e-3),
                    S("layer_norm_two_dims", (3, 2, 5), normalized_shape=(2, 5)),
                    S("layer_norm_size1", (1, 7), normalized_shape=(7,))),
           inplace=(InPlace("layer_norm_", lambda x: F.layer_norm_(x, x.shape[-1:]),
                            lambda x: F.layer_norm(x, x.shape[-1:]), grad=False, op="layer_norm_"),),
           errors=(E("layer_norm_shape", lambda: F.layer_norm(t(2, 3), (4,)), ValueError, "normalized_shape"),
                   E("layer_norm_empty_shape", lambda: F.layer_norm(t(2, 3), ()), ValueError, "normalized_shape"),
                   E("layer_norm_weight_shape", lambda: F.layer_norm(t(2, 3), (3,), weight=t(4)), ValueError,
                     r"weight must have shape \[3\]"),
                   E("layer_norm_inplace_shape", lambda: F.layer_norm_(t(2, 3), (4,)), ValueError,
                     "layer_norm_.*normalized_shape"))),
    OpInfo("rms_norm", _norm(F.rms_norm), _norm(rms_norm_ref), spelled="F.rms_norm", gpu_tol=1e-4,
           torch=_torch_norm("rms_norm"), samples=(
        S("rms_norm", (4, 33), (33,), normalized_shape=(33,), eps=1e-6), S("rms_norm_default_eps", (3, 8),
                                                                          normalized_shape=(8,)))),
    OpInfo("softmax", F.softmax, softmax_ref, spelled="F.softmax", gpu_tol=1e-4, torch=_tf("softmax"), samples=(
        S("softmax", (3, 33), dim=-1), S("softmax_dim0", (4, 5), dim=0), S("softmax_middle", (2, 3, 4), dim=1)),
           inplace=(InPlace("softmax_ -1", lambda x: F.softmax_(x, -1), lambda x: F.softmax(x, -1), op="softmax_"),
                    InPlace("softmax_ 0", lambda x: F.softmax_(x, 0), lambda x: F.softmax(x, 0), op="softmax_")),
           errors=(E("softmax_dim", lambda: F.softmax(t(2, 3), dim=2), IndexError, "dim 2 out of range"),
                   E("softmax_int", lambda: F.softmax(mf.tensor([1, 2]), dim=0), TypeError, "float32"),
                   E("softmax_inplace_dim", lambda: F.softmax_(t(2, 3), 2), IndexError, "softmax_"))),
    OpInfo("log_softmax", F.log_softmax, log_softmax_ref, spelled="F.log_softmax", gpu_tol=1e-4,
           torch=_tf("log_softmax"), samples=(S("log_softmax", (3, 33), dim=-1), S("log_softmax_dim0", (5, 2), dim=0))),
    OpInfo("linear_cross_entropy", F.linear_cross_entropy,
           lambda x, w, target, **kw: cross_entropy_ref(linear_ref(x, w.reshape(-1, w.shape[-1])).reshape(
               x.shape[:-1] + w.shape[:-1]), target, **kw),
           spelled="F.linear_cross_entropy", gpu_tol=1e-4, torch=_torch_linear_cross_entropy, samples=(
               S("linear_cross_entropy", (6, 3), (5, 3), index((6,), 5)),
               S("linear_cross_entropy_bias_sum", (6, 3), (5, 3), index((6,), 5), (5,), const(pos((5,))),
                 fn=lambda x, w, t, b, cw: F.linear_cross_entropy(x, w, t, linear_bias=b, weight=cw, reduction="sum"),
                 ref=lambda x, w, t, b, cw: cross_entropy_ref(linear_ref(x, w, b), t, cw, reduction="sum")),
               S("linear_cross_entropy_kdim_none", (2, 3), (4, 2, 3), index((2, 2), 4), reduction="none"))),
    OpInfo("cross_entropy", F.cross_entropy, cross_entropy_ref, spelled="F.cross_entropy", gpu_tol=1e-4,
           torch=_tf("cross_entropy"), samples=(
               S("cross_entropy", (6, 5), index((6,), 5)),
               S("cross_entropy_weight_sum", (6, 5), index((6,), 5), const(pos((5,))), reduction="sum"),
               S("cross_entropy_ignore_smoothing", (8, 3), index((8,), 3), ignore_index=2, label_smoothing=0.1),
               S("cross_entropy_spatial_none", (2, 3, 2, 2), index((2, 2, 2), 3), reduction="none")),
           errors=(
               E("cross_entropy_label_range", lambda: F.cross_entropy(t(2, 3), mf.tensor([0, 3])), ValueError, "out of"),
               E("cross_entropy_target_dtype", lambda: F.cross_entropy(t(2, 3), mf.tensor([0.0, 1.0])),
                 (TypeError, ValueError, NotImplementedError), "target|probabilit"),
               E("cross_entropy_target_shape", lambda: F.cross_entropy(t(2, 3), mf.tensor([0, 1, 2])), ValueError, "target"),
               E("cross_entropy_reduction", lambda: F.cross_entropy(t(2, 3), mf.tensor([0, 1]), reduction="avg"), ValueError,
                 "reduction"),
               E("smoothing_nan", lambda: F.cross_entropy(t(2, 3), mf.tensor([0, 1]), label_smoothing=float("nan")),
                 ValueError, "label_smoothing"),
               E("cross_entropy_nan_float_target", lambda: F.cross_entropy(t(2, 3), mf.tensor([float("nan"), 1.0])), TypeError,
                 "integer class indices"),
               E("cross_entropy_zero_classes", lambda: F.cross_entropy(t(2, 0), mf.tensor([0, 0])), ValueError, r"in \[0, 0\)"),
               E("cross_entropy_negative_label", lambda: F.cross_entropy(t(2, 3), mf.tensor([0, -1])), ValueError,
                 "target -1 at position 1 is out of bounds"),
               E("cross_entropy_spatial_target", lambda: F.cross_entropy(t(2, 3, 4, 4), mf.zeros(2, 4, 5, dtype=mf.int64)),
                 ValueError, r"target must have shape \[2, 4, 4\]"),
               E("cross_entropy_weight_shape", lambda: F.cross_entropy(t(2, 3), mf.tensor([0, 1]), weight=t(4)), ValueError,
                 r"weight must have shape \[3\]"))),
    OpInfo("nll_loss", F.nll_loss, nll_loss_ref, spelled="F.nll_loss", torch=_tf("nll_loss"), samples=(
        S("nll_loss", (6, 5), index((6,), 5)), S("nll_loss_weight_ignore", (7, 3), index((7,), 3), const(pos((3,))),
                 ignore_index=0)),
           errors=(E("nll_label_range", lambda: F.nll_loss(t(2, 3), mf.tensor([0, 3])), ValueError,
                     "target 3 .* out of bounds"),
                   E("nll_uint8_label_range", lambda: F.nll_loss(t(2, 3), mf.tensor(np.array([0, 9], np.uint8))),
                     ValueError, "target 9"))),
    OpInfo("mse_loss", F.mse_loss, mse_loss_ref, spelled="F.mse_loss", torch=_tf("mse_loss"), samples=(
        S("mse_loss", (6, 5), (6, 5)), S("mse_loss_sum_odd", (33,), (33,), reduction="sum"),
        S("mse_loss_none_0d", (), (), reduction="none")),
           errors=(E("mse_shapes", lambda: F.mse_loss(t(2, 3), t(3, 2)), ValueError,
                     r"mse_loss: shapes \(2, 3\) and \(3, 2\) cannot be broadcast"),)),
    OpInfo("dropout", F.dropout, lambda x, p=0.5, training=True: x, spelled="F.dropout", torch=_tf("dropout"), samples=(
        S("dropout_p0", (4, 33), p=0.0), S("dropout_eval", (3, 5), p=0.5, training=False)),
           errors=(E("dropout_nan", lambda: F.dropout(t(3), float("nan")), ValueError, "between 0 and 1.*nan"),)),
]


# ---------------------------------------------------------------- pointwise math, logic, rounding and comparison (minifused/ops/pointwise.py)

# (minifused/ops/logic.py holds the tests of values, logic and bitwise ops; minifused/ops/creation.py the ranges)
NO_GRAD_RESULT = (np.dtype(np.float64),)  # bool / integer results: the float dtypes sweep does not apply


def _method(name):
    return lambda a, *args, **kw: getattr(a, name)(*args, **kw)


def _unary_entry(name, ref, spec=(3, 4), fuzz=True, domain="real", inplace=False, extra=()):
    """A unary op spelled as a Tensor method (the same on torch tensors), with ``mf.<name>`` and the
    in-place method as other spellings."""
    make = pos if domain == "pos" else distinct if domain == "unit" else (lambda s: s)
    return OpInfo(name, _method(name), ref, spelled=f"Tensor.{name}", aliases={f"mf.{name}": getattr(mf, name)},
                  torch=SAME, fuzz="unary" if fuzz else "", domain=(domain,) if fuzz else (), samples=(
                      S(name, make(spec)), S(f"{name}_0d", make(())), S(f"{name}_odd", make((7, 33))), *extra),
                  inplace=(InPlace(f"{name}_", _method(f"{name}_"), _method(name), op=f"{name}_"),) if inplace else ())


def _erfinv_bisect(y):
    lo, hi = -10.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if math.erf(mid) < y else (lo, mid)
    return (lo + hi) / 2


_erfinv_ref = np.vectorize(_erfinv_bisect, otypes=[np.float64])


def _np_round(a, decimals=0):
    return np.round(a, decimals)


def _with_nonfinite(a):
    """``a`` with +inf above 0.5, -inf below -0.5 and NaN in [0.3, 0.5] (the same on NumPy arrays)."""
    if isinstance(a, np.ndarray):
        return np.where(a > 0.5, np.inf, np.where(a < -0.5, -np.inf, np.where(a > 0.3, np.nan, a)))
    return mf.where(a > 0.5, math.inf, mf.where(a < -0.5, -math.inf, mf.where(a > 0.3, math.nan, a)))


def _test_entry(name):
    ref = getattr(np, name)
    return OpInfo(name, _method(name), ref, spelled=f"Tensor.{name}", aliases={f"mf.{name}": getattr(mf, name)},
                  grad=False, dtypes=NO_GRAD_RESULT, torch=SAME, samples=(
                      S(name, (3, 5)), S(f"{name}_0d", ()),
                      S(f"{name}_nonfinite", (4, 9), fn=lambda a: getattr(mf, name)(_with_nonfinite(a)),
                        ref=lambda a: ref(_with_nonfinite(a)))))


def _logical_entry(name):
    ref = getattr(np, name)
    return OpInfo(name, _method(name), ref, spelled=f"Tensor.{name}", aliases={f"mf.{name}": getattr(mf, name)},
                  grad=False, dtypes=NO_GRAD_RESULT, torch=SAME, samples=(
                      S(name, index((3, 4), 2), index((4,), 2)), S(f"{name}_float_0d", (3, 1), ()),
                      S(f"{name}_odd", index((7, 33), 3), index((7, 1), 2))),
                  errors=(E(f"{name}_scalar", lambda: getattr(mf, name)(t(2), True), TypeError,
                            f"{name}.*'other' must be Tensor"),))


def _bitwise_entry(name, operator, ref):
    return OpInfo(name, operator, ref, spelled=f"Tensor.__{name.split('_')[1]}__", grad=False,
                  dtypes=NO_GRAD_RESULT, torch=SAME,
                  aliases={f"mf.{name}": getattr(mf, name), f"Tensor.{name}": _method(name)}, samples=(
                      S(name, index((3, 4), 16), index((4,), 16)), S(f"{name}_0d", index((), 7), index((5,), 16)),
                      S(f"{name}_bool", index((7, 33), 2), fn=lambda a: operator(a > 0, a.bool()),
                        ref=lambda a: ref(a > 0, a.astype(bool))),
                      S(f"{name}_scalars", index((9,), 16), fn=lambda a: operator(operator(a, 6), 3) + operator(5, a),
                        ref=lambda a: ref(ref(a, 6), 3) + ref(5, a))),
                  errors=(E(f"{name}_float", lambda: operator(t(2), t(2)), TypeError,
                            f"{name}: only integer and bool tensors are supported, got float32"),
                          # PyTorch 2.13: NotImplementedError, "bitwise_and_cpu" not implemented for 'Float'
                          E(f"{name}_float_scalar", lambda: operator(mf.tensor([1, 2]), 1.5), NotImplementedError,
                            f"{name}: not implemented for a float operand, got 1.5")))


def _division_ref(np_fn):
    def ref(a, b):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np_fn(a, b)
    return ref


MATH_OPS = [
    # ---- trigonometric, hyperbolic, exponential and logarithmic forms (integer input gives float32)
    _unary_entry("sin", np.sin, inplace=True),
    _unary_entry("cos", np.cos, inplace=True),
    _unary_entry("tan", np.tan, fuzz=False, domain="unit", inplace=True),
    _unary_entry("asin", np.arcsin, fuzz=False, domain="unit"),
    _unary_entry("acos", np.arccos, fuzz=False, domain="unit"),
    _unary_entry("atan", np.arctan),
    _unary_entry("sinh", np.sinh),
    _unary_entry("cosh", np.cosh),
    _unary_entry("log2", np.log2, domain="pos"),
    _unary_entry("log10", np.log10, domain="pos"),
    _unary_entry("log1p", np.log1p, domain="pos"),
    _unary_entry("expm1", np.expm1, inplace=True),
    _unary_entry("rsqrt", lambda a: 1 / np.sqrt(a), domain="pos"),
    _unary_entry("reciprocal", lambda a: 1 / a, domain="pos"),
    _unary_entry("square", np.square, inplace=True),
    _unary_entry("erf", _erf, inplace=True),
    _unary_entry("erfinv", _erfinv_ref, fuzz=False, domain="unit", inplace=True),
    # ---- rounding and sign: zero gradient (frac: 1), integers kept as they are
    _unary_entry("floor", np.floor, inplace=True),
    _unary_entry("ceil", np.ceil, inplace=True),
    _unary_entry("trunc", np.trunc, inplace=True),
    _unary_entry("frac", lambda a: a - np.trunc(a), inplace=True),
    _unary_entry("sign", np.sign, inplace=True),
    _unary_entry("sgn", np.sign),
    OpInfo("round", _method("round"), _np_round, spelled="Tensor.round", torch=SAME, fuzz="unary", domain=("real",),
           aliases={"mf.round": mf.round}, samples=(
               S("round", (3, 4)), S("round_0d", ()), S("round_decimals", (5, 7), decimals=2),
               S("round_negative_decimals", (9,), fn=lambda a: mf.round(a * 100, decimals=-1),
                 ref=lambda a: np.round(a * 100, -1)),
               S("round_half_even", (4,), fn=lambda a: (a * 0 + mf.tensor([0.5, 1.5, 2.5, -0.5], dtype=a.dtype,
                                                                   device=a.device)).round(),
                 ref=lambda a: np.array([0.0, 2.0, 2.0, -0.0]))),
           inplace=(InPlace("round_", _method("round_"), _method("round"), op="round_"),
                    InPlace("round_ decimals", lambda x: x.round_(decimals=1), lambda x: x.round(decimals=1),
                            op="round_")),
           errors=(E("round_float_decimals", lambda: t(3).round(decimals=1.5), TypeError, "decimals must be an int"),
                   E("round_int_decimals", lambda: mf.tensor([15]).round(decimals=1), RuntimeError,
                     "round: decimals is only supported for floating-point"))),
    # ---- binary: atan2, //, %, fmod
    OpInfo("atan2", mf.atan2, np.arctan2, spelled="mf.atan2", torch=lambda T, a, b: T.atan2(a, b),
           aliases={"Tensor.atan2": _method("atan2"), "Tensor.arctan2": _method("arctan2")}, samples=(
               S("atan2", (3, 4), (3, 4)), S("atan2_broadcast", (5, 1), (1, 33)), S("atan2_0d", (), (4,))),
           errors=(E("atan2_scalar", lambda: mf.atan2(t(2), 1.0), TypeError, "atan2.*'other' must be Tensor"),
                   E("atan2_shapes", lambda: mf.atan2(t(2), t(3)), ValueError, r"atan2: shapes \(2,\) and \(3,\)"))),
    OpInfo("floor_divide", lambda a, b: a // b, _division_ref(np.floor_divide), spelled="Tensor.__floordiv__",
           fuzz="binary", domain=("real", "nonzero"),
           aliases={"mf.floor_divide": mf.floor_divide, "Tensor.floor_divide": _method("floor_divide")}, samples=(
               S("floor_divide", (3, 4), pos((3, 4))), S("floor_divide_broadcast", (5, 1), pos((33,))),
               S("floor_divide_scalars", (7,), fn=lambda a: a // 0.3 + 2.5 // (a.abs() + 0.5),
                 ref=lambda a: a // 0.3 + 2.5 // (np.abs(a) + 0.5)))),
    OpInfo("remainder", lambda a, b: a % b, _division_ref(np.remainder), spelled="Tensor.__mod__", torch=SAME,
           fuzz="binary", domain=("real", "nonzero"),
           aliases={"mf.remainder": mf.remainder, "Tensor.remainder": _method("remainder")}, samples=(
               S("remainder", (3, 4), pos((3, 4))),
               S("remainder_negative_divisor", (6,), pos((6,)), fn=lambda a, b: a % -b,
                 ref=lambda a, b: np.remainder(a, -b)),
               S("remainder_broadcast_0d", (5, 1), pos(())),
               S("remainder_scalars", pos((7,)), fn=lambda a: a % 0.3 + 2.5 % a, ref=lambda a: a % 0.3 + 2.5 % a)),
           # PyTorch 2.13: NotImplementedError, "remainder_cpu" not implemented for 'Bool'
           errors=(E("remainder_bool", lambda: mf.tensor([True, False]) % True, NotImplementedError,
                     "remainder: not implemented for bool tensors"),)),
    OpInfo("fmod", mf.fmod, _division_ref(np.fmod), spelled="mf.fmod", torch=lambda T, a, b: T.fmod(a, b),
           fuzz="binary", domain=("real", "nonzero"), aliases={"Tensor.fmod": _method("fmod")}, samples=(
               S("fmod", (3, 4), pos((3, 4))), S("fmod_negative_divisor", (6,), pos((6,)),
                                                 fn=lambda a, b: mf.fmod(a, -b), ref=lambda a, b: np.fmod(a, -b)),
               S("fmod_broadcast", (1, 33), pos((5, 1))),
               S("fmod_scalar", (7,), fn=lambda a: mf.fmod(a, 0.3), ref=lambda a: np.fmod(a, 0.3))),
           # PyTorch 2.13: "fmod() received an invalid combination of arguments - got (float, Tensor)" (remainder
           # takes a number first, fmod does not)
           errors=(E("fmod_number_first", lambda: mf.fmod(2.5, t(3)), TypeError,
                     r"fmod\(\): argument 'input' must be a Tensor, not float"),)),
    OpInfo("repeat_interleave", mf.repeat_interleave, lambda a, repeats, dim=None: np.repeat(a, repeats, dim),
           spelled="mf.repeat_interleave", aliases={"Tensor.repeat_interleave": _method("repeat_interleave")},
           torch=lambda T, a, **kw: T.repeat_interleave(a, **kw), samples=(
               S("repeat_interleave_flat", (2, 3), repeats=2), S("repeat_interleave_dim1", (2, 3), repeats=3, dim=1),
               S("repeat_interleave_counts", (3, 2), fn=lambda a: mf.repeat_interleave(a, mf.tensor([2, 0, 1]), 0),
                 ref=lambda a: np.repeat(a, [2, 0, 1], 0))),
           errors=(E("repeat_interleave_size", lambda: mf.repeat_interleave(t(3), mf.tensor([1, 2])), RuntimeError,
                     "repeat_interleave: repeats must have the same size as input along dim"),
                   E("repeat_interleave_negative", lambda: mf.repeat_interleave(t(2), mf.tensor([1, -1])),
                     RuntimeError, "repeats can not be negative"),
                   E("repeat_interleave_0d_dim", lambda: t().repeat_interleave(2, dim=0), IndexError,
                     "repeat_interleave: expected a tensor of at least 1 dimension for dim=0, got a 0-d tensor"),
                   E("repeat_interleave_0d_dim_counts", lambda: mf.repeat_interleave(t(), mf.tensor([2]), -1),
                     IndexError, "repeat_interleave: expected a tensor of at least 1 dimension for dim=-1"))),
    OpInfo("meshgrid", lambda a, b, indexing="ij": mf.stack(mf.meshgrid(a, b, indexing=indexing)),
           lambda a, b, indexing="ij": np.stack(np.meshgrid(a, b, indexing=indexing)), spelled="mf.meshgrid",
           torch=lambda T, a, b, indexing="ij": T.stack(T.meshgrid(a, b, indexing=indexing)), samples=(
               S("meshgrid_ij", (3,), (4,), indexing="ij"), S("meshgrid_xy", (3,), (4,), indexing="xy")),
           errors=(E("meshgrid_2d", lambda: mf.meshgrid(t(2, 2), t(3), indexing="ij"), RuntimeError,
                     "meshgrid: expected 0D or 1D tensor"),
                   E("meshgrid_indexing", lambda: mf.meshgrid(t(2), indexing="yx"), ValueError,
                     "meshgrid: indexing must be one of"))),
    OpInfo("hypot", mf.hypot, np.hypot, spelled="mf.hypot", torch=lambda T, a, b: T.hypot(a, b), samples=(
               S("hypot", (3, 4), (3, 4)), S("hypot_broadcast", (2, 5), (1, 5)))),
    OpInfo("diff", mf.diff, lambda a, n=1, dim=-1: np.diff(a, n, dim), spelled="mf.diff",
           aliases={"Tensor.diff": _method("diff")}, torch=lambda T, a, **kw: T.diff(a, **kw), samples=(
               S("diff", (3, 5)), S("diff_n2_dim0", (5, 3), n=2, dim=0),
               S("diff_prepend_append", (2, 4), (2, 1), (2, 2),
                 fn=lambda a, p, q: mf.diff(a, prepend=p, append=q),
                 ref=lambda a, p, q: np.diff(np.concatenate([p, a, q], -1)))),
           errors=(E("diff_0d", lambda: mf.diff(t()), RuntimeError, "diff: diff expects input to be at least"),
                   E("diff_prepend_number", lambda: mf.diff(t(3), prepend=2.5), TypeError,
                     r"diff\(\): argument 'prepend' must be Tensor, not float"),
                   E("diff_append_number", lambda: t(3).diff(append=1), TypeError,
                     r"diff\(\): argument 'append' must be Tensor, not int"))),
    OpInfo("var_mean", lambda a, **kw: mf.stack(list(mf.var_mean(a, **kw))),
           lambda a, dim=None, correction=1: np.stack([np.var(a, dim, ddof=correction), np.mean(a, dim)]),
           spelled="mf.var_mean", torch=lambda T, a, **kw: T.stack(list(T.var_mean(a, **kw))), samples=(
               S("var_mean", (4, 5), dim=1), S("var_mean_all_biased", (6,), correction=0))),
    OpInfo("std_mean", lambda a, **kw: mf.stack(list(mf.std_mean(a, **kw))),
           lambda a, dim=None, correction=1: np.stack([np.std(a, dim, ddof=correction), np.mean(a, dim)]),
           spelled="mf.std_mean", torch=lambda T, a, **kw: T.stack(list(T.std_mean(a, **kw))), samples=(
               S("std_mean", (4, 5), dim=0),)),
    OpInfo("aminmax", lambda a, **kw: mf.stack(list(mf.aminmax(a, **kw))),
           lambda a, dim=None, keepdim=False: np.stack([np.min(a, dim, keepdims=keepdim), np.max(a, dim,
                                                                                               keepdims=keepdim)]),
           spelled="mf.aminmax",
           # PyTorch's aminmax has no derivative: its reference is amin and amax (the same values, and gradients)
           torch=lambda T, a, **kw: T.stack([T.amin(a, **kw), T.amax(a, **kw)]), samples=(
               S("aminmax", distinct((4, 5))), S("aminmax_dim_keepdim", distinct((3, 4)), dim=1, keepdim=True))),
    OpInfo("unfold", lambda a, dimension, size, step: a.unfold(dimension, size, step), unfold_windows_ref,
           spelled="Tensor.unfold", torch=lambda T, a, dimension, size, step: a.unfold(dimension, size, step), samples=(
               S("tensor_unfold", (3, 7), dimension=1, size=3, step=2),
               S("tensor_unfold_dim0_overlap", (5, 2), dimension=0, size=2, step=1)),
           errors=(E("tensor_unfold_size", lambda: t(3).unfold(0, 4, 1), RuntimeError,
                     "unfold: maximum size for tensor at dimension 0 is 3 but size is 4"),
                   E("tensor_unfold_float_step", lambda: t(3).unfold(0, 2, 1.0), TypeError,
                     "unfold: step must be an int, got 1.0"),
                   E("tensor_unfold_step_0", lambda: t(3).unfold(0, 2, 0), RuntimeError,
                     "unfold: step must be positive"))),
    OpInfo("lerp", mf.lerp, lambda a, b, w: a + w * (b - a), spelled="mf.lerp",
           torch=lambda T, a, b, w: T.lerp(a, b, w), aliases={"Tensor.lerp": _method("lerp")}, samples=(
               S("lerp_tensor_weight", (3, 4), (3, 4), (3, 4)),
               S("lerp_broadcast_weight", (2, 5), (1, 5), (2, 1)),
               S("lerp_scalar_low", (6,), (6,), fn=lambda a, b: mf.lerp(a, b, 0.3), ref=lambda a, b: a + 0.3 * (b - a)),
               S("lerp_scalar_high", (6,), (6,), fn=lambda a, b: mf.lerp(a, b, 0.8), ref=lambda a, b: a + 0.8 * (b - a))),
           # PyTorch 2.13: NotImplementedError, "lerp_kernel_scalar" not implemented for 'Long'
           errors=(E("lerp_int", lambda: mf.lerp(mf.tensor([1, 2]), mf.tensor([3, 4]), 0.5), NotImplementedError,
                     "lerp\\(\\): expected floating-point tensors"),
                   E("lerp_mixed_dtypes", lambda: mf.lerp(t(2), mf.tensor([3, 4]), 0.5), RuntimeError,
                     "lerp\\(\\): expected floating-point tensors of one dtype, got input float32, end int64"))),
    OpInfo("addcmul", mf.addcmul, lambda a, b, c, value=1: a + value * b * c, spelled="mf.addcmul",
           torch=lambda T, *a, **kw: T.addcmul(*a, **kw), aliases={"Tensor.addcmul": _method("addcmul")}, samples=(
               S("addcmul", (3, 4), (3, 4), (3, 4), value=0.5), S("addcmul_broadcast", (2, 5), (1, 5), (2, 1))),
           # PyTorch 2.13: "addcmul(): argument 'value' must be Number, not Tensor" (a 0-d one without grad is one)
           errors=(E("addcmul_value_tensor", lambda: mf.addcmul(t(3), t(3), t(3), value=t(1)), TypeError,
                     r"addcmul\(\): argument 'value' must be Number, not Tensor"),
                   E("addcdiv_value_grad", lambda: t(3).addcdiv(t(3), t(3), value=t(requires_grad=True)), TypeError,
                     r"addcdiv\(\): argument 'value' must be Number, not Tensor"))),
    OpInfo("addcdiv", mf.addcdiv, lambda a, b, c, value=1: a + value * b / c, spelled="mf.addcdiv",
           torch=lambda T, *a, **kw: T.addcdiv(*a, **kw), aliases={"Tensor.addcdiv": _method("addcdiv")}, samples=(
               S("addcdiv", (3, 4), (3, 4), pos((3, 4)), value=-2.0), S("addcdiv_broadcast", (2, 5), (1, 5), pos((2, 1))))),
    # ---- tests of values
    _test_entry("isnan"), _test_entry("isinf"), _test_entry("isfinite"), _test_entry("isposinf"),
    _test_entry("isneginf"),
    OpInfo("nan_to_num", mf.nan_to_num, np.nan_to_num, spelled="mf.nan_to_num",
           aliases={"Tensor.nan_to_num": _method("nan_to_num")}, torch=lambda T, a, **kw: T.nan_to_num(a, **kw),
           samples=(
               S("nan_to_num", (3, 4)), S("nan_to_num_0d", (), nan=1.0),
               S("nan_to_num_nonfinite", (5, 9), fn=lambda a: mf.nan_to_num(_with_nonfinite(a), 0.25, 2.0, -3.0),
                 ref=lambda a: np.nan_to_num(_with_nonfinite(a), nan=0.25, posinf=2.0, neginf=-3.0)),
               S("nan_to_num_default_infs", (5, 9), fn=lambda a: mf.nan_to_num(_with_nonfinite(a)) * 1e-300,
                 ref=lambda a: np.nan_to_num(_with_nonfinite(a)) * 1e-300)),  # finite sums in gradcheck
           inplace=(InPlace("nan_to_num_", _method("nan_to_num_"), mf.nan_to_num, op="nan_to_num_"),),
           errors=(E("nan_to_num_string", lambda: mf.nan_to_num(t(2), nan="0"), TypeError,
                     "nan_to_num.*'nan' must be a float, not str"),)),
    OpInfo("isclose", mf.isclose, np.isclose, spelled="mf.isclose", aliases={"Tensor.isclose": _method("isclose")},
           grad=False, dtypes=NO_GRAD_RESULT, torch=lambda T, a, b, **kw: T.isclose(a, b, **kw), samples=(
               S("isclose", (3, 4), (3, 4)), S("isclose_broadcast_tol", (5, 1), (33,), rtol=0.5, atol=0.1),
               S("isclose_near", (6,), fn=lambda a: mf.isclose(a, a * (1 + 1e-6)), ref=lambda a: np.ones(6, bool)),
               S("isclose_equal_nan", (4, 9), fn=lambda a: mf.isclose(_with_nonfinite(a), _with_nonfinite(a),
                                                                       equal_nan=True),
                 ref=lambda a: np.isclose(_with_nonfinite(a), _with_nonfinite(a), equal_nan=True))),
           errors=(E("isclose_negative_rtol", lambda: mf.isclose(t(2), t(2), rtol=-1e-3), RuntimeError,
                     "isclose: rtol must be greater than or equal to zero, got -0.001"),
                   E("isclose_negative_atol", lambda: mf.isclose(t(2), t(2), atol=-1), RuntimeError, "atol must be"),
                   E("isclose_dtypes", lambda: mf.isclose(t(2), t(2, dtype=mf.float64)), RuntimeError,
                     "isclose: input and other must have the same dtype, got float32 and float64"),
                   E("isclose_scalar", lambda: mf.isclose(t(2), 1.0), TypeError, "isclose.*'other' must be Tensor"))),
    OpInfo("allclose", lambda a, b, **kw: mf.tensor(mf.allclose(a, b, **kw), device=a.device),
           lambda a, b, **kw: np.array(np.allclose(a, b, **kw)), spelled="mf.allclose",
           aliases={"Tensor.allclose": lambda a, b, **kw: mf.tensor(a.allclose(b, **kw), device=a.device)},
           grad=False, dtypes=NO_GRAD_RESULT, torch=lambda T, a, b, **kw: T.tensor(T.allclose(a, b, **kw)),
           samples=(S("allclose_far", (3, 4), (4,)), S("allclose_tol", (3, 4), (3, 4), atol=10.0),
                    S("allclose_near", (6,), fn=lambda a: mf.tensor(mf.allclose(a, a + 1e-9), device=a.device),
                      ref=lambda a: np.array(True))),
           errors=(E("allclose_negative_atol", lambda: mf.allclose(t(2), t(2), atol=-1.0), RuntimeError,
                     "allclose: atol must be greater than or equal to zero"),)),
    OpInfo("equal", lambda a, b: mf.tensor(mf.equal(a, b), device=a.device),
           lambda a, b: np.array(np.shape(a) == np.shape(b) and bool(np.all(a == b))), spelled="mf.equal",
           aliases={"Tensor.equal": lambda a, b: mf.tensor(a.equal(b), device=a.device)}, grad=False,
           dtypes=NO_GRAD_RESULT, torch=lambda T, a, b: T.tensor(T.equal(a, b)), samples=(
               S("equal_differ", (3, 4), (3, 4)), S("equal_shapes", (3, 1), (3,)),
               S("equal_same", (3, 5), fn=lambda a: mf.tensor(mf.equal(a, a * 1), device=a.device),
                 ref=lambda a: np.array(True)),
               S("equal_nan", (4, 9), fn=lambda a: mf.tensor(mf.equal(_with_nonfinite(a), _with_nonfinite(a)),
                                                       device=a.device),
                 ref=lambda a: np.array(False))),
           errors=(E("equal_not_tensor", lambda: mf.equal(t(2), [1.0, 2.0]), TypeError, "equal.*must be Tensor"),)),
    # ---- logic and bits
    _logical_entry("logical_and"), _logical_entry("logical_or"), _logical_entry("logical_xor"),
    OpInfo("logical_not", _method("logical_not"), np.logical_not, spelled="Tensor.logical_not",
           aliases={"mf.logical_not": mf.logical_not}, grad=False, dtypes=NO_GRAD_RESULT, torch=SAME, samples=(
               S("logical_not", index((3, 4), 2)), S("logical_not_float_0d", ()))),
    _bitwise_entry("bitwise_and", lambda a, b: a & b, np.bitwise_and),
    _bitwise_entry("bitwise_or", lambda a, b: a | b, np.bitwise_or),
    _bitwise_entry("bitwise_xor", lambda a, b: a ^ b, np.bitwise_xor),
    OpInfo("bitwise_not", lambda a: ~a, np.invert, spelled="Tensor.__invert__", grad=False, dtypes=NO_GRAD_RESULT,
           torch=SAME, aliases={"mf.bitwise_not": mf.bitwise_not, "Tensor.bitwise_not": _method("bitwise_not")},
           samples=(S("bitwise_not", index((3, 4), 16)), S("bitwise_not_bool", index((33,), 2),
                                                          fn=lambda a: ~(a > 0), ref=lambda a: ~(a > 0))),
           errors=(E("bitwise_not_float", lambda: ~t(2), TypeError,
                     "bitwise_not: only integer and bool tensors are supported, got float32"),)),
    # ---- where the nonzero values are
    OpInfo("nonzero", _method("nonzero"), lambda a: np.argwhere(a), spelled="Tensor.nonzero",
           aliases={"mf.nonzero": mf.nonzero, "mf.argwhere": mf.argwhere, "Tensor.argwhere": _method("argwhere")},
           grad=False, dtypes=NO_GRAD_RESULT, torch=SAME, samples=(
               S("nonzero", index((3, 4), 3)), S("nonzero_odd", index((2, 5, 7), 2)),
               S("nonzero_float", (4,)), S("nonzero_none", index((3, 2), 1)))),
    OpInfo("count_nonzero", mf.count_nonzero, lambda a, dim=None: np.count_nonzero(a, axis=dim),
           spelled="mf.count_nonzero", aliases={"Tensor.count_nonzero": _method("count_nonzero")}, grad=False,
           dtypes=NO_GRAD_RESULT, torch=lambda T, a, **kw: T.count_nonzero(a, **kw), samples=(
               S("count_nonzero", index((3, 4), 3)), S("count_nonzero_dim", index((3, 4), 2), dim=1),
               S("count_nonzero_dims", index((3, 5, 2), 2), dim=(0, -1)), S("count_nonzero_0d", index((), 2))),
           errors=(E("count_nonzero_dim", lambda: mf.count_nonzero(t(2, 3), dim=2), IndexError,
                     "count_nonzero: dimension 2 out of range"),
                   E("count_nonzero_repeated", lambda: mf.count_nonzero(t(2, 3), dim=(1, -1)), RuntimeError,
                     "names a dimension more than once"))),
    # ---- where with Python scalars on either side (the two-tensor form is the "where" entry above)
    OpInfo("where_scalar", lambda c, a, scalar=0.0: mf.where(c > 0, a, scalar),
           lambda c, a, scalar=0.0: np.where(c > 0, a, scalar), spelled="mf.where",
           torch=lambda T, c, a, scalar=0.0: T.where(c > 0, a, scalar),
           aliases={"Tensor.where": lambda c, a, scalar=0.0: a.where(c > 0, scalar)}, samples=(
               S("where_scalar_other", distinct((3, 4)), (3, 4)), S("where_scalar_broadcast", distinct((5, 1)), (33,),
                                                                  scalar=-2.5),
               S("where_scalar_input", distinct((3, 4)), (4,), fn=lambda c, a: mf.where(c > 0, 1.5, a),
                 ref=lambda c, a: np.where(c > 0, 1.5, a)),
               S("where_scalars_both", distinct((3, 4)), fn=lambda c: mf.where(c > 0, 1.0, -1.0) * c,
                 ref=lambda c: np.where(c > 0, 1.0, -1.0) * c)),
           errors=(E("where_one_branch", lambda: mf.where(t(2) > 0, t(2)), TypeError, "where: expected both"),
                   E("where_string", lambda: mf.where(t(2) > 0, t(2), "0"), TypeError,
                     "where: input and other must be Tensors or real Python scalars, got str"))),
    # ---- ranges and random permutations: their bad inputs (values are tested in tests/test_pointwise.py)
    OpInfo("linspace", mf.linspace, None, samples=(), grad=False, spelled="mf.linspace", errors=(
        E("linspace_negative_steps", lambda: mf.linspace(0, 1, -1), RuntimeError,
          "linspace: number of steps must be non-negative, got -1"),
        E("linspace_float_steps", lambda: mf.linspace(0, 1, 2.5), TypeError, "linspace: steps must be an int"),
        E("logspace_negative_steps", lambda: mf.logspace(0, 1, -3), RuntimeError, "logspace: number of steps"))),
    OpInfo("randperm", mf.randperm, None, samples=(), grad=False, spelled="mf.randperm", errors=(
        E("randperm_negative", lambda: mf.randperm(-1), RuntimeError, "randperm: n must be non-negative, got -1"),
        E("randperm_float", lambda: mf.randperm(3.0), TypeError, "randperm: n must be an int"))),
    # ---- the in-place forms' dtype rule
    OpInfo("inplace_dtypes", _method("sin_"), None, samples=(), grad=False, spelled="Tensor.sin_", errors=(
        E("sin_int", lambda: mf.tensor([1, 2]).sin_(), RuntimeError, "sin_: result type float32 can't be cast"),
        E("frac_int", lambda: mf.tensor([1, 2]).frac(), RuntimeError, "frac: only floating-point tensors"),
        E("sin_leaf", lambda: t(2, requires_grad=True).sin_(), RuntimeError, "sin_: a leaf Variable that requires grad"),
        E("ior_float", lambda: mf.tensor([1, 2]).__ior__(mf.tensor([0.5, 1.0])), TypeError, "bitwise_or: only integer"),
        E("iand_broadcast", lambda: mf.tensor([1, 2]).__iand__(mf.tensor([[1, 2], [3, 4]])), RuntimeError,
          r"__iand__: output with shape \(2,\) doesn't match the broadcast shape \(2, 2\)"))),
]


# ---------------------------------------------------------------- indexing, gathering, sorting, scans and the reductions beyond sum/mean (minifused/ops/index.py)

def _const(a, data, dtype):
    """``data`` as a tensor of ``a``'s kind (ours or torch's) on its device: the fixed index / mask of a sample."""
    if isinstance(a, mf.Tensor):
        return mf.tensor(np.asarray(data, dtype), device=a.device)
    return _torch().tensor(np.asarray(data, dtype), device=a.device)


def _ix(a, data):
    return _const(a, data, np.int64)


def _mask(a, data):
    return _const(a, data, np.bool_)


def _grid_np(index, dim):
    return tuple(index if d == dim else np.arange(n).reshape([-1 if i == d else 1 for i in range(index.ndim)])
                 for d, n in enumerate(index.shape))


def gather_ref(a, index, dim):
    if a.ndim == 0:
        return a.reshape(1)[index.reshape(-1)].reshape(index.shape)
    return a[_grid_np(index, dim % a.ndim)]


def scatter_ref(a, src, dim, index, reduce=None):
    index, out = np.asarray(index), a.copy()
    grid = _grid_np(index, dim % a.ndim)
    part = src[tuple(slice(0, n) for n in index.shape)] if np.ndim(src) else np.broadcast_to(src, index.shape)
    if reduce == "add":
        np.add.at(out, grid, part)
    else:
        out[grid] = part
    return out


def scatter_reduce_ref(a, src, dim, index, reduce, include_self=True):
    """PyTorch's scatter_reduce, one scattered value at a time (float64)."""
    index, out = np.asarray(index), a.astype(np.float64)
    dim %= a.ndim
    values = {}
    for pos in np.ndindex(*index.shape):
        target = pos[:dim] + (int(index[pos]),) + pos[dim + 1:]
        values.setdefault(target, [out[target]] if include_self else []).append(src[pos])
    for target, vs in values.items():
        out[target] = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}[reduce](vs)
    return out


def _rows01(t):
    """``index_put``'s indices for rows 0, 0 and 1 of ``t`` (row 0 twice: accumulated)."""
    return (mf.tensor([0, 0, 1], device=t.device),)


def _index_put_ref(a, v, rows, cols, accumulate):
    out = a.astype(np.float64)
    values = np.broadcast_to(v, (len(rows),))
    if accumulate:
        np.add.at(out, (np.asarray(rows), np.asarray(cols)), values)
    else:
        out[np.asarray(rows), np.asarray(cols)] = values
    return out


def index_add_ref(a, index, src, dim, alpha=1):
    out = a.copy()
    np.add.at(out, (slice(None),) * (dim % a.ndim) + (index,), alpha * src)
    return out


def index_copy_ref(a, index, src, dim):
    out = a.copy()
    out[(slice(None),) * (dim % a.ndim) + (index,)] = src
    return out


def _distinct_last(t):
    n = t.shape[-1]
    return mf.tensor(np.array([n - 1, 0, n // 2][:min(3, n)]), device=t.device)


def _halves_at(t):
    """0.5 for each of :func:`_distinct_last`'s positions along t's last dim."""
    return _full_like(t, (*t.shape[:-1], len(_distinct_last(t))), 0.5)


def index_fill_ref(a, index, dim, value):
    out = a.copy()
    out[(slice(None),) * (dim % a.ndim) + (index,)] = value
    return out


def take_along_dim_ref(a, index, dim=None):
    if dim is None:
        return a.reshape(-1)[index.reshape(-1)]
    shape = np.broadcast_shapes(*[tuple(1 if i == dim % a.ndim else n for i, n in enumerate(s))
                                  for s in (a.shape, index.shape)])
    a = np.broadcast_to(a, tuple(a.shape[i] if i == dim % a.ndim else n for i, n in enumerate(shape)))
    index = np.broadcast_to(index, tuple(index.shape[i] if i == dim % a.ndim else n for i, n in enumerate(shape)))
    return np.take_along_axis(a, index, dim)


def masked_scatter_ref(a, src, mask):
    shape = np.broadcast_shapes(a.shape, np.shape(mask))
    out, m = np.broadcast_to(a, shape).copy(), np.broadcast_to(mask, shape)
    out[m] = src.reshape(-1)[:m.sum()]
    return out


def sort_ref(a, dim=-1, descending=False):
    if a.ndim == 0:
        return a
    return -np.sort(-a, axis=dim) if descending else np.sort(a, axis=dim)


def topk_ref(a, k, dim=-1, largest=True):
    s = sort_ref(a, dim, largest)
    return s if a.ndim == 0 else np.take(s, np.arange(k), axis=dim)


def kthvalue_ref(a, k, dim=-1, keepdim=False):
    if a.ndim == 0:
        return a
    return np.take(np.sort(a, axis=dim), [k - 1] if keepdim else k - 1, axis=dim)


def nanmedian_ref(a, dim=None, keepdim=False):
    """The lower median of the non-NaN values (NumPy's nanmedian averages the two middle ones)."""
    if dim is None:
        v = np.sort(a[~np.isnan(a)])
        return v[(len(v) - 1) // 2] if len(v) else np.nan
    rows = np.moveaxis(a, dim, -1)
    out = np.empty(rows.shape[:-1])
    for pos in np.ndindex(*rows.shape[:-1]):
        out[pos] = nanmedian_ref(rows[pos])
    return np.expand_dims(out, dim) if keepdim else out


def _with_nans(a):
    """``a`` with a NaN at every 3rd flat position (a row of NaNs where the shape makes one)."""
    out = np.array(a, dtype=a.dtype)
    out.reshape(-1)[::3] = np.nan
    return out


def mode_ref(a, dim=-1, keepdim=False):
    """Each row's most frequent value, the smallest of the equally frequent."""
    rows = np.moveaxis(a, dim, -1)
    out = np.empty(rows.shape[:-1])
    for pos in np.ndindex(*rows.shape[:-1]):
        values, counts = np.unique(rows[pos], return_counts=True)
        out[pos] = values[np.argmax(counts)]
    return np.expand_dims(out, dim) if keepdim else out


def histc_ref(a, bins=100, min=0, max=0):  # noqa: A002
    lo, hi = (a.min(), a.max()) if min == max else (min, max)
    lo, hi = (lo - 1, hi + 1) if lo == hi else (lo, hi)
    return np.histogram(a, bins, range=(lo, hi))[0].astype(np.float64)


def searchsorted_ref(seq, values, right=False):
    side = "right" if right else "left"
    if seq.ndim == 1:
        return np.searchsorted(seq, values, side=side)
    return np.stack([np.searchsorted(r, v, side=side) for r, v in zip(seq, values)])


def _sorted_rows(shape):
    return mf.tensor(np.sort(np.random.default_rng(5).standard_normal(shape), axis=-1))


def _last_index(t, k=3):
    """An index along t's last dimension, k distinct positions per row (in-place forms take any shape)."""
    n = t.shape[-1]
    rows = np.broadcast_to(np.arange(n - 1, n - 1 - min(k, n), -1), (*t.shape[:-1], min(k, n)))
    return mf.tensor(np.ascontiguousarray(rows), device=t.device)


def _row(t):
    """A vector along t's last dimension, in t's dtype and on its device, away from zero (in-place arithmetic's
    other operand, broadcast over t)."""
    n = t.shape[-1] if t.ndim else 1
    return mf.tensor(np.linspace(0.5, 1.5, n), dtype=t.dtype, device=t.device).reshape(t.shape[-1:] if t.ndim else ())


def _last_vector(t):
    n = t.shape[-1]
    return mf.tensor(np.array([n - 1, 0, n // 2, 0][:max(1, min(4, n))]), device=t.device)


def _full_like(t, shape, value):
    return mf.full(shape, value, dtype=t.dtype, device=t.device)


_M34 = np.array([[True, False, False, True], [False, False, False, False], [True, True, False, True]])
_I35 = [[0, 2, 4, 1], [3, 1, 0, 2], [4, 3, 2, 1]]
_I35R = [[0, 2, 2, 1], [3, 3, 3, 2], [4, 0, 4, 1]]  # (repeated targets: reductions of several values)

INDEX_OPS = [
    OpInfo("gather", lambda a, i, dim: mf.gather(a, dim, i), lambda a, i, dim: gather_ref(a, i, dim),
           spelled="mf.gather", aliases={"Tensor.gather": lambda a, i, dim: a.gather(dim, i)},
           torch=lambda T, a, i, dim: T.gather(a, dim, i), samples=(
               S("gather", (3, 5), index((3, 4), 5), dim=1),
               S("gather_dim0_smaller_index", (4, 3), index((6, 2), 4), dim=0),
               S("gather_3d_negative_dim", (2, 3, 4), index((2, 3, 7), 4), dim=-1),
               S("gather_size1", (1, 1), index((1, 3), 1), dim=1), S("gather_0d", (), index((), 1), dim=0)),
           errors=(E("gather_negative_index", lambda: mf.gather(t(2, 4), 1, mf.tensor([[-1, 0]])), RuntimeError,
                     "gather: index -1 is out of bounds for dimension 1 with size 4"),
                   E("index_select_negative_index", lambda: mf.index_select(t(2, 4), 1, mf.tensor([-1])), IndexError,
                     "index_select: index -1 is out of bounds"),
                   E("scatter_add_negative_index", lambda: t(2, 4).scatter_add(1, mf.tensor([[-1]]), t(1, 1)),
                     RuntimeError, "scatter_add: index -1 is out of bounds"),
                   E("gather_index_dtype", lambda: mf.gather(t(2, 3), 1, mf.tensor([[0]], dtype=mf.int16)),
                     RuntimeError, "gather: expected dtype int64 or int32 for index, got int16"),
                   E("take_along_dim_index_dtype", lambda: mf.take_along_dim(t(2, 3), mf.tensor([[0]], dtype=mf.int32),
                                                                             1),
                     RuntimeError, "take_along_dim: expected int64 indices, got int32"),
                   E("gather_index_range", lambda: mf.gather(t(2, 3), 1, mf.tensor([[0, 5]])), RuntimeError,
                     "gather: index 5 is out of bounds for dimension 1 with size 3"),
                   E("gather_index_dims", lambda: mf.gather(t(2, 3), 1, mf.tensor([0, 1])), RuntimeError,
                     "gather: index must have the same number of dimensions as the input"),
                   E("gather_index_larger", lambda: mf.gather(t(2, 3), 1, mf.tensor([[0], [1], [0]])),
                     RuntimeError, r"gather: index of shape \(3, 1\) must be no larger than the input"),
                   E("gather_dim_range", lambda: mf.gather(t(2, 3), 2, mf.tensor([[0]])), IndexError,
                     "gather: dim 2 is out of range"),
                   E("gather_dim_none", lambda: mf.gather(t(2, 3), None, mf.tensor([[0]])), TypeError,
                     "gather: dim must be an int, got NoneType"),
                   E("gather_index_not_tensor", lambda: mf.gather(t(2, 3), 1, [[0]]), TypeError,
                     "gather: expected index to be a Tensor"))),
    OpInfo("scatter", lambda a, s, dim, index, reduce=None: mf.scatter(a, dim, _ix(a, index), s, reduce=reduce),
           scatter_ref, spelled="mf.scatter",
           aliases={"Tensor.scatter": lambda a, s, dim, index, reduce=None: a.scatter(dim, _ix(a, index), s,
                                                                                     reduce=reduce)},
           torch=lambda T, a, s, dim, index, reduce=None: (T.scatter_add if reduce == "add" else T.scatter)(
               a, dim, _ix(a, index), s),
           samples=(
               S("scatter", (3, 5), (3, 4), dim=1, index=_I35),
               S("scatter_dim0", (4, 3), (2, 3), dim=0, index=[[0, 1, 2], [3, 0, 1]]),
               # a src larger than index (PyTorch's backward takes only src.shape == index.shape: a fn sample)
               S("scatter_src_larger", (4, 3), (3, 3), fn=lambda a, s: a.scatter(0, _ix(a, [[0, 1, 2], [3, 0, 1]]), s),
                 ref=lambda a, s: scatter_ref(a, s, 0, [[0, 1, 2], [3, 0, 1]])),
               S("scatter_reduce_add", (3, 5), (3, 4), dim=1, index=[[0, 0, 4, 4], [1, 1, 1, 1], [2, 3, 2, 3]],
                 reduce="add"),
               S("scatter_size1", (1, 1), (1, 1), dim=0, index=[[0]]),
               S("scatter_value", (3, 5), fn=lambda a: a.scatter(1, _ix(a, _I35), value=2.5),
                 ref=lambda a: scatter_ref(a, 2.5, 1, _I35)),
               S("scatter_0d", (), (), fn=lambda a, s: mf.scatter(a, 0, _ix(a, 0), s),
                 ref=lambda a, s: s.copy())),
           inplace=(InPlace("scatter_", lambda x: x.scatter_(-1, _last_index(x), 0.5),
                            lambda x: x.scatter(-1, _last_index(x), 0.5), op="scatter_"),),
           errors=(E("scatter_src_small", lambda: mf.scatter(t(3, 5), 1, mf.tensor([[0, 1, 2]]), t(1, 2)),
                     RuntimeError, r"scatter: index of shape \(1, 3\) must be no larger than src of shape \(1, 2\)"),
                   E("scatter_src_dtype", lambda: mf.scatter(t(2, 3), 1, mf.tensor([[0]]), t(1, 1, dtype=mf.float64)),
                     RuntimeError, "scatter: expected src of the input's dtype float32, got float64"),
                   E("scatter_reduce_name", lambda: mf.scatter(t(2, 3), 1, mf.tensor([[0]]), 1.0, reduce="max"),
                     RuntimeError, "scatter: reduce must be None, 'add' or 'multiply'"),
                   E("scatter_index_range", lambda: mf.scatter(t(2, 3), 0, mf.tensor([[2]]), 1.0), RuntimeError,
                     "scatter: index 2 is out of bounds for dimension 0 with size 2"),
                   E("scatter_inplace_leaf", lambda: t(2, 3, requires_grad=True).scatter_(1, mf.tensor([[0]]), 1.0),
                     RuntimeError, "scatter_: a leaf Variable that requires grad"))),
    OpInfo("scatter_reduce", lambda a, s, dim, index, reduce, **kw: mf.scatter_reduce(a, dim, _ix(a, index), s, reduce,
                                                                                      **kw),
           scatter_reduce_ref, spelled="mf.scatter_reduce",
           aliases={"Tensor.scatter_reduce": lambda a, s, dim, index, reduce, **kw: a.scatter_reduce(
               dim, _ix(a, index), s, reduce, **kw)},
           torch=lambda T, a, s, dim, index, reduce, **kw: T.scatter_reduce(
               a, dim, T.tensor(index, device=a.device), s, reduce, **kw), samples=(
               S("scatter_reduce_sum", distinct((3, 5)), distinct((3, 4)), dim=1, index=_I35R, reduce="sum"),
               S("scatter_reduce_mean_without_self", distinct((3, 5)), distinct((3, 4)), dim=1, index=_I35R,
                 reduce="mean", include_self=False),
               S("scatter_reduce_amax", distinct((3, 5)), distinct((3, 4)), dim=1, index=_I35R, reduce="amax"),
               S("scatter_reduce_amin_without_self", distinct((4, 3)), distinct((2, 3)), dim=0,
                 index=[[0, 1, 0], [3, 1, 0]], reduce="amin", include_self=False),
               S("scatter_reduce_mean_dim0", distinct((4, 3)), distinct((3, 3)), dim=0,
                 index=[[0, 1, 0], [3, 1, 0], [0, 0, 0]], reduce="mean")),
           inplace=(InPlace("scatter_reduce_",
                            lambda x: x.scatter_reduce_(-1, _last_index(x), mf.full_like(x, 0.3), "amax"),
                            lambda x: x.scatter_reduce(-1, _last_index(x), mf.full_like(x, 0.3), "amax"),
                            op="scatter_reduce_"),),
           errors=(E("scatter_reduce_name", lambda: mf.scatter_reduce(t(2, 3), 1, mf.tensor([[0]]), t(1, 1), "max"),
                     ValueError, "reduce argument must be either sum, prod, mean, amax or amin"),
                   E("scatter_reduce_src", lambda: mf.scatter_reduce(t(2, 3), 1, mf.tensor([[0]]), 1.0, "sum"),
                     TypeError, "scatter_reduce: src must be a Tensor"))),
    OpInfo("index_put", lambda a, v, rows, cols, **kw: mf.index_put(a, (_ix(a, rows), _ix(a, cols)), v, **kw),
           lambda a, v, rows, cols, accumulate=False: _index_put_ref(a, v, rows, cols, accumulate),
           spelled="mf.index_put", aliases={"Tensor.index_put": lambda a, v, rows, cols, **kw: a.index_put(
               (_ix(a, rows), _ix(a, cols)), v, **kw)},
           torch=lambda T, a, v, rows, cols, **kw: T.index_put(
               a, (T.tensor(rows, device=a.device), T.tensor(cols, device=a.device)), v, **kw), samples=(
               S("index_put", (3, 4), (3,), rows=[0, 2, 1], cols=[3, 0, 1]),
               S("index_put_accumulate", (3, 4), (5,), rows=[0, 2, 2, 0, 2], cols=[1, 0, 0, 1, 3], accumulate=True),
               S("index_put_accumulate_broadcast", (3, 4), (), rows=[1, 1], cols=[2, 2], accumulate=True)),
           inplace=(InPlace("index_put_", lambda x: x.index_put_(_rows01(x), mf.full_like(x[0], 0.5), accumulate=True),
                            lambda x: x.index_put(_rows01(x), mf.full_like(x[0], 0.5), accumulate=True),
                            op="index_put_"),),
           errors=(E("index_put_dtype", lambda: mf.index_put(t(3), (mf.tensor([1]),), mf.tensor([1])), RuntimeError,
                     "index put requires the source and destination dtypes match"),
                   E("index_put_bounds", lambda: t(3).index_put_((mf.tensor([3]),), t(1), accumulate=True), IndexError,
                     "index_put_: index 3 is out of bounds for dimension 0 with size 3"))),
    OpInfo("scatter_add", lambda a, i, s, dim: mf.scatter_add(a, dim, i, s),
           lambda a, i, s, dim: scatter_ref(a, s, dim, i, "add"), spelled="mf.scatter_add",
           aliases={"Tensor.scatter_add": lambda a, i, s, dim: a.scatter_add(dim, i, s)},
           torch=lambda T, a, i, s, dim: T.scatter_add(a, dim, i, s), samples=(
               S("scatter_add", (3, 5), index((3, 4), 5), (3, 4), dim=1),
               S("scatter_add_dim0", (4, 3), index((5, 2), 4), (5, 2), dim=0),
               S("scatter_add_src_larger", (4, 3), index((5, 2), 4), (6, 3),
                 fn=lambda a, i, s: mf.scatter_add(a, 0, i, s), ref=lambda a, i, s: scatter_ref(a, s, 0, i, "add")),
               S("scatter_add_3d", (2, 3, 4), index((2, 3, 4), 3), (2, 3, 4), dim=1)),
           inplace=(InPlace("scatter_add_", lambda x: x.scatter_add_(-1, _last_index(x),
                                                                    _full_like(x, _last_index(x).shape, 0.5)),
                            lambda x: x.scatter_add(-1, _last_index(x), _full_like(x, _last_index(x).shape, 0.5)),
                            op="scatter_add_"),),
           errors=(E("scatter_add_src", lambda: mf.scatter_add(t(2, 3), 1, mf.tensor([[0]]), 1.0), TypeError,
                     "scatter_add: expected src to be a Tensor"),)),
    OpInfo("index_select", lambda a, i, dim: mf.index_select(a, dim, i), lambda a, i, dim: np.take(a, i, axis=dim),
           spelled="mf.index_select", aliases={"Tensor.index_select": lambda a, i, dim: a.index_select(dim, i)},
           torch=lambda T, a, i, dim: T.index_select(a, dim, i), samples=(
               S("index_select", (5, 3), index((7,), 5), dim=0), S("index_select_last", (2, 3, 4), index((2,), 4), dim=-1),
               S("index_select_size1", (1,), index((3,), 1), dim=0)),
           errors=(E("index_select_matrix", lambda: mf.index_select(t(3), 0, mf.tensor([[0]])), IndexError,
                     "index_select: index must be a vector"),
                   E("index_select_float", lambda: mf.index_select(t(3), 0, mf.tensor([0.0])), RuntimeError,
                     "index_select: expected dtype int32 or int64 for index, got float32"),
                   E("index_select_range", lambda: mf.index_select(t(3, 2), 0, mf.tensor([1, -4])), IndexError,
                     "index_select: index -4 is out of bounds for dimension 0 with size 3"))),
    OpInfo("index_add", lambda a, i, s, dim, alpha=1: mf.index_add(a, dim, i, s, alpha=alpha), index_add_ref,
           spelled="mf.index_add", aliases={"Tensor.index_add": lambda a, i, s, dim, alpha=1: a.index_add(dim, i, s, alpha=alpha)},
           torch=lambda T, a, i, s, dim, alpha=1: T.index_add(a, dim, i, s, alpha=alpha), samples=(
               S("index_add", (5, 3), index((4,), 5), (4, 3), dim=0),
               S("index_add_alpha_last", (2, 3, 4), index((6,), 4), (2, 3, 6), dim=2, alpha=-0.5)),
           inplace=(InPlace("index_add_", lambda x: x.index_add_(-1, _last_vector(x),
                                                                _full_like(x, (*x.shape[:-1], len(_last_vector(x))), 0.5)),
                            lambda x: x.index_add(-1, _last_vector(x),
                                                  _full_like(x, (*x.shape[:-1], len(_last_vector(x))), 0.5)),
                            op="index_add_"),),
           errors=(E("index_add_source_shape", lambda: mf.index_add(t(3, 2), 0, mf.tensor([0, 1]), t(3, 2)),
                     RuntimeError, r"index_add: source must have shape \(2, 2\)"),)),
    OpInfo("index_copy", lambda a, s, dim, index: mf.index_copy(a, dim, _ix(a, index), s),
           lambda a, s, dim, index: index_copy_ref(a, np.array(index), s, dim), spelled="mf.index_copy",
           aliases={"Tensor.index_copy": lambda a, s, dim, index: a.index_copy(dim, _ix(a, index), s)},
           torch=lambda T, a, s, dim, index: T.index_copy(a, dim, T.tensor(index, device=a.device), s), samples=(
               S("index_copy", (5, 3), (3, 3), dim=0, index=[4, 0, 2]),
               S("index_copy_last", (2, 3, 4), (2, 3, 2), dim=-1, index=[3, 1])),
           inplace=(InPlace("index_copy_", lambda x: x.index_copy_(-1, _distinct_last(x), _halves_at(x)),
                            lambda x: x.index_copy(-1, _distinct_last(x), _halves_at(x)), op="setitem"),),
           errors=(E("index_copy_dtype",
                     lambda: mf.index_copy(t(3, 2), 0, mf.tensor([0]), mf.ones(1, 2, dtype=mf.float64)), RuntimeError,
                     "index_copy_: self and source expected to have the same dtype"),)),
    OpInfo("sum_to_size", lambda a, size: a.sum_to_size(size),
           lambda a, size: a.sum(axis=tuple(range(a.ndim - len(size))) + tuple(
               a.ndim - len(size) + i for i, n in enumerate(size) if n == 1 and a.shape[a.ndim - len(size) + i] != 1),
               keepdims=True).reshape(size),
           spelled="Tensor.sum_to_size", torch=SAME, samples=(
               S("sum_to_size", (2, 3, 4), size=(3, 1)), S("sum_to_size_same", (2, 3), size=(2, 3)),
               S("sum_to_size_lead", (2, 3, 4), size=(1, 3, 4))),
           errors=(E("sum_to_size_bad", lambda: t(2, 3).sum_to_size(2), RuntimeError,
                     r"sum_to_size: size \[2\] is not expandable to size \[2, 3\]"),)),
    OpInfo("index_fill", lambda a, i, dim, value: mf.index_fill(a, dim, i, value), index_fill_ref,
           spelled="mf.index_fill", aliases={"Tensor.index_fill": lambda a, i, dim, value: a.index_fill(dim, i, value)},
           torch=lambda T, a, i, dim, value: T.index_fill(a, dim, i, value), samples=(
               S("index_fill", (4, 5), index((3,), 5), dim=1, value=-2.0),
               S("index_fill_tensor_value", (4, 3), (), fn=lambda a, v: a.index_fill(0, _ix(a, [3, 0, 3]), v),
                 ref=lambda a, v: index_fill_ref(a, np.array([3, 0, 3]), 0, v))),
           inplace=(InPlace("index_fill_", lambda x: x.index_fill_(-1, _last_vector(x), 0.5),
                            lambda x: x.index_fill(-1, _last_vector(x), 0.5), op="index_fill_"),),
           errors=(E("index_fill_value_1d", lambda: mf.index_fill(t(3), 0, mf.tensor([0]), t(2)), RuntimeError,
                     "index_fill: only supports a 0-dimensional value tensor"),)),
    OpInfo("take_along_dim", lambda a, i, dim=None: mf.take_along_dim(a, i, dim), take_along_dim_ref,
           spelled="mf.take_along_dim", aliases={"Tensor.take_along_dim": lambda a, i, dim=None: a.take_along_dim(i, dim)},
           torch=lambda T, a, i, dim=None: T.take_along_dim(a, i, dim=dim), samples=(
               S("take_along_dim", (3, 5), index((3, 2), 5), dim=1),
               S("take_along_dim_broadcast", (3, 1, 5), index((1, 4, 2), 5), dim=-1),
               S("take_along_dim_flat", (3, 4), index((5,), 12))),
           errors=(E("take_along_dim_ndim", lambda: mf.take_along_dim(t(3, 4), mf.tensor([0]), 1), RuntimeError,
                     "take_along_dim: input and indices must have the same number of dimensions"),)),
    OpInfo("masked_fill", lambda a, mask, value: mf.masked_fill(a, _mask(a, mask), value),
           lambda a, mask, value: np.where(mask, value, a), spelled="mf.masked_fill",
           aliases={"Tensor.masked_fill": lambda a, mask, value: a.masked_fill(_mask(a, mask), value)},
           torch=lambda T, a, mask, value: T.masked_fill(a, _mask(a, mask), value), samples=(
               S("masked_fill", (3, 4), mask=_M34, value=-1.5),
               S("masked_fill_row_mask", (3, 4), mask=_M34[0], value=0.0),
               S("masked_fill_mask_broadcasts_up", (3, 1), mask=_M34[None], value=7.0),
               S("masked_fill_0d", (), mask=np.array(True), value=2.0),
               S("masked_fill_tensor_value", (3, 4), (), fn=lambda a, v: a.masked_fill(_mask(a, _M34), v),
                 ref=lambda a, v: np.where(_M34, v, a))),
           inplace=(InPlace("masked_fill_", lambda x: x.masked_fill_(x > 0, 0.25),
                            lambda x: x.masked_fill(x > 0, 0.25), op="masked_fill_"),),
           errors=(E("masked_fill_float_mask", lambda: t(2, 3).masked_fill(t(2, 3), 0.0), RuntimeError,
                     "masked_fill: expected a boolean mask, got dtype float32"),
                   E("masked_fill_value_1d", lambda: t(2, 3).masked_fill(mf.tensor([True, False, True]), t(3)),
                     RuntimeError, "masked_fill: only supports a 0-dimensional value tensor"),
                   E("masked_fill_shapes", lambda: t(2, 3).masked_fill(mf.tensor([True, False]), 1.0), ValueError,
                     r"masked_fill: shapes \(2, 3\) and \(2,\) cannot be broadcast"),
                   E("masked_fill_inplace_grows", lambda: t(3).masked_fill_(mf.ones(2, 3, dtype=mf.bool), 1.0),
                     RuntimeError, r"masked_fill_: mask of shape \(2, 3\) does not broadcast to the input's shape"))),
    OpInfo("masked_select", lambda a, mask: mf.masked_select(a, _mask(a, mask)), lambda a, mask: np.broadcast_to(
        a, np.broadcast_shapes(a.shape, np.shape(mask)))[np.broadcast_to(mask, np.broadcast_shapes(a.shape, np.shape(mask)))],
           spelled="mf.masked_select", aliases={"Tensor.masked_select": lambda a, mask: a.masked_select(_mask(a, mask))},
           torch=lambda T, a, mask: T.masked_select(a, _mask(a, mask)), samples=(
               S("masked_select", (3, 4), mask=_M34), S("masked_select_broadcast", (3, 1), mask=_M34),
               S("masked_select_none", (2, 4), mask=_M34[1]), S("masked_select_0d", (), mask=np.array(True))),
           errors=(E("masked_select_int_mask", lambda: mf.masked_select(t(3), mf.tensor([1, 0, 1])), RuntimeError,
                     "masked_select: expected a boolean mask, got dtype int64"),)),
    OpInfo("masked_scatter", lambda a, s, mask: mf.masked_scatter(a, _mask(a, mask), s), masked_scatter_ref,
           spelled="mf.masked_scatter", aliases={"Tensor.masked_scatter": lambda a, s, mask: a.masked_scatter(_mask(a, mask), s)},
           torch=lambda T, a, s, mask: T.masked_scatter(a, _mask(a, mask), s), samples=(
               S("masked_scatter", (3, 4), (2, 5), mask=_M34), S("masked_scatter_broadcast", (3, 1), (13,), mask=_M34)),
           inplace=(InPlace("masked_scatter_", lambda x: x.masked_scatter_(x > 0, _full_like(x, x.shape, 0.5)),
                            lambda x: x.masked_scatter(x > 0, _full_like(x, x.shape, 0.5)), op="masked_scatter_"),),
           errors=(E("masked_scatter_source_small", lambda: mf.masked_scatter(t(3), mf.ones(3, dtype=mf.bool), t(2)),
                     RuntimeError, "masked_scatter: source has 2 elements, the mask selects 3"),)),
    OpInfo("sort", lambda a, dim=-1, descending=False: mf.sort(a, dim, descending).values, sort_ref, spelled="mf.sort",
           aliases={"Tensor.sort": lambda a, dim=-1, descending=False: a.sort(dim=dim, descending=descending)[0]},
           torch=lambda T, a, dim=-1, descending=False: T.sort(a, dim=dim, descending=descending).values, samples=(
               S("sort", distinct((3, 7))), S("sort_dim0_descending", distinct((5, 2)), dim=0, descending=True),
               S("sort_3d_middle", distinct((2, 5, 3)), dim=1), S("sort_size1", distinct((4, 1))),
               S("sort_0d", distinct(())),
               S("sort_indices_gather", distinct((3, 6)), fn=lambda a: a.gather(1, a.sort(1, True).indices) * 2,
                 ref=lambda a: sort_ref(a, 1, True) * 2)),
           errors=(E("sort_dim_range", lambda: mf.sort(t(2, 3), 2), IndexError, "sort: dimension 2 out of range"),
                   E("sort_not_tensor", lambda: mf.sort([3, 1]), TypeError, "sort.*must be a Tensor|sort: expected a Tensor input"))),
    OpInfo("argsort", lambda a, dim=-1, descending=False: mf.take_along_dim(a, mf.argsort(a, dim, descending), dim),
           sort_ref, spelled="mf.argsort",
           aliases={"Tensor.argsort": lambda a, dim=-1, descending=False: a.take_along_dim(a.argsort(dim, descending), dim)},
           torch=lambda T, a, dim=-1, descending=False: T.take_along_dim(a, T.argsort(a, dim=dim, descending=descending),
                                                                         dim), samples=(
               S("argsort", distinct((4, 6))), S("argsort_dim0_descending", distinct((7, 3)), dim=0, descending=True)),
           errors=(E("argsort_dim_range", lambda: mf.argsort(t(3), -2), IndexError, "argsort: dimension -2 out of range"),)),
    OpInfo("msort", mf.msort, lambda a: np.sort(a, axis=0), spelled="mf.msort",
           aliases={"Tensor.msort": lambda a: a.msort()}, torch=lambda T, a: T.sort(a, dim=0).values,
           samples=(S("msort", distinct((5, 3))), S("msort_1d", distinct((9,))))),
    OpInfo("topk", lambda a, k, dim=-1, largest=True: mf.topk(a, k, dim, largest).values, topk_ref, spelled="mf.topk",
           aliases={"Tensor.topk": lambda a, k, dim=-1, largest=True: a.topk(k, dim=dim, largest=largest).values},
           torch=lambda T, a, k, dim=-1, largest=True: T.topk(a, k, dim=dim, largest=largest).values, samples=(
               S("topk", distinct((3, 9)), k=4), S("topk_smallest_dim0", distinct((6, 2)), k=2, dim=0, largest=False),
               S("topk_all", distinct((5,)), k=5), S("topk_none", distinct((2, 5)), k=0), S("topk_0d", distinct(()), k=1),
               S("topk_indices", distinct((4, 5)), fn=lambda a: a.gather(1, a.topk(2).indices),
                 ref=lambda a: topk_ref(a, 2))),
           errors=(E("topk_k_range", lambda: mf.topk(t(5), 7), RuntimeError, r"topk: k must be in \[0, 5\], got 7"),
                   E("topk_k_negative", lambda: t(2, 5).topk(-1), RuntimeError, r"topk: k must be in \[0, 5\], got -1"),
                   E("topk_dim_range", lambda: t(2, 5).topk(1, dim=2), IndexError, "topk: dimension 2 out of range"),
                   E("topk_bool", lambda: mf.tensor([True, False]).topk(1), RuntimeError,
                     "topk: expected a tensor of a numeric dtype, got a bool tensor"),
                   E("topk_bool_empty_k0", lambda: mf.topk(mf.zeros(0, dtype=mf.bool), 0), RuntimeError,
                     "topk: expected a tensor of a numeric dtype, got a bool tensor"))),
    OpInfo("kthvalue", lambda a, k, dim=-1, keepdim=False: mf.kthvalue(a, k, dim, keepdim).values, kthvalue_ref,
           spelled="mf.kthvalue",
           aliases={"Tensor.kthvalue": lambda a, k, dim=-1, keepdim=False: a.kthvalue(k, dim, keepdim).values},
           torch=lambda T, a, k, dim=-1, keepdim=False: T.kthvalue(a, k, dim=dim, keepdim=keepdim).values, samples=(
               S("kthvalue", distinct((3, 7)), k=3), S("kthvalue_dim0_keepdim", distinct((5, 2)), k=5, dim=0, keepdim=True),
               S("kthvalue_0d", distinct(()), k=1)),
           errors=(E("kthvalue_k_range", lambda: mf.kthvalue(t(4), 0), RuntimeError, r"kthvalue: k must be in \[1, 4\], got 0"),)),
    OpInfo("bincount", mf.bincount, lambda i, minlength=0: np.bincount(i, minlength=minlength), spelled="mf.bincount",
           aliases={"Tensor.bincount": _method("bincount")}, grad=False, dtypes=NO_GRAD_RESULT,
           torch=lambda T, i, **kw: T.bincount(i, **kw), samples=(
               S("bincount", index((9,), 5)), S("bincount_minlength", index((4,), 3), minlength=7),
               S("bincount_weights", index((6,), 4), (6,), fn=lambda i, w: mf.bincount(i, weights=w),
                 ref=lambda i, w: np.bincount(i, weights=w))),
           errors=(E("bincount_negative", lambda: mf.bincount(mf.tensor([1, -1])), RuntimeError,
                     "bincount: bincount only supports 1-d non-negative integral inputs"),
                   E("bincount_weights_shape", lambda: mf.bincount(mf.tensor([1, 2]), weights=t(3)), RuntimeError,
                     "weights should be 1-d and have the same length as input"))),
    OpInfo("quantile", mf.quantile, lambda a, q, dim=None, keepdim=False, interpolation="linear": np.quantile(
               a, q, axis=dim, keepdims=keepdim, method=interpolation), spelled="mf.quantile",
           aliases={"Tensor.quantile": _method("quantile")}, dtypes=(np.dtype(np.float32), np.dtype(np.float64)),
           torch=lambda T, a, q, **kw: T.quantile(a, q, **kw), samples=(
               S("quantile_all", distinct((3, 5)), q=0.37),
               S("quantile_dim_keepdim", distinct((4, 7)), q=0.8, dim=1, keepdim=True),
               S("quantile_lower", distinct((6, 3)), q=0.45, dim=0, interpolation="lower"),
               S("quantile_higher", distinct((6, 3)), q=0.45, dim=-1, interpolation="higher"),
               S("quantile_midpoint", distinct((5, 4)), q=0.3, dim=0, interpolation="midpoint"),
               S("quantile_nearest", distinct((2, 5)), q=0.375, dim=1, interpolation="nearest"),
               S("quantile_q_tensor", distinct((3, 6)),
                 fn=lambda a: mf.quantile(a, mf.tensor([0.0, 0.25, 1.0], dtype=a.dtype, device=a.device), dim=1),
                 ref=lambda a: np.quantile(a, [0.0, 0.25, 1.0], axis=1))),
           errors=(E("quantile_int", lambda: mf.quantile(mf.tensor([1, 2]), 0.5), RuntimeError,
                     r"quantile\(\) input tensor must be either float or double dtype"),
                   E("quantile_q_range", lambda: mf.quantile(t(3), 1.5), RuntimeError,
                     r"quantile\(\) q must be in the range \[0, 1\] but got 1.5"),
                   E("quantile_q_dtype", lambda: mf.quantile(t(3), mf.tensor([0.5], dtype=mf.float64)), RuntimeError,
                     "q tensor must be same dtype as the input tensor"),
                   E("quantile_mode", lambda: mf.quantile(t(3), 0.5, interpolation="cubic"), RuntimeError,
                     "interpolation must be one of linear, lower, higher, midpoint or nearest"),
                   E("quantile_empty", lambda: mf.quantile(t(0), 0.5), RuntimeError,
                     "input tensor must be non-empty"))),
    OpInfo("nanquantile", mf.nanquantile, lambda a, q, dim=None, keepdim=False: np.nanquantile(
               a, q, axis=dim, keepdims=keepdim), spelled="mf.nanquantile",
           aliases={"Tensor.nanquantile": _method("nanquantile")}, dtypes=(np.dtype(np.float32), np.dtype(np.float64)),
           torch=lambda T, a, q, **kw: T.nanquantile(a, q, **kw), samples=(
               S("nanquantile", distinct((3, 5)), q=0.6, dim=1),
               S("nanquantile_all", distinct((2, 3, 4)), q=0.25))),
    OpInfo("nanmedian", lambda a, **kw: mf.nanmedian(a, **kw) if "dim" not in kw else mf.nanmedian(a, **kw).values,
           nanmedian_ref, spelled="mf.nanmedian",
           aliases={"Tensor.nanmedian": lambda a, **kw: a.nanmedian(**kw) if "dim" not in kw else
                    a.nanmedian(**kw).values},
           torch=lambda T, a, **kw: T.nanmedian(a, **kw) if "dim" not in kw else T.nanmedian(a, **kw).values,
           samples=(S("nanmedian_all", distinct((3, 5))), S("nanmedian_dim", distinct((4, 7)), dim=1),
                    S("nanmedian_dim0_keepdim", distinct((6, 3)), dim=0, keepdim=True),
                    S("nanmedian_nans", (4, 6), fn=lambda a: mf.nanmedian(mf.where(
                        mf.tensor(np.isnan(_with_nans(np.zeros((4, 6)))), device=a.device), float("nan"), a), 1).values,
                      ref=lambda a: nanmedian_ref(_with_nans(a), 1))),
           errors=(E("nanmedian_empty", lambda: mf.nanmedian(mf.zeros(0, dtype=mf.int64)), RuntimeError,
                     "input tensor cannot be empty"),)),
    OpInfo("mode", lambda a, dim=-1, keepdim=False: mf.mode(a, dim, keepdim).values, mode_ref, spelled="mf.mode",
           aliases={"Tensor.mode": lambda a, dim=-1, keepdim=False: a.mode(dim, keepdim).values},
           torch=lambda T, a, dim=-1, keepdim=False: T.mode(a, dim, keepdim).values, samples=(
               S("mode", (4, 9), fn=lambda a: mf.mode(mf.round(a), 1).values, ref=lambda a: mode_ref(np.round(a), 1)),
               S("mode_dim0_keepdim", (7, 3), fn=lambda a: mf.mode(mf.round(a * 2), 0, True).values,
                 ref=lambda a: mode_ref(np.round(a * 2), 0, True))),
           errors=(E("mode_empty_dim", lambda: mf.mode(t(2, 0)), IndexError,
                     r"mode\(\): expected a non-empty dimension"),)),
    OpInfo("histc", mf.histc, histc_ref, spelled="mf.histc", aliases={"Tensor.histc": _method("histc")}, grad=False,
           dtypes=(np.dtype(np.float32), np.dtype(np.float64)), torch=lambda T, a, **kw: T.histc(a, **kw), samples=(
               S("histc", (50,), bins=7), S("histc_range", (4, 9), bins=5, min=-1, max=1)),
           errors=(E("histc_int", lambda: mf.histc(mf.tensor([1, 2])), TypeError, "histc: expected a floating-point"),
                   E("histc_bins", lambda: mf.histc(t(3), bins=0), RuntimeError, "histc: bins must be > 0"),
                   E("histc_range", lambda: mf.histc(t(3), min=2, max=1), RuntimeError,
                     "max must be larger than min"))),
    OpInfo("searchsorted", mf.searchsorted, searchsorted_ref, spelled="mf.searchsorted", grad=False,
           dtypes=NO_GRAD_RESULT, torch=lambda T, seq, v, **kw: T.searchsorted(seq, v, **kw), samples=(
               S("searchsorted", (9,), (3, 4), fn=lambda s, v: mf.searchsorted(mf.sort(s).values, v),
                 ref=lambda s, v: np.searchsorted(np.sort(s), v)),
               S("searchsorted_rows_right", (3, 4), fn=lambda v: mf.searchsorted(
                   _sorted_rows((3, 6)).to(v.device, v.dtype), v, right=True),
                 ref=lambda v: searchsorted_ref(np.sort(np.random.default_rng(5).standard_normal((3, 6)), axis=-1),
                                                v, right=True))),
           errors=(E("searchsorted_rows", lambda: mf.searchsorted(t(2, 3), t(3, 1)), RuntimeError,
                     "the first N-1 dimensions of boundaries tensor and input value tensor must match"),
                   E("searchsorted_side", lambda: mf.searchsorted(t(3), t(2), right=True, side="left"), RuntimeError,
                     "side and right can't be set to opposites"))),
    OpInfo("bucketize", mf.bucketize, lambda v, b, right=False: np.searchsorted(b, v, "right" if right else "left"),
           spelled="mf.bucketize", grad=False, dtypes=NO_GRAD_RESULT,
           torch=lambda T, v, b, **kw: T.bucketize(v, b, **kw), samples=(
               S("bucketize", (4, 5), fn=lambda v: mf.bucketize(v, mf.tensor([-1.0, 0.0, 0.5], device=v.device)),
                 ref=lambda v: np.searchsorted([-1.0, 0.0, 0.5], v)),
               S("bucketize_right", (6,), fn=lambda v: mf.bucketize(v, mf.tensor([-0.5, 0.5], device=v.device),
                                                                    right=True),
                 ref=lambda v: np.searchsorted([-0.5, 0.5], v, "right"))),
           errors=(E("bucketize_2d", lambda: mf.bucketize(t(3), t(2, 2)), RuntimeError,
                     "boundaries tensor must be 1 dimension"),)),
    OpInfo("unique", mf.unique, lambda a: np.unique(a), spelled="mf.unique", aliases={"Tensor.unique": _method("unique")},
           grad=False, dtypes=NO_GRAD_RESULT, torch=lambda T, a: T.unique(a), samples=(
               S("unique_ints", index((4, 5), 3)), S("unique_floats", (7,)), S("unique_0d", index((), 2))),
           errors=(E("unique_dim", lambda: mf.unique(t(2, 3), dim=2), IndexError, "out of range"),)),
]


# ---------------------------------------------------------------- activations, normalize, one_hot and the losses (minifused/functional/activation.py)

def _red(loss, reduction):
    return loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.mean()


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _elu_ref(x, alpha=1.0, scale=1.0, input_scale=1.0):
    return np.where(x > 0, scale * x, alpha * scale * np.expm1(np.minimum(x, 0) * input_scale))


_SELU = (1.6732632423543772848170429916717, 1.0507009873554804934193349852946)


def softplus_ref(x, beta=1.0, threshold=20.0):
    return np.where(beta * x > threshold, x, np.logaddexp(0, beta * x) / beta)


def normalize_ref(x, p=2.0, dim=1, eps=1e-12):
    a = np.abs(x)
    n = a.max(dim, keepdims=True) if p == np.inf else (a ** p).sum(dim, keepdims=True) ** (1 / p)
    return x / np.maximum(n, eps)


def cosine_similarity_ref(a, b, dim=1, eps=1e-8):
    a, b = np.broadcast_arrays(a, b)
    return (normalize_ref(a, 2, dim, eps) * normalize_ref(b, 2, dim, eps)).sum(dim)


def bce_ref(x, t, w=None, reduction="mean"):
    """On probabilities ``sigmoid(x)``, ``sigmoid(t)`` (the entry's op maps the samples' normal values there)."""
    x, t = _sig(x), _sig(t)
    loss = -(t * np.maximum(np.log(x), -100) + (1 - t) * np.maximum(np.log1p(-x), -100))
    return _red(loss if w is None else loss * w, reduction)


def bce_with_logits_ref(x, t, w=None, pos_weight=None, reduction="mean"):
    lw = 1 if pos_weight is None else 1 + (pos_weight - 1) * t
    loss = (1 - t) * x + lw * np.logaddexp(0, -x)
    return _red(loss if w is None else loss * w, reduction)


def smooth_l1_ref(x, t, reduction="mean", beta=1.0):
    d = np.abs(x - t)
    return _red(d if beta == 0 else np.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta), reduction)


def huber_ref(x, t, reduction="mean", delta=1.0):
    d = np.abs(x - t)
    return _red(np.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta)), reduction)


def kl_div_ref(x, t, reduction="mean", log_target=False):
    loss = np.exp(t) * (t - x) if log_target else t * (np.log(t) - x)
    return loss.sum() / x.shape[0] if reduction == "batchmean" else _red(loss, reduction)


def _bce(x, t, *w, **kw):
    """F.binary_cross_entropy on probabilities: the samples' normal values through sigmoid."""
    return F.binary_cross_entropy(mf.sigmoid(x), mf.sigmoid(t), *w, **kw)


def _bce_with_logits(x, t, w=None, pos_weight=None, **kw):
    return F.binary_cross_entropy_with_logits(x, t, w, pos_weight=pos_weight, **kw)


def _act_entry(name, ref, samples, inplace=(), errors=(), **kw):
    """An activation ``F.<name>``: its PyTorch spelling is torch.nn.functional's."""
    return OpInfo(name, getattr(F, name), ref, spelled=f"F.{name}", torch=_tf(name), samples=samples,
                  inplace=inplace, errors=errors, **kw)


def _inplace(name, fn, plain):
    return InPlace(name, fn, plain, op=name if name.endswith("_") else name.split("(")[0] + "_")



ACTIVATION_OPS = [
    _act_entry("leaky_relu", lambda x, negative_slope=0.01: np.where(x > 0, x, negative_slope * x), samples=(
        S("leaky_relu", distinct((3, 4))), S("leaky_relu_slope_odd", distinct((5, 33)), negative_slope=0.2),
        S("leaky_relu_0d", distinct(()), negative_slope=-0.5)),
        inplace=(_inplace("leaky_relu_", F.leaky_relu_, F.leaky_relu),
                 _inplace("leaky_relu(inplace=True)", lambda x: F.leaky_relu(x, 0.1, inplace=True),
                          lambda x: F.leaky_relu(x, 0.1))),
        errors=(E("leaky_relu_int", lambda: F.leaky_relu(mf.tensor([1, 2])), TypeError,
                  "leaky_relu: expected a floating-point input.*int64"),
                E("leaky_relu_not_tensor", lambda: F.leaky_relu(np.ones(3)), TypeError, "leaky_relu: expected a tensor"),
                E("leaky_relu_slope_type", lambda: F.leaky_relu(t(3), "0.1"), TypeError, "negative_slope must be a number"),
                E("leaky_relu_inplace_int", lambda: F.leaky_relu_(mf.tensor([1, 2])), TypeError, "leaky_relu"))),
    _act_entry("silu", lambda x: x * _sig(x), samples=(S("silu", (3, 4)), S("silu_odd", (7, 33)), S("silu_0d", ())),
               inplace=(_inplace("silu(inplace=True)", lambda x: F.silu(x, inplace=True), F.silu),),
               errors=(E("silu_int", lambda: F.silu(mf.tensor([1])), TypeError, "silu: expected a floating-point"),)),
    _act_entry("elu", _elu_ref, samples=(S("elu", (3, 4)), S("elu_alpha_odd", (33,), alpha=0.5), S("elu_0d", ())),
               inplace=(_inplace("elu_", F.elu_, F.elu),),
               errors=(E("elu_inplace_int", lambda: F.elu_(mf.tensor([1, 2])), TypeError, "elu: expected a floating"),)),
    _act_entry("selu", lambda x: _elu_ref(x, *_SELU), samples=(S("selu", distinct((4, 5))), S("selu_odd", distinct((33,)))),
               inplace=(_inplace("selu_", F.selu_, F.selu),)),
    _act_entry("celu", lambda x, alpha=1.0: _elu_ref(x, alpha, 1.0, 1 / alpha), samples=(
        S("celu", (3, 4)), S("celu_alpha", (2, 33), alpha=2.5)),
        inplace=(_inplace("celu_", F.celu_, F.celu),),
        errors=(E("celu_alpha_zero", lambda: F.celu(t(3), alpha=0.0), RuntimeError, "celu: alpha must be nonzero"),)),
    _act_entry("softplus", softplus_ref, samples=(
        S("softplus", (3, 4)), S("softplus_beta_threshold", (5, 33), beta=2.0, threshold=1.5),
        S("softplus_large", (4,), fn=lambda a: F.softplus(a * 40), ref=lambda a: softplus_ref(a * 40)),
        S("softplus_0d", (), beta=0.5)),
        errors=(E("softplus_int", lambda: F.softplus(mf.tensor([1])), TypeError, "softplus: expected a floating"),
                E("softplus_beta_type", lambda: F.softplus(t(3), beta="2"), TypeError, "softplus: beta must be a number"))),
    _act_entry("hardtanh", lambda x, min_val=-1.0, max_val=1.0: np.clip(x, min_val, max_val), samples=(
        S("hardtanh", (4, 5)), S("hardtanh_bounds_odd", distinct((3, 33)), min_val=-0.5, max_val=0.3)),
        inplace=(_inplace("hardtanh_", F.hardtanh_, F.hardtanh),),
        errors=(E("hardtanh_bounds", lambda: F.hardtanh(t(3), 1.0, -1.0), ValueError,
                  "hardtanh: min_val cannot be greater than max_val"),)),
    _act_entry("relu6", lambda x: np.clip(x, 0, 6), samples=(
        S("relu6", distinct((3, 4))), S("relu6_top", (5, 7), fn=lambda a: F.relu6(a * 5), ref=lambda a: np.clip(a * 5, 0, 6))),
        inplace=(_inplace("relu6(inplace=True)", lambda x: F.relu6(x, inplace=True), F.relu6),)),
    _act_entry("hardsigmoid", lambda x: np.clip(x / 6 + 0.5, 0, 1), samples=(
        S("hardsigmoid", (3, 4)), S("hardsigmoid_wide", (5, 7), fn=lambda a: F.hardsigmoid(a * 4),
                                    ref=lambda a: np.clip(a * 4 / 6 + 0.5, 0, 1))),
        inplace=(_inplace("hardsigmoid(inplace=True)", lambda x: F.hardsigmoid(x, inplace=True), F.hardsigmoid),)),
    _act_entry("hardswish", lambda x: x * np.clip(x + 3, 0, 6) / 6, samples=(
        S("hardswish", (3, 4)), S("hardswish_wide", (5, 7), fn=lambda a: F.hardswish(a * 4),
                                  ref=lambda a: a * 4 * np.clip(a * 4 + 3, 0, 6) / 6)),
        inplace=(_inplace("hardswish(inplace=True)", lambda x: F.hardswish(x, inplace=True), F.hardswish),)),
    _act_entry("mish", lambda x: x * np.tanh(np.logaddexp(0, x)), samples=(S("mish", (3, 4)), S("mish_odd", (33,))),
               inplace=(_inplace("mish(inplace=True)", lambda x: F.mish(x, inplace=True), F.mish),)),
    _act_entry("softsign", lambda x: x / (1 + np.abs(x)), samples=(S("softsign", (3, 4)), S("softsign_0d", ()))),
    _act_entry("logsigmoid", lambda x: -np.logaddexp(0, -x), samples=(
        S("logsigmoid", (3, 4)), S("logsigmoid_large", (5,), fn=lambda a: F.logsigmoid(a * 50),
                                   ref=lambda a: -np.logaddexp(0, -a * 50)))),
    _act_entry("tanhshrink", lambda x: x - np.tanh(x), samples=(S("tanhshrink", (3, 4)), S("tanhshrink_odd", (33,)))),
    _act_entry("threshold", lambda x, threshold, value: np.where(x > threshold, x, value), samples=(
        S("threshold", distinct((3, 4)), threshold=0.1, value=20.0),
        S("threshold_odd", distinct((5, 33)), threshold=-0.3, value=-2.0)),
        inplace=(_inplace("threshold_", lambda x: F.threshold_(x, 0.1, 2.0), lambda x: F.threshold(x, 0.1, 2.0)),),
        errors=(E("threshold_bool", lambda: F.threshold(mf.tensor([True]), 0.5, 0.0), NotImplementedError,
                  "threshold: Bool inputs not supported"),
                E("threshold_type", lambda: F.threshold(t(3), "0.1", 1.0), TypeError,
                  "threshold: threshold must be a number"),)),
    _act_entry("rrelu", lambda x, lower=1 / 8, upper=1 / 3: np.where(x >= 0, x, x * (lower + upper) / 2), samples=(
        S("rrelu_eval", distinct((3, 4))), S("rrelu_eval_bounds_odd", distinct((5, 33)), lower=0.2, upper=0.4)),
        inplace=(_inplace("rrelu_", F.rrelu_, F.rrelu),),
        errors=(E("rrelu_bounds", lambda: F.rrelu(t(3), 0.5, 0.1), ValueError, "rrelu: Lower bound should be"),)),
    _act_entry("hardshrink", lambda x, lambd=0.5: np.where(np.abs(x) > lambd, x, 0), samples=(
        S("hardshrink", distinct((3, 4))), S("hardshrink_lambd_odd", distinct((5, 33)), lambd=0.3))),
    _act_entry("softshrink", lambda x, lambd=0.5: np.where(x > lambd, x - lambd, np.where(x < -lambd, x + lambd, 0)),
               samples=(S("softshrink", distinct((3, 4))), S("softshrink_lambd_odd", distinct((5, 33)), lambd=0.3)),
               errors=(E("softshrink_negative", lambda: F.softshrink(t(3), -0.1), ValueError,
                         "softshrink: lambda must be greater or equal to 0"),)),
    _act_entry("glu", lambda x, dim=-1: np.split(x, 2, dim)[0] * _sig(np.split(x, 2, dim)[1]), samples=(
        S("glu", (3, 8)), S("glu_dim1", (2, 6, 5), dim=1)),
        errors=(E("glu_odd", lambda: F.glu(t(3, 5)), RuntimeError, "glu: Halving dimension must be even, but "
                  "dimension 1 is size 5"),)),
    _act_entry("softmin", lambda x, dim: softmax_ref(-x, dim), gpu_tol=1e-4, samples=(
        S("softmin", (3, 5), dim=1), S("softmin_dim0", (4, 33), dim=0))),
    _act_entry("channel_shuffle", lambda x, groups: x.reshape(x.shape[0], groups, -1, *x.shape[2:]).swapaxes(1, 2)
               .reshape(x.shape), samples=(S("channel_shuffle", (2, 6, 3, 4), groups=3),
                                           S("channel_shuffle_3d", (2, 4, 5), groups=2)),
               errors=(E("channel_shuffle_groups", lambda: F.channel_shuffle(t(1, 5, 2, 2), 2), ValueError,
                         "channel_shuffle: Number of channels must be divisible by groups"),)),
    OpInfo("pairwise_distance", F.pairwise_distance,
           lambda a, b, p=2.0, eps=1e-6, keepdim=False: np.linalg.norm(a - b + eps, ord=p, axis=-1, keepdims=keepdim),
           spelled="F.pairwise_distance", torch=_tf("pairwise_distance"), samples=(
               S("pairwise_distance", (4, 5), (4, 5)), S("pairwise_distance_p1_broadcast", (3, 6), (1, 6), p=1.0),
               S("pairwise_distance_keepdim", (2, 3, 4), (2, 3, 4), keepdim=True))),
    # ---- normalize, cosine_similarity, one_hot
    OpInfo("normalize", F.normalize, normalize_ref, spelled="F.normalize", torch=_tf("normalize"), samples=(
        S("normalize", (4, 5)), S("normalize_p1_dim0", (3, 33), p=1.0, dim=0),
        S("normalize_inf", distinct((3, 4)), p=float("inf"), dim=-1), S("normalize_p3_3d", (2, 3, 4), p=3.0, dim=1),
        S("normalize_eps", (2, 3), fn=lambda a: F.normalize(a * 1e-3, eps=0.1),
          ref=lambda a: normalize_ref(a * 1e-3, eps=0.1)),
        S("normalize_0d", (), dim=0)),
        errors=(E("normalize_dim", lambda: F.normalize(t(3)), IndexError, "normalize: dim 1 out of range"),
                E("normalize_p", lambda: F.normalize(t(2, 3), p=[1]), TypeError, "normalize: p must be a number"),
                E("normalize_int", lambda: F.normalize(mf.tensor([[1, 2]])), TypeError, "normalize: expected a floating"))),
    OpInfo("cosine_similarity", F.cosine_similarity, cosine_similarity_ref, spelled="F.cosine_similarity",
           torch=_tf("cosine_similarity"), samples=(
               S("cosine_similarity", (4, 5), (4, 5)), S("cosine_similarity_broadcast_dim0", (3, 33), (3, 1), dim=0),
               S("cosine_similarity_3d", (2, 3, 4), (3, 4), dim=-1)),
           errors=(E("cosine_similarity_shapes", lambda: F.cosine_similarity(t(2, 3), t(4, 3)), ValueError,
                     r"cosine_similarity: shapes \(2, 3\) and \(4, 3\)"),
                   E("cosine_similarity_dim", lambda: F.cosine_similarity(t(2, 3), t(2, 3), dim=2), IndexError,
                     "cosine_similarity: dim 2 out of range"))),
    OpInfo("one_hot", F.one_hot, lambda i, num_classes=-1: np.eye(num_classes, dtype=np.int64)[i], spelled="F.one_hot",
           samples=(  # not differentiable: each sample masks a differentiable tensor with it
               S("one_hot_mask", (6, 4), index((6,), 4), fn=lambda x, i: x * F.one_hot(i, 4),
                 ref=lambda x, i: x * np.eye(4)[i]),
               S("one_hot_pick_2d", (2, 3, 5), index((2, 3), 5), fn=lambda x, i: (x * F.one_hot(i, 5)).sum(-1),
                 ref=lambda x, i: (x * np.eye(5)[i]).sum(-1))),
           errors=(E("one_hot_negative", lambda: F.one_hot(mf.tensor([0, -1]), 3), ValueError,
                     "one_hot: class values must be non-negative"),
                   E("one_hot_range", lambda: F.one_hot(mf.tensor([0, 3]), 3), ValueError,
                     "one_hot: class values must be smaller than num_classes=3, got 3"),
                   E("one_hot_float", lambda: F.one_hot(mf.tensor([0.0, 1.0])), TypeError, "one_hot: .*int64.*float32"),
                   E("one_hot_int32", lambda: F.one_hot(mf.tensor([0, 1], dtype=mf.int32)), TypeError, "int64"),
                   E("one_hot_empty_infer", lambda: F.one_hot(mf.zeros(0, dtype=mf.int64)), ValueError,
                     "one_hot: can not infer"),
                   E("one_hot_num_classes", lambda: F.one_hot(mf.tensor([0]), -2), ValueError, "num_classes must be"))),
    # ---- losses
    OpInfo("binary_cross_entropy", _bce, bce_ref, spelled="F.binary_cross_entropy",
           torch=lambda T, x, y, *w, **kw: T.nn.functional.binary_cross_entropy(T.sigmoid(x), T.sigmoid(y), *w, **kw),
           samples=(S("binary_cross_entropy", (4, 5), const((4, 5))),
                    S("binary_cross_entropy_weight_sum", (3, 33), const((3, 33)), const(pos((33,))), reduction="sum"),
                    S("binary_cross_entropy_none_0d", (), const(()), reduction="none"),
                    S("binary_cross_entropy_target_grad", (2, 3), (2, 3), reduction="sum")),
           errors=(E("bce_range", lambda: F.binary_cross_entropy(mf.tensor([0.5, 1.5]), mf.tensor([0.0, 1.0])),
                     RuntimeError, "binary_cross_entropy: all elements of input should be between 0 and 1"),
                   E("bce_nan", lambda: F.binary_cross_entropy(mf.tensor([float("nan")]), mf.tensor([0.0])),
                     RuntimeError, "between 0 and 1"),
                   E("bce_target_range", lambda: F.binary_cross_entropy(mf.tensor([0.5, 0.5]), mf.tensor([0.0, 1.5])),
                     RuntimeError, "binary_cross_entropy: all elements of target should be between 0 and 1"),
                   E("bce_dtypes", lambda: F.binary_cross_entropy(mf.tensor([0.5]), mf.tensor([1.0], dtype=mf.float64)),
                     RuntimeError, "binary_cross_entropy: expected a target of the input's dtype float32, got float64"),
                   E("bce_shapes", lambda: F.binary_cross_entropy(t(2, 3).sigmoid(), t(3).sigmoid()), ValueError,
                     r"binary_cross_entropy: using a target size \(\[3\]\) that is different to the input size"),
                   E("bce_reduction", lambda: F.binary_cross_entropy(t(2).sigmoid(), t(2).sigmoid(), reduction="avg"),
                     ValueError, "binary_cross_entropy: reduction must be one of"),
                   E("bce_int_target", lambda: F.binary_cross_entropy(t(2).sigmoid(), mf.tensor([0, 1])), TypeError,
                     "binary_cross_entropy: expected a floating-point target"),
                   E("bce_weight_shape", lambda: F.binary_cross_entropy(t(2, 3).sigmoid(), t(2, 3).sigmoid(), t(2)),
                     ValueError, r"weight of shape \[2\] does not broadcast to the input's shape \[2, 3\]"))),
    OpInfo("binary_cross_entropy_with_logits", _bce_with_logits, bce_with_logits_ref,
           spelled="F.binary_cross_entropy_with_logits",
           torch=lambda T, x, y, w=None, pw=None, **kw: T.nn.functional.binary_cross_entropy_with_logits(
               x, y, w, pos_weight=pw, **kw), samples=(
               S("bce_with_logits", (4, 5), const((4, 5))),
               S("bce_with_logits_weights_odd", (3, 33), const((3, 33)), const(pos((3, 1))), const(pos((33,))),
                 reduction="sum"),
               S("bce_with_logits_large", (6,), const((6,)), fn=lambda x, y: _bce_with_logits(x * 60, y, reduction="none"),
                 ref=lambda x, y: bce_with_logits_ref(x * 60, y, reduction="none")),
               S("bce_with_logits_target_grad", (2, 3), (2, 3), const(pos((3,))), const(pos((3,))), reduction="none")),
           errors=(E("bce_logits_shapes", lambda: F.binary_cross_entropy_with_logits(t(2, 3), t(2, 1)), ValueError,
                     "binary_cross_entropy_with_logits: using a target size"),
                   E("bce_logits_pos_weight", lambda: F.binary_cross_entropy_with_logits(t(2, 3), t(2, 3), pos_weight=t(2)),
                     ValueError, "pos_weight of shape"),
                   E("bce_logits_int_input", lambda: F.binary_cross_entropy_with_logits(mf.tensor([1]), t(1)), TypeError,
                     "binary_cross_entropy_with_logits: expected a floating-point input"))),
    OpInfo("l1_loss", F.l1_loss, lambda x, y, reduction="mean": _red(np.abs(x - y), reduction), spelled="F.l1_loss",
           torch=_tf("l1_loss"), samples=(
               S("l1_loss", (4, 5), (4, 5)), S("l1_loss_sum_odd", (33,), (33,), reduction="sum"),
               S("l1_loss_none_0d", (), (), reduction="none")),
           errors=(E("l1_shapes", lambda: F.l1_loss(t(2, 3), t(3, 2)), ValueError,
                     r"l1_loss: shapes \(2, 3\) and \(3, 2\) cannot be broadcast"),
                   E("l1_reduction", lambda: F.l1_loss(t(2), t(2), reduction="batchmean"), ValueError,
                     "l1_loss: reduction must be one of"),
                   E("l1_int_input", lambda: F.l1_loss(mf.tensor([1]), mf.tensor([1])), TypeError,
                     "l1_loss: reduction=.mean. has no integer result"),
                   E("l1_device_type", lambda: F.l1_loss(t(2), np.ones(2)), TypeError, "l1_loss: expected tensors"))),
    OpInfo("smooth_l1_loss", F.smooth_l1_loss, smooth_l1_ref, spelled="F.smooth_l1_loss", torch=_tf("smooth_l1_loss"),
           samples=(S("smooth_l1_loss", (4, 5), (4, 5)),
                    S("smooth_l1_loss_beta_sum", (3, 33), (3, 33), beta=0.5, reduction="sum"),
                    S("smooth_l1_loss_beta0_none", (2, 3), (2, 3), beta=0.0, reduction="none")),
           errors=(E("smooth_l1_beta", lambda: F.smooth_l1_loss(t(2), t(2), beta=-1.0), RuntimeError,
                     "smooth_l1_loss: beta must be >= 0"),
                   E("smooth_l1_shapes", lambda: F.smooth_l1_loss(t(2, 3), t(4)), ValueError, "smooth_l1_loss: shapes"))),
    OpInfo("margin_ranking_loss", F.margin_ranking_loss,
           lambda a, b, y, margin=0.0, reduction="mean": _red(np.maximum(0, -y * (a - b) + margin), reduction),
           spelled="F.margin_ranking_loss", torch=_tf("margin_ranking_loss"), samples=(
               S("margin_ranking_loss", distinct((8,)), distinct((8,)), const(sign((8,))), margin=0.1),
               S("margin_ranking_loss_sum_2d", distinct((3, 5)), distinct((3, 5)), const(sign((3, 5))),
                 reduction="sum")),
           errors=(E("margin_ranking_dims", lambda: F.margin_ranking_loss(t(3), t(3), t(1, 3)), ValueError,
                     "margin_ranking_loss: All input tensors should have same dimension"),)),
    OpInfo("hinge_embedding_loss", F.hinge_embedding_loss,
           lambda x, y, margin=1.0, reduction="mean": _red(np.where(y == 1, x, np.maximum(0, margin - x)), reduction),
           spelled="F.hinge_embedding_loss", torch=_tf("hinge_embedding_loss"), samples=(
               S("hinge_embedding_loss", distinct((4, 5)), const(sign((4, 5)))),
               S("hinge_embedding_loss_margin_none", distinct((7,)), const(sign((7,))), margin=0.3, reduction="none"))),
    OpInfo("soft_margin_loss", F.soft_margin_loss,
           lambda x, y, reduction="mean": _red(np.log1p(np.exp(-y * x)), reduction),
           spelled="F.soft_margin_loss", torch=_tf("soft_margin_loss"), samples=(
               S("soft_margin_loss", (4, 5), const(sign((4, 5)))),
               S("soft_margin_loss_sum", (9,), const(sign((9,))), reduction="sum"))),
    OpInfo("cosine_embedding_loss", F.cosine_embedding_loss, cosine_embedding_ref,
           spelled="F.cosine_embedding_loss", torch=_tf("cosine_embedding_loss"), samples=(
               S("cosine_embedding_loss", (6, 4), (6, 4), const(sign((6,))), margin=0.2),
               S("cosine_embedding_loss_1d_none", (5,), (5,), const(sign(())), reduction="none")),
           errors=(E("cosine_embedding_target_dims", lambda: F.cosine_embedding_loss(t(3, 4), t(3, 4), t(3, 1)),
                     ValueError, "cosine_embedding_loss: 0D or 1D target tensor expected"),)),
    OpInfo("multilabel_soft_margin_loss", F.multilabel_soft_margin_loss, multilabel_soft_margin_ref,
           spelled="F.multilabel_soft_margin_loss", torch=_tf("multilabel_soft_margin_loss"), samples=(
               S("multilabel_soft_margin_loss", (4, 5), const(binary((4, 5)))),
               S("multilabel_soft_margin_loss_weight_none", (3, 6), const(binary((3, 6))), pos((6,)),
                 reduction="none"))),
    OpInfo("triplet_margin_loss", F.triplet_margin_loss, triplet_margin_ref, spelled="F.triplet_margin_loss",
           torch=_tf("triplet_margin_loss"), samples=(
               S("triplet_margin_loss", (5, 8), (5, 8), (5, 8)),
               S("triplet_margin_loss_p1_swap", (4, 6), (4, 6), (4, 6), p=1.0, swap=True, margin=0.5),
               S("triplet_margin_loss_none", (6, 3), (6, 3), (6, 3), margin=2.0, reduction="none")),
           errors=(E("triplet_dims", lambda: F.triplet_margin_loss(t(2, 3), t(2, 3), t(3)), RuntimeError,
                     "triplet_margin_loss: The anchor, positive, and negative tensors are expected to have the same "
                     "number of dimensions"),)),
    OpInfo("multi_margin_loss", F.multi_margin_loss, multi_margin_ref, spelled="F.multi_margin_loss",
           torch=_tf("multi_margin_loss"), samples=(
               S("multi_margin_loss", distinct((4, 5)), index((4,), 5)),
               S("multi_margin_loss_p2_weight_sum", distinct((3, 6)), index((3,), 6), const(pos((6,))),
                 fn=lambda x, y, w: F.multi_margin_loss(x, y, p=2, margin=0.5, weight=w, reduction="sum"),
                 ref=lambda x, y, w: multi_margin_ref(x, y, w, p=2, margin=0.5, reduction="sum")),
               S("multi_margin_loss_p2", distinct((3, 6)), index((3,), 6), p=2, margin=0.5),
               S("multi_margin_loss_1d_none", distinct((7,)), index((), 7), reduction="none")),
           errors=(E("multi_margin_p", lambda: F.multi_margin_loss(t(2, 3), mf.tensor([0, 1]), p=3), ValueError,
                     "multi_margin_loss: only p == 1 and p == 2 supported"),
                   E("multi_margin_target", lambda: F.multi_margin_loss(t(2, 3), mf.tensor([0, 3])), IndexError,
                     "multi_margin_loss: target out of range for 3 classes"))),
    OpInfo("poisson_nll_loss", F.poisson_nll_loss, poisson_nll_ref, spelled="F.poisson_nll_loss",
           torch=_tf("poisson_nll_loss"), samples=(
               S("poisson_nll_loss", (4, 5), pos((4, 5))),
               S("poisson_nll_loss_rate_full_sum", pos((3, 6)), pos((3, 6)), log_input=False, full=True,
                 reduction="sum"))),
    OpInfo("gaussian_nll_loss", F.gaussian_nll_loss, gaussian_nll_ref, spelled="F.gaussian_nll_loss",
           torch=_tf("gaussian_nll_loss"), samples=(
               S("gaussian_nll_loss", (4, 5), (4, 5), pos((4, 5))),
               S("gaussian_nll_loss_homoscedastic_full", (3, 6), (3, 6), pos((3, 1)), full=True),
               S("gaussian_nll_loss_fewer_dims_none", (3, 6), (3, 6), pos((3,)), reduction="none")),
           errors=(E("gaussian_nll_negative_var", lambda: F.gaussian_nll_loss(t(2, 3), t(2, 3), -mf.ones(2, 3)),
                     ValueError, "gaussian_nll_loss: var has negative entry"),
                   E("gaussian_nll_var_shape", lambda: F.gaussian_nll_loss(t(2, 3), t(2, 3), mf.ones(3, 2)),
                     ValueError, "gaussian_nll_loss: var is of incorrect size"))),
    OpInfo("huber_loss", F.huber_loss, huber_ref, spelled="F.huber_loss", torch=_tf("huber_loss"), samples=(
        S("huber_loss", (4, 5), (4, 5)), S("huber_loss_delta_sum", (3, 33), (3, 33), delta=0.7, reduction="sum"),
        S("huber_loss_none_0d", (), (), reduction="none", delta=2.0)),
           errors=(E("huber_delta_zero", lambda: F.huber_loss(t(2), t(2), delta=0.0), RuntimeError,
                     "huber_loss: delta must be > 0"),
                   E("huber_delta_negative", lambda: F.huber_loss(t(2), t(2), delta=-1), RuntimeError, "delta must be > 0"),
                   E("huber_reduction", lambda: F.huber_loss(t(2), t(2), reduction="mean "), ValueError, "reduction"))),
    OpInfo("kl_div", F.kl_div, kl_div_ref, spelled="F.kl_div", torch=_tf("kl_div"), samples=(
        S("kl_div_batchmean", (4, 5), pos((4, 5)), reduction="batchmean"),
        S("kl_div_mean", (3, 33), pos((3, 33))), S("kl_div_sum_log_target", (3, 4), (3, 4), reduction="sum", log_target=True),
        S("kl_div_none_broadcast", (2, 3), pos((3,)), reduction="none")),
           errors=(E("kl_div_reduction", lambda: F.kl_div(t(2), t(2), reduction="avg"), ValueError,
                     "kl_div: reduction must be one of 'none', 'batchmean', 'sum', 'mean'"),
                   E("kl_div_int", lambda: F.kl_div(mf.tensor([1]), t(1)), TypeError, "kl_div: expected a floating"),
                   E("kl_div_shapes", lambda: F.kl_div(t(2, 3), t(2)), ValueError, "kl_div: shapes"))),
]


# ---------------------------------------------------------------- pad, interpolate, adaptive pooling, embedding, dropout2d (minifused/functional/layers.py)

LAYER_OPS = [
    OpInfo("pad", F.pad, pad_ref, spelled="F.pad", torch=_tf("pad"), samples=(
        S("pad_constant_1d", (2, 3, 5), pad=(1, 2)),
        S("pad_constant_value_2d", (2, 3, 4, 5), pad=(1, 0, 2, 1), value=1.5),
        S("pad_constant_crop", (2, 3, 5, 7), pad=(-1, 2, 0, -2)),
        S("pad_constant_three_dims", (3, 2, 4), pad=(0, 1, 2, 0, 1, 1)),
        S("pad_reflect_1d", (2, 3, 7), pad=(3, 2), mode="reflect"),
        S("pad_reflect_2d_odd", (1, 2, 5, 6), pad=(2, 5, 4, 3), mode="reflect"),
        S("pad_reflect_3d", (1, 1, 3, 4, 5), pad=(1, 2, 2, 1, 1, 2), mode="reflect"),
        S("pad_replicate_2d", (2, 1, 3, 4), pad=(3, 2, 1, 5), mode="replicate"),
        S("pad_replicate_unbatched", (3, 5), pad=(2, 4), mode="replicate"),
        S("pad_circular_2d", (1, 2, 4, 5), pad=(5, 2, 1, 4), mode="circular"),
        S("pad_circular_crop", (2, 2, 6), pad=(-2, 3), mode="circular"),
        S("pad_reflect_crop", (1, 2, 7), pad=(3, -2), mode="reflect")),
           errors=(E("pad_odd_length", lambda: F.pad(t(2, 3), (1, 2, 3)), ValueError,
                     "pad: padding length must be divisible by 2"),
                   E("pad_too_long", lambda: F.pad(t(3), (1, 1, 1, 1)), ValueError,
                     r"pad: padding length should be at most two times.*1-D"),
                   E("pad_reflect_too_big", lambda: F.pad(t(1, 2, 3), (3, 0), mode="reflect"), ValueError,
                     r"pad: reflect padding \(3, 0\) of dimension 2 must be less than its size 3"),
                   E("pad_circular_wraps_twice", lambda: F.pad(t(1, 2, 3), (0, 4), mode="circular"), ValueError,
                     "wrap around more than once"),
                   E("pad_mode", lambda: F.pad(t(1, 2, 3), (1, 1), mode="mirror"), ValueError,
                     "pad: mode must be one of"),
                   E("pad_reflect_dims", lambda: F.pad(t(1, 2, 3, 4, 5), (1, 1), mode="reflect"), ValueError,
                     "pads the last 1, 2 or 3 dimensions of a 2-D or 3-D input"),
                   E("pad_reflect_value", lambda: F.pad(t(1, 2, 3), (1, 1), mode="reflect", value=1.0), ValueError,
                     "takes no value"),
                   E("pad_negative_size", lambda: F.pad(t(2, 3), (-2, -2)), ValueError, "negative output size"),
                   E("pad_value_overflow", lambda: F.pad(mf.ones(3, dtype=mf.uint8), (1, 1), value=-1), RuntimeError,
                     "value cannot be converted to type uint8 without overflow"),
                   E("pad_value_infinite", lambda: F.pad(mf.ones(3, dtype=mf.int64), (1, 1), value=float("inf")),
                     RuntimeError, "value cannot be converted to type int64 without overflow"),
                   E("pad_float_entries", lambda: F.pad(t(2, 3), (1.0, 1)), TypeError,
                     "pad: pad must be a tuple of ints"))),
    OpInfo("interpolate", F.interpolate, interpolate_ref, spelled="F.interpolate", torch=_tf("interpolate"), samples=(
        S("interpolate_nearest_size", (2, 3, 5, 7), size=(3, 11)),
        S("interpolate_nearest_scale_odd", (1, 2, 5, 4), scale_factor=1.7),
        S("interpolate_nearest_1d", (2, 3, 7), scale_factor=2),
        S("interpolate_nearest_down_1d", (2, 1, 11), size=4),
        S("interpolate_nearest_exact", (1, 2, 5, 7), size=(8, 3), mode="nearest-exact"),
        S("interpolate_bilinear_scale", (2, 3, 5, 7), scale_factor=1.5, mode="bilinear"),
        S("interpolate_bilinear_scale_odd", (1, 2, 3, 5), scale_factor=(2.3, 0.7), mode="bilinear"),
        S("interpolate_bilinear_align", (1, 2, 5, 4), size=(9, 7), mode="bilinear", align_corners=True),
        S("interpolate_bilinear_down", (1, 1, 7, 9), size=(3, 4), mode="bilinear", align_corners=False),
        S("interpolate_bilinear_recompute", (1, 2, 4, 5), scale_factor=(2.3, 0.6), mode="bilinear",
          recompute_scale_factor=True),
        S("interpolate_bilinear_align_size1", (1, 1, 1, 3), size=(4, 1), mode="bilinear", align_corners=True),
        S("interpolate_linear_1d", (2, 3, 7), size=12, mode="linear"),
        S("interpolate_linear_align_1d", (2, 3, 7), scale_factor=1.3, mode="linear", align_corners=True),
        S("interpolate_area", (1, 2, 7, 10), size=(3, 4), mode="area"),
        S("interpolate_area_3d", (2, 1, 5, 4, 7), scale_factor=(0.5, 1.5, 0.4), mode="area"),
        S("interpolate_bicubic_size", (2, 3, 5, 7), size=(9, 4), mode="bicubic"),
        S("interpolate_bicubic_align", (1, 2, 5, 7), size=(9, 4), mode="bicubic", align_corners=True),
        S("interpolate_bicubic_scale", (1, 2, 6, 5), scale_factor=(1.7, 0.6), mode="bicubic"),
        S("interpolate_bicubic_up2", (1, 1, 4, 4), scale_factor=2, mode="bicubic"),
        S("interpolate_bicubic_one_pixel", (1, 2, 1, 1), size=(3, 2), mode="bicubic"),
        S("interpolate_trilinear", (1, 2, 3, 4, 5), size=(5, 2, 7), mode="trilinear"),
        S("interpolate_trilinear_align", (1, 1, 3, 4, 2), scale_factor=(2, 0.5, 1.5), mode="trilinear",
          align_corners=True),
        S("interpolate_nearest_3d", (1, 2, 3, 4, 5), size=(5, 2, 7)),
        S("interpolate_nearest_exact_3d", (1, 2, 3, 4, 5), scale_factor=1.5, mode="nearest-exact")),
           errors=(E("interpolate_both", lambda: F.interpolate(t(1, 1, 4, 4), size=2, scale_factor=2.0), ValueError,
                     "interpolate: exactly one of size and scale_factor must be given, got both"),
                   E("interpolate_neither", lambda: F.interpolate(t(1, 1, 4, 4)), ValueError, "got neither"),
                   E("interpolate_bilinear_3d", lambda: F.interpolate(t(1, 1, 4), size=2, mode="bilinear"),
                     NotImplementedError, "got 3D input, but bilinear mode needs 4D input"),
                   E("interpolate_linear_4d", lambda: F.interpolate(t(1, 1, 4, 4), size=2, mode="linear"),
                     NotImplementedError, "linear mode needs 3D input"),
                   E("interpolate_align_nearest", lambda: F.interpolate(t(1, 1, 4, 4), size=2, align_corners=True),
                     ValueError, "align_corners can only be set"),
                   E("interpolate_size_len", lambda: F.interpolate(t(1, 1, 4, 4), size=(2, 2, 2)), ValueError,
                     "size must have 2 entries"),
                   E("interpolate_zero_size", lambda: F.interpolate(t(1, 1, 4, 4), scale_factor=0.1), ValueError,
                     "sizes must be greater than 0"),
                   E("interpolate_negative_scale", lambda: F.interpolate(t(1, 1, 4, 4), scale_factor=-2.0),
                     ValueError, "scale_factor must be positive"),
                   E("interpolate_mode", lambda: F.interpolate(t(1, 1, 4, 4), size=2, mode="cubic"), ValueError,
                     "interpolate: mode must be one of"),
                   E("interpolate_2d_input", lambda: F.interpolate(t(4, 4), size=2), NotImplementedError,
                     r"expected a 3-D \(N, C, L\), 4-D \(N, C, H, W\) or 5-D"),
                   E("interpolate_bicubic_3d", lambda: F.interpolate(t(1, 1, 4), size=2, mode="bicubic"),
                     NotImplementedError, "got 3D input, but bicubic mode needs 4D input"),
                   E("interpolate_trilinear_4d", lambda: F.interpolate(t(1, 1, 4, 4), size=2, mode="trilinear"),
                     NotImplementedError, "got 4D input, but trilinear mode needs 5D input"),
                   E("interpolate_bicubic_int", lambda: F.interpolate(mf.ones(1, 1, 2, 2, dtype=mf.int64), size=3,
                                                                      mode="bicubic"), TypeError, "floating-point"),
                   E("interpolate_bilinear_int", lambda: F.interpolate(mf.ones(1, 1, 2, 2, dtype=mf.int64), size=3,
                                                                       mode="bilinear"), TypeError, "floating-point"))),
    OpInfo("adaptive_avg_pool2d", F.adaptive_avg_pool2d, _adaptive(np.mean, 2), spelled="F.adaptive_avg_pool2d",
           torch=_tf("adaptive_avg_pool2d"), samples=(
               S("adaptive_avg_pool2d_7to3", (2, 3, 7, 10), output_size=(3, 4)),
               S("adaptive_avg_pool2d_global", (2, 3, 5, 7), output_size=1),
               S("adaptive_avg_pool2d_tiles", (1, 2, 6, 8), output_size=(3, 2)),
               S("adaptive_avg_pool2d_none", (1, 2, 5, 7), output_size=(None, 3)),
               S("adaptive_avg_pool2d_unbatched", (3, 7, 5), output_size=2),
               S("adaptive_avg_pool2d_up", (1, 1, 3, 4), output_size=(5, 7))),
           errors=(E("adaptive_avg_negative", lambda: F.adaptive_avg_pool2d(t(1, 1, 4, 4), -1), ValueError,
                     "adaptive_avg_pool2d: output_size must be >= 0"),
                   E("adaptive_avg_dims", lambda: F.adaptive_avg_pool2d(t(4, 4), 2), ValueError,
                     r"adaptive_avg_pool2d: expected a 3-D or 4-D input"),
                   E("adaptive_avg_empty_plane", lambda: F.adaptive_avg_pool2d(t(1, 1, 0, 4), 2), ValueError,
                     "non-zero size for non-batch dimensions"),
                   E("adaptive_avg_size_len", lambda: F.adaptive_avg_pool2d(t(1, 1, 4, 4), (1, 2, 3)), ValueError,
                     "output_size must be an int or a pair"),
                   E("adaptive_avg_float_size", lambda: F.adaptive_avg_pool2d(t(1, 1, 4, 4), 2.5), TypeError,
                     "output_size must be ints"))),
    OpInfo("adaptive_max_pool2d", F.adaptive_max_pool2d, _adaptive(np.max, 2), spelled="F.adaptive_max_pool2d",
           torch=_tf("adaptive_max_pool2d"), samples=(
               S("adaptive_max_pool2d_7to3", distinct((2, 3, 7, 10)), output_size=(3, 4)),
               S("adaptive_max_pool2d_10to4", distinct((1, 2, 10, 9)), output_size=(4, 5)),
               S("adaptive_max_pool2d_unbatched", distinct((2, 7, 5)), output_size=3),
               S("adaptive_max_pool2d_up", distinct((1, 1, 3, 4)), output_size=(5, 7)),
               S("adaptive_max_pool2d_global", distinct((2, 3, 5, 5)), output_size=(1, 1))),
           errors=(E("adaptive_max_negative", lambda: F.adaptive_max_pool2d(t(1, 1, 4, 4), (2, -3)), ValueError,
                     "adaptive_max_pool2d: output_size must be >= 0"),
                   E("adaptive_max_int", lambda: F.adaptive_max_pool2d(mf.ones(1, 1, 2, 2, dtype=mf.int64), 1),
                     TypeError, "floating-point"))),
    OpInfo("adaptive_avg_pool1d", F.adaptive_avg_pool1d, _adaptive(np.mean, 1), spelled="F.adaptive_avg_pool1d",
           torch=_tf("adaptive_avg_pool1d"), samples=(
               S("adaptive_avg_pool1d_10to4", (2, 3, 10), output_size=4),
               S("adaptive_avg_pool1d_unbatched", (3, 7), output_size=(3,))),
           errors=(E("adaptive_avg1d_dims", lambda: F.adaptive_avg_pool1d(t(1, 2, 3, 4), 2), ValueError,
                     "expected a 2-D or 3-D input"),)),
    OpInfo("adaptive_max_pool1d", F.adaptive_max_pool1d, _adaptive(np.max, 1), spelled="F.adaptive_max_pool1d",
           torch=_tf("adaptive_max_pool1d"), samples=(
               S("adaptive_max_pool1d_10to4", distinct((2, 3, 10)), output_size=4),
               S("adaptive_max_pool1d_up", distinct((1, 2, 3)), output_size=5))),
    OpInfo("embedding", F.embedding, embedding_ref, spelled="F.embedding", torch=_tf("embedding"), samples=(
        S("embedding", index((3, 4), 7), (7, 5)),
        S("embedding_repeated_odd", index((33,), 3), (3, 9)),
        S("embedding_0d_index", index((), 5), (5, 3)),
        S("embedding_size1", index((1,), 1), (1, 1))),
           errors=(E("embedding_out_of_range", lambda: F.embedding(mf.tensor([0, 7]), t(5, 3)), IndexError,
                     r"embedding: index 7 at position 1 is out of range \[0, 5\)"),
                   E("embedding_negative_index", lambda: F.embedding(mf.tensor([-1]), t(5, 3)), IndexError,
                     "out of range"),
                   E("embedding_float_indices", lambda: F.embedding(mf.tensor([0.0, 1.0]), t(5, 3)), TypeError,
                     "embedding: expected integer indices"),
                   E("embedding_weight_1d", lambda: F.embedding(mf.tensor([0]), t(5)), ValueError,
                     "weight must be 2-D"),
                   E("embedding_padding_idx", lambda: F.embedding(mf.tensor([0]), t(5, 3), padding_idx=5), ValueError,
                     "padding_idx must be within num_embeddings"))),
    OpInfo("dropout2d", F.dropout2d, _channel_dropout_ref, spelled="F.dropout2d", torch=_tf("dropout2d"), samples=(
        S("dropout2d_p0", (2, 3, 4, 5), p=0.0), S("dropout2d_eval", (2, 3, 5, 3), p=0.5, training=False)),
           errors=(E("dropout2d_p", lambda: F.dropout2d(t(1, 2, 3, 3), 1.5), ValueError,
                     "dropout2d: dropout probability has to be between 0 and 1, but got 1.5"),
                   E("dropout2d_negative_p", lambda: F.dropout2d(t(1, 2, 3, 3), -0.1), ValueError, "between 0 and 1"),
                   E("dropout2d_1d", lambda: F.dropout2d(t(3), 0.5), ValueError, "dropout2d: Feature dropout requires"),
                   E("dropout2d_int", lambda: F.dropout2d(mf.ones(1, 2, 2, 2, dtype=mf.int64)), TypeError,
                     "floating-point"))),
    OpInfo("dropout1d", F.dropout1d, _channel_dropout_ref, spelled="F.dropout1d", torch=_tf("dropout1d"), samples=(
        S("dropout1d_p0", (2, 3, 7), p=0.0), S("dropout1d_eval_unbatched", (3, 7), training=False)),
           errors=(E("dropout1d_4d", lambda: F.dropout1d(t(1, 2, 3, 3)), ValueError, "dropout1d: expected a 2-D"),
                   E("dropout1d_p", lambda: F.dropout1d(t(2, 3), float("nan")), ValueError, "between 0 and 1"))),
    OpInfo("dropout3d", F.dropout3d, _channel_dropout_ref, spelled="F.dropout3d", torch=_tf("dropout3d"), samples=(
        S("dropout3d_p0", (2, 3, 2, 3, 4), p=0.0), S("dropout3d_eval_unbatched", (3, 2, 2, 5), training=False)),
           errors=(E("dropout3d_0d", lambda: F.dropout3d(mf.ones(())), ValueError, "dropout3d: Feature dropout"),)),
    OpInfo("alpha_dropout", F.alpha_dropout, _channel_dropout_ref, spelled="F.alpha_dropout",
           torch=_tf("alpha_dropout"), samples=(
               S("alpha_dropout_eval", (2, 3, 7)), S("alpha_dropout_p0", (4, 33), p=0.0, training=True)),
           errors=(E("alpha_dropout_p", lambda: F.alpha_dropout(t(3), -0.5, True), ValueError,
                     "alpha_dropout: dropout probability has to be between 0 and 1"),)),
    OpInfo("feature_alpha_dropout", F.feature_alpha_dropout, _channel_dropout_ref, spelled="F.feature_alpha_dropout",
           torch=_tf("feature_alpha_dropout"), samples=(
               S("feature_alpha_dropout_eval", (2, 3, 5, 4), p=0.3),
               S("feature_alpha_dropout_p0", (2, 5, 3), p=0.0, training=True)),
           errors=(E("feature_alpha_dropout_1d", lambda: F.feature_alpha_dropout(t(3), 0.5, True), ValueError,
                     "Feature dropout requires at least 2 dimensions"),)),
    OpInfo("batch_norm", F.batch_norm, batch_norm_ref, spelled="F.batch_norm", torch=_tf("batch_norm"), gpu_tol=1e-4,
           samples=(S("batch_norm_train", (4, 3, 2, 5), const((3,)), const(pos((3,))), pos((3,)), (3,), training=True),
                    S("batch_norm_eval", (5, 3), const((3,)), const(pos((3,))), pos((3,)), (3,)),
                    S("batch_norm_train_1d_plain", (6, 2, 3), const((2,)), const(pos((2,))), training=True,
                      momentum=0.5, eps=1e-3)),
           errors=(E("batch_norm_one_value", lambda: F.batch_norm(t(1, 3), mf.zeros(3), mf.ones(3), training=True),
                     ValueError, "expected more than 1 value per channel when training"),
                   E("batch_norm_channels", lambda: F.batch_norm(t(2, 3), mf.zeros(4), mf.ones(4)), ValueError,
                     r"running_mean must have shape \[3\]"),
                   E("batch_norm_int", lambda: F.batch_norm(mf.tensor([[1, 2], [3, 4]]), mf.zeros(2), mf.ones(2)),
                     TypeError, "floating-point input"),
                   E("batch_norm_momentum", lambda: F.batch_norm(t(2, 3), mf.zeros(3), mf.ones(3), momentum=-1.0),
                     ValueError, r"momentum must be a number in \[0, 1\]"))),
    OpInfo("group_norm", lambda x, *p, num_groups, **kw: F.group_norm(x, num_groups, *p, **kw), group_norm_ref,
           spelled="F.group_norm", gpu_tol=1e-4,
           torch=lambda T, x, *p, num_groups, **kw: T.nn.functional.group_norm(x, num_groups, *p, **kw),
           samples=(S("group_norm", (2, 4, 3, 3), pos((4,)), (4,), num_groups=2),
                    S("group_norm_one_group", (3, 6, 5), num_groups=1), S("group_norm_2d", (2, 6), num_groups=2)),
           errors=(E("group_norm_divide", lambda: F.group_norm(t(2, 6, 3), 4), ValueError,
                     r"num_groups \(4\) must divide the number of channels \(6\)"),)),
    OpInfo("conv_transpose2d", F.conv_transpose2d, conv_transpose2d_ref, spelled="F.conv_transpose2d",
           torch=_tf("conv_transpose2d"), gpu_tol=1e-4, dtypes=(np.dtype(np.float32), np.dtype(np.float64)),
           samples=(S("conv_transpose2d", (2, 4, 3, 3), (4, 2, 3, 3), (2,), stride=2, padding=1, output_padding=1),
                    S("conv_transpose2d_groups_dilation", (1, 4, 4, 3), (4, 1, 2, 2), groups=2, dilation=(2, 1))),
           errors=(E("conv_transpose2d_channels", lambda: F.conv_transpose2d(t(1, 3, 4, 4), t(4, 2, 3, 3)), ValueError,
                     "input has 3 channels"),
                   E("conv_transpose2d_output_padding",
                     lambda: F.conv_transpose2d(t(1, 4, 4, 4), t(4, 2, 3, 3), stride=2, output_padding=2), ValueError,
                     "output_padding"))),
    OpInfo("max_unpool2d", F.max_unpool2d, None, spelled="F.max_unpool2d", torch=_tf("max_unpool2d"), samples=(
               S("max_unpool2d", distinct((2, 3, 4, 6)),
                 fn=lambda x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2),
                 ref=lambda x: np.where(x == np.repeat(np.repeat(max_pool2d_ref(x, 2), 2, -2), 2, -1), x, 0)),
               # (windows that do not overlap: where two share their maximum, the scatter writes it once but its
               # backward, a gather, sends it both gradients: PyTorch's definition, which no difference quotient
               # matches)
               S("max_unpool2d_output_size_unbatched", distinct((3, 5, 5)),
                 fn=lambda x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2, output_size=(5, 5)),
                 ref=lambda x: _unpool_ref(x, 2, 2))),
           errors=(E("max_unpool2d_index", lambda: F.max_unpool2d(t(1, 1, 2, 2), mf.tensor([[[[0, 1], [2, 16]]]]), 2),
                     RuntimeError, "max_unpool2d: Found an invalid max index"),)),
    OpInfo("unfold", F.unfold, unfold_ref, spelled="F.unfold", torch=_tf("unfold"), samples=(
               S("unfold", (2, 3, 5, 6), kernel_size=(2, 3), padding=1, stride=(2, 1)),
               S("unfold_dilation_unbatched", (2, 7, 6), kernel_size=2, dilation=(2, 1), stride=2)),
           errors=(E("unfold_2d", lambda: F.unfold(t(3, 4), 2), ValueError,
                     "unfold: Input Error: Only 3D or 4D input Tensors are supported"),)),
    OpInfo("fold", F.fold, fold_ref, spelled="F.fold", torch=_tf("fold"), samples=(
               S("fold", (2, 18, 18), output_size=(5, 6), kernel_size=(2, 3), padding=1, stride=(2, 1)),
               S("fold_overlap_unbatched", (8, 9), output_size=4, kernel_size=2, stride=1),
               S("fold_dilation_odd_size", (1, 4, 3), output_size=(5, 4), kernel_size=2, dilation=2, stride=(1, 2))),
           errors=(E("fold_blocks", lambda: F.fold(t(1, 4, 5), (4, 4), 2), RuntimeError,
                     "fold: Given output_size=.*expected size of input's dimension 2 to match the calculated number "
                     "of sliding blocks 3 \\* 3 = 9, but got input.size\\(2\\)=5"),
                   E("fold_channels", lambda: F.fold(t(1, 5, 9), (4, 4), 2), RuntimeError,
                     "fold: Expected size of input's dimension 1 to be divisible by the product of kernel_size"))),
    OpInfo("affine_grid", F.affine_grid, affine_grid_ref, spelled="F.affine_grid", torch=_tf("affine_grid"),
           samples=(S("affine_grid", (2, 2, 3), size=(2, 3, 4, 5), align_corners=False),
                    S("affine_grid_corners_one_column", (1, 2, 3), size=(1, 1, 3, 1), align_corners=True)),
           errors=(E("affine_grid_theta_shape", lambda: F.affine_grid(t(2, 3, 3), (2, 1, 4, 4), align_corners=False),
                     ValueError, "affine_grid: Expected a batch of 2D affine matrices of shape Nx2x3"),)),
    OpInfo("grid_sample", F.grid_sample, grid_sample_ref, spelled="F.grid_sample", torch=_tf("grid_sample"),
           gpu_tol=1e-4, samples=(
               S("grid_sample", (2, 3, 4, 5), distinct((2, 3, 6, 2)), fn=lambda x, g: F.grid_sample(
                   x, g * 1.2, align_corners=False), ref=lambda x, g: grid_sample_ref(x, g * 1.2)),
               S("grid_sample_border_corners", (1, 2, 5, 4), distinct((1, 4, 3, 2)), padding_mode="border",
                 align_corners=True),
               S("grid_sample_zeros_corners", (1, 2, 3, 3), distinct((1, 5, 2, 2)), align_corners=True),
               S("grid_sample_nearest", (2, 1, 4, 4), const(distinct((2, 3, 3, 2))), mode="nearest",
                 align_corners=False)),
           errors=(E("grid_sample_mode", lambda: F.grid_sample(t(1, 1, 2, 3, 3), t(1, 1, 1, 1, 3), mode="bicubic",
                                                                 align_corners=False), RuntimeError,
                     "grid_sample: bicubic interpolation only supports 4-D input"),
                   E("grid_sample_grid_shape", lambda: F.grid_sample(t(1, 1, 3, 3), t(1, 2, 2, 3),
                                                                     align_corners=False), ValueError,
                     "grid_sample: expected a 4-D input"))),
    OpInfo("local_response_norm", F.local_response_norm, local_response_norm_ref, spelled="F.local_response_norm",
           torch=_tf("local_response_norm"), gpu_tol=1e-4, samples=(
               S("local_response_norm", (2, 5, 3, 4), size=3),
               S("local_response_norm_even_3d", (2, 6, 7), size=4, alpha=0.5, beta=0.6, k=2.0),
               S("local_response_norm_5d", (1, 4, 2, 3, 2), size=2, alpha=0.1)),
           errors=(E("local_response_norm_2d", lambda: F.local_response_norm(t(2, 3), 2), ValueError,
                     "local_response_norm: Expected 3D or higher dimensionality input"),
                   E("local_response_norm_size", lambda: F.local_response_norm(t(1, 3, 4), 0), ValueError,
                     "local_response_norm: size must be a positive int"))),
    OpInfo("conv_transpose1d", F.conv_transpose1d, conv_transpose1d_ref, spelled="F.conv_transpose1d",
           torch=_tf("conv_transpose1d"), gpu_tol=1e-4, dtypes=(np.dtype(np.float32), np.dtype(np.float64)),
           samples=(S("conv_transpose1d", (2, 4, 6), (4, 2, 3), (2,), stride=2, padding=1, output_padding=1),
                    S("conv_transpose1d_groups_dilation", (1, 4, 5), (4, 1, 2), groups=2, dilation=2),
                    S("conv_transpose1d_unbatched", (3, 7), (3, 2, 3), padding=1)),
           errors=(E("conv_transpose1d_not_3d", lambda: F.conv_transpose1d(t(1, 3, 4, 4), t(3, 2, 3)), ValueError,
                     "conv_transpose1d: expected a 3-D input"),
                   E("conv_transpose1d_weight", lambda: F.conv_transpose1d(t(1, 3, 4), t(3, 2, 3, 3)), ValueError,
                     "conv_transpose1d: weight must be 3-D"))),
    OpInfo("conv1d", F.conv1d, conv1d_ref, spelled="F.conv1d", gpu_tol=1e-4, torch=_tf("conv1d"), samples=(
               S("conv1d", (2, 3, 9), (4, 3, 3), (4,)),
               S("conv1d_stride_pad_dilation_groups", (1, 4, 11), (6, 2, 2), stride=2, padding=1, dilation=2,
                 groups=2),
               S("conv1d_unbatched", (3, 7), (2, 3, 3), padding=1)),
           errors=(E("conv1d_not_3d", lambda: F.conv1d(t(1, 3, 4, 4), t(4, 3, 3)), ValueError,
                     "conv1d: expected a 3-D input"),
                   E("conv1d_weight", lambda: F.conv1d(t(1, 3, 4), t(4, 3, 3, 3)), ValueError, "weight must be 3-D"))),
    OpInfo("instance_norm", F.instance_norm, instance_norm_ref, spelled="F.instance_norm", gpu_tol=1e-4,
           torch=lambda T, x, *a, **kw: T.nn.functional.instance_norm(x, None, None, *a, **kw),
           samples=(S("instance_norm", (2, 4, 3, 3)), S("instance_norm_1d", (3, 2, 5)),
                    S("instance_norm_eps", (2, 3, 4, 2), eps=1e-3),
                    S("instance_norm_affine", (2, 3, 4, 2), pos((3,)), (3,),
                      fn=lambda x, w, b: F.instance_norm(x, weight=w, bias=b), ref=instance_norm_ref)),
           errors=(E("instance_norm_one_position", lambda: F.instance_norm(t(2, 3, 1)), ValueError,
                     "more than 1 spatial element"),)),
    OpInfo("prelu", F.prelu, prelu_ref, spelled="F.prelu", torch=_tf("prelu"), samples=(
               S("prelu_per_channel", distinct((2, 3, 4)), pos((3,))),
               S("prelu_one_slope", distinct((5, 2)), pos((1,))),
               S("prelu_1d", distinct((6,)), pos((1,)))),
           errors=(E("prelu_weight", lambda: F.prelu(t(2, 3, 4), t(2)), ValueError, "weight must hold 1 value"),)),
    OpInfo("pixel_shuffle", F.pixel_shuffle, pixel_shuffle_ref, spelled="F.pixel_shuffle", torch=_tf("pixel_shuffle"),
           samples=(S("pixel_shuffle", (2, 8, 3, 2), upscale_factor=2),
                    S("pixel_shuffle_3d", (9, 2, 2), upscale_factor=3)),
           errors=(E("pixel_shuffle_channels", lambda: F.pixel_shuffle(t(1, 5, 2, 2), 2), ValueError,
                     "divisible by upscale_factor squared"),)),
    OpInfo("pixel_unshuffle", F.pixel_unshuffle, pixel_unshuffle_ref, spelled="F.pixel_unshuffle",
           torch=_tf("pixel_unshuffle"), samples=(S("pixel_unshuffle", (2, 2, 4, 6), downscale_factor=2),),
           errors=(E("pixel_unshuffle_size", lambda: F.pixel_unshuffle(t(1, 2, 3, 4), 2), ValueError,
                     "must be divisible by downscale_factor"),)),
]


# ---------------------------------------------------------------- reductions, scans, matmul forms and shape helpers (ops/reduce.py, ops/matmul.py, ops/shape.py)

def _vector_norm_ref(a, ord=2, dim=None, keepdim=False):
    axis = dim if a.ndim else None
    m = np.abs(a)
    if ord == math.inf:
        out = m.max(axis=axis, keepdims=keepdim)
    elif ord == -math.inf:
        out = m.min(axis=axis, keepdims=keepdim)
    elif ord == 0:
        out = (m != 0).sum(axis=axis, keepdims=keepdim).astype(a.dtype)
    else:
        out = (m ** ord).sum(axis=axis, keepdims=keepdim) ** (1 / ord)
    return np.asarray(out)


def _norm_ref(a, p="fro", dim=None, keepdim=False):
    return _vector_norm_ref(a, 2 if p == "fro" else p, dim, keepdim)


def _logsumexp_ref(a, dim=None, keepdim=False):
    m = np.max(a, axis=dim, keepdims=True)
    out = np.log(np.sum(np.exp(a - m), axis=dim, keepdims=True)) + m
    return out if keepdim else (out.reshape(()) if dim is None else np.squeeze(out, dim))


def _scan_ref(np_fn):
    return lambda a, dim: a.copy() if a.ndim == 0 else np_fn(a, axis=dim)


def _zeroed(a, rows):
    """``a`` with zeros at ``rows`` (pairs of indices): gradients of products where the input is 0."""
    mask = np.ones(a.shape)
    for i in rows:
        mask[i] = 0
    return a * (mf.tensor(mask, dtype=a.dtype, device=a.device) if isinstance(a, mf.Tensor) else mask)


def _joined(pieces, dim, join):
    """Pieces joined back, the i-th scaled by i + 1: each piece's gradient is its own."""
    return join([p * (i + 1) for i, p in enumerate(pieces)], dim)


def _np_split(a, size, dim):
    n = a.shape[dim]
    bounds = np.cumsum(size)[:-1] if isinstance(size, (tuple, list)) else range(size, n, size)
    return np.split(a, list(bounds), axis=dim)


def _truth_weighted(name):
    """any / all give no gradient: the entry weighs a differentiable sum by their result, so the
    suites can run them (tests/test_reduce_shape.py checks the raw results and dtypes)."""
    def op(a, dim=None, keepdim=False):
        truth = getattr(a > 0.3, name)(dim=dim, keepdim=keepdim)
        return a.sum(dim=dim, keepdim=keepdim) * truth

    def ref(a, dim=None, keepdim=False):
        return np.sum(a, axis=dim, keepdims=keepdim) * getattr(np, name)(a > 0.3, axis=dim, keepdims=keepdim)
    return op, ref


def _moved_ref(a, source, destination):
    return np.moveaxis(a, source, destination)


def _MEDIAN(a, dim=None, keepdim=False):  # noqa: N802
    return a.median() if dim is None else a.median(dim, keepdim=keepdim).values


def _median_ref(a, dim=None, keepdim=False):
    """The lower median (PyTorch's): the ((n - 1) // 2)-th smallest."""
    if dim is None:
        return np.sort(a, axis=None)[(a.size - 1) // 2]
    if a.ndim == 0:
        return a
    out = np.take(np.sort(a, axis=dim), (a.shape[dim] - 1) // 2, axis=dim)
    return np.expand_dims(out, dim) if keepdim else out


def _later_running_argmax(a):
    """Along the last axis, where the running maximum was reached, the later index on ties."""
    out = np.zeros(a.shape, np.int64)
    for row in np.ndindex(a.shape[:-1]):
        best = 0
        for j in range(a.shape[-1]):
            best = j if a[row][j] >= a[row][best] else best
            out[row][j] = best
    return out


_ANY, _ANY_REF = _truth_weighted("any")
_ALL, _ALL_REF = _truth_weighted("all")

REDUCE_OPS = [
    # ---- reductions
    OpInfo("prod", lambda a, **kw: a.prod(**kw), _reduce(np.prod), spelled="Tensor.prod", fuzz="reduction",
           aliases={"mf.prod": mf.prod}, torch=SAME, samples=(
               S("prod_all", (3, 4)), S("prod_dim", (3, 4, 2), dim=1), S("prod_dim_keepdim_odd", (5, 33), dim=0,
                                                                         keepdim=True),
               S("prod_0d", ()), S("prod_0d_dim", (), dim=-1), S("prod_size1", (1, 7), dim=-1),
               S("prod_with_zeros", (3, 5), fn=lambda a: _zeroed(a, [(0, 1), (2, 0), (2, 3)]).prod(1),
                 ref=lambda a: _zeroed(a, [(0, 1), (2, 0), (2, 3)]).prod(1)),
               S("prod_all_one_zero", (2, 3), fn=lambda a: _zeroed(a, [(1, 1)]).prod(),
                 ref=lambda a: _zeroed(a, [(1, 1)]).prod())),
           errors=(E("prod_dim_range", lambda: t(2, 3).prod(2), IndexError, "prod: dimension 2 out of range"),)),
    OpInfo("logsumexp", lambda a, **kw: a.logsumexp(**kw), _logsumexp_ref, spelled="Tensor.logsumexp",
           aliases={"mf.logsumexp": mf.logsumexp}, torch=SAME, samples=(
               S("logsumexp", (3, 33), dim=1), S("logsumexp_keepdim", (4, 5), dim=0, keepdim=True),
               S("logsumexp_dims", (2, 3, 4), dim=(0, 2)), S("logsumexp_0d", (), dim=0),
               S("logsumexp_large", (3, 4), fn=lambda a: (a * 1000).logsumexp(1),
                 ref=lambda a: _logsumexp_ref(a * 1000, 1), check={"eps": 1e-9})),
           errors=(E("logsumexp_dim_range", lambda: t(2, 3).logsumexp(-3), IndexError, "logsumexp: dimension -3"),
                   E("logsumexp_without_dim", lambda: mf.logsumexp(t(2, 3), keepdim=True), TypeError,
                     r"logsumexp: expected a dim \(an int or a tuple of ints\), got none"))),
    OpInfo("norm", lambda a, **kw: a.norm(**kw), _norm_ref, spelled="Tensor.norm", aliases={"mf.norm": mf.norm},
           torch=SAME, samples=(
               S("norm_fro", (3, 4)), S("norm_fro_dims", (2, 3, 4), dim=(0, 2)),
               S("norm_p1_dim", distinct((3, 5)), p=1, dim=1), S("norm_p3_keepdim", (4, 33), p=3, dim=0, keepdim=True),
               S("norm_inf", distinct((3, 5)), p=math.inf, dim=1), S("norm_neg_inf", distinct((3, 5)), p=-math.inf),
               S("norm_p0", (3, 4), p=0, dim=1), S("norm_p_half", pos((2, 5)), p=0.5, dim=-1),
               S("norm_0d", distinct(())), S("norm_size1", (1, 1), p=2, dim=0)),
           errors=(E("norm_p_string", lambda: t(2, 3).norm(p="fr"), RuntimeError, "norm: p must be 'fro', 'nuc'"),
                   E("norm_int", lambda: mf.tensor([1, 2]).norm(), TypeError, "vector_norm: expected a floating"),
                   E("norm_inf_empty", lambda: mf.zeros(0).norm(math.inf), ValueError, "empty"),
                   E("norm_fro_three_dims", lambda: mf.norm(t(2, 3, 4), dim=(0, 1, 2)), RuntimeError,
                     r"norm: expected at most 2 dims for p='fro', got dim \(0, 1, 2\)"),
                   E("norm_fro_four_dims", lambda: t(2, 2, 2, 2).norm("fro", [0, 1, 2, 3], keepdim=True), RuntimeError,
                     r"norm: expected at most 2 dims for p='fro', got dim \(0, 1, 2, 3\)"))),
    OpInfo("vector_norm", lambda a, **kw: mf.linalg.vector_norm(a, **kw), _vector_norm_ref,
           spelled="mf.linalg.vector_norm", aliases={"mf.linalg": lambda a, **kw: mf.linalg.vector_norm(a, **kw)},
           torch=lambda T, a, **kw: T.linalg.vector_norm(a, **kw), samples=(
               S("vector_norm", (3, 4)), S("vector_norm_ord1", distinct((5, 3)), ord=1, dim=0, keepdim=True),
               S("vector_norm_ord_inf_dims", distinct((2, 3, 4)), ord=math.inf, dim=(1, 2)),
               S("vector_norm_ord4", (7,), ord=4)),
           errors=(E("vector_norm_ord_string", lambda: mf.linalg.vector_norm(t(3), ord="fro"), TypeError,
                     "vector_norm: ord must be a number"),)),
    OpInfo("cov", mf.cov, lambda a, correction=1: np.cov(a, ddof=correction), spelled="mf.cov",
           aliases={"Tensor.cov": lambda a, **kw: a.cov(**kw)}, torch=lambda T, a, **kw: T.cov(a, **kw), samples=(
               S("cov", (3, 6)), S("cov_correction0", (2, 5), correction=0), S("cov_1d", (7,)),
               S("cov_weights", (3, 6), fn=lambda a: mf.cov(a, fweights=_const(a, [1, 2, 1, 3, 1, 1], np.int64),
                                                           aweights=_const(a, [0.5, 1, 2, 1, 1, 0.3], np.float64)),
                 ref=lambda a: np.cov(a, fweights=[1, 2, 1, 3, 1, 1], aweights=[0.5, 1, 2, 1, 1, 0.3]))),
           errors=(E("cov_3d", lambda: mf.cov(t(2, 2, 2)), RuntimeError, "expected input to have two or fewer"),
                   E("cov_float_fweights", lambda: mf.cov(t(2, 3), fweights=t(3)), TypeError,
                     "fweights to have an integral dtype"))),
    OpInfo("corrcoef", mf.corrcoef, np.corrcoef, spelled="mf.corrcoef",
           aliases={"Tensor.corrcoef": _method("corrcoef")},
           torch=lambda T, a: T.corrcoef(a), samples=(S("corrcoef", (3, 6)), S("corrcoef_rows", (5, 4)))),
    OpInfo("linalg_norm", lambda a, **kw: mf.linalg.norm(a, **kw), lambda a, ord=None, dim=None, keepdim=False:
           np.linalg.norm(a, ord, dim, keepdim) if ord is not None or dim is not None else np.linalg.norm(a.ravel()),
           spelled="mf.linalg.norm", torch=lambda T, a, **kw: T.linalg.norm(a, **kw), samples=(
               S("linalg_norm_all", (2, 3, 4)), S("linalg_norm_vector_dim", (3, 5), ord=3, dim=1),
               S("linalg_norm_fro", (4, 3), ord="fro"), S("linalg_norm_inf", distinct((4, 3)), ord=math.inf),
               S("linalg_norm_neg_inf", distinct((3, 4)), ord=-math.inf, dim=(1, 0)),
               S("linalg_norm_one_keepdim", distinct((2, 4, 3)), ord=1, dim=(0, 2), keepdim=True),
               S("linalg_norm_neg_one", distinct((5, 2)), ord=-1), S("linalg_norm_1d_ord", (6,), ord=1)),
           errors=(E("linalg_norm_3d_ord", lambda: mf.linalg.norm(t(2, 2, 2), ord=1), RuntimeError,
                     "if dim is not specified but ord is, the input must be 1D or 2D"),
                   E("linalg_norm_nuc_half", lambda: mf.linalg.norm(t(2, 2, dtype=mf.float16), ord="nuc"),
                     TypeError, "Low precision dtypes not supported. Got Half"),
                   E("linalg_norm_ord", lambda: mf.linalg.matrix_norm(t(2, 2), ord=3), RuntimeError,
                     "ord must be 'fro', 'nuc', inf, -inf, 1, -1, 2 or -2"),
                   E("linalg_norm_1d_matrix", lambda: mf.linalg.matrix_norm(t(3)), RuntimeError,
                     "must have at least 2 dimensions"))),
    OpInfo("median", _MEDIAN, _median_ref, spelled="Tensor.median", aliases={"mf.median": _by_function(mf.median)},
           torch=SAME, samples=(
               S("median_all", distinct((3, 4))), S("median_all_odd", distinct((33,))),
               S("median_dim", distinct((3, 4)), dim=1), S("median_dim_keepdim_odd", distinct((5, 3)), dim=0, keepdim=True),
               S("median_0d", distinct(()), dim=0),
               S("median_indices", distinct((4, 5)), fn=lambda a: a * a.median(-1).indices.unsqueeze(-1),
                 ref=lambda a: a * np.argsort(a, -1)[:, 2:3])),
           errors=(E("median_empty", lambda: mf.zeros(0, dtype=mf.int64).median(), ValueError,
                     "median: cannot reduce over an empty"),
                   E("median_dim_tuple", lambda: t(2, 3).median((0, 1)), TypeError, "median: dim must be an int"))),
    OpInfo("any", _ANY, _ANY_REF, spelled="Tensor.any", aliases={"mf.any": lambda a, **kw: _ANY(a, **kw)}, samples=(
        S("any_all", (3, 4)), S("any_dim", (3, 4), dim=1), S("any_dims_keepdim", (2, 3, 4), dim=(0, 2), keepdim=True),
        S("any_0d", (), dim=0)),
           errors=(E("any_dim_range", lambda: t(2, 3).any(5), IndexError, "any: dimension 5"),)),
    OpInfo("all", _ALL, _ALL_REF, spelled="Tensor.all", aliases={"mf.all": lambda a, **kw: _ALL(a, **kw)}, samples=(
        S("all_all", (3, 4)), S("all_dim", (3, 4), dim=0), S("all_keepdim", (5, 2), dim=-1, keepdim=True))),
    # ---- scans
    OpInfo("cumsum", lambda a, **kw: a.cumsum(**kw), _scan_ref(np.cumsum), spelled="Tensor.cumsum",
           aliases={"mf.cumsum": lambda a, **kw: mf.cumsum(a, **kw)}, torch=SAME, samples=(
               S("cumsum", (3, 4), dim=1), S("cumsum_dim0_odd", (33, 2), dim=0), S("cumsum_neg", (2, 3, 4), dim=-2),
               S("cumsum_0d", (), dim=0), S("cumsum_size1", (1,), dim=-1)),
           errors=(E("cumsum_dim_range", lambda: t(2, 3).cumsum(3), IndexError,
                     "cumsum: dim 3 is out of range for a 2-d tensor"),
                   E("cumsum_dim_float", lambda: t(2, 3).cumsum(1.0), TypeError, "cumsum: dim must be an int"))),
    OpInfo("cumprod", lambda a, **kw: a.cumprod(**kw), _scan_ref(np.cumprod), spelled="Tensor.cumprod",
           aliases={"mf.cumprod": lambda a, **kw: mf.cumprod(a, **kw)}, torch=SAME, samples=(
               S("cumprod", (3, 4), dim=1), S("cumprod_dim0", (5, 3), dim=0), S("cumprod_0d", (), dim=-1),
               S("cumprod_zeros", (3, 6), fn=lambda a: _zeroed(a, [(0, 2), (1, 0), (1, 4), (2, 5)]).cumprod(1),
                 ref=lambda a: np.cumprod(_zeroed(a, [(0, 2), (1, 0), (1, 4), (2, 5)]), 1))),
           errors=(E("cumprod_dim_range", lambda: t(4).cumprod(-2), IndexError,
                     "cumprod: dim -2 is out of range for a 1-d tensor"),)),
    OpInfo("cummax", lambda a, dim: a.cummax(dim).values, lambda a, dim: np.maximum.accumulate(a, dim) if a.ndim else a,
           spelled="Tensor.cummax", aliases={"mf.cummax": lambda a, dim: mf.cummax(a, dim).values},
           torch=lambda T, a, dim: a.cummax(dim).values, samples=(
               S("cummax", distinct((3, 33)), dim=1), S("cummax_dim0", distinct((5, 2, 3)), dim=0),
               S("cummax_0d", distinct(()), dim=0),
               S("cummax_ties_later_index", (2, 6), fn=lambda a: a * (a.detach() > 0).cummax(1).indices,
                 ref=lambda a: a * _later_running_argmax(a > 0))),
           errors=(E("cummax_dim_range", lambda: t(3).cummax(1), IndexError, "cummax: dim 1 is out of range"),)),
    OpInfo("cummin", lambda a, dim: a.cummin(dim).values, lambda a, dim: np.minimum.accumulate(a, dim),
           spelled="Tensor.cummin", aliases={"mf.cummin": lambda a, dim: mf.cummin(a, dim).values},
           torch=lambda T, a, dim: a.cummin(dim).values, samples=(
               S("cummin", distinct((4, 7)), dim=-1), S("cummin_odd", distinct((33,)), dim=0))),
    # ---- matrix products
    OpInfo("mm", lambda a, b: a.mm(b), np.matmul, spelled="Tensor.mm", aliases={"mf.mm": mf.mm}, torch=SAME,
           gpu_tol=1e-4, samples=(S("mm", (3, 4), (4, 5)), S("mm_odd", (1, 33), (33, 7)), S("mm_size1", (1, 1), (1, 3))),
           errors=(E("mm_3d", lambda: mf.mm(t(2, 3, 4), t(4, 5)), RuntimeError, "mm: expected 2-D tensors, got 3-D"),
                   E("mm_inner", lambda: mf.mm(t(2, 3), t(4, 5)), RuntimeError, r"mm: shapes \(2x3\) and \(4x5\)"),
                   E("mm_dtype", lambda: mf.mm(t(2, 3), t(3, 2, dtype=mf.float64)), RuntimeError, "mm: .*same dtype"))),
    OpInfo("bmm", lambda a, b: a.bmm(b), np.matmul, spelled="Tensor.bmm", aliases={"mf.bmm": mf.bmm}, torch=SAME,
           gpu_tol=1e-4, samples=(S("bmm", (2, 3, 4), (2, 4, 5)), S("bmm_odd", (3, 1, 33), (3, 33, 2))),
           errors=(E("bmm_batch", lambda: mf.bmm(t(2, 3, 4), t(3, 4, 5)), RuntimeError, "bmm: batch sizes differ: 2 and 3"),
                   E("bmm_2d", lambda: mf.bmm(t(3, 4), t(4, 5)), RuntimeError, "bmm: expected 3-D tensors"),
                   E("bmm_inner", lambda: mf.bmm(t(2, 3, 4), t(2, 3, 4)), RuntimeError, "bmm: shapes"))),
    OpInfo("dot", lambda a, b: a.dot(b), np.dot, spelled="Tensor.dot", aliases={"mf.dot": mf.dot}, torch=SAME,
           samples=(S("dot", (5,), (5,)), S("dot_odd", (33,), (33,))),
           errors=(E("dot_sizes", lambda: mf.dot(t(3), t(4)), RuntimeError, "dot: expected vectors of one size"),)),
    OpInfo("outer", lambda a, b: a.outer(b), np.outer, spelled="Tensor.outer",
           aliases={"mf.outer": mf.outer, "mf.ger": mf.ger, "Tensor.ger": _method("ger")},
           torch=SAME, samples=(S("outer", (3,), (4,)), S("outer_size1", (1,), (33,))),
           errors=(E("outer_2d", lambda: mf.outer(t(2, 2), t(3)), RuntimeError, "outer: expected 1-D tensors"),
                   E("outer_number", lambda: t(3).outer(2.5), TypeError,
                     r"outer\(\): argument 'vec2' must be Tensor, not float"))),
    OpInfo("addmm", lambda c, a, b, **kw: mf.addmm(c, a, b, **kw),
           lambda c, a, b, beta=1, alpha=1: beta * c + alpha * (a @ b), spelled="mf.addmm",
           aliases={"Tensor.addmm": lambda c, a, b, **kw: c.addmm(a, b, **kw)},
           torch=lambda T, c, a, b, **kw: T.addmm(c, a, b, **kw), gpu_tol=1e-4, samples=(
               S("addmm", (3, 5), (3, 4), (4, 5)), S("addmm_broadcast_scaled", (5,), (3, 4), (4, 5), beta=0.5, alpha=-2.0),
               S("addmm_beta0", (1, 5), (2, 4), (4, 5), beta=0)),
           errors=(E("addmm_input_shape", lambda: mf.addmm(t(4, 5), t(3, 4), t(4, 5)), (ValueError, RuntimeError),
                     "addmm"),)),
    OpInfo("t", lambda a: a.t(), lambda a: a.T, spelled="Tensor.t", aliases={"mf.t": mf.t}, torch=SAME, samples=(
        S("t", (3, 4), fn=lambda a: a.t() @ a, ref=lambda a: a.T @ a), S("t_1d", (5,)), S("t_0d", ())),
           errors=(E("t_3d", lambda: t(2, 3, 4).t(), RuntimeError, "t: expects a tensor with at most 2 dimensions"),)),
    OpInfo("einsum", lambda *ops, eq: mf.einsum(eq, *ops), lambda *ops, eq: np.einsum(eq, *ops), spelled="mf.einsum",
           aliases={"mf.einsum(list)": lambda *ops, eq: mf.einsum(eq, list(ops))},
           torch=lambda T, *ops, eq: T.einsum(eq, *ops), gpu_tol=1e-4, samples=(
               S("einsum_mm", (3, 4), (4, 5), eq="ij,jk->ik"), S("einsum_bmm", (2, 3, 4), (2, 4, 5), eq="bij,bjk->bik"),
               S("einsum_inner", (5,), (5,), eq="i,i->"), S("einsum_transpose", (3, 4), eq="ij->ji"),
               S("einsum_attention", (2, 3, 4, 5), (2, 3, 6, 5), eq="bhqd,bhkd->bhqk"),
               S("einsum_ellipsis_broadcast", (2, 1, 3, 4), (3, 4, 5), eq="...ij,...jk->...ik"),
               S("einsum_implicit", (3, 4), (4, 5), eq="ij,jk"), S("einsum_trace", (4, 4), eq="ii->"),
               S("einsum_diagonal", (4, 4), eq="ii->i"), S("einsum_sum_one_operand", (3, 4), (4,), eq="ij,j->j"),
               S("einsum_three", (2, 3), (3, 4), (4, 1), eq="ij, jk, kl -> il"),
               S("einsum_outer_spaces", (3,), (2,), eq="i,j->ij"), S("einsum_batch_diag", (2, 3, 3), eq="bii->bi"),
               S("einsum_reduce_all", (2, 3, 4), fn=lambda a: mf.einsum("...->", a), ref=np.sum)),
           errors=(E("einsum_operand_count", lambda: mf.einsum("ij,jk->ik", t(2, 3)), ValueError,
                     "einsum: the equation 'ij,jk->ik' names 2 operands, got 1"),
                   E("einsum_subscript_count", lambda: mf.einsum("ijk->i", t(2, 3)), ValueError,
                     "einsum: operand 0 has 2 dimensions but its subscripts 'ijk' name 3"),
                   E("einsum_size", lambda: mf.einsum("ij,jk->ik", t(2, 3), t(4, 5)), ValueError,
                     "einsum: subscript 'j' has size 3 in one operand and 4"),
                   E("einsum_output", lambda: mf.einsum("ij->k", t(2, 3)), ValueError, "output subscript 'k'"),
                   E("einsum_char", lambda: mf.einsum("i1->i", t(2, 3)), ValueError, "invalid equation"),
                   E("einsum_dtype", lambda: mf.einsum("i,i->", t(3), t(3, dtype=mf.float64)), RuntimeError,
                     "einsum: .*one dtype"))),
    # ---- splitting and joining back
    OpInfo("split", lambda a, size, dim=0: _joined(a.split(size, dim), dim, mf.cat),
           lambda a, size, dim=0: _joined(_np_split(a, size, dim), dim, np.concatenate), spelled="Tensor.split",
           aliases={"mf.split": lambda a, size, dim=0: _joined(mf.split(a, size, dim), dim, mf.cat),
                    "mf.unsafe_split": lambda a, size, dim=0: _joined(mf.unsafe_split(a, size, dim), dim, mf.cat)},
           torch=lambda T, a, size, dim=0: _joined(a.split(size, dim), dim, T.cat), samples=(
               S("split", (7, 3), size=2), S("split_sections", (3, 6), size=[1, 0, 5], dim=1),
               S("split_neg_dim_odd", (2, 33), size=8, dim=-1), S("split_bigger", (3,), size=5),
               S("split_one_piece_used", (6, 2), fn=lambda a: a.split(4)[1].exp(), ref=lambda a: np.exp(a[4:]))),
           errors=(E("split_zero", lambda: t(5).split(0), RuntimeError, "split: split_size must be positive, got 0"),
                   E("split_sum", lambda: t(5).split([2, 2]), RuntimeError, "split: split sizes must .* sum to the size 5"),
                   E("split_0d", lambda: t().split(1), RuntimeError, "split: expected a tensor of at least 1 dimension"),
                   E("split_dim", lambda: t(2, 3).split(1, 2), IndexError, "split: dim 2 is out of range for a 2-d"))),
    OpInfo("chunk", lambda a, chunks, dim=0: _joined(a.chunk(chunks, dim), dim, mf.cat),
           lambda a, chunks, dim=0: _joined(_np_split(a, -(-a.shape[dim] // chunks), dim), dim, np.concatenate),
           spelled="Tensor.chunk", aliases={"mf.chunk": lambda a, chunks, dim=0: _joined(mf.chunk(a, chunks, dim), dim,
                                                                                          mf.cat),
                                            "mf.unsafe_chunk": lambda a, chunks, dim=0: _joined(
                                                mf.unsafe_chunk(a, chunks, dim), dim, mf.cat)},
           torch=lambda T, a, chunks, dim=0: _joined(a.chunk(chunks, dim), dim, T.cat), samples=(
               S("chunk", (7, 3), chunks=3), S("chunk_fewer_pieces", (2, 6), chunks=4, dim=1),
               S("chunk_odd", (33,), chunks=33)),
           errors=(E("chunk_zero", lambda: t(4).chunk(0), RuntimeError, "chunk: chunks must be greater than 0, got 0"),
                   E("chunk_tuple", lambda: t(4).chunk(()), TypeError, r"chunk: chunks must be an int, got \(\)"))),
    OpInfo("unbind", lambda a, dim=0: _joined(a.unbind(dim), dim, mf.stack),
           lambda a, dim=0: _joined([np.take(a, i, dim) for i in range(a.shape[dim])], dim, np.stack),
           spelled="Tensor.unbind", aliases={"mf.unbind": lambda a, dim=0: _joined(mf.unbind(a, dim), dim, mf.stack)},
           torch=lambda T, a, dim=0: _joined(a.unbind(dim), dim, T.stack), samples=(
               S("unbind", (3, 4)), S("unbind_dim", (2, 3, 4), dim=-1), S("unbind_size1", (1, 5), dim=0),
               S("unbind_one_used", (3, 4), fn=lambda a: a.unbind(1)[2] * 3, ref=lambda a: a[:, 2] * 3)),
           errors=(E("unbind_0d", lambda: t().unbind(), IndexError, "unbind: a 0-d tensor"),)),
    OpInfo("narrow", lambda a, **kw: a.narrow(**kw), lambda a, dim, start, length: np.take(
        a, range(start % a.shape[dim], start % a.shape[dim] + length), dim), spelled="Tensor.narrow",
           aliases={"mf.narrow": lambda a, **kw: mf.narrow(a, **kw)}, torch=SAME, samples=(
               S("narrow", (4, 5), dim=1, start=1, length=3), S("narrow_negative_start", (6, 2), dim=0, start=-2, length=2)),
           errors=(E("narrow_length", lambda: t(5).narrow(0, 3, 4), RuntimeError, r"narrow: start \(3\) \+ length \(4\)"),)),
    # ---- repeating, masking, moving
    OpInfo("repeat", lambda a, sizes: a.repeat(*sizes), lambda a, sizes: np.tile(a, sizes), spelled="Tensor.repeat",
           torch=SAME, samples=(
               S("repeat", (2, 3), sizes=(2, 3)), S("repeat_new_dims", (3,), sizes=(2, 1, 2)),
               S("repeat_0d", (), sizes=(4,)), S("repeat_zero", (2, 3), sizes=(0, 1)), S("repeat_odd", (1, 33), sizes=(3, 1))),
           errors=(E("repeat_too_few", lambda: t(2, 3).repeat(2), RuntimeError, "repeat: 1 repeats for a 2-d tensor"),
                   E("repeat_negative", lambda: t(2).repeat(-1), RuntimeError, "repeat: repeats must be non-negative"))),
    OpInfo("tile", lambda a, dims: a.tile(dims), lambda a, dims: np.tile(a, dims), spelled="Tensor.tile",
           aliases={"mf.tile": lambda a, dims: mf.tile(a, dims)}, torch=SAME, samples=(
               S("tile_short_dims", (2, 3), dims=(2,)), S("tile", (3,), dims=(2, 2)))),
    OpInfo("expand_as", lambda a, b: a.expand_as(b), lambda a, b: np.broadcast_to(a, b.shape),
           spelled="Tensor.expand_as", torch=SAME, samples=(S("expand_as", (3, 1), const((2, 3, 4))),)),
    OpInfo("view_as", lambda a, b: a.view_as(b), lambda a, b: a.reshape(b.shape), spelled="Tensor.view_as",
           aliases={"Tensor.reshape_as": lambda a, b: a.reshape_as(b)}, torch=SAME,
           samples=(S("view_as", (3, 4), const((2, 6))), S("view_as_0d", (1, 1), const(())))),
    OpInfo("tril", lambda a, **kw: a.tril(**kw), lambda a, diagonal=0: np.tril(a, diagonal), spelled="Tensor.tril",
           aliases={"mf.tril": mf.tril}, torch=SAME, samples=(
               S("tril", (4, 4)), S("tril_wide_batched", (2, 3, 5), diagonal=1), S("tril_tall", (5, 2), diagonal=-2)),
           errors=(E("tril_1d", lambda: t(3).tril(), RuntimeError, "tril: expected a tensor of at least 2 dimensions"),
                   E("tril_tuple", lambda: t(2, 2).tril((1,)), TypeError, r"tril: diagonal must be an int"))),
    OpInfo("triu", lambda a, **kw: a.triu(**kw), lambda a, diagonal=0: np.triu(a, diagonal), spelled="Tensor.triu",
           aliases={"mf.triu": mf.triu}, torch=SAME, samples=(
               S("triu", (4, 4)), S("triu_batched", (2, 5, 3), diagonal=-1), S("triu_above", (3, 4), diagonal=2))),
    OpInfo("flip", lambda a, dims: a.flip(dims), lambda a, dims: np.flip(a, dims), spelled="Tensor.flip",
           aliases={"mf.flip": lambda a, dims: mf.flip(a, dims), "Tensor.flip(*dims)": lambda a, dims: a.flip(*dims)},
           torch=SAME, samples=(S("flip", (3, 4), dims=(0,)), S("flip_two", (2, 3, 4), dims=(-1, 0)),
                                S("flip_odd", (33,), dims=(0,))),
           errors=(E("flip_repeated", lambda: t(2, 3).flip((0, -2)), RuntimeError, "flip: dims"),)),
    OpInfo("roll", lambda a, **kw: a.roll(**kw), lambda a, shifts, dims=None: np.roll(a, shifts, dims),
           spelled="Tensor.roll", aliases={"mf.roll": lambda a, **kw: mf.roll(a, **kw)}, torch=SAME, samples=(
               S("roll", (3, 4), shifts=1, dims=1), S("roll_two", (3, 4), shifts=(-1, 5), dims=(0, 1)),
               S("roll_flat", (3, 4), shifts=5), S("roll_odd", (33,), shifts=-7, dims=0),
               S("roll_flat_empty_dims", (3, 4), fn=lambda a: a.roll(2, ()), ref=lambda a: np.roll(a, 2))),
           errors=(E("roll_lengths", lambda: t(3, 4).roll((1, 2), 0), RuntimeError, "roll: shifts and dims"),)),
    OpInfo("diag", lambda a, **kw: a.diag(**kw), lambda a, diagonal=0: np.diag(a, diagonal), spelled="Tensor.diag",
           aliases={"mf.diag": mf.diag}, torch=SAME, samples=(
               S("diag_vector", (4,)), S("diag_vector_offset", (3,), diagonal=-2), S("diag_matrix", (4, 4)),
               S("diag_matrix_wide_offset", (3, 5), diagonal=1), S("diag_matrix_tall_below", (5, 3), diagonal=-3)),
           errors=(E("diag_3d", lambda: t(2, 2, 2).diag(), RuntimeError, "diag: expected a 1-D or 2-D tensor"),)),
    OpInfo("movedim", lambda a, **kw: a.movedim(**kw), _moved_ref, spelled="Tensor.movedim",
           aliases={"mf.movedim": lambda a, **kw: mf.movedim(a, **kw),
                    "Tensor.moveaxis": lambda a, **kw: a.moveaxis(**kw)}, torch=SAME, samples=(
               S("movedim", (2, 3, 4), source=0, destination=-1),
               S("movedim_two", (2, 3, 4, 5), source=(0, 3), destination=(2, 0))),
           errors=(E("movedim_lengths", lambda: t(2, 3).movedim((0, 1), 0), RuntimeError, "movedim: source and"),)),
    OpInfo("swapaxes", lambda a, d0, d1: a.swapaxes(d0, d1), lambda a, d0, d1: np.swapaxes(a, d0, d1),
           spelled="Tensor.swapaxes", aliases={"mf.swapaxes": lambda a, d0, d1: mf.swapaxes(a, d0, d1),
                                                "Tensor.swapdims": lambda a, d0, d1: a.swapdims(d0, d1)},
           torch=SAME, samples=(S("swapaxes", (2, 3, 4), d0=0, d1=2),)),
]

# ---------------------------------------------------------------- products (ops/products.py)
PRODUCT_OPS = [
    # ---- matrix-vector and scaled batched products
    OpInfo("mv", lambda a, v: a.mv(v), np.matmul, spelled="Tensor.mv", aliases={"mf.mv": mf.mv}, torch=SAME,
           gpu_tol=1e-4, samples=(S("mv", (3, 4), (4,)), S("mv_odd", (1, 33), (33,)), S("mv_size1", (5, 1), (1,))),
           errors=(E("mv_vec_size", lambda: mf.mv(t(2, 3), t(4)), RuntimeError, r"mv: size mismatch, matrix \[2, 3\]"),
                   E("mv_3d", lambda: mf.mv(t(2, 3, 1), t(3)), RuntimeError, "mv: expected a 2-D matrix and a 1-D"),
                   E("mv_dtype", lambda: mf.mv(t(2, 3), t(3, dtype=mf.float64)), RuntimeError, "mv: .*same dtype"),
                   E("mv_bool", lambda: mf.mv(mf.ones(2, 3, dtype=mf.bool), mf.ones(3, dtype=mf.bool)),
                     NotImplementedError, "mv: not implemented for bool"),
                   E("mv_not_tensor", lambda: mf.mv(t(2, 3), [1.0, 2.0, 3.0]), TypeError,
                     "mv\\(\\): argument 'vec' must be Tensor, not list"))),
    OpInfo("addmv", lambda c, a, v, **kw: mf.addmv(c, a, v, **kw),
           lambda c, a, v, beta=1, alpha=1: beta * c + alpha * (a @ v), spelled="mf.addmv",
           aliases={"Tensor.addmv": lambda c, a, v, **kw: c.addmv(a, v, **kw)},
           torch=lambda T, c, a, v, **kw: T.addmv(c, a, v, **kw), gpu_tol=1e-4, samples=(
               S("addmv", (3,), (3, 4), (4,)), S("addmv_broadcast_scaled", (1,), (5, 33), (33,), beta=0.5, alpha=-2.0),
               S("addmv_0d_input", (), (2, 3), (3,)), S("addmv_beta0", (3,), (3, 2), (2,), beta=0, alpha=3)),
           errors=(E("addmv_input_shape", lambda: mf.addmv(t(3), t(2, 3), t(3)), RuntimeError,
                     r"addmv: input of shape \[3\] does not broadcast to the product's shape \[2\]"),
                   E("addmv_input_2d", lambda: mf.addmv(t(2, 1), t(2, 3), t(3)), RuntimeError, "addmv: input of shape"),
                   E("addmv_dtype", lambda: mf.addmv(t(2, dtype=mf.float64), t(2, 3), t(3)), RuntimeError,
                     "addmv: expected all tensors to have the same dtype, got float64, float32, float32"),
                   E("addmv_beta_string", lambda: mf.addmv(t(2), t(2, 3), t(3), beta="1"), TypeError,
                     "addmv: beta and alpha must be real numbers"),
                   E("addmv_inplace_shape", lambda: t(1).addmv_(t(2, 3), t(3)), RuntimeError,
                     r"addmv_: bad in-place call: input of shape \[1\] and output of shape \[2\]"),
                   E("addmv_inplace_leaf", lambda: t(2, requires_grad=True).addmv_(t(2, 3), t(3)), RuntimeError,
                     "addmv_: a leaf Variable that requires grad"))),
    OpInfo("addr", lambda c, u, v, **kw: mf.addr(c, u, v, **kw),
           lambda c, u, v, beta=1, alpha=1: beta * c + alpha * np.outer(u, v), spelled="mf.addr",
           aliases={"Tensor.addr": lambda c, u, v, **kw: c.addr(u, v, **kw)},
           torch=lambda T, c, u, v, **kw: T.addr(c, u, v, **kw), samples=(
               S("addr", (3, 4), (3,), (4,)), S("addr_broadcast_scaled", (33,), (2,), (33,), beta=-1.5, alpha=0.5),
               S("addr_0d_input", (), (1,), (5,)), S("addr_beta0", (2, 1), (2,), (3,), beta=0)),
           errors=(E("addr_vec_2d", lambda: mf.addr(t(2, 3), t(2, 1), t(3)), RuntimeError,
                     "addr: expected 1-D argument vec1, but got 2-D"),
                   E("addr_int_float_alpha", lambda: mf.addr(mf.ones(2, 2, dtype=mf.int64), mf.ones(2, dtype=mf.int64),
                                                             mf.ones(2, dtype=mf.int64), alpha=1.5), RuntimeError,
                     "addr: for integral input tensors, argument alpha must not be a floating point"),
                   E("addr_bool_beta", lambda: mf.addr(t(2, 2), t(2), t(2), beta=True), RuntimeError,
                     "addr: a bool beta is only supported for bool results"),
                   E("addr_inplace_float_into_int", lambda: mf.zeros(2, 3, dtype=mf.int64).addr_(t(2), t(3)),
                     RuntimeError, "addr_: result type float32 can't be cast to the desired output type int64"),
                   E("addr_inplace_1d", lambda: t(3).addr_(t(2), t(3)), RuntimeError, "addr_: bad in-place call"))),
    OpInfo("baddbmm", lambda c, a, b, **kw: mf.baddbmm(c, a, b, **kw),
           lambda c, a, b, beta=1, alpha=1: beta * c + alpha * (a @ b), spelled="mf.baddbmm",
           aliases={"Tensor.baddbmm": lambda c, a, b, **kw: c.baddbmm(a, b, **kw)},
           torch=lambda T, c, a, b, **kw: T.baddbmm(c, a, b, **kw), gpu_tol=1e-4, samples=(
               S("baddbmm", (2, 3, 5), (2, 3, 4), (2, 4, 5)),
               S("baddbmm_broadcast_scaled", (3, 1), (2, 3, 33), (2, 33, 2), beta=0.25, alpha=-1.0),
               S("baddbmm_row_input", (5,), (1, 1, 4), (1, 4, 5)),
               S("baddbmm_beta0", (2, 3, 2), (2, 3, 1), (2, 1, 2), beta=0)),
           errors=(E("baddbmm_batch", lambda: mf.baddbmm(t(5), t(2, 3, 4), t(3, 4, 5)), RuntimeError,
                     "baddbmm: batch1 and batch2 must have the same number of batches, got 2 and 3"),
                   E("baddbmm_2d", lambda: mf.baddbmm(t(5), t(3, 4), t(4, 5)), RuntimeError,
                     r"baddbmm: batch1 must be a 3-D tensor, got shape \[3, 4\]"),
                   E("baddbmm_inner", lambda: mf.baddbmm(t(5), t(2, 3, 4), t(2, 5, 5)), RuntimeError,
                     "baddbmm: matrices of shapes"),
                   E("baddbmm_input_batch", lambda: mf.baddbmm(t(3, 3, 5), t(2, 3, 4), t(2, 4, 5)), RuntimeError,
                     "baddbmm: input of shape"),
                   E("baddbmm_dtype", lambda: mf.baddbmm(t(5, dtype=mf.float64), t(2, 3, 4), t(2, 4, 5)), RuntimeError,
                     "baddbmm: .*same dtype"))),
    OpInfo("addbmm", lambda c, a, b, **kw: mf.addbmm(c, a, b, **kw),
           lambda c, a, b, beta=1, alpha=1: beta * c + alpha * (a @ b).sum(0), spelled="mf.addbmm",
           aliases={"Tensor.addbmm": lambda c, a, b, **kw: c.addbmm(a, b, **kw)},
           torch=lambda T, c, a, b, **kw: T.addbmm(c, a, b, **kw), gpu_tol=1e-4, samples=(
               S("addbmm", (3, 5), (2, 3, 4), (2, 4, 5)),
               S("addbmm_broadcast_scaled", (5,), (3, 2, 33), (3, 33, 5), beta=2.0, alpha=0.5),
               S("addbmm_one_batch", (1, 1), (1, 4, 1), (1, 1, 3)),
               S("addbmm_beta0", (2, 2), (3, 2, 2), (3, 2, 2), beta=0)),
           errors=(E("addbmm_batch", lambda: mf.addbmm(t(5), t(2, 3, 4), t(3, 4, 5)), RuntimeError,
                     "addbmm: batch1 and batch2 must have the same number of batches"),
                   E("addbmm_4d", lambda: mf.addbmm(t(5), t(2, 3, 4, 5), t(2, 4, 5)), RuntimeError,
                     "addbmm: batch1 must be a 3-D tensor"),
                   E("addbmm_input_3d", lambda: mf.addbmm(t(2, 3, 5), t(2, 3, 4), t(2, 4, 5)), RuntimeError,
                     r"addbmm: input of shape \[2, 3, 5\] does not broadcast"))),
    # ---- contractions
    OpInfo("inner", lambda a, b: a.inner(b), np.inner, spelled="Tensor.inner", aliases={"mf.inner": mf.inner},
           torch=SAME, gpu_tol=1e-4, samples=(
               S("inner", (5,), (5,)), S("inner_matrices", (2, 3), (4, 3)), S("inner_batched_odd", (2, 1, 33), (33,)),
               S("inner_0d", (), (2, 3)), S("inner_0d_right", (4, 1), ())),
           errors=(E("inner_last_dim", lambda: mf.inner(t(2, 3), t(4, 2)), RuntimeError,
                     r"inner: the last dimension must match on both input tensors, got shapes \[2, 3\] and \[4, 2\]"),
                   E("inner_dtype", lambda: mf.inner(t(3), t(3, dtype=mf.float64)), RuntimeError,
                     "inner: .*same dtype"))),
    OpInfo("vdot", lambda a, b: a.vdot(b), np.vdot, spelled="Tensor.vdot", aliases={"mf.vdot": mf.vdot}, torch=SAME,
           samples=(S("vdot", (5,), (5,)), S("vdot_odd", (33,), (33,)), S("vdot_size1", (1,), (1,))),
           errors=(E("vdot_2d", lambda: mf.vdot(t(3, 1), t(3)), RuntimeError,
                     "vdot: 1-D tensors expected, but got 2-D and 1-D tensors"),
                   E("vdot_sizes", lambda: mf.vdot(t(3), t(4)), RuntimeError, "vdot: expected vectors of one size"),
                   E("vdot_dtype", lambda: mf.vdot(t(3), t(3, dtype=mf.float64)), RuntimeError, "vdot: .*same dtype"))),
    OpInfo("tensordot", lambda a, b, **kw: mf.tensordot(a, b, **kw), lambda a, b, dims=2: np.tensordot(a, b, dims),
           spelled="mf.tensordot", torch=lambda T, a, b, **kw: T.tensordot(a, b, **kw), gpu_tol=1e-4, samples=(
               S("tensordot", (2, 3, 4), (3, 4, 5)), S("tensordot_one", (2, 3, 33), (33, 5), dims=1),
               S("tensordot_outer", (2, 3), (4,), dims=0),
               S("tensordot_lists", (2, 3, 4), (4, 3, 5), dims=([1, 2], [1, 0])),
               S("tensordot_negative_dims", (2, 3, 4), (4, 3, 5), dims=[[-1], [0]]),
               S("tensordot_all", (2, 3), (2, 3), dims=2), S("tensordot_0d", (), (), dims=0)),
           errors=(E("tensordot_dims_negative", lambda: mf.tensordot(t(2, 3), t(3, 2), dims=-1), RuntimeError,
                     "tensordot: expects 0 <= dims"),
                   E("tensordot_dims_too_many", lambda: mf.tensordot(t(2, 3), t(3, 2), dims=3), RuntimeError,
                     "tensordot: expects 0 <= dims"),
                   E("tensordot_dims_float", lambda: mf.tensordot(t(2, 3), t(3, 2), dims=2.0), RuntimeError,
                     "tensordot: expects dims to be an int or two lists"),
                   E("tensordot_dims_ints", lambda: mf.tensordot(t(2, 3), t(3, 2), dims=(1, 0)), TypeError,
                     "tensordot: dims must be two lists of ints"),
                   E("tensordot_dims_three", lambda: mf.tensordot(t(2, 3), t(3, 2), dims=[[1], [0], [1]]), ValueError,
                     "tensordot: dims must hold two lists"),
                   E("tensordot_dims_lengths", lambda: mf.tensordot(t(2, 3), t(3, 2), dims=([1, 0], [0])), RuntimeError,
                     "tensordot: both dimension lists should have the same length"),
                   E("tensordot_sizes", lambda: mf.tensordot(t(2, 3), t(2, 3), dims=([1], [0])), RuntimeError,
                     "tensordot: contracted dimensions need to match"),
                   E("tensordot_dim_range", lambda: mf.tensordot(t(2, 3), t(3, 2), dims=([5], [0])), IndexError,
                     "tensordot: dim 5 is out of range"),
                   E("tensordot_repeated", lambda: mf.tensordot(t(3, 3), t(3, 3), dims=([1, 1], [0, 1])), RuntimeError,
                     "tensordot: a dim appears more than once"),
                   E("tensordot_dtype", lambda: mf.tensordot(t(2, 3), t(3, dtype=mf.float64), dims=1), RuntimeError,
                     "tensordot: .*same dtype"))),
    OpInfo("kron", lambda a, b: a.kron(b), np.kron, spelled="Tensor.kron", aliases={"mf.kron": mf.kron}, torch=SAME,
           samples=(S("kron", (2, 3), (4, 5)), S("kron_pad_dims", (2,), (3, 1)), S("kron_0d", (), (2, 3)),
                    S("kron_3d_odd", (2, 1, 3), (1, 33)), S("kron_0d_both", (), ())),
           errors=(E("kron_not_tensor", lambda: mf.kron(t(2), 3.0), TypeError,
                     "kron\\(\\): argument 'other' must be Tensor"),)),
    OpInfo("cross", lambda a, b, **kw: a.cross(b, **kw),
           lambda a, b, dim=None: np.cross(a, b, axis=a.shape.index(3) if dim is None else dim), spelled="Tensor.cross",
           aliases={"mf.cross": lambda a, b, **kw: mf.cross(a, b, **kw)}, torch=SAME, samples=(
               S("cross_vec_last", (4, 3), (4, 3), dim=-1), S("cross_vec_first", (3, 5), (3, 5), dim=0),
               S("cross_vec_broadcast", (2, 3, 1), (1, 3, 33), dim=1), S("cross_vec_1d", (3,), (3,), dim=0),
               S("cross_vec_dim_none", (2, 3, 3), (2, 3, 3),
                 fn=lambda a, b: pytest.warns(UserWarning, mf.cross, a, b),
                 ref=lambda a, b: np.cross(a, b, axis=1))),
           errors=(E("cross_vec_no_size3", lambda: mf.cross(t(4, 4), t(4, 4)), RuntimeError,
                     r"cross: no dimension of size 3 in input of shape \[4, 4\]"),
                   E("cross_vec_dim_size", lambda: mf.cross(t(4, 3), t(4, 3), dim=0), RuntimeError,
                     "cross: inputs dimension 0 must have length 3, got 4 and 4"),
                   E("cross_vec_ndim", lambda: mf.cross(t(2, 3), t(3)), RuntimeError,
                     "cross: inputs must have the same number of dimensions"),
                   E("cross_vec_dim_range", lambda: mf.cross(t(4, 3), t(4, 3), dim=2), IndexError,
                     "cross: dim 2 is out of range"),
                   E("cross_vec_broadcast", lambda: mf.cross(t(5, 3), t(4, 3), dim=1), RuntimeError,
                     "cross: shapes .* cannot be broadcast"),
                   E("cross_vec_dtype", lambda: mf.cross(t(3), t(3, dtype=mf.float64), dim=0), RuntimeError,
                     "cross: .*same dtype"))),
    # ---- distances
    OpInfo("cdist", lambda a, b, **kw: mf.cdist(a, b, **kw),
           lambda a, b, p=2.0, **kw: np.linalg.norm(a[..., :, None, :] - b[..., None, :, :], ord=p, axis=-1),
           spelled="mf.cdist", torch=lambda T, a, b, **kw: T.cdist(a, b, **kw), gpu_tol=1e-4, samples=(
               S("cdist", (3, 4), (5, 4)), S("cdist_mm", (27, 3), (4, 3)),
               S("cdist_mm_forced", (3, 5), (2, 5), compute_mode="use_mm_for_euclid_dist"),
               S("cdist_no_mm", (30, 2), (2, 2), compute_mode="donot_use_mm_for_euclid_dist"),
               S("cdist_batched_broadcast", (2, 1, 3, 4), (5, 2, 4)), S("cdist_p1", (3, 33), (2, 33), p=1.0),
               S("cdist_p0", (3, 4), (2, 4), p=0), S("cdist_inf", distinct((2, 3, 5)), distinct((2, 4, 5)), p=math.inf),
               S("cdist_p_half", (4, 3), (3, 3), p=0.5), S("cdist_p3", (2, 3), (4, 3), p=3),
               S("cdist_one_column", (1, 1), (5, 1))),
           errors=(E("cdist_columns", lambda: mf.cdist(t(3, 4), t(5, 3)), RuntimeError,
                     "cdist: x1 and x2 must have the same number of columns, got 4 and 3"),
                   E("cdist_1d", lambda: mf.cdist(t(4), t(5, 4)), RuntimeError,
                     "cdist: expected tensors of at least 2 dimensions, got 1-D and 2-D"),
                   E("cdist_negative_p", lambda: mf.cdist(t(3, 4), t(5, 4), p=-1), RuntimeError,
                     "cdist: only non-negative p values"),
                   E("cdist_nan_p", lambda: mf.cdist(t(3, 4), t(5, 4), p=math.nan), RuntimeError,
                     "cdist: only non-negative p values"),
                   E("cdist_mode", lambda: mf.cdist(t(3, 4), t(5, 4), compute_mode="foo"), ValueError,
                     "cdist: 'foo' is not a valid value for compute_mode"),
                   E("cdist_int", lambda: mf.cdist(mf.ones(3, 4, dtype=mf.int64), mf.ones(5, 4, dtype=mf.int64)),
                     RuntimeError, "cdist: only floating point dtypes"),
                   E("cdist_batch", lambda: mf.cdist(t(2, 3, 4), t(3, 5, 4)), RuntimeError,
                     "cdist: shapes .* cannot be broadcast"),
                   E("cdist_dtype", lambda: mf.cdist(t(3, 4), t(5, 4, dtype=mf.float64)), RuntimeError,
                     "cdist: .*same dtype"))),
    OpInfo("dist", lambda a, b, **kw: a.dist(b, **kw), lambda a, b, p=2: np.linalg.norm((a - b).ravel(), ord=p),
           spelled="Tensor.dist", aliases={"mf.dist": lambda a, b, **kw: mf.dist(a, b, **kw)}, torch=SAME, samples=(
               S("dist", (3, 4), (3, 4)), S("dist_broadcast", (3, 33), (33,)), S("dist_p1", (2, 5), (1, 5), p=1),
               S("dist_p3", (4,), (4,), p=3), S("dist_inf", distinct((3, 4)), (4,), p=math.inf),
               S("dist_neg_inf", distinct((5,)), (5,), p=-math.inf),  # p = 0: tests/test_products.py
               S("dist_p_negative", pos((4,)), (4,), p=-1.5), S("dist_0d", (), ())),
           errors=(E("dist_p_tensor", lambda: mf.dist(t(3), t(3), p=t(1)), TypeError,
                     r"dist\(\): argument 'p' must be Number, not Tensor"),
                   E("dist_int", lambda: mf.dist(mf.tensor([1, 2]), mf.tensor([3, 4])), RuntimeError,
                     "dist: expected floating point inputs, got int64 and int64"),
                   E("dist_broadcast", lambda: mf.dist(t(3, 4), t(5)), RuntimeError,
                     "dist: shapes .* cannot be broadcast"),
                   E("dist_p_string", lambda: mf.dist(t(3), t(3), p="fro"), TypeError,
                     "dist\\(\\): argument 'p' must be a number, not str"),
                   E("dist_other_scalar", lambda: mf.dist(t(3), 2.0), TypeError,
                     "dist\\(\\): argument 'other' must be Tensor"))),
    # ---- diagonals
    OpInfo("trace", lambda a: a.trace(), np.trace, spelled="Tensor.trace", aliases={"mf.trace": mf.trace},
           torch=_torch_trace,
           samples=(S("trace", (3, 4)), S("trace_square_odd", (33, 33)), S("trace_tall", (5, 2)),
                    S("trace_1x1", (1, 1))),
           errors=(E("trace_1d", lambda: mf.trace(t(3)), RuntimeError,
                     "trace: expected a matrix, but got a tensor of 1"),
                   E("trace_bool", lambda: mf.trace(mf.ones(2, 2, dtype=mf.bool)), NotImplementedError,
                     "trace: not implemented for bool"))),
    OpInfo("diagonal", lambda a, **kw: a.diagonal(**kw),
           lambda a, offset=0, dim1=0, dim2=1: np.diagonal(a, offset, dim1, dim2), spelled="Tensor.diagonal",
           aliases={"mf.diagonal": lambda a, **kw: mf.diagonal(a, **kw)}, torch=SAME, samples=(
               S("diagonal", (3, 4)), S("diagonal_above", (3, 4), offset=1),
               S("diagonal_below_tall", (5, 2), offset=-2), S("diagonal_dims", (2, 3, 4), offset=1, dim1=2, dim2=0),
               S("diagonal_negative_dims", (2, 3, 3), dim1=-1, dim2=-2),
               S("diagonal_out_of_range", (3, 4), offset=5),
               S("diagonal_view_used_twice", (3, 3), fn=lambda a: a.diagonal() * a.diagonal(1).sum(),
                 ref=lambda a: np.diagonal(a) * np.diagonal(a, 1).sum())),
           errors=(E("diagonal_same_dims", lambda: t(2, 3, 4).diagonal(0, 1, 1), RuntimeError,
                     "diagonal: diagonal dimensions cannot be identical"),
                   E("diagonal_dim_range", lambda: t(2, 3).diagonal(0, 0, 2), IndexError,
                     "diagonal: dim 2 is out of range"),
                   E("diagonal_offset_float", lambda: t(2, 3).diagonal(1.0), TypeError,
                     "diagonal\\(\\): argument 'offset' must be int, not float"))),
    OpInfo("diag_embed", lambda a, **kw: a.diag_embed(**kw),
           lambda a, offset=0, dim1=-2, dim2=-1: np.moveaxis(np.pad(
               a[..., :, None] * np.eye(a.shape[-1]), [(0, 0)] * (a.ndim - 1)
               + [(max(-offset, 0), max(offset, 0)), (max(offset, 0), max(-offset, 0))]), [-2, -1], [dim1, dim2]),
           spelled="Tensor.diag_embed", aliases={"mf.diag_embed": lambda a, **kw: mf.diag_embed(a, **kw)}, torch=SAME,
           samples=(S("diag_embed", (3,)), S("diag_embed_batched", (2, 4)), S("diag_embed_above", (2, 3), offset=1),
                    S("diag_embed_dims", (2, 3), offset=-2, dim1=0, dim2=2),
                    S("diag_embed_dims_swapped", (2, 3), offset=1, dim1=-1, dim2=0)),
           errors=(E("diag_embed_same_dims", lambda: t(3).diag_embed(0, 1, 1), RuntimeError,
                     "diag_embed: diagonal dimensions cannot be identical"),
                   E("diag_embed_0d", lambda: t().diag_embed(), IndexError, "diag_embed: dim -2 is out of range"))),
    OpInfo("diagflat", lambda a, **kw: a.diagflat(**kw), lambda a, offset=0: np.diagflat(a, offset),
           spelled="Tensor.diagflat", aliases={"mf.diagflat": lambda a, **kw: mf.diagflat(a, **kw)}, torch=SAME,
           samples=(S("diagflat", (3,)), S("diagflat_matrix", (2, 3)), S("diagflat_below", (2, 2), offset=-2),
                    S("diagflat_0d", ())),
           errors=(E("diagflat_offset_float", lambda: mf.diagflat(t(3), 0.5), TypeError,
                     "diagflat\\(\\): argument 'offset' must be int, not float"),)),
    OpInfo("block_diag", lambda *ts: mf.block_diag(*ts), lambda *ts: (lambda bs: np.block(
        [[x if i == j else np.zeros((x.shape[0], y.shape[1])) for j, y in enumerate(bs)] for i, x in enumerate(bs)]))(
            [np.atleast_2d(x) for x in ts]), spelled="mf.block_diag", torch=lambda T, *ts: T.block_diag(*ts), samples=(
        S("block_diag", (2, 3), (1, 1), (3, 2)), S("block_diag_mixed_ranks", (2, 3), (4,), (), (2, 2)),
        S("block_diag_one", (3, 33))),
           errors=(E("block_diag_3d", lambda: mf.block_diag(t(2, 2, 2)), RuntimeError,
                     "block_diag: input tensors must have 2 or fewer dimensions, input 0 has 3"),
                   E("block_diag_list", lambda: mf.block_diag(t(2), [1]), TypeError,
                     "block_diag\\(\\): expected Tensor as element 1, got list"))),
]

# ---------------------------------------------------------------- arranging (ops/arrange.py)
ARRANGE_OPS = [
    # ---- broadcasting
    OpInfo("broadcast_to", lambda a, shape: a.broadcast_to(shape), lambda a, shape: np.broadcast_to(a, shape),
           spelled="Tensor.broadcast_to", aliases={"mf.broadcast_to": lambda a, shape: mf.broadcast_to(a, shape)},
           torch=SAME, samples=(
               S("broadcast_to", (3, 1), shape=(2, 3, 4)), S("broadcast_to_0d", (), shape=(33,)),
               S("broadcast_to_keep_dim", (1, 5), fn=lambda a: mf.broadcast_to(a, (3, -1)).exp(),
                 ref=lambda a: np.exp(np.broadcast_to(a, (3, 5))))),
           errors=(E("broadcast_to_size", lambda: t(3).broadcast_to((4,)), RuntimeError,
                     "broadcast_to: the expanded size 4 does not fit the existing size 3 at dim 0"),
                   E("broadcast_to_fewer_dims", lambda: t(2, 3).broadcast_to((3,)), RuntimeError,
                     r"broadcast_to: the target size \[3\] has fewer dims"),
                   E("broadcast_to_float_size", lambda: t(1).broadcast_to((2.0,)), TypeError,
                     "broadcast_to: size must be ints"))),
    OpInfo("broadcast_tensors", lambda a, b: _joined(mf.broadcast_tensors(a, b), 0, mf.stack),
           lambda a, b: _joined(np.broadcast_arrays(a, b), 0, np.stack), spelled="mf.broadcast_tensors",
           torch=lambda T, a, b: _joined(T.broadcast_tensors(a, b), 0, T.stack), samples=(
               S("broadcast_tensors", (3,), (2, 1)), S("broadcast_tensors_0d_and_same", (2, 33), ())),
           errors=(E("broadcast_tensors_shapes", lambda: mf.broadcast_tensors(t(3), t(2)), RuntimeError,
                     r"broadcast_tensors: shapes \(3,\), \(2,\) cannot be broadcast together"),
                   E("broadcast_tensors_list", lambda: mf.broadcast_tensors([t(3)]), TypeError,
                     r"broadcast_tensors: expected tensors\[0\] to be a Tensor, got list"))),
    # ---- views that reshape
    OpInfo("ravel", lambda a: a.ravel(), np.ravel, spelled="Tensor.ravel", aliases={"mf.ravel": mf.ravel},
           torch=SAME, samples=(
               S("ravel", (3, 4)), S("ravel_0d", ()),
               S("ravel_noncontiguous", (3, 5), fn=lambda a: a.T.ravel() * 2, ref=lambda a: a.T.ravel() * 2))),
    OpInfo("unflatten", lambda a, dim, sizes: a.unflatten(dim, sizes),
           lambda a, dim, sizes: a.reshape(a.shape[:dim % a.ndim] + tuple(sizes) + a.shape[dim % a.ndim + 1:]),
           spelled="Tensor.unflatten", aliases={"mf.unflatten": lambda a, dim, sizes: mf.unflatten(a, dim, sizes)},
           torch=SAME, samples=(
               S("unflatten", (2, 6), dim=1, sizes=(2, 3)),
               S("unflatten_infer_neg_dim", (3, 33), dim=-1, sizes=[-1, 11, 1]),
               S("unflatten_size1", (1, 5), dim=0, sizes=(1, 1))),
           errors=(E("unflatten_sizes", lambda: t(2, 5).unflatten(1, (2, 2)), RuntimeError,
                     r"unflatten: provided sizes \[2, 2\] don't multiply up to the size of dim 1 \(5\)"),
                   E("unflatten_empty", lambda: mf.unflatten(t(2, 5), 1, ()), RuntimeError, "sizes must be non-empty"),
                   E("unflatten_two_infer", lambda: t(2, 6).unflatten(1, (-1, -1)), RuntimeError, "one -1"),
                   E("unflatten_dim", lambda: t(2, 6).unflatten(2, (2, 3)), IndexError,
                     "unflatten: dim 2 is out of range"),
                   E("unflatten_float_size", lambda: t(2, 6).unflatten(1, (2.0, 3)), TypeError,
                     "unflatten: sizes must be ints"))),
    OpInfo("select", lambda a, dim, index: a.select(dim, index), lambda a, dim, index: np.take(a, index, dim),
           spelled="Tensor.select", aliases={"mf.select": lambda a, dim, index: mf.select(a, dim, index)}, torch=SAME,
           samples=(S("select", (3, 4), dim=1, index=2), S("select_negative", (2, 3, 5), dim=-1, index=-1),
                    S("select_1d_to_0d", (33,), dim=0, index=7)),
           errors=(E("select_range", lambda: t(2, 3).select(1, 3), IndexError,
                     r"select: index 3 out of range for tensor of size \[2, 3\] at dimension 1"),
                   E("select_0d", lambda: t().select(0, 0), IndexError, "select: cannot be applied to a 0-d tensor"),
                   E("select_float_index", lambda: t(2, 3).select(0, 1.0), TypeError, "select: index must be an int"))),
    OpInfo("atleast_1d", lambda a: mf.atleast_1d(a), np.atleast_1d, spelled="mf.atleast_1d",
           torch=lambda T, a: T.atleast_1d(a), samples=(
               S("atleast_1d_0d", ()), S("atleast_1d_2d", (2, 3)),
               S("atleast_1d_several", (), (3,), fn=lambda a, b: mf.cat(list(mf.atleast_1d(a, b))),
                 ref=lambda a, b: np.concatenate(np.atleast_1d(a, b)))),
           errors=(E("atleast_1d_number", lambda: mf.atleast_1d(3), TypeError,
                     r"atleast_1d: expected tensors\[0\] to be a Tensor, got int"),)),
    OpInfo("atleast_2d", lambda a: mf.atleast_2d(a), np.atleast_2d, spelled="mf.atleast_2d",
           torch=lambda T, a: T.atleast_2d(a), samples=(
               S("atleast_2d_0d", ()), S("atleast_2d_1d", (33,)),
               S("atleast_2d_sequence", (3,), (2, 3), fn=lambda a, b: mf.cat(list(mf.atleast_2d([a, b]))),
                 ref=lambda a, b: np.concatenate(np.atleast_2d(a, b))))),
    OpInfo("atleast_3d", lambda a: mf.atleast_3d(a), np.atleast_3d, spelled="mf.atleast_3d",
           torch=lambda T, a: T.atleast_3d(a), samples=(
               S("atleast_3d_0d", ()), S("atleast_3d_1d", (5,)), S("atleast_3d_2d", (2, 3)),
               S("atleast_3d_4d", (1, 2, 3, 2)))),
    # ---- splitting and joining back (overlapping pieces of unordered indices too)
    OpInfo("tensor_split", lambda a, spec, dim=0: _joined(a.tensor_split(spec, dim), dim, mf.cat),
           lambda a, spec, dim=0: _joined(np.array_split(a, spec, axis=dim), dim, np.concatenate),
           spelled="Tensor.tensor_split",
           aliases={"mf.tensor_split": lambda a, spec, dim=0: _joined(mf.tensor_split(a, spec, dim), dim, mf.cat)},
           torch=lambda T, a, spec, dim=0: _joined(a.tensor_split(spec, dim), dim, T.cat), samples=(
               S("tensor_split", (7, 3), spec=3), S("tensor_split_indices", (3, 7), spec=[1, 5], dim=1),
               S("tensor_split_unordered_neg_dim", (2, 7), spec=[5, -5, 9], dim=-1),
               S("tensor_split_more_sections", (2,), spec=4),
               S("tensor_split_one_used", (5, 2), fn=lambda a: a.tensor_split(2)[1].exp(),
                 ref=lambda a: np.exp(a[3:]))),
           errors=(E("tensor_split_zero", lambda: t(5).tensor_split(0), RuntimeError,
                     "tensor_split: number of sections must be larger than 0, got 0"),
                   E("tensor_split_0d", lambda: t().tensor_split(1), RuntimeError, "at least a 1-dimensional tensor"),
                   E("tensor_split_float_tensor", lambda: t(5).tensor_split(mf.tensor([1.0])), RuntimeError,
                     "tensor_split: expected tensor_indices_or_sections to have dtype int64, got float32"),
                   E("tensor_split_2d_tensor", lambda: t(5).tensor_split(mf.tensor([[1]])), RuntimeError,
                     "a 0-d or 1-d tensor, got a 2-d tensor"),
                   E("tensor_split_float", lambda: t(5).tensor_split(2.0), TypeError,
                     "tensor_split: indices_or_sections must be an int"))),
    OpInfo("hsplit", lambda a, spec: _joined(a.hsplit(spec), min(a.ndim - 1, 1), mf.cat),
           lambda a, spec: _joined(np.hsplit(a, spec), min(a.ndim - 1, 1), np.concatenate), spelled="Tensor.hsplit",
           aliases={"mf.hsplit": lambda a, spec: _joined(mf.hsplit(a, spec), min(a.ndim - 1, 1), mf.cat)},
           torch=lambda T, a, spec: _joined(a.hsplit(spec), min(a.ndim - 1, 1), T.cat), samples=(
               S("hsplit", (3, 6), spec=3), S("hsplit_1d_indices", (7,), spec=[2, 5])),
           errors=(E("hsplit_divisible", lambda: t(2, 6).hsplit(4), RuntimeError,
                     "hsplit: attempted to split along dimension 1, but the size of the dimension 6 is not divisible"),
                   E("hsplit_0d", lambda: t().hsplit(1), RuntimeError, "hsplit: requires a tensor with at least 1"),
                   E("hsplit_tensor", lambda: mf.hsplit(t(4), mf.tensor([1])), TypeError,
                     "hsplit: indices_or_sections"))),
    OpInfo("vsplit", lambda a, spec: _joined(a.vsplit(spec), 0, mf.cat),
           lambda a, spec: _joined(np.vsplit(a, spec), 0, np.concatenate), spelled="Tensor.vsplit",
           aliases={"mf.vsplit": lambda a, spec: _joined(mf.vsplit(a, spec), 0, mf.cat)},
           torch=lambda T, a, spec: _joined(a.vsplit(spec), 0, T.cat), samples=(
               S("vsplit", (6, 2), spec=2), S("vsplit_indices", (5, 3, 2), spec=[1])),
           errors=(E("vsplit_1d", lambda: t(6).vsplit(2), RuntimeError, "vsplit: requires a tensor with at least 2"),)),
    OpInfo("dsplit", lambda a, spec: _joined(a.dsplit(spec), 2, mf.cat),
           lambda a, spec: _joined(np.dsplit(a, spec), 2, np.concatenate), spelled="Tensor.dsplit",
           aliases={"mf.dsplit": lambda a, spec: _joined(mf.dsplit(a, spec), 2, mf.cat)},
           torch=lambda T, a, spec: _joined(a.dsplit(spec), 2, T.cat), samples=(
               S("dsplit", (1, 2, 6), spec=[2]), S("dsplit_sections", (2, 1, 4), spec=2)),
           errors=(E("dsplit_2d", lambda: t(6, 2).dsplit(2), RuntimeError, "dsplit: requires a tensor with at least 3"),
                   E("dsplit_divisible", lambda: t(1, 2, 6).dsplit(4), RuntimeError, "is not divisible by the split"))),
    OpInfo("hstack", lambda *ts: mf.hstack(list(ts)), lambda *a: np.hstack(a), spelled="mf.hstack",
           torch=lambda T, *ts: T.hstack(list(ts)), samples=(
               S("hstack", (2, 1), (2, 3)), S("hstack_1d_0d", (3,), ())),
           errors=(E("hstack_empty", lambda: mf.hstack([]), RuntimeError, "hstack: expects a non-empty TensorList"),
                   E("hstack_tensor", lambda: mf.hstack(t(2, 3)), TypeError, "hstack: expected a tuple or list"),
                   E("hstack_ndims", lambda: mf.hstack([t(2), t(2, 3)]), RuntimeError,
                     "hstack: tensors must have the same number of dimensions: got 1 and 2"))),
    OpInfo("vstack", lambda *ts: mf.vstack(list(ts)), lambda *a: np.vstack(a), spelled="mf.vstack",
           aliases={"mf.row_stack": lambda *ts: mf.row_stack(ts)}, torch=lambda T, *ts: T.vstack(list(ts)), samples=(
               S("vstack", (3,), (2, 3)), S("vstack_0d", (), ())),
           errors=(E("vstack_shapes", lambda: mf.vstack([t(3), t(2)]), RuntimeError,
                     "vstack: sizes of tensors must match except in dimension 0; expected size 3 but got size 2"),)),
    OpInfo("dstack", lambda *ts: mf.dstack(list(ts)), lambda *a: np.dstack(a), spelled="mf.dstack",
           torch=lambda T, *ts: T.dstack(list(ts)), samples=(
               S("dstack", (3,), (3,)), S("dstack_2d_3d", (2, 3), (2, 3, 2)))),
    OpInfo("column_stack", lambda *ts: mf.column_stack(list(ts)), lambda *a: np.column_stack(a),
           spelled="mf.column_stack", torch=lambda T, *ts: T.column_stack(list(ts)), samples=(
               S("column_stack", (3,), (3, 2), (3,)), S("column_stack_0d", (), ())),
           errors=(E("column_stack_shapes", lambda: mf.column_stack([t(3), t(2)]), RuntimeError,
                     "column_stack: sizes of tensors must match except in dimension 1"),)),
    OpInfo("concat", lambda *ts, dim=0: mf.concat(list(ts), dim=dim), lambda *a, dim=0: np.concatenate(a, axis=dim),
           spelled="mf.concat", aliases={"mf.concatenate": lambda *ts, dim=0: mf.concatenate(list(ts), axis=dim)},
           torch=lambda T, *ts, dim=0: T.concat(list(ts), dim=dim), samples=(
               S("concat", (2, 3), (2, 1), dim=1), S("concat_neg_dim_odd", (33,), (1,), dim=-1))),
    OpInfo("swapdims", lambda a, d0, d1: mf.swapdims(a, d0, d1), lambda a, d0, d1: np.swapaxes(a, d0, d1),
           spelled="mf.swapdims", torch=lambda T, a, d0, d1: T.swapdims(a, d0, d1), samples=(
               S("swapdims", (2, 3, 4), d0=0, d1=-1),)),
    OpInfo("moveaxis", lambda a, **kw: mf.moveaxis(a, **kw), _moved_ref, spelled="mf.moveaxis",
           torch=lambda T, a, **kw: T.moveaxis(a, **kw), samples=(
               S("moveaxis", (2, 3, 4), source=0, destination=-1),
               S("moveaxis_two", (2, 3, 4, 5), source=(0, 3), destination=(2, 0)))),
    # ---- flipping and rotating
    OpInfo("fliplr", lambda a: a.fliplr(), np.fliplr, spelled="Tensor.fliplr", aliases={"mf.fliplr": mf.fliplr},
           torch=SAME, samples=(S("fliplr", (3, 4)), S("fliplr_3d", (2, 3, 4))),
           errors=(E("fliplr_1d", lambda: t(3).fliplr(), RuntimeError, "fliplr: input must be >= 2-d"),)),
    OpInfo("flipud", lambda a: a.flipud(), np.flipud, spelled="Tensor.flipud", aliases={"mf.flipud": mf.flipud},
           torch=SAME, samples=(S("flipud", (33,)), S("flipud_2d", (3, 4))),
           errors=(E("flipud_0d", lambda: t().flipud(), RuntimeError, "flipud: input must be >= 1-d"),)),
    OpInfo("rot90", lambda a, **kw: a.rot90(**kw), lambda a, k=1, dims=(0, 1): np.rot90(a, k, dims),
           spelled="Tensor.rot90", aliases={"mf.rot90": lambda a, **kw: mf.rot90(a, **kw)}, torch=SAME, samples=(
               S("rot90", (2, 3)), S("rot90_k2_dims", (2, 3, 4), k=2, dims=(2, 0)), S("rot90_k_negative", (3, 5), k=-1),
               S("rot90_k4", (2, 3), k=4), S("rot90_k3_neg_dims", (3, 2, 2), k=3, dims=(-1, 1))),
           errors=(E("rot90_1d", lambda: t(3).rot90(), RuntimeError, "rot90: expected total dims >= 2"),
                   E("rot90_three_dims", lambda: t(2, 3, 4).rot90(1, (0, 1, 2)), RuntimeError,
                     "rot90: expected total rotation dims == 2, but got dims = 3"),
                   E("rot90_same_dims", lambda: t(2, 3, 4).rot90(1, (1, -2)), RuntimeError,
                     "rot90: expected rotation dims to be different"),
                   E("rot90_float_k", lambda: t(2, 3).rot90(1.0), TypeError, "rot90: k must be an int"))),
    # ---- flat and triangular indices
    OpInfo("take", lambda a, i: a.take(i), lambda a, i: np.take(a, i), spelled="Tensor.take",
           aliases={"mf.take": lambda a, i: mf.take(a, i)}, torch=SAME, samples=(
               S("take", (3, 4), index((2, 5), 12)), S("take_0d_input", (), index((3,), 1)),
               S("take_0d_index_odd", (3, 11), index((), 33)),
               S("take_negative", (3, 4), fn=lambda a: a.take(mf.tensor([-1, -12, 5, -1], device=a.device)),
                 ref=lambda a: np.take(a, [-1, -12, 5, -1]))),
           errors=(E("take_range", lambda: t(2, 3).take(mf.tensor([6])), IndexError,
                     "take: index 6 is out of bounds for dimension 0 with size 6"),
                   E("take_float_index", lambda: t(2, 3).take(mf.tensor([1.0])), RuntimeError,
                     r"take: expected a long \(int64\) tensor for index, got float32"),
                   E("take_list", lambda: t(2, 3).take([1]), TypeError, "take: expected index to be a Tensor"))),
    OpInfo("tril_indices", lambda like, **kw: mf.tril_indices(**kw, device=like.device),
           lambda like, row, col, offset=0: np.stack(np.tril_indices(row, offset, col)), spelled="mf.tril_indices",
           grad=False, dtypes=NO_GRAD_RESULT, torch=lambda T, like, **kw: T.tril_indices(**kw, device=like.device),
           samples=(S("tril_indices", const((1,)), row=3, col=4),
                    S("tril_indices_offset", const((1,)), row=5, col=3, offset=1),
                    S("tril_indices_empty", const((1,)), row=3, col=4, offset=-5)),
           errors=(E("tril_indices_negative", lambda: mf.tril_indices(-1, 4), RuntimeError,
                     "tril_indices: row must be non-negative, got -1"),
                   E("tril_indices_float", lambda: mf.tril_indices(3.0, 4), TypeError,
                     "tril_indices: row must be an int"),
                   E("tril_indices_dtype", lambda: mf.tril_indices(3, 3, dtype=mf.float32), NotImplementedError,
                     "tril_indices: not implemented for float32"))),
    OpInfo("triu_indices", lambda like, **kw: mf.triu_indices(**kw, device=like.device),
           lambda like, row, col, offset=0: np.stack(np.triu_indices(row, offset, col)), spelled="mf.triu_indices",
           grad=False, dtypes=NO_GRAD_RESULT, torch=lambda T, like, **kw: T.triu_indices(**kw, device=like.device),
           samples=(S("triu_indices", const((1,)), row=4, col=4),
                    S("triu_indices_below", const((1,)), row=3, col=5, offset=-1),
                    S("triu_indices_zero_rows", const((1,)), row=0, col=3)),
           errors=(E("triu_indices_negative_col", lambda: mf.triu_indices(3, -4), RuntimeError,
                     "triu_indices: col must be non-negative, got -4"),)),
    OpInfo("unravel_index", lambda i, shape: mf.stack(list(mf.unravel_index(i, shape))),
           lambda i, shape: np.stack(np.unravel_index(i, shape)), spelled="mf.unravel_index", grad=False,
           dtypes=NO_GRAD_RESULT, torch=lambda T, i, shape: T.stack(list(T.unravel_index(i, shape))), samples=(
               S("unravel_index", index((5,), 12), shape=(3, 4)),
               S("unravel_index_2d_odd", index((2, 3), 33), shape=(3, 1, 11)),
               S("unravel_index_int_shape", index((4,), 7), shape=7),
               S("unravel_index_negative", index((3,), 6), fn=lambda i: mf.stack(list(mf.unravel_index(i - 6, (2, 3)))),
                 ref=lambda i: np.stack(np.unravel_index(i, (2, 3))))),
           errors=(E("unravel_index_float", lambda: mf.unravel_index(mf.tensor([1.0]), (2, 3)), TypeError,
                     "unravel_index: expected 'indices' to be integer dtype, but got float32"),
                   E("unravel_index_negative_shape", lambda: mf.unravel_index(mf.tensor([1]), (2, -3)), ValueError,
                     r"unravel_index: 'shape' cannot have negative values, but got \(2, -3\)"),
                   E("unravel_index_float_shape", lambda: mf.unravel_index(mf.tensor([1]), (2.0, 3)), TypeError,
                     "unravel_index: expected 'shape' to be an int or a sequence of ints"))),
    # ---- products of index sets
    OpInfo("cartesian_prod", lambda *ts: mf.cartesian_prod(*ts),
           lambda *a: a[0] if len(a) == 1 else np.stack([g.ravel() for g in np.meshgrid(*a, indexing="ij")], 1),
           spelled="mf.cartesian_prod", torch=lambda T, *ts: T.cartesian_prod(*ts), samples=(
               S("cartesian_prod", (2,), (3,)), S("cartesian_prod_three", (2,), (1,), (3,)),
               S("cartesian_prod_one", (5,))),
           errors=(E("cartesian_prod_2d", lambda: mf.cartesian_prod(t(1, 2)), RuntimeError,
                     r"cartesian_prod: expected a 1-D tensor, got shape \[1, 2\]"),
                   E("cartesian_prod_dtypes", lambda: mf.cartesian_prod(mf.tensor([1]), t(2)), RuntimeError,
                     "cartesian_prod: expects all tensors to have the same dtype"),
                   E("cartesian_prod_none", lambda: mf.cartesian_prod(), RuntimeError, "expects at least one tensor"))),
    OpInfo("combinations", lambda a, **kw: mf.combinations(a, **kw),
           lambda a, with_replacement=False: a[np.stack(np.triu_indices(len(a), 0 if with_replacement else 1), 1)],
           spelled="mf.combinations", torch=lambda T, a, **kw: T.combinations(a, **kw), samples=(
               S("combinations", (4,)), S("combinations_with_replacement", (3,), with_replacement=True),
               S("combinations_too_few", (1,)),
               S("combinations_r3", (5,), fn=lambda a: mf.combinations(a, 3), ref=lambda a: np.array(
                   [[a[i], a[j], a[k]] for i in range(5) for j in range(i + 1, 5) for k in range(j + 1, 5)]))),
           errors=(E("combinations_2d", lambda: mf.combinations(t(1, 3)), RuntimeError,
                     r"combinations: expected a 1-D tensor, got shape \[1, 3\]"),
                   E("combinations_negative_r", lambda: mf.combinations(t(3), -1), RuntimeError,
                     "combinations: expect a non-negative number r, but got -1"))),
    # ---- out-of-place scatters
    OpInfo("select_scatter", lambda a, s, dim, index: a.select_scatter(s, dim, index),
           lambda a, s, dim, index: scatter_ref(a, np.expand_dims(s, dim), dim,
                                                np.full(np.expand_dims(s, dim).shape, index % a.shape[dim])),
           spelled="Tensor.select_scatter",
           aliases={"mf.select_scatter": lambda a, s, dim, index: mf.select_scatter(a, s, dim, index)}, torch=SAME,
           samples=(S("select_scatter", (3, 4), (3,), dim=1, index=2),
                    S("select_scatter_neg_0d_src", (5,), (), dim=-1, index=-2),
                    S("select_scatter_3d", (2, 3, 4), (3, 4), dim=0, index=1)),
           errors=(E("select_scatter_shape", lambda: mf.select_scatter(t(2, 3), t(3), 1, 0), RuntimeError,
                     r"select_scatter: expected src to have a size equal to the slice of input; src size = \[3\], "
                     r"slice size = \[2\]"),
                   E("select_scatter_range", lambda: mf.select_scatter(t(2, 3), t(2), 1, 3), IndexError,
                     "select_scatter: index 3 out of range"),
                   E("select_scatter_src_list", lambda: mf.select_scatter(t(2, 3), [1.0, 1.0], 1, 0), TypeError,
                     "select_scatter: expected src to be a Tensor, got list"))),
    OpInfo("slice_scatter", lambda a, s, **kw: a.slice_scatter(s, **kw),
           lambda a, s, dim=0, start=None, end=None, step=1: scatter_ref(a, s, dim, np.broadcast_to(
               np.arange(a.shape[dim])[start:end:step].reshape([-1 if d == dim % a.ndim else 1 for d in range(a.ndim)]),
               s.shape)),
           spelled="Tensor.slice_scatter",
           aliases={"mf.slice_scatter": lambda a, s, **kw: mf.slice_scatter(a, s, **kw)}, torch=SAME, samples=(
               S("slice_scatter", (5, 3), (2, 3), start=2, end=4), S("slice_scatter_all", (4, 2), (4, 2)),
               S("slice_scatter_step_neg_dim", (3, 7), (3, 2), dim=-1, start=1, step=3),
               S("slice_scatter_negative_start_big_end", (6,), (2,), start=-2, end=100)),
           errors=(E("slice_scatter_step", lambda: mf.slice_scatter(t(5, 3), t(0, 3), 0, 1, 3, 0), RuntimeError,
                     "slice_scatter: slice step must be positive, got 0"),
                   E("slice_scatter_0d", lambda: mf.slice_scatter(t(), t()), IndexError,
                     "slice_scatter: slice.. cannot be applied to a 0-d tensor"),
                   E("slice_scatter_shape", lambda: mf.slice_scatter(t(5, 3), t(3, 3), 0, 1, 3), RuntimeError,
                     r"src size = \[3, 3\], slice size = \[2, 3\]"))),
]

# ---------------------------------------------------------------- special functions, aliases (ops/special.py)
SPECIAL_OPS = [
    # ---- unary special functions (integer input gives float32), with recorded in-place forms
    _unary_entry("erfc", np.vectorize(math.erfc, otypes=[np.float64]), inplace=True),
    _unary_entry("exp2", np.exp2, inplace=True),
    _unary_entry("sinc", np.sinc, inplace=True, extra=(
        S("sinc_near_zero", (9,), fn=lambda a: mf.sinc(a * 1e-3), ref=lambda a: np.sinc(a * 1e-3)),)),
    _unary_entry("deg2rad", np.deg2rad, inplace=True),
    _unary_entry("rad2deg", np.rad2deg, inplace=True),
    # logit of inputs in [0.2, 0.8] (pos() * 0.4); with eps, clamped to [eps, 1 - eps] first
    OpInfo("logit", lambda a, **kw: mf.logit(a * 0.4, **kw),
           lambda a, eps=None: np.log(np.clip(a * 0.4, eps or 0, 1 - (eps or 0)) / (1 - np.clip(a * 0.4, eps or 0,
                                                                                                   1 - (eps or 0)))),
           spelled="mf.logit", aliases={"Tensor.logit": lambda a, **kw: (a * 0.4).logit(**kw)},
           torch=lambda T, a, **kw: T.logit(a * 0.4, **kw), samples=(
               S("logit", pos((3, 4))), S("logit_0d", pos(())), S("logit_eps", pos((5, 7)), eps=0.3)),
           inplace=(InPlace("logit_", lambda x: x.logit_(eps=0.25), lambda x: x.logit(eps=0.25), op="logit_"),),
           errors=(E("logit_eps_string", lambda: mf.logit(t(2), eps="0.1"), TypeError,
                     r"logit\(\): argument 'eps' must be a float or None, not str"),
                   E("logit_int_inplace", lambda: mf.tensor([1, 2]).logit_(), RuntimeError,
                     "logit_: result type float32 can't be cast to the desired output type int64"))),
    OpInfo("special_ndtr", mf.special.ndtr, lambda a: (1 + _erf(a / math.sqrt(2))) / 2, spelled="mf.special.ndtr",
           torch=lambda T, a: T.special.ndtr(a), samples=(S("special_ndtr", (3, 4)),)),
    OpInfo("special_xlog1py", mf.special.xlog1py, lambda a, b: a * np.log1p(b), spelled="mf.special.xlog1py",
           torch=lambda T, a, b: T.special.xlog1py(a, b), samples=(
               S("special_xlog1py", (3, 4), pos((3, 4))),
               S("special_xlog1py_zero", (5,), pos((5,)), fn=lambda a, b: mf.special.xlog1py(a * 0.0, b - 1.0),
                 ref=lambda a, b: np.zeros(5))),
           errors=(E("special_xlog1py_numbers", lambda: mf.special.xlog1py(2, 3), TypeError,
                     r"xlog1py\(\): expected a Tensor operand, got int and int"),)),
    OpInfo("isin", lambda a, b, **kw: mf.isin(a, b, **kw), lambda a, b, invert=False: np.isin(a, b, invert=invert),
           spelled="mf.isin", grad=False, dtypes=NO_GRAD_RESULT,
           torch=lambda T, a, b, **kw: T.isin(a, b, **kw), samples=(
               S("isin", index((3, 4), 6), index((3,), 6)),
               S("isin_invert", index((5,), 4), index((2,), 4), invert=True),
               S("isin_scalar", index((4,), 3), fn=lambda a: mf.isin(a, 2), ref=lambda a: a == 2)),
           errors=(E("isin_no_tensor", lambda: mf.isin(1, 2), TypeError,
                     "at least one of elements and test_elements"),)),
    OpInfo("rsub", mf.rsub, lambda a, b, alpha=1: b - alpha * a, spelled="mf.rsub",
           torch=lambda T, a, b, **kw: T.rsub(a, b, **kw), samples=(
               S("rsub", (3, 4), (4,)), S("rsub_alpha", (5,), (5,), alpha=3),
               S("rsub_number", (2, 3), fn=lambda a: mf.rsub(a, 2.5, alpha=2), ref=lambda a: 2.5 - 2 * a))),
    OpInfo("positive", mf.positive, lambda a: a, spelled="mf.positive",
           aliases={"Tensor.positive": _method("positive")},
           torch=lambda T, a: T.positive(a), samples=(S("positive", (3, 4)),),
           errors=(E("positive_bool", lambda: mf.positive(mf.tensor([True])), TypeError,
                     "on a bool tensor is not supported"),)),
    OpInfo("signbit", mf.signbit, np.signbit, spelled="mf.signbit", aliases={"Tensor.signbit": _method("signbit")},
           grad=False, dtypes=NO_GRAD_RESULT, torch=lambda T, a: T.signbit(a), samples=(
               S("signbit", (3, 4)), S("signbit_0d", ()),
               S("signbit_negative_zero", (9,), fn=lambda a: mf.signbit(a * 0.0), ref=lambda a: np.signbit(a * 0.0)))),
    # ---- binary special functions
    OpInfo("xlogy", mf.xlogy, lambda a, b: a * np.log(b), spelled="mf.xlogy", fuzz="binary", domain=("real", "pos"),
           aliases={"Tensor.xlogy": _method("xlogy")}, torch=lambda T, a, b: T.xlogy(a, b), samples=(
               S("xlogy", (3, 4), pos((3, 4))), S("xlogy_broadcast", (5, 1), pos((33,))), S("xlogy_0d", (), pos((4,))),
               S("xlogy_scalar", (7,), fn=lambda a: mf.xlogy(a, 2.5) + a.xlogy(3), ref=lambda a: a * np.log(7.5)),
               S("xlogy_zero", (6,), pos((6,)),
                 fn=lambda a, b: mf.xlogy(a * 0, b) + mf.xlogy(mf.zeros_like(a), mf.zeros_like(b)),
                 ref=lambda a, b: np.zeros(6))),
           inplace=(InPlace("xlogy_", lambda x: x.xlogy_(_row(x)), lambda x: mf.xlogy(x, _row(x)), op="xlogy_"),),
           errors=(E("xlogy_shapes", lambda: mf.xlogy(t(2), t(3)), ValueError, r"xlogy: shapes \(2,\) and \(3,\)"),
                   E("xlogy_int_inplace", lambda: mf.tensor([1, 2]).xlogy_(2.0), RuntimeError,
                     "xlogy_: result type float32 can't be cast to the desired output type int64"))),
    *[OpInfo(name, getattr(mf, name), getattr(np, name), spelled=f"mf.{name}",
             aliases={f"Tensor.{name}": _method(name)},
             torch=lambda T, a, b, name=name: getattr(T, name)(a, b), samples=(
                 S(name, (3, 4), (3, 4)), S(f"{name}_broadcast", (5, 1), (33,)), S(f"{name}_0d", (), ()),
                 S(f"{name}_large", (4,), (4,), fn=lambda a, b, name=name: getattr(mf, name)(a * 800, b * 800 + 800),
                   ref=lambda a, b, name=name: getattr(np, name)(a * 800, b * 800 + 800))),
             errors=(E(f"{name}_int", lambda name=name: getattr(mf, name)(mf.tensor([1]), mf.tensor([2])),
                       NotImplementedError, f"{name}: not implemented for int64 tensors"),
                     E(f"{name}_scalar", lambda name=name: getattr(mf, name)(t(2), 1.0), TypeError,
                       rf"{name}\(\): argument 'other' must be Tensor, not float")))
      for name in ("logaddexp", "logaddexp2")],
    *[OpInfo(name, getattr(mf, name), getattr(np, name), spelled=f"mf.{name}",
             aliases={f"Tensor.{name}": _method(name)},
             torch=lambda T, a, b, name=name: getattr(T, name)(a, b), samples=(
                 S(name, distinct((3, 4)), distinct((4,))), S(f"{name}_0d", distinct(()), distinct((5,))),
                 S(f"{name}_nan", distinct((4, 5)), distinct((5,)),
                   fn=lambda a, b, name=name: getattr(mf, name)(mf.where(a > 0.5, math.nan, a), b),
                   ref=lambda a, b, name=name: getattr(np, name)(np.where(a > 0.5, np.nan, a), b))),
             errors=(E(f"{name}_scalar", lambda name=name: getattr(mf, name)(t(2), 1.0), TypeError,
                       rf"{name}\(\): argument 'other' must be Tensor, not float"),))
      for name in ("fmax", "fmin")],
    OpInfo("copysign", mf.copysign, np.copysign, spelled="mf.copysign",
           aliases={"Tensor.copysign": _method("copysign")},
           torch=lambda T, a, b: T.copysign(a, b), samples=(
               S("copysign", (3, 4), (3, 4)), S("copysign_broadcast", (5, 1), (33,)),
               S("copysign_scalar", (6,), fn=lambda a: mf.copysign(a, -1.0) + a.copysign(2),
                 ref=lambda a: np.copysign(a, -1.0) + np.abs(a))),
           inplace=(InPlace("copysign_", lambda x: x.copysign_(_row(x) - 1.0), lambda x: mf.copysign(x, _row(x) - 1.0),
                            op="copysign_"),),
           errors=(E("copysign_int_inplace", lambda: mf.tensor([1, 2]).copysign_(-1), RuntimeError,
                     "copysign_: result type float32 can't be cast to the desired output type int64"),)),
    OpInfo("ldexp", mf.ldexp, lambda a, b: a * 2.0 ** b, spelled="mf.ldexp", aliases={"Tensor.ldexp": _method("ldexp")},
           torch=lambda T, a, b: T.ldexp(a, b), samples=(
               S("ldexp", (3, 4), index((3, 4), 5)), S("ldexp_broadcast", (5, 1), index((7,), 4)),
               S("ldexp_float_exponent", (3, 4), (4,))),
           inplace=(InPlace("ldexp_", lambda x: x.ldexp_(_row(x)), lambda x: mf.ldexp(x, _row(x)), grad=False),),
           errors=(E("ldexp_scalar", lambda: mf.ldexp(t(2), 2), TypeError,
                     r"ldexp\(\): argument 'other' must be Tensor"),
                   E("ldexp_int_inplace", lambda: mf.tensor([1, 2]).ldexp_(mf.tensor([1, 1])), RuntimeError,
                     "ldexp_: result type float32 can't be cast to the desired output type int64"))),
    OpInfo("float_power", mf.float_power, np.power, spelled="mf.float_power", dtypes=(np.dtype(np.float64),),
           aliases={"Tensor.float_power": _method("float_power")}, torch=lambda T, a, b: T.float_power(a, b), samples=(
               S("float_power", pos((3, 4)), (3, 4)), S("float_power_broadcast", pos((5, 1)), (33,)),
               S("float_power_scalar", (6,), fn=lambda a: a.float_power(3), ref=lambda a: a ** 3)),
           errors=(E("float_power_inplace_float32", lambda: t(2).float_power_(2), RuntimeError,
                     "float_power_: result type float64 can't be cast to the desired output type float32"),)),
    OpInfo("heaviside", mf.heaviside, np.heaviside, spelled="mf.heaviside", grad=False,
           aliases={"Tensor.heaviside": _method("heaviside")}, torch=lambda T, a, v: T.heaviside(a, v), samples=(
               S("heaviside", (3, 4), (4,)), S("heaviside_0d", (), ()),
               S("heaviside_zero_nan", (5, 7), (7,),
                 fn=lambda a, v: mf.heaviside(mf.where(a > 1, math.nan, a.round()), v),
                 ref=lambda a, v: np.where(a > 1, 0.0, np.heaviside(np.round(a), v)))),
           inplace=(InPlace("heaviside_", lambda x: x.heaviside_(_row(x)), lambda x: mf.heaviside(x, _row(x)),
                            grad=False),),
           errors=(E("heaviside_dtypes", lambda: mf.heaviside(t(2), t(2, dtype=mf.float64)), RuntimeError,
                     "heaviside: input and values must have the same dtype, got float32 and float64"),
                   E("heaviside_scalar", lambda: mf.heaviside(t(2), 0.5), TypeError,
                     r"heaviside\(\): argument 'values' must be Tensor, not float"))),
    # ---- NaN-ignoring reductions
    *[OpInfo(name, _method(name), lambda a, dim=None, keepdim=False, name=name: getattr(np, name)(a, axis=dim,
                                                                                                  keepdims=keepdim),
             spelled=f"Tensor.{name}", aliases={f"mf.{name}": getattr(mf, name)}, fuzz="reduction", torch=SAME,
             samples=(S(f"{name}_all", (3, 4)), S(f"{name}_dim", (3, 4, 2), dim=1),
                      S(f"{name}_dims_keepdim", (3, 4, 2), dim=(0, 2), keepdim=True), S(f"{name}_0d", ()),
                      S(f"{name}_nan", (4, 5),
                        fn=lambda a, name=name: getattr(mf, name)(mf.where(a > 0.5, math.nan, a), 1),
                        ref=lambda a, name=name: getattr(np, name)(np.where(a > 0.5, np.nan, a), axis=1))),
             errors=(E(f"{name}_dim_range", lambda name=name: getattr(t(2, 3), name)(2), IndexError,
                       "dimension 2 out of range"),))
      for name in ("nansum", "nanmean")],
    OpInfo("nanmean_int", _method("nanmean"), None, samples=(), grad=False, spelled="Tensor.nanmean", errors=(
        E("nanmean_int", lambda: mf.tensor([1, 2]).nanmean(), RuntimeError,
          r"nanmean\(\): expected input to have floating point dtype but got int64"),)),
    # ---- clamp with one bound (a tensor bound: maximum / minimum, its gradient too)
    OpInfo("clamp_min", mf.clamp_min, lambda a, b=None, min=None: np.maximum(a, min if b is None else b),
           spelled="mf.clamp_min", aliases={"Tensor.clamp_min": _method("clamp_min")},
           torch=lambda T, *a, **kw: T.clamp_min(*a, **kw), samples=(
               S("clamp_min_scalar", distinct((4, 5)), min=0.1), S("clamp_min_0d", distinct(()), min=-0.2),
               S("clamp_min_tensor", distinct((4, 5)), distinct((5,)))),
           inplace=(InPlace("clamp_min_", lambda x: x.clamp_min_(0.1), lambda x: mf.clamp_min(x, 0.1), op="clamp_min_"),
                    InPlace("clip_", lambda x: x.clip_(-0.5, 0.5), lambda x: x.clip(-0.5, 0.5), op="clip_")),
           errors=(E("clamp_min_string", lambda: mf.clamp_min(t(2), "0"), TypeError,
                     r"clamp_min\(\): argument 'min' must be a Tensor or a number, not str"),
                   E("clamp_min_int_float_inplace", lambda: mf.tensor([1, 2]).clamp_min_(0.5), RuntimeError,
                     "clamp_min_: result type float32 can't be cast to the desired output type int64"),
                   E("clip_no_bounds", lambda: t(2).clip_(), RuntimeError, "clip_: at least one of min and max"),
                   E("clamp_inplace_number_min_tensor_max", lambda: t(2).clamp_(0, t(2)), TypeError,
                     "clamp_: expected min and max both numbers or both tensors, got max a tensor"))),
    OpInfo("clamp_max", mf.clamp_max, lambda a, b=None, max=None: np.minimum(a, max if b is None else b),
           spelled="mf.clamp_max", aliases={"Tensor.clamp_max": _method("clamp_max")},
           torch=lambda T, *a, **kw: T.clamp_max(*a, **kw), samples=(
               S("clamp_max_scalar", distinct((4, 5)), max=0.1),
               S("clamp_max_tensor", distinct((3, 1)), distinct((4,)))),
           inplace=(InPlace("clamp_max_", lambda x: x.clamp_max_(0.1), lambda x: mf.clamp_max(x, 0.1),
                            op="clamp_max_"),)),
    # ---- the in-place forms of existing ops (their out-of-place forms have entries above)
    OpInfo("special_inplace", _method("exp_"), None, samples=(), grad=False, spelled="Tensor.exp_", inplace=(
        *[InPlace(f"Tensor.{name}_", _method(f"{name}_"), _method(name), op=f"{name}_")
          for name in ("exp", "tanh", "sigmoid", "relu", "abs", "neg")],  # log_, sqrt_: tests/test_special.py
        InPlace("Tensor.pow_", lambda x: x.pow_(3), lambda x: x ** 3, op="pow_"),
        InPlace("Tensor.pow_ tensor", lambda x: x.pow_(_row(x) * 0 + 2), lambda x: x ** 2, op="pow_")),
        errors=(E("exp_int", lambda: mf.tensor([1, 2]).exp_(), RuntimeError,
                  "exp_: result type float32 can't be cast to the desired output type int64"),
                E("pow_int_negative", lambda: mf.tensor([1, 2]).pow_(-1), RuntimeError,
                  "pow_: integers to negative integer powers are not allowed"),
                E("pow_int_float", lambda: mf.tensor([1, 2]).pow_(0.5), RuntimeError,
                  "pow_: result type float32 can't be cast to the desired output type int64"),
                E("neg_bool", lambda: mf.tensor([True]).neg_(), NotImplementedError, "neg_: not supported for bool"),
                E("exp_leaf", lambda: t(2, requires_grad=True).exp_(), RuntimeError,
                  "exp_: a leaf Variable that requires grad"))),
    # ---- PyTorch's other spellings (the same values and gradients as the op they name)
    OpInfo("absolute", mf.absolute, np.abs, spelled="mf.absolute", aliases={"Tensor.absolute": _method("absolute")},
           torch=lambda T, a: T.absolute(a), samples=(S("absolute", distinct((3, 4))),),
           inplace=(InPlace("absolute_", _method("absolute_"), mf.abs, op="absolute_"),)),
    OpInfo("negative", mf.negative, np.negative, spelled="mf.negative",
           aliases={"Tensor.negative": _method("negative")},
           torch=lambda T, a: T.negative(a), samples=(S("negative", (3, 4)), S("negative_0d", ())),
           inplace=(InPlace("negative_", _method("negative_"), mf.neg, op="negative_"),),
           errors=(E("negative_bool", lambda: mf.negative(mf.tensor([True])), NotImplementedError,
                     "negative: not supported for bool tensors"),)),
    OpInfo("multiply", mf.multiply, np.multiply, spelled="mf.multiply",
           aliases={"Tensor.multiply": _method("multiply")},
           torch=lambda T, a, b: T.multiply(a, b), samples=(S("multiply", (3, 4), (4,)),),
           inplace=(InPlace("multiply_", lambda x: x.multiply_(_row(x)), lambda x: x * _row(x), op="multiply_"),)),
    OpInfo("true_divide", mf.true_divide, np.divide, spelled="mf.true_divide",
           aliases={"Tensor.true_divide": _method("true_divide")}, torch=lambda T, a, b: T.true_divide(a, b),
           samples=(S("true_divide", (3, 4), pos((3, 4))),),
           inplace=(InPlace("true_divide_", lambda x: x.true_divide_(_row(x)), lambda x: x / _row(x), op="div_"),)),
    OpInfo("divide", mf.divide,
           lambda a, b, rounding_mode=None: {None: np.divide, "trunc": lambda p, q: np.trunc(p / q),
                                             "floor": np.floor_divide}[rounding_mode](a, b),
           spelled="mf.divide", aliases={"Tensor.divide": _method("divide")},
           torch=lambda T, a, b, **kw: T.divide(a, b, **kw), samples=(
               S("divide", (3, 4), pos((4,))), S("divide_trunc", (3, 4), pos((4,)), rounding_mode="trunc"),
               S("divide_floor", (5,), pos((5,)), rounding_mode="floor")),  # integers: tests/test_special.py
           inplace=(InPlace("divide_", lambda x: x.divide_(_row(x)), lambda x: x / _row(x), op="divide_"),
                    InPlace("divide_ floor", lambda x: x.divide_(_row(x), rounding_mode="floor"),
                            lambda x: mf.divide(x, _row(x), rounding_mode="floor"), grad=False)),
           errors=(E("divide_rounding_mode", lambda: mf.divide(t(2), 2, rounding_mode="round"), RuntimeError,
                     "divide: expected rounding_mode to be one of None, 'trunc', or 'floor' but found 'round'"),
                   E("divide_int_by_zero", lambda: mf.divide(mf.tensor([1, 2]), 0, rounding_mode="trunc"),
                     RuntimeError, "divide: integer division by zero"))),
    OpInfo("subtract", mf.subtract, lambda a, b, alpha=1: a - alpha * b, spelled="mf.subtract",
           aliases={"Tensor.subtract": _method("subtract")}, torch=lambda T, a, b, **kw: T.subtract(a, b, **kw),
           samples=(S("subtract", (3, 4), (4,)), S("subtract_alpha", (3, 4), (3, 4), alpha=0.5),
                    S("subtract_scalar_alpha", (5,), fn=lambda a: mf.subtract(a, 2.0, alpha=3), ref=lambda a: a - 6.0)),
           inplace=(InPlace("subtract_", lambda x: x.subtract_(_row(x), alpha=2), lambda x: x - 2 * _row(x),
                            op="subtract_"),),
           errors=(E("subtract_bool", lambda: mf.subtract(mf.tensor([True]), mf.tensor([False])), NotImplementedError,
                     "subtract: not supported for bool tensors"),
                   E("subtract_int_float_alpha", lambda: mf.subtract(mf.tensor([1]), mf.tensor([1]), alpha=0.5),
                     RuntimeError, "alpha must not be a floating point number"))),
    # comparisons: bool results; in place, written into the tensor's own dtype with a zero gradient
    *[OpInfo(name, getattr(mf, name), ref, spelled=f"mf.{name}", aliases={f"Tensor.{name}": _method(name)}, grad=False,
             dtypes=NO_GRAD_RESULT, torch=lambda T, a, b, name=name: getattr(T, name)(a, b), samples=(
                 S(name, (3, 4), (4,)),
                 S(f"{name}_ties", index((7,), 3), fn=lambda a, name=name: getattr(mf, name)(a, 1),
                   ref=lambda a, ref=ref: ref(a, 1))),
             inplace=tuple(InPlace(f"{n}_", lambda x, n=n: getattr(x, f"{n}_")(_row(x) - 1.0),
                                   lambda x, n=n: getattr(mf, n)(x, _row(x) - 1.0).to(x.dtype) + x * 0.0, op=f"{n}_")
                           for n in (name, short)))
      for name, short, ref in (("greater", "gt", np.greater), ("greater_equal", "ge", np.greater_equal),
                               ("less", "lt", np.less), ("less_equal", "le", np.less_equal),
                               ("not_equal", "ne", np.not_equal))],
    OpInfo("eq_inplace", _method("eq_"), None, samples=(), grad=False, spelled="Tensor.eq_", inplace=(
        InPlace("eq_", lambda x: x.eq_(_row(x) - 1.0), lambda x: (x == _row(x) - 1.0).to(x.dtype) + x * 0.0,
                op="eq_"),),
        errors=(E("eq_inplace_grows", lambda: t(3).eq_(t(2, 3)), RuntimeError,
                  r"eq_: output with shape \[3\] doesn't match the broadcast shape \[2, 3\]"),)),
    # ---- dtype queries (values: tests/test_special.py)
    OpInfo("dtype_queries", mf.result_type, None, samples=(), grad=False, spelled="mf.result_type",
           aliases={"mf.promote_types": mf.promote_types, "mf.can_cast": mf.can_cast, "mf.is_complex": mf.is_complex},
           errors=(E("result_type_string", lambda: mf.result_type(t(2), "1"), TypeError,
                     r"result_type\(\): expected a Tensor or a real number, got str"),
                   E("promote_types_unknown", lambda: mf.promote_types(mf.float32, "float12"), TypeError,
                     "unknown dtype"),
                   E("is_nonzero_many", lambda: t(2).is_nonzero(), RuntimeError,
                     "Boolean value of Tensor with more than one value is ambiguous"))),
]

# ---------------------------------------------------------------- functional gaps: pooling forms, lp_pool, pdist,
# bilinear, upsample aliases, max_unpool1d, multilabel / distance-triplet losses, embedding_bag (their modules:
# tests/test_functional_gaps.py)
def _pool_count(n, k, s, ceil_mode):
    out = (-(-(n - k) // s) if ceil_mode else (n - k) // s) + 1
    return out - 1 if ceil_mode and (out - 1) * s >= n else out


def _lp_pool_ref(dims):
    """Window by window over the last ``dims`` dimensions (no padding): the window's sum of x^p times the
    kernel's size over the (ceil_mode-clipped) window's size, as PyTorch's avg_pool composition, to the 1/p;
    p = +-inf: the largest / smallest |x|."""
    def ref(x, norm_type, kernel_size, stride=None, ceil_mode=False):
        k = (kernel_size,) * dims if isinstance(kernel_size, int) else tuple(kernel_size)
        s = k if stride is None else (stride,) * dims if isinstance(stride, int) else tuple(stride)
        lead, sizes = x.shape[:-dims], x.shape[-dims:]
        counts = [_pool_count(n, kk, ss, ceil_mode) for n, kk, ss in zip(sizes, k, s)]
        out = np.zeros(lead + tuple(counts))
        for pos in np.ndindex(*counts):
            lo = [p * ss for p, ss in zip(pos, s)]
            hi = [min(a + kk, n) for a, kk, n in zip(lo, k, sizes)]
            win = x[(Ellipsis,) + tuple(slice(a, b) for a, b in zip(lo, hi))].reshape(lead + (-1,))
            if abs(norm_type) == math.inf:
                val = np.abs(win).max(-1) if norm_type > 0 else np.abs(win).min(-1)
            else:
                val = ((win ** norm_type).sum(-1) * math.prod(k) / math.prod(np.subtract(hi, lo))) ** (1 / norm_type)
            out[(Ellipsis,) + pos] = val
        return out
    return ref


def pdist_ref(x, p=2.0):
    i, j = np.triu_indices(x.shape[0], 1)
    return np.linalg.norm(x[i] - x[j], ord=p, axis=-1)


def bilinear_ref(a, b, w, bias=None):
    return np.einsum("...i,oij,...j->...o", a, w, b) + (0 if bias is None else bias)


def _upsample_ref(mode=None, align_corners=None):
    def ref(x, size=None, scale_factor=None, **kw):
        fixed = {} if mode is None else {"mode": mode, "align_corners": align_corners}
        return interpolate_ref(x, size, scale_factor, **kw, **fixed)
    return ref


def _deprecated(fn):
    """``fn`` called under the check that it warns as PyTorch's deprecated alias does."""
    def call(*args, **kwargs):
        with pytest.warns(UserWarning, match=r"is deprecated\. Use `nn\.functional\.interpolate` instead"):
            return fn(*args, **kwargs)
    return call


def _unpool1d_ref(x, k, out_len=None):
    """Each (non-overlapping) window's maximum kept at its place, zeros elsewhere (and up to ``out_len``)."""
    n = x.shape[-1] // k * k
    keep = np.repeat(_pool1d_ref(max_pool2d_ref)(x[..., :n], k), k, -1) == x[..., :n]
    out = np.zeros(x.shape[:-1] + (out_len or n,))
    out[..., :n] = np.where(keep, x[..., :n], 0)
    return out


def multilabel_margin_ref(x, y, reduction="mean"):
    """Row by row: each listed target j (up to the first -1) against each class i not listed."""
    c = x.shape[-1] if x.ndim else 1
    rows, tgts = x.reshape(-1, c), y.reshape(-1, c)
    loss = np.zeros(len(rows))
    for r, (xr, yr) in enumerate(zip(rows, tgts)):
        listed = list(yr[:list(yr).index(-1)] if -1 in yr else yr)
        for j in listed:
            loss[r] += sum(max(0.0, 1 - (xr[j] - xr[i])) for i in range(c) if i not in listed) / c
    return _red(loss if x.ndim == 2 else loss[0], reduction)


def _cosine_distance_ref(u, v):
    return 1 - (u * v).sum(-1) / (np.linalg.norm(u, axis=-1) * np.linalg.norm(v, axis=-1))


def embedding_bag_ref(idx, w, offsets=None, mode="mean", per_sample_weights=None, include_last_offset=False,
                      padding_idx=None):
    """Bag by bag: the rows of the bag's non-padding entries (times their weights), summed, averaged or maxed;
    an empty bag is zeros."""
    if idx.ndim == 2:
        bags = [np.arange(i * idx.shape[1], (i + 1) * idx.shape[1]) for i in range(idx.shape[0])]
    else:
        ends = list(offsets[1:]) + ([] if include_last_offset else [len(idx)])  # (CSR: the last offset ends)
        bags = [np.arange(lo, hi) for lo, hi in zip(offsets, ends)]
    flat = idx.reshape(-1)
    psw = np.ones(flat.shape) if per_sample_weights is None else per_sample_weights.reshape(-1)
    out = np.zeros((len(bags), w.shape[1]))
    for b, entries in enumerate(bags):
        entries = [e for e in entries if padding_idx is None or flat[e] != padding_idx % w.shape[0]]
        if entries:
            rows = w[flat[entries]] * psw[entries][:, None]
            out[b] = {"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.max(0)}[mode]
    return out


def _output_of(name):
    """The output of ``F.<name>``, which returns (output, indices)."""
    return lambda x, **kw: getattr(F, name)(x, **kw)[0]


def _torch_output_of(name):
    return lambda T, x, **kw: getattr(T.nn.functional, name)(x, **kw)[0]


def _cosine_triplet_ref(a, p, n, margin=0.5):
    """The swapped triplet loss of cosine distances, summed."""
    d_neg = np.minimum(_cosine_distance_ref(a, n), _cosine_distance_ref(p, n))
    return np.maximum(0, margin + _cosine_distance_ref(a, p) - d_neg).sum()


_OFFSETS = (0, 2, 2, 5)  # bags of 2, 0 and 2 entries (of 7): an empty bag in the middle

FUNCTIONAL_GAP_OPS = [
    OpInfo("max_pool2d_with_indices", _output_of("max_pool2d_with_indices"), max_pool2d_ref,
           spelled="F.max_pool2d_with_indices", torch=_torch_output_of("max_pool2d_with_indices"), samples=(
               S("max_pool2d_with_indices", distinct((2, 3, 4, 6)), kernel_size=2),
               S("max_pool2d_with_indices_dilated", distinct((1, 2, 9, 8)), kernel_size=(3, 2), stride=(2, 1),
                 padding=1, dilation=(2, 3)),
               S("max_pool2d_with_indices_unpool", distinct((2, 3, 4, 6)),
                 fn=lambda x: F.max_unpool2d(*F.max_pool2d_with_indices(x, 2), 2),
                 ref=lambda x: np.where(x == np.repeat(np.repeat(max_pool2d_ref(x, 2), 2, -2), 2, -1), x, 0)))),
    OpInfo("max_pool1d_with_indices", _output_of("max_pool1d_with_indices"), _pool1d_ref(max_pool2d_ref),
           spelled="F.max_pool1d_with_indices", torch=_torch_output_of("max_pool1d_with_indices"), samples=(
               S("max_pool1d_with_indices", distinct((2, 3, 8)), kernel_size=2),
               S("max_pool1d_with_indices_dilated_unbatched", distinct((3, 11)), kernel_size=3, stride=2, padding=1,
                 dilation=3))),
    OpInfo("adaptive_max_pool2d_with_indices", _output_of("adaptive_max_pool2d_with_indices"),
           _adaptive(np.max, 2), spelled="F.adaptive_max_pool2d_with_indices",
           torch=_torch_output_of("adaptive_max_pool2d_with_indices"), samples=(
               S("adaptive_max_pool2d_with_indices", distinct((2, 3, 7, 10)), output_size=(3, 4)),
               S("adaptive_max_pool2d_with_indices_unbatched", distinct((2, 7, 5)), output_size=3))),
    OpInfo("adaptive_max_pool1d_with_indices", _output_of("adaptive_max_pool1d_with_indices"),
           _adaptive(np.max, 1), spelled="F.adaptive_max_pool1d_with_indices",
           torch=_torch_output_of("adaptive_max_pool1d_with_indices"), samples=(
               S("adaptive_max_pool1d_with_indices", distinct((2, 3, 10)), output_size=4),
               S("adaptive_max_pool1d_with_indices_indices", distinct((2, 3, 10)),
                 fn=lambda x: F.adaptive_max_pool1d_with_indices(x, 4)[1].to(x.dtype) + x.sum() * 0,
                 ref=lambda x: np.stack([x[..., lo:hi].argmax(-1) + lo for lo, hi in _bins(10, 4)], -1))),
           errors=(E("adaptive_max_pool1d_with_indices_dims",
                     lambda: F.adaptive_max_pool1d_with_indices(t(1, 2, 3, 4), 2), ValueError,
                     "adaptive_max_pool1d_with_indices: expected a 2-D or 3-D input"),)),
    OpInfo("lp_pool2d", F.lp_pool2d, _lp_pool_ref(2), spelled="F.lp_pool2d", torch=_torch_lp_pool(2), samples=(
               S("lp_pool2d", (2, 3, 4, 6), norm_type=2, kernel_size=2),
               S("lp_pool2d_p3_stride", pos((1, 2, 7, 5)), norm_type=3, kernel_size=(3, 2), stride=(2, 1)),
               S("lp_pool2d_p1_5_ceil_unbatched", pos((2, 5, 5)), norm_type=1.5, kernel_size=2, ceil_mode=True),
               S("lp_pool2d_inf", distinct((1, 2, 4, 4)), norm_type=math.inf, kernel_size=2)),
           errors=(E("lp_pool2d_too_small", lambda: F.lp_pool2d(t(1, 1, 4, 4), 2, 5), RuntimeError,
                     r"lp_pool2d: Given input size: \(1, 1, 4, 4\)\. .*Output size is too small"),
                   E("lp_pool2d_norm_type", lambda: F.lp_pool2d(t(1, 1, 4, 4), "2", 2), TypeError,
                     "lp_pool2d: norm_type must be a number"))),
    OpInfo("lp_pool1d", F.lp_pool1d, _lp_pool_ref(1), spelled="F.lp_pool1d", torch=_torch_lp_pool(1), samples=(
               S("lp_pool1d", (2, 3, 8), norm_type=2, kernel_size=2),
               S("lp_pool1d_p1_ceil", pos((1, 2, 9)), norm_type=1, kernel_size=2, ceil_mode=True),
               S("lp_pool1d_p4_stride_unbatched", pos((3, 7)), norm_type=4, kernel_size=3, stride=2),
               S("lp_pool1d_neg_inf", distinct((2, 3, 6)), norm_type=-math.inf, kernel_size=3)),
           errors=(E("lp_pool1d_norm_zero", lambda: F.lp_pool1d(t(1, 2, 6), 0, 2), ValueError,
                     "lp_pool1d: norm_type must be a non-zero value, but got 0"),
                   E("lp_pool1d_dims", lambda: F.lp_pool1d(t(4), 2, 1), RuntimeError,
                     "lp_pool1d: Expected 2 to 3 dimensions, but got 1-dimensional tensor"))),
    OpInfo("pdist", F.pdist, pdist_ref, spelled="F.pdist", aliases={"mf.pdist": mf.pdist}, torch=_tf("pdist"),
           gpu_tol=1e-4, samples=(
               S("pdist", (5, 4)), S("pdist_p1", (4, 33), p=1.0), S("pdist_inf", distinct((4, 3)), p=math.inf),
               S("pdist_p3", (3, 2), p=3), S("pdist_p_half", (4, 3), p=0.5), S("pdist_p0", (3, 4), p=0),
               S("pdist_one_row", (1, 3)), S("pdist_many_rows", (30, 2))),
           errors=(E("pdist_1d", lambda: F.pdist(t(4)), RuntimeError, "pdist: pdist only supports 2D tensors, got: 1D"),
                   E("pdist_negative_p", lambda: mf.pdist(t(4, 3), p=-1), RuntimeError,
                     "pdist: pdist only supports non-negative p values"),
                   E("pdist_int", lambda: F.pdist(mf.ones(3, 2, dtype=mf.int64)), RuntimeError,
                     "pdist: pdist only supports floating-point dtypes"))),
    OpInfo("bilinear", F.bilinear, bilinear_ref, spelled="F.bilinear", torch=_tf("bilinear"), gpu_tol=1e-4, samples=(
               S("bilinear", (4, 3), (4, 5), (2, 3, 5), (2,)),
               S("bilinear_batched_no_bias", (2, 3, 4), (2, 3, 1), (7, 4, 1)),
               S("bilinear_1d", (3,), (4,), (5, 3, 4), (5,))),
           errors=(E("bilinear_in1", lambda: F.bilinear(t(2, 3), t(2, 4), t(5, 4, 4)), RuntimeError,
                     "bilinear\\(\\): input1 size does not match weight size: got 3 but expected 4"),
                   E("bilinear_batch", lambda: F.bilinear(t(2, 3), t(3, 4), t(5, 3, 4)), RuntimeError,
                     "bilinear\\(\\): input batch dimensions do not match at dim 0: got 2 and 3"),
                   E("bilinear_bias", lambda: F.bilinear(t(2, 3), t(2, 4), t(5, 3, 4), t(4)), RuntimeError,
                     "bilinear\\(\\): bias size does not match weight size: got 4 but expected 5"),
                   E("bilinear_dtype", lambda: F.bilinear(t(2, 3), t(2, 4, dtype=mf.float64), t(5, 3, 4)),
                     RuntimeError, "bilinear\\(\\): All tensors must have the same dtype, got input1: float, "
                     "input2: double, weight: float"))),
    OpInfo("upsample", _deprecated(F.upsample), _upsample_ref(), spelled="F.upsample", torch=_tf("upsample"),
           samples=(S("upsample_nearest_default", (2, 3, 4, 5), scale_factor=2),
                    S("upsample_bilinear_mode", (1, 2, 3, 4), size=(5, 7), mode="bilinear", align_corners=False),
                    S("upsample_linear_1d", (2, 3, 5), scale_factor=1.5, mode="linear"))),
    OpInfo("upsample_nearest", _deprecated(F.upsample_nearest), _upsample_ref("nearest"),
           spelled="F.upsample_nearest", torch=_tf("upsample_nearest"),
           samples=(S("upsample_nearest", (2, 3, 4, 5), size=(7, 9)),
                    S("upsample_nearest_1d_scale", (2, 3, 5), scale_factor=3))),
    OpInfo("upsample_bilinear", _deprecated(F.upsample_bilinear), _upsample_ref("bilinear", True),
           spelled="F.upsample_bilinear", torch=_tf("upsample_bilinear"),
           samples=(S("upsample_bilinear", (2, 3, 4, 5), size=(7, 9)),
                    S("upsample_bilinear_scale", (1, 2, 3, 3), scale_factor=2)),
           errors=(E("upsample_bilinear_3d", lambda: pytest.warns(UserWarning, F.upsample_bilinear, t(1, 2, 3), size=5),
                     NotImplementedError, "interpolate: got 3D input, but bilinear mode needs 4D input"),)),
    OpInfo("max_unpool1d", F.max_unpool1d, None, spelled="F.max_unpool1d", torch=_tf("max_unpool1d"), samples=(
               S("max_unpool1d", distinct((2, 3, 8)), fn=lambda x: F.max_unpool1d(*F.max_pool1d_with_indices(x, 2), 2),
                 ref=lambda x: _unpool1d_ref(x, 2)),
               S("max_unpool1d_output_size_unbatched", distinct((3, 7)),
                 fn=lambda x: F.max_unpool1d(*F.max_pool1d(x, 2, return_indices=True), 2, output_size=(7,)),
                 ref=lambda x: _unpool1d_ref(x, 2, 7))),
           errors=(E("max_unpool1d_index", lambda: F.max_unpool1d(t(1, 1, 2), mf.tensor([[[0, 9]]]), 2), RuntimeError,
                     "max_unpool1d: Found an invalid max index"),
                   E("max_unpool1d_output_size", lambda: F.max_unpool1d(t(1, 1, 3), mf.tensor([[[0, 2, 4]]]), 2,
                                                                        output_size=(9,)),
                     ValueError, r'max_unpool1d: invalid output_size "\(9,\)" \(dim 0 must be between 4 and 8\)'),
                   E("max_unpool1d_dims", lambda: F.max_unpool1d(t(4), mf.tensor([0, 2, 4, 6]), 2), RuntimeError,
                     r"max_unpool1d: expected a 2-D \(C, L\) or 3-D \(N, C, L\) input"))),
    OpInfo("multilabel_margin_loss", F.multilabel_margin_loss, multilabel_margin_ref,
           spelled="F.multilabel_margin_loss", torch=_tf("multilabel_margin_loss"), samples=(
               S("multilabel_margin_loss", distinct((4, 5)), index((4, 5), 5)),
               S("multilabel_margin_loss_1d_none", distinct((6,)), index((6,), 6), reduction="none"),
               S("multilabel_margin_loss_terminated_sum", distinct((5, 6)), index((5, 6), 7),
                 fn=lambda x, y: F.multilabel_margin_loss(x, y - 1, reduction="sum"),
                 ref=lambda x, y: multilabel_margin_ref(x, y - 1, reduction="sum"))),
           errors=(E("multilabel_margin_range", lambda: F.multilabel_margin_loss(t(1, 4), mf.tensor([[4, 0, -1, 1]])),
                     RuntimeError, "multilabel_margin_loss: argument #2 'target' is out of range"),
                   E("multilabel_margin_size", lambda: F.multilabel_margin_loss(t(1, 4), mf.tensor([[0, 1]])),
                     RuntimeError, r"multilabel_margin_loss: inconsistent target size: \[1, 2\] for input of size: "
                     r"\[1, 4\]"),
                   E("multilabel_margin_dtype", lambda: F.multilabel_margin_loss(t(1, 2), t(1, 2)), RuntimeError,
                     "multilabel_margin_loss: expected scalar type Long"),
                   E("multilabel_margin_3d", lambda: F.multilabel_margin_loss(t(2, 3, 4), mf.zeros(2, 3, 4,
                                                                                                  dtype=mf.int64)),
                     RuntimeError, "multilabel_margin_loss: Expected non-empty vector or matrix"))),
    OpInfo("triplet_margin_with_distance_loss", F.triplet_margin_with_distance_loss, triplet_margin_ref,
           spelled="F.triplet_margin_with_distance_loss", torch=_tf("triplet_margin_with_distance_loss"), samples=(
               S("triplet_margin_with_distance_loss", (5, 8), (5, 8), (5, 8)),
               S("triplet_margin_with_distance_loss_none", (6, 3), (6, 3), (6, 3), margin=2.0, reduction="none",
                 swap=True),
               S("triplet_margin_with_distance_loss_cosine_sum", (4, 6), (4, 6), (4, 6),
                 fn=lambda a, p, n: F.triplet_margin_with_distance_loss(
                     a, p, n, distance_function=lambda u, v: 1 - F.cosine_similarity(u, v, dim=-1), margin=0.5,
                     swap=True, reduction="sum"),
                 ref=_cosine_triplet_ref)),
           errors=(E("triplet_distance_margin", lambda: F.triplet_margin_with_distance_loss(t(2, 3), t(2, 3), t(2, 3),
                                                                                            margin=0),
                     ValueError, "triplet_margin_with_distance_loss: margin must be greater than 0, got 0"),
                   E("triplet_distance_dims", lambda: F.triplet_margin_with_distance_loss(t(2, 3), t(2, 3), t(3)),
                     RuntimeError, "triplet_margin_with_distance_loss: The anchor, positive, and negative tensors"),
                   E("triplet_distance_reduction",
                     lambda: F.triplet_margin_with_distance_loss(t(2, 3), t(2, 3), t(2, 3), reduction="x"),
                     ValueError, "triplet_margin_with_distance_loss: x is not a valid value for reduction"))),
    OpInfo("embedding_bag", F.embedding_bag, embedding_bag_ref, spelled="F.embedding_bag", torch=_tf("embedding_bag"),
           samples=(S("embedding_bag_2d_mean", index((3, 4), 6), (6, 5)),
                    S("embedding_bag_2d_max_padding", index((3, 4), 6), distinct((6, 5)), mode="max", padding_idx=2),
                    S("embedding_bag_2d_sum_padding", index((2, 5), 4), (4, 3), mode="sum", padding_idx=-1),
                    S("embedding_bag_offsets_weighted_sum", index((7,), 6), (6, 4), (7,),
                      fn=lambda idx, w, psw: F.embedding_bag(idx, w, mf.tensor(_OFFSETS), mode="sum",
                                                             per_sample_weights=psw),
                      ref=lambda idx, w, psw: embedding_bag_ref(idx, w, _OFFSETS, "sum", psw)),
                    S("embedding_bag_offsets_mean_last_offset", index((7,), 6), (6, 4),
                      fn=lambda idx, w: F.embedding_bag(idx, w, mf.tensor(_OFFSETS), include_last_offset=True),
                      ref=lambda idx, w: embedding_bag_ref(idx, w, _OFFSETS, include_last_offset=True)),
                    S("embedding_bag_offsets_max", index((7,), 6), distinct((6, 4)),
                      fn=lambda idx, w: F.embedding_bag(idx, w, mf.tensor(_OFFSETS), mode="max"),
                      ref=lambda idx, w: embedding_bag_ref(idx, w, _OFFSETS, "max"))),
           errors=(E("embedding_bag_mode", lambda: F.embedding_bag(mf.tensor([[1]]), t(3, 2), mode="min"), ValueError,
                     "embedding_bag: mode has to be one of sum, mean or max"),
                   E("embedding_bag_weights_mode", lambda: F.embedding_bag(mf.tensor([[1]]), t(3, 2),
                                                                           per_sample_weights=t(1, 1)),
                     NotImplementedError, "embedding_bag: per_sample_weights was not None.*mode='sum'"),
                   E("embedding_bag_first_offset", lambda: F.embedding_bag(mf.tensor([1, 2]), t(3, 2), mf.tensor([1])),
                     RuntimeError, "embedding_bag: offsets\\[0\\] has to be 0"),
                   E("embedding_bag_2d_offsets", lambda: F.embedding_bag(mf.tensor([[1]]), t(3, 2), mf.tensor([0])),
                     ValueError, "embedding_bag: if input is 2D, then offsets has to be None"),
                   E("embedding_bag_no_offsets", lambda: F.embedding_bag(mf.tensor([1]), t(3, 2)), ValueError,
                     "embedding_bag: offsets has to be a 1D Tensor but got None"),
                   E("embedding_bag_padding_idx", lambda: F.embedding_bag(mf.tensor([[1]]), t(5, 2), padding_idx=5),
                     RuntimeError, "embedding_bag: padding_idx must be within the number of embeddings, -5 through 4"),
                   E("embedding_bag_float_input", lambda: F.embedding_bag(t(1, 2), t(5, 2)), RuntimeError,
                     "embedding_bag: expected input indices of dtype int64 or int32"))),
]


# ---------------------------------------------------------------- volumetric (3-D) convolution and pooling
# (minifused/functional/volume.py, built on the 2-D ops; their modules: tests/test_volume.py)
def _triple(v):
    return (v,) * 3 if isinstance(v, int) else tuple(v)


def conv3d_ref(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """Windows of the zero-padded volume against the kernel, group by group ('same': the odd pad after)."""
    if x.ndim == 4:
        return conv3d_ref(x[None], w, b, stride, padding, dilation, groups)[0]
    st, dl, (k, cg, *ks) = _triple(stride), _triple(dilation), w.shape
    if isinstance(padding, str):
        pads = [(0, 0)] * 3 if padding == "valid" else [(d * (kk - 1) // 2, d * (kk - 1) - d * (kk - 1) // 2)
                                                         for d, kk in zip(dl, ks)]
    else:
        pads = [(p, p) for p in _triple(padding)]
    xp = np.pad(x, ((0, 0), (0, 0), *pads))
    win = sliding_window_view(xp, tuple((kk - 1) * d + 1 for kk, d in zip(ks, dl)), axis=(2, 3, 4))
    win = win[:, :, ::st[0], ::st[1], ::st[2], ::dl[0], ::dl[1], ::dl[2]]
    kg = k // groups
    out = np.concatenate([np.einsum("ncdhwxyz,kcxyz->nkdhw", win[:, g * cg:(g + 1) * cg], w[g * kg:(g + 1) * kg])
                          for g in range(groups)], axis=1)
    return out if b is None else out + b[:, None, None, None]


def conv_transpose3d_ref(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Each input voxel scatters ``x * w`` onto the output, tap by tap."""
    if x.ndim == 4:
        return conv_transpose3d_ref(x[None], w, b, stride, padding, output_padding, groups, dilation)[0]
    st, pd, op, dl = map(_triple, (stride, padding, output_padding, dilation))
    (n, cin, *size), (_, cg, *ks) = x.shape, w.shape
    out = [(s - 1) * a - 2 * p + d * (k - 1) + o + 1 for s, a, p, d, k, o in zip(size, st, pd, dl, ks, op)]
    full = np.zeros((n, cg * groups, *[o + 2 * p + a for o, p, a in zip(out, pd, st)]))
    per = cin // groups
    for g in range(groups):
        xs, ws = x[:, g * per:(g + 1) * per], w[g * per:(g + 1) * per]
        for tap in np.ndindex(*ks):
            at = tuple(slice(t * d, t * d + a * (s - 1) + 1, a) for t, d, a, s in zip(tap, dl, st, size))
            full[(slice(None), slice(g * cg, (g + 1) * cg)) + at] += np.einsum("nidhw,io->nodhw", xs,
                                                                                ws[(Ellipsis,) + tap])
    y = full[(slice(None), slice(None)) + tuple(slice(p, p + o) for p, o in zip(pd, out))]
    return y if b is None else y + b[None, :, None, None, None]


def _pool3d_windows(x, kernel_size, stride, padding, dilation, ceil_mode):
    """Per output position of a 3-D pooling: (position, the in-input taps per dimension, the window's size
    clipped to the padded input)."""
    k, p, d = _triple(kernel_size), _triple(padding), _triple(dilation)
    s, size = _triple(stride or kernel_size), x.shape[-3:]
    out = []
    for n, kk, ss, pp, dd in zip(size, k, s, p, d):
        o = (n + 2 * pp - dd * (kk - 1) - 1 + (ss - 1 if ceil_mode else 0)) // ss + 1
        out.append(o - 1 if ceil_mode and (o - 1) * ss >= n + pp else o)
    for pos in np.ndindex(*out):
        starts = [o * ss - pp for o, ss, pp in zip(pos, s, p)]
        taps = [[a + t * dd for t in range(kk) if 0 <= a + t * dd < n] for a, kk, dd, n in zip(starts, k, d, size)]
        padded = math.prod(min(a + kk, n + pp) - a for a, kk, n, pp in zip(starts, k, size, p))
        yield out, pos, taps, padded


def _pool3d_ref(kind):
    """max_pool3d / avg_pool3d / max_pool3d indices (first maximum in (d, h, w) order), window by window."""
    def ref(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, count_include_pad=True,
            divisor_override=None, return_indices=False):
        if x.ndim == 4:
            return ref(x[None], kernel_size, stride, padding, dilation, ceil_mode, count_include_pad,
                       divisor_override)[0]
        y = None
        for out, pos, taps, padded in _pool3d_windows(x, kernel_size, stride, padding, dilation, ceil_mode):
            y = np.zeros(x.shape[:2] + tuple(out)) if y is None else y
            win = x[:, :, taps[0]][:, :, :, taps[1]][:, :, :, :, taps[2]].reshape(x.shape[:2] + (-1,))
            if kind == "max":
                y[(Ellipsis,) + pos] = win.max(-1)
            elif kind == "avg":
                y[(Ellipsis,) + pos] = win.sum(-1) / (divisor_override or (padded if count_include_pad else
                                                                            win.shape[-1]))
            else:
                dz, dy, dx = np.unravel_index(win.argmax(-1), [len(t) for t in taps])
                h, w = x.shape[-2:]
                y[(Ellipsis,) + pos] = (np.take(taps[0], dz) * h * w + np.take(taps[1], dy) * w
                                        + np.take(taps[2], dx))
        return y
    return ref


def _adaptive_max3d_indices_ref(x, output_size):
    """The flat d*H*W + h*W + w index of each adaptive bin's first maximum."""
    size = _triple(output_size)
    d, h, w = x.shape[-3:]
    y = np.zeros(x.shape[:-3] + size)
    grids = [_bins(n, m) for n, m in zip((d, h, w), size)]
    for pos in np.ndindex(*size):
        (a0, a1), (b0, b1), (c0, c1) = (grids[i][q] for i, q in enumerate(pos))
        win = x[..., a0:a1, b0:b1, c0:c1]
        dz, dy, dx = np.unravel_index(win.reshape(x.shape[:-3] + (-1,)).argmax(-1), win.shape[-3:])
        y[(Ellipsis,) + pos] = (a0 + dz) * h * w + (b0 + dy) * w + c0 + dx
    return y


def _indices_as_values(fn):
    """``fn``'s int64 indices as floats on the tape (``x.sum() * 0`` keeps them differentiable for the suites)."""
    return lambda x: fn(x)[1].to(x.dtype) + x.sum() * 0


VOLUME_OPS = [
    OpInfo("conv3d", F.conv3d, conv3d_ref, spelled="F.conv3d", gpu_tol=1e-4, torch=_tf("conv3d"), samples=(
               S("conv3d", (2, 3, 4, 5, 3), (2, 3, 2, 3, 2), (2,)),
               S("conv3d_stride_pad_dilation", (1, 2, 7, 4, 5), (3, 2, 2, 2, 3), stride=(2, 1, 2), padding=(1, 0, 1),
                 dilation=(2, 1, 1)),
               S("conv3d_groups", (1, 4, 3, 4, 4), (2, 2, 2, 2, 2), (2,), groups=2),
               S("conv3d_same_even_kernel", (1, 2, 4, 3, 4), (2, 2, 2, 3, 2), padding="same"),
               S("conv3d_unbatched_valid", (2, 3, 4, 3), (2, 2, 2, 2, 2), padding="valid")),
           errors=(E("conv3d_channels", lambda: F.conv3d(t(1, 3, 4, 4, 4), t(2, 2, 3, 3, 3)), RuntimeError,
                     r"conv3d: Given groups=1, weight of size \(2, 2, 3, 3, 3\) expects the input to have 2 channels"),
                   E("conv3d_input_dims", lambda: F.conv3d(t(3, 4, 4), t(2, 3, 3, 3, 3)), RuntimeError,
                     r"conv3d: expected a 5-D input \(N, C, D, H, W\) or a 4-D unbatched one"),
                   E("conv3d_weight_dims", lambda: F.conv3d(t(1, 3, 4, 4, 4), t(2, 3, 3, 3)), RuntimeError,
                     "conv3d: weight must be 5-D"),
                   E("conv3d_kernel_too_big", lambda: F.conv3d(t(1, 1, 2, 4, 4), t(1, 1, 3, 3, 3)), RuntimeError,
                     "conv3d: Calculated padded input size per channel: .*Kernel size can't be greater"),
                   E("conv3d_stride_zero", lambda: F.conv3d(t(1, 1, 4, 4, 4), t(1, 1, 3, 3, 3), stride=0),
                     RuntimeError, "conv3d: stride must be >= 1"),
                   E("conv3d_stride_pair", lambda: F.conv3d(t(1, 1, 4, 4, 4), t(1, 1, 3, 3, 3), stride=(1, 1)),
                     RuntimeError, "conv3d: stride must be an int or a tuple of three ints"),
                   E("conv3d_same_strided", lambda: F.conv3d(t(1, 1, 4, 4, 4), t(1, 1, 3, 3, 3), stride=2,
                                                             padding="same"),
                     RuntimeError, "conv3d: padding='same' is not supported for strided convolutions"),
                   E("conv3d_padding_string", lambda: F.conv3d(t(1, 1, 4, 4, 4), t(1, 1, 3, 3, 3), padding="full"),
                     RuntimeError, "conv3d: Invalid padding string: 'full'"),
                   E("conv3d_dtype", lambda: F.conv3d(t(1, 1, 4, 4, 4), t(1, 1, 3, 3, 3, dtype=mf.float64)),
                     RuntimeError, "conv3d: input, weight and bias must have one dtype"),
                   E("conv3d_bias_shape", lambda: F.conv3d(t(1, 1, 4, 4, 4), t(2, 1, 3, 3, 3), t(3)), RuntimeError,
                     r"conv3d: bias must have shape \(2,\)"))),
    OpInfo("conv_transpose3d", F.conv_transpose3d, conv_transpose3d_ref, spelled="F.conv_transpose3d", gpu_tol=1e-4,
           torch=_tf("conv_transpose3d"), samples=(
               S("conv_transpose3d", (2, 3, 2, 3, 2), (3, 2, 2, 3, 2), (2,)),
               S("conv_transpose3d_stride_pad_outpad", (1, 2, 3, 2, 3), (2, 2, 3, 2, 2), stride=(2, 3, 2),
                 padding=(1, 0, 1), output_padding=(1, 2, 0)),
               S("conv_transpose3d_groups_dilation", (1, 4, 2, 3, 2), (4, 1, 2, 2, 2), (2,), groups=2,
                 dilation=(2, 1, 2), stride=(1, 2, 1)),
               S("conv_transpose3d_unbatched", (2, 2, 2, 3), (2, 1, 2, 2, 2), stride=2)),
           errors=(E("conv_transpose3d_channels", lambda: F.conv_transpose3d(t(1, 3, 4, 4, 4), t(2, 2, 3, 3, 3)),
                     RuntimeError, "conv_transpose3d: Given transposed=1, weight of size .* expects the input to "
                     "have 2 channels"),
                   E("conv_transpose3d_output_padding", lambda: F.conv_transpose3d(t(1, 2, 4, 4, 4), t(2, 2, 3, 3, 3),
                                                                                   stride=2, output_padding=2),
                     RuntimeError, "conv_transpose3d: output padding must be smaller than either stride or "
                     "dilation"))),
    OpInfo("max_pool3d", F.max_pool3d, _pool3d_ref("max"), spelled="F.max_pool3d", torch=_tf("max_pool3d"), samples=(
               S("max_pool3d", distinct((2, 3, 4, 4, 6)), kernel_size=2),
               S("max_pool3d_s2p1_ceil", distinct((1, 2, 5, 6, 5)), kernel_size=3, stride=2, padding=1,
                 ceil_mode=True),
               S("max_pool3d_dilated", distinct((1, 2, 7, 5, 6)), kernel_size=(3, 2, 2), stride=(2, 1, 2),
                 padding=(1, 1, 0), dilation=(2, 1, 2)),
               S("max_pool3d_unbatched", distinct((2, 3, 4, 5)), kernel_size=2, stride=1),
               S("max_pool3d_indices", distinct((2, 2, 5, 4, 6)),
                 fn=_indices_as_values(lambda x: F.max_pool3d(x, 3, 2, 1, 1, True, return_indices=True)),
                 ref=lambda x: _pool3d_ref("index")(x, 3, 2, 1, 1, True)),
               S("max_pool3d_indices_ties", (2, 3, 4, 4),
                 fn=_indices_as_values(lambda x: F.max_pool3d(x * 0 + 1, 2, 1, return_indices=True)),
                 ref=lambda x: _pool3d_ref("index")(x * 0 + 1, 2, 1)),
               S("max_pool3d_unpool", distinct((1, 2, 4, 6, 4)),
                 fn=lambda x: F.max_unpool3d(*F.max_pool3d(x, 2, return_indices=True), 2),
                 ref=lambda x: np.where(x == np.repeat(np.repeat(np.repeat(_pool3d_ref("max")(x, 2), 2, -3), 2, -2),
                                                       2, -1), x, 0))),
           errors=(E("max_pool3d_padding", lambda: F.max_pool3d(t(1, 1, 4, 4, 4), 2, padding=2), RuntimeError,
                     "max_pool3d: pad should be smaller than or equal to half of kernel size"),
                   E("max_pool3d_too_small", lambda: F.max_pool3d(t(1, 1, 2, 4, 4), 3), RuntimeError,
                     r"max_pool3d: Given input size: \(1, 1, 2, 4, 4\)\. Calculated output size: \(0, 1, 1\)"),
                   E("max_pool3d_dims", lambda: F.max_pool3d(t(4, 4, 4), 2), RuntimeError,
                     r"max_pool3d: expected a 5-D input \(N, C, D, H, W\) or a 4-D unbatched one"),
                   E("max_pool3d_dilation_zero", lambda: F.max_pool3d(t(1, 1, 4, 4, 4), 2, dilation=0), RuntimeError,
                     "max_pool3d: dilation must be >= 1"),
                   E("max_pool3d_kernel_pair", lambda: F.max_pool3d(t(1, 1, 4, 4, 4), (2, 2)), RuntimeError,
                     "max_pool3d: kernel_size must be an int or a tuple of three ints"),
                   E("max_pool3d_bool", lambda: F.max_pool3d(mf.ones(1, 1, 2, 2, 2, dtype=mf.bool), 2), TypeError,
                     r"max_pool3d: expected a floating-point or integer \(not bool\) input"))),
    OpInfo("max_pool3d_with_indices", _output_of("max_pool3d_with_indices"), _pool3d_ref("max"),
           spelled="F.max_pool3d_with_indices", torch=_torch_output_of("max_pool3d_with_indices"), samples=(
               S("max_pool3d_with_indices", distinct((1, 2, 4, 4, 5)), kernel_size=2, stride=(1, 2, 2)),)),
    OpInfo("avg_pool3d", F.avg_pool3d, _pool3d_ref("avg"), spelled="F.avg_pool3d", torch=_tf("avg_pool3d"), samples=(
               S("avg_pool3d", (2, 3, 4, 4, 6), kernel_size=2),
               S("avg_pool3d_s2p1_ceil", (1, 2, 5, 6, 5), kernel_size=3, stride=2, padding=1, ceil_mode=True),
               S("avg_pool3d_exclude_pad_ceil", (1, 2, 5, 6, 5), kernel_size=(3, 2, 3), stride=2, padding=(1, 1, 0),
                 ceil_mode=True, count_include_pad=False),
               S("avg_pool3d_divisor", (1, 2, 4, 5, 3), kernel_size=2, stride=1, padding=1, divisor_override=3),
               S("avg_pool3d_unbatched", (2, 3, 4, 5), kernel_size=2, stride=1)),
           errors=(E("avg_pool3d_divisor_zero", lambda: F.avg_pool3d(t(1, 1, 4, 4, 4), 2, divisor_override=0),
                     RuntimeError, "avg_pool3d: divisor must be not zero"),
                   E("avg_pool3d_padding", lambda: F.avg_pool3d(t(1, 1, 4, 4, 4), 2, padding=2), RuntimeError,
                     "avg_pool3d: pad should be smaller than or equal to half of kernel size"),
                   E("avg_pool3d_stride_zero", lambda: F.avg_pool3d(t(1, 1, 4, 4, 4), 2, stride=0), RuntimeError,
                     "avg_pool3d: stride must be >= 1"),
                   E("avg_pool3d_small_input", lambda: F.avg_pool3d(t(1, 1, 1, 4, 4), 3, padding=1), RuntimeError,
                     r"avg_pool3d: input image \(T: 1 H: 4 W: 4\) smaller than kernel size \(kT: 3 kH: 3 kW: 3\)"))),
    OpInfo("adaptive_avg_pool3d", F.adaptive_avg_pool3d, _adaptive(np.mean, 3), spelled="F.adaptive_avg_pool3d",
           torch=_tf("adaptive_avg_pool3d"), samples=(
               S("adaptive_avg_pool3d", (2, 3, 5, 7, 6), output_size=(2, 3, 4)),
               S("adaptive_avg_pool3d_global", (2, 3, 3, 4, 5), output_size=1),
               S("adaptive_avg_pool3d_none_up", (1, 2, 3, 5, 4), output_size=(None, 7, 2)),
               S("adaptive_avg_pool3d_unbatched", (2, 5, 4, 6), output_size=(3, 2, 4))),
           errors=(E("adaptive_avg_pool3d_dims", lambda: F.adaptive_avg_pool3d(t(4, 4, 4), 2), RuntimeError,
                     "adaptive_avg_pool3d: Expected 4D or 5D tensor"),
                   E("adaptive_avg_pool3d_negative", lambda: F.adaptive_avg_pool3d(t(1, 1, 4, 4, 4), -1),
                     RuntimeError, "adaptive_avg_pool3d: elements of output_size must be greater than or equal to 0"),
                   E("adaptive_avg_pool3d_size_len", lambda: F.adaptive_avg_pool3d(t(1, 1, 4, 4, 4), (1, 2)),
                     RuntimeError, "adaptive_avg_pool3d: output_size must be an int or a triple"))),
    OpInfo("adaptive_max_pool3d", F.adaptive_max_pool3d, _adaptive(np.max, 3), spelled="F.adaptive_max_pool3d",
           torch=_tf("adaptive_max_pool3d"), samples=(
               S("adaptive_max_pool3d", distinct((2, 3, 5, 7, 6)), output_size=(2, 3, 4)),
               S("adaptive_max_pool3d_up_unbatched", distinct((2, 3, 4, 3)), output_size=(5, None, 2)),
               S("adaptive_max_pool3d_indices", distinct((2, 2, 5, 7, 6)),
                 fn=_indices_as_values(lambda x: F.adaptive_max_pool3d(x, (2, 3, 4), return_indices=True)),
                 ref=lambda x: _adaptive_max3d_indices_ref(x, (2, 3, 4)))),
           errors=(E("adaptive_max_pool3d_empty", lambda: F.adaptive_max_pool3d(t(1, 1, 0, 4, 4), 2), RuntimeError,
                     "adaptive_max_pool3d: Expected input to have non-zero size for non-batch dimensions"),)),
    OpInfo("adaptive_max_pool3d_with_indices", _output_of("adaptive_max_pool3d_with_indices"), _adaptive(np.max, 3),
           spelled="F.adaptive_max_pool3d_with_indices", torch=_torch_output_of("adaptive_max_pool3d_with_indices"),
           samples=(S("adaptive_max_pool3d_with_indices", distinct((1, 2, 5, 4, 6)), output_size=(2, 3, 4)),)),
    OpInfo("lp_pool3d", F.lp_pool3d, _lp_pool_ref(3), spelled="F.lp_pool3d", torch=_torch_lp_pool(3), samples=(
               S("lp_pool3d", (2, 3, 4, 4, 6), norm_type=2, kernel_size=2),
               S("lp_pool3d_p3_stride_ceil", pos((1, 2, 5, 4, 5)), norm_type=3, kernel_size=(3, 2, 2),
                 stride=(2, 1, 2), ceil_mode=True),
               S("lp_pool3d_inf_unbatched", distinct((2, 4, 4, 4)), norm_type=math.inf, kernel_size=2)),
           errors=(E("lp_pool3d_norm_zero", lambda: F.lp_pool3d(t(1, 1, 4, 4, 4), 0, 2), ValueError,
                     "lp_pool3d: norm_type must be a non-zero value"),
                   E("lp_pool3d_too_small", lambda: F.lp_pool3d(t(1, 1, 4, 4, 4), 2, 5), RuntimeError,
                     r"lp_pool3d: Given input size: \(1, 1, 4, 4, 4\)\. .*Output size is too small"))),
    OpInfo("max_unpool3d", F.max_unpool3d, None, spelled="F.max_unpool3d", torch=_tf("max_unpool3d"), samples=(
               S("max_unpool3d_output_size", distinct((1, 2, 5, 4, 5)),
                 fn=lambda x: F.max_unpool3d(*F.max_pool3d(x, 2, return_indices=True), 2, output_size=(5, 4, 5)),
                 ref=lambda x: np.where(x == np.pad(np.repeat(np.repeat(np.repeat(_pool3d_ref("max")(x, 2), 2, -3), 2,
                                                                        -2), 2, -1), ((0, 0),) * 2 + ((0, 1), (0, 0),
                                                                                                      (0, 1)),
                                                    constant_values=np.inf), x, 0)),
               S("max_unpool3d_unbatched", distinct((2, 4, 4, 6)),
                 fn=lambda x: F.max_unpool3d(*F.max_pool3d(x, 2, return_indices=True), 2),
                 ref=lambda x: np.where(x == np.repeat(np.repeat(np.repeat(_pool3d_ref("max")(x, 2), 2, -3), 2, -2),
                                                       2, -1), x, 0))),
           errors=(E("max_unpool3d_index", lambda: F.max_unpool3d(t(1, 1, 2, 2, 2), mf.full((1, 1, 2, 2, 2), 100),
                                                                  2), RuntimeError,
                     r"max_unpool3d: Found an invalid max index \(indices must lie in \[0, 64\)"),
                   E("max_unpool3d_output_size", lambda: F.max_unpool3d(t(1, 1, 2, 2, 2),
                                                                        mf.zeros((1, 1, 2, 2, 2), dtype=mf.int64), 2,
                                                                        output_size=(9, 9, 9)),
                     ValueError, r"max_unpool3d: invalid output_size \"\(9, 9, 9\)\" \(dim 0 must be between 2 "
                     r"and 6\)"),
                   E("max_unpool3d_dims", lambda: F.max_unpool3d(t(2, 2, 2), mf.zeros((2, 2, 2), dtype=mf.int64), 2),
                     RuntimeError, "max_unpool3d: Input to max_unpooling3d should be a 4d or 5d Tensor"))),
]


OPS += (MATH_OPS + INDEX_OPS + ACTIVATION_OPS + LAYER_OPS + REDUCE_OPS + PRODUCT_OPS + ARRANGE_OPS + SPECIAL_OPS
        + FUNCTIONAL_GAP_OPS + VOLUME_OPS)


# ---------------------------------------------------------------- attention (the modules: tests/test_attention.py)
def attention_softmax_ref(s, safe):
    """Softmax over the last axis; a row of -inf only gives 0 with ``safe`` (SDPA's), NaN without (MHA's weights)."""
    m = s.max(-1, keepdims=True)
    dead = np.isneginf(m)
    e = np.exp(s - np.where(dead, 0.0, m))
    return np.where(dead, 0.0 if safe else np.nan, e / np.where(dead, 1.0, e.sum(-1, keepdims=True)))


def sdpa_ref(q, k, v, attn_mask=None, is_causal=False, scale=None, enable_gqa=False):
    """Bool masks: True takes part; float masks are added; GQA repeats each key / value head."""
    L, S, E = q.shape[-2], k.shape[-2], q.shape[-1]
    if enable_gqa:
        k = np.repeat(k, q.shape[-3] // k.shape[-3], axis=-3)
        v = np.repeat(v, q.shape[-3] // v.shape[-3], axis=-3)
    s = q @ np.swapaxes(k, -1, -2) * (1 / math.sqrt(E) if scale is None else scale)
    if is_causal:
        s = np.where(np.tri(L, S, dtype=bool), s, -np.inf)
    if attn_mask is not None:
        s = np.where(attn_mask, s, -np.inf) if attn_mask.dtype == bool else s + attn_mask
    return attention_softmax_ref(s, safe=True) @ v


def _additive(mask):
    return np.where(mask, -np.inf, 0.0) if mask.dtype == bool else mask  # MHA's bool masks: True is left out


def mha_ref(query, key, value, p, num_heads, key_padding_mask=None, attn_mask=None, need_weights=True,
            average_attn_weights=True, add_zero_attn=False):
    """Sequence-first (L, N, E) multi-head attention from a state dict ``p`` as NumPy arrays: (output, weights)."""
    E, H = p["out_proj.weight"].shape[0], num_heads
    if "in_proj_weight" in p:
        wq, wk, wv = np.split(p["in_proj_weight"], 3)
    else:
        wq, wk, wv = p["q_proj_weight"], p["k_proj_weight"], p["v_proj_weight"]
    bq, bk, bv = np.split(p["in_proj_bias"], 3) if "in_proj_bias" in p else (0.0, 0.0, 0.0)
    q, k, v = query @ wq.T + bq, key @ wk.T + bk, value @ wv.T + bv
    L, N, _ = q.shape
    bias = np.zeros((N, H, L, k.shape[0]))
    if attn_mask is not None:
        bias = bias + _additive(attn_mask).reshape((1, 1, L, -1) if attn_mask.ndim == 2 else (N, H, L, -1))
    if key_padding_mask is not None:
        bias = bias + _additive(key_padding_mask)[:, None, None, :]
    if "bias_k" in p:
        k = np.concatenate([k, np.broadcast_to(p["bias_k"], (1, N, E))])
        v = np.concatenate([v, np.broadcast_to(p["bias_v"], (1, N, E))])
        bias = np.concatenate([bias, np.zeros((N, H, L, 1))], -1)
    hd = E // H
    qh, kh, vh = (x.reshape(x.shape[0], N, H, hd).transpose(1, 2, 0, 3) for x in (q, k, v))
    if add_zero_attn:
        kh, vh = (np.concatenate([x, np.zeros((N, H, 1, hd))], 2) for x in (kh, vh))
        bias = np.concatenate([bias, np.zeros((N, H, L, 1))], -1)
    w = attention_softmax_ref(qh @ np.swapaxes(kh, -1, -2) / math.sqrt(hd) + bias, safe=not need_weights)
    o = (w @ vh).transpose(2, 0, 1, 3).reshape(L, N, E) @ p["out_proj.weight"].T + p.get("out_proj.bias", 0.0)
    return o, ((w.mean(1) if average_attn_weights else w) if need_weights else None)


def _mha_args(w, b, ow, ob):
    return {"in_proj_weight": w, "in_proj_bias": b, "out_proj.weight": ow, "out_proj.bias": ob}


def _mha_out(q, k, v, w, b, ow, ob, num_heads=2, **kw):
    """F.multi_head_attention_forward's output, from the packed in-projection."""
    return F.multi_head_attention_forward(q, k, v, q.shape[-1], num_heads, w, b, None, None, False, 0.0, ow, ob,
                                          **kw)[0]


def _mha_out_ref(q, k, v, w, b, ow, ob, num_heads=2, **kw):
    if q.ndim == 2:  # unbatched: a batch of one
        return _mha_out_ref(q[:, None], k[:, None], v[:, None], w, b, ow, ob, num_heads, **kw)[:, 0]
    return mha_ref(q, k, v, _mha_args(w, b, ow, ob), num_heads, **kw)[0]


def _torch_mha_out(T, q, k, v, w, b, ow, ob, num_heads=2, **kw):
    return T.nn.functional.multi_head_attention_forward(q, k, v, q.shape[-1], num_heads, w, b, None, None, False,
                                                        0.0, ow, ob, **kw)[0]


def _torch_sdpa(T, *args, **kwargs):
    """PyTorch's math backend: its flash / memory-efficient kernels round differently."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        return T.nn.functional.scaled_dot_product_attention(*args, **kwargs)


_SDPA_MASK = np.array([[True, False, True, True, False], [False] * 5, [True, True, False, False, True]])
_PADDING = np.array([[False, False, True, False, True], [False] * 4 + [True]])  # (N, S), True: a padded key


def _on(mask, like):
    return mf.tensor(mask, device=like.device)


ATTENTION_OPS = [
    OpInfo("scaled_dot_product_attention", F.scaled_dot_product_attention, sdpa_ref,
           spelled="F.scaled_dot_product_attention", torch=_torch_sdpa, gpu_tol=1e-4, samples=(
               S("sdpa", (2, 3, 4), (2, 5, 4), (2, 5, 6)),
               S("sdpa_unbatched", (3, 4), (5, 4), (5, 1)),
               S("sdpa_float_mask_heads", (2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 3), (1, 3, 5)),
               S("sdpa_causal_long_query", (1, 2, 6, 4), (1, 2, 3, 4), (1, 2, 3, 5), is_causal=True),
               S("sdpa_gqa_scale_broadcast", (2, 4, 3, 4), (1, 2, 5, 4), (2, 1, 5, 6), enable_gqa=True, scale=0.3),
               S("sdpa_bool_mask_empty_row", (2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 6),
                 fn=lambda q, k, v: F.scaled_dot_product_attention(q, k, v, _on(_SDPA_MASK, q)),
                 ref=lambda q, k, v: sdpa_ref(q, k, v, _SDPA_MASK))),
           errors=(E("sdpa_mask_dtype", lambda: F.scaled_dot_product_attention(t(3, 4), t(5, 4), t(5, 6),
                                                                                 mf.ones(3, 5, dtype=mf.int64)),
                     TypeError, "scaled_dot_product_attention: expected attn_mask of dtype bool, float32 or the "
                     "query's"),
                   E("sdpa_mask_shape", lambda: F.scaled_dot_product_attention(t(3, 4), t(5, 4), t(5, 6),
                                                                                 mf.ones(3, 4, dtype=mf.bool)),
                     ValueError, r"attn_mask of shape \(3, 4\) does not broadcast to the attention scores' shape "
                     r"\(..., L, S\) = \(3, 5\)"),
                   E("sdpa_causal_and_mask", lambda: F.scaled_dot_product_attention(
                       t(3, 4), t(5, 4), t(5, 6), mf.ones(3, 5, dtype=mf.bool), is_causal=True),
                     RuntimeError, "explicit attn_mask should not be set when is_causal=True"),
                   E("sdpa_dtypes", lambda: F.scaled_dot_product_attention(t(3, 4), t(5, 4, dtype=mf.float64),
                                                                             t(5, 6)),
                     TypeError, "expected query, key and value of one dtype, got float32, float64 and float32"),
                   E("sdpa_gqa_heads", lambda: F.scaled_dot_product_attention(t(1, 4, 3, 4), t(1, 3, 5, 4),
                                                                                t(1, 3, 5, 6), enable_gqa=True),
                     ValueError, "number of heads \\(dimension -3\\) of key and value must divide that of query"),
                   E("sdpa_heads", lambda: F.scaled_dot_product_attention(t(1, 4, 3, 4), t(1, 2, 5, 4),
                                                                            t(1, 2, 5, 6)),
                     ValueError, "the batch dimensions .* of query, key and value must broadcast"),
                   E("sdpa_1d", lambda: F.scaled_dot_product_attention(t(4), t(5, 4), t(5, 6)), ValueError,
                     "of at least 2 dimensions, got query \\(4,\\)"),
                   E("sdpa_embedding", lambda: F.scaled_dot_product_attention(t(3, 4), t(5, 3), t(5, 6)), ValueError,
                     "query and key must have the same embedding size E"),
                   E("sdpa_lengths", lambda: F.scaled_dot_product_attention(t(3, 4), t(5, 4), t(4, 6)), ValueError,
                     "key and value must have the same sequence length S"),
                   E("sdpa_dropout", lambda: F.scaled_dot_product_attention(t(3, 4), t(5, 4), t(5, 6), dropout_p=1.5),
                     ValueError, "dropout probability has to be between 0 and 1, but got 1.5"),
                   E("sdpa_int", lambda: F.scaled_dot_product_attention(*[mf.ones(3, 4, dtype=mf.int64)] * 3),
                     TypeError, "expected floating-point query, key and value"))),
    OpInfo("multi_head_attention_forward", _mha_out, _mha_out_ref, spelled="F.multi_head_attention_forward",
           torch=_torch_mha_out, gpu_tol=1e-4, samples=(
               S("mha_cross", (3, 2, 4), (5, 2, 4), (5, 2, 4), (12, 4), (12,), (4, 4), (4,)),
               S("mha_cross_sdpa_path", (3, 2, 4), (5, 2, 4), (5, 2, 4), (12, 4), (12,), (4, 4), (4,),
                 need_weights=False),
               S("mha_unbatched_one_head", (3, 4), (5, 4), (5, 4), (12, 4), (12,), (4, 4), (4,), num_heads=1),
               S("mha_self_float_mask", (3, 2, 4), (12, 4), (12,), (4, 4), (4,), (3, 3),
                 fn=lambda x, w, b, ow, ob, m: _mha_out(x, x, x, w, b, ow, ob, attn_mask=m, need_weights=False),
                 ref=lambda x, w, b, ow, ob, m: mha_ref(x, x, x, _mha_args(w, b, ow, ob), 2, attn_mask=m)[0]),
               S("mha_weights_per_head_padding", (3, 2, 4), (5, 2, 4), (5, 2, 4), (12, 4), (12,), (4, 4), (4,),
                 fn=lambda q, k, v, w, b, ow, ob: F.multi_head_attention_forward(
                     q, k, v, 4, 2, w, b, None, None, False, 0.0, ow, ob, key_padding_mask=_on(_PADDING, q),
                     average_attn_weights=False)[1],
                 ref=lambda q, k, v, w, b, ow, ob: mha_ref(q, k, v, _mha_args(w, b, ow, ob), 2, _PADDING,
                                                           average_attn_weights=False)[1])),
           errors=(E("mha_embed_dim", lambda: F.multi_head_attention_forward(
                       *[t(3, 2, 6)] * 3, 6, 4, t(18, 6), None, None, None, False, 0.0, t(6, 6), None),
                     ValueError, "multi_head_attention_forward: embed_dim 6 not divisible by num_heads 4"),
                   E("mha_embed_dim_to_check", lambda: F.multi_head_attention_forward(
                       *[t(3, 2, 4)] * 3, 6, 2, t(12, 4), None, None, None, False, 0.0, t(4, 4), None),
                     ValueError, "was expecting embedding dimension of 6, but got 4"),
                   E("mha_mask_2d_shape", lambda: F.multi_head_attention_forward(
                       *[t(3, 2, 4)] * 3, 4, 2, t(12, 4), None, None, None, False, 0.0, t(4, 4), None,
                       attn_mask=mf.zeros(3, 4)),
                     ValueError, r"the shape of the 2D attn_mask is \(3, 4\), but should be \(3, 3\)"),
                   E("mha_mask_3d_shape", lambda: F.multi_head_attention_forward(
                       *[t(3, 2, 4)] * 3, 4, 2, t(12, 4), None, None, None, False, 0.0, t(4, 4), None,
                       attn_mask=mf.zeros(2, 3, 3)),
                     ValueError, r"the shape of the 3D attn_mask is \(2, 3, 3\), but should be \(4, 3, 3\)"),
                   E("mha_padding_shape", lambda: F.multi_head_attention_forward(
                       *[t(3, 2, 4)] * 3, 4, 2, t(12, 4), None, None, None, False, 0.0, t(4, 4), None,
                       key_padding_mask=mf.zeros(2, 4, dtype=mf.bool)),
                     ValueError, r"expected key_padding_mask of shape \(2, 3\)"),
                   E("mha_mask_int", lambda: F.multi_head_attention_forward(
                       *[t(3, 2, 4)] * 3, 4, 2, t(12, 4), None, None, None, False, 0.0, t(4, 4), None,
                       attn_mask=mf.zeros(3, 3, dtype=mf.int64)),
                     TypeError, "multi_head_attention_forward: only bool and floating types of attn_mask"),
                   E("mha_causal_without_mask", lambda: F.multi_head_attention_forward(
                       *[t(3, 2, 4)] * 3, 4, 2, t(12, 4), None, None, None, False, 0.0, t(4, 4), None,
                       is_causal=True),
                     RuntimeError, "need attn_mask if specifying the is_causal hint"),
                   E("mha_query_4d", lambda: F.multi_head_attention_forward(
                       *[t(1, 3, 2, 4)] * 3, 4, 2, t(12, 4), None, None, None, False, 0.0, t(4, 4), None),
                     ValueError, "query should be unbatched 2D or batched 3D tensor but received 4-D"),
                   E("mha_key_value_shapes", lambda: F.multi_head_attention_forward(
                       t(3, 2, 4), t(5, 2, 4), t(4, 2, 4), 4, 2, t(12, 4), None, None, None, False, 0.0, t(4, 4),
                       None),
                     ValueError, r"key shape \(5, 2, 4\) does not match value shape \(4, 2, 4\)"))),
]
OPS += ATTENTION_OPS


# ---------------------------------------------------------------- linear algebra (minifused.linalg and its top-level
# spellings). Samples stay well-conditioned (random normal matrices of these seeds: condition numbers under 11);
# cholesky-based entries build A A^T + n I from their input; factorizations whose factors carry signs (qr, svd, eigh)
# are checked through sign-free values.
LINALG_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _lib(a):
    """minifused or torch, by the kind of tensor ``a`` is."""
    return mf if isinstance(a, mf.Tensor) else _torch()


def _spd(a):
    """a a^T + n I: symmetric positive-definite matrices from any square ones (ours, torch's or NumPy's)."""
    n = a.shape[-1]
    if isinstance(a, np.ndarray):
        return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)
    return a @ a.mT + n * _lib(a).eye(n, dtype=a.dtype, device=a.device)


def _diag_heavy(a):
    """a + n I: triangles of it are well-conditioned."""
    n = a.shape[-1]
    return a + n * (np.eye(n) if isinstance(a, np.ndarray) else _lib(a).eye(n, dtype=a.dtype, device=a.device))


def _swap(a):
    return np.swapaxes(a, -1, -2)


def _np_solve(a, b, left=True):
    if not left:
        return _swap(np.linalg.solve(_swap(a), _swap(b)))
    if b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1]):
        return np.linalg.solve(a, b[..., None])[..., 0]
    return np.linalg.solve(a, b)


def _np_triangular(a, b, upper, left=True, unitriangular=False):
    t = np.triu(_diag_heavy(a)) if upper else np.tril(_diag_heavy(a))
    if unitriangular:
        t = t - np.diag(np.diag(t)) + np.eye(t.shape[-1])
    return _np_solve(t, b, left)


def _expm_ref(a):
    """exp(a) in float64: a Taylor series of 30 terms on a / 2^s (norm below 1/16), squared s times."""
    s = max(0, int(np.ceil(np.log2(max(np.abs(a).sum(-2).max(), 1e-300)))) + 4)
    x, term = a / 2.0 ** s, np.broadcast_to(np.eye(a.shape[-1]), a.shape)
    out = term.copy()
    for k in range(1, 31):
        term = term @ x / k
        out = out + term
    for _ in range(s):
        out = out @ out
    return out


def _qr_signless(q, r):
    """Q and R of a QR made unique (R's diagonal positive), flattened and joined: ours, torch's or NumPy's."""
    k = min(r.shape[-2:])
    if isinstance(q, np.ndarray):
        d = np.sign(np.diagonal(r, axis1=-2, axis2=-1)[..., :k])
        return np.concatenate([(q[..., :k] * d[..., None, :]).reshape(q.shape[:-2] + (-1,)),
                               (r * d[..., :, None]).reshape(r.shape[:-2] + (-1,))], -1)
    d = r.diagonal(dim1=-2, dim2=-1)[..., :k].sign()
    return _lib(q).cat([(q[..., :k] * d.unsqueeze(-2)).flatten(-2), (r * d.unsqueeze(-1)).flatten(-2)], -1)


def _svd_signless(u, s, v):
    """The orthogonal polar factor U V^T of an SVD (free of the factors' signs) flattened, then S."""
    k = s.shape[-1]
    if isinstance(u, np.ndarray):
        return np.concatenate([(u[..., :k] @ _swap(v[..., :k])).reshape(u.shape[:-2] + (-1,)), s], -1)
    return _lib(u).cat([(u[..., :k] @ v[..., :k].mT).flatten(-2), s], -1)


def _eigh_signless(w, v):
    """Eigenvalues, then the squares of the eigenvectors' entries (free of their signs)."""
    if isinstance(w, np.ndarray):
        return np.concatenate([w, (v * v).reshape(v.shape[:-2] + (-1,))], -1)
    return _lib(w).cat([w, (v * v).flatten(-2)], -1)


def _sym(a):
    return a + (_swap(a) if isinstance(a, np.ndarray) else a.mT)


def _np_pinv_solve(a, b):
    return np.linalg.pinv(a) @ b


def _deprecated(fn):
    """A spelling PyTorch deprecated (torch.qr, torch.cholesky, torch.chain_matmul), called without its warning."""
    import warnings

    def call(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return fn(*args, **kwargs)
    return call


LINALG_OPS = [
    OpInfo("linalg_inv", lambda a: mf.linalg.inv(a), np.linalg.inv, dtypes=LINALG_DTYPES, spelled="mf.linalg.inv",
           aliases={"mf.inverse": mf.inverse, "Tensor.inverse": _method("inverse")}, gpu_tol=1e-4,
           torch=lambda T, a: T.linalg.inv(a), samples=(
               S("linalg_inv", (4, 4)), S("linalg_inv_batched", (2, 3, 3)), S("linalg_inv_1x1", (1, 1))),
           errors=(E("linalg_inv_singular", lambda: mf.linalg.inv(mf.zeros(3, 3)), RuntimeError,
                     "The diagonal element 1 is zero, the inversion could not be completed"),
                   E("linalg_inv_half", lambda: mf.linalg.inv(t(2, 2, dtype=mf.float16)), TypeError,
                     "linalg.inv: not implemented for 'Half'"),
                   E("linalg_inv_int", lambda: mf.inverse(mf.ones(2, 2, dtype=mf.int64)), TypeError,
                     "Expected a floating point or complex tensor as input. Got Long"),
                   E("linalg_inv_not_square", lambda: mf.linalg.inv(t(2, 3)), RuntimeError,
                     "A must be batches of square matrices, but they are 2 by 3 matrices"),
                   E("linalg_inv_1d", lambda: mf.linalg.inv(t(3)), RuntimeError,
                     "The input tensor A must have at least 2 dimensions"))),
    OpInfo("linalg_det", lambda a: mf.linalg.det(a), np.linalg.det, dtypes=LINALG_DTYPES, spelled="mf.linalg.det",
           aliases={"mf.det": mf.det, "Tensor.det": _method("det")}, gpu_tol=1e-4,
           torch=lambda T, a: T.linalg.det(a), samples=(
               S("linalg_det", (4, 4)), S("linalg_det_batched", (2, 3, 3)), S("linalg_det_1x1", (1, 1)),
               # a repeated row: det is 0 there, its gradient (the adjugate) is not
               S("linalg_det_singular", (3, 3), fn=lambda a: mf.linalg.det(mf.cat([a[:2], a[:1]])),
                 ref=lambda a: np.linalg.det(np.concatenate([a[:2], a[:1]])))),
           errors=(E("linalg_det_not_square", lambda: mf.det(t(2, 3)), RuntimeError,
                     "A must be batches of square matrices"),)),
    OpInfo("slogdet", lambda a: mf.slogdet(a).logabsdet, lambda a: np.linalg.slogdet(a)[1], dtypes=LINALG_DTYPES,
           spelled="mf.slogdet", aliases={"mf.linalg.slogdet": lambda a: mf.linalg.slogdet(a)[1],
                                          "Tensor.slogdet": lambda a: a.slogdet()[1]}, gpu_tol=1e-4,
           torch=lambda T, a: T.slogdet(a)[1], samples=(
               S("slogdet", (4, 4)), S("slogdet_batched", (2, 3, 3)),
               S("slogdet_sign", (3, 3), fn=lambda a: mf.slogdet(a).sign * a.sum(),
                 ref=lambda a: np.linalg.slogdet(a)[0] * a.sum()))),
    OpInfo("logdet", lambda a: mf.logdet(_spd(a)), lambda a: np.linalg.slogdet(_spd(a))[1], dtypes=LINALG_DTYPES,
           spelled="mf.logdet", aliases={"Tensor.logdet": lambda a: _spd(a).logdet()}, gpu_tol=1e-4,
           torch=lambda T, a: T.logdet(_spd(a)), samples=(S("logdet", (3, 3)), S("logdet_batched", (2, 4, 4))),
           errors=(E("logdet_int", lambda: mf.logdet(mf.ones(2, 2, dtype=mf.int64)), TypeError,
                     "Expected a floating point"),)),
    OpInfo("linalg_solve", lambda a, b, **kw: mf.linalg.solve(a, b, **kw), _np_solve, dtypes=LINALG_DTYPES,
           spelled="mf.linalg.solve", gpu_tol=1e-4, torch=lambda T, a, b, **kw: T.linalg.solve(a, b, **kw), samples=(
               S("linalg_solve", (4, 4), (4, 2)), S("linalg_solve_vector", (3, 3), (3,)),
               S("linalg_solve_batched_vector", (2, 3, 3), (2, 3)),
               S("linalg_solve_broadcast", (2, 1, 3, 3), (4, 3, 2)),
               S("linalg_solve_right", (3, 3), (2, 5, 3), left=False)),
           errors=(E("linalg_solve_singular", lambda: mf.linalg.solve(mf.zeros(2, 2), t(2)), RuntimeError,
                     "The solver failed because the input matrix is singular"),
                   E("linalg_solve_shapes", lambda: mf.linalg.solve(t(3, 3), t(4, 2)), RuntimeError,
                     r"Incompatible shapes of A and B for the equation AX = B \(3x3 and 4x2\)"),
                   E("linalg_solve_dtypes", lambda: mf.linalg.solve(t(3, 3), t(3, dtype=mf.float64)), TypeError,
                     "Expected A and B to have the same dtype"))),
    OpInfo("linalg_solve_triangular",
           lambda a, b, **kw: mf.linalg.solve_triangular(_diag_heavy(a), b, **kw), _np_triangular,
           dtypes=LINALG_DTYPES, spelled="mf.linalg.solve_triangular", gpu_tol=1e-4,
           torch=lambda T, a, b, **kw: T.linalg.solve_triangular(_diag_heavy(a), b, **kw), samples=(
               S("solve_triangular_upper", (4, 4), (4, 2), upper=True),
               S("solve_triangular_lower_batched", (2, 3, 3), (2, 3, 1), upper=False),
               S("solve_triangular_right_unit", (3, 3), (2, 4, 3), upper=False, left=False, unitriangular=True)),
           errors=(E("solve_triangular_vector", lambda: mf.linalg.solve_triangular(t(3, 3), t(3), upper=True),
                     RuntimeError, "The input tensor B must have at least 2 dimensions"),)),
    OpInfo("cholesky", lambda a, **kw: mf.linalg.cholesky(_spd(a), **kw),
           lambda a, upper=False: _swap(np.linalg.cholesky(_spd(a))) if upper else np.linalg.cholesky(_spd(a)),
           dtypes=LINALG_DTYPES, spelled="mf.linalg.cholesky", gpu_tol=1e-4,
           aliases={"mf.cholesky": _deprecated(lambda a, **kw: mf.cholesky(_spd(a), **kw)),
                    "Tensor.cholesky": _deprecated(lambda a, **kw: _spd(a).cholesky(**kw))},
           torch=lambda T, a, **kw: T.linalg.cholesky(_spd(a), **kw), samples=(
               S("cholesky", (4, 4)), S("cholesky_batched", (2, 3, 3)), S("cholesky_upper", (3, 3), upper=True)),
           errors=(E("cholesky_not_positive_definite", lambda: mf.linalg.cholesky(-mf.eye(2)), RuntimeError,
                     "the leading minor of order 1 is not positive-definite"),)),
    OpInfo("cholesky_solve", lambda b, a, upper=False: mf.cholesky_solve(b, mf.linalg.cholesky(_spd(a), upper=upper),
                                                                         upper),
           lambda b, a, upper=False: np.linalg.solve(_spd(a), b), dtypes=LINALG_DTYPES, spelled="mf.cholesky_solve",
           aliases={"Tensor.cholesky_solve": lambda b, a, upper=False: b.cholesky_solve(
               mf.linalg.cholesky(_spd(a), upper=upper), upper)}, gpu_tol=1e-4,
           torch=lambda T, b, a, upper=False: T.cholesky_solve(b, T.linalg.cholesky(_spd(a), upper=upper), upper),
           samples=(S("cholesky_solve", (4, 2), (4, 4)), S("cholesky_solve_upper", (3, 1), (3, 3), upper=True),
                    S("cholesky_solve_broadcast", (2, 3, 2), (3, 3))),
           errors=(E("cholesky_solve_vector", lambda: mf.cholesky_solve(t(3), mf.eye(3)), RuntimeError,
                     "b should have at least 2 dimensions"),)),
    OpInfo("cholesky_inverse", lambda a, upper=False: mf.cholesky_inverse(
               mf.linalg.cholesky(_spd(a), upper=upper), upper),
           lambda a, upper=False: np.linalg.inv(_spd(a)), dtypes=LINALG_DTYPES, spelled="mf.cholesky_inverse",
           aliases={"Tensor.cholesky_inverse": lambda a, upper=False: mf.linalg.cholesky(
               _spd(a), upper=upper).cholesky_inverse(upper)}, gpu_tol=1e-4,
           torch=lambda T, a, upper=False: T.cholesky_inverse(T.linalg.cholesky(_spd(a), upper=upper), upper),
           samples=(S("cholesky_inverse", (4, 4)), S("cholesky_inverse_upper_batched", (2, 3, 3), upper=True))),
    OpInfo("linalg_qr", lambda a, **kw: _qr_signless(*mf.linalg.qr(a, **kw)),
           lambda a, **kw: _qr_signless(*np.linalg.qr(a, **kw)), dtypes=LINALG_DTYPES, spelled="mf.linalg.qr",
           aliases={"mf.qr": _deprecated(lambda a, mode="reduced": _qr_signless(*mf.qr(a, some=mode == "reduced"))),
                    "Tensor.qr": _deprecated(lambda a, mode="reduced": _qr_signless(*a.qr(some=mode == "reduced")))},
           gpu_tol=1e-4, torch=lambda T, a, **kw: _qr_signless(*T.linalg.qr(a, **kw)), samples=(
               S("linalg_qr_tall", (5, 3)), S("linalg_qr_wide_batched", (2, 3, 5)),
               S("linalg_qr_complete_square", (4, 4), mode="complete")),
           errors=(E("linalg_qr_mode", lambda: mf.linalg.qr(t(3, 3), mode="full"), RuntimeError,
                     "qr received unrecognized mode 'full'"),)),
    OpInfo("svd", lambda a, some=True: _svd_signless(*mf.svd(a, some=some)),
           lambda a, some=True: _svd_signless(*(lambda u, s, vh: (u, s, _swap(vh)))(*np.linalg.svd(a, not some))),
           dtypes=LINALG_DTYPES, spelled="mf.svd", gpu_tol=1e-4,
           aliases={"Tensor.svd": lambda a, some=True: _svd_signless(*a.svd(some=some)),
                    "mf.linalg.svd": lambda a, some=True: _svd_signless(
                        *(lambda u, s, vh: (u, s, vh.mT))(*mf.linalg.svd(a, full_matrices=not some)))},
           torch=lambda T, a, some=True: _svd_signless(*T.svd(a, some=some)), samples=(
               S("svd_tall", (5, 3)), S("svd_wide_batched", (2, 3, 4)), S("svd_full", (4, 3), some=False),
               S("svdvals", (3, 5), fn=lambda a: mf.linalg.svdvals(a), ref=lambda a: np.linalg.svd(a)[1]))),
    OpInfo("linalg_eigh", lambda a, **kw: _eigh_signless(*mf.linalg.eigh(_sym(a), **kw)),
           lambda a, **kw: _eigh_signless(*np.linalg.eigh(_sym(a), **kw)), dtypes=LINALG_DTYPES,
           spelled="mf.linalg.eigh", gpu_tol=1e-4,
           torch=lambda T, a, **kw: _eigh_signless(*T.linalg.eigh(_sym(a), **kw)),
           samples=(S("linalg_eigh", (4, 4)), S("linalg_eigh_upper_batched", (2, 3, 3), UPLO="U"),
                    S("linalg_eigvalsh", (4, 4), fn=lambda a: mf.linalg.eigvalsh(_sym(a)),
                      ref=lambda a: np.linalg.eigvalsh(_sym(a))))),
    OpInfo("pinverse", mf.pinverse, np.linalg.pinv, dtypes=LINALG_DTYPES, spelled="mf.pinverse",
           aliases={"mf.linalg.pinv": mf.linalg.pinv, "Tensor.pinverse": _method("pinverse")}, gpu_tol=1e-4,
           torch=lambda T, a: T.pinverse(a), samples=(
               S("pinverse_wide", (3, 5)), S("pinverse_tall", (4, 2)), S("pinverse_batched", (2, 3, 3)),
               S("pinv_hermitian", (4, 4), fn=lambda a: mf.linalg.pinv(_sym(a), hermitian=True),
                 ref=lambda a: np.linalg.pinv(_sym(a))))),
    OpInfo("linalg_lstsq", lambda a, b: mf.linalg.lstsq(a, b).solution, _np_pinv_solve, dtypes=LINALG_DTYPES,
           spelled="mf.linalg.lstsq", gpu_tol=1e-4, torch=lambda T, a, b: T.linalg.lstsq(a, b).solution, samples=(
               S("linalg_lstsq", (5, 3), (5, 2)), S("linalg_lstsq_batched", (2, 6, 3), (2, 6, 2)),
               S("linalg_lstsq_residuals", (5, 3), (5, 2), fn=lambda a, b: mf.linalg.lstsq(a, b, driver="gels")[1],
                 ref=lambda a, b: ((a @ _np_pinv_solve(a, b) - b) ** 2).sum(0)))),
    OpInfo("matrix_power", lambda a, n: mf.linalg.matrix_power(a, n), np.linalg.matrix_power, dtypes=LINALG_DTYPES,
           spelled="mf.linalg.matrix_power", gpu_tol=1e-4,
           aliases={"mf.matrix_power": mf.matrix_power, "Tensor.matrix_power": _method("matrix_power")},
           torch=lambda T, a, n: T.linalg.matrix_power(a, n), samples=(
               S("matrix_power_3", (3, 3), n=3), S("matrix_power_1", (4, 4), n=1),
               S("matrix_power_6_batched", (2, 3, 3), n=6), S("matrix_power_negative", (3, 3), n=-2)),
           errors=(E("matrix_power_float_n", lambda: mf.matrix_power(t(2, 2), 2.0), TypeError,
                     "argument 'n' \\(position 2\\) must be int, not float"),)),
    OpInfo("matrix_exp", mf.matrix_exp, _expm_ref, dtypes=LINALG_DTYPES, spelled="mf.matrix_exp", gpu_tol=1e-4,
           aliases={"mf.linalg.matrix_exp": mf.linalg.matrix_exp, "Tensor.matrix_exp": _method("matrix_exp")},
           torch=lambda T, a: T.matrix_exp(a), samples=(
               S("matrix_exp", (3, 3)), S("matrix_exp_batched", (2, 4, 4)),
               S("matrix_exp_scaled", (3, 3), fn=lambda a: mf.matrix_exp(a * 6), ref=lambda a: _expm_ref(a * 6)))),
    OpInfo("matrix_norm_singular", lambda a, **kw: mf.linalg.matrix_norm(a, **kw),
           lambda a, ord, dim=(-2, -1), keepdim=False: np.linalg.norm(a, ord, dim, keepdim), dtypes=LINALG_DTYPES,
           spelled="mf.linalg.matrix_norm", gpu_tol=1e-4, torch=lambda T, a, **kw: T.linalg.matrix_norm(a, **kw),
           samples=(S("matrix_norm_nuc", (4, 3), ord="nuc"), S("matrix_norm_2_batched", (2, 3, 4), ord=2),
                    S("matrix_norm_neg_two_keepdim", (2, 4, 3), ord=-2, dim=(0, 2), keepdim=True),
                    S("linalg_cond", (2, 4, 4), fn=lambda a: mf.linalg.cond(a), ref=np.linalg.cond),
                    S("linalg_cond_fro", (3, 3), fn=lambda a: mf.linalg.cond(a, "fro"),
                      ref=lambda a: np.linalg.cond(a, "fro")))),
    OpInfo("multi_dot", lambda a, b, c: mf.linalg.multi_dot([a, b, c]), lambda a, b, c: a @ b @ c,
           spelled="mf.linalg.multi_dot", aliases={"mf.chain_matmul": _deprecated(mf.chain_matmul)},
           torch=lambda T, a, b, c: T.linalg.multi_dot([a, b, c]), samples=(
               S("multi_dot", (3, 5), (5, 2), (2, 4)),
               # 1-D ends (a row and a column vector): not chain_matmul's, so a composition of the op itself
               S("multi_dot_vectors", (5,), (5, 2), (2,), fn=lambda a, b, c: mf.linalg.multi_dot([a, b, c]),
                 ref=lambda a, b, c: a @ b @ c))),
]


def _np_lu(a):
    """(P^T A's L U packed, perm) of each matrix: elimination with the first largest pivot (LAPACK's getf2)."""
    a = np.array(a, np.float64)
    flat = a.reshape((-1,) + a.shape[-2:])
    m, n = a.shape[-2:]
    perms = np.tile(np.arange(m), (flat.shape[0], 1))
    for x, perm in zip(flat, perms):
        for j in range(min(m, n)):
            p = j + int(np.argmax(np.abs(x[j:, j])))
            x[[j, p]], perm[[j, p]] = x[[p, j]], perm[[p, j]]
            x[j + 1:, j] /= x[j, j]
            x[j + 1:, j + 1:] -= np.outer(x[j + 1:, j], x[j, j + 1:])
    return flat.reshape(a.shape), perms.reshape(a.shape[:-1])


def _np_householder(a, tau):
    m = a.shape[-2]
    q = np.broadcast_to(np.eye(m), a.shape[:-2] + (m, m))
    for i in range(tau.shape[-1]):
        v = np.concatenate([np.zeros(a.shape[:-2] + (i,)), np.ones(a.shape[:-2] + (1,)), a[..., i + 1:, i]], -1)
        q = q - (q @ v[..., :, None]) * (tau[..., i, None, None] * v[..., None, :])
    return q[..., :, :a.shape[-1]]


LINALG_OPS += [
    OpInfo("lu", _deprecated(lambda a: mf.lu(a)[0]), lambda a: _np_lu(a)[0], dtypes=LINALG_DTYPES, spelled="mf.lu",
           aliases={"Tensor.lu": _deprecated(lambda a: a.lu()[0]),
                    "mf.linalg.lu_factor": lambda a: mf.linalg.lu_factor(a).LU}, gpu_tol=1e-4,
           torch=lambda T, a: T.linalg.lu_factor(a).LU,
           samples=(S("lu", (4, 4)), S("lu_batched", (2, 3, 3)), S("lu_tall", (4, 3)), S("lu_wide", (3, 5)))),
    OpInfo("lu_unpack", lambda a: mf.lu_unpack(*mf.linalg.lu_factor(a)).L @ mf.lu_unpack(*mf.linalg.lu_factor(a)).U,
           lambda a: np.take_along_axis(a, _np_lu(a)[1][..., :, None], -2), dtypes=LINALG_DTYPES,
           spelled="mf.lu_unpack", gpu_tol=1e-4,
           torch=lambda T, a: (lambda p, l, u: l @ u)(*T.lu_unpack(*T.linalg.lu_factor(a))),
           samples=(S("lu_unpack", (4, 4)), S("lu_unpack_tall_batched", (2, 4, 3)))),
    OpInfo("lu_solve", _deprecated(lambda b, a: mf.lu_solve(b, *mf.linalg.lu_factor(a))),
           lambda b, a: np.linalg.solve(a, b), dtypes=LINALG_DTYPES, spelled="mf.lu_solve",
           aliases={"Tensor.lu_solve": _deprecated(lambda b, a: b.lu_solve(*mf.linalg.lu_factor(a))),
                    "mf.linalg.lu_solve": lambda b, a: mf.linalg.lu_solve(*mf.linalg.lu_factor(a), b)},
           gpu_tol=1e-4, torch=lambda T, b, a: T.linalg.lu_solve(*T.linalg.lu_factor(a), b),
           samples=(S("lu_solve", (4, 2), (4, 4)), S("lu_solve_broadcast", (2, 3, 2), (3, 3)))),
    OpInfo("orgqr", lambda a, tau: mf.orgqr(a, tau), _np_householder, dtypes=LINALG_DTYPES, spelled="mf.orgqr",
           aliases={"Tensor.orgqr": _method("orgqr"), "mf.linalg.householder_product": mf.linalg.householder_product},
           gpu_tol=1e-4, torch=lambda T, a, tau: T.linalg.householder_product(a, tau),
           samples=(S("orgqr", (5, 3), (2,)), S("orgqr_batched_full", (2, 3, 3), (2, 3)))),
]

OPS += LINALG_OPS

# ---------------------------------------------------------------- special functions and numeric odds and ends
# (minifused/ops/special_math.py, numeric.py): float64 references by other means than the ops' own (power series,
# direct sums, math.lgamma / math.erfc, bisection)
_lgamma_ref = np.vectorize(math.lgamma, otypes=[np.float64])
_erfc_ref = np.vectorize(math.erfc, otypes=[np.float64])


def _digamma_ref(x):
    """The recurrence up to x + 40, then six terms of the asymptotic series."""
    z = x + 40
    return (np.log(z) - 1 / (2 * z) - 1 / (12 * z ** 2) + 1 / (120 * z ** 4) - 1 / (252 * z ** 6) + 1 / (240 * z ** 8)
            - sum(1 / (x + k) for k in range(40)))


def _hurwitz_ref(s, q):
    """sum_k<200 (q + k)**-s, then the tail's integral, half term and two Bernoulli terms at q + 200."""
    w = q + 200
    tail = w ** (1 - s) / (s - 1) + w ** -s / 2 + s * w ** (-s - 1) / 12 - s * (s + 1) * (s + 2) * w ** (-s - 3) / 720
    return sum((q + k) ** -s for k in range(200)) + tail


def _polygamma_ref(x, n):
    return _digamma_ref(x) if n == 0 else (-1.0) ** (n + 1) * math.factorial(n) * _hurwitz_ref(n + 1.0, x)


def _bessel_ref(x, order, scaled=False):
    """The power series sum_k (x/2)**(2k + order) / (k! (k + order)!), 80 terms."""
    out = sum((x / 2) ** (2 * k + order) / (math.factorial(k) * math.factorial(k + order)) for k in range(80))
    return out * np.exp(-np.abs(x)) if scaled else out


def _igamma_ref(a, x, upper=False):
    lower = np.exp(a * np.log(x) - x - _lgamma_ref(a + 1)) * sum(
        x ** n / np.prod([a + j for j in range(1, n + 1)], axis=0) for n in range(120))
    return 1 - lower if upper else lower


def _ndtri_ref(p):
    def one(q):
        lo, hi = -40.0, 40.0
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if 0.5 * math.erfc(-mid / math.sqrt(2)) < q else (lo, mid)
        return (lo + hi) / 2
    return np.vectorize(one, otypes=[np.float64])(p)


def _renorm_ref(a, p, dim, maxnorm):
    axes = tuple(d for d in range(a.ndim) if d != dim % a.ndim)
    norm = np.sum(np.abs(a) ** p, axis=axes, keepdims=True) ** (1 / p)
    return a * np.where(norm > maxnorm, maxnorm / (norm + 1e-7), 1.0)


def _shift_ref(a, b, left):
    out = np.left_shift(a, np.clip(b, 0, 63)) if left else np.right_shift(a, np.clip(b, 0, 63))
    return np.where((b >= 0) & (b < 64), out, 0 if left else np.where(a < 0, -1, 0))


def _special_entry(name, ref, spec=(3, 4), arg=lambda a: a, ref_arg=lambda a: a, extra=(), gpu_tol=2e-5):
    """A ``minifused.special`` function (``torch.special``'s) of ``arg(input)``; samples of ``spec`` and 0-d."""
    fn = getattr(mf.special, name)
    zero_d = (spec[0], ()) if isinstance(spec[0], str) else ()
    return OpInfo(f"special_{name}", lambda a: fn(arg(a)), lambda a: ref(ref_arg(a)), spelled=f"mf.special.{name}",
                  torch=lambda T, a: getattr(T.special, name)(arg(a)), gpu_tol=gpu_tol,
                  samples=(S(f"special_{name}", spec), S(f"special_{name}_0d", zero_d), *extra))


def _inplace_binary(name, other=0.7):
    """``x.<name>_(tensor(other))`` against ``x.<name>(tensor(other))`` (a 0-d operand: any shape of x)."""
    return InPlace(f"{name}_", lambda x: getattr(x, f"{name}_")(mf.tensor(other, dtype=x.dtype, device=x.device)),
                   lambda x: getattr(x, name)(mf.tensor(other, dtype=x.dtype, device=x.device)), op=f"{name}_")


SPECIAL_MATH_OPS = [
    # ---- inverse hyperbolic functions and the arc* spellings (integer input gives float32)
    OpInfo("acosh", lambda a: (a + 1).acosh(), lambda a: np.arccosh(a + 1), spelled="Tensor.acosh", torch=SAME,
           aliases={"mf.acosh": lambda a: mf.acosh(a + 1), "mf.arccosh": lambda a: mf.arccosh(a + 1),
                    "Tensor.arccosh": lambda a: (a + 1).arccosh()},
           samples=(S("acosh", pos((3, 4))), S("acosh_0d", pos(())), S("acosh_odd", pos((7, 33)))),
           inplace=(InPlace("acosh_", _method("acosh_"), _method("acosh"), op="acosh_"),
                    InPlace("arccosh_", _method("arccosh_"), _method("arccosh"), op="arccosh_"))),
    _unary_entry("asinh", np.arcsinh, inplace=True),
    _unary_entry("arcsinh", np.arcsinh, fuzz=False, inplace=True),
    _unary_entry("atanh", np.arctanh, fuzz=False, domain="unit", inplace=True),
    _unary_entry("arctanh", np.arctanh, fuzz=False, domain="unit", inplace=True),
    _unary_entry("arccos", np.arccos, fuzz=False, domain="unit", inplace=True),
    _unary_entry("arcsin", np.arcsin, fuzz=False, domain="unit", inplace=True),
    _unary_entry("arctan", np.arctan, fuzz=False, inplace=True),
    OpInfo("arctan2", lambda a, b: a.arctan2(b), np.arctan2, spelled="Tensor.arctan2", torch=SAME,
           aliases={"mf.arctan2": mf.arctan2}, samples=(S("arctan2", (3, 4), (4,)), S("arctan2_0d", (), ())),
           inplace=(_inplace_binary("atan2"), _inplace_binary("arctan2"))),
    # ---- the gamma family
    OpInfo("lgamma", _method("lgamma"), _lgamma_ref, spelled="Tensor.lgamma", torch=SAME, fuzz="unary",
           domain=("pos",), aliases={"mf.lgamma": mf.lgamma, "mf.special.gammaln": mf.special.gammaln},
           samples=(S("lgamma", pos((3, 4))), S("lgamma_0d", pos(())), S("lgamma_odd", (7, 33)),
                    S("lgamma_large", pos((9,)), fn=lambda a: mf.lgamma(a * 1e3), ref=lambda a: _lgamma_ref(a * 1e3))),
           inplace=(InPlace("lgamma_", _method("lgamma_"), _method("lgamma"), op="lgamma_"),),
           errors=(E("lgamma_int_inplace", lambda: mf.tensor([1, 2]).lgamma_(), RuntimeError,
                     "lgamma_: result type float32 can't be cast to the desired output type int64"),)),
    OpInfo("digamma", _method("digamma"), _digamma_ref, spelled="Tensor.digamma", torch=SAME,
           aliases={"mf.digamma": mf.digamma, "mf.special.digamma": mf.special.digamma,
                    "mf.special.psi": mf.special.psi},
           samples=(S("digamma", pos((3, 4))), S("digamma_0d", pos(())), S("digamma_odd", (7, 33))),
           inplace=(InPlace("digamma_", _method("digamma_"), _method("digamma"), op="digamma_"),)),
    OpInfo("polygamma", lambda a, n: a.polygamma(n), _polygamma_ref, spelled="Tensor.polygamma", torch=SAME,
           aliases={"mf.polygamma": lambda a, n: mf.polygamma(n, a),
                    "mf.special.polygamma": lambda a, n: mf.special.polygamma(n, a)},
           samples=(S("polygamma_0", pos((3, 4)), n=0), S("polygamma_1", pos((3, 4)), n=1),
                    S("polygamma_2_odd", pos((7, 33)), n=2), S("polygamma_3_0d", pos(()), n=3),
                    S("polygamma_2_negative", pos((9,)), fn=lambda a: mf.polygamma(2, a * 0.3 - 2.65),
                      ref=lambda a: _polygamma_ref(a * 0.3 - 2.65, 2))),
           inplace=(InPlace("polygamma_", lambda x: x.polygamma_(1), lambda x: x.polygamma(1), op="polygamma_"),),
           errors=(E("polygamma_negative_n", lambda: mf.polygamma(-1, t(2)), RuntimeError,
                     r"polygamma\(n, x\) does not support negative n"),
                   E("polygamma_float_n", lambda: mf.polygamma(1.0, t(2)), TypeError,
                     r"polygamma\(\): argument 'n' must be int, not float"))),
    OpInfo("mvlgamma", lambda a, p: (a + p / 2).mvlgamma(p),
           lambda a, p: sum(_lgamma_ref(a + p / 2 - j / 2) for j in range(p)) + p * (p - 1) / 4 * math.log(math.pi),
           spelled="Tensor.mvlgamma", torch=SAME,
           aliases={"mf.mvlgamma": lambda a, p: mf.mvlgamma(a + p / 2, p),
                    "mf.special.multigammaln": lambda a, p: mf.special.multigammaln(a + p / 2, p)},
           samples=(S("mvlgamma_1", pos((3, 4)), p=1), S("mvlgamma_3", pos((7, 33)), p=3),
                    S("mvlgamma_0d", pos(()), p=2)),
           inplace=(InPlace("mvlgamma_", lambda x: x.mvlgamma_(2), lambda x: x.mvlgamma(2), op="mvlgamma_"),),
           errors=(E("mvlgamma_p0", lambda: mf.mvlgamma(t(2), 0), RuntimeError,
                     "mvlgamma: p has to be greater than or equal to 1"),)),
    OpInfo("igamma", lambda a, x: a.igamma(x), _igamma_ref, spelled="Tensor.igamma", torch=SAME,
           aliases={"mf.igamma": mf.igamma, "mf.special.gammainc": mf.special.gammainc},
           samples=(S("igamma", const(pos((3, 4))), pos((3, 4))), S("igamma_broadcast", const(pos((5, 1))), pos((7,))),
                    S("igamma_0d", const(pos(())), pos(()))),
           # (recorded, but PyTorch has no gradient for input: the in-place suites' gradient checks do not apply)
           inplace=(InPlace("igamma_", lambda x: x.igamma_(mf.tensor(0.7, dtype=x.dtype, device=x.device)),
                            lambda x: x.igamma(mf.tensor(0.7, dtype=x.dtype, device=x.device)), grad=False),),
           errors=(E("igamma_int", lambda: mf.igamma(mf.tensor([1]), mf.tensor([2])), NotImplementedError,
                     "igamma: not implemented for int64 tensors"),
                   E("igamma_scalar", lambda: mf.igamma(t(2), 2.0), TypeError,
                     r"igamma\(\): argument 'other' must be Tensor, not float"))),
    OpInfo("igammac", lambda a, x: a.igammac(x), lambda a, x: _igamma_ref(a, x, upper=True), spelled="Tensor.igammac",
           torch=SAME, aliases={"mf.igammac": mf.igammac, "mf.special.gammaincc": mf.special.gammaincc},
           samples=(S("igammac", const(pos((3, 4))), pos((3, 4))), S("igammac_0d", const(pos(())), pos(())))),
    # ---- Bessel and error functions (mf.special), entr, zeta
    OpInfo("i0", _method("i0"), lambda a: _bessel_ref(a, 0), spelled="Tensor.i0", torch=SAME, fuzz="unary",
           domain=("real",), aliases={"mf.i0": mf.i0, "mf.special.i0": mf.special.i0},
           samples=(S("i0", (3, 4)), S("i0_0d", ()), S("i0_odd", (7, 33)),
                    S("i0_large", (9,), fn=lambda a: mf.i0(a * 8), ref=lambda a: _bessel_ref(a * 8, 0))),
           inplace=(InPlace("i0_", _method("i0_"), _method("i0"), op="i0_"),)),
    _special_entry("i0e", lambda a: _bessel_ref(a, 0, True), extra=(
        S("special_i0e_large", (9,), fn=lambda a: mf.special.i0e(a * 8), ref=lambda a: _bessel_ref(a * 8, 0, True)),)),
    _special_entry("i1", lambda a: _bessel_ref(a, 1), spec=(7, 33)),
    _special_entry("i1e", lambda a: _bessel_ref(a, 1, True), extra=(
        S("special_i1e_large", (9,), fn=lambda a: mf.special.i1e(a * 8), ref=lambda a: _bessel_ref(a * 8, 1, True)),)),
    _special_entry("erfcx", lambda a: np.exp(a * a) * _erfc_ref(a), extra=(
        S("special_erfcx_tail", (9,), fn=lambda a: mf.special.erfcx(a * 3 + 8),
          ref=lambda a: np.exp((a * 3 + 8) ** 2) * _erfc_ref(a * 3 + 8)),)),
    _special_entry("log_ndtr", lambda a: np.log(0.5 * _erfc_ref(-a / math.sqrt(2))), extra=(
        S("special_log_ndtr_tail", (9,), fn=lambda a: mf.special.log_ndtr(a * 3 - 20),
          ref=lambda a: np.log(0.5 * _erfc_ref(-(a * 3 - 20) / math.sqrt(2)))),),
        gpu_tol=2e-4),  # (the tail's gradient exp(-(y + x**2/2)): y and x**2/2 near 400 cancel in float32)
    _special_entry("ndtri", _ndtri_ref, spec=pos((3, 4)), arg=lambda a: a * 0.4, ref_arg=lambda a: a * 0.4),
    _special_entry("entr", lambda a: -a * np.log(a), spec=pos((3, 4))),
    OpInfo("special_zeta", lambda s, q: mf.special.zeta(s + 1.5, q), lambda s, q: _hurwitz_ref(s + 1.5, q),
           spelled="mf.special.zeta", torch=lambda T, s, q: T.special.zeta(s + 1.5, q),
           samples=(S("special_zeta", const(pos((3, 4))), pos((3, 4))), S("special_zeta_0d", const(pos(())), pos(()))),
           errors=(E("special_zeta_grad_input", lambda: mf.special.zeta(t(2, requires_grad=True) + 3, t(2).abs())
                     .sum().backward(), NotImplementedError, "the derivative for 'zeta' is not implemented"),)),
    # ---- logcumsumexp, renorm, frexp, nextafter
    OpInfo("logcumsumexp", lambda a, dim: a.logcumsumexp(dim),
           lambda a, dim: np.logaddexp.accumulate(np.atleast_1d(a), axis=dim).reshape(a.shape),
           spelled="Tensor.logcumsumexp", torch=SAME, aliases={"mf.logcumsumexp": mf.logcumsumexp},
           gpu_tol=2e-4,  # (the gradient's exp(x + ...) cancels values near 300 in float32)
           samples=(S("logcumsumexp", (3, 5), dim=1), S("logcumsumexp_odd", (33, 7), dim=0),
                    S("logcumsumexp_0d", (), dim=0), S("logcumsumexp_3d_neg_dim", (2, 9, 3), dim=-2),
                    S("logcumsumexp_large", (4, 6), fn=lambda a: mf.logcumsumexp(a * 300, 1),
                      ref=lambda a: np.logaddexp.accumulate(a * 300, axis=1))),
           errors=(E("logcumsumexp_int", lambda: mf.logcumsumexp(mf.tensor([1, 2]), 0), NotImplementedError,
                     "logcumsumexp: not implemented for int64 tensors"),
                   E("logcumsumexp_dim", lambda: mf.logcumsumexp(t(2, 3), 2), IndexError, "out of range"))),
    OpInfo("renorm", lambda a, **kw: a.renorm(**kw), _renorm_ref, spelled="Tensor.renorm", torch=SAME,
           aliases={"mf.renorm": lambda a, **kw: mf.renorm(a, **kw)},
           samples=(S("renorm", (4, 5), p=2, dim=0, maxnorm=2.0), S("renorm_p1_dim1", (3, 6), p=1, dim=1, maxnorm=1.5),
                    S("renorm_3d", (3, 4, 5), p=3, dim=-1, maxnorm=2.5)),
           errors=(E("renorm_1d", lambda: mf.renorm(t(3), 2, 0, 1.0), RuntimeError,
                     "renorm: input needs at least 2 dimensions, got 1 dimensions"),
                   E("renorm_p", lambda: mf.renorm(t(2, 3), 0, 0, 1.0), RuntimeError,
                     "renorm: non-positive-norm not supported"),
                   E("renorm_maxnorm", lambda: mf.renorm(t(2, 3), 2, 0, -1.0), RuntimeError,
                     "renorm: expected maxnorm to be >= 0 but got -1.0"))),
    OpInfo("frexp", lambda a: mf.frexp(a).mantissa, lambda a: np.frexp(a)[0], spelled="mf.frexp",
           torch=lambda T, a: T.frexp(a).mantissa, aliases={"Tensor.frexp": lambda a: a.frexp().mantissa},
           samples=(S("frexp", (3, 4)), S("frexp_scaled", (7, 33), fn=lambda a: mf.frexp(a * 1e5).mantissa,
                                          ref=lambda a: np.frexp(a * 1e5)[0])),
           errors=(E("frexp_int", lambda: mf.frexp(mf.tensor([1])), RuntimeError,
                     "frexp: only floating-point dtypes are supported, got int64"),)),
    # (no PyTorch parity entry: PyTorch has no derivative for nextafter, the suite compares gradients)
    OpInfo("nextafter", lambda a, b: a.nextafter(b), np.nextafter, spelled="Tensor.nextafter",
           aliases={"mf.nextafter": mf.nextafter}, samples=(S("nextafter", (3, 4), (4,)), S("nextafter_0d", (), ())),
           inplace=(_inplace_binary("nextafter"),),
           errors=(E("nextafter_int", lambda: mf.nextafter(mf.tensor([1]), mf.tensor([2])), NotImplementedError,
                     "nextafter: not implemented for int64 tensors"),)),
    # ---- integers, bits and queries (no gradient)
    OpInfo("gcd", lambda a, b: a.gcd(b), np.gcd, spelled="Tensor.gcd", grad=False, dtypes=NO_GRAD_RESULT, torch=SAME,
           aliases={"mf.gcd": mf.gcd},
           samples=(S("gcd", index((3, 4), 30), index((4,), 30)),
                    S("gcd_negative", index((9,), 30), fn=lambda a: mf.gcd(a - 15, a * 2 - 8),
                      ref=lambda a: np.gcd(a - 15, a * 2 - 8))),
           errors=(E("gcd_float", lambda: mf.gcd(t(2), t(2)), NotImplementedError,
                     "gcd: not implemented for float32 tensors"),)),
    OpInfo("lcm", lambda a, b: a.lcm(b), np.lcm, spelled="Tensor.lcm", grad=False, dtypes=NO_GRAD_RESULT, torch=SAME,
           aliases={"mf.lcm": mf.lcm}, samples=(S("lcm", index((3, 4), 30), index((3, 1), 30)),)),
    OpInfo("bitwise_left_shift", lambda a, b: a << b, lambda a, b: _shift_ref(a, b, True),
           spelled="Tensor.__lshift__", grad=False, dtypes=NO_GRAD_RESULT, torch=SAME,
           aliases={"mf.bitwise_left_shift": mf.bitwise_left_shift, "Tensor.bitwise_left_shift":
                    _method("bitwise_left_shift")},
           samples=(S("bitwise_left_shift", index((3, 4), 99), index((4,), 8)),
                    S("bitwise_left_shift_out_of_range", index((9,), 99), fn=lambda a: (a - 50) << (a - 20),
                      ref=lambda a: _shift_ref(a - 50, a - 20, True))),
           errors=(E("bitwise_left_shift_float", lambda: t(2) << 1, NotImplementedError,
                     "bitwise_left_shift: not implemented for float32 tensors"),
                   E("bitwise_left_shift_float_number", lambda: mf.tensor([1, 2]) << 2.5, NotImplementedError,
                     "bitwise_left_shift: not implemented for a float operand, got 2.5"))),
    OpInfo("bitwise_right_shift", lambda a, b: a >> b, lambda a, b: _shift_ref(a, b, False),
           spelled="Tensor.__rshift__", grad=False, dtypes=NO_GRAD_RESULT, torch=SAME,
           aliases={"mf.bitwise_right_shift": mf.bitwise_right_shift, "Tensor.bitwise_right_shift":
                    _method("bitwise_right_shift")},
           samples=(S("bitwise_right_shift", index((3, 4), 99), index((4,), 8)),
                    S("bitwise_right_shift_out_of_range", index((9,), 99), fn=lambda a: (a - 50) >> (a - 20),
                      ref=lambda a: _shift_ref(a - 50, a - 20, False)),
                    S("bitwise_right_shift_scalars", index((5,), 99), fn=lambda a: (a >> 2) + (1024 >> (a % 11)),
                      ref=lambda a: (a >> 2) + (1024 >> (a % 11))))),
    OpInfo("isreal", _method("isreal"), lambda a: np.ones(a.shape, bool), spelled="Tensor.isreal", grad=False,
           dtypes=NO_GRAD_RESULT, torch=SAME, aliases={"mf.isreal": mf.isreal},
           samples=(S("isreal", (3, 4)), S("isreal_int", index((5,), 3)))),
]
OPS += SPECIAL_MATH_OPS


# ---------------------------------------------------------------- ctc_loss, fractional_max_pool3d
def ctc_loss_ref(lp, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """PyTorch's ctc_loss in float64: per sample, the alpha recursion over the extended labels one position at
    a time (``targets`` padded (N, S) or concatenated; ``lp`` (T, N, C) or unbatched (T, C))."""
    unbatched = lp.ndim == 2
    lp = lp[:, None] if unbatched else lp
    il, tl = np.atleast_1d(input_lengths), np.atleast_1d(target_lengths)
    starts = np.cumsum(tl) - tl
    losses = []
    for n in range(lp.shape[1]):
        labels = targets[n, :tl[n]] if targets.ndim == 2 else targets[starts[n]:starts[n] + tl[n]]
        ext = [blank] + [v for label in labels for v in (int(label), blank)]
        if il[n] == 0:
            losses.append(0.0 if tl[n] == 0 else math.inf)
            continue
        a = np.full(len(ext), -np.inf)
        a[:2] = lp[0, n, ext[:2]]
        for t in range(1, il[n]):
            prev, a = a, np.full(len(ext), -np.inf)
            for s in range(len(ext)):
                reach = prev[max(s - 1, 0):s + 1] if s < 2 or ext[s] == ext[s - 2] else prev[s - 2:s + 1]
                a[s] = np.logaddexp.reduce(reach) + lp[t, n, ext[s]]
        losses.append(-np.logaddexp.reduce(a[-2:]))
    loss = np.array(losses)
    if zero_infinity:
        loss = np.where(np.isinf(loss), 0.0, loss)
    if reduction == "mean":
        return np.mean(loss / np.maximum(tl, 1))
    return loss.sum() if reduction == "sum" else (loss[0] if unbatched else loss)


def fractional_max_pool3d_ref(x, kernel, out, samples):
    """ATen's fractional_max_pool3d loop in float64: the interval sequences of each plane's (u_T, u_H, u_W),
    then the first maximum of each window in (t, h, w) order, or its last NaN; (values, flat indices)."""
    def starts(u, n_in, n_out, k):
        alpha = (n_in - k) / (n_out - 1) if n_out > 1 else 0.0
        return [int((i + u) * alpha) - int(u * alpha) for i in range(n_out - 1)] + [n_in - k]
    n, c, *size = x.shape
    vals, idx = np.zeros((n, c, *out)), np.zeros((n, c, *out), np.int64)
    for b in range(n):
        for p in range(c):
            seqs = [starts(samples[b, p, i], size[i], out[i], kernel[i]) for i in range(3)]
            for o in np.ndindex(*out):
                lo = [seqs[i][o[i]] for i in range(3)]
                win = x[b, p, lo[0]:lo[0] + kernel[0], lo[1]:lo[1] + kernel[1], lo[2]:lo[2] + kernel[2]]
                nan = np.flatnonzero(np.isnan(win))
                j = int(nan[-1]) if nan.size else int(np.argmax(win))
                pos = np.add(np.unravel_index(j, win.shape), lo)
                vals[b, p][o], idx[b, p][o] = win.flat[j], np.ravel_multi_index(tuple(pos), size)
    return vals, idx


_CTC_TARGETS = {"input_lengths": (6, 5, 3), "target_lengths": (3, 2, 0)}
_FMP_SAMPLES = np.array([[[0.1, 0.7, 0.45], [0.9, 0.0, 0.3]], [[0.55, 0.25, 0.999], [0.05, 0.5, 0.8]]])


def _fmp3d(x, kernel, out, samples, **kw):
    return F.fractional_max_pool3d(x, kernel, out, _random_samples=mf.tensor(samples, device=x.device).to(x.dtype),
                                   **kw)


CTC_FRACTIONAL_OPS = [
    # ctc_loss's gradient is PyTorch's (the logits' gradient through a log_softmax): checked through one
    OpInfo("ctc_loss", F.ctc_loss, None, spelled="F.ctc_loss", dtypes=(np.dtype(np.float32), np.dtype(np.float64)),
           gpu_tol=1e-4, samples=(
               S("ctc_loss_padded_mean", (6, 3, 5), index((3, 4), 4),
                 fn=lambda x, y: F.ctc_loss(F.log_softmax(x, 2), y, **_CTC_TARGETS, blank=4),
                 ref=lambda x, y: ctc_loss_ref(log_softmax_ref(x, 2), y, **_CTC_TARGETS, blank=4)),
               S("ctc_loss_concatenated_sum", (7, 2, 4), index((5,), 3),
                 fn=lambda x, y: F.ctc_loss(F.log_softmax(x, 2), y + 1, (7, 6), (2, 3), reduction="sum"),
                 ref=lambda x, y: ctc_loss_ref(log_softmax_ref(x, 2), y + 1, (7, 6), (2, 3), reduction="sum")),
               S("ctc_loss_unbatched_none", (5, 3), index((3,), 2),
                 fn=lambda x, y: F.ctc_loss(F.log_softmax(x, 1), y + 1, (5,), (3,), reduction="none"),
                 ref=lambda x, y: ctc_loss_ref(log_softmax_ref(x, 1), y + 1, 5, 3, reduction="none")),
               S("ctc_loss_zero_infinity", (4, 2, 3), index((2, 3), 2),
                 fn=lambda x, y: F.ctc_loss(F.log_softmax(x, 2), y + 1, (4, 2), (2, 3), reduction="none",
                                            zero_infinity=True),
                 ref=lambda x, y: ctc_loss_ref(log_softmax_ref(x, 2), y + 1, (4, 2), (2, 3), reduction="none",
                                               zero_infinity=True))),
           errors=(E("ctc_loss_input_length_over_T", lambda: F.ctc_loss(t(4, 2, 3), mf.ones(2, 2, dtype=mf.int64),
                                                                       (5, 4), (2, 2)),
                     ValueError, "ctc_loss: expected input_lengths to have value at most 4"),
                   E("ctc_loss_blank_range", lambda: F.ctc_loss(t(4, 2, 3), mf.ones(2, 2, dtype=mf.int64), (4, 4),
                                                               (2, 2), blank=3),
                     ValueError, r"ctc_loss: blank must be in label range \[0, 3\)"),
                   E("ctc_loss_half", lambda: F.ctc_loss(t(4, 2, 3, dtype=mf.float16), mf.ones(2, 2, dtype=mf.int64),
                                                        (4, 4), (2, 2)),
                     NotImplementedError, "ctc_loss: not implemented for float16"))),
    OpInfo("fractional_max_pool3d", F.fractional_max_pool3d, None, spelled="F.fractional_max_pool3d",
           aliases={"F.fractional_max_pool3d_with_indices": _output_of("fractional_max_pool3d_with_indices")},
           samples=(
               S("fractional_max_pool3d", distinct((2, 2, 5, 6, 7)),
                 fn=lambda x: _fmp3d(x, (2, 2, 3), (3, 4, 3), _FMP_SAMPLES),
                 ref=lambda x: fractional_max_pool3d_ref(x, (2, 2, 3), (3, 4, 3), _FMP_SAMPLES)[0]),
               S("fractional_max_pool3d_unbatched_indices", distinct((2, 6, 5, 4)),
                 fn=_indices_as_values(lambda x: _fmp3d(x, 2, (3, 2, 2), _FMP_SAMPLES[:1], return_indices=True)),
                 ref=lambda x: fractional_max_pool3d_ref(x[None], (2, 2, 2), (3, 2, 2), _FMP_SAMPLES[:1])[1][0]),
               S("fractional_max_pool3d_with_indices", distinct((2, 2, 4, 5, 5)),
                 fn=lambda x: F.fractional_max_pool3d_with_indices(x, (1, 2, 2), (3, 2, 3), _random_samples=mf.tensor(
                     _FMP_SAMPLES, device=x.device).to(x.dtype))[0],
                 ref=lambda x: fractional_max_pool3d_ref(x, (1, 2, 2), (3, 2, 3), _FMP_SAMPLES)[0])),
           errors=(E("fractional_max_pool3d_too_large", lambda: F.fractional_max_pool3d(t(1, 1, 6, 7, 8), 2,
                                                                                        output_size=(5, 3, 3)),
                     RuntimeError, "fractional_max_pool3d.*pool time 2 too large relative to input time 6"),
                   E("fractional_max_pool3d_samples", lambda: F.fractional_max_pool3d(
                       t(2, 3, 6, 6, 6), 2, output_size=2, _random_samples=mf.rand(2, 3, 2)),
                     RuntimeError, r"Expect _random_samples.size\(2\) equals to 3"))),
]
OPS += CTC_FRACTIONAL_OPS

# ---------------------------------------------------------------- storage views and scatters (ops/views_inplace.py,
# ops/tensor_extras.py)
def _strided_ref(a, size, stride, offset):
    """``a`` (a fresh C-order array: its own storage) read at (size, stride, offset) of its elements."""
    return np.lib.stride_tricks.as_strided(a.reshape(-1)[offset:], size, tuple(s * a.itemsize for s in stride))


def _as_strided_scatter_ref(a, b, size, stride, offset):
    out = a.copy()
    _strided_ref(out, size, stride, offset)[...] = b
    return out


def _diagonal_scatter_ref(a, b, offset=0, dim1=0, dim2=1):
    out = a.copy()
    view = np.moveaxis(out, (dim1, dim2), (-2, -1))
    rows = np.arange(b.shape[-1]) + max(-offset, 0)
    view[..., rows, rows + offset] = b
    return out


def _index_reduce_ref(a, index, src, dim, reduce, include_self=True):
    out, fn = np.moveaxis(a.copy(), dim, 0), {"prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}[reduce]
    src = np.moveaxis(src, dim, 0)
    for row in set(index):
        out[row] = fn(np.stack(list(src[np.array(index) == row]) + ([out[row]] if include_self else [])), axis=0)
    return np.moveaxis(out, 0, dim)


def _put_ref(a, b, index, accumulate=False):
    out, index = a.copy().reshape(-1), np.array(index).reshape(-1)
    if accumulate:
        np.add.at(out, index % out.size, b.reshape(-1))
    else:
        out[index % out.size] = b.reshape(-1)
    return out.reshape(a.shape)


TENSOR_EXTRA_OPS = [
    OpInfo("as_strided", lambda a: a.as_strided((3, 3), (2, 1), 1), lambda a: _strided_ref(a, (3, 3), (2, 1), 1),
           spelled="Tensor.as_strided", torch=SAME,
           aliases={"mf.as_strided": lambda a: mf.as_strided(a, (3, 3), (2, 1), 1),
                    "mf.as_strided_copy": lambda a: mf.as_strided_copy(a, (3, 3), (2, 1), 1)},
           samples=(S("as_strided", (3, 4)),
                    S("as_strided_overlapping_of_transposed", (3, 4), fn=lambda a: a.t().as_strided((4, 2), (1, 1), 2),
                      ref=lambda a: _strided_ref(a, (4, 2), (1, 1), 2))),
           errors=(E("as_strided_out_of_bounds", lambda: t(2, 3).as_strided((7,), (1,)), RuntimeError,
                     "out of bounds for storage of size 24"),
                   E("as_strided_float_offset", lambda: t(2, 3).as_strided((2,), (1,), 1.0), TypeError,
                     "as_strided: storage_offset must be an int, got 1.0"),
                   E("as_strided_negative_offset", lambda: t(2, 3).as_strided((2,), (1,), -1), RuntimeError,
                     "invalid storage offset -1"))),
    # (no PyTorch parity entry: PyTorch 2.14's gradient for input is the gradient at the scattered positions,
    # where the output does not depend on input; ours is the finite differences)
    OpInfo("as_strided_scatter", lambda a, b: a.as_strided_scatter(b, (2, 2), (3, 1), 1),
           lambda a, b: _as_strided_scatter_ref(a, b, (2, 2), (3, 1), 1), spelled="Tensor.as_strided_scatter",
           aliases={"mf.as_strided_scatter": lambda a, b: mf.as_strided_scatter(a, b, (2, 2), (3, 1), 1)},
           samples=(S("as_strided_scatter", (3, 3), (2, 2)),),
           errors=(E("as_strided_scatter_src_shape", lambda: mf.as_strided_scatter(t(3, 3), t(3), (2,), (1,)),
                     RuntimeError, "src size = \\[3\\], slice size = \\[2\\]"),)),
    OpInfo("diagonal_scatter", lambda a, b, **kw: a.diagonal_scatter(b, **kw), _diagonal_scatter_ref,
           spelled="Tensor.diagonal_scatter", torch=SAME,
           aliases={"mf.diagonal_scatter": lambda a, b, **kw: mf.diagonal_scatter(a, b, **kw)},
           samples=(S("diagonal_scatter", (3, 4), (3,)), S("diagonal_scatter_below", (3, 4), (2,), offset=-1),
                    S("diagonal_scatter_dims", (2, 3, 4), (2, 2), offset=1, dim1=2, dim2=1)),
           errors=(E("diagonal_scatter_src_shape", lambda: mf.diagonal_scatter(t(3, 3), t(3), 1), RuntimeError,
                     "slice size = \\[2\\]"),)),
    OpInfo("index_reduce",
           lambda a, s, dim, index, reduce, **kw: a.index_reduce(dim, _ix(a, index), s, reduce, **kw),
           lambda a, s, dim, index, reduce, **kw: _index_reduce_ref(a, index, s, dim, reduce, **kw),
           spelled="Tensor.index_reduce",
           aliases={"mf.index_reduce": lambda a, s, dim, index, reduce, **kw: mf.index_reduce(a, dim, _ix(a, index), s,
                                                                                              reduce, **kw)},
           torch=lambda T, a, s, dim, index, reduce, **kw: a.index_reduce(dim, T.tensor(index, device=a.device), s,
                                                                         reduce, **kw),
           samples=(S("index_reduce_mean", distinct((4, 3)), distinct((5, 3)), dim=0, index=[0, 2, 0, 3, 0],
                      reduce="mean"),
                    S("index_reduce_amax_without_self", distinct((3, 4)), distinct((3, 3)), dim=1, index=[1, 3, 1],
                      reduce="amax", include_self=False),
                    S("index_reduce_amin", distinct((4, 2)), distinct((3, 2)), dim=0, index=[3, 3, 1], reduce="amin")),
           errors=(E("index_reduce_sum", lambda: t(2).index_reduce(0, mf.tensor([0]), t(1), "sum"), RuntimeError,
                     "Expected reduce to be one of prod, mean, amax or amin but got sum"),)),
    OpInfo("put", lambda a, b, index, **kw: a.put(_ix(a, index), b, **kw), _put_ref, spelled="Tensor.put",
           torch=lambda T, a, b, index, **kw: a.put(T.tensor(index, device=a.device), b, **kw),
           aliases={"mf.put": lambda a, b, index, **kw: mf.put(a, _ix(a, index), b, **kw)},
           samples=(S("put", (2, 3), (2,), index=[4, -6]), S("put_accumulate", (2, 3), (2, 2), index=[[5, 0], [5, 1]],
                                                              accumulate=True)),
           inplace=(InPlace("put_", lambda x: x.put_(_ix(x, [1, 0]), mf.full((2,), 0.5, dtype=x.dtype,
                                                                             device=x.device)),
                            lambda x: x.put(_ix(x, [1, 0]), mf.full((2,), 0.5, dtype=x.dtype, device=x.device)),
                            op="put_"),),
           errors=(E("put_out_of_bounds", lambda: mf.put(t(2), mf.tensor([2]), t(1)), IndexError, "out of bounds"),)),
    OpInfo("split_with_sizes", lambda a: a.split_with_sizes([1, 3, 0], 1)[1], lambda a: a[:, 1:4],
           spelled="Tensor.split_with_sizes", torch=SAME,
           aliases={"mf.split_with_sizes": lambda a: mf.split_with_sizes(a, [1, 3, 0], 1)[1],
                    "mf.unsafe_split_with_sizes": lambda a: mf.unsafe_split_with_sizes(a, [1, 3, 0], 1)[1]},
           samples=(S("split_with_sizes", (2, 4)),),
           errors=(E("split_with_sizes_sum", lambda: t(3).split_with_sizes([1, 1]), RuntimeError,
                     "sum exactly to 3"),)),
    OpInfo("adjoint", _method("adjoint"), lambda a: np.swapaxes(a, -1, -2), spelled="Tensor.adjoint", torch=SAME,
           aliases={"mf.adjoint": mf.adjoint},
           samples=(S("adjoint", (3, 4)), S("adjoint_batch", (2, 3, 4))),
           errors=(E("adjoint_1d", lambda: t(3).adjoint(), RuntimeError, "Got 1-D tensor"),)),
    OpInfo("real", lambda a: a.real * 1, lambda a: a, spelled="Tensor.real", torch=SAME,
           aliases={"mf.conj": lambda a: mf.conj(a) * 1, "mf.conj_physical": lambda a: mf.conj_physical(a) * 1,
                    "Tensor.conj": lambda a: a.conj() * 1, "mf.real": lambda a: mf.real(a) * 1},
           samples=(S("real", (3, 4)),)),
    OpInfo("angle", _method("angle"), lambda a: np.where(a < 0, np.pi, 0.0), spelled="Tensor.angle", torch=SAME,
           aliases={"mf.angle": mf.angle}, samples=(S("angle", distinct((3, 4))),)),
    OpInfo("unique_consecutive", lambda a: (a // 2).unique_consecutive(),
           lambda a: a[np.r_[True, np.diff(a // 2) != 0]] // 2,
           spelled="Tensor.unique_consecutive", grad=False, dtypes=NO_GRAD_RESULT, torch=SAME,
           aliases={"mf.unique_consecutive": lambda a: mf.unique_consecutive(a // 2)},
           samples=(S("unique_consecutive", index((9,), 6)),)),
]
OPS += TENSOR_EXTRA_OPS

REGISTRY = {entry.name: entry for entry in OPS}


def samples(*, plain=False):
    """(entry, sample) pairs over the registry; ``plain``: only samples that call the entry's op itself."""
    return [(e, s) for e in OPS for s in e.samples if not (plain and s.fn)]


def params(pairs):
    """(entry, sample) pairs as pytest parameters with the sample's name as the id."""
    return [pytest.param(e, s, id=s.name) for e, s in pairs]


def grad_params(pairs):
    """As :func:`params`, known gradient bugs marked as strict xfails."""
    return [pytest.param(e, s, id=s.name, marks=pytest.mark.xfail(reason=s.grad_bug, strict=True) if s.grad_bug else ())
            for e, s in pairs]


def call(entry, sample, inputs):
    """The sample's value through the public API."""
    return sample.fn(*inputs) if sample.fn else entry.op(*inputs, **sample.kwargs)


def reference(entry, sample, arrays):
    """The sample's float64 NumPy reference (None where the entry has none)."""
    if sample.fn:
        return sample.ref(*arrays) if sample.ref else None
    return entry.ref(*arrays, **sample.kwargs) if entry.ref else None


def inplace_forms():
    return [(e, form) for e in OPS for form in e.inplace]


def bad_inputs():
    return [b for e in OPS for b in e.errors]
