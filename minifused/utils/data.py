"""``torch.utils.data`` under its PyTorch name: datasets, samplers and ``DataLoader`` from
:mod:`minifused.data`."""
from ..data import (BatchSampler, ChainDataset, ConcatDataset, DataLoader, Dataset, DistributedSampler,  # noqa: F401
                    IterableDataset, RandomSampler, Sampler, SequentialSampler, StackDataset, Subset,
                    SubsetRandomSampler, TensorDataset, WeightedRandomSampler, default_collate, default_convert,
                    get_worker_info, random_split)

__all__ = ["BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset", "DistributedSampler",
           "IterableDataset", "RandomSampler", "Sampler", "SequentialSampler", "StackDataset", "Subset",
           "SubsetRandomSampler", "TensorDataset", "WeightedRandomSampler", "default_collate", "default_convert",
           "get_worker_info", "random_split"]

# torch.utils.data.distributed, importable by its dotted name too
import sys as _sys  # noqa: E402
import types as _types  # noqa: E402

distributed = _types.ModuleType(__name__ + ".distributed", "``torch.utils.data.distributed``: DistributedSampler.")
distributed.DistributedSampler = DistributedSampler
_sys.modules.setdefault(distributed.__name__, distributed)
