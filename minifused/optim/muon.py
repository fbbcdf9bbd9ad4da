"""Muon (momentum orthogonalized by Newton-Schulz iterations, for 2-D parameters): PyTorch's formulas on array
operations (NumPy or CuPy)."""
from __future__ import annotations

import math

import numpy as np

from .. import backend
from ..autograd import no_grad
from ..kernels import acc_dtype
from ._support import _check_hyper, _check_lr
from .adafactor import rounding
from .optimizer import Optimizer

#: PyTorch's defaults (Keller Jordan's Muon): the quintic's coefficients, its step count, the norm's floor
DEFAULT_A, DEFAULT_B, DEFAULT_C = 3.4445, -4.7750, 2.0315
DEFAULT_NS_STEPS = 5
EPS = 1e-7


def _bf16(x):
    """``x`` (float32) rounded to bfloat16, kept in float32: PyTorch runs the iteration in bfloat16, each product
    accumulated in float32 and rounded once."""
    return x.astype(backend.bfloat16).astype(np.float32)


def _zeropower_via_newtonschulz(grad, ns_coefficients, ns_steps, eps):
    """PyTorch's ``_zeropower_via_newtonschulz`` on an array: ``grad`` (2-D) in bfloat16, scaled to a Frobenius
    norm of 1 (at least ``eps`` before), through ``ns_steps`` iterations ``X = a X + (b A + c A A) X``, ``A = X X^T``,
    on the wide orientation; a float32 array of bfloat16 values."""
    a, b, c = ns_coefficients
    xp = backend.array_module(grad)
    x = grad.astype(backend.bfloat16).astype(np.float32)
    tall = grad.shape[0] > grad.shape[1]
    if tall:
        x = x.T
    norm = _bf16(xp.maximum(_bf16(xp.sqrt(xp.sum(x * x))), np.float32(eps)))
    x = _bf16(x / norm)
    a, b, c = np.float32(a), np.float32(b), np.float32(c)
    for _ in range(ns_steps):
        gram = _bf16(x @ x.T)
        x = _bf16(a * x + _bf16(b * gram + c * (gram @ gram)) @ x)
    return x.T if tall else x


def _adjusted_lr(lr, adjust_lr_fn, shape):
    """PyTorch's ``_adjust_lr``: ``lr`` scaled for a parameter of ``shape`` (rows A, columns B)."""
    rows, cols = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        ratio = math.sqrt(max(1, rows / cols))
    elif adjust_lr_fn == "match_rms_adamw":
        ratio = 0.2 * math.sqrt(max(rows, cols))
    else:
        ratio = 1.0
    return lr * ratio


def _lerp(start, end, weight):
    """``start.lerp(end, weight)`` for a number ``weight``, PyTorch's formula (from the nearer end)."""
    weight = start.dtype.type(weight)
    if abs(weight) < 0.5:
        return start + weight * (end - start)
    return end - (end - start) * (1 - weight)


class Muon(Optimizer):
    """``torch.optim.Muon``, for 2-D parameters only (others are refused, as PyTorch's constructor refuses them;
    here also when added by ``add_param_group``): the momentum (Nesterov's by default) of the gradient is
    orthogonalized by ``ns_steps`` Newton-Schulz iterations in bfloat16 and added at ``-lr`` times a shape factor
    (``adjust_lr_fn``: None or "original", ``sqrt(max(1, rows / cols))``; "match_rms_adamw",
    ``0.2 * sqrt(max(rows, cols))``), after decoupled weight decay ``p *= 1 - lr * weight_decay``.

    State per parameter, PyTorch's name: ``momentum_buffer`` (no step count), plus ``master`` with
    ``master_weights``. The update runs on array operations one parameter at a time, waiting for nothing; the
    hyper-parameters are read from the group at each step."""

    def __init__(self, params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                 ns_coefficients=(DEFAULT_A, DEFAULT_B, DEFAULT_C), eps=EPS, ns_steps=DEFAULT_NS_STEPS,
                 adjust_lr_fn=None, *, master_weights=False):
        _check_lr("Muon", lr)
        _check_hyper("Muon", "momentum", momentum)
        _check_hyper("Muon", "weight_decay", weight_decay)
        if adjust_lr_fn is not None and adjust_lr_fn not in ("original", "match_rms_adamw"):
            raise ValueError(f"Muon: adjust_lr_fn {adjust_lr_fn!r} is not supported; expected None, 'original' or "
                             f"'match_rms_adamw'")
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                                      ns_coefficients=ns_coefficients, eps=eps, ns_steps=ns_steps,
                                      adjust_lr_fn=adjust_lr_fn), master_weights)

    def add_param_group(self, group: dict):
        super().add_param_group(group)
        for p in self.param_groups[-1]["params"]:
            if p.ndim != 2:
                self.param_groups.pop()
                raise ValueError(f"Muon only supports 2D parameters whereas we found a parameter with size: "
                                 f"{tuple(p.shape)}")

    def _state(self, p):
        st = self.state[p]
        if "momentum_buffer" not in st:
            st["momentum_buffer"] = self._new_state(p)
        return st

    def step(self, closure=None):
        loss = self._closure(closure)
        with no_grad():
            for g in self.param_groups:  # (checked before anything changes, where PyTorch checks each parameter)
                if g["ns_steps"] >= 100:
                    raise ValueError("Muon.step: number of steps must be less than 100 for computational efficiency "
                                     f"(ns_steps={g['ns_steps']!r})")
                if len(g["ns_coefficients"]) != 3:
                    raise ValueError(f"Muon.step: coefficients must be a tuple of exactly 3 values (ns_coefficients="
                                     f"{g['ns_coefficients']!r})")
            for g, _, ps in self._launches():
                for p in ps:
                    self._update(p, self._state(p), g)
                    p._bump("Muon.step")
        return loss

    def _update(self, p, st, group):
        """One parameter's step, PyTorch's single-tensor code op by op in the parameter's opmath dtype (float32 for
        float16 / bfloat16), each tensor PyTorch makes rounded to the state dtype, around the bfloat16 iteration."""
        acc = acc_dtype(p.dtype)
        rnd = rounding(self._state_dtype(p), acc)
        lr, momentum, wd = float(group["lr"]), float(group["momentum"]), float(group["weight_decay"])
        master = self._master(p, st)
        w = (master if master is not None else p._data).astype(acc, copy=False)
        grad = p._grad._data.astype(acc, copy=False)
        buf = st["momentum_buffer"]._data
        m = buf[...] = rnd(_lerp(buf.astype(acc, copy=False), grad, 1.0 - momentum))
        update = rnd(_lerp(grad, m, momentum)) if group["nesterov"] else m
        ortho = _zeropower_via_newtonschulz(update, group["ns_coefficients"], group["ns_steps"], group["eps"])
        if wd != 0:
            w = rnd(w * acc.type(1.0 - lr * wd))
        w = w + ortho.astype(acc, copy=False) * acc.type(-_adjusted_lr(lr, group["adjust_lr_fn"], p.shape))
        if master is not None:
            master[...] = w
        p._data[...] = w
