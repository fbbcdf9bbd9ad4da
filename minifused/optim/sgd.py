"""SGD with momentum, dampening, Nesterov momentum and weight decay (PyTorch's formulas)."""
from __future__ import annotations

from ..autograd import no_grad
from ..kernels import optim as K
from ._support import _check_hyper, _check_lr, _pytorch_flags
from .optimizer import Optimizer


class SGD(Optimizer):
    """``torch.optim.SGD``: one fused multi-tensor launch per group (and dtype) on the GPU.

    State per parameter: ``momentum_buffer`` (when ``momentum != 0``) and, with
    ``master_weights`` (float16/bfloat16 parameters), ``master``: the fp32 weights the update runs on.
    """

    _supports_amp = True  # step() honours self._amp (GradScaler: unscale, skip on inf/NaN)

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, master_weights=False, foreach=None, fused=None, capturable=False,
                 differentiable=False):
        _pytorch_flags(type(self).__name__, foreach, fused, capturable, differentiable)
        _check_lr("SGD", lr)
        _check_hyper("SGD", "momentum", momentum)
        _check_hyper("SGD", "weight_decay", weight_decay, tensor=True)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                                      foreach=foreach, differentiable=differentiable, fused=fused),
                         master_weights)

    @staticmethod
    def _hyper_values(g):
        return (g["lr"], g["momentum"], g["dampening"], g["weight_decay"])

    @staticmethod
    def _flags(g):
        return (g["momentum"] != 0, g["nesterov"], g["maximize"])

    def step(self, closure=None):
        loss = self._closure(closure)
        with no_grad():
            if self._replay("SGD.step"):
                return loss
            replay, complete = K.Replay(), True
            for g, device, ps in self._launches():
                bufs, init, masters = [], [], []
                for p in ps:
                    st = self.state.get(p)
                    if st is None:  # stored only once it holds something (PyTorch's plain SGD keeps no state)
                        st = {}
                    masters.append(self._master(p, st))
                    if g["momentum"] != 0:
                        buf = st.get("momentum_buffer")
                        init.append(buf is None)
                        if buf is None:  # set from the first step's update
                            buf = st["momentum_buffer"] = self._new_state(p)
                        bufs.append(buf._data)
                    else:
                        bufs.append(p._data if masters[-1] is None else masters[-1])
                        init.append(False)
                    if st and p not in self.state:
                        self.state[p] = st
                K.sgd([p._data for p in ps], [p.grad._data for p in ps], bufs, init, g.hyper(device),
                      nesterov=g["nesterov"], maximize=g["maximize"], masters=masters, amp=self._amp,
                      record=(replay, ps))
                complete = complete and not any(init)  # (a first step's launches set the buffers: not again)
                for p in ps:
                    p._bump("SGD.step")
            self._record(replay, complete)
        return loss

    def state_dict(self):
        sd = super().state_dict()
        # a None buffer (momentum 0) is not state worth saving; a parameter left with none has no entry (PyTorch's)
        kept = ((i, {k: v for k, v in s.items() if v is not None}) for i, s in sd["state"].items())
        sd["state"] = {i: s for i, s in kept if s}
        return sd
