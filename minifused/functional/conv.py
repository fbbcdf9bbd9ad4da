"""Convolution and pooling: ``conv2d`` (with an optional fused ReLU), ``conv_transpose2d``, ``max_pool2d`` and
``avg_pool2d``, their arguments checked here. Each takes a batch (N, C, H, W) or, as PyTorch's do, one unbatched
image (C, H, W)."""
from __future__ import annotations

import functools as _functools
import numbers as _numbers

from .. import backend as _backend
from ..ops import cat as _cat
from ..ops import conv as _conv_ops
from ..ops import pool as _pool_ops
from ..ops import resample as _resample
from ..ops.elementwise import zero_tied as _zero_tied
from ..ops._common import autocast_float32 as _autocast_float32, autocast_lower as _autocast_lower
from ..ops.shape import channels_last as _channels_last, reshape as _reshape
from ..tensor import Tensor as _Tensor
from ..backend import same_device as _same_device
from ..kernels import is_channels_last as _is_channels_last
from ..kernels.conv import out_size as _conv_out_size
from ..kernels.pool import out_size as _pool_out_size
from ._checks import (_check_image, _pair, _single, _tensor_ints, _unpool_size, array_signature, int_tuples,
                      passed_checks, unbatched)
from ..backend import DtypeNotImplementedError, InputError, InputTypeError

__all__ = ["conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "max_pool2d", "avg_pool2d", "max_pool1d",
           "avg_pool1d", "unfold", "fold", "max_unpool2d"]

CONV_ACTIVATIONS = (None, "relu")  # what F.conv2d / nn.Conv2d accept (the convolution epilogues)

_CONV_DTYPES = frozenset({_backend.float32, _backend.float16, _backend.bfloat16, _backend.float64})
# what PyTorch's cpu convolutions take besides (its slow path; its cuda ones refuse them)
_CONV_INTEGERS = frozenset({_backend.int8, _backend.uint8, _backend.int16, _backend.int32, _backend.int64})


def _check_conv_dtype(op, input, integers=True):
    """A convolution's input dtype: floating-point, or (``integers``) an integer one on the cpu, as PyTorch's."""
    dtype = input.dtype
    if dtype in _CONV_DTYPES or (integers and dtype in _CONV_INTEGERS and input.device.type == "cpu"):
        return
    raise DtypeNotImplementedError(f"{op}: unsupported dtype {dtype} on {input.device}; expected float32, float16, "
                                   f"bfloat16 or float64" + (" (or an integer dtype on the cpu)" if integers else ""))


_unbatched = unbatched(2)  # (C, H, W) inputs too

# PyTorch's once-per-process warning where padding='same' pads one side more (an even effective kernel)
SAME_ASYMMETRIC = ("Using padding='same' with even kernel lengths and odd dilation may require a zero-padded copy "
                   "of the input be created")


def _check_conv_args(op, input, weight, groups, layout):
    _check_image(op, input)
    if not isinstance(weight, _Tensor):
        raise InputTypeError(f"{op}: expected a tensor weight, got {type(weight).__name__}")
    if weight.ndim != 4:
        raise InputError(f"{op}: weight must be 4-D {layout}, got shape {tuple(weight.shape)}")
    groups = _tensor_ints(groups)
    if not isinstance(groups, _numbers.Integral) or isinstance(groups, bool):  # (a float: PyTorch's TypeError)
        raise InputTypeError(f"{op}: groups must be a positive int, got {groups!r}")
    if groups < 1:
        raise InputError(f"{op}: groups must be a positive int, got {groups!r}")
    return int(groups)  # (a NumPy integer or a one-element integer tensor too, as PyTorch takes them)


@_unbatched
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, activation=None):
    """2-D convolution as ``torch.nn.functional.conv2d``, with an optional fused ReLU.

    ``input`` (N, C, H, W), ``weight`` (K, C/groups, R, S), ``bias`` (K,) or None; ``stride``,
    ``padding`` (or 'valid' / 'same' for stride 1), ``dilation``: int or pair. ``activation`` None
    or ``'relu'`` (applied in the GEMM's epilogue; its bit-mask is kept for backward). On the GPU:
    implicit-GEMM kernels (fp16/bf16 tensor cores, fp32 on FFMA or TF32 when
    ``minifused.backend.tf32_conv.allow_tf32``, alias ``minifused.backends.cudnn.allow_tf32``, is set).
    """
    return _conv2d_run(_conv2d_args(input, weight, bias, stride, padding, dilation, groups, activation, integers=True),
                       activation)


def _conv2d_run(args, activation):
    """:func:`conv2d` of its checked arguments (``_conv2d_args``'s)."""
    if not args[0].shape[1]:
        return _no_channels(*args)
    if args[0]._data.dtype in _CONV_INTEGERS:
        return _integer_conv2d(*args, activation)
    return _conv_ops.conv2d(*args, activation)


def conv2d_checked_once(holder, input, weight, bias, stride, padding, dilation, groups, activation=None):
    """:func:`conv2d` for a module (``holder``: its ``__dict__``), its checks skipped while all they read equals what
    they last passed (see ``_checks.passed_checks``): the same results and errors."""
    signature = _conv2d_signature(input, weight, bias, stride, padding, dilation, groups, activation)
    geometry = passed_checks(holder, "_conv_checks_passed", signature)
    if geometry is not None:
        return _conv_ops.conv2d(input, weight, bias, *geometry, activation)
    if signature is None or input.ndim != 4:  # (an unbatched input: conv2d's own path)
        return conv2d(input, weight, bias, stride, padding, dilation, groups, activation)
    args = _conv2d_args(input, weight, bias, stride, padding, dilation, groups, activation, integers=True)
    if args[0].shape[1] and args[0].dtype not in _CONV_INTEGERS:  # (the paths after the checks: the op's alone)
        holder["_conv_checks_passed"] = signature, args[3:]
    return _conv2d_run(args, activation)


def _conv2d_signature(input, weight, bias, stride, padding, dilation, groups, activation):
    """All that :func:`_conv2d_args` reads of its arguments, as a tuple of values (see ``_checks.passed_checks``); None
    for a padding given as a string (its check may warn and pad the input), under autocast (which casts the
    operands), or for arguments the tuple cannot describe (a list, which could change in place; not a tensor)."""
    if not (int_tuples(stride, padding, dilation) and type(groups) is int) or _backend.autocast_dtypes():
        return None
    try:
        return (array_signature(input), array_signature(weight), array_signature(bias), stride, padding, dilation,
                groups, activation)
    except AttributeError:  # (not a tensor: the checks name it)
        return None


def _no_channels(input, weight, bias, stride, padding, dilation, groups):
    """A convolution of an input with no channels, as PyTorch's: an empty (N, 0, *spatial) result (0 channels, not
    out_channels: its rule), tied to the input, weight and bias so each gets a zero gradient, as there."""
    spatial = tuple(_conv_out_size(size, kk, st, p, d) for size, kk, st, p, d in
                    zip(input.shape[2:], weight.shape[2:], stride, padding, dilation))
    y = _Tensor._from_array(input._xp.zeros((input.shape[0], 0) + spatial, input._data.dtype))
    return _zero_tied(y, input, weight, bias)


def _integer_conv2d(input, weight, bias, stride, padding, dilation, groups, activation):
    """PyTorch's cpu convolution of integer tensors (its slow path): the products and sums in the input's dtype,
    wrapping on overflow as there (the same result modulo 2**bits whatever the order of the sums), as one unfold and
    one integer matrix product per group; no gradient (integer tensors take none). Channels-last where the input
    or the weight is, as there."""
    n, k, (r, s) = input.shape[0], weight.shape[0], weight.shape[2:]
    out = tuple((size + 2 * p - d * (kk - 1) - 1) // st + 1
                for size, p, d, kk, st in zip(input.shape[2:], padding, dilation, (r, s), stride))
    cols = _resample.UnfoldFn.apply(input, (r, s), dilation, padding, stride, out)  # (N, C*r*s, L), channel-major
    kg, taps = k // groups, weight.shape[1] * r * s
    parts = [_reshape(weight[g * kg:(g + 1) * kg], kg, taps) @ cols[:, g * taps:(g + 1) * taps] for g in range(groups)]
    y = _reshape(parts[0] if groups == 1 else _cat(parts, 1), n, k, *out)
    if bias is not None:
        y = y + _reshape(bias, 1, k, 1, 1)
    if activation == "relu":
        y = y.clamp(min=0)
    if _is_channels_last(input._data) or _is_channels_last(weight._data):
        y = y.contiguous(memory_format=_channels_last)
    return y


def _conv2d_args(input, weight, bias, stride, padding, dilation, groups, activation, integers=False):
    """:func:`conv2d`'s arguments checked (cast under autocast) and as its op takes them: ``(input, weight, bias,
    stride, padding, dilation, groups)``, the input padded where 'same' pads unevenly. ``integers``: integer
    inputs taken on the cpu (by :func:`conv2d`, not the fused convolution-norm)."""
    op = "conv2d"
    input, weight, bias = _autocast_lower(input, weight, bias)
    groups = _check_conv_args(op, input, weight, groups, "(out_channels, in_channels/groups, kH, kW)")
    if activation not in CONV_ACTIVATIONS:
        raise InputError(f"{op}: activation must be None or 'relu', got {activation!r}")
    n, c, h, w = input.shape
    k, cg, r, s = weight.shape
    stride = _pair(op, "stride", stride, 1)
    dilation = _pair(op, "dilation", dilation, 1)
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0, 0)
        elif padding == "same":
            if stride != (1, 1):
                raise InputError(f"{op}: padding='same' is not supported for strided convolutions, got stride={stride}")
            tot = (dilation[0] * (r - 1), dilation[1] * (s - 1))
            if tot[0] % 2 or tot[1] % 2:  # an even effective kernel: the odd pixel of padding goes after, as PyTorch's
                from .layers import pad as _pad

                _backend.warn_once("conv_padding_same", SAME_ASYMMETRIC, stacklevel=4)

                input = _pad(input, (0, tot[1] % 2, 0, tot[0] % 2))
                n, c, h, w = input.shape
            padding = (tot[0] // 2, tot[1] // 2)
        else:
            raise InputError(f"{op}: Invalid padding string: {padding!r} (an int, a pair, 'valid' or 'same')")
    padding = _pair(op, "padding", padding, 0)
    _check_channels(op, input, weight, c, groups)
    eff = (dilation[0] * (r - 1) + 1, dilation[1] * (s - 1) + 1)
    if eff[0] > h + 2 * padding[0] or eff[1] > w + 2 * padding[1]:
        raise InputError(f"{op}: kernel {r}x{s} (dilation {dilation}, effective {eff[0]}x{eff[1]}) is larger than "
                         f"the padded input {h + 2 * padding[0]}x{w + 2 * padding[1]} (input shape "
                         f"{tuple(input.shape)}, padding {padding})")
    dtype = input.dtype
    if weight.dtype != dtype or (bias is not None and isinstance(bias, _Tensor) and bias.dtype != dtype):
        raise InputTypeError(f"{op}: input, weight and bias must have one dtype, got {dtype}, {weight.dtype}"
                             + (f", {bias.dtype}" if bias is not None else "") + " (no implicit casts)")
    _check_conv_dtype(op, input, integers)
    if bias is not None:
        if not isinstance(bias, _Tensor):
            raise InputTypeError(f"{op}: bias must be a tensor or None, got {type(bias).__name__}")
        if tuple(bias.shape) != (k,):
            raise InputError(f"{op}: bias must have shape ({k},) to match out_channels, got {tuple(bias.shape)}")
    if not _same_device(input._data, weight._data) or (bias is not None and not _same_device(input._data,
                                                                                              bias._data)):
        devs = [str(input.device), str(weight.device)] + ([str(bias.device)] if bias is not None else [])
        raise RuntimeError(f"{op}: expected input, weight and bias on one device, got {', '.join(devs)}")
    return input, weight, bias, stride, padding, dilation, groups


def _check_channels(op, input, weight, c, groups):
    """A convolution's channels: the input's ``c`` those of the weight's groups, its out channels whole groups and not
    none (an empty batch, or no input channel, is fine: an empty output, as PyTorch's)."""
    k, cg = weight.shape[:2]
    if c != cg * groups:
        raise InputError(f"{op}: input has {c} channels (shape {tuple(input.shape)}) but weight of shape "
                         f"{tuple(weight.shape)} with groups={groups} expects {cg * groups}")
    if k % groups:
        raise InputError(f"{op}: out_channels={k} (weight shape {tuple(weight.shape)}) is not divisible by "
                         f"groups={groups}")
    if k == 0:
        raise InputError(f"{op}: expected a weight with at least {groups} output channel(s) (groups={groups}), got "
                         f"weight of shape {tuple(weight.shape)}")


def _check_1d(op, input, weight, channels, layout):
    """A 1-D convolution's operands: tensors, (N, C, L) or (C, L) input, a 3-D weight of ``layout``."""
    if not isinstance(input, _Tensor) or not isinstance(weight, _Tensor):
        raise InputTypeError(f"{op}: expected tensors for input and weight, got {type(input).__name__} and "
                             f"{type(weight).__name__}")
    if input.ndim not in (2, 3):
        raise InputError(f"{op}: expected a 3-D input (N, {channels}, L) or a 2-D unbatched one ({channels}, L), "
                         f"got shape {tuple(input.shape)}")
    if weight.ndim != 3:
        raise InputError(f"{op}: weight must be 3-D {layout}, got shape {tuple(weight.shape)}")


def _check_conv_args_1d(op, input, weight, bias, stride, padding, dilation, groups):
    """conv1d's checks whose messages show shapes or the geometry, on the 1-D ones (conv2d, which runs it over a
    height of one, would name itself and show its (N, C, 1, L) view); the rest stay conv2d's. The groups, checked."""
    groups = _tensor_ints(groups)
    if not isinstance(groups, _numbers.Integral) or isinstance(groups, bool):  # (a float: PyTorch's TypeError)
        raise InputTypeError(f"{op}: groups must be a positive int, got {groups!r}")
    if groups < 1:
        raise InputError(f"{op}: groups must be a positive int, got {groups!r}")
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise InputError(f"{op}: Invalid padding string: {padding!r} (an int, 'valid' or 'same')")
        if padding == "same" and stride != 1:
            raise InputError(f"{op}: padding='same' is not supported for strided convolutions, got stride={stride}")
    (c, length), (k, r) = input.shape[-2:], (weight.shape[0], weight.shape[2])
    _check_channels(op, input, weight, c, groups)
    pad = 0 if padding == "valid" else dilation * (r - 1) if padding == "same" else 2 * _single(op, "padding",
                                                                                               padding, 0)
    if dilation * (r - 1) + 1 > length + pad:
        raise InputError(f"{op}: kernel {r} (dilation {dilation}, effective {dilation * (r - 1) + 1}) is larger than "
                         f"the padded input {length + pad} (input shape {tuple(input.shape)})")
    if bias is not None and not isinstance(bias, _Tensor):
        raise InputTypeError(f"{op}: bias must be a tensor or None, got {type(bias).__name__}")
    if isinstance(bias, _Tensor) and tuple(bias.shape) != (k,):
        raise InputError(f"{op}: bias must have shape ({k},) to match out_channels, got {tuple(bias.shape)}")
    _check_conv_dtype(op, input)  # (autocast casts floating inputs only: this holds under it too)
    dtypes = [t.dtype for t in (input, weight, bias) if t is not None]
    if len(set(dtypes)) > 1:
        raise InputTypeError(f"{op}: input, weight and bias must have one dtype, got "
                             f"{', '.join(map(str, dtypes))} (no implicit casts)")
    return int(groups)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution as ``torch.nn.functional.conv1d``: ``input`` (N, C, L) or (C, L), ``weight``
    (K, C/groups, k); run as conv2d over a height of one (the same kernels), its arguments checked there."""
    op = "conv1d"
    _check_1d(op, input, weight, "C", "(out_channels, in_channels/groups, k)")
    input, weight, bias = _autocast_lower(input, weight, bias)  # (conv2d's own is then a no-op)
    stride, dilation = _single(op, "stride", stride, 1), _single(op, "dilation", dilation, 1)
    groups = _check_conv_args_1d(op, input, weight, bias, stride, padding, dilation, groups)
    padding = padding if isinstance(padding, str) else (0, _single(op, "padding", padding, 0))
    x = _reshape(input, *input.shape[:-1], 1, input.shape[-1])
    w = _reshape(weight, *weight.shape[:2], 1, weight.shape[2])
    y = conv2d(x, w, bias, (1, stride), padding, (1, dilation), groups)
    return _reshape(y, *y.shape[:-2], y.shape[-1])


@_unbatched
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """2-D transposed convolution as ``torch.nn.functional.conv_transpose2d``: ``input`` (N, C_in, H, W),
    ``weight`` (C_in, C_out/groups, kH, kW); the output is (N, C_out, (H-1)*stride - 2*padding +
    dilation*(kH-1) + output_padding + 1, ...). It runs the convolution's data-gradient kernels forward."""
    return _conv_transpose2d("conv_transpose2d", input, weight, bias, stride, padding, output_padding, groups,
                             dilation)


def _conv_transpose2d(op, input, weight, bias, stride, padding, output_padding, groups, dilation):
    """:func:`conv_transpose2d` of a 4-D input, its errors naming ``op`` (conv_transpose1d runs on it too)."""
    input, weight, bias = _autocast_lower(input, weight, bias)
    groups = _check_conv_args(op, input, weight, groups, "(in_channels, out_channels/groups, kH, kW)")
    stride = _pair(op, "stride", stride, 1)
    padding = _pair(op, "padding", padding, 0)
    dilation = _pair(op, "dilation", dilation, 1)
    output_padding = _pair(op, "output_padding", output_padding, 0)
    n, k, h, w = input.shape
    kin, cg, r, s = weight.shape
    if k != kin:
        raise InputError(f"{op}: input has {k} channels (shape {tuple(input.shape)}) but weight of shape "
                         f"{tuple(weight.shape)} expects {kin}")
    if k % groups:
        raise InputError(f"{op}: in_channels={k} is not divisible by groups={groups}")
    if h == 0 or w == 0:  # (an empty batch or no channel is fine, an empty image is not: PyTorch's rule)
        raise InputError(f"{op}: expected an input of non-zero spatial size (only the batch or channel dimension may "
                         f"be empty), got shape {tuple(input.shape)}")
    for i in (0, 1):
        if output_padding[i] >= max(stride[i], dilation[i]):
            raise InputError(f"{op}: output_padding {output_padding} must be smaller than stride {stride} or "
                             f"dilation {dilation} in each dimension")
    out = tuple((size - 1) * stride[i] - 2 * padding[i] + dilation[i] * (kk - 1) + output_padding[i] + 1
                for i, (size, kk) in enumerate(((h, r), (w, s))))
    if k == 0 or cg == 0:
        raise InputError(f"{op}: expected a weight with at least one input and one output channel, got weight of "
                         f"shape {tuple(weight.shape)}")
    if min(out) < 1:
        raise InputError(f"{op}: the output would be empty (input {tuple(input.shape)}, weight {tuple(weight.shape)}, "
                         f"stride {stride}, padding {padding}: output size {out})")
    dtype = input.dtype
    if weight.dtype != dtype or (isinstance(bias, _Tensor) and bias.dtype != dtype):
        raise InputTypeError(f"{op}: input, weight and bias must have one dtype, got {dtype}, {weight.dtype}"
                             + (f", {bias.dtype}" if isinstance(bias, _Tensor) else "") + " (no implicit casts)")
    _check_conv_dtype(op, input)
    if bias is not None:
        if not isinstance(bias, _Tensor):
            raise InputTypeError(f"{op}: bias must be a tensor or None, got {type(bias).__name__}")
        if tuple(bias.shape) != (cg * groups,):
            raise InputError(f"{op}: bias must have shape ({cg * groups},) to match out_channels, got "
                             f"{tuple(bias.shape)}")
    if weight.device != input.device or (bias is not None and bias.device != input.device):
        devs = [str(input.device), str(weight.device)] + ([str(bias.device)] if bias is not None else [])
        raise RuntimeError(f"{op}: expected input, weight and bias on one device, got {', '.join(devs)}")
    if dtype in _CONV_INTEGERS:
        y = _integer_conv_transpose2d(input, weight, out, stride, padding, dilation, groups)
    else:
        y = _conv_ops.conv_transpose2d(input, weight, (n, cg * groups) + out, stride, padding, dilation, groups)
    return y if bias is None else y + _reshape(bias, 1, -1, 1, 1)


def _integer_conv_transpose2d(input, weight, out, stride, padding, dilation, groups):
    """PyTorch's cpu transposed convolution of integer tensors (no bias): per group the weight's (C_in/groups,
    C_out/groups*kH*kW) matrix, transposed, times the input's (C_in/groups, H*W) columns, folded into the (N, C_out,
    *out) image (its sums in the input's dtype, wrapping as there); channels-last where the input or the weight is."""
    n, cin, h, w = input.shape
    cin_g, taps = cin // groups, weight.shape[1] * weight.shape[2] * weight.shape[3]
    x = _reshape(input, n, cin, h * w)
    parts = [_reshape(weight[g * cin_g:(g + 1) * cin_g], cin_g, taps).t() @ x[:, g * cin_g:(g + 1) * cin_g]
             for g in range(groups)]
    cols = parts[0] if groups == 1 else _cat(parts, 1)  # (N, C_out*kH*kW, H*W), channel-major
    y = _resample.FoldFn.apply(cols, out, tuple(weight.shape[2:]), dilation, padding, stride, (h, w))
    if _is_channels_last(input._data) or _is_channels_last(weight._data):
        y = y.contiguous(memory_format=_channels_last)
    return y


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """1-D transposed convolution as ``torch.nn.functional.conv_transpose1d``: ``input`` (N, C_in, L) or
    (C_in, L), ``weight`` (C_in, C_out/groups, k); run as conv_transpose2d over a height of one."""
    op = "conv_transpose1d"
    _check_1d(op, input, weight, "C_in", "(in_channels, out_channels/groups, k)")
    stride, padding = _single(op, "stride", stride, 1), _single(op, "padding", padding, 0)
    output_padding, dilation = _single(op, "output_padding", output_padding, 0), _single(op, "dilation", dilation, 1)
    if output_padding >= max(stride, dilation):  # checked here so the message names this op and its 1-D values
        raise InputError(f"{op}: output_padding ({output_padding}) must be smaller than stride ({stride}) or "
                         f"dilation ({dilation})")
    # the checks whose messages show shapes, on the 1-D ones (the 2-D op would show its (N, C, 1, L) view)
    (c, length), (cin, _, k) = input.shape[-2:], weight.shape
    if c != cin:
        raise InputError(f"{op}: input has {c} channels (shape {tuple(input.shape)}) but weight of shape "
                         f"{tuple(weight.shape)} expects {cin}")
    if cin == 0 or weight.shape[1] == 0:
        raise InputError(f"{op}: expected a weight with at least one input and one output channel, got weight of "
                         f"shape {tuple(weight.shape)}")
    if length == 0:
        raise InputError(f"{op}: expected an input of non-zero length (only the batch or channel dimension may be "
                         f"empty), got shape {tuple(input.shape)}")
    out = (length - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1
    if out < 1:
        raise InputError(f"{op}: the output would be empty (input {tuple(input.shape)}, weight {tuple(weight.shape)}, "
                         f"stride {stride}, padding {padding}: output length {out})")
    if input.ndim == 2:  # unbatched (C_in, L): a batch of one, as conv_transpose2d's decorator makes it
        y = conv_transpose1d(_reshape(input, 1, *input.shape), weight, bias, stride, padding, output_padding, groups,
                             dilation)
        return _reshape(y, *y.shape[1:])
    x = _reshape(input, *input.shape[:-1], 1, input.shape[-1])
    w = _reshape(weight, *weight.shape[:2], 1, weight.shape[2])
    y = _conv_transpose2d(op, x, w, bias, (1, stride), (0, padding), (0, output_padding), groups, (1, dilation))
    return _reshape(y, *y.shape[:-2], y.shape[-1])


def _no_window(size, kernel, stride, padding, dilation, ceil_mode):
    """Whether pooling leaves no output position along an axis (PyTorch's rule): the window, spanning
    (kernel - 1) * dilation + 1, is larger than the padded input, unless ``ceil_mode`` still starts one window
    inside it (its overhang then counts as padding)."""
    return _pool_out_size(size, kernel, stride, padding, ceil_mode, dilation) < 1


_MAX_POOL_INTEGERS = frozenset({_backend.int8, _backend.uint8, _backend.int16, _backend.int32, _backend.int64})


def _check_integer_pool(op, input, maximum):
    """An input of a pooling whose dtype is not floating, as PyTorch's kernels take it: on the cpu, max pooling
    (``maximum``) every integer dtype but bool and average pooling int64 alone; on cuda none (PyTorch's cuda
    pooling kernels take floating-point inputs only)."""
    if input.device.type != "cpu":
        raise DtypeNotImplementedError(f"{op}: expected a floating-point input on {input.device} (integer inputs "
                                       f"are pooled on the cpu only), got {input.dtype}")
    if input.dtype not in (_MAX_POOL_INTEGERS if maximum else (_backend.int64,)):
        raise DtypeNotImplementedError(f"{op}: expected a floating-point or "
                                       f"{'integer (not bool)' if maximum else 'int64'} input, got {input.dtype}")


def _check_pool_nonempty(op, input, spatial):
    """PyTorch's pools take an empty batch but no empty channel or spatial dimension (an unbatched input's C too)."""
    if 0 in input.shape[-spatial - 1:]:
        raise InputError(f"{op}: expected a {spatial + 1}-D or {spatial + 2}-D (batch mode) input with optional 0 dim "
                         f"batch size and non-zero other dimensions, got shape {tuple(input.shape)}")


def _pooling(spatial):
    """A decorator: a pooling of (N, C, *spatial) input that takes an unbatched (C, *spatial) one too (as
    :func:`unbatched`), PyTorch's rule on empty dimensions checked on the input as given, so that the message
    shows the shape that came (not its batch-of-one view)."""
    def decorate(fn):
        run = unbatched(spatial)(fn)

        @_functools.wraps(fn)
        def pooling(input, *args, **kwargs):
            if isinstance(input, _Tensor) and input.ndim in (spatial + 1, spatial + 2):
                _check_pool_nonempty(fn.__name__, input, spatial)
            return run(input, *args, **kwargs)
        return pooling
    return decorate


def _pool_args(op, input, kernel_size, stride, padding, dilation=(1, 1), ceil_mode=False, maximum=True):
    """(kernel, stride, padding) pairs, checked; ``dilation`` (max pooling's, a checked pair) spaces a window's
    taps, so the window spans (k - 1) * d + 1. ``maximum``: max pooling's dtypes (else average pooling's)."""
    _check_image(op, input)
    _check_pool_nonempty(op, input, 2)
    if not _backend.is_floating(input.dtype):
        _check_integer_pool(op, input, maximum)
    kernel = _pair(op, "kernel_size", kernel_size, 1)
    stride = kernel if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) else \
        _pair(op, "stride", stride, 1)
    padding = _pair(op, "padding", padding, 0)
    span = tuple((k - 1) * d + 1 for k, d in zip(kernel, dilation))
    if padding[0] > kernel[0] // 2 or padding[1] > kernel[1] // 2:
        raise InputError(f"{op}: padding {padding} must be at most half the kernel size {kernel}")
    h, w = input.shape[2:]
    if any(_no_window(size, k, s, p, d, ceil_mode)
           for size, k, s, p, d in zip((h, w), kernel, stride, padding, dilation)):
        dilated = f" (dilation {dilation}: it spans {span[0]}x{span[1]})" if tuple(dilation) != (1, 1) else ""
        raise InputError(f"{op}: kernel {kernel}{dilated} is larger than the padded input "
                         f"{h + 2 * padding[0]}x{w + 2 * padding[1]} (input shape {tuple(input.shape)})")
    return kernel, stride, padding


@_pooling(2)
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max pooling as ``torch.nn.functional.max_pool2d`` (``dilation``: the spacing of a window's taps). With
    ``return_indices``, ``(output, indices)``: each maximum's flat index ``h*W + w`` in its (H, W) plane, int64,
    as PyTorch's."""
    dilation = _pair("max_pool2d", "dilation", dilation, 1)
    kernel, stride, padding = _pool_args("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode)
    return _pool_ops.max_pool2d(input, kernel, stride, padding, ceil_mode, bool(return_indices), dilation)


@_pooling(2)
def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Average pooling as ``torch.nn.functional.avg_pool2d`` (``count_include_pad=True`` by default;
    ``divisor_override``, a nonzero int, divides every window's sum in place of its size)."""
    divisor_override = _tensor_ints(divisor_override)
    if divisor_override is not None and (not isinstance(divisor_override, _numbers.Integral)
                                         or isinstance(divisor_override, bool)):  # (a float: PyTorch's TypeError)
        raise InputTypeError(f"avg_pool2d: divisor_override must be a nonzero int or None, got {divisor_override!r}")
    if divisor_override == 0:
        raise InputError(f"avg_pool2d: divisor_override must be a nonzero int or None, got {divisor_override!r}")
    kernel, stride, padding = _pool_args("avg_pool2d", input, kernel_size, stride, padding, ceil_mode=ceil_mode,
                                         maximum=False)
    return _pool_ops.avg_pool2d(input, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override or 0)


def _pool1d(op, pool, input, kernel_size, stride, padding, *rest, dilation=1, ceil_mode=False):
    """A 1-D pooling of a (N, C, L) or (C, L) input as the 2-D one over a height of one (the same kernels), its
    1-D arguments checked here (``dilation``: max pooling's, an int >= 1, which ``rest`` passes on as a pair);
    indices come back as positions along L."""
    if not isinstance(input, _Tensor):  # (PyTorch's TypeError)
        raise InputTypeError(f"{op}: expected a tensor input, got {type(input).__name__}")
    if input.ndim not in (2, 3):
        raise InputError(f"{op}: expected a 3-D input (N, C, L) or a 2-D unbatched one (C, L), got "
                         f"{tuple(input.shape)}")
    _check_pool_nonempty(op, input, 1)
    k = _single(op, "kernel_size", kernel_size, 1)
    s = k if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) else \
        _single(op, "stride", stride, 1)
    p = _single(op, "padding", padding, 0)
    if p > k // 2:
        raise InputError(f"{op}: padding {p} must be at most half the kernel size {k}")
    d = dilation
    if _no_window(input.shape[-1], k, s, p, d, ceil_mode):
        dilated = f" (dilation {d}: it spans {(k - 1) * d + 1})" if d != 1 else ""
        raise InputError(f"{op}: kernel {k}{dilated} is larger than the padded input {input.shape[-1] + 2 * p} "
                         f"(input shape {tuple(input.shape)})")
    out = pool(_reshape(input, *input.shape[:-1], 1, input.shape[-1]), (1, k), (1, s), (0, p), *rest)

    def squeeze(t):
        return _reshape(t, *t.shape[:-2], t.shape[-1])
    return tuple(squeeze(t) for t in out) if isinstance(out, tuple) else squeeze(out)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max pooling along L as ``torch.nn.functional.max_pool1d`` (``dilation``: the spacing of a window's taps).
    An integer input is pooled (on the cpu) with ``return_indices`` only, as PyTorch's, whose max_pool1d without
    indices is implemented for floating-point inputs alone."""
    if isinstance(input, _Tensor) and not _backend.is_floating(input.dtype):
        if not return_indices:
            raise DtypeNotImplementedError(f"max_pool1d: expected a floating-point input (an integer one is pooled "
                                           f"with return_indices=True only), got {input.dtype}")
        _check_integer_pool("max_pool1d", input, True)
    d = _single("max_pool1d", "dilation", dilation, 1)
    return _pool1d("max_pool1d", max_pool2d, input, kernel_size, stride, padding, (1, d), ceil_mode, return_indices,
                   dilation=d, ceil_mode=ceil_mode)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """Average pooling along L as ``torch.nn.functional.avg_pool1d``."""
    if isinstance(input, _Tensor) and not _backend.is_floating(input.dtype):
        _check_integer_pool("avg_pool1d", input, False)
    return _pool1d("avg_pool1d", avg_pool2d, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                   ceil_mode=ceil_mode)


def _block_dtype(op, input):
    """Unfold and fold copy and add, so they take what PyTorch's do: floating, complex and bool tensors."""
    if not (_backend.is_floating(input.dtype) or input.dtype.kind in "cb"):
        raise DtypeNotImplementedError(f"{op}: expected a floating-point, complex or bool input, got {input.dtype}")


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """The sliding local blocks of (N, C, H, W) (or (C, H, W)) input as columns, as ``torch.nn.functional.unfold``:
    (N, C*kh*kw, L), L the blocks' count, channel-major within a column. Strided copies, one per kernel tap (a
    product with one-hot weights would spread an inf or NaN, as ``0 * inf``, to other columns)."""
    op = "unfold"
    if not isinstance(input, _Tensor):  # (PyTorch's TypeError)
        raise InputTypeError(f"{op}: expected a tensor input, got {type(input).__name__}")
    if input.ndim not in (3, 4):
        raise InputError(f"{op}: Input Error: Only 3D or 4D input Tensors are supported (got {input.ndim}D)")
    kernel, dilation = _pair(op, "kernel_size", kernel_size, 1), _pair(op, "dilation", dilation, 1)
    padding, stride = _pair(op, "padding", padding, 0), _pair(op, "stride", stride, 1)
    _block_dtype(op, input)
    if 0 in input.shape[-3:]:
        raise InputError(f"{op}: expected a 3-D or 4-D input with possibly 0 batch size and other non-zero "
                         f"dimensions, got shape {tuple(input.shape)}")
    x = input if input.ndim == 4 else _reshape(input, 1, *input.shape)
    h, w = x.shape[2:]
    blocks = tuple((size + 2 * padding[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1
                   for i, size in enumerate((h, w)))
    if min(blocks) < 1:
        raise InputError(f"{op}: Given input with spatial size ({h}, {w}), kernel_size={kernel}, dilation="
                         f"{dilation}, padding={padding}, calculated shape of the array of sliding blocks as "
                         f"{(max(blocks[0], 0), max(blocks[1], 0))}, but its components must be at least one.")
    y = _resample.UnfoldFn.apply(x, kernel, dilation, padding, stride, blocks)
    return y if input.ndim == 4 else _reshape(y, *y.shape[1:])


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """The inverse arrangement of :func:`unfold`: (N, C*kh*kw, L) (or (C*kh*kw, L)) columns summed into an
    (N, C, *output_size) image where their blocks overlap, as ``torch.nn.functional.fold`` (strided adds, one
    per kernel tap)."""
    op = "fold"
    if not isinstance(input, _Tensor):  # (PyTorch's TypeError)
        raise InputTypeError(f"{op}: expected a tensor input, got {type(input).__name__}")
    if input.ndim not in (2, 3):
        raise InputError(f"{op}: Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported (got "
                         f"{input.ndim}D)")
    size, kernel = _pair(op, "output_size", output_size, 1), _pair(op, "kernel_size", kernel_size, 1)
    dilation, padding, stride = (_pair(op, "dilation", dilation, 1), _pair(op, "padding", padding, 0),
                                 _pair(op, "stride", stride, 1))
    _block_dtype(op, input)
    if 0 in input.shape[-2:]:
        raise InputError(f"{op}: expected a 2-D or 3-D input with possibly 0 batch size and non-zero dimensions, "
                         f"got shape {tuple(input.shape)}")
    x = input if input.ndim == 3 else _reshape(input, 1, *input.shape)
    k = kernel[0] * kernel[1]
    if x.shape[1] % k:
        raise RuntimeError(f"{op}: Expected size of input's dimension 1 to be divisible by the product of kernel_size, "
                           f"but got input.size(1)={x.shape[1]} and kernel_size={kernel}")
    blocks = [(size[i] + 2 * padding[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1 for i in (0, 1)]
    if min(blocks) < 1 or blocks[0] * blocks[1] != x.shape[2]:
        raise RuntimeError(f"{op}: Given output_size={size}, kernel_size={kernel}, dilation={dilation}, "
                           f"padding={padding}, stride={stride}, expected size of input's dimension 2 to match the "
                           f"calculated number of sliding blocks {blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]}, "
                           f"but got input.size(2)={x.shape[2]}.")
    y = _resample.FoldFn.apply(x, size, kernel, dilation, padding, stride, tuple(blocks))
    return y if input.ndim == 3 else _reshape(y, *y.shape[1:])


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of ``max_pool2d(..., return_indices=True)``, as ``torch.nn.functional.max_unpool2d``:
    each value put back at its index (``h*W + w`` of its plane), zeros elsewhere; the output (H, W) is
    ``(H_in - 1) * stride - 2 * padding + kernel_size``, or ``output_size``."""
    op = "max_unpool2d"
    (input,) = _autocast_float32(input, devices=("cpu",))  # (on PyTorch's cpu autocast float32 list)
    if not isinstance(input, _Tensor) or not isinstance(indices, _Tensor):  # (PyTorch's TypeError)
        raise InputTypeError(f"{op}: expected tensors for input and indices, got {type(input).__name__} and "
                             f"{type(indices).__name__}")
    if input.ndim not in (3, 4):
        raise InputError(f"{op}: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape "
                         f"{tuple(input.shape)}")
    if tuple(indices.shape) != tuple(input.shape) or indices.dtype != _backend.int64:
        raise InputError(f"{op}: expected int64 indices of the input's shape {tuple(input.shape)}, got "
                         f"{indices.dtype} {tuple(indices.shape)}")
    if 0 in input.shape[1:]:  # (PyTorch's rule: an empty batch is fine, an unbatched input's C=0 too)
        raise InputError(f"{op}: Expected input to have non-zero size for non-batch dimensions, but got "
                         f"{list(input.shape)}")
    kernel = _pair(op, "kernel_size", kernel_size, 1)
    stride = kernel if stride is None else _pair(op, "stride", stride, 1)
    padding = _pair(op, "padding", padding, 0)
    h, w = _unpool_size(op, [(input.shape[-2 + i] - 1) * stride[i] - 2 * padding[i] + kernel[i] for i in (0, 1)],
                        stride, output_size)
    x = input if input.ndim == 4 else _reshape(input, 1, *input.shape)
    idx = indices if indices.ndim == 4 else _reshape(indices, 1, *indices.shape)
    n, c = x.shape[:2]
    flat_idx = _reshape(idx, n, c, idx.shape[2] * idx.shape[3])
    if flat_idx.numel() and (int(flat_idx.min().item()) < 0 or int(flat_idx.max().item()) >= h * w):
        raise RuntimeError(f"{op}: Found an invalid max index (indices must lie in [0, {h * w}) for an output of "
                           f"{h}x{w})")
    out = x.new_zeros((n, c, h * w)).scatter(2, flat_idx, _reshape(x, n, c, x.shape[2] * x.shape[3]))
    out = _reshape(out, n, c, h, w)
    if input.ndim == 4 and _is_channels_last(input._data):
        out = out.contiguous(memory_format=_channels_last)  # (the input's layout, as PyTorch's)
    return out if input.ndim == 4 else _reshape(out, c, h, w)

