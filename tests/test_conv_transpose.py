"""ConvTranspose2d / F.conv_transpose2d against a direct float64 scatter, gradients against finite differences,
PyTorch on the GPU; and folding an evaluation BatchNorm into the convolution before it."""
import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
import minifused.nn as nn
from conftest import f64
from minifused.nn.fusion import fuse_conv_bn_eval
from minifused.testing import gradcheck
from opinfo import conv_transpose1d_ref, conv_transpose2d_ref

GEOMETRIES = [  # (N, Cin, H, W), (Cout/groups, kH, kW), stride, padding, output_padding, dilation, groups
    ((2, 3, 4, 5), (2, 3, 3), (1, 1), (0, 0), (0, 0), (1, 1), 1),
    ((1, 4, 3, 3), (3, 2, 2), (2, 2), (0, 0), (1, 0), (1, 1), 1),
    ((2, 4, 5, 4), (1, 3, 2), (2, 1), (1, 0), (1, 0), (1, 2), 2),
    ((3, 6, 4, 4), (2, 3, 3), (3, 2), (1, 1), (2, 1), (1, 1), 3),
]


@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_values_and_gradients_float64(rng, geometry):
    xs, (cg, kh, kw), stride, padding, output_padding, dilation, groups = geometry
    x = rng.standard_normal(xs)
    w = rng.standard_normal((xs[1], cg, kh, kw))
    b = rng.standard_normal(cg * groups)
    y = F.conv_transpose2d(mf.tensor(x), mf.tensor(w), mf.tensor(b), stride, padding, output_padding, groups, dilation)
    np.testing.assert_allclose(y.numpy(), conv_transpose2d_ref(x, w, b, stride, padding, output_padding, groups, dilation),
                               rtol=1e-10, atol=1e-12)
    args = [mf.tensor(a, requires_grad=True) for a in (x, w, b)]
    assert gradcheck(lambda x, w, b: F.conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation),
                     args)


def _adjoint(fn, a, gy):
    """The float64 gradient of sum(fn(a) * gy) for a linear ``fn``: fn of each unit array of a's shape, against gy."""
    grad = np.zeros(a.shape)
    for i in np.ndindex(a.shape):
        unit = np.zeros(a.shape)
        unit[i] = 1
        grad[i] = (fn(unit) * gy).sum()
    return grad


PAST_STRIDE = [  # output_padding of the stride or more in some dimension (PyTorch allows it below the dilation)
    # (N, Cin, *spatial), (Cout/groups, *kernel), stride, padding, output_padding, dilation, groups
    ((1, 2, 4, 4), (3, 3, 3), (1, 1), (0, 0), (1, 1), (2, 2), 1),
    ((2, 4, 3, 4), (2, 3, 2), (2, 1), (1, 0), (2, 1), (3, 2), 2),
    ((1, 6, 3, 2), (1, 2, 2), (1, 2), (1, 0), (2, 1), (3, 2), 3),
    ((2, 4, 5), (3, 3), 1, 0, 1, 2, 2),
    ((1, 2, 4), (2, 2), 2, 1, 2, 3, 1),
]


@pytest.mark.parametrize("geometry", PAST_STRIDE)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_output_padding_past_the_stride(device, rng, geometry, dtype):
    """There gy's convolution comes out larger than x: the input's gradient is cropped to x's shape; the output
    and every gradient equal the float64 scatter's (the gradients as its adjoint), in 2-D and 1-D, with groups."""
    xs, (cg, *kernel), stride, padding, output_padding, dilation, groups = geometry
    fn, ref = (F.conv_transpose2d, conv_transpose2d_ref) if len(xs) == 4 else (F.conv_transpose1d, conv_transpose1d_ref)
    x, w, b = rng.standard_normal(xs), rng.standard_normal((xs[1], cg, *kernel)), rng.standard_normal(cg * groups)
    args = [mf.tensor(a, dtype=getattr(mf, dtype), device=device, requires_grad=True) for a in (x, w, b)]
    y = fn(*args, stride, padding, output_padding, groups, dilation)
    want = ref(x, w, b, stride, padding, output_padding, groups, dilation)
    gy = rng.standard_normal(want.shape)
    (y * mf.tensor(gy, dtype=y.dtype, device=device)).sum().backward()
    tol = 1e-12 if dtype == "float64" else 1e-5
    np.testing.assert_allclose(f64(y), want, rtol=tol, atol=tol * 10)
    grads = [_adjoint(lambda u: ref(u, w, None, stride, padding, output_padding, groups, dilation), x, gy),
             _adjoint(lambda u: ref(x, u, None, stride, padding, output_padding, groups, dilation), w, gy),
             gy.sum(axis=tuple(i for i in range(gy.ndim) if i != 1))]
    for name, a, g in zip("xwb", args, grads):
        assert a.grad.shape == a.shape, name
        np.testing.assert_allclose(f64(a.grad), g, rtol=tol, atol=tol * 10 * np.abs(g).max(), err_msg=name)


def test_module_shapes_and_repr():
    m = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
    assert m.weight.shape == (8, 4, 3, 3) and m.bias.shape == (4,)
    assert m(mf.randn(2, 8, 5, 5)).shape == (2, 4, 10, 10)
    assert repr(m) == "ConvTranspose2d(8, 4, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), output_padding=(1, 1))"
    # PyTorch's order: dilation before output_padding, in 1-D as in 2-D
    assert repr(nn.ConvTranspose2d(4, 6, 3, 2, 1, output_padding=1, groups=2, dilation=2, bias=False)) == (
        "ConvTranspose2d(4, 6, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), dilation=(2, 2), "
        "output_padding=(1, 1), groups=2, bias=False)")
    assert repr(nn.ConvTranspose1d(2, 3, 3, stride=2, output_padding=1, dilation=2)) == (
        "ConvTranspose1d(2, 3, kernel_size=(3,), stride=(2,), dilation=(2,), output_padding=(1,))")
    bound = 1 / np.sqrt(4 * 9)
    assert np.abs(m.weight.numpy()).max() <= bound


def test_output_size_picks_the_output_padding(rng):
    """``forward(x, output_size)`` as PyTorch's: the spatial size, or a whole shape ending in it, sets the output
    padding among the sizes the stride allows (the module's own output_padding is left as it was); a size out of
    that range, or of the wrong length, is an error naming the range."""
    m = nn.ConvTranspose2d(4, 3, 3, stride=(2, 3), padding=1, dtype=mf.float64)
    x = mf.tensor(rng.standard_normal((2, 4, 5, 6)))
    for size, pad in [((9, 16), (0, 0)), ((10, 18), (1, 2)), ([2, 3, 10, 17], (1, 1)), (mf.zeros(2, 3, 9, 18).shape,
                                                                                          (0, 2))]:
        want = F.conv_transpose2d(x, m.weight, m.bias, m.stride, m.padding, pad)
        np.testing.assert_array_equal(m(x, output_size=size).numpy(), want.numpy())
    assert m.output_padding == (0, 0)
    np.testing.assert_array_equal(m(x[0], output_size=(3, 10, 17)).numpy(), m(x, output_size=(10, 17)).numpy()[0])
    for size, exc, words in [((11, 16), ValueError, r"output size of \[11, 16\], but valid sizes range from "
                                                    r"\[9, 16\] to \[10, 18\] \(for an input of \[5, 6\]\)"),
                             ((8, 16), ValueError, "valid sizes range"),
                             ((3, 10, 17), ValueError, "must have 2 or 4 elements, got 3"),
                             ("ab", TypeError, "output_size must be a sequence of ints")]:
        with pytest.raises(exc, match=words):
            m(x, output_size=size)


@pytest.mark.parametrize("cls", [nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d])
def test_channel_and_group_counts_that_are_no_ints_are_type_errors(cls):
    """PyTorch's layers refuse a float or bool channel or group count with a TypeError (its torch.empty of the
    weight's shape does), a bad int value with a ValueError."""
    for args, kw in (((4.0, 6, 3), {}), ((4, 6.0, 3), {}), ((True, 6, 3), {}), ((4, 6, 3), {"groups": 2.0})):
        with pytest.raises(TypeError, match=f"{cls.__name__}: in_channels, out_channels and groups must be ints"):
            cls(*args, **kw)
    for kw in ({"groups": 0}, {"groups": 4}):
        with pytest.raises(ValueError, match=cls.__name__):
            cls(4, 6, 3, **kw)


def test_float_or_bool_arguments_of_the_functionals_are_type_errors():
    """PyTorch refuses a float or bool stride / padding / groups of F.conv_transpose1d/2d/3d with a TypeError (it
    takes tuples of ints and an int); a bad int value stays a ValueError (or RuntimeError)."""
    calls = ((F.conv_transpose1d, (1, 4, 5), (4, 2, 3)), (F.conv_transpose2d, (1, 4, 5, 5), (4, 2, 3, 3)),
             (F.conv_transpose3d, (1, 4, 3, 3, 3), (4, 2, 2, 2, 2)))
    for fn, xs, ws in calls:
        x, w = mf.randn(*xs), mf.randn(*ws)
        for kw in ({"stride": 2.0}, {"stride": True}, {"padding": "same"}, {"groups": 2.0}):
            with pytest.raises(TypeError, match=fn.__name__):
                fn(x, w, **kw)
        for kw in ({"stride": 0}, {"groups": 0}):
            with pytest.raises(RuntimeError, match=fn.__name__):
                fn(x, w, **kw)


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_output_padding_takes_pytorchs_arguments_for_a_subclass_forward(rng, dims):
    """A subclass whose forward is PyTorch's, copied (weight standardisation here), calls ``_output_padding(input,
    output_size, stride, padding, kernel_size, num_spatial_dims, dilation)``: the given geometry wins, a missing
    dilation counts as 1 and no output_size gives the layer's own output padding, as PyTorch's."""
    base, conv = getattr(nn, f"ConvTranspose{dims}d"), getattr(F, f"conv_transpose{dims}d")

    class Standardised(base):
        def forward(self, input, output_size=None):
            output_padding = self._output_padding(input, output_size, self.stride, self.padding, self.kernel_size,
                                                  dims, self.dilation)
            return conv(input, self.weight - self.weight.mean(), self.bias, self.stride, self.padding,
                        output_padding, self.groups, self.dilation)

    m = Standardised(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dtype=mf.float64)
    x = mf.tensor(rng.standard_normal((2, 4) + (5,) * dims))
    w = m.weight.numpy() - m.weight.numpy().mean()
    for size, pad in ((None, 1), ((9,) * dims, 0), ((2, 6) + (10,) * dims, 1)):
        want = conv(x, mf.tensor(w), m.bias, 2, 1, pad, 2)
        np.testing.assert_allclose(m(x, size).numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match=r"valid sizes range from \[9(, 9)*\] to \[10(, 10)*\]"):
        m(x, (11,) * dims)
    d = base(4, 6, 3, dilation=2)
    assert tuple(d._output_padding(x, (16,) * dims, [3] * dims, [0] * dims, [2] * dims, dims)) == (2,) * dims
    assert tuple(d._output_padding(x, (16,) * dims, [3] * dims, [0] * dims, [2] * dims, dims, [2] * dims)) == (
        1,) * dims
    assert tuple(d._output_padding(x, None, [3] * dims, [0] * dims, [2] * dims, dims)) == (0,) * dims


def test_empty_batch_or_unbatched_input_gives_the_shapes_of_pytorch(rng):
    """An empty batch is fine (an empty output); an unbatched 1-D input is a batch of one."""
    assert F.conv_transpose2d(mf.randn(0, 4, 3, 3), mf.randn(4, 2, 3, 3)).shape == (0, 2, 5, 5)
    assert F.conv_transpose1d(mf.randn(0, 4, 3), mf.randn(4, 2, 3), stride=2).shape == (0, 2, 7)
    x, w, b = rng.standard_normal((4, 5)), rng.standard_normal((4, 3, 2)), rng.standard_normal(6)
    y = F.conv_transpose1d(mf.tensor(x), mf.tensor(w), mf.tensor(b), 2, 1, 1, 2, 2)
    np.testing.assert_allclose(y.numpy(), conv_transpose1d_ref(x[None], w, b, 2, 1, 1, 2, 2)[0], rtol=1e-10,
                               atol=1e-12)


def test_output_size_1d_takes_the_length_or_the_whole_shape_only(rng):
    """ConvTranspose1d's ``output_size``: (L,) or the whole shape, batched or not, as PyTorch's; another length
    (even one whose last element is a valid size) or a bare int is an error, not its last element read as L."""
    m = nn.ConvTranspose1d(4, 2, 3, stride=2, dtype=mf.float64)
    x = mf.tensor(rng.standard_normal((1, 4, 5)))
    for size, pad in [([11], 0), ((1, 2, 12), 1), (mf.zeros(12).shape, 1)]:
        want = F.conv_transpose1d(x, m.weight, m.bias, 2, 0, pad)
        np.testing.assert_array_equal(m(x, output_size=size).numpy(), want.numpy())
    np.testing.assert_array_equal(m(x[0], output_size=[12]).numpy(), m(x, output_size=[12]).numpy()[0])
    for size, exc, words in [((11, 12), ValueError, r"for a 3-D input, output_size must have 1 or 3 elements, got 2"),
                             ([20], ValueError, r"output size of \[20\], but valid sizes range from \[11\] to \[12\]"),
                             (12, TypeError, "output_size must be a sequence of ints")]:
        with pytest.raises(exc, match=words):
            m(x, output_size=size)


def test_output_size_must_hold_ints(rng):
    """A float or string output size is refused, as PyTorch's, rather than truncated (7.5 read as 7) or parsed;
    NumPy integers and one-element integer tensors are ints."""
    m = nn.ConvTranspose2d(4, 2, 3)
    x = mf.randn(1, 4, 5, 5)
    for size in ((7.5, 7), (7.0, 7), ("7", 7)):
        with pytest.raises(TypeError, match=r"ConvTranspose2d: output_size must be a sequence of ints"):
            m(x, output_size=size)
    for size in ((np.int64(7), 7), (mf.tensor(7), 7), [7, 7]):
        assert m(x, output_size=size).shape == (1, 2, 7, 7)


@pytest.mark.parametrize("fn,exc,words", [
    (lambda: F.conv_transpose2d(mf.randn(1, 3, 4, 4), mf.randn(4, 2, 3, 3)), ValueError,
     r"conv_transpose2d: input has 3 channels .* expects 4"),
    (lambda: F.conv_transpose2d(mf.randn(1, 4, 4, 4), mf.randn(4, 2, 3, 3), stride=2, output_padding=2), ValueError,
     "output_padding .* must be smaller than stride"),
    (lambda: F.conv_transpose2d(mf.randn(4, 4), mf.randn(4, 2, 3, 3)), ValueError, "4-D input"),
    (lambda: F.conv_transpose2d(mf.randn(1, 4, 4, 4), mf.randn(4, 2, 3, 3), bias=mf.randn(3)), ValueError,
     r"bias must have shape \(2,\)"),
    (lambda: nn.ConvTranspose2d(4, 3, 3, groups=2), ValueError, "out_channels must be divisible by groups"),
    (lambda: F.conv_transpose1d(mf.randn(1, 4, 4), mf.randn(4, 2, 3), stride=2, output_padding=2), ValueError,
     r"conv_transpose1d: output_padding \(2\) must be smaller than stride \(2\) or dilation \(1\)"),
    (lambda: F.conv_transpose2d(mf.randn(1, 4, 4, 4), mf.randn(4, 2, 3, 3, dtype=mf.float64)), TypeError,
     "one dtype"),
    # an empty image (not an empty batch or no channel) is an error, as PyTorch's, not an output of bias alone
    (lambda: F.conv_transpose2d(mf.randn(2, 4, 0, 3), mf.randn(4, 2, 3, 3)), ValueError,
     r"conv_transpose2d: expected an input of non-zero spatial size .* got shape \(2, 4, 0, 3\)"),
    (lambda: F.conv_transpose3d(mf.randn(2, 4, 2, 0, 3), mf.randn(4, 2, 1, 3, 3)), RuntimeError,
     r"conv_transpose3d: expected an input of non-zero spatial size .* got shape \(2, 4, 2, 0, 3\)"),
    # conv_transpose1d's errors name it and its 1-D shapes, not the (N, C, 1, L) view it runs conv_transpose2d on
    (lambda: F.conv_transpose1d(mf.randn(4, 0), mf.randn(4, 2, 3)), ValueError,
     r"conv_transpose1d: expected an input of non-zero length .* got shape \(4, 0\)"),
    (lambda: F.conv_transpose1d(mf.randn(2, 3, 5), mf.randn(4, 2, 3)), ValueError,
     r"conv_transpose1d: input has 3 channels \(shape \(2, 3, 5\)\) but weight of shape \(4, 2, 3\) expects 4"),
    (lambda: F.conv_transpose1d(mf.randn(3, 5), mf.randn(4, 2, 3)), ValueError,
     r"conv_transpose1d: input has 3 channels \(shape \(3, 5\)\)"),
    (lambda: F.conv_transpose1d(mf.randn(2, 4, 1), mf.randn(4, 2, 3), padding=3), ValueError,
     r"conv_transpose1d: the output would be empty .* output length -3"),
    (lambda: F.conv_transpose1d(mf.randn(2, 4, 5), mf.randn(4, 0, 3)), ValueError,
     r"conv_transpose1d: expected a weight with at least one input and one output channel, got weight of shape "
     r"\(4, 0, 3\)"),
    (lambda: F.conv_transpose1d(mf.randn(2, 4, 5), mf.randn(4, 2, 3), groups=3), ValueError,
     "conv_transpose1d: in_channels=4 is not divisible by groups=3"),
    (lambda: F.conv_transpose1d(mf.randn(2, 4, 5), mf.randn(4, 2, 3), mf.randn(3)), ValueError,
     r"conv_transpose1d: bias must have shape \(2,\)")])
def test_bad_input(fn, exc, words):
    with pytest.raises(exc, match=words):
        fn()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("geometry", GEOMETRIES + [((8, 64, 16, 16), (32, 4, 4), (2, 2), (1, 1), (0, 0), (1, 1), 1)])
def test_against_pytorch(torch, rng, dtype, geometry):
    xs, (cg, kh, kw), stride, padding, output_padding, dilation, groups = geometry
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal((xs[1], cg, kh, kw)) * 0.2).astype(np.float32)
    b = rng.standard_normal(cg * groups).astype(np.float32)
    gy_shape = None
    ours = [mf.tensor(a, device="cuda", dtype=getattr(mf, dtype), requires_grad=True) for a in (x, w, b)]
    theirs = [torch.tensor(a, device="cuda", dtype=getattr(torch, dtype), requires_grad=True) for a in (x, w, b)]
    yo = F.conv_transpose2d(*ours, stride, padding, output_padding, groups, dilation)
    yt = torch.nn.functional.conv_transpose2d(*theirs, stride, padding, output_padding, groups, dilation)
    gy_shape = tuple(yt.shape)
    assert yo.shape == gy_shape
    gy = rng.standard_normal(gy_shape).astype(np.float32)
    (yo * mf.tensor(gy, device="cuda", dtype=getattr(mf, dtype))).sum().backward()
    (yt * torch.tensor(gy, device="cuda", dtype=getattr(torch, dtype))).sum().backward()
    tol = 2e-4 if dtype == "float32" else 3e-2
    for a, t in [(yo, yt)] + [(o.grad, th.grad) for o, th in zip(ours, theirs)]:
        ref = t.detach().float().cpu().numpy()
        np.testing.assert_allclose(f64(a), ref, rtol=tol, atol=tol * (np.abs(ref).max() + 1))


# ---------------------------------------------------------------- conv + BatchNorm folding
@pytest.mark.parametrize("relu", [False, True])
def test_fuse_conv_bn_eval_equals_the_pair(rng, relu):
    conv = nn.Conv2d(3, 5, 3, padding=1, dtype=mf.float64)
    bn = nn.BatchNorm2d(5, dtype=mf.float64, activation="relu" if relu else None)
    for _ in range(3):
        bn(conv(mf.tensor(rng.standard_normal((4, 3, 6, 6)) * 2 + 1)))
    bn.weight._data[...] = rng.uniform(0.5, 2, 5)
    bn.bias._data[...] = rng.standard_normal(5)
    conv.eval(), bn.eval()
    fused = fuse_conv_bn_eval(conv, bn)
    x = mf.tensor(rng.standard_normal((2, 3, 6, 6)))
    np.testing.assert_allclose(fused(x).numpy(), bn(conv(x)).numpy(), rtol=1e-10, atol=1e-12)
    assert fused.activation == ("relu" if relu else None) and conv.activation is None


def test_fuse_conv_bn_eval_refuses_what_cannot_fold():
    conv, bn = nn.Conv2d(3, 5, 3), nn.BatchNorm2d(5)
    with pytest.raises(ValueError, match="evaluation mode"):
        fuse_conv_bn_eval(conv, bn)
    conv.eval(), bn.eval()
    with pytest.raises(ValueError, match="applies 'relu' before the BatchNorm"):
        fuse_conv_bn_eval(nn.Conv2d(3, 5, 3, activation="relu").eval(), bn)
    with pytest.raises(ValueError, match="BatchNorm has 4 features"):
        fuse_conv_bn_eval(conv, nn.BatchNorm2d(4).eval())
