"""Adam and AdamW (bias correction, amsgrad, maximize), PyTorch's formulas, fused updates."""
from __future__ import annotations

from .. import backend
from ..autograd import no_grad
from ..kernels import optim as K
from ..tensor import Tensor
from .optimizer import Optimizer, _check_hyper, _params_with_grad


class Adam(Optimizer):
    """``torch.optim.Adam``: L2 weight decay added to the gradient.

    State per parameter, PyTorch's names: ``step`` (int), ``exp_avg``, ``exp_avg_sq`` and, with
    ``amsgrad``, ``max_exp_avg_sq``. On the GPU one multi-tensor launch updates up to 16
    parameters of a group (one dtype) at once.
    """

    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, *,
                 maximize=False):
        name = type(self).__name__
        _check_hyper(name, "learning rate", lr)
        _check_hyper(name, "epsilon", eps)
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"{name}: betas must be a pair (beta1, beta2), got {betas!r}")
        for i, b in enumerate(betas):
            _check_hyper(name, f"beta parameter at index {i}", b, upper=1.0)
        _check_hyper(name, "weight_decay", weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize))

    def _state(self, p, amsgrad):
        st = self.state.get(p)
        if st is None or not st:
            xp = p._xp
            with backend.on_device(p.device):
                st = {"step": 0, "exp_avg": Tensor._from_array(xp.zeros_like(p.data)),
                      "exp_avg_sq": Tensor._from_array(xp.zeros_like(p.data))}
                if amsgrad:
                    st["max_exp_avg_sq"] = Tensor._from_array(xp.zeros_like(p.data))
            self.state[p] = st
        elif amsgrad and "max_exp_avg_sq" not in st:
            with backend.on_device(p.device):
                st["max_exp_avg_sq"] = Tensor._from_array(p._xp.zeros_like(p.data))
        return st

    def step(self, closure=None):
        loss = self._closure(closure)
        with no_grad():
            for g in self.param_groups:
                params = _params_with_grad(g)
                if not params:
                    continue
                amsgrad = g["amsgrad"]
                states = [self._state(p, amsgrad) for p in params]
                for st in states:
                    st["step"] = int(st["step"]) + 1
                beta1, beta2 = g["betas"]
                K.adam([p.data for p in params], [p.grad.data for p in params],
                       [s["exp_avg"].data for s in states], [s["exp_avg_sq"].data for s in states],
                       [s["max_exp_avg_sq"].data for s in states] if amsgrad else None,
                       [s["step"] for s in states], lr=g["lr"], beta1=beta1, beta2=beta2, eps=g["eps"],
                       weight_decay=g["weight_decay"], amsgrad=amsgrad, decoupled=self._decoupled,
                       maximize=g["maximize"])
                for p in params:
                    p._vc[0] += 1
        return loss


class AdamW(Adam):
    """``torch.optim.AdamW``: decoupled weight decay ``p *= 1 - lr * weight_decay`` (default 0.01)."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)
