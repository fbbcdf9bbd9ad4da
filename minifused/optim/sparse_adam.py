"""SparseAdam (the lazy Adam of sparse embeddings): PyTorch's formulas on array operations (NumPy or CuPy)."""
from __future__ import annotations

import math
import numbers

from .. import backend
from ..autograd import no_grad
from ..kernels import acc_dtype
from ._support import _check_lr
from .optimizer import Optimizer


class SparseAdam(Optimizer):
    """``torch.optim.SparseAdam``: Adam on the rows a sparse gradient holds (an ``nn.Embedding(sparse=True)``'s:
    the rows the batch looked up but the padding row), the other rows and their moments left as they are; the bias
    corrections count every step. minifused's gradients are dense: the backward of a sparse lookup records the rows
    it looked up beside the ``.grad`` (from every backward into it since it was made or zeroed, as PyTorch's sparse
    gradients add up), so a looked-up row whose gradient is exactly zero is updated too (its moments decay, it
    moves), as PyTorch's. The rows a step takes are those recorded and those whose gradient is not all zero: a
    ``.grad`` assigned by hand, or one whose lookup was not of the leaf itself (a weight computed from it, a
    checkpointed lookup, ``backward(create_graph=True)``), holds no record, and its rows are its nonzero ones
    (PyTorch refuses a dense gradient there; minifused's gradients are all dense).

    State per parameter, PyTorch's names: ``step`` (an int), ``exp_avg``, ``exp_avg_sq``. The update runs on array
    operations one parameter at a time; the hyper-parameters are read from the group at each step."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        _check_lr("SparseAdam", lr)
        if not float(lr) > 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not eps > 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not (isinstance(betas, (tuple, list)) and len(betas) == 2):
            raise ValueError(f"SparseAdam: betas must be a pair of numbers, got {betas!r}")
        for i, beta in enumerate(betas):
            if isinstance(beta, bool) or not isinstance(beta, numbers.Real) or not 0.0 <= beta < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, maximize=maximize), False)

    def add_param_group(self, group: dict):
        super().add_param_group(group)
        for p in self.param_groups[-1]["params"]:
            if p.ndim == 0 or not backend.is_floating(p.dtype):
                self.param_groups.pop()
                raise ValueError(f"SparseAdam: a parameter must be a floating tensor of rows (at least 1-D), got "
                                 f"shape {tuple(p.shape)} and dtype {p.dtype}")

    def _state(self, p):
        st = self.state[p]
        if "exp_avg" not in st:
            st.update(step=0, exp_avg=self._new_state(p), exp_avg_sq=self._new_state(p))
        return st

    def step(self, closure=None):
        loss = self._closure(closure)
        with no_grad():
            for g, _, ps in self._launches():
                for p in ps:
                    st = self._state(p)
                    st["step"] = int(st["step"]) + 1
                    self._update(p, st, g)
                    p._bump("SparseAdam.step")
        return loss

    @staticmethod
    def _update(p, st, group):
        """One parameter's step, PyTorch's ``sparse_adam`` on the gradient's rows (recorded or nonzero): every row
        computed, the others' old values kept (no host synchronization to find the rows)."""
        acc = acc_dtype(p.dtype)
        grad = p._grad._data.astype(acc, copy=False)
        grad = -grad if group["maximize"] else grad
        xp = backend.array_module(grad)
        rows = (grad != 0).reshape(grad.shape[0], -1).any(axis=1)
        recorded = getattr(p._grad, "_sparse_rows", None)
        if recorded is not None and recorded.shape == rows.shape and backend.array_module(recorded) is xp:
            rows = rows | recorded
        rows = rows.reshape((-1,) + (1,) * (grad.ndim - 1))
        beta1, beta2 = (float(b) for b in group["betas"])
        exp_avg, exp_avg_sq = st["exp_avg"]._data, st["exp_avg_sq"]._data
        old_avg, old_sq = exp_avg.astype(acc, copy=False), exp_avg_sq.astype(acc, copy=False)
        avg_update = (grad - old_avg) * acc.type(1 - beta1)
        sq_update = (grad * grad - old_sq) * acc.type(1 - beta2)
        numer = avg_update + old_avg
        denom = xp.sqrt(sq_update + old_sq) + acc.type(group["eps"])
        step = st["step"]
        step_size = float(group["lr"]) * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
        w = p._data.astype(acc, copy=False)
        p._data[...] = xp.where(rows, w + acc.type(-step_size) * (numer / denom), w)
        exp_avg[...] = xp.where(rows, numer, old_avg)
        exp_avg_sq[...] = xp.where(rows, sq_update + old_sq, old_sq)
