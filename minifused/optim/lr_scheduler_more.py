"""Schedulers that drive others or follow a metric: ``SequentialLR``, ``CosineAnnealingWarmRestarts``
(SGDR) and ``ReduceLROnPlateau``, with PyTorch's formulas, stepping rules and state dicts. Import
them from ``minifused.optim.lr_scheduler``."""
from __future__ import annotations

import math
import numbers
import warnings
from bisect import bisect_right

from ..tensor import Tensor
from ._scheduler_base import (EPOCH_DEPRECATION_WARNING, LRScheduler, _check_optimizer, _group_values, _numbers,
                              _set_lr, _warn_outside_step)


class _Composite(LRScheduler):
    """A scheduler made of others (``_schedulers``): its state dict holds theirs."""

    def get_lr(self):
        # (a SequentialLR restarting this one at a milestone asks for it; PyTorch's base raises a bare
        # NotImplementedError there)
        raise NotImplementedError(f"{type(self).__name__} has no lr formula of its own (it steps the schedulers it "
                                  f"holds), so a SequentialLR cannot restart it at a milestone")

    def state_dict(self):
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        sd["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return sd

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        subs = state_dict.pop("_schedulers", None)
        if subs is None or len(subs) != len(self._schedulers):
            raise ValueError(f"{type(self).__name__}.load_state_dict: expected the states of "
                             f"{len(self._schedulers)} schedulers, got {None if subs is None else len(subs)}")
        super().load_state_dict(state_dict)
        for s, sd in zip(self._schedulers, subs):
            s.load_state_dict(sd)


class SequentialLR(_Composite):
    """Run ``schedulers[0]`` until ``milestones[0]``, then ``schedulers[1]`` (restarted with
    ``step(0)``), and so on. The schedulers must drive ``optimizer``; their construction steps are
    undone (those of a nested SequentialLR's schedulers too) and the lr reset to ``initial_lr`` first,
    then the scheduler that runs at step 0 takes its first step, as PyTorch does."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        _check_optimizer(optimizer)
        if isinstance(milestones, (str, bytes)) or not hasattr(milestones, "__iter__"):
            raise TypeError(f"SequentialLR: milestones must be a list of epochs, got {milestones!r}")
        schedulers = list(schedulers)
        if not hasattr(milestones, "__getitem__"):
            milestones = list(milestones)  # (an iterator; a list, tuple or array kept as given, as PyTorch's)
        _numbers("SequentialLR", **{f"milestones[{i}]": m for i, m in enumerate(milestones)})
        if not schedulers:
            raise ValueError("SequentialLR: expected at least one scheduler, got none")
        for i, s in enumerate(schedulers):
            if not isinstance(s, LRScheduler):
                raise TypeError(f"SequentialLR: schedulers[{i}] is a {type(s).__name__}, not a scheduler")
            if isinstance(s, ReduceLROnPlateau):
                raise ValueError(f"SequentialLR: schedulers[{i}] is a ReduceLROnPlateau, which cannot be sequenced "
                                 f"(its step needs a metric)")
            if s.optimizer is not optimizer:
                raise ValueError(f"SequentialLR: schedulers[{i}] drives another optimizer than the one given")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR: expected {len(schedulers) - 1} milestones (one fewer than the "
                             f"{len(schedulers)} schedulers), got {len(milestones)}")
        self.optimizer = optimizer
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        for g in optimizer.param_groups:
            _set_lr(g, g["initial_lr"])
        self.recursive_undo()
        first = schedulers[bisect_right(milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def recursive_undo(self, sched=None):
        """Take back the step that ``sched`` (by default each scheduler this one holds) took when it was
        constructed; a composite's own count stays, its schedulers' go back (PyTorch's method)."""
        scheds = self if sched is None else sched
        if isinstance(scheds, _Composite):
            for s in scheds._schedulers:
                self.recursive_undo(s)
        else:
            scheds.last_epoch -= 1

    def step(self):
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._update_lr(0)  # restart it at epoch 0 (its closed form where it has one)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()



class CosineAnnealingWarmRestarts(LRScheduler):
    """SGDR: cosine annealing from the base lr to ``eta_min`` over ``T_i`` epochs, restarting at the
    base lr; the first period is ``T_0`` and each next one ``T_mult`` times longer. ``step(epoch)``
    takes a fractional epoch (e.g. ``epoch + i / iters``) as PyTorch's does."""

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):  # noqa: N803 - PyTorch's names
        for v, want in ((T_0, "a positive integer T_0"), (T_mult, "an integer T_mult >= 1")):
            if not isinstance(v, numbers.Real):  # (PyTorch's compares it first: a TypeError)
                raise TypeError(f"CosineAnnealingWarmRestarts: expected {want}, got {v!r}")
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"CosineAnnealingWarmRestarts: expected {want}, got {v!r}")
        if isinstance(eta_min, bool) or not isinstance(eta_min, (int, float)):
            raise ValueError(f"CosineAnnealingWarmRestarts: expected a number eta_min, got {eta_min!r}")
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_outside_step(self)
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for base in self.base_lrs]

    def step(self, epoch=None):
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if isinstance(epoch, (str, bool)) or not isinstance(epoch, (numbers.Real, Tensor)):
                raise TypeError(f"CosineAnnealingWarmRestarts.step: expected a number epoch, got {epoch!r}")
            if epoch < 0:
                raise ValueError(f"CosineAnnealingWarmRestarts: expected a non-negative epoch, got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:  # which period epoch falls in: T_0 (T_mult^n - 1) / (T_mult - 1) <= epoch
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult ** n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        self._get_lr_called_within_step = True
        try:
            values = self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        self._set_lrs(values)


class ReduceLROnPlateau(LRScheduler):
    """Multiply the lr by ``factor`` once the metric given to ``step(metric)`` has not improved for
    more than ``patience`` epochs (then wait ``cooldown`` epochs); never below ``min_lr`` (a number or
    one per group), and only by more than ``eps``. Improvement: ``mode`` 'min'/'max' with a relative
    or absolute ``threshold``. Unlike the others, constructing it leaves the lr as it is."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
                 cooldown=0, min_lr=0, eps=1e-8):
        _check_optimizer(optimizer)
        # (a one-element tensor too, as PyTorch's takes it: the lr it reduces becomes a tensor; a string is
        # PyTorch's raw error at a comparison)
        for m in min_lr if isinstance(min_lr, (list, tuple)) else [min_lr]:
            _numbers("ReduceLROnPlateau", min_lr=m)
        _numbers("ReduceLROnPlateau", factor=factor, patience=patience, threshold=threshold, cooldown=cooldown,
                 eps=eps)
        if not factor < 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor should be < 1.0, got {factor}")
        self.factor = factor
        self.optimizer = optimizer
        n = len(optimizer.param_groups)
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != n:
                raise ValueError(f"ReduceLROnPlateau: expected {n} min_lrs (one per parameter group), "
                                 f"got {len(min_lr)}")
            self.default_min_lr, self.min_lrs = None, list(min_lr)
        else:
            self.default_min_lr, self.min_lrs = min_lr, [min_lr] * n
        self.patience, self.cooldown, self.cooldown_counter = patience, cooldown, 0
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = _group_values(optimizer)
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()

    def _init_is_better(self, mode, threshold, threshold_mode):
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs', got {threshold_mode!r}")
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode
        self.mode_worse = math.inf if mode == "min" else -math.inf

    def _reset(self):
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0

    def _is_better(self, a, best):
        if self.mode == "min":
            return a < best * (1.0 - self.threshold) if self.threshold_mode == "rel" else a < best - self.threshold
        return a > best * (self.threshold + 1.0) if self.threshold_mode == "rel" else a > best + self.threshold

    def step(self, metrics, epoch=None):
        try:
            current = float(metrics)  # a 0-d tensor too
        except (TypeError, ValueError) as e:  # (None, a string, several values: named here, the kind kept)
            raise (TypeError if isinstance(e, TypeError) else ValueError)(
                f"ReduceLROnPlateau.step: expected the metric as a number or a one-element tensor, "
                f"got {metrics!r}") from e
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self._is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs in cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = _group_values(self.optimizer)

    def _reduce_lr(self):
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(f"ReduceLROnPlateau: the optimizer has {len(groups)} parameter groups, "
                                   f"min_lr lists {len(self.min_lrs)}")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for g, floor in zip(groups, self.min_lrs):
            old = float(g["lr"])
            new = max(old * self.factor, floor)
            if old - new > self.eps:
                _set_lr(g, new)

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)


class ConstantLR(LRScheduler):
    """The lr times ``factor`` for the first ``total_iters`` steps, then as it was (a warm-up)."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        _numbers("ConstantLR", factor=factor, total_iters=total_iters)
        if not 0 <= factor <= 1:
            raise ValueError(f"ConstantLR: factor must be in [0, 1], got {factor!r}")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_outside_step(self)
        t = self.last_epoch
        if t == 0:
            return [lr * self.factor for lr in self._lrs()]
        if t != self.total_iters:
            return self._lrs()
        if self.factor == 0:  # (PyTorch's divides by zero here, its ZeroDivisionError; a factor 0 that is never
            # undone, ended by a SequentialLR before total_iters, is fine)
            raise ZeroDivisionError(f"ConstantLR: a factor of 0 cannot be undone at total_iters={self.total_iters} "
                                    f"(the lr is restored by dividing by the factor); use a small positive factor, or "
                                    f"end this scheduler before then (SequentialLR)")
        return [lr * (1.0 / self.factor) for lr in self._lrs()]  # (PyTorch's rounding: not lr / factor)

    def _get_closed_form_lr(self):
        done = self.last_epoch >= self.total_iters
        return [base * (self.factor + done * (1 - self.factor)) for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """The lr decayed as ``(1 - t / total_iters) ** power`` over ``total_iters`` steps, then held."""

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        # (a float too, as PyTorch's: the decay is a function of t / total_iters; 0 or less leaves the lr as it
        # is, as PyTorch's chainable form does)
        _numbers("PolynomialLR", total_iters=total_iters, power=power)
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_outside_step(self)
        t, n = self.last_epoch, self.total_iters
        if self._is_initial or t > n:  # (the constructor's step, at whatever last_epoch, keeps the lr: PyTorch's)
            return self._lrs()
        decay = ((1.0 - t / n) / (1.0 - (t - 1) / n)) ** self.power
        return [lr * decay for lr in self._lrs()]

    def _get_closed_form_lr(self):
        t, n = self.last_epoch, self.total_iters
        if n == 0:  # (PyTorch's: a bare division by zero)
            raise ZeroDivisionError("PolynomialLR.step(epoch): the closed form (1 - min(total_iters, epoch) / "
                                    "total_iters) ** power has no value for total_iters=0")
        return [base * (1.0 - min(n, t) / n) ** self.power for base in self.base_lrs]


class ChainedScheduler(_Composite):
    """Several schedulers stepped together, each scaling the lr the one before it left (PyTorch's
    ``ChainedScheduler``: e.g. a ConstantLR warm-up chained with an ExponentialLR)."""

    def __init__(self, schedulers, optimizer=None):
        schedulers = list(schedulers)
        if not schedulers:
            raise ValueError("ChainedScheduler: expected at least one scheduler, got none")
        if not isinstance(schedulers[0], LRScheduler):  # (checked before its optimizer is read)
            raise TypeError(f"ChainedScheduler: schedulers[0] is a {type(schedulers[0]).__name__}, not a scheduler")
        optimizer = optimizer or schedulers[0].optimizer
        for i, s in enumerate(schedulers):
            if isinstance(s, ReduceLROnPlateau):  # (a ValueError, as PyTorch's: the kind is right, not its use)
                raise ValueError(f"ChainedScheduler: schedulers[{i}] is a ReduceLROnPlateau, which cannot be chained "
                                 f"(its step needs a metric)")
            if not isinstance(s, LRScheduler):
                raise TypeError(f"ChainedScheduler: schedulers[{i}] is a {type(s).__name__}, not a scheduler")
            if s.optimizer is not optimizer:
                raise ValueError(f"ChainedScheduler: schedulers[{i}] drives another optimizer than the others")
        self.optimizer, self._schedulers = optimizer, schedulers
        self._last_lr = self._lrs()

    def step(self):
        for s in self._schedulers:
            s.step()
        self._last_lr = self._lrs()

