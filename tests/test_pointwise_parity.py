"""Pointwise ops where PyTorch's semantics are easy to miss: integer division by zero, the gradients of maximum /
minimum / fmax / fmin / clamp / atan2 / abs at ties, NaN and the origin, Python integers wrapped into an integer
tensor's dtype, bfloat16 with Python numbers, alpha's checks, dtype promotion, in-place spellings (``**=``,
``div_(rounding_mode=)``) and the scalar-first spellings. Expected values are hand-computed from PyTorch's
documented rules or computed with NumPy in float64."""
import math

import numpy as np
import pytest

import minifused as mf
from minifused import backend
from tolerances import cpu

nan = math.nan


def grads(fn, *values):
    """The gradients of sum(fn(*inputs)) for float64 inputs of ``values`` (lists)."""
    xs = [cpu(np.array(v, np.float64), requires_grad=True) for v in values]
    fn(*xs).sum().backward()
    return [x.grad.numpy() for x in xs]


def assert_grads(got, want):
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, np.array(w, np.float64))


# ---------------------------------------------------------------- integer division by zero
@pytest.mark.parametrize("op, ref", [
    (lambda a, b: a // b, np.floor_divide), (lambda a, b: a % b, np.remainder), (mf.fmod, np.fmod),
    (mf.remainder, np.remainder), (mf.floor_divide, np.floor_divide),
    (lambda a, b: mf.div(a, b, rounding_mode="floor"), np.floor_divide),
    (lambda a, b: mf.div(a, b, rounding_mode="trunc"), lambda a, b: np.trunc(a / b))])
def test_integer_division_by_zero_raises(op, ref):
    a = cpu([1, 2])
    for divisor in (cpu([0, 1]), 0, cpu([0, 1], dtype=mf.uint8)):
        with pytest.raises(RuntimeError, match="integer division by zero"):
            op(a, divisor)
    if op is not mf.fmod:  # (PyTorch's fmod takes no number first: a TypeError)
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            op(5, cpu([0, 1]))
    assert op(cpu([], dtype=mf.int64), 0).shape == (0,)  # nothing is divided
    # floating division by zero is fine: inf / NaN as NumPy's float64
    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_array_equal(op(cpu([1.0, -2.0]), 0).numpy(), ref(np.array([1.0, -2.0]), 0.0))


def test_integer_division_by_zero_in_place_raises():
    for fn in (lambda x: x.fmod_(0), lambda x: x.remainder_(cpu([0, 1])), lambda x: x.__ifloordiv__(0),
               lambda x: x.div_(cpu([0, 1]), rounding_mode="trunc")):
        with pytest.raises(RuntimeError, match="integer division by zero"):
            fn(cpu([1, 2]))


# ---------------------------------------------------------------- gradients at ties and NaN
def test_maximum_minimum_gradient_with_nan_and_ties():
    a, b = [nan, 1.0, 2.0, nan, 1.0], [1.0, nan, 2.0, nan, 3.0]
    # where(a == b, g / 2, g), zeroed where a lost: a NaN on either side orders nothing, so both get g
    assert_grads(grads(mf.maximum, a, b), [[1, 1, 0.5, 1, 0], [1, 1, 0.5, 1, 1]])
    assert_grads(grads(mf.minimum, a, b), [[1, 1, 0.5, 1, 1], [1, 1, 0.5, 1, 0]])
    assert_grads(grads(mf.max, a, b), [[1, 1, 0.5, 1, 0], [1, 1, 0.5, 1, 1]])


def test_fmax_fmin_gradient_goes_to_the_result():
    a, b = [1.0, nan, 2.0, nan, 1.0, 3.0], [1.0, 1.0, nan, nan, 3.0, 1.0]
    # input's where input >= other (fmin: <=) or other is NaN, no split at ties; other's elsewhere
    assert_grads(grads(mf.fmax, a, b), [[1, 0, 1, 1, 0, 1], [0, 1, 0, 0, 1, 0]])
    assert_grads(grads(mf.fmin, a, b), [[1, 0, 1, 1, 1, 0], [0, 1, 0, 0, 0, 1]])


def test_clamp_gradient_with_tensor_bounds():
    x, lo, hi = [-2.0, 0.5, 3.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0, 0.0], [-1.0, -1.0, -1.0, 1.0, 0.0]
    # x's where lo <= x <= hi; lo's where x < lo < hi; hi's where x > hi or hi < lo (the result is hi there)
    want = [[0, 0, 0, 1, 0], [0, 0, 0, 0, 0], [1, 1, 1, 0, 1]]
    assert_grads(grads(mf.clamp, x, lo, hi), want)
    assert_grads(grads(lambda x, lo, hi: x.clone().clamp_(lo, hi), x, lo, hi), want)
    out = mf.clamp(cpu(x), cpu(lo), cpu(hi)).numpy()
    np.testing.assert_array_equal(out, np.minimum(np.maximum(x, lo), hi))
    # min == max: x below them gets no gradient anywhere, above them max gets it
    assert_grads(grads(mf.clamp, [-2.0, 1.0, 3.0], [1.0] * 3, [1.0] * 3), [[0, 1, 0], [0, 0, 0], [0, 0, 1]])
    # a NaN input or bound: no gradient to any of them
    assert_grads(grads(mf.clamp, [nan, 0.0, 0.0], [-1.0, nan, 0.0], [1.0, 1.0, nan]), [[0] * 3] * 3)


def test_clamp_gradient_at_nan_input():
    for fn in (lambda x: mf.clamp(x, -1, 1), lambda x: mf.clamp(x, min=-1), lambda x: mf.clamp(x, max=1),
               lambda x: x.clone().clamp_(-1, 1)):
        assert_grads(grads(fn, [nan, 0.5]), [[0, 1]])


def test_clamp_min_max_tensor_bound_tie_goes_to_input():
    x, bound = [0.0, -1.0, 1.0, nan, 0.0], [0.0, 0.0, 0.0, 0.0, nan]
    assert_grads(grads(mf.clamp_min, x, bound), [[1, 0, 1, 0, 0], [0, 1, 0, 0, 0]])
    assert_grads(grads(mf.clamp_max, x, bound), [[1, 1, 0, 0, 0], [0, 0, 1, 0, 0]])
    assert_grads(grads(lambda x, b: x.clone().clamp_min_(b), [0.0, -1.0], [0.0, 0.0]), [[1, 0], [0, 1]])
    # a bound that broadcasts the input to a larger shape, as maximum does
    out = mf.clamp_min(cpu([[1.0, 5.0]]), cpu([[0.0], [2.0]]))
    np.testing.assert_array_equal(out.numpy(), np.maximum([[1.0, 5.0]], [[0.0], [2.0]]))
    assert_grads(grads(mf.clamp_min, [[1.0, 5.0]], [[0.0], [2.0]]), [[[1, 2]], [[0], [1]]])


def test_clamp_tensor_bounds_broadcast_the_input_and_promote_all_three():
    """PyTorch broadcasts input, min and max together (the result may be larger than the input) and promotes the
    three as a binary op does; the in-place form keeps the input's shape and dtype, or raises."""
    x, lo, hi = [1.0, 5.0, 3.0], [[2.0], [0.0]], [4.0]
    out = mf.clamp(cpu(x), min=cpu(lo), max=cpu(hi))
    np.testing.assert_array_equal(out.numpy(), np.minimum(np.maximum(x, lo), hi))
    assert out.shape == (2, 3) and mf.tensor([1, 5]).clamp(cpu(lo)).shape == (2, 2)
    # x's gradient summed over the copies the broadcast made; each bound's reduced to its own shape
    assert_grads(grads(mf.clamp, x, lo, hi), [[1, 0, 2], [[1], [0]], [2]])
    rng = np.random.default_rng(0)
    xs = [cpu(rng.normal(size=s), requires_grad=True) for s in ((3,), (2, 1), (1, 3))]
    assert mf.testing.gradcheck(lambda a, b, c: mf.clamp(a, b + 0.2, c + 1.5), xs)
    # dtype: dimensioned tensors promote together, a 0-d one counts only where of a higher kind
    i8, u8, i16, f64 = mf.tensor([1], dtype=mf.int8), mf.tensor([2], dtype=mf.uint8), mf.tensor(3, dtype=mf.int16), \
        mf.tensor(2.5, dtype=mf.float64)
    assert mf.clamp(i8, min=u8).dtype == mf.int16
    assert mf.clamp(mf.tensor(1, dtype=mf.int8), u8, i16).dtype == mf.uint8
    assert mf.clamp(mf.tensor([1, 2]), min=f64).dtype == mf.float64
    assert mf.clamp(mf.tensor([1.0, 2.0]), min=f64, max=mf.tensor(5)).dtype == mf.float32
    assert mf.clamp(mf.tensor(3, dtype=mf.int32), min=mf.tensor([2, 4])).tolist() == [3, 4]
    with pytest.raises(RuntimeError, match=r"clamp_: output with shape \[3\] doesn't match the broadcast shape "
                                           r"\[2, 3\]"):
        cpu(x).clamp_(min=cpu(lo))
    with pytest.raises(RuntimeError, match="clamp_: result type float32 can't be cast to the desired output type"):
        mf.tensor([1, 5]).clamp_(min=mf.tensor([2.5]))
    assert mf.tensor([1.0, 5.0]).clamp_(min=mf.tensor([2.5], dtype=mf.float64)).dtype == mf.float32


def test_clamp_mixes_a_number_only_with_a_0d_tensor_without_grad_as_pytorch():
    """PyTorch takes both bounds as numbers or both as tensors: a 0-d tensor that needs no gradient stands for a
    number; any other tensor beside a number is a TypeError (clamp, clip, clamp_, clip_)."""
    x = cpu([-1.0, 0.5, 3.0])
    assert mf.clamp(x, mf.tensor(0.0), 1.0).tolist() == [0.0, 0.5, 1.0]
    assert x.clone().clip_(0, mf.tensor(1)).tolist() == [0.0, 0.5, 1.0]
    out = mf.clamp(mf.tensor([-3, 2, 5]), mf.tensor(0.5, dtype=mf.float64), 3)  # (read as a number: float32)
    assert out.dtype == mf.float32 and out.tolist() == [0.5, 2.0, 3.0]
    for fn in (lambda: mf.clamp(x, min=0.0, max=cpu([1.0])), lambda: x.clip(cpu([0.0]), 1.0),
               lambda: x.clone().clamp_(mf.tensor(0.0, requires_grad=True), 1.0), lambda: mf.clip_(x.clone(), 0, x)):
        with pytest.raises(TypeError, match="(clip|clamp)_?: expected min and max both numbers or both tensors"):
            fn()


def test_clamp_min_max_take_bool_bounds_as_pytorchs():
    """A Python bool bound is a number (True is 1); a bool tensor bound promotes as any tensor. PyTorch clamps a
    bool tensor only with one tensor bound: a number bound, or both bounds, are not implemented for bool."""
    f, i, b = [0.5, 2.0], [-1, 2], mf.tensor([True, False])
    assert mf.clamp_min(cpu(f), True).tolist() == [1.0, 2.0] and mf.tensor(i).clamp_max(False).tolist() == [-1, 0]
    assert mf.tensor(i, dtype=mf.uint8).clamp_max(True).tolist() == [1, 1]
    assert cpu(f).clamp_min_(True).tolist() == [1.0, 2.0] and mf.tensor(i).clamp_max_(False).tolist() == [-1, 0]
    assert_grads(grads(lambda x: mf.clamp_min(x, True), f), [[0, 1]])
    assert mf.clamp_min(cpu(f), b).tolist() == [1.0, 2.0] and mf.clamp_max(mf.tensor(i), b).tolist() == [-1, 0]
    out = mf.clamp_max(mf.tensor([1, -2, 3], dtype=mf.int8), mf.tensor([[True], [False]]))
    assert out.dtype == mf.int8 and out.tolist() == [[1, -2, 1], [0, -2, 0]]
    assert mf.clamp_min(b, mf.tensor(True)).tolist() == [True, True] and mf.clamp_max(b, b).dtype == mf.bool
    assert mf.clamp(mf.tensor([0, 2]), b, b).tolist() == [1, 0]  # (promoted to int64: both bounds are fine there)
    for fn in (lambda: mf.clamp_min(b.clone(), True), lambda: b.clone().clamp_max(False),
               lambda: b.clone().clamp_min_(True), lambda: mf.clamp(b, b, b), lambda: b.clone().clamp_(b, b)):
        with pytest.raises(NotImplementedError, match="clamp(_min|_max)?_?: not implemented for bool"):
            fn()
    with pytest.raises(RuntimeError, match="clamp_min_: result type int64 can't be cast to the desired output type"):
        b.clone().clamp_min_(mf.tensor([1, 0]))
    # an int or float number bound promotes the bool tensor first (PyTorch 2.13's results)
    assert mf.clamp_min(b, 2).dtype == mf.int64 and mf.clamp_min(b, 2).tolist() == [2, 2]
    assert mf.clamp_max(b, 2.5).dtype == mf.float32 and b.clamp_max(2.5).tolist() == [1.0, 0.0]


def test_atan2_gradient_at_the_origin_is_zero():
    y, x = [0.0, 0.0, 1.0, 3.0], [0.0, -0.0, 0.0, 4.0]
    gy, gx = grads(mf.atan2, y, x)
    # x / (x^2 + y^2) and -y / (x^2 + y^2), 0 where x^2 + y^2 == 0
    np.testing.assert_allclose(gy, [0, 0, 0, 4 / 25], rtol=1e-15)
    np.testing.assert_allclose(gx, [0, 0, -1, -3 / 25], rtol=1e-15)


def test_sign_of_nan_and_abs_gradient_at_nan():
    for dtype in (mf.float32, mf.float64, mf.float16, mf.bfloat16):
        out = mf.sign(cpu([nan, -2.0, 0.0, 3.0], dtype=dtype))
        assert out.dtype == dtype
        np.testing.assert_array_equal(out.float().numpy(), [0, -1, 0, 1])
    assert_grads(grads(mf.abs, [nan, 0.0, -1.0, 2.0]), [[0, 0, -1, 1]])


# ---------------------------------------------------------------- Python integers in an integer tensor's dtype
def wrap(value, dtype):
    """``value`` cast into ``dtype`` with wrap-around (NumPy's array cast)."""
    return np.array(value, np.int64).astype(dtype)


def test_python_integers_wrap_into_the_tensor_dtype():
    u8 = np.uint8
    assert (cpu([1, 2], dtype=mf.uint8).sub_(1).numpy() == np.array([1, 2], u8) - wrap(1, u8)).all()
    x = cpu([1, 2], dtype=mf.uint8)
    x -= 1
    np.testing.assert_array_equal(x.numpy(), np.array([0, 1], u8))
    for fn in (lambda x: x.add_(-1), lambda x: x.add_(1, alpha=-1), lambda x: x.add_(cpu([1, 1], dtype=mf.uint8),
                                                                                         alpha=-1)):
        np.testing.assert_array_equal(fn(cpu([1, 2], dtype=mf.uint8)).numpy(), np.array([1, 2], u8) + wrap(-1, u8))
    got = cpu([1, 2], dtype=mf.uint8).sub_(cpu([1, 1], dtype=mf.uint8), alpha=2)
    np.testing.assert_array_equal(got.numpy(), np.array([1, 2], u8) + wrap(-2, u8))
    out = cpu([1], dtype=mf.int8) + 1000
    assert out.dtype == mf.int8 and out.tolist() == (np.array([1], np.int8) + wrap(1000, np.int8)).tolist() == [-23]
    assert mf.remainder(cpu([5], dtype=mf.uint8), -3).tolist() == [5 % int(wrap(-3, u8))]
    out = mf.where(cpu([True, False]), cpu([1, 2], dtype=mf.uint8), -1)
    assert out.dtype == mf.uint8 and out.tolist() == [1, 255]
    assert (cpu([255], dtype=mf.uint8) == -1).tolist() == [True]
    assert (cpu([0], dtype=mf.uint8) < -1).tolist() == [True]  # compared with 255
    assert (cpu([1], dtype=mf.int8) << 257).tolist() == [2]  # a shift by 257 wrapped to 1
    # pow's exponent is not wrapped: a negative one is refused, as in PyTorch
    with pytest.raises(RuntimeError, match="negative integer powers"):
        cpu([3], dtype=mf.uint8) ** -1
    with pytest.raises(RuntimeError, match="negative integer powers"):
        cpu([3], dtype=mf.uint8).pow_(-1)


# ---------------------------------------------------------------- bfloat16 with Python numbers
def test_bfloat16_with_python_float():
    values = np.linspace(-5, 5, 201).astype(backend.bfloat16)
    x = cpu(values)
    wide = values.astype(np.float64)
    s = 0.3
    s_bf16 = float(backend.bfloat16.type(s))  # 0.30078125
    for out, want in ((x % s, np.remainder(wide, s_bf16)), (mf.fmod(x, s), np.fmod(wide, s_bf16)),
                      (x // s, np.floor_divide(wide, np.float64(np.float32(s))))):
        assert out.dtype == mf.bfloat16
        np.testing.assert_array_equal(out.numpy(), want.astype(np.float32).astype(backend.bfloat16))
    assert (0.3 % cpu([1.3], dtype=mf.bfloat16)).tolist() == [s_bf16]
    y = cpu([1.3], dtype=mf.bfloat16)  # 1.296875: 1.3 compares as bfloat16's 1.3 (the same value)
    assert (y == 1.3).tolist() == [True] and (y != 1.3).tolist() == [False]
    assert (y < 1.3).tolist() == [False] and (y >= 1.3).tolist() == [True]
    assert mf.eq(y, 1.3).tolist() == [True] and y.clone().eq_(1.3).tolist() == [1.0]


# ---------------------------------------------------------------- in-place spellings
def test_ipow_is_in_place_and_recorded():
    x = cpu([1.0, 2.0])
    alias = x
    x **= 2
    assert x is alias and alias.tolist() == [1.0, 4.0]
    leaf = cpu([1.5, 2.0], requires_grad=True)
    y = leaf * 1
    y **= 3
    y.sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), 3 * np.array([1.5, 2.0]) ** 2)
    n = cpu([1, 2])
    n **= 2
    assert n.tolist() == [1, 4] and n.dtype == mf.int64
    with pytest.raises(RuntimeError, match="can't be cast"):
        n **= 0.5


def test_div_in_place_rounding_mode():
    assert cpu([7, -7]).div_(2, rounding_mode="floor").tolist() == [3, -4]
    assert cpu([7, -7]).div_(2, rounding_mode="trunc").tolist() == [3, -3]
    assert cpu([1.0, 2.0]).div_(2, rounding_mode="floor").tolist() == [0.0, 1.0]
    with pytest.raises(RuntimeError, match="rounding_mode"):
        cpu([1.0]).div_(2, rounding_mode="round")


# ---------------------------------------------------------------- alpha
def test_alpha_checks_and_bool_alpha():
    i = cpu([1])
    for fn in (lambda: mf.add(i, i, alpha=0.5), lambda: mf.sub(i, i, alpha=1.0), lambda: mf.subtract(i, i, alpha=1.0),
               lambda: cpu([1]).add_(1, alpha=0.5), lambda: cpu([1]).sub_(i, alpha=0.5),
               lambda: mf.rsub(i, i, alpha=0.5)):
        with pytest.raises(RuntimeError, match="alpha must not be a floating point number"):
            fn()
    for fn in (lambda: mf.add(i, i, alpha=True), lambda: cpu([1.0]).add_(1, alpha=True)):
        with pytest.raises(RuntimeError, match="Boolean alpha only supported for Boolean results"):
            fn()
    assert mf.add(i, 1.5, alpha=0.5).tolist() == [1.75]  # a float result: a float alpha is fine
    t, f = cpu([True, False]), cpu([False, False])
    out = mf.add(t, cpu([True, False]), alpha=2)  # a | (bool(2) & b)
    assert out.dtype == mf.bool and out.tolist() == [True, False]
    assert mf.add(t, f, alpha=0).tolist() == [True, False]
    assert mf.add(t, True, alpha=2).tolist() == [True, True]


# ---------------------------------------------------------------- dtype promotion
def test_promotion_of_hypot_lerp_ldexp():
    out = mf.hypot(cpu([3.0]), cpu([4.0], dtype=mf.float64))
    assert out.dtype == mf.float64 and out.tolist() == [5.0]
    assert mf.hypot(cpu([3.0], dtype=mf.float16), cpu(4.0)).dtype == mf.float16
    with pytest.raises(NotImplementedError, match="hypot"):
        mf.hypot(cpu([3]), cpu([4]))
    a, e = cpu([1.0, 2.0], requires_grad=True), cpu([3.0, 6.0], requires_grad=True)
    w = cpu(0.25, dtype=mf.float64, requires_grad=True)
    out = mf.lerp(a, e, w)
    assert out.dtype == mf.float32 and out.tolist() == [1.5, 3.0]
    out.sum().backward()
    assert w.grad.dtype == mf.float64 and w.grad.item() == 6.0  # sum(end - input)
    assert mf.lerp(cpu([1.0]), cpu([3.0]), cpu(1, dtype=mf.int64)).dtype == mf.float32
    with pytest.raises(RuntimeError, match="lerp"):
        mf.lerp(cpu([1.0]), cpu([3.0]), cpu([0.5], dtype=mf.float64))
    assert mf.lerp(cpu([-1.5, 0.5]), cpu([4.0, 1.0]), True).tolist() == [4.0, 1.0]  # a bool weight: 0 or 1
    x = cpu([-1.5, 0.5])
    assert x.lerp_(cpu([4.0, 1.0]), False) is x and x.tolist() == [-1.5, 0.5]
    out = mf.ldexp(cpu([1.0]), cpu(2.0, dtype=mf.float64))
    assert out.dtype == mf.float32 and out.tolist() == [4.0]
    assert mf.ldexp(cpu([1.0]), cpu([2.0], dtype=mf.float64)).dtype == mf.float64
    out = mf.special.xlog1py(cpu([1.0, 3.0]), cpu(1.0, dtype=mf.float64))
    assert out.dtype == mf.float32
    np.testing.assert_allclose(out.numpy(), [math.log(2.0), 3 * math.log(2.0)], rtol=1e-6)


def test_number_arguments_read_a_0d_tensor_as_its_number():
    """addcmul's value, dist's p: a 0-d tensor without grad is the number it holds, as PyTorch reads it (an integer
    result takes 0.5 truncated to 0: PyTorch 2.13's [-3, 2, 5])."""
    i = mf.tensor([-3, 2, 5])
    assert mf.addcmul(i, i, i, value=cpu(0.5)).tolist() == [-3, 2, 5]
    assert mf.addcmul(i, i, i, value=cpu(2)).tolist() == [15, 10, 55]
    assert mf.dist(cpu([0.0, 3.0]), cpu([4.0, 0.0]), p=cpu(1.0, dtype=mf.float64)).item() == 7.0
    # the same for the other number arguments (float ones take a bool too); PyTorch 2.13's results
    x = cpu([-1.5, 0.5, 3.0])
    assert mf.add(x, x, alpha=cpu(0.5)).tolist() == [-2.25, 0.75, 4.5]
    assert mf.tensor([1, 2]).sub_(mf.tensor([1, 1]), alpha=mf.tensor(2)).tolist() == [-1, 0]
    assert mf.isclose(x, x + 0.1, rtol=cpu(0.05)).tolist() == [False, False, True]
    assert mf.allclose(x, x + 0.1, atol=cpu(0.2))
    assert mf.nan_to_num(cpu([nan, math.inf]), nan=cpu(2.0), posinf=mf.tensor(7)).tolist() == [2.0, 7.0]
    assert x.norm(mf.tensor(1)).item() == 5.0 and x.norm(True).item() == 5.0
    np.testing.assert_allclose(x[None].renorm(mf.tensor(1), 0, cpu(1.0)).numpy(), [[-0.3, 0.1, 0.6]], rtol=1e-6)
    assert x.diff(n=mf.tensor(2)).tolist() == [0.5] and mf.histc(x, bins=mf.tensor(2)).tolist() == [2.0, 1.0]
    np.testing.assert_allclose(mf.round(cpu([1.234, 5.678]), decimals=mf.tensor(1)).numpy(), [1.2, 5.7], rtol=1e-6)
    assert mf.nn.functional.dropout(x, p=cpu(1.0), training=True).tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(TypeError, match=r"add\(\): argument 'alpha' must be Number, not Tensor"):
        mf.add(x, x, alpha=cpu([0.5]))
    with pytest.raises(TypeError, match=r"diff\(\): argument 'n' must be int, not bool"):
        x.diff(n=True)


def test_xlog1py_of_an_integer_tensor_and_a_number_as_pytorch():
    """Integer tensors computed in float32, the number as it is (PyTorch 2.13's float32 results: 2.5 was truncated
    to 2, and 300 refused as out of uint8's range)."""
    for got, want in ((mf.special.xlog1py(cpu([-3, 2, 5]), 2.5), [-3.758289098739624, 2.505526065826416,
                                                                  6.263814926147461]),
                      (mf.special.xlog1py(2.5, cpu([-3, 2, 5])), [nan, 2.746530771255493, 4.479398727416992]),
                      (mf.special.xlog1py(300, cpu([1, 2], dtype=mf.uint8)), [207.94415283203125, 329.58367919921875]),
                      (mf.special.xlog1py(cpu([True, False]), 2), [1.0986123085021973, 0.0])):
        assert got.dtype == mf.float32
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


def test_integer_input_gives_the_default_dtype():
    one, two = cpu([1]), cpu([2])
    cases = {"atan2": (lambda: mf.atan2(one, two), math.atan2(1, 2)),
             "xlogy": (lambda: mf.xlogy(one, two), math.log(2)),
             "logit": (lambda: mf.logit(cpu([0])), -math.inf),
             "polygamma": (lambda: mf.polygamma(1, one), math.pi ** 2 / 6),
             "ldexp": (lambda: mf.ldexp(one, two), 4.0),
             "copysign": (lambda: mf.copysign(one, -1), -1.0)}
    previous = mf.get_default_dtype()
    mf.set_default_dtype(mf.float64)
    try:
        for name, (fn, want) in cases.items():
            out = fn()
            assert out.dtype == mf.float64, name
            np.testing.assert_allclose(out.numpy(), [want], rtol=1e-12, err_msg=name)
    finally:
        mf.set_default_dtype(previous)
    assert mf.atan2(one, two).dtype == mf.float32


def test_float16_round_with_decimals_does_not_overflow():
    values = np.array([1234.0, 700.5, -1000.5, 655.5, 0.125, 3.140625], np.float16)
    for decimals in (1, 2, 3, -1, -2):
        out = mf.round(cpu(values), decimals=decimals)
        want = np.round(values.astype(np.float64), decimals).astype(np.float16)
        assert out.dtype == mf.float16
        np.testing.assert_array_equal(out.numpy(), want, err_msg=f"decimals={decimals}")


# ---------------------------------------------------------------- scalar-first spellings
def test_scalar_first_spellings():
    t = cpu([1.0, 2.0])
    assert mf.multiply(2, t).tolist() == [2.0, 4.0]
    assert mf.divide(2, t).tolist() == [2.0, 1.0]
    assert mf.true_divide(2.0, t).tolist() == [2.0, 1.0]
    assert mf.subtract(2, t).tolist() == [1.0, 0.0]
    assert mf.subtract(2, t, alpha=2).tolist() == [0.0, -2.0]
    assert mf.divide(7, cpu([2, -2]), rounding_mode="floor").tolist() == [3, -4]
    with pytest.raises(TypeError, match="expected a Tensor operand"):
        mf.multiply(2, 3)
