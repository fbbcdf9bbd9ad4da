"""The tape: Functions, their contexts, grad mode, and the reverse walk.

Every differentiable op is a :class:`Function` whose ``forward(ctx, *arrays)``
computes raw arrays and keeps on ``ctx`` exactly what ``backward(ctx, *grads)``
needs: arrays through ``ctx.save_for_backward`` (checked against in-place
changes by version counters) and anything else (ReLU bit-masks, mean/rstd,
pooling indices) as plain attributes. ``Function.apply`` records the call on
the tape when grad mode is on and an input requires grad; the output tensors
point back at the context, which is the tape's node.

:func:`backward` walks the tape in reverse: build the order (every node after
its consumers), call each node's backward, add up the gradients. Hooks,
retained grads, early gradient commits (for data parallelism) and memory
release are small helpers around that core.

Fusion across ops has one protocol: a backward may ask ``ctx.sole_producer(i)``
for the context of the op that produced input ``i``, which the engine returns
only when this op is that output's sole consumer in the graph being
differentiated (no hook, no retained grad, aux data not freed). It may then
return, as input ``i``'s gradient, a :class:`Handoff`: a payload only that
producer's backward understands, which the engine delivers to it untouched.

Every in-place write goes through one mutator, :meth:`VersionCounter.bump`,
which records the op's name for the error a broken backward raises.

The package: ``modes`` (grad mode, anomaly and debug checks), ``tape`` (version counters, the node,
recording) and ``walk`` (the reverse walk, leaf gradients, hooks); around them PyTorch's user-facing extras:
``functional`` (jacobian, vjp, jvp), ``gradcheck`` and the legacy ``Variable``; ``grad_mode`` and
``anomaly_mode`` hold the modes where PyTorch keeps them. It sits below ``tensor.py``: it never imports ``Tensor``.
The tensor module registers its class here with :func:`_register_tensor_type`.
"""
from __future__ import annotations

from . import higher as _higher
from . import tape as _tape
from . import walk as _walk
from .modes import (detect_anomaly, enable_grad, inference_mode, is_anomaly_check_nan_enabled, is_anomaly_enabled,
                    is_grad_enabled, no_grad, set_detect_anomaly, set_grad_enabled)
from .tape import (Context, Function, Handoff, VersionCounter, refuse_internal_overlap, refuse_no_grad_view,
                   refuse_view_of_grad_leaf, same_region, settle_view_write)
from .walk import _post_hooks_used, backward, grad, queue_callback
from . import functional  # noqa: E402 - torch.autograd.functional: jacobian, vjp
from .gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: E402 - shadows its module, as PyTorch's
from .variable import Variable  # noqa: E402
from . import anomaly_mode, grad_mode  # noqa: E402 - PyTorch's module paths of the modes
from . import graph  # noqa: E402 - torch.autograd.graph: the nodes tensor.grad_fn shows

__all__ = ["Context", "Function", "GradcheckError", "Handoff", "Variable", "VersionCounter", "anomaly_mode", "backward",
           "detect_anomaly", "enable_grad", "functional", "grad", "grad_mode", "graph", "gradcheck", "gradgradcheck",
           "inference_mode", "is_anomaly_check_nan_enabled", "is_anomaly_enabled", "is_grad_enabled", "no_grad",
           "queue_callback", "refuse_internal_overlap", "refuse_view_of_grad_leaf", "set_detect_anomaly",
           "set_grad_enabled"]


def _register_tensor_type(cls) -> None:
    """The Tensor class, for the modules that wrap arrays (tensor.py calls this once it is defined)."""
    _tape._Tensor = cls
    _walk._Tensor = cls
    _higher._Tensor = cls
