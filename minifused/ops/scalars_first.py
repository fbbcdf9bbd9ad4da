"""PyTorch's deprecated Tensor-method overloads that put the scalars before the tensors, as code written for
PyTorch before 1.5 does (``dist.addmm_(1, -2, x, y.t())``, ``p.data.add_(-lr, grad)``,
``exp_avg_sq.addcmul_(1 - beta2, grad, grad)``): PyTorch still runs them with a warning, and so does minifused,
through the keyword form."""
import functools
import numbers
import warnings

from ..tensor import Tensor

# per method: the scalars that may lead (all of them, or the first alone) and the tensors that then follow
SIGNATURES = {
    "addmm": (("beta", "alpha"), ("mat1", "mat2")),
    "addmv": (("beta", "alpha"), ("mat", "vec")),
    "addr": (("beta", "alpha"), ("vec1", "vec2")),
    "baddbmm": (("beta", "alpha"), ("batch1", "batch2")),
    "addbmm": (("beta", "alpha"), ("batch1", "batch2")),
    "add": (("alpha",), ("other",)),
    "sub": (("alpha",), ("other",)),
    "addcmul": (("value",), ("tensor1", "tensor2")),
    "addcdiv": (("value",), ("tensor1", "tensor2")),
}


def _warn(name, scalars, tensors, stacklevel):
    old = ", ".join([f"Number {s}" for s in scalars] + [f"Tensor {t}" for t in tensors])
    new = ", ".join(f"Tensor {t}" for t in tensors) + ", *, " + ", ".join(
        f"Number {s} = 1" for s in SIGNATURES[name.rstrip("_")][0])
    warnings.warn(f"This overload of {name} is deprecated:\n\t{name}({old})\nConsider using one of the following "
                  f"signatures instead:\n\t{name}({new})", UserWarning, stacklevel=stacklevel + 1)


def accepting_scalars_first(name, method):
    """``method`` (the Tensor method ``name``) that also takes its deprecated form: the leading Python numbers
    become its keyword scalars, with PyTorch's warning."""
    scalars, tensors = SIGNATURES[name.rstrip("_")]

    @functools.wraps(method)
    def op(self, *args, **kwargs):
        if len(args) <= len(tensors) or kwargs:  # the modern forms: no more positional arguments than the tensors
            return method(self, *args, **kwargs)
        lead = 0
        while lead < min(len(scalars), len(args)) and isinstance(args[lead], numbers.Number):
            lead += 1
        if (lead and len(args) == lead + len(tensors)
                and all(isinstance(t, Tensor) for t in args[lead:])):
            _warn(name, scalars[:lead], tensors, stacklevel=2)
            return method(self, *args[lead:], **dict(zip(scalars, args[:lead])))
        return method(self, *args, **kwargs)
    return op
