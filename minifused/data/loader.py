"""``DataLoader``: batches of device tensors from a dataset kept whole on the device.

A dataset with ``as_tensors(device, dtype)`` (MNIST, FashionMNIST, :class:`TensorDataset`)
is moved to the device once, at construction. Each epoch draws one permutation on the
host (``numpy`` PCG64 seeded by ``(seed, epoch)``), copies it to the device once, and
every batch is a gather on the device: no per-batch host copy, no synchronization.
The order depends only on ``seed`` and the epoch number, not on the device, so a run
resumed at an epoch boundary sees the same batches. Other datasets (``__getitem__``
returning tuples of tensors / numbers) are collated on the host, batch by batch.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import backend
from ..kernels.gather import rows_gatherer
from ..tensor import Tensor
from .dataset import Dataset, IterableDataset, batched_on_device
from .sampler import BatchSampler, Sampler


def epoch_order(n: int, seed: int, epoch: int):
    """The shuffled order of ``n`` samples for ``epoch`` of a run seeded with ``seed`` (host int64)."""
    return np.random.Generator(np.random.PCG64([int(seed), int(epoch)])).permutation(n)


class TensorDataset(Dataset):
    """Tensors of equal first dimension, indexed together."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset: give at least one tensor")
        n = len(tensors[0])
        if any(len(t) != n for t in tensors):
            raise ValueError(f"TensorDataset: tensors of different lengths {[len(t) for t in tensors]}")
        self.tensors = tensors

    def __len__(self):
        return len(self.tensors[0])

    def __getitem__(self, i):
        return tuple(t[i] for t in self.tensors)

    @property
    def device(self):
        """Where the tensors are: a DataLoader's batches stay there unless it is given a device."""
        return self.tensors[0].device if isinstance(self.tensors[0], Tensor) else None

    def as_tensors(self, device=None, dtype=None):
        out = []
        for t in self.tensors:
            t = t.to(backend.device(device))
            if dtype is not None and backend.is_floating(t.dtype):
                t = t.to(dtype)
            out.append(t)
        return tuple(out)


class DistributedSampler:
    """This rank's share of a dataset's indices, for data-parallel training (PyTorch's semantics).

    Every rank draws the same order for an epoch (``seed`` must agree across ranks; the
    default 0 does) and takes every ``num_replicas``-th index from position ``rank``, so the
    shards are disjoint and every rank gets the same count, ``len(self)``. When the dataset
    does not split evenly, ``drop_last=False`` pads the order with its own first indices
    (a few samples are seen twice per epoch) and ``drop_last=True`` drops its tail.
    ``set_epoch(e)`` reshuffles; a ``DataLoader(sampler=...)`` calls it for you.
    ``num_replicas`` / ``rank`` are given here; ``minifused.distributed.DistributedSampler``
    defaults them to the process group's (the data layer does not import the distributed one).
    """

    def __init__(self, dataset, num_replicas, rank, shuffle=True, seed=0, drop_last=False):
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ValueError(f"DistributedSampler: expected 0 <= rank < num_replicas, got rank {rank}, "
                             f"num_replicas {num_replicas}")
        self.n = len(dataset)
        self.num_replicas, self.rank = int(num_replicas), int(rank)
        self.shuffle, self.seed, self.drop_last = bool(shuffle), int(seed), bool(drop_last)
        self.epoch = 0
        if self.drop_last:
            self.num_samples = self.n // self.num_replicas
        else:
            self.num_samples = -(-self.n // self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch: int):
        self.epoch = int(epoch)

    def indices(self, epoch=None):
        """This rank's indices for ``epoch`` (default: the current one), a host int64 array."""
        epoch = self.epoch if epoch is None else epoch
        order = epoch_order(self.n, self.seed, epoch) if self.shuffle else np.arange(self.n)
        if self.total_size > self.n:  # pad by repeating the order from its start
            order = np.resize(order, self.total_size)
        return order[:self.total_size][self.rank::self.num_replicas]

    def __iter__(self):
        return iter(self.indices().tolist())


class _LoaderOrder(Sampler):
    """A DataLoader's own order of indices (no sampler given): PyTorch's SequentialSampler or RandomSampler in
    its place. Iterated, the order of the next epoch the loader loads; its length, the dataset's."""

    def __init__(self, loader):
        self.loader = loader

    def __iter__(self):
        return iter(self.loader.order().tolist())

    def __len__(self):
        return self.loader.n


class DataLoader:
    """Iterate over ``dataset`` in batches of ``batch_size`` (PyTorch's arguments, in its order).

    ``shuffle`` draws a new order every epoch from ``seed`` (None: a seed from the global
    generator); ``drop_last`` drops a final short batch; ``device`` / ``dtype`` say where the
    batches live (by default: a TensorDataset's device, else the default device) and the floating dtype
    of the inputs. ``set_epoch(e)`` picks the epoch
    whose order the next iteration uses (it advances by one after each full iteration).
    ``sampler`` (instead of ``shuffle``) gives the indices to load: a :class:`DistributedSampler`
    is driven by the loader's epoch (``loader.set_epoch(e)`` reshuffles), any other iterable of
    indices is iterated afresh each epoch. ``batch_sampler`` gives whole batches of indices
    instead (then leave ``batch_size``, ``shuffle``, ``sampler`` and ``drop_last`` alone).
    ``batch_size=None`` turns batching off: each item comes alone, its NumPy arrays made tensors
    (or passed through ``collate_fn``).
    ``collate_fn(list_of_items)`` builds each batch on the host; the default stacks tensors,
    arrays and numbers position by position (tuples, lists and dicts of them too).
    An :class:`IterableDataset` is iterated afresh each epoch and its items batched as they come
    (``shuffle``, ``sampler`` and ``batch_sampler`` must be left unset, as PyTorch's; ``len()`` needs the
    dataset's own ``__len__``).

    A dataset with ``as_tensors`` and no ``collate_fn`` is moved to the device once and
    batched there. ``num_workers``, ``pin_memory``, ``timeout``, ``worker_init_fn``,
    ``prefetch_factor`` and ``persistent_workers`` are accepted for PyTorch code and do
    nothing: loading runs in the calling thread. ``generator`` (a ``numpy.random.Generator``)
    seeds the shuffled order when ``seed`` is not given.
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 generator=None, prefetch_factor=None, persistent_workers=False, pin_memory_device="", *,
                 seed=None, device=None, dtype=None):
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:  # the stream decides the order: PyTorch refuses these options
            for name, value in (("shuffle", shuffle), ("sampler", sampler), ("batch_sampler", batch_sampler)):
                if value not in (None, False):
                    raise ValueError(f"DataLoader with IterableDataset: expected unspecified {name} option, "
                                     f"but got {name}={value!r}")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
        elif batch_size is None:
            if drop_last:
                raise ValueError("DataLoader: batch_size=None option disables auto-batching and is mutually "
                                 "exclusive with drop_last")
        elif not isinstance(batch_size, numbers.Integral) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"DataLoader: batch_size must be a positive integer, got {batch_size!r}")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler and shuffle=True are exclusive (the sampler shuffles)")
        if not isinstance(num_workers, numbers.Integral) or isinstance(num_workers, bool) or num_workers < 0:
            raise ValueError(f"DataLoader: num_workers must be a non-negative integer, got {num_workers!r}")
        if collate_fn is not None and not callable(collate_fn):
            raise TypeError(f"DataLoader: collate_fn must be callable, got {type(collate_fn).__name__}")
        self._sampler, self._batch_sampler, self.collate_fn = sampler, batch_sampler, collate_fn
        self.dataset = dataset
        self.batch_size = None if batch_size is None else int(batch_size)
        self._unbatched = batch_size is None and batch_sampler is None
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.num_workers = int(num_workers)
        if seed is not None and (not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or seed < 0):
            raise ValueError(f"DataLoader: seed must be a non-negative integer or None, got {seed!r}")
        if seed is None:
            if generator is not None and not isinstance(generator, np.random.Generator):
                raise TypeError(f"DataLoader: generator must be a numpy.random.Generator or None, "
                                f"got {type(generator).__name__}")
            seed = int((generator or backend.generator(backend.CPU)).integers(0, 2 ** 62))
        self.seed = int(seed)
        # As PyTorch's, batches of a TensorDataset stay on its tensors' device unless ``device`` says
        # otherwise; datasets without a device (MNIST) go to the default device.
        self.device = backend.device(device if device is not None else getattr(dataset, "device", None))
        self.epoch = 0
        self._tensors = None
        self._dtype = dtype
        if batched_on_device(dataset) and collate_fn is None and not self._unbatched and not self._iterable:
            self._source = getattr(dataset, "tensors", None)
            self._tensors = tuple(dataset.as_tensors(self.device, dtype))
        self.n = None if self._iterable else len(dataset) if sampler is None else len(sampler)

    def __len__(self):
        if self._iterable:  # len(dataset) raises TypeError for a stream without __len__, as PyTorch's
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        if self._batch_sampler is not None:
            return len(self._batch_sampler)
        if self._unbatched:
            return self.n
        if self.drop_last:
            return self.n // self.batch_size
        return -(-self.n // self.batch_size)

    @property
    def sampler(self):
        """The indices it loads, as PyTorch's ``loader.sampler``: the sampler given, else the loader's own order
        (:class:`_LoaderOrder`); None for an IterableDataset or with a batch_sampler."""
        if self._sampler is not None or self._iterable or self._batch_sampler is not None:
            return self._sampler
        return _LoaderOrder(self)

    @property
    def batch_sampler(self):
        """The batches of indices, as PyTorch's: the batch_sampler given, else a BatchSampler over
        :attr:`sampler` (None unbatched or for an IterableDataset)."""
        if self._batch_sampler is not None or self._unbatched or self._iterable:
            return self._batch_sampler
        return BatchSampler(self.sampler, self.batch_size, self.drop_last)

    def set_epoch(self, epoch: int):
        self.epoch = int(epoch)
        if self._sampler is not None and hasattr(self._sampler, "set_epoch"):
            self._sampler.set_epoch(epoch)

    def order(self, epoch=None):
        """The host permutation used for ``epoch`` (identity without shuffle; the sampler's
        indices with one)."""
        epoch = self.epoch if epoch is None else epoch
        if self._sampler is not None:
            if hasattr(self._sampler, "indices") and callable(self._sampler.indices):
                return np.asarray(self._sampler.indices(epoch))
            return np.fromiter((int(i) for i in self._sampler), dtype=np.int64)
        if not self.shuffle:
            return np.arange(self.n)
        return epoch_order(self.n, self.seed, epoch)

    def _index_batches(self, epoch):
        """Host index arrays, one per batch."""
        if self._batch_sampler is not None:
            for batch in self._batch_sampler:
                yield np.asarray(batch, dtype=np.int64).reshape(-1)
            return
        order, bs = self.order(epoch), self.batch_size
        for b in range(len(self)):
            yield order[b * bs:(b + 1) * bs]

    def __iter__(self):
        epoch = self.epoch
        self.epoch += 1
        if self._iterable:
            return self._stream_batches()
        if self._tensors is not None and getattr(self.dataset, "tensors", None) is not self._source:
            # (a TensorDataset given new tensors since: batches of those, as PyTorch's loader reads them)
            self._source = self.dataset.tensors
            self._tensors = tuple(self.dataset.as_tensors(self.device, self._dtype))
            self.n = len(self.dataset) if self._sampler is None else self.n
        return self._device_batches(epoch) if self._tensors is not None else self._host_batches(epoch)

    def _stream_batches(self):
        """An IterableDataset's items, batched in the order the stream gives them."""
        if self._unbatched:
            for item in self.dataset:
                yield self.collate_fn(item) if self.collate_fn is not None else _convert(item, self.device)
            return
        items = []
        for item in self.dataset:
            items.append(item)
            if len(items) == self.batch_size:
                yield self._collated(items)
                items = []
        if items and not self.drop_last:
            yield self._collated(items)

    def _collated(self, items):
        return self.collate_fn(items) if self.collate_fn is not None else _collate_items(items, self.device)

    def _device_batches(self, epoch):
        bs, count = self.batch_size, len(self) if self._batch_sampler is None else 0
        gather = rows_gatherer([t._data for t in self._tensors])  # every tensor's rows, two per launch
        if self._batch_sampler is not None:
            for idx in self._index_batches(epoch):
                with backend.on_device(self.device):
                    idx = backend.to_device(idx, self.device)
                yield [Tensor._from_array(a) for a in gather(idx)]
        elif self.shuffle or self._sampler is not None:
            with backend.on_device(self.device):
                perm = backend.to_device(self.order(epoch), self.device)  # one copy per epoch
            for b in range(count):
                idx = perm[b * bs:(b + 1) * bs]
                yield [Tensor._from_array(a) for a in gather(idx)]
        else:  # copies, not views: a batch edited in place must leave the dataset alone, as PyTorch's
            for b in range(count):
                yield [Tensor._from_array(t._data[b * bs:(b + 1) * bs].copy()) for t in self._tensors]

    def _host_batches(self, epoch):
        if self._unbatched:
            for i in self.order(epoch):
                item = self.dataset[int(i)]
                yield self.collate_fn(item) if self.collate_fn is not None else _convert(item, self.device)
            return
        for idx in self._index_batches(epoch):
            yield self._collated([self.dataset[int(i)] for i in idx])


def default_collate(batch, device=None):
    """PyTorch's ``default_collate``: a list of samples to one batch, stacking tensors, arrays and
    numbers position by position through tuples, lists and dicts."""
    return _collate_items(list(batch), backend.device(device))


def default_convert(data, device=None):
    """PyTorch's ``default_convert`` (what an unbatched loader applies to each item): NumPy arrays and NumPy
    scalars of numbers or bools become tensors, through dicts, named tuples, tuples (which become lists, as
    PyTorch's) and lists; nothing is stacked, everything else is passed as it is."""
    return _convert(data, backend.device(device))


def _convert(item, device):
    if isinstance(item, (np.ndarray, np.number, np.bool_)):
        if item.dtype.kind not in "biuf":  # strings, objects: left alone
            return item
        return Tensor._from_array(backend.to_device(np.asarray(item), device))
    if isinstance(item, dict):
        return type(item)({k: _convert(v, device) for k, v in item.items()})
    if isinstance(item, tuple) and hasattr(item, "_fields"):  # a named tuple keeps its type
        return type(item)(*(_convert(v, device) for v in item))
    if isinstance(item, (tuple, list)):
        return [_convert(v, device) for v in item]
    return item


def _collate_items(items, device):
    first = items[0]
    if isinstance(first, dict):
        return {k: _collate_items([it[k] for it in items], device) for k in first}
    if isinstance(first, (tuple, list)):
        if any(len(it) != len(first) for it in items):
            raise RuntimeError("DataLoader: each element in list of batch should be of equal size")
        cols = [_collate_items([it[k] for it in items], device) for k in range(len(first))]
        if hasattr(first, "_fields"):  # a named tuple keeps its type, as PyTorch's
            return type(first)(*cols)
        return cols  # (tuples too: PyTorch's batches of tuple samples are lists)
    if isinstance(first, (str, bytes)):
        return list(items)
    if not isinstance(first, (Tensor, np.ndarray, np.generic, numbers.Number)) or isinstance(first, complex):
        raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                        f"found {type(first).__name__}")
    return _collate(items, device)


def _collate(values, device):
    first = values[0]
    shapes = {tuple(getattr(v, "shape", ())) for v in values}
    if len(shapes) > 1:
        raise RuntimeError(f"default_collate: stack expects each tensor to be equal size, got shapes "
                           f"{sorted(shapes)[:4]}")
    if isinstance(first, Tensor):
        arr = np.stack([backend.to_device(v._data, backend.CPU) for v in values])
    elif isinstance(first, (np.ndarray, np.generic)):  # NumPy arrays and scalars keep their dtype, as PyTorch's
        return Tensor._from_array(backend.to_device(np.stack(values), device))
    elif all(isinstance(v, float) for v in values):  # plain Python floats: float64, as PyTorch collates them
        arr = np.asarray(values, dtype=np.float64)
    else:
        arr = np.asarray(values)
        if arr.dtype.kind in "iu":
            arr = arr.astype(np.int64)
        elif arr.dtype == np.float64:
            arr = arr.astype(np.float32)
    return Tensor._from_array(backend.to_device(arr, device))


def get_worker_info():
    """Information about the current loader worker: always None, since minifused loads in the calling
    thread (PyTorch returns None in the main process too)."""
    return None
