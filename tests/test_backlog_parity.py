"""PyTorch's behaviour in corners found missing: Python sequences beside tensor operators (repetition through
``__index__``), addcmul / addcdiv / lerp computed in float32 for float16 and bfloat16 and with PyTorch's fused
multiply-add, reciprocal's gradient ``-g * (y * y)``, ``retain_grad`` and ``requires_grad`` flags, numbers that do
not fit an integer tensor's dtype (setitem, fill_, masked_fill, index_fill), and hook handles (``id``, ``with``).
Expected values are hand-computed or NumPy float64 computations of the formulas PyTorch documents or computes."""
import math

import numpy as np
import pytest

import minifused as mf
from minifused import backend
from tolerances import cpu

inf, nan = math.inf, math.nan
bf16 = backend.bfloat16


# ---------------------------------------------------------------- sequences beside operators
def test_a_one_element_integer_tensor_repeats_a_sequence():
    """``[0] * t`` and ``t * (1, 2)`` are Python's repetition, ``int(t)`` times (the operators give way to the
    sequence, which reads the tensor through ``__index__``), as with PyTorch."""
    assert [0] * cpu(3) == [0, 0, 0]
    assert cpu(3) * [0] == [0, 0, 0]
    assert (1, 2) * cpu(2) == (1, 2, 1, 2)
    assert cpu(2) * "ab" == "abab" and b"x" * cpu(3, dtype=mf.uint8) == b"xxx"
    assert [7] * cpu([2]) == [7, 7]
    assert [0] * cpu(True) == [0]
    size = cpu(2) * mf.Size([1, 2])
    assert size == (1, 2, 1, 2) and isinstance(size, mf.Size)


def test_other_sequence_operands_are_type_errors():
    """A float tensor or one of several elements is no repeat count; other operators have no meaning for a sequence
    (nor for a string, None or a range, which NumPy would have taken as data)."""
    for fn in (lambda: [0] * cpu(3.0), lambda: [0] * cpu([1, 2]), lambda: cpu([1.0, 2.0]) * [1, 2],
               lambda: cpu(3) + [1], lambda: [1] - cpu(3), lambda: cpu(3) / (2,), lambda: cpu(3) + "a",
               lambda: cpu(3) ** "a", lambda: cpu(3) & [1], lambda: cpu(3) * None, lambda: cpu(3) * range(2)):
        with pytest.raises(TypeError):
            fn()


# ---------------------------------------------------------------- addcmul, addcdiv, lerp
def _f16(rng, n, scale=1.0):
    return (rng.standard_normal(n) * scale).astype(np.float16)


@pytest.mark.parametrize("dtype", [np.float16, bf16])
def test_addcmul_addcdiv_lerp_round_once_in_16_bits(dtype):
    """float16 and bfloat16 operands are computed in float32 (PyTorch's opmath) and rounded to the dtype once: here
    the float64 result rounded to float32 and then to the dtype, where each 16-bit step used to round."""
    rng = np.random.default_rng(0)
    a, b, c = (_f16(rng, 256).astype(dtype) for _ in range(3))
    c = np.where(np.abs(c.astype(np.float32)) < 0.25, np.ones(1, dtype), c)
    w = rng.choice(np.array([0.25, -0.5, 0.75, 1.25, 0.375], np.float32), 256)
    a64, b64, c64, w64 = (v.astype(np.float64) for v in (a, b, c, w))
    ta, tb, tc = cpu(a), cpu(b), cpu(c)
    cases = [(mf.addcmul(ta, tb, tc), a64 + b64 * c64), (mf.addcmul(ta, tb, tc, value=-2), a64 - 2 * b64 * c64),
             (mf.addcdiv(ta, tb, tc, value=4), a64 + 4 * b64 / c64),
             (mf.lerp(ta, tb, cpu(w.astype(dtype))), a64 + w64 * (b64 - a64)),
             (mf.lerp(ta, tb, 0.25), a64 + 0.25 * (b64 - a64)), (mf.lerp(ta, tb, 0.75), a64 + 0.75 * (b64 - a64))]
    for got, want in cases:
        assert got.dtype == dtype
        np.testing.assert_array_equal(got.numpy().astype(np.float64), want.astype(np.float32).astype(dtype))


def test_addcmul_addcdiv_lerp_do_not_overflow_float16_on_the_way():
    """Intermediate values past float16's 65504 (a product, a quotient, end - input) stay finite in float32."""
    h = lambda *v: cpu(list(v), dtype=mf.float16)  # noqa: E731
    assert mf.addcmul(h(-6e4), h(300.0), h(300.0)).tolist() == [3e4]
    assert mf.addcdiv(h(-6e4), h(6e4), h(0.5)).tolist() == [6e4]
    assert mf.lerp(h(-6e4), h(6e4), 0.5).tolist() == [0.0]
    assert mf.lerp(h(-6e4), h(6e4), h(0.25)).tolist() == [-3e4]
    x = h(-6e4)
    x.addcmul_(h(300.0), h(300.0))
    assert x.tolist() == [3e4]


def test_addcmul_and_lerp_fuse_their_multiply_add_in_float32():
    """PyTorch's addcmul and lerp kernels round ``value * t1 * t2 + input`` and ``w * (end - input) + input`` (``(w -
    1) * (end - input) + end`` for a weight from 0.5) as one fused multiply-add: the exact float64 result rounded to
    float32 once, which differs from a rounded product then a rounded sum in about a third of the entries."""
    rng = np.random.default_rng(7)
    a, b, c = (rng.standard_normal(64).astype(np.float32) for _ in range(3))
    a64, b64, c64 = (v.astype(np.float64) for v in (a, b, c))
    got = mf.addcmul(cpu(a), cpu(b), cpu(c)).numpy()
    np.testing.assert_array_equal(got, (a64 + b64 * c64).astype(np.float32))
    d64 = (b - a).astype(np.float64)  # (end - input, in float32 first)
    w = np.float32(0.3)
    np.testing.assert_array_equal(mf.lerp(cpu(a), cpu(b), 0.3).numpy(), (a64 + np.float64(w) * d64).astype(np.float32))
    coeff = np.float64(np.float32(0.8) - np.float32(1))
    np.testing.assert_array_equal(mf.lerp(cpu(a), cpu(b), 0.8).numpy(), (b64 + coeff * d64).astype(np.float32))


def test_addcmul_addcdiv_integer_and_bool_operands():
    """PyTorch's rules: an integer result takes ``value`` truncated to an integer (2.7 counts as 2, 0.5 as 0; NaN
    is refused); addcdiv of integer tensors is refused (it used to floor-divide); bool tensors are refused."""
    i = lambda *v: cpu(list(v))  # noqa: E731
    out = mf.addcmul(i(1, 2), i(2, 3), i(3, 4), value=2.7)
    assert out.dtype == mf.int64 and out.tolist() == [1 + 2 * 6, 2 + 2 * 12]
    assert mf.addcmul(i(1), i(2), i(3), value=0.5).tolist() == [1]
    with pytest.raises(RuntimeError, match="addcmul: value cannot be converted to type int64"):
        mf.addcmul(i(1), i(2), i(3), value=nan)
    assert mf.addcmul(cpu([1.0]), i(2), i(3), value=0.5).tolist() == [4.0]
    with pytest.raises(RuntimeError, match="addcdiv: integer division"):
        mf.addcdiv(i(1), i(2), i(3))
    with pytest.raises(RuntimeError, match="addcdiv: integer division"):
        mf.addcdiv(cpu([1.0]), i(2), cpu([True]))
    with pytest.raises(NotImplementedError, match="addcmul"):
        mf.addcmul(cpu([True]), cpu([True]), cpu([True]))


# ---------------------------------------------------------------- reciprocal's gradient
def _reciprocal_grad(x, g, dtype):
    t = cpu(np.array(x, dtype), requires_grad=True)
    mf.reciprocal(t).backward(cpu(np.array(g, dtype)))
    return t.grad.numpy()


def test_reciprocal_gradient_squares_the_result_first():
    """``-g * (y * y)``: at a tiny x, y * y overflows to infinity in float32 and float16 even for a tiny g (the
    order ``(-g * y) * y`` stayed finite); elsewhere the rounding of that order, in NumPy float32."""
    assert _reciprocal_grad([1e-20], [1e-30], np.float32).tolist() == [-inf]
    assert _reciprocal_grad([2e-3], [1e-4], np.float16).tolist() == [-inf]
    rng = np.random.default_rng(1)
    x, g = rng.uniform(0.01, 10, 512).astype(np.float32), rng.standard_normal(512).astype(np.float32)
    y = np.float32(1) / x
    np.testing.assert_array_equal(_reciprocal_grad(x, g, np.float32), -g * (y * y))


def test_reciprocal_gradient_rounds_each_product_in_bfloat16():
    """In bfloat16 the square is rounded to bfloat16 before the product with g, as PyTorch's two bfloat16 ops."""
    x, g = np.array([3.0, 1e-4, 1e-5], bf16), np.array([1e-20, 1e-3, 1e-6], bf16)
    y = (np.float32(1) / x.astype(np.float32)).astype(bf16).astype(np.float32)
    square = (y * y).astype(bf16).astype(np.float32)
    want = (-g.astype(np.float32) * square).astype(bf16)
    np.testing.assert_array_equal(_reciprocal_grad(x, g, bf16), want)


# ---------------------------------------------------------------- retain_grad and requires_grad flags
def test_retain_grad_refuses_a_tensor_that_requires_no_grad():
    for t in (cpu([1.0]), cpu([1]), cpu([1.0], requires_grad=True).detach()):
        with pytest.raises(RuntimeError, match="can't retain_grad on Tensor that has requires_grad=False"):
            t.retain_grad()
    leaf = cpu([1.0, 2.0], requires_grad=True)
    with mf.no_grad():
        y = leaf * 2
    with pytest.raises(RuntimeError, match="requires_grad=False"):
        y.retain_grad()
    leaf.retain_grad()  # (a leaf keeps its gradient anyway)
    y = leaf * 3
    y.retain_grad()
    (y * y).sum().backward()
    assert y.grad.tolist() == [6.0, 12.0] and leaf.grad.tolist() == [18.0, 36.0]


@pytest.mark.parametrize("flag", [0, 1, 1.0, None, "yes", np.True_, [1]])
def test_requires_grad_flags_must_be_bools(flag):
    """PyTorch takes only a bool: requires_grad_(1), ``t.requires_grad = 1`` and the factories' requires_grad=1 are
    refused rather than read as truth values."""
    t = cpu([1.0])
    with pytest.raises(TypeError, match="requires_grad_\\(\\): argument 'requires_grad' must be bool"):
        t.requires_grad_(flag)
    with pytest.raises(TypeError, match="requires_grad must be a bool"):
        t.requires_grad = flag
    makers = [lambda: mf.tensor([1.0], requires_grad=flag), lambda: mf.nn.Parameter(mf.ones(1), requires_grad=flag)]
    if flag is not None:  # (the factories take None for their default, as PyTorch's)
        makers += [lambda: mf.zeros(2, requires_grad=flag), lambda: mf.full((2,), 1.0, requires_grad=flag)]
    else:
        assert not mf.zeros(2, requires_grad=None).requires_grad
    for make in makers:
        with pytest.raises(TypeError, match="must be a bool"):
            make()
    assert not t.requires_grad
    assert t.requires_grad_(True).requires_grad and not t.requires_grad_(False).requires_grad


# ---------------------------------------------------------------- numbers into integer tensors
@pytest.mark.parametrize("dtype, value", [(mf.int64, nan), (mf.int64, inf), (mf.int32, -inf), (mf.int64, 1e20),
                                          (mf.int32, 2 ** 40), (mf.int8, 300), (mf.uint8, -256), (mf.int16, 4e4)])
def test_numbers_that_do_not_fit_an_integer_tensor_are_refused(dtype, value):
    """NaN, infinities and numbers beyond the dtype's range: PyTorch's "value cannot be converted" error, naming the
    op (NumPy wrote NaN as the smallest integer, or raised its own errors)."""
    mask, index = cpu([True, False, True]), cpu([0, 2])
    writes = {"setitem": lambda t: t.__setitem__(0, value), "fill_": lambda t: t.fill_(value),
              "masked_fill": lambda t: t.masked_fill(mask, value),
              "masked_fill_": lambda t: t.masked_fill_(mask, value),
              "index_fill": lambda t: t.index_fill(0, index, value),
              "index_fill_": lambda t: t.index_fill_(0, index, value)}
    for op, write in writes.items():
        t = cpu([1, 2, 3], dtype=dtype)
        with pytest.raises(RuntimeError, match=f"{op}: value cannot be converted to type {np.dtype(dtype).name} "
                                               f"without overflow"):
            write(t)
        assert t.tolist() == [1, 2, 3]


def test_numbers_that_fit_an_integer_tensor_are_written_as_pytorch_writes_them():
    """Floats truncated toward zero; negative ints wrapped into an unsigned dtype (down to minus its largest value);
    anything nonzero is True in a bool tensor."""
    t = cpu([1, 2, 3])
    t[0] = -2.7
    t[1:] = 2.7
    assert t.tolist() == [-2, 2, 2]
    u = cpu([1, 2, 3], dtype=mf.uint8)
    u[0] = -1
    assert u.tolist() == [255, 2, 3]
    assert u.fill_(-255).tolist() == [1, 1, 1]
    assert cpu([1, 2, 3], dtype=mf.uint8).masked_fill(cpu([True, False, True]), -2).tolist() == [254, 2, 254]
    assert cpu([1, 2, 3], dtype=mf.int8).index_fill(0, cpu([1]), -127.9).tolist() == [1, -127, 3]
    b = cpu([False, False])
    b[0] = nan
    assert b.tolist() == [True, False] and b.fill_(1e30).tolist() == [True, True]


# ---------------------------------------------------------------- hook handles
def test_tensor_hook_handles_have_ids_and_remove_on_leaving_a_with_block():
    seen = []
    x = cpu([1.0, 2.0], requires_grad=True)
    with x.register_hook(lambda g: seen.append(g.tolist())) as handle:
        (x * 2).sum().backward()
    (x * 2).sum().backward()
    other = x.register_hook(lambda g: None)
    assert isinstance(handle.id, int) and isinstance(other.id, int) and handle.id != other.id
    y = x * 3
    with y.register_hook(lambda g: seen.append(("y", g.tolist()))):
        y.sum().backward()
    x.register_post_accumulate_grad_hook(lambda p: seen.append("post")).remove()
    with x.register_post_accumulate_grad_hook(lambda p: seen.append("post")):
        (x * 3).sum().backward()
    (x * 3).sum().backward()
    assert seen == [[2.0, 2.0], ("y", [1.0, 1.0]), "post"]


def test_fractional_norm_gradient_of_float16_keeps_tiny_ratios():
    """d/dx of the p = 0.5 norm is sign(x) (|x| / norm) ** -0.5: a float16 |x| / norm far below 1 is subnormal, so
    the ratio is formed in float32 and the gradient rounded once (to within float16's rounding of float64)."""
    rng = np.random.default_rng(0)
    v = (rng.standard_normal(120) * 3).astype(np.float16)
    v[5] = np.float16(0.004)
    x = mf.tensor(v, requires_grad=True)
    mf.linalg.vector_norm(x, 0.5).backward()
    x64 = v.astype(np.float64)
    norm = (np.abs(x64) ** 0.5).sum() ** 2
    expected = np.sign(x64) * (np.abs(x64) / norm) ** -0.5
    np.testing.assert_allclose(x.grad.numpy().astype(np.float64), expected, rtol=2e-3)


def test_a_gradient_reaches_its_input_in_the_inputs_dtype():
    """A backward that returns a wider gradient (a custom one, or an array op that widens) hands its input the
    gradient in that input's dtype, as PyTorch's engine casts it: the hook of the float32 intermediate sees
    float32."""
    class Widen(mf.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return (g * 2).double()

    seen = []
    x = mf.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    h.register_hook(lambda g: seen.append(g.dtype))
    Widen.apply(h).sum().backward()
    assert seen == [mf.float32] and x.grad.dtype == mf.float32
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 6.0])


@pytest.mark.parametrize("other", ["ab", b"ab", None])
def test_functional_arithmetic_refuses_strings_and_none(other):
    """``add(t, 'ab')`` built a tensor of strings; PyTorch raises a TypeError naming the argument."""
    t = mf.tensor([1.0, 2.0])
    for call in (lambda: mf.add(t, other), lambda: t.add(other), lambda: mf.mul(t, other)):
        with pytest.raises(TypeError, match="expected a tensor or a number"):
            call()


def test_float64_to_float16_rounds_through_float32():
    """PyTorch's half is made from a float: a double rounds to float32, then to float16 (a tie there goes to even).
    8.941406670208732 is 8.94140625 in float32, halfway between float16's 8.9375 and 8.9453125: 8.9375, where
    a direct rounding gives 8.9453125; 1 + 2**-11 + 2**-30 likewise gives 1.0."""
    values = [8.941406670208732, 1 + 2.0 ** -11 + 2.0 ** -30, 1 + 2.0 ** -8 + 2.0 ** -30, 1e300]
    expected = [8.9375, 1.0, 1.00390625, np.inf]
    x = mf.tensor(values, dtype=mf.float64, requires_grad=True)
    for got in (x.half(), x.to(mf.float16), mf.tensor(values, dtype=mf.float16),
                mf.tensor(np.array(values), dtype=mf.float16)):
        assert got.dtype == mf.float16
        np.testing.assert_array_equal(got.double().detach().numpy(), expected)
    g = mf.tensor(values, dtype=mf.float64)
    h = mf.tensor([1.0] * 4, dtype=mf.float16, requires_grad=True)
    (h.double() * g).sum().backward()  # the float64 gradient reaches the float16 input the same way
    np.testing.assert_array_equal(h.grad.double().numpy(), expected)
