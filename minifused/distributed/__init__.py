"""Data-parallel training over several processes: one process per GPU, NCCL between them.

    python -m minifused.distributed.run --nproc-per-node 2 train.py ARGS

    import minifused.distributed as dist
    dist.init_process_group()                  # reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT
    model = dist.DistributedDataParallel(model.to(mf.default_device()))

``init_process_group`` reads the variables ``torchrun`` sets too, so either launcher
works; on several hosts run the launcher on each with ``--nnodes``, ``--node-rank`` and
the same ``--master-addr/--master-port`` (rank 0's host). Rank 0 serves a small TCP
rendezvous there (:mod:`._hub`) that hands out NCCL's unique id. Backends:

* ``"nccl"``: collectives on CUDA tensors run on the current stream through NCCL
  (``cupy.cuda.nccl``, imported only here, never by ``import minifused``). The default
  device becomes ``cuda:LOCAL_RANK``. ``NCCL_NVLS_ENABLE=0`` is forced: NVLink multicast
  stays off (on shared hosts it can take GPUs out of service).
* ``"cpu"`` (alias ``"gloo"``): collectives travel over the rendezvous' sockets, summed
  in rank order on rank 0 (every rank gets the same bits). Slow, but it runs the
  data-parallel logic anywhere: the tests use it. CPU tensors take this path under
  either backend.

Every host-side wait (rendezvous, CPU collectives, ``barrier``) gives up after
``timeout`` seconds with :class:`DistributedError` naming the rank that failed. A
rank that dies inside an NCCL collective cannot be detected by the others (NCCL has no
timeout): the launcher then terminates the remaining ranks and exits non-zero.
"""
from __future__ import annotations

import datetime
import os

from .. import backend
from ..autograd import Function
from ..backend import cuda_available as _cuda_available  # the argument 'backend' shadows the module
from ..kernels import is_channels_last
from ..tensor import Tensor
from ._hub import DistributedError, Hub

__all__ = ["init_process_group", "destroy_process_group", "is_initialized", "get_rank", "get_world_size",
           "get_local_rank", "all_reduce", "broadcast", "all_gather", "all_gather_object", "barrier",
           "ReduceOp", "DistributedError", "DistributedDataParallel", "DistributedSampler", "is_available", "ZeroRedundancyOptimizer"]


class ReduceOp:
    SUM = "sum"
    AVG = "avg"
    MAX = "max"
    MIN = "min"
    PRODUCT = "prod"


_OPS = ("sum", "avg", "max", "min", "prod")


class _Group:
    def __init__(self, rank, world, local_rank, backend_name, hub, comm, timeout):
        self.rank, self.world, self.local_rank = rank, world, local_rank
        self.backend, self.hub, self.comm, self.timeout = backend_name, hub, comm, timeout


_group = None


def is_available() -> bool:
    return True


def _env_int(name, value, default):
    if value is not None:
        return int(value)
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"init_process_group: environment variable {name}={raw!r} is not an integer") from None


def init_process_group(backend=None, timeout=300.0, *, rank=None, world_size=None, local_rank=None,
                       master_addr=None, master_port=None):
    """Join the process group. Arguments left out come from ``RANK``, ``WORLD_SIZE``,
    ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT`` (defaults: a single process, rank 0).
    ``backend``: ``"nccl"`` (default when CUDA is usable) or ``"cpu"``; ``timeout`` in seconds
    (or a ``datetime.timedelta``) bounds every host-side wait."""
    global _group
    if _group is not None:
        raise RuntimeError("init_process_group: already initialized; call destroy_process_group() first")
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    if not timeout > 0:
        raise ValueError(f"init_process_group: timeout must be > 0 seconds, got {timeout!r}")
    name = backend or ("nccl" if _cuda_available() else "cpu")
    name = {"gloo": "cpu"}.get(str(name).lower(), str(name).lower())
    if name not in ("nccl", "cpu"):
        raise ValueError(f"init_process_group: unknown backend {backend!r}; expected 'nccl' or 'cpu' (or 'gloo')")
    world = _env_int("WORLD_SIZE", world_size, 1)
    rank = _env_int("RANK", rank, 0)
    local = _env_int("LOCAL_RANK", local_rank, rank)
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"init_process_group: expected 0 <= RANK < WORLD_SIZE, got RANK={rank}, WORLD_SIZE={world}")
    addr = master_addr or os.environ.get("MASTER_ADDR", "127.0.0.1")
    port = _env_int("MASTER_PORT", master_port, None)
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"init_process_group: MASTER_PORT must be a TCP port in 1..65535, got {port}")
    if world > 1 and port is None:
        raise ValueError("init_process_group: MASTER_PORT is not set (a world of several processes meets at "
                         "MASTER_ADDR:MASTER_PORT); start the script with python -m minifused.distributed.run")
    comm, prev_device = None, None
    if name == "nccl":
        os.environ["NCCL_NVLS_ENABLE"] = "0"  # before NCCL reads its environment: no NVLink multicast
        nccl = _nccl()
        import cupy

        if local >= cupy.cuda.runtime.getDeviceCount():
            raise RuntimeError(f"init_process_group: LOCAL_RANK {local} but this host has "
                               f"{cupy.cuda.runtime.getDeviceCount()} CUDA devices (one process per GPU)")
        cupy.cuda.Device(local).use()
        prev_device = _set_default_device(f"cuda:{local}")
    hub = None
    try:
        hub = Hub(rank, world, addr, port, timeout)
        if name == "nccl" and world > 1:
            uid = hub.broadcast(nccl.get_unique_id() if rank == 0 else None, 0, "init_process_group (NCCL id)")
            comm = nccl.NcclCommunicator(world, uid, rank)
    except BaseException:
        if hub is not None:
            hub.close()
        if name == "nccl":
            _set_default_device(prev_device)
        raise
    _group = _Group(rank, world, local, name, hub, comm, timeout)
    _group.prev_device = prev_device
    _norm.collectives = _SyncCollectives if world > 1 else None  # SyncBatchNorm's (nn sits below this package)


def _nccl():
    from cupy.cuda import nccl

    if not getattr(nccl, "available", True):
        raise RuntimeError("init_process_group: backend 'nccl' asked for, but CuPy cannot load NCCL "
                           "(libnccl.so.2); install nvidia-nccl-cu13 or use backend='cpu'")
    return nccl


def _set_default_device(spec):
    """One process per GPU: bare 'cuda' tensors and models of this process belong on its own GPU.
    Returns the previous setting (``destroy_process_group`` restores it)."""
    prev = os.environ.get("MINIFUSED_DEVICE")
    if spec is None:
        os.environ.pop("MINIFUSED_DEVICE", None)
    else:
        os.environ["MINIFUSED_DEVICE"] = spec
    backend._env_default_device.cache_clear()
    return prev


def destroy_process_group():
    global _group
    g, _group = _group, None
    _norm.collectives = None
    if g is None:
        return
    if g.comm is not None:
        g.comm.destroy()
    g.hub.close()
    if g.backend == "nccl":
        _set_default_device(g.prev_device)


def is_initialized() -> bool:
    return _group is not None


def _require(what):
    if _group is None:
        raise RuntimeError(f"{what}: the process group is not initialized; call "
                           f"minifused.distributed.init_process_group() first")
    return _group


def get_rank() -> int:
    return _require("get_rank").rank


def get_world_size() -> int:
    return _require("get_world_size").world


def get_local_rank() -> int:
    return _require("get_local_rank").local_rank


def get_backend() -> str:
    return _require("get_backend").backend


# ---------------------------------------------------------------- collectives on arrays
_NCCL_TYPES = {"float16": "NCCL_FLOAT16", "bfloat16": "NCCL_BFLOAT16", "float32": "NCCL_FLOAT32",
               "float64": "NCCL_FLOAT64", "int8": "NCCL_INT8", "uint8": "NCCL_UINT8", "int32": "NCCL_INT32",
               "int64": "NCCL_INT64", "uint32": "NCCL_UINT32", "uint64": "NCCL_UINT64"}
_NCCL_OPS = {"sum": "NCCL_SUM", "avg": "NCCL_AVG", "max": "NCCL_MAX", "min": "NCCL_MIN", "prod": "NCCL_PROD"}


def _uses_nccl(g, array, what, elementwise=True):
    """Whether ``array`` goes through NCCL; ``elementwise``: the collective pairs the ranks' elements in memory
    order (all-reduce, broadcast), so a dense channels-last array (every rank's parameter has its layout) goes as
    it is."""
    if g.comm is None or not backend.is_cuda_array(array):
        return False
    if array.device.id != g.local_rank:
        raise RuntimeError(f"{what}: tensor on cuda:{array.device.id}, but this rank's NCCL communicator "
                           f"is on cuda:{g.local_rank}")
    if not (array.flags.c_contiguous or (elementwise and is_channels_last(array))):
        raise ValueError(f"{what}: NCCL needs a contiguous tensor, got strides {array.strides}")
    return True


def _nccl_args(array, what):
    nccl = _nccl()
    kind = _NCCL_TYPES.get(str(array.dtype))
    if kind is None:
        raise TypeError(f"{what}: dtype {array.dtype} has no NCCL type; expected one of {sorted(_NCCL_TYPES)}")
    return nccl, getattr(nccl, kind)


def _stream_ptr(stream):
    import cupy

    return (stream or cupy.cuda.get_current_stream()).ptr


def _host_roundtrip(array, fn):
    """Apply ``fn`` (host array -> host array) and write the result back into ``array``."""
    result = fn(backend.to_device(array, backend.CPU))
    if backend.is_cuda_array(array):
        array[...] = backend.to_device(result, backend.device_of(array))
    elif result is not array:
        array[...] = result


def _all_reduce_array(array, op="sum", stream=None):
    """Reduce ``array`` in place across ranks (NCCL on ``stream`` or the current one, else the hub)."""
    g = _group
    if g.world == 1:
        return
    if _uses_nccl(g, array, "all_reduce"):
        nccl, dtype = _nccl_args(array, "all_reduce")
        g.comm.allReduce(array.data.ptr, array.data.ptr, array.size, dtype, getattr(nccl, _NCCL_OPS[op]),
                         _stream_ptr(stream))
    else:
        _host_roundtrip(array, lambda a: g.hub.all_reduce(a, op))


# ---------------------------------------------------------------- collectives on tensors
def _check(what, tensor):
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{what}: expected a Tensor, got {type(tensor).__name__}")


def all_reduce(tensor, op=ReduceOp.SUM):
    """Replace ``tensor`` (in place) on every rank by the reduction over ranks: ``"sum"``,
    ``"avg"``, ``"max"``, ``"min"`` or ``"prod"``. Returns the tensor."""
    g = _require("all_reduce")
    _check("all_reduce", tensor)
    if op not in _OPS:
        raise ValueError(f"all_reduce: unknown op {op!r}; expected one of {_OPS}")
    if g.world > 1:
        _all_reduce_array(tensor._data, op)
        tensor._bump("all_reduce")
    return tensor


class _AllReduceSum(Function):
    """The sum over ranks, recorded: each rank's gradient is the sum of every rank's (the reduced value feeds
    every rank's loss). Each rank must run the backward too, as data-parallel training does."""

    @staticmethod
    def forward(ctx, a):
        out = backend.copy(a)
        _all_reduce_array(out, "sum")
        return out

    @staticmethod
    def backward(ctx, g):
        g = backend.copy(g)
        _all_reduce_array(g, "sum")
        return g


def all_reduce_sum_recorded(tensor):
    """The sum over ranks of ``tensor`` as a new tensor, differentiable (SyncBatchNorm's statistics)."""
    _require("all_reduce")
    _check("all_reduce", tensor)
    return _AllReduceSum.apply(tensor) if _group.world > 1 else tensor


def broadcast(tensor, src=0):
    """Overwrite ``tensor`` (in place) on every rank with rank ``src``'s. Returns the tensor."""
    g = _require("broadcast")
    _check("broadcast", tensor)
    if not 0 <= src < g.world:
        raise ValueError(f"broadcast: src must be a rank in [0, {g.world}), got {src}")
    if g.world == 1:
        return tensor
    a = tensor._data
    if _uses_nccl(g, a, "broadcast"):
        nccl, dtype = _nccl_args(a, "broadcast")
        g.comm.broadcast(a.data.ptr, a.data.ptr, a.size, dtype, src, _stream_ptr(None))
    else:
        _host_roundtrip(a, lambda h: g.hub.broadcast(h, src))
    tensor._bump("broadcast")
    return tensor


def all_gather(tensor_list, tensor):
    """Fill ``tensor_list[r]`` (one tensor per rank, shaped like ``tensor``) with rank r's ``tensor``."""
    g = _require("all_gather")
    _check("all_gather", tensor)
    if len(tensor_list) != g.world:
        raise ValueError(f"all_gather: tensor_list needs one tensor per rank ({g.world}), got {len(tensor_list)}")
    for t in tensor_list:
        _check("all_gather", t)
        if t.shape != tensor.shape or t.dtype != tensor.dtype:
            raise ValueError(f"all_gather: every output must be {tuple(tensor.shape)} {tensor.dtype}, got "
                             f"{tuple(t.shape)} {t.dtype}")
    a = tensor._data
    if _uses_nccl(g, a, "all_gather", elementwise=False):
        nccl, dtype = _nccl_args(a, "all_gather")
        out = tensor._xp.empty((g.world,) + a.shape, a.dtype)
        g.comm.allGather(a.data.ptr, out.data.ptr, a.size, dtype, _stream_ptr(None))
        parts = list(out)
    else:
        parts = g.hub.all_gather(backend.to_device(a, backend.CPU), "all_gather")
    for t, part in zip(tensor_list, parts):
        t._data[...] = backend.to_device(part, t.device)
        t._bump("all_gather")
    return tensor_list


def all_gather_object(object_list, obj):
    """Fill ``object_list`` (length world size) with every rank's picklable ``obj`` (over the hub)."""
    g = _require("all_gather_object")
    if len(object_list) != g.world:
        raise ValueError(f"all_gather_object: object_list needs {g.world} entries, got {len(object_list)}")
    object_list[:] = g.hub.all_gather(obj, "all_gather_object")
    return object_list


def barrier():
    """Wait until every rank got here. On NCCL ranks this rank's GPU work is finished first
    (the barrier itself runs on the host, bounded by the timeout)."""
    g = _require("barrier")
    if g.backend == "nccl":
        backend.synchronize()
    g.hub.barrier()


from ..data import loader as _loader  # noqa: E402
from ..nn import norm as _norm  # noqa: E402


class _SyncCollectives:
    """What SyncBatchNorm (minifused.nn, which does not import this package) calls while a group of several
    ranks is up: ``nn.norm.collectives`` is this class then, None otherwise."""
    all_reduce = staticmethod(lambda tensor: all_reduce(tensor))
    sum_recorded = staticmethod(lambda tensor: all_reduce_sum_recorded(tensor))


# the data layer's sampler, its num_replicas and rank defaulting to this process group's (as PyTorch's)
DistributedSampler = _loader.DistributedSampler
_loader.process_group = lambda: (get_world_size(), get_rank())
from .ddp import DistributedDataParallel  # noqa: E402
from ..nn import parallel as _nn_parallel  # noqa: E402

_nn_parallel.DistributedDataParallel = DistributedDataParallel  # torch.nn.parallel's spelling too
from .zero import ZeroRedundancyOptimizer  # noqa: E402
