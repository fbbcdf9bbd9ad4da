"""Volumetric (3-D) convolution and pooling with PyTorch's names: ``conv3d``, ``conv_transpose3d``, ``max_pool3d``,
``avg_pool3d``, the adaptive poolings, ``lp_pool3d`` and ``max_unpool3d``, on (N, C, D, H, W) or unbatched
(C, D, H, W) inputs. Each is a composition of the 2-D ops: the (H, W) work is one 2-D call per kernel depth tap
on a batch that stacks the depth slices (N*D_out planes at once), the depth work is a sum (or a first-maximum
pick) across those taps. So autograd and both devices come from the 2-D ops; errors are checked here, with
PyTorch's exception types, so the 2-D ops underneath never see an argument they would refuse."""
from __future__ import annotations

import functools
import math
import numbers

import numpy as np

from .. import backend
from ..ops import cat, stack, where
from ..ops._common import autocast_float32, autocast_lower
from ..ops.shape import channels_last_3d, contiguous_format, reshape
from ..tensor import Tensor
from ._checks import NormTypeZeroError, _tensor_ints, _unpool_size, unbatched
from .conv import (SAME_ASYMMETRIC, _check_conv_dtype, _check_integer_pool, _no_channels, _pooling, avg_pool2d,
                   conv2d, conv_transpose2d, max_pool2d)
from .layers import _int_tensors_as_ints, adaptive_avg_pool2d, adaptive_max_pool2d, pad
from ..backend import DtypeNotImplementedError, InputError, InputTypeError

__all__ = ["conv3d", "conv_transpose3d", "max_pool3d", "max_pool3d_with_indices", "avg_pool3d",
           "adaptive_avg_pool3d", "adaptive_max_pool3d", "adaptive_max_pool3d_with_indices", "lp_pool3d",
           "max_unpool3d"]

_CPU = ("cpu",)  # the pools on PyTorch's cpu autocast float32 list (a region computes them in float32 there)


# ---------------------------------------------------------------- argument helpers
def _triple(op, name, value, minimum):
    """An int or a 3-sequence of ints, each >= ``minimum`` (PyTorch: TypeError for non-ints; else a RuntimeError, or
    the ValueError of a wrong length's unpacking: InputError is both)."""
    value = _tensor_ints(value)  # (one-element integer tensors as their ints, as PyTorch takes them)
    vals = tuple(value) if isinstance(value, (tuple, list)) else (value,) * 3
    if len(vals) == 1:
        vals = vals * 3
    if len(vals) != 3:
        raise InputError(f"{op}: {name} must be an int or a tuple of three ints, got {value!r}")
    if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in vals):
        raise InputTypeError(f"{op}: {name} must be an int or a tuple of three ints, got {value!r}")
    if min(vals) < minimum:
        raise InputError(f"{op}: {name} must be >= {minimum}, got {value!r}")
    return tuple(int(v) for v in vals)


def _check_volume(op, input, what="input"):
    if not isinstance(input, Tensor):
        raise InputTypeError(f"{op}: expected a tensor {what}, got {type(input).__name__}")
    if input.ndim not in (4, 5):
        raise RuntimeError(f"{op}: expected a 5-D {what} (N, C, D, H, W) or a 4-D unbatched one (C, D, H, W), got "
                           f"shape {tuple(input.shape)}")


_unbatched = unbatched(3)  # (C, D, H, W) inputs too


def _planes(x):
    """(N, C, D, H, W) as (N, C*D, H, W): every depth plane an image of the 2-D ops."""
    n, c, d, h, w = x.shape
    return reshape(x, n, c * d, h, w)


def _pad_dim(x, dim, lo, hi, value=0.0):
    """``x`` padded (negative: cropped) by ``lo`` / ``hi`` along ``dim`` with ``value``."""
    if lo == 0 and hi == 0:
        return x
    spec = [0] * (2 * (x.ndim - dim))
    spec[-2:] = [lo, hi]
    return pad(x, tuple(spec), value=value)


def _pooled_size(n, k, s, p, d, ceil_mode):
    """PyTorch's pooling output size along one dimension (a ceil_mode window must start inside input or left pad)."""
    out = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _check_pool(op, input, kernel_size, stride, padding, dilation, ceil_mode, integers=None):
    """(kernel, stride, padding, dilation, output (D, H, W)) of a 3-D pooling, checked as PyTorch's. ``integers``:
    'max' or 'avg' where the pooling takes that pooling's integer dtypes on the cpu, 'any' where the poolings it
    runs check the dtype (None: floating-point only)."""
    _check_volume(op, input)
    if integers != "any" and not backend.is_floating(input.dtype):
        if integers is None:
            raise DtypeNotImplementedError(f"{op}: expected a floating-point input, got {input.dtype}")
        _check_integer_pool(op, input, integers == "max")
    if 0 in input.shape[-4:]:
        raise RuntimeError(f"{op}: expected a non-empty input (C, D, H, W), got shape {tuple(input.shape)}")
    kernel = _triple(op, "kernel_size", kernel_size, 1)
    no_stride = stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0)
    stride = kernel if no_stride else _triple(op, "stride", stride, 1)
    padding = _triple(op, "padding", padding, 0)
    dilation = _triple(op, "dilation", dilation, 1)
    if any(p > k // 2 for p, k in zip(padding, kernel)):
        raise RuntimeError(f"{op}: pad should be smaller than or equal to half of kernel size, but got padding "
                           f"{padding} for kernel_size {kernel}")
    sizes = tuple(input.shape[-3:])
    out = tuple(_pooled_size(*args, ceil_mode) for args in zip(sizes, kernel, stride, padding, dilation))
    if min(out) < 1:
        raise RuntimeError(f"{op}: Given input size: {tuple(input.shape)}. Calculated output size: {out}. Output "
                           f"size is too small (kernel_size {kernel}, stride {stride}, padding {padding}, dilation "
                           f"{dilation})")
    return kernel, stride, padding, dilation, out


def _depth_taps(x, kernel, stride, padding, dilation, out, value):
    """The (N, C, kD, D_out, ...) stack of each depth tap's planes over the output depths of (N, C, D, ...) ``x``:
    tap t of output depth o is input depth o*s - p + t*d, ``value`` where that lies outside the input."""
    span = (out - 1) * stride + dilation * (kernel - 1) + 1  # the padded depth the windows reach
    xp = _pad_dim(x, 2, padding, span - padding - x.shape[2], value)
    taps = [xp[:, :, t * dilation:t * dilation + (out - 1) * stride + 1:stride] for t in range(kernel)]
    return stack(taps, 2)


def _first_max(t, dim, inside=None):
    """The int64 positions (keeping ``dim``, no gradient) of each first maximum of tensor ``t`` along ``dim``
    (PyTorch's scan: a larger value or a NaN replaces the current pick, so ties keep the first, NaNs the last);
    where ``inside`` (a boolean array broadcasting against ``t``) is given, the first maximum among its True
    positions: the padding a window reaches never ties with a real -inf."""
    xp, values = t._xp, t._data
    if inside is None:
        first = values.argmax(axis=dim)
    else:
        first = ((values == xp.expand_dims(values.max(axis=dim), dim)) & inside).argmax(axis=dim)
    nans = xp.isnan(values)
    last_nan = values.shape[dim] - 1 - xp.flip(nans, axis=dim).argmax(axis=dim)
    return Tensor._from_array(xp.expand_dims(backend.where(nans.any(axis=dim), last_nan, first).astype(np.int64), dim))


# ---------------------------------------------------------------- convolution
def _check_conv3d(op, input, weight, bias, groups, layout, out_channels, integers=False):
    _check_volume(op, input)
    if not isinstance(weight, Tensor):
        raise InputTypeError(f"{op}: expected a tensor weight, got {type(weight).__name__}")
    if weight.ndim != 5:
        raise RuntimeError(f"{op}: weight must be 5-D {layout}, got shape {tuple(weight.shape)}")
    if not isinstance(groups, numbers.Integral) or isinstance(groups, bool):  # (a float: PyTorch's TypeError)
        raise InputTypeError(f"{op}: groups must be a positive int, got {groups!r}")
    if groups < 1:
        raise RuntimeError(f"{op}: groups must be a positive int, got {groups!r}")
    dtype = input.dtype
    _check_conv_dtype(op, input, integers)  # (integers: conv3d's, on the cpu, as PyTorch's)
    if weight.dtype != dtype or (isinstance(bias, Tensor) and bias.dtype != dtype):
        raise RuntimeError(f"{op}: input, weight and bias must have one dtype, got {dtype}, {weight.dtype}"
                           + (f", {bias.dtype}" if isinstance(bias, Tensor) else "") + " (no implicit casts)")
    if bias is not None:
        if not isinstance(bias, Tensor):
            raise InputTypeError(f"{op}: bias must be a tensor or None, got {type(bias).__name__}")
        if tuple(bias.shape) != (out_channels,):
            raise RuntimeError(f"{op}: bias must have shape ({out_channels},) to match out_channels, got "
                               f"{tuple(bias.shape)}")
    if weight.device != input.device or (bias is not None and bias.device != input.device):
        devs = [str(input.device), str(weight.device)] + ([str(bias.device)] if bias is not None else [])
        raise RuntimeError(f"{op}: expected input, weight and bias on one device, got {', '.join(devs)}")


def _conv_layout(input, weight):
    """The memory format of a 3-d convolution's result, as PyTorch's: channels_last_3d where the input or the weight
    is laid out so (and is not also contiguous), but for float64 and integers, whose kernels (slow_conv3d; cuDNN's
    rule too) return contiguous results."""
    def cl3d(t):
        return t.is_contiguous(memory_format=channels_last_3d) and not t.is_contiguous()

    if input.dtype in (backend.float32, backend.float16, backend.bfloat16) and (cl3d(input) or cl3d(weight)):
        return channels_last_3d
    return contiguous_format


def _same_padding(input, kernel, dilation):
    """'same': the input padded by the odd element of each even effective kernel (after, as PyTorch's) and the
    symmetric padding left to the convolution."""
    total = [d * (k - 1) for d, k in zip(dilation, kernel)]
    if any(t % 2 for t in total):
        backend.warn_once("conv_padding_same", SAME_ASYMMETRIC, stacklevel=5)
        input = pad(input, (0, total[2] % 2, 0, total[1] % 2, 0, total[0] % 2))
    return input, tuple(t // 2 for t in total)


@_unbatched
def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution as ``torch.nn.functional.conv3d``: ``input`` (N, C, D, H, W) or (C, D, H, W), ``weight``
    (K, C/groups, kD, kH, kW), ``bias`` (K,) or None; ``padding`` an int, a triple, 'valid' or 'same' (stride 1).
    One conv2d per kernel depth tap over the N*D_out depth slices the tap reads, summed."""
    op = "conv3d"
    input, weight, bias = autocast_lower(input, weight, bias)
    _check_conv3d(op, input, weight, bias, groups, "(out_channels, in_channels/groups, kD, kH, kW)",
                  weight.shape[0] if isinstance(weight, Tensor) and weight.ndim == 5 else 0, integers=True)
    stride, dilation = _triple(op, "stride", stride, 1), _triple(op, "dilation", dilation, 1)
    k, cg, kd, kh, kw = weight.shape
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise RuntimeError(f"{op}: Invalid padding string: {padding!r} (expected 'valid', 'same', an int or a "
                               f"triple)")
        if padding == "same" and stride != (1, 1, 1):
            raise RuntimeError(f"{op}: padding='same' is not supported for strided convolutions, got stride "
                               f"{stride}")
        input, padding = _same_padding(input, (kd, kh, kw), dilation) if padding == "same" else (input, (0, 0, 0))
    padding = _triple(op, "padding", padding, 0)
    n, c, d, h, w = input.shape
    if c != cg * groups:
        raise RuntimeError(f"{op}: Given groups={groups}, weight of size {tuple(weight.shape)} expects the input to "
                           f"have {cg * groups} channels, but got input of shape {tuple(input.shape)}")
    if k % groups:
        raise RuntimeError(f"{op}: Given groups={groups}, out_channels={k} (weight of size {tuple(weight.shape)}) "
                           f"is not divisible by groups")
    if k == 0:
        raise RuntimeError(f"{op}: expected a weight with at least {groups} output channel(s) (groups={groups}), got "
                           f"weight of shape {tuple(weight.shape)}")
    eff = tuple(dl * (kk - 1) + 1 for dl, kk in zip(dilation, (kd, kh, kw)))
    padded = tuple(s + 2 * p for s, p in zip((d, h, w), padding))
    if any(e > p for e, p in zip(eff, padded)):
        raise RuntimeError(f"{op}: Calculated padded input size per channel: {padded}. Kernel size: {eff} (dilation "
                           f"{dilation}). Kernel size can't be greater than actual input size")
    if c == 0:
        return _no_channels(input, weight, bias, stride, padding, dilation, groups)
    d_out = (padded[0] - eff[0]) // stride[0] + 1
    # (N, D, C, H, W): the depth slices a tap reads are one strided slice, batched with N by a reshape
    xt = _pad_dim(input, 2, padding[0], padding[0]).permute(0, 2, 1, 3, 4)
    y = None
    for t in range(kd):
        start = t * dilation[0]
        xs = reshape(xt[:, start:start + (d_out - 1) * stride[0] + 1:stride[0]], n * d_out, c, h, w)
        yt = conv2d(xs, weight[:, :, t], None, stride[1:], padding[1:], dilation[1:], groups)
        y = yt if y is None else y + yt
    y = reshape(y, n, d_out, *y.shape[1:]).permute(0, 2, 1, 3, 4).contiguous(memory_format=_conv_layout(input,
                                                                                                         weight))
    return y if bias is None else y + reshape(bias, 1, -1, 1, 1, 1)


@_unbatched
def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """3-D transposed convolution as ``torch.nn.functional.conv_transpose3d``: ``input`` (N, C_in, D, H, W),
    ``weight`` (C_in, C_out/groups, kD, kH, kW); the output depth is (D-1)*stride - 2*padding + dilation*(kD-1) +
    output_padding + 1 (H, W alike). One conv_transpose2d per kernel depth tap, spread over the output depths
    (stride-1 zeros between the input depths, shifted by the tap) and summed."""
    op = "conv_transpose3d"
    input, weight, bias = autocast_lower(input, weight, bias)
    _check_conv3d(op, input, weight, bias, groups, "(in_channels, out_channels/groups, kD, kH, kW)",
                  weight.shape[1] * groups if isinstance(weight, Tensor) and weight.ndim == 5 and
                  isinstance(groups, int) else 0, integers=True)
    stride, dilation = _triple(op, "stride", stride, 1), _triple(op, "dilation", dilation, 1)
    padding, output_padding = _triple(op, "padding", padding, 0), _triple(op, "output_padding", output_padding, 0)
    n, c, d, h, w = input.shape
    cin, cg, kd, kh, kw = weight.shape
    if c != cin:
        raise RuntimeError(f"{op}: Given transposed=1, weight of size {tuple(weight.shape)} expects the input to have "
                           f"{cin} channels, but got input of shape {tuple(input.shape)}")
    if cin % groups:
        raise RuntimeError(f"{op}: in_channels={cin} is not divisible by groups={groups}")
    if min(d, h, w) == 0:  # (an empty batch or no channel is fine, an empty volume is not: PyTorch's rule)
        raise RuntimeError(f"{op}: expected an input of non-zero spatial size (only the batch or channel dimension "
                           f"may be empty), got shape {tuple(input.shape)}")
    if any(op_ >= max(s, dl) for op_, s, dl in zip(output_padding, stride, dilation)):
        raise RuntimeError(f"{op}: output padding must be smaller than either stride or dilation, got "
                           f"output_padding {output_padding}, stride {stride}, dilation {dilation}")
    out = tuple((size - 1) * s - 2 * p + dl * (kk - 1) + op_ + 1 for size, s, p, dl, kk, op_ in
                zip((d, h, w), stride, padding, dilation, (kd, kh, kw), output_padding))
    if cin == 0 or cg == 0:
        raise RuntimeError(f"{op}: expected a weight with at least one input and one output channel, got weight of "
                           f"shape {tuple(weight.shape)}")
    if min(out) < 1:
        raise RuntimeError(f"{op}: the output would be empty (input {tuple(input.shape)}, weight "
                           f"{tuple(weight.shape)}, stride {stride}, padding {padding}: output size {out})")
    sd = stride[0]
    xs = reshape(input.permute(0, 2, 1, 3, 4), n * d, c, h, w)
    y = None
    for t in range(kd):
        yt = conv_transpose2d(xs, weight[:, :, t], None, stride[1:], padding[1:], output_padding[1:], groups,
                              dilation[1:])
        yt = reshape(yt, n, d, 1, *yt.shape[1:])
        # input depth i lands on output depth i*s + t*dil - pad: stride-1 zeros after each, then the shift
        yt = reshape(_pad_dim(yt, 2, 0, sd - 1), n, d * sd, *yt.shape[3:])
        lo = t * dilation[0] - padding[0]
        yt = _pad_dim(yt, 1, lo, out[0] - d * sd - lo)
        y = yt if y is None else y + yt
    y = y.permute(0, 2, 1, 3, 4).contiguous(memory_format=_conv_layout(input, weight))
    return y if bias is None else y + reshape(bias, 1, -1, 1, 1, 1)


# ---------------------------------------------------------------- max / average pooling
def _max_pool3d(op, input, kernel_size, stride, padding, dilation, ceil_mode):
    """(output, indices) of a (N, C, D, H, W) max pooling: the 2-D pool of every plane, then per output depth the
    first tap holding the maximum (its value gathered, so the gradient reaches that one element, as PyTorch's)."""
    (input,) = autocast_float32(input, devices=_CPU)
    kernel, stride, padding, dilation, out = _check_pool(op, input, kernel_size, stride, padding, dilation,
                                                         ceil_mode, "max")
    n, c, d, h, w = input.shape
    v, i2 = max_pool2d(_planes(input), kernel[1:], stride[1:], padding[1:], dilation[1:], ceil_mode, True)
    v, i2 = reshape(v, n, c, d, *v.shape[2:]), reshape(i2, n, c, d, *i2.shape[2:])
    args = kernel[0], stride[0], padding[0], dilation[0], out[0]
    # (an integer input's depth padding: its dtype's least value, which ``inside`` keeps from being picked)
    taps = _depth_taps(v, *args, -math.inf if backend.is_floating(input.dtype) else int(np.iinfo(input.dtype).min))
    tap_depth = np.arange(out[0])[:, None] * stride[0] - padding[0] + np.arange(kernel[0])[None, :] * dilation[0]
    inside = backend.to_device(((tap_depth >= 0) & (tap_depth < d)).T.reshape(kernel[0], out[0], 1, 1), input.device)
    pick = _first_max(taps, 2, inside)
    values = taps.gather(2, pick).squeeze(2)
    # the flat index: the picked tap's input depth times H*W plus its in-plane index
    depth = pick.squeeze(2) * dilation[0] + Tensor._from_array(
        backend.to_device(np.arange(out[0]).reshape(-1, 1, 1) * stride[0] - padding[0], input.device))
    plane = _depth_taps(i2, *args, 0).gather(2, pick).squeeze(2)
    indices = depth * (h * w) + plane
    if input.is_contiguous(memory_format=channels_last_3d) and not input.is_contiguous():
        # (PyTorch's cpu max_pool3d keeps a channels-last input's layout, for the values and the indices)
        values, indices = (t.contiguous(memory_format=channels_last_3d) for t in (values, indices))
    return values, indices


@_pooling(3)
def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max pooling as ``torch.nn.functional.max_pool3d``; with ``return_indices``, ``(output, indices)``: each
    maximum's flat index ``d*H*W + h*W + w`` in its (D, H, W) volume, int64, the first maximum in PyTorch's scan
    order on ties."""
    y, idx = _max_pool3d("max_pool3d", input, kernel_size, stride, padding, dilation, ceil_mode)
    return (y, idx) if return_indices else y


@_pooling(3)
def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    """``(output, indices)`` of :func:`max_pool3d` (PyTorch's signature; ``return_indices`` is ignored)."""
    return _max_pool3d("max_pool3d_with_indices", input, kernel_size, stride, padding, dilation, ceil_mode)


def _avg_divisor(n, k, s, p, out, count_include_pad):
    """Per output position along one dimension, PyTorch's avg_pool divisor: the window clipped to the padded
    input (count_include_pad) or to the input itself."""
    start = np.arange(out) * s - p
    end = np.minimum(start + k, n + p)
    if count_include_pad:
        return (end - start).astype(np.float64)
    return (np.minimum(end, n) - np.maximum(start, 0)).astype(np.float64)


@_pooling(3)
def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Average pooling as ``torch.nn.functional.avg_pool3d``: the window sums (the 2-D pool's sums of every plane,
    summed over the depth taps) over PyTorch's divisor (``count_include_pad``; ``ceil_mode``'s clipped edge
    windows; or ``divisor_override``, a nonzero int). An int64 input (on the cpu) keeps int64 sums, divided as C
    divides integers (truncating toward zero), as PyTorch's cpu kernel."""
    op = "avg_pool3d"
    (input,) = autocast_float32(input, devices=_CPU)
    if divisor_override is not None and (not isinstance(divisor_override, numbers.Integral)
                                         or isinstance(divisor_override, bool)):
        raise InputTypeError(f"{op}: divisor_override must be an int or None, got {divisor_override!r}")
    if divisor_override == 0:
        raise RuntimeError(f"{op}: divisor must be not zero, got divisor_override=0")
    kernel, stride, padding, _, out = _check_pool(op, input, kernel_size, stride, padding, 1, ceil_mode, "avg")
    n, c, d, h, w = input.shape
    if d < kernel[0] or h < kernel[1] or w < kernel[2]:  # (PyTorch's avg_pool3d rule, whatever the padding)
        raise InputError(f"{op}: input image (T: {d} H: {h} W: {w}) smaller than kernel size (kT: {kernel[0]} "
                         f"kH: {kernel[1]} kW: {kernel[2]})")
    sums = avg_pool2d(_planes(input), kernel[1:], stride[1:], padding[1:], ceil_mode, True, 1)
    sums = reshape(sums, n, c, d, *sums.shape[2:])
    total = _depth_taps(sums, kernel[0], stride[0], padding[0], 1, out[0], 0.0).sum(dim=2)
    floating = backend.is_floating(input.dtype)
    if divisor_override is not None:
        return total / float(divisor_override) if floating else total.div(int(divisor_override), rounding_mode="trunc")
    dz, dy, dx = (_avg_divisor(sz, k, s, p, o, count_include_pad)
                  for sz, k, s, p, o in zip((d, h, w), kernel, stride, padding, out))
    divisor = dz[:, None, None] * dy[None, :, None] * dx[None, None, :]
    divisor = Tensor._from_array(backend.to_device(divisor.astype(np.dtype(input.dtype)), input.device))
    return total / divisor if floating else total.div(divisor, rounding_mode="trunc")


# ---------------------------------------------------------------- adaptive pooling
def _nonempty_features(fn):
    """An adaptive 3-D pooling checking PyTorch's rule on its input as given, before ``_unbatched`` makes a
    (C, D, H, W) one a batch of one: every dimension but the first is nonzero (a batch may be empty, and so may
    an unbatched input's channels)."""
    @functools.wraps(fn)
    def checked(input, *args, **kwargs):
        if isinstance(input, Tensor) and input.ndim in (4, 5) and 0 in input.shape[1:]:
            raise RuntimeError(f"{fn.__name__}: Expected input to have non-zero size for non-batch dimensions, but "
                               f"got shape {tuple(input.shape)}")
        return fn(input, *args, **kwargs)
    return checked


def _adaptive3d(op, input, output_size):
    """(output (D, H, W)) of an adaptive pooling of a 5-D ``input``, checked as PyTorch's (its sizes by
    :func:`_nonempty_features`)."""
    if not isinstance(input, Tensor):
        raise InputTypeError(f"{op}: expected a tensor input, got {type(input).__name__}")
    if input.ndim not in (4, 5):
        raise RuntimeError(f"{op}: Expected 4D or 5D tensor (C, D, H, W) or (N, C, D, H, W), but got shape "
                           f"{tuple(input.shape)}")
    if not backend.is_floating(input.dtype):  # (PyTorch's adaptive pools take no integers, on either device)
        raise DtypeNotImplementedError(f"{op}: not implemented for dtype {input.dtype} (expected a floating-point "
                                       f"input)")
    output_size = _int_tensors_as_ints(op, output_size, 3)
    if output_size is None:  # (None keeps one dimension of a triple, not all three: PyTorch's TypeError)
        raise InputTypeError(f"{op}: output_size must be an int or a triple (None keeps a dimension), got None")
    sizes = tuple(output_size) if isinstance(output_size, (tuple, list)) else (output_size,) * 3
    if len(sizes) != 3:
        raise InputError(f"{op}: output_size must be an int or a triple (None keeps a dimension), got "
                           f"{output_size!r}")
    sizes = tuple(input.shape[-3 + i] if s is None else s for i, s in enumerate(sizes))
    if not all(isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in sizes):
        raise InputTypeError(f"{op}: output_size must be ints (or None to keep a dimension), got {output_size!r}")
    if min(sizes) < 0:
        raise RuntimeError(f"{op}: elements of output_size must be greater than or equal to 0, got {output_size!r}")
    return tuple(int(s) for s in sizes)


def _bins(n, m):
    """PyTorch's adaptive bins of n into m: [floor(i*n/m), ceil((i+1)*n/m))."""
    return [((i * n) // m, -(-(i + 1) * n // m)) for i in range(m)]


def _empty(x, out):
    """The empty result of pooling to a zero size, still on the tape (its gradient is zero)."""
    return reshape(reshape(x, -1)[:0], *x.shape[:2], *out)


@_nonempty_features
@_unbatched
def adaptive_avg_pool3d(input, output_size):
    """Average over PyTorch's adaptive bins, as ``torch.nn.functional.adaptive_avg_pool3d``; ``output_size`` an
    int or a triple, None keeping that dimension. The depth bins' means (one per output depth), then the 2-D
    adaptive pool of every plane."""
    (input,) = autocast_float32(input, devices=_CPU)
    out = _adaptive3d("adaptive_avg_pool3d", input, output_size)
    if 0 in out or input.numel() == 0:  # (an empty batch, or an unbatched input's zero channels)
        return _empty(input, out)
    n, c, d = input.shape[:3]
    x = input if out[0] == d else cat([input[:, :, lo:hi].mean(dim=2, keepdim=True) for lo, hi in
                                       _bins(d, out[0])], 2)
    y = adaptive_avg_pool2d(_planes(x), out[1:])
    return reshape(y, n, c, *out)


def _adaptive_max3d(op, input, output_size):
    (input,) = autocast_float32(input, devices=_CPU)
    out = _adaptive3d(op, input, output_size)
    if 0 in out or input.numel() == 0:
        return _empty(input, out), Tensor._from_array(input._xp.zeros(input.shape[:2] + out, np.int64))
    n, c, d, h, w = input.shape
    v, i2 = adaptive_max_pool2d(_planes(input), out[1:], True)
    v, i2 = reshape(v, n, c, d, *out[1:]), reshape(i2, n, c, d, *out[1:])
    values, indices = [], []
    for lo, hi in _bins(d, out[0]):  # per output depth: its bin's first maximum, as PyTorch's scan
        pick = _first_max(v[:, :, lo:hi], 2)
        values.append(v[:, :, lo:hi].gather(2, pick))
        indices.append((pick + lo) * (h * w) + i2[:, :, lo:hi].gather(2, pick))
    return cat(values, 2), cat(indices, 2)


@_nonempty_features
@_unbatched
def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Maximum over PyTorch's adaptive bins, as ``torch.nn.functional.adaptive_max_pool3d``; with
    ``return_indices``, ``(output, indices)``: flat ``d*H*W + h*W + w`` indices (int64)."""
    y, idx = _adaptive_max3d("adaptive_max_pool3d", input, output_size)
    return (y, idx) if return_indices else y


@_nonempty_features
@_unbatched
def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    """``(output, indices)`` of :func:`adaptive_max_pool3d`."""
    return _adaptive_max3d("adaptive_max_pool3d_with_indices", input, output_size)


# ---------------------------------------------------------------- power-average pooling, unpooling
def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling as ``torch.nn.functional.lp_pool3d``: ``(sum over the window of x^p) ^ (1/p)``
    (PyTorch's composition: avg_pool3d of x^p times the kernel's volume); p = +-inf: the max (min) of |x|."""
    op = "lp_pool3d"
    if isinstance(norm_type, bool) or not isinstance(norm_type, numbers.Real):
        raise InputTypeError(f"{op}: norm_type must be a number, got {type(norm_type).__name__}")
    p = float(norm_type)
    if p == 0:
        raise NormTypeZeroError(f"{op}: norm_type must be a non-zero value, but got {norm_type}")
    # (the dtype is the poolings' to check: an integer input is raised to the power as PyTorch's
    # ``input.pow(norm_type)`` raises it, to the default float dtype by a float norm_type, to an integer dtype by
    # an int one, which avg_pool3d then takes or refuses, as there)
    kernel, *_ = _check_pool(op, input, kernel_size, stride, 0, 1, ceil_mode, "any")
    if math.isinf(p):
        return max_pool3d(input.abs(), kernel_size, stride, 0, 1, ceil_mode) if p > 0 else \
            -max_pool3d(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    integral = not backend.is_floating(input.dtype) and isinstance(norm_type, numbers.Integral)
    total = avg_pool3d(input.pow(int(norm_type) if integral else p), kernel_size, stride, 0, ceil_mode) * \
        math.prod(kernel)
    # a window summing to 0 gives 0 ** (1/p) with a zero gradient (PyTorch's sign * relu(abs) masks the infinite
    # derivative of the power); negative sums with fractional 1/p give NaN, as there
    zero = total == 0
    return where(zero, 0.0 if p > 0 else math.inf, where(zero, 1.0, total).pow(1.0 / p))


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of ``max_pool3d(..., return_indices=True)``, as ``torch.nn.functional.max_unpool3d``:
    each value put back at its index (``d*H*W + h*W + w`` of its volume), zeros elsewhere; the output (D, H, W)
    is ``(in - 1) * stride - 2 * padding + kernel_size`` per dimension, or ``output_size`` (within a stride)."""
    op = "max_unpool3d"
    (input,) = autocast_float32(input, devices=_CPU)
    if not isinstance(input, Tensor) or not isinstance(indices, Tensor):
        raise InputTypeError(f"{op}: expected tensors for input and indices, got {type(input).__name__} and "
                             f"{type(indices).__name__}")
    if input.ndim not in (4, 5):
        raise RuntimeError(f"{op}: Input to max_unpooling3d should be a 4d or 5d Tensor, but got shape "
                           f"{tuple(input.shape)}")
    if tuple(indices.shape) != tuple(input.shape) or indices.dtype != backend.int64:
        raise RuntimeError(f"{op}: expected int64 indices of the input's shape {tuple(input.shape)}, got "
                           f"{indices.dtype} {tuple(indices.shape)}")
    if 0 in input.shape[1:]:  # (PyTorch's rule: an empty batch is fine, an unbatched input's C=0 too)
        raise RuntimeError(f"{op}: Expected input to have non-zero size for non-batch dimensions, but got "
                           f"{list(input.shape)}")
    kernel = _triple(op, "kernel_size", kernel_size, 1)
    stride = kernel if stride is None else _triple(op, "stride", stride, 1)
    padding = _triple(op, "padding", padding, 0)
    size = _unpool_size(op, [(input.shape[-3 + i] - 1) * stride[i] - 2 * padding[i] + kernel[i] for i in range(3)],
                        stride, output_size)
    x = input if input.ndim == 5 else reshape(input, 1, *input.shape)
    idx = indices if indices.ndim == 5 else reshape(indices, 1, *indices.shape)
    n, c = x.shape[:2]
    volume = size[0] * size[1] * size[2]
    flat = reshape(idx, n, c, math.prod(idx.shape[2:]))
    if flat.numel() and (int(flat.min().item()) < 0 or int(flat.max().item()) >= volume):
        raise RuntimeError(f"{op}: Found an invalid max index (indices must lie in [0, {volume}) for output volumes "
                           f"of size {size[0]}x{size[1]}x{size[2]})")
    values = reshape(x, n, c, math.prod(x.shape[2:]))
    out = reshape(x.new_zeros((n, c, volume)).scatter(2, flat, values), n, c, *size)
    return out if input.ndim == 5 else reshape(out, *out.shape[1:])
