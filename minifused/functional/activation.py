"""Activations, ``normalize``, ``one_hot``, ``cosine_similarity`` and the losses beyond cross-entropy
and MSE, as ``torch.nn.functional`` spells them. Arguments are validated here; the Functions are in
``minifused/ops/activation.py``."""
from __future__ import annotations

import math as _math
import numbers as _numbers
import warnings as _warnings

import numpy as _np

from .. import backend as _backend
from ..ops import activation as _A
from ..ops._common import binary_operands as _binary_operands
from ..ops._common import broadcast_shape as _broadcast_shape
from ..ops._common import host_int as _host_int
from ..ops._common import autocast_float32 as _autocast_float32, autocast_lower as _autocast_lower
from ..ops._common import cast as _cast
from ..ops._common import promote as _promote
from ..ops._common import tensors_result_dtype as _tensors_result_dtype
from ..ops._common import write_out as _write_out
from ..ops.elementwise import where as _where
from ..ops.reduce import vector_norm as _vector_norm
from ..ops.shape import channels_last as _channels_last
from ..kernels import is_channels_last as _is_channels_last
from ..tensor import Tensor as _Tensor
from ._checks import _legacy_reduction, _not_differentiable
from ..backend import DtypeNotImplementedError, InputError, InputTypeError

__all__ = ["leaky_relu", "leaky_relu_", "silu", "elu", "elu_", "selu", "selu_", "celu", "celu_", "softplus",
           "hardtanh", "hardtanh_", "relu6", "hardsigmoid", "hardswish", "mish", "softsign", "logsigmoid",
           "tanhshrink", "normalize", "one_hot", "cosine_similarity", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "prelu",
           "pixel_shuffle", "pixel_unshuffle", "threshold", "threshold_", "hardshrink", "softshrink", "glu", "softmin",
           "channel_shuffle", "pairwise_distance", "rrelu", "rrelu_", "gumbel_softmax"]


# ---------------------------------------------------------------- activations
def _act(op, input):
    if not isinstance(input, _Tensor):
        raise InputTypeError(f"{op}: expected a tensor input, got {type(input).__name__}")
    if not _backend.is_floating(input.dtype):  # (PyTorch's NotImplementedError, or a RuntimeError: this is both)
        raise DtypeNotImplementedError(f"{op}: expected a floating-point input (float32, float16, bfloat16 or "
                                       f"float64), got dtype {input.dtype}")
    return input


def _number(op, name, value):
    if isinstance(value, _Tensor) and value.ndim == 0 and not value.requires_grad:
        value = float(value.item())  # (PyTorch takes a 0-d tensor for a number; not one that requires grad)
    if not isinstance(value, _numbers.Real):  # (a bool is 0 or 1, as PyTorch's float parameters take it)
        raise InputTypeError(f"{op}: {name} must be a number, got {type(value).__name__}")
    return float(value)


def _run(op, fn, input, inplace, **p):
    """Out of place, or written into ``input`` (returned) with the in-place op named ``op + '_'``."""
    _act(op, input)
    if inplace:
        return _A.unary_(fn, op + "_", input, **p)
    return _A.unary(fn, input, **p)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """``x`` where ``x > 0``, else ``negative_slope * x``; keeps a bool mask for the backward."""
    return _run("leaky_relu", _A.LeakyRelu, input, inplace, slope=_number("leaky_relu", "negative_slope",
                                                                            negative_slope))


def leaky_relu_(input, negative_slope=0.01):
    return leaky_relu(input, negative_slope, inplace=True)


def prelu(input, weight):
    """``x`` where ``x > 0``, else ``weight * x``, as ``torch.nn.functional.prelu``: ``weight`` of one value, or
    one per channel (dimension 1; inputs of under 2 dimensions have one channel), learned."""
    op = "prelu"
    input, weight = _autocast_lower(input, weight)  # (on PyTorch's autocast lower-precision lists)
    if not isinstance(input, _Tensor) or not isinstance(weight, _Tensor):
        raise InputTypeError(f"{op}: expected tensors for input and weight, got {type(input).__name__} and "
                             f"{type(weight).__name__}")
    if not _backend.is_floating(input.dtype):
        raise InputTypeError(f"{op}: expected a floating-point input, got {input.dtype}")
    if weight.device != input.device:
        raise RuntimeError(f"{op}: weight is on {weight.device} but the input is on {input.device}")
    if weight.dtype != input.dtype:  # (outside autocast; PyTorch casts neither)
        raise InputTypeError(f"{op}: Type promoting not supported. Got {input.dtype} input and {weight.dtype} weight "
                             f"(convert one with .to(dtype))")
    if weight.ndim > 1:
        raise InputError(f"{op}: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.ndim}")
    channels = input.shape[1] if input.ndim >= 2 else 1
    if weight.numel() not in (1, channels):
        raise InputError(f"{op}: Mismatch of parameter numbers and input channel size: weight must hold 1 value "
                         f"or one per channel ({channels}), got shape {list(weight.shape)}")
    slope = weight.reshape(()) if weight.numel() == 1 else weight.reshape((channels,) + (1,) * (input.ndim - 2))
    return _where(input > 0, input, slope * input)


def _pixel_factor(op, input, factor, name):
    if not isinstance(input, _Tensor):
        raise InputTypeError(f"{op}: expected a tensor input, got {type(input).__name__}")
    if not isinstance(factor, _numbers.Integral) or isinstance(factor, bool) or factor < 1:
        raise InputError(f"{op}: {name} must be a positive int, got {factor!r}")
    if input.ndim < 3:
        raise InputError(f"{op}: expected an input of at least 3 dimensions (..., C, H, W), got shape "
                         f"{list(input.shape)}")
    return int(factor)


def pixel_shuffle(input, upscale_factor):
    """(..., C r^2, H, W) -> (..., C, H r, W r), as ``torch.nn.functional.pixel_shuffle`` (sub-pixel
    convolution's upsampling): channel c r^2 + i r + j goes to the pixel offset (i, j)."""
    op = "pixel_shuffle"
    r = _pixel_factor(op, input, upscale_factor, "upscale_factor")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise InputError(f"{op}: the channels ({c}) must be divisible by upscale_factor squared ({r * r})")
    x = input.reshape(_math.prod(lead), c // (r * r), r, r, h, w).permute(0, 1, 4, 2, 5, 3)
    return _new_memory(input, x.reshape(*lead, c // (r * r), h * r, w * r))


def pixel_unshuffle(input, downscale_factor):
    """(..., C, H r, W r) -> (..., C r^2, H, W), the inverse of :func:`pixel_shuffle`."""
    op = "pixel_unshuffle"
    r = _pixel_factor(op, input, downscale_factor, "downscale_factor")
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise InputError(f"{op}: the height ({h}) and width ({w}) must be divisible by downscale_factor ({r})")
    x = input.reshape(_math.prod(lead), c, h // r, r, w // r, r).permute(0, 1, 3, 5, 2, 4)
    return _new_memory(input, x.reshape(*lead, c * r * r, h // r, w // r))


def _new_memory(input, y):
    """``y``, copied where it is a view of ``input`` (a factor of 1, a single group, blocks of one pixel): PyTorch's
    shuffles always return new memory, so an in-place change of the result never reaches the input."""
    y = y.clone() if y._xp.may_share_memory(y._data, input._data) else y
    # (and a channels-last 4-D input gives a channels-last output, as PyTorch's)
    return y.contiguous(memory_format=_channels_last) if y.ndim == 4 and _is_channels_last(input._data) else y


def silu(input, inplace=False):
    """``x * sigmoid(x)`` (swish); keeps only the input."""
    return _run("silu", _A.Silu, input, inplace)


def elu(input, alpha=1.0, inplace=False):
    """``x`` for ``x > 0``, else ``alpha * (exp(x) - 1)``."""
    return _run("elu", _A.Elu, input, inplace, alpha=_number("elu", "alpha", alpha), scale=1.0, input_scale=1.0)


def elu_(input, alpha=1.0):
    return elu(input, alpha, inplace=True)


def selu(input, inplace=False):
    """``scale * elu(x, alpha)`` with the self-normalizing constants."""
    return _run("selu", _A.Elu, input, inplace, alpha=_A.SELU_ALPHA, scale=_A.SELU_SCALE, input_scale=1.0)


def selu_(input):
    return selu(input, inplace=True)


def celu(input, alpha=1.0, inplace=False):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``; ``alpha`` must be nonzero."""
    alpha = _number("celu", "alpha", alpha)
    if alpha == 0:
        raise RuntimeError("celu: alpha must be nonzero (the input is divided by it), got 0.0")
    return _run("celu", _A.Elu, input, inplace, alpha=alpha, scale=1.0, input_scale=1.0 / alpha)


def celu_(input, alpha=1.0):
    return celu(input, alpha, inplace=True)


def softplus(input, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta x)) / beta``, and ``x`` itself where ``beta x > threshold``."""
    beta, threshold = _number("softplus", "beta", beta), _number("softplus", "threshold", threshold)
    (input,) = _autocast_float32(input, devices=("cuda",))  # (on PyTorch's cuda autocast float32 list)
    return _run("softplus", _A.Softplus, input, False, beta=beta, threshold=threshold)


def _integer_input(op, input):
    """Whether ``input`` is an integer tensor, which the clamping activations take as PyTorch's do (bool is
    refused, as there: threshold's NotImplementedError, hardtanh's RuntimeError; this is both)."""
    if not isinstance(input, _Tensor) or _backend.is_floating(input.dtype):
        return False
    if input.dtype == _np.bool_:
        raise DtypeNotImplementedError(f"{op}: Bool inputs not supported for {op}")
    return _np.dtype(input.dtype).kind in "iu"


def _int_bound(op, dtype, value):
    """A number for an integer input: truncated toward zero, as PyTorch casts it; one outside the dtype's range
    is an error, as there."""
    info = _np.iinfo(dtype)
    if not _math.isfinite(value) or not info.min <= _math.trunc(value) <= info.max:
        raise InputError(f"{op}: value {value} cannot be converted to type {_np.dtype(dtype).name} without "
                         f"overflow")
    return int(_math.trunc(value))


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """``input`` clamped to ``[min_val, max_val]``; the gradient passes strictly inside. An integer input is
    clamped to the bounds truncated toward zero, in its dtype, as PyTorch's."""
    lo, hi = _number("hardtanh", "min_val", min_val), _number("hardtanh", "max_val", max_val)
    if lo > hi:
        raise InputError(f"hardtanh: min_val cannot be greater than max_val, got min_val={lo}, max_val={hi}")
    if _integer_input("hardtanh", input):
        lo, hi = _int_bound("hardtanh", input.dtype, lo), _int_bound("hardtanh", input.dtype, hi)
        return input.clamp_(lo, hi) if inplace else input.clamp(lo, hi)
    return _run("hardtanh", _A.Hardtanh, input, inplace, lo=lo, hi=hi)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input, inplace=False):
    """``min(max(x, 0), 6)`` (of an integer input too, in its dtype)."""
    if _integer_input("hardtanh", input):
        return hardtanh(input, 0.0, 6.0, inplace)
    return _run("relu6", _A.Hardtanh, input, inplace, lo=0.0, hi=6.0)


def hardsigmoid(input, inplace=False):
    """``relu6(x + 3) / 6``."""
    return _run("hardsigmoid", _A.Hardsigmoid, input, inplace)


def hardswish(input, inplace=False):
    """``x * relu6(x + 3) / 6``."""
    return _run("hardswish", _A.Hardswish, input, inplace)


def mish(input, inplace=False):
    """``x * tanh(softplus(x))``."""
    return _run("mish", _A.Mish, input, inplace)


def _composite(op, input):
    """A tensor input, of any dtype: PyTorch writes softsign and tanhshrink as composite ops, so an integer input
    gives a float result and a 16-bit float one rounds at each step, as they are composed here too."""
    if not isinstance(input, _Tensor):
        raise InputTypeError(f"{op}: expected a tensor input, got {type(input).__name__}")
    if input.dtype == _np.bool_:
        raise InputTypeError(f"{op}: expected a numeric input, got dtype bool")
    return input


def softsign(input):
    """``x / (1 + |x|)``, as PyTorch composes it (its gradient at +-inf is NaN there too)."""
    input = _composite("softsign", input)
    return input / (input.abs() + 1)


def logsigmoid(input):
    """``log(sigmoid(x))``, stable for large ``|x|``; C-contiguous whatever the input's layout, as PyTorch's."""
    return _run("logsigmoid", _A.LogSigmoid, input, False).contiguous()


def tanhshrink(input):
    """``x - tanh(x)``, as PyTorch composes it."""
    input = _composite("tanhshrink", input)
    return input - input.tanh()


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky ReLU: in training each negative element is scaled by its own slope drawn from
    U(lower, upper), in evaluation by their mean ``(lower + upper) / 2``."""
    op = "rrelu"
    lower, upper = _number(op, "lower", lower), _number(op, "upper", upper)
    if lower > upper:
        raise InputError(f"{op}: Lower bound should be less than or equal to the upper bound, got {lower} > {upper}")
    if not training:
        return _run(op, _A.LeakyRelu, input, inplace, slope=(lower + upper) / 2)
    _act(op, input)
    from ..ops import rand

    noise = rand(tuple(input.shape), device=input.device, dtype=input.dtype)._data * (upper - lower) + lower
    return _run(op, _A.RRelu, input, inplace, noise=noise)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, inplace=True)


def threshold(input, threshold, value, inplace=False):
    """``input`` where it is greater than ``threshold``, else ``value``. For an integer input both numbers are
    truncated toward zero first, in its dtype, as PyTorch casts them."""
    op = "threshold"
    th, value = _number(op, "threshold", threshold), _number(op, "value", value)
    if _integer_input(op, input):
        below = input <= _int_bound(op, input.dtype, th)
        value = _int_bound(op, input.dtype, value)
        return input.masked_fill_(below, value) if inplace else input.masked_fill(below, value)
    return _run(op, _A.Threshold, input, inplace, threshold=th, value=value)


def threshold_(input, threshold, value):
    return globals()["threshold"](input, threshold, value, inplace=True)


def hardshrink(input, lambd=0.5):
    """``x`` where ``|x| > lambd``, else 0."""
    return _run("hardshrink", _A.Shrink, input, False, lambd=_number("hardshrink", "lambd", lambd), soft=False)


def softshrink(input, lambd=0.5):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0; ``lambd`` >= 0."""
    lambd = _number("softshrink", "lambd", lambd)
    top = float(_np.finfo(_act("softshrink", input).dtype).max)  # (PyTorch's range: inf and NaN are refused too)
    if not 0 <= lambd <= top:
        raise InputError(f"softshrink: lambda must be greater or equal to 0 and at most {top:g} (the largest "
                         f"{input.dtype}), but found {lambd}")
    return _run("softshrink", _A.Shrink, input, False, lambd=lambd, soft=True)


def glu(input, dim=-1):
    """The gated linear unit: ``a * sigmoid(b)`` of ``input``'s two halves ``a``, ``b`` along ``dim``."""
    _act("glu", input)
    if input.ndim == 0:
        raise RuntimeError("glu: glu does not support scalars because halving size must be even")
    d = _dim("glu", input, dim)
    if input.shape[d] % 2:
        raise RuntimeError(f"glu: Halving dimension must be even, but dimension {d} is size {input.shape[d]}")
    return _A.Glu.apply(input, d)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """``softmax(-input)`` along ``dim`` (negated before any cast to ``dtype``, as PyTorch's); its warnings and errors
    name softmin."""
    from . import softmax

    op = "softmin"
    if not isinstance(input, _Tensor):
        raise InputTypeError(f"{op}: expected a tensor input, got {type(input).__name__}")
    if dtype is None and not _backend.is_floating(input.dtype):
        raise InputTypeError(f"{op}: expected a float32, float16, bfloat16 or float64 input (or a dtype=), got "
                             f"{input.dtype}")
    if dim is None:  # PyTorch's legacy implicit choice, warned as there
        dim = 0 if input.ndim in (0, 1, 3) else 1
        _warnings.warn(f"Implicit dimension choice for {op} has been deprecated. Change the call to include dim=X "
                       f"as an argument.", UserWarning, stacklevel=_stacklevel)
    return softmax(-input, _dim(op, input, dim), dtype=dtype)


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """A sample from the Gumbel-softmax distribution of ``logits`` at temperature ``tau``: ``softmax((logits +
    g) / tau)`` with Gumbel(0, 1) noise ``g``; with ``hard`` its one-hot argmax in the forward and the soft
    sample's gradient in the backward (straight-through), as ``torch.nn.functional.gumbel_softmax``."""
    from . import softmax
    from ..ops import rand_like

    _act("gumbel_softmax", logits)
    tau = _number("gumbel_softmax", "tau", tau)
    if tau <= 0:
        raise InputError(f"gumbel_softmax: tau must be > 0, got {tau}")
    d = _dim("gumbel_softmax", logits, dim)
    uniform = rand_like(logits).clamp(min=_numpy_tiny(logits.dtype))
    y_soft = softmax((logits - (-uniform.log()).log()) / tau, d)
    if not hard:
        return y_soft
    index = y_soft.detach().argmax(d, keepdim=True)
    y_hard = (y_soft.detach() * 0).scatter(d, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


def _numpy_tiny(dtype):
    import numpy

    return float(numpy.finfo(numpy.float32 if dtype in (_backend.float16, _backend.bfloat16) else dtype).tiny)


def channel_shuffle(input, groups):
    """(N, C, *) with its channels taken group by group in turn (ShuffleNet's shuffle): C split into ``groups``
    of C / groups, then interleaved."""
    op = "channel_shuffle"
    if not isinstance(input, _Tensor) or input.ndim < 3:
        raise InputError(f"{op}: expected a tensor of 3 or more dimensions (N, C, *), got "
                         f"{tuple(input.shape) if isinstance(input, _Tensor) else type(input).__name__}")
    if isinstance(groups, bool) or not isinstance(groups, _numbers.Integral) or groups <= 0:
        raise InputError(f"{op}: number of groups to divide channels in must be positive, got {groups!r}")
    n, c, *rest = input.shape
    if c % groups:
        raise InputError(f"{op}: Number of channels must be divisible by groups. Got {c} channels and {groups} "
                         f"groups.")
    return _new_memory(input, input.reshape(n, int(groups), c // groups, *rest).transpose(1, 2).reshape(n, c, *rest))


# ---------------------------------------------------------------- normalize, cosine_similarity, one_hot
def _dim(op, input, dim):
    if isinstance(dim, bool) or not isinstance(dim, _numbers.Integral):
        raise InputTypeError(f"{op}: dim must be an int, got {type(dim).__name__}")
    nd = max(input.ndim, 1)
    if not -nd <= dim < nd:
        raise IndexError(f"{op}: dim {dim} out of range for a tensor of {input.ndim} dimensions "
                         f"(expected in [{-nd}, {nd - 1}])")
    return int(dim) % nd


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``input / max(||input||_p, eps)`` along ``dim``, as PyTorch's ``input.norm(p, dim, keepdim=True)`` divided
    into ``input``: ``dim`` an int, a tuple/list of ints or None (all dimensions); ``p`` any number (negative and
    ``-inf`` too, as :meth:`Tensor.norm`; None: 2) or ``'fro'``/``'nuc'``. ``out=``: the quotient written there, as
    ``torch.div``'s ``out=`` (so not differentiable). A number ``p >= 0`` along one dimension of a non-empty input
    is one fused op; the rest are composed of ``norm``, ``clamp_min`` and ``div``."""
    op = "normalize"
    _act(op, input)
    (input,) = _autocast_float32(input, devices=("cuda",))  # (PyTorch's divides by norm: float32 under cuda autocast)
    if not isinstance(p, str):
        p = 2.0 if p is None else _number(op, "p", p)  # (None: Tensor.norm's default, the 2-norm)
    eps = _number(op, "eps", eps)
    one_dim = not isinstance(dim, bool) and isinstance(dim, _numbers.Integral)
    if out is None and one_dim and not isinstance(p, str) and p >= 0 and input.ndim and input.numel():
        return _A.Normalize.apply(input, p, _dim(op, input, dim), eps)
    if isinstance(dim, list):
        dim = tuple(dim)
    denom = input.norm(p, dim, keepdim=True).clamp_min(eps)
    if out is None:
        return input / denom
    return _write_out(op, input / denom, out)  # (PyTorch's out= rules, as its torch.div's)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """The cosine of the angle between ``x1`` and ``x2`` along ``dim`` (broadcast together); each norm's value is
    clamped to at least ``eps``, its gradient not (as PyTorch's)."""
    op = "cosine_similarity"
    for name, x in (("x1", x1), ("x2", x2)):
        if not isinstance(x, _Tensor):
            raise InputTypeError(f"{op}: expected tensors for x1 and x2, got {type(x).__name__} for {name}")
        _act(op, x)
    x1, x2 = _autocast_float32(x1, x2, devices=("cuda",))  # (on PyTorch's cuda autocast float32 list)
    # expanded before they are promoted, as PyTorch's: a 0-d float64 x2 beside a float32 x1 gives float64
    shape = _broadcast_shape(op, x1.shape, x2.shape)
    x1, x2 = (x if tuple(x.shape) == tuple(shape) else x.expand(*shape) for x in (x1, x2))
    x1, x2 = _binary_operands(op, x1, x2)
    d = _dim(op, x1, dim)
    if x1.ndim == 0:
        return normalize(x1, 2.0, 0, eps) * normalize(x2, 2.0, 0, eps)

    def unit(x):  # PyTorch clamps the norm outside autograd: its gradient is the unclamped norm's
        n = _vector_norm(x, 2.0, d, keepdim=True)
        return x / (n + (float(eps) - n.detach()).clamp(min=0))  # (an infinite norm stays inf: x / inf is 0)
    return (unit(x1) * unit(x2)).sum(d)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The ``p``-norm of ``x1 - x2 + eps`` along the last dimension (broadcast together), as PyTorch's."""
    op = "pairwise_distance"
    for name, x in (("x1", x1), ("x2", x2)):
        if not isinstance(x, _Tensor):
            raise InputTypeError(f"{op}: expected tensors for x1 and x2, got {type(x).__name__} for {name}")
    p, eps = _number(op, "p", p), _number(op, "eps", eps)  # (any p, negative too, as Tensor.norm's)
    _broadcast_shape(op, x1.shape, x2.shape)
    d = x1 - x2 + eps  # (integer inputs give a floating difference, as PyTorch's)
    return d.norm(p, dim=-1, keepdim=keepdim) if d.ndim else d.abs()


def one_hot(input, num_classes=-1):
    """int64 ``(*input.shape, num_classes)``: 1 at each class index, 0 elsewhere. ``num_classes=-1``
    takes the largest index + 1. Not differentiable."""
    op = "one_hot"
    if not isinstance(input, _Tensor):
        raise InputTypeError(f"{op}: expected a tensor, got {type(input).__name__}")
    if input.dtype != _backend.int64:
        raise InputTypeError(f"{op}: one_hot is only applicable to index tensors of type int64, got dtype "
                             f"{input.dtype}")
    num_classes = _host_int(num_classes)
    if isinstance(num_classes, bool) or not isinstance(num_classes, _numbers.Integral):
        raise InputTypeError(f"{op}: num_classes must be an int, got {type(num_classes).__name__}")
    if num_classes < -1:
        raise InputError(f"{op}: num_classes must be an int >= -1 (-1: inferred), got {num_classes!r}")
    a = input._data
    xp = _backend.array_module(a)
    if a.size == 0:
        if num_classes == -1:
            raise InputError(f"{op}: can not infer the number of classes from an empty tensor; pass num_classes")
    else:
        lo, hi = int(a.min()), int(a.max())  # one host sync: the checks PyTorch makes on the CPU
        if lo < 0:
            raise InputError(f"{op}: class values must be non-negative, got {lo}")
        if num_classes == -1:
            num_classes = hi + 1
        elif hi >= num_classes:
            raise InputError(f"{op}: class values must be smaller than num_classes={num_classes}, got {hi}")
    out = (a[..., None] == xp.arange(int(num_classes), dtype=a.dtype)).astype(_np.int64)
    return _Tensor._from_array(out, False)


# ---------------------------------------------------------------- losses
_REDUCTIONS = ("none", "mean", "sum")


def _reduce(loss, reduction):
    """The reduced loss; float16/bfloat16 losses are summed in float32 (as PyTorch accumulates them)."""
    if reduction == "none":
        return loss
    acc = _cast(loss, _backend.float32) if loss.dtype in (_backend.float16, _backend.bfloat16) else loss
    return _cast(acc.sum() if reduction == "sum" else acc.mean(), loss.dtype)


def _size(shape):
    return f"[{', '.join(map(str, shape))}]"


def _loss_operands(op, input, target, reduction, *, broadcast=True, float_target=False, reductions=_REDUCTIONS,
                   autocast_devices=None, int_input=False, int_pair=False, bool_target=True):
    """Check a loss's input and target and give them one floating dtype (float32 inside an autocast region, as
    PyTorch computes its losses there; ``autocast_devices``: only on those device types, for a loss that
    PyTorch composes of ops whose float32 rule holds on cuda alone). ``broadcast``: a target of another shape
    broadcasts with PyTorch's warning (``'silent'``: without it; False: it raises). A loss that takes PyTorch's
    deprecated ``size_average`` and ``reduce`` maps them to its ``reduction`` before this (``_legacy_reduction``).
    ``int_input``: an integer input is taken when the target makes the pair floating (PyTorch's kernels promote);
    ``int_pair``: an integer target too (a loss PyTorch composes of integer-capable ops: l1_loss).
    ``bool_target=False``: a bool target raises (a loss PyTorch composes of a subtraction, which refuses bool)."""
    input, target = _autocast_float32(input, target, devices=autocast_devices)
    if not isinstance(input, _Tensor) or not isinstance(target, _Tensor):
        raise InputTypeError(f"{op}: expected tensors for input and target, got {type(input).__name__} and "
                             f"{type(target).__name__}")
    if reduction not in reductions:
        raise InputError(f"{op}: reduction must be one of {', '.join(map(repr, reductions))}, got {reduction!r}")
    int_ok = int_input and input.dtype.kind in "iu" and (_backend.is_floating(target.dtype)
                                                         or int_pair and target.dtype.kind in "iu")
    if not _backend.is_floating(input.dtype) and not int_ok:  # (PyTorch's NotImplementedError or RuntimeError)
        raise DtypeNotImplementedError(f"{op}: expected a floating-point input (float32, float16, bfloat16 or "
                                       f"float64), got dtype {input.dtype}")
    if not bool_target and target.dtype == _backend.bool_:
        raise InputTypeError(f"{op}: expected a numeric target, got dtype bool (PyTorch's subtraction refuses it; "
                             f"convert it with .float())")
    if float_target and not _backend.is_floating(target.dtype):
        raise InputTypeError(f"{op}: expected a floating-point target, got dtype {target.dtype}")
    if target.device != input.device:
        raise RuntimeError(f"{op}: input is on {input.device} but the target is on {target.device}")
    if tuple(target.shape) != tuple(input.shape):
        if not broadcast:
            raise InputError(f"{op}: using a target size ({_size(target.shape)}) that is different to the input "
                             f"size ({_size(input.shape)}) is not supported; please ensure they have the same size")
        _broadcast_shape(op, input.shape, target.shape)  # shapes that cannot broadcast raise (no warning first)
        if broadcast != "silent":
            _warnings.warn(f"Using a target size ({_size(target.shape)}) that is different to the input size "
                           f"({_size(input.shape)}). This will likely lead to incorrect results due to "
                           f"broadcasting. Please ensure they have the same size.", UserWarning, stacklevel=3)
    # PyTorch broadcasts the operands of the losses that warn (broadcast_tensors) before its kernels see them, so a
    # 0-d target counts as a dimensioned one there; elsewhere its rule for 0-d tensors holds (a 0-d float64 target
    # of kl_div leaves a float32 loss)
    dtype = _promote(input.dtype, target.dtype) if broadcast is True else _tensors_result_dtype(input, target)
    return _cast(input, dtype), _cast(target, dtype)


def _loss_weight(op, name, weight, input, same_size=False):
    """An optional weight that broadcasts to the input's shape (``same_size``: has it), in the input's dtype."""
    if weight is None:
        return None
    if not isinstance(weight, _Tensor):
        raise InputTypeError(f"{op}: {name} must be a tensor or None, got {type(weight).__name__}")
    if weight.device != input.device:
        raise RuntimeError(f"{op}: {name} is on {weight.device} but the input is on {input.device}")
    if same_size and tuple(weight.shape) != tuple(input.shape):
        raise InputError(f"{op}: weights and input must have the same size, got {_size(weight.shape)} and "
                         f"{_size(input.shape)}")
    try:
        ok = _np.broadcast_shapes(weight.shape, input.shape) == tuple(input.shape)
    except ValueError:
        ok = False
    if not ok:
        raise InputError(f"{op}: {name} of shape {_size(weight.shape)} does not broadcast to the input's shape "
                         f"{_size(input.shape)}")
    return _cast(weight, input.dtype)


def _weighted(op, loss, weight, reduction):
    """A pointwise loss times ``weight`` (of its size, or None) reduced: PyTorch's weighted mean divides by the
    weights' sum (mse_loss, l1_loss)."""
    if weight is None:
        return _reduce(loss, reduction)
    _loss_weight(op, "weight", weight, loss, same_size=True)  # (checked; the product promotes, as PyTorch's)
    loss = loss * weight
    return loss.sum() / weight.sum() if reduction == "mean" else _reduce(loss, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean absolute error ``|input - target|``, reduced by ``'mean'``, ``'sum'`` or ``'none'``; ``weight``
    (optional, of the input's size) multiplies the pointwise loss, and the mean is then over the weights' sum.
    Integer input and target give an integer loss, as PyTorch's."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    input, target = _loss_operands("l1_loss", input, target, reduction, int_input=True, int_pair=True,
                                   bool_target=False)
    if reduction == "mean" and weight is None and not _backend.is_floating(input.dtype):  # (PyTorch's mean() refuses)
        raise DtypeNotImplementedError(f"l1_loss: reduction='mean' has no integer result: expected a floating-point "
                                       f"input or target, got {input.dtype} (or pass reduction='sum')")
    return _weighted("l1_loss", (input - target).abs(), weight, reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (``d = input - target``);
    ``beta = 0`` is the L1 loss."""
    op = "smooth_l1_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    beta = _number(op, "beta", beta)
    if beta < 0:
        raise RuntimeError(f"{op}: beta must be >= 0 (smooth_l1_loss does not support negative values for beta), "
                         f"got {beta}")
    input, target = _loss_operands(op, input, target, reduction, int_input=True)
    return _reduce(_A.SmoothL1.apply(input, target, beta, False), reduction)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """``0.5 d^2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)`` (``d = input - target``);
    ``delta > 0``."""
    op = "huber_loss"
    reduction = _legacy_reduction(None, None, reduction)  # (the deprecated 'elementwise_mean')
    delta = _number(op, "delta", delta)
    if not delta > 0:
        raise RuntimeError(f"{op}: delta must be > 0 (huber_loss does not support non-positive values for delta), "
                         f"got {delta}")
    out_dtype = _autocast_float32(input)[0].dtype if isinstance(input, _Tensor) else None
    input, target = _loss_operands(op, input, target, reduction)
    # computed in the promoted dtype and written in the input's, as PyTorch's kernel
    loss = _cast(_A.SmoothL1.apply(input, target, delta, True), out_dtype)
    if weight is not None:  # (its mean is the plain one; the product promotes, as PyTorch's)
        _loss_weight(op, "weight", weight, loss, same_size=True)
        loss = loss * weight
    return _reduce(loss, reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Pointwise KL divergence ``target * (log target - input)`` of log-probabilities ``input`` (``target``
    as probabilities, or log-probabilities with ``log_target=True``). ``'batchmean'`` divides the sum by the
    batch size (the KL divergence proper); ``'mean'`` averages over all elements, as PyTorch does."""
    op = "kl_div"
    if not isinstance(log_target, (bool, _np.bool_)):
        raise InputTypeError(f"{op}(): argument 'log_target' must be bool, not {type(log_target).__name__}")
    # PyTorch warns of a 'mean' asked for by name only (not of one the legacy arguments or 'elementwise_mean' give)
    mean_named = reduction == "mean" and size_average is None and reduce is None
    reduction = _legacy_reduction(size_average, reduce, reduction)
    input, target = _loss_operands(op, input, target, reduction, broadcast="silent",
                                   float_target=True, reductions=("none", "batchmean", "sum", "mean"))
    if mean_named:  # (PyTorch's warning: a silent 1 / C scale on a distillation loss is easy to miss)
        _warnings.warn("kl_div: reduction='mean' divides the total loss by both the batch size and the support "
                       "size; 'batchmean' divides only by the batch size, and aligns with the KL divergence's "
                       "definition", UserWarning, stacklevel=2)
    loss = _A.KLDiv.apply(input, target, bool(log_target))
    if reduction == "batchmean":
        total = _reduce(loss, "sum")
        return total / input.shape[0] if input.ndim else total
    return _reduce(loss, reduction)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """``-weight * (target log(input) + (1 - target) log(1 - input))``, each log clamped to >= -100.
    ``input`` and ``target`` hold probabilities, of one dtype: values outside [0, 1] raise on the cpu (on cuda,
    without a host sync, an input there gives NaN)."""
    op = "binary_cross_entropy"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if isinstance(input, _Tensor) and input.device.type == "cuda" and "cuda" in _backend.autocast_dtypes():
        raise RuntimeError(f"{op} is unsafe to autocast (as in PyTorch): inside an autocast region use "
                           f"binary_cross_entropy_with_logits (or BCEWithLogitsLoss) on the logits, which is "
                           f"safe, or leave the region for this loss")
    input, target = _autocast_float32(input, target)
    if (isinstance(input, _Tensor) and isinstance(target, _Tensor) and input.dtype != target.dtype
            and _backend.is_floating(input.dtype) and _backend.is_floating(target.dtype)):
        # (PyTorch's kernel takes one dtype; its other losses promote)
        raise RuntimeError(f"{op}: expected a target of the input's dtype {input.dtype}, got {target.dtype} (no "
                           f"implicit casts; convert one with .to(dtype))")
    input, target = _loss_operands(op, input, target, reduction, broadcast=False, float_target=True)
    _not_differentiable(op, "weight", weight)
    weight = _loss_weight(op, "weight", weight, input)
    for name, a in (("input", input._data), ("target", target._data)):
        if not _backend.is_cuda_array(a) and a.size and not ((a >= 0) & (a <= 1)).all():
            raise RuntimeError(f"{op}: all elements of {name} should be between 0 and 1 (probabilities" +
                               ("; use binary_cross_entropy_with_logits for logits)" if name == "input" else ")"))
    return _reduce(_A.BinaryCrossEntropy.apply(input, target, weight), reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """Binary cross-entropy of ``sigmoid(input)``, computed from the logits without overflow.
    ``pos_weight`` weighs the positive term (broadcast along the last dimension, one per class)."""
    op = "binary_cross_entropy_with_logits"
    reduction = _legacy_reduction(size_average, reduce, reduction)
    out_dtype = _autocast_float32(target)[0].dtype if isinstance(target, _Tensor) else None
    input, target = _loss_operands(op, input, target, reduction, broadcast=False, float_target=True)
    _not_differentiable(op, "weight", weight)
    _not_differentiable(op, "pos_weight", pos_weight)
    weight = _loss_weight(op, "weight", weight, input)
    pos_weight = _loss_weight(op, "pos_weight", pos_weight, input)
    loss = _A.BinaryCrossEntropyWithLogits.apply(input, target, weight, pos_weight)
    return _reduce(_cast(loss, out_dtype), reduction)  # in the target's dtype: PyTorch's writes into 1 - target
