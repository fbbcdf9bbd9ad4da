"""In-place ops (relu_, gelu_, softmax_, layer_norm_, dropout(inplace=True), ReLU(inplace=True)),
their autograd rules (version counters, leaves, recorded gradients), Sequential running its
modules in place under no_grad, and the bit-packed masks of ReLU and dropout. The GPU tests
compare the CUDA path with the NumPy reference. The in-place forms and their out-of-place
counterparts are the registry's (tests/opinfo.py, ``inplace=``); their bad inputs are there too."""
import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
import minifused.nn as nn
from minifused.kernels import dropout as KD
from minifused.kernels import elementwise as KE
from minifused.testing import gradcheck

from conftest import dev_array, f64, host  # noqa: E402
from opinfo import inplace_forms, randn  # noqa: E402
from tolerances import DTYPES, TOL, cpu, rel_err  # noqa: E402

SIZES = [1, 31, 33, 1000, 4097]
FORMS = {form.name: form for _, form in inplace_forms()}
RECORDED = [name for name, form in FORMS.items() if form.grad]


def nonleaf(a):
    """A leaf that requires grad and a non-leaf copy of it (what an in-place op may overwrite)."""
    leaf = cpu(a, requires_grad=True)
    return leaf, leaf * 1.0


# ---------------------------------------------------------------- values, identity, version counter
@pytest.mark.parametrize("name", list(FORMS))
@pytest.mark.parametrize("shape", [(7,), (3, 33), (2, 3, 5)])
def test_inplace_values_identity_and_version(name, shape):
    inplace, plain = FORMS[name].fn, FORMS[name].plain
    a = randn(*shape, seed=1)
    want = plain(cpu(a)).numpy()
    x = cpu(a.copy())
    arr, v = x._data, x._version
    y = inplace(x)
    assert y is x and x._data is arr  # the same tensor and array, as PyTorch's relu_
    assert x._version == v + 1
    np.testing.assert_allclose(x.numpy(), want, rtol=1e-6, atol=1e-7)


def test_softmax_inplace_middle_dim_and_non_contiguous():
    a = randn(3, 4, 5, seed=2)
    x = cpu(a.copy())
    F.softmax_(x, 1)
    np.testing.assert_allclose(x.numpy(), F.softmax(cpu(a), 1).numpy(), rtol=1e-6)
    base = cpu(a.copy())
    view = base.transpose(0, 2)  # not contiguous: through a temporary, into the view's memory
    F.softmax_(view, -1)
    np.testing.assert_allclose(base.numpy(), F.softmax(cpu(a), 0).numpy(), rtol=1e-6)
    s = cpu(np.float32(2.0))  # 0-d
    assert F.softmax_(s, 0) is s and s.item() == 1.0


def test_layer_norm_inplace_affine_and_non_contiguous():
    a = randn(6, 8, seed=3)
    w, b = cpu(randn(8, seed=4)), cpu(randn(8, seed=5))
    x = cpu(a.copy())
    assert F.layer_norm_(x, (8,), w, b, eps=1e-3) is x
    np.testing.assert_allclose(x.numpy(), F.layer_norm(cpu(a), (8,), w, b, eps=1e-3).numpy(), rtol=1e-5,
                               atol=1e-6)
    base = cpu(a.copy().T.copy())
    view = base.transpose(0, 1)  # (6, 8), not contiguous
    F.layer_norm_(view, (8,))
    np.testing.assert_allclose(view.numpy(), F.layer_norm(cpu(a), (8,)).numpy(), rtol=1e-5, atol=1e-6)


def test_dropout_inplace_matches_out_of_place():
    a = randn(37, 29, seed=6)
    mf.manual_seed(11)
    want = F.dropout(cpu(a), 0.4).numpy()
    mf.manual_seed(11)
    x = cpu(a.copy())
    v = x._version
    assert F.dropout(x, 0.4, inplace=True) is x and x._version == v + 1
    np.testing.assert_array_equal(x.numpy(), want)
    # eval mode and p=0: the input itself, untouched
    x = cpu(a.copy())
    assert F.dropout(x, 0.4, training=False, inplace=True) is x and x._version == 0
    np.testing.assert_array_equal(x.numpy(), a)
    # p=1: zeros, in place, with a zero gradient
    leaf, x = nonleaf(a)
    assert F.dropout(x, 1.0, inplace=True) is x
    assert not x.numpy().any()
    x.sum().backward()
    assert not leaf.grad.numpy().any()


def test_modules_honor_inplace():
    a = randn(4, 6, seed=7)
    x = cpu(a.copy())
    assert nn.ReLU(inplace=True)(x) is x
    np.testing.assert_array_equal(x.numpy(), np.maximum(a, 0))
    x = cpu(a.copy())
    assert nn.ReLU()(x) is not x and np.array_equal(x.numpy(), a)
    assert repr(nn.ReLU(inplace=True)) == "ReLU(inplace=True)" and repr(nn.ReLU()) == "ReLU()"
    mf.manual_seed(3)
    want = nn.Dropout(0.5)(cpu(a)).numpy()
    mf.manual_seed(3)
    x = cpu(a.copy())
    assert nn.Dropout(0.5, inplace=True)(x) is x
    np.testing.assert_array_equal(x.numpy(), want)


# ---------------------------------------------------------------- autograd
@pytest.mark.parametrize("name", RECORDED)
@pytest.mark.parametrize("shape", [(33,), (5, 7)])
def test_recorded_inplace_gradients_match_out_of_place(name, shape):
    inplace, plain = FORMS[name].fn, FORMS[name].plain
    a = randn(*shape, seed=8, dtype=np.float64)
    w = cpu(randn(*shape, seed=9, dtype=np.float64))
    ref_leaf, ref_x = nonleaf(a)
    (plain(ref_x) * w).sum().backward()
    leaf, x = nonleaf(a)
    y = inplace(x)
    assert y is x and x.requires_grad and not x.is_leaf and x.grad_fn is not None
    (y * w).sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), ref_leaf.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_dropout_inplace_gradient_matches_out_of_place():
    a = randn(9, 11, seed=10, dtype=np.float64)
    ref_leaf, ref_x = nonleaf(a)
    mf.manual_seed(5)
    F.dropout(ref_x, 0.3).sum().backward()
    leaf, x = nonleaf(a)
    mf.manual_seed(5)
    F.dropout(x, 0.3, inplace=True).sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), ref_leaf.grad.numpy())


def test_inplace_chain_and_input_requiring_no_grad():
    leaf, x = nonleaf(randn(4, 5, seed=11, dtype=np.float64))
    y = F.softmax_(F.relu_(x * 2.0), -1)  # two in-place ops on one intermediate
    (y * y).sum().backward()
    ref_leaf, ref_x = nonleaf(leaf.detach().numpy())
    s = F.softmax(F.relu(ref_x * 2.0), -1)
    (s * s).sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), ref_leaf.grad.numpy(), rtol=1e-10)
    z = cpu(randn(3))  # requires no grad: nothing recorded
    assert F.relu_(z) is z and z.grad_fn is None and not z.requires_grad


def test_residual_block_written_with_plus_equals(rng):
    """torchvision's BasicBlock adds its shortcut in place (``out += identity``): the same values and gradients
    as ``out = out + identity``, through Conv2d, BatchNorm2d and ReLU, in float64."""
    torch_like = [nn.Conv2d(3, 3, 3, padding=1, bias=False, dtype=mf.float64), nn.BatchNorm2d(3, dtype=mf.float64)]
    x0 = rng.standard_normal((2, 3, 5, 5))

    def block(plus_equals):
        conv, bn = torch_like
        x = cpu(x0, requires_grad=True)
        out = bn(conv(x))
        if plus_equals:
            out += x
        else:
            out = out + x
        y = F.relu(out)
        (y * y).sum().backward()
        grads = [x.grad.numpy()] + [p.grad.numpy() for p in (conv.weight, bn.weight, bn.bias)]
        for p in (conv.weight, bn.weight, bn.bias):
            p.grad = None
        return y.detach().numpy(), grads

    (y1, g1), (y2, g2) = block(True), block(False)
    np.testing.assert_allclose(y1, y2, rtol=1e-12)
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_inplace_arithmetic_with_a_recorded_operand():
    """A tensor that requires no grad, written in place with one that does, then requires grad (as PyTorch's);
    the operand's gradient is summed over the broadcast; chains of in-place arithmetic match their out-of-place
    forms under finite differences."""
    w = cpu(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    x = cpu(np.ones((2, 3)))
    x += w
    assert x.requires_grad and x.grad_fn is not None
    (x * x).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [8.0, 12.0, 16.0])

    def chain(a, b):
        y = a * 1.0
        y += b
        y *= b
        y /= b + 2.0
        y -= a
        return y.add_(b, alpha=-0.5)
    args = [cpu(randn(3, 4, seed=31, dtype=np.float64), requires_grad=True),
            cpu(randn(4, seed=32, dtype=np.float64) + 3.0, requires_grad=True)]
    assert gradcheck(chain, args)


def test_write_through_a_view_is_recorded_on_the_viewed_tensor():
    """An in-place write through an indexed view is written back into the viewed tensor's history (PyTorch
    rebases it so): the view's own gradient and the viewed tensor's both include it, through a temporary view
    too (``y[1][1:].mul_(5)``), and a tensor that required no grad takes the history of what was written into
    it (``buf[0].add_(w)``)."""
    a = np.array([[-1.0, 2.0], [3.0, -4.0]])
    leaf, base = nonleaf(a)
    view = base[0]
    view.sin_()
    view.sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), [np.cos([-1.0, 2.0]), [0.0, 0.0]])
    leaf, base = nonleaf(a)
    base[0].sin_()
    (base * 2.0).sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), [2 * np.cos([-1.0, 2.0]), [2.0, 2.0]])
    leaf, base = nonleaf(a)
    base[1][1:].mul_(5.0)
    (base * base).sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), [[-2.0, 4.0], [6.0, -200.0]])
    w = cpu(np.array(2.0), requires_grad=True)
    buf = mf.zeros(3, dtype=mf.float64)
    buf[0].add_(w)
    v = cpu(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    (buf * v).sum().backward()
    assert buf.requires_grad and float(w.grad.item()) == 1.0
    np.testing.assert_allclose(v.grad.numpy(), [2.0, 0.0, 0.0])


@pytest.mark.parametrize("name", RECORDED)
def test_inplace_after_save_names_the_op(name):
    """An array saved for backward (here Mul's) that an in-place form overwrote raises in backward,
    naming the in-place op and the one that saved it."""
    leaf, x = nonleaf(randn(3, 6, seed=12, dtype=np.float64))
    w = cpu(randn(3, 6, seed=13, dtype=np.float64), requires_grad=True)
    out = (x * w).sum()
    FORMS[name].fn(x)
    with pytest.raises(RuntimeError, match=rf"in-place operation \(last by {FORMS[name].op}\): Mul saved"):
        out.backward()


def test_inplace_after_save_raises_naming_both_ops():
    leaf, x = nonleaf(randn(6, seed=12, dtype=np.float64))
    w = cpu(randn(6, seed=13, dtype=np.float64), requires_grad=True)
    out = (x * w).sum()  # Mul saved x's array
    F.relu_(x)
    with pytest.raises(RuntimeError, match=r"in-place operation \(last by relu_\): Mul saved"):
        out.backward()
    # softmax_ saves its output (x's array): a later in-place op on it is caught too
    leaf, x = nonleaf(randn(6, seed=14, dtype=np.float64))
    y = F.softmax_(x, -1)
    F.gelu_(y)
    with pytest.raises(RuntimeError, match=r"last by gelu_\): Softmax saved"):
        y.sum().backward()
    # and the op's own save is not mistaken for a change (the bump comes before the save)
    leaf, x = nonleaf(randn(6, seed=15, dtype=np.float64))
    F.softmax_(x, -1).sum().backward()
    assert leaf.grad is not None


def test_inplace_on_leaf_requiring_grad_raises_like_pytorch():
    msg = "a leaf Variable that requires grad is being used in an in-place operation"
    for fn in (F.relu_, F.gelu_, lambda t: F.softmax_(t, -1), lambda t: F.dropout(t, 0.5, inplace=True),
               lambda t: F.relu(t, inplace=True)):
        leaf = cpu(randn(5, seed=16), requires_grad=True)
        with pytest.raises(RuntimeError, match=msg):
            fn(leaf)
        with mf.no_grad():  # allowed there, as in PyTorch
            assert fn(leaf) is leaf


def test_layer_norm_inplace_refuses_autograd():
    w = cpu(np.ones(4, np.float32), requires_grad=True)
    x = cpu(randn(3, 4))
    with pytest.raises(RuntimeError, match="layer_norm_.*weight requires grad.*use layer_norm"):
        F.layer_norm_(x, (4,), w)
    leaf, x = nonleaf(randn(3, 4))
    with pytest.raises(RuntimeError, match="layer_norm_.*input requires grad"):
        F.layer_norm_(x, (4,))
    node = x.grad_fn
    with mf.no_grad():
        y = F.layer_norm_(x, (4,), w)
    assert y is x and x.grad_fn is node  # not recorded: x keeps its node, as in PyTorch


# ---------------------------------------------------------------- bit-packed masks
@pytest.mark.parametrize("n", [0, *SIZES, 32, 64])
def test_mask_pack_layout_and_tail_bits(n):
    keep = np.random.default_rng(n).random(n) < 0.5
    m = KE.pack_mask_ref(keep)
    assert m.dtype == np.uint32 and m.shape == (KE.mask_words(n),)
    bits = [(int(m[i // 32]) >> (i % 32)) & 1 for i in range(n)]  # word w holds 32w..32w+31, LSB first
    np.testing.assert_array_equal(np.array(bits, bool), keep)
    if n % 32:
        assert int(m[-1]) >> (n % 32) == 0  # tail bits are 0
    np.testing.assert_array_equal(KE.unpack_mask_ref(m, (n,)), keep)


@pytest.mark.parametrize("n", SIZES)
def test_relu_saves_only_a_packed_mask(n):
    a = randn(n, seed=n, dtype=np.float64)
    leaf, x = nonleaf(a)
    y = F.relu(x)
    ctx = y._ctx
    assert ctx.saved == () and ctx.mask.dtype == np.uint32 and ctx.mask.size == -(-n // 32)
    g = randn(n, seed=n + 1, dtype=np.float64)
    y.backward(cpu(g))
    np.testing.assert_array_equal(leaf.grad.numpy(), np.where(a > 0, g, 0))
    with mf.no_grad():
        assert not hasattr(F.relu(cpu(a))._ctx, "mask")  # nothing recorded, no mask made


@pytest.mark.parametrize("n", SIZES)
def test_dropout_mask_is_packed_hash(n):
    x = randn(n, seed=n)
    y, m = KD.dropout_forward_ref(x, 4242, 0.3)
    keep = KD._keep_ref(n, 4242, KD.threshold(0.3))
    assert m.dtype == np.uint32 and m.size == KE.mask_words(n)
    np.testing.assert_array_equal(KE.unpack_mask_ref(m, (n,)), keep)
    np.testing.assert_array_equal(y, np.where(keep, x * np.float32(1 / 0.7), 0).astype(np.float32))
    g = randn(n, seed=n + 1)
    np.testing.assert_array_equal(KD.dropout_backward_ref(g, m, 0.3),
                                  np.where(keep, g * np.float32(1 / 0.7), 0).astype(np.float32))


# ---------------------------------------------------------------- Sequential in place under no_grad
class _Keeps(nn.Module):
    """A user module that keeps a reference to its output: Sequential must not overwrite it."""

    def forward(self, x):
        self.out = x * 1.0
        return self.out


def _count_inplace(monkeypatch):
    calls = []
    for cls in (nn.ReLU, nn.GELU, nn.Dropout, nn.Softmax, nn.LayerNorm):
        orig = cls.forward_inplace

        def spy(self, x, orig=orig):
            calls.append(type(self).__name__)
            return orig(self, x)

        monkeypatch.setattr(cls, "forward_inplace", spy)
    return calls


def test_sequential_runs_in_place_under_no_grad(monkeypatch):
    mf.manual_seed(0)
    model = nn.Sequential(nn.ReLU(), nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Dropout(0.3),
                          nn.ReLU(), nn.Flatten(), nn.Linear(16, 5), nn.Softmax(-1))
    model.eval()
    a = randn(4, 8, seed=17)
    x = cpu(a.copy())
    want = model(x).detach().numpy()
    calls = _count_inplace(monkeypatch)
    with mf.no_grad():
        y = model(x)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(x.numpy(), a)  # the caller's input is never overwritten
    assert x._version == 0
    # the first ReLU meets the caller's input: out of place; the others run in place
    assert calls == ["GELU", "LayerNorm", "Dropout", "ReLU", "Softmax"]
    calls.clear()
    model(x)  # grad mode on: nothing in place
    assert calls == []
    # under autocast (an op's result may take another dtype) nothing runs in place either: the same results as
    # with grad mode on (a bfloat16 LayerNorm input raised against its float32 weights)
    with mf.autocast("cpu", dtype=mf.bfloat16):
        want = model(x)
        with mf.no_grad():
            got = model(x)
    assert calls == [] and got.dtype == want.dtype
    np.testing.assert_array_equal(got.float().numpy(), want.detach().float().numpy())
    ln = nn.LayerNorm(16)  # float32 weights normalizing a bfloat16 input, in place after a layer: out of place
    with mf.no_grad():
        h = cpu(randn(4, 16, seed=3)).to(mf.bfloat16)
        got = nn.Sequential(nn.ReLU(), nn.ReLU(), ln)(h)
    np.testing.assert_array_equal(got.float().numpy(), ln(h.relu()).detach().float().numpy())


def test_sequential_in_place_training_dropout_and_user_modules(monkeypatch):
    mf.manual_seed(1)
    model = nn.Sequential(nn.Linear(6, 6), _Keeps(), nn.ReLU(), nn.Linear(6, 6), nn.Dropout(0.5), nn.GELU())
    x = cpu(randn(5, 6, seed=18))
    mf.manual_seed(2)
    want = model(x).detach().numpy()
    calls = _count_inplace(monkeypatch)
    mf.manual_seed(2)
    with mf.no_grad():
        y = model(x)
    np.testing.assert_array_equal(y.numpy(), want)  # dropout draws the same mask in place
    keeps = model[1]
    assert (keeps.out.numpy() < 0).any()  # the user module's output was not overwritten by the ReLU
    assert calls == ["Dropout", "GELU"]


# ---------------------------------------------------------------- GPU: CUDA path against the reference
def _cuda(a):
    import cupy

    return cupy.asarray(a)


def _host(a):
    import cupy

    return cupy.asnumpy(a)


def _gpu_case(fn, a, dtype, tol_scale=1.0):
    """``fn`` in place on a cuda tensor against the same on a cpu tensor (the NumPy reference)."""
    want = fn(cpu(a.copy())).numpy()
    x = mf.tensor(a.copy(), device="cuda")
    arr = x._data
    assert fn(x) is x and x._data is arr and x._version == 1
    got = x.cpu().numpy()
    assert rel_err(got, want) <= TOL[np.dtype(dtype)] * 10 * tol_scale


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_gpu_relu_mask_and_mask_apply(dtype, n):
    a = randn(n, seed=n).astype(dtype)
    poison = _cuda(np.full(n, np.nan, dtype))
    y, m = KE.relu_mask(_cuda(a), out=poison)
    yr, mr = KE.relu_mask(a)
    assert y is poison
    np.testing.assert_array_equal(_host(y).astype(np.float32), yr.astype(np.float32))
    np.testing.assert_array_equal(_host(m), mr)  # same words, tail bits 0
    xi = _cuda(a)  # in place
    y, m = KE.relu_mask(xi, out=xi)
    assert y is xi
    np.testing.assert_array_equal(_host(xi).astype(np.float32), yr.astype(np.float32))
    np.testing.assert_array_equal(_host(m), mr)
    g = randn(n, seed=n + 1).astype(dtype)
    for scale in (1.0, 2.5):
        np.testing.assert_array_equal(_host(KE.mask_apply(_cuda(g), _cuda(mr), scale)).astype(np.float32),
                                      KE.mask_apply(g, mr, scale).astype(np.float32))


# Sizes around the 16-byte chunks (8 halves, 4 floats, 2 doubles), the mask words (32 elements)
# and the warps (32 chunks), and one of a few million.
VEC_SIZES = [1, 7, 31, 32, 33, 255, 257, 4097, 3_000_003]


def _guarded(a, offset, fill):
    """A CUDA copy of ``a`` at element ``offset`` of a fresh allocation, one ``fill`` element on each
    side: (the view, the whole allocation). offset 1 starts mid-vector: the element-by-element path."""
    base = np.concatenate([np.full(offset, fill, a.dtype), a, np.full(1, fill, a.dtype)])
    whole = dev_array(base, "cuda")
    return whole[offset:offset + a.size], whole


def _guards_kept(whole, offset, n, fill):
    g = f64(whole)
    return np.array_equal(np.concatenate([g[:offset], g[offset + n:]]), np.full(offset + 1, fill), equal_nan=True)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [*DTYPES, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("n", VEC_SIZES)
@pytest.mark.parametrize("offset", [0, 1])
def test_gpu_relu_mask_vectors_tails_views_and_inplace(dtype, n, offset, poisoned_pool):
    a = randn(n, seed=n).astype(dtype)
    a[::5], a[1::7] = 0, -0.0  # zeros of either sign are not kept
    want_y, want_m = f64(np.where(a > 0, a, 0).astype(dtype)), KE.pack_mask_ref(a > 0)
    x, xwhole = _guarded(a, offset, 0.0)
    out, owhole = _guarded(np.full(n, np.nan, dtype), offset, np.nan)  # poisoned: unwritten elements show
    for y, m in (KE.relu_mask(x, out=out), KE.relu_mask(x)):  # into a view; into a new (aligned) array
        np.testing.assert_array_equal(f64(y), want_y)
        np.testing.assert_array_equal(host(m), want_m)  # exact words, bits past n 0 (the pool is 0xFF)
    assert _guards_kept(owhole, offset, n, np.nan)
    np.testing.assert_array_equal(f64(x), f64(a))
    y, m = KE.relu_mask(x, out=x)  # in place
    assert y is x
    np.testing.assert_array_equal(f64(x), want_y)
    np.testing.assert_array_equal(host(m), want_m)
    assert _guards_kept(xwhole, offset, n, 0.0)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [*DTYPES, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("n", VEC_SIZES)
@pytest.mark.parametrize("offset", [0, 1])
def test_gpu_relu_forward_vectors_tails_views_and_inplace(dtype, n, offset, poisoned_pool):
    """relu_fwd (no mask) moves a 16-byte chunk a thread: whole chunks, the partial last one and a view that
    starts mid-vector (element by element) give max(x, 0), written into a view, a new array and in place."""
    a = randn(n, seed=n + 2).astype(dtype)
    a[::5], a[1::7] = 0, -0.0
    want = f64(np.where(a > 0, a, 0).astype(dtype))
    x, xwhole = _guarded(a, offset, 0.0)
    out, owhole = _guarded(np.full(n, np.nan, dtype), offset, np.nan)  # poisoned: unwritten elements show
    for y in (KE.relu_forward(x, out=out), KE.relu_forward(x)):
        np.testing.assert_array_equal(f64(y), want)
    assert _guards_kept(owhole, offset, n, np.nan)
    y = KE.relu_forward(x, out=x)
    assert y is x
    np.testing.assert_array_equal(f64(x), want)
    assert _guards_kept(xwhole, offset, n, 0.0)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [*DTYPES, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("n", VEC_SIZES)
@pytest.mark.parametrize("offset", [0, 1])
def test_gpu_mask_apply_vectors_tails_and_views(dtype, n, offset, poisoned_pool):
    keep = np.random.default_rng(n).random(n) < 0.5
    mask = KE.pack_mask_ref(keep)
    g = randn(n, seed=n + 1).astype(dtype)
    gv, _ = _guarded(g, offset, np.nan)
    for scale in (1.0, 2.5):  # the reference rounds grad * scale once, as the kernel does
        np.testing.assert_array_equal(f64(KE.mask_apply(gv, dev_array(mask, "cuda"), scale)),
                                      f64(KE.mask_apply(g, mask, scale)))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_gpu_mask_kernels_stride_over_the_grid(dtype, poisoned_pool):
    """Two blocks for 100003 elements: each thread takes many chunks, its warp a mask word at each (relu_fwd
    the same chunks without one)."""
    import cupy

    n = 100_003
    a = randn(n, seed=5).astype(dtype)
    x, y, m = dev_array(a, "cuda"), cupy.empty(n, dtype), cupy.empty(KE.mask_words(n), cupy.uint32)
    KE._kernel(np.dtype(dtype), "relu_fwd_mask")((2,), (256,), (x, y, m, np.int64(n)))
    np.testing.assert_array_equal(host(y), np.where(a > 0, a, 0).astype(dtype))
    np.testing.assert_array_equal(host(m), KE.pack_mask_ref(a > 0))
    y2 = cupy.empty(n, dtype)
    KE._kernel(np.dtype(dtype), "relu_fwd")((2,), (256,), (x, y2, np.int64(n)))  # the chunks without a mask
    np.testing.assert_array_equal(host(y2), host(y))
    dx = cupy.empty(n, dtype)
    KE._kernel(np.dtype(dtype), "mask_apply")((2,), (256,), (x, m, dx, np.int64(n), np.float32(2.0)))
    np.testing.assert_array_equal(host(dx), np.where(a > 0, a * np.float32(2.0), 0).astype(dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_gpu_dropout_packed_mask_and_inplace(dtype, n):
    x = randn(3, n, seed=n).astype(dtype)
    for p in (0.1, 0.5, 0.9, 1.0):
        yr, mr = KD.dropout_forward_ref(x, 987654321, p)
        poison = _cuda(np.full(x.shape, np.nan, dtype))
        yg, mg = KD.dropout_forward(_cuda(x), 987654321, p, out=poison)
        assert yg is poison
        np.testing.assert_array_equal(_host(mg), mr)
        assert rel_err(_host(yg), yr) <= TOL[np.dtype(dtype)]
        xi = _cuda(x)
        yi, mi = KD.dropout_forward(xi, 987654321, p, out=xi)
        assert yi is xi
        np.testing.assert_array_equal(_host(mi), mr)
        assert rel_err(_host(xi), yr) <= TOL[np.dtype(dtype)]
        g = randn(3, n, seed=n + 1).astype(dtype)
        assert rel_err(_host(KD.dropout_backward(_cuda(g), mg, p)), KD.dropout_backward_ref(g, mr, p)) <= TOL[np.dtype(dtype)]
    mf.manual_seed(4)
    want = F.dropout(cpu(x), 0.5, inplace=True).numpy()
    mf.manual_seed(4)
    xt = mf.tensor(x.copy(), device="cuda")
    assert F.dropout(xt, 0.5, inplace=True) is xt
    assert rel_err(xt.cpu().numpy(), want) <= TOL[np.dtype(dtype)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("op", list(FORMS))
def test_gpu_inplace_ops_match_reference(op, dtype, n):
    _gpu_case(FORMS[op].fn, randn(3, n, seed=n).astype(dtype), dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 40000), (1, 70000)])
def test_gpu_inplace_long_rows(dtype, shape):
    # long rows take the tiled / online kernels, which re-read the row: still alias-safe
    a = randn(*shape, seed=19).astype(dtype)
    _gpu_case(lambda t: F.softmax_(t, -1), a, dtype)
    w = randn(shape[-1], seed=20).astype(dtype)
    _gpu_case(lambda t: F.layer_norm_(t, shape[-1:], mf.tensor(w, device=t.device)), a, dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_inplace_gradients_and_sequential(dtype):
    a = randn(5, 33, seed=21).astype(dtype)
    for inplace, plain in ((F.relu_, F.relu), (lambda t: F.softmax_(t, -1), lambda t: F.softmax(t, -1)),
                           (F.gelu_, F.gelu)):
        leaf = mf.tensor(a, device="cuda", requires_grad=True)
        (inplace(leaf * 1.0) * 2.0).sum().backward()
        ref = mf.tensor(a, device="cuda", requires_grad=True)
        (plain(ref * 1.0) * 2.0).sum().backward()
        np.testing.assert_array_equal(leaf.grad.cpu().numpy().astype(np.float32),
                                      ref.grad.cpu().numpy().astype(np.float32))
    model = nn.Sequential(nn.Linear(33, 40), nn.GELU(), nn.LayerNorm(40), nn.ReLU(), nn.Softmax(-1))
    model.to("cuda")
    x = mf.tensor(np.random.default_rng(0).standard_normal((6, 33)).astype(np.float32), device="cuda")
    before = x.cpu().numpy()
    want = model(x).detach().cpu().numpy()
    with mf.no_grad():
        y = model(x)
    np.testing.assert_allclose(y.cpu().numpy(), want, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(x.cpu().numpy(), before)


def test_augmented_assignment_through_an_index_of_a_recorded_tensor():
    """``h[i] += v`` on a tensor in the graph (Python: a view of h written in place, then h[i] = that view): the
    setitem records the write on h itself, so h's gradient is right, against the same computation written out
    of place; a different view written earlier is in h's history too."""
    a0, w0 = np.arange(12.0).reshape(3, 4), np.linspace(0.5, 2.0, 4)

    def run(in_place):
        a, w = cpu(a0, requires_grad=True), cpu(w0, requires_grad=True)
        h = a * 2.0
        if in_place:
            h[1] *= w * 3.0
            h[:, 0] -= 1.0
            h[0:2, 1:3] += w[:2]
        else:
            shift = mf.zeros(3, 4, dtype=mf.float64)
            shift[:, 0] = 1.0
            ones = mf.ones(1, 4, dtype=mf.float64)
            scale = mf.cat([ones, (w * 3.0)[None], ones], 0)
            add = mf.zeros(3, 4, dtype=mf.float64)
            add[0:2, 1:3] = add[0:2, 1:3] + w[:2]
            h = h * scale - shift + add
        (h * h).sum().backward()
        return h.detach().numpy(), a.grad.numpy(), w.grad.numpy()

    for got, want in zip(run(True), run(False)):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    leaf, h = nonleaf(a0)
    h[0:2].sin_()  # through a view, and no setitem after it: written back into h all the same
    h[2] += 1.0
    (h * h).sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), np.concatenate([2 * np.sin(a0[:2]) * np.cos(a0[:2]),
                                                                  2 * (a0[2:] + 1.0)]), rtol=1e-12)
    # the closing h[i] = view writes nothing more (PyTorch's version count: the op and one write back);
    # a detached view of the same memory is a new value there, cutting the gradient of what it replaces
    leaf, h = nonleaf(a0)
    h[1] *= 3.0
    assert h._version == 2
    h[2] = h[2].detach()
    assert h._version == 3
    (h * h).sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), [2 * a0[0], 18 * a0[1], [0.0] * 4], rtol=1e-12)


def _write_cases():
    """(an in-place write through a view of y, the same written out of place) for y of shape (2, 3)."""
    def put(y, flat, value):
        mask = np.zeros(6, bool)
        mask[flat] = True
        return mf.where(mf.tensor(mask.reshape(2, 3), device=y.device), value, y)

    def relu_rows(y):
        return put(y, [0, 1], y.relu())
    return {
        "t_mul": (lambda y: y.t().mul_(2.0), lambda y: y * 2.0),
        "view_setitem": (lambda y: y.view(-1).__setitem__(3, 5.0), lambda y: put(y, [3], 5.0)),
        "reshape_row_relu": (lambda y: y.reshape(3, 2)[0].relu_(), relu_rows),
        "transpose_row_zero": (lambda y: y.transpose(0, 1)[0].zero_(), lambda y: put(y, [0, 3], 0.0)),
        "column_fill": (lambda y: y[:, 1].fill_(7.0), lambda y: put(y, [1, 4], 7.0)),
        "unsqueeze_add": (lambda y: y.unsqueeze(0).add_(1.0), lambda y: y + 1.0),
        "flatten_slice_mul": (lambda y: y.flatten()[1:4].mul_(3.0), lambda y: put(y, [1, 2, 3], y * 3.0)),
        "diagonal_mul": (lambda y: y.diagonal().mul_(10.0), lambda y: put(y, [0, 4], y * 10.0)),
        "narrow_mul": (lambda y: y.narrow(1, 1, 2).mul_(y[:, 1:].detach()),
                       lambda y: put(y, [1, 2, 4, 5], y * y.detach())),
        "T_slice_mul": (lambda y: y.T[1:].mul_(2.0), lambda y: put(y, [1, 2, 4, 5], y * 2.0)),
        "whole_zero": (lambda y: y.zero_(), lambda y: y * 0.0),
        "whole_fill": (lambda y: y.fill_(2.0), lambda y: put(y, list(range(6)), 2.0)),
        "copying_reshape": (lambda y: y.t().reshape(-1).mul_(2.0), lambda y: y),  # a copy: y stays
    }


@pytest.mark.parametrize("case", list(_write_cases()))
def test_write_through_any_view_is_recorded_on_the_viewed_tensor(case, device):
    """An in-place write through a reshape, transpose, diagonal, narrow... of a recorded tensor is written back
    into its history, as PyTorch rebases it (fill_ / zero_ recorded too, the old value's gradient zero): values
    and gradients equal the same computation written out of place."""
    write, plain = _write_cases()[case]
    a = np.linspace(-1.5, 2.0, 6).reshape(2, 3)
    weights = mf.tensor(np.arange(1.0, 7.0).reshape(2, 3), device=device)
    got = []
    for fn in (write, plain):
        x = mf.tensor(a, requires_grad=True, device=device)
        y = x.sin()
        out = fn(y)
        y = y if fn is write else out
        (y * y * weights).sum().backward()
        got.append((y.detach().cpu().numpy(), x.grad.cpu().numpy()))
    for g, w in zip(*got):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-15)


def test_fills_and_draws_on_recorded_tensors(device):
    """zero_ / fill_ / uniform_ / normal_ on a recorded tensor are recorded (the old value's gradient is zero),
    a 0-d tensor fill value gets the sum of the gradient (PyTorch's); a leaf that requires grad, or a view of
    one, refuses with its value unchanged."""
    x = mf.tensor([1.0, 2.0, 3.0], requires_grad=True, device=device)
    v = mf.tensor(2.5, requires_grad=True, device=device)
    w = mf.tensor([1.0, 2.0, 3.0], device=device)
    y = x * 2.0
    y[1:].fill_(v)
    (y * w).sum().backward()
    assert y.tolist() == [2.0, 2.5, 2.5]
    assert x.grad.tolist() == [2.0, 0.0, 0.0] and v.grad.item() == 5.0
    for draw in (lambda t: t.uniform_(), lambda t: t.normal_(), lambda t: t.zero_(), lambda t: t.bernoulli_(0.5)):
        x.grad = None
        y = x * 2.0
        draw(y)
        (y * x).sum().backward()
        np.testing.assert_array_equal(x.grad.cpu().numpy(), y.detach().cpu().numpy())
    buf = mf.zeros(3, dtype=mf.float64, device=device)
    buf.fill_(v)  # a buffer filled from a tensor in the graph joins it
    (buf * w).sum().backward()
    assert buf.requires_grad and v.grad.item() == 5.0 + 6.0
    for write in (lambda: x.fill_(1.0), lambda: x[0].zero_(), lambda: x.uniform_()):
        with pytest.raises(RuntimeError, match="leaf"):
            write()
    assert x.tolist() == [1.0, 2.0, 3.0] and x._version == 0
    with pytest.raises(RuntimeError, match="0-dimension value tensor"):
        (x * 1.0).fill_(w)


def test_draw_bounds_may_be_0d_tensors():
    """uniform_ / normal_ take a 0-d tensor that needs no grad as the float it holds (PyTorch's argument parser;
    torchvision's RandomResizedCrop draws ``uniform_(log_ratio[0], log_ratio[1])``), the same draws as the
    numbers give; a 1-element 1-D tensor, or one that requires grad, is refused (TypeError, as PyTorch's)."""
    for draw, bounds in (("uniform_", (0.25, 0.75)), ("normal_", (3.0, 0.5))):
        mf.manual_seed(7)
        want = getattr(mf.empty(64), draw)(*bounds).numpy()
        mf.manual_seed(7)
        got = getattr(mf.empty(64), draw)(*(mf.tensor(v) for v in bounds)).numpy()
        np.testing.assert_array_equal(got, want)
    assert mf.empty(1000).uniform_(mf.tensor(0.25), mf.tensor(0.75)).min().item() >= 0.25
    with pytest.raises(TypeError, match=r"uniform_\(\): argument 'from' must be float, not Tensor \(one of shape "
                                        r"\[1\]"):
        mf.empty(3).uniform_(mf.tensor([0.1]), 1.0)
    with pytest.raises(TypeError, match=r"argument 'std' must be float, not Tensor \(one of shape \[\] that "
                                        r"requires grad"):
        mf.empty(3).normal_(0.0, mf.tensor(1.0, requires_grad=True))


def test_views_that_would_miss_a_write_refuse():
    """A view taken of a tensor without history, which a recorded in-place op then gives one, would derive
    nothing from it (PyTorch rebases the view): using it raises. A view taken under no_grad of a tensor that
    requires grad refuses in-place writes in grad mode (PyTorch's rule: the base's gradient would miss them)."""
    for take in (lambda x: x[1], lambda x: x.t(), lambda x: x.view(-1)):
        x = mf.zeros(2, 3, dtype=mf.float64)
        w = mf.tensor([1.0, 2.0, 3.0], dtype=mf.float64, requires_grad=True)
        v = take(x)
        x[1] = w * 2.0
        with pytest.raises(RuntimeError, match=r"a view is used after its base was modified in place \(setitem\)"):
            v * v
    x = mf.tensor(np.arange(1.0, 7.0).reshape(2, 3), requires_grad=True)
    y = x.clone()
    for write in (lambda v: v.mul_(2.0), lambda v: v.__setitem__(0, x[0, 0] * 5.0), lambda v: v.zero_(),
                  lambda v: v.uniform_()):
        with mf.no_grad():
            v = y[1]
        with pytest.raises(RuntimeError, match="view was created in no_grad mode"):
            write(v)
    assert y.tolist() == x.tolist()
    with mf.no_grad():
        y[1].mul_(2.0)  # under no_grad: allowed
    assert y[1].tolist() == [8.0, 10.0, 12.0]


def test_writes_through_views_that_write_nothing_back_refuse_the_base():
    """A write through an expanded, split or strided view (of a temporary view too) is not written back into the
    base's history (their elements may repeat; PyTorch refuses several of them): using the base afterwards
    raises instead of giving a gradient that misses the write."""
    takes = (lambda y: y.unsqueeze(0).expand(4, 2, 3)[0, 1], lambda y: y.view(6).chunk(2)[1][1:],
             lambda y: y.view(6).unfold(0, 2, 2)[1], lambda y: y.view(6).as_strided((2,), (1,)))
    for take in takes:
        x = mf.tensor(np.arange(1.0, 7.0).reshape(2, 3), requires_grad=True)
        v = mf.tensor(np.array([10.0, 20.0]), requires_grad=True)
        y = x * 1.0
        target = take(y)
        target[:2] = v[:target[:2].shape[0]] if target.ndim else v[0]
        with pytest.raises(RuntimeError, match=r"written in place through a view of it \(setitem\)"):
            (y * 2.0).sum()


def test_lerp_addcmul_addcdiv_in_place_forms():
    """The EMA / hand-written-optimizer spellings: written into the tensor (its version bumped), refused on a
    leaf that requires grad outside no_grad, as PyTorch's."""
    rng = np.random.default_rng(7)
    a, b, c = (mf.tensor(rng.standard_normal(5).astype(np.float32)) for _ in range(3))
    c = c.abs() + 1
    ema = a.clone()
    assert ema.lerp_(b, 0.1) is ema and ema._version == 1
    np.testing.assert_allclose(ema.numpy(), a.numpy() + 0.1 * (b.numpy() - a.numpy()), rtol=1e-6)
    x = a.clone()
    x.addcmul_(b, c, value=-0.5).addcdiv_(b, c, value=2.0)
    np.testing.assert_allclose(x.numpy(), a.numpy() - 0.5 * b.numpy() * c.numpy() + 2 * b.numpy() / c.numpy(),
                               rtol=1e-6)
    p = mf.zeros(5, requires_grad=True)
    with pytest.raises(RuntimeError, match="lerp_: a leaf Variable that requires grad"):
        p.lerp_(b, 0.5)
    with mf.no_grad():
        p.lerp_(b, 0.5)
    np.testing.assert_allclose(p.detach().numpy(), 0.5 * b.numpy(), rtol=1e-6)


def test_in_place_forms_of_tensors_in_the_graph_are_recorded():
    """On a non-leaf that requires grad (or with an operand that does), addcmul_ / addcdiv_ / lerp_ / remainder_ /
    fmod_ / div_(rounding_mode=) write in place and carry the out-of-place form's gradients, as PyTorch's: to the
    old value and to the operands, even where the backward needs the overwritten values (remainder's by its
    divisor). Against the closed forms."""
    x0, o0 = np.array([1.5, -2.0, 3.0]), np.array([0.7, 1.3, -0.4])
    w = np.array([1.0, 2.0, 3.0])
    cases = {  # name: (in-place call, its value, d/dx, d/do)
        "addcmul_": (lambda y, o: y.addcmul_(o, o, value=0.5), x0 + 0.5 * o0 * o0, w, w * o0),
        "addcdiv_": (lambda y, o: y.addcdiv_(o, o + 3, value=2.0), x0 + 2 * o0 / (o0 + 3), w,
                     w * 2 * 3 / (o0 + 3) ** 2),
        "lerp_": (lambda y, o: y.lerp_(o, 0.3), x0 + 0.3 * (o0 - x0), 0.7 * w, 0.3 * w),
        "remainder_": (lambda y, o: y.remainder_(o), np.mod(x0, o0), w, -np.floor(x0 / o0) * w),
        "fmod_": (lambda y, o: y.fmod_(o), np.fmod(x0, o0), w, -np.trunc(x0 / o0) * w),
        "div_floor": (lambda y, o: y.div_(o, rounding_mode="floor"), np.floor(x0 / o0), 0 * w, 0 * w),
    }
    for name, (call, value, dx, do) in cases.items():
        x, o = mf.tensor(x0, requires_grad=True), mf.tensor(o0, requires_grad=True)
        y = x * 1
        assert call(y, o) is y and y._version == 1, name
        np.testing.assert_allclose(y.detach().numpy(), value, rtol=1e-12, err_msg=name)
        (y * mf.tensor(w)).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), dx, rtol=1e-12, err_msg=name)
        np.testing.assert_allclose(o.grad.numpy(), do, rtol=1e-12, err_msg=name)
    t, z = mf.tensor([5.0, -5.0]), mf.tensor([3.0, 3.0], requires_grad=True)
    t.remainder_(z).sum().backward()  # (t itself needs no grad: its write is recorded for z's)
    np.testing.assert_array_equal(z.grad.numpy(), [-1.0, 2.0])


def test_copy_is_recorded_as_pytorchs():
    """x.copy_(src) where src (or x) requires grad is an op of the tape: src gets the output's gradient
    (summed over a broadcast, in its dtype), x's old value a zero one; a leaf that requires grad is refused;
    without grad mode (or nothing requiring grad) it is a plain copy."""
    w = mf.tensor([1.0, 2.0], requires_grad=True)
    buf = mf.zeros(2)
    assert buf.copy_(w) is buf and buf.requires_grad
    ((buf * 3).sum() + (w ** 2).sum()).backward()
    assert w.grad.tolist() == [5.0, 7.0]
    a = mf.tensor([1.0, 2.0], requires_grad=True)
    h = a * 1
    s = mf.tensor(5.0, dtype=mf.float64, requires_grad=True)
    h.copy_(s)  # broadcast from a 0-d float64
    assert h.dtype == mf.float32 and h.tolist() == [5.0, 5.0]
    (h * mf.tensor([1.0, 2.0])).sum().backward()
    assert s.grad.dtype == mf.float64 and float(s.grad) == 3.0 and a.grad.tolist() == [0.0, 0.0]
    with pytest.raises(RuntimeError, match="copy_: a leaf Variable that requires grad"):
        mf.tensor([1.0], requires_grad=True).copy_(mf.zeros(1))
    with pytest.raises(RuntimeError, match="copy_: the source's shape"):
        mf.zeros(2).copy_(mf.ones(3, requires_grad=True))
    with mf.no_grad():
        assert not mf.zeros(2).copy_(w).requires_grad
    assert mf.zeros(2, dtype=mf.int64).copy_(mf.tensor([1.7, 2.2])).tolist() == [1, 2]


@pytest.mark.parametrize("keepdim", [False, True])
def test_logsumexp_output_changed_in_place_is_caught(keepdim):
    """logsumexp's backward reads its output: changing that output in place afterwards raises at backward,
    as PyTorch's (the output it saved was a reshaped copy of the one it returned, so the change went unseen
    and the gradient came out wrong)."""
    x = mf.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    y = (x * 1).logsumexp(1, keepdim=keepdim)
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an in-place operation \\(last by mul_\\): LogSumExp"):
        y.sum().backward()


@pytest.mark.parametrize("take", [lambda h: h[1:], lambda h: h.view(3, 1), lambda h: h.expand(2, 3),
                                  lambda h: h.reshape(1, 3)])
def test_view_of_a_base_changed_in_place_is_refused(take):
    """A view taken before a recorded in-place op on its base holds the new values, but its node derives it
    from the old ones (PyTorch rebases it): using it in a recorded op raises, rather than give a gradient that
    misses the in-place op. A view taken after it, and in-place ops through a view (a chunk's), are fine."""
    x = mf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = x * 1
    v = take(h)
    h.mul_(2)
    with pytest.raises(RuntimeError, match=r"a view is used after its base was modified in "
                                           r"place \(mul_\)"):
        v.sum()
    h[1:].sum().backward()
    assert x.grad.tolist() == [0.0, 2.0, 2.0]
    g = mf.tensor(np.arange(8.0).reshape(2, 4), requires_grad=True)
    a, b = (g * 1).chunk(2, 1)
    a.mul_(3)
    (a.sum() + 2 * b.sum()).backward()
    assert g.grad.tolist() == [[3.0, 3.0, 2.0, 2.0]] * 2


# ---------------------------------------------------------------- expanded views (several elements at one location)
_OVERLAP = "more than one element of the written-to tensor refers to a single memory location"
_REFUSED = {"mul_": lambda t: t.mul_(2), "add_": lambda t: t.add_(1), "relu_": lambda t: t.relu_(),
            "clamp_": lambda t: t.clamp_(0, 0.5), "exp_": lambda t: t.exp_(), "uniform_": lambda t: t.uniform_(),
            "normal_": lambda t: t.normal_(), "copy_": lambda t: t.copy_(mf.tensor([1.0, 2.0, 3.0], device=t.device))}


@pytest.mark.parametrize("name", list(_REFUSED))
def test_inplace_op_on_an_expanded_view_raises_like_pytorch(device, name):
    """PyTorch refuses an in-place op on an expanded view (its result would depend on the order of the writes
    to the one shared location; on the GPU it raced): the same error, naming the op, and the source unchanged."""
    src = mf.tensor([4.0], device=device)
    view = src.expand(3)
    with pytest.raises(RuntimeError, match=f"{name}: unsupported operation: {_OVERLAP}"):
        _REFUSED[name](view)
    assert host(src).tolist() == [4.0]


def test_fills_and_indexed_writes_reach_an_expanded_views_source(device):
    """fill_, zero_ and setitem write an expanded view as PyTorch does (on the CPU too, where NumPy's broadcast
    view was read-only): through to the source, every element sharing the location; a view of x's own shape
    takes every in-place op, and x changes with it."""
    cases = ((lambda v: v.fill_(3.0), [[3.0], [3.0]]), (lambda v: v.zero_(), [[0.0], [0.0]]),
             (lambda v: v.__setitem__(1, 5.0), [[1.0], [5.0]]))
    for write, want in cases:
        src = mf.tensor([[1.0], [2.0]], device=device)
        view = src.expand(2, 3)
        write(view)
        assert host(src).tolist() == want
        assert host(view).tolist() == [row * 3 for row in want]
    x = mf.tensor([1.0, 2.0, 3.0], device=device)
    x.expand(3).mul_(2)
    assert host(x).tolist() == [2.0, 4.0, 6.0]


def test_a_hook_writing_its_gradient_in_place(device):
    """A tensor hook that writes its gradient in place (returning None) changes the gradient passed on, as in
    PyTorch: also on the CPU for a 0-d op's gradient (a NumPy scalar, whose writes went nowhere) and for one
    made by broadcasting (a read-only view, which raised NumPy's error)."""
    x = mf.tensor(3.0, device=device, requires_grad=True)
    z = x * x
    z.register_hook(lambda g: g.mul_(10))
    z.exp().backward()
    np.testing.assert_allclose(float(x.grad), 10 * np.exp(9.0) * 6, rtol=1e-5)
    v = mf.tensor([3.0], device=device, requires_grad=True)
    y = v * v
    y.register_hook(lambda g: g.mul_(10))
    y.sum().backward()
    assert host(v.grad).tolist() == [60.0]


def test_unfold_is_a_view_of_its_tensor(device):
    """Tensor.unfold is a view, as PyTorch's: PyTorch's strides, writes through a window reach the tensor, and
    the gradient adds each window back at its elements (overlapping windows sum); a 0-d tensor's one window
    has no windows dim."""
    x = mf.arange(12.0, device=device).reshape(3, 4)
    u = x.unfold(1, 2, 2)
    assert u.shape == (3, 2, 2) and u.stride() == (4, 2, 1)
    u.mul_(10)
    assert host(x).tolist() == [[10.0 * v for v in range(r * 4, r * 4 + 4)] for r in range(3)]
    w = mf.arange(12.0, device=device).reshape(3, 4).requires_grad_()
    weights = np.arange(18.0).reshape(3, 3, 2)
    (w.unfold(1, 2, 1) * mf.tensor(weights, device=device)).sum().backward()
    want = np.zeros((3, 4))
    for j in range(3):  # window j covers columns j, j + 1
        want[:, j:j + 2] += weights[:, j, :]
    np.testing.assert_array_equal(host(w.grad), want)
    z = mf.tensor(5.0, device=device)
    assert z.unfold(0, 1, 1).shape == (1,) and z.unfold(0, 0, 1).shape == (0,)


# ---------------------------------------------------------------- operands overlapping the written-to tensor
PARTIAL_OVERLAPS = {  # an in-place op whose tensor operand is a shifted view of the tensor it writes
    "add_": lambda x: x[1:].add_(x[:-1]),
    "+=": lambda x: x[1:].__iadd__(x[:-1]),
    "sub_": lambda x: x[1:].sub_(x[:-1], alpha=2),
    "mul_": lambda x: x[1:].mul_(x[:-1]),
    "div_": lambda x: x[:-1].div_(x[1:]),
    "copy_": lambda x: x[1:].copy_(x[:-1]),
    "clamp_": lambda x: x[1:].clamp_(min=x[:-1]),
    "lerp_": lambda x: x[1:].lerp_(x[:-1], 0.5),
    "addcmul_": lambda x: x[1:].addcmul_(x[:-1], x[:-1]),
    "a transpose of the same memory": lambda x: x.view(3, 2).copy_(x.view(2, 3).t()),
}


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("case", list(PARTIAL_OVERLAPS))
def test_in_place_operand_overlapping_the_target_in_part_is_refused(device, case, grad):
    """PyTorch refuses an in-place op whose operand overlaps the written-to tensor in part (the result would depend
    on the order of the writes; on the GPU it would race): the same error, nothing written, in grad mode or not."""
    base = mf.arange(1.0, 7.0, device=device, requires_grad=grad)
    x = base * 1.0 if grad else base
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        PARTIAL_OVERLAPS[case](x)
    np.testing.assert_array_equal(host(x.detach()), np.arange(1.0, 7.0))


@pytest.mark.parametrize("case,want", [
    (lambda x: x.add_(x), [0, 2, 4, 6, 8, 10]),  # the very same memory
    (lambda x: x[1:].add_(x[1:]), [0, 2, 4, 6, 8, 10]),  # two views of one region
    (lambda x: x[::2].add_(x[1::2]), [1, 1, 5, 3, 9, 5]),  # disjoint, not dense
    (lambda x: x[:4:2].add_(x[1:3]), [1, 1, 4, 3, 4, 5]),  # overlapping, not dense: PyTorch does not judge it
    (lambda x: x.view(2, 3)[0].add_(x.view(2, 3)[1]), [3, 5, 7, 3, 4, 5]),  # disjoint rows
    (lambda x: x[6:].add_(x[:0]), [0, 1, 2, 3, 4, 5]),  # empty
])
def test_in_place_operand_sharing_memory_without_partial_overlap_runs(device, case, want):
    """The in-place ops PyTorch runs whose operand shares the target's memory: its values (PyTorch 2.13's)."""
    x = mf.arange(6.0, device=device)
    case(x)
    np.testing.assert_array_equal(host(x), np.array(want, np.float32))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_in_place_sub_of_a_zero_keeps_negative_zero(device, dtype):
    """``x.sub_(0)`` and ``x.add_(0, alpha=-1)`` add -0.0, as PyTorch's: a -0.0 element stays -0.0 (its sign is read
    by copysign, atan2, 1/x)."""
    for op in (lambda x: x.sub_(0), lambda x: x.sub_(0.0), lambda x: x.add_(0, alpha=-1), lambda x: x.__isub__(0)):
        x = mf.tensor([-0.0, 0.0, 1.5], dtype=getattr(mf, dtype), device=device)
        op(x)
        got = host(x).astype(np.float64)
        np.testing.assert_array_equal(got, [0.0, 0.0, 1.5])
        assert list(np.signbit(got)) == [True, False, False]
