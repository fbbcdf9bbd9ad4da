"""Spatial transformers' sampling, as ``torch.nn.functional``'s: ``affine_grid`` (the sampling grid of a batch of
2-D or 3-D affine maps) and ``grid_sample`` (bilinear, nearest or bicubic sampling of (N, C, H, W) input, and
trilinear or nearest sampling of (N, C, D, H, W) input, at a grid of normalized points, with zeros, border or
reflection padding), composed from recorded ops (gather, matmul, elementwise) with PyTorch's formulas, so that
gradients reach the input, the grid and through it the affine matrices."""
from __future__ import annotations

import itertools as _itertools
import math as _math
import warnings as _warnings

from .. import backend as _backend
from ..ops import gather as _gather
from ..ops import linspace as _linspace
from ..ops import ones as _ones
from ..ops import stack as _stack
from ..ops import where as _where
from ..ops._common import autocast_float32 as _autocast_float32, autocast_promote as _autocast_promote
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
    the output pixels of ``size`` (N, C, H, W) to; for a ``size`` (N, C, D, H, W), the (N, D, H, W, 3) grid of
    (x, y, z) points of the (N, 3, 4) matrices."""
    op = "affine_grid"
    align_corners = _align(op, align_corners)
    if not isinstance(theta, _Tensor) or not _backend.is_floating(theta.dtype):
        raise InputTypeError(f"{op}: expected theta to be a floating point tensor, got "
                             f"{theta.dtype if isinstance(theta, _Tensor) else type(theta).__name__}")
    size = tuple(int(v) for v in size)
    if len(size) not in (4, 5):
        raise NotImplementedError(f"{op}: only 4-D sizes (N, C, H, W) and 5-D sizes (N, C, D, H, W) are supported, "
                                  f"for 2-D and 3-D affine maps, got {list(size)}")
    nd = len(size) - 2
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (nd, nd + 1) or theta.shape[0] != size[0]:
        raise InputError(f"{op}: Expected a batch of {nd}D affine matrices of shape Nx{nd}x{nd + 1} for size "
                         f"{list(size)}. Got {list(theta.shape)}.")
    if min(size) <= 0:
        raise InputError(f"{op}: expected non-zero, positive output size. Got {list(size)}")
    n, spatial = size[0], size[2:]  # (H, W) or (D, H, W)
    axes = [_steps(m, align_corners, theta).reshape(*[m if j == i else 1 for j in range(nd)]).expand(*spatial)
            for i, m in enumerate(spatial)]  # the z, y, x coordinate of each output pixel
    base = _stack(axes[::-1] + [_ones(*spatial, dtype=theta.dtype, device=theta.device)], -1)  # x, y[, z], 1
    return (base.reshape(1, _math.prod(spatial), nd + 1) @ theta.transpose(1, 2)).reshape(n, *spatial, nd)


def _unnormalize(coord, size, align_corners):
    return (coord + 1) / 2 * (size - 1) if align_corners else ((coord + 1) * size - 1) / 2


def _clip(coord, limit):
    """``coord`` clamped to [0, limit] with PyTorch's grid-sampler gradient: it passes strictly inside only (a
    point on the edge gets none, as clip_coordinates_set_grad gives)."""
    inside = ((coord > 0) & (coord < limit)).to(coord.dtype)
    return coord * inside + coord.detach().clamp(0, limit) * (1 - inside)


def _reflect(coord, twice_low, twice_high):
    """``coord`` folded into [low, high] by reflections about both ends (the bounds passed doubled, as PyTorch's
    reflect_coordinates takes them): its distance from ``low`` taken modulo the span, mirrored on the odd laps.
    The gradient is +-1 by the lap and the side of ``low``; a span of zero gives 0 with a zero gradient."""
    if twice_low == twice_high:
        return coord.nan_to_num(0.0) * 0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    rel = coord - low
    dist = rel * (1 - 2 * (rel.detach() < 0).to(coord.dtype))  # |coord - low|
    laps = (dist.detach() / span).floor()
    extra = dist - laps * span
    odd = laps - 2 * (laps / 2).floor()
    return extra + odd * (span - 2 * extra) + low


def _pad_coordinate(coord, size, padding_mode, align_corners):
    """PyTorch's compute_coordinates: a pixel coordinate brought inside the input by the padding mode ('border'
    clips it, 'reflection' reflects it about the edge pixels' centres, or their outer edges, then clips it)."""
    if padding_mode == "reflection":
        coord = _reflect(coord, 0, 2 * (size - 1)) if align_corners else _reflect(coord, -1, 2 * size - 1)
    return coord if padding_mode == "zeros" else _clip(coord, size - 1)


def _cubic(t):
    """The weights of the taps at -1, 0, 1 and 2 around a point ``t`` in [0, 1) past the pixel it follows: the
    cubic convolution with A = -0.75 (PyTorch's get_cubic_upsample_coefficients)."""
    a = -0.75

    def near(s):
        return ((a + 2) * s - (a + 3)) * s * s + 1

    def far(s):
        return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a
    back = 1 - t
    return [far(t + 1), near(t), near(back), far(back + 1)]  # (2 - t as PyTorch's: 1 - t, rounded, plus 1)


def _in_order(terms):
    """``terms[0] + terms[1] + ...`` left to right: in 16 bits each partial sum rounds, as PyTorch's cpu kernel's."""
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


def _sample_taps(input, taps, in_order=False, rows=None):
    """The sum over taps of weight * input at an integer point: ``taps`` a list of (point, weight) with point the
    (x, y[, z]) index tensors of shape (N, *out) and weight of that shape; a point outside reads zero (a NaN
    index too, without indexing from it). Returns (N, C, *out). ``in_order``: the products added one by one;
    ``rows`` (bicubic's y weights, the taps' weights then its x weights): the taps summed row by row first."""
    n, c = input.shape[:2]
    sizes = input.shape[:1:-1]  # (W, H[, D]), the grid's coordinate order
    out = taps[0][1].shape[1:]
    flat, weights, insides = [], [], []
    for point, weight in taps:
        index, stride, inside = None, 1, None
        for coord, size in zip(point, sizes):
            coord = coord.nan_to_num(-1.0)
            ok = (coord >= 0) & (coord <= size - 1)
            inside = ok if inside is None else inside & ok
            term = coord.clamp(0, size - 1) * stride
            index, stride = term if index is None else index + term, stride * size
        flat.append(index)
        weights.append(weight)
        insides.append(inside)
    k, p = len(taps), _math.prod(out)
    idx = _stack(flat, 1).long().reshape(n, 1, k * p).expand(n, c, k * p)
    values = _gather(input.reshape(n, c, _math.prod(sizes)), 2, idx).reshape(n, c, k, p)
    # the outside taps' values zeroed, their weights kept: a NaN weight (a NaN or infinite point) makes the output
    # NaN, as PyTorch's masked loads times its weights, yet gives the input no gradient, as its masked scatter
    values = _where(_stack(insides, 1).reshape(n, 1, k, p), values, 0.0)
    if not in_order:
        return (values * _stack(weights, 1).reshape(n, 1, k, p)).sum(2).reshape(n, c, *out)
    products = [values[:, :, i] * weights[i].reshape(n, 1, p) for i in range(k)]
    if rows is not None:  # cubic_interp1d along x for each of the 4 rows, then along y over the rows
        products = [_in_order(products[4 * i:4 * i + 4]) * rows[i].reshape(n, 1, p) for i in range(4)]
    return _in_order(products).reshape(n, c, *out)


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """``input`` (N, C, H, W) sampled at ``grid`` (N, H_out, W_out, 2) of normalized (x, y) points (-1 and 1 the
    edges' pixel centres with ``align_corners``, else their outer edges), or ``input`` (N, C, D, H, W) at ``grid``
    (N, D_out, H_out, W_out, 3) of (x, y, z) points: ``mode`` 'bilinear' (trilinear for 5-D), 'nearest' or
    'bicubic' (4-D only); points outside read zeros (``padding_mode='zeros'``), the nearest edge pixel ('border')
    or the input mirrored about its edges ('reflection'; bicubic reads each of its 16 taps so). float16 and
    bfloat16 are computed in float32 and rounded once on CUDA, in their own type on the CPU (PyTorch's kernels)."""
    op = "grid_sample"
    # inside an autocast region: float32 on cpu, the wider of the two dtypes on cuda (PyTorch's lists)
    input, grid = _autocast_promote(*_autocast_float32(input, grid, devices=("cpu",)), devices=("cuda",))
    align_corners = _align(op, align_corners)
    for name, t in (("input", input), ("grid", grid)):
        if not isinstance(t, _Tensor) or not _backend.is_floating(t.dtype):
            raise InputTypeError(f"{op}: expected a floating-point tensor for {name}, got "
                                 f"{t.dtype if isinstance(t, _Tensor) else type(t).__name__}")
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise InputError(f"{op}: expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: {mode!r}")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise InputError(f"{op}: expected padding_mode to be 'zeros', 'border', or 'reflection', but got: "
                         f"{padding_mode!r}")
    nd = input.ndim - 2
    if nd not in (2, 3) or grid.ndim != input.ndim or grid.shape[-1] != nd or grid.shape[0] != input.shape[0]:
        raise InputError(f"{op}: expected a 4-D input (N, C, H, W) and a grid (N, H_out, W_out, 2), or a 5-D input "
                         f"(N, C, D, H, W) and a grid (N, D_out, H_out, W_out, 3), of the same N, got "
                         f"{list(input.shape)} and {list(grid.shape)}")
    if mode == "bicubic" and nd == 3:
        raise InputError(f"{op}: bicubic interpolation only supports 4-D input, got {list(input.shape)}")
    if input.dtype != grid.dtype or input.device != grid.device:
        raise RuntimeError(f"{op}: expected input and grid of one dtype and device, got {input.dtype} on "
                           f"{input.device} and {grid.dtype} on {grid.device}")
    if min(input.shape[2:]) == 0:
        raise RuntimeError(f"{op}: expected input to have non-empty spatial dimensions, got {list(input.shape)}")
    half = input.dtype in (_backend.float16, _backend.bfloat16)
    if half and input.is_cuda:  # points and weights in float32, as PyTorch's CUDA opmath (rounded once at the end)
        return grid_sample(input.float(), grid.float(), mode, padding_mode, align_corners).to(input.dtype)
    # (on the CPU PyTorch's scalar fallback kernel computes in the 16-bit type itself, each operation rounded: the
    # same formulas here, their products added in its order; a coordinate's rounding can pick another pixel)
    sizes = input.shape[:1:-1]  # (W, H[, D]), the order of the grid's coordinates
    coords = [_unnormalize(grid[..., i], s, align_corners) for i, s in enumerate(sizes)]
    if mode == "bicubic":  # 4x4 taps around the unpadded point, each read through the padding as PyTorch's
        # get_value_bounded does (its int cast: the taps are whole, or clipped to >= 0 where reflected)
        base = [u.detach().floor() for u in coords]
        cx, cy = (_cubic(u - b) for u, b in zip(coords, base))
        tap_x, tap_y = ([_pad_coordinate(b + (j - 1), s, padding_mode, align_corners).floor() for j in range(4)]
                        for b, s in zip(base, sizes))
        if half:
            return _sample_taps(input, [([tap_x[j], tap_y[i]], cx[j]) for i in range(4) for j in range(4)], True, cy)
        return _sample_taps(input, [([tap_x[j], tap_y[i]], cy[i] * cx[j]) for i in range(4) for j in range(4)])
    coords = [_pad_coordinate(u, s, padding_mode, align_corners) for u, s in zip(coords, sizes)]
    if mode == "nearest":  # round half to even, as PyTorch's nearbyint; the grid's gradient is zero
        return _sample_taps(input, [([u.detach().round() for u in coords], grid[..., 0].nan_to_num(0.0) * 0 + 1)],
                            half)
    base = [u.detach().floor() for u in coords]
    taps = []
    for corner in _itertools.product((0, 1), repeat=nd):
        corner = corner[::-1]  # x fastest, as PyTorch's nw, ne, sw, se
        weight = None
        for u, b, up in zip(coords, base, corner):
            w = u - b if up else b + 1 - u
            weight = w if weight is None else weight * w
        taps.append(([b + up for b, up in zip(base, corner)], weight))
    return _sample_taps(input, taps, half)
