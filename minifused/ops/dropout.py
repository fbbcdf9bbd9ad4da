"""Dropout as a tape op: the forward keeps its mask (bit-packed, 1 bit per element) on the
context for the backward."""
from __future__ import annotations

from .. import backend
from ..autograd import Function
from ..kernels import dropout as K
from .inplace_arith import MulInto
from ..tensor import Tensor


class DropoutFn(Function):
    @staticmethod
    def forward(ctx, x, p, seed, out=None):
        y, mask = K.dropout_forward(x, seed, p, out=out)
        ctx.mask, ctx.p = mask, p
        return y

    @staticmethod
    def backward(ctx, g):
        return K.dropout_backward(g, ctx.mask, ctx.p), None, None

    @staticmethod
    def backward_graph(ctx, g):
        return _Dropped.apply(g, ctx.mask, ctx.p), None, None


class _Dropped(Function):
    """Dropout's input gradient ``g * mask / (1 - p)`` (the array backward): linear in ``g`` with a constant
    mask, so it is its own gradient, to any order."""

    @staticmethod
    def forward(ctx, g, mask, p):
        ctx.mask, ctx.p = mask, p
        return K.dropout_backward(g, mask, p)

    backward = staticmethod(DropoutFn.backward)
    backward_graph = staticmethod(DropoutFn.backward_graph)


def dropout(x: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)`` when training.

    The seed of the mask is drawn from the CPU generator (no device read-back), so
    ``minifused.manual_seed`` / ``set_rng_state`` make masks reproducible on every device.
    ``inplace``: the result is written into ``x``, which is returned (``Function.apply_``).
    """
    if not training or p == 0.0:
        return x
    if p == 1.0:  # nothing kept: x * 0 in either form, so inf and NaN give NaN, as PyTorch's (the mask kernel zeroes)
        return MulInto.apply_("dropout_", x, 0.0) if inplace else x * 0.0
    seed = backend.kernel_seed()
    if inplace:
        return DropoutFn.apply_("dropout_", x, float(p), seed)
    return DropoutFn.apply(x, float(p), seed)
