"""Argument checks shared by the functional modules: each error names the op, what was expected and
what came."""
from __future__ import annotations

import functools as _functools
import math as _math
import numbers as _numbers
import warnings as _warnings

import numpy as _np

from .. import backend as _backend
from ..autograd import is_grad_enabled as _is_grad_enabled
from ..tensor import Tensor as _Tensor
from ..backend import InputError, InputTypeError


class NormTypeZeroError(InputError, ZeroDivisionError):
    """lp_pool's norm_type 0 (its root is 1/p): the ZeroDivisionError PyTorch's raises, and a ValueError/RuntimeError
    as the rest of the bad input here."""


def _check_tensor(op, input, floating=False):
    if not isinstance(input, _Tensor):
        raise InputTypeError(f"{op}: expected a tensor input, got {type(input).__name__}")
    if floating and not _backend.is_floating(input.dtype):
        raise InputTypeError(f"{op}: expected a floating-point input (the result is written into it), "
                             f"got dtype {input.dtype}")


def _not_differentiable(op, name, value):
    """PyTorch's rule for the loss arguments it does not differentiate (class and element weights, some targets):
    one that requires grad raises while grad mode is on, rather than have its gradient silently dropped."""
    if isinstance(value, _Tensor) and value.requires_grad and _is_grad_enabled():
        raise InputError(f"{op}: not differentiable with respect to argument '{name}': expected a tensor that does "
                         f"not require grad (pass {name}.detach()), got one with requires_grad=True")


def _legacy_reduction(size_average, reduce, reduction, elementwise_mean=True):
    """The reduction a loss uses: ``reduction``, or, where PyTorch's deprecated ``size_average`` or ``reduce`` is
    given (not None), what PyTorch's legacy rule maps them to, with its warning; ``reduction`` is then ignored, as
    PyTorch ignores it. A missing one counts as True: reduce and size_average give 'mean', reduce alone 'sum', no
    reduce 'none'. The deprecated ``reduction='elementwise_mean'`` is 'mean', with PyTorch's warning, for the losses
    whose reduction PyTorch maps so (``elementwise_mean=False``: the others, where it stays and raises)."""
    if size_average is None and reduce is None:
        if reduction == "elementwise_mean" and elementwise_mean:
            _warnings.warn("reduction='elementwise_mean' is deprecated. Please use reduction='mean' instead.",
                           UserWarning, stacklevel=3)
            return "mean"
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    mapped = ("mean" if size_average else "sum") if reduce else "none"
    # stacklevel 3: the loss's caller (the user's line, for a functional loss or a loss module built directly)
    _warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{mapped}' instead.",
                   UserWarning, stacklevel=3)
    return mapped


def _is_int(v):
    """An int, a NumPy integer too, but no bool."""
    return isinstance(v, _numbers.Integral) and not isinstance(v, (bool, _np.bool_))


def _tensor_ints(value):
    """``value`` (or each element of a tuple or list) with a one-element integer tensor as its int: PyTorch's int
    and int-tuple arguments (a kernel size, a stride) take them."""
    def as_int(v):
        return v.__index__() if isinstance(v, _Tensor) and v.numel() == 1 and v.dtype.kind in "iu" else v

    if isinstance(value, (tuple, list)):
        return type(value)(as_int(v) for v in value)
    return as_int(value)


def _single(op, name, value, minimum):
    """A 1-D layer's int argument: an int, or a 1-tuple of one, at least ``minimum``."""
    value = _tensor_ints(value)
    v = value[0] if isinstance(value, (tuple, list)) and len(value) == 1 else value
    wanted = "an int" if minimum == -_math.inf else f"an int >= {minimum}"  # (-inf: any int, a padding to crop)
    if not _is_int(v) and not isinstance(v, (tuple, list)):  # (a float, a bool, a string: PyTorch's TypeError)
        raise InputTypeError(f"{op}: {name} must be {wanted} (or a 1-tuple), got {value!r}")
    if not _is_int(v) or v < minimum:
        raise InputError(f"{op}: {name} must be {wanted} (or a 1-tuple), got {value!r}")
    return int(v)


def _pair(op, name, value, minimum):
    """A 2-D layer's int argument: an int or a pair of them (a 1-tuple stands for both, as in PyTorch), each at
    least ``minimum``."""
    if type(value) is int:  # the common cases first, without the general checks (a bool is no int here)
        pair = (value, value)
    elif type(value) is tuple and len(value) == 2 and type(value[0]) is int and type(value[1]) is int:
        pair = value
    else:
        value = _tensor_ints(value)
        if isinstance(value, (tuple, list)):
            if len(value) not in (1, 2):
                raise InputError(f"{op}: {name} must be an int or a pair of ints, got {value!r}")
            pair = tuple(value) * (3 - len(value))
        else:
            pair = (value, value)
        if not all(_is_int(v) for v in pair):
            raise InputTypeError(f"{op}: {name} must be an int or a pair of ints, got {value!r}")
        pair = (int(pair[0]), int(pair[1]))
    if pair[0] < minimum or pair[1] < minimum:
        raise InputError(f"{op}: {name} must be >= {minimum}, got {value!r}")
    return pair


def _unpool_size(op, default, stride, output_size):
    """A max unpooling's output size, as PyTorch's: ``default`` per spatial dimension, or ``output_size`` (those
    sizes, or the whole shape with N and C first), each strictly within a stride of the default."""
    if output_size is None:
        return list(default)
    k = len(default)
    sizes = list(output_size) if isinstance(output_size, (tuple, list)) else [output_size]
    if len(sizes) == k + 2:
        sizes = sizes[2:]
    if len(sizes) != k or not all(_is_int(v) for v in sizes):
        raise InputError(f"{op}: output_size should be a sequence of {k} or {k + 2} ints, got {output_size!r}")
    for d, (size, base, s) in enumerate(zip(sizes, default, stride)):
        if not base - s < size < base + s:
            raise InputError(f"{op}: invalid output_size \"{tuple(sizes)}\" (dim {d} must be between {base - s} and "
                             f"{base + s})")
    return [int(v) for v in sizes]


def _check_image(op, input, what="input"):
    if not isinstance(input, _Tensor):
        raise InputTypeError(f"{op}: expected a tensor {what}, got {type(input).__name__}")
    if input.ndim != 4:
        raise InputError(f"{op}: expected a 4-D {what} (N, C, H, W) or a 3-D unbatched one (C, H, W), got shape "
                         f"{tuple(input.shape)}")


# ---------------------------------------------------------------- checks skipped while nothing they read changed
# A module's call checks the same things every step (a training step's layers ask once per step each), and eager
# steps are bound by host time: a module keeps the signature of its last call whose checks passed, a tuple of
# everything those checks read (shapes, dtypes, devices, the numbers and flags of its arguments), and skips them
# while a call's signature equals it. A signature is None where a check could warn or change its operands, or an
# argument is of a type that could change in place (a list) or that the signature does not describe: such calls
# always check.
def array_signature(t):
    """A tensor's (or None's) shape, dtype and device, as the checks read them (AttributeError: not a tensor)."""
    if t is None:
        return None
    a = t._data
    return a.shape, a.dtype, a.data.device_id if _backend.is_cuda_array(a) else -1


def int_tuples(*values):
    """Whether each value is a tuple of ints (a module's stride, padding or dilation): immutable, so a signature may
    hold it."""
    return all(type(v) is tuple and all(type(i) is int for i in v) for v in values)


def passed_checks(holder, key, signature):
    """What ``holder`` (a module's ``__dict__``) kept under ``key`` beside the signature of its last call whose
    checks passed (``holder[key] = signature, kept``), when this call's ``signature`` equals that one; else None
    (the call checks)."""
    passed = holder.get(key)
    return passed[1] if signature is not None and passed is not None and passed[0] == signature else None


def unbatched(spatial):
    """A decorator: ``fn`` of a batched (N, C, *spatial) input also taking an unbatched (C, *spatial) one, run as a
    batch of one whose batch dimension every result (a max pool's indices too) drops."""
    def decorate(fn):
        @_functools.wraps(fn)
        def taking_unbatched(input, *args, **kwargs):
            if not (isinstance(input, _Tensor) and input.ndim == spatial + 1):
                return fn(input, *args, **kwargs)
            out = fn(input.reshape(1, *input.shape), *args, **kwargs)
            if isinstance(out, tuple):
                return tuple(o.reshape(*o.shape[1:]) for o in out)
            return out.reshape(*out.shape[1:])
        return taking_unbatched
    return decorate
