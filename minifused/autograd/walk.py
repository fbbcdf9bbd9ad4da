"""The reverse walk: :func:`backward` and :func:`grad`, the leaves' gradients, hooks, and the callbacks and
early commits that data parallelism uses."""
from __future__ import annotations

import threading
import warnings

import numpy as np

from .. import backend
from ..kernels.elementwise import add as _add  # the sum of two 16-bit gradients in one vectorized kernel
from . import higher
from .order import _backward_order, _prune
from .tape import Handoff, _check_versions, _refuse_rewritten, _shown, show_to_user
from .modes import _check_op, _checks, _mode, enable_grad, no_grad as _no_grad

_Tensor = None  # the Tensor class, registered by minifused.tensor (see the package's _register_tensor_type)


# ---------------------------------------------------------------- the reverse walk
def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None, inputs=None):
    """Accumulate d(tensors)/d(leaf), weighted by ``grad_tensors``, into ``leaf.grad`` for every leaf that
    requires grad (with ``inputs``: for those tensors only; a non-leaf among them gets its ``.grad`` too), as
    ``torch.autograd.backward``: one walk from every tensor of ``tensors`` (a tensor or a sequence) at once.

    All gradients are computed before any ``.grad`` is touched, so an error leaves
    every ``.grad`` as it was: except for leaves with post-accumulate-grad hooks, whose
    ``.grad`` is written as soon as it is complete. Without ``retain_graph``, each node's
    saved arrays and inputs are let go as soon as its backward has run (as PyTorch does:
    after an error the nodes already walked cannot be walked again). Callbacks queued by
    hooks (:func:`queue_callback`) run at the end. The walk, its hooks and callbacks run with
    grad mode off, as PyTorch's (a hook's arithmetic records nothing; a post-accumulate-grad
    hook may update its parameter in place).
    """
    if grad_variables is not None:  # (PyTorch's deprecated spelling)
        warnings.warn("`grad_variables` is deprecated. Use `grad_tensors` instead.", FutureWarning, stacklevel=2)
        if grad_tensors is not None:
            raise RuntimeError("`grad_tensors` and `grad_variables` (deprecated) arguments both passed to "
                               "`backward()`. Please only use `grad_tensors`.")
    single = isinstance(tensors, _Tensor) or not hasattr(tensors, "__iter__")  # (else any iterable, as PyTorch's)
    roots = [tensors] if single else list(tensors)
    grads = grad_tensors if grad_tensors is not None else grad_variables
    if single:  # one tensor, one gradient (an array-like one too)
        grads = [grads]
    else:
        grads = [None] * len(roots) if grads is None else list(grads) if isinstance(grads, (list, tuple)) else [grads]
    if len(grads) != len(roots):  # (PyTorch's RuntimeError for too few; it ignores extra ones, a slip refused here)
        raise RuntimeError(f"backward: got {len(roots)} tensors and {len(grads)} gradients")
    for t in roots:
        if not isinstance(t, _Tensor):
            raise TypeError(f"backward: expected tensors to differentiate, got {type(t).__name__}")
    wanted = _backward_inputs(inputs)
    outer, _callbacks.queue = _callbacks.queue, []
    grad_mode, _mode.enabled = _mode.enabled, False
    try:
        if create_graph:
            _warn_create_graph_cycle()
            found = higher.walk([(t, _graph_seed(t, g, i)) for i, (t, g) in enumerate(zip(roots, grads))], wanted,
                                create_graph if retain_graph is None else retain_graph)
            _graph_leaf_grads(found, wanted)
            queue = _callbacks.queue
            while queue:
                queue.pop(0)()
            return
        seeds = [_seed(t, g, i) for i, (t, g) in enumerate(zip(roots, grads))]
        user_grads = tuple(u for _, u in seeds if u is not None)
        leaves = _LeafGrads(user_grads) if wanted is None else _Only(user_grads, wanted)
        _backward([(t, g) for t, (g, _) in zip(roots, seeds)], leaves, bool(retain_graph), wanted)
        queue = _callbacks.queue
        while queue:
            queue.pop(0)()
    finally:
        _callbacks.queue = outer
        _mode.enabled = grad_mode


_cycle_warned = [False]


def _warn_create_graph_cycle():
    """PyTorch warns once per process that ``backward(create_graph=True)`` ties each leaf to its ``.grad``'s graph."""
    if not _cycle_warned[0]:
        _cycle_warned[0] = True
        warnings.warn("Using backward() with create_graph=True will create a reference cycle between the parameter "
                      "and its gradient which can cause a memory leak. We recommend using autograd.grad when creating "
                      "the graph to avoid this. If you have to use this function, make sure to reset the .grad fields "
                      "of your parameters to None after use to break the cycle and avoid the leak.", UserWarning,
                      stacklevel=3)


def _backward(roots, leaves, retain_graph, wanted=None):
    """The core: every node after its consumers turns its outputs' gradients into its inputs'. ``roots``:
    (tensor, gradient) pairs the walk starts from; ``wanted``: the tensors whose gradients are asked for (None:
    every leaf's), see :func:`_prune`."""
    outer, _shown.ids = _shown.ids, set()
    try:
        _walk(roots, leaves, retain_graph, wanted)
    finally:
        _shown.ids = outer


def _walk(roots, leaves, retain_graph, wanted=None):
    pending, root_ctxs = {}, []
    for root, grad in roots:
        if root._ctx is None:
            leaves.add(root, grad)
            continue
        key = (id(root._ctx), root._out_index)
        pending[key] = grad if key not in pending else _sum(_total(pending[key]), grad)
        if not any(c is root._ctx for c in root_ctxs):
            root_ctxs.append(root._ctx)
    order = []
    if root_ctxs:
        order, consumers = _backward_order(root_ctxs, -1, wanted is not None)
        stops = ()
        if wanted is not None:
            order, stops = _prune(order, wanted)
        early = _early_commits(order) if _post_hooks_used[0] else {}
        for i, ctx in enumerate(order):
            if stops and id(ctx) in stops:
                _output_grads(ctx, pending)  # its output's hooks and retained grad; nothing below is wanted
            else:
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
    # (a _GradSum's two gradients go to the backward that adds them in its own pass)
    backward, grads = ((ctx.fn.backward_sum, (grads[0].a, grads[0].b)) if type(grads[0]) is _GradSum
                       else (ctx.fn.backward, grads))
    if type(grads[0]) is np.ndarray:  # NumPy's floating-point warnings silenced, as in the forward (tape._on_host)
        with np.errstate(all="ignore"):
            in_grads = backward(ctx, *grads)
    else:
        in_grads = backward(ctx, *grads)
    if not isinstance(in_grads, tuple):
        in_grads = (in_grads,)
    if _checks.anomaly or backend.is_debug():
        _check_op(ctx.fn.__name__, "backward gradient for input", in_grads, grads)
    for t, g in zip(ctx.inputs, in_grads):
        if t is None or g is None:
            continue
        # a gradient in its input's dtype, as PyTorch's engine casts it (an array op can widen one: CuPy computes
        # bfloat16 with a Python number in float32)
        dtype = t._data.dtype if t._ctx is None else t._ctx.out_meta[t._out_index][1]
        if getattr(g, "dtype", dtype) != dtype:
            g = g.astype(dtype)
        if t._ctx is None:
            rows = ctx.fn.sparse_rows  # (None but for a row-sparse backward: see Function.sparse_rows)
            if rows is None:
                leaves.add(t, g)
            else:
                leaves.add(t, g, rows(ctx))
        else:
            key = (id(t._ctx), t._out_index)
            pending[key] = g if key not in pending else _sum_for(t._ctx, pending[key], g)


def _sum(a, b):
    """Two gradients of one output, added (never a :class:`Handoff`: the engine delivers those untouched)."""
    if isinstance(a, Handoff) or isinstance(b, Handoff):
        raise RuntimeError("autograd: a Handoff met another gradient for the same output; a backward may "
                           "return one only for an input whose ctx.sole_producer(i) it got")
    return _add(a, b)


class _GradSum:
    """The two gradients of a node's single output, not yet added: that node's backward adds them in its own pass
    (its Function's ``backward_sum(ctx, a, b)``, where ``takes_sum(ctx, a, b)`` says it does: a ReLU's mask pass),
    which saves the sum's write and its read. Only the inline path of :func:`_run_node` hands one to a backward;
    everything else (hooks, retained grads, a third gradient) sees the sum (:func:`_total`)."""

    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a, self.b = a, b


def _total(g):
    return _sum(g.a, g.b) if type(g) is _GradSum else g


def _sum_for(ctx, a, b):
    """The pending gradient of ``ctx``'s output after ``b`` joins ``a``: a :class:`_GradSum` where ctx's backward
    takes the sum (one output, no hooks or retained grad on it, no anomaly or debug checks, which read each
    gradient), else the sum."""
    if (type(a) is not _GradSum and not isinstance(a, Handoff) and not isinstance(b, Handoff)
            and len(ctx.out_meta) == 1 and not ctx.hooks and not ctx.retained
            and not (_checks.anomaly or backend.is_debug())):
        takes = getattr(ctx.fn, "takes_sum", None)
        if takes is not None and takes(ctx, a, b):
            return _GradSum(a, b)
    return _sum(_total(a), b)


def _output_grads(ctx, pending):
    """The gradients of ``ctx``'s outputs (None when none reached it): zeros for outputs that got none,
    then the outputs' hooks and retained grads."""
    if len(ctx.out_meta) == 1:
        grads = [_total(pending.pop((id(ctx), 0), None))]
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
            if getattr(ctx, "user_ctx", None) is not None or not ctx.fn.materialize_grads:  # (a custom Function
                continue  # materializes its own)
            grads[i] = backend.array_module(_any_array(grads)).zeros(shape, dtype)
        elif ctx.hooks and i in ctx.hooks:
            grads[i] = _run_hooks(ctx.hooks[i], grads[i])
        if ctx.retained and i in ctx.retained:
            kept = ctx.retained[i]()  # None once the tensor is gone: no .grad left to keep
            if kept is not None:
                _retain(kept, grads[i])


def _retain(t, g):
    """A non-leaf's retained ``.grad`` gets gradient ``g``: a copy, or the sum as a new tensor (out of place, as
    PyTorch's retain_grad: a ``.grad`` the caller still holds keeps its values)."""
    if t._grad is None:
        t._accumulate_grad(g, owned=False)
    else:
        t._grad = _Tensor._from_array(_add(t._grad._data, g))


def _any_array(grads):
    return next(g for g in grads if g is not None and not isinstance(g, Handoff))


def _seed(root, gradient, i=0, op="backward()"):
    """The gradient of ``root`` (output ``i`` of the call ``op``) the walk starts from, and the caller's array (None
    for the implicit one)."""
    if not root.requires_grad:
        raise RuntimeError(f"{op}: element {i} of tensors does not require grad and does not have a grad_fn")
    if root._rewritten is not None:
        _refuse_rewritten(op, root)
    if gradient is None:
        if root._data.size != 1:
            raise RuntimeError(
                f"{op}: grad can be implicitly created only for scalar outputs, got shape "
                f"{tuple(root.shape)}; pass gradient= of that shape")
        return backend.ones_like(root._data), None
    if not isinstance(gradient, _Tensor):
        raise TypeError(f"{op}: gradients can be either Tensors or None, but got {type(gradient).__name__}")
    if gradient.device != root.device:
        raise RuntimeError(f"{op}: gradient is on {gradient.device} but the tensor is on {root.device}")
    if gradient.shape != root.shape:  # (PyTorch's words)
        raise RuntimeError(f"{op}: Mismatch in shape: grad_output[{i}] has a shape of {tuple(gradient.shape)} and "
                           f"output[{i}] has a shape of {tuple(root.shape)}")
    return _fit(gradient._data, root._data, f"{op}: gradient"), gradient._data


def _graph_seed(root, gradient, i=0, op="backward()"):
    """:func:`_seed` for a walk that records itself: the gradient as a tensor (the caller's own, which may require
    grad: a Hessian-vector product differentiates through it)."""
    array, _ = _seed(root, gradient, i, op)
    if gradient is None or array is not gradient._data:
        return _Tensor._from_array(array) if gradient is None else gradient.to(root.dtype)
    return gradient


def _graph_leaf_grads(found, wanted):
    """The leaves' gradient tensors of a walk that recorded itself, into ``.grad`` (out of place, as PyTorch
    accumulates a gradient that has a graph), after the leaves' hooks; then the post-accumulate hooks."""
    ids = None if wanted is None else {id(t) for t in wanted}
    done = []
    grad_mode, _mode.enabled = _mode.enabled, True  # (the hooks' and the sums' ops are recorded)
    try:
        for leaf, g in found.values():
            if leaf._ctx is not None or ids is not None and id(leaf) not in ids:
                continue
            g = higher.run_hooks(leaf._hooks, g) if leaf._hooks else g
            if leaf._requires_grad:  # (a leaf frozen after its graph was recorded gets none: Tensor._accumulate_grad)
                leaf._grad = g if leaf._grad is None else leaf._grad + g
            done.append(leaf)
    finally:
        _mode.enabled = grad_mode
    for leaf in done:
        if leaf._post_hooks:
            _run_post_hooks(leaf)


def _fit(g, like, what):
    """``g`` as a gradient of ``like``: the same shape (else a RuntimeError naming ``what``), cast to its dtype as
    PyTorch casts (a float64 or integer gradient never reaches a float32 tensor)."""
    if g.shape != like.shape:
        raise RuntimeError(f"{what} has shape {tuple(g.shape)} but the tensor has shape {tuple(like.shape)}")
    return g if g.dtype == like.dtype else g.astype(like.dtype)


def _run_hooks(hooks, grad):
    """Each hook sees the gradient and may return a replacement: a tensor of the same shape, dtype and device
    (else an error, as PyTorch's). The hooks registered when the gradient arrived run: one a hook adds or
    removes meanwhile does so from the next backward on, as PyTorch's."""
    for hook in tuple(hooks):
        if isinstance(grad, np.generic) or not _writeable(grad):
            grad = np.array(grad)  # a hook may write its tensor in place: a NumPy scalar or read-only view drops it
        show_to_user(grad)
        result = hook(_Tensor._from_array(grad, False))
        if result is None:
            continue
        if isinstance(result, _Tensor) and type(result._data) is not type(grad):
            raise RuntimeError(f"hook {getattr(hook, '__name__', hook)!r} returned a gradient on another device than "
                               f"the tensor's")
        grad = higher.checked_hook_result(hook, result, grad)._data
        show_to_user(grad)
    return grad


def _writeable(g):
    """Whether a gradient takes in-place writes (a NumPy view made by broadcasting does not; CuPy's arrays do)."""
    return type(g) is not np.ndarray or g.flags.writeable


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of ``outputs`` (weighted by ``grad_outputs``) with respect to ``inputs``, returned as a
    tuple, PyTorch's ``torch.autograd.grad``: no ``.grad`` anywhere is changed, and only the part of the graph
    that leads to ``inputs`` runs (hooks elsewhere do not fire). ``retain_graph`` defaults to ``create_graph``
    (a graph of the gradients, :mod:`.higher`). ``is_grads_batched``: each grad_output holds a batch of vectors
    along its first dim, the gradients come stacked so. ``only_inputs`` is deprecated and ignored, as in PyTorch."""
    if not only_inputs:
        warnings.warn("only_inputs argument is deprecated and is ignored now (defaults to True). To accumulate "
                      "gradient for other parts of the graph, please use autograd.backward.", FutureWarning,
                      stacklevel=2)
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, but got: "
                         "allow_unused=False.")
    single = isinstance(outputs, _Tensor)
    outputs = [outputs] if single else list(outputs)
    inputs = [inputs] if isinstance(inputs, _Tensor) else list(inputs)
    if not inputs:
        raise RuntimeError("autograd.grad: `inputs` argument to `grad()` cannot be empty.")
    if grad_outputs is None or isinstance(grad_outputs, _Tensor):
        grad_outputs = [grad_outputs] * len(outputs) if grad_outputs is None else [grad_outputs]
    grad_outputs = list(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise RuntimeError(f"autograd.grad: got {len(outputs)} tensors and {len(grad_outputs)} grad_outputs")
    for what, ts in (("outputs", outputs), ("inputs", inputs)):
        for t in ts:
            if not isinstance(t, _Tensor):  # (PyTorch raises a RuntimeError for inputs: both)
                raise backend.InputTypeError(f"autograd.grad: {what} must be tensors, got {type(t).__name__}")
    for i, t in enumerate(outputs):  # (PyTorch checks the outputs first)
        if not t.requires_grad:
            raise RuntimeError(f"autograd.grad: element {i} of tensors does not require grad and does not have a "
                               f"grad_fn")
    for t in inputs:
        if not t.requires_grad:
            raise RuntimeError("autograd.grad: one of the differentiated Tensors (inputs) does not require grad")
    if is_grads_batched:
        return _grad_batched(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                             materialize_grads)
    if create_graph:
        found = _grad_graph(outputs, inputs, grad_outputs, create_graph if retain_graph is None else retain_graph)
        return _grad_results(inputs, found, allow_unused, materialize_grads, True)
    saved = [(t, t._grad, getattr(t, "_retain", False)) for t in inputs]
    found = {}
    try:
        for t in inputs:
            t._grad = None
            if t._ctx is not None:
                t.retain_grad()
        outer, _callbacks.queue = _callbacks.queue, []
        grad_mode, _mode.enabled = _mode.enabled, False  # (as backward's walk)
        try:  # one walk from every output: each node and hook runs once, on its whole gradient
            seeds = [_seed(out, g, i, "grad()") for i, (out, g) in enumerate(zip(outputs, grad_outputs))]
            user_grads = tuple(u for _, u in seeds if u is not None)
            _backward([(out, seed) for out, (seed, _) in zip(outputs, seeds)], _Collected(user_grads, inputs),
                      bool(retain_graph), inputs)
        finally:
            _callbacks.queue = outer
            _mode.enabled = grad_mode
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
    # a non-leaf input the caller retains gets its gradient in .grad too, as PyTorch's retain_grad in any walk
    for key, t in {id(t): t for t, _, retained in saved if retained and t._ctx is not None and id(t) in found}.items():
        _retain(t, found[key]._data)
    return _grad_results(inputs, found, allow_unused, materialize_grads)


def _grad_batched(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, materialize_grads):
    """:func:`grad` with ``is_grads_batched``: each grad_output's first dim is a batch of vectors; one walk per
    vector (PyTorch vectorizes them), the results stacked along a new first dim (zeros where one walk found no
    gradient that another did)."""
    sizes = set()
    for i, (out, g) in enumerate(zip(outputs, grad_outputs)):
        if not isinstance(g, _Tensor) or tuple(g.shape[1:]) != tuple(out.shape):
            raise RuntimeError(f"autograd.grad: if `is_grads_batched=True`, we interpret the first dimension of each "
                               f"grad_output as the batch dimension. The sizes of the remaining dimensions are "
                               f"expected to match the shape of corresponding output, but a mismatch was detected: "
                               f"grad_output[{i}] has a shape of "
                               f"{None if not isinstance(g, _Tensor) else tuple(g.shape)} and output[{i}] has a shape "
                               f"of {tuple(out.shape)}")
        sizes.add(g.shape[0])
    if len(sizes) > 1:
        raise RuntimeError(f"autograd.grad: with `is_grads_batched=True` every grad_output needs the same batch size, "
                           f"got {sorted(sizes)}")
    n = sizes.pop() if sizes else 0
    keep = create_graph if retain_graph is None else retain_graph
    with enable_grad() if create_graph else _no_grad():
        per = [grad(outputs, inputs, [g[b] for g in grad_outputs], retain_graph=keep if b == n - 1 else True,
                    create_graph=create_graph, allow_unused=True) for b in range(n)]
        result = []
        for j, t in enumerate(inputs):
            found = [p[j] for p in per]
            if all(g is None for g in found):
                result.append(None)
                continue
            # the gradients stacked along a new first dim: written into zeros (a recorded setitem under create_graph;
            # the ops' stack stands above this module)
            stacked = _Tensor._from_array(t._xp.zeros((n,) + t._data.shape, t._data.dtype))
            for b, g in enumerate(found):
                if g is not None:
                    stacked[b] = g
            result.append(stacked)
    return _grad_results(inputs, {id(t): g for t, g in zip(inputs, result) if g is not None}, allow_unused,
                         materialize_grads, create_graph, n)


def _grad_graph(outputs, inputs, grad_outputs, retain_graph):
    """:func:`grad`'s walk that records itself (``create_graph``): {id(input): gradient tensor}, the leaves'
    after their hooks."""
    outer, _callbacks.queue = _callbacks.queue, []
    try:
        roots = [(out, _graph_seed(out, g, i, "grad()")) for i, (out, g) in enumerate(zip(outputs, grad_outputs))]
        found = higher.walk(roots, inputs, retain_graph)
        wanted = {id(t) for t in inputs}
        with enable_grad():  # (the leaves' hooks are recorded)
            return {key: higher.run_hooks(t._hooks, g) if t._ctx is None and t._hooks else g
                    for key, (t, g) in found.items() if key in wanted}
    finally:
        _callbacks.queue = outer


def _grad_results(inputs, found, allow_unused, materialize_grads, create_graph=False, batch=None):
    """The gradients in ``inputs``' order; an unused input's None, or its zeros with ``materialize_grads`` (which
    require grad under ``create_graph``, as PyTorch's)."""
    result = []
    for j, t in enumerate(inputs):
        g = found.get(id(t))
        if g is None and not (allow_unused or materialize_grads):
            raise RuntimeError(f"autograd.grad: one of the inputs was not used to compute the outputs; pass "
                               f"allow_unused=True to get None for it (the differentiated tensor at index {j})")
        if g is None and materialize_grads:  # (batched: zeros for each vector of the batch)
            g = _Tensor._from_array(t._xp.zeros(t._data.shape if batch is None else (batch, *t._data.shape),
                                                t._data.dtype), bool(create_graph))
        result.append(g)
    return tuple(result)


# ---------------------------------------------------------------- leaf gradients
class _LeafGrads:
    """The leaves' gradients gathered by a walk, written into ``.grad`` once complete: at the end, or,
    for leaves with post-accumulate-grad hooks, as soon as the last node feeding them has run."""

    def __init__(self, user_grads):
        self.grads = {}  # id(leaf) -> [leaf, grad]
        self.rows = {}  # id(leaf) -> the rows its row-sparse gradients hold (see Function.sparse_rows)
        self.given = set()  # ids of arrays that became a leaf's own .grad
        self.user_grads = user_grads  # the callers' gradient arrays (never made a leaf's own .grad)

    def add(self, leaf, g, rows=None):
        if g.shape != leaf._data.shape or g.dtype != leaf._data.dtype:  # a custom Function's backward may err
            g = _fit(g, leaf._data, "a backward's gradient for a leaf")
        entry = self.grads.get(id(leaf))
        if entry is None:
            self.grads[id(leaf)] = [leaf, g]
        else:
            entry[1] = _add(entry[1], g)
        if rows is not None:  # (several lookups of one table: the union of their rows)
            had = self.rows.get(id(leaf))
            self.rows[id(leaf)] = rows if had is None else had | rows

    def rows_of(self, leaf):
        """The rows ``leaf``'s row-sparse gradients of this walk hold (None: none was row-sparse)."""
        return self.rows.pop(id(leaf), None) if self.rows else None

    def owns(self, g, still_held=()):
        """The one leaf-ownership rule: ``g`` may become a leaf's ``.grad`` as it is (no copy) only if
        nothing else can see it: not the caller's gradient, not a view, not another leaf's ``.grad``, not one
        user code saw (:func:`show_to_user`), and not held by anything still in the walk (``still_held``)."""
        if (getattr(g, "base", None) is not None or id(g) in self.given or _shown.ids and id(g) in _shown.ids
                or self.user_grads and any(g is u for u in self.user_grads)
                or still_held and any(h is g for h in still_held)):  # (a training step's are empty: no scans)
            return False
        self.given.add(id(g))
        return True

    def commit_early(self, leaves, pending):
        """Write these leaves' complete gradients during the walk and run their post-accumulate hooks
        (a hook may start an asynchronous reduction of the ``.grad`` in place)."""
        for leaf in leaves:
            entry = self.grads.pop(id(leaf), None)
            if entry is None:
                continue
            g = _run_hooks(leaf._hooks, entry[1]) if leaf._hooks else entry[1]
            held = (h for p in pending.values() for h in ((p.a, p.b) if type(p) is _GradSum else (p,)))
            owned = self.owns(g, (*held, *(e[1] for e in self.grads.values())))
            leaf._accumulate_grad(g, owned, self.rows_of(leaf))
            _run_post_hooks(leaf)

    def commit_all(self):
        """Every remaining leaf's hooks, then every ``.grad`` written, then the post-accumulate hooks."""
        updates = []
        for leaf, g in self.grads.values():
            updates.append((leaf, _run_hooks(leaf._hooks, g) if leaf._hooks else g))
        self.grads.clear()
        for leaf, g in updates:
            leaf._accumulate_grad(g, self.owns(g), self.rows_of(leaf))
        for leaf, _ in updates:
            if leaf._post_hooks:
                _run_post_hooks(leaf)


def _run_post_hooks(leaf):
    """A leaf's post-accumulate-grad hooks (``hook(leaf)``), which must return None, as PyTorch's."""
    for hook in tuple(leaf._post_hooks):
        result = hook(leaf)
        if result is None:
            continue
        name = getattr(hook, '__name__', hook)
        if not isinstance(result, _Tensor):  # (PyTorch's TypeError; a tensor returned is its RuntimeError)
            raise TypeError(f"post-accumulate-grad hook {name!r} returned {type(result).__name__}: Tensor post "
                            f"accumulate grad hooks should return None")
        raise RuntimeError(f"post-accumulate-grad hook {name!r} returned a value: Tensor post accumulate grad hooks "
                           f"should return None")


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


class _Only(_LeafGrads):
    """The leaf gradients of ``backward(inputs=...)``: only the given leaves get theirs (a non-leaf input gets its
    own as a retained grad: :func:`_backward_inputs`)."""

    def __init__(self, user_grads, wanted):
        super().__init__(user_grads)
        self.wanted = {id(t) for t in wanted}

    def add(self, leaf, g, rows=None):
        if id(leaf) in self.wanted:
            super().add(leaf, g, rows)


def _backward_inputs(inputs):
    """``backward``'s ``inputs`` as a list of tensors that require grad (None: every leaf); a non-leaf among them
    retains its grad from now on, as in PyTorch."""
    if inputs is None:
        return None
    wanted = [inputs] if isinstance(inputs, _Tensor) or not hasattr(inputs, "__iter__") else list(inputs)
    if not wanted:
        raise RuntimeError("backward: inputs, when given, must not be empty")
    for t in wanted:
        if not isinstance(t, _Tensor):
            raise TypeError(f"backward: inputs must be tensors, got {type(t).__name__}")
        if not t.requires_grad:
            raise RuntimeError("backward: one of the inputs does not require grad")
    for t in wanted:
        if t._ctx is not None:
            t.retain_grad()
    return wanted


class _Collected(_LeafGrads):
    """The leaf gradients of a walk for :func:`grad`: only the asked-for leaves get theirs (into ``.grad``,
    which :func:`grad` restores afterwards); no other leaf is touched and no post-accumulate hook runs."""

    def __init__(self, user_grads, wanted):
        super().__init__(user_grads)
        self.wanted = {id(t) for t in wanted}

    def commit_early(self, leaves, pending):
        pass  # everything waits for commit_all

    def commit_all(self):
        for leaf, g in self.grads.values():
            if id(leaf) in self.wanted:
                leaf._accumulate_grad(_run_hooks(leaf._hooks, g) if leaf._hooks else g, self.owns(g))
        self.grads.clear()
