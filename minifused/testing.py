"""Testing helpers: ``gradcheck`` compares analytic gradients with float64 central differences."""
from __future__ import annotations

import numpy as np

from . import backend
from .autograd import no_grad
from .tensor import Tensor


def _outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _projected(fn, inputs, weights):
    """sum_k <out_k, w_k> as a float64 number, with grad mode off."""
    with no_grad():
        outs = _outputs(fn(*inputs))
    return sum(float(np.sum(backend.to_device(o._data, backend.CPU).astype(np.float64) * w))
               for o, w in zip(outs, weights) if w is not None)


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, seed=0):
    """Check ``fn``'s gradients with respect to every input that requires grad.

    The outputs are projected on fixed random weights ``w`` (so the check covers
    Jᵀw for a random w), the analytic gradient of that projection comes from
    ``backward()``, and the numeric one from central differences of step ``eps``.
    Use float64 inputs. Returns True or raises AssertionError naming the input,
    the worst element and both values.
    """
    inputs = tuple(inputs)
    rng = np.random.default_rng(seed)
    outs = _outputs(fn(*inputs))
    weights = [rng.standard_normal(o.shape) if backend.is_floating(o.dtype) else None for o in outs]
    differentiable = [(o, w) for o, w in zip(outs, weights) if w is not None and o.requires_grad]
    for t in inputs:
        if isinstance(t, Tensor):
            t.grad = None
    if differentiable:
        loss = None
        for o, w in differentiable:
            term = (o * Tensor._from_array(backend.to_device(w.astype(o.dtype), o.device))).sum()
            loss = term if loss is None else loss + term
        loss.backward()
    for index, t in enumerate(inputs):
        if not (isinstance(t, Tensor) and t.requires_grad):
            continue
        analytic = (np.zeros(t.shape) if t.grad is None
                    else backend.to_device(t.grad._data, backend.CPU).astype(np.float64))
        if analytic.shape != t.shape:
            raise AssertionError(f"gradcheck: input {index} has shape {t.shape} but its gradient has "
                                 f"shape {analytic.shape}")
        host = backend.to_device(t._data, backend.CPU).copy()
        numeric = np.zeros(host.shape, np.float64)
        flat, nflat = host.reshape(-1), numeric.reshape(-1)
        original = t._data
        try:
            for i in range(flat.size):
                value = flat[i]
                flat[i] = value + eps
                t._data = backend.to_device(host, t.device)
                plus = _projected(fn, inputs, weights)
                flat[i] = value - eps
                t._data = backend.to_device(host, t.device)
                minus = _projected(fn, inputs, weights)
                flat[i] = value
                nflat[i] = (plus - minus) / (2 * eps)
        finally:
            t._data = original
        # isclose, not a '>' test: a NaN or infinite analytic gradient is a mismatch, not a pass
        bad = ~np.isclose(analytic, numeric, rtol=rtol, atol=atol, equal_nan=True)
        if bad.any():
            worst = np.unravel_index(np.argmax(np.abs(analytic - numeric)), numeric.shape)
            raise AssertionError(
                f"gradcheck: gradient of input {index} (shape {t.shape}) differs at {bad.sum()} of "
                f"{bad.size} elements; worst at {worst}: analytic {analytic[worst]:.8g}, "
                f"numeric {numeric[worst]:.8g}")
    return True
