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
    return mf.randn(*shape, dtype=dtype, device="cpu", **kw)


def pos(shape):
    return ("pos", shape)


def distinct(shape):
    return ("distinct", shape)


def index(shape, high):
    return ("index", shape, high)


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


def max_pool2d_ref(x, kernel_size, stride=None, padding=0):
    kernel = _pair(kernel_size)
    win = _windows(x, kernel, _pair(stride or kernel_size), _pair(padding), fill=-np.inf)
    return win.max(axis=(-2, -1))


def avg_pool2d_ref(x, kernel_size, stride=None, padding=0):
    kernel = _pair(kernel_size)
    return _windows(x, kernel, _pair(stride or kernel_size), _pair(padding)).mean(axis=(-2, -1))


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
           errors=(E("add_broadcast", lambda: t(2, 3) + t(4), ValueError, r"add: shapes \(2, 3\) and \(4,\)"),)),
    OpInfo("sub", lambda a, b: a - b, np.subtract, spelled="Tensor.__sub__", fuzz="binary", domain=("real", "real"),
           aliases={"mf.sub": mf.sub}, torch=SAME, samples=(
               S("sub_broadcast", (4, 1), (1, 5)),
               S("rsub_scalar", (3,), fn=lambda a: 1.0 - a, ref=lambda a: 1.0 - a),
               S("sub_0d", (), ()), S("sub_odd", (9, 33), (33,)))),
    OpInfo("mul", lambda a, b: a * b, np.multiply, spelled="Tensor.__mul__", fuzz="binary", domain=("real", "real"),
           aliases={"mf.mul": mf.mul}, torch=SAME, samples=(
               S("mul_broadcast", (2, 3, 4), (4,)),
               S("rmul_scalar", (2, 2), fn=lambda a: 3 * a, ref=lambda a: 3 * a),
               S("mul_0d", (3, 1), ()), S("mul_size1", (1,), (5,)))),
    OpInfo("div", lambda a, b: a / b, np.divide, spelled="Tensor.__truediv__", fuzz="binary",
           domain=("real", "nonzero"), aliases={"mf.div": mf.div}, torch=SAME, samples=(
               S("div_broadcast", (3, 4), pos((1, 4))),
               S("rdiv_scalar", pos((5,)), fn=lambda a: 2.0 / a, ref=lambda a: 2.0 / a),
               S("div_0d", (), pos(())), S("div_odd", (1, 33), pos((7, 1))))),
    OpInfo("pow", lambda a, b: a ** b, np.power, spelled="Tensor.__pow__", fuzz="binary", domain=("pos", "real"),
           aliases={"mf.pow": mf.pow}, torch=SAME, samples=(
               S("pow_scalar", (3, 4), fn=lambda a: a ** 3, ref=lambda a: a ** 3),
               S("pow_tensor", pos((3, 4)), (3, 4)),
               S("rpow_scalar", (3,), fn=lambda a: 2.0 ** a, ref=lambda a: 2.0 ** a),
               S("pow_broadcast_0d", pos((7, 1)), ()))),
    OpInfo("maximum", mf.maximum, np.maximum, spelled="mf.maximum", fuzz="binary", domain=("real", "real"),
           aliases={"F.maximum": F.maximum, "Tensor.maximum": lambda a, b: a.maximum(b)},
           torch=lambda T, a, b: T.maximum(a, b), samples=(
               S("maximum", distinct((3, 4)), distinct((4,))), S("maximum_odd", distinct((33,)), distinct((1,))))),
    OpInfo("minimum", mf.minimum, np.minimum, spelled="mf.minimum", fuzz="binary", domain=("real", "real"),
           aliases={"F.minimum": F.minimum}, torch=lambda T, a, b: T.minimum(a, b), samples=(
               S("minimum", distinct((3, 4)), distinct((3, 1))), S("minimum_0d", distinct(()), distinct((5,))))),
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
           errors=(E("clamp_no_bounds", lambda: t(3).clamp(), ValueError, "at least one of min and max"),)),
    # ---- reductions
    OpInfo("sum", lambda a, **kw: a.sum(**kw), _reduce(np.sum), spelled="Tensor.sum", fuzz="reduction",
           aliases={"mf.sum": mf.sum}, torch=SAME, samples=(
               S("sum_all", (3, 4)), S("sum_axis", (3, 4, 2), dim=1),
               S("sum_axes_keepdim", (3, 4, 2), dim=(0, 2), keepdim=True),
               S("sum_0d", ()),
               S("sum_odd", (33, 1), dim=0)),
           errors=(E("sum_dim_range", lambda: t(2, 3).sum(2), IndexError, "dimension 2 out of range"),)),
    OpInfo("mean", lambda a, **kw: a.mean(**kw), _reduce(np.mean), spelled="Tensor.mean", fuzz="reduction",
           aliases={"mf.mean": mf.mean}, torch=SAME, samples=(
               S("mean_all", (3, 4)), S("mean_axis_keepdim", (3, 4), dim=-1, keepdim=True),
               S("mean_odd", (7, 33), dim=1)),
           errors=(E("mean_int", lambda: mf.tensor([1, 2]).mean(), TypeError, "floating point"),)),
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
               S("unsqueeze_0d", (), d=0))),
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
                   E("cat_empty", lambda: mf.cat([]), ValueError, "non-empty"))),
    OpInfo("stack", lambda *ts, dim=0: mf.stack(list(ts), dim=dim), lambda *a, dim=0: np.stack(a, axis=dim),
           spelled="mf.stack", torch=lambda T, *ts, dim=0: T.stack(list(ts), dim=dim), samples=(
               S("stack", (2, 3), (2, 3), dim=1), S("stack_0d", (), ())),
           errors=(E("stack_shapes", lambda: mf.stack([t(2), t(3)]), ValueError, "same shape"),)),
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
                   E("conv_not_4d", lambda: F.conv2d(t(3, 5, 5), t(4, 3, 3, 3)), ValueError, "4-D|4D|dimensions"),
                   E("conv_kernel_too_big", lambda: F.conv2d(t(1, 1, 2, 2), t(1, 1, 3, 3)), ValueError,
                     "kernel|larger"),
                   E("conv_stride", lambda: F.conv2d(t(1, 1, 5, 5), t(1, 1, 3, 3), stride=0), ValueError, "stride"),
                   E("conv_zero_channels", lambda: F.conv2d(t(2, 0, 5, 5), t(2, 0, 3, 3)), ValueError,
                     r"empty input.*\(2, 0, 5, 5\)"),
                   E("conv_same_stride", lambda: F.conv2d(t(1, 1, 5, 5), t(1, 1, 3, 3), stride=2, padding="same"),
                     ValueError, "'same' needs stride 1"),
                   E("conv_dtype", lambda: F.conv2d(t(1, 1, 5, 5), t(1, 1, 3, 3, dtype=mf.float64)), TypeError,
                     "one dtype"))),
    OpInfo("max_pool2d", F.max_pool2d, max_pool2d_ref, spelled="F.max_pool2d", torch=_tf("max_pool2d"), samples=(
        S("max_pool2d", distinct((2, 3, 4, 6)), kernel_size=2),
        S("max_pool2d_s2p1_odd", distinct((1, 2, 7, 5)), kernel_size=3, stride=2, padding=1))),
    OpInfo("avg_pool2d", F.avg_pool2d, avg_pool2d_ref, spelled="F.avg_pool2d", torch=_tf("avg_pool2d"), samples=(
        S("avg_pool2d", (2, 3, 4, 6), kernel_size=2),
        S("avg_pool2d_s2p1_odd", (1, 2, 7, 5), kernel_size=3, stride=2, padding=1))),
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
           errors=(E("mse_shapes", lambda: F.mse_loss(t(2, 3), t(3, 2)), ValueError, "no implicit broadcasting"),)),
    OpInfo("dropout", F.dropout, lambda x, p=0.5, training=True: x, spelled="F.dropout", torch=_tf("dropout"), samples=(
        S("dropout_p0", (4, 33), p=0.0), S("dropout_eval", (3, 5), p=0.5, training=False)),
           errors=(E("dropout_nan", lambda: F.dropout(t(3), float("nan")), ValueError, "between 0 and 1.*nan"),)),
]


# ---------------------------------------------------------------- pointwise math, logic, rounding and comparison (minifused/ops/pointwise.py)

MATH_OPS = [
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


def index_add_ref(a, index, src, dim, alpha=1):
    out = a.copy()
    np.add.at(out, (slice(None),) * (dim % a.ndim) + (index,), alpha * src)
    return out


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


def _last_index(t, k=3):
    """An index along t's last dimension, k distinct positions per row (in-place forms take any shape)."""
    n = t.shape[-1]
    rows = np.broadcast_to(np.arange(n - 1, n - 1 - min(k, n), -1), (*t.shape[:-1], min(k, n)))
    return mf.tensor(np.ascontiguousarray(rows), device=t.device)


def _last_vector(t):
    n = t.shape[-1]
    return mf.tensor(np.array([n - 1, 0, n // 2, 0][:max(1, min(4, n))]), device=t.device)


def _full_like(t, shape, value):
    return mf.full(shape, value, dtype=t.dtype, device=t.device)


_M34 = np.array([[True, False, False, True], [False, False, False, False], [True, True, False, True]])
_I35 = [[0, 2, 4, 1], [3, 1, 0, 2], [4, 3, 2, 1]]

INDEX_OPS = [
    OpInfo("gather", lambda a, i, dim: mf.gather(a, dim, i), lambda a, i, dim: gather_ref(a, i, dim),
           spelled="mf.gather", aliases={"Tensor.gather": lambda a, i, dim: a.gather(dim, i)},
           torch=lambda T, a, i, dim: T.gather(a, dim, i), samples=(
               S("gather", (3, 5), index((3, 4), 5), dim=1),
               S("gather_dim0_smaller_index", (4, 3), index((6, 2), 4), dim=0),
               S("gather_3d_negative_dim", (2, 3, 4), index((2, 3, 7), 4), dim=-1),
               S("gather_size1", (1, 1), index((1, 3), 1), dim=1), S("gather_0d", (), index((), 1), dim=0),
               S("gather_negative_index", (2, 4), fn=lambda a: a.gather(1, _ix(a, [[-1, 0], [-4, -2]])),
                 ref=lambda a: a[[[0], [1]], [[3, 0], [0, 2]]])),
           errors=(E("gather_index_dtype", lambda: mf.gather(t(2, 3), 1, mf.tensor([[0]], dtype=mf.int32)),
                     RuntimeError, "gather: expected dtype int64 for index, got int32"),
                   E("gather_index_range", lambda: mf.gather(t(2, 3), 1, mf.tensor([[0, 5]])), RuntimeError,
                     "gather: index 5 is out of bounds for dimension 1 with size 3"),
                   E("gather_index_dims", lambda: mf.gather(t(2, 3), 1, mf.tensor([0, 1])), RuntimeError,
                     "gather: index must have the same number of dimensions as the input"),
                   E("gather_index_larger", lambda: mf.gather(t(2, 3), 1, mf.tensor([[0], [1], [0]])),
                     RuntimeError, r"gather: index of shape \(3, 1\) must be no larger than the input"),
                   E("gather_dim_range", lambda: mf.gather(t(2, 3), 2, mf.tensor([[0]])), IndexError,
                     "gather: dimension 2 out of range"),
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
                   E("sort_not_tensor", lambda: mf.sort([3, 1]), TypeError, "sort: expected a Tensor input"))),
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
                   E("topk_dim_range", lambda: t(2, 5).topk(1, dim=2), IndexError, "topk: dimension 2 out of range"))),
    OpInfo("kthvalue", lambda a, k, dim=-1, keepdim=False: mf.kthvalue(a, k, dim, keepdim).values, kthvalue_ref,
           spelled="mf.kthvalue",
           aliases={"Tensor.kthvalue": lambda a, k, dim=-1, keepdim=False: a.kthvalue(k, dim, keepdim).values},
           torch=lambda T, a, k, dim=-1, keepdim=False: T.kthvalue(a, k, dim=dim, keepdim=keepdim).values, samples=(
               S("kthvalue", distinct((3, 7)), k=3), S("kthvalue_dim0_keepdim", distinct((5, 2)), k=5, dim=0, keepdim=True),
               S("kthvalue_0d", distinct(()), k=1)),
           errors=(E("kthvalue_k_range", lambda: mf.kthvalue(t(4), 0), RuntimeError, r"kthvalue: k must be in \[1, 4\], got 0"),)),
]


# ---------------------------------------------------------------- activations, normalize, one_hot and the losses (minifused/functional/activation.py)

ACTIVATION_OPS = [
]


# ---------------------------------------------------------------- pad, interpolate, adaptive pooling, embedding, dropout2d (minifused/functional/layers.py)

LAYER_OPS = [
]


# ---------------------------------------------------------------- reductions, scans, matmul forms and shape helpers (ops/reduce.py, ops/matmul.py, ops/shape.py)

REDUCE_OPS = [
]

OPS += MATH_OPS + INDEX_OPS + ACTIVATION_OPS + LAYER_OPS + REDUCE_OPS

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
