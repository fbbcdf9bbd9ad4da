"""``torch.random``: the global generators' seeding and state (the functions ``minifused.manual_seed`` and
co. are) and :func:`fork_rng`."""
from __future__ import annotations

import contextlib
import warnings

from . import backend
from .amp import _TORCH_DEVICE_TYPES
from .backend import get_rng_state, initial_seed, seed, set_rng_state
from .toplevel.runtime import default_generator  # (torch.random.default_generator is torch's)

__all__ = ["default_generator", "set_rng_state", "get_rng_state", "manual_seed", "seed", "initial_seed", "fork_rng",
           "thread_safe_generator"]

_warned = [False]


def manual_seed(seed):
    """``torch.manual_seed``: seed the cpu generator and the CUDA ones (minifused seeds every device from one seed)
    and return the default cpu generator, so ``generator=manual_seed(0)`` reads as in PyTorch. ``seed`` goes
    through ``int()`` first, as PyTorch's does (3.7 and "3" seed 3)."""
    return default_generator.manual_seed(int(seed))


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices", device_type=None):
    """``torch.random.fork_rng``: on exit, the cpu generator (its state and seed) and those of ``devices`` (CUDA
    device indices; all of them when None, with PyTorch's warning past one device) are put back as they were on
    entry, so the random numbers drawn inside leave no trace. ``enabled=False`` forks nothing. ``device_type``
    None means the current accelerator ('cuda' when there is none, as PyTorch's: then no device, so the cpu
    alone); PyTorch's other device types have no devices here (the cpu alone); 'meta' forks nothing. A CUDA state
    is taken as ``minifused.cuda.get_rng_state`` takes it (see :mod:`minifused.cuda_info`: taking it moves the
    device's stream to a seed drawn from it, so draws inside the block differ from draws made without the fork,
    but repeat after it)."""
    from . import accelerator, cuda

    if device_type == "meta":
        yield
        return
    if device_type is None:
        current = accelerator.current_accelerator()
        device_type = current.type if current is not None else "cuda"
    if device_type not in _TORCH_DEVICE_TYPES:
        raise RuntimeError(f"{_caller}: expected one of {', '.join(_TORCH_DEVICE_TYPES)} device type, got "
                           f"{device_type!r}")
    if not enabled:
        yield
        return
    if devices is None:
        count = cuda.device_count() if device_type == "cuda" else 0  # (no device of another type here)
        if count > 1 and not _warned[0]:
            warnings.warn(f"CUDA reports that you have {count} available devices, and you have used {_caller} "
                          f"without explicitly specifying which devices are being used. For safety, we initialize "
                          f"*every* CUDA device by default, which can be quite slow if you have a lot of CUDAs. If "
                          f"you know that you are only making use of a few CUDA devices, set the environment "
                          f"variable CUDA_VISIBLE_DEVICES or the '{_devices_kw}' keyword argument of {_caller} with "
                          f"the set of devices you are actually using.", stacklevel=3)
            _warned[0] = True
        devices = list(range(count))
    else:
        devices = list(devices)  # (a generator would be spent by the first pass)
        if devices and device_type != "cuda":
            raise RuntimeError(f"{_caller}: minifused has no {device_type} devices to fork; pass {_devices_kw}=[] "
                               f"(the cpu generator is always forked)")
    cpu_state = get_rng_state()
    device_states = [cuda.get_rng_state(d) for d in devices]
    try:
        yield
    finally:
        backend.restore_cpu_rng_state(cpu_state)
        for d, state in zip(devices, device_states):
            cuda.set_rng_state(state, d)


def thread_safe_generator():
    """``torch.random.thread_safe_generator``: a DataLoader thread worker's own generator there, else None (the
    global one). minifused's DataLoader loads in the calling thread, with no workers, so it is always None."""
    return None
