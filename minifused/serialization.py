"""``save(obj, path)`` / ``load(path)``: state dicts and whole checkpoints, without pickle.

Format: a NumPy ``.npz`` archive (a zip of ``.npy`` files) holding

* ``__tree__``: a uint8 array of UTF-8 JSON describing ``obj``'s structure, and
* ``a0``, ``a1``, ...: one array per tensor / ndarray in ``obj``.

The JSON tree: JSON numbers, strings, booleans, null and lists stand for
themselves; any other node is an object with one tag:
``{"tensor": "a3", "device": "cuda:0", "dtype": "float32", "requires_grad": false}``,
``{"ndarray": "a4", "dtype": ...}``, ``{"dict": [[key, value], ...]}`` (keys are
strings or integers, order kept), ``{"tuple": [...]}``, ``{"float": "nan"|"inf"|"-inf"}``.
Dtypes NumPy cannot store in ``.npy`` (bfloat16) are stored as their bit pattern
(uint16) and viewed back. ``load`` reads with ``np.load(allow_pickle=False)`` and
runs no code from the file.

``save`` writes to a temporary file in the target's directory, flushes it to disk
and renames it over the target (``os.replace``): an interrupted save leaves the
previous file intact.
"""
from __future__ import annotations

import io
import json
import math
import numbers
import os
import tempfile
import zipfile

import numpy as np

from . import backend
from .tensor import Tensor

FORMAT = "minifused-npz-1"
_SPECIAL_DTYPES = {"bfloat16": (backend.bfloat16, np.uint16)}


def _encode(obj, arrays):
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, Tensor):
        data = backend.to_device(obj._data, backend.CPU)
        node = {"tensor": _put(data, arrays), "device": str(obj.device), "dtype": str(obj.dtype)}
        if obj.requires_grad:
            node["requires_grad"] = True
        return node
    if isinstance(obj, np.ndarray) or backend.is_cuda_array(obj):
        data = backend.to_device(obj, backend.CPU)
        return {"ndarray": _put(data, arrays), "dtype": str(data.dtype)}
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, numbers.Integral):
        return int(obj)
    if isinstance(obj, numbers.Real):
        obj = float(obj)
        return obj if math.isfinite(obj) else {"float": repr(obj)}
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if isinstance(k, np.generic):
                k = k.item()
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise TypeError(f"save: dict keys must be str or int, got {type(k).__name__} ({k!r})")
            items.append([k, _encode(v, arrays)])
        return {"dict": items}
    if isinstance(obj, list):
        return [_encode(v, arrays) for v in obj]
    if isinstance(obj, tuple):
        return {"tuple": [_encode(v, arrays) for v in obj]}
    raise TypeError(f"save: cannot store an object of type {type(obj).__name__}; supported are tensors, "
                    f"arrays, numbers, strings, booleans, None and dicts/lists/tuples of them")


def _put(data, arrays):
    name = f"a{len(arrays)}"
    dtype = str(data.dtype)
    if dtype in _SPECIAL_DTYPES:
        data = data.view(_SPECIAL_DTYPES[dtype][1])
    arrays[name] = np.ascontiguousarray(data)
    return name


def save(obj, path):
    """Write ``obj`` (nested dicts/lists/tuples of tensors, arrays, numbers, strings) to ``path``
    atomically. Returns the path."""
    arrays = {}
    tree = {"format": FORMAT, "obj": _encode(obj, arrays)}
    arrays["__tree__"] = np.frombuffer(json.dumps(tree).encode(), dtype=np.uint8)
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _decode(node, archive, map_location, path):
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):
        return [_decode(v, archive, map_location, path) for v in node]
    if not isinstance(node, dict) or len(node) == 0:
        raise ValueError(f"load: {path} is not a minifused checkpoint (unexpected node {node!r})")
    if "tensor" in node:
        data = _get(archive, node["tensor"], node["dtype"], path)
        dev = backend.Device(map_location if map_location is not None else node["device"])
        if dev.type == "cuda" and not backend.cuda_available():
            raise RuntimeError(f"load: {path} holds tensors saved on {node['device']} but no CUDA device is "
                               f"usable here; pass map_location='cpu'")
        t = Tensor._from_array(backend.to_device(data, dev))
        if node.get("requires_grad"):
            t.requires_grad = True
        return t
    if "ndarray" in node:
        return _get(archive, node["ndarray"], node["dtype"], path)
    if "dict" in node:
        return {k: _decode(v, archive, map_location, path) for k, v in node["dict"]}
    if "tuple" in node:
        return tuple(_decode(v, archive, map_location, path) for v in node["tuple"])
    if "float" in node:
        return float(node["float"])
    raise ValueError(f"load: {path} is not a minifused checkpoint (unknown node {sorted(node)})")


def _get(archive, name, dtype, path):
    try:
        data = archive[name]
    except KeyError:
        raise ValueError(f"load: {path} is damaged: array {name!r} is missing") from None
    if dtype in _SPECIAL_DTYPES:
        data = data.view(_SPECIAL_DTYPES[dtype][0])
    elif str(data.dtype) != dtype:
        raise ValueError(f"load: {path} is damaged: array {name!r} has dtype {data.dtype}, the tree says {dtype}")
    return data


def load(path, map_location=None):
    """Read an object written by :func:`save`. Tensors go back to the device they were saved
    from, or to ``map_location`` ('cpu', 'cuda', ...) when given."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"load: no such file: {path}")
    try:
        with open(path, "rb") as f:
            raw = f.read()
        archive = np.load(io.BytesIO(raw), allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):  # a bare .npy array
            raise ValueError(f"a single {type(archive).__name__}, not an archive")
        if "__tree__" not in archive.files:
            raise ValueError("no __tree__ entry")
        tree = json.loads(archive["__tree__"].tobytes().decode())
    except (ValueError, OSError, zipfile.BadZipFile, EOFError, UnicodeDecodeError) as e:
        raise ValueError(f"load: {path} is not a readable minifused checkpoint (truncated or corrupt?): {e}") from e
    if not isinstance(tree, dict) or tree.get("format") != FORMAT:
        raise ValueError(f"load: {path} has format {tree.get('format') if isinstance(tree, dict) else None!r}, "
                         f"expected {FORMAT!r}")
    return _decode(tree["obj"], archive, map_location, path)
