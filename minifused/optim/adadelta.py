"""Adadelta (weight decay, maximize): PyTorch's formulas on a fused update."""
from __future__ import annotations

from ..autograd import no_grad
from ..kernels import optim_adaptive as K
from ._support import _check_hyper, _check_lr, _pytorch_flags
from .optimizer import Optimizer


class Adadelta(Optimizer):
    """``torch.optim.Adadelta``. State per parameter, PyTorch's names: ``step`` (a 0-d int64 tensor
    on the parameter's device, advanced by the update; an int in ``state_dict()``), ``square_avg``,
    ``acc_delta``, plus ``master`` with ``master_weights``."""

    _supports_amp = True

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, maximize=False,
                 master_weights=False, fused=None, capturable=False, differentiable=False):
        _pytorch_flags(type(self).__name__, foreach, fused, capturable, differentiable)
        _check_lr("Adadelta", lr)
        _check_hyper("Adadelta", "rho", rho, upper=1.0, closed=True)
        _check_hyper("Adadelta", "epsilon", eps, tensor=True)
        _check_hyper("Adadelta", "weight_decay", weight_decay, tensor=True)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                                      capturable=capturable, foreach=foreach, differentiable=differentiable),
                         master_weights)

    @staticmethod
    def _hyper_values(g):
        return (g["lr"], g["rho"], g["eps"], g["weight_decay"])

    def _state(self, p):
        st = self.state.get(p)
        if not st:
            st = self.state[p] = {"step": 0, "square_avg": self._new_state(p), "acc_delta": self._new_state(p)}
        return st

    def step(self, closure=None):
        loss = self._closure(closure)
        with no_grad():
            for g, device, ps in self._launches():
                states = [self._state(p) for p in ps]
                K.adadelta([p._data for p in ps], [p.grad._data for p in ps], [s["square_avg"]._data for s in states],
                           [s["acc_delta"]._data for s in states],
                           [self._step_count(p, s) for p, s in zip(ps, states)], g.hyper(device),
                           maximize=g["maximize"], masters=[self._master(p, s) for p, s in zip(ps, states)],
                           amp=self._amp)
                for p in ps:
                    p._bump("Adadelta.step")
        return loss
