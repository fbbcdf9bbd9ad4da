"""Iterable-style datasets as in ``torch.utils.data``: :class:`IterableDataset` (a stream of items, iterated
rather than indexed), :class:`ChainDataset`, and :func:`get_worker_info`.

A ``DataLoader`` over an iterable dataset iterates it once per epoch and batches its items in the order they
come (no sampler, no shuffle: the stream decides its order). Loading runs in the calling thread, so there are
no workers: :func:`get_worker_info` is None, as PyTorch's is in the main process.
"""
from __future__ import annotations

from .dataset import Dataset


class IterableDataset(Dataset):
    """The base class of iterable-style datasets: subclasses define ``__iter__`` (``__len__`` optionally)."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__}: subclasses of IterableDataset must define __iter__")

    def __add__(self, other):
        return ChainDataset([self, other])


class ChainDataset(IterableDataset):
    """Several iterable datasets, one after the other (chained lazily, as ``itertools.chain``)."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError(f"ChainDataset only supports IterableDataset, got {type(d).__name__}")
            yield from d

    def __len__(self):
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError(f"ChainDataset only supports IterableDataset, got {type(d).__name__}")
            total += len(d)  # TypeError from len() for a dataset without __len__, as PyTorch's
        return total


def get_worker_info():
    """Information about the current loader worker: always None, since minifused loads in the calling
    thread (PyTorch returns None in the main process too)."""
    return None
