"""Spatial transformers' sampling, as ``torch.nn.functional``'s: ``affine_grid`` (the sampling grid of a batch of
2-D affine maps) and ``grid_sample`` (bilinear or nearest sampling of (N, C, H, W) input at a grid of normalized
points), composed from recorded ops (gather, matmul, elementwise) with PyTorch's formulas, so that gradients
reach the input, the grid and through it the affine matrices."""
from __future__ import annotations

import warnings as _warnings

from .. import backend as _backend
from ..ops import gather as _gather
from ..ops import linspace as _linspace
from ..ops import ones as _ones
from ..ops import stack as _stack
from ..tensor import Tensor as _Tensor
from ..backend import InputError, InputTypeError

__all__ = ["affine_grid", "grid_sample"]


def _align(op, align_corners):
    if align_corners is None:
        _warnings.warn(f"{op}: the default align_corners is False (PyTorch's since 1.3.0); pass align_corners "
                       f"explicitly to silence this warning", UserWarning, stacklevel=3)
        return False
    if not isinstance(align_corners, bool):
        raise InputTypeError(f"{op}: align_corners must be a bool or None, got {align_corners!r}")
    return align_corners


def _steps(n, align_corners, like):
    """The normalized coordinates of ``n`` pixel centres (corners with ``align_corners``), PyTorch's."""
    if n <= 1:
        return _linspace(0.0, 0.0, max(n, 1), dtype=like.dtype, device=like.device)
    r = _linspace(-1.0, 1.0, n, dtype=like.dtype, device=like.device)
    return r if align_corners else r * ((n - 1) / n)


def affine_grid(theta, size, align_corners=None):
    """The (N, H, W, 2) grid of normalized (x, y) source points that the (N, 2, 3) affine matrices ``theta`` map
    the output pixels of ``size`` (N, C, H, W) to."""
    op = "affine_grid"
    align_corners = _align(op, align_corners)
    if not isinstance(theta, _Tensor) or not _backend.is_floating(theta.dtype):
        raise InputTypeError(f"{op}: expected theta to be a floating point tensor, got "
                             f"{theta.dtype if isinstance(theta, _Tensor) else type(theta).__name__}")
    size = tuple(int(v) for v in size)
    if len(size) != 4:
        raise NotImplementedError(f"{op}: only 2-D sizes (N, C, H, W) are supported, got {list(size)}")
    n, _, h, w = size
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (2, 3) or theta.shape[0] != n:
        raise InputError(f"{op}: Expected a batch of 2D affine matrices of shape Nx2x3 for size {list(size)}. Got "
                         f"{list(theta.shape)}.")
    if min(size) <= 0:
        raise InputError(f"{op}: expected non-zero, positive output size. Got {list(size)}")
    xs = _steps(w, align_corners, theta).reshape(1, w).expand(h, w)
    ys = _steps(h, align_corners, theta).reshape(h, 1).expand(h, w)
    base = _stack([xs, ys, _ones(h, w, dtype=theta.dtype, device=theta.device)], -1)  # (H, W, 3): x, y, 1
    return (base.reshape(1, h * w, 3) @ theta.transpose(1, 2)).reshape(n, h, w, 2)


def _unnormalize(coord, size, align_corners):
    return (coord + 1) / 2 * (size - 1) if align_corners else ((coord + 1) * size - 1) / 2


def _clip(coord, limit):
    """``coord`` clamped to [0, limit] with PyTorch's grid-sampler gradient: it passes strictly inside only (a
    point on the edge gets none, as clip_coordinates_set_grad gives)."""
    inside = ((coord > 0) & (coord < limit)).to(coord.dtype)
    return coord * inside + coord.detach().clamp(0, limit) * (1 - inside)


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """``input`` (N, C, H, W) sampled at ``grid`` (N, H_out, W_out, 2) of normalized (x, y) points (-1 and 1 the
    edges' pixel centres with ``align_corners``, else their outer edges): ``mode`` 'bilinear' or 'nearest';
    points outside read zeros (``padding_mode='zeros'``) or the nearest edge pixel ('border'). float16 and
    bfloat16 are computed in float32 and rounded once."""
    op = "grid_sample"
    align_corners = _align(op, align_corners)
    for name, t in (("input", input), ("grid", grid)):
        if not isinstance(t, _Tensor) or not _backend.is_floating(t.dtype):
            raise InputTypeError(f"{op}: expected a floating-point tensor for {name}, got "
                                 f"{t.dtype if isinstance(t, _Tensor) else type(t).__name__}")
    if mode not in ("bilinear", "nearest"):
        raise InputError(f"{op}: mode must be 'bilinear' or 'nearest' (bicubic is not supported), got {mode!r}")
    if padding_mode not in ("zeros", "border"):
        raise InputError(f"{op}: padding_mode must be 'zeros' or 'border' (reflection is not supported), got "
                         f"{padding_mode!r}")
    if input.ndim != 4 or grid.ndim != 4 or grid.shape[-1] != 2 or grid.shape[0] != input.shape[0]:
        raise InputError(f"{op}: expected a 4-D input (N, C, H, W) and a grid (N, H_out, W_out, 2) of the same N, got "
                         f"{list(input.shape)} and {list(grid.shape)}")
    if input.dtype != grid.dtype or input.device != grid.device:
        raise RuntimeError(f"{op}: expected input and grid of one dtype and device, got {input.dtype} on "
                           f"{input.device} and {grid.dtype} on {grid.device}")
    n, c, h, w = input.shape
    if h == 0 or w == 0:
        raise RuntimeError(f"{op}: expected input to have non-empty spatial dimensions, got {list(input.shape)}")
    if input.dtype in (_backend.float16, _backend.bfloat16):  # points and weights in float32, as PyTorch's
        # opmath: a 16-bit pixel coordinate keeps too few fraction bits for the weights (rounded once at the end)
        return grid_sample(input.float(), grid.float(), mode, padding_mode, align_corners).to(input.dtype)
    ho, wo = grid.shape[1:3]
    ix = _unnormalize(grid[..., 0], w, align_corners)
    iy = _unnormalize(grid[..., 1], h, align_corners)
    if padding_mode == "border":
        ix, iy = _clip(ix, w - 1), _clip(iy, h - 1)
    flat = input.reshape(n, c, h * w)

    def at(xc, yc):
        """input at integer points (xc, yc) (N, H_out, W_out), zero outside, as (N, C, H_out, W_out)."""
        xc, yc = xc.nan_to_num(-1.0), yc.nan_to_num(-1.0)  # a NaN point reads nothing (no index from NaN)
        inside = ((xc >= 0) & (xc <= w - 1) & (yc >= 0) & (yc <= h - 1)).to(input.dtype)
        idx = (yc.clamp(0, h - 1) * w + xc.clamp(0, w - 1)).long().reshape(n, 1, ho * wo).expand(n, c, ho * wo)
        return _gather(flat, 2, idx).reshape(n, c, ho, wo), inside.reshape(n, 1, ho, wo)

    if mode == "nearest":
        v, inside = at(ix.detach().round(), iy.detach().round())  # round half to even, as PyTorch's nearbyint
        return v * inside
    x0, y0 = ix.detach().floor(), iy.detach().floor()
    x1, y1 = x0 + 1, y0 + 1
    out = None
    for xc, yc, weight in ((x0, y0, (x1 - ix) * (y1 - iy)), (x1, y0, (ix - x0) * (y1 - iy)),
                           (x0, y1, (x1 - ix) * (iy - y0)), (x1, y1, (ix - x0) * (iy - y0))):
        v, inside = at(xc, yc)
        term = v * (weight.reshape(n, 1, ho, wo) * inside)
        out = term if out is None else out + term
    return out
