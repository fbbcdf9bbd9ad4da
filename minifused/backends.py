"""PyTorch's ``torch.backends`` switches under PyTorch's names, so ``torch.backends.cuda.matmul.allow_tf32 =
True`` ports with the import changed. ``cudnn`` names the convolution kernels' switches (minifused has no
cuDNN; the names are PyTorch's). The TF32 switches themselves live in :mod:`minifused.backend`.
``cuda`` also holds the scaled-dot-product-attention backend switches (``enable_flash_sdp`` ... and the
deprecated ``sdp_kernel``; ``minifused.nn.attention.sdpa_kernel`` sets them too)."""
from __future__ import annotations

import contextlib
import enum
import warnings
from types import SimpleNamespace

from .backend import InputError, InputTypeError, tf32_conv, tf32_matmul


class _FP32Precision:
    """``fp32_precision``, PyTorch's newer spelling of a TF32 switch (``backends.cuda.matmul`` for the GEMMs,
    ``backends.cudnn.conv`` for the convolutions): 'tf32' turns the switch on, 'ieee' off; 'none' (the start)
    defers to the levels above, which minifused does not have, so it means the default: full float32 for both
    families here (PyTorch's convolutions default to TF32, so its ``cudnn.conv`` reads 'tf32' at the start). It
    reads back the value last set while the switch still agrees with it, else what the switch says ('tf32' /
    'ieee'): ``allow_tf32`` and this name set one switch."""

    __slots__ = ("backend", "op", "_switch", "_set")

    def __init__(self, backend, op, switch):
        self.backend, self.op, self._switch, self._set = backend, op, switch, "none"

    @property
    def fp32_precision(self) -> str:
        on = bool(self._switch.allow_tf32)
        if (self._set == "tf32") == on:
            return self._set
        return "tf32" if on else "ieee"

    @fp32_precision.setter
    def fp32_precision(self, value):
        if not isinstance(value, str):
            raise InputTypeError(f"fp32_precision: expected a str ('ieee', 'tf32' or 'none'), got "
                                 f"{type(value).__name__}")
        if value == "bf16":
            raise InputError(f"backend '{self.backend}' does not support precision 'bf16'")
        if value not in ("ieee", "tf32", "none"):
            raise InputError(f"Unknown precision: {value}")
        self._switch.allow_tf32 = value == "tf32"
        self._set = value

    def _record(self, value):
        """What a legacy switch (``allow_tf32``, ``set_float32_matmul_precision``) set, as PyTorch records it."""
        self._set = value


class _CuBLAS:
    """``torch.backends.cuda.matmul``: ``allow_tf32`` (the GEMMs' TF32 switch, :data:`minifused.backend.tf32_matmul`)
    and ``fp32_precision`` (the same switch, PyTorch's newer spelling), and the reduced-precision-reduction flags.

    ``allow_fp16_reduced_precision_reduction`` / ``allow_bf16_reduced_precision_reduction`` (True at the start,
    as PyTorch's; a bool, or PyTorch's (allow, allow_split_k) pair, read back apart as ``..._split_k``) are
    recorded only. In PyTorch they let cuBLAS add a 16-bit GEMM's split-K partial sums in the 16-bit output type.
    minifused's 16-bit Linear GEMMs multiply-accumulate in float32 (cuBLASLt's CUBLAS_COMPUTE_32F, float64 on the
    NumPy path); the algorithm cuBLASLt's heuristic picks first may still be a split-K that reduces in the output
    type (what True allows), and the timed alternatives never are (``kernels.cublaslt``). So the default's
    behaviour is what runs, and False does not rule that first choice out."""

    __slots__ = ("_fp16", "_bf16", "_precision")

    def __init__(self):
        self._fp16, self._bf16 = (True, True), (True, True)
        self._precision = _FP32Precision("cuda", "matmul", tf32_matmul)

    @property
    def allow_tf32(self) -> bool:
        return tf32_matmul.allow_tf32

    @allow_tf32.setter
    def allow_tf32(self, flag):
        tf32_matmul.allow_tf32 = bool(flag)
        self._precision._record("tf32" if flag else "ieee")

    @property
    def fp32_precision(self) -> str:
        return self._precision.fp32_precision

    @fp32_precision.setter
    def fp32_precision(self, value):
        self._precision.fp32_precision = value

    @staticmethod
    def _reduction(value, name):
        """PyTorch's parse: a bool, or a list / tuple of one or two bools (allow, allow_split_k)."""
        if isinstance(value, bool):
            return value, True
        if not isinstance(value, (list, tuple)):
            raise InputTypeError(f"{name} expects a bool or a tuple/list of bools, but got {type(value)!r}")
        if not value:
            raise InputTypeError(f"{name} expects at least one boolean argument")
        if len(value) > 2:
            raise InputTypeError(f"{name} expects at most two boolean arguments")
        for item, which in zip(value, ("allow_reduced_precision", "allow_splitk")):
            if not isinstance(item, bool):
                raise InputTypeError(f"{name} expects a bool for {which}, but got {type(item)!r}")
        return value[0], value[1] if len(value) == 2 else True

    @property
    def allow_fp16_reduced_precision_reduction(self) -> bool:
        return self._fp16[0]

    @allow_fp16_reduced_precision_reduction.setter
    def allow_fp16_reduced_precision_reduction(self, value):
        self._fp16 = self._reduction(value, "allow_fp16_reduced_precision_reduction")

    @property
    def allow_fp16_reduced_precision_reduction_split_k(self) -> bool:
        return self._fp16[1]

    @property
    def allow_bf16_reduced_precision_reduction(self) -> bool:
        return self._bf16[0]

    @allow_bf16_reduced_precision_reduction.setter
    def allow_bf16_reduced_precision_reduction(self, value):
        self._bf16 = self._reduction(value, "allow_bf16_reduced_precision_reduction")

    @property
    def allow_bf16_reduced_precision_reduction_split_k(self) -> bool:
        return self._bf16[1]

    def __repr__(self):
        return (f"backends.cuda.matmul(allow_tf32={self.allow_tf32}, fp32_precision={self.fp32_precision!r}, "
                f"allow_fp16_reduced_precision_reduction={self._fp16[0]}, "
                f"allow_bf16_reduced_precision_reduction={self._bf16[0]})")


# ---------------------------------------------------------------- scaled dot product attention backends
#: PyTorch's attention backends by their switch names, with their ``SDPBackend`` values; all on at the start
SDP_BACKENDS = {"flash": 1, "mem_efficient": 2, "math": 0, "cudnn": 3, "overrideable": 4}
_sdp = dict.fromkeys(SDP_BACKENDS, True)
_sdp_priority = [1, 2, 0, 3, 4]  # PyTorch's default order (``sdpa_kernel(..., set_priority=True)`` sets it)
_sdp_math_low_precision = [False]


def _sdp_switch(name):
    """The query and the setter of one attention backend's switch (what they mean: :func:`check_sdp_backends`)."""
    def query() -> bool:
        return _sdp[name]

    def enable(enabled):
        if not isinstance(enabled, bool):
            raise InputTypeError(f"enable_{name}_sdp expects a bool, but got {type(enabled).__name__}")
        _sdp[name] = enabled

    query.__name__ = query.__qualname__ = f"{name}_sdp_enabled"
    enable.__name__ = enable.__qualname__ = f"enable_{name}_sdp"
    query.__doc__ = f"Whether the {name} attention backend is enabled (see :func:`check_sdp_backends`)."
    enable.__doc__ = f"Enable or disable the {name} attention backend (see :func:`check_sdp_backends`)."
    return query, enable


flash_sdp_enabled, enable_flash_sdp = _sdp_switch("flash")
mem_efficient_sdp_enabled, enable_mem_efficient_sdp = _sdp_switch("mem_efficient")
math_sdp_enabled, enable_math_sdp = _sdp_switch("math")
cudnn_sdp_enabled, enable_cudnn_sdp = _sdp_switch("cudnn")


def allow_fp16_bf16_reduction_math_sdp(enabled):
    """Recorded only: minifused's attention computes the scores and softmax of float16 / bfloat16 inputs in
    float32 whatever this says (PyTorch's math backend does so while it is False, its default)."""
    if not isinstance(enabled, bool):
        raise InputTypeError(f"allow_fp16_bf16_reduction_math_sdp expects a bool, but got {type(enabled).__name__}")
    _sdp_math_low_precision[0] = enabled


def fp16_bf16_reduction_math_sdp_allowed() -> bool:
    return _sdp_math_low_precision[0]


def check_sdp_backends(query, key, value, attn_mask=None, dropout_p=0.0, enable_gqa=False):
    """Raise PyTorch's error where the enabled attention backends leave ``scaled_dot_product_attention`` none
    that would run on these inputs. minifused has one implementation (softmax of the full score matrix): it
    stands in for whichever enabled backend PyTorch would pick, as their results agree up to rounding. That is
    'math' on any input; 'flash' on the cpu where PyTorch's cpu flash kernel takes the inputs (4-D query, key
    and value of one batch size and head count, GQA aside, one head size, a 2-D or 4-D mask, no dropout); and
    'flash', 'mem_efficient' or 'cudnn' on cuda for any input (PyTorch's fused kernels each take only some
    inputs: a dtype, a head size, a GPU generation). 'overrideable' (backends of other devices) runs nothing."""
    if _sdp["math"]:
        return
    if query.device.type == "cuda" and (_sdp["flash"] or _sdp["mem_efficient"] or _sdp["cudnn"]):
        return
    if query.device.type == "cpu" and _sdp["flash"]:
        q, k, v = query.shape, key.shape, value.shape
        heads_ok = k[1] == v[1] and (q[1] == k[1] or enable_gqa) if len(q) == len(k) == len(v) == 4 else False
        if (heads_ok and q[0] == k[0] == v[0] and q[3] == k[3] == v[3] and not dropout_p > 0.0
                and (attn_mask is None or attn_mask.ndim in (2, 4))):
            return
        raise InputError("No available kernel.  Aborting execution.")
    raise InputError("No viable backend for scaled_dot_product_attention was found. This is likely due to turning "
                     "off both the math kernel and the fused kernels.")


#: PyTorch's switch for warnings on why its fused kernels were passed over, read by its attention-bias subclasses
#: (``torch.nn.attention.bias``), which minifused does not have: nothing reads it here.
WARN_FOR_UNFUSED_KERNELS = False


class SDPBackend(enum.Enum):
    """The attention backends, PyTorch's names and values (``int(SDPBackend.MATH) == 0``; as PyTorch's, a member
    is not equal to its int)."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4

    def __int__(self):
        return self.value


_SWITCHES = {name: SDPBackend(value) for name, value in SDP_BACKENDS.items()}  # switch name -> backend


def _current(with_priority=False):
    on = [backend for name, backend in _SWITCHES.items() if _sdp[name]]
    if with_priority:
        on.sort(key=lambda backend: _sdp_priority.index(int(backend)))
    return on


def _select(chosen, set_priority):
    for name, backend in _SWITCHES.items():
        _sdp[name] = backend in chosen
    if set_priority:
        order = [int(backend) for backend in chosen]
        _sdp_priority[:] = order + [b for b in _sdp_priority if b not in order]


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """``with sdpa_kernel(SDPBackend.FLASH_ATTENTION):`` (a backend or a list of them): inside, only those
    backends are enabled; on exit the switches come back. ``set_priority=True`` also makes the list's order the
    backends' priority, restored on exit likewise; minifused runs one implementation, so the order is recorded
    only (:func:`check_sdp_backends` says which selections it runs under)."""
    if not isinstance(backends, (list, SDPBackend)):
        raise AssertionError(f"Backend must be an instance of SDPBackend or a list of SDPBackend instances, got "
                             f"{type(backends).__name__}")
    chosen = list(dict.fromkeys([backends] if isinstance(backends, SDPBackend) else backends))
    previous, priority = _current(set_priority), list(_sdp_priority)
    try:
        _select(chosen, set_priority)
        yield {}
    finally:
        _select(previous, False)
        _sdp_priority[:] = priority


def sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True, enable_cudnn=True):
    """``torch.backends.cuda.sdp_kernel``, deprecated (PyTorch's FutureWarning): ``sdpa_kernel`` with the
    backends whose arguments are True (a context manager; the switches come back on exit)."""
    warnings.warn("`minifused.backends.cuda.sdp_kernel()` is deprecated. In the future, this context manager will "
                  "be removed. Please see `minifused.nn.attention.sdpa_kernel()` for the new context manager, with "
                  "updated signature.", FutureWarning, stacklevel=2)
    chosen = [b for on, b in ((enable_flash, SDPBackend.FLASH_ATTENTION),
                              (enable_mem_efficient, SDPBackend.EFFICIENT_ATTENTION),
                              (enable_math, SDPBackend.MATH), (enable_cudnn, SDPBackend.CUDNN_ATTENTION)) if on]
    return sdpa_kernel(chosen)


cuda = SimpleNamespace(
    matmul=_CuBLAS(), sdp_kernel=sdp_kernel, flash_sdp_enabled=flash_sdp_enabled, enable_flash_sdp=enable_flash_sdp,
    mem_efficient_sdp_enabled=mem_efficient_sdp_enabled, enable_mem_efficient_sdp=enable_mem_efficient_sdp,
    math_sdp_enabled=math_sdp_enabled, enable_math_sdp=enable_math_sdp, cudnn_sdp_enabled=cudnn_sdp_enabled,
    enable_cudnn_sdp=enable_cudnn_sdp, allow_fp16_bf16_reduction_math_sdp=allow_fp16_bf16_reduction_math_sdp,
    fp16_bf16_reduction_math_sdp_allowed=fp16_bf16_reduction_math_sdp_allowed)
#: ``torch.backends.mps`` (Apple's GPUs): never available here, so device pickers written for PyTorch fall through
mps = SimpleNamespace(is_available=lambda: False, is_built=lambda: False)


class _Cudnn:
    """``torch.backends.cudnn``. ``allow_tf32`` is the convolutions' TF32 switch (``conv.fp32_precision`` its
    newer spelling). ``benchmark`` and ``deterministic`` are accepted and change nothing: the convolution kernels
    pick their launch configuration from the shapes alone (no timing-based choice) and give the same bits on
    every run. ``enabled`` is accepted likewise (there is no cuDNN to turn off)."""

    __slots__ = ("benchmark", "deterministic", "enabled")
    conv = _FP32Precision("cuda", "conv", tf32_conv)

    def __init__(self):
        self.benchmark, self.deterministic, self.enabled = False, False, True

    @property
    def allow_tf32(self) -> bool:
        return tf32_conv.allow_tf32

    @allow_tf32.setter
    def allow_tf32(self, flag):
        tf32_conv.allow_tf32 = bool(flag)
        self.conv._record("tf32" if flag else "none")  # (what PyTorch's conv.fp32_precision then reads)

    @staticmethod
    def is_available() -> bool:
        return False

    @contextlib.contextmanager
    def flags(self, enabled=True, benchmark=False, deterministic=False, allow_tf32=True):
        saved = self._get()
        self._set(enabled, benchmark, deterministic, allow_tf32)
        try:
            yield
        finally:
            self._set(*saved)

    def _get(self):
        return self.enabled, self.benchmark, self.deterministic, self.allow_tf32

    def _set(self, enabled, benchmark, deterministic, allow_tf32):
        self.enabled, self.benchmark, self.deterministic = enabled, benchmark, deterministic
        self.allow_tf32 = allow_tf32

    def __repr__(self):
        return (f"backends.cudnn(allow_tf32={self.allow_tf32}, benchmark={self.benchmark}, "
                f"deterministic={self.deterministic})")


cudnn = _Cudnn()


# ---------------------------------------------------------------- torch.set_float32_matmul_precision and co.
_matmul_precision = ["highest"]


def set_float32_matmul_precision(precision):
    """``torch.set_float32_matmul_precision``: 'highest' computes float32 Linear / matmul GEMMs in float32,
    'high' and 'medium' on TF32 tensor cores (``backends.cuda.matmul.allow_tf32``; convolutions keep
    ``backends.cudnn.allow_tf32``)."""
    if precision not in ("highest", "high", "medium"):
        raise ValueError(f"set_float32_matmul_precision: expected 'highest', 'high' or 'medium', got {precision!r}")
    tf32_matmul.allow_tf32 = precision != "highest"
    _matmul_precision[0] = precision
    cuda.matmul._precision._record("ieee" if precision == "highest" else "tf32")


def get_float32_matmul_precision():
    if tf32_matmul.allow_tf32 == (_matmul_precision[0] != "highest"):
        return _matmul_precision[0]
    return "high" if tf32_matmul.allow_tf32 else "highest"  # the switch was flipped directly since


_deterministic = {"on": False, "warn_only": False}


def use_deterministic_algorithms(mode, *, warn_only=False):
    """``torch.use_deterministic_algorithms``. minifused's kernels already sum in fixed orders (no atomics);
    what can differ between two processes is a small GEMM's algorithm, chosen by timing its candidates
    (``kernels.cublaslt``): ``mode=True`` makes new GEMM plans take the heuristic's first choice instead (the
    same in every process), False restores the timing."""
    from .kernels import cublaslt

    if not isinstance(mode, bool) or not isinstance(warn_only, bool):
        raise TypeError(f"use_deterministic_algorithms: mode and warn_only must be bools, got {mode!r}, "
                        f"{warn_only!r}")
    cublaslt.DEFAULT_CONFIG = cublaslt.GemmConfig(small_gemm_flop=0) if mode else cublaslt.GemmConfig()
    _deterministic.update(on=mode, warn_only=warn_only)


def are_deterministic_algorithms_enabled():
    return _deterministic["on"]


def is_deterministic_algorithms_warn_only_enabled():
    return _deterministic["warn_only"]


# ---------------------------------------------------------------- torch.set_num_threads and co.
_threads = {"intra": None, "inter": None}


def _thread_count(op, n):
    if not isinstance(n, int) or isinstance(n, bool):
        raise InputTypeError(f"{op} expects an int, but got {type(n).__name__}")
    if n < 1:
        raise InputError(f"{op} expects a positive integer, got {n}")
    return n


def set_num_threads(n):
    """``torch.set_num_threads``, recorded for :func:`get_num_threads`: minifused's cpu ops are NumPy's, whose
    BLAS sets its thread count when it loads (``OMP_NUM_THREADS`` and the like), so the count changes nothing
    here."""
    _threads["intra"] = _thread_count("set_num_threads", n)


def get_num_threads():
    """The count :func:`set_num_threads` set, else the machine's CPUs that this process may use."""
    import os

    if _threads["intra"] is not None:
        return _threads["intra"]
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def set_num_interop_threads(n):
    """``torch.set_num_interop_threads``, recorded likewise (minifused runs no inter-op thread pool)."""
    _threads["inter"] = _thread_count("set_num_interop_threads", n)


def get_num_interop_threads():
    return _threads["inter"] or 1
