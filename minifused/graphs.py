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

A graph runs the step's kernels in one chain. (Measured slower: a Linear's weight
gradient on a side stream, a parallel branch of the graph beside its dX: on the
MNIST MLP the two cuBLASLt GEMMs, run together, took longer than one after the
other.)
"""
from __future__ import annotations

from . import backend
from .kernels.gather import copy_pair
from .tensor import Tensor


class _Captured:
    __slots__ = ("graph", "inputs", "outputs", "pool")

    def __init__(self, graph, inputs, outputs, pool):
        self.graph, self.inputs, self.outputs, self.pool = graph, inputs, outputs, pool


def _one_copy(static, a):
    """Whether ``static[...] = a`` is a plain copy of bytes (both contiguous, distinct, not empty)."""
    return static.flags.c_contiguous and a.flags.c_contiguous and a.data.ptr != static.data.ptr and a.nbytes > 0


def _copy_into(static, a, stream):
    """``static[...] = a`` (one shape and dtype): one asynchronous copy where both are contiguous, which costs
    less host time than an elementwise copy kernel."""
    if static.flags.c_contiguous and a.flags.c_contiguous:
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

        static = [Tensor._from_array(t._data.copy(), t.requires_grad) for t in inputs]
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
            disable=False):
    """``torch.compile``, accepted so that code calling it runs: ``model`` (a module or a function) comes back as
    it is, and with no ``model`` a decorator that does the same. minifused has no compiler: its layers already
    run fused kernels, and a whole training step runs as one CUDA graph through :func:`capture_step`."""
    if model is None:
        return lambda fn: fn
    return model
