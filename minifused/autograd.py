"""The tape: Functions, their contexts, grad mode, and the reverse walk.

Every differentiable op is a :class:`Function` whose ``forward(ctx, *arrays)``
computes raw arrays and keeps on ``ctx`` exactly what ``backward(ctx, *grads)``
needs: arrays through ``ctx.save_for_backward`` (checked against in-place
changes by version counters) and anything else (ReLU bit-masks, mean/rstd,
pooling indices) as plain attributes. ``Function.apply`` records the call on
the tape when grad mode is on and an input requires grad; the output tensors
point back at the context, which is the tape's node.

This module sits below ``tensor.py``: it never imports ``Tensor``. The tensor
module registers its class here with :func:`_register_tensor_type`.
"""
from __future__ import annotations

import functools
import threading

import numpy as np

from . import backend

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


class set_grad_enabled:
    """Context manager (and decorator) setting grad mode on or off."""

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
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)

        return wrapper


class no_grad(set_grad_enabled):
    """Ops inside record nothing on the tape."""

    def __init__(self):
        super().__init__(False)


class enable_grad(set_grad_enabled):
    def __init__(self):
        super().__init__(True)


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


def _check_op(name, stage, arrays, shapes):
    for i, a in enumerate(arrays):
        if a is None or not hasattr(a, "dtype"):
            continue
        if backend.is_debug():
            backend.synchronize()
        if _checks.anomaly and backend.is_floating(a.dtype) and not bool(
                backend.array_module(a).isfinite(a).all()):
            raise RuntimeError(f"detect_anomaly: {name} {stage} {i} (shape {tuple(a.shape)}) is not "
                               f"finite; the op's inputs had shapes {shapes}")


# ---------------------------------------------------------------- the tape's node
class Context:
    """What one recorded op keeps for its backward; also the node of the tape.

    ``needs_input_grad[i]`` says whether input ``i`` wants a gradient;
    ``sole_consumer[i]`` (valid while ``backward`` runs) says whether this op
    is the only consumer of input ``i`` in the graph being differentiated, with
    no hooks on it: an op may then hand its producer a gradient in a form only
    that producer understands (the cross-layer epilog fusion of ``ops.linear``).
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

    @property
    def sole_consumer(self):
        consumers = self._consumers
        return tuple(t is not None and consumers.get(id(t)) == 1 and not t._hooks and t._retain is None
                     for t in self.inputs)

    def _free(self):
        """Drop saved arrays and aux data; a later backward through this node raises."""
        if self.saved or self.__dict__:
            self.freed = True
            self.saved = ()
            self.__dict__.clear()

    def _release(self):
        """After this node's backward (without retain_graph): ``_free``, and hold each non-leaf input
        by an :class:`_Edge` instead of the tensor, so that intermediate arrays nobody else holds go
        now, not when the whole walk ends (a training step's peak is otherwise every activation of
        the model plus the gradients of the first layers)."""
        self._free()
        self.inputs = tuple(_Edge(t) if t is not None and t._ctx is not None else t for t in self.inputs)


class _Edge:
    """What the tape still needs of a non-leaf input after its consumer ran: the producer and the
    output index (a second backward through nodes that saved nothing still routes), not the array."""

    __slots__ = ("_ctx", "_out_index", "_hooks", "_retain")

    def __init__(self, t):
        self._ctx, self._out_index, self._hooks, self._retain = t._ctx, t._out_index, t._hooks, t._retain


_FREED_MESSAGE = (
    "Trying to backward through the graph a second time: the saved arrays of {name} were "
    "freed after the first backward. Pass retain_graph=True to the first backward() if you "
    "need to differentiate the same graph again."
)


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
        arrays, needs, any_needs = [], [], False
        for a in args:  # one pass: this is the hot path of every op
            if isinstance(a, T):
                arrays.append(a.data)
                needs.append(a._requires_grad)
                any_needs = any_needs or a._requires_grad
            else:
                arrays.append(a)
                needs.append(False)
        record = any_needs and _mode.enabled
        ctx = Context(tuple(needs))
        out = cls.forward(ctx, *arrays, **kwargs)
        if type(out) is tuple:
            outs = tuple(T._from_array(_as_array(o), record) for o in out)
        else:
            outs = (T._from_array(_as_array(out), record),)
        if _checks.anomaly or backend.is_debug():
            _check_op(cls.__name__, "forward output", [o.data for o in outs],
                      [tuple(a.shape) for a in arrays if hasattr(a, "shape")])
        if cls.is_view and isinstance(args[0], T):
            outs[0]._vc = args[0]._vc
        if record:
            ctx.fn = cls
            ctx.inputs = tuple([a if n else None for a, n in zip(args, needs)])
            if ctx.saved:
                ctx.versions = _saved_versions(ctx.saved, args, outs, T)
            if len(outs) == 1:  # the common case, without the loops
                o = outs[0]
                ctx.out_meta = ((o.data.shape, o.data.dtype),)
                o._ctx = ctx
            else:
                ctx.out_meta = tuple([(o.data.shape, o.data.dtype) for o in outs])
                for i, o in enumerate(outs):
                    o._ctx = ctx
                    o._out_index = i
        return outs if type(out) is tuple else outs[0]

    @classmethod
    def apply_(cls, op, x, *args, **kwargs):
        """In-place ``apply``: ``forward(ctx, x.data, *args, out=x.data, **kwargs)`` writes its one
        result into ``x``'s own array (returning it; any other array is copied there), ``x``'s
        version counter is bumped, and ``x`` itself is returned, as PyTorch's ``relu_`` does.

        When recorded, ``x`` becomes the op's output, and a stand-in for its previous value (its
        old node, same counter) is the op's input; an earlier op that saved ``x``'s array sees
        the bump and its backward raises. ``op`` (e.g. ``"relu_"``) names the op in errors. On a
        leaf that requires grad it raises, as PyTorch does: its value is what ``.grad`` is about.
        """
        T = _Tensor
        if x._requires_grad and x._ctx is None and _mode.enabled:
            raise RuntimeError(f"{op}: a leaf Variable that requires grad is being used in an in-place "
                               f"operation. Use the out-of-place form, or modify it under no_grad()")
        arrays, needs = [x.data], [x._requires_grad]
        for a in args:
            is_t = isinstance(a, T)
            arrays.append(a.data if is_t else a)
            needs.append(is_t and a._requires_grad)
        record = any(needs) and _mode.enabled
        ctx = Context(tuple(needs))
        out = cls.forward(ctx, *arrays, out=x.data, **kwargs)
        if out is not x.data:
            x.data[...] = out
        _mark_modified(x._vc, op)
        if _checks.anomaly or backend.is_debug():
            _check_op(op, "forward output", [x.data], [tuple(a.shape) for a in arrays if hasattr(a, "shape")])
        if record:
            prev = None
            if x._requires_grad:  # the value before the op: x's old node, as an input of this one
                prev = T._from_array(x.data, True)
                prev._ctx, prev._out_index, prev._vc = x._ctx, x._out_index, x._vc
                prev._hooks, prev._retain, x._hooks, x._retain = x._hooks, x._retain, [], None
            ctx.fn = cls
            ctx.inputs = (prev, *[a if n else None for a, n in zip(args, needs[1:])])
            if ctx.saved:  # after the bump: what forward saved is the array as it is now
                ctx.versions = _saved_versions(ctx.saved, (x, *args), (), T)
            ctx.out_meta = ((x.data.shape, x.data.dtype),)
            x._ctx, x._out_index, x._requires_grad = ctx, 0, True
        return x


def _mark_modified(counter, op):
    """Bump a version counter after an in-place change by ``op``, remembered for the error."""
    counter[0] += 1
    counter[1:] = [op]


def _as_array(o):
    """NumPy reductions return scalars; a tensor always holds an array."""
    return np.asarray(o) if isinstance(o, np.generic) else o


def _saved_versions(saved, args, outs, T):
    """(counter, version) of every tensor whose array was saved, for the in-place check."""
    found = []
    for s in saved:
        for t in (*args, *outs):
            if isinstance(t, T) and t.data is s:
                found.append((t._vc, t._vc[0]))
                break
    return tuple(found)


def _check_versions(ctx):
    for counter, version in ctx.versions:
        if counter[0] != version:
            by = f" (last by {counter[1]})" if len(counter) > 1 else ""
            raise RuntimeError(
                f"one of the arrays needed for gradient computation has been modified by an "
                f"in-place operation{by}: {ctx.fn.__name__} saved it at version {version} and it is "
                f"now at version {counter[0]}. Clone it before modifying it in place.")


# ---------------------------------------------------------------- the reverse walk
def _backward_order(root_ctx):
    """Nodes reachable from ``root_ctx``, each after every node that consumes its outputs
    (Kahn's algorithm on consumer counts), and the number of consumers of each input tensor."""
    dependents, consumers = {id(root_ctx): 0}, {}
    stack = [root_ctx]
    while stack:
        ctx = stack.pop()
        if ctx.freed:
            raise RuntimeError(_FREED_MESSAGE.format(name=ctx.fn.__name__))
        for t in ctx.inputs:
            if t is None:
                continue
            consumers[id(t)] = consumers.get(id(t), 0) + 1
            parent = t._ctx
            if parent is not None:
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
    for hook in hooks:
        result = hook(_Tensor._from_array(grad, False))
        if result is not None:
            grad = result.data if isinstance(result, _Tensor) else result
    return grad


def _prepare_grads(ctx, grads, xp):
    """Zeros for outputs that got no gradient; hooks and retained grads of outputs."""
    for i, (shape, dtype) in enumerate(ctx.out_meta):
        if grads[i] is None:
            grads[i] = xp.zeros(shape, dtype)
        elif ctx.hooks and i in ctx.hooks:
            grads[i] = _run_hooks(ctx.hooks[i], grads[i])
        if ctx.retained and i in ctx.retained:
            ctx.retained[i]()._accumulate_grad(grads[i], owned=False)


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


def _commit_early(leaf, g, user_grad, committed, pending, leaf_grads):
    """Write one leaf's complete gradient during the walk and run its post-accumulate hooks. The
    array becomes the leaf's own only if nothing still in the walk holds it (a hook may write the
    ``.grad`` in place, asynchronously)."""
    if leaf._hooks:
        g = _run_hooks(leaf._hooks, g)
    owned = (g is not user_grad and getattr(g, "base", None) is None and id(g) not in committed
             and not any(v is g for v in pending.values())
             and not any(e[1] is g for e in leaf_grads.values()))
    committed.add(id(g))
    leaf._accumulate_grad(g, owned)
    for hook in tuple(leaf._post_hooks):
        hook(leaf)


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
        _backward(root, gradient, retain_graph)
        queue = _callbacks.queue
        while queue:
            queue.pop(0)()
    finally:
        _callbacks.queue = outer


def _backward(root, gradient, retain_graph):
    T = _Tensor
    if not root.requires_grad:
        raise RuntimeError("backward(): the tensor does not require grad and has no grad_fn")
    xp = root._xp
    if gradient is None:
        if root.data.size != 1:
            raise RuntimeError(
                f"backward(): grad can be implicitly created only for scalar outputs, got shape "
                f"{tuple(root.shape)}; pass gradient= of that shape")
        grad = backend.ones_like(root.data)
        user_grad = None
    else:
        grad = gradient.data if isinstance(gradient, T) else xp.asarray(gradient, dtype=root.dtype)
        if grad.shape != root.data.shape:
            raise RuntimeError(
                f"backward(): gradient has shape {tuple(grad.shape)} but the tensor has shape "
                f"{tuple(root.shape)}")
        user_grad = grad

    leaf_grads = {}  # id(leaf) -> [leaf, grad]
    committed = set()
    if root._ctx is None:
        leaf_grads[id(root)] = [root, grad]
        order = []
    else:
        order, consumers = _backward_order(root._ctx)
        pending = {(id(root._ctx), root._out_index): grad}
        early = _early_commits(order) if _post_hooks_used[0] else None
        for i, ctx in enumerate(order):
            key = id(ctx)
            if len(ctx.out_meta) == 1:
                grads = [pending.pop((key, 0), None)]
                if grads[0] is None:
                    continue
            else:
                grads = [pending.pop((key, i), None) for i in range(len(ctx.out_meta))]
                if all(g is None for g in grads):
                    continue
            if ctx.hooks or ctx.retained or any(g is None for g in grads):
                _prepare_grads(ctx, grads, xp)
            if ctx.versions:
                _check_versions(ctx)
            ctx._consumers = consumers
            in_grads = ctx.fn.backward(ctx, *grads)
            if not isinstance(in_grads, tuple):
                in_grads = (in_grads,)
            if _checks.anomaly or backend.is_debug():
                _check_op(ctx.fn.__name__, "backward gradient for input", in_grads,
                          [shape for shape, _ in ctx.out_meta])
            for t, g in zip(ctx.inputs, in_grads):
                if t is None or g is None:
                    continue
                if t._ctx is None:
                    entry = leaf_grads.get(id(t))
                    if entry is None:
                        leaf_grads[id(t)] = [t, g]
                    else:
                        entry[1] = entry[1] + g
                else:
                    k = (id(t._ctx), t._out_index)
                    pending[k] = g if k not in pending else pending[k] + g
            if early and i in early:
                for leaf in early.pop(i):
                    entry = leaf_grads.pop(id(leaf), None)
                    if entry is not None:
                        _commit_early(leaf, entry[1], user_grad, committed, pending, leaf_grads)
            if not retain_graph:
                ctx._release()
            # the loop names would keep the last input's array alive through the next node's backward
            in_grads = grads = t = g = None

    updates = []
    for leaf, g in leaf_grads.values():
        if leaf._hooks:
            g = _run_hooks(leaf._hooks, g)
        # Take the array as the leaf's own only if nothing else can see it.
        owned = g is not user_grad and getattr(g, "base", None) is None and id(g) not in committed
        committed.add(id(g))
        updates.append((leaf, g, owned))
    for leaf, g, owned in updates:
        leaf._accumulate_grad(g, owned)
    for leaf, _, _ in updates:
        if leaf._post_hooks:
            for hook in tuple(leaf._post_hooks):
                hook(leaf)
    if not retain_graph:
        for ctx in order:
            ctx._free()
