"""MNIST as NumPy arrays for the ported scripts, so both frameworks see the very same numbers: the IDX
files of a data folder, or learnable stand-in digits (one fixed random stroke pattern per class plus
noise) made from a seed. Images come scaled to [0, 1], float32, shaped (N, 28, 28); labels int64."""
import gzip
from pathlib import Path

import numpy as np

FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
         "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def _read_idx(path, header_ints):
    raw = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
    return np.frombuffer(raw, dtype=np.uint8, offset=4 * header_ints)


def _find(data_dir, name):
    for folder in (Path(data_dir) / "mnist", Path(data_dir)):
        for candidate in (folder / (name + ".gz"), folder / name):
            if candidate.exists():
                return candidate
    raise FileNotFoundError(f"{name}(.gz) not found under {data_dir} or {data_dir}/mnist")


def load(data_dir, split, limit=None):
    """The ``split`` ('train' or 'test') of the MNIST IDX files under ``data_dir``, first ``limit`` images."""
    images, labels = FILES[split]
    x = _read_idx(_find(data_dir, images), 4).reshape(-1, 28, 28)[:limit]
    y = _read_idx(_find(data_dir, labels), 2)[:limit]
    return x.astype(np.float32) / 255.0, y.astype(np.int64)


def synthetic(n, seed):
    """``n`` stand-in digits: label c shows class c's stroke pattern under Gaussian noise."""
    templates = (np.random.default_rng(12345).random((10, 28, 28)) < 0.15).astype(np.float32)
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 10, n).astype(np.int64)
    x = np.clip(templates[y] * 0.8 + rng.normal(0.1, 0.2, (n, 28, 28)), 0.0, 1.0).astype(np.float32)
    return x, y


def mnist(data_dir, n_train, n_test, seed):
    """(x_train, y_train, x_test, y_test): the real files when ``data_dir`` is given, else stand-ins."""
    if data_dir:
        return (*load(data_dir, "train", n_train), *load(data_dir, "test", n_test))
    return (*synthetic(n_train, seed), *synthetic(n_test, seed + 1))
