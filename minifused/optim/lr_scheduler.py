"""Learning-rate schedulers with PyTorch's (chainable, recursive) formulas and state dicts.

Constructing a scheduler performs its first step, as in PyTorch: the groups' ``lr`` is
set to the schedule's value at epoch 0. Call ``scheduler.step()`` after
``optimizer.step()``; ``step(epoch)`` jumps to an epoch through the schedule's closed form
where it has one (as PyTorch does). ``get_last_lr()`` gives the lrs the last step set.
``state_dict()`` holds plain numbers, strings and lists (``LambdaLR``: not its functions).
``SequentialLR``, ``CosineAnnealingWarmRestarts`` and ``ReduceLROnPlateau`` live in
``lr_scheduler_more.py`` and are re-exported here.
"""
from __future__ import annotations

import math
import numbers
import types
from bisect import bisect_right
from collections import Counter

from ..tensor import Tensor
from ._scheduler_base import LRScheduler, _check_optimizer  # noqa: F401 - the base, re-exported here
from ._scheduler_base import _numbers, _set_lr, _warn_outside_step

_LRScheduler = LRScheduler  # PyTorch's older name of the base, which custom schedulers still subclass


def _number(key):
    """A milestone from a state dict: a number as saved, or its text (keys that went through a text format)."""
    if isinstance(key, str):
        value = float(key)
        return int(value) if value.is_integer() else value
    return key


def _real(where, what, value):
    """A number argument of a schedule (a one-element tensor too), kept as given as PyTorch's keeps it (a tensor or
    NumPy float32 gamma computes the lrs in its precision, and a float lr becomes its kind); anything else (a string
    from a command line) a TypeError, where PyTorch's fails at the first step that computes with it."""
    if isinstance(value, (str, bool)) or not isinstance(value, (numbers.Real, Tensor)):
        raise TypeError(f"{where}: expected a number {what}, got {value!r}")
    return value


def _period(where, what, value):
    """A period of a schedule (StepLR's step_size, CosineAnnealingLR's T_max): a number, kept as given. PyTorch's
    takes any number (0 or a negative one too: see :func:`_zero_period`) and fails at a later step on what is none
    (a string's TypeError); here the constructor names that."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where}: expected a number {what}, got {value!r}")
    return value


def _zero_period(sched, what):
    """PyTorch's step of a schedule whose period is 0: its formula's ZeroDivisionError (after epoch 0), named here."""
    if getattr(sched, what) == 0 and sched.last_epoch:
        raise ZeroDivisionError(f"{type(sched).__name__}: division by zero ({what} is 0)")


def _factor(where, f, epoch):
    """What an lr function returned for ``epoch``: a number (or a one-element tensor), checked so that a function
    returning None or a string fails naming the scheduler, not in the product with the lr."""
    value = f(epoch)
    if isinstance(value, (str, bool)) or not isinstance(value, (numbers.Real, Tensor)):
        raise TypeError(f"{where}: lr_lambda returned {value!r} for epoch {epoch}; expected a number")
    return value


class StepLR(LRScheduler):
    """Multiply the lr by ``gamma`` every ``step_size`` epochs."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        # (kept as given, as PyTorch keeps it: a computed non-integer step size decays only at its exact multiples;
        # a negative one at the multiples of its size, as there; one of 0 is built, its first step divides by zero)
        self.step_size = _period("StepLR", "step_size", step_size)
        self.gamma = _real("StepLR", "gamma", gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_outside_step(self)
        _zero_period(self, "step_size")
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the lr by ``gamma`` at each milestone epoch (by ``gamma**k`` at one listed k times)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        # (None: no milestones, as PyTorch's Counter(None) gives; a milestone that is no number, a string from a
        # config file, would never be reached: refused)
        if milestones is not None and (isinstance(milestones, (str, bytes)) or not hasattr(milestones, "__iter__")):
            raise TypeError(f"MultiStepLR: milestones must be a list of epochs, got {milestones!r}")
        milestones = () if milestones is None else milestones  # (an array too: no truth value asked of it)
        bad = [m for m in milestones if isinstance(m, bool) or not isinstance(m, numbers.Real)]
        if bad:
            raise TypeError(f"MultiStepLR: milestones must be numbers (epochs), got {bad[0]!r} in {milestones!r}")
        self.milestones = Counter(milestones)  # (as given, as PyTorch's: a milestone of 2.5 is never reached)
        self.gamma = _real("MultiStepLR", "gamma", gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_outside_step(self)
        if self.last_epoch not in self.milestones:
            return self._lrs()
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._lrs()]

    def _get_closed_form_lr(self):
        milestones = sorted(self.milestones.elements())
        return [base * self.gamma ** bisect_right(milestones, self.last_epoch) for base in self.base_lrs]

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        self.milestones = Counter({_number(k): int(v) for k, v in dict(self.milestones).items()})


class ExponentialLR(LRScheduler):
    """Multiply the lr by ``gamma`` every epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = _real("ExponentialLR", "gamma", gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_outside_step(self)
        if self._is_initial:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


def _lambdas(name, fn, optimizer):
    """One function per group: ``fn`` itself for every group, or a list of one per group."""
    n = len(optimizer.param_groups)
    if not isinstance(fn, (list, tuple)):
        fns = [fn] * n
    elif len(fn) != n:
        raise ValueError(f"{name}: expected {n} lr_lambdas (one per parameter group), got {len(fn)}")
    else:
        fns = list(fn)
    for f in fns:
        if not callable(f):
            raise TypeError(f"{name}: lr_lambda must be callable, got {type(f).__name__}")
    return fns


class _LambdaState:
    """State dicts without the lr functions (PyTorch's rule): a plain function is saved as None, a
    callable object as its ``__dict__``, which loading copies back into the object."""

    def state_dict(self):
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        sd["lr_lambdas"] = [None if isinstance(f, types.FunctionType) else dict(f.__dict__)
                            for f in self.lr_lambdas]
        return sd

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        saved = state_dict.pop("lr_lambdas", [None] * len(self.lr_lambdas))
        LRScheduler.load_state_dict(self, state_dict)
        for f, attrs in zip(self.lr_lambdas, saved):
            if attrs is not None:
                f.__dict__.update(attrs)


class LambdaLR(_LambdaState, LRScheduler):
    """``lr = initial_lr * lr_lambda(epoch)``, one function for every group or a list of one per group."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        _check_optimizer(optimizer)
        self.lr_lambdas = _lambdas("LambdaLR", lr_lambda, optimizer)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_outside_step(self)
        return [base * _factor("LambdaLR", f, self.last_epoch) for f, base in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(_LambdaState, LRScheduler):
    """``lr = lr * lr_lambda(epoch)`` at every epoch after the first."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        _check_optimizer(optimizer)
        self.lr_lambdas = _lambdas("MultiplicativeLR", lr_lambda, optimizer)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_outside_step(self)
        if self._is_initial:
            return self._lrs()
        return [lr * _factor("MultiplicativeLR", f, self.last_epoch) for f, lr in zip(self.lr_lambdas, self._lrs())]


class CosineAnnealingLR(LRScheduler):
    """``eta_min + (base - eta_min)(1 + cos(pi t / T_max)) / 2``, computed recursively as PyTorch does."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):  # noqa: N803 - PyTorch's name
        self.T_max = _period("CosineAnnealingLR", "T_max", T_max)
        self.eta_min = _real("CosineAnnealingLR", "eta_min", eta_min)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_outside_step(self)
        t, T, lo = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return self._lrs()
        _zero_period(self, "T_max")  # (a negative T_max runs PyTorch's formula, as there)
        if self._step_count == 1 and t > 0:
            return [lo + (base - lo) * (1 + math.cos(t * math.pi / T)) / 2 for base in self.base_lrs]
        if (t - 1 - T) % (2 * T) == 0:
            return [lr + (base - lo) * (1 - math.cos(math.pi / T)) / 2
                    for base, lr in zip(self.base_lrs, self._lrs())]
        return [(1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T)) * (lr - lo) + lo
                for lr in self._lrs()]

    def _get_closed_form_lr(self):
        _zero_period(self, "T_max")
        t, T, lo = self.last_epoch, self.T_max, self.eta_min
        return [lo + (base - lo) * (1 + math.cos(math.pi * t / T)) / 2 for base in self.base_lrs]


class LinearLR(LRScheduler):
    """Scale the lr linearly from ``start_factor`` to ``end_factor`` over ``total_iters`` steps (warm-up)."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        _numbers("LinearLR", start_factor=start_factor, end_factor=end_factor, total_iters=total_iters)
        if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
            raise ValueError(f"LinearLR: start_factor must be in (0, 1] and end_factor in [0, 1], got "
                             f"start_factor={start_factor!r}, end_factor={end_factor!r}")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_outside_step(self)
        t, s, e, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
        if t == 0:
            return [lr * s for lr in self._lrs()]
        if self._is_initial or t > n:
            return self._lrs()
        return [lr * (1.0 + (e - s) / (n * s + (t - 1) * (e - s))) for lr in self._lrs()]

    def _get_closed_form_lr(self):
        t, s, e, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
        if n == 0:  # (PyTorch's: a bare division by zero)
            raise ZeroDivisionError("LinearLR.step(epoch): the closed form start_factor + (end_factor - start_factor) "
                                    "* min(total_iters, epoch) / total_iters has no value for total_iters=0")
        return [base * (s + (e - s) * min(n, t) / n) for base in self.base_lrs]


class OneCycleLR(LRScheduler):
    """The 1cycle policy (PyTorch's two- or three-phase schedule; momentum cycled inversely).

    Give ``total_steps`` or ``epochs`` and ``steps_per_epoch``; step once per batch.
    """

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None, pct_start=0.3,
                 anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95,
                 div_factor=25.0, final_div_factor=1e4, three_phase=False, last_epoch=-1):
        _check_optimizer(optimizer)

        def positive_int(name, v):
            if name == "total_steps" and not isinstance(v, numbers.Real):  # (PyTorch's compares it first)
                raise TypeError(f"OneCycleLR: expected a positive integer total_steps, got {v!r}")
            if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"OneCycleLR: expected a positive integer {name}, got {v!r}")
            return int(v)

        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError(f"OneCycleLR: give total_steps, or epochs and steps_per_epoch; got total_steps=None, "
                                 f"epochs={epochs!r}, steps_per_epoch={steps_per_epoch!r}")
            total_steps = positive_int("epochs", epochs) * positive_int("steps_per_epoch", steps_per_epoch)
        total_steps = positive_int("total_steps", total_steps)
        _numbers("OneCycleLR", pct_start=pct_start, div_factor=div_factor, final_div_factor=final_div_factor)
        if not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: expected pct_start in [0, 1], got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
        self.total_steps = int(total_steps)
        self._anneal_func_type = anneal_strategy  # (PyTorch's attribute names: its state dicts load here)
        self.cycle_momentum = cycle_momentum
        # (one per group, a tensor cloned for each, as PyTorch's: a group's max_lr is not the tensor given)
        max_lrs = _per_group("max_lr", optimizer, max_lr, "OneCycleLR")
        if three_phase:
            self._schedule_phases = [
                {"end_step": float(pct_start * self.total_steps) - 1, "start_lr": "initial_lr",
                 "end_lr": "max_lr", "start_momentum": "max_momentum", "end_momentum": "base_momentum"},
                {"end_step": float(2 * pct_start * self.total_steps) - 2, "start_lr": "max_lr",
                 "end_lr": "initial_lr", "start_momentum": "base_momentum", "end_momentum": "max_momentum"},
                {"end_step": self.total_steps - 1, "start_lr": "initial_lr", "end_lr": "min_lr",
                 "start_momentum": "max_momentum", "end_momentum": "max_momentum"}]
        else:
            self._schedule_phases = [
                {"end_step": float(pct_start * self.total_steps) - 1, "start_lr": "initial_lr",
                 "end_lr": "max_lr", "start_momentum": "max_momentum", "end_momentum": "base_momentum"},
                {"end_step": self.total_steps - 1, "start_lr": "max_lr", "end_lr": "min_lr",
                 "start_momentum": "base_momentum", "end_momentum": "max_momentum"}]
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(f"OneCycleLR: optimizer must support momentum or beta1 with `cycle_momentum` option "
                                 f"enabled; {type(optimizer).__name__} has neither (pass cycle_momentum=False)")
            self.use_beta1 = "betas" in optimizer.defaults
            tops = _per_group("max_momentum", optimizer, max_momentum, "OneCycleLR")  # (one, or one per group)
            bases = _per_group("base_momentum", optimizer, base_momentum, "OneCycleLR")
        if last_epoch == -1:  # (every argument checked: a bad one leaves the optimizer's groups as they were)
            for lr, g in zip(max_lrs, optimizer.param_groups):
                g["initial_lr"] = lr / div_factor
                g["max_lr"] = lr
                g["min_lr"] = g["initial_lr"] / final_div_factor
        if last_epoch == -1 and cycle_momentum:
            for g, top, base in zip(optimizer.param_groups, tops, bases):
                if self.use_beta1:
                    g["betas"] = (top, *g["betas"][1:])
                else:
                    g["momentum"] = top
                g["max_momentum"], g["base_momentum"] = top, base
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start, end, pct):
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def load_state_dict(self, state_dict):
        """Also a state dict saved by this package before it took PyTorch's names for two entries."""
        state_dict = dict(state_dict)
        if "anneal_strategy" in state_dict:
            state_dict.setdefault("_anneal_func_type", state_dict.pop("anneal_strategy"))
        if "_use_beta1" in state_dict:
            use_beta1 = state_dict.pop("_use_beta1")
            if "use_beta1" in self.__dict__:
                state_dict.setdefault("use_beta1", use_beta1)
        super().load_state_dict(state_dict)

    def get_lr(self):
        _warn_outside_step(self)
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: tried to step {step} times, more than total_steps={self.total_steps}")
        lrs = []
        for g in self.optimizer.param_groups:
            start_step = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step <= end_step or i == len(self._schedule_phases) - 1:
                    if end_step == start_step:  # (PyTorch's: a bare division by zero)
                        raise ZeroDivisionError(
                            f"OneCycleLR: step {step} falls in phase {i + 1} of the schedule, which has no length "
                            f"(it starts and ends at step {end_step:g}): pick pct_start and total_steps "
                            f"(={self.total_steps}) so that every phase spans a step")
                    pct = (step - start_step) / (end_step - start_step)
                    lr = self._anneal(g[phase["start_lr"]], g[phase["end_lr"]], pct)
                    if self.cycle_momentum:
                        mom = self._anneal(g[phase["start_momentum"]], g[phase["end_momentum"]], pct)
                    break
                start_step = phase["end_step"]
            lrs.append(lr)
            if self.cycle_momentum:
                if self.use_beta1:
                    g["betas"] = (mom, *g["betas"][1:])
                else:
                    g["momentum"] = mom
        return lrs


def _per_group(what, optimizer, value, where="CyclicLR"):
    """``value`` for each parameter group: one number for all, or a list / tuple of one per group; kept as given
    (a tensor cloned), as PyTorch's ``_format_param`` keeps them."""
    n = len(optimizer.param_groups)
    values = list(value) if isinstance(value, (list, tuple)) else [value] * n
    if len(values) != n:
        raise ValueError(f"{where}: {what} must have the same length as optimizer.param_groups: {what} has "
                         f"{len(values)} values, param_groups has {n}")
    for v in values:
        _real(where, what, v)
    return [v.clone() if isinstance(v, Tensor) else v for v in values]


class _StepSizeZeroError(ValueError, ZeroDivisionError):
    """CyclicLR's step_size_up of 0: a ValueError, and the ZeroDivisionError PyTorch's constructor raises for it
    (its cycle's rise divides by zero)."""


class CyclicLR(LRScheduler):
    """The cyclical learning rate policy (PyTorch's ``CyclicLR``): the lr climbs from ``base_lr`` to ``max_lr``
    over ``step_size_up`` steps and falls back over ``step_size_down`` (default: as many), its amplitude scaled
    per cycle ('triangular': 1; 'triangular2': halved each cycle) or per step ('exp_range': ``gamma**step``),
    or by ``scale_fn`` with ``scale_mode``; with ``cycle_momentum`` the momentum (or Adam's beta1) cycles the
    other way between ``max_momentum`` and ``base_momentum``. Step once per batch."""

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None, mode="triangular",
                 gamma=1.0, scale_fn=None, scale_mode="cycle", cycle_momentum=True, base_momentum=0.8,
                 max_momentum=0.9, last_epoch=-1):
        _check_optimizer(optimizer)
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        if not up > 0 or not down >= 0:  # (a step_size_down of 0: a sawtooth, as PyTorch's gives it)
            raise (_StepSizeZeroError if up == 0 else ValueError)(
                f"CyclicLR: expected step_size_up > 0 and step_size_down >= 0, got {step_size_up!r} and "
                f"{step_size_down!r}")
        self.total_size, self.step_ratio = up + down, up / (up + down)
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError(f"CyclicLR: mode is invalid and scale_fn is None (mode={mode!r})")
        if scale_mode not in ("cycle", "iterations"):
            raise ValueError(f"CyclicLR: scale_mode must be 'cycle' or 'iterations', got {scale_mode!r}")
        self.mode, self.gamma, self._scale_fn_custom = mode, _real("CyclicLR", "gamma", gamma), scale_fn
        self.scale_mode = scale_mode if scale_fn is not None else ("iterations" if mode == "exp_range" else "cycle")
        self.cycle_momentum = bool(cycle_momentum)
        if self.cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(f"CyclicLR: optimizer must support momentum or beta1 with `cycle_momentum` option "
                                 f"enabled; {type(optimizer).__name__} has neither (pass cycle_momentum=False)")
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            self.max_momentums = _per_group("max_momentum", optimizer, max_momentum)
        if last_epoch == -1:  # (every argument checked: a bad one leaves the optimizer's groups as they were)
            for lr, g in zip(base_lrs, optimizer.param_groups):
                _set_lr(g, lr)
        if last_epoch == -1 and self.cycle_momentum:
            for m, b, g in zip(self.max_momentums, self.base_momentums, optimizer.param_groups):
                self._set_momentum(g, m)
                g["max_momentum"], g["base_momentum"] = m, b
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _set_momentum(self, group, value):
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def scale_fn(self, x):
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def get_lr(self):
        _warn_outside_step(self)
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        factor = x / self.step_ratio if x <= self.step_ratio else (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [base + (top - base) * factor * scale for base, top in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for g, base, top in zip(self.optimizer.param_groups, self.base_momentums, self.max_momentums):
                self._set_momentum(g, top - (top - base) * factor * scale)
        return lrs

    def state_dict(self):
        """A custom ``scale_fn`` as PyTorch saves it: None for a plain function, a callable object's
        ``__dict__`` (which loading copies back into the object)."""
        sd = super().state_dict()
        fn = sd.pop("_scale_fn_custom")
        sd["_scale_fn_custom"] = None if fn is None or isinstance(fn, types.FunctionType) else dict(fn.__dict__)
        return sd

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        attrs = state_dict.pop("_scale_fn_custom", None)
        if attrs is not None and not isinstance(attrs, dict):
            raise ValueError(f"CyclicLR.load_state_dict: '_scale_fn_custom' must be None or the dict of a scale "
                             f"function's attributes, got {type(attrs).__name__}; nothing was loaded")
        if attrs is not None and self._scale_fn_custom is None:
            raise ValueError("CyclicLR.load_state_dict: the state dict holds a custom scale_fn's attributes, but "
                             "this scheduler has no scale_fn; nothing was loaded")
        super().load_state_dict(state_dict)
        if attrs is not None:
            self._scale_fn_custom.__dict__.update(attrs)


from .lr_scheduler_more import (ChainedScheduler, ConstantLR, CosineAnnealingWarmRestarts,  # noqa: E402,F401
                                PolynomialLR, ReduceLROnPlateau, SequentialLR)
