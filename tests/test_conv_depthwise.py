"""Depthwise convolutions (groups = input channels) on conv_depthwise.cu: every direction against the float64
reference over random shapes (filter multipliers, strides, dilations, padding, odd sizes, ReLU and its mask),
outputs never left unwritten, the routing, and a MobileNet-style block against PyTorch on the GPU."""
import numpy as np
import pytest

import minifused as mf
from minifused import backend, nn
from minifused.kernels import conv as K
from minifused.kernels import conv_depthwise

_TOL = {"float16": 3e-3, "bfloat16": 2e-2, "float32": 1e-5}


def _cases(seed, count):
    """(n, c, h, w, multiplier, (r, s), stride, padding, dilation) of random depthwise convolutions."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        r, s = [(3, 3), (5, 5), (7, 7), (1, 1), (1, 7), (3, 1)][rng.integers(6)]
        st = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
        dl = (int(rng.integers(1, 3)), 1)
        pd = (int(rng.integers(0, 4)), int(rng.integers(0, 4)))
        n, c, h, w, mult = (int(rng.integers(1, 6)), int(rng.integers(2, 41)), int(rng.integers(3, 30)),
                            int(rng.integers(3, 30)), int(rng.integers(1, 4)))
        if h + 2 * pd[0] >= dl[0] * (r - 1) + 1 and w + 2 * pd[1] >= dl[1] * (s - 1) + 1:
            out.append((n, c, h, w, mult, (r, s), st, pd, dl))
    return out


def test_routing_rule():
    assert conv_depthwise.applies(backend.float16, (2, 8, 5, 5), (16, 1, 3, 3), 8)
    assert not conv_depthwise.applies(backend.float16, (2, 8, 5, 5), (8, 2, 3, 3), 4)  # two channels a group
    assert not conv_depthwise.applies(backend.float16, (2, 8, 5, 5), (8, 8, 3, 3), 1)
    assert not conv_depthwise.applies(backend.float64, (2, 8, 5, 5), (8, 1, 3, 3), 8)  # the reference's dtype
    assert not conv_depthwise.applies(backend.float32, (2, 8, 5, 5), (8, 1, 9, 9), 8)  # more taps than it keeps


def _fresh_launchers():
    for cached in (conv_depthwise._plan, conv_depthwise._tiled_plan, conv_depthwise.forward_launcher,
                   conv_depthwise.backward_launcher, K._forward_launcher, K._backward_launcher):
        cached.cache_clear()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", sorted(_TOL))
@pytest.mark.parametrize("kernels", ["tiled", "plane", "element"])
def test_gpu_random_depthwise_all_directions(dtype, kernels, poisoned_pool, monkeypatch):
    """Every kernel family on every shape: the tiled kernels where they apply (one filter a channel, no mask),
    the others elsewhere; then, with the tiled ones off, the planes in shared memory (these small planes all fit,
    taken whatever their size) and, with no shared memory allowed them, the thread-per-element kernels."""
    import cupy

    from conftest import rel_norm_error

    monkeypatch.setattr(conv_depthwise, "TILED", kernels == "tiled")
    if kernels == "plane":
        monkeypatch.setattr(conv_depthwise, "PLANE_MIN_OUTPUTS", 0)
        monkeypatch.setattr(conv_depthwise, "PLANE_MIN_INPUTS", 0)
    elif kernels == "element":
        monkeypatch.setattr(conv_depthwise, "PLANE_BYTES", 0)
    _fresh_launchers()
    try:
        _random_depthwise(dtype, rel_norm_error, cupy)
    finally:
        _fresh_launchers()


def _random_depthwise(dtype, rel_norm_error, cupy):
    dt, tol = backend.as_dtype(dtype), _TOL[dtype]
    rng = np.random.default_rng(3)
    failures = []
    launches = conv_depthwise.forward_launcher.cache_info().misses
    for i, (n, c, h, w, mult, (r, s), st, pd, dl) in enumerate(_cases(5, 30)):
        k = c * mult
        x = cupy.asarray(rng.standard_normal((n, c, h, w))).astype(dt)
        wt = cupy.asarray(rng.standard_normal((k, 1, r, s))).astype(dt)
        b = cupy.asarray(rng.standard_normal(k)).astype(dt)
        act, bias = ("relu" if i % 2 else None), (b if i % 3 else None)
        x64, w64 = x.astype(cupy.float64), wt.astype(cupy.float64)
        b64 = None if bias is None else b.astype(cupy.float64)
        y, mask = K.conv2d_forward(x, wt, bias, st, pd, dl, c, act, want_mask=act == "relu")
        y_ref, mask_ref = K.conv2d_forward_ref(x64, w64, b64, st, pd, dl, c, act, want_mask=act == "relu")
        errs = {"fwd": rel_norm_error(y, y_ref)}
        if act:  # the same without the mask (inference: the plane kernel where it fits)
            errs["fwd_no_mask"] = rel_norm_error(K.conv2d_forward(x, wt, bias, st, pd, dl, c, act)[0], y_ref)
            pre, _ = K.conv2d_forward_ref(x64, w64, b64, st, pd, dl, c)
            diff = K.unpack_mask(mask, y.shape) != (pre > 0)
            errs["mask"] = float((diff & (cupy.abs(pre) > 1e-2 * float(cupy.abs(pre).max()))).sum())
        dy = cupy.asarray(rng.standard_normal(y.shape)).astype(dt)
        dx, dw, db = K.conv2d_backward(dy, x, wt, st, pd, dl, c, mask_ref if act else None, True, True, True)
        rx, rw, rb = K.conv2d_backward_ref(dy.astype(cupy.float64), x64, w64, st, pd, dl, c,
                                           mask_ref if act else None, True, True, True)
        errs.update(bwd_data=rel_norm_error(dx, rx), bwd_filter=rel_norm_error(dw, rw), bias=rel_norm_error(db, rb))
        only_dw = K.conv2d_backward(dy, x, wt, st, pd, dl, c, None, False, True, False)[1]  # dW alone, no db
        errs["filter_alone"] = rel_norm_error(only_dw, K.conv2d_backward_filter_ref(dy.astype(cupy.float64), x64,
                                                                                    w64.shape, st, pd, dl, c))
        bad = {key: v for key, v in errs.items() if (v > 0 if key == "mask" else v > tol)}
        if bad:
            failures.append(((n, c, h, w, mult, (r, s), st, pd, dl), act, bad))
    assert not failures, f"{len(failures)} configurations failed ({dtype}): {failures[:6]}"
    assert conv_depthwise.forward_launcher.cache_info().misses > launches  # these ran on the depthwise kernels


_TILED_SHAPES = [  # (n, c, h, w, (r, s), stride, padding, dilation): MobileNet's, odd ones, several planes a block
    (4, 8, 56, 56, (3, 3), (1, 1), (1, 1), (1, 1)), (2, 5, 112, 112, (3, 3), (2, 2), (1, 1), (1, 1)),
    (27, 37, 7, 7, (3, 3), (1, 1), (1, 1), (1, 1)), (5, 19, 14, 14, (3, 3), (2, 2), (1, 1), (1, 1)),
    (2, 6, 29, 17, (5, 5), (1, 2), (2, 1), (1, 2)), (3, 5, 13, 9, (5, 5), (2, 1), (0, 3), (2, 1)),
    (1, 3, 31, 33, (3, 3), (3, 3), (2, 0), (1, 1)), (7, 11, 9, 23, (1, 5), (1, 1), (0, 2), (1, 1)),
    (2, 4, 28, 28, (5, 5), (2, 2), (2, 2), (1, 1)), (33, 3, 5, 6, (3, 3), (1, 1), (1, 1), (1, 1)),
]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", sorted(_TOL))
@pytest.mark.parametrize("stage,plane16", [(True, False), (False, False), (True, True), (False, True)],
                         ids=["staged", "direct", "staged-16bit-planes", "direct-16bit-planes"])
def test_gpu_tiled_depthwise(dtype, stage, plane16, poisoned_pool, monkeypatch):
    """The tiled kernels (one filter a channel, no mask) on their own shapes: MobileNet's stride-1 and stride-2
    3x3, 5x5 and 1x5 filters, strides up to 3, dilations, uneven padding, rows that no strip width divides, small
    planes several a block (with a last block short of planes and blocks whose output span is not 16-byte
    aligned), and an input not 16-byte aligned; every direction against float64, on poisoned memory, with bias
    and ReLU; the outputs staged in shared memory and stored straight from registers; and the source planes kept
    as floats and (16-bit dtypes) as 16-bit values in shared memory."""
    if plane16 and dtype == "float32":
        pytest.skip("float32 planes are always floats")
    monkeypatch.setattr(conv_depthwise, "TILED_STAGE", stage)
    monkeypatch.setattr(conv_depthwise, "TILED_PLANE16_OVER", 0 if plane16 else 1 << 30)
    _fresh_launchers()
    try:
        _tiled_depthwise(dtype)
    finally:
        _fresh_launchers()


def _tiled_depthwise(dtype):
    import cupy

    from conftest import rel_norm_error

    dt, tol = backend.as_dtype(dtype), _TOL[dtype]
    rng = np.random.default_rng(11)
    failures = []
    for i, (n, c, h, w, (r, s), st, pd, dl) in enumerate(_TILED_SHAPES):
        xbig = cupy.asarray(rng.standard_normal(n * c * h * w + 1)).astype(dt)
        x = (xbig[1:] if i % 3 == 2 else xbig[:-1]).reshape(n, c, h, w)  # (every third one misaligned)
        wt = cupy.asarray(rng.standard_normal((c, 1, r, s))).astype(dt)
        b = cupy.asarray(rng.standard_normal(c)).astype(dt)
        act = "relu" if i % 2 else None
        x64, w64, b64 = x.astype(cupy.float64), wt.astype(cupy.float64), b.astype(cupy.float64)
        y, mask = K.conv2d_forward(x, wt, b, st, pd, dl, c, act)
        y_ref, _ = K.conv2d_forward_ref(x64, w64, b64, st, pd, dl, c, act)
        dy = cupy.asarray(rng.standard_normal(y.shape)).astype(dt)
        dx, dw, db = K.conv2d_backward(dy, x, wt, st, pd, dl, c, None, True, True, True)
        rx, rw, rb = K.conv2d_backward_ref(dy.astype(cupy.float64), x64, w64, st, pd, dl, c, None, True, True, True)
        errs = {"fwd": rel_norm_error(y, y_ref), "bwd_data": rel_norm_error(dx, rx),
                "bwd_filter": rel_norm_error(dw, rw), "bias": rel_norm_error(db, rb)}
        bad = {key: v for key, v in errs.items() if not v <= tol}
        if bad or mask is not None:
            failures.append(((n, c, h, w, (r, s), st, pd, dl), bad))
        for direction in (0, 1, 2):  # each direction ran on the tiled kernels
            assert conv_depthwise._tiled_plan(dt, x.shape, wt.shape, st, pd, dl, direction,
                                              cupy.cuda.runtime.getDevice()) is not None
    assert not failures, f"{len(failures)} configurations failed ({dtype}): {failures[:6]}"


@pytest.mark.gpu
def test_gpu_mobilenet_block_matches_pytorch(torch):
    """A MobileNetV2 inverted residual (1x1 expand, 3x3 depthwise stride 2, ReLU6, 1x1 project, BatchNorm) in
    training: outputs and every gradient as PyTorch's on the GPU, and a channels-last input too."""
    def block(m):
        return m.Sequential(m.Conv2d(16, 96, 1, bias=False), m.BatchNorm2d(96), m.ReLU6(),
                            m.Conv2d(96, 96, 3, 2, 1, groups=96, bias=False), m.BatchNorm2d(96), m.ReLU6(),
                            m.Conv2d(96, 24, 1, bias=False), m.BatchNorm2d(24))

    ours, theirs = block(nn).to("cuda"), block(torch.nn).cuda()
    with torch.no_grad():
        for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
            q.copy_(torch.from_numpy(p.detach().cpu().numpy()))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 16, 28, 28)).astype(np.float32)
    for fmt, tfmt in ((mf.contiguous_format, torch.contiguous_format), (mf.channels_last, torch.channels_last)):
        a = mf.tensor(x, device="cuda").to(memory_format=fmt).requires_grad_()
        t = torch.tensor(x, device="cuda").to(memory_format=tfmt).requires_grad_()
        ya, yt = ours(a), theirs(t)
        np.testing.assert_allclose(ya.detach().cpu().numpy(), yt.detach().cpu().numpy(), rtol=1e-4, atol=1e-4)
        g = rng.standard_normal(ya.shape).astype(np.float32)
        ya.backward(mf.tensor(g, device="cuda"))
        yt.backward(torch.tensor(g, device="cuda"))
        np.testing.assert_allclose(a.grad.cpu().numpy(), t.grad.cpu().numpy(), rtol=1e-4, atol=1e-4)
        for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
            np.testing.assert_allclose(p.grad.cpu().numpy(), q.grad.cpu().numpy(), rtol=1e-3, atol=1e-3,
                                       err_msg=name)
            p.grad, q.grad = None, None
