"""``torch.utils.data`` under its PyTorch name: datasets, samplers and ``DataLoader`` from
:mod:`minifused.data`."""
from ..data import (BatchSampler, ConcatDataset, DataLoader, Dataset, DistributedSampler,  # noqa: F401
                    RandomSampler, Sampler, SequentialSampler, Subset, SubsetRandomSampler, TensorDataset,
                    WeightedRandomSampler, default_collate, random_split)

__all__ = ["BatchSampler", "ConcatDataset", "DataLoader", "Dataset", "DistributedSampler", "RandomSampler",
           "Sampler", "SequentialSampler", "Subset", "SubsetRandomSampler", "TensorDataset",
           "WeightedRandomSampler", "default_collate", "random_split"]
