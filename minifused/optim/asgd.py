"""ASGD (weight decay, maximize): PyTorch's formulas on a fused update (``kernels.optim_extra``)."""
from __future__ import annotations

from ..autograd import no_grad
from ..kernels import optim_extra as K
from ._support import _check_hyper, _check_lr, _pytorch_flags
from .optimizer import Optimizer


class ASGD(Optimizer):
    """``torch.optim.ASGD``: SGD with a decaying rate ``eta`` and a running average ``ax`` of the iterates from
    step ``t0`` on. State per parameter, PyTorch's names: ``step`` (a 0-d int64 tensor on the parameter's device,
    advanced by the update; an int in ``state_dict()``), ``eta`` and ``mu`` (0-d float32 tensors, as PyTorch's,
    rewritten on the device by the update), ``ax``, plus ``master`` with ``master_weights``."""

    _supports_amp = True  # step() honours self._amp (GradScaler: unscale, skip on inf/NaN)
    _scalar_states = ("eta", "mu")

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
                 maximize=False, differentiable=False, capturable=False, *, master_weights=False):
        _pytorch_flags(type(self).__name__, foreach, None, capturable, differentiable)
        _check_lr("ASGD", lr)
        _check_hyper("ASGD", "weight_decay", weight_decay, tensor=True)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable,
                                      capturable=capturable), master_weights)

    @staticmethod
    def _hyper_values(g):
        return (g["lr"], g["lambd"], g["alpha"], g["t0"], g["weight_decay"])

    def _state(self, p, lr):
        st = self.state.get(p)
        if not st:  # (eta and mu become device scalars in step, through _scalar_state)
            st = self.state[p] = {"step": 0, "eta": float(lr), "mu": 1.0, "ax": self._new_state(p)}
        return st

    def step(self, closure=None):
        loss = self._closure(closure)
        with no_grad():
            for g, device, ps in self._launches():
                states = [self._state(p, g["lr"]) for p in ps]
                K.asgd([p._data for p in ps], [p.grad._data for p in ps], [s["ax"]._data for s in states],
                       [self._scalar_state(p, s, "eta", g["lr"]) for p, s in zip(ps, states)],
                       [self._scalar_state(p, s, "mu", 1.0) for p, s in zip(ps, states)],
                       [self._step_count(p, s) for p, s in zip(ps, states)], g.hyper(device),
                       maximize=g["maximize"], masters=[self._master(p, s) for p, s in zip(ps, states)],
                       amp=self._amp)
                for p in ps:
                    p._bump("ASGD.step")
        return loss
