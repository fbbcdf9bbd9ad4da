"""Pieces of :class:`~minifused.optim.optimizer.Optimizer`: the parameter-group dict with its device mirror of the
hyper-parameters, the per-parameter state dict, the argument checks every optimizer shares (PyTorch's
implementation switches, hyper-parameter bounds) and the step hooks."""
from __future__ import annotations

import collections.abc
import functools
import numbers

import numpy as np

from .. import backend
from ..kernels import optim as K
from ..nn.module import pre_hook_arguments
from ..tensor import Tensor


_MISSING = object()


class _Group(dict):
    """A parameter group: a dict, as in PyTorch. On CUDA its float hyper-parameters are mirrored,
    in the fused kernel's order, in a small float64 array per device that the kernel reads; setting
    one of them (a scheduler, the user) rewrites that array on the stream, so a step replayed from a
    CUDA graph uses the value of the moment it runs. A hyper-parameter may also be a one-element tensor (PyTorch
    takes a Tensor lr): each step then copies its value into the array on the device (:meth:`refresh`, issued
    with the step's launches and captured with them), so changing it in place (a scheduler's ``fill_``) takes
    effect at the next step, replayed or not, with no read on the host."""

    def __init__(self, group=(), pack=None):
        super().__init__(group)
        self._pack = pack  # group -> tuple of floats in the kernel's order (None: nothing mirrored)
        self._dev = {}  # CUDA device index -> float64 array
        self._mirrored = None
        self._tensors = ()  # (position in the packed values, one-element tensor) of the tensor hyper-parameters

    def __reduce__(self):  # copies and pickles leave the device mirror behind (made again on use)
        return _Group, (dict(self), self._pack)

    def __setitem__(self, key, value):
        old = self.get(key, _MISSING)
        super().__setitem__(key, value)
        if self._dev:
            try:
                self._write()
            except TypeError:  # (not a number: the group left as it was, its device mirror too)
                if old is _MISSING:
                    super().__delitem__(key)
                else:
                    super().__setitem__(key, old)
                raise

    def _values(self):
        """The packed hyper-parameters, each checked to be a real number or a one-element real tensor: one set
        to None or a string after construction (a group is a plain dict to its user) raises a TypeError naming
        it, as PyTorch's step does, rather than step with NaN or a parsed string."""
        values = self._pack(self)
        for v in values:
            if type(v) is not float and not isinstance(v, numbers.Real) and not is_scalar_tensor(v):
                key = next((k for k, w in self.items() if w is v or (type(w) is tuple and any(x is v for x in w))),
                           "a hyper-parameter")
                raise TypeError(f"optimizer step: group entry {key!r} must be a number or a one-element tensor, "
                                f"got {v!r}")
        return values

    def _write(self):
        values = self._values()
        # a tensor is compared by identity (its value is the device's to read) and written by refresh
        key = tuple(("tensor", id(v)) if isinstance(v, Tensor) else v for v in values)
        if key == self._mirrored:
            return
        if backend.is_capturing():
            raise RuntimeError(f"optimizer hyper-parameters changed to {values} inside a captured step: a CUDA "
                               f"graph would replay that write every step; change them between steps")
        self._tensors = tuple((i, v) for i, v in enumerate(values) if isinstance(v, Tensor))
        for buf in self._dev.values():
            K.set_scalars(buf, [0.0 if isinstance(v, Tensor) else v for v in values])
        self._mirrored = key

    def refresh(self):
        """Copy the tensor hyper-parameters' values into every device array (no launch when there are none)."""
        for i, t in self._tensors:
            for buf in self._dev.values():
                a = t._data
                if backend.is_cuda_array(a) and a.data.device_id == buf.data.device_id:
                    K.copy_scalar(buf, i, a)
                    continue
                if backend.is_capturing():
                    raise RuntimeError(f"a tensor hyper-parameter on {t.device} inside a captured step on cuda:"
                                       f"{buf.data.device_id}: the graph could not read its later values; keep it "
                                       f"on the parameters' device")
                K.set_scalars(buf[i:], [float(t)])  # (read on the host: another device's, or the cpu's)

    def hyper(self, device):
        """The hyper-parameter array the kernels read on ``device`` (NumPy on the CPU), tensor values current."""
        if device.type == "cpu":
            return np.array([float(v) for v in self._values()], np.float64)
        buf = self._dev.get(device.index)
        if buf is None:
            self._values()  # (checked first: a failed check leaves no mirror of unwritten values behind)
            _refuse_in_capture("creating an optimizer's device hyper-parameters")
            import cupy

            with backend.on_device(device):
                buf = self._dev[device.index] = cupy.zeros(8, cupy.float64)
            self._mirrored = None
            self._write()
        self.refresh()
        return buf


def group_pair(g, key):
    """``g[key]``, a pair of hyper-parameters (Adam's betas, Rprop's etas), checked: a group is a plain dict to its
    user, and one set to None or a 1-tuple after construction would fail as a raw subscript error at the step (its
    entries are checked as numbers with the others, by :meth:`_Group._values`)."""
    v = g[key]
    if not isinstance(v, (tuple, list)) or len(v) != 2:
        raise TypeError(f"optimizer step: group entry {key!r} must be a pair of numbers, got {v!r}")
    return v


def is_scalar_tensor(v):
    """``v`` is a one-element tensor of a real, non-bool dtype: what PyTorch's optimizers take for a learning rate
    and its schedulers fill in place."""
    return (isinstance(v, Tensor) and v.numel() == 1 and v.dtype != np.bool_
            and (backend.is_floating(v.dtype) or np.issubdtype(np.dtype(v.dtype), np.integer)))


def _refuse_in_capture(what):
    if backend.is_capturing():
        raise RuntimeError(f"{what} inside a captured step: optimizer state must exist before capture "
                           f"(run the step eagerly once first; capture_step's warm-up does)")


def _by_device(params):
    """[(device, indices)] of ``params``, in first-seen order (a group may span GPUs); grouped by the arrays'
    device ids (no Device object per parameter: every step runs this)."""
    out = {}
    for i, p in enumerate(params):
        a = p._data
        out.setdefault(a.data.device_id if backend.is_cuda_array(a) else None, []).append(i)
    return [(backend.device_of(params[idx[0]]._data), idx) for idx in out.values()]


class _ParamState(dict):
    """``optimizer.state``: PyTorch's ``defaultdict(dict)`` keyed by the parameters. ``state[p]`` for a parameter
    with no state yet stores and returns an empty dict (custom optimizers write ``self.state[p]["buf"] = ...``);
    keys, items and iteration give the parameters; ``setdefault`` / ``update`` store under them. A Tensor's
    ``==`` is elementwise, so the dict itself is keyed by each tensor's identity (other keys by themselves), and
    the key objects are kept beside it."""

    def __init__(self, items=()):
        super().__init__()
        self._keys = {}  # stored key -> the key given
        for key, value in items:
            self[key] = value

    @staticmethod
    def _id(key):
        return id(key) if isinstance(key, Tensor) else key

    def __getitem__(self, key):
        i = self._id(key)
        try:
            return super().__getitem__(i)
        except KeyError:
            value = self[key] = {}
            return value

    def __setitem__(self, key, value):
        i = self._id(key)
        self._keys[i] = key
        super().__setitem__(i, value)

    def __delitem__(self, key):
        i = self._id(key)
        super().__delitem__(i)
        del self._keys[i]

    def __contains__(self, key):
        return super().__contains__(self._id(key))

    def __iter__(self):
        return iter(self._keys.values())

    def keys(self):
        return collections.abc.KeysView(self)

    def items(self):
        return _StateItems(self)

    def get(self, key, default=None):
        return super().get(self._id(key), default)

    def setdefault(self, key, default=None):
        i = self._id(key)
        if not super().__contains__(i):
            self[key] = default
        return super().__getitem__(i)

    def pop(self, key, *default):
        i = self._id(key)
        self._keys.pop(i, None)
        return super().pop(i, *default)

    def popitem(self):
        i, value = super().popitem()
        return self._keys.pop(i), value

    def update(self, other=(), **kwargs):
        pairs = ((key, other[key]) for key in other.keys()) if hasattr(other, "keys") else other
        for key, value in pairs:
            self[key] = value
        for key, value in kwargs.items():
            self[key] = value

    def clear(self):
        self._keys.clear()
        super().clear()

    def copy(self):
        return _ParamState(self.items())

    def __reduce__(self):  # copies and pickles key the copy by the copied parameters
        return _ParamState, (list(self.items()),)

    def __repr__(self):
        return "{" + ", ".join(f"{key!r}: {value!r}" for key, value in self.items()) + "}"


class _StateItems(collections.abc.ItemsView):
    """``optimizer.state.items()``; ``(p, st) in`` it asks without creating p's state."""

    def __contains__(self, item):
        key, value = item
        if key not in self._mapping:
            return False
        v = self._mapping[key]
        return v is value or v == value


#: PyTorch's implementation switches (see :func:`_pytorch_flags`): a PyTorch state dict's groups carry them
_PYTORCH_SWITCHES = ("foreach", "fused", "capturable", "differentiable")


def _pytorch_flags(opt, foreach, fused, capturable, differentiable):
    """PyTorch's implementation switches, accepted: minifused's updates are always fused multi-tensor kernels
    (``foreach`` / ``fused`` change nothing) and always capturable (a step runs inside ``capture_step``);
    ``differentiable=True`` (a graph through the update) is not supported."""
    for name, flag in (("foreach", foreach), ("fused", fused)):
        if flag is not None and not isinstance(flag, bool):
            raise TypeError(f"{opt}: {name} must be None or a bool, got {flag!r}")
    for name, flag in (("capturable", capturable), ("differentiable", differentiable)):
        if not isinstance(flag, bool):
            raise TypeError(f"{opt}: {name} must be a bool, got {flag!r}")
    if foreach and fused:  # (PyTorch's refuses the pair, though neither changes anything here)
        raise RuntimeError(f"{opt}: `fused` and `foreach` cannot be `True` together")
    if differentiable:
        raise NotImplementedError(f"{opt}: differentiable=True (autograd through the update) is not supported")


def _check_hyper(opt, what, value, upper=None, closed=False, tensor=False):
    """``value`` a real number in [0, upper) ([0, upper] when ``closed``; any upper bound when None),
    as PyTorch's optimizers check them; NaN is rejected. With ``tensor``, also a one-element real tensor whose value
    is (PyTorch's optimizers take one for the lr and Adam's betas, and their steps read one for eps and
    weight_decay; the group keeps it: see :class:`_Group`)."""
    shown = value
    if tensor and isinstance(value, Tensor):
        if not is_scalar_tensor(value):
            raise ValueError(f"{opt}: a Tensor {what} must be a one-element tensor of a real dtype, got shape "
                             f"{tuple(value.shape)} and dtype {value.dtype}")
        value = float(value)
    number = isinstance(value, numbers.Real) and not isinstance(value, bool)
    ok = number and 0.0 <= value
    if ok and upper is not None:
        ok = value <= upper if closed else value < upper
    if not ok:
        bound = ">= 0" if upper is None else f"in [0, {upper}]" if closed else f"in [0, {upper})"
        # (no number at all: a TypeError, as PyTorch's comparison of it with a bound raises)
        raise (ValueError if number else TypeError)(f"{opt}: invalid {what} {shown!r}; expected "
                                                    f"{'' if number else 'a number '}{bound}")


def _check_lr(opt, lr):
    """A learning rate: a real number >= 0 or a one-element tensor of one."""
    _check_hyper(opt, "learning rate", lr, tensor=True)


class _Handle:
    """A hook's removable handle, as PyTorch's RemovableHandle: ``remove()``, its ``id``, and as a context manager
    it removes the hook on leaving the block."""

    def __init__(self, hooks, key):
        self._hooks, self.id = hooks, key

    def remove(self):
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


#: the step hooks of every optimizer (``optim.optimizer.register_optimizer_step_pre_hook`` / ``_post_hook``, as
#: PyTorch's): the pre-hooks run before an optimizer's own, the post-hooks after its own
_GLOBAL_STEP_HOOKS = {"pre": {}, "post": {}}


def _with_step_hooks(step):
    """``step`` running the optimizer's step pre-hooks (which may replace its arguments) before it and its
    post-hooks after it, as PyTorch's ``register_step_pre_hook`` / ``register_step_post_hook``, with the global
    ones around them. As PyTorch's, the hooks see ``args`` with the optimizer first (step's own ``self``), and
    new arguments a pre-hook returns are step's whole argument list."""
    @functools.wraps(step)
    def hooked(self, *args, **kwargs):
        if "_opt_called" in self.__dict__:  # (a scheduler drives this optimizer: see LRScheduler.step)
            self._opt_called = True
        hooks = self.__dict__.get("_step_hooks")
        if hooks is None and (_GLOBAL_STEP_HOOKS["pre"] or _GLOBAL_STEP_HOOKS["post"]):
            hooks = self.__dict__["_step_hooks"] = {"pre": {}, "post": {}, "next": 0}  # (for its running flag)
        if not hooks or hooks.get("running"):  # (a subclass's step calling super().step() runs them once)
            return step(self, *args, **kwargs)
        hooks["running"] = True
        args = (self, *args)
        try:
            for hook in list(_GLOBAL_STEP_HOOKS["pre"].values()) + list(hooks["pre"].values()):
                args, kwargs = pre_hook_arguments("optimizer step pre-hook", hook(self, args, kwargs), args, kwargs)
            if not args or args[0] is not self:  # (PyTorch's would call step without its optimizer)
                raise RuntimeError(f"optimizer step pre-hook: the new args must start with the optimizer, as the "
                                   f"args it was given do, got {_short(args)}")
            out = step(*args, **kwargs)
            for hook in list(hooks["post"].values()) + list(_GLOBAL_STEP_HOOKS["post"].values()):
                hook(self, args, kwargs)
        finally:
            hooks["running"] = False
        return out
    hooked._with_step_hooks = True
    return hooked


def _short(v, limit=80):
    text = repr(v)
    return text if len(text) <= limit else text[:limit] + "..."


def _with_state_dict_hooks(method):
    """``state_dict`` / ``load_state_dict`` between the optimizer's hooks of that method, as PyTorch's
    ``register_state_dict_pre_hook`` (``hook(opt)``), ``register_state_dict_post_hook`` (``hook(opt, sd)``, may
    return a new dict), ``register_load_state_dict_pre_hook`` (``hook(opt, sd)``, may return a new dict) and
    ``register_load_state_dict_post_hook`` (``hook(opt)``); once per call when a subclass's override calls its
    base."""
    saving = method.__name__ == "state_dict"

    @functools.wraps(method)
    def hooked(self, *args):
        hooks = self.__dict__.get("_state_hooks")
        if not hooks or hooks.get("running"):
            return method(self, *args)
        hooks["running"] = True
        try:
            if saving:
                for hook in list(hooks["save_pre"].values()):
                    hook(self)
                out = method(self)
                for hook in list(hooks["save_post"].values()):
                    result = hook(self, out)
                    out = out if result is None else result
                return out
            state_dict, = args
            for hook in list(hooks["load_pre"].values()):
                result = hook(self, state_dict)
                state_dict = state_dict if result is None else result
            method(self, state_dict)
            for hook in list(hooks["load_post"].values()):
                hook(self)
        finally:
            hooks["running"] = False
    hooked._with_state_dict_hooks = True
    return hooked
