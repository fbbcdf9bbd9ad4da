"""Weight averaging, as ``torch.optim.swa_utils``: ``AveragedModel`` (stochastic weight averaging, or an
exponential moving average with ``get_ema_multi_avg_fn``), ``update_bn`` (BatchNorm statistics recomputed for
an averaged model) and the ``SWALR`` schedule.

The built-in averages update the averaged parameters in place, in their accumulation dtype (float32 for 16-bit
parameters), with ``torch.lerp``'s formula, as PyTorch's ``_foreach_lerp_`` does; integer buffers (with
``use_buffers=True``), which lerp does not take, get PyTorch's formulas computed in the default dtype and
truncated, as its ``copy_`` gives them. AveragedModel's default average of CPU tensors is PyTorch's CPU path:
``get_swa_avg_fn``'s formula, tensor by tensor (its foreach lerp serves CUDA tensors only).
"""
from __future__ import annotations

import copy
import itertools
import math
import numbers

import numpy as np

from .. import backend
from ..autograd import no_grad
from ..kernels import acc_dtype
from ..nn.module import Module
from ..nn.norm import _BatchNorm
from ..tensor import Tensor
from ._scheduler_base import LRScheduler, _warn_outside_step

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn",
           "get_ema_avg_fn", "get_swa_avg_fn"]


def _lerp_(avg, cur, weight):
    """``avg += weight * (cur - avg)`` in place on raw floating arrays, as ``torch.lerp`` computes it: in the
    accumulation dtype, ``fma(w, cur - avg, avg)`` for a weight below 0.5, else ``fma(w - 1, cur - avg, cur)``
    (its CPU kernels' fused multiply-add; CUDA's contracts the same expressions)."""
    acc = acc_dtype(avg.dtype)
    a, b, w = avg.astype(acc, copy=False), cur.astype(acc, copy=False), acc.type(weight)
    coeff, base = (w, a) if abs(w) < 0.5 else (w - acc.type(1), b)  # (the test on the weight in acc: PyTorch's)
    avg[...] = _fma(coeff, b - a, base).astype(avg.dtype, copy=False)


def _fma(x, y, z):
    """``x * y + z`` rounded once (``x`` a scalar, ``y`` and ``z`` arrays of one floating dtype). In float32: the
    float64 sum, whose product is exact. In float64: Dekker's exact product and Knuth's exact sum, their errors
    added back (a last rounding that is the fma's but for rare ties); where those overflow (beyond 1e300), the
    plain rounded sum."""
    if y.dtype != backend.float64:
        f64 = backend.float64
        return (z.astype(f64) + f64.type(x) * y.astype(f64)).astype(y.dtype)

    def split(v):  # v = hi + lo, each half of the mantissa
        t = v * 134217729.0  # 2**27 + 1
        hi = t - (t - v)
        return hi, v - hi

    with np.errstate(over="ignore", invalid="ignore"):  # (the terms of an overflow, replaced below)
        p = x * y
        (xh, xl), (yh, yl) = split(x), split(y)
        p_err = ((xh * yh - p) + xh * yl + xl * yh) + xl * yl
        s = p + z
        zz = s - p
        s_err = (p - (s - zz)) + (z - zz)
        out = s + (s_err + p_err)
    xp = backend.array_module(out)
    return xp.where(xp.isfinite(out), out, s)


def _set_truncated_(avg, value):
    """Store ``value`` (a float array) into the integer array ``avg``, truncated, as PyTorch's ``copy_`` does."""
    avg[...] = value.astype(avg.dtype)


def _as_default_float(a):
    """An integer array as PyTorch's arithmetic between an integer tensor and a Python float (or a true division)
    sees it: in the default dtype (float32), each op rounded there. The float64 result can land on the other side
    of an integer (8.9999 where PyTorch's float32 gives 9.0), and truncation then keeps the difference."""
    return a.astype(backend.get_default_dtype())


def _check_decay(decay):
    if not isinstance(decay, (numbers.Real, Tensor)) or isinstance(decay, bool):  # (PyTorch's: a raw TypeError)
        raise TypeError(f"Invalid decay value {decay!r} provided. Please provide a number in [0,1] range.")
    if not 0.0 <= decay <= 1.0:
        raise ValueError(f"Invalid decay value {decay!r} provided. Please provide a value in [0,1] range.")


def get_ema_multi_avg_fn(decay=0.999):
    """The in-place exponential moving average of lists of parameters: ``ema = lerp(ema, current, 1 - decay)``."""
    _check_decay(decay)

    def ema_update(ema_params, current_params, _num_averaged):
        for e, c in zip(ema_params, current_params):
            if backend.is_floating(e.dtype):
                _lerp_(e._data, c._data, 1.0 - decay)
            else:  # PyTorch's formula for what lerp does not take (num_batches_tracked)
                f = backend.get_default_dtype().type
                ema, cur = _as_default_float(e._data), _as_default_float(c._data)
                _set_truncated_(e._data, ema * f(decay) + cur * f(1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    """The in-place equal-weight average of lists of parameters: ``avg = lerp(avg, current, 1 / (n + 1))``."""
    def swa_update(averaged_params, current_params, num_averaged):
        n = int(num_averaged.item()) if isinstance(num_averaged, Tensor) else int(num_averaged)
        # PyTorch's weight 1 / (n + 1): with the count a tensor (AveragedModel's), an integer tensor's true
        # division, in the default dtype (float32 for float64 parameters too)
        weight = 1 / (n + 1)
        if isinstance(num_averaged, Tensor):
            weight = float(backend.get_default_dtype().type(1) / backend.get_default_dtype().type(n + 1))
        for a, c in zip(averaged_params, current_params):
            if backend.is_floating(a.dtype):
                _lerp_(a._data, c._data, weight)
            else:  # PyTorch's get_swa_avg_fn, what its CPU AveragedModel gives integer buffers
                f = backend.get_default_dtype().type
                avg, diff = _as_default_float(a._data), _as_default_float(c._data - a._data)
                _set_truncated_(a._data, avg + diff / f(n + 1))

    return swa_update


def get_ema_avg_fn(decay=0.999):
    """The exponential moving average of one parameter, as a new tensor."""
    _check_decay(decay)

    def ema_update(ema_param, current_param, _num_averaged):
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """The equal-weight average of one parameter, as a new tensor."""
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` (on ``device`` if given) whose parameters (and, with ``use_buffers``, buffers) are the
    running average of ``model``'s at each ``update_parameters(model)`` call: equal weights (SWA) by default, or
    ``avg_fn(averaged, current, n_averaged) -> tensor`` / ``multi_avg_fn(averaged_list, current_list,
    n_averaged)`` (in place; one call per device and dtype). The first update copies. Without ``use_buffers``
    the buffers follow ``model``'s. ``n_averaged`` is a buffer (in the state dict), as PyTorch's."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if not isinstance(model, Module):
            raise TypeError(f"AveragedModel: expected a Module, got {type(model).__name__}")
        if avg_fn is not None and multi_avg_fn is not None:  # (PyTorch's raises an AssertionError)
            raise AssertionError("AveragedModel: only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        dev = backend.device(device) if device is not None else _device_of(self.module)
        with backend.on_device(dev):
            self.register_buffer("n_averaged", Tensor._from_array(backend.xp(dev).zeros((), np.int64)))
        self.avg_fn, self.multi_avg_fn, self.use_buffers = avg_fn, multi_avg_fn, bool(use_buffers)

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model):
        def tensors(m):
            return list(itertools.chain(m.parameters(), m.buffers()) if self.use_buffers else m.parameters())

        mine, theirs = tensors(self.module), tensors(model)
        what = "parameters and buffers" if self.use_buffers else "parameters"
        if len(mine) != len(theirs):
            raise RuntimeError(f"AveragedModel.update_parameters: the model has {len(theirs)} {what}, the "
                               f"averaged model {len(mine)} (another architecture?)")
        for i, (a, b) in enumerate(zip(mine, theirs)):
            if a.shape != b.shape:  # (RuntimeErrors, as PyTorch's average of the two gives)
                raise RuntimeError(f"AveragedModel.update_parameters: the model's {what} do not match the averaged "
                                   f"model's: #{i} has shape {tuple(b.shape)}, expected {tuple(a.shape)}")
        with no_grad():
            theirs = [b.detach().to(a.device) for a, b in zip(mine, theirs)]
            n = int(self.n_averaged.item())
            if n == 0:
                for a, b in zip(mine, theirs):
                    a._data[...] = b._data
                    a._bump("AveragedModel.update_parameters")
            elif self.avg_fn is not None:
                self._update_each(mine, theirs, self.avg_fn)
            else:
                groups = {}
                for a, b in zip(mine, theirs):
                    ours, current = groups.setdefault((str(a.device), str(a.dtype)), ([], []))
                    ours.append(a)
                    current.append(b)
                for ours, current in groups.values():
                    if self.multi_avg_fn is None and ours[0].device.type == "cpu":
                        # PyTorch's CPU path (no foreach kernels there): get_swa_avg_fn's formula, tensor by tensor
                        self._update_each(ours, current, get_swa_avg_fn())
                        continue
                    (self.multi_avg_fn or get_swa_multi_avg_fn())(ours, current, self.n_averaged.to(ours[0].device))
                    for a in ours:
                        a._bump("AveragedModel.update_parameters")
            if not self.use_buffers:  # the buffers follow the model's
                for a, b in zip(self.module.buffers(), model.buffers()):
                    a._data[...] = backend.to_device(b._data, backend.device_of(a._data))
                    a._bump("AveragedModel.update_parameters")
            self.n_averaged._data += 1
            self.n_averaged._bump("AveragedModel.update_parameters")

    def _update_each(self, mine, theirs, avg_fn):
        """``a.copy_(avg_fn(a, b, n_averaged))`` for each pair: the result stored in a's dtype (truncated for an
        integer buffer, as ``copy_`` does), broadcast to a's shape."""
        for a, b in zip(mine, theirs):
            value = avg_fn(a.detach(), b, self.n_averaged.to(a.device))
            if not isinstance(value, Tensor):
                raise TypeError(f"AveragedModel.update_parameters: avg_fn must return a tensor, got "
                                f"{type(value).__name__}")
            try:
                a._data[...] = backend.to_device(value._data, backend.device_of(a._data))
            except ValueError:
                raise RuntimeError(f"AveragedModel.update_parameters: avg_fn returned a tensor of shape "
                                   f"{tuple(value.shape)} for one of shape {tuple(a.shape)}") from None
            a._bump("AveragedModel.update_parameters")


def _device_of(module):
    for t in itertools.chain(module.parameters(), module.buffers()):
        return t.device
    return backend.device("cpu")


def update_bn(loader, model, device=None):
    """Recompute the running statistics of ``model``'s BatchNorm layers by one pass over ``loader`` (batches,
    or tuples / lists whose first element is the input, moved to ``device`` if given), as their cumulative
    average; the layers' momenta and the model's mode are restored after."""
    momenta = {}
    for m in model.modules():
        if isinstance(m, _BatchNorm):
            m.reset_running_stats()
            momenta[m] = m.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for m in momenta:
        m.momentum = None
    try:
        with no_grad():
            for batch in loader:
                x = batch[0] if isinstance(batch, (list, tuple)) else batch
                model(x if device is None else x.to(device))
    finally:
        for m, momentum in momenta.items():
            m.momentum = momentum
        model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's lr to its ``swa_lr`` (one value, or one per group) over ``anneal_epochs`` steps,
    along a cosine (``anneal_strategy='cos'``) or a line, then hold it, as PyTorch's ``SWALR``."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        groups = optimizer.param_groups if hasattr(optimizer, "param_groups") else None
        if groups is not None:
            lrs = list(swa_lr) if isinstance(swa_lr, (list, tuple)) else [swa_lr] * len(groups)
            if len(lrs) != len(groups):
                raise ValueError(f"SWALR: swa_lr must have one value per parameter group ({len(groups)}), got "
                                 f"{len(lrs)}")
            for lr in lrs:
                if not isinstance(lr, (numbers.Real, Tensor)) or isinstance(lr, bool):
                    raise TypeError(f"SWALR: swa_lr must be a number, got {lr!r}")
            for lr, g in zip(lrs, groups):  # (as given, a tensor cloned: PyTorch's)
                g["swa_lr"] = lr.clone() if isinstance(lr, Tensor) else lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"SWALR: anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy!r}")
        if not isinstance(anneal_epochs, int) or isinstance(anneal_epochs, bool) or anneal_epochs < 0:
            raise ValueError(f"SWALR: anneal_epochs must be equal or greater than 0, got {anneal_epochs!r}")
        self._anneal_strategy, self.anneal_epochs = anneal_strategy, anneal_epochs  # (PyTorch's names)
        super().__init__(optimizer, last_epoch)

    def _anneal(self, t):
        return (1 - math.cos(math.pi * t)) / 2 if self._anneal_strategy == "cos" else t

    @property
    def anneal_func(self):
        """The annealing curve, t in [0, 1] -> alpha (PyTorch's attribute; not in the state dict)."""
        return self._anneal

    def load_state_dict(self, state_dict):
        """Also a state dict saved by this package before it took PyTorch's name ``_anneal_strategy``."""
        state_dict = dict(state_dict)
        if "anneal_strategy" in state_dict:
            state_dict.setdefault("_anneal_strategy", state_dict.pop("anneal_strategy"))
        super().load_state_dict(state_dict)

    def get_lr(self):
        _warn_outside_step(self)
        # the lr before annealing started, recovered from the current one (PyTorch's chainable form)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev = self._anneal(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        alpha = self._anneal(max(0, min(1, step / max(1, self.anneal_epochs))))
        out = []
        for g in self.optimizer.param_groups:
            start = g["swa_lr"] if prev == 1 else (g["lr"] - prev * g["swa_lr"]) / (1 - prev)
            out.append(g["swa_lr"] * alpha + start * (1 - alpha))
        return out
