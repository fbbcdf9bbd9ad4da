"""Dtypes in arithmetic as PyTorch computes them: integer true division by numbers outside the integer dtype,
float16 / bfloat16 products and quotients with a number in float32 rounded once ("opmath"), ``add``'s alpha there,
in-place ops with a wider operand (computed wide, rounded once; a narrower dtype of the same kind accepted),
``copy_`` into integer tensors (no gradient), ``finfo``'s Python floats, Python containers and NumPy arrays as
operands, ``copy_``'s shape error, and the bool arithmetic PyTorch refuses. Expected values are hand-computed or
computed with NumPy (in float32 where PyTorch computes in float32, then rounded to the tensor's dtype)."""
import numpy as np
import pytest

import minifused as mf
from minifused import backend
from minifused.ops._common import float_operands
from tolerances import cpu

F16, BF16 = np.dtype(np.float16), backend.bfloat16


def values(dtype, n=600, seed=0):
    """``n`` numbers of many magnitudes (and a few edge values) in ``dtype``, as a NumPy array."""
    rng = np.random.default_rng(seed)
    v = np.clip(rng.standard_normal(n) * 10.0 ** rng.uniform(-6, 4.5, n), -65504, 65504)
    return np.concatenate([v, [6e4, -6e4, 1e-3, 0.0, 1.0, 3000.0]]).astype(np.float32).astype(dtype)


def opmath(x, fn, s):
    """``fn(x, s)`` as PyTorch computes it for a 16-bit x: in float32 with the number in float32, rounded once."""
    with np.errstate(all="ignore"):
        return fn(x.astype(np.float32), np.float32(s)).astype(x.dtype)


def same(got, want):
    np.testing.assert_array_equal(got.float().numpy(), np.asarray(want).astype(np.float32))


# ---------------------------------------------------------------- integer true division
def test_integer_true_division_by_numbers_outside_the_dtype():
    three = np.float32(3)
    same(cpu([3], dtype=mf.int32) / 2 ** 40, [three / np.float32(2 ** 40)])  # 2.7e-12, not 3 / wrapped 0
    same(cpu([3], dtype=mf.uint8) / -1, [-3.0])  # not 3 / 255
    same(cpu([3], dtype=mf.int8) / 300, [three / np.float32(300)])  # not 3 / 44
    same(cpu([3], dtype=mf.int8) / cpu(300), [three / np.float32(300)])  # a 0-d int64 tensor: not cast to int8
    same(cpu([3], dtype=mf.int8).div(cpu(-1000)), [three / np.float32(-1000)])
    assert (cpu([3], dtype=mf.int8) / 300).dtype == mf.float32


def test_float_operands_cast_integers_straight_to_float():
    """The operands that atan2, copysign and xlogy need: no integer wrapped first."""
    a, b = float_operands("atan2", cpu([3], dtype=mf.uint8), cpu(-1))
    assert a.dtype == b.dtype == mf.float32 and b.item() == -1.0 and a.tolist() == [3.0]
    a, b = float_operands("copysign", cpu([3], dtype=mf.uint8), -1)
    assert a.dtype == mf.float32 and b == -1
    a, b = float_operands("xlogy", cpu([1, 2], dtype=mf.int32), cpu(0.5, dtype=mf.float64))
    assert a.dtype == b.dtype == mf.float64  # a 0-d float tensor beside integers sets the dtype


# ---------------------------------------------------------------- float16 / bfloat16 with numbers
def test_float16_with_numbers_hand_values():
    h = mf.float16
    assert (cpu([3000.0], dtype=h) / 70000.0).tolist() == [0.0428466796875]
    assert (cpu([1e-3], dtype=h) * 70000.0).tolist() == [70.0]  # not inf: 70000 is no float16
    assert (cpu([6e4], dtype=h) / 1e5).tolist() == [0.60009765625]
    assert (cpu([6e4], dtype=h) / 100000).tolist() == [0.60009765625]
    assert (cpu([6e4], dtype=h) * 1e-8).tolist() == [0.0005998611450195312]
    assert (cpu([6e4], dtype=h) / cpu(1e5)).tolist() == [0.60009765625]  # a 0-d float32 tensor as the number
    assert (cpu([1e-3], dtype=h) * cpu(100000)).tolist() == [100.0625]  # a 0-d int64 tensor
    assert (cpu(1e-8) * cpu([6e4], dtype=h)).tolist() == [0.0]  # a 0-d tensor first: cast to float16, as PyTorch
    # a number over a tensor is the tensor's reciprocal (rounded to float16) times the number
    # (1 / 60000 in float16: 280 * 2**-24; times 1e5 in float32: 1.66893..., to float16: 1.6689453125; 1e5 / 6e4
    # rounded once would be 1.6669921875)
    assert (1e5 / cpu([6e4], dtype=h)).tolist() == [1.6689453125]
    # add and sub take the number rounded to the tensor's dtype first
    assert (cpu([-6e4], dtype=h) + 7e4).tolist() == [float("inf")]


@pytest.mark.parametrize("dtype", [F16, BF16])
@pytest.mark.parametrize("s", [0.1, 0.3, 1.0039, 7e4, 1e-8, 33333, 100000])
def test_16bit_products_and_quotients_with_a_number_round_once(dtype, s):
    x = values(dtype)
    t = cpu(x)
    same(t * s, opmath(x, np.multiply, s))
    same(s * t, opmath(x, np.multiply, s))
    same(t / s, opmath(x, np.divide, s))
    same(t / cpu(s, dtype=mf.float32 if isinstance(s, float) else mf.int64), opmath(x, np.divide, s))
    same(t.clone().mul_(s), opmath(x, np.multiply, s))
    same(t.clone().div_(s), opmath(x, np.divide, s))
    same(t.clone().mul_(cpu(s, dtype=mf.float32)), opmath(x, np.multiply, np.float32(s)))


@pytest.mark.parametrize("dtype", [F16, BF16])
@pytest.mark.parametrize("s", [0.1, 1.0039, 0.3, 257])
def test_16bit_sums_with_a_number_round_it_first(dtype, s):
    x = values(dtype)
    s16 = np.float32(np.asarray(s, np.float32).astype(dtype))
    with np.errstate(all="ignore"):
        same(cpu(x) + s, (x.astype(np.float32) + s16).astype(dtype))
        same(cpu(x) - s, (x.astype(np.float32) - s16).astype(dtype))
        same(cpu(x).add_(s), (x.astype(np.float32) + s16).astype(dtype))
    # bfloat16 256 + 1.0039: the number is 1.0 in bfloat16, 257 a tie, to even: 256 (258 from 1.0039 unrounded)
    assert (cpu([256.0], dtype=mf.bfloat16) + 1.0039).tolist() == [256.0]


@pytest.mark.parametrize("dtype", [F16, BF16])
@pytest.mark.parametrize("alpha", [0.1, 0.3, 1.0039])
def test_16bit_add_with_alpha_rounds_once(dtype, alpha):
    x, y = values(dtype, 512), values(dtype, 512, seed=1)
    al = np.float32(np.asarray(alpha, np.float32).astype(dtype))  # alpha in the tensors' dtype, as PyTorch
    with np.errstate(all="ignore"):
        want = (x.astype(np.float32) + al * y.astype(np.float32)).astype(dtype)
        want_sub = (x.astype(np.float32) - al * y.astype(np.float32)).astype(dtype)
    same(mf.add(cpu(x), cpu(y), alpha=alpha), want)
    same(cpu(x).add_(cpu(y), alpha=alpha), want)
    same(mf.sub(cpu(x), cpu(y), alpha=alpha), want_sub)
    # the gradient of the scaled operand: g * alpha in float32, rounded once
    a, b = cpu(x.astype(np.float32)).to(dtype).requires_grad_(), cpu(y.astype(np.float32)).to(dtype).requires_grad_()
    g = values(dtype, 512, seed=2)
    mf.add(a, b, alpha=alpha).backward(cpu(g))
    same(b.grad, (g.astype(np.float32) * np.float32(alpha)).astype(dtype))
    same(a.grad, g)


def test_float32_number_over_tensor_is_reciprocal_times_number():
    x = np.random.default_rng(3).uniform(0.1, 10, 4096).astype(np.float32)
    same(3.0 / cpu(x), (np.float32(1) / x) * np.float32(3))
    same(7 / cpu([1, 2, 3, 6]), (np.float32(1) / np.float32([1, 2, 3, 6])) * np.float32(7))


def test_16bit_product_gradient():
    x = cpu([6e4, 1e-3, 2.0], dtype=mf.float16, requires_grad=True)
    (x / 1e5).backward(cpu([1.0, 1.0, 3.0], dtype=mf.float16))
    same(x.grad, (np.float32([1.0, 1.0, 3.0]) / np.float32(1e5)).astype(F16))
    assert x.grad.dtype == mf.float16


# ---------------------------------------------------------------- in-place with a wider operand
@pytest.mark.parametrize("dtype", [F16, BF16])
def test_inplace_with_a_wider_operand_rounds_once(dtype):
    x = values(dtype, 400)
    y = np.random.default_rng(4).uniform(0.5, 2, x.size).astype(np.float32)
    with np.errstate(all="ignore"):
        for method, ref in (("add_", np.add), ("sub_", np.subtract), ("mul_", np.multiply),
                            ("div_", np.divide)):
            same(getattr(cpu(x), method)(cpu(y)), ref(x.astype(np.float32), y).astype(dtype))
        t = cpu(x)
        t += cpu(y)
        same(t, (x.astype(np.float32) + y).astype(dtype))
    assert cpu([1.0], dtype=mf.float16).add_(cpu([1.001])).tolist() == [2.001953125]  # not 2.0 (1.001 as float16)


def test_inplace_wider_operand_gradients():
    y = cpu([1.001, 2.5, -3.0], requires_grad=True)
    x = cpu([1.0, 2.0, 4.0], dtype=mf.float16, requires_grad=True)
    out = x.clone().add_(y)
    same(out, (np.float32([1.0, 2.0, 4.0]) + np.float32([1.001, 2.5, -3.0])).astype(F16))  # 2.001953125, not 2
    out.mul_(y).backward(cpu([1.0, 1.0, 1.0], dtype=mf.float16))
    assert out.dtype == x.grad.dtype == mf.float16 and y.grad.dtype == mf.float32
    # d(out * y)/dy = out_before + y (out_before = x + y, rounded to float16); d/dx = y, rounded to float16
    before = (np.float32([1.0, 2.0, 4.0]) + np.float32([1.001, 2.5, -3.0])).astype(F16).astype(np.float32)
    np.testing.assert_allclose(y.grad.numpy(), before + np.float32([1.001, 2.5, -3.0]), rtol=2e-3)
    same(x.grad, np.float32([1.001, 2.5, -3.0]).astype(F16))


def test_inplace_accepts_a_narrower_dtype_of_the_same_kind():
    assert mf.ones(2).addcmul_(mf.ones(2, dtype=mf.float64), mf.ones(2, dtype=mf.float64), value=0.5).tolist() == \
        [1.5, 1.5]
    assert mf.ones(2, dtype=mf.bfloat16).addcdiv_(mf.ones(2), mf.ones(2), value=0.5).tolist() == [1.5, 1.5]
    assert mf.full((2,), 5.0).fmod_(mf.full((2,), 3.0, dtype=mf.float64)).tolist() == [2.0, 2.0]
    assert mf.full((2,), 5.0).remainder_(mf.full((2,), 3.0, dtype=mf.float64)).tolist() == [2.0, 2.0]
    assert mf.full((2,), 5.0).floor_divide_(mf.full((2,), 3.0, dtype=mf.float64)).tolist() == [1.0, 1.0]
    t = mf.full((2,), 5, dtype=mf.int32).floor_divide_(mf.full((2,), 3))
    assert t.tolist() == [1, 1] and t.dtype == mf.int32
    t = mf.ones(2, dtype=mf.int8)
    t &= mf.ones(2, dtype=mf.int64)
    assert t.tolist() == [1, 1] and t.dtype == mf.int8
    # a higher kind still refused
    with pytest.raises(RuntimeError, match="can't be cast"):
        mf.full((2,), 5, dtype=mf.int32).fmod_(mf.full((2,), 3.0))
    with pytest.raises(RuntimeError, match="can't be cast"):
        mf.ones(2, dtype=mf.bool).__ior__(mf.ones(2, dtype=mf.int8))


# ---------------------------------------------------------------- copy_
@pytest.mark.parametrize("dtype", [mf.int64, mf.bool])
def test_copy_into_a_non_floating_tensor_records_nothing(dtype):
    w = cpu([1.5, 2.0], requires_grad=True)
    x = mf.zeros(2, dtype=dtype)
    x.copy_(w)
    assert not x.requires_grad and x.grad_fn is None
    (x.float() * w).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.array([1.5, 2.0]).astype(dtype).astype(np.float32))


def test_copy_shape_mismatch_names_the_op_and_shapes():
    with pytest.raises(RuntimeError, match=r"copy_: the source's shape \[3\] does not broadcast to the "
                                           r"destination's \[2\]"):
        mf.zeros(2).copy_(mf.ones(3))
    with pytest.raises(RuntimeError, match=r"copy_.*\[2\].*\[2, 3\]"):
        mf.zeros(2, 3).copy_(mf.ones(2))
    assert mf.zeros(2, 3).copy_(mf.ones(3)).tolist() == [[1.0] * 3] * 2  # broadcasting still works


# ---------------------------------------------------------------- finfo
def test_finfo_gives_python_floats():
    f = mf.finfo(mf.float16)
    assert f.max + 100 == 65604.0  # a NumPy float16 would overflow to inf
    assert (f.bits, f.eps, f.max, f.min, f.tiny, f.smallest_normal) == (16, 2.0 ** -10, 65504.0, -65504.0,
                                                                          2.0 ** -14, 2.0 ** -14)
    assert type(f.eps) is float and type(f.bits) is int and f.resolution == 0.001 and f.dtype == "float16"
    b = mf.finfo(mf.bfloat16)
    assert (b.eps, b.resolution, b.max) == (2.0 ** -7, 0.01, float((2 - 2.0 ** -7) * 2.0 ** 127))
    assert mf.finfo().dtype == "float32" and mf.finfo(mf.float64).eps == np.finfo(np.float64).eps
    assert type(mf.finfo(mf.float32).tiny) is float
    with pytest.raises(TypeError, match="iinfo"):
        mf.finfo(mf.int32)


# ---------------------------------------------------------------- containers and arrays as operands
@pytest.mark.parametrize("fn", [lambda x: x + [1, 2], lambda x: x * [1, 2], lambda x: x - (1, 2),
                                lambda x: x / [1, 2], lambda x: mf.add(x, [1, 2]), lambda x: x.mul([1, 2]),
                                lambda x: [1, 2] + x])
def test_python_containers_are_no_operands(fn):
    with pytest.raises(TypeError):
        fn(mf.ones(2))


def test_ordering_with_a_numpy_array_refused_equality_compares():
    x, a = mf.ones(2), np.array([1.0, 2.0])
    for fn in (lambda: x < a, lambda: x >= a, lambda: a < x, lambda: mf.lt(x, a)):
        with pytest.raises(TypeError):
            fn()
    assert (x == a).tolist() == [True, False]
    assert (x < np.float64(2.0)).tolist() == [True, True]  # a NumPy scalar is a number
    assert (x + a).tolist() == [2.0, 3.0]


# ---------------------------------------------------------------- bool arithmetic PyTorch refuses
def b():
    return mf.tensor([True, False])


@pytest.mark.parametrize("fn", [lambda: b() - 1, lambda: 1 - b(), lambda: b() - b(), lambda: b() - True,
                                lambda: mf.ones(2) - b(), lambda: mf.ones(2) - True, lambda: mf.sub(b(), 1, alpha=2),
                                lambda: b().sub_(b()), lambda: mf.ones(2).sub_(True),
                                lambda: mf.ones(2).sub_(b(), alpha=2), lambda: b().__isub__(b()), lambda: -b()])
def test_bool_subtraction_and_negation_refused(fn):
    with pytest.raises(RuntimeError, match="bool tensor"):
        fn()


@pytest.mark.parametrize("fn", [lambda: b() ** b(), lambda: True ** b(), lambda: b() ** mf.tensor(True),
                                lambda: mf.pow(b(), b()), lambda: b().abs(), lambda: mf.abs(b()),
                                lambda: b().clamp(min=False), lambda: b().clamp(False, True),
                                lambda: b().clamp(max=True)])
def test_bool_ops_not_implemented(fn):
    with pytest.raises(NotImplementedError):
        fn()


def test_bool_ops_that_stay_allowed():
    assert (b() ** True).tolist() == [True, False] and (b() ** True).dtype == mf.bool
    assert (b() ** False).tolist() == [True, True] and (b() ** False).dtype == mf.bool
    assert (b() ** 2).tolist() == [1, 0] and (b() ** 2).dtype == mf.int64
    assert b().clamp(0, 1).tolist() == [1, 0] and b().clamp(0, 1).dtype == mf.int64
    assert b().clamp(min=b()).tolist() == [True, False]
    assert b().add_(b(), alpha=-1).tolist() == [True, False]
    assert (b() + b()).tolist() == [True, False] and (b() * 2).tolist() == [2, 0]
    assert (b() / mf.tensor([True, True])).tolist() == [1.0, 0.0]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [F16, BF16, np.dtype(np.float32)])
@pytest.mark.parametrize("s", [0.1, 1.0039, 7e4, 1e-8, 100000])
def test_products_and_quotients_with_a_number_on_the_gpu(dtype, s):
    """ScaleByNumber's one kernel (act_fwd's scale / divide) gives the float32 opmath values bit for bit, forward and
    backward, C-contiguous and strided (float32: CuPy's and NumPy's float32 product and quotient)."""
    x = values(dtype)
    t = mf.tensor(x, device="cuda").requires_grad_()
    for fn, ref in ((lambda a: a * s, np.multiply), (lambda a: s * a, np.multiply), (lambda a: a / s, np.divide)):
        t.grad = None
        y = fn(t)
        g = values(dtype, seed=2)
        y.backward(mf.tensor(g, device="cuda"))
        assert y.grad_fn.name() == "ScaleByNumberBackward" and y.dtype == t.dtype
        np.testing.assert_array_equal(y.detach().float().cpu().numpy(), opmath(x, ref, s).astype(np.float32))
        np.testing.assert_array_equal(t.grad.float().cpu().numpy(), opmath(g, ref, s).astype(np.float32))
    m = mf.tensor(x[:600].reshape(20, 30), device="cuda").t()  # a strided view
    np.testing.assert_array_equal((m * s).float().cpu().numpy(),
                                  opmath(x[:600].reshape(20, 30).T, np.multiply, s).astype(np.float32))


def _sums_and_differences(dtype, s):
    """(op, its value computed as PyTorch does: the number rounded to the tensor's dtype, the sum or difference in
    float32 rounded once, and the input gradient's sign) of AddNumber's four forms."""
    with np.errstate(over="ignore"):  # (1e5 beside float16)
        r = float(np.asarray(s).astype(dtype).astype(np.float32))
    return ((lambda a: a + s, lambda x: opmath(x, np.add, r), 1), (lambda a: s + a, lambda x: opmath(x, np.add, r), 1),
            (lambda a: a - s, lambda x: opmath(x, np.subtract, r), 1),
            (lambda a: s - a, lambda x: opmath(x, lambda u, v: v - u, r), -1))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("dtype", [F16, BF16, np.dtype(np.float32)])
@pytest.mark.parametrize("s", [0.1, 1.0039, 7e4, 1e-8, 3, 1e5])
def test_sums_and_differences_with_a_number(device, dtype, s):
    """A floating tensor plus or minus a Python number (either side), AddNumber's one op (act_fwd's shift on the GPU):
    PyTorch's values bit for bit (the number rounded to the tensor's dtype first: 1e5 is inf beside float16), the
    gradient passed on (negated for ``s - x``), C-contiguous and strided."""
    x = values(dtype)
    t = mf.tensor(x, device=device).requires_grad_()
    g = values(dtype, seed=2)
    for fn, ref, sign in _sums_and_differences(dtype, s):
        t.grad = None
        y = fn(t)
        y.backward(mf.tensor(g, device=device))
        assert y.grad_fn.name() == "AddNumberBackward" and y.dtype == t.dtype
        np.testing.assert_array_equal(y.detach().float().cpu().numpy(), ref(x).astype(np.float32))
        np.testing.assert_array_equal(t.grad.float().cpu().numpy(), (sign * g.astype(np.float32)))
    m = mf.tensor(x[:600].reshape(20, 30), device=device).t()  # a strided view
    for fn, ref, _ in _sums_and_differences(dtype, s):
        np.testing.assert_array_equal(fn(m).float().cpu().numpy(), ref(x[:600].reshape(20, 30).T).astype(np.float32))


# ---------------------------------------------------------------- complex operands
@pytest.mark.parametrize("dtype, number, want", [
    (mf.float32, 2j, mf.complex64), (mf.float64, 2j, mf.complex128), (mf.bfloat16, 2j, mf.complex64),
    (mf.int64, 2j, mf.complex64), (mf.bool_, 1j, mf.complex64), (mf.complex128, 2.0, mf.complex128),
    (mf.complex64, 3, mf.complex64)])
def test_complex_numbers_promote_as_pytorch(dtype, number, want):
    """A real tensor with a Python complex is complex (PyTorch's dtypes); the values keep the imaginary part (they
    lost it once: ``ones(2) * 2j`` was 0)."""
    t = cpu([1.0, 2.0]).to(dtype)
    for got in (t * number, number * t, t + number):
        assert got.dtype == want
    np.testing.assert_array_equal((t * number).numpy(), t.numpy().astype(want) * number)
    np.testing.assert_array_equal((t + number).numpy(), t.numpy().astype(want) + number)


@pytest.mark.parametrize("a, b, want", [
    ((mf.float32, 1), (mf.complex64, 1), mf.complex64), ((mf.float64, 1), (mf.complex64, 1), mf.complex128),
    ((mf.int64, 1), (mf.complex128, 1), mf.complex128), ((mf.bfloat16, 1), (mf.complex64, 1), mf.complex64),
    ((mf.float32, 1), (mf.complex128, 0), mf.complex64), ((mf.float64, 1), (mf.complex64, 0), mf.complex128),
    ((mf.int32, 1), (mf.complex128, 0), mf.complex128), ((mf.complex64, 1), (mf.float64, 0), mf.complex64)])
def test_complex_tensors_promote_as_pytorch(a, b, want):
    """Two tensors, one complex (``(dtype, ndim)``; a 0-d operand beside a dimensioned one as PyTorch counts it)."""
    x = cpu([1.0, 2.0]).to(a[0])
    values = ([1 + 2j, 3j], 2 - 1j) if b[0].kind == "c" else ([1.5, 3.0], 2.0)
    y = cpu(values[0] if b[1] else values[1]).to(b[0])
    got = x * y
    assert got.dtype == want
    np.testing.assert_allclose(got.numpy(), x.numpy().astype(np.complex128) * y.numpy(), rtol=1e-6)


def test_float16_with_a_complex_number_raises():
    with pytest.raises(TypeError, match="complex32"):
        cpu([1.0]).to(mf.float16) * 2j


def test_complex_tensors_keep_their_imaginary_parts():
    """A complex tensor's sum, real and imag parts (views, as PyTorch's) and conjugate; it had summed through int64
    (``(ones(2) * (3 + 4j)).sum()`` was 6) and ``real`` returned it whole."""
    z = cpu([1.0, 2.0]) * (3 + 4j)
    assert z.sum().dtype == mf.complex64 and z.sum().item() == 9 + 12j
    np.testing.assert_array_equal(z.real.numpy(), [3.0, 6.0])
    np.testing.assert_array_equal(z.imag.numpy(), [4.0, 8.0])
    np.testing.assert_array_equal(z.conj().numpy(), [3 - 4j, 6 - 8j])
    z.real[0] = 0.0  # a view of z's memory
    assert z[0].item() == 4j
    x = cpu([1.0, 2.0])
    assert mf.real(x) is x and mf.conj(x) is x
    with pytest.raises(RuntimeError, match="non-complex"):
        x.imag


def test_complex_result_of_a_tensor_that_requires_grad_raises():
    """minifused's autograd is real: a complex result of a tensor that requires grad raises (it silently dropped
    requires_grad before); under no_grad it is a plain complex tensor."""
    x = cpu([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match="no complex numbers"):
        x * 1j
    with mf.no_grad():
        assert (x * 1j).dtype == mf.complex64


@pytest.mark.parametrize("op,a,b,want", [
    ("copysign", (-4, "int32"), ([2], "uint8"), [4.0]),
    ("atan2", ([3, 4], "uint8"), (-2, "int64"), np.arctan2([3.0, 4.0], -2.0).tolist()),
    ("xlogy", (-3, "int32"), ([6], "uint8"), [-3 * np.log(6.0)]),
    ("copysign", ([3], "uint8"), -2, [-3.0]),
])
def test_integer_operands_of_float_ops_keep_their_values(op, a, b, want):
    """An op that computes integer operands in the default float dtype casts each operand's own values, as PyTorch
    does: the promoted integer dtype (uint8 beside a 0-d int tensor) would wrap a -4 to 252 first."""
    def make(spec):  # (value, dtype name): a tensor (0-d for a number); else a Python number as it is
        return mf.tensor(spec[0], dtype=getattr(mf, spec[1])) if isinstance(spec, tuple) else spec

    out = getattr(mf, op)(make(a), make(b))
    assert out.dtype == mf.float32
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8"])
def test_python_int_to_an_integer_tensors_power_keeps_its_dtype(dtype):
    """``2 ** t`` and ``pow(3, t)`` for an integer tensor t come in t's dtype, as PyTorch's (a Python number does
    not widen a tensor of its kind); negative exponents as PyTorch's integer pow (1, +-1 or 0)."""
    t = mf.tensor([3, 0, 2], dtype=getattr(mf, dtype))
    for out, want in ((2 ** t, [8, 1, 4]), (mf.pow(3, t), [27, 1, 9])):
        assert out.dtype == t.dtype and out.tolist() == want
    if dtype != "uint8":
        out = (-1) ** mf.tensor([-3, 2, -2], dtype=getattr(mf, dtype))
        assert out.dtype == getattr(mf, dtype) and out.tolist() == [-1, 1, 1]


def test_integer_clamp_takes_number_bounds_as_pytorch_writes_them():
    """A number bound of an integer clamp is written into the dtype as PyTorch writes numbers: a negative one wraps
    into an unsigned dtype (uint8: -3 is 253), one beyond the range raises naming clamp (NumPy's raw
    OverflowError before); a float bound promotes to float32."""
    t = mf.tensor([0, 4, 3], dtype=mf.uint8)
    assert t.clamp_max(-3).tolist() == [0, 4, 3] and t.clamp_min(-3).tolist() == [253, 253, 253]
    assert t.clamp(-1, 2).tolist() == [2, 2, 2] and t.clamp(1, 3).tolist() == [1, 3, 3]
    for call in (lambda: t.clamp(max=300), lambda: mf.tensor([1, 2], dtype=mf.int8).clamp(max=1000)):
        with pytest.raises(RuntimeError, match="clamp: value cannot be converted to type u?int8 without overflow"):
            call()
    out = mf.tensor([1, -5, 9]).clamp(2.5)
    assert out.dtype == mf.float32 and out.tolist() == [2.5, 2.5, 9.0]


def test_any_and_all_over_an_empty_dim_list_reduce_nothing():
    """PyTorch's any/all with ``dim=()`` keep every element (each as a bool), where its sum and mean reduce them
    all; a dim list that names dimensions reduces those."""
    t = mf.tensor([[1, 0], [1, 1]])
    for op in (mf.any, mf.all, lambda x, dim: x.any(dim=dim)):
        out = op(t, dim=())
        assert out.dtype == mf.bool and out.tolist() == [[True, False], [True, True]]
    assert t.any(dim=(0, 1)).item() is True and t.all(dim=(0,)).tolist() == [True, False]
    assert mf.tensor(3).any(dim=()).shape == () and mf.tensor([[1, 0]], dtype=mf.uint8).all(dim=()).tolist() == [[1, 0]]
    assert t.sum(dim=()).item() == 3
