"""``torch.cuda.make_graphed_callables``: a module or a function whose forward and backward each replay a CUDA
graph, as ``minifused.cuda.make_graphed_callables``.

PyTorch's recipe, step for step: each callable is warmed up ``num_warmup_iters`` times on a side stream (forward,
then :func:`minifused.autograd.grad` of its outputs with respect to its sample args and parameters), so plans and
kernels exist; then its forward is captured into one :class:`~minifused.cuda.CUDAGraph`, and the backward of
that captured forward, ``autograd.grad(outputs, inputs + params, static_grad_outputs)``, into another; all
captures share one memory pool, forwards in order and backwards in reverse, the order they replay in.

What comes back runs as one node of minifused's autograd (:class:`_Graphed`): its forward copies the arguments
into the sample args (the graph's static inputs) and replays the forward graph; its outputs are the graph's
static outputs, rewritten by the next call, as PyTorch's. Its backward copies the incoming gradients into the
static gradient buffers, replays the backward graph and hands the static gradients of the inputs and parameters
to the engine, which copies them into ``.grad`` (adding to what is there): a ``.grad`` never shares memory with
the graph. A Module comes back itself with its ``forward`` replaced: graphed in the training mode it was in
when captured (``module.training`` then), its original forward in the other mode, as PyTorch's.

PyTorch's rules hold: the sample args are tensors (cuda ones), the real arguments come in the same order,
shapes and dtypes, and require grad where the samples did; a Module has no hooks when passed and no buffer that
requires grad; the callables run once per forward and backward, in the order given.
"""
from __future__ import annotations

from . import autograd, backend
from .autograd import Function
from .cuda import Stream, stream as stream_context
from .graphs import _CAPTURE_MODES, CUDAGraph, _copy_into, graph, graph_pool_handle
from .nn import Module
from .tensor import Tensor

__all__ = ["make_graphed_callables"]

_OP = "make_graphed_callables"


# ---------------------------------------------------------------- flattening (PyTorch's pytree, for tuples, lists,
# dicts and tensors)
def _flatten(obj, leaves):
    """Append ``obj``'s leaves to ``leaves``; return its structure (what :func:`_unflatten` rebuilds from)."""
    if isinstance(obj, (tuple, list)):
        return type(obj), [_flatten(o, leaves) for o in obj]
    if isinstance(obj, dict):
        return dict, [(k, _flatten(v, leaves)) for k, v in obj.items()]
    leaves.append(obj)
    return None


def _unflatten(spec, leaves):
    """``spec``'s structure with its leaves taken in order from the iterator ``leaves``."""
    if spec is None:
        return next(leaves)
    kind, children = spec
    if kind is dict:
        return {k: _unflatten(c, leaves) for k, c in children}
    return kind(_unflatten(c, leaves) for c in children)


def _leaves(obj):
    leaves = []
    spec = _flatten(obj, leaves)
    return leaves, spec


# ---------------------------------------------------------------- the autograd node
class _Captures:
    """One graphed callable's graphs and the static tensors they read and write."""

    def __init__(self, inputs, n_user, fwd, outputs, spec, stream):
        self.inputs, self.n_user = inputs, n_user  # sample args, then the module's parameters
        self.fwd, self.outputs, self.spec = fwd, outputs, spec
        self.stream = stream  # the capture stream, kept alive: its address stays one of backend.graph_streams
        self.bwd, self.grad_outputs, self.grad_inputs = None, (), ()

    def copy_in(self, statics, arrays):
        """``static[...] = a`` for each static tensor (None: skipped), on the current stream."""
        stream = backend.cupy.cuda.get_current_stream()
        for static, a in zip(statics, arrays):
            if static is None or a is static._data:
                continue
            if a.dtype == static._data.dtype and a.shape == static._data.shape:
                _copy_into(static._data, a, stream)  # (one asynchronous copy where both are contiguous)
            else:  # a gradient in another dtype: cast
                static._data[...] = a


class _Graphed(Function):
    """Forward: the forward graph's replay; backward: the backward graph's (``graphed``: a :class:`_Captures`)."""

    @staticmethod
    def forward(ctx, *arrays, graphed):
        ctx.graphed = graphed
        graphed.copy_in(graphed.inputs[:graphed.n_user], arrays[:graphed.n_user])  # (parameters are the statics)
        graphed.fwd.replay()
        return tuple(o._data for o in graphed.outputs)

    @staticmethod
    def backward(ctx, *grads):
        graphed = ctx.graphed
        if graphed.bwd is None:  # (no output required grad at capture: nothing was captured to replay)
            return (None,) * len(graphed.inputs)
        graphed.copy_in(graphed.grad_outputs, grads)
        graphed.bwd.replay()
        # views: the engine copies a view into .grad instead of adopting the buffer the next replay rewrites
        return tuple(None if g is None else g._data.view() for g in graphed.grad_inputs)


def _graphed_function(graphed):
    """The callable that runs ``graphed``: arguments checked against the samples, then one :class:`_Graphed`."""
    samples, params = graphed.inputs[:graphed.n_user], graphed.inputs[graphed.n_user:]

    def functionalized(*user_args):
        args, _ = _leaves(user_args)
        if len(args) != len(samples):
            raise backend.InputError(f"{_OP}: the graphed callable takes {len(samples)} tensor arguments (as its "
                                     f"sample_args), got {len(args)}")
        for i, (a, s) in enumerate(zip(args, samples)):
            if not isinstance(a, Tensor):
                raise backend.InputTypeError(f"{_OP}: argument {i} must be a tensor, got {type(a).__name__}")
            if a.shape != s.shape or a.dtype != s.dtype or a.device != s.device:
                raise backend.InputError(f"{_OP}: argument {i} must match its sample arg (shape {tuple(s.shape)}, "
                                         f"{s.dtype}, {s.device}), got shape {tuple(a.shape)}, {a.dtype}, "
                                         f"{a.device}")
            if a.requires_grad and not s.requires_grad and autograd.is_grad_enabled():
                raise RuntimeError(f"{_OP}: argument {i} requires grad but its sample arg did not, so the graph "
                                   f"computes no gradient for it; make the sample's requires_grad match")
        out = _Graphed.apply(*args, *params, graphed=graphed)
        return _unflatten(graphed.spec, iter(out if isinstance(out, tuple) else (out,)))

    return functionalized


def _graphed_forward(module, training, graphed, original):
    def forward(*args, **kwargs):
        if module.training == training:
            return graphed(*args, **kwargs)
        return original(*args, **kwargs)

    return forward


# ---------------------------------------------------------------- checks, warm-up, captures
def _check(callables, sample_args, num_warmup_iters, enable_annotations):
    """PyTorch's argument checks (its AssertionErrors, word for word, where it has them): the flat sample args
    of each callable."""
    if enable_annotations:
        raise NotImplementedError(f"{_OP}: enable_annotations=True (torch.cuda.graph_annotations) is not supported")
    if isinstance(num_warmup_iters, bool) or not isinstance(num_warmup_iters, int) or num_warmup_iters < 0:
        raise backend.InputError(f"{_OP}: num_warmup_iters must be an int >= 0, got {num_warmup_iters!r}")
    if not isinstance(sample_args, (tuple, list)):
        raise backend.InputTypeError(f"{_OP}: sample_args must be a tuple of tensors (a tuple of such tuples for a "
                                     f"tuple of callables), got {type(sample_args).__name__}")
    if len(sample_args) != len(callables):
        raise backend.InputError(f"{_OP}: got {len(callables)} callables and sample_args for {len(sample_args)}")
    flat = []
    for c, args in zip(callables, sample_args):
        if not callable(c):
            raise backend.InputTypeError(f"{_OP}: expected a Module or a function, got {type(c).__name__}")
        if not isinstance(args, (tuple, list)):
            raise backend.InputTypeError(f"{_OP}: sample_args must be a tuple of tensors per callable, got "
                                         f"{type(args).__name__}")
        if isinstance(c, Module):
            hooks = c.__dict__.get("_call_hooks")
            if hooks is not None and not hooks.empty():
                raise AssertionError("Modules must not have hooks registered at the time they are passed. However, "
                                     "registering hooks on modules after passing them through "
                                     "make_graphed_callables is allowed.")
            if not all(b.requires_grad is False for b in c.buffers()):
                raise AssertionError("In any :class:`~torch.nn.Module` passed to :func:`~make_graphed_callables`, "
                                     "only parameters may be trainable. All buffers must have "
                                     "``requires_grad=False``.")
        leaves, _ = _leaves(tuple(args))
        if not all(isinstance(a, Tensor) for a in leaves):
            raise AssertionError("In the beta API, sample_args for each callable must contain only Tensors. Other "
                                 "types are not allowed.")
        flat.append(tuple(leaves))
    return flat


def _grads(outputs, surface, grad_outputs, allow_unused):
    """d(outputs that require grad)/d(surface tensors that require grad), weighted by ``grad_outputs``."""
    return autograd.grad(tuple(o for o in outputs if o.requires_grad), tuple(i for i in surface if i.requires_grad),
                         grad_outputs=grad_outputs, allow_unused=allow_unused)


def _outputs(func_outputs):
    leaves, spec = _leaves(func_outputs)
    for o in leaves:
        if not isinstance(o, Tensor):
            raise backend.InputTypeError(f"{_OP}: a graphed callable must return tensors (or tuples, lists, dicts "
                                         f"of them), got a {type(o).__name__}")
    return tuple(leaves), spec


def make_graphed_callables(callables, sample_args, num_warmup_iters=3, allow_unused_input=False, pool=None,
                           capture_error_mode="global", enable_annotations=False):
    """``torch.cuda.make_graphed_callables``: ``callables`` (a Module or a function, or a tuple of them with a
    tuple of sample-arg tuples) graphed, forward and backward (see the module's doc). Returns what it was given:
    the Module itself (its forward replaced) or a function, or a tuple of those."""
    single = not isinstance(callables, tuple)
    callables, sample_args = ((callables,), (sample_args,)) if single else (callables, sample_args)
    flat_args = _check(callables, sample_args, num_warmup_iters, enable_annotations)
    if not backend.cuda_available():
        raise RuntimeError(f"{_OP}: CUDA graphs need a CUDA device, and none is available")
    cupy = backend.cupy
    if pool is not None and not isinstance(pool, cupy.cuda.MemoryPool):
        raise backend.InputTypeError(f"{_OP}: pool must come from graph_pool_handle() or a graph's pool(), got "
                                     f"{type(pool).__name__}")
    if capture_error_mode not in _CAPTURE_MODES:
        raise backend.InputError(f"{_OP}: capture_error_mode must be one of {_CAPTURE_MODES}, got "
                                 f"{capture_error_mode!r}")
    for args in flat_args:
        for a in args:
            if not a.is_cuda:
                raise backend.InputError(f"{_OP}: sample_args must be cuda tensors, got one on {a.device}")
    params = [tuple(c.parameters()) if isinstance(c, Module) else () for c in callables]
    surfaces = [args + ps for args, ps in zip(flat_args, params)]
    mempool = graph_pool_handle() if pool is None else pool

    cupy.cuda.Device().synchronize()
    side = Stream()
    backend.graph_streams.add((side.device_index, side.cuda_stream))  # plans made there are chosen for graphs
    with stream_context(side):  # the warm-up: plans, kernels and optimizer-free state made before any capture
        for func, args, surface in zip(callables, sample_args, surfaces):
            for _ in range(num_warmup_iters):
                outputs, _ = _outputs(func(*args))
                if any(o.requires_grad for o in outputs):
                    _grads(outputs, surface, tuple(Tensor._from_array(cupy.zeros_like(o._data)) for o in outputs
                                                   if o.requires_grad), allow_unused_input)
                outputs = None  # (the warm-up's activations, freed before the captures)
    cupy.cuda.Device().synchronize()

    captures = []
    for func, args, surface, n_user in zip(callables, sample_args, surfaces, map(len, flat_args)):
        fwd = CUDAGraph()
        with graph(fwd, pool=mempool, stream=side, capture_error_mode=capture_error_mode):
            func_outputs = func(*args)
        outputs, spec = _outputs(func_outputs)
        captures.append(_Captures(surface, n_user, fwd, outputs, spec, side))
    for graphed in reversed(captures):  # backwards in the order they replay: the last callable's first
        grad_outputs = tuple(Tensor._from_array(cupy.zeros_like(o._data)) if o.requires_grad else None
                             for o in graphed.outputs)
        static_grads = None
        if any(o.requires_grad for o in graphed.outputs):
            graphed.bwd = CUDAGraph()
            with graph(graphed.bwd, pool=mempool, stream=side, capture_error_mode=capture_error_mode):
                static_grads = _grads(graphed.outputs, graphed.inputs,
                                      tuple(g for g in grad_outputs if g is not None), allow_unused_input)
        found = iter(static_grads or ())
        graphed.grad_outputs = grad_outputs
        graphed.grad_inputs = tuple(next(found) if i.requires_grad and static_grads is not None else None
                                    for i in graphed.inputs)

    result = []
    for func, graphed in zip(callables, captures):
        run = _graphed_function(graphed)
        if isinstance(func, Module):
            func.forward = _graphed_forward(func, func.training, run, func.forward)
            result.append(func)
        else:
            result.append(run)
    return result[0] if single else tuple(result)
