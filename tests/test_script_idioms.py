"""PyTorch calls that training scripts make around the model: attention backend selection (nn.attention.sdpa_kernel,
backends.cuda.sdp_kernel and the enable_*_sdp switches), random.fork_rng, vmap, the cuBLAS reduction and fp32_precision
flags, torch.cpu and its deprecated amp spellings, and serialization's safe-globals bookkeeping."""
import warnings

import numpy as np
import pytest

import minifused as mf
from minifused import backend
from minifused.nn.attention import SDPBackend, sdpa_kernel

from tolerances import cpu


def _sdpa_ref(q, k, v):
    q, k, v = (np.asarray(t.numpy(), np.float64) for t in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    w = np.exp(s - s.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ v


def _qkv(rng, q_shape=(2, 3, 4, 8), kv_shape=(2, 3, 5, 8)):
    return (cpu(rng.standard_normal(q_shape).astype(np.float32)),
            cpu(rng.standard_normal(kv_shape).astype(np.float32)),
            cpu(rng.standard_normal(kv_shape).astype(np.float32)))


ALL_ON = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def _switches():
    c = mf.backends.cuda
    return {"flash": c.flash_sdp_enabled(), "mem_efficient": c.mem_efficient_sdp_enabled(),
            "math": c.math_sdp_enabled(), "cudnn": c.cudnn_sdp_enabled()}


def test_sdpa_kernel_sets_the_switches_and_restores_them():
    assert _switches() == ALL_ON
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION) as ctx:
        assert ctx == {}
        assert _switches() == {"flash": True, "mem_efficient": False, "math": False, "cudnn": False}
        with sdpa_kernel([SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
            assert _switches() == {"flash": False, "mem_efficient": True, "math": True, "cudnn": False}
        assert _switches() == {"flash": True, "mem_efficient": False, "math": False, "cudnn": False}
    assert _switches() == ALL_ON
    priority = list(mf.backends._sdp_priority)
    assert priority == [1, 2, 0, 3, 4]  # PyTorch's default order
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH], set_priority=True):
        assert mf.backends._sdp_priority == [3, 0, 1, 2, 4]
    assert mf.backends._sdp_priority == priority and _switches() == ALL_ON
    with pytest.raises(AssertionError, match="Backend must be an instance of SDPBackend or a list"):
        with sdpa_kernel((SDPBackend.MATH,)):
            pass
    assert int(SDPBackend.FLASH_ATTENTION) == 1 and SDPBackend(0) is SDPBackend.MATH and SDPBackend.MATH != 0
    assert str(SDPBackend.MATH) == "SDPBackend.MATH" and SDPBackend.ERROR.value == -1


def test_sdp_switches_round_trip_and_refuse_non_bools():
    c = mf.backends.cuda
    try:
        for name in ALL_ON:
            getattr(c, f"enable_{name}_sdp")(False)
            assert getattr(c, f"{name}_sdp_enabled")() is False
        assert _switches() == dict.fromkeys(ALL_ON, False)
        c.allow_fp16_bf16_reduction_math_sdp(True)
        assert c.fp16_bf16_reduction_math_sdp_allowed() is True
        with pytest.raises(TypeError, match="enable_flash_sdp expects a bool, but got int"):
            c.enable_flash_sdp(1)
        with pytest.raises(RuntimeError, match="expects a bool"):  # (PyTorch raises RuntimeError)
            c.enable_math_sdp(None)
    finally:
        for name in ALL_ON:
            getattr(c, f"enable_{name}_sdp")(True)
        c.allow_fp16_bf16_reduction_math_sdp(False)
    assert _switches() == ALL_ON and c.fp16_bf16_reduction_math_sdp_allowed() is False


@pytest.mark.parametrize("selection", [SDPBackend.MATH, SDPBackend.FLASH_ATTENTION,
                                       [SDPBackend.FLASH_ATTENTION, SDPBackend.MATH],
                                       [SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]])
def test_sdpa_under_a_runnable_selection_matches_the_float64_reference(selection):
    """On the cpu, PyTorch runs 'math' on any input and its cpu flash kernel on 4-D inputs without dropout;
    minifused's one implementation runs under either and gives the same values."""
    q, k, v = _qkv(np.random.default_rng(0))
    with sdpa_kernel(selection):
        mf.backends.check_sdp_backends(q, k, v)
        out = mf.nn.functional.scaled_dot_product_attention(q, k, v)
    np.testing.assert_allclose(out.numpy(), _sdpa_ref(q, k, v), rtol=1e-5, atol=1e-6)


NO_VIABLE = "No viable backend for scaled_dot_product_attention was found"


@pytest.mark.parametrize("selection, kwargs, shapes, message", [
    (SDPBackend.EFFICIENT_ATTENTION, {}, None, NO_VIABLE),  # no cpu kernel in PyTorch
    (SDPBackend.CUDNN_ATTENTION, {}, None, NO_VIABLE),
    (SDPBackend.OVERRIDEABLE, {}, None, NO_VIABLE),
    ([], {}, None, NO_VIABLE),
    (SDPBackend.FLASH_ATTENTION, {"dropout_p": 0.5}, None, "No available kernel"),  # cpu flash: no dropout
    (SDPBackend.FLASH_ATTENTION, {}, ((3, 4, 8), (3, 5, 8)), "No available kernel"),  # cpu flash: 4-D only
    (SDPBackend.FLASH_ATTENTION, {}, ((2, 3, 4, 8), (1, 3, 5, 8)), "No available kernel"),  # broadcast batch
])
def test_a_selection_that_leaves_no_backend_raises_pytorchs_error(selection, kwargs, shapes, message):
    q, k, v = _qkv(np.random.default_rng(1), *(shapes or ()))
    with sdpa_kernel(selection):
        with pytest.raises(RuntimeError, match=message):
            mf.backends.check_sdp_backends(q, k, v, **kwargs)
    mf.backends.check_sdp_backends(q, k, v, **kwargs)  # all backends back on: math runs anything


def test_flash_on_cpu_takes_the_inputs_pytorchs_cpu_flash_takes():
    rng = np.random.default_rng(2)
    q, k, v = _qkv(rng, (2, 4, 3, 8), (2, 2, 5, 8))
    mask4, mask3 = cpu(rng.standard_normal((2, 4, 3, 5)).astype(np.float32)), cpu(np.zeros((4, 3, 5), np.float32))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        mf.backends.check_sdp_backends(q, k, v, enable_gqa=True)  # grouped-query heads
        mf.backends.check_sdp_backends(q, q, q, attn_mask=mask4)
        with pytest.raises(RuntimeError, match="No available kernel"):
            mf.backends.check_sdp_backends(q, q, q, attn_mask=mask3)  # a 3-D mask
        with pytest.raises(RuntimeError, match="No available kernel"):
            mf.backends.check_sdp_backends(q, k, v)  # 4 query heads, 2 key heads, no GQA
        with pytest.raises(RuntimeError, match="No available kernel"):
            mf.backends.check_sdp_backends(q, q, q[..., :6])  # value head size 6, query's 8


def test_deprecated_sdp_kernel_warns_and_selects():
    with pytest.warns(FutureWarning, match=r"sdp_kernel\(\)` is deprecated"):
        manager = mf.backends.cuda.sdp_kernel(enable_flash=False, enable_mem_efficient=False)
    with manager as ctx:
        assert ctx == {} and _switches() == {"flash": False, "mem_efficient": False, "math": True, "cudnn": True}
    assert _switches() == ALL_ON
    from minifused.backends.cuda import sdp_kernel

    with pytest.warns(FutureWarning), sdp_kernel(enable_math=False):
        assert _switches() == {"flash": True, "mem_efficient": True, "math": False, "cudnn": True}
    assert _switches() == ALL_ON


def test_fork_rng_restores_the_cpu_generator_and_seed():
    mf.manual_seed(1)
    first = mf.rand(4, device="cpu").numpy()
    mf.manual_seed(1)
    with mf.random.fork_rng():
        inside = mf.rand(4, device="cpu").numpy()
        mf.manual_seed(5)
        assert mf.initial_seed() == 5
        mf.randn(3, device="cpu")
    assert mf.initial_seed() == 1
    after = mf.rand(4, device="cpu").numpy()
    np.testing.assert_array_equal(inside, first)  # the same draws inside and after: nothing left a trace
    np.testing.assert_array_equal(after, first)
    mf.manual_seed(1)
    with mf.random.fork_rng(enabled=False):
        mf.rand(4, device="cpu")
    assert not np.array_equal(mf.rand(4, device="cpu").numpy(), first)  # not forked: the stream moved on

    @mf.random.fork_rng(devices=[])
    def draw():
        return mf.rand(2, device="cpu").numpy()

    mf.manual_seed(3)
    a, b = draw(), draw()
    np.testing.assert_array_equal(a, b)
    with mf.random.fork_rng(device_type="meta"):
        pass
    with pytest.raises(RuntimeError, match="device type"):
        with mf.random.fork_rng(device_type="tpu"):
            pass


def test_random_module_names():
    r = mf.random
    assert (r.manual_seed, r.seed, r.initial_seed, r.get_rng_state, r.set_rng_state) == (
        mf.manual_seed, mf.seed, mf.initial_seed, mf.get_rng_state, mf.set_rng_state)
    assert r.thread_safe_generator() is None
    import minifused.random as imported

    assert imported is r


def test_vmap_is_func_vmap():
    assert mf.vmap is mf.func.vmap
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    out = mf.vmap(mf.dot)(cpu(a), cpu(b))
    np.testing.assert_allclose(out.numpy(), (a * b).sum(1), rtol=1e-12)


def test_cublas_reduction_flags_round_trip():
    m = mf.backends.cuda.matmul
    assert m.allow_fp16_reduced_precision_reduction is True and m.allow_bf16_reduced_precision_reduction is True
    try:
        m.allow_fp16_reduced_precision_reduction = False
        assert (m.allow_fp16_reduced_precision_reduction, m.allow_fp16_reduced_precision_reduction_split_k) == (
            False, True)
        m.allow_bf16_reduced_precision_reduction = (True, False)
        assert (m.allow_bf16_reduced_precision_reduction, m.allow_bf16_reduced_precision_reduction_split_k) == (
            True, False)
        assert m.allow_fp16_reduced_precision_reduction is False  # the two are apart
        for bad, message in ((1, "expects a bool or a tuple/list of bools"), ((), "at least one boolean"),
                             ((True, True, True), "at most two"), ((1,), "a bool for allow_reduced_precision")):
            with pytest.raises(TypeError, match=message):
                m.allow_fp16_reduced_precision_reduction = bad
        with pytest.raises(AttributeError):
            m.no_such_flag = True
    finally:
        m.allow_fp16_reduced_precision_reduction = m.allow_bf16_reduced_precision_reduction = True
    assert m.allow_fp16_reduced_precision_reduction_split_k and m.allow_bf16_reduced_precision_reduction_split_k


def test_fp32_precision_is_the_tf32_switch():
    m, conv = mf.backends.cuda.matmul, mf.backends.cudnn.conv
    saved = backend.tf32_matmul.allow_tf32, backend.tf32_conv.allow_tf32
    try:
        m.fp32_precision = "tf32"
        assert backend.tf32_matmul.allow_tf32 is True and m.allow_tf32 and mf.get_float32_matmul_precision() == "high"
        m.fp32_precision = "ieee"
        assert backend.tf32_matmul.allow_tf32 is False and m.fp32_precision == "ieee"
        m.fp32_precision = "none"  # the default here: full float32
        assert backend.tf32_matmul.allow_tf32 is False and m.fp32_precision == "none"
        m.allow_tf32 = True  # the legacy switch reads back through the new name, as PyTorch's
        assert m.fp32_precision == "tf32"
        mf.set_float32_matmul_precision("highest")
        assert m.fp32_precision == "ieee"
        backend.tf32_matmul.allow_tf32 = True  # flipped under it: the name follows the switch
        assert m.fp32_precision == "tf32"
        conv.fp32_precision = "tf32"
        assert backend.tf32_conv.allow_tf32 is True and mf.backends.cudnn.allow_tf32
        mf.backends.cudnn.allow_tf32 = False
        assert conv.fp32_precision == "none" and (conv.backend, conv.op) == ("cuda", "conv")
        with pytest.raises(RuntimeError, match="backend 'cuda' does not support precision 'bf16'"):
            conv.fp32_precision = "bf16"
        with pytest.raises(RuntimeError, match="Unknown precision: TF32"):
            m.fp32_precision = "TF32"
        with pytest.raises(TypeError):
            m.fp32_precision = True
    finally:
        backend.tf32_matmul.allow_tf32, backend.tf32_conv.allow_tf32 = saved
        mf.set_float32_matmul_precision("highest")


def test_cpu_module():
    c = mf.cpu
    assert c.is_available() and c.is_initialized() and c.device_count() == 1 and c.current_device() == "cpu"
    assert c.synchronize() is None and c.synchronize("cpu") is None and c.set_device("cpu") is None
    s = c.Stream()
    assert c.current_stream() is not s
    with c.stream(s):
        assert c.current_stream() is s
    assert c.current_stream() is not s and c.Event().query()


def test_cpu_amp_autocast_is_deprecated_and_casts_to_bfloat16():
    from minifused.cpu.amp import autocast

    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal((6, 3)).astype(np.float32)
    with pytest.warns(FutureWarning, match=r"cpu\.amp\.autocast\(args\.\.\.\)` is deprecated"):
        region = autocast()
    with region:
        assert mf.is_autocast_enabled("cpu") and mf.get_autocast_dtype("cpu") == mf.bfloat16
        out = mf.matmul(cpu(a), cpu(b))
    assert not mf.is_autocast_enabled("cpu") and out.dtype == mf.bfloat16
    ref = a.astype(backend.bfloat16).astype(np.float64) @ b.astype(backend.bfloat16).astype(np.float64)
    np.testing.assert_allclose(out.float().numpy(), ref, rtol=1e-2, atol=1e-2)
    with pytest.warns(FutureWarning, match="GradScaler"):
        scaler = mf.cpu.amp.GradScaler(init_scale=8.0)
    assert scaler.get_scale() == 8.0


def test_safe_globals_bookkeeping(tmp_path):
    s = mf.serialization

    class Config:
        pass

    s.clear_safe_globals()
    try:
        s.add_safe_globals([Config, (len, "builtins.len"), Config])
        assert s.get_safe_globals() == [Config, (len, "builtins.len")]
        got = s.get_safe_globals()
        got.append(1)  # a new list each time
        assert len(s.get_safe_globals()) == 2
        with pytest.raises(TypeError):
            s.add_safe_globals(Config)  # a list is expected (PyTorch: 'type' object is not iterable)
        with s.safe_globals([np.dtype]) as ctx:
            assert ctx is None and np.dtype in s.get_safe_globals()
        assert s.get_safe_globals() == [Config, (len, "builtins.len")]
        with s.safe_globals([Config]):
            pass
        assert s.get_safe_globals() == [(len, "builtins.len")]  # PyTorch's exit removes it, added before or not
        path = tmp_path / "ckpt.pt"
        mf.save({"w": cpu([1.0, 2.0]), "step": 3}, path)
        s.clear_safe_globals()
        assert s.get_safe_globals() == []
        loaded = mf.load(path, weights_only=True)  # (tensors and numbers need no allowlist)
        assert loaded["step"] == 3 and loaded["w"].tolist() == [1.0, 2.0]
    finally:
        s.clear_safe_globals()


def test_a_script_written_for_pytorch_runs():
    """The idioms as a PyTorch script spells them, with the import changed."""
    import minifused as torch
    import minifused.nn.functional as F
    from minifused.nn.attention import SDPBackend, sdpa_kernel

    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = True
    torch.backends.cuda.matmul.fp32_precision = "ieee"
    torch.backends.cudnn.conv.fp32_precision = "ieee"
    torch.serialization.add_safe_globals([dict])
    torch.manual_seed(0)
    q = torch.randn(1, 2, 3, 4, device="cpu")
    try:
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]), torch.random.fork_rng(devices=[]):
            out = F.scaled_dot_product_attention(q, q, q)
            per_row = torch.vmap(torch.sum)(out.reshape(-1, 4))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            with torch.cpu.amp.autocast(), torch.backends.cuda.sdp_kernel(enable_flash=False):
                torch.cpu.synchronize()
    finally:
        torch.serialization.clear_safe_globals()
        torch.backends.cuda.matmul.fp32_precision = torch.backends.cudnn.conv.fp32_precision = "none"
    np.testing.assert_allclose(per_row.numpy(), out.numpy().reshape(-1, 4).sum(1), rtol=1e-6)
    assert torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.math_sdp_enabled()


def test_scaled_dot_product_attention_obeys_the_selected_backends():
    """sdpa runs under any selection that includes a backend it stands in for, and raises PyTorch's error under
    one that leaves none (only 'efficient attention' on the cpu, which PyTorch's cpu build lacks)."""
    import numpy as np

    from minifused.nn.attention import SDPBackend, sdpa_kernel

    rng = np.random.default_rng(0)
    q, k, v = (mf.tensor(rng.standard_normal((1, 2, 3, 4)).astype(np.float32)) for _ in range(3))
    s = q.numpy() @ k.numpy().transpose(0, 1, 3, 2) / 2.0
    w = np.exp(s - s.max(-1, keepdims=True))
    expected = (w / w.sum(-1, keepdims=True)) @ v.numpy()
    with sdpa_kernel([SDPBackend.MATH]):
        np.testing.assert_allclose(mf.nn.functional.scaled_dot_product_attention(q, k, v).numpy(), expected,
                                   rtol=1e-5, atol=1e-6)
    with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]):
        with pytest.raises(Exception, match="No viable backend"):
            mf.nn.functional.scaled_dot_product_attention(q, k, v)
