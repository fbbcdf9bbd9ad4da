"""Weight reparametrizations as ``torch.nn.utils``' older API: ``spectral_norm`` (a GAN discriminator's
weight divided by its largest singular value, estimated by power iteration) and ``weight_norm`` (a weight as
magnitude times direction), each kept up to date by a forward pre-hook, and their ``remove_*``."""
from __future__ import annotations

import numbers
import warnings

from .. import functional as F
from .. import ops
from ..autograd import no_grad
from .conv import ConvTranspose1d, ConvTranspose2d
from .volume import ConvTranspose3d
from .module import Parameter, forward_pre_hooks, remove_hook
from ..backend import InputError


class _NoParameter(InputError, KeyError, AttributeError):
    """A module without the parameter to reparametrize: a ValueError, and PyTorch's KeyError (spectral_norm's
    ``module._parameters[name]``) and AttributeError (weight_norm's ``getattr(module, name)``)."""
    __str__ = InputError.__str__  # the message as it is, not KeyError's repr of it


def _as_matrix(weight, dim):
    """The weight as (its size along ``dim``, the rest)."""
    if dim != 0:
        weight = weight.movedim(dim, 0)
    return weight.reshape(weight.shape[0], -1)


class _SpectralNorm:
    def __init__(self, name, n_power_iterations, dim, eps):
        self.name, self.n_power_iterations, self.dim, self.eps = name, n_power_iterations, dim, eps

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        matrix = _as_matrix(weight, self.dim)
        if do_power_iteration:
            with no_grad():
                w = matrix.detach()
                for _ in range(self.n_power_iterations):
                    v.copy_(F.normalize(w.t() @ u, dim=0, eps=self.eps))
                    u.copy_(F.normalize(w @ v, dim=0, eps=self.eps))
        sigma = (u.clone() * (matrix @ v.clone())).sum()  # clones: the hook's next writes must not reach them
        return weight / sigma

    def __call__(self, module, inputs):
        object.__setattr__(module, self.name, self.compute_weight(module, module.training))


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """``module``'s ``name`` parameter divided by its spectral norm, as ``torch.nn.utils.spectral_norm``: the
    parameter becomes ``<name>_orig``, buffers ``<name>_u`` / ``<name>_v`` hold the power iteration's vectors
    (one iteration per training forward by default; none in evaluation), and ``<name>`` is recomputed before
    each forward. ``dim`` is the output dimension (1 for the transposed convolutions, else 0). Returns the
    module."""
    _check_not_applied(module, name, _SpectralNorm, "spectral_norm")
    if not isinstance(n_power_iterations, numbers.Integral) or n_power_iterations < 1:
        raise InputError(f"spectral_norm: n_power_iterations must be a positive int, got {n_power_iterations!r}")
    if name not in module._parameters:  # PyTorch's module._parameters[name]
        raise _NoParameter(f"spectral_norm: {type(module).__name__} has no parameter {name!r}")
    weight = module._parameters[name]
    if not isinstance(weight, Parameter):
        raise InputError(f"spectral_norm: cannot be applied as parameter {name!r} is None")
    dim = (1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0) if dim is None else dim
    _check_dim("spectral_norm", dim, weight.ndim)
    fn = _SpectralNorm(name, int(n_power_iterations), dim, eps)
    matrix = _as_matrix(weight.detach(), dim)
    with no_grad():
        u = F.normalize(ops.randn(matrix.shape[0], dtype=weight.dtype, device=weight.device), dim=0, eps=eps)
        v = F.normalize(ops.randn(matrix.shape[1], dtype=weight.dtype, device=weight.device), dim=0, eps=eps)
    del module._parameters[name]
    module.register_parameter(name + "_orig", weight)
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    object.__setattr__(module, name, weight.detach())
    module.register_forward_pre_hook(fn)
    return module


def remove_spectral_norm(module, name="weight"):
    """Undo :func:`spectral_norm`: ``name`` becomes a parameter again, holding the normalized weight."""
    return _remove(module, name, _SpectralNorm, (name + "_orig",), (name + "_u", name + "_v"), "spectral_norm")


class _WeightNorm:
    def __init__(self, name, dim):
        self.name, self.dim = name, dim

    def compute_weight(self, module):
        g, v = getattr(module, self.name + "_g"), getattr(module, self.name + "_v")
        return g * v / _norm_except(v, self.dim)

    def __call__(self, module, inputs):
        object.__setattr__(module, self.name, self.compute_weight(module))


def _norm_except(v, dim):
    """The 2-norm of ``v`` over every dimension but ``dim`` (all of them for dim None), keeping them as 1s."""
    if dim is None:
        return (v * v).sum().sqrt()
    dims = tuple(d for d in range(v.ndim) if d != dim % v.ndim)
    return (v * v).sum(dims, keepdim=True).sqrt() if dims else v.abs()


def weight_norm(module, name="weight", dim=0):
    """``module``'s ``name`` parameter as ``g * v / ||v||`` (norm over every dimension but ``dim``), as
    ``torch.nn.utils.weight_norm``: parameters ``<name>_g`` and ``<name>_v``, ``<name>`` recomputed before each
    forward; ``dim`` None or -1: the norm of the whole tensor. Returns the module."""
    warnings.warn("`minifused.nn.utils.weight_norm` is deprecated in favor of "
                  "`minifused.nn.utils.parametrizations.weight_norm`.", FutureWarning, stacklevel=2)  # as PyTorch's
    _check_not_applied(module, name, _WeightNorm, "weight_norm")
    dim = None if dim == -1 else dim
    weight = module._parameters.get(name)
    if not isinstance(weight, Parameter):
        raise _NoParameter(f"weight_norm: {type(module).__name__} has no parameter {name!r}")
    if dim is not None:
        _check_dim("weight_norm", dim, weight.ndim)
    fn = _WeightNorm(name, dim)
    with no_grad():
        g = Parameter(_norm_except(weight.detach(), dim))
        v = Parameter(weight.detach().clone())
    del module._parameters[name]
    module.register_parameter(name + "_g", g)
    module.register_parameter(name + "_v", v)
    object.__setattr__(module, name, fn.compute_weight(module))
    module.register_forward_pre_hook(fn)
    return module


def remove_weight_norm(module, name="weight"):
    """Undo :func:`weight_norm`: ``name`` becomes a parameter again, holding the recomposed weight."""
    return _remove(module, name, _WeightNorm, (name + "_g", name + "_v"), (), "weight_norm")


def _find(module, name, kind):
    """(handle id, hook) of ``module``'s forward pre-hook of ``kind`` for ``name``, (None, None) if none: the hook
    is the record (as PyTorch's), so a module pickles with it."""
    for key, hook in forward_pre_hooks(module):
        if isinstance(hook, kind) and hook.name == name:
            return key, hook
    return None, None


def _check_not_applied(module, name, kind, what):
    if _find(module, name, kind)[0] is not None:
        raise RuntimeError(f"Cannot register two {what} hooks on the same parameter {name}")


def _check_dim(what, dim, ndim):
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise IndexError(f"{what}: dim out of range (expected to be in range of [{-max(ndim, 1)}, {max(ndim, 1) - 1}], "
                         f"but got {dim})")


def _remove(module, name, kind, params, buffers, what):
    key, fn = _find(module, name, kind)
    if fn is None:
        raise InputError(f"remove_{what}: {what} of {name!r} not found in {type(module).__name__}")
    with no_grad():
        weight = fn.compute_weight(module, False) if kind is _SpectralNorm else fn.compute_weight(module)
    remove_hook(module, "pre", key)
    for p in params:
        del module._parameters[p]
    for b in buffers:
        del module._buffers[b]
    module.__dict__.pop(name, None)
    module.register_parameter(name, Parameter(weight.detach()))
    return module
