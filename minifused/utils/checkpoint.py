"""``torch.utils.checkpoint``: activation checkpointing. :func:`checkpoint` runs a function, keeps only its
inputs and its outputs, not its intermediate results, and runs it again in the backward, with the cpu
generator's state it had (dropout draws the same mask, on either device) and its autocast regions, to
differentiate it there: memory for the segment's activations traded for one more forward.

One tape node stands for the call. Its inputs are the tensor arguments and every tensor from outside that the
function used and that requires grad (the parameters of a module, a tensor it closes over): the first run
records its graph to find them (and which outputs are differentiable), then lets that graph go. The backward
walks the graph of the second run down to those tensors only and hands their gradients to the outer walk, so
each gets a gradient exactly when the outer backward asks for it (``backward(inputs=...)``, ``autograd.grad``
leave other ``.grad`` untouched), as with PyTorch's non-reentrant checkpoint.

``use_reentrant=True`` (PyTorch's default when it is not passed, with a warning) keeps the reentrant variant's
visible rules: no keyword arguments, no ``context_fn``, and when no tensor argument requires grad (a warning says
so) the result has no graph, so the parameters inside get no gradient; its tensors in a tuple (or the tensor)
returned all require grad, others none."""
from __future__ import annotations

import contextlib
import warnings

from .. import backend
from ..autograd import Function, enable_grad, higher, no_grad, tape, walk
from ..tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential", "noop_context_fn"]


def noop_context_fn():
    """The default ``context_fn``: a context for the first run and one for the recomputation, both doing nothing."""
    return contextlib.nullcontext(), contextlib.nullcontext()


class _Checkpoint(Function):
    @staticmethod
    def forward(ctx, *arrays, result, function, template, kwargs, rng, outside, differentiable, recompute_context):
        ctx.function, ctx.template, ctx.kwargs, ctx.rng = function, template, kwargs, rng
        ctx.recompute_context = recompute_context
        ctx.autocast = dict(backend.autocast_dtypes())  # the second run casts as the first did
        ctx.outside, ctx.differentiable = outside, differentiable
        ctx.save_for_backward(*arrays)  # in-place changes to the arguments (or the outside tensors) are refused
        return result

    @staticmethod
    def backward(ctx, *grads):
        arrays, n = ctx.saved_tensors, len(ctx.needs_input_grad) - len(ctx.outside)
        args = [Tensor._from_array(a, need) for a, need in zip(arrays[:n], ctx.needs_input_grad)]
        roots, start = _Checkpoint._rerun(ctx, args, grads)
        leaves = _Gathered()
        pending = _walk_inside(roots, start, leaves)
        return (*[leaves.grads.get(id(t)) if need else None for t, need in zip(args, ctx.needs_input_grad)],
                *[leaves.grads.get(id(t)) if t._ctx is None else pending.get((id(t._ctx), t._out_index))
                  for t in ctx.outside])

    @staticmethod
    def backward_graph(ctx, *grads):
        """Under ``create_graph``: the second run on the arguments as graph tensors, differentiated with a walk
        that records itself (the outer graph's nodes are not entered)."""
        arrays, n = ctx.saved_tensors, len(ctx.needs_input_grad) - len(ctx.outside)
        args = [ctx.graph_input(i, a) for i, a in enumerate(arrays[:n])]
        roots, start = _Checkpoint._rerun(ctx, args, grads)
        wanted = [t for t in (*args, *ctx.outside) if t.requires_grad]
        found = higher.walk(roots, wanted, True, start) if roots and wanted else {}
        return tuple(found[id(t)][1] if need and id(t) in found else None
                     for t, need in zip((*args, *ctx.outside), ctx.needs_input_grad))

    @staticmethod
    def _rerun(ctx, args, grads):
        """The function run again on ``args`` as the first run ran it (its random state and autocast): the
        (output, gradient) pairs to walk from, and the ``seq`` its nodes are numbered from."""
        saved = _cpu_rng_state() if ctx.rng is not None else None
        autocast = backend.autocast_dtypes()
        outer_autocast = dict(autocast)
        try:
            if ctx.rng is not None:
                _set_cpu_rng_state(ctx.rng)
            autocast.clear()
            autocast.update(ctx.autocast)
            start = next(tape._recorded)  # the second run's nodes are numbered from here on
            with enable_grad(), ctx.recompute_context:
                out = ctx.function(*_fill(ctx.template, args), **ctx.kwargs)
        finally:
            if saved is not None:
                _set_cpu_rng_state(saved)
            autocast.clear()
            autocast.update(outer_autocast)
        outs = _flatten(out)[0]
        roots = [(o, g) for o, g, d in zip(outs, grads, ctx.differentiable) if d and g is not None and o.requires_grad]
        return roots, start


class _Gathered:
    """The leaves' gradients of the walk inside a checkpoint, kept here (by id): no ``.grad`` is written and no
    hook of a leaf runs (the outer walk does both, once, with the whole gradient)."""

    def __init__(self):
        self.grads = {}

    def add(self, leaf, g, rows=None):  # (the rows of a row-sparse gradient are not carried out of a checkpoint)
        if g.shape != leaf._data.shape or g.dtype != leaf._data.dtype:
            g = walk._fit(g, leaf._data, "a backward's gradient for a leaf")
        k = id(leaf)
        self.grads[k] = g if k not in self.grads else walk._sum(self.grads[k], g)


def _walk_inside(roots, start, leaves):
    """The reverse walk of the nodes recorded since ``start`` that ``roots`` (tensor, gradient) reach; the
    nodes recorded before (the outer graph: the outer walk runs them) are not entered. The gradients of leaves
    go to ``leaves``; those of earlier nodes' outputs are returned, keyed (id(node), output index)."""
    pending, inside = {}, {}
    for t, g in roots:
        if t._ctx is None:
            leaves.add(t, g)
            continue
        key = (id(t._ctx), t._out_index)
        pending[key] = g if key not in pending else walk._sum(pending[key], g)
        if t._ctx.seq >= start:
            inside[id(t._ctx)] = t._ctx
    # (an earlier node's output counts no consumer there: no Handoff to it, the outer walk runs that node)
    order, consumers = walk._backward_order(list(inside.values()), since=start)
    for node in order:
        walk._run_node(node, pending, leaves, consumers)
        node._release()
    return pending


def _outside(outs, start, own):
    """The tensors from outside the call (not among ``own``, the call's wrapped arguments) that require grad and
    that the graph of ``outs``, recorded since ``start``, reaches: leaves, and outputs of earlier nodes."""
    found, seen, stack = {}, set(), []

    def visit(t):
        node = t._ctx
        if node is None:
            if id(t) not in own:
                found.setdefault(("leaf", id(t)), t)
        elif node.seq < start:
            key = (id(node), t._out_index)
            if key not in found:
                tensor = t() if isinstance(t, tape._Edge) else t
                if tensor is None:
                    raise RuntimeError("checkpoint: the function used a tensor that requires grad from outside "
                                       "and that is gone since; keep a reference to it")
                found[key] = tensor
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append(node)

    for o in outs:
        if o.requires_grad:
            visit(o)
    while stack:
        for t in stack.pop().inputs:
            if t is not None:
                visit(t)
    return list(found.values())


def _cpu_rng_state():
    """The cpu generator's state: what dropout draws its masks from, on either device (a cuda tensor drawn
    by minifused.rand inside the function is drawn again differently)."""
    return dict(backend.generator(backend.CPU).bit_generator.state)


def _set_cpu_rng_state(state):
    backend.generator(backend.CPU).bit_generator.state = state


def _fill(template, tensors):
    """The call's positional arguments: ``template`` with its tensor slots (None) filled in order."""
    it = iter(tensors)
    return [next(it) if slot is None else slot[0] for slot in template]


_REENTRANT_WARNING = (
    "the use_reentrant parameter should be passed explicitly. {when} use_reentrant=False is recommended, but if "
    "you need to preserve the current default behavior, you can pass use_reentrant=True. Refer to docs for more "
    "details on the differences between the two variants.")


def checkpoint(function, *args, use_reentrant=None, context_fn=noop_context_fn, determinism_check="default",
               debug=False, preserve_rng_state=True, **kwargs):
    """``function(*args, **kwargs)`` checkpointed (see the module): its result, recorded so that the backward
    runs ``function`` again. Tensor arguments, and the tensors from outside that it uses and that require grad,
    are its differentiable inputs; other arguments are passed as they are. Outputs of an integer or bool dtype,
    and detached ones, do not require grad. ``context_fn()`` gives the contexts the first run and the
    recomputation run in (non-reentrant only, as PyTorch's); ``determinism_check`` ('default' or 'none') and
    ``debug`` are accepted. Without ``use_reentrant`` a warning asks for it and the reentrant rules apply, as in
    PyTorch."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: " + _REENTRANT_WARNING.format(
            when="Starting in PyTorch 2.9, calling checkpoint without use_reentrant will raise an exception."),
            UserWarning, stacklevel=2)
        use_reentrant = True
    if not callable(function):
        raise TypeError(f"checkpoint: expected a callable, got {type(function).__name__}")
    context_fn = noop_context_fn if context_fn is None else context_fn
    if use_reentrant:
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        if context_fn is not noop_context_fn or debug is not False:
            raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
        if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", UserWarning,
                          stacklevel=2)
            with no_grad():  # (PyTorch's reentrant checkpoint records nothing then)
                return function(*args)
    else:
        if determinism_check not in ("default", "none"):
            raise ValueError(f"determinism_check should be one of ['default', 'none'], but got {determinism_check}")
        if debug and context_fn is not noop_context_fn:
            raise ValueError("debug=True is incompatible with non-default context_fn")
    forward_context, recompute_context = context_fn()
    template = [None if isinstance(a, Tensor) else (a,) for a in args]
    tensors = [a for a in args if isinstance(a, Tensor)]
    rng = _cpu_rng_state() if preserve_rng_state else None
    own = [Tensor._from_array(t._data, t.requires_grad) for t in tensors]
    start = next(tape._recorded)  # this run's nodes are numbered from here on
    with forward_context:
        out = function(*_fill(template, own), **kwargs)
    outs, rebuild = _flatten(out)
    if not outs:
        return out  # nothing to differentiate (PyTorch's returns it as it is)
    outside = _outside(outs, start, {id(t) for t in own})
    if use_reentrant:  # the tensor returned, or those of a tuple returned, require grad if floating; others none
        top = {id(out)} if isinstance(out, Tensor) else {id(o) for o in out} if isinstance(out, tuple) else set()
        differentiable = tuple(id(o) in top and backend.is_floating(o.dtype) for o in outs)
    else:
        differentiable = tuple(o.requires_grad for o in outs)
    result = tuple(o._data for o in outs)
    del out, outs  # the first run's graph goes
    node_outs = _Checkpoint.apply(*tensors, *outside, result=result, function=function, template=template,
                                  kwargs=kwargs, rng=rng, outside=outside, differentiable=differentiable,
                                  recompute_context=recompute_context)
    node_outs = (node_outs,) if isinstance(node_outs, Tensor) else node_outs
    return rebuild(iter(o if d else o.detach() for o, d in zip(node_outs, differentiable)))


def _flatten(out):
    """The tensors in ``out`` (a tensor, or tuples, lists and dicts of them and of other values, as PyTorch's
    checkpoint returns them) in order, and a function that builds the same structure from an iterator of
    tensors in their places."""
    if isinstance(out, Tensor):
        return [out], next
    if isinstance(out, (tuple, list)):
        parts = [_flatten(o) for o in out]
        kind = type(out)

        def rebuild(it):
            items = [build(it) for _, build in parts]
            return kind(*items) if hasattr(kind, "_fields") else kind(items)  # (a namedtuple by its fields)
        return [t for ts, _ in parts for t in ts], rebuild
    if isinstance(out, dict):
        parts = {k: _flatten(v) for k, v in out.items()}
        return ([t for ts, _ in parts.values() for t in ts],
                lambda it: type(out)((k, build(it)) for k, (_, build) in parts.items()))
    return [], lambda it: out


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):  # noqa: A002
    """``functions`` (a Sequential or a list of modules) run in ``segments`` checkpointed chunks, the last one
    plainly, as PyTorch's; its one keyword argument is ``preserve_rng_state``."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint.checkpoint_sequential: " + _REENTRANT_WARNING.format(
            when="In version 2.9 we will raise an exception if use_reentrant is not passed."), UserWarning,
            stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    functions = list(functions.children()) if hasattr(functions, "children") else list(functions)
    if not isinstance(segments, int) or segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be a positive int, got {segments!r}")
    size = max(1, len(functions) // segments)

    def run(start, end):
        def chunk(x):
            for f in functions[start:end]:
                x = f(x)
            return x
        return chunk

    end = 0
    for start in range(0, size * (segments - 1), size):
        end = start + size
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, preserve_rng_state=preserve)
    return run(end, len(functions))(input)
