"""Mixed precision: low-precision parameters, fp32 master weights, dynamic loss scaling.

The recipe (``examples/mnist/train.py --dtype bf16|fp16`` follows it)::

    dtype = mf.bfloat16                                   # or mf.float16
    model = Net().to("cuda", dtype)                       # Linear / Conv2d on tensor cores
    opt = optim.AdamW(model.parameters(), lr=1e-3, master_weights=True)  # fp32 masters and state
    scaler = amp.GradScaler(enabled=dtype == mf.float16)  # bf16 has fp32's range: no scaling
    for x, y in loader:
        logits = model(x.to(dtype))                       # inputs in the model's dtype
        loss = F.cross_entropy(logits.float(), y)         # loss statistics in fp32
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)                                  # unscale, inf/NaN check, skip: on the device
        scaler.update()                                   # back off / grow the scale: on the device

What stays in fp32: the optimizer's master weights and moments (``master_weights=True``
on SGD / Adam / AdamW), the statistics of LayerNorm, softmax and cross-entropy (their
kernels accumulate in fp32 whatever the input dtype), and the loss when the logits are
cast with ``.float()`` as above. :func:`cast_model` converts the floating parameters and
buffers of a model.

``GradScaler`` keeps ``[scale, inv_scale, found_inf, growth_tracker]`` in one float32
array on the device: ``scale(loss)`` multiplies by it, ``step(opt)`` marks ``found_inf``
with one multi-tensor check of the gradients and runs the optimizer's fused update,
which multiplies the gradients by ``inv_scale`` and skips the whole step (weights,
moments, step counts) when ``found_inf`` is set; ``update()`` halves the scale after an
overflow and doubles it after ``growth_interval`` clean steps. Nothing reads the device
back, so all of it runs inside a captured step (``minifused.capture_step``); a skipped
step never writes NaN into the weights. ``get_scale()`` reads the scale (it synchronizes).
To clip gradients, ``scaler.unscale_(opt)`` first (PyTorch's recipe): it checks and unscales them in place,
and the ``step`` that follows does not unscale them again.
"""
from __future__ import annotations

import collections.abc
import functools
import math
import numbers
import threading
import warnings

import numpy as np

from . import backend
from .kernels import optim as K
from .tensor import Tensor

__all__ = ["GradScaler", "autocast", "cast_model", "custom_bwd", "custom_fwd", "get_autocast_dtype",
           "is_autocast_available", "is_autocast_enabled"]

_AUTOCAST_DEFAULTS = {"cuda": backend.float16, "cpu": backend.bfloat16}  # PyTorch's default dtypes


class autocast:  # noqa: N801 - PyTorch's name
    """``torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``, a context manager or a
    decorator: inside it, on tensors of ``device_type`` ('cuda': float16 by default, 'cpu': bfloat16),

    * linear, the convolutions, prelu, scaled_dot_product_attention, matmul / mm / bmm / addmm cast their
      floating inputs (weights and bias included) to ``dtype`` and compute in it;
    * cross_entropy, nll_loss and the other losses cast float16 / bfloat16 inputs up to float32 and give
      float32 (on 'cuda' binary_cross_entropy refuses to run, as PyTorch's does: use the logits form);
    * PyTorch's cpu and cuda lists differ, and each device follows its own: on 'cuda' softmax / log_softmax
      (unless given a dtype), layer_norm, group_norm, rms_norm, softplus, cosine_similarity and interpolate
      run in float32 too, on 'cpu' they keep the input's dtype; on 'cpu' the 3-d and fractional max pools,
      max_unpool, reflect (1-d, 2-d) and replicate padding, grid_sample, prod, quantile and the linalg
      factorizations and solvers (det and slogdet aside) run in float32; mv, addmv, addr and dist are cuda's only,
      einsum is lowered on 'cpu' where it contracts two operands (on 'cuda' always);
    * everything else runs in its inputs' dtypes, promoted as usual (float32 + bfloat16 is float32; batch_norm
      takes a low-precision input with float32 parameters as it is).

    The casts are recorded ops: float32 parameters get float32 gradients, and backward may run inside or
    outside the region. A weight is cast again at each use (``cache_enabled``, by default
    :func:`is_autocast_cache_enabled`, is set inside the region; it keeps no cache). Regions nest;
    ``enabled=False`` turns a region off inside another. The alternative this package's recipe uses (a
    bfloat16 model with float32 master weights, see above) casts each weight once per step.

    As PyTorch's, ``dtype`` defaults to :func:`get_autocast_dtype` (the enclosing region's), is checked only
    when enabled, and on 'cpu' a dtype other than bfloat16 / float16 turns the region off with a warning ('cuda'
    takes float32 too: its lower-precision ops then compute in float32)."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"autocast: expected `device_type` of type `str`, got: `{type(device_type).__name__}`")
        base, colon, index = device_type.partition(":")
        if colon and base in _AUTOCAST_DEFAULTS and index.isdigit():  # ('cuda:0', str(device): PyTorch's takes it)
            device_type = base
        if device_type not in _AUTOCAST_DEFAULTS:
            raise backend.InputError(f"autocast: device_type must be 'cuda' or 'cpu', got {device_type!r}")
        dtype = get_autocast_dtype(device_type) if dtype is None else backend.as_dtype(dtype)
        if not isinstance(enabled, bool):
            raise TypeError(f"autocast: enabled must be a bool, got {enabled!r}")
        if enabled and dtype not in (backend.float16, backend.bfloat16):
            if device_type == "cpu":
                warnings.warn(f"In CPU autocast, but the target dtype is not supported. Disabling autocast.\nCPU "
                              f"Autocast only supports dtypes of bfloat16, float16 currently (got "
                              f"{np.dtype(dtype).name}).", UserWarning, stacklevel=2)
                enabled = False
            elif dtype != backend.float32:
                raise ValueError(f"autocast: dtype must be float16, bfloat16 or float32 on 'cuda', got "
                                 f"{np.dtype(dtype).name}")
        self.device_type, self.dtype, self.enabled = device_type, dtype, enabled
        self.cache_enabled = is_autocast_cache_enabled() if cache_enabled is None else bool(cache_enabled)
        self._saved = []

    # PyTorch's attribute names
    fast_dtype = property(lambda self: self.dtype)
    device = property(lambda self: self.device_type)
    _enabled = property(lambda self: self.enabled)
    _cache_enabled = property(lambda self: self.cache_enabled)

    def __enter__(self):
        dtypes, named = backend.autocast_dtypes(), backend.autocast_set_dtypes()
        self._saved.append((dtypes.get(self.device_type), named.get(self.device_type), _cache.enabled))
        _cache.enabled = self.cache_enabled
        named[self.device_type] = self.dtype  # (get_autocast_dtype answers it, on or off, as PyTorch's)
        if self.enabled:
            dtypes[self.device_type] = self.dtype
        else:
            dtypes.pop(self.device_type, None)
        return self

    def __exit__(self, *exc):
        (prev, prev_named, _cache.enabled), device = self._saved.pop(), self.device_type
        for table, value in ((backend.autocast_dtypes(), prev), (backend.autocast_set_dtypes(), prev_named)):
            if value is None:
                table.pop(device, None)
            else:
                table[device] = value
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def in_region(*args, **kwargs):
            with autocast(self.device_type, self.dtype, self.enabled, self.cache_enabled):
                return fn(*args, **kwargs)
        return in_region


def is_autocast_enabled(device_type="cuda"):
    """Whether an autocast region is on for ``device_type`` here (``torch.is_autocast_enabled``; a string that
    names no device type raises, as PyTorch's)."""
    return _device_type("is_autocast_enabled", device_type) in backend.autocast_dtypes()


def get_autocast_dtype(device_type):
    """The dtype the innermost autocast region on ``device_type`` names, on or off (its default when there is
    none), as ``torch.get_autocast_dtype``."""
    if device_type not in _AUTOCAST_DEFAULTS:
        raise backend.InputError(f"get_autocast_dtype: device_type must be 'cuda' or 'cpu', got {device_type!r}")
    return backend.public_dtype(backend.autocast_set_dtypes().get(device_type, _AUTOCAST_DEFAULTS[device_type]))


# PyTorch's device types: is_autocast_available answers False for these (no autocast here) and raises for others
_TORCH_DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga",
                       "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")


def is_autocast_available(device_type):
    """Whether :class:`autocast` supports ``device_type`` ('cpu' and 'cuda' do, as in PyTorch, whether or not a
    GPU is present); an unknown device type raises RuntimeError, as PyTorch's."""
    return _device_type("is_autocast_available", device_type) in _AUTOCAST_DEFAULTS


class _Cache(threading.local):
    enabled = True  # torch.is_autocast_cache_enabled: the thread's own, set by each region (its cache_enabled)


_cache = _Cache()


def is_autocast_cache_enabled():
    """``torch.is_autocast_cache_enabled``: the flag a region's ``cache_enabled`` defaults to and sets inside it
    (this package casts a weight at each use: there is no cache, the flag is kept for code that reads it)."""
    return _cache.enabled


def set_autocast_cache_enabled(enabled):
    """``torch.set_autocast_cache_enabled``: sets the flag :func:`is_autocast_cache_enabled` answers."""
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be a bool (got {type(enabled).__name__})")
    _cache.enabled = enabled


def clear_autocast_cache():
    """``torch.clear_autocast_cache``: there is no cache of cast weights here, so nothing to clear."""


def _device_type(what, device_type):
    """The device type of ``device_type`` ('cuda:0' is 'cuda'); PyTorch's errors for a non-string and for a
    string that names no device type."""
    if not isinstance(device_type, str):
        raise TypeError(f"{what}(): argument 'device_type' must be str, not {type(device_type).__name__}")
    device = device_type.split(":")[0]
    if device not in _TORCH_DEVICE_TYPES:
        raise RuntimeError(f"{what}: expected one of {', '.join(_TORCH_DEVICE_TYPES)} device type at start of device "
                           f"string: {device_type}")
    return device


def _state_device(what, device_type):
    """:func:`_device_type` for the state functions: the device types other than 'cpu' and 'cuda' have no
    autocast here."""
    device = _device_type(what, device_type)
    if device not in _AUTOCAST_DEFAULTS:
        raise RuntimeError(f"{what}: autocast is only available for 'cpu' and 'cuda' here, got {device_type!r}")
    return device


def set_autocast_enabled(device_type=None, enabled=None):
    """``torch.set_autocast_enabled(device_type, enabled)`` (or ``(enabled)``: 'cuda'): turns autocast on or off
    for ``device_type`` with the dtype :func:`get_autocast_dtype` answers, outside any region too (a region
    restores the state it found when it exits). Only 'cpu' and 'cuda' can be turned on."""
    if enabled is None:
        device_type, enabled = "cuda", device_type
    elif device_type is None:
        device_type = "cuda"
    if not isinstance(enabled, bool):
        raise TypeError(f"set_autocast_enabled(): argument 'enabled' must be bool, not {type(enabled).__name__}")
    if not enabled and isinstance(device_type, str) and device_type.split(":")[0] in _TORCH_DEVICE_TYPES:
        backend.autocast_dtypes().pop(device_type.split(":")[0], None)  # (off: so it is on every device type)
        return
    device_type = _state_device("set_autocast_enabled", device_type)
    if enabled:
        backend.autocast_dtypes()[device_type] = backend.as_dtype(get_autocast_dtype(device_type))
    else:
        backend.autocast_dtypes().pop(device_type, None)


def set_autocast_dtype(device_type, dtype):
    """``torch.set_autocast_dtype``: the dtype :func:`get_autocast_dtype` answers for ``device_type``, which a
    region without a dtype takes and, while autocast is on there, the lower-precision ops compute in. A floating
    dtype (PyTorch takes any; a lower-precision op here casts to it)."""
    device_type = _state_device("set_autocast_dtype", device_type)
    if not backend.is_dtype(dtype) or not backend.is_floating(dtype):
        raise TypeError(f"set_autocast_dtype(): argument 'dtype' must be a floating dtype, got {dtype!r}")
    dtype = backend.as_dtype(dtype)  # (NumPy's inside)
    backend.autocast_set_dtypes()[device_type] = dtype
    if device_type in backend.autocast_dtypes():
        backend.autocast_dtypes()[device_type] = dtype


def _deprecated(old, new):
    warnings.warn(f"torch.{old} is deprecated. Please use torch.{new} instead.", DeprecationWarning, stacklevel=3)


def is_autocast_cpu_enabled():
    """``torch.is_autocast_cpu_enabled`` (deprecated, with PyTorch's warning): ``is_autocast_enabled('cpu')``."""
    _deprecated("is_autocast_cpu_enabled()", "is_autocast_enabled('cpu')")
    return is_autocast_enabled("cpu")


def set_autocast_cpu_enabled(enabled):
    """``torch.set_autocast_cpu_enabled`` (deprecated): ``set_autocast_enabled('cpu', enabled)``."""
    _deprecated("set_autocast_cpu_enabled(enabled)", "set_autocast_enabled('cpu', enabled)")
    set_autocast_enabled("cpu", enabled)


def get_autocast_cpu_dtype():
    """``torch.get_autocast_cpu_dtype`` (deprecated): ``get_autocast_dtype('cpu')``."""
    _deprecated("get_autocast_cpu_dtype()", "get_autocast_dtype('cpu')")
    return get_autocast_dtype("cpu")


def set_autocast_cpu_dtype(dtype):
    """``torch.set_autocast_cpu_dtype`` (deprecated): ``set_autocast_dtype('cpu', dtype)``."""
    _deprecated("set_autocast_cpu_dtype(dtype)", "set_autocast_dtype('cpu', dtype)")
    set_autocast_dtype("cpu", dtype)


def get_autocast_gpu_dtype():
    """``torch.get_autocast_gpu_dtype`` (deprecated): ``get_autocast_dtype('cuda')``."""
    _deprecated("get_autocast_gpu_dtype()", "get_autocast_dtype('cuda')")
    return get_autocast_dtype("cuda")


def set_autocast_gpu_dtype(dtype):
    """``torch.set_autocast_gpu_dtype`` (deprecated): ``set_autocast_dtype('cuda', dtype)``."""
    _deprecated("set_autocast_gpu_dtype(dtype)", "set_autocast_dtype('cuda', dtype)")
    set_autocast_dtype("cuda", dtype)


def _check_device_type(what, device_type):
    if not isinstance(device_type, str):
        raise ValueError(f"{what}: expected `device_type` of type `str`, got: `{type(device_type).__name__}`")
    if device_type not in _AUTOCAST_DEFAULTS:
        raise backend.InputError(f"{what}: device_type must be 'cuda' or 'cpu', got {device_type!r}")


def _cast_value(value, device_type, dtype):
    """``value`` with its floating arrays / tensors on ``device_type`` (float64 excepted) cast to ``dtype``,
    through tuples, lists and dicts, as PyTorch's ``custom_fwd`` casts (a Function's forward sees raw arrays)."""
    if isinstance(value, Tensor):
        ok = backend.is_floating(value.dtype) and value.dtype != np.float64 and value.device.type == device_type
        return value.to(dtype) if ok else value
    if isinstance(value, np.ndarray) or backend.is_cuda_array(value):
        on = "cuda" if backend.is_cuda_array(value) else "cpu"
        ok = backend.is_floating(value.dtype) and value.dtype != np.float64 and on == device_type
        return value.astype(dtype) if ok else value
    if isinstance(value, dict):
        return {k: _cast_value(v, device_type, dtype) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_cast_value(v, device_type, dtype) for v in value)
    return value


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """``torch.amp.custom_fwd``: decorates an ``autograd.Function``'s ``forward(ctx, ...)``. It records on ``ctx``
    the autocast state of ``device_type`` (for :func:`custom_bwd`); with ``cast_inputs`` (a dtype), inside an
    autocast region the forward runs with autocast off and its floating inputs on ``device_type`` cast to that
    dtype (outside a region nothing is cast). Usable bare-with-arguments: ``@custom_fwd(device_type='cuda')``."""
    _check_device_type("custom_fwd", device_type)
    dtype = None if cast_inputs is None else backend.as_dtype(cast_inputs)
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = get_autocast_dtype(device_type)
        enabled = is_autocast_enabled(device_type)
        if dtype is None:
            ctx._fwd_used_autocast = enabled
            return fwd(*args, **kwargs)
        ctx._fwd_used_autocast = False  # the forward ran with autocast off: so does the backward
        if not enabled:
            return fwd(*args, **kwargs)
        with autocast(device_type, enabled=False):
            return fwd(ctx, *_cast_value(args[1:], device_type, dtype), **_cast_value(kwargs, device_type, dtype))

    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """``torch.amp.custom_bwd``: decorates the matching ``backward(ctx, ...)`` so that it runs under the autocast
    state its forward (decorated with :func:`custom_fwd`) ran under."""
    _check_device_type("custom_bwd", device_type)
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        if not hasattr(ctx, "_fwd_used_autocast"):
            raise RuntimeError("custom_bwd: the backward's forward was not decorated with custom_fwd")
        with autocast(device_type, dtype=ctx._dtype, enabled=ctx._fwd_used_autocast):
            return bwd(*args, **kwargs)

    return decorate_bwd


def cast_model(model, dtype):
    """``model.to(dtype)`` for a floating ``dtype`` (float16 / bfloat16 / float32); returns the model."""
    dtype = backend.as_dtype(dtype)
    if not backend.is_floating(dtype):
        raise TypeError(f"amp.cast_model: expected a floating dtype, got {dtype}")
    return model.to(dtype=dtype)


def _check_scaler_args(what, scale, growth_factor, backoff_factor, growth_interval, tracker, scale_name="init_scale"):
    def real(v):
        return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)

    def count(v):
        return isinstance(v, numbers.Integral) and not isinstance(v, bool)

    if not real(scale) or scale <= 0:
        raise ValueError(f"{what}: {scale_name} must be a finite number > 0, got {scale!r}")
    if not real(growth_factor) or growth_factor <= 1:
        raise ValueError(f"{what}: growth_factor must be > 1, got {growth_factor!r}")
    if not real(backoff_factor) or not 0 < backoff_factor < 1:
        raise ValueError(f"{what}: backoff_factor must be in (0, 1), got {backoff_factor!r}")
    if not count(growth_interval) or growth_interval < 1:
        raise ValueError(f"{what}: growth_interval must be an int >= 1, got {growth_interval!r}")
    if not count(tracker) or not 0 <= tracker < growth_interval:
        raise ValueError(f"{what}: _growth_tracker must be an int in [0, growth_interval), got {tracker!r}")


class GradScaler:
    """Dynamic loss scaling for float16 training, PyTorch's ``torch.amp.GradScaler`` rules.

    ``enabled=False`` makes every method a pass-through (bf16 and fp32 training). ``device`` comes first, as in
    ``torch.amp.GradScaler("cuda")``: 'cuda' or 'cpu' (the state lives on the loss's device, whichever it is);
    ``minifused.cuda.amp.GradScaler`` is the same class without it, as ``torch.cuda.amp.GradScaler``.
    """

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if not (isinstance(device, str) and device.split(":")[0] in ("cuda", "cpu")):
            raise ValueError(f"GradScaler: device must be 'cuda' or 'cpu', got {device!r} (the scale is init_scale=)")
        _check_scaler_args("GradScaler", init_scale, growth_factor, backoff_factor, growth_interval, 0)
        self.enabled = bool(enabled)
        self.growth_factor, self.backoff_factor = float(growth_factor), float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self._init = (float(init_scale), 0)  # (scale, growth tracker) until the state exists
        self._state = None  # float32 [scale, inv_scale, found_inf, growth_tracker] on the loss's device
        self._stages = {}  # id(optimizer) -> "unscaled" / "stepped" since the last update(), as PyTorch's
        # id(optimizer) -> its own [scale, inv_scale, found_inf, -] (found_inf: in its gradients alone, so that
        # one optimizer's inf skips only its step, as PyTorch's; update() backs off on any)
        self._per_optimizer = {}

    # ------------------------------------------------------------ state
    def _state_on(self, device):
        if self._state is None:
            if backend.is_capturing():
                raise RuntimeError("GradScaler: its state is created by the first scale() call, which must run "
                                   "before capture (capture_step's eager warm-up does)")
            scale, tracker = self._init
            host = np.array([scale, 1.0 / scale, 0.0, tracker], np.float32)
            self._state = backend.to_device(host, device) if device.type == "cuda" else host
        elif backend.device_of(self._state) != device:
            raise RuntimeError(f"GradScaler: its state is on {backend.device_of(self._state)}, the loss on {device}")
        return self._state

    def get_scale(self) -> float:
        """The current scale (reads the device: a host synchronization)."""
        if not self.enabled:
            return 1.0
        if self._state is None:
            return self._init[0]
        return float(backend.to_device(self._state[0:1], backend.CPU)[0])

    # ------------------------------------------------------------ the three calls of a step
    def scale(self, loss: Tensor) -> Tensor:
        """``loss * scale`` (the scale is a device value: no host sync); lists and tuples of losses (nested too)
        give the same structure scaled, other iterables a lazy ``map``, as PyTorch's. Disabled: ``loss`` itself,
        whatever it is."""
        if not self.enabled:
            return loss
        if isinstance(loss, Tensor):
            state = self._state_on(loss.device)
            return loss * Tensor._from_array(state[0:1].reshape(()))
        if isinstance(loss, (list, tuple)):
            return type(loss)(self.scale(t) for t in loss)
        if isinstance(loss, collections.abc.Iterable) and not isinstance(loss, (str, bytes)):
            return map(self.scale, loss)
        raise TypeError(f"GradScaler.scale: expected the loss tensor, got {type(loss).__name__}")

    @staticmethod
    def _grads(optimizer):
        return [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]

    def _check_grads(self, optimizer, grads):
        """``optimizer``'s own state, its found_inf set from ``grads`` alone (and added to the scaler's), on the
        device: no host sync."""
        amp = self._per_optimizer.get(id(optimizer))
        if amp is None or backend.device_of(amp) != backend.device_of(self._state):
            amp = self._per_optimizer[id(optimizer)] = self._state.copy()
        amp[...] = self._state
        amp[2:3] = 0.0
        K.nonfinite([g._data for g in grads], amp)
        xp = backend.array_module(amp)
        xp.maximum(self._state[2:3], amp[2:3], out=self._state[2:3])
        return amp

    def unscale_(self, optimizer):
        """Divide ``optimizer``'s gradients by the scale in place (on the device, no host sync) and mark an
        inf/NaN among them, so that they can be clipped or inspected before ``step``, which then does not
        unscale them again. Once per optimizer between two ``update()`` calls, before its ``step``; float16
        gradients are refused, as PyTorch refuses them (unscaled in float16 they would underflow)."""
        if not self.enabled:
            return
        stage = self._stages.get(id(optimizer))
        if stage == "unscaled":
            raise RuntimeError("GradScaler.unscale_: unscale_() has already been called on this optimizer since "
                               "the last update()")
        if stage == "stepped":
            raise RuntimeError("GradScaler.unscale_: unscale_() is being called after step()")
        if self._state is None:
            raise RuntimeError("GradScaler.unscale_: call scale(loss) and backward() before unscale_()")
        grads = self._grads(optimizer)
        if any(g.dtype == backend.float16 for g in grads):
            raise ValueError("GradScaler.unscale_: attempting to unscale float16 gradients (the parameters of "
                             "a scaled step should be float32, e.g. under autocast)")
        amp = self._check_grads(optimizer, grads)
        inv_scale = self._state[1:2].reshape(())
        for g in grads:  # (in float32 for 16-bit gradients, rounded once, as PyTorch's unscale)
            g._data[...] = (g._data * inv_scale).astype(g._data.dtype, copy=False)
            g._bump("GradScaler.unscale_")
        amp[1:2] = 1.0  # the update's unscale: done
        self._stages[id(optimizer)] = "unscaled"

    def step(self, optimizer, *args, **kwargs):
        """Check ``optimizer``'s gradients for inf/NaN and unscale them in place (unless ``unscale_`` did),
        then run its update, which changes nothing when one was found. Float16 gradients (float16 parameters
        with fp32 master weights) are not unscaled in float16: the fused update unscales them as it reads them,
        so they stay scaled. ``args`` and ``kwargs`` go to ``optimizer.step``, whose result it returns; a
        ``closure=`` is refused, as PyTorch refuses it (it would recompute the gradients after their check). Once
        per optimizer between two ``update()`` calls."""
        if not self.enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("GradScaler.step: closure use is not supported while the GradScaler is enabled "
                               "(as PyTorch's)")
        if self._state is None:
            raise RuntimeError("GradScaler.step: call scale(loss) and backward() before step()")
        stage = self._stages.get(id(optimizer))
        if stage == "stepped":
            raise RuntimeError("GradScaler.step: step() has already been called since the last update()")
        fused = getattr(type(optimizer), "_supports_amp", False)
        grads = self._grads(optimizer)
        if stage == "unscaled":
            amp = self._per_optimizer[id(optimizer)]
        elif fused and any(g.dtype == backend.float16 for g in grads):
            amp = self._check_grads(optimizer, grads)  # (its inv_scale: the update unscales)
        else:
            self.unscale_(optimizer)
            amp = self._per_optimizer[id(optimizer)]
        if not fused:
            # no fused skip-on-inf update (another optimizer, a user's): PyTorch's way, the update run only if
            # this optimizer's gradients held no inf/NaN (reading the flag: a host sync)
            found = float(backend.to_device(amp[2:3], backend.CPU)[0])
            out = None if found else optimizer.step(*args, **kwargs)
            self._stages[id(optimizer)] = "stepped"
            return out
        optimizer._amp = amp
        try:
            out = optimizer.step(*args, **kwargs)
        finally:
            optimizer._amp = None
        self._stages[id(optimizer)] = "stepped"
        return out

    def update(self, new_scale=None):
        """Back off the scale after a found inf/NaN, grow it after ``growth_interval`` clean steps;
        clears the found flag for the next step. Call once per iteration, after ``step``. ``new_scale`` (a
        number, or a one-element float32 tensor) sets the scale instead, as PyTorch's. As PyTorch's, it needs
        ``scale()`` first, and (without ``new_scale``) a ``step`` or ``unscale_`` since the last update: one with
        no gradients checked would count as a clean step."""
        if not self.enabled:
            return
        if self._state is None:
            raise RuntimeError("GradScaler.update: no scale() call yet: call scale(loss) and backward() (and step) "
                               "before update()")
        if new_scale is None and not self._stages:
            raise RuntimeError("GradScaler.update: no inf checks were recorded since the last update(): call "
                               "step(optimizer) (or unscale_) before update()")
        self._stages.clear()
        if new_scale is None:
            K.scaler_update(self._state, self.growth_factor, self.backoff_factor, self.growth_interval)
            return
        if isinstance(new_scale, Tensor):
            if new_scale.numel() != 1 or new_scale.dtype != backend.float32:
                raise ValueError(f"GradScaler.update: new_scale must be a one-element float32 tensor, got shape "
                                 f"{tuple(new_scale.shape)}, dtype {new_scale.dtype}")
            self._state[0:1] = backend.to_device(new_scale._data, backend.device_of(self._state)).reshape(1)
        else:
            _check_scaler_args("GradScaler.update", new_scale, self.growth_factor, self.backoff_factor,
                               self.growth_interval, 0, scale_name="new_scale")
            self._state[0:1] = float(new_scale)
        xp = backend.array_module(self._state)
        self._state[1:2] = xp.float32(1.0) / self._state[0:1]
        self._state[2:3] = 0.0

    # ------------------------------------------------------------ PyTorch's accessors
    def is_enabled(self) -> bool:
        return self.enabled

    def get_growth_factor(self) -> float:
        return self.growth_factor

    def set_growth_factor(self, new_factor):
        _check_scaler_args("GradScaler.set_growth_factor", 1.0, new_factor, self.backoff_factor,
                           self.growth_interval, 0)
        self.growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        return self.backoff_factor

    def set_backoff_factor(self, new_factor):
        _check_scaler_args("GradScaler.set_backoff_factor", 1.0, self.growth_factor, new_factor,
                           self.growth_interval, 0)
        self.backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        return self.growth_interval

    def set_growth_interval(self, new_interval):
        _check_scaler_args("GradScaler.set_growth_interval", 1.0, self.growth_factor, self.backoff_factor,
                           new_interval, 0)
        self.growth_interval = int(new_interval)

    # ------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        if not self.enabled:
            return {}
        if self._state is None:
            scale, tracker = self._init
        else:
            host = backend.to_device(self._state, backend.CPU)
            scale, tracker = float(host[0]), int(host[3])
        return {"scale": scale, "growth_factor": self.growth_factor, "backoff_factor": self.backoff_factor,
                "growth_interval": self.growth_interval, "_growth_tracker": tracker}

    def load_state_dict(self, state: dict):
        """Every value is checked (the rules of ``__init__``) before any is applied; disabled, it does nothing, as
        PyTorch's."""
        if not self.enabled:
            return
        what = "GradScaler.load_state_dict"
        keys = {"scale", "growth_factor", "backoff_factor", "growth_interval"}
        if not isinstance(state, dict) or (state and not keys <= set(state)):
            raise ValueError(f"{what}: expected a dict from GradScaler.state_dict() with keys {sorted(keys)}, got "
                             f"{sorted(state) if isinstance(state, dict) else type(state).__name__}")
        if not state:
            return
        tracker = state.get("_growth_tracker", 0)
        _check_scaler_args(what, state["scale"], state["growth_factor"], state["backoff_factor"],
                           state["growth_interval"], tracker, scale_name="scale")
        self.growth_factor = float(state["growth_factor"])
        self.backoff_factor = float(state["backoff_factor"])
        self.growth_interval = int(state["growth_interval"])
        self._init = (float(state["scale"]), int(tracker))
        if self._state is not None:
            device = backend.device_of(self._state)
            self._state = None
            self._state_on(device)
