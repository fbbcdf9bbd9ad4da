"""``torch.nn.utils.prune``: a module's tensor (a weight, a bias) pruned by a 0/1 mask.

Pruning ``name`` of a module moves its parameter to ``name + "_orig"`` (what the optimizer trains), keeps the mask
as the buffer ``name + "_mask"``, and sets ``module.<name>`` to their product, recomputed by a forward pre-hook
before every forward, so the pruned entries stay zero in what the module computes and get no gradient. Pruning
the same tensor again prunes among the entries (or channels) the mask still keeps, and the masks combine;
:func:`remove` makes the pruning permanent (the product becomes the parameter again). PyTorch's methods, rules
and errors: an ``amount`` is a count (int) or a fraction (float in [0, 1], rounded as Python rounds);
unstructured methods zero entries, structured ones whole channels along ``dim``; :func:`global_unstructured`
picks the entries over several tensors at once. Masks are computed on the tensor's device, without autograd; a
failed pruning leaves the module as it was.
"""
from __future__ import annotations

import numbers

from .. import ops
from ..autograd import no_grad
from ..backend import InputError, InputTypeError
from ..tensor import Tensor
from .module import forward_pre_hooks, remove_hook

class PruningError(InputError, AssertionError):
    """What PyTorch's pruning asserts (AssertionError): scores or a mask of another shape, a method used before
    it pruned, more than one pruning hook on a tensor; a ValueError and a RuntimeError too."""


__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured", "L1Unstructured",
           "RandomStructured", "LnStructured", "CustomFromMask", "identity", "random_unstructured", "l1_unstructured",
           "random_structured", "ln_structured", "global_unstructured", "custom_from_mask", "remove", "is_pruned"]


# ---------------------------------------------------------------- amounts and dims
def _check_amount(amount):
    if not isinstance(amount, numbers.Real) or isinstance(amount, bool):
        raise InputTypeError(f"Invalid type for amount: {amount!r}. Must be int or float.")
    if (amount < 0) if isinstance(amount, numbers.Integral) else not 0.0 <= float(amount) <= 1.0:
        raise InputError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")


def _count(amount, size):
    """How many of ``size`` entries (or channels) ``amount`` prunes."""
    n = int(amount) if isinstance(amount, numbers.Integral) else round(amount * size)
    if n > size:
        raise InputError(f"amount={amount} should be smaller than the number of parameters to prune={size}")
    return n


def _channel_dim(t, dim):
    """``dim`` of the structured methods, normalized, on a tensor of 2 dimensions or more."""
    if t.ndim <= 1:
        raise InputError(f"Structured pruning can only be applied to multidimensional tensors. Found tensor of "
                         f"shape {tuple(t.shape)} with {t.ndim} dims")
    if not -t.ndim <= dim < t.ndim:
        raise IndexError(f"Invalid index {dim} for tensor of size {tuple(t.shape)}")
    return dim % t.ndim


def _channel_mask(t, dim, channels):
    """A mask of ``t``'s shape: 1 on the ``channels`` (a 0/1 vector) along ``dim``."""
    shape = [1] * t.ndim
    shape[dim] = t.shape[dim]
    return ops.ones_like(t) * channels.reshape(shape).to(t.dtype)


# ---------------------------------------------------------------- the methods
class BasePruningMethod:
    """A pruning rule: :meth:`compute_mask` gives the new mask from a tensor's importance scores and its current
    mask; as a module's forward pre-hook it keeps ``module.<name>`` equal to ``name_orig * name_mask``."""

    PRUNING_TYPE = None  # "unstructured", "structured" or "global": what a later pruning of the tensor acts on
    _tensor_name = None

    def __call__(self, module, inputs):
        setattr(module, self._tensor_name, self.apply_mask(module))

    def compute_mask(self, t, default_mask):
        raise NotImplementedError(f"{type(self).__name__}.compute_mask")

    def apply_mask(self, module):
        """The pruned tensor: the module's ``<name>_orig`` times its ``<name>_mask``."""
        if self._tensor_name is None:
            raise PruningError(f"{type(self).__name__}: module {type(module).__name__} has to be pruned first")
        orig = getattr(module, self._tensor_name + "_orig")
        return orig * getattr(module, self._tensor_name + "_mask").to(orig.dtype)

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prune ``module.<name>`` by this rule (combined with its earlier prunings, if any); returns the method
        (a :class:`PruningContainer` of them all on a tensor pruned before)."""
        hooks = [(key, h) for key, h in forward_pre_hooks(module)
                 if isinstance(h, BasePruningMethod) and h._tensor_name == name]
        if len(hooks) > 1:
            raise PruningError(f"prune: more than one pruning hook on the tensor {name!r} of module "
                               f"{type(module).__name__}; combine them in a PruningContainer")
        method = cls(*args, **kwargs)
        method._tensor_name = name
        if hooks:
            old = hooks[0][1]
            method = PruningContainer(*(old if isinstance(old, PruningContainer) else (old,)), method)
        orig = getattr(module, name)
        if not isinstance(orig, Tensor):
            raise InputTypeError(f"prune: {type(module).__name__}.{name} is not a tensor "
                                 f"(got {type(orig).__name__})")
        scores = orig if importance_scores is None else importance_scores
        if tuple(scores.shape) != tuple(orig.shape):
            raise PruningError(f"prune: importance_scores should have the same shape as parameter {name} of "
                               f"{type(module).__name__}, got {tuple(scores.shape)} vs {tuple(orig.shape)}")
        with no_grad():
            default = (ops.ones_like(orig) if not hooks
                       else getattr(module, name + "_mask").detach().clone())
            mask = method.compute_mask(scores.detach(), default_mask=default)
        if not hooks:  # the parameter moves to <name>_orig
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
        module.register_buffer(name + "_mask", mask)
        setattr(module, name, method.apply_mask(module))
        for key, _ in hooks:
            remove_hook(module, "pre", key)
        module.register_forward_pre_hook(method)
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """``t`` times the mask this rule computes for it."""
        scores = t if importance_scores is None else importance_scores
        if tuple(scores.shape) != tuple(t.shape):
            raise PruningError(f"prune: importance_scores should have the same shape as tensor t, got "
                               f"{tuple(scores.shape)} vs {tuple(t.shape)}")
        with no_grad():
            mask = self.compute_mask(scores.detach(), ops.ones_like(t) if default_mask is None else default_mask)
        return t * mask

    def remove(self, module):
        """Make the pruning of ``module`` permanent: ``<name>`` a parameter again, holding the pruned values."""
        if self._tensor_name is None:
            raise PruningError(f"{type(self).__name__}: module {type(module).__name__} has to be pruned before "
                               f"pruning can be removed")
        name = self._tensor_name
        with no_grad():
            pruned = self.apply_mask(module)
        module.__dict__.pop(name, None)
        orig = module._parameters.pop(name + "_orig")
        del module._buffers[name + "_mask"]
        orig.data = pruned
        setattr(module, name, orig)


class PruningContainer(BasePruningMethod):
    """The prunings of one tensor in the order they were applied; its mask is the last one's, computed on what
    the earlier ones left (entries, channels, or everything, as the last one's ``PRUNING_TYPE`` says)."""

    def __init__(self, *methods):
        self._pruning_methods = ()
        if len(methods) == 1 and not isinstance(methods[0], BasePruningMethod):
            methods = tuple(methods[0])
        for m in methods:
            if self._tensor_name is None:
                self._tensor_name = m._tensor_name
            self.add_pruning_method(m)

    def add_pruning_method(self, method):
        if not isinstance(method, BasePruningMethod):
            raise InputTypeError(f"{type(method).__name__} is not a BasePruningMethod subclass")
        if self._tensor_name != method._tensor_name:
            raise InputError(f"Can only add pruning methods acting on the parameter named {self._tensor_name!r} to "
                             f"PruningContainer; found {method._tensor_name!r}")
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t, default_mask):
        method = self._pruning_methods[-1]
        mask = default_mask.to(t.dtype)
        kind = method.PRUNING_TYPE
        if kind == "unstructured":
            where = mask == 1  # the entries still kept, as a 1-D run
        elif kind == "structured":
            dim = _channel_dim(t, method.dim)
            kept = mask.sum(dim=[d for d in range(t.ndim) if d != dim]) != 0
            where = (slice(None),) * dim + (kept,)
        elif kind == "global":
            where = (slice(None),) * t.ndim
        else:
            raise InputError(f"PruningContainer: unrecognized PRUNING_TYPE {kind!r}")
        mask = mask.clone()
        mask[where] = method.compute_mask(t[where], default_mask=mask[where]).to(mask.dtype)
        return mask


class Identity(BasePruningMethod):
    """Prunes nothing: the mask is all ones."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


class _LeastScores(BasePruningMethod):
    """Prunes the ``amount`` entries of least :meth:`_scores`."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _check_amount(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        k = _count(self.amount, t.numel())
        mask = default_mask.clone()
        if k:
            flat = mask.reshape(-1)
            flat[ops.topk(self._scores(t), k, largest=False).indices] = 0
            mask = flat.reshape(mask.shape)
        return mask


class RandomUnstructured(_LeastScores):
    """Prunes ``amount`` entries chosen at random."""

    def _scores(self, t):
        return ops.rand(t.numel(), device=t.device)

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(_LeastScores):
    """Prunes the ``amount`` entries of least absolute value (of the importance scores, if given)."""

    def _scores(self, t):
        return t.abs().reshape(-1)

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class RandomStructured(BasePruningMethod):
    """Prunes ``amount`` channels along ``dim``, chosen at random."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1):
        _check_amount(amount)
        self.amount, self.dim = amount, dim

    def compute_mask(self, t, default_mask):
        dim = _channel_dim(t, self.dim)
        n = t.shape[dim]
        k = _count(self.amount, n)
        if not k:
            return default_mask
        channels = ops.ones(n, device=t.device)
        channels[ops.randperm(n, device=t.device)[:k]] = 0
        return _channel_mask(t, dim, channels) * default_mask.to(t.dtype)

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(BasePruningMethod):
    """Prunes the ``amount`` channels along ``dim`` of least L``n`` norm (``n`` as ``linalg.vector_norm``'s
    ``ord``, or 'fro'; 'nuc' is the nuclear norm of a channel that is a matrix)."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim=-1):
        _check_amount(amount)
        self.amount, self.n, self.dim = amount, n, dim

    def compute_mask(self, t, default_mask):
        dim = _channel_dim(t, self.dim)
        channels = t.shape[dim]
        k = _count(self.amount, channels)
        if not k:
            return default_mask
        rest = [d for d in range(t.ndim) if d != dim]
        if self.n == "nuc" or (self.n == "fro" and len(rest) == 2):
            norm = ops.linalg.matrix_norm(t, ord=self.n, dim=rest if len(rest) == 2 else (-2, -1))
        else:
            norm = ops.linalg.vector_norm(t, ord=2 if self.n == "fro" else self.n, dim=rest)
        keep = ops.zeros(channels, device=t.device)
        keep[ops.topk(norm, channels - k).indices] = 1
        return _channel_mask(t, dim, keep) * default_mask.to(t.dtype)

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes where the given ``mask`` is 0."""

    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if tuple(default_mask.shape) != tuple(self.mask.shape):
            raise PruningError(f"custom_from_mask: the mask's shape {tuple(self.mask.shape)} must be the tensor's "
                               f"{tuple(default_mask.shape)}")
        return default_mask * self.mask.to(default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


# ---------------------------------------------------------------- the functions
def identity(module, name):
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module, name, mask):
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prune the ``(module, name)`` tensors of ``parameters`` together: ``pruning_method`` (an unstructured
    method's class, with its ``kwargs``) chooses among all their kept entries at once, so some tensors lose more
    than others; each is then pruned by its share of the mask (:func:`custom_from_mask`)."""
    try:
        parameters = list(parameters)
    except TypeError:
        raise InputTypeError("global_unstructured(): parameters is not an Iterable") from None
    scores = {} if importance_scores is None else importance_scores
    if not isinstance(scores, dict):
        raise InputTypeError("global_unstructured(): importance_scores must be of type dict")
    method = pruning_method(**kwargs)
    if method.PRUNING_TYPE != "unstructured":
        raise InputTypeError(f'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found method '
                             f"{pruning_method.__name__} of type {method.PRUNING_TYPE}")
    method._tensor_name = "global"
    with no_grad():
        tensors = [getattr(m, name) for m, name in parameters]
        flat = ops.cat([scores.get((m, name), t).detach().reshape(-1) for (m, name), t in zip(parameters, tensors)])
        kept = ops.cat([getattr(m, name + "_mask", None).reshape(-1) if hasattr(m, name + "_mask")
                        else ops.ones(t.numel(), dtype=t.dtype, device=t.device)
                        for (m, name), t in zip(parameters, tensors)])
        mask = PruningContainer(method).compute_mask(flat, kept)
    at = 0
    for (module, name), t in zip(parameters, tensors):
        custom_from_mask(module, name, mask=mask[at:at + t.numel()].reshape(t.shape))
        at += t.numel()


def remove(module, name):
    """Make the pruning of ``module.<name>`` permanent and drop its reparametrization and hook."""
    for key, hook in forward_pre_hooks(module):
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            remove_hook(module, "pre", key)
            return module
    raise InputError(f"Parameter {name!r} of module {type(module).__name__} has to be pruned before pruning can be "
                     f"removed")


def is_pruned(module):
    """Whether ``module`` or any of its submodules holds a pruned tensor."""
    return any(isinstance(h, BasePruningMethod) for _, m in module.named_modules() for _, h in forward_pre_hooks(m))
