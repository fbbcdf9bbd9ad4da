"""RMSprop (centered, momentum, maximize): PyTorch's formulas on a fused update."""
from __future__ import annotations

from ..autograd import no_grad
from ..kernels import optim_adaptive as K
from ._support import _check_hyper, _check_lr, _pytorch_flags
from .optimizer import Optimizer


class RMSprop(Optimizer):
    """``torch.optim.RMSprop``. State per parameter, PyTorch's names: ``step`` (a 0-d int64 tensor
    on the parameter's device, advanced by the update; an int in ``state_dict()``), ``square_avg``,
    ``momentum_buffer`` (when ``momentum > 0``), ``grad_avg`` (when ``centered``), and with
    ``master_weights`` (float16/bfloat16 parameters) ``master``. On the GPU one multi-tensor launch
    updates up to 16 parameters of a group (one dtype); everything a step reads that changes between
    steps lives on the device, so a captured step follows lr changes. Whether momentum is used
    (``momentum > 0``) is decided when a step is launched, so a graph captured with momentum 0
    keeps ignoring it."""

    _supports_amp = True  # step() honours self._amp (GradScaler: unscale, skip on inf/NaN)

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False, *, master_weights=False,
                 fused=None):
        _pytorch_flags(type(self).__name__, foreach, fused, capturable, differentiable)
        _check_lr("RMSprop", lr)
        for what, value in (("epsilon", eps), ("momentum", momentum),
                            ("weight_decay", weight_decay), ("alpha", alpha)):
            _check_hyper("RMSprop", what, value, tensor=what in ("epsilon", "weight_decay"))
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                                      centered=centered, capturable=capturable, foreach=foreach, maximize=maximize,
                                      differentiable=differentiable), master_weights)

    @staticmethod
    def _hyper_values(g):
        return (g["lr"], g["alpha"], g["eps"], g["weight_decay"], g["momentum"])

    def _state(self, p, centered, use_momentum):
        st = self.state.get(p)
        if not st:
            st = self.state[p] = {"step": 0, "square_avg": self._new_state(p)}
        if use_momentum and "momentum_buffer" not in st:
            st["momentum_buffer"] = self._new_state(p)
        if centered and "grad_avg" not in st:
            st["grad_avg"] = self._new_state(p)
        return st

    def step(self, closure=None):
        loss = self._closure(closure)
        with no_grad():
            for g, device, ps in self._launches():
                centered, use_momentum = bool(g["centered"]), g["momentum"] > 0
                states = [self._state(p, centered, use_momentum) for p in ps]
                K.rmsprop([p._data for p in ps], [p.grad._data for p in ps], [s["square_avg"]._data for s in states],
                          [s["grad_avg"]._data for s in states] if centered else None,
                          [s["momentum_buffer"]._data for s in states] if use_momentum else None,
                          [self._step_count(p, s) for p, s in zip(ps, states)], g.hyper(device),
                          centered=centered, use_momentum=use_momentum, maximize=g["maximize"],
                          masters=[self._master(p, s) for p, s in zip(ps, states)], amp=self._amp)
                for p in ps:
                    p._bump("RMSprop.step")
        return loss
