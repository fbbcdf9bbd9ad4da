"""Lazy modules, as PyTorch's: ``LazyLinear``, ``LazyConv1d/2d/3d``, ``LazyConvTranspose1d/2d/3d``,
``LazyBatchNorm1d/2d/3d`` and ``LazyInstanceNorm1d/2d/3d`` infer their input size from the first input, then
initialize as the non-lazy module does and become it. Also the markers ``UninitializedParameter``,
``UninitializedBuffer`` and ``Buffer`` (a tensor that registers as a buffer when assigned to a module)."""
from __future__ import annotations

import numpy as np

from .. import backend
from ..autograd import no_grad
from ..tensor import Tensor
from .conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d
from .linear import Linear
from .module import Parameter, RemovableHandle
from .norm import BatchNorm1d, BatchNorm2d, BatchNorm3d, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .volume import Conv3d, ConvTranspose3d
from ..backend import InputError, InputTypeError

__all__ = ["Buffer", "UninitializedParameter", "UninitializedBuffer", "LazyModuleMixin", "LazyLinear",
           "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
           "LazyConvTranspose3d", "LazyBatchNorm1d",
           "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d",
           "is_lazy"]


def _placeholder(device, dtype):
    """An empty array on ``device`` of ``dtype``: where an uninitialized tensor keeps its device and dtype (so
    ``Module.to`` moves and casts it like any other)."""
    dev = backend.device(device)
    dt = backend.get_default_dtype() if dtype is None else backend.as_dtype(dtype)
    with backend.on_device(dev):
        return backend.xp(dev).empty(0, dtype=dt)


class Buffer(Tensor):
    """A tensor that registers itself as a buffer when assigned to a module attribute (``self.x = nn.Buffer(t)``);
    ``persistent=False`` keeps it out of the state dict. It shares ``data``'s memory, as PyTorch's."""

    __slots__ = ("persistent",)
    _is_buffer = True  # what Module.__setattr__ looks for

    def __init__(self, data=None, *, persistent=True):
        src = data if isinstance(data, Tensor) else Tensor(np.empty(0, backend.float32) if data is None else data)
        super().__init__(src._data, requires_grad=src.requires_grad)
        self._vc = src._vc  # as detach(): in-place changes through either are seen by both
        self.persistent = bool(persistent)


class _Uninitialized:
    """What ``UninitializedParameter`` and ``UninitializedBuffer`` share: a device and a dtype but no shape yet;
    ``materialize(shape)`` gives them one (in place: the module, an optimizer and a state dict holding the object
    see the real tensor)."""

    __slots__ = ()
    _uninitialized = True  # what Module's state-dict code looks for
    cls_to_become: type = Tensor

    def materialize(self, shape, device=None, dtype=None):
        """Become ``cls_to_become`` with ``shape`` (on ``device`` / of ``dtype``, by default this one's), zero-filled
        (the lazy module initializes it next, or a state dict is copied in)."""
        dev = self.device if device is None else backend.device(device)
        dt = self.dtype if dtype is None else backend.as_dtype(dtype)
        with backend.on_device(dev):
            self._data = backend.xp(dev).zeros(tuple(int(s) for s in shape), dtype=dt)
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError(f"Can't access the shape of an uninitialized parameter or buffer ({type(self).__name__}): "
                           "run a forward with a sample batch, or load a state dict, first")

    def _refuse(self, what):
        raise InputError(f"Attempted to use an uninitialized parameter in {what}: call the lazy module with a "
                         f"sample batch (or load a state dict) to initialize its parameters first")

    def size(self, dim=None):
        self._refuse("size()")

    def dim(self):
        self._refuse("dim()")

    def numel(self):
        self._refuse("numel()")

    def detach(self):
        self._refuse("detach()")

    def __repr__(self):
        return f"<{type(self).__name__}>"


class UninitializedParameter(_Uninitialized, Parameter):
    """A parameter whose shape is not known yet (a lazy module's, until its first forward)."""

    __slots__ = ()
    cls_to_become = Parameter

    def __init__(self, requires_grad=True, device=None, dtype=None):
        super().__init__(_placeholder(device, dtype), requires_grad=requires_grad)


class UninitializedBuffer(_Uninitialized, Buffer):
    """A buffer whose shape is not known yet (a lazy norm's running statistics, until its first forward). It
    becomes a ``Buffer`` (PyTorch's becomes a plain tensor, still an ``nn.Buffer`` by ``isinstance``)."""

    __slots__ = ()
    cls_to_become = Buffer

    def __init__(self, requires_grad=False, device=None, dtype=None, persistent=True):
        super().__init__(Tensor._from_array(_placeholder(device, dtype)).requires_grad_(requires_grad),
                         persistent=persistent)


def is_lazy(value):
    """Whether ``value`` is an ``UninitializedParameter`` or an ``UninitializedBuffer``."""
    return isinstance(value, _Uninitialized)


class LazyModuleMixin:
    """Mixin of lazy modules: until the first call, parameters (and buffers) are uninitialized; the first call
    runs ``initialize_parameters(*args, **kwargs)`` (from a forward pre-hook), then the module becomes
    ``cls_to_become``. A state dict loaded before that materializes them with the loaded shapes."""

    cls_to_become: type | None = None
    _lazy_ready = False  # False while the non-lazy __init__ runs: its reset_parameters must draw nothing

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # a pre-hook also keeps Sequential from fusing the layer (it fuses only hook-free layers) until it is real
        handle = self.register_forward_pre_hook(self._infer_parameters, with_kwargs=True)
        self._lazy_hook_id = handle.id  # an id, not the handle: a deepcopy's handle would point at the original
        self._lazy_ready = True

    def _make_lazy(self, *buffers):
        """Swap the parameters (and the named buffers) the non-lazy __init__ made for uninitialized ones."""
        for name, p in self._parameters.items():
            if p is not None:
                self._parameters[name] = UninitializedParameter(p.requires_grad, p.device, p.dtype)
        for name in buffers:
            b = self._buffers.get(name)
            if b is not None:
                self._buffers[name] = UninitializedBuffer(False, b.device, b.dtype)

    def has_uninitialized_params(self):
        """Whether any parameter or buffer of this module (not its children) is still uninitialized."""
        return any(is_lazy(v) for v in (*self._parameters.values(), *self._buffers.values()))

    def initialize_parameters(self, *args, **kwargs):
        """Infer the input size from the call's arguments and initialize the parameters (each lazy class)."""
        raise NotImplementedError(f"initialize_parameters is not implemented for {type(self).__name__}")

    def reset_parameters(self):
        if self._lazy_ready and not self.has_uninitialized_params() and self._lazy_size() != 0:
            super().reset_parameters()

    def _infer_parameters(self, module, args, kwargs):
        module.initialize_parameters(*args, **kwargs)
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {type(module).__name__} has not been fully initialized")
        handle = RemovableHandle(module, "pre")
        handle.id = module.__dict__.pop("_lazy_hook_id")
        handle.remove()
        module.__dict__.pop("_lazy_ready", None)
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become

    # ---- what each lazy class says about its sizes
    _size_name = ""  # the attribute the first input sets: in_features, in_channels, num_features

    def _lazy_size(self):
        return getattr(self, self._size_name)

    def _shapes(self, size):
        """Each parameter's and buffer's shape (by name) for input size ``size``."""
        raise NotImplementedError

    def _size_from(self, name, shape):
        """The input size that gives entry ``name`` ``shape`` (None: it does not say)."""
        raise NotImplementedError

    def _materialize(self, size):
        """Set the input size to ``size``, give every uninitialized entry its shape, initialize as the non-lazy
        module does (with ``reset_parameters``, in the same order, so the same random numbers)."""
        setattr(self, self._size_name, int(size))
        shapes = self._shapes(int(size))
        with no_grad():
            for table in (self._parameters, self._buffers):
                for name, v in table.items():
                    if is_lazy(v):
                        v.materialize(shapes[name])
            self.reset_parameters()

    def _lazy_load(self, state_dict, prefix):
        """``load_state_dict``'s step for this module, before its checks: uninitialized entries that the state dict
        holds as real tensors take their shapes (when those fit this module's other sizes). Returns the problems."""
        if not self.has_uninitialized_params():
            return []
        loaded = {}
        for table in (self._parameters, self._buffers):
            for name, v in table.items():
                value = state_dict.get(prefix + name)
                if is_lazy(v) and value is not None and not is_lazy(value) and hasattr(value, "shape"):
                    loaded[name] = tuple(int(s) for s in value.shape)
        if not loaded:
            return []
        name, shape = next(iter(loaded.items()))
        size = self._size_from(name, shape)
        shapes = {} if size is None else self._shapes(size)
        bad = [name] if size is None else [n for n, s in loaded.items() if shapes[n] != s]
        if bad:
            return [f"{prefix + n}: shape {loaded[n]} in the state dict does not fit {type(self).__name__} (expected "
                    + (f"{shapes[n]})" if n in shapes else f"a shape that gives {self._size_name})") for n in bad]
        setattr(self, self._size_name, size)
        for table in (self._parameters, self._buffers):
            for n, v in table.items():
                if n in loaded:
                    v.materialize(loaded[n])
        return []

def _tensor_arg(module, input):
    if not isinstance(input, Tensor):
        raise InputTypeError(f"{type(module).__name__}: expected a tensor input, got {type(input).__name__}")
    return input


def _done(module):
    """Whether the parameters are already real (loaded from a state dict): then only the size is filled in."""
    return not module.has_uninitialized_params()


class LazyLinear(LazyModuleMixin, Linear):
    """``Linear`` whose ``in_features`` is the first input's last dimension."""

    cls_to_become = Linear
    _size_name = "in_features"

    def __init__(self, out_features, bias=True, device=None, dtype=None, activation=None):
        super().__init__(0, out_features, bias, device, dtype, activation)
        self._make_lazy()

    def _shapes(self, size):
        return {"weight": (self.out_features, size), "bias": (self.out_features,)}

    def _size_from(self, name, shape):
        return shape[1] if name == "weight" and len(shape) == 2 else None

    def initialize_parameters(self, input, *args, **kwargs):
        input = _tensor_arg(self, input)
        if input.ndim < 1:
            raise IndexError("LazyLinear: expected an input with at least 1 dimension (its last is in_features), "
                             "got a 0-d tensor")
        if not _done(self):
            self._materialize(input.shape[-1])
        elif self.in_features == 0:
            self.in_features = self.weight.shape[1]


class _LazyConv(LazyModuleMixin):
    """The lazy convolutions: ``in_channels`` is the input's dimension 1 (0 when unbatched)."""

    _size_name = "in_channels"
    _spatial = 1
    _transposed = False

    def _shapes(self, size):
        g, out, k = self.groups, self.out_channels, self.kernel_size
        weight = (size, out // g, *k) if self._transposed else (out, size // g, *k)
        return {"weight": weight, "bias": (out,)}

    def _size_from(self, name, shape):
        if name != "weight" or len(shape) != 2 + self._spatial:
            return None
        return shape[0] if self._transposed else shape[1] * self.groups

    def initialize_parameters(self, input, *args, **kwargs):
        input, name, spatial = _tensor_arg(self, input), type(self).__name__, self._spatial
        if input.ndim not in (spatial + 1, spatial + 2):
            raise RuntimeError(f"{name}: expected a {spatial + 1}-D (unbatched) or {spatial + 2}-D (batched) input, "
                               f"got input of shape {list(input.shape)}")
        channels = input.shape[1 if input.ndim == spatial + 2 else 0]
        if _done(self):
            if self.in_channels == 0:
                self.in_channels = self._size_from("weight", self.weight.shape)
            return
        if channels % self.groups:
            raise InputError(f"{name}: in_channels={channels} inferred from the input of shape {list(input.shape)} "
                             f"is not divisible by groups={self.groups}")
        self._materialize(channels)


class LazyConv1d(_LazyConv, Conv1d):
    """``Conv1d`` whose ``in_channels`` is the first input's channel count."""

    cls_to_become = Conv1d

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        # the base is built with in_channels=groups (a value it accepts), its weights then made uninitialized
        super().__init__(groups, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                         device, dtype)
        self._make_lazy()
        self.in_channels = 0


class LazyConv2d(_LazyConv, Conv2d):
    """``Conv2d`` whose ``in_channels`` is the first input's channel count."""

    cls_to_become = Conv2d
    _spatial = 2

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None, activation=None):
        super().__init__(groups, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                         device, dtype, activation)
        self._make_lazy()
        self.in_channels = 0


class LazyConvTranspose1d(_LazyConv, ConvTranspose1d):
    """``ConvTranspose1d`` whose ``in_channels`` is the first input's channel count."""

    cls_to_become = ConvTranspose1d
    _transposed = True

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True,
                 dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(groups, out_channels, kernel_size, stride, padding, output_padding, groups, bias, dilation,
                         padding_mode, device, dtype)
        self._make_lazy()
        self.in_channels = 0


class LazyConvTranspose2d(_LazyConv, ConvTranspose2d):
    """``ConvTranspose2d`` whose ``in_channels`` is the first input's channel count."""

    cls_to_become = ConvTranspose2d
    _spatial = 2
    _transposed = True

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True,
                 dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(groups, out_channels, kernel_size, stride, padding, output_padding, groups, bias, dilation,
                         padding_mode, device, dtype)
        self._make_lazy()
        self.in_channels = 0


class LazyConv3d(_LazyConv, Conv3d):
    """``Conv3d`` whose ``in_channels`` is the first input's channel count."""

    cls_to_become = Conv3d
    _spatial = 3

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(groups, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                         device, dtype)
        self._make_lazy()
        self.in_channels = 0


class LazyConvTranspose3d(_LazyConv, ConvTranspose3d):
    """``ConvTranspose3d`` whose ``in_channels`` is the first input's channel count."""

    cls_to_become = ConvTranspose3d
    _spatial = 3
    _transposed = True

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True,
                 dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(groups, out_channels, kernel_size, stride, padding, output_padding, groups, bias, dilation,
                         padding_mode, device, dtype)
        self._make_lazy()
        self.in_channels = 0


class _LazyNorm(LazyModuleMixin):
    """The lazy norms: ``num_features`` is the input's channel count; PyTorch's lazy defaults (``affine`` and
    ``track_running_stats`` True, for the instance norms too)."""

    _size_name = "num_features"

    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None, *,
                 bias=True):
        # the base is built with num_features=1, its state then made uninitialized (num_batches_tracked stays)
        super().__init__(1, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)
        self._make_lazy("running_mean", "running_var")
        self.num_features = 0

    def _shapes(self, size):
        return dict.fromkeys(("weight", "bias", "running_mean", "running_var"), (size,))

    def _size_from(self, name, shape):
        return shape[0] if len(shape) == 1 and name in ("weight", "bias", "running_mean", "running_var") else None

    def _channels(self, input):
        """The input's channel count, after the base module's own check of its dimensions."""
        input, name = _tensor_arg(self, input), type(self).__name__
        ndims = self._ndims if self._spatial is None else (self._spatial + 1, self._spatial + 2)
        if input.ndim not in ndims:
            want = " or ".join(f"{d}-D" for d in ndims)
            raise InputError(f"{name}: expected {want} input, got {input.ndim}-D input of shape {list(input.shape)}")
        unbatched = self._spatial is not None and input.ndim == self._spatial + 1
        return input.shape[0 if unbatched else 1]

    _spatial = None  # the instance norms' spatial dimensions (they take unbatched input too)

    def initialize_parameters(self, input, *args, **kwargs):
        channels = self._channels(input)
        if not _done(self):
            self._materialize(channels)
        elif self.num_features == 0:  # loaded from a state dict, or nothing to initialize (not affine, no stats)
            real = [v for v in (self.weight, self.running_mean) if v is not None]
            self.num_features = real[0].shape[0] if real else int(channels)


class LazyBatchNorm1d(_LazyNorm, BatchNorm1d):
    """``BatchNorm1d`` whose ``num_features`` is the first input's dimension 1."""

    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyNorm, BatchNorm2d):
    """``BatchNorm2d`` whose ``num_features`` is the first input's dimension 1."""

    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyNorm, BatchNorm3d):
    """``BatchNorm3d`` whose ``num_features`` is the first input's dimension 1."""

    cls_to_become = BatchNorm3d


class LazyInstanceNorm1d(_LazyNorm, InstanceNorm1d):
    """``InstanceNorm1d`` whose ``num_features`` is the first input's channel count (dimension 0 unbatched)."""

    cls_to_become = InstanceNorm1d
    _spatial = 1


class LazyInstanceNorm2d(_LazyNorm, InstanceNorm2d):
    """``InstanceNorm2d`` whose ``num_features`` is the first input's channel count (dimension 0 unbatched)."""

    cls_to_become = InstanceNorm2d
    _spatial = 2


class LazyInstanceNorm3d(_LazyNorm, InstanceNorm3d):
    """``InstanceNorm3d`` whose ``num_features`` is the first input's channel count (dimension 0 unbatched)."""

    cls_to_become = InstanceNorm3d
    _spatial = 3
