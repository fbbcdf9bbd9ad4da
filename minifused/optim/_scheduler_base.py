"""The base of every LR scheduler (``LRScheduler``: stepping, ``get_last_lr``, checked state dicts), shared by
``lr_scheduler.py`` and ``lr_scheduler_more.py``."""
from __future__ import annotations

import functools
import numbers
import warnings
import weakref

from ..tensor import Tensor
from .optimizer import Optimizer


def _group_values(optimizer, key="lr"):
    """``[group[key]]`` over the optimizer's groups, a tensor (PyTorch's Tensor lr) cloned: what a scheduler keeps
    must not change with the value it sets in place."""
    return [g[key].clone() if isinstance(g[key], Tensor) else g[key] for g in optimizer.param_groups]


def _set_lr(group, value):
    """``group["lr"] = value``, or where the group's lr is a tensor, its value filled in place (PyTorch's rule: the
    tensor that the optimizer, and maybe its user, hold stays the one the step reads)."""
    if isinstance(group["lr"], Tensor):
        group["lr"].fill_(float(value))
    else:
        group["lr"] = value


#: PyTorch's warning for ``step(epoch)``, which its schedulers keep for old code
EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where possible. Please use "
    "`scheduler.step()` to step the scheduler. During the deprecation, if epoch is different from None, the closed "
    "form is used instead of the new chainable form, where available.")


def _warn_outside_step(scheduler):
    """A scheduler's ``get_lr`` gives the lrs of the step being taken (computed from those in force): called from
    outside a step, it is not the lr in force, and PyTorch's warn of it."""
    if not scheduler._get_lr_called_within_step:
        warnings.warn("To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                      UserWarning, stacklevel=3)


def _numbers(where, **values):
    """Each keyword's value a number (or a one-element tensor), else a TypeError naming it: PyTorch's schedulers
    compare or compute with such an argument and fail with the operator's raw TypeError, at construction or at a
    later step. The values are kept as given."""
    for what, value in values.items():
        if isinstance(value, (str, bool)) or not isinstance(value, (numbers.Real, Tensor)):
            raise TypeError(f"{where}: expected a number {what}, got {value!r}")


def _mark_step_calls(optimizer):
    """The class's step marks the optimizer called (optim._support); a step set on the optimizer itself is wrapped
    to do so, as PyTorch's schedulers wrap ``optimizer.step``. One set after this is not, and the scheduler's first
    step warns of it (PyTorch's warning)."""
    step = optimizer.__dict__.get("step")
    if step is None or getattr(step, "_wrapped_by_lr_sched", False):
        return
    opt_ref = weakref.ref(optimizer)

    @functools.wraps(step)
    def wrapper(*args, **kwargs):
        opt = opt_ref()
        if opt is not None:
            opt._opt_called = True
        return step(*args, **kwargs)

    wrapper._wrapped_by_lr_sched = True
    optimizer.step = wrapper


def _check_optimizer(optimizer):
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


class LRScheduler:
    _is_initial = False  # True during the step a constructor takes (not a step of the schedule)
    # True while a step computes the lrs: PyTorch's flag, which its state dicts hold (False) once a step ran
    _get_lr_called_within_step = False

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        # from now on the optimizer's step marks itself called, for the first step's check (PyTorch's attribute)
        optimizer.__dict__.setdefault("_opt_called", False)
        _mark_step_calls(optimizer)
        if last_epoch == -1:
            for g in optimizer.param_groups:
                g.setdefault("initial_lr", g["lr"].clone() if isinstance(g["lr"], Tensor) else g["lr"])
        else:
            for i, g in enumerate(optimizer.param_groups):
                if "initial_lr" not in g:
                    raise KeyError(f"{type(self).__name__}: param 'initial_lr' is not specified in "
                                   f"param_groups[{i}] when resuming scheduler with last_epoch >= 0 "
                                   f"(last_epoch={last_epoch}): load the optimizer's state dict first, or start a "
                                   f"fresh run with last_epoch=-1")
        self.base_lrs = _group_values(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self):
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self):
        raise NotImplementedError(f"{type(self).__name__}.get_lr: a scheduler defines get_lr, the lrs of the step "
                                  f"being taken (the LRScheduler base has none)")

    def get_last_lr(self):
        return list(self._last_lr)

    def step(self, epoch=None):
        if epoch is not None and (isinstance(epoch, str) or not isinstance(epoch, (numbers.Real, Tensor))):
            # (PyTorch's: a raw TypeError from the schedule's arithmetic, or a string kept as last_epoch)
            raise TypeError(f"{type(self).__name__}.step: expected a number epoch, got {epoch!r}")
        opt = self.optimizer.__dict__
        if self._step_count == 1 and not getattr(opt.get("step"), "_wrapped_by_lr_sched", "step" not in opt):
            warnings.warn("Seems like `optimizer.step()` has been overridden after learning rate scheduler "
                          "initialization: make sure to call `optimizer.step()` before `lr_scheduler.step()`",
                          UserWarning, stacklevel=2)
        elif self._step_count == 1 and not opt.get("_opt_called", False):
            # the old order (scheduler first) skips the schedule's first lr; PyTorch's warns of it
            warnings.warn("Detected call of `lr_scheduler.step()` before `optimizer.step()`: call `optimizer.step()` "
                          "first (the order since PyTorch 1.1.0), or the first value of the learning rate schedule "
                          "is skipped", UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch=None):
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:  # PyTorch's deprecated form: the closed form at ``epoch`` where there is one
                self.last_epoch = epoch
                closed = getattr(self, "_get_closed_form_lr", None)
                values = closed() if closed is not None else self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        self._set_lrs(values)

    def _set_lrs(self, values):
        """One lr for each of the optimizer's groups; a schedule that keeps one value per group from its
        construction (base_lrs, lr_lambdas) has too few once a group is added, which PyTorch's refuses too."""
        groups = self.optimizer.param_groups
        if len(values) != len(groups):
            raise ValueError(f"{type(self).__name__}.step: the schedule gives {len(values)} lrs, one per parameter "
                             f"group it was built with, but the optimizer has {len(groups)} groups (a group "
                             f"added since needs a new scheduler)")
        for g, lr in zip(groups, values):
            _set_lr(g, lr)
        self._last_lr = _group_values(self.optimizer)

    def state_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict):
        """Every entry is checked against the scheduler's own (known key, a value of the same kind: a number
        for a number, a list of as many numbers for a list) before any is applied. ``_last_lr`` has one lr per
        group of the optimizer as it is now: a group added since this scheduler was built (the stem unfrozen
        into a group of its own before the checkpoint, added again before loading it) counts."""
        what = f"{type(self).__name__}.load_state_dict"
        if not isinstance(state_dict, dict):
            raise TypeError(f"{what}: expected a dict from state_dict(), got {type(state_dict).__name__}")
        unknown = set(state_dict) - set(self.__dict__)
        if unknown:
            raise ValueError(f"{what}: unexpected keys {sorted(unknown, key=str)} (a state dict of another scheduler?)")
        for key, value in state_dict.items():
            _check_like(what, key, value, _group_values(self.optimizer) if key == "_last_lr" else self.__dict__[key])
        self.__dict__.update(state_dict)

    def _lrs(self):
        return _group_values(self.optimizer)


def _is_number(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _check_like(what, key, value, current):
    """``value`` can stand where ``current`` is: a number for a number (epochs may be fractional), a bool
    for a bool, a list of as many numbers for a list of numbers; other kinds (callables' state, counters)
    pass."""
    if isinstance(current, bool):
        ok = isinstance(value, bool)
    elif _is_number(current):
        ok = _is_number(value)
    elif isinstance(current, list) and all(_is_number(v) for v in current):
        ok = isinstance(value, list) and len(value) == len(current) and all(_is_number(v) for v in value)
    else:
        return
    if not ok:
        raise ValueError(f"{what}: {key!r} must be like {current!r}, got {value!r}; nothing was loaded")
