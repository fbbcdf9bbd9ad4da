"""Rprop (maximize): PyTorch's formulas on a fused update (``kernels.optim_extra``)."""
from __future__ import annotations

import numbers

from ..autograd import no_grad
from ..kernels import optim_extra as K
from ._support import _check_lr, _pytorch_flags, group_pair
from .optimizer import Optimizer


class Rprop(Optimizer):
    """``torch.optim.Rprop``: each element's step size grows by ``etas[1]`` while its gradient keeps its sign and
    shrinks by ``etas[0]`` when it flips (that step then skipped), within ``step_sizes``; the parameter moves by
    its step size against the gradient's sign. State per parameter, PyTorch's names: ``step`` (a 0-d int64
    tensor on the parameter's device, advanced by the update; an int in ``state_dict()``), ``prev`` (the last
    gradient used), ``step_size`` (``lr`` at first), plus ``master`` with ``master_weights``."""

    _supports_amp = True  # step() honours self._amp (GradScaler: unscale, skip on inf/NaN)

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False, foreach=None,
                 maximize=False, differentiable=False, master_weights=False):
        _pytorch_flags(type(self).__name__, foreach, None, capturable, differentiable)
        _check_lr("Rprop", lr)
        if not (isinstance(etas, (tuple, list)) and len(etas) == 2
                and all(isinstance(e, numbers.Real) and not isinstance(e, bool) for e in etas)
                and 0.0 < etas[0] < 1.0 < etas[1]):
            raise ValueError(f"Rprop: invalid eta values {etas!r}; expected (etaminus, etaplus) with "
                             f"0 < etaminus < 1 < etaplus")
        if not (isinstance(step_sizes, (tuple, list)) and len(step_sizes) == 2
                and all(isinstance(s, numbers.Real) and not isinstance(s, bool) for s in step_sizes)):
            raise ValueError(f"Rprop: invalid step_sizes {step_sizes!r}; expected a pair (min, max) of numbers")
        super().__init__(params, dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes), foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, capturable=capturable),
                         master_weights)

    @staticmethod
    def _hyper_values(g):
        return (g["lr"], *group_pair(g, "etas"), *group_pair(g, "step_sizes"))

    def _state(self, p, lr):
        st = self.state.get(p)
        if not st:
            st = self.state[p] = {"step": 0, "prev": self._new_state(p),
                                  "step_size": self._new_state(p, fill=float(lr))}
        return st

    def step(self, closure=None):
        loss = self._closure(closure)
        with no_grad():
            for g, device, ps in self._launches():
                states = [self._state(p, g["lr"]) for p in ps]
                K.rprop([p._data for p in ps], [p.grad._data for p in ps], [s["prev"]._data for s in states],
                        [s["step_size"]._data for s in states], [self._step_count(p, s) for p, s in zip(ps, states)],
                        g.hyper(device), maximize=g["maximize"],
                        masters=[self._master(p, s) for p, s in zip(ps, states)], amp=self._amp)
                for p in ps:
                    p._bump("Rprop.step")
        return loss
