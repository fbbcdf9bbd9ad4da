"""``Optimizer``: parameter groups, per-parameter state, and state dicts in PyTorch's layout.

``state_dict()`` returns ``{"state": {index: {name: value}}, "param_groups": [{hyper..., "params":
[index, ...]}]}`` where parameters are numbered in group order, as in PyTorch, so a
checkpoint does not depend on object identities. Tensors in it share memory with
the live state; ``minifused.save`` writes it as is.
"""
from __future__ import annotations

import copy
import numbers

from .. import backend
from ..tensor import Tensor


class _ParamState(dict):
    """``optimizer.state[param]`` -> that parameter's state dict, keyed by the parameter's identity
    (a Tensor's ``==`` is elementwise, so tensors cannot be plain dict keys)."""

    def __init__(self):
        super().__init__()
        self._params = {}

    def __getitem__(self, p):
        return super().__getitem__(id(p))

    def __setitem__(self, p, value):
        self._params[id(p)] = p
        super().__setitem__(id(p), value)

    def __contains__(self, p):
        return super().__contains__(id(p))

    def get(self, p, default=None):
        return super().get(id(p), default)

    def pop(self, p, *default):
        self._params.pop(id(p), None)
        return super().pop(id(p), *default)

    def clear(self):
        self._params.clear()
        super().clear()

    def params(self):
        return list(self._params.values())


def _check_hyper(opt, what, value, upper=None):
    """``value`` a real number in [0, upper) (any upper bound when None); NaN is rejected."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and 0.0 <= value
    if not ok or (upper is not None and not value < upper):
        bound = f"in [0, {upper})" if upper is not None else ">= 0"
        raise ValueError(f"{opt}: invalid {what} {value!r} (expected a number {bound})")


class Optimizer:
    """Base class: subclasses define ``defaults`` through ``__init__`` and implement ``step``."""

    def __init__(self, params, defaults: dict):
        self.defaults = dict(defaults)
        self.state = _ParamState()
        self.param_groups = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors "
                            "or dicts, but got a Tensor")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, group: dict):
        if not isinstance(group, dict) or "params" not in group:
            raise TypeError(f"{type(self).__name__}: a parameter group must be a dict with a 'params' entry, "
                            f"got {sorted(group) if isinstance(group, dict) else type(group).__name__}")
        group = dict(group)
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"{type(self).__name__} can only optimize Tensors, got {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError(f"{type(self).__name__}: can't optimize a non-leaf Tensor")
            if not backend.is_floating(p.dtype):
                raise TypeError(f"{type(self).__name__}: can only optimize floating-point tensors, got {p.dtype}")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params) or len({id(p) for p in params}) != len(params):
            raise ValueError("some parameters appear in more than one parameter group")
        group["params"] = params
        for k, v in self.defaults.items():
            group.setdefault(k, v)
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True):
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.data.fill(0)

    def step(self, closure=None):
        raise NotImplementedError

    def _closure(self, closure):
        if closure is None:
            return None
        from ..autograd import enable_grad

        with enable_grad():
            return closure()

    # ------------------------------------------------------------ state dicts
    def state_dict(self) -> dict:
        index, groups, n = {}, [], 0
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            packed["params"] = list(range(n, n + len(g["params"])))
            for p in g["params"]:
                index[id(p)] = n
                n += 1
            groups.append(packed)
        state = {index[pid]: dict(s) for pid, s in dict.items(self.state) if pid in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict):
        """Restore hyper-parameters and state; tensors are copied to each parameter's device and
        (floating state) dtype. Group count and sizes must match."""
        if not isinstance(state_dict, dict) or "state" not in state_dict or "param_groups" not in state_dict:
            raise ValueError(f"{type(self).__name__}.load_state_dict: expected a dict with 'state' and "
                             f"'param_groups' (from Optimizer.state_dict()), got "
                             f"{sorted(state_dict) if isinstance(state_dict, dict) else type(state_dict).__name__}")
        saved = state_dict["param_groups"]
        if len(saved) != len(self.param_groups):
            raise ValueError(f"{type(self).__name__}.load_state_dict: the state dict has {len(saved)} parameter "
                             f"groups, the optimizer {len(self.param_groups)}")
        for i, (sg, g) in enumerate(zip(saved, self.param_groups)):
            foreign = sorted(set(sg) - set(g))
            if foreign:  # e.g. an SGD state dict given to Adam: its step would fail on missing state
                raise ValueError(f"{type(self).__name__}.load_state_dict: group {i} of the state dict has "
                                 f"hyper-parameters {foreign} that {type(self).__name__} does not use (a state "
                                 f"dict of another optimizer?)")
            if len(sg["params"]) != len(g["params"]):
                raise ValueError(f"{type(self).__name__}.load_state_dict: group {i} has {len(sg['params'])} "
                                 f"parameters in the state dict, {len(g['params'])} in the optimizer")
        by_index = {}
        for sg, g in zip(saved, self.param_groups):
            for idx, p in zip(sg["params"], g["params"]):
                by_index[idx] = p
        new_state = {}
        for idx, s in state_dict["state"].items():
            idx = int(idx)
            if idx not in by_index:
                raise ValueError(f"{type(self).__name__}.load_state_dict: state for parameter {idx}, "
                                 f"which no group lists")
            p = by_index[idx]
            entry = {}
            for k, v in s.items():
                if isinstance(v, Tensor):
                    if k != "step" and v.shape != p.shape and v.data.ndim != 0:
                        raise ValueError(f"{type(self).__name__}.load_state_dict: state '{k}' of parameter "
                                         f"{idx} has shape {tuple(v.shape)}, the parameter {tuple(p.shape)}")
                    arr = backend.to_device(v.data, p.device)
                    if backend.is_floating(arr.dtype) and arr.ndim != 0:
                        arr = arr.astype(p.dtype, copy=False)
                    v = Tensor._from_array(arr.copy() if arr is v.data else arr)
                entry[k] = v
            new_state[idx] = entry
        self.state.clear()
        for idx, entry in new_state.items():
            self.state[by_index[idx]] = entry
        for sg, g in zip(saved, self.param_groups):
            for k, v in sg.items():
                if k != "params":
                    g[k] = tuple(v) if isinstance(v, list) and k == "betas" else copy.deepcopy(v)

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(g):
                if k != "params":
                    lines.append(f"    {k}: {g[k]}")
        return "\n".join(lines) + "\n)"


def _params_with_grad(group):
    return [p for p in group["params"] if p.grad is not None]
