"""Normalization layers: ``LayerNorm``, ``RMSNorm``, ``BatchNorm1d/2d/3d``, ``GroupNorm``, ``InstanceNorm1d/2d/3d``,
``LocalResponseNorm``, ``CrossMapLRN2d`` (PyTorch's names, shapes, buffers and init)."""
from __future__ import annotations

import math
import numbers
import operator
import warnings

from .. import backend, ops
from .. import functional as F
from ..autograd import no_grad
from ..functional.batchnorm import _batch_norm, _check_positive_int, batch_norm_checked_once
from ..tensor import Tensor
from . import init
from .module import Module, Parameter
from ..backend import InputError, InputTypeError


def _shape(name, normalized_shape):
    """``normalized_shape`` (an int, or a sequence of them) as a tuple of ints >= 0; a float, a string or a bool
    in it is a TypeError, as PyTorch's (which refuses them when it makes the weight)."""
    items = (normalized_shape,) if isinstance(normalized_shape, numbers.Integral) else normalized_shape
    try:
        items = tuple(items)
        if any(isinstance(s, bool) for s in items):
            raise TypeError
        shape = tuple(operator.index(s) for s in items)
    except TypeError:
        raise InputTypeError(f"{name}: normalized_shape must be an int or a sequence of ints, got "
                             f"{normalized_shape!r}") from None
    if any(s < 0 for s in shape):
        raise InputError(f"{name}: normalized_shape must hold non-negative sizes, got {list(shape)}")
    return shape


class LayerNorm(Module):
    """``y = (x - mean) / sqrt(var + eps) * weight + bias`` over the trailing ``normalized_shape``.

    ``weight`` (ones) and ``bias`` (zeros) have shape ``normalized_shape``; none
    when ``elementwise_affine=False``, no bias when ``bias=False``.
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = _shape("LayerNorm", normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ops.ones(self.normalized_shape, dtype=dtype, device=device))
            if bias:
                self.bias = Parameter(ops.zeros(self.normalized_shape, dtype=dtype, device=device))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def forward_inplace(self, input):
        """``F.layer_norm_`` (inference only: it raises where anything requires grad); out of place where the
        weights' dtype is not the input's (float32 weights normalize a 16-bit input into float32)."""
        if self.weight is not None and self.weight.dtype != input.dtype:
            return self.forward(input)
        return F.layer_norm_(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class RMSNorm(Module):
    """``y = x / sqrt(mean(x^2) + eps) * weight``; ``eps=None``: the machine epsilon of the dtype it computes in
    (float32 for a float16 / bfloat16 input, see :func:`minifused.functional.rms_norm`)."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = _shape("RMSNorm", normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ops.ones(self.normalized_shape, dtype=dtype, device=device))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, x):  # (PyTorch names this one's input x)
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


def _affine_parameters(module, shape, bias, dtype, device):
    """A norm's ``weight`` (ones) and ``bias`` (zeros, unless ``bias=False``) of ``shape``; both None for
    ``shape`` None (not affine)."""
    module.register_parameter("weight", Parameter(ops.ones(shape, dtype=dtype, device=device)) if shape else None)
    module.register_parameter("bias", Parameter(ops.zeros(shape, dtype=dtype, device=device)) if shape and bias
                              else None)


def _reset_affine(module):
    """A norm's ``weight`` back to ones and ``bias`` to zeros (those it has), in place: the same Parameters, so
    an optimizer holding them keeps working."""
    for p, fill in ((module.weight, init.ones_), (getattr(module, "bias", None), init.zeros_)):
        if p is not None:
            fill(p)


class _NormBase(Module):
    """What BatchNorm and InstanceNorm share, as PyTorch's ``_NormBase`` (their common base: an InstanceNorm is
    no ``_BatchNorm``, so code picking out the BatchNorm layers by class leaves it alone): ``weight`` (ones)
    and ``bias`` (zeros) when ``affine`` (no ``bias`` with ``bias=False``); ``running_mean`` (zeros),
    ``running_var`` (ones) and ``num_batches_tracked`` buffers when ``track_running_stats``; their resets and
    the state-dict versions."""

    _version = 2  # (PyTorch's: num_batches_tracked came in version 2)
    _optional_state = ("num_batches_tracked",)  # older checkpoints have none (PyTorch fills it in too)
    _min_features = 1

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        name = type(self).__name__
        if (not isinstance(num_features, numbers.Integral) or isinstance(num_features, bool)
                or num_features < self._min_features):
            what = "a positive int" if self._min_features else "an int >= 0"
            # an int out of range: ValueError; no int at all (a float, a bool) a TypeError, as PyTorch's factories
            integral = isinstance(num_features, numbers.Integral) and not isinstance(num_features, bool)
            raise (InputError if integral else InputTypeError)(f"{name}: num_features must be {what}, got "
                                                               f"{num_features!r}")
        if momentum is not None and (not isinstance(momentum, numbers.Real) or isinstance(momentum, bool)
                                     or not 0.0 <= momentum <= 1.0):
            # a number out of range: ValueError; anything else a TypeError, as F.batch_norm (and PyTorch) raise
            err = InputError if isinstance(momentum, numbers.Real) else InputTypeError
            raise err(f"{name}: momentum must be a number in [0, 1] or None, got {momentum!r}")
        if not isinstance(eps, numbers.Real) or isinstance(eps, bool) or not eps >= 0:
            # (a number out of range: ValueError; anything else a TypeError, as F.batch_norm's)
            real = isinstance(eps, numbers.Real) and not isinstance(eps, bool)
            raise (InputError if real else InputTypeError)(f"{name}: eps must be a number >= 0, got {eps!r}")
        self.num_features, self.eps, self.momentum = int(num_features), eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        c = self.num_features
        _affine_parameters(self, (c,) if affine else None, bias, dtype, device)
        if track_running_stats:
            self.register_buffer("running_mean", ops.zeros(c, dtype=dtype, device=device))
            self.register_buffer("running_var", ops.ones(c, dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked", ops.zeros((), dtype=backend.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self):
        """``running_mean`` zeros, ``running_var`` ones, ``num_batches_tracked`` zero, in place."""
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1.0)
            self.num_batches_tracked.zero_()

    def reset_parameters(self):
        """The state of a new module: running statistics reset, ``weight`` ones, ``bias`` zeros, in place."""
        self.reset_running_stats()
        _reset_affine(self)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    """BatchNorm over channel dimension 1, PyTorch's semantics (the parameters and buffers of
    :class:`_NormBase`). Training normalizes with the batch's statistics and moves the running ones by
    ``momentum`` (``None``: the cumulative average); evaluation normalizes with the running statistics
    (with the batch's when there are none). A following ReLU in a ``Sequential`` (or ``activation='relu'``)
    runs in the same kernel."""

    _ndims: tuple = ()
    fused_activations = ("relu",)

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None, activation=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)
        if activation not in (None, "relu"):
            raise InputError(f"{type(self).__name__}: activation must be None or 'relu', got {activation!r}")
        self.activation = activation

    def _check_input(self, input):
        if not isinstance(input, ops.Tensor):
            raise InputTypeError(f"{type(self).__name__}: expected a tensor input, got {type(input).__name__}")
        self._check_input_dim(input)
        self._check_channels(input.shape)

    def _check_input_dim(self, input):
        """The check of the input's number of dimensions, as PyTorch's (a subclass may override it to take other
        inputs: the forward calls it)."""
        self._check_ndim(input.shape)

    def _check_shape(self, shape):
        """The module's own checks of its input's ``shape`` (a fused op checks the shape it will normalize)."""
        self._check_ndim(shape)
        self._check_channels(shape)

    def _check_ndim(self, shape):
        if len(shape) not in self._ndims:
            want = " or ".join(f"{d}-D" for d in self._ndims)
            raise InputError(f"{type(self).__name__}: expected {want} input, got {len(shape)}-D input of shape "
                             f"{list(shape)}")

    def _check_channels(self, shape):
        name = type(self).__name__
        if len(shape) < 2:
            raise InputError(f"{name}: expected an input with a channel dimension (N, C, ...), got shape "
                             f"{list(shape)}")
        channels = self._tensor_channels()  # (an empty input is not checked: PyTorch's reads none of the vectors)
        if channels is not None and shape[1] != channels and math.prod(shape):
            raise InputError(f"{name}: expected {channels} channels (num_features) in dimension 1, got "
                             f"input of shape {list(shape)}")

    def _tensor_channels(self):
        """The channel count the input must have: the size of the running statistics the op reads, else of the
        weight or bias, as PyTorch's checks (not ``num_features``: model surgery may resize the tensors alone);
        None where there are none."""
        keep = not self.training or self.track_running_stats
        for t in (self.running_mean if keep else None, self.weight, self.bias):
            if t is not None:
                return t.numel()
        return None

    def forward(self, input):
        return self.forward_with_activation(input, self.activation)

    def forward_with_activation(self, input, activation):
        if type(self)._check_input_dim is not _BatchNorm._check_input_dim:  # (its own checks: may read anything)
            self._check_input(input)
            return _batch_norm(input, *self._batch_norm_args(activation))
        return batch_norm_checked_once(self.__dict__, self._check_input, input, *self._batch_norm_args(activation))

    def _batch_norm_args(self, activation):
        """``F._batch_norm``'s arguments after the input for this module in its mode."""
        training, momentum, running_mean = self.training, self.momentum, self.running_mean
        tracking = training and self.track_running_stats
        factor = 0.0 if momentum is None else momentum
        if tracking and momentum is None and self.num_batches_tracked is not None:  # the cumulative average over
            factor = 1.0 / (int(self.num_batches_tracked.item()) + 1)  # the batches seen, this one too (no count: 0)
        use_batch = training or running_mean is None
        keep = not training or self.track_running_stats
        # num_batches_tracked goes up in the running statistics' kernel (after the call's checks: a refused
        # input changes nothing)
        return (running_mean if keep else None, self.running_var if keep else None, self.weight, self.bias,
                use_batch, factor, self.eps, activation, self.num_batches_tracked if tracking else None)

    def extra_repr(self):
        return super().extra_repr() + (f", activation={self.activation!r}" if self.activation else "")


class BatchNorm1d(_BatchNorm):
    """BatchNorm over (N, C) or (N, C, L) inputs."""

    _ndims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """BatchNorm over (N, C, H, W) inputs."""

    _ndims = (4,)
    fusable_norm = "batch_norm"


class BatchNorm3d(_BatchNorm):
    """BatchNorm over (N, C, D, H, W) inputs."""

    _ndims = (5,)


#: The process group's collectives while one of several ranks is up (``minifused.distributed`` sets it: this
#: package sits below that one and does not import it); None otherwise, when SyncBatchNorm is BatchNorm.
collectives = None


class SyncBatchNorm(_BatchNorm):
    """BatchNorm whose training statistics are the whole data-parallel batch's, PyTorch's ``nn.SyncBatchNorm``:
    with a process group of several ranks (``minifused.distributed``) each training forward sums the
    per-channel statistics over the ranks (mean, then the centred squares: two all-reduces, the counts in a
    third), normalizes with them and moves the running statistics by them (the unbiased variance of the whole
    batch); backward all-reduces the gradients of those sums, so every rank must run it, as DDP training
    does. Without a process group, with one rank, or in evaluation it is BatchNorm. ``process_group`` must be
    None (minifused has one group). Inputs (N, C, ...) of at least 2 dimensions; statistics in float32 for
    16-bit inputs. ``convert_sync_batchnorm(module)`` swaps every BatchNorm of a model for one."""

    fused_activations = ()

    def _check_ndim(self, shape):
        if len(shape) < 2:  # (any number from 2 on, as PyTorch's and the docstring say)
            raise InputError(f"SyncBatchNorm: expected at least 2-D input, got {len(shape)}-D input of shape "
                             f"{list(shape)}")

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, device=None, dtype=None, *, bias=True):
        if process_group is not None:
            raise NotImplementedError(f"SyncBatchNorm: process_group must be None (minifused has one group), got "
                                      f"{type(process_group).__name__}")
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)
        self.process_group = None

    def forward(self, input):
        dist = collectives
        if not (self.training and dist is not None):
            return super().forward(input)
        self._check_input(input)
        return self._synced(input, dist)

    def _synced(self, input, dist):
        c = input.shape[1]
        shape = (1, c) + (1,) * (input.ndim - 2)
        dims = (0,) + tuple(range(2, input.ndim))
        x = input.float() if input.dtype in (backend.float16, backend.bfloat16) else input
        count = ops.tensor([float(input.numel() // c)], device=input.device)
        dist.all_reduce(count)
        n = int(count.item())
        if n <= 1:
            raise InputError(f"SyncBatchNorm: expected more than 1 value per channel over the ranks when "
                             f"training, got {n}")
        mean = dist.sum_recorded(x.sum(dims)) / n
        centred = x - mean.reshape(shape)
        var = dist.sum_recorded((centred * centred).sum(dims)) / n
        y = centred * (var + self.eps).rsqrt().reshape(shape)
        if self.weight is not None:  # (affine with bias=False has a weight and no bias)
            y = y * self.weight.reshape(shape).to(y.dtype)
        if self.bias is not None:
            y = y + self.bias.reshape(shape).to(y.dtype)
        if self.activation == "relu":  # (a converted BatchNorm's own ReLU)
            y = y.relu()
        if self.track_running_stats:
            with no_grad():
                self.num_batches_tracked += 1
                factor = (1.0 / int(self.num_batches_tracked.item()) if self.momentum is None
                          else self.momentum)
                for stat, value in ((self.running_mean, mean), (self.running_var, var * (n / (n - 1)))):
                    stat.mul_(1.0 - factor).add_(value.detach().to(stat.dtype), alpha=factor)
        return y.to(input.dtype)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """``module`` with every BatchNorm1d/2d/3d in it replaced by a SyncBatchNorm holding the same
        parameters, running statistics and training flag (the module itself when it is one), as PyTorch's; a
        BatchNorm's ``activation='relu'`` stays."""
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            if getattr(module, "has_uninitialized_params", lambda: False)():  # (PyTorch's copy fails at its forward)
                raise InputError(f"convert_sync_batchnorm: expected initialized BatchNorm layers, got an uninitialized "
                                 f"{type(module).__name__} (run a forward or load a state dict first)")
            new = cls(module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats,
                      process_group, bias=module.bias is not None)
            new.activation = module.activation
            for name in ("weight", "bias"):
                if getattr(module, name) is not None:
                    setattr(new, name, getattr(module, name))
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                new.register_buffer(name, getattr(module, name))
            new.train(module.training)
            return new
        for name, child in list(module._modules.items()):
            if child is not None:
                module._modules[name] = cls.convert_sync_batchnorm(child, process_group)
        return module


class _InstanceNorm(_NormBase):
    """InstanceNorm (the parameters and buffers of :class:`_NormBase`, no ``_BatchNorm``, as PyTorch's):
    ``F.instance_norm`` with PyTorch's defaults (``affine=False``, ``track_running_stats=False``):
    each instance's own statistics normalize in training, and in evaluation unless running statistics are
    tracked; batched or unbatched input. A channel count other than ``num_features`` is an error with
    ``affine`` (the parameters would not match) and a warning without, as in PyTorch."""

    _spatial = 0
    _min_features = 0  # (PyTorch's InstanceNorm takes num_features=0: its inputs have no channels, its output none)

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False, device=None,
                 dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def _get_no_batch_dim(self):
        """The number of dimensions of an unbatched input (PyTorch's helper)."""
        return self._spatial + 1

    def _check_input_dim(self, input):
        """The check of the input's number of dimensions, as PyTorch's (a subclass may override it: the forward
        calls it)."""
        spatial = self._spatial
        if input.ndim not in (spatial + 1, spatial + 2):
            raise InputError(f"{type(self).__name__}: expected {spatial + 1}-D (unbatched) or {spatial + 2}-D input, "
                             f"got {input.ndim}-D input of shape {list(input.shape)}")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        """As PyTorch's: running statistics in a state dict without version metadata (saved before InstanceNorm
        stopped tracking them by default) are an error for a layer that tracks none, whatever ``strict``."""
        if local_metadata.get("version") is None and not self.track_running_stats:
            keys = [prefix + n for n in ("running_mean", "running_var") if prefix + n in state_dict]
            if keys:
                name = type(self).__name__
                error_msgs.append(
                    "Unexpected running stats buffer(s) " + " and ".join(f'"{k}"' for k in keys) + f" for {name} with "
                    f"track_running_stats=False. If state_dict is a checkpoint saved before 0.4.0, this may be "
                    f"expected because {name} does not track running stats by default since 0.4.0. Please remove "
                    f"these keys from state_dict. If the running stats are actually needed, instead set "
                    f"track_running_stats=True in {name} to enable them. See the documentation of {name} for "
                    f"details.")
                for k in keys:
                    state_dict.pop(k)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def forward(self, input):
        name, spatial = type(self).__name__, self._spatial
        if not isinstance(input, ops.Tensor):
            raise InputTypeError(f"{name}: expected a tensor input, got {type(input).__name__}")
        self._check_input_dim(input)
        unbatched = input.ndim == spatial + 1
        x = input.unsqueeze(0) if unbatched else input
        if x.shape[1] != self.num_features:
            dim = 0 if unbatched else 1
            message = (f"{name}: expected {self.num_features} channels (num_features) in dimension {dim}, got input "
                       f"of shape {list(input.shape)}")
            if self.affine or self.track_running_stats:
                raise InputError(message)
            # PyTorch's words first, so that a filter written for its warning (a regex matched from the
            # message's start) silences this one too
            warnings.warn(f"input's size at dim={dim} does not match num_features. You can silence this warning by "
                          f"not passing in num_features, which is not used because affine=False ({message})",
                          stacklevel=2)
        y = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            self.training or not self.track_running_stats,
                            self.momentum if self.momentum is not None else 0.0, self.eps)
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """InstanceNorm over (N, C, L) or (C, L) inputs."""

    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """InstanceNorm over (N, C, H, W) or (C, H, W) inputs."""

    _spatial = 2


class InstanceNorm3d(_InstanceNorm):
    """InstanceNorm over (N, C, D, H, W) or (C, D, H, W) inputs."""

    _spatial = 3


class GroupNorm(Module):
    """``F.group_norm`` with per-channel ``weight`` (ones) and ``bias`` (zeros; none with ``bias=False``) when
    ``affine``."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        for what, v in (("num_groups", num_groups), ("num_channels", num_channels)):
            _check_positive_int("GroupNorm", what, v)
        if num_channels % num_groups:
            raise InputError(f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = int(num_groups), int(num_channels), eps, affine
        _affine_parameters(self, (self.num_channels,) if affine else None, bias, dtype, device)

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):
        """The input's channels are checked against the weight's (or bias's) size, as in PyTorch, not
        ``num_channels`` (model surgery may resize the parameters alone); without ``affine`` any channel count that
        ``num_groups`` divides passes."""
        channels = next((t.numel() for t in (self.weight, self.bias) if t is not None), None)
        if channels is not None and isinstance(input, ops.Tensor) and input.ndim >= 2 and input.shape[1] != channels:
            raise InputError(f"GroupNorm: expected {channels} channels in dimension 1, got input of "
                             f"shape {list(input.shape)}")
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class LocalResponseNorm(Module):
    """``F.local_response_norm`` over the channels of (N, C, *) input (AlexNet's normalization)."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"



class CrossMapLRN2d(Module):
    """PyTorch's legacy LRN across the channels of (N, C, H, W) input, with its values exactly:
    ``x / (k + alpha / size * s_c) ** beta``, ``s_c`` the sum of x² over channels ``c - h .. c + h``,
    ``h = (size - 1) // 2`` (an even ``size`` sums ``size - 1`` channels, where ``LocalResponseNorm`` sums
    ``size`` and divides by it too), plus channel 0's x² for every ``c > h``: PyTorch's running sum never
    subtracts channel 0 (its ``c > pre_pad`` test). Matching those values is the point of this layer, so it
    does not reuse ``LocalResponseNorm``. The gradient is this forward's exact derivative; PyTorch's
    hand-written backward is not (its own gradcheck fails)."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1):
        super().__init__()
        _check_positive_int("CrossMapLRN2d", "size", size)
        self.size, self.alpha, self.beta, self.k = int(size), alpha, beta, k

    def forward(self, input):
        if not isinstance(input, Tensor):
            raise InputTypeError(f"CrossMapLRN2d: expected a tensor input, got {type(input).__name__}")
        if input.ndim != 4:
            raise InputError(f"CrossMapLRN2d: Expected input to be 4D, got {input.ndim}D instead.")
        if not backend.is_floating(input.dtype):
            raise InputTypeError(f"CrossMapLRN2d: expected a floating-point input, got {input.dtype}")
        if input.numel() == 0:
            return input * 1
        n, c, hgt, wid = input.shape
        h = (self.size - 1) // 2
        sq = input * input
        # the channels as the rows of a one-channel image: a (2h+1, 1) average pool is the window's mean
        rows = F.pad(ops.reshape(sq, (n, 1, c, hgt * wid)), (0, 0, h, h))
        sums = ops.reshape(F.avg_pool2d(rows, (2 * h + 1, 1), stride=1), input.shape) * float(2 * h + 1)
        if c > h + 1:  # (added to those channels alone: a product with a 0/1 mask would turn an infinite x² to NaN)
            sums = ops.cat([sums[:, :h + 1], sums[:, h + 1:] + sq[:, :1]], 1)
        return input * (sums * (self.alpha / self.size) + self.k) ** -float(self.beta)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
