"""Samplers as in ``torch.utils.data``: iterables of dataset indices (or of index batches) that a
``DataLoader`` draws from. Random ones draw from minifused's global cpu generator, so
``minifused.manual_seed`` fixes them; each iteration draws afresh."""
from __future__ import annotations

import numbers
from typing import Generic, TypeVar

import numpy as np

from .. import backend
from ..tensor import Tensor

#: the type of what a sampler yields: ``Sampler[T]``, as PyTorch's generic classes
T_co = TypeVar("T_co", covariant=True)


class Sampler(Generic[T_co]):
    """The base class: subclasses define ``__iter__`` (the indices) and usually ``__len__``."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__}: subclasses of Sampler must define __iter__")


def _generator(op, generator):
    if generator is None:
        return backend.generator(backend.CPU)
    if not isinstance(generator, np.random.Generator):
        raise TypeError(f"{op}: generator must be a numpy.random.Generator or None, got {type(generator).__name__}")
    return generator


def _count(op, name, value):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{op}: {name} should be a positive integer, got {value!r}")
    return int(value)


class SequentialSampler(Sampler[int]):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """A random permutation, or ``num_samples`` draws with ``replacement=True``."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        if not isinstance(replacement, bool):
            raise TypeError(f"RandomSampler: replacement should be a bool, got {replacement!r}")
        self.data_source, self.replacement = data_source, replacement
        self._num_samples = None if num_samples is None else _count("RandomSampler", "num_samples", num_samples)
        if self.num_samples <= 0:  # (an empty data source: PyTorch's check of num_samples)
            raise ValueError(f"RandomSampler: num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")
        self.generator = _generator("RandomSampler", generator) if generator is not None else None

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n, gen = len(self.data_source), self.generator or backend.generator(backend.CPU)
        if not n:
            raise ValueError(f"RandomSampler: cannot draw {self.num_samples} samples from an empty data source")
        if self.replacement:
            return iter(gen.integers(0, n, self.num_samples).tolist())
        # without replacement, num_samples > n walks several permutations, as PyTorch does
        parts = [gen.permutation(n) for _ in range(-(-self.num_samples // n))]
        return iter(np.concatenate(parts)[:self.num_samples].tolist())

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given ``indices`` in a random order."""

    def __init__(self, indices, generator=None):
        from .dataset import _as_index_list

        checked = _as_index_list("SubsetRandomSampler", indices)
        # a list given is kept, not copied, as PyTorch's: indices appended to it later are drawn too
        self.indices = indices if type(indices) is list else checked
        self.generator = _generator("SubsetRandomSampler", generator) if generator is not None else None

    def __iter__(self):
        gen = self.generator or backend.generator(backend.CPU)
        return iter([self.indices[i] for i in gen.permutation(len(self.indices)).tolist()])

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """``num_samples`` indices drawn with probabilities proportional to ``weights`` (PyTorch's
    ``torch.multinomial`` draw: with ``replacement``, or distinct indices without it: once the indices of
    non-zero weight are all drawn, those of zero weight follow, in a random order)."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        op = "WeightedRandomSampler"
        self.num_samples = _count(op, "num_samples", num_samples)
        if not isinstance(replacement, bool):
            raise ValueError(f"{op}: replacement should be a boolean value, got {replacement!r}")
        w = backend.to_device(weights._data, backend.CPU) if hasattr(weights, "_data") else weights
        try:
            if w is None:  # (NumPy reads None as NaN)
                raise TypeError
            w = np.asarray(w, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{op}: weights should be a sequence of numbers, got {type(weights).__name__}") from e
        if w.ndim != 1:
            raise ValueError(f"{op}: weights should be a 1d sequence but given weights have shape {w.shape}")
        # RuntimeError for weights no draw can come from, as PyTorch's torch.multinomial raises
        bad = np.flatnonzero(~np.isfinite(w) | (w < 0))
        if bad.size:
            raise RuntimeError(f"{op}: weights must be finite and non-negative, got {w[bad[0]]} at index {bad[0]}")
        if w.sum() <= 0:
            raise RuntimeError(f"{op}: the weights sum to zero: nothing to draw")
        if not replacement and self.num_samples > len(w):
            raise RuntimeError(f"{op}: cannot draw {self.num_samples} distinct indices without replacement from "
                               f"{len(w)} weights")
        self.weights = Tensor._from_array(w)  # a float64 tensor, as PyTorch's (which a new one may replace)
        self.replacement = replacement
        self.generator = _generator(op, generator) if generator is not None else None

    def __iter__(self):
        gen, w = self.generator or backend.generator(backend.CPU), self.weights
        w = backend.to_device(w._data, backend.CPU) if isinstance(w, Tensor) else np.asarray(w)
        w = w.astype(np.float64)
        size = self.num_samples if self.replacement else min(self.num_samples, np.count_nonzero(w))
        draw = gen.choice(len(w), size=size, replace=self.replacement, p=w / w.sum())
        if size < self.num_samples:  # without replacement, past the non-zero weights: zero ones, as PyTorch's
            zeros = np.flatnonzero(w == 0)
            draw = np.concatenate([draw, zeros[gen.permutation(len(zeros))[:self.num_samples - size]]])
        return iter(draw.tolist())

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler[list]):
    """Lists of ``batch_size`` indices from ``sampler`` (the last one shorter unless ``drop_last``), each index as
    the sampler yields it (a dataset's keys need not be ints), as PyTorch's."""

    def __init__(self, sampler, batch_size, drop_last):
        self.batch_size = _count("BatchSampler", "batch_size", batch_size)
        if not isinstance(drop_last, bool):
            raise ValueError(f"BatchSampler: drop_last should be a bool, got {drop_last!r}")
        self.sampler, self.drop_last = sampler, drop_last

    def __iter__(self):
        batch = []
        for i in self.sampler:
            batch.append(i)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
