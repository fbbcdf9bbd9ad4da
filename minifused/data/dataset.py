"""Datasets as in ``torch.utils.data``: the map-style ``Dataset`` base, ``Subset``, ``ConcatDataset``,
``StackDataset`` and ``random_split``; the iterable-style ``IterableDataset`` (a stream of items, iterated rather
than indexed: a ``DataLoader`` batches them in the order they come, with no sampler or shuffle) and
``ChainDataset``.

A dataset is anything with ``__getitem__(i)`` and ``__len__()``. A :class:`Subset` of a dataset
that can hand over whole device tensors (``as_tensors``, as MNIST and ``TensorDataset`` do) hands
over its rows of them, so a ``DataLoader`` over a split still batches on the device.
"""
from __future__ import annotations

import bisect
import math
import numbers
from typing import Generic, Iterable, TypeVar

import numpy as np

from .. import backend
from ..backend import InputError, InputTypeError
from ..tensor import Tensor

#: the type of a dataset's items: ``Dataset[T]``, as PyTorch's generic classes (``class Pairs(Dataset[tuple])``)
T_co = TypeVar("T_co", covariant=True)


class DatasetArgumentError(InputError, AssertionError):
    """Datasets that PyTorch's asserts refuse (none at all, or of different lengths): the AssertionError they
    raise, and a ValueError as the rest of the bad input here."""


class DatasetTypeError(InputTypeError, AssertionError):
    """A dataset of the wrong kind where PyTorch asserts (an IterableDataset in a ConcatDataset, a map-style one in
    a ChainDataset): the AssertionError it raises, and a TypeError."""


class Dataset(Generic[T_co]):
    """The base class of map-style datasets: subclasses define ``__getitem__`` and ``__len__``."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__}: subclasses of Dataset must define __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


def batched_on_device(dataset):
    """Whether the loader may batch ``dataset`` from its ``as_tensors`` (on the device, no ``__getitem__`` per
    sample): only where the class that gives ``as_tensors`` also gives ``__getitem__``, ``__getitems__`` and
    ``__len__`` (a subclass that transforms its samples or shortens itself is read sample by sample, as PyTorch
    reads it)."""
    cls = type(dataset)
    owner = next((c for c in cls.__mro__ if "as_tensors" in c.__dict__), None)
    return (owner is not None
            and all(getattr(cls, name, None) is getattr(owner, name, None)
                    for name in ("__getitem__", "__getitems__", "__len__"))
            and hasattr(dataset, "as_tensors"))  # (a Subset's is absent where its base has none)


class Subset(Dataset[T_co]):
    """The items of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        checked = [int(i) for i in _as_index_list("Subset", indices)]
        # a list given is kept, not copied, as PyTorch's: indices appended to it later are in the subset
        self.indices = indices if type(indices) is list else checked

    def __getitem__(self, idx):
        if isinstance(idx, list):  # the base dataset's item at those indices, as PyTorch's
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        """The items at ``indices`` (a list), as PyTorch's batched fetch: through the base dataset's
        ``__getitems__`` where it has one (through this class's own ``__getitem__`` where a subclass gives one)."""
        if type(self).__getitem__ is not Subset.__getitem__:
            return [self[i] for i in indices]
        getitems = getattr(self.dataset, "__getitems__", None)
        if callable(getitems):
            return getitems([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self):
        return len(self.indices)

    @property
    def device(self):
        return getattr(self.dataset, "device", None)

    @property
    def as_tensors(self):
        """The base dataset's whole tensors, cut to these rows (absent when the base has none)."""
        if not batched_on_device(self.dataset):  # (hasattr(subset, "as_tensors") is then False)
            raise AttributeError(f"{type(self.dataset).__name__} is read sample by sample")
        whole = self.dataset.as_tensors

        def as_tensors(device=None, dtype=None):
            out = []
            for t in whole(device, dtype):
                with backend.on_device(t.device):
                    idx = backend.to_device(np.asarray(self.indices, dtype=np.int64), t.device)
                    out.append(Tensor._from_array(t._data.take(idx, axis=0)))
            return tuple(out)

        return as_tensors


class IterableDataset(Dataset[T_co], Iterable[T_co]):
    """The base class of iterable-style datasets: subclasses define ``__iter__`` (``__len__`` optionally); one
    without it cannot be built (TypeError: an abstract class, as PyTorch's)."""

    def __add__(self, other):
        return ChainDataset([self, other])


class ChainDataset(IterableDataset[T_co]):
    """Several iterable datasets, one after the other (chained lazily, as ``itertools.chain``)."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise DatasetTypeError(f"ChainDataset only supports IterableDataset, got {type(d).__name__}")
            yield from d

    def __len__(self):
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise DatasetTypeError(f"ChainDataset only supports IterableDataset, got {type(d).__name__}")
            total += len(d)  # TypeError from len() for a dataset without __len__, as PyTorch's
        return total


class ConcatDataset(Dataset[T_co]):
    """Several datasets, one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise DatasetArgumentError("ConcatDataset: datasets should not be an empty iterable")
        if any(isinstance(d, IterableDataset) for d in self.datasets):
            raise DatasetTypeError("ConcatDataset does not support IterableDataset (use ChainDataset)")
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        n = len(self)
        if idx < 0:
            if -idx > n:  # (ValueError, as PyTorch's; past the end is an IndexError, which ends a for loop)
                raise ValueError(f"ConcatDataset: absolute value of index should not exceed dataset length, "
                                 f"got index {idx} for length {n}")
            idx += n
        if idx >= n:
            raise IndexError(f"ConcatDataset: index {idx} out of range for length {n}")
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][idx - start]


class StackDataset(Dataset[T_co]):
    """Datasets of equal length zipped: item ``i`` is ``tuple(d[i] for d in args)``, or with keyword datasets
    ``{name: d[i]}`` (PyTorch's ``StackDataset(*args, **kwargs)``, one form or the other)."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("StackDataset: supported either tuple- (via args) or dict- (via kwargs) like "
                             "input/output, but both types are given")
        if not args and not kwargs:
            raise ValueError("StackDataset: at least one dataset should be passed")
        datasets = list(args) if args else list(kwargs.values())
        lengths = [len(d) for d in datasets]
        if any(n != lengths[0] for n in lengths):
            raise ValueError(f"StackDataset: size mismatch between datasets, lengths {lengths}")
        self._length = lengths[0]
        self.datasets = args if args else kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices):
        """The items at ``indices`` (a list), as PyTorch's batched fetch."""
        return [self[i] for i in indices]

    def __len__(self):
        return self._length


def random_split(dataset, lengths, generator=None):
    """Split ``dataset`` into non-overlapping random :class:`Subset` s of the given ``lengths``.

    ``lengths`` (a list, tuple or 1-d tensor) are counts summing to ``len(dataset)``, or fractions summing to 1
    (PyTorch's rule: floor each share, then hand the remainder out one by one from the first; lengths that sum
    to 1 are fractions even as ints). The order comes from minifused's global generator
    (``minifused.manual_seed``); ``generator`` may be a ``numpy.random.Generator`` instead.
    """
    if isinstance(lengths, Tensor):
        lengths = lengths.tolist()
    elif isinstance(lengths, np.ndarray) or backend.is_cuda_array(lengths):
        lengths = backend.to_device(lengths, backend.CPU).tolist()
    if not isinstance(lengths, (list, tuple)):
        raise TypeError(f"random_split: lengths must be a list of ints or fractions, got {type(lengths).__name__}")
    n = len(dataset)
    reals = all(isinstance(x, numbers.Real) and not isinstance(x, bool) for x in lengths)
    # PyTorch's test: lengths are fractions where their sum is close to 1 (math.isclose's relative 1e-9) and
    # not above it, ints too ([1, 0] of 10 items: all, then none); any other floats are refused
    if reals and (not all(isinstance(x, numbers.Integral) for x in lengths)
                  or (math.isclose(sum(lengths), 1.0) and sum(lengths) <= 1)):
        if any(x < 0 or x > 1 for x in lengths) or not (math.isclose(sum(lengths), 1.0) and sum(lengths) <= 1):
            raise ValueError(f"random_split: fractions must lie in [0, 1] and sum to 1, got {list(lengths)}")
        counts = [int(math.floor(n * f)) for f in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    for x in lengths:
        if not isinstance(x, numbers.Integral) or isinstance(x, bool) or x < 0:
            raise ValueError(f"random_split: lengths must be non-negative ints, got {list(lengths)}")
    if sum(lengths) != n:
        raise ValueError(f"random_split: the lengths sum to {sum(lengths)}, the dataset has {n} items")
    if generator is not None and not isinstance(generator, np.random.Generator):
        raise TypeError(f"random_split: generator must be a numpy.random.Generator or None, "
                        f"got {type(generator).__name__}")
    perm = (generator or backend.generator(backend.CPU)).permutation(n).tolist()
    out, start = [], 0
    for length in lengths:
        out.append(Subset(dataset, perm[start:start + length]))
        start += length
    return out


def _as_index_list(op, indices):
    if isinstance(indices, Tensor):
        indices = indices.tolist()
    elif isinstance(indices, np.ndarray) or backend.is_cuda_array(indices):
        indices = backend.to_device(indices, backend.CPU).tolist()
    try:
        indices = list(indices)
    except TypeError:
        raise TypeError(f"{op}: indices must be a sequence of ints, got {type(indices).__name__}") from None
    for i in indices:
        if not isinstance(i, numbers.Integral) or isinstance(i, bool):
            raise TypeError(f"{op}: indices must be ints, got {type(i).__name__}")
    return indices
