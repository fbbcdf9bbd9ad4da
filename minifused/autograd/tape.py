"""The tape's nodes and their recording: version counters, :class:`Context` (the node), :class:`Handoff`,
the edges to non-leaf inputs, and :class:`Function`, whose ``apply`` runs a forward and records it."""
from __future__ import annotations

import itertools
import threading
import warnings
import weakref

import numpy as np

from .. import backend
from .modes import _check_op, _mode

_Tensor = None  # the Tensor class, registered by minifused.tensor (see the package's _register_tensor_type)


# ---------------------------------------------------------------- version counters
class VersionCounter:
    """How often a tensor's array was changed in place, and by which op last; views share one.
    :meth:`bump` is the one mutator: every in-place writer (ops, optimizers, ``copy_``, setitem,
    ``load_state_dict``, collectives) calls it with its name."""

    __slots__ = ("version", "last_op", "base_write")

    def __init__(self):
        self.version = 0
        self.last_op = None
        self.base_write = -1  # the version a recorded in-place op on the base tensor (not a view) left

    def bump(self, op: str) -> None:
        self.version += 1
        self.last_op = op


class _Shown(threading.local):
    ids = None  # while a backward walk runs: the ids of the gradient arrays user code has seen


_shown = _Shown()


def show_to_user(*arrays):
    """Note gradient arrays that user code sees during a backward walk (hooks, custom backwards): user code may
    keep them, so none of them becomes a leaf's own ``.grad`` (later accumulation would write into them)."""
    ids = _shown.ids
    if ids is not None:
        ids.update(id(a) for a in arrays if a is not None)


def _saved_versions(saved, tensors):
    """counter, version, counter, version ... of every tensor among ``tensors`` whose array was saved, for the
    in-place check: one flat tuple (a pair per tensor would be one more object per saved tensor for the cyclic
    garbage collector to track while the tape lives; see :func:`_out_meta`)."""
    found, ts = [], [t for t in tensors if isinstance(t, _Tensor)]
    for s in saved:
        for t in ts:
            if t._data is s:
                found += (t._vc, t._vc.version)
                break
    return tuple(found)


def _check_versions(ctx):
    pairs = ctx.versions
    for counter, version in zip(pairs[::2], pairs[1::2]):
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
    in-place changes; anything else (masks, mean/rstd) is a plain attribute. ``user_ctx``: a custom
    Function's :class:`FunctionCtx` (it outlives ``_free``: a backward that saved nothing may run again).
    """

    __slots__ = ("fn", "inputs", "needs_input_grad", "_consumers", "saved", "versions", "out_meta", "hooks",
                 "retained", "freed", "view_version", "seq", "user_ctx", "node", "__dict__", "__weakref__")

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self.view_version = 0
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

    def graph_input(self, i, value):
        """Input ``i`` as a tensor of the graph, for a ``backward_graph`` (see :mod:`.higher`): ``value`` is its
        array as saved (a number passes as it is). One that wants a gradient is the leaf itself, or a stand-in
        through which a gradient reaches the node that made it; any other is a constant."""
        t = self.inputs[i]
        if isinstance(value, np.generic):
            value = np.asarray(value)
        elif not hasattr(value, "shape"):
            return value
        if t is None:
            return _Tensor._from_array(value, False)
        if t._ctx is None:
            return t
        s = _Tensor._from_array(value, True)
        s._ctx, s._out_index = t._ctx, t._out_index
        return s

    def graph_output(self, value, k=0):
        """Output ``k`` (its array ``value``, as saved) as a tensor of the graph whose gradient reaches this node,
        for a ``backward_graph`` whose gradient is written with the op's output (exp's, tanh's)."""
        s = _Tensor._from_array(np.asarray(value) if isinstance(value, np.generic) else value, True)
        s._ctx, s._out_index = self, k
        return s

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


class _Edge(weakref.ref):
    """A non-leaf input as its consumer recorded it: the producer and the output index *at record time*
    (an in-place op later moves the tensor to a new node; this consumer's gradient still belongs to the
    old one), and a weak reference to the tensor (the edge is one: one object per edge for the cyclic garbage
    collector, see :func:`_out_meta`) for its other attributes. The tape never keeps an intermediate tensor
    alive: what a backward needs, its op saved, so an activation that no backward reads (the inputs of an add,
    say) goes as soon as the user's code lets it go, as in PyTorch. Edges compare and hash by identity (a weak
    reference's would compare the tensors)."""

    __slots__ = ("_ctx", "_out_index")
    __eq__, __ne__, __hash__ = object.__eq__, object.__ne__, object.__hash__

    def __init__(self, t):  # (weakref.ref's __new__ made the reference to t)
        self._ctx, self._out_index = t._ctx, t._out_index

    def __getattr__(self, name):  # the tensor's other attributes (shape, requires_grad ...) while it lives
        tensor = self()
        if tensor is None:
            raise AttributeError(f"a tensor no longer alive has no {name!r}")
        return getattr(tensor, name)


_FREED_MESSAGE = (  # (PyTorch's words, with the op named)
    "Trying to backward through the graph a second time (or directly access saved tensors after they have already "
    "been freed): the saved arrays of {name} were freed after the first backward. Saved intermediate values of the "
    "graph are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward "
    "through the graph a second time or if you need to access saved tensors after calling backward."
)


# ---------------------------------------------------------------- recording
class Function:
    """Base class of differentiable ops.

    minifused's ops define ``forward(ctx, *arrays, **kwargs)`` returning an array (or a
    tuple of arrays) and ``backward(ctx, *grads)`` returning one gradient per
    positional input (``None`` where there is none). Set ``is_view = True`` when
    the output may share memory with the first input, so both share one version
    counter and an in-place change through either is detected.

    A subclass defined outside the package (a user's, as PyTorch's custom Functions are written) works on
    tensors instead: its ``forward(ctx, *args)`` gets the arguments as they were passed and runs with autograd
    off, its ``backward(ctx, *grads)`` gets and returns tensors, and ``ctx`` is a :class:`FunctionCtx`
    (``save_for_backward`` / ``saved_tensors``, ``needs_input_grad``, ``mark_non_differentiable``,
    ``set_materialize_grads``); PyTorch's ``forward(*args)`` + ``setup_context(ctx, inputs, output)`` form
    too. ``on_arrays`` (set in the class body) chooses explicitly.
    """

    is_view = False
    #: a view's: ``write_back(base, ctx, view, op)`` records ``op``, written in place on the view, on its base too
    #: (False where it cannot: see :func:`_mark_viewed`); None for views whose writes are never written back
    write_back = staticmethod(lambda base, ctx, view, op: _write_back(base, view, op))
    on_arrays = True
    #: ``apply_`` may write into an expanded view (several elements at one memory location): an indexed write,
    #: which PyTorch allows there (see :func:`refuse_internal_overlap`)
    writes_overlap = False
    #: ``apply_`` takes tensor operands that overlap ``x`` in part (else refused, as PyTorch's in-place ops refuse them:
    #: see :func:`refuse_partial_overlap`)
    operands_overlap = False
    #: whether the walk hands ``backward`` zeros for an output that got no gradient (False: None, as PyTorch's
    #: module backward hooks see an unused output's)
    materialize_grads = True
    #: a row-sparse backward's (a ``sparse=True`` embedding's): ``sparse_rows(ctx)``, after ``backward``, gives the
    #: rows its differentiable input's gradient holds (a bool array, one per row, or None: a dense gradient). The
    #: walk records them beside a leaf's ``.grad`` (``Tensor._sparse_rows``), for SparseAdam: PyTorch's sparse
    #: gradient holds every row looked up, a row whose gradient is exactly zero too
    sparse_rows = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "on_arrays" not in cls.__dict__:
            cls.on_arrays = cls.__module__.split(".")[0] == __name__.split(".")[0] and cls.on_arrays
        if not cls.on_arrays:  # its tape node: a _Bridge of its name (grad_fn=<NameBackward>, as PyTorch shows)
            cls._bridge = type(cls.__name__, (_Bridge,), {"on_arrays": True, "user": cls})
            cls.apply = classmethod(_apply_on_tensors)

    def __init__(self, *args, **kwargs):
        if not type(self).on_arrays:  # (a user's Function: its methods are static, as PyTorch warns)
            warnings.warn(f"{type(self)} should not be instantiated. Methods on autograd functions are all static, so "
                          f"you should invoke them on the class itself. Instantiating an autograd function will raise "
                          f"an error in a future version of PyTorch.", DeprecationWarning, stacklevel=2)

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Legacy autograd function with non-static forward method is deprecated. Please use "
                           "new-style autograd function with static forward method: call apply on the class "
                           "(Example: https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)")

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError

    @classmethod
    def apply(cls, *args, **kwargs):
        T = _Tensor
        arrays, needs, any_needs = _unwrap(args, cls)
        ctx = Context(needs)
        if _on_host(arrays):
            with np.errstate(all="ignore"):  # (see _on_host)
                out = cls.forward(ctx, *arrays, **kwargs)
        else:
            out = cls.forward(ctx, *arrays, **kwargs)
        record = any_needs and _mode.enabled
        if type(out) is tuple:
            outs = tuple(T._from_array(_as_array(o), record) for o in out)
        else:
            outs = (T._from_array(_as_array(out), record),)
        if backend.is_debug():  # (anomaly mode checks only the backward's gradients, as PyTorch's)
            _check_op(cls.__name__, "forward output", [o._data for o in outs], arrays)
        if cls.is_view and isinstance(args[0], T):
            # a view keeps its base (as PyTorch's ._base: ``y[1][1:].mul_(5)`` reaches y through the temporary y[1])
            # and how it was taken, for a recorded in-place op on it to reach the base (``write_back``)
            for o in outs:
                o._vc, o._view = args[0]._vc, (args[0], cls, ctx)
            ctx.view_version = outs[0]._vc.version  # (see _refuse_stale_view)
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
        refuse_no_grad_view(op, x)
        if not cls.writes_overlap:
            refuse_internal_overlap(op, x._data)
        if not cls.operands_overlap:
            for a in args:
                if isinstance(a, _Tensor):
                    refuse_partial_overlap(op, x, a)
        arrays, needs, any_needs = _unwrap((x, *args), op)
        if any_needs and _mode.enabled:
            # an operand that is x or a view of it (``y *= y``, ``y.mul_(y.detach())``) is overwritten by the op
            # itself: the backward gets a copy of its value (PyTorch's version check would refuse the backward)
            for i, a in enumerate(args, 1):
                if isinstance(a, _Tensor) and a._vc is x._vc:
                    arrays[i] = backend.copy(arrays[i])
        ctx = Context(needs)
        if _on_host(arrays):
            with np.errstate(all="ignore"):
                out = cls.forward(ctx, *arrays, out=x._data, **kwargs)
        else:
            out = cls.forward(ctx, *arrays, out=x._data, **kwargs)
        if out is not x._data:
            x._data[...] = out
        x._vc.bump(op)
        if any_needs and _mode.enabled and not getattr(x, "_view", False):
            x._vc.base_write = x._vc.version  # views taken of x before now are stale (see _refuse_stale_view)
        if backend.is_debug():
            _check_op(op, "forward output", [x._data], arrays)
        if any_needs and _mode.enabled:
            prev = _stand_in(x) if x._requires_grad else None
            inputs = (prev, *[a if n else None for a, n in zip(args, needs[1:])])
            x._requires_grad = True
            _record(ctx, cls, inputs, (x,), (x, *args))  # after the bump: saved arrays are x as it is now
            _follow_retain(prev, x)
            taken = getattr(x, "_view", None)
            if type(taken) is tuple:  # the write recorded on the base too (PyTorch rebases its history so)
                write_back = taken[1].write_back
                if write_back is None or write_back(taken[0], taken[2], x, op) is False:
                    _mark_viewed(x, op)
        return x


class _ViewWrite(Function):
    """An in-place op on a view, recorded on the viewed tensor (the base) too: the view's elements of the base
    already hold the view's new value. The gradient: the base's earlier value gets it outside those elements, the
    view's new value inside them. ``window`` places the view in the base (see :func:`_window`)."""

    operands_overlap = True  # (the view is the base's own memory, already written)

    @staticmethod
    def forward(ctx, base, view, out, window):
        ctx.window = window
        return out

    @staticmethod
    def backward(ctx, g):
        need_base, need_view = ctx.needs_input_grad
        strides, span, offset, shape, view_strides = ctx.window
        xp = backend.array_module(g)
        item = g.itemsize
        flat = xp.empty(span, g.dtype)
        laid = xp.lib.stride_tricks.as_strided(flat, g.shape, tuple(s * item for s in strides))
        laid[...] = g  # g laid out as the base is in memory, so that the view's strides find its elements
        inside = xp.lib.stride_tricks.as_strided(flat[offset:], shape, tuple(s * item for s in view_strides))
        gv = backend.copy(inside) if need_view else None
        if need_base:
            inside[...] = 0
        return (laid if need_base else None), gv

    @staticmethod
    def backward_graph(ctx, g):
        need_base, need_view = ctx.needs_input_grad
        strides, span, offset, shape, view_strides = ctx.window
        laid = g.new_zeros(span).as_strided_scatter(g, tuple(g.shape), strides)  # as backward's, recorded
        gv = laid.as_strided(shape, view_strides, offset) if need_view else None
        gb = None
        if need_base:
            gb = laid.as_strided_scatter(g.new_zeros(shape), shape, view_strides, offset).as_strided(
                tuple(g.shape), strides, 0)
        return gb, gv


def _window(base, view):
    """Where ``view``'s elements lie among ``base``'s in memory, in elements: (base's strides, the span of its
    memory, the view's offset from base's first element, its shape and strides); None where that is no plain
    window (negative strides, another dtype, an expanded view, whose elements repeat)."""
    item = base.itemsize
    if view.dtype != base.dtype or any(s < 0 or s % item for s in base.strides + view.strides):
        return None
    if any(s == 0 and n > 1 for a in (base, view) for n, s in zip(a.shape, a.strides)):
        return None
    offset = _region(view)[0] - _region(base)[0]
    if offset < 0 or offset % item:
        return None
    span = 1 + sum((n - 1) * s // item for n, s in zip(base.shape, base.strides))
    return (tuple(s // item for s in base.strides), span, offset // item, view.shape,
            tuple(s // item for s in view.strides))


def _write_back(base, view, op):
    """``op``, written in place on ``view`` (a view of ``base``), recorded on base (see :class:`_ViewWrite`); False
    where the view is no plain window of base's memory."""
    b, v = base._data, view._data
    if v.size == 0 or not backend.array_module(b).may_share_memory(b, v):
        return True  # nothing of base was written (a reshape that copied)
    window = _window(b, v)
    if window is None:
        return False
    _ViewWrite.apply_(op, base, view, window=window)
    return True


# ---------------------------------------------------------------- custom Functions on tensors (users')
class FunctionCtx:
    """The ``ctx`` a custom Function on tensors gets (PyTorch's): what ``forward`` / ``setup_context`` put on it
    (``save_for_backward``, any attribute) is there in ``backward``. The saved tensors live on the tape node, so
    a backward without ``retain_graph`` lets them go; the other attributes stay, as PyTorch's."""

    def __init__(self, node):
        self._node, self._non_differentiable, self._dirty = node, (), ()
        self._saved_outputs = None  # {position among the saved tensors: output index} for saved outputs
        self._in_graph = False  # while the backward runs under create_graph
        self.materialize_grads = True
        self._tensor_args = ()  # which positional arguments were tensors (a gradient for another one is refused)
        self._input_shapes = ()  # their shapes (None for the others): a gradient must reduce to its input's
        self._positions = None  # a tuple output: (its length, the positions of its tensors); None: one tensor

    @property
    def needs_input_grad(self):
        return self._node.needs_input_grad

    def save_for_backward(self, *tensors):
        """Keep ``tensors`` (or None) for ``backward``; an in-place change to one of them (or to a tensor it views,
        or that views it) before the backward makes the backward raise."""
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, _Tensor):
                raise TypeError(f"save_for_backward can only save variables, but argument {i} is of type "
                                f"{type(t).__name__}")
        self._node.save_for_backward(*tensors)

    @property
    def saved_tensors(self):
        """The saved tensors; under ``create_graph`` a saved output is that output of this node (its gradient
        reaches the node, as PyTorch unpacks a saved output with its grad_fn)."""
        node = self._node
        if node.freed:
            raise RuntimeError(_FREED_MESSAGE.format(name=node.fn.__name__))
        if not (self._in_graph and self._saved_outputs):
            return node.saved
        return tuple(node.graph_output(t._data, self._saved_outputs[i]) if i in self._saved_outputs else t
                     for i, t in enumerate(node.saved))

    def mark_non_differentiable(self, *tensors):
        """These outputs get no gradient (their gradients reach ``backward`` as zeros)."""
        self._non_differentiable = tensors

    def set_materialize_grads(self, value):
        """False: ``backward`` gets None, not zeros, for the outputs that got no gradient (PyTorch's)."""
        self.materialize_grads = bool(value)

    def mark_dirty(self, *tensors):
        """These inputs were modified in place by ``forward``, which returns them: each returned one is the input
        tensor itself, now the output of this Function (see :func:`_rebase_dirty`)."""
        self._dirty = tensors


def _user_forward(user, uctx, args, kwargs):
    with _no_recording():
        if _overrides_setup_context(user):
            out = user.forward(*args, **kwargs)
            user.setup_context(uctx, args, out)
        else:
            out = user.forward(uctx, *args, **kwargs)
    return out


class _Bridge(Function):
    """The node a custom Function on tensors puts on the tape: its forward and backward call the user's. Only the
    tensors among a tuple output are the node's outputs: anything else (a number, a list) passes through, with
    no gradient, as in PyTorch."""

    on_arrays = True

    user = None  # the custom Function class (each has a subclass of its own)

    @staticmethod
    def forward(ctx, *arrays, user, args, kwargs, box):
        uctx = ctx.user_ctx = FunctionCtx(ctx)
        uctx._tensor_args = tuple(isinstance(a, _Tensor) for a in args)
        uctx._input_shapes = tuple(tuple(a.shape) if isinstance(a, _Tensor) else None for a in args)
        out = _user_forward(user, uctx, args, kwargs)
        box.append((uctx, out))
        if isinstance(out, _Tensor):
            return out._data
        if type(out) is not tuple:
            return ()
        uctx._positions = (len(out), tuple(i for i, o in enumerate(out) if isinstance(o, _Tensor)))
        return tuple(out[i]._data for i in uctx._positions[1])

    @staticmethod
    def backward(ctx, *grads):
        xp = backend.array_module(next(g for g in grads if g is not None))
        tensors = [None if g is None else _Tensor._from_array(g) for g in grads]
        with _no_recording():
            result = _Bridge._user_backward(ctx, tensors, xp)
        result = tuple(r._data if isinstance(r, _Tensor) else None if r is None else xp.asarray(r) for r in result)
        show_to_user(*(t._data for t in tensors if t is not None), *result)
        return result

    @staticmethod
    def backward_graph(ctx, *grads):
        """Under ``create_graph``: the user's backward on the gradient tensors, recorded (as PyTorch runs it with
        grad mode on), so its result differentiates through its ops and the tensors the forward saved."""
        xp = next(g for g in grads if g is not None)._xp
        uctx = ctx.user_ctx
        uctx._in_graph = True
        try:
            result = _Bridge._user_backward(ctx, list(grads), xp)
        finally:
            uctx._in_graph = False
        return tuple(r if r is None or isinstance(r, _Tensor) else _Tensor._from_array(xp.asarray(r)) for r in result)

    @staticmethod
    def _user_backward(ctx, tensors, xp):
        """The user's ``backward`` on one gradient tensor per output (zeros for those that got none, unless the
        forward turned materializing off), its result checked: one gradient (or None) per input."""
        user, n, uctx = ctx.fn.user, len(ctx.needs_input_grad), ctx.user_ctx
        tensors = [None if t is None and not uctx.materialize_grads else
                   _Tensor._from_array(xp.zeros(shape, dtype)) if t is None else t
                   for t, (shape, dtype) in zip(tensors, ctx.out_meta)]
        given = tensors
        if uctx._positions is not None:  # one gradient per output, None for those that are no tensor
            given = [None] * uctx._positions[0]
            for i, t in zip(uctx._positions[1], tensors):
                given[i] = t
        result = _user_vjp(user)(uctx, *given)
        result = result if isinstance(result, tuple) else (result,)
        if len(result) < n or any(r is not None for r in result[n:]):
            raise RuntimeError(f"function {user.__name__}Backward returned an incorrect number of gradients "
                               f"(expected {n}, got {len(result)})")
        for i, (r, is_tensor) in enumerate(zip(result, uctx._tensor_args)):
            if r is not None and not is_tensor:
                raise RuntimeError(f"function {user.__name__}Backward returned a gradient different than None at "
                                   f"position {i + 1}, but the corresponding forward input was not a Variable")
        return tuple(_Bridge._input_shaped(user, i, r, want) for i, (r, want) in
                     enumerate(zip(result[:n], uctx._input_shapes)))

    @staticmethod
    def _input_shaped(user, i, r, want):
        """Gradient ``r`` of input ``i`` (of shape ``want``) as PyTorch takes it from a custom backward: its input's
        shape, or one that input broadcasts to, then summed down to it; any other shape raises (it would
        otherwise broadcast through the rest of the graph into a wrong gradient)."""
        if not isinstance(r, _Tensor) or want is None or tuple(r.shape) == want:
            return r
        try:
            ok = np.broadcast_shapes(want, tuple(r.shape)) == tuple(r.shape)
        except ValueError:
            ok = False
        if not ok:
            raise RuntimeError(f"Function {user.__name__}Backward returned an invalid gradient at index {i} - got "
                               f"{list(r.shape)} but expected shape compatible with {list(want)}")
        return r.sum_to_size(*want) if want else r.sum()


def _apply_on_tensors(cls, *args, **kwargs):
    """``cls.apply`` for a custom Function on tensors: one :class:`_Bridge` node around the user's methods."""
    box = []
    out = cls._bridge.apply(*args, user=cls, args=args, kwargs=kwargs, box=box)
    uctx, user_out = box[0]
    outs = out if isinstance(out, tuple) else (out,)
    mine = (user_out,) if isinstance(user_out, _Tensor) else [user_out[i] for i in uctx._positions[1]] if outs else ()
    for o, u in zip(outs, mine):  # the same memory: an in-place change to either (or a view of it) counts
        o._vc = u._vc
    node = uctx._node
    recorded = bool(outs) and outs[0]._ctx is node
    if uctx._dirty:  # (outputs that are inputs modified in place: those tensors themselves)
        outs = _rebase_dirty(cls, uctx, user_out, outs, recorded)
    if recorded:
        marked = {id(t._data) for t in uctx._non_differentiable}
        if node.saved:  # each saved tensor's counter (a view shares its base's), checked by the backward
            node.versions = tuple(v for t in node.saved if t is not None for v in (t._vc, t._vc.version))
            # (differentiable outputs among them: those of the node under create_graph, see saved_tensors)
            at = {id(u): k for k, (o, u) in enumerate(zip(outs, mine))
                  if u._ctx is not node and id(u._data) not in marked and backend.is_floating(u.dtype)}
            found = {i: at[id(t)] for i, t in enumerate(node.saved) if id(t) in at}
            uctx._saved_outputs = found or None
        # outputs marked non-differentiable, and integer / bool ones (as PyTorch's), leave the graph
        outs = tuple(o.detach() if id(o._data) in marked or not backend.is_floating(o.dtype) else o for o in outs)
    if isinstance(user_out, _Tensor):
        return outs[0]
    if type(user_out) is not tuple:
        return user_out
    full = list(user_out)
    for i, o in zip(uctx._positions[1], outs):
        full[i] = o
    return tuple(full)


def _rebase_dirty(user, uctx, user_out, outs, recorded):
    """A custom Function's outputs where those marked dirty (inputs its forward modified in place and returned) are
    the input tensors themselves, as PyTorch's: their version bumped, and, when the call was recorded, each the
    output of its node from now on (its old value, which the node's input edge keeps, keeps its hooks; a retained
    grad follows the tensor); a leaf that requires grad refuses, and a view's write is recorded on its base."""
    mine = (user_out,) if isinstance(user_out, _Tensor) else [user_out[i] for i in uctx._positions[1]] if outs else ()
    ids = {id(t) for t in mine}
    if any(id(t) not in ids for t in uctx._dirty):
        raise RuntimeError(f"{user.__name__}: some elements marked as dirty during the forward method were not "
                           f"returned as output. The inputs that are modified inplace must all be outputs of the "
                           f"Function.")
    dirty = {id(t) for t in uctx._dirty}
    op = f"{user.__name__} (mark_dirty)"
    result = list(outs)
    for k, (o, d) in enumerate(zip(outs, mine)):
        if id(d) not in dirty:
            continue
        result[k] = d
        d._vc.bump(op)
        if not recorded:
            continue
        if d._ctx is None and d._requires_grad:
            raise RuntimeError(f"{user.__name__}: a leaf Variable that requires grad has been used in an in-place "
                               f"operation (marked dirty).")
        refuse_view_of_grad_leaf(op, d)
        if d._retain and d._ctx is not None and d._ctx.retained:
            d._ctx.retained.pop(d._out_index, None)
        follow, d._retain, d._hooks = bool(d._retain), None, None
        d._ctx, d._out_index, d._requires_grad = o._ctx, o._out_index, True
        if follow:
            d.retain_grad()
        taken = getattr(d, "_view", None)
        if type(taken) is tuple:  # the write recorded on the base too, as apply_ records it
            write_back = taken[1].write_back
            if write_back is None or write_back(taken[0], taken[2], d, op) is False:
                _mark_viewed(d, op)
        else:
            d._vc.base_write = d._vc.version  # views taken of d before now are stale (see _refuse_stale_view)
    return tuple(result)


def _user_vjp(user):
    """A custom Function's backward: its ``backward``, or its ``vjp`` (PyTorch's other name for it); not both."""
    vjp = getattr(user, "vjp", None)
    if vjp is None:
        return user.backward
    if user.backward is not Function.backward:
        raise RuntimeError(f"{user.__name__}: implementing both 'backward' and 'vjp' for a custom Function is not "
                           f"allowed. You should only implement one of them.")
    return vjp


def _overrides_setup_context(user):
    return getattr(user, "setup_context", None) is not None


class _no_recording:
    """Grad mode off for a custom Function's own forward and backward (their tensor ops are its internals)."""

    def __enter__(self):
        self.prev, _mode.enabled = _mode.enabled, False

    def __exit__(self, *exc):
        _mode.enabled = self.prev


def _on_host(arrays):
    """Whether an op computes on NumPy arrays (its first or second operand is one: cheap enough for every op).
    There its floating-point warnings are silenced, as PyTorch is silent: log(0) is -inf, 0 / 0 NaN, a float16
    overflow inf, without a RuntimeWarning (CuPy's kernels never warn)."""
    return bool(arrays) and (type(arrays[0]) is np.ndarray or len(arrays) > 1 and type(arrays[1]) is np.ndarray)


def _mark_viewed(view, op):
    """After ``op`` was recorded on a view that writes nothing back (a split's piece, an expanded or strided view,
    see ``Function.write_back``), mark the tensors it views with the write (op, memory region): PyTorch rewrites
    their history to include it, here it is not, so a recorded op that takes one of them later, or a backward from
    one, raises (see :func:`_refuse_rewritten`) rather than miss the write in its gradient, unless
    :func:`settle_view_write` (``x[i] op= v``'s setitem, which records the write on x itself) settles it first."""
    region = _region(view._data)
    taken = view._view
    while type(taken) is tuple:
        base = taken[0]
        base._rewritten = (base._rewritten or ()) + ((op, region),)
        taken = getattr(base, "_view", None)


def _region(a):
    """The memory an array spans, as (address, shape, strides); None for a NumPy scalar (a copy)."""
    if isinstance(a, np.ndarray):
        return a.ctypes.data, a.shape, a.strides
    if isinstance(a, np.generic):
        return None
    return a.data.ptr, tuple(a.shape), tuple(a.strides)


def same_region(a, b):
    """Whether arrays ``a`` and ``b`` are views of the very same memory, element for element."""
    region = _region(a)
    return region is not None and region == _region(b)


def settle_view_write(x, value, target):
    """``x[index] = value`` where ``value`` is the very view of x that an in-place op was written through, at
    the region ``target`` (x's array indexed): Python's ``x[index] += v`` ends so. The setitem records the write on
    x itself (value's history carries it), so the mark it left is dropped."""
    if not same_region(value, target):
        return
    region = _region(value)
    left = tuple(mark for mark in x._rewritten if mark[1] != region)
    x._rewritten = left or None


def _refuse_rewritten(where, t):
    ops = ", ".join(dict.fromkeys(op for op, _ in t._rewritten))
    raise RuntimeError(f"{where}: a tensor that requires grad was written in place through a view of it "
                       f"({ops}) after its autograd node was recorded; its gradient would miss that write. "
                       f"Write out of place (or into a clone of the view) instead")


def refuse_internal_overlap(op, a):
    """PyTorch refuses an in-place op whose target has several elements at one memory location (an expanded view:
    a stride of 0 along a dim of more than one element; ``fill_`` / ``zero_`` and indexed writes are its exceptions,
    and do not ask): the result would depend on the order of the writes. Raise, naming ``op``."""
    strides = a.strides
    if 0 in strides and a.size > 1 and any(s == 0 and n > 1 for n, s in zip(a.shape, strides)):
        raise RuntimeError(f"{op}: unsupported operation: more than one element of the written-to tensor refers to "
                           f"a single memory location. Please clone() the tensor before performing the operation.")


def refuse_partial_overlap(op, x, other):
    """PyTorch refuses an in-place op on ``x`` whose tensor operand ``other`` (a view of the same memory) overlaps x in
    part (``x[1:].add_(x[:-1])``): the result would depend on the order of the writes. The very same memory
    (``x += x``) is fine, and so is any pair that PyTorch does not judge: an empty one, or one of them not dense (a
    strided slice). Raise, naming ``op``."""
    if other._vc is not x._vc:  # (views of one tensor share its counter: anything else is other memory)
        return
    a, b = x._data, other._data
    if a.size == 0 or b.size == 0 or not (_dense(a) and _dense(b)):
        return
    (a0, _, a_strides), (b0, _, b_strides) = _region(a), _region(b)
    a1, b1 = a0 + a.nbytes, b0 + b.nbytes
    if (a0, a1) == (b0, b1) and a_strides == b_strides or a1 <= b0 or b1 <= a0:
        return
    raise RuntimeError(f"{op}: unsupported operation: some elements of the input tensor and the written-to tensor "
                       f"refer to a single memory location. Please clone() the tensor before performing the operation.")


def _dense(a):
    """Whether array ``a``'s elements fill its span without gaps or repeats, in some order of its dims (PyTorch's
    ``is_non_overlapping_and_dense``), with positive strides."""
    expected = a.itemsize
    for stride, size in sorted((s, n) for n, s in zip(a.shape, a.strides) if n > 1):
        if stride != expected:
            return False
        expected *= size
    return True


def refuse_no_grad_view(op, x):
    """PyTorch refuses an in-place write in grad mode through a view taken under no_grad of a tensor that requires
    grad: the base's history would miss it. Raise, naming ``op``, when ``x`` is such a view."""
    if not x._requires_grad and _mode.enabled:
        taken = getattr(x, "_view", None)
        if type(taken) is tuple and taken[0]._requires_grad:
            raise RuntimeError(f"{op}: a view was created in no_grad mode and is being modified inplace with grad "
                               f"mode enabled; its base's gradient would miss the change. Take the view in grad "
                               f"mode, or modify it under no_grad()")


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


def _refuse_stale_view(where, t):
    """A view taken of a tensor before a recorded in-place op on that tensor holds the new values, but its node
    still derives it from the old ones: PyTorch rebases its history; this tape does not, so using it in a
    recorded op raises rather than give a gradient that misses the in-place op (so does a view taken unrecorded,
    of a tensor without history then, since given one by a recorded in-place op)."""
    raise RuntimeError(f"{where}: a view is used after its base was modified in place "
                       f"({t._vc.last_op}) by a recorded op; its gradient would miss that change. Take the view "
                       f"after the in-place op, or modify the base out of place")


def _unwrap(args, op):
    """The arrays of ``args`` (tensors unwrapped), which of them require grad, and whether any does
    (one pass: this is the hot path of every op); in grad mode, a tensor written through a view of it since
    its node was recorded is refused (see :func:`_mark_viewed`), naming ``op`` (a name or a Function)."""
    T = _Tensor
    arrays, needs = [], []
    for a in args:
        if isinstance(a, T):
            arrays.append(a._data)
            needs.append(a._requires_grad)
            if a._rewritten is not None and _mode.enabled:
                _refuse_rewritten(op if isinstance(op, str) else op.__name__, a)
            c = a._ctx
            if c is None:
                if a._vc.base_write and _mode.enabled:  # an unrecorded view, its base since given a history?
                    taken = getattr(a, "_view", None)
                    if type(taken) is tuple and a._vc.base_write > taken[2].view_version:
                        _refuse_stale_view(op if isinstance(op, str) else op.__name__, a)
            elif c.fn.is_view and a._vc.base_write > c.view_version and _mode.enabled:
                _refuse_stale_view(op if isinstance(op, str) else op.__name__, a)
        else:
            arrays.append(a)
            needs.append(False)
    return arrays, tuple(needs), True in needs


_recorded = itertools.count()


def _record(ctx, cls, inputs, outs, args):
    """Put one call on the tape: the node keeps its inputs and what to check its saved arrays against,
    and each output points back at it. ``seq`` numbers the nodes in the order they were recorded (the backward
    walks them in reverse)."""
    ctx.fn, ctx.seq = cls, next(_recorded)
    if len(inputs) == 1:  # the common cases, without a generator
        t = inputs[0]
        ctx.inputs = inputs if t is None or t._ctx is None else (_Edge(t),)
    elif len(inputs) == 2:
        a, b = inputs
        ctx.inputs = (a if a is None or a._ctx is None else _Edge(a), b if b is None or b._ctx is None else _Edge(b))
    else:
        ctx.inputs = tuple([t if t is None or t._ctx is None else _Edge(t) for t in inputs])
    if ctx.saved:
        ctx.versions = _saved_versions(ctx.saved, (*args, *outs))
    if len(outs) == 1:  # the common case, without the loops
        o = outs[0]
        key = (o._data.shape, o._data.dtype)
        ctx.out_meta = _OUT_METAS.get(key) or _out_meta(key)
        o._ctx, o._out_index = ctx, 0
        return
    ctx.out_meta = tuple([(o._data.shape, o._data.dtype) for o in outs])
    for i, o in enumerate(outs):
        o._ctx, o._out_index = ctx, i


_OUT_METAS = {}  # (shape, dtype) -> ((shape, dtype),), shared by the nodes of single-output ops
_OUT_METAS_MAX = 4096


def _out_meta(key):
    """A single-output node's new ``out_meta``: ``(key,)``, ``key`` its output's (shape, dtype), one tuple shared
    by every node of that shape and dtype (``_record`` looks it up in ``_OUT_METAS`` first). Shared, because every
    object a node keeps for its life is one that the cyclic garbage collector tracks: the objects alive across a
    forward (nodes, edges, these tuples) are promoted into the oldest generation at each of its collections
    during the step, and each full collection (triggered by that growth) scans every tracked object of the
    process, at best a few milliseconds, or a hundred and more beside another framework's imports. Fewer objects
    per node make such collections rarer."""
    if len(_OUT_METAS) >= _OUT_METAS_MAX:  # (many shapes: start over rather than grow without bound)
        _OUT_METAS.clear()
    meta = _OUT_METAS[key] = (key,)
    return meta


def _stand_in(x):
    """A tensor for ``x``'s value before an in-place op: x's old node, counter, hooks and retained grad
    move to it, so the op's backward routes the gradient there."""
    prev = _Tensor._from_array(x._data, True)
    prev._ctx, prev._out_index, prev._vc = x._ctx, x._out_index, x._vc
    prev._hooks, prev._retain, x._hooks, x._retain = x._hooks, x._retain, None, None
    return prev


def _follow_retain(prev, x):
    """A retained grad follows the tensor to the value an in-place op gave it (``x``, on its new node), as
    PyTorch's: the stand-in ``prev`` of its old value keeps no retained grad (hooks stay with the old value)."""
    if prev is None or not prev._retain:
        return
    old = prev._ctx
    if old is not None and old.retained:
        old.retained.pop(prev._out_index, None)
    prev._retain = None
    x.retain_grad()


def _as_array(o):
    """NumPy reductions return scalars; a tensor always holds an array."""
    return np.asarray(o) if isinstance(o, np.generic) else o
