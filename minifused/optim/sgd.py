"""SGD with momentum, dampening, Nesterov momentum and weight decay (PyTorch's formulas)."""
from __future__ import annotations

from .. import backend
from ..autograd import no_grad
from ..kernels import optim as K
from ..tensor import Tensor
from .optimizer import Optimizer, _check_hyper, _params_with_grad


class SGD(Optimizer):
    """``torch.optim.SGD``: one fused multi-tensor launch per group (and dtype) on the GPU.

    State per parameter: ``momentum_buffer`` (when ``momentum != 0``).
    """

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, *,
                 maximize=False):
        _check_hyper("SGD", "learning rate", lr)
        _check_hyper("SGD", "momentum", momentum)
        _check_hyper("SGD", "weight_decay", weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov, maximize=maximize))

    def step(self, closure=None):
        loss = self._closure(closure)
        with no_grad():
            for g in self.param_groups:
                params = _params_with_grad(g)
                if not params:
                    continue
                bufs, init = [], []
                for p in params:
                    st = self.state.get(p)
                    if st is None:
                        st = self.state[p] = {}
                    if g["momentum"] != 0:
                        buf = st.get("momentum_buffer")
                        if buf is None:
                            with backend.on_device(p.device):
                                buf = Tensor._from_array(p._xp.empty_like(p.data))
                            st["momentum_buffer"] = buf
                            init.append(True)
                        else:
                            init.append(False)
                        bufs.append(buf.data)
                    else:
                        st.setdefault("momentum_buffer", None)
                        bufs.append(p.data)
                        init.append(False)
                K.sgd([p.data for p in params], [p.grad.data for p in params], bufs, init, lr=g["lr"],
                      momentum=g["momentum"], dampening=g["dampening"], weight_decay=g["weight_decay"],
                      nesterov=g["nesterov"], maximize=g["maximize"])
                for p in params:
                    p._vc[0] += 1
        return loss

    def state_dict(self):
        sd = super().state_dict()
        # a None buffer (momentum 0) is not state worth saving
        sd["state"] = {i: {k: v for k, v in s.items() if v is not None} for i, s in sd["state"].items()}
        return sd
