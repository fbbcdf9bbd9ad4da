"""``clip_grad_norm_`` (and ``clip_grad_value_``), computed on the device with no host sync."""
from __future__ import annotations

import math

from ..autograd import no_grad
from ..tensor import Tensor


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale gradients in place so that their joint ``norm_type`` norm is at most ``max_norm``.

    As PyTorch: ``total = norm(stack(norm(g) for g in grads))``, ``coef = min(max_norm / (total + 1e-6), 1)``,
    every gradient multiplied by ``coef``. Returns ``total`` as a 0-d tensor on the gradients'
    device (reading it syncs; clipping itself does not). ``error_if_nonfinite`` reads it, so syncs.
    """
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    grads = [p.grad for p in parameters if p.grad is not None]
    norm_type = float(norm_type)
    if not grads:
        from ..ops import zeros

        return zeros(())
    xp = grads[0]._xp
    acc = xp.float64 if all(g.dtype == xp.float64 for g in grads) else xp.float32
    with no_grad():
        if math.isinf(norm_type):
            norms = [xp.abs(g._data).max().astype(acc) for g in grads]
            total = xp.stack(norms).max()
        else:
            norms = [xp.linalg.norm(g._data.ravel().astype(acc), ord=norm_type) for g in grads]
            total = xp.linalg.norm(xp.stack(norms), ord=norm_type)
        if error_if_nonfinite and not bool(xp.isfinite(total)):
            raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is "
                               f"non-finite ({float(total)}), so it cannot be clipped")
        coef = xp.minimum(acc(max_norm) / (total + acc(1e-6)), acc(1.0))
        for g in grads:
            g._data *= coef.astype(g._data.dtype)
            g._bump("clip_grad_norm_")
    return Tensor._from_array(total)


def clip_grad_value_(parameters, clip_value):
    """Clamp every gradient element to ``[-clip_value, clip_value]`` in place."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    for p in parameters:
        if p.grad is not None:
            g = p.grad
            g._xp.clip(g._data, -clip_value, clip_value, out=g._data)
            g._bump("clip_grad_value_")
