"""``create_graph=True``: the reverse walk that records itself, so that a gradient has a graph of its own and can be
differentiated again (PyTorch's double backward: gradient penalties, Hessian-vector products, PDE residuals).

The walk is the array walk's (:mod:`.walk`: the same order, pruning, hooks and retained grads) with tensors for
gradients and grad mode on. Each node runs its op's ``backward_graph(ctx, *grads)``: the outputs' gradients come as
tensors and the inputs' go back as tensors, computed with recorded tensor ops. It reaches the op's inputs and
outputs as tensors of the graph through :meth:`~.tape.Context.graph_input` and :meth:`~.tape.Context.graph_output`,
so a second walk through those ops reaches the first graph's nodes (which is why the graph is retained). An op whose
backward_graph uses only ops that have one of their own can be differentiated any number of times. An op without
one raises NotImplementedError naming it: its gradient would miss its second-order terms.
"""
from __future__ import annotations

import functools

from .. import backend
from .modes import _check_op, _checks, _mode, no_grad
from .order import _backward_order, _prune
from .tape import Function, _check_versions, _recorded

_Tensor = None  # the Tensor class, registered by minifused.tensor (see the package's _register_tensor_type)


def differentiate(build, inputs, grads):
    """For a ``backward_graph`` that rebuilds its op's forward from recorded ops (a fused op: a norm, a loss): the
    gradients of ``build(*inputs)`` (a tensor or a tuple of them), weighted by ``grads`` (one tensor per output),
    with respect to each of ``inputs`` that requires grad (graph tensors from ``ctx.graph_input``: a constant
    one, a number or None pass to build as they are and get None), as tensors of the graph, None where none
    flows. The walk enters only the nodes the rebuild recorded, not the graph below its inputs."""
    since = next(_recorded)
    outs = build(*inputs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    wanted = [t for t in inputs if isinstance(t, _Tensor) and t.requires_grad]
    roots = [(o, g) for o, g in zip(outs, grads) if g is not None and o.requires_grad]
    found = walk(roots, wanted, True, since) if roots and wanted else {}
    return tuple(found[id(t)][1] if isinstance(t, _Tensor) and id(t) in found else None for t in inputs)


def walk(roots, wanted, retain_graph=True, since=-1):
    """The gradients of ``roots`` ((tensor, gradient tensor) pairs) as tensors that carry their own graph:
    {id(tensor): (tensor, gradient)} for every leaf reached (``wanted``: None) or for the ``wanted`` tensors too
    (leaves or not). Hooks run on the gradient tensors; retained grads get them. Without ``retain_graph`` the
    walked nodes are freed at the end (the new gradients' graph then cannot reach them). Nodes recorded before
    ``since`` (a ``seq``) are not entered: a wanted tensor made by one gets what reached it."""
    grad_mode, _mode.enabled = _mode.enabled, True
    try:
        pending, found, root_ctxs = {}, {}, []
        for root, g in roots:
            if root._ctx is None:
                _add_found(found, root, g)
                continue
            _add_pending(pending, (id(root._ctx), root._out_index), g)
            if root._ctx.seq >= since and not any(c is root._ctx for c in root_ctxs):
                root_ctxs.append(root._ctx)
        targets = {} if wanted is None else {(id(t._ctx), t._out_index): t for t in wanted if t._ctx is not None}
        order, stops, useful = _backward_order(root_ctxs, since, wanted is not None)[0] if root_ctxs else [], (), {}
        if wanted is not None and order:
            order, stops = _prune(order, wanted)
            useful = _useful_inputs(order, wanted, targets)
        for ctx in order:
            grads = _output_grads(ctx, pending, found, targets)
            if grads is None or id(ctx) in stops:
                continue
            _run_node(ctx, grads, pending, found, useful.get(id(ctx)))
        for key, t in targets.items():  # made by a node not entered (see since)
            if key in pending:
                found[id(t)] = (t, pending.pop(key))
        if not retain_graph:
            for ctx in order:
                ctx._free()
        return found
    finally:
        _mode.enabled = grad_mode


def _useful_inputs(order, wanted, targets):
    """{id(node): which of its inputs lead to a ``wanted`` tensor} (``order``: every producer after its consumers):
    a backward_graph computes only those (``grad(critic, x, create_graph=True)`` records no weight gradients)."""
    leaf_ids = {id(t) for t in wanted if t._ctx is None}
    leading, useful = set(), {}
    for ctx in reversed(order):
        flags = tuple(t is not None and (id(t) in leaf_ids if t._ctx is None else
                                         id(t._ctx) in leading or (id(t._ctx), t._out_index) in targets)
                      for t in ctx.inputs)
        if True in flags:
            leading.add(id(ctx))
        useful[id(ctx)] = flags
    return useful


def _run_node(ctx, grads, pending, found, useful=None):
    run = getattr(ctx.fn, "backward_graph", None)
    if run is None:
        raise NotImplementedError(f"{ctx.fn.__name__}: differentiating its gradient (create_graph=True, a gradient "
                                  f"of a gradient) is not supported for this op")
    if ctx.versions:
        _check_versions(ctx)
    needs = ctx.needs_input_grad
    if useful is not None and False in useful:
        ctx.needs_input_grad = tuple(n and u for n, u in zip(needs, useful))
    try:
        in_grads = run(ctx, *grads)
    finally:
        ctx.needs_input_grad = needs
    if not isinstance(in_grads, tuple):
        in_grads = (in_grads,)
    if _checks.anomaly or backend.is_debug():  # (as the array walk checks each backward's gradients)
        _check_op(ctx.fn.__name__, "backward gradient for input", [None if g is None else g._data for g in in_grads],
                  [g._data for g in grads if g is not None])
    for t, g in zip(ctx.inputs, in_grads):
        if t is None or g is None:
            continue
        dtype = t.dtype if t._ctx is None else t._ctx.out_meta[t._out_index][1]
        if g.dtype != dtype:
            g = g.to(dtype)
        if t._ctx is None:
            _add_found(found, t, g)
        else:
            _add_pending(pending, (id(t._ctx), t._out_index), g)


def _add_pending(pending, key, g):
    pending[key] = g if key not in pending else pending[key] + g


def _add_found(found, t, g):
    entry = found.get(id(t))
    found[id(t)] = (t, g if entry is None else entry[1] + g)


def _output_grads(ctx, pending, found, targets):
    """``ctx``'s outputs' gradient tensors (zeros for those that got none, unless its Function takes None: see
    ``Function.materialize_grads``; None if none got one), after their hooks; retained grads and wanted non-leaf
    tensors get theirs."""
    grads = [pending.pop((id(ctx), i), None) for i in range(len(ctx.out_meta))]
    if all(g is None for g in grads):
        return None
    like = next(g for g in grads if g is not None)
    for i, (shape, dtype) in enumerate(ctx.out_meta):
        if grads[i] is None:
            if not ctx.fn.materialize_grads:
                continue
            grads[i] = _Tensor._from_array(like._xp.zeros(shape, dtype))
        if ctx.hooks and i in ctx.hooks:
            grads[i] = run_hooks(ctx.hooks[i], grads[i])
        if ctx.retained and i in ctx.retained:
            kept = ctx.retained[i]()
            if kept is not None:
                kept._grad = grads[i] if kept._grad is None else kept._grad + grads[i]
        wanted = targets.get((id(ctx), i))
        if wanted is not None:
            found[id(wanted)] = (wanted, grads[i])
    return grads


def run_hooks(hooks, g):
    """Each hook sees the gradient tensor and may return a replacement of the same shape and dtype (the hooks
    registered when it arrived, as :func:`.walk._run_hooks`)."""
    for hook in tuple(hooks):
        result = hook(g)
        if result is not None:
            g = checked_hook_result(hook, result, g)
    return g


def checked_hook_result(hook, result, g):
    """A tensor hook's replacement for gradient ``g`` (an array or a tensor), refused as PyTorch refuses it unless
    it is a tensor of g's dtype and shape."""
    name = getattr(hook, "__name__", hook)
    if not isinstance(result, _Tensor):
        raise TypeError(f"hook {name!r} returned {type(result).__name__}; a tensor hook must return a Tensor or None")
    if result.dtype != g.dtype:
        raise RuntimeError(f"hook {name!r} has changed the type of value (was {g.dtype} got {result.dtype})")
    if tuple(result.shape) != tuple(g.shape):
        raise RuntimeError(f"hook {name!r} has changed the size of value (was {tuple(g.shape)} got "
                           f"{tuple(result.shape)})")
    return result


# ---------------------------------------------------------------- once_differentiable
_TWICE = "trying to differentiate twice a function that was marked with @once_differentiable"


class _OnceDifferentiated(Function):
    """The node a ``once_differentiable`` backward's results hang from under ``create_graph``: differentiating
    through it raises (PyTorch's DelayedError)."""

    @staticmethod
    def forward(ctx, *arrays):
        return arrays if len(arrays) > 1 else arrays[0]

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(_TWICE)

    backward_graph = backward


def once_differentiable(backward):
    """PyTorch's ``autograd.function.once_differentiable``: a custom Function's backward run without recording
    (its ops need no ``backward_graph`` of their own). Under ``create_graph``, when a gradient it got requires
    grad, its results hang from a node whose own backward raises: a second differentiation fails loudly instead
    of missing the backward's terms."""
    @functools.wraps(backward)
    def wrapper(ctx, *args):
        with no_grad():
            outputs = backward(ctx, *args)
        if not _mode.enabled or not any(isinstance(a, _Tensor) and a.requires_grad for a in args):
            return outputs
        outs = outputs if isinstance(outputs, tuple) else (outputs,)
        where = [i for i, o in enumerate(outs) if isinstance(o, _Tensor)]
        if not where:
            return outputs
        linked = _OnceDifferentiated.apply(*[outs[i].detach().requires_grad_(outs[i].is_floating_point())
                                             for i in where])
        linked = linked if isinstance(linked, tuple) else (linked,)
        outs = list(outs)
        for i, t in zip(where, linked):
            outs[i] = t
        return tuple(outs) if isinstance(outputs, tuple) else outs[0]

    return wrapper
