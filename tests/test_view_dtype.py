"""``Tensor.view(dtype)``: the same bytes read as another dtype, against NumPy's own ``.view`` of those bytes; the
last dimension rescaled where the element size changes, PyTorch's conditions and messages for it; memory shared
both ways; never differentiable, its version counter shared with the input's; ``view(dtype=...)`` and
``view(size=...)`` keyword forms."""
import numpy as np
import pytest

import minifused as mf
from minifused import backend


def bits(a):
    """A NumPy array's values as their raw bytes (compares NaNs and bools bit for bit)."""
    return np.ascontiguousarray(a).view(np.uint8)


def test_same_element_size_keeps_the_shape():
    a = np.linspace(-3, 5, 12, dtype=np.float32).reshape(3, 4)
    y = mf.tensor(a).view(mf.int32)
    assert y.dtype == mf.int32 and tuple(y.shape) == (3, 4) and y.stride() == (4, 1)
    np.testing.assert_array_equal(y.numpy(), a.view(np.int32))
    one = mf.tensor(1.0).view(mf.int32)  # 0-d: equal sizes only
    assert one.shape == () and int(one) == 0x3F800000


@pytest.mark.parametrize("src,dst", [(np.float32, np.uint8), (np.float32, np.int16), (np.float64, backend.bfloat16),
                                     (np.int64, np.int32), (np.float32, backend.bfloat16), (np.int16, np.bool_)])
def test_smaller_element_multiplies_the_last_size(src, dst):
    a = (np.arange(24).reshape(2, 3, 4) * 37 - 200).astype(src)
    y = mf.tensor(a).view(np.dtype(dst))
    ratio = np.dtype(src).itemsize // np.dtype(dst).itemsize
    assert y.dtype == np.dtype(dst) and tuple(y.shape) == (2, 3, 4 * ratio)
    assert y.stride() == (12 * ratio, 4 * ratio, 1)
    np.testing.assert_array_equal(bits(y.numpy()), bits(a.view(dst)))


@pytest.mark.parametrize("src,dst", [(np.uint8, np.float32), (np.int16, np.float64), (np.int16, backend.bfloat16),
                                     (np.bool_, np.int16), (np.int32, np.int64), (np.uint8, np.int16)])
def test_larger_element_divides_the_last_size(src, dst):
    a = np.random.default_rng(0).integers(0, 256, (3, 16), dtype=np.uint8).view(np.uint8)
    a = (a % 2).astype(np.bool_) if src is np.bool_ else a.view(src)
    y = mf.tensor(a).view(np.dtype(dst))
    ratio = np.dtype(dst).itemsize // a.itemsize
    assert y.dtype == np.dtype(dst) and tuple(y.shape) == (3, a.shape[1] // ratio)
    np.testing.assert_array_equal(bits(y.numpy()), bits(a.view(dst)))


def test_strided_inputs_as_pytorch_rescales_them():
    a = np.arange(48, dtype=np.int8).reshape(3, 16)
    x = mf.tensor(a)
    rows = x[::2].view(mf.int32)  # other strides divisible by the ratio: (32, 1) -> (8, 1)
    assert tuple(rows.shape) == (2, 4) and rows.stride() == (8, 1)
    np.testing.assert_array_equal(rows.numpy(), a[::2].view(np.int32))
    cols = x[:, 4:12].view(mf.int16)  # an offset of 4 int8s, a row stride of 16: both even
    assert tuple(cols.shape) == (3, 4) and cols.stride() == (8, 1)
    np.testing.assert_array_equal(cols.numpy(), a[:, 4:12].view(np.int16))
    f = np.arange(12, dtype=np.float32).reshape(3, 4)
    down = mf.tensor(f)[::2, 1:3].view(mf.uint8)  # a smaller element: strides multiplied, (8, 1) -> (32, 1)
    assert tuple(down.shape) == (2, 8) and down.stride() == (32, 1)
    np.testing.assert_array_equal(down.numpy(), f[::2, 1:3].view(np.uint8))
    wide = mf.tensor(np.arange(4, dtype=np.int8)).reshape(1, 4).expand(3, 4).view(mf.int16)  # a stride of 0 stays
    assert tuple(wide.shape) == (3, 2) and wide.stride() == (0, 1)
    np.testing.assert_array_equal(wide.numpy(), np.tile(np.arange(4, dtype=np.int8).view(np.int16), (3, 1)))
    assert tuple(mf.zeros(0, 4, dtype=mf.int8).view(mf.int16).shape) == (0, 2)


def test_writes_show_through_both_ways():
    a = np.arange(8, dtype=np.float32)
    x = mf.tensor(a.copy())
    y = x.view(mf.int32)
    y[1] = np.float32(-2.5).view(np.int32).item()  # through the view into x
    a[1] = -2.5
    assert x[1].item() == -2.5
    x.mul_(2)  # through x into the view
    a *= 2
    np.testing.assert_array_equal(y.numpy(), a.view(np.int32))
    b = x.view(mf.uint8)  # a smaller element: byte 3 of a little-endian float holds its sign
    b[4 * 2 + 3] = 0xC0  # element 2: 4.0 = 0x40800000 -> 0xC0800000 = -4.0
    a[2] = -4.0
    np.testing.assert_array_equal(x.numpy(), a)
    m = x.view(4, 2)
    h = m[::2].view(mf.int16)  # a view of a strided view writes the same memory
    h.zero_()
    a.reshape(4, 2)[::2] = 0
    np.testing.assert_array_equal(x.numpy(), a)
    np.testing.assert_array_equal(y.numpy(), a.view(np.int32))


def test_bool_and_bfloat16_views():
    x = mf.tensor(np.array([0, 1, 2, 0], np.uint8))
    assert x.view(mf.bool).tolist() == [False, True, True, False]
    bf = mf.tensor(np.array([0x3F80, 0xC040 - 0x10000, 0x4049], np.int16)).view(mf.bfloat16)  # 1.0, -3.0, 3.140625
    np.testing.assert_array_equal(bf.float().numpy(), np.array([1.0, -3.0, 3.140625], np.float32))
    back = mf.tensor([1.0, -3.0], dtype=mf.bfloat16).view(mf.int16)
    np.testing.assert_array_equal(back.numpy(), np.array([1.0, -3.0], backend.bfloat16).view(np.int16))


@pytest.mark.parametrize("make,dtype,message", [
    (lambda: mf.tensor(1.0), mf.int16, "self.dim() cannot be 0 to view Float as Short (different element sizes)"),
    (lambda: mf.zeros(3, dtype=mf.int16), mf.float32,
     "self.size(-1) must be divisible by 2 to view Short as Float (different element sizes), but got 3"),
    (lambda: mf.zeros(5, dtype=mf.int16)[1:], mf.float32,
     "self.storage_offset() must be divisible by 2 to view Short as Float (different element sizes), but got 1"),
    (lambda: mf.zeros(3, 4).t(), mf.int16,
     "self.stride(-1) must be 1 to view Float as Short (different element sizes), but got 4"),
    (lambda: mf.zeros(4, 4, dtype=mf.int8).t()[:2], mf.int16,
     "self.stride(-1) must be 1 to view Char as Short (different element sizes), but got 4"),
    (lambda: mf.zeros(3, 6, dtype=mf.int8)[:, :4], mf.int32,
     "self.stride(0) must be divisible by 4 to view Char as Int (different element sizes), but got 6"),
    (lambda: mf.zeros(4, dtype=mf.bool), mf.float64,
     "self.size(-1) must be divisible by 8 to view Bool as Double (different element sizes), but got 4")])
def test_pytorch_conditions_and_messages(make, dtype, message):
    with pytest.raises(RuntimeError) as e:
        make().view(dtype)
    assert str(e.value) == message


def test_keyword_forms_shapes_unchanged_and_bad_arguments():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = mf.tensor(a)
    np.testing.assert_array_equal(x.view(dtype=mf.int32).numpy(), a.view(np.int32))
    assert tuple(x.view(size=(3, 2)).shape) == (3, 2)
    assert tuple(x.view(6).shape) == (6,) and tuple(x.view(-1, 2).shape) == (3, 2)
    assert tuple(x.view((3, 2)).shape) == (3, 2) and tuple(x.view(mf.Size([1, 6])).shape) == (1, 6)
    for call in (lambda: x.view(mf.int32, 3), lambda: x.view([6], dtype=mf.int32), lambda: x.view("float32"),
                 lambda: x.view(mf.int32, dtype=mf.int32), lambda: x.view(np.dtype(np.complex64))):
        with pytest.raises(TypeError):  # PyTorch's forms: one dtype, or sizes
            call()


@pytest.mark.parametrize("dtype", [mf.float32, mf.int32, mf.float16, mf.bfloat16])
def test_not_differentiable_even_float_to_float(dtype):
    a = mf.ones(2, 4, requires_grad=True)
    y = a.view(dtype)
    assert not y.requires_grad and y.grad_fn is None and y is not a
    b = (a * 2).view(dtype)
    assert not b.requires_grad and b.grad_fn is None


def test_write_through_a_view_of_a_grad_leaf_is_not_refused():
    a = mf.ones(3, requires_grad=True)
    a.view(mf.int32).add_(1)  # no autograd view of a: PyTorch lets it through, changing a's value
    np.testing.assert_array_equal(a.detach().numpy(), np.array([0x3F800001] * 3, np.int32).view(np.float32))


def test_version_counter_shared_so_a_stale_backward_refuses():
    a = mf.tensor([0.5, 1.0, 2.0], requires_grad=True)
    b = a.exp()  # exp's backward uses its result
    v = b.view(mf.float32)
    v.mul_(3)
    assert b._version == 1 and v._version == 1
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        b.sum().backward()
    c = a * 2  # mul's backward does not use c: PyTorch's gradient misses the write through the view
    c.view(mf.int32).add_(1)
    c.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full(3, 2.0, np.float32))
