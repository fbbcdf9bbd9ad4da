"""minifused: a small deep-learning framework on fused GPU primitives.

``cpu`` tensors are NumPy arrays, ``cuda`` tensors CuPy arrays; the same code
runs on both. See README.md.
"""
from . import backend
from . import backends  # the TF32 switches, spelled as torch.backends
from .backends import (are_deterministic_algorithms_enabled, get_float32_matmul_precision,  # noqa: F401
                       get_num_interop_threads, get_num_threads, is_deterministic_algorithms_warn_only_enabled,
                       set_float32_matmul_precision, set_num_interop_threads, set_num_threads,
                       use_deterministic_algorithms)
from .autograd import (Function, detect_anomaly, enable_grad, inference_mode, is_grad_enabled, no_grad,
                       set_grad_enabled)
from .backend import (Device, cuda_available, default_device, get_rng_state, initial_seed, seed, set_debug,
                      set_default_dtype, set_rng_state)
from .dtypes import dtype  # torch.dtype: isinstance(minifused.float32, minifused.dtype)
from .dtypes import public as _public_dtype

float16, bfloat16, float32, float64 = (_public_dtype(d) for d in backend.FLOAT_DTYPES)
int8, uint8, int16, int32, int64, bool_ = (_public_dtype(d) for d in (backend.int8, backend.uint8, backend.int16,
                                                                      backend.int32, backend.int64, backend.bool_))


def get_default_dtype():
    """The dtype of floating results of creation ops given none (``torch.get_default_dtype``)."""
    return _public_dtype(backend.get_default_dtype())


from .backend import Device as device  # noqa: N813 - minifused.device('cuda') as in PyTorch
from .tensor import Tensor, set_printoptions
from .backend import Generator  # noqa: E402 - torch.Generator (cpu)
from . import ops
from .ops import *  # noqa: F401,F403 - tensor creation and the tensor ops at top level
from .ops import abs, max, min, pow, sum  # noqa: A004,F401
from .ops.shape import channels_last, channels_last_3d, contiguous_format, memory_format, preserve_format  # noqa: F401
from . import functional
from . import special  # noqa: E402 - torch.special
from . import fft  # noqa: E402 - torch.fft
from .fft import stft  # noqa: E402,F401 - torch.stft
from . import testing
from .graphs import CapturedStep, capture_step, compile  # noqa: A004 - torch.compile, accepted
from . import amp  # noqa: E402 - mixed precision: GradScaler, autocast, the master-weights recipe
from .amp import autocast, get_autocast_dtype, is_autocast_enabled  # noqa: E402,F401 - torch.autocast
from .amp import (clear_autocast_cache, get_autocast_cpu_dtype, get_autocast_gpu_dtype,  # noqa: E402,F401
                  is_autocast_cache_enabled, is_autocast_cpu_enabled, set_autocast_cache_enabled,
                  set_autocast_cpu_dtype, set_autocast_cpu_enabled, set_autocast_dtype, set_autocast_enabled,
                  set_autocast_gpu_dtype)  # PyTorch's autocast state functions
from .serialization import load, save  # noqa: E402
from .toplevel import *  # noqa: E402,F401,F403,A004 - PyTorch's other top-level spellings (constants, x_ forms...)
from . import serialization  # noqa: E402

# PyTorch's namespaces, reachable after `import minifused` alone, as after `import torch`.
import sys as _sys  # noqa: E402

from . import accelerator, cuda, data, nn, optim, utils  # noqa: E402
from . import distributed  # noqa: E402 - torch.distributed (it also gives nn.parallel its DistributedDataParallel)
from . import func  # noqa: E402 - torch.func: functional_call
from .func import vmap  # noqa: E402,F401 - torch.vmap is torch.func.vmap
from . import cpu, random  # noqa: E402 - torch.cpu (device-agnostic code's cpu module), torch.random (fork_rng)
from .random import manual_seed  # noqa: E402,F401 - torch.manual_seed returns torch.default_generator
from . import jit  # noqa: E402 - torch.jit's decorators and queries (no TorchScript: script/trace refuse)
from . import compiler  # noqa: E402 - torch.compiler's queries (False) and decorators (the function as it is)
from . import distributions  # noqa: E402 - torch.distributions
from . import multiprocessing  # noqa: E402 - torch.multiprocessing: Python's, with PyTorch's spawn
from . import profiler  # noqa: E402 - torch.profiler: record_function, profile, schedule (host-timed)
from .graphed import make_graphed_callables as _make_graphed_callables  # noqa: E402

cuda.make_graphed_callables = _make_graphed_callables  # (above nn and cuda: graphed modules)
from .nn import init as _init, utils as _nn_utils  # noqa: E402,F401 - minifused.nn.init / .utils
from .optim import lr_scheduler as _lr_scheduler  # noqa: E402,F401

# minifused.nn.functional is minifused.functional (one module object), also for
# `import minifused.nn.functional as F`.
nn.functional = functional
_sys.modules.setdefault(__name__ + ".nn.functional", functional)

# softmax at the top level and as a Tensor method, through the functional form (where its arguments are
# checked): the one place above the functional layer that gives Tensor a method.
# There the third positional argument is dtype (the functional forms': _stacklevel).


def softmax(input, dim=None, dtype=None):
    return functional.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim=None, dtype=None):
    return functional.log_softmax(input, dim, dtype=dtype)


cosine_similarity, pairwise_distance = functional.cosine_similarity, functional.pairwise_distance
Tensor.softmax, Tensor.log_softmax = softmax, log_softmax
clip = clamp  # (the top-level clamp: out= too)
from .tensor import Size  # noqa: E402 - torch.Size: what .shape and .size() return


class finfo:  # noqa: N801 - torch.finfo
    """Machine limits of a floating dtype, as ``torch.finfo`` (bfloat16 too): ``bits`` an int; ``eps``, ``max``,
    ``min``, ``tiny`` (= ``smallest_normal``) and ``resolution`` Python floats, as PyTorch's (a NumPy float16 scalar
    would overflow in arithmetic: ``finfo(float16).max + 100``); ``dtype`` the dtype's name."""

    def __init__(self, dtype=None):
        import builtins

        import ml_dtypes

        dtype = get_default_dtype() if dtype is None else backend.as_dtype(dtype)
        if not backend.is_floating(dtype):
            raise TypeError(f"finfo() requires a floating point dtype, got {dtype}; use minifused.iinfo for integer "
                            f"dtypes")
        info, to_float = ml_dtypes.finfo(dtype), builtins.float  # (this module's float is minifused.float32)
        self.bits = builtins.int(info.bits)
        self.eps, self.max, self.min = to_float(info.eps), to_float(info.max), to_float(info.min)
        self.tiny = self.smallest_normal = to_float(info.smallest_normal)
        self.resolution = 10.0 ** -builtins.int(info.precision)
        self.dtype = dtype.name

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


def iinfo(dtype):
    """Limits of an integer dtype, as ``torch.iinfo``."""
    import numpy

    return numpy.iinfo(backend.as_dtype(dtype))


bool = bool_  # noqa: A001 - minifused.bool as in PyTorch
float = float32  # noqa: A001
half = float16
double = float64
long = int64
int = int32  # noqa: A001 - torch.int is int32

from .toplevel.version import __version__  # noqa: E402 - one place for it (torch.version has it too)

# PyTorch's module paths (torch.nn.modules.loss, torch.utils.data.sampler, torch.backends.cudnn ...) under this name
from .module_paths import register_all as _register_module_paths  # noqa: E402

_register_module_paths()
