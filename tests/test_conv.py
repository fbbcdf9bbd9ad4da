"""Conv2d: references vs a direct loop, gradcheck, validation, nn.Conv2d; on the GPU the implicit-GEMM
kernels vs a float64 reference on many random configurations, poisoned outputs, memory, PyTorch."""
import itertools
import math

import numpy as np
import pytest

from conftest import rel_norm_error as _rel
import minifused as mf
import minifused.functional as F
import minifused.nn as nn
from minifused import backend
from minifused.kernels import conv as K
from minifused.kernels import conv_plan as P
from minifused.kernels.conv import ConvConfig
from minifused.ops.conv import _unpacked
from minifused.tensor import Tensor
from minifused.testing import gradcheck


def T(a, requires_grad=False, device="cpu"):
    if not backend.is_cuda_array(a):
        a = np.asarray(a)
    return Tensor._from_array(backend.to_device(a, backend.Device(device)), requires_grad)


def direct_conv(x, w, stride, padding, dilation, groups):
    """The definition, in loops over the output (float64, small sizes only)."""
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    p = K.out_size(h, r, stride[0], padding[0], dilation[0])
    q = K.out_size(wd, s, stride[1], padding[1], dilation[1])
    y = np.zeros((n, k, p, q))
    kg = k // groups
    for ko in range(k):
        g = ko // kg
        for i in range(p):
            for j in range(q):
                for rr in range(r):
                    for ss in range(s):
                        hh = i * stride[0] - padding[0] + rr * dilation[0]
                        ww = j * stride[1] - padding[1] + ss * dilation[1]
                        if 0 <= hh < h and 0 <= ww < wd:
                            y[:, ko, i, j] += x[:, g * cg:(g + 1) * cg, hh, ww] @ w[ko, :, rr, ss]
    return y


CASES = [  # (N, C, H, W, K, R, S, stride, padding, dilation, groups)
    (1, 1, 5, 5, 2, 3, 3, (1, 1), (0, 0), (1, 1), 1),
    (2, 3, 7, 6, 4, 3, 3, (1, 1), (1, 1), (1, 1), 1),
    (2, 3, 9, 8, 2, 3, 2, (2, 1), (1, 0), (1, 1), 1),
    (1, 2, 9, 9, 3, 3, 3, (1, 1), (2, 2), (2, 2), 1),
    (1, 4, 6, 7, 4, 1, 1, (1, 1), (0, 0), (1, 1), 2),
    (1, 5, 8, 8, 3, 5, 5, (2, 2), (2, 2), (1, 1), 1),
    (1, 2, 9, 9, 2, 7, 7, (1, 1), (3, 3), (1, 1), 1),
    (2, 4, 5, 5, 4, 3, 3, (1, 2), (1, 1), (1, 1), 4),
]


@pytest.mark.parametrize("groups, cpad", [(1, 8), (3, 8), (4, 2)])
def test_unpacked_input_is_x(groups, cpad, rng):
    """A kept packed input, (groups, N, H, W, C / groups padded), unpacked for the double backward is x itself."""
    x = rng.standard_normal((2, 2 * groups, 3, 5))
    packed = np.zeros((groups, 2, 3, 5, cpad))
    packed[..., :2] = x.reshape(2, groups, 2, 3, 5).transpose(1, 0, 3, 4, 2)
    assert np.array_equal(_unpacked(K.PackedInput(packed.reshape(-1), x.shape, False, groups)), x)


@pytest.mark.parametrize("case", CASES)
def test_reference_matches_direct_loops(case, rng):
    n, c, h, w, k, r, s, st, pd, dl, g = case
    x = rng.standard_normal((n, c, h, w))
    wt = rng.standard_normal((k, c // g, r, s))
    y, _ = K.conv2d_forward_ref(x, wt, None, st, pd, dl, g)
    np.testing.assert_allclose(y, direct_conv(x, wt, st, pd, dl, g), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("activation", [None, "relu"])
def test_gradcheck(case, activation, rng):
    n, c, h, w, k, r, s, st, pd, dl, g = case
    x = T(rng.standard_normal((n, c, h, w)), True)
    wt = T(rng.standard_normal((k, c // g, r, s)), True)
    b = T(rng.standard_normal(k), True)
    assert gradcheck(lambda a, ww, bb: F.conv2d(a, ww, bb, st, pd, dl, g, activation), [x, wt, b])


def test_backward_halves_match_full_backward(rng):
    x = rng.standard_normal((2, 3, 9, 7))
    w = rng.standard_normal((5, 3, 3, 3))
    geo = ((2, 1), (1, 1), (1, 2), 1)
    y, _ = K.conv2d_forward(x, w, None, *geo)
    dy = rng.standard_normal(y.shape)
    dx, dw, db = K.conv2d_backward(dy, x, w, *geo, need_db=True)
    np.testing.assert_allclose(K.conv2d_backward_data(dy, w, x.shape, *geo), dx, rtol=1e-12)
    np.testing.assert_allclose(K.conv2d_backward_filter(dy, x, w.shape, *geo), dw, rtol=1e-12)
    np.testing.assert_allclose(db, dy.sum(axis=(0, 2, 3)), rtol=1e-12)


def test_relu_mask_roundtrip_and_layout(rng):
    pos = rng.standard_normal((3, 5, 7, 3)) > 0  # M = 63: not a multiple of 32
    mask = K.pack_mask(pos)
    assert mask.shape == (5, 2) and mask.dtype == np.uint32
    np.testing.assert_array_equal(K.unpack_mask(mask, pos.shape), pos)
    m = 1 * 21 + 2 * 3 + 1  # n=1, p=2, q=1
    assert bool((mask[4, m // 32] >> (m % 32)) & 1) == bool(pos[1, 4, 2, 1])


def test_relu_fused_forward_and_mask(rng):
    x, w, b = rng.standard_normal((2, 3, 6, 6)), rng.standard_normal((4, 3, 3, 3)), rng.standard_normal(4)
    y, mask = K.conv2d_forward(x, w, b, (1, 1), (1, 1), (1, 1), 1, "relu", want_mask=True)
    ref, _ = K.conv2d_forward(x, w, b, (1, 1), (1, 1), (1, 1), 1)
    np.testing.assert_allclose(y, np.maximum(ref, 0), rtol=1e-12)
    np.testing.assert_array_equal(K.unpack_mask(mask, y.shape), ref > 0)


def test_low_precision_dtypes_on_cpu(rng):
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    ref, _ = K.conv2d_forward(x.astype(np.float64), w.astype(np.float64))
    for dt, tol in ((backend.float16, 2e-3), (backend.bfloat16, 2e-2), (backend.float32, 1e-6)):
        y = F.conv2d(T(x.astype(dt)), T(w.astype(dt)))
        assert y.dtype == dt
        yv = y._data.astype(np.float64)
        assert np.linalg.norm(yv - ref) / np.linalg.norm(ref) < tol


def test_magic_division():
    rng = np.random.default_rng(0)
    for d in list(range(1, 200)) + [int(v) for v in rng.integers(200, 1 << 24, 200)]:
        mul, shr = P.magic(d)
        edges = [j * d + e for j in range(4) for e in (-1, 0, 1) if j * d + e >= 0]
        n = np.array([*rng.integers(0, 1 << 31, 500), *edges, (1 << 31) - 1], dtype=np.uint64)
        q = n if mul == 0 else ((n * np.uint64(mul)) >> np.uint64(32)) >> np.uint64(shr)
        np.testing.assert_array_equal(q, n // np.uint64(d))



def test_conv_config_is_a_hashable_value_and_cpu_ignores_it(rng):
    """A ConvConfig is frozen and compares and hashes by value (launch plans are cached on it); the
    NumPy path takes one and gives the reference's result."""
    import dataclasses

    a, b = ConvConfig(tile_warps=[2, 2], nchw_forward=False), ConvConfig(tile_warps=(2, 2), nchw_forward=False)
    assert a == b and hash(a) == hash(b) and a != P.DEFAULT_CONFIG
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.tile_m = 64
    assert P.ConvMode.FORWARD_NCHW == 3 and P.Mma.WGMMA == 3 and P.Epilogue.MASK == 4  # conv.cu's values
    assert ConvConfig(wgrad_tile=[64, 256]) == ConvConfig(wgrad_tile=(64, 256))
    with pytest.raises(ValueError, match=r"wgrad_tile must be one of .* got \(64, 64\)"):
        ConvConfig(wgrad_tile=(64, 64))  # conv.cu has no such wgmma tile: refused before any compile
    for bad in (0, 2.0, True):
        with pytest.raises(ValueError, match=rf"wgrad_splits must be a positive int, got {bad!r}"):
            ConvConfig(wgrad_splits=bad)
    x, w = rng.standard_normal((2, 3, 7, 6)), rng.standard_normal((4, 3, 3, 3))
    geo = ((1, 2), (1, 0), (1, 1), 1)
    y, _ = K.conv2d_forward(x, w, None, *geo, config=a)
    np.testing.assert_array_equal(y, K.conv2d_forward_ref(x, w, None, *geo)[0])
    dy = rng.standard_normal(y.shape)
    for got, ref in zip(K.conv2d_backward(dy, x, w, *geo, config=a), K.conv2d_backward_ref(dy, x, w, *geo)):
        np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(K.conv2d_backward_data(dy, w, x.shape, *geo, config=a),
                                  K.conv2d_backward_data_ref(dy, w, x.shape, *geo))
    np.testing.assert_array_equal(K.conv2d_backward_filter(dy, x, w.shape, *geo, config=a),
                                  K.conv2d_backward_filter_ref(dy, x, w.shape, *geo))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_block_diagonal_weight_gives_the_grouped_convolution(dtype, rng):
    """The dense convolution over block_diagonal's weight is the grouped one, forward and both gradients, and its
    weight gradient's diagonal blocks are the grouped weight's gradient (the GPU plan of small groups)."""
    x = rng.standard_normal((2, 12, 7, 6)).astype(dtype)
    w = rng.standard_normal((18, 4, 3, 3)).astype(dtype)
    dense = K.block_diagonal(w, 3)
    assert dense.shape == (18, 12, 3, 3) and dense.dtype == dtype
    np.testing.assert_array_equal(K.diagonal_blocks(dense, 3), w)
    np.testing.assert_array_equal(dense.reshape(3, 6, 3, 4, 3, 3)[0, :, 1], 0)  # (an off-diagonal block)
    x64, w64, d64 = x.astype(np.float64), w.astype(np.float64), dense.astype(np.float64)
    geo, dgeo = ((2, 1), (1, 1), (1, 2), 3), ((2, 1), (1, 1), (1, 2), 1)
    y = K.conv2d_forward_ref(x64, w64, None, *geo)[0]
    np.testing.assert_allclose(K.conv2d_forward_ref(x64, d64, None, *dgeo)[0], y, rtol=1e-12, atol=1e-12)
    dy = rng.standard_normal(y.shape)
    dx, dw, _ = K.conv2d_backward_ref(dy, x64, w64, *geo)
    ddx, ddw, _ = K.conv2d_backward_ref(dy, x64, d64, *dgeo)
    np.testing.assert_allclose(ddx, dx, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(K.diagonal_blocks(ddw, 3), dw, rtol=1e-12, atol=1e-12)
    wcl = np.ascontiguousarray(w.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)  # a channels-last weight
    np.testing.assert_array_equal(K.block_diagonal(wcl, 3), dense)


def test_block_diagonal_plan_rule():
    """Measured (bench/conv_grouped.py): 16-bit floats, at most 8 groups of 2 to 32 channels; the config forces it
    on or off."""
    bf16, applies = backend.bfloat16, P.block_diagonal_applies
    default = P.DEFAULT_CONFIG
    assert applies(bf16, (128, 16, 3, 3), 8, default) and applies(np.float16, (64, 32, 3, 3), 2, default)
    assert not applies(np.float32, (128, 16, 3, 3), 8, default)  # (not measured: fp32's kernels differ)
    assert not applies(bf16, (512, 64, 3, 3), 8, default)  # 64 channels a group: the grouped GEMMs are faster
    assert not applies(bf16, (512, 16, 3, 3), 32, default) and not applies(bf16, (8, 1, 3, 3), 8, default)
    assert not applies(bf16, (128, 16, 3, 3), 1, ConvConfig(block_diagonal=True))
    assert applies(np.float32, (512, 64, 3, 3), 8, ConvConfig(block_diagonal=True))
    assert not applies(bf16, (128, 16, 3, 3), 8, ConvConfig(block_diagonal=False))


@pytest.mark.parametrize("kwargs,shape,wshape,match", [
    ({}, (1, 3, 8, 8), (4, 2, 3, 3), "channels"),
    ({}, (8, 8), (4, 3, 3, 3), "4-D"),
    ({}, (1, 3, 2, 2), (4, 3, 3, 3), "larger than the padded input"),
    ({"padding": 1}, (1, 3, 2, 2), (4, 3, 5, 5), "larger than the padded input"),
    ({"dilation": 3}, (1, 3, 6, 6), (4, 3, 3, 3), "larger than the padded input"),
    ({"stride": 0}, (1, 3, 8, 8), (4, 3, 3, 3), "stride"),
    ({"dilation": 0}, (1, 3, 8, 8), (4, 3, 3, 3), "dilation"),
    ({"padding": -1}, (1, 3, 8, 8), (4, 3, 3, 3), "padding"),
    ({"groups": 2}, (1, 4, 8, 8), (3, 2, 3, 3), "divisible"),
    ({}, (1, 3, 8, 8), (4, 3, 3), "4-D"),
])
def test_bad_input(kwargs, shape, wshape, match):
    with pytest.raises(ValueError, match=match):
        F.conv2d(T(np.ones(shape, np.float32)), T(np.ones(wshape, np.float32)), **kwargs)


def test_unbatched_inputs_run_as_a_batch_of_one(rng):
    """A 3-D (C, H, W) input to conv2d, conv_transpose2d, max_pool2d (with its indices) and avg_pool2d, as
    PyTorch's take it: the batch of one's results without the batch dimension, and the same gradients."""
    w, wt = T(rng.standard_normal((4, 3, 3, 3))), T(rng.standard_normal((3, 2, 2, 2)))
    up = nn.ConvTranspose2d(3, 2, 3, stride=2, dtype=mf.float64)
    cases = [lambda x: F.conv2d(x, w, None, 1, 1), lambda x: F.conv_transpose2d(x, wt, None, 2),
             lambda x: F.max_pool2d(x, 2, return_indices=True), lambda x: F.avg_pool2d(x, 3, 2, 1),
             lambda x: up(x, output_size=(12, 10))]
    for fn in cases:
        x = rng.standard_normal((3, 5, 4))
        alone, batch = T(x, requires_grad=True), T(x[None], requires_grad=True)
        got, want = fn(alone), fn(batch)
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        for a, b in zip(got, want):
            assert a.shape == b.shape[1:]
            np.testing.assert_array_equal(a.numpy(), b.numpy()[0])
        got[0].sum().backward()
        want[0].sum().backward()
        np.testing.assert_array_equal(alone.grad.numpy(), batch.grad.numpy()[0])


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
def test_padding_modes_and_same_with_even_kernels(rng, mode):
    """Conv2d's padding_mode pads the input as np.pad's reflect / edge / wrap does (then a valid convolution),
    for explicit and 'same' padding; 'same' with an even effective kernel puts the odd pixel after (PyTorch's
    rule), F.conv2d's too; gradients by finite differences."""
    npmode = {"zeros": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    x = rng.standard_normal((2, 3, 6, 7))
    for k, padding, dil in [(3, 1, 1), (4, "same", 1), (3, "same", 2), (2, "same", 1), (3, (2, 1), 1)]:
        m = nn.Conv2d(3, 4, k, padding=padding, dilation=dil, padding_mode=mode, dtype=mf.float64)
        if padding == "same":
            tot = dil * (k - 1)
            (t, b), (le, ri) = (tot // 2, tot - tot // 2), (tot // 2, tot - tot // 2)
        else:
            ph, pw = (padding, padding) if isinstance(padding, int) else padding
            (t, b), (le, ri) = (ph, ph), (pw, pw)
        padded = np.pad(x, ((0, 0), (0, 0), (t, b), (le, ri)), mode=npmode)
        want, _ = K.conv2d_forward_ref(padded, m.weight.numpy(), m.bias.numpy(), (1, 1), (0, 0), (dil, dil), 1)
        np.testing.assert_allclose(m(T(x)).numpy(), want, rtol=1e-12, atol=1e-12)
        if mode == "zeros":
            np.testing.assert_allclose(F.conv2d(T(x), m.weight, m.bias, padding=padding, dilation=dil).numpy(), want,
                                       rtol=1e-12, atol=1e-12)
    m = nn.Conv2d(3, 2, 2, padding="same", padding_mode=mode, dtype=mf.float64)
    assert gradcheck(lambda a: m(a), [T(rng.standard_normal((1, 3, 4, 5)), requires_grad=True)])
    if mode != "zeros":
        assert repr(m).endswith(f"padding_mode={mode})")


def test_bad_padding_mode():
    with pytest.raises(ValueError, match="padding_mode must be one of 'zeros', 'reflect', 'replicate', 'circular'"):
        nn.Conv2d(1, 1, 3, padding_mode="symmetric")


def test_bad_bias_and_dtype():
    x, w = T(np.ones((1, 3, 8, 8), np.float32)), T(np.ones((4, 3, 3, 3), np.float32))
    with pytest.raises(ValueError, match="bias"):
        F.conv2d(x, w, T(np.ones(3, np.float32)))
    with pytest.raises(TypeError, match="dtype"):
        F.conv2d(x, T(np.ones((4, 3, 3, 3), np.float64)))
    with pytest.raises(ValueError, match="activation"):
        F.conv2d(x, w, activation="gelu")


def test_numpy_integer_arguments(rng):
    """NumPy integers (a groups or stride computed with NumPy) are ints, as PyTorch takes them: the grouped
    convolution of a NumPy groups equals that of the int, both ways."""
    x, w, wt = (T(rng.standard_normal(s)) for s in ((1, 4, 6, 6), (6, 2, 3, 3), (4, 3, 3, 3)))
    np.testing.assert_array_equal(F.conv2d(x, w, None, np.int64(2), 1, 1, np.int64(2)).numpy(),
                                  F.conv2d(x, w, None, 2, 1, 1, 2).numpy())
    np.testing.assert_array_equal(F.conv_transpose2d(x, wt, None, 2, groups=np.int32(2)).numpy(),
                                  F.conv_transpose2d(x, wt, None, 2, groups=2).numpy())


def test_padding_strings(rng):
    x, w = T(rng.standard_normal((1, 2, 6, 6))), T(rng.standard_normal((3, 2, 3, 3)))
    assert F.conv2d(x, w, padding="same").shape == (1, 3, 6, 6)
    assert F.conv2d(x, w, padding="valid").shape == (1, 3, 4, 4)


def test_nn_conv2d_init_shapes_and_state_dict():
    mf.manual_seed(0)
    m = nn.Conv2d(6, 8, (3, 5), stride=2, padding=1, groups=2, activation="relu")
    assert m.weight.shape == (8, 3, 3, 5) and m.bias.shape == (8,)
    bound = 1 / math.sqrt(3 * 3 * 5)
    for p in (m.weight, m.bias):
        v = backend.to_device(p._data, backend.CPU)
        assert np.abs(v).max() <= bound and np.abs(v).max() > 0.5 * bound
    assert set(m.state_dict().keys()) == {"weight", "bias"}
    y = m(T(np.random.default_rng(0).standard_normal((2, 6, 9, 9)).astype(np.float32)))
    assert y.shape == (2, 8, 5, 4) and float(y._data.min()) >= 0
    assert nn.Conv2d(3, 4, 3, bias=False).bias is None
    assert "Conv2d" in repr(nn.Sequential(nn.Conv2d(1, 2, 3)))


def test_conv_then_backward_through_module(rng):
    m = nn.Conv2d(3, 4, 3, padding=1, activation="relu", dtype="float64")
    x = T(rng.standard_normal((2, 3, 5, 5)), True)
    assert gradcheck(lambda a, w, b: F.conv2d(a, w, b, 1, 1, activation="relu"), [x, m.weight, m.bias])


# ---------------------------------------------------------------- GPU
def _random_config(rng):
    while True:
        n = int(rng.choice([1, 1, 2, 3, 4]))
        c = int(rng.choice([1, 2, 3, 5, 8, 13, 16, 24, 32, 40, 64]))
        k = int(rng.choice([1, 3, 8, 16, 17, 32, 64, 72, 130]))
        r = int(rng.choice([1, 3, 3, 5, 7]))
        s = r if rng.random() < 0.8 else int(rng.choice([1, 3, 5]))
        st = (int(rng.choice([1, 1, 2, 3])),) * 2 if rng.random() < 0.8 else (1, 2)
        dl = (1, 1) if rng.random() < 0.75 else (int(rng.choice([2, 3])),) * 2
        pd = (int(rng.integers(0, r // 2 * dl[0] + 1)), int(rng.integers(0, s // 2 * dl[1] + 1)))
        h, w = int(rng.integers(1, 24)), int(rng.integers(1, 24))
        groups = 2 if (rng.random() < 0.1 and c % 2 == 0 and k % 2 == 0) else 1
        if dl[0] * (r - 1) + 1 <= h + 2 * pd[0] and dl[1] * (s - 1) + 1 <= w + 2 * pd[1]:
            return (n, c, h, w, k, r, s, st, pd, dl, groups)


_GPU_TOL = {"float16": 3e-3, "bfloat16": 2e-2, "float32": 1e-5, "tf32": 4e-3}


def _gpu_cases(seed, count):
    rng = np.random.default_rng(seed)
    return [_random_config(rng) for _ in range(count)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "tf32"])
@pytest.mark.parametrize("tuning", [{}, {"tile_warps": (2, 2), "nchw_forward": False},
                                   {"tile_row_bytes": 64, "tile_m": 64},
                                   {"tile_row_bytes": 128, "nchw_forward": False},
                                   {"tile_row_bytes": 128, "nchw_forward": False, "wgmma_stages": 4},
                                   {"tile_n": 64, "nchw_forward": False}, {"tile_n": 32, "tile_row_bytes": 128, "nchw_forward": False},
                                   {"tile_n": 32, "tile_m": 64, "tile_row_bytes": 128, "nchw_forward": False}])
def test_gpu_random_configs_all_directions(dtype, tuning, poisoned_pool, monkeypatch):
    """>= 50 random configurations per direction (fwd with bias+ReLU+mask, bwd-data, bwd-filter, bias grad),
    with the default tiles, with 4-warp blocks everywhere (64 x 64 warp tiles; FFMA keeps its 8 warps) and the
    repacking forward, with 64-byte tiles of 64 rows, and with 128-byte tiles everywhere (on an H100: the wgmma
    path for every tensor-core forward and fp16/bf16 backward-data, 3 stages on these small grids, and 4), and
    32-wide tiles (mma.sync) of 128 and 64 rows everywhere."""
    import cupy

    monkeypatch.setattr(backend.tf32_conv, "allow_tf32", dtype == "tf32")
    config = ConvConfig(**tuning)
    dt = backend.float32 if dtype == "tf32" else backend.as_dtype(dtype)
    tol = _GPU_TOL[dtype]
    rng = np.random.default_rng(7)
    failures = []
    for i, cfg in enumerate(_gpu_cases(11, 56)):
        n, c, h, w, k, r, s, st, pd, dl, g = cfg
        x = cupy.asarray(rng.standard_normal((n, c, h, w))).astype(dt)
        wt = cupy.asarray(rng.standard_normal((k, c // g, r, s))).astype(dt)
        b = cupy.asarray(rng.standard_normal(k)).astype(dt)
        act = "relu" if i % 2 else None
        x64, w64, b64 = x.astype(cupy.float64), wt.astype(cupy.float64), b.astype(cupy.float64)
        y, mask = K.conv2d_forward(x, wt, b, st, pd, dl, g, act, want_mask=act == "relu", config=config)
        y_ref, mask_ref = K.conv2d_forward_ref(x64, w64, b64, st, pd, dl, g, act, want_mask=act == "relu")
        errs = {"fwd": _rel(y, y_ref)}
        if act:
            pre, _ = K.conv2d_forward_ref(x64, w64, b64, st, pd, dl, g)
            diff = K.unpack_mask(mask, y.shape) != (pre > 0)
            # a pre-activation within rounding of 0 may land either side
            errs["mask"] = float((diff & (cupy.abs(pre) > 1e-2 * float(cupy.abs(pre).max()))).sum())
        dy = cupy.asarray(rng.standard_normal(y.shape)).astype(dt)
        dx, dw, db = K.conv2d_backward(dy, x, wt, st, pd, dl, g, mask_ref if act else None, True, True, True,
                                       config=config)
        rx, rw, rb = K.conv2d_backward_ref(dy.astype(cupy.float64), x64, w64, st, pd, dl, g,
                                           mask_ref if act else None, True, True, True)
        errs.update(bwd_data=_rel(dx, rx), bwd_filter=_rel(dw, rw), bias=_rel(db, rb))
        bad = {key: v for key, v in errs.items() if (v > 0 if key == "mask" else v > tol)}
        if bad:
            failures.append((cfg, act, bad))
    assert not failures, f"{len(failures)} configurations failed ({dtype}): {failures[:6]}"


_GROUPED_CASES = [  # (N, C, H, W, K, R, S, stride, padding, dilation, groups)
    (2, 16, 9, 9, 24, 3, 3, (1, 1), (1, 1), (1, 1), 4),
    (3, 32, 12, 12, 32, 3, 3, (2, 2), (1, 1), (1, 1), 8),  # backward-data: residue classes times groups
    (2, 12, 7, 7, 18, 1, 1, (1, 1), (0, 0), (1, 1), 3),  # 4 and 6 channels a group: padded
    (2, 64, 10, 10, 64, 3, 3, (1, 1), (1, 1), (1, 1), 32),  # 2 channels a group
    (1, 10, 11, 8, 15, 5, 3, (1, 2), (2, 1), (1, 1), 5),
    (2, 8, 10, 10, 8, 3, 3, (1, 1), (2, 2), (2, 2), 2),
    (16, 32, 32, 32, 64, 3, 3, (1, 1), (1, 1), (1, 1), 8),  # many filter-gradient splits a group
    (4, 256, 8, 8, 256, 3, 3, (2, 2), (1, 1), (1, 1), 2),  # 128 channels a group: 128-wide tiles
]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "tf32"])
@pytest.mark.parametrize("tuning", [{}, {"block_diagonal": True}, {"block_diagonal": False},
                                   {"tile_row_bytes": 128, "nchw_forward": False, "block_diagonal": False},
                                   {"tile_n": 32, "tile_row_bytes": 128, "nchw_forward": False,
                                    "block_diagonal": False},
                                   {"tile_row_bytes": 64, "tile_m": 64, "block_diagonal": False}])
def test_gpu_grouped_convolutions_all_directions(dtype, tuning, poisoned_pool, monkeypatch):
    """Grouped convolutions, every group's GEMM in one launch (grid z): forward with bias + ReLU + mask, backward-data
    (strided: the residue classes times the groups along z), backward-filter (split-K partials of all groups summed
    as one GEMM's) and the bias gradient, against the float64 reference: 2 to 32 groups, padded group channels,
    strides, dilation, many splits, wide tiles; the default tiles, wgmma's 128-byte rows, 32-wide and 64-row tiles.
    By default small groups of 16-bit floats run as the dense convolution over the block-diagonal weight; forced
    on, every case does (any dtype)."""
    import cupy

    monkeypatch.setattr(backend.tf32_conv, "allow_tf32", dtype == "tf32")
    config = ConvConfig(**tuning)
    dt = backend.float32 if dtype == "tf32" else backend.as_dtype(dtype)
    rng = np.random.default_rng(5)
    failures = []
    for cfg in _GROUPED_CASES:
        n, c, h, w, k, r, s, st, pd, dl, g = cfg
        x = cupy.asarray(rng.standard_normal((n, c, h, w))).astype(dt)
        wt = cupy.asarray(rng.standard_normal((k, c // g, r, s))).astype(dt)
        b = cupy.asarray(rng.standard_normal(k)).astype(dt)
        x64, w64, b64 = x.astype(cupy.float64), wt.astype(cupy.float64), b.astype(cupy.float64)
        y, mask = K.conv2d_forward(x, wt, b, st, pd, dl, g, "relu", want_mask=True, config=config)
        y_ref, mask_ref = K.conv2d_forward_ref(x64, w64, b64, st, pd, dl, g, "relu", want_mask=True)
        pre, _ = K.conv2d_forward_ref(x64, w64, b64, st, pd, dl, g)
        diff = K.unpack_mask(mask, y.shape) != (pre > 0)
        errs = {"fwd": _rel(y, y_ref),
                "mask": float((diff & (cupy.abs(pre) > 1e-2 * float(cupy.abs(pre).max()))).sum())}
        dy = cupy.asarray(rng.standard_normal(y.shape)).astype(dt)
        for m in (mask_ref, None):  # (the reference's mask for both: a pre-activation near 0 may land either side)
            dx, dw, db = K.conv2d_backward(dy, x, wt, st, pd, dl, g, m, True, True, True, config=config)
            rx, rw, rb = K.conv2d_backward_ref(dy.astype(cupy.float64), x64, w64, st, pd, dl, g, m, True, True, True)
            tag = "masked " if m is not None else ""
            errs.update({tag + "bwd_data": _rel(dx, rx), tag + "bwd_filter": _rel(dw, rw),
                         tag + "bias": _rel(db, rb)})
        dw_only = K.conv2d_backward(dy, x, wt, st, pd, dl, g, None, False, True, False, config=config)[1]
        errs["bwd_filter alone"] = _rel(dw_only, rw)
        # x as the forward packed it (all groups), kept for the filter gradient in place of x
        _, _, kept = K.conv2d_forward(x, wt, b, st, pd, dl, g, keep_packed_x=True, config=config)
        dense = P.block_diagonal_applies(dt, wt.shape, g, config)
        if kept is None:  # the dense convolution's forward from NCHW packs nothing
            assert dense, cfg
        else:
            assert kept.groups == (1 if dense else g)
            assert _rel(_unpacked(kept), x64) < (_GPU_TOL[dtype] if dtype == "tf32" else 1e-12)
            dx, dw, _ = K.conv2d_backward(dy, kept, wt, st, pd, dl, g, None, True, True, False, config=config)
            errs.update({"packed x bwd_data": _rel(dx, rx), "packed x bwd_filter": _rel(dw, rw)})
        bad = {key: v for key, v in errs.items() if (v > 0 if key == "mask" else v > _GPU_TOL[dtype])}
        if bad:
            failures.append((cfg, bad))
    assert not failures, f"{len(failures)} configurations failed ({dtype}): {failures[:6]}"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("rows_m,row_bytes", [(None, None), (64, None), (None, 128)])
def test_gpu_nchw_forward_random_configs(dtype, rows_m, row_bytes, poisoned_pool):
    """The forward straight from NCHW (conv.cu's mode 3, forced) on 50 random configurations it applies to
    (one group, C*R*S a multiple of 8), with bias, ReLU and mask, against float64; the same configurations
    through the repacking path agree with it."""
    import cupy

    forced = ConvConfig(tile_m=rows_m, tile_row_bytes=row_bytes, nchw_forward=True)
    repacked = ConvConfig(tile_m=rows_m, tile_row_bytes=row_bytes, nchw_forward=False)
    dt, tol = backend.as_dtype(dtype), _GPU_TOL[dtype]
    rng, data = np.random.default_rng(19), np.random.default_rng(23)
    cases = []
    while len(cases) < 50:
        cfg = _random_config(rng)
        n, c, h, w, k, r, s, st, pd, dl, g = cfg
        if g == 1 and (c * r * s) % 8 == 0 and c * r * s > P.DIRECT_CRS_MAX:
            cases.append(cfg)
    failures = []
    for i, (n, c, h, w, k, r, s, st, pd, dl, g) in enumerate(cases):
        x = cupy.asarray(data.standard_normal((n, c, h, w))).astype(dt)
        wt = cupy.asarray(data.standard_normal((k, c, r, s))).astype(dt)
        b = cupy.asarray(data.standard_normal(k)).astype(dt)
        act = "relu" if i % 2 else None
        assert P.uses_nchw_forward(x.shape, wt.shape, st, pd, dl, 1, dt, forced)
        y, mask = K.conv2d_forward(x, wt, b, st, pd, dl, 1, act, want_mask=act == "relu", config=forced)
        y2, mask2 = K.conv2d_forward(x, wt, b, st, pd, dl, 1, act, want_mask=act == "relu", config=repacked)
        ref, _ = K.conv2d_forward_ref(x.astype(cupy.float64), wt.astype(cupy.float64), b.astype(cupy.float64),
                                      st, pd, dl, 1, act)
        errs = {"fwd": _rel(y, ref), "vs_repacked": _rel(y, y2.astype(cupy.float64))}
        if act:
            errs["mask_words_differ"] = float((mask != mask2).sum()) / mask.size
        bad = {key: v for key, v in errs.items() if v > (0.01 if key == "mask_words_differ" else tol)}
        if bad:
            failures.append(((n, c, h, w, k, r, s, st, pd, dl), act, bad))
    assert not failures, f"{len(failures)} configurations failed: {failures[:6]}"


@pytest.mark.gpu
@pytest.mark.parametrize("tuning", [
    {}, {"tile_row_bytes": 64, "nchw_forward": False}, {"tile_m": 64, "nchw_forward": False}, {"nchw_forward": True},
    {"tile_m": 64, "nchw_forward": True}, {"tile_warps": (2, 2), "nchw_forward": False},
    {"tile_warps": (2, 2), "tile_m": 64, "tile_row_bytes": 64, "nchw_forward": False},
    {"tile_warps": (2, 4), "nchw_forward": True, "tile_row_bytes": 128}, {"wgmma": False, "nchw_forward": False},
    {"wgmma_stages": 3, "nchw_forward": False}, {"wgmma_stages": 4, "nchw_forward": False},
    {"tile_n": 64, "nchw_forward": False}, {"tile_n": 128, "nchw_forward": False},
    {"tile_n": 32, "tile_row_bytes": 128, "nchw_forward": False},
    {"wgrad_tile": (64, 256), "wgmma_stages": 3}, {"wgrad_tile": (128, 64), "split_k_blocks_per_sm": 1},
    {"wgrad_tile": (64, 128), "split_k_blocks_per_sm": 8}, {"tma": False, "nchw_forward": False}])
def test_gpu_large_shapes_match(poisoned_pool, tuning):
    """The benchmark shapes' tile paths (BN=128, 128-byte tiles, split-K, strided backward-data by residue
    class incl. classes with no taps, all classes in one launch) on reduced batches, with both tile depths,
    both block heights and widths, both warp grids, the forward from NCHW forced on and off, and (H100) wgmma
    off and at both depths, and the backward-filter's other wgmma tiles."""
    import cupy

    config = ConvConfig(**tuning)
    rng = np.random.default_rng(3)
    for (n, c, h, w, k, st, r) in [(4, 64, 56, 56, 64, 1, 3), (4, 256, 14, 14, 256, 1, 3), (4, 128, 28, 28, 256, 2, 3),
                                   (16, 32, 28, 28, 64, 1, 3), (16, 1, 28, 28, 32, 1, 3), (2, 16, 9, 9, 8, 2, 1),
                                   (3, 24, 13, 12, 40, 3, 3), (2, 64, 15, 15, 32, 2, 5), (8, 256, 8, 8, 512, 2, 3),
                                   (8, 64, 32, 32, 128, 2, 1), (5, 512, 4, 4, 512, 1, 3),
                                   (2, 40, 20, 20, 24, 1, 9)]:  # 81 taps
        for dt, tol in ((backend.float16, 3e-3), (backend.float32, 1e-5)):
            x = cupy.asarray(rng.standard_normal((n, c, h, w))).astype(dt)
            wt = cupy.asarray(rng.standard_normal((k, c, r, r))).astype(dt)
            geo = ((st, st), (r // 2, r // 2), (1, 1), 1)
            y, _ = K.conv2d_forward(x, wt, None, *geo, config=config)
            ref, _ = K.conv2d_forward_ref(x.astype(cupy.float64), wt.astype(cupy.float64), None, *geo)
            assert _rel(y, ref) < tol
            dy = cupy.asarray(rng.standard_normal(y.shape)).astype(dt)
            dx, dw, _ = K.conv2d_backward(dy, x, wt, *geo, config=config)
            rx, rw, _ = K.conv2d_backward_ref(dy.astype(cupy.float64), x.astype(cupy.float64),
                                              wt.astype(cupy.float64), *geo)
            assert _rel(dx, rx) < tol and _rel(dw, rw) < tol, (n, c, h, w, k, st, r, dt)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "tf32"])
def test_gpu_forward_weight_pack_matches_numpy(dtype, poisoned_pool):
    """The forward's KCRS -> KRSC weight pack (conv_util.cu's pack_forward with no image blocks, what the NCHW
    and the channels-last forwards launch) equals NumPy's: channels zero-padded, more elements than the blocks'
    threads (each takes several in turn), 1x1 to 33x33 filters, a thousand channels; TF32 rounds to nearest as
    cvt.rna."""
    import cupy

    from minifused.kernels.conv import _weight_pack

    dt = backend.float32 if dtype == "tf32" else getattr(backend, dtype)
    rng = np.random.default_rng(21)
    filters = [(3, 70, 3, 72), (5, 130, 1, 136), (2, 64, 5, 64), (4, 1, 3, 8), (3, 200, 3, 256),
               (2, 40, 12 if dt != backend.float32 else 9, 40), (3, 20, 7, 24), (2, 1000, 3, 1000), (2, 5, 17, 8),
               (1, 3, 33, 8)]
    for k, c, r, cp_ in filters:
        cp_ = max(cp_, P.padded_channels(c, dt))
        w = rng.standard_normal((k, c, r, r)).astype(np.float32)
        if dtype == "tf32":  # values with bits below TF32's, both halves of the rounding
            w = (w.view(np.uint32) | np.uint32(0x1000) * rng.integers(0, 2, w.shape).astype(np.uint32)).view(np.float32)
        wd = cupy.asarray(w).astype(dt)
        out = cupy.full(k * r * r * cp_, np.nan, dt)
        pack = ((1, 1, 3), P.ints(0, c, c, 1, cp_, k, r * r, 0, 1, dtype == "tf32"), 0, 0)
        _weight_pack(np.dtype(dt), pack)(wd.data.ptr, out.data.ptr, wd.data.ptr, out.data.ptr)
        want = np.zeros((k, r * r, cp_), np.float64)
        src = wd.get().astype(np.float64).reshape(k, c, r * r).transpose(0, 2, 1)
        if dtype == "tf32":
            bits = src.astype(np.float32).view(np.uint32)
            src = ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
        want[..., :c] = src
        assert np.array_equal(out.get().astype(np.float64).reshape(want.shape), want), (dtype, k, c, r, cp_)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_gpu_wgrad_reduce_runs_matches_numpy(dtype, poisoned_pool):
    """conv_util.cu's wgrad_reduce_runs (small filters of many splits: 8 runs of ceil(splits / 8) splits, each
    summed in order, then the runs' sums in run order) into a KRSC dw equals NumPy's float32 sums in that order,
    cast: runs that come out empty (17 splits: runs of 3, the last two empty), items not a multiple of a block's
    32, padded channels skipped, fewer blocks than groups of items (each takes several in turn); and the filter
    gradient that takes it (split-K's partials of a 1x1 filter of 64 x 128 channels) matches the float64
    reference."""
    import cupy

    dt = getattr(backend, dtype)
    rng = np.random.default_rng(23)
    runs = P.util_kernel(np.dtype(dt), "wgrad_reduce_runs")
    for splits, k, c, r, cp_, blocks in [(131, 128, 64, 1, 64, 64), (26, 64, 64, 3, 64, 7), (17, 5, 12, 1, 16, 1),
                                         (16, 33, 8, 3, 8, 2), (9, 3, 4, 1, 4, 5)]:
        ws = rng.standard_normal((splits, k, r * r, cp_)).astype(np.float32)
        per = -(-splits // 8)
        want = None
        for z0 in range(0, splits, per):
            run = ws[z0].copy()
            for z in range(z0 + 1, min(splits, z0 + per)):
                run += ws[z]
            want = run if want is None else want + run
        dw = cupy.full((k, r * r, c), np.nan, dt)
        runs((blocks,), (256,), (cupy.asarray(ws), dw, *P.ints(splits, k, c, r * r, cp_)))
        ref = cupy.asarray(np.ascontiguousarray(want[..., :c])).astype(dt)
        assert np.array_equal(dw.get().astype(np.float64), ref.get().astype(np.float64)), (dtype, splits, k, c, r)
    # end to end, where conv.py takes it: a 1x1 stride-2 filter of 64 x 128 channels over 25088 output pixels
    from minifused.kernels import to_channels_last
    from minifused.kernels.conv_tma import tma_wgrad_plan

    n, c, h, k = 32, 64, 56, 128
    geo = ((2, 2), (0, 0), (1, 1), 1)
    if dtype != "float32" and cupy.cuda.Device().compute_capability == "90":
        plan = tma_wgrad_plan(dt, (n, c, h, h), (k, c, 1, 1), *geo, cupy.cuda.Device().id, P.DEFAULT_CONFIG)
        assert plan.splits >= 16 and plan.wgrad_tiles[2] == 0, plan
    x = cupy.asarray(rng.standard_normal((n, c, h, h))).astype(dt)
    dy = cupy.asarray(rng.standard_normal((n, k, 28, 28))).astype(dt)
    ref = K.conv2d_backward_filter_ref(dy.astype(cupy.float64), x.astype(cupy.float64), (k, c, 1, 1), *geo)
    assert _rel(K.conv2d_backward_filter(dy, x, (k, c, 1, 1), *geo), ref) < _GPU_TOL[dtype], dtype
    dwc = K.conv2d_backward_filter(to_channels_last(dy), to_channels_last(x), (k, c, 1, 1), *geo,
                                   channels_last_weight=True)
    assert _rel(dwc, ref) < _GPU_TOL[dtype], dtype


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_gpu_wgrad_reduce_matches_numpy(dtype, poisoned_pool):
    """conv_util.cu's wgrad_reduce (the filter gradient's fp32 split-K partials, (splits, K, RS, Cp), summed in
    split order into a KCRS dw) equals NumPy's float32 sums in that order, cast: more elements than the blocks'
    threads (each takes several in turn), padded channels skipped, 1x1 to 33x33 filters, one to eight splits; and
    so does wgrad_reduce_kcrs (KCRS through shared memory), more (k, 32- or 128-channel) pairs than blocks among
    them (128, 4 channels a thread, where C and Cp are multiples of 4; blocks part full past C).
    Where the first tiles ran whole (conv_tma_wgrad's hybrid schedule), their elements sum their own splits
    (split 0 alone where unsplit) or, where the kernel wrote them into a KRSC dw itself (``done``), are left as
    they are; where they are unsplit, the splits past the first are stored from the first row of split tiles on
    (conv_tma.wgrad_partials)."""
    import cupy

    from minifused.kernels.conv_tma import wgrad_partials

    dt = getattr(backend, dtype)
    rng = np.random.default_rng(22)
    reduce = P.util_kernel(np.dtype(dt), "wgrad_reduce")
    transposing = P.util_kernel(np.dtype(dt), "wgrad_reduce_kcrs")
    for splits, k, c, r, cp_, blocks, tiles in [
            (2, 64, 3, 7, 8, 5, (1, 1, 0, 1)), (3, 5, 1000, 3, 1000, 7, (1, 1, 0, 1)),
            (1, 9, 70, 1, 72, 2, (1, 1, 0, 1)), (8, 33, 130, 3, 136, 1024, (1, 1, 0, 1)),
            (2, 3, 5, 17, 8, 3, (1, 1, 0, 1)), (2, 2, 3, 33, 8, 4, (1, 1, 0, 1)),
            (3, 256, 128, 3, 128, 64, (128, 9, 11, 1)), (4, 192, 64, 3, 64, 9, (64, 5, 7, 1)),
            (2, 70, 5, 3, 8, 3, (64, 1, 1, 1)), (4, 256, 128, 3, 128, 64, (128, 9, 11, 3)),
            (2, 192, 64, 3, 64, 9, (64, 5, 7, 3))]:  # tiles: (rows, tiles per row of them, whole tiles, their splits)
        ws = rng.standard_normal((max(splits, tiles[3]), k, r * r, cp_)).astype(np.float32)
        rows, per_row, whole, whole_splits = tiles
        tile = (np.arange(k)[:, None] // rows) * per_row + np.arange(r * r * cp_)[None, :] // 128
        alone = (tile < whole).reshape(k, r * r, cp_)  # a whole tile's elements: its own splits alone
        want = ws[0].copy()
        for z in range(1, max(splits, whole_splits)):
            want += np.where(alone, ws[z] if z < whole_splits else np.float32(0),
                             ws[z] if z < splits else np.float32(0))
        # the partials as the kernels lay them out (wgrad_partials): split z at z * stride, each past split 0 from
        # the first row of tiles not all whole (unsplit whole tiles: those rows are split 0's alone)
        stride, nbytes = wgrad_partials(k, r * r * cp_, tiles, splits)
        plane = k * r * r * cp_
        packed = np.full(nbytes // 4, np.nan, np.float32)
        packed[:plane] = ws[0].ravel()
        for z in range(1, max(splits, whole_splits)):
            packed[z * stride + plane - stride:z * stride + plane] = ws[z].ravel()[plane - stride:]
        assert not np.isnan(packed).any(), (k, r, tiles)  # (the planes overlap nowhere and leave no gap)
        wsd, stride = cupy.asarray(packed), np.int64(stride)
        for krsc in (0, 1):  # dw KCRS, or a channels-last weight's KRSC memory
            dw = cupy.full((k, r * r, c) if krsc else (k, c, r * r), np.nan, dt)
            reduce((blocks,), (256,), (wsd, dw, *P.ints(splits, k, c, r * r, cp_, krsc, *tiles, 0), stride))
            ref = want[..., :c] if krsc else want[..., :c].transpose(0, 2, 1)
            ref = cupy.asarray(np.ascontiguousarray(ref)).astype(dt)
            assert np.array_equal(dw.get().astype(np.float64), ref.get().astype(np.float64)), (dtype, k, c, r, krsc)
            if krsc and whole:  # the whole tiles written already: kept, the rest summed
                dw.fill(np.nan)
                reduce((blocks,), (256,), (wsd, dw, *P.ints(splits, k, c, r * r, cp_, 1, *tiles, 1), stride))
                got, kept = dw.get().astype(np.float64), alone[..., :c]
                assert np.isnan(got[kept]).all() and np.array_equal(got[~kept], ref.get().astype(np.float64)[~kept])
            for vec in {1, K.wgrad_reduce_vec(c, cp_)}:  # (channels a thread; a block's: 32 threads')
                if krsc or r * r == 1 or 32 * vec * r * r * 4 > 48 * 1024:
                    continue  # (the KCRS transpose in shared memory, where it fits: the same)
                dw.fill(np.nan)
                transposing((blocks,), (256,), (wsd, dw, *P.ints(splits, k, c, r * r, cp_, *tiles), stride,
                                                np.int32(vec)), shared_mem=32 * vec * r * r * 4)
                assert np.array_equal(dw.get().astype(np.float64), ref.get().astype(np.float64)), (dtype, k, c, r, vec)


@pytest.mark.gpu
@pytest.mark.parametrize("wgmma", [None, False])
def test_gpu_tf32_operands_round_to_nearest(wgmma, monkeypatch):
    """TF32 convolutions round both operands to nearest (ties away), as cvt.rna does, whichever path runs:
    against float64 on the rounded operands the error is float32 accumulation's (far under the 3e-4 that
    truncated or unrounded operands give)."""
    import cupy

    monkeypatch.setattr(backend.tf32_conv, "allow_tf32", True)
    config = ConvConfig(wgmma=wgmma, nchw_forward=False)
    rng = np.random.default_rng(5)

    def rna(a):  # float32 -> TF32 (10 mantissa bits), round half away from zero
        bits = a.astype(np.float32).view(np.uint32)
        return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)

    for n, c, h, k in [(2, 128, 10, 96), (3, 72, 9, 200)]:
        x = rng.standard_normal((n, c, h, h)).astype(np.float32)
        wt = rng.standard_normal((k, c, 3, 3)).astype(np.float32)
        geo = ((1, 1), (1, 1), (1, 1), 1)
        y, _ = K.conv2d_forward(cupy.asarray(x), cupy.asarray(wt), None, *geo, config=config)
        ref, _ = K.conv2d_forward_ref(rna(x).astype(np.float64), rna(wt).astype(np.float64), None, *geo)
        assert _rel(y, cupy.asarray(ref)) < 3e-5, (n, c, h, k)


@pytest.mark.gpu
def test_gpu_forward_launcher_follows_the_config(poisoned_pool):
    """The forward's launch plan is cached per call signature and config: another config between two
    calls of one shape switches the path (mode 3 from NCHW <-> the repacking GEMM), and both agree with
    float64 with bias, ReLU and the mask (flags 1 | 2 | 4 in one launch)."""
    import cupy

    rng = np.random.default_rng(5)
    x = cupy.asarray(rng.standard_normal((3, 16, 9, 11))).astype(backend.float16)
    w = cupy.asarray(rng.standard_normal((24, 16, 3, 3))).astype(backend.float16)
    b = cupy.asarray(rng.standard_normal(24)).astype(backend.float16)
    geo = ((1, 1), (1, 1), (1, 1), 1)
    ref, ref_mask = K.conv2d_forward_ref(x.astype(cupy.float64), w.astype(cupy.float64), b.astype(cupy.float64),
                                         *geo, "relu", want_mask=True)
    paths = []
    for forced in (True, False, True):
        config = ConvConfig(nchw_forward=forced)
        y, mask = K.conv2d_forward(x, w, b, *geo, "relu", want_mask=True, config=config)
        run = K._forward_launcher(x.dtype, x.shape, w.shape, *geo, x.device.id, config, False)
        paths.append("pack_x_w" in run.__code__.co_freevars)  # the repacking path's closure holds its pack launch
        assert _rel(y, ref) < _GPU_TOL["float16"]
        assert float((mask != ref_mask).mean()) < 0.01  # near-zero outputs may round across 0
    assert paths == [False, True, False]


@pytest.mark.gpu
def test_gpu_wgmma_runs_on_hopper():
    """On an sm_90 GPU the repacked forward (fp16, bf16, TF32) and the fp16/bf16 backward-data and
    backward-filter with 128-byte tile rows take the wgmma kernel (compiled for sm_90a), and
    `ConvConfig(wgmma=False)` takes mma.sync."""
    import cupy

    if cupy.cuda.Device().compute_capability != "90":
        pytest.skip("wgmma needs an sm_90 GPU")
    dev = cupy.cuda.Device().id
    shape = ((8, 256, 14, 14), (256, 256, 3, 3), (1, 1), (1, 1), (1, 1), 1)
    default, off = P.DEFAULT_CONFIG, ConvConfig(wgmma=False)
    fwd, bwd_data = P.ConvMode.FORWARD, P.ConvMode.BACKWARD_DATA
    for mode, dtype in [(fwd, backend.float16), (fwd, backend.bfloat16), (fwd, backend.float32),
                        (bwd_data, backend.float16)]:
        kern, _, _, smem = P.gemm_plan(mode, dtype, *shape, dev, default, True)[0][:4]
        assert smem == P.smem_bytes(np.dtype(dtype).itemsize, mode, 128, 128, 128, 3, True), (mode, dtype)
        assert P.gemm_plan(mode, dtype, *shape, dev, off, True)[0][0] is not kern
    assert P.gemm_plan(bwd_data, backend.float32, *shape, dev, default, True)[0][3] != P.smem_bytes(
        4, bwd_data, 128, 128, 128, 3, True)
    bwd_filter = P.ConvMode.BACKWARD_FILTER
    for dtype in (backend.float16, backend.bfloat16):
        kern, _, _, smem = P.gemm_plan(bwd_filter, dtype, *shape, dev, default, True)[0][:4]
        assert smem == P.smem_bytes(2, bwd_filter, 128, 128, 128, 4, True), dtype
        assert P.gemm_plan(bwd_filter, dtype, *shape, dev, off, True)[0][0] is not kern
    assert P.gemm_plan(bwd_filter, backend.float32, *shape, dev, default, True)[0][3] != P.smem_bytes(
        4, bwd_filter, 128, 128, 128, 4, True)


@pytest.mark.gpu
def test_gpu_narrow_tiles_onto_few_channels(poisoned_pool, monkeypatch):
    """A TF32 backward-data onto 32 channels (the MNIST CNN's second layer) runs 32-wide tiles on mma.sync, one
    column of blocks, and matches float64; with 64-byte tile rows, or where wgmma runs, the tiles stay 64 wide."""
    import cupy

    dev = cupy.cuda.Device().id
    shape = ((8, 32, 26, 26), (64, 32, 3, 3), (1, 1), (1, 1), (1, 1), 1)
    bwd_data = P.ConvMode.BACKWARD_DATA
    kern, grid = P.gemm_plan(bwd_data, backend.float32, *shape, dev, P.DEFAULT_CONFIG, True)[0][:2]
    assert "-DCONV_BN=32" in kern.options and "-DCONV_MMA=2" in kern.options and grid[1] == 1
    kern = P.gemm_plan(bwd_data, backend.float32, *shape, dev, ConvConfig(tile_row_bytes=64), True)[0][0]
    assert "-DCONV_BN=64" in kern.options
    if cupy.cuda.Device().compute_capability == "90":
        kern = P.gemm_plan(bwd_data, backend.float16, *shape, dev, P.DEFAULT_CONFIG, True)[0][0]
        assert "-DCONV_BN=64" in kern.options and "-DCONV_MMA=3" in kern.options
    rng = np.random.default_rng(4)
    wt = cupy.asarray(rng.standard_normal(shape[1])).astype(cupy.float32)
    dy = cupy.asarray(rng.standard_normal((8, 64, 26, 26))).astype(cupy.float32)
    monkeypatch.setattr(backend.tf32_conv, "allow_tf32", True)
    dx = K.conv2d_backward_data(dy, wt, shape[0], *shape[2:])
    ref = K.conv2d_backward_data_ref(dy.astype(cupy.float64), wt.astype(cupy.float64), shape[0], *shape[2:])
    assert _rel(dx, ref) < _GPU_TOL["tf32"]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "tf32"])
def test_gpu_one_by_one_forward_on_an_earlier_packed_input(dtype, poisoned_pool, monkeypatch):
    """A ResNet downsample: a 1x1 stride-2 forward given the x a 3x3 stride-2 forward packed (its KCRS weight is
    then used as its own KRSC pack where the channels need no padding nor TF32 rounding, else packed) equals the
    1x1 forward on x itself, bit for bit, and keeps that same packed x."""
    import cupy

    monkeypatch.setattr(backend.tf32_conv, "allow_tf32", dtype == "tf32")
    dt = backend.float32 if dtype == "tf32" else backend.as_dtype(dtype)
    rng = np.random.default_rng(8)
    # 20 * 1 * 1 would run direct, which packs nothing; fp32's Winograd stride-2 forward packs nothing either
    cfg = ConvConfig(nchw_forward=False, direct=False, winograd=False, conv1x1=False)
    for c in (64, 20):  # no padding; channels padded (16-bit)
        x = cupy.asarray(rng.standard_normal((4, c, 12, 12))).astype(dt)
        w3 = cupy.asarray(rng.standard_normal((96, c, 3, 3))).astype(dt)
        w1 = cupy.asarray(rng.standard_normal((96, c, 1, 1))).astype(dt)
        _, _, packed = K.conv2d_forward(x, w3, None, (2, 2), (1, 1), (1, 1), 1, keep_packed_x=True, config=cfg)
        assert isinstance(packed, K.PackedInput)
        y, _, kept = K.conv2d_forward(x, w1, None, (2, 2), (0, 0), (1, 1), 1, keep_packed_x=True, packed_x=packed,
                                      config=cfg)
        fresh = K.conv2d_forward(x, w1, None, (2, 2), (0, 0), (1, 1), 1, config=cfg)[0]
        assert kept is packed and bool((y == fresh).all()), (dtype, c)
        ref = K.conv2d_forward_ref(x.astype(cupy.float64), w1.astype(cupy.float64), None, (2, 2), (0, 0), (1, 1),
                                   1)[0]
        assert _rel(y, ref) < _GPU_TOL[dtype], (dtype, c)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "tf32"])
def test_gpu_filter_gradient_from_the_forwards_packed_input(dtype, poisoned_pool, monkeypatch):
    """Where the GEMM forward packed x, Conv2d keeps that packed copy instead of x (the filter gradient skips
    packing x again): the gradients are those computed from x itself, bit for bit, and match float64."""
    import cupy

    monkeypatch.setattr(backend.tf32_conv, "allow_tf32", dtype == "tf32")
    dt = backend.float32 if dtype == "tf32" else backend.as_dtype(dtype)
    rng = np.random.default_rng(6)
    geo = ((1, 1), (1, 1), (1, 1), 1)
    x = cupy.asarray(rng.standard_normal((4, 64, 12, 12))).astype(dt)
    wt = cupy.asarray(rng.standard_normal((96, 64, 3, 3))).astype(dt)
    direct = ConvConfig(nchw_forward=False, winograd=False)  # the GEMM forward (fp32's default is Winograd's)
    y, _, packed = K.conv2d_forward(x, wt, None, *geo, keep_packed_x=True, config=direct)
    assert isinstance(packed, K.PackedInput) and packed.shape == x.shape
    dy = cupy.asarray(rng.standard_normal(y.shape)).astype(dt)
    from_x = K.conv2d_backward(dy, x, wt, *geo, need_db=True, config=direct)
    from_packed = K.conv2d_backward(dy, packed, wt, *geo, need_db=True, config=direct)
    for a, b in zip(from_x, from_packed):
        assert bool((a == b).all())
    ref = K.conv2d_backward_ref(dy.astype(cupy.float64), x.astype(cupy.float64), wt.astype(cupy.float64), *geo)
    assert _rel(from_packed[1], ref[1]) < _GPU_TOL[dtype]
    # the op keeps the packed copy, not x, when its forward packs (the default config: TF32 packs; fp16/bf16 run
    # the TMA kernel on packed operands on an sm_90 GPU, else from NCHW at this size, which packs nothing; strict
    # fp32 runs Winograd's transforms, which pack nothing) and the weight wants a gradient
    packs = K.conv2d_forward(x, wt, None, *geo, keep_packed_x=True)[2] is not None
    tma = K.tma_plan(P.ConvMode.FORWARD, dt, x.shape, wt.shape, *geo, cupy.cuda.Device().id, P.DEFAULT_CONFIG)
    assert packs == (dtype == "tf32" or tma is not None)
    by_default = K.conv2d_backward(dy, x, wt, *geo, need_db=True)  # from_x's, or (not packed) Winograd's
    xt = mf.tensor(x, requires_grad=True)
    w_t = mf.tensor(wt, requires_grad=True)
    out = F.conv2d(xt, w_t, padding=1)
    assert len(out._ctx.saved) == (1 if packs else 2) and isinstance(getattr(out._ctx, "x", None), K.PackedInput) == packs
    out.backward(mf.tensor(dy))
    assert bool((w_t.grad._data == by_default[1]).all()) and bool((xt.grad._data == by_default[0]).all())
    frozen = F.conv2d(xt, mf.tensor(wt), padding=1)
    assert len(frozen._ctx.saved) == 2


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_gpu_convolutions_of_one_tensor_share_its_packed_copy(dtype, poisoned_pool, monkeypatch):
    """A residual block's strided 3x3 body and 1x1 projection shortcut read one tape tensor: where both forwards
    pack it, the second takes the first's copy (one copy kept for backward, not two), and outputs and gradients
    are bit for bit those of convolutions that pack their own copies. After an in-place change of the tensor, or
    under another TF32 setting, the second forward packs afresh and computes from the tensor as it is then."""
    import cupy

    dt = backend.as_dtype(dtype)
    # fp32's default forwards here, Winograd's and the strided 1x1 SGEMM, read x unpacked: the direct kernels
    # (which pack) are what this test is about
    monkeypatch.setattr(K, "_GEMM_PATHS", ())
    rng = np.random.default_rng(11)
    xs = cupy.asarray(rng.standard_normal((16, 64, 16, 16))).astype(dt)
    w1s = cupy.asarray(rng.standard_normal((128, 64, 3, 3)) * 0.05).astype(dt)
    w2s = cupy.asarray(rng.standard_normal((128, 64, 1, 1)) * 0.1).astype(dt)
    g1s = cupy.asarray(rng.standard_normal((16, 128, 8, 8))).astype(dt)
    g2s = cupy.asarray(rng.standard_normal((16, 128, 8, 8))).astype(dt)

    def block(separate, change=None):
        leaf, w1, w2 = (mf.tensor(a.copy(), requires_grad=True) for a in (xs, w1s, w2s))
        x = leaf.clone()  # a tape tensor, as a block's input is
        a = F.conv2d(x, w1, stride=2, padding=1)
        if change is not None:
            change(x)
        b = F.conv2d(x.clone() if separate else x, w2, stride=2)
        kept = [getattr(t._ctx, "x", None) for t in (a, b)]  # (the backward frees them)
        (a * mf.tensor(g1s) + b * mf.tensor(g2s)).sum().backward()
        return kept, [t._data for t in (a, b, leaf.grad, w1.grad, w2.grad)]

    (a0, b0), own = block(True)
    (a1, b1), shared = block(False)
    packs = isinstance(a0, K.PackedInput) and isinstance(b0, K.PackedInput) and a0 is not b0
    tma = K.tma_plan(P.ConvMode.FORWARD, dt, xs.shape, w1s.shape, (2, 2), (1, 1), (1, 1), 1, cupy.cuda.Device().id,
                     P.DEFAULT_CONFIG)
    assert packs or tma is None  # the TMA forwards (fp16/bf16 on an H100) both pack
    assert (a1 is not None and a1 is b1) == packs
    for mine, theirs in zip(shared, own):
        assert bool((mine == theirs).all())
    ref = K.conv2d_forward_ref(xs.astype(cupy.float64), w2s.astype(cupy.float64), None, (2, 2), (0, 0), (1, 1), 1)[0]
    assert _rel(shared[1], ref) < _GPU_TOL[dtype]
    # an in-place change between the two forwards: the second reads x as changed, not the first's copy
    (a2, b2), changed = block(False, change=lambda x: F.relu(x, inplace=True))
    assert b2 is not a2 or not packs
    ref = K.conv2d_forward_ref(cupy.maximum(xs, 0).astype(cupy.float64), w2s.astype(cupy.float64), None, (2, 2),
                               (0, 0), (1, 1), 1)[0]
    assert _rel(changed[1], ref) < _GPU_TOL[dtype] and bool((changed[0] == shared[0]).all())
    if packs and dt == backend.float32:  # the second forward under TF32: its operands rounded, so not the first's copy
        (a3, b3), rounded = block(False, change=lambda x: monkeypatch.setattr(backend.tf32_conv, "allow_tf32", True))
        assert b3.tf32 and not a3.tf32
        ref = K.conv2d_forward_ref(xs.astype(cupy.float64), w2s.astype(cupy.float64), None, (2, 2), (0, 0), (1, 1),
                                   1)[0]
        assert _rel(rounded[1], ref) < _GPU_TOL["tf32"]


@pytest.mark.gpu
def test_gpu_batch_beyond_the_grid_z_limit(poisoned_pool):
    """70000 images (more than a grid's 65535 blocks along z, one per image in the packs): forward with
    bias, ReLU and mask, and the backward through that mask, against float64."""
    import cupy

    rng = np.random.default_rng(9)
    n, c, h, w, k = 70000, 8, 3, 3, 8
    x = cupy.asarray(rng.standard_normal((n, c, h, w))).astype(backend.float16)
    wt = cupy.asarray(rng.standard_normal((k, c, 3, 3))).astype(backend.float16)
    b = cupy.asarray(rng.standard_normal(k)).astype(backend.float16)
    geo = ((1, 1), (1, 1), (1, 1), 1)
    y, mask = K.conv2d_forward(x, wt, b, *geo, activation="relu", want_mask=True,
                               config=ConvConfig(nchw_forward=False))
    x64, w64 = x.astype(cupy.float64), wt.astype(cupy.float64)
    ref, mask_ref = K.conv2d_forward_ref(x64, w64, b.astype(cupy.float64), *geo, activation="relu", want_mask=True)
    assert _rel(y, ref) < _GPU_TOL["float16"]
    dy = cupy.asarray(rng.standard_normal(y.shape)).astype(backend.float16)
    dx, dw, db = K.conv2d_backward(dy, x, wt, *geo, mask=mask_ref, need_db=True)
    rx, rw, rb = K.conv2d_backward_ref(dy.astype(cupy.float64), x64, w64, *geo, mask=mask_ref, need_db=True)
    assert _rel(dx, rx) < _GPU_TOL["float16"] and _rel(dw, rw) < _GPU_TOL["float16"]
    assert _rel(db, rb) < _GPU_TOL["float16"]


@pytest.mark.gpu
def test_gpu_backward_filter_is_deterministic():
    import cupy

    rng = np.random.default_rng(5)
    x = cupy.asarray(rng.standard_normal((8, 32, 28, 28))).astype(cupy.float16)
    dy = cupy.asarray(rng.standard_normal((8, 64, 28, 28))).astype(cupy.float16)
    a = K.conv2d_backward_filter(dy, x, (64, 32, 3, 3), (1, 1), (1, 1), (1, 1))
    b = K.conv2d_backward_filter(dy, x, (64, 32, 3, 3), (1, 1), (1, 1), (1, 1))
    assert bool((a == b).all())


@pytest.mark.gpu
def test_gpu_forward_memory():
    """Forward keeps only the output (+ mask); its transient workspace is the NHWC repack of the
    input and weight plus O(tile): nothing like a materialized lowered matrix (R*S times the input)."""
    import cupy

    pool = cupy.get_default_memory_pool()
    rng = np.random.default_rng(0)
    x = T(cupy.asarray(rng.standard_normal((8, 64, 28, 28))).astype(cupy.float16), device="cuda")
    w = T(cupy.asarray(rng.standard_normal((64, 64, 3, 3))).astype(cupy.float16), device="cuda")
    b = T(cupy.asarray(rng.standard_normal(64)).astype(cupy.float16), device="cuda")
    F.conv2d(x, w, b, padding=1)  # compile and warm up
    cupy.cuda.get_current_stream().synchronize()
    pool.free_all_blocks()
    used0, total0 = pool.used_bytes(), pool.total_bytes()
    with mf.no_grad():
        y = F.conv2d(x, w, b, padding=1, activation="relu")
    cupy.cuda.get_current_stream().synchronize()
    grain = 512
    assert pool.used_bytes() - used0 <= y._data.nbytes + grain
    workspace = x._data.nbytes + w._data.nbytes + 4 * grain
    assert pool.total_bytes() - total0 <= y._data.nbytes + workspace
    del y
    w.requires_grad = True
    y = F.conv2d(x, w, b, padding=1, activation="relu")
    mask_bytes = 64 * ((8 * 28 * 28 + 31) // 32) * 4
    # where the forward packed x (the TMA kernel's operand), the op keeps that copy for the filter gradient
    kept = y._ctx.x if isinstance(getattr(y._ctx, "x", None), K.PackedInput) else None
    kept_bytes = 0 if kept is None else kept.array.nbytes
    assert pool.used_bytes() - used0 <= y._data.nbytes + mask_bytes + kept_bytes + 3 * grain


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_gpu_autograd_matches_cpu(dtype, rng):
    dt = backend.as_dtype(dtype)
    xs = rng.standard_normal((2, 5, 9, 9)).astype(dt)
    ws = rng.standard_normal((6, 5, 3, 3)).astype(dt)
    bs = rng.standard_normal(6).astype(dt)
    outs = {}
    for dev in ("cpu", "cuda"):
        x, w, b = T(xs, True, dev), T(ws, True, dev), T(bs, True, dev)
        y = F.conv2d(x, w, b, stride=2, padding=1, activation="relu")
        F.avg_pool2d(y, 2).sum().backward()
        outs[dev] = [backend.to_device(t._data, backend.CPU).astype(np.float64) for t in (y, x.grad, w.grad, b.grad)]
    tol = {"float64": 1e-10, "float32": 1e-5, "float16": 5e-3, "bfloat16": 3e-2}[dtype]
    for a, ref in zip(outs["cuda"], outs["cpu"]):
        assert np.linalg.norm(a - ref) / max(np.linalg.norm(ref), 1e-30) < tol


@pytest.mark.gpu
def test_gpu_matches_torch():
    torch = pytest.importorskip("torch")
    import cupy

    rng = np.random.default_rng(2)
    for (n, c, h, w, k, r, st, pd, dl, g) in [(2, 3, 17, 15, 8, 3, 1, 1, 1, 1), (3, 16, 12, 12, 32, 5, 2, 2, 1, 1),
                                              (1, 8, 20, 20, 8, 3, 1, 2, 2, 2), (4, 33, 9, 11, 17, 1, 1, 0, 1, 1)]:
        xs = rng.standard_normal((n, c, h, w)).astype(np.float32)
        ws = rng.standard_normal((k, c // g, r, r)).astype(np.float32)
        bs = rng.standard_normal(k).astype(np.float32)
        y = F.conv2d(T(cupy.asarray(xs), device="cuda"), T(cupy.asarray(ws), device="cuda"),
                     T(cupy.asarray(bs), device="cuda"), st, pd, dl, g)
        with torch.backends.cudnn.flags(allow_tf32=False):
            ref = torch.nn.functional.conv2d(torch.tensor(xs).cuda(), torch.tensor(ws).cuda(),
                                             torch.tensor(bs).cuda(), st, pd, dl, g).cpu().numpy()
        np.testing.assert_allclose(cupy.asnumpy(y._data), ref, rtol=1e-4, atol=1e-4)


def test_empty_batch_gives_empty_output_and_zero_gradients(device):
    """Batch 0 (e.g. an empty last batch) is not an error, as in PyTorch: the output is (0, K, P, Q)
    and the weight and bias gradients are zeros."""
    m = nn.Conv2d(3, 4, 3, padding=1, activation="relu").to(device)
    x = mf.zeros(0, 3, 7, 5, device=device, requires_grad=True)
    y = m(x)
    assert y.shape == (0, 4, 7, 5)
    y.sum().backward()
    assert x.grad.shape == (0, 3, 7, 5)
    assert float(abs(m.weight.grad).sum().item()) == 0.0 and float(abs(m.bias.grad).sum().item()) == 0.0


def test_filter_gradient_leaves_the_direct_kernel_where_tensor_cores_win():
    """The rule of :func:`conv_plan.direct_filter_gradient`: a ResNet stem's 3 -> 64 channel filter gradient
    runs on the tensor-core GEMM (fp16, bf16, TF32), MNIST's 1 -> 32 direct; strict fp32 stays direct; the
    config forces either way; past the direct kernel's reach (K > 64, C*R*S > 32) never direct."""
    rule = P.direct_filter_gradient
    stem, mnist = (64, 3, 3, 3), (32, 1, 3, 3)
    for dtype in (backend.float16, backend.bfloat16):
        assert not rule(stem, 1, dtype, False, P.DEFAULT_CONFIG) and rule(mnist, 1, dtype, False, P.DEFAULT_CONFIG)
        assert rule(stem, 1, dtype, False, ConvConfig(direct=True))
        assert not rule(mnist, 1, dtype, False, ConvConfig(direct=False))
    assert not rule(stem, 1, backend.float32, True, P.DEFAULT_CONFIG)
    assert rule(stem, 1, backend.float32, False, P.DEFAULT_CONFIG)
    assert not rule((65, 3, 3, 3), 1, backend.float32, False, ConvConfig(direct=True))
    assert not rule((8, 4, 3, 3), 1, backend.float32, False, ConvConfig(direct=True))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_gpu_direct_kernels_short_reduction(dtype, poisoned_pool):
    """C*R*S <= 32 runs on conv_direct.cu: forward (bias, ReLU, mask), filter and bias gradients
    against the float64 reference, over odd sizes: pixel counts not a multiple of 32, K above one
    weight stage (70 > 64: the filter gradient then takes the GEMM path), stride, padding, dilation; by
    default (a ResNet stem's 3 -> 64 channel filter gradient: the GEMM in fp16/bf16), and with the direct
    kernels forced on and off."""
    import cupy

    assert P.is_direct((32, 1, 3, 3), 1) and P.is_direct((8, 2, 4, 4), 1) and not P.is_direct((8, 4, 3, 3), 1)
    dt = backend.as_dtype(dtype)
    tol = _GPU_TOL[dtype]
    rng = np.random.default_rng(21)
    configs = [(5, 1, 28, 28, 32, 3, 3, 1, 0, 1), (1, 1, 7, 5, 1, 3, 3, 1, 1, 1), (3, 3, 11, 9, 70, 3, 3, 2, 1, 1),
               (2, 2, 9, 13, 16, 4, 4, 1, 2, 1), (4, 1, 12, 12, 8, 5, 5, 2, 2, 2), (2, 3, 10, 10, 64, 1, 1, 1, 0, 1),
               (7, 1, 6, 6, 33, 3, 2, 3, 1, 1), (3, 1, 28, 28, 32, 3, 3, 1, 0, 1),  # the first's layer, N=3
               (3, 3, 17, 15, 64, 3, 3, 1, 1, 1)]  # a CIFAR ResNet's stem
    for (n, c, h, w, k, r, s, st, pd, dl), config in itertools.product(
            configs, (P.DEFAULT_CONFIG, ConvConfig(direct=True), ConvConfig(direct=False))):
        geo = ((st, st), (pd, pd), (dl, dl), 1)
        x = cupy.asarray(rng.standard_normal((n, c, h, w))).astype(dt)
        wt = cupy.asarray(rng.standard_normal((k, c, r, s))).astype(dt)
        b = cupy.asarray(rng.standard_normal(k)).astype(dt)
        x64, w64, b64 = x.astype(cupy.float64), wt.astype(cupy.float64), b.astype(cupy.float64)
        y, mask = K.conv2d_forward(x, wt, b, *geo, activation="relu", want_mask=True, config=config)
        ref, _ = K.conv2d_forward_ref(x64, w64, b64, *geo, activation="relu")
        pre, _ = K.conv2d_forward_ref(x64, w64, b64, *geo)
        assert _rel(y, ref) < tol, (n, c, h, w, k, r, s, dtype)
        wrong = (K.unpack_mask(mask, y.shape) != (pre > 0)) & (cupy.abs(pre) > 1e-2 * float(cupy.abs(pre).max()))
        assert int(wrong.sum()) == 0
        dy = cupy.asarray(rng.standard_normal(y.shape)).astype(dt)
        _, dw, db = K.conv2d_backward(dy, x, wt, *geo, mask=mask, need_dx=False, need_db=True, config=config)
        _, rw, rb = K.conv2d_backward_ref(dy.astype(cupy.float64), x64, w64, *geo, mask=mask, need_dx=False,
                                          need_db=True)
        assert _rel(dw, rw) < tol and _rel(db, rb) < tol, (n, c, h, w, k, r, s, dtype)
        _, dw2, db2 = K.conv2d_backward(dy, x, wt, *geo, mask=mask, need_dx=False, need_db=True, config=config)
        assert bool((dw2 == dw).all()) and bool((db2 == db).all())  # fixed-order sums: bitwise repeatable



@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_gpu_direct_forward_pixels_a_thread_same_bits(dtype, poisoned_pool):
    """The direct forward at 1, 2 and 4 pixels a thread (ConvConfig.direct_pixels): each pixel's sums in the same
    order, so the same bits and ReLU mask, C-contiguous and channels-last, over pixel counts not a multiple of a
    block's 256 (every output written: poisoned pool), K above one weight stage; and the reference's values."""
    import cupy

    from minifused.kernels import empty_channels_last

    dt = backend.as_dtype(dtype)
    rng = np.random.default_rng(23)
    for n, c, h, w, k, st in ((3, 3, 17, 15, 64, 1), (5, 1, 28, 28, 32, 1), (2, 3, 9, 11, 72, 2), (1, 2, 5, 3, 8, 1)):
        geo = ((st, st), (1, 1), (1, 1), 1)
        x = cupy.asarray(rng.standard_normal((n, c, h, w))).astype(dt)
        wt = cupy.asarray(rng.standard_normal((k, c, 3, 3))).astype(dt)
        b = cupy.asarray(rng.standard_normal(k)).astype(dt)
        ref, _ = K.conv2d_forward_ref(x.astype(cupy.float64), wt.astype(cupy.float64), b.astype(cupy.float64), *geo,
                                      activation="relu")
        for cl in (False, True):
            xi = x
            if cl:
                xi = empty_channels_last(x.shape, dt)
                xi[...] = x
            runs = [K.conv2d_forward(xi, wt, b, *geo, activation="relu", want_mask=not cl,
                                     config=ConvConfig(direct_pixels=pix)) for pix in (1, 2, 4)]
            for y, mask in runs:
                assert _rel(y, ref) < _GPU_TOL[dtype]
                np.testing.assert_array_equal(cupy.asnumpy(cupy.ascontiguousarray(y)).view(np.uint8),
                                              cupy.asnumpy(cupy.ascontiguousarray(runs[0][0])).view(np.uint8))
                if mask is not None:
                    np.testing.assert_array_equal(cupy.asnumpy(mask), cupy.asnumpy(runs[0][1]))


def _im2col_rows(x, win, step, start, offset, pixels):
    """A NumPy model of one im2col-mode TMA load of the NHWC array ``x``, as the PTX manual describes the mode:
    ``pixels`` rows of x's channels, from the window position ``start`` = (image, h, w) on, each read
    ``offset`` = (h, w) past its position (zeros outside x); positions step by ``step`` through the window
    ``win`` = ((lower h, w), (upper h, w)) (inclusive bounds lower .. side - 1 + upper), row by row, then image
    by image."""
    n, h, w, c = x.shape
    (ly, lx), (uy, ux) = win
    img, py, px = start
    rows = np.zeros((pixels, c))
    for i in range(pixels):
        yy, xx = py + offset[0], px + offset[1]
        if img < n and 0 <= yy < h and 0 <= xx < w:
            rows[i] = x[img, yy, xx]
        px += step[1]
        if px > w - 1 + ux:
            px, py = lx, py + step[0]
            if py > h - 1 + uy:
                py, img = ly, img + 1
    return rows


def _tma_model(g, a, w_taps, n, bm):
    """conv_tma.cu's sums through :func:`_im2col_rows`: tiles of ``bm`` pixels of each class's map, one load per
    live tap from the packed operand ``a`` (NHWC), times the tap's weights ``w_taps[r][s]`` (in, out), written
    to the classes' pixels of the output (n, out channels, subs * map)."""
    (sy, ry, rx), (oh, ow), (ly, lx) = g.steps, g.out, g.win[0]
    out = np.zeros((n, g.cols, g.subs * oh, g.subs * ow))
    m_all = n * oh * ow
    for taps_r, taps_s, oy, ox, r0, s0, y0, x0 in g.classes:
        for m0 in range(0, m_all, bm):
            img, pq = divmod(m0, oh * ow)
            start = (img, ly + pq // ow * sy, lx + pq % ow * g.step[1])
            tile = np.zeros((bm, g.cols))
            for i in range(taps_r):
                for j in range(taps_s):
                    rows = _im2col_rows(a, g.win, g.step, start, (oy + i * ry - ly, ox + j * rx - lx), bm)
                    tile += rows @ w_taps[r0 + i * g.tap_step][s0 + j * g.tap_step]
            for ml in range(min(bm, m_all - m0)):
                img, pq = divmod(m0 + ml, oh * ow)
                out[img, :, y0 + g.subs * (pq // ow), x0 + g.subs * (pq % ow)] = tile[ml]
    return out


@pytest.mark.parametrize("n,c,h,w,k,r,st,pad,dil", [
    (3, 8, 14, 14, 8, 3, 1, 1, 1), (2, 8, 7, 7, 8, 3, 1, 1, 1), (2, 8, 12, 12, 8, 3, 2, 1, 1),
    (2, 8, 10, 28, 8, 3, 1, 1, 1), (2, 8, 11, 9, 8, 3, 2, 1, 1), (3, 8, 6, 6, 8, 1, 2, 0, 1),
    (2, 8, 9, 9, 8, 3, 1, 2, 2), (2, 8, 10, 10, 8, 5, 1, 2, 1), (2, 8, 14, 6, 8, 2, 2, 0, 1),
    (2, 8, 8, 8, 8, 4, 2, 3, 1)])
@pytest.mark.parametrize("bm", [128, 192])
def test_tma_im2col_gathers_match_reference(n, c, h, w, k, r, st, pad, dil, bm):
    """conv_tma's forward and backward-data gathers (its residue classes, im2col windows and tap offsets), run
    through a NumPy model of the TMA unit's im2col loads, equal the float64 reference convolutions; tiles (of
    either row count) cross rows and images, images are not square, strides 1 and 2, dilation, 1x1 to 5x5
    filters."""
    from minifused.kernels.conv_tma import gather

    rng = np.random.default_rng(n * h + w + r)
    geo = ((st, st), (pad, pad), (dil, dil), 1)
    x, wt = rng.standard_normal((n, c, h, w)), rng.standard_normal((k, c, r, r))
    g = gather(P.ConvMode.FORWARD, x.shape, wt.shape, *geo[:3])
    y = _tma_model(g, x.transpose(0, 2, 3, 1), [[wt[:, :, i, j].T for j in range(r)] for i in range(r)], n, bm)
    ref, _ = K.conv2d_forward_ref(x, wt, None, *geo)
    np.testing.assert_allclose(y, ref, atol=1e-9)
    dy = rng.standard_normal(ref.shape)
    g = gather(P.ConvMode.BACKWARD_DATA, x.shape, wt.shape, *geo[:3])
    if st == 2 and (h % 2 or w % 2):
        assert g is None  # residue classes of unequal maps
        return
    dx = _tma_model(g, dy.transpose(0, 2, 3, 1), [[wt[:, :, i, j] for j in range(r)] for i in range(r)], n, bm)
    np.testing.assert_allclose(dx, K.conv2d_backward_data_ref(dy, wt, x.shape, *geo), atol=1e-9)


def test_tma_tile_model():
    """conv_tma's forward / backward-data tile: the model fills the persistent blocks' waves (a 7x7 map of 512
    channels on 192 x 128 tiles: 132 units, one full wave on 132 SMs; a 4x4 map's 2048 pixels on 128 x 64 tiles
    rather than half the SMs idle on wider ones); a config's tile_m / tile_n narrow the choice, and values only
    conv.cu has (64 rows, 32 columns), or a boxed tile where the output is not, leave it to the model."""
    from minifused.kernels.conv_tma import _TILE_RATES, _tile

    assert _tile(128 * 7 * 7, 512, [1], 132, None, None) == (192, 128)
    assert _tile(128 * 4 * 4, 512, [1], 132, None, None) == (128, 64)
    assert _tile(128 * 56 * 56, 64, [1], 132, None, None)[1] == 64  # no column tile wider than the channels
    assert _tile(128 * 7 * 7, 512, [1], 132, 128, None)[0] == 128
    assert _tile(128 * 7 * 7, 512, [1], 132, None, 64)[1] == 64
    assert _tile(128 * 7 * 7, 512, [1], 132, 192, 64) == (192, 64)
    assert _tile(128 * 7 * 7, 512, [1], 132, None, 32) == _tile(128 * 7 * 7, 512, [1], 132, None, None)
    assert _tile(100, 512, [1] * 4, 132, 64, None) in _TILE_RATES
    # 256 x 128 only where the output may go out box by box: one round of 128 units (r18c256h8 at batch 256)
    # where 128 x 128 takes two and 192 x 128 two of 172
    assert _tile(256 * 8 * 8, 256, [36], 132, None, None, boxed=True) == (256, 128)
    assert _tile(256 * 8 * 8, 256, [36], 132, None, None) == (128, 128)
    assert _tile(256 * 8 * 8, 256, [36], 132, 256, None) == (128, 128)  # not boxed: the model's choice


def test_tma_schedule():
    """The persistent blocks' units: equal ones left to the kernels' round-robin (no list); the stride-2
    classes' (4, 2, 2 and 1 taps) each once, longest first onto the least loaded block, which leaves no block
    more than one unit past the mean where a round-robin left a third more."""
    from minifused.kernels.conv_tma import schedule

    assert schedule([3] * 5, 2) == (None, 9)
    table, longest = schedule([2, 1, 2, 1, 1], 2)  # 2 -> block 0, 2 -> 1, then 1 -> 0, 1 -> 1, 1 -> 0
    assert table.tolist() == [0, 3, 5, 0, 1, 4, 2, 3] and longest == 4
    work = [taps * 8 + 1 for taps in (4, 2, 2, 1) for _ in range(134)]  # c256h14s2 at batch 256, 192 x 128 tiles
    blocks = 132
    table, longest = schedule(work, blocks)
    starts, units = table[:blocks + 1], table[blocks + 1:]
    assert sorted(units.tolist()) == list(range(len(work))) and starts[0] == 0 and starts[-1] == len(work)
    loads = [sum(work[u] for u in units[starts[b]:starts[b + 1]]) for b in range(blocks)]
    assert max(loads) == longest <= sum(work) / blocks + max(work)
    round_robin = max(sum(work[b::blocks]) for b in range(blocks))
    assert longest < 0.8 * round_robin


def test_tma_plans_schedule_only_unequal_units(monkeypatch):
    """conv_tma's plans on the host alone (the device's parts stubbed: 132 SMs, no driver): a plan carries a
    schedule, and compiles its kernel with CT_SCHEDULE=1, exactly where its units differ in work (the stride-2
    backward-data's classes); that schedule lists every unit once across the grid's blocks."""
    import sys
    import types

    import minifused.kernels.conv_tma as T
    from minifused.kernels.conv_plan import ConvMode

    defines = []
    monkeypatch.setattr(T, "sm_count", lambda dev: 132)
    monkeypatch.setattr(T, "smem_per_block", lambda dev: 232448)
    monkeypatch.setattr(T, "_encodable", lambda dtype, spec: True)
    monkeypatch.setattr(T, "_map_type", lambda dtype: 0)
    monkeypatch.setattr(T, "Prepared", lambda *a, **k: None)
    monkeypatch.setattr(T, "_kernel", lambda name, dtype, smem, *d, source=None: defines.append(d))
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(asarray=np.asarray))
    plan_fn = T._plan.__wrapped__  # uncached: the stubs' plans stay out of the cache
    scheduled = 0
    for n, c, h, k, st in [(256, 256, 14, 512, 2), (7, 64, 56, 128, 2), (128, 256, 8, 256, 1), (256, 64, 16, 64, 2)]:
        for mode in (ConvMode.FORWARD, ConvMode.BACKWARD_DATA):
            for nhwc, narrow in [(False, False), (True, False), (False, True), (True, True)]:
                plan = plan_fn(mode, np.dtype(np.float16), (n, c, h, h), (k, c, 3, 3), (st, st), (1, 1), (1, 1), 0,
                               None, None, nhwc, narrow)
                if plan is None:
                    continue
                at, units = (int(plan.prm[17]), int(plan.prm[5])) if plan.narrow else (int(plan.prm[19]),
                                                                                        int(plan.prm[7]))
                assert ("-DCT_SCHEDULE=1" in defines[-1]) == (at != 0)
                assert (at != 0) == (mode == ConvMode.BACKWARD_DATA and st == 2)
                if at:
                    scheduled += 1
                    starts, listed = plan.prm[at:at + plan.grid + 1], plan.prm[at + plan.grid + 1:]
                    assert starts[0] == 0 and starts[-1] == units == len(listed)
                    assert sorted(listed.tolist()) == list(range(units))
    assert scheduled >= 8


def test_tma_window_limits():
    """The im2col window: lower corner at the least tap offset, one position per output pixel, and None beyond
    the TMA unit's element strides and corner range."""
    from minifused.kernels.conv_tma import window

    assert window((56, 56), (56, 56), (1, 1), [(-1 + i, -1 + j) for i in range(3) for j in range(3)]) == \
        ((-1, -1), (-1, -1))
    assert window((56, 56), (28, 28), (2, 2), [(-1 + i, -1 + j) for i in range(3) for j in range(3)]) == \
        ((-1, -1), (-2, -2))
    assert window((32, 32), (32, 32), (9, 9), [(0, 0)]) is None  # an element stride the TMA unit lacks
    assert window((400, 400), (200, 200), (1, 1), [(0, 0)]) is None  # a corner past 127
    assert window((8, 8), (8, 8), (1, 1), [(0, 0), (0, 200)]) is None  # a tap offset past 127


@pytest.mark.parametrize("size,r,pad", [(16, 3, 1), (16, 1, 0), (24, 2, 0), (16, 5, 2), (8, 4, 3)])
def test_tma_residue_classes_gather_every_tap_once(size, r, pad):
    """conv_tma's backward-data of stride 2 by residue classes: along one axis, dx[y] of every y gathers dy[p]
    over exactly the taps t with 2p - pad + t == y, 0 <= t < r (dy's range is the TMA unit's zero fill)."""
    from minifused.kernels.conv_tma import _classes

    (sy, ry, _), tap_step, subs, rows = _classes(P.ConvMode.BACKWARD_DATA, (size, size), r, r, (2, 2), (pad, pad),
                                                 (1, 1))
    assert (sy, ry, tap_step, subs, len(rows)) == (1, -1, 2, 2, 4)
    for taps, _, oy, _, r0, _, y0, _ in rows:
        for i in range(size // 2):
            got = sorted((r0 + j * tap_step, i + oy + j * ry) for j in range(taps))
            y = y0 + 2 * i
            want = sorted((t, (y + pad - t) // 2) for t in range(r) if (y + pad - t) % 2 == 0)
            assert got == want, (y, got, want)
    bwd = P.ConvMode.BACKWARD_DATA
    assert _classes(bwd, (15, 16), r, r, (2, 2), (pad, pad), (1, 1)) is None  # classes of unequal rows
    assert _classes(bwd, (16, 13), r, r, (2, 2), (pad, pad), (1, 1)) is None  # classes of unequal columns
    assert _classes(bwd, (16, 16), r, r, (2, 2), (pad, pad), (2, 2)) is None  # dilation
    assert _classes(bwd, (24, 24), r, r, (3, 3), (pad, pad), (1, 1)) is None  # a stride of 3


#: (N, C, H, W, K, R, stride, padding, dilation): conv_tma's tiles (rows of one image, whole images, parts of
#: rows across rows and images, a last tile past the batch), NCHW stores of runs of 8, 4, 2 and 1 pixels,
#: strides 1 and 2 (2x2 filters: one tap per residue class; classes of 14x14 and 7x7 maps), 1x1 and dilated
#: taps, images that are not square, column tiles of 64 and 128 and a partial one, and grids of more than one
#: tile per block (the NCHW tiles then go out through the TMA unit)
def _narrow_dgrad(c, h, w, st):
    """Whether conv_tma_narrow.cu takes a backward-data onto c channels of h x w (channels multiples of 64, the
    TMA's rule): at most 64 channels; at stride 1 images of whole boxes of 64 pixels; at stride 2 (h, w even) as
    many whole rows of a class's map as a unit's 192 pixels take, filling at least 128 of them."""
    if c > 64:
        return False
    if st == 1:
        return h * w % 64 == 0
    return st == 2 and 192 // (w // 2) * (w // 2) >= 128


_TMA_CASES = [(3, 64, 32, 32, 64, 3, 1, 1, 1), (5, 128, 16, 16, 128, 3, 2, 1, 1), (7, 64, 8, 8, 192, 1, 1, 0, 1),
              (2, 128, 4, 4, 256, 3, 1, 1, 1), (4, 64, 16, 16, 64, 3, 1, 2, 2), (4, 64, 16, 16, 128, 1, 2, 0, 1),
              (40, 64, 16, 16, 320, 3, 1, 1, 1), (3, 192, 8, 8, 64, 3, 2, 1, 1), (2, 64, 32, 32, 64, 3, 2, 1, 1),
              (3, 64, 16, 16, 64, 2, 2, 0, 1), (2, 64, 56, 56, 64, 3, 1, 1, 1), (3, 64, 14, 14, 128, 3, 1, 1, 1),
              (3, 128, 7, 7, 64, 3, 1, 1, 1), (2, 64, 28, 28, 128, 3, 2, 1, 1), (3, 64, 14, 14, 64, 3, 2, 1, 1),
              (2, 64, 10, 28, 64, 3, 1, 1, 1), (2, 64, 11, 9, 64, 3, 2, 1, 1), (5, 64, 3, 5, 64, 3, 1, 1, 1),
              (2, 64, 18, 18, 64, 5, 2, 2, 1), (9, 64, 56, 56, 64, 3, 1, 1, 1), (151, 64, 8, 8, 192, 1, 1, 0, 1),
              (3, 128, 28, 28, 64, 3, 2, 1, 1)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gpu_tma_kernel_matches_reference(dtype, poisoned_pool):
    """On an sm_90 GPU the forward (bias and ReLU fused, no mask), the backward-data (a stride of 2 as residue
    classes, a 1x1 filter's with classes of no taps) and the filter gradient of the shapes conv_tma takes run
    on it (its plans exist) and match the float64 reference, written NCHW and channels-last; a ReLU mask takes
    conv.cu. Tiles go out through the TMA unit where the plan says so: always channels-last (the stride-2 classes'
    where whole rows of a class's map fill 3/4 of a tile), NCHW where an image is whole boxes of 64 pixels (tiles
    that span images, a last tile past the batch, a last half-tile wholly past it and partial column tiles among
    the cases)."""
    import cupy

    from minifused.kernels import sm_count, smem_per_block, to_channels_last
    from minifused.kernels.conv_tma import tma_plan, tma_wgrad_plan

    if cupy.cuda.Device().compute_capability != "90":
        pytest.skip("the TMA kernel needs an sm_90 GPU")
    dt, tol = getattr(backend, dtype), _GPU_TOL[dtype]
    dev = cupy.cuda.Device().id
    rng = np.random.default_rng(5)
    for (n, c, h, w, k, r, st, pad, dil) in _TMA_CASES:
        geo = ((st, st), (pad, pad), (dil, dil), 1)
        plan = tma_plan(P.ConvMode.FORWARD, dt, (n, c, h, w), (k, c, r, r), *geo, dev, P.DEFAULT_CONFIG)
        assert plan is not None, (n, c, h, w, k, r, st)
        assert plan.smem <= smem_per_block(dev)  # the ring as deep as the block's shared memory takes
        x = cupy.asarray(rng.standard_normal((n, c, h, w))).astype(dt)
        wt = cupy.asarray(rng.standard_normal((k, c, r, r)) / (c * r * r) ** 0.5).astype(dt)
        b = cupy.asarray(rng.standard_normal(k)).astype(dt)
        x64, w64, b64 = (a.astype(cupy.float64) for a in (x, wt, b))
        y, mask = K.conv2d_forward(x, wt, b, *geo, activation="relu")
        ref, _ = K.conv2d_forward_ref(x64, w64, b64, *geo, activation="relu")
        assert mask is None and _rel(y, ref) < tol, (n, c, h, w, k, r, st)
        ohw, bm = y.shape[2] * y.shape[3], plan.a_map[5]  # the tile's rows: the im2col map's pixels
        waves = -(-n * ohw // bm) * -(-k // plan.b_map[3][1]) > sm_count(dev)  # a block takes more than one tile
        # onto 64 channels or fewer the narrow kernel, its tiles always through the TMA unit (NCHW: images of
        # whole boxes of 64 pixels)
        assert plan.narrow == (k <= 64 and ohw % 64 == 0), (n, c, h, w, k, r, st)
        assert (plan.out_map is not None) == (plan.narrow or (ohw % 64 == 0 and waves and bm == 128)), \
            (n, c, h, w, k, r, st)
        cl_plan = tma_plan(P.ConvMode.FORWARD, dt, (n, c, h, w), (k, c, r, r), *geo, dev, P.DEFAULT_CONFIG,
                           nhwc_out=True)
        assert cl_plan is not None and cl_plan.out_map is not None and cl_plan.narrow == plan.narrow
        ycl, _ = K.conv2d_forward(to_channels_last(x), wt, b, *geo, activation="relu")
        assert ycl.strides[1] == ycl.itemsize and _rel(ycl, ref) < tol, ("channels-last", n, c, h, w, k, r, st)
        y, mask = K.conv2d_forward(x, wt, b, *geo, activation="relu", want_mask=True)  # conv.cu's epilogue
        ref, ref_mask = K.conv2d_forward_ref(x64, w64, b64, *geo, activation="relu", want_mask=True)
        assert _rel(y, ref) < tol and mask.shape == ref_mask.shape
        dy = cupy.asarray(rng.standard_normal(y.shape)).astype(dt)
        dx = K.conv2d_backward_data(dy, wt, x.shape, *geo)
        rdx = K.conv2d_backward_data_ref(dy.astype(cupy.float64), w64, x.shape, *geo)
        assert _rel(dx, rdx) < tol, ("dgrad", n, c, h, w, k, r, st)
        dplan = tma_plan(P.ConvMode.BACKWARD_DATA, dt, (n, c, h, w), (k, c, r, r), *geo, dev, P.DEFAULT_CONFIG)
        assert (dplan is not None) == (k % 64 == 0 and (st == 1 or (dil == 1 and h % 2 == w % 2 == 0))), \
            (n, c, h, w, k, r, st)
        if dplan is not None:  # the stride-2 classes interleave: conv_tma's units store them as before
            bm = dplan.a_map[5]
            waves = -(-n * h * w // bm) * -(-c // dplan.b_map[3][1]) > sm_count(dev)
            assert dplan.narrow == _narrow_dgrad(c, h, w, st), (n, c, h, w, st)
            assert (dplan.out_map is not None) == (dplan.narrow or (st == 1 and h * w % 64 == 0 and waves
                                                                    and bm == 128)), (n, c, h, w, st)
            dxc = K.conv2d_backward_data(to_channels_last(dy), wt, x.shape, *geo)
            assert dxc.strides[1] == dxc.itemsize and _rel(dxc, rdx) < tol, ("dgrad channels-last", n, c, h, w)
            cplan = tma_plan(P.ConvMode.BACKWARD_DATA, dt, x.shape, wt.shape, *geo, dev, P.DEFAULT_CONFIG,
                             nhwc_out=True)
            if st == 2 and not cplan.narrow:  # channels-last classes: a unit is one class's whole rows of its map,
                bm, ow = (cplan.threads - 128) // 2, w // 2  # stored by the TMA unit where they fill 3/4 of a tile
                assert (cplan.out_map is not None) == (4 * (bm // ow) * ow >= 3 * bm), (n, c, h, w, st)
                assert cplan.out_map is None or cplan.a_map[5] == bm // ow * ow, (n, c, h, w, st)
        assert tma_wgrad_plan(dt, x.shape, wt.shape, *geo, dev, P.DEFAULT_CONFIG) is not None
        dw = K.conv2d_backward_filter(dy, x, wt.shape, *geo)
        rdw = K.conv2d_backward_filter_ref(dy.astype(cupy.float64), x64, wt.shape, *geo)
        assert _rel(dw, rdw) < tol, ("wgrad", n, c, h, w, k, r, st)
    off = ConvConfig(tma=False)
    assert tma_plan(P.ConvMode.FORWARD, dt, (3, 64, 32, 32), (64, 64, 3, 3), (1, 1), (1, 1), (1, 1), 1, dev, off) \
        is None


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gpu_tma_narrow_kernel_matches_reference(dtype, poisoned_pool):
    """conv_tma_narrow.cu (onto at most 64 output channels, the GEMM transposed) takes the forward and the
    backward-data by default where it applies: output images of whole boxes of 64 pixels, NCHW or channels-last; a
    stride-2 backward-data as residue classes, units of whole rows of a class's map (NCHW: written channels-last and
    transposed). Forward (bias, ReLU) and backward-data match the float64 reference and conv_tma.cu's results (the
    narrow kernel turned off), NCHW and channels-last: fewer than 64 channels (rows past them are zeros the
    unit leaves out), units past the batch, dilated, strided, 1x1 and 5x5 taps, classes without taps (a 1x1
    filter's zeros), class rows that leave a unit's last columns unused or the last unit part-empty, 28-wide class
    maps on the kernel of 168 columns, and grids of several units per block, which the two MMA warpgroups take in
    turns."""
    import cupy

    from minifused.kernels import sm_count, to_channels_last
    from minifused.kernels.conv_tma import NARROW_PIXELS, tma_plan

    if cupy.cuda.Device().compute_capability != "90":
        pytest.skip("the TMA kernel needs an sm_90 GPU")
    dt, tol, dev = getattr(backend, dtype), _GPU_TOL[dtype], cupy.cuda.Device().id
    off = ConvConfig(tma_narrow=False)
    rng = np.random.default_rng(23)
    for (n, c, h, w, k, r, st, pad, dil) in [(3, 64, 32, 32, 64, 3, 1, 1, 1), (2, 128, 16, 16, 32, 3, 1, 1, 1),
                                             (5, 64, 16, 16, 64, 3, 1, 2, 2), (4, 64, 16, 16, 48, 1, 2, 0, 1),
                                             (32, 64, 56, 56, 64, 3, 1, 1, 1), (3, 64, 24, 16, 64, 5, 1, 2, 1),
                                             (7, 192, 8, 8, 64, 3, 1, 1, 1), (3, 64, 14, 14, 64, 3, 2, 1, 1),
                                             (5, 32, 28, 28, 64, 3, 2, 1, 1), (37, 64, 56, 56, 128, 1, 2, 0, 1),
                                             (64, 64, 32, 32, 128, 3, 2, 1, 1), (3, 48, 18, 26, 128, 3, 2, 1, 1),
                                             (3, 48, 56, 56, 128, 3, 2, 1, 1)]:
        geo = ((st, st), (pad, pad), (dil, dil), 1)
        x = cupy.asarray(rng.standard_normal((n, c, h, w))).astype(dt)
        wt = cupy.asarray(rng.standard_normal((k, c, r, r)) / (c * r * r) ** 0.5).astype(dt)
        b = cupy.asarray(rng.standard_normal(k)).astype(dt)
        x64, w64, b64 = (a.astype(cupy.float64) for a in (x, wt, b))
        ref, _ = K.conv2d_forward_ref(x64, w64, b64, *geo, activation="relu")
        ohw = ref.shape[2] * ref.shape[3]
        for nhwc in (False, True) if c % 64 == 0 else ():  # (x's channels in whole boxes: the TMA's forward)
            plan = tma_plan(P.ConvMode.FORWARD, dt, x.shape, wt.shape, *geo, dev, P.DEFAULT_CONFIG, nhwc_out=nhwc)
            assert plan.narrow == (k <= 64 and ohw % 64 == 0), (n, c, h, w, k, nhwc)
            assert not tma_plan(P.ConvMode.FORWARD, dt, x.shape, wt.shape, *geo, dev, off, nhwc_out=nhwc).narrow
            xin = to_channels_last(x) if nhwc else x
            y, _ = K.conv2d_forward(xin, wt, b, *geo, activation="relu")
            y_off, _ = K.conv2d_forward(xin, wt, b, *geo, activation="relu", config=off)
            assert _rel(y, ref) < tol and _rel(y, y_off.astype(cupy.float64)) < tol, ("forward", n, c, h, w, k, nhwc)
        if n == 32:  # several units a block: both MMA warpgroups at work
            assert -(-n * ohw // NARROW_PIXELS) > 2 * sm_count(dev)
        if not _narrow_dgrad(c, h, w, st) or k % 64:
            continue
        dy = cupy.asarray(rng.standard_normal(ref.shape)).astype(dt)
        rdx = K.conv2d_backward_data_ref(dy.astype(cupy.float64), w64, x.shape, *geo)
        if st == 2 and n > 32:  # several units of each class a block: the classes' turns and zeros past them
            assert 4 * -(-n * (h // 2) // (192 // (w // 2))) > 2 * sm_count(dev)
        for nhwc in (False, True):
            dplan = tma_plan(P.ConvMode.BACKWARD_DATA, dt, x.shape, wt.shape, *geo, dev, P.DEFAULT_CONFIG,
                             nhwc_out=nhwc)
            assert dplan.narrow and dplan.nchw_via_nhwc == (st == 2 and not nhwc), (n, c, h, w, k, nhwc)
            # 28-wide class maps: 6 rows, a kernel of 168 columns
            assert ("-DCT_PIX=168" in dplan.kern.options) == (st == 2 and w == 56), (n, c, h, w, k, nhwc)
            dyin = to_channels_last(dy) if nhwc else dy
            dx = K.conv2d_backward_data(dyin, wt, x.shape, *geo)
            dx_off = K.conv2d_backward_data(dyin, wt, x.shape, *geo, config=off)
            assert _rel(dx, rdx) < tol and _rel(dx, dx_off.astype(cupy.float64)) < tol, ("dgrad", n, c, h, w, nhwc)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("tile", [(128, 64), (128, 128), (192, 64), (192, 128), (256, 128)])
def test_gpu_tma_tiles_match_reference(dtype, tile, poisoned_pool):
    """Each tile conv_tma's model may pick, forced by the config (three MMA warpgroups for 192 rows, four for 256,
    whose tiles, channels-last of one class a unit only, go out one box at a time; columns 64 or 128): the
    forward (bias, ReLU) and the backward-data, NCHW and channels-last, match the float64 reference, and the
    backward-data of a channels-last weight read as it is gives the packed weights' bits; partial row and column
    tiles, strides 1 and 2 (the residue classes; channels-last, a class's tiles of whole
    rows of its map that leave the tile's last rows unused), NCHW tiles through the TMA unit (several tiles a block)
    and a last tile past the batch among the cases."""
    import cupy

    from minifused.kernels import to_channels_last
    from minifused.kernels.conv_tma import _BOXED_TILES, tma_plan

    if cupy.cuda.Device().compute_capability != "90":
        pytest.skip("the TMA kernel needs an sm_90 GPU")
    dt, tol, dev = getattr(backend, dtype), _GPU_TOL[dtype], cupy.cuda.Device().id
    config = ConvConfig(tile_m=tile[0], tile_n=tile[1])
    boxed = tile in _BOXED_TILES
    rng = np.random.default_rng(17)
    for (n, c, h, w, k, r, st, pad) in [(3, 64, 32, 32, 64, 3, 1, 1), (5, 128, 16, 16, 128, 3, 2, 1),
                                        (2, 128, 4, 4, 256, 3, 1, 1), (40, 64, 16, 16, 320, 3, 1, 1),
                                        (3, 64, 14, 14, 128, 3, 1, 1), (9, 64, 56, 56, 64, 3, 1, 1),
                                        (151, 64, 8, 8, 192, 1, 1, 0), (2, 64, 11, 9, 64, 3, 2, 1),
                                        (4, 64, 28, 28, 128, 3, 2, 1)]:
        geo = ((st, st), (pad, pad), (1, 1), 1)
        plan = tma_plan(P.ConvMode.FORWARD, dt, (n, c, h, w), (k, c, r, r), *geo, dev, config, nhwc_out=boxed)
        assert plan is not None and (plan.a_map[5], plan.b_map[3][1]) == tile, (n, c, h, w, k)
        assert plan.threads == 128 + 2 * tile[0], (n, c, h, w, k)  # a warpgroup per 64 rows, and the producer's
        x = cupy.asarray(rng.standard_normal((n, c, h, w))).astype(dt)
        wt = cupy.asarray(rng.standard_normal((k, c, r, r)) / (c * r * r) ** 0.5).astype(dt)
        b = cupy.asarray(rng.standard_normal(k)).astype(dt)
        x64, w64, b64 = (a.astype(cupy.float64) for a in (x, wt, b))
        ref, _ = K.conv2d_forward_ref(x64, w64, b64, *geo, activation="relu")
        for xin in (x, to_channels_last(x)):
            y, _ = K.conv2d_forward(xin, wt, b, *geo, activation="relu", config=config)
            assert _rel(y, ref) < tol, ("forward", tile, n, c, h, w, k, r, st, xin.strides)
        dy = cupy.asarray(rng.standard_normal(ref.shape)).astype(dt)
        rdx = K.conv2d_backward_data_ref(dy.astype(cupy.float64), w64, x.shape, *geo)
        for dyin in (dy, to_channels_last(dy)):
            dx = K.conv2d_backward_data(dyin, wt, x.shape, *geo, config=config)
            assert _rel(dx, rdx) < tol, ("backward-data", tile, n, c, h, w, k, r, st, dyin.strides)
        # a channels-last weight read as it is (operand B MN-major from its KRSC memory) wherever the kernel takes
        # the backward-data (not the stride 2 of odd sides): the packed weights' bits
        packed, krsc = (tma_plan(P.ConvMode.BACKWARD_DATA, dt, x.shape, wt.shape, *geo, dev, config, nhwc_out=True,
                                 b_krsc=b_krsc) for b_krsc in (False, True))
        assert (krsc is None) == (packed is None) == (h % 2 == 1 and st == 2), (n, c, h, w, k, r, st)
        assert krsc is None or krsc.b_krsc, (n, c, h, w, k, r, st)
        dxk = K.conv2d_backward_data(to_channels_last(dy), to_channels_last(wt), x.shape, *geo, config=config)
        assert dxk.strides == dx.strides and cupy.array_equal(dxk, dx), ("KRSC weight", tile, n, c, h, w, k, r, st)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gpu_tma_wgrad_split_counts_match_reference(dtype, poisoned_pool):
    """The TMA filter gradient at the split counts a config asks for (one split, a few, more than the pixels'
    chunks of WGRAD_PIXELS: capped at one per chunk) matches the float64 reference: the splits' fp32 partials
    cover the pixels once each, whatever their count (a last chunk partly past the pixels, chunks across images,
    chunks that start mid-row and mid-image: the producer steps each chunk's first pixel by additions)."""
    import cupy

    from minifused.kernels.conv_tma import WGRAD_PIXELS, tma_wgrad_plan

    if cupy.cuda.Device().compute_capability != "90":
        pytest.skip("the TMA kernel needs an sm_90 GPU")
    dt, tol, dev = getattr(backend, dtype), _GPU_TOL[dtype], cupy.cuda.Device().id
    rng = np.random.default_rng(13)
    for (n, c, h, w, k, r, st, pad) in [(3, 64, 16, 16, 64, 3, 1, 1), (2, 128, 8, 8, 192, 3, 2, 1),
                                        (4, 64, 8, 8, 128, 1, 1, 0), (7, 64, 10, 10, 64, 3, 1, 1),
                                        (5, 64, 12, 12, 128, 3, 2, 1)]:
        geo = ((st, st), (pad, pad), (1, 1), 1)
        p = K.out_size(h, r, st, pad, 1)
        chunks = -(-n * p * p // WGRAD_PIXELS)
        x = cupy.asarray(rng.standard_normal((n, c, h, w))).astype(dt)
        dy = cupy.asarray(rng.standard_normal((n, k, p, p))).astype(dt)
        ref = K.conv2d_backward_filter_ref(dy.astype(cupy.float64), x.astype(cupy.float64), (k, c, r, r), *geo)
        for splits, rows in itertools.product((1, 2, 5, chunks + 3), (64, 128) if k > 64 else (None,)):
            config = ConvConfig(wgrad_splits=splits, wgrad_rows=rows)
            plan = tma_wgrad_plan(dt, x.shape, (k, c, r, r), *geo, dev, config)
            assert plan is not None and plan.splits <= min(splits, chunks), (splits, chunks, plan.splits)
            assert plan.wgrad_tiles[0] == (rows or 64), plan
            dw = K.conv2d_backward_filter(dy, x, (k, c, r, r), *geo, config=config)
            assert _rel(dw, ref) < tol, (dtype, splits, rows, n, c, h, w, k, r, st)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gpu_tma_wgrad_unsplit_writes_dw_as_wgrad_reduce(dtype, poisoned_pool):
    """The TMA filter gradient of one split writes a KRSC dW itself: bitwise what its fp32 partials summed
    (cast) by wgrad_reduce give, on 64- and 128-row tiles (both on over 64 output channels), a partial row tile
    and partial column tiles;
    conv2d_backward_filter (NCHW: KCRS through wgrad_reduce_kcrs, a 1x1 filter's written directly; channels-last
    with a channels-last weight: KRSC) gives those bits at one split and wgrad_reduce's sum of the partials at
    more (a few, one per chunk of WGRAD_PIXELS)."""
    import cupy

    from minifused.kernels import to_channels_last
    from minifused.kernels.conv_tma import WGRAD_PIXELS, launch_tma_wgrad, tma_wgrad_plan, wgrad_partials

    if cupy.cuda.Device().compute_capability != "90":
        pytest.skip("the TMA kernel needs an sm_90 GPU")
    dt, tol, dev = getattr(backend, dtype), _GPU_TOL[dtype], cupy.cuda.Device().id
    reduce = P.util_kernel(np.dtype(dt), "wgrad_reduce")
    rng = np.random.default_rng(31)
    for (n, c, h, w, k, r, st, pad) in [(3, 64, 16, 16, 64, 3, 1, 1), (2, 128, 8, 8, 192, 3, 2, 1),
                                        (4, 64, 8, 8, 128, 1, 1, 0), (5, 192, 6, 6, 256, 3, 1, 1)]:
        geo = ((st, st), (pad, pad), (1, 1), 1)
        p = K.out_size(h, r, st, pad, 1)
        chunks = -(-n * p * p // WGRAD_PIXELS)
        x = cupy.asarray(rng.standard_normal((n, c, h, w))).astype(dt)
        dy = cupy.asarray(rng.standard_normal((n, k, p, p))).astype(dt)
        xc, dyc = to_channels_last(x), to_channels_last(dy)  # with 64-multiple channels: the packed operands
        ref = K.conv2d_backward_filter_ref(dy.astype(cupy.float64), x.astype(cupy.float64), (k, c, r, r), *geo)
        for splits, rows in itertools.product((1, 2, 5, chunks), (64, 128) if k > 64 else (None,)):
            config = ConvConfig(wgrad_splits=splits, wgrad_rows=rows)
            plan = tma_wgrad_plan(dt, x.shape, (k, c, r, r), *geo, dev, config)
            stride, nbytes = wgrad_partials(k, r * r * c, plan.wgrad_tiles, plan.splits)
            ws = cupy.empty(nbytes // 4, cupy.float32)
            launch_tma_wgrad(plan, dyc.data.ptr, xc.data.ptr, 0, ws=ws.data.ptr)
            want = cupy.empty((k, c, r, r), dt)
            reduce((64,), (256,), (ws, want, *P.ints(plan.splits, k, c, r * r, c, 0, *plan.wgrad_tiles, 0),
                                   np.int64(stride)))
            want = want.get().astype(np.float64)
            if plan.splits == 1:
                own = cupy.empty((k, r, r, c), dt)
                launch_tma_wgrad(plan, dyc.data.ptr, xc.data.ptr, own.data.ptr)
                own = own.transpose(0, 3, 1, 2)
                assert np.array_equal(own.get().astype(np.float64), want), (dtype, n, c, h, k, r, st)
            dw = K.conv2d_backward_filter(dy, x, (k, c, r, r), *geo, config=config)
            assert np.array_equal(dw.get().astype(np.float64), want), (dtype, splits, n, c, h, k, r, st)
            dwc = K.conv2d_backward_filter(dyc, xc, (k, c, r, r), *geo, config=config, channels_last_weight=True)
            assert dwc.strides[1] == dwc.itemsize, (splits, n, c, h, k, r, st)  # KRSC memory
            assert np.array_equal(dwc.get().astype(np.float64), want), (dtype, splits, n, c, h, k, r, st)
            assert _rel(dw, ref) < tol, (dtype, splits, n, c, h, w, k, r, st)


def test_wgrad_schedule_covers_each_chunk_once():
    """conv_tma_wgrad's schedule (:func:`_wgrad_schedule`), decoded as the kernel decodes its units: every
    tile's chunks are summed once each, a whole tile's split z (split 0 alone where unsplit) from chunk z * its per
    on, a split tile's split z from chunk z * per on; whole waves of whole tiles (unsplit, or each split a divisor
    of the SMs' ways, so that every tile's units share a round) and one more of the rest's splits (where that
    models faster), else every tile split alike (as a config's count asks, capped at one per chunk). Every unit's
    fp32 partials (an unsplit whole tile's as split 0's) land where no other unit's do, inside the workspace that
    :func:`wgrad_partials` sizes, which for ResNet's 512-channel 3x3 filters at batch 128 (132 whole tiles, 12 in 8
    splits) is 2.75 planes of dW, not 8."""
    from minifused.kernels.conv_tma import _wgrad_schedule, wgrad_partials

    sms = 132
    for tiles, chunks, forced in [(144, 49, None), (144, 16, None), (144, 8, None), (36, 196, None),
                                  (9, 784, None), (5, 3136, None), (264, 40, None), (300, 3, None),
                                  (72, 49, None), (72, 16, None), (200, 49, None), (100, 30, None),
                                  (144, 49, 3), (144, 49, 100), (7, 5, 2)]:
        flops, part = 2.0 * 128 * 128 * 128 * tiles * chunks, 128 * 128 * 4 * tiles
        whole, whole_splits, splits, per = _wgrad_schedule(tiles, chunks, sms, flops, part, forced)
        whole_per, rest = -(-chunks // whole_splits), tiles - whole
        units = whole * whole_splits + rest * splits
        seen = np.zeros((tiles, chunks), int)
        rounds = np.zeros(tiles, int) - 1
        n_tiles = max(d for d in range(1, 41) if tiles % d == 0)  # (tiles of 64 x 128 in rows of n_tiles)
        k, ncol = tiles // n_tiles * 64, n_tiles * 128
        stride, nbytes = wgrad_partials(k, ncol, (64, n_tiles, whole, whole_splits), splits)
        written = np.zeros(nbytes // 4, int)
        for unit in range(units):  # conv_tma.cu's Work::of
            if unit < whole * whole_splits:
                tile, split = divmod(unit, whole_splits)
                begin, end = split * whole_per, min(chunks, split * whole_per + whole_per)
                assert rounds[tile] in (-1, unit // sms), (tiles, chunks, unit)  # a whole tile's units: one round
                rounds[tile] = unit // sms
            else:
                split, tile = divmod(unit - whole * whole_splits, rest)
                tile += whole
                begin, end = split * per, min(chunks, split * per + per)
            assert split < (whole_splits if tile < whole else splits) and begin < end, (tiles, chunks, unit)
            seen[tile, begin:end] += 1
            k0, col0 = tile // n_tiles * 64, tile % n_tiles * 128  # conv_tma.cu's partials of the unit's tile
            at = split * stride + (k0 + np.arange(64))[:, None] * ncol + col0 + np.arange(128)
            assert at.max() < written.size, (tiles, chunks, forced, unit)
            written[at] += 1
        assert (seen == 1).all(), (tiles, chunks, forced, whole, whole_splits, splits, per)
        assert written.max() == 1, (tiles, chunks, forced, whole, whole_splits, splits)
        if forced is not None:
            assert whole == 0 and whole_splits == 1 and splits == -(-chunks // per)
            assert per == -(-chunks // min(forced, chunks))
        if whole:
            assert sms % whole_splits == 0 and whole * whole_splits % sms == 0, (tiles, chunks, whole, whole_splits)
            assert 0 <= rest * splits <= sms and (rest > 0 or whole_splits > 1), (tiles, chunks, whole, splits)
    # ResNet's 512-channel 3x3 layers (144 tiles of 128 x 128 on 132 SMs) take the whole waves, unsplit
    assert _wgrad_schedule(144, 49, sms, 2.0 * 512 * 4608 * 6272, 512 * 4608 * 4)[:2] == (132, 1)
    assert wgrad_partials(512, 4608, (128, 36, 132, 1), 8) == (512 * 4608 // 4, 512 * 4608 * 4 * 11 // 4)
    # c256h14s2's 72 tiles in 3 splits would leave two rounds, the second 84 units: 44 tiles in 3, then 28 in 4
    assert _wgrad_schedule(72, 49, sms, 2.0 * 512 * 2304 * 6272, 512 * 2304 * 4) == (44, 3, 4, 13)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gpu_tma_wgrad_whole_tiles_match_reference(dtype, poisoned_pool):
    """More tiles than SMs (144 tiles of 128 x 128: 512 x 512 channels 3x3, 1152 x 2048 1x1): whole waves of whole
    tiles, the rest split. dW KCRS (3x3: all partials, summed by wgrad_reduce) and KRSC (a channels-last weight's,
    or 1x1: the whole tiles written by the kernel, the rest summed) match the float64 reference."""
    import cupy

    from minifused.kernels import sm_count, to_channels_last
    from minifused.kernels.conv_tma import tma_wgrad_plan

    if cupy.cuda.Device().compute_capability != "90":
        pytest.skip("the TMA kernel needs an sm_90 GPU")
    dt, tol, dev = getattr(backend, dtype), _GPU_TOL[dtype], cupy.cuda.Device().id
    tiles = 144
    if tiles <= sm_count(dev) or tiles % sm_count(dev) == 0:
        pytest.skip("needs fewer SMs than the layers' 144 tiles, and not a divisor of them")
    rng = np.random.default_rng(41)
    for n, c, h, k, r in [(64, 512, 8, 512, 3), (16, 2048, 8, 1152, 1)]:
        geo = ((1, 1), (r // 2, r // 2), (1, 1), 1)
        plan = tma_wgrad_plan(dt, (n, c, h, h), (k, c, r, r), *geo, dev, P.DEFAULT_CONFIG)
        assert plan.wgrad_tiles == (128, r * r * c // 128, tiles // sm_count(dev) * sm_count(dev), 1), plan
        assert plan.splits > 1, plan
        x = cupy.asarray(rng.standard_normal((n, c, h, h))).astype(dt)
        dy = cupy.asarray(rng.standard_normal((n, k, h, h))).astype(dt)
        ref = K.conv2d_backward_filter_ref(dy.astype(cupy.float64), x.astype(cupy.float64), (k, c, r, r), *geo)
        dw = K.conv2d_backward_filter(dy, x, (k, c, r, r), *geo)
        assert _rel(dw, ref) < tol, (dtype, r)
        dwc = K.conv2d_backward_filter(to_channels_last(dy), to_channels_last(x), (k, c, r, r), *geo,
                                       channels_last_weight=True)
        assert dwc.strides[1] == dwc.itemsize and _rel(dwc, ref) < tol, (dtype, r)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gpu_tma_wgrad_split_whole_tiles_match_reference(dtype, poisoned_pool):
    """Whole waves of whole tiles each split a few ways, then the rest in more splits (c256h14s2 on 128-row
    tiles: 72 tiles of 128 x 128 on 132 SMs, 44 in 3 splits, 28 in 4): every partial summed by wgrad_reduce,
    into KCRS (NCHW) and KRSC (a channels-last weight's) dW alike, bit for bit, matching the float64 reference; the
    plain schedule (every tile in 3 splits) gives the same to rounding."""
    import cupy

    from minifused.kernels import sm_count, to_channels_last
    from minifused.kernels.conv_tma import tma_wgrad_plan

    if cupy.cuda.Device().compute_capability != "90":
        pytest.skip("the TMA kernel needs an sm_90 GPU")
    dt, tol, dev = getattr(backend, dtype), _GPU_TOL[dtype], cupy.cuda.Device().id
    n, c, h, k, r = 128, 256, 14, 512, 3
    geo, w_shape = ((2, 2), (1, 1), (1, 1), 1), (k, c, r, r)
    config = ConvConfig(wgrad_rows=128)
    plan = tma_wgrad_plan(dt, (n, c, h, h), w_shape, *geo, dev, config)
    if sm_count(dev) != 132:
        pytest.skip("the schedule asserted is the one of 132 SMs")
    assert plan.wgrad_tiles == (128, 18, 44, 3) and plan.splits == 4 and plan.fixup == 0, plan
    rng = np.random.default_rng(47)
    x = cupy.asarray(rng.standard_normal((n, c, h, h))).astype(dt)
    dy = cupy.asarray(rng.standard_normal((n, k, 7, 7))).astype(dt)
    ref = K.conv2d_backward_filter_ref(dy.astype(cupy.float64), x.astype(cupy.float64), w_shape, *geo)
    dw = K.conv2d_backward_filter(dy, x, w_shape, *geo, config=config)
    assert _rel(dw, ref) < tol, dtype
    dwc = K.conv2d_backward_filter(to_channels_last(dy), to_channels_last(x), w_shape, *geo, config=config,
                                   channels_last_weight=True)
    assert dwc.strides[1] == dwc.itemsize, dtype  # KRSC memory
    assert np.array_equal(dwc.get().astype(np.float64), dw.get().astype(np.float64)), dtype
    plain = K.conv2d_backward_filter(dy, x, w_shape, *geo, config=ConvConfig(wgrad_splits=3, wgrad_rows=128))
    assert _rel(plain, ref) < tol and _rel(dw, plain) < tol, dtype


def test_wgrad_rows_model():
    """The filter gradient's tile rows (:func:`_wgrad_tiles`): 64 onto at most 64 output channels, or a config's;
    else 64 where the 128-row tiles leave rounds part idle and partials to sum (c256h14s2 at batch 128 and 256,
    ResNet's 1x1 stride-2 shortcut at 8 x 8 input, r18c64h32s2), 128 where they fill the SMs (ResNet's 512-channel
    layers: whole waves of whole tiles) or the 64-row ones would split more (r18c128h16s2 at batch 256)."""
    from minifused.kernels.conv_tma import _wgrad_tiles

    def rows(n, c, h, k, r, stride, splits=None):
        p = (h + 2 * (r // 2) - r) // stride + 1
        ncol, chunks = r * r * c, -(-n * p * p // 128)
        return _wgrad_tiles(k, ncol, chunks, 132, 2 * k * ncol * n * p * p, splits)[0]

    assert rows(128, 256, 14, 512, 3, 2) == 64 and rows(256, 256, 14, 512, 3, 2) == 64  # c256h14s2
    assert rows(128, 256, 8, 512, 1, 2) == 64  # r18c256h8s2k1
    assert rows(128, 512, 7, 512, 3, 1) == 128  # c512h7
    assert rows(128, 256, 8, 256, 3, 1) == 128  # r18c256h8
    assert rows(128, 64, 32, 128, 3, 2) == 64  # r18c64h32s2
    assert rows(256, 128, 16, 256, 3, 2) == 128  # r18c128h16s2b256
    assert rows(128, 64, 56, 64, 3, 1) == 64 and rows(128, 64, 56, 64, 3, 1, splits=3) == 64
    with pytest.raises(ValueError, match="wgrad_rows must be 64 or 128, got 96"):
        ConvConfig(wgrad_rows=96)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gpu_tma_wgrad_64_row_tiles_match_reference(dtype, poisoned_pool):
    """c256h14s2 on its modeled 64-row tiles (144 of 64 x 128 on 132 SMs: a wave of whole tiles, each writing its
    dW tile, then 12 in 10 splits that the kernel's fixup sums into a KRSC dW): the KRSC dW bit for bit the KCRS
    one (every partial summed by wgrad_reduce_kcrs), matching the float64 reference and the 128-row tiles' dW to
    rounding."""
    import cupy

    from minifused.kernels import sm_count, to_channels_last
    from minifused.kernels.conv_tma import tma_wgrad_plan

    if cupy.cuda.Device().compute_capability != "90":
        pytest.skip("the TMA kernel needs an sm_90 GPU")
    dt, tol, dev = getattr(backend, dtype), _GPU_TOL[dtype], cupy.cuda.Device().id
    if sm_count(dev) != 132:
        pytest.skip("the plan asserted is the one of 132 SMs")
    n, c, h, k, r = 128, 256, 14, 512, 3
    geo, w_shape = ((2, 2), (1, 1), (1, 1), 1), (k, c, r, r)
    plan = tma_wgrad_plan(dt, (n, c, h, h), w_shape, *geo, dev, P.DEFAULT_CONFIG)
    assert plan.wgrad_tiles == (64, 18, 132, 1) and plan.splits == 10 and plan.fixup == 12, plan
    rng = np.random.default_rng(53)
    x = cupy.asarray(rng.standard_normal((n, c, h, h))).astype(dt)
    dy = cupy.asarray(rng.standard_normal((n, k, 7, 7))).astype(dt)
    ref = K.conv2d_backward_filter_ref(dy.astype(cupy.float64), x.astype(cupy.float64), w_shape, *geo)
    dw = K.conv2d_backward_filter(dy, x, w_shape, *geo)
    assert _rel(dw, ref) < tol, dtype
    dwc = K.conv2d_backward_filter(to_channels_last(dy), to_channels_last(x), w_shape, *geo,
                                   channels_last_weight=True)
    assert dwc.strides[1] == dwc.itemsize, dtype  # KRSC memory
    assert np.array_equal(dwc.get().astype(np.float64), dw.get().astype(np.float64)), dtype
    wide = K.conv2d_backward_filter(dy, x, w_shape, *geo, config=ConvConfig(wgrad_rows=128))
    assert _rel(wide, ref) < tol and _rel(dw, wide) < tol, dtype


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gpu_tma_wgrad_fixup_sums_split_tiles_on_streams_and_in_graphs(dtype, poisoned_pool):
    """Where every split unit runs in the grid's last round, the TMA filter gradient sums its split tiles into a
    KRSC dW itself (plan.fixup, no wgrad_reduce): bitwise wgrad_reduce's sum of the same partials, call after call
    (its tile counters are never reset), on a second stream (counters of its own), replayed from a captured CUDA
    graph with new inputs, and beside whole tiles; a schedule of two rounds of split units keeps wgrad_reduce."""
    import cupy

    from minifused.kernels import sm_count, to_channels_last
    from minifused.kernels.conv_tma import launch_tma_wgrad, tma_wgrad_plan, wgrad_partials

    if cupy.cuda.Device().compute_capability != "90":
        pytest.skip("the TMA kernel needs an sm_90 GPU")
    dt, tol, dev = getattr(backend, dtype), _GPU_TOL[dtype], cupy.cuda.Device().id
    reduce = P.util_kernel(np.dtype(dt), "wgrad_reduce")
    rng = np.random.default_rng(43)
    n, c, h, k, r = 4, 64, 16, 128, 3  # 5 column tiles of 128 x 128, 8 chunks of pixels
    geo, w_shape = ((1, 1), (1, 1), (1, 1), 1), (k, c, r, r)
    config = ConvConfig(wgrad_splits=4, wgrad_rows=128)
    plan = tma_wgrad_plan(dt, (n, c, h, h), w_shape, *geo, dev, config)
    assert plan.splits == 4 and plan.fixup == 5, plan

    def case():
        x = to_channels_last(cupy.asarray(rng.standard_normal((n, c, h, h))).astype(dt))
        dy = to_channels_last(cupy.asarray(rng.standard_normal((n, k, h, h))).astype(dt))
        stride, nbytes = wgrad_partials(k, r * r * c, plan.wgrad_tiles, plan.splits)
        ws = cupy.empty(nbytes // 4, cupy.float32)
        launch_tma_wgrad(plan, dy.data.ptr, x.data.ptr, 0, ws=ws.data.ptr)  # every unit's partials
        want = cupy.empty(w_shape, dt)
        reduce((64,), (256,), (ws, want, *P.ints(plan.splits, k, c, r * r, c, 0, *plan.wgrad_tiles, 0),
                               np.int64(stride)))
        return x, dy, want.get().astype(np.float64)

    def dw_of(x, dy):
        return K.conv2d_backward_filter(dy, x, w_shape, *geo, config=config, channels_last_weight=True)

    cases = [case() for _ in range(3)]
    for x, dy, want in cases + cases:
        dw = dw_of(x, dy)
        assert dw.strides[1] == dw.itemsize and np.array_equal(dw.get().astype(np.float64), want), dtype
    ref = K.conv2d_backward_filter_ref(cases[0][1].astype(cupy.float64), cases[0][0].astype(cupy.float64), w_shape,
                                       *geo)
    assert _rel(dw_of(*cases[0][:2]), ref) < tol
    side = cupy.cuda.Stream(non_blocking=True)
    with side:
        dw = dw_of(*cases[1][:2])
        side.synchronize()
    assert np.array_equal(dw.get().astype(np.float64), cases[1][2]) and len(plan.counters) == 2
    static_x, static_dy = cupy.empty_like(cases[0][0]), cupy.empty_like(cases[0][1])
    g = mf.cuda.CUDAGraph()
    with mf.cuda.graph(g):
        out = dw_of(static_x, static_dy)
    for x, dy, want in cases[::-1] + cases:
        static_x[...], static_dy[...] = x, dy
        g.replay()
        assert np.array_equal(out.get().astype(np.float64), want), dtype
    # beside whole tiles: more tiles than SMs (ResNet's 512-channel layers at 4 x 4), the rest split
    if 144 > sm_count(dev) and 144 % sm_count(dev):
        plan = tma_wgrad_plan(dt, (128, 512, 4, 4), (512, 512, 3, 3), *geo, dev, P.DEFAULT_CONFIG)
        assert plan.wgrad_tiles[2] > 0 and plan.fixup == 144 - plan.wgrad_tiles[2], plan
    # two rounds of split units (288 of them): no fixup
    plan = tma_wgrad_plan(dt, (64, 512, 4, 4), (512, 512, 3, 3), *geo, dev, ConvConfig(wgrad_splits=2))
    assert plan.wgrad_tiles[2] == 0 and plan.splits == 2 and plan.fixup == 0, plan


def _pack_case(rng, dt, n, ctot, h, w, c_off, c, misaligned):
    """A pack test's input: a random (N, Ctot, H, W) CuPy array of ``dt`` (starting one element past its allocation if
    ``misaligned``), a random ReLU mask (Ctot, words), its bits per channel and pixel, and the expected pack of
    channels ``c_off ... c_off + c`` to (N, H, W, C padded) in float64 (unmasked)."""
    import cupy

    size = n * ctot * h * w
    flat = cupy.asarray(rng.standard_normal(size + 1)).astype(dt)
    a = (flat[1:] if misaligned else flat[:size]).reshape(n, ctot, h, w)
    words = (n * h * w + 31) // 32
    mask = cupy.asarray(rng.integers(0, 2**32, (ctot, words), dtype=np.uint32))
    keep = np.unpackbits(mask.get().view(np.uint8), bitorder="little").reshape(ctot, -1)[:, :n * h * w]
    want = np.zeros((n, h, w, P.padded_channels(c, dt)), np.float64)
    want[..., :c] = a.get().astype(np.float64)[:, c_off:c_off + c].transpose(0, 2, 3, 1)
    return a, mask, words, keep, want


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_gpu_pack_nhwc_matches_numpy(dtype, poisoned_pool):
    """conv_util.cu's pack of one group's channel slice to NHWC (channels zero-padded, times a ReLU mask) equals
    NumPy's, on the 16-bit vector tiles (pixels a multiple of 8) and their fall-backs: a pixel count that is
    not, and an input that does not start on 16 bytes."""
    import cupy

    dt = getattr(backend, dtype)
    rng = np.random.default_rng(9)
    for n, ctot, h, w, c_off, c, misaligned in [(3, 70, 8, 8, 0, 70, False), (2, 130, 7, 9, 3, 100, False),
                                                (2, 64, 12, 12, 0, 64, True), (5, 16, 4, 4, 8, 8, False),
                                                (1, 200, 16, 20, 64, 136, False)]:
        a, mask, words, keep, want = _pack_case(rng, dt, n, ctot, h, w, c_off, c, misaligned)
        cp_ = want.shape[-1]
        pack = K.pack_nhwc_launch(np.dtype(dt), n, h * w, ctot, c, cp_)

        def packed(mask_words):
            out = cupy.ndarray((n, h, w, cp_), dt)
            src = a.data.ptr + c_off * h * w * a.itemsize
            pack(src, out.data.ptr, mask.data.ptr + c_off * words * 4 if mask_words else src, mask_words)
            return out.get().astype(np.float64)

        assert np.array_equal(packed(0), want)
        masked = want.copy()
        masked[..., :c] *= keep[c_off:c_off + c].reshape(c, n, h, w).transpose(1, 2, 3, 0)
        got = packed(words)
        assert np.array_equal(got, masked), (n, ctot, h, w, c_off, c)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_gpu_pack_backward_matches_numpy(dtype, poisoned_pool):
    """conv_util.cu's pack_backward, the backward's two packs in one launch: dy's channel slice to NHWC (zero-padded,
    times a ReLU mask) as pack_nhwc, and the group's KCRS weight (K, J) transposed to (J, Kp), zero-padded; odd
    pixel and channel counts, a misaligned dy (the 16-bit tiles' fall-back), a weight of thousands of tiles."""
    import cupy

    dt = getattr(backend, dtype)
    rng = np.random.default_rng(11)
    cases = [(3, 70, 8, 8, 0, 70, 27, False), (2, 130, 7, 9, 3, 100, 577, False), (2, 64, 12, 12, 0, 64, 64, True),
             (4, 512, 2, 2, 0, 512, 4608, False), (1, 16, 5, 3, 8, 8, 9, False)]
    for n, ktot, h, w, k_off, k, j, misaligned in cases:
        dy, mask, words, keep, want = _pack_case(rng, dt, n, ktot, h, w, k_off, k, misaligned)
        kp = want.shape[-1]
        wt = cupy.asarray(rng.standard_normal((k, j))).astype(dt)
        want_w = np.zeros((j, kp), np.float64)
        want_w[:, :k] = wt.get().astype(np.float64).T
        pack = K._backward_pack(np.dtype(dt), n, h * w, ktot, k, kp, j)
        for mask_words in (0, words):
            out, w_out = cupy.ndarray((n, h, w, kp), dt), cupy.ndarray((j, kp), dt)
            src = dy.data.ptr + k_off * h * w * dy.itemsize
            pack(src, out.data.ptr, mask.data.ptr + k_off * words * 4 if mask_words else src, mask_words,
                 wt.data.ptr, w_out.data.ptr)
            expect = want.copy()
            if mask_words:
                expect[..., :k] *= keep[k_off:k_off + k].reshape(k, n, h, w).transpose(1, 2, 3, 0)
            assert np.array_equal(out.get().astype(np.float64), expect), (n, ktot, h, w, k_off, k, mask_words)
            assert np.array_equal(w_out.get().astype(np.float64), want_w), (n, k, j)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_gpu_grouped_packs_match_numpy(dtype, poisoned_pool):
    """pack_nhwc and pack_backward over G groups in one launch: group g's C channels (from channel g * C, times the
    ReLU mask's rows of that group) packed to (G, N, H, W, Cp), one group's images after another's, and the groups'
    KCRS weights each transposed to (J, Kp); padded channels, odd pixel counts (the 16-bit tiles' fall-back for
    some groups' starts), more images than a grid's z."""
    import cupy

    dt = getattr(backend, dtype)
    rng = np.random.default_rng(13)
    for n, groups, c, h, w, j in [(3, 4, 6, 8, 8, 54), (2, 8, 16, 7, 9, 144), (5, 3, 64, 4, 4, 576),
                                  (1, 32, 2, 12, 12, 18)]:
        ctot = groups * c
        a, mask, words, keep, _ = _pack_case(rng, dt, n, ctot, h, w, 0, ctot, False)
        cp_ = P.padded_channels(c, dt)
        full = a.get().astype(np.float64).reshape(n, groups, c, h, w)
        bits = keep.reshape(groups, c, n, h, w).transpose(0, 2, 3, 4, 1)
        want = np.zeros((groups, n, h, w, cp_), np.float64)
        want[..., :c] = full.transpose(1, 0, 3, 4, 2)
        wt = cupy.asarray(rng.standard_normal((ctot, j))).astype(dt)
        want_w = np.zeros((groups, j, cp_), np.float64)
        want_w[..., :c] = wt.get().astype(np.float64).reshape(groups, c, j).transpose(0, 2, 1)
        pack = K.pack_nhwc_launch(np.dtype(dt), n, h * w, ctot, c, cp_, groups)
        both = K._backward_pack(np.dtype(dt), n, h * w, ctot, c, cp_, j, groups)
        for mask_words in (0, words):
            expect = want.copy()
            if mask_words:
                expect[..., :c] *= bits
            src, m = a.data.ptr, mask.data.ptr if mask_words else a.data.ptr
            out = cupy.ndarray((groups, n, h, w, cp_), dt)
            pack(src, out.data.ptr, m, mask_words)
            assert np.array_equal(out.get().astype(np.float64), expect), (n, groups, c, h, w, mask_words)
            out, w_out = cupy.ndarray((groups, n, h, w, cp_), dt), cupy.ndarray((groups, j, cp_), dt)
            both(src, out.data.ptr, m, mask_words, wt.data.ptr, w_out.data.ptr)
            assert np.array_equal(out.get().astype(np.float64), expect), (n, groups, c, h, w, mask_words)
            assert np.array_equal(w_out.get().astype(np.float64), want_w), (groups, c, j)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_relayout_transposes_both_ways_exactly(dtype):
    """kernels.conv.relayout: a C-contiguous array to channels-last and back, bit for bit what CuPy's copies give,
    at odd sizes (the 32 x 32 tiles), 64-multiples (the 16-byte tiles), from views at an offset of one image (not
    16-byte aligned at the odd sizes); an array already in the layout comes back itself, a strided view as a copy
    of its values, an empty batch as an empty array."""
    import cupy

    from minifused.kernels import c_contiguous, channels_last_strided

    dt = getattr(backend, dtype)
    rng = np.random.default_rng(5)
    for n, c, h, w in [(2, 3, 7, 5), (3, 64, 8, 8), (1, 130, 9, 16), (4, 8, 1, 1), (2, 1, 6, 6)]:
        a = cupy.asarray(rng.standard_normal((n + 1, c, h, w))).astype(dt)[1:]  # (at an offset of one image)
        cl = K.relayout(a, True)
        assert channels_last_strided(cl) and cl.shape == a.shape
        assert np.array_equal(cl.get(), a.get()), (n, c, h, w)
        assert K.relayout(cl, True) is cl
        back = K.relayout(cl, False)
        assert c_contiguous(back) and np.array_equal(back.get(), a.get()), (n, c, h, w)
        assert K.relayout(back, False) is back
    view = cupy.asarray(rng.standard_normal((2, 6, 5, 4))).astype(dt)[:, ::2]
    assert np.array_equal(K.relayout(view, True).get(), view.get())
    assert np.array_equal(K.relayout(view, False).get(), view.get())
    assert K.relayout(cupy.zeros((0, 4, 3, 3), dt), True).shape == (0, 4, 3, 3)


def test_conv2d_channels_last_weight_gives_channels_last_output():
    """PyTorch's rule: a channels-last weight (a model made channels-last) fed a contiguous input gives a
    channels-last output; the input's gradient stays contiguous, the weight's channels-last. Values as the
    all-contiguous run's."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 6, 7))
    w = rng.standard_normal((4, 3, 3, 3))
    g = rng.standard_normal((2, 4, 4, 5))
    runs = []
    for fmt in (mf.contiguous_format, mf.channels_last):
        xt = mf.tensor(x, requires_grad=True)
        wt = mf.tensor(w).to(memory_format=fmt).requires_grad_(True)
        y = F.conv2d(xt, wt, stride=(1, 1), padding=(0, 0))
        (y * mf.tensor(g)).sum().backward()
        runs.append([t.detach().numpy() for t in (y, xt.grad, wt.grad)])
    assert y.is_contiguous(memory_format=mf.channels_last) and not y.is_contiguous()
    assert xt.grad.is_contiguous() and wt.grad.is_contiguous(memory_format=mf.channels_last)
    for a, b in zip(*runs):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
def test_conv2d_padding_modes_keep_a_channels_last_input_channels_last(mode):
    """PyTorch's F.pad keeps a channels-last input's layout (constant, reflect, replicate; circular's output is
    contiguous), so a Conv2d gives a channels-last output for a channels-last input in every padding_mode but
    circular, as PyTorch's. Values as the contiguous run's."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 6, 7))
    conv = nn.Conv2d(3, 4, 3, padding=1, padding_mode=mode, dtype=mf.float64)
    y0 = conv(mf.tensor(x))
    y = conv(mf.tensor(x).to(memory_format=mf.channels_last))
    assert y.is_contiguous(memory_format=mf.channels_last) != (mode == "circular") and y.is_contiguous() == (
        mode == "circular")
    np.testing.assert_allclose(y.detach().numpy(), y0.detach().numpy(), rtol=1e-12, atol=1e-12)
    xl = mf.tensor(x).to(memory_format=mf.channels_last)
    padded = F.pad(xl, (1, 2, 1, 1), mode="constant" if mode == "zeros" else mode)
    assert padded.is_contiguous(memory_format=mf.channels_last) != (mode == "circular")
    np.testing.assert_array_equal(padded.numpy(), F.pad(mf.tensor(x), (1, 2, 1, 1), mode="constant" if mode ==
                                                        "zeros" else mode).numpy())


@pytest.mark.parametrize("call,message", [
    (lambda x: F.conv1d(x, mf.ones(3, 3, 2, dtype=mf.float64)),
     r"conv1d: input has 4 channels \(shape \(2, 4, 9\)\) but weight of shape \(3, 3, 2\) with groups=1 expects 3"),
    (lambda x: F.conv1d(x, mf.ones(3, 2, 2, dtype=mf.float64), groups=2),
     r"conv1d: out_channels=3 \(weight shape \(3, 2, 2\)\) is not divisible by groups=2"),
    (lambda x: F.conv1d(x, mf.ones(3, 4, 6, dtype=mf.float64), dilation=2),
     r"conv1d: kernel 6 \(dilation 2, effective 11\) is larger than the padded input 9 \(input shape \(2, 4, 9\)\)"),
    (lambda x: F.conv1d(x, mf.ones(3, 4, 2, dtype=mf.float64), stride=2, padding="same"),
     r"conv1d: padding='same' is not supported for strided convolutions, got stride=2"),
    (lambda x: F.conv1d(x, mf.ones(3, 4, 2, dtype=mf.float64), mf.ones(4, dtype=mf.float64)),
     r"conv1d: bias must have shape \(3,\) to match out_channels, got \(4,\)"),
    (lambda x: F.conv1d(x, mf.ones(3, 4, 2, dtype=mf.float64), groups=0), r"conv1d: groups must be a positive int"),
    (lambda x: F.conv1d(x.bool(), mf.ones(3, 4, 2, dtype=mf.bool_)), r"conv1d: unsupported dtype bool"),
    (lambda x: nn.Conv1d(3, 2, 2, dtype=mf.float64)(x),
     r"conv1d: input has 4 channels \(shape \(2, 4, 9\)\) but weight of shape \(2, 3, 2\) with groups=1 expects 3"),
])
def test_conv1d_errors_name_it_and_show_the_1d_shapes(call, message):
    """conv1d runs as conv2d over a height of one; its errors name conv1d and show the shapes as given (not the
    (N, C, 1, L) view), each a RuntimeError as PyTorch's."""
    with pytest.raises(RuntimeError, match=message):
        call(mf.tensor(np.ones((2, 4, 9))))
    y = F.conv1d(mf.tensor(np.ones((2, 4, 9))), mf.ones(3, 4, 6, dtype=mf.float64), padding="same", dilation=2)
    assert tuple(y.shape) == (2, 3, 9)  # (the padded length counts for 'same')


@pytest.mark.parametrize("make,shape,forward_input", [
    (lambda: nn.Conv2d(0, 5, 3), (5, 0, 3, 3), (2, 0, 5, 5)),
    (lambda: nn.Conv2d(5, 0, 3), (0, 5, 3, 3), (2, 5, 5, 5)),
    (lambda: nn.Conv1d(0, 3, 3), (3, 0, 3), (2, 0, 7)),
    (lambda: nn.ConvTranspose2d(0, 3, 3), (0, 3, 3, 3), (1, 0, 5, 5)),
    (lambda: nn.ConvTranspose2d(3, 0, 3), (3, 0, 3, 3), (1, 3, 5, 5)),
    (lambda: nn.ConvTranspose1d(0, 3, 3), (0, 3, 3), (1, 0, 5)),
    (lambda: nn.Conv3d(0, 3, 3), (3, 0, 3, 3, 3), (1, 0, 5, 5, 5)),
])
def test_conv_module_of_no_channels_builds(make, shape, forward_input):
    """PyTorch builds a convolution of 0 input or output channels (an empty weight; a bias of zeros where there
    is no fan-in, its init bound 0); its forward on a batch raises (PyTorch's RuntimeError for each but the
    in_channels=0 convolutions, where PyTorch's returns an empty (N, 0, ...) output: see the next test)."""
    m = make()
    assert tuple(m.weight.shape) == shape
    if shape[1] == 0:  # (fan_in = weight.shape[1] * kernel taps, for the transposed ones too)
        np.testing.assert_array_equal(m.bias.detach().numpy(), np.zeros(m.out_channels, np.float32))
    if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d)) and m.in_channels == 0:
        assert m(mf.randn(*forward_input)).shape[1] == 0
    else:
        with pytest.raises(RuntimeError, match="at least"):
            m(mf.randn(*forward_input))
    with pytest.raises(ValueError, match=">= 0"):
        nn.Conv2d(-1, 3, 3)


# PyTorch's output shapes: (N, 0, *spatial), 0 channels (not out_channels)
@pytest.mark.parametrize("fn,x_shape,w_shape,kw,out_shape", [
    (F.conv2d, (2, 0, 5, 5), (3, 0, 3, 3), dict(padding=1), (2, 0, 5, 5)),
    (F.conv2d, (1, 0, 5, 5), (2, 0, 3, 3), dict(stride=2, dilation=2), (1, 0, 1, 1)),
    (F.conv2d, (1, 0, 2, 2), (4, 0, 1, 1), dict(groups=2), (1, 0, 2, 2)),
    (F.conv2d, (0, 3, 3), (4, 0, 1, 1), {}, (0, 3, 3)),  # unbatched
    (F.conv1d, (2, 0, 5), (3, 0, 3), {}, (2, 0, 3)),
    (F.conv1d, (1, 0, 5), (3, 0, 4), dict(padding="same"), (1, 0, 5)),
    (F.conv3d, (2, 0, 4, 4, 4), (3, 0, 2, 2, 2), {}, (2, 0, 3, 3, 3)),
    (F.conv3d, (0, 5, 5, 5), (2, 0, 3, 3, 3), {}, (0, 3, 3, 3)),
])
def test_conv_of_no_input_channels_is_empty_as_pytorch(fn, x_shape, w_shape, kw, out_shape):
    """A convolution of an input with no channels gives PyTorch's empty output of 0 channels, and each operand a
    gradient: empty ones for the input and weight, zeros for the bias (PyTorch's tensor([0., 0., 0.]))."""
    x = mf.zeros(*x_shape, requires_grad=True)
    w = mf.randn(*w_shape, requires_grad=True)
    b = mf.randn(w_shape[0], requires_grad=True)
    y = fn(x, w, b, **kw)
    assert tuple(y.shape) == out_shape and y.dtype == mf.float32 and y.requires_grad
    (y.sum() + b.sum()).backward()
    assert tuple(x.grad.shape) == x_shape and tuple(w.grad.shape) == w_shape
    np.testing.assert_array_equal(b.grad.numpy(), np.ones(w_shape[0], np.float32))  # b.sum()'s ones, plus zeros
    y = fn(mf.zeros(*x_shape, dtype=mf.float64), mf.zeros(*w_shape, dtype=mf.float64), None, **kw)
    assert tuple(y.shape) == out_shape and y.dtype == mf.float64 and not y.requires_grad


@pytest.mark.parametrize("make,x_shape,out_shape", [
    (lambda: nn.Conv1d(0, 3, 3), (2, 0, 5), (2, 0, 3)),
    (lambda: nn.Conv2d(0, 3, 3, padding=1), (2, 0, 5, 5), (2, 0, 5, 5)),
    (lambda: nn.Conv3d(0, 3, 2), (2, 0, 4, 4, 4), (2, 0, 3, 3, 3)),
])
def test_conv_module_of_no_input_channels_gives_its_bias_a_zero_gradient(make, x_shape, out_shape):
    m = make()
    y = m(mf.zeros(*x_shape))
    assert tuple(y.shape) == out_shape
    (2 * y).sum().backward()
    np.testing.assert_array_equal(m.bias.grad.numpy(), np.zeros(3, np.float32))
    assert tuple(m.weight.grad.shape) == tuple(m.weight.shape)


@pytest.mark.parametrize("call,message", [
    (lambda: F.conv2d(mf.zeros(1, 3, 5, 5), mf.zeros(0, 3, 3, 3)), r"at least 1 output channel"),
    (lambda: F.conv2d(mf.zeros(1, 0, 2, 2), mf.zeros(2, 0, 3, 3)), r"larger than the padded input"),
    (lambda: F.conv2d(mf.zeros(1, 0, 5, 5), mf.zeros(2, 0, 3, 3), mf.zeros(5)), r"bias must have shape \(2,\)"),
    (lambda: F.conv3d(mf.zeros(1, 3, 5, 5, 5), mf.zeros(0, 3, 3, 3, 3)), r"at least 1 output channel"),
    (lambda: F.conv_transpose2d(mf.zeros(1, 0, 5, 5), mf.zeros(0, 2, 3, 3)), r"at least one input"),
    (lambda: F.conv_transpose3d(mf.zeros(1, 0, 2, 2, 2), mf.zeros(0, 4, 1, 1, 1)), r"at least one input"),
])
def test_conv_of_no_channels_still_checks_the_rest(call, message):
    """What PyTorch refuses around it still raises its RuntimeError: no output channel, a kernel larger than the
    input, a bias of the wrong size, a transposed convolution of no input channel."""
    with pytest.raises(RuntimeError, match=message):
        call()
