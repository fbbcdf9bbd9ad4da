"""Testing helpers: ``gradcheck`` compares analytic gradients with float64 central differences."""
from __future__ import annotations

import numpy as np

from . import backend
from .autograd import no_grad
from .tensor import Tensor


def _outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _projected(fn, inputs, weights):
    """sum_k <out_k, w_k> as a float64 number, with grad mode off."""
    with no_grad():
        outs = _outputs(fn(*inputs))
    return sum(float(np.sum(backend.to_device(o._data, backend.CPU).astype(np.float64) * w))
               for o, w in zip(outs, weights) if w is not None)


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, seed=0):
    """Check ``fn``'s gradients with respect to every input that requires grad.

    The outputs are projected on fixed random weights ``w`` (so the check covers
    Jᵀw for a random w), the analytic gradient of that projection comes from
    ``backward()``, and the numeric one from central differences of step ``eps``.
    Use float64 inputs. Returns True or raises AssertionError naming the input,
    the worst element and both values.
    """
    inputs = tuple(inputs)
    rng = np.random.default_rng(seed)
    outs = _outputs(fn(*inputs))
    weights = [rng.standard_normal(o.shape) if backend.is_floating(o.dtype) else None for o in outs]
    differentiable = [(o, w) for o, w in zip(outs, weights) if w is not None and o.requires_grad]
    for t in inputs:
        if isinstance(t, Tensor):
            t.grad = None
    if differentiable:
        loss = None
        for o, w in differentiable:
            term = (o * Tensor._from_array(backend.to_device(w.astype(o.dtype), o.device))).sum()
            loss = term if loss is None else loss + term
        loss.backward()
    for index, t in enumerate(inputs):
        if not (isinstance(t, Tensor) and t.requires_grad):
            continue
        analytic = (np.zeros(t.shape) if t.grad is None
                    else backend.to_device(t.grad._data, backend.CPU).astype(np.float64))
        if analytic.shape != t.shape:
            raise AssertionError(f"gradcheck: input {index} has shape {t.shape} but its gradient has "
                                 f"shape {analytic.shape}")
        host = backend.to_device(t._data, backend.CPU).copy()
        numeric = np.zeros(host.shape, np.float64)
        flat, nflat = host.reshape(-1), numeric.reshape(-1)
        original = t._data
        try:
            for i in range(flat.size):
                value = flat[i]
                flat[i] = value + eps
                t._data = backend.to_device(host, t.device)
                plus = _projected(fn, inputs, weights)
                flat[i] = value - eps
                t._data = backend.to_device(host, t.device)
                minus = _projected(fn, inputs, weights)
                flat[i] = value
                nflat[i] = (plus - minus) / (2 * eps)
        finally:
            t._data = original
        # isclose, not a '>' test: a NaN or infinite analytic gradient is a mismatch, not a pass
        bad = ~np.isclose(analytic, numeric, rtol=rtol, atol=atol, equal_nan=True)
        if bad.any():
            worst = np.unravel_index(np.argmax(np.abs(analytic - numeric)), numeric.shape)
            raise AssertionError(
                f"gradcheck: gradient of input {index} (shape {t.shape}) differs at {bad.sum()} of "
                f"{bad.size} elements; worst at {worst}: analytic {analytic[worst]:.8g}, "
                f"numeric {numeric[worst]:.8g}")
    return True


# ---------------------------------------------------------------- assert_close (torch.testing.assert_close)
#: PyTorch's default (rtol, atol) per dtype; other dtypes (integers, bool) compare exactly.
_TOLERANCES = {np.dtype(np.float16): (1e-3, 1e-5), backend.bfloat16: (1.6e-2, 1e-5),
               np.dtype(np.float32): (1.3e-6, 1e-5), np.dtype(np.float64): (1e-7, 1e-7)}


def _tolerances(*dtypes):
    """The loosest default tolerances of ``dtypes`` (PyTorch's rule when their dtypes may differ)."""
    pairs = [_TOLERANCES.get(np.dtype(d), (0.0, 0.0)) for d in dtypes]
    return max(r for r, _ in pairs), max(a for _, a in pairs)


def _dtype_name(a):
    return f"minifused.{a.dtype}" if isinstance(a, Tensor) else str(a.dtype)


def _compare_arrays(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, check_stride):
    """The mismatch message of two tensors (or two NumPy arrays), None where they are close."""
    if actual.shape != expected.shape:
        shape = (lambda t: f"minifused.Size({list(t.shape)})") if isinstance(actual, Tensor) else (lambda t: t.shape)
        return f"The values for attribute 'shape' do not match: {shape(actual)} != {shape(expected)}."
    if isinstance(actual, Tensor):
        if check_device and actual.device != expected.device:
            return f"The values for attribute 'device' do not match: {actual.device} != {expected.device}."
        if check_dtype and actual.dtype != expected.dtype:
            return (f"The values for attribute 'dtype' do not match: {_dtype_name(actual)} != "
                    f"{_dtype_name(expected)}.")
        if check_stride and actual.stride() != expected.stride():
            return f"The values for attribute 'stride()' do not match: {actual.stride()} != {expected.stride()}."
        a, e = (backend.to_device(t.detach()._data, backend.CPU) for t in (actual, expected))
    else:
        if check_dtype and actual.dtype != expected.dtype:
            return f"The values for attribute 'dtype' do not match: {actual.dtype} != {expected.dtype}."
        a, e = np.asarray(actual), np.asarray(expected)
    if rtol is None:
        rtol, atol = _tolerances(a.dtype, e.dtype)
    floats = [d for d in (a.dtype, e.dtype) if backend.is_floating(d)]
    exact = rtol == 0 and atol == 0 and not floats
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        close = np.isclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol, equal_nan=equal_nan)
        if close.all():
            return None
        if a.ndim == 0:
            return _scalar_message(a.item(), e.item(), rtol, atol, exact)
        # the statistics as PyTorch's: in the promoted floating dtype (integers and bool in int64, their relative
        # difference in float32), over the mismatched elements only, a NaN the greatest
        work = np.result_type(*floats) if floats else np.dtype(np.int64)
        diff = np.abs(a.astype(work) - e.astype(work))
        diff[close] = 0
        rel = (diff / np.abs(e.astype(work))).astype(work if floats else np.float32)
        rel[close] = 0
    bad = int(close.size - np.count_nonzero(close))

    def worst(d):
        idx = np.unravel_index(int(np.argmax(d)), d.shape)
        return d[idx].item(), tuple(int(j) for j in idx)

    (da, ia), (dr, ir) = worst(diff), worst(rel)
    kind = "equal" if exact else "close"
    return "\n".join([
        f"Tensor-likes are not {kind}!", "",
        f"Mismatched elements: {bad} / {close.size} ({100.0 * bad / close.size:.1f}%)",
        f"Greatest absolute difference: {da} at index {ia}" + ("" if exact else f" (up to {atol} allowed)"),
        f"Greatest relative difference: {dr} at index {ir}" + ("" if exact else f" (up to {rtol} allowed)")])


def _scalar_message(a, e, rtol, atol, exact):
    kind = "equal" if exact else "close"
    diff = abs(a - e)
    rel = diff / abs(e) if e else float("inf") if diff else float("nan")
    return (f"Scalars are not {kind}!\n\nExpected {e} but got {a}.\nAbsolute difference: {diff}"
            + ("" if exact else f" (up to {atol} allowed)") + f"\nRelative difference: {rel}"
            + ("" if exact else f" (up to {rtol} allowed)"))


def _compare(actual, expected, rtol, atol, equal_nan, flags, where):
    """The mismatch message of ``actual`` against ``expected`` (nested sequences and mappings of tensors, NumPy
    arrays and numbers), None where everything is close; ``where``: the item path so far."""
    def at(message):
        return message if not where else f"{message}\n\nThe failure occurred for item {''.join(where)}"

    if isinstance(actual, Tensor) and isinstance(expected, Tensor) or (
            isinstance(actual, np.ndarray) and isinstance(expected, np.ndarray)):
        m = _compare_arrays(actual, expected, rtol, atol, equal_nan, *flags)
        return m and at(m)
    numbers = (bool, int, float)
    if isinstance(actual, numbers) and isinstance(expected, numbers):
        if flags[1] and type(actual) is not type(expected):
            return at(f"The (d)types do not match: {type(actual)} != {type(expected)}.")
        a, e = np.float64(actual), np.float64(expected)
        exact = rtol is None and not isinstance(actual, float) and not isinstance(expected, float)
        rt, at_ = (0.0, 0.0) if exact else (1e-7, 1e-7) if rtol is None else (rtol, atol)
        if np.isclose(a, e, rtol=rt, atol=at_, equal_nan=equal_nan):
            return None
        return at(_scalar_message(actual, expected, rt, at_, exact))
    if actual is None and expected is None:
        return None
    if isinstance(actual, dict) and isinstance(expected, dict):
        if actual.keys() != expected.keys():
            missing = sorted(set(expected) - set(actual), key=repr)
            extra = sorted(set(actual) - set(expected), key=repr)
            return at(f"The keys of the mappings do not match:\nMissing keys in the actual mapping: {missing}\n"
                      f"Additional keys in the actual mapping: {extra}")
        for k in expected:
            m = _compare(actual[k], expected[k], rtol, atol, equal_nan, flags, where + [f"[{k!r}]"])
            if m:
                return m
        return None
    if isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)):
        if len(actual) != len(expected):
            return at(f"The length of the sequences mismatch: {len(actual)} != {len(expected)}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            m = _compare(a, e, rtol, atol, equal_nan, flags, where + [f"[{i}]"])
            if m:
                return m
        return None
    raise TypeError(f"No comparison pair was able to handle inputs of type {type(actual)} and {type(expected)}.")


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None, equal_nan=False,
                 check_device=True, check_dtype=True, check_layout=True, check_stride=False, msg=None):
    """``torch.testing.assert_close``: raise an AssertionError (in PyTorch's words) unless ``actual`` and
    ``expected`` — tensors, NumPy arrays or numbers, or sequences and mappings of them — match in shape, device
    and dtype (as checked) and are close: ``|actual - expected| <= atol + rtol * |expected|`` elementwise, with
    PyTorch's default tolerances of the dtype when ``rtol`` and ``atol`` are both omitted (exact for integers
    and bool). ``msg``: a string to raise instead, or a function of the message that returns it."""
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got no "
                         f"{'rtol' if rtol is None else 'atol'}.")
    message = _compare(actual, expected, rtol, atol, equal_nan, (check_device, check_dtype, check_stride), [])
    if message is not None:
        raise AssertionError(msg(message) if callable(msg) else msg if msg is not None else message)
