"""L-BFGS (``torch.optim.LBFGS``): quasi-Newton steps from a limited history of updates, on one flat view of all
parameters, with an optional strong Wolfe line search (``_line_search``)."""
from __future__ import annotations

import numbers

import numpy as np

from .. import backend
from ..autograd import no_grad
from ..kernels import acc_dtype
from ..tensor import Tensor
from ._line_search import strong_wolfe
from ._support import _check_lr
from .optimizer import Optimizer


def _unwrap(v):
    """A state entry as the step computes with it: arrays for Tensors (lists element by element)."""
    if isinstance(v, list):
        return [_unwrap(x) for x in v]
    return v._data if isinstance(v, Tensor) else v


def _wrap(v):
    """A state entry as ``state`` keeps it: Tensors for arrays and 0-d results (PyTorch keeps tensors there)."""
    if isinstance(v, list):
        return [_wrap(x) for x in v]
    if isinstance(v, np.generic) or isinstance(v, np.ndarray) or backend.is_cuda_array(v):
        return Tensor._from_array(backend.array_module(v).asarray(v))
    return v


class LBFGS(Optimizer):
    """``torch.optim.LBFGS``: ``step(closure)`` runs up to ``max_iter`` iterations (``max_eval`` evaluations of
    the closure), each along the two-loop recursion's direction from the last ``history_size`` updates, with a
    fixed step ``lr`` (the first scaled by the gradient's size) or a strong Wolfe line search. One parameter
    group, parameters of one device. State, PyTorch's names, on the first parameter: ``func_evals``, ``n_iter``,
    ``d``, ``t``, ``old_dirs``, ``old_stps``, ``ro``, ``H_diag``, ``prev_flat_grad``, ``prev_loss``, ``al``
    (flat vectors and 0-d tensors of the parameters' dtype, floats where PyTorch has floats)."""

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None, *, maximize=False):
        _check_lr("LBFGS", lr)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change, history_size=history_size,
                                      line_search_fn=line_search_fn, maximize=maximize))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    # ------------------------------------------------------------ the parameters as one flat vector
    def _flat_grad(self, maximize):
        """The gradients, concatenated (zeros for a parameter without one), negated for ``maximize``."""
        xp = self._params[0]._xp
        flat = xp.concatenate([p._grad._data.reshape(-1) if p._grad is not None
                               else xp.zeros(p._data.size, p._data.dtype) for p in self._params])
        return -flat if maximize else flat

    def _add_grad(self, t, d):
        """p += t * d's slice of p, each parameter in its opmath (``p.add_(d, alpha=t)``)."""
        offset = 0
        for p in self._params:
            a = p._data
            alpha = backend.array_module(a).asarray(t, dtype=acc_dtype(a.dtype))  # (no host read of a device t)
            a[...] = a + alpha * d[offset:offset + a.size].reshape(a.shape)
            offset += a.size
            p._bump("LBFGS.step")

    def _set_params(self, saved):
        for p, x in zip(self._params, saved):
            p._data[...] = x
            p._bump("LBFGS.step")

    def _evaluate(self, closure, maximize):
        """The closure's loss (a float, negated for ``maximize``) and the flat gradient it leaves."""
        loss = float(self._closure(closure))
        return (-loss if maximize else loss), self._flat_grad(maximize)

    # ------------------------------------------------------------ the step
    def step(self, closure=None):
        """Up to ``max_iter`` L-BFGS iterations; ``closure()`` reevaluates the model and returns the loss.
        Returns the loss of the first evaluation."""
        if closure is None:
            raise TypeError("LBFGS.step requires a closure that reevaluates the model and returns the loss")
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        if not self._params:
            return self._closure(closure)
        group = self.param_groups[0]
        if group["line_search_fn"] not in (None, "strong_wolfe"):
            raise RuntimeError(f"LBFGS: only 'strong_wolfe' is supported as line_search_fn, got "
                               f"{group['line_search_fn']!r}")
        p0 = self._params[0]
        state = self.state.get(p0)
        if state is None:
            state = self.state[p0] = {}
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        with no_grad(), backend.on_device(p0.device):
            orig_loss = self._closure(closure)
            loss = float(orig_loss)
            loss = -loss if group["maximize"] else loss
            state["func_evals"] += 1
            flat_grad = self._flat_grad(group["maximize"])
            if abs(flat_grad).max() <= group["tolerance_grad"]:  # already optimal
                return orig_loss
            mem = {k: _unwrap(state.get(k)) for k in ("d", "t", "old_dirs", "old_stps", "ro", "H_diag",
                                                      "prev_flat_grad", "prev_loss", "al")}
            self._iterate(closure, group, state, mem, loss, flat_grad)
            for k, v in mem.items():
                if k != "al" or v is not None:  # ("al" exists once a direction came from the history)
                    state[k] = _wrap(v)
        return orig_loss

    def _iterate(self, closure, group, state, mem, loss, flat_grad):
        """The iterations of one step: ``mem`` holds (and receives) the state as arrays and floats."""
        lr, max_iter, max_eval = float(group["lr"]), group["max_iter"], group["max_eval"]  # (a tensor lr read)
        tolerance_change, maximize = group["tolerance_change"], group["maximize"]
        current_evals, n_iter = 1, 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                mem.update(d=-flat_grad, old_dirs=[], old_stps=[], ro=[], H_diag=1)
            else:
                self._direction(mem, flat_grad, group["history_size"])
            d = mem["d"]
            if mem["prev_flat_grad"] is None:
                mem["prev_flat_grad"] = backend.copy(flat_grad)
            else:
                mem["prev_flat_grad"][...] = flat_grad
            mem["prev_loss"] = loss
            # the first step ever is scaled down by the gradient's size: no curvature is known yet
            t = mem["t"] = min(1.0, 1.0 / abs(flat_grad).sum()) * lr if state["n_iter"] == 1 else lr
            gtd = flat_grad.dot(d)
            if gtd > -tolerance_change:  # not a descent direction (any more)
                break
            evals = 0
            if group["line_search_fn"] is not None:
                x0 = [backend.copy(p._data) for p in self._params]

                def along(x, step, direction):
                    self._add_grad(step, direction)
                    out = self._evaluate(closure, maximize)
                    self._set_params(x)
                    return out

                loss, flat_grad, t, evals = strong_wolfe(along, x0, t, d, loss, flat_grad, gtd,
                                                         max_ls=max_eval - current_evals)
                mem["t"] = t
                self._add_grad(t, d)
                optimal = abs(flat_grad).max() <= group["tolerance_grad"]
            else:
                self._add_grad(t, d)
                optimal = False
                if n_iter != max_iter:  # (the last iteration's loss and gradient are not needed)
                    loss, flat_grad = self._evaluate(closure, maximize)
                    optimal = abs(flat_grad).max() <= group["tolerance_grad"]
                    evals = 1
            current_evals += evals
            state["func_evals"] += evals
            if (n_iter == max_iter or current_evals >= max_eval or optimal
                    or abs(d * t).max() <= tolerance_change or abs(loss - mem["prev_loss"]) < tolerance_change):
                break

    @staticmethod
    def _direction(mem, flat_grad, history_size):
        """The history updated with the last step (when its curvature ``y.s`` is positive) and the new direction
        ``mem["d"]`` from the two-loop recursion: the inverse Hessian estimate applied to -flat_grad."""
        y = flat_grad - mem["prev_flat_grad"]
        s = mem["d"] * mem["t"]
        ys = y.dot(s)
        dirs, stps, ro = mem["old_dirs"], mem["old_stps"], mem["ro"]
        if ys > 1e-10:
            if len(dirs) == history_size:
                del dirs[0], stps[0], ro[0]
            dirs.append(y)
            stps.append(s)
            ro.append(1.0 / ys)
            mem["H_diag"] = ys / y.dot(y)
        if mem["al"] is None:
            mem["al"] = [None] * history_size
        al = mem["al"]
        q = -flat_grad
        for i in range(len(dirs) - 1, -1, -1):
            al[i] = stps[i].dot(q) * ro[i]
            q -= al[i] * dirs[i]  # q.add_(old_dirs[i], alpha=-al[i])
        r = q * mem["H_diag"]
        for i in range(len(dirs)):
            be_i = dirs[i].dot(r) * ro[i]
            r += (al[i] - be_i) * stps[i]
        mem["d"] = r

    # ------------------------------------------------------------ state dicts
    def _loaded_value(self, idx, p, key, v):
        """A state entry from a state dict: tensors and arrays (in lists too) copied to the parameters' device
        and dtype, flat ones of the parameters' total size; numbers (and None) kept."""
        where = f"LBFGS.load_state_dict: state '{key}' of parameter {idx}"
        if isinstance(v, (list, tuple)):
            return [self._loaded_value(idx, p, key, x) for x in v]
        if isinstance(v, np.ndarray) or backend.is_cuda_array(v):
            v = Tensor._from_array(v)
        if isinstance(v, Tensor):
            numel = sum(q.numel() for q in self._params)
            if not backend.is_floating(v.dtype) or v.ndim > 1 or (v.ndim == 1 and v.numel() != numel):
                raise ValueError(f"{where} is a {v.dtype} tensor of shape {tuple(v.shape)}; expected a 0-d or "
                                 f"flat ({numel},) floating tensor")
            with backend.on_device(p.device):
                return Tensor._from_array(backend.to_device(v._data, p.device).astype(p.dtype, copy=True))
        if v is None or (isinstance(v, numbers.Real) and not isinstance(v, bool)):
            return v
        raise ValueError(f"{where} is {v!r}; expected a tensor, a list of tensors or a number")
