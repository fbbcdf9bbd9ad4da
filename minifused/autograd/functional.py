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


def _as_tuple(value, what, fn, lists=False):
    """``(was_a_tuple, tuple_of_tensors)``, raising TypeError for anything but a tensor or a tuple of them, as
    PyTorch's (a list too, unless ``lists``: gradcheck takes a function's list of outputs)."""
    is_tuple = isinstance(value, (tuple, list) if lists else tuple)
    values = tuple(value) if is_tuple else (value,)
    for i, v in enumerate(values):
        if not isinstance(v, _tape._Tensor):
            where = f"the value at index {i}" if is_tuple else f"the given {what}"
            raise TypeError(f"{fn}: the {what} must be either a Tensor or a tuple of Tensors, but {where} has type "
                            f"{type(v).__name__}")
    return is_tuple, values


def _post(values, is_tuple):
    return values if is_tuple else values[0]


def _prepare(fn, func, inputs, create_graph):
    if not callable(func):
        raise TypeError(f"{fn}: func must be callable, got {type(func).__name__}")
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", fn)
    # without create_graph: fresh leaves sharing the inputs' memory, so the caller's graph is neither extended nor
    # given gradients; with it an input that requires grad stays in the caller's graph (a view of it, as PyTorch's)
    with enable_grad():  # (the view is recorded under no_grad too, as PyTorch's)
        inputs = tuple(t.view_as(t) if create_graph and t.requires_grad else t.detach().requires_grad_(True)
                       for t in inputs)
        out = func(*inputs)
    is_outputs_tuple, outputs = _as_tuple(out, "outputs of the user-provided function", fn)
    return is_inputs_tuple, inputs, is_outputs_tuple, outputs


def _outputs(outputs, create_graph):
    return outputs if create_graph else tuple(o.detach() for o in outputs)


def _check_outputs(fn, outputs, strict):
    """``strict``: every output must require grad (be computed differentiably from the inputs), as PyTorch's."""
    if not strict:
        return
    for i, o in enumerate(outputs):
        if not o.requires_grad:
            raise RuntimeError(f"{fn}: output {i} of the user-provided function does not require gradients. The "
                               f"outputs must be computed in a differentiable manner from the input when running in "
                               f"strict mode")


def _check_jacobian(fn, grads, strict):
    """``strict``, for the Hessian's functions: the gradient of the output with respect to each input must exist and
    depend on the inputs (a linear function's does not), as PyTorch's (whose hessian sees zeros for a missing one)."""
    if not strict:
        return
    for j, g in enumerate(grads):
        if g is None and fn != "hessian":
            raise RuntimeError(f"{fn}: the output of the user-provided function is independent of input {j}. This "
                               f"is not allowed in strict mode")
        if g is None or not g.requires_grad:
            raise RuntimeError(f"{fn}: while computing the hessian, found that the jacobian of the user-provided "
                               f"function with respect to input {j} is independent of the input. This is not allowed "
                               f"in strict mode. You should ensure that your function is twice differentiable and "
                               f"that the jacobian depends on the inputs (this would be violated by a linear function "
                               f"for example)")


def _fill_in_zeros(fn, grads, refs, strict, create_graph, independent):
    """``grads`` with zeros (shaped as ``refs``) for the None ones; ``strict``: a None raises (``independent(i)``
    words it), as does, with ``create_graph``, a result that does not depend on the inputs, as PyTorch's."""
    T = _tape._Tensor
    out = []
    for i, (g, ref) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                raise RuntimeError(f"{fn}: {independent(i)}. This is not allowed in strict mode")
            g = T._from_array(ref._xp.zeros(ref._data.shape, ref._data.dtype))
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if fn in ("hvp", "vhp", "hessian") else "jacobian"
            raise RuntimeError(f"{fn}: the {what} of the user-provided function is independent of input {i}. This is "
                               f"not allowed in strict mode when create_graph=True")
        out.append(g)
    return tuple(out)


def _check_strategy(fn, strategy, vectorize, strict, create_graph):
    """PyTorch's checks of a Jacobian's ``strategy``. minifused has no forward-mode autograd: a forward-mode
    Jacobian (which PyTorch computes only with ``vectorize=True``) is computed in reverse mode, the same values."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise _StrategyError(f'{fn}: expected strategy to be either "forward-mode" or "reverse-mode", got '
                             f'{strategy!r}')
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError(f'{fn}: `create_graph=True` and `strategy="forward-mode"` are not supported '
                                      f'together (yet). Please either set `create_graph=False` or '
                                      f'`strategy="reverse-mode"`.')
        if strict:
            raise RuntimeError(f'{fn}: `strict=True` and `strategy="forward-mode"` are not supported together (yet). '
                               f'Please either set `strict=False` or `strategy="reverse-mode"`.')
        if not vectorize:
            raise NotImplementedError(f"{fn}: computing Jacobian using forward-AD or forward-over-reverse Hessian is "
                                      f"only implemented for `vectorize=True`.")
    if vectorize and strict:
        raise RuntimeError(f"{fn}: `strict=True` and `vectorized=True` are not supported together. Please either set "
                           f"`strict=False` or `vectorize=False`.")


class _StrategyError(ValueError, AssertionError):
    """A strategy that is neither mode: the AssertionError PyTorch raises, and a ValueError."""


def _filled_rows(op, i, rows, size, inputs, strict, create_graph):
    """Output ``i``'s Jacobian ``rows`` (one per input, None where it is independent of that input) with zeros of
    (``size``,) + the input's shape in the Nones; strict mode refuses those, and with ``create_graph`` a row that
    needs no gradient, with PyTorch's words."""
    for j, r in enumerate(rows):
        if r is None:
            if strict:
                raise RuntimeError(f"{op}: output {i} of the user-provided function is independent of input {j}. "
                                   f"This is not allowed in strict mode")
            rows[j] = _zeros((size,) + inputs[j]._data.shape, inputs[j])
        elif strict and create_graph and not r.requires_grad:
            raise RuntimeError(f"{op}: the jacobian of the user-provided function is independent of input {j}. This is "
                               f"not allowed in strict mode when create_graph=True")
    return rows


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: for output ``i`` and input ``j`` a tensor of shape
    ``out_i.shape + in_j.shape``, nested as PyTorch's (a tuple over outputs when ``func`` returns a tuple, each a
    tuple over inputs when ``inputs`` is one). An input an output does not depend on gets zeros (``strict=True``:
    a RuntimeError). ``vectorize`` is accepted (same result, one backward per output element either way);
    ``strategy='forward-mode'`` (with ``vectorize``, as PyTorch's) gives the same values, in the outputs' dtypes."""
    _check_strategy("jacobian", strategy, vectorize, strict, create_graph)
    is_inputs_tuple, inputs, is_outputs_tuple, outputs = _prepare("jacobian", func, inputs, create_graph)
    _check_outputs("jacobian", outputs, strict)
    result = []
    for i, out in enumerate(outputs):
        rows = _filled_rows("jacobian", i, _rows(out, inputs, create_graph), out._data.size, inputs, strict,
                            create_graph)
        jac = tuple(r.reshape(out._data.shape + inp._data.shape) for r, inp in zip(rows, inputs))
        if strategy == "forward-mode":  # (PyTorch's forward mode gives the outputs' dtype)
            jac = tuple(r if r.dtype == out.dtype else r.to(out.dtype) for r in jac)
        result.append(_post(jac, is_inputs_tuple))
    return _post(tuple(result), is_outputs_tuple)


def _zeros(shape, like):
    return _tape._Tensor._from_array(like._xp.zeros(shape, like._data.dtype))


def _rows(out, inputs, create_graph=False):
    """The Jacobian of output ``out`` with respect to each of ``inputs``: one tensor per input, of shape
    ``(out.size,) + input.shape``, row k from one backward of the k-th one-hot vector; None for an input ``out``
    does not depend on. With ``create_graph`` each row is written into the tensor by a recorded setitem, so the
    Jacobian differentiates (it requires grad only where a row does)."""
    if not out.requires_grad:
        return [None] * len(inputs)
    rows, used, graphed = [None] * len(inputs), [False] * len(inputs), [False] * len(inputs)
    grads_k = []
    for k in range(out._data.size):
        onehot = out._xp.zeros(out._data.shape, out._data.dtype)
        onehot.reshape(-1)[k] = 1
        grads_k.append(grad(out, inputs, _tape._Tensor._from_array(onehot), retain_graph=True,
                            create_graph=create_graph, allow_unused=True))
        for j, g in enumerate(grads_k[-1]):
            used[j] |= g is not None
            graphed[j] |= g is not None and g.requires_grad
    for j, inp in enumerate(inputs):
        if not used[j]:
            continue
        rows[j] = _zeros((out._data.size,) + inp._data.shape, inp)
        for k, grads in enumerate(grads_k):
            g = grads[j]
            if g is None:
                continue
            if graphed[j]:
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
    has no forward mode: Jv comes from the Jacobian's rows, one backward per output element (with ``create_graph``,
    PyTorch's double-backward trick). ``strict=True`` refuses an output that does not require grad, an input no
    output depends on and an output that depends on no input, as PyTorch's."""
    is_inputs_tuple, inputs, is_outputs_tuple, outputs = _prepare("jvp", func, inputs, create_graph)
    T = _tape._Tensor
    vs = _vectors("jvp", v, inputs, "the input to the user-provided function is")
    _check_outputs("jvp", outputs, strict)
    if create_graph:
        products = _jvp_double_backward(outputs, inputs, vs, strict)
        return _post(_outputs(outputs, True), is_outputs_tuple), _post(products, is_outputs_tuple)
    all_rows = [_rows(out, inputs) for out in outputs]
    _check_jvp_strict(strict, [[r is not None for r in rows] for rows in all_rows], len(inputs))
    products = []
    for out, rows in zip(outputs, all_rows):
        flat = out._xp.zeros(out._data.size, out._data.dtype)
        for r, vi in zip(rows, vs):
            if r is not None:
                flat = flat + r._data.reshape(out._data.size, -1) @ vi._data.reshape(-1)
        products.append(T._from_array(flat.reshape(out._data.shape).astype(out._data.dtype, copy=False)))
    return _post(_outputs(outputs, False), is_outputs_tuple), _post(tuple(products), is_outputs_tuple)


def _check_jvp_strict(strict, reached, n_inputs):
    """jvp's ``strict`` checks, as PyTorch's: ``reached[i][j]``, whether output i depends on input j; every input
    must reach some output, every output depend on some input."""
    if not strict:
        return
    for j in range(n_inputs):
        if not any(r[j] for r in reached):
            raise RuntimeError(f"jvp: the output of the user-provided function is independent of input {j}. This is "
                               f"not allowed in strict mode")
    for i, r in enumerate(reached):
        if not any(r):
            raise RuntimeError(f"jvp: the gradient with respect to the input is independent of entry {i} in the "
                               f"grad_outputs when using the double backward trick to compute forward mode "
                               f"gradients. This is not allowed in strict mode")


def _jvp_double_backward(outputs, inputs, vs, strict):
    """Jv as PyTorch takes it with ``create_graph``: the vJ-product's gradient with respect to its vector u (zeros
    that require grad), weighted by v: vᵀ(uᵀJ)' = Jv, a tensor per output with a graph of its own."""
    T = _tape._Tensor
    live = [o for o in outputs if o.requires_grad]
    us = [T._from_array(o._xp.zeros(o._data.shape, o._data.dtype), True) for o in live]
    grads, found = [None] * len(inputs), [None] * len(live)
    if live:
        grads = grad(live, inputs, us, create_graph=True, allow_unused=True)
        pairs = [(g, vi) for g, vi in zip(grads, vs) if g is not None and g.requires_grad]
        if pairs:
            found = grad([g for g, _ in pairs], us, [vi for _, vi in pairs], create_graph=True, allow_unused=True)
    by_id = dict(zip((id(o) for o in live), found))
    for j, g in enumerate(grads):
        if strict and g is None:
            raise RuntimeError(f"jvp: the output of the user-provided function is independent of input {j}. This is "
                               f"not allowed in strict mode")
    return _fill_in_zeros("jvp", [by_id.get(id(o)) for o in outputs], outputs, strict, True,
                          lambda i: f"the gradient with respect to the input is independent of entry {i} in the "
                                    f"grad_outputs when using the double backward trick to compute forward mode "
                                    f"gradients")


def _scalar_output(fn, func, inputs, create_graph, strict):
    """``func``'s output, which must be a single-element tensor (the Hessian's functions), and its gradient with
    respect to each input, taken with ``create_graph`` (None for an input it does not depend on), checked as
    PyTorch checks them in strict mode."""
    is_inputs_tuple, inputs, is_outputs_tuple, outputs = _prepare(fn, func, inputs, create_graph)
    _check_outputs(fn, outputs, strict)
    if is_outputs_tuple:
        raise RuntimeError(f"{fn}: the function given to {fn} should return a single Tensor")
    if outputs[0]._data.size != 1:
        raise RuntimeError(f"{fn}: the Tensor returned by the function given to {fn} should contain a single element")
    out = outputs[0]
    grads = grad(out, inputs, create_graph=True, allow_unused=True) if out.requires_grad else (None,) * len(inputs)
    _check_jacobian(fn, grads, strict)
    return is_inputs_tuple, inputs, out, grads


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Hessian of ``func`` (which returns a single-element tensor) at ``inputs``: for inputs ``i`` and ``j`` a
    tensor of shape ``in_i.shape + in_j.shape``, nested as PyTorch's (a tuple of tuples when ``inputs`` is a
    tuple). The Jacobian of the gradient, taken with ``create_graph``: one backward per element of the gradient.
    An input the output does not depend on gets zeros (``strict=True``: a RuntimeError, as for a gradient that
    does not depend on the inputs). ``vectorize`` and ``outer_jacobian_strategy`` are checked as PyTorch's and
    give the same values."""
    if outer_jacobian_strategy not in ("reverse-mode", "forward-mode"):
        raise _StrategyError(f'hessian: expected strategy to be either "forward-mode" or "reverse-mode", got '
                             f'{outer_jacobian_strategy!r}')
    _check_strategy("hessian", outer_jacobian_strategy, vectorize, strict, create_graph)
    is_inputs_tuple, inputs, _, grads = _scalar_output("hessian", func, inputs, create_graph, strict)
    result = []
    for i, (g, inp) in enumerate(zip(grads, inputs)):
        rows = _filled_rows("hessian", i, _rows(g, inputs, create_graph) if g is not None else [None] * len(inputs),
                            inp._data.size, inputs, strict, create_graph)
        result.append(tuple(r.reshape(inp._data.shape + other._data.shape) for r, other in zip(rows, inputs)))
    return _post(tuple(_post(r, is_inputs_tuple) for r in result), is_inputs_tuple)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), vᵀH)``: the output (detached unless ``create_graph``) and the vector-Hessian product,
    shaped as ``inputs``, one gradient of the gradient. ``func`` returns a single-element tensor; ``v`` matches
    ``inputs`` and may be None only for a single one-element input."""
    return _hessian_product("vhp", func, inputs, v, create_graph, strict,
                            lambda i: f"the jacobian of the user-provided function is independent of input {i}")


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), Hv)``, shaped as ``inputs``. The Hessian of a twice continuously differentiable function
    is symmetric, so Hv is vᵀH (:func:`vhp`), taken by one gradient of the gradient."""
    return _hessian_product("hvp", func, inputs, v, create_graph, strict,
                            lambda i: f"the hessian of the user-provided function is independent of entry {i} in the "
                                      f"grad_jacobian. This is not allowed in strict mode as it prevents from using "
                                      f"the double backward trick to replace forward mode AD")


def _hessian_product(fn, func, inputs, v, create_graph, strict, independent):
    is_inputs_tuple, inputs, out, grads = _scalar_output(fn, func, inputs, create_graph, strict)
    vs = _vectors(fn, v, inputs, "the input to the user-provided function is")
    # (a gradient that does not require grad, a linear function's, contributes nothing: PyTorch's grad skips it)
    pairs = [(g, vi) for g, vi in zip(grads, vs) if g is not None and g.requires_grad]
    found = [None] * len(inputs)
    if pairs:
        found = grad([g for g, _ in pairs], inputs, [vi for _, vi in pairs], create_graph=create_graph,
                     allow_unused=True)
    found = _fill_in_zeros(fn, found, inputs, strict, create_graph, independent)
    return _outputs((out,), create_graph)[0], _post(found, is_inputs_tuple)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), vᵀJ)``: the outputs (detached) and the vector-Jacobian product, shaped as ``inputs``
    (a tuple when they are). ``v`` matches the outputs; it may be None only when ``func`` returns a single
    one-element tensor. An input the outputs do not depend on gets zeros (``strict=True``: a RuntimeError)."""
    is_inputs_tuple, inputs, is_outputs_tuple, outputs = _prepare("vjp", func, inputs, create_graph)
    _check_outputs("vjp", outputs, strict)
    vs = _vectors("vjp", v, outputs, "the user-provided function returns")
    live = [(o, vi) for o, vi in zip(outputs, vs) if o.requires_grad]
    grads = [None] * len(inputs)
    if live:
        grads = grad([o for o, _ in live], inputs, [vi for _, vi in live], create_graph=create_graph,
                     allow_unused=True)
    products = _fill_in_zeros("vjp", grads, inputs, strict, create_graph,
                              lambda i: f"the output of the user-provided function is independent of input {i}")
    return _post(_outputs(outputs, create_graph), is_outputs_tuple), _post(products, is_inputs_tuple)
