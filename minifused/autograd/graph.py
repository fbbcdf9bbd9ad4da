"""The autograd graph as ``tensor.grad_fn`` shows it (PyTorch's ``torch.autograd.graph.Node``).

The tape's node is the op's :class:`~.tape.Context`; users walk the graph through :class:`Node` views of it:
``loss.grad_fn.next_functions[0][0]`` (PyTorch's tutorial), a graph printer's traversal, ``grad_fn.name()``.
A node's type is named ``<Op>Backward`` (``type(y.grad_fn).__name__``); its ``next_functions`` pair each input
with the node its gradient goes to: the producer's node and output index, an :class:`AccumulateGrad` for a leaf
that requires grad, ``(None, 0)`` for an input that needs none. One view per recorded op while it is held
(``y.grad_fn is y.grad_fn``), made only when asked for: recording an op costs nothing more."""
from __future__ import annotations

import weakref

from .tape import _Edge

__all__ = ["AccumulateGrad", "Node"]


class Node:
    """A recorded op of the autograd graph (see the module's docstring). A custom Function's node also reads its
    ``ctx``'s attributes (``saved_tensors``, what ``forward`` set on it), as PyTorch's does."""

    __slots__ = ("_ctx", "_metadata", "__weakref__")

    def __init__(self, ctx):
        self._ctx, self._metadata = ctx, None

    def name(self) -> str:
        return type(self).__name__

    @property
    def next_functions(self):
        return tuple(_next(t) for t in self._ctx.inputs)

    @property
    def metadata(self) -> dict:
        """A dict of the user's, kept with the node (as PyTorch's)."""
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    def __getattr__(self, name):
        user = getattr(self._ctx, "user_ctx", None) if name[0] != "_" else None
        if user is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")
        return getattr(user, name)

    def __repr__(self):
        return f"<{type(self).__name__} object at {id(self):#x}>"


class AccumulateGrad(Node):
    """The node a leaf's gradient goes to (into its ``.grad``): ``variable`` is the leaf; no next functions."""

    __slots__ = ("variable",)

    def __init__(self, variable):
        super().__init__(None)
        self.variable = variable

    @property
    def next_functions(self):
        return ()


_NODE_TYPES: dict = {}  # a Function -> its Node type, named <Function>Backward


def node_of(ctx) -> Node:
    """``ctx``'s node: the one alive, else a new one (kept weakly on the context: no cycle, nothing per op)."""
    ref = getattr(ctx, "node", None)
    node = None if ref is None else ref()
    if node is None:
        kind = _NODE_TYPES.get(ctx.fn)
        if kind is None:
            kind = _NODE_TYPES[ctx.fn] = type(f"{ctx.fn.__name__}Backward", (Node,), {"__slots__": ()})
        node = kind(ctx)
        ctx.node = weakref.ref(node)
    return node


def _next(t):
    if t is None:
        return None, 0
    if type(t) is _Edge:
        return node_of(t._ctx), t._out_index
    return (AccumulateGrad(t), 0) if t.requires_grad else (None, 0)
