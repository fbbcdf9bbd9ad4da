"""PyTorch's namespaces after `import minifused` alone: nn.functional, nn.init, nn.utils, optim.lr_scheduler,
utils.data, cuda, backends; grad-mode helpers and the default dtype."""
import subprocess
import sys

import numpy as np
import pytest

import minifused as mf
from minifused import backend


def test_namespaces_reachable_from_a_bare_import():
    # a fresh interpreter: nothing but `import minifused` has run
    code = ("import minifused as torch\n"
            "names = ['nn.functional', 'nn.init', 'nn.utils', 'optim.lr_scheduler', 'utils.data', 'cuda',\n"
            "         'backends.cudnn', 'backends.cuda.matmul']\n"
            "for n in names:\n"
            "    obj = torch\n"
            "    for part in n.split('.'):\n"
            "        obj = getattr(obj, part)\n"
            "assert torch.nn.functional is torch.functional\n"
            "import minifused.nn.functional as F\n"
            "from minifused.nn import functional as F2\n"
            "from minifused.utils.data import DataLoader, Dataset, random_split\n"
            "assert F is F2 is torch.functional\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_utils_data_names():
    from minifused.utils import data as ud

    for name in ["Dataset", "TensorDataset", "DataLoader", "random_split", "Subset", "ConcatDataset", "Sampler",
                 "SequentialSampler", "RandomSampler", "BatchSampler", "SubsetRandomSampler", "DistributedSampler",
                 "default_collate"]:
        assert getattr(ud, name) is getattr(mf.data, name), name


def test_cuda_functions_on_this_machine():
    c = mf.cuda
    assert c.is_available() == backend.cuda_available()
    if not c.is_available():
        assert c.device_count() == 0
        assert c.memory_allocated() == 0 and c.max_memory_allocated() == 0 and c.memory_reserved() == 0
        assert c.reset_peak_memory_stats() is None and c.empty_cache() is None and c.synchronize() is None
        with pytest.raises(RuntimeError, match="current_device: no usable CUDA device"):
            c.current_device()
    state = mf.get_rng_state()
    try:
        c.manual_seed(5)
        a = mf.randn(3, device="cpu").numpy()
        c.manual_seed_all(5)
        np.testing.assert_array_equal(a, mf.randn(3, device="cpu").numpy())
    finally:
        mf.set_rng_state(state)


@pytest.mark.gpu
def test_cuda_memory_counters():
    import cupy

    c = mf.cuda
    pool = cupy.get_default_memory_pool()
    try:
        _check_memory_counters(c, cupy)
    finally:  # peak tracking stays on once asked for; give later tests the plain pool back
        cupy.cuda.set_allocator(pool.malloc)


def _check_memory_counters(c, cupy):
    assert c.device_count() >= 1 and c.current_device() == cupy.cuda.runtime.getDevice()
    assert isinstance(c.get_device_name(), str) and c.get_device_name()
    c.synchronize()
    c.reset_peak_memory_stats()
    base = c.memory_allocated()
    x = mf.zeros(1 << 20, device="cuda")  # 4 MiB
    assert c.memory_allocated() >= base + (4 << 20)
    peak = c.max_memory_allocated()
    assert peak >= base + (4 << 20)
    del x
    assert c.memory_allocated() < peak  # freed, the peak stays
    assert c.max_memory_allocated() == peak
    y = mf.zeros(1 << 18, device="cuda")  # 1 MiB: below the earlier peak
    c.reset_peak_memory_stats()
    assert c.max_memory_allocated() == c.memory_allocated()
    del y
    c.empty_cache()
    assert c.memory_reserved() >= c.memory_allocated()


def test_backends_cudnn_flags():
    cudnn = mf.backends.cudnn
    saved = cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32
    try:
        cudnn.benchmark, cudnn.deterministic = True, True
        assert cudnn.benchmark and cudnn.deterministic
        cudnn.allow_tf32 = True
        assert backend.tf32_conv.allow_tf32 is True  # the one switch the conv kernels read
        with cudnn.flags(allow_tf32=False):
            assert backend.tf32_conv.allow_tf32 is False
        assert backend.tf32_conv.allow_tf32 is True
        with pytest.raises(AttributeError):
            cudnn.no_such_flag = 1
    finally:
        cudnn.benchmark, cudnn.deterministic, cudnn.allow_tf32 = saved
    saved = backend.tf32_matmul.allow_tf32
    try:  # backends.cuda.matmul's allow_tf32 is the switch the GEMMs read
        mf.backends.cuda.matmul.allow_tf32 = not saved
        assert backend.tf32_matmul.allow_tf32 is (not saved)
    finally:
        backend.tf32_matmul.allow_tf32 = saved


def test_matmul_precision_and_deterministic_switches():
    """set_float32_matmul_precision flips the GEMMs' TF32 switch ('high' / 'medium' on, 'highest' off) and
    reads back; use_deterministic_algorithms(True) makes new GEMM plans take the heuristic's first algorithm
    (no timing: the same in every process), False restores the default; bad arguments are refused."""
    from minifused.kernels import cublaslt

    saved = backend.tf32_matmul.allow_tf32
    try:
        for precision, tf32 in (("high", True), ("medium", True), ("highest", False)):
            mf.set_float32_matmul_precision(precision)
            assert backend.tf32_matmul.allow_tf32 is tf32 and mf.get_float32_matmul_precision() == precision
        mf.backends.cuda.matmul.allow_tf32 = True
        assert mf.get_float32_matmul_precision() == "high"
        with pytest.raises(ValueError, match="'highest', 'high' or 'medium'"):
            mf.set_float32_matmul_precision("low")
        mf.use_deterministic_algorithms(True, warn_only=True)
        assert mf.are_deterministic_algorithms_enabled() and mf.is_deterministic_algorithms_warn_only_enabled()
        assert cublaslt.DEFAULT_CONFIG.small_gemm_flop == 0 and not cublaslt.DEFAULT_CONFIG.autotune
        with pytest.raises(TypeError, match="must be bools"):
            mf.use_deterministic_algorithms("yes")
    finally:
        mf.use_deterministic_algorithms(False)
        backend.tf32_matmul.allow_tf32 = saved
    assert cublaslt.DEFAULT_CONFIG == cublaslt.GemmConfig() and not mf.are_deterministic_algorithms_enabled()


def test_grad_scaler_spellings():
    """torch.amp.GradScaler('cuda', ...) takes the device first; torch.cuda.amp.GradScaler(...) does not."""
    assert mf.amp.GradScaler("cuda", 2.0 ** 10)._init == (1024.0, 0)
    assert mf.amp.GradScaler(device="cpu", init_scale=8.0)._init == (8.0, 0)
    assert mf.cuda.amp.GradScaler(init_scale=4.0, enabled=False).enabled is False
    with pytest.raises(ValueError, match="device must be 'cuda' or 'cpu', got 1024.0"):
        mf.amp.GradScaler(1024.0)


def test_bernoulli_draws():
    """torch.bernoulli (probabilities per element) and Tensor.bernoulli_(p) (stochastic depth's noise): 0/1 in
    the tensor's dtype at the given rates; probabilities outside [0, 1] and non-float inputs refused."""
    mf.manual_seed(4)
    b = mf.bernoulli(mf.full((100_000,), 0.3))
    assert b.dtype == mf.float32 and set(np.unique(b.numpy()).tolist()) <= {0.0, 1.0}
    assert abs(float(b.mean().item()) - 0.3) < 0.01
    noise = mf.empty(50_000, 1, dtype=mf.float64).bernoulli_(0.8)
    assert noise._version == 1 and abs(float(noise.mean().item()) - 0.8) < 0.01
    rates = mf.tensor([0.0, 1.0]).reshape(2, 1).expand(2, 1000).contiguous()
    assert mf.zeros(2, 1000).bernoulli_(rates).sum(1).tolist() == [0.0, 1000.0]
    with pytest.raises(ValueError, match=r"probabilities must lie in \[0, 1\]"):
        mf.bernoulli(mf.tensor([1.5]))
    with pytest.raises(TypeError, match="floating-point"):
        mf.bernoulli(mf.tensor([1, 0]))
    with pytest.raises(RuntimeError, match="bernoulli_: a leaf Variable that requires grad"):
        mf.zeros(3, requires_grad=True).bernoulli_(0.5)


def test_grad_mode_helpers():
    x = mf.ones(2, requires_grad=True)
    assert mf.is_grad_enabled()
    with mf.inference_mode():
        assert not mf.is_grad_enabled() and (x * 2).grad_fn is None
    with mf.inference_mode(False):
        assert mf.is_grad_enabled()
    with mf.no_grad(), mf.inference_mode(False):  # it turns grad mode on, as PyTorch's
        assert mf.is_grad_enabled() and (x * 2).grad_fn is not None

    @mf.inference_mode()
    def f():
        return mf.is_grad_enabled()

    @mf.inference_mode
    def g():
        return mf.is_grad_enabled()

    @mf.no_grad
    def h():
        return mf.is_grad_enabled()

    assert f() is False and g() is False and h() is False and mf.is_grad_enabled()


@pytest.fixture
def restore_default_dtype():
    yield
    mf.set_default_dtype(mf.float32)


def test_default_dtype(restore_default_dtype):
    assert mf.get_default_dtype() == mf.float32
    assert mf.tensor([1.0]).dtype == mf.float32 and mf.zeros(2).dtype == mf.float32
    mf.set_default_dtype(mf.float64)
    assert mf.get_default_dtype() == mf.float64
    for t in (mf.tensor([1.0]), mf.tensor(2.5), mf.zeros(3), mf.ones(2), mf.empty(1), mf.randn(2), mf.rand(2),
              mf.arange(0.0, 2.0), mf.eye(2), mf.full((2,), 1.5)):
        assert t.dtype == mf.float64
    # integers, explicit dtypes and NumPy arrays keep theirs
    assert mf.tensor([1]).dtype == mf.int64 and mf.zeros(2, dtype=mf.float16).dtype == mf.float16
    assert mf.tensor(np.ones(2, np.float32)).dtype == mf.float32
    mf.set_default_dtype("bfloat16")
    assert mf.zeros(2).dtype == mf.bfloat16


@pytest.mark.parametrize("bad", [mf.int64, "int32", mf.bool_, "nope"])
def test_default_dtype_must_be_floating(bad, restore_default_dtype):
    with pytest.raises(TypeError, match="set_default_dtype"):
        mf.set_default_dtype(bad)
    assert mf.get_default_dtype() == mf.float32


def test_compile_printoptions_type_and_generator():
    """torch.compile returns what it is given (and works as a decorator); set_printoptions changes how tensors
    print; Tensor.type names or casts; a cpu Generator seeds rand / randn / randint / randperm / bernoulli,
    DataLoader shuffles and random_split reproducibly, apart from the global generator."""
    m = mf.nn.Linear(2, 2)
    assert mf.compile(m) is m and mf.compile(mode="max-autotune")(m) is m

    @mf.compile
    def f(x):
        return x * 2

    assert f(mf.ones(1)).tolist() == [2.0]
    x = mf.tensor([1.23456, 1e-6])
    try:
        mf.set_printoptions(precision=2, sci_mode=False)
        assert repr(x) == "tensor([1.23, 0.00])"
        mf.set_printoptions(sci_mode=True)
        assert repr(x) == "tensor([1.23e+00, 1.00e-06])"
        with pytest.raises(ValueError, match="profile must be"):
            mf.set_printoptions(profile="long")
    finally:
        mf.set_printoptions(profile="default")
    assert repr(x) == "tensor([1.2346e+00, 1.0000e-06])"
    assert x.type() == "minifused.FloatTensor" and mf.arange(2).type() == "minifused.LongTensor"
    assert x.type(mf.float16).dtype == mf.float16
    g = mf.Generator()
    assert g.initial_seed() == 67280421310721 and g.manual_seed(5) is g and g.initial_seed() == 5
    draws = [(mf.rand(3, generator=h).tolist(), mf.randn(2, generator=h).tolist(),
              mf.randint(0, 10, (4,), generator=h).tolist(), mf.randperm(6, generator=h).tolist(),
              mf.bernoulli(mf.full((5,), 0.5), generator=h).tolist())
             for h in (mf.Generator().manual_seed(7), mf.Generator().manual_seed(7))]
    assert draws[0] == draws[1]
    state = g.get_state()
    first = mf.rand(2, generator=g).tolist()
    assert mf.rand(2, generator=g.set_state(state)).tolist() == first
    order = [[b.tolist() for b in mf.data.DataLoader(list(range(8)), batch_size=4, shuffle=True,
                                                      generator=mf.Generator().manual_seed(3))] for _ in range(2)]
    assert order[0] == order[1] and sorted(sum(order[0], [])) == list(range(8))
    parts = [mf.data.random_split(list(range(10)), [7, 3], generator=mf.Generator().manual_seed(1)) for _ in range(2)]
    assert list(parts[0][1]) == list(parts[1][1])
    with pytest.raises(TypeError, match="generator must be a minifused.Generator"):
        mf.randperm(3, generator=42)
    with pytest.raises(NotImplementedError, match="only cpu generators"):
        mf.Generator("cuda")
