"""Adafactor (factored second moments, relative step size, update clipping, weight decay, maximize): PyTorch's
formulas on array operations (NumPy or CuPy)."""
from __future__ import annotations

import math
import numbers

import ml_dtypes
import numpy as np

from .. import backend
from ..autograd import no_grad
from ..kernels import acc_dtype
from ..tensor import Tensor
from ._support import _check_hyper, _check_lr, _pytorch_flags
from .optimizer import Optimizer


def _factor_shape(shape, key):
    """The shape of ``row_var`` (the last axis reduced to 1) or ``col_var`` (the one before it) of a parameter of
    ``shape`` (two or more axes)."""
    shape = list(shape)
    shape[-1 if key == "row_var" else -2] = 1
    return tuple(shape)


class Adafactor(Optimizer):
    """``torch.optim.Adafactor``. A parameter of two or more axes keeps its second moment factored over its last
    two: ``row_var`` (the mean square over the last axis) and ``col_var`` (over the one before it); others keep
    it whole (``variance``). The step is relative to the parameter's RMS (at least ``eps[1]``) times
    ``min(lr, 1 / sqrt(t))``, and each update is clipped to an RMS of ``d``; ``eps[0]`` (None: the machine epsilon
    of the parameter's dtype) floors the factored estimate and the update's denominator. Weight decay is decoupled
    (``p *= 1 - lr * weight_decay``).

    State per parameter, PyTorch's names and shapes: ``step`` (a 0-d int64 tensor on the parameter's device,
    advanced by the update; a 0-d float32 tensor in ``state_dict()``, as PyTorch's), ``row_var`` and ``col_var``
    or ``variance``, plus ``master`` with ``master_weights``.

    The update runs on array operations one parameter at a time; the numbers PyTorch reads back to the host per
    parameter (the step count, the parameter's and the update's norms) stay on the device as 0-d arrays, so a step
    waits for nothing. The hyper-parameters are read from the group at each step."""

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, *,
                 foreach=None, maximize=False, master_weights=False):
        _pytorch_flags(type(self).__name__, foreach, None, False, False)
        _check_lr("Adafactor", lr)
        if not (isinstance(beta2_decay, numbers.Real) and not isinstance(beta2_decay, bool) and beta2_decay <= 0.0):
            raise ValueError(f"Adafactor: invalid beta2_decay {beta2_decay!r}; expected a number <= 0")
        if not (isinstance(eps, (tuple, list)) and len(eps) == 2):
            raise ValueError(f"Adafactor: eps must be a pair (epsilon1 or None, epsilon2), got {eps!r}")
        if eps[0] is not None:
            _check_hyper("Adafactor", "epsilon1", eps[0])
        _check_hyper("Adafactor", "epsilon2", eps[1])
        if not (isinstance(d, numbers.Real) and not isinstance(d, bool) and d >= 1.0):
            raise ValueError(f"Adafactor: invalid clipping threshold d {d!r}; expected a number >= 1")
        _check_hyper("Adafactor", "weight_decay", weight_decay)
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=tuple(eps), d=d,
                                      weight_decay=weight_decay, foreach=foreach, maximize=maximize), master_weights)

    @staticmethod
    def _hyper_values(g):
        """(No fused kernel reads them: listed so that a step checks them all as numbers before any update.)"""
        return (g["lr"], g["weight_decay"], g["d"], g["beta2_decay"], g["eps"][1])

    def _state(self, p):
        st = self.state[p]
        if "step" not in st:
            st["step"] = 0
        if p.ndim > 1:
            for key in ("row_var", "col_var"):
                if key not in st:
                    st[key] = self._factor(p, key)
        elif "variance" not in st:
            st["variance"] = self._new_state(p)
        return st

    def _factor(self, p, key):
        """A zero ``row_var`` / ``col_var`` of p."""
        with backend.on_device(p.device):
            return Tensor._from_array(p._xp.zeros(_factor_shape(p.shape, key), self._state_dtype(p)))

    def _loaded_value(self, idx, p, key, v):
        """``row_var`` / ``col_var`` have their own shapes (checked here); everything else as the base checks it."""
        if key not in ("row_var", "col_var") or p.ndim < 2:
            return super()._loaded_value(idx, p, key, v)
        where = f"{type(self).__name__}.load_state_dict: state '{key}' of parameter {idx}"
        if isinstance(v, np.ndarray) or backend.is_cuda_array(v):
            v = Tensor._from_array(v)
        want = _factor_shape(p.shape, key)
        if not isinstance(v, Tensor) or tuple(v.shape) != want or not backend.is_floating(v.dtype):
            got = f"a tensor of shape {tuple(v.shape)}, {v.dtype}" if isinstance(v, Tensor) else repr(v)
            raise ValueError(f"{where} is {got}; expected a floating tensor of shape {want} (the parameter has "
                             f"shape {tuple(p.shape)})")
        with backend.on_device(p.device):
            return Tensor._from_array(backend.to_device(v._data, p.device).astype(self._state_dtype(p)))

    def step(self, closure=None):
        loss = self._closure(closure)
        with no_grad():
            eps1 = {}  # group -> epsilon1: given, or that of the group's first parameter's dtype, as PyTorch's
            for g, _, ps in self._launches():
                for p in ps:
                    if id(g) not in eps1:
                        eps1[id(g)] = float(ml_dtypes.finfo(p.dtype).eps if g["eps"][0] is None else g["eps"][0])
                    self._update(p, self._state(p), g, eps1[id(g)])
                    p._bump("Adafactor.step")
        return loss

    def _update(self, p, st, group, eps1):
        """One parameter's step, PyTorch's single-tensor code op by op in the parameter's opmath dtype (float32 for
        float16 / bfloat16), each tensor PyTorch makes rounded to the state dtype; its host scalars in float64, here
        0-d arrays on the device."""
        xp = p._xp
        acc = acc_dtype(p.dtype)
        rnd = rounding(self._state_dtype(p), acc)
        lr, wd, d = float(group["lr"]), float(group["weight_decay"]), float(group["d"])
        eps2 = float(group["eps"][1])
        master = self._master(p, st)
        w = (master if master is not None else p._data).astype(acc, copy=False)
        grad = p._grad._data.astype(acc, copy=False)
        if group["maximize"]:
            grad = -grad
        step = self._step_count(p, st)
        step += 1
        t = step.astype(np.float64)
        weight = xp.asarray(t ** float(group["beta2_decay"]), dtype=acc)  # 1 - beta2_t
        rho = xp.minimum(lr, 1.0 / xp.sqrt(t))
        size = math.sqrt(w.size) or 1.0  # (an empty parameter: nothing to scale)
        alpha = xp.maximum(eps2, rnd(_norm(w, None)).astype(np.float64) / size) * rho
        if wd != 0:
            w = rnd(w * acc.type(1.0 - lr * wd))
        if grad.ndim > 1:
            row, col = st["row_var"]._data, st["col_var"]._data
            # (g * g).mean over an axis, as PyTorch computes it: the norm over it, squared, divided by its size
            row_mean = rnd(rnd(xp.square(rnd(_norm(grad, -1)))) / acc.type(grad.shape[-1]))
            col_mean = rnd(rnd(xp.square(rnd(_norm(grad, -2)))) / acc.type(grad.shape[-2]))
            r = row[...] = rnd(_lerp(row.astype(acc, copy=False), row_mean, weight))
            c = col[...] = rnd(_lerp(col.astype(acc, copy=False), col_mean, weight))
            floor = rnd(xp.maximum(rnd(xp.mean(r, axis=-2, keepdims=True)), acc.type(eps1)))
            estimate = rnd(rnd(r * c) / floor)
        else:
            var = st["variance"]._data
            estimate = var[...] = rnd(_lerp(var.astype(acc, copy=False), rnd(grad * grad), weight))
        update = rnd(rnd(1 / xp.sqrt(rnd(xp.maximum(estimate, acc.type(eps1 * eps1))))) * grad)
        denom = xp.maximum(1.0, rnd(_norm(update, None)).astype(np.float64) / (size * d))
        w = w + update * xp.asarray(-alpha / denom, dtype=acc)
        if master is not None:
            master[...] = w
        p._data[...] = w


def rounding(dtype, acc):
    """A function rounding an ``acc`` array (or 0-d array) to ``dtype`` and back, as PyTorch stores each tensor its
    op makes; the identity where the two are one dtype."""
    if dtype == acc:
        return lambda x: x
    return lambda x: x.astype(dtype).astype(acc)


def _norm(a, axis):
    """The 2-norm of ``a`` over ``axis`` (kept; None: all of it, a 0-d array)."""
    xp = backend.array_module(a)
    return xp.sqrt(xp.sum(a * a, axis=axis, keepdims=axis is not None))


def _lerp(start, end, weight):
    """``start.lerp(end, weight)`` (``weight`` a 0-d array of their dtype), PyTorch's formula: from the nearer end
    (chosen on the device)."""
    xp = backend.array_module(start)
    diff = end - start
    return backend.where(xp.abs(weight) < 0.5, start + weight * diff, end - diff * (1 - weight))
