"""``torch.autograd.gradcheck`` and ``gradgradcheck``: every output's analytic Jacobian (one backward per output
element) against float64 central differences, input by input, as PyTorch's slow mode does."""
from __future__ import annotations

import warnings

import numpy as np

from .. import backend
from . import tape as _tape
from .functional import _as_tuple
from .modes import enable_grad, no_grad
from .walk import grad

__all__ = ["GradcheckError", "gradcheck", "gradgradcheck"]


class GradcheckError(RuntimeError):
    """Raised by :func:`gradcheck` when the analytic and numeric gradients differ (PyTorch's class)."""


def _host(array):
    return backend.to_device(array, backend.CPU)


def _differentiable(outputs):
    """The outputs gradcheck checks: those that require grad (PyTorch's ``_differentiable_outputs``)."""
    return [o for o in outputs if o.requires_grad]


def _numeric(func, inputs, t, eps, keep):
    """The numeric Jacobian, with respect to ``t``, of the outputs at positions ``keep``: (out.size, t.size) float64
    arrays."""
    host = _host(t._data).copy()
    flat, original = host.reshape(-1), t._data
    cols = None
    try:
        for i in range(flat.size):
            value = flat[i]
            values = []
            for step in (eps, -eps):
                flat[i] = value + step
                t._data = backend.to_device(host, t.device)
                with no_grad():
                    _, outs = _as_tuple(func(*inputs), "outputs of the user-provided function", "gradcheck", True)
                values.append([_host(outs[k]._data).astype(np.float64).reshape(-1) for k in keep])
            flat[i] = value
            if cols is None:
                cols = [np.zeros((v.size, flat.size)) for v in values[0]]
            for c, plus, minus in zip(cols, *values):
                c[:, i] = (plus - minus) / (2 * eps)
    finally:
        t._data = original
    return cols if cols is not None else [np.zeros((0, 0))] * len(keep)


def _analytic(out, inputs, check_grad_dtypes):
    """``out``'s analytic Jacobian with respect to each of ``inputs``: (out.size, input.size) float64 arrays."""
    rows = [np.zeros((out._data.size, t._data.size)) for t in inputs]
    if not out.requires_grad:
        return rows
    for k in range(out._data.size):
        onehot = out._xp.zeros(out._data.shape, out._data.dtype)
        onehot.reshape(-1)[k] = 1
        grads = grad(out, inputs, _tape._Tensor._from_array(onehot), retain_graph=True, allow_unused=True)
        for j, (g, t) in enumerate(zip(grads, inputs)):
            if g is None:
                continue
            if tuple(g.shape) != tuple(t.shape):
                raise GradcheckError(f"gradcheck: wrong shape of the gradient of input {j}: expected "
                                     f"{tuple(t.shape)}, got {tuple(g.shape)}")
            if check_grad_dtypes and g.dtype != t.dtype:
                raise GradcheckError(f"gradcheck: gradient of input {j} has dtype {g.dtype}, the input {t.dtype}")
            rows[j][k] = _host(g._data).astype(np.float64).reshape(-1)
    return rows


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, nondet_tol=0.0,
              check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
              check_batched_forward_grad=False, check_forward_ad=False, check_backward_ad=True, fast_mode=False,
              masked=None):
    """Check the gradients of ``func`` with respect to the ``inputs`` that require grad (PyTorch's signature):
    each floating output's full Jacobian from backward must be ``allclose(analytic, numeric, rtol, atol)`` to the
    central differences of step ``eps``. Returns True, or raises :class:`GradcheckError` naming the output and
    input (False instead with ``raise_exception=False``). Use float64 inputs (others draw a warning, as
    PyTorch's). ``fast_mode`` runs the full check; ``nondet_tol``, ``check_undefined_grad`` and ``masked`` are
    accepted; the batched and forward-mode checks are not supported."""
    for name, value in (("check_batched_grad", check_batched_grad), ("check_forward_ad", check_forward_ad),
                        ("check_batched_forward_grad", check_batched_forward_grad)):
        if value:
            raise NotImplementedError(f"gradcheck: {name}=True is not supported (minifused has no vmap or "
                                      f"forward-mode autograd)")
    if masked:
        raise NotImplementedError("gradcheck: masked=True is not supported")
    if not callable(func):
        raise TypeError(f"gradcheck: func must be callable, got {type(func).__name__}")
    T = _tape._Tensor
    inputs = (inputs,) if isinstance(inputs, T) else tuple(inputs)
    diff = [(i, t) for i, t in enumerate(inputs) if isinstance(t, T) and t.requires_grad]
    if not diff:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of them have "
                         "requires_grad=True")
    for i, t in diff:
        if t.dtype != np.float64:
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating point. As a "
                          f"result, the check may fail", UserWarning, stacklevel=2)
    if not check_backward_ad:
        raise AssertionError("Expected at least one of check_forward_ad or check_backward_ad to be True")
    with enable_grad():
        _, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "gradcheck", True)
    # the outputs that require grad are checked, as PyTorch's; with none, every floating output's numeric Jacobian
    # must be zero
    keep = [k for k, o in enumerate(outputs) if o.requires_grad]
    if not keep:
        floating = [k for k, o in enumerate(outputs) if backend.is_floating(o.dtype)]
        if any(np.any(n != 0) for _, t in diff for n in _numeric(func, inputs, t, eps, floating)):
            if not raise_exception:
                return False
            raise GradcheckError("gradcheck: numerical gradient for function expected to be zero (no output "
                                 "requires grad)")
        return True
    outputs = [outputs[k] for k in keep]
    analytic = [_analytic(o, [t for _, t in diff], check_grad_dtypes) for o in outputs]
    for j, (i, t) in enumerate(diff):
        numeric = _numeric(func, inputs, t, eps, keep)
        for k in range(len(outputs)):
            a, n = analytic[k][j], numeric[k]
            if not np.allclose(a, n, rtol=rtol, atol=atol, equal_nan=True):
                if not raise_exception:
                    return False
                worst = tuple(int(w) for w in np.unravel_index(np.argmax(np.abs(a - n)), a.shape))
                raise GradcheckError(f"gradcheck: Jacobian mismatch for output {k} with respect to input {i}; "
                                     f"worst at (output element, input element) {worst}: analytic "
                                     f"{a[worst]:.8g}, numeric {n[worst]:.8g}\nnumerical:{n}\nanalytical:{a}")
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False, masked=False):
    """Check second-order gradients (PyTorch's ``gradgradcheck``, its signature): :func:`gradcheck` of the function
    that maps (inputs, grad_outputs) to the gradients of ``func``'s outputs that require grad, weighted by
    grad_outputs, with respect to the inputs that require grad, taken with ``create_graph=True``. ``grad_outputs``
    default to standard normal draws (fixed seed) in the outputs' dtypes, which require grad, so the check covers
    both arguments."""
    for name, value in (("check_batched_grad", check_batched_grad), ("check_fwd_over_rev", check_fwd_over_rev)):
        if value:
            raise NotImplementedError(f"gradgradcheck: {name}=True is not supported (minifused has no vmap or "
                                      f"forward-mode autograd)")
    if masked:
        raise NotImplementedError("gradgradcheck: masked=True is not supported")
    if not check_rev_over_rev:
        raise AssertionError("Expected at least one of check_forward_ad or check_backward_ad to be True")
    T = _tape._Tensor
    inputs = (inputs,) if isinstance(inputs, T) else tuple(inputs)
    wanted = [i for i, t in enumerate(inputs) if isinstance(t, T) and t.requires_grad]
    if grad_outputs is None:
        with enable_grad():
            _, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "gradgradcheck", True)
        rng = np.random.default_rng(0)
        grad_outputs = tuple(T._from_array(backend.to_device(rng.standard_normal(o.shape).astype(o.dtype), o.device),
                                           True) for o in _differentiable(outputs))
    grad_outputs = (grad_outputs,) if isinstance(grad_outputs, T) else tuple(grad_outputs)
    n = len(grad_outputs)

    def first_gradients(*args):
        with enable_grad():  # (also where gradcheck's differences call it under no_grad)
            _, outs = _as_tuple(func(*args[:-n]), "outputs of the user-provided function", "gradgradcheck", True)
            grads = grad(_differentiable(outs), [args[i] for i in wanted], list(args[-n:]), create_graph=True,
                         allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(first_gradients, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, check_grad_dtypes=check_grad_dtypes)
