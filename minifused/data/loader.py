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
from ..tensor import Tensor


def epoch_order(n: int, seed: int, epoch: int):
    """The shuffled order of ``n`` samples for ``epoch`` of a run seeded with ``seed`` (host int64)."""
    return np.random.Generator(np.random.PCG64([int(seed), int(epoch)])).permutation(n)


class TensorDataset:
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

    def as_tensors(self, device=None, dtype=None):
        out = []
        for t in self.tensors:
            t = t.to(backend.device(device))
            if dtype is not None and backend.is_floating(t.dtype):
                t = t.to(dtype)
            out.append(t)
        return tuple(out)


class DataLoader:
    """Iterate over ``dataset`` in batches of ``batch_size``.

    ``shuffle`` draws a new order every epoch from ``seed`` (None: a seed from the global
    generator); ``drop_last`` drops a final short batch; ``device`` / ``dtype`` say where the
    batches live and the floating dtype of the inputs. ``set_epoch(e)`` picks the epoch
    whose order the next iteration uses (it advances by one after each full iteration).
    """

    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False, seed=None, device=None,
                 dtype=None):
        if not isinstance(batch_size, numbers.Integral) or batch_size <= 0:
            raise ValueError(f"DataLoader: batch_size must be a positive integer, got {batch_size!r}")
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        if seed is None:
            seed = int(backend.generator(backend.CPU).integers(0, 2 ** 62))
        self.seed = int(seed)
        self.device = backend.device(device)
        self.epoch = 0
        self._tensors = None
        if hasattr(dataset, "as_tensors"):
            self._tensors = tuple(dataset.as_tensors(self.device, dtype))
        self.n = len(dataset)

    def __len__(self):
        if self.drop_last:
            return self.n // self.batch_size
        return -(-self.n // self.batch_size)

    def set_epoch(self, epoch: int):
        self.epoch = int(epoch)

    def order(self, epoch=None):
        """The host permutation used for ``epoch`` (identity without shuffle)."""
        epoch = self.epoch if epoch is None else epoch
        if not self.shuffle:
            return np.arange(self.n)
        return epoch_order(self.n, self.seed, epoch)

    def __iter__(self):
        epoch = self.epoch
        self.epoch += 1
        return self._device_batches(epoch) if self._tensors is not None else self._host_batches(epoch)

    def _device_batches(self, epoch):
        bs, count = self.batch_size, len(self)
        if self.shuffle:
            with backend.on_device(self.device):
                perm = backend.to_device(self.order(epoch), self.device)  # one copy per epoch
            for b in range(count):
                idx = perm[b * bs:(b + 1) * bs]
                yield tuple(Tensor._from_array(t.data.take(idx, axis=0)) for t in self._tensors)
        else:
            for b in range(count):
                yield tuple(Tensor._from_array(t.data[b * bs:(b + 1) * bs]) for t in self._tensors)

    def _host_batches(self, epoch):
        order, bs = self.order(epoch), self.batch_size
        for b in range(len(self)):
            items = [self.dataset[int(i)] for i in order[b * bs:(b + 1) * bs]]
            yield tuple(_collate([it[k] for it in items], self.device) for k in range(len(items[0])))


def _collate(values, device):
    first = values[0]
    if isinstance(first, Tensor):
        arr = np.stack([backend.to_device(v.data, backend.CPU) for v in values])
    else:
        arr = np.asarray(values)
        if arr.dtype.kind in "iu":
            arr = arr.astype(np.int64)
        elif arr.dtype == np.float64:
            arr = arr.astype(np.float32)
    return Tensor._from_array(backend.to_device(arr, device))
