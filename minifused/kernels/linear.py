"""Linear-layer GEMMs with cuBLASLt epilogs, and their NumPy references.

A layer is computed feature-major, as cuBLASLt sees it (column-major):
``Zᵀ = W @ Xᵀ`` with M = out_features, so the bias broadcasts along M and the
(out × batch) column-major result is, in memory, the row-major (batch × out)
array the caller wants. Three primitives cover a Linear's forward and backward:

=================  ==========================================  ============================
primitive          computes                                    epilogs
=================  ==========================================  ============================
``linear_fwd``     ``y = act(x @ w.T + b)`` (+ aux)            DEFAULT, BIAS, RELU(_AUX)_BIAS,
                                                               GELU(_AUX)_BIAS, RELU(_AUX),
                                                               GELU(_AUX)
``linear_dgrad``   ``dx = dy @ w``; with ``act``:              DEFAULT, DRELU_BGRAD,
                   ``dx *= act'(producer aux)``, ``db = Σ dx``  DGELU_BGRAD
``linear_wgrad``   ``dw = dy.T @ x``, ``db = Σ dy``            DEFAULT, BGRADB
``act_backward``   ``dz = dy * act'(aux)`` (elementwise)        (CUDA kernel, matmul_act.cu)
=================  ==========================================  ============================

Aux semantics, the same on both devices (the GPU's own layout, so an aux array
can be handed back to cuBLASLt as is):

* ``relu``: a bit-mask, uint8, shape (batch, ``relu_aux_cols(out)``); bit
  ``j % 8`` (least significant first) of byte ``j // 8`` in row ``i`` is
  ``z[i, j] > 0``. cuBLASLt pads the feature dimension to a multiple of 128 bits.
* ``gelu``: the pre-activation ``z = x @ w.T + b``, in the layer's dtype, shape
  (batch, ``gelu_aux_cols(out)``) (features padded to a multiple of 8; the
  padding columns are unspecified).

GELU here is the tanh approximation, ``0.5 z (1 + tanh(√(2/π) (z + 0.044715 z³)))``,
PyTorch's ``gelu(approximate='tanh')``: it is the form cuBLASLt's GELU epilogs
compute (PyTorch, too, routes only its tanh GELU to those epilogs).

The GPU path calls cuBLASLt through ``nvmath.bindings.cublasLt`` with a cache of
plans (descriptors, layouts and a chosen algorithm), keyed by everything that
determines a plan: device, stream, dtype, problem shape, leading dimensions,
pointer alignments, epilog and math mode. A call on cached shapes does no
planning: it sets at most two pointers on the descriptor and launches. nvmath's
stateful ``Matmul.execute`` costs 66-100 µs of host time per call (FACTS.md);
this path is built to stay within the 40 µs budget of a whole Linear forward.
``clear_plan_cache()`` (also run at exit) releases every descriptor.

Module flags: ``allow_tf32`` (float32 GEMMs may use TF32 tensor cores; off by
default, so float32 is computed in full float32) and ``autotune`` (on a plan's
first use, time the heuristic's top candidates and keep the fastest; off by
default). Small GEMMs (at most ``SMALL_GEMM_FLOP``) are always timed that way: at
MNIST sizes the heuristic's first choice (a split-K kernel family) was measured to
cost 7-10 µs more host time per call than another candidate that is also as fast
or faster on the GPU, and timing the candidates of a small GEMM costs well under a
millisecond, once per plan. The choice is made once per plan and process: within a process
results are bitwise repeatable, but two processes may time their way to different candidates
for one GEMM, whose results can differ in the last bits. ``SMALL_GEMM_FLOP = 0`` keeps the
heuristic's first choice everywhere (the same in every process) at that host-time cost.
``WORKSPACE_LIMIT`` caps the workspace an algorithm may use: one buffer per (device, stream), grown
to the largest need of the plans run on it. All GEMMs accumulate in float32 (float64 on the NumPy
path).
"""
from __future__ import annotations

import atexit
import math

import numpy as np

from .. import backend

allow_tf32 = False
autotune = False
autotune_candidates = 8
SMALL_GEMM_FLOP = 1 << 31  # at or below: always autotuned (cheap, and host time matters there)
WORKSPACE_LIMIT = 256 * 1024 * 1024  # the most workspace a plan may ask for (allocated on demand)

ACTIVATIONS = (None, "relu", "gelu")
_GELU_C = math.sqrt(2.0 / math.pi)


def relu_aux_cols(m: int) -> int:
    """Bytes per row of the ReLU bit-mask for ``m`` features (padded to 128 bits)."""
    return -(-m // 128) * 16


def gelu_aux_cols(m: int) -> int:
    """Columns of the GELU pre-activation aux for ``m`` features (padded to 8)."""
    return -(-m // 8) * 8


# ====================================================================== NumPy references
def _f64(a):
    return np.asarray(a).astype(np.float64)


def _gelu(z):
    return 0.5 * z * (1.0 + np.tanh(_GELU_C * (z + 0.044715 * z ** 3)))


def _dgelu(z):
    t = np.tanh(_GELU_C * (z + 0.044715 * z ** 3))
    return 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * _GELU_C * (1.0 + 3 * 0.044715 * z * z)


def _pack_mask(z):
    """(n, m) boolean ``z > 0`` as the bit-mask layout described in the module docstring
    (NumPy or CuPy, as ``z``)."""
    xp = backend.array_module(z)
    n, m = z.shape
    bits = xp.zeros((n, relu_aux_cols(m) * 8), dtype=np.uint8)
    bits[:, :m] = z > 0
    # little-endian bit order within each byte (CuPy's packbits has no axis option)
    return (bits.reshape(n, relu_aux_cols(m), 8) << xp.arange(8, dtype=np.uint8)).sum(axis=2, dtype=np.uint8)


def _unpack_mask(mask, m):
    return np.unpackbits(np.asarray(mask), axis=1, count=m, bitorder="little").astype(bool)


def _pad_cols(a, cols):
    out = np.zeros((a.shape[0], cols), dtype=a.dtype)
    out[:, : a.shape[1]] = a
    return out


def linear_fwd_ref(x, w, bias=None, activation=None, aux=False):
    """NumPy reference of :func:`linear_fwd` (float64 inside, the input dtype out)."""
    dtype = x.dtype
    z = _f64(x) @ _f64(w).T
    if bias is not None:
        z = z + _f64(bias)
    a = None
    if activation == "relu":
        y = np.maximum(z, 0.0)
        if aux:
            a = _pack_mask(z)
    elif activation == "gelu":
        y = _gelu(z)
        if aux:
            a = _pad_cols(z.astype(dtype), gelu_aux_cols(z.shape[1]))
    else:
        y = z
    return y.astype(dtype), a


def act_backward_ref(dy, aux, activation):
    """NumPy reference of :func:`act_backward`: ``dy * act'(z)`` from the forward's aux."""
    m = dy.shape[1]
    if activation == "relu":
        return np.where(_unpack_mask(aux, m), dy, np.zeros((), dy.dtype)).astype(dy.dtype)
    return (_f64(dy) * _dgelu(_f64(np.asarray(aux)[:, :m]))).astype(dy.dtype)


def linear_dgrad_ref(dy, w, act=None, aux=None):
    """NumPy reference of :func:`linear_dgrad`."""
    dx = _f64(dy) @ _f64(w)
    if act is None:
        return dx.astype(dy.dtype), None
    k = dx.shape[1]
    if act == "relu":
        dx = np.where(_unpack_mask(aux, k), dx, 0.0)
    else:
        dx = dx * _dgelu(_f64(np.asarray(aux)[:, :k]))
    return dx.astype(dy.dtype), dx.sum(axis=0).astype(dy.dtype)


def linear_wgrad_ref(dy, x, bias_grad=False):
    """NumPy reference of :func:`linear_wgrad`."""
    dw = (_f64(dy).T @ _f64(x)).astype(dy.dtype)
    db = _f64(dy).sum(axis=0).astype(dy.dtype) if bias_grad else None
    return dw, db


# ====================================================================== public primitives
def linear_fwd(x, w, bias=None, activation=None, aux=False):
    """``y = act(x @ w.T + bias)`` and, with ``aux=True`` and an activation, its aux.

    ``x`` (n, k) with unit stride along k, ``w`` (out, k) with unit stride along k,
    ``bias`` (out,) contiguous or None, all of one dtype. Returns ``(y, aux)`` with
    ``y`` a contiguous (n, out) array and ``aux`` None without an activation or aux.
    """
    if not backend.is_cuda_array(x):
        return linear_fwd_ref(x, w, bias, activation, aux)
    return _gpu_fwd(x, w, bias, activation, aux)


def linear_dgrad(dy, w, act=None, aux=None):
    """``dx = dy @ w`` for a layer of weight ``w`` (out, k) and output gradient ``dy`` (n, out).

    With ``act`` ('relu' or 'gelu') and ``aux`` (the aux of the Linear that produced
    this layer's input, of k features), the activation's backward is fused into the
    GEMM (DRELU_BGRAD / DGELU_BGRAD): returns ``(dz, db)``, the producer's
    pre-activation gradient and its bias gradient ``dz.sum(0)``. Without ``act``
    returns ``(dx, None)``.
    """
    if not backend.is_cuda_array(dy):
        return linear_dgrad_ref(dy, w, act, aux)
    return _gpu_dgrad(dy, w, act, aux)


def linear_wgrad(dy, x, bias_grad=False):
    """``dw = dy.T @ x`` (out, k) and, with ``bias_grad``, ``db = dy.sum(0)`` from the same GEMM."""
    if not backend.is_cuda_array(dy):
        return linear_wgrad_ref(dy, x, bias_grad)
    return _gpu_wgrad(dy, x, bias_grad)


def act_backward(dy, aux, activation):
    """``dz = dy * act'(z)`` from a forward's aux (bit-mask or pre-activation); ``dy`` (n, m)."""
    if not backend.is_cuda_array(dy):
        return act_backward_ref(dy, aux, activation)
    return _gpu_act_backward(dy, aux, activation)


# ====================================================================== cuBLASLt plans
_lt = None  # nvmath.bindings.cublasLt, imported on first GPU use
_handles = {}  # device id -> cublasLt handle
_workspaces = {}  # (device id, stream ptr) -> cupy array
_plans = {}  # key -> _Plan
_stats = {"created": 0, "hits": 0, "autotuned": 0, "bgradb_fallbacks": 0, "dgrad_bgrad_fallbacks": 0,
          "aux_fallbacks": 0}
_unsupported = set()  # plan keys cuBLASLt refused (e.g. BGRADB): callers fall back

_OP_N, _OP_T = 0, 1
_CUDA_TYPE = {}  # numpy dtype -> cudaDataType
_EPI = {}  # name -> cublasLtEpilogue_t value
_ATTR = {}  # name -> cublasLtMatmulDescAttributes_t value
_BIAS_POINTER = _AUX_POINTER = None
_cp = None  # cupy, once a GPU path ran
_UINT8 = np.dtype(np.uint8)


def _init():
    global _lt
    if _lt is not None:
        return _lt
    from nvmath.bindings import cublasLt as lt

    _CUDA_TYPE.update({backend.float16: 2, backend.bfloat16: 14, backend.float32: 0, backend.float64: 1})
    _EPI.update({e.name: int(e) for e in lt.Epilogue})
    _ATTR.update({a.name: int(a) for a in lt.MatmulDescAttribute})
    global _BIAS_POINTER, _AUX_POINTER, _cp
    _BIAS_POINTER, _AUX_POINTER = _ATTR["BIAS_POINTER"], _ATTR["EPILOGUE_AUX_POINTER"]
    import cupy

    _cp = cupy
    _lt = lt
    return lt


class PlanError(RuntimeError):
    """cuBLASLt found no algorithm for (or rejected) a GEMM configuration."""


def _align(ptr: int) -> int:
    return 256 if ptr % 256 == 0 else (ptr & -ptr)


class _Plan:
    """One planned GEMM: descriptor, layouts, algorithm, scalars; launched by :meth:`run`.

    Column-major, cuBLASLt's view: ``D (m × n) = epi(op(A) @ op(B))``.
    """

    __slots__ = ("handle", "desc", "layouts", "a_layout", "b_layout", "d_layout", "pref",
                 "algos", "algo_ptr", "ws_size", "scalars", "alpha_ptr", "beta_ptr",
                 "ptrbuf", "ptrbuf_addr", "has_bias_ptr", "has_aux_ptr", "key", "__weakref__")

    def __init__(self, key, handle, dtype, transa, transb, m, n, k, lda, ldb, ldd,
                 epilogue, aux_ld, aligns, tf32, ws_bytes, tune):
        lt = _lt
        self.key = key
        self.handle = handle
        self.desc = self.pref = None
        self.layouts = []
        ctype = _CUDA_TYPE[dtype]
        if dtype == backend.float64:
            compute, scale_np = 70, np.float64  # CUBLAS_COMPUTE_64F
        else:
            compute, scale_np = (77 if tf32 and dtype == backend.float32 else 68), np.float32
        scale_type = 1 if scale_np is np.float64 else 0
        try:
            self.desc = lt.matmul_desc_create(compute, scale_type)
            self._set("TRANSA", np.int32(transa))
            self._set("TRANSB", np.int32(transb))
            self._set("EPILOGUE", np.uint32(_EPI[epilogue]))
            if aux_ld:
                self._set("EPILOGUE_AUX_LD", np.int64(aux_ld))
                if "GELU" in epilogue:
                    self._set("EPILOGUE_AUX_DATA_TYPE", np.int32(ctype))
            self.has_bias_ptr = epilogue in ("BIAS", "RELU_BIAS", "RELU_AUX_BIAS", "GELU_BIAS",
                                             "GELU_AUX_BIAS", "DRELU_BGRAD", "DGELU_BGRAD", "BGRADB")
            self.has_aux_ptr = bool(aux_ld)
            ar, ac = (m, k) if transa == _OP_N else (k, m)
            br, bc = (k, n) if transb == _OP_N else (n, k)
            self.a_layout = lt.matrix_layout_create(ctype, ar, ac, lda)
            self.layouts.append(self.a_layout)
            self.b_layout = lt.matrix_layout_create(ctype, br, bc, ldb)
            self.layouts.append(self.b_layout)
            self.d_layout = lt.matrix_layout_create(ctype, m, n, ldd)
            self.layouts.append(self.d_layout)

            self.pref = lt.matmul_preference_create()
            P = lt.MatmulPreferenceAttribute
            for attr, val in ((P.MAX_WORKSPACE_BYTES, ws_bytes), (P.MIN_ALIGNMENT_A_BYTES, aligns[0]),
                              (P.MIN_ALIGNMENT_B_BYTES, aligns[1]), (P.MIN_ALIGNMENT_C_BYTES, 256),
                              (P.MIN_ALIGNMENT_D_BYTES, 256)):
                buf = np.array([val], dtype=lt.get_matmul_preference_attribute_dtype(attr))
                lt.matmul_preference_set_attribute(self.pref, attr, buf.ctypes.data, buf.itemsize)
            want = max(1, autotune_candidates if tune else 1)
            self.algos = np.zeros(want, dtype=lt.matmul_heuristic_result_dtype)
            count = np.zeros(1, dtype=np.int32)
            try:
                lt.matmul_algo_get_heuristic(handle, self.desc, self.a_layout, self.b_layout,
                                             self.d_layout, self.d_layout, self.pref, want,
                                             self.algos.ctypes.data, count.ctypes.data)
            except lt.cuBLASLtError as e:
                raise PlanError(f"cuBLASLt rejected {epilogue} for {key}: {e}") from None
            found = int(count[0])
            if found == 0:
                raise PlanError(f"cuBLASLt found no algorithm for {epilogue} with {key}")
            self.algos = self.algos[:found]
            if found > 1 and dtype in (backend.float16, backend.bfloat16):
                # candidates for timing: no split-K that adds its partial sums in the 16-bit output
                # type (in place or in an output-type workspace): measurably less accurate (a 1.9%
                # error in a fp16 dX at 65x100x784). The heuristic's own first choice stays.
                keep = [0] + [i for i in range(1, found) if not _reduces_in_output_type(self.algos, i)]
                self.algos = np.ascontiguousarray(self.algos[keep])
            self.algo_ptr = self.algos.ctypes.data
            # enough for any candidate (autotuning may switch), +16 bytes as nvmath does for epilogs
            self.ws_size = int(self.algos["workspace_size"].max()) + 16
        except BaseException:
            self.free()
            raise
        self.scalars = np.array([1.0, 0.0], dtype=scale_np)
        self.alpha_ptr = self.scalars.ctypes.data
        self.beta_ptr = self.alpha_ptr + self.scalars.itemsize
        self.ptrbuf = np.full(2, -1, dtype=np.int64)  # pointers last set on the descriptor
        self.ptrbuf_addr = self.ptrbuf.ctypes.data

    def _set(self, name, value):
        buf = np.array([value])
        _lt.matmul_desc_set_attribute(self.desc, _ATTR[name], buf.ctypes.data, buf.itemsize)

    def choose(self, index):
        self.algo_ptr = self.algos.ctypes.data + index * self.algos.itemsize

    def run(self, a, b, d, bias_ptr, aux_ptr, ws, ws_bytes, stream):
        lt = _lt
        ptrs = self.ptrbuf
        if self.has_bias_ptr and ptrs[0] != bias_ptr:  # memory pools hand back the same blocks:
            ptrs[0] = bias_ptr                          # most calls change no pointer
            lt.matmul_desc_set_attribute(self.desc, _BIAS_POINTER, self.ptrbuf_addr, 8)
        if self.has_aux_ptr and ptrs[1] != aux_ptr:
            ptrs[1] = aux_ptr
            lt.matmul_desc_set_attribute(self.desc, _AUX_POINTER, self.ptrbuf_addr + 8, 8)
        lt.matmul(self.handle, self.desc, self.alpha_ptr, a, self.a_layout, b, self.b_layout,
                  self.beta_ptr, d, self.d_layout, d, self.d_layout, self.algo_ptr,
                  ws, ws_bytes, stream)

    def free(self):
        lt = _lt
        if lt is None:
            return
        for lay in self.layouts:
            lt.matrix_layout_destroy(lay)
        self.layouts = []
        if self.pref is not None:
            lt.matmul_preference_destroy(self.pref)
            self.pref = None
        if self.desc is not None:
            lt.matmul_desc_destroy(self.desc)
            self.desc = None


def _reduces_in_output_type(algos, i):
    """Whether candidate ``i`` is split-K with its reduction in the output type (schemes INPLACE = 1,
    OUTPUT_TYPE = 4), rather than none (0) or in the compute type (2)."""
    lt = _lt
    base = algos.ctypes.data + i * algos.itemsize
    vals = []
    for attr in (lt.MatmulAlgoConfigAttribute.SPLITK_NUM, lt.MatmulAlgoConfigAttribute.REDUCTION_SCHEME):
        buf = np.zeros(1, dtype=lt.get_matmul_algo_config_attribute_dtype(attr))
        written = np.zeros(1, np.uint64)
        lt.matmul_algo_config_get_attribute(base, attr, buf.ctypes.data, buf.itemsize, written.ctypes.data)
        vals.append(int(buf[0]))
    return vals[0] > 1 and vals[1] in (1, 4)


def _handle(dev_id):
    h = _handles.get(dev_id)
    if h is None:
        import cupy

        with cupy.cuda.Device(dev_id):
            h = _handles[dev_id] = _init().create()
    return h


def _workspace(dev_id, stream_ptr, need):
    """The workspace of (device, stream), at least ``need`` bytes. A grown buffer replaces the
    old one, which goes back to CuPy's pool in stream order (only this stream used it)."""
    ws = _workspaces.get((dev_id, stream_ptr))
    if ws is None or ws.nbytes < need:
        import cupy

        size = -(-max(need, 1 << 20) // (1 << 20)) << 20
        with cupy.cuda.Device(dev_id):
            ws = _workspaces[(dev_id, stream_ptr)] = cupy.empty(size, dtype=cupy.uint8)
    return ws


def _get_plan(key, dev_id, stream_ptr, *args):
    plan = _plans.get(key)
    if plan is not None:
        _stats["hits"] += 1
        return plan, False
    if key in _unsupported:
        raise PlanError(f"unsupported: {key}")
    _init()
    m, n, k = args[3:6]
    tune = autotune or 2 * m * n * k <= SMALL_GEMM_FLOP
    try:
        plan = _Plan(key, _handle(dev_id), *args, ws_bytes=WORKSPACE_LIMIT, tune=tune)
    except PlanError:
        _unsupported.add(key)
        raise
    _plans[key] = plan
    _stats["created"] += 1
    return plan, True


def _autotune(plan, launch, rounds=2, runs=3):
    """Time each candidate algorithm with CUDA events, round-robin (so clock drift favours
    none), and keep the fastest. Runs once, when the plan is made; never on the hot path."""
    cupy = _cp
    if len(plan.algos) < 2:
        return
    ok = [i for i in range(len(plan.algos)) if int(plan.algos["state"][i]) == 0]
    best_t = {i: float("inf") for i in ok}
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    for _ in range(rounds):
        for i in list(best_t):
            plan.choose(i)
            try:
                launch()
                start.record()
                for _ in range(runs):
                    launch()
                stop.record()
                stop.synchronize()
            except Exception:  # a candidate that fails to launch is dropped
                del best_t[i]
                continue
            best_t[i] = min(best_t[i], cupy.cuda.get_elapsed_time(start, stop))
    best = min(best_t, key=best_t.get) if best_t else 0
    plan.choose(best)
    launch()  # leave the output written by the chosen algorithm
    _stats["autotuned"] += 1


def _keep_correct(key, plan, launch, check):
    """Drop the candidates whose output fails the check; raise :class:`PlanError` (and mark the
    configuration unsupported) if none passes. ``check`` is ``(poison, verify)``: each candidate runs
    on poisoned outputs, then ``verify()`` judges them. cuBLASLt offered BGRADB candidates that left
    the bias gradient (partly) unwritten on tiny GEMMs (fp16, 2 x 1 inputs); which one autotuning
    picked varied by run."""
    poisons, verify = check
    poisons = (poisons,) if callable(poisons) else poisons
    good = []
    for i in range(len(plan.algos)):
        plan.choose(i)
        passed = True
        for poison in poisons:  # two opposite poisons: an unwritten output cannot match both
            poison()
            launch()
            passed = passed and verify()
        if passed:
            good.append(i)
    if not good:
        del _plans[key]
        plan.free()
        _unsupported.add(key)
        raise PlanError(f"no cuBLASLt candidate passed the output check for {key}")
    plan.algos = np.ascontiguousarray(plan.algos[good])
    plan.choose(0)
    launch()


def _execute(key, plan_args, a, b, d, bias_ptr=0, aux_ptr=0, check=None):
    """Run the GEMM of ``key`` (planned on first use). ``check``, if given, is ``(poison, verify)``
    (see :func:`_keep_correct`): a new plan keeps only the candidates that pass it."""
    dev_id, sptr = key[0], key[1]
    plan, new = _get_plan(key, dev_id, sptr, *plan_args)
    ws = _workspace(dev_id, sptr, plan.ws_size)
    wsp, wsn = ws.data.ptr, ws.nbytes
    dp = d.data.ptr
    plan.run(a, b, dp, bias_ptr, aux_ptr, wsp, wsn, sptr)
    # a new plan is checked and, if it asked for candidates, timed, except inside a graph capture
    # (both synchronize): there it keeps the heuristic's first choice
    if new and not backend.is_capturing():
        def launch():
            plan.run(a, b, dp, bias_ptr, aux_ptr, wsp, wsn, sptr)

        if check is not None:
            _keep_correct(key, plan, launch, check)
        if len(plan.algos) > 1:
            small = (3, 10) if autotune is False else (2, 3)  # small GEMMs: more, cheap samples
            _autotune(plan, launch, *small)


class _NoSwitch:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NO_SWITCH = _NoSwitch()


def _on(dev_id):
    """Make ``dev_id`` current for allocations (no call into CUDA when it already is)."""
    cupy = _cp
    return _NO_SWITCH if cupy.cuda.runtime.getDevice() == dev_id else cupy.cuda.Device(dev_id)


def _ld(arr):
    """Leading dimension (elements) of a row-major matrix with unit inner stride."""
    n, k = arr.shape
    ld = arr.strides[0] // arr.itemsize
    return ld if n > 1 and ld >= k else k


def _dev(arr):
    return arr.data.device_id


def _tf32(dtype):
    return allow_tf32 and dtype == backend.float32


_FWD_EPI = {
    (None, False, False): "DEFAULT", (None, True, False): "BIAS",
    ("relu", False, False): "RELU", ("relu", True, False): "RELU_BIAS",
    ("relu", False, True): "RELU_AUX", ("relu", True, True): "RELU_AUX_BIAS",
    ("gelu", False, False): "GELU", ("gelu", True, False): "GELU_BIAS",
    ("gelu", False, True): "GELU_AUX", ("gelu", True, True): "GELU_AUX_BIAS",
}


def _gpu_fwd(x, w, bias, activation, aux):
    cupy = _cp or _init() and _cp

    n, k = x.shape
    m = w.shape[0]
    want_aux = bool(aux) and activation is not None
    epi = _FWD_EPI[(activation, bias is not None, want_aux)]
    dtype = x.dtype
    dev = _dev(x)
    if cupy.cuda.runtime.getDevice() != dev:
        with cupy.cuda.Device(dev):
            return _gpu_fwd(x, w, bias, activation, aux)
    a = None
    aux_ld = 0
    if want_aux:  # one allocation for the output and its aux (each allocation costs ~3-5 µs)
        if activation == "relu":
            cols = relu_aux_cols(m)
            aux_dtype, aux_ld = _UINT8, cols * 8
        else:
            aux_dtype = dtype
            cols = aux_ld = gelu_aux_cols(m)
        y_bytes = -(-(n * m * dtype.itemsize) // 256) * 256  # the aux starts 256-byte aligned
        mem = cupy.cuda.alloc(y_bytes + n * cols * aux_dtype.itemsize)
        y = cupy.ndarray((n, m), dtype, memptr=mem)
        a = cupy.ndarray((n, cols), aux_dtype, memptr=mem + y_bytes)
    else:
        y = cupy.ndarray((n, m), dtype)
    if n == 0 or m == 0:
        return y, a
    if k == 0:  # an empty sum: act(bias) (cuBLASLt needs k >= 1)
        z = cupy.zeros((n, m), dtype=dtype) if bias is None else cupy.broadcast_to(bias, (n, m))
        return _host_act(z, activation, a)
    lda, ldb = _ld(w), _ld(x)
    wp, xp_ = w.data.ptr, x.data.ptr
    al = (_align(wp), _align(xp_))
    tf = _tf32(dtype)
    key = (dev, cupy.cuda.get_current_stream().ptr, "fwd", epi, dtype, m, n, k, lda, ldb, al, tf)
    args = (dtype, _OP_T, _OP_N, m, n, k, lda, ldb, m, epi, aux_ld, al, tf)
    bias_ptr = 0
    if bias is not None:
        if bias.data.ptr % 16:  # an unaligned view: give cuBLASLt an aligned copy
            bias = bias.copy()
        bias_ptr = bias.data.ptr
    check = None
    if a is not None:  # a new plan keeps the candidates whose aux matches their output (see _keep_correct)
        if activation == "relu":
            def aux_right():  # run after each poison (ones, then zeros: an unwritten bit fails one of them)
                return _relu_mask_right(x, w, bias, y, a)

            check = ((lambda: (y.fill(np.nan), a.fill(255)), lambda: (y.fill(np.nan), a.fill(0))), aux_right)
        else:
            def aux_right():  # gelu of the saved pre-activation is the output
                z, yf = a[:, :m].astype(cupy.float32), y.astype(cupy.float32)
                ref = 0.5 * z * (1 + cupy.tanh(_GELU_C * (z + 0.044715 * z ** 3)))
                scale = float(cupy.abs(yf).max()) + 1e-3  # NaN (unwritten): the comparison is False
                return bool(cupy.isfinite(z).all()) and float(cupy.abs(ref - yf).max()) <= 1e-2 * scale

            check = (lambda: (y.fill(np.nan), a.fill(np.nan)), aux_right)
    try:
        _execute(key, args, wp, xp_, y, bias_ptr, 0 if a is None else a.data.ptr, check=check)
    except PlanError:
        if a is None:
            raise
        # no candidate of this epilogue passed: the plain GEMM (+ bias), the activation and its aux apart
        _stats["aux_fallbacks"] += 1
        z, _ = _gpu_fwd(x, w, bias, None, False)
        return _host_act(z, activation, a)
    return y, a


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
        y = 0.5 * zf * (1 + cupy.tanh(_GELU_C * (zf + 0.044715 * zf ** 3)))
        if a is not None:
            a[:, : z.shape[1]] = z
    else:
        y = zf
    return cupy.ascontiguousarray(y.astype(z.dtype)), a


def _gpu_dgrad(dy, w, act, aux):
    cupy = _cp or _init() and _cp

    n, m = dy.shape
    k = w.shape[1]
    dtype = dy.dtype
    dev = _dev(dy)
    with _on(dev):
        if m == 0 or n == 0 or k == 0:
            dx = cupy.zeros((n, k), dtype=dtype)
            return dx, (None if act is None else cupy.zeros((k,), dtype=dtype))
        dx = cupy.empty((n, k), dtype=dtype)
        db = None
        aux_ld = 0
        epi = "DEFAULT"
        if act is not None:
            db = cupy.empty((k,), dtype=dtype)
            epi = "DRELU_BGRAD" if act == "relu" else "DGELU_BGRAD"
            aux_ld = relu_aux_cols(k) * 8 if act == "relu" else gelu_aux_cols(k)
        # cuBLASLt: D = dxᵀ (k × n) = op(A) (k × m) @ op(B) (m × n); A = w as stored
        # (col-major k × m), B = dy as stored (col-major m × n).
        lda, ldb = _ld(w), _ld(dy)
        wp, dyp = w.data.ptr, dy.data.ptr
        tf = _tf32(dtype)
        key = (dev, cupy.cuda.get_current_stream().ptr, "dgrad", epi, dtype, k, n, m, lda, ldb,
               _align(wp), _align(dyp), tf)
        args = (dtype, _OP_N, _OP_N, k, n, m, lda, ldb, k, epi, aux_ld, (_align(wp), _align(dyp)), tf)
        check = None
        if db is not None:
            def db_right():  # against a column sum of the dz written (NaN anywhere: False)
                ref = dx.sum(axis=0, dtype=cupy.float32)
                scale = float(cupy.abs(dx).sum(axis=0, dtype=cupy.float32).max()) + 1e-30
                return float(cupy.abs(db.astype(cupy.float32) - ref).max()) <= 1e-2 * scale

            check = (lambda: (dx.fill(np.nan), db.fill(np.nan)), db_right)
        try:
            _execute(key, args, wp, dyp, dx, 0 if db is None else db.data.ptr,
                     0 if aux is None else aux.data.ptr, check=check)
        except PlanError:
            if act is None:
                raise
            # no candidate of this epilogue passed (or cuBLASLt has none): the plain GEMM, then the
            # activation's backward and the column sum
            _stats["dgrad_bgrad_fallbacks"] += 1
            dx, _ = _gpu_dgrad(dy, w, None, None)
            dz = _gpu_act_backward(dx, aux, act)
            return dz, dz.sum(axis=0, dtype=cupy.float32).astype(dtype)
    return dx, db


def _gpu_wgrad(dy, x, bias_grad):
    cupy = _cp or _init() and _cp

    n, m = dy.shape
    k = x.shape[1]
    dtype = dy.dtype
    dev = _dev(dy)
    with _on(dev):
        if n == 0 or m == 0 or k == 0:  # nothing for cuBLASLt; the bias gradient may still be nonzero
            dw = cupy.zeros((m, k), dtype=dtype)
            return dw, (dy.sum(axis=0, dtype=cupy.float32).astype(dtype) if bias_grad else None)
        dw = cupy.empty((m, k), dtype=dtype)
        # cuBLASLt: D = dwᵀ (k × m) = op(A) (k × n) @ op(B) (n × m); A = x as stored
        # (col-major k × n), B = dy as stored (col-major m × n), transposed. BGRADB sums
        # op(B) over the GEMM's k (the batch): the bias gradient, length m.
        lda, ldb = _ld(x), _ld(dy)
        xp_, dyp = x.data.ptr, dy.data.ptr
        tf = _tf32(dtype)
        stream_ptr = cupy.cuda.get_current_stream().ptr
        base = (dev, stream_ptr, "wgrad")
        tail = (dtype, k, m, n, lda, ldb, _align(xp_), _align(dyp), tf)
        if bias_grad:
            key = base + ("BGRADB",) + tail
            if key not in _unsupported:
                db = cupy.empty((m,), dtype=dtype)
                args = (dtype, _OP_N, _OP_T, k, m, n, lda, ldb, k, "BGRADB", 0,
                        (_align(xp_), _align(dyp)), tf)

                def db_right():  # against a plain column sum, to fp32 rounding of the magnitudes summed
                    ref = dy.sum(axis=0, dtype=cupy.float32)
                    scale = float(cupy.abs(dy).sum(axis=0, dtype=cupy.float32).max()) + 1e-30
                    return float(cupy.abs(db.astype(cupy.float32) - ref).max()) <= 1e-2 * scale  # NaN: False

                try:
                    _execute(key, args, xp_, dyp, dw, db.data.ptr, 0, check=(lambda: db.fill(np.nan), db_right))
                    return dw, db
                except PlanError:  # this configuration has no BGRADB kernel: GEMM + a reduction
                    _stats["bgradb_fallbacks"] += 1
        key = base + ("DEFAULT",) + tail
        args = (dtype, _OP_N, _OP_T, k, m, n, lda, ldb, k, "DEFAULT", 0,
                (_align(xp_), _align(dyp)), tf)
        _execute(key, args, xp_, dyp, dw)
        db = dy.sum(axis=0, dtype=cupy.float32).astype(dtype) if bias_grad else None
    return dw, db


def _gpu_act_backward(dy, aux, activation):
    import cupy

    from . import get_kernel

    dy = cupy.ascontiguousarray(dy)
    n, m = dy.shape
    dz = cupy.empty_like(dy)
    total = n * m
    if total == 0:
        return dz
    tname = {backend.float16: "__half", backend.bfloat16: "__nv_bfloat16",
             backend.float32: "float", backend.float64: "double"}[dy.dtype]
    name = "relu_mask_bwd" if activation == "relu" else "gelu_bwd"
    kern = get_kernel("matmul_act.cu", name, (f"-DELEM_T={tname}",))
    threads = 256
    blocks = min(-(-total // threads), 65535 * 8)
    with _on(_dev(dy)):
        kern((blocks,), (threads,), (dy, aux, dz, np.int64(n), np.int64(m), np.int64(aux.shape[1])))
    return dz


# ====================================================================== cache management
def plan_cache_info() -> dict:
    """``{'size', 'created', 'hits', 'autotuned', 'bgradb_fallbacks', 'dgrad_bgrad_fallbacks',
    'aux_fallbacks'}``: plans held, planned so far, cache hits, plans autotuned, wgrad calls that found no
    BGRADB kernel (GEMM + sum instead), fused-activation dgrad calls that found no DRELU_BGRAD / DGELU_BGRAD
    kernel (GEMM, the activation's backward and a sum instead), forwards that found no RELU_AUX / GELU_AUX
    kernel writing a right aux (GEMM, then the activation and its aux apart)."""
    return {"size": len(_plans), **_stats}


def clear_plan_cache() -> None:
    """Release every plan, workspace and handle (descriptors are destroyed)."""
    for plan in _plans.values():
        plan.free()
    _plans.clear()
    _unsupported.clear()
    _workspaces.clear()
    if _lt is not None:
        for h in _handles.values():
            try:
                _lt.destroy(h)
            except Exception:  # pragma: no cover - at interpreter exit the driver may be gone
                pass
    _handles.clear()


atexit.register(clear_plan_cache)
