"""Adagrad (lr decay, initial accumulator, maximize): PyTorch's formulas on a fused update."""
from __future__ import annotations

from ..autograd import no_grad
from ..kernels import optim_adaptive as K
from ._support import _check_hyper, _check_lr, _pytorch_flags
from .optimizer import Optimizer


class Adagrad(Optimizer):
    """``torch.optim.Adagrad``. State per parameter, PyTorch's names: ``step`` (a 0-d int64 tensor on
    the parameter's device, advanced by the update; an int in ``state_dict()``) and ``sum`` (filled
    with ``initial_accumulator_value``), created by the constructor as PyTorch does, plus ``master``
    with ``master_weights``. The decayed lr ``lr / (1 + (step - 1) * lr_decay)`` is computed on the
    device from the step count, so a captured step stays right."""

    _supports_amp = True

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, master_weights=False, fused=None, capturable=False,
                 differentiable=False):
        _pytorch_flags(type(self).__name__, foreach, fused, capturable, differentiable)
        _check_lr("Adagrad", lr)
        for what, value in (("lr_decay", lr_decay), ("weight_decay", weight_decay),
                            ("initial_accumulator_value", initial_accumulator_value), ("epsilon", eps)):
            _check_hyper("Adagrad", what, value, tensor=what in ("epsilon", "weight_decay"))
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, fused=fused),
                         master_weights)
        for g in self.param_groups:
            for p in g["params"]:
                self._state(p, g)

    @staticmethod
    def _hyper_values(g):
        return (g["lr"], g["lr_decay"], g["weight_decay"], g["eps"])

    def _state(self, p, group):
        st = self.state.get(p)
        if not st:
            st = self.state[p] = {"step": 0}
            self._step_count(p, st)
        if "sum" not in st:  # (PyTorch's: the constructor's value, whatever a group's own says)
            st["sum"] = self._new_state(p, fill=float(self.defaults["initial_accumulator_value"]))
        return st

    def step(self, closure=None):
        loss = self._closure(closure)
        with no_grad():
            for g, device, ps in self._launches():
                states = [self._state(p, g) for p in ps]
                K.adagrad([p._data for p in ps], [p.grad._data for p in ps], [s["sum"]._data for s in states],
                          [self._step_count(p, s) for p, s in zip(ps, states)], g.hyper(device),
                          maximize=g["maximize"], masters=[self._master(p, s) for p, s in zip(ps, states)],
                          amp=self._amp)
                for p in ps:
                    p._bump("Adagrad.step")
        return loss
