"""Datasets and loading: MNIST / Fashion-MNIST (IDX, downloads, checksums), ``DataLoader``, and
``torch.utils.data``'s datasets and samplers (also reachable as ``minifused.utils.data``)."""
from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, StackDataset, Subset,  # noqa: F401
                      random_split)
from .loader import (DataLoader, DistributedSampler, TensorDataset, default_collate, default_convert,  # noqa: F401
                     epoch_order, get_worker_info)
from .mnist import MNIST, DatasetError, FashionMNIST, default_root, parse_idx  # noqa: F401
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,  # noqa: F401
                      WeightedRandomSampler)
