"""``torch.nn.utils.parametrizations``: ``weight_norm`` and ``spectral_norm`` as parametrizations (PyTorch's
current API; ``nn.utils.weight_norm`` / ``spectral_norm`` are the older hook-based one), with PyTorch's state
dict keys: ``parametrizations.weight.original0`` / ``original1`` (g, v) for weight_norm,
``parametrizations.weight.original`` and the power iteration's ``parametrizations.weight.0._u`` / ``._v`` for
spectral_norm."""
from __future__ import annotations

import numbers

from .. import functional as F
from .. import ops
from ..autograd import no_grad
from .conv import ConvTranspose1d, ConvTranspose2d
from .volume import ConvTranspose3d
from .module import Module
from .parametrize import register_parametrization
from .reparam import _as_matrix, _norm_except
from ..backend import InputError

__all__ = ["weight_norm", "spectral_norm"]


class _WeightNorm(Module):
    """``weight = v * (g / ||v||)``, the norm over every dimension but ``dim`` (all of them for -1)."""

    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def _norm(self, v):
        return _norm_except(v, None if self.dim == -1 else self.dim)

    def forward(self, weight_g, weight_v):
        return weight_v * (weight_g / self._norm(weight_v))

    def right_inverse(self, weight):
        return self._norm(weight), weight


def weight_norm(module, name="weight", dim=0):
    """``module``'s ``name`` as magnitude ``g`` times direction ``v / ||v||``, as
    ``torch.nn.utils.parametrizations.weight_norm``. Returns the module."""
    return register_parametrization(module, name, _WeightNorm(dim), unsafe=True)


class _SpectralNorm(Module):
    """``weight / sigma``, sigma its largest singular value estimated by power iteration on the buffers ``_u``,
    ``_v`` (``n_power_iterations`` per training forward; 15 when made), as PyTorch's."""

    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if not -ndim <= dim < max(ndim, 1):
            raise IndexError(f"spectral_norm: dim must be in [-{ndim}, {ndim - 1}], got {dim}")
        if isinstance(n_power_iterations, bool) or not isinstance(n_power_iterations, numbers.Integral) or \
                n_power_iterations <= 0:
            raise InputError(f"spectral_norm: expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim, self.eps, self.n_power_iterations = dim % max(ndim, 1), eps, int(n_power_iterations)
        if ndim > 1:
            matrix = _as_matrix(weight.detach(), self.dim)
            h, w = matrix.shape
            with no_grad():
                u = ops.randn(h, dtype=weight.dtype, device=weight.device)
                v = ops.randn(w, dtype=weight.dtype, device=weight.device)
                self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
                self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            self._power_method(matrix, 15)

    def _power_method(self, matrix, iterations):
        with no_grad():
            for _ in range(iterations):
                self._u.copy_(F.normalize(matrix @ self._v, dim=0, eps=self.eps))
                self._v.copy_(F.normalize(matrix.t() @ self._u, dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        matrix = _as_matrix(weight, self.dim)
        if self.training:
            self._power_method(matrix.detach(), self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()  # the next iteration's writes must not reach the backward's
        sigma = (u * (matrix @ v)).sum()
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """``module``'s ``name`` divided by its spectral norm, as ``torch.nn.utils.parametrizations.spectral_norm``;
    ``dim`` the output dimension (1 for the transposed convolutions, else 0). Returns the module."""
    weight = getattr(module, name, None)
    if weight is None:
        raise InputError(f"spectral_norm: module {type(module).__name__} has no parameter or buffer with name "
                         f"{name!r}")
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    return register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
