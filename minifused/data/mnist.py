"""MNIST and Fashion-MNIST: IDX parsing, local files, downloads with checksums.

Where the files live
--------------------
``root`` (argument), else ``$MINIFUSED_DATA``, else ``~/.cache/minifused``. The four
files of a dataset are looked up in ``<root>/<folder>/`` (``mnist`` or
``fashion-mnist``) and then in ``<root>/`` itself, each under its IDX name
(``train-images-idx3-ubyte``) or gzip-compressed with ``.gz`` appended; the first
folder holding all four is used, without any network access. Downloads go to
``<root>/<folder>/`` as ``.gz`` files.

Checks
------
* Every file is parsed with checks: a gzip stream that is corrupt or truncated,
  a wrong magic number (``0x00000803`` images, ``0x00000801`` labels), wrong
  dimensions (28×28), a size that is not header + product of dims, labels outside
  0–9, or image and label counts that differ raise :class:`DatasetError` naming
  the file and the problem.
* A file of the official size is checked against the published SHA-256 of the
  decompressed bytes (MNIST), so a damaged cache is never used. Smaller files
  (test fixtures, subsets) are accepted after the structural checks.
* A download is written to a temporary file beside its target, decompressed and
  checked against the checksum of the decompressed bytes (MNIST: SHA-256 from
  ``shared/data/mnist/README.md``; Fashion-MNIST: MD5 of the published ``.gz``),
  and renamed into place only when it matches; a mismatching download is deleted.
  Each mirror is tried with retries.
"""
from __future__ import annotations

import gzip
import hashlib
import os
import struct
import tempfile
import time
import urllib.error
import urllib.request
import zlib
from pathlib import Path

import numpy as np

from .. import backend
from ..tensor import Tensor

__all__ = ["MNIST", "FashionMNIST", "DatasetError", "parse_idx", "default_root"]


class DatasetError(RuntimeError):
    """A dataset file is missing, damaged, or could not be downloaded."""


# Both are plain module attributes so tests can replace them (no network in tests).
_urlopen = urllib.request.urlopen
RETRY_DELAYS = (1.0, 3.0)  # seconds to wait before the 2nd and 3rd try of one mirror
TIMEOUT = 30.0


def default_root() -> Path:
    env = os.environ.get("MINIFUSED_DATA")
    return Path(env).expanduser() if env else Path("~/.cache/minifused").expanduser()


# ---------------------------------------------------------------- IDX
_IDX_TYPES = {0x08: np.uint8}


def parse_idx(raw: bytes, name: str, ndim: int, inner_shape=()):
    """The array stored in IDX bytes ``raw``; ``name`` is used in error messages."""
    if len(raw) < 4:
        raise DatasetError(f"{name}: truncated IDX file ({len(raw)} bytes, no complete header)")
    zero, code, dims = struct.unpack(">HBB", raw[:4])
    if zero != 0 or code not in _IDX_TYPES or dims != ndim:
        got = int.from_bytes(raw[:4], "big")
        raise DatasetError(f"{name}: bad IDX magic number 0x{got:08x}, expected 0x{0x0800 | ndim:08x} "
                           f"(unsigned bytes, {ndim} dimension{'s' if ndim > 1 else ''})")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DatasetError(f"{name}: truncated IDX header ({len(raw)} bytes, expected {header})")
    shape = struct.unpack(">" + "I" * ndim, raw[4:header])
    if inner_shape and tuple(shape[1:]) != tuple(inner_shape):
        raise DatasetError(f"{name}: unexpected dimensions {shape}, expected (count, "
                           f"{', '.join(map(str, inner_shape))})")
    size = header + int(np.prod(shape, dtype=np.int64))
    if len(raw) < size:
        raise DatasetError(f"{name}: truncated IDX data: header says {shape} = {size} bytes, file has {len(raw)}")
    if len(raw) > size:
        raise DatasetError(f"{name}: {len(raw) - size} unexpected trailing bytes after the IDX data "
                           f"(header says {shape})")
    return np.frombuffer(raw, dtype=_IDX_TYPES[code], offset=header).reshape(shape)


def _decompress(raw: bytes, name: str) -> bytes:
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:  # BadGzipFile is an OSError
        raise DatasetError(f"{name}: corrupt or truncated gzip data ({e})") from e


# ---------------------------------------------------------------- datasets
class _IDXDataset:
    folder = ""
    mirrors: tuple = ()
    # name -> (decompressed size, SHA-256 of the decompressed bytes or None, MD5 of the mirrors' .gz or None)
    files: dict = {}
    mean, std = 0.0, 1.0
    classes: list = []

    def __init__(self, root=None, train=True, download=True):
        self.root = Path(root).expanduser() if root is not None else default_root()
        self.train = bool(train)
        split = "train" if train else "t10k"
        self._names = (f"{split}-images-idx3-ubyte", f"{split}-labels-idx1-ubyte")
        folder = self._find_folder()
        if folder is None:
            if not download:
                raise DatasetError(self._missing_message("download=False"))
            folder = self.root / self.folder
            self._download(folder)
        images = self._read(folder, self._names[0], 3, (28, 28))
        labels = self._read(folder, self._names[1], 1)
        if len(images) != len(labels):
            raise DatasetError(f"{folder}: {self._names[0]} holds {len(images)} images but {self._names[1]} "
                               f"holds {len(labels)} labels")
        if labels.size and labels.max() > 9:
            raise DatasetError(f"{self._path(folder, self._names[1])}: label {int(labels.max())} outside 0-9")
        self.folder_path = folder
        self.data = images  # (N, 28, 28) uint8
        self.targets = labels.astype(np.int64)

    # ------------------------------------------------------------ files
    def _candidates(self):
        return [self.root / self.folder, self.root]

    @staticmethod
    def _path(folder, name):
        for candidate in (folder / name, folder / (name + ".gz")):
            if candidate.is_file():
                return candidate
        return None

    def _find_folder(self):
        for folder in self._candidates():
            if all(self._path(folder, n) for n in self._names):
                return folder
        return None

    def _missing_message(self, why):
        where = " or ".join(str(c) for c in self._candidates())
        names = ", ".join(f"{n}[.gz]" for n in self._names)
        return (f"{type(self).__name__}: files not found ({why}). Put {names} (IDX format, gzip optional) in "
                f"{self.root / self.folder}, or set MINIFUSED_DATA / root= to a folder holding them "
                f"(looked in {where}).")

    def _read(self, folder, name, ndim, inner=()):
        path = self._path(folder, name)
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = _decompress(raw, str(path))
        size, sha256, _ = self.files[name]
        if len(raw) == size and sha256 is not None and hashlib.sha256(raw).hexdigest() != sha256:
            raise DatasetError(f"{path}: SHA-256 of the decompressed data does not match the published "
                               f"checksum {sha256}; the file is damaged: delete it (download=True fetches it again)")
        return parse_idx(raw, str(path), ndim, inner)

    def _download(self, folder):
        folder.mkdir(parents=True, exist_ok=True)
        for name in self._names:
            if self._path(folder, name) is None:
                self._download_file(folder, name)

    def _download_file(self, folder, name):
        size, sha256, gz_md5 = self.files[name]
        target = folder / (name + ".gz")
        errors = []
        for mirror in self.mirrors:
            url = mirror + name + ".gz"
            for attempt in range(1 + len(RETRY_DELAYS)):
                if attempt:
                    time.sleep(RETRY_DELAYS[attempt - 1])
                fd, tmp = tempfile.mkstemp(prefix=name + ".", suffix=".part", dir=folder)
                try:
                    with os.fdopen(fd, "wb") as f, _urlopen(url, timeout=TIMEOUT) as response:
                        while True:
                            block = response.read(1 << 20)
                            if not block:
                                break
                            f.write(block)
                    raw_gz = Path(tmp).read_bytes()
                    problem = _verify(raw_gz, str(url), size, sha256, gz_md5)
                    if problem is None:
                        os.replace(tmp, target)
                        return target
                    errors.append(f"{url}: {problem}")
                    break  # a checksum mismatch will not change on retry: next mirror
                except (urllib.error.URLError, OSError, ValueError) as e:
                    errors.append(f"{url} (try {attempt + 1}): {e}")
                finally:
                    if os.path.exists(tmp):
                        os.unlink(tmp)
        if any("checksum" in e for e in errors):
            raise DatasetError(f"{type(self).__name__}: download of {name} failed the checksum check; the "
                               f"downloaded file was deleted. Attempts:\n  " + "\n  ".join(errors))
        raise DatasetError(self._missing_message("download failed: no network?") + "\nAttempts:\n  "
                           + "\n  ".join(errors))

    # ------------------------------------------------------------ data
    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        """(image, label): the image a (1, 28, 28) float32 cpu tensor, normalized; the label an int."""
        x = ((self.data[i].astype(np.float32) / 255.0 - self.mean) / self.std)[None]
        return Tensor._from_array(x), int(self.targets[i])

    def as_tensors(self, device=None, dtype=None):
        """All images (N, 1, 28, 28), normalized ``(x/255 - mean)/std``, and labels (N,) int64, on ``device``.

        The uint8 images go to the device once and are normalized there.
        """
        dev = backend.device(device)
        dtype = backend.as_dtype(dtype) if dtype is not None else backend.float32
        xp = backend.xp(dev)
        with backend.on_device(dev):
            raw = backend.to_device(np.ascontiguousarray(self.data), dev)
            x = (raw.astype(xp.float32) / xp.float32(255.0) - xp.float32(self.mean)) / xp.float32(self.std)
            x = x.reshape(len(self), 1, 28, 28).astype(dtype, copy=False)
            y = backend.to_device(self.targets, dev)
        return Tensor._from_array(x), Tensor._from_array(y)

    def __repr__(self):
        return (f"{type(self).__name__}(split={'train' if self.train else 'test'}, n={len(self)}, "
                f"folder={self.folder_path})")


def _verify(raw_gz, url, size, sha256, gz_md5):
    """None when the downloaded bytes are good, else what is wrong."""
    try:
        raw = gzip.decompress(raw_gz)
    except (OSError, EOFError, zlib.error) as e:
        return f"corrupt or truncated gzip data ({e})"
    if sha256 is not None:
        if len(raw) != size or hashlib.sha256(raw).hexdigest() != sha256:
            return (f"checksum mismatch: decompressed {len(raw)} bytes with SHA-256 "
                    f"{hashlib.sha256(raw).hexdigest()}, expected {size} bytes with {sha256}")
    elif gz_md5 is not None and hashlib.md5(raw_gz).hexdigest() != gz_md5:
        return f"checksum mismatch: MD5 {hashlib.md5(raw_gz).hexdigest()}, expected {gz_md5}"
    return None


class MNIST(_IDXDataset):
    """The MNIST digits: 60,000 training and 10,000 test images (28×28, uint8) with labels."""

    folder = "mnist"
    mirrors = ("https://ossci-datasets.s3.amazonaws.com/mnist/",
               "https://storage.googleapis.com/cvdf-datasets/mnist/")
    files = {
        "train-images-idx3-ubyte": (47040016, "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
                                    "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
        "train-labels-idx1-ubyte": (60008, "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
                                    "d53e105ee54ea40749a09fcbcd1e9432"),
        "t10k-images-idx3-ubyte": (7840016, "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
                                   "9fb629c4189551a2d022fa330f9573f3"),
        "t10k-labels-idx1-ubyte": (10008, "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
                                   "ec29112dd5afa0611ce80d1b7f02629c"),
    }
    mean, std = 0.1307, 0.3081
    classes = [str(i) for i in range(10)]


class FashionMNIST(_IDXDataset):
    """Zalando's Fashion-MNIST, MNIST's format and sizes (downloads checked by the ``.gz`` MD5s)."""

    folder = "fashion-mnist"
    mirrors = ("https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/",
               "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/")
    files = {
        "train-images-idx3-ubyte": (47040016, None, "8d4fb7e6c68d591d4c3dfef9ec88bf0d"),
        "train-labels-idx1-ubyte": (60008, None, "25c81989df183df01b3e8a0aad5dffbe"),
        "t10k-images-idx3-ubyte": (7840016, None, "bef4ecab320f06d8554ea6380940ec79"),
        "t10k-labels-idx1-ubyte": (10008, None, "bb300cfdad3c16e7a12a480ee83cd310"),
    }
    mean, std = 0.2860, 0.3530
    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
               "Ankle boot"]
