"""Module backward hooks: the module's tensor inputs and outputs pass through two identity nodes on
the tape. The output node's backward sees ``grad_output`` (and runs the backward pre-hooks); the
input node's backward sees ``grad_input`` and runs the full backward hooks, which may replace it."""
from __future__ import annotations

from ..autograd import Function
from ..autograd.tape import show_to_user
from ..ops.creation import zeros
from ..tensor import Tensor


#: PyTorch's global full backward hooks and pre-hooks (``nn.modules.module.register_module_full_backward_hook``
#: and ``..._pre_hook``): dicts from handle id to hook, run on every module's call before the module's own.
global_backward_hooks = {}
global_backward_pre_hooks = {}


def _backward_hooks_of(module, kind):
    """The global then ``module``'s own hooks of ``kind`` ('backward' or 'backward_pre'), in the order they run."""
    own = module._call_hooks
    glob = global_backward_hooks if kind == "backward" else global_backward_pre_hooks
    return [*glob.values(), *(getattr(own, kind).values() if own else ())]


class _CallState:
    """What one call's two nodes share."""

    __slots__ = ("module", "n_args", "tensor_positions", "constants", "grad_output", "input_node", "n_outputs",
                 "output_positions")

    def __init__(self, module, n_args, tensor_positions, constants=()):
        self.module, self.n_args, self.tensor_positions = module, n_args, tensor_positions
        self.constants = constants  # (position, shape, dtype, device) of the tensor inputs that need no gradient
        self.grad_output, self.input_node = None, False
        self.n_outputs, self.output_positions = 1, (0,)  # (set by wrap_outputs)


def _checked(grads, like, what):
    """A hook's replacement gradients, as tensors (None kept), after the checks PyTorch makes."""
    if not isinstance(grads, tuple) or len(grads) != len(like):
        raise RuntimeError(f"backward hook returned {type(grads).__name__} of length "
                           f"{len(grads) if isinstance(grads, tuple) else '-'}, expected a tuple of "
                           f"{len(like)} {what}")
    grads = tuple(g if g is None or isinstance(g, Tensor) else Tensor._from_array(g) for g in grads)
    for g, old in zip(grads, like):
        if g is not None and old is not None and tuple(g.shape) != tuple(old.shape):
            raise RuntimeError(f"backward hook has changed the size of a gradient: expected shape "
                               f"{tuple(old.shape)}, got {tuple(g.shape)}")
    return grads


def _wrap(arrays):
    """The gradients as tensors for the hooks (user code: none becomes a leaf's own .grad)."""
    show_to_user(*arrays)
    return tuple(None if a is None else Tensor._from_array(a) for a in arrays)


def _arrays(grads):
    arrays = tuple(None if g is None else g._data for g in grads)
    show_to_user(*arrays)
    return arrays


class _HookNode(Function):
    """Passes its arrays through; its backward runs the module's hooks (``state``: the call's) on the gradients
    as tensors: wrapped arrays, or under ``create_graph`` the graph's own tensors (``backward_graph``)."""

    @staticmethod
    def forward(ctx, *arrays, state):
        ctx.state = state
        return tuple(arrays)

    @classmethod
    def backward(cls, ctx, *grads):
        return _arrays(cls.hooks(ctx.state, _wrap(grads)))

    @classmethod
    def backward_graph(cls, ctx, *grads):
        return cls.hooks(ctx.state, grads)


class _InputNode(_HookNode):
    @staticmethod
    def hooks(state, grads):
        if state.grad_output is None:  # the output node never ran (an output of no tensor or tuple, as a dict's):
            return grads  # PyTorch's hooks then never run
        grad_input = [None] * state.n_args
        for pos, g in zip(state.tensor_positions, grads):
            grad_input[pos] = g
        for pos, shape, dtype, device in state.constants:  # zeros, as PyTorch's (its hook node's outputs for them
            grad_input[pos] = zeros(shape, dtype=dtype, device=device)  # are non-differentiable, their grads zeros)
        grad_input = tuple(grad_input)
        for hook in _backward_hooks_of(state.module, "backward"):
            result = hook(state.module, grad_input, state.grad_output)
            if result is not None:
                grad_input = _checked(tuple(result), grad_input, "gradients (one per positional input)")
        return tuple(grad_input[pos] for pos in state.tensor_positions)


class _OutputNode(_HookNode):
    materialize_grads = False  # an unused output's grad_output is None, as PyTorch's

    @staticmethod
    def hooks(state, grads):
        # one entry per output, as PyTorch's: None for an output that is no tensor or needs no gradient
        grad_output = [None] * state.n_outputs
        for pos, g in zip(state.output_positions, grads):
            grad_output[pos] = g
        grad_output = tuple(grad_output)
        for hook in _backward_hooks_of(state.module, "backward_pre"):
            result = hook(state.module, grad_output)
            if result is not None:
                grad_output = _checked(tuple(result), grad_output, "gradients (one per output)")
        state.grad_output = grad_output
        if not state.input_node:  # no input requires grad: the hooks see grad_input of Nones
            for hook in _backward_hooks_of(state.module, "backward"):
                hook(state.module, (None,) * state.n_args, grad_output)
        return tuple(grad_output[pos] for pos in state.output_positions)


def wrap_inputs(module, args):
    """``args`` with the tensors that require grad passed through the input node."""
    positions = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad)
    constants = tuple((i, a.shape, a.dtype, a.device) for i, a in enumerate(args)
                      if isinstance(a, Tensor) and not a.requires_grad)
    state = _CallState(module, len(args), positions, constants)
    if positions:
        passed = _InputNode.apply(*[args[i] for i in positions], state=state)
        args = list(args)
        for i, t in zip(positions, passed):
            args[i] = t
        args = tuple(args)
        state.input_node = True
    return args, state


def wrap_outputs(output, state):
    """``output`` (a tensor or a tuple of them) passed through the output node; other outputs as they are."""
    single = isinstance(output, Tensor)
    outs = (output,) if single else output
    if not isinstance(outs, tuple) or not any(isinstance(o, Tensor) and o.requires_grad for o in outs):
        return output
    positions = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
    state.n_outputs, state.output_positions = len(outs), positions
    passed = _OutputNode.apply(*[outs[i] for i in positions], state=state)
    outs = list(outs)
    for i, t in zip(positions, passed):
        outs[i] = t
    return outs[0] if single else tuple(outs)
