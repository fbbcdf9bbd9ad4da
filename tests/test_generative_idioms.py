"""What generative and image-to-image models lean on: convolutions with a fused ReLU whose weights are frozen
(a perceptual-loss feature network) or whose input is data (a first layer), against a NumPy float64 reference;
interpolate's error for a mode it does not know."""
import itertools

import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
import minifused.nn as nn


def _conv_relu_reference(x, w, b, g):
    """y = relu(conv2d(x, w, b, padding=1)) for 3x3 filters, and the gradients of sum(y * g) with respect to x,
    w and b, in float64."""
    x, w, b, g = (a.astype(np.float64) for a in (x, w, b, g))
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # (n, c, h, w, 3, 3)
    pre = np.einsum("ncpqrs,kcrs->nkpq", windows, w) + b[None, :, None, None]
    dm = g * (pre > 0)
    dxp = np.zeros_like(xp)
    h, wd = x.shape[2:]
    for r, s in itertools.product(range(3), range(3)):
        dxp[:, :, r:r + h, s:s + wd] += np.einsum("nkpq,kc->ncpq", dm, w[:, :, r, s])
    return np.maximum(pre, 0), dxp[:, :, 1:-1, 1:-1], np.einsum("ncpqrs,nkpq->kcrs", windows, dm), dm.sum((0, 2, 3))


@pytest.mark.parametrize("x_grad, w_grad, with_bias", [(True, False, False), (True, False, True),
                                                       (False, True, False), (True, True, False)])
@pytest.mark.parametrize("fused", ["functional", "sequential"])
def test_conv_relu_gradients_when_only_some_operands_need_them(x_grad, w_grad, with_bias, fused, rng):
    # a frozen feature network's conv (only x wants a gradient) and a first layer on data (only the weight does)
    # take the backward's one-sided paths: the ReLU's mask must cut their gradient too
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    g = rng.standard_normal((2, 4, 5, 6)).astype(np.float32)
    xt = mf.from_numpy(x).requires_grad_(x_grad)
    if fused == "functional":
        wt = mf.from_numpy(w).requires_grad_(w_grad)
        bt = mf.from_numpy(b).requires_grad_(w_grad) if with_bias else None
        y = F.conv2d(xt, wt, bt, padding=1, activation="relu")
    else:
        conv = nn.Conv2d(3, 4, 3, padding=1, bias=with_bias)
        with mf.no_grad():
            conv.weight.copy_(mf.from_numpy(w))
            if with_bias:
                conv.bias.copy_(mf.from_numpy(b))
        conv.requires_grad_(w_grad)
        wt, bt = conv.weight, conv.bias
        y = nn.Sequential(conv, nn.ReLU(inplace=True))(xt)
    (y * mf.from_numpy(g)).sum().backward()
    want_y, want_dx, want_dw, want_db = _conv_relu_reference(x, w, b if with_bias else np.zeros_like(b), g)
    np.testing.assert_allclose(y.detach().numpy(), want_y, rtol=1e-5, atol=1e-5)
    if x_grad:
        np.testing.assert_allclose(xt.grad.numpy(), want_dx, rtol=1e-5, atol=1e-5)
    if w_grad:
        np.testing.assert_allclose(wt.grad.numpy(), want_dw, rtol=1e-5, atol=1e-5)
        if with_bias:
            np.testing.assert_allclose(bt.grad.numpy(), want_db, rtol=1e-5, atol=1e-5)
    else:
        assert wt.grad is None


def test_interpolate_unknown_mode_is_not_implemented():
    # PyTorch raises NotImplementedError for a mode it does not know ('cubic' for 'bicubic')
    with pytest.raises(NotImplementedError, match="interpolate: mode must be one of .*got 'cubic'"):
        F.interpolate(mf.ones(1, 1, 2, 2), scale_factor=2, mode="cubic")
    with pytest.raises(NotImplementedError, match="interpolate: mode must be one of"):
        nn.Upsample(scale_factor=2, mode="cubic")(mf.ones(1, 1, 2, 2))
