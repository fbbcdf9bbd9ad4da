"""``Optimizer``: parameter groups, per-parameter state, and state dicts in PyTorch's layout.

``state_dict()`` returns ``{"state": {index: {name: value}}, "param_groups": [{hyper..., "params":
[index, ...]}]}`` where parameters are numbered in group order, as in PyTorch, so a
checkpoint does not depend on object identities. Tensors in it share memory with
the live state; ``minifused.save`` writes it as is. Step counts are saved as 0-d float32 tensors, as
PyTorch saves them (copies of the int64 counters the kernels keep).
``load_state_dict`` checks every entry against its parameter (shape, a floating dtype, a step
count) and each group's hyper-parameters (as a step checks them) before it changes anything, and
copies floating state to the parameter's device and state dtype, as PyTorch casts it. ``step``
checks every gradient before its first launch, so a step that fails leaves weights and state as
they were.

CUDA graphs: everything a fused update reads that changes between steps lives in
device memory (the step counts, a per-group array of the float hyper-parameters
that setting ``group["lr"]`` etc. rewrites), so a step captured by
``minifused.capture_step`` replays with the current lr (schedulers work) and the
right bias corrections. State is created on the first, eager step (Adagrad's, as PyTorch's, by
its constructor).

``master_weights=True`` (every optimizer here): float16 / bfloat16 parameters are
updated through fp32 master copies kept in the state (``"master"``, with fp32
momentum / moment state); the parameter receives the rounded result. This is the
mixed-precision recipe of ``minifused.amp``.
"""
from __future__ import annotations

import collections.abc
import copy
import functools
import inspect
import numbers
import operator
from typing import Any, NamedTuple, Union

import numpy as np

from .. import backend
from ..kernels import c_contiguous, empty_like_layout, layout_like
from ..tensor import Tensor
from ._support import (_GLOBAL_STEP_HOOKS, _PYTORCH_SWITCHES, _by_device, _Group, _Handle, _ParamState,
                       _pytorch_flags, _refuse_in_capture, _with_state_dict_hooks, _with_step_hooks)

_LOW_PRECISION = (backend.float16, backend.bfloat16)
_PAIRS = ("betas", "etas", "step_sizes")  # hyper-parameters kept as tuples, as PyTorch's (a loaded list converted)


def _hyper_parameter_names():
    """The hyper-parameters of every optimizer class defined so far: their constructors' keywords, which name
    their groups' entries (as PyTorch's do)."""
    names, todo = set(), [Optimizer]
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        names.update(name for name, p in inspect.signature(cls.__init__).parameters.items()
                     if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))
    return names - {"self", "params", "defaults"}


class _Recorded(NamedTuple):
    """A step's launches (``replay``) and what they read, as lists over every group's parameters in order, to be
    compared with the next step's by identity: each group (its flags, hyper-parameter arrays and size), the
    parameters, their arrays, which have no gradient; for those with one, its layout (shape, dtype, strides,
    device), the state dict, its keys, values and the values' arrays; ``order[j]``: the index in ``with_grad`` of
    the replay's parameter j."""
    replay: object
    groups: list
    params: list
    datas: list
    gradless: list
    with_grad: list
    layouts: list
    states: list
    keys: list
    values: list
    tensors: list
    arrays: list
    order: list


_global_hook_ids = iter(range(1, 1 << 62))


def register_optimizer_step_pre_hook(hook):
    """``hook(optimizer, args, kwargs)`` before every optimizer's step (before its own pre-hooks); it may return
    ``(new_args, new_kwargs)``. Returns a handle whose ``remove()`` unregisters it."""
    key = next(_global_hook_ids)
    _GLOBAL_STEP_HOOKS["pre"][key] = hook
    return _Handle(_GLOBAL_STEP_HOOKS["pre"], key)


def register_optimizer_step_post_hook(hook):
    """``hook(optimizer, args, kwargs)`` after every optimizer's step (after its own post-hooks)."""
    key = next(_global_hook_ids)
    _GLOBAL_STEP_HOOKS["post"][key] = hook
    return _Handle(_GLOBAL_STEP_HOOKS["post"], key)


class _RequiredParameter:
    """The default of a hyper-parameter that every group must give: a custom optimizer's ``lr=required`` (PyTorch's
    ``torch.optim.optimizer.required``, which optimizers written for older PyTorch import)."""

    def __repr__(self):
        return "<required parameter>"

    def __deepcopy__(self, memo):  # (the one sentinel, also in a copied optimizer's defaults)
        return self

    def __reduce__(self):
        return "required"


required = _RequiredParameter()

# PyTorch's type aliases, which optimizers written for it annotate with (``params: ParamsT``)
ParamsT = Union[collections.abc.Iterable[Tensor], collections.abc.Iterable[dict[str, Any]],
                collections.abc.Iterable[tuple[str, Tensor]]]
StateDict = dict[str, Any]


def _use_grad_for_differentiable(func):
    """PyTorch's decorator of a step that optimizers written for it copy: ``func`` runs with grad mode set to the
    optimizer's ``differentiable`` default (off unless it has one that is True), the previous mode restored."""
    @functools.wraps(func)
    def _use_grad(self, *args, **kwargs):
        from ..autograd import set_grad_enabled

        with set_grad_enabled(bool(self.defaults.get("differentiable", False))):
            return func(self, *args, **kwargs)
    return _use_grad


def _get_value(x):
    """PyTorch's helper: a tensor's number (``x.item()``), anything else as it is."""
    return x.item() if isinstance(x, Tensor) else x


class Optimizer:
    """Base class: subclasses define ``defaults`` through ``__init__`` and implement ``step`` (which runs the
    registered step hooks around it)."""

    #: state entries that are one number per parameter besides ``step`` (kept as 0-d float32 tensors on the
    #: parameter's device: :meth:`_scalar_state`)
    _scalar_states = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_with_step_hooks", False):
            cls.step = _with_step_hooks(step)
        for name in ("state_dict", "load_state_dict"):
            method = cls.__dict__.get(name)
            if method is not None and not getattr(method, "_with_state_dict_hooks", False):
                setattr(cls, name, _with_state_dict_hooks(method))

    def _register_step_hook(self, kind, hook):
        hooks = self.__dict__.setdefault("_step_hooks", {"pre": {}, "post": {}, "next": 0})
        hooks["next"] += 1
        hooks[kind][hooks["next"]] = hook
        return _Handle(hooks[kind], hooks["next"])

    def register_step_pre_hook(self, hook):
        """``hook(optimizer, args, kwargs)`` before each ``step``; it may return ``(new_args, new_kwargs)``."""
        return self._register_step_hook("pre", hook)

    def register_step_post_hook(self, hook):
        """``hook(optimizer, args, kwargs)`` after each ``step``."""
        return self._register_step_hook("post", hook)

    def _register_state_hook(self, kind, hook, prepend):
        hooks = self.__dict__.setdefault("_state_hooks", {"save_pre": {}, "save_post": {}, "load_pre": {},
                                                          "load_post": {}, "next": 0})
        hooks["next"] += 1
        table = hooks[kind]
        if prepend:
            items = list(table.items())
            table.clear()
            table.update([(hooks["next"], hook)] + items)
        else:
            table[hooks["next"]] = hook
        return _Handle(table, hooks["next"])

    def register_state_dict_pre_hook(self, hook, prepend=False):
        """``hook(optimizer)`` before each ``state_dict``."""
        return self._register_state_hook("save_pre", hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        """``hook(optimizer, state_dict)`` after each ``state_dict``; a dict it returns is the result."""
        return self._register_state_hook("save_post", hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        """``hook(optimizer, state_dict)`` before each ``load_state_dict``; a dict it returns is loaded instead."""
        return self._register_state_hook("load_pre", hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        """``hook(optimizer)`` after each ``load_state_dict``."""
        return self._register_state_hook("load_post", hook, prepend)

    def __init__(self, params, defaults: dict, master_weights: bool = False):
        self.defaults = dict(defaults)
        self.master_weights = bool(master_weights)
        self._amp = None  # a GradScaler's state array while GradScaler.step runs this optimizer
        self.state = _ParamState()
        self.param_groups = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors "
                            "or dicts, but got a Tensor")
        try:
            groups = list(params)
        except TypeError:  # (None, a number: PyTorch's raw "object is not iterable")
            raise TypeError(f"{type(self).__name__}: params argument given to the optimizer should be an iterable of "
                            f"Tensors or dicts, but got {type(params).__name__}") from None
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, group: dict):
        if not isinstance(group, dict) or "params" not in group:  # (a dict without it: PyTorch's KeyError)
            raise (KeyError if isinstance(group, dict) else TypeError)(
                f"{type(self).__name__}: a parameter group must be a dict with a 'params' entry, "
                f"got {sorted(group) if isinstance(group, dict) else type(group).__name__}")
        group = _Group(group, type(self)._hyper_values)
        params = group["params"]
        if isinstance(params, set):
            raise TypeError(f"{type(self).__name__}: optimizer parameters need to be organized in ordered "
                            f"collections, but the ordering of tensors in sets will change between runs; use a list")
        params = [params] if isinstance(params, Tensor) else list(params)
        # (name, tensor) pairs, as named_parameters() gives: the names kept in the group as PyTorch keeps them
        names = [p[0] for p in params if isinstance(p, tuple) and len(p) == 2 and isinstance(p[1], Tensor)]
        if names:
            if len(names) != len(params):
                raise ValueError(f"{type(self).__name__}: all optimizer params should be with/without names. Some "
                                 f"param names are missing")
            params = [p[1] for p in params]
            group["param_names"] = names
        if self.param_groups and ("param_names" in group) != ("param_names" in self.param_groups[0]):
            raise ValueError(f"{type(self).__name__}: all optimizer param groups should be with/without names. "
                             f"cannot add param group {'with' if names else 'without'} names to the optimizer")
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"{type(self).__name__} can only optimize Tensors, got {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError(f"{type(self).__name__}: can't optimize a non-leaf Tensor")
            if not backend.is_floating(p.dtype):
                raise TypeError(f"{type(self).__name__}: can only optimize floating-point tensors, got {p.dtype}")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        if len({id(p) for p in params}) != len(params):  # (PyTorch warns and steps such a parameter twice)
            raise ValueError(f"{type(self).__name__}: a parameter group lists the same parameter more than once")
        group["params"] = params
        for k, v in self.defaults.items():
            if v is required and k not in group:
                raise ValueError(f"{type(self).__name__}: parameter group didn't specify a value of required "
                                 f"optimization parameter {k}")
            group.setdefault(k, v)
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True):
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:  # (a gradient built by backward(create_graph=True) leaves its graph first, as PyTorch's)
                    p.grad.detach_()
                    p.grad._data.fill(0)
                    p.grad._sparse_rows = None  # (zeroed, a sparse gradient holds no rows: see SparseAdam)

    def step(self, closure=None):
        raise NotImplementedError

    @staticmethod
    def _hyper_values(group):
        """The group's float hyper-parameters in the fused kernel's order (subclasses)."""
        return ()

    # ------------------------------------------------------------ a step's launches, recorded and replayed
    # A fused step (SGD, Adam) spends most of its host time finding, per parameter, the arrays its launches
    # read; from one step to the next only the gradients move. So a step records its launches (kernels.optim's
    # Replay) and the next one replays them with its gradients, after checking, per parameter, that nothing
    # else moved: the parameters with gradients, the parameters' and their state's arrays, each gradient's
    # shape, dtype, layout and device, each group's flags and hyper-parameter arrays. Anything else (a new
    # gradient layout, state loaded or created, a GradScaler step, a CPU parameter) takes the full step, which
    # records again.

    @staticmethod
    def _flags(group):
        """The group's entries that choose kernels or state rather than values of its hyper-parameter array."""
        return ()

    def __getstate__(self):  # copies and pickles leave the recorded launches behind
        d = dict(self.__dict__)
        d.pop("_recorded", None)
        return d

    def __setstate__(self, state):  # (custom optimizers written for PyTorch override it and call it first)
        self.__dict__.update(state)

    def _record(self, replay, complete):
        """Keep ``replay``, the launches of the step that just ran, if ``complete`` (they hold nothing that only
        this step wanted) and they cover every parameter with a gradient."""
        self.__dict__.pop("_recorded", None)
        if not complete or self._amp is not None:
            return
        if not all(isinstance(g, _Group) for g in self.param_groups):  # (a dict put in param_groups by hand)
            return
        params = [p for g in self.param_groups for p in g["params"]]
        with_grad = [p for p in params if p._grad is not None]
        at = {id(p): j for j, p in enumerate(replay.params)}
        # (None: a parameter that keeps no state, as plain SGD's; a replay then checks that it still keeps none)
        states = [dict.get(self.state, id(p)) for p in with_grad]
        if (len(at) != len(with_grad) or any(id(p) not in at for p in with_grad)
                or not all(backend.is_cuda_array(p._grad._data) for p in with_grad)):
            return
        items = [kv for st in states if st is not None for kv in st.items()]
        values = [v for _, v in items]
        tensors = [v for v in values if isinstance(v, Tensor)]
        self._recorded = _Recorded(
            replay, [(g, self._flags(g), dict(g._dev), len(g["params"])) for g in self.param_groups], params,
            [p._data for p in params], [p._grad is None for p in params], with_grad,
            [(p._grad._data.shape, p._grad._data.dtype, p._data.strides, p._grad._data.data.device_id)
             for p in with_grad],
            states, [k for k, _ in items], values, tensors, [t._data for t in tensors],
            sorted(range(len(with_grad)), key=lambda i: at[id(with_grad[i])]))

    def _replay(self, name):
        """The recorded launches issued with this step's gradients, the parameters bumped as ``name``, if nothing
        else they read has moved; returns whether they ran. (Every step asks: the checks run over whole lists at
        once, objects compared by identity, not parameter by parameter.)"""
        rec = self.__dict__.get("_recorded")
        if rec is None or self._amp is not None:
            return False
        if len(rec.groups) != len(self.param_groups):
            return False
        for g, (group, flags, hyper, size) in zip(self.param_groups, rec.groups):
            if (g is not group or len(g["params"]) != size or self._flags(g) != flags
                    or any(g._dev.get(i) is not a for i, a in hyper.items())):
                return False
        params = [p for g in self.param_groups for p in g["params"]]
        if (not all(map(operator.is_, params, rec.params))
                or not all(map(operator.is_, [p._data for p in params], rec.datas))
                or [p._grad is None for p in params] != rec.gradless):
            return False
        try:  # (a NumPy gradient has no device)
            arrays = [p._grad._data for p in rec.with_grad]
            if [(a.shape, a.dtype, a.strides, a.data.device_id) for a in arrays] != rec.layouts:
                return False
        except AttributeError:
            return False
        states = [dict.get(self.state, id(p)) for p in rec.with_grad]
        if not all(map(operator.is_, states, rec.states)):
            return False
        items = [kv for st in states if st is not None for kv in st.items()]
        if (len(items) != len(rec.values) or not all(map(operator.is_, [v for _, v in items], rec.values))
                or [k for k, _ in items] != rec.keys
                or not all(map(operator.is_, [t._data for t in rec.tensors], rec.arrays))):
            return False
        for g in self.param_groups:  # (tensor hyper-parameters' values, read on the device as a full step reads them)
            g.refresh()
        rec.replay([arrays[i] for i in rec.order])
        for p in rec.replay.params:
            p._bump(name)
        return True

    # ------------------------------------------------------------ per-parameter state helpers
    def _state_dtype(self, p):
        """dtype of p's floating state: fp32 for a low-precision parameter with master weights."""
        d = p._data.dtype
        return backend.float32 if self.master_weights and d in _LOW_PRECISION else d

    def _new_state(self, p, like=None, fill=0.0):
        """A state tensor of p's shape and state dtype filled with ``fill`` (a copy of ``like`` when
        given)."""
        _refuse_in_capture(f"{type(self).__name__}: creating parameter state")
        with backend.on_device(p.device):
            # in p's layout (channels-last or C order): the fused kernels walk p and its state in memory order
            out = empty_like_layout(p._data, self._state_dtype(p))
            if like is not None:
                out[...] = like
            else:
                out.fill(fill)
            return Tensor._from_array(out)

    def _launches(self):
        """(group, device, params) for each group and device of the parameters that have gradients,
        once every gradient and every group's hyper-parameters have been checked: a step that fails changes
        nothing (a learning rate set to a string in the last group fails before the first group moves)."""
        self._check_grads()
        # (a plain dict put in param_groups by hand, as PyTorch's allow, is read through a group made of its entries
        # for this step: its user may go on changing it)
        groups = [g if isinstance(g, _Group) else _Group(g, type(self)._hyper_values) for g in self.param_groups]
        for g in groups:
            g._values()
        for g in groups:
            params = _params_with_grad(g)
            self._follow_layouts(params)
            for device, idx in _by_device(params):
                yield g, device, [params[i] for i in idx]

    def _follow_layouts(self, params):
        """State created before its parameter changed layout (``Module.to(memory_format=...)``) takes the new
        one: the fused kernels walk a parameter and its state in memory order."""
        for p in params:
            st = self.state.get(p) if p._data.ndim == 4 else None
            if st:
                contiguous = c_contiguous(p._data)
                for t in st.values():
                    if isinstance(t, Tensor) and t.shape == p.shape and c_contiguous(t._data) != contiguous:
                        t._data = layout_like(t._data, p._data)

    def _check_grads(self):
        """Every gradient fits its parameter (shape, dtype, device), checked before any launch. The
        ``grad`` setter checks this too; this catches gradients whose data was replaced since."""
        n = 0
        for g in self.param_groups:
            for p in g["params"]:
                gr = p._grad
                if gr is not None and (gr._data.shape != p._data.shape or gr._data.dtype != p._data.dtype
                                       or not backend.same_device(gr._data, p._data)):
                    raise RuntimeError(f"{type(self).__name__}.step: the gradient of parameter {n} has shape "
                                       f"{tuple(gr.shape)}, dtype {gr.dtype} on {gr.device}; the parameter "
                                       f"{tuple(p.shape)}, {p.dtype} on {p.device}")
                n += 1

    def _master(self, p, st):
        """p's fp32 master weights (created from p on first use), or None without master weights."""
        if self._state_dtype(p) == p._data.dtype:
            return None
        if "master" not in st:
            st["master"] = self._new_state(p, like=p._data)
        return st["master"]._data

    def _scalar_state(self, p, st, key, initial):
        """``st[key]``, a number of state per parameter (NAdam's ``mu_product``), as a 0-d float32 array on p's
        device, the kernels' to read and rewrite (``initial`` on first use; numbers and one-element tensors from
        a state dict converted)."""
        v = st.get(key, initial)
        if not (isinstance(v, Tensor) and v.device == p.device and v._data.dtype == backend.float32 and v.ndim == 0):
            _refuse_in_capture(f"{type(self).__name__}: creating parameter state")
            value = float(v.item()) if isinstance(v, Tensor) else float(v)
            with backend.on_device(p.device):
                v = st[key] = Tensor._from_array(p._xp.full((), value, np.float32))
        return v._data

    @staticmethod
    def _step_count(p, st):
        """``st["step"]`` as a 0-d int64 array on p's device (ints from a state dict are converted)."""
        t = st.get("step", 0)
        if not (isinstance(t, Tensor) and t.device == p.device and t._data.dtype == backend.int64):
            _refuse_in_capture("converting an optimizer step count to a device counter")
            value = int(t.item()) if isinstance(t, Tensor) else int(t)
            with backend.on_device(p.device):
                t = st["step"] = Tensor._from_array(p._xp.full((), value, np.int64))
        return t._data

    def _closure(self, closure):
        if closure is None:
            return None
        if not callable(closure):  # (optimizer.step(loss): PyTorch's raw "'Tensor' object is not callable")
            raise TypeError(f"{type(self).__name__}.step: closure must be a function that reevaluates the model and "
                            f"returns the loss, got {type(closure).__name__}")
        from ..autograd import enable_grad

        with enable_grad():
            return closure()

    # ------------------------------------------------------------ state dicts
    @_with_state_dict_hooks
    def state_dict(self) -> dict:
        index, groups, n = {}, [], 0
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            packed["params"] = list(range(n, n + len(g["params"])))
            for p in g["params"]:
                index[id(p)] = n
                n += 1
            groups.append(packed)
        state = {}
        for key, s in self.state.items():
            if isinstance(key, Tensor):  # (a custom optimizer's own keys are kept as they are, as PyTorch's)
                if id(key) not in index:
                    continue
                key = index[id(key)]
                s = {k: _saved_step(v) if k == "step" else v for k, v in s.items()}
            state[key] = s
        return {"state": state, "param_groups": groups}

    @_with_state_dict_hooks
    def load_state_dict(self, state_dict: dict):
        """Restore hyper-parameters and state; tensors are copied to each parameter's device and
        (floating state) dtype. Group count and sizes must match."""
        if not isinstance(state_dict, dict) or "state" not in state_dict or "param_groups" not in state_dict:
            raise ValueError(f"{type(self).__name__}.load_state_dict: expected a dict with 'state' and "
                             f"'param_groups' (from Optimizer.state_dict()), got "
                             f"{sorted(state_dict) if isinstance(state_dict, dict) else type(state_dict).__name__}")
        saved, states = state_dict["param_groups"], state_dict["state"]
        # the layout itself (a checkpoint of another kind, hand-edited or truncated): checked before anything is read,
        # where PyTorch's fails with a raw KeyError / TypeError / AttributeError
        if not isinstance(saved, (list, tuple)) or not all(
                isinstance(sg, dict) and isinstance(sg.get("params"), (list, tuple)) for sg in saved):
            raise ValueError(f"{type(self).__name__}.load_state_dict: expected 'param_groups' to be a list of dicts "
                             f"with a 'params' list of parameter indices, got {_short(saved)}")
        if not isinstance(states, dict):
            raise ValueError(f"{type(self).__name__}.load_state_dict: expected 'state' to be a dict of parameter "
                             f"indices to their state, got {_short(states)}")
        if len(saved) != len(self.param_groups):
            raise ValueError(f"{type(self).__name__}.load_state_dict: the state dict has {len(saved)} parameter "
                             f"groups, the optimizer {len(self.param_groups)}")
        name = f"{type(self).__name__}.load_state_dict"
        for i, (sg, g) in enumerate(zip(saved, self.param_groups)):
            # PyTorch's implementation switches are checked as the constructor's (they change nothing here, but
            # are loaded into the groups, as PyTorch's)
            _pytorch_flags(name, sg.get("foreach"), sg.get("fused"), bool(sg.get("capturable", False)),
                           bool(sg.get("differentiable", False)))
            # keys of the group's own (a scheduler's initial_lr or max_lr, a user's name) load as PyTorch's do;
            # another optimizer's hyper-parameters do not: an SGD state dict given to Adam would fail at its step
            foreign = sorted((set(sg) - set(g) - set(_PYTORCH_SWITCHES)) & _hyper_parameter_names())
            if foreign:
                raise ValueError(f"{type(self).__name__}.load_state_dict: group {i} of the state dict has "
                                 f"hyper-parameters {foreign} that {type(self).__name__} does not use (a state "
                                 f"dict of another optimizer?)")
            if len(sg["params"]) != len(g["params"]):
                raise ValueError(f"{type(self).__name__}.load_state_dict: group {i} has {len(sg['params'])} "
                                 f"parameters in the state dict, {len(g['params'])} in the optimizer")
        # each group's entries as they will be, its hyper-parameters checked as a step checks them: one loaded as a
        # string would fail every step (PyTorch's loads it so), and setting it on a group mirrored on a GPU would fail
        # halfway through the load
        entries = [{k: tuple(v) if isinstance(v, list) and k in _PAIRS else copy.deepcopy(v)
                    for k, v in sg.items() if k != "params"} for sg in saved]
        for i, (new, g) in enumerate(zip(entries, self.param_groups)):
            try:
                _Group({**g, **new}, type(self)._hyper_values)._values()
            except TypeError as e:
                raise TypeError(f"{name}: group {i} of the state dict would fail every step ({e})") from None
        by_index = {}
        for sg, g in zip(saved, self.param_groups):
            for idx, p in zip(sg["params"], g["params"]):
                by_index[idx] = p
        new_state, own = {}, []
        for idx, s in states.items():
            try:
                idx = int(idx)
            except (TypeError, ValueError):  # a custom optimizer's own key, no parameter's index: kept as it is
                own.append((idx, s))
                continue
            if idx not in by_index:
                raise ValueError(f"{type(self).__name__}.load_state_dict: state for parameter {idx}, "
                                 f"which no group lists")
            if not isinstance(s, dict):
                raise ValueError(f"{type(self).__name__}.load_state_dict: the state of parameter {idx} is a "
                                 f"{type(s).__name__}, expected a dict of names to values")
            p = by_index[idx]
            new_state[idx] = {k: self._loaded_value(idx, p, k, v) for k, v in s.items()}
        self.state.clear()
        for idx, entry in new_state.items():
            self.state[by_index[idx]] = entry
        self.state.update(own)
        for new, g in zip(entries, self.param_groups):
            for k, v in new.items():
                g[k] = v

    def _loaded_value(self, idx, p, key, v):
        """One state entry of parameter ``idx`` as it will be kept, checked against the parameter:
        tensors (arrays) of floating state are copied to p's device and cast to its state dtype, as
        PyTorch casts them; ``step`` (a number or one-element tensor) keeps its type."""
        where = f"{type(self).__name__}.load_state_dict: state '{key}' of parameter {idx}"
        if isinstance(v, np.ndarray) or backend.is_cuda_array(v):
            v = Tensor._from_array(v)
        if key == "step" or key in self._scalar_states:
            if isinstance(v, Tensor) and v.numel() == 1 and not v.dtype == np.bool_:
                return Tensor._from_array(backend.to_device(v._data, p.device).reshape(()).copy())
            if isinstance(v, numbers.Real) and not isinstance(v, bool):
                return v
            what = "a step count" if key == "step" else "a number"
            raise ValueError(f"{where} is {v!r}; expected {what} (a number or a one-element tensor)")
        if not isinstance(v, Tensor):
            return copy.deepcopy(v)
        # (an InputError: PyTorch loads such state and its step raises a RuntimeError; this is both)
        if tuple(v.shape) != tuple(p.shape):
            raise backend.InputError(f"{where} has shape {tuple(v.shape)}, the parameter {tuple(p.shape)}")
        if not backend.is_floating(v.dtype):
            raise backend.InputError(f"{where} has dtype {v.dtype}; expected a floating dtype (the parameter is "
                                     f"{p.dtype})")
        with backend.on_device(p.device):
            arr = empty_like_layout(p._data, self._state_dtype(p))  # a copy in p's layout
            arr[...] = backend.to_device(v._data, p.device).astype(arr.dtype, copy=False)
        return Tensor._from_array(arr)

    def __repr__(self):
        """PyTorch's layout: each group's entries sorted, a blank line between groups."""
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            if i:
                lines.append("")
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {g[k]}" for k in sorted(k for k in g if k != "params")]
        return "\n".join(lines) + "\n)"


def _short(v, limit=80):
    """``repr(v)`` cut to ``limit`` characters, for an error message about a state dict's entry."""
    text = repr(v)
    return text if len(text) <= limit else text[:limit] + "..."


def _saved_step(v):
    """A step count as a state dict holds it: a counter tensor as a 0-d float32 tensor, as PyTorch's (on the
    parameter's device; a copy of the int64 counter the kernels read); a number as it is (a custom optimizer's
    int, or one loaded and not stepped since), as PyTorch keeps it."""
    return Tensor._from_array(v._data.astype(np.float32)) if isinstance(v, Tensor) else v


def _params_with_grad(group):
    return [p for p in group["params"] if p._grad is not None]
