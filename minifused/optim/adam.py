"""Adam and AdamW (bias correction, amsgrad, maximize), PyTorch's formulas, fused updates."""
from __future__ import annotations

from ..autograd import no_grad
from ..kernels import optim as K
from ._support import _check_hyper, _check_lr, _pytorch_flags, group_pair
from .optimizer import Optimizer


def check_adam_hyper(name, lr, betas, eps, weight_decay):
    """The arguments the Adam family shares, checked as PyTorch checks them."""
    _check_lr(name, lr)
    _check_hyper(name, "epsilon", eps, tensor=True)
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:  # (no sequence at all: PyTorch's TypeError)
        raise (ValueError if isinstance(betas, (tuple, list)) else TypeError)(
            f"{name}: betas must be a pair (beta1, beta2), got {betas!r}")
    for i, b in enumerate(betas):
        _check_hyper(name, f"beta parameter at index {i}", b, upper=1.0, tensor=True)
    _check_hyper(name, "weight_decay", weight_decay, tensor=True)


class Adam(Optimizer):
    """``torch.optim.Adam``: L2 weight decay added to the gradient, or with ``decoupled_weight_decay`` the
    parameter shrunk by ``1 - lr * weight_decay`` (AdamW's update; a hyper-parameter of each group, as PyTorch's).

    State per parameter, PyTorch's names: ``step`` (a 0-d int64 tensor on the parameter's
    device, advanced by the update itself; an int in ``state_dict()``), ``exp_avg``,
    ``exp_avg_sq``, with ``amsgrad`` ``max_exp_avg_sq``, and with ``master_weights`` (for
    float16/bfloat16 parameters) ``master``, the fp32 weights the update runs on. On the GPU
    one multi-tensor launch updates up to 16 parameters of a group (one dtype) at once.
    """

    _supports_amp = True  # step() honours self._amp (GradScaler: unscale, skip on inf/NaN)
    _step_name = "Adam.step"  # names the step in the in-place error of a backward it breaks

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 maximize=False, master_weights=False, foreach=None, fused=None, capturable=False,
                 differentiable=False, decoupled_weight_decay=False):
        _pytorch_flags(type(self).__name__, foreach, fused, capturable, differentiable)
        check_adam_hyper(type(self).__name__, lr, betas, eps, weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable, fused=fused,
                                      decoupled_weight_decay=bool(decoupled_weight_decay)), master_weights)

    @staticmethod
    def _hyper_values(g):
        return (g["lr"], *group_pair(g, "betas"), g["eps"], g["weight_decay"])

    @staticmethod
    def _flags(g):
        return (g["amsgrad"], g["maximize"], g["decoupled_weight_decay"])

    def _state(self, p, amsgrad):
        st = self.state.get(p)
        if st is None or not st:
            st = {"step": 0, "exp_avg": self._new_state(p), "exp_avg_sq": self._new_state(p)}  # (PyTorch's order)
            self.state[p] = st
        if amsgrad and "max_exp_avg_sq" not in st:
            st["max_exp_avg_sq"] = self._new_state(p)
        return st

    def step(self, closure=None):
        loss = self._closure(closure)
        with no_grad():
            if self._replay(self._step_name):
                return loss
            replay = K.Replay()
            for g, device, ps in self._launches():
                amsgrad = g["amsgrad"]
                states = [self._state(p, amsgrad) for p in ps]
                K.adam([p._data for p in ps], [p.grad._data for p in ps],
                       [s["exp_avg"]._data for s in states], [s["exp_avg_sq"]._data for s in states],
                       [s["max_exp_avg_sq"]._data for s in states] if amsgrad else None,
                       [self._step_count(p, s) for p, s in zip(ps, states)], g.hyper(device),
                       amsgrad=amsgrad, decoupled=g["decoupled_weight_decay"], maximize=g["maximize"],
                       masters=[self._master(p, s) for p, s in zip(ps, states)], amp=self._amp,
                       record=(replay, ps))
                for p in ps:
                    p._bump(self._step_name)
            self._record(replay, True)
        return loss


class AdamW(Adam):
    """``torch.optim.AdamW``: decoupled weight decay ``p *= 1 - lr * weight_decay`` (default 0.01)."""

    _step_name = "AdamW.step"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, master_weights=False, foreach=None, fused=None, capturable=False,
                 differentiable=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize, foreach=foreach,
                         fused=fused, capturable=capturable, differentiable=differentiable,
                         master_weights=master_weights, decoupled_weight_decay=True)
