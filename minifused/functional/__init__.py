"""The public function API (``import minifused.functional as F``).

Arguments are validated here, at the boundary: shapes, dtypes and devices,
with messages that name the op, what was expected and what came. The ops
below assume valid input.
"""
from __future__ import annotations

import math as _math
import numbers as _numbers
import warnings as _warnings

import numpy as _np

from .. import backend as _backend
from .. import kernels as _kernels
from ..ops import (abs, clamp, exp, gelu, log, matmul, maximum, minimum, sigmoid, sqrt,  # noqa: F401,A004
                  tanh, where)
from ..autograd import is_grad_enabled as _grad_on
from ..ops import activation as _A
from ..ops import elementwise as _ew_ops
from ..ops import cast as _cast
from ..ops._common import autocast_float32 as _autocast_float32, autocast_lower as _autocast_lower
from ..ops._common import number_arg as _number_arg
from ..ops import loss as _loss_ops
from ..ops import softmax as _softmax_ops
from ..ops.dropout import dropout as _dropout
from ..ops.linear import LinearFn as _LinearFn
from ..ops.norm import norm as _layer_norm, norm_ as _layer_norm_  # (minifused.norm is torch.norm)
from ..ops.shape import contiguous as _contiguous
from ..ops.shape import permute as _permute
from ..ops.shape import reshape as _reshape
from ..ops.shape import transpose as _transpose
from ..tensor import Tensor as _Tensor
from ..backend import same_device as _same_device
from ._checks import _check_tensor, _legacy_reduction, _not_differentiable
from ..backend import InputError, InputTypeError

# ---- elementwise and activations (foundation)
# The in-place forms (``relu_``, ``gelu_``, ``softmax_``, ``layer_norm_``, ``dropout(inplace=True)``)
# write into the input's own array, bump its version counter and return the input itself, as in
# PyTorch (``Function.apply_``). On a leaf that requires grad they raise; recorded on the tape they
# give the gradients of the out-of-place forms, and an earlier op that saved the input's array
# raises in backward, naming the in-place op.


def relu(input, inplace=False):
    """max(input, 0); ``inplace=True`` is :func:`relu_`."""
    _check_tensor("relu", input)
    return relu_(input) if inplace else _ew_ops.relu(input)


def relu_(input):
    """ReLU written into ``input`` (returned). Recorded, it keeps a 1-bit-per-element mask for the
    backward, as the out-of-place form does."""
    _check_tensor("relu_", input)
    return _ew_ops.relu_(input)


def gelu_(input, approximate="none"):
    """GELU written into ``input`` (floating dtypes; returned). Recorded, it keeps a copy of the
    input for the backward (the in-place form saves memory only where nothing is recorded)."""
    _check_tensor("gelu_", input, floating=True)
    return _ew_ops.gelu_(input, approximate)

# ---- linear (cuBLASLt epilogs)

_LINEAR_DTYPES = frozenset({_backend.float32, _backend.float16, _backend.bfloat16})
LINEAR_ACTIVATIONS = _kernels.ACTIVATIONS  # what F.linear / nn.Linear accept (the GEMM epilogs)


def _check_gemm_dtype(op, dtype, array):
    """The GEMM's dtypes: float32, float16, bfloat16, and float64 on the CPU only."""
    if dtype not in _LINEAR_DTYPES and not (dtype == _backend.float64 and not _backend.is_cuda_array(array)):
        raise InputTypeError(f"{op}: unsupported dtype {dtype}; expected float32, float16 or bfloat16 "
                             f"(float64 on cpu only)")


def linear(input, weight, bias=None, activation=None):
    """``activation(input @ weight.T + bias)`` in one cuBLASLt GEMM (epilogs on the GPU).

    ``input`` (..., in_features), ``weight`` (out_features, in_features) as in
    PyTorch, ``bias`` (out_features,) or None; all of one dtype (float32, float16 or
    bfloat16; float64 on cpu), on one device. ``activation`` is None, ``'relu'`` or
    ``'gelu'``, the tanh approximation (PyTorch's ``gelu(approximate='tanh')``), which
    is what cuBLASLt's GELU epilog computes. float32 is computed in full float32
    unless ``minifused.backends.cuda.matmul.allow_tf32`` is set.
    """
    if _backend.autocast_dtypes():
        input, weight, bias = _autocast_lower(input, weight, bias)
    # The common, valid case in a few comparisons (this runs once per layer per step);
    # anything unusual goes to the checks that name what was wrong.
    if isinstance(input, _Tensor) and isinstance(weight, _Tensor) and activation in LINEAR_ACTIVATIONS:
        x, w = input._data, weight._data
        xs, ws, dtype = x.shape, w.shape, x.dtype
        kind = type(x)
        if (len(ws) == 2 and xs and xs[-1] == ws[1] and w.dtype is dtype and dtype in _LINEAR_DTYPES
                and type(w) is kind and (bias is None or (
                    isinstance(bias, _Tensor) and bias._data.shape == ws[:1] and bias._data.dtype is dtype
                    and type(bias._data) is kind))
                and (kind is _np.ndarray or (x.data.device_id == w.data.device_id and (
                    bias is None or x.data.device_id == bias._data.data.device_id)))):
            return _LinearFn.apply(input, weight, bias, activation=activation)
    if activation is None and isinstance(weight, _Tensor) and (weight.ndim == 1 or (
            isinstance(bias, _Tensor) and tuple(bias.shape) != tuple(weight.shape[:1]))):
        return _linear_composite(input, weight, bias)
    _linear_check(input, weight, bias, activation)
    return _LinearFn.apply(input, weight, bias, activation=activation)


def _linear_composite(input, weight, bias):
    """PyTorch's composite linear, ``matmul(input, weight.t()) + bias``: a 1-D weight (one output feature, its
    dimension dropped) and a bias that broadcasts to the output without growing it (a 0-d one, (1,), (N, 1))."""
    op = "linear"
    if not isinstance(input, _Tensor):
        raise InputTypeError(f"{op}: expected tensors for input and weight, got {type(input).__name__} and "
                             f"{type(weight).__name__}")
    if bias is not None and not isinstance(bias, _Tensor):
        raise InputTypeError(f"{op}: bias must be a tensor or None, got {type(bias).__name__}")
    if input.ndim == 0:
        raise InputError(f"{op}: input must have at least one dimension (..., in_features), got a 0-d tensor")
    if weight.ndim > 2 or input.shape[-1] != weight.shape[-1]:
        raise InputError(f"{op}: input has {input.shape[-1]} features (last dimension of shape "
                         f"{tuple(input.shape)}) but weight of shape {tuple(weight.shape)} expects "
                         f"{weight.shape[-1]}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.dtype != input.dtype:
            raise InputTypeError(f"{op}: {name} dtype {t.dtype} differs from input dtype {input.dtype} (no implicit "
                                 f"casts; convert one with .to(dtype))")
    _check_gemm_dtype(op, input.dtype, input._data)
    out = matmul(input, weight if weight.ndim == 1 else _transpose(weight, 0, 1))
    if bias is None:
        return out
    shape, b = tuple(out.shape), tuple(bias.shape)
    if len(b) > len(shape) or any(n not in (1, m) for n, m in zip(b[::-1], shape[::-1])):
        want = f"must have shape ({weight.shape[0]},) to match out_features={weight.shape[0]} or" \
            if weight.ndim == 2 else "must"
        raise InputError(f"{op}: bias {want} broadcast to the output's shape {shape}, got shape {b}")
    return out + bias


def _linear_check(input, weight, bias, activation):
    if not isinstance(input, _Tensor) or not isinstance(weight, _Tensor):
        raise InputTypeError(f"linear: expected tensors for input and weight, got {type(input).__name__} "
                             f"and {type(weight).__name__}")
    if activation not in LINEAR_ACTIVATIONS:
        raise InputError(f"linear: activation must be None, 'relu' or 'gelu', got {activation!r}")
    wshape, xshape = weight.shape, input.shape
    if len(wshape) != 2:
        raise InputError(f"linear: weight must be 2-D (out_features, in_features), got shape {tuple(wshape)}")
    if len(xshape) == 0:
        raise InputError("linear: input must have at least one dimension (..., in_features), got a 0-d tensor")
    if xshape[-1] != wshape[1]:
        raise InputError(f"linear: input has {xshape[-1]} features (last dimension of shape {tuple(xshape)}) "
                         f"but weight expects in_features={wshape[1]} (weight shape {tuple(wshape)})")
    x, dtype = input._data, input.dtype
    _check_gemm_dtype("linear", dtype, x)
    if weight.dtype != dtype:
        raise InputTypeError(f"linear: input and weight must have the same dtype, got {dtype} and {weight.dtype} "
                             f"(no implicit casts; convert one with .to(dtype))")
    if bias is not None:
        if not isinstance(bias, _Tensor):
            raise InputTypeError(f"linear: bias must be a tensor or None, got {type(bias).__name__}")
        if len(bias.shape) != 1 or bias.shape[0] != wshape[0]:
            raise InputError(f"linear: bias must have shape ({wshape[0]},) to match out_features={wshape[0]}, "
                             f"got shape {tuple(bias.shape)}")
        if bias.dtype != dtype:
            raise InputTypeError(f"linear: bias dtype {bias.dtype} differs from input dtype {dtype}")
    if not (_same_device(x, weight._data) and (bias is None or _same_device(x, bias._data))):
        devs = [str(input.device), str(weight.device)] + ([str(bias.device)] if bias is not None else [])
        raise RuntimeError(f"linear: expected input, weight and bias on one device, got {', '.join(devs)}")


def square_matmul_(x, weight, transpose=False, *, bias=None, activation=None):
    """Overwrite ``x`` (rows, n) with ``x @ weight`` (``x @ weight.T`` if ``transpose``); returns ``x``.

    ``weight`` is square (n, n). The product is computed in row blocks, each into a block-sized
    scratch buffer copied back over its rows, so the extra device memory stays within
    ``x.nbytes / 8`` (``minifused.kernels.square_matmul``) instead of a second ``x``. With
    ``transpose=True`` (a Linear layer: ``weight`` is (out, in)) ``bias`` and ``activation``
    (None, 'relu', 'gelu' tanh form) are applied in the GEMM's epilog. In place and not
    differentiable: refused while grad mode is on for tensors that require grad. Bumps ``x``'s
    version counter, so a backward that saved ``x`` before detects the change.
    """
    from .. import autograd as _autograd
    from ..kernels import square_matmul as _sq

    op = "square_matmul_"
    if not isinstance(x, _Tensor) or not isinstance(weight, _Tensor):
        raise InputTypeError(f"{op}: expected tensors for x and weight, got {type(x).__name__} and "
                             f"{type(weight).__name__}")
    if len(weight.shape) != 2 or weight.shape[0] != weight.shape[1]:
        raise InputError(f"{op}: weight must be square (n, n), got shape {tuple(weight.shape)}")
    n = weight.shape[0]
    if len(x.shape) != 2:
        raise InputError(f"{op}: x must be 2-D (rows, {n}), got shape {tuple(x.shape)}")
    if x.shape[1] != n:
        raise InputError(f"{op}: x has {x.shape[1]} columns (shape {tuple(x.shape)}) but weight is "
                         f"({n}, {n}); expected x of shape (rows, {n})")
    dtype, xa = x.dtype, x._data
    _check_gemm_dtype(op, dtype, xa)
    if weight.dtype != dtype:
        raise InputTypeError(f"{op}: x and weight must have the same dtype, got {dtype} and {weight.dtype}")
    if activation not in LINEAR_ACTIVATIONS:
        raise InputError(f"{op}: activation must be None, 'relu' or 'gelu', got {activation!r}")
    if (bias is not None or activation is not None) and not transpose:
        raise InputError(f"{op}: bias and activation need transpose=True (they ride in the epilog of "
                         f"the x @ weight.T GEMM), got transpose=False")
    if bias is not None:
        if not isinstance(bias, _Tensor) or tuple(bias.shape) != (n,) or bias.dtype != dtype:
            got = (f"shape {tuple(bias.shape)}, dtype {bias.dtype}" if isinstance(bias, _Tensor)
                   else type(bias).__name__)
            raise InputError(f"{op}: bias must be a ({n},) tensor of dtype {dtype}, got {got}")
    if not (_same_device(xa, weight._data) and (bias is None or _same_device(xa, bias._data))):
        raise RuntimeError(f"{op}: expected x, weight and bias on one device, got {x.device} and "
                           f"{weight.device}" + (f" and {bias.device}" if bias is not None else ""))
    if n and xa.strides[1] != xa.itemsize:
        raise InputError(f"{op}: x must have unit stride along its columns (it is overwritten, so "
                         f"no contiguous copy is made), got strides {xa.strides}")
    if _autograd.is_grad_enabled():
        if x.requires_grad:
            kind = "a leaf tensor" if x.is_leaf else "the output of a recorded op"
            raise RuntimeError(f"{op}: square_matmul_ is in-place and not differentiable; x requires "
                               f"grad ({kind}). Wrap the call in minifused.no_grad() or use "
                               f"matmul / F.linear")
        for name, t in (("weight", weight), ("bias", bias)):
            if t is not None and t.requires_grad:
                raise RuntimeError(f"{op}: square_matmul_ is not differentiable; {name} requires grad "
                                   f"and would get no gradient. Wrap the call in minifused.no_grad()")
    w = weight._data
    xm = _backend.array_module(w)
    if not w.flags.c_contiguous:  # the weight only (n x n): the GEMMs want unit inner strides
        w = xm.ascontiguousarray(w)
    _sq.square_matmul_(xa, w, bool(transpose), None if bias is None else bias._data, activation)
    x._bump("square_matmul_")
    return x


# ---- normalization


_CUDA = ("cuda",)  # where softmax and the norms are on PyTorch's autocast float32 list (its cpu list lacks them)
_NORM_DTYPES = frozenset({_backend.float32, _backend.float16, _backend.bfloat16, _backend.float64})


def _empty_norm(input, params):
    """The (empty) result of a norm of an empty input; weight and bias get zero gradients."""
    out = input * 0
    for p in params:
        if p is not None:
            out = out + p * 0
    return out


def _check_norm_args(op, input, normalized_shape, params, wide=False):
    """The normalized size; ``params`` (name -> tensor or None) checked against the input. ``wide``: float32
    parameters of a 16-bit input are taken too (PyTorch's mixed precision; see :func:`_wide_params`)."""
    if not isinstance(input, _Tensor):
        raise InputTypeError(f"{op}: expected a tensor input, got {type(input).__name__}")
    if not isinstance(normalized_shape, (tuple, list)):  # (an int too, as PyTorch's; the modules take one)
        raise InputTypeError(f"{op}: normalized_shape must be a tuple or list of ints, got "
                             f"{type(normalized_shape).__name__}")
    normalized_shape = tuple(map(int, normalized_shape))
    k = len(normalized_shape)
    data = input._data
    if k == 0 or data.ndim < k or data.shape[data.ndim - k:] != normalized_shape:
        shape = list(normalized_shape)  # (PyTorch's words)
        raise InputError(f"{op}: Given normalized_shape={shape}, expected input with shape [*, {str(shape)[1:]}, "
                         f"but got input of size{list(input.shape)}")
    dtype = data.dtype
    if dtype not in _NORM_DTYPES:
        raise InputTypeError(f"{op}: expected a float32, float16, bfloat16 or float64 input, got {dtype}")
    given = []  # (name, dtype) of the parameters given
    for name, p in params.items():
        if p is None:
            continue
        if not isinstance(p, _Tensor):
            raise InputTypeError(f"{op}: {name} must be a tensor or None, got {type(p).__name__}")
        if p._data.shape != normalized_shape:
            raise InputError(f"{op}: {name} must have shape {list(normalized_shape)} (normalized_shape), "
                             f"got {list(p.shape)}")
        pdtype = p._data.dtype
        if pdtype != dtype and not (wide and pdtype == _backend.float32 and dtype.itemsize == 2):
            rule = "the input's dtype, or float32 with a 16-bit input; " if wide else ""
            raise InputTypeError(f"{op}: {name} dtype {pdtype} differs from input dtype {dtype} "
                                 f"({rule}no implicit casts; convert one with .to(dtype))")
        if not _backend.same_device(data, p._data):
            raise RuntimeError(f"{op}: {name} is on {p.device} but the input is on {input.device}")
        given.append((name, pdtype))
    if len(given) > 1 and any(dt != given[0][1] for _, dt in given):
        raise InputTypeError(f"{op}: {' and '.join(name for name, _ in given)} must share one dtype, got "
                             f"{', '.join(str(dt) for _, dt in given)}")
    return _math.prod(normalized_shape)


def _wide_params(input, *params):
    """Whether the (checked) parameters are float32 over a 16-bit input: the norm then runs on the input in
    float32 and rounds its result once to the input's dtype, as PyTorch computes it (the parameters'
    gradients stay float32)."""
    dtype = input._data.dtype
    for p in params:
        if p is not None and p._data.dtype != dtype:
            return True
    return False


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Layer normalization over the trailing ``normalized_shape`` dimensions, as ``torch.nn.functional.layer_norm``.

    One fused kernel each way on the GPU: fp32 statistics, mean/rstd kept for
    backward; ``weight``/``bias`` (shape ``normalized_shape``) optional.
    """
    input, weight, bias = _autocast_float32(input, weight, bias, devices=_CUDA)
    n = _check_norm_args("layer_norm", input, normalized_shape, {"weight": weight, "bias": bias}, wide=True)
    if _wide_params(input, weight, bias):
        return _cast(layer_norm(_cast(input, _backend.float32), normalized_shape, weight, bias, eps), input.dtype)
    if input._data.size == 0:
        return _empty_norm(input, (weight, bias))
    return _layer_norm(input, weight, bias, n, float(eps), rms=False)


def layer_norm_(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """:func:`layer_norm` written into ``input`` (returned), for inference: its backward would need
    the input it overwrites (or x-hat recovered from the output, impossible where a weight is 0),
    so it raises while grad mode is on and the input, weight or bias requires grad."""
    n = _check_norm_args("layer_norm_", input, normalized_shape, {"weight": weight, "bias": bias})
    if _grad_on():
        for name, t in (("input", input), ("weight", weight), ("bias", bias)):
            if t is not None and t.requires_grad:
                raise RuntimeError(f"layer_norm_: the in-place form is not differentiable (its backward "
                                   f"needs the input it overwrites), but {name} requires grad; use "
                                   f"layer_norm, or call layer_norm_ under minifused.no_grad()")
    if input._data.size == 0:
        return input
    return _layer_norm_(input, weight, bias, n, float(eps), rms=False)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """RMS normalization ``x / sqrt(mean(x^2) + eps) * weight`` as ``torch.nn.functional.rms_norm``;
    ``eps=None`` means the machine epsilon of the dtype it computes in, as in PyTorch: the input's, float32's
    for a float16 / bfloat16 input (whose own epsilon, 2**-10 or 2**-7, would swamp small activations).
    A weight of another dtype is taken, as PyTorch's: the norm runs in float32 (float64 for a float64 input) with
    the weight cast to it and the result comes in the input's dtype (on the cpu with PyTorch's warning that no
    fused kernel serves the pair). A channels-last input gives a channels-last result. Float32 inside a cuda
    autocast region, as PyTorch's."""
    op = "rms_norm"
    input, weight = _autocast_float32(input, weight, devices=_CUDA)
    if isinstance(input, _Tensor) and input.dtype not in _NORM_DTYPES:  # (PyTorch's NotImplementedError)
        raise _backend.DtypeNotImplementedError(f"{op}: expected a float32, float16, bfloat16 or float64 input, got "
                                                f"{input.dtype}")
    if isinstance(input, _Tensor) and isinstance(weight, _Tensor) and weight.dtype != input.dtype \
            and input.dtype in _NORM_DTYPES and (_backend.is_floating(weight.dtype) or weight.dtype.kind in "iu"):
        if input.device.type == "cpu":
            _warnings.warn(f"{op}: mismatch dtype between input and weight: input dtype = {input.dtype}, weight "
                           f"dtype = {weight.dtype}; computed unfused, the result in the input's dtype",
                           UserWarning, stacklevel=2)
        wide = _backend.float64 if input.dtype == _backend.float64 else _backend.float32
        return _cast(rms_norm(_cast(input, wide), normalized_shape, _cast(weight, wide), eps), input.dtype)
    n = _check_norm_args(op, input, normalized_shape, {"weight": weight}, wide=True)
    if eps is None:
        eps = float(_np.finfo(_np.float64 if input.dtype == _np.float64 else _np.float32).eps)
    if input._data.size == 0:
        return _empty_norm(input, (weight,))
    y = _layer_norm(input, weight, None, n, float(eps), rms=True)
    if input.ndim in (4, 5) and not input._data.flags.c_contiguous:  # (PyTorch's result keeps a channels-last layout)
        from ..ops.shape import channels_last, channels_last_3d
        fmt = channels_last if input.ndim == 4 else channels_last_3d
        if input.is_contiguous(memory_format=fmt):
            y = y.contiguous(memory_format=fmt)
    return y


# ---- softmax and losses

_REDUCTIONS = ("none", "mean", "sum")


def _softmax_dim(op, input, dim, dtype):
    if not isinstance(input, _Tensor):
        raise InputTypeError(f"{op}: expected a tensor input, got {type(input).__name__}")
    if dtype is not None:
        input = _cast(input, dtype)
    elif op != "softmax_":  # a cuda autocast region computes softmax in float32 unless a dtype is asked for
        (input,) = _autocast_float32(input, devices=_CUDA)
    if input._data.dtype not in _NORM_DTYPES:  # (PyTorch's NotImplementedError)
        raise _backend.DtypeNotImplementedError(f"{op}: expected a float32, float16, bfloat16 or float64 input, got "
                                                f"{input.dtype}")
    if dim is None:  # PyTorch's legacy implicit choice, warned as there
        dim = 0 if input.ndim in (0, 1, 3) else 1
        name = op.rstrip("_")
        _warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include "
                       f"dim=X as an argument.", UserWarning, stacklevel=4)
    if isinstance(dim, bool) or not isinstance(dim, _numbers.Integral):
        raise InputTypeError(f"{op}(): argument 'dim' must be int, not {type(dim).__name__}")
    nd = max(input.ndim, 1)
    if not -nd <= dim < nd:
        raise IndexError(f"{op}: dim {dim} out of range for a tensor of {input.ndim} dimensions")
    return input, dim % nd


def _softmax_any(op, input, dim, dtype, log):
    input, dim = _softmax_dim(op, input, dim, dtype)
    if input._data.size == 0:  # nothing to normalize (the row kernels need rows of >= 1 element)
        return input * 0
    if input.ndim == 0:
        return _reshape(_softmax_ops.softmax_last(_reshape(input, (1,)), log), ())
    last = input.ndim - 1
    if dim == last:
        return _softmax_ops.softmax_last(input, log)
    # C-contiguous, as PyTorch's (``F.softmax(x, 1).view(n, -1)`` works), whatever x's layout
    return _contiguous(_transpose(_softmax_ops.softmax_last(_transpose(input, dim, last), log), dim, last))


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """Softmax along ``dim`` (fused row kernel along the last dimension; other dims are
    transposed there and back). A row of all -inf gives NaN, as in PyTorch."""
    return _softmax_any("softmax", input, dim, dtype, log=False)


def softmax_(input, dim=None):
    """Softmax along ``dim`` written into ``input`` (floating dtypes; returned). Recorded, its
    backward uses the output, which is the input's array now (no copy is kept)."""
    _check_tensor("softmax_", input)
    input, dim = _softmax_dim("softmax_", input, dim, None)
    if input._data.size == 0:
        return input
    return _softmax_ops.softmax_(input, dim)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """Log-softmax along ``dim``; a row of all -inf gives NaN, as in PyTorch."""
    return _softmax_any("log_softmax", input, dim, dtype, log=True)


def _check_class_loss(op, input, target, reduction):
    """The checks every class loss makes first (tensors, reduction, input dtype)."""
    if not isinstance(input, _Tensor) or not isinstance(target, _Tensor):
        raise InputTypeError(f"{op}: expected tensors for input and target, got {type(input).__name__} and "
                             f"{type(target).__name__}")
    if reduction not in _REDUCTIONS:
        raise InputError(f"{op}: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
    if input._data.dtype not in _NORM_DTYPES:  # (PyTorch's NotImplementedError)
        raise _backend.DtypeNotImplementedError(f"{op}: expected a float32, float16, bfloat16 or float64 input, got "
                                                f"{input.dtype}")


def _class_rows(op, input, target, weight, ignore_index, reduction):
    """Validate, then (input as (M, C), target as (M,), output shape for 'none')."""
    _check_class_loss(op, input, target, reduction)
    if target._data.dtype.kind not in "iu":
        if _backend.is_floating(target.dtype) and tuple(target.shape) == tuple(input.shape):
            raise NotImplementedError(f"{op}: class-probability targets are not supported; pass class "
                                      f"indices (int64)")
        if _backend.is_floating(target.dtype) and target.ndim == input.ndim and op == "cross_entropy":
            raise InputError(f"{op}: a floating-point target is class probabilities and must have the input's shape "
                             f"{list(input.shape)}, got {list(target.shape)} (or pass class indices, int64)")
        raise InputTypeError(f"{op}: expected integer class indices as target (int64), got dtype {target.dtype}")
    if target.device != input.device:
        raise RuntimeError(f"{op}: target is on {target.device} but the input is on {input.device}")
    if input.ndim == 0:
        raise InputError(f"{op}: input must have a class dimension, got a 0-d tensor")
    if input.ndim == 1:
        expected = ()
    else:
        expected = (input.shape[0],) + tuple(input.shape[2:])
    if tuple(target.shape) != expected:
        raise InputError(f"{op}: target must have shape {list(expected)} for input of shape {list(input.shape)} "
                         f"(input (N, C, d1, ...) takes target (N, d1, ...)), got {list(target.shape)}")
    c = input.shape[0] if input.ndim == 1 else input.shape[1]
    if weight is not None:
        _check_class_weight(op, input, weight, c)
        if weight.dtype != input.dtype:  # (PyTorch's kernels refuse another float width too)
            raise InputTypeError(f"{op}: expected weight of the input's dtype {input.dtype}, got {weight.dtype}")
    if target.device.type == "cpu" and target.numel():
        from ..kernels.softmax import _check_labels_host
        _check_labels_host(target._data.reshape(-1), c, ignore_index, op)
    if target.dtype not in (_backend.int32, _backend.int64):
        target = _cast(target, _backend.int64)
    if input.ndim == 1:
        rows, trows = _reshape(input, (1, c)), _reshape(target, (1,))
    elif input.ndim == 2:
        rows, trows = input, target
    else:
        moved = _permute(input, (0, *range(2, input.ndim), 1))  # (N, d..., C)
        m = target.numel()  # (not -1: the rows of an input without classes are not inferable)
        rows, trows = _reshape(moved, (m, c)), _reshape(target, (m,))
    return rows, trows, weight, expected


def _ignore_index(op, value):
    """``ignore_index`` as PyTorch's parser reads it: an int (a NumPy one, or a 0-d integer tensor without grad,
    too); a float, a bool or a string is its TypeError."""
    if type(value) is int:  # the common case, without the checks below
        return value
    value = _number_arg(op, "ignore_index", value)
    if not isinstance(value, _numbers.Integral) or isinstance(value, (bool, _np.bool_)):
        raise InputTypeError(f"{op}(): argument 'ignore_index' must be int, not {type(value).__name__}")
    return int(value)


def _check_class_weight(op, input, weight, c):
    """A class-weighted loss's ``weight``: a floating-point tensor of one value per class, on the input's device."""
    if not isinstance(weight, _Tensor):
        raise InputTypeError(f"{op}: weight must be a tensor or None, got {type(weight).__name__}")
    if tuple(weight.shape) != (c,):
        raise InputError(f"{op}: weight must have shape [{c}] (one per class), got {list(weight.shape)}")
    if weight.device != input.device:
        raise RuntimeError(f"{op}: weight is on {weight.device} but the input is on {input.device}")
    if not _backend.is_floating(weight.dtype):
        raise InputTypeError(f"{op}: weight must be a floating-point tensor, got dtype {weight.dtype}")


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """Cross-entropy from logits and class indices, as ``torch.nn.functional.cross_entropy``.

    Fused: forward reads the logits once (loss and logsumexp per row), backward
    once more (writes the gradient); the softmax is never stored. 'mean' divides
    by the summed weights of the non-ignored targets (computed on the device).
    Labels outside [0, C) raise here for cpu targets; for cuda targets a device
    flag is set (see ``minifused.kernels.softmax.check_label_errors``).
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    ignore_index = _ignore_index("cross_entropy", ignore_index)
    label_smoothing = _number_arg("cross_entropy", "label_smoothing", label_smoothing)
    if not isinstance(label_smoothing, _numbers.Real):
        raise InputTypeError(f"cross_entropy: label_smoothing must be a float, got {label_smoothing!r}")
    if not float(label_smoothing) <= 1.0:  # (NaN too)
        raise InputError(f"cross_entropy: label_smoothing must be a number <= 1.0 (between 0.0 and 1.0), got "
                         f"{label_smoothing}")
    label_smoothing = max(float(label_smoothing), 0.0)  # a negative amount smooths nothing, as in PyTorch
    input, target, weight = _autocast_float32(input, target, weight)
    if (isinstance(input, _Tensor) and isinstance(target, _Tensor) and _backend.is_floating(target.dtype)
            and tuple(target.shape) == tuple(input.shape)):
        if ignore_index >= 0:  # (PyTorch's rule: there is no class index to ignore; a negative one ignores none)
            raise InputError(f"cross_entropy: ignore_index is not supported for class-probability (floating-point) "
                             f"targets, got ignore_index={ignore_index!r}")
        return _cross_entropy_probabilities(input, target, weight, reduction, float(label_smoothing))
    _not_differentiable("cross_entropy", "weight", weight)  # (with class indices; probabilities differentiate it)
    rows, trows, weight, shape = _class_rows("cross_entropy", input, target, weight, ignore_index, reduction)
    out = _loss_ops.cross_entropy_rows(rows, trows, weight, int(ignore_index), float(label_smoothing), reduction)
    return _reshape(out, shape) if reduction == "none" else out


def _cross_entropy_probabilities(input, target, weight, reduction, label_smoothing):
    """cross_entropy with class-probability targets (mixup / cutmix labels), PyTorch's: per sample
    -sum_c weight_c * t_c * log_softmax(input)_c, t smoothed to t * (1 - s) + s / C; 'mean' divides by the
    samples (N times the spatial positions), whatever the weights. Composed of log_softmax (its fused
    kernel), a product and a sum, so the target gets a gradient too."""
    from .activation import _reduce

    op = "cross_entropy"
    _check_class_loss(op, input, target, reduction)
    if target.device != input.device:
        raise RuntimeError(f"{op}: target is on {target.device} but the input is on {input.device}")
    if input.ndim == 0:
        raise InputError(f"{op}: input must have a class dimension, got a 0-d tensor")
    dim = 0 if input.ndim == 1 else 1
    c = input.shape[dim]
    # (the input, target and weight dtypes promote in the products below, as in PyTorch's composition)
    if label_smoothing:
        target = target * (1.0 - label_smoothing) + label_smoothing / max(c, 1)  # (c = 0: no elements)
    terms = log_softmax(input, dim) * target
    if weight is not None:
        _check_class_weight(op, input, weight, c)
        terms = terms * _reshape(weight, (c,) + (1,) * (input.ndim - dim - 1))
    return _reduce(-terms.sum(dim), reduction)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """Negative log-likelihood of log-probabilities and class indices, as ``torch.nn.functional.nll_loss``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    ignore_index = _ignore_index("nll_loss", ignore_index)
    _not_differentiable("nll_loss", "weight", weight)
    input, weight = _autocast_float32(input, weight)
    rows, trows, weight, shape = _class_rows("nll_loss", input, target, weight, ignore_index, reduction)
    out = _loss_ops.nll_rows(rows, trows, weight, int(ignore_index), reduction)
    return _reshape(out, shape) if reduction == "none" else out


# ---- dropout


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero elements with probability ``p`` and scale the rest by ``1/(1-p)`` (training only).

    One fused kernel on the GPU draws the mask (a counter-based hash seeded from the
    CPU generator) and applies it; the mask (1 bit per element) stays on the tape for the
    backward. ``inplace=True`` writes the result into ``input`` and returns it (training only;
    otherwise ``input`` itself is returned untouched, as out of place).
    """
    if not isinstance(input, _Tensor):
        raise InputTypeError(f"dropout: expected a tensor, got {type(input).__name__}")
    p = _number_arg("dropout", "p", p)
    if not isinstance(p, _numbers.Real):
        raise InputTypeError(f"dropout: dropout probability must be a number, got {type(p).__name__}")
    if not 0.0 <= p <= 1.0:
        raise InputError(f"dropout: probability has to be between 0 and 1, but got {p}")
    if not _backend.is_floating(input.dtype):
        if not training or p == 0:  # nothing dropped: the input itself, any dtype (PyTorch's)
            return input
        if p == 1:  # nothing kept: integer zeros, as PyTorch's input * 0
            return input.mul_(0) if inplace else input * 0
        raise InputTypeError(f"dropout: expected a floating-point input, got dtype {input.dtype}")
    return _dropout(input, float(p), bool(training), bool(inplace))


# ---- regression losses
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean squared error ``(input - target)**2`` reduced by ``'mean'``, ``'sum'`` or ``'none'``. A target
    of another shape broadcasts with PyTorch's warning; shapes that cannot broadcast raise. ``weight`` (of the
    input's size) multiplies the pointwise loss, and the mean is then over the weights' sum."""
    from .activation import _loss_operands, _weighted

    reduction = _legacy_reduction(size_average, reduce, reduction)
    input, target = _loss_operands("mse_loss", input, target, reduction, int_input=True)
    if weight is None and reduction != "none" and input.shape == target.shape and input._data.size:
        return _A.MseLoss.apply(input, target, reduction == "mean")
    d = input - target
    return _weighted("mse_loss", d * d, weight, reduction)


# ---- families in their own modules
from .activation import *  # noqa: E402,F401,F403 - activations, normalize, one_hot, the losses beyond these
from .layers import *  # noqa: E402,F401,F403 - pad, adaptive pooling, embedding, dropout2d
from .batchnorm import *  # noqa: E402,F401,F403 - batch_norm, group_norm
from .conv import *  # noqa: E402,F401,F403 - conv2d, conv_transpose2d, max_pool2d, avg_pool2d
from .conv import CONV_ACTIVATIONS  # noqa: E402,F401 - what nn.Conv2d may fuse
from .margin_losses import *  # noqa: E402,F401,F403 - margin_ranking_loss, triplet_margin_loss, ...
from .sampling import *  # noqa: E402,F401,F403 - affine_grid, grid_sample
from .pooling import *  # noqa: E402,F401,F403 - lp_pool1d/2d, max_unpool1d, the *_with_indices poolings, upsample
from .extra_layers import *  # noqa: E402,F401,F403 - bilinear, embedding_bag
from .fractional_pool import *  # noqa: E402,F401,F403 - fractional_max_pool2d/3d(_with_indices)
from .ctc import *  # noqa: E402,F401,F403 - ctc_loss
from .linear_loss import *  # noqa: E402,F401,F403 - linear_cross_entropy
from .volume import *  # noqa: E402,F401,F403 - conv3d, conv_transpose3d, the 3-D poolings
from .resize import *  # noqa: E402,F401,F403 - interpolate
from .attention import *  # noqa: E402,F401,F403 - scaled_dot_product_attention, multi_head_attention_forward
from .attention import _canonical_mask, _none_or_dtype  # noqa: E402,F401 - PyTorch's F._canonical_mask
from ..ops import pdist  # noqa: E402,F401 - torch.nn.functional.pdist is torch.pdist
