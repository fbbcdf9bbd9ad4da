"""``torch.nn.utils.parametrizations``: ``weight_norm`` and ``spectral_norm`` as parametrizations (PyTorch's
current API; ``nn.utils.weight_norm`` / ``spectral_norm`` are the older hook-based one), with PyTorch's state
dict keys: ``parametrizations.weight.original0`` / ``original1`` (g, v) for weight_norm,
``parametrizations.weight.original`` and the power iteration's ``parametrizations.weight.0._u`` / ``._v`` for
spectral_norm; ``orthogonal`` keeps ``parametrizations.weight.original`` and, trivialized (the default), the
orthogonal ``base`` it multiplies, ``parametrizations.weight.0.base``."""
from __future__ import annotations

import numbers

import numpy as np

from .. import backend
from .. import functional as F
from .. import ops
from ..autograd import no_grad
from ..tensor import Tensor
from .conv import ConvTranspose1d, ConvTranspose2d
from .volume import ConvTranspose3d
from .module import Module
from .parametrize import register_parametrization
from .reparam import _as_matrix, _norm_except
from ..backend import InputError

__all__ = ["orthogonal", "weight_norm", "spectral_norm"]


class _WeightNorm(Module):
    """``weight = v * (g / ||v||)``, the norm over every dimension but ``dim`` (all of them for -1)."""

    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def _norm(self, v):
        if self.dim != -1 and not -v.ndim <= self.dim < max(v.ndim, 1):  # (-1 is the whole tensor, as PyTorch's)
            raise IndexError(f"weight_norm: dim out of range (expected to be in range of [{-max(v.ndim, 1)}, "
                             f"{max(v.ndim, 1) - 1}], but got {self.dim})")
        return _norm_except(v, None if self.dim == -1 else self.dim)

    def forward(self, weight_g, weight_v):
        return weight_v * (weight_g / self._norm(weight_v))

    def right_inverse(self, weight):
        return self._norm(weight), weight


def weight_norm(module, name="weight", dim=0):
    """``module``'s ``name`` as magnitude ``g`` times direction ``v / ||v||``, as
    ``torch.nn.utils.parametrizations.weight_norm``. Returns the module."""
    register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def load_old_keys(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        """A state dict of the older ``nn.utils.weight_norm`` (``<name>_g``, ``<name>_v``) loads, as PyTorch's."""
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)

    module._register_load_state_dict_pre_hook(load_old_keys)
    return module


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


_ORTHOGONAL_MAPS = ("matrix_exp", "cayley", "householder")


def _make_orthogonal(a):
    """The Q of ``a``'s QR decomposition with R's diagonal made positive (PyTorch's ``_make_orthogonal``)."""
    q, r = ops.linalg.qr(a)
    return q * ops.sign(r.diagonal(dim1=-2, dim2=-1)).unsqueeze(-2)


def _is_orthogonal(q):
    k = q.shape[-1]
    eye = ops.eye(k, dtype=q.dtype, device=q.device)
    return ops.allclose(q.mT @ q, eye, atol=10.0 * q.shape[-2] * float(np.finfo(q.dtype).eps))


class _Orthogonal(Module):
    """A matrix (or batch of them) with orthonormal columns (rows, where wider than tall), PyTorch's: the
    matrix exponential or the Cayley transform of the skew-symmetric matrix made from the original's lower
    triangle, or the product of the Householder reflectors below its diagonal (signs from the diagonal).
    Trivialized (``use_trivialization``), the result is ``base @ Q``: ``base`` (a buffer) the orthogonal matrix
    last assigned, the original reset to minus the identity (Q = I)."""

    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, x):
        n, k = x.shape[-2], x.shape[-1]
        transposed = n < k
        if transposed:
            x = x.mT
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            x = x.tril()
            if n != k:  # embedded in a square matrix
                x = ops.cat([x, x.new_zeros(n, n - k).expand(*x.shape[:-2], -1, -1)], dim=-1)
            a = x - x.mT  # skew-symmetric
            if self.orthogonal_map == "matrix_exp":
                q = ops.matrix_exp(a)
            else:  # the Cayley retraction (I + A/2)(I - A/2)^-1
                eye = ops.eye(n, dtype=a.dtype, device=a.device)
                q = ops.linalg.solve(eye - 0.5 * a, eye + 0.5 * a)
            if n != k:
                q = q[..., :k]
        else:
            a = x.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (a * a).sum(dim=-2))
            q = ops.linalg.householder_product(a, tau)
            # the diagonal's signs (+-1), not differentiated (PyTorch's cast to int)
            q = q * x.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if getattr(self, "base", None) is not None:
            q = self.base @ q
        return q.mT if transposed else q

    def right_inverse(self, q):
        with no_grad():
            if tuple(q.shape) != tuple(self.shape):
                raise InputError(f"Expected a matrix or batch of matrices of shape {tuple(self.shape)}. Got a "
                                 f"tensor of shape {tuple(q.shape)}.")
            q_init = q
            n, k = q.shape[-2], q.shape[-1]
            transpose = n < k
            if transpose:
                q = q.mT
                n, k = k, n
            if "base" not in self._buffers:
                if self.orthogonal_map != "householder":
                    raise NotImplementedError("It is not possible to assign to the matrix exponential or the "
                                              "Cayley parametrizations when use_trivialization=False.")
                # the reflectors of q's QR decomposition (LAPACK's geqrf, here NumPy's qr 'raw') with the signs of
                # R's diagonal on the diagonal, flipped where a reflector is the identity (tau == 0), as PyTorch's
                host = backend.to_device(q.detach()._data, backend.CPU).astype(np.float64)
                flat = host.reshape(-1, n, k)
                out = np.empty_like(flat)
                for i, m in enumerate(flat):
                    h, tau = np.linalg.qr(m, mode="raw")
                    r = h.T.copy()
                    d = np.sign(np.diagonal(r)).copy()
                    d[tau == 0.0] *= -1
                    np.fill_diagonal(r, d)
                    out[i] = r
                a = ops.tensor(out.reshape(q.shape), dtype=q.dtype, device=q.device)
                return a.mT if transpose else a
            if n == k:
                q = q.clone() if _is_orthogonal(q) else _make_orthogonal(q)
            else:  # completed into a full n x n orthogonal matrix
                extra = ops.randn(*q.shape[:-2], n, n - k, dtype=q.dtype, device=q.device)
                q = _make_orthogonal(ops.cat([q, extra], dim=-1))
            self.base = q
            # minus the identity: householder(zeros) would be the identity, so the diagonal holds the -1 signs
            neg_id = ops.zeros_like(q_init)
            neg_id.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
            return neg_id


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """``module``'s ``name`` (a matrix or batch of them) kept orthogonal, as
    ``torch.nn.utils.parametrizations.orthogonal``: ``orthogonal_map`` is ``"matrix_exp"`` (square weights'
    default), ``"cayley"`` or ``"householder"`` (the others' default). Returns the module."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise InputError(f"Module '{type(module).__name__}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise InputError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    if orthogonal_map not in _ORTHOGONAL_MAPS:
        raise InputError(f'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". Got: '
                         f'{orthogonal_map}')
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    register_parametrization(module, name, orth, unsafe=True)
    return module
