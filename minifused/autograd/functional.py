"""``torch.autograd.functional``'s reverse-mode products: :func:`jacobian` and :func:`vjp`, one backward per
output element (jacobian) or one in all (vjp), through :func:`minifused.autograd.grad`; :func:`jvp` from the
Jacobian's rows (PyTorch computes it by the double-backward trick, which needs ``create_graph``).

``hessian``, ``hvp`` and ``vhp`` need the gradient of a gradient; minifused has no ``create_graph``, so they raise
NotImplementedError, as ``create_graph=True`` does here.
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
    if create_graph:
        raise NotImplementedError(f"{fn}: create_graph=True needs double backward, which minifused does not "
                                  f"support")
    if not callable(func):
        raise TypeError(f"{fn}: func must be callable, got {type(func).__name__}")
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", fn)
    # fresh leaves sharing the inputs' memory: the caller's graph is neither extended nor given gradients
    inputs = tuple(t.detach().requires_grad_(True) for t in inputs)
    with enable_grad():
        out = func(*inputs)
    is_outputs_tuple, outputs = _as_tuple(out, "outputs of the user-provided function", fn)
    return is_inputs_tuple, inputs, is_outputs_tuple, outputs


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
    T = _tape._Tensor
    result = []
    for i, out in enumerate(outputs):
        rows = _rows("jacobian", out, i, inputs, strict)
        jac = tuple(T._from_array(r.reshape(out._data.shape + inp._data.shape)) for r, inp in zip(rows, inputs))
        result.append(_post(jac, is_inputs_tuple))
    return _post(tuple(result), is_outputs_tuple)


def _rows(fn, out, i, inputs, strict):
    """The Jacobian of output ``out`` (output ``i``) with respect to each of ``inputs``: one array per input, of
    shape ``(out.size,) + input.shape``, row k from one backward of the k-th one-hot vector (zeros for an input
    ``out`` does not depend on; ``strict``: a RuntimeError)."""
    T = _tape._Tensor
    rows = [inp._xp.zeros((out._data.size,) + inp._data.shape, inp._data.dtype) for inp in inputs]
    if not out.requires_grad:
        _check_strict(fn, [None] * len(inputs), i, False, strict)
        return rows
    for k in range(out._data.size):
        onehot = out._xp.zeros(out._data.shape, out._data.dtype)
        onehot.reshape(-1)[k] = 1
        grads = grad(out, inputs, T._from_array(onehot), retain_graph=True, allow_unused=True)
        _check_strict(fn, grads, i, True, strict)
        for j, g in enumerate(grads):
            if g is not None:
                rows[j][k] = g._data
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
    products = []
    for i, out in enumerate(outputs):
        rows = _rows("jvp", out, i, inputs, strict)
        flat = sum(r.reshape(out._data.size, -1) @ vi._data.reshape(-1) for r, vi in zip(rows, vs))
        products.append(T._from_array(flat.reshape(out._data.shape).astype(out._data.dtype, copy=False)))
    return _post(tuple(o.detach() for o in outputs), is_outputs_tuple), _post(tuple(products), is_outputs_tuple)


def _second_order(fn):
    raise NotImplementedError(f"{fn}: second derivatives need backward(create_graph=True), which minifused does not "
                              f"support; autograd.functional.jacobian and vjp / jvp give first-order products")


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """PyTorch's ``hessian`` (its signature): raises NotImplementedError (no second derivatives here)."""
    _second_order("hessian")


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """PyTorch's ``hvp`` (its signature): raises NotImplementedError (no second derivatives here)."""
    _second_order("hvp")


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """PyTorch's ``vhp`` (its signature): raises NotImplementedError (no second derivatives here)."""
    _second_order("vhp")


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
        grads = list(grad([o for o, _ in live], inputs, [vi for _, vi in live], allow_unused=True))
        for j, g in enumerate(grads):
            if g is None and strict:
                raise RuntimeError(f"vjp: the output of the user-provided function is independent of input {j}. "
                                   f"This is not allowed in strict mode")
    products = tuple(g if g is not None else T._from_array(inp._xp.zeros_like(inp._data))
                     for g, inp in zip(grads, inputs))
    return _post(tuple(o.detach() for o in outputs), is_outputs_tuple), _post(products, is_inputs_tuple)
