"""Linear-layer GEMMs with cuBLASLt epilogs, and their NumPy references.

A layer is computed feature-major, as cuBLASLt sees it (column-major):
``Zᵀ = W @ Xᵀ`` with M = out_features, so the bias broadcasts along M and the
(out × batch) column-major result is, in memory, the row-major (batch × out)
array the caller wants. Three GEMM primitives cover a Linear's forward and backward:

==========================  ==========================================  ============================
primitive                   computes                                    epilogs
==========================  ==========================================  ============================
``linear_forward``          ``y = act(x @ w.T + b)`` (+ aux)            DEFAULT, BIAS, RELU(_AUX)_BIAS,
                                                                        GELU(_AUX)_BIAS, RELU(_AUX),
                                                                        GELU(_AUX)
``linear_backward_data``    ``dx = dy @ w``; with ``act``:              DEFAULT, DRELU_BGRAD,
                            ``dx *= act'(producer aux)``, ``db = Σ dx``  DGELU_BGRAD
``linear_backward_weight``  ``dw = dy.T @ x``, ``db = Σ dy``            DEFAULT, BGRADB
``activation_backward``     ``dz = dy * act'(aux)`` (elementwise)        (CUDA kernel, linear_act.cu)
``linear_backward_narrow``  dW, db and dX (with the producer's act')     (CUDA kernel, linear_narrow.cu)
                            of a layer of few outputs, in one pass
==========================  ==========================================  ============================

A layer of at most :data:`NARROW_MAX_OUT` outputs without activation (a classifier head) runs on
``linear_narrow.cu`` instead (up to :data:`NARROW_MAX_FORWARD_ROWS` rows forward, :data:`NARROW_MAX_ROWS`
backward): cuBLASLt gives it a tile of mostly idle columns, a split-K and a reduction kernel forward, and three
GEMMs and an epilogue kernel backward, where one pass each way does (``bench/linear_narrow.py`` times both).
A captured step's strict fp32 RELU_AUX(_BIAS) and DRELU_BGRAD run as a plain GEMM and a pass of
``linear_act.cu`` (see ``_split_relu``); a 16-bit DRELU_BGRAD or DGELU_BGRAD of :data:`DACT_SPLIT_MIN`
multiply-adds or more as a plain GEMM and a pass of ``columns.cu`` (see ``_split_dact``).

Aux semantics, the same on both devices (the GPU's own layout, so an aux array
can be handed back to cuBLASLt as is):

* ``relu``: a bit-mask, uint8, shape (batch, ``relu_aux_cols(out)``); bit
  ``j % 8`` (least significant first) of byte ``j // 8`` in row ``i`` is
  ``z[i, j] > 0``. cuBLASLt pads the feature dimension to a multiple of 128 bits.
  (Its ReLU epilogues map a NaN ``z`` to 0 with the bit clear, where PyTorch and this package's own
  ReLU kernels keep the NaN and its gradient.)
* ``gelu``: the pre-activation ``z = x @ w.T + b``, in the layer's dtype, shape
  (batch, ``gelu_aux_cols(out)``) (features padded to a multiple of 8; the
  padding columns are unspecified).

GELU here is the tanh approximation, ``0.5 z (1 + tanh(√(2/π) (z + 0.044715 z³)))``,
PyTorch's ``gelu(approximate='tanh')``: it is the form cuBLASLt's GELU epilogs
compute (PyTorch, too, routes only its tanh GELU to those epilogs).

The GPU path runs through the plan cache of :mod:`.cublaslt`; ``config`` (a
:class:`~.cublaslt.GemmConfig`, None for the default) says how a new plan picks its
algorithm. float32 GEMMs may use TF32 tensor cores when
``minifused.backend.tf32_matmul.allow_tf32`` is set (read at each call; off by default, so
float32 is computed in full float32). All GEMMs accumulate in float32 (float64 on the
NumPy path).
"""
from __future__ import annotations

import contextlib
import functools

import numpy as np

from .. import backend
from ..backend import tf32_matmul
from . import (ARG, GELU_C, GELU_CUBIC, Prepared, acc_dtype, aligned_bytes, clear_unset, columns, compute_capability,
               ctype, gelu_grad_ref, gelu_ref, get_kernel, grid_1d, sm_count)
from .cublaslt import OP_N, OP_T, PlanError, count, execute, init, unsupported


def relu_aux_cols(m: int) -> int:
    """Bytes per row of the ReLU bit-mask for ``m`` features (padded to 128 bits)."""
    return -(-m // 128) * 16


def gelu_aux_cols(m: int) -> int:
    """Columns of the GELU pre-activation aux for ``m`` features (padded to 8)."""
    return -(-m // 8) * 8


def _gelu_tanh(z):
    """GELU (tanh form) of ``z`` in its own dtype, NumPy or CuPy (the GPU path's checks and fallbacks)."""
    xp = backend.array_module(z)
    return 0.5 * z * (1 + xp.tanh(GELU_C * (z + GELU_CUBIC * z ** 3)))


# ====================================================================== NumPy references
def _acc(a):
    """``a`` in its accumulation dtype (float32, or float64 for float64): the CPU path runs one BLAS
    GEMM in the precision the GPU accumulates in, as PyTorch's CPU float32 does."""
    a = np.asarray(a)
    return a.astype(acc_dtype(a.dtype), copy=False)


def _pack_mask(z):
    """(n, m) boolean ``z > 0`` as the bit-mask layout described in the module docstring
    (NumPy or CuPy, as ``z``)."""
    xp = backend.array_module(z)
    n, m = z.shape
    if xp is np:
        return _pad_cols(np.packbits(z > 0, axis=1, bitorder="little"), relu_aux_cols(m))
    bits = xp.zeros((n, relu_aux_cols(m) * 8), dtype=np.uint8)
    bits[:, :m] = z > 0
    # little-endian bit order within each byte (CuPy's packbits has no axis option)
    return (bits.reshape(n, relu_aux_cols(m), 8) << xp.arange(8, dtype=np.uint8)).sum(axis=2, dtype=np.uint8)


def _unpack_mask(mask, m):
    """The (n, m) 0/1 uint8 bits of :func:`_pack_mask`'s mask."""
    return np.unpackbits(np.asarray(mask), axis=1, count=m, bitorder="little")


def _pad_cols(a, cols):
    out = np.zeros((a.shape[0], cols), dtype=a.dtype)
    out[:, : a.shape[1]] = a
    return out


def linear_forward_ref(x, w, bias=None, activation=None, aux=False, *, config=None):
    """NumPy reference of :func:`linear_forward` (accumulating in :func:`acc_dtype`, the input dtype out;
    no plans, so ``config`` is ignored). It is also the cpu path."""
    dtype = x.dtype
    z = _acc(x) @ _acc(w).T
    if bias is not None:
        z = z + _acc(bias)
    a = None
    if activation == "relu":
        y = np.maximum(z, 0)
        if aux:
            a = _pack_mask(z)
    elif activation == "gelu":
        y = gelu_ref(z)
        if aux:
            a = _pad_cols(z.astype(dtype), gelu_aux_cols(z.shape[1]))
    else:
        y = z
    return y.astype(dtype, copy=False), a


def activation_backward_ref(dy, aux, activation):
    """NumPy reference of :func:`activation_backward`: ``dy * act'(z)`` from the forward's aux."""
    m = dy.shape[1]
    if activation == "relu":
        return clear_unset(np.array(dy, order="C"), _unpack_mask(aux, m))
    return (_acc(dy) * gelu_grad_ref(_acc(np.asarray(aux)[:, :m]))).astype(dy.dtype)


def linear_backward_data_ref(dy, w, act=None, aux=None, *, config=None):
    """NumPy reference of :func:`linear_backward_data`."""
    dx = _acc(dy) @ _acc(w)
    if act is None:
        return dx.astype(dy.dtype, copy=False), None
    k = dx.shape[1]
    if act == "relu":
        dx = clear_unset(dx, _unpack_mask(aux, k))
    else:
        dx = dx * gelu_grad_ref(_acc(np.asarray(aux)[:, :k]))
    return dx.astype(dy.dtype), dx.sum(axis=0).astype(dy.dtype)


def linear_backward_weight_ref(dy, x, bias_grad=False, *, config=None):
    """NumPy reference of :func:`linear_backward_weight`."""
    dw = (_acc(dy).T @ _acc(x)).astype(dy.dtype)
    db = _acc(dy).sum(axis=0).astype(dy.dtype) if bias_grad else None
    return dw, db


def linear_backward_narrow_ref(dy, x, w, weight_grad, bias_grad, data_grad, act=None, aux=None):
    """NumPy reference of :func:`linear_backward_narrow`."""
    dw = db = dx = dbx = None
    if weight_grad or bias_grad:
        dw, db = linear_backward_weight_ref(dy, x, bias_grad)
    if data_grad:
        dx, dbx = linear_backward_data_ref(dy, w, act, aux)
    return (dw if weight_grad else None), db, dx, dbx


# ====================================================================== public primitives
def linear_forward(x, w, bias=None, activation=None, aux=False, *, config=None):
    """``y = act(x @ w.T + bias)`` and, with ``aux=True`` and an activation, its aux.

    ``x`` (n, k) with unit stride along k, ``w`` (out, k) with unit stride along k,
    ``bias`` (out,) contiguous or None, all of one dtype. Returns ``(y, aux)`` with
    ``y`` a contiguous (n, out) array and ``aux`` None without an activation or aux.
    ``config``: how new cuBLASLt plans pick their algorithm (None: the default).
    """
    if not backend.is_cuda_array(x):
        return linear_forward_ref(x, w, bias, activation, aux)
    return _linear_forward_cuda(x, w, bias, activation, aux, config)


def linear_backward_data(dy, w, act=None, aux=None, *, config=None):
    """``dx = dy @ w`` for a layer of weight ``w`` (out, k) and output gradient ``dy`` (n, out).

    With ``act`` ('relu' or 'gelu') and ``aux`` (the aux of the Linear that produced
    this layer's input, of k features), the activation's backward is fused into the
    GEMM (DRELU_BGRAD / DGELU_BGRAD): returns ``(dz, db)``, the producer's
    pre-activation gradient and its bias gradient ``dz.sum(0)``. Without ``act``
    returns ``(dx, None)``.
    """
    if not backend.is_cuda_array(dy):
        return linear_backward_data_ref(dy, w, act, aux)
    return _linear_backward_data_cuda(dy, w, act, aux, config)


def linear_backward_weight(dy, x, bias_grad=False, *, config=None):
    """``dw = dy.T @ x`` (out, k) and, with ``bias_grad``, ``db = dy.sum(0)`` from the same GEMM."""
    if not backend.is_cuda_array(dy):
        return linear_backward_weight_ref(dy, x, bias_grad)
    return _linear_backward_weight_cuda(dy, x, bias_grad, config)


def narrow_backward_applies(dy, k):
    """Whether :func:`linear_backward_narrow` runs one kernel for the output gradient ``dy`` (n, out) of a layer of
    ``k`` inputs: a GPU array of at most :data:`NARROW_MAX_OUT` features and :data:`NARROW_MAX_ROWS` rows."""
    n, m = dy.shape
    return (m <= NARROW_MAX_OUT and 0 < n <= NARROW_MAX_ROWS and k > 0 and dy.dtype in _NARROW_DTYPES
            and backend.is_cuda_array(dy))


def linear_backward_narrow(dy, x, w, weight_grad, bias_grad, data_grad, act=None, aux=None):
    """The backward of a Linear without activation of few outputs, where :func:`narrow_backward_applies`: from
    its output gradient ``dy`` (n, m), input ``x`` (n, k) and weight ``w`` (m, k), one pass gives
    ``(dw, db, dx, dbx)``: ``dw = dy.T @ x`` with ``weight_grad``, ``db = dy.sum(0)`` with ``bias_grad``, and with
    ``data_grad`` ``dx = dy @ w``, through ``act``'s backward on the producer's ``aux`` as
    :func:`linear_backward_data` does (then ``dbx = dx.sum(0)``, the producer's bias gradient). What is not
    asked for is None."""
    if not backend.is_cuda_array(dy):
        return linear_backward_narrow_ref(dy, x, w, weight_grad, bias_grad, data_grad, act, aux)
    return _linear_backward_narrow_cuda(dy, x, w, weight_grad, bias_grad, data_grad, act, aux)


def activation_backward(dy, aux, activation):
    """``dz = dy * act'(z)`` from a forward's aux (bit-mask or pre-activation); ``dy`` (n, m)."""
    if not backend.is_cuda_array(dy):
        return activation_backward_ref(dy, aux, activation)
    return _activation_backward_cuda(dy, aux, activation)


# ====================================================================== GPU launchers
_cp = None  # cupy, once a GPU path ran
_UINT8 = np.dtype(np.uint8)


def _cupy():
    global _cp
    init()
    import cupy

    _cp = cupy
    return cupy


_NO_SWITCH = contextlib.nullcontext()


def _on(dev_id):
    """Make ``dev_id`` current for allocations (no call into CUDA when it already is)."""
    cupy = _cp
    return _NO_SWITCH if cupy.cuda.runtime.getDevice() == dev_id else cupy.cuda.Device(dev_id)


def _align(ptr: int) -> int:
    return 256 if ptr % 256 == 0 else (ptr & -ptr)


def _ld(arr):
    """Leading dimension (elements) of a row-major matrix with unit inner stride."""
    n, k = arr.shape
    ld = arr.strides[0] // arr.itemsize
    return ld if n > 1 and ld >= k else k


def _dev(arr):
    return arr.data.device_id


def _tf32(dtype):
    return tf32_matmul.allow_tf32 and dtype == backend.float32


_FWD_EPI = {
    (None, False, False): "DEFAULT", (None, True, False): "BIAS",
    ("relu", False, False): "RELU", ("relu", True, False): "RELU_BIAS",
    ("relu", False, True): "RELU_AUX", ("relu", True, True): "RELU_AUX_BIAS",
    ("gelu", False, False): "GELU", ("gelu", True, False): "GELU_BIAS",
    ("gelu", False, True): "GELU_AUX", ("gelu", True, True): "GELU_AUX_BIAS",
}


def _linear_forward_cuda(x, w, bias, activation, aux, config):
    cupy = _cp or _cupy()

    n, k = x.shape
    m = w.shape[0]
    want_aux = bool(aux) and activation is not None
    epi = _FWD_EPI[(activation, bias is not None, want_aux)]
    dtype = x.dtype
    dev = _dev(x)
    if cupy.cuda.runtime.getDevice() != dev:
        with cupy.cuda.Device(dev):
            return _linear_forward_cuda(x, w, bias, activation, aux, config)
    if activation is None and m <= NARROW_MAX_OUT and 0 < n <= NARROW_MAX_FORWARD_ROWS and k and (
            dtype in _NARROW_DTYPES):
        return _narrow_forward(x, w, bias), None
    if want_aux and activation == "relu" and n and m and k and _split_relu(dtype, dev):
        y, _ = _linear_forward_cuda(x, w, bias, None, False, config)
        a = cupy.ndarray((n, relu_aux_cols(m)), _UINT8)
        _relu_mask_forward(y, a)
        return y, a
    if want_aux:
        y, a, aux_ld = _forward_outputs(cupy, n, m, dtype, activation)
    else:
        y, a, aux_ld = cupy.ndarray((n, m), dtype), None, 0
    if n == 0 or m == 0:
        return y, a
    if k == 0:  # an empty sum: act(bias) (cuBLASLt needs k >= 1)
        z = cupy.zeros((n, m), dtype=dtype) if bias is None else cupy.broadcast_to(bias, (n, m))
        return _host_act(z, activation, a)
    lda, ldb = _ld(w), _ld(x)
    wp, xp_ = w.data.ptr, x.data.ptr
    al = (_align(wp), _align(xp_))
    tf = _tf32(dtype)
    key = (dev, cupy.cuda.get_current_stream().ptr, "fwd", epi, dtype, m, n, k, lda, ldb, al, tf, config)
    args = (dtype, OP_T, OP_N, m, n, k, lda, ldb, m, epi, aux_ld, al, tf)
    bias_ptr = 0
    if bias is not None:
        if bias.data.ptr % 16:  # an unaligned view: give cuBLASLt an aligned copy
            bias = bias.copy()
        bias_ptr = bias.data.ptr
    # a new plan keeps the candidates whose aux matches their output (see cublaslt._keep_correct)
    check = None if a is None else (lambda: _aux_check(x, w, bias, y, a, activation))
    try:
        execute(key, args, wp, xp_, y, bias_ptr, 0 if a is None else a.data.ptr, check, config)
    except PlanError:
        if a is None:
            raise
        # no candidate of this epilogue passed: the plain GEMM (+ bias), the activation and its aux apart
        count("aux_fallbacks")
        z, _ = _linear_forward_cuda(x, w, bias, None, False, config)
        return _host_act(z, activation, a)
    return y, a


def _forward_outputs(cupy, n, m, dtype, activation):
    """``(y, aux, aux_ld)``: the forward's output and the aux of ``activation``, in one allocation
    (an allocation costs host time)."""
    if activation == "relu":
        cols = relu_aux_cols(m)
        aux_dtype, aux_ld = _UINT8, cols * 8
    else:
        aux_dtype = dtype
        cols = aux_ld = gelu_aux_cols(m)
    y_bytes = aligned_bytes(n * m * dtype.itemsize)
    mem = cupy.cuda.alloc(y_bytes + n * cols * aux_dtype.itemsize)
    y = cupy.ndarray((n, m), dtype, memptr=mem)
    return y, cupy.ndarray((n, cols), aux_dtype, memptr=mem + y_bytes), aux_ld


def _aux_check(x, w, bias, y, a, activation):
    """``(poisons, verify)`` for a new RELU_AUX / GELU_AUX plan's candidates (cublaslt._keep_correct)."""
    if activation == "relu":
        def aux_right():  # run after each poison (ones, then zeros: an unwritten bit fails one of them)
            return _relu_mask_right(x, w, bias, y, a)

        return (lambda: (y.fill(np.nan), a.fill(255)), lambda: (y.fill(np.nan), a.fill(0))), aux_right
    cupy = _cp
    m = y.shape[1]

    def gelu_right():  # gelu of the saved pre-activation is the output
        z, yf = a[:, :m].astype(cupy.float32), y.astype(cupy.float32)
        ref = _gelu_tanh(z)
        scale = float(cupy.abs(yf).max()) + 1e-3  # NaN (unwritten): the comparison is False
        return bool(cupy.isfinite(z).all()) and float(cupy.abs(ref - yf).max()) <= 1e-2 * scale

    return lambda: (y.fill(np.nan), a.fill(np.nan)), gelu_right


def _relu_mask_right(x, w, bias, y, a, recheck=256):
    """Whether the ReLU bit-mask ``a`` is the sign of the pre-activation of ``y = relu(x @ w.T + bias)``.
    A set bit must have y > 0 and a clear bit y == 0, except where a positive pre-activation rounds to
    y == 0 (under fp16's smallest subnormal: a few per 10^8 outputs of unit scale, so a large GEMM has
    some): up to ``recheck`` such elements are recomputed in float64 and pass unless negative beyond the
    fp32 accumulation's error bound; more than that many fail the check."""
    xp = backend.array_module(y)
    n, m = y.shape
    bits = ((a[:, :, None] >> xp.arange(8, dtype=np.uint8)) & 1).reshape(n, -1)[:, :m].astype(bool)
    yf = y.astype(np.float32)
    if not bool(xp.isfinite(yf).all()) or bool(((yf > 0) & ~bits).any()):
        return False
    rows, cols = xp.nonzero(bits & (yf == 0))
    if rows.size > recheck:
        return False
    if rows.size == 0:
        return True
    terms = x[rows].astype(np.float64) * w[cols].astype(np.float64)
    z, scale = terms.sum(axis=1), xp.abs(terms).sum(axis=1)
    if bias is not None:
        b = bias[cols].astype(np.float64)
        z, scale = z + b, scale + xp.abs(b)
    return bool((z >= -x.shape[1] * 2.0 ** -23 * scale).all())


def _host_act(z, activation, a):
    """Degenerate k == 0 forward, done with array ops."""
    import cupy

    zf = z.astype(cupy.float32)
    if activation == "relu":
        y = cupy.maximum(zf, 0)
        if a is not None:
            a[...] = _pack_mask(zf)
    elif activation == "gelu":
        y = _gelu_tanh(zf)
        if a is not None:
            a[:, : z.shape[1]] = z
    else:
        y = zf
    return cupy.ascontiguousarray(y.astype(z.dtype)), a


def _bias_grad_check(src, db, poisoned):
    """``(poison, verify)`` for a new plan whose epilog writes ``db = src.sum(0)``: ``poisoned`` arrays are
    NaN before each candidate runs, and ``db`` must match a plain column sum of ``src`` to fp32 rounding
    of the magnitudes summed (NaN anywhere: False)."""
    cupy = _cp

    def poison():
        for arr in poisoned:
            arr.fill(np.nan)

    def verify():
        ref = src.sum(axis=0, dtype=cupy.float32)
        scale = float(cupy.abs(src).sum(axis=0, dtype=cupy.float32).max()) + 1e-30
        return float(cupy.abs(db.astype(cupy.float32) - ref).max()) <= 1e-2 * scale

    return poison, verify


def _linear_backward_data_cuda(dy, w, act, aux, config):
    cupy = _cp or _cupy()

    n, m = dy.shape
    k = w.shape[1]
    dtype = dy.dtype
    dev = _dev(dy)
    with _on(dev):
        if m == 0 or n == 0 or k == 0:
            dx = cupy.zeros((n, k), dtype=dtype)
            return dx, (None if act is None else cupy.zeros((k,), dtype=dtype))
        if act is not None and (act == "relu" and _split_relu(dtype, dev) or _split_dact(act, dtype, n, k, m, aux)):
            dx, _ = _linear_backward_data_cuda(dy, w, None, None, config)
            db = cupy.ndarray((k,), dtype)
            _activation_backward_sum(dx, aux, db, act)
            return dx, db
        dx = cupy.ndarray((n, k), dtype)
        db = None
        aux_ld = 0
        epi = "DEFAULT"
        if act is not None:
            db = cupy.ndarray((k,), dtype)
            epi = "DRELU_BGRAD" if act == "relu" else "DGELU_BGRAD"
            aux_ld = relu_aux_cols(k) * 8 if act == "relu" else gelu_aux_cols(k)
        # cuBLASLt: D = dxᵀ (k × n) = op(A) (k × m) @ op(B) (m × n); A = w as stored
        # (col-major k × m), B = dy as stored (col-major m × n).
        lda, ldb = _ld(w), _ld(dy)
        wp, dyp = w.data.ptr, dy.data.ptr
        tf = _tf32(dtype)
        key = (dev, cupy.cuda.get_current_stream().ptr, "dgrad", epi, dtype, k, n, m, lda, ldb,
               _align(wp), _align(dyp), tf, config)
        args = (dtype, OP_N, OP_N, k, n, m, lda, ldb, k, epi, aux_ld, (_align(wp), _align(dyp)), tf)
        check = None if db is None else (lambda: _bias_grad_check(dx, db, (dx, db)))
        try:
            execute(key, args, wp, dyp, dx, 0 if db is None else db.data.ptr,
                    0 if aux is None else aux.data.ptr, check, config)
        except PlanError:
            if act is None:
                raise
            # no candidate of this epilogue passed (or cuBLASLt has none): the plain GEMM, then the
            # activation's backward and the column sum
            count("dgrad_bgrad_fallbacks")
            dx, _ = _linear_backward_data_cuda(dy, w, None, None, config)
            dz = _activation_backward_cuda(dx, aux, act)
            return dz, dz.sum(axis=0, dtype=cupy.float32).astype(dtype)
    return dx, db


def _linear_backward_weight_cuda(dy, x, bias_grad, config):
    cupy = _cp or _cupy()

    n, m = dy.shape
    k = x.shape[1]
    dtype = dy.dtype
    dev = _dev(dy)
    with _on(dev):
        if n == 0 or m == 0 or k == 0:  # nothing for cuBLASLt; the bias gradient may still be nonzero
            dw = cupy.zeros((m, k), dtype=dtype)
            return dw, (dy.sum(axis=0, dtype=cupy.float32).astype(dtype) if bias_grad else None)
        dw = cupy.ndarray((m, k), dtype)
        # cuBLASLt: D = dwᵀ (k × m) = op(A) (k × n) @ op(B) (n × m); A = x as stored
        # (col-major k × n), B = dy as stored (col-major m × n), transposed. BGRADB sums
        # op(B) over the GEMM's k (the batch): the bias gradient, length m.
        lda, ldb = _ld(x), _ld(dy)
        xp_, dyp = x.data.ptr, dy.data.ptr
        tf = _tf32(dtype)
        stream_ptr = cupy.cuda.get_current_stream().ptr
        base = (dev, stream_ptr, "wgrad")
        tail = (dtype, k, m, n, lda, ldb, _align(xp_), _align(dyp), tf, config)
        if bias_grad:
            key = base + ("BGRADB",) + tail
            if key not in unsupported:
                db = cupy.ndarray((m,), dtype)
                args = (dtype, OP_N, OP_T, k, m, n, lda, ldb, k, "BGRADB", 0,
                        (_align(xp_), _align(dyp)), tf)
                try:
                    execute(key, args, xp_, dyp, dw, db.data.ptr, 0, lambda: _bias_grad_check(dy, db, (db,)),
                            config)
                    return dw, db
                except PlanError:  # this configuration has no BGRADB kernel: GEMM + a reduction
                    count("bgradb_fallbacks")
        key = base + ("DEFAULT",) + tail
        args = (dtype, OP_N, OP_T, k, m, n, lda, ldb, k, "DEFAULT", 0,
                (_align(xp_), _align(dyp)), tf)
        execute(key, args, xp_, dyp, dw, 0, 0, None, config)
        db = dy.sum(axis=0, dtype=cupy.float32).astype(dtype) if bias_grad else None
    return dw, db


def _split_relu(dtype, dev):
    """Whether a ReLU epilogue runs as a pass of its own (linear_act.cu) after a plain GEMM: for strict fp32 GEMMs
    on a captured step's stream (``backend.graph_streams``: its warm-up too, so the plain GEMMs' plans are timed
    as graphs). cuBLASLt runs those GEMMs on SIMT kernels and the epilogue in a split-K reduction kernel or one of
    its own, with a memset node before it in the dgrad's case; the plain GEMM and the pass cost less in a graph
    (bench/mnist.py's captured MLP steps). Eager steps keep the fused epilogue: one launch less of host time."""
    return (dtype == backend.float32 and not tf32_matmul.allow_tf32
            and (dev, _cp.cuda.get_current_stream().ptr) in backend.graph_streams)


_PASS_ARGS = {"relu_mask_forward": 5, "relu_mask_backward_sum": 6, "relu_mask_backward_vec": 6,
              "gelu_tanh_backward_vec": 6}


#: Multiply-adds (rows x outputs x inputs) from which a 16-bit ReLU or GELU data gradient runs as the plain GEMM
#: and a pass (:func:`_activation_backward_sum`): there cuBLASLt's DRELU_BGRAD and DGELU_BGRAD kernels ran slower
#: than its plain GEMM by more than the pass costs (measured on an H200 from 2^32 up: ReLU 1.04 to 2.1 times
#: faster, GELU 1.13 to 1.48; even at 2^31; at 1024^3 and below the epilogues were faster; bench/linear.py times
#: the ReLU's at the seed's size)
DACT_SPLIT_MIN = {"relu": 1 << 32, "gelu": 1 << 32}


def _split_dact(act, dtype, n, k, m, aux):
    """Whether the data gradient through ``act`` of ``n`` rows, ``m`` outputs and ``k`` inputs runs as the plain
    GEMM and a pass (see :data:`DACT_SPLIT_MIN`): 16-bit, large (and for the GELU, its aux rows vectors)."""
    return (dtype.itemsize == 2 and n * k * m >= DACT_SPLIT_MIN[act]
            and (act == "relu" or columns.vector_rows(aux) and k % 8 == 0))


@functools.lru_cache(maxsize=1024)  # keyed by grid: bounded for workloads of many shapes
def _act_pass(name, dtype, grid, block, dev, cluster=1):
    """The prepared launch of linear_act.cu's pass ``name`` (its arguments all given per call) on ``grid`` blocks."""
    opts = (f"-DELEM_T={ctype(dtype)}", f"-DMF_CLUSTER={cluster}")
    return Prepared(get_kernel("linear_act.cu", name, opts), (grid,), (block,), (ARG,) * _PASS_ARGS[name], pdl=True)


#: Elements of dx from which the ReLU data gradient's pass moves vectors of 8 (columns.activation_backward_sum, two
#: launches) instead of relu_mask_backward_sum's elements (one launch): measured on an H200, the two were even at
#: 1024 x 1024 and the vectors faster from 1024 x 2048 up
VECTOR_PASS_MIN = 1 << 21


def _relu_mask_forward(z, mask):
    """``z = relu(z)`` in place and ``mask`` its bit-mask (the aux layout), one pass."""
    n, m = z.shape
    words = mask.shape[1] // 4
    dev = _dev(z)
    _act_pass("relu_mask_forward", z.dtype, min(-(-n * words // 8), 16 * sm_count(dev)), 256, dev)(
        z.data.ptr, mask.data.ptr, n, m, words)


def _activation_backward_sum(dx, aux, db, act):
    """``dx *= act'`` from the producer's ``aux`` in place and ``db = dx.sum(0)``: the DRELU_BGRAD (DGELU_BGRAD)
    epilogue's work. Rows of 8-element vectors on columns.cu (a GELU's always, a ReLU's from VECTOR_PASS_MIN
    elements), a ReLU's others on :func:`_relu_mask_backward_sum` (a GELU's rows are vectors: see _split_dact)."""
    n, k = dx.shape
    if act == "gelu" or n * k >= VECTOR_PASS_MIN and columns.vector_rows(dx):
        columns.activation_backward_sum(dx, aux, db, act)
    else:
        _relu_mask_backward_sum(dx, aux, db)


def _relu_mask_backward_sum(dx, mask, db):
    """``dx *= bit`` of ``mask`` in place and ``db = dx.sum(0)``, one launch (an element a lane)."""
    n, k = dx.shape
    dev = _dev(dx)
    col_blocks = -(-k // 32)
    cluster = _backward_cluster(col_blocks, n, dev)
    _act_pass("relu_mask_backward_sum", dx.dtype, col_blocks * cluster, 512, dev, cluster)(
        dx.data.ptr, mask.data.ptr, db.data.ptr, n, k, mask.shape[1])


@functools.lru_cache(maxsize=1024)  # keyed by size: bounded for workloads of many shapes
def _activation_backward_pass(name, dtype, total, dev):
    """The prepared launch of linear_act.cu's ``name`` (relu_mask_backward, gelu_tanh_backward) over ``total``
    elements: (dy, aux, dz, n, m, aux's row length) per call."""
    blocks = min(grid_1d(total, 256), 65535 * 8)
    return Prepared(get_kernel("linear_act.cu", name, (f"-DELEM_T={ctype(dtype)}",)), (blocks,), (256,), (ARG,) * 6)


def _activation_backward_cuda(dy, aux, activation):
    cupy = _cp or _cupy()

    if not dy._c_contiguous:
        dy = cupy.ascontiguousarray(dy)
    n, m = dy.shape
    dev = _dev(dy)
    with _on(dev):
        dz = cupy.ndarray(dy.shape, dy.dtype)
        vector = columns.vector_rows(dy, dz) and (activation == "relu" or columns.vector_rows(aux))
        if n * m and vector:  # (a GELU aux's rows are padded to 8 elements)
            name = "relu_mask_backward_vec" if activation == "relu" else "gelu_tanh_backward_vec"
            _act_pass(name, dy.dtype, min(grid_1d(n * m // 8, 256), 32 * sm_count(dev)), 256, dev)(
                dy.data.ptr, aux.data.ptr, dz.data.ptr, n, m, aux.shape[1])
        elif n * m:
            name = "relu_mask_backward" if activation == "relu" else "gelu_tanh_backward"
            _activation_backward_pass(name, dy.dtype, n * m, dev)(dy.data.ptr, aux.data.ptr, dz.data.ptr, n, m,
                                                                   aux.shape[1])
    return dz


# ====================================================================== layers of few outputs
#: Out features up to which a Linear without activation runs on linear_narrow.cu (a classifier head).
NARROW_MAX_OUT = 16
#: Rows up to which its forward does (a block per few rows; past this cuBLASLt's GEMM reads x faster).
NARROW_MAX_FORWARD_ROWS = 2048
#: Rows up to which its backward does (a cluster of blocks sums all rows of 32 input columns, so its time grows
#: with the rows where cuBLASLt's GEMMs spread them over the GPU).
NARROW_MAX_ROWS = 8192
_NARROW_DTYPES = (backend.float32, backend.float16, backend.bfloat16)
_ACT_CODE = {None: 0, "relu": 1, "gelu": 2}
_MAX_CLUSTER = 8  # the backward's blocks per 32 columns at most (the portable cluster size)


@functools.lru_cache(maxsize=None)
def _narrow_launch(name, dtype, m, act, grid, dev, rows=1, cluster=1):
    """The prepared launch of linear_narrow.cu's ``name`` (its arguments in order, all given per call): the
    forward's blocks of ``rows`` rows, the backward's clusters of ``cluster`` blocks."""
    opts = (f"-DNL_T={ctype(dtype)}", f"-DNL_M={m}", f"-DNL_ACT={_ACT_CODE[act]}", f"-DNL_R={rows}",
            f"-DMF_CLUSTER={cluster}")
    block, args = (256, 8) if name == "narrow_forward" else (512, 15)
    return Prepared(get_kernel("linear_narrow.cu", name, opts), (grid,), (block,), (ARG,) * args, pdl=True)


def _forward_rows(n, m, sms):
    """Rows per forward block: as many as leave a block per SM (each w element is loaded once per block), up to
    64 sums a thread (past that they spill)."""
    fits = [r for r in (1, 2, 4, 8) if r * m <= 64]
    return next((r for r in fits if n <= 2 * r * sms), fits[-1])


def _narrow_forward(x, w, bias):
    cupy = _cp
    n, k = x.shape
    m = w.shape[0]
    dev = _dev(x)
    y = cupy.ndarray((n, m), x.dtype)
    if bias is not None and bias.strides[0] != bias.itemsize and m > 1:
        bias = bias.copy()
    rows = _forward_rows(n, m, sm_count(dev))
    grid = min(-(-n // rows), 65535)
    _narrow_launch("narrow_forward", x.dtype, m, None, grid, dev, rows)(
        x.data.ptr, _ld(x), w.data.ptr, _ld(w), 0 if bias is None else bias.data.ptr, y.data.ptr, n, k)
    return y


def _backward_cluster(col_blocks, n, dev):
    """Blocks per 32 columns of the backward: the most that keep one wave on the GPU's SMs and 32 rows a block
    (1 before sm_90, which has no clusters)."""
    if compute_capability(dev) < 90:
        return 1
    sms = sm_count(dev)
    return next((c for c in (8, 4, 2) if col_blocks * c <= sms and n >= 32 * c), 1)


def _linear_backward_narrow_cuda(dy, x, w, weight_grad, bias_grad, data_grad, act, aux):
    cupy = _cp or _cupy()
    n, m = dy.shape
    k = w.shape[1]
    dtype = dy.dtype
    dev = _dev(dy)
    with _on(dev):
        dw = db = dx = dbx = None
        if weight_grad or bias_grad:  # one allocation for each output's lifetime: the parameters' and dx's
            mem = cupy.cuda.alloc(aligned_bytes(m * k * dtype.itemsize) + m * dtype.itemsize)
            if weight_grad:
                dw = cupy.ndarray((m, k), dtype, memptr=mem)
            if bias_grad:
                db = cupy.ndarray((m,), dtype, memptr=mem + aligned_bytes(m * k * dtype.itemsize))
        if data_grad:
            with_act = act is not None
            mem = cupy.cuda.alloc(aligned_bytes(n * k * dtype.itemsize) + (k * dtype.itemsize if with_act else 0))
            dx = cupy.ndarray((n, k), dtype, memptr=mem)
            if with_act:
                dbx = cupy.ndarray((k,), dtype, memptr=mem + aligned_bytes(n * k * dtype.itemsize))
        else:
            act = None
        flags = (1 if dw is not None else 0) | (2 if db is not None else 0) | (4 if dx is not None else 0)
        if flags:
            col_blocks = -(-k // 32)
            cluster = _backward_cluster(col_blocks, n, dev)
            _narrow_launch("narrow_backward", dtype, m, act, col_blocks * cluster, dev, cluster=cluster)(
                dy.data.ptr, _ld(dy), x.data.ptr, _ld(x), w.data.ptr, _ld(w),
                0 if aux is None else aux.data.ptr, 0 if aux is None else aux.shape[1],
                *(0 if a is None else a.data.ptr for a in (dw, db, dx, dbx)), n, k, flags)
    return dw, db, dx, dbx
