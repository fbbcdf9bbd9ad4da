"""kernels.Prepared lays out a kernel's parameter buffer once and fills the per-call values with one pack: the
kernelParams table it hands the driver must point at every parameter's bytes (no GPU: the launch is replaced)."""
import ctypes
import struct

import numpy as np
import pytest

pytest.importorskip("cupy")

from minifused import kernels  # noqa: E402
from minifused.kernels import ARG, F32, REF, Prepared  # noqa: E402


class _Kernel:
    name, ptr = "stand_in", 0x1234


class _Stream:
    ptr = 77


def _launched(params, values, monkeypatch):
    """(the table, the stream) the launch of ``params`` with ``values`` passes to the driver."""
    prepared = Prepared(_Kernel(), (3, 2), (128,), params, smem=64)
    seen = []
    prepared._launch = lambda stream, table, extra: seen.append((stream, table, extra))
    monkeypatch.setattr(kernels, "_current_stream", lambda: _Stream())
    prepared(*values)
    (stream, table, extra), = seen
    return prepared, table, stream, extra


def _param(table, i, size):
    address = struct.unpack("<Q", ctypes.string_at(table + 8 * i, 8))[0]
    return address, ctypes.string_at(address, size)


def test_prepared_table_points_at_every_parameter(monkeypatch):
    map_a, map_b = ctypes.create_string_buffer(b"A" * 128), ctypes.create_string_buffer(b"B" * 128)
    params = (REF, REF, ARG, np.int32(-7), F32, ARG, np.float32(2.5), np.int64(1 << 40))
    values = (ctypes.addressof(map_a), ctypes.addressof(map_b), 0x7F00DEADBEEF, 0.1, -3)
    prepared, table, stream, extra = _launched(params, values, monkeypatch)
    assert (stream, extra) == (77, 0)
    assert prepared._dims == (3, 2, 1, 128, 1, 1, 64)
    assert _param(table, 0, 128) == (ctypes.addressof(map_a), b"A" * 128)  # a REF: the struct itself
    assert _param(table, 1, 128)[1] == b"B" * 128
    assert struct.unpack("<q", _param(table, 2, 8)[1])[0] == 0x7F00DEADBEEF
    assert struct.unpack("<i", _param(table, 3, 4)[1])[0] == -7
    assert struct.unpack("<f", _param(table, 4, 4)[1])[0] == np.float32(0.1)
    assert struct.unpack("<q", _param(table, 5, 8)[1])[0] == -3
    assert struct.unpack("<f", _param(table, 6, 4)[1])[0] == 2.5
    assert struct.unpack("<q", _param(table, 7, 8)[1])[0] == 1 << 40
    # a second call rewrites the per-call values and leaves the constants
    prepared._launch = lambda *a: None
    prepared(ctypes.addressof(map_b), ctypes.addressof(map_a), 5, 1.5, 6)
    assert _param(table, 0, 1)[1] == b"B" and _param(table, 1, 1)[1] == b"A"
    assert [struct.unpack("<q", _param(table, i, 8)[1])[0] for i in (2, 5)] == [5, 6]
    assert struct.unpack("<f", _param(table, 4, 4)[1])[0] == 1.5
    assert struct.unpack("<i", _param(table, 3, 4)[1])[0] == -7


def test_prepared_refuses_bad_parameters():
    with pytest.raises(TypeError, match="REF parameters must be adjacent and come before"):
        Prepared(_Kernel(), (1,), (32,), (ARG, REF))
    with pytest.raises(TypeError, match="parameter 1 must be ARG, F32, REF"):
        Prepared(_Kernel(), (1,), (32,), (ARG, 3.0))


def test_prepared_refuses_a_wrong_number_of_values(monkeypatch):
    prepared = Prepared(_Kernel(), (1,), (32,), (ARG, ARG))
    prepared._launch = lambda *a: pytest.fail("launched with a wrong number of values")
    monkeypatch.setattr(kernels, "_current_stream", lambda: _Stream())
    with pytest.raises(struct.error):
        prepared(1)
