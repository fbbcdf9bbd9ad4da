"""Parameter initialization, PyTorch's ``torch.nn.init`` (same fans, gains and bounds).

Every function fills a tensor in place under ``no_grad`` with the device's generator
(``minifused.manual_seed`` seeds it) and returns the tensor.
"""
from __future__ import annotations

import functools
import math
import numbers
import warnings

import numpy as np

from .. import backend
from ..autograd import no_grad
from ..backend import DtypeNotImplementedError, InputError, InputTypeError
from ..kernels.special_math import ndtri
from ..tensor import Tensor, number_arg

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "zeros_", "ones_", "eye_", "dirac_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "sparse_"]


def _refusing_uninitialized(init):
    """``init`` refusing what is no tensor (a TypeError naming it, where PyTorch's fails on a missing attribute)
    and a lazy module's parameter before its first forward (its shape unknown), as PyTorch's (ValueError):
    filling the placeholder would be lost when the module initializes it."""
    @functools.wraps(init)
    def checked(tensor, *args, **kwargs):
        if not isinstance(tensor, Tensor):
            raise InputTypeError(f"nn.init.{init.__name__}: expected a Tensor, got {type(tensor).__name__}")
        if getattr(tensor, "_uninitialized", False):  # (lazy.py's placeholders say so; it builds on this module)
            tensor._refuse(f"nn.init.{init.__name__}")
        return init(tensor, *args, **kwargs)
    return checked


_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
_NONLINEARITIES = _LINEAR + ("sigmoid", "tanh", "relu", "leaky_relu", "selu")


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (PyTorch's table; its error messages, so code matching them works)."""
    if nonlinearity in _LINEAR or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise InputError(f"calculate_gain: negative_slope {param} not a valid number (expected an int or a "
                             f"float, got {type(param).__name__})")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise InputError(f"calculate_gain: Unsupported nonlinearity {nonlinearity} (expected one of "
                     f"{', '.join(_NONLINEARITIES)})")


def _gain(op, gain):
    """``gain`` as a float: a real number or a 0-d tensor holding one, else a TypeError naming ``op``."""
    gain = number_arg(op, "gain", gain)
    if not isinstance(gain, numbers.Real):
        raise InputTypeError(f"{op}: gain must be a real number, got {type(gain).__name__}")
    return float(gain)


def _calculate_fan_in_and_fan_out(tensor):
    """fan_in = size(1) * receptive field, fan_out = size(0) * receptive field (dims >= 2)."""
    if tensor.ndim < 2:
        raise InputError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions "
                         f"(got shape {tuple(tensor.shape)})")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    """The fan of ``mode``, 'fan_in' or 'fan_out' in any case (PyTorch's helper, which code imports)."""
    mode = mode.lower() if isinstance(mode, str) else mode
    if mode not in ("fan_in", "fan_out"):
        raise InputError(f"Mode {mode} not supported, please use one of ['fan_in', 'fan_out']")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


@_refusing_uninitialized
def uniform_(tensor, a=0.0, b=1.0, generator=None):
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


@_refusing_uninitialized
def normal_(tensor, mean=0.0, std=1.0, generator=None):
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


#: Rounds of redrawing in trunc_normal_ where [a, b] holds at least half the normal's mass (each draws the values
#: still outside again); the rest, and every value of a narrower interval, by the inverse CDF.
TRUNC_NORMAL_ROUNDS = 64


@_refusing_uninitialized
def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """N(mean, std^2) truncated to [a, b] (absolute bounds, infinite ones too, as PyTorch's): where the interval
    holds at least half the mass, the values outside are drawn again; the rest (and every value of a narrower
    interval, far in a tail too) come from the inverse CDF, PyTorch's draw."""
    for name, v in (("mean", mean), ("std", std), ("a", a), ("b", b)):
        if not isinstance(v, numbers.Real) or isinstance(v, bool):
            raise InputTypeError(f"trunc_normal_: {name} must be a real number, got {type(v).__name__}")
        if math.isnan(v) or (name in ("mean", "std") and not math.isfinite(v)):
            raise InputError(f"trunc_normal_: {name} must be a {'finite ' if name in ('mean', 'std') else ''}"
                             f"number, got {v!r}")
    if not a <= b or std < 0:
        raise InputError(f"trunc_normal_: expected a <= b and std >= 0, got a={a}, b={b}, std={std}")
    if not backend.is_floating(tensor.dtype):
        raise DtypeNotImplementedError(f"trunc_normal_: expected a floating-point tensor, got {tensor.dtype}")
    if mean < a - 2 * std or mean > b + 2 * std:  # PyTorch's warning (its draw is exact there too, as this one)
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values may "
                      "be incorrect.", stacklevel=3)  # at the caller (past _refusing_uninitialized)
    data = tensor._data
    xp = backend.array_module(data)
    gen = backend.generator(tensor.device, generator, "trunc_normal_")
    if std == 0 or a == b:  # one value left (PyTorch's draw gives a where a == b)
        out = xp.full(data.shape, min(max(mean, a), b), xp.float64)
    else:
        lo, hi = (0.5 * (1 + math.erf((v - mean) / (std * math.sqrt(2)))) for v in (a, b))
        out = xp.asarray(mean + std * gen.standard_normal(data.shape), dtype=xp.float64)
        for _ in range(TRUNC_NORMAL_ROUNDS if hi - lo >= 0.5 else 0):
            outside = (out < a) | (out > b)
            count = int(outside.sum())
            if not count:
                break
            out[outside] = mean + std * xp.asarray(gen.standard_normal(count))
        outside = (out < a) | (out > b)
        count = int(outside.sum())
        if count:
            # the inverse CDF on the side of the interval's centre nearer the lower tail (mirrored when above the
            # mean), where its probabilities keep their precision: erfinv(2p - 1) near -1 or 1 rounds p to
            # multiples of 1e-16, which beyond ~8 std left values at the bounds (clipped infinities)
            flip = (a - mean) + (b - mean) > 0
            za, zb = sorted(((mean - v) if flip else (v - mean)) / std for v in (a, b))
            if zb < -FAR_TAIL:
                y = -_far_tail(xp, gen, count, -zb, -za)
            else:
                plo, phi = (0.5 * math.erfc(-z / math.sqrt(2)) for z in (za, zb))
                y = ndtri(xp.asarray(plo + _uniform(xp, gen, count) * (phi - plo), dtype=xp.float64))
            out[outside] = xp.clip(mean + std * (-y if flip else y), a, b)
    with no_grad():
        data[...] = out.astype(data.dtype)
        return tensor._bump("trunc_normal_")


#: Beyond this many std on both bounds trunc_normal_ draws by rejection from an exponential (the normal CDF there,
#: below 1e-197, would soon underflow to 0 and put every value on the bound nearer the mean)
FAR_TAIL = 30.0


def _uniform(xp, gen, count):
    return xp.asarray(gen.random(count) if isinstance(gen, np.random.Generator) else gen.random_sample(count))


def _far_tail(xp, gen, count, lo, hi):
    """``count`` draws of the standard normal truncated to [lo, hi], lo > 0 far in the upper tail: s = lo + e, e from
    the exponential of rate lo truncated to [0, hi - lo] (by its inverse CDF), kept with probability exp(-e^2 / 2),
    the ratio of the densities (Robert, 1995); where lo is past 30 nearly every draw is kept."""
    out = xp.empty(count, xp.float64)
    todo = xp.arange(count)
    mass = -math.expm1(-lo * (hi - lo))  # the truncated exponential's share of the whole one (1 for hi = inf)
    while todo.size:
        e = -xp.log1p(-_uniform(xp, gen, todo.size) * mass) / lo
        keep = _uniform(xp, gen, todo.size) < xp.exp(-0.5 * e * e)
        out[todo[keep]] = lo + e[keep]
        todo = todo[~keep]
    return out


def _no_grad_trunc_normal_(tensor, mean, std, a, b, generator=None):
    """PyTorch's helper behind ``trunc_normal_`` (older ViT code imports it): the same draw."""
    return trunc_normal_(tensor, mean, std, a, b, generator)


# PyTorch's other private helpers behind the public inits, which some code imports: the same fills.
def _no_grad_uniform_(tensor, a, b, generator=None):
    return uniform_(tensor, a, b, generator)


def _no_grad_normal_(tensor, mean, std, generator=None):
    return normal_(tensor, mean, std, generator)


def _no_grad_fill_(tensor, val):
    return constant_(tensor, val)


def _no_grad_zero_(tensor):
    return zeros_(tensor)


@_refusing_uninitialized
def orthogonal_(tensor, gain=1.0, generator=None):
    """A (semi-)orthogonal matrix times ``gain``, PyTorch's: the tensor as (rows, the rest) from the QR
    decomposition of a normal draw, signs fixed by R's diagonal."""
    if tensor.ndim < 2:
        raise InputError(f"orthogonal_: Only tensors with 2 or more dimensions are supported, got shape "
                         f"{tuple(tensor.shape)}")
    gain = _gain("orthogonal_", gain)
    if tensor.numel() == 0:
        return tensor
    if not backend.is_floating(tensor.dtype):  # PyTorch's normal_ draw refuses it; the QR's floats would truncate
        raise DtypeNotImplementedError(f"orthogonal_: expected a floating-point tensor, got {tensor.dtype}")
    data = tensor._data
    xp = backend.array_module(data)
    rows, cols = data.shape[0], data.size // data.shape[0]
    flat = xp.asarray(backend.generator(tensor.device, generator, "orthogonal_").standard_normal((rows, cols)),
                      dtype=xp.float64)
    if rows < cols:
        flat = flat.T
    q, r = xp.linalg.qr(flat)
    q *= xp.sign(xp.diagonal(r))
    if rows < cols:
        q = q.T
    with no_grad():
        data[...] = (gain * q).reshape(data.shape).astype(data.dtype)
        return tensor._bump("orthogonal_")


@_refusing_uninitialized
def constant_(tensor, val):
    with no_grad():
        return tensor.fill_(val)


@_refusing_uninitialized
def eye_(tensor):
    """A 2-D tensor set to the identity (ones on the diagonal of its rectangle), as ``torch.nn.init.eye_``."""
    if tensor.ndim != 2:
        raise InputError(f"eye_: Only tensors with 2 dimensions are supported, got {tensor.ndim}")
    with no_grad():
        tensor._data[...] = tensor._xp.eye(*tensor.shape).astype(tensor._data.dtype)
        return tensor._bump("eye_")


@_refusing_uninitialized
def dirac_(tensor, groups=1):
    """A 3-, 4- or 5-d convolution weight set to the Dirac delta (each of the first output channels of a group
    passes its input channel through unchanged: an identity convolution), as ``torch.nn.init.dirac_``."""
    if tensor.ndim not in (3, 4, 5):
        raise InputError(f"dirac_: Only tensors with 3, 4, or 5 dimensions are supported, got {tensor.ndim}")
    out, cin = tensor.shape[:2]
    if isinstance(groups, bool) or not isinstance(groups, numbers.Integral):
        raise InputTypeError(f"dirac_: groups must be an int, got {type(groups).__name__}")
    if groups < 1 or out % groups:
        raise InputError(f"dirac_: dim 0 must be divisible by groups, a positive int (got dim 0 of {out} and "
                         f"groups={groups})")
    per = out // groups
    data = np.zeros(tensor.shape)
    centre = tuple(k // 2 for k in tensor.shape[2:])
    for g in range(groups):
        for d in range(min(per, cin)):
            data[(g * per + d, d) + centre] = 1.0
    with no_grad():
        tensor._data[...] = backend.to_device(data.astype(tensor._data.dtype), tensor.device)
        return tensor._bump("dirac_")


@_refusing_uninitialized
def zeros_(tensor):
    return constant_(tensor, 0.0)


@_refusing_uninitialized
def ones_(tensor):
    return constant_(tensor, 1.0)


@_refusing_uninitialized
def xavier_uniform_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = math.sqrt(3.0) * _gain("xavier_uniform_", gain) * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


@_refusing_uninitialized
def xavier_normal_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, _gain("xavier_normal_", gain) * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


@_refusing_uninitialized
def kaiming_uniform_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-bound, bound), bound = gain * sqrt(3 / fan). ``a=sqrt(5)`` is Linear's and Conv's default."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)  # PyTorch's, at the caller
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


@_refusing_uninitialized
def kaiming_normal_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)  # PyTorch's, at the caller
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    return normal_(tensor, 0.0, std, generator)


@_refusing_uninitialized
def sparse_(tensor, sparsity, std=0.01, generator=None):
    """A 2-D tensor as a sparse matrix (Martens, 2010), as PyTorch's: every value drawn from N(0, std^2), then in
    each column ``ceil(sparsity * rows)`` of them, at random rows, set to zero. The values come from ``generator``
    (or the device's); which rows are zeroed, from the device's generator, as PyTorch's (which takes a
    ``randperm`` per column from the global generator): here one draw of random keys for the whole tensor,
    whose smallest ``ceil(sparsity * rows)`` in each column mark the zeros."""
    if tensor.ndim != 2:
        raise InputError(f"sparse_: Only tensors with 2 dimensions are supported, got {tensor.ndim}")
    rows, cols = tensor.shape
    zeros = len(range(rows)[:math.ceil(sparsity * rows)])  # as PyTorch's randperm(rows)[:num_zeros] counts them
    normal_(tensor, 0, std, generator)
    if zeros and cols:
        data = tensor._data
        xp = backend.array_module(data)
        gen = backend.generator(tensor.device, None, "sparse_")
        with backend.on_device(tensor.device):
            keys = xp.asarray(gen.random((rows, cols)) if isinstance(gen, np.random.Generator)
                              else gen.random_sample((rows, cols)))
            ranks = xp.argsort(xp.argsort(keys, axis=0), axis=0)  # each entry's place in its column's random order
            with no_grad():
                data[...] = backend.where(ranks < zeros, 0, data)
                tensor._bump("sparse_")
    return tensor


def _deprecated(new):
    """PyTorch's old spelling of ``new`` (its name without the trailing underscore): warns, then calls it."""
    old = new.__name__[:-1]

    def deprecated_init(*args, **kwargs):
        warnings.warn(f"`nn.init.{old}` is now deprecated in favor of `nn.init.{new.__name__}`.", FutureWarning,
                      stacklevel=2)
        return new(*args, **kwargs)

    deprecated_init.__name__ = deprecated_init.__qualname__ = old
    deprecated_init.__doc__ = f"{old}(...): deprecated, :func:`{new.__name__}` (it warns, as PyTorch's)."
    return deprecated_init


uniform, normal, constant, eye, dirac = (_deprecated(f) for f in (uniform_, normal_, constant_, eye_, dirac_))
xavier_uniform, xavier_normal = _deprecated(xavier_uniform_), _deprecated(xavier_normal_)
kaiming_uniform, kaiming_normal = _deprecated(kaiming_uniform_), _deprecated(kaiming_normal_)
orthogonal, sparse = _deprecated(orthogonal_), _deprecated(sparse_)
