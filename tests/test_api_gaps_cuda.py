"""torch.cuda's device queries, random states and ``device`` context: the CPU behaviour here, the GPU behaviour in
the ``gpu`` tests (they skip without CUDA)."""
import numpy as np
import pytest

import minifused as mf
from minifused import backend

c = mf.cuda


@pytest.mark.skipif(backend.cuda_available(), reason="the behaviour without CUDA")
def test_without_cuda():
    assert c.is_bf16_supported() is False and c.get_arch_list() == []
    assert c.seed() is None and c.seed_all() is None
    assert c.set_rng_state(mf.tensor(np.zeros(16, np.uint8), device="cpu")) is None  # a no-op, as PyTorch's
    for name, call in [("get_device_capability", c.get_device_capability),
                       ("get_device_properties", c.get_device_properties), ("mem_get_info", c.mem_get_info),
                       ("is_current_stream_capturing", c.is_current_stream_capturing),
                       ("get_rng_state", c.get_rng_state), ("get_rng_state_all", c.get_rng_state_all),
                       ("initial_seed", c.initial_seed), ("device", lambda: c.device(0).__enter__())]:
        with pytest.raises(RuntimeError, match=f"minifused.cuda.{name}: no usable CUDA device"):
            call()
    with c.device(None), c.device(-1):  # no device asked: nothing happens
        pass


def test_set_rng_state_checks_its_argument():
    with pytest.raises(TypeError, match="set_rng_state: expected a uint8 tensor"):
        c.set_rng_state([0] * 16)
    with pytest.raises(TypeError, match="set_rng_state: expected a uint8 tensor"):
        c.set_rng_state(mf.zeros(16, device="cpu"))
    with pytest.raises(RuntimeError, match="RNG state is wrong size"):
        c.set_rng_state(mf.tensor(np.zeros(8, np.uint8), device="cpu"))


@pytest.mark.gpu
def test_device_queries_on_gpu():
    cupy = backend.cupy
    props = cupy.cuda.runtime.getDeviceProperties(0)
    p = c.get_device_properties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    assert p.name == name == c.get_device_name(0)
    assert p.total_memory == props["totalGlobalMem"] > 0
    assert (p.major, p.minor) == (props["major"], props["minor"]) == c.get_device_capability(0)
    assert c.get_device_capability() == c.get_device_capability("cuda:0") == c.get_device_capability(c.current_device())
    assert p.multi_processor_count == props["multiProcessorCount"] > 0
    assert "multi_processor_count=" in repr(p)
    assert c.is_bf16_supported() is True  # native from 8.0, emulated before (PyTorch counts emulation)
    assert c.is_bf16_supported(including_emulation=False) is (p.major >= 8)
    assert f"sm_{p.major}{p.minor}" in c.get_arch_list()
    free, total = c.mem_get_info()
    assert 0 < free <= total == p.total_memory
    assert c.is_current_stream_capturing() is False
    with pytest.raises(ValueError, match="expected a cuda device"):
        c.get_device_capability("cpu")


@pytest.mark.gpu
def test_cuda_device_context_switches_and_restores():
    start = c.current_device()
    with c.device(0) as d:
        assert c.current_device() == 0 and d.idx == 0
        x = mf.zeros(2, device="cuda")
        assert x.device == backend.Device("cuda", 0)
    assert c.current_device() == start
    if c.device_count() > 1:
        with c.device("cuda:1"):
            assert c.current_device() == 1
        assert c.current_device() == start
    with pytest.raises(KeyError):  # the previous device comes back even when the body raises
        with c.device(0):
            raise KeyError("x")
    assert c.current_device() == start


@pytest.mark.gpu
def test_cuda_rng_state_replays_draws():
    state = mf.get_rng_state()
    try:
        mf.manual_seed(7)
        assert c.initial_seed() == 7 + c.current_device()
        s = c.get_rng_state()
        assert s.dtype == np.uint8 and s.shape == (16,) and s.device == backend.CPU
        a = mf.randn(1000, device="cuda").cpu().numpy()
        b = mf.randn(1000, device="cuda").cpu().numpy()
        c.set_rng_state(s)
        np.testing.assert_array_equal(mf.randn(1000, device="cuda").cpu().numpy(), a)
        np.testing.assert_array_equal(mf.randn(1000, device="cuda").cpu().numpy(), b)
        assert c.initial_seed() == int.from_bytes(s.numpy()[:8].tobytes(), "little")
        # deterministic given the seeding history: the same seed gives the same state
        mf.manual_seed(7)
        np.testing.assert_array_equal(c.get_rng_state().numpy(), s.numpy())
        states = c.get_rng_state_all()
        assert len(states) == c.device_count()
        x = mf.rand(64, device="cuda").cpu().numpy()
        c.set_rng_state_all(states)
        np.testing.assert_array_equal(mf.rand(64, device="cuda").cpu().numpy(), x)
        c.seed()
        seeded = c.initial_seed()
        assert 0 <= seeded < 2 ** 63
        y = mf.rand(64, device="cuda").cpu().numpy()
        c.seed_all()
        assert 0 <= c.initial_seed() < 2 ** 63
        c.set_rng_state(s)  # a state taken before still replays after reseeding
        np.testing.assert_array_equal(mf.randn(1000, device="cuda").cpu().numpy(), a)
        assert not np.array_equal(y, x)
        cpu_before = mf.get_rng_state()["cpu"]
        c.get_rng_state()
        assert mf.get_rng_state()["cpu"] == cpu_before  # the cpu stream is untouched
    finally:
        mf.set_rng_state(state)


@pytest.mark.skipif(backend.cuda_available(), reason="the behaviour without CUDA")
def test_memory_statistics_without_cuda():
    assert c.memory_stats() == {} and c.max_memory_reserved() == 0 and c.memory_cached() == 0
    assert c.reset_max_memory_allocated() is None and c.reset_max_memory_cached() is None
    assert "no CUDA device" in c.memory_summary()
    with pytest.raises(RuntimeError, match="set_per_process_memory_fraction: no usable CUDA device"):
        c.set_per_process_memory_fraction(0.5)


@pytest.mark.gpu
def test_memory_statistics_follow_the_pool():
    pool = backend.cupy.get_default_memory_pool()
    c.synchronize()
    c.reset_peak_memory_stats()
    base_used, base_held = pool.used_bytes(), pool.total_bytes()
    x = mf.empty(3 << 20, device="cuda", dtype=mf.float32)  # 12 MiB (the pool rounds to 512 bytes)
    stats = c.memory_stats()
    assert stats["allocated_bytes.all.current"] == stats["active_bytes.all.current"] == base_used + (12 << 20)
    assert stats["reserved_bytes.all.current"] == pool.total_bytes() >= base_held
    assert stats["inactive_split_bytes.all.current"] == pool.total_bytes() - pool.used_bytes()
    del x
    after = c.memory_stats()
    assert after["allocated_bytes.all.current"] == base_used
    assert after["allocated_bytes.all.peak"] == base_used + (12 << 20) == c.max_memory_allocated()
    assert after["reserved_bytes.all.peak"] == c.max_memory_reserved() >= stats["reserved_bytes.all.current"]
    c.reset_max_memory_allocated()
    assert c.max_memory_allocated() == base_used
    assert "allocated_bytes" in c.memory_summary() and c.memory_cached() == pool.total_bytes()


@pytest.mark.gpu
def test_memory_fraction_caps_the_pool():
    assert c.get_per_process_memory_fraction() == 1.0
    total = backend.cupy.cuda.runtime.memGetInfo()[1]
    try:
        c.set_per_process_memory_fraction(0.25)
        assert c.get_per_process_memory_fraction() == pytest.approx(0.25)
        with pytest.raises(c.OutOfMemoryError):
            mf.empty(int(total * 0.3) // 4, device="cuda", dtype=mf.float32)
    finally:
        backend.cupy.get_default_memory_pool().set_limit(size=0)
    with pytest.raises(ValueError, match="Invalid fraction value: 1.5. Allowed range: 0~1"):
        c.set_per_process_memory_fraction(1.5)
    with pytest.raises(TypeError, match="must be `float`"):
        c.set_per_process_memory_fraction(1)
