"""Datasets and loading: MNIST / Fashion-MNIST (IDX, downloads, checksums) and ``DataLoader``."""
from .loader import DataLoader, DistributedSampler, TensorDataset, epoch_order  # noqa: F401
from .mnist import MNIST, DatasetError, FashionMNIST, default_root, parse_idx  # noqa: F401
