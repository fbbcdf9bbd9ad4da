"""``save(obj, f)`` / ``load(f)``: state dicts and whole checkpoints, without pickle for what PyTorch's
``weights_only`` load takes. ``f`` is a path or a binary file object.

Two formats. **safetensors** (the ``safetensors`` package's format, what PyTorch users share
weights in) for a flat ``{name: tensor}`` dict such as a ``state_dict``: chosen by a path ending in
``.safetensors`` or ``format="safetensors"``. It keeps names, shapes and dtypes (bfloat16 too), not
devices: its tensors load on ``map_location``, default cpu (``load_state_dict`` copies them onto the
model's device). A file PyTorch wrote with ``safetensors.torch.save_file(model.state_dict(), path)``
loads into the same model built with minifused: ``model.load_state_dict(minifused.load(path))``.

**minifused-npz** for anything else (nested checkpoints with optimizer state, numbers, strings):
a NumPy ``.npz`` archive (a zip of ``.npy`` files) holding

* ``__tree__``: a uint8 array of UTF-8 JSON describing ``obj``'s structure, and
* ``a0``, ``a1``, ...: one array per tensor / ndarray in ``obj``.

The JSON tree: JSON numbers, strings, booleans, null and lists stand for
themselves; any other node is an object with one tag:
``{"tensor": "a3", "device": "cuda:0", "dtype": "float32", "requires_grad": true, "parameter": true}`` (the last
two only when true; with ``"view": {"offset": ..., "shape": [...], "strides": [...]}``, in bytes, when ``a3`` is a
range of memory that tensor views, possibly with others: views and their base share memory after a load as they
did before the save), ``{"same": 2}`` (the third tensor saved, saved again: loaded as the same object),
``{"ref": 1}`` (the second list or dict met, in the tree's order, met again: loaded as the same object, as pickle's
memo keeps them for ``torch.save``, a list holding itself too),
``{"ndarray": "a4", "dtype": ...}``, ``{"dict": [[key, value], ...]}`` (keys are nodes too, order kept;
``"odict"`` for an ``OrderedDict``, such as a ``state_dict``, with ``"metadata"`` beside it for a state_dict's
``_metadata``; ``"counter"`` for a ``Counter``), ``{"set": [...]}`` / ``"frozenset"``, ``{"bytes": base64}`` /
``"bytearray"``, ``{"complex": [re, im]}``, ``{"size": [2, 3]}`` (a ``Size``),
``{"tuple": [...]}``, ``{"float": "nan"|"inf"|"-inf"}``, ``{"dtype": "float16"}``, ``{"device": "cuda:0"}``,
``{"namespace": {...}}`` (an ``argparse.Namespace``: the script's arguments saved beside its weights) and
``{"path": "runs/exp1"}`` (a ``pathlib`` path, as arguments declared ``type=Path`` hold; it loads as a ``Path``) and
``{"pickle": "a5"}`` (any other object, pickled, as torch.save pickles it: loaded by ``load(weights_only=False)``
only, or through a restricted unpickler taking what :func:`add_safe_globals` allows, as PyTorch's).
Dtypes NumPy cannot store in ``.npy`` (bfloat16) are stored as their bit pattern
(uint16) and viewed back. ``load`` reads with ``np.load(allow_pickle=False)`` and,
unless ``weights_only=False``, runs no code from the file.

``save`` writes to a temporary file in the target's directory (``.<name>.tmp``, reused by the
next save if a killed one left it), flushes it to disk and renames it over the target
(``os.replace``): an interrupted save leaves the previous file intact. ``load`` raises
:class:`CheckpointError` (a ``ValueError``) for any malformed file, naming it, and checks each
array's header against the bytes the file holds before allocating the array.
"""
from __future__ import annotations

import _compat_pickle
import argparse
import base64
import ctypes
import functools
import io
import json
import math
import numbers
import os
import pathlib
import pickle
import zipfile
from collections import Counter, OrderedDict

import numpy as np

from . import backend
from .tensor import Size, Tensor, _rebuild_tensor
from .nn.param import Parameter

FORMAT = "minifused-npz-1"
DEFAULT_PROTOCOL = 2  # torch.save's pickle protocol (torch.serialization.DEFAULT_PROTOCOL)
# the protocol of the objects save pickles when given none: 4, not 2, whose pickled NumPy arrays carry their bytes
# as latin-1 strings re-encoded on load (a whole model's checkpoint once failed to load so in a long test process,
# 'buffer size does not match array size', though the same bytes loaded in a fresh one); 4 writes bytes as bytes
_OBJECT_PROTOCOL = 4
MAX_DEPTH = 64  # nesting of a checkpoint's tree (a crafted one could nest until the interpreter's stack ends)


class CheckpointError(ValueError):
    """A file that is not a readable checkpoint (truncated, corrupt, crafted): the one error ``load``
    raises for a malformed file, naming the file and what is wrong with it."""
_SPECIAL_DTYPES = {"bfloat16": (backend.bfloat16, np.uint16)}


class _Saver:
    """One save's arrays (``a0``, ``a1`` ...) and its tensors: each tensor is written once (saved again, it is
    ``{"same": i}``, loaded as the same object, as pickle's memo does for ``torch.save``), and tensors viewing one
    memory (views, ``detach()``, a Parameter and its ``state_dict`` entry) share one stored array, so that they
    share memory after ``load`` too; each keeps its shape and strides (transposed, channels-last, expanded)."""

    def __init__(self, pickle_module=None, pickle_protocol=None):
        self.pickle_module, self.pickle_protocol = pickle_module or pickle, pickle_protocol or _OBJECT_PROTOCOL
        self.arrays = {}
        self.tensors = {}  # id(tensor) -> its index in the file's order of first appearance
        self.pending = []  # (cpu array, node) for every tensor, given their storage once all are known
        self.keep = []  # the tensors saved, so that no id is reused during the save
        self.host = {}  # id(device allocation) -> its bytes on the host
        self.containers = {}  # id(list or dict) -> its index in the tree's order of first appearance

    def container(self, obj):
        """``{"ref": i}`` for a list or dict met before (saved once, as pickle's memo keeps it), else None, having
        numbered it."""
        if id(obj) in self.containers:
            return {"ref": self.containers[id(obj)]}
        self.containers[id(obj)] = len(self.containers)
        self.keep.append(obj)
        return None

    def tensor(self, t):
        if id(t) in self.tensors:
            return {"same": self.tensors[id(t)]}
        self.tensors[id(t)] = len(self.tensors)
        self.keep.append(t)
        data = t._data
        if not isinstance(data, np.ndarray):
            data = self._host_view(data)
        node = {"tensor": None, "device": str(t.device), "dtype": str(t._data.dtype)}
        if t.requires_grad:
            node["requires_grad"] = True
        if isinstance(t, Parameter):  # loaded back a Parameter, as torch.load gives one
            node["parameter"] = True
        self.pending.append((data, node))
        return node

    def _host_view(self, a):
        """A host array with the CUDA array ``a``'s shape, strides and bytes, viewing one host copy of the device
        allocation ``a`` views: every array on that allocation views the same copy, so that views (a transposed
        or channels-last one too) keep their strides and share memory after ``load``, as host arrays do."""
        import cupy

        mem = a.data.mem
        if a.size == 0 or not getattr(mem, "size", 0):  # (nothing to share, or an allocation of unknown size)
            return backend.to_device(a, backend.CPU)
        raw = self.host.get(id(mem))
        if raw is None:
            with cupy.cuda.Device(a.device.id):
                raw = cupy.ndarray((mem.size,), np.uint8, cupy.cuda.MemoryPointer(mem, 0)).get()
            self.host[id(mem)] = raw
            self.keep.append(mem)
        return np.ndarray(a.shape, a.dtype, buffer=raw, offset=a.data.ptr - mem.ptr, strides=a.strides)

    def storages(self):
        """Fill in each tensor node's array: tensors on one memory whose byte ranges overlap or touch share one
        stored range of bytes, viewed with the tensor's offset, shape and strides; a contiguous tensor alone on
        its range is stored as itself (as files of older versions hold every tensor)."""
        groups = {}
        for data, node in self.pending:
            if data.size == 0:  # nothing to share: an empty array of its shape
                node["tensor"] = _put(np.empty(data.shape, data.dtype), self.arrays)
                continue
            lo, hi = _byte_bounds(data)
            groups.setdefault(id(_memory_owner(data)), []).append((lo, hi, data, node))
        for members in groups.values():
            members.sort(key=lambda m: m[0])
            run = [members[0]]
            for m in members[1:] + [None]:
                if m is not None and m[0] <= max(r[1] for r in run):
                    run.append(m)
                    continue
                self._store(run)
                run = [m]

    def _store(self, run):
        lo, hi = run[0][0], max(m[1] for m in run)
        data, node = run[0][2], run[0][3]
        if len(run) == 1 and lo == data.ctypes.data and hi - lo == data.nbytes and data.flags.c_contiguous:
            node["tensor"] = _put(data, self.arrays)
            return
        raw = np.frombuffer((ctypes.c_uint8 * (hi - lo)).from_address(lo), np.uint8).copy()
        dtypes = {m[2].dtype for m in run}
        kind = dtypes.pop() if len(dtypes) == 1 and (hi - lo) % run[0][2].itemsize == 0 else np.dtype(np.uint8)
        name = _put(raw.view(kind), self.arrays)
        for m_lo, _, a, n in run:
            n["tensor"] = name
            n["view"] = {"offset": a.ctypes.data - lo, "shape": list(a.shape), "strides": list(a.strides)}


def _memory_owner(a):
    """The object owning ``a``'s memory (the end of its chain of bases): arrays on one memory have the same."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a if a.base is None else a.base


def _byte_bounds(a):
    """The addresses of ``a``'s first byte and one past its last (strides may be 0 or negative)."""
    lo = hi = a.ctypes.data
    for n, s in zip(a.shape, a.strides):
        lo, hi = (lo + s * (n - 1), hi) if s < 0 else (lo, hi + s * (n - 1))
    return lo, hi + a.itemsize


def _encode(obj, arrays):
    if isinstance(obj, np.generic):  # a NumPy scalar as the Python one it holds: np.True_ a bool, not the int 1
        obj = obj.item()
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, Tensor):
        return arrays.tensor(obj)
    if isinstance(obj, np.ndarray) or backend.is_cuda_array(obj):
        data = backend.to_device(obj, backend.CPU)
        return {"ndarray": _put(data, arrays.arrays), "dtype": str(data.dtype)}
    if isinstance(obj, numbers.Integral):
        return int(obj)
    if isinstance(obj, numbers.Real):
        obj = float(obj)
        return obj if math.isfinite(obj) else {"float": repr(obj)}
    if isinstance(obj, numbers.Complex):  # the other builtins torch.load(weights_only=True) takes back
        return {"complex": [_encode(obj.real, arrays), _encode(obj.imag, arrays)]}
    if isinstance(obj, (bytes, bytearray)):
        return {type(obj).__name__: base64.b64encode(obj).decode()}
    if isinstance(obj, (set, frozenset)):
        return {type(obj).__name__: [_encode(v, arrays) for v in obj]}
    if isinstance(obj, Size):
        return {"size": list(obj)}
    if backend.is_dtype(obj):
        return {"dtype": np.dtype(obj).name}
    if isinstance(obj, backend.Device):
        return {"device": str(obj)}
    if isinstance(obj, argparse.Namespace):  # a training script's arguments, kept beside its weights
        return {"namespace": _encode(vars(obj), arrays)}
    if isinstance(obj, pathlib.PurePath):  # one of those arguments, declared type=Path
        return {"path": str(obj)}
    if isinstance(obj, (dict, list)) and (ref := arrays.container(obj)) is not None:
        return ref
    if isinstance(obj, dict):
        items = [[_encode_key(k, arrays), _encode(v, arrays)] for k, v in obj.items()]
        if isinstance(obj, Counter):
            return {"counter": items}
        if not isinstance(obj, OrderedDict):
            return {"dict": items}
        node = {"odict": items}
        if getattr(obj, "_metadata", None) is not None:  # a state_dict's module versions, kept as torch.save keeps them
            node["metadata"] = _encode(obj._metadata, arrays)
        return node
    if isinstance(obj, list):
        return [_encode(v, arrays) for v in obj]
    if isinstance(obj, tuple):
        return {"tuple": [_encode(v, arrays) for v in obj]}
    # anything else pickled, as torch.save does: only load(weights_only=False) or an allowlist takes it back
    raw = arrays.pickle_module.dumps(obj, protocol=arrays.pickle_protocol)
    return {"pickle": _put(np.frombuffer(raw, np.uint8), arrays.arrays)}


def _encode_key(k, arrays):
    """A dict key: what torch.save keeps as keys (str, numbers, None, bytes, dtypes, devices, tuples of them)."""
    if isinstance(k, tuple) and not isinstance(k, Size):
        return {"tuple": [_encode_key(v, arrays) for v in k]}
    if isinstance(k, (Tensor, np.ndarray, list, dict, set)) or backend.is_cuda_array(k):
        raise TypeError(f"save: dict keys must be strings, numbers, None, bytes, dtypes, devices or tuples of them, "
                        f"got {type(k).__name__}")
    return _encode(k, arrays)


def _put(data, arrays):
    name = f"a{len(arrays)}"
    dtype = str(data.dtype)
    if dtype in _SPECIAL_DTYPES:
        data = data.view(_SPECIAL_DTYPES[dtype][1])
    arrays[name] = np.ascontiguousarray(data).reshape(data.shape)  # (ascontiguousarray makes a 0-d array 1-d)
    return name


def _format_for(op, f, format):
    if format is not None:
        if format not in ("safetensors", "npz"):
            raise ValueError(f"{op}: format must be 'safetensors', 'npz' or None, got {format!r}")
        return format
    if _is_file(f):
        return None
    return "safetensors" if os.fspath(f).endswith(".safetensors") else None


def _is_file(f):
    return hasattr(f, "write") or hasattr(f, "read")


def save(obj, f, format=None, metadata=None, *, pickle_module=None, pickle_protocol=None,
         _use_new_zipfile_serialization=True, _disable_byteorder_record=False):
    """Write ``obj`` to ``f`` (a path, written atomically, or a binary file object); returns ``f``.

    ``format`` is ``'safetensors'`` (a flat ``{name: tensor}`` dict; ``metadata`` a ``{str: str}``
    dict stored in its header), ``'npz'`` (nested dicts/lists/tuples of tensors, arrays, numbers,
    strings), or None: safetensors for a path ending in ``.safetensors``, npz otherwise. PyTorch's keywords of
    its pickle file (``pickle_module``, ``pickle_protocol``, ``_use_new_zipfile_serialization``,
    ``_disable_byteorder_record``) are accepted; the first two pickle objects of other types, which
    ``load(weights_only=True)``, the default, refuses as PyTorch's.
    """
    if not (_is_file(f) or isinstance(f, (str, os.PathLike))):
        raise TypeError(f"save: f must be a path or a binary file object, got {type(f).__name__}")
    if _format_for("save", f, format) == "safetensors":
        raw = _safetensors_bytes(obj, metadata)
        write = lambda out: out.write(raw)  # noqa: E731
    else:
        if metadata is not None:
            raise ValueError("save: metadata is stored by the safetensors format only")
        saver = _Saver(pickle_module, pickle_protocol)
        tree = {"format": FORMAT, "obj": _encode(obj, saver)}
        saver.storages()
        arrays = saver.arrays
        arrays["__tree__"] = np.frombuffer(json.dumps(tree).encode(), dtype=np.uint8)
        write = lambda out: np.savez(out, **arrays)  # noqa: E731
    if _is_file(f):
        write(f)
        return f
    path = os.fspath(f)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):  # (as PyTorch's save: a mistyped path creates no directories)
        raise RuntimeError(f"save: parent directory {folder} does not exist (saving to {path!r})")
    # One temporary name per target: a save killed before its rename leaves it behind, and the next save
    # truncates and reuses it. Created by open(), it gets the mode the umask gives, as torch.save's files.
    tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp")
    try:
        with open(tmp, "wb") as out:
            write(out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


# ---------------------------------------------------------------- safetensors
# safetensors' dtype names; the package's numpy loader lacks BF16, so the arrays are made here.
_ST_DTYPES = {"F64": backend.float64, "F32": backend.float32, "F16": backend.float16, "BF16": backend.bfloat16,
              "I64": backend.int64, "I32": backend.int32, "I16": backend.int16, "I8": backend.int8,
              "U8": backend.uint8, "BOOL": backend.bool_}


def _safetensors_bytes(obj, metadata):
    from safetensors.numpy import save as st_save

    if not isinstance(obj, dict):
        raise TypeError(f"save: the safetensors format stores a flat dict of name -> tensor (a state_dict), "
                        f"got {type(obj).__name__}")
    arrays = {}
    for k, v in obj.items():
        if not isinstance(k, str):
            raise TypeError(f"save: safetensors keys must be strings, got {type(k).__name__} ({k!r})")
        if isinstance(v, Tensor):
            v = v._data
        if not (isinstance(v, np.ndarray) or backend.is_cuda_array(v)):
            raise TypeError(f"save: the safetensors format stores tensors only, got {type(v).__name__} for {k!r}")
        arr = backend.to_device_bits(v, backend.CPU)
        arr = np.ascontiguousarray(arr).reshape(arr.shape)  # (ascontiguousarray makes a 0-d array 1-d)
        if arr.dtype not in _ST_DTYPES.values():
            raise TypeError(f"save: safetensors cannot store dtype {arr.dtype} ({k!r})")
        arrays[k] = arr
    if metadata is not None and not (isinstance(metadata, dict) and all(
            isinstance(a, str) and isinstance(b, str) for a, b in metadata.items())):
        raise TypeError("save: metadata must be a dict of str -> str")
    return st_save(arrays, metadata=metadata)


def _target_device(map_location, saved):
    """The device a tensor saved on ``saved`` ('cpu', 'cuda:0' ...) loads on, by PyTorch's ``map_location``
    forms: None (where it was saved), a device or its name, a dict from saved to target names (others stay
    where they were saved), or a callable ``f(storage, location)``, which may return the storage it was given
    (load on cpu, the ``lambda storage, loc: storage`` idiom), a device or its name, or None (where it was
    saved)."""
    if map_location is None:
        return backend.Device(saved)
    if isinstance(map_location, dict):
        return backend.Device(map_location.get(saved, map_location.get(str(saved), saved)))
    if callable(map_location) and not isinstance(map_location, (str, backend.Device)):
        given = _CpuStorage()
        out = map_location(given, saved)
        if out is given:
            return backend.Device("cpu")
        if out is None:  # PyTorch's fallback: where it was saved, as without map_location
            return backend.Device(saved)
        if isinstance(out, (str, backend.Device)):
            return backend.Device(out)
        raise _MapLocationError(f"load: map_location returned {type(out).__name__}; minifused takes the storage "
                                f"it was given back (load on cpu), or a device")
    return backend.Device(map_location)


class _UnpicklerError(Exception):
    """Carries an error of unpickling out of the checks of the file, to be raised as it is (as torch.load's)."""

    def __init__(self, error):
        super().__init__(error)
        self.error = error


class _MapLocationError(TypeError):
    """A map_location callable's result this loader cannot take (the caller's error, not the file's)."""


class _CpuStorage:
    """What a ``map_location`` callable is given as the storage: returned as it is, the tensor loads on cpu."""


def _check_map_location(map_location):
    """``map_location``'s form checked before the file is read (its errors are not the file's)."""
    targets = map_location.values() if isinstance(map_location, dict) else () if callable(map_location) and \
        not isinstance(map_location, (str, backend.Device)) else () if map_location is None else (map_location,)
    for t in targets:
        if not isinstance(t, (str, backend.Device)):
            raise TypeError(f"load: map_location must be None, a device (or its name), a dict of device names or "
                            f"a callable, got {type(t).__name__}")
        backend.Device(t)  # (a bad name raises here, naming itself)


def _load_safetensors(raw, map_location, name):
    from safetensors import deserialize

    try:
        entries = deserialize(raw)
    except Exception as e:  # the package raises its own SafetensorError
        raise CheckpointError(f"load: {name} is not a readable safetensors file (truncated or corrupt?): {e}") from e
    dev = _target_device(map_location, "cpu")
    out = {}
    for k, v in entries:
        if v["dtype"] not in _ST_DTYPES:
            raise CheckpointError(f"load: {name}: tensor {k!r} has dtype {v['dtype']}, which minifused has no dtype for")
        arr = np.frombuffer(v["data"], dtype=_ST_DTYPES[v["dtype"]]).reshape(v["shape"]).copy()
        out[k] = Tensor._from_array(backend.to_device_bits(arr, dev))
    return out


def _decode(node, archive, map_location, path, depth=0):
    if depth > MAX_DEPTH:
        raise CheckpointError(f"load: {path} is damaged: its tree nests deeper than {MAX_DEPTH} levels")
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):  # (numbered before its items, as save numbers it: a ref among them finds it)
        out = []
        archive.containers.append(out)
        out.extend(_decode(v, archive, map_location, path, depth + 1) for v in node)
        return out
    if not isinstance(node, dict) or len(node) == 0:
        raise CheckpointError(f"load: {path} is not a minifused checkpoint (unexpected node {str(node)[:80]})")
    if "same" in node:  # a tensor saved again: the same object
        return archive.tensors[node["same"]]
    if "ref" in node and len(node) == 1:  # a list or dict saved again
        return archive.containers[node["ref"]]
    if "tensor" in node:
        dev = _target_device(map_location, node["device"])
        if dev.type == "cuda" and not backend.cuda_available():
            raise RuntimeError(f"load: {path} holds tensors saved on {node['device']} but no CUDA device is "
                               f"usable here; pass map_location='cpu'")
        if "view" in node:
            data = _view(archive, node["tensor"], node["dtype"], node["view"], dev, path)
        else:
            data = backend.to_device(_get(archive, node["tensor"], node["dtype"], path), dev)
        kind = Parameter if node.get("parameter") else Tensor
        t = kind._from_array(data, bool(node.get("requires_grad")))
        archive.tensors.append(t)
        return t
    if "ndarray" in node:
        return _get(archive, node["ndarray"], node["dtype"], path)
    if "dict" in node or "odict" in node or "counter" in node:
        pairs = node.get("dict", node.get("odict", node.get("counter")))
        out = dict() if "dict" in node else Counter() if "counter" in node else OrderedDict()
        archive.containers.append(out)  # (before its items, as for a list)
        for k, v in pairs:
            key = _decode(k, archive, map_location, path, depth + 1)
            out[key] = _decode(v, archive, map_location, path, depth + 1)
        if "metadata" in node:
            out._metadata = _decode(node["metadata"], archive, map_location, path, depth + 1)
        return out
    if "namespace" in node:
        return argparse.Namespace(**_decode(node["namespace"], archive, map_location, path, depth + 1))
    if "dtype" in node and len(node) == 1:  # (a dtype object the user saved: theirs back)
        return backend.public_dtype(_named_dtype(node["dtype"], path))
    if "device" in node and len(node) == 1:
        return backend.Device(node["device"])
    if "path" in node and len(node) == 1 and isinstance(node["path"], str):
        return pathlib.Path(node["path"])
    if "tuple" in node:
        return tuple(_decode(v, archive, map_location, path, depth + 1) for v in node["tuple"])
    if "float" in node:
        return float(node["float"])
    if "pickle" in node and len(node) == 1:
        _member_header(archive, node["pickle"], path)
        try:
            return _unpickle(archive[node["pickle"]].tobytes(), archive.weights_only, archive.pickle_load_args,
                             map_location)
        except Exception as e:  # the unpickler's (or the user's classes') own error, raised as it is
            raise _UnpicklerError(e) from e
    if len(node) == 1 and ("set" in node or "frozenset" in node):
        kind = set if "set" in node else frozenset
        return kind(_decode(v, archive, map_location, path, depth + 1) for v in node[next(iter(node))])
    if len(node) == 1 and ("bytes" in node or "bytearray" in node):
        raw = base64.b64decode(node.get("bytes", node.get("bytearray")), validate=True)
        return raw if "bytes" in node else bytearray(raw)
    if "complex" in node:
        re, im = (_decode(v, archive, map_location, path, depth + 1) for v in node["complex"])
        return complex(re, im)
    if "size" in node:
        return Size(int(n) for n in node["size"])
    raise CheckpointError(f"load: {path} is not a minifused checkpoint (unknown node {sorted(node)[:5]})")


def _view(archive, name, dtype, view, dev, path):
    """The tensor's array: ``view``'s offset (bytes), shape and strides (bytes) over the stored array ``name``,
    which every tensor sharing it views (one copy of it per device)."""
    key = (name, str(dev))
    if key not in archive.storages:
        if not isinstance(name, str):
            raise CheckpointError(f"load: {path} is damaged: an array reference {name!r} is not a name")
        _member_header(archive, name, path)
        raw = np.ascontiguousarray(archive[name]).reshape(-1)
        raw = raw.view(np.uint16) if raw.dtype.kind == "V" else raw  # (bfloat16 views as its bits)
        archive.storages[key] = backend.to_device(raw.view(np.uint8), dev)
    raw = archive.storages[key]
    kind = _named_dtype(dtype, path)
    offset, shape, strides = int(view["offset"]), tuple(map(int, view["shape"])), tuple(map(int, view["strides"]))
    lo = offset + sum(s * (n - 1) for n, s in zip(shape, strides) if s < 0)
    hi = offset + sum(s * (n - 1) for n, s in zip(shape, strides) if s > 0) + kind.itemsize
    if len(shape) != len(strides) or min(shape, default=1) < 0 or (min(shape, default=1) > 0 and (
            lo < 0 or hi > raw.nbytes)):  # (checked here: CuPy's views do not check)
        raise CheckpointError(f"load: {path} is damaged: a view of {name!r} (offset {offset}, shape {shape}, "
                              f"strides {strides}) reaches outside its {raw.nbytes} bytes")
    if backend.is_cuda_array(raw):
        return backend.cupy.ndarray(shape, kind, memptr=raw.data + offset, strides=strides)
    return np.ndarray(shape, kind, buffer=raw, offset=offset, strides=strides)  # (it checks the bounds)


def _named_dtype(name, path):
    if name in _SPECIAL_DTYPES:
        return _SPECIAL_DTYPES[name][0]
    try:
        return np.dtype(name)
    except TypeError:
        raise CheckpointError(f"load: {path} is damaged: unknown dtype {name!r}") from None


def _member_header(archive, name, path):
    """The (shape, dtype) an array's ``.npy`` header declares, checked against the bytes its archive member
    holds, before anything of that size is allocated."""
    try:
        info = archive.zip.getinfo(name + ".npy")
    except KeyError:
        raise CheckpointError(f"load: {path} is damaged: array {name!r} is missing") from None
    with archive.zip.open(info) as member:
        version = np.lib.format.read_magic(member)
        if version not in ((1, 0), (2, 0)):
            raise CheckpointError(f"load: {path}: array {name!r} has .npy format version {version}, expected 1.0 "
                                  f"or 2.0")
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(member)
        header = member.tell()
    if dtype.hasobject:
        raise CheckpointError(f"load: {path}: array {name!r} holds Python objects (dtype {dtype}), which minifused "
                              f"never unpickles")
    need = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if need > info.file_size - header:
        raise CheckpointError(f"load: {path} is damaged: array {name!r} declares shape {shape} ({need} bytes) but "
                              f"its entry holds {info.file_size - header} bytes")
    return shape, dtype


def _get(archive, name, dtype, path):
    if not isinstance(name, str) or not isinstance(dtype, str):
        raise CheckpointError(f"load: {path} is damaged: an array reference {name!r} / {dtype!r} is not a name")
    _member_header(archive, name, path)
    data = archive[name]
    if dtype in _SPECIAL_DTYPES:
        data = data.view(_SPECIAL_DTYPES[dtype][0])
    elif str(data.dtype) != dtype:
        raise CheckpointError(f"load: {path} is damaged: array {name!r} has dtype {data.dtype}, the tree says {dtype}")
    return data


_PICKLE_LOAD_ARGS = ("encoding", "errors", "fix_imports")  # what torch.load passes on to its unpickler


def load(f, map_location=None, weights_only=None, format=None, mmap=None, **pickle_load_args):
    """Read what :func:`save` wrote (either format, told apart by content) from ``f``, a path or a
    binary file object. npz tensors go back to the device they were saved from, safetensors ones
    to cpu; ``map_location`` (a device, a dict of device names or a callable, as PyTorch's: see
    :func:`_target_device`) overrides both. Objects :func:`save` pickled (other than tensors, containers,
    numbers, strings ...) are unpickled with ``weights_only=False`` only, or, as PyTorch's weights-only load
    (the default), if :func:`add_safe_globals` allows their classes; else ``pickle.UnpicklingError``. ``mmap`` is
    accepted for PyTorch code; so are the unpickler's
    keywords torch.load passes on (``encoding='latin1'`` for Python 2 checkpoints, ``errors``, ``fix_imports``)."""
    unknown = sorted(set(pickle_load_args) - set(_PICKLE_LOAD_ARGS))
    if unknown:
        raise TypeError(f"load() got unexpected keyword argument(s) {', '.join(map(repr, unknown))}; besides its own, "
                        f"it takes the unpickler's {', '.join(_PICKLE_LOAD_ARGS)}, as torch.load")
    if _is_file(f):
        name = getattr(f, "name", "the file object")
        raw = f.read()
        if not isinstance(raw, bytes):
            raise TypeError(f"load: the file object must be opened in binary mode, read() gave {type(raw).__name__}")
    elif isinstance(f, (str, os.PathLike)):
        name = path = os.fspath(f)
        if not os.path.exists(path):
            raise FileNotFoundError(f"load: no such file: {path}")
        with open(path, "rb") as fh:
            raw = fh.read()
    else:
        raise TypeError(f"load: f must be a path or a binary file object, got {type(f).__name__}")
    _check_map_location(map_location)
    if format is not None and format not in ("safetensors", "npz"):
        raise ValueError(f"load: format must be 'safetensors', 'npz' or None, got {format!r}")
    if format is None:  # a zip archive starts "PK"; safetensors with an 8-byte header length, then JSON
        format = "safetensors" if raw[:2] != b"PK" and raw[8:9] == b"{" else "npz"
    if format == "safetensors":
        return _load_safetensors(raw, map_location, name)
    try:
        archive = np.load(io.BytesIO(raw), allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):  # a bare .npy array
            raise ValueError(f"a single {type(archive).__name__}, not an archive")
        if "__tree__" not in archive.files:
            if any(n.endswith("data.pkl") for n in archive.files):
                raise ValueError("it is a PyTorch pickle checkpoint (torch.save), which minifused does not "
                                 "unpickle; save the weights with safetensors.torch.save_file(model.state_dict(), "
                                 "'model.safetensors') and load that file")
            raise ValueError("no __tree__ entry")
        _member_header(archive, "__tree__", name)
        tree = json.loads(archive["__tree__"].tobytes().decode())
    except CheckpointError:
        raise
    except (ValueError, OSError, zipfile.BadZipFile, EOFError, UnicodeDecodeError, RecursionError) as e:
        raise CheckpointError(f"load: {name} is not a readable minifused checkpoint (truncated or corrupt?): "
                              f"{type(e).__name__ if isinstance(e, RecursionError) else ''}{e}") from e
    if not isinstance(tree, dict) or tree.get("format") != FORMAT:
        raise CheckpointError(f"load: {name} has format {tree.get('format') if isinstance(tree, dict) else None!r}, "
                              f"expected {FORMAT!r}")
    archive.weights_only = weights_only is not False  # (PyTorch's default since 2.6)
    archive.pickle_load_args = pickle_load_args
    # what "same" and "ref" nodes refer to; the stored arrays views share
    archive.tensors, archive.containers, archive.storages = [], [], {}
    try:
        return _decode(tree.get("obj"), archive, map_location, name)
    except (CheckpointError, _MapLocationError):
        raise
    except _UnpicklerError as e:
        raise e.error from None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OSError, zipfile.BadZipFile, EOFError,
            RecursionError) as e:  # a tree or an array entry that does not hold what it claims (e.g. a CRC error)
        raise CheckpointError(f"load: {name} is damaged: {type(e).__name__}: {e}") from e


# ---------------------------------------------------------------- PyTorch's weights_only allowlist
# What a weights-only unpickler resolves besides the allowlist: what pickles of tensors, arrays and the builtins
# PyTorch allows refer to (named, never imported unless listed).
_ALLOWED = {"minifused.tensor._rebuild_tensor", "minifused.tensor.Tensor", "minifused.tensor.Size",
            "minifused.nn.param.Parameter", "numpy.ndarray", "numpy.dtype", "numpy._core.multiarray._reconstruct",
            "numpy.core.multiarray._reconstruct", "numpy._core.multiarray.scalar", "numpy.core.multiarray.scalar",
            "collections.OrderedDict", "collections.Counter", "builtins.set", "builtins.frozenset",
            "builtins.complex", "builtins.bytearray", "_codecs.encode", "ml_dtypes.bfloat16"}


class _WeightsOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        # Python 2 names, which protocol 2 (torch.save's) writes: __builtin__.slice is builtins.slice
        module, name = _compat_pickle.NAME_MAPPING.get((module, name), (module, name))
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        full = f"{module}.{name}"
        if full in _ALLOWED:
            return super().find_class(module, name)
        for item in _safe_globals:
            obj, named = item if isinstance(item, tuple) else (item, f"{item.__module__}.{item.__qualname__}")
            if named == full:
                return obj
        raise pickle.UnpicklingError(
            f"Weights only load failed. This file can still be loaded, to do so you have two options, do those "
            f"steps only if you trust the source of the checkpoint.\n\t(1) Re-running `load` with `weights_only` set "
            f"to `False` will likely succeed, but it can result in arbitrary code execution. Do it only if you got "
            f"the file from a trusted source.\n\t(2) Alternatively, to load with `weights_only=True` please check the "
            f"recommended steps in the following error message.\n\tWeightsUnpickler error: Unsupported global: "
            f"GLOBAL {full} was not an allowed global by default. Please use "
            f"`minifused.serialization.add_safe_globals([{name}])` or the "
            f"`minifused.serialization.safe_globals([{name}])` context manager to allowlist this global if you "
            f"trust this class/function.")


def _unpickle(raw, weights_only, kwargs, map_location=None):
    """An object :func:`save` pickled: by pickle with ``weights_only=False``, else by the restricted unpickler; the
    tensors inside it (a whole model's) load where ``map_location`` says, as PyTorch's."""
    base = _WeightsOnlyUnpickler if weights_only else pickle.Unpickler

    class Unpickler(base):
        def find_class(self, module, name):
            found = super().find_class(module, name)
            return functools.partial(_rebuild_mapped, map_location) if found is _rebuild_tensor else found

    return Unpickler(io.BytesIO(raw), **kwargs).load()


def _rebuild_mapped(map_location, cls, data, requires_grad):
    """A pickled tensor rebuilt on its ``map_location`` target."""
    saved = str(backend.device_of(data))
    dev = _target_device(map_location, saved)
    if dev.type == "cuda" and not backend.cuda_available():
        raise RuntimeError(f"load: a pickled object holds tensors saved on {saved} but no CUDA device is usable "
                           f"here; pass map_location='cpu'")
    return _rebuild_tensor(cls, backend.to_device(data, dev), requires_grad)

_safe_globals = {}  # what add_safe_globals was given (as a dict: insertion order, set semantics)


def add_safe_globals(safe_globals):
    """``torch.serialization.add_safe_globals``: mark classes / functions (or ``(obj, "module.name")`` pairs)
    as safe for the ``weights_only`` unpickler: :func:`load` (weights-only by default) then takes back objects of
    these classes that :func:`save` pickled, as PyTorch's."""
    _safe_globals.update(dict.fromkeys(safe_globals))


def get_safe_globals():
    """What :func:`add_safe_globals` (and an open :class:`safe_globals` block) marked safe, as a new list."""
    return list(_safe_globals)


def clear_safe_globals():
    """Forget everything :func:`add_safe_globals` marked safe."""
    _safe_globals.clear()


class safe_globals:  # noqa: N801 - PyTorch's name
    """``with safe_globals([...]):`` marks the globals safe inside the block and removes them on exit (also ones
    that were marked before it, as PyTorch's)."""

    def __init__(self, safe_globals):
        self.safe_globals = safe_globals

    def __enter__(self):
        add_safe_globals(self.safe_globals)

    def __exit__(self, *exc):
        for item in self.safe_globals:
            _safe_globals.pop(item, None)
