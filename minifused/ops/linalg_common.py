"""What the linalg modules share: :class:`LinAlgError`, the checks of their arguments with PyTorch's messages, and
the calls into ``xp.linalg`` (NumPy's LAPACK on the cpu, CuPy's cuSOLVER / cuBLAS on cuda).

A singular matrix (inv, solve) or one that is not positive-definite (cholesky) raises :class:`LinAlgError` naming
the batch element and LAPACK's info, as PyTorch's; the ``_ex`` forms get the info instead, with NaN results for the
matrices that failed. CuPy skips its solvers' error checks unless asked (it returns whatever the failed factorization
left); they are asked for here, which waits for the device, as PyTorch's checked forms do."""
from __future__ import annotations

import numpy as np

from .. import backend
from ..tensor import Tensor
from ..backend import InputError, InputTypeError

_xp = backend.array_module


class LinAlgError(RuntimeError):
    """``torch.linalg.LinAlgError``: LAPACK / cuSOLVER could not complete a factorization or solve (a singular
    matrix for inv / solve, one not positive-definite for cholesky). A RuntimeError, as PyTorch's."""


# ---------------------------------------------------------------- arguments, with PyTorch's messages
_TORCH_DTYPE = {"float16": "Half", "bfloat16": "BFloat16", "float32": "Float", "float64": "Double", "int64": "Long",
                "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def dtype_name(dtype):
    """PyTorch's name of a dtype in its messages ('Float', 'Half', 'Long' ...)."""
    name = np.dtype(dtype).name
    return _TORCH_DTYPE.get(name, name)


def check_dtype(op, A):
    if A.dtype in (backend.float16, backend.bfloat16):
        raise InputTypeError(f"{op}: not implemented for '{dtype_name(A.dtype)}': low precision dtypes are not "
                             f"supported (float32 and float64 are)")
    if not backend.is_floating(A.dtype):
        raise InputTypeError(f"{op}: Expected a floating point or complex tensor as input. Got "
                             f"{dtype_name(A.dtype)}")


def check_matrix(op, A, name="A", square=True, dtype=True):
    """``A`` a tensor of matrices (at least 2-D), square if asked, float32 or float64 if asked."""
    if not isinstance(A, Tensor):
        raise InputTypeError(f"{op}(): argument '{name}' must be Tensor, not {type(A).__name__}")
    if A.ndim < 2:
        raise InputError(f"{op}: The input tensor {name} must have at least 2 dimensions.")
    if square and A.shape[-1] != A.shape[-2]:
        raise InputError(f"{op}: {name} must be batches of square matrices, but they are {A.shape[-2]} by "
                         f"{A.shape[-1]} matrices")
    if dtype:
        check_dtype(op, A)


def check_same_dtype(op, A, B, names=("A", "B")):
    if not isinstance(B, Tensor):
        raise InputTypeError(f"{op}(): argument '{names[1]}' must be Tensor, not {type(B).__name__}")
    if A.dtype != B.dtype:
        raise InputTypeError(f"{op}: Expected {names[0]} and {names[1]} to have the same dtype, but found "
                             f"{names[0]} of type {dtype_name(A.dtype)} and {names[1]} of type "
                             f"{dtype_name(B.dtype)} instead")
    if A.device != B.device:
        raise RuntimeError(f"{op}: expected all tensors on the same device, got {A.device} and {B.device}")


def detached(t):
    """A non-differentiable output of a Function (a sign, an info) cut from the tape, as PyTorch marks it."""
    return Tensor._from_array(t._data)


def swap(a):
    return a.swapaxes(-1, -2)


def set_diagonal(a, value):
    """Square matrices ``a`` with their diagonals replaced by ``value`` (a scalar or the (..., n) diagonals)."""
    xp = _xp(a)
    value = xp.asarray(value, a.dtype)
    return backend.where(xp.eye(a.shape[-1], dtype=bool), value[..., None, :] if value.ndim else value, a)


# ---------------------------------------------------------------- calling LAPACK / cuSOLVER, and their failures
def checked(op, xp, fn, *args, **kwargs):
    """``fn(*args)`` of xp.linalg with CuPy's checks of the solver's info on: a wait for the device (refused inside
    a CUDA-graph capture); NumPy always checks."""
    if xp is np:
        return fn(*args, **kwargs)
    import cupyx

    backend.refuse_sync(op)
    with cupyx.errstate(linalg="raise"):
        return fn(*args, **kwargs)


def guarded(op, xp, fn, *arrays):
    """``fn(*arrays)`` over stacks of matrices of one batch shape (the result shaped as the last one), and the flat
    indices of the batch elements the solver reported failed: their results are NaN. One batched call; one call
    per matrix only after it failed."""
    if any(a.size == 0 for a in arrays):
        return xp.zeros(arrays[-1].shape, arrays[-1].dtype), []
    try:
        return checked(op, xp, fn, *arrays), []
    except np.linalg.LinAlgError:
        pass
    flat = [a.reshape((-1,) + a.shape[-2:]) for a in arrays]
    out, failed = xp.empty(flat[-1].shape, flat[-1].dtype), []
    for i in range(out.shape[0]):
        try:
            out[i] = checked(op, xp, fn, *(a[i] for a in flat))
        except np.linalg.LinAlgError:
            out[i] = np.nan
            failed.append(i)
    return out.reshape(arrays[-1].shape), failed


def lu_info(a):
    """LAPACK getrf's info for a matrix it found singular: 1 + the column of the first exactly zero pivot of LU
    with partial pivoting (a NumPy matrix)."""
    a = np.array(a, copy=True)
    n = a.shape[-1]
    for k in range(n):
        p = k + int(np.argmax(np.abs(a[k:, k])))
        if a[p, k] == 0:
            return k + 1
        a[[k, p]] = a[[p, k]]
        a[k + 1:, k] /= a[k, k]
        a[k + 1:, k + 1:] -= np.outer(a[k + 1:, k], a[k, k + 1:])
    return n  # rounded apart from LAPACK's blocked order: its zero, reported at the last column


def cholesky_info(a):
    """potrf's info: the order of the first leading minor that is not positive-definite (a NumPy matrix)."""
    a = np.asarray(a)
    n = a.shape[-1]
    low = np.zeros_like(a)
    for j in range(n):
        d = a[j, j] - low[j, :j] @ low[j, :j]
        if not d > 0:
            return j + 1
        low[j, j] = np.sqrt(d)
        low[j + 1:, j] = (a[j + 1:, j] - low[j + 1:, :j] @ low[j, :j]) / low[j, j]
    return n


def singular_message(k):
    return (f"The diagonal element {k} is zero, the inversion could not be completed because the input matrix is "
            f"singular.")


def not_pd_message(k):
    return (f"The factorization could not be completed because the input is not positive-definite (the leading "
            f"minor of order {k} is not positive-definite).")


def factor(op, xp, fn, arrays, rule, message, check):
    """(``fn(*arrays)``, the int32 info of each matrix: 0, or ``rule`` of a failed one); with ``check`` a failure
    raises :class:`LinAlgError` with ``message(info)``, prefixed by its batch element as PyTorch's."""
    out, failed = guarded(op, xp, fn, *arrays)
    a = arrays[0]
    info = np.zeros(a.shape[:-2], np.int32)
    for i in failed:
        info.flat[i] = rule(backend.to_device(a.reshape((-1,) + a.shape[-2:])[i], backend.CPU))
    if failed and check:
        where = f"(Batch element {failed[0]}): " if a.ndim > 2 else ""
        raise LinAlgError(f"{op}: {where}{message(int(info.flat[failed[0]]))}")
    return out, backend.to_device(info, backend.device_of(a))


def converged(op, fn, *args, **kwargs):
    """An iterative factorization (svd, eigh); NumPy's failure to converge (NaN input, say) as PyTorch words it."""
    try:
        return fn(*args, **kwargs)
    except np.linalg.LinAlgError:
        raise LinAlgError(f"{op}: The algorithm failed to converge because the input matrix is ill-conditioned or "
                          f"has too many repeated singular values or eigenvalues") from None


def solve_quiet(xp, a, b):
    """``a^-1 b`` for matrices known to be invertible (a backward's, of one batch shape): no error check on CuPy
    (no wait for the device); NaN where one was singular after all (an ``_ex`` form's failed matrix)."""
    if xp is np:
        return guarded("", xp, xp.linalg.solve, a, b)[0]
    return xp.linalg.solve(a, b)


def inv_quiet(xp, a):
    if xp is np:
        return guarded("", xp, xp.linalg.inv, a)[0]
    return xp.linalg.inv(a)


def tri_solve(xp, t, b, upper):
    """T^-1 B for T the upper or lower triangle of ``t`` (the other one is not read; one batch shape for both).
    CuPy: cuBLAS's batched trsm. NumPy has no trsm: a general solve of the triangle, which refuses a zero on its
    diagonal where trsm goes on into inf / NaN; substitution row by row then, as trsm computes."""
    if t.size == 0 or b.size == 0:
        return xp.zeros(b.shape, b.dtype)
    if xp is not np:
        from cupyx.scipy.linalg import solve_triangular

        return solve_triangular(t, b, lower=not upper)
    t = np.triu(t) if upper else np.tril(t)
    try:
        return np.linalg.solve(t, b)
    except np.linalg.LinAlgError:
        x = np.zeros(b.shape, b.dtype)
        for i in range(t.shape[-1] - 1, -1, -1) if upper else range(t.shape[-1]):
            x[..., i, :] = (b[..., i, :] - np.einsum("...j,...jk->...k", t[..., i, :], x)) / t[..., i, i, None]
        return x
