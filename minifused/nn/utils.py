"""Gradient clipping (``clip_grad_norm_``, ``clip_grad_value_``, ``get_total_norm``,
``clip_grads_with_norm_``), computed on the device with no host sync, and the flat parameter
vector (``parameters_to_vector``, ``vector_to_parameters``), as ``torch.nn.utils``."""
from __future__ import annotations

import math

import numpy as np

from .. import backend
from ..autograd import no_grad
from ..tensor import Tensor
from ..backend import InputError, InputTypeError


def _tensors(tensors):
    """A tensor, or any iterable of them (a generator too), as a list."""
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def _vector_norm(xp, a, ord, acc):
    """``torch.linalg.vector_norm(a, ord)`` of a flat array, accumulated in ``acc``."""
    a = xp.abs(a.ravel().astype(acc))
    if abs(ord) == math.inf and not a.size:  # (max and min have no identity: PyTorch's error)
        raise RuntimeError(f"get_total_norm: cannot compute the {'-' if ord < 0 else ''}inf norm on an empty tensor "
                           f"because the operation does not have an identity")
    if ord == math.inf:
        return a.max()
    if ord == -math.inf:
        return a.min()
    if ord == 0:
        return (a != 0).sum().astype(acc)
    if ord == 1:
        return a.sum()
    if ord == 2:
        return xp.sqrt((a * a).sum())
    return (a ** acc.type(ord)).sum() ** acc.type(1.0 / ord)


def _result_dtype(dtypes):
    """The dtype ``torch.stack`` gives norms of these dtypes (float16 with bfloat16: float32)."""
    out = dtypes[0]
    for d in dtypes[1:]:
        if d != out:
            out = backend.float32 if {d, out} <= {backend.float16, backend.bfloat16} else np.promote_types(d, out)
    return np.dtype(out)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The ``norm_type`` norm of the norms of ``tensors`` (a 0-d tensor in their common dtype, on their
    device; 0.0 for none). ``error_if_nonfinite`` reads it, so it syncs."""
    tensors = _tensors(tensors)
    try:  # (a number, or a string float() reads: 'inf', as PyTorch's)
        norm_type = float(norm_type)
    except (TypeError, ValueError):
        raise (InputError if isinstance(norm_type, str) else InputTypeError)(
            f"get_total_norm: norm_type must be a number (or 'inf'), got {norm_type!r}") from None
    if not tensors:
        return Tensor._from_array(np.zeros((), np.float32))
    xp = tensors[0]._xp
    dtypes = [t.dtype for t in tensors]
    if not all(backend.is_floating(d) for d in dtypes):
        raise RuntimeError(f"get_total_norm: expected floating-point tensors, got {sorted(set(map(str, dtypes)))}")
    rdtype = _result_dtype(dtypes)
    acc = np.dtype(np.float64) if rdtype == np.float64 else np.dtype(np.float32)
    with no_grad(), np.errstate(over="ignore"):
        dev = backend.device_of(tensors[0]._data)
        # each tensor's norm rounded to its dtype, as PyTorch's per-tensor norms (a float16 one past 65504 is inf)
        norms = [_vector_norm(xp, backend.to_device(t._data, dev), norm_type, acc).astype(t.dtype) for t in tensors]
        # (NumPy's reductions give a scalar, not a 0-d array: the tensor wraps an array, as every other one)
        total = xp.asarray(_vector_norm(xp, xp.stack([n.astype(rdtype) for n in norms]), norm_type, acc),
                           dtype=rdtype)
    if error_if_nonfinite and not bool(xp.isfinite(total.astype(acc))):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite "
                           f"({float(total)}), so it cannot be clipped. To disable this error and scale the "
                           f"gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    return Tensor._from_array(total)


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients of ``parameters`` in place by ``min(max_norm / (total_norm + 1e-6), 1)``."""
    grads = [p.grad for p in _tensors(parameters) if p.grad is not None]
    if not grads:
        return
    total = total_norm._data if isinstance(total_norm, Tensor) else total_norm
    xp = grads[0]._xp
    t = xp.asarray(total)
    if t.size != 1:  # (checked before any gradient changes)
        raise RuntimeError(f"clip_grads_with_norm_: total_norm must hold one value, got shape {tuple(t.shape)}")
    with no_grad():
        dt = t.dtype.type if backend.is_floating(t.dtype) else np.float32
        coef = xp.minimum(dt(float(max_norm)) / (t.reshape(()).astype(dt) + dt(1e-6)), dt(1.0))
        for g in grads:
            c = backend.to_device(coef, backend.device_of(g._data))
            a = g._data
            with np.errstate(invalid="ignore"):  # an inf gradient times a coefficient of 0: NaN, as PyTorch's
                if a.dtype in (backend.float16, backend.bfloat16):  # in float32, rounded once (PyTorch's)
                    a[...] = (a.astype(np.float32) * c.astype(np.float32)).astype(a.dtype)
                else:
                    a *= c.astype(a.dtype)
            g._bump("clip_grad_norm_")


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale gradients in place so that their joint ``norm_type`` norm is at most ``max_norm``.

    As PyTorch: ``total = norm(stack(norm(g) for g in grads))``, ``coef = min(max_norm / (total + 1e-6), 1)``,
    every gradient multiplied by ``coef``. Returns ``total`` as a 0-d tensor on the gradients'
    device, in their dtype (reading it syncs; clipping itself does not). ``error_if_nonfinite``
    reads it, so syncs. ``foreach`` is accepted for PyTorch's signature (the work is per device anyway).
    """
    parameters = _tensors(parameters)
    grads = [p.grad for p in parameters if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Deprecated alias of :func:`clip_grad_norm_` (PyTorch's FutureWarning says so)."""
    import warnings

    warnings.warn("`minifused.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`minifused.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient element to ``[-clip_value, clip_value]`` in place."""
    clip_value = float(clip_value)
    for p in _tensors(parameters):
        if p.grad is not None:
            g = p.grad
            g._xp.clip(g._data, -clip_value, clip_value, out=g._data)
            g._bump("clip_grad_value_")


def parameters_to_vector(parameters):
    """The parameters flattened and concatenated into one 1-D tensor (differentiable, as PyTorch's)."""
    from ..ops import cat

    params = _tensors(parameters)
    for p in params:
        if not isinstance(p, Tensor):
            raise InputTypeError(f"parameters_to_vector: expected tensors, got {type(p).__name__}")
    if not params:
        raise InputError("parameters_to_vector: expected at least one parameter, got none")
    dev = params[0].device
    for p in params[1:]:
        if p.device != dev:
            raise InputTypeError(f"parameters_to_vector: found two parameters on different devices, {dev} and "
                                 f"{p.device}; this is currently not supported")
    return cat([p.reshape(-1) for p in params])


def vector_to_parameters(vec, parameters):
    """Make ``parameters`` consecutive slices of the 1-D ``vec``, as PyTorch's (``param.data = vec[...].view_as(
    param).data``): each parameter (the same object) then views ``vec``'s memory, with its dtype and device, so
    writes into ``vec`` show in the parameters; elements of ``vec`` past the parameters' are left unused."""
    if not isinstance(vec, Tensor):
        raise InputTypeError(f"vector_to_parameters: expected a tensor vec, but got: {type(vec).__name__}")
    if vec.ndim != 1:
        raise InputError(f"vector_to_parameters: vec must be 1-D, got shape {tuple(vec.shape)}")
    params = _tensors(parameters)
    total = sum(int(p.numel()) for p in params)
    if total > vec.shape[0]:
        raise InputError(f"vector_to_parameters: vec has {vec.shape[0]} elements but the parameters hold {total}")
    if not backend.is_floating(vec.dtype) and any(p.requires_grad for p in params):  # (before any parameter changes)
        raise RuntimeError(f"vector_to_parameters: data set to a tensor that requires gradients must be floating "
                           f"point or complex dtype, got vec of dtype {vec.dtype}")
    start = 0
    for p in params:
        n = int(p.numel())
        p.data = Tensor._from_array(vec._data[start:start + n].reshape(p.shape))
        start += n



from .reparam import remove_spectral_norm, remove_weight_norm, spectral_norm, weight_norm  # noqa: E402,F401
from . import fusion  # noqa: E402,F401 - torch.nn.utils.fusion
from .fusion import (fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval,  # noqa: E402,F401
                     fuse_linear_bn_weights)
from .module_utils import (convert_conv2d_weight_memory_format, convert_conv3d_weight_memory_format,  # noqa: E402,F401
                           skip_init)
from . import stateless  # noqa: E402,F401 - torch.nn.utils.stateless, importable by its dotted name too:
import sys as _sys  # noqa: E402
_sys.modules.setdefault(__name__ + ".stateless", stateless)
from . import parametrizations, parametrize  # noqa: E402,F401 - torch.nn.utils.parametrizations / parametrize
from . import utils_rnn as rnn  # noqa: E402,F401 - torch.nn.utils.rnn, importable by its dotted name too
_sys.modules.setdefault(__name__ + ".rnn", rnn)
from . import prune  # noqa: E402,F401 - torch.nn.utils.prune, importable by its dotted name too
_sys.modules.setdefault(__name__ + ".prune", prune)
