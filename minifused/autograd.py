"""The tape: Functions, their contexts, grad mode, and the reverse walk.

Every differentiable op is a :class:`Function` whose ``forward(ctx, *arrays)``
computes raw arrays and keeps on ``ctx`` exactly what ``backward(ctx, *grads)``
needs: arrays through ``ctx.save_for_backward`` (checked against in-place
changes by version counters) and anything else (ReLU bit-masks, mean/rstd,
pooling indices) as plain attributes. ``Function.apply`` records the call on
the tape when grad mode is on and an input requires grad; the output tensors
point back at the context, which is the tape's node.

:func:`backward` walks the tape in reverse: build the order (every node after
its consumers), call each node's backward, add up the gradients. Hooks,
retained grads, early gradient commits (for data parallelism) and memory
release are small helpers around that core.

Fusion across ops has one protocol: a backward may ask ``ctx.sole_producer(i)``
for the context of the op that produced input ``i``, which the engine returns
only when this op is that output's sole consumer in the graph being
differentiated (no hook, no retained grad, aux data not freed). It may then
return, as input ``i``'s gradient, a :class:`Handoff`: a payload only that
producer's backward understands, which the engine delivers to it untouched.

Every in-place write goes through one mutator, :meth:`VersionCounter.bump`,
which records the op's name for the error a broken backward raises.

This module sits below ``tensor.py``: it never imports ``Tensor``. The tensor
module registers its class here with :func:`_register_tensor_type`.
"""
from __future__ import annotations

import functools
import threading
import weakref

import numpy as np

from . import backend
from .kernels.elementwise import add as _add  # the sum of two 16-bit gradients in one vectorized kernel

_Tensor = None  # the Tensor class, registered by minifused.tensor


def _register_tensor_type(cls) -> None:
    global _Tensor
    _Tensor = cls


# ---------------------------------------------------------------- grad mode
class _GradMode(threading.local):
    enabled = True


_mode = _GradMode()


def is_grad_enabled() -> bool:
    return _mode.enabled


class _GradModeGuard:
    """Sets grad mode on entry and restores it on exit; also a decorator."""

    def __init__(self, mode: bool = True):
        self.mode = bool(mode)
        self.prev = None

    def __enter__(self):
        self.prev = _mode.enabled
        _mode.enabled = self.mode
        return self

    def __exit__(self, *exc):
        _mode.enabled = self.prev
        return False

    def __call__(self, fn):
        cls, mode = type(self), self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with _GradModeGuard(mode) if cls is set_grad_enabled else cls():  # a fresh guard per call
                return fn(*args, **kwargs)

        return wrapper


class set_grad_enabled(_GradModeGuard):
    """Turn grad mode on or off. As in PyTorch it takes effect at once, so ``set_grad_enabled(False)``
    works as a plain call; as a context manager (or decorator) it restores the previous mode on exit."""

    def __init__(self, mode: bool = True):
        super().__init__(mode)
        self.prev = _mode.enabled
        _mode.enabled = self.mode

    def __enter__(self):
        return self  # the mode was set by the constructor; the mode before it is in self.prev

    def __call__(self, fn):
        _mode.enabled = self.prev  # as a decorator it changes the mode only while fn runs
        return super().__call__(fn)


class _BareDecorator(_GradModeGuard):
    """A guard that also decorates uncalled: ``@no_grad`` as well as ``@no_grad()``, as in PyTorch."""

    def __new__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]):
            return cls()(args[0])
        return super().__new__(cls)


class no_grad(_BareDecorator):
    """Ops inside record nothing on the tape."""

    def __init__(self):
        super().__init__(False)


class enable_grad(_BareDecorator):
    def __init__(self):
        super().__init__(True)


class inference_mode(_BareDecorator):
    """PyTorch's ``inference_mode``: here the same as :class:`no_grad` (minifused has no separate
    inference tensors), a context manager and a decorator; ``inference_mode(False)`` leaves grad
    mode as it is."""

    def __init__(self, mode: bool = True):
        super().__init__(False if mode else _mode.enabled)
        self._flag = bool(mode)

    def __call__(self, fn):
        flag = self._flag

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(flag):
                return fn(*args, **kwargs)

        return wrapper


# ---------------------------------------------------------------- anomaly and debug modes
class _Checks(threading.local):
    anomaly = False


_checks = _Checks()


class detect_anomaly:
    """Inside, every op's forward outputs and backward gradients are checked: the first
    non-finite one raises a RuntimeError naming the op and the shapes (costs a sync per op)."""

    def __enter__(self):
        self.prev = _checks.anomaly
        _checks.anomaly = True
        return self

    def __exit__(self, *exc):
        _checks.anomaly = self.prev
        return False


def _check_op(name, stage, arrays, inputs):
    """Under ``detect_anomaly``, raise on the first non-finite array of ``arrays``, naming the op and the
    shapes of its ``inputs``; in debug mode, synchronize after each op so errors surface where they happen."""
    for i, a in enumerate(arrays):
        if a is None or not hasattr(a, "dtype"):
            continue
        if backend.is_debug():
            backend.synchronize()
        if _checks.anomaly and backend.is_floating(a.dtype) and not bool(
                backend.array_module(a).isfinite(a).all()):
            raise RuntimeError(f"detect_anomaly: {name} {stage} {i} (shape {tuple(a.shape)}) is not "
                               f"finite; the op's inputs had shapes {[tuple(x.shape) for x in inputs if hasattr(x, 'shape')]}")


# ---------------------------------------------------------------- version counters
class VersionCounter:
    """How often a tensor's array was changed in place, and by which op last; views share one.
    :meth:`bump` is the one mutator: every in-place writer (ops, optimizers, ``copy_``, setitem,
    ``load_state_dict``, collectives) calls it with its name."""

    __slots__ = ("version", "last_op")

    def __init__(self):
        self.version = 0
        self.last_op = None

    def bump(self, op: str) -> None:
        self.version += 1
        self.last_op = op


def _saved_versions(saved, tensors):
    """(counter, version) of every tensor among ``tensors`` whose array was saved, for the in-place check."""
    found = []
    for s in saved:
        for t in tensors:
            if isinstance(t, _Tensor) and t._data is s:
                found.append((t._vc, t._vc.version))
                break
    return tuple(found)


def _check_versions(ctx):
    for counter, version in ctx.versions:
        if counter.version != version:
            by = f" (last by {counter.last_op})" if counter.last_op else ""
            raise RuntimeError(
                f"one of the arrays needed for gradient computation has been modified by an "
                f"in-place operation{by}: {ctx.fn.__name__} saved it at version {version} and it is "
                f"now at version {counter.version}. Clone it before modifying it in place.")


# ---------------------------------------------------------------- the tape's node
class Handoff:
    """Base of payloads a backward hands its sole producer (see :meth:`Context.sole_producer`) in place
    of a gradient array. The engine delivers one untouched: it is never added, hooked or zero-filled."""

    __slots__ = ()


class Context:
    """What one recorded op keeps for its backward; also the node of the tape.

    ``needs_input_grad[i]`` says whether input ``i`` wants a gradient; ``recording`` whether the
    call goes on the tape; ``save_for_backward`` / ``saved_tensors`` keep arrays checked against
    in-place changes; anything else (masks, mean/rstd) is a plain attribute.
    """

    __slots__ = ("fn", "inputs", "needs_input_grad", "_consumers", "saved", "versions",
                 "out_meta", "hooks", "retained", "freed", "__dict__", "__weakref__")

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self.saved = ()
        self.versions = ()
        self.hooks = None
        self.retained = None
        self.freed = False
        self._consumers = None

    def save_for_backward(self, *arrays):
        self.saved = arrays

    @property
    def recording(self) -> bool:
        """Whether this call goes on the tape (valid in ``forward``): forwards skip aux data (a
        mask, a copy of an input about to be overwritten) that only a backward would use."""
        return _mode.enabled and any(self.needs_input_grad)

    @property
    def saved_tensors(self):
        if self.freed:
            raise RuntimeError(_FREED_MESSAGE.format(name=self.fn.__name__))
        return self.saved

    def sole_producer(self, i: int = 0):
        """The context of the op that produced input ``i``, valid while this node's backward runs,
        when the engine guarantees that this op is the sole consumer of that (single) output in the
        graph being differentiated, with no hook or retained grad on it and the producer's aux data
        not freed; else None. Only then may this backward return a :class:`Handoff` for input ``i``."""
        t = self.inputs[i] if self._consumers is not None else None
        p = None if t is None else t._ctx
        if (p is None or p.freed or len(p.out_meta) != 1 or (p.hooks and p.hooks.get(t._out_index))
                or (p.retained and t._out_index in p.retained)
                or self._consumers.get((id(p), t._out_index)) != 1):
            return None
        return p

    def _free(self):
        """Drop saved arrays and aux data; a later backward through this node raises."""
        if self.saved or self.__dict__:
            self.freed = True
            self.saved = ()
            self.__dict__.clear()

    def _release(self):
        """After this node's backward (without retain_graph): ``_free``, so that the arrays only it kept
        go now, not when the whole walk ends (a training step's peak is otherwise every activation of
        the model plus the gradients of the first layers)."""
        self._free()
        self._consumers = None


class _Edge:
    """A non-leaf input as its consumer recorded it: the producer and the output index *at record time*
    (an in-place op later moves the tensor to a new node; this consumer's gradient still belongs to the
    old one), and a weak reference to the tensor for its other attributes. The tape never keeps an
    intermediate tensor alive: what a backward needs, its op saved, so an activation that no backward
    reads (the inputs of an add, say) goes as soon as the user's code lets it go, as in PyTorch."""

    __slots__ = ("_ctx", "_out_index", "_ref")

    def __init__(self, t):
        self._ctx, self._out_index, self._ref = t._ctx, t._out_index, weakref.ref(t)

    def __getattr__(self, name):  # the tensor's other attributes (shape, requires_grad ...) while it lives
        tensor = object.__getattribute__(self, "_ref")()
        if tensor is None:
            raise AttributeError(f"a tensor no longer alive has no {name!r}")
        return getattr(tensor, name)


_FREED_MESSAGE = (
    "Trying to backward through the graph a second time: the saved arrays of {name} were "
    "freed after the first backward. Pass retain_graph=True to the first backward() if you "
    "need to differentiate the same graph again."
)


# ---------------------------------------------------------------- recording
class Function:
    """Base class of differentiable ops.

    Subclasses define ``forward(ctx, *arrays, **kwargs)`` returning an array (or a
    tuple of arrays) and ``backward(ctx, *grads)`` returning one gradient per
    positional input (``None`` where there is none). Set ``is_view = True`` when
    the output may share memory with the first input, so both share one version
    counter and an in-place change through either is detected.
    """

    is_view = False

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError

    @classmethod
    def apply(cls, *args, **kwargs):
        T = _Tensor
        arrays, needs, any_needs = _unwrap(args)
        ctx = Context(needs)
        out = cls.forward(ctx, *arrays, **kwargs)
        record = any_needs and _mode.enabled
        if type(out) is tuple:
            outs = tuple(T._from_array(_as_array(o), record) for o in out)
        else:
            outs = (T._from_array(_as_array(out), record),)
        if _checks.anomaly or backend.is_debug():
            _check_op(cls.__name__, "forward output", [o._data for o in outs], arrays)
        if cls.is_view and isinstance(args[0], T):
            outs[0]._vc = args[0]._vc
        if record:
            _record(ctx, cls, tuple([a if n else None for a, n in zip(args, needs)]), outs, args)
        return outs if type(out) is tuple else outs[0]

    @classmethod
    def apply_(cls, op, x, *args, **kwargs):
        """In-place ``apply``: ``forward(ctx, x._data, *args, out=x._data, **kwargs)`` writes its one
        result into ``x``'s own array (returning it; any other array is copied there), ``x``'s
        version counter is bumped, and ``x`` itself is returned, as PyTorch's ``relu_`` does.

        When recorded, ``x`` becomes the op's output, and a stand-in for its previous value (its
        old node, same counter) is the op's input; an earlier op that saved ``x``'s array sees
        the bump and its backward raises. ``op`` (e.g. ``"relu_"``) names the op in errors. On a
        leaf that requires grad it raises, as PyTorch does: its value is what ``.grad`` is about.
        """
        if x._requires_grad and x._ctx is None and _mode.enabled:
            raise RuntimeError(f"{op}: a leaf Variable that requires grad is being used in an in-place "
                               f"operation. Use the out-of-place form, or modify it under no_grad()")
        refuse_view_of_grad_leaf(op, x)
        arrays, needs, any_needs = _unwrap((x, *args))
        ctx = Context(needs)
        out = cls.forward(ctx, *arrays, out=x._data, **kwargs)
        if out is not x._data:
            x._data[...] = out
        x._vc.bump(op)
        if _checks.anomaly or backend.is_debug():
            _check_op(op, "forward output", [x._data], arrays)
        if any_needs and _mode.enabled:
            prev = _stand_in(x) if x._requires_grad else None
            inputs = (prev, *[a if n else None for a, n in zip(args, needs[1:])])
            x._requires_grad = True
            _record(ctx, cls, inputs, (x,), (x, *args))  # after the bump: saved arrays are x as it is now
        return x


def refuse_view_of_grad_leaf(op, x):
    """PyTorch refuses in-place writes through a view of a leaf that requires grad (they would change the
    leaf behind the tape's back): raise, naming ``op``, when ``x`` is such a view and grad mode is on."""
    ctx = x._ctx
    while ctx is not None and ctx.fn.is_view and _mode.enabled and ctx.inputs:
        base = ctx.inputs[0]
        if base is None:
            return
        if base._ctx is None:
            if base.requires_grad:
                raise RuntimeError(f"{op}: a view of a leaf Variable that requires grad is being used in an "
                                   f"in-place operation; modify it under no_grad() or clone it first")
            return
        ctx = base._ctx


def _unwrap(args):
    """The arrays of ``args`` (tensors unwrapped), which of them require grad, and whether any does
    (one pass: this is the hot path of every op)."""
    T = _Tensor
    arrays, needs, any_needs = [], [], False
    for a in args:
        if isinstance(a, T):
            arrays.append(a._data)
            needs.append(a._requires_grad)
            any_needs = any_needs or a._requires_grad
        else:
            arrays.append(a)
            needs.append(False)
    return arrays, tuple(needs), any_needs


def _record(ctx, cls, inputs, outs, args):
    """Put one call on the tape: the node keeps its inputs and what to check its saved arrays against,
    and each output points back at it."""
    ctx.fn = cls
    if len(inputs) == 1:  # the common cases, without a generator
        t = inputs[0]
        ctx.inputs = inputs if t is None or t._ctx is None else (_Edge(t),)
    elif len(inputs) == 2:
        a, b = inputs
        ctx.inputs = (a if a is None or a._ctx is None else _Edge(a), b if b is None or b._ctx is None else _Edge(b))
    else:
        ctx.inputs = tuple(t if t is None or t._ctx is None else _Edge(t) for t in inputs)
    if ctx.saved:
        ctx.versions = _saved_versions(ctx.saved, (*args, *outs))
    if len(outs) == 1:  # the common case, without the loops
        o = outs[0]
        ctx.out_meta = ((o._data.shape, o._data.dtype),)
        o._ctx, o._out_index = ctx, 0
        return
    ctx.out_meta = tuple([(o._data.shape, o._data.dtype) for o in outs])
    for i, o in enumerate(outs):
        o._ctx, o._out_index = ctx, i


def _stand_in(x):
    """A tensor for ``x``'s value before an in-place op: x's old node, counter, hooks and retained grad
    move to it, so the op's backward routes the gradient there."""
    prev = _Tensor._from_array(x._data, True)
    prev._ctx, prev._out_index, prev._vc = x._ctx, x._out_index, x._vc
    prev._hooks, prev._retain, x._hooks, x._retain = x._hooks, x._retain, [], None
    return prev


def _as_array(o):
    """NumPy reductions return scalars; a tensor always holds an array."""
    return np.asarray(o) if isinstance(o, np.generic) else o


# ---------------------------------------------------------------- the reverse walk
def backward(root, gradient=None, retain_graph=False):
    """Accumulate d(root)/d(leaf) into ``leaf.grad`` for every leaf that requires grad.

    All gradients are computed before any ``.grad`` is touched, so an error leaves
    every ``.grad`` as it was: except for leaves with post-accumulate-grad hooks, whose
    ``.grad`` is written as soon as it is complete. Without ``retain_graph``, each node's
    saved arrays and inputs are let go as soon as its backward has run (as PyTorch does:
    after an error the nodes already walked cannot be walked again). Callbacks queued by
    hooks (:func:`queue_callback`) run at the end.
    """
    outer, _callbacks.queue = _callbacks.queue, []
    try:
        grad, user_grad = _seed(root, gradient)
        _backward(root, grad, _LeafGrads(user_grad), retain_graph)
        queue = _callbacks.queue
        while queue:
            queue.pop(0)()
    finally:
        _callbacks.queue = outer


def _backward(root, grad, leaves, retain_graph):
    """The core: every node after its consumers turns its outputs' gradients into its inputs'."""
    if root._ctx is None:
        leaves.add(root, grad)
        order = []
    else:
        order, consumers = _backward_order(root._ctx)
        pending = {(id(root._ctx), root._out_index): grad}
        early = _early_commits(order) if _post_hooks_used[0] else {}
        for i, ctx in enumerate(order):
            _run_node(ctx, pending, leaves, consumers)
            if i in early:
                leaves.commit_early(early.pop(i), pending)
            if not retain_graph:
                ctx._release()
    leaves.commit_all()
    if not retain_graph:
        for ctx in order:
            ctx._free()


def _run_node(ctx, pending, leaves, consumers):
    """One node's backward: its outputs' gradients from ``pending``, its inputs' added to ``pending``
    (non-leaves) or ``leaves``. (A function of its own, so that no array outlives it in a local.)"""
    if len(ctx.out_meta) == 1 and not ctx.hooks and not ctx.retained:  # the common case, inline
        g = pending.pop((id(ctx), 0), None)
        grads = None if g is None else (g,)
    else:
        grads = _output_grads(ctx, pending)
    if grads is None:
        return
    if ctx.versions:
        _check_versions(ctx)
    ctx._consumers = consumers  # for sole_producer; _release drops it
    in_grads = ctx.fn.backward(ctx, *grads)
    if not isinstance(in_grads, tuple):
        in_grads = (in_grads,)
    if _checks.anomaly or backend.is_debug():
        _check_op(ctx.fn.__name__, "backward gradient for input", in_grads, grads)
    for t, g in zip(ctx.inputs, in_grads):
        if t is None or g is None:
            continue
        if t._ctx is None:
            leaves.add(t, g)
        else:
            key = (id(t._ctx), t._out_index)
            pending[key] = g if key not in pending else _sum(pending[key], g)


def _sum(a, b):
    """Two gradients of one output, added (never a :class:`Handoff`: the engine delivers those untouched)."""
    if isinstance(a, Handoff) or isinstance(b, Handoff):
        raise RuntimeError("autograd: a Handoff met another gradient for the same output; a backward may "
                           "return one only for an input whose ctx.sole_producer(i) it got")
    return _add(a, b)


def _output_grads(ctx, pending):
    """The gradients of ``ctx``'s outputs (None when none reached it): zeros for outputs that got none,
    then the outputs' hooks and retained grads."""
    if len(ctx.out_meta) == 1:
        grads = [pending.pop((id(ctx), 0), None)]
        if grads[0] is None:
            return None
    else:
        grads = [pending.pop((id(ctx), i), None) for i in range(len(ctx.out_meta))]
        if all(g is None for g in grads):
            return None
    if ctx.hooks or ctx.retained or any(g is None for g in grads):
        _prepare_grads(ctx, grads)
    return grads


def _prepare_grads(ctx, grads):
    for i, (shape, dtype) in enumerate(ctx.out_meta):
        if grads[i] is None:
            grads[i] = backend.array_module(_any_array(grads)).zeros(shape, dtype)
        elif ctx.hooks and i in ctx.hooks:
            grads[i] = _run_hooks(ctx.hooks[i], grads[i])
        if ctx.retained and i in ctx.retained:
            kept = ctx.retained[i]()  # None once the tensor is gone: no .grad left to keep
            if kept is not None:
                kept._accumulate_grad(grads[i], owned=False)


def _any_array(grads):
    return next(g for g in grads if g is not None and not isinstance(g, Handoff))


def _seed(root, gradient):
    """The gradient of ``root`` the walk starts from, and the caller's array (None for the implicit one)."""
    if not root.requires_grad:
        raise RuntimeError("backward(): the tensor does not require grad and has no grad_fn")
    if gradient is None:
        if root._data.size != 1:
            raise RuntimeError(
                f"backward(): grad can be implicitly created only for scalar outputs, got shape "
                f"{tuple(root.shape)}; pass gradient= of that shape")
        return backend.ones_like(root._data), None
    if isinstance(gradient, _Tensor) and gradient.device != root.device:
        raise RuntimeError(f"backward(): gradient is on {gradient.device} but the tensor is on {root.device}")
    given = gradient._data if isinstance(gradient, _Tensor) else root._xp.asarray(gradient)
    return _fit(given, root._data, "backward(): gradient"), given


def _fit(g, like, what):
    """``g`` as a gradient of ``like``: the same shape (else a RuntimeError naming ``what``), cast to its dtype as
    PyTorch casts (a float64 or integer gradient never reaches a float32 tensor)."""
    if g.shape != like.shape:
        raise RuntimeError(f"{what} has shape {tuple(g.shape)} but the tensor has shape {tuple(like.shape)}")
    return g if g.dtype == like.dtype else g.astype(like.dtype)


def _backward_order(root_ctx):
    """Nodes reachable from ``root_ctx``, each after every node that consumes its outputs
    (Kahn's algorithm on consumer counts), and the number of consumers of each node output,
    keyed ``(id(producer), output index)``."""
    dependents, consumers = {id(root_ctx): 0}, {}
    stack = [root_ctx]
    while stack:
        ctx = stack.pop()
        if ctx.freed:
            raise RuntimeError(_FREED_MESSAGE.format(name=ctx.fn.__name__))
        for t in ctx.inputs:
            parent = None if t is None else t._ctx
            if parent is None:
                continue
            key = (id(parent), t._out_index)
            consumers[key] = consumers.get(key, 0) + 1
            if id(parent) not in dependents:
                dependents[id(parent)] = 0
                stack.append(parent)
            dependents[id(parent)] += 1
    order, ready = [], [root_ctx]
    while ready:
        ctx = ready.pop()
        order.append(ctx)
        for t in ctx.inputs:
            if t is not None and t._ctx is not None:
                dependents[id(t._ctx)] -= 1
                if dependents[id(t._ctx)] == 0:
                    ready.append(t._ctx)
    return order, consumers


def _run_hooks(hooks, grad):
    """Each hook sees the gradient and may return a replacement: checked for shape, device and cast to its dtype."""
    for hook in hooks:
        result = hook(_Tensor._from_array(grad, False))
        if result is None:
            continue
        new = result._data if isinstance(result, _Tensor) else backend.array_module(grad).asarray(result)
        if type(new) is not type(grad):
            raise RuntimeError(f"hook {getattr(hook, '__name__', hook)!r} returned a gradient on another device "
                               f"than the tensor's")
        grad = _fit(new, grad, f"hook {getattr(hook, '__name__', hook)!r} returned a gradient that")
    return grad


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=None,
         materialize_grads=False):
    """The gradients of ``outputs`` (weighted by ``grad_outputs``) with respect to ``inputs``, returned as a
    tuple, PyTorch's ``torch.autograd.grad``: no ``.grad`` anywhere is changed. ``retain_graph`` defaults to
    False (as ``create_graph``, which minifused does not support: no higher-order gradients)."""
    if create_graph:
        raise NotImplementedError("autograd.grad: create_graph=True (higher-order gradients) is not supported")
    single = isinstance(outputs, _Tensor)
    outputs = [outputs] if single else list(outputs)
    inputs = [inputs] if isinstance(inputs, _Tensor) else list(inputs)
    if grad_outputs is None or isinstance(grad_outputs, _Tensor):
        grad_outputs = [grad_outputs] * len(outputs) if grad_outputs is None else [grad_outputs]
    grad_outputs = list(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise ValueError(f"autograd.grad: got {len(grad_outputs)} grad_outputs for {len(outputs)} outputs")
    for what, ts in (("outputs", outputs), ("inputs", inputs)):
        for t in ts:
            if not isinstance(t, _Tensor):
                raise TypeError(f"autograd.grad: {what} must be tensors, got {type(t).__name__}")
    for t in inputs:
        if not t.requires_grad:
            raise RuntimeError("autograd.grad: one of the inputs does not require grad")
    saved = [(t, t._grad, getattr(t, "_retain", False)) for t in inputs]
    found = {}
    try:
        for t in inputs:
            t._grad = None
            if t._ctx is not None:
                t.retain_grad()
        for i, (out, g) in enumerate(zip(outputs, grad_outputs)):
            keep = retain_graph or i + 1 < len(outputs)
            outer, _callbacks.queue = _callbacks.queue, []
            try:
                seed, user_grad = _seed(out, g)
                _backward(out, seed, _Collected(user_grad, inputs), keep)
            finally:
                _callbacks.queue = outer
        for t in inputs:
            if t._grad is not None:
                found[id(t)] = t._grad
    finally:
        for t, g, retained in saved:
            t._grad = g
            if t._ctx is not None and not retained:
                t._retain = False
                if t._ctx.retained is not None:
                    t._ctx.retained.pop(t._out_index, None)
    result = []
    for t in inputs:
        g = found.get(id(t))
        if g is None and not (allow_unused or materialize_grads):
            raise RuntimeError("autograd.grad: one of the inputs was not used to compute the outputs; pass "
                               "allow_unused=True to get None for it")
        if g is None and materialize_grads:
            g = _Tensor._from_array(t._xp.zeros_like(t._data))
        result.append(g)
    return tuple(result)


# ---------------------------------------------------------------- leaf gradients
class _LeafGrads:
    """The leaves' gradients gathered by a walk, written into ``.grad`` once complete: at the end, or,
    for leaves with post-accumulate-grad hooks, as soon as the last node feeding them has run."""

    def __init__(self, user_grad):
        self.grads = {}  # id(leaf) -> [leaf, grad]
        self.given = set()  # ids of arrays that became a leaf's own .grad
        self.user_grad = user_grad

    def add(self, leaf, g):
        if g.shape != leaf._data.shape or g.dtype != leaf._data.dtype:  # a custom Function's backward may err
            g = _fit(g, leaf._data, "a backward's gradient for a leaf")
        entry = self.grads.get(id(leaf))
        if entry is None:
            self.grads[id(leaf)] = [leaf, g]
        else:
            entry[1] = _add(entry[1], g)

    def owns(self, g, still_held=()):
        """The one leaf-ownership rule: ``g`` may become a leaf's ``.grad`` as it is (no copy) only if
        nothing else can see it: not the caller's gradient, not a view, not another leaf's ``.grad``,
        and not held by anything still in the walk (``still_held``)."""
        owned = (g is not self.user_grad and getattr(g, "base", None) is None and id(g) not in self.given
                 and not any(h is g for h in still_held))
        if owned:
            self.given.add(id(g))
        return owned

    def commit_early(self, leaves, pending):
        """Write these leaves' complete gradients during the walk and run their post-accumulate hooks
        (a hook may start an asynchronous reduction of the ``.grad`` in place)."""
        for leaf in leaves:
            entry = self.grads.pop(id(leaf), None)
            if entry is None:
                continue
            g = _run_hooks(leaf._hooks, entry[1]) if leaf._hooks else entry[1]
            leaf._accumulate_grad(g, self.owns(g, (*pending.values(), *(e[1] for e in self.grads.values()))))
            for hook in tuple(leaf._post_hooks):
                hook(leaf)

    def commit_all(self):
        """Every remaining leaf's hooks, then every ``.grad`` written, then the post-accumulate hooks."""
        updates = []
        for leaf, g in self.grads.values():
            updates.append((leaf, _run_hooks(leaf._hooks, g) if leaf._hooks else g))
        self.grads.clear()
        for leaf, g in updates:
            leaf._accumulate_grad(g, self.owns(g))
        for leaf, _ in updates:
            for hook in tuple(leaf._post_hooks or ()):
                hook(leaf)


# ---------------------------------------------------------------- hooks for data parallelism
_post_hooks_used = [False]  # set once any leaf registers a post-accumulate-grad hook


class _Callbacks(threading.local):
    queue = None  # a list while a backward runs


_callbacks = _Callbacks()


def queue_callback(fn) -> None:
    """Run ``fn()`` once the backward now running has written every ``.grad`` (called from a
    hook: ``DistributedDataParallel`` waits there for its gradient reductions). Callbacks are
    dropped if the backward fails."""
    if _callbacks.queue is None:
        raise RuntimeError("queue_callback: no backward is running (call it from a hook)")
    _callbacks.queue.append(fn)


def _early_commits(order):
    """{node index: leaves}: for each leaf with post-accumulate-grad hooks, the last node in
    ``order`` that feeds it a gradient; after that node the leaf's gradient is complete."""
    last = {}
    for i, ctx in enumerate(order):
        for t in ctx.inputs:
            if t is not None and t._ctx is None and t._post_hooks:
                last[id(t)] = (i, t)
    out = {}
    for i, t in last.values():
        out.setdefault(i, []).append(t)
    return out


class _Collected(_LeafGrads):
    """The leaf gradients of a walk for :func:`grad`: only the asked-for leaves get theirs (into ``.grad``,
    which :func:`grad` restores afterwards); no other leaf is touched and no post-accumulate hook runs."""

    def __init__(self, user_grad, wanted):
        super().__init__(user_grad)
        self.wanted = {id(t) for t in wanted}

    def commit_early(self, leaves, pending):
        pass  # everything waits for commit_all

    def commit_all(self):
        for leaf, g in self.grads.values():
            if id(leaf) in self.wanted:
                leaf._accumulate_grad(_run_hooks(leaf._hooks, g) if leaf._hooks else g, self.owns(g))
        self.grads.clear()
