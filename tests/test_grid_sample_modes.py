"""F.grid_sample's reflection padding, bicubic mode and 5-D (volumetric) input, and F.affine_grid's 5-D sizes,
against a float64 NumPy reference written point by point from ATen's scalar formulas (GridSampler.h:
grid_sampler_unnormalize, reflect_coordinates, compute_coordinates, get_value_bounded and the cubic convolution
with A = -0.75; checked against torch 2.x by hand, values and gradients). Gradients: the input's is exact (the
output is linear in the input: the reference run on a basis of one-hot channels gives each pixel's weights), the
grid's by central differences of the reference, at random points (none within the step of a kink)."""
import itertools
import math
import warnings

import numpy as np
import pytest

import minifused.functional as F
from minifused import backend
from tolerances import cpu

A = -0.75


# ---------------------------------------------------------------- the reference
def unnorm_ref(g, size, align_corners):
    return (g + 1) / 2 * (size - 1) if align_corners else ((g + 1) * size - 1) / 2


def reflect_ref(v, twice_low, twice_high):
    """``v`` folded into [low, high] by reflections about both ends (ATen's reflect_coordinates)."""
    if twice_low == twice_high:
        return 0.0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    v = abs(v - low)
    extra, flips = math.fmod(v, span), math.floor(v / span)
    return extra + low if flips % 2 == 0 else span - extra + low


def padded_ref(v, size, padding_mode, align_corners):
    """A pixel coordinate brought inside by the padding mode (ATen's compute_coordinates)."""
    if padding_mode == "reflection":
        v = reflect_ref(v, 0, 2 * (size - 1)) if align_corners else reflect_ref(v, -1, 2 * size - 1)
    if padding_mode != "zeros":
        v = min(size - 1, max(v, 0.0))
    return v


def cubic_ref(t):
    def near(s):
        return ((A + 2) * s - (A + 3)) * s * s + 1

    def far(s):
        return ((A * s - 5 * A) * s + 8 * A) * s - 4 * A
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def grid_sample_ref(x, grid, mode, padding_mode, align_corners):
    """x (N, C, *spatial), grid (N, *out, nd) with (x, y[, z]) last: (N, C, *out), one point at a time."""
    nd = x.ndim - 2
    sizes = x.shape[:1:-1]  # (W, H[, D]), the grid's coordinate order
    out = np.zeros(x.shape[:2] + grid.shape[1:-1])

    def pixel(b, idx):  # input at the integer point idx (x, y[, z]), zero outside
        if all(0 <= i < s for i, s in zip(idx, sizes)):
            return x[(b, slice(None)) + tuple(idx[::-1])]
        return np.zeros(x.shape[1])

    for b in range(x.shape[0]):
        for pos in np.ndindex(*grid.shape[1:-1]):
            g, val = grid[(b,) + pos], 0.0
            if mode == "bicubic":  # 4x4 taps around the unpadded point, each read through the padding
                u = [unnorm_ref(g[k], sizes[k], align_corners) for k in range(2)]
                f = [math.floor(v) for v in u]
                cx, cy = cubic_ref(u[0] - f[0]), cubic_ref(u[1] - f[1])
                for i, j in itertools.product(range(4), range(4)):
                    tap = [int(padded_ref(f[k] - 1 + (j, i)[k], sizes[k], padding_mode, align_corners))
                           for k in range(2)]
                    val = val + cy[i] * cx[j] * pixel(b, tap)
            else:
                u = [padded_ref(unnorm_ref(g[k], sizes[k], align_corners), sizes[k], padding_mode, align_corners)
                     for k in range(nd)]
                if mode == "nearest":
                    val = pixel(b, [int(np.rint(v)) for v in u])
                else:
                    f = [math.floor(v) for v in u]
                    for corner in itertools.product((0, 1), repeat=nd):
                        w = np.prod([u[k] - f[k] if corner[k] else f[k] + 1 - u[k] for k in range(nd)])
                        val = val + w * pixel(b, [f[k] + corner[k] for k in range(nd)])
            out[(b, slice(None)) + pos] = val
    return out


def ref_grads(x, grid, weight, *args):
    """d sum(out * weight) / d x (exact: the reference on one-hot channels) and / d grid (central differences)."""
    n, c = x.shape[:2]
    spatial = x.shape[2:]
    k = int(np.prod(spatial))
    basis = np.broadcast_to(np.eye(k).reshape((1, k) + spatial), (n, k) + spatial)
    per_pixel = grid_sample_ref(basis, grid, *args)  # (N, K, *out): each pixel's weight at each point
    gx = np.einsum("ncp,nkp->nck", weight.reshape(n, c, -1), per_pixel.reshape(n, k, -1)).reshape(x.shape)
    gg, step = np.zeros_like(grid), 1e-6
    for i in np.ndindex(*grid.shape):
        hi, lo = grid.copy(), grid.copy()
        hi[i] += step
        lo[i] -= step
        gg[i] = ((grid_sample_ref(x, hi, *args) - grid_sample_ref(x, lo, *args)) * weight).sum() / (2 * step)
    return gx, gg


def check(x, grid, mode, padding_mode, align_corners, grad=True):
    """minifused's values and gradients (input and grid) against the reference."""
    rng = np.random.default_rng(7)
    args = (mode, padding_mode, align_corners)
    want = grid_sample_ref(x, grid, *args)
    xt, gt = cpu(x, requires_grad=True), cpu(grid, requires_grad=True)
    got = F.grid_sample(xt, gt, *args)
    assert got.shape == want.shape
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-12, atol=1e-12)
    if not grad:
        return
    weight = rng.standard_normal(want.shape)
    (got * cpu(weight)).sum().backward()
    gx, gg = ref_grads(x, grid, weight, *args)
    np.testing.assert_allclose(xt.grad.numpy(), gx, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gt.grad.numpy(), gg, rtol=1e-6, atol=1e-7)


def points(rng, shape, spread=3.5):
    """Random normalized points, many outside [-1, 1] (several laps of reflection at the spread)."""
    return rng.uniform(-spread, spread, shape)


# ---------------------------------------------------------------- reflection padding (4-D)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("spatial", [(3, 5), (1, 4), (2, 1)])
def test_reflection_padding_2d(spatial, mode, align_corners):
    """Points far outside fold back about the edge pixels' centres (align_corners) or outer edges, any number of
    laps; the grid's gradient flips sign on each mirrored lap (zero in nearest mode)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 2) + spatial)
    check(x, points(rng, (2, 3, 4, 2)), mode, "reflection", align_corners)


def test_reflection_by_hand():
    """A 1x4 row [0, 10, 20, 30]: x = -1.25 (align_corners) is pixel -0.375, mirrored about pixel 0 to 0.375;
    without align_corners x = 1.3 is pixel 4.1, mirrored about the edge 3.5 to 2.9. Gradients: d pixel / d x is
    1.5 (2 without align_corners); the mirror negates it and the row's slope is 10 a pixel."""
    x = cpu(np.arange(4.0).reshape(1, 1, 1, 4) * 10)
    g = cpu(np.array([[[[-1.25, 0.0]]]]), requires_grad=True)
    out = F.grid_sample(x, g, padding_mode="reflection", align_corners=True)
    out.sum().backward()
    np.testing.assert_allclose(out.item(), 3.75, rtol=1e-13)
    np.testing.assert_allclose(g.grad.numpy().ravel(), [-15.0, 0.0], atol=1e-12)
    g = cpu(np.array([[[[1.3, 0.0]]]]), requires_grad=True)
    out = F.grid_sample(x, g, padding_mode="reflection", align_corners=False)
    out.sum().backward()
    np.testing.assert_allclose(out.item(), 29.0, rtol=1e-13)
    np.testing.assert_allclose(g.grad.numpy().ravel(), [-20.0, 0.0], atol=1e-12)


# ---------------------------------------------------------------- bicubic (4-D)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_bicubic(padding_mode, align_corners):
    """Cubic convolution (A = -0.75) of the 4x4 taps around each point; taps off the input read through the
    padding mode (so 'border' repeats the edge pixel and 'zeros' reads 0, even for points inside)."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 2, 3, 5))
    check(x, points(rng, (2, 3, 2, 2), 2.0), "bicubic", padding_mode, align_corners)


@pytest.mark.parametrize("spatial", [(1, 1), (2, 1), (1, 3)])
def test_bicubic_tiny_inputs(spatial):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2) + spatial)
    for padding_mode, align_corners in itertools.product(("zeros", "border", "reflection"), (False, True)):
        check(x, points(rng, (1, 2, 3, 2), 1.5), "bicubic", padding_mode, align_corners)


def test_bicubic_by_hand():
    """Half way between pixels the taps weigh [-3/32, 19/32, 19/32, -3/32]: the row [2, 1, 8, 27] at pixel 1.5
    gives 19/32 * 9 - 3/32 * 29; at pixel 0.5 the tap at -1 reads 0 ('zeros'), pixel 0 ('border', and
    'reflection' about the outer edge) or pixel 1 ('reflection' about pixel 0's centre, align_corners)."""
    x = cpu(np.array([2.0, 1.0, 8.0, 27.0]).reshape(1, 1, 1, 4))
    at = lambda px, mode, ac: F.grid_sample(  # noqa: E731
        x, cpu(np.array([[[[px / 1.5 - 1 if ac else (px + 0.5) / 2 - 1, 0.0]]]])), "bicubic", mode, ac).item()
    np.testing.assert_allclose(at(1.5, "zeros", False), (19 * 9 - 3 * 29) / 32, rtol=1e-13)
    inner = (19 * 3 - 3 * 8) / 32
    for mode, ac, tap in (("zeros", False, 0.0), ("zeros", True, 0.0), ("border", False, 2.0), ("border", True, 2.0),
                          ("reflection", False, 2.0), ("reflection", True, 1.0)):
        np.testing.assert_allclose(at(0.5, mode, ac), inner - 3 / 32 * tap, rtol=1e-13, err_msg=f"{mode} {ac}")


# ---------------------------------------------------------------- 5-D input (trilinear, nearest)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_volumetric(mode, padding_mode, align_corners):
    """(N, C, D, H, W) input at an (N, D_out, H_out, W_out, 3) grid of (x, y, z) points: 8 corners weighted
    trilinearly, or the nearest voxel."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 2, 3, 2, 5))
    check(x, points(rng, (2, 2, 1, 3, 3), 2.5), mode, padding_mode, align_corners)


def test_volumetric_unit_depth_and_by_hand():
    """A volume one voxel deep reads its single plane; the centre of a 2x2x2 cube (align_corners) is the mean of
    its 8 voxels, each corner's weight 1/8 in the input's gradient."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 1, 1, 3, 4))
    for padding_mode, align_corners in itertools.product(("zeros", "border", "reflection"), (False, True)):
        check(x, points(rng, (1, 2, 2, 1, 3), 1.5), "bilinear", padding_mode, align_corners)
    cube = cpu(np.arange(8.0).reshape(1, 1, 2, 2, 2), requires_grad=True)
    out = F.grid_sample(cube, cpu(np.zeros((1, 1, 1, 1, 3))), align_corners=True)
    out.sum().backward()
    assert out.shape == (1, 1, 1, 1, 1) and out.item() == 3.5
    np.testing.assert_allclose(cube.grad.numpy(), np.full((1, 1, 2, 2, 2), 0.125))
    z = cpu(np.array([-1.0, 1.0]).reshape(1, 2, 1, 1, 1) * [0, 0, 1])  # the points (0, 0, -1), (0, 0, 1)
    np.testing.assert_allclose(F.grid_sample(cube, z, align_corners=True).numpy().ravel(), [1.5, 5.5])


def test_nearest_grid_gradient_is_zero():
    """The nearest pick is piecewise constant in the grid: the grid gets a zero gradient (not none)."""
    g = cpu(np.full((1, 1, 1, 1, 3), 0.3), requires_grad=True)
    F.grid_sample(cpu(np.ones((1, 1, 2, 2, 2))), g, mode="nearest", align_corners=False).sum().backward()
    np.testing.assert_array_equal(g.grad.numpy(), np.zeros((1, 1, 1, 1, 3)))


# ---------------------------------------------------------------- affine_grid (5-D sizes)
def affine_grid_ref(theta, size, align_corners):
    def steps(n):
        if n <= 1:
            return np.zeros(1)
        r = np.linspace(-1.0, 1.0, n)
        return r if align_corners else r * (n - 1) / n
    zs, ys, xs = np.meshgrid(*(steps(n) for n in size[2:]), indexing="ij")
    base = np.stack([xs, ys, zs, np.ones_like(xs)], -1)  # (D, H, W, 4)
    return np.einsum("dhwk,njk->ndhwj", base, theta), base


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", [(2, 3, 3, 4, 5), (1, 1, 1, 2, 3), (2, 1, 4, 1, 1)])
def test_affine_grid_3d(size, align_corners):
    """The (N, D, H, W, 3) grid of (x, y, z) points of (N, 3, 4) matrices, and their gradient (the output is
    linear in theta: the base grid's outer products with the output's gradient)."""
    rng = np.random.default_rng(6)
    theta = rng.standard_normal((size[0], 3, 4))
    want, base = affine_grid_ref(theta, size, align_corners)
    th = cpu(theta, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = F.affine_grid(th, size, align_corners=align_corners)
    assert got.shape == want.shape
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-13, atol=1e-15)
    weight = rng.standard_normal(want.shape)
    (got * cpu(weight)).sum().backward()
    np.testing.assert_allclose(th.grad.numpy(), np.einsum("ndhwj,dhwk->njk", weight, base), rtol=1e-12)


def test_affine_grid_3d_identity_samples_the_volume():
    """An identity 3x4 map resamples a volume onto itself (trilinear, both align_corners), and a translation by
    one voxel along z (2/D normalized) shifts it, the last plane reading the zeros padding."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 3, 4, 3, 5))
    eye = np.broadcast_to(np.eye(3, 4), (2, 3, 4))
    for align_corners in (False, True):
        grid = F.affine_grid(cpu(eye), x.shape, align_corners=align_corners)
        np.testing.assert_allclose(F.grid_sample(cpu(x), grid, align_corners=align_corners).numpy(), x, atol=1e-13)
    shift = eye.copy()
    shift[:, 2, 3] = 2 / 4
    out = F.grid_sample(cpu(x), F.affine_grid(cpu(shift), x.shape, align_corners=False), align_corners=False)
    np.testing.assert_allclose(out.numpy()[:, :, :3], x[:, :, 1:], atol=1e-13)
    np.testing.assert_allclose(out.numpy()[:, :, 3], 0.0, atol=1e-13)


# ---------------------------------------------------------------- 16-bit, errors
@pytest.mark.parametrize("dtype", [np.float16, backend.bfloat16])
def test_new_modes_in_16_bits_round_once(dtype):
    rng = np.random.default_rng(9)
    for shape, gshape, mode, padding_mode in (((1, 2, 3, 4), (1, 2, 3, 2), "bicubic", "reflection"),
                                              ((1, 2, 3, 2, 4), (1, 2, 1, 3, 3), "bilinear", "reflection")):
        x = cpu(rng.standard_normal(shape)).to(dtype)
        g = cpu(points(rng, gshape, 1.5)).to(dtype)
        got = F.grid_sample(x, g, mode, padding_mode, align_corners=False)
        want = F.grid_sample(x.float(), g.float(), mode, padding_mode, align_corners=False).to(dtype)
        assert got.dtype == dtype
        # (on the CPU computed in the 16-bit type, each operation rounded, as PyTorch's cpu fallback kernel: near
        # the float32 result; test_resize_parity_more checks that rounding; CUDA rounds once)
        tol = 0.25 if dtype == backend.bfloat16 else 0.03
        np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), atol=tol)


def test_bad_inputs():
    """PyTorch's refusals: bicubic of a volume, a grid whose last dimension is not the input's spatial rank, a
    grid of another rank, unknown mode or padding names; affine_grid's theta shape per size, and its sizes."""
    x4, x5 = cpu(np.zeros((1, 1, 3, 3))), cpu(np.zeros((1, 1, 2, 3, 3)))
    with pytest.raises(RuntimeError, match="grid_sample: bicubic interpolation only supports 4-D input"):
        F.grid_sample(x5, cpu(np.zeros((1, 1, 1, 1, 3))), mode="bicubic", align_corners=False)
    for x, g in ((x5, np.zeros((1, 1, 1, 1, 2))), (x4, np.zeros((1, 1, 1, 3))), (x4, np.zeros((1, 1, 1, 1, 2))),
                 (x5, np.zeros((1, 1, 1, 3))), (cpu(np.zeros((1, 3, 3))), np.zeros((1, 2, 1)))):
        with pytest.raises(RuntimeError, match=r"grid_sample: expected a 4-D input \(N, C, H, W\) and a grid "
                                               r"\(N, H_out, W_out, 2\), or a 5-D input"):
            F.grid_sample(x, cpu(g), align_corners=False)
    with pytest.raises(ValueError, match="grid_sample: expected mode to be 'bilinear', 'nearest' or 'bicubic'"):
        F.grid_sample(x4, cpu(np.zeros((1, 1, 1, 2))), mode="trilinear", align_corners=False)
    with pytest.raises(ValueError, match="expected padding_mode to be 'zeros', 'border', or 'reflection'"):
        F.grid_sample(x4, cpu(np.zeros((1, 1, 1, 2))), padding_mode="circular", align_corners=False)
    with pytest.raises(RuntimeError, match="non-empty spatial"):
        F.grid_sample(cpu(np.zeros((1, 1, 2, 0, 3))), cpu(np.zeros((1, 1, 1, 1, 3))), align_corners=False)
    with pytest.raises(ValueError, match="Expected a batch of 3D affine matrices of shape Nx3x4"):
        F.affine_grid(cpu(np.zeros((2, 2, 3))), (2, 1, 3, 4, 5), align_corners=False)
    with pytest.raises(ValueError, match="Expected a batch of 2D affine matrices of shape Nx2x3"):
        F.affine_grid(cpu(np.zeros((2, 3, 4))), (2, 1, 4, 5), align_corners=False)
    with pytest.raises(ValueError, match="non-zero, positive output size"):
        F.affine_grid(cpu(np.zeros((2, 3, 4))), (2, 1, 0, 4, 5), align_corners=False)
    with pytest.raises(NotImplementedError, match="affine_grid: only 4-D sizes"):
        F.affine_grid(cpu(np.zeros((2, 3, 4))), (2, 1, 3, 4, 5, 6), align_corners=False)


def test_empty_batches_and_grids():
    """No points, no channels or no batch: empty outputs of the right shape, and gradients of the inputs'."""
    for xs, gs, mode in (((0, 1, 3, 3), (0, 2, 2, 2), "bicubic"), ((1, 1, 3, 3), (1, 0, 2, 2), "bicubic"),
                         ((1, 0, 3, 3, 3), (1, 1, 2, 2, 3), "nearest"), ((1, 2, 3, 3, 3), (1, 0, 2, 2, 3), "bilinear")):
        x, g = cpu(np.zeros(xs), requires_grad=True), cpu(np.zeros(gs), requires_grad=True)
        out = F.grid_sample(x, g, mode=mode, padding_mode="reflection", align_corners=False)
        assert out.shape == xs[:2] + gs[1:-1]
        out.sum().backward()
        assert x.grad.shape == xs and g.grad.shape == gs
