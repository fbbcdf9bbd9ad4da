"""Adamax, NAdam and RAdam (weight decay, maximize; NAdam and RAdam also decoupled weight decay): PyTorch's
formulas on fused updates (``kernels.optim_adaptive``)."""
from __future__ import annotations

from ..autograd import no_grad
from ..kernels import optim_adaptive as K
from ._support import _check_hyper, _pytorch_flags, group_pair
from .adam import check_adam_hyper
from .optimizer import Optimizer


class _AdamVariant(Optimizer):
    """Arguments and state shared by the three: ``betas``, ``eps``, ``weight_decay``, ``maximize``; state per
    parameter, PyTorch's names: ``step`` (a 0-d int64 tensor on the parameter's device, advanced by the update;
    an int in ``state_dict()``), the moments of :attr:`_moments`, plus ``master`` with ``master_weights``."""

    _supports_amp = True  # step() honours self._amp (GradScaler: unscale, skip on inf/NaN)
    _moments = ("exp_avg", "exp_avg_sq")

    def __init__(self, params, lr, betas, eps, weight_decay, foreach, maximize, capturable, differentiable,
                 master_weights, **more):
        _pytorch_flags(type(self).__name__, foreach, None, capturable, differentiable)
        check_adam_hyper(type(self).__name__, lr, betas, eps, weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable, **more), master_weights)

    @staticmethod
    def _hyper_values(g):
        return (g["lr"], *group_pair(g, "betas"), g["eps"], g["weight_decay"])

    def _state(self, p):
        st = self.state.get(p)
        if not st:
            st = self.state[p] = {"step": 0, **{k: self._new_state(p) for k in self._moments}}
        return st

    def step(self, closure=None):
        loss = self._closure(closure)
        name = f"{type(self).__name__}.step"
        with no_grad():
            for g, device, ps in self._launches():
                states = [self._state(p) for p in ps]
                self._update(g, device, ps, states)
                for p in ps:
                    p._bump(name)
        return loss

    def _arrays(self, ps, states):
        """(params, grads, *moments) arrays, then the step counts and masters."""
        moments = [[s[k]._data for s in states] for k in self._moments]
        return ([p._data for p in ps], [p.grad._data for p in ps], *moments), dict(
            steps=[self._step_count(p, s) for p, s in zip(ps, states)],
            masters=[self._master(p, s) for p, s in zip(ps, states)])


class Adamax(_AdamVariant):
    """``torch.optim.Adamax``: Adam with the infinity norm, ``exp_inf`` in place of ``exp_avg_sq``."""

    _moments = ("exp_avg", "exp_inf")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False, master_weights=False):
        super().__init__(params, lr, betas, eps, weight_decay, foreach, maximize, capturable, differentiable,
                         master_weights)

    def _update(self, g, device, ps, states):
        arrays, rest = self._arrays(ps, states)
        K.adamax(*arrays, rest["steps"], g.hyper(device), maximize=g["maximize"], masters=rest["masters"],
                 amp=self._amp)


class NAdam(_AdamVariant):
    """``torch.optim.NAdam``: Adam with Nesterov momentum, its coefficients decayed by ``momentum_decay``; state
    ``mu_product`` besides the moments (the running product of those coefficients, a 0-d float32 tensor)."""

    _scalar_states = ("mu_product",)

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, master_weights=False):
        _check_hyper("NAdam", "momentum_decay", momentum_decay)
        super().__init__(params, lr, betas, eps, weight_decay, foreach, maximize, capturable, differentiable,
                         master_weights, momentum_decay=momentum_decay,
                         decoupled_weight_decay=bool(decoupled_weight_decay))

    @staticmethod
    def _hyper_values(g):
        return (*_AdamVariant._hyper_values(g), g["momentum_decay"])

    def _update(self, g, device, ps, states):
        arrays, rest = self._arrays(ps, states)
        mu = [self._scalar_state(p, s, "mu_product", 1.0) for p, s in zip(ps, states)]
        K.nadam(*arrays, mu, rest["steps"], g.hyper(device), decoupled=g["decoupled_weight_decay"],
                maximize=g["maximize"], masters=rest["masters"], amp=self._amp)


class RAdam(_AdamVariant):
    """``torch.optim.RAdam``: Adam whose adaptive step is rectified by the variance of its estimate, and taken
    as SGD with momentum while that is intractable (the first steps)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
                 *, foreach=None, maximize=False, capturable=False, differentiable=False, master_weights=False):
        super().__init__(params, lr, betas, eps, weight_decay, foreach, maximize, capturable, differentiable,
                         master_weights, decoupled_weight_decay=bool(decoupled_weight_decay))

    def _update(self, g, device, ps, states):
        arrays, rest = self._arrays(ps, states)
        K.radam(*arrays, rest["steps"], g.hyper(device), decoupled=g["decoupled_weight_decay"],
                maximize=g["maximize"], masters=rest["masters"], amp=self._amp)
