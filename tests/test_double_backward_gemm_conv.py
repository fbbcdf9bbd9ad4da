"""Higher-order gradients (``create_graph=True``) of the products, Linear, the convolutions, pooling, resampling
and the other ops of ``ops/resample.py`` and ``ops/products.py``: ``gradgradcheck`` in float64 (a square of the
output where the op is linear, so that the second derivative is not zero), a few Hessian-vector products against
hand-derived NumPy formulas, third derivatives, and a WGAN-GP gradient penalty against central differences."""
import math

import numpy as np
import pytest

import minifused as mf
import minifused.nn.functional as F
from minifused import autograd

gradgradcheck = autograd.gradgradcheck


def rand(rng, *shape, requires_grad=True, scale=1.0):
    return mf.tensor(rng.standard_normal(shape) * scale, requires_grad=requires_grad)


def distinct(rng, *shape):
    """Values at least 0.1 apart (no ties, no maximum that a difference step moves past another)."""
    return mf.tensor(rng.permutation(math.prod(shape)).reshape(shape) * 0.1 + rng.uniform(0, 0.01, shape),
                     requires_grad=True)


def squared(f):
    return lambda *args: f(*args) * f(*args)


def values(t):
    return t.detach().numpy()


# ---------------------------------------------------------------- products
@pytest.mark.parametrize("a_shape, b_shape", [
    ((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)),
    ((5, 1, 2, 3), (4, 3, 2)), ((3,), (5, 3, 2)), ((5, 2, 3), (3,))])
def test_matmul(a_shape, b_shape):
    rng = np.random.default_rng(0)
    assert gradgradcheck(mf.matmul, (rand(rng, *a_shape), rand(rng, *b_shape)))


@pytest.mark.parametrize("wanted", [0, 1])
def test_matmul_one_operand_wanted(wanted):
    rng = np.random.default_rng(1)
    a, b = rand(rng, 2, 3, requires_grad=wanted == 0), rand(rng, 3, 4, requires_grad=wanted == 1)
    assert gradgradcheck(lambda t: mf.matmul(t, b) if wanted == 0 else mf.matmul(a, t), ((a, b)[wanted],))


def test_matmul_mixed_second_derivative_matches_the_formula():
    # s = <d/da sum((a @ b)^2) / 2, u> = <(a @ b) @ b.T, u>: ds/db = a.T @ u @ b + u.T @ (a @ b)
    rng = np.random.default_rng(2)
    a, b = rand(rng, 3, 4), rand(rng, 4, 2)
    u = rng.standard_normal((3, 4))
    (ga,) = autograd.grad((mf.matmul(a, b) ** 2).sum() / 2, a, create_graph=True)
    (gb,) = autograd.grad((ga * mf.tensor(u)).sum(), b)
    av, bv = values(a), values(b)
    np.testing.assert_allclose(values(gb), av.T @ u @ bv + u.T @ (av @ bv), rtol=1e-12)


@pytest.mark.parametrize("name, fn, shapes", [
    ("mm", mf.mm, [(3, 4), (4, 2)]), ("bmm", mf.bmm, [(2, 3, 4), (2, 4, 2)]), ("dot", mf.dot, [(3,), (3,)]),
    ("mv", mf.mv, [(2, 3), (3,)]), ("outer", mf.outer, [(3,), (2,)]),
    ("addmm", lambda i, a, b: mf.addmm(i, a, b, beta=0.3, alpha=1.5), [(4,), (3, 2), (2, 4)]),
    ("addmv", lambda i, m, v: mf.addmv(i, m, v, beta=0.5, alpha=2), [(2,), (2, 3), (3,)]),
    ("addr", mf.addr, [(2, 3), (2,), (3,)]), ("baddbmm", mf.baddbmm, [(2, 3, 4), (2, 3, 5), (2, 5, 4)]),
    ("addbmm", mf.addbmm, [(3, 4), (2, 3, 5), (2, 5, 4)]), ("inner", mf.inner, [(2, 3), (4, 3)]),
    ("kron", mf.kron, [(2, 2), (3, 1)]), ("cross", lambda a, b: mf.cross(a, b, dim=-1), [(2, 3), (2, 3)]),
    ("tensordot", lambda a, b: mf.tensordot(a, b, dims=([1, 2], [0, 1])), [(2, 3, 4), (3, 4, 2)])])
def test_product_forms(name, fn, shapes):
    rng = np.random.default_rng(3)
    assert gradgradcheck(squared(fn), [rand(rng, *s) for s in shapes])


def test_in_place_product_form():
    rng = np.random.default_rng(4)
    m, v = rand(rng, 2, 4, requires_grad=False), rand(rng, 4, requires_grad=False)
    assert gradgradcheck(squared(lambda x: (x * 1.0).addmv_(m, v)), (rand(rng, 2),))


@pytest.mark.parametrize("equation, shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("bij,bkj->bik", [(2, 1, 3), (2, 4, 3)]), ("ii->", [(3, 3)]),
    ("ii->i", [(3, 3)]), ("iij,jk->ik", [(3, 3, 2), (2, 4)]), ("ij,k->ijk", [(2, 3), (2,)]),
    ("...ij,...jk->...ik", [(2, 2, 3), (3, 4)]), ("i,j->ij", [(1,), (3,)]), (",ij->ij", [(), (2, 3)]),
    ("ij->ji", [(2, 3)]), ("ij->", [(2, 3)])])
def test_einsum(equation, shapes):
    rng = np.random.default_rng(5)
    assert gradgradcheck(squared(lambda *ops: mf.einsum(equation, *ops)), [rand(rng, *s) for s in shapes])


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, 1.5, 0.5, math.inf, 0.0])
@pytest.mark.parametrize("mode", ["use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"])
def test_cdist(p, mode):
    rng = np.random.default_rng(6)
    assert gradgradcheck(squared(lambda a, b: mf.cdist(a, b, p, compute_mode=mode)),
                         (rand(rng, 2, 2, 3), rand(rng, 2, 3, 3)))


def test_pdist_and_dist():
    rng = np.random.default_rng(7)
    assert gradgradcheck(mf.pdist, (rand(rng, 5, 3),))
    assert gradgradcheck(lambda a, b: mf.dist(a, b, 3), (rand(rng, 3), rand(rng, 3)))


# ---------------------------------------------------------------- Linear (fused bias and activation)
@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
@pytest.mark.parametrize("x_shape", [(4, 3), (2, 3, 3), (3,)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear(activation, x_shape, bias):
    rng = np.random.default_rng(8)
    args = (rand(rng, *x_shape), rand(rng, 5, 3)) + ((rand(rng, 5),) if bias else ())
    assert gradgradcheck(lambda x, w, b=None: F.linear(x, w, b, activation=activation), args)


@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
@pytest.mark.parametrize("wanted", ["x", "weight"])
def test_linear_some_inputs_wanted(activation, wanted):
    rng = np.random.default_rng(9)
    x, w, b = (rand(rng, 4, 3, requires_grad=wanted == "x"), rand(rng, 5, 3, requires_grad=wanted == "weight"),
               rand(rng, 5, requires_grad=False))
    if wanted == "x":
        assert gradgradcheck(lambda x: F.linear(x, w, b, activation=activation), (x,))
    else:
        assert gradgradcheck(lambda w: F.linear(x, w, b, activation=activation), (w,))


def test_linear_gelu_hessian_matches_the_formula():
    # f = sum(v * gelu(x @ w.T + b)): grad_x = (v * gelu'(z)) @ w, and d<grad_x, u>/dx = ((u @ w.T) v gelu''(z)) @ w
    rng = np.random.default_rng(10)
    x, w, b = rand(rng, 4, 3), rand(rng, 5, 3, requires_grad=False), rand(rng, 5, requires_grad=False)
    v, u = rng.standard_normal((4, 5)), rng.standard_normal((4, 3))
    (gx,) = autograd.grad((F.linear(x, w, b, activation="gelu") * mf.tensor(v)).sum(), x, create_graph=True)
    (hu,) = autograd.grad((gx * mf.tensor(u)).sum(), x)
    c, k = math.sqrt(2 / math.pi), 0.044715
    z = values(x) @ values(w).T + values(b)
    t, s = np.tanh(c * (z + k * z ** 3)), c * (1 + 3 * k * z * z)
    gelu2 = (1 - t * t) * (s - z * t * s * s + 3 * c * k * z * z)
    np.testing.assert_allclose(values(hu), ((u @ values(w).T) * v * gelu2) @ values(w), rtol=1e-10)


# ---------------------------------------------------------------- convolutions
CONV2D = [  # (image, stride, padding, groups, dilation, bias)
    ((5, 5), 1, 0, 1, 1, True), ((6, 7), 2, 1, 1, 1, False), ((5, 5), 1, 1, 2, 1, True), ((5, 5), 1, 1, 1, 2, True),
    ((6, 7), 2, 0, 2, 1, True), ((5, 5), 2, 1, 1, 2, False)]


@pytest.mark.parametrize("image, stride, padding, groups, dilation, bias", CONV2D)
def test_conv2d(image, stride, padding, groups, dilation, bias):
    rng = np.random.default_rng(11)
    c, k = (2, 2) if groups > 1 else (2, 3)
    args = (rand(rng, 2, c, *image), rand(rng, k, c // groups, 3, 3)) + ((rand(rng, k),) if bias else ())
    assert gradgradcheck(lambda x, w, b=None: F.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation,
                                                       groups=groups), args)


@pytest.mark.parametrize("wanted", ["x", "weight"])
def test_conv2d_one_operand_wanted(wanted):
    rng = np.random.default_rng(12)
    x, w = rand(rng, 2, 2, 5, 5, requires_grad=wanted == "x"), rand(rng, 3, 2, 3, 3, requires_grad=wanted == "weight")
    f = (lambda x: F.conv2d(x, w, stride=2, padding=1)) if wanted == "x" else (lambda w: F.conv2d(x, w, stride=2))
    assert gradgradcheck(squared(f), (x if wanted == "x" else w,))


def test_conv2d_fused_relu():
    rng = np.random.default_rng(13)
    args = (rand(rng, 2, 2, 5, 5), rand(rng, 3, 2, 3, 3), rand(rng, 3))
    assert gradgradcheck(lambda x, w, b: F.conv2d(x, w, b, padding=1, activation="relu"), args)


def test_conv2d_same_padding_and_conv1d():
    rng = np.random.default_rng(14)
    assert gradgradcheck(lambda x, w: F.conv2d(x, w, padding="same", dilation=(1, 2)),
                         (rand(rng, 2, 2, 5, 6), rand(rng, 2, 2, 2, 2)))
    assert gradgradcheck(lambda x, w: F.conv1d(x, w, stride=2, padding=1), (rand(rng, 2, 2, 7), rand(rng, 3, 2, 3)))


CONV_T = [  # (image, stride, padding, output_padding, groups, dilation)
    ((3, 3), 1, 0, 0, 1, 1), ((3, 4), 2, 1, 1, 1, 1), ((3, 3), 2, 1, 1, 2, 1), ((2, 3), 3, 1, 2, 1, 1),
    ((3, 3), 1, 1, 1, 1, 2)]  # (the last: an output_padding of the stride, below the dilation)


@pytest.mark.parametrize("image, stride, padding, output_padding, groups, dilation", CONV_T)
def test_conv_transpose2d(image, stride, padding, output_padding, groups, dilation):
    rng = np.random.default_rng(15)
    c, k = 2, 2
    args = (rand(rng, 2, c, *image), rand(rng, c, k // groups, 3, 3), rand(rng, k))
    assert gradgradcheck(lambda x, w, b: F.conv_transpose2d(x, w, b, stride=stride, padding=padding,
                                                            output_padding=output_padding, groups=groups,
                                                            dilation=dilation), args)


def test_conv_transpose1d():
    rng = np.random.default_rng(16)
    assert gradgradcheck(lambda x, w: F.conv_transpose1d(x, w, stride=2, padding=1, output_padding=1),
                         (rand(rng, 2, 2, 4), rand(rng, 2, 3, 3)))


def _conv_gradient(x, w):
    return autograd.grad(F.conv2d(x, w, stride=2, padding=1).tanh().sum(), (x, w), create_graph=True)


def _conv_t_gradient(x, w):
    y = F.conv_transpose2d(x, w, padding=1, output_padding=1, dilation=2).tanh().sum()
    return autograd.grad(y, (x, w), create_graph=True)


def _linear_gradient(x, w, b):
    return autograd.grad(F.linear(x, w, b, activation="gelu").sum(), (x, w, b), create_graph=True)


@pytest.mark.parametrize("gradient, shapes", [
    (_conv_gradient, [(1, 2, 4, 4), (2, 2, 3, 3)]), (_conv_t_gradient, [(1, 2, 2, 2), (2, 2, 3, 3)]),
    (_linear_gradient, [(4, 3), (5, 3), (5,)])], ids=["conv2d", "conv_transpose2d", "linear_gelu"])
def test_third_derivatives(gradient, shapes):
    rng = np.random.default_rng(17)
    assert gradgradcheck(gradient, [rand(rng, *s) for s in shapes])


def test_third_derivative_of_matmul_matches_the_formula():
    # d^3/dx^3 of sum((x @ w)^3) / 6, summed along the unit direction at each step: w * (sum of w)^2
    rng = np.random.default_rng(17)
    x, w = rand(rng, 1, 2), rand(rng, 2, 1, requires_grad=False)
    (g,) = autograd.grad((mf.matmul(x, w) ** 3).sum() / 6, x, create_graph=True)
    (h,) = autograd.grad(g.sum(), x, create_graph=True)
    (third,) = autograd.grad(h.sum(), x)
    wv = values(w)[:, 0]
    np.testing.assert_allclose(values(third)[0], wv * wv.sum() ** 2, rtol=1e-12)


def test_wgan_gp_weight_gradients_match_central_differences():
    rng = np.random.default_rng(18)
    x = rand(rng, 2, 2, 6, 6, requires_grad=False)
    params = [rand(rng, 3, 2, 3, 3, scale=0.5), rand(rng, 3, scale=0.5), rand(rng, 1, 27, scale=0.5),
              rand(rng, 1, scale=0.5)]

    def penalty():
        xi = x.detach().requires_grad_(True)
        h = F.leaky_relu(F.conv2d(xi, params[0], params[1], stride=2, padding=1), 0.2)
        critic = F.linear(h.flatten(1), params[2], params[3])
        (g,) = autograd.grad(critic.sum(), xi, create_graph=True)
        return ((g.flatten(1).norm(2, dim=1) - 1) ** 2).mean()

    penalty().backward()
    eps = 1e-6
    for p in params:
        numeric = np.zeros(p.shape)
        flat = p._data.reshape(-1)
        for i in range(flat.size):
            old = flat[i]
            flat[i] = old + eps
            up = penalty().item()
            flat[i] = old - eps
            down = penalty().item()
            flat[i] = old
            numeric.reshape(-1)[i] = (up - down) / (2 * eps)
        got = np.zeros(p.shape) if p.grad is None else values(p.grad)  # (the biases: no second-order path)
        np.testing.assert_allclose(got, numeric, rtol=1e-6, atol=1e-8)
    assert np.abs(values(params[0].grad)).max() > 0.1


# ---------------------------------------------------------------- pooling
MAX_POOL = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
            dict(kernel_size=3, stride=2, ceil_mode=True), dict(kernel_size=2, stride=1, dilation=2)]


@pytest.mark.parametrize("kwargs", MAX_POOL)
def test_max_pool2d(kwargs):
    rng = np.random.default_rng(19)
    assert gradgradcheck(squared(lambda x: F.max_pool2d(x, **kwargs)), (distinct(rng, 2, 1, 5, 6),))


def test_max_pool1d_and_channels_last():
    rng = np.random.default_rng(20)
    assert gradgradcheck(squared(lambda x: F.max_pool1d(x, 3, 2, 1)), (distinct(rng, 2, 2, 7),))
    x = distinct(rng, 1, 3, 4, 5)
    assert gradgradcheck(squared(lambda x: F.max_pool2d(x.to(memory_format=mf.channels_last), 2)), (x,))


def test_max_pool2d_hessian_matches_the_formula():
    # f = sum(max_pool(x)^2) / 2: the Hessian-vector product puts u's value at each window's maximum back there
    rng = np.random.default_rng(21)
    x = distinct(rng, 1, 2, 4, 4)
    u = rng.standard_normal((1, 2, 4, 4))
    (g,) = autograd.grad((F.max_pool2d(x, 2) ** 2).sum() / 2, x, create_graph=True)
    (hu,) = autograd.grad((g * mf.tensor(u)).sum(), x)
    xv = values(x)
    windows = xv.reshape(1, 2, 2, 2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(1, 2, 2, 2, 4)
    at_max = (windows == windows.max(-1, keepdims=True)).reshape(1, 2, 2, 2, 2, 2).transpose(0, 1, 2, 4, 3, 5)
    np.testing.assert_allclose(values(hu), u * at_max.reshape(1, 2, 4, 4), rtol=1e-12)


AVG_POOL = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
            dict(kernel_size=3, stride=2, ceil_mode=True),
            dict(kernel_size=3, stride=2, padding=1, count_include_pad=False), dict(kernel_size=2, divisor_override=3)]


@pytest.mark.parametrize("kwargs", AVG_POOL)
def test_avg_pool2d(kwargs):
    rng = np.random.default_rng(22)
    assert gradgradcheck(squared(lambda x: F.avg_pool2d(x, **kwargs)), (rand(rng, 2, 1, 5, 6),))


def test_avg_pool2d_hessian_matches_the_formula():
    # f = sum(avg_pool(x, 2)^2) / 2: H u = each window's mean of u, spread evenly back over the window
    rng = np.random.default_rng(23)
    x, u = rand(rng, 1, 2, 4, 6), rng.standard_normal((1, 2, 4, 6))
    (g,) = autograd.grad((F.avg_pool2d(x, 2) ** 2).sum() / 2, x, create_graph=True)
    (hu,) = autograd.grad((g * mf.tensor(u)).sum(), x)
    means = u.reshape(1, 2, 2, 2, 3, 2).mean(axis=(3, 5))
    np.testing.assert_allclose(values(hu), np.repeat(np.repeat(means, 2, 2), 2, 3) / 4, rtol=1e-12)


@pytest.mark.parametrize("out", [(2, 3), (3, 2), 1, (4, 5)])
@pytest.mark.parametrize("pool", ["avg", "max"])
def test_adaptive_pools(out, pool):
    rng = np.random.default_rng(24)
    x = rand(rng, 2, 1, 5, 6) if pool == "avg" else distinct(rng, 2, 1, 5, 6)
    assert gradgradcheck(squared(lambda x: getattr(F, f"adaptive_{pool}_pool2d")(x, out)), (x,))


def test_adaptive_pools_1d():
    rng = np.random.default_rng(25)
    assert gradgradcheck(squared(lambda x: F.adaptive_avg_pool1d(x, 3)), (rand(rng, 2, 2, 5),))
    assert gradgradcheck(squared(lambda x: F.adaptive_max_pool1d(x, 3)), (distinct(rng, 2, 2, 5),))


# ---------------------------------------------------------------- resampling, padding, blocks, lookups
@pytest.mark.parametrize("kwargs", [
    dict(size=(5, 7)), dict(scale_factor=2, mode="bilinear"), dict(size=(4, 9), mode="bilinear", align_corners=True),
    dict(size=(5, 5), mode="bicubic"), dict(scale_factor=1.5, mode="nearest-exact")])
def test_interpolate(kwargs):
    rng = np.random.default_rng(26)
    assert gradgradcheck(squared(lambda x: F.interpolate(x, **kwargs)), (rand(rng, 2, 2, 3, 4),))


def test_interpolate_linear_1d():
    rng = np.random.default_rng(27)
    assert gradgradcheck(squared(lambda x: F.interpolate(x, scale_factor=2, mode="linear")), (rand(rng, 2, 2, 5),))


@pytest.mark.parametrize("mode, pads", [
    ("constant", (1, 2, 2, 1)), ("constant", (-1, 2, 1, -1)), ("reflect", (1, 2, 2, 1)), ("reflect", (1, 1, 0, 2)),
    ("replicate", (1, 2, 2, 1)), ("replicate", (-1, 2, 1, -1)), ("circular", (1, 2, 2, 1)),
    ("circular", (-1, 2, 1, -1))])
def test_pad(mode, pads):
    rng = np.random.default_rng(28)
    value = {"value": 1.5} if mode == "constant" else {}
    assert gradgradcheck(squared(lambda x: F.pad(x, pads, mode=mode, **value)), (rand(rng, 2, 2, 4, 5),))


def test_unfold_and_fold():
    rng = np.random.default_rng(29)
    assert gradgradcheck(squared(lambda x: F.unfold(x, 3, padding=1, stride=2)), (rand(rng, 2, 2, 5, 6),))
    assert gradgradcheck(squared(lambda c: F.fold(c, (4, 5), 2, stride=(1, 2), padding=(0, 1))),
                         (rand(rng, 2, 8, 9),))


@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding(padding_idx):
    rng = np.random.default_rng(30)
    idx = mf.tensor(np.array([[0, 2, 2], [5, 1, 0]]))
    assert gradgradcheck(squared(lambda w: F.embedding(idx, w, padding_idx=padding_idx)), (rand(rng, 6, 3),))


def test_embedding_scaled_by_frequency_differentiates_its_backward():
    # the backward divides by each index's count, and so does its own gradient with respect to g
    rng = np.random.default_rng(31)
    idx = mf.tensor(np.array([0, 2, 2, 1]))
    w, v, u = rand(rng, 4, 3), rand(rng, 4, 3), rng.standard_normal((4, 3))
    (gw,) = autograd.grad(F.embedding(idx, w, padding_idx=1, scale_grad_by_freq=True), w, v, create_graph=True)
    (gv,) = autograd.grad((gw * mf.tensor(u)).sum(), v)
    np.testing.assert_allclose(values(gv), u[[0, 2, 2, 1]] * np.array([[1], [0.5], [0.5], [0]]), rtol=1e-12)


@pytest.mark.parametrize("name", ["dropout2d", "alpha_dropout", "feature_alpha_dropout"])
def test_channel_and_alpha_dropout(name):
    rng = np.random.default_rng(32)

    def f(x):
        mf.manual_seed(1)  # (the same mask at every call)
        return getattr(F, name)(x, 0.4, training=True)

    assert gradgradcheck(squared(f), (rand(rng, 2, 4, 3, 3),))
