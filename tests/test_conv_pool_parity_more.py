"""Convolution and pooling corners checked against PyTorch's rules: the exception types PyTorch raises for bad
layer arguments and unsupported dtypes (NotImplementedError), the once-per-process warning of an asymmetric
padding='same', messages naming the op and the shape that came, max_unpool1d under cpu autocast, the result layouts
of channels_last_3d inputs (max_pool3d, F.pad, conv3d), and integer convolutions on the cpu against direct int64
references. (cpu)"""
import warnings

import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
import minifused.nn as nn


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# ---------------------------------------------------------------- layer arguments of the wrong type
@pytest.mark.parametrize("make", [lambda: nn.Conv1d(4.0, 6, 3), lambda: nn.Conv1d(4, 6.0, 3),
                                  lambda: nn.Conv1d(4, 6, 3, groups=2.0), lambda: nn.Conv3d(4, 6, 3.0),
                                  lambda: nn.Conv3d(4, 6, (3, 3.0, 3)), lambda: nn.ConvTranspose3d(4, 6, "3"),
                                  lambda: nn.Conv3d(4, 6, 3, stride=1.5)])
def test_conv_layer_non_int_arguments_raise_type_error(make):
    """PyTorch's layers build their weight of that size, which refuses a float: a TypeError (not a ValueError)."""
    with pytest.raises(TypeError) as info:
        make()
    assert not isinstance(info.value, ValueError)
    assert "Conv" in str(info.value)


@pytest.mark.parametrize("make", [lambda: nn.Conv1d(4, 6, 3, groups=0), lambda: nn.Conv1d(3, 6, 3, groups=2),
                                  lambda: nn.Conv1d(-1, 6, 3)])
def test_conv1d_layer_bad_channel_counts_raise_value_error(make):
    with pytest.raises(ValueError, match="Conv1d"):
        make()


def test_pool3d_kernel_of_wrong_length_raises_value_error():
    """lp_pool3d unpacks its kernel into three (a ValueError in PyTorch for four); the other 3-D ops' RuntimeError:
    the error is both."""
    x = mf.tensor(rand(1, 2, 4, 4, 4))
    for call in (lambda: F.lp_pool3d(x, 2, (2, 2, 2, 2)), lambda: F.max_pool3d(x, (2, 2, 2, 2)),
                 lambda: F.avg_pool3d(x, 2, (1, 1))):
        with pytest.raises(ValueError, match="must be an int or a tuple of three ints") as info:
            call()
        assert isinstance(info.value, RuntimeError)
    with pytest.raises(RuntimeError, match=r"max_pool3d: stride must be >= 1, got 0"):
        F.max_pool3d(x, 2, 0)


# ---------------------------------------------------------------- padding='same' with an even effective kernel
SAME_WARNING = "padding='same' with even kernel lengths and odd dilation"


@pytest.fixture
def warn_always():
    """PyTorch warns of an asymmetric 'same' padding once per process (TORCH_WARN_ONCE); set_warn_always makes it
    every call, so each case below sees it or not whatever ran before."""
    mf.set_warn_always(True)
    yield
    mf.set_warn_always(False)


@pytest.mark.parametrize("call,asymmetric", [
    (lambda x: F.conv2d(x, mf.ones(1, 1, 2, 3, dtype=mf.float64), padding="same"), True),
    (lambda x: F.conv2d(x, mf.ones(1, 1, 3, 3, dtype=mf.float64), padding="same"), False),
    (lambda x: F.conv2d(x, mf.ones(1, 1, 2, 2, dtype=mf.float64), padding="same", dilation=2), False),
    (lambda x: F.conv2d(x, mf.ones(1, 1, 3, 2, dtype=mf.float64), padding="same", dilation=(2, 1)), True),
    (lambda x: F.conv1d(x[0, :, 0], mf.ones(1, 1, 4, dtype=mf.float64), padding="same"), True),
    (lambda x: F.conv3d(x[None], mf.ones(1, 1, 1, 1, 2, dtype=mf.float64), padding="same"), True),
    (lambda x: F.conv3d(x[None], mf.ones(1, 1, 3, 1, 1, dtype=mf.float64), padding="same"), False),
    (lambda x: nn.Conv2d(1, 1, 2, padding="same", dtype=mf.float64)(x), True),
    (lambda x: nn.Conv2d(1, 1, 2, padding="same", padding_mode="reflect", dtype=mf.float64)(x), False)])
def test_same_padding_of_even_kernel_warns(warn_always, call, asymmetric):
    """The total padding of 'same' is dilation * (k - 1) per dimension; where it is odd PyTorch's convolution warns
    (a padded copy of the input is made: the odd element goes after). A padding_mode other than zeros pads by F.pad
    and convolves with no padding, so no warning there."""
    x = mf.tensor(rand(1, 1, 5, 6))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = call(x)
    assert tuple(y.shape[-2:]) == (5, 6) or y.ndim == 2 and y.shape[-1] == 6 or tuple(y.shape[-3:]) == (1, 5, 6)
    assert any(SAME_WARNING in str(w.message) for w in caught) == asymmetric


# ---------------------------------------------------------------- what PyTorch does not implement: NotImplementedError
def _ints(*shape, dtype=mf.int32):
    return mf.tensor(np.arange(int(np.prod(shape))).reshape(shape) % 5).to(dtype)


@pytest.mark.parametrize("call", [
    lambda: F.avg_pool2d(_ints(1, 2, 4, 4), 2),  # (average pooling takes int64 alone on the cpu)
    lambda: F.avg_pool1d(_ints(1, 2, 4, dtype=mf.int8), 2),
    lambda: F.avg_pool3d(_ints(1, 2, 4, 4, 4, dtype=mf.int16), 2),
    lambda: F.max_pool2d(_ints(1, 2, 4, 4, dtype=mf.bool_), 2),  # (max pooling: every integer dtype but bool)
    lambda: F.max_pool3d(_ints(1, 2, 4, 4, 4, dtype=mf.bool_), 2),
    lambda: F.max_pool1d(_ints(1, 2, 4, dtype=mf.int64), 2),  # (1-D without indices: floating inputs only)
    lambda: F.adaptive_avg_pool1d(_ints(1, 2, 4, dtype=mf.int64), 2),
    lambda: F.adaptive_max_pool2d(_ints(1, 2, 4, 4, dtype=mf.int64), 2),
    lambda: F.adaptive_avg_pool3d(_ints(1, 2, 4, 4, 4, dtype=mf.int64), 2),
    lambda: F.unfold(_ints(1, 2, 4, 4, dtype=mf.int64), 2),
    lambda: F.fold(_ints(1, 8, 9, dtype=mf.int64), 4, 2),
    lambda: F.conv2d(_ints(1, 2, 4, 4, dtype=mf.bool_), _ints(1, 2, 2, 2, dtype=mf.bool_)),
    lambda: F.conv3d(_ints(1, 2, 4, 4, 4, dtype=mf.bool_), _ints(1, 2, 2, 2, 2, dtype=mf.bool_))])
def test_unimplemented_dtypes_raise_not_implemented_error(call):
    """PyTorch's cpu kernels raise NotImplementedError ('"avg_pool2d" not implemented for 'Int'') for a dtype they
    have no kernel for; the error here is that, and still the TypeError it was."""
    with pytest.raises(NotImplementedError) as info:
        call()
    assert isinstance(info.value, TypeError) and isinstance(info.value, RuntimeError)
    assert "int" in str(info.value) or "bool" in str(info.value)


def test_integer_pooling_that_pytorch_implements_still_runs():
    """The counterpart: max pooling of int32 (with indices for the 1-D one) and average pooling of int64 run, the
    average truncating toward zero as C's integer division."""
    x = _ints(1, 1, 4, 4, dtype=mf.int64) - 2  # rows [-2 -1 0 1], [2 -2 -1 0], [1 2 -2 -1], [0 1 2 -2]
    # window sums -3, 0, 4, -3: -3 / 4 truncates to 0 (not floor's -1), 4 / 4 = 1
    np.testing.assert_array_equal(F.avg_pool2d(x, 2).numpy(), [[[[0, 0], [1, 0]]]])
    y, i = F.max_pool1d(_ints(1, 1, 6), 3, return_indices=True)
    np.testing.assert_array_equal(y.numpy(), [[[2, 4]]])
    np.testing.assert_array_equal(i.numpy(), [[[2, 4]]])


@pytest.mark.parametrize("call", [
    lambda x: F.pad(x, (1, 1), mode="reflect"),  # a 4-D input padded in one dimension
    lambda x: F.pad(x[0, 0], (1, 1, 1, 1), mode="replicate"),  # a 2-D input in two
    lambda x: F.pad(x[None], (1, 1, 1, 1), mode="circular"),  # a 5-D input in two
    lambda x: F.pad(x, (1, 1) * 4, mode="reflect"),
    lambda x: F.pad(x, (1, 1), mode="wrap")])
def test_pad_forms_pytorch_does_not_implement(call):
    """Non-constant modes pad the last k = 1, 2 or 3 dimensions of a (k+1)-D or (k+2)-D input; other forms, and an
    unknown mode, raise PyTorch's NotImplementedError (still a ValueError here)."""
    x = mf.tensor(rand(2, 3, 4, 5))
    with pytest.raises(NotImplementedError, match="pad: ") as info:
        call(x)
    assert isinstance(info.value, ValueError)


def test_pad_mode_must_be_a_string():
    with pytest.raises(TypeError, match="pad: mode must be a string"):
        F.pad(mf.tensor(rand(2, 3, 4)), (1, 1), mode=None)


def test_adaptive_pool3d_output_size_of_wrong_length_is_a_value_error_too():
    """PyTorch raises ValueError for an unbatched input's four sizes, RuntimeError for a batched one's."""
    for x in (mf.tensor(rand(2, 4, 4, 4)), mf.tensor(rand(1, 2, 4, 4, 4))):
        with pytest.raises(ValueError, match="adaptive_avg_pool3d: output_size must be an int or a triple") as info:
            F.adaptive_avg_pool3d(x, (2, 2, 2, 2))
        assert isinstance(info.value, RuntimeError)


# ---------------------------------------------------------------- messages show the input as given
@pytest.mark.parametrize("pool,shape", [(F.max_pool2d, (0, 6, 6)), (F.avg_pool2d, (3, 0, 6)),
                                        (F.max_pool3d, (0, 4, 4, 4)), (F.avg_pool3d, (2, 4, 0, 4)),
                                        (F.max_pool3d_with_indices, (1, 0, 4, 4, 4)), (F.max_pool1d, (0, 6))])
def test_pool_of_empty_dimension_names_the_shape_that_came(pool, shape):
    """PyTorch's pools take an empty batch but no empty channel or spatial dimension (an unbatched input's C
    included); the message shows the input's own shape, not the batch of one an unbatched input is run as."""
    with pytest.raises(RuntimeError) as info:
        pool(mf.zeros(*shape), 2)
    assert str(info.value).startswith(pool.__name__ + ":")
    assert f"got shape {shape}" in str(info.value)


@pytest.mark.parametrize("pool", [F.max_pool1d, F.avg_pool1d, F.max_pool2d, F.avg_pool3d])
def test_pool_of_a_non_tensor_raises_type_error(pool):
    with pytest.raises(TypeError, match=f"{pool.__name__}: expected a tensor input, got list"):
        pool([[1.0, 2.0, 3.0]], 2)


# ---------------------------------------------------------------- cpu autocast
@pytest.mark.parametrize("dtype", [mf.bfloat16, mf.float16])
def test_max_unpool1d_under_cpu_autocast_computes_in_float32(dtype):
    """PyTorch's max_unpool1d runs max_unpool2d, which cpu autocast lists as float32: a 16-bit input comes out
    float32 (as max_unpool2d's and max_unpool3d's), the values put back at their indices, zeros elsewhere."""
    x = mf.tensor([[[1.0, 3.0, 2.0, 0.5, -1.0, 4.0]]]).to(dtype)
    with mf.autocast("cpu", dtype=dtype):
        y, i = F.max_pool1d(x, 2, return_indices=True)
        u = F.max_unpool1d(y, i, 2)
        u2 = F.max_unpool2d(*F.max_pool2d(x[None], (1, 2), return_indices=True), (1, 2))
    assert u.dtype == mf.float32 and u2.dtype == mf.float32
    np.testing.assert_array_equal(u.numpy(), [[[0.0, 3.0, 2.0, 0.0, 0.0, 4.0]]])
    np.testing.assert_array_equal(u2.numpy()[0], u.numpy())


def test_max_unpool2d_bad_input_names_what_came():
    idx = mf.zeros(2, 3, dtype=mf.int64)
    with pytest.raises(RuntimeError, match=r"max_unpool2d: expected a 3-D \(C, H, W\) or 4-D \(N, C, H, W\) input, "
                                           r"got shape \(2, 3\)"):
        F.max_unpool2d(mf.zeros(2, 3), idx, 2)
    with pytest.raises(TypeError, match="max_unpool2d: expected tensors for input and indices, got list and Tensor"):
        F.max_unpool2d([[[1.0]]], idx, 2)


def test_conv1d_errors_name_conv1d_not_the_2d_op_it_runs_on():
    """conv1d runs as conv2d over a height of one; its errors still name conv1d and show its own dtypes."""
    x, w = mf.tensor(rand(2, 3, 8)), mf.tensor(rand(4, 3, 3))
    with pytest.raises(TypeError, match=r"^conv1d: input, weight and bias must have one dtype, got float64, float32"):
        F.conv1d(x, w.float())
    with pytest.raises(TypeError, match=r"^conv1d: input, weight and bias must have one dtype, got float64, float64, "
                                        r"float32"):
        F.conv1d(x, w, mf.zeros(4))
    with pytest.raises(TypeError, match=r"^conv1d: bias must be a tensor or None, got list"):
        F.conv1d(x, w, [0.0] * 4)
    with mf.autocast("cpu", dtype=mf.bfloat16):  # (under autocast both are cast: no error, a bfloat16 result)
        assert F.conv1d(x.float(), w.float(), mf.zeros(4, dtype=mf.bfloat16)).dtype == mf.bfloat16


@pytest.mark.parametrize("op", [lambda a: F.unfold(a, 1), lambda a: F.fold(a, 2, 1), lambda a: nn.Unfold(1)(a)])
def test_unfold_fold_of_a_non_tensor_raise_type_error(op):
    with pytest.raises(TypeError, match=r"(un)?fold: expected a tensor input, got list"):
        op([[[1.0, 2.0], [3.0, 4.0]]])


# ---------------------------------------------------------------- channels_last_3d
def test_max_pool3d_keeps_a_channels_last_3d_layout():
    """PyTorch's cpu max_pool3d computes a channels_last_3d input in that layout: values and indices come back
    channels_last_3d (the same numbers as the contiguous input's); its avg_pool3d, adaptive pools and conv3d
    return contiguous results."""
    x = mf.tensor(rand(2, 3, 4, 6, 5)).contiguous(memory_format=mf.channels_last_3d)
    for y, i in (F.max_pool3d(x, 2, return_indices=True), F.max_pool3d_with_indices(x, 3, 2, 1, 1, True),
                 nn.MaxPool3d(2, return_indices=True)(x)):
        assert y.is_contiguous(memory_format=mf.channels_last_3d) and not y.is_contiguous()
        assert i.is_contiguous(memory_format=mf.channels_last_3d) and not i.is_contiguous()
    y, i = F.max_pool3d(x, 2, return_indices=True)
    y0, i0 = F.max_pool3d(x.contiguous(), 2, return_indices=True)
    assert y0.is_contiguous() and i0.is_contiguous()
    np.testing.assert_array_equal(y.numpy(), y0.numpy())
    np.testing.assert_array_equal(i.numpy(), i0.numpy())
    # the reference: each window's maximum (2x2x2 windows tile the 4x6x4 corner)
    ref = x.numpy()[:, :, :4, :6, :4].reshape(2, 3, 2, 2, 3, 2, 2, 2).max(axis=(3, 5, 7))
    np.testing.assert_array_equal(y.numpy(), ref)
    assert F.avg_pool3d(x, 2).is_contiguous()


@pytest.mark.parametrize("pads,mode,keeps", [((1, 1), "constant", True), ((1, 1, 0, 2, 1, 0), "constant", True),
                                             ((1, 1, 1, 1, 1, 1), "reflect", True),
                                             ((-1, 1, 1, 1, 0, 1), "replicate", True),
                                             ((1, 1, 1, 1, 1, 1), "circular", False)])
def test_pad_keeps_a_channels_last_3d_layout(pads, mode, keeps):
    """PyTorch's constant, reflect and replicate pads keep a channels_last_3d input's layout, circular's returns a
    contiguous result; the values are the contiguous input's padding (NumPy's pad, negative pads cropping)."""
    x = mf.tensor(rand(2, 3, 3, 4, 5)).contiguous(memory_format=mf.channels_last_3d)
    y = F.pad(x, pads, mode=mode)
    assert y.is_contiguous(memory_format=mf.channels_last_3d) and not y.is_contiguous() if keeps else y.is_contiguous()
    pairs = [(0, 0)] * (5 - len(pads) // 2) + [(pads[i], pads[i + 1]) for i in range(0, len(pads), 2)][::-1]
    grow = [(max(lo, 0), max(hi, 0)) for lo, hi in pairs]
    np_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    ref = np.pad(x.numpy(), grow, mode=np_mode)
    ref = ref[tuple(slice(max(-lo, 0), n - max(-hi, 0)) for (lo, hi), n in zip(pairs, ref.shape))]
    np.testing.assert_array_equal(y.numpy(), ref)


@pytest.mark.parametrize("dtype,x_cl,w_cl,expect_cl", [
    (mf.float32, True, False, True), (mf.float32, False, True, True), (mf.bfloat16, True, True, True),
    (mf.float32, False, False, False), (mf.float64, True, True, False)])
def test_conv3d_result_layout_follows_pytorchs_rule(dtype, x_cl, w_cl, expect_cl):
    """PyTorch's conv3d and conv_transpose3d return channels_last_3d where the input or the weight is laid out so,
    except in float64 (its slow_conv3d path, and cuDNN's rule) which returns contiguous results. The values do not
    depend on the layout."""
    x, w, wt = mf.tensor(rand(2, 3, 3, 4, 5)), mf.tensor(rand(2, 3, 2, 2, 3, seed=1)), mf.tensor(rand(3, 2, 2, 2, 2))
    x, w, wt = (t.to(dtype) for t in (x, w, wt))
    lay = (lambda t, cl: t.contiguous(memory_format=mf.channels_last_3d) if cl else t)  # noqa: E731
    for y, y0 in ((F.conv3d(lay(x, x_cl), lay(w, w_cl), None, 1, 1), F.conv3d(x, w, None, 1, 1)),
                  (F.conv_transpose3d(lay(x, x_cl), lay(wt, w_cl), mf.ones(2, dtype=dtype), 2, 1),
                   F.conv_transpose3d(x, wt, mf.ones(2, dtype=dtype), 2, 1))):
        assert (y.is_contiguous(memory_format=mf.channels_last_3d) and not y.is_contiguous()) == expect_cl
        assert y.is_contiguous() != expect_cl
        np.testing.assert_allclose(y.float().numpy(), y0.float().numpy(), rtol=1e-6, atol=1e-6)


def test_fractional_max_pool_errors_as_pytorchs():
    """An integer input: PyTorch's NotImplementedError ("check_uniform_bounds" not implemented for 'Long'); a kernel
    of 0: its RuntimeError in 2-D, the ValueError of its Python check in 3-D (the error here is both)."""
    with pytest.raises(NotImplementedError, match="fractional_max_pool2d: expected a floating-point input, got dtype "
                                                  "int64"):
        F.fractional_max_pool2d(mf.zeros(1, 2, 6, 6, dtype=mf.int64), 2, 3)
    for pool, x in ((F.fractional_max_pool2d, mf.zeros(1, 2, 6, 6)),
                    (F.fractional_max_pool3d, mf.zeros(1, 2, 6, 6, 6))):
        with pytest.raises(ValueError, match="kernel size should be greater than zero") as info:
            pool(x, 0, 3)
        assert isinstance(info.value, RuntimeError)


# ---------------------------------------------------------------- integer convolutions (cpu)
def _conv2d_ref(x, w, b, stride, padding, groups):
    """Direct int64 convolution: out[n, k, i, j] = b[k] + sum over the group's channels and taps (``padding`` an
    int or (height, width))."""
    ph, pw = (padding, padding) if isinstance(padding, int) else padding
    x = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    n, _, h, wd = x.shape
    k, cg, r, s = w.shape
    oh, ow = (h - r) // stride + 1, (wd - s) // stride + 1
    out = np.zeros((n, k, oh, ow), np.int64)
    for kk in range(k):
        g = kk // (k // groups)
        for i in range(oh):
            for j in range(ow):
                patch = x[:, g * cg:(g + 1) * cg, i * stride:i * stride + r, j * stride:j * stride + s]
                out[:, kk, i, j] = (patch * w[kk].astype(np.int64)).sum(axis=(1, 2, 3))
    return out + (0 if b is None else b.astype(np.int64)[None, :, None, None])


@pytest.mark.parametrize("stride,padding,groups", [(1, 0, 1), (2, 1, 2), (1, 2, 1)])
def test_integer_conv2d_as_pytorchs_cpu_convolution(stride, padding, groups):
    """PyTorch's cpu convolutions take integer tensors (their slow path): exact sums in the input's dtype."""
    r = np.random.default_rng(0)
    x, w, b = r.integers(-50, 50, (2, 4, 6, 5)), r.integers(-9, 9, (6, 4 // groups, 3, 3)), r.integers(-9, 9, 6)
    y = F.conv2d(mf.tensor(x), mf.tensor(w), mf.tensor(b), stride, padding, 1, groups)
    assert y.dtype == mf.int64
    np.testing.assert_array_equal(y.numpy(), _conv2d_ref(x, w, b, stride, padding, groups))
    y1 = F.conv1d(mf.tensor(x[:, :, 0]), mf.tensor(w[:, :, 1]), None, stride, padding, 1, groups)
    np.testing.assert_array_equal(y1.numpy(), _conv2d_ref(x[:, :, :1], w[:, :, 1:2], None, stride, (0, padding),
                                                          groups)[:, :, 0])
    y3 = F.conv3d(mf.tensor(x[:, :, None]), mf.tensor(w[:, :, None]), None, stride, (0, padding, padding), 1, groups)
    np.testing.assert_array_equal(y3.numpy()[:, :, 0], _conv2d_ref(x, w, None, stride, padding, groups))


def test_integer_conv2d_wraps_as_the_dtype():
    """Sums in int8 wrap modulo 256 (two's complement), as PyTorch's int8 convolution: 100 * 3 * 36 taps = 10800,
    which is 48 modulo 256; uint8 200 * 3 * 36 = 21600 is 96. A channels-last input gives a channels-last result."""
    x8, w8 = mf.full((1, 4, 3, 3), 100, dtype=mf.int8), mf.full((1, 4, 3, 3), 3, dtype=mf.int8)
    y = F.conv2d(x8, w8)
    assert y.dtype == mf.int8 and y.item() == 48
    xu, wu = mf.full((1, 4, 3, 3), 200, dtype=mf.uint8), mf.full((1, 4, 3, 3), 3, dtype=mf.uint8)
    assert F.conv2d(xu, wu).item() == 96
    x = mf.tensor(np.arange(2 * 3 * 4 * 4).reshape(2, 3, 4, 4) % 7).contiguous(memory_format=mf.channels_last)
    y = F.conv2d(x, mf.ones(2, 3, 2, 2, dtype=mf.int64))
    assert y.is_contiguous(memory_format=mf.channels_last) and not y.is_contiguous()
    np.testing.assert_array_equal(y.numpy(), _conv2d_ref(x.numpy(), np.ones((2, 3, 2, 2), np.int64), None, 1, 0, 1))
    # (conv3d of integers runs PyTorch's slow_conv3d: a contiguous result whatever the layout)
    x3 = mf.tensor(np.arange(2 * 3 * 2 * 3 * 3).reshape(2, 3, 2, 3, 3)).contiguous(memory_format=mf.channels_last_3d)
    assert F.conv3d(x3, mf.ones(2, 3, 1, 2, 2, dtype=mf.int64)).is_contiguous()


def _conv_transpose2d_ref(x, w, stride, padding, output_padding, groups, dilation):
    """Direct int64 transposed convolution: each input element times each tap of its weight slice, added at
    (i * stride - padding + tap * dilation) of the output (positions outside it dropped); the geometry an int or
    (height, width) pairs."""
    def pair(v):
        return (v, v) if isinstance(v, int) else v
    (sh, sw), (ph, pw), (oph, opw), (dh, dw) = (pair(v) for v in (stride, padding, output_padding, dilation))
    n, cin, h, wd = x.shape
    _, cg, r, s = w.shape
    oh = (h - 1) * sh - 2 * ph + dh * (r - 1) + oph + 1
    ow = (wd - 1) * sw - 2 * pw + dw * (s - 1) + opw + 1
    out = np.zeros((n, cg * groups, oh, ow), np.int64)
    for ci in range(cin):
        g = ci // (cin // groups)
        for i in range(h):
            for j in range(wd):
                for a in range(r):
                    for b in range(s):
                        y, z = i * sh - ph + a * dh, j * sw - pw + b * dw
                        if 0 <= y < oh and 0 <= z < ow:
                            out[:, g * cg:(g + 1) * cg, y, z] += x[:, ci, i, j, None] * w[ci, :, a, b]
    return out


@pytest.mark.parametrize("stride,padding,output_padding,groups,dilation", [(1, 0, 0, 1, 1), (2, 1, 1, 2, 1),
                                                                           (3, 2, 1, 1, 2), (1, 1, 1, 2, 2)])
def test_integer_conv_transpose_as_pytorchs(stride, padding, output_padding, groups, dilation):
    """PyTorch's cpu transposed convolutions take int64 tensors: exact sums, bias added (1-D and 3-D too)."""
    r = np.random.default_rng(1)
    x, w, b = r.integers(-20, 20, (2, 4, 4, 3)), r.integers(-9, 9, (4, 3, 3, 2)), r.integers(-9, 9, 3 * groups)
    ref = _conv_transpose2d_ref(x, w, stride, padding, output_padding, groups, dilation) + b[None, :, None, None]
    y = F.conv_transpose2d(mf.tensor(x), mf.tensor(w), mf.tensor(b), stride, padding, output_padding, groups,
                           dilation)
    assert y.dtype == mf.int64
    np.testing.assert_array_equal(y.numpy(), ref)
    y3 = F.conv_transpose3d(mf.tensor(x[:, :, None]), mf.tensor(w[:, :, None]), mf.tensor(b), stride,
                            (0, padding, padding), (0, output_padding, output_padding), groups, dilation)
    np.testing.assert_array_equal(y3.numpy()[:, :, 0], ref)  # (a depth of one: stride and dilation do not act)
    y1 = F.conv_transpose1d(mf.tensor(x[:, :, 0]), mf.tensor(w[:, :, 0]), None, stride, padding, output_padding,
                            groups, dilation)
    ref1 = _conv_transpose2d_ref(x[:, :, :1], w[:, :, :1], (1, stride), (0, padding), (0, output_padding), groups,
                                 (1, dilation))
    np.testing.assert_array_equal(y1.numpy(), ref1[:, :, 0])


# ---------------------------------------------------------------- layer arguments against PyTorch 2.13's numbers
@pytest.mark.parametrize("cls", [nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d,
                                 nn.ConvTranspose3d])
@pytest.mark.parametrize("channels, what", [((5, 4), "in_channels"), ((4, 5), "out_channels")])
def test_conv_layer_groups_not_dividing_names_the_count_as_pytorch(cls, channels, what):
    """PyTorch's ValueError names the count that groups does not divide: 'in_channels must be divisible by
    groups' (checked first), else 'out_channels ...'."""
    with pytest.raises(ValueError, match=f"{cls.__name__}: {what} must be divisible by groups"):
        cls(*channels, 3, groups=2)


# PyTorch 2.13: Conv1d(1, 1, 3, padding=2, padding_mode=mode, bias=False), weight [1, 10, 100], input [1, 2, 3, 4]
CONV1D_PADDING_MODES = {"zeros": [100, 210, 321, 432, 43, 4], "circular": [143, 214, 321, 432, 143, 214],
                        "reflect": [123, 212, 321, 432, 343, 234], "replicate": [111, 211, 321, 432, 443, 444]}


@pytest.mark.parametrize("mode", sorted(CONV1D_PADDING_MODES))
def test_conv1d_padding_modes_values_and_repr_as_pytorch(mode):
    m = nn.Conv1d(1, 1, 3, padding=2, padding_mode=mode, bias=False, dtype=mf.float64)
    with mf.no_grad():
        m.weight.copy_(mf.tensor([[[1.0, 10.0, 100.0]]], dtype=mf.float64))
    y = m(mf.tensor([[[1.0, 2.0, 3.0, 4.0]]], dtype=mf.float64))
    np.testing.assert_array_equal(y.numpy(), [[CONV1D_PADDING_MODES[mode]]])
    tail = "" if mode == "zeros" else f", padding_mode={mode}"
    assert repr(m) == f"Conv1d(1, 1, kernel_size=(3,), stride=(1,), padding=(2,), bias=False{tail})"


def test_conv_transpose1d_output_size_as_pytorch():
    """output_size picks the extra trailing element (PyTorch 2.13's numbers), given as the spatial size or as
    the full shape of an unbatched input; a size out of range is PyTorch's ValueError."""
    m = nn.ConvTranspose1d(1, 1, 3, stride=2, padding=1, bias=False, dtype=mf.float64)
    with mf.no_grad():
        m.weight.copy_(mf.tensor([[[1.0, 10.0, 100.0]]], dtype=mf.float64))
    x = mf.tensor([[[1.0, 2.0, 3.0]]], dtype=mf.float64)
    np.testing.assert_array_equal(m(x).numpy(), [[[10, 102, 20, 203, 30]]])
    np.testing.assert_array_equal(m(x, output_size=[6]).numpy(), [[[10, 102, 20, 203, 30, 300]]])
    np.testing.assert_array_equal(m(x[0], output_size=[1, 6]).numpy(), [[10, 102, 20, 203, 30, 300]])
    with pytest.raises(ValueError, match=r"valid sizes range from \[5\] to \[6\]"):
        m(x, output_size=[7])
    assert repr(m) == "ConvTranspose1d(1, 1, kernel_size=(3,), stride=(2,), padding=(1,), bias=False)"


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("cls, shape", [(nn.Conv1d, (1, 1, 5)), (nn.Conv2d, (1, 1, 1, 5)),
                                        (nn.Conv3d, (1, 1, 1, 1, 5))])
def test_negative_padding_crops_with_a_padding_mode_as_pytorch(mode, cls, shape):
    """A padding mode other than zeros takes a negative padding: F.pad crops the input first (PyTorch 2.13:
    Conv1d(1, 1, 2, padding=-1, padding_mode=mode), weight [1, 10], input [1, 2, 3, 4, 5] gives [32, 43]); with
    zeros it stays an error (PyTorch's 'negative padding is not supported' at the call)."""
    k = (1,) * (len(shape) - 3) + (2,)
    pad = (0,) * (len(shape) - 3) + (-1,)
    m = cls(1, 1, k, padding=pad, padding_mode=mode, bias=False, dtype=mf.float64)
    with mf.no_grad():
        m.weight.copy_(mf.tensor(np.array([1.0, 10.0]).reshape(m.weight.shape)))
    y = m(mf.tensor(np.arange(1.0, 6.0).reshape(shape)))
    np.testing.assert_array_equal(y.detach().numpy().ravel(), [32, 43])
    assert f"padding={pad}" in repr(m)
    with pytest.raises(RuntimeError, match="padding"):
        cls(1, 1, k, padding=pad)(mf.zeros(*shape))
