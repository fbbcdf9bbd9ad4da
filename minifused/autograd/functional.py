"""``torch.autograd.functional``: :func:`jacobian` and :func:`vjp` (one backward per output element, or one in
all), :func:`jvp` (the Jacobian's rows; with ``create_graph`` PyTorch's double-backward trick), :func:`hessian`,
:func:`vhp` and :func:`hvp` (gradients of the gradient, taken with ``create_graph``), all through
:func:`minifused.autograd.grad`.

Without ``create_graph`` the inputs are differentiated as fresh leaves and the results carry no graph; with it the
inputs stay in the caller's graph and the results have graphs of their own, as PyTorch's.
"""
from __future__ import annotations

from . import tape as _tape
from .modes import enable_grad
from .walk import grad

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]


def _as_tuple(value, what, fn):
    """``(was_a_tuple, tuple_of_tensors)``, raising TypeError for anything but a tensor or a tuple/list of them."""
    is_tuple = isinstance(value, (tuple, list))
    values = tuple(value) if is_tuple else (value,)
    for i, v in enumerate(values):
        if not isinstance(v, _tape._Tensor):
            raise TypeError(f"{fn}: the {what} must be either a Tensor or a tuple of Tensors, but the value at "
                            f"index {i} has type {type(v).__name__}")
    return is_tuple, values


def _post(values, is_tuple):
    return values if is_tuple else values[0]


def _prepare(fn, func, inputs, create_graph):
    if not callable(func):
        raise TypeError(f"{fn}: func must be callable, got {type(func).__name__}")
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", fn)
    # without create_graph: fresh leaves sharing the inputs' memory, so the caller's graph is neither extended nor
    # given gradients; with it an input that requires grad stays in the caller's graph (a view of it, as PyTorch's)
    inputs = tuple(t.view_as(t) if create_graph and t.requires_grad else t.detach().requires_grad_(True)
                   for t in inputs)
    with enable_grad():
        out = func(*inputs)
    is_outputs_tuple, outputs = _as_tuple(out, "outputs of the user-provided function", fn)
    return is_inputs_tuple, inputs, is_outputs_tuple, outputs


def _outputs(outputs, create_graph):
    return outputs if create_graph else tuple(o.detach() for o in outputs)


def _check_strict(fn, grads, out_index, out_requires_grad, strict):
    if not strict:
        return
    if not out_requires_grad:
        raise RuntimeError(f"{fn}: output {out_index} of the user-provided function does not require gradients; "
                           f"the outputs must be computed in a differentiable manner from the input when running "
                           f"in strict mode")
    for j, g in enumerate(grads):
        if g is None:
            raise RuntimeError(f"{fn}: output {out_index} of the user-provided function is independent of input "
                               f"{j}. This is not allowed in strict mode")


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: for output ``i`` and input ``j`` a tensor of shape
    ``out_i.shape + in_j.shape``, nested as PyTorch's (a tuple over outputs when ``func`` returns a tuple, each a
    tuple over inputs when ``inputs`` is one). An input an output does not depend on gets zeros (``strict=True``:
    a RuntimeError). ``vectorize`` is accepted (same result, one backward per output element either way);
    ``strategy='forward-mode'`` is not supported."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError(f'jacobian: expected strategy to be either "forward-mode" or "reverse-mode", got '
                         f'{strategy!r}')
    if strategy == "forward-mode":
        raise NotImplementedError("jacobian: strategy='forward-mode' is not supported (minifused has no "
                                  "forward-mode autograd)")
    is_inputs_tuple, inputs, is_outputs_tuple, outputs = _prepare("jacobian", func, inputs, create_graph)
    result = []
    for i, out in enumerate(outputs):
        rows = _rows("jacobian", out, i, inputs, strict, create_graph)
        jac = tuple(r.reshape(out._data.shape + inp._data.shape) for r, inp in zip(rows, inputs))
        result.append(_post(jac, is_inputs_tuple))
    return _post(tuple(result), is_outputs_tuple)


def _rows(fn, out, i, inputs, strict, create_graph=False):
    """The Jacobian of output ``out`` (output ``i``) with respect to each of ``inputs``: one tensor per input, of
    shape ``(out.size,) + input.shape``, row k from one backward of the k-th one-hot vector (zeros for an input
    ``out`` does not depend on; ``strict``: a RuntimeError). With ``create_graph`` each row is written into the
    tensor by a recorded setitem, so the Jacobian differentiates."""
    T = _tape._Tensor
    rows = [T._from_array(inp._xp.zeros((out._data.size,) + inp._data.shape, inp._data.dtype)) for inp in inputs]
    if not out.requires_grad:
        _check_strict(fn, [None] * len(inputs), i, False, strict)
        return rows
    for k in range(out._data.size):
        onehot = out._xp.zeros(out._data.shape, out._data.dtype)
        onehot.reshape(-1)[k] = 1
        grads = grad(out, inputs, T._from_array(onehot), retain_graph=True, create_graph=create_graph,
                     allow_unused=True)
        _check_strict(fn, grads, i, True, strict)
        for j, g in enumerate(grads):
            if g is None:
                continue
            if create_graph:
                with enable_grad():
                    rows[j][k] = g
            else:
                rows[j]._data[k] = g._data
    return rows


def _vectors(op, v, like, single):
    """``v`` as a tuple of tensors shaped as ``like`` (jvp's inputs, vjp's outputs), checked as PyTorch checks it;
    None (ones) only where ``like`` is one one-element tensor (``single`` says of what, in the error)."""
    if v is None:
        if len(like) != 1 or like[0]._data.size != 1:
            raise RuntimeError(f"{op}: the vector v can only be None if {single} a single Tensor with a single "
                               f"element")
        return (_tape._Tensor._from_array(like[0]._xp.ones(like[0]._data.shape, like[0]._data.dtype)),)
    _, vs = _as_tuple(v, "v", op)
    if len(vs) != len(like):
        raise RuntimeError(f"{op}: v is a tuple of invalid length: should be {len(like)} but got {len(vs)}")
    for ref, vi in zip(like, vs):
        if tuple(vi.shape) != tuple(ref.shape):
            raise RuntimeError(f"{op}: v has invalid size: should be {tuple(ref.shape)} but got {tuple(vi.shape)}")
    return vs


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), Jv)``: the outputs (detached) and the Jacobian-vector product, shaped as the outputs (a
    tuple when they are). ``v`` matches ``inputs``; it may be None only for a single one-element input. minifused
    has no forward mode: Jv comes from the Jacobian's rows, one backward per output element. An input an output
    does not depend on contributes nothing (``strict=True``: a RuntimeError)."""
    is_inputs_tuple, inputs, is_outputs_tuple, outputs = _prepare("jvp", func, inputs, create_graph)
    T = _tape._Tensor
    vs = _vectors("jvp", v, inputs, "the input to the user-provided function is")
    if create_graph:
        products = _jvp_double_backward(outputs, inputs, vs, strict)
        return _post(_outputs(outputs, True), is_outputs_tuple), _post(products, is_outputs_tuple)
    products = []
    for i, out in enumerate(outputs):
        rows = _rows("jvp", out, i, inputs, strict)
        flat = sum(r._data.reshape(out._data.size, -1) @ vi._data.reshape(-1) for r, vi in zip(rows, vs))
        products.append(T._from_array(flat.reshape(out._data.shape).astype(out._data.dtype, copy=False)))
    return _post(_outputs(outputs, False), is_outputs_tuple), _post(tuple(products), is_outputs_tuple)


def _jvp_double_backward(outputs, inputs, vs, strict):
    """Jv as PyTorch takes it with ``create_graph``: the vJ-product's gradient with respect to its vector u (zeros
    that require grad), weighted by v: vᵀ(uᵀJ)' = Jv, a tensor per output with a graph of its own."""
    T = _tape._Tensor
    live = [o for o in outputs if o.requires_grad]
    us = [T._from_array(o._xp.zeros(o._data.shape, o._data.dtype), True) for o in live]
    products = [None] * len(outputs)
    if live:
        grads = grad(live, inputs, us, create_graph=True, allow_unused=True)
        pairs = [(g, vi) for g, vi in zip(grads, vs) if g is not None]
        if pairs:
            found = grad([g for g, _ in pairs], us, [vi for _, vi in pairs], create_graph=True, allow_unused=True)
            by_id = dict(zip((id(o) for o in live), found))
            products = [by_id.get(id(o)) for o in outputs]
    for i, (o, p) in enumerate(zip(outputs, products)):
        if p is None:
            if strict:
                raise RuntimeError(f"jvp: output {i} of the user-provided function is independent of the inputs. "
                                   f"This is not allowed in strict mode")
            products[i] = T._from_array(o._xp.zeros(o._data.shape, o._data.dtype))
    return tuple(products)


def _scalar_output(fn, func, inputs, create_graph):
    """``func``'s output, which must be a single-element tensor (the Hessian's functions), and its gradient with
    respect to each input, taken with ``create_graph`` (zeros for an input it does not depend on)."""
    is_inputs_tuple, inputs, _, outputs = _prepare(fn, func, inputs, create_graph)
    if len(outputs) != 1 or outputs[0]._data.size != 1:
        raise RuntimeError(f"{fn}: the Tensor returned by the function given to {fn} should contain a single element")
    out = outputs[0]
    grads = grad(out, inputs, create_graph=True, allow_unused=True) if out.requires_grad else (None,) * len(inputs)
    return is_inputs_tuple, inputs, out, grads


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Hessian of ``func`` (which returns a single-element tensor) at ``inputs``: for inputs ``i`` and ``j`` a
    tensor of shape ``in_i.shape + in_j.shape``, nested as PyTorch's (a tuple of tuples when ``inputs`` is a
    tuple). The Jacobian of the gradient, taken with ``create_graph``: one backward per element of the gradient.
    An input the output does not depend on gets zeros (``strict=True``: a RuntimeError). ``vectorize`` is
    accepted (same result); ``outer_jacobian_strategy='forward-mode'`` is not supported."""
    if outer_jacobian_strategy != "reverse-mode":
        raise NotImplementedError("hessian: outer_jacobian_strategy='forward-mode' is not supported (minifused has "
                                  "no forward-mode autograd)")
    is_inputs_tuple, inputs, _, grads = _scalar_output("hessian", func, inputs, create_graph)
    T = _tape._Tensor
    result = []
    for i, (g, inp) in enumerate(zip(grads, inputs)):
        if g is None:
            _check_strict("hessian", [None], 0, True, strict)
            g = T._from_array(inp._xp.zeros(inp._data.shape, inp._data.dtype))
        rows = _rows("hessian", g, i, inputs, strict, create_graph)
        result.append(tuple(r.reshape(inp._data.shape + other._data.shape) for r, other in zip(rows, inputs)))
    return _post(tuple(_post(r, is_inputs_tuple) for r in result), is_inputs_tuple)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), vᵀH)``: the output (detached unless ``create_graph``) and the vector-Hessian product,
    shaped as ``inputs``, one gradient of the gradient. ``func`` returns a single-element tensor; ``v`` matches
    ``inputs`` and may be None only for a single one-element input."""
    return _hessian_product("vhp", func, inputs, v, create_graph, strict)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), Hv)``, shaped as ``inputs``. The Hessian of a twice continuously differentiable function
    is symmetric, so Hv is vᵀH (:func:`vhp`), taken by one gradient of the gradient."""
    return _hessian_product("hvp", func, inputs, v, create_graph, strict)


def _hessian_product(fn, func, inputs, v, create_graph, strict):
    is_inputs_tuple, inputs, out, grads = _scalar_output(fn, func, inputs, create_graph)
    T = _tape._Tensor
    vs = _vectors(fn, v, inputs, "the input to the user-provided function is")
    pairs = [(g, vi) for g, vi in zip(grads, vs) if g is not None]
    found = [None] * len(inputs)
    if pairs:
        found = list(grad([g for g, _ in pairs], inputs, [vi for _, vi in pairs], create_graph=create_graph,
                          allow_unused=True))
    for j, g in enumerate(found):
        if g is None:
            if strict:
                raise RuntimeError(f"{fn}: the gradient of the user-provided function is independent of input {j}. "
                                   f"This is not allowed in strict mode")
            found[j] = T._from_array(inputs[j]._xp.zeros(inputs[j]._data.shape, inputs[j]._data.dtype))
    return _outputs((out,), create_graph)[0], _post(tuple(found), is_inputs_tuple)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), vᵀJ)``: the outputs (detached) and the vector-Jacobian product, shaped as ``inputs``
    (a tuple when they are). ``v`` matches the outputs; it may be None only when ``func`` returns a single
    one-element tensor. An input the outputs do not depend on gets zeros (``strict=True``: a RuntimeError)."""
    is_inputs_tuple, inputs, is_outputs_tuple, outputs = _prepare("vjp", func, inputs, create_graph)
    T = _tape._Tensor
    vs = _vectors("vjp", v, outputs, "the user-provided function returns")
    live = [(o, vi) for o, vi in zip(outputs, vs) if o.requires_grad]
    for i, o in enumerate(outputs):
        if not o.requires_grad:
            _check_strict("vjp", [], i, False, strict)
    grads = [None] * len(inputs)
    if live:
        grads = list(grad([o for o, _ in live], inputs, [vi for _, vi in live], create_graph=create_graph,
                          allow_unused=True))
        for j, g in enumerate(grads):
            if g is None and strict:
                raise RuntimeError(f"vjp: the output of the user-provided function is independent of input {j}. "
                                   f"This is not allowed in strict mode")
    products = tuple(g if g is not None else T._from_array(inp._xp.zeros_like(inp._data))
                     for g, inp in zip(grads, inputs))
    return _post(_outputs(outputs, create_graph), is_outputs_tuple), _post(products, is_inputs_tuple)
