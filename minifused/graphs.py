"""Whole-step CUDA graphs: capture a training step once, replay it per batch.

At MNIST sizes a step is bound by the host time of its launches; a captured
graph replays every kernel of forward, backward and the optimizer step for one
launch's host cost. ``capture_step(step_fn)`` wraps a function of input tensors
(it zeroes grads, runs forward and backward, steps the optimizer, and returns
the loss) so that:

* each new input signature (shapes, dtypes) first runs eagerly ``warmup`` times,
  on the capture stream, so optimizer state, plans and kernels exist;
* then one call captures the step into a graph whose inputs are static buffers,
  and launches it; later calls copy the batch into those buffers and replay, on
  the caller's current stream (a replay costs its host two copies and a launch);
* a new signature (a last partial batch) gets its own warm-up and graph;
* allocations made during capture come from a private memory pool that nothing
  else uses, so replays never write into memory that eager code was handed since;
* outputs are the static output tensors of the graph, overwritten by each replay:
  reading one (``loss.item()``) synchronizes only when asked;
* anything that would synchronize the host inside the capture (``.item()``,
  ``.cpu()``, a host-to-device copy) raises a RuntimeError naming it.

Whatever a step reads that changes between replays must live in device memory:
the optimizers keep their step counts and hyper-parameters there (an lr set by a
scheduler between replays is used by the next one), ``amp.GradScaler`` its scale,
and dropout advances a device counter inside the graph so each replay draws new
masks. Other host-seeded random ops would repeat their numbers on every replay.
On ``cpu`` inputs the step simply runs eagerly.

PyTorch's own graph API is here too, for code written against it: :class:`CUDAGraph` (``capture_begin`` /
``capture_end`` / ``replay``), the :class:`graph` context that captures what runs inside it on a side stream,
and :func:`graph_pool_handle` (a private pool that several graphs share), all as ``minifused.cuda.*``. Its rules
are PyTorch's: warm the captured code up eagerly first (optimizer state, plans and kernels are made there; a
capture refuses to create them), capture on a stream other than the default one, and feed a replay by copying
into the tensors the capture read; what it wrote (outputs, gradients) is rewritten by each replay.

A graph runs the step's kernels in one chain. (Measured slower: a Linear's weight
gradient on a side stream, a parallel branch of the graph beside its dX: on the
MNIST MLP the two cuBLASLt GEMMs, run together, took longer than one after the
other.)
"""
from __future__ import annotations

import gc

from . import backend
from .kernels import channels_last_strided
from .kernels.gather import copy_pair
from .tensor import Tensor


class _Captured:
    __slots__ = ("graph", "inputs", "outputs", "pool")

    def __init__(self, graph, inputs, outputs, pool):
        self.graph, self.inputs, self.outputs, self.pool = graph, inputs, outputs, pool


def _dense_alike(static, a):
    """Whether ``static`` and ``a`` (one shape and dtype) lay their elements out alike in dense memory: both
    C-contiguous, or both channels-last (a channels-last model's batches), so that a copy is one of bytes."""
    return (static.flags.c_contiguous and a.flags.c_contiguous) or (
        static.strides == a.strides and channels_last_strided(a))


def _one_copy(static, a):
    """Whether ``static[...] = a`` is a plain copy of bytes (laid out alike, distinct, not empty)."""
    return _dense_alike(static, a) and a.data.ptr != static.data.ptr and a.nbytes > 0


def _copy_into(static, a, stream):
    """``static[...] = a`` (one shape and dtype): one asynchronous copy where both are laid out alike, which costs
    less host time (and, channels-last, less device time) than an elementwise copy kernel."""
    if _dense_alike(static, a):
        if a.data.ptr != static.data.ptr and a.nbytes:
            import cupy

            cupy.cuda.runtime.memcpyAsync(static.data.ptr, a.data.ptr, a.nbytes,
                                          cupy.cuda.runtime.memcpyDeviceToDevice, stream.ptr)
    else:
        static[...] = a


class CapturedStep:
    """A step function replayed from CUDA graphs, one per input signature."""

    def __init__(self, step_fn, warmup=2):
        if warmup < 1:
            raise ValueError(f"capture_step: warmup must be >= 1, got {warmup}")
        self.step_fn = step_fn
        self.warmup = warmup
        self._seen = {}
        self._graphs = {}
        self._stream = None
        self.captures = 0  # how many graphs were captured (tests and benchmarks read it)

    def __call__(self, *inputs):
        if not inputs or not all(isinstance(t, Tensor) for t in inputs):
            raise TypeError("capture_step: the step's arguments must be tensors")
        if not inputs[0].is_cuda:
            return self.step_fn(*inputs)
        import cupy

        key = tuple([(t._data.shape, t._data.dtype, t._data.data.device_id) for t in inputs])
        captured = self._graphs.get(key)
        if captured is not None:  # the hot path: the inputs' copies and a launch, on the caller's stream
            stream = cupy.cuda.get_current_stream()
            pairs = [(static._data, t._data) for static, t in zip(captured.inputs, inputs)]
            if len(pairs) == 2 and all(_one_copy(*p) for p in pairs) and (  # (a batch and its targets)
                    pairs[0][1].data.device_id == pairs[1][1].data.device_id == cupy.cuda.runtime.getDevice()):
                copy_pair(*pairs[0], *pairs[1])
            else:
                for static, a in pairs:
                    _copy_into(static, a, stream)
            captured.graph.launch(stream)
            return captured.outputs
        if self._stream is None:
            self._stream = cupy.cuda.Stream(non_blocking=True)
            backend.graph_streams.add((cupy.cuda.runtime.getDevice(), self._stream.ptr))
        stream = self._stream
        stream.wait_event(cupy.cuda.get_current_stream().record())
        with stream:
            if self._seen.get(key, 0) < self.warmup:
                self._seen[key] = self._seen.get(key, 0) + 1
                out = self.step_fn(*inputs)
            else:
                captured = self._graphs[key] = self._capture(inputs)
                captured.graph.launch(stream)
                out = captured.outputs
        cupy.cuda.get_current_stream().wait_event(stream.record())
        return out

    def _capture(self, inputs):
        import cupy

        static = [Tensor._from_array(backend.copy(t._data), t.requires_grad) for t in inputs]
        pool = cupy.cuda.MemoryPool()
        stream = self._stream
        stream.synchronize()
        with cupy.cuda.using_allocator(pool.malloc), backend.capturing("capture_step"):
            stream.begin_capture()
            try:
                outputs = self.step_fn(*static)
            finally:
                graph = stream.end_capture()
        self.captures += 1
        return _Captured(graph, static, outputs, pool)

    def reset(self):
        """Drop every captured graph (for example after the model or optimizer changed)."""
        self._graphs.clear()
        self._seen.clear()


def capture_step(step_fn=None, *, warmup=2):
    """Wrap a training step so that it runs from CUDA graphs (usable as a decorator)."""
    if step_fn is None:
        return lambda fn: CapturedStep(fn, warmup)
    return CapturedStep(step_fn, warmup)


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,  # noqa: A001
            name=None, disable=False, recompile_limit=None, isolate_recompiles=False, shapes_spec=None):
    """``torch.compile``, accepted so that code calling it runs: ``model`` (a module or a function) comes back as
    it is, and with no ``model`` a decorator that does the same. minifused has no compiler: its layers already
    run fused kernels, and a whole training step runs as one CUDA graph through :func:`capture_step`."""
    if model is None:
        return lambda fn: fn
    return model


# ---------------------------------------------------------------- PyTorch's graph API (torch.cuda.CUDAGraph, graph)
_CAPTURE_MODES = ("global", "thread_local", "relaxed")


def _cupy(op):
    if not backend.cuda_available():
        raise RuntimeError(f"{op}: CUDA graphs need a CUDA device, and none is available")
    return backend.cupy


def graph_pool_handle():
    """``torch.cuda.graph_pool_handle``: a private memory pool, for the ``pool=`` of captures that share it."""
    return _cupy("graph_pool_handle").cuda.MemoryPool()


class CUDAGraph:
    """``torch.cuda.CUDAGraph``: the kernels that the current stream queues between :meth:`capture_begin` and
    :meth:`capture_end`, replayed by :meth:`replay`. Memory allocated during the capture comes from a private pool
    (its own, or ``pool``: :func:`graph_pool_handle` or another graph's :meth:`pool`) and stays the graph's, so
    the tensors the capture made are the ones each replay rewrites."""

    def __init__(self, keep_graph=False):
        _cupy("CUDAGraph")
        self._graph = self._pool = self._capture = None

    def capture_begin(self, pool=None, capture_error_mode="global"):
        """Begin capturing the current stream (not the default one): host synchronizations raise until
        :meth:`capture_end`. The capture is always CUDA's "relaxed" mode, whatever ``capture_error_mode`` (checked,
        for PyTorch's code) says: the pool takes memory from the driver during a capture, which the other modes
        refuse."""
        cupy = _cupy("CUDAGraph.capture_begin")
        if self._capture is not None or self._graph is not None:
            raise RuntimeError("CUDAGraph.capture_begin: this graph already holds a capture (call reset() first)")
        if capture_error_mode not in _CAPTURE_MODES:
            raise backend.InputError(f"CUDAGraph.capture_begin: capture_error_mode must be one of {_CAPTURE_MODES}, "
                                     f"got {capture_error_mode!r}")
        if pool is not None and not isinstance(pool, cupy.cuda.MemoryPool):
            raise backend.InputTypeError(f"CUDAGraph.capture_begin: pool must come from graph_pool_handle() or "
                                         f"another graph's pool(), got {type(pool).__name__}")
        stream = cupy.cuda.get_current_stream()
        if stream.ptr == 0:
            raise RuntimeError("CUDAGraph.capture_begin: CUDA graphs must be captured on a stream other than the "
                               "default one (capture inside `with minifused.cuda.graph(g):`)")
        pool = cupy.cuda.MemoryPool() if pool is None else pool
        contexts = [cupy.cuda.using_allocator(pool.malloc), backend.capturing("minifused.cuda.graph")]
        for c in contexts:
            c.__enter__()
        try:
            stream.begin_capture(cupy.cuda.runtime.streamCaptureModeRelaxed)
        except BaseException:
            for c in reversed(contexts):
                c.__exit__(None, None, None)
            raise
        self._capture, self._pool = (stream, contexts), pool

    def capture_end(self):
        """End the capture begun on this graph; the graph is then ready to :meth:`replay`."""
        if self._capture is None:
            raise RuntimeError("CUDAGraph.capture_end: no capture in progress (call capture_begin first)")
        stream, contexts = self._capture
        self._capture = None
        try:
            self._graph = stream.end_capture()
        finally:
            for c in reversed(contexts):
                c.__exit__(None, None, None)

    def replay(self):
        """Launch the captured kernels on the current stream."""
        if self._graph is None:
            raise RuntimeError("CUDAGraph.replay: nothing captured yet (capture_begin ... capture_end first)")
        self._graph.launch(backend.cupy.cuda.get_current_stream())

    def reset(self):
        """Drop the captured graph (and this graph's hold on its memory pool)."""
        if self._capture is not None:
            raise RuntimeError("CUDAGraph.reset: a capture is in progress (call capture_end first)")
        self._graph = self._pool = None

    def pool(self):
        """The graph's memory pool: pass it as ``pool=`` to capture another graph that shares its memory."""
        if self._pool is None:
            raise RuntimeError("CUDAGraph.pool: the graph has no pool before its capture begins")
        return self._pool


_side_streams = {}  # device -> the stream :class:`graph` captures on when given none


class graph:  # noqa: N801 - torch.cuda.graph's name
    """``with minifused.cuda.graph(g):`` captures the block into the :class:`CUDAGraph` ``g``, as PyTorch's: the
    device synchronized and garbage collected first, then the block run on ``stream`` (a side stream of the
    device when None) as the current stream, captured."""

    def __init__(self, cuda_graph, pool=None, stream=None, capture_error_mode="global"):
        if not isinstance(cuda_graph, CUDAGraph):
            raise backend.InputTypeError(f"minifused.cuda.graph: expected a CUDAGraph, got "
                                         f"{type(cuda_graph).__name__}")
        self.cuda_graph, self.pool, self.stream, self.mode = cuda_graph, pool, stream, capture_error_mode

    def __enter__(self):
        cupy = _cupy("minifused.cuda.graph")
        cupy.cuda.Device().synchronize()
        gc.collect()
        if self.stream is not None:
            s = self.stream._stream  # a minifused.cuda.Stream
        else:
            dev = cupy.cuda.runtime.getDevice()
            s = _side_streams.get(dev)
            if s is None:
                s = _side_streams[dev] = cupy.cuda.Stream(non_blocking=True)
        s.__enter__()
        try:
            self.cuda_graph.capture_begin(self.pool, self.mode)
        except BaseException:
            s.__exit__(None, None, None)
            raise
        self._entered = s

    def __exit__(self, exc_type, exc, tb):
        s, self._entered = self._entered, None
        try:
            try:
                self.cuda_graph.capture_end()
            except Exception:
                if exc_type is None:  # (a capture that the block's own error broke: that error is the one to see)
                    raise
            if exc_type is not None:  # a block cut short is no graph to replay
                self.cuda_graph.reset()
        finally:
            s.__exit__(None, None, None)
        return False
