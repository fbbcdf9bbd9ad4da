"""cuBLASLt plans for the Linear GEMMs (:mod:`.linear`): handles, workspaces, the plan cache, the
algorithm candidates' correctness checks and their timing.

cuBLASLt is called through ``nvmath.bindings.cublasLt`` with a cache of plans (descriptors,
layouts and a chosen algorithm), keyed by everything that determines a plan: device, stream,
dtype, problem shape, leading dimensions, pointer alignments, epilog, math mode and the
:class:`GemmConfig` (the caller builds the key). A call on cached shapes does no planning: it
sets at most two pointers on the descriptor and launches. nvmath's stateful ``Matmul.execute``
costs several times a whole Linear forward's host time (``bench/linear.py`` times both), hence
this path. :func:`clear_plan_cache` (also run at exit) releases every descriptor.

A new plan asks the heuristic for one algorithm, or for ``GemmConfig.candidates`` of them when it
is to be timed (:func:`_autotune`: the fastest is kept): with ``GemmConfig.autotune``, and always
for a GEMM of at most ``GemmConfig.small_gemm_flop`` flop. At MNIST sizes the heuristic's first
choice (a split-K kernel family) was measured to cost more host time per call than another
candidate as fast on the GPU (``bench/linear_profile.py``), and timing a small GEMM's candidates
is cheap, once per plan. The choice is made once per plan and process: within a process results
are bitwise repeatable, but two processes may time their way to different candidates for one
GEMM, whose results can differ in the last bits; ``small_gemm_flop=0`` keeps the heuristic's first
choice everywhere (the same in every process) at that host-time cost. Plans are per stream (a call sets
pointers on its plan's descriptor), but the choice is per problem: a plan made for another stream (a
captured step's warm-up on its capture stream) takes the algorithm already chosen for the same GEMM
on any stream, untimed, so a captured step computes bitwise what the eager one does. Timed apart, two
streams' plans could keep different candidates, picked by timing noise. (Measured no faster: asking the
heuristic for more than 8 candidates, which it does not return for these GEMMs, and timing each
candidate also with 2-32 split-K slices (``matmul_algo_check``'d), up to 100 per plan: the MNIST MLP's
captured step within noise at batch 64 and 256, 3-4% faster at 1024, for ten times the planning time.
Nor a SIMT fp32 GEMM of our own, written to replace these plans on the MNIST MLP's batch-256 GEMMs (where
the fp32 kernels cuBLASLt picks run at 24-33 TFLOP/s, under half the FFMA peak, and add split-K reduction
and epilogue kernels): 32-128 x 64-128 tiles of 4x4 to 8x8 outputs a thread, double-buffered, unsplit or
split-K summed through a workspace or over a thread-block cluster's shared memory, at 0.94-1.07x PyTorch's
cuBLAS GEMM on each of the five shapes.) ``WORKSPACE_LIMIT`` caps the workspace an algorithm may use: one
buffer per (device, stream), grown to the largest need of the plans run on it.
"""
from __future__ import annotations

import atexit
from dataclasses import dataclass

import numpy as np

from .. import backend

WORKSPACE_LIMIT = 256 * 1024 * 1024  # the most workspace a plan may ask for (allocated on demand)


@dataclass(frozen=True)
class GemmConfig:
    """How a new plan picks its algorithm (plans are keyed by the config they were made with).

    ``autotune``: time the heuristic's top ``candidates`` and keep the fastest, for every GEMM;
    GEMMs of at most ``small_gemm_flop`` (2·m·n·k) are timed whatever ``autotune`` says."""

    autotune: bool = False
    candidates: int = 8
    small_gemm_flop: int = 1 << 31


#: The configuration of calls that pass none (``config=None``).
DEFAULT_CONFIG = GemmConfig()

OP_N, OP_T = 0, 1  # cublasOperation_t

_lt = None  # nvmath.bindings.cublasLt, imported on first GPU use
_handles = {}  # device id -> cublasLt handle
_workspaces = {}  # (device id, stream ptr) -> cupy array
_plans = {}  # key -> _Plan
_choices = {}  # (key without its stream, for graphs) -> the one-row heuristic result a checked, timed plan kept
_stats = {"created": 0, "hits": 0, "autotuned": 0, "bgradb_fallbacks": 0, "dgrad_bgrad_fallbacks": 0,
          "aux_fallbacks": 0}
#: Plan keys cuBLASLt refused (e.g. BGRADB): callers check it to fall back without trying.
unsupported = set()

_CUDA_TYPE = {}  # numpy dtype -> cudaDataType
_EPI = {}  # name -> cublasLtEpilogue_t value
_ATTR = {}  # name -> cublasLtMatmulDescAttributes_t value
_BIAS_POINTER = _AUX_POINTER = None
_cp = None  # cupy, once a GPU path ran
_BIAS_EPILOGS = frozenset(("BIAS", "RELU_BIAS", "RELU_AUX_BIAS", "GELU_BIAS", "GELU_AUX_BIAS", "DRELU_BGRAD",
                           "DGELU_BGRAD", "BGRADB"))


def init():
    """Import ``nvmath.bindings.cublasLt`` and CuPy once; returns the bindings."""
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


def count(event: str) -> None:
    """Count a fallback (see :func:`plan_cache_info`)."""
    _stats[event] += 1


class PlanError(RuntimeError):
    """cuBLASLt found no algorithm for (or rejected) a GEMM configuration."""


class _Plan:
    """One planned GEMM: descriptor, layouts, algorithm, scalars; launched by :meth:`run`.

    Column-major, cuBLASLt's view: ``D (m × n) = epi(op(A) @ op(B))``.
    """

    __slots__ = ("handle", "desc", "layouts", "a_layout", "b_layout", "d_layout", "pref",
                 "algos", "algo_ptr", "ws_size", "scalars", "alpha_ptr", "beta_ptr",
                 "ptrbuf", "ptrbuf_addr", "has_bias_ptr", "has_aux_ptr", "key", "chosen", "__weakref__")

    def __init__(self, key, handle, dtype, transa, transb, m, n, k, lda, ldb, ldd,
                 epilogue, aux_ld, aligns, tf32, batch=None, *, ws_bytes, want, algos=None):
        self.key = key
        self.handle = handle
        self.chosen = 0  # the index in algos that run() launches
        self.desc = self.pref = None
        self.layouts = []
        scale_np = np.float64 if dtype == backend.float64 else np.float32
        try:
            self._describe(dtype, transa, transb, epilogue, aux_ld, tf32)
            ar, ac = (m, k) if transa == OP_N else (k, m)
            br, bc = (k, n) if transb == OP_N else (n, k)
            ctype = _CUDA_TYPE[dtype]
            self.a_layout, self.b_layout, self.d_layout = (
                self._layout(ctype, r, c, ld) for r, c, ld in ((ar, ac, lda), (br, bc, ldb), (m, n, ldd)))
            if batch is not None:  # (count, a's, b's and d's strides in elements): one strided-batched GEMM
                for lay, stride in zip((self.a_layout, self.b_layout, self.d_layout), batch[1:]):
                    self._batch(lay, batch[0], stride)
            self._prefer(ws_bytes, aligns)
            if algos is None:
                self._find_algos(dtype, epilogue, want)
            else:  # the choice another stream's plan of this GEMM made
                self.algos = algos.copy()
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

    def _describe(self, dtype, transa, transb, epilogue, aux_ld, tf32):
        """The matmul descriptor: compute type, transposes, epilog and its aux."""
        if dtype == backend.float64:
            compute, scale_type = 70, 1  # CUBLAS_COMPUTE_64F, CUDA_R_64F
        else:  # CUBLAS_COMPUTE_32F_FAST_TF32 or CUBLAS_COMPUTE_32F, CUDA_R_32F
            compute, scale_type = (77 if tf32 and dtype == backend.float32 else 68), 0
        self.desc = _lt.matmul_desc_create(compute, scale_type)
        self._set("TRANSA", np.int32(transa))
        self._set("TRANSB", np.int32(transb))
        self._set("EPILOGUE", np.uint32(_EPI[epilogue]))
        if aux_ld:
            self._set("EPILOGUE_AUX_LD", np.int64(aux_ld))
            if "GELU" in epilogue:
                self._set("EPILOGUE_AUX_DATA_TYPE", np.int32(_CUDA_TYPE[dtype]))
        self.has_bias_ptr = epilogue in _BIAS_EPILOGS
        self.has_aux_ptr = bool(aux_ld)

    def _layout(self, ctype, rows, cols, ld):
        lay = _lt.matrix_layout_create(ctype, rows, cols, ld)
        self.layouts.append(lay)
        return lay

    @staticmethod
    def _batch(layout, count, stride):
        attr = _lt.MatrixLayoutAttribute
        for name, value in ((attr.BATCH_COUNT, count), (attr.STRIDED_BATCH_OFFSET, stride)):
            buf = np.array([value], dtype=_lt.get_matrix_layout_attribute_dtype(name))
            _lt.matrix_layout_set_attribute(layout, name, buf.ctypes.data, buf.itemsize)

    def _prefer(self, ws_bytes, aligns):
        lt = _lt
        self.pref = lt.matmul_preference_create()
        P = lt.MatmulPreferenceAttribute
        out = aligns[2] if len(aligns) > 2 else 256  # (a new output array's is 256 bytes, a batch's may be less)
        for attr, val in ((P.MAX_WORKSPACE_BYTES, ws_bytes), (P.MIN_ALIGNMENT_A_BYTES, aligns[0]),
                          (P.MIN_ALIGNMENT_B_BYTES, aligns[1]), (P.MIN_ALIGNMENT_C_BYTES, out),
                          (P.MIN_ALIGNMENT_D_BYTES, out)):
            buf = np.array([val], dtype=lt.get_matmul_preference_attribute_dtype(attr))
            lt.matmul_preference_set_attribute(self.pref, attr, buf.ctypes.data, buf.itemsize)

    def _find_algos(self, dtype, epilogue, want):
        """The heuristic's top ``want`` algorithms (raises :class:`PlanError` for none)."""
        lt = _lt
        self.algos = np.zeros(want, dtype=lt.matmul_heuristic_result_dtype)
        found = np.zeros(1, dtype=np.int32)
        try:
            lt.matmul_algo_get_heuristic(self.handle, self.desc, self.a_layout, self.b_layout,
                                         self.d_layout, self.d_layout, self.pref, want,
                                         self.algos.ctypes.data, found.ctypes.data)
        except lt.cuBLASLtError as e:
            raise PlanError(f"cuBLASLt rejected {epilogue} for {self.key}: {e}") from None
        found = int(found[0])
        if found == 0:
            raise PlanError(f"cuBLASLt found no algorithm for {epilogue} with {self.key}")
        self.algos = self.algos[:found]
        if found > 1 and dtype in (backend.float16, backend.bfloat16):
            # candidates for timing: no split-K that adds its partial sums in the 16-bit output
            # type (in place or in an output-type workspace): measurably less accurate (a 1.9%
            # error in a fp16 dX at 65x100x784). The heuristic's own first choice stays.
            keep = [0] + [i for i in range(1, found) if not _reduces_in_output_type(self.algos, i)]
            self.algos = np.ascontiguousarray(self.algos[keep])
        self.algo_ptr = self.algos.ctypes.data

    def _set(self, name, value):
        buf = np.array([value])
        _lt.matmul_desc_set_attribute(self.desc, _ATTR[name], buf.ctypes.data, buf.itemsize)

    def choose(self, index):
        self.chosen = index
        self.algo_ptr = self.algos.ctypes.data + index * self.algos.itemsize

    def chosen_algo(self):
        """The chosen algorithm as a one-row heuristic result."""
        return np.ascontiguousarray(self.algos[self.chosen:self.chosen + 1])

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
            h = _handles[dev_id] = init().create()
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


def _problem(key):
    """A plan key without its stream (``key[1]``): what the algorithm choice depends on."""
    return key[:1] + key[2:]


def _get_plan(key, dev_id, config, *args):
    """``(plan, new)``: the cached plan of ``key``, else a new one; ``new`` is False too for a plan that
    took another stream's choice (nothing left to check or time)."""
    plan = _plans.get(key)
    if plan is not None:
        _stats["hits"] += 1
        return plan, False
    if key in unsupported:
        raise PlanError(f"unsupported: {key}")
    init()
    config = config or DEFAULT_CONFIG
    m, n, k = args[3:6]
    tune = config.autotune or 2 * m * n * k <= config.small_gemm_flop
    shared = _choices.get((_problem(key), (dev_id, key[1]) in backend.graph_streams))
    try:
        plan = _Plan(key, _handle(dev_id), *args, ws_bytes=WORKSPACE_LIMIT,
                     want=max(1, config.candidates if tune else 1), algos=shared)
    except PlanError:
        unsupported.add(key)
        raise
    _plans[key] = plan
    _stats["created"] += 1
    return plan, shared is None


def _autotune(plan, launch, rounds=2, runs=3, graph=False):
    """Time each candidate algorithm with CUDA events, round-robin (so clock drift favours
    none), and keep the fastest. Runs once, when the plan is made; never on the hot path.
    ``graph``: for a plan that CUDA graphs replay (made on one of ``backend.graph_streams``), each candidate timed
    as a captured graph of its launches (:func:`_graph_timer`); otherwise as eager launches, back to back, which
    is what an eager step pays (for a small GEMM, mostly the host time of its launches)."""
    cupy = _cp
    if len(plan.algos) < 2:
        return
    ok = [i for i in range(len(plan.algos)) if int(plan.algos["state"][i]) == 0]
    timer = _graph_timer(plan, launch, ok, runs) if graph else None
    best_t = {i: float("inf") for i in ok}
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    for _ in range(rounds):
        for i in list(best_t):
            plan.choose(i)
            if timer is not None:
                best_t[i] = min(best_t[i], timer(i))
                continue
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


def _graph_timer(plan, launch, candidates, runs):
    """``time(i)``: the device time (ms) of a CUDA graph of ``runs`` launches of candidate ``i``, captured once
    per candidate on a side stream: what a captured step pays for it, its split-K reductions and memsets
    included (a memset node leaves the GPU idle for microseconds around it), without the host time between
    eager launches (which back-to-back eager launches of a small GEMM measure instead). None where a candidate
    cannot be captured (the eager timing then)."""
    cupy = _cp
    side = cupy.cuda.Stream(non_blocking=True)
    cupy.cuda.Device().synchronize()
    graphs = {}
    try:
        for i in candidates:
            plan.choose(i)
            launch(side.ptr)
            side.synchronize()
            side.begin_capture()
            try:
                for _ in range(runs):
                    launch(side.ptr)
            finally:
                graphs[i] = side.end_capture()
            graphs[i].launch(side)
        side.synchronize()
    except Exception:
        return None
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()

    def time(i):
        start.record(side)
        graphs[i].launch(side)
        stop.record(side)
        stop.synchronize()
        return cupy.cuda.get_elapsed_time(start, stop)

    return time


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
        unsupported.add(key)
        raise PlanError(f"no cuBLASLt candidate passed the output check for {key}")
    plan.algos = np.ascontiguousarray(plan.algos[good])
    plan.choose(0)
    launch()


def execute(key, plan_args, a, b, d, bias_ptr=0, aux_ptr=0, check=None, config=None):
    """Run the GEMM of ``key`` (planned on first use from ``plan_args``: dtype, transa, transb, m, n,
    k, lda, ldb, ldd, epilogue, aux_ld, alignments, tf32 and optionally a strided batch, (count, a's, b's and
    d's strides in elements); under ``config``, None: the default).
    ``a``, ``b``: device pointers; ``d``: the output array. ``check``, if given, returns
    ``(poison, verify)`` (see :func:`_keep_correct`), called for a new plan only, which keeps only the
    candidates that pass it."""
    dev_id, sptr = key[0], key[1]
    plan, new = _get_plan(key, dev_id, config, *plan_args)
    ws = _workspace(dev_id, sptr, plan.ws_size)
    wsp, wsn = ws.data.ptr, ws.nbytes
    dp = d.data.ptr
    plan.run(a, b, dp, bias_ptr, aux_ptr, wsp, wsn, sptr)
    # a new plan is checked and, if it asked for candidates, timed, except inside a graph capture
    # (both synchronize): there it keeps the heuristic's first choice
    if new and not backend.is_capturing():
        def launch(stream=sptr):
            plan.run(a, b, dp, bias_ptr, aux_ptr, wsp, wsn, stream)

        if check is not None:
            _keep_correct(key, plan, launch, check())
        graph = (dev_id, sptr) in backend.graph_streams  # (graphs' and eager steps' choices kept apart)
        if len(plan.algos) > 1:
            small = (2, 3) if config and config.autotune else (3, 10)  # small GEMMs: more, cheap samples
            _autotune(plan, launch, *small, graph=graph)
        _choices[(_problem(key), graph)] = plan.chosen_algo()


def strided_batched(a, b, d, count, strides, transa, transb, m, n, k, lda, ldb, ldd):
    """``count`` fp32 GEMMs (strict fp32 compute) as one strided-batched call: column-major ``D (m x n) = op(A) @
    op(B)`` on the matrices of the CuPy arrays ``a``, ``b`` and ``d``, ``strides`` (a's, b's, d's; 0 repeats
    the first) elements apart. Each of d's matrices must be 256-byte aligned, as the plans take outputs."""
    import cupy

    dev, stream = d.data.device_id, cupy.cuda.get_current_stream().ptr
    aligns = tuple(alignment(arr.data.ptr | 4 * stride) for arr, stride in zip((a, b), strides))
    key = (dev, stream, "batched", backend.float32, transa, transb, m, n, k, lda, ldb, ldd, aligns, count, strides)
    args = (backend.float32, transa, transb, m, n, k, lda, ldb, ldd, "DEFAULT", 0, aligns, False, (count, *strides))
    execute(key, args, a.data.ptr, b.data.ptr, d)


def alignment(address):
    """The largest power of two up to 256 that divides ``address`` (a pointer OR-ed with the strides it steps)."""
    address |= 256
    return address & -address


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
    _choices.clear()
    unsupported.clear()
    _workspaces.clear()
    if _lt is not None:
        for h in _handles.values():
            try:
                _lt.destroy(h)
            except Exception:  # pragma: no cover - at interpreter exit the driver may be gone
                pass
    _handles.clear()


atexit.register(clear_plan_cache)
