"""Datasets and loading: MNIST / Fashion-MNIST (IDX, downloads, checksums), ``DataLoader``, and
``torch.utils.data``'s datasets and samplers (also reachable as ``minifused.utils.data``)."""
from .dataset import ConcatDataset, Dataset, Subset, random_split  # noqa: F401
from .loader import DataLoader, DistributedSampler, TensorDataset, default_collate, epoch_order  # noqa: F401
from .mnist import MNIST, DatasetError, FashionMNIST, default_root, parse_idx  # noqa: F401
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,  # noqa: F401
                      WeightedRandomSampler)
