"""``Conv2d``: a 2-D convolution layer, optionally with its ReLU fused into the GEMM's epilogue."""
from __future__ import annotations

import math
import numbers
import operator

from .. import backend
from .. import functional as F
from ..autograd import no_grad
from ..functional import CONV_ACTIVATIONS
from ..functional._checks import _pair, _single
from ..functional.conv import conv2d_checked_once
from ..functional.batchnorm import (_conv2d_batch_norm_checks, _conv2d_batch_norm_run,
                                     _conv2d_batch_norm_signature)
from ..ops.shape import channels_last
from ..tensor import Tensor
from .module import Module, Parameter
from .norm import _BatchNorm
from ..backend import InputError, InputTypeError

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")  # Conv2d's, as PyTorch's


def padding_minimum(padding_mode):
    """The least padding a convolution layer takes: 0 with zeros; any with another mode, whose F.pad crops the
    input where the padding is negative before the convolution, as PyTorch's."""
    return 0 if padding_mode == "zeros" else -math.inf


def conv_attributes(module, transposed):
    """Set PyTorch's ``_ConvNd`` attributes that code built on its layers reads: ``transposed``, ``padding_mode``
    ('zeros' for a transposed convolution), ``output_padding`` (zeros for a convolution) and
    ``_reversed_padding_repeated_twice``, F.pad's padding of the input (last dimension first) for a padding mode
    other than zeros, which the layer's forward uses, as PyTorch's ('same': the odd one after; a list for a
    string padding, a tuple otherwise, as there)."""
    dims = len(module.kernel_size)
    module.transposed = transposed
    if transposed:
        module.padding_mode = "zeros"
    else:
        module.output_padding = (0,) * dims
    if isinstance(module.padding, str):
        rev = [0, 0] * dims
        if module.padding == "same":
            for i, (d, k) in enumerate(zip(module.dilation, module.kernel_size)):
                total = d * (k - 1)
                j = 2 * (dims - 1 - i)
                rev[j], rev[j + 1] = total // 2, total - total // 2
    else:
        rev = tuple(p for p in reversed(module.padding) for _ in range(2))
    module._reversed_padding_repeated_twice = rev


def overrides_conv_forward(module, base):
    """Whether ``module``'s class replaces ``base``'s ``_conv_forward`` (PyTorch's hook for a layer that transforms
    its weight first): then its forward must go through it."""
    return type(module)._conv_forward is not base._conv_forward


class Conv2d(Module):
    """``activation(conv2d(x, weight) + bias)`` with weight (out_channels, in_channels/groups, kH, kW).

    PyTorch's arguments and initialisation: weight kaiming_uniform(a=√5), i.e.
    U(-1/√fan_in, 1/√fan_in) with fan_in = in_channels/groups·kH·kW, and bias U(-1/√fan_in, 1/√fan_in).
    ``activation`` None or ``'relu'``.
    """

    fused_activations = CONV_ACTIVATIONS[1:]
    fused_norms = ("batch_norm",)
    channels_last_input = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None, activation=None):  # PyTorch's order, then ours
        super().__init__()
        if activation not in CONV_ACTIVATIONS:
            raise InputError(f"Conv2d: activation must be None or 'relu', got {activation!r}")
        if padding_mode not in PADDING_MODES:
            raise InputError(f"Conv2d: padding_mode must be one of {', '.join(map(repr, PADDING_MODES))}, got "
                             f"{padding_mode!r}")
        self.padding_mode = padding_mode
        _check_channel_args("Conv2d", in_channels, out_channels, groups)
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = _pair("Conv2d", "kernel_size", kernel_size, 1)
        self.stride = _pair("Conv2d", "stride", stride, 1)
        self.dilation = _pair("Conv2d", "dilation", dilation, 1)
        if isinstance(padding, str) and padding not in ("valid", "same"):
            raise InputError(f"Conv2d: Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
        least = padding_minimum(padding_mode)
        self.padding = padding if isinstance(padding, str) else _pair("Conv2d", "padding", padding, least)
        if self.padding == "same" and self.stride != (1, 1):
            raise InputError(f"Conv2d: padding='same' is not supported for strided convolutions, got stride="
                             f"{self.stride}")
        self.groups, self.activation = int(groups), activation
        dev = backend.device(device)
        dtype = backend.get_default_dtype() if dtype is None else backend.as_dtype(dtype)
        xp = backend.xp(dev)
        shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
        with backend.on_device(dev):
            self.weight = Parameter(xp.empty(shape, dtype=dtype))
            self.bias = Parameter(xp.empty((self.out_channels,), dtype=dtype)) if bias else None
        conv_attributes(self, transposed=False)
        self.reset_parameters()

    def reset_parameters(self):
        fan_in = self.in_channels // self.groups * self.kernel_size[0] * self.kernel_size[1]
        # kaiming_uniform(a=√5): gain √(2/(1+5)), bound gain·√(3/fan_in) = 1/√fan_in
        bound = _init_bound(fan_in)
        with no_grad():
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.uniform_(-bound, bound)

    def forward(self, input):
        return self.forward_with_activation(input, self.activation)

    def forward_with_activation(self, x, activation):
        """The layer with ``activation`` in its epilogue (``Sequential`` fuses a following ReLU). A subclass's own
        ``_conv_forward`` runs as it is, the activation after it."""
        if overrides_conv_forward(self, Conv2d):
            y = self._conv_forward(x, self.weight, self.bias)
            return y if activation is None else F.relu(y)
        return self._conv_forward(x, self.weight, self.bias, activation)

    def _conv_forward(self, input, weight, bias, activation=None):
        """The convolution of ``input`` with ``weight`` and ``bias`` (PyTorch's: what a subclass that transforms
        its weight calls, and may override), ``padding_mode`` applied; ``activation`` in the epilogue."""
        x, padding = self._input_and_padding(input)
        return conv2d_checked_once(self.__dict__, x, weight, bias, self.stride, padding, self.dilation, self.groups,
                                   activation)

    def forward_with_norm(self, x, norm, activation):
        """``norm.forward_with_activation(self(x), activation)`` for a BatchNorm2d ``norm``, recorded as one op
        (``Sequential`` fuses Conv2d, BatchNorm2d and a ReLU so): the same checks and kernels, so the same numbers
        and errors; the two calls themselves for an unbatched input, under autocast, for a subclass with its
        own ``_conv_forward`` or a norm with its own ``_check_input_dim``, or an input of no channels (F.conv2d's
        empty result of 0 channels, which BatchNorm copies unchecked, as PyTorch's)."""
        if (not isinstance(x, Tensor) or x.ndim != 4 or not x.shape[1] or backend.autocast_dtypes()
                or overrides_conv_forward(self, Conv2d)
                or type(norm)._check_input_dim is not _BatchNorm._check_input_dim):
            return norm.forward_with_activation(self.forward(x), activation)
        x, padding = self._input_and_padding(x)
        weight, bias, stride, dilation, groups = self.weight, self.bias, self.stride, self.dilation, self.groups
        running_mean, running_var, bn_weight, bn_bias, training, momentum, eps, act, count = \
            norm._batch_norm_args(activation)
        norm_args = (running_mean, running_var, bn_weight, bn_bias, training, momentum, eps, act)
        # the checks skipped while all they read equals what they last passed (type(norm): its own shape check)
        signature = _conv2d_batch_norm_signature(x, weight, bias, stride, padding, dilation, groups, *norm_args)
        if signature is not None:
            signature = (type(norm), *signature)
        passed = self.__dict__.get("_norm_checks_passed")
        if passed is not None and signature is not None and passed[0] == signature:
            conv = passed[1]
        else:
            x, weight, bias, *conv = _conv2d_batch_norm_checks(x, weight, bias, stride, padding, dilation, groups,
                                                               *norm_args, check_shape=norm._check_shape)
            if signature is not None:
                self.__dict__["_norm_checks_passed"] = signature, conv
        return _conv2d_batch_norm_run(x, weight, bias, *conv, *norm_args, count)

    def _input_and_padding(self, x):
        """x as the convolution takes it (channels-last if the layer asks; padded by F.pad for a padding mode
        other than zeros, as PyTorch's) and the padding left to the convolution."""
        if self.channels_last_input and x.ndim == 4:
            x = x.contiguous(memory_format=channels_last)
        if self.padding_mode != "zeros" and self.padding != "valid":
            return F.pad(x, self._explicit_padding(), mode=self.padding_mode), (0, 0)
        return x, self.padding

    def _explicit_padding(self):
        """F.pad's (left, right, top, bottom) of this layer's padding (for 'same': the odd pixel after)."""
        return tuple(self._reversed_padding_repeated_twice)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}")
        if self.padding != (0, 0):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        if self.activation:
            s += f", activation='{self.activation}'"
        return s


class Conv1d(Module):
    """``conv1d(x, weight) + bias`` over (N, C, L) or (C, L) inputs, weight (out_channels, in_channels/groups,
    kernel_size): PyTorch's arguments (``padding_mode`` too) and initialisation, on the 2-D kernels."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode not in PADDING_MODES:
            raise InputError(f"Conv1d: padding_mode must be one of {', '.join(map(repr, PADDING_MODES))}, got "
                             f"{padding_mode!r}")
        _check_channel_args("Conv1d", in_channels, out_channels, groups)

        if isinstance(padding, str) and padding not in ("valid", "same"):
            raise InputError(f"Conv1d: Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
        self.in_channels, self.out_channels, self.groups = int(in_channels), int(out_channels), int(groups)
        def single(name, v, minimum):
            return (_single("Conv1d", name, v, minimum),)

        self.kernel_size, self.stride = single("kernel_size", kernel_size, 1), single("stride", stride, 1)
        self.dilation = single("dilation", dilation, 1)
        least = padding_minimum(padding_mode)
        self.padding = padding if isinstance(padding, str) else single("padding", padding, least)
        if self.padding == "same" and self.stride != (1,):
            raise InputError(f"Conv1d: padding='same' is not supported for strided convolutions, got stride="
                             f"{self.stride[0]}")
        self.padding_mode = padding_mode
        dev = backend.device(device)
        dtype = backend.get_default_dtype() if dtype is None else backend.as_dtype(dtype)
        xp = backend.xp(dev)
        with backend.on_device(dev):
            self.weight = Parameter(xp.empty((self.out_channels, self.in_channels // self.groups,
                                              self.kernel_size[0]), dtype=dtype))
            self.bias = Parameter(xp.empty((self.out_channels,), dtype=dtype)) if bias else None
        conv_attributes(self, transposed=False)
        self.reset_parameters()

    def reset_parameters(self):
        bound = _init_bound(self.in_channels // self.groups * self.kernel_size[0])
        with no_grad():
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.uniform_(-bound, bound)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)

    def _conv_forward(self, input, weight, bias):
        """The convolution of ``input`` with ``weight`` and ``bias`` (PyTorch's: what a subclass that transforms
        its weight calls, and may override), ``padding_mode`` applied."""
        padding = self.padding if isinstance(self.padding, str) else self.padding[0]
        if self.padding_mode != "zeros" and padding != "valid":
            input, padding = F.pad(input, tuple(self._reversed_padding_repeated_twice), mode=self.padding_mode), 0
        return F.conv1d(input, weight, bias, self.stride[0], padding, self.dilation[0], self.groups)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,):
            s += f", padding={self.padding}"
        if self.dilation != (1,):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s + (f", padding_mode={self.padding_mode}" if self.padding_mode != "zeros" else "")


def _init_bound(fan_in):
    """kaiming_uniform(a=√5)'s bound 1/√fan_in, for the weight and the bias; 0 for a layer of no input channels
    (its weight empty), as PyTorch's bias bound."""
    return 1.0 / math.sqrt(fan_in) if fan_in else 0.0


def _check_channel_args(name, in_channels, out_channels, groups):
    """A convolution layer's channel and group counts: a TypeError for one that is no int (a float, a bool), as
    PyTorch's (its ``torch.empty`` of the weight's shape refuses them); a ValueError naming the count that
    ``groups`` does not divide, in PyTorch's words."""
    if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
               for v in (in_channels, out_channels, groups)):
        raise InputTypeError(f"{name}: in_channels, out_channels and groups must be ints, got {in_channels!r}, "
                             f"{out_channels!r} and {groups!r}")
    if groups < 1:
        raise InputError(f"{name}: groups must be a positive integer, got {groups}")
    if in_channels < 0 or out_channels < 0:  # (0 builds an empty weight, as PyTorch's)
        raise InputError(f"{name}: channel counts must be >= 0, got in_channels={in_channels}, "
                         f"out_channels={out_channels}")
    for what, count in (("in_channels", in_channels), ("out_channels", out_channels)):
        if count % groups:
            raise InputError(f"{name}: {what} must be divisible by groups, got {what}={count}, groups={groups}")


class ConvTranspose2d(Module):
    """``conv_transpose2d(x, weight) + bias`` with weight (in_channels, out_channels/groups, kH, kW), PyTorch's
    arguments and initialisation (U(-1/√fan_in, 1/√fan_in), fan_in = out_channels/groups·kH·kW)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros":
            raise InputError(f"ConvTranspose2d: only padding_mode='zeros' is supported, got {padding_mode!r}")
        _check_channel_args("ConvTranspose2d", in_channels, out_channels, groups)
        self.in_channels, self.out_channels, self.groups = int(in_channels), int(out_channels), int(groups)
        self.kernel_size = _pair("ConvTranspose2d", "kernel_size", kernel_size, 1)
        self.stride = _pair("ConvTranspose2d", "stride", stride, 1)
        self.padding = _pair("ConvTranspose2d", "padding", padding, 0)
        self.output_padding = _pair("ConvTranspose2d", "output_padding", output_padding, 0)
        self.dilation = _pair("ConvTranspose2d", "dilation", dilation, 1)
        dev = backend.device(device)
        dtype = backend.get_default_dtype() if dtype is None else backend.as_dtype(dtype)
        xp = backend.xp(dev)
        shape = (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
        with backend.on_device(dev):
            self.weight = Parameter(xp.empty(shape, dtype=dtype))
            self.bias = Parameter(xp.empty((self.out_channels,), dtype=dtype)) if bias else None
        conv_attributes(self, transposed=True)
        self.reset_parameters()

    def reset_parameters(self):
        bound = _init_bound(self.out_channels // self.groups * self.kernel_size[0] * self.kernel_size[1])
        with no_grad():
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.uniform_(-bound, bound)

    def forward(self, input, output_size=None):
        """``output_size`` (H, W), or a whole shape ending in them (e.g. ``skip.shape``), picks among the sizes a
        stride > 1 makes possible, as PyTorch's does: it sets this call's output padding."""
        output_padding = self.output_padding if output_size is None else self._output_padding(input, output_size)
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding, output_padding,
                                  self.groups, self.dilation)

    def _output_padding(self, input, output_size, stride=None, padding=None, kernel_size=None, num_spatial_dims=None,
                        dilation=None):
        return transposed_output_padding(self, input, output_size, stride, padding, kernel_size, dilation)

    def extra_repr(self):
        return transposed_repr(self)


def transposed_repr(module):
    """A transposed convolution's ``extra_repr``, as PyTorch's: what differs from the defaults, in its order."""
    zeros, ones = (0,) * len(module.stride), (1,) * len(module.stride)
    s = f"{module.in_channels}, {module.out_channels}, kernel_size={module.kernel_size}, stride={module.stride}"
    for name, default in (("padding", zeros), ("dilation", ones), ("output_padding", zeros)):
        if getattr(module, name) != default:
            s += f", {name}={getattr(module, name)}"
    if module.groups != 1:
        s += f", groups={module.groups}"
    return s + (", bias=False" if module.bias is None else "")


def transposed_output_padding(module, x, output_size, stride=None, padding=None, kernel_size=None, dilation=None):
    """The output padding that makes a transposed convolution (``module``: its stride, padding, dilation and
    kernel size, one per spatial dimension) of ``x`` come out at ``output_size`` (its spatial sizes, or with the
    batch and channel dimensions too), as PyTorch's ``forward(x, output_size)`` picks it; the module's own when x
    is no input it takes (the functional refuses it) or ``output_size`` is None. The layers' ``_output_padding``,
    with PyTorch's arguments (a subclass's forward copied from PyTorch's passes the geometry, which wins over the
    module's)."""
    name, dims = type(module).__name__, len(module.stride)
    if output_size is None or not isinstance(x, Tensor) or x.ndim not in (dims + 1, dims + 2):
        return module.output_padding
    if stride is not None and dilation is None:  # (PyTorch's call without dilation counts a dilation of 1)
        dilation = (1,) * dims
    stride, padding, kernel_size, dilation = (module_value if value is None else tuple(value) for value, module_value
                                              in ((stride, module.stride), (padding, module.padding),
                                                  (kernel_size, module.kernel_size), (dilation, module.dilation)))
    try:  # (index, not int: a float or a string is refused, as PyTorch's, rather than truncated or parsed)
        size = [operator.index(v) for v in output_size]
    except TypeError:
        raise InputTypeError(f"{name}: output_size must be a sequence of ints, got {output_size!r}") from None
    lead = x.ndim - dims
    if len(size) == x.ndim:
        size = size[lead:]
    if len(size) != dims:
        raise InputError(f"{name}: for a {x.ndim}-D input, output_size must have {dims} or {x.ndim} elements, got "
                         f"{len(size)} ({output_size!r})")
    smallest = [(x.shape[lead + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (kernel_size[i] - 1) + 1
                for i in range(dims)]
    largest = [smallest[i] + stride[i] - 1 for i in range(dims)]
    if any(not smallest[i] <= size[i] <= largest[i] for i in range(dims)):
        raise InputError(f"{name}: requested an output size of {size}, but valid sizes range from {smallest} to "
                         f"{largest} (for an input of {list(x.shape[lead:])})")
    return tuple(size[i] - smallest[i] for i in range(dims))


class ConvTranspose1d(Module):
    """``conv_transpose1d(x, weight) + bias`` with weight (in_channels, out_channels/groups, kernel_size), PyTorch's
    arguments and initialisation (U(-1/√fan_in, 1/√fan_in), fan_in = out_channels/groups·kernel_size), on the
    2-D kernels."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros":
            raise InputError(f"ConvTranspose1d: only padding_mode='zeros' is supported, got {padding_mode!r}")
        _check_channel_args("ConvTranspose1d", in_channels, out_channels, groups)
        self.in_channels, self.out_channels, self.groups = int(in_channels), int(out_channels), int(groups)
        for name, v, minimum in (("kernel_size", kernel_size, 1), ("stride", stride, 1), ("padding", padding, 0),
                                 ("output_padding", output_padding, 0), ("dilation", dilation, 1)):
            setattr(self, name, (_single("ConvTranspose1d", name, v, minimum),))
        dev = backend.device(device)
        dtype = backend.get_default_dtype() if dtype is None else backend.as_dtype(dtype)
        xp = backend.xp(dev)
        with backend.on_device(dev):
            self.weight = Parameter(xp.empty((self.in_channels, self.out_channels // self.groups,
                                              self.kernel_size[0]), dtype=dtype))
            self.bias = Parameter(xp.empty((self.out_channels,), dtype=dtype)) if bias else None
        conv_attributes(self, transposed=True)
        self.reset_parameters()

    def reset_parameters(self):
        bound = _init_bound(self.out_channels // self.groups * self.kernel_size[0])
        with no_grad():
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.uniform_(-bound, bound)

    def forward(self, input, output_size=None):
        """``output_size`` (L,), or a whole shape ending in L, picks the output length as PyTorch's does."""
        output_padding = self.output_padding if output_size is None else self._output_padding(input, output_size)
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride[0], self.padding[0], output_padding[0],
                                  self.groups, self.dilation[0])

    _output_padding = ConvTranspose2d._output_padding

    def extra_repr(self):
        return transposed_repr(self)

