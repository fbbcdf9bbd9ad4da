"""PyTorch's top-level spellings of Tensor methods: the in-place pointwise forms (``torch.exp_(x)``,
``torch.clamp_(x, 0, 1)`` ...: ``x.exp_()``, written into ``x`` and returned), the queries
(``torch.is_nonzero``, ``torch.get_device`` ...), ``detach`` / ``fill``, and the ``*_copy`` forms of the view
ops (``torch.permute_copy`` ...): the view's values in a new contiguous tensor, recorded for autograd as the
view is."""
from __future__ import annotations

import numbers

from .. import backend, ops
from ..ops.shape import contiguous_format
from ..tensor import Tensor
from ..backend import InputError, InputTypeError

_UNARY_FORMS = ("abs_", "acos_", "asin_", "atan_", "ceil_", "floor_", "trunc_", "frac_", "cos_", "cosh_", "sin_",
                "sinh_", "tan_", "tanh_", "sigmoid_", "exp_", "exp2_", "expm1_", "log_", "log10_", "log1p_", "log2_",
                "neg_", "negative_", "reciprocal_", "rsqrt_", "sqrt_", "square_", "sinc_", "erf_", "erfc_",
                "deg2rad_", "rad2deg_", "zero_", "detach", "detach_", "acosh_", "asinh_", "atanh_", "arccos_",
                "arcsin_", "arctan_", "arccosh_", "arcsinh_", "arctanh_", "i0_")
_QUERIES = ("is_nonzero", "is_signed", "get_device", "is_inference")
_COPIES = ("view_copy", "permute_copy", "expand_copy", "t_copy", "transpose_copy", "unsqueeze_copy", "squeeze_copy",
           "select_copy", "slice_copy", "split_copy", "split_with_sizes_copy", "unbind_copy", "unfold_copy",
           "diagonal_copy", "detach_copy", "alias_copy", "narrow_copy")
__all__ = list(_UNARY_FORMS + _QUERIES + _COPIES) + [
    "clamp_", "clip_", "clamp_min_", "clamp_max_", "round_", "logit_", "xlogy_", "ldexp_", "nan_to_num_", "fill_",
    "fill", "fix", "fix_", "is_same_size", "is_conj", "is_neg", "resolve_conj", "resolve_neg", "as_strided_",
    "resize_as_", "index_put_"]


def _tensor(op, input, name="input"):
    if not isinstance(input, Tensor):
        raise InputTypeError(f"{op}(): argument '{name}' must be a Tensor, not {type(input).__name__}")
    return input


def _method_form(name):
    """``torch.<name>(input)``: the Tensor method of that name."""
    method = getattr(Tensor, name)

    def form(input):
        return method(_tensor(name, input))

    form.__name__ = form.__qualname__ = name
    form.__doc__ = f"``input.{name}()``" + (", in place on ``input`` (returned)." if name.endswith("_") else ".")
    return form


for _name in _UNARY_FORMS + _QUERIES:
    globals()[_name] = _method_form(_name)


def fix(input):
    """``torch.fix``: :func:`minifused.trunc` (rounding toward zero)."""
    return ops.trunc(_tensor("fix", input))


def fix_(input):
    return _tensor("fix_", input).trunc_()


# ---------------------------------------------------------------- in-place forms with arguments
def clamp_(input, min=None, max=None):  # noqa: A002 - PyTorch's names
    return _tensor("clamp_", input).clamp_(min, max)


def clip_(input, min=None, max=None):  # noqa: A002
    return _tensor("clip_", input).clamp_(min, max)


def clamp_min_(input, min):  # noqa: A002
    return _tensor("clamp_min_", input).clamp_min_(min)


def clamp_max_(input, max):  # noqa: A002
    return _tensor("clamp_max_", input).clamp_max_(max)


def round_(input, *, decimals=0):
    return _tensor("round_", input).round_(decimals=decimals)


def as_strided_(input, size, stride, storage_offset=None):
    return _tensor("as_strided_", input).as_strided_(size, stride, storage_offset)


def resize_as_(input, the_template, *, memory_format=None):
    return _tensor("resize_as_", input).resize_as_(the_template, memory_format=memory_format)


def index_put_(input, indices, values, accumulate=False):
    return _tensor("index_put_", input).index_put_(indices, values, accumulate)


def logit_(input, eps=None):
    return _tensor("logit_", input).logit_(eps)


def xlogy_(input, other):
    return _tensor("xlogy_", input).xlogy_(other)


def ldexp_(input, other):
    return _tensor("ldexp_", input).ldexp_(other)


def nan_to_num_(input, nan=0.0, posinf=None, neginf=None):
    return _tensor("nan_to_num_", input).nan_to_num_(nan, posinf, neginf)


def fill_(input, value):
    return _tensor("fill_", input).fill_(value)


def fill(input, value):
    """A new tensor of ``input``'s shape, dtype and device filled with ``value`` (a number or a 0-d tensor, which
    gets the sum of the gradient, as PyTorch's)."""
    _tensor("fill", input)
    value = _fill_value("fill", value)
    if isinstance(value, Tensor):
        return ops.clone(ops.expand(ops.cast(value.to(input.device), input.dtype), *input.shape),
                         memory_format=contiguous_format)
    return ops.full_like(input, value, memory_format=contiguous_format)


def _fill_value(op, value):
    if isinstance(value, Tensor) and value.ndim:
        raise InputError(f"{op} only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions.")
    if not isinstance(value, (Tensor, numbers.Number)):
        raise InputTypeError(f"{op}(): argument 'value' must be a number or a 0-d tensor, not {type(value).__name__}")
    return value


# ---------------------------------------------------------------- queries
def is_same_size(input, other):
    return _tensor("is_same_size", input).is_same_size(_tensor("is_same_size", other, "other"))


def is_conj(input):
    """False: minifused tensors are real, so no conjugation is ever pending."""
    _tensor("is_conj", input)
    return False


def is_neg(input):
    """False: no negation is ever pending (minifused has no lazy negative views)."""
    _tensor("is_neg", input)
    return False


def resolve_conj(input):
    return _tensor("resolve_conj", input)


def resolve_neg(input):
    return _tensor("resolve_neg", input)


# ---------------------------------------------------------------- the *_copy forms of the view ops
def _copy(view):
    return ops.clone(view, memory_format=contiguous_format)


def view_copy(input, size):
    """The values of ``input.view(size)`` in a new tensor; ``size`` a dtype: ``input``'s bits read as that dtype
    (its last dimension rescaled by the item sizes' ratio), not recorded for autograd, as PyTorch's."""
    _tensor("view_copy", input)
    if isinstance(size, (tuple, list)):
        return _copy(ops.view(input, *size))
    try:
        dtype = backend.as_dtype(size)
    except TypeError:
        raise InputTypeError(f"view_copy(): argument 'size' must be a tuple of ints or a dtype, got {size!r}") \
            from None
    data = backend.array_module(input._data).ascontiguousarray(input._data)
    try:
        return Tensor._from_array(data.view(dtype).copy())
    except ValueError as e:
        raise InputError(f"view_copy: cannot view a tensor of shape {tuple(input.shape)} and dtype {input.dtype} "
                         f"as {dtype}: {e}") from None


def permute_copy(input, dims):
    return _copy(ops.permute(_tensor("permute_copy", input), *dims))


def expand_copy(input, size, *, implicit=False):
    return _copy(ops.expand(_tensor("expand_copy", input), *size))


def t_copy(input):
    return _copy(ops.t(_tensor("t_copy", input)))


def transpose_copy(input, dim0, dim1):
    return _copy(ops.transpose(_tensor("transpose_copy", input), dim0, dim1))


def unsqueeze_copy(input, dim):
    return _copy(ops.unsqueeze(_tensor("unsqueeze_copy", input), dim))


def squeeze_copy(input, dim=None):
    return _copy(ops.squeeze(_tensor("squeeze_copy", input), dim))


def select_copy(input, dim, index):
    return _copy(ops.select(_tensor("select_copy", input), dim, index))


def slice_copy(input, dim=0, start=None, end=None, step=1):
    """``input[..., start:end:step, ...]`` along ``dim`` in a new tensor; ``step`` positive, as PyTorch's."""
    _tensor("slice_copy", input)
    if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step <= 0:
        raise InputError(f"slice_copy: slice step must be positive, got {step!r}")
    if not -input.ndim <= dim < input.ndim:
        raise IndexError(f"slice_copy: dimension {dim} out of range for a tensor of {input.ndim} dimensions")
    index = (slice(None),) * (dim % input.ndim) + (slice(start, end, step),)
    return _copy(ops.getitem(input, index))


def split_copy(input, split_size, dim=0):
    if isinstance(split_size, bool) or not isinstance(split_size, numbers.Integral):
        raise InputTypeError(f"split_copy(): argument 'split_size' must be int, not {type(split_size).__name__} "
                             f"(split_with_sizes_copy takes a list of sizes)")
    return [_copy(part) for part in ops.split(_tensor("split_copy", input), split_size, dim)]


def split_with_sizes_copy(input, split_sizes, dim=0):
    if not isinstance(split_sizes, (tuple, list)):
        raise InputTypeError(f"split_with_sizes_copy(): argument 'split_sizes' must be a list of ints, not "
                             f"{type(split_sizes).__name__}")
    return [_copy(part) for part in ops.split(_tensor("split_with_sizes_copy", input), list(split_sizes), dim)]


def unbind_copy(input, dim=0):
    return [_copy(part) for part in ops.unbind(_tensor("unbind_copy", input), dim)]


def unfold_copy(input, dimension, size, step):
    return _copy(_tensor("unfold_copy", input).unfold(dimension, size, step))


def diagonal_copy(input, offset=0, dim1=0, dim2=1):
    return _copy(ops.diagonal(_tensor("diagonal_copy", input), offset, dim1, dim2))


def detach_copy(input):
    return _copy(_tensor("detach_copy", input).detach())


def alias_copy(input):
    """A copy of ``input``, recorded for autograd (the copy of PyTorch's alias view)."""
    return _copy(_tensor("alias_copy", input))


def narrow_copy(input, dim, start, length):
    return ops.narrow_copy(_tensor("narrow_copy", input), dim, start, length)
