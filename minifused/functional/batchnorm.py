"""``batch_norm`` (fused kernels, optionally with its ReLU) and ``group_norm`` (on CUDA its fused kernels, elsewhere
the LayerNorm rows over each group, then the per-channel affine)."""
from __future__ import annotations

import math as _math
import numbers as _numbers

from .. import backend as _backend
from ..autograd import is_grad_enabled as _grad_enabled
from ..kernels.conv import out_size
from ..ops import batchnorm as _bn_ops
from ..ops import norm as _norm_ops
from ..ops._common import autocast_float32 as _autocast_float32
from ..ops._common import cast as _cast
from ..ops.elementwise import zero_tied as _zero_tied
from ._checks import array_signature, passed_checks
from .conv import _conv2d_args, _conv2d_signature
from ..kernels import is_channels_last as _is_channels_last
from ..ops.shape import channels_last as _channels_last
from ..ops.shape import contiguous as _contiguous
from ..ops.shape import reshape as _reshape
from ..tensor import Tensor as _Tensor
from ..backend import DtypeNotImplementedError, InputError, InputTypeError

__all__ = ["batch_norm", "group_norm", "instance_norm", "local_response_norm"]


def _check_input(op, input):
    if not isinstance(input, _Tensor):
        raise InputTypeError(f"{op}: expected a tensor input, got {type(input).__name__}")
    if not _backend.is_floating(input.dtype):  # (PyTorch's NotImplementedError)
        raise DtypeNotImplementedError(f"{op}: expected a floating-point input, got dtype {input.dtype}")
    if input.ndim < 2:
        raise InputError(f"{op}: expected an input of at least 2 dimensions (N, C, ...), got shape "
                         f"{list(input.shape)}")


def _check_channel_vectors(op, input, names, vectors, shape=None, sized=True):
    """Each given vector (``vectors``, named by ``names``) is a tensor of shape (C,) (unless not ``sized``) on the
    input's device; all of one dtype: the input's, or float32 with a 16-bit input (mixed precision). ``shape``: the
    normalized tensor's, where it is not the input's (a convolution's output the op computes first). (Every
    BatchNorm call runs this: it reads the arrays once each.)"""
    x = input._data
    shape = x.shape if shape is None else shape
    c, dtype = shape[1], None
    for name, t in zip(names, vectors):
        if t is None:
            continue
        if not isinstance(t, _Tensor):
            raise InputTypeError(f"{op}: {name} must be a tensor or None, got {type(t).__name__}")
        a = t._data
        if a.shape != (c,) and sized:
            raise InputError(f"{op}: {name} must have shape [{c}] (one per channel of the input "
                             f"{list(shape)}), got {list(a.shape)}")
        if not _backend.same_device(a, x):
            raise RuntimeError(f"{op}: {name} is on {t.device} but the input is on {input.device}")
        if a.dtype is dtype:  # (a later vector of the first one's dtype: floating-point, checked)
            continue
        if not _backend.is_floating(a.dtype):
            raise InputTypeError(f"{op}: {name} must be floating-point, got dtype {a.dtype}")
        if dtype is None:  # (not ``a.dtype != dtype``: NumPy reads a None dtype as float64)
            dtype = a.dtype
        elif a.dtype != dtype:
            raise InputTypeError(f"{op}: weight, bias and the running statistics must share one dtype, got "
                                 f"{sorted({str(v._data.dtype) for v in vectors if v is not None})}")
    if dtype is not None and dtype != x.dtype and not (dtype == _backend.float32 and x.dtype.itemsize == 2):
        given = " and ".join(name for name, t in zip(names, vectors) if t is not None)
        raise InputTypeError(f"{op}: {given} must have the input's dtype ({x.dtype}), or float32 with a 16-bit input "
                             f"(PyTorch's rule), got {dtype}")


_BN_VECTORS = ("running_mean", "running_var", "weight", "bias")


def _check_running_no_grad(op, running_mean, running_var):
    """Running statistics that require grad are refused while grad mode is on, as PyTorch's (its batch_norm is
    not differentiable with respect to them: a gradient would silently be missing, and training writes them in
    place)."""
    for name, t in (("running_mean", running_mean), ("running_var", running_var)):
        if t is not None and t.requires_grad and _grad_enabled():
            raise InputError(f"{op}: the op is not differentiable with respect to {name}, which cannot have "
                             f"requires_grad=True (detach it, or call under no_grad)")


def _check_positive_int(op, name, v):
    """``v`` a positive int: anything else (a float, a bool) a TypeError, as PyTorch's argument parser raises; an int
    below 1 a ValueError."""
    if isinstance(v, bool) or not isinstance(v, _numbers.Integral):
        raise InputTypeError(f"{op}: {name} must be a positive int, got {v!r}")
    if v < 1:
        raise InputError(f"{op}: {name} must be a positive int, got {v!r}")


def _check_eps(op, eps):
    """``eps`` a finite number >= 0: a number out of range a ValueError; anything else (None, a string) a TypeError,
    as PyTorch's argument parser raises."""
    if not _real(eps) or eps < 0:
        err = InputError if isinstance(eps, _numbers.Real) and not isinstance(eps, bool) else InputTypeError
        raise err(f"{op}: eps must be a finite number >= 0, got {eps!r}")


def _real(v):
    if type(v) is float:  # the common case, without the abstract-class check
        return _math.isfinite(v)
    return isinstance(v, _numbers.Real) and not isinstance(v, bool) and _math.isfinite(v)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5,
               activation=None):
    """Batch normalization over the channel dimension 1 of ``input`` (N, C, ...), as
    ``torch.nn.functional.batch_norm``: in training the batch's statistics normalize (biased variance) and
    the running statistics, when given, move by ``momentum`` towards the mean and the unbiased variance, in
    place; otherwise the running statistics normalize. ``activation='relu'`` runs the ReLU in the same
    kernel (no mask kept: the backward recomputes the ReLU's decisions from the input)."""
    return _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps, activation)


def _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps, activation,
                num_batches_tracked=None):
    """:func:`batch_norm`; a module's ``num_batches_tracked`` (int64 scalar tensor), when given, goes up by one
    with the running statistics, in their kernel (one launch less per BatchNorm layer and step)."""
    op = "batch_norm"
    _check_input(op, input)
    # (PyTorch's BatchNorm of an empty input reads none of its vectors, so checks no size: a Conv2d(0, C)'s
    # output of 0 channels passes any BatchNorm2d)
    _check_batch_norm_args(op, input, input.shape, running_mean, running_var, weight, bias, training, momentum, eps,
                           activation, sized=input._data.size != 0)
    if not input._data.size:
        return _empty_batch_norm(op, input, weight, bias, training, running_mean, num_batches_tracked)
    return _batch_norm_run(input, running_mean, running_var, weight, bias, training, momentum, eps, activation,
                           num_batches_tracked)


def _batch_norm_run(input, running_mean, running_var, weight, bias, training, momentum, eps, activation,
                    num_batches_tracked):
    """:func:`_batch_norm` of checked arguments and a non-empty input."""
    mean, var, count = _running(training, running_mean, running_var, num_batches_tracked)
    out = _bn_ops.batch_norm(input, weight, bias, mean, var, bool(training), float(momentum), float(eps),
                             relu=activation == "relu", count=None if count is None else count._data)
    _bump_running("batch_norm", training, running_mean, running_var, count)
    return out


def batch_norm_checked_once(holder, check_input, input, running_mean, running_var, weight, bias, training, momentum,
                            eps, activation, num_batches_tracked=None):
    """:func:`_batch_norm` for a module (``holder``: its ``__dict__``; ``check_input(input)``: its own checks, which
    read the input's shape and the vectors' sizes alone), all checks skipped while all they read equals what they
    last passed (see ``_checks.passed_checks``): the same results and errors."""
    signature = _batch_norm_signature(input, running_mean, running_var, weight, bias, training, momentum, eps,
                                      activation)
    if passed_checks(holder, "_norm_checks_passed", signature) is None:
        check_input(input)
        out = _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps, activation,
                          num_batches_tracked)
        if signature is not None and input._data.size:  # (an empty input's path: the op's alone)
            holder["_norm_checks_passed"] = signature, True
        return out
    return _batch_norm_run(input, running_mean, running_var, weight, bias, training, momentum, eps, activation,
                           num_batches_tracked)


def _conv2d_batch_norm_checks(input, weight, bias, stride, padding, dilation, groups, running_mean, running_var,
                              bn_weight, bn_bias, training, momentum, eps, activation, check_shape=None):
    """The checks of ``_batch_norm(conv2d(input, weight, bias, ...), ...)`` as one op (``nn.Conv2d.forward_with_norm``:
    ``Sequential``'s Conv2d, BatchNorm2d and ReLU): both functions' checks, in their order (``check_shape(shape)``,
    the module's own, between them), so the same errors as the two calls. Returns the convolution's operands as
    :func:`_conv2d_batch_norm_run` takes them, ``(input, weight, bias, stride, padding, dilation, groups)``."""
    input, weight, bias, stride, padding, dilation, groups = _conv2d_args(input, weight, bias, stride, padding,
                                                                          dilation, groups, None)
    (n, _, h, w), (k, _, r, s) = input.shape, weight.shape
    shape = (n, k, out_size(h, r, stride[0], padding[0], dilation[0]),
             out_size(w, s, stride[1], padding[1], dilation[1]))
    if check_shape is not None:
        check_shape(shape)
    _check_batch_norm_args("batch_norm", input, shape, running_mean, running_var, bn_weight, bn_bias, training,
                           momentum, eps, activation)
    return input, weight, bias, stride, padding, dilation, groups


def _conv2d_batch_norm_run(input, weight, bias, stride, padding, dilation, groups, running_mean, running_var,
                           bn_weight, bn_bias, training, momentum, eps, activation, num_batches_tracked):
    """The convolution and BatchNorm (``activation`` in its kernel) of checked operands as one node of the tape, with
    both ops' kernels, so the same numbers as the two calls; the running statistics it updated bumped."""
    mean, var, count = _running(training, running_mean, running_var, num_batches_tracked)
    out = _bn_ops.conv_batch_norm(input, weight, bias, bn_weight, bn_bias, stride, padding, dilation, groups, mean,
                                  var, bool(training), float(momentum), float(eps), relu=activation == "relu",
                                  count=None if count is None else count._data)
    _bump_running("batch_norm", training, running_mean, running_var, count)
    return out


def _conv2d_batch_norm_signature(input, weight, bias, stride, padding, dilation, groups, running_mean, running_var,
                                 bn_weight, bn_bias, training, momentum, eps, activation):
    """All that :func:`_conv2d_batch_norm_checks` reads of its arguments (and of grad mode), as a tuple of values
    (see ``_checks.passed_checks``): the convolution's and the BatchNorm's; None where either is."""
    conv = _conv2d_signature(input, weight, bias, stride, padding, dilation, groups, None)
    norm = _batch_norm_signature(None, running_mean, running_var, bn_weight, bn_bias, training, momentum, eps,
                                 activation)
    return None if conv is None or norm is None else conv + norm


def _batch_norm_signature(input, running_mean, running_var, weight, bias, training, momentum, eps, activation):
    """All that BatchNorm's checks (:func:`_check_input`, :func:`_check_batch_norm_args`) read of their arguments and
    of grad mode, as a tuple of values (see ``_checks.passed_checks``); None where a number is of another type than
    the modules hold or an argument is not a tensor."""
    if not (type(momentum) in _NUMBERS and type(eps) in _NUMBERS):
        return None
    try:
        return (array_signature(input), array_signature(weight), array_signature(bias), array_signature(running_mean),
                array_signature(running_var), running_mean is not None and running_mean.requires_grad,
                running_var is not None and running_var.requires_grad, _grad_enabled(), training, momentum, eps,
                activation)
    except AttributeError:  # (not a tensor: the checks name it)
        return None


_NUMBERS = (float, int)


def _empty_batch_norm(op, input, weight, bias, training, running_mean, count):
    """BatchNorm of an empty input, as PyTorch's: no statistic to take, none updated; the input's copy, tied to
    ``weight`` and ``bias`` so each gets a zero gradient. A module's batch counter still advances in training (its
    forward counts the batch before the call)."""
    if training and running_mean is not None and count is not None:
        count._data += 1
        count._bump(op)
    return _zero_tied(input.clone(), weight, bias)


def _check_batch_norm_args(op, input, shape, running_mean, running_var, weight, bias, training, momentum, eps,
                           activation, sized=True):
    """BatchNorm's arguments against the ``shape`` it normalizes, on ``input``'s device (see :func:`_batch_norm`);
    the vectors' sizes where ``sized``."""
    _check_channel_vectors(op, input, _BN_VECTORS, (running_mean, running_var, weight, bias), shape, sized)
    _check_running_no_grad(op, running_mean, running_var)
    if (running_mean is None) != (running_var is None):
        given = "running_mean" if running_var is None else "running_var"
        raise InputError(f"{op}: running_mean and running_var must both be tensors or both None, got {given} alone")
    if not training and running_mean is None:
        raise InputError(f"{op}: running_mean must be defined in evaluation mode (training=False normalizes with "
                         f"running_mean and running_var)")
    if not _real(momentum) or not 0.0 <= momentum <= 1.0:
        # a number out of range: ValueError; anything else (None: the modules' cumulative average is theirs alone)
        # a TypeError, as PyTorch's
        err = InputError if isinstance(momentum, _numbers.Real) else InputTypeError
        raise err(f"{op}: momentum must be a number in [0, 1], got {momentum!r}")
    if not _real(eps) or eps < 0 or (training and eps == 0):
        # a number out of range: ValueError; anything else (None, a string) a TypeError, as PyTorch's argument parser
        err = InputError if isinstance(eps, _numbers.Real) and not isinstance(eps, bool) else InputTypeError
        raise err(f"{op}: eps must be a finite number, > 0 in training (>= 0 in evaluation), got {eps!r}")
    if activation not in (None, "relu"):
        raise InputError(f"{op}: activation must be None or 'relu', got {activation!r}")
    per_channel = _math.prod(shape) // max(shape[1], 1)
    if training and per_channel == 1:  # PyTorch's rule: an empty batch passes (its output is empty)
        raise InputError(f"{op}: expected more than 1 value per channel when training, got input size "
                         f"{list(shape)}")


def _running(training, running_mean, running_var, num_batches_tracked):
    """(running mean array, running variance array, the batch counter a training forward advances), Nones where
    there are none."""
    if running_mean is None:
        return None, None, None
    return running_mean._data, running_var._data, num_batches_tracked if training else None


def _bump_running(op, training, running_mean, running_var, count):
    """The running statistics (and the batch counter), which a training forward updated in place: bumped."""
    if training and running_mean is not None:
        running_mean._bump(op)
        running_var._bump(op)
        if count is not None:
            count._bump(op)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Group normalization as ``torch.nn.functional.group_norm``: the C channels of ``input`` (N, C, ...)
    in ``num_groups`` groups, each (sample, group) normalized over its channels and positions (biased
    variance), then the per-channel ``weight`` and ``bias``. Float32 inside a cuda autocast region (PyTorch's
    float32 list there; its cpu list lacks it). A channels-last input gives a channels-last output on the cpu,
    a C-contiguous one on cuda, as PyTorch's kernels do."""
    input, weight, bias = _autocast_float32(input, weight, bias, devices=("cuda",))
    y = _group_norm(input, num_groups, weight, bias, eps)
    if input.ndim == 4 and not _backend.is_cuda_array(input._data) and _is_channels_last(input._data):
        y = _contiguous(y, _channels_last)
    return y


def _group_norm(input, num_groups, weight, bias, eps):
    """:func:`group_norm` without autocast's cast (instance_norm, on no autocast list, keeps its dtype)."""
    op = "group_norm"
    _check_input(op, input)
    _check_positive_int(op, "num_groups", num_groups)
    n, c = input.shape[0], input.shape[1]
    if c % num_groups:
        raise InputError(f"{op}: num_groups ({num_groups}) must divide the number of channels ({c})")
    _check_channel_vectors(op, input, ("weight", "bias"), (weight, bias))
    _check_eps(op, eps)
    if n * c // num_groups * _math.prod(input.shape[2:]) == 1:  # PyTorch's rule (one image, one value per group)
        raise InputError(f"{op}: expected more than 1 value per group, got input size {list(input.shape)} with "
                         f"num_groups={num_groups}")
    if _norm_ops.fused_group_norm(input, weight, bias, num_groups):
        return _norm_ops.group_norm(input, weight, bias, num_groups, eps)
    from . import layer_norm

    # weight and bias wider than the input (fp32 ones over a 16-bit input, mixed precision): normalized and
    # scaled in their dtype, then rounded once to the input's, which the output keeps (PyTorch's rules)
    wide = next((t.dtype for t in (weight, bias) if t is not None), input.dtype)
    x = _cast(input, wide) if wide.itemsize > input.dtype.itemsize else input
    if x.numel() == 0:
        y = x * 1.0
    else:
        grouped = _reshape(x, n, num_groups, -1)
        y = _reshape(layer_norm(grouped, (grouped.shape[-1],), eps=eps), *x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * _reshape(weight, *shape)
    if bias is not None:
        y = y + _reshape(bias, *shape)
    return _cast(y, input.dtype)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Instance normalization as ``torch.nn.functional.instance_norm``: each (sample, channel) of ``input``
    (N, C, ...) normalized over its positions (biased variance) — group_norm with one channel per group — then
    the per-channel ``weight`` and ``bias``. With ``running_mean`` / ``running_var`` the batch's statistics
    (each instance's mean and unbiased variance, averaged over the samples) move them by ``momentum``, in place;
    ``use_input_stats=False`` normalizes with them instead. The result is C-contiguous whatever the input's
    layout, as PyTorch's (which normalizes ``input.contiguous()``)."""
    op = "instance_norm"
    _check_input(op, input)
    if input.ndim < 3:
        raise InputError(f"{op}: expected an input of at least 3 dimensions (N, C, ...), got shape "
                         f"{list(input.shape)}")
    c, positions = input.shape[1], _math.prod(input.shape[2:])
    if (running_mean is None) != (running_var is None):
        raise InputError(f"{op}: running_mean and running_var must be given together")
    _check_channel_vectors(op, input, ("weight", "bias", "running_mean", "running_var"),
                           (weight, bias, running_mean, running_var))
    _check_running_no_grad(op, running_mean, running_var)
    if not _real(momentum) or not 0.0 <= momentum <= 1.0:
        # a number out of range: ValueError; anything else (None too: the modules pass 0.0 for theirs, as PyTorch's)
        # a TypeError, as PyTorch's, rather than a call that silently leaves the running statistics
        err = InputError if isinstance(momentum, _numbers.Real) else InputTypeError
        raise err(f"{op}: momentum must be a number in [0, 1], got {momentum!r}")
    _check_eps(op, eps)  # (here, so that the error names this op, not group_norm or batch_norm)
    if not use_input_stats and running_mean is None:
        raise InputError(f"{op}: use_input_stats=False normalizes with running_mean and running_var: give them")
    if use_input_stats and positions == 1:  # (PyTorch's rule: no positions at all pass, with an empty result)
        raise InputError(f"{op}: expected more than 1 spatial element per instance, got input size "
                         f"{list(input.shape)}")
    if input.numel() == 0:  # an empty batch, no channels or no positions: an empty result, the statistics kept
        y = input * 0
        for p in (weight, bias):  # (zero gradients for them)
            if p is not None:
                y = y + _reshape(p, 1, c, *(1,) * (input.ndim - 2)) * 0
        return _cast(y, input.dtype)
    input = _contiguous(input)  # (as PyTorch's: a C-contiguous result whatever the input's layout)
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, False, 0.0, eps)
    y = _group_norm(input, c, weight, bias, eps) if eps else _instance_norm_eps0(input, weight, bias)
    if running_mean is not None and momentum:
        from ..autograd import no_grad

        with no_grad():
            x = input.detach()
            x = (x.float() if x.dtype in (_backend.float16, _backend.bfloat16) else x).reshape(input.shape[0], c, -1)
            mean, var = x.mean(2).mean(0), x.var(2, unbiased=True).mean(0)
            for stat, value in ((running_mean, mean), (running_var, var)):
                stat.mul_(1.0 - momentum).add_(value.to(stat.dtype), alpha=momentum)
    return y


def _instance_norm_eps0(input, weight, bias):
    """Each instance normalized with eps 0 as PyTorch's batch_norm kernel does it (its ``InvStd``): a constant
    instance, of zero variance, gets a zero rstd, so its output is the bias and its gradient zero, not 0 / 0."""
    from ..ops import where

    n, c = input.shape[:2]
    wide = next((t.dtype for t in (weight, bias) if t is not None), input.dtype)
    x = _cast(input, wide) if wide.itemsize > input.dtype.itemsize else input
    x = x.float() if x.dtype in (_backend.float16, _backend.bfloat16) else x
    flat = _reshape(x, n, c, -1)
    centred = flat - flat.mean(2, keepdim=True)
    var = (centred * centred).mean(2, keepdim=True)
    detached = flat.detach()
    constant = detached.amax(2, keepdim=True) == detached.amin(2, keepdim=True)  # (exact, where var may round)
    y = _reshape(centred * where(constant, 0.0, where(constant, 1.0, var).rsqrt()), *x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * _reshape(weight, *shape).to(y.dtype)
    if bias is not None:
        y = y + _reshape(bias, *shape).to(y.dtype)
    return _cast(y, input.dtype)


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """``x / (k + alpha * mean of x² over a window of ``size`` channels) ** beta``, as
    ``torch.nn.functional.local_response_norm`` (the window zero-padded ``size // 2`` before and ``(size - 1) // 2``
    after each channel, the mean over all ``size`` places): (N, C, *) input."""
    op = "local_response_norm"
    if not isinstance(input, _Tensor):
        raise InputTypeError(f"{op}: expected a tensor input, got {type(input).__name__}")
    if input.ndim < 3:
        raise InputError(f"{op}: Expected 3D or higher dimensionality input (got {input.ndim} dimensions)")
    if not _backend.is_floating(input.dtype):
        raise InputTypeError(f"{op}: expected a floating-point input, got {input.dtype}")
    _check_positive_int(op, "size", size)
    if input.numel() == 0:
        return input
    from . import avg_pool2d, pad

    n, c = input.shape[:2]
    sq = _reshape(input * input, n, 1, c, -1)  # the channels as the rows of a one-channel image
    sq = pad(sq, (0, 0, size // 2, (size - 1) // 2))
    if input.ndim > 3:  # PyTorch's window sum of these is an avg_pool3d, on its cpu autocast float32 list
        (sq,) = _autocast_float32(sq, devices=("cpu",))
    div = _reshape(avg_pool2d(sq, (size, 1), stride=1), input.shape)
    if input.ndim == 4 and _is_channels_last(input._data):  # the result laid out as the input, as PyTorch's
        div = _contiguous(div, _channels_last)
    return input / (div * float(alpha) + float(k)) ** float(beta)

