"""Datasets and loading: MNIST / Fashion-MNIST (IDX, downloads, checksums), ``DataLoader``, and
``torch.utils.data``'s datasets and samplers (also reachable as ``minifused.utils.data``)."""
from .dataset import ConcatDataset, Dataset, StackDataset, Subset, random_split  # noqa: F401
from .iterable import ChainDataset, IterableDataset, get_worker_info  # noqa: F401
from .loader import (DataLoader, DistributedSampler, TensorDataset, default_collate, default_convert,  # noqa: F401
                     epoch_order)
from .mnist import MNIST, DatasetError, FashionMNIST, default_root, parse_idx  # noqa: F401
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,  # noqa: F401
                      WeightedRandomSampler)
