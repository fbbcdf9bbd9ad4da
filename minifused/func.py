"""``torch.func``: the stateless call :func:`functional_call`, and the reverse-mode transforms built on the tape:
:func:`grad`, :func:`grad_and_value`, :func:`vjp`, :func:`jacrev`, and :func:`vmap` as a loop over the mapped
dimension (the same values and gradients as PyTorch's batched rules, one call per sample: per-sample gradients are
``vmap(grad(loss))``). The transforms nest (``grad(grad(f))``, :func:`hessian` as ``jacrev(jacrev(f))``): an
argument that requires grad in grad mode stays in the outer graph and the gradients are taken with
``create_graph``, as PyTorch's transforms compose with autograd. There is no forward mode: :func:`jvp` takes
reverse mode twice (the double-backward trick) and :func:`jacfwd` is :func:`jacrev` (the same values)."""
from __future__ import annotations

from . import autograd as _autograd
from .nn.norm import _BatchNorm
from .nn.stateless import call_with as _functional_call
from .ops import stack as _stack
from .tensor import Tensor as _Tensor

__all__ = ["functional_call", "grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp", "vjp", "vmap",
           "stack_module_state", "replace_all_batch_norm_modules_"]


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """``torch.func.functional_call``: :func:`minifused.nn.utils.stateless.functional_call`, whose tensors may
    also come as a sequence of dicts (merged; a name in two of them is a ValueError)."""
    if isinstance(parameter_and_buffer_dicts, dict):
        merged = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, (list, tuple)):
        merged, seen = {}, set()
        repeated = []
        for d in parameter_and_buffer_dicts:
            if not isinstance(d, dict):
                raise TypeError(f"functional_call: expected a dict or a sequence of dicts, got an element of type "
                                f"{type(d).__name__}")
            repeated += [k for k in d if k in seen]
            seen.update(d)
            merged.update(d)
        if repeated:
            raise ValueError(f"{sorted(set(repeated))} appeared in multiple dictionaries; behavior of functional "
                             f"call is ambiguous")
    else:
        raise TypeError(f"functional_call: expected a dict or a sequence of dicts, got "
                        f"{type(parameter_and_buffer_dicts).__name__}")
    return _functional_call(module, merged, args, kwargs, tie_weights=tie_weights, strict=strict)


# ---------------------------------------------------------------- reverse-mode transforms
def _argnums(op, argnums, args):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums or not all(isinstance(i, int) and -len(args) <= i < len(args) for i in nums):
        raise RuntimeError(f"{op}: argnums must be an int or a tuple of ints indexing the {len(args)} positional "
                           f"arguments, got {argnums!r}")
    for i in nums:
        _checked_leaves(op, i, args[i])
    return nums


def _checked_leaves(op, i, tree):
    """The tensors of argument ``i`` (a tensor, or dicts, lists and tuples of them: a pytree), each to be
    differentiated, so floating-point."""
    leaves = _leaves(tree)
    for t in leaves:
        if not isinstance(t, _Tensor):
            raise ValueError(f"{op}: the argument {i} to differentiate must be a tensor or a pytree (dicts, lists, "
                             f"tuples) of tensors, got a {type(t).__name__}")
        if not t.is_floating_point():
            raise RuntimeError(f"{op}: the argument {i} to differentiate must hold floating-point tensors, got "
                               f"{t.dtype}")
    return leaves


def _traced(op, func, args, kwargs, nums, has_aux):
    """``func`` called with tensors that require grad at ``nums``: (those tensors, flat, the arguments they came in,
    to :func:`_regroup` their gradients by, output, aux). Each is a fresh leaf, cut from any outer graph, unless
    it requires grad in grad mode (an outer transform's, or a graph the caller differentiates): then a view of it,
    so the gradients taken (with ``create_graph``, see :func:`_nested`) differentiate further."""
    args = list(args)
    leaves, trees = [], []
    for i in nums:
        fresh = [a.view_as(a) if a.requires_grad and _autograd.is_grad_enabled() else a.detach().requires_grad_()
                 for a in _checked_leaves(op, i, args[i])]
        args[i] = _rebuild(args[i], fresh)
        trees.append(args[i])
        leaves += fresh
    with _autograd.enable_grad():
        out = func(*args, **kwargs)
    aux = None
    if has_aux:
        if not (isinstance(out, tuple) and len(out) == 2):
            raise RuntimeError(f"{op}(f)(*args): with has_aux=True, f must return a (output, aux) tuple")
        out, aux = out
    return leaves, trees, out, aux


def _regroup(trees, flat):
    """The tensors ``flat`` (one per leaf of ``trees``, in order) in the structures of ``trees``: a tuple."""
    out, start = [], 0
    for tree in trees:
        n = len(_leaves(tree))
        out.append(_rebuild(tree, flat[start:start + n]))
        start += n
    return tuple(out)


def _nested(leaves):
    """Whether the transform runs inside another one (or on a graph the caller differentiates): one of its
    tensors is a view of an argument that requires grad, no fresh leaf."""
    return _autograd.is_grad_enabled() and any(leaf._ctx is not None for leaf in leaves)


def _grads(outputs, leaves, cotangents, retain_graph=False):
    """The gradients of ``outputs`` (weighted by ``cotangents``) for each leaf: zeros for one they do not reach;
    nested (see :func:`_traced`), with graphs of their own."""
    reached = [o for o in outputs if o.requires_grad]
    nested = _nested(leaves)
    got = (_autograd.grad([o for o in reached], leaves, [c for o, c in zip(outputs, cotangents) if o.requires_grad],
                          retain_graph=retain_graph or nested, create_graph=nested, allow_unused=True)
           if reached else [None] * len(leaves))
    return tuple(leaf.detach() * 0 if g is None else g for leaf, g in zip(leaves, got))


def grad_and_value(func, argnums=0, has_aux=False):
    """``torch.func.grad_and_value``: a function returning (the gradient of ``func``'s scalar output for the
    arguments at ``argnums``, that output) -- ``(grad, (output, aux))`` with ``has_aux``."""
    def wrapper(*args, **kwargs):
        nums = _argnums("grad_and_value", argnums, args)
        leaves, trees, out, aux = _traced("grad_and_value", func, args, kwargs, nums, has_aux)
        if not isinstance(out, _Tensor) or out.numel() != 1:
            raise RuntimeError(f"grad_and_value(f)(*args): expected f(*args) to return a scalar tensor, got "
                               f"{tuple(out.shape) if isinstance(out, _Tensor) else type(out).__name__}")
        grads = _regroup(trees, _grads([out], leaves, [None]))
        g = grads[0] if isinstance(argnums, int) else grads
        value = out if _nested(leaves) else out.detach()
        return (g, (value, aux)) if has_aux else (g, value)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """``torch.func.grad``: a function returning the gradient of ``func``'s scalar output for the arguments at
    ``argnums`` (a tuple of them for a tuple ``argnums``; ``(grad, aux)`` with ``has_aux``)."""
    both = grad_and_value(func, argnums, has_aux)

    def wrapper(*args, **kwargs):
        g, value = both(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


def vjp(func, *primals, has_aux=False):
    """``torch.func.vjp``: ``(func(*primals), vjp_fn)`` (with ``aux`` last for ``has_aux``); ``vjp_fn(cotangents)``
    (cotangents in the output's structure) gives the vector-Jacobian product for every primal, a tuple, each in its
    primal's structure (callable more than once)."""
    leaves, trees, out, aux = _traced("vjp", func, primals, {}, tuple(range(len(primals))), has_aux)
    outs = _leaves(out)

    def vjp_fn(*cotangents):
        cts = _leaves(cotangents[0] if len(cotangents) == 1 else cotangents)
        if len(cts) != len(outs):
            raise RuntimeError(f"vjp_fn: expected {len(outs)} cotangents, one per output, got {len(cts)}")
        return _regroup(trees, _grads(outs, leaves, cts, retain_graph=True))

    value = _rebuild(out, [o.detach() for o in outs])
    return (value, vjp_fn, aux) if has_aux else (value, vjp_fn)


def jacrev(func, argnums=0, has_aux=False):
    """``torch.func.jacrev``: a function returning the Jacobian of ``func``'s output for the arguments at
    ``argnums``: for each output tensor (the output's structure kept), shape ``out.shape + arg.shape`` per argument
    tensor (the argument's structure kept; a tuple over a tuple ``argnums``), one backward per output element."""
    def wrapper(*args, **kwargs):
        nums = _argnums("jacrev", argnums, args)
        leaves, trees, out, aux = _traced("jacrev", func, args, kwargs, nums, has_aux)
        outs = _leaves(out)
        if not all(isinstance(o, _Tensor) for o in outs):
            raise RuntimeError(f"jacrev(f)(*args): expected f(*args) to return a tensor or a pytree of tensors, got "
                               f"{type(out).__name__}")
        jacs = []
        for o in outs:
            flat = o.reshape(-1)
            rows = [_grads([flat[k]], leaves, [None], retain_graph=True) for k in range(flat.shape[0])]
            jac = _regroup(trees, [(_stack([r[j] for r in rows]) if rows else leaf.detach().new_zeros((0, *leaf.shape)))
                                   .reshape(*o.shape, *leaf.shape) for j, leaf in enumerate(leaves)])
            jacs.append(jac[0] if isinstance(argnums, int) else jac)
        jac = _rebuild(out, jacs)
        return (jac, aux) if has_aux else jac
    return wrapper


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """``torch.func.jvp``: ``(func(*primals), J·tangents)`` (with ``aux`` last for ``has_aux``), the product in the
    output's structure (each tangent in its primal's). Reverse mode twice: with u zeros that require grad, uᵀJ is
    differentiated with respect to u, weighted by the tangents."""
    for name, value in (("primals", primals), ("tangents", tangents)):
        if not isinstance(value, tuple):
            raise RuntimeError(f"jvp(f, primals, tangents): Expected {name} to be a tuple. E.g. it should be valid to "
                               f"call f(*primals).")
    nums = _argnums("jvp", tuple(range(len(primals))), primals)
    flat_primals, flat_tangents = _leaves(primals), _leaves(tangents)
    if len(primals) != len(tangents) or len(flat_primals) != len(flat_tangents):
        raise RuntimeError(f"jvp(f, primals, tangents): Expected primals and tangents to have the same python "
                           f"structure: got {len(flat_primals)} primal and {len(flat_tangents)} tangent tensors")
    for p, t in zip(flat_primals, flat_tangents):
        if not isinstance(t, _Tensor) or tuple(t.shape) != tuple(p.shape):
            raise RuntimeError(f"jvp(f, primals, tangents): each tangent must be a tensor of its primal's size "
                               f"{list(p.shape)}, got {list(t.shape) if isinstance(t, _Tensor) else type(t).__name__}")
    leaves, _, out, aux = _traced("jvp", func, primals, {}, nums, has_aux)
    outs = _leaves(out)
    nested = _nested(leaves)
    live = [o for o in outs if o.requires_grad]
    us = [o.detach().new_zeros(o.shape).requires_grad_() for o in live]
    products = {}
    if live:
        grads = _autograd.grad(live, leaves, us, create_graph=True, allow_unused=True)
        pairs = [(g, t) for g, t in zip(grads, flat_tangents) if g is not None]
        if pairs:
            found = _autograd.grad([g for g, _ in pairs], us, [t for _, t in pairs], create_graph=nested,
                                   allow_unused=True)
            products = {id(o): f for o, f in zip(live, found) if f is not None}
    jv = _rebuild(out, [products.get(id(o), o.detach() * 0) for o in outs])
    value = out if nested else _rebuild(out, [o.detach() for o in outs])
    return (value, jv, aux) if has_aux else (value, jv)


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """``torch.func.jacfwd``: the Jacobian, as :func:`jacrev` takes it (no forward mode here; the same values)."""
    return jacrev(func, argnums, has_aux)


def hessian(func, argnums=0):
    """``torch.func.hessian``: the Jacobian of the Jacobian, ``jacrev(jacrev(func))`` (PyTorch's takes the outer
    one in forward mode; the values are the same)."""
    return jacrev(jacrev(func, argnums), argnums)


def _tree_map(fn, tree):
    """``fn`` applied to every leaf of ``tree`` (dicts, lists, tuples and namedtuples of leaves, nested: PyTorch's
    pytrees), the structure kept."""
    if isinstance(tree, dict):
        return type(tree)((k, _tree_map(fn, v)) for k, v in tree.items())
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return type(tree)(*(_tree_map(fn, v) for v in tree))
    if isinstance(tree, (list, tuple)):
        return type(tree)(_tree_map(fn, v) for v in tree)
    return fn(tree)


def _leaves(tree):
    """The leaves of ``tree`` (see :func:`_tree_map`), in order."""
    out = []
    _tree_map(out.append, tree)
    return out


def _rebuild(tree, leaves):
    """``tree`` with its leaves replaced, in order, by ``leaves``."""
    it = iter(leaves)
    return _tree_map(lambda _: next(it), tree)


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """``torch.func.vmap``: ``func`` mapped over dimension ``in_dims`` of its arguments (an int for all, or one per
    argument, None for an argument passed whole; an argument may be a dict, list or tuple of tensors, every one
    mapped: the stacked parameters of :func:`stack_module_state`), the results stacked along ``out_dims``. Here a
    loop: one call per index of the mapped dimension (random ops draw differently per sample, as
    ``randomness='different'``)."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"vmap: randomness must be 'error', 'different' or 'same', got {randomness!r}")

    def wrapper(*args, **kwargs):
        dims = in_dims if isinstance(in_dims, (tuple, list)) else (in_dims,) * len(args)
        if len(dims) != len(args):
            raise ValueError(f"vmap: in_dims has {len(dims)} entries for {len(args)} positional arguments")
        sizes = set()

        def size_of(d):
            def leaf(t):
                if not isinstance(t, _Tensor):
                    raise ValueError(f"vmap: an in_dim other than None must map tensors, got a "
                                     f"{type(t).__name__}")
                sizes.add(t.shape[d])
            return leaf

        for a, d in zip(args, dims):
            if d is not None:
                _tree_map(size_of(d), a)
        if len(sizes) != 1:
            raise ValueError(f"vmap: expected one size along the mapped dimensions, got {sorted(sizes) or 'none'}")
        (n,) = sizes
        results = [func(*[a if d is None else _tree_map(lambda t, d=d: t.select(d, i), a)
                          for a, d in zip(args, dims)], **kwargs)
                   for i in range(n)]
        single = not isinstance(results[0], tuple) if results else True
        columns = [[r] for r in results] if single else [list(r) for r in results]
        width = len(columns[0]) if columns else 1
        outs = out_dims if isinstance(out_dims, (tuple, list)) else (out_dims,) * width
        stacked = tuple(_stack([c[j] for c in columns], outs[j]) for j in range(width))
        return stacked[0] if single else stacked
    return wrapper


def stack_module_state(models):
    """``torch.func.stack_module_state``: the parameters and the buffers of ``models`` (modules of one class, in one
    mode) stacked along a new first dimension, as two dicts by name, for :func:`vmap` over :func:`functional_call`
    (model ensembling). Stacked parameters are new leaves that require grad (an optimizer may take them), where the
    models' do; a name's tensors must agree in that."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if len({m.training for m in models}) != 1:
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    if any(type(m) is not type(models[0]) for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")

    def stacked(named):
        tables = [dict(named(m)) for m in models]
        out = {}
        for name in tables[0]:
            tensors = [t[name] for t in tables]
            wants = {t.requires_grad for t in tensors}
            if len(wants) != 1:
                raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
            out[name] = _stack(tensors).detach().requires_grad_() if wants.pop() else _stack(tensors)
        return out

    return stacked(lambda m: m.named_parameters()), stacked(lambda m: m.named_buffers())


def replace_all_batch_norm_modules_(root):
    """``torch.func.replace_all_batch_norm_modules_``: every BatchNorm module of ``root`` (itself included) that
    tracks running statistics stops, in place (its running mean, variance and batch count become None), so that
    it normalizes by the batch's statistics in either mode, as a vmapped model's must; returns ``root``."""
    for module in root.modules():
        if isinstance(module, _BatchNorm) and module.track_running_stats:
            module.running_mean = module.running_var = module.num_batches_tracked = None
            module.track_running_stats = False
    return root
