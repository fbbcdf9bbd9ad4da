"""The order of a reverse walk, shared by the array walk (:mod:`.walk`) and the one that records itself
(:mod:`.higher`): every node after the nodes that consume its outputs, less those that lead to no wanted tensor."""
from __future__ import annotations

import operator

from .tape import _FREED_MESSAGE


def _backward_order(root_ctxs, since=-1, pruned=False):
    """Nodes reachable from ``root_ctxs``, each after every node that consumes its outputs, and the number of
    consumers of each node output, keyed ``(id(producer), output index)``. A node is recorded after the nodes
    that made its inputs, so the order of recording, reversed, is such an order (``Context.seq``). Nodes
    recorded before ``since`` (a ``seq``) are not entered (a checkpoint's walk inside its own graph). A freed node
    raises, unless the walk is ``pruned`` to its inputs: :func:`_prune` then checks the nodes it keeps."""
    consumers, seen = {}, {id(c) for c in root_ctxs}
    nodes, stack = list(root_ctxs), list(root_ctxs)
    while stack:
        ctx = stack.pop()
        if ctx.freed and not pruned:
            raise RuntimeError(_FREED_MESSAGE.format(name=ctx.fn.__name__))
        for t in ctx.inputs:
            parent = None if t is None else t._ctx
            if parent is None or parent.seq < since:
                continue
            key = (id(parent), t._out_index)
            consumers[key] = consumers.get(key, 0) + 1
            if id(parent) not in seen:
                seen.add(id(parent))
                nodes.append(parent)
                stack.append(parent)
    nodes.sort(key=_seq_of, reverse=True)
    return nodes, consumers


_seq_of = operator.attrgetter("seq")


def _prune(order, wanted):
    """``order`` (see :func:`_backward_order`) less the nodes that lead to none of the ``wanted`` tensors (the
    inputs of ``autograd.grad`` or ``backward(inputs=...)``): their backwards, hooks and retained grads do not run,
    as in PyTorch. Also the ids of the nodes kept only because they produce a wanted non-leaf tensor (as it is
    now: one changed in place since is another node's output): their output's gradient is taken, their backward
    does not run."""
    leaf_ids = {id(t) for t in wanted if t._ctx is None}
    targets = {(id(t._ctx), t._out_index) for t in wanted if t._ctx is not None}
    producers = {key[0] for key in targets}
    leading = set()
    for ctx in reversed(order):  # every producer before its consumers
        for t in ctx.inputs:
            if t is None:
                continue
            p = t._ctx
            if id(t) in leaf_ids if p is None else (id(p) in leading or (id(p), t._out_index) in targets):
                leading.add(id(ctx))
                break
    kept = [ctx for ctx in order if id(ctx) in leading or id(ctx) in producers]
    for ctx in kept:  # (a freed node that only made a wanted tensor is not walked through: PyTorch's too)
        if ctx.freed and id(ctx) in leading:
            raise RuntimeError(_FREED_MESSAGE.format(name=ctx.fn.__name__))
    return kept, {id(ctx) for ctx in kept if id(ctx) not in leading}
