"""Mixed precision: GradScaler (skip on inf/NaN, back off, grow), fp32 master weights, and (GPU)
bf16 / fp16 training, also inside a captured step."""
import numpy as np
import pytest

import minifused as mf
import minifused.functional as F
from minifused import amp, backend, nn, optim
from minifused.kernels import optim as K


def _param(values, dtype=mf.float32, device="cpu"):
    return nn.Parameter(mf.tensor(np.asarray(values, np.float32), dtype=dtype, device=device))


def _state(opt, p):
    return {k: (v.cpu().numpy() if hasattr(v, "cpu") else v) for k, v in opt.state[p].items()}


# ---------------------------------------------------------------- GradScaler logic (CPU)
@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_scaler_skips_step_on_nonfinite_grad_and_backs_off(bad):
    p = _param([1.0, -2.0, 0.5])
    opt = optim.Adam([p], lr=0.1)
    scaler = amp.GradScaler(init_scale=1024.0, growth_interval=3)
    scaler.scale((p * 1.0).sum()).backward()  # creates the scaler state on p's device
    scaler.step(opt)
    scaler.update()
    before, state = p.numpy().copy(), _state(opt, p)
    assert state["step"] == 1 and scaler.get_scale() == 1024.0

    p.grad = mf.tensor(np.array([1.0, bad, 2.0], np.float32))
    scaler.step(opt)
    scaler.update()
    np.testing.assert_array_equal(p.numpy(), before)  # nothing moved, nothing NaN
    after = _state(opt, p)
    assert after["step"] == 1
    for k in ("exp_avg", "exp_avg_sq"):
        np.testing.assert_array_equal(after[k], state[k])
    assert scaler.get_scale() == 512.0

    for i in range(3):  # growth_interval clean steps double the scale, once
        p.grad = mf.tensor(np.array([0.1, 0.2, 0.3], np.float32))
        scaler.step(opt)
        scaler.update()
        assert scaler.get_scale() == (1024.0 if i == 2 else 512.0)
    assert np.isfinite(p.numpy()).all() and _state(opt, p)["step"] == 4


def test_scaled_training_equals_unscaled_when_nothing_overflows():
    """A power-of-two scale multiplies and divides exactly: the weights come out bitwise equal."""
    rng = np.random.default_rng(0)
    x = mf.tensor(rng.standard_normal((16, 5)), dtype=mf.float32)
    y = mf.tensor(rng.integers(0, 3, 16))
    w0 = rng.standard_normal((3, 5)).astype(np.float32)
    runs = []
    for scaler in (amp.GradScaler(enabled=False), amp.GradScaler(init_scale=2.0 ** 12)):
        w = _param(w0)
        opt = optim.AdamW([w], lr=0.05)
        for _ in range(4):
            opt.zero_grad()
            scaler.scale(F.cross_entropy(F.linear(x, w), y)).backward()
            scaler.step(opt)
            scaler.update()
        runs.append(w.numpy())
    np.testing.assert_array_equal(runs[1], runs[0])


def test_scaler_update_reference_never_grows_to_inf():
    s = np.array([np.finfo(np.float32).max / 1.5, 0, 0, 0], np.float32)
    K.scaler_update_ref(s, 2.0, 0.5, 1)
    assert np.isfinite(s[0]) and s[0] == np.float32(np.finfo(np.float32).max / 1.5) and s[3] == 0
    assert s[1] == np.float32(1) / s[0]


def test_scaler_state_dict_round_trip_and_disabled_passthrough():
    p = _param([1.0])
    opt = optim.SGD([p], lr=0.1)
    scaler = amp.GradScaler(init_scale=256.0, growth_interval=5)
    scaler.scale(p.sum()).backward()
    p.grad = mf.tensor(np.array([np.inf], np.float32))
    scaler.step(opt)
    scaler.update()
    sd = scaler.state_dict()
    assert sd["scale"] == 128.0 and sd["_growth_tracker"] == 0 and sd["growth_interval"] == 5
    other = amp.GradScaler()
    other.load_state_dict(sd)
    assert other.get_scale() == 128.0 and other.growth_interval == 5
    off = amp.GradScaler(enabled=False)
    loss = p.sum()
    assert off.scale(loss) is loss and off.get_scale() == 1.0 and off.state_dict() == {}


def test_scaler_bad_input():
    with pytest.raises(ValueError, match="GradScaler: init_scale"):
        amp.GradScaler(init_scale=0)
    with pytest.raises(ValueError, match="GradScaler: growth_factor"):
        amp.GradScaler(growth_factor=1.0)
    with pytest.raises(ValueError, match="GradScaler: backoff_factor"):
        amp.GradScaler(backoff_factor=1.5)
    with pytest.raises(ValueError, match="GradScaler: growth_interval"):
        amp.GradScaler(growth_interval=0)
    scaler = amp.GradScaler()
    with pytest.raises(TypeError, match="GradScaler.scale: expected the loss tensor, got float"):
        scaler.scale(1.0)
    p = _param([1.0])
    with pytest.raises(RuntimeError, match="GradScaler.step: call scale"):
        scaler.step(optim.SGD([p], lr=0.1))

    with pytest.raises(TypeError, match="amp.cast_model: expected a floating dtype"):
        amp.cast_model(nn.Linear(2, 2), "int32")


def test_scaler_steps_an_optimizer_of_its_own_as_pytorch():
    """An optimizer without the fused unscale-and-skip update (a user's subclass): step() unscales its
    gradients (unless unscale_ did), runs its update when they are finite and skips it otherwise, as
    PyTorch's GradScaler; update() then backs the scale off."""
    class Plain(optim.Optimizer):
        def __init__(self, params):
            super().__init__(params, {"lr": 0.5})

        def step(self, closure=None):
            for g in self.param_groups:
                for q in g["params"]:
                    q._data -= g["lr"] * q.grad._data
            return "stepped"

    p = _param([1.0, 2.0])
    scaler = amp.GradScaler(init_scale=8.0)
    opt = Plain([p])
    scaler.scale((p * mf.tensor([3.0, -1.0])).sum()).backward()
    assert scaler.step(opt) == "stepped"
    np.testing.assert_allclose(p.grad.numpy(), [3.0, -1.0])  # unscaled
    np.testing.assert_allclose(p.detach().numpy(), [1.0 - 1.5, 2.0 + 0.5])
    scaler.update()
    opt.zero_grad()
    scaler.scale((p * mf.tensor([np.inf, 1.0])).sum()).backward()
    scaler.unscale_(opt)
    assert scaler.step(opt) is None  # skipped
    np.testing.assert_allclose(p.detach().numpy(), [-0.5, 2.5])
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 4.0


# ---------------------------------------------------------------- master weights (CPU)
@pytest.mark.parametrize("dtype", [mf.bfloat16, mf.float16])
@pytest.mark.parametrize("make", [lambda ps, mw: optim.AdamW(ps, lr=1e-2, master_weights=mw),
                                  lambda ps, mw: optim.SGD(ps, lr=0.1, momentum=0.9, master_weights=mw)])
def test_master_weights_follow_fp32_math(dtype, make):
    """The fp32 masters of a low-precision parameter move exactly as an fp32 parameter would under
    the same (low-precision) gradients; the parameter holds the rounded master; state is fp32."""
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal(50).astype(np.float32)
    low = nn.Parameter(mf.tensor(w0, dtype=dtype))
    ref = _param(low.numpy().astype(np.float32))  # the master starts from the rounded weights
    o_low, o_ref = make([low], True), make([ref], False)
    for _ in range(5):
        g = rng.standard_normal(50).astype(np.float32) * 1e-2
        low.grad = mf.tensor(g, dtype=dtype)
        ref.grad = mf.tensor(low.grad.numpy().astype(np.float32))  # the same (rounded) gradient
        o_low.step()
        o_ref.step()
    master = o_low.state[low]["master"]
    assert master.dtype == mf.float32 and low.dtype == dtype
    np.testing.assert_array_equal(master.numpy(), ref.numpy())
    np.testing.assert_array_equal(low.numpy(), ref.numpy().astype(dtype))
    # the updates (~1e-3 per step) are below a bf16 ulp of w: without masters most would be lost
    assert all(v.dtype == mf.float32 for k, v in o_low.state[low].items() if k not in ("step",))


def test_master_weights_state_dict_round_trip_keeps_fp32_state(tmp_path):
    p = nn.Parameter(mf.tensor(np.linspace(-1, 1, 7), dtype=mf.bfloat16))
    opt = optim.Adam([p], lr=1e-2, master_weights=True)
    p.grad = mf.ones(7, dtype=mf.bfloat16)
    opt.step()
    mf.save(opt.state_dict(), tmp_path / "o.ckpt")
    q = nn.Parameter(p.detach().clone())
    opt2 = optim.Adam([q], lr=1e-2, master_weights=True)
    opt2.load_state_dict(mf.load(tmp_path / "o.ckpt"))
    assert opt2.state[q]["master"].dtype == mf.float32 and opt2.state[q]["exp_avg"].dtype == mf.float32
    for o, t in ((opt, p), (opt2, q)):
        t.grad = mf.ones(7, dtype=mf.bfloat16)
        o.step()
    np.testing.assert_array_equal(q.numpy().astype(np.float32), p.numpy().astype(np.float32))
    assert opt2.state_dict()["state"][0]["step"] == 2


def test_fp32_params_with_master_weights_need_no_master():
    p = _param([1.0, 2.0])
    opt = optim.Adam([p], master_weights=True)
    p.grad = mf.ones(2)
    opt.step()
    assert "master" not in opt.state[p]


# ---------------------------------------------------------------- GPU
def _mlp_problem(dtype, n=512, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((4, 32)) * 2
    labels = rng.integers(0, 4, n)
    x = centers[labels] + rng.standard_normal((n, 32))
    mf.manual_seed(seed)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).to("cuda", dtype)
    return model, mf.tensor(x, dtype=dtype, device="cuda"), mf.tensor(labels, device="cuda")


def _train(dtype, steps=60, graphed=False, scaler=None):
    model, x, y = _mlp_problem(dtype)
    opt = optim.AdamW(model.parameters(), lr=1e-2, master_weights=dtype != mf.float32)
    scaler = scaler or amp.GradScaler(enabled=dtype == mf.float16)

    def step(xb, yb):
        opt.zero_grad()
        loss = F.cross_entropy(model(xb).float(), yb)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss.detach()

    if graphed:
        step = mf.capture_step(step)
    losses = [float(step(x[i % 4 * 128:(i % 4 + 1) * 128], y[i % 4 * 128:(i % 4 + 1) * 128]).item())
              for i in range(steps)]
    with mf.no_grad():
        acc = float((model(x).argmax(1) == y).float().mean().item())
    return losses, acc, model, opt, scaler


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [mf.bfloat16, mf.float16])
@pytest.mark.parametrize("graphed", [False, True])
def test_low_precision_mlp_trains_like_fp32(dtype, graphed):
    losses32, acc32, *_ = _train(mf.float32)
    losses, acc, model, opt, _ = _train(dtype, graphed=graphed)
    print(f"{dtype} graphed={graphed}: loss {losses[0]:.3f} -> {losses[-1]:.4f} (fp32 {losses32[-1]:.4f}), "
          f"acc {acc:.3f} (fp32 {acc32:.3f})")
    assert losses[-1] < 0.3 * losses[0] and acc > 0.95 and acc > acc32 - 0.02
    assert all(p.dtype == dtype for p in model.parameters())
    assert all(opt.state[p]["master"].dtype == mf.float32 for p in model.parameters())
    steps = opt.state_dict()["state"][0]["step"]  # fp16: the scaler may skip an early overflowing step
    assert steps == 60 if dtype == mf.bfloat16 else steps >= 50


@pytest.mark.gpu
@pytest.mark.parametrize("graphed", [False, True])
def test_fp16_overflow_skips_step_and_lowers_scale_on_gpu(graphed):
    """A scale so large that fp16 gradients overflow: every step is skipped and the scale halves
    until the gradients fit, then training proceeds; the weights never see a NaN."""
    scaler = amp.GradScaler(init_scale=2.0 ** 40, growth_interval=1000)
    losses, acc, model, opt, scaler = _train(mf.float16, steps=60, graphed=graphed, scaler=scaler)
    scale = scaler.get_scale()
    print(f"graphed={graphed}: scale {scale}, losses {losses[0]:.3f} -> {losses[-1]:.4f}, acc {acc:.3f}")
    assert scale < 2.0 ** 40 and scale >= 1.0
    assert all(np.isfinite(p.cpu().numpy().astype(np.float32)).all() for p in model.parameters())
    steps = opt.state_dict()["state"][0]["step"]
    assert 0 < steps < 60  # some steps were skipped, the rest counted
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.gpu
def test_nonfinite_and_scaler_update_kernels_match_reference():
    import cupy

    for dtype in (np.float32, np.float16, backend.bfloat16):
        grads = [np.ones(n, np.float32).astype(dtype) for n in (1, 3000, 7)] * 7  # 21: two launches
        for poison in (None, (20, 3), (1, 2999)):
            gs = [g.copy() for g in grads]
            if poison:
                gs[poison[0]][poison[1]] = np.float32(np.inf)
            s = np.array([8.0, 0.125, 0.0, 3.0], np.float32)
            sd = cupy.asarray(s)
            K.nonfinite_ref(gs, s)
            K.nonfinite([cupy.asarray(g) for g in gs], sd)
            np.testing.assert_array_equal(cupy.asnumpy(sd), s)
            for _ in range(3):
                K.scaler_update_ref(s, 2.0, 0.5, 4)
                K.scaler_update(sd, 2.0, 0.5, 4)
                np.testing.assert_array_equal(cupy.asnumpy(sd), s, err_msg=f"{dtype} {poison}")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_unscale_then_clip_then_step_is_pytorchs_recipe(device):
    """scale / backward / unscale_ / clip_grad_norm_ / step / update: after unscale_ the gradients are the
    unscaled ones (a power-of-two scale: exactly), clipping sees those, and step does not unscale again, so
    the run equals the same clipped steps without scaling; an inf found by unscale_ skips the step."""
    rng = np.random.default_rng(3)
    x = mf.tensor(rng.standard_normal((8, 5)), dtype=mf.float32, device=device)
    y = mf.tensor(rng.integers(0, 3, 8), device=device)
    w0 = rng.standard_normal((3, 5)).astype(np.float32)
    runs = []
    for scaler in (amp.GradScaler(device, enabled=False), amp.GradScaler(device, init_scale=2.0 ** 10)):
        w = _param(w0, device=device)
        opt = optim.SGD([w], lr=0.1, momentum=0.9)
        for _ in range(3):
            opt.zero_grad()
            scaler.scale(F.cross_entropy(x @ w.t(), y)).backward()
            scaler.unscale_(opt)
            grads = w.grad.cpu().numpy().copy()
            nn.utils.clip_grad_norm_([w], 0.05)
            scaler.step(opt)
            scaler.update()
        runs.append((w.cpu().numpy(), grads))
    np.testing.assert_array_equal(runs[1][0], runs[0][0])
    np.testing.assert_array_equal(runs[1][1], runs[0][1])  # unscale_ left the true gradients
    # an inf found by unscale_ skips the step and backs the scale off
    before = w.cpu().numpy().copy()
    opt.zero_grad()
    scaler.scale((w * w).sum() * np.float32(np.inf)).backward()
    scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    np.testing.assert_array_equal(w.cpu().numpy(), before)
    assert scaler.get_scale() == 2.0 ** 9


def test_scaler_stages_new_scale_and_accessors():
    """PyTorch's order rules (unscale_ once, before step; step once per update) raise without changing the
    gradients; update(new_scale) sets the scale; the get_/set_ accessors check their values."""
    p = _param([1.0, -2.0])
    opt = optim.SGD([p], lr=0.1)
    scaler = amp.GradScaler("cpu", init_scale=8.0)
    scaler.scale((p * p).sum()).backward()
    scaler.unscale_(opt)
    g = p.grad.numpy().copy()
    np.testing.assert_array_equal(g, [2.0, -4.0])
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
        scaler.unscale_(opt)
    np.testing.assert_array_equal(p.grad.numpy(), g)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        scaler.unscale_(opt)
    scaler.update(new_scale=32.0)
    assert scaler.get_scale() == 32.0
    scaler.update(mf.tensor(np.array([4.0], np.float32)))
    assert scaler.get_scale() == 4.0
    with pytest.raises(ValueError, match="new_scale must be a finite number > 0"):
        scaler.update(new_scale=0.0)
    with pytest.raises(ValueError, match="one-element float32 tensor"):
        scaler.update(mf.tensor(np.array([4.0, 2.0], np.float32)))
    scaler.set_growth_factor(3.0)
    scaler.set_backoff_factor(0.25)
    scaler.set_growth_interval(7)
    assert (scaler.get_growth_factor(), scaler.get_backoff_factor(), scaler.get_growth_interval()) == (3.0, 0.25, 7)
    assert scaler.is_enabled() and not amp.GradScaler(enabled=False).is_enabled()
    with pytest.raises(ValueError, match="growth_factor must be > 1"):
        scaler.set_growth_factor(1.0)
    with pytest.raises(ValueError, match="backoff_factor must be in"):
        scaler.set_backoff_factor(1.5)
    with pytest.raises(ValueError, match="growth_interval must be an int"):
        scaler.set_growth_interval(0)
    half = _param([1.0], dtype=mf.float16)
    hopt = optim.SGD([half], lr=0.1)
    scaler.scale((half * 1.0).sum().float()).backward()
    with pytest.raises(ValueError, match="unscale float16 gradients"):
        scaler.unscale_(hopt)
    amp.GradScaler(enabled=False).unscale_(hopt)  # disabled: nothing to do


@pytest.mark.parametrize("change,words", [
    ({"scale": float("nan")}, "scale must be a finite number > 0, got nan"),
    ({"scale": -1.0}, "scale must be a finite number > 0"),
    ({"growth_factor": 0.5}, "growth_factor must be > 1"),
    ({"backoff_factor": 2.0}, r"backoff_factor must be in \(0, 1\)"),
    ({"growth_interval": 2.5}, "growth_interval must be an int >= 1"),
    ({"_growth_tracker": 2000}, r"_growth_tracker must be an int in \[0, growth_interval\), got 2000"),
    ({"scale": None}, "scale must be a finite number")])
def test_scaler_load_state_dict_checks_everything_before_applying(change, words):
    scaler = amp.GradScaler(init_scale=64.0, growth_factor=3.0, backoff_factor=0.25, growth_interval=5)
    before = scaler.state_dict()
    bad = {**amp.GradScaler(init_scale=8.0).state_dict(), **change}
    with pytest.raises(ValueError, match=f"GradScaler.load_state_dict: {words}"):
        scaler.load_state_dict(bad)
    assert scaler.state_dict() == before and scaler.get_scale() == 64.0


def test_scaler_load_state_dict_needs_its_keys():
    scaler = amp.GradScaler()
    with pytest.raises(ValueError, match=r"keys \['backoff_factor', 'growth_factor', 'growth_interval', 'scale'\]"):
        scaler.load_state_dict({"scale": 2.0})
    with pytest.raises(ValueError, match="got list"):
        scaler.load_state_dict([1.0])


# ---------------------------------------------------------------- autocast
def _small_cnn(device="cpu"):
    mf.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.ConvTranspose2d(8, 4, 2, 2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 5)).to(device)


def _grads(model):
    return [p.grad.numpy().astype(np.float64) for p in model.parameters()]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_autocast_lower_precision_ops_and_float32_gradients(dtype):
    """Inside autocast('cpu', dtype): convolutions, linear and the matrix products compute in dtype; the float32
    parameters get float32 gradients close to the float32 model's (dtype's rounding); the loss is float32."""
    low = getattr(mf, dtype)
    mf.manual_seed(1)
    x, y = mf.randn(4, 3, 6, 6), mf.tensor([0, 1, 4, 2])
    ref_model, model = _small_cnn(), _small_cnn()
    scale = 1024.0  # float16's gradients want the loss scaled (GradScaler's job), or the small ones flush
    (F.cross_entropy(ref_model(x), y) * scale).backward()
    with mf.autocast("cpu", dtype=low):
        out = model(x)
        loss = F.cross_entropy(out, y)
        a, b = mf.randn(3, 4), mf.randn(4, 2)
        products = [mf.matmul(a, b), mf.mm(a, b), mf.bmm(a[None], b[None]), mf.addmm(mf.zeros(2), a, b), a @ b]
    assert out.dtype == low and loss.dtype == mf.float32 and all(p.dtype == low for p in products)
    (loss * scale).backward()
    # bfloat16's rounding of the upstream gradient is amplified where BatchNorm's backward cancels it (an
    # average pool spreads one value over a map); the conv bias before BatchNorm has a zero gradient, hence the
    # floor at a hundredth of the largest gradient
    tol = 1e-1 if dtype == "bfloat16" else 5e-3
    wants = _grads(ref_model)
    floor = 1e-2 * max(np.abs(w).max() for w in wants)
    for got, want in zip(_grads(model), wants):
        assert np.abs(got - want).max() <= tol * max(np.abs(want).max(), floor)
    np.testing.assert_allclose(products[0].float().numpy(), (a @ b).numpy(), rtol=tol, atol=tol)
    assert all(p.grad.dtype == mf.float32 for p in model.parameters())


def test_autocast_float32_ops_nesting_and_devices():
    """The losses run in float32 on low-precision inputs; softmax, layer and group norm keep bfloat16 on the cpu
    (PyTorch's cpu list has them not; cuda's has); a region nests and enabled=False turns it off inside; the
    state comes back after an exception;
    a 'cuda' region leaves cpu tensors alone; as a decorator; binary_cross_entropy runs in float32 (refused in a
    'cuda' region, test_gpu_autocast_refuses_binary_cross_entropy)."""
    h = mf.randn(4, 6).bfloat16()
    with mf.autocast("cpu"):
        assert mf.is_autocast_enabled("cpu") and mf.get_autocast_dtype("cpu") == mf.bfloat16
        for out in (F.mse_loss(h, h * 0.5), F.l1_loss(h, h), F.binary_cross_entropy_with_logits(h, h.sigmoid()),
                    F.cross_entropy(h, mf.tensor([0, 1, 2, 3]))):
            assert out.dtype == mf.float32
        for out in (F.softmax(h, 1), F.log_softmax(h, 1), F.layer_norm(h, (6,)), F.group_norm(h, 2)):
            assert out.dtype == mf.bfloat16
        assert F.softmax(h, 1, dtype=mf.bfloat16).dtype == mf.bfloat16
        p, t = h.float().sigmoid(), mf.rand(4, 6)  # refused on cuda only, as PyTorch's; float32 here
        assert F.binary_cross_entropy(p.bfloat16(), t).dtype == mf.float32
        with mf.autocast("cpu", enabled=False):
            assert not mf.is_autocast_enabled("cpu") and F.linear(mf.randn(2, 6), mf.randn(3, 6)).dtype == mf.float32
        assert F.linear(mf.randn(2, 6), mf.randn(3, 6)).dtype == mf.bfloat16
    assert not mf.is_autocast_enabled("cpu")
    with pytest.raises(KeyError):
        with mf.autocast("cpu"):
            raise KeyError("x")
    assert not mf.is_autocast_enabled("cpu")
    with mf.autocast("cuda", dtype=mf.bfloat16):
        assert F.linear(mf.randn(2, 6), mf.randn(3, 6)).dtype == mf.float32  # cpu tensors: untouched
        assert mf.is_autocast_enabled("cuda") and not mf.is_autocast_enabled("cpu")

    @mf.autocast("cpu", dtype=mf.float16)
    def product(a, b):
        return a @ b

    assert product(mf.randn(2, 2), mf.randn(2, 2)).dtype == mf.float16 and not mf.is_autocast_enabled("cpu")
    assert mf.cuda.amp.autocast().dtype == mf.float16 and amp.autocast("cuda", mf.bfloat16).dtype == mf.bfloat16
    for args, exc, words in [(("tpu",), ValueError, "device_type must be 'cuda' or 'cpu'"),
                             (("cpu", None, "yes"), TypeError, "enabled must be a bool")]:
        with pytest.raises(exc, match=words):
            mf.autocast(*args)
    with pytest.warns(UserWarning, match="Disabling autocast"):  # another cpu dtype: the region is off
        with mf.autocast("cpu", mf.float32):
            assert not mf.is_autocast_enabled("cpu")


@pytest.mark.gpu
def test_gpu_autocast_training_steps_track_float32():
    """A small CNN trained a few SGD steps under autocast('cuda', bfloat16) on the GPU stays within bf16's
    rounding of the same steps in float32 (weights, float32 throughout), and matches the same autocast steps
    on the cpu reference path."""
    x, y = mf.randn(8, 3, 8, 8), mf.tensor([0, 1, 4, 2, 3, 0, 1, 2])

    def train(device, autocast):
        model = _small_cnn(device)
        opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        xd, yd = x.to(device), y.to(device)
        for _ in range(3):
            opt.zero_grad()
            with mf.autocast(device if device == "cuda" else "cpu", dtype=mf.bfloat16, enabled=autocast):
                loss = F.cross_entropy(model(xd), yd)
            loss.backward()
            opt.step()
        return [p.detach().cpu().numpy().astype(np.float64) for p in model.parameters()]

    ref, gpu, cpu = train("cuda", False), train("cuda", True), train("cpu", True)
    for g, r, c in zip(gpu, ref, cpu):
        scale = np.abs(r).max() + 1e-3
        assert np.abs(g - r).max() <= 3e-2 * scale and np.abs(g - c).max() <= 3e-2 * scale


@pytest.mark.gpu
def test_gpu_autocast_refuses_binary_cross_entropy():
    with mf.autocast("cuda"):
        with pytest.raises(RuntimeError, match="binary_cross_entropy is unsafe to autocast"):
            F.binary_cross_entropy(mf.rand(4, 6, device="cuda"), mf.rand(4, 6, device="cuda"))


def _two_models(device="cpu"):
    mf.manual_seed(0)
    a, b = nn.Linear(2, 1).to(device), nn.Linear(2, 1).to(device)
    return a, b, optim.SGD(a.parameters(), lr=0.1), optim.SGD(b.parameters(), lr=0.1)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_scaler_skips_only_the_optimizer_whose_gradients_overflowed(device):
    """Two optimizers, an inf in A's gradients: A's step is skipped, B's runs, and update() backs off (PyTorch
    keeps one found-inf flag per optimizer)."""
    a, b, oa, ob = _two_models(device)
    wa, wb = a.weight.detach().cpu().numpy().copy(), b.weight.detach().cpu().numpy().copy()
    scaler = amp.GradScaler(device, init_scale=8.0)
    x = mf.ones(1, 2, device=device)
    scaler.scale(a(x).sum() * float("inf")).backward()
    scaler.scale(b(x).sum()).backward()
    scaler.step(oa)
    scaler.step(ob)
    scaler.update()
    np.testing.assert_array_equal(a.weight.detach().cpu().numpy(), wa)
    np.testing.assert_allclose(b.weight.detach().cpu().numpy(), wb - 0.1 * np.ones((1, 2)), rtol=1e-6)
    assert scaler.get_scale() == 4.0


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("make", [lambda ps: optim.Adam(ps, lr=0.01), lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
                                  lambda ps: optim.Adagrad(ps, lr=0.1)], ids=["adam", "sgd", "adagrad"])
def test_scaler_step_leaves_gradients_unscaled(device, make):
    """After scaler.step (no unscale_ first) the .grad are the true gradients, as PyTorch's, and the update is
    the unscaled one."""
    mf.manual_seed(1)
    ref, m = nn.Linear(3, 2).to(device), nn.Linear(3, 2).to(device)
    m.load_state_dict(ref.state_dict())
    x = mf.randn(4, 3, device=device)
    o_ref, o = make(ref.parameters()), make(m.parameters())
    ref(x).square().sum().backward()
    o_ref.step()
    scaler = amp.GradScaler(device, init_scale=1024.0)
    scaler.scale(m(x).square().sum()).backward()
    scaler.step(o)
    scaler.update()
    for p, q in zip(m.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.grad.cpu().numpy(), q.grad.cpu().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(p.detach().cpu().numpy(), q.detach().cpu().numpy(), rtol=1e-5, atol=1e-6)


def test_scaler_scales_lists_of_losses():
    scaler = amp.GradScaler("cpu", init_scale=2.0)
    out = scaler.scale([mf.tensor([1.0]), (mf.tensor([3.0]),)])
    assert isinstance(out, list) and isinstance(out[1], tuple)
    np.testing.assert_array_equal(out[0].numpy(), [2.0])
    np.testing.assert_array_equal(out[1][0].numpy(), [6.0])


# ---------------------------------------------------------------- the cast kernel (GPU)
_FLOATS = ["float32", "float16", "bfloat16"]


@pytest.mark.gpu
@pytest.mark.parametrize("src", _FLOATS)
@pytest.mark.parametrize("dst", _FLOATS)
def test_cast_kernel_rounds_as_numpy_in_every_layout(src, dst):
    """kernels.elementwise.cast against NumPy's astype of the same values (round to nearest even; NaN, ±inf,
    subnormals, overflow to inf in float16, ties), bit for bit: a C-contiguous odd size, a view that starts
    mid-vector, a channels-last array (kept so), a 0-d one, an empty one; and the recorded cast's gradient."""
    import cupy

    from minifused.kernels.elementwise import cast

    s, d = backend.as_dtype(src), backend.as_dtype(dst)
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(4103) * np.exp(rng.uniform(-20, 12, 4103))).astype(np.float32)
    a[:10] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, 70000.0, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-11, 65520.0]
    host = a.astype(s)

    def check(got, want):
        got, want = cupy.asnumpy(got).astype(np.float64), want.astype(np.float64)
        assert np.array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(got[~np.isnan(got)], want[~np.isnan(want)])

    x = cupy.asarray(host)
    y = cast(x, d)
    assert y.dtype == d and y.shape == x.shape
    check(y, host.astype(d))
    check(cast(x[3:], d), host[3:].astype(d))  # (an address 3 elements past an aligned one)
    x4 = cupy.asarray(host[:2 * 3 * 8 * 5].reshape(2, 3, 8, 5)).transpose(0, 2, 3, 1).copy().transpose(0, 3, 1, 2)
    y4 = cast(x4, d)
    assert y4.strides == tuple(st // s.itemsize * d.itemsize for st in x4.strides)  # channels-last kept
    check(y4, cupy.asnumpy(x4).astype(d))
    check(cast(x[5], d), host[5:6].astype(d).reshape(()))
    assert cast(x[:0], d).shape == (0,)
    t = mf.tensor(host.astype(np.float32), device="cuda").to(s).requires_grad_()
    u = t.to(d)
    u.backward(mf.tensor(np.ones(a.size, np.float32), device="cuda").to(d))
    assert t.grad.dtype == s and np.array_equal(t.grad.float().cpu().numpy(), np.ones(a.size, np.float32))
