"""``DataLoader``: batches of device tensors from a dataset kept whole on the device.

A dataset with ``as_tensors(device, dtype)`` (MNIST, FashionMNIST, :class:`TensorDataset`, a
:class:`Subset` of one) is moved to the device once, at construction. Each epoch draws one
permutation on the host (``numpy`` PCG64: seeded by ``(seed, epoch)`` where ``seed`` is given,
else by a seed drawn from the generator when the iteration starts), copies it to the device
once, and every batch is a gather on the device: no per-batch host copy, no synchronization.
With ``seed`` the order depends only on it and the epoch number, not on the device, so a run
resumed at an epoch boundary sees the same batches. Other datasets (``__getitem__``
returning tuples of tensors / numbers) are collated on the host, batch by batch.
"""
from __future__ import annotations

import collections.abc
import copy
import functools
import numbers
from typing import Generic

import numpy as np

from .. import backend
from ..backend import IndexInputError, InputError
from ..kernels.gather import rows_gatherer
from ..ops._common import promote
from ..ops.creation import as_tensor, number_dtype
from ..ops.shape import stack
from ..tensor import Tensor
from .dataset import Dataset, DatasetArgumentError, IterableDataset, Subset, T_co, batched_on_device
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,
                      WeightedRandomSampler)


def epoch_order(n: int, seed: int, epoch: int):
    """The shuffled order of ``n`` samples for ``epoch`` of a run seeded with ``seed`` (host int64)."""
    return np.random.Generator(np.random.PCG64([int(seed), int(epoch)])).permutation(n)


class TensorDataset(Dataset[tuple]):
    """Tensors of equal first dimension, indexed together."""

    def __init__(self, *tensors):
        # (IndexError where PyTorch's reads tensors[0].size(0) of nothing, AssertionError for other lengths)
        if not tensors:
            raise IndexInputError("TensorDataset: expected at least one tensor, got none")
        for i, t in enumerate(tensors):
            if getattr(t, "ndim", 1) == 0:
                raise IndexInputError(f"TensorDataset: expected tensors with a first dimension to index, "
                                      f"got a 0-d one at position {i}")
        n = len(tensors[0])
        if any(len(t) != n for t in tensors):
            raise DatasetArgumentError(f"TensorDataset: size mismatch between tensors: tensors of different "
                                       f"lengths {[len(t) for t in tensors]}")
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


#: ``() -> (world size, rank)`` of the default process group, which ``minifused.distributed`` sets when imported
#: (the data layer does not import the distributed one); it raises where no group was initialized
process_group = None


class DistributedSampler(Sampler[T_co]):
    """This rank's share of a dataset's indices, for data-parallel training (PyTorch's semantics).

    Every rank draws the same order for an epoch (``seed`` must agree across ranks; the
    default 0 does) and takes every ``num_replicas``-th index from position ``rank``, so the
    shards are disjoint and every rank gets the same count, ``len(self)``. When the dataset
    does not split evenly, ``drop_last=False`` pads the order with its own first indices
    (a few samples are seen twice per epoch) and ``drop_last=True`` drops its tail.
    ``set_epoch(e)`` picks the epoch's order, as PyTorch's (without it every epoch has epoch 0's order);
    ``DataLoader.set_epoch(e)`` calls it too. ``num_replicas`` / ``rank`` default to the process group's world
    size and rank (``minifused.distributed.init_process_group``), as PyTorch's.
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        if num_replicas is None or rank is None:
            if process_group is None:
                raise RuntimeError("DistributedSampler: give num_replicas and rank, or initialize the process group "
                                   "(minifused.distributed.init_process_group) first")
            world, own = process_group()
            num_replicas = world if num_replicas is None else num_replicas
            rank = own if rank is None else rank
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ValueError(f"DistributedSampler: expected 0 <= rank < num_replicas, got rank {rank}, "
                             f"num_replicas {num_replicas}")
        self.dataset, self.n = dataset, len(dataset)
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
    its place (and an instance of that class, below, as code that checks ``loader.sampler`` expects). Iterated,
    the order of the next epoch the loader loads; its length, the dataset's now."""

    def __init__(self, loader):
        self.loader = loader
        self.data_source = loader.dataset

    def __iter__(self):
        return iter(self.loader.order().tolist())

    def __len__(self):
        return len(self.loader.dataset)


class _SequentialOrder(_LoaderOrder, SequentialSampler):
    """A DataLoader's own order without ``shuffle``: a SequentialSampler."""


class _RandomOrder(_LoaderOrder, RandomSampler):
    """A DataLoader's own order with ``shuffle``: a RandomSampler (a permutation, the loader's generator)."""

    replacement, _num_samples = False, None

    @property
    def generator(self):
        return self.loader.generator


# Samplers whose whole order the loader takes at once, each epoch (whatever they yield then): one copy to the
# device per epoch. Any other sampler is drawn from batch by batch, as PyTorch's BatchSampler draws from it.
_WHOLE_ORDER = (SequentialSampler, RandomSampler, SubsetRandomSampler, WeightedRandomSampler)


def _multiprocessing_context(context, num_workers):
    """PyTorch's check of ``multiprocessing_context``: only with workers; a start method's name becomes its
    context."""
    if context is None:
        return None
    if num_workers == 0:
        raise ValueError(f"DataLoader: multiprocessing_context can only be used with multi-process loading "
                         f"(num_workers > 0), but got num_workers={num_workers}")
    import multiprocessing

    if isinstance(context, str):
        methods = multiprocessing.get_all_start_methods()
        if context not in methods:
            raise ValueError(f"DataLoader: multiprocessing_context option should specify a valid start method in "
                             f"{methods!r}, but got multiprocessing_context={context!r}")
        context = multiprocessing.get_context(context)
    if not isinstance(context, multiprocessing.context.BaseContext):
        raise TypeError(f"DataLoader: multiprocessing_context option should be a valid context object or a string "
                        f"specifying the start method, but got multiprocessing_context={context!r}")
    return context


def _index_array(op, batch):
    """A batch of indices (a list, an array or a tensor of ints, or of lists of them) as host int64: TypeError
    for a batch that cannot be iterated (a batch_sampler of single ints), as PyTorch's fetcher raises; IndexError
    for an index that is no integer (a float, None), as PyTorch's tensor indexing raises."""
    if not isinstance(batch, (list, tuple, np.ndarray, Tensor)):
        try:
            batch = list(batch)
        except TypeError:
            raise TypeError(f"{op}: a batch of indices must be iterable, got {type(batch).__name__}") from None
    arr = np.asarray(batch)
    if arr.ndim == 0:
        raise TypeError(f"{op}: a batch of indices must be iterable, got a single index {arr.item()!r}")
    if arr.size and arr.dtype.kind not in "iu":
        bad = next(v for v in arr.reshape(-1).tolist() if not isinstance(v, int) or isinstance(v, bool))
        raise IndexError(f"{op}: indices must be integers, got {type(bad).__name__} {bad!r}")
    return arr.astype(np.int64, copy=False)


def _in_range(op, idx, n):
    """Host int64 ``idx`` as rows of ``n``: negative ones counted from the end, as Python's indexing; IndexError
    past either end (the device gather assumes rows in range)."""
    if idx.size and (idx.max() >= n or idx.min() < -n):
        bad = int(idx[(idx >= n) | (idx < -n)][0])
        raise IndexError(f"{op}: index {bad} is out of range for {n} samples")
    return np.where(idx < 0, idx + n, idx)


class DataLoader(Generic[T_co]):
    """Iterate over ``dataset`` in batches of ``batch_size`` (PyTorch's arguments, in its order).

    ``shuffle`` draws a new order every epoch; ``drop_last`` drops a final short batch; ``device`` / ``dtype``
    say where the batches live (by default: a TensorDataset's device, else the default device) and the floating
    dtype of the inputs. Without ``seed``, as PyTorch's RandomSampler, each iteration draws its order's seed
    from ``generator`` (a ``numpy.random.Generator`` such as ``minifused.Generator``), else from the global
    generator, when it starts: re-seeding either before an epoch repeats its order, and building a loader draws
    nothing. With ``seed`` the order of epoch ``e`` is ``epoch_order(n, seed, e)``, the same on every device, so a
    run resumed at an epoch boundary sees the same batches; ``set_epoch(e)`` picks the epoch the next iteration
    uses (it advances by one after each iteration).
    ``sampler`` (instead of ``shuffle``) gives the indices to load: a :class:`DistributedSampler`'s order is that
    of its epoch (its ``set_epoch(e)``, or the loader's, which calls it), any other iterable of
    indices is iterated afresh each epoch, and every index it yields is loaded (an endless one as far as the
    loader is iterated). ``batch_sampler`` gives whole batches of indices
    instead (then leave ``batch_size``, ``shuffle``, ``sampler`` and ``drop_last`` alone).
    ``batch_size=None`` turns batching off: each item comes alone, its NumPy arrays made tensors
    (or passed through ``collate_fn``). Lengths (``len(loader)``, the samples of an epoch) are read when asked
    for, so a dataset or sampler that changes size after the loader was made is loaded whole.
    ``collate_fn(list_of_items)`` builds each batch on the host; the default (:func:`default_collate`, the
    ``collate_fn`` attribute when none is given) stacks tensors, arrays and numbers position by position
    (tuples, lists and dicts of them too). A dataset with ``__getitems__`` is asked for a batch's items at once.
    An :class:`IterableDataset` is iterated afresh each epoch and its items batched as they come
    (``shuffle``, ``sampler`` and ``batch_sampler`` must be left unset, as PyTorch's; ``len()`` needs the
    dataset's own ``__len__``).

    A dataset with ``as_tensors`` (a :class:`Subset` of one too) and the default ``collate_fn`` is moved to the
    device once and batched there (sample by sample where its tensors require grad, to keep the graph); a Subset's
    current ``indices`` and the dataset's current tensors are read at each iteration. ``num_workers``,
    ``pin_memory``, ``timeout``, ``worker_init_fn``, ``multiprocessing_context``, ``prefetch_factor``,
    ``persistent_workers`` and ``in_order`` are checked and kept as PyTorch's are (the same attributes, the same
    errors): loading runs in the calling thread, with no worker processes, so ``worker_init_fn`` is never called
    (per-worker seeds or shards set in it would otherwise apply to the one process that loads everything) and
    ``get_worker_info()`` is None.
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True, seed=None, device=None, dtype=None):
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:  # the stream decides the order: PyTorch refuses these options
            for name, value in (("shuffle", shuffle), ("sampler", sampler), ("batch_sampler", batch_sampler)):
                if value not in (None, False):
                    raise ValueError(f"DataLoader with IterableDataset: expected unspecified {name} option, "
                                     f"but got {name}={value!r}")
        if batch_sampler is not None:
            clashes = [f"{name}={value!r}" for name, value, unset in (
                ("batch_size", batch_size, batch_size == 1), ("shuffle", shuffle, not shuffle),
                ("sampler", sampler, sampler is None), ("drop_last", drop_last, not drop_last)) if not unset]
            if clashes:
                raise ValueError(f"DataLoader: batch_sampler option is mutually exclusive with batch_size, "
                                 f"shuffle, sampler, and drop_last, got {', '.join(clashes)}")
            batch_size = None
        elif batch_size is None:
            if drop_last:
                raise ValueError("DataLoader: batch_size=None option disables auto-batching and is mutually "
                                 "exclusive with drop_last")
        elif not isinstance(batch_size, numbers.Integral) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"DataLoader: batch_size must be a positive integer, got {batch_size!r}")
        elif not isinstance(drop_last, bool):  # (PyTorch's BatchSampler refuses it: 0, None, "yes")
            raise ValueError(f"DataLoader: drop_last should be a boolean value, but got drop_last={drop_last!r}")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle (the sampler gives the "
                             "order), got shuffle=True and a sampler")
        if not isinstance(num_workers, numbers.Integral) or isinstance(num_workers, bool):
            raise TypeError(f"DataLoader: num_workers must be an int, got {type(num_workers).__name__}")
        if num_workers < 0:
            raise ValueError(f"DataLoader: num_workers must be a non-negative integer, got {num_workers!r}")
        if collate_fn is not None and not callable(collate_fn):
            raise TypeError(f"DataLoader: collate_fn must be callable, got {type(collate_fn).__name__}")
        # PyTorch's checks of the worker options, though no worker processes run here (TypeError for a value
        # that is no number, as PyTorch's comparison with 0 raises)
        if not isinstance(timeout, numbers.Real):
            raise TypeError(f"DataLoader: timeout must be a number, got {type(timeout).__name__}")
        if prefetch_factor is not None and not isinstance(prefetch_factor, numbers.Real):
            raise TypeError(f"DataLoader: prefetch_factor must be a number or None, got "
                            f"{type(prefetch_factor).__name__}")
        if timeout < 0:
            raise ValueError(f"DataLoader: timeout option should be non-negative, got timeout={timeout!r}")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("DataLoader: prefetch_factor option could only be specified in multiprocessing. "
                             "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None.")
        if prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError(f"DataLoader: prefetch_factor option should be non-negative, got "
                             f"prefetch_factor={prefetch_factor!r}")
        if persistent_workers and num_workers == 0:
            raise ValueError(f"DataLoader: persistent_workers option needs num_workers > 0, got "
                             f"num_workers={num_workers}")
        if generator is not None and not isinstance(generator, np.random.Generator):
            raise TypeError(f"DataLoader: generator must be a numpy.random.Generator (minifused.Generator) or "
                            f"None, got {type(generator).__name__}")
        if seed is not None and (not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or seed < 0):
            raise ValueError(f"DataLoader: seed must be a non-negative integer or None, got {seed!r}")
        self._sampler, self._batch_sampler = sampler, batch_sampler
        self.dataset = dataset
        self.batch_size = None if batch_size is None else int(batch_size)
        self._unbatched = batch_size is None and batch_sampler is None
        self.shuffle = bool(shuffle)
        if self.shuffle and not self._iterable and len(dataset) == 0:  # (PyTorch's RandomSampler refuses it)
            raise ValueError("DataLoader: num_samples should be a positive integer value, but got num_samples=0")
        self.drop_last = bool(drop_last)
        self.num_workers = int(num_workers)
        self.collate_fn = collate_fn if collate_fn is not None else default_convert if self._unbatched \
            else default_collate
        self.pin_memory, self.pin_memory_device, self.timeout = pin_memory, pin_memory_device, timeout
        self.worker_init_fn, self.persistent_workers, self.in_order = worker_init_fn, persistent_workers, in_order
        self.prefetch_factor = 2 if num_workers > 0 and prefetch_factor is None else prefetch_factor
        self.multiprocessing_context = _multiprocessing_context(multiprocessing_context, num_workers)
        self.generator = generator
        self.seed = None if seed is None else int(seed)
        # As PyTorch's, batches of a TensorDataset stay on its tensors' device unless ``device`` says
        # otherwise; datasets without a device (MNIST) go to the default device.
        self.device = backend.device(device if device is not None else getattr(dataset, "device", None))
        self.epoch = 0
        self._tensors = None
        self._dtype = dtype
        self._subsets = []  # the Subsets around the dataset whose tensors are batched, outermost first
        if (batched_on_device(dataset) and self._user_collate() is None and not self._unbatched
                and not self._iterable):
            base = dataset
            while isinstance(base, Subset):
                self._subsets.append(base)
                base = base.dataset
            self._base, self._source = base, getattr(base, "tensors", None)
            self._tensors = tuple(base.as_tensors(self.device, dtype))
        self._initialized = True

    # what PyTorch's loader refuses to have set once built (its batching is fixed then)
    _FIXED = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")

    def __setattr__(self, name, value):
        if name in self._FIXED and getattr(self, "_initialized", False):
            raise ValueError(f"DataLoader: {name} attribute should not be set after DataLoader is initialized")
        super().__setattr__(name, value)

    @property
    def n(self):
        """The samples an epoch loads, counted now: the sampler's length where one was given, else the
        dataset's (None for an IterableDataset)."""
        if self._iterable:
            return None
        return len(self.dataset) if self._sampler is None else len(self._sampler)

    def __len__(self):
        if self._iterable:  # len(dataset) raises TypeError for a stream without __len__, as PyTorch's
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        if self._batch_sampler is not None:
            return len(self._batch_sampler)
        n = self.n  # (TypeError for a sampler without __len__, as PyTorch's)
        if self._unbatched:
            return n
        if self.drop_last:
            return n // self.batch_size
        return -(-n // self.batch_size)

    @property
    def sampler(self):
        """The indices it loads, as PyTorch's ``loader.sampler``: the sampler given, else the loader's own order
        (:class:`_LoaderOrder`; with a batch_sampler, the unused sequential one PyTorch makes, whose length is the
        dataset's); None for an IterableDataset."""
        if self._sampler is not None or self._iterable:
            return self._sampler
        return (_RandomOrder if self.shuffle else _SequentialOrder)(self)

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
        """The host indices of ``epoch`` (default: the next one), whole: the dataset's in order, shuffled
        (without ``seed``, each call draws a new order, as an iteration does), or all the sampler's."""
        if isinstance(self._sampler, DistributedSampler):  # (its own epoch unless one is given, as PyTorch's)
            return np.asarray(self._sampler.indices(epoch), dtype=np.int64)
        epoch = self.epoch if epoch is None else epoch
        if self._sampler is not None:
            return np.fromiter((int(i) for i in self._sampler), dtype=np.int64)
        n = len(self.dataset)
        if not self.shuffle:
            return np.arange(n)
        if self.seed is not None:
            return epoch_order(n, self.seed, epoch)
        seed = int((self.generator or backend.generator(backend.CPU)).integers(0, 2 ** 62))
        return np.random.Generator(np.random.PCG64(seed)).permutation(n)

    def _epoch_indices(self, epoch):
        """The indices of ``epoch``: a host int64 array where the whole order is taken at once (the loader's
        own, one of the samplers here; a DistributedSampler's of its own epoch), else the sampler's iterator, drawn
        lazily."""
        s = self._sampler
        if isinstance(s, DistributedSampler):
            return self.order()
        if s is None or type(s) in _WHOLE_ORDER:
            return self.order(epoch)
        return iter(s)

    def _index_batches(self, indices):
        """The batches of ``indices`` (None: the batch sampler's, as it yields them): slices of an array, or
        lists of what an iterator yields, each batch drawn only when the one before was loaded."""
        if self._batch_sampler is not None:
            yield from self._batch_sampler
            return
        bs = self.batch_size
        if isinstance(indices, np.ndarray):
            for start in self._starts(len(indices)):
                yield indices[start:start + bs]
            return
        batch = []
        for i in indices:
            batch.append(i)
            if len(batch) == bs:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def _starts(self, n):
        """Where the batches of ``n`` indices start (a short last one dropped with drop_last)."""
        return range(0, n - n % self.batch_size if self.drop_last else n, self.batch_size)

    def _user_collate(self):
        """The collate_fn given, or None where it is PyTorch's default (then batches are built on the device)."""
        default = default_convert if self._unbatched else default_collate
        return None if self.collate_fn is default else self.collate_fn

    def __iter__(self):
        return _LoaderIterator(self, self._batches())

    def _batches(self):
        """This epoch's batches (a generator), by the path that fits the dataset; the epoch counter moves on."""
        epoch = self.epoch
        self.epoch += 1
        if self._iterable:
            return self._stream_batches()
        if self._tensors is None or self._user_collate() is not None:
            return self._host_batches(epoch)
        if getattr(self._base, "tensors", None) is not self._source:
            # (a TensorDataset given new tensors since: batches of those, as PyTorch's loader reads them)
            self._source = self._base.tensors
            self._tensors = tuple(self._base.as_tensors(self.device, self._dtype))
        if any(t.requires_grad for t in self._tensors):
            # a gather of raw rows would drop the graph: stack the samples, whose batches require grad through
            # the dataset's tensors, as PyTorch's collate gives them
            return self._host_batches(epoch)
        return self._device_batches(epoch)

    def _stream_batches(self):
        """An IterableDataset's items, batched in the order the stream gives them."""
        if self._unbatched:
            for item in self.dataset:
                yield self._converted(item)
            return
        items = []
        for item in self.dataset:
            items.append(item)
            if len(items) == self.batch_size:
                yield self._collated(items)
                items = []
        if items and not self.drop_last:
            yield self._collated(items)

    def _converted(self, item):
        fn = self._user_collate()
        return fn(item) if fn is not None else _convert(item, self.device)

    def _collated(self, items):
        fn = self._user_collate()
        return fn(items) if fn is not None else _collate_items(items, self.device, default_collate_fn_map)

    def _rows(self, idx):
        """Positions in the dataset (host int64) -> rows of the device tensors, through each Subset's current
        ``indices``, checked."""
        for sub in self._subsets:
            idx = np.asarray(sub.indices, dtype=np.int64).reshape(-1)[_in_range("DataLoader", idx, len(sub))]
        return _in_range("DataLoader", idx, self._tensors[0].shape[0])

    def _device_batches(self, epoch):
        gather = rows_gatherer([t._data for t in self._tensors])  # every tensor's rows, two per launch
        bs = self.batch_size
        if self._batch_sampler is None and self._sampler is None and not self.shuffle and not self._subsets:
            # copies, not views: a batch edited in place must leave the dataset alone, as PyTorch's
            for start in self._starts(len(self.dataset)):
                yield [Tensor._from_array(t._data[start:start + bs].copy()) for t in self._tensors]
            return
        indices = None if self._batch_sampler is not None else self._epoch_indices(epoch)
        if isinstance(indices, np.ndarray):  # the whole epoch: one copy to the device
            with backend.on_device(self.device):
                perm = backend.to_device(self._rows(indices), self.device)
            for start in self._starts(len(perm)):
                yield [Tensor._from_array(a) for a in gather(perm[start:start + bs])]
            return
        for idx in self._index_batches(indices):
            idx = _index_array("DataLoader", idx)
            if not idx.size:  # (PyTorch's default_collate fails on an empty batch)
                raise IndexError("DataLoader: a batch of no indices: default_collate needs at least one sample")
            # a sampler of index lists (a BatchSampler given as sampler): each sample is the rows at its list,
            # as PyTorch's dataset[list], so the batch is (batch_size, len(list), ...)
            shape = idx.shape
            with backend.on_device(self.device):
                idx = backend.to_device(self._rows(idx.reshape(-1)), self.device)
            yield [Tensor._from_array(a.reshape(shape + a.shape[1:])) for a in gather(idx)]

    def _host_batches(self, epoch):
        if self._unbatched:
            indices = self._epoch_indices(epoch)
            for i in indices.tolist() if isinstance(indices, np.ndarray) else indices:
                yield self._converted(self.dataset[i])
            return
        getitems = getattr(self.dataset, "__getitems__", None)  # (PyTorch's fetcher asks for a batch at once)
        indices = None if self._batch_sampler is not None else self._epoch_indices(epoch)
        for idx in self._index_batches(indices):
            idx = idx.tolist() if isinstance(idx, np.ndarray) else list(idx)
            yield self._collated(getitems(idx) if getitems else [self.dataset[i] for i in idx])


class _LoaderIterator:
    """An epoch's iterator over a loader's batches: ``len()`` is the loader's, as PyTorch's iterator has
    (``for _ in range(len(it)): next(it)``)."""

    def __init__(self, loader, batches):
        self._loader, self._batches = loader, batches

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._batches)

    def __len__(self):
        return len(self._loader)


#: PyTorch's ``default_collate_fn_map``: handlers ``fn(batch, *, collate_fn_map)`` by sample type (a type or a tuple
#: of them) that default_collate asks before its own rules, at any depth: add a custom sample type to it
default_collate_fn_map = {}


def default_collate(batch, device=None):
    """PyTorch's ``default_collate``: a list of samples to one batch, stacking tensors, arrays and
    numbers position by position through tuples, lists and dicts (:data:`default_collate_fn_map` first)."""
    return collate(batch, collate_fn_map=default_collate_fn_map, device=device)


def collate(batch, *, collate_fn_map=None, device=None):
    """PyTorch's ``collate``: :func:`default_collate`'s rules, with the handlers of ``collate_fn_map`` first (a sample
    of a type in it, or an instance of one, is collated by its handler, given the same map)."""
    items = batch if isinstance(batch, (list, tuple)) else list(batch)
    return _collate_items(items, backend.device(device), collate_fn_map)


def default_convert(data, device=None):
    """PyTorch's ``default_convert`` (what an unbatched loader applies to each item): NumPy arrays and NumPy
    scalars of numbers or bools become tensors, through mappings and sequences of their own type (a defaultdict, a
    deque, a named tuple; plain tuples become lists, as PyTorch's); nothing is stacked, everything else is passed
    as it is."""
    return _convert(data, backend.device(device))


def _convert(item, device):
    if isinstance(item, (np.ndarray, np.number, np.bool_)):
        if item.dtype.kind not in "biufc":  # strings, objects, dates: left alone
            return item
        return Tensor._from_array(backend.to_device(np.asarray(item), device))
    if isinstance(item, (str, bytes)):
        return item
    if isinstance(item, collections.abc.Mapping):
        return _rebuilt(item, {k: _convert(v, device) for k, v in item.items()})
    if isinstance(item, tuple) and hasattr(item, "_fields"):  # a named tuple keeps its type
        return type(item)(*(_convert(v, device) for v in item))
    if isinstance(item, tuple):
        return [_convert(v, device) for v in item]  # (a list, as PyTorch's)
    if isinstance(item, collections.abc.Sequence):
        return _rebuilt(item, [_convert(v, device) for v in item])
    return item


def _rebuilt(item, values):
    """``values`` (a dict for a mapping, a list for a sequence) in a container of ``item``'s own type, as PyTorch's:
    a copy of a mutable one given them (a defaultdict keeps its default), else the type built from them; where
    that type cannot be built so (a range), ``values`` as they are."""
    try:
        if isinstance(item, (collections.abc.MutableMapping, collections.abc.MutableSequence)):
            out = copy.copy(item)
            for k, v in values.items() if isinstance(values, dict) else enumerate(values):
                out[k] = v
            return out
        return type(item)(values)
    except TypeError:
        return values


def _collate_items(items, device, fn_map=None):
    """PyTorch's ``collate``: the first sample's type decides (a handler of ``fn_map`` for it, else tensors, NumPy
    arrays, NumPy scalars, floats, ints, strings, mappings, named tuples, sequences, in that order); ``items`` is a
    list, or a tuple of one position of tuple samples (strings come back as that tuple, as PyTorch's)."""
    if not len(items):
        raise IndexError("default_collate: the batch is empty: there is no sample to collate")
    first = items[0]
    if fn_map:  # (the exact type's handler, else the first one whose type the sample is an instance of)
        handler = fn_map.get(type(first)) or next((fn for t, fn in fn_map.items() if isinstance(first, t)), None)
        if handler is not None:
            return handler(items, collate_fn_map=fn_map)
    if isinstance(first, Tensor):
        return _collate_tensors(items, device)
    if isinstance(first, np.ndarray):
        if first.dtype.kind in "SUO":  # strings, bytes, objects: no tensor of them
            raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                            f"found {first.dtype}")
        return _collate_tensors([_as_tensor_item(v) for v in items], device)
    if isinstance(first, (np.bool_, np.number)):  # (before float: numpy.float64 is a float)
        return _collate_numbers(items, None, device)
    if isinstance(first, float):
        return _collate_numbers(items, backend.float64, device)
    if isinstance(first, int):
        return _collate_numbers(items, None, device)
    if isinstance(first, (str, bytes)):
        return items
    if isinstance(first, collections.abc.Mapping):
        cols = {k: _collate_items([it[k] for it in items], device, fn_map) for k in first}
        try:  # the sample's own mapping type (a defaultdict stays one), as PyTorch's
            if isinstance(first, collections.abc.MutableMapping):
                out = copy.copy(first)
                out.update(cols)
                return out
            return type(first)(cols)
        except TypeError:
            return cols
    if isinstance(first, tuple) and hasattr(first, "_fields"):  # a named tuple keeps its type, as PyTorch's
        return type(first)(*(_collate_items(col, device, fn_map) for col in zip(*items)))
    if isinstance(first, collections.abc.Sequence):
        if any(len(it) != len(first) for it in items):
            raise RuntimeError("DataLoader: each element in list of batch should be of equal size")
        cols = [_collate_items(col, device, fn_map) for col in zip(*items)]
        if isinstance(first, tuple):
            return cols  # (PyTorch's batches of tuple samples are lists)
        try:
            if isinstance(first, collections.abc.MutableSequence):
                out = copy.copy(first)
                for k, col in enumerate(cols):
                    out[k] = col
                return out
            return type(first)(cols)
        except TypeError:
            return cols
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                    f"found {type(first).__name__}")


def _type_name(v):
    t = type(v)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"


def _as_tensor_item(v):
    """One sample of a batch of NumPy arrays as a tensor (PyTorch's ``as_tensor``)."""
    if isinstance(v, Tensor):
        return v
    arr = np.asarray(v)
    if arr.dtype.kind not in "biufc":
        raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                        f"found {arr.dtype}")
    if isinstance(v, np.ndarray):
        return Tensor._from_array(arr)
    return as_tensor(v, device=backend.CPU)  # (a list of Python floats is float32, as PyTorch's as_tensor)


def _collate_tensors(values, device):
    """``stack(values)`` as PyTorch's collate: its type promotion (int64 beside float32 gives float32) and, for
    samples that require grad, its graph; on ``device``."""
    for i, v in enumerate(values):
        if not isinstance(v, Tensor):
            raise TypeError(f"default_collate: expected Tensor as element {i} in argument 0, but got {_type_name(v)}")
    shapes = {tuple(v.shape) for v in values}
    if len(shapes) > 1:
        raise RuntimeError(f"default_collate: stack expects each tensor to be equal size, got shapes "
                           f"{sorted(shapes)[:4]}")
    return stack(list(values)).to(device)


def _number_dtype(v):
    """The dtype PyTorch's tensor-from-a-list gives this element (:func:`number_dtype`, as ``tensor()`` infers it),
    for the numbers a batch of them may hold: Python's, NumPy scalars, 0-d tensors or arrays."""
    if (isinstance(v, (Tensor, np.ndarray)) and v.ndim == 0 and np.dtype(v.dtype).kind in "biufc"
            or isinstance(v, (np.bool_, np.number, bool, int, float))):
        return number_dtype(v)
    raise TypeError(f"default_collate: a batch of numbers cannot hold {_type_name(v)}"
                    + (f" of shape {tuple(v.shape)}" if hasattr(v, "shape") else ""))


def _collate_numbers(values, dtype, device):
    """Numbers (Python's, NumPy scalars) to one tensor: ``dtype`` (float64 for Python floats, as PyTorch's), or
    the elements' dtypes promoted (``[numpy.float32(1), 2.0]`` is float32, ``[1, 2.5]`` the default dtype)."""
    dtypes = [_number_dtype(v) for v in values]
    if dtype is None:
        dtype = functools.reduce(promote, dtypes)
    host = [v.item() if isinstance(v, Tensor) else v for v in values]
    try:
        with np.errstate(over="ignore"):  # (a float past the dtype's range is inf, as PyTorch's, without a warning)
            arr = np.asarray(host, dtype=dtype)
    except OverflowError:  # (a Python int past the dtype: PyTorch's ValueError into an int, OverflowError a float)
        floating = backend.is_floating(dtype)
        raise (OverflowError if floating else InputError)(
            f"default_collate: a Python int in the batch is too large to convert to {np.dtype(dtype)}"
            + ("" if floating else " (Overflow when unpacking long long)")) from None
    return Tensor._from_array(backend.to_device(arr, device))


def get_worker_info():
    """Information about the current loader worker: always None, since minifused loads in the calling
    thread (PyTorch returns None in the main process too)."""
    return None
