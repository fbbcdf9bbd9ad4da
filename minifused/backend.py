"""Devices, array modules and random generators.

A device is ``cpu`` (arrays are NumPy arrays) or ``cuda[:N]`` (CuPy arrays).
Everything below the ops layer works on raw arrays and picks its array module
with :func:`xp` / :func:`array_module`, so one code path serves both devices.
"""
from __future__ import annotations

import contextlib
import functools
import math
import numbers
import os
import threading
import warnings

import ml_dtypes
import numpy as np

from .dtypes import dtype as PublicDtype
from .dtypes import public as public_dtype  # noqa: F401 - a NumPy dtype as users see it

try:  # CuPy imports without a GPU; whether a device is usable is asked below.
    import cupy
except ImportError:  # pragma: no cover - cupy is a dependency, but keep cpu usable
    cupy = None

# ---------------------------------------------------------------- dtypes
# (NumPy's, inside minifused; users get them as minifused.dtype objects: see minifused.dtypes)
float16 = np.dtype(np.float16)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
int8 = np.dtype(np.int8)
uint8 = np.dtype(np.uint8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
bool_ = np.dtype(np.bool_)
FLOAT_DTYPES = (float16, bfloat16, float32, float64)
DTYPE_NAMES = {
    "float16": float16, "half": float16, "fp16": float16,
    "bfloat16": bfloat16, "bf16": bfloat16,
    "float32": float32, "float": float32, "fp32": float32,
    "float64": float64, "double": float64, "fp64": float64,
    "int8": int8, "uint8": uint8, "int16": int16, "int32": int32, "int": int32,
    "int64": int64, "long": int64, "bool": bool_,
}


class InputError(ValueError, RuntimeError):
    """Bad input to an op (a shape, a size, a value out of range): a ValueError, and the RuntimeError PyTorch
    raises for most such input, so code written against either catches it."""


class IndexInputError(InputError, IndexError):
    """An index out of range in an op's input (a class label, say): also the IndexError PyTorch's CPU kernels
    raise (its CUDA ones raise RuntimeError)."""


class InputTypeError(TypeError, RuntimeError):
    """An argument of the wrong type or dtype: a TypeError, and the RuntimeError PyTorch raises for a dtype an op
    does not implement, so code written against either catches it."""


class DtypeNotImplementedError(InputTypeError, NotImplementedError):
    """A dtype an op has no kernel for, where PyTorch raises NotImplementedError ("... not implemented for
    'Long'"): that, and still an InputTypeError."""


class NotImplementedInputError(InputError, NotImplementedError):
    """Input of a form an op does not implement (a padding mode, that many padded dimensions for that rank), where
    PyTorch raises NotImplementedError: that, and still an InputError."""


def is_dtype(obj) -> bool:
    """Whether ``obj`` is a dtype: NumPy's (inside minifused) or a user's :class:`minifused.dtype`."""
    return isinstance(obj, (np.dtype, PublicDtype))


def as_dtype(spec) -> np.dtype:
    """A NumPy dtype from a dtype (NumPy's or a :class:`minifused.dtype`), a scalar type or a name ('float32',
    'bf16', ...)."""
    if isinstance(spec, str):
        try:
            return DTYPE_NAMES[spec.lower()]
        except KeyError:
            raise TypeError(f"unknown dtype {spec!r}; expected one of {sorted(DTYPE_NAMES)}") from None
    return np.dtype(spec)


_FLOAT_SET = frozenset(FLOAT_DTYPES)


def is_floating(dtype) -> bool:
    """True for float16, bfloat16, float32 and float64 (NumPy does not count bfloat16)."""
    if type(dtype) is PublicDtype:
        return dtype.is_floating_point
    return (dtype if isinstance(dtype, np.dtype) else np.dtype(dtype)) in _FLOAT_SET


_default_dtype = [float32]


def set_default_dtype(dtype) -> None:
    """The dtype of floating results of creation ops given no dtype (``tensor([1.0])``, ``zeros``,
    ``randn`` ...), as PyTorch's: float32 unless set; only floating dtypes."""
    try:
        d = as_dtype(dtype)
    except TypeError:
        raise TypeError(f"set_default_dtype: expected a floating dtype, got {dtype!r}") from None
    if d not in (float16, bfloat16, float32, float64):
        raise TypeError(f"set_default_dtype: only floating-point types are supported as the default type, "
                        f"got {d}")
    _default_dtype[0] = d


def get_default_dtype() -> np.dtype:
    return _default_dtype[0]


# ---------------------------------------------------------------- TF32 switches
class TF32Switch:
    """Whether float32 math of one family may run on TF32 tensor cores (10-bit mantissa inputs,
    float32 accumulation). Read at each call, so flipping it takes effect on the next op."""

    __slots__ = ("allow_tf32",)

    def __init__(self, allow_tf32: bool = False):
        self.allow_tf32 = allow_tf32

    def __repr__(self):
        return f"TF32Switch(allow_tf32={self.allow_tf32})"


#: The one place the TF32 switches live (``minifused.backends`` spells them as PyTorch does:
#: ``backends.cuda.matmul.allow_tf32`` for Linear / matmul GEMMs, ``backends.cudnn.allow_tf32`` for
#: convolutions). Both default to full float32.
tf32_matmul = TF32Switch(False)
tf32_conv = TF32Switch(False)


# ---------------------------------------------------------------- devices
class Device:
    """An immutable device: ``Device('cpu')``, ``Device('cuda')``, ``Device('cuda:1')`` (``Device(1)``)."""

    __slots__ = ("type", "index")

    def __init__(self, spec="cpu", index=None):
        if isinstance(spec, Device):
            spec, index = spec.type, spec.index
        elif isinstance(spec, numbers.Integral) and not isinstance(spec, bool):  # PyTorch's: an index is the GPU's
            if spec < 0:
                raise InputError(f"Device index must not be negative, got {spec}")
            spec, index = "cuda", int(spec)
        kind, _, idx = str(spec).partition(":")
        if kind not in ("cpu", "cuda"):
            raise ValueError(f"unknown device {spec!r}; expected 'cpu', 'cuda' or 'cuda:N'")
        if idx:
            if not idx.isdigit():
                raise ValueError(f"bad device index in {spec!r}")
            index = int(idx)
        object.__setattr__(self, "type", kind)
        object.__setattr__(self, "index", (index or 0) if kind == "cuda" else None)

    def __setattr__(self, name, value):
        raise AttributeError("Device is immutable")

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = Device(other)
            except ValueError:
                return False
        return isinstance(other, Device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __enter__(self):
        """``with device('cuda'):`` makes this device the default of tensors made inside the block without
        ``device=`` (in this thread), as PyTorch's device context does; blocks nest."""
        _device_blocks.__dict__.setdefault("stack", []).append(device(self))
        return self

    def __exit__(self, *exc):
        _device_blocks.stack.pop()
        return False


CPU = Device("cpu")
_device_blocks = threading.local()  # the devices of the enclosing ``with device(...)`` blocks, innermost last


@functools.cache
def cuda_available() -> bool:
    """True when CuPy can see a CUDA device (the driver answers and there is a GPU)."""
    if cupy is None:
        return False
    try:
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def device(spec=None) -> Device:
    """The device for ``spec`` (None means the default device), checked to be usable."""
    if spec is None:
        return default_device()
    dev = spec if isinstance(spec, Device) else Device(spec)
    if dev.type == "cuda" and not cuda_available():
        raise RuntimeError(f"device {dev} requested but no usable CUDA device was found")
    return dev


@functools.cache
def _env_default_device() -> Device:
    choice = os.environ.get("MINIFUSED_DEVICE", "").strip()
    if choice:
        return device(choice)
    return Device("cuda") if cuda_available() else CPU


def default_device() -> Device:
    """The innermost ``with device(...)`` block's device, else ``cuda`` when a CUDA device is usable, else ``cpu``;
    ``MINIFUSED_DEVICE`` overrides the latter two."""
    stack = getattr(_device_blocks, "stack", None)
    return stack[-1] if stack else _env_default_device()


def xp(dev: Device):
    """The array module (numpy or cupy) for a device."""
    return np if dev.type == "cpu" else cupy


_CUDA_ARRAY = () if cupy is None else cupy.ndarray  # (isinstance of an empty tuple is False)


def is_cuda_array(array) -> bool:
    return isinstance(array, _CUDA_ARRAY)


def array_module(array):
    return cupy if is_cuda_array(array) else np


def scalar_overflows(v, dtype, checked_floats):
    """Whether the number ``v`` does not fit ``dtype``, by PyTorch's check of a scalar argument: an integer dtype
    takes floats within its range (not NaN) and ints within its range, an unsigned one also negative ints down to
    minus its largest value (they wrap); of the floating dtypes only those in ``checked_floats`` are checked (and
    infinity and NaN always fit); bool takes anything."""
    if dtype == bool_:
        return False
    if is_floating(dtype):
        return dtype in checked_floats and math.isfinite(v) and abs(float(v)) > float(ml_dtypes.finfo(dtype).max)
    if dtype.kind not in "iu":
        return False
    info = np.iinfo(dtype)
    if isinstance(v, float):
        return not info.min <= v <= info.max  # (NaN too)
    return v > info.max or v < (-info.max if dtype.kind == "u" else info.min)


def fit_number(op, value, dtype):
    """The Python number ``value`` as ``op`` writes it into ``dtype``: truncated toward zero for an integer dtype (a
    negative one wrapped into an unsigned one), True for any nonzero number in bool, as it is otherwise; PyTorch's
    error where it does not fit (an integer dtype's range or float32's; an int beyond 64 bits)."""
    if isinstance(value, int) and not -2 ** 63 <= value < 2 ** 64:
        raise InputError(f"{op}: int too big to convert: {value} (scalars hold at most 64 bits)")
    if isinstance(value, numbers.Real) and scalar_overflows(value, dtype, (float32,)):
        raise InputError(f"{op}: value cannot be converted to type {dtype} without overflow (got {value!r})")
    if dtype == bool_:
        return bool(value)
    if dtype.kind in "iu" and isinstance(value, numbers.Real):
        return int(value) % 2 ** (8 * dtype.itemsize) if value < 0 and dtype.kind == "u" else int(value)
    return value


def integer_fill(op, value, dtype):
    """A number that ``op`` (setitem, fill_, masked_fill, index_fill) writes into a tensor of integer or bool
    ``dtype`` (:func:`fit_number`): the number it writes, or PyTorch's error where it does not fit (NaN, infinity,
    beyond the dtype's range; NumPy would raise its own error or wrap it). A tensor, or any value for a floating
    dtype, is returned as it is."""
    if is_floating(dtype) or not isinstance(value, (numbers.Number, np.generic)):
        return value
    return fit_number(op, value.item() if isinstance(value, np.generic) else value, dtype)


def astype(array, dtype):
    """``array.astype(dtype)``, float64 into float16 through float32 as PyTorch converts it (its half type is
    made from a float: a double rounds twice, so 8.941406670208732 is 8.9375, not NumPy's 8.9453125)."""
    if dtype == np.float16 and array.dtype == np.float64:
        array = array.astype(np.float32)
    return array.astype(dtype)


def where(condition, a, b):
    """``xp.where(condition, a, b)`` on NumPy or CuPy arrays (``a`` or ``b`` may be a scalar). CuPy's where has no
    bfloat16 loop and would widen the result to float32: there, bfloat16 operands are selected as their 16-bit
    patterns (exact), a scalar first made a 0-d bfloat16 array. Mixed with a wider dtype, PyTorch's promotion
    widens too, and CuPy's where does the same."""
    if not (is_cuda_array(condition) or is_cuda_array(a) or is_cuda_array(b)):
        return np.where(condition, a, b)
    if not is_cuda_array(condition) and np.ndim(condition) == 0:  # a bool (CuPy's where calls its astype)
        condition = cupy.full((), bool(condition))
    if bfloat16 in (getattr(a, "dtype", None), getattr(b, "dtype", None)):
        bits_a, bits_b = _bf16_bits(a), _bf16_bits(b)
        if bits_a is not None and bits_b is not None:
            return cupy.where(condition, bits_a, bits_b).view(bfloat16)
    return cupy.where(condition, a, b)


def _bf16_bits(v):
    """``v`` (a bfloat16 array, or a scalar made one) as uint16 bits; None for an array of another dtype."""
    if hasattr(v, "shape") and not isinstance(v, np.generic):
        return v.view(np.uint16) if v.dtype == bfloat16 else None
    return cupy.full((), int(np.asarray(v, bfloat16).view(np.uint16)), np.uint16)  # (a fill: no host copy)


_ONE = {}  # (device, dtype) -> a device array holding 1, the source of ones_like's copies


def ones_like(array):
    """``xp.ones_like(array)``. On the GPU, for a one-element array (backward()'s seed gradient) outside
    a graph capture, a copy of a cached device one: CuPy's ``ones_like`` launches a fill kernel through
    its generic elementwise path, whose host time every training step would pay between the forward's
    last kernel and the backward's first."""
    if not is_cuda_array(array) or array.size != 1:
        return array_module(array).ones_like(array)
    stream = cupy.cuda.get_current_stream()
    if stream.is_capturing():  # a first one made here would exist only in the graph
        return cupy.ones_like(array)
    key = (cupy.cuda.runtime.getDevice(), array.dtype)
    one = _ONE.get(key)
    if one is None:
        one = _ONE[key] = cupy.ones((), array.dtype)
        stream.synchronize()  # so any stream may copy it from now on
    out = cupy.ndarray(array.shape, array.dtype)
    cupy.cuda.runtime.memcpyAsync(out.data.ptr, one.data.ptr, array.itemsize,
                                  cupy.cuda.runtime.memcpyDeviceToDevice, stream.ptr)
    return out


def copy(array):
    """A C-contiguous copy of ``array`` on its device. On the GPU an assignment into a new array, which
    runs at the device's copy bandwidth where CuPy's ``ndarray.copy()`` reaches well under half of it."""
    if not is_cuda_array(array):
        return array.copy()
    with array.device:
        out = cupy.empty(array.shape, array.dtype)
    out[...] = array
    return out


def same_device(a, b) -> bool:
    """Whether arrays ``a`` and ``b`` live on one device (cheap: no Device objects on the hot path)."""
    if type(a) is np.ndarray:
        return type(b) is np.ndarray
    if isinstance(a, _CUDA_ARRAY):
        return isinstance(b, _CUDA_ARRAY) and a.data.device_id == b.data.device_id
    return not is_cuda_array(b)


def device_of(array) -> Device:
    if is_cuda_array(array):
        return _cuda_device(array.device.id)
    return CPU


@functools.cache
def _cuda_device(index: int) -> Device:
    return Device("cuda", index)


class _Capture(threading.local):
    name = None


_capture = _Capture()


@contextlib.contextmanager
def capturing(name: str):
    """Marks a CUDA-graph capture in progress: host synchronizations raise inside it."""
    prev, _capture.name = _capture.name, name
    try:
        yield
    finally:
        _capture.name = prev


def is_capturing() -> bool:
    return _capture.name is not None


#: (device, stream address) of the streams ``capture_step`` warms its steps up and captures them on: the kernels'
#: plans made there are chosen for a graph's replays (cuBLASLt's candidates timed as captured graphs).
graph_streams = set()


def refuse_sync(what: str) -> None:
    """Raise if ``what`` (an op that waits for the device) runs inside a graph capture."""
    if _capture.name is not None:
        raise RuntimeError(
            f"{what} synchronizes the host with the GPU and cannot run inside a captured "
            f"step ({_capture.name}); return the tensor from the step and read it afterwards")


# ---------------------------------------------------------------- autocast regions
class _Autocast(threading.local):
    def __init__(self):
        self.dtypes = {}  # device type ('cuda', 'cpu') -> the lower-precision dtype of the region on it
        self.set_dtypes = {}  # device type -> the dtype the innermost region names, on or off (get_autocast_dtype)


_autocast = _Autocast()


def autocast_dtypes() -> dict:
    """The device types an autocast region (``minifused.autocast``) is on now, with its dtype each (the
    thread's own: the dict ``minifused.amp.autocast`` sets and restores)."""
    return _autocast.dtypes


def autocast_set_dtypes() -> dict:
    """The dtype the innermost autocast region of each device type names, whether it is on or off (a region
    with ``enabled=False`` sets it too, as PyTorch's): what ``get_autocast_dtype`` answers."""
    return _autocast.set_dtypes


# ---------------------------------------------------------------- debug mode, deferred checks
class _Debug(threading.local):
    on = os.environ.get("MINIFUSED_DEBUG", "") not in ("", "0")


_debug = _Debug()
_deferred = []


_warn_always = [False]
_warned = set()  # the keys warn_once has warned about


def set_warn_always(b, /):
    """``torch.set_warn_always``: when False (the default) the warnings PyTorch gives once per process (the
    deprecated ``frobenius_norm``, ``nuclear_norm`` ...) are given once; True gives them on every call."""
    if not isinstance(b, bool):
        raise RuntimeError(f"setWarnOnlyOnce expects a bool, but got {type(b).__name__}")
    _warn_always[0] = b


def is_warn_always_enabled():
    """Whether :func:`set_warn_always` turned the once-per-process warnings into every-call ones."""
    return _warn_always[0]


def warn_once(key, message, category=UserWarning, stacklevel=3):
    """Warn ``message`` the first time ``key`` comes (PyTorch's ``TORCH_WARN_ONCE``), or every time while
    :func:`set_warn_always` is on."""
    if _warn_always[0] or key not in _warned:
        _warned.add(key)
        warnings.warn(message, category, stacklevel=stacklevel)


def set_debug(flag: bool) -> None:
    """Debug mode (also ``MINIFUSED_DEBUG=1``): every op waits for its kernels and runs its
    device-side checks at once, so an error is raised by the op that caused it."""
    _debug.on = bool(flag)


def is_debug() -> bool:
    return _debug.on


def defer_check(check) -> None:
    """Run ``check()`` (which may read a device flag and raise) at the next host sync
    point (``Tensor.item()``) instead of syncing now; at once in debug mode."""
    if _debug.on:
        check()
    elif check not in _deferred:
        _deferred.append(check)


def run_deferred_checks() -> None:
    while _deferred:
        _deferred.pop()()


def to_device(array, dev: Device):
    """``array`` on ``dev`` (the same object when it is already there)."""
    if dev.type == "cpu":
        if is_cuda_array(array):
            refuse_sync("a device-to-host copy (.item(), .cpu(), .tolist(), printing)")
            return cupy.asnumpy(array)
        return np.asarray(array)
    if not is_cuda_array(array):
        refuse_sync("a host-to-device copy")
    with cupy.cuda.Device(dev.index):
        if is_cuda_array(array) and array.device.id == dev.index:
            return array
        return cupy.asarray(array)


def to_device_bits(array, dev: Device):
    """:func:`to_device` that carries bfloat16 over as its uint16 bits, so the copy never depends on
    the array libraries' bfloat16 support (the bytes moved are the same)."""
    if array.dtype == bfloat16:
        return to_device(array.view(np.uint16), dev).view(bfloat16)
    return to_device(array, dev)


def on_device(dev: Device):
    """Context manager making ``dev`` current for allocations (a no-op for cpu)."""
    if dev.type == "cuda":
        return cupy.cuda.Device(dev.index)
    return contextlib.nullcontext()


def synchronize():
    if cuda_available():
        cupy.cuda.get_current_stream().synchronize()


# ---------------------------------------------------------------- random numbers
class _Generators:
    """One NumPy Generator for cpu and one CuPy RandomState per CUDA device, seeded together."""

    def __init__(self, seed: int):
        self.seed = int(seed)
        self.cpu = np.random.Generator(np.random.PCG64(self.seed))
        self.cuda = {}

    def get(self, dev: Device):
        if dev.type == "cpu":
            return self.cpu
        if dev.index not in self.cuda:
            with cupy.cuda.Device(dev.index):
                self.cuda[dev.index] = cupy.random.RandomState(self.seed + dev.index)
        return self.cuda[dev.index]


_generators = _Generators(int.from_bytes(os.urandom(6), "little"))


def manual_seed(seed: int) -> None:
    """Seed the random numbers of every device (NumPy and CuPy) at once. ``seed`` is a 64-bit integer, signed or
    not, as PyTorch's: a negative one is taken as its two's complement."""
    global _generators
    if not -2 ** 63 <= seed < 2 ** 64:
        raise ValueError("Overflow when unpacking long long")
    _generators = _Generators(seed % 2 ** 64)


def initial_seed() -> int:
    return _generators.seed


def seed() -> int:
    """``torch.seed``: seed every device's random numbers from the operating system's entropy; returns the seed."""
    import os

    s = int.from_bytes(os.urandom(8), "little") >> 1  # (63 bits, as PyTorch's)
    manual_seed(s)
    return s


def generator(dev: Device, given=None, op="random"):
    """The random generator for ``dev``: ``numpy.random.Generator`` or ``cupy.random.RandomState``; ``given`` (an
    op's ``generator=`` argument, a cpu :class:`Generator`) instead where it is one for ``dev``."""
    if given is None:
        return _generators.get(dev)
    if not isinstance(given, np.random.Generator):
        raise TypeError(f"{op}: generator must be a minifused.Generator, got {type(given).__name__}")
    if dev.type != "cpu":
        raise RuntimeError(f"{op}: a cpu generator cannot draw on {dev}: minifused.Generator is for the cpu")
    return given


def kernel_seed() -> int:
    """A kernel's 63-bit seed from the cpu generator: the value of ``integers(0, 2**63)``, and the same one draw of
    its stream (a bounded draw of a power-of-two range is the raw word's top bits), at a fraction of its host time
    (every dropout call draws one)."""
    return _generators.get(CPU).bit_generator.random_raw() >> 1


class Generator(np.random.Generator):
    """``torch.Generator`` on the cpu: a NumPy generator (so DataLoader and random_split take it too) with
    PyTorch's seeding methods; random ops take it as ``generator=``. A new one starts from PyTorch's default
    seed, 67280421310721; ``get_state`` gives the bit generator's state (a dict), which ``set_state`` takes."""

    def __init__(self, device="cpu"):
        if Device(device).type != "cpu" if isinstance(device, str) else device.type != "cpu":
            raise NotImplementedError(f"Generator: only cpu generators are supported, got device {device!r}")
        self._seed = 67280421310721
        super().__init__(np.random.PCG64(self._seed))
        self.device = CPU

    def manual_seed(self, seed):
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
            raise TypeError(f"Generator.manual_seed: seed must be an int, got {seed!r}")
        self._seed = int(seed) & (2 ** 64 - 1)
        self.bit_generator.state = np.random.PCG64(self._seed).state
        return self

    def initial_seed(self):
        return self._seed

    def seed(self):
        self.manual_seed(int(np.random.SeedSequence().entropy) & (2 ** 63 - 1))
        return self._seed

    def get_state(self):
        return dict(self.bit_generator.state)

    def set_state(self, state):
        self.bit_generator.state = state
        return self


def get_rng_state() -> dict:
    """The CPU generator's state (JSON-able) and the seed; CUDA generators restart from the seed."""
    return {"seed": _generators.seed, "cpu": _generators.cpu.bit_generator.state}


def set_rng_state(state: dict) -> None:
    global _generators
    _generators = _Generators(state["seed"])
    _generators.cpu.bit_generator.state = state["cpu"]


def restore_cpu_rng_state(state: dict) -> None:
    """Put back the seed and the cpu generator's state from :func:`get_rng_state`, leaving the CUDA generators
    as they are (:func:`set_rng_state` restarts them from the seed): ``fork_rng`` restores the cpu so, and the
    CUDA devices it was asked to fork through their own states."""
    _generators.seed = int(state["seed"])
    _generators.cpu.bit_generator.state = state["cpu"]
