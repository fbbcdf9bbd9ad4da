"""``torch.utils.checkpoint``: activation checkpointing. :func:`checkpoint` runs a function without keeping
its intermediate results for the backward (under ``no_grad``), keeps only its inputs, and runs it again in
the backward, with the cpu generator's state it had (dropout draws the same mask, on either device), to
differentiate it there: memory
for the segment's activations traded for one more forward. The parameters inside get their gradients from
that second run's backward; its inputs' gradients flow on through the outer graph."""
from __future__ import annotations

from .. import backend
from ..autograd import Function, enable_grad, no_grad
from ..tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential"]


class _Checkpoint(Function):
    @staticmethod
    def forward(ctx, *arrays, function, template, kwargs, preserve_rng_state):
        ctx.function, ctx.template, ctx.kwargs = function, template, kwargs
        ctx.rng = _cpu_rng_state() if preserve_rng_state else None
        ctx.save_for_backward(*arrays)
        with no_grad():
            out = function(*_fill(template, [Tensor._from_array(a) for a in arrays]), **kwargs)
        outs = out if isinstance(out, tuple) else (out,)
        if not outs or not all(isinstance(o, Tensor) for o in outs):
            raise TypeError(f"checkpoint: the function must return a tensor or a tuple of tensors, got "
                            f"{type(out).__name__}")
        ctx.single = not isinstance(out, tuple)
        return outs[0]._data if ctx.single else tuple(o._data for o in outs)

    @staticmethod
    def backward(ctx, *grads):
        arrays = ctx.saved_tensors
        inputs = [Tensor._from_array(a, need) for a, need in zip(arrays, ctx.needs_input_grad)]
        saved = _cpu_rng_state() if ctx.rng is not None else None
        try:
            if ctx.rng is not None:
                _set_cpu_rng_state(ctx.rng)
            with enable_grad():
                out = ctx.function(*_fill(ctx.template, inputs), **ctx.kwargs)
                outs = (out,) if ctx.single else out
                # one scalar whose gradient is the vector-Jacobian product: sum_i <out_i, grad_i>
                terms = [(o * Tensor._from_array(g)).sum() for o, g in zip(outs, grads)
                         if g is not None and o.requires_grad]
        finally:
            if saved is not None:
                _set_cpu_rng_state(saved)
        if terms:
            total = terms[0]
            for term in terms[1:]:
                total = total + term
            total.backward()
        return tuple(None if not need or t.grad is None else t.grad._data
                     for t, need in zip(inputs, ctx.needs_input_grad))


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


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default", debug=False,
               preserve_rng_state=True, **kwargs):
    """``function(*args, **kwargs)`` checkpointed (see the module): its result, recorded so that the backward
    runs ``function`` again. Tensor arguments are its differentiable inputs; others are passed as they are.
    ``use_reentrant`` (either value) and ``determinism_check`` / ``debug`` are accepted, as PyTorch's;
    ``context_fn`` is not supported."""
    if context_fn is not None:
        raise NotImplementedError("checkpoint: context_fn is not supported")
    if not callable(function):
        raise TypeError(f"checkpoint: expected a callable, got {type(function).__name__}")
    template = [None if isinstance(a, Tensor) else (a,) for a in args]
    tensors = [a for a in args if isinstance(a, Tensor)]
    if not tensors:
        raise ValueError("checkpoint: the function needs at least one tensor argument")
    return _Checkpoint.apply(*tensors, function=function, template=template, kwargs=kwargs,
                             preserve_rng_state=bool(preserve_rng_state))


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):  # noqa: A002
    """``functions`` (a Sequential or a list of modules) run in ``segments`` checkpointed chunks, the last one
    plainly, as PyTorch's."""
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
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, **kwargs)
    return run(end, len(functions))(input)
